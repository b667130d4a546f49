# Cython declarations of exec/ops_speculate.h (the contract is stated in the header).

from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from runtime.batch cimport sc_batch
from exec.exec cimport sc_op_base

cdef extern from "exec/ops_speculate.h":
    ctypedef void (*sc_txn_kernel)(void *tx, const void **vals, const uint8_t **oks, int64_t r, void *out,
                                   uint8_t *out_ok) noexcept nogil
    ctypedef struct sc_spec_config:
        uint32_t workers
        uint32_t horizon
        uint32_t max_horizon
    ctypedef struct sc_spec_stats:
        uint64_t commits
        uint64_t aborts
        uint32_t horizon
        uint32_t workers
        bint adaptive
        double horizon_mean
        int64_t keys
        int64_t store_bytes
    int sc_op_speculate_create(void **st, const sc_op_base *base, sc_txn_kernel kernel, const int32_t *args,
                               const char *kinds, int32_t nargs, const sc_spec_config *cfg) nogil
    int sc_op_speculate_run(void *st, sc_batch *inp, sc_batch **out) nogil
    void sc_op_speculate_destroy(void *st) nogil
    void sc_op_speculate_cancel(void *st) nogil
    void sc_op_speculate_stats(void *st, sc_spec_stats *out) nogil
