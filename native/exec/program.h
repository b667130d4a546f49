/* program: a compiled plan assembled on the runtime pool: a linear chain of exec operators
 * (filter, project, keyed, window, the keyed split and merge) ending in an output queue that
 * the Python driver drains. Owns the operators' states, the per-step counters and the
 * metrics.
 *
 * Keyed operators (aggregate, running, top-k, dedup) run partitioned (Prasaad et al. §5): a
 * stateless SPLIT cuts each batch into one sub-batch per partition (hash of the key columns
 * modulo the partition count), recording each row's position in the hidden pos column; the
 * keyed operator runs as SC_OP_PARTITIONED on the hybrid queue (one state instance per
 * partition, so partitions never share state); a stateful MERGE reassembles the sub-batches
 * of each input (they arrive consecutively, in order, thanks to the reorder buffer) and
 * restores the row order by pos. The result equals running the keyed operator sequentially.
 *
 * Contract
 * - Ordering: the output queue receives batches in arrival order; the end-of-stream batch
 *   (eos) is the last one.
 * - Memory / backpressure: the output queue holds at most `max_out` batches; when it is full
 *   the pool's sink pushes back (the pipeline, then sc_prog_push, slow down; nothing drops).
 * - Threads: sc_prog_push / sc_prog_finish from one feeder thread; sc_prog_take from one
 *   drainer thread (may be the same thread); control calls from any one thread.
 */
#ifndef SC_EXEC_PROGRAM_H
#define SC_EXEC_PROGRAM_H

#include "../runtime/pool.h"
#include "exec.h"

typedef struct sc_prog sc_prog;

typedef void (*sc_op_destroy_fn)(void *state);

int sc_prog_create(sc_prog **out, uint32_t nsteps, uint32_t max_out);
void sc_prog_destroy(sc_prog *p);
sc_step_counters *sc_prog_counters(sc_prog *p, uint32_t step);

/* Add an operator (kind STATELESS or STATEFUL); the program owns `state` from now on. */
int sc_prog_add(sc_prog *p, const char *name, sc_op_kind kind, sc_op_run_fn run, sc_op_destroy_fn destroy,
                void *state, sc_op_base *base);

/* Add an operator whose state holds several bases (a fused stage: one per step it runs);
 * the program owns `state` and the malloc'd `bases` array (not the bases) from now on,
 * whatever it returns. */
int sc_prog_add_bases(sc_prog *p, const char *name, sc_op_kind kind, sc_op_run_fn run, sc_op_destroy_fn destroy,
                      void *state, sc_op_base **bases, uint32_t nbases);

/* Add a keyed operator partitioned `partitions` ways: `states[i]` serves partition i (the
 * program owns them); split and merge operators are added around it. keys are the input
 * columns hashed by the split; `in` its input schema. */
int sc_prog_add_keyed(sc_prog *p, const char *name, sc_op_run_fn run, sc_op_destroy_fn destroy,
                      void **states, sc_op_base **bases, uint32_t partitions, const int32_t *keys,
                      int32_t nkeys, const sc_schema *in, const sc_schema *out);
/* The keyed operator added last publishes its changed keys (sc_keyed_spec.publish): every
 * partition receives a sub-batch marked `publish` (on the input the clock picks) first after
 * interval_ns, then after an interval that doubles with each publish up to max_ns (a publish
 * costs one row per changed key, so a long run publishes geometrically less often; its table
 * is never staler than max_ns), and at end of stream. 0 < interval_ns <= max_ns. SC_EINVAL if
 * the last op added is not keyed. */
int sc_prog_set_publish(sc_prog *p, uint64_t interval_ns, uint64_t max_ns);

uint32_t sc_prog_nops(const sc_prog *p);
const char *sc_prog_op_name(const sc_prog *p, uint32_t op);
/* Sum of the state_size gauges of operator `op` (all partitions). */
int64_t sc_prog_state_size(const sc_prog *p, uint32_t op);

/* Create the pool and start the workers. */
int sc_prog_start(sc_prog *p, const sc_pool_config *cfg);
/* Feed one batch (ownership passes on SC_OK; see sc_pool_push). */
int sc_prog_push(sc_prog *p, sc_batch *b, int64_t timeout_ns);
/* End of input: pushes the eos batch (waiting up to timeout_ns; SC_EFULL: call again). */
int sc_prog_finish(sc_prog *p, int64_t timeout_ns);
/* Next output batch in order: SC_OK (*b owned by the caller; (*b)->eos marks the end),
 * SC_EEMPTY after timeout_ns, SC_ECLOSED when the run stopped or failed. */
int sc_prog_take(sc_prog *p, int64_t timeout_ns, sc_batch **b);
/* Whether the output queue is a quarter full (in batches, or for a coalescing sink in rows;
 * the open chunk is not counted), or the sink has turned a batch away: a feeder that paces
 * its pushes returns to take them then, well before the sink would block a worker (or at
 * once when one large batch did), and not for every batch. */
bool sc_prog_take_due(sc_prog *p);
/* The next batch will be pushed at due_ns (0: not known), for the workers to be up for it
 * (sc_pool_expect); a no-op before start and for a program without a pool. */
void sc_prog_expect(sc_prog *p, uint64_t due_ns);
/* sc_pool_arm / sc_pool_disarm for a started program's pool (a paced run, exec/pacer.c):
 * SC_EINVAL without a pool. */
int sc_prog_arm(sc_prog *p, sc_batch *const *b, const uint64_t *due_ns, int n, uint64_t next_ns);
void sc_prog_disarm(sc_prog *p, int *pushed, int *rc);
/* sc_pool_spread for a started program's workers (a paced run, exec/pacer.c); a no-op
 * without a pool. */
void sc_prog_spread(sc_prog *p);
/* Before start: the sink joins output batches (schema `out`) into chunks of up to chunk_rows
 * rows on the thread that delivers them, so the taker gets few large batches; a batch of at
 * least chunk_rows / 64 rows that fills at least half its capacity and owns its buffers is a
 * chunk of its own, queued without a copy (the taker exports it as it is). At most
 * 4 * chunk_rows rows wait in the queue (then the sink reports full: backpressure). sc_prog_take returns
 * the open, partial chunk when nothing else is queued and the wait timed out (or timeout is
 * 0), so slow streams still see their rows promptly. */
int sc_prog_set_coalesce(sc_prog *p, const sc_schema *out, int64_t chunk_rows);
int sc_prog_pause(sc_prog *p);
int sc_prog_resume(sc_prog *p);
/* Stop and join the workers; returns the run's error (0 if none). */
int sc_prog_stop(sc_prog *p);
/* First error and the operator that raised it. */
int sc_prog_error(const sc_prog *p, uint32_t *op);
sc_metrics *sc_prog_metrics(sc_prog *p);
const sc_sched *sc_prog_sched(const sc_prog *p);
/* Side logs of every operator that has one: *n entries (pointers stay owned). */
int sc_prog_sides(sc_prog *p, sc_side ***sides, uint32_t *n);

#endif
