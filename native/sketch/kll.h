/* KLL quantiles sketch (Karnin, Lang, Liberty 2016) for doubles and floats, compatible with
 * Apache DataSketches (kll_doubles_sketch / kll_floats_sketch, C++ 5.x, Java 4+).
 *
 * ERROR BOUND. With parameter k (default 200; 8 <= k <= 65535) the sketch answers rank and
 * quantile queries with normalized rank error eps, with ~99% confidence, where (the
 * DataSketches fit to the 99th percentile of the measured maximum error):
 *     single-sided (rank, quantile, CDF):  eps(k) = 2.296 / k^0.9723    (k=200: 1.33%)
 *     double-sided (PMF):                  eps(k) = 2.446 / k^0.9433    (k=200: 1.65%)
 * i.e. |rank_est(x) - rank_true(x)| <= eps * n. After a merge, k is replaced by min_k, the
 * smallest k among the merged sketches that were in estimation mode. Exact (eps = 0) while
 * n <= k (one level, nothing compacted). Space: about 3k items retained at any n.
 *
 * RANDOMNESS. Compaction keeps the odd or the even items of a sorted level, chosen by a
 * random bit. Bits come from a per-sketch splitmix64 stream: a nonzero config seed makes the
 * sketch fully deterministic (same seed + same input => same bytes); seed 0 draws a distinct
 * seed from a process-wide counter, so that independent sketches do not share coin flips.
 * Results differ from the DataSketches library on the same stream (different bits), but
 * carry the same guarantee, and serialized sketches answer identically in both.
 *
 * THREAD-SAFETY. No internal synchronisation. One thread may update/merge a sketch at a
 * time; queries (rank, quantile, CDF/PMF, serialize, copy) take a const sketch and never
 * modify it, so any number of threads may query concurrently as long as no thread updates
 * it. The concurrent framework (native/sketch/concurrent.h) provides concurrent update +
 * query through sc_kll_double_vtable / sc_kll_float_vtable below.
 *
 * NaN inputs are ignored (as in DataSketches); nulls in Arrow columns are skipped. A float
 * sketch rounds every input to float32 (stored internally as exactly-representable doubles).
 * int64 columns are converted to double (exact up to 2^53 in magnitude).
 *
 * SERIALIZATION: Apache DataSketches KLL compact format, little-endian, family id 15, m = 8.
 *   empty  (8 bytes):  u8 preamble_ints=2, u8 serial_version=1, u8 family=15,
 *                      u8 flags (bit0 EMPTY, bit1 LEVEL_ZERO_SORTED, bit2 SINGLE_ITEM),
 *                      u16 k, u8 m=8, u8 0
 *   single (8 + item): same header with preamble_ints=2, serial_version=2, flags SINGLE_ITEM,
 *                      then the one item (f64 or f32)
 *   full:              header with preamble_ints=5, serial_version=1, then u64 n, u16 min_k,
 *                      u8 num_levels, u8 0, u32 levels[num_levels] (offsets into a buffer of
 *                      total capacity C(k, m, num_levels); levels[num_levels] = C is implied),
 *                      item min, item max, then the C - levels[0] retained items level by
 *                      level (level 0 first; levels >= 1 sorted ascending).
 * Item = f64 for the doubles sketch, f32 for the floats sketch. Deserialization validates
 * sizes, levels and total weight and returns SC_EFORMAT on any mismatch.
 */
#ifndef SC_KLL_H
#define SC_KLL_H

#include <stddef.h>
#include <stdint.h>

#include "concurrent.h" /* sc_sketch_vtable */

#define SC_KLL_DEFAULT_K 200
#define SC_KLL_MIN_K 8
#define SC_KLL_MAX_K 65535
#define SC_KLL_M 8
#define SC_KLL_MAX_LEVELS 61
#define SC_KLL_FAMILY 15

typedef enum sc_kll_kind { SC_KLL_DOUBLE = 0, SC_KLL_FLOAT = 1 } sc_kll_kind;

/* Config accepted by sc_kll_new and by the vtables' create (NULL => defaults). */
typedef struct sc_kll_config {
    uint32_t k;    /* 0 => SC_KLL_DEFAULT_K */
    uint64_t seed; /* 0 => distinct automatic seed */
} sc_kll_config;

/* Layout is exposed only so that sizes are known; treat every field as private. */
typedef struct sc_kll {
    double *items;                          /* logical buffer [0, levels[num_levels]) */
    uint32_t alloc;                         /* allocated items (>= capacity) */
    uint32_t levels[SC_KLL_MAX_LEVELS + 3]; /* level i holds items[levels[i], levels[i+1]) */
    uint64_t n;
    double min, max;
    uint64_t rng, bitbuf;
    uint32_t caps[SC_KLL_MAX_LEVELS + 1];   /* level capacities for caps_for levels */
    uint16_t k, min_k;
    uint8_t kind, num_levels, l0_sorted, nbits, caps_for;
} sc_kll;

/* ---- lifecycle ---- */
int sc_kll_new(sc_kll **out, sc_kll_kind kind, const sc_kll_config *cfg); /* EINVAL, ENOMEM */
void sc_kll_destroy(sc_kll *sk);
void sc_kll_reset(sc_kll *sk);                  /* empty again, keeps k, rng and allocation */
int sc_kll_copy(sc_kll **out, const sc_kll *sk); /* deep copy (including the rng state) */

/* ---- updates (return 0 or SC_ENOMEM) ---- */
int sc_kll_update(sc_kll *sk, double x);
/* Batch from a column; validity is an Arrow bitmap (bit set = valid) or NULL; bit_offset is
 * the column's offset in bits into validity. */
int sc_kll_update_f64(sc_kll *sk, const double *x, size_t n, const uint8_t *validity, size_t bit_offset);
int sc_kll_update_f32(sc_kll *sk, const float *x, size_t n, const uint8_t *validity, size_t bit_offset);
int sc_kll_update_i64(sc_kll *sk, const int64_t *x, size_t n, const uint8_t *validity, size_t bit_offset);
/* dst := dst ∪ src. SC_ETYPE if the kinds differ. src is not modified. */
int sc_kll_merge(sc_kll *dst, const sc_kll *src);

/* ---- accessors ---- */
static inline uint64_t sc_kll_n(const sc_kll *sk) { return sk->n; }
static inline int sc_kll_is_empty(const sc_kll *sk) { return sk->n == 0; }
static inline int sc_kll_is_estimation_mode(const sc_kll *sk) { return sk->num_levels > 1; }
static inline uint32_t sc_kll_num_retained(const sc_kll *sk) {
    return sk->levels[sk->num_levels] - sk->levels[0];
}
double sc_kll_min(const sc_kll *sk); /* NaN when empty */
double sc_kll_max(const sc_kll *sk); /* NaN when empty */
/* eps(k) above; pmf != 0 for the double-sided error. */
double sc_kll_rank_error_for_k(uint32_t k, int pmf);
double sc_kll_normalized_rank_error(const sc_kll *sk, int pmf); /* uses min_k */

/* ---- queries (const; NaN results on an empty sketch; EINVAL on a rank outside [0, 1]) ----
 * rank(x):  inclusive => weight of retained items <= x over n; exclusive => items < x.
 * quantile(r): w = inclusive ? ceil(r*n) : floor(r*n); the smallest retained item whose
 *   cumulative weight is >= w (inclusive) or > w (exclusive); the largest item if none.
 * cdf(splits[m]) fills m+1 values: rank(split_i) then 1; pmf: successive differences.
 * splits must be strictly increasing and not NaN (else EINVAL). */
int sc_kll_ranks(const sc_kll *sk, const double *x, size_t m, int inclusive, double *out);
int sc_kll_quantiles(const sc_kll *sk, const double *ranks, size_t m, int inclusive, double *out);
int sc_kll_cdf(const sc_kll *sk, const double *splits, size_t m, int inclusive, double *out);
int sc_kll_pmf(const sc_kll *sk, const double *splits, size_t m, int inclusive, double *out);

/* ---- serialization ---- */
size_t sc_kll_serialized_size(const sc_kll *sk);
/* SC_EINVAL if cap is too small; *written gets the byte count. */
int sc_kll_serialize(const sc_kll *sk, uint8_t *buf, size_t cap, size_t *written);
/* seed as in sc_kll_config (the bytes carry no rng state). SC_EFORMAT on malformed input. */
int sc_kll_deserialize(sc_kll **out, sc_kll_kind kind, const uint8_t *buf, size_t len, uint64_t seed);

/* ---- debug ---- */
/* 0 if every invariant holds (levels monotone, capacities, sorted levels >= 1, total weight
 * equals n, min <= items <= max), else SC_EINTERNAL. */
int sc_kll_check(const sc_kll *sk);

/* ---- concurrent framework (config: const sc_kll_config *, may be NULL; hint() is 0) ----
 * summarize() publishes: [0] n, [1] min and [2] max as IEEE-754 bits (NaN when empty),
 * [3] num_retained, [4] min_k, [5] k; finalize is NULL (nothing to canonicalise). */
extern const sc_sketch_vtable sc_kll_double_vtable;
extern const sc_sketch_vtable sc_kll_float_vtable;

#endif
