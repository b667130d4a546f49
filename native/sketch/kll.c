/* KLL quantiles sketch: see kll.h for the contract, error bound and serialized format.
 *
 * Memory layout (the same as the DataSketches C++ implementation, which makes the format a
 * straight copy): one buffer of total capacity C = sum of level capacities; level i holds
 * items[levels[i], levels[i+1]); levels[num_levels] = C; level 0 grows downwards into the
 * free space [0, levels[0]). When the buffer is full, the lowest level at or over its
 * capacity is compacted: sorted, halved by a random bit (keep odd or even items), and the
 * surviving half merged into the level above with doubled weight.
 */
#include "kll.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "sc_status.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "kll.c serializes by memcpy and assumes a little-endian host"
#endif

#define PREAMBLE_SHORT 2
#define PREAMBLE_FULL 5
#define SERIAL_V1 1
#define SERIAL_V2 2
#define FLAG_EMPTY 1u
#define FLAG_L0_SORTED 2u
#define FLAG_SINGLE 4u
#define HEADER_SHORT 8u
#define HEADER_FULL 20u

/* ---- capacities: level h of L levels holds max(m, round(k * (2/3)^(L-h-1))) items ---- */

static uint32_t cap_depth_small(uint32_t k, uint32_t depth) { /* round(k (2/3)^depth), depth <= 30 */
    uint64_t pow3 = 1;
    for (uint32_t d = 0; d < depth; d++) pow3 *= 3;
    return (uint32_t)(((((uint64_t)k << 1) << depth) / pow3 + 1) >> 1);
}

static uint32_t cap_depth(uint32_t k, uint32_t depth) {
    if (depth <= 30) return cap_depth_small(k, depth);
    uint32_t half = depth / 2;
    return cap_depth_small(cap_depth_small(k, half), depth - half);
}

static uint32_t level_capacity(uint32_t k, uint32_t num_levels, uint32_t height) {
    uint32_t c = cap_depth(k, num_levels - height - 1);
    return c > SC_KLL_M ? c : SC_KLL_M;
}

static uint32_t total_capacity(uint32_t k, uint32_t num_levels) {
    uint32_t total = 0;
    for (uint32_t h = 0; h < num_levels; h++) total += level_capacity(k, num_levels, h);
    return total;
}

/* ---- deterministic random bits (splitmix64 stream) ---- */

static uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static _Atomic uint64_t g_auto_seed = 0;

static void seed_rng(sc_kll *sk, uint64_t seed) {
    if (seed == 0) {
        uint64_t c = atomic_fetch_add_explicit(&g_auto_seed, 1, memory_order_relaxed);
        uint64_t s = c ^ 0x6b6c6c5f73656564ull; /* "kll_seed" */
        seed = splitmix64(&s);
    }
    sk->rng = seed;
    sk->bitbuf = 0, sk->nbits = 0;
}

static inline uint32_t random_bit(sc_kll *sk) {
    if (sk->nbits == 0) {
        sk->bitbuf = splitmix64(&sk->rng);
        sk->nbits = 64;
    }
    uint32_t b = (uint32_t)(sk->bitbuf & 1u);
    sk->bitbuf >>= 1, sk->nbits--;
    return b;
}

/* ---- sorting doubles (no NaN ever reaches the buffer): introsort ---- */

#define SWAPD(x, y) do { double _t = (x); (x) = (y); (y) = _t; } while (0)

static void sift_down(double *a, size_t root, size_t n) {
    for (;;) {
        size_t child = 2 * root + 1;
        if (child >= n) return;
        if (child + 1 < n && a[child] < a[child + 1]) child++;
        if (!(a[root] < a[child])) return;
        SWAPD(a[root], a[child]);
        root = child;
    }
}

static void heap_sort(double *a, size_t n) {
    for (size_t i = n / 2; i-- > 0;) sift_down(a, i, n);
    for (size_t end = n; end-- > 1;) {
        SWAPD(a[0], a[end]);
        sift_down(a, 0, end);
    }
}

static void network_sort16(double *a, size_t n);

static void intro_sort(double *a, size_t n, int depth) {
    while (n > 16) {
        if (depth-- == 0) {
            heap_sort(a, n);
            return;
        }
        size_t mid = n / 2;
        if (a[mid] < a[0]) SWAPD(a[mid], a[0]);
        if (a[n - 1] < a[mid]) SWAPD(a[n - 1], a[mid]);
        if (a[mid] < a[0]) SWAPD(a[mid], a[0]);
        double p = a[mid];
        size_t i = 0, j = n - 1;
        for (;;) {
            do i++; while (a[i] < p);
            do j--; while (p < a[j]);
            if (i >= j) break;
            SWAPD(a[i], a[j]);
        }
        /* [0, i) <= p <= [i, n) */
        if (i < n - i) {
            intro_sort(a, i, depth);
            a += i;
            n -= i;
        } else {
            intro_sort(a + i, n - i, depth);
            n = i;
        }
    }
    network_sort16(a, n);
}

/* n <= 16 (the common case: level 0 is compacted at ~8-16 items): Batcher's odd-even
 * merge sort network on a padded copy, branch-free (min/max), verified by the 0-1 principle. */
static inline double min_d(double a, double b) { return b < a ? b : a; }
static inline double max_d(double a, double b) { return a < b ? b : a; }
#define CE(i, j) do { double x_ = t[i], y_ = t[j]; t[i] = min_d(x_, y_); t[j] = max_d(x_, y_); } while (0)
static void network_sort16(double *a, size_t n) {
    double t[16];
    for (size_t i = 0; i < 16; i++) t[i] = i < n ? a[i] : INFINITY;
    CE(0,1); CE(2,3); CE(4,5); CE(6,7); CE(8,9); CE(10,11); CE(12,13); CE(14,15); CE(0,2);
    CE(1,3); CE(4,6); CE(5,7); CE(8,10); CE(9,11); CE(12,14); CE(13,15); CE(1,2); CE(5,6);
    CE(9,10); CE(13,14); CE(0,4); CE(1,5); CE(2,6); CE(3,7); CE(8,12); CE(9,13); CE(10,14);
    CE(11,15); CE(2,4); CE(3,5); CE(10,12); CE(11,13); CE(1,2); CE(3,4); CE(5,6); CE(9,10);
    CE(11,12); CE(13,14); CE(0,8); CE(1,9); CE(2,10); CE(3,11); CE(4,12); CE(5,13); CE(6,14);
    CE(7,15); CE(4,8); CE(5,9); CE(6,10); CE(7,11); CE(2,4); CE(3,5); CE(6,8); CE(7,9);
    CE(10,12); CE(11,13); CE(1,2); CE(3,4); CE(5,6); CE(7,8); CE(9,10); CE(11,12); CE(13,14);
    for (size_t i = 0; i < n; i++) a[i] = t[i];
}
#undef CE

static void sort_doubles(double *a, size_t n) {
    if (n <= 16) {
        network_sort16(a, n);
        return;
    }
    int depth = 0;
    for (size_t m = n; m > 1; m >>= 1) depth += 2;
    intro_sort(a, n, depth);
}

/* Merge sorted a[0,na) and b[0,nb) into dst. dst may alias the tail of b's storage as in
 * KLL compaction (dst + na + nb == b + nb, dst >= a + na): a forward merge never overwrites an
 * unread item. */
static void merge_sorted(const double *a, size_t na, const double *b, size_t nb, double *dst) {
    size_t i = 0, j = 0, o = 0;
    while (i < na && j < nb) { /* branch-free: the comparison is unpredictable */
        double x = a[i], y = b[j];
        size_t take_b = y < x;
        dst[o++] = take_b ? y : x;
        j += take_b;
        i += 1 - take_b;
    }
    while (i < na) dst[o++] = a[i++];
    if (j < nb && dst + o != b + j) memmove(dst + o, b + j, (nb - j) * sizeof(double));
}

/* keep one of each adjacent pair, in the lower half of [start, start+len) */
static void halve_down(sc_kll *sk, double *buf, uint32_t len) {
    uint32_t half = len / 2, j = random_bit(sk);
    for (uint32_t i = 0; i < half; i++, j += 2) buf[i] = buf[j];
}

/* keep one of each adjacent pair, in the upper half of [start, start+len) */
static void halve_up(sc_kll *sk, double *buf, uint32_t len) {
    uint32_t half = len / 2;
    int64_t j = (int64_t)len - 1 - random_bit(sk);
    for (int64_t i = (int64_t)len - 1; i >= (int64_t)half; i--, j -= 2) buf[i] = buf[j];
}

/* ---- lifecycle ---- */

static int ensure_alloc(sc_kll *sk, uint32_t need) {
    if (sk->alloc >= need) return SC_OK;
    double *p = realloc(sk->items, (size_t)need * sizeof(double));
    if (!p) return SC_ENOMEM;
    sk->items = p, sk->alloc = need;
    return SC_OK;
}

static void init_empty(sc_kll *sk) {
    memset(sk->levels, 0, sizeof(sk->levels));
    sk->levels[0] = sk->levels[1] = sk->k;
    sk->num_levels = 1, sk->n = 0, sk->min = sk->max = NAN, sk->min_k = sk->k, sk->l0_sorted = 0;
}

int sc_kll_new(sc_kll **out, sc_kll_kind kind, const sc_kll_config *cfg) {
    *out = NULL;
    uint32_t k = (cfg && cfg->k) ? cfg->k : SC_KLL_DEFAULT_K;
    if (k < SC_KLL_MIN_K || k > SC_KLL_MAX_K) return SC_EINVAL;
    if (kind != SC_KLL_DOUBLE && kind != SC_KLL_FLOAT) return SC_EINVAL;
    sc_kll *sk = calloc(1, sizeof(*sk));
    if (!sk) return SC_ENOMEM;
    sk->k = (uint16_t)k;
    sk->kind = (uint8_t)kind;
    if (ensure_alloc(sk, k) != SC_OK) {
        free(sk);
        return SC_ENOMEM;
    }
    init_empty(sk);
    seed_rng(sk, cfg ? cfg->seed : 0);
    *out = sk;
    return SC_OK;
}

void sc_kll_destroy(sc_kll *sk) {
    if (sk) free(sk->items), free(sk);
}

void sc_kll_reset(sc_kll *sk) { init_empty(sk); }

int sc_kll_copy(sc_kll **out, const sc_kll *sk) {
    *out = NULL;
    sc_kll *c = malloc(sizeof(*c));
    if (!c) return SC_ENOMEM;
    *c = *sk;
    uint32_t cap = sk->levels[sk->num_levels];
    c->items = malloc((size_t)cap * sizeof(double));
    if (!c->items) {
        free(c);
        return SC_ENOMEM;
    }
    c->alloc = cap;
    uint32_t beg = sk->levels[0];
    memcpy(c->items + beg, sk->items + beg, (size_t)(cap - beg) * sizeof(double));
    *out = c;
    return SC_OK;
}

double sc_kll_min(const sc_kll *sk) { return sk->n ? sk->min : NAN; }
double sc_kll_max(const sc_kll *sk) { return sk->n ? sk->max : NAN; }

double sc_kll_rank_error_for_k(uint32_t k, int pmf) {
    return pmf ? 2.446 / pow((double)k, 0.9433) : 2.296 / pow((double)k, 0.9723);
}

double sc_kll_normalized_rank_error(const sc_kll *sk, int pmf) {
    return sc_kll_rank_error_for_k(sk->min_k, pmf);
}

/* ---- compaction while updating (buffer exactly full: levels[0] == 0) ---- */

static int add_empty_top_level(sc_kll *sk) {
    uint32_t L = sk->num_levels;
    if (L >= SC_KLL_MAX_LEVELS) return SC_EINTERNAL;
    uint32_t cur = sk->levels[L];
    if (sk->levels[0] != 0) return SC_EINTERNAL;
    uint32_t delta = level_capacity(sk->k, L + 1, 0);
    int rc = ensure_alloc(sk, cur + delta);
    if (rc) return rc;
    memmove(sk->items + delta, sk->items, (size_t)cur * sizeof(double));
    for (uint32_t i = 0; i <= L; i++) sk->levels[i] += delta;
    sk->num_levels = (uint8_t)(L + 1);
    sk->levels[L + 1] = cur + delta;
    return SC_OK;
}

static int compress_while_updating(sc_kll *sk) {
    if (sk->caps_for != sk->num_levels) { /* memoized: capacities change only with L */
        for (uint32_t h = 0; h < sk->num_levels; h++)
            sk->caps[h] = level_capacity(sk->k, sk->num_levels, h);
        sk->caps_for = sk->num_levels;
    }
    uint32_t level = 0;
    for (;; level++) {
        if (level >= sk->num_levels) return SC_EINTERNAL;
        if (sk->levels[level + 1] - sk->levels[level] >= sk->caps[level]) break;
    }
    if (level == (uint32_t)sk->num_levels - 1) {
        int rc = add_empty_top_level(sk);
        if (rc) return rc;
    }
    uint32_t *lv = sk->levels;
    double *it = sk->items;
    uint32_t raw_beg = lv[level], raw_lim = lv[level + 1];
    uint32_t pop_above = lv[level + 2] - raw_lim;
    uint32_t raw_pop = raw_lim - raw_beg;
    uint32_t odd = raw_pop & 1u;
    uint32_t adj_beg = raw_beg + odd, adj_pop = raw_pop - odd, half = adj_pop / 2;
    if (level == 0 && !sk->l0_sorted) sort_doubles(it + adj_beg, adj_pop);
    if (pop_above == 0) {
        halve_up(sk, it + adj_beg, adj_pop);
    } else {
        halve_down(sk, it + adj_beg, adj_pop);
        merge_sorted(it + adj_beg, half, it + raw_lim, pop_above, it + adj_beg + half);
    }
    lv[level + 1] -= half;
    if (odd) {
        lv[level] = lv[level + 1] - 1;
        if (lv[level] != raw_beg) it[lv[level]] = it[raw_beg];
    } else {
        lv[level] = lv[level + 1];
    }
    if (lv[level] != raw_beg + half) return SC_EINTERNAL;
    if (level > 0) { /* shift the levels below up by half to free space at the bottom */
        uint32_t amount = raw_beg - lv[0];
        memmove(it + lv[0] + half, it + lv[0], (size_t)amount * sizeof(double));
        for (uint32_t l = 0; l < level; l++) lv[l] += half;
    }
    return SC_OK;
}

/* ---- updates ---- */

int sc_kll_update(sc_kll *sk, double x) {
    if (sk->kind == SC_KLL_FLOAT) x = (double)(float)x;
    if (isnan(x)) return SC_OK;
    if (sk->levels[0] == 0) {
        int rc = compress_while_updating(sk);
        if (rc) return rc;
    }
    if (sk->n == 0) {
        sk->min = sk->max = x;
    } else {
        if (x < sk->min) sk->min = x;
        if (sk->max < x) sk->max = x;
    }
    sk->items[--sk->levels[0]] = x;
    sk->n++;
    sk->l0_sorted = 0;
    return SC_OK;
}

static inline int bit_is_set(const uint8_t *bm, size_t i) { return (bm[i >> 3] >> (i & 7)) & 1; }

/* One generic column loop per source type: fill the free space of level 0 in chunks,
 * skipping NaN (branch-free) and nulls, tracking min and max; compact when full. */
#define SC_KLL_INGEST(NAME, SRC_T)                                                         \
    int NAME(sc_kll *sk, const SRC_T *x, size_t n, const uint8_t *validity, size_t off) {  \
        const int to_float = sk->kind == SC_KLL_FLOAT;                                   \
        size_t i = 0;                                                                    \
        while (i < n) {                                                                  \
            if (sk->levels[0] == 0) {                                                    \
                int rc = compress_while_updating(sk);                                    \
                if (rc) return rc;                                                       \
            }                                                                            \
            uint32_t w = sk->levels[0];                                                  \
            size_t take = n - i < (size_t)w ? n - i : (size_t)w;                         \
            double *it = sk->items;                                                      \
            double mn = sk->n ? sk->min : INFINITY, mx = sk->n ? sk->max : -INFINITY;    \
            const SRC_T *src = x + i;                                                    \
            if (validity == NULL && !to_float) {                                         \
                for (size_t j = 0; j < take; j++) {                                      \
                    double v = (double)src[j];                                           \
                    it[w - 1] = v;                                                       \
                    w -= (v == v);                                                       \
                    mn = v < mn ? v : mn;                                                \
                    mx = mx < v ? v : mx;                                                \
                }                                                                        \
            } else {                                                                     \
                for (size_t j = 0; j < take; j++) {                                      \
                    if (validity && !bit_is_set(validity, off + i + j)) continue;        \
                    double v = to_float ? (double)(float)src[j] : (double)src[j];        \
                    if (v != v) continue;                                                \
                    it[--w] = v;                                                         \
                    mn = v < mn ? v : mn;                                                \
                    mx = mx < v ? v : mx;                                                \
                }                                                                        \
            }                                                                            \
            uint32_t added = sk->levels[0] - w;                                          \
            if (added) {                                                                 \
                sk->levels[0] = w;                                                       \
                sk->n += added;                                                          \
                sk->min = mn;                                                            \
                sk->max = mx;                                                            \
                sk->l0_sorted = 0;                                                       \
            }                                                                            \
            i += take;                                                                   \
        }                                                                                \
        return SC_OK;                                                                    \
    }

SC_KLL_INGEST(sc_kll_update_f64, double)
SC_KLL_INGEST(sc_kll_update_f32, float)
SC_KLL_INGEST(sc_kll_update_i64, int64_t)

/* ---- merge ---- */

static inline uint32_t level_size(const sc_kll *sk, uint32_t lvl) {
    return lvl < sk->num_levels ? sk->levels[lvl + 1] - sk->levels[lvl] : 0;
}

typedef struct {
    uint32_t num_levels, capacity, num_items;
} compress_result;

/* Compact levels of buf (described by in_lv, in place; out_lv receives the result) until
 * the items fit the total capacity of the resulting number of levels. */
static int general_compress(sc_kll *sk, uint32_t num_levels_in, double *buf, uint32_t *in_lv,
                            uint32_t *out_lv, compress_result *res) {
    const uint32_t k = sk->k;
    uint32_t cur_levels = num_levels_in;
    uint32_t count = in_lv[cur_levels] - in_lv[0];
    uint32_t target = total_capacity(k, cur_levels);
    out_lv[0] = 0;
    for (uint32_t lvl = 0;; lvl++) {
        if (lvl == cur_levels - 1) in_lv[lvl + 2] = in_lv[lvl + 1];
        uint32_t raw_beg = in_lv[lvl], raw_lim = in_lv[lvl + 1], raw_pop = raw_lim - raw_beg;
        if (count < target || raw_pop < level_capacity(k, cur_levels, lvl)) {
            if (raw_beg < out_lv[lvl]) return SC_EINTERNAL;
            memmove(buf + out_lv[lvl], buf + raw_beg, (size_t)raw_pop * sizeof(double));
            out_lv[lvl + 1] = out_lv[lvl] + raw_pop;
        } else {
            uint32_t pop_above = in_lv[lvl + 2] - raw_lim;
            uint32_t odd = raw_pop & 1u;
            uint32_t adj_beg = raw_beg + odd, adj_pop = raw_pop - odd, half = adj_pop / 2;
            if (odd) buf[out_lv[lvl]] = buf[raw_beg];
            out_lv[lvl + 1] = out_lv[lvl] + odd;
            if (lvl == 0 && !sk->l0_sorted) sort_doubles(buf + adj_beg, adj_pop);
            if (pop_above == 0) {
                halve_up(sk, buf + adj_beg, adj_pop);
            } else {
                halve_down(sk, buf + adj_beg, adj_pop);
                merge_sorted(buf + adj_beg, half, buf + raw_lim, pop_above, buf + adj_beg + half);
            }
            count -= half;
            in_lv[lvl + 1] -= half;
            if (lvl == cur_levels - 1) {
                if (cur_levels >= SC_KLL_MAX_LEVELS) return SC_EINTERNAL;
                cur_levels++;
                target += level_capacity(k, cur_levels, 0);
            }
        }
        if (lvl == cur_levels - 1) break;
    }
    res->num_levels = cur_levels;
    res->capacity = target;
    res->num_items = count;
    return SC_OK;
}

/* Append items to level 0 as updates would (min/max/n untouched by the caller's choice). */
static int append_level0(sc_kll *sk, const double *v, uint32_t cnt) {
    uint32_t i = 0;
    while (i < cnt) {
        if (sk->levels[0] == 0) {
            int rc = compress_while_updating(sk);
            if (rc) return rc;
        }
        uint32_t w = sk->levels[0], take = cnt - i < w ? cnt - i : w;
        for (uint32_t j = 0; j < take; j++) sk->items[--w] = v[i + j];
        sk->levels[0] = w;
        sk->l0_sorted = 0;
        i += take;
    }
    return SC_OK;
}

static int merge_higher_levels(sc_kll *dst, const sc_kll *src) {
    uint32_t total = sc_kll_num_retained(dst) + (src->levels[src->num_levels] - src->levels[1]);
    double *work = malloc((size_t)total * sizeof(double));
    if (!work) return SC_ENOMEM;
    uint32_t in_lv[SC_KLL_MAX_LEVELS + 3], out_lv[SC_KLL_MAX_LEVELS + 3];
    uint32_t prov = dst->num_levels > src->num_levels ? dst->num_levels : src->num_levels;
    uint32_t p0 = level_size(dst, 0);
    memcpy(work, dst->items + dst->levels[0], (size_t)p0 * sizeof(double));
    in_lv[0] = 0;
    in_lv[1] = p0;
    for (uint32_t lvl = 1; lvl < prov; lvl++) {
        uint32_t sp = level_size(dst, lvl), op = level_size(src, lvl);
        const double *a = dst->items + (lvl < dst->num_levels ? dst->levels[lvl] : 0);
        const double *b = src->items + src->levels[lvl < src->num_levels ? lvl : 0];
        merge_sorted(a, sp, b, op, work + in_lv[lvl]);
        in_lv[lvl + 1] = in_lv[lvl] + sp + op;
    }
    compress_result r;
    int rc = general_compress(dst, prov, work, in_lv, out_lv, &r);
    if (rc == SC_OK) rc = ensure_alloc(dst, r.capacity);
    if (rc == SC_OK) {
        uint32_t bottom = r.capacity - r.num_items;
        memcpy(dst->items + bottom, work + out_lv[0], (size_t)r.num_items * sizeof(double));
        for (uint32_t l = 0; l <= r.num_levels; l++) dst->levels[l] = out_lv[l] - out_lv[0] + bottom;
        dst->num_levels = (uint8_t)r.num_levels;
    }
    free(work);
    return rc;
}

int sc_kll_merge(sc_kll *dst, const sc_kll *src) {
    if (src->n == 0) return SC_OK;
    if (dst->kind != src->kind) return SC_ETYPE;
    if (dst == src) { /* merging a sketch with itself: merge a copy */
        sc_kll *c;
        int rc = sc_kll_copy(&c, src);
        if (rc) return rc;
        rc = sc_kll_merge(dst, c);
        sc_kll_destroy(c);
        return rc;
    }
    double mn = dst->n ? (src->min < dst->min ? src->min : dst->min) : src->min;
    double mx = dst->n ? (dst->max < src->max ? src->max : dst->max) : src->max;
    uint64_t final_n = dst->n + src->n;
    int rc = append_level0(dst, src->items + src->levels[0], level_size(src, 0));
    if (rc == SC_OK && src->num_levels >= 2) rc = merge_higher_levels(dst, src);
    if (rc) return rc; /* ENOMEM: dst keeps a consistent but partial state */
    dst->min = mn, dst->max = mx, dst->n = final_n;
    if (src->num_levels > 1 && src->min_k < dst->min_k) dst->min_k = src->min_k;
    return SC_OK;
}

/* ---- queries over a sorted view (items ascending with cumulative weights) ---- */

typedef struct { double *v; uint64_t *cw; uint32_t len; uint64_t total; } kll_view;

static void view_free(kll_view *vw) { free(vw->v); free(vw->cw); }

static int view_build(kll_view *vw, const sc_kll *sk) {
    uint32_t R = sc_kll_num_retained(sk);
    memset(vw, 0, sizeof(*vw));
    double *v2 = malloc((size_t)R * sizeof(double));
    uint64_t *w2 = malloc((size_t)R * sizeof(uint64_t));
    vw->v = malloc((size_t)R * sizeof(double));
    vw->cw = malloc((size_t)R * sizeof(uint64_t));
    if (!v2 || !w2 || !vw->v || !vw->cw) {
        free(v2), free(w2), view_free(vw);
        return SC_ENOMEM;
    }
    uint32_t len = level_size(sk, 0);
    memcpy(vw->v, sk->items + sk->levels[0], (size_t)len * sizeof(double));
    if (!sk->l0_sorted) sort_doubles(vw->v, len);
    for (uint32_t i = 0; i < len; i++) vw->cw[i] = 1;
    for (uint32_t lvl = 1; lvl < sk->num_levels; lvl++) {
        const double *b = sk->items + sk->levels[lvl];
        uint32_t nb = level_size(sk, lvl), i = 0, j = 0, o = 0;
        uint64_t wb = 1ull << lvl;
        while (i < len && j < nb) {
            if (b[j] < vw->v[i]) { v2[o] = b[j++]; w2[o++] = wb; }
            else { v2[o] = vw->v[i]; w2[o++] = vw->cw[i++]; }
        }
        for (; i < len; i++, o++) { v2[o] = vw->v[i]; w2[o] = vw->cw[i]; }
        for (; j < nb; j++, o++) { v2[o] = b[j]; w2[o] = wb; }
        double *tv = vw->v; vw->v = v2; v2 = tv;
        uint64_t *tw = vw->cw; vw->cw = w2; w2 = tw;
        len = o;
    }
    free(v2), free(w2);
    uint64_t acc = 0;
    for (uint32_t i = 0; i < len; i++) vw->cw[i] = (acc += vw->cw[i]);
    vw->len = len, vw->total = acc;
    return acc == sk->n ? SC_OK : SC_EINTERNAL;
}

static double view_rank(const kll_view *vw, double x, int inclusive) {
    if (isnan(x)) return NAN;
    uint32_t lo = 0, hi = vw->len; /* first index with v > x (inclusive) or v >= x */
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        int go_right = inclusive ? !(x < vw->v[mid]) : (vw->v[mid] < x);
        if (go_right) lo = mid + 1; else hi = mid;
    }
    return lo == 0 ? 0.0 : (double)vw->cw[lo - 1] / (double)vw->total;
}

static double view_quantile(const kll_view *vw, double rank, int inclusive) {
    double t = rank * (double)vw->total;
    uint64_t w = (uint64_t)(inclusive ? ceil(t) : t);
    uint32_t lo = 0, hi = vw->len; /* first index with cw >= w (inclusive) or cw > w */
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        int go_right = inclusive ? (vw->cw[mid] < w) : !(w < vw->cw[mid]);
        if (go_right) lo = mid + 1; else hi = mid;
    }
    return lo == vw->len ? vw->v[vw->len - 1] : vw->v[lo];
}

/* ranks (quantile == 0) or quantiles (quantile == 1) of m inputs from one sorted view */
static int view_query(const sc_kll *sk, const double *in, size_t m, int inclusive, double *out,
                      int quantile) {
    if (sk->n == 0) {
        for (size_t i = 0; i < m; i++) out[i] = NAN;
        return SC_OK;
    }
    kll_view vw;
    int rc = view_build(&vw, sk);
    for (size_t i = 0; i < m && rc == SC_OK; i++)
        out[i] = quantile ? view_quantile(&vw, in[i], inclusive) : view_rank(&vw, in[i], inclusive);
    view_free(&vw);
    return rc;
}

int sc_kll_ranks(const sc_kll *sk, const double *x, size_t m, int inclusive, double *out) {
    return view_query(sk, x, m, inclusive, out, 0);
}

int sc_kll_quantiles(const sc_kll *sk, const double *ranks, size_t m, int inclusive, double *out) {
    for (size_t i = 0; i < m; i++)
        if (!(ranks[i] >= 0.0 && ranks[i] <= 1.0)) return SC_EINVAL;
    return view_query(sk, ranks, m, inclusive, out, 1);
}

int sc_kll_cdf(const sc_kll *sk, const double *splits, size_t m, int inclusive, double *out) {
    for (size_t i = 0; i < m; i++) {
        if (isnan(splits[i])) return SC_EINVAL;
        if (i + 1 < m && !(splits[i] < splits[i + 1])) return SC_EINVAL;
    }
    if (sk->n == 0) return SC_EEMPTY;
    int rc = sc_kll_ranks(sk, splits, m, inclusive, out);
    out[m] = 1.0;
    return rc;
}

int sc_kll_pmf(const sc_kll *sk, const double *splits, size_t m, int inclusive, double *out) {
    int rc = sc_kll_cdf(sk, splits, m, inclusive, out);
    if (rc) return rc;
    for (size_t i = m; i > 0; i--) out[i] -= out[i - 1];
    return SC_OK;
}

/* ---- serialization ---- */

static size_t item_size(const sc_kll *sk) { return sk->kind == SC_KLL_FLOAT ? 4 : 8; }

size_t sc_kll_serialized_size(const sc_kll *sk) {
    if (sk->n == 0) return HEADER_SHORT;
    if (sk->n == 1) return HEADER_SHORT + item_size(sk);
    return HEADER_FULL + 4u * sk->num_levels + (sc_kll_num_retained(sk) + 2) * item_size(sk);
}

static uint8_t *put_item(uint8_t *p, double v, int is_float) {
    float f = (float)v;
    memcpy(p, is_float ? (const void *)&f : (const void *)&v, is_float ? 4 : 8);
    return p + (is_float ? 4 : 8);
}

int sc_kll_serialize(const sc_kll *sk, uint8_t *buf, size_t cap, size_t *written) {
    size_t size = sc_kll_serialized_size(sk);
    if (cap < size) return SC_EINVAL;
    const int single = sk->n == 1, isf = sk->kind == SC_KLL_FLOAT;
    uint8_t *p = buf;
    *p++ = (sk->n == 0 || single) ? PREAMBLE_SHORT : PREAMBLE_FULL;
    *p++ = single ? SERIAL_V2 : SERIAL_V1;
    *p++ = SC_KLL_FAMILY;
    *p++ = (uint8_t)((sk->n == 0 ? FLAG_EMPTY : 0) | (sk->l0_sorted ? FLAG_L0_SORTED : 0) |
                     (single ? FLAG_SINGLE : 0));
    memcpy(p, &sk->k, 2);
    p += 2;
    *p++ = SC_KLL_M;
    *p++ = 0;
    if (sk->n >= 2) {
        memcpy(p, &sk->n, 8);
        memcpy(p + 8, &sk->min_k, 2);
        p[10] = sk->num_levels;
        p[11] = 0;
        p += 12;
        memcpy(p, sk->levels, 4u * sk->num_levels);
        p += 4u * sk->num_levels;
        p = put_item(p, sk->min, isf);
        p = put_item(p, sk->max, isf);
    }
    for (uint32_t i = sk->levels[0]; i < sk->levels[sk->num_levels] && sk->n; i++)
        p = put_item(p, sk->items[i], isf);
    *written = (size_t)(p - buf);
    return *written == size ? SC_OK : SC_EINTERNAL;
}

static const uint8_t *get_item(const uint8_t *p, double *v, int is_float) {
    float f;
    if (is_float) memcpy(&f, p, 4), *v = (double)f;
    else memcpy(v, p, 8);
    return p + (is_float ? 4 : 8);
}

static int deserialize_body(sc_kll *sk, const uint8_t *buf, size_t len, uint8_t flags) {
    const int isf = sk->kind == SC_KLL_FLOAT;
    const size_t isz = item_size(sk);
    const uint8_t *p = buf + HEADER_SHORT;
    if (flags & FLAG_SINGLE) {
        if (len != HEADER_SHORT + isz) return SC_EFORMAT;
        double v;
        get_item(p, &v, isf);
        if (isnan(v)) return SC_EFORMAT;
        return sc_kll_update(sk, v);
    }
    if (len < HEADER_FULL) return SC_EFORMAT;
    uint64_t n;
    uint16_t min_k;
    memcpy(&n, p, 8);
    memcpy(&min_k, p + 8, 2);
    uint32_t L = p[10];
    p += 12;
    if (L < 1 || L > SC_KLL_MAX_LEVELS || min_k < SC_KLL_MIN_K || min_k > sk->k || n < 2)
        return SC_EFORMAT;
    uint32_t cap = total_capacity(sk->k, L);
    if (len < HEADER_FULL + 4u * L) return SC_EFORMAT;
    uint32_t lv[SC_KLL_MAX_LEVELS + 3] = {0};
    memcpy(lv, p, 4u * L);
    p += 4u * L;
    lv[L] = cap;
    for (uint32_t i = 0; i < L; i++)
        if (lv[i] > lv[i + 1]) return SC_EFORMAT;
    uint32_t R = cap - lv[0];
    if (len != HEADER_FULL + 4u * L + ((size_t)R + 2) * isz) return SC_EFORMAT;
    int rc = ensure_alloc(sk, cap);
    if (rc) return rc;
    double mn, mx;
    p = get_item(p, &mn, isf);
    p = get_item(p, &mx, isf);
    if (isnan(mn) || isnan(mx) || mx < mn) return SC_EFORMAT;
    for (uint32_t i = lv[0]; i < cap; i++) {
        p = get_item(p, &sk->items[i], isf);
        if (isnan(sk->items[i])) return SC_EFORMAT;
    }
    memcpy(sk->levels, lv, sizeof(lv));
    sk->num_levels = (uint8_t)L, sk->n = n, sk->min = mn, sk->max = mx, sk->min_k = min_k;
    sk->l0_sorted = (flags & FLAG_L0_SORTED) != 0;
    return sc_kll_check(sk) == SC_OK ? SC_OK : SC_EFORMAT;
}

int sc_kll_deserialize(sc_kll **out, sc_kll_kind kind, const uint8_t *buf, size_t len, uint64_t seed) {
    *out = NULL;
    if (len < HEADER_SHORT) return SC_EFORMAT;
    uint8_t pre = buf[0], ver = buf[1], fam = buf[2], flags = buf[3], m = buf[6];
    uint16_t k;
    memcpy(&k, buf + 4, 2);
    if (fam != SC_KLL_FAMILY || m != SC_KLL_M || k < SC_KLL_MIN_K) return SC_EFORMAT;
    if (ver != SERIAL_V1 && ver != SERIAL_V2) return SC_EFORMAT;
    int empty = (flags & FLAG_EMPTY) != 0, single = (flags & FLAG_SINGLE) != 0;
    if (pre != ((empty || single) ? PREAMBLE_SHORT : PREAMBLE_FULL)) return SC_EFORMAT;
    sc_kll_config cfg = {k, seed};
    sc_kll *sk;
    int rc = sc_kll_new(&sk, kind, &cfg);
    if (rc) return rc;
    rc = empty ? (len == HEADER_SHORT ? SC_OK : SC_EFORMAT) : deserialize_body(sk, buf, len, flags);
    if (rc) {
        sc_kll_destroy(sk);
        return rc;
    }
    *out = sk;
    return SC_OK;
}

/* ---- invariants ---- */

int sc_kll_check(const sc_kll *sk) {
    uint32_t L = sk->num_levels;
    if (L < 1 || L > SC_KLL_MAX_LEVELS) return SC_EINTERNAL;
    if (sk->levels[L] != total_capacity(sk->k, L) || sk->levels[L] > sk->alloc) return SC_EINTERNAL;
    uint64_t weight = 0;
    for (uint32_t l = 0; l < L; l++) {
        if (sk->levels[l] > sk->levels[l + 1]) return SC_EINTERNAL;
        uint64_t pop = sk->levels[l + 1] - sk->levels[l], w;
        if (__builtin_mul_overflow(pop, (uint64_t)1 << l, &w) ||
            __builtin_add_overflow(weight, w, &weight))
            return SC_EINTERNAL;
        for (uint32_t i = sk->levels[l]; i < sk->levels[l + 1]; i++) {
            double v = sk->items[i];
            if (!(v >= sk->min && v <= sk->max)) return SC_EINTERNAL;
            if ((l > 0 || sk->l0_sorted) && i > sk->levels[l] && v < sk->items[i - 1])
                return SC_EINTERNAL;
        }
    }
    return weight == sk->n ? SC_OK : SC_EINTERNAL;
}

/* ---- concurrent framework vtables ---- */

static void *vt_create_double(const void *cfg) {
    sc_kll *sk;
    return sc_kll_new(&sk, SC_KLL_DOUBLE, (const sc_kll_config *)cfg) ? NULL : sk;
}
static void *vt_create_float(const void *cfg) {
    sc_kll *sk;
    return sc_kll_new(&sk, SC_KLL_FLOAT, (const sc_kll_config *)cfg) ? NULL : sk;
}
static void vt_destroy(void *sk) { sc_kll_destroy((sc_kll *)sk); }
static void vt_reset(void *sk) { sc_kll_reset((sc_kll *)sk); }
static int vt_merge_into(void *g, const void *l) { return sc_kll_merge((sc_kll *)g, (const sc_kll *)l); }
static int vt_copy(void **out, const void *sk) { return sc_kll_copy((sc_kll **)out, (const sc_kll *)sk); }
static uint64_t vt_hint(const void *g) { (void)g; return 0; }
static uint64_t vt_n(const void *sk) { return ((const sc_kll *)sk)->n; }

static void vt_summarize(const void *g, uint64_t out[SC_CONC_SUMMARY_WORDS]) {
    const sc_kll *sk = (const sc_kll *)g;
    double mn = sc_kll_min(sk), mx = sc_kll_max(sk);
    memset(out, 0, SC_CONC_SUMMARY_WORDS * sizeof(uint64_t));
    out[0] = sk->n;
    memcpy(&out[1], &mn, 8);
    memcpy(&out[2], &mx, 8);
    out[3] = sc_kll_num_retained(sk);
    out[4] = sk->min_k;
    out[5] = sk->k;
}

#define SC_KLL_VTABLE(NAME, CREATE)                                                         \
    {.name = NAME, .create = CREATE, .destroy = vt_destroy, .reset = vt_reset,              \
     .merge_into = vt_merge_into, .copy = vt_copy, .hint = vt_hint, .n = vt_n,              \
     .summarize = vt_summarize, .finalize = NULL}
const sc_sketch_vtable sc_kll_double_vtable = SC_KLL_VTABLE("kll_doubles", vt_create_double);
const sc_sketch_vtable sc_kll_float_vtable = SC_KLL_VTABLE("kll_floats", vt_create_float);
