/* reorder: restores arrival order of outputs produced by concurrent workers (Prasaad et al. §3).
 *
 * Each output carries the serial number of the input that produced it (one serial may carry
 * several batches chained together, or SC_REORDER_NOTHING when it produced no output). The
 * buffer hands items to `emit` strictly in serial order: first_serial, first_serial+1, ...
 *
 * Two variants behind one interface (chosen by sc_reorder_kind, for the ablation benchmark):
 *   SC_REORDER_NONBLOCKING (default, Prasaad et al. Fig. 4): a bounded ring of atomic slots indexed
 *       by serial mod window, plus an atomic try-lock flag; whoever holds the flag drains the
 *       in-order prefix; a thread that fails to take the flag leaves its item and goes on;
 *       after releasing the flag the drainer re-checks the next slot, so no item is stranded.
 *   SC_REORDER_LOCKED (Prasaad et al. Fig. 2): the same bounded window under one mutex held while
 *       adding and while emitting.
 *
 * Contract
 * - Progress (NONBLOCKING): try_add, drain and send never wait for another thread: add is
 *   one load and one store; a drainer that finds the flag taken returns at once. (LOCKED:
 *   every call may wait on the mutex while another thread emits.)
 * - Ordering: emit is called for serials in strictly increasing consecutive order, by one
 *   thread at a time (calls are ordered by happens-before), each item exactly once; when no
 *   thread is inside the buffer and emit last returned SC_OK, no emittable item is left.
 * - Memory: one pointer per slot, window rounded up to a power of two, fixed at creation; an
 *   item with serial t is accepted only while next <= t < next + window (SC_EFULL otherwise).
 * - Backpressure: emit may return SC_EFULL (downstream full), possibly after updating *item to
 *   the part it could not take; the item stays at the head and a later sc_reorder_drain
 *   (by any thread) retries it. Any other negative emit status is returned as is and the item
 *   stays in the buffer (the run is expected to stop; destroy hands leftovers to `drop`).
 */
#ifndef SC_RUNTIME_REORDER_H
#define SC_RUNTIME_REORDER_H

#include <stdbool.h>
#include <stdint.h>

#include "../common/sc_status.h"

typedef enum { SC_REORDER_NONBLOCKING = 0, SC_REORDER_LOCKED = 1 } sc_reorder_kind;

/* An item meaning "this serial produced no output": consumes the serial, emit is not called. */
#define SC_REORDER_NOTHING ((void *)(uintptr_t)1)

/* Called in serial order; returns SC_OK, SC_EFULL (retry later, *item may be updated to what
 * is left), or another negative status (stops draining and is reported to the caller). */
typedef int (*sc_reorder_emit_fn)(void *ctx, uint64_t serial, void **item);

typedef struct sc_reorder sc_reorder;

/* window: number of serials that may be pending at once (rounded up to a power of two). */
int sc_reorder_create(sc_reorder **out, sc_reorder_kind kind, uint32_t window,
                      uint64_t first_serial, sc_reorder_emit_fn emit, void *emit_ctx);
/* Free the buffer; items still inside (never emitted) are passed to drop(drop_ctx, item)
 * unless drop is NULL. SC_REORDER_NOTHING is never passed to drop. */
void sc_reorder_destroy(sc_reorder *r, void (*drop)(void *drop_ctx, void *item), void *drop_ctx);
/* Park an item: SC_OK, SC_EFULL (serial not yet inside the window: drain/help, then retry),
 * SC_EINVAL (NULL item, or a serial already emitted). Never emits. */
int sc_reorder_try_add(sc_reorder *r, uint64_t serial, void *item);
/* Emit as much of the in-order prefix as possible. SC_OK (done, or another thread is
 * draining and will see our items), SC_EFULL (emit reported a full downstream), or the
 * negative status emit returned. */
int sc_reorder_drain(sc_reorder *r);
/* try_add then drain (Fig. 4 `send`). SC_EFULL means the item was NOT added; any other
 * negative code is an emit error (the item was added). SC_OK otherwise, even when the drain
 * stopped on a full downstream (check sc_reorder_has_ready to help later). */
int sc_reorder_send(sc_reorder *r, uint64_t serial, void *item);
/* Serial of the next item to emit (everything below it has been emitted). */
uint64_t sc_reorder_next(const sc_reorder *r);
/* True when the item for sc_reorder_next() is present (a drain would emit or retry it). */
bool sc_reorder_has_ready(const sc_reorder *r);
uint32_t sc_reorder_window(const sc_reorder *r);
sc_reorder_kind sc_reorder_get_kind(const sc_reorder *r);

#endif
