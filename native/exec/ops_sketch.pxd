# Cython declarations of exec/ops_sketch.h (the contract is stated in the header).

from libc.stdint cimport int32_t, int64_t, uint8_t
from runtime.batch cimport sc_batch
from exec.exec cimport sc_op_base

cdef extern from "exec/ops_sketch.h":
    ctypedef struct sc_sketch_spec:
        int32_t kind
        int32_t col
        int32_t param
    int sc_op_sketch_create(void **st, const sc_op_base *base, const int32_t *keys, int32_t nkeys,
                            const sc_sketch_spec *specs, int32_t nspecs) nogil
    int sc_op_sketch_run(void *st, sc_batch *inp, sc_batch **out) nogil
    void sc_op_sketch_destroy(void *st) nogil
    int64_t sc_op_sketch_nkeys(void *st) nogil
    int sc_op_sketch_keys(void *st, sc_batch **out) nogil
    int sc_op_sketch_bytes(void *st, int64_t key, int32_t spec, uint8_t **buf, size_t *len) nogil
    int sc_op_sketch_summary(void *st, int64_t key, int32_t spec, double *out) nogil
