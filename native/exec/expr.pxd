# Cython declarations of exec/expr.h (the contract is stated in the header).

from libc.stdint cimport int32_t, int64_t, uint8_t
from runtime.batch cimport sc_batch
from exec.exec cimport sc_op_base

cdef extern from "exec/expr.h":
    ctypedef struct sc_enode:
        int32_t op
        uint8_t lt
        int32_t a, b, c
        bint is_null
        int64_t i
        double f
        const char *s
        int32_t slen
        int32_t nlist
        const int64_t *ilist
        const double *flist
        const char *const *slist
        const int32_t *slens
        bint list_has_null
    int sc_op_filter_create(void **st, const sc_op_base *base, const sc_enode *pred, int32_t npred) nogil
    int sc_op_project_create(void **st, const sc_op_base *base, const int32_t *src, int32_t nout,
                             const sc_enode *const *exprs, const int32_t *nnodes, int32_t nexprs) nogil
    int sc_op_filter_run(void *st, sc_batch *inp, sc_batch **out) nogil
    int sc_op_project_run(void *st, sc_batch *inp, sc_batch **out) nogil
    void sc_op_filter_destroy(void *st) nogil
    void sc_op_project_destroy(void *st) nogil
    int sc_op_fused_create(void **st, sc_op_base ***bases, void *const *parts, const uint8_t *kinds,
                           int32_t nparts) nogil
    int sc_op_fused_run(void *st, sc_batch *inp, sc_batch **out) nogil
    void sc_op_fused_destroy(void *st) nogil
