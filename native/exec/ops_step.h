/* ops_step: a keyed step over a typed state struct (plan.Apply, the `apply` stage).
 *
 * The user function f(S *st, a0, a1, ...) is compiled from the cell (kernel/streamcell/udf.py)
 * together with a batch kernel (sc_step_kernel below). Each key gets its own state blob of
 * `state_size` bytes, zero-initialised when the key is first seen; per input row, in arrival
 * order, the kernel calls f with the row's key's state and the row's arguments, and the
 * result becomes one column appended to the row (rows pass through, like `running`). A null
 * argument gives a null result and f is not called (the key's state is still created, which
 * changes nothing visible). Keys compare like every keyed operator's (ops_state.h: nulls
 * equal, NaN equal, -0.0 == 0.0); nkeys == 0 is one global state.
 *
 * Keyed: the program partitions it by key (each partition its own instance and states) on
 * the hybrid queue; a DAG vertex runs one instance. Calls f from worker threads without the
 * GIL. Memory: one blob per key ever seen (never evicted; the state_size gauge counts keys)
 * plus scratch of one batch.
 */
#ifndef SC_EXEC_OPS_STEP_H
#define SC_EXEC_OPS_STEP_H

#include "exec.h"

/* The kernel generated for a keyed step f: for r in [0, n): when every oks[j][r] is set,
 * out[r] = f(states[r], vals[0][r], ...) and out_ok[r] = 1, else out_ok[r] = 0 (f not called).
 * vals[j] holds int64 ('i'), double ('d') or uint8 ('b') values; out is double[n] (return
 * kind 'd'), int64[n] ('i') or uint8[n] ('b'). Rows run in order, so several rows of one key
 * in a batch see each other's updates. */
typedef void (*sc_step_kernel)(int64_t n, void **states, const void **vals, const uint8_t **oks, void *out,
                               uint8_t *out_ok);

/* base.out = base.in plus one column (FLOAT for ret 'd', INT for 'i', BOOL for 'b');
 * keys[0..nkeys) and args[0..nargs) input columns, kinds[j] in "idb" ('d' reads FLOAT or INT);
 * state_size > 0 bytes (at most 1 MiB); kernel must outlive the operator. */
int sc_op_step_create(void **st, const sc_op_base *base, sc_step_kernel kernel, const int32_t *keys,
                      int32_t nkeys, const int32_t *args, const char *kinds, int32_t nargs, char ret,
                      int64_t state_size);
int sc_op_step_run(void *st, sc_batch *in, sc_batch **out);
void sc_op_step_destroy(void *st);

#endif
