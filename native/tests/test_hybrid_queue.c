// sources: runtime/hybrid_queue.c runtime/ring.c runtime/reorder.c
/* Stress tests for runtime/hybrid_queue (hybrid and partitioned variants): one producer adds
 * keyed items (uniform and Zipf-skewed keys, few and many partitions, tiny capacities) while
 * more workers than cores consume with random delays. Checks: no two workers in a partition
 * at once, per-key arrival order, every item exactly once; then the same through a reorder
 * buffer, checking the full arrival order is restored. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "runtime/atomic_ext.h"
#include "runtime/hybrid_queue.h"
#include "runtime/reorder.h"

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SCALE_DIV 8
#else
#define SCALE_DIV 1
#endif
#include "check.h"

static uint64_t rnd(uint64_t *s) { *s ^= *s << 13; *s ^= *s >> 7; *s ^= *s << 17; return *s; }

#define NKEYS 1000
typedef struct { uint64_t serial; uint32_t key; } item_t;

typedef struct {
    sc_hq *q;
    sc_reorder *r;          /* optional: outputs go through the reorder buffer */
    uint32_t nparts;
    item_t *items;
    uint64_t n;
    _Atomic int producer_done;
    _Atomic int64_t *busy;  /* per partition: workers inside (must stay <= 1) */
    int64_t *last_serial;   /* per key: plain, protected by partition exclusivity */
    _Atomic uint8_t *seen;
    _Atomic uint64_t processed;
    uint64_t emit_expect;   /* emitter-private */
} ctx_t;

static int process(void *vc, uint32_t p, void *vitem) {
    ctx_t *c = vc;
    item_t *it = vitem;
    CHECK(p == it->key % c->nparts);
    CHECK(atomic_fetch_add(&c->busy[p], 1) == 0); /* nobody else in this partition */
    CHECK(c->last_serial[it->key] < (int64_t)it->serial); /* per-key arrival order */
    c->last_serial[it->key] = (int64_t)it->serial;
    CHECK(atomic_fetch_add(&c->seen[it->serial], 1) == 0);
    uint64_t s = it->serial * 0x9E3779B97F4A7C15ull | 1, r = rnd(&s);
    if ((r & 31) == 0) for (uint64_t i = (r >> 8) & 511; i; i--) sc_cpu_relax();
    if ((r & 4095) == 7) sched_yield();
    atomic_fetch_sub(&c->busy[p], 1);
    atomic_fetch_add(&c->processed, 1);
    if (c->r) {
        sc_backoff bo;
        sc_backoff_reset(&bo);
        while (sc_reorder_send(c->r, it->serial, it) == SC_EFULL) sc_backoff_wait(&bo, 10000);
    }
    return SC_OK;
}

static int emit(void *vc, uint64_t serial, void **item) {
    ctx_t *c = vc;
    CHECK(serial == c->emit_expect && ((item_t *)*item)->serial == serial);
    c->emit_expect++;
    return SC_OK;
}

typedef struct { ctx_t *c; uint32_t id; } warg;

static void *worker(void *p) {
    warg *w = p;
    ctx_t *c = w->c;
    sc_backoff bo;
    sc_backoff_reset(&bo);
    for (;;) {
        uint32_t done = 0;
        CHECK(sc_hq_consume(c->q, w->id, 16, process, c, &done) == SC_OK);
        if (done) { sc_backoff_reset(&bo); continue; }
        if (atomic_load(&c->producer_done) && atomic_load(&c->processed) == c->n) break;
        sc_backoff_wait(&bo, 20000);
    }
    return NULL;
}

/* keys: Zipf(s) over NKEYS keys by inverse CDF (s = 0 gives uniform) */
static void make_keys(item_t *items, uint64_t n, double s, uint64_t seed) {
    double *cdf = malloc(NKEYS * sizeof *cdf), acc = 0;
    for (int k = 0; k < NKEYS; k++) { acc += 1.0 / pow(k + 1, s); cdf[k] = acc; }
    for (uint64_t i = 0; i < n; i++) {
        double u = (double)(rnd(&seed) >> 11) / 9007199254740992.0 * acc;
        int lo = 0, hi = NKEYS - 1;
        while (lo < hi) { int mid = (lo + hi) / 2; if (cdf[mid] < u) lo = mid + 1; else hi = mid; }
        items[i].serial = i;
        items[i].key = (uint32_t)lo;
    }
    free(cdf);
}

static void run(sc_hq_kind kind, uint32_t parts_or_lanes, uint32_t cap, uint32_t pcap, int nworkers,
                uint64_t n, double zipf, int with_reorder) {
    ctx_t c = { .n = n };
    sc_hq_config cfg = { .kind = kind, .partitions = parts_or_lanes, .lanes = parts_or_lanes,
                         .capacity = cap, .partition_capacity = pcap };
    CHECK(sc_hq_create(&c.q, &cfg) == SC_OK);
    c.nparts = kind == SC_HQ_HYBRID ? parts_or_lanes : parts_or_lanes;
    c.items = malloc(n * sizeof(item_t));
    make_keys(c.items, n, zipf, 99 + n);
    c.busy = calloc(c.nparts, sizeof(*c.busy));
    c.last_serial = malloc(NKEYS * sizeof(int64_t));
    for (int k = 0; k < NKEYS; k++) c.last_serial[k] = -1;
    c.seen = calloc(n, 1);
    atomic_init(&c.processed, 0);
    atomic_init(&c.producer_done, 0);
    if (with_reorder) CHECK(sc_reorder_create(&c.r, SC_REORDER_NONBLOCKING, 4096, 0, emit, &c) == SC_OK);
    pthread_t t[16];
    warg w[16];
    uint64_t t0 = sc_now_ns();
    for (int i = 0; i < nworkers; i++) {
        w[i] = (warg){ &c, (uint32_t)i };
        pthread_create(&t[i], NULL, worker, &w[i]);
    }
    uint64_t s = 5;
    for (uint64_t i = 0; i < n; i++) {
        sc_backoff bo;
        sc_backoff_reset(&bo);
        /* with a reorder buffer, admit only serials inside its window (credit) */
        while (c.r && i - sc_reorder_next(c.r) >= sc_reorder_window(c.r)) sc_backoff_wait(&bo, 10000);
        int rc;
        while ((rc = sc_hq_add(c.q, c.items[i].key % c.nparts, &c.items[i])) == SC_EFULL)
            sc_backoff_wait(&bo, 10000);
        CHECK(rc == SC_OK);
        if ((rnd(&s) & 1023) == 0) sched_yield();
    }
    atomic_store(&c.producer_done, 1);
    for (int i = 0; i < nworkers; i++) pthread_join(t[i], NULL);
    double ms = (double)(sc_now_ns() - t0) / 1e6;
    for (uint64_t i = 0; i < n; i++) CHECK(c.seen[i] == 1);
    CHECK(sc_hq_size(c.q) == 0);
    if (c.r) CHECK(c.emit_expect == n && sc_reorder_next(c.r) == n);
    sc_hq_close(c.q);
    CHECK(sc_hq_add(c.q, 0, &c.items[0]) == SC_ECLOSED);
    printf("  %-11s %s=%-4u cap=%-4u pcap=%-3u workers=%d items=%llu zipf=%.1f%s ok (%.0f ms)\n",
           kind == SC_HQ_HYBRID ? "hybrid" : "partitioned", kind == SC_HQ_HYBRID ? "parts" : "lanes",
           parts_or_lanes, cap, pcap, nworkers, (unsigned long long)n, zipf,
           with_reorder ? " +reorder: arrival order restored" : "", ms);
    sc_reorder_destroy(c.r, NULL, NULL);
    sc_hq_destroy(c.q, NULL, NULL);
    free(c.items); free((void *)c.busy); free(c.last_serial); free((void *)c.seen);
}

static int count_drop;
static void drop(void *ctx, void *item) { count_drop++; }
static int fail_fn(void *ctx, uint32_t p, void *item) { return SC_EPYTHON; }

static void test_basic(void) {
    sc_hq *q;
    sc_hq_config bad = { .kind = SC_HQ_HYBRID, .partitions = 0, .capacity = 4 };
    CHECK(sc_hq_create(&q, &bad) == SC_EINVAL);
    sc_hq_config cfg = { .kind = SC_HQ_HYBRID, .partitions = 4, .capacity = 4, .partition_capacity = 2 };
    CHECK(sc_hq_create(&q, &cfg) == SC_OK);
    item_t it[8];
    CHECK(sc_hq_add(q, 1, NULL) == SC_EINVAL);
    CHECK(sc_hq_add(q, 1, &it[0]) == SC_OK && sc_hq_add(q, 1, &it[1]) == SC_OK);
    CHECK(sc_hq_add(q, 5, &it[2]) == SC_EFULL); /* partition 1 holds 2 already */
    CHECK(sc_hq_add(q, 2, &it[2]) == SC_OK && sc_hq_add(q, 3, &it[3]) == SC_OK);
    CHECK(sc_hq_add(q, 0, &it[4]) == SC_EFULL); /* total capacity */
    CHECK(sc_hq_size(q) == 4 && sc_hq_max_parallelism(q) == 4);
    uint32_t done = 99;
    CHECK(sc_hq_consume(q, 0, 8, fail_fn, NULL, &done) == SC_EPYTHON && done == 1);
    sc_hq_destroy(q, drop, NULL);
    CHECK(count_drop == 3);
}

int main(void) {
    printf("test_hybrid_queue\n");
    test_basic();
    printf("  basic ok\n");
    uint64_t n = 300000 / SCALE_DIV;
    run(SC_HQ_HYBRID, 256, 64, 8, 5, n, 0.0, 0);
    run(SC_HQ_HYBRID, 256, 64, 8, 5, n, 1.2, 0);
    run(SC_HQ_HYBRID, 3, 4, 2, 4, n / 2, 1.2, 0);     /* tiny: few partitions, tiny queues */
    run(SC_HQ_HYBRID, 1, 2, 1, 3, n / 4, 0.0, 0);     /* one partition: fully serial */
    run(SC_HQ_PARTITIONED, 4, 16, 0, 4, n, 1.2, 0);
    run(SC_HQ_PARTITIONED, 2, 2, 0, 3, n / 4, 0.0, 0); /* 3 workers share 2 lanes */
    run(SC_HQ_HYBRID, 128, 256, 32, 4, n, 1.2, 1);
    run(SC_HQ_PARTITIONED, 4, 64, 0, 4, n / 2, 0.0, 1);
    return 0;
}
