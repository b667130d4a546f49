/* ops_correlate: conditions over several streams over the tagged layout. See
 * ops_correlate.h. Aggregates are recomputed over the kept rows on every output row, in
 * insertion order, which is what makes the floats equal to the reference's bit for bit. */
#pragma GCC optimize("fp-contract=off") /* x*y+z must round twice, as in Python */
#include "ops_correlate.h"

#include <math.h>

#include "../runtime/atomic_ext.h"
#include "fanin.h"

typedef struct corr_agg {
    int32_t fn, port;
    int32_t cidx;   /* place of the column in icols[port] (-1: count()) */
    sc_col_type at; /* physical type of the column */
} corr_agg;

typedef struct corr_op {
    sc_op_base base;
    int32_t nports, nkeys;
    int32_t *keys;     /* nports * nkeys */
    int32_t *time_col; /* nports */
    bool days;
    int64_t over, lateness;
    corr_agg *aggs;
    int32_t naggs, nouts;
    int32_t *out_kind, *out_arg;
    int32_t **icols, *nicols; /* per port: columns kept with a stored row */
    char *reason;
    sc_fkeys keys_;
    bool has_max;
    int64_t max_t;
    int64_t stored, sweep_at;
    sc_buf kbuf;
} corr_op;

/* ------------------------------------------------------------------ aggregates */

static inline int64_t cell_i64(const sc_frow *e, int32_t n, int32_t i) {
    int64_t v;
    memcpy(&v, sc_row_cell(sc_sbuf_cdata(&e->blob), n, i), 8);
    return v;
}
static inline double cell_f64(const sc_frow *e, int32_t n, int32_t i) {
    double v;
    memcpy(&v, sc_row_cell(sc_sbuf_cdata(&e->blob), n, i), 8);
    return v;
}
static inline bool cell_valid(const sc_frow *e, int32_t i) { return sc_row_valid(sc_sbuf_cdata(&e->blob), i); }

/* a < b for the reference's _less: NaN above every number; strings by bytes */
static bool cell_less(const sc_frow *a, const sc_frow *b, int32_t n, int32_t i, sc_col_type at) {
    const uint8_t *pa = sc_row_cell(sc_sbuf_cdata(&a->blob), n, i), *pb = sc_row_cell(sc_sbuf_cdata(&b->blob), n, i);
    switch (at) {
    case SC_COL_DOUBLE: {
        double x, y;
        memcpy(&x, pa, 8);
        memcpy(&y, pb, 8);
        if (isnan(x)) return false;
        if (isnan(y)) return true;
        return x < y;
    }
    case SC_COL_BOOL: return pa[0] < pb[0];
    case SC_COL_UTF8: {
        uint32_t oa, la, ob, lb;
        memcpy(&oa, pa, 4);
        memcpy(&la, pa + 4, 4);
        memcpy(&ob, pb, 4);
        memcpy(&lb, pb + 4, 4);
        int c = memcmp(sc_sbuf_cdata(&a->blob) + oa, sc_sbuf_cdata(&b->blob) + ob, la < lb ? la : lb);
        return c < 0 || (c == 0 && la < lb);
    }
    default: {
        int64_t x, y;
        memcpy(&x, pa, 8);
        memcpy(&y, pb, 8);
        return x < y;
    }
    }
}

/* Sum of the non-null values (ints wrap), their count; *fs for floats, *is for ints. */
static int64_t sum_values(const sc_frows *v, int32_t n, int32_t i, sc_col_type at, double *fs, uint64_t *is) {
    int64_t cnt = 0;
    double f = 0;
    uint64_t s = 0;
    for (uint32_t r = 0; r < v->n; r++) {
        if (!cell_valid(&v->r[r], i)) continue;
        if (at == SC_COL_DOUBLE) {
            double x = cell_f64(&v->r[r], n, i);
            f = cnt ? f + x : x;
        } else {
            s += (uint64_t)cell_i64(&v->r[r], n, i);
        }
        cnt++;
    }
    *fs = f;
    *is = s;
    return cnt;
}

static int write_agg(const corr_op *op, const corr_agg *a, const sc_frows *v, sc_batch *ob, int32_t c, int64_t orow) {
    int32_t n = a->cidx < 0 ? 0 : op->nicols[a->port], i = a->cidx;
    if (a->fn == SC_CORR_COUNT) {
        int64_t cnt = 0;
        if (i < 0) cnt = v->n;
        else
            for (uint32_t r = 0; r < v->n; r++) cnt += cell_valid(&v->r[r], i);
        sc_batch_set_i64(ob, c, orow, cnt);
        sc_batch_set_valid(ob, c, orow);
        return SC_OK;
    }
    if (a->fn == SC_CORR_LAST) {
        if (!v->n) {
            sc_batch_set_null(ob, c, orow);
            return SC_OK;
        }
        return sc_row_put(ob, c, orow, sc_sbuf_cdata(&v->r[v->n - 1].blob), n, i);
    }
    if (a->fn == SC_CORR_MIN || a->fn == SC_CORR_MAX) {
        const sc_frow *best = NULL;
        for (uint32_t r = 0; r < v->n; r++) {
            const sc_frow *e = &v->r[r];
            if (!cell_valid(e, i)) continue;
            if (!best || (a->fn == SC_CORR_MIN ? cell_less(e, best, n, i, a->at) : cell_less(best, e, n, i, a->at)))
                best = e;
        }
        if (!best) {
            sc_batch_set_null(ob, c, orow);
            return SC_OK;
        }
        return sc_row_put(ob, c, orow, sc_sbuf_cdata(&best->blob), n, i);
    }
    double fs;
    uint64_t is;
    int64_t cnt = sum_values(v, n, i, a->at, &fs, &is);
    bool isf = a->at == SC_COL_DOUBLE;
    if (cnt == 0 || (a->fn == SC_CORR_STD && cnt < 2)) {
        sc_batch_set_null(ob, c, orow);
        return SC_OK;
    }
    if (a->fn == SC_CORR_SUM) {
        if (isf) sc_batch_set_f64(ob, c, orow, fs);
        else sc_batch_set_i64(ob, c, orow, (int64_t)is);
        sc_batch_set_valid(ob, c, orow);
        return SC_OK;
    }
    double mean = isf ? fs / (double)cnt : sc_div_i64((int64_t)is, cnt);
    if (a->fn == SC_CORR_STD) {
        double ss = 0.0;
        for (uint32_t r = 0; r < v->n; r++) {
            if (!cell_valid(&v->r[r], i)) continue;
            double x = isf ? cell_f64(&v->r[r], n, i) : (double)cell_i64(&v->r[r], n, i);
            double d = x - mean;
            ss = ss + d * d;
        }
        mean = sqrt(ss / (double)(cnt - 1));
    }
    sc_batch_set_f64(ob, c, orow, mean);
    sc_batch_set_valid(ob, c, orow);
    return SC_OK;
}

/* ------------------------------------------------------------------ rows */

static int sweep(corr_op *op) {
    sc_i128 wm = (sc_i128)op->max_t - op->lateness;
    int64_t kept = 0;
    for (uint32_t id = 0; id < op->keys_.hw; id++) {
        sc_fkey *k = &op->keys_.k[id];
        if (!k->live) continue;
        int64_t n = 0;
        for (int32_t p = 0; p < op->nports; p++) {
            sc_frows_drop_upto(&k->ports[p], wm - op->over);
            n += k->ports[p].n;
        }
        /* the row that set the clock is dropped by a sweep only, so an empty key has
         * clock <= wm - over: its clock can drop no row admitted from now on */
        if (n == 0) {
            SC_INVARIANT((sc_i128)k->clock <= wm - op->over, "correlate: empty key with a live clock");
            int rc = sc_fkeys_drop(&op->keys_, id);
            if (rc) return rc;
        }
        kept += n;
    }
    op->stored = kept;
    op->sweep_at = kept * 2 > SWEEP_MIN ? kept * 2 : SWEEP_MIN;
    return SC_OK;
}

static int corr_row(corr_op *op, const sc_batch *in, int64_t r, sc_emitter *e) {
    int64_t port = sc_batch_get_i64(in, SC_FANIN_PORT, r);
    if (port < 0 || port >= op->nports) return SC_EINVAL;
    int32_t p = (int32_t)port;
    int64_t t;
    if (!sc_fanin_ticks(in, op->time_col[p], r, op->days, &t)) return sc_op_dead(&op->base, in, r, op->reason);
    if (op->has_max && (sc_i128)t < (sc_i128)op->max_t - op->lateness) return sc_op_late(&op->base, in, r);
    const int32_t *keys = op->keys + (size_t)p * (size_t)op->nkeys;
    op->kbuf.len = 0;
    int rc = sc_key_encode(&op->kbuf, in, r, keys, op->nkeys, NULL);
    uint32_t id;
    bool created;
    if (!rc) rc = sc_fkeys_get(&op->keys_, op->kbuf.p, (uint32_t)op->kbuf.len, &id, &created);
    if (rc) return rc;
    sc_fkey *k = &op->keys_.k[id];
    if (created || t > k->clock) k->clock = t;
    rc = sc_frows_push(&k->ports[p], t, in, r, op->icols[p], op->nicols[p]);
    if (rc) return rc;
    op->stored++;
    for (int32_t q = 0; q < op->nports; q++)
        op->stored -= sc_frows_drop_upto(&k->ports[q], (sc_i128)k->clock - op->over);
    if (!op->has_max || t > op->max_t) op->max_t = t;
    op->has_max = true;
    sc_batch *ob;
    int64_t orow;
    rc = sc_emit_row(e, &ob, &orow);
    if (rc) return rc;
    sc_copy_hidden(ob, orow, in, r);
    for (int32_t j = 0; !rc && j < op->nouts; j++) {
        int32_t c = SC_NHIDDEN + j, arg = op->out_arg[j];
        if (op->out_kind[j] == SC_CORR_INPUT)
            rc = sc_batch_copy_cell(ob, c, orow, in, arg < op->nkeys ? keys[arg] : op->time_col[p], r);
        else
            rc = write_agg(op, &op->aggs[arg], &k->ports[op->aggs[arg].port], ob, c, orow);
    }
    if (rc) return rc;
    return op->stored >= op->sweep_at ? sweep(op) : SC_OK;
}

int sc_op_correlate_run(void *vst, sc_batch *in, sc_batch **out) {
    corr_op *op = vst;
    sc_emitter e = { &op->base, in, NULL, NULL, 0 };
    int rc = SC_OK;
    if (in->eos) {
        rc = in->nrows ? SC_EINVAL : SC_OK;
    } else {
        sc_count_in(&op->base, in->nrows);
        for (int64_t r = 0; !rc && r < in->nrows; r++) rc = corr_row(op, in, r, &e);
    }
#ifdef SC_DEBUG
    if (!rc) {
        int64_t n = 0;
        for (uint32_t id = 0; id < op->keys_.hw; id++)
            for (int32_t p = 0; op->keys_.k[id].live && p < op->nports; p++) n += op->keys_.k[id].ports[p].n;
        SC_INVARIANT(n == op->stored, "correlate: stored row count");
        SC_INVARIANT((int64_t)op->keys_.map.n == op->keys_.live, "correlate: key map size");
    }
#endif
    sc_i64_store_relaxed(&op->base.state_size, op->stored);
    return sc_emit_finish(&e, in, out, rc);
}

/* ------------------------------------------------------------------ interface */

void sc_op_correlate_destroy(void *vst) {
    corr_op *op = vst;
    if (!op) return;
    sc_fkeys_free(&op->keys_);
    for (int32_t p = 0; op->icols && p < op->nports; p++) free(op->icols[p]);
    free(op->icols);
    free(op->nicols);
    free(op->keys);
    free(op->time_col);
    free(op->aggs);
    free(op->out_kind);
    free(op->out_arg);
    free(op->reason);
    sc_buf_free(&op->kbuf);
    sc_op_base_free(&op->base);
    free(op);
}

static bool is_time(uint8_t lt) { return lt == SC_LT_INT || lt == SC_LT_DATETIME || lt == SC_LT_DATE; }

/* Every tagged column of port p lies in [first[p], first[p] + width[p]). */
static int check_spec(const sc_schema *in, const sc_schema *out, const sc_corr_spec *sp, int32_t *first) {
    int32_t P = sp->nports, w = SC_FANIN_PORT + 1;
    if (P < 1 || sp->nkeys < 0 || sp->over <= 0 || sp->lateness < 0 || sp->naggs < 0 || out->ncols < SC_NHIDDEN ||
        in->ncols <= SC_FANIN_PORT || in->lt[SC_FANIN_PORT] != SC_LT_INT)
        return SC_EINVAL;
    for (int32_t p = 0; p < P; p++) {
        if (sp->width[p] < 0) return SC_EINVAL;
        first[p] = w;
        w += sp->width[p];
    }
    if (w != in->ncols) return SC_EINVAL;
#define IN_PORT(c, p) ((c) >= first[p] && (c) < first[p] + sp->width[p])
    for (int32_t p = 0; p < P; p++) {
        int32_t tc = sp->time_col[p];
        if (!IN_PORT(tc, p) || !is_time(in->lt[tc]) || in->lt[tc] != in->lt[sp->time_col[0]]) return SC_EINVAL;
        for (int32_t i = 0; i < sp->nkeys; i++) {
            int32_t kc = sp->keys[p * sp->nkeys + i];
            if (!IN_PORT(kc, p) || in->lt[kc] != in->lt[sp->keys[i]]) return SC_EINVAL;
        }
    }
    for (int32_t j = 0; j < sp->naggs; j++) {
        const sc_corr_agg *a = &sp->aggs[j];
        if (a->fn < SC_CORR_COUNT || a->fn > SC_CORR_LAST || a->port < 0 || a->port >= P) return SC_EINVAL;
        if (a->col < 0 ? a->fn != SC_CORR_COUNT : !IN_PORT(a->col, a->port)) return SC_EINVAL;
        if (a->fn >= SC_CORR_SUM && a->fn <= SC_CORR_STD && in->lt[a->col] != SC_LT_INT && in->lt[a->col] != SC_LT_FLOAT)
            return SC_EINVAL;
    }
#undef IN_PORT
    for (int32_t j = 0; j < out->ncols - SC_NHIDDEN; j++) {
        int32_t arg = sp->out_arg[j];
        sc_col_type want = sc_ltype_physical((sc_ltype)out->lt[SC_NHIDDEN + j]), have;
        if (sp->out_kind[j] == SC_CORR_INPUT) {
            if (arg < 0 || arg > sp->nkeys) return SC_EINVAL;
            have = sc_ltype_physical((sc_ltype)in->lt[arg < sp->nkeys ? sp->keys[arg] : sp->time_col[0]]);
        } else if (sp->out_kind[j] == SC_CORR_AGG) {
            if (arg < 0 || arg >= sp->naggs) return SC_EINVAL;
            const sc_corr_agg *a = &sp->aggs[arg];
            if (a->fn == SC_CORR_COUNT) have = SC_COL_INT64;
            else if (a->fn == SC_CORR_MEAN || a->fn == SC_CORR_STD) have = SC_COL_DOUBLE;
            else have = sc_ltype_physical((sc_ltype)in->lt[a->col]);
        } else {
            return SC_EINVAL;
        }
        if (have != want) return SC_EINVAL;
    }
    return SC_OK;
}

static int copy_ints(int32_t **dst, const int32_t *src, size_t n) {
    *dst = malloc((n + 1) * sizeof **dst);
    if (!*dst) return SC_ENOMEM;
    if (n) memcpy(*dst, src, n * sizeof **dst);
    return SC_OK;
}

int sc_op_correlate_create(void **st, const sc_op_base *base, const sc_corr_spec *sp) {
    corr_op *op = calloc(1, sizeof *op);
    if (!op) return SC_ENOMEM;
    int rc = sc_op_base_copy(&op->base, base);
    if (rc) {
        free(op);
        return rc;
    }
    int32_t *first = malloc(((size_t)(sp->nports > 0 ? sp->nports : 0) + 1) * sizeof *first);
    rc = first ? check_spec(&op->base.in, &op->base.out, sp, first) : SC_ENOMEM;
    free(first);
    int32_t P = sp->nports, nouts = op->base.out.ncols - SC_NHIDDEN;
    if (!rc) {
        op->nports = P;
        op->nkeys = sp->nkeys;
        op->over = sp->over;
        op->lateness = sp->lateness;
        op->naggs = sp->naggs;
        op->nouts = nouts;
        op->days = op->base.in.lt[sp->time_col[0]] == SC_LT_DATE;
        op->reason = strdup(sp->dead_reason ? sp->dead_reason : "null event time");
        op->aggs = calloc((size_t)sp->naggs + 1, sizeof *op->aggs);
        op->icols = calloc((size_t)P, sizeof *op->icols);
        op->nicols = calloc((size_t)P, sizeof *op->nicols);
        rc = op->reason && op->aggs && op->icols && op->nicols ? SC_OK : SC_ENOMEM;
    }
    if (!rc) rc = copy_ints(&op->keys, sp->keys, (size_t)P * (size_t)sp->nkeys);
    if (!rc) rc = copy_ints(&op->time_col, sp->time_col, (size_t)P);
    if (!rc) rc = copy_ints(&op->out_kind, sp->out_kind, (size_t)nouts);
    if (!rc) rc = copy_ints(&op->out_arg, sp->out_arg, (size_t)nouts);
    for (int32_t p = 0; !rc && p < P; p++) {
        op->icols[p] = malloc(((size_t)sp->naggs + 1) * sizeof *op->icols[p]);
        if (!op->icols[p]) rc = SC_ENOMEM;
    }
    for (int32_t j = 0; !rc && j < sp->naggs; j++) {
        const sc_corr_agg *a = &sp->aggs[j];
        corr_agg *o = &op->aggs[j];
        o->fn = a->fn;
        o->port = a->port;
        o->cidx = -1;
        if (a->col < 0) continue;
        o->at = sc_ltype_physical((sc_ltype)op->base.in.lt[a->col]);
        int32_t *ic = op->icols[a->port], i = 0;
        while (i < op->nicols[a->port] && ic[i] != a->col) i++;
        if (i == op->nicols[a->port]) ic[op->nicols[a->port]++] = a->col;
        o->cidx = i;
    }
    if (!rc) rc = sc_fkeys_init(&op->keys_, (uint32_t)P);
    op->sweep_at = SWEEP_MIN;
    if (rc) {
        sc_op_correlate_destroy(op);
        return rc;
    }
    *st = op;
    return SC_OK;
}
