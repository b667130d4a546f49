# Cython declarations of exec/arrow_columns.h (the contract is stated in the header).

from libc.stdint cimport int32_t, uint8_t
from exec.arrow_bridge cimport ArrowArrayStream, sc_extbuf
from exec.exec cimport sc_schema

cdef extern from "exec/arrow_columns.h":
    ctypedef struct sc_arrow_columns:
        pass
    int sc_arrow_columns_create(sc_arrow_columns **out, ArrowArrayStream *streams, int32_t k,
                                const sc_schema *target, const uint8_t *keep, uint8_t shared) nogil
    int sc_arrow_columns_next(sc_arrow_columns *c, sc_extbuf **hold) nogil
    const char *sc_arrow_columns_error(const sc_arrow_columns *c) nogil
    void sc_arrow_columns_free(sc_arrow_columns *c) nogil
