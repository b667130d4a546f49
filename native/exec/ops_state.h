/* ops_state: the keyed and stateful operators of a compiled plan: unwindowed keyed
 * aggregate (upsert changelog), running aggregate, top-k, dedup, and tumbling / sliding /
 * session windows with watermark and late output.
 *
 * Semantics are exactly the reference interpreter's (kernel/streamcell/backends/reference.py:
 * AggregateOp, RunningOp, TopKOp, DedupOp, WindowOp, _Acc, _EventTime). Aggregate arguments
 * are plain input columns (the compiler evaluates argument expressions in a project before).
 *
 * Output rows are described by an output map: output column k (k >= SC_NHIDDEN) is
 *   SC_OUT_INPUT  input column `arg` of the row (aggregate: of the current row; window: of
 *                 the row that opened the window, which holds the key);
 *   SC_OUT_AGG    result of aggregate `arg`;
 *   SC_OUT_WSTART / SC_OUT_WEND  window bounds (ticks converted to the column's type);
 *   SC_OUT_RANK   top-k rank (1..k).
 * Hidden columns of an output row: seq and pos of the input row that caused it (for a
 * window emitted at end of stream: SC_SEQ_EOS + base.step, pos 0).
 *
 * Keys: equal when every key column is equal, nulls equal to nulls, NaN equal to NaN and
 * -0.0 equal to 0.0. Keyed state is per key; a keyed operator may be partitioned by the
 * caller (it sees every row of a key, in arrival order); windows are one stateful operator
 * (the watermark is global).
 *
 * Thread safety: one thread at a time per operator instance (the pool guarantees it for
 * stateful operators; for partitioned use the program gives each partition its own
 * instance or serializes per partition — see the partitioned notes in program.h).
 */
#ifndef SC_EXEC_OPS_STATE_H
#define SC_EXEC_OPS_STATE_H

#include "exec.h"

typedef enum {
    SC_AGG_COUNT = 1,      /* count(): rows (arg < 0); count(x): non-null x */
    SC_AGG_SUM,            /* null-skipping; 0 when none; ints (and bools) wrap at 64 bits */
    SC_AGG_MEAN,           /* float; null when none */
    SC_AGG_MIN, SC_AGG_MAX,/* null-skipping; NaN above every number */
    SC_AGG_FIRST, SC_AGG_LAST, /* by arrival, nulls included */
    SC_AGG_COUNT_DISTINCT  /* distinct values, null counts as one value; equality as keys */
} sc_agg_fn;

typedef struct sc_agg_spec {
    int32_t fn;   /* sc_agg_fn */
    int32_t arg;  /* input column, -1 for count() */
    uint8_t lt;   /* result logical type */
} sc_agg_spec;

typedef enum { SC_OUT_INPUT = 1, SC_OUT_AGG, SC_OUT_WSTART, SC_OUT_WEND, SC_OUT_RANK } sc_out_kind;

typedef struct sc_out_col {
    int32_t kind; /* sc_out_kind */
    int32_t arg;
} sc_out_col;

typedef struct sc_keyed_spec {
    const int32_t *keys; /* input columns; nkeys == 0: one global group */
    int32_t nkeys;
    const sc_agg_spec *aggs;
    int32_t naggs;
    const sc_out_col *outs; /* out schema ncols - SC_NHIDDEN entries */
    int32_t publish;        /* aggregate with keys: publish changed keys instead (see below) */
} sc_keyed_spec;
#define SC_PUBLISH_COMPLETE 2 /* sc_keyed_spec.publish: the end-of-stream publish holds every key */

/* Every *_create copies `base` (schemas, step, counters; a fresh side log when base->side is
 * set); the caller keeps ownership of *base. The create functions validate the spec against
 * the schemas and return SC_EINVAL on a mismatch. The state begins with its sc_op_base.
 *
 * Every *_run follows exec.h: it owns `in`; output is a chain of batches of at most
 * max(in->nrows, base.capacity) rows each (*out = NULL when nothing), except that a keyed
 * sub-batch (in->group_n != 0) always gets one batch, possibly empty, with its part /
 * group_n. The eos batch (which must have no rows: SC_EINVAL otherwise) is forwarded last,
 * after what the op flushes. Counts rows_in / rows_out as the base says, filtered (top-k
 * null `by`, dedup duplicates), dead / late (windows), and sets the state_size gauge (keys;
 * top-k: rows held; windows: open windows) after every batch. */

/* aggregate: per input row, the key's updated row (keys + results). running: per input row,
 * the row with the key's running results. Both emit exactly one row per input row.
 * A publishing aggregate (spec.publish, nkeys > 0; for a consumer that keeps only the latest
 * row per key, such as an upsert table) emits nothing per row: on a sub-batch marked
 * `publish`, and at end of stream, it emits one row per key changed since its last publish
 * (keys + results, in the order the keys first changed), the SC_COL_SEQ cell holding the
 * serial of the key's first row, so the consumer can order new keys by first appearance.
 * With spec.publish == SC_PUBLISH_COMPLETE the end-of-stream publish holds every key (each
 * partition's keys in the order of their first rows), its rows marked by SC_COL_POS = 1 (0 in
 * every other publish): together they are the whole final table, so a consumer may replace
 * what it holds with them instead of folding them in.
 * It still counts one row out per row in, as the changelog it stands for. */
int sc_op_aggregate_create(void **st, const sc_op_base *base, const sc_keyed_spec *spec);
int sc_op_aggregate_run(void *st, sc_batch *in, sc_batch **out);
void sc_op_aggregate_destroy(void *st);

/* top_k: per key the k rows with the best `by` (descending or not; ties: earlier first); a
 * row with null `by` is filtered; when the key's list changes, emit the whole list with rank
 * (SC_OUT_INPUT columns of the listed rows; hidden columns of the row that changed it).
 * k >= 0 (0: never emits). */
int sc_op_topk_create(void **st, const sc_op_base *base, const int32_t *keys, int32_t nkeys, int32_t by,
                      int32_t k, bool descending, const sc_out_col *outs);
int sc_op_topk_run(void *st, sc_batch *in, sc_batch **out);
void sc_op_topk_destroy(void *st);

/* dedup: first row of each key passes, later ones are filtered. nkeys == 0: every user
 * column is a key (the reference's default). Output schema = input schema. */
int sc_op_dedup_create(void **st, const sc_op_base *base, const int32_t *keys, int32_t nkeys);
int sc_op_dedup_run(void *st, sc_batch *in, sc_batch **out);
void sc_op_dedup_destroy(void *st);

typedef enum { SC_WIN_TUMBLING = 1, SC_WIN_SLIDING, SC_WIN_SESSION } sc_win_kind;

typedef struct sc_window_spec {
    sc_keyed_spec keyed;
    int32_t kind;      /* sc_win_kind */
    int32_t time_col;  /* input column (INT, DATETIME or DATE) */
    int64_t size, every, lateness; /* ticks: microseconds for temporal columns, else units */
} sc_window_spec;

/* window: rows with null time go dead ("null event time in column 'NAME'" is re-derived by
 * the driver); rows earlier than the watermark go late; windows close when the watermark
 * reaches their end, in (end, start, creation) order; at end of stream all open windows
 * close. `every` is read for SC_WIN_SLIDING only (0 < every <= size); size is the gap of a
 * session. Window bounds that do not fit int64 saturate (the reference would fail to store
 * them). */
int sc_op_window_create(void **st, const sc_op_base *base, const sc_window_spec *spec);
int sc_op_window_run(void *st, sc_batch *in, sc_batch **out);
void sc_op_window_destroy(void *st);

/* ---- building blocks shared by the implementation files (ops_state.c, ops_keyed.c,
 * ops_window.c, keyhash.c, rowstore.c); not part of the operator interface ---- */

/* A growable byte buffer. */
typedef struct sc_buf {
    uint8_t *p;
    size_t len, cap;
} sc_buf;
int sc_buf_reserve(sc_buf *b, size_t extra); /* room for len + extra bytes */
void sc_buf_free(sc_buf *b);

/* A byte string with a small inline buffer (a zeroed struct is the empty string). */
#define SC_SBUF_INLINE 16
typedef struct sc_sbuf {
    uint32_t len, cap; /* cap <= SC_SBUF_INLINE: inline */
    union {
        uint8_t inl[SC_SBUF_INLINE];
        uint8_t *p;
    } u;
} sc_sbuf;
static inline uint8_t *sc_sbuf_data(sc_sbuf *s) { return s->cap > SC_SBUF_INLINE ? s->u.p : s->u.inl; }
static inline const uint8_t *sc_sbuf_cdata(const sc_sbuf *s) {
    return s->cap > SC_SBUF_INLINE ? s->u.p : s->u.inl;
}
int sc_sbuf_reserve(sc_sbuf *s, size_t len); /* room for len bytes (contents kept) */
int sc_sbuf_set(sc_sbuf *s, const void *p, size_t len);
void sc_sbuf_free(sc_sbuf *s);

/* Key encoding: appends to `out` a byte string of the key columns `cols` of `row`, equal for
 * two rows iff the keys are equal (null == null, NaN == NaN, -0.0 == 0.0; per column: a tag
 * byte 0 = null / 1 = value, then 8 bytes for int64 and (normalized) double, 1 for bool,
 * 4-byte length + bytes for utf8). The encoding is native-endian and never leaves the
 * process. */
int sc_key_encode(sc_buf *out, const sc_batch *b, int64_t row, const int32_t *cols, int32_t ncols,
                  const uint8_t *lt);
/* lt (may be NULL): the batch's logical types by column; list[float] key columns then have
 * their elements normalized (NaN one value, -0.0 as 0.0), like float keys. */
static inline uint64_t sc_rd64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static inline uint64_t sc_mum(uint64_t a, uint64_t b) {
    __uint128_t r = (__uint128_t)a * b;
    return (uint64_t)r ^ (uint64_t)(r >> 64);
}

/* 64-bit hash of bytes (not cryptographic; seedless, deterministic): wyhash-style, 16 bytes
 * per multiply-fold round. Inline: it runs per row, twice per keyed row (split and state). */
static inline uint64_t sc_hash_bytes(const void *vp, size_t n) {
    static const uint64_t K0 = UINT64_C(0xa0761d6478bd642f), K1 = UINT64_C(0xe7037ed1a0b428db),
                          K2 = UINT64_C(0x8ebc6af09c88c6e3), K3 = UINT64_C(0x589965cc75374cc3);
    const uint8_t *p = (const uint8_t *)vp;
    uint64_t h = K0 ^ sc_mum((uint64_t)n ^ K1, K2);
    size_t i = n;
    for (; i >= 16; i -= 16, p += 16) h = sc_mum(sc_rd64(p) ^ K1, sc_rd64(p + 8) ^ h);
    uint64_t a = 0, b = 0;
    if (i >= 8) {
        a = sc_rd64(p);
        p += 8;
        i -= 8;
    }
    for (size_t j = 0; j < i; j++) b |= (uint64_t)p[j] << (8 * j);
    h = sc_mum(a ^ K1 ^ h, b ^ K3 ^ (uint64_t)n);
    return sc_mum(h ^ K0, h ^ K2);
}

/* Open-addressing (linear probing) map from key bytes to a uint64 value. Keys of up to
 * SC_KMAP_INLINE bytes (one int or float key column, short strings) live in the slot itself,
 * so a lookup touches one cache line; longer keys are copied into an arena (compacted as
 * removals accumulate). Grows by doubling at a load factor of 0.7; removal is by
 * (hash, value) with backward-shift deletion. */
#define SC_KMAP_INLINE 20
typedef struct sc_kmap_slot {
    uint64_t hash; /* 0: empty (stored hashes are forced non-zero) */
    uint64_t val;
    uint32_t len;
    union {
        uint64_t off;                /* len > SC_KMAP_INLINE: arena[off .. off + len) */
        uint8_t key[SC_KMAP_INLINE]; /* len <= SC_KMAP_INLINE: the key bytes */
    } k;
} sc_kmap_slot;
typedef struct sc_kmap {
    sc_kmap_slot *slots;
    size_t cap, n; /* cap: power of two */
    uint8_t *arena;
    size_t alen, acap, garbage;
} sc_kmap;
int sc_kmap_init(sc_kmap *m, size_t expected);
void sc_kmap_free(sc_kmap *m);
/* Find `key`; if absent insert it with value *val. *val receives the stored value;
 * *inserted says which happened. */
int sc_kmap_upsert(sc_kmap *m, uint64_t hash, const void *key, uint32_t len, uint64_t *val, bool *inserted);
static inline uint64_t sc_kmap_nz(uint64_t h) { return h ? h : 1; }
static inline const uint8_t *sc_kmap_slot_key(const sc_kmap *m, const sc_kmap_slot *s) {
    return s->len <= SC_KMAP_INLINE ? s->k.key : m->arena + s->k.off;
}
/* Key bytes equal (keys are short: word compares beat a memcmp call). */
static inline bool sc_key_eq(const uint8_t *a, const uint8_t *b, uint32_t len) {
    for (; len >= 8; len -= 8, a += 8, b += 8)
        if (sc_rd64(a) != sc_rd64(b)) return false;
    for (; len; len--)
        if (*a++ != *b++) return false;
    return true;
}
/* Find `key`: true and *val its value, or false. */
static inline bool sc_kmap_find(const sc_kmap *m, uint64_t hash, const void *key, uint32_t len, uint64_t *val) {
    hash = sc_kmap_nz(hash);
    size_t mask = m->cap - 1;
    for (size_t i = hash & mask;; i = (i + 1) & mask) {
        const sc_kmap_slot *s = &m->slots[i];
        if (!s->hash) return false;
        if (s->hash == hash && s->len == len && sc_key_eq(sc_kmap_slot_key(m, s), (const uint8_t *)key, len)) {
            *val = s->val;
            return true;
        }
    }
}
/* Remove the entry with this hash and value (SC_EINTERNAL if there is none). */
int sc_kmap_remove(sc_kmap *m, uint64_t hash, uint64_t val);
/* Hint: the slot where a lookup of `hash` starts is about to be read (batch probing issues
 * these a few rows ahead, so the cache misses of a batch overlap). */
static inline void sc_kmap_prefetch(const sc_kmap *m, uint64_t hash) {
    __builtin_prefetch(&m->slots[(hash ? hash : 1) & (m->cap - 1)]);
}
/* Slot iteration: occupied slots i are those with slots[i].hash != 0, i < cap. */
static inline const uint8_t *sc_kmap_key(const sc_kmap *m, size_t slot, uint32_t *len) {
    const sc_kmap_slot *s = &m->slots[slot];
    *len = s->len;
    return s->len <= SC_KMAP_INLINE ? s->k.key : m->arena + s->k.off;
}

/* Row store: a copy of columns `cols` of one row as a blob:
 *   [validity bitmap, ceil(n/8) bytes][n x 8-byte cells][utf8 bytes]
 * an int64 / double cell holds the value, a bool cell 0 / 1, a utf8 cell a uint32 offset
 * (from the blob's start) and a uint32 length. Cell i is read back by sc_row_put into a
 * column of the same physical type. */
int sc_row_encode(sc_sbuf *dst, const sc_batch *b, int64_t row, const int32_t *cols, int32_t n);
int sc_row_put(sc_batch *dst, int32_t dcol, int64_t drow, const uint8_t *blob, int32_t n, int32_t i);
static inline bool sc_row_valid(const uint8_t *blob, int32_t i) { return sc_bit_get(blob, i); }
static inline const uint8_t *sc_row_cell(const uint8_t *blob, int32_t n, int32_t i) {
    return blob + (n + 7) / 8 + (size_t)i * 8;
}

/* Aggregate accumulators (the reference's _Acc). */
typedef struct sc_agg_plan {
    int32_t fn, arg;
    sc_col_type at; /* physical type of the argument (0 for count()) */
    uint8_t lt;     /* its logical type */
} sc_agg_plan;

typedef struct sc_acc {
    int64_t n;    /* count(), count(x), non-null values of sum / mean / min / max */
    uint64_t seq; /* first / last: arrival serial of the held value */
    union {
        int64_t i; /* int64 and bool values, int sums (wrapping) */
        double f;
        sc_kmap *set;             /* count_distinct of utf8 (NULL until the first value) */
        struct sc_u64set *iset;   /* count_distinct of int64 / double / bool (same) */
    } v;
    uint8_t has;    /* v / s hold a value (sum, mean, min, max, first, last) */
    uint8_t isnull; /* first / last: the held value is null */
    sc_sbuf s;      /* utf8 value (min, max, first, last) */
} sc_acc;

/* Check a spec against the input schema and fill `p` (SC_EINVAL when it does not fit). */
int sc_agg_plan_init(sc_agg_plan *p, const sc_agg_spec *spec, const sc_schema *in);
/* Add row `row` of `b` (arrival serial `seq`); `scratch` is a reusable buffer. */
int sc_acc_update(const sc_agg_plan *p, sc_acc *a, const sc_batch *b, int64_t row, uint64_t seq,
                  sc_buf *scratch);
/* a = merge(a, o) as _Acc.merge (o is left unchanged). */
int sc_acc_merge(const sc_agg_plan *p, sc_acc *a, const sc_acc *o);
/* Write the result into out[row, col] (the column's physical type decides int / float). */
int sc_acc_write(const sc_agg_plan *p, const sc_acc *a, sc_batch *out, int32_t col, int64_t row);
/* Free what the accumulator holds; it is left zeroed (a fresh accumulator). */
void sc_acc_free(const sc_agg_plan *p, sc_acc *a);

/* A checked copy of a keyed spec. Output columns may be SC_OUT_INPUT / SC_OUT_AGG, and
 * SC_OUT_WSTART / SC_OUT_WEND when `window`; each must have the physical type its source
 * gives. */
typedef struct sc_keyed_plan {
    int32_t *keys;
    int32_t nkeys;
    sc_agg_plan *aggs;
    int32_t naggs;
    sc_out_col *outs;
    int32_t nouts;
} sc_keyed_plan;
int sc_keyed_plan_init(sc_keyed_plan *kp, const sc_keyed_spec *spec, const sc_schema *in,
                       const sc_schema *out, bool window);
void sc_keyed_plan_free(sc_keyed_plan *kp);

/* x / n correctly rounded to the nearest double (ties to even), as Python's int / int. */
double sc_div_i64(int64_t x, int64_t n);

/* dst = a deep copy of src (schemas copied, a fresh side log when src->side is set). */
/* Copy the hidden columns (seq, pos) of in[irow] to out[orow]. */
static inline void sc_copy_hidden(sc_batch *out, int64_t orow, const sc_batch *in, int64_t irow) {
    sc_batch_set_i64(out, SC_COL_SEQ, orow, sc_batch_get_i64(in, SC_COL_SEQ, irow));
    sc_batch_set_i64(out, SC_COL_POS, orow, sc_batch_get_i64(in, SC_COL_POS, irow));
}

/* Output chain builder: rows appended to batches of the op's output schema (a new batch
 * when the current one is full), chained in order. */
typedef struct sc_emitter {
    sc_op_base *base;
    const sc_batch *in;
    sc_batch *head, *tail;
    int64_t rows;
} sc_emitter;
/* Next output row: *b, *row (the row counts in (*b)->nrows already; write its cells now). */
int sc_emit_row(sc_emitter *e, sc_batch **b, int64_t *row);
/* Finish an input: counts rows_out; appends an empty batch when nothing was emitted and the
 * input is a keyed sub-batch (group_n != 0); forwards `in` last when it is the eos batch,
 * else releases it. *out receives the chain. On rc != SC_OK releases everything instead. */
int sc_emit_finish(sc_emitter *e, sc_batch *in, sc_batch **out, int rc);

#endif
