// sources: sketch/hll.c sketch/murmur3.c
/* HLL_8 tests (debug, ASan+UBSan with leak check). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sc_status.h"
#include "sketch/hll.h"

static int failures = 0;
#define CHECK(cond)                                                        \
    do {                                                                   \
        if (!(cond)) {                                                     \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                    \
        }                                                                  \
    } while (0)

static void test_empty_and_errors(void) {
    sc_hll *h;
    CHECK(sc_hll_create(&h, 3) == SC_EINVAL && h == NULL);
    CHECK(sc_hll_create(&h, 22) == SC_EINVAL && h == NULL);
    CHECK(sc_hll_create(&h, 10) == SC_OK);
    CHECK(sc_hll_is_empty(h) && sc_hll_estimate(h) == 0.0 && sc_hll_upper_bound(h, 2) == 0.0);
    uint8_t buf[8];
    CHECK(sc_hll_serialized_size(h) == 8 && sc_hll_serialize(h, buf, 8) == SC_OK);
    const uint8_t empty_ds[8] = {0x02, 0x01, 0x07, 0x0a, 0x03, 0x0c, 0x00, 0x08}; /* DataSketches */
    CHECK(memcmp(buf, empty_ds, 8) == 0);
    sc_hll *e;
    CHECK(sc_hll_deserialize(&e, buf, 8) == SC_OK && sc_hll_is_empty(e));
    sc_hll_destroy(e);
    buf[2] = 3;
    CHECK(sc_hll_deserialize(&e, buf, 8) == SC_EFORMAT && e == NULL);
    sc_hll_update_bytes(h, "", 0); /* the empty string is not an update */
    CHECK(sc_hll_is_empty(h));
    sc_hll_destroy(h);
}

static void test_accuracy_and_roundtrip(void) {
    const size_t sizes[] = {1, 10, 1000, 100000, 1000000};
    for (size_t t = 0; t < 5; t++) {
        size_t n = sizes[t];
        sc_hll *h;
        sc_hll_create(&h, 12);
        int64_t *col = malloc(sizeof(int64_t) * n);
        for (size_t i = 0; i < n; i++) col[i] = (int64_t)(i * 0x9e3779b97f4a7c15ULL);
        CHECK(sc_hll_update_i64_array(h, col, n, NULL, 0) == SC_OK);
        double est = sc_hll_estimate(h), rse = 0.8326 / 64.0;
        CHECK(fabs(est / n - 1.0) < 3 * rse + 1e-3);
        CHECK(sc_hll_lower_bound(h, 3) <= n + 1e-9 && n <= sc_hll_upper_bound(h, 3) + 1e-9);
        size_t len = sc_hll_serialized_size(h);
        uint8_t *buf = malloc(len);
        CHECK(sc_hll_serialize(h, buf, len - 1) == SC_EINVAL);
        CHECK(sc_hll_serialize(h, buf, len) == SC_OK && buf[0] == 10 && buf[7] == 10);
        sc_hll *back;
        CHECK(sc_hll_deserialize(&back, buf, len) == SC_OK);
        CHECK(sc_hll_estimate(back) == est);
        CHECK(memcmp(sc_hll_registers(back), sc_hll_registers(h), 4096) == 0);
        sc_hll_destroy(back);
        sc_hll *bad = NULL;
        CHECK(sc_hll_deserialize(&bad, buf, len - 1) == SC_EFORMAT && bad == NULL);
        sc_hll_destroy(h);
        free(buf);
        free(col);
    }
}

static void test_union(void) {
    sc_hll *a, *b, *u, *small;
    sc_hll_create(&a, 12);
    sc_hll_create(&b, 12);
    sc_hll_create(&u, 12);
    sc_hll_create(&small, 10);
    for (int64_t i = 0; i < 300000; i++) sc_hll_update_i64(a, i);
    for (int64_t i = 200000; i < 500000; i++) sc_hll_update_i64(b, i);
    CHECK(sc_hll_merge(u, a) == SC_OK && sc_hll_estimate(u) == sc_hll_estimate(a)); /* copy */
    CHECK(sc_hll_merge(u, b) == SC_OK && sc_hll_is_out_of_order(u));
    CHECK(fabs(sc_hll_estimate(u) / 500000.0 - 1.0) < 3 * 1.04 / 64.0);
    CHECK(sc_hll_merge(a, small) == SC_EINVAL); /* fold only from larger to smaller */
    CHECK(sc_hll_merge(small, u) == SC_OK);
    CHECK(fabs(sc_hll_estimate(small) / 500000.0 - 1.0) < 3 * 1.04 / 32.0);
    /* strings and doubles */
    sc_hll *s;
    sc_hll_create(&s, 8);
    const char data[] = "abbccc";
    int32_t off[] = {0, 1, 3, 3, 6};
    CHECK(sc_hll_update_str32_array(s, off, (const uint8_t *)data, 4, NULL, 0) == SC_OK);
    double d[] = {0.0, -0.0, NAN};
    CHECK(sc_hll_update_f64_array(s, d, 3, NULL, 0) == SC_OK);
    CHECK(fabs(sc_hll_estimate(s) - 5.0) < 0.1);
    sc_hll_destroy(s);
    sc_hll_destroy(a);
    sc_hll_destroy(b);
    sc_hll_destroy(u);
    sc_hll_destroy(small);
}

int main(void) {
    test_empty_and_errors();
    test_accuracy_and_roundtrip();
    test_union();
    if (failures) {
        fprintf(stderr, "test_hll: %d failures\n", failures);
        return 1;
    }
    printf("test_hll: ok\n");
    return 0;
}
