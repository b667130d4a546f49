/* udf_args: a batch's argument columns in the layout a generated Cython kernel takes (the
 * `apply` and `speculate` operators share it): per argument a values array of its kind
 * ('i' int64, 'd' double, 'b' one byte per bool) and a validity byte array. Int columns
 * passed as double and bools are converted into the caller's `conv` buffers (nrows each);
 * int64 and double columns are passed without a copy. */
#ifndef SC_EXEC_UDF_ARGS_H
#define SC_EXEC_UDF_ARGS_H

#include "exec.h"

static inline void sc_udf_unpack(const sc_batch *in, int32_t nargs, const int32_t *args,
                                 const char *kinds, void **vals, uint8_t **oks, void **conv) {
    int64_t n = in->nrows;
    for (int32_t j = 0; j < nargs; j++) {
        const sc_column *c = &in->cols[args[j]];
        uint8_t *ok = oks[j];
        for (int64_t r = 0; r < n; r++) ok[r] = sc_bit_get(c->validity, r);
        char k = kinds[j];
        if (k == 'i' || (k == 'd' && c->type == SC_COL_DOUBLE)) {
            vals[j] = c->values;
        } else if (k == 'd') {
            double *d = conv[j];
            const int64_t *x = c->values;
            for (int64_t r = 0; r < n; r++) d[r] = (double)x[r];
            vals[j] = d;
        } else {
            uint8_t *b = conv[j];
            for (int64_t r = 0; r < n; r++) b[r] = sc_bit_get(c->values, r);
            vals[j] = b;
        }
    }
}

#endif
