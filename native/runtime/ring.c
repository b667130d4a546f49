/* ring: see ring.h for the contract. */
#include "ring.h"

#include <stdlib.h>

#include "atomic_ext.h"

#define SC_RING_CLOSED_BIT (1ull << 63)

typedef struct {
    sc_atomic_u64 seq;
    void *data; /* published by the release store of seq */
} sc_ring_cell;

struct sc_ring {
    sc_ring_kind kind;
    uint32_t capacity;
    uint64_t mask;
    sc_ring_cell *cells; /* MPMC */
    void **slots;        /* SPSC */
    /* MPMC: enqueue position (bit 63 = closed); SPSC: tail (producer index) */
    SC_ALIGNED sc_atomic_u64 tail;
    uint64_t head_cache; /* SPSC, producer-private */
    SC_ALIGNED sc_atomic_u64 head; /* MPMC: dequeue position; SPSC: consumer index */
    uint64_t tail_cache; /* SPSC, consumer-private */
    SC_ALIGNED sc_atomic_u64 closed; /* SPSC only */
};

int sc_ring_create(sc_ring **out, sc_ring_kind kind, uint32_t capacity) {
    if (!out || capacity == 0 || capacity > (1u << 30) ||
        (kind != SC_RING_MPMC && kind != SC_RING_SPSC))
        return SC_EINVAL;
    uint64_t cap = 2;
    while (cap < capacity) cap <<= 1;
    sc_ring *r = sc_alloc_aligned(sizeof *r);
    if (!r) return SC_ENOMEM;
    memset(r, 0, sizeof *r);
    r->kind = kind;
    r->capacity = (uint32_t)cap;
    r->mask = cap - 1;
    if (kind == SC_RING_MPMC) {
        r->cells = malloc(cap * sizeof *r->cells);
        if (!r->cells) { free(r); return SC_ENOMEM; }
        for (uint64_t i = 0; i < cap; i++) {
            sc_u64_init(&r->cells[i].seq, i);
            r->cells[i].data = NULL;
        }
    } else {
        r->slots = calloc(cap, sizeof *r->slots);
        if (!r->slots) { free(r); return SC_ENOMEM; }
    }
    sc_u64_init(&r->tail, 0);
    sc_u64_init(&r->head, 0);
    sc_u64_init(&r->closed, 0);
    *out = r;
    return SC_OK;
}

void sc_ring_destroy(sc_ring *r) {
    if (!r) return;
    free(r->cells);
    free(r->slots);
    free(r);
}

static int mpmc_push(sc_ring *r, void *item) {
    uint64_t pos = sc_u64_load_relaxed(&r->tail);
    sc_ring_cell *cell;
    for (;;) {
        if (pos & SC_RING_CLOSED_BIT) return SC_ECLOSED;
        cell = &r->cells[pos & r->mask];
        uint64_t seq = sc_u64_load_acquire(&cell->seq);
        int64_t dif = (int64_t)(seq - pos);
        if (dif == 0) {
            if (sc_u64_cas_weak_relaxed(&r->tail, &pos, pos + 1)) break;
        } else if (dif < 0) {
            return SC_EFULL;
        } else {
            pos = sc_u64_load_relaxed(&r->tail);
        }
    }
    cell->data = item;
    sc_u64_store_release(&cell->seq, pos + 1);
    return SC_OK;
}

static int mpmc_pop(sc_ring *r, void **item) {
    uint64_t pos = sc_u64_load_relaxed(&r->head);
    sc_ring_cell *cell;
    for (;;) {
        cell = &r->cells[pos & r->mask];
        uint64_t seq = sc_u64_load_acquire(&cell->seq);
        int64_t dif = (int64_t)(seq - (pos + 1));
        if (dif == 0) {
            if (sc_u64_cas_weak_relaxed(&r->head, &pos, pos + 1)) break;
        } else if (dif < 0) {
            uint64_t t = sc_u64_load_acquire(&r->tail);
            if ((t & SC_RING_CLOSED_BIT) && (t & ~SC_RING_CLOSED_BIT) == pos) return SC_ECLOSED;
            return SC_EEMPTY;
        } else {
            pos = sc_u64_load_relaxed(&r->head);
        }
    }
    *item = cell->data;
    sc_u64_store_release(&cell->seq, pos + r->mask + 1);
    return SC_OK;
}

static int spsc_push(sc_ring *r, void *item) {
    if (sc_u64_load_relaxed(&r->closed)) return SC_ECLOSED;
    uint64_t t = sc_u64_load_relaxed(&r->tail);
    if (t - r->head_cache > r->mask) {
        r->head_cache = sc_u64_load_acquire(&r->head);
        if (t - r->head_cache > r->mask) return SC_EFULL;
    }
    r->slots[t & r->mask] = item;
    sc_u64_store_release(&r->tail, t + 1);
    return SC_OK;
}

static int spsc_pop(sc_ring *r, void **item) {
    uint64_t h = sc_u64_load_relaxed(&r->head);
    if (h == r->tail_cache) {
        r->tail_cache = sc_u64_load_acquire(&r->tail);
        if (h == r->tail_cache) {
            if (!sc_u64_load_acquire(&r->closed)) return SC_EEMPTY;
            r->tail_cache = sc_u64_load_acquire(&r->tail); /* pushes before close are visible */
            if (h == r->tail_cache) return SC_ECLOSED;
        }
    }
    *item = r->slots[h & r->mask];
    sc_u64_store_release(&r->head, h + 1);
    return SC_OK;
}

int sc_ring_try_push(sc_ring *r, void *item) {
    if (!item) return SC_EINVAL;
    return r->kind == SC_RING_SPSC ? spsc_push(r, item) : mpmc_push(r, item);
}

int sc_ring_try_pop(sc_ring *r, void **item) {
    return r->kind == SC_RING_SPSC ? spsc_pop(r, item) : mpmc_pop(r, item);
}

void sc_ring_close(sc_ring *r) {
    if (r->kind == SC_RING_SPSC)
        sc_u64_store_release(&r->closed, 1);
    else
        sc_u64_fetch_or_acqrel(&r->tail, SC_RING_CLOSED_BIT);
}

bool sc_ring_is_closed(const sc_ring *r) {
    if (r->kind == SC_RING_SPSC) return sc_u64_load_acquire(&r->closed) != 0;
    return (sc_u64_load_acquire(&r->tail) & SC_RING_CLOSED_BIT) != 0;
}

uint64_t sc_ring_size(const sc_ring *r) {
    uint64_t h = sc_u64_load_relaxed(&r->head);
    uint64_t t = sc_u64_load_relaxed(&r->tail) & ~SC_RING_CLOSED_BIT;
    return t > h ? t - h : 0;
}

uint32_t sc_ring_capacity(const sc_ring *r) { return r->capacity; }
sc_ring_kind sc_ring_get_kind(const sc_ring *r) { return r->kind; }
