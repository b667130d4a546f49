/* udf_args: the argument columns of a generated Cython kernel, as the `apply` and
 * `speculate` operators hand them over: per argument a values array of its kind ('i' int64,
 * 'd' double, 'b' one byte per bool) and a validity byte array. Int columns passed as double
 * and bools are converted into per-argument buffers; int64 and double columns are passed
 * without a copy. One batch at a time per instance. */
#ifndef SC_EXEC_UDF_ARGS_H
#define SC_EXEC_UDF_ARGS_H

#include <stdlib.h>
#include <string.h>

#include "exec.h"

typedef struct sc_udf_args {
    int32_t n;      /* arguments */
    int32_t *cols;  /* input column of each */
    char *kinds;    /* 'i' / 'd' / 'b' each */
    int64_t cap;    /* rows the buffers hold */
    void **vals;    /* n pointers handed to the kernel */
    uint8_t **oks;  /* n validity byte arrays */
    void **conv;    /* n converted-value arrays (double from int, bytes from bools) */
} sc_udf_args;

/* SC_EINVAL unless every column exists in `in` (past the hidden ones) with a type the
 * kernel's kind takes. */
static inline int sc_udf_args_check(const sc_schema *in, const int32_t *cols, const char *kinds,
                                    int32_t n) {
    if (n < 1 || !cols || !kinds) return SC_EINVAL;
    for (int32_t j = 0; j < n; j++) {
        if (cols[j] < SC_NHIDDEN || cols[j] >= in->ncols) return SC_EINVAL;
        uint8_t lt = in->lt[cols[j]];
        bool ok = (kinds[j] == 'i' && lt == SC_LT_INT) || (kinds[j] == 'b' && lt == SC_LT_BOOL) ||
                  (kinds[j] == 'd' && (lt == SC_LT_INT || lt == SC_LT_FLOAT));
        if (!ok) return SC_EINVAL;
    }
    return SC_OK;
}

static inline void sc_udf_args_free(sc_udf_args *a) {
    for (int32_t j = 0; j < a->n; j++) {
        if (a->oks) free(a->oks[j]);
        if (a->conv) free(a->conv[j]);
    }
    free(a->oks);
    free(a->conv);
    free(a->vals);
    free(a->cols);
    free(a->kinds);
    memset(a, 0, sizeof *a);
}

/* Copies cols and kinds (checked with sc_udf_args_check first). */
static inline int sc_udf_args_init(sc_udf_args *a, const int32_t *cols, const char *kinds, int32_t n) {
    memset(a, 0, sizeof *a);
    a->cols = malloc((size_t)n * sizeof(int32_t));
    a->kinds = malloc((size_t)n);
    a->vals = calloc((size_t)n, sizeof(void *));
    a->oks = calloc((size_t)n, sizeof(uint8_t *));
    a->conv = calloc((size_t)n, sizeof(void *));
    a->n = n;
    if (!a->cols || !a->kinds || !a->vals || !a->oks || !a->conv) {
        sc_udf_args_free(a);
        return SC_ENOMEM;
    }
    memcpy(a->cols, cols, (size_t)n * sizeof(int32_t));
    memcpy(a->kinds, kinds, (size_t)n);
    return SC_OK;
}

/* Buffers for `rows` rows (a->cap becomes rows on success). */
static inline int sc_udf_args_reserve(sc_udf_args *a, int64_t rows) {
    if (rows <= a->cap) return SC_OK;
    for (int32_t j = 0; j < a->n; j++) {
        uint8_t *ok = realloc(a->oks[j], (size_t)rows);
        if (!ok) return SC_ENOMEM;
        a->oks[j] = ok;
        void *cv = realloc(a->conv[j], (size_t)rows * 8);
        if (!cv) return SC_ENOMEM;
        a->conv[j] = cv;
    }
    a->cap = rows;
    return SC_OK;
}

/* Point vals / oks at the batch's argument columns (buffers reserved for in->nrows). */
static inline void sc_udf_unpack(const sc_batch *in, sc_udf_args *a) {
    int64_t n = in->nrows;
    for (int32_t j = 0; j < a->n; j++) {
        const sc_column *c = &in->cols[a->cols[j]];
        uint8_t *ok = a->oks[j];
        for (int64_t r = 0; r < n; r++) ok[r] = sc_bit_get(c->validity, r);
        char k = a->kinds[j];
        if (k == 'i' || (k == 'd' && c->type == SC_COL_DOUBLE)) {
            a->vals[j] = c->values;
        } else if (k == 'd') {
            double *d = a->conv[j];
            const int64_t *x = c->values;
            for (int64_t r = 0; r < n; r++) d[r] = (double)x[r];
            a->vals[j] = d;
        } else {
            uint8_t *b = a->conv[j];
            for (int64_t r = 0; r < n; r++) b[r] = sc_bit_get(c->values, r);
            a->vals[j] = b;
        }
    }
}

#endif
