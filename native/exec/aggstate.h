/* aggstate: compact per-key state for the keyed aggregate (ops_keyed.c).
 *
 * Two building blocks, each optional for the aggregate:
 *
 * An int map (sc_imap): one int64 key column's values to group numbers. Open addressing with
 * linear probing; a slot holds the key itself and its group, so a probe is one 16-byte read
 * and one compare (no key encoding, no byte hash). Grows by doubling above load 1/2. Key
 * equality is int64 equality, which is the key bytes' equality of sc_key_encode for an
 * INT64 column; null keys are not in the map (the caller keeps one group for them).
 *
 * Dense accumulators (sc_dense): when every aggregate of a step is one of count(), count(x),
 * sum / mean of an int, float or bool column, min / max of an int or float column, a group's
 * state is one record of a few 8-byte words instead of one 56-byte sc_acc per aggregate:
 *   COUNT        [n]           count() (every row) or count(x) (non-null x)
 *   SUM          [n, v]        n non-null values and their sum; sum(x) and mean(x) share it
 *   MIN / MAX    [n, v]        n non-null values and the least / greatest
 * Results are exactly sc_acc's: a float sum adds the values of one key in arrival order to
 * -0.0 (so the first value is kept as is, -0.0 included, as sc_acc_update does), int sums
 * wrap at 64 bits, min / max order NaN above every number; has = (n > 0). sc_dense_acc gives
 * aggregate j's sc_acc view of a record, for sc_acc_write.
 *
 * Thread safety: none; one operator instance is used by one thread at a time. */
#ifndef SC_EXEC_AGGSTATE_H
#define SC_EXEC_AGGSTATE_H

#include "ops_state.h"

/* ------------------------------------------------------------------------- int map */

typedef struct sc_imap_slot {
    int64_t key;
    uint64_t g1; /* group + 1; 0: empty */
} sc_imap_slot;

typedef struct sc_imap {
    sc_imap_slot *s;
    size_t cap, n; /* cap: power of two */
} sc_imap;

int sc_imap_init(sc_imap *m, size_t expected);
void sc_imap_free(sc_imap *m);

static inline uint64_t sc_imap_hash(int64_t k) {
    uint64_t h = (uint64_t)k * UINT64_C(0x9e3779b97f4a7c15);
    h ^= h >> 32;
    h *= UINT64_C(0xd6e8feb86659fd93);
    return h ^ (h >> 32);
}

static inline void sc_imap_prefetch(const sc_imap *m, int64_t k) {
    __builtin_prefetch(&m->s[sc_imap_hash(k) & (m->cap - 1)]);
}

/* The group of key k: *g, true; or false when k is not in the map. */
static inline bool sc_imap_find(const sc_imap *m, int64_t k, uint64_t *g) {
    size_t mask = m->cap - 1;
    for (size_t i = sc_imap_hash(k) & mask;; i = (i + 1) & mask) {
        const sc_imap_slot *s = &m->s[i];
        if (!s->g1) return false;
        if (s->key == k) {
            *g = s->g1 - 1;
            return true;
        }
    }
}

/* Insert k (absent) with group g. */
int sc_imap_insert(sc_imap *m, int64_t k, uint64_t g);

/* ------------------------------------------------------------------- dense records */

typedef enum {
    SC_DK_COUNT = 1, /* count(): every row */
    SC_DK_COUNT_VALID,
    SC_DK_SUM_F,
    SC_DK_SUM_I, /* int64 or bool values */
    SC_DK_MIN_F,
    SC_DK_MAX_F,
    SC_DK_MIN_I,
    SC_DK_MAX_I
} sc_dense_kind;

typedef struct sc_dense_slot {
    int32_t kind, arg, off; /* arg: input column (-1: count()); off: first word in a record */
    sc_col_type at;
} sc_dense_slot;

typedef struct sc_dense {
    sc_dense_slot *slot;
    int32_t nslots, words; /* words per record */
    int32_t *of_agg;       /* aggregate j's slot */
} sc_dense;

/* Plan dense records for kp's aggregates: SC_OK and *ok = true when every aggregate has a
 * dense form (then d is filled; free it with sc_dense_free), *ok = false otherwise. */
int sc_dense_plan(sc_dense *d, const sc_keyed_plan *kp, bool *ok);
void sc_dense_free(sc_dense *d);
/* A fresh group's record (words d->words). */
void sc_dense_init(const sc_dense *d, uint64_t *rec);
/* Add every row r of `in` to the record of group gid[r] (records: d->words words each),
 * slot by slot; each group still sees its rows in arrival order. */
void sc_dense_update(const sc_dense *d, uint64_t *recs, const int64_t *gid, const sc_batch *in);
/* Aggregate j's accumulator as sc_acc (for sc_acc_write). */
void sc_dense_acc(const sc_dense *d, int32_t j, const uint64_t *rec, sc_acc *a);

#endif
