/* Frequent items sketch over int64 or string items: see frequent.h for contract and format.
 *
 * The map is an open-addressing hash table with linear probing (slot free <=> count 0),
 * grown by doubling from 2^3 slots up to 2^lg_max. It holds at most 0.75 * size items;
 * inserting one more either doubles the map or, at full size, purges: the median of (a
 * sample of) the counts is subtracted from every counter, counters that reach 0 are removed,
 * and the median is added to `offset`, the sketch's maximum error.
 * String items: keys[] holds a 64-bit hash, strs[]/lens[] an owned copy of the bytes.
 */
#include "frequent.h"

#include <stdlib.h>
#include <string.h>

#include "sc_status.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "frequent.c serializes by memcpy and assumes a little-endian host"
#endif

#define MAX_SAMPLE 1024u
#define PREAMBLE_EMPTY 1
#define PREAMBLE_NONEMPTY 4
#define SERIAL_VERSION 1
#define FLAGS_EMPTY 0x05 /* bits 0 and 2, as written by DataSketches */
#define HEADER_EMPTY 8u
#define HEADER_FULL 32u

static inline uint64_t fmix64(uint64_t k) { /* MurmurHash3 finalizer */
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ull;
    return k ^ (k >> 33);
}

static uint64_t hash_bytes(const char *p, uint32_t len) { /* 8 bytes a step, then fmix64 */
    uint64_t h = 0x9E3779B97F4A7C15ull ^ len;
    uint32_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = fmix64(h ^ w) * 0x100000001b3ull;
    }
    uint64_t tail = 0;
    if (len > i) memcpy(&tail, p + i, len - i);
    return fmix64(h ^ tail ^ ((uint64_t)(len - i) << 56));
}

static inline int is_str(const sc_frequent *sk) { return sk->kind == SC_FREQ_ITEMS_STR; }
static inline uint32_t map_size(const sc_frequent *sk) { return 1u << sk->lg_cur; }
static inline uint32_t map_capacity(uint32_t lg) { return (uint32_t)(((uint64_t)3 << lg) / 4); }
static inline uint32_t home_slot(int64_t key, uint32_t mask) {
    return (uint32_t)fmix64((uint64_t)key) & mask;
}

/* A key: the int64 item, or (hash, bytes) for a string. */
typedef struct { int64_t k; const char *s; uint32_t len; } fkey;

static inline fkey key_i64(int64_t x) { return (fkey){x, NULL, 0}; }
static inline fkey key_str(const char *s, uint32_t len) {
    return (fkey){(int64_t)hash_bytes(s, len), s, len};
}

/* slot holding key, or the free slot where it would go */
static inline uint32_t find_slot(const sc_frequent *sk, fkey key) {
    uint32_t mask = map_size(sk) - 1, i = home_slot(key.k, mask);
    if (!is_str(sk)) {
        while (sk->counts[i] != 0 && sk->keys[i] != key.k) i = (i + 1) & mask;
        return i;
    }
    while (sk->counts[i] != 0 &&
           !(sk->keys[i] == key.k && sk->lens[i] == key.len &&
             (key.len == 0 || memcmp(sk->strs[i], key.s, key.len) == 0)))
        i = (i + 1) & mask;
    return i;
}

static void move_slot(sc_frequent *dst, uint32_t to, const sc_frequent *src, uint32_t from) {
    dst->keys[to] = src->keys[from];
    dst->counts[to] = src->counts[from];
    if (is_str(dst)) dst->strs[to] = src->strs[from], dst->lens[to] = src->lens[from];
}

static void free_map(int64_t *keys, uint64_t *counts, char **strs, uint32_t *lens, uint32_t size) {
    if (strs && counts)
        for (uint32_t i = 0; i < size; i++)
            if (counts[i]) free(strs[i]);
    free(keys), free(counts), free(strs), free(lens);
}

/* allocate the arrays of a map of 2^lg slots into sk (old arrays untouched) */
static int alloc_map(sc_frequent *sk, uint32_t lg) {
    size_t size = (size_t)1 << lg;
    sk->keys = malloc(size * sizeof(int64_t));
    sk->counts = calloc(size, sizeof(uint64_t));
    sk->strs = is_str(sk) ? malloc(size * sizeof(char *)) : NULL;
    sk->lens = is_str(sk) ? malloc(size * sizeof(uint32_t)) : NULL;
    if (!sk->keys || !sk->counts || (is_str(sk) && (!sk->strs || !sk->lens))) {
        free_map(sk->keys, NULL, sk->strs, sk->lens, 0);
        free(sk->counts);
        sk->keys = NULL, sk->counts = NULL, sk->strs = NULL, sk->lens = NULL;
        return SC_ENOMEM;
    }
    sk->lg_cur = (uint8_t)lg;
    return SC_OK;
}

static int resize(sc_frequent *sk, uint8_t lg) {
    sc_frequent old = *sk;
    if (alloc_map(sk, lg)) {
        *sk = old;
        return SC_ENOMEM;
    }
    for (uint32_t i = 0; i < (1u << old.lg_cur); i++) {
        if (old.counts[i] == 0) continue;
        fkey key = {old.keys[i], is_str(sk) ? old.strs[i] : NULL, is_str(sk) ? old.lens[i] : 0};
        move_slot(sk, find_slot(sk, key), &old, i);
    }
    free_map(old.keys, NULL, old.strs, old.lens, 0); /* strings moved, not freed */
    free(old.counts);
    return SC_OK;
}

/* k-th smallest of v[0, n) (Wirth's selection; reorders v) */
static uint64_t select_kth(uint64_t *v, uint32_t n, uint32_t k) {
    int64_t l = 0, m = (int64_t)n - 1;
    while (l < m) {
        uint64_t x = v[k];
        int64_t i = l, j = m;
        do {
            while (v[i] < x) i++;
            while (x < v[j]) j--;
            if (i <= j) {
                uint64_t t = v[i];
                v[i++] = v[j];
                v[j--] = t;
            }
        } while (i <= j);
        if (j < (int64_t)k) l = i;
        if ((int64_t)k < i) m = j;
    }
    return v[k];
}

/* Remove the item in slot i, shifting later members of its cluster back so that every probe
 * chain stays unbroken (Knuth's Algorithm R). Only slots after i up to the next free slot
 * are touched. */
static void delete_slot(sc_frequent *sk, uint32_t i) {
    uint32_t mask = map_size(sk) - 1, j = i;
    if (is_str(sk)) free(sk->strs[i]);
    sk->counts[i] = 0;
    for (;;) {
        j = (j + 1) & mask;
        if (sk->counts[j] == 0) return;
        uint32_t h = home_slot(sk->keys[j], mask);
        int stays = (i <= j) ? (i < h && h <= j) : (i < h || h <= j);
        if (stays) continue;
        move_slot(sk, i, sk, j);
        sk->counts[j] = 0;
        i = j;
    }
}

/* Subtract the median of (a sample of) the counts from every counter and delete counters
 * that reach 0. Returns the median. The sweep starts after a free slot, so deletions only
 * pull not-yet-visited items back into the visited slot, which is then re-examined. */
static uint64_t purge(sc_frequent *sk) {
    uint32_t size = map_size(sk), mask = size - 1;
    uint32_t limit = sk->num_active < MAX_SAMPLE ? sk->num_active : MAX_SAMPLE;
    uint64_t sample[MAX_SAMPLE];
    uint32_t ns = 0;
    for (uint32_t i = 0; ns < limit; i++)
        if (sk->counts[i]) sample[ns++] = sk->counts[i];
    uint64_t median = select_kth(sample, ns, limit / 2);
    uint32_t start = 0;
    while (sk->counts[start] != 0) start++;
    for (uint32_t n = 1; n < size; n++) {
        uint32_t i = (start + n) & mask;
        while (sk->counts[i] != 0 && sk->counts[i] <= median) {
            delete_slot(sk, i);
            sk->num_active--;
        }
        if (sk->counts[i]) sk->counts[i] -= median;
    }
    return median;
}

/* ---- lifecycle ---- */

int sc_frequent_new(sc_frequent **out, const sc_frequent_config *cfg) {
    *out = NULL;
    uint32_t lg = (cfg && cfg->lg_max_map_size) ? cfg->lg_max_map_size : SC_FREQ_DEFAULT_LG_MAX;
    uint32_t kind = cfg ? cfg->item_kind : SC_FREQ_ITEMS_I64;
    if (lg < SC_FREQ_LG_MIN || lg > SC_FREQ_LG_MAX_LIMIT || kind > SC_FREQ_ITEMS_STR)
        return SC_EINVAL;
    sc_frequent *sk = calloc(1, sizeof(*sk));
    if (!sk) return SC_ENOMEM;
    sk->lg_max = (uint8_t)lg;
    sk->kind = (uint8_t)kind;
    if (alloc_map(sk, SC_FREQ_LG_MIN)) {
        free(sk);
        return SC_ENOMEM;
    }
    *out = sk;
    return SC_OK;
}

void sc_frequent_destroy(sc_frequent *sk) {
    if (!sk) return;
    free_map(sk->keys, sk->counts, sk->strs, sk->lens, map_size(sk));
    free(sk);
}

void sc_frequent_reset(sc_frequent *sk) {
    if (is_str(sk))
        for (uint32_t i = 0; i < map_size(sk); i++)
            if (sk->counts[i]) free(sk->strs[i]);
    memset(sk->counts, 0, (size_t)map_size(sk) * sizeof(uint64_t));
    sk->num_active = 0, sk->total_weight = 0, sk->offset = 0;
}

int sc_frequent_copy(sc_frequent **out, const sc_frequent *sk) {
    *out = NULL;
    sc_frequent *c = malloc(sizeof(*c));
    if (!c) return SC_ENOMEM;
    *c = *sk;
    if (alloc_map(c, sk->lg_cur)) {
        free(c);
        return SC_ENOMEM;
    }
    size_t size = map_size(sk);
    memcpy(c->keys, sk->keys, size * sizeof(int64_t));
    memcpy(c->counts, sk->counts, size * sizeof(uint64_t));
    for (uint32_t i = 0; i < size && is_str(sk); i++) {
        if (!sk->counts[i]) continue;
        c->lens[i] = sk->lens[i];
        c->strs[i] = malloc(sk->lens[i] ? sk->lens[i] : 1);
        if (!c->strs[i]) { /* drop the uncopied tail, then free what was copied */
            memset(c->counts + i, 0, (size - i) * sizeof(uint64_t));
            sc_frequent_destroy(c);
            return SC_ENOMEM;
        }
        memcpy(c->strs[i], sk->strs[i], sk->lens[i]);
    }
    *out = c;
    return SC_OK;
}

/* ---- updates ---- */

/* add weight to key's counter (a string key is copied when inserted); *purged += any purge */
static int adjust_or_insert(sc_frequent *sk, fkey key, uint64_t weight, uint64_t *purged) {
    uint32_t s = find_slot(sk, key);
    if (sk->counts[s]) {
        sk->counts[s] += weight;
        return SC_OK;
    }
    if (is_str(sk)) {
        char *copy = malloc(key.len ? key.len : 1);
        if (!copy) return SC_ENOMEM;
        if (key.len) memcpy(copy, key.s, key.len);
        sk->strs[s] = copy, sk->lens[s] = key.len;
    }
    sk->keys[s] = key.k;
    sk->counts[s] = weight;
    sk->num_active++;
    if (sk->num_active > map_capacity(sk->lg_cur)) {
        if (sk->lg_cur < sk->lg_max) return resize(sk, (uint8_t)(sk->lg_cur + 1));
        *purged += purge(sk);
    }
    return SC_OK;
}

static int update_one(sc_frequent *sk, fkey key, uint64_t weight) {
    if (weight == 0) return SC_OK;
    uint64_t purged = 0;
    int rc = adjust_or_insert(sk, key, weight, &purged);
    if (rc) return rc;
    sk->total_weight += weight;
    sk->offset += purged;
    return SC_OK;
}

int sc_frequent_update(sc_frequent *sk, int64_t item, uint64_t weight) {
    return is_str(sk) ? SC_ETYPE : update_one(sk, key_i64(item), weight);
}

int sc_frequent_update_str(sc_frequent *sk, const char *item, uint32_t len, uint64_t weight) {
    if (!is_str(sk)) return SC_ETYPE;
    if (len > SC_FREQ_MAX_STR_LEN) return SC_EINVAL;
    return update_one(sk, key_str(item, len), weight);
}

static inline int valid_at(const uint8_t *validity, size_t i) {
    return !validity || ((validity[i >> 3] >> (i & 7)) & 1);
}

int sc_frequent_update_i64(sc_frequent *sk, const int64_t *items, const uint64_t *weights,
                           size_t n, const uint8_t *validity, size_t bit_offset) {
    if (is_str(sk)) return SC_ETYPE;
    uint64_t purged = 0, total = 0;
    int rc = SC_OK;
    for (size_t i = 0; i < n && rc == SC_OK; i++) {
        uint64_t w = weights ? weights[i] : 1;
        if (w == 0 || !valid_at(validity, bit_offset + i)) continue;
        rc = adjust_or_insert(sk, key_i64(items[i]), w, &purged);
        if (rc == SC_OK) total += w;
    }
    sk->total_weight += total;
    sk->offset += purged;
    return rc;
}

int sc_frequent_update_large_utf8(sc_frequent *sk, const uint8_t *data, const int64_t *offsets,
                                  const uint64_t *weights, size_t n, const uint8_t *validity,
                                  size_t bit_offset) {
    if (!is_str(sk)) return SC_ETYPE;
    uint64_t purged = 0, total = 0;
    int rc = SC_OK;
    for (size_t i = 0; i < n && rc == SC_OK; i++) {
        uint64_t w = weights ? weights[i] : 1;
        if (w == 0 || !valid_at(validity, bit_offset + i)) continue;
        int64_t len = offsets[i + 1] - offsets[i];
        if (len < 0 || len > (int64_t)SC_FREQ_MAX_STR_LEN) {
            rc = SC_EINVAL;
            break;
        }
        rc = adjust_or_insert(sk, key_str((const char *)data + offsets[i], (uint32_t)len), w, &purged);
        if (rc == SC_OK) total += w;
    }
    sk->total_weight += total;
    sk->offset += purged;
    return rc;
}

int sc_frequent_merge(sc_frequent *dst, const sc_frequent *src) {
    if (dst->kind != src->kind) return SC_ETYPE;
    if (src->total_weight == 0) return SC_OK; /* (a purge may leave weight but no counters) */
    if (dst == src) { /* doubling: merge a copy */
        sc_frequent *c;
        int rc = sc_frequent_copy(&c, src);
        if (rc) return rc;
        rc = sc_frequent_merge(dst, c);
        sc_frequent_destroy(c);
        return rc;
    }
    uint64_t purged = 0;
    for (uint32_t i = 0; i < map_size(src); i++) {
        if (src->counts[i] == 0) continue;
        fkey key = {src->keys[i], is_str(src) ? src->strs[i] : NULL, is_str(src) ? src->lens[i] : 0};
        int rc = adjust_or_insert(dst, key, src->counts[i], &purged);
        if (rc) return rc;
    }
    dst->total_weight += src->total_weight;
    dst->offset += purged + src->offset;
    return SC_OK;
}

/* ---- queries ---- */

uint64_t sc_frequent_lower_bound(const sc_frequent *sk, int64_t item) {
    return is_str(sk) ? 0 : sk->counts[find_slot(sk, key_i64(item))];
}
uint64_t sc_frequent_lower_bound_str(const sc_frequent *sk, const char *item, uint32_t len) {
    return is_str(sk) ? sk->counts[find_slot(sk, key_str(item, len))] : 0;
}
uint64_t sc_frequent_upper_bound(const sc_frequent *sk, int64_t item) {
    return sc_frequent_lower_bound(sk, item) + sk->offset;
}
uint64_t sc_frequent_estimate(const sc_frequent *sk, int64_t item) {
    uint64_t c = sc_frequent_lower_bound(sk, item);
    return c ? c + sk->offset : 0;
}
double sc_frequent_epsilon(uint32_t lg_max_map_size) {
    return 3.5 / (double)((uint64_t)1 << lg_max_map_size);
}
double sc_frequent_apriori_error(uint32_t lg_max_map_size, uint64_t total_weight) {
    return sc_frequent_epsilon(lg_max_map_size) * (double)total_weight;
}

static int row_item_cmp(const void *pa, const void *pb) {
    const sc_freq_row *a = pa, *b = pb;
    if (a->str || b->str) {
        uint32_t m = a->len < b->len ? a->len : b->len;
        int c = m ? memcmp(a->str, b->str, m) : 0;
        return c ? c : (a->len > b->len) - (a->len < b->len);
    }
    return (a->item > b->item) - (a->item < b->item);
}

static int row_estimate_cmp(const void *pa, const void *pb) {
    const sc_freq_row *a = pa, *b = pb;
    if (a->estimate != b->estimate) return a->estimate > b->estimate ? -1 : 1;
    return row_item_cmp(pa, pb);
}

/* all active rows (upper = estimate = count + offset), unsorted; *out malloc'ed */
static int collect_rows(const sc_frequent *sk, sc_freq_row **out) {
    *out = malloc(((size_t)sk->num_active + 1) * sizeof(sc_freq_row));
    if (!*out) return SC_ENOMEM;
    uint32_t m = 0;
    for (uint32_t i = 0; i < map_size(sk); i++) {
        uint64_t c = sk->counts[i];
        if (c == 0) continue;
        (*out)[m++] = (sc_freq_row){sk->keys[i], is_str(sk) ? sk->strs[i] : NULL,
                                    is_str(sk) ? sk->lens[i] : 0, c + sk->offset, c, c + sk->offset};
    }
    return SC_OK;
}

int sc_frequent_items(const sc_frequent *sk, sc_freq_error_type type, uint64_t threshold,
                      sc_freq_row **out, size_t *count) {
    *out = NULL;
    *count = 0;
    if (type != SC_FREQ_NO_FALSE_POSITIVES && type != SC_FREQ_NO_FALSE_NEGATIVES) return SC_EINVAL;
    if (sk->num_active == 0) return SC_OK;
    sc_freq_row *rows;
    if (collect_rows(sk, &rows)) return SC_ENOMEM;
    size_t m = 0;
    for (uint32_t r = 0; r < sk->num_active; r++)
        if ((type == SC_FREQ_NO_FALSE_POSITIVES ? rows[r].lower : rows[r].upper) > threshold)
            rows[m++] = rows[r];
    if (m == 0) {
        free(rows);
        return SC_OK;
    }
    qsort(rows, m, sizeof(*rows), row_estimate_cmp);
    *out = rows;
    *count = m;
    return SC_OK;
}

/* ---- serialization ---- */

size_t sc_frequent_serialized_size(const sc_frequent *sk) {
    if (sk->total_weight == 0) return HEADER_EMPTY;
    size_t size = HEADER_FULL + 8u * (size_t)sk->num_active;
    if (!is_str(sk)) return size + 8u * (size_t)sk->num_active;
    for (uint32_t i = 0; i < map_size(sk); i++)
        if (sk->counts[i]) size += 4u + sk->lens[i];
    return size;
}

int sc_frequent_serialize(const sc_frequent *sk, uint8_t *buf, size_t cap, size_t *written) {
    size_t size = sc_frequent_serialized_size(sk);
    if (cap < size) return SC_EINVAL;
    int empty = sk->total_weight == 0; /* not num_active: weight and offset must survive */
    memset(buf, 0, empty ? HEADER_EMPTY : HEADER_FULL);
    buf[0] = empty ? PREAMBLE_EMPTY : PREAMBLE_NONEMPTY;
    buf[1] = SERIAL_VERSION;
    buf[2] = SC_FREQ_FAMILY;
    buf[3] = sk->lg_max;
    buf[4] = sk->lg_cur;
    buf[5] = empty ? FLAGS_EMPTY : 0;
    *written = size;
    if (empty) return SC_OK;
    sc_freq_row *rows; /* canonical order: equal content => equal bytes */
    if (collect_rows(sk, &rows)) return SC_ENOMEM;
    /* num_active may be 0 here (a purge removed every counter) */
    uint32_t m = sk->num_active;
    qsort(rows, m, sizeof(*rows), row_item_cmp);
    memcpy(buf + 8, &m, 4);
    memcpy(buf + 16, &sk->total_weight, 8);
    memcpy(buf + 24, &sk->offset, 8);
    uint8_t *wp = buf + HEADER_FULL, *ip = wp + 8u * (size_t)m;
    for (uint32_t r = 0; r < m; r++, wp += 8) {
        memcpy(wp, &rows[r].lower, 8);
        if (is_str(sk)) {
            memcpy(ip, &rows[r].len, 4);
            if (rows[r].len) memcpy(ip + 4, rows[r].str, rows[r].len);
            ip += 4u + rows[r].len;
        } else {
            memcpy(ip, &rows[r].item, 8);
            ip += 8;
        }
    }
    free(rows);
    return (size_t)(ip - buf) == size ? SC_OK : SC_EINTERNAL;
}

/* insert the num items of a serialized body (weights at w, items at it .. end) */
static int read_items(sc_frequent *sk, uint32_t num, const uint8_t *w, const uint8_t *it,
                      const uint8_t *end, uint64_t *sum) {
    uint64_t purged = 0;
    for (uint32_t i = 0; i < num; i++) {
        uint64_t wt;
        memcpy(&wt, w + 8u * (size_t)i, 8);
        fkey key;
        if (is_str(sk)) {
            uint32_t len;
            if (end - it < 4) return SC_EFORMAT;
            memcpy(&len, it, 4);
            if ((uint64_t)(end - it - 4) < len || len > SC_FREQ_MAX_STR_LEN) return SC_EFORMAT;
            key = key_str((const char *)it + 4, len);
            it += 4u + len;
        } else {
            if (end - it < 8) return SC_EFORMAT;
            int64_t x;
            memcpy(&x, it, 8);
            key = key_i64(x);
            it += 8;
        }
        if (wt == 0 || __builtin_add_overflow(*sum, wt, sum) || sk->counts[find_slot(sk, key)])
            return SC_EFORMAT; /* zero count, overflow or duplicate item */
        int rc = adjust_or_insert(sk, key, wt, &purged);
        if (rc) return rc;
    }
    return (it == end && purged == 0) ? SC_OK : SC_EFORMAT;
}

int sc_frequent_deserialize(sc_frequent **out, sc_freq_item_kind kind, const uint8_t *buf, size_t len) {
    *out = NULL;
    if (len < HEADER_EMPTY) return SC_EFORMAT;
    uint8_t pre = buf[0], ver = buf[1], fam = buf[2], lg_max = buf[3], lg_cur = buf[4];
    int empty = (buf[5] & 1) != 0;
    if (ver != SERIAL_VERSION || fam != SC_FREQ_FAMILY) return SC_EFORMAT;
    if (pre != (empty ? PREAMBLE_EMPTY : PREAMBLE_NONEMPTY)) return SC_EFORMAT;
    if (lg_max < SC_FREQ_LG_MIN || lg_max > SC_FREQ_LG_MAX_LIMIT) return SC_EFORMAT;
    if (lg_cur < SC_FREQ_LG_MIN || lg_cur > lg_max) return SC_EFORMAT;
    uint32_t num = 0;
    uint64_t total = 0, offset = 0, sum = 0;
    if (empty && len != HEADER_EMPTY) return SC_EFORMAT;
    if (!empty) {
        if (len < HEADER_FULL) return SC_EFORMAT;
        memcpy(&num, buf + 8, 4);
        memcpy(&total, buf + 16, 8);
        memcpy(&offset, buf + 24, 8);
        size_t min_item = kind == SC_FREQ_ITEMS_STR ? 4 : 8;
        if (total == 0 || num > map_capacity(lg_max) || len < HEADER_FULL + (8 + min_item) * (size_t)num)
            return SC_EFORMAT;
    }
    sc_frequent_config cfg = {lg_max, (uint8_t)kind};
    sc_frequent *sk;
    int rc = sc_frequent_new(&sk, &cfg);
    if (rc) return rc;
    if (lg_cur > sk->lg_cur) rc = resize(sk, lg_cur);
    if (rc == SC_OK && !empty)
        rc = read_items(sk, num, buf + HEADER_FULL, buf + HEADER_FULL + 8u * (size_t)num, buf + len, &sum);
    if (rc == SC_OK && (sum > total || offset > total)) rc = SC_EFORMAT;
    if (rc) {
        sc_frequent_destroy(sk);
        return rc;
    }
    sk->total_weight = total, sk->offset = offset;
    *out = sk;
    return SC_OK;
}

int sc_frequent_check(const sc_frequent *sk) {
    uint32_t active = 0;
    uint64_t sum = 0;
    for (uint32_t i = 0; i < map_size(sk); i++) {
        if (sk->counts[i] == 0) continue;
        active++;
        sum += sk->counts[i];
        fkey key = {sk->keys[i], is_str(sk) ? sk->strs[i] : NULL, is_str(sk) ? sk->lens[i] : 0};
        if (is_str(sk) && (uint64_t)key.k != hash_bytes(key.s, key.len)) return SC_EINTERNAL;
        if (find_slot(sk, key) != i) return SC_EINTERNAL; /* unreachable key */
    }
    if (active != sk->num_active || active > map_capacity(sk->lg_cur)) return SC_EINTERNAL;
    if (sk->lg_cur > sk->lg_max || sum > sk->total_weight || sk->offset > sk->total_weight)
        return SC_EINTERNAL;
    return SC_OK;
}

/* ---- concurrent framework vtables ---- */

static void *vt_create_kind(const void *cfg, uint8_t kind) {
    sc_frequent_config c = cfg ? *(const sc_frequent_config *)cfg : (sc_frequent_config){0, 0};
    c.item_kind = kind;
    sc_frequent *sk;
    return sc_frequent_new(&sk, &c) ? NULL : sk;
}
static void *vt_create_i64(const void *cfg) { return vt_create_kind(cfg, SC_FREQ_ITEMS_I64); }
static void *vt_create_str(const void *cfg) { return vt_create_kind(cfg, SC_FREQ_ITEMS_STR); }
static void vt_destroy(void *sk) { sc_frequent_destroy((sc_frequent *)sk); }
static void vt_reset(void *sk) { sc_frequent_reset((sc_frequent *)sk); }
static int vt_merge_into(void *g, const void *l) {
    return sc_frequent_merge((sc_frequent *)g, (const sc_frequent *)l);
}
static int vt_copy(void **out, const void *sk) {
    return sc_frequent_copy((sc_frequent **)out, (const sc_frequent *)sk);
}
static uint64_t vt_hint(const void *g) { (void)g; return 0; }
static uint64_t vt_n(const void *sk) { return ((const sc_frequent *)sk)->total_weight; }
static void vt_summarize(const void *g, uint64_t out[SC_CONC_SUMMARY_WORDS]) {
    const sc_frequent *sk = (const sc_frequent *)g;
    memset(out, 0, SC_CONC_SUMMARY_WORDS * sizeof(uint64_t));
    out[0] = sk->total_weight, out[1] = sk->offset, out[2] = sk->num_active, out[3] = sk->lg_max;
}

#define SC_FREQ_VTABLE(NAME, CREATE)                                                        \
    {.name = NAME, .create = CREATE, .destroy = vt_destroy, .reset = vt_reset,              \
     .merge_into = vt_merge_into, .copy = vt_copy, .hint = vt_hint, .n = vt_n,              \
     .summarize = vt_summarize, .finalize = NULL}
const sc_sketch_vtable sc_frequent_i64_vtable = SC_FREQ_VTABLE("frequent_i64", vt_create_i64);
const sc_sketch_vtable sc_frequent_str_vtable = SC_FREQ_VTABLE("frequent_str", vt_create_str);
