/* metrics: see metrics.h for the contract. */
#include "metrics.h"

#include <stdlib.h>

#include "atomic_ext.h"

typedef struct {
    SC_ALIGNED sc_atomic_u64 rows_in;
    sc_atomic_u64 rows_out, batches_in, batches_out, ns;
    sc_atomic_i64 queue_depth;
    sc_atomic_u64 workers;
} sc_op_cells;

struct sc_metrics {
    uint32_t nops;
    sc_op_cells *ops;
    sc_hist latency;
};

uint32_t sc_hist_bucket(uint64_t v) {
    if (v < SC_HIST_SUB) return (uint32_t)v;
    uint32_t e = 63u - (uint32_t)__builtin_clzll(v); /* e >= SC_HIST_SUB_BITS */
    uint32_t sub = (uint32_t)(v >> (e - SC_HIST_SUB_BITS)) & (SC_HIST_SUB - 1);
    return (e - SC_HIST_SUB_BITS + 1) * SC_HIST_SUB + sub;
}

uint64_t sc_hist_bucket_upper(uint32_t b) {
    if (b < SC_HIST_SUB) return b;
    uint32_t e = b / SC_HIST_SUB + SC_HIST_SUB_BITS - 1, sub = b % SC_HIST_SUB;
    uint64_t width = 1ull << (e - SC_HIST_SUB_BITS);
    uint64_t lower = (uint64_t)(SC_HIST_SUB + sub) << (e - SC_HIST_SUB_BITS);
    return lower + (width - 1);
}

void sc_hist_init(sc_hist *h) {
    for (uint32_t i = 0; i < SC_HIST_BUCKETS; i++) sc_u64_init(&h->counts[i], 0);
    sc_u64_init(&h->count, 0);
    sc_u64_init(&h->sum, 0);
    sc_u64_init(&h->max, 0);
}

void sc_hist_record(sc_hist *h, uint64_t v) {
    sc_u64_max_relaxed(&h->max, v); /* before the bucket, so a snapshot rarely sees max < v */
    sc_u64_fetch_add_relaxed(&h->sum, v);
    sc_u64_fetch_add_relaxed(&h->count, 1);
    sc_u64_fetch_add_relaxed(&h->counts[sc_hist_bucket(v)], 1);
}

void sc_hist_snapshot_copy(const sc_hist *h, sc_hist_snapshot *out) {
    uint64_t total = 0;
    for (uint32_t i = 0; i < SC_HIST_BUCKETS; i++) {
        out->counts[i] = sc_u64_load_relaxed(&h->counts[i]);
        total += out->counts[i];
    }
    out->count = total; /* consistent with the copied buckets */
    out->sum = sc_u64_load_relaxed(&h->sum);
    out->max = sc_u64_load_relaxed(&h->max);
}

uint64_t sc_hist_quantile(const sc_hist_snapshot *s, double q) {
    if (s->count == 0) return 0;
    if (q < 0) q = 0;
    if (q > 1) q = 1;
    uint64_t rank = (uint64_t)(q * (double)s->count + 0.999999999);
    if (rank == 0) rank = 1;
    uint64_t acc = 0;
    for (uint32_t i = 0; i < SC_HIST_BUCKETS; i++) {
        acc += s->counts[i];
        if (acc >= rank) {
            uint64_t up = sc_hist_bucket_upper(i);
            return s->max && up > s->max ? s->max : up;
        }
    }
    return s->max;
}

int sc_metrics_create(sc_metrics **out, uint32_t nops) {
    if (!out) return SC_EINVAL;
    sc_metrics *m = sc_alloc_aligned(sizeof *m);
    if (!m) return SC_ENOMEM;
    memset(m, 0, sizeof *m);
    m->nops = nops;
    if (nops) {
        m->ops = sc_alloc_aligned(sizeof(sc_op_cells) * nops);
        if (!m->ops) { free(m); return SC_ENOMEM; }
        memset(m->ops, 0, sizeof(sc_op_cells) * nops);
        for (uint32_t i = 0; i < nops; i++) {
            sc_op_cells *c = &m->ops[i];
            sc_u64_init(&c->rows_in, 0); sc_u64_init(&c->rows_out, 0);
            sc_u64_init(&c->batches_in, 0); sc_u64_init(&c->batches_out, 0);
            sc_u64_init(&c->ns, 0); sc_i64_init(&c->queue_depth, 0); sc_u64_init(&c->workers, 0);
        }
    }
    sc_hist_init(&m->latency);
    *out = m;
    return SC_OK;
}

void sc_metrics_destroy(sc_metrics *m) {
    if (!m) return;
    free(m->ops);
    free(m);
}

uint32_t sc_metrics_nops(const sc_metrics *m) { return m->nops; }

void sc_metrics_op_add(sc_metrics *m, uint32_t op, uint64_t rows_in, uint64_t rows_out,
                       uint64_t batches_in, uint64_t batches_out, uint64_t ns) {
    if (op >= m->nops) return;
    sc_op_cells *c = &m->ops[op];
    if (rows_in) sc_u64_fetch_add_relaxed(&c->rows_in, rows_in);
    if (rows_out) sc_u64_fetch_add_relaxed(&c->rows_out, rows_out);
    if (batches_in) sc_u64_fetch_add_relaxed(&c->batches_in, batches_in);
    if (batches_out) sc_u64_fetch_add_relaxed(&c->batches_out, batches_out);
    if (ns) sc_u64_fetch_add_relaxed(&c->ns, ns);
}

void sc_metrics_op_gauge(sc_metrics *m, uint32_t op, int64_t queue_depth, uint32_t workers) {
    if (op >= m->nops) return;
    sc_i64_store_relaxed(&m->ops[op].queue_depth, queue_depth);
    sc_u64_store_relaxed(&m->ops[op].workers, workers);
}

void sc_metrics_latency_record(sc_metrics *m, uint64_t ns) { sc_hist_record(&m->latency, ns); }

int sc_metrics_snapshot(const sc_metrics *m, sc_op_counters *ops, uint32_t nops, sc_latency_summary *lat) {
    if (!m || nops > m->nops) return SC_EINVAL;
    for (uint32_t i = 0; ops && i < nops; i++) {
        const sc_op_cells *c = &m->ops[i];
        ops[i].rows_in = sc_u64_load_relaxed(&c->rows_in);
        ops[i].rows_out = sc_u64_load_relaxed(&c->rows_out);
        ops[i].batches_in = sc_u64_load_relaxed(&c->batches_in);
        ops[i].batches_out = sc_u64_load_relaxed(&c->batches_out);
        ops[i].ns = sc_u64_load_relaxed(&c->ns);
        ops[i].queue_depth = sc_i64_load_relaxed(&c->queue_depth);
        ops[i].workers = (uint32_t)sc_u64_load_relaxed(&c->workers);
    }
    if (lat) {
        sc_hist_snapshot *s = malloc(sizeof *s);
        if (!s) return SC_ENOMEM;
        sc_hist_snapshot_copy(&m->latency, s);
        lat->count = s->count;
        lat->p50_ns = sc_hist_quantile(s, 0.50);
        lat->p99_ns = sc_hist_quantile(s, 0.99);
        lat->max_ns = s->max;
        lat->mean_ns = s->count ? (double)s->sum / (double)s->count : 0.0;
        free(s);
    }
    return SC_OK;
}

int sc_metrics_latency_histogram(const sc_metrics *m, sc_hist_snapshot *out) {
    if (!m || !out) return SC_EINVAL;
    sc_hist_snapshot_copy(&m->latency, out);
    return SC_OK;
}
