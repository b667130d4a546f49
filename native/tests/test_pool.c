// sources: runtime/pool.c runtime/scheduler.c runtime/reorder.c runtime/hybrid_queue.c runtime/ring.c runtime/batch.c runtime/metrics.c
/* End-to-end stress tests for runtime/pool: a 5-operator pipeline (stateless map, stateless
 * filter + flat-map, partitioned running sum per key, stateful running counter, stateless
 * map) runs on many configurations (workers 1..8 on 2 cores, every scheduler, both reorder
 * variants, hybrid and partitioned keyed queues, windows down to 1, batch size 1, a sink that
 * pushes back); the sink's row sequence must equal a sequential run exactly. Also: operator
 * errors stop the run and are reported, pause/resume, stop mid-stream, no leaked batches. */
#define _GNU_SOURCE /* sched_getaffinity, CPU_SET */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

#include "runtime/atomic_ext.h"
#include "runtime/pool.h"

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SCALE_DIV 6
#else
#define SCALE_DIV 1
#endif
#include "check.h"

static uint64_t rnd(uint64_t *s) { *s ^= *s << 13; *s ^= *s >> 7; *s ^= *s << 17; return *s; }
static void spin(uint64_t seed, int mask) {
    uint64_t r = rnd(&seed);
    if ((r & 15) == 0) for (uint64_t i = (r >> 8) & (uint64_t)mask; i; i--) sc_cpu_relax();
}

#define NKEYS 64
enum { COL_V = 0, COL_KEY = 1 };

typedef struct {
    sc_batch_pool *bp;
    int64_t key_sum[NKEYS]; /* partitioned state: touched only by the partition's worker */
    int64_t counter;        /* stateful state */
    int fail_at;            /* op 1 fails on this first_row (-1: never) */
} pipe_state;

/* the operators; each is also applied sequentially to build the expected output */
static int op_map(void *st, sc_batch *in, sc_batch **out) {
    for (int64_t r = 0; r < in->nrows; r++)
        sc_batch_set_i64(in, COL_V, r, sc_batch_get_i64(in, COL_V, r) * 3 + 1);
    spin(in->first_row * 31 + 1, 1023);
    *out = in;
    return 0;
}
static int op_filter_split(void *vst, sc_batch *in, sc_batch **out) {
    pipe_state *st = vst;
    if (st->fail_at >= 0 && in->first_row == (uint64_t)st->fail_at) { sc_batch_release(in); return SC_EPYTHON; }
    int64_t w = 0;
    for (int64_t r = 0; r < in->nrows; r++) {
        int64_t v = sc_batch_get_i64(in, COL_V, r);
        if (v % 5 == 0) continue; /* filter */
        sc_batch_set_i64(in, COL_V, w, v);
        sc_batch_set_i64(in, COL_KEY, w, sc_batch_get_i64(in, COL_KEY, r));
        w++;
    }
    in->nrows = w;
    spin(in->first_row * 17 + 3, 511);
    if (w == 0) { sc_batch_release(in); *out = NULL; return 0; }
    sc_batch *extra;
    /* flat-map: every 3rd batch also emits a copy (a chain under one serial) */
    if (in->first_row % 3 == 0 && sc_batch_acquire(st->bp, &extra) == SC_OK) {
        for (int64_t r = 0; r < w; r++) {
            sc_batch_set_i64(extra, COL_V, r, -sc_batch_get_i64(in, COL_V, r));
            sc_batch_set_i64(extra, COL_KEY, r, sc_batch_get_i64(in, COL_KEY, r));
        }
        extra->nrows = w;
        in->next = extra;
    }
    *out = in;
    return 0;
}
static uint32_t key_of(void *st, const sc_batch *b) { return (uint32_t)sc_batch_get_i64(b, COL_KEY, 0); }
static int op_keyed_sum(void *vst, sc_batch *in, sc_batch **out) {
    pipe_state *st = vst;
    for (int64_t r = 0; r < in->nrows; r++) {
        int64_t k = sc_batch_get_i64(in, COL_KEY, r);
        st->key_sum[k] += sc_batch_get_i64(in, COL_V, r);
        sc_batch_set_i64(in, COL_V, r, st->key_sum[k]);
    }
    spin((uint64_t)in->nrows * 7 + (uint64_t)sc_batch_get_i64(in, COL_V, 0), 255);
    *out = in;
    return 0;
}
static int op_counter(void *vst, sc_batch *in, sc_batch **out) {
    pipe_state *st = vst;
    for (int64_t r = 0; r < in->nrows; r++) {
        st->counter++;
        sc_batch_set_i64(in, COL_V, r, sc_batch_get_i64(in, COL_V, r) * 1000003 + st->counter);
    }
    *out = in;
    return 0;
}
static int op_map2(void *st, sc_batch *in, sc_batch **out) {
    for (int64_t r = 0; r < in->nrows; r++) sc_batch_set_i64(in, COL_V, r, sc_batch_get_i64(in, COL_V, r) ^ 0x5555);
    spin((uint64_t)sc_batch_get_i64(in, COL_V, 0), 255);
    *out = in;
    return 0;
}

typedef struct {
    int64_t *rows;
    uint64_t n, cap, batches, expect_serial;
    int pushback; /* 1/pushback calls return SC_EFULL */
    uint64_t rnd;
} sink_state;

static int sink(void *vs, sc_batch *b) {
    sink_state *s = vs;
    if (s->pushback && rnd(&s->rnd) % (uint64_t)s->pushback == 0) return SC_EFULL;
    CHECK(b->serial == s->expect_serial);
    s->expect_serial++;
    for (int64_t r = 0; r < b->nrows; r++) {
        CHECK(s->n < s->cap);
        s->rows[s->n++] = sc_batch_get_i64(b, COL_V, r);
    }
    s->batches++;
    sc_batch_release(b);
    return SC_OK;
}

static const sc_col_type TYPES[2] = { SC_COL_INT64, SC_COL_INT64 };
#define MAXROWS 8

/* input batch i: rows [first, first + nrows), key chosen per batch (skewed) */
static void fill_input(sc_batch *b, uint64_t i, uint64_t first, int64_t nrows) {
    uint64_t s = i * 0x9E3779B97F4A7C15ull + 1;
    uint64_t r = rnd(&s);
    int64_t key = (r & 1) ? (int64_t)(r >> 8) % 4 : (int64_t)(r >> 8) % NKEYS; /* half the load on 4 keys */
    b->first_row = first;
    b->nrows = nrows;
    for (int64_t k = 0; k < nrows; k++) {
        sc_batch_set_i64(b, COL_V, k, (int64_t)(first + (uint64_t)k));
        sc_batch_set_i64(b, COL_KEY, k, key);
    }
}
static int64_t rows_of(uint64_t i, int maxrows) { return maxrows == 1 ? 1 : 1 + (int64_t)((i * 2654435761u) % (uint64_t)maxrows); }

static void build_ops(sc_op_desc *ops, pipe_state *st) {
    ops[0] = (sc_op_desc){ "map", SC_OP_STATELESS, op_map, st, NULL, 0 };
    ops[1] = (sc_op_desc){ "filter_split", SC_OP_STATELESS, op_filter_split, st, NULL, 0 };
    ops[2] = (sc_op_desc){ "keyed_sum", SC_OP_PARTITIONED, op_keyed_sum, st, key_of, 0 };
    ops[3] = (sc_op_desc){ "counter", SC_OP_STATEFUL, op_counter, st, NULL, 0 };
    ops[4] = (sc_op_desc){ "map2", SC_OP_STATELESS, op_map2, st, NULL, 0 };
}

/* the oracle: one batch at a time through the same operators */
static uint64_t sequential(uint64_t nbatches, int maxrows, int64_t *out, uint64_t cap) {
    pipe_state st = { .fail_at = -1 };
    CHECK(sc_batch_pool_create(&st.bp, TYPES, 2, MAXROWS, 0, 8) == SC_OK);
    sc_op_desc ops[5];
    build_ops(ops, &st);
    uint64_t n = 0, first = 0;
    for (uint64_t i = 0; i < nbatches; i++) {
        sc_batch *b, *cur[2];
        CHECK(sc_batch_acquire(st.bp, &b) == SC_OK);
        int64_t nr = rows_of(i, maxrows);
        fill_input(b, i, first, nr);
        first += (uint64_t)nr;
        int ncur = 1;
        cur[0] = b;
        for (int o = 0; o < 5 && ncur; o++) {
            sc_batch *next[2];
            int nn = 0;
            for (int c = 0; c < ncur; c++) {
                sc_batch *res = NULL;
                CHECK(ops[o].run(ops[o].state, cur[c], &res) == 0);
                for (; res; res = res->next) next[nn++] = res;
            }
            for (int c = 0; c < nn; c++) { cur[c] = next[c]; cur[c]->next = NULL; }
            ncur = nn;
        }
        for (int c = 0; c < ncur; c++) {
            for (int64_t r = 0; r < cur[c]->nrows; r++) { CHECK(n < cap); out[n++] = sc_batch_get_i64(cur[c], COL_V, r); }
            sc_batch_release(cur[c]);
        }
    }
    CHECK(sc_batch_pool_destroy(st.bp) == SC_OK);
    return n;
}

typedef struct {
    uint32_t workers, window;
    sc_sched_policy policy;
    sc_reorder_kind reorder;
    sc_hq_kind keyed;
    int maxrows, pushback;
    uint64_t nbatches;
} config;

static void run_config(const config *c) {
    uint64_t cap = c->nbatches * MAXROWS * 2 + 16;
    int64_t *expect = malloc(cap * sizeof(int64_t));
    uint64_t nexp = sequential(c->nbatches, c->maxrows, expect, cap);

    pipe_state st = { .fail_at = -1 };
    uint32_t pool_batches = 5 * c->window * 2 + c->workers * 4 + 16;
    CHECK(sc_batch_pool_create(&st.bp, TYPES, 2, MAXROWS, 0, pool_batches) == SC_OK);
    sc_op_desc ops[5];
    build_ops(ops, &st);
    sink_state ss = { .rows = malloc(cap * sizeof(int64_t)), .cap = cap, .pushback = c->pushback, .rnd = 99 };
    sc_metrics *m;
    CHECK(sc_metrics_create(&m, 5) == SC_OK);
    sc_pool_config pc = { .workers = c->workers, .window = c->window, .reorder = c->reorder, .keyed = c->keyed,
                          .partitions = 16, .marker_every = 7, .idle_sleep_ns = 20000 };
    pc.sched.policy = c->policy;
    pc.sched.slice_ns = 50000;
    sc_pool *p;
    CHECK(sc_pool_create(&p, &pc, ops, 5, sink, &ss, m) == SC_OK);
    uint64_t t0 = sc_now_ns();
    CHECK(sc_pool_start(p) == SC_OK);
    uint64_t first = 0;
    for (uint64_t i = 0; i < c->nbatches; i++) {
        sc_batch *b;
        sc_backoff bo;
        sc_backoff_reset(&bo);
        while (sc_batch_acquire(st.bp, &b) != SC_OK) sc_backoff_wait(&bo, 20000);
        int64_t nr = rows_of(i, c->maxrows);
        fill_input(b, i, first, nr);
        first += (uint64_t)nr;
        CHECK(sc_pool_push(p, b, -1) == SC_OK);
    }
    CHECK(sc_pool_close_input(p) == SC_OK);
    bool done = false;
    CHECK(sc_pool_wait(p, -1, &done) == SC_OK && done);
    CHECK(sc_pool_get_state(p) == SC_POOL_FINISHED);
    CHECK(sc_pool_stop(p) == SC_OK);
    double ms = (double)(sc_now_ns() - t0) / 1e6;
    CHECK(ss.n == nexp);
    for (uint64_t i = 0; i < nexp; i++) CHECK(ss.rows[i] == expect[i]);
    sc_op_counters oc[5];
    sc_latency_summary lat;
    CHECK(sc_metrics_snapshot(m, oc, 5, &lat) == SC_OK);
    CHECK(oc[0].batches_in == c->nbatches && oc[0].rows_in == first);
    CHECK(oc[4].rows_out == nexp);
    CHECK(lat.count > 0 && lat.p50_ns <= lat.p99_ns && lat.p99_ns <= lat.max_ns);
    sc_pool_destroy(p);
    CHECK(sc_batch_pool_in_use(st.bp) == 0);
    CHECK(sc_batch_pool_destroy(st.bp) == SC_OK);
    sc_metrics_destroy(m);
    printf("  workers=%u window=%-3u %-3s %-11s %-11s rows<=%d pushback=%d batches=%llu rows_out=%llu"
           " p50=%lluus p99=%lluus: equals sequential (%.0f ms)\n",
           c->workers, c->window, sc_sched_policy_name(c->policy),
           c->reorder == SC_REORDER_LOCKED ? "lock-based" : "nonblocking",
           c->keyed == SC_HQ_PARTITIONED ? "partitioned" : "hybrid", c->maxrows, c->pushback,
           (unsigned long long)c->nbatches, (unsigned long long)nexp, (unsigned long long)lat.p50_ns / 1000,
           (unsigned long long)lat.p99_ns / 1000, ms);
    free(expect);
    free(ss.rows);
}

/* an operator error stops the run, is reported with its operator, and leaks nothing */
/* A started pool over the five-operator pipeline, its batch pool holding `batches` batches
 * and its sink `cap` rows. */
static sc_pool *start_pipe(pipe_state *st, sc_op_desc *ops, sink_state *ss, uint32_t workers, uint32_t window,
                           uint32_t batches, uint64_t cap) {
    CHECK(sc_batch_pool_create(&st->bp, TYPES, 2, MAXROWS, 0, batches) == SC_OK);
    build_ops(ops, st);
    *ss = (sink_state){ .rows = malloc(cap * sizeof(int64_t)), .cap = cap };
    sc_pool_config pc = { .workers = workers, .window = window };
    sc_pool *p;
    CHECK(sc_pool_create(&p, &pc, ops, 5, sink, ss, NULL) == SC_OK);
    CHECK(sc_pool_start(p) == SC_OK);
    return p;
}

static void test_error(uint32_t workers) {
    pipe_state st = { .fail_at = 3000 };
    sc_op_desc ops[5];
    sink_state ss;
    sc_pool *p = start_pipe(&st, ops, &ss, workers, 16, 256, 100000);
    int rc = SC_OK;
    for (uint64_t i = 0; i < 20000; i++) {
        sc_batch *b;
        while (sc_batch_acquire(st.bp, &b) != SC_OK) sched_yield();
        fill_input(b, i, i, 1);
        rc = sc_pool_push(p, b, -1);
        if (rc != SC_OK) { CHECK(rc == SC_ECLOSED); sc_batch_release(b); break; }
    }
    bool done = false;
    CHECK(sc_pool_wait(p, -1, &done) == SC_EPYTHON && done);
    uint32_t op = 99;
    CHECK(sc_pool_error(p, &op) == SC_EPYTHON && op == 1);
    CHECK(sc_pool_stop(p) == SC_EPYTHON && sc_pool_get_state(p) == SC_POOL_STOPPED);
    /* nothing at or after the failing input got out: at most 2 output rows per earlier input */
    CHECK(ss.n <= 2 * 3000);
    sc_pool_destroy(p);
    CHECK(sc_batch_pool_in_use(st.bp) == 0);
    CHECK(sc_batch_pool_destroy(st.bp) == SC_OK);
    free(ss.rows);
    printf("  operator error (workers=%u): run stopped, SC_EPYTHON reported for op 1, rc=%s, no leaks\n",
           workers, rc == SC_OK ? "push ok" : "push closed");
}

typedef struct { sc_pool *p; sc_batch_pool *bp; _Atomic int pushed; _Atomic int stop; } src_arg;
static void *source(void *v) {
    src_arg *a = v;
    for (uint64_t i = 0; !atomic_load(&a->stop); i++) {
        sc_batch *b;
        if (sc_batch_acquire(a->bp, &b) != SC_OK) { sched_yield(); i--; continue; }
        fill_input(b, i, i, 1);
        int rc;
        while ((rc = sc_pool_push(a->p, b, 1000000)) == SC_EFULL && !atomic_load(&a->stop)) {}
        if (rc != SC_OK) { sc_batch_release(b); break; }
        atomic_fetch_add(&a->pushed, 1);
    }
    return NULL;
}

/* pause / resume, then stop in the middle of an endless stream */
static void test_control(void) {
    pipe_state st = { .fail_at = -1 };
    sc_op_desc ops[5];
    sink_state ss;
    sc_pool *p = start_pipe(&st, ops, &ss, 3, 32, 512, 4000000);
    src_arg a = { .p = p, .bp = st.bp };
    atomic_init(&a.pushed, 0);
    atomic_init(&a.stop, 0);
    pthread_t t;
    pthread_create(&t, NULL, source, &a);
    struct timespec ms20 = { 0, 20 * 1000 * 1000 };
    nanosleep(&ms20, NULL);
    CHECK(sc_pool_pause(p) == SC_OK && sc_pool_get_state(p) == SC_POOL_PAUSED);
    nanosleep(&ms20, NULL); /* let in-flight slices end */
    bool done;
    CHECK(sc_pool_wait(p, 1000000, &done) == SC_OK && !done); /* times out: still running */
    CHECK(sc_pool_resume(p) == SC_OK);
    nanosleep(&ms20, NULL);
    CHECK(sc_pool_stop(p) == SC_OK); /* stop mid-stream: joins every worker */
    CHECK(sc_pool_get_state(p) == SC_POOL_STOPPED);
    atomic_store(&a.stop, 1);
    pthread_join(t, NULL);
    CHECK(ss.n > 0 && ss.n <= 2 * (uint64_t)atomic_load(&a.pushed)); /* flat-map: <= 2 rows per input */
    sc_pool_destroy(p); /* releases what was still inside */
    CHECK(sc_batch_pool_in_use(st.bp) == 0);
    CHECK(sc_batch_pool_destroy(st.bp) == SC_OK);
    printf("  pause/resume/stop mid-stream: %d pushed, %llu rows out before stop, threads joined, no leaks\n",
           atomic_load(&a.pushed), (unsigned long long)ss.n);
    free(ss.rows);
}

/* Idle workers park (no polling), a push wakes one, and close / stop wake every one. */
static bool wait_parked(sc_pool *p, uint32_t n) {
    struct timespec ms1 = { 0, 1000 * 1000 };
    for (int i = 0; i < 5000; i++) { /* up to ~5 s: parking takes microseconds */
        if (sc_pool_parked(p) == n) return true;
        nanosleep(&ms1, NULL);
    }
    return false;
}

/* The end of a run fed the 10 one-row batches test_park and test_expect push: closing the input
 * wakes every parked worker and finishes the run, its rows are a sequential run's, and nothing
 * leaks. */
static void end_ten_pushed(sc_pool *p, pipe_state *st, sink_state *ss) {
    CHECK(sc_pool_close_input(p) == SC_OK);
    bool done = false;
    CHECK(sc_pool_wait(p, 2000000000LL, &done) == SC_OK && done); /* close woke them: finished */
    CHECK(sc_pool_stop(p) == SC_OK && sc_pool_parked(p) == 0);
    int64_t want[64];
    CHECK(sequential(10, 1, want, 64) == ss->n && memcmp(want, ss->rows, ss->n * sizeof(int64_t)) == 0);
    sc_pool_destroy(p);
    CHECK(sc_batch_pool_in_use(st->bp) == 0);
    CHECK(sc_batch_pool_destroy(st->bp) == SC_OK);
    free(ss->rows);
}

static void test_park(void) {
    pipe_state st = { .fail_at = -1 };
    sc_op_desc ops[5];
    sink_state ss;
    sc_pool *p = start_pipe(&st, ops, &ss, 3, 16, 64, 1000);
    CHECK(wait_parked(p, 3)); /* nothing to do: every worker sleeps on the futex */
    for (uint64_t i = 0; i < 10; i++) {
        sc_batch *b;
        CHECK(sc_batch_acquire(st.bp, &b) == SC_OK);
        fill_input(b, i, i, 1);
        CHECK(sc_pool_push(p, b, -1) == SC_OK); /* wakes a worker; it runs, then parks again */
        CHECK(wait_parked(p, 3));
    }
    end_ten_pushed(p, &st, &ss);
    printf("  idle workers park between pushes; %llu rows out as a sequential run; close ended the run: ok\n", (unsigned long long)ss.n);
}

/* A pusher that says when its next batch is due (sc_pool_expect) has the idle workers up and
 * spinning for it instead of parked; a due time far ahead, or none, lets them park again. */
static void test_expect(void) {
    pipe_state st = { .fail_at = -1 };
    sc_op_desc ops[5];
    sink_state ss;
    sc_pool *p = start_pipe(&st, ops, &ss, 3, 16, 64, 1000);
    CHECK(wait_parked(p, 3));
    sc_pool_expect(p, sc_now_ns() + 10ull * 1000000000ull); /* ten seconds ahead: they park */
    CHECK(wait_parked(p, 3));
    /* a batch always due now: every worker ends up spinning for it (a parked one is up by its
     * park's timeout at the latest), and none parks while it stays due */
    bool up = false;
    struct timespec us10 = { 0, 10 * 1000 };
    for (int i = 0; i < 200000 && !up; i++) { /* up to a few seconds */
        sc_pool_expect(p, sc_now_ns());
        up = sc_pool_parked(p) == 0;
        nanosleep(&us10, NULL);
    }
    CHECK(up);
    sc_pool_expect(p, 0); /* nothing due: they park again */
    CHECK(wait_parked(p, 3));
    for (uint64_t i = 0; i < 10; i++) { /* and a batch pushed while one is expected runs as ever */
        sc_pool_expect(p, sc_now_ns());
        sc_batch *b;
        CHECK(sc_batch_acquire(st.bp, &b) == SC_OK);
        fill_input(b, i, i, 1);
        CHECK(sc_pool_push(p, b, -1) == SC_OK);
    }
    sc_pool_expect(p, 0);
    end_ten_pushed(p, &st, &ss);
    printf("  workers spin for a batch due now, park when none is due; %llu rows out as a sequential run: ok\n",
           (unsigned long long)ss.n);
}

/* sc_pool_spread: with at most one worker per allowed core, the workers' cores are disjoint
 * and together the allowed ones (a core's rank modulo the workers); with more workers than
 * cores, or STREAMCELL_SPREAD_WORKERS=0, every worker keeps the whole set. Cores past the
 * 64th are not looked at. */
static void test_spread(void) {
    cpu_set_t allowed;
    CHECK(sched_getaffinity(0, sizeof allowed, &allowed) == 0);
    uint64_t all = 0;
    int ncores = 0;
    for (int c = 0; c < 64; c++)
        if (CPU_ISSET(c, &allowed)) all |= 1ull << c, ncores++;
    for (uint32_t workers = 2; workers <= 3; workers++) {
        for (int off = 0; off < 2; off++) {
            if (off) setenv("STREAMCELL_SPREAD_WORKERS", "0", 1);
            pipe_state st = { .fail_at = -1 };
            sc_op_desc ops[5];
            sink_state ss;
            sc_pool *p = start_pipe(&st, ops, &ss, workers, 16, 64, 1000);
            sc_pool_spread(p);
            bool spread = !off && ncores >= (int)workers && CPU_COUNT(&allowed) <= 64;
            uint64_t seen = 0;
            for (uint32_t i = 0; i < workers; i++) {
                uint64_t m = sc_pool_worker_cpus(p, i);
                CHECK(m != 0 && (m & ~all) == 0);
                if (!spread) {
                    CHECK(m == all);
                    continue;
                }
                CHECK((m & seen) == 0); /* no core shared with an earlier worker */
                seen |= m;
                int rank = 0; /* each of its cores has rank i modulo the workers */
                for (int c = 0; c < 64; c++) {
                    if (!(all >> c & 1)) continue;
                    CHECK(((m >> c & 1) != 0) == (rank % (int)workers == (int)i));
                    rank++;
                }
            }
            if (spread) CHECK(seen == all);
            unsetenv("STREAMCELL_SPREAD_WORKERS");
            CHECK(sc_pool_close_input(p) == SC_OK);
            bool done = false;
            CHECK(sc_pool_wait(p, 2000000000LL, &done) == SC_OK && done);
            CHECK(sc_pool_stop(p) == SC_OK);
            sc_pool_destroy(p);
            CHECK(sc_batch_pool_destroy(st.bp) == SC_OK);
            free(ss.rows);
            printf("  %u workers on %d cores%s: %s\n", workers, ncores, off ? " (turned off)" : "",
                   spread ? "disjoint cores covering the allowed ones" : "each keeps every core");
        }
    }
}

/* batch layout and pool (exercised concurrently by every run above) */
static void test_batch(void) {
    const sc_col_type types[4] = { SC_COL_INT64, SC_COL_DOUBLE, SC_COL_BOOL, SC_COL_UTF8 };
    sc_batch_pool *bp;
    sc_col_type bad = (sc_col_type)9;
    CHECK(sc_batch_pool_create(&bp, &bad, 1, 4, 0, 1) == SC_EINVAL);
    CHECK(sc_batch_pool_create(&bp, types, 4, 10, 16, 2) == SC_OK);
    sc_batch *a, *b, *c;
    CHECK(sc_batch_acquire(bp, &a) == SC_OK && sc_batch_acquire(bp, &b) == SC_OK);
    CHECK(sc_batch_acquire(bp, &c) == SC_EFULL && sc_batch_pool_in_use(bp) == 2); /* bounded */
    CHECK(a->capacity == 10 && a->ncols == 4 && a->nrows == 0 && a->next == NULL);
    for (int64_t r = 0; r < 10; r++) {
        sc_batch_set_i64(a, 0, r, r * 10);
        sc_batch_set_f64(a, 1, r, r / 4.0);
        sc_batch_set_bool(a, 2, r, r % 3 == 0);
        if (r == 4) sc_batch_set_null(a, 3, r);
        else CHECK(sc_batch_set_utf8(a, 3, r, "ab", r < 8 ? 2 : 0) == SC_OK);
    }
    a->nrows = 10;
    CHECK(sc_batch_set_utf8(a, 3, 9, "0123456789abcdefg", 17) == SC_EFULL); /* 16 bytes per column */
    CHECK(sc_batch_set_utf8(a, 0, 0, "x", 1) == SC_ETYPE);
    for (int64_t r = 0; r < 10; r++) {
        CHECK(sc_batch_get_i64(a, 0, r) == r * 10 && sc_batch_get_f64(a, 1, r) == r / 4.0);
        CHECK(sc_batch_get_bool(a, 2, r) == (r % 3 == 0));
        int32_t len;
        const char *sv = sc_batch_get_utf8(a, 3, r, &len);
        CHECK(sc_batch_is_valid(a, 3, r) == (r != 4));
        CHECK(len == (r == 4 || r >= 8 ? 0 : 2) && (len == 0 || (sv[0] == 'a' && sv[1] == 'b')));
    }
    CHECK(a->cols[3].null_count == 1 && a->cols[3].offsets[10] == 14); /* Arrow offsets */
    a->next = b;
    sc_batch_release_chain(a);
    CHECK(sc_batch_pool_in_use(bp) == 0);
    CHECK(sc_batch_acquire(bp, &a) == SC_OK && a->nrows == 0 && sc_batch_is_valid(a, 3, 4)); /* reset */
    CHECK(sc_batch_pool_destroy(bp) == SC_EINTERNAL); /* one batch still out: reported */
    printf("  batch: int64/double/bool/utf8 columns, validity, Arrow offsets, bounded pool ok\n");
}

int main(void) {
    printf("test_pool\n");
    test_batch();
    uint64_t n = 20000 / SCALE_DIV;
    const config cfgs[] = {
        { 1, 64, SC_SCHED_CT, SC_REORDER_NONBLOCKING, SC_HQ_HYBRID, 8, 0, n },
        { 2, 64, SC_SCHED_CT, SC_REORDER_NONBLOCKING, SC_HQ_HYBRID, 1, 0, n },
        { 4, 4, SC_SCHED_CT, SC_REORDER_NONBLOCKING, SC_HQ_HYBRID, 1, 0, n },
        { 8, 2, SC_SCHED_CT, SC_REORDER_NONBLOCKING, SC_HQ_HYBRID, 8, 0, n / 2 },
        { 3, 1, SC_SCHED_CT, SC_REORDER_NONBLOCKING, SC_HQ_HYBRID, 1, 0, n / 4 },
        { 4, 16, SC_SCHED_QST, SC_REORDER_NONBLOCKING, SC_HQ_HYBRID, 1, 0, n },
        { 4, 16, SC_SCHED_LP, SC_REORDER_NONBLOCKING, SC_HQ_HYBRID, 8, 0, n },
        { 4, 16, SC_SCHED_ET, SC_REORDER_NONBLOCKING, SC_HQ_HYBRID, 1, 0, n },
        { 4, 16, SC_SCHED_CT, SC_REORDER_LOCKED, SC_HQ_HYBRID, 1, 0, n },
        { 4, 16, SC_SCHED_CT, SC_REORDER_NONBLOCKING, SC_HQ_PARTITIONED, 1, 0, n },
        { 3, 8, SC_SCHED_LP, SC_REORDER_LOCKED, SC_HQ_PARTITIONED, 8, 0, n / 2 },
        { 4, 8, SC_SCHED_CT, SC_REORDER_NONBLOCKING, SC_HQ_HYBRID, 1, 13, n },
    };
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) run_config(&cfgs[i]);
    test_error(1);
    test_error(4);
    test_control();
    test_park();
    test_expect();
    test_spread();
    return 0;
}
