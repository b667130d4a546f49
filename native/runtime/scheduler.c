/* scheduler: see scheduler.h for the contract. */
#include "scheduler.h"

#include <stdlib.h>

#include "atomic_ext.h"

typedef struct {
    SC_ALIGNED sc_atomic_i64 queued;
    sc_atomic_i64 workers;
    uint32_t max_workers;
    sc_atomic_u64 cost_bits;  /* double */
    sc_atomic_u64 sel_bits;   /* double */
    sc_atomic_u64 window_ns;  /* Tw_i */
    sc_atomic_u64 items_in, items_out, ns_total, grants;
} sc_sched_op;

struct sc_sched {
    sc_sched_config cfg;
    uint32_t nops;
    sc_sched_op *ops;
    SC_ALIGNED sc_atomic_u64 window_start;
};

const char *sc_sched_policy_name(sc_sched_policy p) {
    switch (p) {
    case SC_SCHED_CT: return "CT";
    case SC_SCHED_QST: return "QST";
    case SC_SCHED_LP: return "LP";
    case SC_SCHED_ET: return "ET";
    default: return "?";
    }
}

static void fill_defaults(sc_sched_config *c) {
    if (!c->slice_ns) c->slice_ns = 200000;
    if (!c->window_ns) c->window_ns = 10000000;
    if (c->qst_capacity <= 0) c->qst_capacity = 1024;
    if (c->ewma_alpha <= 0 || c->ewma_alpha > 1) c->ewma_alpha = 0.25;
    if (!c->max_quota) c->max_quota = 4096;
    if (!c->initial_cost_ns) c->initial_cost_ns = 1000;
}

int sc_sched_create(sc_sched **out, const sc_sched_config *cfg, uint32_t nops, const sc_op_kind *kinds,
                    const uint32_t *max_workers, uint32_t nworkers) {
    if (!out || !kinds || nops == 0 || nops > SC_SCHED_MAX_OPS || nworkers == 0) return SC_EINVAL;
    sc_sched_config c = {0};
    if (cfg) c = *cfg;
    if (c.policy < SC_SCHED_CT || c.policy > SC_SCHED_ET) return SC_EINVAL;
    fill_defaults(&c);
    sc_sched *s = sc_alloc_aligned(sizeof *s);
    if (!s) return SC_ENOMEM;
    memset(s, 0, sizeof *s);
    s->ops = sc_alloc_aligned(sizeof(sc_sched_op) * nops);
    if (!s->ops) { free(s); return SC_ENOMEM; }
    memset(s->ops, 0, sizeof(sc_sched_op) * nops);
    s->cfg = c;
    s->nops = nops;
    sc_u64_init(&s->window_start, sc_now_ns());
    for (uint32_t i = 0; i < nops; i++) {
        sc_sched_op *o = &s->ops[i];
        if (kinds[i] < SC_OP_STATELESS || kinds[i] > SC_OP_STATEFUL) { sc_sched_destroy(s); return SC_EINVAL; }
        uint32_t m = max_workers && max_workers[i] ? max_workers[i] : nworkers;
        if (m > nworkers) m = nworkers;
        if (kinds[i] == SC_OP_STATEFUL) m = 1;
        o->max_workers = m;
        sc_i64_init(&o->queued, 0);
        sc_i64_init(&o->workers, 0);
        sc_u64_init(&o->cost_bits, sc_double_as_u64((double)c.initial_cost_ns));
        sc_u64_init(&o->sel_bits, sc_double_as_u64(1.0));
        sc_u64_init(&o->window_ns, 0);
        sc_u64_init(&o->items_in, 0);
        sc_u64_init(&o->items_out, 0);
        sc_u64_init(&o->ns_total, 0);
        sc_u64_init(&o->grants, 0);
    }
    *out = s;
    return SC_OK;
}

void sc_sched_destroy(sc_sched *s) {
    if (!s) return;
    free(s->ops);
    free(s);
}

void sc_sched_queue_add(sc_sched *s, uint32_t op, int64_t delta) {
    sc_i64_fetch_add_relaxed(&s->ops[op].queued, delta);
}

static bool schedulable(const sc_sched_view *v) { return v->queued > 0 && v->workers < v->max_workers; }

int sc_sched_choose(const sc_sched_config *cfg_in, const sc_sched_view *v, uint32_t n) {
    sc_sched_config cfg = *cfg_in;
    fill_defaults(&cfg);
    int best = -1;
    switch (cfg.policy) {
    case SC_SCHED_LP:
        for (int i = (int)n - 1; i >= 0; i--)
            if (schedulable(&v[i])) return i;
        return -1;
    case SC_SCHED_QST: {
        double cs[SC_SCHED_MAX_OPS], acc = 1, sum = 0;
        for (uint32_t i = 0; i < n; i++) { acc *= v[i].selectivity; cs[i] = acc; sum += acc; }
        for (uint32_t i = 0; i < n; i++) {
            if (!schedulable(&v[i])) continue;
            if (i + 1 == n) return (int)i; /* its output is the sink: never throttled */
            double threshold = sum > 0 ? cfg.qst_capacity * cs[i] / sum : cfg.qst_capacity;
            if ((double)v[i + 1].queued < threshold) return (int)i;
        }
        cfg.policy = SC_SCHED_LP;
        return sc_sched_choose(&cfg, v, n);
    }
    case SC_SCHED_ET: {
        double bestp = 0;
        for (uint32_t i = 0; i < n; i++) {
            if (!schedulable(&v[i])) continue;
            double p = (double)v[i].queued * v[i].cost_ns / (v[i].workers + 1.0);
            if (best < 0 || p > bestp) { best = (int)i; bestp = p; }
        }
        return best;
    }
    case SC_SCHED_CT:
    default: {
        /* n_i counts op i's inputs per window; divide by the inputs op i receives per source
         * item (cs_{i-1}) to compare operators in source items. The seed writes cs_i; the
         * input-side product keeps a filter from being credited with its own discards. */
        double cs_prev = 1, bestn = 0;
        for (uint32_t i = 0; i < n; i++) {
            double c = v[i].cost_ns > 1e-3 ? v[i].cost_ns : 1e-3;
            double norm = cs_prev > 1e-9 ? cs_prev : 1e-9;
            cs_prev *= v[i].selectivity;
            if (!schedulable(&v[i])) continue;
            double nw = ((double)v[i].window_ns + (double)v[i].workers * (double)cfg.slice_ns) / (c * norm);
            if (best < 0 || nw <= bestn) { best = (int)i; bestn = nw; } /* ties: later op */
        }
        return best;
    }
    }
}

static void load_view(const sc_sched *s, sc_sched_view *v) {
    for (uint32_t i = 0; i < s->nops; i++) {
        const sc_sched_op *o = &s->ops[i];
        v[i].queued = sc_i64_load_relaxed(&o->queued);
        v[i].cost_ns = sc_u64_as_double(sc_u64_load_relaxed(&o->cost_bits));
        v[i].selectivity = sc_u64_as_double(sc_u64_load_relaxed(&o->sel_bits));
        v[i].workers = (uint32_t)sc_i64_load_relaxed(&o->workers);
        v[i].max_workers = o->max_workers;
        v[i].window_ns = sc_u64_load_relaxed(&o->window_ns);
    }
}

int sc_sched_acquire(sc_sched *s, uint32_t worker, sc_sched_grant *g) {
    (void)worker;
    sc_sched_view v[SC_SCHED_MAX_OPS];
    load_view(s, v);
    for (uint32_t attempt = 0; attempt <= s->nops; attempt++) {
        int i = sc_sched_choose(&s->cfg, v, s->nops);
        if (i < 0) return SC_EEMPTY;
        sc_sched_op *o = &s->ops[i];
        int64_t w = sc_i64_load_relaxed(&o->workers);
        bool got = false;
        while (w < (int64_t)o->max_workers) {
            if (sc_i64_cas_acqrel(&o->workers, &w, w + 1)) { got = true; break; }
        }
        if (got) {
            double c = sc_u64_as_double(sc_u64_load_relaxed(&o->cost_bits));
            double q = c > 0 ? (double)s->cfg.slice_ns / c : s->cfg.max_quota;
            g->op = (uint32_t)i;
            g->quota = q < 1 ? 1 : q > s->cfg.max_quota ? s->cfg.max_quota : (uint32_t)q;
            g->t_start_ns = sc_now_ns();
            sc_u64_fetch_add_relaxed(&o->grants, 1);
            return SC_OK;
        }
        v[i].workers = v[i].max_workers; /* full now: choose again without it */
    }
    return SC_EEMPTY;
}

static void ewma(sc_atomic_u64 *cell, double sample, double alpha) {
    uint64_t cur = sc_u64_load_relaxed(cell);
    for (;;) {
        double next = (1 - alpha) * sc_u64_as_double(cur) + alpha * sample;
        if (sc_u64_cas_weak_relaxed(cell, &cur, sc_double_as_u64(next))) return;
    }
}

void sc_sched_release(sc_sched *s, const sc_sched_grant *g, uint64_t items_in, uint64_t items_out, uint64_t ns) {
    sc_sched_op *o = &s->ops[g->op];
    if (items_in > 0) {
        ewma(&o->cost_bits, (double)ns / (double)items_in, s->cfg.ewma_alpha);
        ewma(&o->sel_bits, (double)items_out / (double)items_in, s->cfg.ewma_alpha);
    }
    sc_u64_fetch_add_relaxed(&o->items_in, items_in);
    sc_u64_fetch_add_relaxed(&o->items_out, items_out);
    sc_u64_fetch_add_relaxed(&o->ns_total, ns);
    /* CT window: worker time per op since the window began; the first release after the
     * window ends starts a new one (an approximate, lock-free roll-over). */
    uint64_t now = g->t_start_ns + ns, start = sc_u64_load_relaxed(&s->window_start);
    if (now > start + s->cfg.window_ns && sc_u64_cas_acqrel(&s->window_start, &start, now))
        for (uint32_t i = 0; i < s->nops; i++) sc_u64_store_relaxed(&s->ops[i].window_ns, 0);
    sc_u64_fetch_add_relaxed(&o->window_ns, ns);
    sc_i64_fetch_add_acqrel(&o->workers, -1);
}

int sc_sched_stats(const sc_sched *s, uint32_t op, sc_sched_op_stats *out) {
    if (op >= s->nops || !out) return SC_EINVAL;
    const sc_sched_op *o = &s->ops[op];
    out->cost_ns = sc_u64_as_double(sc_u64_load_relaxed(&o->cost_bits));
    out->selectivity = sc_u64_as_double(sc_u64_load_relaxed(&o->sel_bits));
    out->queued = sc_i64_load_relaxed(&o->queued);
    out->workers = (uint32_t)sc_i64_load_relaxed(&o->workers);
    out->max_workers = o->max_workers;
    out->items_in = sc_u64_load_relaxed(&o->items_in);
    out->items_out = sc_u64_load_relaxed(&o->items_out);
    out->ns_total = sc_u64_load_relaxed(&o->ns_total);
    out->grants = sc_u64_load_relaxed(&o->grants);
    return SC_OK;
}

uint32_t sc_sched_nops(const sc_sched *s) { return s->nops; }
