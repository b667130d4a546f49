/* dag: a compiled plan with several sources, fan-in and fan-out, run by phases with
 * Δ-propagation (Zimmerman and Chandy, sections 3.1-3.2, Listings 1 and 2).
 *
 * Vertices. A vertex is a linear segment of the plan: a chain of exec operators (exec.h)
 * called one after another on its input. A vertex with several input ports (union, join,
 * correlate) first merges the ports' rows of the phase into one stream in arrival order:
 * by the hidden seq column, ties broken by port, through a per-port column map (a union maps
 * columns by name; a multi-input operator gets the tagged layout: a port column, then each
 * port's columns, null on the other ports' rows). Vertices are numbered 0..N-1
 * topologically with the seed's extra restriction (the vertices whose predecessors all lie
 * in 0..x-1 are exactly 0..M[x]-1, i.e. vertices sorted by the index of their last
 * predecessor); sc_dag_start checks the numbering and computes M.
 *
 * Phases. The driver starts phase p with sc_dag_push: a run of consecutive serials of the
 * merged input (each source's rows of the run, as a chain of batches). A vertex executes
 * phase p only when one of its inputs received rows in phase p (Δ-propagation: a vertex
 * that produced no rows for a successor sends nothing, and absence is information). x[p]
 * counts the leading vertices that are done with phase p (clamped by x[p-1], so later
 * phases never overtake earlier ones); vertex v may execute phase p once v < M[x[p]]
 * (all its inputs for p are known). Many phases are in flight at once (a ring of
 * `max_phases`); a vertex with state executes its phases in order, one at a time; a
 * stateless vertex may execute several phases at once. Every vertex-phase pair runs at
 * most once and the result equals executing phases one at a time, each vertex in index
 * order (Zimmerman and Chandy §3.3).
 *
 * End of stream: sc_dag_finish starts a last phase in which every vertex executes: it
 * processes its inputs, then an end-of-stream batch goes through its chain (operators that
 * hold rows emit them).
 *
 * Contract
 * - Threads: sc_dag_push / sc_dag_finish / sc_dag_take from one driver thread; `workers`
 *   threads execute vertex-phase pairs. One mutex guards the sets (as in the seed); vertex
 *   code runs outside it, without the GIL.
 * - Memory / backpressure: at most max_phases phases in flight and about max_out output
 *   batches waiting in the sink queues; sc_dag_push reports SC_EFULL after its timeout
 *   (take outputs, then push again). Nothing is dropped.
 * - Ordering: each sink queue receives its rows in arrival order (a sink's vertex has
 *   state, so its phases run in order).
 * - Errors: an operator's negative status stops the run; sc_dag_error names the vertex.
 */
#ifndef SC_EXEC_DAG_H
#define SC_EXEC_DAG_H

#include "../runtime/pool.h"
#include "exec.h"

#define SC_DAG_MAX_VERTICES 64

typedef struct sc_dag sc_dag;
typedef void (*sc_dag_destroy_fn)(void *state);

int sc_dag_create(sc_dag **out, uint32_t nsteps, uint32_t nvertices, uint32_t nsources,
                  uint32_t nsinks, uint32_t max_phases, uint32_t max_out);
void sc_dag_destroy(sc_dag *d);
sc_step_counters *sc_dag_counters(sc_dag *d, uint32_t step);

/* Declare vertex v with `nin` input ports (1..SC_DAG_MAX_VERTICES; a source vertex: 1, fed
 * by the driver) and the sink queue it delivers to (-1: its outputs go to its successors). */
int sc_dag_vertex(sc_dag *d, uint32_t v, const char *name, uint32_t nin, int32_t sink);
/* Source `i` of sc_dag_push feeds vertex v. */
int sc_dag_source(sc_dag *d, uint32_t i, uint32_t v);
/* Outputs of `from` go to input `port` of `to` (from < to). */
int sc_dag_edge(sc_dag *d, uint32_t from, uint32_t to, uint32_t port);
/* How a vertex with several ports merges them: the merged schema `out` and, per port, for
 * every column of `out` the input column it copies (-1: null); `port_col` (or -1) receives
 * the port number. map has nin * out->ncols entries, port-major. */
int sc_dag_merge(sc_dag *d, uint32_t v, const sc_schema *out, const int32_t *map, int32_t port_col);
/* Append an operator to vertex v's chain (the dag owns `state` from now on; `base` is the
 * operator's sc_op_base, read for its side log and state gauge). */
int sc_dag_add_op(sc_dag *d, uint32_t v, const char *name, bool stateless, sc_op_run_fn run,
                  sc_dag_destroy_fn destroy, void *state, sc_op_base *base);

/* Check the numbering, compute M, start `workers` threads. */
int sc_dag_start(sc_dag *d, uint32_t workers);
/* Start a phase: in[i] is source i's chain of batches (NULL: no rows this phase); ownership
 * passes on SC_OK. SC_EFULL after timeout_ns (nothing taken), SC_ECLOSED when stopped. */
int sc_dag_push(sc_dag *d, sc_batch **in, int64_t timeout_ns);
/* Start the end-of-stream phase (SC_EFULL / SC_ECLOSED as for push). */
int sc_dag_finish(sc_dag *d, int64_t timeout_ns);
/* Next output batch of sink queue `sink`: SC_OK (*b owned by the caller, not chained),
 * SC_EEMPTY when none is waiting. */
int sc_dag_take(sc_dag *d, uint32_t sink, sc_batch **b);
/* Wait up to timeout_ns for an output, the end of the run or an error; returns 1 when the
 * end-of-stream phase is done (every output is queued), 0 otherwise, SC_ECLOSED when
 * stopped or failed. */
int sc_dag_wait(sc_dag *d, int64_t timeout_ns);
/* Stop and join the workers; returns the run's error (0 if none). */
int sc_dag_stop(sc_dag *d);
int sc_dag_error(const sc_dag *d, uint32_t *vertex);

uint32_t sc_dag_nvertices(const sc_dag *d);
const char *sc_dag_vertex_name(const sc_dag *d, uint32_t v);

typedef struct sc_dag_vstats {
    uint64_t executions; /* vertex-phase pairs executed */
    uint64_t rows_in;    /* rows it received */
    uint64_t rows_out;   /* rows it sent on */
    uint64_t ns;         /* time spent executing */
    int64_t state_size;  /* its operators' state gauges */
    uint32_t index_limit; /* M[v + 1]: vertices known-complete once 0..v are done */
} sc_dag_vstats;

typedef struct sc_dag_stats {
    uint64_t phases;       /* phases done (the end-of-stream phase included) */
    uint64_t pairs;        /* vertex-phase pairs executed */
    uint64_t in_flight_max; /* most phases in flight at once */
    uint64_t concurrent_max; /* most pairs executing at once */
    uint64_t lat_count, lat_p50_ns, lat_p99_ns, lat_max_ns; /* push -> phase done */
    double lat_mean_ns;
} sc_dag_stats;

int sc_dag_vertex_stats(const sc_dag *d, uint32_t v, sc_dag_vstats *out);
void sc_dag_stats_get(sc_dag *d, sc_dag_stats *out);
/* Side logs of every operator that has one (pointers stay owned). */
int sc_dag_sides(sc_dag *d, sc_side ***sides, uint32_t *n);

#endif
