/* hybrid_queue: worklist of a partitioned (keyed) stateful operator (Prasaad et al. §4, Fig. 7).
 *
 * SC_HQ_HYBRID (default): items go to their partition's queue and the partition id to a
 *   master queue; a worker takes a partition id from the master queue and increments that
 *   partition's delegation counter: if it was 0 the worker becomes the partition's active
 *   worker and processes items of that partition until the counter drops back to 0; otherwise
 *   it leaves the item to the active worker (delegation) and moves on. Many fine-grained
 *   partitions balance skewed keys across workers.
 * SC_HQ_PARTITIONED (ablation, Prasaad et al. Fig. 6): partition p is fixed to lane p mod lanes and
 *   lane w is served only by worker w mod lanes.
 *
 * Contract
 * - Progress: sc_hq_add does not wait for room (SC_EFULL when the queue or the partition's
 *   queue is full); the one exception is a HYBRID master-ring cell still held by a consumer
 *   preempted between claiming and releasing it, which add retries (yielding) until that
 *   consumer's next two instructions run; sc_hq_master_stalls counts these. sc_hq_consume never waits for another worker (HYBRID: a busy partition is
 *   delegated, not waited for; PARTITIONED: a lane served by another thread is skipped).
 * - Ordering: at most one worker processes a partition at a time, and the items of one
 *   partition are processed exactly once, in the order they were added; across partitions
 *   processing follows master-queue (arrival) order as far as the workers allow.
 * - Producers: one sc_hq_add caller at a time (calls ordered by happens-before, as when they
 *   come from the upstream reorder buffer's drainer). Consumers: any number.
 * - Memory: fixed at creation: HYBRID holds at most `capacity` items in total and at most
 *   `partition_capacity` per partition (partitions x partition_capacity pointer slots plus a
 *   master ring of 2 x `capacity` ids); PARTITIONED holds `capacity` items per lane.
 * - A consume call processes up to max_items items from the master queue plus every item
 *   delegated to it meanwhile (it must finish its partition before returning), so under a
 *   hot partition it can process more than max_items.
 */
#ifndef SC_RUNTIME_HYBRID_QUEUE_H
#define SC_RUNTIME_HYBRID_QUEUE_H

#include <stdbool.h>
#include <stdint.h>

#include "../common/sc_status.h"

typedef enum { SC_HQ_HYBRID = 0, SC_HQ_PARTITIONED = 1 } sc_hq_kind;

typedef struct sc_hq_config {
    sc_hq_kind kind;
    uint32_t partitions;         /* HYBRID: number of fine-grained partitions (e.g. 256) */
    uint32_t lanes;              /* PARTITIONED: number of worker lanes (= workers) */
    uint32_t capacity;           /* HYBRID: total items; PARTITIONED: items per lane */
    uint32_t partition_capacity; /* HYBRID: items per partition (0: same as capacity) */
} sc_hq_config;

/* Process one item of `partition`; ownership of item passes to the callee. A negative
 * return stops the consume call and is returned by it (the queue may then only be closed
 * and destroyed). */
typedef int (*sc_hq_process_fn)(void *ctx, uint32_t partition, void *item);

typedef struct sc_hq sc_hq;

int sc_hq_create(sc_hq **out, const sc_hq_config *cfg);
/* Free the queue; unprocessed items are passed to drop(drop_ctx, item) unless drop is NULL. */
void sc_hq_destroy(sc_hq *q, void (*drop)(void *drop_ctx, void *item), void *drop_ctx);
/* Add an item of partition `partition` (taken mod the partition count). SC_OK, SC_EFULL,
 * SC_ECLOSED, SC_EINVAL (NULL item). */
int sc_hq_add(sc_hq *q, uint32_t partition, void *item);
/* Process items as worker `worker`; *processed (may be NULL) gets the count. Returns SC_OK
 * (possibly with 0 processed) or the first negative status from fn. */
int sc_hq_consume(sc_hq *q, uint32_t worker, uint32_t max_items, sc_hq_process_fn fn, void *ctx,
                  uint32_t *processed);
/* Refuse further adds. */
void sc_hq_close(sc_hq *q);
/* Items added and not yet handed to fn: exact when quiescent; while sc_hq_consume runs it
 * may over-count by up to 31 per consumer (decrements are applied in groups). */
uint64_t sc_hq_size(const sc_hq *q);
/* Items waiting that worker `worker` could take now (HYBRID: all; PARTITIONED: its lane). */
uint64_t sc_hq_size_for(const sc_hq *q, uint32_t worker);
/* Most workers that can usefully consume at once (partitions, or lanes). */
uint32_t sc_hq_max_parallelism(const sc_hq *q);
sc_hq_kind sc_hq_get_kind(const sc_hq *q);
/* Number of times sc_hq_add had to retry its master push (a diagnostic; expected ~0). */
uint64_t sc_hq_master_stalls(const sc_hq *q);

#endif
