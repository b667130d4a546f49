/* Θ sketch: see theta.h for the algorithm, the error bound, the contract and the format. */
#include "sketch/theta.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sc_status.h"
#include "sketch/murmur3.h"

#ifdef SC_DEBUG
#include <assert.h>
#define SC_DBG_ASSERT(x) assert(x)
#else
#define SC_DBG_ASSERT(x) ((void)0)
#endif

#define START_LG_SIZE 5
#define STRIDE_MASK 127u

enum { FLAG_READ_ONLY = 2, FLAG_EMPTY = 4, FLAG_COMPACT = 8, FLAG_ORDERED = 16 };

struct sc_theta {
    uint64_t theta;
    uint64_t seed;
    uint64_t *table;      /* QuickSelect: 2^lg_size slots, 0 = free; list: `cap` hashes */
    uint64_t *scratch;    /* k hashes, allocated at the first rebuild */
    uint64_t n_inserted;  /* distinct hashes ever accepted (the framework's n) */
    uint32_t count;
    uint32_t cap;         /* QuickSelect: grow/rebuild when count exceeds it; list: capacity */
    uint16_t seed_hash;
    uint8_t lg_k;
    uint8_t lg_size;
    bool empty;
    bool is_list;
};

static inline uint64_t hash_u64(uint64_t key, uint64_t seed) {
    return sc_murmur3_u64_h1(key, seed) >> 1;
}
static inline uint64_t hash_bytes(const void *p, size_t len, uint64_t seed) {
    return sc_murmur3_128(p, len, seed).h1 >> 1;
}
static inline bool valid_at(const uint8_t *validity, int64_t i) {
    return !validity || ((validity[i >> 3] >> (i & 7)) & 1);
}

/* ---- quickselect: afterwards a[kth] is the kth smallest (0-based), smaller ones before ---- */
static void nth_smallest(uint64_t *a, ptrdiff_t n, ptrdiff_t kth) {
    ptrdiff_t lo = 0, hi = n - 1;
    while (hi > lo) {
        ptrdiff_t mid = lo + (hi - lo) / 2;
        uint64_t x = a[lo], y = a[mid], z = a[hi], t;
        uint64_t pivot = x < y ? (y < z ? y : (x < z ? z : x)) : (x < z ? x : (y < z ? z : y));
        ptrdiff_t i = lo, j = hi;
        while (i <= j) {
            while (a[i] < pivot) i++;
            while (a[j] > pivot) j--;
            if (i <= j) {
                t = a[i], a[i] = a[j], a[j] = t;
                i++, j--;
            }
        }
        if (kth <= j) hi = j;
        else if (kth >= i) lo = i;
        else return;
    }
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* ---- hash table (double hashing with an odd stride, as DataSketches) ---- */

static inline uint32_t capacity_for(uint8_t lg_size, uint8_t lg_k) {
    uint64_t size = 1ULL << lg_size;
    return (uint32_t)(lg_size <= lg_k ? size / 2 : size * 15 / 16);
}

/* 1 if inserted, 0 if already present */
static inline int table_insert(uint64_t *table, uint8_t lg_size, uint64_t h) {
    const uint64_t mask = (1ULL << lg_size) - 1;
    const uint64_t stride = 2 * ((h >> lg_size) & STRIDE_MASK) + 1;
    uint64_t i = h & mask;
    for (;;) {
        uint64_t p = table[i];
        if (p == 0) {
            table[i] = h;
            return 1;
        }
        if (p == h) return 0;
        i = (i + stride) & mask;
    }
}

static int grow(sc_theta *s) {
    uint8_t lg_new = s->lg_size + 2 > s->lg_k + 1 ? s->lg_k + 1 : s->lg_size + 2;
    uint64_t *t = calloc(1ULL << lg_new, sizeof *t);
    if (!t) return SC_ENOMEM;
    for (uint64_t i = 0; i < (1ULL << s->lg_size); i++)
        if (s->table[i]) table_insert(t, lg_new, s->table[i]);
    free(s->table);
    s->table = t;
    s->lg_size = lg_new;
    s->cap = capacity_for(lg_new, s->lg_k);
    return SC_OK;
}

/* keep the k smallest hashes; theta := the (k+1)-th smallest */
static int rebuild(sc_theta *s) {
    const uint32_t k = 1u << s->lg_k;
    const uint64_t size = 1ULL << s->lg_size;
    if (!s->scratch && !(s->scratch = malloc(sizeof(uint64_t) * k))) return SC_ENOMEM;
    uint32_t m = 0;
    for (uint64_t i = 0; i < size; i++)
        if (s->table[i]) s->table[m++] = s->table[i];
    SC_DBG_ASSERT(m == s->count && m > k);
    nth_smallest(s->table, m, k);
    s->theta = s->table[k];
    memcpy(s->scratch, s->table, sizeof(uint64_t) * k);
    memset(s->table, 0, sizeof(uint64_t) * size);
    for (uint32_t i = 0; i < k; i++) table_insert(s->table, s->lg_size, s->scratch[i]);
    s->count = k;
    return SC_OK;
}

/* insert a hash already screened (0 < h < theta) */
static inline int insert_hash(sc_theta *s, uint64_t h) {
    if (!table_insert(s->table, s->lg_size, h)) return SC_OK;
    s->n_inserted++;
    if (++s->count > s->cap) return s->lg_size <= s->lg_k ? grow(s) : rebuild(s);
    return SC_OK;
}

/* ---- lifecycle ---- */

static sc_theta *theta_new(uint8_t lg_k, uint64_t seed, uint32_t list_cap) {
    if (lg_k < SC_THETA_MIN_LG_K || lg_k > SC_THETA_MAX_LG_K) return NULL;
    sc_theta *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->theta = SC_THETA_MAX;
    s->seed = seed;
    s->seed_hash = sc_seed_hash(seed);
    s->lg_k = lg_k;
    s->empty = true;
    s->is_list = list_cap > 0;
    s->lg_size = START_LG_SIZE;
    s->cap = s->is_list ? list_cap : capacity_for(START_LG_SIZE, lg_k);
    s->table = calloc(s->is_list ? list_cap : (1u << START_LG_SIZE), sizeof(uint64_t));
    if (!s->table) {
        free(s);
        return NULL;
    }
    return s;
}

int sc_theta_create(sc_theta **out, uint8_t lg_k, uint64_t seed) {
    *out = NULL;
    if (lg_k < SC_THETA_MIN_LG_K || lg_k > SC_THETA_MAX_LG_K) return SC_EINVAL;
    return (*out = theta_new(lg_k, seed, 0)) ? SC_OK : SC_ENOMEM;
}

void sc_theta_destroy(sc_theta *s) {
    if (!s) return;
    free(s->table);
    free(s->scratch);
    free(s);
}

void sc_theta_reset(sc_theta *s) {
    memset(s->table, 0, sizeof(uint64_t) * (s->is_list ? s->cap : (1ULL << s->lg_size)));
    s->count = 0;
    s->theta = SC_THETA_MAX;
    s->empty = true;
    s->n_inserted = 0;
}

int sc_theta_copy(sc_theta **out, const sc_theta *s) {
    *out = NULL;
    sc_theta *c = malloc(sizeof *c);
    if (!c) return SC_ENOMEM;
    *c = *s;
    size_t slots = s->is_list ? s->cap : (1ULL << s->lg_size);
    c->scratch = NULL;
    if (!(c->table = malloc(sizeof(uint64_t) * slots))) {
        free(c);
        return SC_ENOMEM;
    }
    memcpy(c->table, s->table, sizeof(uint64_t) * slots);
    *out = c;
    return SC_OK;
}

/* ---- updates ---- */

int sc_theta_update_hash(sc_theta *s, uint64_t h) {
    s->empty = false;
    if (h >= s->theta || h == 0) return SC_OK;
    if (s->is_list) {
        if (s->count >= s->cap) return SC_EFULL;
        s->table[s->count++] = h;
        return SC_OK;
    }
    return insert_hash(s, h);
}

int sc_theta_update_i64(sc_theta *s, int64_t v) {
    return sc_theta_update_hash(s, hash_u64((uint64_t)v, s->seed));
}
int sc_theta_update_f64(sc_theta *s, double v) {
    return sc_theta_update_hash(s, hash_u64(sc_canonical_double_bits(v), s->seed));
}
int sc_theta_update_bytes(sc_theta *s, const void *data, size_t len) {
    return len ? sc_theta_update_hash(s, hash_bytes(data, len, s->seed)) : SC_OK;
}

/* ---- column hashing in blocks: the hash loop vectorises (AVX2 clone, picked at load time) ---- */

#define HASH_BLOCK 256
#if defined(__x86_64__) && defined(__linux__) && defined(__has_attribute)
#if __has_attribute(target_clones) && !defined(__SANITIZE_THREAD__)
#define SC_MULTIVERSION __attribute__((target_clones("avx2", "default")))
#endif
#endif
#ifndef SC_MULTIVERSION
#define SC_MULTIVERSION
#endif

SC_MULTIVERSION static void hash_i64_block(const int64_t *restrict v, size_t m, uint64_t seed,
                                           uint64_t *restrict out) {
    for (size_t j = 0; j < m; j++) out[j] = hash_u64((uint64_t)v[j], seed);
}
SC_MULTIVERSION static void hash_f64_block(const double *restrict v, size_t m, uint64_t seed,
                                           uint64_t *restrict out) {
    for (size_t j = 0; j < m; j++) out[j] = hash_u64(sc_canonical_double_bits(v[j]), seed);
}
#define STR_BLOCK(OFF_T)                                                                  \
    static void hash_str_block_##OFF_T(const OFF_T *off, const uint8_t *data, size_t m,   \
                                       uint64_t seed, uint64_t *out) {                    \
        for (size_t j = 0; j < m; j++)                                                    \
            out[j] = off[j + 1] > off[j] ? hash_bytes(data + off[j], (size_t)(off[j + 1] - off[j]), seed) : 0; \
    }
STR_BLOCK(int32_t)
STR_BLOCK(int64_t)

/* The column loops. BLOCK_HASH fills hb[0..m) with the hashes of items base..base+m;
 * SKIP(i) is true for items that are not updates (nulls, empty strings). */
#define SEQ_LOOP(BLOCK_HASH, SKIP)                                          \
    do {                                                                    \
        const uint64_t seed = s->seed;                                      \
        uint64_t theta = s->theta, hb[HASH_BLOCK];                          \
        bool any = false;                                                   \
        for (size_t base = 0; base < n; base += HASH_BLOCK) {               \
            size_t m = n - base < HASH_BLOCK ? n - base : HASH_BLOCK;       \
            BLOCK_HASH;                                                     \
            for (size_t j = 0; j < m; j++) {                                \
                if (SKIP(base + j)) continue;                               \
                any = true;                                                 \
                uint64_t h = hb[j];                                         \
                if (h < theta && h != 0) {                                  \
                    int rc_ = insert_hash(s, h);                            \
                    if (rc_ < 0) return rc_;                                \
                    theta = s->theta;                                       \
                }                                                           \
            }                                                               \
        }                                                                   \
        if (any) s->empty = false;                                          \
        return SC_OK;                                                       \
    } while (0)

#define NULL_SKIP(i) (!valid_at(validity, valid_off + (int64_t)(i)))
#define STR_SKIP(i) (NULL_SKIP(i) || offsets[(i) + 1] == offsets[i])
#define NEVER(i) 0
#define I64_BLOCK hash_i64_block(v + base, m, seed, hb)
#define F64_BLOCK hash_f64_block(v + base, m, seed, hb)
#define S32_BLOCK hash_str_block_int32_t(offsets + base, data, m, seed, hb)
#define S64_BLOCK hash_str_block_int64_t(offsets + base, data, m, seed, hb)

int sc_theta_update_i64_array(sc_theta *s, const int64_t *v, size_t n, const uint8_t *validity,
                              int64_t valid_off) {
    if (s->is_list) return SC_EUNSUPPORTED;
    if (!validity) SEQ_LOOP(I64_BLOCK, NEVER);
    SEQ_LOOP(I64_BLOCK, NULL_SKIP);
}
int sc_theta_update_f64_array(sc_theta *s, const double *v, size_t n, const uint8_t *validity,
                              int64_t valid_off) {
    if (s->is_list) return SC_EUNSUPPORTED;
    SEQ_LOOP(F64_BLOCK, NULL_SKIP);
}
int sc_theta_update_str32_array(sc_theta *s, const int32_t *offsets, const uint8_t *data,
                                size_t n, const uint8_t *validity, int64_t valid_off) {
    if (s->is_list) return SC_EUNSUPPORTED;
    SEQ_LOOP(S32_BLOCK, STR_SKIP);
}
int sc_theta_update_str64_array(sc_theta *s, const int64_t *offsets, const uint8_t *data,
                                size_t n, const uint8_t *validity, int64_t valid_off) {
    if (s->is_list) return SC_EUNSUPPORTED;
    SEQ_LOOP(S64_BLOCK, STR_SKIP);
}

int sc_theta_trim(sc_theta *s) {
    if (s->is_list || s->count <= (1u << s->lg_k)) return SC_OK;
    return rebuild(s);
}

/* ---- queries ---- */

uint32_t sc_theta_num_retained(const sc_theta *s) { return s->count; }
uint64_t sc_theta_theta64(const sc_theta *s) { return s->empty ? SC_THETA_MAX : s->theta; }
bool sc_theta_is_empty(const sc_theta *s) { return s->empty; }
uint8_t sc_theta_lg_k(const sc_theta *s) { return s->lg_k; }
uint64_t sc_theta_seed(const sc_theta *s) { return s->seed; }

double sc_theta_estimate_of(uint32_t n, uint64_t theta, bool empty) {
    if (empty) return 0.0;
    return (double)n / ((double)theta / (double)SC_THETA_MAX);
}

/* one-sided tail mass beyond z standard deviations, z = 1, 2, 3 */
static const double TAIL[4] = {0.5, 0.15865525393145705, 0.022750131948179195,
                               0.0013498980316300946};

static double poisson_cdf(uint32_t n, double lam) { /* P(X <= n), X ~ Poisson(lam) */
    double term = exp(-lam), sum = term;
    for (uint32_t i = 1; i <= n; i++) {
        term *= lam / i;
        sum += term;
    }
    return sum;
}

/* lam with poisson_cdf(n, lam) = target (the cdf decreases in lam) */
static double poisson_solve(uint32_t n, double target) {
    double lo = 0.0, hi = n + 10.0 * sqrt(n + 1.0) + 20.0;
    for (int it = 0; it < 100; it++) {
        double mid = 0.5 * (lo + hi);
        if (poisson_cdf(n, mid) > target) lo = mid;
        else hi = mid;
    }
    return 0.5 * (lo + hi);
}

static int clamp_std(int z) { return z < 1 ? 1 : z > 3 ? 3 : z; }

double sc_theta_lower_bound_of(uint32_t n, uint64_t theta, bool empty, int num_std) {
    if (empty) return 0.0;
    if (theta >= SC_THETA_MAX) return (double)n;
    int z = clamp_std(num_std);
    double p = (double)theta / (double)SC_THETA_MAX, est;
    if (n == 0) return 0.0;
    if (n < 120) {
        est = poisson_solve(n - 1, 1.0 - TAIL[z]) / p;  /* P(X >= n; lam) = tail */
    } else {
        double zs = z * sqrt(p * (1.0 - p));
        double u = (-zs + sqrt(zs * zs + 4.0 * p * (n - 0.5))) / (2.0 * p);
        est = u * u;
    }
    return est < n ? (double)n : est;
}

double sc_theta_upper_bound_of(uint32_t n, uint64_t theta, bool empty, int num_std) {
    if (empty) return 0.0;
    if (theta >= SC_THETA_MAX) return (double)n;
    int z = clamp_std(num_std);
    double p = (double)theta / (double)SC_THETA_MAX, est;
    if (n < 120) {
        est = poisson_solve(n, TAIL[z]) / p;  /* P(X <= n; lam) = tail */
    } else {
        double zs = z * sqrt(p * (1.0 - p));
        double u = (zs + sqrt(zs * zs + 4.0 * p * (n + 0.5))) / (2.0 * p);
        est = u * u;
    }
    double e = sc_theta_estimate_of(n, theta, false);
    return est < e ? e : est;
}

double sc_theta_estimate(const sc_theta *s) {
    return sc_theta_estimate_of(s->count, sc_theta_theta64(s), s->empty);
}
double sc_theta_lower_bound(const sc_theta *s, int z) {
    return sc_theta_lower_bound_of(s->count, sc_theta_theta64(s), s->empty, z);
}
double sc_theta_upper_bound(const sc_theta *s, int z) {
    return sc_theta_upper_bound_of(s->count, sc_theta_theta64(s), s->empty, z);
}

/* ---- compact sketches ---- */

static sc_theta_compact *compact_new(uint32_t n) {
    sc_theta_compact *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    if (!(c->entries = malloc(sizeof(uint64_t) * (n ? n : 1)))) {
        free(c);
        return NULL;
    }
    return c;
}

void sc_theta_compact_destroy(sc_theta_compact *c) {
    if (!c) return;
    free(c->entries);
    free(c);
}

int sc_theta_compact_copy(sc_theta_compact **out, const sc_theta_compact *src) {
    sc_theta_compact *c = compact_new(src->n);
    if (!(*out = c)) return SC_ENOMEM;
    uint64_t *e = c->entries;
    *c = *src;
    c->entries = e;
    memcpy(e, src->entries, sizeof(uint64_t) * src->n);
    return SC_OK;
}

int sc_theta_compact_of(sc_theta_compact **out, const sc_theta *s, bool ordered) {
    sc_theta_compact *c = compact_new(s->count);
    if (!(*out = c)) return SC_ENOMEM;
    size_t slots = s->is_list ? s->count : (1ULL << s->lg_size);
    for (size_t i = 0; i < slots; i++)
        if (s->table[i] && s->table[i] < s->theta) c->entries[c->n++] = s->table[i];
    if (ordered) qsort(c->entries, c->n, sizeof(uint64_t), cmp_u64);
    c->theta = sc_theta_theta64(s);
    c->seed_hash = s->seed_hash;
    c->empty = s->empty;
    c->ordered = ordered;
    return SC_OK;
}

static inline bool single_item(const sc_theta_compact *c) {
    return c->n == 1 && c->theta == SC_THETA_MAX && !c->empty;
}

static uint8_t pre_longs(const sc_theta_compact *c) {
    if (c->empty || single_item(c)) return 1;
    return c->theta < SC_THETA_MAX ? 3 : 2;
}

size_t sc_theta_compact_serialized_size(const sc_theta_compact *c) {
    return 8u * pre_longs(c) + (c->empty ? 0 : 8u * c->n);
}

static void put_u64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
static uint64_t get_u64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

int sc_theta_compact_serialize(const sc_theta_compact *c, uint8_t *buf, size_t cap) {
    size_t len = sc_theta_compact_serialized_size(c);
    if (cap < len) return SC_EINVAL;
    memset(buf, 0, len);
    uint8_t pre = pre_longs(c);
    buf[0] = pre;
    buf[1] = SC_THETA_SERIAL_VERSION;
    buf[2] = 3; /* family: compact */
    buf[5] = FLAG_READ_ONLY | FLAG_COMPACT | (c->empty ? FLAG_EMPTY : 0) |
             (c->ordered || c->empty || single_item(c) ? FLAG_ORDERED : 0);
    memcpy(buf + 6, &c->seed_hash, 2);
    if (c->empty) return SC_OK;
    if (pre >= 2) memcpy(buf + 8, &c->n, 4);
    if (pre == 3) put_u64(buf + 16, c->theta);
    for (uint32_t i = 0; i < c->n; i++) put_u64(buf + 8u * pre + 8u * i, c->entries[i]);
    return SC_OK;
}

int sc_theta_compact_deserialize(sc_theta_compact **out, const uint8_t *buf, size_t len,
                                 uint64_t seed) {
    *out = NULL;
    if (len < 8) return SC_EFORMAT;
    uint8_t pre = buf[0] & 0x3f, ver = buf[1], fam = buf[2], flags = buf[5];
    if (ver != SC_THETA_SERIAL_VERSION) return ver == 4 || ver == 1 || ver == 2 ? SC_EUNSUPPORTED : SC_EFORMAT;
    if (fam != 3 || (flags & 1) || pre < 1 || pre > 3) return SC_EFORMAT;
    uint16_t sh;
    memcpy(&sh, buf + 6, 2);
    bool empty = (flags & FLAG_EMPTY) != 0;
    uint32_t n = 0;
    uint64_t theta = SC_THETA_MAX;
    if (pre == 1) {
        if (!empty && len >= 16) n = 1; /* single item */
        else empty = true;
    } else {
        if (len < 8u * pre) return SC_EFORMAT;
        memcpy(&n, buf + 8, 4);
        if (pre == 3) theta = get_u64(buf + 16);
    }
    if (!empty && sh != sc_seed_hash(seed)) return SC_EINVAL;
    if (theta == 0 || theta > SC_THETA_MAX || (uint64_t)len < 8u * pre + 8ull * n) return SC_EFORMAT;
    sc_theta_compact *c = compact_new(n);
    if (!c) return SC_ENOMEM;
    c->theta = theta;
    c->seed_hash = sh;
    c->empty = empty;
    c->ordered = (flags & FLAG_ORDERED) != 0;
    c->n = n;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t h = get_u64(buf + 8u * pre + 8u * i);
        if (h == 0 || h >= theta || (c->ordered && i > 0 && h <= c->entries[i - 1])) {
            sc_theta_compact_destroy(c);
            return SC_EFORMAT;
        }
        c->entries[i] = h;
    }
    *out = c;
    return SC_OK;
}

/* ---- set operations ---- */

static sc_theta_compact *result_new(uint32_t n, uint64_t theta, bool empty, uint64_t seed,
                                    bool ordered) {
    sc_theta_compact *c = compact_new(n);
    if (!c) return NULL;
    c->theta = theta;
    c->empty = empty;
    c->seed_hash = sc_seed_hash(seed);
    c->ordered = ordered;
    return c;
}

/* a sorted private copy of c's hashes below theta */
static uint64_t *sorted_below(const sc_theta_compact *c, uint64_t theta, uint32_t *n_out) {
    uint64_t *a = malloc(sizeof(uint64_t) * (c->n ? c->n : 1));
    uint32_t m = 0;
    if (!a) return NULL;
    for (uint32_t i = 0; i < c->n; i++)
        if (c->entries[i] < theta) a[m++] = c->entries[i];
    if (!c->ordered) qsort(a, m, sizeof(uint64_t), cmp_u64);
    *n_out = m;
    return a;
}

int sc_theta_union(sc_theta_compact **out, const sc_theta_compact *const *in, size_t n,
                   uint8_t lg_k, uint64_t seed, bool ordered) {
    *out = NULL;
    sc_theta *u;
    int rc = sc_theta_create(&u, lg_k, seed);
    if (rc) return rc;
    uint64_t union_theta = SC_THETA_MAX;
    for (size_t j = 0; j < n && rc == 0; j++) {
        const sc_theta_compact *c = in[j];
        if (c->empty) continue;
        if (c->seed_hash != u->seed_hash) rc = SC_EINVAL;
        u->empty = false;
        if (c->theta < union_theta) union_theta = c->theta;
        for (uint32_t i = 0; i < c->n && rc == 0; i++) {
            uint64_t h = c->entries[i];
            if (h < union_theta && h < u->theta) rc = insert_hash(u, h);
        }
    }
    sc_theta_compact *r = NULL;
    if (rc == 0) {
        uint64_t theta = union_theta < u->theta ? union_theta : u->theta;
        r = result_new(u->count, theta, u->empty, seed, ordered);
        if (!r) rc = SC_ENOMEM;
    }
    if (rc == 0) {
        for (uint64_t i = 0; i < (1ULL << u->lg_size); i++)
            if (u->table[i] && u->table[i] < r->theta) r->entries[r->n++] = u->table[i];
        uint32_t k = 1u << lg_k;
        if (r->n > k) {
            nth_smallest(r->entries, r->n, k);
            r->theta = r->entries[k];
            r->n = k;
        }
        qsort(r->entries, r->n, sizeof(uint64_t), cmp_u64);
        *out = r;
    }
    sc_theta_destroy(u);
    return rc;
}

int sc_theta_intersection(sc_theta_compact **out, const sc_theta_compact *const *in, size_t n,
                          uint64_t seed, bool ordered) {
    *out = NULL;
    if (n == 0) return SC_EINVAL;
    uint16_t sh = sc_seed_hash(seed);
    bool empty = false;
    uint64_t theta = SC_THETA_MAX;
    uint64_t *set = NULL;
    uint32_t m = 0;
    bool valid = false;
    for (size_t j = 0; j < n; j++) {
        const sc_theta_compact *c = in[j];
        if (!c->empty && c->seed_hash != sh) {
            free(set);
            return SC_EINVAL;
        }
        empty |= c->empty;
        if (c->theta < theta) theta = c->theta;
        if (valid && m == 0) continue;
        if (!valid || c->n == 0) {
            free(set);
            set = NULL;
            m = 0;
            valid = true;
            if (c->n == 0) continue;
            if (!(set = sorted_below(c, SC_THETA_MAX, &m))) return SC_ENOMEM;
            continue;
        }
        uint32_t cn, k = 0, i = 0, x = 0;
        uint64_t *other = sorted_below(c, theta, &cn);
        if (!other) {
            free(set);
            return SC_ENOMEM;
        }
        while (i < m && x < cn) { /* sorted merge-intersection, below the current theta */
            if (set[i] < other[x]) i++;
            else if (set[i] > other[x]) x++;
            else {
                if (set[i] < theta) set[k++] = set[i];
                i++, x++;
            }
        }
        free(other);
        m = k;
        if (m == 0 && theta == SC_THETA_MAX) empty = true;
    }
    sc_theta_compact *r = result_new(m, theta, empty, seed, ordered);
    if (r) {
        if (m) memcpy(r->entries, set, sizeof(uint64_t) * m);
        r->n = m;
    }
    free(set);
    *out = r;
    return r ? SC_OK : SC_ENOMEM;
}

int sc_theta_a_not_b(sc_theta_compact **out, const sc_theta_compact *a,
                     const sc_theta_compact *b, uint64_t seed, bool ordered) {
    *out = NULL;
    uint16_t sh = sc_seed_hash(seed);
    if (a->empty || a->n == 0 || b->empty) {
        if (!a->empty && a->seed_hash != sh) return SC_EINVAL;
        sc_theta_compact *r = NULL;
        int rc = sc_theta_compact_copy(&r, a);
        if (rc) return rc;
        if (ordered && !r->ordered) qsort(r->entries, r->n, sizeof(uint64_t), cmp_u64);
        r->ordered = r->ordered || ordered;
        *out = r;
        return SC_OK;
    }
    if (a->seed_hash != sh || b->seed_hash != sh) return SC_EINVAL;
    uint64_t theta = a->theta < b->theta ? a->theta : b->theta;
    uint32_t na = 0, nb = 0, k = 0, j = 0;
    uint64_t *sa = sorted_below(a, theta, &na), *sb = sorted_below(b, theta, &nb);
    sc_theta_compact *r = (sa && sb) ? result_new(na, theta, false, seed, true) : NULL;
    if (r) {
        for (uint32_t i = 0; i < na; i++) {
            while (j < nb && sb[j] < sa[i]) j++;
            if (j >= nb || sb[j] != sa[i]) r->entries[k++] = sa[i];
        }
        r->n = k;
        if (k == 0 && theta == SC_THETA_MAX) r->empty = true;
    }
    free(sa);
    free(sb);
    *out = r;
    return r ? SC_OK : SC_ENOMEM;
}

/* Wilson score interval for a binomial proportion x / n at z standard deviations */
static void wilson(double x, double n, double z, double *lo, double *hi) {
    double p = x / n, z2 = z * z, den = 1.0 + z2 / n;
    double mid = (p + z2 / (2.0 * n)) / den;
    double half = z * sqrt(p * (1.0 - p) / n + z2 / (4.0 * n * n)) / den;
    *lo = mid - half < 0.0 ? 0.0 : mid - half;
    *hi = mid + half > 1.0 ? 1.0 : mid + half;
}

int sc_theta_jaccard(double out[3], const sc_theta_compact *a, const sc_theta_compact *b,
                     uint64_t seed) {
    if (a == b || (a->empty && b->empty)) {
        out[0] = out[1] = out[2] = 1.0;
        return SC_OK;
    }
    if (a->empty || b->empty) {
        out[0] = out[1] = out[2] = 0.0;
        return SC_OK;
    }
    uint64_t total = (uint64_t)a->n + b->n;
    uint8_t lg_k = SC_THETA_MIN_LG_K;
    while (lg_k < SC_THETA_MAX_LG_K && (1ULL << lg_k) < total) lg_k++;
    const sc_theta_compact *pair[2] = {a, b};
    sc_theta_compact *u = NULL, *x = NULL;
    int rc = sc_theta_union(&u, pair, 2, lg_k, seed, true);
    if (rc) return rc;
    if (a->n == b->n && b->n == u->n && a->theta == b->theta && b->theta == u->theta) {
        out[0] = out[1] = out[2] = 1.0;
        sc_theta_compact_destroy(u);
        return SC_OK;
    }
    const sc_theta_compact *three[3] = {a, b, u};
    rc = sc_theta_intersection(&x, three, 3, seed, true);
    if (rc == 0) {
        if (u->n == 0) {
            out[0] = out[1] = out[2] = 0.0;
        } else {
            out[1] = (double)x->n / (double)u->n;
            wilson((double)x->n, (double)u->n, 2.0, &out[0], &out[2]);
            if (u->theta == SC_THETA_MAX) out[0] = out[2] = out[1]; /* exact */
        }
    }
    sc_theta_compact_destroy(u);
    sc_theta_compact_destroy(x);
    return rc;
}

/* ---- the concurrent-framework vtable and the writer column loops ---- */

static void *vt_create(const void *config) {
    const sc_theta_config *cfg = config;
    return theta_new(cfg->lg_k, cfg->seed, cfg->buffer);
}
static void vt_destroy(void *sk) { sc_theta_destroy(sk); }
static void vt_reset(void *sk) {
    sc_theta *s = sk;
    if (s->is_list) {
        s->count = 0; /* no memset: entries past count are never read */
        s->empty = true;
    } else {
        sc_theta_reset(s);
    }
}
static int vt_merge_into(void *global, const void *local) {
    sc_theta *g = global;
    const sc_theta *l = local;
    size_t slots = l->is_list ? l->count : (1ULL << l->lg_size);
    if (l->count) g->empty = false;
    for (size_t i = 0; i < slots; i++) {
        uint64_t h = l->table[i];
        if (h && h < g->theta) {
            int rc = insert_hash(g, h);
            if (rc < 0) return rc;
        }
    }
    return SC_OK;
}
static int vt_copy(void **out, const void *sk) { return sc_theta_copy((sc_theta **)out, sk); }
static uint64_t vt_hint(const void *global) { return ((const sc_theta *)global)->theta; }
static uint64_t vt_n(const void *sk) { return ((const sc_theta *)sk)->n_inserted; }
static void vt_summarize(const void *global, uint64_t out[SC_CONC_SUMMARY_WORDS]) {
    const sc_theta *g = global;
    out[SC_THETA_SUM_RETAINED] = g->count;
    out[SC_THETA_SUM_THETA] = sc_theta_theta64(g);
    out[SC_THETA_SUM_EMPTY] = g->empty;
}
static int vt_finalize(void *global) {
    sc_theta *g = global;
    return g->theta < SC_THETA_MAX ? sc_theta_trim(g) : SC_OK;
}

const sc_sketch_vtable sc_theta_vtable = {
    "theta", vt_create, vt_destroy, vt_reset, vt_merge_into, vt_copy, vt_hint, vt_n,
    vt_summarize, vt_finalize,
};

int sc_theta_conc_create(sc_concurrent **out, uint8_t lg_k, uint64_t seed, uint32_t writers,
                         uint32_t buffer, uint64_t eager_limit) {
    *out = NULL;
    if (lg_k < SC_THETA_MIN_LG_K || lg_k > SC_THETA_MAX_LG_K || buffer < 1) return SC_EINVAL;
    sc_theta_config g = {lg_k, seed, 0}, l = {lg_k, seed, buffer};
    sc_conc_config cfg = {&sc_theta_vtable, &g, &l, writers, buffer,
                          eager_limit ? eager_limit : capacity_for(lg_k + 1, lg_k) + 1ull};
    return sc_conc_create(out, &cfg);
}

/* writer w: hash, pre-filter with the hint (Algorithm 1 shouldAdd: h < theta), append to the
 * local list, and report to the framework every `room` accepted updates */
#define CONC_LOOP(BLOCK_HASH, SKIP)                                             \
    do {                                                                        \
        int rc = sc_conc_writer_enter(c, w);                                    \
        if (rc) return rc;                                                      \
        sc_theta *loc = sc_conc_local(c, w);                                    \
        const uint64_t seed = loc->seed;                                        \
        uint64_t hint = sc_conc_hint(c, w), room = sc_conc_room(c, w), add = 0; \
        uint64_t hb[HASH_BLOCK];                                                \
        for (size_t base = 0; base < n && rc == 0; base += HASH_BLOCK) {        \
            size_t m = n - base < HASH_BLOCK ? n - base : HASH_BLOCK;           \
            BLOCK_HASH;                                                         \
            for (size_t j = 0; j < m; j++) {                                    \
                if (SKIP(base + j)) continue;                                   \
                uint64_t h = hb[j];                                             \
                if (h >= hint || h == 0) continue;                              \
                SC_DBG_ASSERT(loc->count < loc->cap);                           \
                loc->table[loc->count++] = h;                                   \
                loc->empty = false;                                             \
                if (++add == room) {                                            \
                    if ((rc = sc_conc_added(c, w, add)) < 0) break;             \
                    add = 0;                                                    \
                    loc = sc_conc_local(c, w);                                  \
                    hint = sc_conc_hint(c, w);                                  \
                    room = sc_conc_room(c, w);                                  \
                }                                                               \
            }                                                                   \
        }                                                                       \
        if (rc == 0 && add) rc = sc_conc_added(c, w, add);                      \
        sc_conc_writer_exit(c, w);                                              \
        return rc;                                                              \
    } while (0)

int sc_theta_conc_update_i64_array(sc_concurrent *c, uint32_t w, const int64_t *v, size_t n,
                                   const uint8_t *validity, int64_t valid_off) {
    if (!validity) CONC_LOOP(I64_BLOCK, NEVER);
    CONC_LOOP(I64_BLOCK, NULL_SKIP);
}
int sc_theta_conc_update_f64_array(sc_concurrent *c, uint32_t w, const double *v, size_t n,
                                   const uint8_t *validity, int64_t valid_off) {
    CONC_LOOP(F64_BLOCK, NULL_SKIP);
}
int sc_theta_conc_update_str32_array(sc_concurrent *c, uint32_t w, const int32_t *offsets,
                                     const uint8_t *data, size_t n, const uint8_t *validity,
                                     int64_t valid_off) {
    CONC_LOOP(S32_BLOCK, STR_SKIP);
}
int sc_theta_conc_update_str64_array(sc_concurrent *c, uint32_t w, const int64_t *offsets,
                                     const uint8_t *data, size_t n, const uint8_t *validity,
                                     int64_t valid_off) {
    CONC_LOOP(S64_BLOCK, STR_SKIP);
}

int sc_theta_conc_snapshot(sc_concurrent *c, sc_theta_compact **out) {
    *out = NULL;
    void *copy = NULL;
    int rc = sc_conc_snapshot(c, &copy);
    if (rc) return rc;
    rc = sc_theta_compact_of(out, copy, true);
    sc_theta_destroy(copy);
    return rc;
}
