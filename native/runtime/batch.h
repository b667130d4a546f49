/* batch: small columnar batches (Arrow memory layout) with serial numbers, allocated from a
 * bounded pool.
 *
 * Layout per column (Arrow-compatible buffers, so the lowering can export them through the
 * Arrow C data interface without copying):
 *   validity  bitmap, LSB-first, bit = 1 means valid (always allocated, capacity bits);
 *   INT64     int64_t values[capacity];
 *   DOUBLE    double values[capacity];
 *   BOOL      bit-packed values bitmap (LSB-first);
 *   UTF8      int32_t offsets[capacity + 1] (offsets[0] = 0) and a byte buffer of utf8_bytes.
 *
 * Contract
 * - Progress: sc_batch_acquire / sc_batch_release are lock-free (a Vyukov MPMC ring of free
 *   batches) and never wait: acquire reports SC_EFULL when every batch is in use.
 * - Ordering: `serial` is the sequence number of the batch in arrival order at the stage that
 *   owns it (stages renumber on hand-off); `first_row` is the serial of its first row, rows
 *   of a batch being consecutive.
 * - Memory: everything is allocated in sc_batch_pool_create (max_batches batches of the
 *   schema's capacity); nothing is allocated afterwards; a batch is owned by exactly one
 *   thread at a time (the pool never touches a batch that is out).
 * - Thread safety: a batch itself is not synchronized; hand it over through a ring, the
 *   reorder buffer or the hybrid queue (which publish with release/acquire).
 */
#ifndef SC_RUNTIME_BATCH_H
#define SC_RUNTIME_BATCH_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "../common/sc_status.h"

/* Column buffers (validity, values, offsets, bytes) and other per-batch buffers that leave
 * the runtime (exported string views): malloc-like, but a buffer of SC_COLBUF_MIN bytes or
 * more that is freed goes to a process-wide cache and is handed out again before libc is
 * asked. glibc gives each thread an arena whose 64 MB heaps are unmapped as soon as they are
 * empty, so every run's output (freed later, when Polars drops it) was faulted in afresh:
 * 136K page faults and a quarter of the CPU of a 4M-row stateless run. The cache keeps at most
 * sc_colbuf_limit() bytes: when a freed buffer would take it beyond, the buffers cached
 * longest are released to make room, so it holds the sizes the kernel's latest runs use;
 * sc_colbuf_trim releases buffers cached longer than a given age.
 * Sizes are rounded up to classes, four per power of two; a request whose class is empty takes
 * the smallest cached buffer of the next four classes (at most twice its size), which goes
 * back to its own class when freed. A new buffer of up to 4 MB from libc has every page
 * faulted in before it is returned, so no later user of it faults.
 * Every buffer from these functions is freed by sc_colbuf_free (and never by free(): its size
 * header would make libc abort). Sanitizer builds cache nothing, so ASan still sees every
 * use after free. */
/* Called first on each thread the runtime starts (workers, the pacer). A thread's first malloc
 * attaches it to an arena, and glibc hands a new thread one that an exited thread left, with
 * every chunk freed into it since (a run's output, dropped after the run's threads ended)
 * still to be sorted into its bins: the thread's first requests sort them. A paced run's
 * first batch measured 0.4-3 ms in the pacer's first allocation alone, and queued the batches
 * due meanwhile behind it. This pays that when the thread starts, off every batch's path. */
void sc_malloc_warm(void);

#define SC_COLBUF_MIN (16 << 10)
#define SC_COLBUF_CACHE_MAX ((int64_t)1024 << 20)
/* The cache's limit in this process: a sixteenth of the machine's memory, from 64 MB to
 * SC_COLBUF_CACHE_MAX (a run's whole output is reused by the next run up to ~10M rows). */
int64_t sc_colbuf_limit(void);
void *sc_colbuf_alloc(size_t bytes);
void *sc_colbuf_calloc(size_t n, size_t size);
void *sc_colbuf_realloc(void *p, size_t bytes);
void sc_colbuf_free(void *p);
/* The usable bytes of a buffer from these functions (at least what was asked for). */
size_t sc_colbuf_size(const void *p);
/* sc_colbuf_free of each of ps[0..n) (NULLs skipped), the cache's lock taken once per 32. */
void sc_colbuf_free_n(void *const *ps, int64_t n);
/* Release every cached buffer cached at least `age_ns` ago (0: all); returns the bytes freed. */
int64_t sc_colbuf_trim(uint64_t age_ns);
/* Bytes in the cache now. */
int64_t sc_colbuf_cached(void);

typedef enum {
    SC_COL_INT64 = 1,
    SC_COL_DOUBLE = 2,
    SC_COL_BOOL = 3,
    SC_COL_UTF8 = 4
} sc_col_type;

typedef struct sc_column {
    sc_col_type type;
    int64_t null_count;
    uint8_t *validity; /* capacity bits, LSB-first, 1 = valid */
    void *values;      /* int64_t[] | double[] | bool bitmap; NULL for UTF8 */
    int32_t *offsets;  /* UTF8 only: capacity + 1 entries */
    char *data;        /* UTF8 only */
    int64_t data_cap;  /* UTF8 only: bytes available in data */
    uint8_t borrowed;  /* INT64 / DOUBLE / views: values point into buffers the batch's `ext`
                        * keeps alive (an imported Arrow array); never freed, written or moved */
    uint8_t views;     /* UTF8 only: the rows are in `values` as 16-byte Arrow string views,
                        * every string inline (at most 12 bytes), not in offsets / data. Only a
                        * column no operator reads has them (imported from Polars' "vu" and
                        * passed through to the sink); sc_batch_get_utf8 reads either form */
} sc_column;

/* Buffers owned elsewhere that batches point into (an imported Arrow array), reference
 * counted: every batch with a borrowed column holds one reference; `drop` runs once, when
 * the last reference goes (on whichever thread drops it). */
typedef struct sc_extbuf {
    int64_t refs; /* atomic */
    void (*drop)(struct sc_extbuf *e);
    uint8_t shared; /* outputs may keep pointing into these buffers (a Polars frame's: the
                     * user cannot change them, and holds them anyway); otherwise every
                     * output gets copies (exec/ops_filter_project.c, fused_output) */
} sc_extbuf;
static inline void sc_extbuf_ref(sc_extbuf *e) { __atomic_fetch_add(&e->refs, 1, __ATOMIC_RELAXED); }
static inline void sc_extbuf_unref(sc_extbuf *e) {
    if (e && __atomic_fetch_sub(&e->refs, 1, __ATOMIC_ACQ_REL) == 1) e->drop(e);
}

typedef struct sc_batch_pool sc_batch_pool;

typedef struct sc_batch {
    uint64_t serial;       /* sequence number of this batch in arrival order */
    uint64_t first_row;    /* serial of the first row */
    int64_t nrows;         /* rows in use */
    int64_t capacity;      /* rows available */
    int32_t ncols;
    sc_column *cols;
    uint64_t marker_ns;    /* latency marker: injection time (sc_now_ns), 0 = none */
    struct sc_batch *next; /* chains the outputs of one input (one serial, several batches) */
    uint32_t part;         /* partition of a keyed sub-batch (exec split) */
    uint32_t group_n;      /* sub-batches cut from one input by the keyed split (0: none) */
    uint8_t eos;           /* end-of-stream marker batch (exec) */
    uint8_t publish;       /* keyed sub-batch: the operator publishes its changed keys (exec) */
    uint8_t lean;          /* the exec layer's hidden columns hold no values (exec.h: a lean
                            * batch of a program where nothing reads them); row r of an
                            * unfiltered lean batch is serial first_row + r */
    uint8_t nulls_counted; /* every column's null_count was counted from its bitmap where the
                            * batch became an output chunk, on the worker, while its bitmaps
                            * are in that core's cache (exec/program.c, sink_coalesce): an
                            * Arrow export reads it instead of counting again */
    sc_batch_pool *pool;   /* NULL: a standalone batch (exec/sc_batch_new), freed on release */
    sc_extbuf *ext;        /* standalone: the buffers its borrowed columns point into (a
                            * reference, dropped when the batch is freed), or NULL */
    uint32_t index;        /* position in the pool */
    /* A batch pushed before its rows are in (exec/arrow_bridge: sc_arrow_defer): `fill` puts
     * them in on the worker that first needs them (the pool calls sc_batch_ready before an
     * operator sees the batch), reading rows [fill_off, fill_off + nrows) of `fill_src`, the
     * first of them sequence number fill_seq. Not NULL until then; a batch released unfilled
     * drops its reference to fill_src. */
    int (*fill)(struct sc_batch *b);
    sc_extbuf *fill_src;
    int64_t fill_off;
    int64_t fill_seq;
} sc_batch;

/* Put a deferred batch's rows in (see sc_batch.fill); SC_OK at once for any other batch. */
static inline int sc_batch_ready(sc_batch *b) { return b->fill ? b->fill(b) : 0; }

/* Create a pool of max_batches batches, each with `ncols` columns of `types`, room for
 * row_capacity rows, and utf8_bytes bytes per UTF8 column. */
int sc_batch_pool_create(sc_batch_pool **out, const sc_col_type *types, int32_t ncols,
                         int64_t row_capacity, int64_t utf8_bytes, uint32_t max_batches);
/* Free the pool and all its batches. Returns SC_OK, or SC_EINTERNAL if batches were still
 * out (they are freed anyway; the count is a leak report for the debug build). */
int sc_batch_pool_destroy(sc_batch_pool *p);
/* Take an empty batch (nrows = 0, all valid, serials 0, no marker, next NULL).
 * SC_EFULL when all batches are in use. */
int sc_batch_acquire(sc_batch_pool *p, sc_batch **out);
/* Give a batch back to its pool (one batch; see sc_batch_release_chain). */
void sc_batch_release(sc_batch *b);
/* Free a standalone batch (pool == NULL); sc_batch_release calls it. */
void sc_batch_free_standalone(sc_batch *b);
/* Release b and every batch chained after it through ->next. */
void sc_batch_release_chain(sc_batch *b);
/* Batches currently out of the pool. */
uint32_t sc_batch_pool_in_use(const sc_batch_pool *p);
uint32_t sc_batch_pool_size(const sc_batch_pool *p);
/* Empty the batch for reuse (keeps schema and pool membership). */
void sc_batch_reset(sc_batch *b);
/* Append a string to a UTF8 column at row `row`, which must be the next row written in that
 * column (offsets are cumulative). SC_EFULL if the bytes do not fit; SC_ETYPE, SC_EINVAL. */
int sc_batch_set_utf8(sc_batch *b, int32_t col, int64_t row, const char *s, int32_t len);

/* ---- inline accessors (no bounds checks beyond SC_DEBUG asserts in the callers) ---- */
static inline bool sc_bit_get(const uint8_t *bm, int64_t i) { return (bm[i >> 3] >> (i & 7)) & 1; }

/* Set bits of w. A build for baseline x86-64 has no popcnt instruction, and the builtin then
 * calls libgcc's table-driven routine; this is the same count in a dozen inline operations. */
static inline int sc_popcount64(uint64_t w) {
#if defined(__POPCNT__) || !defined(__x86_64__)
    return __builtin_popcountll(w);
#else
    w = w - ((w >> 1) & 0x5555555555555555ull);
    w = (w & 0x3333333333333333ull) + ((w >> 2) & 0x3333333333333333ull);
    w = (w + (w >> 4)) & 0x0f0f0f0f0f0f0f0full;
    return (int)((w * 0x0101010101010101ull) >> 56);
#endif
}

/* What this CPU can run beyond baseline x86-64, checked once per process (the first caller
 * asks the CPU; callers may race: same answer). Every kernel with a vector or popcnt form asks
 * here; 0 on other architectures. SC_CPU_PEXT: bmi2's pext is fast (it is microcoded, hundreds
 * of cycles, on AMD before Zen 3). SC_CPU_AVX512DQ: AVX-512 F, DQ, VL and BW (int64 <-> double
 * conversions in vectors). */
enum { SC_CPU_POPCNT = 1, SC_CPU_AVX2 = 2, SC_CPU_PEXT = 4, SC_CPU_AVX512BW = 8, SC_CPU_AVX512DQ = 16 };
int sc_cpu_flags(void);

/* Set bits among bm bits [from, from + n) (whole 64-bit words where it can). */
int64_t sc_bits_count(const uint8_t *bm, int64_t from, int64_t n);
/* dst bits [0, n) = src bits [src_off, src_off + n): a memcpy when src_off is a whole byte,
 * else 64 bits per shift where the source has the bytes; reads no src byte past the last
 * bit of the range and leaves dst's bits from n on in their byte as they were. */
void sc_bits_read(uint8_t *dst, const uint8_t *src, int64_t src_off, int64_t n);
static inline void sc_bit_set(uint8_t *bm, int64_t i, bool v) {
    if (v) bm[i >> 3] |= (uint8_t)(1u << (i & 7));
    else bm[i >> 3] &= (uint8_t)~(1u << (i & 7));
}
static inline bool sc_batch_is_valid(const sc_batch *b, int32_t col, int64_t row) {
    return sc_bit_get(b->cols[col].validity, row);
}
static inline void sc_batch_set_null(sc_batch *b, int32_t col, int64_t row) {
    sc_column *c = &b->cols[col];
    if (sc_bit_get(c->validity, row)) { sc_bit_set(c->validity, row, false); c->null_count++; }
    if (c->type == SC_COL_UTF8) c->offsets[row + 1] = c->offsets[row];
}
static inline void sc_batch_set_i64(sc_batch *b, int32_t col, int64_t row, int64_t v) {
    ((int64_t *)b->cols[col].values)[row] = v;
}
static inline void sc_batch_set_f64(sc_batch *b, int32_t col, int64_t row, double v) {
    ((double *)b->cols[col].values)[row] = v;
}
static inline void sc_batch_set_bool(sc_batch *b, int32_t col, int64_t row, bool v) {
    sc_bit_set((uint8_t *)b->cols[col].values, row, v);
}
static inline int64_t sc_batch_get_i64(const sc_batch *b, int32_t col, int64_t row) {
    return ((const int64_t *)b->cols[col].values)[row];
}
static inline double sc_batch_get_f64(const sc_batch *b, int32_t col, int64_t row) {
    return ((const double *)b->cols[col].values)[row];
}
static inline bool sc_batch_get_bool(const sc_batch *b, int32_t col, int64_t row) {
    return sc_bit_get((const uint8_t *)b->cols[col].values, row);
}
static inline const char *sc_batch_get_utf8(const sc_batch *b, int32_t col, int64_t row, int32_t *len) {
    const sc_column *c = &b->cols[col];
    if (c->views) { /* (length, then up to 12 bytes inline) */
        const char *v = (const char *)c->values + 16 * row;
        memcpy(len, v, 4);
        return v + 4;
    }
    *len = c->offsets[row + 1] - c->offsets[row];
    return c->data + c->offsets[row];
}

#endif
