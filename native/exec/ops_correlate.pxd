# Cython declarations of exec/ops_correlate.h (the contract is stated in the header).

from libc.stdint cimport int32_t, int64_t
from runtime.batch cimport sc_batch
from exec.exec cimport sc_op_base

cdef extern from "exec/ops_correlate.h":
    ctypedef struct sc_corr_agg:
        int32_t fn, port, col
    ctypedef struct sc_corr_spec:
        int32_t nports
        const int32_t *width
        const int32_t *keys
        int32_t nkeys
        const int32_t *time_col
        int64_t over, lateness
        const sc_corr_agg *aggs
        int32_t naggs
        const int32_t *out_kind
        const int32_t *out_arg
        const char *dead_reason
    int sc_op_correlate_create(void **st, const sc_op_base *base, const sc_corr_spec *spec) nogil
    int sc_op_correlate_run(void *st, sc_batch *inp, sc_batch **out) nogil
    void sc_op_correlate_destroy(void *st) nogil
