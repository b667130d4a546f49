/* pool: long-lived worker threads that run a linear pipeline of operators over batches
 * (Prasaad et al. §2.2, §5): workers ask the scheduler for work, run an operator on batches from
 * its worklist, and hand outputs to a reorder buffer that restores arrival order before the
 * next operator (or the sink). Worklists by operator kind:
 *   stateless    MPMC ring, any number of workers;
 *   partitioned  hybrid queue (or the partitioned-queue ablation), keyed by `partition`;
 *   stateful     SPSC ring, one worker at a time (the scheduler caps it at 1).
 *
 * Contract
 * - Ordering: for every operator, outputs leave in the arrival order of its inputs, so the
 *   sink sees exactly the sequence a sequential one-batch-at-a-time run would produce
 *   (given operators whose output depends only on their input, per-key state in arrival
 *   order, or sequential state); the sink is called by one thread at a time, in order.
 * - Memory / backpressure: each operator admits at most `window` serials that have not yet
 *   left its reorder buffer (a credit covering its worklist, workers and reorder slots);
 *   a full operator makes its upstream reorder buffer hold its head, which throttles the
 *   upstream operator, and finally sc_pool_push, which waits (helping to drain) and never
 *   drops. A sink may return SC_EFULL to push back the same way.
 * - Progress: workers never block on each other's data structures (the NONBLOCKING reorder
 *   buffer and hybrid queue); idle workers back off (spin, yield), then park on a futex
 *   that every delivery into an operator's worklist, every control call and sc_pool_wake
 *   wake; pause parks them on a condition variable once their current slice ends; stop
 *   ends each worker after its current item and joins every thread (no thread outlives
 *   the pool).
 * - Errors: a negative status from an operator or from the sink stops the run; the first
 *   one and its operator index (nops for the sink) are reported by sc_pool_wait/stop/error.
 * - Ownership: sc_pool_push hands one batch (->next must be NULL) to the pool; `run` receives
 *   ownership of `in` and gives ownership of *out (NULL: no output; a ->next chain: several
 *   outputs of one input, kept together under one serial); the sink receives ownership on
 *   SC_OK. On stop, batches still inside are released (sc_batch_release_chain).
 * - Threads: the sink and operators run on worker threads, and the sink may also run on the
 *   thread inside sc_pool_push (which helps drain while it waits); none of them may call
 *   back into the pool. sc_pool_push and sc_pool_close_input from one thread at a time; the control
 *   calls (start/pause/resume/stop/wait/destroy) from any one thread, never from a worker.
 */
#ifndef SC_RUNTIME_POOL_H
#define SC_RUNTIME_POOL_H

#include <stdbool.h>
#include <stdint.h>

#include "../common/sc_status.h"
#include "batch.h"
#include "hybrid_queue.h"
#include "metrics.h"
#include "reorder.h"
#include "scheduler.h"

/* Operator body: 0 or a positive value on success (outputs in *out, may be NULL), negative
 * sc_status on failure (the run stops; `run` must have released `in`). */
typedef int (*sc_op_run_fn)(void *op_state, sc_batch *in, sc_batch **out);
/* Partition of a batch for a partitioned operator (all its rows must share it). */
typedef uint32_t (*sc_op_partition_fn)(void *op_state, const sc_batch *in);
/* Sink: SC_OK (takes ownership), SC_EFULL (retry later, ownership stays), or an error.
 * Called in order, one call at a time; b->serial numbers the batches the sink accepted. */
typedef int (*sc_sink_fn)(void *sink_state, sc_batch *b);

typedef struct sc_op_desc {
    const char *name;
    sc_op_kind kind;
    sc_op_run_fn run;
    void *state;
    sc_op_partition_fn partition; /* required for SC_OP_PARTITIONED */
    uint32_t max_workers;         /* 0: by kind */
} sc_op_desc;

typedef struct sc_pool_config {
    uint32_t workers;          /* worker threads (>= 1) */
    sc_sched_config sched;     /* policy (CT default), slice, ... */
    sc_reorder_kind reorder;   /* NONBLOCKING default */
    sc_hq_kind keyed;          /* HYBRID default; PARTITIONED uses `workers` lanes */
    uint32_t partitions;       /* hybrid partitions (0: 256) */
    uint32_t partition_capacity; /* hybrid per-partition queue (0: window) */
    uint32_t window;           /* per-operator in-flight bound (0: 256; rounded to 2^k) */
    uint32_t marker_every;     /* latency marker on every k-th pushed batch (0: none) */
    uint64_t idle_sleep_ns;    /* longest back-off sleep of a waiting pusher (0: 50 us) */
    uint8_t unordered;         /* ablation only: stateless operators' outputs leave in completion
                                * order (a ticket taken when done replaces the input serial), so
                                * the ordering cost can be measured; breaks the semantics contract */
} sc_pool_config;

typedef enum {
    SC_POOL_CREATED = 0,
    SC_POOL_RUNNING = 1,
    SC_POOL_PAUSED = 2,
    SC_POOL_FINISHED = 3,      /* input closed and everything delivered to the sink */
    SC_POOL_STOPPED = 4        /* stopped by sc_pool_stop or by an error; threads joined */
} sc_pool_state;

typedef struct sc_pool sc_pool;

/* ops[0..nops) are copied; metrics (may be NULL) must have >= nops operators and outlive
 * the pool. Threads are not started yet. */
int sc_pool_create(sc_pool **out, const sc_pool_config *cfg, const sc_op_desc *ops, uint32_t nops,
                   sc_sink_fn sink, void *sink_state, sc_metrics *metrics);
/* Start the worker threads. */
int sc_pool_start(sc_pool *p);
/* Feed one batch (serials are assigned here). Waits while the first operator is full,
 * helping to drain; SC_OK, SC_EFULL (timeout_ns elapsed, batch NOT taken; timeout_ns < 0
 * waits forever), SC_ECLOSED (input closed or run stopped; batch NOT taken). */
int sc_pool_push(sc_pool *p, sc_batch *b, int64_t timeout_ns);
/* End of input: the run finishes once everything pushed has reached the sink. */
int sc_pool_close_input(sc_pool *p);
/* Wait up to timeout_ns (< 0: forever) for the run to finish; *done tells whether it did.
 * Returns SC_OK or the run's error. */
int sc_pool_wait(sc_pool *p, int64_t timeout_ns, bool *done);
int sc_pool_pause(sc_pool *p);
int sc_pool_resume(sc_pool *p);
/* Stop now (finished or not) and join every worker. Returns the run's error or SC_OK. */
int sc_pool_stop(sc_pool *p);
/* Stop if needed, release batches still inside, free everything. */
void sc_pool_destroy(sc_pool *p);
sc_pool_state sc_pool_get_state(const sc_pool *p);
/* First error (0 if none) and the operator that raised it (nops = the sink). */
int sc_pool_error(const sc_pool *p, uint32_t *op);
/* Wake every parked worker: for a sink that returned SC_EFULL, once it has room again (its
 * held-back head is retried by a worker's help_drains). Cheap when none is parked. */
void sc_pool_wake(sc_pool *p);
/* Keep the workers on separate cores when there are at most as many as the cores the
 * process may use: worker i may run on the allowed cores whose rank is i modulo the workers
 * (on 2 cores with 2 workers, one core each; on 16 with 2, eight each), and the kernel places
 * and balances it among those. For a paced run (exec/pacer.c): left to itself, the scheduler
 * woke both workers onto one core while the other idled and kept them there for up to 9 ms
 * (its idle balance skips a core whose idle spells are short, as a paced run's are), each
 * batch meanwhile waiting a time slice. Not for bulk runs: there the driver thread needs a
 * core now and then, and a worker that cannot move off it made the compute-heavy figure's
 * 1 -> 2 worker speedup 1.77-1.79x against 1.88x. STREAMCELL_SPREAD_WORKERS=0 turns it off. */
void sc_pool_spread(sc_pool *p);
/* The cores worker i may run on, as a mask of the first 64 (0 before start and after stop): for
 * tests and diagnostics. */
uint64_t sc_pool_worker_cpus(const sc_pool *p, uint32_t i);
/* The next batch is due at due_ns (sc_now_ns's clock; 0: not known): idle workers park until
 * shortly before it and spin for it from there (a paced source's pusher, exec/pacer.c). */
void sc_pool_expect(sc_pool *p, uint64_t due_ns);
/* A paced feeder's next batches (at most SC_POOL_ARM_MAX, a few groups), handed to the workers:
 * batch i is due at due_ns[i] (not decreasing), and from then on the next idle worker pushes
 * it, in order, as sc_pool_push (timeout 0), and runs it. On this 2-core VM the feeder's own
 * push at the due time took the core of the worker spinning for a group's second batch: that
 * batch started 8.5 us later (p50, 43 us p90) than the first, which a worker on the other core
 * took at once. next_ns: when the batch after these is due (0: not known), the workers'
 * expected time once they are in. The slot holds one set: SC_EINVAL while another is armed or
 * not yet disarmed. */
#define SC_POOL_ARM_MAX 16
int sc_pool_arm(sc_pool *p, sc_batch *const *b, const uint64_t *due_ns, int n, uint64_t next_ns);
/* Take the armed batches back: *pushed of them went in (the first ones, in order), the rest
 * are the caller's again; *rc the push error that stopped a worker (SC_EFULL: the pipeline was
 * full; SC_ECLOSED: the run stopped), else SC_OK. Waits while a worker is pushing one
 * (microseconds). Only the feeder calls it. */
void sc_pool_disarm(sc_pool *p, int *pushed, int *rc);
/* Workers parked (or about to park) now: for tests and diagnostics. */
uint32_t sc_pool_parked(const sc_pool *p);
/* The scheduler, for statistics (sc_sched_stats). */
const sc_sched *sc_pool_scheduler(const sc_pool *p);

#endif
