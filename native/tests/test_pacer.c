// sources: exec/pacer.c exec/program.c exec/arrow_bridge.c exec/select.c exec/expr.c exec/expr_vec.c exec/expr_fast.c exec/expr_funcs.c exec/expr_compile.c exec/expr_compat_num.c exec/expr_compat_time.c exec/expr_compat_str.c exec/ops_filter_project.c exec/common.c exec/lists.c exec/keyhash.c runtime/pool.c runtime/scheduler.c runtime/reorder.c runtime/hybrid_queue.c runtime/ring.c runtime/batch.c runtime/metrics.c
/* test_pacer: the thread that pushes a throttled source's rows into a program when they are
 * due (exec/pacer.h).
 *
 * The source is one or two hand-built Arrow struct arrays of one int64 column, each moved into
 * a hold (sc_arrow_hold_create / sc_arrow_hold_defer); the program is one fused stateless
 * stage (an identity project) on the pool, its outputs per batch or coalesced into chunks.
 * - every row goes in exactly once, in order, with its sequence number, over consecutive jobs
 *   of two arrays (a third submit waits for room: SC_EFULL); `pushed` counts them all;
 * - two jobs wait at most (SC_EFULL); a halt drops them, returns once the pacer let go of
 *   them, and what it reports pushed is exactly what went in (also when the halt catches a
 *   push waiting on a full pipeline); jobs may be queued again after it;
 * - never early: at every look, the rows pushed are at most those whose group is due by the
 *   clock read after the look (the pacer's own due time, sc_paced_due, origin in the future
 *   or now, with and without bursts, jobs on and off batch boundaries); everything goes in
 *   in the end; the schedule starts with the first job, not a catch-up from an origin long
 *   past;
 * - destroy while jobs wait and the pacer sleeps, while it is in the middle of a job and
 *   while a push waits on a full pipeline: nothing leaks (ASan) and the arrays are released;
 * - a stopped program: the pacer's first push fails, sc_pacer_wait reports SC_ECLOSED, a
 *   submit and a halt then return it, the jobs are dropped (the array is released);
 * - batches of 4,096 rows and more, handed to the workers to push when due (sc_pool_arm): the
 *   same in order, never early (by the outputs), with halts at many points of the schedule,
 *   and with the program stopped or the pacer destroyed while a group is with the workers.
 * No assertion depends on how fast the machine is: the pacer may always be late, never early
 * (bounds use a clock read after the pacer's), and waits for progress have deadlines of
 * seconds. Run under ASan/UBSan and TSan by the harness. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/arrow_bridge.h"
#include "exec/expr.h"
#include "exec/pacer.h"
#include "exec/program.h"
#include "runtime/atomic_ext.h"

#include "check.h"

#define MS 1000000ll
#define SEC 1000000000ll

/* ------------------------------------------------------------------ source arrays */

static int released;        /* arrays released (their release callback ran) */
static int schema_released; /* schemas released */

typedef struct {
    int64_t *vals;
    const void *cbuf[2];
    struct ArrowArray child, *kids[1];
    const void *top_buffers[1];
} fake;

static void release_array(struct ArrowArray *a) {
    fake *f = a->private_data;
    free(f->vals);
    free(f);
    released++;
    a->release = NULL;
}

static void release_schema(struct ArrowSchema *x) {
    schema_released++;
    x->release = NULL;
}

/* value of row r of array `id` */
static int64_t val(int id, int64_t r) { return (int64_t)id * 1000000 + 3 * r + 1; }

static struct ArrowSchema sc_v = { "l", "v", NULL, 2, 0, NULL, NULL, NULL, NULL };
static struct ArrowSchema *schema_kids[1] = { &sc_v };

static const uint8_t LT[3] = { SC_LT_INT, SC_LT_INT, SC_LT_INT }; /* seq, pos, v */

/* A hold of an array of n rows (values val(id, r), no nulls), deferred to batches of `s`. */
static sc_extbuf *make_hold(int id, int64_t n, const sc_schema *s) {
    fake *f = calloc(1, sizeof *f);
    CHECK(f);
    f->vals = malloc((size_t)n * sizeof(int64_t));
    CHECK(f->vals);
    for (int64_t r = 0; r < n; r++) f->vals[r] = val(id, r);
    f->cbuf[0] = NULL, f->cbuf[1] = f->vals;
    memset(&f->child, 0, sizeof f->child);
    f->child.length = n, f->child.n_buffers = 2, f->child.buffers = f->cbuf;
    f->kids[0] = &f->child;
    struct ArrowArray a;
    memset(&a, 0, sizeof a);
    a.length = n, a.n_buffers = 1, a.buffers = f->top_buffers, a.n_children = 1, a.children = f->kids;
    a.release = release_array;
    a.private_data = f;
    sc_extbuf *hold = NULL;
    CHECK_RC(sc_arrow_hold_create(&hold, &a));
    CHECK(a.release == NULL);
    struct ArrowSchema top = { "+s", "", NULL, 0, 1, schema_kids, NULL, release_schema, NULL };
    CHECK_RC(sc_arrow_hold_defer(hold, &top, s, NULL));
    CHECK(top.release == NULL);
    return hold;
}

/* ------------------------------------------------------------------ the program */

/* One fused stage (an identity project: seq, pos, v) on `workers` workers; outputs per batch
 * or, when coalesce > 0, joined into chunks of that many rows. */
static sc_prog *make_prog(const sc_schema *s, uint32_t workers, uint32_t max_out, uint32_t window,
                          int64_t coalesce) {
    sc_prog *p = NULL;
    CHECK_RC(sc_prog_create(&p, 1, max_out));
    sc_op_base base;
    CHECK_RC(sc_op_base_init(&base, 0, true, true, sc_prog_counters(p, 0), s, s, 64, false));
    int32_t src[3] = { 0, 1, 2 };
    void *part = NULL, *fused = NULL;
    CHECK_RC(sc_op_project_create(&part, &base, src, 3, NULL, NULL, 0));
    sc_op_base_free(&base);
    uint8_t kind = 2;
    sc_op_base **bases = NULL;
    CHECK_RC(sc_op_fused_create(&fused, &bases, &part, &kind, 1));
    CHECK_RC(sc_prog_add_bases(p, "pass", SC_OP_STATELESS, sc_op_fused_run, sc_op_fused_destroy, fused, bases, 1));
    if (coalesce) CHECK_RC(sc_prog_set_coalesce(p, s, coalesce));
    sc_pool_config pc;
    memset(&pc, 0, sizeof pc);
    pc.workers = workers;
    pc.partitions = 1;
    pc.window = window;
    pc.marker_every = 3;
    pc.idle_sleep_ns = 20000;
    CHECK_RC(sc_prog_start(p, &pc));
    return p;
}

/* The outputs taken so far: v and seq of every row, in order. */
typedef struct {
    int64_t *v, *seq;
    int64_t n, cap;
    bool eos;
} outs;

static void take_all(sc_prog *p, outs *o, int64_t timeout_ns) {
    sc_batch *b = NULL;
    while (!o->eos && sc_prog_take(p, timeout_ns, &b) == SC_OK) {
        if (b->eos) {
            o->eos = true;
            sc_batch_release(b);
            break;
        }
        CHECK(b->ncols == 3);
        if (o->n + b->nrows > o->cap) {
            o->cap = 2 * (o->n + b->nrows);
            o->v = realloc(o->v, (size_t)o->cap * sizeof(int64_t));
            o->seq = realloc(o->seq, (size_t)o->cap * sizeof(int64_t));
            CHECK(o->v && o->seq);
        }
        for (int64_t r = 0; r < b->nrows; r++) {
            o->v[o->n] = sc_batch_get_i64(b, 2, r);
            o->seq[o->n] = sc_batch_get_i64(b, 0, r);
            o->n++;
        }
        sc_batch_release(b);
    }
}

/* End of input (the pacer idle), then every output up to the end marker. */
static void finish(sc_prog *p, outs *o) {
    uint64_t deadline = sc_now_ns() + 20 * SEC;
    int rc;
    while ((rc = sc_prog_finish(p, MS)) == SC_EFULL) {
        take_all(p, o, 0);
        CHECK(sc_now_ns() < deadline);
    }
    CHECK_RC(rc);
    while (!o->eos) {
        take_all(p, o, 10 * MS);
        CHECK(sc_now_ns() < deadline);
    }
    CHECK(sc_prog_error(p, NULL) == 0);
}

static void outs_free(outs *o) {
    free(o->v);
    free(o->seq);
    memset(o, 0, sizeof *o);
}

/* Rows [0, total) of a source whose group (pacer.h) is due by t: the most the pacer may have
 * pushed by then when every job starts and ends on a batch boundary. */
static int64_t rows_due(uint64_t origin, uint64_t t, int64_t group, double rate, int64_t total) {
    int64_t r = 0;
    while (r < total && sc_paced_due(origin, r, group, rate) <= t) r += group;
    return r < total ? r : total;
}

/* Wait for the pacer to be idle (taking outputs meanwhile); returns the rows pushed. */
static int64_t wait_idle(sc_pacer *pc, sc_prog *p, outs *o) {
    uint64_t deadline = sc_now_ns() + 20 * SEC;
    int64_t pushed = -1;
    int idle = 0;
    for (;;) {
        CHECK_RC(sc_pacer_wait(pc, 2 * MS, &pushed, &idle));
        take_all(p, o, 0);
        if (idle) return pushed;
        CHECK(sc_now_ns() < deadline);
    }
}

/* The reclaim of released holds: exactly `want` arrays (and their schemas) went. */
static void check_reclaimed(int want) {
    int before = released, sbefore = schema_released;
    CHECK(sc_arrow_reclaim() == want);
    CHECK(released == before + want && schema_released == sbefore + want);
    CHECK(sc_arrow_reclaim() == 0);
}

/* The end of a test whose source rows 0..n-1 of array `id` all went in, in order: the input
 * ended, exactly those rows came out with their sequence numbers, and everything (the pacer,
 * the program, the array) is released. */
static void end_with_rows(sc_pacer *pc, sc_prog *p, outs *o, sc_schema *s, int id, int64_t n) {
    finish(p, o);
    CHECK(o->n == n);
    for (int64_t i = 0; i < n; i++) CHECK(o->v[i] == val(id, i) && o->seq[i] == i);
    sc_pacer_destroy(pc);
    CHECK(sc_prog_stop(p) == 0);
    sc_prog_destroy(p);
    check_reclaimed(1);
    outs_free(o);
    sc_schema_free(s);
}

/* A job of a test: rows [off, off + n) of array `id` (its hold h). */
typedef struct {
    sc_extbuf *h;
    int id;
    int64_t off, n;
} job;

/* The end of a test whose jobs[0..nj) (`total` rows) all went in, in order: the input ended,
 * exactly those rows came out (with their sequence numbers unless lean), the first operator
 * counted them all, and everything (the pacer, the program, `arrays` arrays) is released. */
static void end_with_jobs(sc_pacer *pc, sc_prog *p, outs *o, sc_schema *s, const job *jobs, int nj, int64_t total,
                          bool lean, int arrays) {
    finish(p, o);
    CHECK(o->n == total);
    int64_t i = 0;
    for (int k = 0; k < nj; k++)
        for (int64_t r = 0; r < jobs[k].n; r++, i++) {
            CHECK(o->v[i] == val(jobs[k].id, jobs[k].off + r));
            if (!lean) CHECK(o->seq[i] == i);
        }
    sc_step_counters *c = sc_prog_counters(p, 0);
    CHECK((int64_t)sc_u64_load_relaxed(&c->rows_in) == total);
    CHECK((int64_t)sc_u64_load_relaxed(&c->rows_out) == total);
    sc_pacer_destroy(pc);
    CHECK(sc_prog_stop(p) == 0);
    sc_prog_destroy(p);
    check_reclaimed(arrays);
    outs_free(o);
    sc_schema_free(s);
}

/* ------------------------------------------------------------------ 1. exactly once, in order */

static void all_rows_in_order(int64_t coalesce, bool lean, int64_t batch_size, int64_t burst) {
    sc_schema s;
    CHECK_RC(sc_schema_init(&s, 3, LT));
    sc_prog *p = make_prog(&s, 2, 8, 16, coalesce);
    enum { NA = 1000, NB = 700 };
    sc_extbuf *a = make_hold(1, NA, &s), *b = make_hold(2, NB, &s);
    /* the source: a[0, 300), a[300, 1000), b[100, 600) */
    job jobs[3] = { { a, 1, 0, 300 }, { a, 1, 300, 700 }, { b, 2, 100, 500 } };
    const int64_t total = 1500;
    sc_pacer *pc = NULL;
    CHECK_RC(sc_pacer_create(&pc, p, &s, lean, 1e9, batch_size, burst, sc_now_ns(), MS));
    outs o = { 0 };
    int64_t seq = 0, pushed = -1;
    int idle = 0;
    uint64_t deadline = sc_now_ns() + 20 * SEC;
    for (int k = 0; k < 3; k++) {
        int rc;
        while ((rc = sc_pacer_submit(pc, jobs[k].h, jobs[k].off, jobs[k].n, seq)) == SC_EFULL) {
            CHECK(k == 2); /* two jobs always fit */
            CHECK_RC(sc_pacer_wait(pc, 2 * MS, &pushed, &idle));
            CHECK(pushed >= 0 && pushed <= seq);
            int64_t fl = -1, now_pushed = sc_pacer_pushed(pc, &fl); /* a later look: never fewer */
            CHECK(now_pushed >= pushed && now_pushed <= seq);
            CHECK(fl >= 0 && now_pushed + fl <= seq); /* the batch in flight is a queued one's */
            take_all(p, &o, 0);
            CHECK(sc_now_ns() < deadline);
        }
        CHECK_RC(rc);
        seq += jobs[k].n;
    }
    sc_extbuf_unref(a); /* the pacer and the batches hold them now */
    sc_extbuf_unref(b);
    pushed = wait_idle(pc, p, &o);
    CHECK(pushed == total);
    CHECK_RC(sc_pacer_wait(pc, 0, &pushed, &idle)); /* nothing more: returns at once */
    int64_t in_flight = -1;
    CHECK(pushed == total && idle && sc_pacer_pushed(pc, &in_flight) == total);
    CHECK(in_flight == 0); /* idle: no batch between its push and its count */
    CHECK_RC(sc_pacer_halt(pc, &pushed)); /* idle: nothing to halt */
    CHECK(pushed == total);
    end_with_jobs(pc, p, &o, &s, jobs, 3, total, lean, 2);
}

/* ------------------------------------------------------------------ 2. full, halt, again */

static void full_and_halt(void) {
    sc_schema s;
    CHECK_RC(sc_schema_init(&s, 3, LT));
    sc_prog *p = make_prog(&s, 2, 64, 16, 0);
    const double rate = 1000;
    const int64_t bs = 10, n = 1010; /* the jobs' rows (the third submit's when it fits) */
    sc_extbuf *a = make_hold(3, 1100, &s);
    uint64_t origin = sc_now_ns();
    sc_pacer *pc = NULL;
    CHECK_RC(sc_pacer_create(&pc, p, &s, false, rate, bs, 1, origin, SEC));
    CHECK_RC(sc_pacer_submit(pc, a, 0, 500, 0));
    CHECK_RC(sc_pacer_submit(pc, a, 500, 500, 500));
    int rc = sc_pacer_submit(pc, a, 1000, 10, 1000);
    /* the first job cannot be done before its last batch is due (490 ms after the origin) */
    if (sc_now_ns() < sc_paced_due(origin, 490, bs, rate)) CHECK(rc == SC_EFULL);
    CHECK(rc == SC_EFULL || rc == SC_OK);
    CHECK(sc_pacer_submit(pc, a, 0, 0, 0) == SC_EINVAL);
    CHECK(sc_pacer_submit(pc, a, -1, 5, 0) == SC_EINVAL);
    CHECK(sc_pacer_submit(pc, NULL, 0, 5, 0) == SC_EINVAL);
    CHECK(sc_pacer_submit(pc, a, 1095, 6, 0) == SC_EINVAL); /* past the array's 1,100 rows */
    CHECK(sc_pacer_submit(pc, a, 1101, 1, 0) == SC_EINVAL);
    outs o = { 0 };
    int64_t pushed = -1;
    int idle = 0;
    for (int k = 0; k < 2; k++) { /* a few looks; it pushes a batch every 10 ms meanwhile */
        CHECK_RC(sc_pacer_wait(pc, 15 * MS, &pushed, &idle));
        take_all(p, &o, 0);
    }
    CHECK_RC(sc_pacer_halt(pc, &pushed));
    uint64_t t = sc_now_ns();
    CHECK(pushed >= 0 && pushed % bs == 0);
    CHECK(pushed <= rows_due(origin, t, bs, rate, n));
    int64_t again = -1;
    CHECK_RC(sc_pacer_wait(pc, 0, &again, &idle));
    CHECK(again == pushed && idle); /* the jobs are gone, nothing more goes in */
    CHECK_RC(sc_pacer_wait(pc, 20 * MS, &again, &idle));
    CHECK(again == pushed && idle);
    /* queued again from where it stopped: the next 20 rows, then two more jobs */
    int64_t from = pushed;
    CHECK_RC(sc_pacer_submit(pc, a, from, 20, from));
    CHECK_RC(sc_pacer_submit(pc, a, from + 20, 10, from + 20));
    sc_extbuf_unref(a);
    pushed = wait_idle(pc, p, &o);
    CHECK(pushed == from + 30);
    end_with_rows(pc, p, &o, &s, 3, from + 30); /* what it said went in, and nothing else */
}

/* A halt (or, with destroy, a destroy) while a push waits on a full pipeline: nobody takes the
 * outputs, so the sink's queue (one batch) and the operator's window fill and the push waits.
 * The halt returns; the rows counted pushed are exactly the rows that come out. */
static void halt_on_full_pipeline(bool destroy) {
    sc_schema s;
    CHECK_RC(sc_schema_init(&s, 3, LT));
    sc_prog *p = make_prog(&s, 1, 1, 2, 0);
    const int64_t n = 2000, bs = 5;
    sc_extbuf *a = make_hold(4, n, &s);
    sc_pacer *pc = NULL;
    CHECK_RC(sc_pacer_create(&pc, p, &s, false, 1e9, bs, 1, sc_now_ns(), MS));
    CHECK_RC(sc_pacer_submit(pc, a, 0, n / 2, 0));
    CHECK_RC(sc_pacer_submit(pc, a, n / 2, n / 2, n / 2));
    sc_extbuf_unref(a);
    int64_t pushed = -1;
    int idle = 0;
    uint64_t deadline = sc_now_ns() + 20 * SEC;
    do { /* until it pushed something (then it soon waits on the full pipeline) */
        CHECK_RC(sc_pacer_wait(pc, 5 * MS, &pushed, &idle));
        CHECK(sc_now_ns() < deadline);
    } while (pushed == 0);
    CHECK_RC(sc_pacer_wait(pc, 10 * MS, &pushed, &idle));
    CHECK(pushed < n && !idle); /* a window of a few batches: it cannot have pushed it all */
    outs o = { 0 };
    if (destroy) {
        sc_pacer_destroy(pc);
        CHECK(sc_prog_stop(p) == 0); /* the batches inside are released */
        sc_prog_destroy(p);
        check_reclaimed(1);
        sc_schema_free(&s);
        return;
    }
    CHECK_RC(sc_pacer_halt(pc, &pushed));
    CHECK(pushed % bs == 0 && pushed < n);
    int64_t again = -1;
    CHECK_RC(sc_pacer_wait(pc, 0, &again, &idle));
    CHECK(again == pushed && idle);
    end_with_rows(pc, p, &o, &s, 4, pushed); /* the batch the halt caught went in, or not, as counted */
}

/* ------------------------------------------------------------------ 3. never early */

static void never_early(int64_t bs, int64_t burst, int64_t origin_delay_ns, int64_t skew) {
    sc_schema s;
    CHECK_RC(sc_schema_init(&s, 3, LT));
    sc_prog *p = make_prog(&s, 2, 64, 16, 0);
    const double rate = 1000;
    const int64_t group = bs * burst, n = 6 * group;
    sc_extbuf *a = make_hold(5, n, &s);
    uint64_t origin = sc_now_ns() + (uint64_t)origin_delay_ns;
    sc_pacer *pc = NULL;
    /* a catch-up of a second: the origin moves only after a stall that long (and only forward,
     * which makes the bound below looser, never wrong) */
    CHECK_RC(sc_pacer_create(&pc, p, &s, false, rate, bs, burst, origin, SEC));
    /* two jobs, each a whole number of batches, or (skew) the second starting `skew` rows
     * past a batch boundary: its batches cross group boundaries and wait for their last row */
    int64_t first = 2 * group + skew;
    CHECK_RC(sc_pacer_submit(pc, a, 0, first, 0));
    CHECK_RC(sc_pacer_submit(pc, a, first, n - first, first));
    sc_extbuf_unref(a);
    outs o = { 0 };
    int64_t pushed = -1, last = 0;
    int idle = 0;
    uint64_t deadline = sc_now_ns() + 20 * SEC;
    for (;;) {
        CHECK_RC(sc_pacer_wait(pc, 30 * MS, &pushed, &idle));
        uint64_t t = sc_now_ns(); /* after the pacer's clock read for every push counted */
        CHECK(pushed <= rows_due(origin, t, group, rate, n));
        CHECK(pushed >= last && (skew || pushed % bs == 0));
        last = pushed;
        take_all(p, &o, 0);
        if (idle) break;
        CHECK(t < deadline);
    }
    CHECK(pushed == n);
    end_with_rows(pc, p, &o, &s, 5, n);
}

/* The schedule starts with the first job: a pacer created long before its first rows are
 * here (a run's setup, its source's first read) does not push what was "due" meanwhile back to
 * back as a catch-up, it pushes row r no earlier than r / rate after the first submit. The
 * origin is ten seconds back, the catch-up a second: a schedule kept from the origin would
 * push a second's rows (the whole source) at once. */
static void starts_with_first_job(void) {
    sc_schema s;
    CHECK_RC(sc_schema_init(&s, 3, LT));
    sc_prog *p = make_prog(&s, 2, 64, 16, 0);
    const double rate = 1000;
    const int64_t bs = 10, n = 150;
    sc_extbuf *a = make_hold(11, n, &s);
    sc_pacer *pc = NULL;
    CHECK_RC(sc_pacer_create(&pc, p, &s, false, rate, bs, 1, sc_now_ns() - 10 * SEC, SEC));
    uint64_t t0 = sc_now_ns(); /* before the submit: the schedule's origin is no earlier */
    CHECK_RC(sc_pacer_submit(pc, a, 0, n, 0));
    sc_extbuf_unref(a);
    outs o = { 0 };
    int64_t pushed = -1;
    int idle = 0, looks = 0;
    uint64_t deadline = sc_now_ns() + 20 * SEC;
    for (;;) {
        CHECK_RC(sc_pacer_wait(pc, 5 * MS, &pushed, &idle));
        uint64_t t = sc_now_ns();
        CHECK(pushed <= rows_due(t0, t, bs, rate, n));
        looks++;
        take_all(p, &o, 0);
        if (idle) break;
        CHECK(t < deadline);
    }
    CHECK(pushed == n && looks > 1);
    end_with_rows(pc, p, &o, &s, 11, n);
}

/* A job whose first source row is far ahead of the clock waits for it; the pacer sleeps
 * until a destroy, with two jobs queued: nothing went in, the array is released. */
static void destroy_while_sleeping(void) {
    sc_schema s;
    CHECK_RC(sc_schema_init(&s, 3, LT));
    sc_prog *p = make_prog(&s, 2, 64, 16, 0);
    sc_extbuf *a = make_hold(6, 100, &s);
    uint64_t origin = sc_now_ns();
    sc_pacer *pc = NULL;
    CHECK_RC(sc_pacer_create(&pc, p, &s, false, 1000, 10, 2, origin, SEC));
    CHECK_RC(sc_pacer_submit(pc, a, 0, 50, 60000)); /* due a minute after the origin */
    CHECK_RC(sc_pacer_submit(pc, a, 50, 50, 60050));
    CHECK(sc_pacer_submit(pc, a, 0, 1, 0) == SC_EFULL);
    sc_extbuf_unref(a);
    int64_t pushed = -1;
    int idle = 1;
    CHECK_RC(sc_pacer_wait(pc, 20 * MS, &pushed, &idle));
    CHECK(pushed == 0 && !idle);
    CHECK(sc_arrow_reclaim() == 0); /* the pacer holds the array */
    sc_pacer_destroy(pc);
    check_reclaimed(1);
    CHECK(sc_prog_stop(p) == 0);
    sc_prog_destroy(p);
    sc_schema_free(&s);
}

/* ------------------------------------------------------------------ 4. destroy mid-job */

static void destroy_mid_job(void) {
    sc_schema s;
    CHECK_RC(sc_schema_init(&s, 3, LT));
    sc_prog *p = make_prog(&s, 2, 64, 16, 0);
    sc_extbuf *a = make_hold(7, 1000, &s), *b = make_hold(8, 1000, &s);
    sc_pacer *pc = NULL;
    CHECK_RC(sc_pacer_create(&pc, p, &s, false, 1000, 10, 1, sc_now_ns(), SEC));
    CHECK_RC(sc_pacer_submit(pc, a, 0, 1000, 0));
    CHECK_RC(sc_pacer_submit(pc, b, 0, 1000, 1000));
    sc_extbuf_unref(a);
    sc_extbuf_unref(b);
    int64_t pushed = 0;
    int idle = 0;
    uint64_t deadline = sc_now_ns() + 20 * SEC;
    while (pushed == 0) { /* until the first batch went in; the pacer then sleeps 10 ms */
        CHECK_RC(sc_pacer_wait(pc, 5 * MS, &pushed, &idle));
        CHECK(sc_now_ns() < deadline);
    }
    CHECK(!idle);
    sc_pacer_destroy(pc);
    outs o = { 0 };
    finish(p, &o); /* the pacer is gone: the driver may end the input */
    CHECK(o.n >= pushed && o.n <= 2000 && o.n % 10 == 0); /* < 1000 unless a stall of a second */
    for (int64_t i = 0; i < o.n; i++) CHECK(o.v[i] == (i < 1000 ? val(7, i) : val(8, i - 1000)) && o.seq[i] == i);
    CHECK(sc_prog_stop(p) == 0);
    sc_prog_destroy(p);
    check_reclaimed(2);
    outs_free(&o);
    sc_schema_free(&s);
}

/* ------------------------------------------------------------------ 5. a stopped program */

static void stopped_program(void) {
    sc_schema s;
    CHECK_RC(sc_schema_init(&s, 3, LT));
    sc_prog *p = make_prog(&s, 2, 64, 16, 0);
    CHECK(sc_prog_stop(p) == 0);
    sc_extbuf *a = make_hold(9, 100, &s);
    sc_pacer *pc = NULL;
    CHECK_RC(sc_pacer_create(&pc, p, &s, false, 1e9, 10, 1, sc_now_ns(), MS));
    CHECK_RC(sc_pacer_submit(pc, a, 0, 60, 0));
    int rc = sc_pacer_submit(pc, a, 60, 40, 60); /* the first push may have failed already */
    CHECK(rc == SC_OK || rc == SC_ECLOSED);
    int64_t pushed = -1;
    int idle = 0;
    uint64_t deadline = sc_now_ns() + 20 * SEC;
    while ((rc = sc_pacer_wait(pc, 5 * MS, &pushed, &idle)) == SC_OK) CHECK(sc_now_ns() < deadline);
    CHECK(rc == SC_ECLOSED);
    CHECK(pushed == 0 && idle); /* nothing went in; the jobs were dropped */
    CHECK(sc_pacer_wait(pc, 5 * MS, &pushed, &idle) == SC_ECLOSED); /* at once, every time */
    CHECK(sc_pacer_submit(pc, a, 0, 10, 0) == SC_ECLOSED);
    CHECK(sc_pacer_halt(pc, &pushed) == SC_ECLOSED && pushed == 0);
    sc_extbuf_unref(a);
    check_reclaimed(1); /* the pacer let go of the array */
    sc_pacer_destroy(pc);
    sc_prog_destroy(p);
    sc_schema_free(&s);
}

/* A program stopped while the pacer is in the middle of a job (the driver's stop): the
 * pacer's next push fails and it reports SC_ECLOSED; the rows counted pushed went in. */
static void stopped_mid_job(void) {
    sc_schema s;
    CHECK_RC(sc_schema_init(&s, 3, LT));
    sc_prog *p = make_prog(&s, 2, 64, 16, 0);
    sc_extbuf *a = make_hold(10, 1000, &s);
    sc_pacer *pc = NULL;
    CHECK_RC(sc_pacer_create(&pc, p, &s, false, 2000, 10, 1, sc_now_ns(), SEC));
    CHECK_RC(sc_pacer_submit(pc, a, 0, 1000, 0));
    int64_t pushed = 0;
    int idle = 0;
    uint64_t deadline = sc_now_ns() + 20 * SEC;
    while (pushed == 0) {
        CHECK_RC(sc_pacer_wait(pc, 5 * MS, &pushed, &idle));
        CHECK(sc_now_ns() < deadline);
    }
    CHECK(sc_prog_stop(p) == 0);
    /* one more job, due at once: the pacer has a push to try even if the first job is done */
    int rc = sc_pacer_submit(pc, a, 0, 10, 0);
    CHECK(rc == SC_OK || rc == SC_ECLOSED);
    sc_extbuf_unref(a);
    while ((rc = sc_pacer_wait(pc, 5 * MS, &pushed, &idle)) == SC_OK) CHECK(sc_now_ns() < deadline);
    CHECK(rc == SC_ECLOSED && idle && pushed > 0 && pushed <= 1000 && pushed % 10 == 0);
    int64_t again = -1;
    CHECK(sc_pacer_halt(pc, &again) == SC_ECLOSED && again == pushed);
    CHECK(sc_pacer_submit(pc, a, 0, 10, 0) == SC_ECLOSED);
    sc_pacer_destroy(pc);
    sc_prog_destroy(p); /* the batches still inside (and outputs never taken) are released */
    check_reclaimed(1);
    sc_schema_free(&s);
}

/* ------------------------------------------------------------------ 6. groups handed to the workers */

/* Batches of at least 4,096 rows go to the workers, armed shortly before they are due, for the
 * first idle worker to push (runtime/pool.h, sc_pool_arm): every row exactly once, in order,
 * over jobs that do and do not end on batch boundaries; never early, by the outputs (a row
 * comes out only after a worker pushed it: at most the rows due by a clock read after taking
 * them); `pushed` exact at the end. */
static void armed_in_order(int64_t burst, bool lean) {
    sc_schema s;
    CHECK_RC(sc_schema_init(&s, 3, LT));
    sc_prog *p = make_prog(&s, 2, 64, 16, 0);
    const double rate = 4e6; /* a group of two 4,096-row batches every ~2 ms */
    const int64_t bs = 4096, group = bs * burst;
    enum { NA = 20000, NB = 30000 };
    sc_extbuf *a = make_hold(12, NA, &s), *b = make_hold(13, NB, &s);
    job jobs[3] = { { a, 12, 0, 3 * 4096 }, { a, 12, 3 * 4096, NA - 3 * 4096 }, { b, 13, 5, NB - 5 } };
    const int64_t total = NA + NB - 5;
    uint64_t origin = sc_now_ns();
    sc_pacer *pc = NULL;
    CHECK_RC(sc_pacer_create(&pc, p, &s, lean, rate, bs, burst, origin, SEC));
    outs o = { 0 };
    int64_t seq = 0, pushed = -1;
    int idle = 0;
    uint64_t deadline = sc_now_ns() + 20 * SEC;
    for (int k = 0; k < 3; k++) {
        int rc;
        while ((rc = sc_pacer_submit(pc, jobs[k].h, jobs[k].off, jobs[k].n, seq)) == SC_EFULL) {
            CHECK_RC(sc_pacer_wait(pc, 2 * MS, &pushed, &idle));
            take_all(p, &o, 0);
            CHECK(o.n <= rows_due(origin, sc_now_ns(), group, rate, total));
            CHECK(sc_now_ns() < deadline);
        }
        CHECK_RC(rc);
        seq += jobs[k].n;
    }
    sc_extbuf_unref(a);
    sc_extbuf_unref(b);
    for (;;) {
        CHECK_RC(sc_pacer_wait(pc, 2 * MS, &pushed, &idle));
        take_all(p, &o, 0);
        /* the schedule starts at the first submit, no earlier than origin: never early */
        CHECK(o.n <= rows_due(origin, sc_now_ns(), group, rate, total));
        if (idle) break;
        CHECK(sc_now_ns() < deadline);
    }
    int64_t in_flight = -1;
    CHECK(pushed == total && sc_pacer_pushed(pc, &in_flight) == total && in_flight == 0);
    end_with_jobs(pc, p, &o, &s, jobs, 3, total, lean, 2);
}

/* Halts at many points of the schedule, mostly while a group is armed or pushed but not yet
 * taken back (a group waits with the workers ~2 ms): each halt returns with what went in
 * counted exactly (whole batches), the rest is queued again from there, and in the end every
 * row came out exactly once, in order. */
static void armed_halts(void) {
    sc_schema s;
    CHECK_RC(sc_schema_init(&s, 3, LT));
    sc_prog *p = make_prog(&s, 2, 64, 16, 0);
    const int64_t bs = 4096, n = 40 * bs;
    sc_extbuf *a = make_hold(14, n, &s);
    sc_pacer *pc = NULL;
    CHECK_RC(sc_pacer_create(&pc, p, &s, false, 4e6, bs, 2, sc_now_ns(), SEC));
    outs o = { 0 };
    int64_t from = 0, pushed = 0;
    int idle = 0;
    uint64_t deadline = sc_now_ns() + 30 * SEC;
    for (int h = 0; from < n; h++) {
        int64_t len = n - from < 7 * bs ? n - from : 7 * bs;
        CHECK_RC(sc_pacer_submit(pc, a, from, len, from));
        uint64_t until = sc_now_ns() + (uint64_t)(h % 7) * 400000u; /* 0 .. 2.4 ms in */
        while (sc_now_ns() < until) {
            CHECK_RC(sc_pacer_wait(pc, 200000, &pushed, &idle));
            take_all(p, &o, 0);
        }
        CHECK_RC(sc_pacer_halt(pc, &pushed));
        CHECK(pushed >= from && pushed <= from + len && pushed % bs == 0);
        int64_t in_flight = -1;
        CHECK(sc_pacer_pushed(pc, &in_flight) == pushed && in_flight == 0);
        if (pushed == from) { /* nothing went in before the halt: let this one finish */
            CHECK_RC(sc_pacer_submit(pc, a, from, len, from));
            pushed = wait_idle(pc, p, &o);
            CHECK(pushed == from + len);
        }
        from = pushed;
        take_all(p, &o, 0);
        CHECK(sc_now_ns() < deadline);
    }
    sc_extbuf_unref(a);
    end_with_rows(pc, p, &o, &s, 14, n);
}

/* A program stopped while groups go to the workers: a worker's push fails, or the stopped
 * workers take none, and the pacer takes the batches back and reports SC_ECLOSED; the rows
 * counted pushed went in (whole batches). */
static void armed_stopped(bool destroy) {
    sc_schema s;
    CHECK_RC(sc_schema_init(&s, 3, LT));
    sc_prog *p = make_prog(&s, 2, 64, 16, 0);
    const int64_t bs = 4096, n = 60 * bs;
    sc_extbuf *a = make_hold(15, n, &s);
    sc_pacer *pc = NULL;
    CHECK_RC(sc_pacer_create(&pc, p, &s, false, 4e6, bs, 2, sc_now_ns(), SEC));
    CHECK_RC(sc_pacer_submit(pc, a, 0, n, 0));
    int64_t pushed = 0;
    int idle = 0, rc;
    uint64_t deadline = sc_now_ns() + 20 * SEC;
    outs o = { 0 };
    while (pushed == 0) {
        CHECK_RC(sc_pacer_wait(pc, 5 * MS, &pushed, &idle));
        take_all(p, &o, 0);
        CHECK(sc_now_ns() < deadline);
    }
    CHECK(sc_prog_stop(p) == 0);
    /* one more job, due at once: a push to try even if the first job is done (a slow machine) */
    rc = sc_pacer_submit(pc, a, 0, bs, 0);
    CHECK(rc == SC_OK || rc == SC_ECLOSED || rc == SC_EFULL);
    sc_extbuf_unref(a);
    if (destroy) { /* with batches armed or pushed, not yet taken back */
        sc_pacer_destroy(pc);
    } else {
        while ((rc = sc_pacer_wait(pc, 5 * MS, &pushed, &idle)) == SC_OK) CHECK(sc_now_ns() < deadline);
        CHECK(rc == SC_ECLOSED && idle && pushed > 0 && pushed <= n && pushed % bs == 0);
        int64_t again = -1;
        CHECK(sc_pacer_halt(pc, &again) == SC_ECLOSED && again == pushed);
        sc_pacer_destroy(pc);
    }
    sc_prog_destroy(p); /* the batches inside (outputs never taken) are released */
    check_reclaimed(1);
    outs_free(&o);
    sc_schema_free(&s);
}

int main(void) {
    sc_schema s;
    CHECK_RC(sc_schema_init(&s, 3, LT));
    sc_prog *p = make_prog(&s, 1, 8, 16, 0);
    sc_pacer *pc = (sc_pacer *)1;
    CHECK(sc_pacer_create(&pc, p, &s, false, 0, 10, 1, 0, 0) == SC_EINVAL && pc == NULL);
    CHECK(sc_pacer_create(&pc, p, &s, false, 1000, 0, 1, 0, 0) == SC_EINVAL);
    CHECK(sc_pacer_create(&pc, p, &s, false, 1000, 10, 0, 0, 0) == SC_EINVAL);
    CHECK(sc_pacer_create(&pc, NULL, &s, false, 1000, 10, 1, 0, 0) == SC_EINVAL);
    CHECK_RC(sc_pacer_create(&pc, p, &s, false, 1000, 10, 1, sc_now_ns(), SEC));
    sc_pacer_destroy(pc); /* never given a job */
    sc_pacer_destroy(NULL);
    CHECK(sc_prog_stop(p) == 0);
    sc_prog_destroy(p);
    sc_schema_free(&s);

    all_rows_in_order(0, false, 64, 3);
    all_rows_in_order(256, false, 64, 1);
    all_rows_in_order(0, true, 7, 2);
    all_rows_in_order(100, false, 1, 1);
    full_and_halt();
    halt_on_full_pipeline(false);
    halt_on_full_pipeline(true);
    never_early(50, 1, 20 * MS, 0);
    never_early(20, 3, 0, 0);
    never_early(50, 1, 0, 25);
    never_early(20, 3, 20 * MS, 7);
    starts_with_first_job();
    destroy_while_sleeping();
    destroy_mid_job();
    stopped_program();
    stopped_mid_job();
    armed_in_order(2, false);
    armed_in_order(1, true);
    armed_in_order(3, false);
    armed_halts();
    armed_stopped(false);
    armed_stopped(true);
    printf("test_pacer: ok\n");
    return 0;
}
