// sources: runtime/ring.c
/* Stress tests for runtime/ring: MPMC and SPSC, tiny capacities, more threads than cores,
 * random delays; checks FIFO per producer, nothing lost, nothing duplicated, exact close. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "runtime/atomic_ext.h"
#include "runtime/ring.h"

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SCALE_DIV 8
#else
#define SCALE_DIV 1
#endif
#include "check.h"

static uint64_t rnd(uint64_t *s) { *s ^= *s << 13; *s ^= *s >> 7; *s ^= *s << 17; return *s; }
static void jitter(uint64_t *s) {
    uint64_t r = rnd(s);
    if ((r & 63) == 0) for (uint64_t i = (r >> 8) & 255; i; i--) sc_cpu_relax();
    else if ((r & 4095) == 1) sched_yield();
}

static void test_basic(void) {
    sc_ring *r;
    CHECK(sc_ring_create(&r, SC_RING_MPMC, 0) == SC_EINVAL);
    for (int kind = 0; kind < 2; kind++) {
        CHECK(sc_ring_create(&r, (sc_ring_kind)kind, 3) == SC_OK);
        CHECK(sc_ring_capacity(r) == 4);
        void *x;
        CHECK(sc_ring_try_pop(r, &x) == SC_EEMPTY);
        CHECK(sc_ring_try_push(r, NULL) == SC_EINVAL);
        for (uintptr_t i = 1; i <= 4; i++) CHECK(sc_ring_try_push(r, (void *)i) == SC_OK);
        CHECK(sc_ring_try_push(r, (void *)5) == SC_EFULL);
        CHECK(sc_ring_size(r) == 4);
        CHECK(sc_ring_try_pop(r, &x) == SC_OK && x == (void *)1);
        CHECK(sc_ring_try_push(r, (void *)5) == SC_OK);
        sc_ring_close(r);
        CHECK(sc_ring_is_closed(r));
        CHECK(sc_ring_try_push(r, (void *)6) == SC_ECLOSED);
        for (uintptr_t i = 2; i <= 5; i++) CHECK(sc_ring_try_pop(r, &x) == SC_OK && x == (void *)i);
        CHECK(sc_ring_try_pop(r, &x) == SC_ECLOSED);
        sc_ring_destroy(r);
    }
}

/* ---- MPMC stress ---- */
#define NPROD 3
#define NCONS 3
typedef struct {
    sc_ring *r;
    uint64_t per_prod;
    int id;
    uint64_t pushed;         /* producer: items successfully pushed */
    uint64_t popped[NPROD];  /* consumer: items popped per producer */
    uint64_t sum[NPROD];
    _Atomic uint8_t *seen;   /* [NPROD * per_prod] */
    int stop_on_close;
} mp_arg;

static void *mp_producer(void *p) {
    mp_arg *a = p;
    uint64_t s = 0x9E3779B97F4A7C15ull * (uint64_t)(a->id + 1);
    for (uint64_t i = 0; i < a->per_prod; i++) {
        void *item = (void *)(uintptr_t)(((uint64_t)a->id << 40) | (i + 1));
        sc_backoff bo;
        sc_backoff_reset(&bo);
        int rc;
        while ((rc = sc_ring_try_push(a->r, item)) == SC_EFULL) sc_backoff_wait(&bo, 20000);
        if (rc == SC_ECLOSED) { CHECK(a->stop_on_close); break; }
        CHECK(rc == SC_OK);
        a->pushed++;
        jitter(&s);
    }
    return NULL;
}

static void *mp_consumer(void *p) {
    mp_arg *a = p;
    uint64_t s = 0xD1B54A32D192ED03ull * (uint64_t)(a->id + 7);
    uint64_t last[NPROD] = {0};
    sc_backoff bo;
    sc_backoff_reset(&bo);
    for (;;) {
        void *item;
        int rc = sc_ring_try_pop(a->r, &item);
        if (rc == SC_ECLOSED) break;
        if (rc == SC_EEMPTY) { sc_backoff_wait(&bo, 20000); continue; }
        CHECK(rc == SC_OK);
        sc_backoff_reset(&bo);
        uint64_t v = (uint64_t)(uintptr_t)item, prod = v >> 40, seq = v & ((1ull << 40) - 1);
        CHECK(prod < NPROD && seq >= 1 && seq <= a->per_prod);
        CHECK(seq > last[prod]); /* FIFO per producer, as seen by any one consumer */
        last[prod] = seq;
        CHECK(atomic_fetch_add(&a->seen[prod * a->per_prod + seq - 1], 1) == 0); /* no duplicate */
        a->popped[prod]++;
        a->sum[prod] += seq;
        jitter(&s);
    }
    return NULL;
}

static void run_mpmc(uint32_t cap, uint64_t per_prod, int close_early) {
    sc_ring *r;
    CHECK(sc_ring_create(&r, SC_RING_MPMC, cap) == SC_OK);
    _Atomic uint8_t *seen = calloc(NPROD * per_prod, 1);
    mp_arg prod[NPROD], cons[NCONS];
    pthread_t tp[NPROD], tc[NCONS];
    for (int i = 0; i < NPROD; i++) {
        prod[i] = (mp_arg){ .r = r, .per_prod = per_prod, .id = i, .seen = seen, .stop_on_close = close_early };
        pthread_create(&tp[i], NULL, mp_producer, &prod[i]);
    }
    for (int i = 0; i < NCONS; i++) {
        cons[i] = (mp_arg){ .r = r, .per_prod = per_prod, .id = i, .seen = seen };
        pthread_create(&tc[i], NULL, mp_consumer, &cons[i]);
    }
    if (close_early) {
        struct timespec ts = { 0, 20 * 1000 * 1000 };
        nanosleep(&ts, NULL);
        sc_ring_close(r); /* races with pushes: every successful push must still be popped */
    }
    for (int i = 0; i < NPROD; i++) pthread_join(tp[i], NULL);
    if (!close_early) sc_ring_close(r);
    for (int i = 0; i < NCONS; i++) pthread_join(tc[i], NULL);
    uint64_t total = 0;
    for (int p = 0; p < NPROD; p++) {
        uint64_t popped = 0, sum = 0;
        for (int c = 0; c < NCONS; c++) { popped += cons[c].popped[p]; sum += cons[c].sum[p]; }
        CHECK(popped == prod[p].pushed); /* nothing lost */
        /* a producer's pushes are a prefix 1..pushed */
        CHECK(sum == prod[p].pushed * (prod[p].pushed + 1) / 2);
        if (!close_early) CHECK(popped == per_prod);
        total += popped;
    }
    CHECK(sc_ring_size(r) == 0);
    printf("  mpmc cap=%u producers=%d consumers=%d items=%llu%s ok\n", cap, NPROD, NCONS,
           (unsigned long long)total, close_early ? " (close raced with pushes)" : "");
    free(seen);
    sc_ring_destroy(r);
}

/* ---- SPSC stress, with the producer role handed between two threads ---- */
typedef struct {
    sc_ring *r;
    uint64_t n;
    pthread_mutex_t *role; /* held while acting as the producer */
    _Atomic uint64_t *next_item;
} sp_arg;

static void *sp_producer(void *p) {
    sp_arg *a = p;
    uint64_t s = (uint64_t)(uintptr_t)p | 1;
    for (;;) {
        pthread_mutex_lock(a->role);
        uint64_t i = atomic_load(a->next_item);
        int done = i > a->n;
        for (int k = 0; k < 64 && !done; k++) {
            int rc = sc_ring_try_push(a->r, (void *)(uintptr_t)i);
            if (rc == SC_EFULL) { sc_cpu_relax(); continue; }
            CHECK(rc == SC_OK);
            i++;
            done = i > a->n;
            jitter(&s);
        }
        atomic_store(a->next_item, i);
        if (done && !sc_ring_is_closed(a->r)) sc_ring_close(a->r); /* by the producer side */
        pthread_mutex_unlock(a->role);
        if (done) return NULL;
        sched_yield();
    }
}

static void run_spsc(uint32_t cap, uint64_t n) {
    sc_ring *r;
    CHECK(sc_ring_create(&r, SC_RING_SPSC, cap) == SC_OK);
    pthread_mutex_t role = PTHREAD_MUTEX_INITIALIZER;
    _Atomic uint64_t next_item = 1;
    sp_arg a = { r, n, &role, &next_item };
    pthread_t t1, t2;
    pthread_create(&t1, NULL, sp_producer, &a);
    pthread_create(&t2, NULL, sp_producer, &a);
    uint64_t expect = 1, s = 42;
    sc_backoff bo;
    sc_backoff_reset(&bo);
    for (;;) {
        void *item;
        int rc = sc_ring_try_pop(r, &item);
        if (rc == SC_ECLOSED) break;
        if (rc == SC_EEMPTY) { sc_backoff_wait(&bo, 20000); continue; }
        sc_backoff_reset(&bo);
        CHECK((uint64_t)(uintptr_t)item == expect);
        expect++;
        jitter(&s);
    }
    CHECK(expect == n + 1);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    printf("  spsc cap=%u items=%llu (producer role handed between 2 threads) ok\n", cap, (unsigned long long)n);
    sc_ring_destroy(r);
}

int main(void) {
    test_basic();
    printf("test_ring\n  basic ok\n");
    run_mpmc(2, 400000 / SCALE_DIV, 0);
    run_mpmc(64, 400000 / SCALE_DIV, 0);
    run_mpmc(4, 400000 / SCALE_DIV, 1);
    run_spsc(2, 1000000 / SCALE_DIV);
    run_spsc(1024, 2000000 / SCALE_DIV);
    return 0;
}
