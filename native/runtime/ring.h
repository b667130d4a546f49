/* ring: bounded FIFO queue of non-NULL pointers, in two flavours behind one API.
 *
 *   SC_RING_MPMC: any number of producers and consumers (Vyukov's bounded array queue: one
 *                 sequence number per cell, one CAS per operation).
 *   SC_RING_SPSC: one producer and one consumer at a time (Lamport ring with cached
 *                 indices, no RMW at all). "One at a time" means calls on each side must be
 *                 ordered by happens-before (e.g. handed over through a lock, a flag or the
 *                 scheduler's worker count), not that they come from one OS thread.
 *
 * Contract
 * - Progress: try_push / try_pop / close never block and never wait for another thread;
 *   SPSC is wait-free; MPMC is lock-free for the CAS, but a pop may report SC_EEMPTY while a
 *   producer that already claimed the next cell has not yet published it (it does not wait).
 * - Ordering: FIFO; in MPMC, items are dequeued in the order their pushes claimed cells, so
 *   the items of any one producer come out in that producer's push order.
 * - Memory: capacity rounded up to a power of two (>= 2), fixed at creation; one pointer and
 *   one 64-bit sequence per cell; no allocation after create.
 * - Closing: after sc_ring_close(), pushes fail with SC_ECLOSED; pops keep returning queued
 *   items and return SC_ECLOSED once the ring is closed and empty. In MPMC this is exact
 *   (a push either claimed a cell before the close and will be popped, or fails). In SPSC,
 *   close exactly drains when called by the producer side (or after it stopped); a close from
 *   a third thread racing a push may let that last push land after consumers saw ECLOSED.
 */
#ifndef SC_RUNTIME_RING_H
#define SC_RUNTIME_RING_H

#include <stdbool.h>
#include <stdint.h>

#include "../common/sc_status.h"

typedef enum { SC_RING_MPMC = 0, SC_RING_SPSC = 1 } sc_ring_kind;

typedef struct sc_ring sc_ring;

/* Create a ring holding at least `capacity` items (rounded up to a power of two, 2..2^30). */
int sc_ring_create(sc_ring **out, sc_ring_kind kind, uint32_t capacity);
/* Free the ring; items still inside are not touched (drain first if they own memory). */
void sc_ring_destroy(sc_ring *r);
/* SC_OK, SC_EFULL (try again later), SC_ECLOSED, or SC_EINVAL for a NULL item. */
int sc_ring_try_push(sc_ring *r, void *item);
/* SC_OK (*item set), SC_EEMPTY (try again later), or SC_ECLOSED (closed and drained). */
int sc_ring_try_pop(sc_ring *r, void **item);
/* Close for pushes; idempotent. */
void sc_ring_close(sc_ring *r);
bool sc_ring_is_closed(const sc_ring *r);
/* Number of queued items; exact when quiescent, an approximation under concurrency. */
uint64_t sc_ring_size(const sc_ring *r);
uint32_t sc_ring_capacity(const sc_ring *r);
sc_ring_kind sc_ring_get_kind(const sc_ring *r);

#endif
