/* pacer: a throttled source's pushes on a thread of their own (see pacer.h). */
#define _GNU_SOURCE
#include "pacer.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "../runtime/atomic_ext.h"

#define PACER_JOBS 2
/* Batches of at least this many rows (tens of microseconds of a worker's time each) have the
 * idle workers up and spinning shortly before they are due (sc_prog_expect, runtime/pool.h):
 * there the spin is a small part of a worker's time and saves each batch the wake of a
 * parked worker. Smaller batches come at lower rates, where that spin would cost more CPU
 * than the batches (a source paced at 1M rows/s: 554 against 206 ns per row). */
#define EXPECT_MIN_ROWS 4096
/* A push into a full pipeline waits this long at a time, then looks for a halt. */
#define PUSH_WAIT_NS 2000000
/* Such batches are handed to the workers (sc_prog_arm, runtime/pool.h) this long before the
 * first of them is due, ARM_GROUPS groups at a time, for idle workers to push at their due
 * times; this thread takes them back when it hands over the next ones, this long before those
 * are due: it wakes once for ARM_GROUPS groups, while the workers wait for the next one. A
 * wake of this thread had taken a core from a worker mid-batch: in a per-batch trace at 140M
 * rows/s, the batches (12%) a wake fell in took 92 us from start to sink against 66 us (p50)
 * when it woke for every group; with four groups a wake, 255 rather than 688 wakes per 2,038
 * batches. The driver's wakes that it brings (a chunk done, outputs due: one a chunk here)
 * still cost the batch they fall in ~45 us (12% of them, p50 108-114 us). */
#define ARM_AHEAD_NS 30000u
#define ARM_GROUPS 4
/* ... or this long after the due time when no next group is known yet. */
#define SETTLE_NS 100000u

typedef struct {
    sc_extbuf *hold;
    int64_t offset, n, seq0, done;
} pacer_job;

struct sc_pacer {
    sc_prog *p;
    sc_schema in;
    bool lean;
    double rate;
    int64_t batch_size, group;
    uint64_t origin_ns, catchup_ns;

    pthread_t thread;
    bool started;
    pthread_mutex_t mu;
    pthread_cond_t work; /* the pacer thread waits: jobs, a halt, the next due time */
    pthread_cond_t news; /* the driver waits: sc_pacer_wait, sc_pacer_halt */
    pacer_job jobs[PACER_JOBS];
    int head, njobs;
    int64_t pushed;
    int err;
    bool news_flag, quit;
    bool anchored; /* the first job was taken: origin_ns is the schedule's (pacer_main) */
    int halting; /* atomic: read by a push waiting on a full pipeline, without mu */
    /* the rows of the batch the pacer thread is between taking and accounting for (0: none;
     * a batch has at least one row), or of the batches handed to the workers */
    int64_t in_flight;
    /* the batches handed to the workers (narmed 0: none), from the head job (each
     * the pipeline's once a worker pushed it), their rows, and when this thread takes it back */
    sc_batch *armed[SC_POOL_ARM_MAX];
    int64_t armed_rows[SC_POOL_ARM_MAX];
    uint64_t armed_due[SC_POOL_ARM_MAX];
    int narmed;
    uint64_t armed_wake;
};

static void timespec_at(struct timespec *ts, uint64_t ns) {
    ts->tv_sec = (time_t)(ns / 1000000000ull);
    ts->tv_nsec = (long)(ns % 1000000000ull);
}

/* Under mu: when the batch at `row` is due, the origin moved forward first where the
 * schedule fell more than catchup_ns behind (pacing.TokenBucket.due). */
static uint64_t due_of(sc_pacer *pc, int64_t row, uint64_t now) {
    uint64_t at = sc_paced_due(pc->origin_ns, row, pc->group, pc->rate);
    if (now > at + pc->catchup_ns) {
        uint64_t behind = now - at - pc->catchup_ns;
        pc->origin_ns += behind;
        at += behind;
    }
    return at;
}

static void drop_jobs(sc_pacer *pc) {
    while (pc->njobs) {
        sc_extbuf_unref(pc->jobs[pc->head].hold);
        pc->jobs[pc->head].hold = NULL;
        pc->head = (pc->head + 1) % PACER_JOBS;
        pc->njobs--;
    }
}

static void tell(sc_pacer *pc) {
    pc->news_flag = true;
    pthread_cond_broadcast(&pc->news);
}

/* A batch of m rows of `hold` from `offset`, source rows from seq, imported by the worker that
 * runs it. */
static int new_batch(sc_pacer *pc, sc_batch **out, sc_extbuf *hold, int64_t offset, int64_t m, int64_t seq) {
    sc_batch *b = NULL;
    int rc = sc_batch_new_shell(&b, &pc->in);
    if (rc != SC_OK) return rc;
    b->lean = pc->lean;
    rc = sc_arrow_defer(b, hold, offset, m, seq);
    if (rc != SC_OK) {
        sc_batch_release(b);
        return rc;
    }
    *out = b;
    return SC_OK;
}

/* Under mu: m more rows of the head job went in. */
static void account(sc_pacer *pc, int64_t m) {
    pacer_job *j = &pc->jobs[pc->head];
    j->done += m;
    pc->pushed += m;
    if (j->done == j->n) {
        sc_extbuf_unref(j->hold);
        j->hold = NULL;
        pc->head = (pc->head + 1) % PACER_JOBS;
        pc->njobs--;
        tell(pc);
    }
}

/* Under mu: hand the head job's batches from `row` (the first m rows, due at `due`) to the
 * workers: ARM_GROUPS groups of them at most. Fails (nothing handed over) when the program has
 * no pool or a batch cannot be made. */
static int arm_group(sc_pacer *pc, int64_t row, int64_t m, uint64_t due, uint64_t now) {
    pacer_job *j = &pc->jobs[pc->head];
    int n = 0, groups = 1, rc = SC_OK;
    int64_t off = j->done, rows = 0;
    uint64_t at = due, last = due;
    for (;;) {
        if ((rc = new_batch(pc, &pc->armed[n], j->hold, j->offset + off, m, row)) != SC_OK) break;
        pc->armed_due[n] = at;
        pc->armed_rows[n++] = m;
        last = at;
        rows += m;
        off += m;
        row += m;
        if (off == j->n) break;
        m = j->n - off < pc->batch_size ? j->n - off : pc->batch_size;
        at = due_of(pc, row + m - 1, now);
        if (n == SC_POOL_ARM_MAX || (at != last && ++groups > ARM_GROUPS)) break; /* for the next hand-over */
    }
    uint64_t next = off < j->n ? due_of(pc, row + m - 1, now) : 0; /* the batch after these */
    if (rc == SC_OK) rc = n ? sc_prog_arm(pc->p, pc->armed, pc->armed_due, n, next) : SC_EINVAL;
    if (rc != SC_OK) {
        for (int i = 0; i < n; i++) sc_batch_release(pc->armed[i]);
        return rc;
    }
    pc->narmed = n;
    pc->in_flight = rows;
    pc->armed_wake = next > last + ARM_AHEAD_NS ? next - ARM_AHEAD_NS : last + SETTLE_NS;
    return SC_OK;
}

/* Under mu: take the armed batches back (sc_prog_disarm). What a worker pushed counts; the rest
 * is released, and this thread pushes those rows itself when it goes on (they are due). */
static void settle_armed(sc_pacer *pc) {
    if (!pc->narmed) return;
    int k = 0, rc = SC_OK;
    sc_prog_disarm(pc->p, &k, &rc);
    int64_t rows = 0;
    for (int i = 0; i < k; i++) rows += pc->armed_rows[i];
    for (int i = k; i < pc->narmed; i++) sc_batch_release(pc->armed[i]);
    pc->narmed = 0;
    pc->in_flight = 0;
    if (rows) account(pc, rows);
    if (rc != SC_OK && rc != SC_EFULL) { /* closed (a stop) or failed: nothing more goes in */
        pc->err = rc;
        drop_jobs(pc);
        tell(pc);
    } else if (rows && sc_prog_take_due(pc->p)) {
        tell(pc);
    }
}

/* One batch of m rows of job j, pushed; waits on a full pipeline until a halt. */
static int push_batch(sc_pacer *pc, sc_extbuf *hold, int64_t offset, int64_t m, int64_t seq) {
    sc_batch *b = NULL;
    int rc = new_batch(pc, &b, hold, offset, m, seq);
    if (rc != SC_OK) return rc;
    while (rc == SC_OK) {
        rc = sc_prog_push(pc->p, b, PUSH_WAIT_NS);
        if (rc == SC_OK) return SC_OK;
        if (rc != SC_EFULL || __atomic_load_n(&pc->halting, __ATOMIC_ACQUIRE)) break;
        rc = SC_OK;
    }
    sc_batch_release(b);
    return rc;
}

static void *pacer_main(void *arg) {
    sc_pacer *pc = arg;
#ifdef __linux__
    prctl(PR_SET_NAME, (unsigned long)"sc-pacer", 0UL, 0UL, 0UL); /* as top, perf and py-spy show it */
    prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL); /* a sleep ends when the batch is due, not 50 us later */
#endif
    sc_malloc_warm(); /* before the schedule starts (pacer.h) */
    pthread_mutex_lock(&pc->mu);
    for (;;) {
        if (pc->quit) break;
        if (__atomic_load_n(&pc->halting, __ATOMIC_ACQUIRE)) {
            settle_armed(pc);
            drop_jobs(pc);
            __atomic_store_n(&pc->halting, 0, __ATOMIC_RELEASE);
            tell(pc);
            continue;
        }
        if (pc->narmed) { /* batches with the workers: taken back when the next are handed over */
            if (sc_now_ns() < pc->armed_wake) {
                struct timespec ts;
                timespec_at(&ts, pc->armed_wake);
                pthread_cond_timedwait(&pc->work, &pc->mu, &ts);
            } else {
                settle_armed(pc);
            }
            continue;
        }
        if (!pc->njobs || pc->err) {
            sc_prog_expect(pc->p, 0);
            pthread_cond_wait(&pc->work, &pc->mu);
            continue;
        }
        pacer_job *j = &pc->jobs[pc->head];
        int64_t row = j->seq0 + j->done;
        if (!pc->anchored) { /* the schedule starts when the first rows are here to go in */
            uint64_t now = sc_now_ns(), at = sc_paced_due(pc->origin_ns, row, pc->group, pc->rate);
            if (now > at) pc->origin_ns += now - at;
            pc->anchored = true;
        }
        int64_t m = j->n - j->done < pc->batch_size ? j->n - j->done : pc->batch_size;
        /* due with its last row: a job need not start on a batch boundary (the source's
         * chunks have any size), and a batch that crosses into the next group waits for it */
        uint64_t now = sc_now_ns(), due = due_of(pc, row + m - 1, now);
        if (now < due) { /* sleep until due; a submit, halt or quit wakes it early */
            bool spin = pc->batch_size >= EXPECT_MIN_ROWS;
            /* workers spinning for it push it themselves (ARM_AHEAD_NS) */
            if (spin && due - now <= ARM_AHEAD_NS && arm_group(pc, row, m, due, now) == SC_OK) continue;
            if (spin) sc_prog_expect(pc->p, due); /* workers up for it */
            struct timespec ts;
            timespec_at(&ts, spin && due > now + ARM_AHEAD_NS ? due - ARM_AHEAD_NS : due);
            pthread_cond_timedwait(&pc->work, &pc->mu, &ts);
            continue;
        }
        sc_extbuf *hold = j->hold;
        int64_t offset = j->offset + j->done;
        pc->in_flight = m;
        pthread_mutex_unlock(&pc->mu);
        int rc = push_batch(pc, hold, offset, m, row);
        bool due_out = rc == SC_OK && sc_prog_take_due(pc->p);
        pthread_mutex_lock(&pc->mu);
        pc->in_flight = 0;
        if (rc == SC_OK) { /* the job is still the head: only this thread pops, a halt waits for no batch in flight */
            bool last = j->done + m == j->n;
            account(pc, m);
            if (!last && due_out) tell(pc);
        } else if (!(rc == SC_EFULL && __atomic_load_n(&pc->halting, __ATOMIC_ACQUIRE))) {
            pc->err = rc; /* closed (a stop) or failed: nothing more goes in */
            drop_jobs(pc);
            tell(pc);
        }
    }
    settle_armed(pc);
    drop_jobs(pc);
    sc_prog_expect(pc->p, 0);
    pthread_mutex_unlock(&pc->mu);
    return NULL;
}

int sc_pacer_create(sc_pacer **out, sc_prog *p, const sc_schema *in, bool lean, double rate,
                    int64_t batch_size, int64_t burst, uint64_t origin_ns, uint64_t catchup_ns) {
    *out = NULL;
    if (!p || !(rate > 0) || batch_size <= 0 || burst <= 0) return SC_EINVAL;
    sc_pacer *pc = calloc(1, sizeof *pc);
    if (!pc) return SC_ENOMEM;
    int rc = sc_schema_copy(&pc->in, in);
    if (rc) {
        free(pc);
        return rc;
    }
    pc->p = p;
    pc->lean = lean;
    pc->rate = rate;
    pc->batch_size = batch_size;
    pc->group = batch_size * burst;
    pc->origin_ns = origin_ns;
    pc->catchup_ns = catchup_ns;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* sc_now_ns's clock */
    pthread_mutex_init(&pc->mu, NULL);
    pthread_cond_init(&pc->work, &ca);
    pthread_cond_init(&pc->news, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&pc->thread, NULL, pacer_main, pc) != 0) {
        sc_pacer_destroy(pc);
        return SC_ENOMEM;
    }
    pc->started = true;
    sc_prog_spread(p); /* a paced run's workers on separate cores (runtime/pool.h) */
    *out = pc;
    return SC_OK;
}

int sc_pacer_submit(sc_pacer *pc, sc_extbuf *hold, int64_t offset, int64_t n, int64_t seq0) {
    if (!hold || n <= 0 || offset < 0) return SC_EINVAL;
    const struct ArrowArray *a = sc_arrow_hold_array(hold);
    if (!a || offset > a->length || n > a->length - offset) return SC_EINVAL; /* rows it has */
    pthread_mutex_lock(&pc->mu);
    int rc = pc->err ? pc->err : pc->njobs == PACER_JOBS ? SC_EFULL : SC_OK;
    if (rc == SC_OK) {
        sc_extbuf_ref(hold);
        pc->jobs[(pc->head + pc->njobs) % PACER_JOBS] = (pacer_job){ hold, offset, n, seq0, 0 };
        pc->njobs++;
        pthread_cond_signal(&pc->work);
    }
    pthread_mutex_unlock(&pc->mu);
    return rc;
}

int sc_pacer_wait(sc_pacer *pc, int64_t timeout_ns, int64_t *pushed, int *idle) {
    pthread_mutex_lock(&pc->mu);
    if (!pc->news_flag && !pc->err && timeout_ns > 0) {
        struct timespec ts;
        timespec_at(&ts, sc_now_ns() + (uint64_t)timeout_ns);
        while (!pc->news_flag && !pc->err) {
            if (pthread_cond_timedwait(&pc->news, &pc->mu, &ts) == ETIMEDOUT) break;
        }
    }
    pc->news_flag = false;
    *pushed = pc->pushed;
    *idle = pc->njobs == 0;
    int rc = pc->err;
    pthread_mutex_unlock(&pc->mu);
    return rc;
}

int64_t sc_pacer_pushed(sc_pacer *pc, int64_t *in_flight) {
    pthread_mutex_lock(&pc->mu);
    int64_t n = pc->pushed;
    if (in_flight) *in_flight = pc->in_flight;
    pthread_mutex_unlock(&pc->mu);
    return n;
}

int sc_pacer_halt(sc_pacer *pc, int64_t *pushed) {
    pthread_mutex_lock(&pc->mu);
    if (pc->njobs || pc->in_flight) {
        __atomic_store_n(&pc->halting, 1, __ATOMIC_RELEASE);
        pthread_cond_signal(&pc->work);
        while (__atomic_load_n(&pc->halting, __ATOMIC_ACQUIRE) || pc->in_flight)
            pthread_cond_wait(&pc->news, &pc->mu);
    }
    pc->news_flag = false;
    *pushed = pc->pushed;
    int rc = pc->err;
    pthread_mutex_unlock(&pc->mu);
    return rc;
}

void sc_pacer_destroy(sc_pacer *pc) {
    if (!pc) return;
    if (pc->started) {
        pthread_mutex_lock(&pc->mu);
        pc->quit = true;
        __atomic_store_n(&pc->halting, 1, __ATOMIC_RELEASE); /* a push on a full pipeline gives up */
        pthread_cond_signal(&pc->work);
        pthread_mutex_unlock(&pc->mu);
        pthread_join(pc->thread, NULL);
    }
    drop_jobs(pc);
    pthread_cond_destroy(&pc->work);
    pthread_cond_destroy(&pc->news);
    pthread_mutex_destroy(&pc->mu);
    sc_schema_free(&pc->in);
    free(pc);
}
