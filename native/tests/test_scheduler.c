// sources: runtime/scheduler.c
/* Tests for runtime/scheduler: each heuristic's choice on hand-built pipelines (CT, QST, LP,
 * ET as in Prasaad et al. §6), operator-kind limits, quota from the measured cost, and a concurrent
 * stress where more workers than cores acquire/release grants while producers change queue
 * sizes: a stateful operator never has two workers, no operator exceeds its maximum, and the
 * grant hand-off orders a single-consumer state (checked by TSan). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "runtime/atomic_ext.h"
#include "runtime/scheduler.h"

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SCALE_DIV 8
#else
#define SCALE_DIV 1
#endif
#include "check.h"

static sc_sched_view V(int64_t q, double c, double s, uint32_t w, uint32_t m, uint64_t tw) {
    return (sc_sched_view){ q, c, s, w, m, tw };
}

static void test_heuristics(void) {
    sc_sched_config cfg = { .slice_ns = 1000, .qst_capacity = 100 };
    sc_sched_view v[4];
    /* nothing schedulable */
    v[0] = V(0, 10, 1, 0, 4, 0); v[1] = V(5, 10, 1, 1, 1, 0);
    for (int p = 0; p < 4; p++) { cfg.policy = (sc_sched_policy)p; CHECK(sc_sched_choose(&cfg, v, 2) == -1); }

    /* LP: latest schedulable */
    cfg.policy = SC_SCHED_LP;
    v[0] = V(5, 10, 1, 0, 4, 0); v[1] = V(5, 10, 1, 0, 4, 0); v[2] = V(0, 10, 1, 0, 4, 0); v[3] = V(3, 10, 1, 1, 1, 0);
    CHECK(sc_sched_choose(&cfg, v, 4) == 1);

    /* ET: highest I*c/(w+1); an op at its max is excluded */
    cfg.policy = SC_SCHED_ET;
    v[0] = V(100, 10, 1, 0, 4, 0);  /* 1000 */
    v[1] = V(10, 500, 1, 1, 4, 0);  /* 2500 */
    v[2] = V(50, 100, 1, 1, 1, 0);  /* at max */
    v[3] = V(30, 100, 1, 0, 1, 0);  /* 3000 */
    CHECK(sc_sched_choose(&cfg, v, 4) == 3);
    v[3].queued = 10;               /* 1000 */
    CHECK(sc_sched_choose(&cfg, v, 4) == 1);

    /* QST: thresholds T_i = C*cs_i/sum(cs); selectivities 0.5, 1, 1 -> cs = .5,.5,.5, T = 33.3 */
    cfg.policy = SC_SCHED_QST;
    v[0] = V(10, 10, 0.5, 0, 4, 0); v[1] = V(40, 10, 1, 0, 4, 0); v[2] = V(10, 10, 1, 0, 4, 0);
    CHECK(sc_sched_choose(&cfg, v, 3) == 1);  /* op0's output (40) is over its threshold; op1's (10) is not */
    v[1].queued = 20;
    CHECK(sc_sched_choose(&cfg, v, 3) == 0);  /* earliest under threshold */
    v[1].queued = 40; v[2].queued = 40;
    CHECK(sc_sched_choose(&cfg, v, 3) == 2);  /* the last op's output is the sink: never throttled */
    v[2].queued = 0; v[1].workers = 4;
    CHECK(sc_sched_choose(&cfg, v, 3) == 0); /* op0 throttled, op1 full, op2 empty: LP fallback */
    /* fallback to LP when every output is at its threshold */
    v[0] = V(10, 10, 1, 0, 4, 0); v[1] = V(1000, 10, 1, 4, 4, 0); v[2] = V(0, 10, 1, 0, 4, 0);
    CHECK(sc_sched_choose(&cfg, v, 3) == 0);

    /* CT: lowest (Tw + w*s) / (c * cs_{i-1}) */
    cfg.policy = SC_SCHED_CT;
    v[0] = V(10, 100, 1, 0, 4, 5000);   /* 5000/100 = 50 */
    v[1] = V(10, 10, 1, 0, 4, 1000);    /* 1000/10 = 100 */
    v[2] = V(10, 1000, 1, 1, 1, 0);     /* at max (stateful) */
    CHECK(sc_sched_choose(&cfg, v, 3) == 0);
    v[0].workers = 1;                   /* (5000+1000)/100 = 60 */
    v[1].window_ns = 200;               /* 200/10 = 20 */
    CHECK(sc_sched_choose(&cfg, v, 3) == 1);
    /* selectivity normalizes: after a 0.1 filter, op1 sees a tenth of the source items */
    v[0] = V(10, 100, 0.1, 0, 4, 5000); /* 50 */
    v[1] = V(10, 100, 1, 0, 4, 1000);   /* 1000/(100*0.1) = 100 */
    v[2] = V(0, 100, 1, 0, 4, 0);
    CHECK(sc_sched_choose(&cfg, v, 3) == 0);
    /* ties go to the later operator (drain first) */
    v[0] = V(10, 100, 1, 0, 4, 0); v[1] = V(10, 100, 1, 0, 4, 0);
    CHECK(sc_sched_choose(&cfg, v, 2) == 1);
}

static void test_grants(void) {
    sc_op_kind kinds[3] = { SC_OP_STATELESS, SC_OP_PARTITIONED, SC_OP_STATEFUL };
    uint32_t maxw[3] = { 0, 2, 5 };
    sc_sched *s;
    CHECK(sc_sched_create(&s, NULL, 0, kinds, maxw, 4) == SC_EINVAL);
    sc_sched_config cfg = { .policy = SC_SCHED_LP, .slice_ns = 100000, .initial_cost_ns = 1000, .max_quota = 64 };
    CHECK(sc_sched_create(&s, &cfg, 3, kinds, maxw, 4) == SC_OK);
    sc_sched_op_stats st;
    CHECK(sc_sched_stats(s, 0, &st) == SC_OK && st.max_workers == 4);
    CHECK(sc_sched_stats(s, 1, &st) == SC_OK && st.max_workers == 2);
    CHECK(sc_sched_stats(s, 2, &st) == SC_OK && st.max_workers == 1); /* stateful is always 1 */
    sc_sched_grant g, g2;
    CHECK(sc_sched_acquire(s, 0, &g) == SC_EEMPTY);
    sc_sched_queue_add(s, 2, 10);
    sc_sched_queue_add(s, 0, 10);
    CHECK(sc_sched_acquire(s, 0, &g) == SC_OK && g.op == 2 && g.quota == 64); /* 100us/1us, capped */
    CHECK(sc_sched_acquire(s, 1, &g2) == SC_OK && g2.op == 0); /* op 2 is taken: next choice */
    sc_sched_release(s, &g, 10, 5, 50000);                     /* 5 us per item, selectivity .5 */
    CHECK(sc_sched_stats(s, 2, &st) == SC_OK && st.workers == 0 && st.items_in == 10);
    CHECK(st.cost_ns > 1000 && st.cost_ns < 5000 && st.selectivity < 1 && st.selectivity > 0.5);
    for (int i = 0; i < 50; i++) { CHECK(sc_sched_acquire(s, 0, &g) == SC_OK && g.op == 2); sc_sched_release(s, &g, 10, 5, 50000); }
    CHECK(sc_sched_stats(s, 2, &st) == SC_OK && st.cost_ns > 4900 && st.cost_ns < 5100);
    CHECK(sc_sched_acquire(s, 0, &g) == SC_OK && g.op == 2 && g.quota == 20); /* 100us / 5us */
    sc_sched_release(s, &g, 0, 0, 10);
    sc_sched_release(s, &g2, 0, 0, 10);
    sc_sched_destroy(s);
}

/* concurrent stress */
#define NOPS 4
typedef struct {
    sc_sched *s;
    _Atomic int64_t active[NOPS];
    uint32_t maxw[NOPS];
    _Atomic int64_t remaining;   /* items left to process overall */
    int64_t stateful_state;      /* plain: only the stateful op's grant holder touches it */
    _Atomic int64_t queued[NOPS];
    uint64_t grants;
} stress_t;

typedef struct { stress_t *t; uint32_t id; } warg;

static void *worker(void *v) {
    warg *w = v;
    stress_t *t = w->t;
    uint64_t seed = w->id * 7919u + 1;
    while (atomic_load(&t->remaining) > 0) {
        sc_sched_grant g;
        if (sc_sched_acquire(t->s, w->id, &g) != SC_OK) { sched_yield(); continue; }
        int64_t a = atomic_fetch_add(&t->active[g.op], 1) + 1;
        CHECK(a <= (int64_t)t->maxw[g.op]);
        uint64_t took = 0;
        for (uint32_t k = 0; k < g.quota; k++) {
            int64_t q = atomic_load(&t->queued[g.op]);
            if (q <= 0 || !atomic_compare_exchange_weak(&t->queued[g.op], &q, q - 1)) break;
            sc_sched_queue_add(t->s, g.op, -1);
            if (g.op == NOPS - 1) { t->stateful_state++; atomic_fetch_sub(&t->remaining, 1); }
            else { atomic_fetch_add(&t->queued[g.op + 1], 1); sc_sched_queue_add(t->s, g.op + 1, 1); }
            seed ^= seed << 13; seed ^= seed >> 7; seed ^= seed << 17;
            for (uint64_t i = seed & 63; i; i--) sc_cpu_relax();
            took++;
        }
        atomic_fetch_sub(&t->active[g.op], 1);
        sc_sched_release(t->s, &g, took, took, 100 + took * 50);
    }
    return NULL;
}

static void stress(sc_sched_policy policy, int nworkers, int64_t items) {
    stress_t t = {0};
    sc_op_kind kinds[NOPS] = { SC_OP_STATELESS, SC_OP_PARTITIONED, SC_OP_STATELESS, SC_OP_STATEFUL };
    uint32_t maxw[NOPS] = { 0, 2, 0, 0 };
    sc_sched_config cfg = { .policy = policy, .slice_ns = 20000, .window_ns = 1000000 };
    CHECK(sc_sched_create(&t.s, &cfg, NOPS, kinds, maxw, (uint32_t)nworkers) == SC_OK);
    for (int i = 0; i < NOPS; i++) {
        sc_sched_op_stats st;
        sc_sched_stats(t.s, (uint32_t)i, &st);
        t.maxw[i] = st.max_workers;
        atomic_init(&t.active[i], 0);
        atomic_init(&t.queued[i], 0);
    }
    atomic_init(&t.remaining, items);
    atomic_store(&t.queued[0], items);
    sc_sched_queue_add(t.s, 0, items);
    pthread_t th[16];
    warg w[16];
    uint64_t t0 = sc_now_ns();
    for (int i = 0; i < nworkers; i++) { w[i] = (warg){ &t, (uint32_t)i }; pthread_create(&th[i], NULL, worker, &w[i]); }
    for (int i = 0; i < nworkers; i++) pthread_join(th[i], NULL);
    CHECK(t.stateful_state == items);
    for (uint32_t i = 0; i < NOPS; i++) {
        sc_sched_op_stats st;
        sc_sched_stats(t.s, i, &st);
        CHECK(st.workers == 0 && st.queued == 0 && st.items_in == (uint64_t)items);
    }
    printf("  %-3s workers=%d items=%lld through 4 ops (stateless, partitioned<=2, stateless, stateful<=1): limits held (%.0f ms)\n",
           sc_sched_policy_name(policy), nworkers, (long long)items, (double)(sc_now_ns() - t0) / 1e6);
    sc_sched_destroy(t.s);
}

int main(void) {
    printf("test_scheduler\n");
    test_heuristics();
    printf("  heuristics CT/QST/LP/ET choose as specified\n");
    test_grants();
    printf("  grants: kind limits, quota from EWMA cost, selectivity ok\n");
    for (int p = 0; p < 4; p++) stress((sc_sched_policy)p, 5, 200000 / SCALE_DIV);
    return 0;
}
