/* MurmurHash3_x64_128 (Austin Appleby's public-domain algorithm), written for streamcell from
 * the published algorithm description, with a 64-bit seed as Apache DataSketches uses it
 * (both 64-bit lanes start at the seed).
 *
 * Contract: pure functions, no state, safe from any thread. Output lanes h1, h2 are the
 * little-endian reading of the 128-bit digest, so they agree with DataSketches' HashState
 * {h1, h2} on every platform this code supports (little-endian only; checked at compile time).
 *
 * How DataSketches turns items into bytes (and so how streamcell must, to agree bit for bit):
 *   int64  -> its 8 little-endian bytes            (Python int, Arrow/NumPy int64)
 *   double -> canonicalised (-0.0 -> +0.0, any NaN -> 0x7ff8000000000000), then the 8 bytes
 *             of that bit pattern                   (Python float, float64 columns)
 *   string -> its UTF-8 bytes; the empty string is not an update at all.
 */
#ifndef SC_MURMUR3_H
#define SC_MURMUR3_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "streamcell sketches assume a little-endian host"
#endif

#define SC_MM3_C1 0x87c37b91114253d5ULL
#define SC_MM3_C2 0x4cf5ad432745937fULL

typedef struct sc_hash128 {
    uint64_t h1;
    uint64_t h2;
} sc_hash128;

/* Digest of len bytes at data with the given seed. */
sc_hash128 sc_murmur3_128(const void *data, size_t len, uint64_t seed);

static inline uint64_t sc_mm3_rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

static inline uint64_t sc_mm3_fmix(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ULL;
    k ^= k >> 33;
    return k;
}

/* Fast path: the digest of exactly 8 bytes (one int64 key) - what the column loops call.
 * Equal to sc_murmur3_128(&key, 8, seed). Only the tail step runs: k1 holds all 8 bytes. */
static inline sc_hash128 sc_murmur3_u64(uint64_t key, uint64_t seed) {
    uint64_t h1 = seed, h2 = seed;
    uint64_t k1 = key * SC_MM3_C1;
    k1 = sc_mm3_rotl(k1, 31);
    k1 *= SC_MM3_C2;
    h1 ^= k1;
    h1 ^= 8;
    h2 ^= 8;
    h1 += h2;
    h2 += h1;
    h1 = sc_mm3_fmix(h1);
    h2 = sc_mm3_fmix(h2);
    h1 += h2;
    h2 += h1;
    sc_hash128 out = {h1, h2};
    return out;
}

/* The first lane only, for 8-byte keys (Θ and HLL use h1 alone). */
static inline uint64_t sc_murmur3_u64_h1(uint64_t key, uint64_t seed) {
    return sc_murmur3_u64(key, seed).h1;
}

/* DataSketches' canonical double bits: -0.0 and +0.0 hash alike, every NaN hashes alike. */
static inline uint64_t sc_canonical_double_bits(double v) {
    uint64_t bits;
    if (v == 0.0) {
        v = 0.0;
    } else if (v != v) {
        return 0x7ff8000000000000ULL;
    }
    memcpy(&bits, &v, sizeof bits);
    return bits;
}

/* DataSketches' 16-bit seed hash, stored in every serialized Θ image: the low 16 bits of h1
 * of the seed's 8 little-endian bytes, hashed with seed 0. */
static inline uint16_t sc_seed_hash(uint64_t seed) {
    return (uint16_t)(sc_murmur3_u64(seed, 0).h1 & 0xffffu);
}

#endif
