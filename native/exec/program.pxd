# Cython declarations of exec/program.h (the contract is stated in the header).

from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t
from runtime.batch cimport sc_batch
from runtime.scheduler cimport sc_op_kind, sc_sched
from runtime.metrics cimport sc_metrics
from runtime.pool cimport sc_op_run_fn, sc_pool_config
from exec.exec cimport sc_op_base, sc_schema, sc_side, sc_step_counters

cdef extern from "exec/program.h":
    ctypedef struct sc_prog:
        pass
    ctypedef void (*sc_op_destroy_fn)(void *state) nogil
    int sc_prog_create(sc_prog **out, uint32_t nsteps, uint32_t max_out) nogil
    void sc_prog_destroy(sc_prog *p) nogil
    sc_step_counters *sc_prog_counters(sc_prog *p, uint32_t step) nogil
    int sc_prog_add(sc_prog *p, const char *name, sc_op_kind kind, sc_op_run_fn run, sc_op_destroy_fn destroy,
                    void *state, sc_op_base *base) nogil
    int sc_prog_add_bases(sc_prog *p, const char *name, sc_op_kind kind, sc_op_run_fn run,
                          sc_op_destroy_fn destroy, void *state, sc_op_base **bases, uint32_t nbases) nogil
    int sc_prog_add_keyed(sc_prog *p, const char *name, sc_op_run_fn run, sc_op_destroy_fn destroy,
                          void **states, sc_op_base **bases, uint32_t partitions, const int32_t *keys,
                          int32_t nkeys, const sc_schema *inp, const sc_schema *out) nogil
    int sc_prog_set_publish(sc_prog *p, uint64_t interval_ns, uint64_t max_ns) nogil
    uint32_t sc_prog_nops(const sc_prog *p) nogil
    const char *sc_prog_op_name(const sc_prog *p, uint32_t op) nogil
    int64_t sc_prog_state_size(const sc_prog *p, uint32_t op) nogil
    int sc_prog_start(sc_prog *p, const sc_pool_config *cfg) nogil
    int sc_prog_push(sc_prog *p, sc_batch *b, int64_t timeout_ns) nogil
    int sc_prog_finish(sc_prog *p, int64_t timeout_ns) nogil
    int sc_prog_take(sc_prog *p, int64_t timeout_ns, sc_batch **b) nogil
    bint sc_prog_take_due(sc_prog *p) nogil
    int sc_prog_set_coalesce(sc_prog *p, const sc_schema *out, int64_t chunk_rows) nogil
    int sc_prog_pause(sc_prog *p) nogil
    int sc_prog_resume(sc_prog *p) nogil
    int sc_prog_stop(sc_prog *p) nogil
    int sc_prog_error(const sc_prog *p, uint32_t *op) nogil
    sc_metrics *sc_prog_metrics(sc_prog *p) nogil
    const sc_sched *sc_prog_sched(const sc_prog *p) nogil
    int sc_prog_sides(sc_prog *p, sc_side ***sides, uint32_t *n) nogil
