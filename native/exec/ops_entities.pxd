# Cython declarations of exec/ops_entities.h (the contract is stated in the header).

from libc.stdint cimport int32_t, int64_t, uint64_t
from runtime.batch cimport sc_batch
from exec.exec cimport sc_op_base

cdef extern from "exec/ops_entities.h":
    ctypedef struct sc_entities:
        pass
    int sc_entities_create(sc_entities **out, bint is_float, double initial_f, int64_t initial_i,
                           bint overdraft, bint serial) nogil
    void sc_entities_destroy(sc_entities *e) nogil
    int64_t sc_entities_count(const sc_entities *e) nogil
    uint64_t sc_entities_waits(const sc_entities *e) nogil
    int sc_op_order_create(void **st, const sc_op_base *base, sc_entities *ents, const int32_t *keys,
                           int32_t amount, const char *const *reasons) nogil
    int sc_op_order_run(void *st, sc_batch *inp, sc_batch **out) nogil
    void sc_op_order_destroy(void *st) nogil
    int sc_op_apply_create(void **st, const sc_op_base *base, sc_entities *ents, int32_t amount,
                           const char *rejected) nogil
    int sc_op_apply_run(void *st, sc_batch *inp, sc_batch **out) nogil
    void sc_op_apply_destroy(void *st) nogil
