/* ops_state: what the keyed and window operators share: aggregate accumulators (the
 * reference's _Acc, _less), checked keyed specs, and the output chain builder. The operators
 * themselves are in ops_keyed.c (aggregate / running, top-k, dedup) and ops_window.c. */
#include "ops_state.h"
#include "lists.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ----------------------------------------------------------------------- ordering */

/* _less for doubles: NaN sorts above every number (and is not less than NaN). */
static inline bool f64_less(double a, double b) {
    if (isnan(a)) return false;
    if (isnan(b)) return true;
    return a < b;
}

/* Bytewise (= code point order for UTF-8). */
static inline bool str_less(const uint8_t *a, size_t la, const uint8_t *b, size_t lb) {
    int c = memcmp(a, b, la < lb ? la : lb);
    return c < 0 || (c == 0 && la < lb);
}

/* ----------------------------------------------------------------------- x / n */

static int bitlen128(unsigned __int128 x) {
    uint64_t hi = (uint64_t)(x >> 64), lo = (uint64_t)x;
    if (hi) return 128 - __builtin_clzll(hi);
    return lo ? 64 - __builtin_clzll(lo) : 0;
}

double sc_div_i64(int64_t x, int64_t n) {
    const int64_t exact = INT64_C(1) << 53;
    if (x >= -exact && x <= exact && n <= exact) return (double)x / (double)n; /* exact operands */
    bool neg = x < 0;
    unsigned __int128 a = neg ? (uint64_t)0 - (uint64_t)x : (uint64_t)x, b = (uint64_t)n;
    /* scale so the quotient has at least 55 bits: 53 kept, a rounding bit, a sticky bit */
    int k = 55 + bitlen128(b) - bitlen128(a);
    if (k < 0) k = 0;
    unsigned __int128 q = (a << k) / b;
    q |= ((a << k) % b) != 0; /* sticky: below the rounding position since q >= 2^54 */
    int sh = bitlen128(q) - 53;
    uint64_t m = (uint64_t)(q >> sh);
    unsigned __int128 rem = q & (((unsigned __int128)1 << sh) - 1), half = (unsigned __int128)1 << (sh - 1);
    if (rem > half || (rem == half && (m & 1))) m++;
    double r = ldexp((double)m, sh - k);
    return neg ? -r : r;
}

/* ----------------------------------------------------------------------- plans */

int sc_agg_plan_init(sc_agg_plan *p, const sc_agg_spec *spec, const sc_schema *in) {
    p->fn = spec->fn;
    p->arg = spec->arg;
    p->at = 0;
    p->lt = 0;
    if (spec->fn < SC_AGG_COUNT || spec->fn > SC_AGG_COUNT_DISTINCT) return SC_EINVAL;
    if (spec->arg < 0) return spec->fn == SC_AGG_COUNT && spec->arg == -1 ? SC_OK : SC_EINVAL;
    if (spec->arg >= in->ncols) return SC_EINVAL;
    p->at = sc_ltype_physical((sc_ltype)in->lt[spec->arg]);
    p->lt = in->lt[spec->arg];
    if ((spec->fn == SC_AGG_SUM || spec->fn == SC_AGG_MEAN) && p->at == SC_COL_UTF8) return SC_EINVAL;
    return SC_OK;
}

/* The physical type an aggregate's result column must have (0: int64 or double). */
static int agg_out_ok(const sc_agg_plan *p, sc_col_type ot) {
    switch (p->fn) {
    case SC_AGG_COUNT:
    case SC_AGG_COUNT_DISTINCT: return ot == SC_COL_INT64;
    case SC_AGG_SUM: return ot == (p->at == SC_COL_DOUBLE ? SC_COL_DOUBLE : SC_COL_INT64);
    case SC_AGG_MEAN: return ot == SC_COL_DOUBLE;
    default: return ot == p->at;
    }
}

void sc_keyed_plan_free(sc_keyed_plan *kp) {
    free(kp->keys);
    free(kp->aggs);
    free(kp->outs);
    memset(kp, 0, sizeof *kp);
}

int sc_keyed_plan_init(sc_keyed_plan *kp, const sc_keyed_spec *spec, const sc_schema *in,
                       const sc_schema *out, bool window) {
    memset(kp, 0, sizeof *kp);
    if (spec->nkeys < 0 || spec->naggs < 0 || out->ncols < SC_NHIDDEN || in->ncols < SC_NHIDDEN ||
        (spec->nkeys && !spec->keys) || (spec->naggs && !spec->aggs) ||
        (out->ncols > SC_NHIDDEN && !spec->outs))
        return SC_EINVAL;
    kp->nkeys = spec->nkeys;
    kp->naggs = spec->naggs;
    kp->nouts = out->ncols - SC_NHIDDEN;
    kp->keys = malloc((size_t)(kp->nkeys + 1) * sizeof *kp->keys);
    kp->aggs = malloc((size_t)(kp->naggs + 1) * sizeof *kp->aggs);
    kp->outs = malloc((size_t)(kp->nouts + 1) * sizeof *kp->outs);
    int rc = kp->keys && kp->aggs && kp->outs ? SC_OK : SC_ENOMEM;
    for (int32_t i = 0; !rc && i < kp->nkeys; i++) {
        kp->keys[i] = spec->keys[i];
        if (kp->keys[i] < 0 || kp->keys[i] >= in->ncols) rc = SC_EINVAL;
    }
    for (int32_t i = 0; !rc && i < kp->naggs; i++) rc = sc_agg_plan_init(&kp->aggs[i], &spec->aggs[i], in);
    for (int32_t i = 0; !rc && i < kp->nouts; i++) {
        sc_out_col o = spec->outs[i];
        sc_col_type ot = sc_ltype_physical((sc_ltype)out->lt[SC_NHIDDEN + i]);
        kp->outs[i] = o;
        switch (o.kind) {
        case SC_OUT_INPUT:
            if (o.arg < 0 || o.arg >= in->ncols || sc_ltype_physical((sc_ltype)in->lt[o.arg]) != ot) rc = SC_EINVAL;
            break;
        case SC_OUT_AGG:
            if (o.arg < 0 || o.arg >= kp->naggs || !agg_out_ok(&kp->aggs[o.arg], ot)) rc = SC_EINVAL;
            break;
        case SC_OUT_WSTART:
        case SC_OUT_WEND:
            if (!window || ot != SC_COL_INT64) rc = SC_EINVAL;
            break;
        default: rc = SC_EINVAL;
        }
    }
    if (rc) sc_keyed_plan_free(kp);
    return rc;
}

/* ----------------------------------------------------------------------- accumulators */

/* count_distinct: fixed-width values (int64, normalized double bits, bool) in an open-
 * addressing set of their 64-bit patterns, where 0 marks an empty slot (so the value 0 is a
 * flag); utf8 values in a key map of their encodings. Null is one value either way. */
typedef struct sc_u64set {
    uint64_t *s;
    uint32_t cap, n;
    uint8_t zero, null;
} sc_u64set;

static inline uint64_t mix64(uint64_t h) {
    h ^= h >> 33;
    h *= UINT64_C(0xff51afd7ed558ccd);
    h ^= h >> 33;
    h *= UINT64_C(0xc4ceb9fe1a85ec53);
    return h ^ (h >> 33);
}

static void u64set_put(uint64_t *s, uint32_t cap, uint64_t v, uint32_t *n) {
    uint32_t i = (uint32_t)mix64(v) & (cap - 1);
    for (; s[i]; i = (i + 1) & (cap - 1))
        if (s[i] == v) return;
    s[i] = v;
    (*n)++;
}

static int u64set_add(sc_u64set *t, uint64_t v) {
    if (v == 0) {
        t->zero = 1;
        return SC_OK;
    }
    if ((t->n + 1) * 4 > t->cap * 3) {
        uint32_t cap = t->cap ? t->cap * 2 : 8, n = 0;
        if (cap < t->cap) return SC_ENOMEM;
        uint64_t *s = calloc(cap, sizeof *s);
        if (!s) return SC_ENOMEM;
        for (uint32_t i = 0; i < t->cap; i++)
            if (t->s[i]) u64set_put(s, cap, t->s[i], &n);
        free(t->s);
        t->s = s;
        t->cap = cap;
    }
    u64set_put(t->s, t->cap, v, &t->n);
    return SC_OK;
}

static int dset_init(const sc_agg_plan *p, sc_acc *a) {
    if (p->at == SC_COL_UTF8) {
        if (a->v.set) return SC_OK;
        sc_kmap *m = malloc(sizeof *m);
        if (!m) return SC_ENOMEM;
        int rc = sc_kmap_init(m, 4);
        if (rc) {
            free(m);
            return rc;
        }
        a->v.set = m;
    } else if (!a->v.iset) {
        a->v.iset = calloc(1, sizeof *a->v.iset);
        if (!a->v.iset) return SC_ENOMEM;
    }
    return SC_OK;
}

static int dset_add_key(sc_acc *a, const uint8_t *k, uint32_t len) {
    uint64_t v = 0;
    bool ins;
    return sc_kmap_upsert(a->v.set, sc_hash_bytes(k, len), k, len, &v, &ins);
}

static int dset_add(const sc_agg_plan *p, sc_acc *a, const sc_batch *b, int64_t row, sc_buf *scratch) {
    int rc = dset_init(p, a);
    if (rc) return rc;
    if (p->at == SC_COL_UTF8) {
        scratch->len = 0;
        rc = sc_key_encode(scratch, b, row, &p->arg, 1, NULL);
        if (!rc && sc_ltype_is_list(p->lt) && sc_list_leaf(p->lt) == SC_LT_FLOAT && scratch->len > 5)
            sc_list_norm_floats((char *)scratch->p + 5, (int32_t)(scratch->len - 5), (uint8_t)(p->lt - SC_LT_LIST));
        return rc ? rc : dset_add_key(a, scratch->p, (uint32_t)scratch->len);
    }
    if (!sc_batch_is_valid(b, p->arg, row)) {
        a->v.iset->null = 1;
        return SC_OK;
    }
    uint64_t v;
    if (p->at == SC_COL_BOOL) v = sc_batch_get_bool(b, p->arg, row);
    else if (p->at == SC_COL_INT64) v = (uint64_t)sc_batch_get_i64(b, p->arg, row);
    else {
        double d = sc_batch_get_f64(b, p->arg, row);
        if (isnan(d)) d = NAN;     /* one NaN */
        else if (d == 0.0) d = 0.0; /* -0.0 == 0.0 */
        memcpy(&v, &d, 8);
    }
    return u64set_add(a->v.iset, v);
}

static int dset_merge(const sc_agg_plan *p, sc_acc *a, const sc_acc *o) {
    if (!o->v.set) return SC_OK; /* (same pointer for either kind) */
    int rc = dset_init(p, a);
    if (p->at == SC_COL_UTF8) {
        for (size_t i = 0; !rc && i < o->v.set->cap; i++) {
            if (!o->v.set->slots[i].hash) continue;
            uint32_t len;
            const uint8_t *k = sc_kmap_key(o->v.set, i, &len);
            rc = dset_add_key(a, k, len);
        }
        return rc;
    }
    const sc_u64set *t = o->v.iset;
    for (uint32_t i = 0; !rc && i < t->cap; i++)
        if (t->s[i]) rc = u64set_add(a->v.iset, t->s[i]);
    if (!rc) {
        a->v.iset->zero |= t->zero;
        a->v.iset->null |= t->null;
    }
    return rc;
}

static int64_t dset_count(const sc_agg_plan *p, const sc_acc *a) {
    if (!a->v.set) return 0;
    if (p->at == SC_COL_UTF8) return (int64_t)a->v.set->n;
    return (int64_t)a->v.iset->n + a->v.iset->zero + a->v.iset->null;
}

void sc_acc_free(const sc_agg_plan *p, sc_acc *a) {
    if (p->fn == SC_AGG_COUNT_DISTINCT && a->v.set) {
        if (p->at == SC_COL_UTF8) sc_kmap_free(a->v.set);
        else free(a->v.iset->s);
        free(a->v.set);
    }
    sc_sbuf_free(&a->s);
    memset(a, 0, sizeof *a);
}

/* Store the value of b[row, arg] (valid) into a. */
static int acc_take(const sc_agg_plan *p, sc_acc *a, const sc_batch *b, int64_t row) {
    switch (p->at) {
    case SC_COL_INT64: a->v.i = sc_batch_get_i64(b, p->arg, row); return SC_OK;
    case SC_COL_DOUBLE: a->v.f = sc_batch_get_f64(b, p->arg, row); return SC_OK;
    case SC_COL_BOOL: a->v.i = sc_batch_get_bool(b, p->arg, row); return SC_OK;
    case SC_COL_UTF8: {
        int32_t len;
        const char *s = sc_batch_get_utf8(b, p->arg, row, &len);
        return sc_sbuf_set(&a->s, s, (size_t)len);
    }
    }
    return SC_ETYPE;
}

/* Is b[row, arg] (valid) less than a's value (before) or a's value less than it (!before)? */
static bool acc_less(const sc_agg_plan *p, const sc_acc *a, const sc_batch *b, int64_t row, bool before) {
    switch (p->at) {
    case SC_COL_INT64: {
        int64_t x = sc_batch_get_i64(b, p->arg, row);
        return before ? x < a->v.i : a->v.i < x;
    }
    case SC_COL_BOOL: {
        int64_t x = sc_batch_get_bool(b, p->arg, row);
        return before ? x < a->v.i : a->v.i < x;
    }
    case SC_COL_DOUBLE: {
        double x = sc_batch_get_f64(b, p->arg, row);
        return before ? f64_less(x, a->v.f) : f64_less(a->v.f, x);
    }
    default: {
        int32_t len;
        const uint8_t *s = (const uint8_t *)sc_batch_get_utf8(b, p->arg, row, &len);
        const uint8_t *v = sc_sbuf_cdata(&a->s);
        return before ? str_less(s, (size_t)len, v, a->s.len) : str_less(v, a->s.len, s, (size_t)len);
    }
    }
}

static bool vals_less(const sc_agg_plan *p, const sc_acc *x, const sc_acc *y) {
    switch (p->at) {
    case SC_COL_DOUBLE: return f64_less(x->v.f, y->v.f);
    case SC_COL_UTF8: return str_less(sc_sbuf_cdata(&x->s), x->s.len, sc_sbuf_cdata(&y->s), y->s.len);
    default: return x->v.i < y->v.i;
    }
}

int sc_acc_update(const sc_agg_plan *p, sc_acc *a, const sc_batch *b, int64_t row, uint64_t seq,
                  sc_buf *scratch) {
    if (p->arg < 0) { /* count() */
        a->n++;
        return SC_OK;
    }
    bool valid = sc_bit_get(b->cols[p->arg].validity, row);
    switch (p->fn) {
    case SC_AGG_COUNT: a->n += valid; return SC_OK;
    case SC_AGG_FIRST:
        if (a->has) return SC_OK;
        /* fall through */
    case SC_AGG_LAST:
        a->has = 1;
        a->seq = seq;
        a->isnull = !valid;
        return valid ? acc_take(p, a, b, row) : SC_OK;
    case SC_AGG_COUNT_DISTINCT: return dset_add(p, a, b, row, scratch);
    default: break;
    }
    if (!valid) return SC_OK;
    a->n++;
    switch (p->fn) {
    case SC_AGG_SUM:
    case SC_AGG_MEAN:
        if (p->at == SC_COL_DOUBLE) {
            double x = sc_batch_get_f64(b, p->arg, row);
            a->v.f = a->has ? a->v.f + x : x; /* the first value as is (keeps -0.0) */
        } else {
            int64_t x = p->at == SC_COL_BOOL ? sc_batch_get_bool(b, p->arg, row) : sc_batch_get_i64(b, p->arg, row);
            a->v.i = a->has ? (int64_t)((uint64_t)a->v.i + (uint64_t)x) : x; /* wraps at 64 bits */
        }
        a->has = 1;
        return SC_OK;
    case SC_AGG_MIN:
    case SC_AGG_MAX:
        if (!a->has || acc_less(p, a, b, row, p->fn == SC_AGG_MIN)) {
            a->has = 1;
            return acc_take(p, a, b, row);
        }
        return SC_OK;
    }
    return SC_EINVAL;
}

/* a's value = o's value */
static int acc_copy_val(const sc_agg_plan *p, sc_acc *a, const sc_acc *o) {
    a->has = o->has;
    a->isnull = o->isnull;
    a->seq = o->seq;
    if (p->at == SC_COL_UTF8) return sc_sbuf_set(&a->s, sc_sbuf_cdata(&o->s), o->s.len);
    a->v = o->v;
    return SC_OK;
}

int sc_acc_merge(const sc_agg_plan *p, sc_acc *a, const sc_acc *o) {
    int rc = SC_OK;
    switch (p->fn) {
    case SC_AGG_FIRST:
        if (!a->has || (o->has && o->seq < a->seq)) rc = acc_copy_val(p, a, o);
        break;
    case SC_AGG_LAST:
        if (!a->has || (o->has && o->seq > a->seq)) rc = acc_copy_val(p, a, o);
        break;
    case SC_AGG_COUNT_DISTINCT: rc = dset_merge(p, a, o); break;
    case SC_AGG_SUM:
    case SC_AGG_MEAN:
        if (o->has) {
            if (!a->has) a->v = o->v;
            else if (p->at == SC_COL_DOUBLE) a->v.f += o->v.f;
            else a->v.i = (int64_t)((uint64_t)a->v.i + (uint64_t)o->v.i);
            a->has = 1;
        }
        break;
    case SC_AGG_MIN:
        if (o->has && (!a->has || vals_less(p, o, a))) rc = acc_copy_val(p, a, o);
        break;
    case SC_AGG_MAX:
        if (o->has && (!a->has || vals_less(p, a, o))) rc = acc_copy_val(p, a, o);
        break;
    default: break;
    }
    a->n += o->n;
    return rc;
}

int sc_acc_write(const sc_agg_plan *p, const sc_acc *a, sc_batch *out, int32_t col, int64_t row) {
    sc_col_type ot = out->cols[col].type;
    switch (p->fn) {
    case SC_AGG_COUNT: sc_batch_set_i64(out, col, row, a->n); break;
    case SC_AGG_COUNT_DISTINCT: sc_batch_set_i64(out, col, row, dset_count(p, a)); break;
    case SC_AGG_SUM:
        if (ot == SC_COL_DOUBLE)
            sc_batch_set_f64(out, col, row, !a->has ? 0.0 : p->at == SC_COL_DOUBLE ? a->v.f : (double)a->v.i);
        else sc_batch_set_i64(out, col, row, a->has ? a->v.i : 0);
        break;
    case SC_AGG_MEAN:
        if (a->n == 0) {
            sc_batch_set_null(out, col, row);
            return SC_OK;
        }
        sc_batch_set_f64(out, col, row, p->at == SC_COL_DOUBLE ? a->v.f / (double)a->n : sc_div_i64(a->v.i, a->n));
        break;
    default: /* min, max, first, last: the argument's type */
        if (!a->has || a->isnull) {
            sc_batch_set_null(out, col, row);
            return SC_OK;
        }
        switch (p->at) {
        case SC_COL_INT64: sc_batch_set_i64(out, col, row, a->v.i); break;
        case SC_COL_DOUBLE: sc_batch_set_f64(out, col, row, a->v.f); break;
        case SC_COL_BOOL: sc_batch_set_bool(out, col, row, a->v.i != 0); break;
        case SC_COL_UTF8:
            return sc_batch_put_utf8(out, col, row, (const char *)sc_sbuf_cdata(&a->s), (int32_t)a->s.len);
        }
    }
    sc_batch_set_valid(out, col, row);
    return SC_OK;
}

/* ----------------------------------------------------------------------- output chain */


int sc_emit_row(sc_emitter *e, sc_batch **b, int64_t *row) {
    sc_batch *t = e->tail;
    if (!t || t->nrows >= t->capacity) {
        int rc = sc_op_new_out(e->base, e->in, &t);
        if (rc) return rc;
        sc_chain_append(&e->head, &e->tail, t);
    }
    *b = t;
    *row = t->nrows++;
    e->rows++;
    return SC_OK;
}

int sc_emit_finish(sc_emitter *e, sc_batch *in, sc_batch **out, int rc) {
    *out = NULL;
    if (!rc && !e->head && in->group_n && !in->eos) {
        sc_batch *b;
        rc = sc_op_new_out(e->base, in, &b);
        if (!rc) sc_chain_append(&e->head, &e->tail, b);
    }
    if (rc) {
        sc_batch_release_chain(e->head);
        sc_batch_release(in);
        e->head = e->tail = NULL;
        return rc;
    }
    sc_count_out(e->base, e->rows);
    if (in->eos) {
        in->next = NULL;
        sc_chain_append(&e->head, &e->tail, in);
    } else {
        sc_batch_release(in);
    }
    *out = e->head;
    return SC_OK;
}
