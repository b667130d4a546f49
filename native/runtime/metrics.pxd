# Cython declarations of runtime/metrics.h (the contract is stated in the header).

from libc.stdint cimport int64_t, uint32_t, uint64_t

cdef extern from "runtime/metrics.h":
    ctypedef struct sc_metrics:
        pass
    ctypedef struct sc_latency_summary:
        uint64_t count, p50_ns, p99_ns, max_ns
        double mean_ns
    ctypedef struct sc_op_counters:
        uint64_t rows_in, rows_out, batches_in, batches_out, ns
        int64_t queue_depth
        uint32_t workers
    int sc_metrics_snapshot(const sc_metrics *m, sc_op_counters *ops, uint32_t nops, sc_latency_summary *lat) nogil
