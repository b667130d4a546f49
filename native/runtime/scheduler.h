/* scheduler: decides which operator a worker runs next and for how many items (Prasaad et al. §6).
 *
 * Workers call sc_sched_acquire to get a grant (operator + item quota for one time slice),
 * run it, then sc_sched_release with what they measured. The scheduler keeps per-operator
 * statistics: cost per item (EWMA of measured ns), selectivity (EWMA of out/in), worklist
 * size (maintained by the producer/consumer through sc_sched_queue_add), workers allocated,
 * and worker time spent in the current CT window. An operator is schedulable when its
 * worklist is non-empty and it has fewer workers than its maximum degree of parallelism:
 * stateless: all workers; partitioned stateful: its partitions (or lanes); stateful: 1.
 *
 * Heuristics (sc_sched_policy), cs_i = product of selectivities s_1..s_i:
 *   CT  (default) lowest normalized throughput n_i = (Tw_i + w_i*slice) / (c_i * cs_{i-1});
 *   QST earliest operator whose output worklist is below T_i = C * cs_i / sum_j cs_j
 *       (falls back to LP when every output worklist is at its threshold);
 *   LP  latest operator in the pipeline that is schedulable;
 *   ET  highest estimated completion time p_i = I_i * c_i / (w_i + 1).
 *
 * Contract
 * - Progress: acquire / release / queue_add are lock-free (atomics and a bounded CAS retry
 *   over at most nops candidates); nothing waits; acquire returns SC_EEMPTY when nothing is
 *   schedulable.
 * - Ordering: a grant for a stateful operator is exclusive: the worker count is raised by a
 *   CAS bounded by the maximum, and the acq_rel increment/decrement orders consecutive
 *   holders (so a single-consumer worklist can be handed from one worker to the next).
 * - Memory: O(nops), allocated at create; statistics are approximate under concurrency
 *   (EWMA updates never lose the grant accounting, only blend samples in some order).
 */
#ifndef SC_RUNTIME_SCHEDULER_H
#define SC_RUNTIME_SCHEDULER_H

#include <stdint.h>

#include "../common/sc_status.h"

typedef enum { SC_SCHED_CT = 0, SC_SCHED_QST = 1, SC_SCHED_LP = 2, SC_SCHED_ET = 3 } sc_sched_policy;
typedef enum { SC_OP_STATELESS = 0, SC_OP_PARTITIONED = 1, SC_OP_STATEFUL = 2 } sc_op_kind;

#define SC_SCHED_MAX_OPS 64

typedef struct sc_sched_config {
    sc_sched_policy policy;   /* default CT (0) */
    uint64_t slice_ns;        /* time slice s per grant (0: 200 us) */
    uint64_t window_ns;       /* CT window w (0: 10 ms) */
    double qst_capacity;      /* QST capacity C in items (0: 1024) */
    double ewma_alpha;        /* weight of a new sample (0: 0.25) */
    uint32_t max_quota;       /* most items per grant (0: 4096) */
    uint64_t initial_cost_ns; /* cost assumed before the first sample (0: 1000) */
} sc_sched_config;

/* One operator as a heuristic sees it (also the input of the pure sc_sched_choose). */
typedef struct sc_sched_view {
    int64_t queued;       /* I_i: items in its worklist */
    double cost_ns;       /* c_i */
    double selectivity;   /* s_i */
    uint32_t workers;     /* w_i */
    uint32_t max_workers; /* M_i */
    uint64_t window_ns;   /* Tw_i: worker time spent in the current window */
} sc_sched_view;

typedef struct sc_sched_grant {
    uint32_t op;
    uint32_t quota;       /* items to process before asking again */
    uint64_t t_start_ns;
} sc_sched_grant;

typedef struct sc_sched_op_stats {
    double cost_ns, selectivity;
    int64_t queued;
    uint32_t workers, max_workers;
    uint64_t items_in, items_out, ns_total, grants;
} sc_sched_op_stats;

typedef struct sc_sched sc_sched;

/* max_workers[i] = 0 means "by kind": nworkers for stateless/partitioned, 1 for stateful;
 * a stateful operator is always capped at 1. nops <= SC_SCHED_MAX_OPS. */
int sc_sched_create(sc_sched **out, const sc_sched_config *cfg, uint32_t nops, const sc_op_kind *kinds,
                    const uint32_t *max_workers, uint32_t nworkers);
void sc_sched_destroy(sc_sched *s);
/* Worklist bookkeeping: +n when items are enqueued for op, -n when dequeued. */
void sc_sched_queue_add(sc_sched *s, uint32_t op, int64_t delta);
/* Grant work to `worker`: SC_OK with *g filled (the operator's worker count is raised), or
 * SC_EEMPTY when no operator is schedulable. */
int sc_sched_acquire(sc_sched *s, uint32_t worker, sc_sched_grant *g);
/* End a grant: lowers the worker count and folds the measurements into the statistics. */
void sc_sched_release(sc_sched *s, const sc_sched_grant *g, uint64_t items_in, uint64_t items_out, uint64_t ns);
/* Pure heuristic: index of the chosen operator among v[0..nops), or -1. Exposed for tests. */
int sc_sched_choose(const sc_sched_config *cfg, const sc_sched_view *v, uint32_t nops);
/* Copy of one operator's statistics. */
int sc_sched_stats(const sc_sched *s, uint32_t op, sc_sched_op_stats *out);
uint32_t sc_sched_nops(const sc_sched *s);
const char *sc_sched_policy_name(sc_sched_policy p);

#endif
