// sources: sketch/kll.c sketch/frequent.c sketch/concurrent.c
/* C tests of the KLL sketch: invariants, error bound, batch == per-item, merge, NaN/null
 * handling, serialization round trips and malformed input, the concurrent vtable. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sc_status.h"
#include "sketch/concurrent.h"
#include "sketch/frequent.h"
#include "sketch/kll.h"

static int failures = 0;
#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                              \
        }                                                                            \
    } while (0)

static uint64_t rng_state = 12345;
static uint64_t next_rand(void) { /* xorshift64* */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}

static void shuffle(double *a, size_t n) {
    for (size_t i = n; i > 1; i--) {
        size_t j = next_rand() % i;
        double t = a[i - 1];
        a[i - 1] = a[j];
        a[j] = t;
    }
}

static sc_kll *make(sc_kll_kind kind, uint32_t k, uint64_t seed) {
    sc_kll_config cfg = {k, seed};
    sc_kll *sk = NULL;
    CHECK(sc_kll_new(&sk, kind, &cfg) == SC_OK);
    return sk;
}

/* max |rank_est - rank_true| over values 0..n-1 (each value once) */
static double max_rank_error(const sc_kll *sk, size_t n) {
    size_t m = n < 2000 ? n : 2000;
    double *x = calloc(m, sizeof(double)), *r = calloc(m, sizeof(double));
    for (size_t i = 0; i < m; i++) x[i] = (double)(i * (n / m));
    CHECK(sc_kll_ranks(sk, x, m, 1, r) == SC_OK);
    double worst = 0;
    for (size_t i = 0; i < m; i++) {
        double truth = (x[i] + 1) / (double)n, e = fabs(r[i] - truth);
        if (e > worst) worst = e;
    }
    free(x);
    free(r);
    return worst;
}

static void test_lifecycle(void) {
    sc_kll_config bad = {4, 1};
    sc_kll *sk = (sc_kll *)1;
    CHECK(sc_kll_new(&sk, SC_KLL_DOUBLE, &bad) == SC_EINVAL && sk == NULL);
    CHECK(sc_kll_new(&sk, SC_KLL_DOUBLE, NULL) == SC_OK);
    CHECK(sk->k == SC_KLL_DEFAULT_K && sc_kll_is_empty(sk) && isnan(sc_kll_min(sk)));
    CHECK(sc_kll_check(sk) == SC_OK);
    double q, r = 0.5;
    CHECK(sc_kll_quantiles(sk, &r, 1, 1, &q) == SC_OK && isnan(q));
    r = 1.5;
    CHECK(sc_kll_quantiles(sk, &r, 1, 1, &q) == SC_EINVAL);
    sc_kll_destroy(sk);
    CHECK(fabs(sc_kll_rank_error_for_k(200, 0) - 2.296 / pow(200, 0.9723)) < 1e-15);
}

static void test_exact_mode(void) {
    sc_kll *sk = make(SC_KLL_DOUBLE, 200, 7);
    for (int i = 1; i <= 100; i++) CHECK(sc_kll_update(sk, (double)(101 - i)) == SC_OK);
    CHECK(sc_kll_n(sk) == 100 && !sc_kll_is_estimation_mode(sk) && sc_kll_num_retained(sk) == 100);
    CHECK(sc_kll_min(sk) == 1.0 && sc_kll_max(sk) == 100.0);
    double x[3] = {0.5, 50, 100}, r[3];
    CHECK(sc_kll_ranks(sk, x, 3, 1, r) == SC_OK);
    CHECK(r[0] == 0.0 && r[1] == 0.5 && r[2] == 1.0);
    CHECK(sc_kll_ranks(sk, x, 3, 0, r) == SC_OK);
    CHECK(r[0] == 0.0 && r[1] == 0.49 && r[2] == 0.99);
    double ranks[4] = {0.0, 0.5, 0.505, 1.0}, q[4];
    CHECK(sc_kll_quantiles(sk, ranks, 4, 1, q) == SC_OK);
    CHECK(q[0] == 1.0 && q[1] == 50.0 && q[2] == 51.0 && q[3] == 100.0);
    CHECK(sc_kll_quantiles(sk, ranks, 4, 0, q) == SC_OK);
    CHECK(q[0] == 1.0 && q[1] == 51.0 && q[2] == 51.0 && q[3] == 100.0);
    double splits[2] = {10, 20}, pmf[3], bad[2] = {20, 10};
    CHECK(sc_kll_pmf(sk, splits, 2, 1, pmf) == SC_OK);
    CHECK(pmf[0] == 0.1 && fabs(pmf[1] - 0.1) < 1e-12 && fabs(pmf[2] - 0.8) < 1e-12);
    CHECK(sc_kll_pmf(sk, bad, 2, 1, pmf) == SC_EINVAL);
    sc_kll_destroy(sk);
}

static void test_error_bound(sc_kll_kind kind) {
    const size_t sizes[] = {1, 10, 199, 200, 201, 1000, 10000, 100000, 1000000};
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        size_t n = sizes[s];
        double *v = malloc(n * sizeof(double));
        for (size_t i = 0; i < n; i++) v[i] = (double)i;
        shuffle(v, n);
        sc_kll *sk = make(kind, 200, 1000 + s);
        CHECK(sc_kll_update_f64(sk, v, n, NULL, 0) == SC_OK);
        CHECK(sc_kll_n(sk) == n && sc_kll_check(sk) == SC_OK);
        CHECK(sc_kll_min(sk) == 0.0 && sc_kll_max(sk) == (double)(n - 1));
        double err = max_rank_error(sk, n), eps = sc_kll_normalized_rank_error(sk, 0);
        if (n <= 200) CHECK(err == 0.0);
        CHECK(err <= eps);
        if (err > eps) fprintf(stderr, "  n=%zu err=%g eps=%g\n", n, err, eps);
        sc_kll_destroy(sk);
        free(v);
    }
}

static void test_batch_equals_single(void) {
    size_t n = 50000;
    double *v = malloc(n * sizeof(double));
    for (size_t i = 0; i < n; i++) v[i] = (double)(next_rand() % 100000) / 7.0;
    v[17] = NAN;
    sc_kll *a = make(SC_KLL_DOUBLE, 100, 99), *b = make(SC_KLL_DOUBLE, 100, 99);
    for (size_t i = 0; i < n; i++) CHECK(sc_kll_update(a, v[i]) == SC_OK);
    CHECK(sc_kll_update_f64(b, v, 1234, NULL, 0) == SC_OK);
    CHECK(sc_kll_update_f64(b, v + 1234, n - 1234, NULL, 0) == SC_OK);
    CHECK(sc_kll_n(a) == n - 1 && sc_kll_n(b) == n - 1);
    size_t sa = sc_kll_serialized_size(a), sb = sc_kll_serialized_size(b), wa, wb;
    uint8_t *ba = malloc(sa), *bb = malloc(sb);
    CHECK(sa == sb && sc_kll_serialize(a, ba, sa, &wa) == SC_OK && sc_kll_serialize(b, bb, sb, &wb) == SC_OK);
    CHECK(wa == wb && memcmp(ba, bb, wa) == 0);
    free(ba);
    free(bb);
    sc_kll_destroy(a);
    sc_kll_destroy(b);
    free(v);
}

static void test_nulls_and_types(void) {
    double x[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    uint8_t validity[2] = {0xAA, 0xFF}; /* bits 1,3,5,7 set in the first byte */
    sc_kll *sk = make(SC_KLL_DOUBLE, 200, 3);
    CHECK(sc_kll_update_f64(sk, x, 8, validity, 0) == SC_OK);
    CHECK(sc_kll_n(sk) == 4 && sc_kll_min(sk) == 2.0 && sc_kll_max(sk) == 8.0);
    CHECK(sc_kll_update_f64(sk, x, 3, validity, 1) == SC_OK); /* bits 1..3 => x0, x2 valid */
    CHECK(sc_kll_n(sk) == 6 && sc_kll_min(sk) == 1.0);
    int64_t iv[3] = {-5, 0, 1000};
    float fv[2] = {NAN, 0.25f};
    CHECK(sc_kll_update_i64(sk, iv, 3, NULL, 0) == SC_OK);
    CHECK(sc_kll_update_f32(sk, fv, 2, NULL, 0) == SC_OK);
    CHECK(sc_kll_n(sk) == 10 && sc_kll_min(sk) == -5.0 && sc_kll_max(sk) == 1000.0);
    sc_kll_destroy(sk);
    sc_kll *f = make(SC_KLL_FLOAT, 200, 3);
    CHECK(sc_kll_update(f, 0.1) == SC_OK && sc_kll_min(f) == (double)0.1f);
    sc_kll *d = make(SC_KLL_DOUBLE, 200, 3);
    CHECK(sc_kll_update(d, 1.0) == SC_OK && sc_kll_merge(d, f) == SC_ETYPE);
    sc_kll_destroy(f);
    sc_kll_destroy(d);
}

static void test_merge(void) {
    const size_t parts = 13, per = 37000, n = parts * per;
    double *v = malloc(n * sizeof(double));
    for (size_t i = 0; i < n; i++) v[i] = (double)i;
    shuffle(v, n);
    sc_kll *total = make(SC_KLL_DOUBLE, 200, 5);
    for (size_t p = 0; p < parts; p++) {
        sc_kll *part = make(SC_KLL_DOUBLE, p % 2 ? 200 : 400, 100 + p);
        CHECK(sc_kll_update_f64(part, v + p * per, per, NULL, 0) == SC_OK);
        CHECK(sc_kll_merge(total, part) == SC_OK);
        CHECK(sc_kll_check(total) == SC_OK);
        sc_kll_destroy(part);
    }
    CHECK(sc_kll_n(total) == n && sc_kll_min(total) == 0.0 && sc_kll_max(total) == (double)(n - 1));
    CHECK(total->min_k == 200);
    CHECK(max_rank_error(total, n) <= sc_kll_normalized_rank_error(total, 0));
    /* merging into an empty sketch with a smaller k, and with itself */
    sc_kll *small = make(SC_KLL_DOUBLE, 20, 6);
    CHECK(sc_kll_merge(small, total) == SC_OK && sc_kll_check(small) == SC_OK);
    CHECK(sc_kll_n(small) == n && small->min_k == 20);
    CHECK(sc_kll_merge(total, total) == SC_OK && sc_kll_check(total) == SC_OK);
    CHECK(sc_kll_n(total) == 2 * n);
    /* small sketches (exact mode) merge exactly */
    sc_kll *a = make(SC_KLL_DOUBLE, 200, 8), *b = make(SC_KLL_DOUBLE, 200, 9);
    for (int i = 0; i < 50; i++) {
        sc_kll_update(a, i);
        sc_kll_update(b, 50 + i);
    }
    CHECK(sc_kll_merge(a, b) == SC_OK && sc_kll_n(a) == 100 && !sc_kll_is_estimation_mode(a));
    CHECK(max_rank_error(a, 100) == 0.0);
    sc_kll_destroy(a);
    sc_kll_destroy(b);
    sc_kll_destroy(small);
    sc_kll_destroy(total);
    free(v);
}

static void roundtrip(const sc_kll *sk) {
    size_t size = sc_kll_serialized_size(sk), w = 0;
    uint8_t *buf = malloc(size);
    CHECK(sc_kll_serialize(sk, buf, size, &w) == SC_OK && w == size);
    CHECK(sc_kll_serialize(sk, buf, size - 1, &w) == SC_EINVAL);
    sc_kll *back = NULL;
    CHECK(sc_kll_deserialize(&back, (sc_kll_kind)sk->kind, buf, size, 1) == SC_OK);
    if (back) {
        CHECK(sc_kll_n(back) == sc_kll_n(sk) && sc_kll_num_retained(back) == sc_kll_num_retained(sk));
        uint8_t *buf2 = malloc(size);
        CHECK(sc_kll_serialize(back, buf2, size, &w) == SC_OK && memcmp(buf, buf2, size) == 0);
        free(buf2);
        sc_kll_destroy(back);
    }
    /* every truncation and a few extensions are rejected without crashing */
    for (size_t cut = 0; cut < size; cut++)
        CHECK(sc_kll_deserialize(&back, (sc_kll_kind)sk->kind, buf, cut, 1) == SC_EFORMAT);
    uint8_t *big = calloc(size + 8, 1);
    memcpy(big, buf, size);
    CHECK(sc_kll_deserialize(&back, (sc_kll_kind)sk->kind, big, size + 8, 1) == SC_EFORMAT);
    /* random byte corruption: any status, never a crash or a leak; valid results pass checks */
    for (int t = 0; t < 200; t++) {
        memcpy(big, buf, size);
        big[next_rand() % size] ^= (uint8_t)(1u << (next_rand() % 8));
        if (sc_kll_deserialize(&back, (sc_kll_kind)sk->kind, big, size, 1) == SC_OK) {
            CHECK(sc_kll_check(back) == SC_OK);
            sc_kll_destroy(back);
        }
    }
    free(big);
    free(buf);
}

static void test_serialization(void) {
    for (int kind = 0; kind < 2; kind++) {
        sc_kll *sk = make((sc_kll_kind)kind, 200, 11);
        roundtrip(sk);
        CHECK(sc_kll_serialized_size(sk) == 8);
        sc_kll_update(sk, 3.5);
        roundtrip(sk);
        CHECK(sc_kll_serialized_size(sk) == (kind ? 12u : 16u));
        sc_kll_update(sk, 1.0);
        roundtrip(sk);
        for (int i = 0; i < 100000; i++) sc_kll_update(sk, (double)(next_rand() % 1000));
        roundtrip(sk);
        sc_kll_destroy(sk);
    }
    /* golden bytes (from datasketches 5.2: kll_doubles_sketch(200), update(3.5), update(1.0)) */
    static const uint8_t golden[] = {
        0x05, 0x01, 0x0f, 0x00, 0xc8, 0x00, 0x08, 0x00, 0x02, 0, 0, 0, 0, 0, 0, 0, 0xc8, 0x00,
        0x01, 0x00, 0xc6, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0, 0, 0, 0, 0, 0, 0x0c, 0x40,
        0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0, 0, 0, 0, 0, 0, 0x0c, 0x40};
    sc_kll *sk = make(SC_KLL_DOUBLE, 200, 1);
    sc_kll_update(sk, 3.5);
    sc_kll_update(sk, 1.0);
    uint8_t out[sizeof(golden)];
    size_t w;
    CHECK(sc_kll_serialized_size(sk) == sizeof(golden));
    CHECK(sc_kll_serialize(sk, out, sizeof(out), &w) == SC_OK && memcmp(out, golden, w) == 0);
    sc_kll_destroy(sk);
}

static void test_vtable(void) {
    const sc_sketch_vtable *vt = &sc_kll_double_vtable;
    sc_kll_config cfg = {200, 42};
    void *global = vt->create(&cfg), *local = vt->create(&cfg), *snap = NULL;
    CHECK(global && local && vt->hint(global) == 0);
    uint64_t total = 0;
    for (int round = 0; round < 50; round++) {
        for (int i = 0; i < 1000; i++) sc_kll_update((sc_kll *)local, (double)(round * 1000 + i));
        total += 1000;
        CHECK(vt->n(local) == 1000);
        CHECK(vt->merge_into(global, local) == SC_OK);
        vt->reset(local);
        CHECK(vt->n(local) == 0 && sc_kll_check((sc_kll *)local) == SC_OK);
    }
    CHECK(vt->n(global) == total);
    CHECK(vt->copy(&snap, global) == SC_OK && vt->n(snap) == total);
    CHECK(sc_kll_check((sc_kll *)snap) == SC_OK);
    CHECK(max_rank_error((sc_kll *)snap, total) <= sc_kll_rank_error_for_k(200, 0));
    vt->destroy(snap);
    vt->destroy(local);
    vt->destroy(global);
    void *f = sc_kll_float_vtable.create(NULL);
    CHECK(f && strcmp(sc_kll_float_vtable.name, "kll_floats") == 0);
    sc_kll_float_vtable.destroy(f);
}

static void test_extremes(void) {
    /* duplicates, infinities, k = 8, sorted and reverse-sorted input */
    sc_kll *sk = make(SC_KLL_DOUBLE, 8, 77);
    for (int i = 0; i < 100000; i++) sc_kll_update(sk, (double)(i % 3));
    sc_kll_update(sk, INFINITY);
    sc_kll_update(sk, -INFINITY);
    CHECK(sc_kll_check(sk) == SC_OK && sc_kll_max(sk) == INFINITY && sc_kll_min(sk) == -INFINITY);
    roundtrip(sk);
    sc_kll_destroy(sk);
    for (int dir = 0; dir < 2; dir++) {
        size_t n = 300000;
        sc_kll *s = make(SC_KLL_FLOAT, 200, 78);
        for (size_t i = 0; i < n; i++) sc_kll_update(s, (double)(dir ? n - 1 - i : i));
        CHECK(sc_kll_check(s) == SC_OK);
        CHECK(max_rank_error(s, n) <= sc_kll_normalized_rank_error(s, 0));
        sc_kll_destroy(s);
    }
}

/* ---- through the concurrent framework (concurrent.h): 2 writers + a querying thread ---- */
#define CONC_PER_WRITER 200000
typedef struct { sc_concurrent *c; uint32_t id; int kll; } conc_arg;

static void *conc_writer(void *p) {
    conc_arg *a = p;
    CHECK(sc_conc_writer_enter(a->c, a->id) == SC_OK);
    for (uint64_t i = 0; i < CONC_PER_WRITER; i++) {
        uint64_t v = i * 2 + a->id; /* writers cover the even / the odd values */
        int rc = a->kll ? sc_kll_update((sc_kll *)sc_conc_local(a->c, a->id), (double)v)
                        : sc_frequent_update((sc_frequent *)sc_conc_local(a->c, a->id), (int64_t)(v % 97), 1);
        CHECK(rc == SC_OK && sc_conc_added(a->c, a->id, 1) == SC_OK);
    }
    sc_conc_writer_exit(a->c, a->id);
    return NULL;
}

static void test_concurrent_framework(int kll) {
    sc_kll_config kc = {200, 5};
    sc_frequent_config fc = {6, SC_FREQ_ITEMS_I64};
    sc_conc_config cfg = {kll ? &sc_kll_double_vtable : &sc_frequent_i64_vtable,
                          kll ? (const void *)&kc : (const void *)&fc, NULL, 2, 512, 1000};
    sc_concurrent *c = NULL;
    CHECK(sc_conc_create(&c, &cfg) == SC_OK);
    if (!c) return;
    pthread_t t[2];
    conc_arg args[2] = {{c, 0, kll}, {c, 1, kll}};
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, conc_writer, &args[i]);
    uint64_t last = 0;
    for (int q = 0; q < 200; q++) { /* queries while ingesting: snapshots are valid sketches */
        void *snap = NULL;
        CHECK(sc_conc_snapshot(c, &snap) == SC_OK);
        uint64_t n = cfg.vt->n(snap);
        CHECK(n >= last && n <= 2 * CONC_PER_WRITER);
        last = n;
        CHECK(kll ? sc_kll_check(snap) == SC_OK : sc_frequent_check(snap) == SC_OK);
        cfg.vt->destroy(snap);
    }
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    CHECK(sc_conc_flush(c) == SC_OK);
    void *fin = NULL;
    CHECK(sc_conc_snapshot(c, &fin) == SC_OK);
    CHECK(fin && cfg.vt->n(fin) == 2 * CONC_PER_WRITER); /* no lost updates after the flush */
    if (fin && kll)
        CHECK(max_rank_error(fin, 2 * CONC_PER_WRITER) <= sc_kll_normalized_rank_error(fin, 0));
    if (fin && !kll) /* 97 distinct items, 48 counters at lg 6: purges; bounds must hold */
        for (int64_t x = 0; x < 97; x++) {
            uint64_t truth = 2 * CONC_PER_WRITER / 97 + ((uint64_t)x < 2 * CONC_PER_WRITER % 97);
            CHECK(sc_frequent_lower_bound(fin, x) <= truth && truth <= sc_frequent_upper_bound(fin, x));
        }
    if (fin) cfg.vt->destroy(fin);
    CHECK(sc_conc_close(c) == SC_OK);
    sc_conc_destroy(c);
}

int main(void) {
    test_concurrent_framework(1);
    test_concurrent_framework(0);
    test_lifecycle();
    test_exact_mode();
    test_error_bound(SC_KLL_DOUBLE);
    test_error_bound(SC_KLL_FLOAT);
    test_batch_equals_single();
    test_nulls_and_types();
    test_merge();
    test_serialization();
    test_vtable();
    test_extremes();
    if (failures) {
        fprintf(stderr, "test_kll: %d failures\n", failures);
        return 1;
    }
    printf("test_kll: ok\n");
    return 0;
}
