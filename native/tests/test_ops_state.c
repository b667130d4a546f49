// sources: exec/ops_state.c exec/ops_keyed.c exec/aggstate.c exec/ops_window.c exec/keyhash.c exec/rowstore.c exec/common.c runtime/batch.c runtime/ring.c exec/lists.c
/* Tests for exec/ops_state (aggregate / running, top-k, dedup, windows) and its building
 * blocks (key map, row store, correctly rounded int mean). Hand-computed expectations follow
 * the reference interpreter (kernel/streamcell/backends/reference.py); randomized tests
 * compare with brute-force models over random batch splits.
 *
 * Rows are written as text: cells separated by ',', rows by ';', "_" is null, "''" the empty
 * string, T / F booleans. Output rows print as "seq:pos|cells" ("E<step>" for the seq of a
 * row made at end of stream), floats in the shortest round-trip form. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/ops_state.h"

#include "check.h"

#define STEP 3

typedef int (*run_fn)(void *, sc_batch *, sc_batch **);

static sc_step_counters cnt;
static uint64_t next_seq = 1;
static uint64_t rnd_state = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) {
    rnd_state ^= rnd_state << 13;
    rnd_state ^= rnd_state >> 7;
    rnd_state ^= rnd_state << 17;
    return rnd_state;
}
static int rndn(int n) { return (int)(rnd() % (uint64_t)n); }

/* ------------------------------------------------------------------ text buffers */

typedef struct {
    char *s;
    size_t len, cap;
} text;

static void tprintf(text *t, const char *fmt, ...) {
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int n = vsnprintf(t->s ? t->s + t->len : NULL, t->s ? t->cap - t->len : 0, fmt, ap);
        va_end(ap);
        CHECK(n >= 0);
        if (t->s && t->len + (size_t)n < t->cap) {
            t->len += (size_t)n;
            return;
        }
        t->cap = (t->cap + (size_t)n + 1) * 2;
        t->s = realloc(t->s, t->cap);
        CHECK(t->s);
    }
}

static void expect_text(const char *what, const char *got, const char *want) {
    if (strcmp(got ? got : "", want) == 0) return;
    fprintf(stderr, "%s: output differs\n--- got:\n%s--- want:\n%s---\n", what, got ? got : "", want);
    exit(1);
}

/* ------------------------------------------------------------------ schemas, batches */

static uint8_t lt_of(char c) {
    switch (c) {
    case 'i': return SC_LT_INT;
    case 'f': return SC_LT_FLOAT;
    case 'b': return SC_LT_BOOL;
    case 's': return SC_LT_STR;
    case 't': return SC_LT_DATETIME;
    case 'd': return SC_LT_DATE;
    case 'n': return SC_LT_NULL;
    }
    CHECK(!"bad type letter");
    return 0;
}

/* hidden seq, pos + one column per letter */
static void mk_schema(sc_schema *s, const char *user) {
    uint8_t lt[64] = { SC_LT_INT, SC_LT_INT };
    int n = 2;
    for (const char *p = user; *p; p++) lt[n++] = lt_of(*p);
    CHECK_RC(sc_schema_init(s, n, lt));
}

static void put_cell(sc_batch *b, const sc_schema *s, int c, int64_t r, const char *v, size_t len) {
    if (len == 1 && v[0] == '_') {
        sc_batch_set_null(b, c, r);
        return;
    }
    char buf[256];
    CHECK(len < sizeof buf);
    memcpy(buf, v, len);
    buf[len] = 0;
    switch (sc_ltype_physical((sc_ltype)s->lt[c])) {
    case SC_COL_INT64: sc_batch_set_i64(b, c, r, strtoll(buf, NULL, 10)); break;
    case SC_COL_DOUBLE: sc_batch_set_f64(b, c, r, strtod(buf, NULL)); break;
    case SC_COL_BOOL: sc_batch_set_bool(b, c, r, buf[0] == 'T'); break;
    case SC_COL_UTF8:
        if (!strcmp(buf, "''")) len = 0;
        CHECK_RC(sc_batch_put_utf8(b, c, r, buf, (int32_t)len));
        break;
    }
}

/* A batch of user rows (text); hidden seq from next_seq, pos = row index. */
static sc_batch *mk_batch(const sc_schema *s, const char *rows) {
    int64_t n = 0;
    for (const char *p = rows; *p; p++) n += *p == ';';
    if (*rows) n++;
    sc_batch *b;
    CHECK_RC(sc_batch_new(&b, s, n ? n : 1));
    const char *p = rows;
    for (int64_t r = 0; r < n; r++) {
        sc_batch_set_i64(b, SC_COL_SEQ, r, (int64_t)next_seq++);
        sc_batch_set_i64(b, SC_COL_POS, r, r);
        for (int c = SC_NHIDDEN; c < s->ncols; c++) {
            size_t len = strcspn(p, ",;");
            put_cell(b, s, c, r, p, len);
            p += len;
            CHECK(*p == (c + 1 < s->ncols ? ',' : (r + 1 < n ? ';' : 0)));
            if (*p) p++;
        }
    }
    b->nrows = n;
    b->serial = next_seq;
    return b;
}

static sc_batch *mk_eos(const sc_schema *s) {
    sc_batch *b;
    CHECK_RC(sc_batch_new(&b, s, 1));
    b->eos = 1;
    return b;
}

static void fmt_f64(text *t, double d) {
    if (isnan(d)) {
        tprintf(t, "nan");
        return;
    }
    char buf[64];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, d);
        if (strtod(buf, NULL) == d && (d != 0 || signbit(strtod(buf, NULL)) == signbit(d))) break;
    }
    tprintf(t, "%s", buf);
}

static void fmt_row(text *t, const sc_batch *b, int64_t r) {
    int64_t seq = sc_batch_get_i64(b, SC_COL_SEQ, r);
    if ((uint64_t)seq >= SC_SEQ_EOS) tprintf(t, "E%llu:", (unsigned long long)((uint64_t)seq - SC_SEQ_EOS));
    else tprintf(t, "%lld:", (long long)seq);
    tprintf(t, "%lld|", (long long)sc_batch_get_i64(b, SC_COL_POS, r));
    for (int c = SC_NHIDDEN; c < b->ncols; c++) {
        if (c > SC_NHIDDEN) tprintf(t, ",");
        if (!sc_batch_is_valid(b, c, r)) {
            tprintf(t, "_");
            continue;
        }
        switch (b->cols[c].type) {
        case SC_COL_INT64: tprintf(t, "%lld", (long long)sc_batch_get_i64(b, c, r)); break;
        case SC_COL_DOUBLE: fmt_f64(t, sc_batch_get_f64(b, c, r)); break;
        case SC_COL_BOOL: tprintf(t, "%c", sc_batch_get_bool(b, c, r) ? 'T' : 'F'); break;
        case SC_COL_UTF8: {
            int32_t len;
            const char *s = sc_batch_get_utf8(b, c, r, &len);
            tprintf(t, "%.*s", (int)len, s);
            break;
        }
        }
    }
    tprintf(t, "\n");
}

/* Check the null counts agree with the validity bits. */
static void check_batch(const sc_batch *b) {
    for (int c = 0; c < b->ncols; c++) {
        int64_t nulls = 0;
        for (int64_t r = 0; r < b->nrows; r++) nulls += !sc_batch_is_valid(b, c, r);
        CHECK(nulls == b->cols[c].null_count);
    }
    CHECK(b->nrows <= b->capacity);
}

/* Run one input through the op; append the output rows to t; release the output. Checks the
 * chain's shape: eos last (and only for an eos input); keyed sub-batches always answered. */
static void run_into(text *t, run_fn f, void *st, sc_batch *in) {
    bool eos = in->eos;
    uint32_t group_n = in->group_n, part = in->part;
    sc_batch *out = (sc_batch *)0x1;
    CHECK_RC(f(st, in, &out));
    if (group_n && !eos) CHECK(out != NULL);
    for (sc_batch *b = out; b; b = b->next) {
        CHECK(b->eos == (eos && !b->next));
        if (group_n) CHECK(b->group_n == group_n && b->part == part);
        check_batch(b);
        for (int64_t r = 0; r < b->nrows; r++) fmt_row(t, b, r);
    }
    if (eos) {
        CHECK(out != NULL);
        sc_batch *last = out;
        while (last->next) last = last->next;
        CHECK(last == in);
    }
    sc_batch_release_chain(out);
}

static char *run_text(run_fn f, void *st, sc_batch *in) {
    text t = { 0 };
    tprintf(&t, "%s", "");
    run_into(&t, f, st, in);
    return t.s;
}

#define EXPECT(f, st, in, want)                                 \
    do {                                                        \
        char *got_ = run_text(f, st, in);                       \
        char what_[64];                                         \
        snprintf(what_, sizeof what_, "line %d", __LINE__);     \
        expect_text(what_, got_, want);                         \
        free(got_);                                             \
    } while (0)

static void mk_base(sc_op_base *b, const sc_schema *in, const sc_schema *out, int64_t cap) {
    memset(&cnt, 0, sizeof cnt);
    next_seq = 1;
    CHECK_RC(sc_op_base_init(b, STEP, true, true, &cnt, in, out, cap, true));
}

static uint64_t C(sc_atomic_u64 *a) { return sc_u64_load_relaxed(a); }

/* ================================================================== building blocks */

static void test_div(void) {
    static const struct {
        int64_t x, n;
        double want;
    } v[] = {
        { INT64_C(667880484761374007), 42, 0x1.c3f5ab444eddfp+53 },
        { INT64_C(-7486979218489765845), 611098, -0x1.649227920da4ep+43 },
        { INT64_C(-8531699129511414324), 28, -0x1.0ea1905af015dp+58 },
        { INT64_C(-830770217984633701), 252354, -0x1.7f3fb52709084p+41 },
        { INT64_C(941655628529072089), 4, 0x1.a22dd9c2e71f0p+57 },
        { INT64_C(1207407596419191983), 993474, 0x1.1af7d7e293fbdp+40 },
        { INT64_C(-867633159802647127), 37, -0x1.4d3cf27dfcdbfp+54 },
        { INT64_C(-1905908760335480075), 231822, -0x1.de8ce15e0f5d4p+42 },
        { INT64_C(-3881023613069443411), 10, -0x1.58b442a58c34dp+58 },
        { INT64_C(-609700704475782164), 598647, -0x1.da426d47de955p+39 },
        { INT64_C(-5889558723019949420), 38, -0x1.13508f011236dp+57 },
        { INT64_C(2562501216369800041), 390488, 0x1.7df9f59643faep+42 },
        { INT64_C(9007199254740993), 1, 0x1.0000000000000p+53 },
        { INT64_MIN, 1, -0x1.0000000000000p+63 },
        { INT64_C(9223372036854775807), 3, 0x1.5555555555555p+61 },
        { INT64_MIN, 7, -0x1.2492492492492p+60 },
        { INT64_C(9007199254740995), 2, 0x1.0000000000002p+52 },
        /* (double)x / n rounds twice and differs from the exact quotient's rounding */
        { INT64_C(1152921504606847013), 3, 0x1.5555555555556p+58 },
        { INT64_C(1152921504606847050), 3, 0x1.5555555555556p+58 },
        { INT64_C(1152921504606847087), 3, 0x1.5555555555556p+58 },
        { 7, 2, 3.5 },
        { -7, 2, -3.5 },
        { 0, 5, 0.0 },
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        double got = sc_div_i64(v[i].x, v[i].n);
        if (got != v[i].want) {
            fprintf(stderr, "div %lld / %lld = %a, want %a\n", (long long)v[i].x, (long long)v[i].n, got, v[i].want);
            exit(1);
        }
    }
    CHECK((double)INT64_C(1152921504606847013) / 3 != sc_div_i64(INT64_C(1152921504606847013), 3));
}

static void test_kmap(void) {
    sc_kmap m;
    CHECK_RC(sc_kmap_init(&m, 0));
    enum { N = 20000 };
    char key[32];
    for (int round = 0; round < 2; round++) {
        for (uint64_t i = 0; i < N; i++) {
            int len = snprintf(key, sizeof key, "k%llu", (unsigned long long)i * 7919);
            uint64_t v = i + 1000000 * (uint64_t)round, got = 0;
            bool ins;
            uint64_t h = i % 17 == 0 ? 42 : sc_hash_bytes(key, (size_t)len); /* some collisions */
            CHECK_RC(sc_kmap_upsert(&m, h, key, (uint32_t)len, &v, &ins));
            CHECK(ins == (round == 0 || i % 2 == 0));
            CHECK(sc_kmap_find(&m, h, key, (uint32_t)len, &got) && got == v);
        }
        CHECK(m.n == N);
        for (uint64_t i = 0; i < N; i += 2) { /* remove the even ones */
            int len = snprintf(key, sizeof key, "k%llu", (unsigned long long)i * 7919);
            uint64_t h = i % 17 == 0 ? 42 : sc_hash_bytes(key, (size_t)len);
            uint64_t v = i + 1000000 * (uint64_t)round;
            if (round == 0) v = i;
            CHECK_RC(sc_kmap_remove(&m, h, v));
            CHECK(sc_kmap_remove(&m, h, v) == SC_EINTERNAL);
        }
        CHECK(m.n == N / 2);
        for (uint64_t i = 0; i < N; i++) {
            int len = snprintf(key, sizeof key, "k%llu", (unsigned long long)i * 7919);
            uint64_t h = i % 17 == 0 ? 42 : sc_hash_bytes(key, (size_t)len), got;
            CHECK(sc_kmap_find(&m, h, key, (uint32_t)len, &got) == (i % 2 == 1));
            if (i % 2) CHECK(got == i);
        }
    }
    CHECK(m.garbage < m.alen || m.alen == 0);
    /* empty keys are keys too */
    uint64_t v = 5, got;
    bool ins;
    CHECK_RC(sc_kmap_upsert(&m, sc_hash_bytes("", 0), "", 0, &v, &ins));
    CHECK(ins && sc_kmap_find(&m, sc_hash_bytes("", 0), "", 0, &got) && got == 5);
    sc_kmap_free(&m);
}

static void test_key_encoding(void) {
    sc_schema s;
    mk_schema(&s, "fsbi");
    sc_batch *b = mk_batch(&s, "nan,a,T,1;-nan,a,T,1;-0.0,'',F,_;0.0,'',F,_;_,_,_,_;inf,ab,T,2;_,_,_,_");
    sc_buf k[7] = { { 0 } };
    int32_t cols[] = { 2, 3, 4, 5 };
    for (int r = 0; r < 7; r++) CHECK_RC(sc_key_encode(&k[r], b, r, cols, 4, NULL));
#define SAME(a, c) (k[a].len == k[c].len && !memcmp(k[a].p, k[c].p, k[a].len))
    CHECK(SAME(0, 1) && SAME(2, 3) && SAME(4, 6));
    CHECK(!SAME(0, 2) && !SAME(2, 4) && !SAME(0, 5));
    /* row store round trip, nulls and strings included */
    sc_sbuf blob = { 0 };
    sc_batch *o;
    CHECK_RC(sc_batch_new(&o, &s, 2));
    for (int r = 0; r < 7; r++) {
        int32_t all[] = { 0, 1, 2, 3, 4, 5 };
        CHECK_RC(sc_row_encode(&blob, b, r, all, 6));
        sc_batch_reset(o);
        for (int c = 0; c < 6; c++) CHECK_RC(sc_row_put(o, c, 0, sc_sbuf_cdata(&blob), 6, c));
        o->nrows = 1;
        text x = { 0 }, y = { 0 };
        fmt_row(&x, o, 0);
        fmt_row(&y, b, r);
        expect_text("row store", x.s, y.s);
        free(x.s);
        free(y.s);
    }
    sc_sbuf_free(&blob);
    for (int r = 0; r < 7; r++) sc_buf_free(&k[r]);
    sc_batch_release(o);
    sc_batch_release(b);
    sc_schema_free(&s);
}

/* ================================================================== aggregate */

static void test_aggregate_keyed(void) {
    sc_schema in, out;
    mk_schema(&in, "sifs"); /* k x f s */
    mk_schema(&out, "siiiffffssisi");
    const sc_agg_spec aggs[] = {
        { SC_AGG_COUNT, -1, SC_LT_INT }, { SC_AGG_COUNT, 3, SC_LT_INT },  { SC_AGG_SUM, 3, SC_LT_INT },
        { SC_AGG_SUM, 4, SC_LT_FLOAT },  { SC_AGG_MEAN, 3, SC_LT_FLOAT }, { SC_AGG_MIN, 4, SC_LT_FLOAT },
        { SC_AGG_MAX, 4, SC_LT_FLOAT },  { SC_AGG_MIN, 5, SC_LT_STR },    { SC_AGG_MAX, 5, SC_LT_STR },
        { SC_AGG_FIRST, 3, SC_LT_INT },  { SC_AGG_LAST, 5, SC_LT_STR },   { SC_AGG_COUNT_DISTINCT, 4, SC_LT_INT },
    };
    sc_out_col outs[13] = { { SC_OUT_INPUT, 2 } };
    for (int j = 0; j < 12; j++) outs[1 + j] = (sc_out_col){ SC_OUT_AGG, j };
    const int32_t keys[] = { 2 };
    sc_keyed_spec spec = { keys, 1, aggs, 12, outs };
    sc_op_base base;
    mk_base(&base, &in, &out, 2); /* small capacity: outputs still one batch of in->nrows */
    void *st;
    CHECK_RC(sc_op_aggregate_create(&st, &base, &spec));
    sc_op_base_free(&base);
    EXPECT(sc_op_aggregate_run, st,
           mk_batch(&in, "a,1,1.5,pear;b,_,nan,apple;a,3,_,_;a,_,-0.0,zebra-long-string-over-16-bytes"),
           "1:0|a,1,1,1,1.5,1,1.5,1.5,pear,pear,1,pear,1\n"
           "2:1|b,1,0,0,nan,_,nan,nan,apple,apple,_,apple,1\n"
           "3:2|a,2,2,4,1.5,2,1.5,1.5,pear,pear,1,_,2\n"
           "4:3|a,3,2,4,1.5,2,-0,1.5,pear,zebra-long-string-over-16-bytes,1,zebra-long-string-over-16-bytes,3\n");
    EXPECT(sc_op_aggregate_run, st, mk_batch(&in, "b,5,2.0,'';a,7,nan,b;_,2,0.0,x;_,_,_,_"),
           "5:0|b,2,1,5,nan,5,2,nan,,apple,_,,2\n"
           "6:1|a,4,3,11,nan,3.6666666666666665,-0,nan,b,zebra-long-string-over-16-bytes,1,b,4\n"
           "7:2|_,1,1,2,0,2,0,0,x,x,2,x,1\n"
           "8:3|_,2,1,2,0,2,0,0,x,x,2,_,2\n");
    CHECK(sc_i64_load_relaxed(&((sc_op_base *)st)->state_size) == 3);
    EXPECT(sc_op_aggregate_run, st, mk_eos(&in), "");
    CHECK(C(&cnt.rows_in) == 8 && C(&cnt.rows_out) == 8 && C(&cnt.filtered) == 0);
    sc_op_aggregate_destroy(st);
    sc_schema_free(&in);
    sc_schema_free(&out);
}

static void test_aggregate_global_wrap(void) {
    sc_schema in, out;
    mk_schema(&in, "ibn"); /* x b, and an all-null column */
    mk_schema(&out, "ififiiinn");
    const sc_agg_spec aggs[] = {
        { SC_AGG_SUM, 2, SC_LT_INT },  { SC_AGG_MEAN, 2, SC_LT_FLOAT }, { SC_AGG_SUM, 3, SC_LT_INT },
        { SC_AGG_MEAN, 3, SC_LT_FLOAT }, { SC_AGG_COUNT, -1, SC_LT_INT }, { SC_AGG_SUM, 4, SC_LT_INT },
        { SC_AGG_COUNT_DISTINCT, 4, SC_LT_INT }, { SC_AGG_MIN, 4, SC_LT_NULL }, { SC_AGG_FIRST, 4, SC_LT_NULL },
    };
    sc_out_col outs[9];
    for (int j = 0; j < 9; j++) outs[j] = (sc_out_col){ SC_OUT_AGG, j };
    sc_keyed_spec spec = { NULL, 0, aggs, 9, outs };
    sc_op_base base;
    mk_base(&base, &in, &out, 64);
    void *st;
    CHECK_RC(sc_op_aggregate_create(&st, &base, &spec));
    sc_op_base_free(&base);
    EXPECT(sc_op_aggregate_run, st, mk_batch(&in, "9223372036854775807,T,_;1,F,_;_,_,_;-5,T,_"),
           "1:0|9223372036854775807,9.223372036854776e+18,1,1,1,0,1,_,_\n"
           "2:1|-9223372036854775808,-4.611686018427388e+18,1,0.5,2,0,1,_,_\n"
           "3:2|-9223372036854775808,-4.611686018427388e+18,1,0.5,3,0,1,_,_\n"
           "4:3|9223372036854775803,3.0744573456182584e+18,2,0.6666666666666666,4,0,1,_,_\n");
    /* a batch with no rows: nothing (not a keyed sub-batch) */
    sc_batch *empty = mk_batch(&in, ""), *o = (sc_batch *)1;
    CHECK_RC(sc_op_aggregate_run(st, empty, &o));
    CHECK(o == NULL);
    /* ... unless it is one: then one (empty) batch with its part / group */
    empty = mk_batch(&in, "");
    empty->group_n = 3;
    empty->part = 2;
    EXPECT(sc_op_aggregate_run, st, empty, "");
    sc_op_aggregate_destroy(st);
    sc_schema_free(&in);
    sc_schema_free(&out);
}

static void test_aggregate_keys(void) {
    sc_schema in, out;
    mk_schema(&in, "fbi");
    mk_schema(&out, "fbii");
    const sc_agg_spec aggs[] = { { SC_AGG_COUNT, -1, SC_LT_INT }, { SC_AGG_SUM, 4, SC_LT_INT } };
    const sc_out_col outs[] = { { SC_OUT_INPUT, 2 }, { SC_OUT_INPUT, 3 }, { SC_OUT_AGG, 0 }, { SC_OUT_AGG, 1 } };
    const int32_t keys[] = { 2, 3 };
    sc_keyed_spec spec = { keys, 2, aggs, 2, outs };
    sc_op_base base;
    mk_base(&base, &in, &out, 64);
    void *st;
    CHECK_RC(sc_op_aggregate_create(&st, &base, &spec));
    sc_op_base_free(&base);
    /* NaN == NaN (any NaN), -0.0 == 0.0 (the output shows the current row's key), null == null */
    EXPECT(sc_op_aggregate_run, st,
           mk_batch(&in, "nan,T,1;nan,T,2;-0.0,F,3;0.0,F,4;_,_,5;_,F,6;_,_,7;nan,F,8;-nan,T,9"),
           "1:0|nan,T,1,1\n2:1|nan,T,2,3\n3:2|-0,F,1,3\n4:3|0,F,2,7\n5:4|_,_,1,5\n6:5|_,F,1,6\n"
           "7:6|_,_,2,12\n8:7|nan,F,1,8\n9:8|nan,T,3,12\n");
    CHECK(sc_i64_load_relaxed(&((sc_op_base *)st)->state_size) == 5);
    sc_op_aggregate_destroy(st);
    sc_schema_free(&in);
    sc_schema_free(&out);
}

static void test_running(void) {
    sc_schema in, out;
    mk_schema(&in, "sib");
    mk_schema(&out, "sibifbi");
    const sc_agg_spec aggs[] = { { SC_AGG_SUM, 3, SC_LT_INT }, { SC_AGG_MEAN, 4, SC_LT_FLOAT },
                                 { SC_AGG_LAST, 4, SC_LT_BOOL }, { SC_AGG_SUM, 4, SC_LT_INT } };
    const sc_out_col outs[] = { { SC_OUT_INPUT, 2 }, { SC_OUT_INPUT, 3 }, { SC_OUT_INPUT, 4 }, { SC_OUT_AGG, 0 },
                                { SC_OUT_AGG, 1 },   { SC_OUT_AGG, 2 },   { SC_OUT_AGG, 3 } };
    const int32_t keys[] = { 2 };
    sc_keyed_spec spec = { keys, 1, aggs, 4, outs };
    sc_op_base base;
    mk_base(&base, &in, &out, 64);
    void *st;
    CHECK_RC(sc_op_aggregate_create(&st, &base, &spec));
    sc_op_base_free(&base);
    sc_batch *b = mk_batch(&in, "x,1,T;y,2,F;x,_,_;x,4,F");
    b->group_n = 2; /* keyed sub-batch: same rows, header copied */
    b->part = 1;
    EXPECT(sc_op_aggregate_run, st, b,
           "1:0|x,1,T,1,1,T,1\n2:1|y,2,F,2,0,F,0\n3:2|x,_,_,1,1,_,1\n4:3|x,4,F,5,0.5,F,1\n");
    sc_op_aggregate_destroy(st);
    /* a mistyped output map is refused */
    sc_out_col bad[7];
    memcpy(bad, outs, sizeof bad);
    bad[4] = (sc_out_col){ SC_OUT_AGG, 0 }; /* int sum into a float column */
    spec.outs = bad;
    mk_base(&base, &in, &out, 64);
    CHECK(sc_op_aggregate_create(&st, &base, &spec) == SC_EINVAL);
    sc_op_base_free(&base);
    sc_schema_free(&in);
    sc_schema_free(&out);
}

/* ================================================================== top-k */

static void test_topk(void) {
    sc_schema in, out;
    mk_schema(&in, "sfi"); /* k v id */
    mk_schema(&out, "sfii");
    const sc_out_col outs[] = { { SC_OUT_INPUT, 2 }, { SC_OUT_INPUT, 3 }, { SC_OUT_INPUT, 4 }, { SC_OUT_RANK, 0 } };
    const int32_t keys[] = { 2 };
    sc_op_base base;
    mk_base(&base, &in, &out, 1); /* capacity 1: several outputs chain */
    void *st;
    CHECK_RC(sc_op_topk_create(&st, &base, keys, 1, 3, 2, true, outs));
    sc_op_base_free(&base);
    EXPECT(sc_op_topk_run, st, mk_batch(&in, "a,1.0,0;a,_,1;a,3.0,2;a,1.0,3;a,nan,4;b,2.0,5;a,nan,6"),
           "1:0|a,1,0,1\n"
           "3:2|a,3,2,1\n3:2|a,1,0,2\n"
           "5:4|a,nan,4,1\n5:4|a,3,2,2\n"
           "6:5|b,2,5,1\n"
           "7:6|a,nan,4,1\n7:6|a,nan,6,2\n");
    CHECK(C(&cnt.filtered) == 1 && C(&cnt.rows_in) == 7 && C(&cnt.rows_out) == 8);
    CHECK(sc_i64_load_relaxed(&((sc_op_base *)st)->state_size) == 3);
    EXPECT(sc_op_topk_run, st, mk_eos(&in), "");
    sc_op_topk_destroy(st);
    sc_schema_free(&in);
    sc_schema_free(&out);

    /* global, ascending, string `by`, ties keep arrival order */
    mk_schema(&in, "si");
    mk_schema(&out, "isi");
    const sc_out_col outs2[] = { { SC_OUT_INPUT, 3 }, { SC_OUT_INPUT, 2 }, { SC_OUT_RANK, 0 } };
    mk_base(&base, &in, &out, 1); /* 12 rows out of 6 in: a chain of batches */
    CHECK_RC(sc_op_topk_create(&st, &base, NULL, 0, 2, 3, false, outs2));
    sc_op_base_free(&base);
    EXPECT(sc_op_topk_run, st, mk_batch(&in, "b,0;a,1;b,2;'',3;c,4;a,5"),
           "1:0|0,b,1\n"
           "2:1|1,a,1\n2:1|0,b,2\n"
           "3:2|1,a,1\n3:2|0,b,2\n3:2|2,b,3\n"
           "4:3|3,,1\n4:3|1,a,2\n4:3|0,b,3\n"
           "6:5|3,,1\n6:5|1,a,2\n6:5|5,a,3\n");
    sc_op_topk_destroy(st);
    sc_schema_free(&in);
    sc_schema_free(&out);

    /* ascending floats: NaN is the worst; a keyed sub-batch with no change answers empty */
    mk_schema(&in, "f");
    mk_schema(&out, "fi");
    const sc_out_col outs3[] = { { SC_OUT_INPUT, 2 }, { SC_OUT_RANK, 0 } };
    mk_base(&base, &in, &out, 64);
    CHECK_RC(sc_op_topk_create(&st, &base, NULL, 0, 2, 2, false, outs3));
    sc_op_base_free(&base);
    EXPECT(sc_op_topk_run, st, mk_batch(&in, "nan;1;-0.0"), "1:0|nan,1\n2:1|1,1\n2:1|nan,2\n3:2|-0,1\n3:2|1,2\n");
    sc_batch *b = mk_batch(&in, "nan;5.0;_");
    b->group_n = 4;
    EXPECT(sc_op_topk_run, st, b, "");
    sc_op_topk_destroy(st);
    sc_schema_free(&in);
    sc_schema_free(&out);
}

/* ================================================================== dedup */

static void test_dedup(void) {
    sc_schema in;
    mk_schema(&in, "si");
    const int32_t keys[] = { 2 };
    sc_op_base base;
    mk_base(&base, &in, &in, 64);
    void *st;
    CHECK_RC(sc_op_dedup_create(&st, &base, keys, 1));
    sc_op_base_free(&base);
    EXPECT(sc_op_dedup_run, st, mk_batch(&in, "a,1;b,2;a,3;_,4;_,5;b,6"), "1:0|a,1\n2:1|b,2\n4:3|_,4\n");
    /* all new: the input itself goes on */
    sc_batch *b = mk_batch(&in, "c,7;d,8"), *o;
    CHECK_RC(sc_op_dedup_run(st, b, &o));
    CHECK(o == b && o->nrows == 2);
    sc_batch_release(o);
    /* all seen: nothing */
    CHECK_RC(sc_op_dedup_run(st, mk_batch(&in, "c,9"), &o));
    CHECK(o == NULL);
    CHECK(C(&cnt.filtered) == 4 && C(&cnt.rows_in) == 9 && C(&cnt.rows_out) == 5);
    CHECK(sc_i64_load_relaxed(&((sc_op_base *)st)->state_size) == 5);
    EXPECT(sc_op_dedup_run, st, mk_eos(&in), "");
    sc_op_dedup_destroy(st);
    sc_schema_free(&in);

    /* no keys: every user column */
    mk_schema(&in, "sf");
    mk_base(&base, &in, &in, 64);
    CHECK_RC(sc_op_dedup_create(&st, &base, NULL, 0));
    sc_op_base_free(&base);
    EXPECT(sc_op_dedup_run, st, mk_batch(&in, "a,nan;a,-nan;a,-0.0;a,0.0;a,_;a,_;b,_"),
           "1:0|a,nan\n3:2|a,-0\n5:4|a,_\n7:6|b,_\n");
    sc_op_dedup_destroy(st);
    sc_schema_free(&in);
}

/* ================================================================== windows */

static void *mk_window(const sc_schema *in, const sc_schema *out, int kind, int32_t tcol, int64_t size, int64_t every,
                       int64_t lateness, const int32_t *keys, int32_t nkeys, const sc_agg_spec *aggs, int32_t naggs,
                       const sc_out_col *outs) {
    sc_window_spec ws = { { keys, nkeys, aggs, naggs, outs }, kind, tcol, size, every, lateness };
    sc_op_base base;
    mk_base(&base, in, out, 64);
    void *st;
    CHECK_RC(sc_op_window_create(&st, &base, &ws));
    sc_op_base_free(&base);
    return st;
}

static void test_tumbling(void) {
    sc_schema in, out;
    mk_schema(&in, "sii"); /* k t v */
    mk_schema(&out, "siiii");
    const sc_agg_spec aggs[] = { { SC_AGG_COUNT, -1, SC_LT_INT }, { SC_AGG_SUM, 4, SC_LT_INT } };
    const sc_out_col outs[] = { { SC_OUT_INPUT, 2 }, { SC_OUT_WSTART, 0 }, { SC_OUT_WEND, 0 },
                                { SC_OUT_AGG, 0 },   { SC_OUT_AGG, 1 } };
    const int32_t keys[] = { 2 };
    void *st = mk_window(&in, &out, SC_WIN_TUMBLING, 3, 10, 0, 0, keys, 1, aggs, 2, outs);
    EXPECT(sc_op_window_run, st, mk_batch(&in, "a,1,1;b,5,2;a,12,3;a,3,4;_,_,5"), "3:2|a,0,10,1,1\n3:2|b,0,10,1,2\n");
    EXPECT(sc_op_window_run, st, mk_batch(&in, "b,15,6;a,-3,7;c,25,8;a,27,9;b,-13,10"),
           "8:2|a,10,20,1,3\n8:2|b,10,20,1,6\n");
    CHECK(sc_i64_load_relaxed(&((sc_op_base *)st)->state_size) == 2);
    EXPECT(sc_op_window_run, st, mk_eos(&in), "E3:0|c,20,30,1,8\nE3:0|a,20,30,1,9\n");
    CHECK(C(&cnt.rows_in) == 10 && C(&cnt.rows_out) == 6 && C(&cnt.dead) == 1 && C(&cnt.late) == 3);
    CHECK(sc_i64_load_relaxed(&((sc_op_base *)st)->state_size) == 0);
    /* the side log: late, dead (with a reason), late, late, in arrival order */
    sc_batch *rows;
    sc_side_meta *meta;
    int64_t n;
    CHECK_RC(sc_side_take(((sc_op_base *)st)->side, &rows, &meta, &n));
    CHECK(n == 4);
    CHECK(meta[0].kind == SC_SIDE_LATE && meta[0].row == 3 && !meta[0].reason);
    CHECK(meta[1].kind == SC_SIDE_DEAD && meta[1].row == 4 && !strcmp(meta[1].reason, "null event time"));
    CHECK(meta[2].kind == SC_SIDE_LATE && meta[2].row == 1 && sc_batch_get_i64(rows, 4, 2) == 7);
    CHECK(meta[3].kind == SC_SIDE_LATE && meta[3].row == 4 && sc_batch_get_i64(rows, SC_COL_SEQ, 3) == 10);
    sc_batch_release(rows);
    sc_side_meta_free(meta, n);
    sc_op_window_destroy(st);

    /* lateness: the watermark trails the max time */
    st = mk_window(&in, &out, SC_WIN_TUMBLING, 3, 10, 0, 5, keys, 1, aggs, 2, outs);
    EXPECT(sc_op_window_run, st, mk_batch(&in, "a,1,1;a,12,2;a,4,3;a,8,4;a,16,5"), "5:4|a,0,10,2,5\n");
    EXPECT(sc_op_window_run, st, mk_eos(&in), "E3:0|a,10,20,2,7\n");
    CHECK(C(&cnt.late) == 1);
    sc_op_window_destroy(st);
    sc_schema_free(&in);
    sc_schema_free(&out);
}

static void test_sliding(void) {
    sc_schema in, out;
    mk_schema(&in, "i");
    mk_schema(&out, "iiiii");
    const sc_agg_spec aggs[] = { { SC_AGG_COUNT, -1, SC_LT_INT }, { SC_AGG_FIRST, 2, SC_LT_INT },
                                 { SC_AGG_LAST, 2, SC_LT_INT } };
    const sc_out_col outs[] = { { SC_OUT_WSTART, 0 }, { SC_OUT_WEND, 0 }, { SC_OUT_AGG, 0 }, { SC_OUT_AGG, 1 },
                                { SC_OUT_AGG, 2 } };
    void *st = mk_window(&in, &out, SC_WIN_SLIDING, 2, 10, 5, 0, NULL, 0, aggs, 3, outs);
    EXPECT(sc_op_window_run, st, mk_batch(&in, "3;7;12;-1;14"), "2:1|-5,5,1,3,3\n3:2|0,10,2,3,7\n");
    EXPECT(sc_op_window_run, st, mk_eos(&in), "E3:0|5,15,3,7,14\nE3:0|10,20,2,12,14\n");
    sc_op_window_destroy(st);
    /* every = 3 does not divide size = 7: first = (t - size) // every * every + every */
    st = mk_window(&in, &out, SC_WIN_SLIDING, 2, 7, 3, 100, NULL, 0, aggs, 3, outs);
    EXPECT(sc_op_window_run, st, mk_batch(&in, "-4;0"), "");
    EXPECT(sc_op_window_run, st, mk_eos(&in),
           "E3:0|-9,-2,1,-4,-4\nE3:0|-6,1,2,-4,0\nE3:0|-3,4,1,0,0\nE3:0|0,7,1,0,0\n");
    sc_op_window_destroy(st);
    sc_schema_free(&in);
    sc_schema_free(&out);
}

static void test_session(void) {
    sc_schema in, out;
    mk_schema(&in, "sif"); /* k t v */
    mk_schema(&out, "siiiffffi");
    const sc_agg_spec aggs[] = { { SC_AGG_COUNT, -1, SC_LT_INT },        { SC_AGG_SUM, 4, SC_LT_FLOAT },
                                 { SC_AGG_FIRST, 4, SC_LT_FLOAT },       { SC_AGG_LAST, 4, SC_LT_FLOAT },
                                 { SC_AGG_MAX, 4, SC_LT_FLOAT },         { SC_AGG_COUNT_DISTINCT, 4, SC_LT_INT } };
    const sc_out_col outs[] = { { SC_OUT_INPUT, 2 }, { SC_OUT_WSTART, 0 }, { SC_OUT_WEND, 0 },
                                { SC_OUT_AGG, 0 },   { SC_OUT_AGG, 1 },
                                { SC_OUT_AGG, 2 },   { SC_OUT_AGG, 3 },    { SC_OUT_AGG, 4 },  { SC_OUT_AGG, 5 } };
    const int32_t keys[] = { 2 };
    void *st = mk_window(&in, &out, SC_WIN_SESSION, 3, 6, 0, 100, keys, 1, aggs, 6, outs);
    /* r4 bridges S1 and S2, r5 S1 and S3; r6 opens S5 before S1, r7 bridges it into S1 (S5's
     * value arrived after S1's last one, so it becomes S1's last) */
    EXPECT(sc_op_window_run, st, mk_batch(&in, "a,10,1.0;a,20,2.0;a,30,3.0;b,12,9.0;a,15,4.0;a,25,2.0;a,3,5.0"), "");
    CHECK(sc_i64_load_relaxed(&((sc_op_base *)st)->state_size) == 3);
    EXPECT(sc_op_window_run, st, mk_batch(&in, "a,5,_"), "");
    CHECK(sc_i64_load_relaxed(&((sc_op_base *)st)->state_size) == 2);
    EXPECT(sc_op_window_run, st, mk_eos(&in), "E3:0|b,12,18,1,9,9,9,9,1\nE3:0|a,3,36,7,17,1,_,5,6\n");
    sc_op_window_destroy(st);

    /* closes during the stream; a gap exactly at the boundary opens a new session */
    st = mk_window(&in, &out, SC_WIN_SESSION, 3, 5, 0, 0, keys, 1, aggs, 6, outs);
    EXPECT(sc_op_window_run, st, mk_batch(&in, "a,1,1;a,3,2;a,8,3;b,20,4;a,4,5;b,25,6"),
           "3:2|a,1,8,2,3,1,2,2,2\n4:3|a,8,13,1,3,3,3,3,1\n6:5|b,20,25,1,4,4,4,4,1\n");
    EXPECT(sc_op_window_run, st, mk_eos(&in), "E3:0|b,25,30,1,6,6,6,6,1\n");
    CHECK(C(&cnt.late) == 1);
    sc_op_window_destroy(st);
    sc_schema_free(&in);
    sc_schema_free(&out);
}

static void test_window_date(void) {
    sc_schema in, out;
    mk_schema(&in, "ds"); /* DATE time, str key */
    mk_schema(&out, "sttis");
    const sc_agg_spec aggs[] = { { SC_AGG_COUNT, -1, SC_LT_INT }, { SC_AGG_MIN, 3, SC_LT_STR } };
    const sc_out_col outs[] = { { SC_OUT_INPUT, 3 }, { SC_OUT_WSTART, 0 }, { SC_OUT_WEND, 0 },
                                { SC_OUT_AGG, 0 },   { SC_OUT_AGG, 1 } };
    const int32_t keys[] = { 3 };
    void *st = mk_window(&in, &out, SC_WIN_TUMBLING, 2, 2 * SC_US_PER_DAY, 0, 0, keys, 1, aggs, 2, outs);
    EXPECT(sc_op_window_run, st, mk_batch(&in, "0,x;1,x;2,x;-1,x"), "3:2|x,0,172800000000,2,x\n");
    EXPECT(sc_op_window_run, st, mk_eos(&in), "E3:0|x,172800000000,345600000000,1,x\n");
    sc_op_window_destroy(st);
    /* an int time column far from zero: exact floor division below INT64_MIN; an end past
     * INT64_MAX saturates (the reference could not store it either) */
    sc_schema_free(&in);
    sc_schema_free(&out);
    mk_schema(&in, "i");
    mk_schema(&out, "iii");
    const sc_out_col outs2[] = { { SC_OUT_WSTART, 0 }, { SC_OUT_WEND, 0 }, { SC_OUT_AGG, 0 } };
    st = mk_window(&in, &out, SC_WIN_TUMBLING, 2, 1000, 0, 0, NULL, 0, aggs, 1, outs2);
    EXPECT(sc_op_window_run, st, mk_batch(&in, "-9223372036854775000;9223372036854775000"),
           "2:1|-9223372036854775000,-9223372036854774000,1\n");
    EXPECT(sc_op_window_run, st, mk_eos(&in), "E3:0|9223372036854775000,9223372036854775807,1\n");
    sc_op_window_destroy(st);
    sc_schema_free(&in);
    sc_schema_free(&out);
}

/* ================================================================== randomized */

/* A random value of a small domain, as text. */
static const char *rand_str(void) {
    static const char *v[] = { "_", "''", "a", "b", "ab", "ba", "a-string-longer-than-sixteen", "zz" };
    return v[rndn(8)];
}
static const char *rand_flt(bool negzero) {
    static const char *v[] = { "_", "nan", "-0.0", "0.0", "1.5", "-2.25", "3", "0.5" };
    int i = rndn(8);
    return !negzero && i == 2 ? "2.75" : v[i];
}

/* Random rows "ki,kf,x,f,s": two keys (int, float), an int, a float, a string. With tmax,
 * x is a time in [-tmax/4, 3tmax/4) and f has no -0.0 (session merges combine partial minima
 * in merge order, where -0.0 and 0.0 would tie differently than in arrival order). */
static void rand_rows(text *t, int n, int tmax) {
    for (int r = 0; r < n; r++) {
        if (r) tprintf(t, ";");
        int ki = rndn(5);
        if (ki == 4) tprintf(t, "_,");
        else tprintf(t, "%d,", ki);
        tprintf(t, "%s,", rndn(3) ? (rndn(2) ? "nan" : "-0.0") : rand_flt(true));
        if (rndn(6) == 0) tprintf(t, "_,");
        else tprintf(t, "%d,", tmax ? rndn(tmax) - tmax / 4 : rndn(21) - 10);
        tprintf(t, "%s,%s", rand_flt(tmax == 0), rand_str());
    }
}

/* The model's view of a row (the parsed input). */
typedef struct {
    bool ki_null, kf_null, x_null, f_null, s_null;
    int64_t ki, x;
    double kf, f;
    char s[40];
    int64_t seq, pos;
} mrow;

static void parse_rows(const sc_batch *b, mrow *m) {
    for (int64_t r = 0; r < b->nrows; r++, m++) {
        memset(m, 0, sizeof *m);
        m->seq = sc_batch_get_i64(b, 0, r);
        m->pos = sc_batch_get_i64(b, 1, r);
        m->ki_null = !sc_batch_is_valid(b, 2, r);
        m->kf_null = !sc_batch_is_valid(b, 3, r);
        m->x_null = !sc_batch_is_valid(b, 4, r);
        m->f_null = !sc_batch_is_valid(b, 5, r);
        m->s_null = !sc_batch_is_valid(b, 6, r);
        m->ki = sc_batch_get_i64(b, 2, r);
        m->kf = sc_batch_get_f64(b, 3, r);
        m->x = sc_batch_get_i64(b, 4, r);
        m->f = sc_batch_get_f64(b, 5, r);
        if (!m->s_null) {
            int32_t len;
            const char *s = sc_batch_get_utf8(b, 6, r, &len);
            memcpy(m->s, s, (size_t)len);
        }
    }
}

static bool f_eq(double a, double b) { return (isnan(a) && isnan(b)) || a == b; }
static bool same_key(const mrow *a, const mrow *b) {
    return a->ki_null == b->ki_null && (a->ki_null || a->ki == b->ki) && a->kf_null == b->kf_null &&
           (a->kf_null || f_eq(a->kf, b->kf));
}
static bool f_less(double a, double b) { return isnan(a) ? false : isnan(b) ? true : a < b; }

static void put_f(text *t, bool null, double v) {
    if (null) tprintf(t, "_");
    else fmt_f64(t, v);
}
static void put_i(text *t, bool null, int64_t v) {
    if (null) tprintf(t, "_");
    else tprintf(t, "%lld", (long long)v);
}

/* Aggregates over member rows mem[0..n) (arrival order): count(), count(x), sum(x), mean(x),
 * sum(f), min(f), max(s), first(f), last(s), count_distinct of f, s and x. */
static void model_aggs(text *t, const mrow *const *mem, int n) {
    int64_t cx = 0, sx = 0, nf = 0;
    double sf = 0, mn = 0;
    const char *mx = NULL;
    for (int i = 0; i < n; i++) {
        const mrow *m = mem[i];
        if (!m->x_null) cx++, sx = (int64_t)((uint64_t)sx + (uint64_t)m->x);
        if (!m->f_null) {
            sf = nf ? sf + m->f : m->f;
            if (!nf || f_less(m->f, mn)) mn = m->f;
            nf++;
        }
        if (!m->s_null && (!mx || strcmp(mx, m->s) < 0)) mx = m->s;
    }
    int df = 0, ds = 0, dx = 0;
    for (int i = 0; i < n; i++) {
        bool newf = true, news = true, newx = true;
        for (int j = 0; j < i; j++) {
            if (mem[j]->f_null == mem[i]->f_null && (mem[i]->f_null || f_eq(mem[j]->f, mem[i]->f))) newf = false;
            if (mem[j]->s_null == mem[i]->s_null && (mem[i]->s_null || !strcmp(mem[j]->s, mem[i]->s))) news = false;
            if (mem[j]->x_null == mem[i]->x_null && (mem[i]->x_null || mem[j]->x == mem[i]->x)) newx = false;
        }
        df += newf;
        ds += news;
        dx += newx;
    }
    tprintf(t, "%d,%lld,%lld,", n, (long long)cx, (long long)sx);
    put_f(t, cx == 0, cx ? (double)sx / (double)cx : 0); /* |sx| < 2^53: exact operands */
    tprintf(t, ",");
    fmt_f64(t, nf ? sf : 0.0);
    tprintf(t, ",");
    put_f(t, nf == 0, mn);
    tprintf(t, ",%s,", mx ? mx : "_");
    put_f(t, n == 0 || mem[0]->f_null, n ? mem[0]->f : 0);
    tprintf(t, ",%s,%d,%d,%d\n", n == 0 || mem[n - 1]->s_null ? "_" : mem[n - 1]->s, df, ds, dx);
}

static const sc_agg_spec RAGGS[] = {
    { SC_AGG_COUNT, -1, SC_LT_INT },        { SC_AGG_COUNT, 4, SC_LT_INT },          { SC_AGG_SUM, 4, SC_LT_INT },
    { SC_AGG_MEAN, 4, SC_LT_FLOAT },        { SC_AGG_SUM, 5, SC_LT_FLOAT },          { SC_AGG_MIN, 5, SC_LT_FLOAT },
    { SC_AGG_MAX, 6, SC_LT_STR },           { SC_AGG_FIRST, 5, SC_LT_FLOAT },        { SC_AGG_LAST, 6, SC_LT_STR },
    { SC_AGG_COUNT_DISTINCT, 5, SC_LT_INT }, { SC_AGG_COUNT_DISTINCT, 6, SC_LT_INT },
    { SC_AGG_COUNT_DISTINCT, 4, SC_LT_INT },
};
#define NRAGGS 12
#define RAGG_TYPES "iiifffsfsiii"

/* The next 1-9 rows (at most `left`) of a ';'-separated row text, as a string of their own
 * (freed by the caller); *p moves past them and *k gets their number. */
static char *next_chunk(const char **p, int left, int *k) {
    *k = 1 + rndn(9);
    if (*k > left) *k = left;
    const char *q = *p;
    for (int i = 0; i < *k; i++) {
        q += strcspn(q, ";");
        if (i + 1 < *k) q++;
    }
    char *chunk = strndup(*p, (size_t)(q - *p));
    CHECK(chunk);
    *p = *q ? q + 1 : q;
    return chunk;
}

/* Split n rows (text) into random batches; feed each (a quarter as keyed sub-batches);
 * collect the output; fill the model rows from the batches. */
static void feed_random(text *got, run_fn f, void *st, const sc_schema *in, const char *rows, int n, mrow *model) {
    const char *p = rows;
    for (int done = 0; done < n;) {
        int k;
        char *chunk = next_chunk(&p, n - done, &k);
        sc_batch *b = mk_batch(in, chunk);
        CHECK(b->nrows == k);
        parse_rows(b, model + done);
        if (rndn(4) == 0) {
            b->group_n = 2;
            b->part = 1;
        }
        run_into(got, f, st, b);
        free(chunk);
        done += k;
    }
}

static void test_random_aggregate(void) {
    sc_schema in, out;
    mk_schema(&in, "ifif" "s"); /* ki kf x f s */
    mk_schema(&out, "if" RAGG_TYPES);
    sc_out_col outs[2 + NRAGGS] = { { SC_OUT_INPUT, 2 }, { SC_OUT_INPUT, 3 } };
    for (int j = 0; j < NRAGGS; j++) outs[2 + j] = (sc_out_col){ SC_OUT_AGG, j };
    const int32_t keys[] = { 2, 3 };
    for (int round = 0; round < 40; round++) {
        int n = 1 + rndn(120);
        text rows = { 0 }, got = { 0 }, want = { 0 };
        tprintf(&got, "%s", "");
        tprintf(&want, "%s", "");
        rand_rows(&rows, n, 0);
        sc_keyed_spec spec = { keys, round % 5 == 0 ? 0 : 2, RAGGS, NRAGGS, outs };
        sc_op_base base;
        mk_base(&base, &in, &out, 1 + rndn(8));
        void *st;
        CHECK_RC(sc_op_aggregate_create(&st, &base, &spec));
        sc_op_base_free(&base);
        mrow *m = calloc((size_t)n, sizeof *m);
        const mrow **mem = calloc((size_t)n, sizeof *mem);
        feed_random(&got, sc_op_aggregate_run, st, &in, rows.s, n, m);
        for (int r = 0; r < n; r++) {
            int k = 0;
            for (int j = 0; j <= r; j++)
                if (spec.nkeys == 0 || same_key(&m[j], &m[r])) mem[k++] = &m[j];
            tprintf(&want, "%lld:%lld|", (long long)m[r].seq, (long long)m[r].pos);
            put_i(&want, m[r].ki_null, m[r].ki);
            tprintf(&want, ",");
            put_f(&want, m[r].kf_null, m[r].kf);
            tprintf(&want, ",");
            model_aggs(&want, mem, k);
        }
        expect_text("random aggregate", got.s, want.s);
        run_into(&got, sc_op_aggregate_run, st, mk_eos(&in));
        sc_op_aggregate_destroy(st);
        free(m);
        free(mem);
        free(rows.s);
        free(got.s);
        free(want.s);
    }
    sc_schema_free(&in);
    sc_schema_free(&out);
}

/* A publishing aggregate over one int key column with aggregates that have dense records
 * (aggstate.h: the int map, null keys, dense records) against the per-row changelog of the
 * plain aggregate on the same rows: every publish holds the keys changed since the last one,
 * in the order they first changed, each with its latest changelog row and its first serial;
 * a complete publisher's end-of-stream publish holds every key, by first serial, marked pos 1. */
static const sc_agg_spec DAGGS[] = {
    { SC_AGG_COUNT, -1, SC_LT_INT },  { SC_AGG_COUNT, 4, SC_LT_INT },  { SC_AGG_SUM, 4, SC_LT_INT },
    { SC_AGG_MEAN, 4, SC_LT_FLOAT },  { SC_AGG_SUM, 5, SC_LT_FLOAT },  { SC_AGG_MEAN, 5, SC_LT_FLOAT },
    { SC_AGG_MIN, 5, SC_LT_FLOAT },   { SC_AGG_MAX, 5, SC_LT_FLOAT },  { SC_AGG_MIN, 4, SC_LT_INT },
    { SC_AGG_MAX, 4, SC_LT_INT },     { SC_AGG_COUNT, 6, SC_LT_INT },
};
#define NDAGGS 11

static void test_random_publish_dense(void) {
    sc_schema in, out;
    mk_schema(&in, "ifif" "s"); /* ki kf x f s */
    mk_schema(&out, "i" "iiifffffiii");
    sc_out_col outs[1 + NDAGGS] = { { SC_OUT_INPUT, 2 } };
    for (int j = 0; j < NDAGGS; j++) outs[1 + j] = (sc_out_col){ SC_OUT_AGG, j };
    const int32_t keys[] = { 2 };
    for (int round = 0; round < 60; round++) {
        int n = 1 + rndn(150);
        text rows = { 0 }, got = { 0 }, want = { 0 };
        tprintf(&got, "%s", "");
        tprintf(&want, "%s", "");
        rand_rows(&rows, n, 0);
        sc_keyed_spec plain = { keys, 1, DAGGS, NDAGGS, outs, 0 }, pub = plain;
        bool complete = round % 2;
        pub.publish = complete ? SC_PUBLISH_COMPLETE : 1;
        void *cl, *pb;
        sc_op_base base;
        mk_base(&base, &in, &out, 1 + rndn(8));
        CHECK_RC(sc_op_aggregate_create(&cl, &base, &plain));
        CHECK_RC(sc_op_aggregate_create(&pb, &base, &pub));
        sc_op_base_free(&base);
        /* per key (ki 0..3, null as 4): first serial, latest changelog cells, changed flag */
        char last[5][256];
        int64_t first[5];
        int order[5], nchanged = 0;
        bool changed[5] = { false };
        for (int k = 0; k < 5; k++) first[k] = -1;
        const char *p = rows.s;
        for (int done = 0; done < n;) {
            int k;
            char *chunk = next_chunk(&p, n - done, &k);
            uint64_t seq0 = next_seq;
            char *cells = run_text(sc_op_aggregate_run, cl, mk_batch(&in, chunk));
            next_seq = seq0;
            sc_batch *b = mk_batch(&in, chunk);
            b->group_n = 1;
            b->publish = rndn(3) == 0 || (!complete && done + k == n);
            bool publish = b->publish;
            for (char *line = cells; *line;) { /* "seq:pos|ki,..." */
                char *bar = strchr(line, '|'), *nl = strchr(line, '\n');
                CHECK(bar && nl);
                int key = bar[1] == '_' ? 4 : bar[1] - '0';
                CHECK(key >= 0 && key <= 4);
                if (first[key] < 0) first[key] = strtoll(line, NULL, 10);
                CHECK(nl - bar < 256);
                memcpy(last[key], bar + 1, (size_t)(nl - bar));
                last[key][nl - bar] = 0;
                if (!changed[key]) changed[key] = true, order[nchanged++] = key;
                line = nl + 1;
            }
            free(cells);
            run_into(&got, sc_op_aggregate_run, pb, b);
            if (publish) {
                for (int i = 0; i < nchanged; i++) {
                    tprintf(&want, "%lld:0|%s", (long long)first[order[i]], last[order[i]]);
                    changed[order[i]] = false;
                }
                nchanged = 0;
            }
            free(chunk);
            done += k;
        }
        if (complete) /* every key, by first serial */
            for (int64_t prev = 0;;) {
                int best = -1;
                for (int key = 0; key < 5; key++)
                    if (first[key] > prev && (best < 0 || first[key] < first[best])) best = key;
                if (best < 0) break;
                tprintf(&want, "%lld:1|%s", (long long)first[best], last[best]);
                prev = first[best];
            }
        run_into(&got, sc_op_aggregate_run, pb, mk_eos(&in)); /* a plain one: nothing changed since */
        expect_text("random publish (dense)", got.s, want.s);
        CHECK(C(&cnt.rows_in) == 2 * (uint64_t)n && C(&cnt.rows_out) == 2 * (uint64_t)n);
        sc_op_aggregate_destroy(cl);
        sc_op_aggregate_destroy(pb);
        free(rows.s);
        free(got.s);
        free(want.s);
    }
    sc_schema_free(&in);
    sc_schema_free(&out);
}

static void test_random_topk_dedup(void) {
    sc_schema in, out;
    mk_schema(&in, "ififs");
    mk_schema(&out, "ififsi");
    const sc_out_col outs[] = { { SC_OUT_INPUT, 2 }, { SC_OUT_INPUT, 3 }, { SC_OUT_INPUT, 4 },
                                { SC_OUT_INPUT, 5 }, { SC_OUT_INPUT, 6 }, { SC_OUT_RANK, 0 } };
    const int32_t keys[] = { 2, 3 };
    for (int round = 0; round < 60; round++) {
        int n = 1 + rndn(100), k = rndn(5), by = 4 + rndn(3); /* x, f or s */
        bool desc = rndn(2);
        text rows = { 0 }, got = { 0 }, want = { 0 };
        tprintf(&got, "%s", "");
        tprintf(&want, "%s", "");
        rand_rows(&rows, n, 0);
        sc_op_base base;
        mk_base(&base, &in, &out, 1 + rndn(8));
        void *st;
        CHECK_RC(sc_op_topk_create(&st, &base, keys, round % 3 ? 2 : 0, by, k, desc, outs));
        sc_op_base_free(&base);
        mrow *m = calloc((size_t)n, sizeof *m);
        int *idx = calloc((size_t)n, sizeof *idx);
        feed_random(&got, sc_op_topk_run, st, &in, rows.s, n, m);
        int64_t filtered = 0;
        for (int r = 0; r < n; r++) {
            bool null = by == 4 ? m[r].x_null : by == 5 ? m[r].f_null : m[r].s_null;
            if (null) {
                filtered++;
                continue;
            }
            /* stable insertion sort of the key's non-null rows so far by `better` */
            int c = 0;
            for (int j = 0; j <= r; j++) {
                bool nj = by == 4 ? m[j].x_null : by == 5 ? m[j].f_null : m[j].s_null;
                if (nj || (round % 3 && !same_key(&m[j], &m[r]))) continue;
                int i = c;
                for (int q = 0; q < c; q++) {
                    const mrow *a = &m[j], *b = &m[idx[q]];
                    bool lt_ab = by == 4 ? a->x < b->x : by == 5 ? f_less(a->f, b->f) : strcmp(a->s, b->s) < 0;
                    bool lt_ba = by == 4 ? b->x < a->x : by == 5 ? f_less(b->f, a->f) : strcmp(b->s, a->s) < 0;
                    if (desc ? lt_ba : lt_ab) {
                        i = q;
                        break;
                    }
                }
                memmove(&idx[i + 1], &idx[i], (size_t)(c - i) * sizeof *idx);
                idx[i] = j;
                c++;
            }
            int pos = 0;
            while (idx[pos] != r) pos++;
            if (pos >= k) continue;
            for (int i = 0; i < c && i < k; i++) {
                const mrow *a = &m[idx[i]];
                tprintf(&want, "%lld:%lld|", (long long)m[r].seq, (long long)m[r].pos);
                put_i(&want, a->ki_null, a->ki);
                tprintf(&want, ",");
                put_f(&want, a->kf_null, a->kf);
                tprintf(&want, ",");
                put_i(&want, a->x_null, a->x);
                tprintf(&want, ",");
                put_f(&want, a->f_null, a->f);
                tprintf(&want, ",%s,%d\n", a->s_null ? "_" : a->s, i + 1);
            }
        }
        expect_text("random top-k", got.s, want.s);
        CHECK(C(&cnt.filtered) == (uint64_t)filtered);
        sc_op_topk_destroy(st);

        /* dedup on (ki, kf) over the same rows */
        free(got.s);
        free(want.s);
        got = (text){ 0 };
        want = (text){ 0 };
        tprintf(&got, "%s", "");
        tprintf(&want, "%s", "");
        mk_base(&base, &in, &in, 1 + rndn(8));
        CHECK_RC(sc_op_dedup_create(&st, &base, keys, 2));
        sc_op_base_free(&base);
        feed_random(&got, sc_op_dedup_run, st, &in, rows.s, n, m);
        for (int r = 0; r < n; r++) {
            bool seen = false;
            for (int j = 0; j < r && !seen; j++) seen = same_key(&m[j], &m[r]);
            if (seen) continue;
            tprintf(&want, "%lld:%lld|", (long long)m[r].seq, (long long)m[r].pos);
            put_i(&want, m[r].ki_null, m[r].ki);
            tprintf(&want, ",");
            put_f(&want, m[r].kf_null, m[r].kf);
            tprintf(&want, ",");
            put_i(&want, m[r].x_null, m[r].x);
            tprintf(&want, ",");
            put_f(&want, m[r].f_null, m[r].f);
            tprintf(&want, ",%s\n", m[r].s_null ? "_" : m[r].s);
        }
        expect_text("random dedup", got.s, want.s);
        sc_op_dedup_destroy(st);
        free(m);
        free(idx);
        free(rows.s);
        free(got.s);
        free(want.s);
    }
    sc_schema_free(&in);
    sc_schema_free(&out);
}

/* Window model: windows as plain records found by linear scans, each with its member rows;
 * aggregates recomputed from the members (arrival order) when a window closes. */
typedef struct {
    int opener; /* row index */
    int64_t start, last, end;
    int seq;
    bool alive;
    int *mem, nmem;
} mwin;

typedef struct {
    const mrow *m;
    int n, kind, nkeys;
    int64_t size, every, late;
    mwin *w;
    int nw, cap, nseq;
    bool has_max;
    int64_t max_t;
    int dead, nlate;
} wmodel;

static bool wm_key(const wmodel *md, const mwin *w, const mrow *x) {
    const mrow *o = &md->m[w->opener];
    if (md->nkeys == 1) return o->ki_null == x->ki_null && (o->ki_null || o->ki == x->ki); /* ki alone */
    return md->nkeys == 0 || same_key(o, x);
}

static mwin *wm_new(wmodel *md, int r, int64_t start, int64_t end) {
    if (md->nw == md->cap) {
        md->cap = md->cap ? md->cap * 2 : 64;
        md->w = realloc(md->w, (size_t)md->cap * sizeof *md->w);
        CHECK(md->w);
    }
    mwin *w = &md->w[md->nw++];
    *w = (mwin){ r, start, start, end, ++md->nseq, true, calloc((size_t)md->n, sizeof(int)), 0 };
    return w;
}

/* Admit row r into the model's windows (the reference's WindowOp.push before closing). */
static void wm_row(wmodel *md, int r) {
    const mrow *x = &md->m[r];
    int64_t t = x->x, size = md->size;
    if (md->kind != SC_WIN_SESSION) {
        int64_t d = t - size, q = d / md->every;
        if (d % md->every && d < 0) q--;
        for (int64_t s = q * md->every + md->every; s <= t; s += md->every) {
            if (!(t < s + size)) continue;
            int i = 0;
            while (i < md->nw && !(md->w[i].alive && md->w[i].start == s && wm_key(md, &md->w[i], x))) i++;
            mwin *w = i < md->nw ? &md->w[i] : wm_new(md, r, s, s + size);
            w->mem[w->nmem++] = r;
        }
        return;
    }
    int keep = -1; /* the hit created first: windows are numbered in creation order */
    for (int i = 0; i < md->nw; i++) {
        mwin *o = &md->w[i];
        if (!o->alive || !wm_key(md, o, x) || !(o->start - size < t && t < o->last + size)) continue;
        if (keep < 0) {
            keep = i;
            continue;
        }
        mwin *k = &md->w[keep];
        for (int j = 0; j < o->nmem; j++) k->mem[k->nmem++] = o->mem[j];
        if (o->start < k->start) k->start = o->start;
        if (o->last > k->last) k->last = o->last;
        o->alive = false;
    }
    mwin *k = keep < 0 ? wm_new(md, r, t, t + size) : &md->w[keep];
    k->mem[k->nmem++] = r;
    if (t < k->start) k->start = t;
    if (t > k->last) k->last = t;
    k->end = k->last + size;
    for (int a = 1; a < k->nmem; a++) /* members in arrival order */
        for (int b = a; b > 0 && k->mem[b - 1] > k->mem[b]; b--) {
            int tmp = k->mem[b];
            k->mem[b] = k->mem[b - 1];
            k->mem[b - 1] = tmp;
        }
}

/* Emit, in (end, start, seq) order, every window with end <= watermark (all at eos). */
static void wm_close(wmodel *md, text *want, int r, bool eos, const mrow **mem) {
    for (;;) {
        int best = -1;
        for (int i = 0; i < md->nw; i++) {
            const mwin *w = &md->w[i], *b = best < 0 ? NULL : &md->w[best];
            if (!w->alive || (!eos && w->end > md->max_t - md->late)) continue;
            if (!b || w->end < b->end || (w->end == b->end && (w->start < b->start ||
                                                               (w->start == b->start && w->seq < b->seq))))
                best = i;
        }
        if (best < 0) return;
        mwin *b = &md->w[best];
        b->alive = false;
        if (eos) tprintf(want, "E%d:0|", STEP);
        else tprintf(want, "%lld:%lld|", (long long)md->m[r].seq, (long long)md->m[r].pos);
        const mrow *o = &md->m[b->opener]; /* output columns of the opening row */
        put_i(want, o->ki_null, o->ki);
        tprintf(want, ",");
        put_f(want, o->kf_null, o->kf);
        tprintf(want, ",%lld,%lld,", (long long)b->start, (long long)b->end);
        for (int j = 0; j < b->nmem; j++) mem[j] = &md->m[b->mem[j]];
        model_aggs(want, mem, b->nmem);
    }
}

static void test_random_windows(void) {
    sc_schema in, out;
    mk_schema(&in, "ifif" "s"); /* ki kf t(int) f s: the x column is the time */
    mk_schema(&out, "ifii" RAGG_TYPES);
    sc_out_col outs[4 + NRAGGS] = { { SC_OUT_INPUT, 2 }, { SC_OUT_INPUT, 3 }, { SC_OUT_WSTART, 0 },
                                    { SC_OUT_WEND, 0 } };
    for (int j = 0; j < NRAGGS; j++) outs[4 + j] = (sc_out_col){ SC_OUT_AGG, j };
    const int32_t keys[] = { 2, 3 };
    for (int round = 0; round < 150; round++) {
        wmodel md = { 0 };
        md.kind = 1 + round % 3;
        md.n = 1 + rndn(80);
        md.size = 1 + rndn(12);
        md.every = md.kind == SC_WIN_SLIDING ? 1 + rndn((int)md.size) : md.size;
        md.late = rndn(3) ? rndn(8) : 0;
        md.nkeys = round % 4 == 3 ? 0 : round % 4 == 1 ? 1 : 2; /* 0 and 1 (int): the pair map */
        if (md.kind == SC_WIN_SESSION && (round / 3) % 2 == 0) md.late = 50; /* none late: merges */
        if (md.kind == SC_WIN_SESSION && (round / 6) % 2) md.nkeys = 0;       /* more merges */
        text rows = { 0 }, got = { 0 }, want = { 0 };
        tprintf(&got, "%s", "");
        tprintf(&want, "%s", "");
        rand_rows(&rows, md.n, 40);
        void *st = mk_window(&in, &out, md.kind, 4, md.size, md.every, md.late, keys, md.nkeys, RAGGS, NRAGGS, outs);
        mrow *m = calloc((size_t)md.n, sizeof *m);
        md.m = m;
        feed_random(&got, sc_op_window_run, st, &in, rows.s, md.n, m);
        run_into(&got, sc_op_window_run, st, mk_eos(&in));
        const mrow **mem = calloc((size_t)md.n, sizeof *mem);
        for (int r = 0; r < md.n; r++) {
            if (m[r].x_null) {
                md.dead++;
                continue;
            }
            if (md.has_max && m[r].x < md.max_t - md.late) {
                md.nlate++;
                continue;
            }
            wm_row(&md, r);
            if (!md.has_max || m[r].x > md.max_t) md.max_t = m[r].x;
            md.has_max = true;
            wm_close(&md, &want, r, false, mem);
        }
        wm_close(&md, &want, md.n, true, mem);
        expect_text("random windows", got.s, want.s);
        CHECK(C(&cnt.dead) == (uint64_t)md.dead && C(&cnt.late) == (uint64_t)md.nlate);
        CHECK(sc_i64_load_relaxed(&((sc_op_base *)st)->state_size) == 0);
        for (int i = 0; i < md.nw; i++) free(md.w[i].mem);
        free(md.w);
        free(mem);
        free(m);
        sc_op_window_destroy(st);
        free(rows.s);
        free(got.s);
        free(want.s);
    }
    sc_schema_free(&in);
    sc_schema_free(&out);
}

/* Tumbling windows whose aggregates are all dense run the three-pass batch path; a sliding
 * window with every == size is the same windows through the row-at-a-time path. Both must
 * print the same rows for the same input, whatever the batches, keys and lateness. */
static void test_dense_tumbling_equals_sliding(void) {
    sc_schema in, out;
    mk_schema(&in, "ifif" "s"); /* ki kf t(int) f s */
    mk_schema(&out, "ifii" "iiiffffiif");
    static const sc_agg_spec aggs[] = {
        { SC_AGG_COUNT, -1, SC_LT_INT },  { SC_AGG_COUNT, 5, SC_LT_INT },  { SC_AGG_SUM, 4, SC_LT_INT },
        { SC_AGG_MEAN, 4, SC_LT_FLOAT },  { SC_AGG_SUM, 5, SC_LT_FLOAT },  { SC_AGG_MIN, 5, SC_LT_FLOAT },
        { SC_AGG_MAX, 5, SC_LT_FLOAT },   { SC_AGG_MIN, 4, SC_LT_INT },    { SC_AGG_MAX, 4, SC_LT_INT },
        { SC_AGG_MEAN, 5, SC_LT_FLOAT },
    };
    sc_out_col outs[14] = { { SC_OUT_INPUT, 2 }, { SC_OUT_INPUT, 3 }, { SC_OUT_WSTART, 0 }, { SC_OUT_WEND, 0 } };
    for (int j = 0; j < 10; j++) outs[4 + j] = (sc_out_col){ SC_OUT_AGG, j };
    const int32_t keys[] = { 2, 3 };
    for (int round = 0; round < 120; round++) {
        int n = 1 + rndn(300), nkeys = round % 3; /* 0 and 1 (int): the pair map; 2: encoded keys */
        int64_t size = 1 + rndn(12), late = rndn(3) ? rndn(8) : 40;
        text rows = { 0 }, a = { 0 }, b = { 0 };
        tprintf(&a, "%s", "");
        tprintf(&b, "%s", "");
        rand_rows(&rows, n, 40);
        mrow *m = calloc((size_t)n, sizeof *m);
        uint64_t split = rnd_state; /* both ops get the same batches (a row's pos is its place in one) */
        void *t = mk_window(&in, &out, SC_WIN_TUMBLING, 4, size, 0, late, keys, nkeys, aggs, 10, outs);
        feed_random(&a, sc_op_window_run, t, &in, rows.s, n, m);
        run_into(&a, sc_op_window_run, t, mk_eos(&in));
        uint64_t late_t = C(&cnt.late), dead_t = C(&cnt.dead);
        sc_op_window_destroy(t);
        void *sl = mk_window(&in, &out, SC_WIN_SLIDING, 4, size, size, late, keys, nkeys, aggs, 10, outs);
        rnd_state = split;
        feed_random(&b, sc_op_window_run, sl, &in, rows.s, n, m);
        run_into(&b, sc_op_window_run, sl, mk_eos(&in));
        expect_text("dense tumbling vs sliding", a.s, b.s);
        CHECK(C(&cnt.late) == late_t && C(&cnt.dead) == dead_t);
        sc_op_window_destroy(sl);
        free(m);
        free(rows.s);
        free(a.s);
        free(b.s);
    }
    sc_schema_free(&in);
    sc_schema_free(&out);
}

int main(void) {
    test_div();
    test_kmap();
    test_key_encoding();
    test_aggregate_keyed();
    test_aggregate_global_wrap();
    test_aggregate_keys();
    test_running();
    test_topk();
    test_dedup();
    test_tumbling();
    test_sliding();
    test_session();
    test_window_date();
    test_random_aggregate();
    test_random_publish_dense();
    test_random_topk_dedup();
    test_random_windows();
    test_dense_tumbling_equals_sliding();
    printf("test_ops_state: ok\n");
    return 0;
}
