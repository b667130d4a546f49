// sources: sketch/hll.c sketch/murmur3.c sketch/concurrent.c
/* HLL_8 tests (debug, ASan+UBSan with leak check). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sc_status.h"
#include "sketch/hll.h"
#include "sketch/concurrent.h"
#include <pthread.h>

static int failures = 0;
#define CHECK(cond)                                                        \
    do {                                                                   \
        if (!(cond)) {                                                     \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                    \
        }                                                                  \
    } while (0)

static bool regs_equal(const sc_hll *a, const sc_hll *b) {
    static uint8_t ra[1u << SC_HLL_MAX_LG_K], rb[1u << SC_HLL_MAX_LG_K];
    if (sc_hll_lg_k(a) != sc_hll_lg_k(b)) return false;
    sc_hll_registers(a, ra);
    sc_hll_registers(b, rb);
    return memcmp(ra, rb, 1u << sc_hll_lg_k(a)) == 0;
}

/* Coupon mode: small cardinalities are exact even where two items share a register; the
 * sketch leaves it with one coupon more than DataSketches' thresholds (7 below lg_k 8, else
 * 3/4 of 2^(lg_k-3)), and its estimate then continues from the coupon count. */
static void test_coupon_mode(void) {
    const uint8_t lgs[] = {4, 7, 8, 12};
    const uint32_t most[] = {7, 7, 24, 384};
    for (int t = 0; t < 4; t++) {
        sc_hll *h;
        CHECK(sc_hll_create(&h, lgs[t]) == SC_OK);
        uint32_t k = 1u << lgs[t];
        /* coupons that all share register 5 (values 1..3) and distinct 26-bit addresses */
        for (uint32_t i = 0; i < most[t]; i++) {
            uint32_t coupon = ((1u + i % 3) << 26) | (5u + k * (i + 1));
            sc_hll_update_coupon(h, coupon);
            sc_hll_update_coupon(h, coupon); /* a repeat is no update */
            CHECK(sc_hll_is_coupon_mode(h) && sc_hll_estimate(h) == (double)(i + 1));
        }
        CHECK(sc_hll_lower_bound(h, 3) == (double)most[t]);
        CHECK(sc_hll_upper_bound(h, 3) > most[t] && sc_hll_upper_bound(h, 3) < most[t] * 1.0002);
        sc_hll *copy;
        CHECK(sc_hll_copy(&copy, h) == SC_OK && sc_hll_estimate(copy) == most[t]);
        sc_hll_update_coupon(h, (1u << 26) | 6u);
        CHECK(!sc_hll_is_coupon_mode(h) && !sc_hll_is_out_of_order(h));
        CHECK(sc_hll_estimate(h) == most[t] + 1.0); /* HIP starts at the count, new coupon in */
        uint8_t *r = calloc(k, 1);
        sc_hll_registers(h, r);
        CHECK(r[5] == 3 && r[6] == 1);
        for (uint32_t j = 0; j < k; j++) CHECK(j == 5 || j == 6 || r[j] == 0);
        free(r);
        /* a union of coupon sketches stays exact while it fits */
        sc_hll *u;
        CHECK(sc_hll_create(&u, lgs[t]) == SC_OK);
        CHECK(sc_hll_merge(u, copy) == SC_OK && sc_hll_merge(u, copy) == SC_OK);
        CHECK(sc_hll_is_coupon_mode(u) && sc_hll_estimate(u) == most[t]);
        CHECK(sc_hll_merge(u, h) == SC_OK && !sc_hll_is_coupon_mode(u) && sc_hll_is_out_of_order(u));
        CHECK(regs_equal(u, h));
        /* a value-0 coupon is no item: ignored by updates, refused in an image */
        sc_hll_update_coupon(copy, 7u);
        CHECK(sc_hll_estimate(copy) == most[t]);
        uint8_t img[16] = {2, 1, 7, lgs[t], 3, 8, 2, 8, 1, 0, 0, 4, 7, 0, 0, 0};
        sc_hll *bad = NULL;
        CHECK(sc_hll_deserialize(&bad, img, 16) == SC_EFORMAT && bad == NULL);
        img[15] = 4;
        CHECK(sc_hll_deserialize(&bad, img, 16) == SC_OK && sc_hll_estimate(bad) == 2.0);
        sc_hll_destroy(bad);
        sc_hll_reset(copy);
        CHECK(sc_hll_is_empty(copy) && sc_hll_is_coupon_mode(copy));
        sc_hll_destroy(u);
        sc_hll_destroy(copy);
        sc_hll_destroy(h);
    }
}

/* Memory follows the mode: a few coupons live in the sketch itself, a set grows by doubling
 * and is freed when the registers come; a reset returns to the bare sketch. Copies of each
 * mode hold what their source holds, and count the same. */
static void test_memory_follows_the_mode(void) {
    sc_hll *h;
    CHECK(sc_hll_create(&h, 21) == SC_OK);
    const size_t bare = sc_hll_footprint(h);
    CHECK(bare < 160);
    for (int64_t i = 0; i < 7; i++) CHECK(sc_hll_update_i64(h, i) == SC_OK);
    CHECK(sc_hll_footprint(h) == bare && sc_hll_estimate(h) == 7.0); /* the list, inside */
    CHECK(sc_hll_update_i64(h, 7) == SC_OK);
    CHECK(sc_hll_footprint(h) == bare + 4 * 32); /* a set of 32 slots */
    for (int64_t i = 8; i < 1000; i++) CHECK(sc_hll_update_i64(h, i) == SC_OK);
    CHECK(sc_hll_is_coupon_mode(h) && sc_hll_estimate(h) == 1000.0);
    CHECK(sc_hll_footprint(h) == bare + 4 * 2048); /* 1000 coupons: at most 3/4 of 2^11 */
    sc_hll *c1;
    CHECK(sc_hll_copy(&c1, h) == SC_OK && sc_hll_footprint(c1) == sc_hll_footprint(h));
    CHECK(sc_hll_estimate(c1) == 1000.0);
    for (int64_t i = 1000; i < 200000; i++) CHECK(sc_hll_update_i64(h, i) == SC_OK);
    CHECK(!sc_hll_is_coupon_mode(h)); /* 3/4 of 2^18 coupons: HLL mode, the set freed */
    CHECK(sc_hll_footprint(h) == bare + (1u << 21));
    sc_hll *c2;
    CHECK(sc_hll_copy(&c2, h) == SC_OK && sc_hll_footprint(c2) == sc_hll_footprint(h));
    CHECK(sc_hll_estimate(c2) == sc_hll_estimate(h) && regs_equal(c2, h));
    sc_hll_reset(h); /* keeps its registers for the next promotion */
    CHECK(sc_hll_footprint(h) == bare + (1u << 21));
    CHECK(sc_hll_is_empty(h) && sc_hll_is_coupon_mode(h) && sc_hll_estimate(h) == 0.0);
    CHECK(sc_hll_update_i64(h, 1) == SC_OK && sc_hll_estimate(h) == 1.0);
    sc_hll *c3; /* a copy of it holds no spare registers */
    CHECK(sc_hll_copy(&c3, h) == SC_OK && sc_hll_footprint(c3) == bare);
    CHECK(sc_hll_estimate(c3) == 1.0);
    sc_hll_destroy(c3);
    for (int64_t i = 0; i < 200000; i++) CHECK(sc_hll_update_i64(h, i) == SC_OK);
    CHECK(!sc_hll_is_coupon_mode(h) && sc_hll_footprint(h) == bare + (1u << 21));
    CHECK(sc_hll_estimate(h) == sc_hll_estimate(c2) && regs_equal(h, c2)); /* same items */
    /* the small copy and an HLL-mode merge into it */
    CHECK(sc_hll_merge(c1, c2) == SC_OK && !sc_hll_is_coupon_mode(c1));
    CHECK(sc_hll_footprint(c1) == bare + (1u << 21));
    sc_hll_destroy(c1);
    sc_hll_destroy(c2);
    sc_hll_destroy(h);
    /* an empty sketch in HLL mode (an HLL image of zero registers, not flagged empty) takes
     * an HLL src whole: its own registers are freed (leak-checked under asan) */
    uint8_t img[40 + 64] = {10, 1, 7, 6, 0, 8, 0, (2 << 2) | 2};
    sc_hll *z, *src;
    CHECK(sc_hll_deserialize(&z, img, sizeof img) == SC_OK);
    CHECK(sc_hll_is_empty(z) && !sc_hll_is_coupon_mode(z) && sc_hll_footprint(z) == bare + 64);
    CHECK(sc_hll_create(&src, 6) == SC_OK);
    for (int64_t i = 0; i < 100; i++) CHECK(sc_hll_update_i64(src, i) == SC_OK);
    CHECK(sc_hll_merge(z, src) == SC_OK && regs_equal(z, src));
    CHECK(sc_hll_estimate(z) == sc_hll_estimate(src) && sc_hll_footprint(z) == bare + 64);
    sc_hll_destroy(z);
    sc_hll_destroy(src);
}

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
        CHECK(sc_hll_serialize(h, buf, len) == SC_OK);
        /* mode byte: LIST (2, 8), SET (3, 9) or HLL (10, 10), target HLL_8 */
        CHECK(n <= 7 ? buf[0] == 2 && buf[7] == 8 : n <= 384 ? buf[0] == 3 && buf[7] == 9
                                                       : buf[0] == 10 && buf[7] == 10);
        sc_hll *back;
        CHECK(sc_hll_deserialize(&back, buf, len) == SC_OK);
        CHECK(sc_hll_estimate(back) == est);
        CHECK(regs_equal(back, h));
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

#define HLL_PER_WRITER 100000
typedef struct { sc_concurrent *c; uint32_t id; } hll_arg;

static void *hll_writer(void *p) {
    hll_arg *a = p;
    int64_t v[1000];
    for (int64_t base = 0; base < HLL_PER_WRITER; base += 1000) {
        for (int j = 0; j < 1000; j++) v[j] = (int64_t)a->id * HLL_PER_WRITER + base + j;
        size_t pos = 0;
        if (sc_conc_writer_enter(a->c, a->id)) continue;
        while (pos < 1000) {
            sc_hll *loc = sc_conc_local(a->c, a->id);
            uint64_t room = sc_conc_room(a->c, a->id);
            size_t take = 1000 - pos < room ? 1000 - pos : (size_t)room;
            sc_hll_update_i64_array(loc, v + pos, take, NULL, 0);
            sc_conc_added(a->c, a->id, take);
            pos += take;
        }
        sc_conc_writer_exit(a->c, a->id);
    }
    return NULL;
}

/* two writers through the concurrent framework: after the flush the global registers equal
 * the sequential sketch's; snapshots while ingesting are valid (TSan covers the races) */
static void test_concurrent(void) {
    uint8_t lg = 12;
    sc_conc_config cfg = {&sc_hll_vtable, &lg, NULL, 2, 512, 0};
    sc_concurrent *c = NULL;
    CHECK(sc_conc_create(&c, &cfg) == SC_OK);
    if (!c) return;
    pthread_t t[2];
    hll_arg args[2] = {{c, 0}, {c, 1}};
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, hll_writer, &args[i]);
    for (int q = 0; q < 100; q++) {
        void *snap = NULL;
        CHECK(sc_conc_snapshot(c, &snap) == SC_OK);
        CHECK(sc_hll_estimate(snap) <= 2.2 * HLL_PER_WRITER);
        sc_hll_destroy(snap);
    }
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    CHECK(sc_conc_flush(c) == SC_OK);
    void *fin = NULL;
    CHECK(sc_conc_snapshot(c, &fin) == SC_OK);
    sc_hll *seq = NULL;
    CHECK(sc_hll_create(&seq, 12) == SC_OK);
    for (int64_t x = 0; x < 2 * HLL_PER_WRITER; x++) sc_hll_update_i64(seq, x);
    CHECK(fin && regs_equal(fin, seq));
    sc_hll_destroy(seq);
    if (fin) sc_hll_destroy(fin);
    CHECK(sc_conc_close(c) == SC_OK);
    sc_conc_destroy(c);
}

int main(void) {
    test_concurrent();
    test_empty_and_errors();
    test_coupon_mode();
    test_memory_follows_the_mode();
    test_accuracy_and_roundtrip();
    test_union();
    if (failures) {
        fprintf(stderr, "test_hll: %d failures\n", failures);
        return 1;
    }
    printf("test_hll: ok\n");
    return 0;
}
