/* ops_join: the keyed interval inner join over the tagged layout of its two inputs (see
 * fanin.h): exactly the reference's JoinOp (kernel/streamcell/backends/reference.py).
 *
 * Semantics. One watermark = max admitted time - lateness (over both sides). A row whose
 * time is null is dead (reason `dead_reason`); a row earlier than the watermark is late.
 * An admitted row with a null key column matches nothing, is not stored and does not move
 * the watermark. Otherwise it is matched against the stored rows of the other side with the
 * same key whose times differ by at most `within` (inclusive), in the other side's insertion
 * order, one output row per match; then it is stored and the watermark advances. Keys are
 * equal as in ops_state.h (NaN == NaN, -0.0 == 0.0); both sides' key columns have the same
 * logical types.
 *
 * Output row: hidden seq / pos of the arriving row, then for each output column k the
 * tagged input column outs[k] of the left (port 0) or right (port 1) row of the match,
 * whichever side that column belongs to (the plan's join schema: left columns, then the
 * right's non-key columns).
 *
 * State. A stored row older than (watermark - within) can match no admitted row: it is
 * dropped when its key is next probed, and a sweep (amortized O(1) per stored row) drops
 * the rest and forgets keys left empty, so state holds O(rows within `within` of the
 * watermark). state_size = stored rows.
 *
 * Thread safety: one thread at a time (a stateful operator). */
#ifndef SC_EXEC_OPS_JOIN_H
#define SC_EXEC_OPS_JOIN_H

#include "exec.h"

typedef struct sc_join_spec {
    int32_t width[2];       /* user columns of the left / right input (the tagged layout) */
    const int32_t *keys[2]; /* tagged key columns of the left / right rows */
    int32_t nkeys;
    int32_t time_col[2];    /* tagged time columns (INT, DATETIME or DATE; same type) */
    int64_t within, lateness; /* ticks: microseconds for temporal columns, else units; >= 0 */
    const int32_t *outs;    /* out.ncols - SC_NHIDDEN tagged input columns */
    const char *dead_reason; /* for a null time (copied) */
} sc_join_spec;

/* Copies `base` (exec.h). SC_EINVAL when the spec does not fit the schemas: the input must
 * be the tagged layout of two inputs (column 2 INT), key / time / output columns in range
 * with matching physical types. */
int sc_op_join_create(void **st, const sc_op_base *base, const sc_join_spec *spec);
int sc_op_join_run(void *st, sc_batch *in, sc_batch **out);
void sc_op_join_destroy(void *st);

#endif
