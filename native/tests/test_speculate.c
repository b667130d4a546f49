// sources: exec/speculate.c
/* Tests for exec/speculate (Sturzrehm): speculative transactions committed in arrival order
 * must give exactly the sequential run's results and final state, at every worker count and
 * horizon, with conflicts, with random delays injected into transactions, across several
 * runs (batches) sharing the store; cancel stops a run promptly. The oracle runs the same
 * transaction functions one at a time against a plain array through the same vtable. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../exec/speculate.h"
#include "../common/sc_status.h"
#include "check.h"

#define NKEYS 4096

/* ---- the sequential oracle: a plain array behind the same vtable ---- */
typedef struct plain {
    sc_txn tx;
    int64_t v[NKEYS];
} plain;

static int64_t plain_get(sc_txn *tx, int64_t k) {
    CHECK(k >= 0 && k < NKEYS);
    return ((plain *)tx->impl)->v[k];
}
static void plain_put(sc_txn *tx, int64_t k, int64_t x) {
    CHECK(k >= 0 && k < NKEYS);
    ((plain *)tx->impl)->v[k] = x;
}
static void plain_init(plain *p) {
    memset(p, 0, sizeof *p);
    p->tx.get = plain_get;
    p->tx.put = plain_put;
    p->tx.impl = p;
}

/* ---- workloads ---- */
typedef struct work {
    int64_t base;     /* global index of event 0 of this run */
    int conflict_pct; /* histogram: share of events that also update the next bucket */
    int state;        /* histogram buckets */
    int delays;       /* inject random yields / sleeps */
} work;

static __thread unsigned rnd_state = 12345;
static void maybe_delay(const work *w) {
    if (!w->delays) return;
    unsigned r = (unsigned)rand_r(&rnd_state) % 16;
    if (r < 4) sched_yield();
    else if (r == 4) {
        struct timespec ts = {0, 1000 * (long)(rand_r(&rnd_state) % 50)};
        nanosleep(&ts, NULL);
    }
}

/* Sturzrehm Alg. 25: bucket e % STATE gets +1; some events also bump the next bucket. */
static void histogram(void *ctx, sc_txn *tx, int64_t i, sc_spec_result *res) {
    const work *w = ctx;
    int64_t e = w->base + i;
    int64_t pos = e % w->state;
    maybe_delay(w);
    int64_t v = tx->get(tx, pos) + 1;
    tx->put(tx, pos, v);
    if ((e * 37) % 100 < w->conflict_pct) {
        int64_t q = (pos + 1) % w->state;
        tx->put(tx, q, tx->get(tx, q) + 1);
    }
    maybe_delay(w);
    res->bits = v * 1000 + tx->get(tx, (pos + 1) % w->state);
    res->ok = 1;
}

/* Ride sharing (Sturzrehm §7.4): drivers 0..63 at fixed spots on a line, key = driver, value =
 * 1 when busy. A request at x scans the drivers within 6 spots, picks the nearest free one,
 * marks it busy, and frees the driver it names in its second field (a finished ride). */
static void ride(void *ctx, sc_txn *tx, int64_t i, sc_spec_result *res) {
    const work *w = ctx;
    int64_t e = w->base + i;
    int64_t x = (e * 7919) % 64, release = (e * 104729) % 64;
    maybe_delay(w);
    if (e % 3 == 0) tx->put(tx, release, 0);
    int64_t best = -1, dist = 1000;
    for (int64_t d = x - 6; d <= x + 6; d++) {
        if (d < 0 || d >= 64) continue;
        if (tx->get(tx, d) == 0 && llabs(d - x) < dist) {
            best = d;
            dist = llabs(d - x);
        }
    }
    if (best >= 0) tx->put(tx, best, 1);
    maybe_delay(w);
    res->bits = best;
    res->ok = best >= 0;
}

typedef void (*task_fn)(void *, sc_txn *, int64_t, sc_spec_result *);

static void check_equal(task_fn f, work w, uint32_t workers, uint32_t horizon, int64_t n, int runs) {
    sc_spec_config cfg = {workers, horizon, 64};
    sc_spec *s;
    CHECK_RC(sc_spec_create(&s, &cfg));
    plain *p = malloc(sizeof *p);
    CHECK(p);
    plain_init(p);
    sc_spec_result *got = calloc((size_t)n, sizeof *got), want;
    CHECK(got);
    for (int k = 0; k < runs; k++) {
        w.base = (int64_t)k * n;
        CHECK_RC(sc_spec_run(s, n, f, &w, got));
        work ws = w;
        ws.delays = 0;
        for (int64_t i = 0; i < n; i++) {
            memset(&want, 0, sizeof want);
            f(&ws, &p->tx, i, &want);
            if (got[i].bits != want.bits || got[i].ok != want.ok) {
                fprintf(stderr, "workers=%u horizon=%u run %d event %lld: got %lld/%d want %lld/%d\n",
                        workers, horizon, k, (long long)i, (long long)got[i].bits, got[i].ok,
                        (long long)want.bits, want.ok);
                CHECK(0);
            }
        }
    }
    for (int64_t k = 0; k < NKEYS; k++) CHECK(sc_spec_peek(s, k) == p->v[k]);
    sc_spec_stats st;
    sc_spec_get_stats(s, &st);
    CHECK(st.commits == (uint64_t)(n * runs));
    CHECK(st.aborts <= st.commits);
    CHECK(st.horizon >= 1 && st.horizon <= 64);
    if (workers == 1) CHECK(st.aborts == 0); /* one worker never runs ahead of a commit */
    CHECK(st.keys > 0 && st.store_bytes > 0);
    sc_spec_destroy(s);
    free(got);
    free(p);
}

static void test_equal_sequential(void) {
    const uint32_t workers[] = {1, 2, 4};
    const uint32_t horizons[] = {0, 1, 3, 16};
    const int conflicts[] = {0, 10, 50};
    for (size_t a = 0; a < 3; a++)
        for (size_t b = 0; b < 4; b++)
            for (size_t c = 0; c < 3; c++) {
                work w = {0, conflicts[c], 20, 0};
                check_equal(histogram, w, workers[a], horizons[b], 500, 3);
            }
    for (size_t a = 0; a < 3; a++)
        for (size_t b = 0; b < 4; b++) {
            work w = {0, 0, 0, 0};
            check_equal(ride, w, workers[a], horizons[b], 400, 3);
        }
}

static void test_random_delays(void) {
    for (int round = 0; round < 4; round++) {
        work w = {0, 50, 7, 1};
        check_equal(histogram, w, 4, round % 2 ? 0 : 8, 300, 2);
        work r = {0, 0, 0, 1};
        check_equal(ride, r, 3, round % 2 ? 0 : 5, 300, 2);
    }
}

/* The adaptive predictor: with one worker nothing aborts, so the horizon grows by one per
 * window to the bound; when every event conflicts with its predecessor (one bucket, and a
 * read held across a sleep so the next event overlaps it), speculation is wasted and the
 * horizon stays small. */
static void one_bucket_slow(void *ctx, sc_txn *tx, int64_t i, sc_spec_result *res) {
    int64_t v = tx->get(tx, 0);
    struct timespec ts = {0, 50000};
    nanosleep(&ts, NULL);
    tx->put(tx, 0, v + 1);
    res->bits = v + 1;
    res->ok = 1;
}

static void test_adaptive(void) {
    sc_spec_config one = {1, 0, 64};
    sc_spec *s;
    CHECK_RC(sc_spec_create(&s, &one));
    work w = {0, 0, 20, 0};
    int64_t n = SC_SPEC_WINDOW * 70;
    sc_spec_result *got = calloc((size_t)n, sizeof *got);
    sc_spec_stats st;
    sc_spec_get_stats(s, &st);
    CHECK(st.adaptive && st.horizon == 2);
    CHECK_RC(sc_spec_run(s, n, histogram, &w, got));
    sc_spec_get_stats(s, &st);
    CHECK(st.aborts == 0 && st.horizon == 64);
    sc_spec_destroy(s);

    sc_spec_config two = {2, 0, 64};
    CHECK_RC(sc_spec_create(&s, &two));
    CHECK_RC(sc_spec_run(s, 1000, one_bucket_slow, NULL, got));
    for (int64_t i = 0; i < 1000; i++) CHECK(got[i].bits == i + 1);
    sc_spec_get_stats(s, &st);
    CHECK(st.aborts > 0);
    CHECK(st.horizon_mean < 16); /* without aborts it would climb from 4 towards 64 */
    sc_spec_destroy(s);
    free(got);
}

static void slow(void *ctx, sc_txn *tx, int64_t i, sc_spec_result *res) {
    struct timespec ts = {0, 200000};
    nanosleep(&ts, NULL);
    tx->put(tx, i % 5, tx->get(tx, i % 5) + 1);
    res->ok = 1;
}

typedef struct canceller {
    sc_spec *s;
} canceller;

static void *cancel_later(void *arg) {
    struct timespec ts = {0, 20000000};
    nanosleep(&ts, NULL);
    sc_spec_cancel(((canceller *)arg)->s);
    return NULL;
}

static void test_cancel(void) {
    sc_spec_config cfg = {2, 0, 0};
    sc_spec *s;
    CHECK_RC(sc_spec_create(&s, &cfg));
    int64_t n = 100000; /* 20 s of work at one worker */
    sc_spec_result *got = calloc((size_t)n, sizeof *got);
    canceller c = {s};
    pthread_t t;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CHECK(pthread_create(&t, NULL, cancel_later, &c) == 0);
    CHECK(sc_spec_run(s, n, slow, NULL, got) == SC_ECLOSED);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    pthread_join(t, NULL);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    CHECK(secs < 2.0);
    sc_spec_stats st;
    sc_spec_get_stats(s, &st);
    CHECK(st.commits < (uint64_t)n);
    /* the store holds exactly the committed prefix */
    int64_t total = 0;
    for (int k = 0; k < 5; k++) total += sc_spec_peek(s, k);
    CHECK(total == (int64_t)st.commits);
    CHECK(sc_spec_run(s, 10, slow, NULL, got) == SC_ECLOSED);
    sc_spec_destroy(s);
    free(got);
}

static void test_bad_config(void) {
    sc_spec *s = NULL;
    sc_spec_config bad = {0, 0, 0};
    CHECK(sc_spec_create(&s, &bad) == SC_EINVAL && !s);
    sc_spec_config big = {1, SC_SPEC_MAX_HORIZON + 1, 0};
    CHECK(sc_spec_create(&s, &big) == SC_EINVAL && !s);
    sc_spec_config ok = {1, 1, 0};
    CHECK_RC(sc_spec_create(&s, &ok));
    CHECK(sc_spec_run(s, -1, histogram, NULL, NULL) == SC_EINVAL);
    CHECK_RC(sc_spec_run(s, 0, histogram, NULL, NULL));
    sc_spec_destroy(s);
}

int main(void) {
    test_bad_config();
    test_equal_sequential();
    test_random_delays();
    test_adaptive();
    test_cancel();
    printf("test_speculate: ok\n");
    return 0;
}
