/* hybrid_queue: see hybrid_queue.h for the contract.
 *
 * HYBRID correctness (Prasaad et al. Theorem 4.1): add pushes the item into the partition's queue
 * before pushing the partition id into the master queue, so each master entry stands for one
 * item already queued in its partition. The worker whose increment takes count[p] from 0 is
 * the only one that pops from partition p until its decrement brings the counter back to 0;
 * every other master entry of p only increments the counter (delegation), which the active
 * worker sees in its fetch_sub and serves. The partition queues are SPSC rings: one producer
 * at a time, and one consumer at a time because the counter's acq_rel RMWs order successive
 * active workers.
 */
#include "hybrid_queue.h"

#include <stdlib.h>

#include "atomic_ext.h"
#include "ring.h"

typedef struct {
    SC_ALIGNED sc_atomic_i64 count; /* HYBRID: delegation counter; PARTITIONED: lane owner flag */
    sc_ring *q;
} sc_hq_part;

struct sc_hq {
    sc_hq_kind kind;
    uint32_t nparts; /* partitions (HYBRID) or lanes (PARTITIONED) */
    uint32_t capacity;
    sc_hq_part *parts;
    sc_ring *master; /* HYBRID */
    SC_ALIGNED sc_atomic_i64 items;
    sc_atomic_u64 closed;
    sc_atomic_u64 master_stalls; /* times add retried the master push (see sc_hq_add) */
};

int sc_hq_create(sc_hq **out, const sc_hq_config *cfg) {
    if (!out || !cfg || cfg->capacity == 0) return SC_EINVAL;
    if (cfg->kind == SC_HQ_HYBRID ? cfg->partitions == 0 : cfg->kind == SC_HQ_PARTITIONED ? cfg->lanes == 0 : 1)
        return SC_EINVAL;
    sc_hq *q = sc_alloc_aligned(sizeof *q);
    if (!q) return SC_ENOMEM;
    memset(q, 0, sizeof *q);
    q->kind = cfg->kind;
    q->nparts = cfg->kind == SC_HQ_HYBRID ? cfg->partitions : cfg->lanes;
    q->capacity = cfg->capacity;
    sc_i64_init(&q->items, 0);
    sc_u64_init(&q->closed, 0);
    sc_u64_init(&q->master_stalls, 0);
    q->parts = sc_alloc_aligned(sizeof(sc_hq_part) * q->nparts);
    if (!q->parts) { free(q); return SC_ENOMEM; }
    memset(q->parts, 0, sizeof(sc_hq_part) * q->nparts);
    uint32_t pcap = cfg->kind == SC_HQ_HYBRID && cfg->partition_capacity ? cfg->partition_capacity : cfg->capacity;
    int rc = SC_OK;
    for (uint32_t p = 0; p < q->nparts && rc == SC_OK; p++) {
        sc_i64_init(&q->parts[p].count, 0);
        rc = sc_ring_create(&q->parts[p].q, SC_RING_SPSC, pcap);
    }
    if (rc == SC_OK && cfg->kind == SC_HQ_HYBRID) rc = sc_ring_create(&q->master, SC_RING_MPMC, cfg->capacity * 2);
    if (rc != SC_OK) {
        sc_hq_destroy(q, NULL, NULL);
        return rc;
    }
    *out = q;
    return SC_OK;
}

void sc_hq_destroy(sc_hq *q, void (*drop)(void *, void *), void *drop_ctx) {
    if (!q) return;
    for (uint32_t p = 0; p < q->nparts; p++) {
        sc_ring *r = q->parts[p].q;
        if (!r) continue;
        void *item;
        while (sc_ring_try_pop(r, &item) == SC_OK)
            if (drop) drop(drop_ctx, item);
        sc_ring_destroy(r);
    }
    sc_ring_destroy(q->master);
    free(q->parts);
    free(q);
}

int sc_hq_add(sc_hq *q, uint32_t partition, void *item) {
    if (!item) return SC_EINVAL;
    if (sc_u64_load_acquire(&q->closed)) return SC_ECLOSED;
    uint32_t p = partition % q->nparts;
    if (q->kind == SC_HQ_HYBRID) {
        /* the total bound keeps the master ring (which holds at most `items` ids) from filling */
        if (sc_i64_load_acquire(&q->items) >= (int64_t)q->capacity) return SC_EFULL;
        int rc = sc_ring_try_push(q->parts[p].q, item);
        if (rc != SC_OK) return rc;
        sc_i64_fetch_add_acqrel(&q->items, 1);
        /* Logically the master ring has room (it holds at most `items` <= capacity ids and
         * has 2 x capacity cells), but a Vyukov cell stays unusable while a consumer that
         * claimed it has not yet released it; in that rare case retry until that consumer
         * finishes its pop (two instructions away, unless it was preempted). */
        while ((rc = sc_ring_try_push(q->master, (void *)(uintptr_t)(p + 1))) == SC_EFULL) {
            sc_atomic_u64 *stalls = &q->master_stalls;
            sc_u64_fetch_add_relaxed(stalls, 1);
            sched_yield();
        }
        SC_INVARIANT(rc == SC_OK, "hybrid queue master ring push failed");
        return rc == SC_OK ? SC_OK : SC_EINTERNAL;
    }
    int rc = sc_ring_try_push(q->parts[p].q, item);
    if (rc == SC_OK) sc_i64_fetch_add_acqrel(&q->items, 1);
    return rc;
}

/* The consumer's decrements of `items` are applied in groups: a late decrement only makes
 * the producer's bound conservative (master ids <= real items <= counted items still holds)
 * and saves a cache-line round trip with the producer per item. */
#define SC_HQ_DEC_BATCH 32

static int consume_hybrid(sc_hq *q, uint32_t max_items, sc_hq_process_fn fn, void *ctx, uint32_t *done) {
    uint32_t n = 0, undec = 0;
    int rc = SC_OK;
    void *pp;
    while (n < max_items && sc_ring_try_pop(q->master, &pp) == SC_OK) {
        uint32_t p = (uint32_t)((uintptr_t)pp - 1);
        sc_hq_part *part = &q->parts[p];
        if (sc_i64_fetch_add_acqrel(&part->count, 1) != 0) continue; /* delegated */
        do {
            void *item;
            int prc = sc_ring_try_pop(part->q, &item);
            /* cannot be empty: each counted master entry has its item queued already */
            SC_INVARIANT(prc == SC_OK, "hybrid queue partition empty under a counted entry");
            if (prc != SC_OK) { rc = SC_EINTERNAL; goto out; }
            if (++undec == SC_HQ_DEC_BATCH) { sc_i64_fetch_add_acqrel(&q->items, -(int64_t)undec); undec = 0; }
            n++;
            rc = fn(ctx, p, item);
            if (rc < 0) goto out; /* the partition stays claimed: the run is stopping */
        } while (sc_i64_fetch_sub_acqrel(&part->count, 1) > 1);
    }
out:
    if (undec) sc_i64_fetch_add_acqrel(&q->items, -(int64_t)undec);
    *done = n;
    return rc < 0 ? rc : SC_OK;
}

static int consume_partitioned(sc_hq *q, uint32_t worker, uint32_t max_items, sc_hq_process_fn fn,
                               void *ctx, uint32_t *done) {
    uint32_t lane = worker % q->nparts, n = 0;
    sc_hq_part *part = &q->parts[lane];
    int64_t free_ = 0;
    /* owner flag: keeps the lane single-consumer even if two callers share a lane */
    if (!sc_i64_cas_acqrel(&part->count, &free_, 1)) { *done = 0; return SC_OK; }
    int rc = SC_OK;
    void *item;
    while (n < max_items && sc_ring_try_pop(part->q, &item) == SC_OK) {
        sc_i64_fetch_add_acqrel(&q->items, -1);
        n++;
        rc = fn(ctx, lane, item);
        if (rc < 0) break;
    }
    sc_i64_store_release(&part->count, 0);
    *done = n;
    return rc < 0 ? rc : SC_OK;
}

int sc_hq_consume(sc_hq *q, uint32_t worker, uint32_t max_items, sc_hq_process_fn fn, void *ctx,
                  uint32_t *processed) {
    uint32_t done = 0;
    if (!fn) return SC_EINVAL;
    int rc = q->kind == SC_HQ_HYBRID ? consume_hybrid(q, max_items, fn, ctx, &done)
                                     : consume_partitioned(q, worker, max_items, fn, ctx, &done);
    if (processed) *processed = done;
    return rc;
}

void sc_hq_close(sc_hq *q) { sc_u64_store_release(&q->closed, 1); }

uint64_t sc_hq_size(const sc_hq *q) {
    int64_t n = sc_i64_load_acquire(&q->items);
    return n > 0 ? (uint64_t)n : 0;
}

uint64_t sc_hq_size_for(const sc_hq *q, uint32_t worker) {
    if (q->kind == SC_HQ_HYBRID) return sc_hq_size(q);
    return sc_ring_size(q->parts[worker % q->nparts].q);
}

uint32_t sc_hq_max_parallelism(const sc_hq *q) { return q->nparts; }
sc_hq_kind sc_hq_get_kind(const sc_hq *q) { return q->kind; }

uint64_t sc_hq_master_stalls(const sc_hq *q) { return sc_u64_load_relaxed(&q->master_stalls); }
