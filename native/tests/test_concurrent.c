// sources: sketch/concurrent.c sketch/theta.c sketch/murmur3.c
/* The concurrent sketch framework (Rinberg et al. Algorithm 2) under writers + concurrent queries.
 * Run under TSan (data races), ASan (leaks) and the debug build. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sc_atomic.h"
#include "sc_status.h"
#include "sketch/concurrent.h"
#include "sketch/theta.h"

static int failures = 0;
#define CHECK(cond)                                                        \
    do {                                                                   \
        if (!(cond)) {                                                     \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);            \
        }                                                                  \
    } while (0)

/* ---- a trivial exact "counting sketch" to test the framework generically ---- */
typedef struct { uint64_t n; } count_sk;
static void *cnt_create(const void *cfg) { return calloc(1, sizeof(count_sk)); }
static void cnt_destroy(void *s) { free(s); }
static void cnt_reset(void *s) { ((count_sk *)s)->n = 0; }
static int cnt_merge(void *g, const void *l) {
    ((count_sk *)g)->n += ((const count_sk *)l)->n;
    return 0;
}
static int cnt_copy(void **out, const void *s) {
    count_sk *c = malloc(sizeof *c);
    if (!c) return SC_ENOMEM;
    *c = *(const count_sk *)s;
    *out = c;
    return 0;
}
static uint64_t cnt_hint(const void *g) { return 0; }
static uint64_t cnt_n(const void *s) { return ((const count_sk *)s)->n; }
static void cnt_sum(const void *g, uint64_t out[SC_CONC_SUMMARY_WORDS]) { out[0] = ((const count_sk *)g)->n; }
static const sc_sketch_vtable count_vt = {"count", cnt_create, cnt_destroy, cnt_reset, cnt_merge,
                                          cnt_copy, cnt_hint, cnt_n, cnt_sum, NULL};

/* the counting sketch whose global fails its third merge (as on ENOMEM) */
static int merges_left = 2;
static int cnt_merge_failing(void *g, const void *l) {
    if (__atomic_fetch_sub(&merges_left, 1, __ATOMIC_RELAXED) <= 0) return SC_ENOMEM;
    return cnt_merge(g, l);
}
static const sc_sketch_vtable failing_vt = {"count", cnt_create, cnt_destroy, cnt_reset,
                                            cnt_merge_failing, cnt_copy, cnt_hint, cnt_n,
                                            cnt_sum, NULL};

typedef struct {
    sc_concurrent *c;
    uint32_t id;
    uint64_t todo;
    sc_atomic_u64 started, done;
} writer_arg;

static sc_atomic_i64 writers_running;

static void *count_writer(void *p) {
    writer_arg *a = p;
    CHECK(sc_conc_writer_enter(a->c, a->id) == SC_OK);
    for (uint64_t i = 0; i < a->todo; i++) {
        sc_u64_fetch_add_acqrel(&a->started, 1);
        ((count_sk *)sc_conc_local(a->c, a->id))->n++;
        CHECK(sc_conc_added(a->c, a->id, 1) == SC_OK);
        sc_u64_fetch_add_acqrel(&a->done, 1);
    }
    sc_conc_writer_exit(a->c, a->id);
    sc_i64_fetch_add_acqrel(&writers_running, -1);
    return NULL;
}

static void test_generic_relaxation(uint32_t nw, uint64_t b, uint64_t eager_limit) {
    sc_concurrent *c;
    sc_conc_config cfg = {&count_vt, NULL, NULL, nw, b, eager_limit};
    CHECK(sc_conc_create(&c, &cfg) == SC_OK);
    const uint64_t r = sc_conc_relaxation(c), per = 200000;
    CHECK(r == 2 * nw * b);
    writer_arg args[8];
    pthread_t th[8];
    sc_i64_init(&writers_running, nw);
    for (uint32_t i = 0; i < nw; i++) {
        args[i].c = c, args[i].id = i, args[i].todo = per;
        sc_u64_init(&args[i].started, 0);
        sc_u64_init(&args[i].done, 0);
        pthread_create(&th[i], NULL, count_writer, &args[i]);
    }
    /* a second thread on a busy writer id is refused, not corrupted */
    uint64_t queries = 0, prev = 0;
    while (sc_i64_load_acquire(&writers_running) > 0 || queries < 100) {
        uint64_t lo = 0, hi = 0, w[SC_CONC_SUMMARY_WORDS];
        sc_conc_stats st;
        for (uint32_t i = 0; i < nw; i++) lo += sc_u64_load_acquire(&args[i].done);
        sc_conc_summary(c, w, &st);
        for (uint32_t i = 0; i < nw; i++) hi += sc_u64_load_acquire(&args[i].started);
        CHECK(w[0] + r >= lo);   /* misses at most r preceding updates */
        CHECK(w[0] <= hi);       /* never sees an update that has not started */
        CHECK(w[0] >= prev);     /* monotone */
        CHECK(st.n_global == w[0]);
        prev = w[0];
        queries++;
    }
    for (uint32_t i = 0; i < nw; i++) pthread_join(th[i], NULL);
    CHECK(sc_conc_flush(c) == SC_OK);
    uint64_t w[SC_CONC_SUMMARY_WORDS];
    sc_conc_stats st;
    sc_conc_summary(c, w, &st);
    CHECK(w[0] == nw * per); /* nothing lost after the flush */
    void *snap = NULL;
    CHECK(sc_conc_snapshot(c, &snap) == SC_OK && ((count_sk *)snap)->n == nw * per);
    free(snap);
    CHECK(sc_conc_close(c) == SC_OK);
    CHECK(sc_conc_writer_enter(c, 0) == SC_ECLOSED);
    sc_conc_destroy(c);
}

/* ---- concurrent Θ against the sequential Θ on the same data ---- */
typedef struct {
    sc_concurrent *c;
    uint32_t id;
    const int64_t *col;
    size_t n, chunk;
    sc_atomic_u64 done;
} theta_arg;

static void *theta_writer(void *p) {
    theta_arg *a = p;
    for (size_t off = 0; off < a->n; off += a->chunk) {
        size_t m = a->n - off < a->chunk ? a->n - off : a->chunk;
        CHECK(sc_theta_conc_update_i64_array(a->c, a->id, a->col + off, m, NULL, 0) == SC_OK);
        sc_u64_fetch_add_acqrel(&a->done, m);
    }
    sc_i64_fetch_add_acqrel(&writers_running, -1);
    return NULL;
}

static void test_theta_concurrent(size_t per_writer, uint32_t nw, uint32_t b) {
    sc_concurrent *c;
    CHECK(sc_theta_conc_create(&c, 10, SC_THETA_DEFAULT_SEED, nw, b, 0) == SC_OK);
    int64_t *col = malloc(sizeof(int64_t) * per_writer * nw);
    for (size_t i = 0; i < per_writer * nw; i++) col[i] = (int64_t)(i * 2654435761u) + 17;
    theta_arg args[4];
    pthread_t th[4];
    sc_i64_init(&writers_running, nw);
    for (uint32_t i = 0; i < nw; i++) {
        args[i].c = c, args[i].id = i, args[i].col = col + i * per_writer;
        args[i].n = per_writer, args[i].chunk = 97;
        sc_u64_init(&args[i].done, 0);
        pthread_create(&th[i], NULL, theta_writer, &args[i]);
    }
    const uint64_t r = sc_conc_relaxation(c);
    uint64_t queries = 0;
    while (sc_i64_load_acquire(&writers_running) > 0) {
        uint64_t lo = 0, w[SC_CONC_SUMMARY_WORDS];
        sc_conc_stats st;
        for (uint32_t i = 0; i < nw; i++) lo += sc_u64_load_acquire(&args[i].done);
        sc_conc_summary(c, w, &st);
        uint32_t n = (uint32_t)w[SC_THETA_SUM_RETAINED];
        uint64_t theta = w[SC_THETA_SUM_THETA];
        if (theta == SC_THETA_MAX) CHECK(n + r >= lo); /* exact phase: within r of the truth */
        else CHECK(sc_theta_upper_bound_of(n + (uint32_t)r, theta, false, 3) >= lo); /* r hashes missing */
        sc_theta_compact *snap = NULL;
        CHECK(sc_theta_conc_snapshot(c, &snap) == SC_OK);
        sc_theta_compact_destroy(snap);
        if (++queries % 8 == 0) CHECK(sc_conc_flush(c) == SC_OK); /* flush while writing */
    }
    for (uint32_t i = 0; i < nw; i++) pthread_join(th[i], NULL);
    CHECK(sc_conc_flush(c) == SC_OK);
    /* after the flush: equal to the sequential sketch (trimmed to k in estimation mode) */
    sc_theta *seq;
    sc_theta_create(&seq, 10, SC_THETA_DEFAULT_SEED);
    sc_theta_update_i64_array(seq, col, per_writer * nw, NULL, 0);
    if (sc_theta_theta64(seq) < SC_THETA_MAX) sc_theta_trim(seq);
    sc_theta_compact *a = NULL, *s = NULL;
    CHECK(sc_theta_conc_snapshot(c, &a) == SC_OK);
    CHECK(sc_theta_compact_of(&s, seq, true) == SC_OK);
    CHECK(a->n == s->n && a->theta == s->theta && memcmp(a->entries, s->entries, 8 * s->n) == 0);
    uint64_t w[SC_CONC_SUMMARY_WORDS];
    sc_conc_summary(c, w, NULL);
    CHECK(sc_theta_estimate_of((uint32_t)w[0], w[1], w[2]) == sc_theta_estimate(seq));
    sc_theta_compact_destroy(a);
    sc_theta_compact_destroy(s);
    sc_theta_destroy(seq);
    sc_conc_destroy(c); /* destroy without close: must not leak or hang */
    free(col);
}

static void test_busy_writer(void) {
    sc_concurrent *c;
    CHECK(sc_theta_conc_create(&c, 10, SC_THETA_DEFAULT_SEED, 2, 16, 0) == SC_OK);
    CHECK(sc_conc_writer_enter(c, 1) == SC_OK);
    int64_t v = 1;
    CHECK(sc_theta_conc_update_i64_array(c, 1, &v, 1, NULL, 0) == SC_EFULL);
    CHECK(sc_theta_conc_update_i64_array(c, 2, &v, 1, NULL, 0) == SC_EINVAL);
    sc_conc_writer_exit(c, 1);
    CHECK(sc_theta_conc_update_i64_array(c, 1, &v, 1, NULL, 0) == SC_OK);
    CHECK(sc_conc_close(c) == SC_OK && sc_conc_close(c) == SC_OK);
    CHECK(sc_theta_conc_update_i64_array(c, 0, &v, 1, NULL, 0) == SC_ECLOSED);
    sc_conc_destroy(c);
    sc_conc_config bad = {&count_vt, NULL, NULL, 0, 1, 0};
    CHECK(sc_conc_create(&c, &bad) == SC_EINVAL);
}

/* A buffer the propagator cannot merge is never lost quietly: the writer's next
 * sc_conc_added, every flush and every snapshot report it from then on. */
static void test_failed_merge_is_reported(void) {
    sc_conc_config cfg = {&failing_vt, NULL, NULL, 1, 4, 0};
    sc_concurrent *c;
    CHECK(sc_conc_create(&c, &cfg) == SC_OK);
    CHECK(sc_conc_writer_enter(c, 0) == SC_OK);
    int rc = SC_OK;
    for (int i = 0; i < 4000 && rc == SC_OK; i++) {
        ((count_sk *)sc_conc_local(c, 0))->n++;
        rc = sc_conc_added(c, 0, 1);
    }
    CHECK(rc == SC_ENOMEM);
    sc_conc_writer_exit(c, 0);
    CHECK(sc_conc_flush(c) == SC_ENOMEM);
    void *snap = (void *)1;
    CHECK(sc_conc_snapshot(c, &snap) == SC_ENOMEM && snap == NULL);
    CHECK(sc_conc_close(c) == SC_ENOMEM);
    sc_conc_destroy(c);
}

int main(void) {
    test_busy_writer();
    test_failed_merge_is_reported();
    test_generic_relaxation(1, 1, 0);
    test_generic_relaxation(3, 8, 0);
    test_generic_relaxation(2, 64, 5000); /* eager, then lazy */
    test_theta_concurrent(500, 2, 32);    /* stays exact: eager the whole time */
    test_theta_concurrent(100000, 2, 64); /* estimation mode, lazy */
    test_theta_concurrent(50000, 3, 1);
    if (failures) {
        fprintf(stderr, "test_concurrent: %d failures\n", failures);
        return 1;
    }
    printf("test_concurrent: ok\n");
    return 0;
}
