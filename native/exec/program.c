/* program: see program.h for the contract. */
#include "program.h"

#include "ops_state.h" /* key encoding: one definition of key equality for split and ops */
#include "aggstate.h" /* the int key hash */
#include "../runtime/atomic_ext.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_OPS SC_SCHED_MAX_OPS

typedef struct prog_op {
    char *name;
    sc_op_kind kind;
    sc_op_run_fn run;
    sc_op_destroy_fn destroy;
    void *state;          /* the pool's op_state (for keyed: the dispatch) */
    sc_op_base **bases;   /* nbases entries: the op's bases (for state sizes, sides) */
    uint32_t nbases;
} prog_op;

/* keyed dispatch: partition i is served by states[i] */
typedef struct keyed_dispatch {
    sc_op_run_fn run;
    sc_op_destroy_fn destroy;
    void **states;
    uint32_t n;
} keyed_dispatch;

typedef struct split_state {
    sc_op_base base;
    int32_t *keys;
    int32_t nkeys;
    uint32_t parts;
    /* publishing operators (sc_prog_set_publish): every partition gets a sub-batch marked
     * `publish` when publish_every has passed since the last one (the interval doubles from
     * publish_ns up to publish_max_ns) and at end of stream */
    uint64_t publish_ns, publish_max_ns;
    sc_atomic_u64 last_publish, publish_every;
} split_state;

typedef struct merge_state {
    sc_op_base base;
    sc_batch **pending;
    uint32_t npending, cap;
    uint32_t done; /* sub-batches of the current group whose outputs are all pending */
} merge_state;

/* A keyed operator may answer one sub-batch with a chain of output batches; every piece but
 * the last is marked so the merge counts each sub-batch once. */
#define PIECE_CONTINUES UINT32_MAX

struct sc_prog {
    uint32_t nsteps;
    sc_step_counters *steps;
    prog_op ops[MAX_OPS];
    uint32_t nops;
    sc_metrics *metrics;
    sc_pool *pool;
    /* output queue */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    sc_batch **q;
    uint32_t qcap, qhead, qlen;
    bool eos_pushed;
    /* coalescing sink (sc_prog_set_coalesce): rows gather into `acc` on the sink thread */
    sc_schema out_schema;
    int64_t chunk_rows; /* 0: off */
    sc_batch *acc;      /* the open chunk while parked here (NULL while the sink appends) */
    int64_t qrows;      /* rows waiting in the queue (coalescing: the bound on its memory) */
    bool blocked;       /* the sink said SC_EFULL: the next take wakes parked workers */
    int64_t next_room;  /* rows the next open chunk gets at least (see open_rows) */
};

/* -------------------------------------------------------------------------- split */

/* Whether this input publishes: at most one input per publish_ns wins (several workers may
 * split at once; which one wins does not matter, each publishes a consistent prefix). */
static bool split_publish_due(split_state *st) {
    if (!st->publish_ns) return false;
    uint64_t now = sc_now_ns(), last = sc_u64_load_relaxed(&st->last_publish);
    uint64_t every = sc_u64_load_relaxed(&st->publish_every);
    if (now - last < every || !sc_u64_cas_acqrel(&st->last_publish, &last, now)) return false;
    /* the winner doubles the interval (a splitter that read the old one may publish early
     * once: harmless, any publish is a consistent prefix) */
    sc_u64_store_relaxed(&st->publish_every, every * 2 < st->publish_max_ns ? every * 2 : st->publish_max_ns);
    return true;
}

/* End of stream for a publishing operator: one empty eos sub-batch per partition, so every
 * partition publishes what changed since its last publish; the merge forwards one eos. */
static int split_eos_broadcast(split_state *st, sc_batch *in, sc_batch **out) {
    sc_batch *head = NULL, *tail = NULL;
    int rc = SC_OK;
    for (uint32_t i = 0; !rc && i < st->parts; i++) {
        sc_batch *b;
        rc = sc_batch_new(&b, &st->base.in, 1);
        if (rc) break;
        b->serial = in->serial;
        b->first_row = in->first_row;
        b->marker_ns = in->marker_ns;
        b->part = i;
        b->group_n = st->parts;
        b->eos = 1;
        b->publish = 1;
        sc_chain_append(&head, &tail, b);
    }
    sc_batch_release(in);
    if (rc) {
        sc_batch_release_chain(head);
        return rc;
    }
    *out = head;
    return SC_OK;
}

static int split_run(void *vst, sc_batch *in, sc_batch **out) {
    split_state *st = vst;
    *out = NULL;
    if (in->eos && st->publish_ns && st->parts > 1) return split_eos_broadcast(st, in, out);
    if (in->eos) {
        in->part = 0;
        in->group_n = 1;
        *out = in;
        return SC_OK;
    }
    int64_t n = in->nrows;
    if (n == 0) {
        sc_batch_release(in);
        return SC_OK;
    }
    bool publish = split_publish_due(st);
    uint32_t P = st->parts;
    uint32_t stack_part[1024];
    uint32_t *part = n <= 1024 ? stack_part : malloc((size_t)n * sizeof(uint32_t));
    uint32_t *count = calloc(P, sizeof(uint32_t));
    sc_batch **sub = calloc(P, sizeof(sc_batch *));
    int rc = part && count && sub ? SC_OK : SC_ENOMEM;
    sc_buf key = { 0 };
    const sc_column *k0 = st->nkeys == 1 ? &in->cols[st->keys[0]] : NULL;
    if (rc == SC_OK && k0 && k0->type == SC_COL_INT64) {
        /* one int64 key column (every batch of it, nulls or not, so a key always meets the
         * same partition): the int map's hash of the value, nulls in partition 0; the high
         * half picks the partition (the keyed int maps index slots by the low bits) */
        const int64_t *v = k0->values;
        if (k0->null_count == 0)
            for (int64_t r = 0; r < n; r++) {
                part[r] = (uint32_t)(((sc_imap_hash(v[r]) >> 32) * P) >> 32);
                count[part[r]]++;
            }
        else
            for (int64_t r = 0; r < n; r++) {
                part[r] = sc_bit_get(k0->validity, r) ? (uint32_t)(((sc_imap_hash(v[r]) >> 32) * P) >> 32) : 0;
                count[part[r]]++;
            }
    } else {
        for (int64_t r = 0; rc == SC_OK && r < n; r++) {
            /* partition by the keyed operators' own key bytes (null == null, NaN == NaN,
             * -0.0 == 0.0), so equal keys always meet in one partition */
            key.len = 0;
            rc = sc_key_encode(&key, in, r, st->keys, st->nkeys, st->base.in.lt);
            if (rc) break;
            /* the high half picks the partition: the keyed maps index slots by the low bits */
            part[r] = (uint32_t)((sc_hash_bytes(key.p, key.len) >> 32) % P);
            count[part[r]]++;
        }
    }
    sc_buf_free(&key);
    uint32_t groups = 0;
    for (uint32_t i = 0; rc == SC_OK && i < P; i++) groups += count[i] > 0 || publish;
    if (rc == SC_OK && groups == 1) {
        /* one partition: the batch goes as it is, with positions */
        int64_t *pos = in->cols[SC_COL_POS].values;
        for (int64_t r = 0; r < n; r++) pos[r] = r;
        in->part = part[0];
        in->group_n = 1;
        *out = in;
        if (part != stack_part) free(part);
        free(count);
        free(sub);
        return SC_OK;
    }
    for (uint32_t i = 0; rc == SC_OK && i < P; i++) {
        if (!count[i] && !publish) continue;
        rc = sc_batch_new(&sub[i], &st->base.in, count[i] ? count[i] : 1);
        if (rc) break;
        sub[i]->part = i;
        sub[i]->group_n = groups;
        sub[i]->publish = publish;
    }
    /* rows of each partition, in order, then one columnar take per partition */
    int64_t *idx = rc == SC_OK ? malloc((size_t)(n ? n : 1) * sizeof *idx) : NULL;
    int64_t *start = rc == SC_OK ? calloc(P + 1, sizeof *start) : NULL;
    if (rc == SC_OK && (!idx || !start)) rc = SC_ENOMEM;
    if (rc == SC_OK) {
        for (uint32_t i = 0; i < P; i++) start[i + 1] = start[i] + count[i];
        for (int64_t r = 0; r < n; r++) idx[start[part[r]]++] = r;
        for (uint32_t i = P; i > 0; i--) start[i] = start[i - 1]; /* back to the starts */
        start[0] = 0;
    }
    for (uint32_t i = 0; rc == SC_OK && i < P; i++) {
        if (!count[i]) continue; /* an empty publish sub-batch */
        rc = sc_batch_take(sub[i], in, idx + start[i], count[i]);
        int64_t *pos = sub[i]->cols[SC_COL_POS].values;
        for (int64_t j = 0; rc == SC_OK && j < count[i]; j++) pos[j] = idx[start[i] + j];
    }
    free(idx);
    free(start);
    sc_batch *head = NULL, *tail = NULL;
    for (uint32_t i = 0; i < P; i++) {
        if (!sub[i]) continue;
        if (rc) sc_batch_release(sub[i]);
        else sc_chain_append(&head, &tail, sub[i]);
    }
    if (part != stack_part) free(part);
    free(count);
    free(sub);
    sc_batch_release(in);
    *out = head;
    return rc;
}

static void split_destroy(void *vst) {
    split_state *st = vst;
    if (!st) return;
    sc_op_base_free(&st->base);
    free(st->keys);
    free(st);
}

/* -------------------------------------------------------------------------- merge */

/* m rows [0, n) = row ob_r[k] of batch parts[ob_b[k]], column by column (m is fresh: every
 * validity bit set, nothing written yet). */
static int gather_rows(sc_batch *m, sc_batch *const *parts, const int64_t *ob_b, const int64_t *ob_r, int64_t n) {
    for (int32_t c = 0; c < m->ncols; c++) {
        sc_column *d = &m->cols[c];
        int64_t nulls = 0;
        for (int64_t k = 0; k < n; k++) {
            const sc_column *x = &parts[ob_b[k]]->cols[c];
            if (x->null_count && !sc_bit_get(x->validity, ob_r[k])) {
                sc_bit_set(d->validity, k, false);
                nulls++;
            }
        }
        d->null_count = nulls;
        switch (d->type) {
        case SC_COL_INT64:
        case SC_COL_DOUBLE: {
            int64_t *dv = d->values;
            for (int64_t k = 0; k < n; k++) dv[k] = ((const int64_t *)parts[ob_b[k]]->cols[c].values)[ob_r[k]];
            break;
        }
        case SC_COL_BOOL:
            for (int64_t k = 0; k < n; k++)
                sc_bit_set(d->values, k, sc_bit_get(parts[ob_b[k]]->cols[c].values, ob_r[k]));
            break;
        case SC_COL_UTF8:
            for (int64_t k = 0; k < n; k++) {
                const sc_batch *x = parts[ob_b[k]];
                int32_t len;
                const char *p = sc_batch_get_utf8(x, c, ob_r[k], &len);
                bool valid = sc_bit_get(d->validity, k);
                int rc = sc_batch_put_utf8(m, c, k, p, valid ? len : 0);
                if (rc) return rc;
                if (!valid) sc_batch_set_null(m, c, k);
            }
            break;
        }
    }
    return SC_OK;
}

/* Reassemble the sub-batches of one input: rows in pos order (stable within a sub-batch,
 * where one input row may have produced several output rows). */
static int merge_group(merge_state *st, sc_batch **out) {
    uint32_t g = st->npending;
    int64_t total = 0, maxpos = -1;
    for (uint32_t i = 0; i < g; i++) {
        sc_batch *b = st->pending[i];
        total += b->nrows;
        const int64_t *pos = b->cols[SC_COL_POS].values;
        for (int64_t r = 0; r < b->nrows; r++)
            if (pos[r] > maxpos) maxpos = pos[r];
    }
    *out = NULL;
    int rc = SC_OK;
    /* a publishing operator's end of stream reaches every partition: forward one eos, last */
    sc_batch *eos = NULL;
    for (uint32_t i = 0; i < g && !eos; i++)
        if (st->pending[i]->eos) eos = st->pending[i];
    if (total > 0) {
        /* counting sort by pos: start[p] = first output row of position p */
        int64_t *start = calloc((size_t)maxpos + 2, sizeof(int64_t));
        if (!start) rc = SC_ENOMEM;
        for (uint32_t i = 0; !rc && i < g; i++) {
            const int64_t *pos = st->pending[i]->cols[SC_COL_POS].values;
            for (int64_t r = 0; r < st->pending[i]->nrows; r++) start[pos[r] + 1]++;
        }
        for (int64_t p = 0; !rc && p <= maxpos; p++) start[p + 1] += start[p];
        int64_t *order_b = NULL, *order_r = NULL;
        if (!rc) {
            order_b = malloc((size_t)total * sizeof(int64_t));
            order_r = malloc((size_t)total * sizeof(int64_t));
            if (!order_b || !order_r) rc = SC_ENOMEM;
        }
        for (uint32_t i = 0; !rc && i < g; i++) {
            const int64_t *pos = st->pending[i]->cols[SC_COL_POS].values;
            for (int64_t r = 0; r < st->pending[i]->nrows; r++) {
                int64_t at = start[pos[r]]++;
                order_b[at] = i;
                order_r[at] = r;
            }
        }
        sc_batch *m = NULL;
        if (!rc) rc = sc_batch_new(&m, &st->base.in, total);
        if (!rc) rc = gather_rows(m, st->pending, order_b, order_r, total);
        if (!rc) {
            m->nrows = total;
            *out = m;
        } else if (m) {
            sc_batch_release(m);
        }
        free(start);
        free(order_b);
        free(order_r);
    }
    for (uint32_t i = 0; i < g; i++)
        if (st->pending[i] != eos) sc_batch_release(st->pending[i]);
    st->npending = 0;
    if (eos && rc) sc_batch_release(eos);
    if (eos && !rc) {
        eos->next = NULL;
        eos->part = 0;
        eos->group_n = 0;
        if (*out) (*out)->next = eos;
        else *out = eos;
    }
    return rc;
}

static int merge_run(void *vst, sc_batch *in, sc_batch **out) {
    merge_state *st = vst;
    *out = NULL;
    if (in->group_n <= 1 && st->npending == 0) {
        in->group_n = 0;
        if (in->nrows == 0 && !in->eos) {
            sc_batch_release(in);
            return SC_OK;
        }
        *out = in;
        return SC_OK;
    }
    if (st->npending == st->cap) {
        uint32_t cap = st->cap ? st->cap * 2 : 16;
        sc_batch **q = realloc(st->pending, cap * sizeof *q);
        if (!q) {
            sc_batch_release(in);
            return SC_ENOMEM;
        }
        st->pending = q;
        st->cap = cap;
    }
    st->pending[st->npending++] = in;
    if (in->part != PIECE_CONTINUES) st->done++;
    if (st->done < in->group_n) return SC_OK;
    st->done = 0;
    return merge_group(st, out);
}

static void merge_destroy(void *vst) {
    merge_state *st = vst;
    if (!st) return;
    for (uint32_t i = 0; i < st->npending; i++) sc_batch_release(st->pending[i]);
    free(st->pending);
    sc_op_base_free(&st->base);
    free(st);
}

/* -------------------------------------------------------------------------- keyed */

static int keyed_run(void *vst, sc_batch *in, sc_batch **out) {
    keyed_dispatch *d = vst;
    int rc = d->run(d->states[in->part % d->n], in, out);
    if (rc >= 0)
        for (sc_batch *b = *out; b && b->next; b = b->next) b->part = PIECE_CONTINUES;
    return rc;
}

static uint32_t keyed_partition(void *vst, const sc_batch *in) { return in->part; }

static void keyed_destroy(void *vst) {
    keyed_dispatch *d = vst;
    if (!d) return;
    for (uint32_t i = 0; i < d->n; i++) d->destroy(d->states[i]);
    free(d->states);
    free(d);
}

/* --------------------------------------------------------------------- the program */

int sc_prog_create(sc_prog **out, uint32_t nsteps, uint32_t max_out) {
    sc_prog *p = calloc(1, sizeof *p);
    if (!p) return SC_ENOMEM;
    p->nsteps = nsteps;
    p->steps = aligned_alloc(SC_CACHELINE, sizeof(sc_step_counters) * (nsteps ? nsteps : 1));
    p->qcap = max_out ? max_out : 64;
    p->q = calloc(p->qcap, sizeof(sc_batch *));
    if (!p->steps || !p->q) {
        free(p->steps);
        free(p->q);
        free(p);
        return SC_ENOMEM;
    }
    memset(p->steps, 0, sizeof(sc_step_counters) * (nsteps ? nsteps : 1));
    pthread_mutex_init(&p->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->cv, &ca);
    pthread_condattr_destroy(&ca);
    *out = p;
    return SC_OK;
}

sc_step_counters *sc_prog_counters(sc_prog *p, uint32_t step) { return step < p->nsteps ? &p->steps[step] : NULL; }

static int add_op(sc_prog *p, const char *name, sc_op_kind kind, sc_op_run_fn run, sc_op_destroy_fn destroy,
                  void *state, sc_op_base **bases, uint32_t nbases) {
    if (p->nops >= MAX_OPS || p->pool) {
        free(bases);
        destroy(state);
        return p->pool ? SC_EINVAL : SC_EUNSUPPORTED;
    }
    prog_op *o = &p->ops[p->nops++];
    o->name = strdup(name ? name : "op");
    o->kind = kind;
    o->run = run;
    o->destroy = destroy;
    o->state = state;
    o->bases = bases;
    o->nbases = nbases;
    return SC_OK;
}

int sc_prog_add(sc_prog *p, const char *name, sc_op_kind kind, sc_op_run_fn run, sc_op_destroy_fn destroy,
                void *state, sc_op_base *base) {
    sc_op_base **bases = NULL;
    if (base) {
        bases = malloc(sizeof *bases);
        if (!bases) {
            destroy(state);
            return SC_ENOMEM;
        }
        bases[0] = base;
    }
    return add_op(p, name, kind, run, destroy, state, bases, base ? 1 : 0);
}

int sc_prog_add_bases(sc_prog *p, const char *name, sc_op_kind kind, sc_op_run_fn run, sc_op_destroy_fn destroy,
                      void *state, sc_op_base **bases, uint32_t nbases) {
    return add_op(p, name, kind, run, destroy, state, bases, nbases);
}

int sc_prog_add_keyed(sc_prog *p, const char *name, sc_op_run_fn run, sc_op_destroy_fn destroy,
                      void **states, sc_op_base **bases, uint32_t partitions, const int32_t *keys,
                      int32_t nkeys, const sc_schema *in, const sc_schema *out) {
    if (p->nops + 3 > MAX_OPS || partitions == 0) {
        for (uint32_t i = 0; i < partitions; i++) destroy(states[i]);
        return SC_EUNSUPPORTED;
    }
    split_state *sp = calloc(1, sizeof *sp);
    merge_state *mg = calloc(1, sizeof *mg);
    keyed_dispatch *d = calloc(1, sizeof *d);
    sc_op_base **kb = malloc(partitions * sizeof *kb);
    int rc = sp && mg && d && kb ? SC_OK : SC_ENOMEM;
    if (!rc) rc = sc_op_base_init(&sp->base, 0, false, false, &p->steps[0], in, in, 1024, false);
    if (!rc) rc = sc_op_base_init(&mg->base, 0, false, false, &p->steps[0], out, out, 1024, false);
    if (!rc && nkeys > 0) {
        sp->keys = malloc((size_t)nkeys * sizeof(int32_t));
        if (!sp->keys) rc = SC_ENOMEM;
        else memcpy(sp->keys, keys, (size_t)nkeys * sizeof(int32_t));
    }
    if (rc) {
        if (sp) split_destroy(sp);
        if (mg) merge_destroy(mg);
        free(d);
        free(kb);
        for (uint32_t i = 0; i < partitions; i++) destroy(states[i]);
        return rc;
    }
    sp->nkeys = nkeys;
    /* a global aggregate (no keys) has one partition */
    sp->parts = nkeys > 0 ? partitions : 1;
    d->run = run;
    d->destroy = destroy;
    d->n = partitions;
    d->states = malloc(partitions * sizeof(void *));
    if (!d->states) {
        split_destroy(sp);
        merge_destroy(mg);
        free(d);
        free(kb);
        for (uint32_t i = 0; i < partitions; i++) destroy(states[i]);
        return SC_ENOMEM;
    }
    memcpy(d->states, states, partitions * sizeof(void *));
    memcpy(kb, bases, partitions * sizeof *kb);
    char buf[128];
    snprintf(buf, sizeof buf, "%s:split", name);
    rc = add_op(p, buf, SC_OP_STATELESS, split_run, split_destroy, sp, NULL, 0);
    if (!rc) rc = add_op(p, name, SC_OP_PARTITIONED, keyed_run, keyed_destroy, d, kb, partitions);
    else keyed_destroy(d), free(kb);
    snprintf(buf, sizeof buf, "%s:merge", name);
    if (!rc) rc = add_op(p, buf, SC_OP_STATEFUL, merge_run, merge_destroy, mg, NULL, 0);
    else merge_destroy(mg);
    return rc;
}

int sc_prog_set_publish(sc_prog *p, uint64_t interval_ns, uint64_t max_ns) {
    if (p->nops < 3 || p->ops[p->nops - 3].run != split_run || interval_ns == 0 || max_ns < interval_ns)
        return SC_EINVAL;
    split_state *sp = p->ops[p->nops - 3].state;
    sp->publish_ns = interval_ns;
    sp->publish_max_ns = max_ns;
    sc_u64_store_relaxed(&sp->publish_every, interval_ns);
    sc_u64_store_relaxed(&sp->last_publish, sc_now_ns());
    return SC_OK;
}

uint32_t sc_prog_nops(const sc_prog *p) { return p->nops; }
const char *sc_prog_op_name(const sc_prog *p, uint32_t op) { return op < p->nops ? p->ops[op].name : NULL; }

int64_t sc_prog_state_size(const sc_prog *p, uint32_t op) {
    if (op >= p->nops) return 0;
    int64_t s = 0;
    for (uint32_t i = 0; i < p->ops[op].nbases; i++) s += sc_i64_load_relaxed(&p->ops[op].bases[i]->state_size);
    return s;
}

static void q_put(sc_prog *p, sc_batch *b) { /* under mu, with room */
    p->q[(p->qhead + p->qlen) % p->qcap] = b;
    p->qlen++;
    p->qrows += b->nrows;
    pthread_cond_broadcast(&p->cv);
}

/* Coalescing: rows in the queue before it counts as full (bounded memory), in chunks. */
#define COALESCED_CHUNKS 4

/* The fewest rows a batch needs to be a chunk of its own (sink_passes), and the least room an
 * open chunk starts with (open_rows); lowering.py's PACED_MIN_ROWS mirrors it. */
static int64_t least_chunk(const sc_prog *p) { return p->chunk_rows / 64; }

/* A batch large and full enough to be a chunk of its own: it is queued as it is (exported
 * later without a copy) instead of being appended to the open chunk. Only a standalone batch
 * qualifies (a pool batch must go back to its pool). One whose columns point into an
 * imported Arrow array (ext: columns no step changed, every row of the batch kept) passes
 * too when the array's buffers may be shared (sc_extbuf.shared: a Polars frame's), and the
 * consumer's chunk then shares the source's buffers, as Polars' own frames do after a
 * with_columns: the array lives as long as the chunk, and a copy of the columns cost as much
 * as the rest of a with_columns run. Another array (a pyarrow table over numpy memory the
 * user may still change) is copied into the open chunk. */
static bool sink_passes(const sc_prog *p, const sc_batch *b) {
    return !b->pool && !b->next && (!b->ext || b->ext->shared) && b->nrows >= least_chunk(p) &&
           2 * b->nrows >= b->capacity;
}

/* The sink's "no room" (under p->mu, which it releases): the next take wakes parked workers,
 * one of which retries the batch held back. */
static int full(sc_prog *p) {
    p->blocked = true;
    pthread_mutex_unlock(&p->mu);
    return SC_EFULL;
}

/* The room a new open chunk starts with when its first batch has `rows` rows: the whole
 * chunk for large batches, room for 16 such batches for small ones. A chunk that fills closes
 * and the next one gets twice its room (p->next_room), up to chunk_rows; one the driver takes
 * while open is followed by a small one again. A slow paced source sends batches of a few
 * rows and the driver takes the open chunk every few milliseconds: allocating a whole chunk
 * each time cost more than the rows themselves. */
static int64_t open_rows(const sc_prog *p, int64_t rows) {
    if (rows >= p->chunk_rows) return rows;
    int64_t room = 16 * rows > least_chunk(p) ? 16 * rows : least_chunk(p);
    room = room < p->chunk_rows ? room : p->chunk_rows;
    return room > 0 ? room : 1;
}

/* Count the nulls of each column of an output chunk from its bitmap, here on the worker that
 * made it (the driver thread exporting it would read every bitmap from the other core's
 * cache: that was most of a chunk's import into Polars). */
static void count_nulls(sc_batch *b) {
    for (int32_t k = 0; k < b->ncols; k++) {
        sc_column *c = &b->cols[k];
        c->null_count = c->validity ? b->nrows - sc_bits_count(c->validity, 0, b->nrows) : 0;
    }
    b->nulls_counted = 1;
}

static int sink_coalesce(sc_prog *p, sc_batch *b) {
    if (!b->eos && sink_passes(p, b) && !b->nulls_counted) count_nulls(b);
    pthread_mutex_lock(&p->mu);
    sc_batch *acc = p->acc;
    int64_t max_rows = COALESCED_CHUNKS * p->chunk_rows;
    if (b->eos) { /* the open chunk, then the marker (each needs a free slot of the queue) */
        if (acc && p->qlen < p->qcap) {
            q_put(p, acc);
            p->acc = NULL;
            acc = NULL;
        }
        if (acc || p->qlen >= p->qcap) {
            return full(p); /* retried: the marker waits until the taker makes room */
        }
        q_put(p, b);
        pthread_mutex_unlock(&p->mu);
        return SC_OK;
    }
    if (sink_passes(p, b)) { /* the open chunk (rows before b), then b itself */
        uint32_t slots = acc ? 2 : 1;
        int64_t rows = b->nrows + (acc ? acc->nrows : 0);
        if (p->qlen + slots > p->qcap || (p->qlen && p->qrows + rows > max_rows)) {
            return full(p);
        }
        if (acc) q_put(p, acc);
        p->acc = NULL;
        q_put(p, b);
        pthread_mutex_unlock(&p->mu);
        return SC_OK;
    }
    bool closes = acc && acc->nrows + b->nrows > (acc->capacity < p->chunk_rows ? acc->capacity : p->chunk_rows);
    if (closes && (p->qlen >= p->qcap || (p->qlen && p->qrows + acc->nrows > max_rows))) {
        return full(p);
    }
    if (closes) { /* the next chunk gets twice the room: a chunk is never grown (copied) */
        p->next_room = 2 * acc->capacity < p->chunk_rows ? 2 * acc->capacity : p->chunk_rows;
        q_put(p, acc);
        acc = NULL;
    }
    p->acc = NULL; /* the sink thread appends without the lock; take() cannot steal it meanwhile */
    int64_t room = 0; /* of a new open chunk */
    if (!acc) {
        room = open_rows(p, b->nrows);
        if (room < p->next_room) room = p->next_room;
        p->next_room = 0;
    }
    pthread_mutex_unlock(&p->mu);
    int rc = SC_OK;
    if (!acc) {
        rc = sc_batch_new(&acc, &p->out_schema, room);
        if (rc == SC_OK) {
            acc->serial = b->serial;
            acc->first_row = b->first_row;
            acc->marker_ns = b->marker_ns;
        }
    }
    if (rc == SC_OK) rc = sc_batch_append(acc, b);
    pthread_mutex_lock(&p->mu);
    p->acc = acc;
    pthread_mutex_unlock(&p->mu);
    if (rc == SC_OK) sc_batch_release(b);
    return rc;
}

static int sink_fn(void *vp, sc_batch *b) {
    sc_prog *p = vp;
    if (p->chunk_rows) return sink_coalesce(p, b);
    pthread_mutex_lock(&p->mu);
    if (p->qlen == p->qcap) {
        return full(p);
    }
    q_put(p, b);
    pthread_mutex_unlock(&p->mu);
    return SC_OK;
}

int sc_prog_set_coalesce(sc_prog *p, const sc_schema *out, int64_t chunk_rows) {
    if (p->pool || chunk_rows < 0) return SC_EINVAL;
    sc_schema_free(&p->out_schema);
    int rc = sc_schema_copy(&p->out_schema, out);
    p->chunk_rows = rc ? 0 : chunk_rows;
    return rc;
}

int sc_prog_start(sc_prog *p, const sc_pool_config *cfg) {
    if (p->pool || p->nops == 0) return SC_EINVAL;
    int rc = sc_metrics_create(&p->metrics, p->nops);
    if (rc) return rc;
    sc_op_desc d[MAX_OPS];
    for (uint32_t j = 0; j < p->nops; j++) {
        d[j] = (sc_op_desc){ .name = p->ops[j].name, .kind = p->ops[j].kind, .run = p->ops[j].run,
                             .state = p->ops[j].state,
                             .partition = p->ops[j].kind == SC_OP_PARTITIONED ? keyed_partition : NULL };
    }
    rc = sc_pool_create(&p->pool, cfg, d, p->nops, sink_fn, p, p->metrics);
    if (rc) return rc;
    return sc_pool_start(p->pool);
}

int sc_prog_push(sc_prog *p, sc_batch *b, int64_t timeout_ns) { return sc_pool_push(p->pool, b, timeout_ns); }

int sc_prog_finish(sc_prog *p, int64_t timeout_ns) {
    if (p->eos_pushed) return SC_OK;
    sc_schema s = { 0, NULL };
    sc_batch *e = NULL;
    uint8_t lt[SC_NHIDDEN] = { SC_LT_INT, SC_LT_INT };
    int rc = sc_schema_init(&s, SC_NHIDDEN, lt);
    if (!rc) rc = sc_batch_new(&e, &s, 1);
    sc_schema_free(&s);
    if (rc) return rc;
    e->eos = 1;
    rc = sc_pool_push(p->pool, e, timeout_ns);
    if (rc != SC_OK) {
        sc_batch_release(e);
        return rc;
    }
    p->eos_pushed = true;
    return sc_pool_close_input(p->pool);
}

int sc_prog_take(sc_prog *p, int64_t timeout_ns, sc_batch **b) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t ns = (uint64_t)ts.tv_nsec + (uint64_t)(timeout_ns > 0 ? timeout_ns : 0);
    ts.tv_sec += (time_t)(ns / 1000000000ull);
    ts.tv_nsec = (long)(ns % 1000000000ull);
    pthread_mutex_lock(&p->mu);
    int rc = SC_OK;
    while (p->qlen == 0) {
        if (p->acc && p->acc->nrows && timeout_ns <= 0) break;
        if (!p->pool || sc_pool_get_state(p->pool) == SC_POOL_STOPPED || sc_pool_error(p->pool, NULL)) {
            rc = SC_ECLOSED;
            break;
        }
        if (timeout_ns <= 0 || pthread_cond_timedwait(&p->cv, &p->mu, &ts) != 0) {
            rc = p->qlen ? SC_OK : SC_EEMPTY;
            break;
        }
    }
    if (p->qlen) {
        *b = p->q[p->qhead];
        p->qhead = (p->qhead + 1) % p->qcap;
        p->qlen--;
        p->qrows -= (*b)->nrows;
        rc = SC_OK;
    } else if (p->acc && p->acc->nrows) { /* the open chunk: rows that arrived so far */
        *b = p->acc;
        p->acc = NULL;
        rc = SC_OK;
    }
    bool wake = rc == SC_OK && p->blocked;
    if (wake) p->blocked = false;
    pthread_mutex_unlock(&p->mu);
    /* room again: a head the full queue held back is retried by a worker, maybe parked */
    if (wake && p->pool) sc_pool_wake(p->pool);
    return rc;
}

void sc_prog_expect(sc_prog *p, uint64_t due_ns) {
    if (p->pool) sc_pool_expect(p->pool, due_ns);
}

int sc_prog_arm(sc_prog *p, sc_batch *const *b, const uint64_t *due_ns, int n, uint64_t next_ns) {
    return p->pool ? sc_pool_arm(p->pool, b, due_ns, n, next_ns) : SC_EINVAL;
}

void sc_prog_disarm(sc_prog *p, int *pushed, int *rc) {
    if (p->pool) {
        sc_pool_disarm(p->pool, pushed, rc);
    } else {
        *pushed = 0;
        *rc = SC_OK;
    }
}

void sc_prog_spread(sc_prog *p) {
    if (p->pool) sc_pool_spread(p->pool);
}

bool sc_prog_take_due(sc_prog *p) {
    pthread_mutex_lock(&p->mu);
    bool due = p->blocked || 4 * p->qlen >= p->qcap ||
               (p->chunk_rows && 4 * p->qrows >= COALESCED_CHUNKS * p->chunk_rows);
    pthread_mutex_unlock(&p->mu);
    return due;
}

int sc_prog_pause(sc_prog *p) { return p->pool ? sc_pool_pause(p->pool) : SC_EINVAL; }
int sc_prog_resume(sc_prog *p) { return p->pool ? sc_pool_resume(p->pool) : SC_EINVAL; }

int sc_prog_stop(sc_prog *p) {
    if (!p->pool) return SC_OK;
    int rc = sc_pool_stop(p->pool);
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    return rc;
}

int sc_prog_error(const sc_prog *p, uint32_t *op) { return p->pool ? sc_pool_error(p->pool, op) : 0; }
sc_metrics *sc_prog_metrics(sc_prog *p) { return p->metrics; }
const sc_sched *sc_prog_sched(const sc_prog *p) { return p->pool ? sc_pool_scheduler(p->pool) : NULL; }

int sc_prog_sides(sc_prog *p, sc_side ***sides, uint32_t *n) {
    uint32_t cnt = 0;
    for (uint32_t j = 0; j < p->nops; j++)
        for (uint32_t i = 0; i < p->ops[j].nbases; i++) cnt += p->ops[j].bases[i]->side != NULL;
    sc_side **out = malloc((cnt ? cnt : 1) * sizeof *out);
    if (!out) return SC_ENOMEM;
    cnt = 0;
    for (uint32_t j = 0; j < p->nops; j++)
        for (uint32_t i = 0; i < p->ops[j].nbases; i++)
            if (p->ops[j].bases[i]->side) out[cnt++] = p->ops[j].bases[i]->side;
    *sides = out;
    *n = cnt;
    return SC_OK;
}

void sc_prog_destroy(sc_prog *p) {
    if (!p) return;
    if (p->pool) {
        sc_pool_stop(p->pool);
        sc_pool_destroy(p->pool);
    }
    for (uint32_t j = 0; j < p->nops; j++) {
        p->ops[j].destroy(p->ops[j].state);
        free(p->ops[j].bases);
        free(p->ops[j].name);
    }
    while (p->qlen) {
        sc_batch_release(p->q[p->qhead]);
        p->qhead = (p->qhead + 1) % p->qcap;
        p->qlen--;
    }
    if (p->acc) sc_batch_release(p->acc);
    sc_schema_free(&p->out_schema);
    free(p->q);
    sc_metrics_destroy(p->metrics);
    free(p->steps);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p);
}
