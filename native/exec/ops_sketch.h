/* ops_sketch: the `sketch` stage of a compiled plan (Rinberg et al.'s sketches inside a pipeline).
 *
 * A sketch operator is a tap: it forwards every input batch unchanged (same schema, same
 * rows, same order) and, on the way, updates one or more sketches from input columns:
 *   SC_SK_THETA     Θ distinct count (lg_k; MurmurHash3 seed 9001, DataSketches compatible)
 *   SC_SK_HLL       HyperLogLog HLL_8 distinct count (lg_k)
 *   SC_SK_KLL       KLL doubles quantiles (k; fixed rng seed, so a run is reproducible)
 *   SC_SK_FREQUENT  frequent items (lg_max_map_size; int64 items, or string items)
 * With key columns there is one set of sketches per distinct key (keys equal as in
 * ops_state.h: null == null, NaN == NaN, -0.0 == 0.0); a keyed sketch operator may be
 * partitioned (each partition instance holds the keys that hash to it).
 *
 * Values: nulls are skipped. INT / DATETIME / DATE columns update as int64, BOOL as int64
 * 0 / 1, FLOAT as a double (Θ / HLL canonicalise -0.0 and NaN; KLL ignores NaN, as
 * DataSketches does), STR as its UTF-8 bytes (Θ / HLL ignore the empty string, as
 * DataSketches does). KLL takes INT / FLOAT / BOOL columns; frequent items take INT / BOOL /
 * DATETIME / DATE (int64 items) or STR (string items). The compiler checks this.
 *
 * Ordering and determinism: the operator is stateful (unkeyed: one worker at a time; keyed:
 * one worker at a time per partition), so every sketch sees its rows in arrival order and a
 * run's sketches are the same on every run of the same input, whatever the worker count.
 *
 * Thread safety: run() is called by one thread at a time per instance (the pool's contract).
 * The query functions may be called from any thread while the run is live: they take the
 * instance's mutex, which run() holds for one batch, so a query waits at most one batch and
 * delays the pipeline by one serialization.
 *
 * Queries return DataSketches bytes (Θ compact ordered, HLL_8, KLL doubles, frequent items),
 * so the Python side reads them with the standalone sketch classes.
 */
#ifndef SC_EXEC_OPS_SKETCH_H
#define SC_EXEC_OPS_SKETCH_H

#include <stddef.h>

#include "exec.h"

typedef enum { SC_SK_THETA = 1, SC_SK_HLL = 2, SC_SK_KLL = 3, SC_SK_FREQUENT = 4 } sc_sketch_kind;

typedef struct sc_sketch_spec {
    int32_t kind;  /* sc_sketch_kind */
    int32_t col;   /* input column */
    int32_t param; /* Θ / HLL: lg_k; KLL: k; frequent: lg_max_map_size */
} sc_sketch_spec;

/* keys: input columns (nkeys 0: one set of sketches). Input and output schemas must be equal.
 * SC_EINVAL when a spec does not fit its column's type or a parameter is out of range. */
int sc_op_sketch_create(void **st, const sc_op_base *base, const int32_t *keys, int32_t nkeys,
                        const sc_sketch_spec *specs, int32_t nspecs);
int sc_op_sketch_run(void *st, sc_batch *in, sc_batch **out);
void sc_op_sketch_destroy(void *st);

/* ---- queries (any thread) ---- */

/* Number of keys seen so far (1 for an unkeyed operator once created). */
int64_t sc_op_sketch_nkeys(void *st);
/* The first input row of every key [0, nkeys), in key-index order, as a standalone batch of
 * the input schema (hidden columns included); *out = NULL when there are none. */
int sc_op_sketch_keys(void *st, sc_batch **out);
/* Serialize sketch `spec` of key `key` (index as in sc_op_sketch_keys; 0 when unkeyed) into
 * a malloc'd buffer (*buf, *len; free() it). */
int sc_op_sketch_bytes(void *st, int64_t key, int32_t spec, uint8_t **buf, size_t *len);

/* The headline numbers of sketch `spec` of key `key`, computed under the lock without a
 * copy (a few microseconds):
 *   Θ / HLL: out[0] estimate, out[1..3] lower bounds at 1..3 standard deviations,
 *            out[4..6] upper bounds at 1..3;
 *   KLL: out[0] n, out[1] min, out[2] max (NaN when empty);
 *   frequent: out[0] total weight, out[1] maximum error. */
int sc_op_sketch_summary(void *st, int64_t key, int32_t spec, double out[7]);

#endif
