// sources: exec/program.c exec/common.c exec/ops_state.c exec/ops_keyed.c exec/aggstate.c exec/ops_window.c exec/keyhash.c exec/rowstore.c runtime/pool.c runtime/scheduler.c runtime/reorder.c runtime/hybrid_queue.c runtime/ring.c runtime/batch.c runtime/metrics.c exec/lists.c
/* Stress test for exec/program: a running count per key (the keyed split -> partitioned
 * aggregate on the hybrid / partitioned queue -> order-restoring merge) followed by the
 * output queue (per batch or coalesced into chunks), on many configurations (1..6 workers on 2 cores, every scheduler, both
 * reorder buffers, both keyed queues, batch sizes 1..97, tiny windows and output queues).
 * The output must be exactly the sequential result: every input row once, in arrival order,
 * with the running count of its key. Run under ASan/UBSan and TSan by the harness. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec/ops_state.h"
#include "exec/program.h"

#include "check.h"

static uint64_t rs = 0x243F6A8885A308D3ull;
static uint64_t rnd(void) {
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return rs;
}

typedef struct {
    uint32_t workers, batch, window, max_out, partitions;
    int policy, reorder, keyed;
    int64_t coalesce; /* 0: one output batch per delivered batch */
} config;

/* A program of one step, a running count per key over `partitions` partitions: input seq,
 * pos, key (int, some null), value (str); output those and the count. */
static sc_prog *running_count(uint32_t max_out, uint32_t partitions, sc_schema *in, sc_schema *out) {
    uint8_t in_lt[] = { SC_LT_INT, SC_LT_INT, SC_LT_INT, SC_LT_STR };
    uint8_t out_lt[] = { SC_LT_INT, SC_LT_INT, SC_LT_INT, SC_LT_STR, SC_LT_INT };
    CHECK(sc_schema_init(in, 4, in_lt) == SC_OK);
    CHECK(sc_schema_init(out, 5, out_lt) == SC_OK);
    sc_prog *p;
    CHECK(sc_prog_create(&p, 2, max_out) == SC_OK);
    int32_t keys[] = { 2 };
    sc_agg_spec agg = { SC_AGG_COUNT, -1, SC_LT_INT };
    sc_out_col outs[] = { { SC_OUT_INPUT, 2 }, { SC_OUT_INPUT, 3 }, { SC_OUT_AGG, 0 } };
    sc_keyed_spec spec = { keys, 1, &agg, 1, outs };
    void *states[64];
    sc_op_base *bases[64];
    for (uint32_t i = 0; i < partitions; i++) {
        sc_op_base b;
        CHECK(sc_op_base_init(&b, 1, true, true, sc_prog_counters(p, 1), in, out, 64, false) == SC_OK);
        CHECK(sc_op_aggregate_create(&states[i], &b, &spec) == SC_OK);
        sc_op_base_free(&b);
        bases[i] = states[i];
    }
    CHECK(sc_prog_add_keyed(p, "running", sc_op_aggregate_run, sc_op_aggregate_destroy, states, bases, partitions,
                            keys, 1, in, out) == SC_OK);
    return p;
}

static void run_config(const config *cf, int64_t nrows, int nkeys) {
    sc_schema in, out;
    sc_prog *p = running_count(cf->max_out, cf->partitions, &in, &out);
    sc_pool_config pc = { 0 };
    pc.workers = cf->workers;
    pc.sched.policy = (sc_sched_policy)cf->policy;
    pc.reorder = (sc_reorder_kind)cf->reorder;
    pc.keyed = (sc_hq_kind)cf->keyed;
    pc.partitions = cf->partitions;
    pc.window = cf->window;
    pc.marker_every = 3;
    pc.idle_sleep_ns = 20000;
    /* half the configurations join outputs into chunks on the sink side (the driver's mode) */
    if (cf->coalesce) CHECK(sc_prog_set_coalesce(p, &out, cf->coalesce) == SC_OK);
    CHECK(sc_prog_start(p, &pc) == SC_OK);

    int64_t *key_of = malloc(sizeof(int64_t) * (size_t)nrows);
    int64_t *count = calloc((size_t)nkeys + 1, sizeof(int64_t));
    int64_t pushed = 0, got = 0;
    bool eos = false, finished = false;
    while (!eos) {
        if (pushed < nrows) {
            int64_t n = 1 + (int64_t)(rnd() % cf->batch);
            if (n > nrows - pushed) n = nrows - pushed;
            sc_batch *b;
            CHECK(sc_batch_new(&b, &in, n) == SC_OK);
            for (int64_t r = 0; r < n; r++) {
                int64_t s = pushed + r;
                sc_batch_set_i64(b, 0, r, s);
                sc_batch_set_i64(b, 1, r, 0);
                int64_t k = (int64_t)(rnd() % (uint64_t)(nkeys + 1));
                key_of[s] = k;
                if (k == nkeys) sc_batch_set_null(b, 2, r);
                else sc_batch_set_i64(b, 2, r, k);
                char txt[32];
                int len = snprintf(txt, sizeof txt, "v%lld", (long long)s);
                CHECK(sc_batch_put_utf8(b, 3, r, txt, len) == SC_OK);
            }
            b->nrows = n;
            int rc = sc_prog_push(p, b, 1000000);
            if (rc == SC_EFULL) sc_batch_release(b);
            else {
                CHECK(rc == SC_OK);
                pushed += n;
            }
        } else if (!finished) {
            int rc = sc_prog_finish(p, 1000000);
            CHECK(rc == SC_OK || rc == SC_EFULL);
            finished = rc == SC_OK;
        }
        sc_batch *o;
        while (sc_prog_take(p, pushed < nrows ? 0 : 2000000, &o) == SC_OK) {
            if (o->eos) {
                eos = true;
                sc_batch_release(o);
                break;
            }
            CHECK(o->ncols == 5);
            for (int64_t r = 0; r < o->nrows; r++) {
                int64_t s = sc_batch_get_i64(o, 0, r);
                CHECK(s == got); /* arrival order, nothing lost or repeated */
                int64_t k = key_of[s];
                CHECK(sc_batch_is_valid(o, 2, r) == (k != nkeys));
                if (k != nkeys) CHECK(sc_batch_get_i64(o, 2, r) == k);
                count[k]++;
                CHECK(sc_batch_get_i64(o, 4, r) == count[k]);
                int32_t len;
                const char *v = sc_batch_get_utf8(o, 3, r, &len);
                char txt[32];
                int want = snprintf(txt, sizeof txt, "v%lld", (long long)s);
                CHECK(len == want && memcmp(v, txt, (size_t)len) == 0);
                got++;
            }
            sc_batch_release(o);
        }
        CHECK(sc_prog_error(p, NULL) == 0);
    }
    CHECK(got == nrows);
    sc_step_counters *c = sc_prog_counters(p, 1);
    CHECK((int64_t)sc_u64_load_relaxed(&c->rows_in) == nrows);
    CHECK((int64_t)sc_u64_load_relaxed(&c->rows_out) == nrows);
    CHECK(sc_prog_stop(p) == 0);
    sc_prog_destroy(p);
    free(key_of);
    free(count);
    sc_schema_free(&in);
    sc_schema_free(&out);
}

/* One 1-row batch into a one-step program (a running count on key 0); waits until it has
 * left the step, then a little longer for the sink. */
static void push_one(sc_prog *p, const sc_schema *in, int64_t seq) {
    sc_batch *b;
    CHECK(sc_batch_new(&b, in, 1) == SC_OK);
    sc_batch_set_i64(b, 0, 0, seq);
    sc_batch_set_i64(b, 1, 0, 0);
    sc_batch_set_i64(b, 2, 0, 0);
    CHECK(sc_batch_put_utf8(b, 3, 0, "x", 1) == SC_OK);
    b->nrows = 1;
    CHECK(sc_prog_push(p, b, 1000000000) == SC_OK);
    sc_step_counters *c = sc_prog_counters(p, 1);
    for (int i = 0; i < 2000 && (int64_t)sc_u64_load_relaxed(&c->rows_out) <= seq; i++) usleep(1000);
    CHECK((int64_t)sc_u64_load_relaxed(&c->rows_out) == seq + 1);
    usleep(20000);
}

/* sc_prog_take_due: a paced feeder returns to take outputs once the queue is a quarter full
 * (here 2 of 8 batches), not for every batch. */
static void test_take_due(void) {
    sc_schema in, out;
    sc_prog *p = running_count(8, 1, &in, &out);
    sc_pool_config pc = { 0 };
    pc.workers = 2;
    pc.partitions = 1;
    CHECK(sc_prog_start(p, &pc) == SC_OK);
    CHECK(!sc_prog_take_due(p));
    push_one(p, &in, 0);
    CHECK(!sc_prog_take_due(p)); /* 1 of 8 waits */
    push_one(p, &in, 1);
    bool due = false; /* 2 of 8, once the sink has it (polled: the run may be slow under TSan) */
    for (int i = 0; i < 2000 && !(due = sc_prog_take_due(p)); i++) usleep(1000);
    CHECK(due);
    sc_batch *o;
    CHECK(sc_prog_take(p, 0, &o) == SC_OK);
    sc_batch_release(o);
    CHECK(!sc_prog_take_due(p));
    CHECK(sc_prog_stop(p) == 0);
    sc_prog_destroy(p);
    sc_schema_free(&in);
    sc_schema_free(&out);
}

/* The coalescing sink's open chunk starts with room for 16 of the batches that arrive (here
 * 10 rows: 160 of the 6,400-row chunk) and a chunk that fills hands twice its room to the
 * next: small batches (a slow paced source) do not allocate whole chunks, and no chunk is
 * ever grown by copying. The open chunk taken early keeps its small room. */
static void test_open_chunk_room(void) {
    sc_schema in, out;
    sc_prog *p = running_count(8, 1, &in, &out);
    CHECK(sc_prog_set_coalesce(p, &out, 6400) == SC_OK);
    sc_pool_config pc = { 0 };
    pc.workers = 2;
    pc.partitions = 1;
    CHECK(sc_prog_start(p, &pc) == SC_OK);
    for (int64_t k = 0; k < 30; k++) {
        sc_batch *b;
        CHECK(sc_batch_new(&b, &in, 10) == SC_OK);
        for (int64_t r = 0; r < 10; r++) {
            sc_batch_set_i64(b, 0, r, 10 * k + r);
            sc_batch_set_i64(b, 1, r, 0);
            sc_batch_set_i64(b, 2, r, 0);
            CHECK(sc_batch_put_utf8(b, 3, r, "x", 1) == SC_OK);
        }
        b->nrows = 10;
        CHECK(sc_prog_push(p, b, 1000000000) == SC_OK);
    }
    CHECK(sc_prog_finish(p, 1000000000) == SC_OK); /* the open chunk is queued before the end */
    const int64_t want_rows[] = { 160, 140 }, want_room[] = { 160, 320 };
    int64_t seq = 0;
    for (int k = 0; k < 3; k++) {
        sc_batch *o = NULL;
        CHECK(sc_prog_take(p, 5000000000, &o) == SC_OK); /* waits for a queued chunk */
        if (k == 2) { /* then the end marker */
            CHECK(o->eos);
            sc_batch_release(o);
            break;
        }
        CHECK(o->nrows == want_rows[k]);
        CHECK(o->capacity == want_room[k]);
        for (int64_t r = 0; r < o->nrows; r++) CHECK(sc_batch_get_i64(o, 0, r) == seq++);
        sc_batch_release(o);
    }
    CHECK(seq == 300);
    CHECK(sc_prog_stop(p) == 0);
    sc_prog_destroy(p);
    sc_schema_free(&in);
    sc_schema_free(&out);
}

int main(void) {
    test_take_due();
    test_open_chunk_room();
    const uint32_t workers[] = { 1, 2, 3, 6 };
    const uint32_t batches[] = { 1, 7, 97 };
    int n = 0;
    for (int wi = 0; wi < 4; wi++)
        for (int bi = 0; bi < 3; bi++)
            for (int policy = 0; policy < 4; policy++) {
                config cf = { workers[wi], batches[bi], (uint32_t)(bi == 0 ? 4 : 64), (uint32_t)(1 + policy * 3),
                              (uint32_t)(policy % 2 ? 8 : 32), policy, (wi + policy) % 2, (bi + policy) % 2,
                              (wi + bi) % 2 ? (int64_t)(1 + rnd() % 300) : 0 };
                run_config(&cf, bi == 0 ? 600 : 3000, 1 + (int)(rnd() % 40));
                n++;
            }
    printf("test_program: %d configurations ok\n", n);
    return 0;
}
