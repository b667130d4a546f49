/* expr_vec: the evaluator's vectors and their scratch (contract in expr_internal.h).
 *
 * Scratch is an arena per evaluation context (ctx): one block carved with a bump pointer,
 * sized after the batches seen so far, so that in steady state a batch costs no malloc
 * at all (allocations that do not fit go to malloc and grow the block at the next reset).
 * Contexts live in small pools (cx_pool) owned by an sc_expr or an operator; a call takes
 * one, evaluates, resets it and gives it back, so stateless operators running on many
 * workers each use their own and reuse it across batches.
 *
 * Validity is one byte per row inside the evaluator (branch-free, vectorizable kernels) and
 * Arrow's bitmap outside it; the two are converted 8 rows at a time. A vector with no null
 * row (nonull) shares the context's read-only all-ones bytes instead of having its own, and
 * a literal (scalar) keeps its value in row 0 until a kernel that wants a full vector asks
 * for it (v_broadcast).
 */
#include "expr_internal.h"

#include <stdlib.h>
#include <string.h>

const char EMPTY[1] = "";

/* ------------------------------------------------------------------------ scratch */

#define CX_ALIGN 64
/* A context keeps a block of at most this much between batches (a one-off huge batch
 * should not pin its scratch for the rest of the run). */
#define CX_KEEP_MAX ((size_t)64 << 20)

static void *cx_adopt(ctx *c, void *p) {
    if (!p) return NULL;
    if (c->nblk == c->bcap) {
        size_t cap = c->bcap ? c->bcap * 2 : 32;
        void **q = realloc(c->blk, cap * sizeof *q);
        if (!q) {
            free(p);
            return NULL;
        }
        c->blk = q;
        c->bcap = cap;
    }
    c->blk[c->nblk++] = p;
    return p;
}

void *cx_malloc(ctx *c, size_t bytes) { return cx_adopt(c, malloc(bytes ? bytes : 1)); }

void *cx_alloc(ctx *c, size_t bytes) {
    size_t b = (bytes + CX_ALIGN - 1) & ~(size_t)(CX_ALIGN - 1);
    if (b == 0) b = CX_ALIGN;
    c->need += b;
    if (c->used + b <= c->cap) {
        void *p = c->arena + c->used;
        c->used += b;
        return p;
    }
    return cx_malloc(c, b);
}

void *cx_zalloc(ctx *c, size_t bytes) {
    void *p = cx_alloc(c, bytes);
    if (p) memset(p, 0, bytes ? bytes : 1);
    return p;
}

/* Free this batch's overflow blocks; grow the arena to what the batch needed. */
static void cx_reset(ctx *c) {
    for (size_t k = 0; k < c->nblk; k++) free(c->blk[k]);
    c->nblk = 0;
    if (c->need > c->cap || c->cap > CX_KEEP_MAX) {
        free(c->arena);
        size_t cap = c->need + c->need / 8;
        c->arena = cap && cap <= CX_KEEP_MAX ? aligned_alloc(CX_ALIGN, (cap + CX_ALIGN - 1) & ~(size_t)(CX_ALIGN - 1)) : NULL;
        c->cap = c->arena ? cap : 0;
    }
    c->used = c->need = 0;
}

/* Room for n rows in the shared all-ones / all-zeros validity bytes. */
static int cx_fixed(ctx *c, int64_t n) {
    if (n <= c->nfixed) return SC_OK;
    int64_t m = n < 1024 ? 1024 : n;
    uint8_t *o = malloc((size_t)m), *z = malloc((size_t)m);
    if (!o || !z) {
        free(o);
        free(z);
        return SC_ENOMEM;
    }
    memset(o, 1, (size_t)m);
    memset(z, 0, (size_t)m);
    free(c->ones);
    free(c->zeros);
    c->ones = o;
    c->zeros = z;
    c->nfixed = m;
    return SC_OK;
}

int cx_begin(ctx *c, int64_t n) {
    c->n = n;
    c->dest = NULL;
    return cx_fixed(c, n);
}

void cx_free(ctx *c) {
    if (!c) return;
    cx_reset(c);
    free(c->blk);
    free(c->arena);
    free(c->ones);
    free(c->zeros);
    free(c);
}

void cx_pool_init(cx_pool *p) {
    pthread_mutex_init(&p->mu, NULL);
    p->free = NULL;
}

void cx_pool_destroy(cx_pool *p) {
    while (p->free) {
        ctx *c = p->free;
        p->free = c->next;
        cx_free(c);
    }
    pthread_mutex_destroy(&p->mu);
}

ctx *cx_take(cx_pool *p, int64_t n) {
    pthread_mutex_lock(&p->mu);
    ctx *c = p->free;
    if (c) p->free = c->next;
    pthread_mutex_unlock(&p->mu);
    if (!c && !(c = calloc(1, sizeof *c))) return NULL;
    c->next = NULL;
    if (cx_begin(c, n)) {
        cx_free(c);
        return NULL;
    }
    return c;
}

void cx_give(cx_pool *p, ctx *c) {
    if (!c) return;
    cx_reset(c);
    pthread_mutex_lock(&p->mu);
    c->next = p->free;
    p->free = c;
    pthread_mutex_unlock(&p->mu);
}

/* ------------------------------------------------------------------------ bitmaps */

/* SPREAD[x]: the 8 bits of x (LSB first) as 8 bytes of 0 / 1 (little-endian). */
#define SP1(x) ((uint64_t)((x) & 1) | (uint64_t)(((x) >> 1) & 1) << 8 | (uint64_t)(((x) >> 2) & 1) << 16 | \
                (uint64_t)(((x) >> 3) & 1) << 24 | (uint64_t)(((x) >> 4) & 1) << 32 |                   \
                (uint64_t)(((x) >> 5) & 1) << 40 | (uint64_t)(((x) >> 6) & 1) << 48 |                   \
                (uint64_t)(((x) >> 7) & 1) << 56)
#define SP2(x) SP1(x), SP1(x + 1)
#define SP4(x) SP2(x), SP2(x + 2)
#define SP8(x) SP4(x), SP4(x + 4)
#define SP16(x) SP8(x), SP8(x + 8)
#define SP32(x) SP16(x), SP16(x + 16)
#define SP64(x) SP32(x), SP32(x + 32)
#define SP128(x) SP64(x), SP64(x + 64)
static const uint64_t SPREAD[256] = { SP128(0), SP128(128) };

void bits_to_bytes(const uint8_t *bm, int64_t n, uint8_t *out) {
    int64_t full = n >> 3;
    for (int64_t k = 0; k < full; k++) memcpy(out + 8 * k, &SPREAD[bm[k]], 8);
    for (int64_t r = full << 3; r < n; r++) out[r] = (bm[r >> 3] >> (r & 7)) & 1;
}

/* 8 bytes (any nonzero = 1) -> 8 bits, LSB first. */
static inline uint8_t pack8(const uint8_t *p) {
    uint64_t x;
    memcpy(&x, p, 8);
    const uint64_t lo7 = UINT64_C(0x7f7f7f7f7f7f7f7f);
    x = ((((x & lo7) + lo7) | x) >> 7) & UINT64_C(0x0101010101010101);
    return (uint8_t)((x * UINT64_C(0x0102040810204080)) >> 56);
}

void bytes_to_bits(const uint8_t *v, int64_t n, uint8_t *bm) {
    int64_t full = n >> 3;
    for (int64_t k = 0; k < full; k++) bm[k] = pack8(v + 8 * k);
    if (n & 7) {
        uint8_t last = bm[full], keep = (uint8_t)(0xFFu << (n & 7));
        uint8_t w = 0;
        for (int64_t r = full << 3; r < n; r++) w |= (uint8_t)((v[r] != 0) << (r & 7));
        bm[full] = (uint8_t)((last & keep) | w);
    }
}

void bytes_and_to_bits(const uint8_t *v, const uint8_t *m, int64_t n, uint8_t *bm) {
    int64_t full = n >> 3;
    for (int64_t k = 0; k < full; k++) {
        uint64_t x, y;
        memcpy(&x, v + 8 * k, 8);
        memcpy(&y, m + 8 * k, 8);
        const uint64_t lo7 = UINT64_C(0x7f7f7f7f7f7f7f7f), one = UINT64_C(0x0101010101010101);
        x = ((((x & lo7) + lo7) | x) >> 7) & one;
        y = ((((y & lo7) + lo7) | y) >> 7) & one;
        bm[k] = (uint8_t)(((x & y) * UINT64_C(0x0102040810204080)) >> 56);
    }
    if (n & 7) {
        uint8_t last = bm[full], keep = (uint8_t)(0xFFu << (n & 7));
        uint8_t w = 0;
        for (int64_t r = full << 3; r < n; r++) w |= (uint8_t)((v[r] && m[r]) << (r & 7));
        bm[full] = (uint8_t)((last & keep) | w);
    }
}

void bits_fill(uint8_t *bm, int64_t n) {
    int64_t full = n >> 3;
    memset(bm, 0xFF, (size_t)full);
    if (n & 7) bm[full] |= (uint8_t)((1u << (n & 7)) - 1);
}

/* ------------------------------------------------------------------------ vectors */

/* The value arrays of a vector of type lt, not initialized. */
static int vals_alloc(ctx *c, vec *v, uint8_t lt, bool zero) {
    size_t n = (size_t)c->n;
    void *(*al)(ctx *, size_t) = zero ? cx_zalloc : cx_alloc;
    switch (is_strlike(lt) ? SC_LT_STR : lt) {
    case SC_LT_FLOAT: return (v->f = al(c, n * sizeof(double))) ? SC_OK : SC_ENOMEM;
    case SC_LT_BOOL: return (v->b = al(c, n)) ? SC_OK : SC_ENOMEM;
    case SC_LT_STR:
        v->s = cx_alloc(c, n * sizeof(char *));
        v->sl = al(c, n * sizeof(int32_t));
        if (!v->s || !v->sl) return SC_ENOMEM;
        for (size_t r = 0; r < n; r++) v->s[r] = EMPTY;
        return SC_OK;
    default: return (v->i = al(c, n * sizeof(int64_t))) ? SC_OK : SC_ENOMEM;
    }
}

int vnew(ctx *c, vec *v, uint8_t lt) {
    memset(v, 0, sizeof *v);
    v->lt = lt;
    v->ok = cx_alloc(c, (size_t)c->n);
    if (!v->ok) return SC_ENOMEM;
    return vals_alloc(c, v, lt, true);
}

int vnew_raw(ctx *c, vec *v, uint8_t lt) {
    memset(v, 0, sizeof *v);
    v->lt = lt;
    return vals_alloc(c, v, lt, false);
}

int v_broadcast(ctx *c, vec *v) {
    if (!v->scalar) return SC_OK;
    vec w = *v;
    int rc = vals_alloc(c, &w, v->lt, false);
    if (rc) return rc;
    int64_t n = c->n;
    switch (is_strlike(v->lt) ? SC_LT_STR : v->lt) {
    case SC_LT_FLOAT:
        for (int64_t r = 0; r < n; r++) w.f[r] = v->f[0];
        break;
    case SC_LT_BOOL: memset(w.b, v->b[0], (size_t)n); break;
    case SC_LT_STR:
        for (int64_t r = 0; r < n; r++) {
            w.s[r] = v->s[0];
            w.sl[r] = v->sl[0];
        }
        break;
    default:
        for (int64_t r = 0; r < n; r++) w.i[r] = v->i[0];
        break;
    }
    w.scalar = false;
    *v = w;
    return SC_OK;
}

int v_mixed(ctx *c, vec *v) {
    if (!v->isint) v->isint = cx_zalloc(c, (size_t)c->n);
    if (!v->i) v->i = cx_zalloc(c, (size_t)c->n * sizeof(int64_t));
    return v->isint && v->i ? SC_OK : SC_ENOMEM;
}

int err_alloc(ctx *c, vec *v) {
    if (!v->err) v->err = cx_zalloc(c, (size_t)c->n);
    return v->err ? SC_OK : SC_ENOMEM;
}

int err_unary(ctx *c, vec *o, const vec *a) {
    if (!a->err) return SC_OK;
    if (err_alloc(c, o)) return SC_ENOMEM;
    memcpy(o->err, a->err, (size_t)c->n);
    return SC_OK;
}

/* Python evaluates the second operand only after a non-null first one. */
int err_strict(ctx *c, vec *o, const vec *a, const vec *b) {
    if (!a->err && !b->err) return SC_OK;
    if (err_alloc(c, o)) return SC_ENOMEM;
    for (int64_t r = 0; r < c->n; r++) {
        uint8_t ea = a->err ? a->err[r] : 0, eb = b->err && a->ok[r] ? b->err[r] : 0;
        o->err[r] = ea ? ea : eb;
    }
    return SC_OK;
}

void seal(const ctx *c, vec *o) {
    if (!o->err) return;
    for (int64_t r = 0; r < c->n; r++) o->ok[r] &= (uint8_t)(o->err[r] == 0);
}

void and_ok(const ctx *c, vec *o, const vec *a, const vec *b) {
    if (!b || b->nonull) {
        if (a->nonull) memset(o->ok, 1, (size_t)c->n);
        else memcpy(o->ok, a->ok, (size_t)c->n);
        return;
    }
    for (int64_t r = 0; r < c->n; r++) o->ok[r] = a->ok[r] & b->ok[r];
}

const double *as_f64(ctx *c, const vec *v) {
    if (v->lt == SC_LT_FLOAT) return v->f;
    double *f = cx_alloc(c, (size_t)c->n * sizeof(double));
    if (f)
        for (int64_t r = 0; r < c->n; r++) f[r] = (double)v->i[r];
    return f;
}

const int64_t *as_i64(ctx *c, const vec *v) {
    if (v->lt != SC_LT_BOOL) return v->i;
    int64_t *x = cx_alloc(c, (size_t)c->n * sizeof(int64_t));
    if (x)
        for (int64_t r = 0; r < c->n; r++) x[r] = v->b[r];
    return x;
}

/* ---------------------------------------------------------------- string builder */

int sb_open(ctx *c, sbld *b, size_t guess) {
    b->c = c;
    b->len = 0;
    b->cap = guess < 64 ? 64 : guess;
    b->at = cx_alloc(c, (size_t)c->n * sizeof(size_t));
    b->p = cx_malloc(c, b->cap); /* a block of its own: it grows with realloc */
    if (!b->at || !b->p) return SC_ENOMEM;
    b->slot = c->nblk - 1;
    memset(b->at, 0xFF, (size_t)c->n * sizeof(size_t));
    return SC_OK;
}

int sb_room(sbld *b, size_t extra) {
    if (b->len + extra <= b->cap) return SC_OK;
    size_t cap = b->cap * 2;
    while (cap < b->len + extra) cap *= 2;
    char *q = realloc(b->p, cap);
    if (!q) return SC_ENOMEM;
    b->p = q;
    b->cap = cap;
    b->c->blk[b->slot] = q;
    return SC_OK;
}

int sb_add(sbld *b, const char *s, size_t n) {
    if (sb_room(b, n)) return SC_ENOMEM;
    if (n) memcpy(b->p + b->len, s, n);
    b->len += n;
    return SC_OK;
}

int sb_end(sbld *b, vec *o, int64_t r) {
    size_t n = b->len - b->at[r];
    if (n > INT32_MAX) return SC_EINVAL;
    o->sl[r] = (int32_t)n;
    return SC_OK;
}

void sb_close(sbld *b, vec *o) {
    for (int64_t r = 0; r < b->c->n; r++)
        if (b->at[r] != SIZE_MAX) o->s[r] = b->p + b->at[r];
}
