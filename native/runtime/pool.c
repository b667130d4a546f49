/* pool: see pool.h for the contract.
 *
 * Data path for operator j (inputs numbered by in_serial_j, outputs leaving through ro_j):
 *   deliver(j)  : credit check in_serial_j - next(ro_j) < window, stamp serial, enqueue
 *                 (ring or hybrid queue), in_serial_j++. Called only by the single producer
 *                 of j: sc_pool_push for j = 0, else ro_{j-1}'s drainer, one at a time.
 *   worker      : dequeue, run, sc_reorder_send(ro_j, serial, output); the credit makes the
 *                 send always fit in the window, so a worker never spins on the reorder.
 *   ro_j emit   : deliver(j + 1) batch by batch, or the sink; SC_EFULL leaves the head in
 *                 ro_j, and any thread's help_drains() retries it later.
 * Finished: input closed and next(ro_j) == in_serial_j for every j, read from first to last
 * (a delivery into j+1 completes before next(ro_j) moves, so upstream-first reads are safe).
 */
#define _GNU_SOURCE /* sched_setaffinity, CPU_SET */
#include "pool.h"

#include <linux/futex.h>
#include <sched.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <stdlib.h>
#include <unistd.h>

#include "atomic_ext.h"
#include "ring.h"

typedef struct sc_pool_op {
    struct sc_pool *pool;
    uint32_t index;
    sc_op_desc d;
    sc_ring *ring;  /* stateless (MPMC) or stateful (SPSC) worklist */
    sc_hq *hq;      /* partitioned worklist */
    sc_reorder *ro;
    uint64_t mask;  /* window - 1 */
    SC_ALIGNED sc_atomic_u64 in_serial;
    SC_ALIGNED sc_atomic_u64 done_ticket; /* unordered ablation: completion order */
    uint64_t carry_marker; /* emitter-private: marker of inputs that produced no output */
    uint64_t *skip_marker; /* [window]: marker of a serial whose output is `nothing` */
    char nothing;          /* &nothing is the reorder item for "no output" */
} sc_pool_op;

typedef struct { struct sc_pool *p; uint32_t id; } sc_worker_arg;

struct sc_pool {
    sc_pool_config cfg;
    uint32_t nops;
    sc_pool_op *ops;
    sc_sched *sched;
    sc_metrics *metrics;
    sc_sink_fn sink;
    void *sink_state;
    pthread_t *threads;
    sc_worker_arg *wargs;
    uint32_t nthreads;
    uint64_t pushed; /* source side */
    uint64_t sink_serial; /* touched only by the last reorder buffer's drainer */
    SC_ALIGNED sc_atomic_i64 state;
    sc_atomic_u64 stop;
    sc_atomic_u64 input_closed;
    sc_atomic_i64 error;
    sc_atomic_u64 error_op;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    /* parked idle workers (park / wake_parked): an event count; a waker bumps `wake_seq`
     * only when `sleepers` says someone may be asleep on it */
    SC_ALIGNED sc_atomic_u32 wake_seq;
    sc_atomic_u32 sleepers;
    /* when the next batch is due (sc_pool_expect; 0: not known) */
    SC_ALIGNED sc_atomic_u64 expect_ns;
    /* batches a paced feeder handed over for idle workers to push, each when it is due
     * (sc_pool_arm): the fields below arm_state are the feeder's until it arms them, then
     * those of the worker holding the slot (ARM_TAKEN) until it hands it back, and the
     * feeder's again once it took them back (sc_pool_disarm) */
    SC_ALIGNED sc_atomic_u64 arm_state;
    sc_atomic_u64 arm_at; /* when the next batch to push is due: read before taking the slot */
    uint64_t arm_due[SC_POOL_ARM_MAX], arm_next;
    sc_batch *arm_b[SC_POOL_ARM_MAX];
    int arm_n, arm_pushed, arm_rc;
};

enum { ARM_EMPTY, ARM_ARMED, ARM_TAKEN, ARM_DONE };

/* An idle worker spins, then yields a few times, then parks on a futex until work arrives:
 * a paced source leaves workers idle most of the time, and polling sleeps there cost more
 * CPU than the batches themselves. PARK_NS bounds a missed wake-up: every known source of
 * work wakes them, and a timeout keeps any unforeseen one from stalling a run. */
#define PARK_AFTER_STEPS (SC_BACKOFF_YIELD + 4) /* the spins and four yields */
#define PARK_NS 2000000L
/* The spin before parking adapts, as adaptive mutexes do: it halves (down to a few short
 * spins) each time it ends in a park and doubles back when work turns up while it spins.
 * A paced source pushes a batch every 200 us, far beyond any spin: the whole spin (tens of
 * microseconds of pause loops and yields per batch) was then pure waste, a quarter of a core
 * at 10k rows/s and CPU the other threads lacked near peak. Bulk runs find work at once. */
#define PARK_MIN_STEPS 4u

static void wake_parked(sc_pool *p, int n);

/* A paced source's pusher says when its next batch is due (sc_pool_expect). An idle worker
 * then parks only until EXPECT_EARLY_NS before it and spins from there until the batch is in
 * (or EXPECT_LATE_NS past the due time), so the batch does not wait for a parked worker to
 * be woken: on this VM an idle core halts, and a futex wake took it tens of microseconds to
 * run the batch, part of every batch's latency. The spin costs the early margin per batch. */
#define EXPECT_EARLY_NS 20000u
#define EXPECT_LATE_NS 50000u

/* Whether work is due about now: spin for it rather than park. */
static bool expecting(const sc_pool *p) {
    uint64_t due = sc_u64_load_relaxed(&p->expect_ns);
    if (!due) return false; /* no clock read: the common case */
    uint64_t now = sc_now_ns();
    return now + EXPECT_EARLY_NS >= due && now < due + EXPECT_LATE_NS;
}

static void park(sc_pool *p, uint32_t seq) {
    long ns = PARK_NS;
    uint64_t due = sc_u64_load_relaxed(&p->expect_ns), now = sc_now_ns();
    if (due && due > now + EXPECT_EARLY_NS && due - now - EXPECT_EARLY_NS < (uint64_t)ns)
        ns = (long)(due - now - EXPECT_EARLY_NS); /* up in time to spin for it */
    struct timespec ts = { 0, ns };
    syscall(SYS_futex, &p->wake_seq.v, FUTEX_WAIT_PRIVATE, seq, &ts, NULL, 0);
}

void sc_pool_spread(sc_pool *p) {
    const char *env = getenv("STREAMCELL_SPREAD_WORKERS");
    uint32_t n = p->nthreads;
    if (n < 2 || (env && env[0] == '0')) return;
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return;
    if ((uint32_t)CPU_COUNT(&allowed) < n) return; /* more workers than cores: they share */
    for (uint32_t i = 0; i < n; i++) {
        cpu_set_t mine;
        CPU_ZERO(&mine);
        uint32_t rank = 0;
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &allowed) && rank++ % n == i) CPU_SET(c, &mine);
        pthread_setaffinity_np(p->threads[i], sizeof mine, &mine); /* best effort */
    }
}

uint64_t sc_pool_worker_cpus(const sc_pool *p, uint32_t i) {
    cpu_set_t set;
    if (i >= p->nthreads || pthread_getaffinity_np(p->threads[i], sizeof set, &set) != 0) return 0;
    uint64_t mask = 0;
    for (int c = 0; c < 64; c++)
        if (CPU_ISSET(c, &set)) mask |= 1ull << c;
    return mask;
}

int sc_pool_arm(sc_pool *p, sc_batch *const *b, const uint64_t *due_ns, int n, uint64_t next_ns) {
    if (n <= 0 || n > SC_POOL_ARM_MAX || sc_u64_load_acquire(&p->arm_state) != ARM_EMPTY) return SC_EINVAL;
    for (int i = 0; i < n; i++) {
        if (i && due_ns[i] < due_ns[i - 1]) return SC_EINVAL;
        p->arm_b[i] = b[i];
        p->arm_due[i] = due_ns[i];
    }
    p->arm_n = n;
    p->arm_next = next_ns;
    sc_u64_store_relaxed(&p->arm_at, due_ns[0]);
    p->arm_pushed = 0;
    p->arm_rc = SC_OK;
    sc_u64_store_release(&p->arm_state, ARM_ARMED);
    sc_u64_store_release(&p->expect_ns, due_ns[0]);
    /* workers up for it, whenever it is due (not only when it is sooner than expected, as
     * sc_pool_expect wakes them): one parked until shortly before the due time may wake late
     * (a timer on an idle core of this VM), one parked past it never would */
    wake_parked(p, INT32_MAX);
    return SC_OK;
}

void sc_pool_disarm(sc_pool *p, int *pushed, int *rc) {
    *pushed = 0;
    *rc = SC_OK;
    for (;;) {
        uint64_t s = sc_u64_load_acquire(&p->arm_state);
        if (s == ARM_EMPTY) return;
        if (s == ARM_ARMED) { /* taken back: the batches no worker pushed yet */
            if (sc_u64_cas_acqrel(&p->arm_state, &s, ARM_EMPTY)) {
                *pushed = p->arm_pushed;
                return;
            }
            continue;
        }
        if (s == ARM_DONE) {
            *pushed = p->arm_pushed;
            *rc = p->arm_rc;
            sc_u64_store_release(&p->arm_state, ARM_EMPTY);
            return;
        }
        sched_yield(); /* a worker is pushing them: a few microseconds */
    }
}

/* An idle worker pushes the next of the armed batches once it is due (sc_pool_arm), as the
 * feeder would have, and then runs it: one batch each, so that a group's batches run side by
 * side (a worker that pushed them all took them all in its grant, one after the other). The
 * one that takes the slot is the single producer until it hands it back. True when it pushed
 * one. */
static bool take_armed(sc_pool *p) {
    uint64_t s = sc_u64_load_acquire(&p->arm_state);
    if (s != ARM_ARMED) return false; /* the common case: one load */
    uint64_t now = sc_now_ns();
    if (now < sc_u64_load_relaxed(&p->arm_at) || !sc_u64_cas_acqrel(&p->arm_state, &s, ARM_TAKEN)) return false;
    int k = p->arm_pushed;
    if (now < p->arm_due[k]) { /* another worker pushed one since the look above */
        sc_u64_store_release(&p->arm_state, ARM_ARMED);
        return false;
    }
    int rc = sc_pool_push(p, p->arm_b[k], 0);
    if (rc == SC_OK) p->arm_pushed = ++k;
    else p->arm_rc = rc; /* SC_EFULL: the feeder pushes the rest itself */
    bool done = rc != SC_OK || k == p->arm_n;
    /* the next batch's due time, when it is a later group's: idle workers park until shortly
     * before it (sc_pool_expect) */
    uint64_t next = done ? p->arm_next : p->arm_due[k];
    if (next && (done || next != p->arm_due[k - 1])) sc_u64_store_release(&p->expect_ns, next);
    if (!done) sc_u64_store_relaxed(&p->arm_at, p->arm_due[k]);
    sc_u64_store_release(&p->arm_state, done ? ARM_DONE : ARM_ARMED);
    return rc == SC_OK;
}

void sc_pool_expect(sc_pool *p, uint64_t due_ns) {
    uint64_t was = sc_u64_load_relaxed(&p->expect_ns);
    if (was == due_ns) return;
    sc_u64_store_release(&p->expect_ns, due_ns);
    /* a worker parked for longer than this allows: up in time (it parks again if early) */
    if (due_ns && (!was || due_ns < was)) wake_parked(p, INT32_MAX);
}

/* Wake up to n parked workers (INT32_MAX: all). `sleepers` is read by a seq_cst RMW, a full
 * barrier after the caller's publication of work; a worker counts itself (also seq_cst)
 * before its last look for work, so either it sees the work or this sees it (and then its
 * futex wait fails on the new seq). */
static void wake_parked(sc_pool *p, int n) {
    if (sc_u32_fetch_add_seqcst(&p->sleepers, 0) == 0) return;
    sc_u32_fetch_add_seqcst(&p->wake_seq, 1);
    syscall(SYS_futex, &p->wake_seq.v, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

void sc_pool_wake(sc_pool *p) { wake_parked(p, INT32_MAX); }
uint32_t sc_pool_parked(const sc_pool *p) { return sc_u32_load_acquire(&p->sleepers); }

static void notify(sc_pool *p) {
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    wake_parked(p, INT32_MAX);
}

static void record_error(sc_pool *p, uint32_t op, int rc) {
    int64_t zero = 0;
    if (sc_i64_cas_acqrel(&p->error, &zero, rc)) sc_u64_store_release(&p->error_op, op);
    sc_u64_store_release(&p->stop, 1);
    notify(p);
}

static bool stopping(const sc_pool *p) {
    return sc_u64_load_acquire(&p->stop) || sc_i64_load_acquire(&p->state) == SC_POOL_FINISHED;
}

/* Hand one batch to operator j (or the sink when j == nops). Single producer per j. */
static int deliver(sc_pool *p, uint32_t j, sc_batch *b) {
    if (j == p->nops) {
        uint64_t marker = b->marker_ns;
        b->serial = p->sink_serial;
        int rc = p->sink(p->sink_state, b);
        if (rc == SC_OK) p->sink_serial++;
        if (rc == SC_OK && marker && p->metrics) {
            uint64_t now = sc_now_ns();
            sc_metrics_latency_record(p->metrics, now > marker ? now - marker : 0);
        }
        if (rc < 0 && rc != SC_EFULL) record_error(p, j, rc);
        return rc;
    }
    sc_pool_op *op = &p->ops[j];
    uint64_t t = sc_u64_load_relaxed(&op->in_serial);
    if (t - sc_reorder_next(op->ro) > op->mask) return SC_EFULL; /* no credit */
    b->serial = t;
    if (op->hq) { /* the partition function reads the rows */
        int rc = sc_batch_ready(b);
        if (rc != SC_OK) {
            record_error(p, j, rc);
            return rc;
        }
    }
    int rc = op->hq ? sc_hq_add(op->hq, op->d.partition(op->d.state, b), b) : sc_ring_try_push(op->ring, b);
    if (rc != SC_OK) {
        if (rc != SC_EFULL) record_error(p, j, rc);
        return rc;
    }
    sc_sched_queue_add(p->sched, j, 1);
    sc_u64_store_release(&op->in_serial, t + 1);
    /* one worker can take it; a lane of the partitioned-queue ablation only its owner */
    wake_parked(p, op->hq && p->cfg.keyed == SC_HQ_PARTITIONED ? INT32_MAX : 1);
    return SC_OK;
}

/* reorder emit for operator op: forward the output(s) of one serial downstream */
static int op_emit(void *ctx, uint64_t serial, void **item) {
    sc_pool_op *op = ctx;
    if (*item == &op->nothing) {
        uint64_t m = op->skip_marker[serial & op->mask];
        if (m && (!op->carry_marker || m < op->carry_marker)) op->carry_marker = m;
        return SC_OK;
    }
    sc_batch *b = *item;
    if (op->carry_marker) {
        if (!b->marker_ns || op->carry_marker < b->marker_ns) b->marker_ns = op->carry_marker;
        op->carry_marker = 0;
    }
    while (b) {
        sc_batch *next = b->next;
        b->next = NULL;
        int rc = deliver(op->pool, op->index + 1, b);
        if (rc != SC_OK) {
            b->next = next;
            *item = b;
            return rc;
        }
        b = next;
    }
    return SC_OK;
}

/* Retry reorder heads held back by a full downstream, last operator first. */
static void help_drains(sc_pool *p) {
    for (uint32_t j = p->nops; j-- > 0;)
        if (sc_reorder_has_ready(p->ops[j].ro)) sc_reorder_drain(p->ops[j].ro);
}

static bool check_finished(sc_pool *p) {
    if (!sc_u64_load_acquire(&p->input_closed)) return false;
    for (uint32_t j = 0; j < p->nops; j++) {
        uint64_t in = sc_u64_load_acquire(&p->ops[j].in_serial);
        if (sc_reorder_next(p->ops[j].ro) != in) return false;
    }
    return true;
}

typedef struct { uint64_t in, out; } sc_counts;

static int send_output(sc_pool *p, sc_pool_op *op, uint64_t serial, void *item) {
    sc_backoff bo;
    sc_backoff_reset(&bo);
    int rc;
    /* the credit guarantees serial < next + window, so this loop runs once */
    while ((rc = sc_reorder_send(op->ro, serial, item)) == SC_EFULL) {
        SC_INVARIANT(0, "pool: output outside the reorder window despite the credit");
        if (sc_u64_load_acquire(&p->stop)) {
            if (item != &op->nothing) sc_batch_release_chain(item);
            return SC_ECLOSED;
        }
        help_drains(p);
        sc_backoff_wait(&bo, p->cfg.idle_sleep_ns);
    }
    return rc; /* errors from downstream were recorded by deliver */
}

static int process_one(sc_pool *p, sc_pool_op *op, sc_batch *b, sc_counts *c) {
    uint64_t serial = b->serial, marker = b->marker_ns;
    int64_t rows_in = b->nrows;
    bool eos = b->eos;
    sc_batch *out = NULL;
    int rc = sc_batch_ready(b); /* a deferred batch is imported here, on this worker */
    if (rc != SC_OK) {
        sc_batch_release(b);
        record_error(p, op->index, rc);
        return rc;
    }
    rc = op->d.run(op->d.state, b, &out);
    if (rc < 0) {
        record_error(p, op->index, rc);
        return rc;
    }
    c->in++;
    uint64_t rows_out = 0, nout = 0;
    void *item = &op->nothing;
    if (p->cfg.unordered && op->d.kind == SC_OP_STATELESS) {
        /* the end-of-stream marker (the last serial) still leaves last: it waits until every
         * earlier input has taken its ticket (they are running on other workers) */
        sc_backoff bo;
        sc_backoff_reset(&bo);
        while (eos && sc_u64_load_acquire(&op->done_ticket) != serial && !sc_u64_load_acquire(&p->stop))
            sc_backoff_wait(&bo, p->cfg.idle_sleep_ns);
        serial = sc_u64_fetch_add_acqrel(&op->done_ticket, 1); /* < next + window, as serial */
    }
    if (out) {
        if (marker && !out->marker_ns) out->marker_ns = marker;
        for (sc_batch *o = out; o; o = o->next) { rows_out += (uint64_t)o->nrows; nout++; }
        item = out;
        c->out++;
    } else {
        op->skip_marker[serial & op->mask] = marker;
    }
    if (p->metrics) sc_metrics_op_add(p->metrics, op->index, (uint64_t)rows_in, rows_out, 1, nout, 0);
    rc = send_output(p, op, serial, item);
    return rc == SC_EFULL ? SC_OK : rc;
}

typedef struct { sc_pool *p; sc_pool_op *op; sc_counts *c; } sc_hq_ctx;

static int hq_process(void *vctx, uint32_t partition, void *item) {
    sc_hq_ctx *x = vctx;
    sc_sched_queue_add(x->p->sched, x->op->index, -1);
    return process_one(x->p, x->op, item, x->c);
}

static int run_grant(sc_pool *p, uint32_t worker, const sc_sched_grant *g, sc_counts *c) {
    sc_pool_op *op = &p->ops[g->op];
    if (op->hq) {
        sc_hq_ctx x = { p, op, c };
        return sc_hq_consume(op->hq, worker, g->quota, hq_process, &x, NULL);
    }
    for (uint32_t k = 0; k < g->quota && !sc_u64_load_relaxed(&p->stop); k++) {
        void *item;
        if (sc_ring_try_pop(op->ring, &item) != SC_OK) break;
        sc_sched_queue_add(p->sched, g->op, -1);
        int rc = process_one(p, op, item, c);
        if (rc < 0) return rc;
    }
    return SC_OK;
}

static void *worker_main(void *arg) {
    sc_worker_arg *w = arg;
    sc_pool *p = w->p;
    /* an idle worker's backoff sleeps a few microseconds at a time: without this the kernel
     * may stretch each sleep by its default 50 us timer slack, which a batch then waits for */
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
    prctl(PR_SET_NAME, (unsigned long)"sc-worker", 0, 0, 0); /* as top, perf and py-spy show it */
    sc_malloc_warm(); /* before its first batch */
    sc_backoff bo;
    sc_backoff_reset(&bo);
    uint32_t seq = 0;
    bool armed = false;                /* counted in `sleepers`: one more look for work, then park */
    uint32_t budget = PARK_AFTER_STEPS; /* backoff steps before parking (adaptive, above) */
    bool parked = false;               /* since the last work */
    while (!stopping(p)) {
        if (sc_i64_load_acquire(&p->state) == SC_POOL_PAUSED) {
            pthread_mutex_lock(&p->mu);
            while (sc_i64_load_acquire(&p->state) == SC_POOL_PAUSED && !sc_u64_load_acquire(&p->stop))
                pthread_cond_wait(&p->cv, &p->mu);
            pthread_mutex_unlock(&p->mu);
            continue;
        }
        help_drains(p);
        sc_sched_grant g;
        if (sc_sched_acquire(p->sched, w->id, &g) != SC_OK) {
            if (take_armed(p)) continue; /* a paced batch, due: pushed, now to be run */
            if (check_finished(p)) { /* also on the last look: close_input may have come between */
                int64_t running = SC_POOL_RUNNING;
                sc_i64_cas_acqrel(&p->state, &running, SC_POOL_FINISHED);
                notify(p);
                break;
            }
            if (expecting(p)) { /* a batch is due about now: wait for it here */
                if (armed) {
                    sc_u32_fetch_sub_seqcst(&p->sleepers, 1);
                    armed = false;
                }
                sched_yield(); /* a pusher or driver woken on this core runs at once */
                continue;
            }
            if (armed) { /* nothing on the last look: sleep until a delivery or a control call */
                park(p, seq);
                sc_u32_fetch_sub_seqcst(&p->sleepers, 1);
                armed = false;
                parked = true;
                continue;
            }
            if (bo.step >= budget) { /* the spin found nothing: shorter next time */
                budget = budget / 2 > PARK_MIN_STEPS ? budget / 2 : PARK_MIN_STEPS;
                seq = sc_u32_load_acquire(&p->wake_seq);
                sc_u32_fetch_add_seqcst(&p->sleepers, 1);
                armed = true;
                continue;
            }
            sc_backoff_wait(&bo, p->cfg.idle_sleep_ns);
            continue;
        }
        if (armed) {
            sc_u32_fetch_sub_seqcst(&p->sleepers, 1);
            armed = false;
        }
        if (bo.step && !parked) /* the spin found work: longer next time */
            budget = 2 * budget < PARK_AFTER_STEPS ? 2 * budget : PARK_AFTER_STEPS;
        parked = false;
        sc_counts c = {0, 0};
        int rc = run_grant(p, w->id, &g, &c);
        uint64_t ns = sc_now_ns() - g.t_start_ns;
        sc_sched_release(p->sched, &g, c.in, c.out, ns);
        if (p->metrics) {
            sc_sched_op_stats st;
            sc_sched_stats(p->sched, g.op, &st);
            sc_metrics_op_add(p->metrics, g.op, 0, 0, 0, 0, ns);
            sc_metrics_op_gauge(p->metrics, g.op, st.queued, st.workers);
        }
        if (rc < 0) break; /* recorded; the run stops */
        if (c.in == 0) sc_backoff_wait(&bo, p->cfg.idle_sleep_ns);
        else sc_backoff_reset(&bo);
    }
    if (armed) sc_u32_fetch_sub_seqcst(&p->sleepers, 1);
    return NULL;
}

static void drop_batch(void *ctx, void *item) {
    sc_pool_op *op = ctx;
    if (item != &op->nothing) sc_batch_release_chain(item);
}

static void free_ops(sc_pool *p) {
    for (uint32_t j = 0; p->ops && j < p->nops; j++) {
        sc_pool_op *op = &p->ops[j];
        if (op->ring) {
            void *item;
            while (sc_ring_try_pop(op->ring, &item) == SC_OK) sc_batch_release_chain(item);
            sc_ring_destroy(op->ring);
        }
        sc_hq_destroy(op->hq, drop_batch, op);
        sc_reorder_destroy(op->ro, drop_batch, op);
        free(op->skip_marker);
    }
    free(p->ops);
}

int sc_pool_create(sc_pool **out, const sc_pool_config *cfg_in, const sc_op_desc *ops, uint32_t nops,
                   sc_sink_fn sink, void *sink_state, sc_metrics *metrics) {
    if (!out || !cfg_in || !ops || nops == 0 || nops > SC_SCHED_MAX_OPS || !sink || cfg_in->workers == 0 ||
        cfg_in->workers > 1024 || (metrics && sc_metrics_nops(metrics) < nops))
        return SC_EINVAL;
    sc_pool_config cfg = *cfg_in;
    if (!cfg.partitions) cfg.partitions = 256;
    if (!cfg.window) cfg.window = 256;
    if (!cfg.idle_sleep_ns) cfg.idle_sleep_ns = 50000;
    uint32_t window = 1;
    while (window < cfg.window) window <<= 1;
    cfg.window = window;
    sc_op_kind kinds[SC_SCHED_MAX_OPS];
    uint32_t maxw[SC_SCHED_MAX_OPS];
    for (uint32_t j = 0; j < nops; j++) {
        if (!ops[j].run || (ops[j].kind == SC_OP_PARTITIONED && !ops[j].partition)) return SC_EINVAL;
        kinds[j] = ops[j].kind;
        maxw[j] = ops[j].max_workers;
        if (ops[j].kind == SC_OP_PARTITIONED) {
            uint32_t par = cfg.keyed == SC_HQ_PARTITIONED ? cfg.workers : cfg.partitions;
            if (!maxw[j] || maxw[j] > par) maxw[j] = par;
        }
    }
    sc_pool *p = calloc(1, sizeof *p);
    if (!p) return SC_ENOMEM;
    p->cfg = cfg;
    p->nops = nops;
    p->sink = sink;
    p->sink_state = sink_state;
    p->metrics = metrics;
    sc_i64_init(&p->state, SC_POOL_CREATED);
    sc_u64_init(&p->stop, 0);
    sc_u64_init(&p->input_closed, 0);
    sc_i64_init(&p->error, 0);
    sc_u64_init(&p->error_op, 0);
    sc_u32_init(&p->wake_seq, 0);
    sc_u32_init(&p->sleepers, 0);
    sc_u64_init(&p->expect_ns, 0);
    sc_u64_init(&p->arm_state, ARM_EMPTY);
    sc_u64_init(&p->arm_at, 0);
    pthread_mutex_init(&p->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->cv, &ca);
    pthread_condattr_destroy(&ca);
    int rc = sc_sched_create(&p->sched, &cfg.sched, nops, kinds, maxw, cfg.workers);
    p->ops = sc_alloc_aligned(sizeof(sc_pool_op) * nops);
    p->threads = calloc(cfg.workers, sizeof(pthread_t));
    p->wargs = calloc(cfg.workers, sizeof(sc_worker_arg));
    if (rc == SC_OK && (!p->ops || !p->threads || !p->wargs)) rc = SC_ENOMEM;
    if (p->ops) memset(p->ops, 0, sizeof(sc_pool_op) * nops);
    for (uint32_t j = 0; rc == SC_OK && j < nops; j++) {
        sc_pool_op *op = &p->ops[j];
        op->pool = p;
        op->index = j;
        op->d = ops[j];
        op->mask = window - 1;
        sc_u64_init(&op->in_serial, 0);
        sc_u64_init(&op->done_ticket, 0);
        op->skip_marker = calloc(window, sizeof(uint64_t));
        if (!op->skip_marker) { rc = SC_ENOMEM; break; }
        rc = sc_reorder_create(&op->ro, cfg.reorder, window, 0, op_emit, op);
        if (rc) break;
        if (ops[j].kind == SC_OP_PARTITIONED) {
            sc_hq_config hc = { .kind = cfg.keyed, .partitions = cfg.partitions, .lanes = cfg.workers,
                                .capacity = window, .partition_capacity = cfg.partition_capacity };
            rc = sc_hq_create(&op->hq, &hc);
        } else {
            rc = sc_ring_create(&op->ring, ops[j].kind == SC_OP_STATEFUL ? SC_RING_SPSC : SC_RING_MPMC, window);
        }
    }
    if (rc != SC_OK) {
        free_ops(p);
        p->ops = NULL;
        sc_pool_destroy(p);
        return rc;
    }
    *out = p;
    return SC_OK;
}

int sc_pool_start(sc_pool *p) {
    int64_t created = SC_POOL_CREATED;
    if (!sc_i64_cas_acqrel(&p->state, &created, SC_POOL_RUNNING)) return SC_EINVAL;
    for (uint32_t i = 0; i < p->cfg.workers; i++) {
        p->wargs[i] = (sc_worker_arg){ p, i };
        if (pthread_create(&p->threads[i], NULL, worker_main, &p->wargs[i]) != 0) {
            record_error(p, p->nops, SC_ENOMEM);
            sc_pool_stop(p);
            return SC_ENOMEM;
        }
        p->nthreads = i + 1;
    }
    return SC_OK;
}

int sc_pool_push(sc_pool *p, sc_batch *b, int64_t timeout_ns) {
    if (!b || b->next) return SC_EINVAL;
    if (sc_u64_load_acquire(&p->input_closed) || sc_u64_load_acquire(&p->stop)) return SC_ECLOSED;
    if (p->cfg.marker_every && p->pushed % p->cfg.marker_every == 0 && !b->marker_ns) b->marker_ns = sc_now_ns();
    uint64_t deadline = timeout_ns >= 0 ? sc_now_ns() + (uint64_t)timeout_ns : UINT64_MAX;
    /* a full pipeline has a window of work queued: the pusher yields and sleeps at once
     * instead of spinning, which would take a core from the workers it waits for */
    sc_backoff bo = { .step = SC_BACKOFF_YIELD };
    for (;;) {
        int rc = deliver(p, 0, b);
        if (rc == SC_OK) {
            p->pushed++;
            return SC_OK;
        }
        if (rc != SC_EFULL) return rc;
        if (sc_u64_load_acquire(&p->stop)) return SC_ECLOSED;
        if (sc_now_ns() >= deadline) return SC_EFULL;
        help_drains(p); /* wait and help: never drop */
        sc_backoff_wait(&bo, p->cfg.idle_sleep_ns);
    }
}

int sc_pool_close_input(sc_pool *p) {
    sc_u64_store_release(&p->input_closed, 1);
    wake_parked(p, INT32_MAX); /* a parked worker notices the end */
    return SC_OK;
}

int sc_pool_wait(sc_pool *p, int64_t timeout_ns, bool *done) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    if (timeout_ns >= 0) {
        uint64_t ns = (uint64_t)ts.tv_nsec + (uint64_t)timeout_ns;
        ts.tv_sec += (time_t)(ns / 1000000000ull);
        ts.tv_nsec = (long)(ns % 1000000000ull);
    }
    pthread_mutex_lock(&p->mu);
    bool fin;
    for (;;) {
        int64_t st = sc_i64_load_acquire(&p->state);
        fin = st == SC_POOL_FINISHED || st == SC_POOL_STOPPED || sc_i64_load_acquire(&p->error) != 0;
        if (fin || st == SC_POOL_CREATED) break;
        int w = timeout_ns >= 0 ? pthread_cond_timedwait(&p->cv, &p->mu, &ts) : pthread_cond_wait(&p->cv, &p->mu);
        if (w != 0) {
            st = sc_i64_load_acquire(&p->state);
            fin = st == SC_POOL_FINISHED || st == SC_POOL_STOPPED || sc_i64_load_acquire(&p->error) != 0;
            break;
        }
    }
    pthread_mutex_unlock(&p->mu);
    if (done) *done = fin;
    return (int)sc_i64_load_acquire(&p->error);
}

int sc_pool_pause(sc_pool *p) {
    int64_t running = SC_POOL_RUNNING;
    if (!sc_i64_cas_acqrel(&p->state, &running, SC_POOL_PAUSED)) return SC_EINVAL;
    return SC_OK;
}

int sc_pool_resume(sc_pool *p) {
    int64_t paused = SC_POOL_PAUSED;
    if (!sc_i64_cas_acqrel(&p->state, &paused, SC_POOL_RUNNING)) return SC_EINVAL;
    notify(p);
    return SC_OK;
}

int sc_pool_stop(sc_pool *p) {
    sc_u64_store_release(&p->stop, 1);
    notify(p);
    for (uint32_t i = 0; i < p->nthreads; i++) pthread_join(p->threads[i], NULL);
    p->nthreads = 0;
    int64_t st = sc_i64_load_acquire(&p->state);
    if (st != SC_POOL_FINISHED) sc_i64_store_release(&p->state, SC_POOL_STOPPED);
    notify(p);
    return (int)sc_i64_load_acquire(&p->error);
}

void sc_pool_destroy(sc_pool *p) {
    if (!p) return;
    if (p->nthreads) sc_pool_stop(p);
    free_ops(p);
    sc_sched_destroy(p->sched);
    free(p->threads);
    free(p->wargs);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

sc_pool_state sc_pool_get_state(const sc_pool *p) { return (sc_pool_state)sc_i64_load_acquire(&p->state); }

int sc_pool_error(const sc_pool *p, uint32_t *op) {
    int rc = (int)sc_i64_load_acquire(&p->error);
    if (op) *op = rc ? (uint32_t)sc_u64_load_acquire(&p->error_op) : 0;
    return rc;
}

const sc_sched *sc_pool_scheduler(const sc_pool *p) { return p->sched; }
