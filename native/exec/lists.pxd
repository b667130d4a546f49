# Cython declarations of exec/lists.h (the contract is stated in the header).

from libc.stdint cimport int32_t, int64_t, uint8_t
from runtime.batch cimport sc_batch, sc_column
from exec.exec cimport sc_op_base

cdef extern from "exec/lists.h":
    ctypedef struct sc_list_decoded:
        int64_t n, m
        int64_t *offsets
        uint8_t *validity
        void *values
        int64_t *str_offsets
        char *str_data
        int64_t str_bytes
    int sc_list_decode(const sc_column *c, int64_t n, uint8_t inner, sc_list_decoded *out) nogil
    void sc_list_decoded_free(sc_list_decoded *d) nogil
    int sc_op_explode_create(void **st, const sc_op_base *base, const int32_t *cols, int32_t ncols,
                             const char *reason) nogil
    int sc_op_explode_run(void *st, sc_batch *inp, sc_batch **out) nogil
    void sc_op_explode_destroy(void *st) nogil
