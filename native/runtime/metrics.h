/* metrics: per-operator counters and an end-to-end latency histogram (Prasaad et al. §7 markers).
 *
 * Latency markers: a batch carries `marker_ns`, the time it (or the input it came from) was
 * injected; the runtime stamps a marker on every k-th source batch, carries it through every
 * operator (onto the next output when an input produced none) and records now - marker_ns
 * at the sink. The histogram is log-linear: exact below 16 ns, then 16 linear sub-buckets per
 * power of two, so a reported quantile is at most 1/16 (6.25%) above the true value (it
 * reports its bucket's upper bound, clamped to the exact maximum).
 *
 * Contract
 * - Progress: recording and counter updates are wait-free (relaxed atomic adds; the max is
 *   a CAS loop that only retries while raising it); snapshots never block writers.
 * - Ordering: a snapshot is a copy of each counter read at some instant during the call;
 *   counters are individually exact but not mutually atomic (rows_out may briefly lead
 *   rows_in of the next operator).
 * - Memory: fixed at creation: SC_HIST_BUCKETS 64-bit counters per histogram (~7.8 KiB) and
 *   one cache line of counters per operator.
 */
#ifndef SC_RUNTIME_METRICS_H
#define SC_RUNTIME_METRICS_H

#include <stdint.h>

#include "../common/sc_atomic.h"
#include "../common/sc_status.h"

#define SC_HIST_SUB_BITS 4
#define SC_HIST_SUB (1u << SC_HIST_SUB_BITS)
#define SC_HIST_BUCKETS ((64 - SC_HIST_SUB_BITS + 1) * SC_HIST_SUB)

typedef struct sc_hist {
    sc_atomic_u64 counts[SC_HIST_BUCKETS];
    sc_atomic_u64 count, sum, max;
} sc_hist;

typedef struct sc_hist_snapshot {
    uint64_t counts[SC_HIST_BUCKETS];
    uint64_t count, sum, max;
} sc_hist_snapshot;

typedef struct sc_latency_summary {
    uint64_t count, p50_ns, p99_ns, max_ns;
    double mean_ns;
} sc_latency_summary;

/* Counters of one operator, as copied by a snapshot. */
typedef struct sc_op_counters {
    uint64_t rows_in, rows_out, batches_in, batches_out, ns;
    int64_t queue_depth;
    uint32_t workers;
} sc_op_counters;

void sc_hist_init(sc_hist *h);
void sc_hist_record(sc_hist *h, uint64_t value);
void sc_hist_snapshot_copy(const sc_hist *h, sc_hist_snapshot *out);
/* Value at quantile q in [0, 1] (upper bound of the bucket holding rank ceil(q*count),
 * clamped to max); 0 when empty. */
uint64_t sc_hist_quantile(const sc_hist_snapshot *s, double q);
/* Bucket index of a value and the largest value in a bucket (exposed for tests). */
uint32_t sc_hist_bucket(uint64_t value);
uint64_t sc_hist_bucket_upper(uint32_t bucket);

typedef struct sc_metrics sc_metrics;

int sc_metrics_create(sc_metrics **out, uint32_t nops);
void sc_metrics_destroy(sc_metrics *m);
uint32_t sc_metrics_nops(const sc_metrics *m);
/* Add to an operator's counters (any thread). */
void sc_metrics_op_add(sc_metrics *m, uint32_t op, uint64_t rows_in, uint64_t rows_out,
                       uint64_t batches_in, uint64_t batches_out, uint64_t ns);
/* Set an operator's gauges (queue depth, workers allocated). */
void sc_metrics_op_gauge(sc_metrics *m, uint32_t op, int64_t queue_depth, uint32_t workers);
/* Record one end-to-end latency sample from a marker. */
void sc_metrics_latency_record(sc_metrics *m, uint64_t ns);
/* Copy: ops[0..nops) (may be NULL) and the latency summary (may be NULL). */
int sc_metrics_snapshot(const sc_metrics *m, sc_op_counters *ops, uint32_t nops, sc_latency_summary *lat);
/* Copy of the whole latency histogram (for plotting). */
int sc_metrics_latency_histogram(const sc_metrics *m, sc_hist_snapshot *out);

#endif
