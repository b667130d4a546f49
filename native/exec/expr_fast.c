/* expr_fast: the arithmetic and comparison kernels for the common case (contract in
 * expr_internal.h): numeric operands holding no Python ints in float vectors, either of
 * them possibly a literal read once (column op literal, literal op column), results
 * written straight into the output vector. Where both operands have no null row the result
 * shares the context's all-ones validity and no validity is computed at all, unless a
 * floor division or modulo by a column could give a null (a zero divisor).
 *
 * Semantics are the general kernels' in expr.c (evaluate.py): int results wrap, // and %
 * floor like Python and are null for a zero divisor, / is IEEE float division, and
 * comparisons order NaN above every number with NaN == NaN (the float forms below are that
 * order written branch-free: A < B, or B is NaN and A is not; A == B, or both are NaN).
 */
#include "expr_internal.h"

#include <string.h>

/* Loops over rows [0, n) with A = row r of a (or a's only value when sa) and B likewise for
 * b; BODY sees A, B and r. Never both scalars. */
#define ROWS2(TA, xa, sa, TB, xb, sb, BODY)                  \
    do {                                                     \
        if (sa) {                                            \
            const TA A = (xa)[0];                            \
            for (int64_t r = 0; r < n; r++) {                \
                const TB B = (xb)[r];                        \
                BODY;                                        \
            }                                                \
        } else if (sb) {                                     \
            const TB B = (xb)[0];                            \
            for (int64_t r = 0; r < n; r++) {                \
                const TA A = (xa)[r];                        \
                BODY;                                        \
            }                                                \
        } else {                                             \
            for (int64_t r = 0; r < n; r++) {                \
                const TA A = (xa)[r];                        \
                const TB B = (xb)[r];                        \
                BODY;                                        \
            }                                                \
        }                                                    \
    } while (0)

/* Whether every one of the n values is in [0, 2^32) (one pass, no branch per row). */
static bool below_2_32(const int64_t *x, int64_t n) {
    uint64_t high = 0;
    for (int64_t r = 0; r < n; r++) high |= (uint64_t)x[r];
    return (high >> 32) == 0;
}

/* a % d for a < 2^32 and 0 < d < 2^32, with m = 2^64 / d rounded up (Lemire, Kaser and Kurz,
 * "Faster Remainder by Direct Computation: Applications to Compilers and Software Libraries"). */
static inline uint64_t fastmod_u32(uint64_t m, uint64_t d, uint64_t a) {
    uint64_t low = m * a;
    return (uint64_t)(((__uint128_t)low * d) >> 64);
}

static inline bool numeric(uint8_t lt) { return lt == SC_LT_INT || lt == SC_LT_FLOAT; }
static inline bool int64ish(uint8_t lt) { return lt == SC_LT_INT || lt == SC_LT_DATETIME || lt == SC_LT_DATE; }

bool arith_fast_ok(const sc_enode *nd, const vec *a, const vec *b) {
    return nd->op != SC_E_POW && nd->lt != SC_LT_STR && numeric(a->lt) && numeric(b->lt) && !a->isint &&
           !b->isint && !(a->scalar && b->scalar);
}

bool cmp_fast_ok(const vec *a, const vec *b) {
    if (a->isint || b->isint || (a->scalar && b->scalar)) return false;
    if (a->lt == SC_LT_STR && b->lt == SC_LT_STR) return a->scalar || b->scalar; /* str op literal */
    bool fa = a->lt == SC_LT_FLOAT, fb = b->lt == SC_LT_FLOAT;
    return (fa || int64ish(a->lt)) && (fb || int64ish(b->lt)) && (fa || fb || a->lt == b->lt);
}

/* The output vector of a fast kernel: values uninitialized (every row is written), errors
 * as a strict binary node's, validity shared when nothing can be null. */
static int fast_out(ctx *c, vec *o, uint8_t lt, const vec *a, const vec *b, bool may_null) {
    int rc = vnew_raw(c, o, lt);
    if (!rc) rc = err_strict(c, o, a, b);
    if (rc) return rc;
    if (a->nonull && b->nonull && !o->err && !may_null) {
        o->ok = c->ones;
        o->nonull = true;
        return SC_OK;
    }
    if (!(o->ok = cx_alloc(c, (size_t)c->n))) return SC_ENOMEM;
    and_ok(c, o, a, b);
    return SC_OK;
}

/* ev_arith_fast's kernels, inlined into a build for the CPU's vector width (`wide`: AVX-512,
 * with int64 <-> double conversions in vectors and the 32-bit remainder in doubles) and a
 * baseline one. Both give the same bits: IEEE operations, rounded as written (the build
 * turns off contracting a multiply and an add into one rounding: -ffp-contract=off). */
static inline __attribute__((always_inline)) int arith_body(ctx *c, const sc_enode *nd, vec *o, const vec *a,
                                                            const vec *b, void *dest, bool wide) {
    const int64_t n = c->n;
    const int op = nd->op;
    const bool ints = a->lt == SC_LT_INT && b->lt == SC_LT_INT, sa = a->scalar, sb = b->scalar;
    const bool divides = op == SC_E_FLOORDIV || op == SC_E_MOD;
    /* a literal divisor that is not zero: // and % give no null */
    const double bs = b->lt == SC_LT_FLOAT ? b->f[0] : (double)b->i[0];
    const bool safe = !divides || (sb && (ints ? b->i[0] != 0 : bs != 0.0));
    int rc = fast_out(c, o, nd->lt, a, b, !safe);
    if (rc) return rc;
    if (dest && nd->lt == SC_LT_FLOAT) o->f = dest;
    else if (dest) o->i = dest;
    uint8_t *ok = o->ok; /* written only when !safe: then it is o's own */
    if (ints) {
        const int64_t *x = a->i, *y = b->i;
        int64_t *z = o->i;
        double *zf = o->f;
        switch (op) {
        case SC_E_ADD: ROWS2(int64_t, x, sa, int64_t, y, sb, z[r] = wadd(A, B)); break;
        case SC_E_SUB: ROWS2(int64_t, x, sa, int64_t, y, sb, z[r] = wsub(A, B)); break;
        case SC_E_MUL: ROWS2(int64_t, x, sa, int64_t, y, sb, z[r] = wmul(A, B)); break;
        case SC_E_DIV: ROWS2(int64_t, x, sa, int64_t, y, sb, zf[r] = (double)A / (double)B); break;
        case SC_E_FLOORDIV:
            if (safe) ROWS2(int64_t, x, sa, int64_t, y, sb, z[r] = ifloordiv(A, B));
            else ROWS2(int64_t, x, sa, int64_t, y, sb, {
                uint8_t k = ok[r] & (B != 0);
                ok[r] = k;
                z[r] = k ? ifloordiv(A, B) : 0;
            });
            break;
        case SC_E_MOD:
            if (safe && sb && y[0] > 0 && y[0] <= UINT32_MAX && below_2_32(x, n)) {
                /* every row in [0, 2^32): the 32-bit form, half the multiplies, no signs */
                if (wide) {
                    /* in doubles, every value below 2^53 so each step is exact but the
                     * quotient's product: q = a * (1/d) truncated (a floor: both are >= 0) is
                     * off by at most one, so a - q*d is in [-d, 2d), put right by one add or
                     * subtract (truncating by conversions: floor() stays scalar here) */
                    const double d = (double)y[0], inv = 1.0 / d;
                    for (int64_t r = 0; r < n; r++) {
                        double v = (double)x[r], m = v - (double)(int64_t)(v * inv) * d;
                        m += m < 0.0 ? d : 0.0;
                        m -= m >= d ? d : 0.0;
                        z[r] = (int64_t)m;
                    }
                } else {
                    const uint64_t m = UINT64_MAX / (uint64_t)y[0] + 1;
                    for (int64_t r = 0; r < n; r++) z[r] = (int64_t)fastmod_u32(m, (uint64_t)y[0], (uint64_t)x[r]);
                }
            } else if (safe && sb) { /* column % literal: no division per row */
                const sc_fastmod f = fastmod_init(y[0]);
                for (int64_t r = 0; r < n; r++) z[r] = fastmod(&f, x[r]);
            } else if (safe) ROWS2(int64_t, x, sa, int64_t, y, sb, z[r] = imod(A, B));
            else ROWS2(int64_t, x, sa, int64_t, y, sb, {
                uint8_t k = ok[r] & (B != 0);
                ok[r] = k;
                z[r] = k ? imod(A, B) : 0;
            });
            break;
        default: return SC_EINTERNAL;
        }
    } else if (!divides && (a->lt == SC_LT_INT) != (b->lt == SC_LT_INT) && !(a->lt == SC_LT_INT ? sa : sb)) {
        /* an int column with a float: each int converted (as Python does) in the same pass,
         * not into a scratch column first */
        double *z = o->f;
        if (a->lt == SC_LT_INT) {
            const int64_t *x = a->i;
            const double *y = sb ? &bs : b->f;
            switch (op) {
            case SC_E_ADD: ROWS2(int64_t, x, false, double, y, sb, z[r] = (double)A + B); break;
            case SC_E_SUB: ROWS2(int64_t, x, false, double, y, sb, z[r] = (double)A - B); break;
            case SC_E_MUL: ROWS2(int64_t, x, false, double, y, sb, z[r] = (double)A * B); break;
            case SC_E_DIV: ROWS2(int64_t, x, false, double, y, sb, z[r] = (double)A / B); break;
            default: return SC_EINTERNAL;
            }
        } else {
            double as = a->f[0];
            const double *x = sa ? &as : a->f;
            const int64_t *y = b->i;
            switch (op) {
            case SC_E_ADD: ROWS2(double, x, sa, int64_t, y, false, z[r] = A + (double)B); break;
            case SC_E_SUB: ROWS2(double, x, sa, int64_t, y, false, z[r] = A - (double)B); break;
            case SC_E_MUL: ROWS2(double, x, sa, int64_t, y, false, z[r] = A * (double)B); break;
            case SC_E_DIV: ROWS2(double, x, sa, int64_t, y, false, z[r] = A / (double)B); break;
            default: return SC_EINTERNAL;
            }
        }
    } else { /* int op float: the int converted, as Python does */
        double as = a->lt == SC_LT_FLOAT ? a->f[0] : (double)a->i[0];
        const double *x = sa ? &as : as_f64(c, a), *y = sb ? &bs : as_f64(c, b);
        double *z = o->f;
        if (!x || !y) return SC_ENOMEM;
        switch (op) {
        case SC_E_ADD: ROWS2(double, x, sa, double, y, sb, z[r] = A + B); break;
        case SC_E_SUB: ROWS2(double, x, sa, double, y, sb, z[r] = A - B); break;
        case SC_E_MUL: ROWS2(double, x, sa, double, y, sb, z[r] = A * B); break;
        case SC_E_DIV: ROWS2(double, x, sa, double, y, sb, z[r] = A / B); break;
        case SC_E_FLOORDIV:
            if (safe) ROWS2(double, x, sa, double, y, sb, z[r] = ffloordiv(A, B));
            else ROWS2(double, x, sa, double, y, sb, {
                uint8_t k = ok[r] & (B != 0.0);
                ok[r] = k;
                z[r] = k ? ffloordiv(A, B) : 0.0;
            });
            break;
        case SC_E_MOD:
            if (safe) ROWS2(double, x, sa, double, y, sb, z[r] = fmod_py(A, B));
            else ROWS2(double, x, sa, double, y, sb, {
                uint8_t k = ok[r] & (B != 0.0);
                ok[r] = k;
                z[r] = k ? fmod_py(A, B) : 0.0;
            });
            break;
        default: return SC_EINTERNAL;
        }
    }
    seal(c, o);
    return SC_OK;
}

static int arith_base(ctx *c, const sc_enode *nd, vec *o, const vec *a, const vec *b, void *dest) {
    return arith_body(c, nd, o, a, b, dest, false);
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx512f,avx512dq,avx512vl,avx512bw"))) static int arith_avx512(ctx *c, const sc_enode *nd,
                                                                                       vec *o, const vec *a,
                                                                                       const vec *b, void *dest) {
    return arith_body(c, nd, o, a, b, dest, true);
}
#endif

static bool use_avx512(void);

int ev_arith_fast(ctx *c, const sc_enode *nd, vec *o, const vec *a, const vec *b, void *dest) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (use_avx512()) return arith_avx512(c, nd, o, a, b, dest);
#endif
    return arith_base(c, nd, o, a, b, dest);
}

/* The six comparisons from an equality, a less-than and a greater-than expression in A, B. */
#define CMP6(TA, xa, TB, xb, EQX, LTX, GTX)                                    \
    switch (op) {                                                              \
    case SC_E_EQ: ROWS2(TA, xa, sa, TB, xb, sb, z[r] = (uint8_t)(EQX)); break;  \
    case SC_E_NE: ROWS2(TA, xa, sa, TB, xb, sb, z[r] = (uint8_t)!(EQX)); break; \
    case SC_E_LT: ROWS2(TA, xa, sa, TB, xb, sb, z[r] = (uint8_t)(LTX)); break;  \
    case SC_E_GE: ROWS2(TA, xa, sa, TB, xb, sb, z[r] = (uint8_t)!(LTX)); break; \
    case SC_E_GT: ROWS2(TA, xa, sa, TB, xb, sb, z[r] = (uint8_t)(GTX)); break;  \
    case SC_E_LE: ROWS2(TA, xa, sa, TB, xb, sb, z[r] = (uint8_t)!(GTX)); break; \
    default: return SC_EINTERNAL;                                              \
    }

/* A float column against a literal that is not NaN, as "column op literal", in plain IEEE
 * comparisons the compiler turns into vector compares (with AVX2; SSE2 has no packing of
 * the double masks into bytes it would use): with a number on one side, NaN's place above
 * every number reads as "A > L or A is NaN" == "not A <= L", and equality as IEEE equality. */
#define CMP_LITERAL_LOOPS                                                               \
    switch (op) {                                                                       \
    case SC_E_EQ: for (int64_t r = 0; r < n; r++) z[r] = x[r] == L; break;             \
    case SC_E_NE: for (int64_t r = 0; r < n; r++) z[r] = !(x[r] == L); break;          \
    case SC_E_LT: for (int64_t r = 0; r < n; r++) z[r] = x[r] < L; break;              \
    case SC_E_GE: for (int64_t r = 0; r < n; r++) z[r] = !(x[r] < L); break;           \
    case SC_E_GT: for (int64_t r = 0; r < n; r++) z[r] = !(x[r] <= L); break;          \
    case SC_E_LE: for (int64_t r = 0; r < n; r++) z[r] = x[r] <= L; break;             \
    default: return SC_EINTERNAL;                                                       \
    }                                                                                   \
    return SC_OK;

static int cmp_literal_base(int op, const double *x, double L, int64_t n, uint8_t *z) { CMP_LITERAL_LOOPS }

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) static int cmp_literal_avx2(int op, const double *x, double L, int64_t n,
                                                            uint8_t *z) {
    CMP_LITERAL_LOOPS
}
#endif

static int vectors_on = 1; /* sc_expr_fast_vectors */
static bool use_avx2(void) {
    return __atomic_load_n(&vectors_on, __ATOMIC_RELAXED) && (sc_cpu_flags() & SC_CPU_AVX2);
}

static bool use_avx512(void) {
    return __atomic_load_n(&vectors_on, __ATOMIC_RELAXED) && (sc_cpu_flags() & SC_CPU_AVX512DQ);
}

void sc_expr_fast_vectors(bool on) { __atomic_store_n(&vectors_on, on ? 1 : 0, __ATOMIC_RELAXED); }

/* ``flip``: the literal is on the left ("L op column"), turned around (the order is total). */
static int cmp_literal(int op, const double *x, double L, bool flip, int64_t n, uint8_t *z) {
    if (flip)
        op = op == SC_E_LT ? SC_E_GT : op == SC_E_GT ? SC_E_LT : op == SC_E_LE ? SC_E_GE : op == SC_E_GE ? SC_E_LE : op;
#if defined(__x86_64__) && defined(__GNUC__)
    if (use_avx2()) return cmp_literal_avx2(op, x, L, n, z);
#endif
    return cmp_literal_base(op, x, L, n, z);
}

int ev_cmp_fast(ctx *c, const sc_enode *nd, vec *o, const vec *a, const vec *b) {
    const int64_t n = c->n;
    const int op = nd->op;
    const bool sa = a->scalar, sb = b->scalar;
    int rc = fast_out(c, o, SC_LT_BOOL, a, b, false);
    if (rc) return rc;
    uint8_t *z = o->b;
    if (a->lt == SC_LT_STR) { /* bytewise (code point) order against one literal */
        const vec *v = sa ? b : a, *l = sa ? a : b;
        const char *L = l->s[0];
        const int32_t ll = l->sl[0];
        const int flip = sa ? -1 : 1; /* order of (a, b) from the order of (column, literal) */
        if (op == SC_E_EQ || op == SC_E_NE) {
            const uint8_t eq = op == SC_E_EQ;
            for (int64_t r = 0; r < n; r++)
                z[r] = (uint8_t)((v->sl[r] == ll && memcmp(v->s[r], L, (size_t)ll) == 0) == eq);
        } else {
            for (int64_t r = 0; r < n; r++) {
                int m = flip * cmp_str(v->s[r], v->sl[r], L, ll);
                z[r] = (uint8_t)(op == SC_E_LT ? m < 0 : op == SC_E_LE ? m <= 0 : op == SC_E_GT ? m > 0 : m >= 0);
            }
        }
        seal(c, o);
        return SC_OK;
    }
    const bool fa = a->lt == SC_LT_FLOAT, fb = b->lt == SC_LT_FLOAT;
    if (fa && fb && (sa || sb) && (sa ? a->f[0] == a->f[0] : b->f[0] == b->f[0])) {
        rc = cmp_literal(op, sa ? b->f : a->f, sa ? a->f[0] : b->f[0], sa, n, z);
        if (rc) return rc;
    } else if (fa && fb) {
        CMP6(double, a->f, double, b->f, (A == B) | ((A != A) & (B != B)), (A < B) | ((B != B) & (A == A)),
             (A > B) | ((A != A) & (B == B)));
    } else if (fb) {
        CMP6(int64_t, a->i, double, b->f, cmp_if(A, B) == 0, cmp_if(A, B) < 0, cmp_if(A, B) > 0);
    } else if (fa) {
        CMP6(double, a->f, int64_t, b->i, cmp_if(B, A) == 0, cmp_if(B, A) > 0, cmp_if(B, A) < 0);
    } else {
        CMP6(int64_t, a->i, int64_t, b->i, A == B, A < B, A > B);
    }
    seal(c, o);
    return SC_OK;
}
