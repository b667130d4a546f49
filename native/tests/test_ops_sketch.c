// sources: exec/ops_sketch.c exec/ops_state.c exec/keyhash.c exec/rowstore.c exec/common.c runtime/batch.c runtime/ring.c sketch/theta.c sketch/hll.c sketch/kll.c sketch/frequent.c sketch/murmur3.c sketch/concurrent.c exec/lists.c
/* Tests for exec/ops_sketch (the sketch tap): rows pass unchanged; each sketch equals one
 * built directly from the same values (byte for byte, so order and null handling match);
 * keyed sketches are per key; queries from another thread while batches run (TSan); bad
 * specs are rejected. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/ops_sketch.h"
#include "sketch/frequent.h"
#include "sketch/hll.h"
#include "sketch/kll.h"
#include "sketch/theta.h"

#include "check.h"

/* columns: seq, pos, user (int, every 7th null), event (str of 3), price (float) */
enum { C_USER = 2, C_EVENT = 3, C_PRICE = 4, NCOLS = 5 };
static const char *EVENTS[3] = { "view", "cart", "" };

static uint64_t rng_state = 88172645463325252ULL;
static uint64_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static sc_batch *make_batch(const sc_schema *s, int64_t first, int64_t n) {
    sc_batch *b;
    CHECK_RC(sc_batch_new(&b, s, n));
    for (int64_t r = 0; r < n; r++) {
        int64_t row = first + r;
        sc_batch_set_i64(b, 0, r, row);
        sc_batch_set_i64(b, 1, r, 0);
        if (row % 7 == 3) sc_batch_set_null(b, C_USER, r);
        else sc_batch_set_i64(b, C_USER, r, (int64_t)(rnd() % 5000));
        const char *e = EVENTS[rnd() % 3];
        CHECK_RC(sc_batch_put_utf8(b, C_EVENT, r, e, (int32_t)strlen(e)));
        ((double *)b->cols[C_PRICE].values)[r] = (double)(rnd() % 100000) / 100.0;
    }
    b->nrows = n;
    return b;
}

typedef struct model {
    sc_theta *th;
    sc_hll *hll;
    sc_kll *kll;
    sc_frequent *fr;
} model;

static void model_init(model *m) {
    CHECK_RC(sc_theta_create(&m->th, 6, SC_THETA_DEFAULT_SEED));
    CHECK_RC(sc_hll_create(&m->hll, 8));
    sc_kll_config kc = { 40, UINT64_C(0x5eed5eed) };
    CHECK_RC(sc_kll_new(&m->kll, SC_KLL_DOUBLE, &kc));
    sc_frequent_config fc = { 3, SC_FREQ_ITEMS_STR };
    CHECK_RC(sc_frequent_new(&m->fr, &fc));
}

static void model_free(model *m) {
    sc_theta_destroy(m->th);
    sc_hll_destroy(m->hll);
    sc_kll_destroy(m->kll);
    sc_frequent_destroy(m->fr);
}

static void model_row(model *m, const sc_batch *b, int64_t r) {
    if (sc_batch_is_valid(b, C_USER, r)) {
        int64_t u = ((const int64_t *)b->cols[C_USER].values)[r];
        CHECK(sc_theta_update_i64(m->th, u) >= 0);
        sc_hll_update_i64(m->hll, u);
    }
    const sc_column *c = &b->cols[C_EVENT];
    CHECK_RC(sc_frequent_update_str(m->fr, c->data + c->offsets[r],
                                    (uint32_t)(c->offsets[r + 1] - c->offsets[r]), 1));
    CHECK_RC(sc_kll_update(m->kll, ((const double *)b->cols[C_PRICE].values)[r]));
}

static const sc_sketch_spec SPECS[4] = {
    { SC_SK_THETA, C_USER, 6 },
    { SC_SK_HLL, C_USER, 8 },
    { SC_SK_KLL, C_PRICE, 40 },
    { SC_SK_FREQUENT, C_EVENT, 3 },
};

/* bytes of the model's sketch `spec` (the same serializations the op uses) */
static void model_bytes(const model *m, int spec, uint8_t **buf, size_t *len) {
    size_t cap = 0, w = 0;
    switch (spec) {
    case 0: {
        sc_theta_compact *tc;
        CHECK_RC(sc_theta_compact_of(&tc, m->th, true));
        cap = sc_theta_compact_serialized_size(tc);
        *buf = malloc(cap);
        CHECK_RC(sc_theta_compact_serialize(tc, *buf, cap));
        sc_theta_compact_destroy(tc);
        w = cap;
        break;
    }
    case 1:
        cap = sc_hll_serialized_size(m->hll);
        *buf = malloc(cap);
        CHECK(sc_hll_serialize(m->hll, *buf, cap) >= 0);
        w = cap;
        break;
    case 2:
        cap = sc_kll_serialized_size(m->kll);
        *buf = malloc(cap);
        CHECK_RC(sc_kll_serialize(m->kll, *buf, cap, &w));
        break;
    default:
        cap = sc_frequent_serialized_size(m->fr);
        *buf = malloc(cap);
        CHECK_RC(sc_frequent_serialize(m->fr, *buf, cap, &w));
    }
    *len = w;
}

static void check_summary(void *op, int64_t key, const model *m) {
    double out[7];
    CHECK_RC(sc_op_sketch_summary(op, key, 0, out));
    CHECK(out[0] == sc_theta_estimate(m->th));
    CHECK(out[2] == sc_theta_lower_bound(m->th, 2) && out[5] == sc_theta_upper_bound(m->th, 2));
    CHECK(out[1] <= out[0] && out[0] <= out[4]);
    CHECK_RC(sc_op_sketch_summary(op, key, 1, out));
    CHECK(out[0] == sc_hll_estimate(m->hll));
    CHECK_RC(sc_op_sketch_summary(op, key, 2, out));
    CHECK(out[0] == (double)sc_kll_n(m->kll) && out[1] == sc_kll_min(m->kll) && out[2] == sc_kll_max(m->kll));
    CHECK_RC(sc_op_sketch_summary(op, key, 3, out));
    CHECK(out[0] == (double)sc_frequent_total_weight(m->fr));
    CHECK(out[1] == (double)sc_frequent_maximum_error(m->fr));
    CHECK(sc_op_sketch_summary(op, key, 4, out) == SC_EINVAL);
}

static void check_same(void *op, int64_t key, const model *m) {
    check_summary(op, key, m);
    for (int s = 0; s < 4; s++) {
        uint8_t *a, *b;
        size_t na, nb;
        CHECK_RC(sc_op_sketch_bytes(op, key, s, &a, &na));
        model_bytes(m, s, &b, &nb);
        CHECK(na == nb);
        CHECK(memcmp(a, b, na) == 0);
        free(a);
        free(b);
    }
}

static sc_step_counters counters;

static void *make_op(const sc_schema *s, const int32_t *keys, int32_t nkeys) {
    sc_op_base base;
    CHECK_RC(sc_op_base_init(&base, 0, true, true, &counters, s, s, 64, false));
    void *op = NULL;
    CHECK_RC(sc_op_sketch_create(&op, &base, keys, nkeys, SPECS, 4));
    sc_op_base_free(&base);
    return op;
}

static void test_unkeyed_matches_direct_sketches(const sc_schema *s) {
    void *op = make_op(s, NULL, 0);
    model m;
    model_init(&m);
    CHECK(sc_op_sketch_nkeys(op) == 1);
    int64_t row = 0;
    for (int i = 0; i < 40; i++) {
        int64_t n = 1 + (int64_t)(rnd() % 200);
        sc_batch *in = make_batch(s, row, n), *out = NULL;
        for (int64_t r = 0; r < n; r++) model_row(&m, in, r);
        CHECK_RC(sc_op_sketch_run(op, in, &out));
        CHECK(out == in && out->nrows == n && !out->next); /* forwarded unchanged */
        CHECK(((int64_t *)out->cols[0].values)[0] == row);
        sc_batch_release(out);
        row += n;
    }
    check_same(op, 0, &m);
    CHECK(sc_u64_load_relaxed(&counters.rows_in) == (uint64_t)row);
    CHECK(sc_u64_load_relaxed(&counters.rows_out) == (uint64_t)row);
    uint8_t *buf;
    size_t len;
    CHECK(sc_op_sketch_bytes(op, 1, 0, &buf, &len) == SC_EINVAL);
    CHECK(sc_op_sketch_bytes(op, 0, 4, &buf, &len) == SC_EINVAL);
    /* end of stream is forwarded */
    sc_batch *eos, *out = NULL;
    CHECK_RC(sc_batch_new(&eos, s, 1));
    eos->eos = 1;
    CHECK_RC(sc_op_sketch_run(op, eos, &out));
    CHECK(out == eos);
    sc_batch_release(out);
    model_free(&m);
    sc_op_sketch_destroy(op);
}

static void test_keyed_one_set_per_key(const sc_schema *s) {
    int32_t keys[1] = { C_EVENT };
    void *op = make_op(s, keys, 1);
    model m[3];
    int seen[3] = { -1, -1, -1 }, nseen = 0;
    for (int i = 0; i < 3; i++) model_init(&m[i]);
    int64_t row = 0;
    for (int i = 0; i < 30; i++) {
        int64_t n = 1 + (int64_t)(rnd() % 100);
        sc_batch *in = make_batch(s, row, n), *out = NULL;
        for (int64_t r = 0; r < n; r++) {
            const sc_column *c = &in->cols[C_EVENT];
            int len = c->offsets[r + 1] - c->offsets[r];
            int e = len == 4 && c->data[c->offsets[r]] == 'v' ? 0 : len == 4 ? 1 : 2;
            if (seen[e] < 0) seen[e] = nseen++;
            model_row(&m[e], in, r);
        }
        CHECK_RC(sc_op_sketch_run(op, in, &out));
        sc_batch_release(out);
        row += n;
    }
    CHECK(sc_op_sketch_nkeys(op) == 3);
    sc_batch *kb = NULL;
    CHECK_RC(sc_op_sketch_keys(op, &kb));
    CHECK(kb && kb->nrows == 3);
    for (int e = 0; e < 3; e++) {
        int64_t k = seen[e]; /* key indices follow first arrival */
        const sc_column *c = &kb->cols[C_EVENT];
        CHECK((size_t)(c->offsets[k + 1] - c->offsets[k]) == strlen(EVENTS[e]));
        CHECK(memcmp(c->data + c->offsets[k], EVENTS[e], strlen(EVENTS[e])) == 0);
        check_same(op, k, &m[e]);
        model_free(&m[e]);
    }
    sc_batch_release(kb);
    sc_op_sketch_destroy(op);
}

typedef struct qarg {
    void *op;
    int stop;     /* __atomic */
    long queries; /* __atomic */
} qarg;

static void *query_loop(void *p) {
    qarg *a = p;
    while (!__atomic_load_n(&a->stop, __ATOMIC_ACQUIRE)) {
        for (int s = 0; s < 4; s++) {
            uint8_t *buf;
            size_t len;
            int64_t n = sc_op_sketch_nkeys(a->op);
            if (n > 0) {
                CHECK_RC(sc_op_sketch_bytes(a->op, n - 1, s, &buf, &len));
                CHECK(len > 0);
                free(buf);
                double out[7];
                CHECK_RC(sc_op_sketch_summary(a->op, n - 1, s, out));
            }
            sc_batch *kb = NULL;
            CHECK_RC(sc_op_sketch_keys(a->op, &kb));
            if (kb) sc_batch_release(kb);
        }
        __atomic_add_fetch(&a->queries, 1, __ATOMIC_RELEASE);
    }
    return NULL;
}

static void test_queries_during_ingestion(const sc_schema *s) {
    int32_t keys[1] = { C_EVENT };
    void *op = make_op(s, keys, 1);
    qarg a = { op, 0, 0 };
    pthread_t t;
    CHECK(pthread_create(&t, NULL, query_loop, &a) == 0);
    int64_t row = 0;
    for (int i = 0; i < 300; i++) {
        sc_batch *in = make_batch(s, row, 64), *out = NULL;
        CHECK_RC(sc_op_sketch_run(op, in, &out));
        sc_batch_release(out);
        row += 64;
    }
    /* at least one full round of queries overlapped the run (the query thread may start late) */
    while (__atomic_load_n(&a.queries, __ATOMIC_ACQUIRE) < 2) {
        sc_batch *in = make_batch(s, row, 64), *out = NULL;
        CHECK_RC(sc_op_sketch_run(op, in, &out));
        sc_batch_release(out);
        row += 64;
    }
    __atomic_store_n(&a.stop, 1, __ATOMIC_RELEASE);
    pthread_join(t, NULL);
    CHECK(a.queries > 0);
    sc_op_sketch_destroy(op);
}

static void test_bad_specs(const sc_schema *s) {
    sc_op_base base;
    CHECK_RC(sc_op_base_init(&base, 0, true, true, &counters, s, s, 64, false));
    void *op = NULL;
    sc_sketch_spec bad[5] = {
        { SC_SK_KLL, C_EVENT, 200 },      /* KLL of strings */
        { SC_SK_FREQUENT, C_PRICE, 10 },  /* frequent floats */
        { SC_SK_THETA, C_USER, 40 },      /* lg_k out of range */
        { SC_SK_HLL, 1, 12 },             /* a hidden column */
        { 9, C_USER, 12 },                /* unknown kind */
    };
    for (int i = 0; i < 5; i++) CHECK(sc_op_sketch_create(&op, &base, NULL, 0, &bad[i], 1) == SC_EINVAL);
    int32_t k = 9;
    CHECK(sc_op_sketch_create(&op, &base, &k, 1, SPECS, 4) == SC_EINVAL);
    sc_op_base_free(&base);
}

int main(void) {
    uint8_t lt[NCOLS] = { SC_LT_INT, SC_LT_INT, SC_LT_INT, SC_LT_STR, SC_LT_FLOAT };
    sc_schema s;
    CHECK_RC(sc_schema_init(&s, NCOLS, lt));
    test_unkeyed_matches_direct_sketches(&s);
    test_keyed_one_set_per_key(&s);
    test_queries_during_ingestion(&s);
    test_bad_specs(&s);
    sc_schema_free(&s);
    printf("test_ops_sketch: ok\n");
    return 0;
}
