/* ops_speculate: the `speculate` stage (plan.Speculate): one user transaction per row against
 * the operator's keyed store, run speculatively on several threads with ordered commit
 * (exec/speculate.h, Sturzrehm).
 *
 * STATEFUL (the pool gives it one input batch at a time, in arrival order). Per batch, the
 * rows become events 0..n-1 of one sc_spec_run on the operator's own engine (`workers`
 * threads: the calling pool worker and workers - 1 helpers); when every row has committed
 * the output is the input rows, in order, plus one result column (FLOAT, INT or BOOL as the
 * function returns; null when an argument is null, in which case the function is not run
 * and touches no state). The store persists across batches: the output equals running the
 * function on every row in arrival order against one plain map.
 *
 * The function is a compiled user kernel (exec/txn.h, sc_txn_kernel). Its arguments are
 * input columns: kind 'i' reads an INT column, 'd' a FLOAT or INT column (converted), 'b' a
 * BOOL column; they are unpacked into per-operator scratch once per batch.
 *
 * Memory: scratch of one batch (arguments, validity bytes, results) plus the engine's bounded
 * slots and the store (one node per key; the state_size gauge). Cancel (any thread) makes a
 * batch in flight fail with SC_ECLOSED promptly; the program's stop calls it.
 */
#ifndef SC_EXEC_OPS_SPECULATE_H
#define SC_EXEC_OPS_SPECULATE_H

#include "exec.h"
#include "speculate.h"

/* base.out = base.in plus one column of type `ret_lt`; args[0..nargs) input columns with
 * kinds[j] in "idb"; kernel a sc_txn_kernel (must outlive the operator). */
int sc_op_speculate_create(void **st, const sc_op_base *base, sc_txn_kernel kernel, const int32_t *args,
                           const char *kinds, int32_t nargs, const sc_spec_config *cfg);
int sc_op_speculate_run(void *st, sc_batch *in, sc_batch **out);
void sc_op_speculate_destroy(void *st);
void sc_op_speculate_cancel(void *st);
void sc_op_speculate_stats(void *st, sc_spec_stats *out);

#endif
