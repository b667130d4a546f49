/* ops_speculate: the `speculate` stage on the speculative engine (see ops_speculate.h). */
#include "ops_speculate.h"
#include "udf_args.h"

#include <stdlib.h>
#include <string.h>

typedef struct spec_op {
    sc_op_base base; /* first: generic code reads it */
    sc_spec *engine;
    sc_txn_kernel kernel;
    sc_udf_args a; /* the argument columns and their per-batch buffers */
    /* per-batch scratch (one batch at a time: STATEFUL) */
    int64_t cap;
    sc_spec_result *res;
    int64_t *idx; /* 0..cap-1: every row, for sc_batch_take_col */
} spec_op;

static void task(void *ctx, sc_txn *tx, int64_t i, sc_spec_result *res) {
    spec_op *o = ctx;
    int64_t out = 0;
    uint8_t ok = 0;
    o->kernel(tx, (const void **)o->a.vals, (const uint8_t **)o->a.oks, i, &out, &ok);
    res->bits = out;
    res->ok = ok;
}

int sc_op_speculate_create(void **st, const sc_op_base *base, sc_txn_kernel kernel, const int32_t *args,
                           const char *kinds, int32_t nargs, const sc_spec_config *cfg) {
    *st = NULL;
    if (!kernel || base->out.ncols != base->in.ncols + 1 || sc_udf_args_check(&base->in, args, kinds, nargs))
        return SC_EINVAL;
    uint8_t rt = base->out.lt[base->in.ncols];
    if (rt != SC_LT_INT && rt != SC_LT_FLOAT && rt != SC_LT_BOOL) return SC_EINVAL;
    spec_op *o = calloc(1, sizeof *o);
    if (!o) return SC_ENOMEM;
    int rc = sc_op_base_copy(&o->base, base);
    o->kernel = kernel;
    if (!rc) rc = sc_udf_args_init(&o->a, args, kinds, nargs);
    if (!rc) rc = sc_spec_create(&o->engine, cfg);
    if (rc) {
        sc_op_speculate_destroy(o);
        return rc;
    }
    *st = o;
    return SC_OK;
}

void sc_op_speculate_destroy(void *st) {
    spec_op *o = st;
    if (!o) return;
    sc_spec_destroy(o->engine);
    sc_udf_args_free(&o->a);
    free(o->res);
    free(o->idx);
    sc_op_base_free(&o->base);
    free(o);
}

void sc_op_speculate_cancel(void *st) { sc_spec_cancel(((spec_op *)st)->engine); }

void sc_op_speculate_stats(void *st, sc_spec_stats *out) {
    sc_spec_get_stats(((spec_op *)st)->engine, out);
}

static int reserve(spec_op *o, int64_t n) {
    if (n <= o->cap) return SC_OK;
    int64_t c = o->cap ? o->cap : 1024;
    while (c < n) c *= 2;
    if (sc_udf_args_reserve(&o->a, c)) return SC_ENOMEM;
    sc_spec_result *r = realloc(o->res, (size_t)c * sizeof *r);
    if (!r) return SC_ENOMEM;
    o->res = r;
    int64_t *ix = realloc(o->idx, (size_t)c * sizeof *ix);
    if (!ix) return SC_ENOMEM;
    for (int64_t i = 0; i < c; i++) ix[i] = i;
    o->idx = ix;
    o->cap = c;
    return SC_OK;
}

int sc_op_speculate_run(void *st, sc_batch *in, sc_batch **out) {
    spec_op *o = st;
    *out = NULL;
    if (in->eos) return sc_forward_eos(in, out);
    int64_t n = in->nrows;
    sc_count_in(&o->base, n);
    if (n == 0) {
        sc_batch_release(in);
        return SC_OK;
    }
    sc_batch *ob = NULL;
    int rc = reserve(o, n);
    if (!rc) {
        sc_udf_unpack(in, &o->a);
        rc = sc_spec_run(o->engine, n, task, o, o->res);
    }
    if (!rc) rc = sc_op_new_out(&o->base, in, &ob);
    if (!rc) rc = sc_batch_reserve(ob, n);
    int32_t nin = in->ncols, rcol = nin;
    for (int32_t c = 0; !rc && c < nin; c++) rc = sc_batch_take_col(ob, c, 0, in, c, o->idx, n);
    if (!rc) {
        uint8_t rt = o->base.out.lt[rcol];
        for (int64_t r = 0; r < n; r++) {
            const sc_spec_result *x = &o->res[r];
            if (!x->ok) {
                sc_batch_set_null(ob, rcol, r);
            } else if (rt == SC_LT_FLOAT) {
                double d;
                memcpy(&d, &x->bits, sizeof d);
                sc_batch_set_f64(ob, rcol, r, d);
            } else if (rt == SC_LT_BOOL) {
                sc_batch_set_bool(ob, rcol, r, x->bits != 0);
            } else {
                sc_batch_set_i64(ob, rcol, r, x->bits);
            }
        }
        ob->nrows = n;
    }
    sc_batch_release(in);
    if (rc) {
        if (ob) sc_batch_release(ob);
        return rc;
    }
    sc_count_out(&o->base, n);
    *out = ob;
    return SC_OK;
}
