/* aggstate: the int map and dense accumulator records of the keyed aggregate (aggstate.h). */
#include "aggstate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------- int map */

int sc_imap_init(sc_imap *m, size_t expected) {
    memset(m, 0, sizeof *m);
    size_t cap = 16;
    while (cap < expected * 2) cap *= 2;
    m->s = calloc(cap, sizeof *m->s);
    if (!m->s) return SC_ENOMEM;
    m->cap = cap;
    return SC_OK;
}

void sc_imap_free(sc_imap *m) {
    free(m->s);
    memset(m, 0, sizeof *m);
}

static void put(sc_imap_slot *s, size_t mask, int64_t k, uint64_t g1) {
    size_t i = sc_imap_hash(k) & mask;
    while (s[i].g1) i = (i + 1) & mask;
    s[i].key = k;
    s[i].g1 = g1;
}

int sc_imap_insert(sc_imap *m, int64_t k, uint64_t g) {
    if ((m->n + 1) * 2 > m->cap) {
        size_t cap = m->cap * 2;
        sc_imap_slot *s = calloc(cap, sizeof *s);
        if (!s) return SC_ENOMEM;
        for (size_t i = 0; i < m->cap; i++)
            if (m->s[i].g1) put(s, cap - 1, m->s[i].key, m->s[i].g1);
        free(m->s);
        m->s = s;
        m->cap = cap;
    }
    put(m->s, m->cap - 1, k, g + 1);
    m->n++;
    return SC_OK;
}

/* ------------------------------------------------------------------- dense records */

/* NaN above every number, as ops_state.c's f64_less. */
static inline bool f64_less(double a, double b) {
    if (isnan(a)) return false;
    if (isnan(b)) return true;
    return a < b;
}

static int dense_kind(const sc_agg_plan *p) {
    if (p->arg < 0) return SC_DK_COUNT;
    switch (p->fn) {
    case SC_AGG_COUNT: return SC_DK_COUNT_VALID;
    case SC_AGG_SUM:
    case SC_AGG_MEAN:
        if (p->at == SC_COL_DOUBLE) return SC_DK_SUM_F;
        return p->at == SC_COL_INT64 || p->at == SC_COL_BOOL ? SC_DK_SUM_I : 0;
    case SC_AGG_MIN:
    case SC_AGG_MAX: {
        bool min = p->fn == SC_AGG_MIN;
        if (p->at == SC_COL_DOUBLE) return min ? SC_DK_MIN_F : SC_DK_MAX_F;
        return p->at == SC_COL_INT64 ? (min ? SC_DK_MIN_I : SC_DK_MAX_I) : 0;
    }
    default: return 0; /* first, last, count_distinct: sc_acc */
    }
}

int sc_dense_plan(sc_dense *d, const sc_keyed_plan *kp, bool *ok) {
    memset(d, 0, sizeof *d);
    *ok = false;
    int32_t na = kp->naggs;
    for (int32_t j = 0; j < na; j++)
        if (!dense_kind(&kp->aggs[j])) return SC_OK;
    d->slot = malloc(((size_t)na + 1) * sizeof *d->slot);
    d->of_agg = malloc(((size_t)na + 1) * sizeof *d->of_agg);
    if (!d->slot || !d->of_agg) {
        sc_dense_free(d);
        return SC_ENOMEM;
    }
    for (int32_t j = 0; j < na; j++) {
        const sc_agg_plan *p = &kp->aggs[j];
        int32_t kind = dense_kind(p), s = 0;
        /* aggregates with the same state share its slot (sum(x) and mean(x)) */
        while (s < d->nslots && !(d->slot[s].kind == kind && d->slot[s].arg == p->arg)) s++;
        if (s == d->nslots) {
            d->slot[s] = (sc_dense_slot){ kind, p->arg, d->words, p->at };
            d->words += kind == SC_DK_COUNT || kind == SC_DK_COUNT_VALID ? 1 : 2;
            d->nslots++;
        }
        d->of_agg[j] = s;
    }
    *ok = true;
    return SC_OK;
}

void sc_dense_free(sc_dense *d) {
    free(d->slot);
    free(d->of_agg);
    memset(d, 0, sizeof *d);
}

void sc_dense_init(const sc_dense *d, uint64_t *rec) {
    memset(rec, 0, (size_t)d->words * sizeof *rec);
    const double neg0 = -0.0;
    for (int32_t s = 0; s < d->nslots; s++)
        if (d->slot[s].kind == SC_DK_SUM_F) memcpy(&rec[d->slot[s].off + 1], &neg0, 8);
}

static inline double rdf(const uint64_t *w) {
    double x;
    memcpy(&x, w, 8);
    return x;
}

static inline void wrf(uint64_t *w, double x) { memcpy(w, &x, 8); }

/* One slot over the batch. V(r): row r is valid; the loop bodies read x at row r. */
#define ROWS(BODY)                                                                                          \
    do {                                                                                                    \
        if (!nulls)                                                                                         \
            for (int64_t r = 0; r < n; r++) {                                                               \
                uint64_t *a = recs + gid[r] * W + off;                                                      \
                BODY;                                                                                       \
            }                                                                                               \
        else                                                                                                \
            for (int64_t r = 0; r < n; r++) {                                                               \
                if (!sc_bit_get(valid, r)) continue;                                                        \
                uint64_t *a = recs + gid[r] * W + off;                                                      \
                BODY;                                                                                       \
            }                                                                                               \
    } while (0)

static void update_slot(const sc_dense_slot *sl, int64_t W, uint64_t *recs, const int64_t *gid, const sc_batch *in) {
    int64_t n = in->nrows, off = sl->off;
    if (sl->kind == SC_DK_COUNT) {
        for (int64_t r = 0; r < n; r++) recs[gid[r] * W + off]++;
        return;
    }
    const sc_column *c = &in->cols[sl->arg];
    const uint8_t *valid = c->validity;
    bool nulls = c->null_count != 0;
    switch (sl->kind) {
    case SC_DK_COUNT_VALID: ROWS(a[0]++); break;
    case SC_DK_SUM_F: {
        const double *x = c->values;
        ROWS(a[0]++; wrf(&a[1], rdf(&a[1]) + x[r]));
        break;
    }
    case SC_DK_SUM_I:
        if (sl->at == SC_COL_BOOL) {
            const uint8_t *x = c->values;
            ROWS(a[0]++; a[1] += sc_bit_get(x, r));
        } else {
            const int64_t *x = c->values;
            ROWS(a[0]++; a[1] += (uint64_t)x[r]); /* wraps at 64 bits */
        }
        break;
    case SC_DK_MIN_F: {
        const double *x = c->values;
        ROWS(if (!a[0]++ || f64_less(x[r], rdf(&a[1]))) wrf(&a[1], x[r]));
        break;
    }
    case SC_DK_MAX_F: {
        const double *x = c->values;
        ROWS(if (!a[0]++ || f64_less(rdf(&a[1]), x[r])) wrf(&a[1], x[r]));
        break;
    }
    case SC_DK_MIN_I: {
        const int64_t *x = c->values;
        ROWS(if (!a[0]++ || x[r] < (int64_t)a[1]) a[1] = (uint64_t)x[r]);
        break;
    }
    case SC_DK_MAX_I: {
        const int64_t *x = c->values;
        ROWS(if (!a[0]++ || (int64_t)a[1] < x[r]) a[1] = (uint64_t)x[r]);
        break;
    }
    }
}

#undef ROWS

void sc_dense_update(const sc_dense *d, uint64_t *recs, const int64_t *gid, const sc_batch *in) {
    for (int32_t s = 0; s < d->nslots; s++) update_slot(&d->slot[s], d->words, recs, gid, in);
}

void sc_dense_acc(const sc_dense *d, int32_t j, const uint64_t *rec, sc_acc *a) {
    const sc_dense_slot *sl = &d->slot[d->of_agg[j]];
    memset(a, 0, sizeof *a);
    a->n = (int64_t)rec[sl->off];
    if (sl->kind == SC_DK_COUNT || sl->kind == SC_DK_COUNT_VALID) return;
    a->has = a->n > 0;
    memcpy(&a->v, &rec[sl->off + 1], 8);
}
