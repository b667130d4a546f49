/* HLL_8: see hll.h for the algorithm, the error bound, the contract and the format. */
#include "sketch/hll.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sc_status.h"
#include "sketch/murmur3.h"
#include "sketch/concurrent.h"

#define KEY_BITS_26 26
#define KEY_MASK_26 ((1u << KEY_BITS_26) - 1)
#define HIP_RSE 0.8325546111576977   /* sqrt(ln 2) */
#define NON_HIP_RSE 1.03896           /* sqrt(3 ln 2 - 1) */
#define COUPON_RSE (0.409 / 8192.0)   /* coupon mode: the 26-bit address space's collisions */

enum { MODE_LIST = 0, MODE_SET = 1, MODE_HLL = 2 };
enum { TGT_HLL4 = 0, TGT_HLL6 = 1, TGT_HLL8 = 2 };
enum { FLAG_EMPTY = 4, FLAG_COMPACT = 8, FLAG_OOO = 16 };
#define HLL_PREINTS 10
#define HLL_HEADER 40
#define LIST_MAX 7 /* a coupon list holds up to 7; the 8th makes a set (or HLL below lg_k 8) */
#define LG_LIST 3  /* the list: 8 slots inside the sketch */
#define LG_SET 5   /* a set starts at 32 slots and doubles, as DataSketches' does */

struct sc_hll {
    double hip, kxq0, kxq1;
    uint32_t num_zeros;
    uint8_t lg_k;
    bool ooo;
    bool coupons; /* coupon mode: the distinct coupons in `coup`, no registers */
    uint8_t lg_tab; /* coupon table: 2^lg_tab slots, 0 = free (a coupon is never 0) */
    uint32_t ncoup;
    uint8_t *regs;  /* HLL mode: the 2^lg_k registers; NULL in coupon mode */
    uint32_t *coup; /* coupon mode: the table (`list` up to 8 slots, then the heap); else NULL */
    uint32_t list[1u << LG_LIST];
};
/* Memory follows the mode, as in DataSketches: a sketch of a few items is its struct (the
 * list is inside it), a set grows from 32 slots, and only HLL mode holds registers (the
 * table is freed then). Per-key sketches of small keys stay small: 88 bytes, not 2^lg_k. */

static inline double inv_pow2(unsigned v) { return ldexp(1.0, -(int)v); }

/* the largest coupon table: 8 slots below lg_k 8, else 2^(lg_k-3) (DataSketches' largest
 * coupon set); the sketch leaves coupon mode when that would hold more than 3/4 of it (7
 * below lg_k 8), and a smaller table grows when it would */
static inline uint8_t table_lg(uint8_t lg_k) { return lg_k < 8 ? LG_LIST : (uint8_t)(lg_k - 3); }
static inline uint32_t table_max(uint8_t lg_tab) {
    return lg_tab == LG_LIST ? LIST_MAX : (3u << lg_tab) / 4;
}

static void free_table(sc_hll *h) {
    if (h->coup != h->list) free(h->coup);
    h->coup = NULL;
}

static inline uint32_t coupon_of(sc_hash128 h) {
    unsigned lz = h.h2 ? (unsigned)__builtin_clzll(h.h2) : 64u;
    uint32_t value = (lz > 62 ? 62 : lz) + 1;
    return (value << KEY_BITS_26) | (uint32_t)(h.h1 & KEY_MASK_26);
}

/* a register raised without the HIP accumulator (replays); kxq and the zero count follow */
static inline void raise_register(sc_hll *h, uint32_t slot, uint8_t v) {
    uint8_t cur = h->regs[slot];
    if (v <= cur) return;
    h->regs[slot] = v;
    if (cur < 32) h->kxq0 -= inv_pow2(cur);
    else h->kxq1 -= inv_pow2(cur);
    if (v < 32) h->kxq0 += inv_pow2(v);
    else h->kxq1 += inv_pow2(v);
    if (cur == 0) h->num_zeros--;
}

static inline void set_register(sc_hll *h, uint32_t slot, uint8_t v) {
    if (v <= h->regs[slot]) return;
    /* HIP: accumulate before kxq changes (DataSketches' incremental update) */
    h->hip += (double)(1u << h->lg_k) / (h->kxq0 + h->kxq1);
    raise_register(h, slot, v);
}

/* the register statistics of all-zero registers */
static void zero_counts(sc_hll *h) {
    h->kxq0 = (double)(1u << h->lg_k);
    h->kxq1 = 0.0;
    h->num_zeros = 1u << h->lg_k;
}

static void clear_registers(sc_hll *h) {
    memset(h->regs, 0, 1u << h->lg_k);
    zero_counts(h);
}

/* coupon mode -> HLL mode: the coupons replayed into the registers (new, or those a reset
 * kept), the table freed, and the HIP accumulator starts at the coupon count (as DataSketches
 * starts it at the coupon estimate). On SC_ENOMEM the sketch is unchanged. */
static void promote_into(sc_hll *h, uint8_t *regs) {
    const uint32_t mask = (1u << h->lg_k) - 1, slots = 1u << h->lg_tab;
    h->regs = regs;
    clear_registers(h);
    for (uint32_t j = 0; j < slots; j++) {
        uint32_t c = h->coup[j];
        if (c) raise_register(h, c & mask, (uint8_t)(c >> KEY_BITS_26));
    }
    h->hip = (double)h->ncoup;
    h->coupons = false;
    h->ncoup = 0;
    free_table(h);
}

static inline uint8_t *registers_for(const sc_hll *h) {
    return h->regs ? h->regs : malloc(1u << h->lg_k);
}

static int promote(sc_hll *h) {
    uint8_t *regs = registers_for(h);
    if (!regs) return SC_ENOMEM;
    promote_into(h, regs);
    return SC_OK;
}

/* open addressing with linear probing: the slot holding c, or the free slot where it goes
 * (a table is at most 3/4 full, the list 7 of 8, so there is one) */
static inline uint32_t find_slot(const uint32_t *tab, uint8_t lg_tab, uint32_t c) {
    const uint32_t mask = (1u << lg_tab) - 1;
    uint32_t j = (c * 0x9e3779b1u) >> (32 - lg_tab);
    while (tab[j] && tab[j] != c) j = (j + 1) & mask;
    return j;
}

/* the next table size up, the coupons rehashed into it (SC_ENOMEM: unchanged) */
static int grow(sc_hll *h) {
    uint8_t lg = h->lg_tab == LG_LIST ? LG_SET : (uint8_t)(h->lg_tab + 1);
    uint32_t *tab = calloc((size_t)1 << lg, sizeof *tab);
    if (!tab) return SC_ENOMEM;
    for (uint32_t j = 0; j < (1u << h->lg_tab); j++)
        if (h->coup[j]) tab[find_slot(tab, lg, h->coup[j])] = h->coup[j];
    free_table(h);
    h->coup = tab;
    h->lg_tab = lg;
    return SC_OK;
}

static int insert_coupon(sc_hll *h, uint32_t c) {
    uint32_t j = find_slot(h->coup, h->lg_tab, c);
    if (h->coup[j] == c) return SC_OK;
    if (h->ncoup == table_max(h->lg_tab)) { /* full: make room first */
        if (h->lg_tab == table_lg(h->lg_k)) { /* one coupon more than coupon mode holds: */
            uint8_t *regs = registers_for(h);      /* it goes in (into the free slot), */
            if (!regs) return SC_ENOMEM;            /* and they all go to the registers */
            h->coup[j] = c;
            h->ncoup++;
            promote_into(h, regs);
            return SC_OK;
        }
        int rc = grow(h);
        if (rc) return rc;
        j = find_slot(h->coup, h->lg_tab, c);
    }
    h->coup[j] = c;
    h->ncoup++;
    return SC_OK;
}

int sc_hll_update_coupon(sc_hll *h, uint32_t coupon) {
    if (!(coupon >> KEY_BITS_26)) return SC_OK; /* value 0: no item makes it (nor a free slot) */
    if (h->coupons) return insert_coupon(h, coupon);
    set_register(h, coupon & ((1u << h->lg_k) - 1), (uint8_t)(coupon >> KEY_BITS_26));
    return SC_OK;
}

static inline int update_hash(sc_hll *h, sc_hash128 hh) { return sc_hll_update_coupon(h, coupon_of(hh)); }

int sc_hll_create(sc_hll **out, uint8_t lg_k) {
    *out = NULL;
    if (lg_k < SC_HLL_MIN_LG_K || lg_k > SC_HLL_MAX_LG_K) return SC_EINVAL;
    sc_hll *h = calloc(1, sizeof *h);
    if (!h) return SC_ENOMEM;
    h->lg_k = lg_k;
    h->coup = h->list;
    sc_hll_reset(h);
    *out = h;
    return SC_OK;
}

void sc_hll_destroy(sc_hll *h) {
    if (!h) return;
    free(h->regs);
    free_table(h);
    free(h);
}

/* back to an empty list (allocates nothing, so cannot fail): frees a grown table, keeps
 * registers for the next promotion (a reused sketch, such as a concurrent sketch's buffer,
 * would otherwise allocate and fault them in again each time it fills) */
void sc_hll_reset(sc_hll *h) {
    free_table(h);
    h->coup = h->list;
    h->lg_tab = LG_LIST;
    memset(h->list, 0, sizeof h->list);
    zero_counts(h);
    h->hip = 0.0;
    h->ooo = false;
    h->coupons = true;
    h->ncoup = 0;
}

int sc_hll_copy(sc_hll **out, const sc_hll *h) {
    *out = NULL;
    sc_hll *c = malloc(sizeof *c);
    if (!c) return SC_ENOMEM;
    *c = *h;
    c->regs = NULL;
    c->coup = h->coup == h->list ? c->list : NULL;
    const bool regs = !h->coupons; /* registers a reset kept are not copied */
    if (regs && (c->regs = malloc(1u << h->lg_k))) memcpy(c->regs, h->regs, 1u << h->lg_k);
    if (h->coup && h->coup != h->list && (c->coup = malloc(sizeof(uint32_t) << h->lg_tab)))
        memcpy(c->coup, h->coup, sizeof(uint32_t) << h->lg_tab);
    if ((regs && !c->regs) || (h->coup && !c->coup)) {
        sc_hll_destroy(c);
        return SC_ENOMEM;
    }
    *out = c;
    return SC_OK;
}

int sc_hll_update_i64(sc_hll *h, int64_t v) {
    return update_hash(h, sc_murmur3_u64((uint64_t)v, SC_HLL_SEED));
}
int sc_hll_update_f64(sc_hll *h, double v) {
    return update_hash(h, sc_murmur3_u64(sc_canonical_double_bits(v), SC_HLL_SEED));
}
int sc_hll_update_bytes(sc_hll *h, const void *data, size_t len) {
    return len ? update_hash(h, sc_murmur3_128(data, len, SC_HLL_SEED)) : SC_OK;
}

static inline bool valid_at(const uint8_t *validity, int64_t i) {
    return !validity || ((validity[i >> 3] >> (i & 7)) & 1);
}

#define HLL_LOOP(SKIP, ITEM_HASH)                        \
    do {                                                 \
        for (size_t i = 0; i < n; i++) {                 \
            if (SKIP(i)) continue;                       \
            int rc_ = update_hash(h, ITEM_HASH(i));      \
            if (rc_) return rc_;                         \
        }                                                \
        return SC_OK;                                    \
    } while (0)
#define NULL_SKIP(i) (!valid_at(validity, valid_off + (int64_t)(i)))
#define STR_SKIP(i) (NULL_SKIP(i) || offsets[(i) + 1] == offsets[i])
#define I64_HASH(i) sc_murmur3_u64((uint64_t)v[i], SC_HLL_SEED)
#define F64_HASH(i) sc_murmur3_u64(sc_canonical_double_bits(v[i]), SC_HLL_SEED)
#define STR_HASH(i) sc_murmur3_128(data + offsets[i], (size_t)(offsets[(i) + 1] - offsets[i]), SC_HLL_SEED)

int sc_hll_update_i64_array(sc_hll *h, const int64_t *v, size_t n, const uint8_t *validity,
                            int64_t valid_off) {
    HLL_LOOP(NULL_SKIP, I64_HASH);
}
int sc_hll_update_f64_array(sc_hll *h, const double *v, size_t n, const uint8_t *validity,
                            int64_t valid_off) {
    HLL_LOOP(NULL_SKIP, F64_HASH);
}
int sc_hll_update_str32_array(sc_hll *h, const int32_t *offsets, const uint8_t *data, size_t n,
                              const uint8_t *validity, int64_t valid_off) {
    HLL_LOOP(STR_SKIP, STR_HASH);
}
int sc_hll_update_str64_array(sc_hll *h, const int64_t *offsets, const uint8_t *data, size_t n,
                              const uint8_t *validity, int64_t valid_off) {
    HLL_LOOP(STR_SKIP, STR_HASH);
}

/* ---- queries ---- */

uint8_t sc_hll_lg_k(const sc_hll *h) { return h->lg_k; }
bool sc_hll_is_empty(const sc_hll *h) {
    return h->coupons ? h->ncoup == 0 : h->num_zeros == (1u << h->lg_k);
}
bool sc_hll_is_out_of_order(const sc_hll *h) { return h->ooo; }
bool sc_hll_is_coupon_mode(const sc_hll *h) { return h->coupons; }

size_t sc_hll_footprint(const sc_hll *h) {
    size_t n = sizeof *h;
    if (h->regs) n += (size_t)1 << h->lg_k;
    if (h->coup && h->coup != h->list) n += sizeof(uint32_t) << h->lg_tab;
    return n;
}

void sc_hll_registers(const sc_hll *h, uint8_t *out) {
    const uint32_t k = 1u << h->lg_k;
    if (!h->coupons) {
        memcpy(out, h->regs, k);
        return;
    }
    memset(out, 0, k);
    for (uint32_t j = 0; j < (1u << h->lg_tab); j++) {
        uint32_t c = h->coup[j];
        uint8_t v = (uint8_t)(c >> KEY_BITS_26);
        if (c && v > out[c & (k - 1)]) out[c & (k - 1)] = v;
    }
}

static double register_estimate(const sc_hll *h) {
    const double m = (double)(1u << h->lg_k);
    const double alpha = h->lg_k == 4 ? 0.673 : h->lg_k == 5 ? 0.697 : h->lg_k == 6 ? 0.709
                                                                     : 0.7213 / (1.0 + 1.079 / m);
    double raw = alpha * m * m / (h->kxq0 + h->kxq1);
    if (raw <= 2.5 * m && h->num_zeros > 0) return m * log(m / (double)h->num_zeros);
    return raw;
}

double sc_hll_estimate(const sc_hll *h) {
    if (sc_hll_is_empty(h)) return 0.0;
    if (h->coupons) return (double)h->ncoup;
    return h->ooo ? register_estimate(h) : h->hip;
}

static double rel_err(const sc_hll *h, int z) {
    z = z < 1 ? 1 : z > 3 ? 3 : z;
    if (h->coupons) return z * COUPON_RSE;
    return z * (h->ooo ? NON_HIP_RSE : HIP_RSE) / sqrt((double)(1u << h->lg_k));
}

double sc_hll_lower_bound(const sc_hll *h, int z) {
    if (sc_hll_is_empty(h)) return 0.0;
    double lb = sc_hll_estimate(h) / (1.0 + rel_err(h, z));
    double floor = h->coupons ? (double)h->ncoup : (double)((1u << h->lg_k) - h->num_zeros);
    return lb < floor ? floor : lb;
}

double sc_hll_upper_bound(const sc_hll *h, int z) {
    if (sc_hll_is_empty(h)) return 0.0;
    double e = rel_err(h, z);
    return sc_hll_estimate(h) / (e < 1.0 ? 1.0 - e : 1e-9);
}

/* ---- union ---- */

static void recompute_kxq(sc_hll *h) {
    h->kxq0 = h->kxq1 = 0.0;
    h->num_zeros = 0;
    for (uint32_t i = 0; i < (1u << h->lg_k); i++) {
        uint8_t v = h->regs[i];
        if (v < 32) h->kxq0 += inv_pow2(v);
        else h->kxq1 += inv_pow2(v);
        h->num_zeros += v == 0;
    }
}

/* The union is a function of the inputs' items, whatever their order: the coupons' union while
 * it fits coupon mode (exact), otherwise the registers' maximum with the register estimate
 * (out of order). The one exception keeps a single stream's HIP: an empty dst takes a
 * same-size HLL-mode src whole. */
int sc_hll_merge(sc_hll *dst, const sc_hll *src) {
    if (dst->lg_k > src->lg_k) return SC_EINVAL;
    if (sc_hll_is_empty(src)) return SC_OK;
    if (src->coupons) {
        int rc = SC_OK;
        for (uint32_t j = 0; j < (1u << src->lg_tab) && !rc; j++)
            if (src->coup[j]) rc = sc_hll_update_coupon(dst, src->coup[j]);
        if (!dst->coupons) dst->ooo = true, dst->hip = 0.0;
        return rc;
    }
    if (sc_hll_is_empty(dst) && dst->lg_k == src->lg_k) {
        uint8_t *regs = registers_for(dst); /* an empty sketch may hold registers: those a */
        if (!regs) return SC_ENOMEM;         /* reset kept, or an image of zero registers */
        memcpy(regs, src->regs, 1u << dst->lg_k);
        free_table(dst);
        dst->regs = regs;
        dst->hip = src->hip, dst->kxq0 = src->kxq0, dst->kxq1 = src->kxq1;
        dst->num_zeros = src->num_zeros, dst->ooo = src->ooo;
        dst->coupons = false;
        dst->ncoup = 0;
        return SC_OK;
    }
    if (dst->coupons) {
        int rc = promote(dst);
        if (rc) return rc;
    }
    const uint32_t mask = (1u << dst->lg_k) - 1;
    for (uint32_t i = 0; i < (1u << src->lg_k); i++)
        if (src->regs[i] > dst->regs[i & mask]) dst->regs[i & mask] = src->regs[i];
    recompute_kxq(dst);
    dst->ooo = true;
    dst->hip = 0.0;
    return SC_OK;
}

/* ---- serialization ---- */

static void put_f64(uint8_t *p, double v) { memcpy(p, &v, 8); }
static double get_f64(const uint8_t *p) {
    double v;
    memcpy(&v, p, 8);
    return v;
}
static uint32_t get_u32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static size_t coupon_image_size(const sc_hll *h) {
    return h->ncoup <= LIST_MAX ? 8 + 4 * (size_t)h->ncoup : 12 + 4 * (size_t)h->ncoup;
}

size_t sc_hll_serialized_size(const sc_hll *h) {
    if (sc_hll_is_empty(h)) return 8;
    return h->coupons ? coupon_image_size(h) : HLL_HEADER + (1u << h->lg_k);
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x, y;
    memcpy(&x, a, 4);
    memcpy(&y, b, 4);
    return (x > y) - (x < y);
}

/* coupon mode as DataSketches' compact LIST (up to 7 coupons) or SET image, the coupons in
 * ascending order so equal sketches write equal bytes */
static void write_coupons(const sc_hll *h, uint8_t *buf) {
    bool list = h->ncoup <= LIST_MAX;
    uint8_t lg_arr = 3;
    if (!list) /* the table size DataSketches would have: at least 32, at most 3/4 full */
        for (lg_arr = 5; 3u * (1u << lg_arr) < 4u * h->ncoup; lg_arr++) {}
    buf[0] = list ? 2 : 3;
    buf[4] = lg_arr;
    buf[5] = FLAG_COMPACT;
    buf[7] = (uint8_t)((TGT_HLL8 << 2) | (list ? MODE_LIST : MODE_SET));
    uint8_t *out = buf + (list ? 8 : 12);
    if (list) buf[6] = (uint8_t)h->ncoup;
    else memcpy(buf + 8, &h->ncoup, 4);
    size_t n = 0;
    for (uint32_t j = 0; j < (1u << h->lg_tab); j++)
        if (h->coup[j]) memcpy(out + 4 * n++, &h->coup[j], 4);
    qsort(out, n, 4, cmp_u32);
}

int sc_hll_serialize(const sc_hll *h, uint8_t *buf, size_t cap) {
    size_t len = sc_hll_serialized_size(h);
    if (cap < len) return SC_EINVAL;
    memset(buf, 0, len);
    buf[1] = 1;
    buf[2] = 7;
    buf[3] = h->lg_k;
    if (sc_hll_is_empty(h)) { /* the empty LIST image DataSketches writes */
        buf[0] = 2;
        buf[4] = 3;
        buf[5] = FLAG_EMPTY | FLAG_COMPACT;
        buf[7] = (TGT_HLL8 << 2) | MODE_LIST;
        return SC_OK;
    }
    if (h->coupons) {
        write_coupons(h, buf);
        return SC_OK;
    }
    buf[0] = HLL_PREINTS;
    buf[5] = FLAG_COMPACT | (h->ooo ? FLAG_OOO : 0);
    buf[7] = (TGT_HLL8 << 2) | MODE_HLL;
    put_f64(buf + 8, h->hip);
    put_f64(buf + 16, h->kxq0);
    put_f64(buf + 24, h->kxq1);
    memcpy(buf + 32, &h->num_zeros, 4);
    memcpy(buf + HLL_HEADER, h->regs, 1u << h->lg_k);
    return SC_OK;
}

static uint8_t get_hll6(const uint8_t *a, uint32_t slot) {
    uint32_t bit = slot * 6, byte = bit >> 3;
    uint32_t two = a[byte] | ((uint32_t)a[byte + 1] << 8);
    return (uint8_t)((two >> (bit & 7)) & 0x3f);
}

/* HLL-mode image of any target type into h (already created with the image's lg_k) */
static int read_hll_mode(sc_hll *h, const uint8_t *buf, size_t len, int tgt, bool compact) {
    const uint32_t k = 1u << h->lg_k;
    const size_t arr = tgt == TGT_HLL8 ? k : tgt == TGT_HLL6 ? (size_t)k * 3 / 4 + 1 : k / 2;
    if (len < HLL_HEADER + arr) return SC_EFORMAT;
    int rc = promote(h); /* the empty sketch's registers; filled below */
    if (rc) return rc;
    const uint8_t *a = buf + HLL_HEADER, cur_min = buf[6];
    for (uint32_t i = 0; i < k; i++) {
        if (tgt == TGT_HLL8) h->regs[i] = a[i];
        else if (tgt == TGT_HLL6) h->regs[i] = get_hll6(a, i);
        else {
            uint8_t nib = (a[i >> 1] >> ((i & 1) * 4)) & 0xf;
            h->regs[i] = nib == 15 ? 0 : (uint8_t)(cur_min + nib); /* 15: value in the aux map */
        }
    }
    if (tgt == TGT_HLL4) {
        uint32_t aux_count = get_u32(buf + 32 + 4);
        size_t slots = compact ? aux_count : (buf[4] ? (1u << buf[4]) : 0);
        if (len < HLL_HEADER + arr + 4 * slots) return SC_EFORMAT;
        for (size_t j = 0; j < slots; j++) {
            uint32_t pair = get_u32(a + arr + 4 * j);
            if (pair) h->regs[(pair & KEY_MASK_26) & (k - 1)] = (uint8_t)(pair >> KEY_BITS_26);
        }
    }
    h->hip = get_f64(buf + 8);
    h->kxq0 = get_f64(buf + 16);
    h->kxq1 = get_f64(buf + 24);
    h->ooo = (buf[5] & FLAG_OOO) != 0;
    h->coupons = false;
    h->num_zeros = 0;
    for (uint32_t i = 0; i < k; i++) h->num_zeros += h->regs[i] == 0;
    return SC_OK;
}

int sc_hll_deserialize(sc_hll **out, const uint8_t *buf, size_t len) {
    *out = NULL;
    if (len < 8) return SC_EFORMAT;
    uint8_t pre = buf[0], lg_k = buf[3], flags = buf[5];
    int mode = buf[7] & 3, tgt = (buf[7] >> 2) & 3;
    if (buf[1] != 1 || buf[2] != 7 || mode > MODE_HLL || tgt > TGT_HLL8) return SC_EFORMAT;
    if (lg_k < SC_HLL_MIN_LG_K || lg_k > SC_HLL_MAX_LG_K) return SC_EFORMAT;
    sc_hll *h;
    int rc = sc_hll_create(&h, lg_k);
    if (rc) return rc;
    bool compact = (flags & FLAG_COMPACT) != 0;
    if (flags & FLAG_EMPTY) {
        rc = SC_OK;
    } else if (mode == MODE_HLL) {
        rc = pre == HLL_PREINTS ? read_hll_mode(h, buf, len, tgt, compact) : SC_EFORMAT;
    } else { /* LIST (pre 2, count in byte 6) or SET (pre 3, count in bytes 8-11): replay */
        size_t start = mode == MODE_LIST ? 8 : 12;
        size_t count = mode == MODE_LIST ? buf[6] : (len >= 12 ? get_u32(buf + 8) : 0);
        size_t slots = compact ? count : (size_t)1 << buf[4];
        if (pre != (mode == MODE_LIST ? 2 : 3) || buf[4] > 26 || len < start + 4 * slots) {
            rc = SC_EFORMAT;
        } else {
            for (size_t j = 0; j < slots && rc == SC_OK; j++) {
                uint32_t c = get_u32(buf + start + 4 * j);
                if (c && !(c >> KEY_BITS_26)) rc = SC_EFORMAT; /* a coupon's value is >= 1 */
                else if (c) rc = sc_hll_update_coupon(h, c);
            }
        }
    }
    if (rc) {
        sc_hll_destroy(h);
        return rc;
    }
    *out = h;
    return SC_OK;
}

/* ---- concurrent framework vtable (native/sketch/concurrent.h) ----
 * config: a uint8_t lg_k. HLL keeps no update count, so n is 0 and the framework is never
 * eager for HLL (eager_limit must be 0); summarize publishes the estimate (a double, word 0)
 * so queries read it lock-free. */
static void *hll_vt_create(const void *cfg) {
    sc_hll *h;
    return sc_hll_create(&h, *(const uint8_t *)cfg) ? NULL : h;
}
static void hll_vt_destroy(void *h) { sc_hll_destroy((sc_hll *)h); }
static void hll_vt_reset(void *h) { sc_hll_reset((sc_hll *)h); }
static int hll_vt_merge_into(void *g, const void *l) { return sc_hll_merge((sc_hll *)g, (const sc_hll *)l); }
static int hll_vt_copy(void **out, const void *h) { return sc_hll_copy((sc_hll **)out, (const sc_hll *)h); }
static uint64_t hll_vt_hint(const void *g) { (void)g; return 0; }
static uint64_t hll_vt_n(const void *h) { (void)h; return 0; }
static void hll_vt_summarize(const void *g, uint64_t out[SC_CONC_SUMMARY_WORDS]) {
    double est = sc_hll_estimate((const sc_hll *)g);
    memset(out, 0, SC_CONC_SUMMARY_WORDS * sizeof(uint64_t));
    memcpy(&out[0], &est, 8);
}
const sc_sketch_vtable sc_hll_vtable = {
    .name = "hll8", .create = hll_vt_create, .destroy = hll_vt_destroy, .reset = hll_vt_reset,
    .merge_into = hll_vt_merge_into, .copy = hll_vt_copy, .hint = hll_vt_hint, .n = hll_vt_n,
    .summarize = hll_vt_summarize, .finalize = NULL};
