# Cython declarations of exec/ops_state.h (the contract is stated in the header).

from libc.stdint cimport int32_t, int64_t, uint8_t
from runtime.batch cimport sc_batch
from exec.exec cimport sc_op_base

cdef extern from "exec/ops_state.h":
    enum: SC_PUBLISH_COMPLETE
    ctypedef struct sc_agg_spec:
        int32_t fn
        int32_t arg
        uint8_t lt
    ctypedef struct sc_out_col:
        int32_t kind
        int32_t arg
    ctypedef struct sc_keyed_spec:
        const int32_t *keys
        int32_t nkeys
        const sc_agg_spec *aggs
        int32_t naggs
        const sc_out_col *outs
        int32_t publish
    ctypedef struct sc_window_spec:
        sc_keyed_spec keyed
        int32_t kind
        int32_t time_col
        int64_t size, every, lateness
    int sc_op_aggregate_create(void **st, const sc_op_base *base, const sc_keyed_spec *spec) nogil
    int sc_op_aggregate_run(void *st, sc_batch *inp, sc_batch **out) nogil
    void sc_op_aggregate_destroy(void *st) nogil
    int sc_op_topk_create(void **st, const sc_op_base *base, const int32_t *keys, int32_t nkeys, int32_t by,
                          int32_t k, bint descending, const sc_out_col *outs) nogil
    int sc_op_topk_run(void *st, sc_batch *inp, sc_batch **out) nogil
    void sc_op_topk_destroy(void *st) nogil
    int sc_op_dedup_create(void **st, const sc_op_base *base, const int32_t *keys, int32_t nkeys) nogil
    int sc_op_dedup_run(void *st, sc_batch *inp, sc_batch **out) nogil
    void sc_op_dedup_destroy(void *st) nogil
    int sc_op_window_create(void **st, const sc_op_base *base, const sc_window_spec *spec) nogil
    int sc_op_window_run(void *st, sc_batch *inp, sc_batch **out) nogil
    void sc_op_window_destroy(void *st) nogil
