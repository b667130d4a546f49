/* ops_join: keyed interval inner join over the tagged layout. See ops_join.h. */
#include "ops_join.h"

#include "../runtime/atomic_ext.h"
#include "fanin.h"

typedef struct join_op {
    sc_op_base base;
    int32_t width[2], first[2]; /* user columns of each side and where they start */
    int32_t *keys[2], nkeys;
    int32_t time_col[2];
    bool days;
    int64_t within, lateness;
    int32_t nouts;
    int32_t *outs;    /* tagged input column of each output column */
    uint8_t *oside;   /* its side */
    int32_t *oidx;    /* its place in icols[side] */
    int32_t *icols[2], nicols[2]; /* columns of each side kept with a stored row */
    char *reason;
    sc_fkeys keys_;
    bool has_max;
    int64_t max_t;
    int64_t stored, sweep_at;
    sc_buf kbuf;
} join_op;

static int side_of(const join_op *op, int32_t col) {
    for (int s = 0; s < 2; s++)
        if (col >= op->first[s] && col < op->first[s] + op->width[s]) return s;
    return -1;
}

static int emit_match(join_op *op, const sc_batch *in, int64_t r, int port, const sc_frow *other,
                      sc_emitter *e) {
    sc_batch *ob;
    int64_t orow;
    int rc = sc_emit_row(e, &ob, &orow);
    if (rc) return rc;
    sc_copy_hidden(ob, orow, in, r);
    const uint8_t *blob = sc_sbuf_cdata(&other->blob);
    int oport = 1 - port;
    for (int32_t k = 0; !rc && k < op->nouts; k++) {
        int32_t c = SC_NHIDDEN + k;
        if (op->oside[k] == port) rc = sc_batch_copy_cell(ob, c, orow, in, op->outs[k], r);
        else rc = sc_row_put(ob, c, orow, blob, op->nicols[oport], op->oidx[k]);
    }
    return rc;
}

/* Drop every stored row older than watermark - within; forget keys left empty. */
static int sweep(join_op *op) {
    sc_i128 limit = (sc_i128)op->max_t - op->lateness - op->within - 1; /* t < wm - within */
    int64_t kept = 0;
    for (uint32_t id = 0; id < op->keys_.hw; id++) {
        sc_fkey *k = &op->keys_.k[id];
        if (!k->live) continue;
        sc_frows_drop_upto(&k->ports[0], limit);
        sc_frows_drop_upto(&k->ports[1], limit);
        int64_t n = (int64_t)k->ports[0].n + k->ports[1].n;
        if (n == 0) {
            int rc = sc_fkeys_drop(&op->keys_, id);
            if (rc) return rc;
        }
        kept += n;
    }
    op->stored = kept;
    op->sweep_at = kept * 2 > SWEEP_MIN ? kept * 2 : SWEEP_MIN;
    return SC_OK;
}

static int join_row(join_op *op, const sc_batch *in, int64_t r, sc_emitter *e) {
    int64_t port = sc_batch_get_i64(in, SC_FANIN_PORT, r);
    if (port != 0 && port != 1) return SC_EINVAL;
    int p = (int)port;
    int64_t t;
    if (!sc_fanin_ticks(in, op->time_col[p], r, op->days, &t)) return sc_op_dead(&op->base, in, r, op->reason);
    if (op->has_max && (sc_i128)t < (sc_i128)op->max_t - op->lateness) return sc_op_late(&op->base, in, r);
    for (int32_t i = 0; i < op->nkeys; i++)
        if (!sc_batch_is_valid(in, op->keys[p][i], r)) return SC_OK; /* matches nothing */
    op->kbuf.len = 0;
    int rc = sc_key_encode(&op->kbuf, in, r, op->keys[p], op->nkeys, NULL);
    if (rc) return rc;
    uint32_t id;
    bool created;
    rc = sc_fkeys_get(&op->keys_, op->kbuf.p, (uint32_t)op->kbuf.len, &id, &created);
    if (rc) return rc;
    if (!created) {
        sc_frows *o = &op->keys_.k[id].ports[1 - p];
        /* rows the reference has evicted already: older than (watermark so far) - within */
        op->stored -= sc_frows_drop_upto(o, (sc_i128)op->max_t - op->lateness - op->within - 1);
        for (uint32_t i = 0; !rc && i < o->n; i++) {
            sc_i128 d = (sc_i128)o->r[i].t - t;
            if (d < 0) d = -d;
            if (d <= op->within) rc = emit_match(op, in, r, p, &o->r[i], e);
        }
        if (rc) return rc;
    }
    rc = sc_frows_push(&op->keys_.k[id].ports[p], t, in, r, op->icols[p], op->nicols[p]);
    if (rc) return rc;
    op->stored++;
    if (!op->has_max || t > op->max_t) op->max_t = t;
    op->has_max = true;
    return op->stored >= op->sweep_at ? sweep(op) : SC_OK;
}

int sc_op_join_run(void *vst, sc_batch *in, sc_batch **out) {
    join_op *op = vst;
    sc_emitter e = { &op->base, in, NULL, NULL, 0 };
    int rc = SC_OK;
    if (in->eos) {
        rc = in->nrows ? SC_EINVAL : SC_OK;
    } else {
        sc_count_in(&op->base, in->nrows);
        for (int64_t r = 0; !rc && r < in->nrows; r++) rc = join_row(op, in, r, &e);
    }
#ifdef SC_DEBUG
    if (!rc) {
        int64_t n = 0;
        for (uint32_t id = 0; id < op->keys_.hw; id++)
            if (op->keys_.k[id].live) n += (int64_t)op->keys_.k[id].ports[0].n + op->keys_.k[id].ports[1].n;
        SC_INVARIANT(n == op->stored, "join: stored row count");
        SC_INVARIANT((int64_t)op->keys_.map.n == op->keys_.live, "join: key map size");
    }
#endif
    sc_i64_store_relaxed(&op->base.state_size, op->stored);
    return sc_emit_finish(&e, in, out, rc);
}

void sc_op_join_destroy(void *vst) {
    join_op *op = vst;
    if (!op) return;
    sc_fkeys_free(&op->keys_);
    for (int s = 0; s < 2; s++) {
        free(op->keys[s]);
        free(op->icols[s]);
    }
    free(op->outs);
    free(op->oside);
    free(op->oidx);
    free(op->reason);
    sc_buf_free(&op->kbuf);
    sc_op_base_free(&op->base);
    free(op);
}

static bool is_time(uint8_t lt) { return lt == SC_LT_INT || lt == SC_LT_DATETIME || lt == SC_LT_DATE; }

static int check_spec(join_op *op, const sc_join_spec *spec) {
    const sc_schema *in = &op->base.in, *out = &op->base.out;
    if (spec->width[0] < 0 || spec->width[1] < 0 || in->ncols != SC_FANIN_PORT + 1 + spec->width[0] + spec->width[1] ||
        in->lt[SC_FANIN_PORT] != SC_LT_INT || spec->nkeys < 0 || spec->within < 0 || spec->lateness < 0 ||
        out->ncols < SC_NHIDDEN)
        return SC_EINVAL;
    for (int s = 0; s < 2; s++) {
        int32_t tc = spec->time_col[s];
        if (side_of(op, tc) != s || !is_time(in->lt[tc]) || in->lt[tc] != in->lt[spec->time_col[0]]) return SC_EINVAL;
        for (int32_t i = 0; i < spec->nkeys; i++) {
            int32_t kc = spec->keys[s][i];
            if (side_of(op, kc) != s || in->lt[kc] != in->lt[spec->keys[0][i]]) return SC_EINVAL;
        }
    }
    for (int32_t k = 0; k < out->ncols - SC_NHIDDEN; k++) {
        int32_t c = spec->outs[k];
        if (side_of(op, c) < 0 || sc_ltype_physical((sc_ltype)in->lt[c]) !=
                                      sc_ltype_physical((sc_ltype)out->lt[SC_NHIDDEN + k]))
            return SC_EINVAL;
    }
    return SC_OK;
}

int sc_op_join_create(void **st, const sc_op_base *base, const sc_join_spec *spec) {
    join_op *op = calloc(1, sizeof *op);
    if (!op) return SC_ENOMEM;
    int rc = sc_op_base_copy(&op->base, base);
    if (rc) {
        free(op);
        return rc;
    }
    for (int s = 0; s < 2; s++) op->width[s] = spec->width[s];
    op->first[0] = SC_FANIN_PORT + 1;
    op->first[1] = op->first[0] + spec->width[0];
    rc = check_spec(op, spec);
    int32_t nouts = op->base.out.ncols - SC_NHIDDEN;
    if (!rc) {
        op->nkeys = spec->nkeys;
        op->within = spec->within;
        op->lateness = spec->lateness;
        op->nouts = nouts;
        op->days = op->base.in.lt[spec->time_col[0]] == SC_LT_DATE;
        op->reason = strdup(spec->dead_reason ? spec->dead_reason : "null event time");
        op->outs = malloc(((size_t)nouts + 1) * sizeof *op->outs);
        op->oside = malloc((size_t)nouts + 1);
        op->oidx = malloc(((size_t)nouts + 1) * sizeof *op->oidx);
        rc = op->reason && op->outs && op->oside && op->oidx ? SC_OK : SC_ENOMEM;
    }
    for (int s = 0; !rc && s < 2; s++) {
        op->time_col[s] = spec->time_col[s];
        op->keys[s] = malloc(((size_t)spec->nkeys + 1) * sizeof *op->keys[s]);
        op->icols[s] = malloc(((size_t)nouts + 1) * sizeof *op->icols[s]);
        if (!op->keys[s] || !op->icols[s]) rc = SC_ENOMEM;
        else memcpy(op->keys[s], spec->keys[s], (size_t)spec->nkeys * sizeof *op->keys[s]);
    }
    for (int32_t k = 0; !rc && k < nouts; k++) {
        int32_t c = spec->outs[k];
        int s = side_of(op, c);
        op->outs[k] = c;
        op->oside[k] = (uint8_t)s;
        int32_t i = 0;
        while (i < op->nicols[s] && op->icols[s][i] != c) i++;
        if (i == op->nicols[s]) op->icols[s][op->nicols[s]++] = c;
        op->oidx[k] = i;
    }
    if (!rc) rc = sc_fkeys_init(&op->keys_, 2);
    op->sweep_at = SWEEP_MIN;
    if (rc) {
        sc_op_join_destroy(op);
        return rc;
    }
    *st = op;
    return SC_OK;
}
