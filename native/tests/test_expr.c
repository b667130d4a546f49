// sources: exec/expr.c exec/expr_vec.c exec/expr_fast.c exec/expr_funcs.c exec/expr_compile.c exec/expr_compat_num.c exec/expr_compat_time.c exec/expr_compat_str.c exec/ops_filter_project.c exec/select.c exec/common.c runtime/batch.c runtime/ring.c exec/lists.c
/* test_expr: the vectorized evaluator (exec/expr.c) and the filter / project operators.
 *
 * Every expected value is hand-computed from the reference semantics
 * (kernel/streamcell/backends/evaluate.py, checked against CPython 3.11 where a float or a
 * parse is involved). Covers every op with nulls, NaN, wraparound, zero divisors, failing
 * casts, datetimes before 1970, non-ASCII strings, the lazy error rules, filter / project
 * end to end (dead rows, counters, forwarding), and one sc_expr shared by 4 threads.
 */
#include "exec/expr.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

#define CHECK(c)                                                                        \
    do {                                                                                \
        if (!(c)) {                                                                     \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c);       \
            failures++;                                                                 \
        }                                                                               \
    } while (0)

/* ------------------------------------------------------------------- test table */

/* Columns: 0 seq, 1 pos, then I i, F f, S s, B b, T t (datetime us), D d (date days), J j. */
enum { I = 2, F, S, B, T, D, J, NCOLS };
static const uint8_t LTS[NCOLS] = { SC_LT_INT, SC_LT_INT, SC_LT_INT, SC_LT_FLOAT, SC_LT_STR,
                                    SC_LT_BOOL, SC_LT_DATETIME, SC_LT_DATE, SC_LT_INT };
static sc_schema SCHEMA;

typedef struct trow {
    int64_t i;
    double f;
    const char *s;
    int b;
    int64_t t, d, j;
    const char *nulls; /* letters of the null columns: "ifsbtdj" */
} trow;

static sc_batch *mk(const trow *rows, int n) {
    sc_batch *b = NULL;
    CHECK(sc_batch_new(&b, &SCHEMA, n > 0 ? n : 1) == SC_OK);
    for (int r = 0; r < n; r++) {
        const trow *w = &rows[r];
        const char *nl = w->nulls ? w->nulls : "";
        sc_batch_set_i64(b, 0, r, r);
        sc_batch_set_i64(b, 1, r, 100 + r);
        sc_batch_set_i64(b, I, r, w->i);
        sc_batch_set_f64(b, F, r, w->f);
        sc_batch_put_utf8(b, S, r, w->s ? w->s : "", w->s ? (int32_t)strlen(w->s) : 0);
        sc_batch_set_bool(b, B, r, w->b);
        sc_batch_set_i64(b, T, r, w->t);
        sc_batch_set_i64(b, D, r, w->d);
        sc_batch_set_i64(b, J, r, w->j);
        static const char letters[] = "ifsbtdj";
        for (int k = 0; k < 7; k++)
            if (strchr(nl, letters[k])) sc_batch_set_null(b, I + k, r);
    }
    b->nrows = n;
    return b;
}

/* ---------------------------------------------------------------- expression builder */

typedef struct eb {
    sc_enode n[64];
    int k;
} eb;

static int add(eb *e, sc_enode nd) {
    e->n[e->k] = nd;
    return e->k++;
}
static sc_enode node(int op, int lt, int a, int b, int c) {
    sc_enode nd;
    memset(&nd, 0, sizeof nd);
    nd.op = op;
    nd.lt = (uint8_t)lt;
    nd.a = a;
    nd.b = b;
    nd.c = c;
    return nd;
}
static int col(eb *e, int c) { return add(e, node(SC_E_COL, LTS[c], c, -1, -1)); }
static int lit_i(eb *e, int64_t v) {
    sc_enode nd = node(SC_E_LIT, SC_LT_INT, -1, -1, -1);
    nd.i = v;
    return add(e, nd);
}
static int lit_t(eb *e, int lt, int64_t v) {
    sc_enode nd = node(SC_E_LIT, lt, -1, -1, -1);
    nd.i = v;
    return add(e, nd);
}
static int lit_f(eb *e, double v) {
    sc_enode nd = node(SC_E_LIT, SC_LT_FLOAT, -1, -1, -1);
    nd.f = v;
    return add(e, nd);
}
static int lit_s(eb *e, const char *s) {
    sc_enode nd = node(SC_E_LIT, SC_LT_STR, -1, -1, -1);
    nd.s = s;
    nd.slen = (int32_t)strlen(s);
    return add(e, nd);
}
static int lit_null(eb *e) {
    sc_enode nd = node(SC_E_LIT, SC_LT_NULL, -1, -1, -1);
    nd.is_null = true;
    return add(e, nd);
}
static int un(eb *e, int op, int lt, int a) { return add(e, node(op, lt, a, -1, -1)); }
static int bin(eb *e, int op, int lt, int a, int b) { return add(e, node(op, lt, a, b, -1)); }
static int when(eb *e, int lt, int c, int a, int b) { return add(e, node(SC_E_WHEN, lt, c, a, b)); }
static int cast(eb *e, int lt, int a) { return un(e, SC_E_CAST, lt, a); }

/* ------------------------------------------------------------------ evaluation */

typedef struct res {
    sc_batch *out;
    uint8_t err[64];
    int lt;
} res;

/* Evaluate e (root = last node) over rows; res.out holds one column of the root's type. */
static res run(eb *e, const trow *rows, int n) {
    res r;
    memset(&r, 0, sizeof r);
    sc_expr *x = NULL;
    int rc = sc_expr_create(&x, e->n, e->k, &SCHEMA);
    CHECK(rc == SC_OK);
    if (rc) return r;
    r.lt = sc_expr_type(x);
    uint8_t lt = (uint8_t)r.lt;
    sc_schema os;
    sc_schema_init(&os, 1, &lt);
    sc_batch_new(&r.out, &os, n > 0 ? n : 1);
    sc_schema_free(&os);
    sc_batch *in = mk(rows, n);
    CHECK(sc_expr_eval(x, in, r.out, 0, r.err) == SC_OK);
    r.out->nrows = n;
    sc_batch_release(in);
    sc_expr_destroy(x);
    return r;
}

static void done(res *r) { sc_batch_release(r->out); }

static bool valid(const res *r, int row) { return sc_batch_is_valid(r->out, 0, row); }

static void is_null(const res *r, int row) {
    CHECK(!valid(r, row));
    CHECK(!r->err[row]);
}
static void is_err(const res *r, int row) {
    CHECK(!valid(r, row));
    CHECK(r->err[row] == 1);
}
static void is_i(const res *r, int row, int64_t v) {
    CHECK(valid(r, row) && !r->err[row]);
    CHECK(sc_batch_get_i64(r->out, 0, row) == v);
}
/* Same double, bit for bit up to the NaN payload (so -0.0 != 0.0). */
static void is_f(const res *r, int row, double v) {
    CHECK(valid(r, row) && !r->err[row]);
    double g = sc_batch_get_f64(r->out, 0, row);
    if (isnan(v)) CHECK(isnan(g));
    else CHECK(g == v && signbit(g) == signbit(v));
}
static void is_b(const res *r, int row, bool v) {
    CHECK(valid(r, row) && !r->err[row]);
    CHECK(sc_batch_get_bool(r->out, 0, row) == v);
}
static void is_s(const res *r, int row, const char *v) {
    CHECK(valid(r, row) && !r->err[row]);
    int32_t len;
    const char *g = sc_batch_get_utf8(r->out, 0, row, &len);
    bool same = len == (int32_t)strlen(v) && memcmp(g, v, (size_t)len) == 0;
    if (!same) fprintf(stderr, "  got '%.*s', want '%s'\n", (int)len, g, v);
    CHECK(same);
}

static const int64_t MIN64 = INT64_MIN, MAX64 = INT64_MAX;
#define US(days, secs, us) ((int64_t)(days) * SC_US_PER_DAY + (int64_t)(secs) * 1000000 + (us))

/* ------------------------------------------------------------------------ tests */

static void test_int_arithmetic(void) {
    trow rows[] = {
        { .i = 7, .j = 2 },  { .i = -7, .j = 2 }, { .i = 7, .j = -2 }, { .i = -7, .j = -2 },
        { .i = 5, .j = 0 },  { .i = MIN64, .j = -1 }, { .i = MAX64, .j = 1 }, { .i = 3, .nulls = "j" },
    };
    int n = 8;
    struct {
        int op, lt;
        int64_t want[8]; /* 99: null, 98: error, else the value (div: checked apart) */
    } cases[] = {
        { SC_E_ADD, SC_LT_INT, { 9, -5, 5, -9, 5, INT64_MAX, MIN64, 99 } },
        { SC_E_SUB, SC_LT_INT, { 5, -9, 9, -5, 5, MIN64 + 1, MAX64 - 1, 99 } },
        { SC_E_MUL, SC_LT_INT, { 14, -14, -14, 14, 0, MIN64, MAX64, 99 } },
        { SC_E_FLOORDIV, SC_LT_INT, { 3, -4, -4, 3, 99, MIN64, MAX64, 99 } },
        { SC_E_MOD, SC_LT_INT, { 1, 1, -1, -1, 99, 0, 0, 99 } },
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        eb e = { .k = 0 };
        bin(&e, cases[k].op, cases[k].lt, col(&e, I), col(&e, J));
        res r = run(&e, rows, n);
        for (int row = 0; row < n; row++) {
            if (cases[k].want[row] == 99) is_null(&r, row);
            else is_i(&r, row, cases[k].want[row]);
        }
        done(&r);
    }
    /* MIN + MIN wraps to 0; MAX * MAX wraps to 1 */
    {
        eb e = { .k = 0 };
        bin(&e, SC_E_ADD, SC_LT_INT, lit_i(&e, MIN64), lit_i(&e, MIN64));
        res r = run(&e, rows, 1);
        is_i(&r, 0, 0);
        done(&r);
        eb e2 = { .k = 0 };
        bin(&e2, SC_E_MUL, SC_LT_INT, lit_i(&e2, MAX64), lit_i(&e2, MAX64));
        r = run(&e2, rows, 1);
        is_i(&r, 0, 1);
        done(&r);
    }
    /* int / int is float: x/0 gives +-inf or nan */
    {
        trow d[] = { { .i = 7, .j = 2 }, { .i = 5, .j = 0 }, { .i = -5, .j = 0 }, { .i = 0, .j = 0 }, { .i = 1, .j = 3 } };
        eb e = { .k = 0 };
        bin(&e, SC_E_DIV, SC_LT_FLOAT, col(&e, I), col(&e, J));
        res r = run(&e, d, 5);
        is_f(&r, 0, 3.5);
        is_f(&r, 1, INFINITY);
        is_f(&r, 2, -INFINITY);
        is_f(&r, 3, NAN);
        is_f(&r, 4, 0.3333333333333333);
        done(&r);
    }
    /* ** wraps (pow(a, b, 2**64)); a negative exponent is a row error */
    {
        trow p[] = { { .i = 3, .j = 41 }, { .i = -3, .j = 3 }, { .i = 2, .j = 64 }, { .i = 2, .j = -1 },
                     { .i = 0, .j = 0 }, { .i = 5, .nulls = "j" }, { .i = -1, .j = MAX64 } };
        eb e = { .k = 0 };
        bin(&e, SC_E_POW, SC_LT_INT, col(&e, I), col(&e, J));
        res r = run(&e, p, 7);
        is_i(&r, 0, -420491770248316829); /* 3**41 mod 2**64, as int64 */
        is_i(&r, 1, -27);
        is_i(&r, 2, 0);
        is_err(&r, 3);
        is_i(&r, 4, 1);
        is_null(&r, 5);
        is_i(&r, 6, -1);
        done(&r);
    }
    /* neg wraps */
    {
        trow m[] = { { .i = MIN64 }, { .i = 5 }, { .nulls = "i" } };
        eb e = { .k = 0 };
        un(&e, SC_E_NEG, SC_LT_INT, col(&e, I));
        res r = run(&e, m, 3);
        is_i(&r, 0, MIN64);
        is_i(&r, 1, -5);
        is_null(&r, 2);
        done(&r);
    }
}

static void test_float_arithmetic(void) {
    trow rows[] = { { .f = -7.5, .j = 2 }, { .f = 7.5, .j = -2 }, { .f = 5.0, .j = 0 }, { .f = NAN, .j = 2 },
                    { .f = -0.0, .j = 5 }, { .f = INFINITY, .j = 3 }, { .f = 2.5, .nulls = "j" } };
    int n = 7;
    eb e = { .k = 0 };
    bin(&e, SC_E_FLOORDIV, SC_LT_FLOAT, col(&e, F), col(&e, J));
    res r = run(&e, rows, n);
    is_f(&r, 0, -4.0);
    is_f(&r, 1, -4.0);
    is_null(&r, 2); /* zero divisor */
    is_f(&r, 3, NAN);
    is_f(&r, 4, 0.0); /* float(math.floor(-0.0)) is +0.0 */
    is_f(&r, 5, INFINITY);
    is_null(&r, 6);
    done(&r);

    eb m = { .k = 0 };
    bin(&m, SC_E_MOD, SC_LT_FLOAT, col(&m, F), col(&m, J));
    r = run(&m, rows, n);
    is_f(&r, 0, 0.5);
    is_f(&r, 1, -0.5);
    is_null(&r, 2);
    is_f(&r, 3, NAN);
    is_f(&r, 4, 0.0); /* zero remainder takes the divisor's sign */
    is_f(&r, 5, NAN);
    done(&r);

    /* x % inf: a negative x gives inf (CPython float_rem) */
    trow q[] = { { .f = 5.0 }, { .f = -5.0 } };
    eb mi = { .k = 0 };
    bin(&mi, SC_E_MOD, SC_LT_FLOAT, col(&mi, F), lit_f(&mi, INFINITY));
    r = run(&mi, q, 2);
    is_f(&r, 0, 5.0);
    is_f(&r, 1, INFINITY);
    done(&r);

    /* float / 0.0 */
    trow z[] = { { .f = 1.0 }, { .f = -1.0 }, { .f = 0.0 }, { .f = NAN } };
    eb dz = { .k = 0 };
    bin(&dz, SC_E_DIV, SC_LT_FLOAT, col(&dz, F), lit_f(&dz, -0.0));
    r = run(&dz, z, 4);
    is_f(&r, 0, -INFINITY);
    is_f(&r, 1, INFINITY);
    is_f(&r, 2, NAN);
    is_f(&r, 3, NAN);
    done(&r);

    /* int + float widens; mixed int // float is float */
    trow w[] = { { .i = 3, .f = 0.5 }, { .i = 7, .f = 2.0 } };
    eb ad = { .k = 0 };
    bin(&ad, SC_E_FLOORDIV, SC_LT_FLOAT, col(&ad, I), col(&ad, F));
    r = run(&ad, w, 2);
    is_f(&r, 0, 6.0);
    is_f(&r, 1, 3.0);
    done(&r);
}

static void test_float_pow(void) {
    struct {
        double a, b, want;
    } cases[] = {
        { 1.5, -2.0, 0.4444444444444444 },  { 2.0, 0.5, 1.4142135623730951 },
        { 0.0, -1.0, INFINITY },            /* ZeroDivisionError -> inf */
        { -0.0, 3.0, -0.0 },                { -8.0, 1.0 / 3.0, 1.0000000000000002 }, /* real part */
        { -2.0, 0.5, 8.659560562354934e-17 }, { 10.0, 400.0, INFINITY },          /* OverflowError */
        { -10.0, 309.0, INFINITY },         /* overflow is +inf whatever the sign */
        { NAN, 0.0, 1.0 },                  { 1.0, NAN, 1.0 },
        { -1.0, INFINITY, 1.0 },            { 0.5, -INFINITY, INFINITY },
        { -INFINITY, 3.0, -INFINITY },      { -INFINITY, -3.0, -0.0 },
        { -1.5, 2.0, 2.25 },                { -2.0, 3.0, -8.0 },
    };
    int n = (int)(sizeof cases / sizeof cases[0]);
    trow rows[32];
    memset(rows, 0, sizeof rows);
    for (int k = 0; k < n; k++) rows[k].f = cases[k].a;
    for (int k = 0; k < n; k++) {
        eb e = { .k = 0 };
        bin(&e, SC_E_POW, SC_LT_FLOAT, col(&e, F), lit_f(&e, cases[k].b));
        res r = run(&e, rows, n);
        is_f(&r, k, cases[k].want);
        done(&r);
    }
}

static void test_comparisons(void) {
    trow rows[] = {
        { .f = NAN, .i = 1 },   { .f = INFINITY, .i = 1 }, { .f = 9007199254740992.0, .i = 9007199254740993 },
        { .f = -0.0, .i = 0 },  { .f = 1.5, .i = 1 },      { .f = 2.0, .nulls = "i" },
        { .f = -9.3e18, .i = MIN64 },
    };
    int n = 7;
    /* i < f, exact and with NaN above every number */
    eb e = { .k = 0 };
    bin(&e, SC_E_LT, SC_LT_BOOL, col(&e, I), col(&e, F));
    res r = run(&e, rows, n);
    is_b(&r, 0, true);
    is_b(&r, 1, true);
    is_b(&r, 2, false); /* 2**53 + 1 > 2.0**53 exactly */
    is_b(&r, 3, false);
    is_b(&r, 4, true);
    is_null(&r, 5);
    is_b(&r, 6, false);
    done(&r);

    eb q = { .k = 0 };
    bin(&q, SC_E_EQ, SC_LT_BOOL, col(&q, F), lit_f(&q, NAN));
    r = run(&q, rows, 2);
    is_b(&r, 0, true); /* NaN == NaN */
    is_b(&r, 1, false);
    done(&r);

    eb g = { .k = 0 };
    bin(&g, SC_E_GT, SC_LT_BOOL, col(&g, F), lit_f(&g, INFINITY));
    r = run(&g, rows, 2);
    is_b(&r, 0, true); /* NaN > inf */
    is_b(&r, 1, false);
    done(&r);

    eb z = { .k = 0 };
    bin(&z, SC_E_EQ, SC_LT_BOOL, col(&z, F), lit_i(&z, 0));
    r = run(&z, rows, 4);
    is_b(&r, 3, true); /* -0.0 == 0 */
    done(&r);

    /* strings: bytewise (code point) order; null literal compares to null */
    trow s[] = { { .s = "abc" }, { .s = "ab" }, { .s = "é" }, { .s = "" }, { .nulls = "s" } };
    eb sl = { .k = 0 };
    bin(&sl, SC_E_LT, SC_LT_BOOL, col(&sl, S), lit_s(&sl, "abc"));
    r = run(&sl, s, 5);
    is_b(&r, 0, false);
    is_b(&r, 1, true);
    is_b(&r, 2, false); /* U+00E9 > 'a' */
    is_b(&r, 3, true);
    is_null(&r, 4);
    done(&r);

    eb nl = { .k = 0 };
    bin(&nl, SC_E_EQ, SC_LT_BOOL, col(&nl, I), lit_null(&nl));
    r = run(&nl, rows, 2);
    is_null(&r, 0);
    is_null(&r, 1);
    done(&r);

    /* datetimes before 1970, dates, bools */
    trow t[] = { { .t = -1, .d = -1, .b = 0 }, { .t = 0, .d = 0, .b = 1 } };
    eb tc = { .k = 0 };
    bin(&tc, SC_E_LT, SC_LT_BOOL, col(&tc, T), lit_t(&tc, SC_LT_DATETIME, 0));
    r = run(&tc, t, 2);
    is_b(&r, 0, true);
    is_b(&r, 1, false);
    done(&r);
    eb bc = { .k = 0 };
    bin(&bc, SC_E_GE, SC_LT_BOOL, col(&bc, B), lit_t(&bc, SC_LT_BOOL, 1));
    r = run(&bc, t, 2);
    is_b(&r, 0, false);
    is_b(&r, 1, true);
    done(&r);
}

static void test_logic(void) {
    /* b x (j > 0): True / False / null against True / False / null */
    trow rows[9];
    memset(rows, 0, sizeof rows);
    static const char *both[9] = { "", "", "j", "", "", "j", "b", "b", "bj" };
    for (int x = 0; x < 3; x++)
        for (int y = 0; y < 3; y++) {
            trow *w = &rows[x * 3 + y];
            w->b = x == 0;
            w->j = y == 0 ? 1 : -1;
            w->nulls = both[x * 3 + y];
        }
    /* expected: T=1, F=0, N=2 */
    int want_and[9] = { 1, 0, 2, 0, 0, 0, 2, 0, 2 };
    int want_or[9] = { 1, 1, 1, 1, 0, 2, 1, 2, 2 };
    for (int op = 0; op < 2; op++) {
        eb e = { .k = 0 };
        int p = bin(&e, SC_E_GT, SC_LT_BOOL, col(&e, J), lit_i(&e, 0));
        bin(&e, op ? SC_E_OR : SC_E_AND, SC_LT_BOOL, col(&e, B), p);
        res r = run(&e, rows, 9);
        for (int k = 0; k < 9; k++) {
            int w = op ? want_or[k] : want_and[k];
            if (w == 2) is_null(&r, k);
            else is_b(&r, k, w);
        }
        done(&r);
    }
    eb nt = { .k = 0 };
    un(&nt, SC_E_NOT, SC_LT_BOOL, col(&nt, B));
    res r = run(&nt, rows, 9);
    is_b(&r, 0, false);
    is_b(&r, 3, true);
    is_null(&r, 6);
    done(&r);

    eb nn = { .k = 0 };
    un(&nn, SC_E_IS_NULL, SC_LT_BOOL, col(&nn, B));
    r = run(&nn, rows, 9);
    is_b(&r, 0, false);
    is_b(&r, 6, true);
    done(&r);
    eb nv = { .k = 0 };
    un(&nv, SC_E_IS_NOT_NULL, SC_LT_BOOL, col(&nv, J));
    r = run(&nv, rows, 9);
    is_b(&r, 0, true);
    is_b(&r, 2, false);
    done(&r);
}

/* Errors count only where the reference evaluates the failing operand. */
static void test_lazy_errors(void) {
    trow rows[] = { { .s = "x", .b = 1 }, { .s = "x", .b = 0 }, { .s = "x", .nulls = "b" }, { .s = "x", .nulls = "bi" } };
    /* when(b).then(cast(s, int)).otherwise(0) fails only where b is true */
    eb e = { .k = 0 };
    when(&e, SC_LT_INT, col(&e, B), cast(&e, SC_LT_INT, col(&e, S)), lit_i(&e, 0));
    res r = run(&e, rows, 3);
    is_err(&r, 0);
    is_i(&r, 1, 0);
    is_i(&r, 2, 0);
    done(&r);
    /* b and (cast(s, int) > 0): false on the left decides the row */
    eb a = { .k = 0 };
    int c = bin(&a, SC_E_GT, SC_LT_BOOL, cast(&a, SC_LT_INT, col(&a, S)), lit_i(&a, 0));
    bin(&a, SC_E_AND, SC_LT_BOOL, col(&a, B), c);
    r = run(&a, rows, 3);
    is_err(&r, 0);
    is_b(&r, 1, false);
    is_err(&r, 2); /* null and <error>: the right side is evaluated */
    done(&r);
    /* i + cast(s, int): a null left operand skips the right one */
    eb p = { .k = 0 };
    bin(&p, SC_E_ADD, SC_LT_INT, col(&p, I), cast(&p, SC_LT_INT, col(&p, S)));
    r = run(&p, rows, 4);
    is_err(&r, 0);
    is_null(&r, 3);
    done(&r);
    /* fill_null(i, cast(s, int)) fails only where i is null */
    eb f = { .k = 0 };
    bin(&f, SC_E_FILL_NULL, SC_LT_INT, col(&f, I), cast(&f, SC_LT_INT, col(&f, S)));
    r = run(&f, rows, 4);
    is_i(&r, 0, 0);
    is_err(&r, 3);
    done(&r);
}

/* when / fill_null unify int with float, but int rows stay Python ints downstream. */
static void test_mixed_int_float(void) {
    trow rows[] = { { .b = 1, .i = 2 }, { .b = 0, .i = 2 }, { .b = 1, .nulls = "i" } };
    /* when(b).then(2).otherwise(1.5) ** -2: int ** negative int fails */
    eb e = { .k = 0 };
    int w = when(&e, SC_LT_FLOAT, col(&e, B), lit_i(&e, 2), lit_f(&e, 1.5));
    bin(&e, SC_E_POW, SC_LT_FLOAT, w, lit_i(&e, -2));
    res r = run(&e, rows, 2);
    is_err(&r, 0);
    is_f(&r, 1, 0.4444444444444444);
    done(&r);
    /* cast to str: "2" for the int row, "1.5" for the float row */
    eb s = { .k = 0 };
    w = when(&s, SC_LT_FLOAT, col(&s, B), lit_i(&s, 2), lit_f(&s, 1.5));
    cast(&s, SC_LT_STR, w);
    r = run(&s, rows, 2);
    is_s(&r, 0, "2");
    is_s(&r, 1, "1.5");
    done(&r);
    /* fill_null(i, 0.5): int rows compare exactly and wrap in int arithmetic */
    trow big[] = { { .i = 9007199254740993 }, { .nulls = "i" }, { .i = MAX64 } };
    eb f = { .k = 0 };
    int fl = bin(&f, SC_E_FILL_NULL, SC_LT_FLOAT, col(&f, I), lit_f(&f, 0.5));
    bin(&f, SC_E_EQ, SC_LT_BOOL, fl, lit_i(&f, 9007199254740993));
    r = run(&f, big, 2);
    is_b(&r, 0, true);
    is_b(&r, 1, false);
    done(&r);
    eb g = { .k = 0 };
    fl = bin(&g, SC_E_FILL_NULL, SC_LT_FLOAT, col(&g, I), lit_f(&g, 0.5));
    bin(&g, SC_E_ADD, SC_LT_FLOAT, fl, lit_i(&g, 1));
    r = run(&g, big, 3);
    is_f(&r, 0, 9007199254740994.0);
    is_f(&r, 1, 1.5);
    is_f(&r, 2, -9223372036854775808.0); /* MAX + 1 wraps as an int, then float() */
    done(&r);
    /* the plain output of a mixed vector is float(int) */
    eb o = { .k = 0 };
    bin(&o, SC_E_FILL_NULL, SC_LT_FLOAT, col(&o, I), lit_f(&o, 0.5));
    r = run(&o, big, 2);
    is_f(&r, 0, 9007199254740992.0);
    is_f(&r, 1, 0.5);
    done(&r);
}

static void test_cast_from_str(void) {
    const char *in[] = { " 12_3 ", "1__2", "+7", "18446744073709551617", "\xd9\xa3", "-0", "", "1e5", "12a", "_1", " \xe3\x80\x80-5\xe3\x80\x80" };
    int64_t want_i[] = { 123, 99, 7, 1, 3, 0, 99, 99, 99, 99, -5 }; /* 99: error */
    int n = (int)(sizeof in / sizeof in[0]);
    trow rows[16];
    memset(rows, 0, sizeof rows);
    for (int k = 0; k < n; k++) rows[k].s = in[k];
    eb e = { .k = 0 };
    cast(&e, SC_LT_INT, col(&e, S));
    res r = run(&e, rows, n);
    for (int k = 0; k < n; k++) {
        if (want_i[k] == 99) is_err(&r, k);
        else is_i(&r, k, want_i[k]);
    }
    done(&r);

    const char *fin[] = { "1e5", " inf ", "-Infinity", "nan", "1_0.5", "1e", ".5", "5.", "0x10", "1e-400", "--1", "1_e5" };
    double want_f[] = { 100000.0, INFINITY, -INFINITY, NAN, 10.5, 99, 0.5, 5.0, 99, 0.0, 99, 99 };
    n = (int)(sizeof fin / sizeof fin[0]);
    for (int k = 0; k < n; k++) rows[k].s = fin[k];
    eb f = { .k = 0 };
    cast(&f, SC_LT_FLOAT, col(&f, S));
    r = run(&f, rows, n);
    for (int k = 0; k < n; k++) {
        if (want_f[k] == 99) is_err(&r, k);
        else is_f(&r, k, want_f[k]);
    }
    done(&r);

    const char *bin_[] = { "true", " FALSE ", "True", "yes", "1" };
    int want_b[] = { 1, 0, 1, 2, 2 };
    for (int k = 0; k < 5; k++) rows[k].s = bin_[k];
    eb b = { .k = 0 };
    cast(&b, SC_LT_BOOL, col(&b, S));
    r = run(&b, rows, 5);
    for (int k = 0; k < 5; k++) {
        if (want_b[k] == 2) is_err(&r, k);
        else is_b(&r, k, want_b[k]);
    }
    done(&r);

    /* datetime.fromisoformat */
    const char *din[] = { "2024-01-02", "2024-01-02 03:04", "2024-01-02T03:04:05.5", "2024-01-02T03:04:05+01:00",
                          "not a date", "1969-12-31 23:59:59.999999", "2024-02-30", "20240102T0304", " 2024-01-02 " };
    int64_t want_t[] = { US(19724, 0, 0), US(19724, 3 * 3600 + 4 * 60, 0), US(19724, 3 * 3600 + 4 * 60 + 5, 500000),
                         US(19724, 2 * 3600 + 4 * 60 + 5, 0), 99, -1, 99, US(19724, 3 * 3600 + 4 * 60, 0), US(19724, 0, 0) };
    n = (int)(sizeof din / sizeof din[0]);
    for (int k = 0; k < n; k++) rows[k].s = din[k];
    eb t = { .k = 0 };
    cast(&t, SC_LT_DATETIME, col(&t, S));
    r = run(&t, rows, n);
    for (int k = 0; k < n; k++) {
        if (want_t[k] == 99) is_err(&r, k);
        else is_i(&r, k, want_t[k]);
    }
    done(&r);

    const char *ddin[] = { "2024-01-02", "0001-01-01", "2024-01-02 00:00", "2020-W01-1", "2024-13-01" };
    int64_t want_d[] = { 19724, -719162, 99, 18260, 99 };
    for (int k = 0; k < 5; k++) rows[k].s = ddin[k];
    eb d = { .k = 0 };
    cast(&d, SC_LT_DATE, col(&d, S));
    r = run(&d, rows, 5);
    for (int k = 0; k < 5; k++) {
        if (want_d[k] == 99) is_err(&r, k);
        else is_i(&r, k, want_d[k]);
    }
    done(&r);
}

static void test_cast_to_str(void) {
    double fv[] = { 0.1, 1e16, 1.5e-7, -0.0, INFINITY, NAN, 123.0, 1e15, 1.0 / 3.0, 5e-324, 1e-5, 0.0001 };
    /* Polars' cast to str: NaN, decimals down to 1e-5, unpadded exponents */
    const char *want[] = { "0.1", "1e+16", "1.5e-7", "-0.0", "inf", "NaN", "123.0", "1000000000000000.0",
                           "0.3333333333333333", "5e-324", "0.00001", "0.0001" };
    int n = (int)(sizeof fv / sizeof fv[0]);
    trow rows[16];
    memset(rows, 0, sizeof rows);
    for (int k = 0; k < n; k++) rows[k].f = fv[k];
    eb e = { .k = 0 };
    cast(&e, SC_LT_STR, col(&e, F));
    res r = run(&e, rows, n);
    for (int k = 0; k < n; k++) is_s(&r, k, want[k]);
    done(&r);

    trow o[] = { { .i = MIN64, .b = 1, .t = -1, .d = -1 }, { .i = 42, .b = 0, .t = US(0, 0, 0), .d = -719162 },
                 { .nulls = "ibtd" } };
    struct {
        int c;
        const char *want[2];
    } cases[] = {
        { I, { "-9223372036854775808", "42" } },
        { B, { "true", "false" } },
        { T, { "1969-12-31 23:59:59.999999", "1970-01-01 00:00:00.000000" } },
        { D, { "1969-12-31", "0001-01-01" } },
    };
    for (int k = 0; k < 4; k++) {
        eb c = { .k = 0 };
        cast(&c, SC_LT_STR, col(&c, cases[k].c));
        r = run(&c, o, 3);
        is_s(&r, 0, cases[k].want[0]);
        is_s(&r, 1, cases[k].want[1]);
        is_null(&r, 2);
        done(&r);
    }
}

static void test_cast_numeric_temporal(void) {
    trow rows[] = { { .f = NAN }, { .f = 1e19 }, { .f = -2.9 }, { .f = -9223372036854775808.0 }, { .f = 0.0 } };
    eb e = { .k = 0 };
    cast(&e, SC_LT_INT, col(&e, F));
    res r = run(&e, rows, 5);
    is_err(&r, 0);
    is_err(&r, 1);
    is_i(&r, 2, -2);
    is_i(&r, 3, MIN64);
    is_i(&r, 4, 0);
    done(&r);
    eb b = { .k = 0 };
    cast(&b, SC_LT_BOOL, col(&b, F));
    r = run(&b, rows, 5);
    is_b(&r, 0, true); /* bool(nan) */
    is_b(&r, 4, false);
    done(&r);
    eb ft = { .k = 0 };
    cast(&ft, SC_LT_DATETIME, col(&ft, F));
    r = run(&ft, rows, 1);
    is_err(&r, 0); /* float -> datetime is not allowed */
    done(&r);

    /* int <-> datetime is microseconds; out of datetime's range fails */
    trow t[] = { { .i = -3, .t = US(-1, 86399, 999999), .d = -1 }, { .i = 253402300800000000, .t = US(19724, 5, 0), .d = 19724 } };
    eb it = { .k = 0 };
    cast(&it, SC_LT_DATETIME, col(&it, I));
    r = run(&it, t, 2);
    is_i(&r, 0, -3);
    is_err(&r, 1);
    done(&r);
    eb td = { .k = 0 };
    cast(&td, SC_LT_DATE, col(&td, T));
    r = run(&td, t, 2);
    is_i(&r, 0, -1); /* floor, not truncation */
    is_i(&r, 1, 19724);
    done(&r);
    eb dt = { .k = 0 };
    cast(&dt, SC_LT_DATETIME, col(&dt, D));
    r = run(&dt, t, 1);
    is_i(&r, 0, -SC_US_PER_DAY);
    done(&r);
    eb di = { .k = 0 };
    cast(&di, SC_LT_INT, col(&di, D));
    r = run(&di, t, 1);
    is_i(&r, 0, -1); /* date -> int is days */
    done(&r);
    eb df = { .k = 0 };
    cast(&df, SC_LT_FLOAT, col(&df, D));
    r = run(&df, t, 1);
    is_f(&r, 0, -86400000000.0); /* date -> float is float(epoch_us) */
    done(&r);
    eb ti = { .k = 0 };
    cast(&ti, SC_LT_INT, col(&ti, T));
    r = run(&ti, t, 1);
    is_i(&r, 0, US(-1, 86399, 999999));
    done(&r);
    eb idt = { .k = 0 };
    cast(&idt, SC_LT_DATE, col(&idt, I));
    r = run(&idt, t, 1);
    is_err(&r, 0); /* int -> date is not allowed */
    done(&r);
    eb nul = { .k = 0 };
    cast(&nul, SC_LT_NULL, col(&nul, I));
    r = run(&nul, t, 1);
    is_err(&r, 0);
    done(&r);
}

static void test_is_in(void) {
    trow rows[] = { { .i = 1, .f = 0.5, .s = "ab" }, { .i = 3, .f = NAN, .s = "x" }, { .nulls = "ifs" } };
    static const int64_t il[] = { 1, 2 };
    static const double fl[] = { 0.5, NAN };
    static const char *sl[] = { "a", "ab" };
    static const int32_t sll[] = { 1, 2 };
    for (int has_null = 0; has_null < 2; has_null++) {
        for (int which = 0; which < 3; which++) {
            eb e = { .k = 0 };
            sc_enode nd = node(SC_E_IS_IN, SC_LT_BOOL, col(&e, which == 0 ? I : which == 1 ? F : S), -1, -1);
            nd.nlist = 2;
            nd.list_has_null = has_null;
            if (which == 0) nd.ilist = il;
            if (which == 1) nd.flist = fl;
            if (which == 2) {
                nd.slist = sl;
                nd.slens = sll;
            }
            add(&e, nd);
            res r = run(&e, rows, 3);
            is_b(&r, 0, true);
            is_b(&r, 1, false); /* 3 not in [1, 2]; NaN never matches; "x" */
            if (has_null) is_b(&r, 2, true);
            else is_null(&r, 2);
            done(&r);
        }
    }
}

/* ------------------------------------------------------------------------- lists */

/* Encoded list of n numbers (lists.h): null where isnull[k]; ints or doubles. */
typedef struct lbuf {
    char b[128];
    int32_t len;
} lbuf;
static lbuf enc(int n, const double *v, const char *nulls, bool ints) {
    lbuf L = { .len = 0 };
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
static int lit_list(eb *e, int inner, const lbuf *L) {
    sc_enode nd = node(SC_E_LIT, SC_LT_LIST + inner, -1, -1, -1);
    nd.s = L->b;
    nd.slen = L->len;
    return add(e, nd);
}
static void is_list(const res *r, int row, const lbuf *want) {
    CHECK(valid(r, row) && !r->err[row]);
    int32_t len;
    const char *g = sc_batch_get_utf8(r->out, 0, row, &len);
    CHECK(len == want->len && memcmp(g, want->b, (size_t)len) == 0);
}

static void test_lists(void) {
    const int LI = SC_LT_LIST + SC_LT_INT, LF = SC_LT_LIST + SC_LT_FLOAT;
    trow rows[] = { { .b = 1 }, { .b = 0 }, { .nulls = "b" } };
    static const double v12[] = { 1, 2 }, v1n[] = { 1, 0 }, v15[] = { 1.5 }, vnan[] = { NAN };
    lbuf i12 = enc(2, v12, NULL, true), f12 = enc(2, v12, NULL, false), i1n = enc(2, v1n, ".n", true);
    lbuf f15 = enc(1, v15, NULL, false), fnan = enc(1, vnan, NULL, false), empty = { .len = 0 };
    /* when(b, [1, 2], [1.5]): list[float]; the int list is written as floats */
    {
        eb e = { .k = 0 };
        int c = col(&e, B), a = lit_list(&e, SC_LT_INT, &i12), b = lit_list(&e, SC_LT_FLOAT, &f15);
        when(&e, LF, c, a, b);
        res r = run(&e, rows, 3);
        CHECK(r.lt == LF);
        is_list(&r, 0, &f12);
        is_list(&r, 1, &f15);
        is_list(&r, 2, &f15);
        done(&r);
    }
    /* the int list keeps comparing as ints: when(b, [1, 2], [1.5]) == [1.0, 2.0] */
    {
        eb e = { .k = 0 };
        int c = col(&e, B), a = lit_list(&e, SC_LT_INT, &i12), b = lit_list(&e, SC_LT_FLOAT, &f15);
        int w = when(&e, LF, c, a, b);
        bin(&e, SC_E_EQ, SC_LT_BOOL, w, lit_list(&e, SC_LT_FLOAT, &f12));
        res r = run(&e, rows, 3);
        is_b(&r, 0, true);
        is_b(&r, 1, false);
        done(&r);
    }
    /* equality, ordering and the null-element error */
    struct {
        const lbuf *a, *b;
        int ia, ib, op;
        int want; /* 0 / 1, or -1: row error */
    } cases[] = {
        { &i12, &f12, SC_LT_INT, SC_LT_FLOAT, SC_E_EQ, 1 },
        { &i12, &i1n, SC_LT_INT, SC_LT_INT, SC_E_EQ, 0 },   /* [1, 2] == [1, None] */
        { &i1n, &i1n, SC_LT_INT, SC_LT_INT, SC_E_EQ, 1 },   /* None == None */
        { &i1n, &i12, SC_LT_INT, SC_LT_INT, SC_E_LT, -1 },  /* None < 2: TypeError */
        { &i1n, &i1n, SC_LT_INT, SC_LT_INT, SC_E_LE, 1 },   /* no differing element */
        { &empty, &i12, SC_LT_INT, SC_LT_INT, SC_E_LT, 1 }, /* prefix: shorter first */
        { &f15, &i12, SC_LT_FLOAT, SC_LT_INT, SC_E_GT, 1 }, /* 1.5 > 1 */
        { &fnan, &fnan, SC_LT_FLOAT, SC_LT_FLOAT, SC_E_EQ, 0 }, /* NaN equals nothing */
        { &fnan, &fnan, SC_LT_FLOAT, SC_LT_FLOAT, SC_E_GE, 0 },
        { &fnan, &f15, SC_LT_FLOAT, SC_LT_FLOAT, SC_E_NE, 1 },
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        eb e = { .k = 0 };
        int a = lit_list(&e, cases[k].ia, cases[k].a), b = lit_list(&e, cases[k].ib, cases[k].b);
        bin(&e, cases[k].op, SC_LT_BOOL, a, b);
        res r = run(&e, rows, 1);
        if (cases[k].want < 0) is_err(&r, 0);
        else is_b(&r, 0, cases[k].want == 1);
        if (r.err[0] && cases[k].want >= 0) fprintf(stderr, "  list case %zu\n", k);
        done(&r);
    }
    /* fill_null / is_null with a null list; is_in over lists */
    {
        eb e = { .k = 0 };
        int c = col(&e, B), a = lit_list(&e, SC_LT_INT, &i12);
        sc_enode nl = node(SC_E_LIT, LI, -1, -1, -1);
        nl.is_null = true;
        int n = add(&e, nl);
        int w = when(&e, LI, c, a, n);
        add(&e, node(SC_E_FILL_NULL, LI, w, lit_list(&e, SC_LT_INT, &i1n), -1));
        res r = run(&e, rows, 3);
        is_list(&r, 0, &i12);
        is_list(&r, 1, &i1n);
        done(&r);
        eb e2 = { .k = 0 };
        c = col(&e2, B);
        a = lit_list(&e2, SC_LT_INT, &i12);
        n = add(&e2, nl);
        w = when(&e2, LI, c, a, n);
        static const char *sl[2];
        static int32_t sll[2];
        sl[0] = i1n.b;
        sll[0] = i1n.len;
        sl[1] = i12.b; /* [1, 2]: the literal's lists come encoded as the subject's type */
        sll[1] = i12.len;
        sc_enode in = node(SC_E_IS_IN, SC_LT_BOOL, w, -1, -1);
        in.nlist = 2;
        in.slist = sl;
        in.slens = sll;
        add(&e2, in);
        res r2 = run(&e2, rows, 3);
        is_b(&r2, 0, true);
        is_null(&r2, 1); /* None in values without None: null */
        done(&r2);
    }
    /* a malformed list literal is refused at compile time */
    {
        eb e = { .k = 0 };
        lbuf bad = { .b = { 1, 2 }, .len = 2 };
        lit_list(&e, SC_LT_INT, &bad);
        sc_expr *x = NULL;
        CHECK(sc_expr_create(&x, e.n, e.k, &SCHEMA) == SC_EINVAL);
    }
}

static void test_abs_round(void) {
    trow rows[] = { { .i = MIN64, .f = 2.5 }, { .i = -5, .f = -2.5 }, { .i = 7, .f = 0.125 }, { .i = 0, .f = -0.3 },
                    { .f = NAN, .nulls = "i" }, { .f = -INFINITY }, { .f = 1e307 } };
    eb a = { .k = 0 };
    un(&a, SC_E_ABS, SC_LT_INT, col(&a, I));
    res r = run(&a, rows, 5);
    is_i(&r, 0, MIN64); /* wraps */
    is_i(&r, 1, 5);
    is_null(&r, 4);
    done(&r);
    eb af = { .k = 0 };
    un(&af, SC_E_ABS, SC_LT_FLOAT, col(&af, F));
    r = run(&af, rows, 6);
    is_f(&r, 1, 2.5);
    is_f(&r, 5, INFINITY);
    done(&r);
    eb r0 = { .k = 0 };
    un(&r0, SC_E_ROUND, SC_LT_FLOAT, col(&r0, F));
    r = run(&r0, rows, 7);
    is_f(&r, 0, 2.0); /* half to even, as Polars */
    is_f(&r, 1, -2.0);
    is_f(&r, 2, 0.0);
    is_f(&r, 3, -0.0);
    is_f(&r, 4, NAN);
    is_f(&r, 5, -INFINITY);
    done(&r);
    eb r2 = { .k = 0 };
    bin(&r2, SC_E_ROUND, SC_LT_FLOAT, col(&r2, F), lit_i(&r2, 2));
    r = run(&r2, rows, 7);
    is_f(&r, 2, 0.12); /* 12.5 to even */
    is_f(&r, 6, 1e307); /* |v| * 100 overflows: unchanged, as Polars */
    done(&r);
    eb ri = { .k = 0 };
    bin(&ri, SC_E_ROUND, SC_LT_INT, col(&ri, I), lit_i(&ri, 1));
    r = run(&ri, rows, 3);
    is_i(&r, 1, -5);
    done(&r);
}

static void test_strings(void) {
    trow rows[] = { { .s = "Hello World" }, { .s = "h\xc3\xa9llo" }, { .s = "" }, { .s = "Stra\xc3\x9f" "e" },
                    { .nulls = "s" }, { .s = "\xce\xa3\xce\x91\xce\xa3 \xce\x9f\xce\x94\xce\x9f\xce\xa3" } };
    int n = 6;
    eb c = { .k = 0 };
    bin(&c, SC_E_STR_CONTAINS, SC_LT_BOOL, col(&c, S), lit_s(&c, "o W"));
    res r = run(&c, rows, n);
    is_b(&r, 0, true);
    is_b(&r, 1, false);
    is_b(&r, 2, false);
    is_null(&r, 4);
    done(&r);
    eb em = { .k = 0 };
    bin(&em, SC_E_STR_CONTAINS, SC_LT_BOOL, col(&em, S), lit_s(&em, ""));
    r = run(&em, rows, n);
    is_b(&r, 2, true);
    done(&r);
    eb sw = { .k = 0 };
    bin(&sw, SC_E_STR_STARTS_WITH, SC_LT_BOOL, col(&sw, S), lit_s(&sw, "h"));
    r = run(&sw, rows, n);
    is_b(&r, 0, false);
    is_b(&r, 1, true);
    done(&r);
    eb ew = { .k = 0 };
    bin(&ew, SC_E_STR_ENDS_WITH, SC_LT_BOOL, col(&ew, S), col(&ew, S)); /* column pattern */
    r = run(&ew, rows, n);
    is_b(&r, 0, true);
    is_null(&r, 4);
    done(&r);
    eb up = { .k = 0 };
    un(&up, SC_E_STR_UPPER, SC_LT_STR, col(&up, S));
    r = run(&up, rows, n);
    is_s(&r, 0, "HELLO WORLD");
    is_s(&r, 1, "H\xc3\x89LLO");
    is_s(&r, 3, "STRASSE"); /* full mapping: sharp s -> SS */
    is_null(&r, 4);
    done(&r);
    eb lo = { .k = 0 };
    un(&lo, SC_E_STR_LOWER, SC_LT_STR, col(&lo, S));
    r = run(&lo, rows, n);
    is_s(&r, 0, "hello world");
    is_s(&r, 5, "\xcf\x83\xce\xb1\xcf\x82 \xce\xbf\xce\xb4\xce\xbf\xcf\x82"); /* final sigma */
    done(&r);
    eb ln = { .k = 0 };
    un(&ln, SC_E_STR_LEN_CHARS, SC_LT_INT, col(&ln, S));
    r = run(&ln, rows, n);
    is_i(&r, 1, 5);
    is_i(&r, 2, 0);
    is_null(&r, 4);
    done(&r);
    eb cat = { .k = 0 };
    bin(&cat, SC_E_ADD, SC_LT_STR, col(&cat, S), lit_s(&cat, "!"));
    r = run(&cat, rows, n);
    is_s(&r, 0, "Hello World!");
    is_s(&r, 2, "!");
    is_null(&r, 4);
    done(&r);
}

static void test_datetime_fields(void) {
    /* 1969-07-20 20:17:40 (a Sunday), 2024-02-29 23:59:58.000007, 0001-01-01, 9999-12-31 23:59:59.999999 */
    trow rows[] = { { .t = -14182940000000, .d = -165 }, { .t = US(19782, 86398, 7), .d = 19782 },
                    { .t = US(-719162, 0, 0), .d = -719162 }, { .t = US(2932896, 86399, 999999), .d = 2932896 },
                    { .nulls = "td" } };
    int n = 5;
    struct {
        int op;
        int64_t want[4];
    } cases[] = {
        { SC_E_DT_YEAR, { 1969, 2024, 1, 9999 } },   { SC_E_DT_MONTH, { 7, 2, 1, 12 } },
        { SC_E_DT_DAY, { 20, 29, 1, 31 } },          { SC_E_DT_HOUR, { 20, 23, 0, 23 } },
        { SC_E_DT_MINUTE, { 17, 59, 0, 59 } },       { SC_E_DT_SECOND, { 40, 58, 0, 59 } },
        { SC_E_DT_WEEKDAY, { 7, 4, 1, 5 } },
        { SC_E_DT_EPOCH_US, { -14182940000000, US(19782, 86398, 7), US(-719162, 0, 0), US(2932896, 86399, 999999) } },
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        eb e = { .k = 0 };
        un(&e, cases[k].op, SC_LT_INT, col(&e, T));
        res r = run(&e, rows, n);
        for (int row = 0; row < 4; row++) is_i(&r, row, cases[k].want[row]);
        is_null(&r, 4);
        done(&r);
    }
    eb d = { .k = 0 };
    un(&d, SC_E_DT_DATE, SC_LT_DATE, col(&d, T));
    res r = run(&d, rows, n);
    is_i(&r, 0, -165);
    is_i(&r, 1, 19782);
    done(&r);
    /* on dates: year / weekday / epoch_us */
    eb y = { .k = 0 };
    un(&y, SC_E_DT_YEAR, SC_LT_INT, col(&y, D));
    r = run(&y, rows, n);
    is_i(&r, 0, 1969);
    is_i(&r, 2, 1);
    done(&r);
    eb w = { .k = 0 };
    un(&w, SC_E_DT_WEEKDAY, SC_LT_INT, col(&w, D));
    r = run(&w, rows, n);
    is_i(&r, 0, 7);
    done(&r);
    eb eu = { .k = 0 };
    un(&eu, SC_E_DT_EPOCH_US, SC_LT_INT, col(&eu, D));
    r = run(&eu, rows, n);
    is_i(&r, 0, -165 * SC_US_PER_DAY);
    done(&r);
}

static void test_create_validation(void) {
    sc_expr *x = NULL;
    eb e = { .k = 0 };
    bin(&e, SC_E_ADD, SC_LT_INT, col(&e, I), col(&e, S)); /* int + str */
    CHECK(sc_expr_create(&x, e.n, e.k, &SCHEMA) == SC_EINVAL);
    eb f = { .k = 0 };
    bin(&f, SC_E_ADD, SC_LT_FLOAT, col(&f, I), col(&f, J)); /* int + int is int */
    CHECK(sc_expr_create(&x, f.n, f.k, &SCHEMA) == SC_EINVAL);
    eb g = { .k = 0 };
    add(&g, node(SC_E_NEG, SC_LT_INT, 3, -1, -1)); /* child after parent */
    CHECK(sc_expr_create(&x, g.n, g.k, &SCHEMA) == SC_EINVAL);
    eb h = { .k = 0 };
    add(&h, node(SC_E_COL, SC_LT_INT, 42, -1, -1));
    CHECK(sc_expr_create(&x, h.n, h.k, &SCHEMA) == SC_EINVAL);
    eb k = { .k = 0 };
    un(&k, SC_E_DT_HOUR, SC_LT_INT, col(&k, D)); /* hour of a date */
    CHECK(sc_expr_create(&x, k.n, k.k, &SCHEMA) == SC_EINVAL);
    eb ok = { .k = 0 };
    bin(&ok, SC_E_POW, SC_LT_FLOAT, lit_null(&ok), col(&ok, I)); /* null ** int is float */
    CHECK(sc_expr_create(&x, ok.n, ok.k, &SCHEMA) == SC_OK);
    sc_expr_destroy(x);
}

/* --------------------------------------------------------------- user functions */

/* A kernel as streamcell.udf generates one: f(double x, int64 y) = 2x + y; null in, null out. */
static void k_wsum(int64_t n, const void **vals, const uint8_t **oks, void *out, uint8_t *out_ok) {
    const double *x = vals[0];
    const int64_t *y = vals[1];
    double *o = out;
    for (int64_t r = 0; r < n; r++) {
        out_ok[r] = oks[0][r] && oks[1][r];
        if (out_ok[r]) o[r] = 2 * x[r] + (double)y[r];
    }
}

/* g(bint b) -> bint: not b. */
static void k_not(int64_t n, const void **vals, const uint8_t **oks, void *out, uint8_t *out_ok) {
    const uint8_t *b = vals[0];
    uint8_t *o = out;
    for (int64_t r = 0; r < n; r++) {
        out_ok[r] = oks[0][r];
        if (out_ok[r]) o[r] = !b[r];
    }
}

static int64_t ARGS_FI[2], ARGS_B[1];

static int udf(eb *e, sc_udf_kernel k, int lt, const char *kinds, int64_t *args, int nargs) {
    sc_enode nd = node(SC_E_UDF, lt, (int)args[0], -1, -1);
    nd.i = (int64_t)(uintptr_t)k;
    nd.nlist = nargs;
    nd.ilist = args;
    nd.s = kinds;
    nd.slen = (int32_t)strlen(kinds);
    return add(e, nd);
}

static void test_udf(void) {
    trow rows[] = { { .i = 3, .f = 1.5, .j = 10, .b = 1 }, { .i = -1, .f = 0.25, .j = 7, .nulls = "f" },
                    { .i = 4, .f = 2.0, .nulls = "jb" }, { .i = 5, .s = "x", .j = 1, .b = 0 } };
    eb e = { .k = 0 };
    ARGS_FI[0] = col(&e, F);
    ARGS_FI[1] = col(&e, J);
    udf(&e, k_wsum, SC_LT_FLOAT, "di", ARGS_FI, 2);
    res r = run(&e, rows, 4);
    is_f(&r, 0, 13.0);
    is_null(&r, 1);
    is_null(&r, 2);
    is_f(&r, 3, 1.0);
    done(&r);
    /* an int column where a double is expected: converted as float(int) */
    eb ei = { .k = 0 };
    ARGS_FI[0] = col(&ei, I);
    ARGS_FI[1] = col(&ei, J);
    udf(&ei, k_wsum, SC_LT_FLOAT, "di", ARGS_FI, 2);
    r = run(&ei, rows, 2);
    is_f(&r, 0, 16.0);
    is_f(&r, 1, 5.0);
    done(&r);
    /* bool in, bool out */
    eb eb_ = { .k = 0 };
    ARGS_B[0] = col(&eb_, B);
    udf(&eb_, k_not, SC_LT_BOOL, "b", ARGS_B, 1);
    r = run(&eb_, rows, 4);
    is_b(&r, 0, false);
    is_null(&r, 2);
    is_b(&r, 3, true);
    done(&r);
    /* a null-typed argument: every row null, the kernel is not called */
    eb en = { .k = 0 };
    ARGS_FI[0] = lit_null(&en);
    ARGS_FI[1] = col(&en, J);
    udf(&en, k_wsum, SC_LT_FLOAT, "di", ARGS_FI, 2);
    r = run(&en, rows, 2);
    is_null(&r, 0);
    is_null(&r, 1);
    done(&r);
    /* an argument's error propagates: cast("x" -> int) fails row 3 */
    eb ee = { .k = 0 };
    ARGS_FI[0] = col(&ee, F);
    ARGS_FI[1] = cast(&ee, SC_LT_INT, col(&ee, S));
    udf(&ee, k_wsum, SC_LT_FLOAT, "di", ARGS_FI, 2);
    r = run(&ee, rows, 4);
    CHECK(!valid(&r, 3) && r.err[3]);
    done(&r);
    /* validation: kind mismatch, bad result type, missing kernel, child after parent */
    sc_expr *x = NULL;
    eb v1 = { .k = 0 };
    ARGS_FI[0] = col(&v1, F);
    ARGS_FI[1] = col(&v1, F); /* 'i' given a float */
    udf(&v1, k_wsum, SC_LT_FLOAT, "di", ARGS_FI, 2);
    CHECK(sc_expr_create(&x, v1.n, v1.k, &SCHEMA) == SC_EINVAL);
    eb v2 = { .k = 0 };
    ARGS_B[0] = col(&v2, B);
    udf(&v2, k_not, SC_LT_STR, "b", ARGS_B, 1);
    CHECK(sc_expr_create(&x, v2.n, v2.k, &SCHEMA) == SC_EINVAL);
    eb v3 = { .k = 0 };
    ARGS_B[0] = col(&v3, B);
    udf(&v3, NULL, SC_LT_BOOL, "b", ARGS_B, 1);
    CHECK(sc_expr_create(&x, v3.n, v3.k, &SCHEMA) == SC_EINVAL);
    eb v4 = { .k = 0 };
    ARGS_B[0] = 5;
    udf(&v4, k_not, SC_LT_BOOL, "b", ARGS_B, 1);
    CHECK(sc_expr_create(&x, v4.n, v4.k, &SCHEMA) == SC_EINVAL);
    eb v5 = { .k = 0 };
    ARGS_FI[0] = col(&v5, F);
    ARGS_FI[1] = col(&v5, J);
    udf(&v5, k_wsum, SC_LT_FLOAT, "d", ARGS_FI, 2); /* one kind letter for two arguments */
    CHECK(sc_expr_create(&x, v5.n, v5.k, &SCHEMA) == SC_EINVAL);
}

/* ------------------------------------------------------------------- operators */

static sc_step_counters CTR;

static void base_of(sc_op_base *b, const sc_schema *out) {
    memset(&CTR, 0, sizeof CTR);
    CHECK(sc_op_base_init(b, 3, true, true, &CTR, &SCHEMA, out, 4, true) == SC_OK);
}

static uint64_t ctr(sc_atomic_u64 *a) { return sc_u64_load_relaxed(a); }

static void test_filter(void) {
    trow rows[] = { { .s = "5" }, { .s = "?" }, { .s = "1" }, { .nulls = "s" }, { .s = "9" } };
    sc_op_base b;
    base_of(&b, &SCHEMA);
    eb e = { .k = 0 };
    bin(&e, SC_E_GT, SC_LT_BOOL, cast(&e, SC_LT_INT, col(&e, S)), lit_i(&e, 2));
    void *st = NULL;
    CHECK(sc_op_filter_create(&st, &b, e.n, e.k) == SC_OK); /* st has its own copy */
    sc_op_base_free(&b);
    sc_op_base *base = st;
    sc_batch *in = mk(rows, 5), *out = NULL;
    in->serial = 77;
    CHECK(sc_op_filter_run(st, in, &out) == SC_OK);
    CHECK(out && out != in && out->nrows == 2 && out->serial == 77);
    if (out) {
        int32_t len;
        CHECK(memcmp(sc_batch_get_utf8(out, S, 0, &len), "5", 1) == 0);
        CHECK(memcmp(sc_batch_get_utf8(out, S, 1, &len), "9", 1) == 0);
        CHECK(sc_batch_get_i64(out, 0, 1) == 4 && sc_batch_get_i64(out, 1, 1) == 104); /* hidden */
    }
    sc_batch_release(out);
    CHECK(ctr(&CTR.rows_in) == 5 && ctr(&CTR.rows_out) == 2 && ctr(&CTR.filtered) == 2 && ctr(&CTR.dead) == 1);
    sc_batch *dead = NULL;
    sc_side_meta *meta = NULL;
    int64_t nd = 0;
    sc_side_take(base->side, &dead, &meta, &nd);
    CHECK(nd == 1 && meta && meta[0].row == 1 && meta[0].serial == 77 && meta[0].kind == SC_SIDE_DEAD);
    CHECK(meta && strncmp(meta[0].reason, "cannot cast", 11) == 0);
    CHECK(dead && sc_batch_get_i64(dead, 0, 0) == 1);
    sc_batch_release(dead);
    sc_side_meta_free(meta, nd);

    /* every row passes: the batch itself is forwarded */
    trow all[] = { { .s = "5" }, { .s = "6" } };
    in = mk(all, 2);
    CHECK(sc_op_filter_run(st, in, &out) == SC_OK);
    CHECK(out == in);
    sc_batch_release(out);
    /* none passes: no output */
    trow none[] = { { .s = "0" } };
    CHECK(sc_op_filter_run(st, mk(none, 1), &out) == SC_OK);
    CHECK(out == NULL);
    /* end of stream: forwarded */
    in = mk(none, 0);
    in->eos = 1;
    CHECK(sc_op_filter_run(st, in, &out) == SC_OK);
    CHECK(out == in);
    sc_batch_release(out);
    CHECK(ctr(&CTR.rows_in) == 8 && ctr(&CTR.rows_out) == 4 && ctr(&CTR.filtered) == 3);
    sc_op_filter_destroy(st);
}

static void test_project(void) {
    /* out: seq, pos, s (copied), x = i // j, y = cast(s, int) ** j */
    static const uint8_t olt[] = { SC_LT_INT, SC_LT_INT, SC_LT_STR, SC_LT_INT, SC_LT_INT };
    sc_schema os;
    sc_schema_init(&os, 5, olt);
    sc_op_base b;
    base_of(&b, &os);
    eb x = { .k = 0 };
    bin(&x, SC_E_FLOORDIV, SC_LT_INT, col(&x, I), col(&x, J));
    eb y = { .k = 0 };
    bin(&y, SC_E_POW, SC_LT_INT, cast(&y, SC_LT_INT, col(&y, S)), col(&y, J));
    const sc_enode *ex[] = { x.n, y.n };
    int32_t nn[] = { x.k, y.k };
    int32_t src[] = { 0, 1, S, -1, -2 };
    void *st = NULL;
    CHECK(sc_op_project_create(&st, &b, src, 5, ex, nn, 2) == SC_OK);
    sc_op_base_free(&b);
    sc_op_base *base = st;
    trow rows[] = { { .i = 7, .j = 2, .s = "3" }, { .i = 7, .j = -1, .s = "2" }, { .i = 1, .j = 0, .s = "x" },
                    { .i = -7, .j = 2, .s = "-2" }, { .nulls = "sj", .i = 4 } };
    sc_batch *in = mk(rows, 5), *out = NULL;
    CHECK(sc_op_project_run(st, in, &out) == SC_OK);
    CHECK(out && out->nrows == 3); /* row 1: 2 ** -1 fails; row 2: cast('x') fails */
    if (out) {
        CHECK(sc_batch_get_i64(out, 0, 0) == 0 && sc_batch_get_i64(out, 0, 1) == 3 && sc_batch_get_i64(out, 0, 2) == 4);
        CHECK(sc_batch_get_i64(out, 1, 1) == 103);
        CHECK(sc_batch_get_i64(out, 3, 0) == 3 && sc_batch_get_i64(out, 4, 0) == 9);
        CHECK(sc_batch_get_i64(out, 3, 1) == -4 && sc_batch_get_i64(out, 4, 1) == 4);
        int32_t len;
        CHECK(memcmp(sc_batch_get_utf8(out, 2, 1, &len), "-2", 2) == 0 && len == 2);
        CHECK(!sc_batch_is_valid(out, 2, 2) && !sc_batch_is_valid(out, 3, 2) && !sc_batch_is_valid(out, 4, 2));
        CHECK(out->cols[2].null_count == 1 && out->cols[3].null_count == 1);
    }
    sc_batch_release(out);
    CHECK(ctr(&CTR.rows_in) == 5 && ctr(&CTR.rows_out) == 3 && ctr(&CTR.dead) == 2 && ctr(&CTR.filtered) == 0);
    sc_batch *dead = NULL;
    sc_side_meta *meta = NULL;
    int64_t nd = 0;
    sc_side_take(base->side, &dead, &meta, &nd);
    CHECK(nd == 2 && meta[0].row == 1 && meta[1].row == 2);
    CHECK(strstr(meta[0].reason, "negative exponent") && strstr(meta[0].reason, "column 4"));
    CHECK(strncmp(meta[1].reason, "cannot cast value to int", 24) == 0);
    sc_batch_release(dead);
    sc_side_meta_free(meta, nd);
    /* every row dead: no output */
    trow bad[] = { { .s = "x", .j = 1 } };
    CHECK(sc_op_project_run(st, mk(bad, 1), &out) == SC_OK);
    CHECK(out == NULL);
    in = mk(bad, 0);
    in->eos = 1;
    CHECK(sc_op_project_run(st, in, &out) == SC_OK && out == in);
    sc_batch_release(out);
    sc_op_project_destroy(st);

    /* a mismatched output type is rejected and leaves the base to the caller */
    static const uint8_t wrong[] = { SC_LT_INT, SC_LT_INT, SC_LT_FLOAT };
    sc_schema ws;
    sc_schema_init(&ws, 3, wrong);
    base_of(&b, &ws);
    int32_t src2[] = { 0, 1, S };
    CHECK(sc_op_project_create(&st, &b, src2, 3, NULL, NULL, 0) == SC_EINVAL);
    sc_op_base_free(&b);
    sc_schema_free(&ws);
    sc_schema_free(&os);
}

/* ------------------------------------------------------------------- threads */

typedef struct tjob {
    const sc_expr *x;
    int ok;
} tjob;

static const trow TROWS[] = { { .f = 0.1, .s = "12" }, { .f = -2.5, .s = "Stra\xc3\x9f" "e" }, { .f = NAN, .nulls = "s" }, { .f = 1e16, .s = "x" } };

static void *worker(void *arg) {
    tjob *j = arg;
    static const char *want[] = { "0.1|12", "-2.5|STRASSE", NULL, "1e+16|X" };
    j->ok = 1;
    for (int it = 0; it < 1000; it++) {
        sc_batch *in = mk(TROWS, 4), *out = NULL;
        uint8_t lt = SC_LT_STR, err[4] = { 0 };
        sc_schema os;
        sc_schema_init(&os, 1, &lt);
        sc_batch_new(&out, &os, 4);
        sc_schema_free(&os);
        if (sc_expr_eval(j->x, in, out, 0, err) != SC_OK) j->ok = 0;
        for (int r = 0; r < 4; r++) {
            int32_t len;
            const char *g = sc_batch_get_utf8(out, 0, r, &len);
            if (!want[r]) {
                if (sc_batch_is_valid(out, 0, r)) j->ok = 0;
            } else if (len != (int32_t)strlen(want[r]) || memcmp(g, want[r], (size_t)len) != 0) {
                j->ok = 0;
            }
        }
        sc_batch_release(in);
        sc_batch_release(out);
    }
    return NULL;
}

static void test_threads(void) {
    /* cast(f, str) + "|" + upper(s) */
    eb e = { .k = 0 };
    int a = bin(&e, SC_E_ADD, SC_LT_STR, cast(&e, SC_LT_STR, col(&e, F)), lit_s(&e, "|"));
    bin(&e, SC_E_ADD, SC_LT_STR, a, un(&e, SC_E_STR_UPPER, SC_LT_STR, col(&e, S)));
    sc_expr *x = NULL;
    CHECK(sc_expr_create(&x, e.n, e.k, &SCHEMA) == SC_OK);
    pthread_t th[4];
    tjob jobs[4];
    for (int k = 0; k < 4; k++) {
        jobs[k] = (tjob){ x, 0 };
        pthread_create(&th[k], NULL, worker, &jobs[k]);
    }
    for (int k = 0; k < 4; k++) {
        pthread_join(th[k], NULL);
        CHECK(jobs[k].ok);
    }
    sc_expr_destroy(x);
}

int main(void) {
    sc_schema_init(&SCHEMA, NCOLS, LTS);
    test_int_arithmetic();
    test_float_arithmetic();
    test_float_pow();
    test_comparisons();
    test_logic();
    test_lazy_errors();
    test_mixed_int_float();
    test_cast_from_str();
    test_cast_to_str();
    test_cast_numeric_temporal();
    test_is_in();
    test_lists();
    test_abs_round();
    test_strings();
    test_datetime_fields();
    test_create_validation();
    test_udf();
    test_filter();
    test_project();
    test_threads();
    sc_schema_free(&SCHEMA);
    if (failures) {
        fprintf(stderr, "test_expr: %d check(s) failed\n", failures);
        return 1;
    }
    printf("test_expr: ok\n");
    return 0;
}
