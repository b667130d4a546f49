/* arrow_bridge: Arrow C data interface in and out of runtime batches.
 *
 * Import copies a row range (or, with a hold, points int64 / double / datetime columns into
 * the array's buffers: sc_arrow_import_ref) of an Arrow struct array (a record batch, as handed over by
 * `__arrow_c_array__` / the C stream interface) into a batch: one memcpy per fixed-width
 * column when the slice is byte-aligned, offsets rebased for strings. Accepted child formats
 * per logical type: INT "l"; FLOAT "g"; BOOL "b"; STR "u", "U" (64-bit offsets) and "vu"
 * (string_view); DATETIME "tsu:" (any zone suffix is ignored); DATE "tdD"; NULL "n".
 * LIST of T "+l" / "+L" with a child of T's format (lists.h). Anything else is SC_ETYPE (the
 * driver casts first).
 *
 * Export is zero-copy: the batch's buffers are exposed as a struct array whose release
 * callback frees the batch. Formats: INT/DATE/NULL "l" (DATE as int64 days), FLOAT "g",
 * BOOL "b", STR "u", DATETIME "tsu:", LIST "z" (the encoded values, see lists.h). Children are named c0..cN-1.
 */
#ifndef SC_EXEC_ARROW_BRIDGE_H
#define SC_EXEC_ARROW_BRIDGE_H

#include "arrow_abi.h"
#include "exec.h"

/* Copy rows [offset, offset + n) of `array` (a struct array of schema->n_children children
 * matching the user columns of `target`) into rows [0, n) of `out` (capacity >= n). The
 * hidden seq column gets seq0, seq0 + 1, ...; pos gets 0. Sets out->nrows = n. */
int sc_arrow_import(const struct ArrowSchema *schema, const struct ArrowArray *array, int64_t offset,
                    int64_t n, const sc_schema *target, sc_batch *out, int64_t seq0);

/* The same without copying int64, double and datetime values: those columns point into the
 * array's buffers (sc_column.borrowed) and `out` holds a reference to `ext`, the hold that
 * keeps the array alive (sc_arrow_hold_create), until it is freed. Other columns, and
 * validity bitmaps, are copied as above. out must be a standalone batch without an ext. */
int sc_arrow_import_ref(const struct ArrowSchema *schema, const struct ArrowArray *array, int64_t offset,
                        int64_t n, const sc_schema *target, sc_batch *out, int64_t seq0, sc_extbuf *ext);

/* A hold of an imported array: moves *array in (array->release is set to NULL, so its
 * producer's capsule no longer releases it); one reference, the caller's. When the last
 * reference goes (on any thread), the hold waits for sc_arrow_reclaim, which calls the
 * array's release callback on the thread that calls it (the driver's: a producer's release
 * may need the interpreter). */
int sc_arrow_hold_create(sc_extbuf **out, struct ArrowArray *array);
const struct ArrowArray *sc_arrow_hold_array(const sc_extbuf *e);
/* Deferred import ("workers slice their own batches"): the driver hands the pool batches
 * that only name their rows, and the worker that first needs a batch imports it
 * (sc_batch_ready), so the per-row work of an import runs on the workers, in parallel.
 * sc_arrow_hold_defer moves the array's schema into the hold (schema->release is set to
 * NULL) with the batches' schema `target`, after making every type check an import makes (an
 * SC_ETYPE / SC_EINVAL comes here, on the driver). Once per hold. A fill can still fail on
 * what depends on the rows (memory, a string column past 2 GiB in one batch, a list row the
 * runtime cannot encode): the worker records it and the run stops with it, as for any
 * operator's error. `keep` (NULL, or one flag
 * per target column): a string column flagged, when it arrives as string views ("vu") that are
 * all inline in a batch's slice, stays views (sc_column.views, pointing into the array) instead
 * of being copied into offsets / data; only for columns no operator reads. */
int sc_arrow_hold_defer(sc_extbuf *hold, struct ArrowSchema *schema, const sc_schema *target, const uint8_t *keep);
/* Batch b (standalone, empty, without an ext) stands for rows [offset, offset + n) of the
 * hold's array, their sequence numbers from seq0: b->nrows = n, and a reference to the hold
 * until the rows are put in or b is freed. */
int sc_arrow_defer(sc_batch *b, sc_extbuf *hold, int64_t offset, int64_t n, int64_t seq0);
/* Release every hold whose last reference went; returns how many. Thread-safe. */
int64_t sc_arrow_reclaim(void);

/* Export `b` (ownership passes to the exported array) as a struct array of all its
 * columns (hidden ones included) typed by `s`, and its schema unless `schema` is NULL (every
 * batch of `s` has the same one: columns named c0, c1, ...). On an error nothing is
 * exported and `b` stays the caller's. */
int sc_arrow_export(sc_batch *b, const sc_schema *s, struct ArrowSchema *schema, struct ArrowArray *array);
/* The schema sc_arrow_export gives the batches of `s`. */
int sc_arrow_export_schema(const sc_schema *s, struct ArrowSchema *schema);
/* batches[0..n) (each typed by `s`), in order, as one Arrow C stream of their columns from
 * `skip` on (the hidden ones left out: they go with their batch), named c0, c1, ...: on SC_OK
 * the stream owns the array and the batches (each exported array then owns its batch; the
 * stream's release frees those not read); on an error they stay the caller's. */
int sc_arrow_export_stream(sc_batch **batches, int32_t n, const sc_schema *s, int32_t skip,
                           struct ArrowArrayStream *out);

#endif
