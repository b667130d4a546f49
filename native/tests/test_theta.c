// sources: sketch/theta.c sketch/murmur3.c sketch/concurrent.c
/* Θ sketch and MurmurHash3 tests (run under debug, ASan+UBSan; leak check on). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sc_status.h"
#include "sketch/murmur3.h"
#include "sketch/theta.h"

static int failures = 0;
#define CHECK(cond)                                                        \
    do {                                                                   \
        if (!(cond)) {                                                     \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                    \
        }                                                                  \
    } while (0)

/* golden hashes (h1 >> 1, seed 9001) read from DataSketches 5.2 single-item compact images */
static void test_murmur_golden(void) {
    CHECK(sc_seed_hash(9001) == 37836);
    CHECK((sc_murmur3_u64(1, 9001).h1 >> 1) == 0x05a186bdcb7df915ULL);
    int64_t one = 1;
    CHECK((sc_murmur3_128(&one, 8, 9001).h1 >> 1) == 0x05a186bdcb7df915ULL);
    CHECK((sc_murmur3_u64((uint64_t)-1, 9001).h1 >> 1) == 0x0e7bcfc60df3b26cULL);
    CHECK((sc_murmur3_u64(sc_canonical_double_bits(1.5), 9001).h1 >> 1) == 0x0f79638e36154111ULL);
    CHECK(sc_canonical_double_bits(-0.0) == 0);
    CHECK((sc_murmur3_u64(sc_canonical_double_bits(NAN), 9001).h1 >> 1) == 0x0a884444d65e98f5ULL);
    struct { const char *s; uint64_t h; } v[] = {
        {"a", 0x7b010785521dc117ULL},
        {"hello world, this is longer than 16 bytes!", 0x548c0ae5ddbc77e5ULL},
        {"Gr\xc3\xbc\xc3\x9f" "e", 0x145451552c448794ULL},
        {"abcdefghijklmnop", 0x5b15b8c765e9344fULL},
        {"abcdefghijklmno", 0x37f28f0d58ca0107ULL},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        CHECK((sc_murmur3_128(v[i].s, strlen(v[i].s), 9001).h1 >> 1) == v[i].h);
    /* the 8-byte fast path equals the generic digest, both lanes */
    for (uint64_t k = 0; k < 1000; k++) {
        uint64_t key = k * 0x9e3779b97f4a7c15ULL;
        sc_hash128 a = sc_murmur3_u64(key, 9001), b = sc_murmur3_128(&key, 8, 9001);
        CHECK(a.h1 == b.h1 && a.h2 == b.h2);
    }
}

static void test_exact_and_estimation(void) {
    sc_theta *s;
    CHECK(sc_theta_create(&s, 12, SC_THETA_DEFAULT_SEED) == SC_OK);
    CHECK(sc_theta_is_empty(s) && sc_theta_estimate(s) == 0.0);
    /* exact up to T = 15/16 * 2k = 7680 distinct items, duplicates ignored */
    for (int64_t i = 0; i < 7680; i++) {
        CHECK(sc_theta_update_i64(s, i) == SC_OK);
        CHECK(sc_theta_update_i64(s, i) == SC_OK);
    }
    CHECK(sc_theta_estimate(s) == 7680.0);
    CHECK(sc_theta_lower_bound(s, 2) == 7680.0 && sc_theta_upper_bound(s, 2) == 7680.0);
    CHECK(sc_theta_theta64(s) == SC_THETA_MAX);
    CHECK(sc_theta_update_i64(s, 7680) == SC_OK); /* the rebuild: k retained */
    CHECK(sc_theta_num_retained(s) == 4096 && sc_theta_theta64(s) < SC_THETA_MAX);
    int64_t *col = malloc(sizeof(int64_t) * 1000000);
    for (int64_t i = 0; i < 1000000; i++) col[i] = i;
    sc_theta_reset(s);
    CHECK(sc_theta_update_i64_array(s, col, 1000000, NULL, 0) == SC_OK);
    double est = sc_theta_estimate(s), rse = 1.0 / sqrt(4095.0);
    CHECK(fabs(est / 1e6 - 1.0) < 3 * rse);
    for (int z = 1; z <= 3; z++) {
        CHECK(sc_theta_lower_bound(s, z) < est && est < sc_theta_upper_bound(s, z));
        CHECK(sc_theta_lower_bound(s, z) <= 1e6 || z < 3);
        CHECK(sc_theta_upper_bound(s, z) >= 1e6 || z < 3);
    }
    /* validity bitmap: only even rows valid -> half the items */
    uint8_t *bits = malloc(1000000 / 8 + 1);
    memset(bits, 0x55, 1000000 / 8 + 1);
    sc_theta *h;
    CHECK(sc_theta_create(&h, 12, SC_THETA_DEFAULT_SEED) == SC_OK);
    CHECK(sc_theta_update_i64_array(h, col, 1000, bits, 0) == SC_OK);
    CHECK(sc_theta_estimate(h) == 500.0);
    CHECK(sc_theta_update_i64_array(h, col, 1000, bits, 1) == SC_OK); /* odd offset: the rest */
    CHECK(sc_theta_estimate(h) == 1000.0);
    /* trim keeps k */
    CHECK(sc_theta_trim(s) == SC_OK && sc_theta_num_retained(s) == 4096);
    sc_theta_destroy(h);
    sc_theta_destroy(s);
    free(bits);
    free(col);
}

static void test_strings_and_doubles(void) {
    sc_theta *s;
    CHECK(sc_theta_create(&s, 5, SC_THETA_DEFAULT_SEED) == SC_OK);
    const char data[] = "abbccc";
    int32_t off[] = {0, 1, 3, 3, 6}; /* "a", "bb", "" (not an update), "ccc" */
    CHECK(sc_theta_update_str32_array(s, off, (const uint8_t *)data, 4, NULL, 0) == SC_OK);
    CHECK(sc_theta_estimate(s) == 3.0);
    int64_t off64[] = {0, 1, 3};
    CHECK(sc_theta_update_str64_array(s, off64, (const uint8_t *)data, 2, NULL, 0) == SC_OK);
    CHECK(sc_theta_estimate(s) == 3.0);
    double d[] = {0.0, -0.0, NAN, -NAN, 1.5};
    CHECK(sc_theta_update_f64_array(s, d, 5, NULL, 0) == SC_OK);
    CHECK(sc_theta_estimate(s) == 6.0);
    CHECK(sc_theta_update_i64(s, 0) == SC_OK); /* int 0 and double 0.0 share their bytes */
    CHECK(sc_theta_estimate(s) == 6.0);
    CHECK(sc_theta_update_bytes(s, "", 0) == SC_OK);
    sc_theta_destroy(s);
    CHECK(sc_theta_create(&s, 4, 9001) == SC_EINVAL && s == NULL);
}

static sc_theta_compact *compact_range(int64_t lo, int64_t hi, uint8_t lg_k) {
    sc_theta *s;
    sc_theta_compact *c;
    sc_theta_create(&s, lg_k, SC_THETA_DEFAULT_SEED);
    for (int64_t i = lo; i < hi; i++) sc_theta_update_i64(s, i);
    sc_theta_compact_of(&c, s, true);
    sc_theta_destroy(s);
    return c;
}

static void test_serialization(void) {
    int64_t sizes[] = {0, 1, 2, 100, 20000};
    for (size_t t = 0; t < 5; t++) {
        sc_theta_compact *c = compact_range(0, sizes[t], 10), *d = NULL;
        size_t len = sc_theta_compact_serialized_size(c);
        uint8_t *buf = malloc(len);
        CHECK(sc_theta_compact_serialize(c, buf, len) == SC_OK);
        CHECK(sc_theta_compact_serialize(c, buf, len - 1) == SC_EINVAL);
        CHECK(buf[1] == 3 && buf[2] == 3);
        CHECK(sc_theta_compact_deserialize(&d, buf, len, SC_THETA_DEFAULT_SEED) == SC_OK);
        CHECK(d && d->n == c->n && d->theta == c->theta && d->empty == c->empty);
        CHECK(d && memcmp(d->entries, c->entries, 8 * c->n) == 0);
        if (sizes[t] > 0) {
            sc_theta_compact *e = NULL;
            CHECK(sc_theta_compact_deserialize(&e, buf, len, 1234) == SC_EINVAL); /* seed hash */
            CHECK(e == NULL);
        }
        if (len > 16) { /* truncated and corrupted images are rejected */
            sc_theta_compact *e = NULL;
            CHECK(sc_theta_compact_deserialize(&e, buf, len - 8, SC_THETA_DEFAULT_SEED) == SC_EFORMAT);
            buf[1] = 9;
            CHECK(sc_theta_compact_deserialize(&e, buf, len, SC_THETA_DEFAULT_SEED) == SC_EFORMAT);
            buf[1] = 4;
            CHECK(sc_theta_compact_deserialize(&e, buf, len, SC_THETA_DEFAULT_SEED) == SC_EUNSUPPORTED);
            CHECK(e == NULL);
        }
        sc_theta_compact_destroy(c);
        sc_theta_compact_destroy(d);
        free(buf);
    }
}

static void test_set_ops(void) {
    sc_theta_compact *a = compact_range(0, 3000, 12), *b = compact_range(2000, 5000, 12);
    sc_theta_compact *u, *x, *d, *e = compact_range(0, 0, 12);
    const sc_theta_compact *ab[2] = {a, b};
    CHECK(sc_theta_union(&u, ab, 2, 12, SC_THETA_DEFAULT_SEED, true) == SC_OK);
    CHECK(u->n == 4096); /* trimmed to k */
    CHECK(u->theta < SC_THETA_MAX);
    sc_theta_compact_destroy(u);
    CHECK(sc_theta_union(&u, ab, 2, 13, SC_THETA_DEFAULT_SEED, true) == SC_OK);
    CHECK(sc_theta_estimate_of(u->n, u->theta, u->empty) == 5000.0);
    CHECK(sc_theta_intersection(&x, ab, 2, SC_THETA_DEFAULT_SEED, true) == SC_OK);
    CHECK(sc_theta_estimate_of(x->n, x->theta, x->empty) == 1000.0);
    CHECK(sc_theta_a_not_b(&d, a, b, SC_THETA_DEFAULT_SEED, true) == SC_OK);
    CHECK(sc_theta_estimate_of(d->n, d->theta, d->empty) == 2000.0);
    double j[3];
    CHECK(sc_theta_jaccard(j, a, b, SC_THETA_DEFAULT_SEED) == SC_OK);
    CHECK(fabs(j[1] - 0.2) < 1e-12);
    CHECK(sc_theta_jaccard(j, a, a, SC_THETA_DEFAULT_SEED) == SC_OK && j[1] == 1.0);
    CHECK(sc_theta_jaccard(j, a, e, SC_THETA_DEFAULT_SEED) == SC_OK && j[1] == 0.0);
    sc_theta_compact *ea;
    CHECK(sc_theta_a_not_b(&ea, e, a, SC_THETA_DEFAULT_SEED, true) == SC_OK && ea->empty);
    sc_theta_compact_destroy(ea);
    sc_theta_compact_destroy(u);
    sc_theta_compact_destroy(x);
    sc_theta_compact_destroy(d);
    sc_theta_compact_destroy(a);
    sc_theta_compact_destroy(b);
    sc_theta_compact_destroy(e);
}

static void test_bounds_coverage(void) {
    /* 200 independent streams of 50k: the 2-sigma interval must cover the truth ~95% */
    int covered = 0, trials = 200;
    for (int t = 0; t < trials; t++) {
        sc_theta *s;
        sc_theta_create(&s, 9, SC_THETA_DEFAULT_SEED);
        for (int64_t i = 0; i < 50000; i++) sc_theta_update_i64(s, i + (int64_t)t * 1000000007LL);
        covered += sc_theta_lower_bound(s, 2) <= 50000 && 50000 <= sc_theta_upper_bound(s, 2);
        sc_theta_destroy(s);
    }
    CHECK(covered >= 180);
    /* small-count (Poisson) branch is monotone in z */
    uint64_t theta = SC_THETA_MAX / 100;
    for (uint32_t n = 0; n < 130; n += 7) {
        double l1 = sc_theta_lower_bound_of(n, theta, false, 1), l3 = sc_theta_lower_bound_of(n, theta, false, 3);
        double u1 = sc_theta_upper_bound_of(n, theta, false, 1), u3 = sc_theta_upper_bound_of(n, theta, false, 3);
        CHECK(l3 <= l1 && l1 <= n * 100.0 + 1e-6 && n * 100.0 <= u1 + 1e-6 && u1 <= u3);
    }
}

int main(void) {
    test_murmur_golden();
    test_exact_and_estimation();
    test_strings_and_doubles();
    test_serialization();
    test_set_ops();
    test_bounds_coverage();
    if (failures) {
        fprintf(stderr, "test_theta: %d failures\n", failures);
        return 1;
    }
    printf("test_theta: ok\n");
    return 0;
}
