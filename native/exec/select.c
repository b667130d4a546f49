/* select: see select.h for the contract. */
#include "select.h"

#include "exec.h"

#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define SC_HAVE_AVX512_PATH 1
#endif

int64_t sc_sel_from_mask(const uint8_t *keep, int64_t n, int32_t *sel) {
    int64_t k = 0;
    for (int64_t r = 0; r < n; r++) { /* write every row, advance past the kept ones */
        sel[k] = (int32_t)r;
        k += keep[r] != 0;
    }
    return k;
}

/* dst bits [d0, d0 + k) = src bits sel[0..k); whole bytes at a time when d0 is byte-aligned. */
static void bits_gather(uint8_t *dst, int64_t d0, const uint8_t *src, const int32_t *sel, int64_t k) {
    int64_t j = 0;
    if ((d0 & 7) == 0) {
        uint8_t *o = dst + (d0 >> 3);
        for (; j + 8 <= k; j += 8) {
            unsigned byte = 0;
            for (int b = 0; b < 8; b++) {
                int32_t r = sel[j + b];
                byte |= (unsigned)((src[r >> 3] >> (r & 7)) & 1) << b;
            }
            o[j >> 3] = (uint8_t)byte;
        }
    }
    for (; j < k; j++) sc_bit_set(dst, d0 + j, sc_bit_get(src, sel[j]));
}

/* Set bits [d0, d0 + k). */
static void bits_set_range(uint8_t *bm, int64_t d0, int64_t k) {
    int64_t i = 0;
    for (; i < k && ((d0 + i) & 7); i++) sc_bit_set(bm, d0 + i, true);
    if (i + 8 <= k) {
        memset(bm + ((d0 + i) >> 3), 0xFF, (size_t)((k - i) >> 3));
        i += (k - i) & ~(int64_t)7;
    }
    for (; i < k; i++) sc_bit_set(bm, d0 + i, true);
}

static void gather_validity(sc_column *d, int64_t d0, const sc_column *x, const int32_t *sel, int64_t k) {
    if (x->null_count == 0 && d->null_count == 0) return; /* the new rows' bits are already set */
    int64_t was = d->null_count ? sc_bits_count(d->validity, d0, k) : k;
    if (x->null_count == 0) bits_set_range(d->validity, d0, k);
    else bits_gather(d->validity, d0, x->validity, sel, k);
    int64_t now = x->null_count == 0 ? k : sc_bits_count(d->validity, d0, k);
    d->null_count += was - now;
}

/* Consecutive selected rows from j on: the end of the run. */
static inline int64_t run_end(const int32_t *sel, int64_t j, int64_t k) {
    int64_t e = j + 1;
    while (e < k && sel[e] == sel[e - 1] + 1) e++;
    return e;
}

static int gather_utf8(sc_column *d, int64_t d0, const sc_column *x, const int32_t *sel, int64_t k, bool grow) {
    if (k == 0) return SC_OK;
    int64_t at = d->offsets[d0];
    /* the span from the first to the last selected row bounds the bytes; count them exactly
     * only when that bound does not fit and the buffer may not grow */
    int64_t bytes = (int64_t)x->offsets[sel[k - 1] + 1] - x->offsets[sel[0]];
    if (at + bytes > d->data_cap && !grow) {
        bytes = 0;
        for (int64_t j = 0, e; j < k; j = e) {
            e = run_end(sel, j, k);
            bytes += (int64_t)x->offsets[sel[e - 1] + 1] - x->offsets[sel[j]];
        }
    }
    if (at + bytes > d->data_cap) {
        if (!grow) return SC_EFULL;
        int64_t cap = d->data_cap > 32 ? d->data_cap * 2 : 64;
        while (cap < at + bytes) cap *= 2;
        if (cap > INT32_MAX) return SC_EINVAL;
        char *p = sc_colbuf_realloc(d->data, (size_t)cap);
        if (!p) return SC_ENOMEM;
        d->data = p;
        d->data_cap = cap;
    }
    for (int64_t j = 0, e; j < k; j = e) {
        e = run_end(sel, j, k);
        int32_t b0 = x->offsets[sel[j]], b1 = x->offsets[sel[e - 1] + 1];
        if (b1 > b0) memcpy(d->data + at, x->data + b0, (size_t)(b1 - b0));
        int64_t shift = at - b0;
        for (int64_t i = j; i < e; i++) d->offsets[d0 + i + 1] = (int32_t)(x->offsets[sel[i] + 1] + shift);
        at += b1 - b0;
    }
    return SC_OK;
}

int sc_sel_gather(sc_column *dst, int64_t d0, const sc_column *src, const int32_t *sel, int64_t k, bool grow) {
    if (!dst || !src || dst->type != src->type || d0 < 0 || k < 0 || (k && !sel)) return SC_EINVAL;
    gather_validity(dst, d0, src, sel, k);
    switch (src->type) {
    case SC_COL_INT64:
    case SC_COL_DOUBLE: {
        const int64_t *sv = src->values;
        int64_t *dv = (int64_t *)dst->values + d0;
        for (int64_t j = 0; j < k; j++) dv[j] = sv[sel[j]];
        return SC_OK;
    }
    case SC_COL_BOOL: bits_gather(dst->values, d0, src->values, sel, k); return SC_OK;
    case SC_COL_UTF8:
        if (src->views && (d0 == 0 || dst->views)) { /* fixed 16-byte views: gathered as such */
            int rc = sc_column_views_room(dst, d0 + k);
            if (rc) return rc;
            uint8_t *dv = (uint8_t *)dst->values + 16 * d0;
            const uint8_t *sv = src->values;
            for (int64_t j = 0; j < k; j++) memcpy(dv + 16 * j, sv + 16 * (int64_t)sel[j], 16);
            return SC_OK;
        }
        if (dst->views && dst->borrowed) return SC_EINVAL;
        int rc = sc_column_unview(dst, d0); /* strings into a views column: offsets / data first */
        if (rc) return rc;
        if (src->views) return sc_views_to_utf8(dst, d0, src, sel, NULL, k);
        return gather_utf8(dst, d0, src, sel, k, grow);
    }
    return SC_EINVAL;
}

/* Up to 4 fixed-width columns through one pass over sel: each index is loaded once. */
static void gather_fixed4(int64_t *const *dv, const int64_t *const *sv, int32_t m, const int32_t *sel, int64_t k) {
    if (m == 4) {
        int64_t *d0 = dv[0], *d1 = dv[1], *d2 = dv[2], *d3 = dv[3];
        const int64_t *s0 = sv[0], *s1 = sv[1], *s2 = sv[2], *s3 = sv[3];
        for (int64_t j = 0; j < k; j++) {
            int32_t r = sel[j];
            d0[j] = s0[r], d1[j] = s1[r], d2[j] = s2[r], d3[j] = s3[r];
        }
    } else if (m == 3) {
        int64_t *d0 = dv[0], *d1 = dv[1], *d2 = dv[2];
        const int64_t *s0 = sv[0], *s1 = sv[1], *s2 = sv[2];
        for (int64_t j = 0; j < k; j++) {
            int32_t r = sel[j];
            d0[j] = s0[r], d1[j] = s1[r], d2[j] = s2[r];
        }
    } else if (m == 2) {
        int64_t *d0 = dv[0], *d1 = dv[1];
        const int64_t *s0 = sv[0], *s1 = sv[1];
        for (int64_t j = 0; j < k; j++) {
            int32_t r = sel[j];
            d0[j] = s0[r], d1[j] = s1[r];
        }
    } else if (m == 1) {
        int64_t *d0 = dv[0];
        const int64_t *s0 = sv[0];
        for (int64_t j = 0; j < k; j++) d0[j] = s0[sel[j]];
    }
}

/* ------------------------------------------------------------------ compress by mask */

/* Up to 4 fixed-width columns: rows r < n with keep[r] != 0, in order, to dv[c][0..). Scalar. */
static int64_t compress_scalar(int64_t *const *dv, const int64_t *const *sv, int32_t m, const uint8_t *keep,
                               int64_t from, int64_t n, int64_t out) {
    for (int64_t r = from; r < n; r++) {
        for (int32_t c = 0; c < m; c++) dv[c][out] = sv[c][r];
        out += keep[r] != 0;
    }
    return out;
}

#ifdef SC_HAVE_AVX512_PATH
/* The same eight rows at a time: the keep bytes of 64 rows become one bit mask, and each group
 * of eight values is compressed in a register and stored whole (a store of eight lanes at
 * `out`, which never passes row n: out <= r). A compress straight to memory is microcoded on
 * some cores; this form is not. */
__attribute__((target("avx512f,avx512bw,popcnt"))) static int64_t
compress_avx512(int64_t *const *dv, const int64_t *const *sv, int32_t m, const uint8_t *keep, int64_t n) {
    int64_t out = 0, r = 0;
    for (; r + 64 <= n; r += 64) {
        __m512i kb = _mm512_loadu_si512((const void *)(keep + r));
        uint64_t bits = _mm512_test_epi8_mask(kb, kb);
        for (int g = 0; g < 8; g++) {
            __mmask8 mk = (__mmask8)(bits >> (8 * g));
            for (int32_t c = 0; c < m; c++) {
                __m512i v = _mm512_loadu_si512((const void *)(sv[c] + r + 8 * g));
                _mm512_storeu_si512((void *)(dv[c] + out), _mm512_maskz_compress_epi64(mk, v));
            }
            out += _mm_popcnt_u32(mk);
        }
    }
    return compress_scalar(dv, sv, m, keep, r, n, out);
}

static int avx512_ok = -1; /* -1: not checked yet; workers may race to check: same answer */
static bool use_avx512(void) {
    int ok = __atomic_load_n(&avx512_ok, __ATOMIC_RELAXED);
    if (ok < 0) {
        __builtin_cpu_init();
        ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("popcnt");
        __atomic_store_n(&avx512_ok, ok, __ATOMIC_RELAXED);
    }
    return ok;
}
#endif

static int64_t compress_fixed(int64_t *const *dv, const int64_t *const *sv, int32_t m, const uint8_t *keep,
                              int64_t n) {
#ifdef SC_HAVE_AVX512_PATH
    if (use_avx512()) return compress_avx512(dv, sv, m, keep, n);
#endif
    return compress_scalar(dv, sv, m, keep, 0, n, 0);
}

/* Four fixed-width columns at a time: through sel, or (keep != NULL) compressed by the mask. */
static int fixed_cols(int64_t *const *dv, const int64_t *const *sv, int32_t m, const int32_t *sel, int64_t k,
                      const uint8_t *keep, int64_t n) {
    if (!keep) {
        gather_fixed4(dv, sv, m, sel, k);
        return SC_OK;
    }
    return compress_fixed(dv, sv, m, keep, n) == k ? SC_OK : SC_EINTERNAL;
}

static int sel_cols(sc_column *dst, const sc_column *src, int32_t ncols, const int32_t *sel, int64_t k, bool grow,
                    const uint8_t *keep, int64_t n) {
    int64_t *dv[4];
    const int64_t *sv[4];
    int32_t m = 0;
    for (int32_t c = 0; c < ncols; c++) {
        const sc_column *x = &src[c];
        if (dst[c].type != x->type) return SC_EINVAL;
        if (x->type != SC_COL_INT64 && x->type != SC_COL_DOUBLE) {
            int rc = sc_sel_gather(&dst[c], 0, x, sel, k, grow);
            if (rc) return rc;
            continue;
        }
        gather_validity(&dst[c], 0, x, sel, k);
        dv[m] = dst[c].values;
        sv[m++] = x->values;
        if (m == 4) {
            int rc = fixed_cols(dv, sv, m, sel, k, keep, n);
            if (rc) return rc;
            m = 0;
        }
    }
    return m ? fixed_cols(dv, sv, m, sel, k, keep, n) : SC_OK;
}

int sc_sel_gather_cols(sc_column *dst, const sc_column *src, int32_t ncols, const int32_t *sel, int64_t k, bool grow) {
    return sel_cols(dst, src, ncols, sel, k, grow, NULL, 0);
}

int sc_sel_compress_cols(sc_column *dst, const sc_column *src, int32_t ncols, const uint8_t *keep, int64_t n,
                         const int32_t *sel, int64_t k, bool grow) {
    return sel_cols(dst, src, ncols, sel, k, grow, keep, n);
}
