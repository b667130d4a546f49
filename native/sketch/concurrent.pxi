# The concurrent sketch framework (native/sketch/concurrent.h, seed 004 Algorithm 2) as the
# sketch modules see it; each module declares its own vtable next to its sketch's header.
cdef extern from "sketch/concurrent.h" nogil:
    ctypedef struct sc_sketch_vtable:
        pass
    ctypedef struct sc_concurrent:
        pass
    ctypedef struct sc_conc_config:
        const sc_sketch_vtable *vt
        const void *global_config
        const void *local_config
        uint32_t writers
        uint64_t buffer
        uint64_t eager_limit
    ctypedef struct sc_conc_stats:
        uint64_t seq
        uint64_t n_global
        uint64_t propagations
        uint64_t eager_merges
        int eager
    int sc_conc_create(sc_concurrent **out, const sc_conc_config *cfg)
    void sc_conc_destroy(sc_concurrent *c)
    int sc_conc_close(sc_concurrent *c)
    int sc_conc_writer_enter(sc_concurrent *c, uint32_t w)
    void sc_conc_writer_exit(sc_concurrent *c, uint32_t w)
    void *sc_conc_local(sc_concurrent *c, uint32_t w)
    uint64_t sc_conc_room(sc_concurrent *c, uint32_t w)
    int sc_conc_added(sc_concurrent *c, uint32_t w, uint64_t k)
    int sc_conc_flush(sc_concurrent *c)
    int sc_conc_snapshot(sc_concurrent *c, void **out)
    void sc_conc_summary(const sc_concurrent *c, uint64_t *out, sc_conc_stats *stats)
    uint64_t sc_conc_relaxation(const sc_concurrent *c)


# ---- what every concurrent sketch class shares (messages name the class) ----

cdef int _conc_check_config(str cls, int writers, buffer) except -1:
    if not (1 <= writers <= 256):
        raise ValueError(f"{cls}: writers must be in [1, 256], got {writers}")
    if int(buffer) < 1:
        raise ValueError(f"{cls}: buffer must be >= 1, got {buffer}")
    return 0


cdef int _conc_check_writer(str cls, int writer_id, uint32_t writers) except -1:
    if writer_id < 0 or writer_id >= <int>writers:
        raise ValueError(f"{cls}.update_batch: writer_id {writer_id} not in [0, {writers})")
    return 0


cdef int _conc_flush(sc_concurrent *c, str what) except -1:
    cdef int rc
    with nogil:
        rc = sc_conc_flush(c)
    check_status(rc, what)
    return 0


cdef int _conc_close(sc_concurrent *c, str what) except -1:
    cdef int rc
    with nogil:
        rc = sc_conc_close(c)
    check_status(rc, what)
    return 0
