# Cython declarations of exec/pacer.h (the contract is stated in the header).

from libc.stdint cimport int64_t, uint64_t
from exec.arrow_bridge cimport sc_extbuf
from exec.exec cimport sc_schema
from exec.program cimport sc_prog

cdef extern from "exec/pacer.h":
    ctypedef struct sc_pacer:
        pass
    int sc_pacer_create(sc_pacer **out, sc_prog *p, const sc_schema *inp, bint lean, double rate,
                        int64_t batch_size, int64_t burst, uint64_t origin_ns, uint64_t catchup_ns) nogil
    int sc_pacer_submit(sc_pacer *pc, sc_extbuf *hold, int64_t offset, int64_t n, int64_t seq0) nogil
    int sc_pacer_wait(sc_pacer *pc, int64_t timeout_ns, int64_t *pushed, int *idle) nogil
    int64_t sc_pacer_pushed(sc_pacer *pc, int64_t *in_flight) nogil
    int sc_pacer_halt(sc_pacer *pc, int64_t *pushed) nogil
    void sc_pacer_destroy(sc_pacer *pc) nogil
    uint64_t sc_paced_due(uint64_t origin_ns, int64_t row, int64_t group, double rate) nogil
