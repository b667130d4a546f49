/* reorder: see reorder.h for the contract.
 *
 * Why the non-blocking variant is correct (Prasaad et al., Theorem 3.1), in terms of this code:
 * - Only the flag holder reads/advances `next` and clears slots, so emission is serialized.
 * - try_add accepts serial t only when next <= t < next + window (read with acquire). Slot
 *   t mod window last held t - window, which was cleared before `next` moved past it
 *   (release), so the slot is empty and nothing but t can be stored there until t is emitted.
 * - Stranding: a sender stores its item (seq_cst) then tries the flag (seq_cst exchange); a
 *   drainer clears the flag (seq_cst) then re-loads the head slot (seq_cst). In the single
 *   total order either the sender's exchange comes after the clear (it gets the flag or sees
 *   a later holder, who re-checks in turn) or the drainer's re-load sees the item.
 */
#include "reorder.h"

#include <pthread.h>
#include <stdlib.h>

#include "atomic_ext.h"

struct sc_reorder {
    sc_reorder_kind kind;
    uint32_t window;
    uint64_t mask;
    sc_reorder_emit_fn emit;
    void *emit_ctx;
    sc_atomic_ptr *slots;
    SC_ALIGNED sc_atomic_u64 next;  /* written only by the drainer (flag or mutex holder) */
    SC_ALIGNED sc_atomic_flag_t flag; /* NONBLOCKING */
    pthread_mutex_t mu;               /* LOCKED */
#ifdef SC_DEBUG
    sc_atomic_u64 *slot_serial;       /* serial stored in each slot, checked on emit */
    uint64_t last_emitted;            /* drainer-private: strictly monotone release sequence */
    bool emitted_any;
#endif
};

int sc_reorder_create(sc_reorder **out, sc_reorder_kind kind, uint32_t window,
                      uint64_t first_serial, sc_reorder_emit_fn emit, void *emit_ctx) {
    if (!out || !emit || window == 0 || window > (1u << 30) ||
        (kind != SC_REORDER_NONBLOCKING && kind != SC_REORDER_LOCKED))
        return SC_EINVAL;
    uint64_t cap = 1;
    while (cap < window) cap <<= 1;
    sc_reorder *r = sc_alloc_aligned(sizeof *r);
    if (!r) return SC_ENOMEM;
    memset(r, 0, sizeof *r);
    r->slots = malloc(cap * sizeof *r->slots);
#ifdef SC_DEBUG
    r->slot_serial = malloc(cap * sizeof *r->slot_serial);
    if (!r->slot_serial) { free(r->slots); free(r); return SC_ENOMEM; }
    for (uint64_t i = 0; i < cap; i++) sc_u64_init(&r->slot_serial[i], 0);
#endif
    if (!r->slots) { free(r); return SC_ENOMEM; }
    for (uint64_t i = 0; i < cap; i++) sc_ptr_init(&r->slots[i], NULL);
    r->kind = kind;
    r->window = (uint32_t)cap;
    r->mask = cap - 1;
    r->emit = emit;
    r->emit_ctx = emit_ctx;
    sc_u64_init(&r->next, first_serial);
    sc_flag_init(&r->flag);
    if (pthread_mutex_init(&r->mu, NULL) != 0) {
        free(r->slots);
        free(r);
        return SC_ENOMEM;
    }
    *out = r;
    return SC_OK;
}

void sc_reorder_destroy(sc_reorder *r, void (*drop)(void *, void *), void *drop_ctx) {
    if (!r) return;
    for (uint64_t i = 0; i <= r->mask; i++) {
        void *o = sc_ptr_load_acquire(&r->slots[i]);
        if (o && o != SC_REORDER_NOTHING && drop) drop(drop_ctx, o);
    }
    pthread_mutex_destroy(&r->mu);
    free(r->slots);
#ifdef SC_DEBUG
    free(r->slot_serial);
#endif
    free(r);
}

/* Store item for serial t; the caller checked the window. */
static void store_slot(sc_reorder *r, uint64_t t, void *item) {
    sc_atomic_ptr *slot = &r->slots[t & r->mask];
#ifdef SC_DEBUG
    sc_u64_store_relaxed(&r->slot_serial[t & r->mask], t);
    void *expected = NULL;
    SC_INVARIANT(sc_ptr_cas_seqcst(slot, &expected, item), "reorder slot reused before it was drained");
#else
    sc_ptr_store_seqcst(slot, item);
#endif
}

/* Emit the in-order prefix; caller holds the flag or the mutex. Returns SC_OK when it
 * stopped on an empty head slot, else the emit status (item left at the head). */
static int drain_locked(sc_reorder *r) {
    uint64_t n = sc_u64_load_relaxed(&r->next);
    for (;;) {
        sc_atomic_ptr *slot = &r->slots[n & r->mask];
        void *o = sc_ptr_load_acquire(slot);
        if (!o) return SC_OK;
#ifdef SC_DEBUG
        SC_INVARIANT(sc_u64_load_relaxed(&r->slot_serial[n & r->mask]) == n,
                     "reorder slot holds an item of another serial");
        SC_INVARIANT(!r->emitted_any || n == r->last_emitted + 1,
                     "reorder release sequence not strictly monotone");
#endif
        if (o != SC_REORDER_NOTHING) {
            int rc = r->emit(r->emit_ctx, n, &o);
            if (rc != SC_OK) {
                if (o != sc_ptr_load_relaxed(slot)) sc_ptr_store_release(slot, o ? o : SC_REORDER_NOTHING);
                return rc;
            }
        }
#ifdef SC_DEBUG
        r->last_emitted = n;
        r->emitted_any = true;
#endif
        sc_ptr_store_release(slot, NULL);       /* clear before next moves past it */
        sc_u64_store_release(&r->next, ++n);
    }
}

static int nb_drain(sc_reorder *r) {
    for (;;) {
        /* Test before test-and-set: a held flag means the holder's re-check (after its
         * release, later in the seq_cst order than this load) will see our item; the load
         * avoids bouncing the flag's cache line with a failing exchange. */
        if (sc_flag_load_seqcst(&r->flag)) return SC_OK;
        if (!sc_flag_try_acquire_seqcst(&r->flag)) return SC_OK; /* the holder will see our item */
        int rc = drain_locked(r);
        uint64_t n = sc_u64_load_relaxed(&r->next);
        sc_flag_release_seqcst(&r->flag);
        if (rc != SC_OK) return rc; /* head is blocked downstream: a later drain retries it */
        /* re-check: an item for `n` stored after our last look but before our release */
        if (!sc_ptr_load_seqcst(&r->slots[n & r->mask])) return SC_OK;
    }
}

int sc_reorder_try_add(sc_reorder *r, uint64_t serial, void *item) {
    if (!item) return SC_EINVAL;
    if (r->kind == SC_REORDER_LOCKED) {
        pthread_mutex_lock(&r->mu);
        uint64_t n = sc_u64_load_relaxed(&r->next);
        int rc = serial < n ? SC_EINVAL : serial - n >= r->window ? SC_EFULL : SC_OK;
        if (rc == SC_OK) store_slot(r, serial, item);
        pthread_mutex_unlock(&r->mu);
        return rc;
    }
    uint64_t n = sc_u64_load_acquire(&r->next);
    if (serial < n) return SC_EINVAL;
    if (serial - n >= r->window) return SC_EFULL;
    store_slot(r, serial, item);
    return SC_OK;
}

int sc_reorder_drain(sc_reorder *r) {
    if (r->kind == SC_REORDER_LOCKED) {
        pthread_mutex_lock(&r->mu);
        int rc = drain_locked(r);
        pthread_mutex_unlock(&r->mu);
        return rc;
    }
    return nb_drain(r);
}

int sc_reorder_send(sc_reorder *r, uint64_t serial, void *item) {
    if (!item) return SC_EINVAL;
    int rc;
    if (r->kind == SC_REORDER_LOCKED) {
        /* Fig. 2: add and emit under one critical section */
        pthread_mutex_lock(&r->mu);
        uint64_t n = sc_u64_load_relaxed(&r->next);
        rc = serial < n ? SC_EINVAL : serial - n >= r->window ? SC_EFULL : SC_OK;
        if (rc == SC_OK) {
            store_slot(r, serial, item);
            if (serial == n) rc = drain_locked(r);
            if (rc == SC_EFULL) rc = SC_OK; /* added; the head waits for a later drain */
        }
        pthread_mutex_unlock(&r->mu);
        return rc;
    } else {
        rc = sc_reorder_try_add(r, serial, item);
        if (rc != SC_OK) return rc;
        rc = nb_drain(r);
    }
    return rc == SC_EFULL ? SC_OK : rc;
}

uint64_t sc_reorder_next(const sc_reorder *r) { return sc_u64_load_acquire(&r->next); }

bool sc_reorder_has_ready(const sc_reorder *r) {
    uint64_t n = sc_u64_load_acquire(&r->next);
    return sc_ptr_load_acquire(&r->slots[n & r->mask]) != NULL;
}

uint32_t sc_reorder_window(const sc_reorder *r) { return r->window; }
sc_reorder_kind sc_reorder_get_kind(const sc_reorder *r) { return r->kind; }
