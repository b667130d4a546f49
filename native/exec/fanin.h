/* fanin: building blocks shared by the multi-input operators (ops_join.c, ops_correlate.c);
 * not part of any operator interface.
 *
 * The tagged input layout (the contract with the DAG executor): one stream of batches in the
 * usual form (exec.h); column 0 seq, column 1 pos, column 2 = SC_FANIN_PORT (SC_LT_INT,
 * never null: which input the row came from, 0 = the step's first input), then input 0's
 * user columns in its schema order, then input 1's, and so on. On a row from port i every
 * other port's columns are null. Rows arrive in arrival order (seq ascending, ties by port).
 *
 * Stored rows: per (key, port) a vector of (time ticks, row blob) in insertion order, the
 * blob holding the columns the operator needs later (ops_state.h row store). Keys map to
 * key ids through an sc_kmap; a key's slot holds its vectors (one per port). */
#ifndef SC_EXEC_FANIN_H
#define SC_EXEC_FANIN_H

#include <stdlib.h>
#include <string.h>

#include "ops_state.h"

#define SC_FANIN_PORT 2

/* A sweep runs when the stored rows reach max(SWEEP_MIN, twice what the last sweep kept);
 * debug builds sweep often so the tests exercise it. */
#ifdef SC_DEBUG
#define SWEEP_MIN 16
#else
#define SWEEP_MIN 1024
#endif

typedef __int128 sc_i128;

static inline int64_t sc_sat64(sc_i128 x) {
    return x > INT64_MAX ? INT64_MAX : x < INT64_MIN ? INT64_MIN : (int64_t)x;
}

typedef struct sc_frow {
    int64_t t;
    sc_sbuf blob;
} sc_frow;

typedef struct sc_frows {
    sc_frow *r;
    uint32_t n, cap;
} sc_frows;

/* Append (t, columns cols[0..ncols) of b[row]). */
static inline int sc_frows_push(sc_frows *v, int64_t t, const sc_batch *b, int64_t row, const int32_t *cols,
                                int32_t ncols) {
    if (v->n == v->cap) {
        uint32_t cap = v->cap ? v->cap * 2 : 4;
        sc_frow *r = realloc(v->r, cap * sizeof *r);
        if (!r) return SC_ENOMEM;
        memset(r + v->cap, 0, (cap - v->cap) * sizeof *r);
        v->r = r;
        v->cap = cap;
    }
    sc_frow *e = &v->r[v->n];
    int rc = sc_row_encode(&e->blob, b, row, cols, ncols);
    if (rc) return rc;
    e->t = t;
    v->n++;
    return SC_OK;
}

/* Drop the rows with t <= limit (keeping the others in order); returns how many went. The
 * slots past n keep their buffers for reuse. */
static inline uint32_t sc_frows_drop_upto(sc_frows *v, sc_i128 limit) {
    uint32_t w = 0;
    for (uint32_t i = 0; i < v->n; i++) {
        if ((sc_i128)v->r[i].t <= limit) continue;
        if (w != i) {
            sc_frow tmp = v->r[w];
            v->r[w] = v->r[i];
            v->r[i] = tmp;
        }
        w++;
    }
    uint32_t gone = v->n - w;
    v->n = w;
    return gone;
}

static inline void sc_frows_free(sc_frows *v) {
    for (uint32_t i = 0; i < v->cap; i++) sc_sbuf_free(&v->r[i].blob);
    free(v->r);
    memset(v, 0, sizeof *v);
}

/* Release memory of a vector that became empty (a key that may stay idle for long). */
static inline void sc_frows_shrink_empty(sc_frows *v) {
    if (v->n == 0 && v->cap > 4) sc_frows_free(v);
}

/* Event time of row `r` in ticks (DATE: days -> microseconds, saturating); false if null. */
static inline bool sc_fanin_ticks(const sc_batch *in, int32_t col, int64_t r, bool days, int64_t *t) {
    if (!sc_batch_is_valid(in, col, r)) return false;
    int64_t v = sc_batch_get_i64(in, col, r);
    *t = days ? sc_sat64((sc_i128)v * SC_US_PER_DAY) : v;
    return true;
}

/* Keys: a slab of per-key slots (each `nports` vectors and a clock), found by key bytes. */
typedef struct sc_fkey {
    uint64_t hash;
    int64_t clock; /* correlate: T_k */
    sc_frows *ports;
    bool live;     /* in use (not on the free list) */
} sc_fkey;

typedef struct sc_fkeys {
    sc_kmap map;
    sc_fkey *k;
    uint32_t cap, hw, nfree, nports;
    uint32_t *free;
    int64_t live; /* keys in use */
} sc_fkeys;

static inline int sc_fkeys_init(sc_fkeys *ks, uint32_t nports) {
    memset(ks, 0, sizeof *ks);
    ks->nports = nports;
    return sc_kmap_init(&ks->map, 64);
}

static inline void sc_fkeys_free(sc_fkeys *ks) {
    for (uint32_t i = 0; i < ks->hw; i++) {
        if (!ks->k[i].ports) continue;
        for (uint32_t p = 0; p < ks->nports; p++) sc_frows_free(&ks->k[i].ports[p]);
        free(ks->k[i].ports);
    }
    free(ks->k);
    free(ks->free);
    sc_kmap_free(&ks->map);
    memset(ks, 0, sizeof *ks);
}

/* The key `key[0..len)`'s slot, created (empty vectors, *created = true) on first sight. */
static inline int sc_fkeys_get(sc_fkeys *ks, const uint8_t *key, uint32_t len, uint32_t *id, bool *created) {
    if (!ks->nfree && ks->hw == ks->cap) {
        uint32_t cap = ks->cap ? ks->cap * 2 : 64;
        sc_fkey *k = realloc(ks->k, cap * sizeof *k);
        if (!k) return SC_ENOMEM;
        memset(k + ks->cap, 0, (cap - ks->cap) * sizeof *k);
        ks->k = k;
        uint32_t *f = realloc(ks->free, cap * sizeof *f);
        if (!f) return SC_ENOMEM;
        ks->free = f;
        ks->cap = cap;
    }
    uint64_t h = sc_hash_bytes(key, len);
    uint64_t v = ks->nfree ? ks->free[ks->nfree - 1] : ks->hw;
    int rc = sc_kmap_upsert(&ks->map, h, key, len, &v, created);
    if (rc) return rc;
    if (*created) {
        sc_fkey *k = &ks->k[v];
        if (!k->ports) {
            k->ports = calloc(ks->nports, sizeof *k->ports);
            if (!k->ports) {
                sc_kmap_remove(&ks->map, h, v);
                return SC_ENOMEM;
            }
        }
        if (ks->nfree) ks->nfree--;
        else ks->hw++;
        k->hash = h;
        k->clock = 0;
        k->live = true;
        ks->live++;
    }
    *id = (uint32_t)v;
    return SC_OK;
}

/* Forget key `id` (its vectors must be empty). */
static inline int sc_fkeys_drop(sc_fkeys *ks, uint32_t id) {
    sc_fkey *k = &ks->k[id];
    for (uint32_t p = 0; p < ks->nports; p++) sc_frows_shrink_empty(&k->ports[p]);
    k->live = false;
    ks->free[ks->nfree++] = id;
    ks->live--;
    return sc_kmap_remove(&ks->map, k->hash, id);
}

#endif
