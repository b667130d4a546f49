/* exec: what the native operators of a compiled plan share (see native/exec/README.md).
 *
 * A compiled plan runs as a linear chain of operators on the runtime pool (runtime/pool.h).
 * Every operator has the pool's signature
 *     int run(void *state, sc_batch *in, sc_batch **out)
 * and its state begins with an sc_op_base, so generic code (metrics, the program) can read
 * it. Conventions every operator follows:
 *
 * - Hidden columns. Column 0 (SC_COL_SEQ) is the serial of the source row a row descends
 *   from (int64, never null); column 1 (SC_COL_POS) is scratch used by the keyed split and
 *   merge (int64, never null). Operators copy both through to every output row (of a batch
 *   that is not lean: below); user columns
 *   start at SC_NHIDDEN. Rows created at end of stream carry seq = SC_SEQ_EOS + step.
 *   A lean batch (sc_batch.lean) has both hidden columns allocated but not written: a
 *   program of one fused stateless stage straight into a sink that does not publish
 *   (backends/native/program.py, lean_chain) reads neither, so its import does not fill
 *   them and the stage and the sink do not move them (a quarter of the bytes a stateless
 *   run gathered). Row r of an unfiltered lean batch is serial first_row + r; the fused
 *   stage works out the serial of a dead row from its selections (sc_op_dead_seq).
 * - Logical types (sc_ltype) say how a physical column is read: INT, DATETIME (microseconds
 *   since the epoch, naive UTC), DATE (days since the epoch) and NULL (all rows null) are
 *   SC_COL_INT64; FLOAT is DOUBLE; BOOL is BOOL; STR is UTF8.
 * - Ownership. `run` owns `in`: it releases it (sc_batch_release) or forwards it as an
 *   output. Outputs are new batches from sc_batch_new, chained through ->next (several
 *   outputs of one input); *out = NULL when there is nothing. An output may have 0 rows only
 *   when it is the end-of-stream batch or the op says so (keyed ops under the split).
 * - End of stream. The last batch of a run has eos = 1 and nrows = 0. An operator that holds
 *   rows (windows) emits them as outputs, then forwards the eos batch last in the chain.
 * - Counters. Each operator belongs to one plan step (base.step) and updates that step's
 *   counters: rows_in (when base.count_in), rows_out (when base.count_out), filtered, dead,
 *   late. A plan step lowered to several operators counts rows_in/rows_out once.
 * - Dead and late rows go to the operator's side log (sc_side_add) with the input row; the
 *   Python side turns them into dead-letter / late rows. The reason recorded in C is a
 *   fallback: for expression errors the driver re-derives the exact message.
 * - Errors. Data errors never fail the run (they are dead letters). A negative status
 *   (SC_ENOMEM, SC_EINTERNAL) stops the run.
 * - Construction. Every sc_op_*_create(void **st, const sc_op_base *base, ...) makes a deep
 *   copy of *base (schemas; a fresh side log when base->side is set) as the first member of
 *   its state; the caller keeps and frees its base. The destroy function frees the copy.
 * - Threads. Stateless operators run on many workers at once and must keep no mutable
 *   state outside the call (beyond atomics). Keyed and stateful operators are called by one
 *   worker at a time for a given partition / the whole operator.
 */
#ifndef SC_EXEC_H
#define SC_EXEC_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "../common/sc_atomic.h"
#include "../common/sc_status.h"
#include "../runtime/batch.h"

typedef enum {
    SC_LT_NULL = 0,
    SC_LT_INT = 1,
    SC_LT_FLOAT = 2,
    SC_LT_BOOL = 3,
    SC_LT_STR = 4,
    SC_LT_DATETIME = 5,
    SC_LT_DATE = 6
} sc_ltype;

#define SC_COL_SEQ 0
#define SC_COL_POS 1
#define SC_NHIDDEN 2
#define SC_SEQ_EOS (UINT64_C(1) << 62)
#define SC_US_PER_DAY INT64_C(86400000000)

/* list[T]: logical type SC_LT_LIST + T (T a scalar type or itself a list type: a list of
 * lists of int is 2 * SC_LT_LIST + SC_LT_INT), stored as one encoded value per row in a
 * UTF8-layout column (see exec/lists.h), so every operator that copies rows carries lists
 * unchanged. */
#define SC_LT_LIST 16
static inline bool sc_ltype_is_list(uint8_t t) { return t >= SC_LT_LIST; }

static inline sc_col_type sc_ltype_physical(sc_ltype t) {
    if (sc_ltype_is_list((uint8_t)t)) return SC_COL_UTF8;
    switch (t) {
    case SC_LT_FLOAT: return SC_COL_DOUBLE;
    case SC_LT_BOOL: return SC_COL_BOOL;
    case SC_LT_STR: return SC_COL_UTF8;
    default: return SC_COL_INT64;
    }
}

/* A batch schema: ncols logical types, hidden columns included. */
typedef struct sc_schema {
    int32_t ncols;
    uint8_t *lt; /* sc_ltype[ncols], owned */
} sc_schema;

int sc_schema_init(sc_schema *s, int32_t ncols, const uint8_t *lt);
int sc_schema_copy(sc_schema *dst, const sc_schema *src);
void sc_schema_free(sc_schema *s);

/* ---- standalone batches (malloc'd; sc_batch_release frees them) ---- */

/* New empty batch of `s` with room for `capacity` rows (validity all set, nrows 0). UTF8
 * data grows on demand. */
int sc_batch_new(sc_batch **out, const sc_schema *s, int64_t capacity);
/* The same; the string columns i with views[i] != 0 (views may be NULL: none) made as 16-byte
 * views, without offsets or bytes until they turn into plain strings (sc_column_unview). */
int sc_batch_new_views(sc_batch **out, const sc_schema *s, int64_t capacity, const uint8_t *views);
/* New batch of `s` with no room and no buffers (capacity 0): its first sc_batch_reserve
 * allocates them. A deferred batch (sc_arrow_defer) is one: the worker's import reserves
 * exactly its rows, and the thread that pushed it allocated nothing the import would
 * reallocate and free on another thread. */
int sc_batch_new_shell(sc_batch **out, const sc_schema *s);
/* Keep batch-sized allocations in the heap (glibc): a 16K-row column is larger than the
 * default 128 KiB mmap threshold, so every batch would be a fresh mapping whose pages fault
 * in zeroed, and trimming would hand freed memory back only to fault it in again. Idempotent;
 * call once before the first run. */
void sc_exec_tune_allocator(void);
/* Grow a standalone batch to hold at least `rows` rows (keeps contents). */
int sc_batch_reserve(sc_batch *b, int64_t rows);
/* A shell's room for `rows` rows as a borrowing import makes it (exec/arrow_bridge.c): every
 * column's validity, the hidden columns' and bool columns' values; the other values, offsets
 * and bytes are left to sc_column_room, for a column whose buffers the import could not
 * borrow. A paced batch of 8K rows had 64 KB values allocated and freed again for each column
 * it borrowed, and offsets and bytes for a string column it took as views. */
int sc_batch_shell_room(sc_batch *b, int64_t rows);
/* The buffers column c lacks for `cap` rows (values; a string column's offsets and bytes),
 * as sc_batch_new makes them; SC_EINVAL for a column of no known type. */
int sc_column_room(sc_column *c, int64_t cap);
/* Views columns (sc_column.views): rows of views column x (row sel[j], idx[j] or j, for
 * j < n) appended as strings to UTF8 column d from row d0 (d's data grows); and a views
 * column of nrows rows turned into offsets / data in place (none: nothing to do). */
int sc_views_to_utf8(sc_column *d, int64_t d0, const sc_column *x, const int32_t *sel, const int64_t *idx,
                     int64_t n);
int sc_column_unview(sc_column *c, int64_t nrows);
/* Make c (not borrowed) a views column with room for `rows` views (its earlier views kept). */
int sc_column_views_room(sc_column *c, int64_t rows);
/* Write a string at `row` (rows of a UTF8 column are written in order), growing the data. */
int sc_batch_put_utf8(sc_batch *b, int32_t col, int64_t row, const char *s, int32_t len);
/* dst[drow] = src[srow] for every column (same physical types, same ncols). Rows of dst are
 * written in order. */
int sc_batch_copy_row(sc_batch *dst, int64_t drow, const sc_batch *src, int64_t srow);
/* dst[drow, dcol] = src[srow, scol] (same physical type). */
int sc_batch_copy_cell(sc_batch *dst, int32_t dcol, int64_t drow, const sc_batch *src, int32_t scol,
                       int64_t srow);
/* Mark dst[drow, dcol] valid (after writing a value with the sc_batch_set_* accessors). */
static inline void sc_batch_set_valid(sc_batch *b, int32_t col, int64_t row) {
    sc_column *c = &b->cols[col];
    if (!sc_bit_get(c->validity, row)) { sc_bit_set(c->validity, row, true); c->null_count--; }
}
/* Append src rows idx[0..n) to the standalone batch dst at rows dst->nrows.. (column by
 * column; same physical types), and advance dst->nrows. dst must have room for n more rows. */
int sc_batch_take(sc_batch *dst, const sc_batch *src, const int64_t *idx, int64_t n);
/* One column of that: dst rows d0.. of dcol = src rows idx[0..n) of scol (same physical type);
 * dst->nrows is left to the caller. */
int sc_batch_take_col(sc_batch *dst, int32_t dcol, int64_t d0, const sc_batch *src, int32_t scol,
                      const int64_t *idx, int64_t n);
/* Append every row of src to the standalone batch dst (same schema), growing it. */
int sc_batch_append(sc_batch *dst, const sc_batch *src);
/* One standalone batch holding the rows of parts[0..n) in order (same schema `s`); the
 * header fields (serial, first_row, marker) are the first part's. Used by the driver to hand
 * the sink large chunks instead of one small batch at a time. */
int sc_batch_concat(sc_batch **out, const sc_schema *s, sc_batch *const *parts, int32_t n);
/* Batches collected in order to be joined into one (a driver's take): zero-initialize, add,
 * then join once. */
typedef struct sc_batch_list {
    sc_batch **b;
    int32_t n, cap;
    int64_t rows; /* rows added so far */
} sc_batch_list;
/* Append b (owned by the list from now on; released on SC_ENOMEM). */
int sc_batch_list_add(sc_batch_list *l, sc_batch *b);
/* *out = one batch of the list's batches in order (schema `s`; the batch itself when there is
 * one; NULL when none); the list is emptied and its array freed. */
int sc_batch_list_join(sc_batch_list *l, const sc_schema *s, sc_batch **out);
/* Copy the whole batch (header fields serial/first_row/marker/eos/part/group too). */
int sc_batch_clone(sc_batch **out, const sc_batch *src);

/* ---- per-step counters ---- */

typedef struct sc_step_counters {
    sc_atomic_u64 rows_in, rows_out, filtered, dead, late;
    char pad[SC_CACHELINE - 5 * sizeof(sc_atomic_u64)];
} SC_ALIGNED sc_step_counters;

/* ---- side log: dead and late rows of one operator ---- */

typedef enum { SC_SIDE_DEAD = 1, SC_SIDE_LATE = 2 } sc_side_kind;

typedef struct sc_side_meta {
    uint8_t kind;     /* sc_side_kind */
    uint64_t serial;  /* the operator's input batch serial (orders records of equal seq) */
    int64_t row;      /* row within that input batch */
    char *reason;     /* malloc'd; NULL for late rows */
} sc_side_meta;

typedef struct sc_side sc_side;

int sc_side_create(sc_side **out, const sc_schema *row_schema, uint32_t step);
void sc_side_destroy(sc_side *s);
/* Record row `row` of `b` (thread-safe). `reason` is copied (may be NULL for late). */
int sc_side_add(sc_side *s, sc_side_kind kind, const sc_batch *b, int64_t row, const char *reason);
/* The same, with the row's serial given (a lean batch's hidden columns hold none). */
int sc_side_add_seq(sc_side *s, sc_side_kind kind, const sc_batch *b, int64_t row, int64_t seq,
                    const char *reason);
/* Take everything recorded so far: a batch of row copies (*rows, NULL if none) and its
 * metadata (*meta, n entries, malloc'd; free reasons with sc_side_meta_free). */
int sc_side_take(sc_side *s, sc_batch **rows, sc_side_meta **meta, int64_t *n);
void sc_side_meta_free(sc_side_meta *meta, int64_t n);
uint32_t sc_side_step(const sc_side *s);
/* The schema of the recorded rows (the operator's input schema). */
const sc_schema *sc_side_schema(const sc_side *s);

/* ---- operator base ---- */

typedef struct sc_op_base {
    uint32_t step;              /* plan step index (counters, side records) */
    bool count_in, count_out;   /* which of rows_in / rows_out this operator counts */
    sc_step_counters *counters; /* this step's counters (shared with other ops of the step) */
    sc_schema in, out;          /* input and output schemas (hidden columns included) */
    int64_t capacity;           /* rows per output batch */
    sc_side *side;              /* dead / late log (NULL: this op records none) */
    sc_atomic_i64 state_size;   /* keyed/window state entries (gauge) */
} sc_op_base;

/* Fill a base (copies the schemas). */
int sc_op_base_init(sc_op_base *b, uint32_t step, bool count_in, bool count_out,
                    sc_step_counters *counters, const sc_schema *in, const sc_schema *out,
                    int64_t capacity, bool with_side);
/* Deep copy (schemas; a fresh side log when src has one): what every create does. */
int sc_op_base_copy(sc_op_base *dst, const sc_op_base *src);
void sc_op_base_free(sc_op_base *b);

static inline void sc_count_in(sc_op_base *b, int64_t n) {
    if (b->count_in && n) sc_u64_fetch_add_relaxed(&b->counters->rows_in, (uint64_t)n);
}
static inline void sc_count_out(sc_op_base *b, int64_t n) {
    if (b->count_out && n) sc_u64_fetch_add_relaxed(&b->counters->rows_out, (uint64_t)n);
}
static inline void sc_count_filtered(sc_op_base *b, int64_t n) {
    if (n) sc_u64_fetch_add_relaxed(&b->counters->filtered, (uint64_t)n);
}
/* Record a dead row (counts it). */
int sc_op_dead(sc_op_base *b, const sc_batch *in, int64_t row, const char *reason);
/* Record a dead row of a lean batch, whose serial is `seq` (counts it). */
int sc_op_dead_seq(sc_op_base *b, const sc_batch *in, int64_t row, int64_t seq, const char *reason);
/* Record a late row (counts it). */
int sc_op_late(sc_op_base *b, const sc_batch *in, int64_t row);

/* New output batch of the op's output schema, header copied from `in` (serial, first_row,
 * marker are the pool's; part/group copied). */
int sc_op_new_out(sc_op_base *b, const sc_batch *in, sc_batch **out);
/* as sc_op_new_out, with room for exactly `cap` rows */
int sc_op_new_out_rows(sc_op_base *b, const sc_batch *in, int64_t cap, sc_batch **out);
/* as sc_op_new_out_rows, its string columns with views[i] != 0 made as views (sc_batch_new_views) */
int sc_op_new_out_views(sc_op_base *b, const sc_batch *in, int64_t cap, const uint8_t *views, sc_batch **out);
/* An operator that keeps nothing at end of stream forwards the eos batch (which must have
 * no rows: SC_EINVAL, and `in` released, otherwise). */
static inline int sc_forward_eos(sc_batch *in, sc_batch **out) {
    *out = NULL;
    if (in->nrows) {
        sc_batch_release(in);
        return SC_EINVAL;
    }
    in->next = NULL;
    *out = in;
    return SC_OK;
}

/* Append `b2` at the end of the chain *head. */
static inline void sc_chain_append(sc_batch **head, sc_batch **tail, sc_batch *b2) {
    if (!b2) return;
    if (*tail) (*tail)->next = b2;
    else *head = b2;
    *tail = b2;
    while ((*tail)->next) *tail = (*tail)->next;
}

#endif
