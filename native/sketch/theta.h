/* Θ (theta) sketch: distinct counting, mergeable, Apache DataSketches compatible.
 *
 * Algorithm: the QuickSelect update sketch (Rinberg et al. section 7.1; DataSketches'
 * HeapQuickSelectSketch). Items are hashed with MurmurHash3_x64_128 (seed 9001 by default);
 * hash = h1 >> 1, a 63-bit value. theta starts at MAX = 2^63 - 1. A hash h is kept when
 * 0 < h < theta. The table holds up to T = floor(15/16 * 2k) hashes (k = 2^lg_k); on
 * exceeding T it keeps the k smallest and sets theta to the (k+1)-th smallest. The retained
 * set and theta depend only on the hash sequence, so for the same items in the same order
 * the state, estimate and compact bytes equal DataSketches' update_theta_sketch(lg_k).
 *
 * Estimate: retained / (theta / MAX); exact (= the number of distinct items) while theta = MAX,
 * i.e. up to T distinct items.
 * Error bound: relative standard error RSE <= 1 / sqrt(k - 1) in estimation mode; the bounds
 * at z = 1, 2, 3 standard deviations come from the binomial sampling model (retained count
 * n ~ Binomial(N, p), p = theta / MAX): Poisson (Garwood) exact limits when n < 120, the
 * continuity-corrected normal approximation above; one-sided tail mass 0.1587 / 0.0228 /
 * 0.00135. Within ~1% of DataSketches' bounds, not bit-equal to them (own method).
 *
 * Thread-safety: a sketch is not thread-safe; distinct sketches are independent. Read-only
 * functions on a compact sketch may run concurrently. For concurrent ingestion use the
 * concurrent framework (sc_theta_vtable + sc_theta_conc_* below).
 *
 * Serialization: DataSketches compact Θ, serial version 3, family 3 (COMPACT), little-endian:
 *   byte 0 preamble longs (1: empty or single exact entry, 2: exact, 3: estimation)
 *   byte 1 serial version = 3, byte 2 family = 3, bytes 3-4 = 0,
 *   byte 5 flags (2 read-only, 4 empty, 8 compact, 16 ordered), bytes 6-7 seed hash,
 *   [pre >= 2] bytes 8-11 retained count, bytes 12-15 = 0, [pre = 3] bytes 16-23 theta,
 *   then the retained hashes as uint64 (ascending when ordered).
 * Deserialization reads serial version 3 (written by DataSketches C++/Java/Python, and here);
 * serial version 4 (compressed) and the legacy versions 1-2 give SC_EUNSUPPORTED.
 */
#ifndef SC_THETA_H
#define SC_THETA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sketch/concurrent.h"

#define SC_THETA_MAX 0x7fffffffffffffffULL
#define SC_THETA_DEFAULT_SEED 9001ULL
#define SC_THETA_MIN_LG_K 5
#define SC_THETA_MAX_LG_K 26
#define SC_THETA_SERIAL_VERSION 3

typedef struct sc_theta sc_theta;  /* update sketch */

typedef struct sc_theta_compact {  /* read-only sketch: a set-operation result or bytes */
    uint64_t theta;
    uint64_t *entries;
    uint32_t n;
    uint16_t seed_hash;
    bool empty;
    bool ordered;
} sc_theta_compact;

/* config for vt->create: buffer = 0 builds a QuickSelect sketch, buffer > 0 a plain list of
 * up to `buffer` hashes (a concurrent writer's local buffer) */
typedef struct sc_theta_config {
    uint8_t lg_k;
    uint64_t seed;
    uint32_t buffer;
} sc_theta_config;

/* ---- update sketch ---- */
int sc_theta_create(sc_theta **out, uint8_t lg_k, uint64_t seed);
void sc_theta_destroy(sc_theta *s);
void sc_theta_reset(sc_theta *s);
int sc_theta_copy(sc_theta **out, const sc_theta *s);
/* hash = h1 >> 1 of the item's bytes; marks the sketch non-empty even if screened out */
int sc_theta_update_hash(sc_theta *s, uint64_t hash);
int sc_theta_update_i64(sc_theta *s, int64_t v);
int sc_theta_update_f64(sc_theta *s, double v);
int sc_theta_update_bytes(sc_theta *s, const void *data, size_t len); /* len 0: no update */
/* columns: validity is an Arrow bitmap (bit i at valid_off + i; NULL = all valid); nulls skip */
int sc_theta_update_i64_array(sc_theta *s, const int64_t *v, size_t n, const uint8_t *validity,
                              int64_t valid_off);
int sc_theta_update_f64_array(sc_theta *s, const double *v, size_t n, const uint8_t *validity,
                              int64_t valid_off);
/* Arrow utf8 / binary (offsets32) and large_utf8 / large_binary (offsets64) */
int sc_theta_update_str32_array(sc_theta *s, const int32_t *offsets, const uint8_t *data,
                                size_t n, const uint8_t *validity, int64_t valid_off);
int sc_theta_update_str64_array(sc_theta *s, const int64_t *offsets, const uint8_t *data,
                                size_t n, const uint8_t *validity, int64_t valid_off);
/* DataSketches trim(): if more than k retained, keep the k smallest */
int sc_theta_trim(sc_theta *s);
uint32_t sc_theta_num_retained(const sc_theta *s);
uint64_t sc_theta_theta64(const sc_theta *s);
bool sc_theta_is_empty(const sc_theta *s);
uint8_t sc_theta_lg_k(const sc_theta *s);
uint64_t sc_theta_seed(const sc_theta *s);
double sc_theta_estimate(const sc_theta *s);
double sc_theta_lower_bound(const sc_theta *s, int num_std);
double sc_theta_upper_bound(const sc_theta *s, int num_std);
/* the compact form (copies the retained hashes; sorted ascending when ordered) */
int sc_theta_compact_of(sc_theta_compact **out, const sc_theta *s, bool ordered);

/* ---- estimates from (retained, theta, empty): shared by every sketch form ---- */
double sc_theta_estimate_of(uint32_t n, uint64_t theta, bool empty);
double sc_theta_lower_bound_of(uint32_t n, uint64_t theta, bool empty, int num_std);
double sc_theta_upper_bound_of(uint32_t n, uint64_t theta, bool empty, int num_std);

/* ---- compact sketch ---- */
void sc_theta_compact_destroy(sc_theta_compact *c);
int sc_theta_compact_copy(sc_theta_compact **out, const sc_theta_compact *c);
size_t sc_theta_compact_serialized_size(const sc_theta_compact *c);
/* writes sc_theta_compact_serialized_size(c) bytes into buf; SC_EINVAL if cap is smaller */
int sc_theta_compact_serialize(const sc_theta_compact *c, uint8_t *buf, size_t cap);
/* reads serial version 3; checks the seed hash against seed's */
int sc_theta_compact_deserialize(sc_theta_compact **out, const uint8_t *buf, size_t len,
                                 uint64_t seed);

/* ---- set operations (DataSketches semantics; every input must share the seed) ---- */
/* union of n sketches with nominal lg_k: the k smallest hashes below min theta */
int sc_theta_union(sc_theta_compact **out, const sc_theta_compact *const *in, size_t n,
                   uint8_t lg_k, uint64_t seed, bool ordered);
int sc_theta_intersection(sc_theta_compact **out, const sc_theta_compact *const *in, size_t n,
                          uint64_t seed, bool ordered);
int sc_theta_a_not_b(sc_theta_compact **out, const sc_theta_compact *a,
                     const sc_theta_compact *b, uint64_t seed, bool ordered);
/* Jaccard similarity |A∩B| / |A∪B|: out = {lower, estimate, upper} (bounds at 2 std devs) */
int sc_theta_jaccard(double out[3], const sc_theta_compact *a, const sc_theta_compact *b,
                     uint64_t seed);

/* ---- concurrent Θ (Rinberg et al. Algorithm 1 on the generic framework) ---- */
extern const sc_sketch_vtable sc_theta_vtable;
/* summary words published by sc_theta_vtable.summarize */
enum { SC_THETA_SUM_RETAINED = 0, SC_THETA_SUM_THETA = 1, SC_THETA_SUM_EMPTY = 2 };
/* create a concurrent Θ: global QuickSelect sketch (lg_k, seed), N writers with list buffers of
 * b hashes; eager_limit 0 = default: eager until the global sketch first leaves exact mode */
int sc_theta_conc_create(sc_concurrent **out, uint8_t lg_k, uint64_t seed, uint32_t writers,
                         uint32_t buffer, uint64_t eager_limit);
/* writer w ingests a column (GIL-free; pre-filters with the global theta hint) */
int sc_theta_conc_update_i64_array(sc_concurrent *c, uint32_t w, const int64_t *v, size_t n,
                                   const uint8_t *validity, int64_t valid_off);
int sc_theta_conc_update_f64_array(sc_concurrent *c, uint32_t w, const double *v, size_t n,
                                   const uint8_t *validity, int64_t valid_off);
int sc_theta_conc_update_str32_array(sc_concurrent *c, uint32_t w, const int32_t *offsets,
                                     const uint8_t *data, size_t n, const uint8_t *validity,
                                     int64_t valid_off);
int sc_theta_conc_update_str64_array(sc_concurrent *c, uint32_t w, const int64_t *offsets,
                                     const uint8_t *data, size_t n, const uint8_t *validity,
                                     int64_t valid_off);
/* snapshot of the global sketch as a compact sketch (ordered) */
int sc_theta_conc_snapshot(sc_concurrent *c, sc_theta_compact **out);

#endif
