// sources: exec/ops_entities.c exec/ops_state.c exec/keyhash.c exec/rowstore.c exec/common.c runtime/batch.c runtime/ring.c exec/lists.c
/* Tests for exec/ops_entities (the lazy topological sorting design ticket ordering): ORDER runs batches in arrival
 * order on one thread; APPLY runs them on several threads that take batches first come,
 * first served (as the pool's worklist hands them out); balances, output rows and rejected
 * transfers must equal a sequential model at any thread count, with hot accounts (TSan
 * checks the ticket hand-off). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/ops_entities.h"

#include "check.h"

enum { C_SRC = 2, C_DST = 3, C_AMT = 4, NIN = 5, NBATCH = 120, ROWS = 50, ACCOUNTS = 12 };

static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;
static uint64_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static sc_step_counters counters;
static sc_batch *ordered[NBATCH], *applied[NBATCH];
static void *apply_state;
static int next_batch; /* __atomic: the worklist */

static void *apply_worker(void *arg) {
    (void)arg;
    for (;;) {
        int i = __atomic_fetch_add(&next_batch, 1, __ATOMIC_ACQ_REL);
        if (i >= NBATCH) return NULL;
        sc_batch *out = NULL;
        if (ordered[i]) CHECK_RC(sc_op_apply_run(apply_state, ordered[i], &out));
        applied[i] = out;
    }
}

static void run(int threads, bool serial, bool overdraft) {
    uint8_t lt_in[NIN] = { SC_LT_INT, SC_LT_INT, SC_LT_INT, SC_LT_INT, SC_LT_INT };
    uint8_t lt_mid[NIN + 5], lt_out[NIN + 2];
    for (int i = 0; i < NIN + 5; i++) lt_mid[i] = SC_LT_INT;
    for (int i = 0; i < NIN + 2; i++) lt_out[i] = SC_LT_INT;
    sc_schema si, sm, so;
    CHECK_RC(sc_schema_init(&si, NIN, lt_in));
    CHECK_RC(sc_schema_init(&sm, NIN + 5, lt_mid));
    CHECK_RC(sc_schema_init(&so, NIN + 2, lt_out));
    sc_entities *ents;
    CHECK_RC(sc_entities_create(&ents, false, 0, 100, overdraft, serial));
    sc_op_base bo, ba;
    CHECK_RC(sc_op_base_init(&bo, 0, true, false, &counters, &si, &sm, 64, true));
    CHECK_RC(sc_op_base_init(&ba, 0, false, true, &counters, &sm, &so, 64, true));
    const char *reasons[5] = { "src null", "dst null", "amount null", "nan", "negative" };
    int32_t keys[2] = { C_SRC, C_DST };
    void *order = NULL;
    CHECK_RC(sc_op_order_create(&order, &bo, ents, keys, C_AMT, reasons));
    CHECK_RC(sc_op_apply_create(&apply_state, &ba, ents, C_AMT, "rejected"));
    sc_op_base_free(&bo);
    sc_op_base_free(&ba);

    /* the sequential model, and the inputs through ORDER */
    int64_t bal[ACCOUNTS];
    for (int a = 0; a < ACCOUNTS; a++) bal[a] = 100;
    int64_t want_rows = 0, want_rej = 0, want_bad = 0;
    static int64_t want_a[NBATCH * ROWS], want_b[NBATCH * ROWS];
    rng_state = 0x9E3779B97F4A7C15ULL;
    for (int i = 0; i < NBATCH; i++) {
        sc_batch *b;
        CHECK_RC(sc_batch_new(&b, &si, ROWS));
        for (int r = 0; r < ROWS; r++) {
            int64_t s = (int64_t)(rnd() % 4 == 0 ? 0 : rnd() % ACCOUNTS); /* account 0 is hot */
            int64_t d = (int64_t)(rnd() % ACCOUNTS), amt = (int64_t)(rnd() % 60);
            sc_batch_set_i64(b, 0, r, i * ROWS + r);
            sc_batch_set_i64(b, 1, r, 0);
            sc_batch_set_i64(b, C_SRC, r, s);
            sc_batch_set_i64(b, C_DST, r, d);
            sc_batch_set_i64(b, C_AMT, r, amt);
            if (rnd() % 50 == 0) {
                sc_batch_set_null(b, C_DST, r);
                want_bad++;
                continue;
            }
            if (!overdraft && bal[s] < amt) {
                want_rej++;
                continue;
            }
            bal[s] -= amt;
            bal[d] += amt;
            want_a[want_rows] = bal[s];
            want_b[want_rows] = bal[d];
            want_rows++;
        }
        b->nrows = ROWS;
        b->serial = (uint64_t)i;
        CHECK_RC(sc_op_order_run(order, b, &ordered[i]));
        applied[i] = NULL;
    }
    next_batch = 0;
    pthread_t t[8];
    for (int k = 0; k < threads; k++) CHECK(pthread_create(&t[k], NULL, apply_worker, NULL) == 0);
    for (int k = 0; k < threads; k++) pthread_join(t[k], NULL);

    int64_t got = 0;
    for (int i = 0; i < NBATCH; i++) {
        sc_batch *o = applied[i];
        for (int64_t r = 0; o && r < o->nrows; r++, got++) {
            CHECK(got < want_rows);
            CHECK(sc_batch_get_i64(o, NIN, r) == want_a[got]);
            CHECK(sc_batch_get_i64(o, NIN + 1, r) == want_b[got]);
        }
        if (o) sc_batch_release(o);
    }
    CHECK(got == want_rows);
    CHECK(sc_u64_load_relaxed(&counters.dead) == (uint64_t)(want_rej + want_bad));
    CHECK(sc_u64_load_relaxed(&counters.rows_in) == NBATCH * ROWS);
    CHECK(sc_u64_load_relaxed(&counters.rows_out) == (uint64_t)want_rows);
    CHECK(sc_entities_count(ents) == ACCOUNTS);
    sc_u64_store_relaxed(&counters.dead, 0);
    sc_u64_store_relaxed(&counters.rows_in, 0);
    sc_u64_store_relaxed(&counters.rows_out, 0);
    sc_op_order_destroy(order);
    sc_op_apply_destroy(apply_state);
    sc_entities_destroy(ents);
    sc_schema_free(&si);
    sc_schema_free(&sm);
    sc_schema_free(&so);
}

int main(void) {
    for (int threads = 1; threads <= 4; threads *= 2) {
        run(threads, false, false);
        run(threads, true, false);
        run(threads, false, true);
    }
    printf("test_entities: ok\n");
    return 0;
}
