/* Generic concurrent sketch: see concurrent.h for the algorithm and the contract. */
#include "sketch/concurrent.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sc_atomic.h"
#include "sc_status.h"

#ifdef SC_DEBUG
#include <assert.h>
#define SC_DBG_ASSERT(x) assert(x)
#else
#define SC_DBG_ASSERT(x) ((void)0)
#endif

typedef struct SC_ALIGNED conc_writer {
    /* owner-only (or the flush, holding the writer's try-lock) */
    void *local[2];
    int cur;            /* index of the local being filled; local[1-cur] may be pending */
    uint64_t counter;   /* updates in local[cur] */
    uint64_t hint;
    /* shared with the propagator, on its own cache line: the propagator polls `prop` while
     * the writer updates its owner-only fields above */
    SC_ALIGNED sc_atomic_u64 prop; /* 0 = local[1-cur] pending; 1 = merged and reset */
    sc_atomic_u64 hint_pub;  /* hint written by the merger before prop := 1 */
    sc_atomic_i64 busy;      /* the writer lock: 0 free, 1 its writer, 2 a flush / close */
} conc_writer;

struct sc_concurrent {
    const sc_sketch_vtable *vt;
    uint32_t nw;
    uint64_t b;
    uint64_t eager_limit;
    void *global;
    pthread_mutex_t merge_mu;   /* serialises every change of the global sketch */
    pthread_t prop_thread;
    int prop_started;
    sc_atomic_i64 eager;        /* 1 while eager */
    sc_atomic_i64 stop;
    sc_atomic_i64 closed;
    sc_atomic_i64 sleeping;     /* the propagator is (about to be) asleep on wake_cv */
    pthread_mutex_t wake_mu;
    pthread_cond_t wake_cv;
    int wake_flag;
    /* published summary (seqlock; single publisher at a time: the merge lock holder) */
    SC_ALIGNED sc_atomic_u64 seq;
    sc_atomic_u64 words[SC_CONC_SUMMARY_WORDS];
    sc_atomic_u64 pub_n, pub_props, pub_eager_merges, pub_eager;
    uint64_t propagations, eager_merges;  /* under merge_mu */
    sc_atomic_i64 merge_err;    /* the first failed propagation (SC_ENOMEM): sticky */
    conc_writer *w;
};

/* ---- publishing (caller holds merge_mu) ---- */

static void publish_locked(sc_concurrent *c) {
    uint64_t words[SC_CONC_SUMMARY_WORDS] = {0};
    if (c->vt->summarize) c->vt->summarize(c->global, words);
    uint64_t s = sc_u64_load_relaxed(&c->seq);
    sc_u64_store_relaxed(&c->seq, s + 1);
    atomic_thread_fence(memory_order_release);
    for (int i = 0; i < SC_CONC_SUMMARY_WORDS; i++) sc_u64_store_relaxed(&c->words[i], words[i]);
    sc_u64_store_relaxed(&c->pub_n, c->vt->n(c->global));
    sc_u64_store_relaxed(&c->pub_props, c->propagations);
    sc_u64_store_relaxed(&c->pub_eager_merges, c->eager_merges);
    sc_u64_store_relaxed(&c->pub_eager, (uint64_t)sc_i64_load_relaxed(&c->eager));
    sc_u64_store_release(&c->seq, s + 2);
}

void sc_conc_summary(const sc_concurrent *c, uint64_t out[SC_CONC_SUMMARY_WORDS],
                     sc_conc_stats *st) {
    for (;;) {
        uint64_t s1 = sc_u64_load_acquire(&c->seq);
        if (s1 & 1) {
            sc_cpu_relax();
            continue;
        }
        for (int i = 0; i < SC_CONC_SUMMARY_WORDS; i++) out[i] = sc_u64_load_relaxed(&c->words[i]);
        sc_conc_stats tmp = {s1, sc_u64_load_relaxed(&c->pub_n), sc_u64_load_relaxed(&c->pub_props),
                             sc_u64_load_relaxed(&c->pub_eager_merges),
                             (int)sc_u64_load_relaxed(&c->pub_eager)};
        atomic_thread_fence(memory_order_acquire);
        if (sc_u64_load_relaxed(&c->seq) == s1) {
            if (st) *st = tmp;
            return;
        }
    }
}

/* merge one local into the global sketch; caller holds merge_mu */
static int merge_locked(sc_concurrent *c, void *local) {
    int rc = c->vt->merge_into(c->global, local);
    c->vt->reset(local);
    if (sc_i64_load_relaxed(&c->eager) && c->vt->n(c->global) >= c->eager_limit)
        sc_i64_store_relaxed(&c->eager, 0);
    publish_locked(c);
    return rc;
}

/* ---- propagator ---- */

static void wake_propagator(sc_concurrent *c) {
    /* Dekker pairing with the propagator: prop := 0 (seq_cst) then read sleeping (seq_cst) */
    if (atomic_load_explicit(&c->sleeping.v, memory_order_seq_cst)) {
        pthread_mutex_lock(&c->wake_mu);
        c->wake_flag = 1;
        pthread_cond_signal(&c->wake_cv);
        pthread_mutex_unlock(&c->wake_mu);
    }
}

static int propagate_pending(sc_concurrent *c) {
    int did = 0;
    for (uint32_t i = 0; i < c->nw; i++) {
        conc_writer *w = &c->w[i];
        if (atomic_load_explicit(&w->prop.v, memory_order_seq_cst) != 0) continue;
        void *pending = w->local[1 - w->cur]; /* stable while prop == 0 */
        pthread_mutex_lock(&c->merge_mu);
        c->propagations++;
        int rc = merge_locked(c, pending); /* fails only on ENOMEM of the global */
        if (rc && !sc_i64_load_relaxed(&c->merge_err)) sc_i64_store_release(&c->merge_err, rc);
        uint64_t h = c->vt->hint(c->global);
        pthread_mutex_unlock(&c->merge_mu);
        sc_u64_store_relaxed(&w->hint_pub, h);
        sc_u64_store_release(&w->prop, 1);
        did++;
    }
    return did;
}

static void *propagator_main(void *arg) {
    sc_concurrent *c = (sc_concurrent *)arg;
    while (!sc_i64_load_acquire(&c->stop)) {
        if (propagate_pending(c)) continue;
        int found = 0;
        for (int spin = 0; spin < 256 && !found; spin++) {
            sc_cpu_relax();
            for (uint32_t i = 0; i < c->nw && !found; i++)
                found = sc_u64_load_relaxed(&c->w[i].prop) == 0;
        }
        if (found) continue;
        atomic_store_explicit(&c->sleeping.v, 1, memory_order_seq_cst);
        for (uint32_t i = 0; i < c->nw && !found; i++)
            found = atomic_load_explicit(&c->w[i].prop.v, memory_order_seq_cst) == 0;
        if (!found && !sc_i64_load_acquire(&c->stop)) {
            pthread_mutex_lock(&c->wake_mu);
            if (!c->wake_flag) {
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                ts.tv_nsec += 5 * 1000 * 1000; /* safety net only; wake-ups are signalled */
                if (ts.tv_nsec >= 1000000000L) {
                    ts.tv_sec++;
                    ts.tv_nsec -= 1000000000L;
                }
                pthread_cond_timedwait(&c->wake_cv, &c->wake_mu, &ts);
            }
            c->wake_flag = 0;
            pthread_mutex_unlock(&c->wake_mu);
        }
        atomic_store_explicit(&c->sleeping.v, 0, memory_order_seq_cst);
    }
    propagate_pending(c);
    return NULL;
}

/* ---- the per-writer lock ---- */

enum { BUSY_FREE = 0, BUSY_WRITER = 1, BUSY_FLUSH = 2 };

/* a flush / close waits for the writer's in-flight batch, then holds the writer briefly */
static void lock_for_flush(conc_writer *w) {
    for (;;) {
        int64_t expected = BUSY_FREE;
        if (sc_i64_cas_acqrel(&w->busy, &expected, BUSY_FLUSH)) return;
        sched_yield();
    }
}
static void unlock_writer(conc_writer *w) { sc_i64_store_release(&w->busy, BUSY_FREE); }

/* ---- lifecycle ---- */

int sc_conc_create(sc_concurrent **out, const sc_conc_config *cfg) {
    *out = NULL;
    if (!cfg || !cfg->vt || cfg->writers < 1 || cfg->writers > SC_CONC_MAX_WRITERS || cfg->buffer < 1)
        return SC_EINVAL;
    sc_concurrent *c = aligned_alloc(SC_CACHELINE, (sizeof *c + SC_CACHELINE - 1) / SC_CACHELINE * SC_CACHELINE);
    if (!c) return SC_ENOMEM;
    memset(c, 0, sizeof *c);
    c->vt = cfg->vt;
    c->nw = cfg->writers;
    c->b = cfg->buffer;
    c->eager_limit = cfg->eager_limit;
    const void *lcfg = cfg->local_config ? cfg->local_config : cfg->global_config;
    c->w = aligned_alloc(SC_CACHELINE, sizeof(conc_writer) * c->nw);
    c->global = c->vt->create(cfg->global_config);
    if (!c->w || !c->global) goto nomem;
    memset(c->w, 0, sizeof(conc_writer) * c->nw);
    for (uint32_t i = 0; i < c->nw; i++) {
        conc_writer *w = &c->w[i];
        for (int j = 0; j < 2; j++)
            if (!(w->local[j] = c->vt->create(lcfg))) goto nomem;
        w->hint = c->vt->hint(c->global);
        sc_u64_init(&w->prop, 1);
        sc_u64_init(&w->hint_pub, w->hint);
        sc_i64_init(&w->busy, 0);
    }
    sc_i64_init(&c->eager, c->eager_limit > 0 && c->vt->n(c->global) < c->eager_limit);
    sc_i64_init(&c->stop, 0);
    sc_i64_init(&c->closed, 0);
    sc_i64_init(&c->sleeping, 0);
    sc_i64_init(&c->merge_err, 0);
    sc_u64_init(&c->seq, 0);
    pthread_mutex_init(&c->merge_mu, NULL);
    pthread_mutex_init(&c->wake_mu, NULL);
    pthread_cond_init(&c->wake_cv, NULL);
    pthread_mutex_lock(&c->merge_mu);
    publish_locked(c);
    pthread_mutex_unlock(&c->merge_mu);
    if (pthread_create(&c->prop_thread, NULL, propagator_main, c) != 0) {
        sc_conc_destroy(c);
        return SC_ENOMEM;
    }
    c->prop_started = 1;
    *out = c;
    return SC_OK;
nomem:
    if (c->w)
        for (uint32_t i = 0; i < c->nw; i++)
            for (int j = 0; j < 2; j++)
                if (c->w[i].local[j]) c->vt->destroy(c->w[i].local[j]);
    if (c->global) c->vt->destroy(c->global);
    free(c->w);
    free(c);
    return SC_ENOMEM;
}

static void stop_propagator(sc_concurrent *c) {
    if (!c->prop_started) return;
    sc_i64_store_release(&c->stop, 1);
    pthread_mutex_lock(&c->wake_mu);
    c->wake_flag = 1;
    pthread_cond_signal(&c->wake_cv);
    pthread_mutex_unlock(&c->wake_mu);
    pthread_join(c->prop_thread, NULL);
    c->prop_started = 0;
}

int sc_conc_close(sc_concurrent *c) {
    if (!c) return SC_OK;
    if (sc_i64_load_acquire(&c->closed)) return SC_OK;
    int rc = sc_conc_flush(c);
    for (uint32_t i = 0; i < c->nw; i++) lock_for_flush(&c->w[i]); /* bar new batches */
    sc_i64_store_release(&c->closed, 1);
    for (uint32_t i = 0; i < c->nw; i++) unlock_writer(&c->w[i]);
    stop_propagator(c);
    return rc;
}

void sc_conc_destroy(sc_concurrent *c) {
    if (!c) return;
    stop_propagator(c);
    for (uint32_t i = 0; i < c->nw; i++)
        for (int j = 0; j < 2; j++) c->vt->destroy(c->w[i].local[j]);
    c->vt->destroy(c->global);
    pthread_mutex_destroy(&c->merge_mu);
    pthread_mutex_destroy(&c->wake_mu);
    pthread_cond_destroy(&c->wake_cv);
    free(c->w);
    free(c);
}

/* ---- writer side ---- */

int sc_conc_writer_enter(sc_concurrent *c, uint32_t w) {
    if (w >= c->nw) return SC_EINVAL;
    conc_writer *wr = &c->w[w];
    for (;;) { /* another thread on the same writer: refuse; a flush: wait it out (short) */
        int64_t expected = BUSY_FREE;
        if (sc_i64_cas_acqrel(&wr->busy, &expected, BUSY_WRITER)) break;
        if (expected == BUSY_WRITER) return SC_EFULL;
        sched_yield();
    }
    if (sc_i64_load_acquire(&c->closed)) {
        unlock_writer(wr);
        return SC_ECLOSED;
    }
    return SC_OK;
}

void sc_conc_writer_exit(sc_concurrent *c, uint32_t w) { unlock_writer(&c->w[w]); }

void *sc_conc_local(sc_concurrent *c, uint32_t w) { return c->w[w].local[c->w[w].cur]; }
uint64_t sc_conc_hint(sc_concurrent *c, uint32_t w) { return c->w[w].hint; }

uint64_t sc_conc_room(sc_concurrent *c, uint32_t w) {
    if (sc_i64_load_relaxed(&c->eager)) return 1;
    conc_writer *wr = &c->w[w];
    return wr->counter >= c->b ? 1 : c->b - wr->counter;
}

/* wait until writer w's other buffer is merged (prop != 0); spin, then yield */
static void wait_prop(conc_writer *w) {
    for (int spin = 0; sc_u64_load_acquire(&w->prop) == 0; spin++) {
        if (spin < 512) sc_cpu_relax();
        else sched_yield();
    }
}

/* flip buffers and hand the full one to the propagator (Algorithm 2, lines 125-129) */
static void hand_off(sc_concurrent *c, conc_writer *w) {
    wait_prop(w);
    w->hint = sc_u64_load_relaxed(&w->hint_pub);
    w->cur = 1 - w->cur;
    w->counter = 0;
    atomic_store_explicit(&w->prop.v, 0, memory_order_seq_cst);
    wake_propagator(c);
}

int sc_conc_added(sc_concurrent *c, uint32_t w, uint64_t k) {
    conc_writer *wr = &c->w[w];
    wr->counter += k;
    if (sc_i64_load_relaxed(&c->eager)) {
        /* eager: the writer merges its own local now (b = 1); the merge lock orders it with
         * other eager writers and with the propagator (which drains any earlier lazy buffer) */
        pthread_mutex_lock(&c->merge_mu);
        c->eager_merges++;
        int rc = merge_locked(c, wr->local[wr->cur]);
        wr->hint = c->vt->hint(c->global);
        pthread_mutex_unlock(&c->merge_mu);
        wr->counter = 0;
        return rc;
    }
    if (wr->counter >= c->b) hand_off(c, wr);
    return (int)sc_i64_load_acquire(&c->merge_err); /* a batch the propagator could not merge */
}

/* ---- any thread ---- */

int sc_conc_flush(sc_concurrent *c) {
    if (sc_i64_load_acquire(&c->closed)) return SC_OK;
    for (uint32_t i = 0; i < c->nw; i++) {
        conc_writer *w = &c->w[i];
        lock_for_flush(w);
        if (w->counter > 0) hand_off(c, w);
        wait_prop(w);
        w->hint = sc_u64_load_relaxed(&w->hint_pub);
        unlock_writer(w);
    }
    pthread_mutex_lock(&c->merge_mu);
    int rc = (int)sc_i64_load_acquire(&c->merge_err);
    if (!rc && c->vt->finalize) rc = c->vt->finalize(c->global);
    publish_locked(c);
    uint64_t h = c->vt->hint(c->global);
    pthread_mutex_unlock(&c->merge_mu);
    for (uint32_t i = 0; i < c->nw; i++) sc_u64_store_relaxed(&c->w[i].hint_pub, h);
    return rc;
}

int sc_conc_snapshot(sc_concurrent *c, void **out) {
    *out = NULL;
    int rc = (int)sc_i64_load_acquire(&c->merge_err); /* never a sketch missing a batch */
    if (rc) return rc;
    pthread_mutex_lock(&c->merge_mu);
    rc = c->vt->copy(out, c->global);
    pthread_mutex_unlock(&c->merge_mu);
    return rc;
}

uint64_t sc_conc_relaxation(const sc_concurrent *c) { return 2 * (uint64_t)c->nw * c->b; }
uint32_t sc_conc_writers(const sc_concurrent *c) { return c->nw; }
const sc_sketch_vtable *sc_conc_vtable(const sc_concurrent *c) { return c->vt; }
