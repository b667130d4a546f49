// sources: exec/lists.c exec/common.c exec/arrow_bridge.c runtime/batch.c runtime/ring.c
/* Tests for exec/lists (list columns: Arrow import, decode, explode) and the columnar batch
 * helpers the driver relies on (sc_batch_take, sc_batch_concat at unaligned bit offsets).
 * Expectations are written out by hand or computed by a per-row model in the test. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/arrow_bridge.h"
#include "exec/lists.h"

#define CHECK(c)                                                                  \
    do {                                                                          \
        if (!(c)) {                                                               \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c); \
            exit(1);                                                              \
        }                                                                         \
    } while (0)
#define CHECK_RC(x) CHECK((x) == SC_OK)

static void noop_schema(struct ArrowSchema *s) { s->release = NULL; }
static void noop_array(struct ArrowArray *a) { a->release = NULL; }

/* lists of int64: [[1, null, 3], null, [], [7]] as an Arrow large list */
static void test_import_decode_int_lists(void) {
    int64_t offs[5] = { 0, 3, 3, 3, 4 };
    int64_t vals[4] = { 1, 0, 3, 7 };
    uint8_t cvalid = 0x0D; /* 1011: element 1 null */
    uint8_t lvalid = 0x0D; /* list 1 null */
    const void *cb[2] = { &cvalid, vals }, *lb[2] = { &lvalid, offs };
    struct ArrowArray child = { .length = 4, .null_count = 1, .n_buffers = 2, .buffers = cb, .release = noop_array };
    struct ArrowArray *kids[1] = { &child };
    struct ArrowArray list = { .length = 4, .null_count = 1, .n_buffers = 2, .buffers = lb, .n_children = 1,
                               .children = kids, .release = noop_array };
    struct ArrowSchema cs = { .format = "l", .release = noop_schema };
    struct ArrowSchema *csk[1] = { &cs };
    struct ArrowSchema ls = { .format = "+L", .n_children = 1, .children = csk, .release = noop_schema };
    uint8_t lt[3] = { SC_LT_INT, SC_LT_INT, SC_LT_LIST + SC_LT_INT };
    sc_schema s;
    CHECK_RC(sc_schema_init(&s, 3, lt));
    sc_batch *b;
    CHECK_RC(sc_batch_new(&b, &s, 4));
    CHECK_RC(sc_list_import(b, 2, SC_LT_INT, &ls, &list, 0, 4));
    b->nrows = 4;
    CHECK(b->cols[2].null_count == 1);
    int64_t n;
    int32_t len;
    const char *p = sc_batch_get_utf8(b, 2, 0, &len);
    CHECK_RC(sc_list_count(p, len, SC_LT_INT, &n));
    CHECK(n == 3 && len == 9 + 1 + 9);
    sc_list_decoded d;
    CHECK_RC(sc_list_decode(&b->cols[2], 4, SC_LT_INT, &d));
    CHECK(d.m == 4);
    int64_t want_offs[5] = { 0, 3, 3, 3, 4 };
    CHECK(memcmp(d.offsets, want_offs, sizeof want_offs) == 0);
    CHECK(d.validity[0] == 0x0D);
    CHECK(((int64_t *)d.values)[0] == 1 && ((int64_t *)d.values)[2] == 3 && ((int64_t *)d.values)[3] == 7);
    sc_list_decoded_free(&d);
    /* malformed bytes are refused, not read past */
    CHECK(sc_list_count("\x01\x02", 2, SC_LT_INT, &n) == SC_EINVAL);
    sc_batch_release(b);
    sc_schema_free(&s);
}

/* explode of [["a","b"], [], null, ["c"]] with a second column; and a length mismatch */
static void put_list(sc_batch *b, int32_t col, int64_t row, const char **xs, int nx) {
    char buf[256];
    int at = 0;
    for (int i = 0; i < nx; i++) {
        buf[at++] = xs[i] != NULL;
        if (!xs[i]) continue;
        int32_t l = (int32_t)strlen(xs[i]);
        memcpy(buf + at, &l, 4);
        memcpy(buf + at + 4, xs[i], (size_t)l);
        at += 4 + l;
    }
    CHECK_RC(sc_batch_put_utf8(b, col, row, buf, at));
}

static void test_explode(void) {
    uint8_t lti[4] = { SC_LT_INT, SC_LT_INT, SC_LT_INT, SC_LT_LIST + SC_LT_STR };
    uint8_t lto[4] = { SC_LT_INT, SC_LT_INT, SC_LT_INT, SC_LT_STR };
    sc_schema si, so;
    CHECK_RC(sc_schema_init(&si, 4, lti));
    CHECK_RC(sc_schema_init(&so, 4, lto));
    sc_step_counters cnt;
    memset(&cnt, 0, sizeof cnt);
    sc_op_base base;
    CHECK_RC(sc_op_base_init(&base, 1, true, true, &cnt, &si, &so, 2, true));
    int32_t cols[1] = { 3 };
    void *st;
    CHECK_RC(sc_op_explode_create(&st, &base, cols, 1, "mismatch"));
    sc_batch *in;
    CHECK_RC(sc_batch_new(&in, &si, 4));
    const char *r0[2] = { "a", "b" }, *r3[2] = { "c", NULL };
    put_list(in, 3, 0, r0, 2);
    put_list(in, 3, 1, NULL, 0);
    sc_batch_set_null(in, 3, 2);
    put_list(in, 3, 3, r3, 2);
    for (int r = 0; r < 4; r++) {
        sc_batch_set_i64(in, 0, r, 100 + r);
        sc_batch_set_i64(in, 1, r, 0);
        sc_batch_set_i64(in, 2, r, r * 10);
    }
    in->nrows = 4;
    sc_batch *out;
    CHECK_RC(sc_op_explode_run(st, in, &out));
    CHECK(out && out->nrows == 6 && !out->next);
    int64_t want_x[6] = { 0, 0, 10, 20, 30, 30 };
    const char *want_s[6] = { "a", "b", NULL, NULL, "c", NULL };
    for (int r = 0; r < 6; r++) {
        CHECK(sc_batch_get_i64(out, 2, r) == want_x[r]);
        CHECK(sc_batch_get_i64(out, 0, r) == 100 + want_x[r] / 10);
        if (!want_s[r]) {
            CHECK(!sc_batch_is_valid(out, 3, r));
            continue;
        }
        int32_t l;
        const char *p = sc_batch_get_utf8(out, 3, r, &l);
        CHECK(sc_batch_is_valid(out, 3, r) && l == (int32_t)strlen(want_s[r]) && !memcmp(p, want_s[r], (size_t)l));
    }
    sc_batch_release(out);
    sc_op_explode_destroy(st);
    sc_op_base_free(&base);
    sc_schema_free(&si);
    sc_schema_free(&so);
}

/* take + concat: random validity and bools at odd part sizes equal a per-row model */
static void test_take_concat(void) {
    uint8_t lt[4] = { SC_LT_INT, SC_LT_BOOL, SC_LT_STR, SC_LT_FLOAT };
    sc_schema s;
    CHECK_RC(sc_schema_init(&s, 4, lt));
    uint64_t x = 12345;
    sc_batch *parts[9];
    int64_t total = 0;
    for (int k = 0; k < 9; k++) {
        sc_batch *src;
        int64_t n = 1 + (int64_t)(k * 7 % 13);
        CHECK_RC(sc_batch_new(&src, &s, 2 * n));
        for (int64_t r = 0; r < 2 * n; r++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            sc_batch_set_i64(src, 0, r, (int64_t)(x >> 33));
            sc_batch_set_bool(src, 1, r, (x >> 20) & 1);
            if ((x >> 40) % 3 == 0) sc_batch_set_null(src, 1, r);
            if ((x >> 45) % 4 == 0) sc_batch_set_null(src, 2, r);
            else CHECK_RC(sc_batch_put_utf8(src, 2, r, "xyz", (int32_t)((x >> 50) % 4)));
            sc_batch_set_f64(src, 3, r, (double)r);
        }
        src->nrows = 2 * n;
        int64_t idx[32];
        for (int64_t i = 0; i < n; i++) idx[i] = 2 * i + 1; /* odd rows */
        CHECK_RC(sc_batch_new(&parts[k], &s, n));
        CHECK_RC(sc_batch_take(parts[k], src, idx, n));
        for (int64_t i = 0; i < n; i++) {
            CHECK(sc_batch_get_i64(parts[k], 0, i) == sc_batch_get_i64(src, 0, idx[i]));
            CHECK(sc_batch_is_valid(parts[k], 1, i) == sc_batch_is_valid(src, 1, idx[i]));
            CHECK(sc_batch_get_bool(parts[k], 1, i) == sc_batch_get_bool(src, 1, idx[i]));
            CHECK(sc_batch_is_valid(parts[k], 2, i) == sc_batch_is_valid(src, 2, idx[i]));
        }
        total += n;
        sc_batch_release(src);
    }
    sc_batch *all;
    CHECK_RC(sc_batch_concat(&all, &s, parts, 9));
    CHECK(all->nrows == total);
    int64_t row = 0, nulls = 0;
    for (int k = 0; k < 9; k++)
        for (int64_t i = 0; i < parts[k]->nrows; i++, row++) {
            CHECK(sc_batch_get_i64(all, 0, row) == sc_batch_get_i64(parts[k], 0, i));
            CHECK(sc_batch_is_valid(all, 1, row) == sc_batch_is_valid(parts[k], 1, i));
            CHECK(sc_batch_get_bool(all, 1, row) == sc_batch_get_bool(parts[k], 1, i));
            CHECK(sc_batch_is_valid(all, 2, row) == sc_batch_is_valid(parts[k], 2, i));
            int32_t la, lb;
            const char *a = sc_batch_get_utf8(all, 2, row, &la), *b = sc_batch_get_utf8(parts[k], 2, i, &lb);
            CHECK(la == lb && !memcmp(a, b, (size_t)la));
            nulls += !sc_batch_is_valid(all, 1, row);
        }
    CHECK(all->cols[1].null_count == nulls);
    for (int k = 0; k < 9; k++) sc_batch_release(parts[k]);
    sc_batch_release(all);
    sc_schema_free(&s);
}

typedef struct lbuf_t {
    char b[64];
    int32_t len;
} lbuf_t;

static lbuf_t mk_list(int n, const double *v, const char *nulls, bool ints) {
    lbuf_t L = { .len = 0 };
    for (int k = 0; k < n; k++) {
        bool nul = nulls && nulls[k] == 'n';
        L.b[L.len++] = (char)!nul;
        if (nul) continue;
        if (ints) {
            int64_t x = (int64_t)v[k];
            memcpy(L.b + L.len, &x, 8);
        } else {
            memcpy(L.b + L.len, &v[k], 8);
        }
        L.len += 8;
    }
    return L;
}

/* Python list comparison, element conversion and key normalization. */
static void test_compare_convert_normalize(void) {
    static const double a[] = { 1, 2, 3 }, big[] = { 9007199254740993.0 }, z[] = { -0.0, NAN };
    lbuf_t i123 = mk_list(3, a, NULL, true), i12 = mk_list(2, a, NULL, true), f12 = mk_list(2, a, NULL, false);
    lbuf_t in2 = mk_list(2, a, ".n", true), s = { .len = 0 };
    CHECK(sc_list_compare(i12.b, i12.len, SC_LT_INT, f12.b, f12.len, SC_LT_FLOAT, SC_LCMP_EQ) == 1);
    CHECK(sc_list_compare(i12.b, i12.len, SC_LT_INT, i123.b, i123.len, SC_LT_INT, SC_LCMP_EQ) == 0);
    CHECK(sc_list_compare(i12.b, i12.len, SC_LT_INT, i123.b, i123.len, SC_LT_INT, SC_LCMP_LT) == 1);
    CHECK(sc_list_compare(i123.b, i123.len, SC_LT_INT, i12.b, i12.len, SC_LT_INT, SC_LCMP_GE) == 1);
    CHECK(sc_list_compare(in2.b, in2.len, SC_LT_INT, i12.b, i12.len, SC_LT_INT, SC_LCMP_NE) == 1);
    CHECK(sc_list_compare(in2.b, in2.len, SC_LT_INT, i12.b, i12.len, SC_LT_INT, SC_LCMP_LT) == SC_LCMP_ERR);
    CHECK(sc_list_compare(in2.b, in2.len, SC_LT_INT, in2.b, in2.len, SC_LT_INT, SC_LCMP_GE) == 1);
    CHECK(sc_list_compare(s.b, 0, SC_LT_NULL, i12.b, i12.len, SC_LT_INT, SC_LCMP_LE) == 1);
    /* int and float compare exactly: 2**53 + 1 != float(2**53 + 1) */
    lbuf_t ib = { .len = 9 }, fb = mk_list(1, big, NULL, false);
    int64_t x = 9007199254740993;
    ib.b[0] = 1;
    memcpy(ib.b + 1, &x, 8);
    CHECK(sc_list_compare(ib.b, ib.len, SC_LT_INT, fb.b, fb.len, SC_LT_FLOAT, SC_LCMP_EQ) == 0);
    CHECK(sc_list_compare(ib.b, ib.len, SC_LT_INT, fb.b, fb.len, SC_LT_FLOAT, SC_LCMP_GT) == 1);
    /* strings by UTF-8 bytes (code points) */
    const char sa[] = { 1, 1, 0, 0, 0, 'b' }, sb[] = { 1, 2, 0, 0, 0, (char)0xc3, (char)0xa9 };
    CHECK(sc_list_compare(sa, 6, SC_LT_STR, sb, 7, SC_LT_STR, SC_LCMP_LT) == 1);
    /* malformed input is an error, not a read past the end */
    CHECK(sc_list_compare("\x01\x02", 2, SC_LT_INT, i12.b, i12.len, SC_LT_INT, SC_LCMP_EQ) == SC_LCMP_ERR);
    /* ints re-encoded as floats: the same bytes as the float list */
    char out[64];
    sc_list_ints_to_floats(in2.b, in2.len, SC_LT_INT, out);
    lbuf_t fn2 = mk_list(2, a, ".n", false);
    CHECK(memcmp(out, fn2.b, (size_t)fn2.len) == 0);
    /* normalized: -0.0 as 0.0, NaN one bit pattern */
    lbuf_t zn = mk_list(2, z, NULL, false), zn2 = zn;
    double other_nan = -NAN, pz = 0.0;
    memcpy(zn2.b + 10, &other_nan, 8);
    sc_list_norm_floats(zn.b, zn.len, SC_LT_FLOAT);
    sc_list_norm_floats(zn2.b, zn2.len, SC_LT_FLOAT);
    CHECK(memcmp(zn.b, zn2.b, (size_t)zn.len) == 0);
    CHECK(memcmp(zn.b + 1, &pz, 8) == 0);
}

/* lists of lists: [[[1, 2], null], null, [[]]] as a large list of lists; decode, explode,
 * compare, convert and normalize one level down */
static void test_nested(void) {
    int64_t vals[2] = { 1, 2 };
    int32_t ioffs[4] = { 0, 2, 2, 2 }; /* inner lists: [1, 2], null, [] */
    uint8_t ivalid = 0x05;             /* inner list 1 null */
    int64_t ooffs[4] = { 0, 2, 2, 3 };
    uint8_t ovalid = 0x05; /* outer list 1 null */
    const void *vb[2] = { NULL, vals }, *ib[2] = { &ivalid, ioffs }, *ob[2] = { &ovalid, ooffs };
    struct ArrowArray leaf = { .length = 2, .n_buffers = 2, .buffers = vb, .release = noop_array };
    struct ArrowArray *lk[1] = { &leaf };
    struct ArrowArray inner = { .length = 3, .null_count = 1, .n_buffers = 2, .buffers = ib, .n_children = 1,
                                .children = lk, .release = noop_array };
    struct ArrowArray *ik[1] = { &inner };
    struct ArrowArray outer = { .length = 3, .null_count = 1, .n_buffers = 2, .buffers = ob, .n_children = 1,
                                .children = ik, .release = noop_array };
    struct ArrowSchema ls = { .format = "l", .release = noop_schema }, *lsk[1] = { &ls };
    struct ArrowSchema is = { .format = "+l", .n_children = 1, .children = lsk, .release = noop_schema }, *isk[1] = { &is };
    struct ArrowSchema os = { .format = "+L", .n_children = 1, .children = isk, .release = noop_schema };
    const uint8_t LL = 2 * SC_LT_LIST + SC_LT_INT, L1 = SC_LT_LIST + SC_LT_INT;
    uint8_t lti[3] = { SC_LT_INT, SC_LT_INT, LL }, lto[3] = { SC_LT_INT, SC_LT_INT, L1 };
    sc_schema si, so;
    CHECK_RC(sc_schema_init(&si, 3, lti));
    CHECK_RC(sc_schema_init(&so, 3, lto));
    sc_batch *b;
    CHECK_RC(sc_batch_new(&b, &si, 3));
    CHECK(sc_list_import(b, 2, SC_LT_INT, &os, &outer, 0, 3) == SC_ETYPE); /* not a list of ints */
    CHECK_RC(sc_list_import(b, 2, L1, &os, &outer, 0, 3));
    for (int r = 0; r < 3; r++) {
        sc_batch_set_i64(b, 0, r, r);
        sc_batch_set_i64(b, 1, r, 0);
    }
    b->nrows = 3;
    /* row 0: tag, len 19, ([1, 2]: 2 x 9 bytes) + tag 0 */
    int32_t len;
    const char *p = sc_batch_get_utf8(b, 2, 0, &len);
    CHECK(len == 1 + 4 + 18 + 1);
    int64_t n;
    CHECK_RC(sc_list_count(p, len, L1, &n));
    CHECK(n == 2);
    sc_list_decoded d;
    CHECK_RC(sc_list_decode(&b->cols[2], 3, L1, &d));
    CHECK(d.m == 3 && d.str_offsets[1] == 18 && d.str_offsets[3] == 18); /* [1, 2], null, [] */
    CHECK(d.validity[0] == 0x05);
    sc_list_decoded_free(&d);
    /* compare: [[1, 2], null] > [[1, 1]]; == itself; a list[list[float]] [[1.0, 2.0], null] */
    lbuf_t one = { .len = 0 };
    static const double a11[] = { 1, 1 };
    lbuf_t i11 = mk_list(2, a11, NULL, true);
    one.b[one.len++] = 1;
    memcpy(one.b + one.len, &i11.len, 4);
    one.len += 4;
    memcpy(one.b + one.len, i11.b, (size_t)i11.len);
    one.len += i11.len;
    CHECK(sc_list_compare(p, len, L1, one.b, one.len, L1, SC_LCMP_GT) == 1);
    CHECK(sc_list_compare(p, len, L1, p, len, L1, SC_LCMP_EQ) == 1);
    char conv[64];
    sc_list_ints_to_floats(p, len, L1, conv);
    CHECK(sc_list_compare(conv, len, SC_LT_LIST + SC_LT_FLOAT, p, len, L1, SC_LCMP_EQ) == 1);
    double two = 2.0;
    CHECK(memcmp(conv + 1 + 4 + 9 + 1, &two, 8) == 0);
    /* explode one level: list[list[int]] -> list[int] */
    sc_step_counters cnt;
    memset(&cnt, 0, sizeof cnt);
    sc_op_base base;
    CHECK_RC(sc_op_base_init(&base, 1, true, true, &cnt, &si, &so, 4, true));
    int32_t cols[1] = { 2 };
    void *st;
    CHECK_RC(sc_op_explode_create(&st, &base, cols, 1, "mismatch"));
    sc_batch *out;
    CHECK_RC(sc_op_explode_run(st, b, &out));
    CHECK(out && out->nrows == 4); /* [1, 2], null | null | [] */
    int32_t l0, l3;
    const char *q = sc_batch_get_utf8(out, 2, 0, &l0);
    CHECK(sc_batch_is_valid(out, 2, 0) && l0 == 18 && sc_list_compare(q, l0, SC_LT_INT, i11.b, i11.len, SC_LT_INT, SC_LCMP_GT) == 1);
    CHECK(!sc_batch_is_valid(out, 2, 1) && !sc_batch_is_valid(out, 2, 2));
    sc_batch_get_utf8(out, 2, 3, &l3);
    CHECK(sc_batch_is_valid(out, 2, 3) && l3 == 0);
    sc_batch_release(out);
    sc_op_explode_destroy(st);
    sc_op_base_free(&base);
    sc_schema_free(&si);
    sc_schema_free(&so);
}

int main(void) {
    test_import_decode_int_lists();
    test_explode();
    test_take_concat();
    test_compare_convert_normalize();
    test_nested();
    puts("test_lists: ok");
    return 0;
}
