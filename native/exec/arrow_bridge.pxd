# Cython declarations of exec/arrow_bridge.h (the contract is stated in the header).

from libc.stdint cimport int32_t, int64_t, uint8_t
from runtime.batch cimport sc_batch
from exec.exec cimport sc_schema

cdef extern from "exec/arrow_bridge.h":
    struct ArrowSchema:
        void (*release)(ArrowSchema *) nogil
    struct ArrowArray:
        int64_t length
        void (*release)(ArrowArray *) nogil
    int sc_arrow_import(const ArrowSchema *schema, const ArrowArray *array, int64_t offset, int64_t n,
                        const sc_schema *target, sc_batch *out, int64_t seq0) nogil
    int sc_arrow_export(sc_batch *b, const sc_schema *s, ArrowSchema *schema, ArrowArray *array) nogil
    struct ArrowArrayStream:
        void (*release)(ArrowArrayStream *) nogil
    int sc_arrow_export_stream(sc_batch **batches, int32_t n, const sc_schema *s, int32_t skip,
                               ArrowArrayStream *out) nogil
    ctypedef struct sc_extbuf:
        uint8_t shared
    void sc_extbuf_unref(sc_extbuf *e) nogil
    void sc_extbuf_ref(sc_extbuf *e) nogil
    int sc_arrow_import_ref(const ArrowSchema *schema, const ArrowArray *array, int64_t offset, int64_t n,
                            const sc_schema *target, sc_batch *out, int64_t seq0, sc_extbuf *ext) nogil
    int sc_arrow_hold_create(sc_extbuf **out, ArrowArray *array) nogil
    const ArrowArray *sc_arrow_hold_array(const sc_extbuf *e) nogil
    int sc_arrow_hold_defer(sc_extbuf *hold, ArrowSchema *schema, const sc_schema *target,
                            const uint8_t *keep) nogil
    int sc_arrow_defer(sc_batch *b, sc_extbuf *hold, int64_t offset, int64_t n, int64_t seq0) nogil
    int64_t sc_arrow_reclaim() nogil
