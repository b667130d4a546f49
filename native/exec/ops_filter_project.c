/* ops_filter_project: the stateless filter and project operators over the expression
 * evaluator (contract in expr.h): dead rows for failing expressions, counters, forwarding a
 * batch whose rows all pass, moving columns a projection passes through.
 */
#include "expr_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *lt_name(int lt) {
    static const char *names[] = { "null", "int", "float", "bool", "str", "datetime", "date" };
    return lt >= 0 && lt <= SC_LT_DATE ? names[lt] : "?";
}

/* The fallback dead-letter reason (the driver re-derives the reference's exact text). */
static void reason(char *buf, size_t cap, uint8_t code, int32_t col) {
    int n = code == ERR_POW       ? snprintf(buf, cap, "integer ** negative exponent; cast to float first")
            : code == ERR_LISTCMP ? snprintf(buf, cap, "lists with a null element where they differ cannot be ordered")
                                  : snprintf(buf, cap, "cannot cast value to %s", lt_name(code - ERR_CAST));
    if (col >= 0 && n > 0 && (size_t)n < cap) snprintf(buf + n, cap - (size_t)n, " (output column %d)", (int)col);
}

static bool schema_eq(const sc_schema *a, const sc_schema *b) {
    return a->ncols == b->ncols && (a->ncols == 0 || memcmp(a->lt, b->lt, (size_t)a->ncols) == 0);
}

typedef struct filter_st {
    sc_op_base base;
    sc_expr *pred;
    cx_pool pool; /* scratch of the calls, reused across batches */
} filter_st;

int sc_op_filter_create(void **st, const sc_op_base *base, const sc_enode *pred, int32_t npred) {
    if (!st || !base || !schema_eq(&base->in, &base->out)) return SC_EINVAL;
    filter_st *f = calloc(1, sizeof *f);
    if (!f) return SC_ENOMEM;
    cx_pool_init(&f->pool);
    int rc = sc_expr_create(&f->pred, pred, npred, &base->in);
    if (!rc && !bool_or_null(sc_expr_type(f->pred))) rc = SC_EINVAL;
    if (!rc) rc = sc_op_base_copy(&f->base, base);
    if (rc) {
        sc_expr_destroy(f->pred);
        cx_pool_destroy(&f->pool);
        free(f);
        return rc;
    }
    *st = f;
    return SC_OK;
}

/* Rows of `in` with keep[r] into a new output batch (*out NULL when none). */
static int gather(sc_op_base *base, ctx *c, sc_batch *in, const uint8_t *keep, int64_t nkeep, sc_batch **out) {
    *out = NULL;
    if (nkeep == 0) return SC_OK;
    int64_t *idx = cx_alloc(c, (size_t)in->nrows * sizeof *idx);
    if (!idx) return SC_ENOMEM;
    int64_t j = 0;
    for (int64_t r = 0; r < in->nrows; r++) {
        idx[j] = r;
        j += keep[r] != 0;
    }
    int rc = sc_op_new_out(base, in, out);
    if (!rc) rc = sc_batch_take(*out, in, idx, j);
    if (rc && *out) {
        sc_batch_release(*out);
        *out = NULL;
    }
    return rc;
}

/* Send error rows to the side log; keep[r] = 0 for them. */
static int dead_rows(sc_op_base *base, const sc_batch *in, const uint8_t *code, const int32_t *col, uint8_t *keep) {
    char why[128];
    for (int64_t r = 0; r < in->nrows; r++) {
        if (!code[r]) continue;
        keep[r] = 0;
        reason(why, sizeof why, code[r], col ? col[r] : -1);
        int rc = sc_op_dead(base, in, r, why);
        if (rc) return rc;
    }
    return SC_OK;
}

int sc_op_filter_run(void *vst, sc_batch *in, sc_batch **out) {
    filter_st *st = vst;
    *out = NULL;
    if (in->eos) {
        *out = in;
        return SC_OK;
    }
    int64_t n = in->nrows, npass = 0, ndead = 0;
    sc_count_in(&st->base, n);
    if (n == 0) {
        sc_batch_release(in);
        return SC_OK;
    }
    ctx *c = cx_take(&st->pool, n);
    vec *v = NULL;
    uint8_t *keep = NULL;
    int rc = c ? eval_all(st->pred, in, c, &v) : SC_ENOMEM;
    if (!rc && v->lt == SC_LT_BOOL && v->nonull) { /* no null, no error: keep the values */
        keep = v->b;
        for (int64_t r = 0; r < n; r++) npass += keep[r] != 0;
    } else if (!rc && !(keep = cx_alloc(c, (size_t)n))) {
        rc = SC_ENOMEM;
    } else if (!rc) {
        if (v->lt == SC_LT_BOOL)
            for (int64_t r = 0; r < n; r++) npass += keep[r] = v->ok[r] & (v->b[r] != 0);
        else
            memset(keep, 0, (size_t)n);
        for (int64_t r = 0; v->err && r < n; r++) ndead += v->err[r] != 0;
    }
    if (!rc && ndead) rc = dead_rows(&st->base, in, v->err, NULL, keep); /* keep is c's: v had errors */
    if (!rc) sc_count_filtered(&st->base, n - npass - ndead);
    if (!rc && npass == n) {
        *out = in; /* every row passes: forward the batch itself */
        in = NULL;
    } else if (!rc) {
        rc = gather(&st->base, c, in, keep, npass, out);
    }
    if (!rc) sc_count_out(&st->base, npass);
    if (in) sc_batch_release(in);
    if (c) cx_give(&st->pool, c);
    return rc;
}

void sc_op_filter_destroy(void *vst) {
    filter_st *st = vst;
    if (!st) return;
    sc_expr_destroy(st->pred);
    cx_pool_destroy(&st->pool);
    sc_op_base_free(&st->base);
    free(st);
}

typedef struct project_st {
    sc_op_base base;
    int32_t nout;
    int32_t *src; /* per output column: input column, or -(expression + 1) */
    int32_t nex;
    sc_expr **ex;
    cx_pool pool; /* scratch of the calls, reused across batches */
} project_st;

void sc_op_project_destroy(void *vst) {
    project_st *st = vst;
    if (!st) return;
    for (int32_t j = 0; st->ex && j < st->nex; j++) sc_expr_destroy(st->ex[j]);
    free(st->ex);
    free(st->src);
    cx_pool_destroy(&st->pool);
    sc_op_base_free(&st->base);
    free(st);
}

/* Does output column k's source fit the output schema? */
static bool project_col_ok(const project_st *st, const sc_op_base *base, int32_t k) {
    int32_t s = k < SC_NHIDDEN ? k : st->src[k];
    sc_col_type want = sc_ltype_physical((sc_ltype)base->out.lt[k]);
    if (s >= 0) return s < base->in.ncols && sc_ltype_physical((sc_ltype)base->in.lt[s]) == want;
    int32_t j = -s - 1;
    return j < st->nex && sc_ltype_physical(sc_expr_type(st->ex[j])) == want;
}

int sc_op_project_create(void **st, const sc_op_base *base, const int32_t *src, int32_t nout,
                         const sc_enode *const *exprs, const int32_t *nnodes, int32_t nexprs) {
    if (!st || !base || !src || nout < SC_NHIDDEN || nout != base->out.ncols || base->in.ncols < SC_NHIDDEN ||
        nexprs < 0 || (nexprs && (!exprs || !nnodes)))
        return SC_EINVAL;
    project_st *p = calloc(1, sizeof *p);
    if (!p) return SC_ENOMEM;
    cx_pool_init(&p->pool);
    p->nout = nout;
    p->src = malloc((size_t)nout * sizeof(int32_t));
    p->ex = calloc((size_t)(nexprs ? nexprs : 1), sizeof(sc_expr *));
    int rc = p->src && p->ex ? SC_OK : SC_ENOMEM;
    if (!rc) memcpy(p->src, src, (size_t)nout * sizeof(int32_t));
    for (int32_t j = 0; !rc && j < nexprs; j++) {
        rc = sc_expr_create(&p->ex[j], exprs[j], nnodes[j], &base->in);
        p->nex = rc ? j : j + 1;
    }
    for (int32_t k = 0; !rc && k < nout; k++)
        if (!project_col_ok(p, base, k)) rc = SC_EINVAL;
    if (rc) {
        sc_op_project_destroy(p); /* base not taken yet: zeroed, nothing to free */
        return rc;
    }
    rc = sc_op_base_copy(&p->base, base);
    if (rc) {
        sc_op_project_destroy(p);
        return rc;
    }
    *st = p;
    return SC_OK;
}

/* dst[dc] rows [0, n) = src[sc] rows [0, n). */
static int copy_col(sc_batch *dst, int32_t dc, const sc_batch *src, int32_t scol, int64_t n) {
    const sc_column *s = &src->cols[scol];
    sc_column *d = &dst->cols[dc];
    if (s->type == SC_COL_UTF8 && n > 0) {
        int32_t first = s->offsets[0];
        int64_t bytes = (int64_t)s->offsets[n] - first;
        if (bytes > d->data_cap) {
            if (dst->pool) return SC_EFULL;
            char *p = realloc(d->data, (size_t)bytes);
            if (!p) return SC_ENOMEM;
            d->data = p;
            d->data_cap = bytes;
        }
        memcpy(d->data, s->data + first, (size_t)bytes);
        for (int64_t r = 0; r <= n; r++) d->offsets[r] = s->offsets[r] - first;
    } else if (s->type == SC_COL_BOOL) {
        memcpy(d->values, s->values, (size_t)(n + 7) / 8);
    } else {
        memcpy(d->values, s->values, (size_t)n * 8);
    }
    memcpy(d->validity, s->validity, (size_t)(n + 7) / 8);
    d->null_count = s->null_count == 0 ? 0 : n - bits_count(d->validity, n);
    return SC_OK;
}

/* Evaluate / copy every output column of `in` into o (code[r]: first error; *colp: NULL, or
 * where each row first failed, allocated at the first failure).
 * Expressions first; then columns passed through. When no row failed, a column passed through
 * once is moved (buffers swapped with o's empty ones) instead of copied: `in` is released
 * right after and nothing reads it again. */
static int project_fill(project_st *st, ctx *c, sc_batch *in, sc_batch *o, uint8_t *code, int32_t **colp) {
    int64_t n = in->nrows;
    bool failed = false;
    for (int32_t k = SC_NHIDDEN; k < st->nout; k++) {
        int32_t s = st->src[k];
        if (s >= 0) continue;
        bool f = false;
        int rc = eval_into(st->ex[-s - 1], in, o, k, c, code, &f);
        if (rc) return rc;
        if (!f) continue;
        int32_t *col = *colp;
        if (!col) {
            if (!(col = *colp = cx_alloc(c, (size_t)n * sizeof(int32_t)))) return SC_ENOMEM;
            for (int64_t r = 0; r < n; r++) col[r] = -1;
        }
        for (int64_t r = 0; r < n; r++)
            if (code[r] && col[r] < 0) col[r] = k;
        failed = true;
    }
    bool movable = !failed && in->pool == NULL && in->capacity == o->capacity;
    for (int32_t k = 0; k < st->nout; k++) {
        int32_t s = k < SC_NHIDDEN ? k : st->src[k];
        if (s < 0) continue;
        int uses = 0;
        for (int32_t j = 0; movable && j < st->nout; j++) uses += (j < SC_NHIDDEN ? j : st->src[j]) == s;
        if (movable && uses == 1) {
            sc_column t = o->cols[k];
            o->cols[k] = in->cols[s];
            in->cols[s] = t;
            continue;
        }
        int rc = copy_col(o, k, in, s, n);
        if (rc) return rc;
    }
    o->nrows = n;
    return SC_OK;
}

int sc_op_project_run(void *vst, sc_batch *in, sc_batch **out) {
    project_st *st = vst;
    *out = NULL;
    if (in->eos) {
        *out = in;
        return SC_OK;
    }
    int64_t n = in->nrows, ndead = 0;
    sc_count_in(&st->base, n);
    if (n == 0) {
        sc_batch_release(in);
        return SC_OK;
    }
    sc_batch *o = NULL;
    ctx *c = cx_take(&st->pool, n);
    uint8_t *code = c ? cx_zalloc(c, (size_t)n) : NULL;
    int32_t *col = NULL;
    int rc = code ? sc_op_new_out(&st->base, in, &o) : SC_ENOMEM;
    if (!rc) rc = project_fill(st, c, in, o, code, &col);
    for (int64_t r = 0; !rc && col && r < n; r++) ndead += code[r] != 0;
    if (!rc && ndead) {
        uint8_t *keep = cx_alloc(c, (size_t)n);
        rc = keep ? SC_OK : SC_ENOMEM;
        if (!rc) memset(keep, 1, (size_t)n);
        if (!rc) rc = dead_rows(&st->base, in, code, col, keep);
        sc_batch *kept = NULL;
        if (!rc) rc = gather(&st->base, c, o, keep, n - ndead, &kept);
        sc_batch_release(o);
        o = kept;
    }
    if (!rc && o) sc_count_out(&st->base, o->nrows);
    if (rc && o) sc_batch_release(o);
    else *out = o;
    sc_batch_release(in);
    if (c) cx_give(&st->pool, c);
    return rc;
}
