/* ops_entities: multi-entity events with ticket ordering (see ops_entities.h). */
#include "ops_entities.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "ops_state.h"

typedef struct ent {
    sc_atomic_u64 now; /* ticket being served (APPLY, release/acquire) */
    uint64_t back;     /* next ticket to hand out (ORDER only) */
    union {
        double f;
        int64_t i;
    } bal;             /* touched only by the event being served */
} ent;

struct sc_entities {
    sc_atomic_ptr segs[SC_ENT_MAX_SEGS]; /* ent[SC_ENT_SEG] each, published by ORDER */
    sc_atomic_i64 n;                     /* entities so far */
    sc_atomic_u64 waits;                 /* events that had to wait for a ticket */
    sc_atomic_i64 abort;                 /* set on an APPLY error: waiters give up */
    ent global;                          /* serial mode: the one ticket lock */
    bool is_float, overdraft, serial;
    double init_f;
    int64_t init_i;
    sc_kmap map; /* ORDER only: key bytes -> entity id */
    sc_buf kbuf;
};

int sc_entities_create(sc_entities **out, bool is_float, double initial_f, int64_t initial_i,
                       bool overdraft, bool serial) {
    sc_entities *e = calloc(1, sizeof *e);
    if (!e) return SC_ENOMEM;
    for (int i = 0; i < SC_ENT_MAX_SEGS; i++) sc_ptr_init(&e->segs[i], NULL);
    sc_i64_init(&e->n, 0);
    sc_u64_init(&e->waits, 0);
    sc_i64_init(&e->abort, 0);
    sc_u64_init(&e->global.now, 0);
    e->is_float = is_float;
    e->overdraft = overdraft;
    e->serial = serial;
    e->init_f = initial_f;
    e->init_i = initial_i;
    int rc = sc_kmap_init(&e->map, 1024);
    if (rc) {
        free(e);
        return rc;
    }
    *out = e;
    return SC_OK;
}

void sc_entities_destroy(sc_entities *e) {
    if (!e) return;
    for (int i = 0; i < SC_ENT_MAX_SEGS; i++) free(sc_ptr_load_acquire(&e->segs[i]));
    sc_kmap_free(&e->map);
    sc_buf_free(&e->kbuf);
    free(e);
}

int64_t sc_entities_count(const sc_entities *e) { return sc_i64_load_relaxed(&e->n); }
uint64_t sc_entities_waits(const sc_entities *e) { return sc_u64_load_relaxed(&e->waits); }

static inline ent *ent_at(sc_entities *e, int64_t id) {
    if (id < 0) return &e->global;
    ent *seg = sc_ptr_load_acquire(&e->segs[id / SC_ENT_SEG]);
    return &seg[id % SC_ENT_SEG];
}

/* ORDER: the id of the entity in column `col` of row `r` (a new entity when unseen). */
static int entity_of(sc_entities *e, const sc_batch *in, int64_t r, int32_t col, int64_t *id) {
    e->kbuf.len = 0;
    int rc = sc_key_encode(&e->kbuf, in, r, &col, 1, NULL);
    if (rc) return rc;
    uint64_t h = sc_hash_bytes(e->kbuf.p, e->kbuf.len), v = 0;
    if (sc_kmap_find(&e->map, h, e->kbuf.p, (uint32_t)e->kbuf.len, &v)) {
        *id = (int64_t)v;
        return SC_OK;
    }
    int64_t n = sc_i64_load_relaxed(&e->n);
    if (n >= (int64_t)SC_ENT_SEG * SC_ENT_MAX_SEGS) return SC_EFULL;
    if (n % SC_ENT_SEG == 0) {
        ent *seg = calloc(SC_ENT_SEG, sizeof *seg);
        if (!seg) return SC_ENOMEM;
        for (int i = 0; i < SC_ENT_SEG; i++) {
            sc_u64_init(&seg[i].now, 0);
            if (e->is_float) seg[i].bal.f = e->init_f;
            else seg[i].bal.i = e->init_i;
        }
        sc_ptr_store_release(&e->segs[n / SC_ENT_SEG], seg);
    }
    bool ins;
    v = (uint64_t)n;
    rc = sc_kmap_upsert(&e->map, h, e->kbuf.p, (uint32_t)e->kbuf.len, &v, &ins);
    if (rc) return rc;
    sc_i64_store_relaxed(&e->n, n + 1);
    *id = n;
    return SC_OK;
}

/* ------------------------------------------------------------------------------ ORDER */

typedef struct order_op {
    sc_op_base base;
    sc_entities *ents;
    int32_t keys[2], amount;
    char *reasons[5];
    int64_t *keep;
    int64_t keep_cap;
} order_op;

int sc_op_order_create(void **st, const sc_op_base *base, sc_entities *ents, const int32_t keys[2],
                       int32_t amount, const char *const reasons[5]) {
    const sc_schema *in = &base->in, *out = &base->out;
    if (!ents || out->ncols != in->ncols + 5) return SC_EINVAL;
    for (int i = 0; i < 2; i++)
        if (keys[i] < SC_NHIDDEN || keys[i] >= in->ncols || in->lt[keys[i]] != in->lt[keys[0]]) return SC_EINVAL;
    if (amount < SC_NHIDDEN || amount >= in->ncols ||
        (in->lt[amount] != SC_LT_INT && in->lt[amount] != SC_LT_FLOAT))
        return SC_EINVAL;
    for (int32_t c = 0; c < out->ncols; c++)
        if (c < in->ncols ? out->lt[c] != in->lt[c] : out->lt[c] != SC_LT_INT) return SC_EINVAL;
    order_op *op = calloc(1, sizeof *op);
    if (!op) return SC_ENOMEM;
    int rc = sc_op_base_copy(&op->base, base);
    op->ents = ents;
    op->keys[0] = keys[0];
    op->keys[1] = keys[1];
    op->amount = amount;
    for (int i = 0; !rc && i < 5; i++) {
        op->reasons[i] = strdup(reasons[i]);
        if (!op->reasons[i]) rc = SC_ENOMEM;
    }
    if (rc) {
        sc_op_order_destroy(op);
        return rc;
    }
    *st = op;
    return SC_OK;
}

void sc_op_order_destroy(void *vst) {
    order_op *op = vst;
    if (!op) return;
    for (int i = 0; i < 5; i++) free(op->reasons[i]);
    free(op->keep);
    sc_op_base_free(&op->base);
    free(op);
}

/* the dead-letter reason of a row that cannot take part, or NULL */
static const char *order_reject(const order_op *op, const sc_batch *in, int64_t r) {
    for (int i = 0; i < 2; i++)
        if (!sc_batch_is_valid(in, op->keys[i], r)) return op->reasons[i];
    if (!sc_batch_is_valid(in, op->amount, r)) return op->reasons[2];
    if (op->base.in.lt[op->amount] == SC_LT_FLOAT) {
        double a = ((const double *)in->cols[op->amount].values)[r];
        if (a != a) return op->reasons[3];
        if (a < 0) return op->reasons[4];
    } else if (((const int64_t *)in->cols[op->amount].values)[r] < 0) {
        return op->reasons[4];
    }
    return NULL;
}

int sc_op_order_run(void *vst, sc_batch *in, sc_batch **out) {
    order_op *op = vst;
    *out = NULL;
    if (in->eos) return sc_forward_eos(in, out);
    int64_t n = in->nrows;
    sc_count_in(&op->base, n);
    int rc = SC_OK;
    if (n > op->keep_cap) {
        int64_t *k = realloc(op->keep, (size_t)n * sizeof *k);
        if (!k) {
            sc_batch_release(in);
            return SC_ENOMEM;
        }
        op->keep = k;
        op->keep_cap = n;
    }
    int64_t m = 0;
    for (int64_t r = 0; !rc && r < n; r++) {
        const char *why = order_reject(op, in, r);
        if (why) rc = sc_op_dead(&op->base, in, r, why);
        else op->keep[m++] = r;
    }
    sc_batch *ob = NULL;
    if (!rc && m) rc = sc_op_new_out(&op->base, in, &ob);
    int32_t nin = op->base.in.ncols;
    for (int32_t c = 0; !rc && m && c < nin; c++) rc = sc_batch_take_col(ob, c, 0, in, c, op->keep, m);
    sc_entities *e = op->ents;
    for (int64_t j = 0; !rc && j < m; j++) {
        int64_t r = op->keep[j], ida = 0, idb = 0;
        rc = entity_of(e, in, r, op->keys[0], &ida);
        if (!rc) rc = entity_of(e, in, r, op->keys[1], &idb);
        if (rc) break;
        ent *a = ent_at(e, ida), *b = ent_at(e, idb);
        int64_t ta = (int64_t)a->back++, tb = ta;
        if (b != a) tb = (int64_t)b->back++;
        int64_t tg = e->serial ? (int64_t)e->global.back++ : -1;
        sc_batch_set_i64(ob, nin, j, ida);
        sc_batch_set_i64(ob, nin + 1, j, ta);
        sc_batch_set_i64(ob, nin + 2, j, idb);
        sc_batch_set_i64(ob, nin + 3, j, tb);
        sc_batch_set_i64(ob, nin + 4, j, tg);
    }
    sc_i64_store_relaxed(&op->base.state_size, sc_i64_load_relaxed(&e->n));
    if (rc) {
        if (ob) sc_batch_release(ob);
        sc_batch_release(in);
        return rc < 0 ? rc : SC_EINTERNAL;
    }
    if (ob) {
        ob->nrows = m;
        sc_count_out(&op->base, m);
    }
    sc_batch_release(in);
    *out = ob;
    return SC_OK;
}

/* ------------------------------------------------------------------------------ APPLY */

typedef struct apply_op {
    sc_op_base base;
    sc_entities *ents;
    int32_t amount;
    char *rejected;
} apply_op;

int sc_op_apply_create(void **st, const sc_op_base *base, sc_entities *ents, int32_t amount,
                       const char *rejected) {
    const sc_schema *in = &base->in, *out = &base->out;
    int32_t nuser = in->ncols - 5;
    uint8_t bt = ents && ents->is_float ? SC_LT_FLOAT : SC_LT_INT;
    if (!ents || nuser < SC_NHIDDEN || out->ncols != nuser + 2 || amount < SC_NHIDDEN || amount >= nuser)
        return SC_EINVAL;
    for (int32_t c = 0; c < out->ncols; c++)
        if (c < nuser ? out->lt[c] != in->lt[c] : out->lt[c] != bt) return SC_EINVAL;
    apply_op *op = calloc(1, sizeof *op);
    if (!op) return SC_ENOMEM;
    int rc = sc_op_base_copy(&op->base, base);
    op->ents = ents;
    op->amount = amount;
    op->rejected = strdup(rejected);
    if (!rc && !op->rejected) rc = SC_ENOMEM;
    if (rc) {
        sc_op_apply_destroy(op);
        return rc;
    }
    *st = op;
    return SC_OK;
}

void sc_op_apply_destroy(void *vst) {
    apply_op *op = vst;
    if (!op) return;
    free(op->rejected);
    sc_op_base_free(&op->base);
    free(op);
}

/* wait until entity x serves ticket t: false when the run aborted */
static bool wait_turn(sc_entities *e, ent *x, uint64_t t, bool *waited) {
    if (sc_u64_load_acquire(&x->now) == t) return true;
    *waited = true;
    for (uint32_t spin = 0; sc_u64_load_acquire(&x->now) != t; spin++) {
        if (sc_i64_load_relaxed(&e->abort)) return false;
        if (spin < 128) sc_cpu_relax();
        else sched_yield();
    }
    return true;
}

int sc_op_apply_run(void *vst, sc_batch *in, sc_batch **out) {
    apply_op *op = vst;
    *out = NULL;
    if (in->eos) return sc_forward_eos(in, out);
    sc_entities *e = op->ents;
    int64_t n = in->nrows;
    int32_t nuser = op->base.in.ncols - 5;
    sc_count_in(&op->base, n);
    sc_batch *ob = NULL;
    int rc = sc_op_new_out(&op->base, in, &ob);
    int64_t *keep = rc ? NULL : malloc(((size_t)n + 1) * sizeof *keep);
    if (!rc && !keep) rc = SC_ENOMEM;
    bool is_float = e->is_float, fl_amount = op->base.in.lt[op->amount] == SC_LT_FLOAT;
    int64_t m = 0;
    uint64_t waited_events = 0;
    for (int64_t r = 0; !rc && r < n; r++) {
        int64_t ida = sc_batch_get_i64(in, nuser, r), idb = sc_batch_get_i64(in, nuser + 2, r);
        uint64_t ta = (uint64_t)sc_batch_get_i64(in, nuser + 1, r);
        uint64_t tb = (uint64_t)sc_batch_get_i64(in, nuser + 3, r);
        int64_t tg = sc_batch_get_i64(in, nuser + 4, r);
        ent *a = ent_at(e, ida), *b = ent_at(e, idb);
        bool waited = false;
        if ((tg >= 0 && !wait_turn(e, &e->global, (uint64_t)tg, &waited)) || !wait_turn(e, a, ta, &waited) ||
            (b != a && !wait_turn(e, b, tb, &waited))) {
            rc = SC_ECLOSED;
            break;
        }
        waited_events += waited;
        /* served: this event alone touches a and b until it advances their tickets */
        bool ok;
        if (is_float) {
            double amt = fl_amount ? ((const double *)in->cols[op->amount].values)[r]
                                   : (double)sc_batch_get_i64(in, op->amount, r);
            ok = e->overdraft || !(a->bal.f < amt);
            if (ok) {
                a->bal.f = a->bal.f - amt;
                b->bal.f = b->bal.f + amt;
            }
            if (ok) {
                sc_batch_set_f64(ob, nuser, m, a->bal.f);
                sc_batch_set_f64(ob, nuser + 1, m, b->bal.f);
            }
        } else {
            int64_t amt = sc_batch_get_i64(in, op->amount, r);
            ok = e->overdraft || a->bal.i >= amt;
            if (ok) {
                a->bal.i = (int64_t)((uint64_t)a->bal.i - (uint64_t)amt);
                b->bal.i = (int64_t)((uint64_t)b->bal.i + (uint64_t)amt);
                sc_batch_set_i64(ob, nuser, m, a->bal.i);
                sc_batch_set_i64(ob, nuser + 1, m, b->bal.i);
            }
        }
        if (ok) keep[m++] = r;
        else rc = sc_op_dead(&op->base, in, r, op->rejected);
        /* complete: the next ticket of each entity may go */
        sc_u64_store_release(&a->now, ta + 1);
        if (b != a) sc_u64_store_release(&b->now, tb + 1);
        if (tg >= 0) sc_u64_store_release(&e->global.now, (uint64_t)tg + 1);
    }
    if (waited_events) sc_u64_fetch_add_relaxed(&e->waits, waited_events);
    for (int32_t c = 0; !rc && m && c < nuser; c++) rc = sc_batch_take_col(ob, c, 0, in, c, keep, m);
    free(keep);
    if (rc) {
        sc_i64_store_relaxed(&e->abort, 1); /* later events would wait forever */
        if (ob) sc_batch_release(ob);
        sc_batch_release(in);
        return rc < 0 ? rc : SC_EINTERNAL;
    }
    sc_batch_release(in);
    if (!m) {
        sc_batch_release(ob);
        return SC_OK;
    }
    ob->nrows = m;
    sc_count_out(&op->base, m);
    *out = ob;
    return SC_OK;
}
