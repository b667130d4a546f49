/* ops_correlate: conditions over several streams (the plan's `correlate` step) over the
 * tagged layout of its inputs (see fanin.h): exactly the reference's CorrelateOp
 * (kernel/streamcell/backends/reference.py; README "correlate").
 *
 * Semantics. One watermark = max admitted time - lateness over all inputs. A null time is
 * dead (reason `dead_reason`); a time below the watermark is late. A null key is a key value
 * like any other (keys are equal as in ops_state.h). Admitting a row (port i, key k, time t):
 * T_k = max(T_k, t); the row is appended to (k, i); every port's rows of k with time
 * <= T_k - over are dropped; then one output row: hidden seq / pos of the row, then each
 * output column (SC_CORR_INPUT: a tagged column of the admitted row, i.e. a key or the time;
 * SC_CORR_AGG: an aggregate over the kept rows of its port for k, in insertion order).
 *
 * Aggregates skip nulls except last (the most recently appended row's value, null or not);
 * empty gives null (count: 0). Ints sum wrapping at 64 bits; floats sum left to right
 * (s = x0, s += x1, ...); mean = s / n (an int sum correctly rounded, as Python's int / int);
 * std = sqrt(sum((x - mean)^2) / (n - 1)) summed left to right, null when n < 2; min / max
 * keep the column's type, NaN above every number, strings by UTF-8 bytes. The file is
 * compiled without floating-point contraction so every engine gives the same doubles.
 *
 * State. Rows with time <= watermark - over can never be kept at their key's next admission
 * (T_k >= that admission's time >= the watermark), so a sweep (amortized O(1) per row) drops
 * them and forgets keys whose rows are all gone (a key's latest row leaves by a sweep only,
 * so such a key's clock T_k <= watermark - over can drop no row admitted later).
 * state_size = stored rows.
 *
 * Thread safety: one thread at a time (a stateful operator). */
#ifndef SC_EXEC_OPS_CORRELATE_H
#define SC_EXEC_OPS_CORRELATE_H

#include "exec.h"

typedef enum {
    SC_CORR_COUNT = 1, /* col < 0: rows; else non-null values */
    SC_CORR_SUM,       /* int or float column */
    SC_CORR_MEAN,      /* int or float column; result float */
    SC_CORR_STD,       /* int or float column; result float */
    SC_CORR_MIN,
    SC_CORR_MAX,
    SC_CORR_LAST
} sc_corr_fn;

typedef struct sc_corr_agg {
    int32_t fn;   /* sc_corr_fn */
    int32_t port; /* which input's rows */
    int32_t col;  /* tagged column of that input (-1: count()) */
} sc_corr_agg;

typedef enum { SC_CORR_INPUT = 1, SC_CORR_AGG = 2 } sc_corr_out_kind;

typedef struct sc_corr_spec {
    int32_t nports;
    const int32_t *width;    /* user columns of each input (nports entries) */
    const int32_t *keys;     /* nports * nkeys tagged key columns, port by port */
    int32_t nkeys;
    const int32_t *time_col; /* nports tagged time columns (INT, DATETIME or DATE; one type) */
    int64_t over, lateness;  /* ticks (microseconds for temporal columns); over > 0 */
    const sc_corr_agg *aggs;
    int32_t naggs;
    const int32_t *out_kind; /* out.ncols - SC_NHIDDEN entries: sc_corr_out_kind */
    const int32_t *out_arg;  /* SC_CORR_INPUT: a key / time index k < nkeys (key k) or
                              * k == nkeys (time), read from the admitted row's port;
                              * SC_CORR_AGG: the aggregate */
    const char *dead_reason; /* for a null time (copied) */
} sc_corr_spec;

/* Copies `base` (exec.h). SC_EINVAL when the spec does not fit the schemas. */
int sc_op_correlate_create(void **st, const sc_op_base *base, const sc_corr_spec *spec);
int sc_op_correlate_run(void *st, sc_batch *in, sc_batch **out);
void sc_op_correlate_destroy(void *st);

#endif
