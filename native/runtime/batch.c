#define _GNU_SOURCE /* PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP */
/* batch: see batch.h for the contract. */
#include "batch.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "atomic_ext.h"
#include "ring.h"

/* ------------------------------------------------------------------ the CPU */

static int cpu_flags = -1; /* -1: not asked yet */
int sc_cpu_flags(void) {
    int f = __atomic_load_n(&cpu_flags, __ATOMIC_RELAXED);
    if (f >= 0) return f;
    f = 0;
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("popcnt")) {
        f |= SC_CPU_POPCNT;
        if (__builtin_cpu_supports("avx2")) f |= SC_CPU_AVX2;
        if (__builtin_cpu_supports("bmi2") && !__builtin_cpu_is("znver1") && !__builtin_cpu_is("znver2"))
            f |= SC_CPU_PEXT;
        if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")) f |= SC_CPU_AVX512BW;
        if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
            __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw"))
            f |= SC_CPU_AVX512DQ;
    }
#endif
    __atomic_store_n(&cpu_flags, f, __ATOMIC_RELAXED);
    return f;
}

/* ------------------------------------------------------------------ bitmaps */

/* Set bits of `words` 64-bit words from p; `hw`: by the builtin (the popcnt instruction in
 * a caller built for it), else by sc_popcount64. Inlined into each caller below. */
static inline __attribute__((always_inline)) int64_t count_words_by(const uint8_t *p, int64_t words, bool hw) {
    int64_t cnt = 0;
    for (int64_t k = 0; k < words; k++) {
        uint64_t w;
        memcpy(&w, p + 8 * k, 8);
        cnt += hw ? __builtin_popcountll(w) : sc_popcount64(w);
    }
    return cnt;
}

static int64_t count_words(const uint8_t *p, int64_t words) { return count_words_by(p, words, false); }

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__POPCNT__)
/* The same with the popcnt instruction, where the CPU has it (checked once at run time): a
 * baseline x86-64 build counts in a dozen operations a word. The driver thread counts every
 * exported column's bitmap (arrow_bridge.c, count_nulls). */
__attribute__((target("popcnt"))) static int64_t count_words_popcnt(const uint8_t *p, int64_t words) {
    return count_words_by(p, words, true);
}

static int64_t count_words_fast(const uint8_t *p, int64_t words) {
    return sc_cpu_flags() & SC_CPU_POPCNT ? count_words_popcnt(p, words) : count_words(p, words);
}
#else
#define count_words_fast count_words
#endif

int64_t sc_bits_count(const uint8_t *bm, int64_t from, int64_t n) {
    int64_t cnt = 0, i = 0;
    for (; i < n && ((from + i) & 7); i++) cnt += sc_bit_get(bm, from + i);
    int64_t words = (n - i) / 64;
    if (words > 0) {
        cnt += count_words_fast(bm + ((from + i) >> 3), words);
        i += 64 * words;
    }
    for (; i < n; i++) cnt += sc_bit_get(bm, from + i);
    return cnt;
}

void sc_bits_read(uint8_t *dst, const uint8_t *src, int64_t src_off, int64_t n) {
    if (n <= 0) return;
    const uint8_t *p = src + (src_off >> 3);
    const unsigned s = (unsigned)(src_off & 7);
    const int64_t whole = n >> 3, nbytes = (n + 7) >> 3;
    if (s == 0) {
        memcpy(dst, p, (size_t)whole);
    } else {
        const int64_t last = (s + n - 1) >> 3; /* the source byte of the range's last bit */
        int64_t j = 0;
        for (; j + 8 <= whole && j + 8 <= last; j += 8) { /* output bytes j..j+7 from p[j..j+8] */
            uint64_t lo;
            memcpy(&lo, p + j, 8);
            uint64_t v = (lo >> s) | ((uint64_t)p[j + 8] << (64 - s));
            memcpy(dst + j, &v, 8);
        }
        for (; j < whole; j++) dst[j] = (uint8_t)((p[j] >> s) | (j + 1 <= last ? p[j + 1] << (8 - s) : 0));
    }
    if (nbytes > whole) { /* the last byte's n & 7 low bits; the rest of it kept */
        unsigned bits = (unsigned)(n & 7), at = (unsigned)((src_off + 8 * whole) & 7);
        const uint8_t *q = src + ((src_off + 8 * whole) >> 3);
        unsigned v = q[0] >> at;
        if (at + bits > 8) v |= (unsigned)q[1] << (8 - at);
        uint8_t m = (uint8_t)((1u << bits) - 1);
        dst[whole] = (uint8_t)((dst[whole] & ~m) | (v & m));
    }
}

/* ------------------------------------------------------------------ a new thread's heap */

/* The request that makes glibc sort what waits in an arena: above its small-request shortcuts,
 * below its mmap threshold, and of a size no chunk is likely to fit exactly. */
#define MALLOC_WARM_BYTES ((size_t)(96 << 10) + 40)

void sc_malloc_warm(void) {
    void *small = malloc(1);
    void *large = malloc(MALLOC_WARM_BYTES);
    __asm__ volatile("" : : "r"(small), "r"(large) : "memory"); /* not elided as unused */
    free(large);
    free(small);
}

/* ------------------------------------------------------------------ column buffers */

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define COLBUF_CACHING 0
#else
#define COLBUF_CACHING 1
#endif

/* Each buffer starts 16 bytes before the pointer handed out (malloc's alignment kept): its
 * usable size. */
typedef struct colbuf_hdr {
    size_t cap;
    uint64_t pad;
} colbuf_hdr;
_Static_assert(sizeof(colbuf_hdr) == 16, "the header keeps 16-byte alignment");

/* Size classes from SC_COLBUF_MIN up: four per power of two (a cached buffer is at most 25%
 * larger than asked for); larger than the last class: not cached. */
#define COLBUF_MIN_LOG 14
#define COLBUF_CLASSES (4 * (31 - COLBUF_MIN_LOG))
/* A request may take a cached buffer up to this many classes larger (4: twice the class's size). */
#define COLBUF_SPILL 4

/* The cached buffers of one class, in order of arrival: a ring of (buffer, when it came), the
 * oldest at `lo`. A request takes the newest (likeliest still in a CPU cache); a full cache
 * and trim release the oldest of all classes. Kept apart from the buffers, so that neither
 * handing one out nor caching one reads or writes another buffer's memory (a list threaded
 * through the buffers took a cache miss on a neighbour's header at every step). */
typedef struct colbuf_entry {
    colbuf_hdr *h;
    uint64_t ns;
} colbuf_entry;
typedef struct colbuf_ring {
    colbuf_entry *e;
    uint32_t cap, lo, n;
} colbuf_ring;
/* adaptive: a few short critical sections (a ring's push or pop); two workers that start their
 * batches together allocate their outputs together, and a sleeping waiter took 10-40 us to wake */
static pthread_mutex_t colbuf_mu = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP;
static colbuf_ring colbuf_rings[COLBUF_CLASSES];
static int64_t colbuf_bytes;

static int64_t colbuf_limit;
static pthread_once_t colbuf_once = PTHREAD_ONCE_INIT;

static void colbuf_limit_init(void) {
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    int64_t lim = pages > 0 && size > 0 ? (int64_t)pages * size / 16 : SC_COLBUF_CACHE_MAX;
    const int64_t lo = (int64_t)64 << 20;
    colbuf_limit = lim < lo ? lo : lim > SC_COLBUF_CACHE_MAX ? SC_COLBUF_CACHE_MAX : lim;
}

int64_t sc_colbuf_limit(void) {
    pthread_once(&colbuf_once, colbuf_limit_init);
    return colbuf_limit;
}

/* The class of a request of `bytes` (>= SC_COLBUF_MIN) and that class's size; -1 when too big. */
static int colbuf_class(size_t bytes, size_t *cap) {
    int lg = 63 - __builtin_clzll((unsigned long long)bytes); /* 2^lg <= bytes < 2^(lg+1) */
    size_t step = (size_t)1 << (lg - 2);
    size_t q = (bytes + step - 1) / step; /* 4..8 quarters of 2^lg */
    if (q == 8) lg++, q = 4;
    int k = 4 * (lg - COLBUF_MIN_LOG) + (int)(q - 4);
    if (k < 0 || k >= COLBUF_CLASSES) return -1;
    *cap = q * ((size_t)1 << (lg - 2));
    return k;
}

/* The size of class k's buffers (the inverse of colbuf_class). */
static size_t colbuf_class_cap(int k) {
    return (size_t)(4 + k % 4) << (k / 4 + COLBUF_MIN_LOG - 2);
}

/* Cache h as the newest of class k (colbuf_mu held); false when its ring cannot grow. A
 * ring's room is a power of two (positions are masked). */
static bool colbuf_push(colbuf_hdr *h, int k) {
    SC_INVARIANT(h->cap == colbuf_class_cap(k), "a cached buffer's size is its class's");
    colbuf_ring *r = &colbuf_rings[k];
    if (r->n == r->cap) { /* twice the room, the oldest first */
        uint32_t cap = r->cap ? 2 * r->cap : 64;
        colbuf_entry *e = malloc((size_t)cap * sizeof *e);
        if (!e) return false;
        for (uint32_t i = 0; i < r->n; i++) e[i] = r->e[(r->lo + i) & (r->cap - 1)];
        free(r->e);
        r->e = e;
        r->cap = cap;
        r->lo = 0;
    }
    /* the time under the lock: each ring stays in order of arrival */
    r->e[(r->lo + r->n) & (r->cap - 1)] = (colbuf_entry){ h, sc_now_ns() };
    r->n++;
    colbuf_bytes += (int64_t)colbuf_class_cap(k);
    return true;
}

/* The newest cached buffer of class k, taken out (NULL: none); colbuf_mu held. Its memory
 * is not read here (its size is its class's): the caller's first touch is its first miss. */
static colbuf_hdr *colbuf_pop_newest(int k) {
    colbuf_ring *r = &colbuf_rings[k];
    if (!r->n) return NULL;
    r->n--;
    colbuf_bytes -= (int64_t)colbuf_class_cap(k);
    return r->e[(r->lo + r->n) & (r->cap - 1)].h;
}

/* Take the oldest cached buffers out while the cache holds more than `over` bytes or the
 * oldest came before `born_before` (colbuf_mu held), adding their sizes to *freed; they go to
 * `out` (room for `room`). Returns how many; `room` of them when `out` filled before the rule
 * held (colbuf_evict_unlock frees them and comes back for the rest). */
static int colbuf_evict_oldest(int64_t over, uint64_t born_before, int64_t *freed, colbuf_hdr **out, int room) {
    int got = 0;
    while (got < room) {
        int oldest = -1; /* the class whose oldest buffer came first */
        for (int k = 0; k < COLBUF_CLASSES; k++) {
            colbuf_ring *r = &colbuf_rings[k];
            if (r->n && (oldest < 0 || r->e[r->lo].ns < colbuf_rings[oldest].e[colbuf_rings[oldest].lo].ns))
                oldest = k;
        }
        if (oldest < 0) break;
        colbuf_ring *r = &colbuf_rings[oldest];
        colbuf_entry e = r->e[r->lo];
        if (!(colbuf_bytes > over || e.ns < born_before)) break;
        r->lo = (r->lo + 1) & (r->cap - 1);
        r->n--;
        colbuf_bytes -= (int64_t)colbuf_class_cap(oldest);
        if (freed) *freed += (int64_t)colbuf_class_cap(oldest);
        out[got++] = e.h;
    }
    return got;
}

static void colbuf_release(colbuf_hdr **out, int n) {
    for (int i = 0; i < n; i++) free(out[i]);
}

/* With colbuf_mu held and out[0..nout) to free: take the oldest buffers out by
 * colbuf_evict_oldest's rule and free them all, `room` at a time, each lot once the lock is
 * let go; returns with the lock released. */
static void colbuf_evict_unlock(int64_t over, uint64_t born_before, int64_t *freed, colbuf_hdr **out, int nout,
                                int room) {
    for (;;) {
        nout += colbuf_evict_oldest(over, born_before, freed, out + nout, room - nout);
        if (nout < room) break; /* the rule holds: nothing more to take */
        pthread_mutex_unlock(&colbuf_mu);
        colbuf_release(out, nout);
        nout = 0;
        pthread_mutex_lock(&colbuf_mu);
    }
    pthread_mutex_unlock(&colbuf_mu);
    colbuf_release(out, nout);
}

/* Touch every page of a new buffer the cache may keep, now. A buffer's first user rarely
 * writes all of it (an output of the rows a filter kept in a batch sized for all of them), and
 * the pages it leaves untouched would fault in under a later user, run after run: with the
 * cache warm, a paced run still took 34K, 12K, 3K page faults in its second to fourth runs.
 * Faulting them in here puts every fault of a cached buffer in the run that first needed it.
 * Only up to COLBUF_PREFAULT_MAX: a batch's column is at most 64K rows of 16 bytes, and a
 * larger buffer may be given room it never uses. Sanitizer builds cache nothing: no touch. */
#define COLBUF_PREFAULT_MAX ((size_t)4 << 20)
static void prefault(void *p, size_t n) {
    if (!COLBUF_CACHING || n > COLBUF_PREFAULT_MAX) return;
    volatile char *c = p;
    for (size_t i = 0; i < n; i += 4096) c[i] = 0;
    if (n) c[n - 1] = 0;
}

void *sc_colbuf_alloc(size_t bytes) {
    if (bytes == 0) bytes = 1;
    size_t cap = bytes;
    int k = bytes >= SC_COLBUF_MIN ? colbuf_class(bytes, &cap) : -1;
    if (k < 0) cap = bytes;
    if (COLBUF_CACHING && k >= 0) {
        /* the request's class, else the smallest cached buffer of the next COLBUF_SPILL
         * classes (at most twice the class's size): batches of varying sizes (a paced source's
         * catch-up batches, filtered outputs sized to their rows) would otherwise leave the
         * cache full of buffers a class too small or too large while every request faults
         * in fresh memory, run after run */
        pthread_mutex_lock(&colbuf_mu);
        colbuf_hdr *f = NULL;
        for (int j = k; !f && j < COLBUF_CLASSES && j <= k + COLBUF_SPILL; j++) f = colbuf_pop_newest(j);
        pthread_mutex_unlock(&colbuf_mu);
        if (f) return (char *)f + sizeof(colbuf_hdr);
    }
    colbuf_hdr *h = malloc(sizeof(colbuf_hdr) + cap);
    if (!h) return NULL;
    if (k >= 0) prefault(h, sizeof(colbuf_hdr) + cap);
    h->cap = cap;
    return (char *)h + sizeof(colbuf_hdr);
}

void *sc_colbuf_calloc(size_t n, size_t size) {
    if (size && n > SIZE_MAX / size) return NULL;
    void *p = sc_colbuf_alloc(n * size);
    if (p) memset(p, 0, n * size);
    return p;
}

/* Free up to COLBUF_LOT buffers under one taking of the lock (a batch frees a few per
 * column: when a run's old table is dropped while the next run computes, the thread freeing
 * it took the lock thousands of times against the workers allocating their outputs). */
#define COLBUF_LOT 32
static void colbuf_free_lot(void *const *ps, int n) {
    colbuf_hdr *keep[COLBUF_LOT], *out[COLBUF_LOT];
    int cls[COLBUF_LOT], nk = 0;
    int64_t limit = sc_colbuf_limit();
    for (int i = 0; i < n; i++) {
        if (!ps[i]) continue;
        colbuf_hdr *h = (colbuf_hdr *)((char *)ps[i] - sizeof(colbuf_hdr));
        size_t cap;
        int k = COLBUF_CACHING && h->cap >= SC_COLBUF_MIN ? colbuf_class(h->cap, &cap) : -1;
        if (k >= 0 && cap == h->cap && (int64_t)cap <= limit) {
            keep[nk] = h;
            cls[nk++] = k;
        } else {
            free(h);
        }
    }
    if (!nk) return;
    /* kept; a full cache lets its oldest buffers go to make room. A cache that refused new
     * buffers instead stayed filled with the sizes of whatever ran first: paced runs after
     * bulk runs in one kernel faulted in 10-100K fresh pages each (1.6 us a page on a VM),
     * their batches' latency with them */
    int nout = 0;
    pthread_mutex_lock(&colbuf_mu);
    for (int i = 0; i < nk; i++)
        if (!colbuf_push(keep[i], cls[i])) out[nout++] = keep[i]; /* no room to note it: freed */
    colbuf_evict_unlock(limit, 0, NULL, out, nout, COLBUF_LOT);
}

void sc_colbuf_free_n(void *const *ps, int64_t n) {
    for (int64_t i = 0; i < n; i += COLBUF_LOT) colbuf_free_lot(ps + i, (int)(n - i < COLBUF_LOT ? n - i : COLBUF_LOT));
}

size_t sc_colbuf_size(const void *p) {
    return ((const colbuf_hdr *)((const char *)p - sizeof(colbuf_hdr)))->cap;
}

void sc_colbuf_free(void *p) {
    if (p) colbuf_free_lot(&p, 1);
}

void *sc_colbuf_realloc(void *p, size_t bytes) {
    if (!p) return sc_colbuf_alloc(bytes);
    colbuf_hdr *h = (colbuf_hdr *)((char *)p - sizeof(colbuf_hdr));
    if (bytes <= h->cap) return p;
    if (h->cap < SC_COLBUF_MIN && bytes < SC_COLBUF_MIN) { /* small: libc's realloc */
        colbuf_hdr *q = realloc(h, sizeof(colbuf_hdr) + bytes);
        if (!q) return NULL;
        q->cap = bytes;
        return (char *)q + sizeof(colbuf_hdr);
    }
    void *q = sc_colbuf_alloc(bytes);
    if (!q) return NULL;
    memcpy(q, p, h->cap);
    sc_colbuf_free(p);
    return q;
}

int64_t sc_colbuf_trim(uint64_t age_ns) {
    uint64_t now = sc_now_ns();
    /* cached before `cutoff` is cached at least age_ns ago (age 0: everything) */
    uint64_t cutoff = !age_ns ? UINT64_MAX : age_ns > now ? 0 : now - age_ns + 1;
    int64_t freed = 0;
    colbuf_hdr *out[64];
    pthread_mutex_lock(&colbuf_mu);
    colbuf_evict_unlock(INT64_MAX, cutoff, &freed, out, 0, 64);
    return freed;
}

int64_t sc_colbuf_cached(void) {
    pthread_mutex_lock(&colbuf_mu);
    int64_t n = colbuf_bytes;
    pthread_mutex_unlock(&colbuf_mu);
    return n;
}

struct sc_batch_pool {
    uint32_t size;
    int32_t ncols;
    int64_t rows;
    int64_t utf8_bytes;
    sc_col_type *types;
    sc_batch *batches;
    sc_ring *free_list;       /* MPMC ring of free sc_batch* */
    sc_atomic_i64 in_use;
#ifdef SC_DEBUG
    sc_atomic_u64 *out_flags; /* 1 while a batch is out: catches double release */
#endif
};

static int64_t bitmap_bytes(int64_t bits) { return (bits + 7) / 8; }

static int alloc_column(sc_column *c, sc_col_type t, int64_t rows, int64_t utf8_bytes) {
    memset(c, 0, sizeof *c);
    c->type = t;
    c->validity = sc_colbuf_alloc((size_t)bitmap_bytes(rows));
    if (!c->validity) return SC_ENOMEM;
    switch (t) {
    case SC_COL_INT64: c->values = sc_colbuf_alloc((size_t)rows * sizeof(int64_t)); break;
    case SC_COL_DOUBLE: c->values = sc_colbuf_alloc((size_t)rows * sizeof(double)); break;
    case SC_COL_BOOL: c->values = sc_colbuf_calloc((size_t)bitmap_bytes(rows), 1); break;
    case SC_COL_UTF8:
        c->offsets = sc_colbuf_calloc((size_t)rows + 1, sizeof(int32_t));
        c->data = sc_colbuf_alloc((size_t)(utf8_bytes > 0 ? utf8_bytes : 1));
        c->data_cap = utf8_bytes;
        if (!c->offsets || !c->data) return SC_ENOMEM;
        return SC_OK;
    default: return SC_EINVAL;
    }
    return c->values ? SC_OK : SC_ENOMEM;
}

/* Column c's buffers into ps (at most 4); returns how many. */
static int column_buffers(const sc_column *c, void **ps) {
    ps[0] = c->validity;
    ps[1] = c->borrowed ? NULL : c->values;
    ps[2] = c->offsets;
    ps[3] = c->data;
    return 4;
}

/* Every column's buffers of b, a lot at a time. */
static void free_columns(sc_batch *b) {
    void *ps[COLBUF_LOT];
    int n = 0;
    for (int32_t c = 0; c < b->ncols; c++) {
        if (n + 4 > COLBUF_LOT) {
            sc_colbuf_free_n(ps, n);
            n = 0;
        }
        n += column_buffers(&b->cols[c], ps + n);
    }
    sc_colbuf_free_n(ps, n);
}

void sc_batch_reset(sc_batch *b) {
    b->serial = 0;
    b->first_row = 0;
    b->nrows = 0;
    b->marker_ns = 0;
    b->next = NULL;
    b->part = 0;
    b->group_n = 0;
    b->eos = 0;
    b->publish = 0;
    b->lean = 0;
    b->nulls_counted = 0;
    for (int32_t i = 0; i < b->ncols; i++) {
        sc_column *c = &b->cols[i];
        if (c->views) { /* a string column again (views belong to standalone batches only) */
            if (!c->borrowed) sc_colbuf_free(c->values);
            c->values = NULL;
            c->views = c->borrowed = 0;
        }
        memset(c->validity, 0xFF, (size_t)bitmap_bytes(b->capacity));
        c->null_count = 0;
        if (c->offsets) c->offsets[0] = 0;
    }
}

int sc_batch_pool_destroy(sc_batch_pool *p) {
    if (!p) return SC_OK;
    int64_t out = sc_i64_load_acquire(&p->in_use);
    if (p->batches) {
        for (uint32_t i = 0; i < p->size; i++) {
            sc_batch *b = &p->batches[i];
            if (!b->cols) continue;
            free_columns(b);
            free(b->cols);
        }
    }
    free(p->batches);
    free(p->types);
    sc_ring_destroy(p->free_list);
#ifdef SC_DEBUG
    free(p->out_flags);
#endif
    free(p);
    return out == 0 ? SC_OK : SC_EINTERNAL;
}

int sc_batch_pool_create(sc_batch_pool **out, const sc_col_type *types, int32_t ncols,
                         int64_t row_capacity, int64_t utf8_bytes, uint32_t max_batches) {
    if (!out || ncols < 0 || (ncols > 0 && !types) || row_capacity <= 0 ||
        row_capacity > INT32_MAX - 1 || max_batches == 0 || utf8_bytes < 0 || utf8_bytes > INT32_MAX)
        return SC_EINVAL;
    for (int32_t i = 0; i < ncols; i++)
        if (types[i] < SC_COL_INT64 || types[i] > SC_COL_UTF8) return SC_EINVAL;
    sc_batch_pool *p = calloc(1, sizeof *p);
    if (!p) return SC_ENOMEM;
    p->size = max_batches;
    p->ncols = ncols;
    p->rows = row_capacity;
    p->utf8_bytes = utf8_bytes;
    sc_i64_init(&p->in_use, 0);
    int rc = SC_ENOMEM;
    p->types = malloc(sizeof(sc_col_type) * (size_t)(ncols > 0 ? ncols : 1));
    p->batches = calloc(max_batches, sizeof(sc_batch));
#ifdef SC_DEBUG
    p->out_flags = calloc(max_batches, sizeof(sc_atomic_u64));
    if (!p->out_flags) goto fail;
#endif
    if (!p->types || !p->batches) goto fail;
    if (ncols > 0) memcpy(p->types, types, sizeof(sc_col_type) * (size_t)ncols);
    rc = sc_ring_create(&p->free_list, SC_RING_MPMC, max_batches);
    if (rc) goto fail;
    for (uint32_t i = 0; i < max_batches; i++) {
        sc_batch *b = &p->batches[i];
        b->capacity = row_capacity;
        b->pool = p;
        b->index = i;
        b->cols = calloc((size_t)(ncols > 0 ? ncols : 1), sizeof(sc_column));
        rc = SC_ENOMEM;
        if (!b->cols) goto fail;
        b->ncols = ncols;
        for (int32_t c = 0; c < ncols; c++)
            if ((rc = alloc_column(&b->cols[c], types[c], row_capacity, utf8_bytes))) goto fail;
        sc_batch_reset(b);
        if ((rc = sc_ring_try_push(p->free_list, b))) goto fail;
    }
    *out = p;
    return SC_OK;
fail:
    sc_batch_pool_destroy(p);
    return rc;
}

int sc_batch_acquire(sc_batch_pool *p, sc_batch **out) {
    void *item;
    int rc = sc_ring_try_pop(p->free_list, &item);
    if (rc == SC_EEMPTY) return SC_EFULL;
    if (rc) return rc;
    sc_batch *b = item;
#ifdef SC_DEBUG
    uint64_t was = 0;
    SC_INVARIANT(sc_u64_cas_acqrel(&p->out_flags[b->index], &was, 1), "batch handed out twice");
#endif
    sc_i64_fetch_add_relaxed(&p->in_use, 1);
    *out = b;
    return SC_OK;
}

/* A standalone batch (exec/sc_batch_new: pool == NULL) owns its columns and itself. */
void sc_batch_free_standalone(sc_batch *b) {
    free_columns(b);
    sc_extbuf_unref(b->ext);
    if (b->fill) sc_extbuf_unref(b->fill_src); /* released before its rows were put in */
    free(b->cols);
    free(b);
}

void sc_batch_release(sc_batch *b) {
    if (!b) return;
    sc_batch_pool *p = b->pool;
    if (!p) {
        sc_batch_free_standalone(b);
        return;
    }
#ifdef SC_DEBUG
    uint64_t was = 1;
    SC_INVARIANT(sc_u64_cas_acqrel(&p->out_flags[b->index], &was, 0), "batch released twice");
#endif
    sc_batch_reset(b);
    sc_i64_fetch_add_relaxed(&p->in_use, -1);
    /* The ring holds every batch of the pool, so there is always a free slot; but a slot a
     * concurrent acquire has claimed is reusable only once that pop publishes it, so a push
     * may briefly see "full" (seen under load in the debug stress run): retry until it lands. */
    int rc;
    uint32_t spins = 0;
    while ((rc = sc_ring_try_push(p->free_list, b)) == SC_EFULL) {
        sc_cpu_relax();
        SC_INVARIANT(++spins < (1u << 30), "batch free list overflow");
    }
    (void)rc;
    (void)spins;
}

void sc_batch_release_chain(sc_batch *b) {
    while (b) {
        sc_batch *n = b->next;
        sc_batch_release(b);
        b = n;
    }
}

uint32_t sc_batch_pool_in_use(const sc_batch_pool *p) { return (uint32_t)sc_i64_load_acquire(&p->in_use); }
uint32_t sc_batch_pool_size(const sc_batch_pool *p) { return p->size; }

int sc_batch_set_utf8(sc_batch *b, int32_t col, int64_t row, const char *s, int32_t len) {
    if (col < 0 || col >= b->ncols || row < 0 || row >= b->capacity || len < 0) return SC_EINVAL;
    sc_column *c = &b->cols[col];
    if (c->type != SC_COL_UTF8) return SC_ETYPE;
    int64_t start = c->offsets[row];
    if (start + len > c->data_cap) return SC_EFULL;
    memcpy(c->data + start, s, (size_t)len);
    c->offsets[row + 1] = (int32_t)(start + len);
    if (!sc_bit_get(c->validity, row)) { sc_bit_set(c->validity, row, true); c->null_count--; }
    return SC_OK;
}
