# Cython declarations of runtime/scheduler.h (the contract is stated in the header).

from libc.stdint cimport int64_t, uint32_t, uint64_t

cdef extern from "runtime/scheduler.h":
    ctypedef enum sc_op_kind:
        SC_OP_STATELESS, SC_OP_PARTITIONED, SC_OP_STATEFUL
    ctypedef struct sc_sched_config:
        int policy
        uint64_t slice_ns
    ctypedef struct sc_sched:
        pass
    ctypedef struct sc_sched_op_stats:
        double cost_ns, selectivity
        int64_t queued
        uint32_t workers, max_workers
        uint64_t items_in, items_out, ns_total, grants
    int sc_sched_stats(const sc_sched *s, uint32_t op, sc_sched_op_stats *out) nogil
