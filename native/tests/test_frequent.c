// sources: sketch/frequent.c
/* C tests of the frequent items sketch: bounds hold for every item against exact counts,
 * purges keep the map consistent, merge, batch with nulls/weights, serialization (golden
 * bytes, round trips, malformed input), the concurrent vtable. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sc_status.h"
#include "sketch/frequent.h"

static int failures = 0;
#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                              \
        }                                                                            \
    } while (0)

static uint64_t rng_state = 987654321;
static uint64_t next_rand(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}

/* Zipf-like stream over [0, universe): item i with weight ~ 1/(i+1) */
static int64_t zipf_item(uint32_t universe) {
    double u = (double)(next_rand() >> 11) * 0x1p-53;
    return (int64_t)((double)universe * u * u * u); /* skewed towards 0 */
}

static sc_frequent *make(uint8_t lg) {
    sc_frequent_config cfg = {lg, SC_FREQ_ITEMS_I64};
    sc_frequent *sk = NULL;
    CHECK(sc_frequent_new(&sk, &cfg) == SC_OK);
    return sk;
}

/* every item of the universe: lower <= true <= upper; rows consistent with the rules */
static void check_bounds(const sc_frequent *sk, const uint64_t *truth, uint32_t universe, int apriori) {
    CHECK(sc_frequent_check(sk) == SC_OK);
    uint64_t err = sc_frequent_maximum_error(sk);
    for (uint32_t i = 0; i < universe; i++) {
        uint64_t lb = sc_frequent_lower_bound(sk, i), ub = sc_frequent_upper_bound(sk, i);
        CHECK(lb <= truth[i] && truth[i] <= ub);
        CHECK(ub - lb == err);
        if (truth[i] > err) CHECK(lb > 0); /* heavy items are tracked */
    }
    if (apriori) CHECK(err <= sc_frequent_apriori_error(sk->lg_max, sc_frequent_total_weight(sk)));
    sc_freq_row *rows;
    size_t nrows;
    CHECK(sc_frequent_items(sk, SC_FREQ_NO_FALSE_POSITIVES, err, &rows, &nrows) == SC_OK);
    for (size_t r = 0; r < nrows; r++) {
        CHECK(truth[rows[r].item] > err); /* no false positives */
        if (r) CHECK(rows[r - 1].estimate >= rows[r].estimate);
    }
    free(rows);
    CHECK(sc_frequent_items(sk, SC_FREQ_NO_FALSE_NEGATIVES, err, &rows, &nrows) == SC_OK);
    size_t heavy = 0;
    for (uint32_t i = 0; i < universe; i++) heavy += truth[i] > err;
    size_t found = 0;
    for (size_t r = 0; r < nrows; r++) found += truth[rows[r].item] > err;
    CHECK(found == heavy); /* no false negatives */
    free(rows);
}

static void test_basic(void) {
    sc_frequent *sk = (sc_frequent *)1;
    sc_frequent_config bad = {2, 0};
    CHECK(sc_frequent_new(&sk, &bad) == SC_EINVAL && sk == NULL);
    sk = make(0);
    CHECK(sk->lg_max == SC_FREQ_DEFAULT_LG_MAX && sc_frequent_is_empty(sk));
    CHECK(sc_frequent_update(sk, 7, 3) == SC_OK && sc_frequent_update(sk, -1, 1) == SC_OK);
    CHECK(sc_frequent_update(sk, 5, 0) == SC_OK);
    CHECK(sc_frequent_total_weight(sk) == 4 && sc_frequent_num_active(sk) == 2);
    CHECK(sc_frequent_estimate(sk, 7) == 3 && sc_frequent_estimate(sk, 8) == 0);
    CHECK(sc_frequent_upper_bound(sk, 8) == 0 && sc_frequent_maximum_error(sk) == 0);
    sc_freq_row *rows;
    size_t n;
    CHECK(sc_frequent_items(sk, SC_FREQ_NO_FALSE_POSITIVES, 0, &rows, &n) == SC_OK && n == 2);
    CHECK(rows[0].item == 7 && rows[0].estimate == 3 && rows[1].item == -1);
    free(rows);
    CHECK(sc_frequent_items(sk, (sc_freq_error_type)9, 0, &rows, &n) == SC_EINVAL);
    sc_frequent_destroy(sk);
}

static void test_stream(uint8_t lg, uint32_t universe, size_t n) {
    uint64_t *truth = calloc(universe, sizeof(uint64_t));
    sc_frequent *sk = make(lg), *batch = make(lg);
    int64_t *items = malloc(n * sizeof(int64_t));
    for (size_t i = 0; i < n; i++) {
        items[i] = zipf_item(universe);
        truth[items[i]]++;
        CHECK(sc_frequent_update(sk, items[i], 1) == SC_OK);
    }
    CHECK(sc_frequent_update_i64(batch, items, NULL, n, NULL, 0) == SC_OK);
    check_bounds(sk, truth, universe, 1);
    check_bounds(batch, truth, universe, 1);
    /* batch and per-item paths build the same sketch */
    size_t s1 = sc_frequent_serialized_size(sk), s2 = sc_frequent_serialized_size(batch), w;
    uint8_t *b1 = malloc(s1), *b2 = malloc(s2);
    CHECK(s1 == s2 && sc_frequent_serialize(sk, b1, s1, &w) == SC_OK);
    CHECK(sc_frequent_serialize(batch, b2, s2, &w) == SC_OK && memcmp(b1, b2, s1) == 0);
    free(b1);
    free(b2);
    free(items);
    sc_frequent_destroy(batch);
    sc_frequent_destroy(sk);
    free(truth);
}

static void test_merge(void) {
    const uint32_t universe = 20000;
    uint64_t *truth = calloc(universe, sizeof(uint64_t));
    sc_frequent *total = make(8);
    for (int p = 0; p < 7; p++) {
        sc_frequent *part = make((uint8_t)(6 + p % 4));
        for (int i = 0; i < 30000; i++) {
            int64_t x = zipf_item(universe);
            uint64_t wgt = 1 + next_rand() % 3;
            truth[x] += wgt;
            CHECK(sc_frequent_update(part, x, wgt) == SC_OK);
        }
        CHECK(sc_frequent_merge(total, part) == SC_OK);
        sc_frequent_destroy(part);
    }
    check_bounds(total, truth, universe, 0);
    for (uint32_t i = 0; i < universe; i++) truth[i] *= 2;
    CHECK(sc_frequent_merge(total, total) == SC_OK);
    check_bounds(total, truth, universe, 0);
    sc_frequent_destroy(total);
    free(truth);
}

static void test_nulls_weights(void) {
    int64_t items[6] = {1, 2, 3, 1, 2, 1};
    uint64_t weights[6] = {5, 1, 0, 5, 1, 5};
    uint8_t validity[1] = {0x3D}; /* 111101: item index 1 is null */
    sc_frequent *sk = make(4);
    CHECK(sc_frequent_update_i64(sk, items, weights, 6, validity, 0) == SC_OK);
    CHECK(sc_frequent_total_weight(sk) == 16 && sc_frequent_lower_bound(sk, 1) == 15);
    CHECK(sc_frequent_lower_bound(sk, 2) == 1 && sc_frequent_lower_bound(sk, 3) == 0);
    sc_frequent_reset(sk);
    CHECK(sc_frequent_is_empty(sk) && sc_frequent_total_weight(sk) == 0 && sc_frequent_check(sk) == 0);
    sc_frequent_destroy(sk);
}

static void roundtrip(const sc_frequent *sk) {
    size_t size = sc_frequent_serialized_size(sk), w;
    uint8_t *buf = malloc(size);
    CHECK(sc_frequent_serialize(sk, buf, size, &w) == SC_OK && w == size);
    CHECK(sc_frequent_serialize(sk, buf, size - 1, &w) == SC_EINVAL);
    sc_frequent *back = NULL;
    CHECK(sc_frequent_deserialize(&back, (sc_freq_item_kind)sk->kind, buf, size) == SC_OK);
    if (back) {
        CHECK(sc_frequent_check(back) == SC_OK);
        CHECK(sc_frequent_total_weight(back) == sc_frequent_total_weight(sk));
        CHECK(sc_frequent_maximum_error(back) == sc_frequent_maximum_error(sk));
        CHECK(sc_frequent_num_active(back) == sc_frequent_num_active(sk));
        for (uint32_t i = 0; i < (1u << sk->lg_cur); i++) {
            if (!sk->counts[i]) continue;
            uint64_t lb = sk->kind == SC_FREQ_ITEMS_STR
                              ? sc_frequent_lower_bound_str(back, sk->strs[i], sk->lens[i])
                              : sc_frequent_lower_bound(back, sk->keys[i]);
            CHECK(lb == sk->counts[i]);
        }
        uint8_t *again = malloc(size);
        size_t w2;
        CHECK(sc_frequent_serialize(back, again, size, &w2) == SC_OK && memcmp(again, buf, size) == 0);
        free(again);
        sc_frequent_destroy(back);
    }
    for (size_t cut = 0; cut < size; cut++)
        CHECK(sc_frequent_deserialize(&back, (sc_freq_item_kind)sk->kind, buf, cut) == SC_EFORMAT);
    uint8_t *bad = malloc(size);
    for (int t = 0; t < 300; t++) {
        memcpy(bad, buf, size);
        bad[next_rand() % size] ^= (uint8_t)(1u << (next_rand() % 8));
        if (sc_frequent_deserialize(&back, (sc_freq_item_kind)sk->kind, bad, size) == SC_OK) {
            CHECK(sc_frequent_check(back) == SC_OK);
            sc_frequent_destroy(back);
        }
    }
    free(bad);
    free(buf);
}

static void test_serialization(void) {
    sc_frequent *sk = make(5);
    roundtrip(sk);
    static const uint8_t golden_empty[8] = {0x01, 0x01, 0x0a, 0x05, 0x03, 0x05, 0x00, 0x00};
    uint8_t out[64];
    size_t w;
    CHECK(sc_frequent_serialize(sk, out, sizeof(out), &w) == SC_OK && w == 8);
    CHECK(memcmp(out, golden_empty, 8) == 0);
    sc_frequent_update(sk, 7, 3);
    roundtrip(sk);
    /* datasketches 5.2: frequent_items_sketch(5) update(7, 3) update(-1) with PyLongsSerDe
     * writes these bytes (its map order: -1 first); ours loads them */
    static const uint8_t golden[] = {
        0x04, 0x01, 0x0a, 0x05, 0x03, 0, 0, 0, 0x02, 0, 0, 0, 0, 0, 0, 0, 0x04, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0, 0, 0, 0, 0, 0, 0, 0x03, 0, 0, 0, 0, 0, 0, 0,
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x07, 0, 0, 0, 0, 0, 0, 0};
    sc_frequent *g = NULL;
    CHECK(sc_frequent_deserialize(&g, SC_FREQ_ITEMS_I64, golden, sizeof(golden)) == SC_OK);
    if (g) {
        CHECK(sc_frequent_lower_bound(g, 7) == 3 && sc_frequent_lower_bound(g, -1) == 1);
        CHECK(sc_frequent_total_weight(g) == 4 && g->lg_max == 5 && g->lg_cur == 3);
        sc_frequent_destroy(g);
    }
    for (int i = 0; i < 100000; i++) sc_frequent_update(sk, zipf_item(5000), 1);
    roundtrip(sk);
    sc_frequent_destroy(sk);
}

static void test_vtable(void) {
    const sc_sketch_vtable *vt = &sc_frequent_i64_vtable;
    sc_frequent_config cfg = {6, 0};
    void *global = vt->create(&cfg), *local = vt->create(&cfg), *snap = NULL;
    CHECK(global && local && vt->hint(global) == 0);
    uint64_t *truth = calloc(1000, sizeof(uint64_t));
    for (int round = 0; round < 40; round++) {
        for (int i = 0; i < 500; i++) {
            int64_t x = zipf_item(1000);
            truth[x]++;
            sc_frequent_update((sc_frequent *)local, x, 1);
        }
        CHECK(vt->n(local) == 500 && vt->merge_into(global, local) == SC_OK);
        vt->reset(local);
        CHECK(vt->n(local) == 0);
    }
    CHECK(vt->copy(&snap, global) == SC_OK && vt->n(snap) == 20000);
    check_bounds((sc_frequent *)snap, truth, 1000, 0);
    uint64_t words[SC_CONC_SUMMARY_WORDS];
    vt->summarize(global, words);
    CHECK(words[0] == 20000 && words[3] == 6);
    vt->destroy(snap);
    vt->destroy(local);
    vt->destroy(global);
    free(truth);
}

/* string items: bounds against exact counts, purges, merge, golden bytes, round trips */
static void test_strings(void) {
    enum { U = 3000 };
    uint64_t *truth = calloc(U, sizeof(uint64_t));
    char names[U][24];
    uint32_t lens[U];
    for (int i = 0; i < U; i++) lens[i] = (uint32_t)snprintf(names[i], sizeof(names[i]), "item-%d-%s", i, i % 7 ? "x" : "long-suffix");
    lens[0] = 0; /* the empty string is an item too */
    sc_frequent_config cfg = {7, SC_FREQ_ITEMS_STR};
    sc_frequent *sk = NULL, *other = NULL;
    CHECK(sc_frequent_new(&sk, &cfg) == SC_OK && sc_frequent_new(&other, &cfg) == SC_OK);
    CHECK(sc_frequent_update(sk, 1, 1) == SC_ETYPE);
    for (int i = 0; i < 200000; i++) {
        int64_t x = zipf_item(U);
        truth[x]++;
        CHECK(sc_frequent_update_str(i % 2 ? sk : other, names[x], lens[x], 1) == SC_OK);
    }
    CHECK(sc_frequent_merge(sk, other) == SC_OK && sc_frequent_check(sk) == SC_OK);
    uint64_t err = sc_frequent_maximum_error(sk);
    CHECK(err > 0 && sc_frequent_total_weight(sk) == 200000);
    for (int i = 0; i < U; i++) {
        uint64_t lb = sc_frequent_lower_bound_str(sk, names[i], lens[i]);
        CHECK(lb <= truth[i] && truth[i] <= lb + err);
        if (truth[i] > err) CHECK(lb > 0);
    }
    roundtrip(sk);
    sc_frequent_reset(other);
    CHECK(sc_frequent_check(other) == SC_OK);
    /* batch from an Arrow large_string layout with a null */
    const char data[] = "abcab";
    int64_t offs[5] = {0, 2, 3, 5, 5};
    uint8_t validity[1] = {0x07}; /* 4th (empty) item is null */
    CHECK(sc_frequent_update_large_utf8(other, (const uint8_t *)data, offs, NULL, 4, validity, 0) == SC_OK);
    CHECK(sc_frequent_lower_bound_str(other, "ab", 2) == 2 && sc_frequent_total_weight(other) == 3);
    /* datasketches 5.2 frequent_strings_sketch(5): update('ab', 3), update('c') */
    static const uint8_t golden[] = {
        0x04, 0x01, 0x0a, 0x05, 0x03, 0, 0, 0, 0x02, 0, 0, 0, 0, 0, 0, 0, 0x04, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0, 0, 0, 0, 0, 0, 0, 0x03, 0, 0, 0, 0, 0, 0, 0,
        0x01, 0, 0, 0, 0x63, 0x02, 0, 0, 0, 0x61, 0x62};
    sc_frequent *g = NULL;
    CHECK(sc_frequent_deserialize(&g, SC_FREQ_ITEMS_STR, golden, sizeof(golden)) == SC_OK);
    if (g) {
        CHECK(sc_frequent_lower_bound_str(g, "ab", 2) == 3 && sc_frequent_lower_bound_str(g, "c", 1) == 1);
        roundtrip(g);
        sc_frequent_destroy(g);
    }
    CHECK(sc_frequent_deserialize(&g, SC_FREQ_ITEMS_I64, golden, sizeof(golden)) == SC_EFORMAT);
    void *v = sc_frequent_str_vtable.create(NULL);
    CHECK(v && ((sc_frequent *)v)->kind == SC_FREQ_ITEMS_STR);
    CHECK(sc_frequent_str_vtable.merge_into(v, sk) == SC_OK && sc_frequent_str_vtable.n(v) == 200000);
    sc_frequent *i64 = NULL;
    CHECK(sc_frequent_new(&i64, NULL) == SC_OK && sc_frequent_merge(i64, sk) == SC_ETYPE);
    sc_frequent_destroy(i64);
    sc_frequent_str_vtable.destroy(v);
    sc_frequent_destroy(sk);
    sc_frequent_destroy(other);
    free(truth);
}

/* a purge can remove every counter: weight and error must survive merges and bytes */
static void test_all_counters_purged(void) {
    sc_frequent *sk = make(3), *other = make(3);
    for (int i = 0; i < 7; i++) sc_frequent_update(sk, i, 1);
    CHECK(sc_frequent_num_active(sk) == 0 && sc_frequent_total_weight(sk) == 7);
    CHECK(sc_frequent_maximum_error(sk) == 1 && !sc_frequent_is_empty(sk));
    CHECK(sc_frequent_check(sk) == SC_OK);
    roundtrip(sk);
    CHECK(sc_frequent_serialized_size(sk) == 32);
    CHECK(sc_frequent_merge(other, sk) == SC_OK);
    CHECK(sc_frequent_total_weight(other) == 7 && sc_frequent_upper_bound(other, 3) == 1);
    sc_frequent_destroy(sk);
    sc_frequent_destroy(other);
}

int main(void) {
    test_all_counters_purged();
    test_strings();
    test_basic();
    test_stream(3, 50, 10000);
    test_stream(6, 1000, 100000);
    test_stream(10, 100000, 1000000);
    test_stream(12, 1000, 200000); /* never purges */
    test_merge();
    test_nulls_weights();
    test_serialization();
    test_vtable();
    if (failures) {
        fprintf(stderr, "test_frequent: %d failures\n", failures);
        return 1;
    }
    printf("test_frequent: ok\n");
    return 0;
}
