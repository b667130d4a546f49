/* txn: the state API a transactional user function sees (the `speculate` stage, Sturzrehm).
 *
 * A compiled user module never links against the runtime: it receives a pointer to this
 * struct and calls through its function pointers (a vtable). The generated Cython module
 * declares the same layout (kernel/streamcell/udf.py, _TXN_DECL); SC_TXN_ABI names the
 * layout and changes whenever it does.
 *
 *   get(tx, key)         the value of `key` as this transaction sees it: its own latest put,
 *                        else the committed store; a key never written reads 0.
 *   put(tx, key, value)  buffer a write; it reaches the store only when the transaction
 *                        commits (never for an execution that is aborted and re-run).
 *
 * Keys and values are int64. Both calls are nogil and never fail (memory for the read and
 * write sets is reserved up front and grown by the engine; an allocation failure marks the
 * transaction failed and the run stops with SC_ENOMEM). `impl` belongs to the engine.
 */
#ifndef SC_EXEC_TXN_H
#define SC_EXEC_TXN_H

#include <stdint.h>

#define SC_TXN_ABI 1

typedef struct sc_txn sc_txn;
struct sc_txn {
    int64_t (*get)(sc_txn *tx, int64_t key);
    void (*put)(sc_txn *tx, int64_t key, int64_t value);
    void *impl;
};

/* The kernel the UDF machinery generates for a transactional function f(tx, a0, a1, ...):
 * runs f on row `r` of the argument columns (vals[j]: int64/double/uint8 values of argument
 * j; oks[j]: one validity byte per row). A null argument gives a null result (*out_ok = 0)
 * without running f (no state access); otherwise *out (8 bytes: int64, double or, for bool,
 * 0/1 as int64) and *out_ok = 1. */
typedef void (*sc_txn_kernel)(sc_txn *tx, const void **vals, const uint8_t **oks, int64_t r,
                              void *out, uint8_t *out_ok);

#endif
