/* Micro-benchmark of the runtime's concurrent structures (ablations of seed 003 §7.2, §7.3).
 *
 *   1. reorder: non-blocking (Fig. 4) vs lock-based (Fig. 2): W workers take serials from a
 *      shared counter, do `work` ns of busy work, and send to the reorder buffer, whose emit
 *      costs `emit` ns (standing for the push into the next worklist).
 *   2. keyed queue: hybrid (Fig. 7, 256 partitions) vs partitioned (lanes = workers): one
 *      producer adds keyed items (uniform or Zipf-1.2 over 10,000 keys) with a serial credit
 *      of `window` items; W workers process each item (busy work + per-key state) and send the
 *      result through a non-blocking reorder buffer; throughput counts items emitted in order.
 * Ratios are measured in the same run; each figure is the best of 3 repetitions, the two
 * variants alternating. Waiting threads spin briefly, then yield (preemption-tolerant).
 *
 * Build and run (a unity build: the runtime sources are included below):
 *   cc -O2 -pthread -Inative bench/bench_runtime_structures.c -o build/bench_rs -lm && build/bench_rs
 * Options: bench_rs [seconds_per_measurement=0.3] [workers=2]
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "runtime/hybrid_queue.c"
#include "runtime/reorder.c"
#include "runtime/ring.c"

static double g_seconds = 0.3;

static uint64_t rnd(uint64_t *s) { *s ^= *s << 13; *s ^= *s >> 7; *s ^= *s << 17; return *s; }

/* wait politely: a worker preempted while holding the next serial stalls the window, so
 * waiters spin briefly and then yield the core to it */
static void wait_step(unsigned *k) {
    if ((*k)++ < 64) sc_cpu_relax();
    else sched_yield();
}

static double g_spins_per_ns;
static void busy(uint64_t ns) {
    uint64_t n = (uint64_t)((double)ns * g_spins_per_ns);
    for (volatile uint64_t i = 0; i < n; i++) {
    }
}
static void calibrate(void) {
    g_spins_per_ns = 1;
    uint64_t t0 = sc_now_ns();
    busy(20000000);
    g_spins_per_ns = 20000000.0 / (double)(sc_now_ns() - t0);
}

/* ---------------- 1. reorder ---------------- */
typedef struct {
    sc_reorder *r;
    _Atomic uint64_t next;
    _Atomic int stop;
    uint64_t work_ns, emit_ns;
    uint64_t emitted, checksum;
} ro_bench;

static int ro_emit(void *ctx, uint64_t serial, void **item) {
    ro_bench *b = ctx;
    if (b->emit_ns) busy(b->emit_ns); /* e.g. pushing into the next worklist */
    b->emitted++;
    b->checksum += serial ^ (uint64_t)(uintptr_t)*item;
    return SC_OK;
}

static void *ro_worker(void *v) {
    ro_bench *b = v;
    while (!atomic_load_explicit(&b->stop, memory_order_relaxed)) {
        uint64_t t = atomic_fetch_add_explicit(&b->next, 1, memory_order_relaxed);
        busy(b->work_ns);
        unsigned k = 0;
        while (sc_reorder_send(b->r, t, (void *)(uintptr_t)(t | 2)) == SC_EFULL) wait_step(&k);
    }
    return NULL;
}

static double run_reorder_once(sc_reorder_kind kind, int workers, uint64_t work_ns, uint64_t emit_ns) {
    double best = 0;
    for (int rep = 0; rep < 1; rep++) {
        ro_bench b = { .work_ns = work_ns, .emit_ns = emit_ns };
        atomic_init(&b.next, 0);
        atomic_init(&b.stop, 0);
        if (sc_reorder_create(&b.r, kind, 1024, 0, ro_emit, &b)) abort();
        pthread_t t[64];
        uint64_t t0 = sc_now_ns();
        for (int i = 0; i < workers; i++) pthread_create(&t[i], NULL, ro_worker, &b);
        struct timespec ts = { (time_t)g_seconds, (long)((g_seconds - (double)(time_t)g_seconds) * 1e9) };
        nanosleep(&ts, NULL);
        atomic_store(&b.stop, 1);
        for (int i = 0; i < workers; i++) pthread_join(t[i], NULL);
        sc_reorder_drain(b.r);
        double secs = (double)(sc_now_ns() - t0) / 1e9;
        double rate = (double)b.emitted / secs;
        if (rate > best) best = rate;
        sc_reorder_destroy(b.r, NULL, NULL);
    }
    return best;
}

/* ---------------- 2. hybrid vs partitioned ---------------- */
#define NKEYS 10000
#define WINDOW 1024
typedef struct { uint64_t serial; uint32_t key; } kitem;

typedef struct {
    sc_hq *q;
    sc_reorder *r;
    kitem *items;
    uint32_t *keys;
    uint64_t nkeys_seq;
    int64_t state[NKEYS];
    _Atomic int stop;
    uint64_t work_ns;
    uint64_t emitted;
    uint32_t parts;
} kq_bench;

static int kq_emit(void *ctx, uint64_t serial, void **item) {
    ((kq_bench *)ctx)->emitted++;
    return SC_OK;
}

static int kq_process(void *ctx, uint32_t p, void *v) {
    kq_bench *b = ctx;
    kitem *it = v;
    busy(b->work_ns);
    b->state[it->key] += (int64_t)it->serial; /* exclusive per partition */
    unsigned k = 0;
    while (sc_reorder_send(b->r, it->serial, it) == SC_EFULL) wait_step(&k);
    return SC_OK;
}

typedef struct { kq_bench *b; uint32_t id; } kq_warg;
static void *kq_worker(void *v) {
    kq_warg *w = v;
    unsigned k = 0;
    while (!atomic_load_explicit(&w->b->stop, memory_order_relaxed)) {
        uint32_t n = 0;
        sc_hq_consume(w->b->q, w->id, 64, kq_process, w->b, &n);
        if (!n) wait_step(&k);
        else k = 0;
    }
    return NULL;
}
static void *kq_producer(void *v) {
    kq_bench *b = v;
    uint64_t i = 0;
    unsigned k = 0;
    while (!atomic_load_explicit(&b->stop, memory_order_relaxed)) {
        if (i - sc_reorder_next(b->r) >= WINDOW) { wait_step(&k); continue; } /* credit */
        kitem *it = &b->items[i % (WINDOW * 2)];
        it->serial = i;
        it->key = b->keys[i % b->nkeys_seq];
        if (sc_hq_add(b->q, it->key % b->parts, it) == SC_OK) { i++; k = 0; }
        else wait_step(&k);
    }
    return NULL;
}

static uint32_t *make_keys(uint64_t n, double s) {
    uint32_t *keys = malloc(n * sizeof *keys);
    double *cdf = malloc(NKEYS * sizeof *cdf), acc = 0;
    for (int k = 0; k < NKEYS; k++) { acc += s > 0 ? 1.0 / pow(k + 1, s) : 1.0; cdf[k] = acc; }
    uint64_t seed = 12345;
    for (uint64_t i = 0; i < n; i++) {
        double u = (double)(rnd(&seed) >> 11) / 9007199254740992.0 * acc;
        int lo = 0, hi = NKEYS - 1;
        while (lo < hi) { int mid = (lo + hi) / 2; if (cdf[mid] < u) lo = mid + 1; else hi = mid; }
        /* scatter ranks over the key space so hot keys do not share a partition by rank */
        keys[i] = (uint32_t)(((uint64_t)lo * 2654435761u) % NKEYS);
    }
    free(cdf);
    return keys;
}

static double run_keyed_once(sc_hq_kind kind, int workers, uint32_t *keys, uint64_t nkeys_seq, uint64_t work_ns) {
    double best = 0;
    for (int rep = 0; rep < 1; rep++) {
        kq_bench *b = calloc(1, sizeof *b);
        b->keys = keys;
        b->nkeys_seq = nkeys_seq;
        b->work_ns = work_ns;
        b->items = calloc(WINDOW * 2, sizeof(kitem));
        atomic_init(&b->stop, 0);
        sc_hq_config cfg = { .kind = kind, .partitions = 256, .lanes = (uint32_t)workers, .capacity = WINDOW,
                             .partition_capacity = WINDOW };
        b->parts = kind == SC_HQ_HYBRID ? 256 : (uint32_t)workers;
        if (sc_hq_create(&b->q, &cfg) || sc_reorder_create(&b->r, SC_REORDER_NONBLOCKING, WINDOW, 0, kq_emit, b)) abort();
        pthread_t tp, tw[64];
        kq_warg wa[64];
        uint64_t t0 = sc_now_ns();
        pthread_create(&tp, NULL, kq_producer, b);
        for (int i = 0; i < workers; i++) { wa[i] = (kq_warg){ b, (uint32_t)i }; pthread_create(&tw[i], NULL, kq_worker, &wa[i]); }
        struct timespec ts = { (time_t)g_seconds, (long)((g_seconds - (double)(time_t)g_seconds) * 1e9) };
        nanosleep(&ts, NULL);
        uint64_t emitted = __atomic_load_n(&b->emitted, __ATOMIC_RELAXED); /* racy read is fine for a rate */
        double secs = (double)(sc_now_ns() - t0) / 1e9;
        atomic_store(&b->stop, 1);
        pthread_join(tp, NULL);
        for (int i = 0; i < workers; i++) pthread_join(tw[i], NULL);
        double rate = (double)emitted / secs;
        if (rate > best) best = rate;
        sc_hq_destroy(b->q, NULL, NULL);
        sc_reorder_destroy(b->r, NULL, NULL);
        free(b->items);
        free(b);
    }
    return best;
}

/* best of 3, the two variants alternating so that load changes hit both alike */
static void pair_reorder(int workers, uint64_t work_ns, uint64_t emit_ns, double *nb, double *lk) {
    *nb = *lk = 0;
    for (int rep = 0; rep < 3; rep++) {
        double a = run_reorder_once(SC_REORDER_NONBLOCKING, workers, work_ns, emit_ns);
        double b = run_reorder_once(SC_REORDER_LOCKED, workers, work_ns, emit_ns);
        if (a > *nb) *nb = a;
        if (b > *lk) *lk = b;
    }
}
static void pair_keyed(int workers, uint32_t *keys, uint64_t n, uint64_t work_ns, double *hy, double *pa) {
    *hy = *pa = 0;
    for (int rep = 0; rep < 3; rep++) {
        double a = run_keyed_once(SC_HQ_HYBRID, workers, keys, n, work_ns);
        double b = run_keyed_once(SC_HQ_PARTITIONED, workers, keys, n, work_ns);
        if (a > *hy) *hy = a;
        if (b > *pa) *pa = b;
    }
}

int main(int argc, char **argv) {
    if (argc > 1) g_seconds = atof(argv[1]);
    int workers = argc > 2 ? atoi(argv[2]) : 2;
    calibrate();
    printf("bench_runtime_structures: %d workers, best of 3 x %.2fs per figure (items/s, M = 1e6)\n", workers, g_seconds);

    printf("\n1. reorder buffer, window 1024: non-blocking (Fig. 4) vs lock-based (Fig. 2)\n");
    printf("   %-34s %14s %14s %8s\n", "work / emit per item, threads", "non-blocking", "lock-based", "ratio");
    const uint64_t works[][2] = { { 0, 0 }, { 100, 0 }, { 1000, 0 }, { 1000, 100 }, { 2000, 500 } };
    const int wk[] = { workers, workers * 2 };
    for (size_t wi = 0; wi < 2; wi++)
        for (size_t i = 0; i < sizeof works / sizeof works[0]; i++) {
            double nb, lk;
            pair_reorder(wk[wi], works[i][0], works[i][1], &nb, &lk);
            char label[64];
            snprintf(label, sizeof label, "%4llu ns / %3llu ns, %d threads", (unsigned long long)works[i][0],
                     (unsigned long long)works[i][1], wk[wi]);
            printf("   %-34s %12.2f M %12.2f M %7.2fx\n", label, nb / 1e6, lk / 1e6, nb / lk);
        }

    printf("\n2. keyed operator: hybrid queue (256 partitions) vs partitioned queue (%d lanes), + reorder\n", workers);
    printf("   %-24s %14s %14s %8s\n", "keys, work per item", "hybrid", "partitioned", "ratio");
    const uint64_t nseq = 1 << 20;
    uint32_t *uni = make_keys(nseq, 0.0), *zipf = make_keys(nseq, 1.2);
    const uint64_t kworks[] = { 200, 2000 };
    for (size_t i = 0; i < 2; i++) {
        double hu, pu, hz, pz;
        pair_keyed(workers, uni, nseq, kworks[i], &hu, &pu);
        pair_keyed(workers, zipf, nseq, kworks[i], &hz, &pz);
        printf("   uniform,  %4llu ns         %12.2f M %12.2f M %7.2fx\n", (unsigned long long)kworks[i], hu / 1e6, pu / 1e6, hu / pu);
        printf("   zipf-1.2, %4llu ns         %12.2f M %12.2f M %7.2fx\n", (unsigned long long)kworks[i], hz / 1e6, pz / 1e6, hz / pz);
        printf("   zipf / uniform             %13.2f  %13.2f\n", hz / hu, pz / pu);
    }
    free(uni);
    free(zipf);
    return 0;
}
