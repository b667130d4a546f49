# Cython declarations of runtime/pool.h (the contract is stated in the header).

from libc.stdint cimport uint8_t, uint32_t, uint64_t
from runtime.batch cimport sc_batch
from runtime.scheduler cimport sc_sched_config

cdef extern from "runtime/pool.h":
    ctypedef int (*sc_op_run_fn)(void *op_state, sc_batch *inp, sc_batch **out) nogil
    ctypedef struct sc_pool_config:
        uint32_t workers
        sc_sched_config sched
        int reorder
        int keyed
        uint32_t partitions
        uint32_t partition_capacity
        uint32_t window
        uint32_t marker_every
        uint64_t idle_sleep_ns
        uint8_t unordered
