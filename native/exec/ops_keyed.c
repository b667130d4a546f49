/* ops_keyed: the keyed operators without event time: aggregate / running (AggregateOp,
 * RunningOp), top-k (TopKOp) and dedup (DedupOp) of the reference. See ops_state.h. */
#include "ops_state.h"
#include "aggstate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ======================================================================= aggregate */

typedef struct agg_op {
    sc_op_base base;
    sc_keyed_plan kp;
    int32_t *aout_off, *aout; /* output columns of aggregate j: aout[aout_off[j] .. aout_off[j+1]) */
    sc_kmap map;              /* key -> group (keys other than one int64 column) */
    /* one int64 key column (ikey): its values -> group, and the null key's group (-1: none) */
    bool ikey;
    sc_imap imap;
    int64_t null_g;
    sc_acc *accs; /* group g: accs[g * naggs .. (g + 1) * naggs) (not dense) */
    /* dense (publishing, every aggregate with a dense form): group g's record is
     * dacc[g * dense.words ..] (aggstate.h) instead of sc_acc per aggregate */
    bool dense;
    sc_dense dn;
    uint64_t *dacc;
    size_t ngroups, gcap;
    sc_buf kbuf, scratch;
    int64_t *gid; /* group of each row of the current batch */
    int64_t gid_cap;
    size_t *koff;     /* the batch's encoded keys: kbuf[koff[r] .. koff[r + 1]) */
    uint64_t *khash;  /* and their hashes */
    int64_t koff_cap;
    uint64_t seq; /* rows seen (arrival serial for first / last) */
    /* publishing (spec.publish): per group the serial of its first row and its key columns;
     * the groups changed since the last publish, in the order they first changed */
    bool publish, complete; /* complete: the end-of-stream publish holds every key */
    int64_t *first;
    sc_sbuf *krow;
    uint8_t *changed;
    uint64_t *dirty;
    size_t ndirty;
} agg_op;

void sc_op_aggregate_destroy(void *vst) {
    agg_op *op = vst;
    if (!op) return;
    for (size_t i = 0; op->accs && i < op->ngroups * (size_t)op->kp.naggs; i++)
        sc_acc_free(&op->kp.aggs[i % (size_t)op->kp.naggs], &op->accs[i]);
    free(op->accs);
    free(op->dacc);
    sc_dense_free(&op->dn);
    sc_imap_free(&op->imap);
    for (size_t g = 0; op->krow && g < op->ngroups; g++) sc_sbuf_free(&op->krow[g]);
    free(op->first);
    free(op->krow);
    free(op->changed);
    free(op->dirty);
    free(op->aout_off);
    free(op->aout);
    free(op->gid);
    free(op->koff);
    free(op->khash);
    sc_kmap_free(&op->map);
    sc_buf_free(&op->kbuf);
    sc_buf_free(&op->scratch);
    sc_keyed_plan_free(&op->kp);
    sc_op_base_free(&op->base);
    free(op);
}

int sc_op_aggregate_create(void **st, const sc_op_base *base, const sc_keyed_spec *spec) {
    agg_op *op = calloc(1, sizeof *op);
    if (!op) return SC_ENOMEM;
    int rc = sc_op_base_copy(&op->base, base);
    if (rc) {
        free(op);
        return rc;
    }
    rc = sc_keyed_plan_init(&op->kp, spec, &op->base.in, &op->base.out, false);
    op->publish = spec->publish && spec->nkeys > 0;
    op->complete = op->publish && spec->publish == SC_PUBLISH_COMPLETE;
    op->null_g = -1;
    if (!rc) rc = sc_kmap_init(&op->map, 64);
    if (!rc) {
        op->ikey = op->kp.nkeys == 1 && sc_ltype_physical((sc_ltype)op->base.in.lt[op->kp.keys[0]]) == SC_COL_INT64;
        if (op->ikey) rc = sc_imap_init(&op->imap, 64);
    }
    if (!rc && op->publish) rc = sc_dense_plan(&op->dn, &op->kp, &op->dense);
    if (!rc) {
        int32_t na = op->kp.naggs, n = 0;
        op->aout_off = calloc((size_t)na + 1, sizeof(int32_t));
        op->aout = malloc(((size_t)op->kp.nouts + 1) * sizeof(int32_t));
        if (!op->aout_off || !op->aout) rc = SC_ENOMEM;
        for (int32_t j = 0; !rc && j < na; j++) {
            op->aout_off[j] = n;
            for (int32_t k = 0; k < op->kp.nouts; k++)
                if (op->kp.outs[k].kind == SC_OUT_AGG && op->kp.outs[k].arg == j) op->aout[n++] = SC_NHIDDEN + k;
        }
        if (!rc) op->aout_off[na] = n;
    }
    if (rc) {
        sc_op_aggregate_destroy(op);
        return rc;
    }
    *st = op;
    return SC_OK;
}

/* Grow the publishing arrays to cap groups (zeroed). */
static int agg_grow_publish(agg_op *op, size_t cap) {
    int64_t *f = realloc(op->first, cap * sizeof *f);
    if (f) op->first = f;
    sc_sbuf *k = realloc(op->krow, cap * sizeof *k);
    if (k) op->krow = k;
    uint8_t *c = realloc(op->changed, cap);
    if (c) op->changed = c;
    uint64_t *d = realloc(op->dirty, cap * sizeof *d);
    if (d) op->dirty = d;
    if (!f || !k || !c || !d) return SC_ENOMEM;
    memset(k + op->gcap, 0, (cap - op->gcap) * sizeof *k);
    memset(c + op->gcap, 0, cap - op->gcap);
    return SC_OK;
}

/* A new group (zeroed accumulators); *g its index. */
static int agg_new_group(agg_op *op, uint64_t *g) {
    size_t na = (size_t)op->kp.naggs;
    if (op->ngroups == op->gcap && (na || op->publish)) {
        size_t cap = op->gcap ? op->gcap * 2 : 64;
        if (op->dense) {
            uint64_t *d = realloc(op->dacc, cap * (size_t)(op->dn.words ? op->dn.words : 1) * sizeof *d);
            if (!d) return SC_ENOMEM;
            op->dacc = d;
        } else {
            sc_acc *a = realloc(op->accs, cap * (na ? na : 1) * sizeof *a);
            if (!a) return SC_ENOMEM;
            op->accs = a;
            memset(a + op->gcap * na, 0, (cap - op->gcap) * na * sizeof *a);
        }
        if (op->publish && agg_grow_publish(op, cap)) return SC_ENOMEM;
        op->gcap = cap;
    }
    if (op->dense) sc_dense_init(&op->dn, op->dacc + op->ngroups * (size_t)op->dn.words);
    *g = op->ngroups++;
    return SC_OK;
}

/* A group for a new key first seen at row r of `in`. */
static int agg_group_for(agg_op *op, const sc_batch *in, int64_t r, uint64_t *g) {
    int rc = agg_new_group(op, g);
    if (!rc && op->publish) {
        op->first[*g] = sc_batch_get_i64(in, SC_COL_SEQ, r);
        rc = sc_row_encode(&op->krow[*g], in, r, op->kp.keys, op->kp.nkeys);
    }
    return rc;
}

/* agg_groups for one int64 key column: probe the int map with the values themselves, the
 * slots of rows a few ahead prefetched (a batch's cache misses overlap). */
static int agg_groups_int(agg_op *op, const sc_batch *in) {
    enum { AHEAD = 16 };
    int64_t n = in->nrows;
    const sc_column *k = &in->cols[op->kp.keys[0]];
    const int64_t *v = k->values;
    bool nulls = k->null_count != 0;
    for (int64_t r = 0; r < n && r < AHEAD; r++) sc_imap_prefetch(&op->imap, v[r]);
    for (int64_t r = 0; r < n; r++) {
        if (r + AHEAD < n) sc_imap_prefetch(&op->imap, v[r + AHEAD]);
        uint64_t g;
        if (nulls && !sc_bit_get(k->validity, r)) {
            if (op->null_g < 0) {
                int rc = agg_group_for(op, in, r, &g);
                if (rc) return rc;
                op->null_g = (int64_t)g;
            }
            op->gid[r] = op->null_g;
            continue;
        }
        if (!sc_imap_find(&op->imap, v[r], &g)) {
            int rc = agg_group_for(op, in, r, &g);
            if (!rc) rc = sc_imap_insert(&op->imap, v[r], g);
            if (rc) return rc;
        }
        op->gid[r] = (int64_t)g;
    }
    return SC_OK;
}

/* op->gid[r] = the group of row r (created on first sight). */
static int agg_groups(agg_op *op, const sc_batch *in) {
    int64_t n = in->nrows;
    if (n > op->gid_cap) {
        int64_t *g = realloc(op->gid, (size_t)n * sizeof *g);
        if (!g) return SC_ENOMEM;
        op->gid = g;
        op->gid_cap = n;
    }
    if (op->kp.nkeys == 0) { /* one global group */
        uint64_t g = 0;
        if (op->ngroups == 0) {
            int rc = agg_new_group(op, &g);
            if (rc) return rc;
        }
        memset(op->gid, 0, (size_t)n * sizeof *op->gid);
        return SC_OK;
    }
    if (op->ikey) return agg_groups_int(op, in);
    /* encode and hash every row's key first, then probe with the slots of rows a few ahead
     * prefetched: a batch's cache misses overlap instead of queueing one after another */
    enum { AHEAD = 8 };
    op->kbuf.len = 0;
    if (n > op->koff_cap) {
        size_t *ko = realloc(op->koff, (size_t)(n + 1) * sizeof *ko);
        uint64_t *kh = realloc(op->khash, (size_t)n * sizeof *kh);
        if (ko) op->koff = ko;
        if (kh) op->khash = kh;
        if (!ko || !kh) return SC_ENOMEM;
        op->koff_cap = n;
    }
    for (int64_t r = 0; r < n; r++) {
        op->koff[r] = op->kbuf.len;
        int rc = sc_key_encode(&op->kbuf, in, r, op->kp.keys, op->kp.nkeys, NULL);
        if (rc) return rc;
        op->khash[r] = sc_hash_bytes(op->kbuf.p + op->koff[r], op->kbuf.len - op->koff[r]);
        if (r < AHEAD) sc_kmap_prefetch(&op->map, op->khash[r]);
    }
    op->koff[n] = op->kbuf.len;
    for (int64_t r = 0; r < n; r++) {
        if (r + AHEAD < n) sc_kmap_prefetch(&op->map, op->khash[r + AHEAD]);
        const uint8_t *key = op->kbuf.p + op->koff[r];
        uint32_t len = (uint32_t)(op->koff[r + 1] - op->koff[r]);
        uint64_t h = op->khash[r], g;
        if (!sc_kmap_find(&op->map, h, key, len, &g)) {
            int rc = agg_group_for(op, in, r, &g);
            bool ins;
            if (!rc) rc = sc_kmap_upsert(&op->map, h, key, len, &g, &ins);
            if (rc) return rc;
        }
        op->gid[r] = (int64_t)g;
    }
    return SC_OK;
}

/* One output row per input row: the copied input columns, then per row every aggregate
 * (update with row r, write the key's result at row r). Row by row keeps a group's
 * accumulators in cache; each column is still written in row order. */
static int agg_batch(agg_op *op, const sc_batch *in, sc_emitter *e) {
    int64_t n = in->nrows;
    int rc = agg_groups(op, in);
    sc_batch *ob;
    if (!rc) rc = sc_op_new_out(&op->base, in, &ob);
    if (rc) return rc;
    sc_chain_append(&e->head, &e->tail, ob);
    ob->nrows = n;
    e->rows = n;
    for (int64_t r = 0; r < n; r++) sc_copy_hidden(ob, r, in, r);
    for (int32_t k = 0; k < op->kp.nouts; k++) {
        if (op->kp.outs[k].kind != SC_OUT_INPUT) continue;
        for (int64_t r = 0; !rc && r < n; r++)
            rc = sc_batch_copy_cell(ob, SC_NHIDDEN + k, r, in, op->kp.outs[k].arg, r);
    }
    int32_t na = op->kp.naggs;
    for (int64_t r = 0; !rc && r < n; r++) {
        if (r + 8 < n && na) __builtin_prefetch(&op->accs[op->gid[r + 8] * na]);
        sc_acc *a = &op->accs[op->gid[r] * na];
        for (int32_t j = 0; !rc && j < na; j++) {
            const sc_agg_plan *p = &op->kp.aggs[j];
            rc = sc_acc_update(p, &a[j], in, r, op->seq + (uint64_t)r + 1, &op->scratch);
            for (int32_t i = op->aout_off[j]; !rc && i < op->aout_off[j + 1]; i++)
                rc = sc_acc_write(p, &a[j], ob, op->aout[i], r);
        }
    }
    op->seq += (uint64_t)n;
    return rc;
}

/* Aggregate j over the whole batch (rows already grouped): a tight loop for the common
 * numeric cases without nulls, sc_acc_update row by row otherwise. Aggregates are
 * independent, so running them one after another keeps every group's arrival order. */
static int agg_update_column(agg_op *op, int32_t j, const sc_batch *in) {
    const sc_agg_plan *p = &op->kp.aggs[j];
    const int64_t *gid = op->gid;
    int64_t n = in->nrows;
    int32_t na = op->kp.naggs;
    sc_acc *A = op->accs + j;
    if (p->arg < 0 || (p->fn == SC_AGG_COUNT && in->cols[p->arg].null_count == 0)) {
        for (int64_t r = 0; r < n; r++) A[gid[r] * na].n++;
        return SC_OK;
    }
    const sc_column *c = &in->cols[p->arg];
    bool sum = p->fn == SC_AGG_SUM || p->fn == SC_AGG_MEAN;
    if (sum && c->null_count == 0 && p->at == SC_COL_DOUBLE) {
        const double *x = c->values;
        for (int64_t r = 0; r < n; r++) {
            sc_acc *a = &A[gid[r] * na];
            a->v.f = a->has ? a->v.f + x[r] : x[r]; /* the first value as is (keeps -0.0) */
            a->has = 1;
            a->n++;
        }
        return SC_OK;
    }
    if (sum && c->null_count == 0 && p->at == SC_COL_INT64) {
        const int64_t *x = c->values;
        for (int64_t r = 0; r < n; r++) {
            sc_acc *a = &A[gid[r] * na];
            a->v.i = a->has ? (int64_t)((uint64_t)a->v.i + (uint64_t)x[r]) : x[r]; /* wraps */
            a->has = 1;
            a->n++;
        }
        return SC_OK;
    }
    int rc = SC_OK;
    for (int64_t r = 0; !rc && r < n; r++)
        rc = sc_acc_update(p, &A[gid[r] * na], in, r, op->seq + (uint64_t)r + 1, &op->scratch);
    return rc;
}

/* Publishing: update the groups of every row and note which changed; no output rows. */
static int agg_fold(agg_op *op, const sc_batch *in) {
    int64_t n = in->nrows;
    int rc = agg_groups(op, in);
    if (!rc && op->dense) sc_dense_update(&op->dn, op->dacc, op->gid, in);
    for (int32_t j = 0; !rc && !op->dense && j < op->kp.naggs; j++) rc = agg_update_column(op, j, in);
    for (int64_t r = 0; !rc && r < n; r++) {
        uint64_t g = (uint64_t)op->gid[r];
        if (!op->changed[g]) {
            op->changed[g] = 1;
            op->dirty[op->ndirty++] = g;
        }
    }
    op->seq += (uint64_t)n;
    sc_count_out(&op->base, n); /* the changelog rows this stands for */
    return rc;
}

/* Publishing: one row per group changed since the last publish (see ops_state.h). */
static int agg_publish(agg_op *op, const sc_batch *in, sc_emitter *e) {
    bool all = in->eos && op->complete;
    if (all) { /* every key, in the order of their first rows (groups are made in that order) */
        for (size_t g = 0; g < op->ngroups; g++) {
            op->changed[g] = 0;
            op->dirty[g] = g;
        }
        op->ndirty = op->ngroups;
    }
    size_t nd = op->ndirty;
    if (!nd) return SC_OK;
    sc_batch *ob;
    int rc = sc_batch_new(&ob, &op->base.out, (int64_t)nd);
    if (rc) return rc;
    ob->serial = in->serial;
    ob->first_row = in->first_row;
    ob->part = in->part;
    ob->group_n = in->group_n;
    ob->nrows = (int64_t)nd;
    sc_chain_append(&e->head, &e->tail, ob);
    int32_t na = op->kp.naggs, nk = op->kp.nkeys;
    for (size_t i = 0; i < nd; i++) {
        uint64_t g = op->dirty[i];
        sc_batch_set_i64(ob, SC_COL_SEQ, (int64_t)i, op->first[g]);
        sc_batch_set_i64(ob, SC_COL_POS, (int64_t)i, all); /* 1: a row of the complete publish */
        op->changed[g] = 0;
    }
    for (int32_t k = 0; !rc && k < op->kp.nouts; k++) {
        if (op->kp.outs[k].kind != SC_OUT_INPUT) continue;
        int32_t ki = 0;
        while (ki < nk && op->kp.keys[ki] != op->kp.outs[k].arg) ki++;
        if (ki == nk) return SC_EINVAL; /* only key columns are copied by an aggregate */
        for (size_t i = 0; !rc && i < nd; i++)
            rc = sc_row_put(ob, SC_NHIDDEN + k, (int64_t)i, sc_sbuf_cdata(&op->krow[op->dirty[i]]), nk, ki);
    }
    for (int32_t j = 0; !rc && j < na; j++)
        for (int32_t x = op->aout_off[j]; !rc && x < op->aout_off[j + 1]; x++)
            for (size_t i = 0; !rc && i < nd; i++) {
                sc_acc view;
                const sc_acc *a = &view;
                if (op->dense) sc_dense_acc(&op->dn, j, op->dacc + op->dirty[i] * (size_t)op->dn.words, &view);
                else a = &op->accs[op->dirty[i] * na + j];
                rc = sc_acc_write(&op->kp.aggs[j], a, ob, op->aout[x], (int64_t)i);
            }
    op->ndirty = 0;
    return rc;
}

int sc_op_aggregate_run(void *vst, sc_batch *in, sc_batch **out) {
    agg_op *op = vst;
    sc_emitter e = { &op->base, in, NULL, NULL, 0 };
    int rc = SC_OK;
    if (op->publish) {
        if (in->nrows && in->eos) return sc_emit_finish(&e, in, out, SC_EINVAL);
        sc_count_in(&op->base, in->nrows);
        if (in->nrows > 0) rc = agg_fold(op, in);
        if (!rc && (in->publish || in->eos)) rc = agg_publish(op, in, &e);
        sc_i64_store_relaxed(&op->base.state_size, (int64_t)op->ngroups);
        return sc_emit_finish(&e, in, out, rc);
    }
    if (in->eos) return sc_emit_finish(&e, in, out, in->nrows ? SC_EINVAL : SC_OK);
    sc_count_in(&op->base, in->nrows);
    if (in->nrows > 0) rc = agg_batch(op, in, &e);
    sc_i64_store_relaxed(&op->base.state_size, (int64_t)op->ngroups);
    return sc_emit_finish(&e, in, out, rc);
}

/* ======================================================================= top-k */

typedef struct tk_ent {
    union {
        int64_t i;
        double f;
    } v;        /* the `by` value (utf8: read from the row) */
    sc_sbuf row; /* the whole input row */
} tk_ent;

typedef struct tk_list {
    uint32_t n, cap;
    tk_ent *e; /* best first */
} tk_list;

typedef struct topk_op {
    sc_op_base base;
    int32_t *keys, nkeys, by, k;
    bool desc;
    sc_col_type bt;
    int32_t *cols, ncols; /* 0 .. ncols-1: every input column */
    sc_out_col *outs;
    int32_t nouts;
    sc_kmap map; /* key -> list */
    tk_list *lists;
    size_t nlists, lcap;
    int64_t entries;
    sc_buf kbuf;
} topk_op;

void sc_op_topk_destroy(void *vst) {
    topk_op *op = vst;
    if (!op) return;
    for (size_t i = 0; i < op->nlists; i++) {
        for (uint32_t j = 0; j < op->lists[i].cap; j++) sc_sbuf_free(&op->lists[i].e[j].row);
        free(op->lists[i].e);
    }
    free(op->lists);
    free(op->keys);
    free(op->cols);
    free(op->outs);
    sc_kmap_free(&op->map);
    sc_buf_free(&op->kbuf);
    sc_op_base_free(&op->base);
    free(op);
}

int sc_op_topk_create(void **st, const sc_op_base *base, const int32_t *keys, int32_t nkeys, int32_t by,
                      int32_t k, bool descending, const sc_out_col *outs) {
    topk_op *op = calloc(1, sizeof *op);
    if (!op) return SC_ENOMEM;
    int rc = sc_op_base_copy(&op->base, base);
    if (rc) {
        free(op);
        return rc;
    }
    const sc_schema *in = &op->base.in, *out = &op->base.out;
    op->nkeys = nkeys;
    op->by = by;
    op->k = k;
    op->desc = descending;
    op->ncols = in->ncols;
    op->nouts = out->ncols - SC_NHIDDEN;
    if (nkeys < 0 || (nkeys && !keys) || k < 0 || by < SC_NHIDDEN || by >= in->ncols || op->nouts < 0 ||
        (op->nouts && !outs))
        rc = SC_EINVAL;
    if (!rc) {
        op->keys = malloc(((size_t)nkeys + 1) * sizeof *op->keys);
        op->cols = malloc((size_t)op->ncols * sizeof *op->cols);
        op->outs = malloc(((size_t)op->nouts + 1) * sizeof *op->outs);
        rc = op->keys && op->cols && op->outs ? sc_kmap_init(&op->map, 64) : SC_ENOMEM;
    }
    for (int32_t i = 0; !rc && i < nkeys; i++) {
        op->keys[i] = keys[i];
        if (keys[i] < 0 || keys[i] >= in->ncols) rc = SC_EINVAL;
    }
    for (int32_t i = 0; !rc && i < op->ncols; i++) op->cols[i] = i;
    for (int32_t i = 0; !rc && i < op->nouts; i++) {
        op->outs[i] = outs[i];
        sc_col_type ot = sc_ltype_physical((sc_ltype)out->lt[SC_NHIDDEN + i]);
        if (outs[i].kind == SC_OUT_RANK) rc = ot == SC_COL_INT64 ? SC_OK : SC_EINVAL;
        else if (outs[i].kind != SC_OUT_INPUT || outs[i].arg < 0 || outs[i].arg >= in->ncols ||
                 sc_ltype_physical((sc_ltype)in->lt[outs[i].arg]) != ot)
            rc = SC_EINVAL;
    }
    if (!rc) op->bt = sc_ltype_physical((sc_ltype)in->lt[by]);
    if (rc) {
        sc_op_topk_destroy(op);
        return rc;
    }
    *st = op;
    return SC_OK;
}

/* _less(a, b) where a is in[row, by] and b the entry's value (a_first), or the reverse. */
static bool tk_less(const topk_op *op, const sc_batch *in, int64_t row, const tk_ent *e, bool a_first) {
    switch (op->bt) {
    case SC_COL_DOUBLE: {
        double x = sc_batch_get_f64(in, op->by, row), y = e->v.f;
        if (!a_first) {
            double t = x;
            x = y;
            y = t;
        }
        if (isnan(x)) return false;
        if (isnan(y)) return true;
        return x < y;
    }
    case SC_COL_UTF8: {
        int32_t la;
        const uint8_t *a = (const uint8_t *)sc_batch_get_utf8(in, op->by, row, &la);
        const uint8_t *blob = sc_sbuf_cdata(&e->row), *cell = sc_row_cell(blob, op->ncols, op->by);
        uint32_t off, lb;
        memcpy(&off, cell, 4);
        memcpy(&lb, cell + 4, 4);
        const uint8_t *b = blob + off;
        size_t na = (size_t)la, nb = lb;
        if (!a_first) {
            const uint8_t *t = a;
            a = b;
            b = t;
            na = lb;
            nb = (size_t)la;
        }
        int c = memcmp(a, b, na < nb ? na : nb);
        return c < 0 || (c == 0 && na < nb);
    }
    default: {
        int64_t x = op->bt == SC_COL_BOOL ? sc_batch_get_bool(in, op->by, row) : sc_batch_get_i64(in, op->by, row);
        return a_first ? x < e->v.i : e->v.i < x;
    }
    }
}

/* Insert row `row` into list L if it ranks among the k best: *changed says so. */
static int tk_insert(topk_op *op, tk_list *L, const sc_batch *in, int64_t row, bool *changed) {
    uint32_t pos = L->n;
    for (uint32_t i = 0; i < L->n; i++) {
        /* better(v, cv): descending: cv < v; ascending: v < cv */
        if (tk_less(op, in, row, &L->e[i], !op->desc)) {
            pos = i;
            break;
        }
    }
    *changed = pos < (uint32_t)op->k;
    if (!*changed) return SC_OK;
    tk_ent spare;
    if (L->n == (uint32_t)op->k) { /* the last one drops out; its buffer is reused */
        spare = L->e[L->n - 1];
        memmove(&L->e[pos + 1], &L->e[pos], (L->n - 1 - pos) * sizeof *L->e);
    } else {
        if (L->n == L->cap) {
            uint32_t cap = L->cap ? L->cap * 2 : 4;
            if (cap > (uint32_t)op->k) cap = (uint32_t)op->k;
            tk_ent *e = realloc(L->e, cap * sizeof *e);
            if (!e) return SC_ENOMEM;
            memset(e + L->cap, 0, (cap - L->cap) * sizeof *e);
            L->e = e;
            L->cap = cap;
        }
        spare = L->e[L->n]; /* an unused slot (zeroed or an old buffer) */
        memmove(&L->e[pos + 1], &L->e[pos], (L->n - pos) * sizeof *L->e);
        L->n++;
        op->entries++;
    }
    L->e[pos] = spare;
    tk_ent *e = &L->e[pos];
    switch (op->bt) {
    case SC_COL_DOUBLE: e->v.f = sc_batch_get_f64(in, op->by, row); break;
    case SC_COL_BOOL: e->v.i = sc_batch_get_bool(in, op->by, row); break;
    case SC_COL_INT64: e->v.i = sc_batch_get_i64(in, op->by, row); break;
    default: e->v.i = 0;
    }
    return sc_row_encode(&e->row, in, row, op->cols, op->ncols);
}

/* Emit the whole list with ranks; hidden columns from the input row that changed it. */
static int tk_emit(topk_op *op, const tk_list *L, const sc_batch *in, int64_t row, sc_emitter *e) {
    for (uint32_t i = 0; i < L->n; i++) {
        sc_batch *ob;
        int64_t orow;
        int rc = sc_emit_row(e, &ob, &orow);
        if (rc) return rc;
        sc_copy_hidden(ob, orow, in, row);
        const uint8_t *blob = sc_sbuf_cdata(&L->e[i].row);
        for (int32_t k = 0; k < op->nouts; k++) {
            if (op->outs[k].kind == SC_OUT_RANK) sc_batch_set_i64(ob, SC_NHIDDEN + k, orow, (int64_t)i + 1);
            else if ((rc = sc_row_put(ob, SC_NHIDDEN + k, orow, blob, op->ncols, op->outs[k].arg))) return rc;
        }
    }
    return SC_OK;
}

static int tk_list_of(topk_op *op, const sc_batch *in, int64_t row, tk_list **L) {
    op->kbuf.len = 0;
    int rc = sc_key_encode(&op->kbuf, in, row, op->keys, op->nkeys, NULL);
    if (rc) return rc;
    uint64_t h = sc_hash_bytes(op->kbuf.p, op->kbuf.len), id = op->nlists;
    if (op->nlists == op->lcap) { /* room for a new list before the map may refer to it */
        size_t cap = op->lcap ? op->lcap * 2 : 64;
        tk_list *l = realloc(op->lists, cap * sizeof *l);
        if (!l) return SC_ENOMEM;
        op->lists = l;
        op->lcap = cap;
    }
    bool ins;
    rc = sc_kmap_upsert(&op->map, h, op->kbuf.p, (uint32_t)op->kbuf.len, &id, &ins);
    if (rc) return rc;
    if (ins) op->lists[op->nlists++] = (tk_list){ 0, 0, NULL };
    *L = &op->lists[id];
    return SC_OK;
}

int sc_op_topk_run(void *vst, sc_batch *in, sc_batch **out) {
    topk_op *op = vst;
    sc_emitter e = { &op->base, in, NULL, NULL, 0 };
    if (in->eos) return sc_emit_finish(&e, in, out, in->nrows ? SC_EINVAL : SC_OK);
    sc_count_in(&op->base, in->nrows);
    int rc = SC_OK;
    int64_t filtered = 0;
    for (int64_t r = 0; !rc && r < in->nrows; r++) {
        if (!sc_batch_is_valid(in, op->by, r)) {
            filtered++;
            continue;
        }
        tk_list *L;
        bool changed;
        rc = tk_list_of(op, in, r, &L);
        if (!rc) rc = tk_insert(op, L, in, r, &changed);
        if (!rc && changed) rc = tk_emit(op, L, in, r, &e);
    }
    sc_count_filtered(&op->base, filtered);
    sc_i64_store_relaxed(&op->base.state_size, op->entries);
    return sc_emit_finish(&e, in, out, rc);
}

/* ======================================================================= dedup */

typedef struct dedup_op {
    sc_op_base base;
    int32_t *keys, nkeys;
    sc_kmap seen;
    sc_buf kbuf;
    uint8_t *keep;
    int64_t keep_cap;
} dedup_op;

void sc_op_dedup_destroy(void *vst) {
    dedup_op *op = vst;
    if (!op) return;
    free(op->keys);
    free(op->keep);
    sc_kmap_free(&op->seen);
    sc_buf_free(&op->kbuf);
    sc_op_base_free(&op->base);
    free(op);
}

int sc_op_dedup_create(void **st, const sc_op_base *base, const int32_t *keys, int32_t nkeys) {
    dedup_op *op = calloc(1, sizeof *op);
    if (!op) return SC_ENOMEM;
    int rc = sc_op_base_copy(&op->base, base);
    if (rc) {
        free(op);
        return rc;
    }
    const sc_schema *in = &op->base.in, *out = &op->base.out;
    if (nkeys < 0 || (nkeys && !keys) || in->ncols != out->ncols || memcmp(in->lt, out->lt, (size_t)in->ncols))
        rc = SC_EINVAL;
    /* no keys: every user column */
    op->nkeys = nkeys ? nkeys : in->ncols - SC_NHIDDEN;
    if (!rc && op->nkeys < 0) rc = SC_EINVAL;
    if (!rc) {
        op->keys = malloc(((size_t)op->nkeys + 1) * sizeof *op->keys);
        rc = op->keys ? sc_kmap_init(&op->seen, 64) : SC_ENOMEM;
    }
    for (int32_t i = 0; !rc && i < op->nkeys; i++) {
        op->keys[i] = nkeys ? keys[i] : SC_NHIDDEN + i;
        if (op->keys[i] < 0 || op->keys[i] >= in->ncols) rc = SC_EINVAL;
    }
    if (rc) {
        sc_op_dedup_destroy(op);
        return rc;
    }
    *st = op;
    return SC_OK;
}

int sc_op_dedup_run(void *vst, sc_batch *in, sc_batch **out) {
    dedup_op *op = vst;
    sc_emitter e = { &op->base, in, NULL, NULL, 0 };
    if (in->eos) return sc_emit_finish(&e, in, out, in->nrows ? SC_EINVAL : SC_OK);
    int64_t n = in->nrows, kept = 0;
    sc_count_in(&op->base, n);
    int rc = SC_OK;
    if (n > op->keep_cap) {
        uint8_t *k = realloc(op->keep, (size_t)n);
        if (!k) return sc_emit_finish(&e, in, out, SC_ENOMEM);
        op->keep = k;
        op->keep_cap = n;
    }
    for (int64_t r = 0; !rc && r < n; r++) {
        op->kbuf.len = 0;
        rc = sc_key_encode(&op->kbuf, in, r, op->keys, op->nkeys, op->base.in.lt);
        uint64_t v = 0;
        bool ins = false;
        if (!rc) rc = sc_kmap_upsert(&op->seen, sc_hash_bytes(op->kbuf.p, op->kbuf.len), op->kbuf.p,
                                     (uint32_t)op->kbuf.len, &v, &ins);
        op->keep[r] = ins;
        kept += ins;
    }
    if (!rc) sc_count_filtered(&op->base, n - kept);
    sc_i64_store_relaxed(&op->base.state_size, (int64_t)op->seen.n);
    if (!rc && kept == n && n > 0) { /* every row passes: forward the batch itself */
        sc_count_out(&op->base, n);
        in->next = NULL;
        *out = in;
        return SC_OK;
    }
    for (int64_t r = 0; !rc && r < n; r++) {
        if (!op->keep[r]) continue;
        sc_batch *ob;
        int64_t orow;
        rc = sc_emit_row(&e, &ob, &orow);
        if (!rc) rc = sc_batch_copy_row(ob, orow, in, r);
    }
    return sc_emit_finish(&e, in, out, rc);
}
