/* ops_entities: multi-entity events with ticket ordering (the lazy topological sorting design), lowered from the plan's
 * `key_by_all FROM, TO` + `transfer AMOUNT` (plan.Transfer).
 *
 * An event names its entities up front (two key columns). Each entity has a ticket pair:
 * `back` (the next ticket to hand out) and `now` (the ticket being served). Two operators:
 *
 *   ORDER (stateful: one worker at a time, in arrival order). Per row: rows that cannot take
 *   part (a null entity or amount, a NaN or negative amount) go to the dead letters; the rest
 *   get an entity id per key column (a dense index, from a key map only this operator
 *   touches) and take a ticket on each entity (ticket = back++; an event naming the same
 *   entity twice takes one ticket). The output is the input row plus four hidden int64
 *   columns (entity a, ticket a, entity b, ticket b).
 *
 *   APPLY (stateless: any number of workers, batches in arrival order from the worklist).
 *   Per row, in order: the event is dispatched when it holds the front ticket of each of its
 *   entities (now == ticket; the fast path when they are already current); it then moves the
 *   amount (rejecting, as a dead letter, a transfer that would take the source balance below
 *   zero unless overdraft is allowed) and completes by advancing `now` on each entity.
 *
 * Determinism: per-entity order equals arrival order (tickets are taken in arrival order and
 * served in ticket order), so every balance sees exactly the sequential run's updates in the
 * same order and the output equals the reference's at any worker count. Progress: a worker
 * waits only for events with earlier tickets, which sit in earlier rows of its own batch
 * (already done) or in earlier batches, taken from the worklist before its own and being
 * processed by other workers; so the oldest batch in flight never waits.
 *
 * Memory and threads: entity state lives in segments of SC_ENT_SEG entries allocated by
 * ORDER as ids grow and never moved, so APPLY workers index them without locks. `back` is
 * written by ORDER only; `now` by the worker serving the entity (release) and read by
 * waiting workers (acquire); a balance is touched only by the event holding the entity's
 * tickets, ordered by that acquire/release pair. No locks on the hot path.
 *
 * `serial` mode (the benchmark's baseline): every event takes a ticket on one global entity
 * as well, i.e. a single ticket lock around the same update.
 */
#ifndef SC_EXEC_OPS_ENTITIES_H
#define SC_EXEC_OPS_ENTITIES_H

#include "exec.h"

#define SC_ENT_SEG 4096
#define SC_ENT_MAX_SEGS 65536 /* 2^28 entities */

typedef struct sc_entities sc_entities;

/* The shared entity table: balances are doubles (is_float) or wrapping int64s starting at
 * `initial` (the int is used when !is_float). */
int sc_entities_create(sc_entities **out, bool is_float, double initial_f, int64_t initial_i,
                       bool overdraft, bool serial);
void sc_entities_destroy(sc_entities *e);
int64_t sc_entities_count(const sc_entities *e);
/* Events that waited for a ticket (not dispatched on the fast path), and total wait spins. */
uint64_t sc_entities_waits(const sc_entities *e);

/* ORDER: keys = the two entity columns, amount = the amount column (of `in`); base.out must
 * be base.in plus four INT columns. The table is shared (not owned). `reasons`: the dead
 * letter texts for a null column (indexed 0 = from, 1 = to, 2 = amount), then NaN, then
 * negative amount (5 strings, copied). */
int sc_op_order_create(void **st, const sc_op_base *base, sc_entities *ents, const int32_t keys[2],
                       int32_t amount, const char *const reasons[5]);
int sc_op_order_run(void *st, sc_batch *in, sc_batch **out);
void sc_op_order_destroy(void *st);

/* APPLY: base.in is ORDER's output; base.out is ORDER's input plus the two balance columns
 * (FLOAT or INT, as the table). `rejected` is the dead-letter text of a refused transfer. */
int sc_op_apply_create(void **st, const sc_op_base *base, sc_entities *ents, int32_t amount,
                       const char *rejected);
int sc_op_apply_run(void *st, sc_batch *in, sc_batch **out);
void sc_op_apply_destroy(void *st);

#endif
