# Cython declarations of exec/ops_join.h (the contract is stated in the header).

from libc.stdint cimport int32_t, int64_t
from runtime.batch cimport sc_batch
from exec.exec cimport sc_op_base

cdef extern from "exec/ops_join.h":
    ctypedef struct sc_join_spec:
        int32_t width[2]
        const int32_t *keys[2]
        int32_t nkeys
        int32_t time_col[2]
        int64_t within, lateness
        const int32_t *outs
        const char *dead_reason
    int sc_op_join_create(void **st, const sc_op_base *base, const sc_join_spec *spec) nogil
    int sc_op_join_run(void *st, sc_batch *inp, sc_batch **out) nogil
    void sc_op_join_destroy(void *st) nogil
