/* ops_step: the keyed step over a typed state struct (see ops_step.h). */
#include "ops_step.h"
#include "udf_args.h"

#include "ops_state.h"

#include <stdlib.h>
#include <string.h>

typedef struct step_op {
    sc_op_base base; /* first: generic code reads it */
    sc_step_kernel kernel;
    int32_t *keys, nkeys;
    sc_udf_args a;        /* the argument columns and their per-batch buffers */
    char ret;
    size_t ssize, stride; /* state bytes; bytes between blobs (a multiple of 16) */
    sc_kmap map;          /* encoded key -> state index */
    uint8_t *blobs;       /* state i: blobs[i * stride .. i * stride + ssize) */
    size_t nstates, scap;
    sc_buf kbuf;
    /* per-batch scratch (one batch at a time per instance) */
    int64_t cap;
    int64_t *sid; /* state of each row */
    void **sts;   /* its address */
    uint8_t *out, *out_ok;
    int64_t *idx; /* 0..cap-1, for sc_batch_take_col */
} step_op;

void sc_op_step_destroy(void *vst) {
    step_op *o = vst;
    if (!o) return;
    sc_udf_args_free(&o->a);
    free(o->keys);
    free(o->blobs);
    free(o->sid);
    free(o->sts);
    free(o->out);
    free(o->out_ok);
    free(o->idx);
    sc_kmap_free(&o->map);
    sc_buf_free(&o->kbuf);
    sc_op_base_free(&o->base);
    free(o);
}

int sc_op_step_create(void **st, const sc_op_base *base, sc_step_kernel kernel, const int32_t *keys,
                      int32_t nkeys, const int32_t *args, const char *kinds, int32_t nargs, char ret,
                      int64_t state_size) {
    *st = NULL;
    if (!kernel || nkeys < 0 || (nkeys && !keys) || state_size <= 0 || state_size > (1 << 20) ||
        base->out.ncols != base->in.ncols + 1 || sc_udf_args_check(&base->in, args, kinds, nargs))
        return SC_EINVAL;
    for (int32_t j = 0; j < nkeys; j++)
        if (keys[j] < SC_NHIDDEN || keys[j] >= base->in.ncols) return SC_EINVAL;
    uint8_t rt = base->out.lt[base->in.ncols];
    if (!((ret == 'd' && rt == SC_LT_FLOAT) || (ret == 'i' && rt == SC_LT_INT) || (ret == 'b' && rt == SC_LT_BOOL)))
        return SC_EINVAL;
    step_op *o = calloc(1, sizeof *o);
    if (!o) return SC_ENOMEM;
    int rc = sc_op_base_copy(&o->base, base);
    if (rc) {
        free(o);
        return rc;
    }
    o->kernel = kernel;
    o->nkeys = nkeys;
    o->ret = ret;
    o->ssize = (size_t)state_size;
    o->stride = ((size_t)state_size + 15) & ~(size_t)15;
    o->keys = malloc(((size_t)nkeys + 1) * sizeof(int32_t));
    rc = o->keys ? sc_udf_args_init(&o->a, args, kinds, nargs) : SC_ENOMEM;
    if (!rc) {
        if (nkeys) memcpy(o->keys, keys, (size_t)nkeys * sizeof(int32_t));
        rc = sc_kmap_init(&o->map, 64);
    }
    if (rc) {
        sc_op_step_destroy(o);
        return rc;
    }
    *st = o;
    return SC_OK;
}

static int reserve(step_op *o, int64_t n) {
    if (n <= o->cap) return SC_OK;
    int64_t c = o->cap ? o->cap : 1024;
    while (c < n) c *= 2;
    if (sc_udf_args_reserve(&o->a, c)) return SC_ENOMEM;
    int64_t *sid = realloc(o->sid, (size_t)c * sizeof *sid);
    if (sid) o->sid = sid;
    void **sts = realloc(o->sts, (size_t)c * sizeof *sts);
    if (sts) o->sts = sts;
    uint8_t *out = realloc(o->out, (size_t)c * 8);
    if (out) o->out = out;
    uint8_t *ook = realloc(o->out_ok, (size_t)c);
    if (ook) o->out_ok = ook;
    int64_t *ix = realloc(o->idx, (size_t)c * sizeof *ix);
    if (ix) o->idx = ix;
    if (!sid || !sts || !out || !ook || !ix) return SC_ENOMEM;
    for (int64_t i = 0; i < c; i++) ix[i] = i;
    o->cap = c;
    return SC_OK;
}

/* A new zeroed state; *i its index. */
static int new_state(step_op *o, uint64_t *i) {
    if (o->nstates == o->scap) {
        size_t cap = o->scap ? o->scap * 2 : 64;
        uint8_t *b = realloc(o->blobs, cap * o->stride);
        if (!b) return SC_ENOMEM;
        memset(b + o->scap * o->stride, 0, (cap - o->scap) * o->stride);
        o->blobs = b;
        o->scap = cap;
    }
    *i = o->nstates++;
    return SC_OK;
}

/* o->sid[r] = the state of row r's key (created on first sight); then o->sts[r] its address
 * (after every state of the batch exists: creating one may move the blobs). */
static int states_of(step_op *o, const sc_batch *in) {
    int64_t n = in->nrows;
    if (o->nkeys == 0) {
        uint64_t g = 0;
        if (o->nstates == 0) {
            int rc = new_state(o, &g);
            if (rc) return rc;
        }
        for (int64_t r = 0; r < n; r++) o->sts[r] = o->blobs;
        return SC_OK;
    }
    for (int64_t r = 0; r < n; r++) {
        o->kbuf.len = 0;
        int rc = sc_key_encode(&o->kbuf, in, r, o->keys, o->nkeys, NULL);
        if (rc) return rc;
        uint64_t h = sc_hash_bytes(o->kbuf.p, o->kbuf.len), g;
        if (!sc_kmap_find(&o->map, h, o->kbuf.p, (uint32_t)o->kbuf.len, &g)) {
            bool ins;
            rc = new_state(o, &g);
            if (!rc) rc = sc_kmap_upsert(&o->map, h, o->kbuf.p, (uint32_t)o->kbuf.len, &g, &ins);
            if (rc) return rc;
        }
        o->sid[r] = (int64_t)g;
    }
    for (int64_t r = 0; r < n; r++) o->sts[r] = o->blobs + (size_t)o->sid[r] * o->stride;
    return SC_OK;
}

static int step_batch(step_op *o, sc_batch *in, sc_emitter *e) {
    int64_t n = in->nrows;
    int rc = reserve(o, n);
    if (!rc) rc = states_of(o, in);
    if (rc) return rc;
    sc_udf_unpack(in, &o->a);
    o->kernel(n, o->sts, (const void **)o->a.vals, (const uint8_t **)o->a.oks, o->out, o->out_ok);
    sc_batch *ob;
    rc = sc_op_new_out(&o->base, in, &ob);
    if (rc) return rc;
    sc_chain_append(&e->head, &e->tail, ob);
    rc = sc_batch_reserve(ob, n);
    int32_t nin = in->ncols, rcol = nin;
    for (int32_t c = 0; !rc && c < nin; c++) rc = sc_batch_take_col(ob, c, 0, in, c, o->idx, n);
    if (rc) return rc;
    for (int64_t r = 0; r < n; r++) {
        if (!o->out_ok[r]) sc_batch_set_null(ob, rcol, r);
        else if (o->ret == 'd') sc_batch_set_f64(ob, rcol, r, ((const double *)o->out)[r]);
        else if (o->ret == 'i') sc_batch_set_i64(ob, rcol, r, ((const int64_t *)o->out)[r]);
        else sc_batch_set_bool(ob, rcol, r, o->out[r] != 0);
    }
    ob->nrows = n;
    e->rows = n;
    return SC_OK;
}

int sc_op_step_run(void *vst, sc_batch *in, sc_batch **out) {
    step_op *o = vst;
    sc_emitter e = { &o->base, in, NULL, NULL, 0 };
    int rc = SC_OK;
    if (in->eos) return sc_emit_finish(&e, in, out, in->nrows ? SC_EINVAL : SC_OK);
    sc_count_in(&o->base, in->nrows);
    if (in->nrows > 0) rc = step_batch(o, in, &e);
    sc_i64_store_relaxed(&o->base.state_size, (int64_t)o->nstates);
    return sc_emit_finish(&e, in, out, rc);
}
