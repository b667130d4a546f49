/* Frequent items sketch (heavy hitters) over int64 or string (byte string) items: the
 * Misra–Gries family as in Apache DataSketches frequent_items_sketch / Java LongsSketch and
 * ItemsSketch<String> (reverse-purge hash map).
 *
 * ERROR BOUND. The sketch keeps at most 0.75 * 2^lg_max_map_size counters. Every reported
 * count is a lower bound of the true frequency f(x) and at most `offset` below it:
 *     lower(x) = c(x)  <=  f(x)  <=  c(x) + offset = upper(x)        (deterministic)
 * (c(x) = 0 for an item not tracked, so every item has f(x) <= offset unless tracked).
 * offset = maximum_error() is the total weight removed by purges, and a priori
 *     offset <= eps * N,   eps = 3.5 / 2^lg_max_map_size     (N = total weight)
 * (DataSketches' bound; the median used by a purge is taken from a sample of <= 1024
 * counters). Any item with f(x) > offset is tracked. estimate(x) = c(x) + offset if
 * tracked, else 0 (as DataSketches).
 * get_frequent_items(NO_FALSE_POSITIVES, t): items with lower > t (all truly > t);
 * get_frequent_items(NO_FALSE_NEGATIVES, t): items with upper > t (includes all with f > t).
 *
 * THREAD-SAFETY. No internal synchronisation: one thread updates/merges at a time; const
 * queries (estimate, bounds, items, serialize, copy) may run concurrently with each other
 * but not with an update. Concurrent use goes through sc_frequent_i64_vtable and the
 * framework in concurrent.h.
 *
 * SERIALIZATION: DataSketches frequent items format, serial version 1, family id 10,
 * little-endian. int64 items: identical to Java LongsSketch and C++
 * frequent_items_sketch<int64_t> (Python: frequent_items_sketch + PyLongsSerDe). String
 * items: identical to C++ frequent_items_sketch<std::string> (Python frequent_strings_sketch,
 * or frequent_items_sketch + PyStringsSerDe) and Java ItemsSketch<String> with
 * ArrayOfStringsSerDe. The bytes do not record the item type: the reader chooses it.
 *   u8 preamble_longs (1 empty, 4 otherwise), u8 serial_version=1, u8 family=10,
 *   u8 lg_max_map_size, u8 lg_cur_map_size, u8 flags (empty: 0x05), u16 0,
 *   then if not empty: u32 num_active, u32 0, u64 total_weight, u64 offset,
 *   u64 counts[num_active], then num_active items in the same order: i64 each, or for
 *   strings u32 byte length + bytes. We write items in ascending order (int64 value, or
 *   bytes lexicographically), so equal content gives equal bytes; any order is read.
 * Deserialization validates and returns SC_EFORMAT on malformed input.
 */
#ifndef SC_FREQUENT_H
#define SC_FREQUENT_H

#include <stddef.h>
#include <stdint.h>

#include "concurrent.h" /* sc_sketch_vtable */

#define SC_FREQ_DEFAULT_LG_MAX 10
#define SC_FREQ_LG_MIN 3
#define SC_FREQ_LG_MAX_LIMIT 26
#define SC_FREQ_FAMILY 10
#define SC_FREQ_MAX_STR_LEN 0x7fffffffu

typedef enum sc_freq_error_type {
    SC_FREQ_NO_FALSE_POSITIVES = 0,
    SC_FREQ_NO_FALSE_NEGATIVES = 1
} sc_freq_error_type;

typedef enum sc_freq_item_kind { SC_FREQ_ITEMS_I64 = 0, SC_FREQ_ITEMS_STR = 1 } sc_freq_item_kind;

typedef struct sc_frequent_config {
    uint8_t lg_max_map_size; /* 3..26; 0 => SC_FREQ_DEFAULT_LG_MAX */
    uint8_t item_kind;       /* sc_freq_item_kind (the vtables force theirs) */
} sc_frequent_config;

/* Private layout (sizes only). A slot is free when counts[slot] == 0. For int64 items keys[]
 * holds the item; for strings keys[] holds a 64-bit hash of the bytes and strs/lens the
 * owned copy of the item. */
typedef struct sc_frequent {
    int64_t *keys;
    uint64_t *counts;
    char **strs;
    uint32_t *lens;
    uint64_t total_weight, offset;
    uint32_t num_active;
    uint8_t lg_max, lg_cur, kind;
} sc_frequent;

typedef struct sc_freq_row {
    int64_t item;    /* int64 items (strings: the hash) */
    const char *str; /* string items: points into the sketch (valid until it changes) */
    uint32_t len;
    uint64_t estimate, lower, upper;
} sc_freq_row;

int sc_frequent_new(sc_frequent **out, const sc_frequent_config *cfg); /* EINVAL, ENOMEM */
void sc_frequent_destroy(sc_frequent *sk);
void sc_frequent_reset(sc_frequent *sk); /* empty again; keeps the current map allocation */
int sc_frequent_copy(sc_frequent **out, const sc_frequent *sk);

/* weight 0 is a no-op. Returns 0, SC_ENOMEM, or SC_ETYPE (wrong item kind). */
int sc_frequent_update(sc_frequent *sk, int64_t item, uint64_t weight);
int sc_frequent_update_str(sc_frequent *sk, const char *item, uint32_t len, uint64_t weight);
/* Batch: weights may be NULL (all 1); validity an Arrow bitmap (NULL = all valid). */
int sc_frequent_update_i64(sc_frequent *sk, const int64_t *items, const uint64_t *weights,
                           size_t n, const uint8_t *validity, size_t bit_offset);
/* Batch of Arrow large_string items: item i is data[offsets[i], offsets[i+1]). */
int sc_frequent_update_large_utf8(sc_frequent *sk, const uint8_t *data, const int64_t *offsets,
                                  const uint64_t *weights, size_t n, const uint8_t *validity,
                                  size_t bit_offset);
/* SC_ETYPE if the item kinds differ. */
int sc_frequent_merge(sc_frequent *dst, const sc_frequent *src);

static inline uint64_t sc_frequent_total_weight(const sc_frequent *sk) { return sk->total_weight; }
static inline uint64_t sc_frequent_maximum_error(const sc_frequent *sk) { return sk->offset; }
static inline uint32_t sc_frequent_num_active(const sc_frequent *sk) { return sk->num_active; }
/* empty = nothing absorbed. A purge can drop every counter (num_active 0) of a non-empty
 * sketch: its weight and offset still count (in merges and in the bytes, which then carry
 * num_active = 0; DataSketches reads that, but writes such a sketch as empty). */
static inline int sc_frequent_is_empty(const sc_frequent *sk) { return sk->total_weight == 0; }
uint64_t sc_frequent_lower_bound(const sc_frequent *sk, int64_t item);
uint64_t sc_frequent_upper_bound(const sc_frequent *sk, int64_t item);
uint64_t sc_frequent_estimate(const sc_frequent *sk, int64_t item);
uint64_t sc_frequent_lower_bound_str(const sc_frequent *sk, const char *item, uint32_t len);
/* (int64 queries on a string sketch, or string queries on an int64 sketch, return 0;
 * upper = lower + maximum_error, estimate = lower ? lower + maximum_error : 0) */
double sc_frequent_epsilon(uint32_t lg_max_map_size);                    /* 3.5 / 2^lg */
double sc_frequent_apriori_error(uint32_t lg_max_map_size, uint64_t total_weight);

/* Rows passing the rule for `type` with `threshold`, sorted by estimate descending (ties by
 * item ascending). *out is malloc'ed (free() it; NULL when *count == 0). */
int sc_frequent_items(const sc_frequent *sk, sc_freq_error_type type, uint64_t threshold,
                      sc_freq_row **out, size_t *count);

size_t sc_frequent_serialized_size(const sc_frequent *sk);
int sc_frequent_serialize(const sc_frequent *sk, uint8_t *buf, size_t cap, size_t *written);
int sc_frequent_deserialize(sc_frequent **out, sc_freq_item_kind kind, const uint8_t *buf, size_t len);

/* 0 if invariants hold (num_active matches the map, within capacity, every key reachable,
 * sum of counts + removed weight consistent), else SC_EINTERNAL. */
int sc_frequent_check(const sc_frequent *sk);

/* Concurrent framework: config is const sc_frequent_config * (NULL => defaults; item_kind is
 * forced by the table); hint() is 0; n() is the total weight; summarize publishes
 * [0] total weight, [1] offset, [2] num_active, [3] lg_max_map_size. */
extern const sc_sketch_vtable sc_frequent_i64_vtable;
extern const sc_sketch_vtable sc_frequent_str_vtable;

#endif
