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
 * Time arithmetic is exact (128-bit) for the late test, window starts and session hits;
 * stored bounds (start, end) are int64 and saturate where the exact value does not fit, which
 * the reference could not write to its int64 / datetime column anyway. */
#include "ops_state.h"

#include <stdlib.h>
#include <string.h>

#include "../runtime/atomic_ext.h"

typedef __int128 i128;

typedef struct win {
    int64_t start, last, end;
    uint64_t seq;   /* creation order */
    uint64_t mhash; /* tumbling / sliding: map hash of (key, start) */
    uint32_t hpos;  /* session: position in the heap */
    uint32_t next;  /* tumbling / sliding: the next window of its bucket (NO_WIN: none) */
    uint32_t owner; /* session: its key's list */
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
    sess_list *sl;
    uint32_t slcap, slhw, nslfree;
    uint32_t *slfree;
    uint32_t *hit, hitcap;
    /* event time */
    bool has_max;
    int64_t max_t;
    uint64_t seq, nwin;
    int64_t open;
    sc_buf kbuf, scratch;
} window_op;

static inline int64_t sat64(i128 x) { return x > INT64_MAX ? INT64_MAX : x < INT64_MIN ? INT64_MIN : (int64_t)x; }

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

static int win_grow(window_op *op) {
    uint32_t cap = op->wcap ? op->wcap * 2 : 64;
    size_t na = (size_t)op->kp.naggs;
    win *w = realloc(op->w, cap * sizeof *w);
    if (!w) return SC_ENOMEM;
    op->w = w;
    memset(w + op->wcap, 0, (cap - op->wcap) * sizeof *w);
    uint32_t *f = realloc(op->wfree, cap * sizeof *f);
    if (!f) return SC_ENOMEM;
    op->wfree = f;
    uint32_t *h = realloc(op->heap, cap * sizeof *h);
    if (!h) return SC_ENOMEM;
    op->heap = h;
    if (na) {
        sc_acc *a = realloc(op->accs, cap * na * sizeof *a);
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
    int rc = sc_row_encode(&w->row, in, row, op->icols, op->nicols);
    if (rc) {
        op->wfree[op->nfree++] = id;
        return rc;
    }
    w->start = w->last = start;
    w->end = end;
    w->seq = ++op->nwin;
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
    size_t na = (size_t)op->kp.naggs;
    for (size_t j = 0; j < na; j++) sc_acc_free(&op->kp.aggs[j], &op->accs[id * na + j]);
    op->wfree[op->nfree++] = id;
    op->open--;
}

static int win_update(window_op *op, uint32_t id, const sc_batch *in, int64_t row) {
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
static int fixed_row(window_op *op, const sc_batch *in, int64_t row, int64_t t) {
    i128 d = (i128)t - op->size, q = d / op->every;
    if (d % op->every != 0 && d < 0) q--; /* floor division */
    size_t klen = op->kbuf.len;
    int rc = SC_OK;
    for (i128 start = q * op->every + op->every; !rc && start <= t; start += op->every) {
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
        case SC_OUT_INPUT: rc = sc_row_put(ob, c, orow, blob, op->nicols, op->oidx[k]); break;
        case SC_OUT_WSTART: sc_batch_set_i64(ob, c, orow, w->start); break;
        case SC_OUT_WEND: sc_batch_set_i64(ob, c, orow, w->end); break;
        default: rc = sc_acc_write(&op->kp.aggs[arg], &op->accs[id * na + (size_t)arg], ob, c, orow);
        }
    }
    return rc;
}

/* Close (emit, forget) every window with end <= wm in (end, start, creation) order; all of
 * them at end of stream (trig == NULL). */
static int close_windows(window_op *op, i128 wm, const sc_batch *trig, int64_t trow, sc_emitter *e) {
    while (op->kind != SC_WIN_SESSION && op->blo < op->bhi) {
        wbucket *b = &op->bk[op->blo]; /* its windows share one end */
        if (trig && (i128)op->w[b->head].end > wm) break;
        while (b->head != NO_WIN) {
            uint32_t id = b->head;
            b->head = op->w[id].next;
            if (b->head == NO_WIN) b->tail = NO_WIN;
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
    if (!sc_batch_is_valid(in, op->time_col, r)) return sc_op_dead(&op->base, in, r, "null event time");
    int64_t t = sc_batch_get_i64(in, op->time_col, r);
    if (op->days) t = sat64((i128)t * SC_US_PER_DAY);
    if (op->has_max && (i128)t < (i128)op->max_t - op->lateness) return sc_op_late(&op->base, in, r);
    op->seq++;
    op->kbuf.len = 0;
    int rc = sc_key_encode(&op->kbuf, in, r, op->kp.keys, op->kp.nkeys, NULL);
    if (!rc) rc = op->kind == SC_WIN_SESSION ? session_row(op, in, r, t) : fixed_row(op, in, r, t);
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
        SC_INVARIANT(op->map.n == (size_t)n, "window map size != open windows");
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

int sc_op_window_run(void *vst, sc_batch *in, sc_batch **out) {
    window_op *op = vst;
    sc_emitter e = { &op->base, in, NULL, NULL, 0 };
    int rc = SC_OK;
    if (in->eos) {
        rc = in->nrows ? SC_EINVAL : close_windows(op, 0, NULL, 0, &e);
    } else {
        sc_count_in(&op->base, in->nrows);
        for (int64_t r = 0; !rc && r < in->nrows; r++) rc = window_row(op, in, r, &e);
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
    for (uint32_t i = 0; i < op->whw; i++) sc_sbuf_free(&op->w[i].row);
    for (uint32_t i = 0; i < op->slhw; i++) free(op->sl[i].w);
    free(op->w);
    free(op->accs);
    free(op->wfree);
    free(op->heap);
    free(op->bk);
    free(op->sl);
    free(op->slfree);
    free(op->hit);
    free(op->icols);
    free(op->oidx);
    sc_kmap_free(&op->map);
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
    for (int32_t k = 0; !rc && k < op->kp.nouts; k++) {
        op->oidx[k] = -1;
        if (op->kp.outs[k].kind != SC_OUT_INPUT) continue;
        int32_t i = 0;
        while (i < op->nicols && op->icols[i] != op->kp.outs[k].arg) i++;
        if (i == op->nicols) op->icols[op->nicols++] = op->kp.outs[k].arg;
        op->oidx[k] = i;
    }
    if (rc) {
        sc_op_window_destroy(op);
        return rc;
    }
    *st = op;
    return SC_OK;
}
