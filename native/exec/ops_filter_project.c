/* ops_filter_project: the stateless filter and project operators over the expression
 * evaluator (contract in expr.h): dead rows for failing expressions, counters, forwarding a
 * batch whose rows all pass, moving columns a projection passes through.
 */
#include "expr_internal.h"
#include "select.h"

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
    if (d->borrowed) return SC_EINVAL; /* never written: copies go to fresh batches */
    if (s->views) { /* 16-byte views, copied as they are */
        int rc = sc_column_views_room(d, n);
        if (rc) return rc;
        memcpy(d->values, s->values, (size_t)n * 16);
    } else if (s->type == SC_COL_UTF8) {
        int rc = sc_column_unview(d, 0); /* a fresh output column has no views: nothing to do */
        if (rc) return rc;
        if (n > 0) {
            int32_t first = s->offsets[0];
            int64_t bytes = (int64_t)s->offsets[n] - first;
            if (bytes > d->data_cap) {
                if (dst->pool) return SC_EFULL;
                char *p = sc_colbuf_realloc(d->data, (size_t)bytes);
                if (!p) return SC_ENOMEM;
                d->data = p;
                d->data_cap = bytes;
            }
            memcpy(d->data, s->data + first, (size_t)bytes);
            for (int64_t r = 0; r <= n; r++) d->offsets[r] = s->offsets[r] - first;
        }
    } else if (s->type == SC_COL_BOOL) {
        memcpy(d->values, s->values, (size_t)(n + 7) / 8);
    } else {
        memcpy(d->values, s->values, (size_t)n * 8);
    }
    memcpy(d->validity, s->validity, (size_t)(n + 7) / 8);
    d->null_count = s->null_count == 0 ? 0 : n - sc_bits_count(d->validity, 0, n);
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
        if (movable && uses == 1 && !in->cols[s].borrowed) {
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

/* ------------------------------------------------------------------ the fused stage
 *
 * Consecutive filter / project steps as one operator. Per batch, the parts run over a view:
 * one sc_column per column of the part's input, each borrowed from the input batch or from
 * the scratch batch where an earlier project computed it, so columns a part does not touch
 * pass by reference. Filters narrow a keep mask; projects compute their new columns over
 * every row of the view (vectorized; rows outside the mask are ignored, errors included).
 * At the end the surviving rows are gathered once through a selection vector (select.h),
 * or, when every row survived, the columns are moved into the output batch.
 *
 * Before a part that runs a user function, or evaluates anything while fewer than a quarter
 * of the rows are selected, or computes columns with no filter after it, the view is
 * compacted first (the part then sees selected rows only): a user function is never called
 * on a row the sequential execution would not call it on, a selective filter does not make
 * later expressions pay for rows it dropped, and the trailing projects compute their columns
 * for surviving rows only, after the one gather, and their outputs are moved, not copied. */

enum { PART_FILTER = 1, PART_PROJECT = 2 };

typedef struct fscratch {
    int64_t cap;          /* rows the arrays and batches below hold */
    uint8_t *keep, *code; /* keep mask; a project's first error code per row */
    int32_t *sel, *col;   /* selection vector; a project's first failing output column */
    sc_batch **tmp;       /* per part: a project's computed columns (its output schema) */
    sc_batch **mat;       /* per part: its input compacted (its input schema) */
    sc_column *view, *next;
    sc_batch **own, **nown; /* per view column: the batch that owns it ... */
    int32_t *ocol, *nocol;  /* ... and its index there */
    uint8_t *views;         /* per output column: the view's strings are 16-byte views */
    /* a lean batch (exec.h): the keep masks of the compactions so far (per part at most,
     * each over the view before it, of mlen[i] rows), and the input row of each view row
     * when a dead row needs its serial (orig: made then, once per batch) */
    uint8_t **masks;
    int64_t *mlen;
    int32_t *orig;
    struct fscratch *link;
} fscratch;

typedef struct fused_st {
    sc_op_base base; /* first part's input, last part's output; counts nothing itself */
    int32_t nparts;
    uint8_t *kinds;
    void **parts; /* filter_st * / project_st *, owned */
    bool *udf;    /* the part evaluates a user function */
    bool *evals;  /* the part evaluates an expression */
    bool *last_gather; /* a project with no filter after it: compacting before it is the one gather */
    int32_t maxcols;
    cx_pool pool;
    pthread_mutex_t mu;
    fscratch *free; /* per-call scratch, reused across batches */
} fused_st;

static sc_op_base *part_base(const fused_st *st, int32_t p) {
    return st->kinds[p] == PART_FILTER ? &((filter_st *)st->parts[p])->base : &((project_st *)st->parts[p])->base;
}

static void fs_free(fused_st *st, fscratch *s) {
    if (!s) return;
    for (int32_t p = 0; p < st->nparts; p++) {
        if (s->tmp && s->tmp[p]) sc_batch_release(s->tmp[p]);
        if (s->mat && s->mat[p]) sc_batch_release(s->mat[p]);
    }
    free(s->keep);
    free(s->code);
    free(s->sel);
    free(s->col);
    free(s->tmp);
    free(s->mat);
    free(s->view);
    free(s->next);
    free(s->own);
    free(s->nown);
    free(s->ocol);
    free(s->nocol);
    free(s->views);
    for (int32_t p = 0; s->masks && p < st->nparts; p++) free(s->masks[p]);
    free(s->masks);
    free(s->mlen);
    free(s->orig);
    free(s);
}

/* Scratch for a batch of n rows (NULL: out of memory). */
static fscratch *fs_take(fused_st *st, int64_t n) {
    pthread_mutex_lock(&st->mu);
    fscratch *s = st->free;
    if (s) st->free = s->link;
    pthread_mutex_unlock(&st->mu);
    if (s && s->cap >= n) return s;
    fs_free(st, s);
    int64_t cap = n > st->base.capacity ? n : st->base.capacity;
    size_t mc = (size_t)st->maxcols, np = (size_t)st->nparts;
    s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->cap = cap;
    s->keep = malloc((size_t)cap);
    s->code = malloc((size_t)cap);
    s->sel = malloc((size_t)cap * sizeof(int32_t));
    s->col = malloc((size_t)cap * sizeof(int32_t));
    s->tmp = calloc(np, sizeof(sc_batch *));
    s->mat = calloc(np, sizeof(sc_batch *));
    s->view = malloc(mc * sizeof(sc_column));
    s->next = malloc(mc * sizeof(sc_column));
    s->own = malloc(mc * sizeof(sc_batch *));
    s->nown = malloc(mc * sizeof(sc_batch *));
    s->ocol = malloc(mc * sizeof(int32_t));
    s->nocol = malloc(mc * sizeof(int32_t));
    s->views = malloc(mc ? mc : 1);
    s->masks = calloc(np, sizeof(uint8_t *));
    s->mlen = calloc(np, sizeof(int64_t));
    if (!s->keep || !s->code || !s->sel || !s->col || !s->tmp || !s->mat || !s->view || !s->next || !s->own ||
        !s->nown || !s->ocol || !s->nocol || !s->views || !s->masks || !s->mlen) {
        fs_free(st, s);
        return NULL;
    }
    return s;
}

static void fs_give(fused_st *st, fscratch *s) {
    if (!s) return;
    pthread_mutex_lock(&st->mu);
    s->link = st->free;
    st->free = s;
    pthread_mutex_unlock(&st->mu);
}

/* *b: an empty scratch batch of schema `sch` with room for cap rows (made on first use). */
static int scratch_batch(sc_batch **b, const sc_schema *sch, int64_t cap) {
    if (!*b) return sc_batch_new(b, sch, cap);
    sc_batch *x = *b;
    for (int32_t k = 0; k < x->ncols; k++) {
        sc_column *c = &x->cols[k];
        if (c->null_count) memset(c->validity, 0xFF, (size_t)(x->capacity + 7) / 8);
        c->null_count = 0;
        if (c->offsets) c->offsets[0] = 0;
    }
    x->nrows = 0;
    return SC_OK;
}

typedef struct fview {
    fscratch *s;
    sc_batch vb;  /* header of the view: the input's serial, the view's columns */
    int64_t n;    /* rows of the view */
    int64_t nsel; /* rows kept */
    bool lean;    /* the input is lean (exec.h): hidden columns are neither read nor moved */
    int32_t ncomp;  /* lean: compactions so far (their masks in s->masks) */
    bool orig_made; /* lean: s->orig maps the view's rows to the input's */
} fview;

/* The first column a lean view moves: its hidden columns hold nothing. */
static int32_t moved_from(const fview *w) { return w->lean ? SC_NHIDDEN : 0; }

/* Compact the view to its kept rows (the part's input schema `sch`). A lean view keeps the
 * mask it compacted by (s->masks): a dead row found later needs its input row. */
static int fused_compact(fview *w, sc_batch **mat, const sc_schema *sch, ctx *c) {
    fscratch *s = w->s;
    int rc = scratch_batch(mat, sch, s->cap);
    if (rc) return rc;
    int64_t k = w->nsel;
    int32_t h = moved_from(w);
    rc = sc_sel_compress_cols((*mat)->cols + h, s->view + h, sch->ncols - h, s->keep, w->n, s->sel, k, true);
    for (int32_t j = 0; !rc && j < sch->ncols; j++) {
        s->view[j] = (*mat)->cols[j];
        s->own[j] = *mat;
        s->ocol[j] = j;
    }
    if (rc) return rc;
    (*mat)->nrows = k;
    if (w->lean) { /* the mask moves aside; a fresh one (the spare buffer) takes its place */
        uint8_t *spare = s->masks[w->ncomp];
        if (!spare && !(spare = malloc((size_t)s->cap))) return SC_ENOMEM;
        s->masks[w->ncomp] = s->keep;
        s->mlen[w->ncomp] = w->n;
        s->keep = spare;
        w->ncomp++;
        w->orig_made = false;
    }
    w->n = w->nsel = k;
    memset(s->keep, 1, (size_t)k);
    return cx_begin(c, k);
}

/* Record view row r as dead. A lean view's serials are worked out from its input's first
 * serial and, once it has been compacted, the input row of each view row (the masks of its
 * compactions composed, once per batch, for the first dead row that needs it). */
static int fused_dead(sc_op_base *base, fview *w, int64_t r, const char *why) {
    if (!w->lean) return sc_op_dead(base, &w->vb, r, why);
    fscratch *s = w->s;
    if (w->ncomp == 0) return sc_op_dead_seq(base, &w->vb, r, (int64_t)w->vb.first_row + r, why);
    if (!w->orig_made) {
        if (!s->orig && !(s->orig = malloc((size_t)s->cap * sizeof(int32_t)))) return SC_ENOMEM;
        int64_t k = 0;
        for (int64_t i = 0; i < s->mlen[0]; i++)
            if (s->masks[0][i]) s->orig[k++] = (int32_t)i;
        for (int32_t m = 1; m < w->ncomp; m++) { /* in place: the j-th kept row is at or after j */
            int64_t j = 0;
            for (int64_t i = 0; i < s->mlen[m]; i++)
                if (s->masks[m][i]) s->orig[j++] = s->orig[i];
        }
        w->orig_made = true;
    }
    return sc_op_dead_seq(base, &w->vb, r, (int64_t)w->vb.first_row + s->orig[r], why);
}

static int fused_filter(filter_st *f, fview *w, ctx *c) {
    fscratch *s = w->s;
    vec *v = NULL;
    int rc = eval_all(f->pred, &w->vb, c, &v);
    if (rc) return rc;
    uint8_t *keep = s->keep;
    int64_t n = w->n, before = w->nsel, kept = 0, ndead = 0;
    if (v->err) { /* rows that failed go dead (only those still selected) */
        char why[128];
        for (int64_t r = 0; r < n; r++) {
            if (!keep[r] || !v->err[r]) continue;
            reason(why, sizeof why, v->err[r], -1);
            if ((rc = fused_dead(&f->base, w, r, why))) return rc;
            keep[r] = 0;
            ndead++;
        }
    }
    if (v->lt == SC_LT_BOOL) {
        const uint8_t *ok = v->ok, *b = v->b;
        for (int64_t r = 0; r < n; r++) {
            uint8_t k = keep[r] & ok[r] & (b[r] != 0);
            keep[r] = k;
            kept += k;
        }
    } else { /* a null-typed predicate keeps nothing */
        memset(keep, 0, (size_t)n);
    }
    sc_count_filtered(&f->base, before - kept - ndead);
    w->nsel = kept;
    return SC_OK;
}

static int fused_project(project_st *pj, fview *w, sc_batch **tmp, ctx *c) {
    fscratch *s = w->s;
    int64_t n = w->n;
    int rc = scratch_batch(tmp, &pj->base.out, s->cap);
    bool failed = false, colset = false;
    if (!rc && pj->nex) memset(s->code, 0, (size_t)n);
    for (int32_t k = SC_NHIDDEN; !rc && k < pj->nout; k++) {
        int32_t src = pj->src[k];
        if (src >= 0) continue;
        bool f = false;
        rc = eval_into(pj->ex[-src - 1], &w->vb, *tmp, k, c, s->code, &f);
        if (rc || !f) continue;
        if (!colset)
            for (int64_t r = 0; r < n; r++) s->col[r] = -1;
        colset = failed = true;
        for (int64_t r = 0; r < n; r++)
            if (s->code[r] && s->col[r] < 0) s->col[r] = k;
    }
    if (rc) return rc;
    char why[128];
    for (int64_t r = 0; failed && r < n; r++) {
        if (!s->keep[r] || !s->code[r]) continue;
        reason(why, sizeof why, s->code[r], s->col[r]);
        if ((rc = fused_dead(&pj->base, w, r, why))) return rc;
        s->keep[r] = 0;
        w->nsel--;
    }
    for (int32_t k = 0; k < pj->nout; k++) { /* the next view: moved references, no copies */
        int32_t src = k < SC_NHIDDEN ? k : pj->src[k];
        if (src >= 0) {
            s->next[k] = s->view[src];
            s->nown[k] = s->own[src];
            s->nocol[k] = s->ocol[src];
        } else {
            s->next[k] = (*tmp)->cols[k];
            s->nown[k] = *tmp;
            s->nocol[k] = k;
        }
    }
    sc_column *t = s->view;
    s->view = s->next;
    s->next = t;
    sc_batch **o = s->own;
    s->own = s->nown;
    s->nown = o;
    int32_t *oc = s->ocol;
    s->ocol = s->nocol;
    s->nocol = oc;
    return SC_OK;
}

/* The output batch of the view's kept rows (NULL when none). */
static int fused_output(fused_st *st, fview *w, sc_batch *in, sc_batch **out) {
    fscratch *s = w->s;
    sc_op_base *last = part_base(st, st->nparts - 1);
    int32_t nc = last->out.ncols;
    *out = NULL;
    if (w->nsel == 0) return SC_OK;
    sc_batch *o = NULL;
    /* The output's capacity. One that keeps every row of the view takes the columns of the
     * scratch batches as they are, so it has their capacity; a gathered one a batch's. Rows
     * that would fill less than half of that get exactly their room instead, copied (a
     * scratch batch keeps the room of the largest batch it served: a paced run's catch-up
     * pushes): the sink then queues the output as it is rather than copy it into a chunk
     * (exec/program.c, sink_passes; a paced run's operators have batches of the pushed size,
     * lowering.py), and a consumer that holds it holds no empty room. */
    int64_t cap = w->nsel == w->n ? s->cap : in->nrows > last->capacity ? in->nrows : last->capacity;
    if (2 * w->nsel < cap) cap = w->nsel;
    /* a string column the view has as views gets views, not offsets and bytes (col_alloc) */
    for (int32_t k = 0; k < nc; k++) s->views[k] = s->view[k].type == SC_COL_UTF8 && s->view[k].views;
    int rc = sc_op_new_out_views(last, in, cap, s->views, &o);
    if (rc) return rc;
    int32_t h = moved_from(w);
    o->lean = w->lean;
    if (w->nsel == w->n) { /* every row of the view: move each column its owner gives up */
        /* borrowed columns may move only when the array's buffers may be shared and the
         * output keeps every borrowed column of the input: a chunk that kept one column
         * would pin the whole array (a select over a wide source) */
        bool share = in->ext != NULL && in->ext->shared;
        for (int32_t c = h; share && c < in->ncols; c++) {
            if (!in->cols[c].borrowed) continue;
            bool kept = false;
            for (int32_t k = h; !kept && k < nc; k++) kept = s->own[k] == in && s->ocol[k] == c;
            share = kept;
        }
        for (int32_t k = h; !rc && k < nc; k++) {
            sc_batch *ow = s->own[k];
            int uses = 0;
            for (int32_t j = h; j < nc; j++) uses += s->own[j] == ow && s->ocol[j] == s->ocol[k];
            /* a borrowed column (values in the source's Arrow buffers) moves as it is, the
             * output then holding a reference to those buffers (its one ext: in's) */
            bool borrowed = s->view[k].borrowed;
            bool movable = !borrowed || (share && ow == in);
            if (uses == 1 && ow->pool == NULL && ow->capacity == o->capacity && movable) {
                if (borrowed && o->ext == NULL) {
                    o->ext = ow->ext;
                    sc_extbuf_ref(o->ext);
                }
                sc_column t = o->cols[k];
                o->cols[k] = ow->cols[s->ocol[k]];
                ow->cols[s->ocol[k]] = t;
            } else {
                rc = copy_col(o, k, ow, s->ocol[k], w->n);
            }
        }
    } else {
        int64_t k = w->nsel;
        /* compressing by the mask stores whole lanes past row k: only into room for the view */
        if (o->capacity >= w->n) {
            rc = sc_sel_compress_cols(o->cols + h, s->view + h, nc - h, s->keep, w->n, s->sel, k, true);
        } else {
            sc_sel_from_mask(s->keep, w->n, s->sel);
            rc = sc_sel_gather_cols(o->cols + h, s->view + h, nc - h, s->sel, k, true);
        }
    }
    if (rc) {
        sc_batch_release(o);
        return rc;
    }
    o->nrows = w->nsel;
    *out = o;
    return SC_OK;
}

static int fused_parts(fused_st *st, fview *w, sc_batch *in, ctx *c, bool *changed) {
    fscratch *s = w->s;
    int rc = SC_OK;
    for (int32_t p = 0; !rc && p < st->nparts; p++) {
        sc_op_base *pb = part_base(st, p);
        sc_count_in(pb, w->nsel);
        if (w->nsel == 0) continue;
        if (w->nsel < w->n && st->evals[p] && (st->udf[p] || w->nsel * 4 < w->n || st->last_gather[p])) {
            rc = fused_compact(w, &s->mat[p], &pb->in, c);
            *changed = true;
        }
        w->vb.cols = s->view;
        w->vb.ncols = pb->in.ncols;
        w->vb.nrows = w->n;
        if (!rc && st->kinds[p] == PART_FILTER) {
            rc = fused_filter(st->parts[p], w, c);
        } else if (!rc) {
            rc = fused_project(st->parts[p], w, &s->tmp[p], c);
            *changed = true;
        }
        if (!rc) sc_count_out(pb, w->nsel);
    }
    (void)in;
    return rc;
}

int sc_op_fused_run(void *vst, sc_batch *in, sc_batch **out) {
    fused_st *st = vst;
    *out = NULL;
    if (in->eos) {
        *out = in;
        return SC_OK;
    }
    int64_t n = in->nrows;
    if (n == 0) {
        sc_batch_release(in);
        return SC_OK;
    }
    fscratch *s = fs_take(st, n);
    ctx *c = s ? cx_take(&st->pool, n) : NULL;
    int rc = c ? SC_OK : SC_ENOMEM;
    fview w = { .s = s, .n = n, .nsel = n, .lean = in->lean != 0 };
    bool changed = false;
    if (!rc) {
        for (int32_t k = 0; k < in->ncols; k++) {
            s->view[k] = in->cols[k];
            s->own[k] = in;
            s->ocol[k] = k;
        }
        memset(s->keep, 1, (size_t)n);
        w.vb = *in;
        w.vb.next = NULL;
        rc = fused_parts(st, &w, in, c, &changed);
    }
    if (!rc && !changed && w.nsel == n) {
        *out = in; /* filters only, every row passed: forward the batch itself */
        in = NULL;
    } else if (!rc) {
        rc = fused_output(st, &w, in, out);
    }
    if (in) sc_batch_release(in);
    if (c) cx_give(&st->pool, c);
    fs_give(st, s);
    return rc;
}

void sc_op_fused_destroy(void *vst) {
    fused_st *st = vst;
    if (!st) return;
    for (int32_t p = 0; st->parts && p < st->nparts; p++) {
        if (!st->parts[p]) continue;
        if (st->kinds[p] == PART_FILTER) sc_op_filter_destroy(st->parts[p]);
        else sc_op_project_destroy(st->parts[p]);
    }
    while (st->free) {
        fscratch *s = st->free;
        st->free = s->link;
        fs_free(st, s);
    }
    pthread_mutex_destroy(&st->mu);
    cx_pool_destroy(&st->pool);
    sc_op_base_free(&st->base);
    free(st->parts);
    free(st->kinds);
    free(st->udf);
    free(st->evals);
    free(st->last_gather);
    free(st);
}

static bool expr_has_udf(const sc_expr *e) {
    for (int32_t k = 0; e && k < e->n; k++)
        if (e->nodes[k].op == SC_E_UDF) return true;
    return false;
}

/* Whether consecutive parts fit: each part's input schema is the previous one's output. */
static bool parts_chain(void *const *parts, const uint8_t *kinds, int32_t n) {
    const sc_schema *prev = NULL;
    for (int32_t p = 0; p < n; p++) {
        if (!parts[p] || (kinds[p] != PART_FILTER && kinds[p] != PART_PROJECT)) return false;
        const sc_op_base *b = kinds[p] == PART_FILTER ? &((filter_st *)parts[p])->base : &((project_st *)parts[p])->base;
        if (prev && !schema_eq(prev, &b->in)) return false;
        prev = &b->out;
    }
    return true;
}

static void parts_destroy(void *const *parts, const uint8_t *kinds, int32_t n) {
    for (int32_t p = 0; p < n; p++)
        if (parts[p] && kinds[p] == PART_FILTER) sc_op_filter_destroy(parts[p]);
        else if (parts[p]) sc_op_project_destroy(parts[p]);
}

int sc_op_fused_create(void **out, sc_op_base ***bases, void *const *parts, const uint8_t *kinds, int32_t nparts) {
    if (!out || !bases || !parts || !kinds || nparts <= 0) return SC_EINVAL;
    bool chain = parts_chain(parts, kinds, nparts);
    fused_st *st = chain ? calloc(1, sizeof *st) : NULL;
    if (!st) {
        parts_destroy(parts, kinds, nparts);
        return chain ? SC_ENOMEM : SC_EINVAL;
    }
    pthread_mutex_init(&st->mu, NULL);
    cx_pool_init(&st->pool);
    st->parts = calloc((size_t)nparts, sizeof(void *));
    st->kinds = malloc((size_t)nparts);
    st->udf = calloc((size_t)nparts, sizeof(bool));
    st->evals = calloc((size_t)nparts, sizeof(bool));
    st->last_gather = calloc((size_t)nparts, sizeof(bool));
    sc_op_base **b = malloc((size_t)nparts * sizeof *b);
    int rc = st->parts && st->kinds && st->udf && st->evals && st->last_gather && b ? SC_OK : SC_ENOMEM;
    if (rc) {
        free(b);
        parts_destroy(parts, kinds, nparts);
        sc_op_fused_destroy(st);
        return rc;
    }
    st->nparts = nparts; /* the parts are the stage's from here on */
    memcpy(st->kinds, kinds, (size_t)nparts);
    memcpy(st->parts, parts, (size_t)nparts * sizeof(void *));
    for (int32_t p = 0; p < nparts; p++) {
        if (kinds[p] == PART_FILTER) {
            st->evals[p] = true;
            st->udf[p] = expr_has_udf(((filter_st *)parts[p])->pred);
        } else {
            project_st *pj = parts[p];
            st->evals[p] = pj->nex > 0;
            for (int32_t j = 0; j < pj->nex; j++) st->udf[p] |= expr_has_udf(pj->ex[j]);
        }
        b[p] = part_base(st, p);
        if (b[p]->in.ncols > st->maxcols) st->maxcols = b[p]->in.ncols;
        if (b[p]->out.ncols > st->maxcols) st->maxcols = b[p]->out.ncols;
    }
    for (int32_t p = nparts - 1; p >= 0 && kinds[p] == PART_PROJECT; p--) st->last_gather[p] = true;
    rc = sc_op_base_init(&st->base, b[0]->step, false, false, b[0]->counters, &b[0]->in, &b[nparts - 1]->out,
                         b[0]->capacity, false);
    if (rc) {
        free(b);
        sc_op_fused_destroy(st);
        return rc;
    }
    *out = st;
    *bases = b;
    return SC_OK;
}
