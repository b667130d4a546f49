/* ops_window: tumbling / sliding / session windows per key with a global watermark (the
 * reference's WindowOp and _EventTime). See ops_state.h.
 *
 * Open windows live in a slab (ids reused through a free list) with their accumulators in a
 * parallel array. They close in (end, start, creation) order: the reference's heap of
 * (end, start, seq, uid) with lazy deletion pops live windows in exactly this order, since a
 * live window's current (end, start, seq) is unique. Sessions keep a binary heap indexed by
 * window (each window knows its position). Tumbling / sliding windows all have end =
 * start + size (saturating, so end never decreases as start grows): (end, start, creation)
 * order is (start, creation) order, so they sit in buckets, one per start, kept sorted by
 * start, each a list in creation order; closing takes whole buckets from the front, O(1)
 * per window instead of a heap's O(log open). Tumbling / sliding windows are found by
 * (key, start) in a map; sessions by key, in a list per key.
 *
 * Tumbling / sliding windows keyed by one int64 column (or by nothing) use a map of
 * (key value, null?, start) pairs instead (wpmap): a probe is one 24-byte slot read and two
 * compares, with no key encoding and no byte hash, and the batch's slots are prefetched a few
 * rows ahead, since a window's slot is rarely in cache (it was touched when the window opened,
 * a window's length of rows ago). Keys are equal exactly when sc_key_encode's bytes are.
 *
 * Tumbling windows whose aggregates all have a dense form (aggstate.h: count, sum, mean,
 * min, max of numbers) keep one record of a few words per window instead of an sc_acc per
 * aggregate, and process a batch in three passes: the rows in order (late test, the row's
 * window, the watermark, the windows it closes: taken out of the lookup and recorded with
 * their trigger row), then the records updated column by column (sc_dense_update), then the
 * recorded windows emitted in order and freed. This equals the row-at-a-time order: a
 * window closes only after every row that updates it (a row after its close is late: its time
 * is below the window's end, which is at most the watermark), and no window id is reused
 * within a batch, since closed windows are freed only in the third pass. Each row of a
 * tumbling window updates exactly one window, so each record sees its rows in arrival order.
 *
 * Time arithmetic is exact (128-bit) for the late test, window starts and session hits;
 * stored bounds (start, end) are int64 and saturate where the exact value does not fit, which
 * the reference could not write to its int64 / datetime column anyway. */
#include "ops_state.h"
#include "aggstate.h"

#include <stdlib.h>
#include <string.h>

#include "../runtime/atomic_ext.h"

typedef __int128 i128;

typedef struct win {
    int64_t start, last, end; /* last: sessions; the key value for a pair-map window (kin) */
    uint64_t seq;   /* creation order */
    uint64_t mhash; /* tumbling / sliding: map hash of (key, start) */
    uint32_t hpos;  /* session: position in the heap */
    uint32_t next;  /* tumbling / sliding: the next window of its bucket (NO_WIN: none) */
    uint32_t owner; /* session: its key's list; a pair-map window (kin): 1 if its key is null */
    sc_sbuf row;    /* SC_OUT_INPUT columns of the row that opened the window */
} win;

#define NO_WIN UINT32_MAX

/* Tumbling / sliding: the open windows of one start, in creation order. */
typedef struct wbucket {
    int64_t start;
    uint32_t head, tail;
} wbucket;

typedef struct sess_list {
    uint64_t hash; /* map hash of the key */
    uint32_t n, cap;
    uint32_t *w; /* open sessions of the key, in creation order */
} sess_list;

/* Tumbling / sliding windows of one int64 key column: (key, null?, start) -> window id. */
typedef struct wpslot {
    int64_t k, start;
    uint32_t id1; /* window id + 1 (0: empty), the top bit set when the key is null */
    uint32_t h;   /* the hash's low bits: its home slot, without reading the window */
} wpslot;

#define WP_NULL UINT32_C(0x80000000)

typedef struct wpmap {
    wpslot *s;
    size_t cap, n; /* cap: a power of two, load <= 1/2 */
} wpmap;

#define WP_AHEAD 8 /* rows between a slot's prefetch and its probe */

typedef struct window_op {
    sc_op_base base;
    sc_keyed_plan kp;
    int32_t kind, time_col;
    bool days; /* DATE time column: ticks = days * SC_US_PER_DAY */
    int64_t size, every, lateness;
    int32_t *icols, nicols; /* input columns kept per window */
    int32_t *oidx;          /* output column k (SC_OUT_INPUT): its index in icols */
    /* window slab */
    win *w;
    sc_acc *accs; /* window i: accs[i * naggs ..] */
    uint32_t wcap, whw, nfree;
    uint32_t *wfree;
    uint32_t *heap, hn; /* sessions */
    wbucket *bk;        /* tumbling / sliding: bk[blo .. bhi), by start */
    uint32_t blo, bhi, bcap;
    /* lookup */
    sc_kmap map;
    bool ipair;     /* tumbling / sliding by one int64 key column or none: wp, not map */
    int32_t kcol;   /* that column (-1: no key) */
    bool kin;       /* ipair, and the key is the only input column kept: no row blob */
    wpmap wp;
    /* tumbling / sliding: the last row's time range [slo, shi) and its first_start */
    bool scached;
    int64_t slo, shi;
    i128 sfirst;
    sess_list *sl;
    uint32_t slcap, slhw, nslfree;
    uint32_t *slfree;
    uint32_t *hit, hitcap;
    /* dense tumbling: window i's record is drec[(i + 1) * dn.words ..]; record 0 takes the
     * batch's late and dead rows (gid 0) and is never read */
    bool dense;
    sc_dense dn;
    uint64_t *drec;
    int64_t *gid;
    int64_t gidcap;
    int64_t *closed; /* the batch's closed windows: (trigger row, window id) pairs */
    int64_t nclosed, closedcap;
    /* event time */
    bool has_max;
    int64_t max_t;
    uint64_t seq, nwin;
    int64_t open;
    sc_buf kbuf, scratch;
} window_op;

static inline int64_t sat64(i128 x) { return x > INT64_MAX ? INT64_MAX : x < INT64_MIN ? INT64_MIN : (int64_t)x; }

/* ------------------------------------------------------------------------- pair map */

/* Bijective mixes (sc_imap_hash) of the key and of the start and null flag: no key value
 * collapses to one hash whatever the start (a multiply-fold of two words can). */
static inline uint64_t wp_hash(int64_t k, uint32_t knull, int64_t start) {
    return sc_imap_hash((int64_t)((uint64_t)k ^ sc_imap_hash(start ^ (int64_t)knull)));
}

static int wp_init(wpmap *m) {
    m->cap = 256;
    m->n = 0;
    m->s = sc_colbuf_calloc(m->cap, sizeof *m->s);
    return m->s ? SC_OK : SC_ENOMEM;
}

static inline void wp_prefetch(const wpmap *m, uint64_t h) { __builtin_prefetch(&m->s[h & (m->cap - 1)]); }

/* The window of (k, knull, start) with hash h: *id, true; or false. */
static inline bool wp_find(const wpmap *m, uint64_t h, int64_t k, uint32_t knull, int64_t start, uint32_t *id) {
    size_t mask = m->cap - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        const wpslot *s = &m->s[i];
        if (!s->id1) return false;
        if (s->k == k && s->start == start && (s->id1 & WP_NULL) == (knull ? WP_NULL : 0)) {
            *id = (s->id1 & ~WP_NULL) - 1;
            return true;
        }
    }
}

static void wp_put(wpslot *slots, size_t mask, const wpslot *x) {
    size_t i = x->h & mask;
    while (slots[i].id1) i = (i + 1) & mask;
    slots[i] = *x;
}

/* Insert (k, knull, start) -> id, absent; h is its hash. The map stays below 2^32 slots. */
static int wp_insert(wpmap *m, uint64_t h, int64_t k, uint32_t knull, int64_t start, uint32_t id) {
    if (id + 1 >= WP_NULL) return SC_ENOMEM;
    if ((m->n + 1) * 2 > m->cap) {
        size_t cap = m->cap * 2;
        if (cap > (size_t)UINT32_MAX) return SC_ENOMEM;
        wpslot *s = sc_colbuf_calloc(cap, sizeof *s);
        if (!s) return SC_ENOMEM;
        for (size_t i = 0; i < m->cap; i++)
            if (m->s[i].id1) wp_put(s, cap - 1, &m->s[i]);
        sc_colbuf_free(m->s);
        m->s = s;
        m->cap = cap;
    }
    wpslot x = { k, start, (id + 1) | (knull ? WP_NULL : 0), (uint32_t)h };
    wp_put(m->s, m->cap - 1, &x);
    m->n++;
    return SC_OK;
}

/* Remove window id (hash h): backward-shift deletion, so probes never see tombstones. */
static int wp_remove(wpmap *m, uint64_t h, uint32_t id) {
    size_t mask = m->cap - 1, i = h & mask;
    for (;; i = (i + 1) & mask) {
        if (!m->s[i].id1) return SC_EINTERNAL;
        if ((m->s[i].id1 & ~WP_NULL) == id + 1) break;
    }
    m->n--;
    for (size_t j = (i + 1) & mask;; j = (j + 1) & mask) {
        wpslot *x = &m->s[j];
        if (!x->id1) break;
        size_t home = x->h & mask;
        if (((j - home) & mask) >= ((j - i) & mask)) {
            m->s[i] = *x;
            i = j;
        }
    }
    m->s[i].id1 = 0;
    return SC_OK;
}

/* ------------------------------------------------------------------------- heap */

static inline bool w_less(const window_op *op, uint32_t a, uint32_t b) {
    const win *x = &op->w[a], *y = &op->w[b];
    if (x->end != y->end) return x->end < y->end;
    if (x->start != y->start) return x->start < y->start;
    return x->seq < y->seq;
}

static inline void h_set(window_op *op, uint32_t i, uint32_t wid) {
    op->heap[i] = wid;
    op->w[wid].hpos = i;
}

static void sift_up(window_op *op, uint32_t i) {
    uint32_t wid = op->heap[i];
    while (i > 0) {
        uint32_t p = (i - 1) / 2;
        if (!w_less(op, wid, op->heap[p])) break;
        h_set(op, i, op->heap[p]);
        i = p;
    }
    h_set(op, i, wid);
}

static void sift_down(window_op *op, uint32_t i) {
    uint32_t wid = op->heap[i];
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= op->hn) break;
        if (c + 1 < op->hn && w_less(op, op->heap[c + 1], op->heap[c])) c++;
        if (!w_less(op, op->heap[c], wid)) break;
        h_set(op, i, op->heap[c]);
        i = c;
    }
    h_set(op, i, wid);
}

static void heap_remove(window_op *op, uint32_t i) {
    uint32_t last = op->heap[--op->hn];
    if (i == op->hn) return;
    h_set(op, i, last);
    sift_up(op, i);
    sift_down(op, op->w[last].hpos);
}

/* ------------------------------------------------------------------------- windows */

/* The window slab, its accumulators, the free list and the pair map come from the column
 * buffer cache (runtime/batch.h): they grow to megabytes in every run, and a fresh run's
 * copies would otherwise be faulted in page by page again. */
static int win_grow(window_op *op) {
    uint32_t cap = op->wcap ? op->wcap * 2 : 64;
    size_t na = (size_t)op->kp.naggs;
    win *w = sc_colbuf_realloc(op->w, cap * sizeof *w);
    if (!w) return SC_ENOMEM;
    op->w = w;
    memset(w + op->wcap, 0, (cap - op->wcap) * sizeof *w);
    uint32_t *f = sc_colbuf_realloc(op->wfree, cap * sizeof *f);
    if (!f) return SC_ENOMEM;
    op->wfree = f;
    if (op->kind == SC_WIN_SESSION) {
        uint32_t *h = sc_colbuf_realloc(op->heap, cap * sizeof *h);
        if (!h) return SC_ENOMEM;
        op->heap = h;
    }
    if (op->dense) {
        uint64_t *d = sc_colbuf_realloc(op->drec, ((size_t)cap + 1) * (size_t)op->dn.words * sizeof *d);
        if (!d) return SC_ENOMEM;
        op->drec = d;
    } else if (na) {
        sc_acc *a = sc_colbuf_realloc(op->accs, cap * na * sizeof *a);
        if (!a) return SC_ENOMEM;
        memset(a + op->wcap * na, 0, (cap - op->wcap) * na * sizeof *a);
        op->accs = a;
    }
    op->wcap = cap;
    return SC_OK;
}

/* Tumbling / sliding: append window id (start set) to the bucket of its start, made (in
 * start order) when there is none. */
static int bucket_append(window_op *op, uint32_t id) {
    int64_t start = op->w[id].start;
    uint32_t lo = op->blo, hi = op->bhi;
    if (!(hi > lo && op->bk[hi - 1].start == start)) { /* not the newest bucket: search */
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (op->bk[mid].start < start) lo = mid + 1;
            else hi = mid;
        }
        if (lo == op->bhi || op->bk[lo].start != start) { /* a new bucket at lo */
            if (op->bhi == op->bcap && op->blo > 0) { /* reuse the room before blo */
                memmove(op->bk, op->bk + op->blo, (op->bhi - op->blo) * sizeof *op->bk);
                lo -= op->blo;
                op->bhi -= op->blo;
                op->blo = 0;
            }
            if (op->bhi == op->bcap) {
                uint32_t cap = op->bcap ? op->bcap * 2 : 16;
                wbucket *b = realloc(op->bk, cap * sizeof *b);
                if (!b) return SC_ENOMEM;
                op->bk = b;
                op->bcap = cap;
            }
            memmove(op->bk + lo + 1, op->bk + lo, (op->bhi - lo) * sizeof *op->bk);
            op->bhi++;
            op->bk[lo] = (wbucket){ start, NO_WIN, NO_WIN };
        }
        hi = lo + 1;
    }
    wbucket *b = &op->bk[hi - 1];
    op->w[id].next = NO_WIN;
    if (b->tail == NO_WIN) b->head = id;
    else op->w[b->tail].next = id;
    b->tail = id;
    return SC_OK;
}

/* A new window opened by in[row] (zeroed accumulators), on the heap (sessions) or in its bucket. */
static int win_new(window_op *op, const sc_batch *in, int64_t row, int64_t start, int64_t end, uint32_t *out) {
    if (!op->nfree && op->whw == op->wcap) {
        int rc = win_grow(op);
        if (rc) return rc;
    }
    uint32_t id = op->nfree ? op->wfree[--op->nfree] : op->whw++;
    win *w = &op->w[id];
    int rc = op->kin ? SC_OK : sc_row_encode(&w->row, in, row, op->icols, op->nicols);
    if (rc) {
        op->wfree[op->nfree++] = id;
        return rc;
    }
    w->start = w->last = start;
    w->end = end;
    w->seq = ++op->nwin;
    if (op->dense) sc_dense_init(&op->dn, op->drec + ((size_t)id + 1) * (size_t)op->dn.words);
    if (op->kind == SC_WIN_SESSION) {
        op->heap[op->hn] = id;
        w->hpos = op->hn++;
        sift_up(op, w->hpos);
    } else {
        rc = bucket_append(op, id);
        if (rc) {
            op->wfree[op->nfree++] = id;
            return rc;
        }
    }
    op->open++;
    *out = id;
    return SC_OK;
}

/* Free a window that is off the heap and out of the lookup (its row buffer is kept). */
static void win_free(window_op *op, uint32_t id) {
    size_t na = op->dense ? 0 : (size_t)op->kp.naggs;
    for (size_t j = 0; j < na; j++) sc_acc_free(&op->kp.aggs[j], &op->accs[id * na + j]);
    op->wfree[op->nfree++] = id;
    op->open--;
}

static int win_update(window_op *op, uint32_t id, const sc_batch *in, int64_t row) {
    if (op->dense) { /* the record is updated with the whole batch (sc_dense_update) */
        op->gid[row] = (int64_t)id + 1;
        return SC_OK;
    }
    size_t na = (size_t)op->kp.naggs;
    for (size_t j = 0; j < na; j++) {
        int rc = sc_acc_update(&op->kp.aggs[j], &op->accs[id * na + j], in, row, op->seq, &op->scratch);
        if (rc) return rc;
    }
    return SC_OK;
}

static void list_remove(sess_list *L, uint32_t id) {
    for (uint32_t i = 0; i < L->n; i++) {
        if (L->w[i] != id) continue;
        memmove(&L->w[i], &L->w[i + 1], (L->n - i - 1) * sizeof *L->w);
        L->n--;
        return;
    }
}

/* Take a closed or merged window out of the lookup. */
static int win_unlink(window_op *op, uint32_t id) {
    if (op->ipair) return wp_remove(&op->wp, op->w[id].mhash, id);
    if (op->kind != SC_WIN_SESSION) return sc_kmap_remove(&op->map, op->w[id].mhash, id);
    uint32_t lid = op->w[id].owner;
    sess_list *L = &op->sl[lid];
    list_remove(L, id);
    if (L->n) return SC_OK;
    op->slfree[op->nslfree++] = lid; /* keeps its array for reuse */
    return sc_kmap_remove(&op->map, L->hash, lid);
}

/* ------------------------------------------------------------------------- rows */

/* Tumbling / sliding: every window [start, start + size) with start a multiple of `every`
 * that holds t, as `range(first, t + 1, every)` in the reference. */
/* The first window start of `range(first, t + 1, every)`: every * floor((t - size) / every)
 * + every, in int64 where nothing can overflow (|t|, size < 2^62). */
static inline i128 first_start(const window_op *op, int64_t t) {
    const int64_t lim = INT64_C(1) << 62;
    if (t > -lim && t < lim && op->size < lim) {
        int64_t d = t - op->size, q = d / op->every;
        if (d % op->every != 0 && d < 0) q--;
        return (i128)q * op->every + op->every;
    }
    i128 d = (i128)t - op->size, q = d / op->every;
    if (d % op->every != 0 && d < 0) q--; /* floor division */
    return q * op->every + op->every;
}

/* first_start(t), remembered for the range of times that share it: event times mostly
 * arrive in order, so consecutive rows fall in one range and skip the division. The range
 * of t with first_start(t) = f is [f - every + size, f + size) (|t| < 2^62 there). */
static inline i128 cached_first_start(window_op *op, int64_t t) {
    if (op->scached && t >= op->slo && t < op->shi) return op->sfirst;
    i128 f = first_start(op, t);
    i128 lo = f - op->every + op->size, hi = f + op->size;
    op->scached = lo > INT64_MIN && hi < INT64_MAX;
    if (op->scached) {
        op->slo = (int64_t)lo;
        op->shi = (int64_t)hi;
        op->sfirst = f;
    }
    return f;
}

/* The row's key in the pair map: the int64 value and whether it is null (no key: 0). */
static inline void pair_key(const window_op *op, const sc_batch *in, int64_t row, int64_t *k, uint32_t *knull) {
    if (op->kcol < 0) {
        *k = 0;
        *knull = 0;
    } else if (!sc_batch_is_valid(in, op->kcol, row)) {
        *k = 0;
        *knull = 1;
    } else {
        *k = sc_batch_get_i64(in, op->kcol, row);
        *knull = 0;
    }
}

/* fixed_row of a window keyed by one int64 column (or none): the pair map. */
static int fixed_row_pair(window_op *op, const sc_batch *in, int64_t row, int64_t t) {
    int64_t k;
    uint32_t knull;
    pair_key(op, in, row, &k, &knull);
    int rc = SC_OK;
    for (i128 start = cached_first_start(op, t); !rc && start <= t; start += op->every) {
        if (!((i128)t < start + op->size)) continue;
        int64_t s = sat64(start);
        uint64_t h = wp_hash(k, knull, s);
        uint32_t id;
        if (!wp_find(&op->wp, h, k, knull, s, &id)) {
            rc = win_new(op, in, row, s, sat64(start + op->size), &id);
            if (rc) break;
            op->w[id].mhash = h;
            op->w[id].last = k;
            op->w[id].owner = knull;
            rc = wp_insert(&op->wp, h, k, knull, s, id);
            if (rc) break;
        }
        rc = win_update(op, id, in, row);
    }
    return rc;
}

static int fixed_row(window_op *op, const sc_batch *in, int64_t row, int64_t t) {
    size_t klen = op->kbuf.len;
    int rc = SC_OK;
    for (i128 start = first_start(op, t); !rc && start <= t; start += op->every) {
        if (!((i128)t < start + op->size)) continue;
        int64_t s = sat64(start);
        op->kbuf.len = klen;
        rc = sc_buf_reserve(&op->kbuf, 8);
        if (rc) break;
        memcpy(op->kbuf.p + klen, &s, 8);
        op->kbuf.len = klen + 8;
        uint64_t h = sc_hash_bytes(op->kbuf.p, op->kbuf.len), id;
        if (!sc_kmap_find(&op->map, h, op->kbuf.p, (uint32_t)op->kbuf.len, &id)) {
            uint32_t wid;
            bool ins;
            rc = win_new(op, in, row, s, sat64(start + op->size), &wid);
            if (rc) break;
            op->w[wid].mhash = h;
            id = wid;
            rc = sc_kmap_upsert(&op->map, h, op->kbuf.p, (uint32_t)op->kbuf.len, &id, &ins);
            if (rc) break;
        }
        rc = win_update(op, (uint32_t)id, in, row);
    }
    op->kbuf.len = klen;
    return rc;
}

/* The key's session list (created empty on first sight). */
static int session_list(window_op *op, uint32_t *lid) {
    if (!op->nslfree && op->slhw == op->slcap) {
        uint32_t cap = op->slcap ? op->slcap * 2 : 64;
        sess_list *l = realloc(op->sl, cap * sizeof *l);
        if (!l) return SC_ENOMEM;
        op->sl = l;
        memset(l + op->slcap, 0, (cap - op->slcap) * sizeof *l);
        uint32_t *f = realloc(op->slfree, cap * sizeof *f);
        if (!f) return SC_ENOMEM;
        op->slfree = f;
        op->slcap = cap;
    }
    uint64_t h = sc_hash_bytes(op->kbuf.p, op->kbuf.len);
    uint64_t id = op->nslfree ? op->slfree[op->nslfree - 1] : op->slhw;
    bool ins;
    int rc = sc_kmap_upsert(&op->map, h, op->kbuf.p, (uint32_t)op->kbuf.len, &id, &ins);
    if (rc) return rc;
    if (ins) {
        if (op->nslfree) op->nslfree--;
        else op->slhw++;
        op->sl[id].hash = h;
        op->sl[id].n = 0;
    }
    *lid = (uint32_t)id;
    return SC_OK;
}

static int list_push(sess_list *L, uint32_t id) {
    if (L->n == L->cap) {
        uint32_t cap = L->cap ? L->cap * 2 : 2;
        uint32_t *w = realloc(L->w, cap * sizeof *w);
        if (!w) return SC_ENOMEM;
        L->w = w;
        L->cap = cap;
    }
    L->w[L->n++] = id;
    return SC_OK;
}

/* Session: the row joins every open session of its key it is within `gap` of (strictly),
 * merging them into the earliest created; none: a new session [t, t + gap). */
static int session_row(window_op *op, const sc_batch *in, int64_t row, int64_t t) {
    int64_t gap = op->size;
    uint32_t lid;
    int rc = session_list(op, &lid);
    if (rc) return rc;
    sess_list *L = &op->sl[lid];
    if (L->n > op->hitcap) {
        uint32_t *h = realloc(op->hit, L->n * sizeof *h);
        if (!h) return SC_ENOMEM;
        op->hit = h;
        op->hitcap = L->n;
    }
    uint32_t nh = 0;
    for (uint32_t i = 0; i < L->n; i++) {
        const win *s = &op->w[L->w[i]];
        if ((i128)s->start - gap < t && (i128)t < (i128)s->last + gap) op->hit[nh++] = L->w[i];
    }
    if (nh == 0) {
        uint32_t id;
        rc = win_new(op, in, row, t, sat64((i128)t + gap), &id);
        if (!rc) {
            op->w[id].owner = lid;
            rc = list_push(&op->sl[lid], id);
        }
        return rc ? rc : win_update(op, id, in, row);
    }
    for (uint32_t i = 1; i < nh; i++) { /* by creation order */
        uint32_t x = op->hit[i], j = i;
        for (; j > 0 && op->w[op->hit[j - 1]].seq > op->w[x].seq; j--) op->hit[j] = op->hit[j - 1];
        op->hit[j] = x;
    }
    uint32_t keep = op->hit[0];
    size_t na = (size_t)op->kp.naggs;
    for (uint32_t i = 1; !rc && i < nh; i++) {
        uint32_t o = op->hit[i];
        for (size_t j = 0; !rc && j < na; j++)
            rc = sc_acc_merge(&op->kp.aggs[j], &op->accs[keep * na + j], &op->accs[o * na + j]);
        if (rc) break;
        win *k = &op->w[keep], *x = &op->w[o];
        if (x->start < k->start) k->start = x->start;
        if (x->last > k->last) k->last = x->last;
        heap_remove(op, x->hpos);
        rc = win_unlink(op, o);
        win_free(op, o);
    }
    if (!rc) rc = win_update(op, keep, in, row);
    if (rc) return rc;
    win *k = &op->w[keep];
    if (t < k->start) k->start = t;
    if (t > k->last) k->last = t;
    k->end = sat64((i128)k->last + gap);
    sift_up(op, k->hpos);
    sift_down(op, k->hpos);
    return SC_OK;
}

/* ------------------------------------------------------------------------- close */

static int emit_window(window_op *op, uint32_t id, const sc_batch *trig, int64_t trow, sc_emitter *e) {
    sc_batch *ob;
    int64_t orow;
    int rc = sc_emit_row(e, &ob, &orow);
    if (rc) return rc;
    if (trig) sc_copy_hidden(ob, orow, trig, trow);
    else {
        sc_batch_set_i64(ob, SC_COL_SEQ, orow, (int64_t)(SC_SEQ_EOS + op->base.step));
        sc_batch_set_i64(ob, SC_COL_POS, orow, 0);
    }
    const win *w = &op->w[id];
    const uint8_t *blob = sc_sbuf_cdata(&w->row);
    size_t na = (size_t)op->kp.naggs;
    for (int32_t k = 0; !rc && k < op->kp.nouts; k++) {
        int32_t c = SC_NHIDDEN + k, arg = op->kp.outs[k].arg;
        switch (op->kp.outs[k].kind) {
        case SC_OUT_INPUT:
            if (!op->kin) rc = sc_row_put(ob, c, orow, blob, op->nicols, op->oidx[k]);
            else if (w->owner) sc_batch_set_null(ob, c, orow);
            else {
                sc_batch_set_i64(ob, c, orow, w->last);
                sc_batch_set_valid(ob, c, orow);
            }
            break;
        case SC_OUT_WSTART: sc_batch_set_i64(ob, c, orow, w->start); break;
        case SC_OUT_WEND: sc_batch_set_i64(ob, c, orow, w->end); break;
        default:
            if (op->dense) {
                sc_acc view;
                sc_dense_acc(&op->dn, arg, op->drec + ((size_t)id + 1) * (size_t)op->dn.words, &view);
                rc = sc_acc_write(&op->kp.aggs[arg], &view, ob, c, orow);
            } else {
                rc = sc_acc_write(&op->kp.aggs[arg], &op->accs[id * na + (size_t)arg], ob, c, orow);
            }
        }
    }
    return rc;
}

static int closed_push(window_op *op, int64_t trow, uint32_t id) {
    if (op->nclosed + 2 > op->closedcap) {
        int64_t cap = op->closedcap ? op->closedcap * 2 : 1024;
        int64_t *c = realloc(op->closed, (size_t)cap * sizeof *c);
        if (!c) return SC_ENOMEM;
        op->closed = c;
        op->closedcap = cap;
    }
    op->closed[op->nclosed++] = trow;
    op->closed[op->nclosed++] = id;
    return SC_OK;
}

/* Close (emit, forget) every window with end <= wm in (end, start, creation) order; all of
 * them at end of stream (trig == NULL). */
static int close_windows(window_op *op, i128 wm, const sc_batch *trig, int64_t trow, sc_emitter *e) {
    while (op->kind != SC_WIN_SESSION && op->blo < op->bhi) {
        wbucket *b = &op->bk[op->blo]; /* its windows share one end */
        if (trig && (i128)op->w[b->head].end > wm) break;
        while (b->head != NO_WIN) {
            uint32_t id = b->head;
            if (op->ipair) wp_prefetch(&op->wp, op->w[id].mhash); /* for win_unlink */
            b->head = op->w[id].next;
            if (b->head == NO_WIN) b->tail = NO_WIN;
            else { /* the next window: a different line of w and of accs, a cache miss each */
                __builtin_prefetch(&op->w[b->head]);
                if (op->kp.naggs && !op->dense)
                    __builtin_prefetch(&op->accs[(size_t)b->head * (size_t)op->kp.naggs]);
            }
            if (op->dense && trig) { /* emitted after the batch's records are updated */
                int rc = win_unlink(op, id);
                if (!rc) rc = closed_push(op, trow, id);
                if (rc) return rc;
                continue;
            }
            int rc = emit_window(op, id, trig, trow, e);
            if (!rc) rc = win_unlink(op, id);
            win_free(op, id);
            if (rc) return rc;
        }
        if (++op->blo == op->bhi) op->blo = op->bhi = 0;
    }
    while (op->hn > 0) {
        uint32_t id = op->heap[0];
        if (trig && (i128)op->w[id].end > wm) break;
        heap_remove(op, 0);
        int rc = emit_window(op, id, trig, trow, e);
        if (!rc) rc = win_unlink(op, id);
        win_free(op, id);
        if (rc) return rc;
    }
    return SC_OK;
}

static int window_row(window_op *op, const sc_batch *in, int64_t r, sc_emitter *e) {
    if (op->dense) op->gid[r] = 0; /* late or dead: record 0 */
    if (!sc_batch_is_valid(in, op->time_col, r)) return sc_op_dead(&op->base, in, r, "null event time");
    int64_t t = sc_batch_get_i64(in, op->time_col, r);
    if (op->days) t = sat64((i128)t * SC_US_PER_DAY);
    if (op->has_max && (i128)t < (i128)op->max_t - op->lateness) return sc_op_late(&op->base, in, r);
    op->seq++;
    int rc;
    if (op->ipair) {
        rc = fixed_row_pair(op, in, r, t);
    } else {
        op->kbuf.len = 0;
        rc = sc_key_encode(&op->kbuf, in, r, op->kp.keys, op->kp.nkeys, NULL);
        if (!rc) rc = op->kind == SC_WIN_SESSION ? session_row(op, in, r, t) : fixed_row(op, in, r, t);
    }
    if (rc) return rc;
    if (!op->has_max || t > op->max_t) op->max_t = t;
    op->has_max = true;
    return close_windows(op, (i128)op->max_t - op->lateness, in, r, e);
}

/* ------------------------------------------------------------------------- interface */

/* SC_DEBUG: the heap holds exactly the open windows, in heap order, each knowing its place. */
static void check_state(const window_op *op) {
#ifdef SC_DEBUG
    if (op->kind != SC_WIN_SESSION) { /* buckets by start, windows by creation, every one open */
        int64_t n = 0;
        for (uint32_t b = op->blo; b < op->bhi; b++) {
            SC_INVARIANT(b == op->blo || op->bk[b - 1].start < op->bk[b].start, "window buckets order");
            SC_INVARIANT(op->bk[b].head != NO_WIN, "empty window bucket");
            for (uint32_t id = op->bk[b].head, prev = NO_WIN; id != NO_WIN; prev = id, id = op->w[id].next, n++) {
                SC_INVARIANT(op->w[id].start == op->bk[b].start, "window in another start's bucket");
                SC_INVARIANT(prev == NO_WIN || op->w[prev].seq < op->w[id].seq, "window bucket order");
                SC_INVARIANT(op->w[id].next != NO_WIN || op->bk[b].tail == id, "window bucket tail");
            }
        }
        SC_INVARIANT(n == op->open && op->hn == 0, "window buckets != open windows");
        SC_INVARIANT((op->ipair ? op->wp.n : op->map.n) == (size_t)n, "window map size != open windows");
        return;
    }
    SC_INVARIANT((int64_t)op->hn == op->open, "window heap size != open windows");
    for (uint32_t i = 0; i < op->hn; i++) {
        SC_INVARIANT(op->w[op->heap[i]].hpos == i, "window heap position");
        SC_INVARIANT(i == 0 || !w_less(op, op->heap[i], op->heap[(i - 1) / 2]), "window heap order");
    }
#else
    (void)op;
#endif
}

/* Prefetch the pair-map slot of in[r]'s first window (the map may grow before the probe:
 * a prefetch is only a hint). The first start always holds t: it is above t - size. */
static inline void prefetch_row(window_op *op, const sc_batch *in, int64_t r) {
    if (!sc_batch_is_valid(in, op->time_col, r)) return;
    int64_t t = sc_batch_get_i64(in, op->time_col, r), k;
    if (op->days) t = sat64((i128)t * SC_US_PER_DAY);
    uint32_t knull;
    pair_key(op, in, r, &k, &knull);
    wp_prefetch(&op->wp, wp_hash(k, knull, sat64(cached_first_start(op, t))));
}

int sc_op_window_run(void *vst, sc_batch *in, sc_batch **out) {
    window_op *op = vst;
    sc_emitter e = { &op->base, in, NULL, NULL, 0 };
    int rc = SC_OK;
    if (in->eos) {
        rc = in->nrows ? SC_EINVAL : close_windows(op, 0, NULL, 0, &e);
    } else {
        sc_count_in(&op->base, in->nrows);
        if (op->dense && in->nrows > op->gidcap) {
            int64_t *g = realloc(op->gid, (size_t)in->nrows * sizeof *g);
            if (!g) rc = SC_ENOMEM;
            else {
                op->gid = g;
                op->gidcap = in->nrows;
            }
        }
        op->nclosed = 0;
        for (int64_t r = 0; !rc && r < in->nrows; r++) {
            if (op->ipair && r + WP_AHEAD < in->nrows) prefetch_row(op, in, r + WP_AHEAD);
            rc = window_row(op, in, r, &e);
        }
        if (!rc && op->dense) { /* the records, then the windows the rows closed, in order */
            sc_dense_update(&op->dn, op->drec, op->gid, in);
            const size_t W = (size_t)op->dn.words;
            for (int64_t i = 0; i < op->nclosed; i += 2) {
                uint32_t id = (uint32_t)op->closed[i + 1];
                if (i + 2 * WP_AHEAD < op->nclosed) { /* a window and its record, a few ahead */
                    uint32_t ahead = (uint32_t)op->closed[i + 2 * WP_AHEAD + 1];
                    __builtin_prefetch(&op->w[ahead]);
                    __builtin_prefetch(op->drec + ((size_t)ahead + 1) * W);
                }
                if (!rc) rc = emit_window(op, id, in, op->closed[i], &e);
                win_free(op, id);
            }
            op->nclosed = 0;
        }
    }
    if (!rc) check_state(op);
    sc_i64_store_relaxed(&op->base.state_size, op->open);
    return sc_emit_finish(&e, in, out, rc);
}

void sc_op_window_destroy(void *vst) {
    window_op *op = vst;
    if (!op) return;
    size_t na = (size_t)op->kp.naggs;
    for (size_t i = 0; op->accs && i < (size_t)op->whw * na; i++) sc_acc_free(&op->kp.aggs[i % na], &op->accs[i]);
    sc_colbuf_free(op->drec);
    sc_dense_free(&op->dn);
    free(op->gid);
    free(op->closed);
    for (uint32_t i = 0; i < op->whw; i++) sc_sbuf_free(&op->w[i].row);
    for (uint32_t i = 0; i < op->slhw; i++) free(op->sl[i].w);
    sc_colbuf_free(op->w);
    sc_colbuf_free(op->accs);
    sc_colbuf_free(op->wfree);
    sc_colbuf_free(op->heap);
    free(op->bk);
    free(op->sl);
    free(op->slfree);
    free(op->hit);
    free(op->icols);
    free(op->oidx);
    sc_kmap_free(&op->map);
    sc_colbuf_free(op->wp.s);
    sc_buf_free(&op->kbuf);
    sc_buf_free(&op->scratch);
    sc_keyed_plan_free(&op->kp);
    sc_op_base_free(&op->base);
    free(op);
}

int sc_op_window_create(void **st, const sc_op_base *base, const sc_window_spec *spec) {
    window_op *op = calloc(1, sizeof *op);
    if (!op) return SC_ENOMEM;
    int rc = sc_op_base_copy(&op->base, base);
    if (rc) {
        free(op);
        return rc;
    }
    const sc_schema *in = &op->base.in;
    rc = sc_keyed_plan_init(&op->kp, &spec->keyed, in, &op->base.out, true);
    op->kind = spec->kind;
    op->time_col = spec->time_col;
    op->size = spec->size;
    op->every = spec->kind == SC_WIN_SLIDING ? spec->every : spec->size;
    op->lateness = spec->lateness;
    if (!rc && (spec->kind < SC_WIN_TUMBLING || spec->kind > SC_WIN_SESSION || spec->time_col < 0 ||
                spec->time_col >= in->ncols || op->size <= 0 || op->every <= 0 || op->every > op->size ||
                op->lateness < 0))
        rc = SC_EINVAL;
    if (!rc) {
        uint8_t tl = in->lt[spec->time_col];
        if (tl != SC_LT_INT && tl != SC_LT_DATETIME && tl != SC_LT_DATE) rc = SC_EINVAL;
        op->days = tl == SC_LT_DATE;
    }
    if (!rc) {
        op->icols = malloc(((size_t)op->kp.nouts + 1) * sizeof *op->icols);
        op->oidx = malloc(((size_t)op->kp.nouts + 1) * sizeof *op->oidx);
        rc = op->icols && op->oidx ? sc_kmap_init(&op->map, 64) : SC_ENOMEM;
    }
    if (!rc && op->kind != SC_WIN_SESSION &&
        (op->kp.nkeys == 0 ||
         (op->kp.nkeys == 1 && sc_ltype_physical((sc_ltype)in->lt[op->kp.keys[0]]) == SC_COL_INT64))) {
        op->ipair = true;
        op->kcol = op->kp.nkeys ? op->kp.keys[0] : -1;
        rc = wp_init(&op->wp);
    }
    for (int32_t k = 0; !rc && k < op->kp.nouts; k++) {
        op->oidx[k] = -1;
        if (op->kp.outs[k].kind != SC_OUT_INPUT) continue;
        int32_t i = 0;
        while (i < op->nicols && op->icols[i] != op->kp.outs[k].arg) i++;
        if (i == op->nicols) op->icols[op->nicols++] = op->kp.outs[k].arg;
        op->oidx[k] = i;
    }
    op->kin = op->ipair && op->nicols == 1 && op->icols[0] == op->kcol;
    if (!rc && op->kind == SC_WIN_TUMBLING && op->kp.naggs) rc = sc_dense_plan(&op->dn, &op->kp, &op->dense);
    if (!rc && op->dense) { /* record 0, for late and dead rows, before any window exists */
        op->drec = sc_colbuf_calloc((size_t)op->dn.words, sizeof *op->drec);
        if (!op->drec) rc = SC_ENOMEM;
    }
    if (rc) {
        sc_op_window_destroy(op);
        return rc;
    }
    *st = op;
    return SC_OK;
}
