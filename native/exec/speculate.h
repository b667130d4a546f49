/* speculate: speculative execution of user transactions with ordered commit (Sturzrehm, ch. 5).
 *
 * sc_spec_run(s, n, task, ctx, results) runs n events (0..n-1, arrival order) as
 * transactions against a keyed store (int64 key -> int64 value, exec/txn.h) that persists
 * across runs. The result is, by definition, that of running the events one at a time in
 * order against a plain map: every results[i] and the final store equal the sequential run's,
 * at any worker count and any horizon.
 *
 * How (software transactional memory, specialised to a known commit order):
 * - Execution. Workers (the calling thread plus `workers - 1` helper threads owned by the
 *   engine) claim events in order and run each as a transaction: a read records (key, the
 *   store node, its version) in the read set; a write goes to the write set (reads see the
 *   transaction's own writes first). Nothing touches the store.
 * - Commit, strictly in arrival order. The event at `head` (the earliest uncommitted one) is
 *   committed by whichever worker holds the commit flag: its read set is validated (every
 *   version unchanged, every absent key still absent); if valid its writes are applied (each
 *   written node gets the next version) and its result published; if not (an earlier commit
 *   changed something it read), it is aborted and re-executed at once by the committer.
 * - Contention manager (Sturzrehm §5.2.3, timestamp CM): the earliest uncommitted event always
 *   wins. Conflicts are only ever resolved against the later event; an execution that started
 *   while its event was the head (the committer's re-execution included) sees a store no one
 *   else can change before it commits, so it is never aborted: every event commits after at
 *   most one abort, and the run always progresses.
 * - Conflict predictors (Sturzrehm §5.2.2) bound how far speculation runs ahead: event i may
 *   start only when i < head + horizon. `horizon` > 0 is a fixed predictor (1: sequential);
 *   0 selects the adaptive predictor, which starts at 2 * workers and, after every window of
 *   SC_SPEC_WINDOW commits, halves the horizon when more than SC_SPEC_ABORT_HIGH of them
 *   aborted and grows it by one when fewer than SC_SPEC_ABORT_LOW did (between 1 and
 *   max_horizon). The predictor changes only speed, never results.
 *
 * Memory: the store holds one node per key ever written (never removed: it is the operator's
 * state; `keys` reports it); per-event bookkeeping lives in max(horizon, max_horizon) slots
 * reused in turn (event i in slot i % slots; its predecessor there has committed before i
 * may start), each with read/write sets that grow to the largest transaction seen.
 *
 * Threads and progress: sc_spec_run is called by one thread at a time; it returns only when
 * every helper has finished with the run. Reads of the store are lock-free (per-node version
 * words in seqlock fashion; nodes are published with release and never freed or moved while
 * a run is in flight); the commit flag is a try-lock taken by whoever finds the head ready,
 * so no worker waits for a lock. Workers with nothing to claim inside the horizon wait for
 * the head to move (spin briefly, then sleep on a condition variable with a 1 ms timeout).
 * sc_spec_cancel (any thread) makes a run in flight return SC_ECLOSED promptly: each worker
 * stops after its current transaction (a user function call is never interrupted).
 *
 * Transactions must be deterministic functions of (event, state), and total: a speculative
 * execution may see a state that later proves stale (its result is then discarded), so the
 * function must terminate for any values it can read.
 */
#ifndef SC_EXEC_SPECULATE_H
#define SC_EXEC_SPECULATE_H

#include <stdbool.h>
#include <stdint.h>

#include "txn.h"

#define SC_SPEC_WINDOW 64
#define SC_SPEC_ABORT_HIGH 0.30
#define SC_SPEC_ABORT_LOW 0.10
#define SC_SPEC_MAX_HORIZON 4096

typedef struct sc_spec sc_spec;

/* One event's result: 8 bytes (int64 or double bits) and a validity flag. */
typedef struct sc_spec_result {
    int64_t bits;
    uint8_t ok;
} sc_spec_result;

/* Run event i as a transaction on `tx`; write its result to *res. Called from any worker,
 * possibly several times for one event (only the committed execution's result is kept). */
typedef void (*sc_spec_task_fn)(void *ctx, sc_txn *tx, int64_t i, sc_spec_result *res);

typedef struct sc_spec_config {
    uint32_t workers;     /* >= 1: threads running transactions (the caller counts as one) */
    uint32_t horizon;     /* > 0: fixed horizon; 0: adaptive */
    uint32_t max_horizon; /* adaptive bound (0: 256); at most SC_SPEC_MAX_HORIZON */
} sc_spec_config;

typedef struct sc_spec_stats {
    uint64_t commits;     /* events committed */
    uint64_t aborts;      /* executions aborted by validation (each event at most once) */
    uint32_t horizon;     /* the predictor's current horizon */
    uint32_t workers;
    bool adaptive;
    double horizon_mean;  /* mean horizon over commits */
    int64_t keys;         /* keys in the store */
    int64_t store_bytes;  /* store and slot memory */
} sc_spec_stats;

int sc_spec_create(sc_spec **out, const sc_spec_config *cfg);
/* Joins the helper threads; no run may be in flight. */
void sc_spec_destroy(sc_spec *s);
/* Run events 0..n-1 (see above); results[0..n) receive the committed results. SC_OK, SC_ECLOSED
 * (cancelled: results and store hold a prefix of committed events), SC_ENOMEM. */
int sc_spec_run(sc_spec *s, int64_t n, sc_spec_task_fn task, void *ctx, sc_spec_result *results);
/* Make the run in flight and every later run return SC_ECLOSED (thread-safe). */
void sc_spec_cancel(sc_spec *s);
/* Counters so far (thread-safe, relaxed: a running total may lag by one window). */
void sc_spec_get_stats(const sc_spec *s, sc_spec_stats *out);
/* The committed value of `key` (0 if absent). Not while a run is in flight. */
int64_t sc_spec_peek(const sc_spec *s, int64_t key);

#endif
