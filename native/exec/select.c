/* select: see select.h for the contract. */
#include "select.h"

#include "exec.h"

#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define SC_HAVE_X86_PATHS 1
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

/* 16-byte values (string views): the same, one row at a time. */
static int64_t compress16_scalar(uint8_t *dv, const uint8_t *sv, const uint8_t *keep, int64_t from, int64_t n,
                                 int64_t out) {
    for (int64_t r = from; r < n; r++) {
        memcpy(dv + 16 * out, sv + 16 * r, 16);
        out += keep[r] != 0;
    }
    return out;
}

#ifdef SC_HAVE_X86_PATHS
/* Which vector paths this CPU takes (sc_cpu_flags), less those a test turned off. */
enum { SIMD_AVX2 = SC_CPU_AVX2, SIMD_PEXT = SC_CPU_PEXT, SIMD_AVX512 = SC_CPU_AVX512BW };
static int simd_allowed = -1; /* sc_sel_allow_paths */
static int simd(void) { return sc_cpu_flags() & __atomic_load_n(&simd_allowed, __ATOMIC_RELAXED); }

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

/* AVX2 has no compress instruction: four 8-byte lanes are compressed by a permutation of
 * their 32-bit halves, looked up by the lanes' 4-bit keep mask, and stored whole (a store of
 * four lanes at `out` never passes row n: out <= r). */
__attribute__((aligned(32))) static const int32_t perm4[16][8] = {
    { 0, 0, 0, 0, 0, 0, 0, 0 }, { 0, 1, 0, 0, 0, 0, 0, 0 }, { 2, 3, 0, 0, 0, 0, 0, 0 }, { 0, 1, 2, 3, 0, 0, 0, 0 },
    { 4, 5, 0, 0, 0, 0, 0, 0 }, { 0, 1, 4, 5, 0, 0, 0, 0 }, { 2, 3, 4, 5, 0, 0, 0, 0 }, { 0, 1, 2, 3, 4, 5, 0, 0 },
    { 6, 7, 0, 0, 0, 0, 0, 0 }, { 0, 1, 6, 7, 0, 0, 0, 0 }, { 2, 3, 6, 7, 0, 0, 0, 0 }, { 0, 1, 2, 3, 6, 7, 0, 0 },
    { 4, 5, 6, 7, 0, 0, 0, 0 }, { 0, 1, 4, 5, 6, 7, 0, 0 }, { 2, 3, 4, 5, 6, 7, 0, 0 }, { 0, 1, 2, 3, 4, 5, 6, 7 },
};

/* The keep bytes of 32 rows as a bit mask. */
__attribute__((target("avx2"))) static inline uint32_t keep_bits32(const uint8_t *keep) {
    __m256i kb = _mm256_loadu_si256((const __m256i *)keep);
    return ~(uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(kb, _mm256_setzero_si256()));
}

__attribute__((target("avx2,popcnt"))) static int64_t
compress_avx2(int64_t *const *dv, const int64_t *const *sv, int32_t m, const uint8_t *keep, int64_t n) {
    int64_t out = 0, r = 0;
    for (; r + 32 <= n; r += 32) {
        uint32_t bits = keep_bits32(keep + r);
        for (int32_t c = 0; c < m; c++) {
            const int64_t *s = sv[c] + r;
            int64_t *d = dv[c] + out;
            uint32_t b = bits;
            for (int g = 0; g < 8; g++, b >>= 4) {
                __m256i v = _mm256_loadu_si256((const __m256i *)(s + 4 * g));
                __m256i ix = _mm256_load_si256((const __m256i *)perm4[b & 15]);
                _mm256_storeu_si256((__m256i *)d, _mm256_permutevar8x32_epi32(v, ix));
                d += __builtin_popcount(b & 15);
            }
        }
        out += __builtin_popcount(bits);
    }
    return compress_scalar(dv, sv, m, keep, r, n, out);
}

/* String views, two rows (four 8-byte lanes) per permutation. */
__attribute__((target("avx2,popcnt"))) static int64_t compress16_avx2(uint8_t *dv, const uint8_t *sv,
                                                                      const uint8_t *keep, int64_t n) {
    static const uint8_t both[4] = { 0, 3, 12, 15 }; /* a row's keep bit for both its lanes */
    int64_t out = 0, r = 0;
    for (; r + 32 <= n; r += 32) {
        uint32_t b = keep_bits32(keep + r);
        for (int g = 0; g < 16; g++, b >>= 2) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(sv + 16 * (r + 2 * g)));
            __m256i ix = _mm256_load_si256((const __m256i *)perm4[both[b & 3]]);
            _mm256_storeu_si256((__m256i *)(dv + 16 * out), _mm256_permutevar8x32_epi32(v, ix));
            out += (b & 1) + ((b >> 1) & 1);
        }
    }
    return compress16_scalar(dv, sv, keep, r, n, out);
}

/* The keep bytes of rows [from, n), n - from <= 64, as a bit mask (bit i: row from + i). */
static uint64_t keep_bits_tail(const uint8_t *keep, int64_t from, int64_t n) {
    uint64_t m = 0;
    for (int64_t i = 0; from + i < n; i++) m |= (uint64_t)(keep[from + i] != 0) << i;
    return m;
}

/* Bits [0, k) of dst = the bits of src at the rows r < n with keep[r] != 0 (k of them), 64
 * rows per pext; dst's bits from k on are left as they were. */
__attribute__((target("avx2,bmi2,popcnt"))) static void bits_compress(uint8_t *dst, const uint8_t *src,
                                                                      const uint8_t *keep, int64_t n) {
    uint64_t acc = 0; /* nacc output bits not stored yet */
    int nacc = 0;
    int64_t o = 0; /* bytes stored */
    for (int64_t r = 0; r < n; r += 64) {
        int64_t w = n - r < 64 ? n - r : 64;
        uint64_t m = w == 64 ? keep_bits32(keep + r) | (uint64_t)keep_bits32(keep + r + 32) << 32
                             : keep_bits_tail(keep, r, n);
        uint64_t s = 0;
        memcpy(&s, src + r / 8, (size_t)(w + 7) / 8);
        uint64_t v = _pext_u64(s, m);
        int c = __builtin_popcountll(m);
        acc |= v << nacc;
        if (nacc + c >= 64) {
            memcpy(dst + o, &acc, 8);
            o += 8;
            acc = nacc ? v >> (64 - nacc) : 0;
            nacc += c - 64;
        } else {
            nacc += c;
        }
    }
    memcpy(dst + o, &acc, (size_t)(nacc / 8));
    if (nacc & 7) {
        int64_t at = o + nacc / 8;
        uint8_t lo = (uint8_t)((1u << (nacc & 7)) - 1);
        dst[at] = (uint8_t)((dst[at] & ~lo) | ((acc >> (8 * (nacc / 8))) & lo));
    }
}
#endif

static int64_t compress_fixed(int64_t *const *dv, const int64_t *const *sv, int32_t m, const uint8_t *keep,
                              int64_t n) {
#ifdef SC_HAVE_X86_PATHS
    int f = simd();
    if (f & SIMD_AVX512) return compress_avx512(dv, sv, m, keep, n);
    if (f & SIMD_AVX2) return compress_avx2(dv, sv, m, keep, n);
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

/* The rows a compress keeps: the mask (k of its n bytes nonzero), and the selection vector
 * filled from it only when a column needs one (kept_sel). */
typedef struct kept {
    const uint8_t *keep;
    int64_t n, k;
    int32_t *sel;
    bool ready;
} kept;

static const int32_t *kept_sel(kept *r) {
    if (!r->ready) {
        sc_sel_from_mask(r->keep, r->n, r->sel);
        r->ready = true;
    }
    return r->sel;
}

/* A bitmap's rows by the mask: pext where the CPU has a fast one, else through sel. */
static void bits_by_mask(uint8_t *dst, const uint8_t *src, kept *r) {
#ifdef SC_HAVE_X86_PATHS
    if ((simd() & (SIMD_AVX2 | SIMD_PEXT)) == (SIMD_AVX2 | SIMD_PEXT)) {
        bits_compress(dst, src, r->keep, r->n);
        return;
    }
#endif
    bits_gather(dst, 0, src, kept_sel(r), r->k);
}

/* gather_validity at d0 = 0, by the mask. */
static void compress_validity(sc_column *d, const sc_column *x, kept *r) {
    if (x->null_count == 0 && d->null_count == 0) return;
    int64_t k = r->k;
    int64_t was = d->null_count ? sc_bits_count(d->validity, 0, k) : k;
    if (x->null_count == 0) bits_set_range(d->validity, 0, k);
    else bits_by_mask(d->validity, x->validity, r);
    int64_t now = x->null_count == 0 ? k : sc_bits_count(d->validity, 0, k);
    d->null_count += was - now;
}

/* A bool or string column by the mask (rows [0, k) of d): bools by their bits, string views
 * as 16-byte values (d gets room for n views: whole stores may pass row k); other strings
 * through sel. */
static int compress_other(sc_column *d, const sc_column *x, kept *r, bool grow) {
    if (x->type == SC_COL_BOOL) {
        compress_validity(d, x, r);
        bits_by_mask(d->values, x->values, r);
        return SC_OK;
    }
    if (x->type == SC_COL_UTF8 && x->views) {
        int rc = sc_column_views_room(d, r->n);
        if (rc) return rc;
        compress_validity(d, x, r);
        int64_t got;
#ifdef SC_HAVE_X86_PATHS
        if (simd() & SIMD_AVX2) got = compress16_avx2(d->values, x->values, r->keep, r->n);
        else
#endif
            got = compress16_scalar(d->values, x->values, r->keep, 0, r->n, 0);
        return got == r->k ? SC_OK : SC_EINTERNAL;
    }
    return sc_sel_gather(d, 0, x, kept_sel(r), r->k, grow);
}

/* Rows [0, k) of each dst column: through sel, or (r != NULL) compressed by r's mask. */
static int sel_cols(sc_column *dst, const sc_column *src, int32_t ncols, const int32_t *sel, int64_t k, bool grow,
                    kept *r) {
    int64_t *dv[4];
    const int64_t *sv[4];
    int32_t m = 0;
    for (int32_t c = 0; c < ncols; c++) {
        const sc_column *x = &src[c];
        if (dst[c].type != x->type) return SC_EINVAL;
        if (x->type != SC_COL_INT64 && x->type != SC_COL_DOUBLE) {
            int rc = r ? compress_other(&dst[c], x, r, grow) : sc_sel_gather(&dst[c], 0, x, sel, k, grow);
            if (rc) return rc;
            continue;
        }
        if (r) compress_validity(&dst[c], x, r);
        else gather_validity(&dst[c], 0, x, sel, k);
        dv[m] = dst[c].values;
        sv[m++] = x->values;
        if (m == 4) {
            int rc = r ? fixed_cols(dv, sv, m, NULL, k, r->keep, r->n) : fixed_cols(dv, sv, m, sel, k, NULL, 0);
            if (rc) return rc;
            m = 0;
        }
    }
    if (!m) return SC_OK;
    return r ? fixed_cols(dv, sv, m, NULL, k, r->keep, r->n) : fixed_cols(dv, sv, m, sel, k, NULL, 0);
}

int sc_sel_allow_paths(int allowed) {
#ifdef SC_HAVE_X86_PATHS
    return __atomic_exchange_n(&simd_allowed, allowed, __ATOMIC_RELAXED);
#else
    (void)allowed;
    return -1;
#endif
}

int sc_sel_gather_cols(sc_column *dst, const sc_column *src, int32_t ncols, const int32_t *sel, int64_t k, bool grow) {
    return sel_cols(dst, src, ncols, sel, k, grow, NULL);
}

int sc_sel_compress_cols(sc_column *dst, const sc_column *src, int32_t ncols, const uint8_t *keep, int64_t n,
                         int32_t *sel, int64_t k, bool grow) {
    kept r = { .keep = keep, .n = n, .k = k, .sel = sel, .ready = false };
    return sel_cols(dst, src, ncols, NULL, k, grow, &r);
}
