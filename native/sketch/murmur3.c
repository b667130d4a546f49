/* MurmurHash3_x64_128: see murmur3.h for the contract. */
#include "sketch/murmur3.h"

static inline uint64_t load_le64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, sizeof v); /* little-endian host asserted in the header */
    return v;
}

sc_hash128 sc_murmur3_128(const void *data, size_t len, uint64_t seed) {
    const uint8_t *p = (const uint8_t *)data;
    const size_t nblocks = len / 16;
    uint64_t h1 = seed, h2 = seed;

    /* body: 16-byte blocks, two 64-bit lanes */
    for (size_t i = 0; i < nblocks; i++) {
        uint64_t k1 = load_le64(p + 16 * i);
        uint64_t k2 = load_le64(p + 16 * i + 8);
        k1 *= SC_MM3_C1;
        k1 = sc_mm3_rotl(k1, 31);
        k1 *= SC_MM3_C2;
        h1 ^= k1;
        h1 = sc_mm3_rotl(h1, 27);
        h1 += h2;
        h1 = h1 * 5 + 0x52dce729;
        k2 *= SC_MM3_C2;
        k2 = sc_mm3_rotl(k2, 33);
        k2 *= SC_MM3_C1;
        h2 ^= k2;
        h2 = sc_mm3_rotl(h2, 31);
        h2 += h1;
        h2 = h2 * 5 + 0x38495ab5;
    }

    /* tail: up to 15 bytes; bytes 0..7 feed k1, bytes 8..14 feed k2 (little-endian) */
    const uint8_t *tail = p + 16 * nblocks;
    const size_t rem = len & 15;
    uint64_t k1 = 0, k2 = 0;
    for (size_t i = rem; i > 8; i--) k2 |= (uint64_t)tail[i - 1] << (8 * (i - 9));
    for (size_t i = rem < 8 ? rem : 8; i > 0; i--) k1 |= (uint64_t)tail[i - 1] << (8 * (i - 1));
    if (rem > 8) {
        k2 *= SC_MM3_C2;
        k2 = sc_mm3_rotl(k2, 33);
        k2 *= SC_MM3_C1;
        h2 ^= k2;
    }
    if (rem > 0) {
        k1 *= SC_MM3_C1;
        k1 = sc_mm3_rotl(k1, 31);
        k1 *= SC_MM3_C2;
        h1 ^= k1;
    }

    /* finalisation */
    h1 ^= (uint64_t)len;
    h2 ^= (uint64_t)len;
    h1 += h2;
    h2 += h1;
    h1 = sc_mm3_fmix(h1);
    h2 = sc_mm3_fmix(h2);
    h1 += h2;
    h2 += h1;
    sc_hash128 out = {h1, h2};
    return out;
}
