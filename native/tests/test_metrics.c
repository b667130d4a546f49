// sources: runtime/metrics.c
/* Tests for runtime/metrics: log-linear bucket bounds, quantiles within 1/16 of the exact
 * order statistics on uniform and heavy-tailed samples, and concurrent writers with a reader
 * taking snapshots (monotone counters, exact totals at the end; TSan-checked). */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "runtime/atomic_ext.h"
#include "runtime/metrics.h"

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SCALE_DIV 8
#else
#define SCALE_DIV 1
#endif
#include "check.h"

static uint64_t rnd(uint64_t *s) { *s ^= *s << 13; *s ^= *s >> 7; *s ^= *s << 17; return *s; }
static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void test_buckets(void) {
    for (uint64_t v = 0; v < 16; v++) CHECK(sc_hist_bucket(v) == v && sc_hist_bucket_upper((uint32_t)v) == v);
    uint64_t s = 1;
    uint32_t prev = 0;
    for (uint64_t v = 0; v < 100000; v++) { uint32_t b = sc_hist_bucket(v); CHECK(b >= prev); prev = b; }
    for (int i = 0; i < 1000000; i++) {
        uint64_t v = rnd(&s) >> (rnd(&s) % 64);
        uint32_t b = sc_hist_bucket(v);
        CHECK(b < SC_HIST_BUCKETS);
        uint64_t up = sc_hist_bucket_upper(b);
        CHECK(v <= up);
        CHECK(v < 16 || (double)(up - v) <= (double)v / 16.0);
        if (b > 0) CHECK(sc_hist_bucket_upper(b - 1) < v);
    }
    CHECK(sc_hist_bucket(UINT64_MAX) == SC_HIST_BUCKETS - 1 && sc_hist_bucket_upper(SC_HIST_BUCKETS - 1) == UINT64_MAX);
}

static void check_quantiles(const char *name, uint64_t *xs, uint64_t n) {
    sc_hist *h = malloc(sizeof *h);
    sc_hist_init(h);
    for (uint64_t i = 0; i < n; i++) sc_hist_record(h, xs[i]);
    sc_hist_snapshot *s = malloc(sizeof *s);
    sc_hist_snapshot_copy(h, s);
    qsort(xs, n, sizeof *xs, cmp_u64);
    CHECK(s->count == n && s->max == xs[n - 1]);
    const double qs[] = { 0.0, 0.01, 0.5, 0.9, 0.99, 0.999, 1.0 };
    for (size_t i = 0; i < sizeof qs / sizeof qs[0]; i++) {
        uint64_t rank = (uint64_t)ceil(qs[i] * (double)n);
        uint64_t exact = xs[rank ? rank - 1 : 0], got = sc_hist_quantile(s, qs[i]);
        CHECK(got >= exact && (double)(got - exact) <= (double)exact / 16.0 + 1e-9);
    }
    printf("  quantiles %-12s n=%llu p50=%llu p99=%llu max=%llu (within 1/16 of exact)\n", name, (unsigned long long)n,
           (unsigned long long)sc_hist_quantile(s, 0.5), (unsigned long long)sc_hist_quantile(s, 0.99),
           (unsigned long long)s->max);
    free(s);
    free(h);
}

static void test_quantiles(void) {
    uint64_t n = 200000, s = 3, *xs = malloc(n * sizeof *xs);
    for (uint64_t i = 0; i < n; i++) xs[i] = 1000 + rnd(&s) % 100000;
    check_quantiles("uniform", xs, n);
    for (uint64_t i = 0; i < n; i++) {
        double u = ((double)(rnd(&s) >> 11) + 1) / 9007199254740993.0;
        xs[i] = (uint64_t)(20000.0 / pow(u, 1.0 / 1.5)); /* Pareto: heavy tail like latency */
    }
    check_quantiles("pareto(1.5)", xs, n);
    sc_hist_snapshot empty = {0};
    CHECK(sc_hist_quantile(&empty, 0.5) == 0);
    free(xs);
}

typedef struct { sc_metrics *m; uint64_t n; uint32_t id; } warg;
static _Atomic int writers_done;

static void *writer(void *v) {
    warg *w = v;
    uint64_t s = w->id + 11;
    for (uint64_t i = 0; i < w->n; i++) {
        sc_metrics_op_add(w->m, w->id % 3, 2, 1, 1, 1, 10);
        sc_metrics_op_gauge(w->m, w->id % 3, (int64_t)(i % 7), w->id);
        sc_metrics_latency_record(w->m, 1000 + rnd(&s) % 5000);
    }
    atomic_fetch_add(&writers_done, 1);
    return NULL;
}

static void test_concurrent(void) {
    sc_metrics *m;
    CHECK(sc_metrics_create(&m, 3) == SC_OK);
    const uint32_t nw = 4;
    uint64_t n = 300000 / SCALE_DIV;
    pthread_t t[4];
    warg w[4];
    atomic_init(&writers_done, 0);
    for (uint32_t i = 0; i < nw; i++) { w[i] = (warg){ m, n, i }; pthread_create(&t[i], NULL, writer, &w[i]); }
    sc_op_counters prev[3] = {{0}}, cur[3];
    sc_latency_summary lat, prevlat = {0};
    uint64_t snaps = 0;
    while (atomic_load(&writers_done) < (int)nw) {
        CHECK(sc_metrics_snapshot(m, cur, 3, &lat) == SC_OK);
        for (int i = 0; i < 3; i++) {
            CHECK(cur[i].rows_in >= prev[i].rows_in && cur[i].ns >= prev[i].ns);
            CHECK(cur[i].queue_depth >= 0 && cur[i].queue_depth < 7);
        }
        CHECK(lat.count >= prevlat.count && (lat.count == 0 || (lat.p50_ns >= 1000 && lat.p99_ns <= 6100)));
        memcpy(prev, cur, sizeof prev);
        prevlat = lat;
        snaps++;
    }
    for (uint32_t i = 0; i < nw; i++) pthread_join(t[i], NULL);
    CHECK(sc_metrics_snapshot(m, cur, 3, &lat) == SC_OK);
    uint64_t rows = 0;
    for (int i = 0; i < 3; i++) rows += cur[i].rows_in;
    CHECK(rows == 2 * n * nw && lat.count == n * nw && lat.max_ns < 6000 && lat.max_ns >= lat.p99_ns);
    CHECK(lat.mean_ns > 3000 && lat.mean_ns < 4000);
    CHECK(sc_metrics_snapshot(m, cur, 4, NULL) == SC_EINVAL);
    printf("  concurrent: %u writers x %llu records, %llu snapshots monotone, totals exact, p50=%llu p99=%llu\n", nw,
           (unsigned long long)n, (unsigned long long)snaps, (unsigned long long)lat.p50_ns, (unsigned long long)lat.p99_ns);
    sc_metrics_destroy(m);
}

int main(void) {
    printf("test_metrics\n");
    test_buckets();
    printf("  buckets: exact below 16, upper bound within 1/16 above\n");
    test_quantiles();
    test_concurrent();
    return 0;
}
