# Cython declarations of runtime/batch.h (the contract is stated in the header).

from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t

cdef extern from "runtime/batch.h":
    ctypedef struct sc_column:
        int64_t null_count
        void *values
        uint8_t *validity
        int32_t *offsets
        char *data
    ctypedef struct sc_batch:
        uint64_t serial
        uint64_t first_row
        int64_t nrows
        int64_t capacity
        int32_t ncols
        uint8_t eos
        uint8_t lean
        sc_batch *next
        sc_column *cols
    void sc_batch_release(sc_batch *b) nogil
    int64_t sc_colbuf_trim(uint64_t age_ns) nogil
    int64_t sc_colbuf_cached() nogil
    void sc_batch_release_chain(sc_batch *b) nogil
