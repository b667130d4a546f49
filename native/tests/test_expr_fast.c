// sources: exec/expr.c exec/expr_vec.c exec/expr_fast.c exec/expr_funcs.c exec/expr_compile.c exec/expr_compat_num.c exec/expr_compat_time.c exec/expr_compat_str.c exec/ops_filter_project.c exec/select.c exec/common.c runtime/batch.c runtime/ring.c exec/lists.c
/* test_expr_fast: the evaluator's fast paths (exec/expr_fast.c) and its scratch and
 * bitmap handling (exec/expr_vec.c), checked against a row-by-row oracle written here from
 * the reference semantics (kernel/streamcell/backends/evaluate.py):
 *
 * - every arithmetic op but ** and every comparison, for int / float / datetime / date
 *   operands, as column op column, column op literal and literal op column, with no null
 *   (the shared-validity path), with nulls, and with a null literal; batches whose length is
 *   not a multiple of 8 (the bitmap tails), edge values (0, -0.0, NaN, +-inf, INT64_MIN / -1,
 *   2**53 + 1 against a float);
 * - str against a str literal on either side (bytewise order, embedded NUL, non-ASCII);
 * - bool columns with nulls through not / and / or (bitmap <-> bytes both ways);
 * - writing into an output column that already holds nulls (null_count stays exact);
 * - one sc_expr over batches of changing sizes (its pooled scratch grows and is reused);
 * - filter / project over no-null inputs (forwarding, gathering, pass-through columns).
 */
#include "exec/expr.h"
#include "exec/expr_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

/* Columns: 0 seq, 1 pos, then I, J (int), F, G (float), T, U (datetime), D, E (date), B, C (bool),
 * S, R (str). */
enum { I = 2, J, F, G, T, U, D, E, B, C, S, R, NCOLS };
static const uint8_t LTS[NCOLS] = { SC_LT_INT,  SC_LT_INT,  SC_LT_INT,      SC_LT_INT,      SC_LT_FLOAT,
                                    SC_LT_FLOAT, SC_LT_DATETIME, SC_LT_DATETIME, SC_LT_DATE, SC_LT_DATE,
                                    SC_LT_BOOL, SC_LT_BOOL, SC_LT_STR, SC_LT_STR };
static sc_schema SCHEMA;

static const int64_t IV[] = { 0, 1, -1, 7, -7, 2, -3, INT64_MIN, INT64_MAX, 5, 9007199254740993, -2 };
static const double FV[] = { 0.0, -0.0, 1.5, -2.5, NAN, INFINITY, -INFINITY, 7.0, 3.0, 1e300, 9007199254740992.0, -1.0 };
static const char *SV[] = { "", "a", "ab", "abc", "b", "\xc3\xa9", "purchase", "view", "Ab", "a\0b" };
static const int32_t SL[] = { 0, 1, 2, 3, 1, 2, 8, 4, 2, 3 };
#define NIV 12
#define NFV 12
#define NSV 10

static uint64_t rng = 12345;
static uint64_t next(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* n rows of edge values; with nulls, about one row in 5 of every user column is null. */
static sc_batch *mk(int64_t n, bool nulls) {
    sc_batch *b = NULL;
    CHECK_RC(sc_batch_new(&b, &SCHEMA, n));
    for (int64_t r = 0; r < n; r++) {
        sc_batch_set_i64(b, 0, r, r);
        sc_batch_set_i64(b, 1, r, 0);
        sc_batch_set_i64(b, I, r, IV[next() % NIV]);
        sc_batch_set_i64(b, J, r, IV[next() % NIV]);
        sc_batch_set_f64(b, F, r, FV[next() % NFV]);
        sc_batch_set_f64(b, G, r, FV[next() % NFV]);
        sc_batch_set_i64(b, T, r, (int64_t)(next() % 5) - 2);
        sc_batch_set_i64(b, U, r, (int64_t)(next() % 5) - 2);
        sc_batch_set_i64(b, D, r, (int64_t)(next() % 3) - 1);
        sc_batch_set_i64(b, E, r, (int64_t)(next() % 3) - 1);
        sc_batch_set_bool(b, B, r, next() & 1);
        sc_batch_set_bool(b, C, r, next() & 1);
        for (int k = S; k <= R; k++) {
            int w = (int)(next() % NSV);
            CHECK_RC(sc_batch_put_utf8(b, k, r, SV[w], SL[w]));
        }
        for (int k = I; nulls && k < NCOLS; k++)
            if (next() % 5 == 0) sc_batch_set_null(b, k, r); /* str: the last row written, so offsets stay cumulative */
    }
    b->nrows = n;
    return b;
}

/* ---- the oracle: one Python value per row */

typedef struct pv {
    bool valid, isf;
    int64_t i;
    double f;
} pv;

static pv at(const sc_batch *b, int c, int64_t r) {
    pv v = { sc_batch_is_valid(b, c, r), false, 0, 0.0 };
    if (LTS[c] == SC_LT_FLOAT) {
        v.isf = true;
        v.f = sc_batch_get_f64(b, c, r);
    } else {
        v.i = sc_batch_get_i64(b, c, r);
    }
    return v;
}

static int64_t py_floordiv(int64_t a, int64_t b) {
    if (b == -1) return (int64_t)(0 - (uint64_t)a);
    int64_t q = a / b;
    if (a % b != 0 && ((a < 0) != (b < 0))) q--;
    return q;
}
static int64_t py_mod(int64_t a, int64_t b) {
    if (b == -1) return 0;
    int64_t m = a % b;
    if (m != 0 && ((m < 0) != (b < 0))) m += b;
    return m;
}
static double pyf_floordiv(double a, double b) {
    double q = a / b;
    return isfinite(q) ? floor(q) + 0.0 : q;
}
static double pyf_mod(double a, double b) {
    double m = fmod(a, b);
    if (m != 0.0) {
        if ((b < 0) != (m < 0)) m += b;
    } else {
        m = copysign(0.0, b);
    }
    return m;
}

static pv arith(int op, pv x, pv y) {
    pv z = { x.valid && y.valid, x.isf || y.isf || op == SC_E_DIV, 0, 0.0 };
    if (!z.valid) return z;
    if (!z.isf) {
        uint64_t a = (uint64_t)x.i, b = (uint64_t)y.i;
        switch (op) {
        case SC_E_ADD: z.i = (int64_t)(a + b); break;
        case SC_E_SUB: z.i = (int64_t)(a - b); break;
        case SC_E_MUL: z.i = (int64_t)(a * b); break;
        case SC_E_FLOORDIV:
            if (y.i == 0) z.valid = false;
            else z.i = py_floordiv(x.i, y.i);
            break;
        case SC_E_MOD:
            if (y.i == 0) z.valid = false;
            else z.i = py_mod(x.i, y.i);
            break;
        }
        return z;
    }
    double a = x.isf ? x.f : (double)x.i, b = y.isf ? y.f : (double)y.i;
    switch (op) {
    case SC_E_ADD: z.f = a + b; break;
    case SC_E_SUB: z.f = a - b; break;
    case SC_E_MUL: z.f = a * b; break;
    case SC_E_DIV: z.f = a / b; break;
    case SC_E_FLOORDIV:
        if (b == 0.0) z.valid = false;
        else z.f = pyf_floordiv(a, b);
        break;
    case SC_E_MOD:
        if (b == 0.0) z.valid = false;
        else z.f = pyf_mod(a, b);
        break;
    }
    return z;
}

/* Python's order of two numbers (int vs float exactly, via 64-bit-mantissa long double);
 * NaN above every number and equal to itself. */
static int order(pv x, pv y) {
    bool nx = x.isf && isnan(x.f), ny = y.isf && isnan(y.f);
    if (nx || ny) return (int)nx - (int)ny;
    long double a = x.isf ? (long double)x.f : (long double)x.i, b = y.isf ? (long double)y.f : (long double)y.i;
    return (a > b) - (a < b);
}

static pv compare(int op, pv x, pv y) {
    pv z = { x.valid && y.valid, false, 0, 0.0 };
    if (!z.valid) return z;
    int o = order(x, y);
    switch (op) {
    case SC_E_EQ: z.i = o == 0; break;
    case SC_E_NE: z.i = o != 0; break;
    case SC_E_LT: z.i = o < 0; break;
    case SC_E_LE: z.i = o <= 0; break;
    case SC_E_GT: z.i = o > 0; break;
    case SC_E_GE: z.i = o >= 0; break;
    }
    return z;
}

/* ---- expressions */

static sc_enode node(int op, int lt, int a, int b) {
    sc_enode n;
    memset(&n, 0, sizeof n);
    n.op = op;
    n.lt = (uint8_t)lt;
    n.a = a;
    n.b = b;
    n.c = -1;
    return n;
}
static sc_enode lit(pv v, int lt) {
    sc_enode n = node(SC_E_LIT, lt, -1, -1);
    n.is_null = !v.valid;
    n.i = v.i;
    n.f = v.f;
    return n;
}

/* Evaluate `nodes` over `in` into a fresh one-column batch of type lt. */
static sc_batch *eval(const sc_enode *nodes, int k, const sc_batch *in, int lt, uint8_t *err) {
    sc_expr *x = NULL;
    CHECK_RC(sc_expr_create(&x, nodes, k, &SCHEMA));
    uint8_t l = (uint8_t)lt;
    sc_schema os;
    sc_schema_init(&os, 1, &l);
    sc_batch *out = NULL;
    CHECK_RC(sc_batch_new(&out, &os, in->nrows));
    sc_schema_free(&os);
    memset(err, 0, (size_t)in->nrows);
    CHECK_RC(sc_expr_eval(x, in, out, 0, err));
    out->nrows = in->nrows;
    sc_expr_destroy(x);
    return out;
}

static int64_t checks;

static void expect(const sc_batch *out, const uint8_t *err, int64_t r, pv want, int lt, const char *what) {
    checks++;
    bool ok = !err[r] && sc_batch_is_valid(out, 0, r) == want.valid;
    if (ok && want.valid) {
        if (lt == SC_LT_FLOAT) {
            double g = sc_batch_get_f64(out, 0, r);
            ok = isnan(want.f) ? isnan(g) : (g == want.f && signbit(g) == signbit(want.f));
        } else if (lt == SC_LT_BOOL) {
            ok = sc_batch_get_bool(out, 0, r) == (want.i != 0);
        } else {
            ok = sc_batch_get_i64(out, 0, r) == want.i;
        }
    }
    if (!ok) {
        fprintf(stderr, "%s row %lld: want valid=%d i=%lld f=%g\n", what, (long long)r, want.valid,
                (long long)want.i, want.f);
        CHECK(ok);
    }
}

/* The output column's null_count is its count of null rows. */
static void null_count_exact(const sc_batch *out) {
    int64_t nulls = 0;
    for (int64_t r = 0; r < out->nrows; r++) nulls += !sc_batch_is_valid(out, 0, r);
    CHECK(out->cols[0].null_count == nulls);
}

static const int AOPS[] = { SC_E_ADD, SC_E_SUB, SC_E_MUL, SC_E_DIV, SC_E_FLOORDIV, SC_E_MOD };
static const int COPS[] = { SC_E_EQ, SC_E_NE, SC_E_LT, SC_E_LE, SC_E_GT, SC_E_GE };

/* a op b for every op, as col op col, col op literal (each literal) and literal op col. */
static void binary_shapes(int ca, int cb, bool cmp, const sc_batch *in) {
    int64_t n = in->nrows;
    uint8_t *err = malloc((size_t)n);
    int la = LTS[ca], lb = LTS[cb];
    for (int oi = 0; oi < 6; oi++) {
        int op = cmp ? COPS[oi] : AOPS[oi];
        int rt = cmp ? SC_LT_BOOL : (op == SC_E_DIV || la == SC_LT_FLOAT || lb == SC_LT_FLOAT ? SC_LT_FLOAT : SC_LT_INT);
        /* column op column */
        sc_enode cc[] = { node(SC_E_COL, la, ca, -1), node(SC_E_COL, lb, cb, -1), node(op, rt, 0, 1) };
        sc_batch *out = eval(cc, 3, in, rt, err);
        for (int64_t r = 0; r < n; r++) {
            pv x = at(in, ca, r), y = at(in, cb, r);
            expect(out, err, r, cmp ? compare(op, x, y) : arith(op, x, y), rt, "col op col");
        }
        null_count_exact(out);
        sc_batch_release(out);
        /* column op literal, literal op column; the literals: edge values and a typed null */
        int nl = (lb == SC_LT_FLOAT ? NFV : NIV) + 1;
        for (int k = 0; k < nl; k++) {
            pv L = { k < nl - 1, lb == SC_LT_FLOAT, 0, 0.0 };
            if (L.valid && L.isf) L.f = FV[k];
            if (L.valid && !L.isf) L.i = lb == SC_LT_INT ? IV[k] : (int64_t)k % 5 - 2;
            sc_enode cl[] = { node(SC_E_COL, la, ca, -1), lit(L, lb), node(op, rt, 0, 1) };
            out = eval(cl, 3, in, rt, err);
            for (int64_t r = 0; r < n; r++) {
                pv x = at(in, ca, r);
                expect(out, err, r, cmp ? compare(op, x, L) : arith(op, x, L), rt, "col op lit");
            }
            null_count_exact(out);
            sc_batch_release(out);
            pv M = L;
            M.isf = la == SC_LT_FLOAT;
            if (M.valid) {
                if (M.isf) M.f = FV[k % NFV];
                else M.i = la == SC_LT_INT ? IV[k % NIV] : (int64_t)k % 5 - 2;
            }
            sc_enode lc[] = { lit(M, la), node(SC_E_COL, lb, cb, -1), node(op, rt, 0, 1) };
            out = eval(lc, 3, in, rt, err);
            for (int64_t r = 0; r < n; r++) {
                pv y = at(in, cb, r);
                expect(out, err, r, cmp ? compare(op, M, y) : arith(op, M, y), rt, "lit op col");
            }
            null_count_exact(out);
            sc_batch_release(out);
        }
    }
    free(err);
}

static void test_arith_and_compare(void) {
    static const int64_t sizes[] = { 77, 8, 1, 300 };
    for (int s = 0; s < 4; s++)
        for (int nulls = 0; nulls < 2; nulls++) {
            sc_batch *in = mk(sizes[s], nulls);
            binary_shapes(I, J, false, in);
            binary_shapes(F, G, false, in);
            binary_shapes(I, G, false, in);
            binary_shapes(F, J, false, in);
            binary_shapes(I, J, true, in);
            binary_shapes(F, G, true, in);
            binary_shapes(I, G, true, in);
            binary_shapes(F, J, true, in);
            binary_shapes(T, U, true, in);
            binary_shapes(D, E, true, in);
            sc_batch_release(in);
        }
}

/* str op str literal (and literal op str, and str op str, the general path): bytewise order. */
static void test_strings(void) {
    for (int nulls = 0; nulls < 2; nulls++) {
        sc_batch *in = mk(77, nulls);
        uint8_t err[77];
        for (int oi = 0; oi < 6; oi++) {
            int op = COPS[oi];
            for (int k = 0; k <= NSV; k++) { /* k == NSV: a null literal */
                for (int side = 0; side < 3; side++) {
                    sc_enode l = node(SC_E_LIT, SC_LT_STR, -1, -1);
                    l.is_null = k == NSV;
                    l.s = k < NSV ? SV[k] : NULL;
                    l.slen = k < NSV ? SL[k] : 0;
                    sc_enode cs = node(SC_E_COL, SC_LT_STR, S, -1), cr = node(SC_E_COL, SC_LT_STR, R, -1);
                    sc_enode nd[] = { side == 1 ? l : cs, side == 0 ? l : side == 1 ? cs : cr, node(op, SC_LT_BOOL, 0, 1) };
                    sc_batch *out = eval(nd, 3, in, SC_LT_BOOL, err);
                    for (int64_t r = 0; r < 77; r++) {
                        bool vs = sc_batch_is_valid(in, S, r), vr = sc_batch_is_valid(in, R, r);
                        int32_t ls, lr;
                        const char *ps = sc_batch_get_utf8(in, S, r, &ls), *pr = sc_batch_get_utf8(in, R, r, &lr);
                        const char *x = ps, *y = side == 2 ? pr : SV[k % NSV];
                        int32_t lx = ls, ly = side == 2 ? lr : SL[k % NSV];
                        bool valid = vs && (side == 2 ? vr : k < NSV);
                        if (side == 1) { /* literal op column */
                            const char *t = x;
                            x = y;
                            y = t;
                            int32_t tl = lx;
                            lx = ly;
                            ly = tl;
                        }
                        int m = memcmp(x, y, (size_t)(lx < ly ? lx : ly));
                        int o = m ? (m < 0 ? -1 : 1) : (lx > ly) - (lx < ly);
                        pv z = { valid, false, 0, 0.0 };
                        z.i = op == SC_E_EQ ? o == 0 : op == SC_E_NE ? o != 0 : op == SC_E_LT ? o < 0
                            : op == SC_E_LE ? o <= 0 : op == SC_E_GT ? o > 0 : o >= 0;
                        expect(out, err, r, z, SC_LT_BOOL, "str");
                    }
                    null_count_exact(out);
                    sc_batch_release(out);
                }
            }
        }
        sc_batch_release(in);
    }
}

/* A fast node feeding a general one, and the other way round: (i % 7 + 0.5) * f > g. */
static void test_mixed_chain(void) {
    sc_batch *in = mk(77, true);
    uint8_t err[77];
    pv seven = { true, false, 7, 0.0 }, half = { true, true, 0, 0.5 };
    sc_enode nd[] = { node(SC_E_COL, SC_LT_INT, I, -1),    lit(seven, SC_LT_INT),
                      node(SC_E_MOD, SC_LT_INT, 0, 1),     lit(half, SC_LT_FLOAT),
                      node(SC_E_ADD, SC_LT_FLOAT, 2, 3),   node(SC_E_COL, SC_LT_FLOAT, F, -1),
                      node(SC_E_MUL, SC_LT_FLOAT, 4, 5),   node(SC_E_COL, SC_LT_FLOAT, G, -1),
                      node(SC_E_GT, SC_LT_BOOL, 6, 7),     node(SC_E_NOT, SC_LT_BOOL, 8, -1) };
    sc_batch *out = eval(nd, 10, in, SC_LT_BOOL, err);
    for (int64_t r = 0; r < 77; r++) {
        pv x = arith(SC_E_MUL, arith(SC_E_ADD, arith(SC_E_MOD, at(in, I, r), seven), half), at(in, F, r));
        pv z = compare(SC_E_GT, x, at(in, G, r));
        z.i = !z.i;
        expect(out, err, r, z, SC_LT_BOOL, "chain");
    }
    null_count_exact(out);
    sc_batch_release(out);
    sc_batch_release(in);
}

/* Bool columns with and without nulls (bitmaps unpacked and packed at odd lengths). */
static void test_bools(void) {
    for (int nulls = 0; nulls < 2; nulls++) {
        sc_batch *in = mk(77, nulls);
        uint8_t err[77];
        for (int op = SC_E_AND; op <= SC_E_OR; op++) {
            sc_enode nd[] = { node(SC_E_COL, SC_LT_BOOL, B, -1), node(SC_E_COL, SC_LT_BOOL, C, -1),
                              node(op, SC_LT_BOOL, 0, 1) };
            sc_batch *out = eval(nd, 3, in, SC_LT_BOOL, err);
            for (int64_t r = 0; r < 77; r++) {
                bool va = sc_batch_is_valid(in, B, r), vb = sc_batch_is_valid(in, C, r);
                bool a = va && sc_batch_get_bool(in, B, r), b = vb && sc_batch_get_bool(in, C, r);
                pv z = { false, false, 0, 0.0 };
                if (op == SC_E_AND) { /* Kleene */
                    if ((va && !a) || (vb && !b)) z = (pv){ true, false, 0, 0.0 };
                    else if (va && vb) z = (pv){ true, false, 1, 0.0 };
                } else {
                    if ((va && a) || (vb && b)) z = (pv){ true, false, 1, 0.0 };
                    else if (va && vb) z = (pv){ true, false, 0, 0.0 };
                }
                expect(out, err, r, z, SC_LT_BOOL, op == SC_E_AND ? "and" : "or");
            }
            null_count_exact(out);
            sc_batch_release(out);
        }
        sc_enode nt[] = { node(SC_E_COL, SC_LT_BOOL, B, -1), node(SC_E_NOT, SC_LT_BOOL, 0, -1) };
        sc_batch *out = eval(nt, 2, in, SC_LT_BOOL, err);
        for (int64_t r = 0; r < 77; r++) {
            pv z = { sc_batch_is_valid(in, B, r), false, !sc_batch_get_bool(in, B, r), 0.0 };
            expect(out, err, r, z, SC_LT_BOOL, "not");
        }
        sc_batch_release(out);
        sc_batch_release(in);
    }
}

/* Writing over an output column that holds nulls: validity and null_count follow the new
 * values, rows past the batch keep theirs. And one expression over batches of changing
 * sizes: its pooled scratch grows and is reused. */
static void test_rewrite_and_reuse(void) {
    sc_enode nd[] = { node(SC_E_COL, SC_LT_INT, I, -1), node(SC_E_COL, SC_LT_INT, J, -1),
                      node(SC_E_ADD, SC_LT_INT, 0, 1) };
    sc_expr *x = NULL;
    CHECK_RC(sc_expr_create(&x, nd, 3, &SCHEMA));
    uint8_t l = SC_LT_INT;
    sc_schema os;
    sc_schema_init(&os, 1, &l);
    sc_batch *out = NULL;
    CHECK_RC(sc_batch_new(&out, &os, 1000));
    sc_schema_free(&os);
    uint8_t err[1000];
    sc_batch_set_null(out, 0, 995); /* beyond every batch below: stays null */
    static const int64_t sizes[] = { 77, 300, 5, 1000 - 8, 77, 3 };
    for (int s = 0; s < 6; s++)
        for (int nulls = 1; nulls >= 0; nulls--) {
            sc_batch *in = mk(sizes[s], nulls);
            memset(err, 0, sizeof err);
            CHECK_RC(sc_expr_eval(x, in, out, 0, err));
            int64_t bad = 0, nullrows = 0;
            for (int64_t r = 0; r < in->nrows; r++) {
                pv z = arith(SC_E_ADD, at(in, I, r), at(in, J, r));
                bad += sc_batch_is_valid(out, 0, r) != z.valid || (z.valid && sc_batch_get_i64(out, 0, r) != z.i);
            }
            for (int64_t r = 0; r < 1000; r++) nullrows += !sc_batch_is_valid(out, 0, r);
            CHECK(bad == 0);
            CHECK(!sc_batch_is_valid(out, 0, 995));
            CHECK(out->cols[0].null_count == nullrows);
            sc_batch_release(in);
        }
    sc_batch_release(out);
    sc_expr_destroy(x);
}

static sc_step_counters CTR;

static void base_of(sc_op_base *b, const sc_schema *out) {
    memset(&CTR, 0, sizeof CTR);
    CHECK_RC(sc_op_base_init(b, 0, true, true, &CTR, &SCHEMA, out, 64, true));
}

/* Filter on a no-null predicate (the values are the keep mask), then project a literal
 * arithmetic and a comparison beside passed-through columns. */
static void test_operators(void) {
    sc_op_base b;
    base_of(&b, &SCHEMA);
    pv two = { true, true, 0, 2.0 };
    sc_enode pred[] = { node(SC_E_COL, SC_LT_FLOAT, F, -1), lit(two, SC_LT_FLOAT), node(SC_E_GT, SC_LT_BOOL, 0, 1) };
    void *f = NULL;
    CHECK_RC(sc_op_filter_create(&f, &b, pred, 3));
    sc_op_base_free(&b);
    for (int nulls = 0; nulls < 2; nulls++) {
        sc_batch *in = mk(77, nulls), *keep = NULL, *out = NULL;
        CHECK_RC(sc_batch_clone(&keep, in));
        CHECK_RC(sc_op_filter_run(f, in, &out));
        int64_t j = 0;
        for (int64_t r = 0; r < 77; r++) {
            pv v = compare(SC_E_GT, at(keep, F, r), two);
            if (!(v.valid && v.i)) continue;
            CHECK(out && j < out->nrows && sc_batch_get_i64(out, 0, j) == r);
            j++;
        }
        CHECK((out ? out->nrows : 0) == j);
        sc_batch_release_chain(out);
        sc_batch_release(keep);
    }
    /* every row passes: forwarded */
    pv big = { true, true, 0, -INFINITY };
    sc_enode all[] = { node(SC_E_COL, SC_LT_INT, I, -1), lit(big, SC_LT_FLOAT), node(SC_E_GT, SC_LT_BOOL, 0, 1) };
    sc_op_filter_destroy(f);
    base_of(&b, &SCHEMA);
    CHECK_RC(sc_op_filter_create(&f, &b, all, 3));
    sc_op_base_free(&b);
    sc_batch *in = mk(77, false), *out = NULL;
    CHECK_RC(sc_op_filter_run(f, in, &out));
    CHECK(out == in);
    sc_batch_release(out);
    sc_op_filter_destroy(f);

    /* project: seq, pos, i, x = i * 3 // 2 (int literal), y = f < g */
    static const uint8_t olt[] = { SC_LT_INT, SC_LT_INT, SC_LT_INT, SC_LT_INT, SC_LT_BOOL };
    sc_schema os;
    sc_schema_init(&os, 5, olt);
    base_of(&b, &os);
    pv three = { true, false, 3, 0.0 }, dtwo = { true, false, 2, 0.0 };
    sc_enode x[] = { node(SC_E_COL, SC_LT_INT, I, -1), lit(three, SC_LT_INT), node(SC_E_MUL, SC_LT_INT, 0, 1),
                     lit(dtwo, SC_LT_INT), node(SC_E_FLOORDIV, SC_LT_INT, 2, 3) };
    sc_enode y[] = { node(SC_E_COL, SC_LT_FLOAT, F, -1), node(SC_E_COL, SC_LT_FLOAT, G, -1),
                     node(SC_E_LT, SC_LT_BOOL, 0, 1) };
    const sc_enode *ex[] = { x, y };
    int32_t nn[] = { 5, 3 }, src[] = { 0, 1, I, -1, -2 };
    void *p = NULL;
    CHECK_RC(sc_op_project_create(&p, &b, src, 5, ex, nn, 2));
    sc_op_base_free(&b);
    for (int nulls = 0; nulls < 2; nulls++) {
        sc_batch *pin = mk(77, nulls), *ref = NULL, *o = NULL;
        CHECK_RC(sc_batch_clone(&ref, pin));
        CHECK_RC(sc_op_project_run(p, pin, &o));
        CHECK(o && o->nrows == 77);
        for (int64_t r = 0; o && r < 77; r++) {
            pv wx = arith(SC_E_FLOORDIV, arith(SC_E_MUL, at(ref, I, r), three), dtwo);
            pv wy = compare(SC_E_LT, at(ref, F, r), at(ref, G, r));
            CHECK(sc_batch_is_valid(o, 3, r) == wx.valid && (!wx.valid || sc_batch_get_i64(o, 3, r) == wx.i));
            CHECK(sc_batch_is_valid(o, 4, r) == wy.valid && (!wy.valid || sc_batch_get_bool(o, 4, r) == (wy.i != 0)));
            CHECK(sc_batch_is_valid(o, 2, r) == sc_batch_is_valid(ref, I, r));
        }
        if (o) CHECK(o->cols[2].null_count == ref->cols[I].null_count);
        sc_batch_release(o);
        sc_batch_release(ref);
    }
    CHECK(sc_u64_load_relaxed(&CTR.dead) == 0 && sc_u64_load_relaxed(&CTR.rows_out) == 2 * 77);
    sc_op_project_destroy(p);
    sc_schema_free(&os);
}

/* column % literal divides by multiplying (fastmod): equal to imod (Python's floor modulo)
 * for every sign, the extremes and random operands */
static void test_fastmod(void) {
    const int64_t edge[] = { 0, 1, -1, 2, -2, 3, -3, 7, -7, 10, -10, 1000003, -1000003, INT32_MAX,
                             (int64_t)INT32_MIN, INT64_MAX, INT64_MIN, INT64_MAX - 1, INT64_MIN + 1,
                             (int64_t)1 << 62, -((int64_t)1 << 62), ((int64_t)1 << 53) + 1 };
    const size_t ne = sizeof edge / sizeof edge[0];
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < ne + 64; i++) {
        int64_t d = i < ne ? edge[i] : (int64_t)(s = s * 6364136223846793005ull + 1442695040888963407ull);
        if (i >= ne && i % 3 == 0) d >>= (i % 61); /* small divisors too */
        if (d == 0) continue;
        const sc_fastmod f = fastmod_init(d);
        for (size_t j = 0; j < ne + 256; j++) {
            int64_t a = j < ne ? edge[j] : (int64_t)(s = s * 6364136223846793005ull + 1442695040888963407ull);
            if (j >= ne && j % 2) a >>= (j % 63);
            CHECK(fastmod(&f, a) == imod(a, d));
            checks++;
        }
    }
}

/* column % literal over batches whose every value is in [0, 2^32) (the 32-bit remainder),
 * with divisors from 1 to 2^32 - 1 and those outside it (2^32, negative: the 64-bit form),
 * and batches one value of which leaves the range (2^32, -1): Python's floor modulo each. */
static void test_mod_small_ints(void) {
    const int64_t divisors[] = { 1, 2, 7, 10, 1000003, INT32_MAX, (int64_t)1 << 31, UINT32_MAX,
                                 (int64_t)1 << 32, -7, -((int64_t)1 << 31) };
    const int64_t outside[] = { 0, (int64_t)1 << 32, -1 }; /* 0: every value in range */
    uint64_t s = 0x2545f4914f6cdd1dull;
    uint8_t *err = malloc(1000);
    for (size_t o = 0; o < sizeof outside / sizeof outside[0]; o++)
        for (int64_t n = 1; n <= 1000; n += 333) {
            sc_batch *in = mk(n, false);
            for (int64_t r = 0; r < n; r++) {
                s = s * 6364136223846793005ull + 1442695040888963407ull;
                int64_t v = r % 5 == 0 ? (int64_t)UINT32_MAX - r % 3 : (int64_t)((s >> 17) & UINT32_MAX);
                sc_batch_set_i64(in, I, r, r == n / 2 && outside[o] ? outside[o] : v);
            }
            for (size_t k = 0; k < sizeof divisors / sizeof divisors[0]; k++) {
                pv L = { true, false, divisors[k], 0.0 };
                sc_enode cl[] = { node(SC_E_COL, SC_LT_INT, I, -1), lit(L, SC_LT_INT),
                                  node(SC_E_MOD, SC_LT_INT, 0, 1) };
                sc_batch *out = eval(cl, 3, in, SC_LT_INT, err);
                for (int64_t r = 0; r < n; r++)
                    expect(out, err, r, arith(SC_E_MOD, at(in, I, r), L), SC_LT_INT, "small % lit");
                sc_batch_release(out);
            }
            sc_batch_release(in);
        }
    free(err);
}

/* column % literal at and beside the multiples of each divisor (k*d - 1, k*d, k*d + 1 for the
 * largest k below 2^32 and for others spread over the range), where a quotient off by one is
 * put right: every row in [0, 2^32), so the 32-bit (or, with AVX-512, the double) form runs. */
static void test_mod_multiples(void) {
    const int64_t divisors[] = { 1, 3, 7, 1000003, (int64_t)1 << 31, (int64_t)1 << 31 | 1, UINT32_MAX - 1,
                                 UINT32_MAX };
    enum { ROWS = 3 * 64 };
    uint8_t err[ROWS];
    for (size_t k = 0; k < sizeof divisors / sizeof divisors[0]; k++) {
        int64_t d = divisors[k], qmax = (int64_t)UINT32_MAX / d;
        sc_batch *in = mk(ROWS, false);
        for (int64_t j = 0; j < ROWS / 3; j++) {
            int64_t q = qmax - (qmax * j) / (ROWS / 3 - 1); /* from the largest multiple down to 0 */
            for (int64_t e = -1; e <= 1; e++) {
                int64_t v = q * d + e;
                if (v < 0) v = 0;
                if (v > (int64_t)UINT32_MAX) v = UINT32_MAX;
                sc_batch_set_i64(in, I, 3 * j + e + 1, v);
            }
        }
        pv L = { true, false, d, 0.0 };
        sc_enode cl[] = { node(SC_E_COL, SC_LT_INT, I, -1), lit(L, SC_LT_INT), node(SC_E_MOD, SC_LT_INT, 0, 1) };
        sc_batch *out = eval(cl, 3, in, SC_LT_INT, err);
        for (int64_t r = 0; r < ROWS; r++) expect(out, err, r, arith(SC_E_MOD, at(in, I, r), L), SC_LT_INT, "multiple % lit");
        sc_batch_release(out);
        sc_batch_release(in);
    }
}

int main(void) {
    sc_schema_init(&SCHEMA, NCOLS, LTS);
    test_fastmod();
    test_mod_small_ints();
    test_mod_multiples();
    test_arith_and_compare();
    sc_expr_fast_vectors(false); /* the scalar forms of the kernels the CPU runs in vectors */
    test_mod_small_ints();
    test_mod_multiples();
    test_arith_and_compare();
    sc_expr_fast_vectors(true);
    test_strings();
    test_mixed_chain();
    test_bools();
    test_rewrite_and_reuse();
    test_operators();
    sc_schema_free(&SCHEMA);
    printf("test_expr_fast: ok (%lld row checks)\n", (long long)checks);
    return 0;
}
