/* HyperLogLog (HLL_8): distinct counting in 2^lg_k one-byte registers, DataSketches compatible.
 *
 * Hashing as DataSketches' hll_sketch: MurmurHash3_x64_128 with seed 9001 over the item's bytes
 * (same item-to-bytes rules as Θ: int64 little-endian, canonical double, UTF-8; the empty
 * string is not an update). The coupon of a hash is (value << 26) | (h1 & 0x3ffffff) with
 * value = min(nlz(h2), 62) + 1; register slot = h1 & (k - 1), register = max(register, value).
 *
 * Modes (as DataSketches' HLL): a sketch starts in coupon mode, holding its distinct coupons
 * (a list of up to 7, then a hash set of up to 3/4 of 2^(lg_k-3); below lg_k 8 the list only).
 * There the estimate is the coupon count: exact but for collisions in the 2^26 address space
 * (relative error 0.409 / 2^13 per standard deviation, DataSketches' coupon RSE), so small
 * cardinalities never suffer two items sharing a register. One coupon more and the sketch
 * moves to HLL mode: the coupons replayed into the registers, the HIP accumulator starting at
 * the coupon count. Memory follows the mode: up to 7 coupons live in the sketch itself, a set
 * grows from 32 slots by doubling, and only HLL mode allocates registers (freeing the set),
 * so a per-key sketch of a small key takes about 100 bytes, not 2^lg_k.
 *
 * Estimate in HLL mode: the HIP (historic inverse probability) accumulator while the sketch
 * was built by updates only - the same accumulator DataSketches keeps, so an image of ours
 * loads there with the same estimate. After a union of HLL-mode sketches (out-of-order) the
 * HIP is void and the estimate comes from the registers: the raw HLL estimate
 * alpha_m m^2 / sum 2^-M[j], with linear counting m ln(m / zeros) below 2.5 m (own method;
 * DataSketches uses interpolation tables there). A union stays in coupon mode while the
 * coupons' union fits, so its answer never depends on the order of its inputs.
 * Error bound: RSE = 0.8326 / sqrt(k) (HIP, = sqrt(ln 2)) or 1.04 / sqrt(k) (registers);
 * bounds at z = 1, 2, 3: estimate / (1 +- z RSE), the lower one never below the coupon count
 * (coupon mode) or the number of non-zero registers (HLL mode). DataSketches maps a coupon
 * count through an interpolation table, so in coupon mode its estimate exceeds ours by less
 * than the coupon RSE.
 *
 * Thread-safety: not thread-safe; distinct sketches are independent.
 *
 * Serialization: DataSketches HLL, serial version 1, family 7, little-endian. Written: the
 * 8-byte empty LIST image when empty; coupon mode as a compact LIST (preamble ints 2, the count
 * in byte 6, coupons from byte 8) or SET image (preamble ints 3, lg_arr in byte 4, the count
 * in bytes 8-11, coupons from byte 12), the coupons ascending; HLL mode with target type
 * HLL_8:
 *   byte 0 preamble ints = 10, 1 serial version = 1, 2 family = 7, 3 lg_k, 4 lg_arr = 0,
 *   5 flags (4 empty, 8 compact, 16 out-of-order), 6 cur_min = 0,
 *   7 mode = (tgt_type HLL_8 = 2) << 2 | (cur_mode HLL = 2),
 *   8-15 hip accumulator, 16-23 kxq0, 24-31 kxq1 (doubles), 32-35 number of zero registers,
 *   36-39 aux count = 0, then 2^lg_k register bytes.
 * Read: LIST and SET (coupons replayed), HLL_8, HLL_6 and HLL_4 (with its aux exceptions).
 */
#ifndef SC_HLL_H
#define SC_HLL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SC_HLL_MIN_LG_K 4
#define SC_HLL_MAX_LG_K 21
#define SC_HLL_SEED 9001ULL

typedef struct sc_hll sc_hll;

int sc_hll_create(sc_hll **out, uint8_t lg_k);
void sc_hll_destroy(sc_hll *h);
void sc_hll_reset(sc_hll *h);
int sc_hll_copy(sc_hll **out, const sc_hll *h);
/* a coupon as defined above (exposed for tests and for replaying DataSketches coupon lists) */
/* updates return SC_OK, or SC_ENOMEM when the sketch could not grow (the item is not in it;
 * the sketch is otherwise unchanged) */
int sc_hll_update_coupon(sc_hll *h, uint32_t coupon);
int sc_hll_update_i64(sc_hll *h, int64_t v);
int sc_hll_update_f64(sc_hll *h, double v);
int sc_hll_update_bytes(sc_hll *h, const void *data, size_t len);
/* columns: validity is an Arrow bitmap (bit i at valid_off + i; NULL = all valid) */
int sc_hll_update_i64_array(sc_hll *h, const int64_t *v, size_t n, const uint8_t *validity,
                            int64_t valid_off);
int sc_hll_update_f64_array(sc_hll *h, const double *v, size_t n, const uint8_t *validity,
                            int64_t valid_off);
int sc_hll_update_str32_array(sc_hll *h, const int32_t *offsets, const uint8_t *data, size_t n,
                              const uint8_t *validity, int64_t valid_off);
int sc_hll_update_str64_array(sc_hll *h, const int64_t *offsets, const uint8_t *data, size_t n,
                              const uint8_t *validity, int64_t valid_off);

uint8_t sc_hll_lg_k(const sc_hll *h);
bool sc_hll_is_empty(const sc_hll *h);
bool sc_hll_is_out_of_order(const sc_hll *h);
double sc_hll_estimate(const sc_hll *h);
double sc_hll_lower_bound(const sc_hll *h, int num_std);
double sc_hll_upper_bound(const sc_hll *h, int num_std);
bool sc_hll_is_coupon_mode(const sc_hll *h);
/* the bytes the sketch holds: its struct (with room for 8 coupons), a grown coupon table,
 * or in HLL mode its 2^lg_k registers */
size_t sc_hll_footprint(const sc_hll *h);
/* the 2^lg_k register values into out (coupon mode: the registers its coupons would set) */
void sc_hll_registers(const sc_hll *h, uint8_t *out);

/* dst := dst ∪ src. dst's lg_k must be <= src's (src is folded down); SC_EINVAL otherwise */
int sc_hll_merge(sc_hll *dst, const sc_hll *src);

size_t sc_hll_serialized_size(const sc_hll *h);
int sc_hll_serialize(const sc_hll *h, uint8_t *buf, size_t cap);
int sc_hll_deserialize(sc_hll **out, const uint8_t *buf, size_t len);

/* the concurrent-framework vtable (config: const uint8_t *lg_k; never eager: n is 0) */
struct sc_sketch_vtable;
extern const struct sc_sketch_vtable sc_hll_vtable;

#endif
