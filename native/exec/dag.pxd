# Cython declarations of exec/dag.h (the contract is stated in the header).

from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t
from runtime.batch cimport sc_batch
from runtime.pool cimport sc_op_run_fn
from exec.exec cimport sc_op_base, sc_schema, sc_side, sc_step_counters
from exec.program cimport sc_op_destroy_fn

cdef extern from "exec/dag.h":
    ctypedef struct sc_dag:
        pass
    ctypedef struct sc_dag_vstats:
        uint64_t executions
        uint64_t rows_in
        uint64_t rows_out
        uint64_t ns
        int64_t state_size
        uint32_t index_limit
    ctypedef struct sc_dag_stats:
        uint64_t phases
        uint64_t pairs
        uint64_t in_flight_max
        uint64_t concurrent_max
        uint64_t lat_count, lat_p50_ns, lat_p99_ns, lat_max_ns
        double lat_mean_ns
    int sc_dag_create(sc_dag **out, uint32_t nsteps, uint32_t nvertices, uint32_t nsources, uint32_t nsinks,
                      uint32_t max_phases, uint32_t max_out) nogil
    void sc_dag_destroy(sc_dag *d) nogil
    sc_step_counters *sc_dag_counters(sc_dag *d, uint32_t step) nogil
    int sc_dag_vertex(sc_dag *d, uint32_t v, const char *name, uint32_t nin, int32_t sink) nogil
    int sc_dag_source(sc_dag *d, uint32_t i, uint32_t v) nogil
    int sc_dag_edge(sc_dag *d, uint32_t frm, uint32_t to, uint32_t port) nogil
    int sc_dag_merge(sc_dag *d, uint32_t v, const sc_schema *out, const int32_t *map, int32_t port_col) nogil
    int sc_dag_add_op(sc_dag *d, uint32_t v, const char *name, bint stateless, sc_op_run_fn run,
                      sc_op_destroy_fn destroy, void *state, sc_op_base *base) nogil
    int sc_dag_start(sc_dag *d, uint32_t workers) nogil
    int sc_dag_push(sc_dag *d, sc_batch **inp, int64_t timeout_ns) nogil
    int sc_dag_finish(sc_dag *d, int64_t timeout_ns) nogil
    int sc_dag_take(sc_dag *d, uint32_t sink, sc_batch **b) nogil
    int sc_dag_wait(sc_dag *d, int64_t timeout_ns) nogil
    int sc_dag_stop(sc_dag *d) nogil
    int sc_dag_error(const sc_dag *d, uint32_t *vertex) nogil
    uint32_t sc_dag_nvertices(const sc_dag *d) nogil
    const char *sc_dag_vertex_name(const sc_dag *d, uint32_t v) nogil
    int sc_dag_vertex_stats(const sc_dag *d, uint32_t v, sc_dag_vstats *out) nogil
    void sc_dag_stats_get(sc_dag *d, sc_dag_stats *out) nogil
    int sc_dag_sides(sc_dag *d, sc_side ***sides, uint32_t *n) nogil
