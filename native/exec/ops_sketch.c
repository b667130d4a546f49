/* ops_sketch: the sketch tap (see ops_sketch.h). */
#include "ops_sketch.h"

#include <stdlib.h>
#include <string.h>

#include "ops_state.h"
#include "sketch/frequent.h"
#include "sketch/hll.h"
#include "sketch/kll.h"
#include "sketch/theta.h"

#define SK_KLL_SEED UINT64_C(0x5eed5eed)

typedef struct sk_op {
    sc_op_base base;
    pthread_mutex_t mu;
    int32_t *keys, nkeys;
    sc_sketch_spec *specs;
    int32_t nspecs;
    uint8_t *lt;        /* per spec: logical type of its column */
    sc_kmap map;        /* keyed: key bytes -> key index */
    sc_buf kbuf;
    void **sk;          /* [key * nspecs + spec] */
    int64_t nkeys_seen, kcap;
    sc_batch *keyrows;  /* keyed: the first row of every key, in key-index order */
} sk_op;

static void sk_free_one(int32_t kind, void *s) {
    if (!s) return;
    switch (kind) {
    case SC_SK_THETA: sc_theta_destroy(s); break;
    case SC_SK_HLL: sc_hll_destroy(s); break;
    case SC_SK_KLL: sc_kll_destroy(s); break;
    default: sc_frequent_destroy(s); break;
    }
}

static int sk_new_one(const sk_op *op, int32_t i, void **out) {
    const sc_sketch_spec *sp = &op->specs[i];
    switch (sp->kind) {
    case SC_SK_THETA: return sc_theta_create((sc_theta **)out, (uint8_t)sp->param, SC_THETA_DEFAULT_SEED);
    case SC_SK_HLL: return sc_hll_create((sc_hll **)out, (uint8_t)sp->param);
    case SC_SK_KLL: {
        sc_kll_config cfg = { (uint32_t)sp->param, SK_KLL_SEED };
        return sc_kll_new((sc_kll **)out, SC_KLL_DOUBLE, &cfg);
    }
    default: {
        sc_frequent_config cfg = { (uint8_t)sp->param,
                                   op->lt[i] == SC_LT_STR ? SC_FREQ_ITEMS_STR : SC_FREQ_ITEMS_I64 };
        return sc_frequent_new((sc_frequent **)out, &cfg);
    }
    }
}

/* Room for one more key's sketches, then create them at index op->nkeys_seen. */
static int sk_add_key(sk_op *op) {
    if (op->nkeys_seen == op->kcap) {
        int64_t cap = op->kcap ? op->kcap * 2 : 16;
        void **s = realloc(op->sk, (size_t)(cap * op->nspecs) * sizeof *s);
        if (!s) return SC_ENOMEM;
        op->sk = s;
        op->kcap = cap;
    }
    void **row = &op->sk[op->nkeys_seen * op->nspecs];
    for (int32_t i = 0; i < op->nspecs; i++) row[i] = NULL;
    for (int32_t i = 0; i < op->nspecs; i++) {
        int rc = sk_new_one(op, i, &row[i]);
        if (rc) {
            for (int32_t j = 0; j < i; j++) sk_free_one(op->specs[j].kind, row[j]);
            return rc;
        }
    }
    op->nkeys_seen++;
    return SC_OK;
}

static bool spec_fits(int32_t kind, uint8_t lt, int32_t param) {
    if (sc_ltype_is_list(lt) || lt == SC_LT_NULL) return false;
    switch (kind) {
    case SC_SK_THETA: return param >= SC_THETA_MIN_LG_K && param <= SC_THETA_MAX_LG_K;
    case SC_SK_HLL: return param >= 4 && param <= 21;
    case SC_SK_KLL:
        return (lt == SC_LT_INT || lt == SC_LT_FLOAT || lt == SC_LT_BOOL) && param >= 8 && param <= 65535;
    case SC_SK_FREQUENT:
        return lt != SC_LT_FLOAT && param >= SC_FREQ_LG_MIN && param <= SC_FREQ_LG_MAX_LIMIT;
    default: return false;
    }
}

int sc_op_sketch_create(void **st, const sc_op_base *base, const int32_t *keys, int32_t nkeys,
                        const sc_sketch_spec *specs, int32_t nspecs) {
    if (!st || !base || nkeys < 0 || (nkeys && !keys) || nspecs <= 0 || !specs) return SC_EINVAL;
    const sc_schema *in = &base->in, *out = &base->out;
    if (in->ncols != out->ncols || memcmp(in->lt, out->lt, (size_t)in->ncols)) return SC_EINVAL;
    sk_op *op = calloc(1, sizeof *op);
    if (!op) return SC_ENOMEM;
    int rc = sc_op_base_copy(&op->base, base);
    if (rc) {
        free(op);
        return rc;
    }
    pthread_mutex_init(&op->mu, NULL);
    op->keys = malloc(((size_t)nkeys + 1) * sizeof *op->keys);
    op->specs = malloc((size_t)nspecs * sizeof *op->specs);
    op->lt = malloc((size_t)nspecs);
    op->nkeys = nkeys;
    op->nspecs = nspecs;
    if (!op->keys || !op->specs || !op->lt) rc = SC_ENOMEM;
    for (int32_t i = 0; !rc && i < nkeys; i++) {
        op->keys[i] = keys[i];
        if (keys[i] < SC_NHIDDEN || keys[i] >= in->ncols) rc = SC_EINVAL;
    }
    for (int32_t i = 0; !rc && i < nspecs; i++) {
        op->specs[i] = specs[i];
        if (specs[i].col < SC_NHIDDEN || specs[i].col >= in->ncols) {
            rc = SC_EINVAL;
            break;
        }
        op->lt[i] = in->lt[specs[i].col];
        if (!spec_fits(specs[i].kind, op->lt[i], specs[i].param)) rc = SC_EINVAL;
    }
    if (!rc && nkeys) {
        rc = sc_kmap_init(&op->map, 64);
        if (!rc) rc = sc_batch_new(&op->keyrows, in, 16);
    }
    if (!rc && !nkeys) rc = sk_add_key(op);
    if (rc) {
        sc_op_sketch_destroy(op);
        return rc;
    }
    *st = op;
    return SC_OK;
}

void sc_op_sketch_destroy(void *vst) {
    sk_op *op = vst;
    if (!op) return;
    for (int64_t k = 0; op->sk && k < op->nkeys_seen; k++)
        for (int32_t i = 0; i < op->nspecs; i++) sk_free_one(op->specs[i].kind, op->sk[k * op->nspecs + i]);
    free(op->sk);
    if (op->nkeys) sc_kmap_free(&op->map);
    sc_buf_free(&op->kbuf);
    if (op->keyrows) sc_batch_release(op->keyrows);
    free(op->keys);
    free(op->specs);
    free(op->lt);
    pthread_mutex_destroy(&op->mu);
    sc_op_base_free(&op->base);
    free(op);
}

/* Update sketch `s` (spec i) with row r of `in` (a null is skipped): 0 or a negative status. */
static int sk_update1(const sk_op *op, int32_t i, void *s, const sc_batch *in, int64_t r) {
    const sc_sketch_spec *sp = &op->specs[i];
    const sc_column *c = &in->cols[sp->col];
    if (!sc_bit_get(c->validity, r)) return SC_OK;
    uint8_t lt = op->lt[i];
    int64_t iv = 0;
    double dv = 0;
    const char *str = NULL;
    int32_t slen = 0;
    switch (c->type) {
    case SC_COL_INT64: iv = ((const int64_t *)c->values)[r]; dv = (double)iv; break;
    case SC_COL_DOUBLE: dv = ((const double *)c->values)[r]; break;
    case SC_COL_BOOL: iv = sc_bit_get(c->values, r); dv = (double)iv; break;
    case SC_COL_UTF8:
        str = c->data + c->offsets[r];
        slen = c->offsets[r + 1] - c->offsets[r];
        break;
    }
    switch (sp->kind) {
    case SC_SK_THETA:
        if (lt == SC_LT_FLOAT) return sc_theta_update_f64(s, dv);
        if (lt == SC_LT_STR) return slen ? sc_theta_update_bytes(s, str, (size_t)slen) : SC_OK;
        return sc_theta_update_i64(s, iv);
    case SC_SK_HLL:
        if (lt == SC_LT_FLOAT) return sc_hll_update_f64(s, dv);
        if (lt == SC_LT_STR) return sc_hll_update_bytes(s, str, (size_t)slen);
        return sc_hll_update_i64(s, iv);
    case SC_SK_KLL: return sc_kll_update(s, dv); /* NaN is ignored there */
    default:
        if (lt == SC_LT_STR) return sc_frequent_update_str(s, str, (uint32_t)slen, 1);
        return sc_frequent_update(s, iv, 1);
    }
}

static inline int sk_update(const sk_op *op, int32_t i, void *s, const sc_batch *in, int64_t r) {
    int rc = sk_update1(op, i, s, in, r);
    return rc < 0 ? rc : SC_OK;
}

/* The whole column of spec i into sketch s: the sketches' array updates where they exist
 * (same results as row by row, in the same order), row by row otherwise. */
static int sk_update_column(const sk_op *op, int32_t i, void *s, const sc_batch *in) {
    const sc_column *c = &in->cols[op->specs[i].col];
    size_t n = (size_t)in->nrows;
    const uint8_t *v = c->null_count ? c->validity : NULL;
    uint8_t lt = op->lt[i];
    bool i64 = c->type == SC_COL_INT64, f64 = c->type == SC_COL_DOUBLE, str = c->type == SC_COL_UTF8;
    int rc = 1; /* 1: no array path */
    if (!n) return SC_OK;
    switch (op->specs[i].kind) {
    case SC_SK_THETA:
        if (i64) rc = sc_theta_update_i64_array(s, c->values, n, v, 0);
        else if (f64) rc = sc_theta_update_f64_array(s, c->values, n, v, 0);
        else if (str) rc = sc_theta_update_str32_array(s, c->offsets, (const uint8_t *)c->data, n, v, 0);
        break;
    case SC_SK_HLL:
        if (i64) rc = sc_hll_update_i64_array(s, c->values, n, v, 0);
        else if (f64) rc = sc_hll_update_f64_array(s, c->values, n, v, 0);
        else if (str) rc = sc_hll_update_str32_array(s, c->offsets, (const uint8_t *)c->data, n, v, 0);
        break;
    case SC_SK_KLL:
        if (i64) rc = sc_kll_update_i64(s, c->values, n, v, 0);
        else if (f64) rc = sc_kll_update_f64(s, c->values, n, v, 0);
        break;
    default:
        if (i64 && lt != SC_LT_STR) rc = sc_frequent_update_i64(s, c->values, NULL, n, v, 0);
        break;
    }
    if (rc <= 0) return rc;
    for (int64_t r = 0; r < in->nrows; r++) {
        rc = sk_update(op, i, s, in, r);
        if (rc) return rc;
    }
    return SC_OK;
}

static int sk_key_of(sk_op *op, const sc_batch *in, int64_t r, int64_t *key) {
    op->kbuf.len = 0;
    int rc = sc_key_encode(&op->kbuf, in, r, op->keys, op->nkeys, NULL);
    if (rc) return rc;
    uint64_t h = sc_hash_bytes(op->kbuf.p, op->kbuf.len), id = (uint64_t)op->nkeys_seen;
    if (sc_kmap_find(&op->map, h, op->kbuf.p, (uint32_t)op->kbuf.len, &id)) {
        *key = (int64_t)id;
        return SC_OK;
    }
    rc = sc_batch_reserve(op->keyrows, op->keyrows->nrows + 1);
    if (!rc) rc = sc_batch_take(op->keyrows, in, &r, 1);
    if (!rc) rc = sk_add_key(op);
    if (rc) return rc;
    bool ins;
    id = (uint64_t)(op->nkeys_seen - 1);
    rc = sc_kmap_upsert(&op->map, h, op->kbuf.p, (uint32_t)op->kbuf.len, &id, &ins);
    *key = (int64_t)id;
    return rc;
}

int sc_op_sketch_run(void *vst, sc_batch *in, sc_batch **out) {
    sk_op *op = vst;
    *out = NULL;
    if (in->eos) return sc_forward_eos(in, out);
    int64_t n = in->nrows;
    sc_count_in(&op->base, n);
    int rc = SC_OK;
    pthread_mutex_lock(&op->mu);
    if (!op->nkeys) {
        for (int32_t i = 0; !rc && i < op->nspecs; i++) rc = sk_update_column(op, i, op->sk[i], in);
    } else {
        for (int64_t r = 0; !rc && r < n; r++) {
            int64_t k = 0;
            rc = sk_key_of(op, in, r, &k);
            for (int32_t i = 0; !rc && i < op->nspecs; i++) rc = sk_update(op, i, op->sk[k * op->nspecs + i], in, r);
        }
    }
    sc_i64_store_relaxed(&op->base.state_size, op->nkeys ? op->nkeys_seen : 0);
    pthread_mutex_unlock(&op->mu);
    if (rc < 0) {
        sc_batch_release(in);
        return rc;
    }
    sc_count_out(&op->base, n);
    in->next = NULL;
    *out = in;
    return SC_OK;
}

int64_t sc_op_sketch_nkeys(void *vst) {
    sk_op *op = vst;
    pthread_mutex_lock(&op->mu);
    int64_t n = op->nkeys_seen;
    pthread_mutex_unlock(&op->mu);
    return n;
}

int sc_op_sketch_keys(void *vst, sc_batch **out) {
    sk_op *op = vst;
    *out = NULL;
    if (!op->nkeys) return SC_OK;
    pthread_mutex_lock(&op->mu);
    int rc = op->keyrows->nrows ? sc_batch_clone(out, op->keyrows) : SC_OK;
    pthread_mutex_unlock(&op->mu);
    return rc;
}

static int sk_serialize(int32_t kind, const void *s, uint8_t **buf, size_t *len) {
    size_t cap = 0, wrote = 0;
    int rc = SC_OK;
    sc_theta_compact *tc = NULL;
    switch (kind) {
    case SC_SK_THETA:
        rc = sc_theta_compact_of(&tc, s, true);
        if (rc) return rc;
        cap = sc_theta_compact_serialized_size(tc);
        break;
    case SC_SK_HLL: cap = sc_hll_serialized_size(s); break;
    case SC_SK_KLL: cap = sc_kll_serialized_size(s); break;
    default: cap = sc_frequent_serialized_size(s); break;
    }
    uint8_t *b = malloc(cap ? cap : 1);
    if (!b) rc = SC_ENOMEM;
    if (!rc) {
        switch (kind) {
        case SC_SK_THETA: rc = sc_theta_compact_serialize(tc, b, cap); wrote = cap; break;
        case SC_SK_HLL: rc = sc_hll_serialize(s, b, cap); wrote = cap; break;
        case SC_SK_KLL: rc = sc_kll_serialize(s, b, cap, &wrote); break;
        default: rc = sc_frequent_serialize(s, b, cap, &wrote); break;
        }
    }
    if (tc) sc_theta_compact_destroy(tc);
    if (rc < 0) {
        free(b);
        return rc;
    }
    *buf = b;
    *len = wrote;
    return SC_OK;
}

int sc_op_sketch_bytes(void *vst, int64_t key, int32_t spec, uint8_t **buf, size_t *len) {
    sk_op *op = vst;
    if (spec < 0 || spec >= op->nspecs) return SC_EINVAL;
    pthread_mutex_lock(&op->mu);
    int rc = (key < 0 || key >= op->nkeys_seen)
                 ? SC_EINVAL
                 : sk_serialize(op->specs[spec].kind, op->sk[key * op->nspecs + spec], buf, len);
    pthread_mutex_unlock(&op->mu);
    return rc;
}

int sc_op_sketch_summary(void *vst, int64_t key, int32_t spec, double out[7]) {
    sk_op *op = vst;
    if (spec < 0 || spec >= op->nspecs) return SC_EINVAL;
    for (int i = 0; i < 7; i++) out[i] = 0;
    pthread_mutex_lock(&op->mu);
    int rc = SC_OK;
    if (key < 0 || key >= op->nkeys_seen) {
        rc = SC_EINVAL;
    } else {
        const void *s = op->sk[key * op->nspecs + spec];
        switch (op->specs[spec].kind) {
        case SC_SK_THETA:
            out[0] = sc_theta_estimate(s);
            for (int z = 1; z <= 3; z++) {
                out[z] = sc_theta_lower_bound(s, z);
                out[3 + z] = sc_theta_upper_bound(s, z);
            }
            break;
        case SC_SK_HLL:
            out[0] = sc_hll_estimate(s);
            for (int z = 1; z <= 3; z++) {
                out[z] = sc_hll_lower_bound(s, z);
                out[3 + z] = sc_hll_upper_bound(s, z);
            }
            break;
        case SC_SK_KLL:
            out[0] = (double)sc_kll_n(s);
            out[1] = sc_kll_min(s);
            out[2] = sc_kll_max(s);
            break;
        default:
            out[0] = (double)sc_frequent_total_weight(s);
            out[1] = (double)sc_frequent_maximum_error(s);
        }
    }
    pthread_mutex_unlock(&op->mu);
    return rc;
}
