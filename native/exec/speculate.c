/* speculate: speculative transactions with ordered commit (see speculate.h). */
#include "speculate.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../common/sc_atomic.h"
#include "../common/sc_status.h"

#ifndef SC_DEBUG
#define SC_DEBUG 0
#endif

/* ---- the committed store: chained hash of nodes, published with release, never freed
 * while a run is in flight. `version` is 0 for "absent" and 2 * commit number otherwise
 * (monotone per node); only the committer writes value (relaxed) then version (release), and
 * a reader loads version (acquire) then value, so the value it sees is at least as new as
 * the version it records: a newer value comes with a changed version, which validation
 * rejects. ---- */

typedef struct node {
    int64_t key;
    sc_atomic_i64 value;
    sc_atomic_u64 version;
    struct node *next; /* immutable once published */
} node;

#define NODE_CHUNK 1024

typedef struct chunk {
    struct chunk *prev;
    node nodes[NODE_CHUNK];
} chunk;

typedef struct rentry {
    int64_t key;
    node *n;          /* NULL: the key was absent */
    uint64_t version; /* the version read (0 when absent) */
} rentry;

typedef struct wentry {
    int64_t key;
    int64_t value;
} wentry;

typedef struct slot {
    sc_txn tx; /* tx.impl = this slot */
    sc_spec *s;
    rentry *rs;
    wentry *ws;
    int64_t nr, cr, nw, cw;
    bool oom;
    sc_spec_result res;
    sc_atomic_i64 done; /* ev + 1 once an execution of event ev in this slot has finished */
    char pad[SC_CACHELINE];
} slot;

typedef struct run {
    int64_t n;
    sc_spec_task_fn task;
    void *ctx;
    sc_spec_result *results;
    sc_atomic_i64 head; /* earliest uncommitted event */
    sc_atomic_i64 next; /* next event to claim */
    sc_atomic_i64 err;  /* first error of a worker (negative), 0 if none */
} run;

struct sc_spec {
    sc_spec_config cfg;
    uint32_t nslots;
    slot *slots;
    /* store */
    sc_atomic_ptr *buckets;
    uint64_t mask;
    sc_atomic_i64 count;
    sc_atomic_i64 nbuckets; /* mask + 1, for statistics read from other threads */
    chunk *chunks;
    int32_t chunk_used;
    uint64_t cseq; /* commits ever (committer only) */
    sc_atomic_flag_t commit;
    /* predictor */
    sc_atomic_i64 horizon;
    uint32_t win_commits, win_aborts; /* committer only */
    sc_atomic_u64 commits, aborts, hsum;
    sc_atomic_i64 set_bytes;
    sc_atomic_i64 cancel;
    /* workers waiting for the head to move */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    sc_atomic_i64 nwait;
    /* helper threads */
    pthread_t *threads;
    uint32_t nthreads;
    pthread_mutex_t jmu;
    pthread_cond_t jcv, jdone;
    uint64_t gen;
    uint32_t active;
    bool shutdown;
    run *job;
};

static inline uint64_t mix(int64_t k) {
    uint64_t x = (uint64_t)k;
    x ^= x >> 33;
    x *= UINT64_C(0xff51afd7ed558ccd);
    x ^= x >> 33;
    x *= UINT64_C(0xc4ceb9fe1a85ec53);
    x ^= x >> 33;
    return x;
}

static node *lookup(const sc_spec *s, int64_t key) {
    node *n = sc_ptr_load_acquire(&s->buckets[mix(key) & s->mask]);
    while (n && n->key != key) n = n->next;
    return n;
}

/* Committer only. */
static node *insert(sc_spec *s, int64_t key, int64_t value, uint64_t version) {
    if (!s->chunks || s->chunk_used == NODE_CHUNK) {
        chunk *c = malloc(sizeof *c);
        if (!c) return NULL;
        c->prev = s->chunks;
        s->chunks = c;
        s->chunk_used = 0;
    }
    node *n = &s->chunks->nodes[s->chunk_used++];
    n->key = key;
    sc_i64_init(&n->value, value);
    sc_u64_init(&n->version, version);
    sc_atomic_ptr *b = &s->buckets[mix(key) & s->mask];
    n->next = sc_ptr_load_acquire(b);
    sc_ptr_store_release(b, n);
    sc_i64_fetch_add_relaxed(&s->count, 1);
    return n;
}

/* Between runs only: keep the load factor at most 1/2. */
static int grow_buckets(sc_spec *s) {
    uint64_t nb = s->mask + 1, want = nb;
    int64_t cnt = sc_i64_load_relaxed(&s->count);
    while ((uint64_t)cnt * 2 > want) want *= 2;
    if (want == nb) return SC_OK;
    sc_atomic_ptr *nbk = malloc(want * sizeof *nbk);
    if (!nbk) return SC_ENOMEM;
    for (uint64_t i = 0; i < want; i++) sc_ptr_init(&nbk[i], NULL);
    for (uint64_t i = 0; i < nb; i++) {
        node *n = sc_ptr_load_acquire(&s->buckets[i]);
        while (n) {
            node *nx = n->next;
            sc_atomic_ptr *b = &nbk[mix(n->key) & (want - 1)];
            n->next = sc_ptr_load_acquire(b);
            sc_ptr_store_release(b, n);
            n = nx;
        }
    }
    free(s->buckets);
    s->buckets = nbk;
    s->mask = want - 1;
    sc_i64_store_relaxed(&s->nbuckets, (int64_t)want);
    return SC_OK;
}

/* ---- the transaction vtable (exec/txn.h) ---- */

static bool grow(void **p, int64_t *cap, size_t elem, sc_spec *s) {
    int64_t nc = *cap ? *cap * 2 : 16;
    void *q = realloc(*p, (size_t)nc * elem);
    if (!q) return false;
    sc_i64_fetch_add_relaxed(&s->set_bytes, (nc - *cap) * (int64_t)elem);
    *p = q;
    *cap = nc;
    return true;
}

static int64_t tx_get(sc_txn *tx, int64_t key) {
    slot *sl = tx->impl;
    for (int64_t j = sl->nw - 1; j >= 0; j--)
        if (sl->ws[j].key == key) return sl->ws[j].value;
    node *n = lookup(sl->s, key);
    uint64_t v = 0;
    int64_t val = 0;
    if (n) {
        v = sc_u64_load_acquire(&n->version);
        val = sc_i64_load_relaxed(&n->value);
    }
    if (sl->nr == sl->cr && !grow((void **)&sl->rs, &sl->cr, sizeof(rentry), sl->s)) {
        sl->oom = true;
        return val;
    }
    sl->rs[sl->nr++] = (rentry){key, n, v};
    return val;
}

static void tx_put(sc_txn *tx, int64_t key, int64_t value) {
    slot *sl = tx->impl;
    for (int64_t j = sl->nw - 1; j >= 0; j--)
        if (sl->ws[j].key == key) {
            sl->ws[j].value = value;
            return;
        }
    if (sl->nw == sl->cw && !grow((void **)&sl->ws, &sl->cw, sizeof(wentry), sl->s)) {
        sl->oom = true;
        return;
    }
    sl->ws[sl->nw++] = (wentry){key, value};
}

/* ---- execution, validation, commit ---- */

static inline slot *slot_of(sc_spec *s, int64_t ev) { return &s->slots[ev % s->nslots]; }

static void execute(run *r, slot *sl, int64_t ev) {
    sl->nr = sl->nw = 0;
    sl->res.bits = 0;
    sl->res.ok = 0;
    r->task(r->ctx, &sl->tx, ev, &sl->res);
}

/* Committer only: every read still current? */
static bool validate(const sc_spec *s, const slot *sl) {
    for (int64_t j = 0; j < sl->nr; j++) {
        const rentry *e = &sl->rs[j];
        if (e->n) {
            if (sc_u64_load_relaxed(&e->n->version) != e->version) return false;
        } else if (lookup(s, e->key)) {
            return false;
        }
    }
    return true;
}

/* Committer only. */
static int apply(sc_spec *s, const slot *sl) {
    uint64_t ver = 2 * ++s->cseq;
    for (int64_t j = 0; j < sl->nw; j++) {
        const wentry *w = &sl->ws[j];
        node *n = lookup(s, w->key);
        if (!n) {
            if (!insert(s, w->key, w->value, ver)) return SC_ENOMEM;
            continue;
        }
        sc_i64_store_relaxed(&n->value, w->value);
        sc_u64_store_release(&n->version, ver);
    }
    return SC_OK;
}

/* The adaptive predictor (committer only): one window of commits -> new horizon. */
static void predict(sc_spec *s, bool aborted) {
    int64_t h = sc_i64_load_relaxed(&s->horizon);
    sc_u64_fetch_add_relaxed(&s->hsum, (uint64_t)h);
    if (s->cfg.horizon) return;
    s->win_commits++;
    s->win_aborts += aborted;
    if (s->win_commits < SC_SPEC_WINDOW) return;
    double rate = (double)s->win_aborts / s->win_commits;
    if (rate > SC_SPEC_ABORT_HIGH) h = h / 2 > 1 ? h / 2 : 1;
    else if (rate < SC_SPEC_ABORT_LOW && h < (int64_t)s->nslots) h++;
    sc_i64_store_relaxed(&s->horizon, h);
    s->win_commits = s->win_aborts = 0;
}

static void wake(sc_spec *s) {
    if (atomic_load_explicit(&s->nwait.v, memory_order_seq_cst) > 0) {
        pthread_mutex_lock(&s->mu);
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
    }
}

static inline bool head_ready(sc_spec *s, run *r) {
    int64_t h = sc_i64_load_acquire(&r->head);
    return h < r->n && sc_i64_load_acquire(&slot_of(s, h)->done) == h + 1;
}

/* Commit every ready event at the head, if no one else is committing. Whoever releases the
 * flag re-checks the head, so an event finished while the flag was held is never left. */
static int try_commit(sc_spec *s, run *r) {
    while (head_ready(s, r) && !sc_i64_load_relaxed(&s->cancel)) {
        if (!sc_flag_try_acquire(&s->commit)) return SC_OK;
        int rc = SC_OK;
        for (;;) {
            int64_t h = sc_i64_load_relaxed(&r->head);
            if (h >= r->n || sc_i64_load_relaxed(&s->cancel)) break;
            slot *sl = slot_of(s, h);
            if (sc_i64_load_acquire(&sl->done) != h + 1) break;
            bool aborted = false;
            if (sl->oom || !validate(s, sl)) {
                /* the contention manager: the head always wins; re-run it now, while no
                 * one else can commit, so this execution is valid by construction */
                aborted = !sl->oom;
                sl->oom = false;
                execute(r, sl, h);
#if SC_DEBUG
                if (!sl->oom && !validate(s, sl)) abort();
#endif
            }
            if (sl->oom) {
                rc = SC_ENOMEM;
                break;
            }
            if ((rc = apply(s, sl))) break;
            r->results[h] = sl->res;
            sc_u64_fetch_add_relaxed(&s->commits, 1);
            if (aborted) sc_u64_fetch_add_relaxed(&s->aborts, 1);
            predict(s, aborted);
            atomic_store_explicit(&r->head.v, h + 1, memory_order_seq_cst);
            wake(s);
        }
        sc_flag_release(&s->commit);
        if (rc) return rc;
    }
    return SC_OK;
}

static bool claim(sc_spec *s, run *r, int64_t *ev) {
    int64_t c = sc_i64_load_relaxed(&r->next);
    for (;;) {
        int64_t lim = sc_i64_load_acquire(&r->head) + sc_i64_load_relaxed(&s->horizon);
        if (lim > r->n) lim = r->n;
        if (c >= lim) return false;
        if (sc_i64_cas_acqrel(&r->next, &c, c + 1)) {
            *ev = c;
            return true;
        }
    }
}

/* Nothing to claim: wait until the head moves (or the run ends / is cancelled). */
static void wait_progress(sc_spec *s, run *r, int64_t h) {
    for (int i = 0; i < 200; i++) {
        if (sc_i64_load_acquire(&r->head) != h || head_ready(s, r)) return;
        if (i < 100) sc_cpu_relax();
        else sched_yield();
    }
    pthread_mutex_lock(&s->mu);
    atomic_fetch_add_explicit(&s->nwait.v, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&r->head.v, memory_order_seq_cst) == h && !head_ready(s, r) &&
        !sc_i64_load_acquire(&s->cancel) && !sc_i64_load_acquire(&r->err)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 1000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&s->cv, &s->mu, &ts);
    }
    atomic_fetch_sub_explicit(&s->nwait.v, 1, memory_order_seq_cst);
    pthread_mutex_unlock(&s->mu);
}

static void fail(run *r, int rc) {
    int64_t zero = 0;
    sc_i64_cas_acqrel(&r->err, &zero, rc);
}

static void worker(sc_spec *s, run *r) {
    for (;;) {
        if (sc_i64_load_acquire(&s->cancel) || sc_i64_load_acquire(&r->err)) return;
        int rc = try_commit(s, r);
        if (rc) {
            fail(r, rc);
            wake(s);
            return;
        }
        int64_t h = sc_i64_load_acquire(&r->head);
        if (h >= r->n) return;
        int64_t ev;
        if (claim(s, r, &ev)) {
            slot *sl = slot_of(s, ev);
            execute(r, sl, ev);
            sc_i64_store_release(&sl->done, ev + 1);
            continue;
        }
        wait_progress(s, r, h);
    }
}

static void *helper(void *arg) {
    sc_spec *s = arg;
    uint64_t seen = 0;
    pthread_mutex_lock(&s->jmu);
    for (;;) {
        while (s->gen == seen && !s->shutdown) pthread_cond_wait(&s->jcv, &s->jmu);
        if (s->shutdown) break;
        seen = s->gen;
        run *r = s->job;
        pthread_mutex_unlock(&s->jmu);
        worker(s, r);
        pthread_mutex_lock(&s->jmu);
        if (--s->active == 0) pthread_cond_signal(&s->jdone);
    }
    pthread_mutex_unlock(&s->jmu);
    return NULL;
}

/* ---- public ---- */

int sc_spec_create(sc_spec **out, const sc_spec_config *cfg) {
    *out = NULL;
    if (!cfg || cfg->workers < 1 || cfg->workers > 1024 || cfg->horizon > SC_SPEC_MAX_HORIZON ||
        cfg->max_horizon > SC_SPEC_MAX_HORIZON)
        return SC_EINVAL;
    sc_spec *s = calloc(1, sizeof *s);
    if (!s) return SC_ENOMEM;
    s->cfg = *cfg;
    uint32_t hmax = cfg->max_horizon ? cfg->max_horizon : 256;
    s->nslots = cfg->horizon ? cfg->horizon : hmax;
    uint32_t h0 = cfg->horizon ? cfg->horizon : 2 * cfg->workers;
    if (h0 > s->nslots) h0 = s->nslots;
    sc_i64_init(&s->horizon, h0);
    sc_i64_init(&s->count, 0);
    sc_u64_init(&s->commits, 0);
    sc_u64_init(&s->aborts, 0);
    sc_u64_init(&s->hsum, 0);
    sc_i64_init(&s->set_bytes, 0);
    sc_i64_init(&s->cancel, 0);
    sc_i64_init(&s->nwait, 0);
    sc_flag_init(&s->commit);
    s->mask = 1023;
    sc_i64_init(&s->nbuckets, 1024);
    s->buckets = malloc((s->mask + 1) * sizeof *s->buckets);
    s->slots = calloc(s->nslots, sizeof *s->slots);
    if (!s->buckets || !s->slots) {
        free(s->buckets);
        free(s->slots);
        free(s);
        return SC_ENOMEM;
    }
    for (uint64_t i = 0; i <= s->mask; i++) sc_ptr_init(&s->buckets[i], NULL);
    for (uint32_t i = 0; i < s->nslots; i++) {
        slot *sl = &s->slots[i];
        sl->tx.get = tx_get;
        sl->tx.put = tx_put;
        sl->tx.impl = sl;
        sl->s = s;
        sc_i64_init(&sl->done, 0);
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    pthread_mutex_init(&s->jmu, NULL);
    pthread_cond_init(&s->jcv, NULL);
    pthread_cond_init(&s->jdone, NULL);
    if (cfg->workers > 1) {
        s->threads = calloc(cfg->workers - 1, sizeof(pthread_t));
        if (!s->threads) {
            sc_spec_destroy(s);
            return SC_ENOMEM;
        }
        for (uint32_t i = 0; i + 1 < cfg->workers; i++) {
            if (pthread_create(&s->threads[i], NULL, helper, s)) {
                sc_spec_destroy(s);
                return SC_ENOMEM;
            }
            s->nthreads++;
        }
    }
    *out = s;
    return SC_OK;
}

void sc_spec_destroy(sc_spec *s) {
    if (!s) return;
    pthread_mutex_lock(&s->jmu);
    s->shutdown = true;
    pthread_cond_broadcast(&s->jcv);
    pthread_mutex_unlock(&s->jmu);
    for (uint32_t i = 0; i < s->nthreads; i++) pthread_join(s->threads[i], NULL);
    free(s->threads);
    for (uint32_t i = 0; i < s->nslots; i++) {
        free(s->slots[i].rs);
        free(s->slots[i].ws);
    }
    free(s->slots);
    while (s->chunks) {
        chunk *p = s->chunks->prev;
        free(s->chunks);
        s->chunks = p;
    }
    free(s->buckets);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->jmu);
    pthread_cond_destroy(&s->jcv);
    pthread_cond_destroy(&s->jdone);
    free(s);
}

int sc_spec_run(sc_spec *s, int64_t n, sc_spec_task_fn task, void *ctx, sc_spec_result *results) {
    if (n < 0 || !task || (n && !results)) return SC_EINVAL;
    if (sc_i64_load_acquire(&s->cancel)) return SC_ECLOSED;
    if (n == 0) return SC_OK;
    int rc = grow_buckets(s);
    if (rc) return rc;
    run r;
    r.n = n;
    r.task = task;
    r.ctx = ctx;
    r.results = results;
    sc_i64_init(&r.head, 0);
    sc_i64_init(&r.next, 0);
    sc_i64_init(&r.err, 0);
    for (uint32_t i = 0; i < s->nslots; i++) sc_i64_store_relaxed(&s->slots[i].done, 0);
    if (s->nthreads) {
        pthread_mutex_lock(&s->jmu);
        s->job = &r;
        s->active = s->nthreads;
        s->gen++;
        pthread_cond_broadcast(&s->jcv);
        pthread_mutex_unlock(&s->jmu);
    }
    worker(s, &r);
    if (s->nthreads) {
        pthread_mutex_lock(&s->jmu);
        while (s->active) pthread_cond_wait(&s->jdone, &s->jmu);
        s->job = NULL;
        pthread_mutex_unlock(&s->jmu);
    }
    rc = (int)sc_i64_load_acquire(&r.err);
    if (rc) return rc;
    if (sc_i64_load_acquire(&r.head) < n) return SC_ECLOSED;
    return SC_OK;
}

void sc_spec_cancel(sc_spec *s) {
    sc_i64_store_release(&s->cancel, 1);
    pthread_mutex_lock(&s->mu);
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

void sc_spec_get_stats(const sc_spec *s, sc_spec_stats *out) {
    memset(out, 0, sizeof *out);
    out->commits = sc_u64_load_relaxed(&s->commits);
    out->aborts = sc_u64_load_relaxed(&s->aborts);
    out->horizon = (uint32_t)sc_i64_load_relaxed(&s->horizon);
    out->workers = s->cfg.workers;
    out->adaptive = s->cfg.horizon == 0;
    uint64_t hs = sc_u64_load_relaxed(&s->hsum);
    out->horizon_mean = out->commits ? (double)hs / (double)out->commits : (double)out->horizon;
    out->keys = sc_i64_load_relaxed(&s->count);
    int64_t chunks = (out->keys + NODE_CHUNK - 1) / NODE_CHUNK;
    out->store_bytes = chunks * (int64_t)sizeof(chunk) + sc_i64_load_relaxed(&s->nbuckets) * 8 +
                       (int64_t)s->nslots * (int64_t)sizeof(slot) + sc_i64_load_relaxed(&s->set_bytes);
}

int64_t sc_spec_peek(const sc_spec *s, int64_t key) {
    node *n = lookup(s, key);
    return n ? sc_i64_load_relaxed(&n->value) : 0;
}
