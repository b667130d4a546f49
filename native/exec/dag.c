/* dag: phases and Δ-propagation over a DAG of operator chains (see dag.h; Zimmerman and Chandy). */
#include "dag.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../runtime/atomic_ext.h"
#include "../runtime/metrics.h"

typedef struct dag_op {
    char name[24];
    sc_op_run_fn run;
    sc_dag_destroy_fn destroy;
    void *state;
    sc_op_base *base;
} dag_op;

typedef struct dag_edge {
    uint32_t to, port;
} dag_edge;

typedef struct dag_vertex {
    char name[32];
    bool declared;
    uint32_t nin;       /* input ports */
    uint32_t port0;     /* first message slot of this vertex in a phase */
    int32_t sink;       /* sink queue, or -1 */
    bool stateless;     /* every operator stateless and no sink: phases may overlap */
    dag_op *ops;
    uint32_t nops, capops;
    dag_edge *edges;
    uint32_t nedges, capedges;
    /* merge of several ports */
    bool merge;
    sc_schema merged;
    int32_t *map;       /* nin * merged.ncols */
    int32_t port_col;
    /* stats (updated under the lock) */
    uint64_t executions, rows_in, rows_out, ns;
} dag_vertex;

typedef struct dag_phase {
    uint64_t p;         /* phase number (1-based) */
    bool eos;
    uint64_t msg;       /* vertices with input for this phase not yet consumed (partial ∪ full) */
    uint64_t running;   /* vertices executing it */
    uint64_t queued;    /* vertices in the ready set, waiting for a worker */
    uint32_t x;         /* vertices 0..x-1 are done with this phase */
    uint64_t t0;        /* start time (latency) */
    sc_batch **head, **tail; /* per message slot */
} dag_phase;

typedef struct dag_sink {
    sc_batch *head, *tail;
} dag_sink;

struct sc_dag {
    uint32_t nsteps, nv, nsources, nsinks, ring, nports;
    sc_step_counters *counters;
    dag_vertex *v;
    uint32_t *source_vertex;
    uint32_t M[SC_DAG_MAX_VERTICES + 1];
    uint64_t all, stateless;
    dag_phase *ph;
    uint64_t first, next; /* oldest phase in flight; next phase number */
    pthread_mutex_t mu;
    pthread_cond_t work, space, out;
    pthread_t *threads;
    uint32_t nthreads;
    bool started, stopping, ended, eos_pushed;
    int err;
    uint32_t err_vertex;
    dag_sink *sinks;
    int64_t queued_out, max_out;
    uint64_t phases_done, pairs, in_flight_max, concurrent, concurrent_max;
    sc_hist lat;
};

static inline uint64_t bit(uint32_t v) { return UINT64_C(1) << v; }
static inline uint64_t below(uint32_t k) { return k >= 64 ? ~UINT64_C(0) : bit(k) - 1; }

int sc_dag_create(sc_dag **out, uint32_t nsteps, uint32_t nvertices, uint32_t nsources,
                  uint32_t nsinks, uint32_t max_phases, uint32_t max_out) {
    if (!out || nvertices == 0 || nvertices > SC_DAG_MAX_VERTICES || nsources == 0 ||
        nsources > nvertices || max_phases == 0)
        return SC_EINVAL;
    sc_dag *d = calloc(1, sizeof *d);
    if (!d) return SC_ENOMEM;
    d->nsteps = nsteps;
    d->nv = nvertices;
    d->nsources = nsources;
    d->nsinks = nsinks;
    d->ring = max_phases;
    d->max_out = max_out ? max_out : 64;
    d->first = d->next = 1;
    d->counters = aligned_alloc(SC_CACHELINE, sizeof(sc_step_counters) * (nsteps ? nsteps : 1));
    d->v = calloc(nvertices, sizeof *d->v);
    d->source_vertex = calloc(nsources, sizeof *d->source_vertex);
    d->sinks = calloc(nsinks ? nsinks : 1, sizeof *d->sinks);
    d->ph = calloc(max_phases, sizeof *d->ph);
    if (!d->counters || !d->v || !d->source_vertex || !d->sinks || !d->ph) {
        free(d->counters);
        free(d->v);
        free(d->source_vertex);
        free(d->sinks);
        free(d->ph);
        free(d);
        return SC_ENOMEM;
    }
    memset(d->counters, 0, sizeof(sc_step_counters) * (nsteps ? nsteps : 1));
    for (uint32_t i = 0; i < nsources; i++) d->source_vertex[i] = UINT32_MAX;
    for (uint32_t v = 0; v < nvertices; v++) d->v[v].sink = -1;
    sc_hist_init(&d->lat);
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->work, NULL);
    pthread_cond_init(&d->space, NULL);
    pthread_cond_init(&d->out, NULL);
    *out = d;
    return SC_OK;
}

void sc_dag_destroy(sc_dag *d) {
    if (!d) return;
    sc_dag_stop(d);
    for (uint32_t i = 0; i < d->ring; i++) {
        dag_phase *ph = &d->ph[i];
        for (uint32_t s = 0; ph->head && s < d->nports; s++) sc_batch_release_chain(ph->head[s]);
        free(ph->head);
        free(ph->tail);
    }
    for (uint32_t s = 0; s < d->nsinks; s++) sc_batch_release_chain(d->sinks[s].head);
    for (uint32_t v = 0; v < d->nv; v++) {
        dag_vertex *x = &d->v[v];
        for (uint32_t k = 0; k < x->nops; k++)
            if (x->ops[k].destroy) x->ops[k].destroy(x->ops[k].state);
        free(x->ops);
        free(x->edges);
        free(x->map);
        sc_schema_free(&x->merged);
    }
    pthread_mutex_destroy(&d->mu);
    pthread_cond_destroy(&d->work);
    pthread_cond_destroy(&d->space);
    pthread_cond_destroy(&d->out);
    free(d->counters);
    free(d->v);
    free(d->source_vertex);
    free(d->sinks);
    free(d->ph);
    free(d->threads);
    free(d);
}

sc_step_counters *sc_dag_counters(sc_dag *d, uint32_t step) {
    return step < d->nsteps ? &d->counters[step] : NULL;
}

int sc_dag_vertex(sc_dag *d, uint32_t v, const char *name, uint32_t nin, int32_t sink) {
    if (d->started || v >= d->nv || nin == 0 || nin > SC_DAG_MAX_VERTICES ||
        sink >= (int32_t)d->nsinks)
        return SC_EINVAL;
    dag_vertex *x = &d->v[v];
    snprintf(x->name, sizeof x->name, "%s", name ? name : "vertex");
    x->declared = true;
    x->nin = nin;
    x->sink = sink;
    x->port_col = -1;
    x->stateless = true;
    return SC_OK;
}

int sc_dag_source(sc_dag *d, uint32_t i, uint32_t v) {
    if (d->started || i >= d->nsources || v >= d->nv) return SC_EINVAL;
    d->source_vertex[i] = v;
    return SC_OK;
}

int sc_dag_edge(sc_dag *d, uint32_t from, uint32_t to, uint32_t port) {
    if (d->started || from >= to || to >= d->nv) return SC_EINVAL;
    dag_vertex *x = &d->v[from];
    if (x->nedges == x->capedges) {
        uint32_t cap = x->capedges ? 2 * x->capedges : 4;
        dag_edge *e = realloc(x->edges, cap * sizeof *e);
        if (!e) return SC_ENOMEM;
        x->edges = e;
        x->capedges = cap;
    }
    x->edges[x->nedges++] = (dag_edge){ to, port };
    return SC_OK;
}

int sc_dag_merge(sc_dag *d, uint32_t v, const sc_schema *out, const int32_t *map, int32_t port_col) {
    if (d->started || v >= d->nv || !d->v[v].declared || d->v[v].nin < 2) return SC_EINVAL;
    dag_vertex *x = &d->v[v];
    size_t n = (size_t)x->nin * (size_t)out->ncols;
    x->map = malloc(n * sizeof *x->map);
    if (!x->map) return SC_ENOMEM;
    memcpy(x->map, map, n * sizeof *x->map);
    int rc = sc_schema_copy(&x->merged, out);
    if (rc) return rc;
    x->port_col = port_col;
    x->merge = true;
    return SC_OK;
}

int sc_dag_add_op(sc_dag *d, uint32_t v, const char *name, bool stateless, sc_op_run_fn run,
                  sc_dag_destroy_fn destroy, void *state, sc_op_base *base) {
    if (d->started || v >= d->nv || !d->v[v].declared) {
        if (destroy) destroy(state);
        return SC_EINVAL;
    }
    dag_vertex *x = &d->v[v];
    if (x->nops == x->capops) {
        uint32_t cap = x->capops ? 2 * x->capops : 4;
        dag_op *o = realloc(x->ops, cap * sizeof *o);
        if (!o) {
            if (destroy) destroy(state);
            return SC_ENOMEM;
        }
        x->ops = o;
        x->capops = cap;
    }
    dag_op *o = &x->ops[x->nops++];
    memset(o, 0, sizeof *o);
    snprintf(o->name, sizeof o->name, "%s", name ? name : "op");
    o->run = run;
    o->destroy = destroy;
    o->state = state;
    o->base = base;
    if (!stateless) x->stateless = false;
    return SC_OK;
}

/* ------------------------------------------------------------------------- executing */

static int64_t chain_rows(const sc_batch *b) {
    int64_t n = 0;
    for (; b; b = b->next) n += b->nrows;
    return n;
}

/* Port p's cursor at its chain's first batch with rows from cur[p] on (NULL: none left), with
 * that batch's values and validity of column col[p] (validity NULL when it has no nulls). */
static void port_batch(const sc_batch **cur, const int64_t **vals, const uint8_t **valid, const int32_t *col,
                       uint32_t p) {
    while (cur[p] && cur[p]->nrows == 0) cur[p] = cur[p]->next;
    if (cur[p] && col[p] >= 0) {
        const sc_column *sc = &cur[p]->cols[col[p]];
        vals[p] = sc->values;
        valid[p] = sc->null_count ? sc->validity : NULL;
    }
}

/* One int64 / double column of the merged batch: row r is the next row of port rp[r]'s chain
 * (each port's rows are taken in order), so a cursor per port walks its chain and keeps its
 * current batch's values and validity at hand: no per-row lookup of the source batch, and no
 * validity read where the source column has no nulls. */
static void merge_fixed(const dag_vertex *x, sc_batch **in, const uint32_t *rp, int64_t total, int32_t c,
                        sc_batch *ob) {
    enum { MAXP = SC_DAG_MAX_VERTICES };
    const sc_batch *cur[MAXP];
    const int64_t *vals[MAXP];
    const uint8_t *valid[MAXP]; /* NULL: no nulls in the current batch's column (or no column) */
    int64_t row[MAXP];
    int32_t col[MAXP];
    uint32_t nin = x->nin, nc = (uint32_t)x->merged.ncols;
    int64_t *dv = ob->cols[c].values;
    for (uint32_t p = 0; p < nin; p++) {
        col[p] = x->map[(size_t)p * nc + (size_t)c];
        vals[p] = NULL;
        valid[p] = NULL;
        cur[p] = in[p];
        row[p] = 0;
        port_batch(cur, vals, valid, col, p);
    }
    for (int64_t r = 0; r < total; r++) {
        uint32_t p = rp[r];
        int64_t i = row[p];
        if (col[p] < 0 || (valid[p] && !sc_bit_get(valid[p], i))) sc_batch_set_null(ob, c, r);
        else dv[r] = vals[p][i];
        if (++row[p] >= cur[p]->nrows) { /* the port's next batch */
            row[p] = 0;
            cur[p] = cur[p]->next;
            port_batch(cur, vals, valid, col, p);
        }
    }
}

/* One batch of every port's rows in arrival order (seq, then port), through the map: first
 * the merge order (which port, batch and row each output row copies), then column by column. */
static int merge_ports(dag_vertex *x, sc_batch **in, sc_batch **out) {
    *out = NULL;
    int64_t total = 0;
    uint32_t nin = x->nin;
    for (uint32_t p = 0; p < nin; p++) total += chain_rows(in[p]);
    if (total == 0) {
        for (uint32_t p = 0; p < nin; p++) sc_batch_release_chain(in[p]);
        return SC_OK;
    }
    sc_batch *ob = NULL;
    int rc = sc_batch_new(&ob, &x->merged, total);
    const sc_batch **rb = malloc((size_t)total * sizeof *rb);
    int64_t *rr = malloc((size_t)total * sizeof *rr);
    uint32_t *rp = malloc((size_t)total * sizeof *rp);
    sc_batch **cur = calloc(nin, sizeof *cur);
    int64_t *row = calloc(nin, sizeof *row);
    if (!rc && (!rb || !rr || !rp || !cur || !row)) rc = SC_ENOMEM;
    for (uint32_t p = 0; !rc && p < nin; p++) {
        cur[p] = in[p];
        while (cur[p] && cur[p]->nrows == 0) cur[p] = cur[p]->next;
    }
    for (int64_t r = 0; !rc && r < total; r++) {
        uint32_t best = UINT32_MAX;
        uint64_t bseq = 0;
        for (uint32_t p = 0; p < nin; p++) {
            if (!cur[p]) continue;
            uint64_t q = (uint64_t)((const int64_t *)cur[p]->cols[SC_COL_SEQ].values)[row[p]];
            if (best == UINT32_MAX || q < bseq) best = p, bseq = q;
        }
        rb[r] = cur[best];
        rr[r] = row[best];
        rp[r] = best;
        if (++row[best] >= cur[best]->nrows) {
            row[best] = 0;
            do cur[best] = cur[best]->next;
            while (cur[best] && cur[best]->nrows == 0);
        }
    }
    int32_t nc = x->merged.ncols;
    for (int32_t c = 0; !rc && c < nc; c++) {
        if (c == x->port_col) {
            for (int64_t r = 0; r < total; r++) sc_batch_set_i64(ob, c, r, rp[r]);
            continue;
        }
        sc_col_type t = ob->cols[c].type;
        if (t == SC_COL_INT64 || t == SC_COL_DOUBLE) {
            merge_fixed(x, in, rp, total, c, ob);
            continue;
        }
        for (int64_t r = 0; !rc && r < total; r++) {
            int32_t m = x->map[(size_t)rp[r] * (size_t)nc + (size_t)c];
            const sc_column *sc = m < 0 ? NULL : &rb[r]->cols[m];
            if (!sc || !sc_bit_get(sc->validity, rr[r])) {
                sc_batch_set_null(ob, c, r);
            } else if (t == SC_COL_INT64 || t == SC_COL_DOUBLE) {
                ((int64_t *)ob->cols[c].values)[r] = ((const int64_t *)sc->values)[rr[r]];
            } else if (t == SC_COL_BOOL) {
                sc_bit_set(ob->cols[c].values, r, sc_bit_get(sc->values, rr[r]));
            } else {
                rc = sc_batch_copy_cell(ob, c, r, rb[r], m, rr[r]);
            }
        }
    }
    if (!rc) {
        ob->nrows = total;
        ob->serial = rb[0]->serial;
        ob->first_row = rb[0]->first_row;
    }
    free(rb);
    free(rr);
    free(rp);
    free(cur);
    free(row);
    for (uint32_t p = 0; p < nin; p++) sc_batch_release_chain(in[p]);
    if (rc) {
        if (ob) sc_batch_release(ob);
        return rc;
    }
    *out = ob;
    return SC_OK;
}

/* Run a chain of batches through the vertex's operators; *out: the final chain (the eos
 * batch, when present, is dropped at the end). */
static int run_chain(dag_vertex *x, sc_batch *chain, sc_batch **out) {
    for (uint32_t k = 0; k < x->nops; k++) {
        sc_batch *head = NULL, *tail = NULL;
        int rc = SC_OK;
        while (chain) {
            sc_batch *b = chain;
            chain = b->next;
            b->next = NULL;
            if (rc) {
                sc_batch_release(b);
                continue;
            }
            if (b->nrows == 0 && !b->eos) {
                sc_batch_release(b);
                continue;
            }
            sc_batch *o = NULL;
            rc = x->ops[k].run(x->ops[k].state, b, &o);
            if (rc < 0) {
                sc_batch_release_chain(o);
                continue;
            }
            rc = SC_OK;
            sc_chain_append(&head, &tail, o);
        }
        if (rc) {
            sc_batch_release_chain(head);
            *out = NULL;
            return rc;
        }
        chain = head;
    }
    /* drop empty batches and the eos marker */
    sc_batch *head = NULL, *tail = NULL;
    while (chain) {
        sc_batch *b = chain;
        chain = b->next;
        b->next = NULL;
        if (b->eos || b->nrows == 0) {
            sc_batch_release(b);
            continue;
        }
        if (tail) tail->next = b;
        else head = b;
        tail = b;
    }
    *out = head;
    return SC_OK;
}

static int execute(sc_dag *d, uint32_t v, sc_batch **in, bool eos, sc_batch **out) {
    dag_vertex *x = &d->v[v];
    sc_batch *chain = NULL;
    int rc = SC_OK;
    if (x->merge) {
        rc = merge_ports(x, in, &chain);
        if (rc) {
            for (uint32_t p = 0; p < x->nin; p++) in[p] = NULL;
            return rc;
        }
    } else {
        chain = in[0];
    }
    if (eos) {
        sc_batch *e;
        const sc_schema *s = x->merge                       ? &x->merged
                             : x->nops && x->ops[0].base ? &x->ops[0].base->in
                                                         : NULL;
        sc_schema empty = { 0, NULL };
        rc = sc_batch_new(&e, s ? s : &empty, 1);
        if (rc) {
            sc_batch_release_chain(chain);
            return rc;
        }
        e->eos = 1;
        e->serial = UINT64_MAX;
        if (chain) {
            sc_batch *t = chain;
            while (t->next) t = t->next;
            t->next = e;
        } else {
            chain = e;
        }
    }
    return run_chain(x, chain, out);
}

/* ------------------------------------------------------------------------- the sets */

static inline dag_phase *slot(sc_dag *d, uint64_t p) { return &d->ph[(p - 1) % d->ring]; }

/* x[p] for every phase in flight (Listing 1, lines 12-23), then retire finished phases. */
static void update_progress(sc_dag *d) {
    uint32_t prev = d->nv;
    for (uint64_t p = d->first; p < d->next; p++) {
        dag_phase *ph = slot(d, p);
        uint32_t x = ph->msg ? (uint32_t)__builtin_ctzll(ph->msg) : d->nv;
        ph->x = x < prev ? x : prev;
        prev = ph->x;
    }
    while (d->first < d->next) {
        dag_phase *ph = slot(d, d->first);
        if (ph->x < d->nv || ph->msg) break;
        uint64_t now = sc_now_ns();
        sc_hist_record(&d->lat, now > ph->t0 ? now - ph->t0 : 0);
        d->phases_done++;
        if (ph->eos) d->ended = true;
        ph->p = 0;
        d->first++;
        pthread_cond_broadcast(&d->space);
        if (d->ended) pthread_cond_broadcast(&d->out);
    }
}

/* Move newly full pairs to the ready set (Listing 1, lines 24-30). A vertex with state
 * takes its earliest pending phase only; a stateless one takes any full phase. */
static uint32_t schedule(sc_dag *d) {
    uint64_t blocked = 0;
    uint32_t n = 0;
    for (uint64_t p = d->first; p < d->next; p++) {
        dag_phase *ph = slot(d, p);
        uint64_t full = ph->msg & below(d->M[ph->x]);
        uint64_t ready = full & ~(ph->running | ph->queued) & ~(blocked & ~d->stateless);
        ph->queued |= ready;
        n += (uint32_t)sc_popcount64(ready);
        blocked |= ph->msg;
    }
    return n;
}

static void wake(sc_dag *d, uint32_t n) {
    if (n == 1) pthread_cond_signal(&d->work);
    else if (n > 1) pthread_cond_broadcast(&d->work);
}

static void deliver(sc_dag *d, uint32_t v, dag_phase *ph, sc_batch *outs) {
    dag_vertex *x = &d->v[v];
    if (!outs) return;
    if (x->sink >= 0) {
        dag_sink *s = &d->sinks[x->sink];
        while (outs) {
            sc_batch *b = outs;
            outs = b->next;
            b->next = NULL;
            if (s->tail) s->tail->next = b;
            else s->head = b;
            s->tail = b;
            d->queued_out++;
        }
        pthread_cond_broadcast(&d->out);
        return;
    }
    for (uint32_t e = 0; e < x->nedges; e++) {
        const dag_edge *ed = &x->edges[e];
        sc_batch *c = outs;
        if (e + 1 < x->nedges) { /* fan-out: every successor but the last gets a copy */
            sc_batch *h = NULL, *t = NULL;
            for (sc_batch *b = outs; b; b = b->next) {
                sc_batch *cl;
                if (sc_batch_clone(&cl, b)) {
                    sc_batch_release_chain(h);
                    h = NULL;
                    if (!d->err) d->err = SC_ENOMEM, d->err_vertex = v;
                    break;
                }
                cl->next = NULL;
                if (t) t->next = cl;
                else h = cl;
                t = cl;
            }
            c = h;
        }
        if (!c) continue;
        uint32_t s = d->v[ed->to].port0 + ed->port;
        if (ph->tail[s]) ph->tail[s]->next = c;
        else ph->head[s] = c;
        sc_batch *t = c;
        while (t->next) t = t->next;
        ph->tail[s] = t;
        ph->msg |= bit(ed->to);
    }
    if (x->nedges == 0) sc_batch_release_chain(outs);
}

static void *worker(void *arg) {
    sc_dag *d = arg;
    sc_batch *inb[SC_DAG_MAX_VERTICES];
    sc_malloc_warm(); /* before its first batch (runtime/batch.h) */
    pthread_mutex_lock(&d->mu);
    for (;;) {
        if (d->stopping) break;
        uint64_t p = 0;
        uint32_t v = 0;
        for (uint64_t q = d->first; q < d->next; q++) {
            dag_phase *ph = slot(d, q);
            if (ph->queued) {
                p = q;
                v = (uint32_t)__builtin_ctzll(ph->queued);
                ph->queued &= ~bit(v);
                ph->running |= bit(v);
                break;
            }
        }
        if (!p) {
            pthread_cond_wait(&d->work, &d->mu);
            continue;
        }
        dag_phase *ph = slot(d, p);
        dag_vertex *x = &d->v[v];
        sc_batch **in = inb; /* nin <= SC_DAG_MAX_VERTICES (sc_dag_vertex) */
        int64_t rows = 0;
        for (uint32_t k = 0; k < x->nin; k++) {
            in[k] = ph->head[x->port0 + k];
            ph->head[x->port0 + k] = ph->tail[x->port0 + k] = NULL;
            rows += chain_rows(in[k]);
        }
        bool eos = ph->eos;
        if (++d->concurrent > d->concurrent_max) d->concurrent_max = d->concurrent;
        pthread_mutex_unlock(&d->mu);

        uint64_t t0 = sc_now_ns();
        sc_batch *outs = NULL;
        int rc = execute(d, v, in, eos, &outs);
        uint64_t dt = sc_now_ns() - t0;

        pthread_mutex_lock(&d->mu);
        d->concurrent--;
        x->executions++;
        x->rows_in += (uint64_t)rows;
        x->rows_out += (uint64_t)chain_rows(outs);
        x->ns += dt;
        d->pairs++;
        if (rc < 0) {
            sc_batch_release_chain(outs);
            if (!d->err) d->err = rc, d->err_vertex = v;
            d->stopping = true;
            pthread_cond_broadcast(&d->work);
            pthread_cond_broadcast(&d->space);
            pthread_cond_broadcast(&d->out);
            break;
        }
        deliver(d, v, ph, outs);
        ph->running &= ~bit(v);
        ph->msg &= ~bit(v);
        update_progress(d);
        wake(d, schedule(d));
    }
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

/* ------------------------------------------------------------------------- control */

int sc_dag_start(sc_dag *d, uint32_t workers) {
    if (d->started || workers == 0) return SC_EINVAL;
    /* ports, statefulness, numbering */
    uint32_t maxpred[SC_DAG_MAX_VERTICES] = { 0 };
    uint32_t nports = 0;
    uint32_t indeg[SC_DAG_MAX_VERTICES] = { 0 };
    d->all = below(d->nv);
    d->stateless = 0;
    for (uint32_t v = 0; v < d->nv; v++) {
        dag_vertex *x = &d->v[v];
        if (!x->declared) return SC_EINVAL;
        x->port0 = nports;
        nports += x->nin;
        if (x->nin > 1 && !x->merge) return SC_EINVAL;
        if (x->stateless && x->sink < 0) d->stateless |= bit(v);
        for (uint32_t e = 0; e < x->nedges; e++) {
            uint32_t w = x->edges[e].to;
            if (x->edges[e].port >= d->v[w].nin) return SC_EINVAL;
            if (v + 1 > maxpred[w]) maxpred[w] = v + 1; /* 1-based index of the last pred */
            indeg[w]++;
        }
    }
    for (uint32_t i = 0; i < d->nsources; i++) {
        uint32_t v = d->source_vertex[i];
        if (v == UINT32_MAX || indeg[v]) return SC_EINVAL;
    }
    /* the seed's restriction: vertices sorted by their last predecessor's index */
    for (uint32_t v = 1; v < d->nv; v++)
        if (maxpred[v] < maxpred[v - 1]) return SC_EINVAL;
    for (uint32_t x = 0; x <= d->nv; x++) {
        uint32_t m = 0;
        while (m < d->nv && maxpred[m] <= x) m++;
        d->M[x] = m;
    }
    for (uint32_t x = 0; x < d->nv; x++)
        if (d->M[x] <= x) return SC_EINVAL; /* every vertex has its inputs below it */
    d->nports = nports;
    for (uint32_t i = 0; i < d->ring; i++) {
        d->ph[i].head = calloc(nports, sizeof(sc_batch *));
        d->ph[i].tail = calloc(nports, sizeof(sc_batch *));
        if (!d->ph[i].head || !d->ph[i].tail) return SC_ENOMEM;
    }
    d->threads = calloc(workers, sizeof(pthread_t));
    if (!d->threads) return SC_ENOMEM;
    d->started = true;
    for (uint32_t t = 0; t < workers; t++) {
        if (pthread_create(&d->threads[t], NULL, worker, d)) {
            sc_dag_stop(d);
            return SC_ENOMEM;
        }
        d->nthreads++;
    }
    return SC_OK;
}

static int wait_space(sc_dag *d, int64_t timeout_ns) {
    struct timespec dl;
    if (timeout_ns >= 0) {
        clock_gettime(CLOCK_REALTIME, &dl);
        int64_t ns = dl.tv_nsec + timeout_ns;
        dl.tv_sec += ns / 1000000000;
        dl.tv_nsec = ns % 1000000000;
    }
    while (!d->stopping && (d->next - d->first >= d->ring || d->queued_out >= d->max_out)) {
        if (timeout_ns < 0) pthread_cond_wait(&d->space, &d->mu);
        else if (pthread_cond_timedwait(&d->space, &d->mu, &dl)) break;
    }
    if (d->stopping) return SC_ECLOSED;
    if (d->next - d->first >= d->ring || d->queued_out >= d->max_out) return SC_EFULL;
    return SC_OK;
}

static dag_phase *open_phase(sc_dag *d, bool eos) {
    dag_phase *ph = slot(d, d->next);
    ph->p = d->next;
    ph->eos = eos;
    ph->msg = ph->running = ph->queued = 0;
    ph->x = 0;
    ph->t0 = sc_now_ns();
    return ph;
}

static void close_phase(sc_dag *d) {
    d->next++;
    if (d->next - d->first > d->in_flight_max) d->in_flight_max = d->next - d->first;
    update_progress(d);
    wake(d, schedule(d));
}

int sc_dag_push(sc_dag *d, sc_batch **in, int64_t timeout_ns) {
    if (!d->started) return SC_EINVAL;
    pthread_mutex_lock(&d->mu);
    int rc = d->eos_pushed ? SC_EINVAL : wait_space(d, timeout_ns);
    if (rc) {
        pthread_mutex_unlock(&d->mu);
        return rc;
    }
    uint64_t msg = 0;
    for (uint32_t i = 0; i < d->nsources; i++)
        if (in[i] && chain_rows(in[i]) > 0) msg |= bit(d->source_vertex[i]);
    if (!msg) { /* no rows: no phase */
        for (uint32_t i = 0; i < d->nsources; i++) sc_batch_release_chain(in[i]);
        pthread_mutex_unlock(&d->mu);
        return SC_OK;
    }
    dag_phase *ph = open_phase(d, false);
    for (uint32_t i = 0; i < d->nsources; i++) {
        if (!in[i]) continue;
        uint32_t s = d->v[d->source_vertex[i]].port0;
        ph->head[s] = in[i];
        sc_batch *t = in[i];
        while (t->next) t = t->next;
        ph->tail[s] = t;
    }
    ph->msg = msg;
    close_phase(d);
    pthread_mutex_unlock(&d->mu);
    return SC_OK;
}

int sc_dag_finish(sc_dag *d, int64_t timeout_ns) {
    if (!d->started) return SC_EINVAL;
    pthread_mutex_lock(&d->mu);
    int rc = d->eos_pushed ? SC_OK : wait_space(d, timeout_ns);
    if (!rc && !d->eos_pushed) {
        dag_phase *ph = open_phase(d, true);
        ph->msg = d->all; /* every vertex executes the last phase */
        d->eos_pushed = true;
        close_phase(d);
    }
    pthread_mutex_unlock(&d->mu);
    return rc;
}

int sc_dag_take(sc_dag *d, uint32_t sink, sc_batch **b) {
    if (sink >= d->nsinks) return SC_EINVAL;
    pthread_mutex_lock(&d->mu);
    dag_sink *s = &d->sinks[sink];
    int rc = SC_EEMPTY;
    if (s->head) {
        *b = s->head;
        s->head = s->head->next;
        if (!s->head) s->tail = NULL;
        (*b)->next = NULL;
        d->queued_out--;
        pthread_cond_broadcast(&d->space);
        rc = SC_OK;
    }
    pthread_mutex_unlock(&d->mu);
    return rc;
}

int sc_dag_wait(sc_dag *d, int64_t timeout_ns) {
    pthread_mutex_lock(&d->mu);
    bool any = d->queued_out > 0;
    if (!any && !d->ended && !d->stopping && timeout_ns > 0) {
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        int64_t ns = dl.tv_nsec + timeout_ns;
        dl.tv_sec += ns / 1000000000;
        dl.tv_nsec = ns % 1000000000;
        pthread_cond_timedwait(&d->out, &d->mu, &dl);
    }
    int rc = d->ended ? 1 : (d->stopping ? SC_ECLOSED : 0);
    pthread_mutex_unlock(&d->mu);
    return rc;
}

int sc_dag_stop(sc_dag *d) {
    pthread_mutex_lock(&d->mu);
    d->stopping = true;
    pthread_cond_broadcast(&d->work);
    pthread_cond_broadcast(&d->space);
    pthread_cond_broadcast(&d->out);
    pthread_mutex_unlock(&d->mu);
    for (uint32_t t = 0; t < d->nthreads; t++) pthread_join(d->threads[t], NULL);
    d->nthreads = 0;
    return d->err;
}

int sc_dag_error(const sc_dag *d, uint32_t *vertex) {
    if (vertex) *vertex = d->err_vertex;
    return d->err;
}

uint32_t sc_dag_nvertices(const sc_dag *d) { return d->nv; }

const char *sc_dag_vertex_name(const sc_dag *d, uint32_t v) {
    return v < d->nv ? d->v[v].name : NULL;
}

int sc_dag_vertex_stats(const sc_dag *d, uint32_t v, sc_dag_vstats *out) {
    if (v >= d->nv) return SC_EINVAL;
    sc_dag *m = (sc_dag *)d;
    pthread_mutex_lock(&m->mu);
    const dag_vertex *x = &d->v[v];
    out->executions = x->executions;
    out->rows_in = x->rows_in;
    out->rows_out = x->rows_out;
    out->ns = x->ns;
    out->state_size = 0;
    for (uint32_t k = 0; k < x->nops; k++)
        if (x->ops[k].base) out->state_size += sc_i64_load_relaxed(&x->ops[k].base->state_size);
    out->index_limit = d->M[v + 1];
    pthread_mutex_unlock(&m->mu);
    return SC_OK;
}

void sc_dag_stats_get(sc_dag *d, sc_dag_stats *out) {
    pthread_mutex_lock(&d->mu);
    out->phases = d->phases_done;
    out->pairs = d->pairs;
    out->in_flight_max = d->in_flight_max;
    out->concurrent_max = d->concurrent_max;
    pthread_mutex_unlock(&d->mu);
    sc_hist_snapshot s;
    sc_hist_snapshot_copy(&d->lat, &s);
    out->lat_count = s.count;
    out->lat_p50_ns = sc_hist_quantile(&s, 0.5);
    out->lat_p99_ns = sc_hist_quantile(&s, 0.99);
    out->lat_max_ns = s.max;
    out->lat_mean_ns = s.count ? (double)s.sum / (double)s.count : 0.0;
}

int sc_dag_sides(sc_dag *d, sc_side ***sides, uint32_t *n) {
    uint32_t cnt = 0;
    for (uint32_t v = 0; v < d->nv; v++)
        for (uint32_t k = 0; k < d->v[v].nops; k++)
            if (d->v[v].ops[k].base && d->v[v].ops[k].base->side) cnt++;
    *sides = calloc(cnt ? cnt : 1, sizeof(sc_side *));
    if (!*sides) return SC_ENOMEM;
    *n = 0;
    for (uint32_t v = 0; v < d->nv; v++)
        for (uint32_t k = 0; k < d->v[v].nops; k++)
            if (d->v[v].ops[k].base && d->v[v].ops[k].base->side)
                (*sides)[(*n)++] = d->v[v].ops[k].base->side;
    return SC_OK;
}
