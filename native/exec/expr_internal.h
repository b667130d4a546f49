/* expr_internal: what the files of the expression evaluator share (not a public header).
 *
 *   expr_vec.c          scratch arenas and their pools, vectors, Arrow bitmaps <-> bytes
 *   expr.c              leaves, arithmetic, comparisons, logic; evaluation
 *   expr_fast.c         arithmetic and comparisons for column op literal and no-null inputs
 *   expr_funcs.c        casts and functions (is_in, abs, round, str.*, dt.*, user functions)
 *   expr_compile.c      type checking and compilation (sc_expr_create)
 *   expr_compat_num.c   Python / Polars numbers: float pow, int() / float() of text, number
 *                       formatting, round
 *   expr_compat_time.c  Python dates: calendar, str(date / datetime), fromisoformat
 *   expr_compat_str.c   Python str over UTF-8: code points, strip, case mappings, digits
 *   ops_filter_project.c  the filter and project operators
 *
 * Everything declared here has hidden visibility: it is internal to the extension.
 */
#ifndef SC_EXEC_EXPR_INTERNAL_H
#define SC_EXEC_EXPR_INTERNAL_H

#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "expr.h"

#pragma GCC visibility push(hidden)

/* ------------------------------------------------------------------ vectors and scratch */

enum { ERR_POW = 1, ERR_LISTCMP = 2, ERR_CAST = 8 /* + target sc_ltype */ };

typedef struct vec {
    uint8_t lt;       /* sc_ltype of the node */
    uint8_t *ok;      /* 1 = valid */
    uint8_t *err;     /* error code (ERR_*), 0 = none; NULL when no row failed */
    int64_t *i;       /* INT, DATETIME (us), DATE (days), NULL; FLOAT: the ints of isint rows */
    double *f;        /* FLOAT (isint rows: float of the int) */
    uint8_t *b;       /* BOOL, 0 / 1 */
    const char **s;   /* STR: bytes of row r (never NULL) */
    int32_t *sl;      /* STR: byte length of row r */
    uint8_t *isint;   /* FLOAT: 1 where the row holds a Python int; NULL when none does;
                       * list[float]: 1 where the row's list holds list[int] encoded values */
    bool nonull;      /* every row valid and none failed: ok is the context's shared ones */
    bool scalar;      /* a literal: row 0 of the value arrays holds every row's value (ok is
                       * full length); v_broadcast makes it an ordinary vector */
} vec;

/* List vectors (lt >= SC_LT_LIST) hold each row's encoded list (lists.h) in s / sl. */
static inline bool is_strlike(uint8_t lt) { return lt == SC_LT_STR || sc_ltype_is_list(lt); }

/* An evaluation context: the rows of the batch and the scratch of one call (expr_vec.c). */
typedef struct ctx {
    int64_t n;               /* rows */
    char *arena;             /* bump-allocated block, reused across batches */
    size_t cap, used, need;  /* need: what this batch asked for (the block grows to it) */
    void **blk;              /* malloc'd blocks freed at the next reset (overflow, builders) */
    size_t nblk, bcap;
    uint8_t *ones, *zeros;   /* nfixed bytes of 1 / 0: shared, read-only validity */
    int64_t nfixed;
    void *dest;              /* eval_into: the output column's int64 / double values, which a
                              * fast root node writes directly (NULL: none) */
    struct ctx *next;        /* free list of a cx_pool */
} ctx;

/* Contexts for reuse, one taken per call (thread-safe; a mutex around a free list). */
typedef struct cx_pool {
    pthread_mutex_t mu;
    ctx *free;
} cx_pool;

extern const char EMPTY[1]; /* the bytes of an empty or null string row */

/* The compiled form. */
struct sc_expr {
    int32_t n;
    sc_enode *nodes; /* copies; literal strings and lists are owned copies too */
    cx_pool pool;    /* contexts of sc_expr_eval */
};

/* ---- scratch (expr_vec.c): allocations live until the context is given back */
void *cx_alloc(ctx *c, size_t bytes);  /* from the arena, 64-byte aligned */
void *cx_zalloc(ctx *c, size_t bytes); /* zeroed */
void *cx_malloc(ctx *c, size_t bytes); /* a block of its own (may be realloc'd: sbld) */
/* Set the row count (and the shared ones / zeros for it). */
int cx_begin(ctx *c, int64_t n);
void cx_free(ctx *c);
void cx_pool_init(cx_pool *p);
void cx_pool_destroy(cx_pool *p);
/* A context for n rows (NULL: out of memory); give it back when the call is done. */
ctx *cx_take(cx_pool *p, int64_t n);
void cx_give(cx_pool *p, ctx *c);

/* ---- Arrow bitmaps (LSB first) <-> one byte per row */
void bits_to_bytes(const uint8_t *bm, int64_t n, uint8_t *out);
/* bm bits [0, n) = v[r] != 0 (bits from n on kept). */
void bytes_to_bits(const uint8_t *v, int64_t n, uint8_t *bm);
/* bm bits [0, n) = v[r] != 0 && m[r] != 0 (bits from n on kept). */
void bytes_and_to_bits(const uint8_t *v, const uint8_t *m, int64_t n, uint8_t *bm);
/* Set bits [0, n). */
void bits_fill(uint8_t *bm, int64_t n);

/* ---- vectors */
/* A fresh vector of type lt: values zeroed (strings empty), validity and errors unset. */
int vnew(ctx *c, vec *v, uint8_t lt);
/* The same without validity (the caller sets ok) and with values not initialized (the
 * caller writes every row). */
int vnew_raw(ctx *c, vec *v, uint8_t lt);
/* A scalar made a full vector (no-op for others). */
int v_broadcast(ctx *c, vec *v);
/* Give a FLOAT vector room for int rows. */
int v_mixed(ctx *c, vec *v);
static inline void set_int_row(vec *v, int64_t r, int64_t x) {
    v->isint[r] = 1;
    v->i[r] = x;
    v->f[r] = (double)x;
}
int err_alloc(ctx *c, vec *v);
static inline void fail_row(vec *v, int64_t r, uint8_t code) {
    v->ok[r] = 0;
    if (!v->err[r]) v->err[r] = code;
}
/* Errors of a one-operand node: the operand's. */
int err_unary(ctx *c, vec *o, const vec *a);
/* Errors of a strict two-operand node: a's, then b's where a is valid. */
int err_strict(ctx *c, vec *o, const vec *a, const vec *b);
/* A failed row is never valid. */
void seal(const ctx *c, vec *o);
/* o->ok = a->ok & b->ok (b may be NULL). */
void and_ok(const ctx *c, vec *o, const vec *a, const vec *b);
/* The vector's values as doubles (ints converted, as Python's float(int)). */
const double *as_f64(ctx *c, const vec *v);
/* The vector's values as int64 (bools widened). */
const int64_t *as_i64(ctx *c, const vec *v);
/* The element type of row r of a list vector (rows with int leaves in a vector with float
 * leaves: the same type with an INT leaf, which is one less). */
static inline uint8_t elem_type(const vec *v, int64_t r) {
    return (uint8_t)(v->lt - SC_LT_LIST - (v->isint && v->isint[r] ? 1 : 0));
}

/* ---- string builder: strings of a new STR vector, appended row by row into one buffer
 * owned by the scratch */
typedef struct sbld {
    ctx *c;
    size_t slot; /* the buffer's block in c */
    char *p;
    size_t len, cap;
    size_t *at; /* row -> start offset (SIZE_MAX: not written) */
} sbld;
int sb_open(ctx *c, sbld *b, size_t guess);
int sb_room(sbld *b, size_t extra);
int sb_add(sbld *b, const char *s, size_t n);
static inline void sb_begin(sbld *b, int64_t r) { b->at[r] = b->len; }
int sb_end(sbld *b, vec *o, int64_t r);
/* Point the vector's rows at the finished buffer. */
void sb_close(sbld *b, vec *o);

/* ---- evaluation (expr.c) */
/* Evaluate every node over `in` (c begun for in->nrows); *root is the last node's vector,
 * never a scalar (scratch in c). */
int eval_all(const sc_expr *e, const sc_batch *in, ctx *c, vec **root);
/* Evaluate into out[col]; codes[r] = the row's first error code (ERR_*), left if set.
 * *failed is set when some row failed (codes untouched otherwise). */
int eval_into(const sc_expr *e, const sc_batch *in, sc_batch *out, int32_t col, ctx *c, uint8_t *codes,
              bool *failed);

/* ---- fast kernels (expr_fast.c): numeric operands without Python ints in float vectors,
 * at most one of them a scalar; the general kernels in expr.c handle the rest. */
bool arith_fast_ok(const sc_enode *nd, const vec *a, const vec *b);
/* dest: where to write the values (the output column of a root node), or NULL. */
int ev_arith_fast(ctx *c, const sc_enode *nd, vec *o, const vec *a, const vec *b, void *dest);
/* Tests: the comparison kernels without vector instructions (on: false), or as the CPU allows
 * (on: true, the default). */
void sc_expr_fast_vectors(bool on);
bool cmp_fast_ok(const vec *a, const vec *b);
int ev_cmp_fast(ctx *c, const sc_enode *nd, vec *o, const vec *a, const vec *b);

/* ---- casts and functions (expr_funcs.c) */
int ev_cast(ctx *c, const sc_enode *nd, vec *o, const vec *a);
int ev_is_in(ctx *c, const sc_enode *nd, vec *o, const vec *a);
int ev_abs(ctx *c, const sc_enode *nd, vec *o, const vec *a);
int ev_round(ctx *c, const sc_enode *nd, vec *o, const vec *a, const vec *d);
int ev_str_test(ctx *c, const sc_enode *nd, vec *o, const vec *a, const vec *p);
int ev_str_case(ctx *c, const sc_enode *nd, vec *o, const vec *a);
int ev_str_len(ctx *c, vec *o, const vec *a);
int ev_dt(ctx *c, const sc_enode *nd, vec *o, const vec *a);
int ev_udf(ctx *c, const sc_enode *nd, vec *o, const vec *v);

/* ---- types (expr_compile.c) */
static inline bool num_or_null(int t) { return t == SC_LT_INT || t == SC_LT_FLOAT || t == SC_LT_NULL; }
static inline bool bool_or_null(int t) { return t == SC_LT_BOOL || t == SC_LT_NULL; }

/* ------------------------------------------------------------------- numeric kernels */

static inline int64_t wadd(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
static inline int64_t wsub(int64_t a, int64_t b) { return (int64_t)((uint64_t)a - (uint64_t)b); }
static inline int64_t wmul(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }
static inline int64_t wneg(int64_t a) { return (int64_t)(0 - (uint64_t)a); }

/* Python a // b (b != 0), wrapped: INT64_MIN // -1 wraps to INT64_MIN. */
static inline int64_t ifloordiv(int64_t a, int64_t b) {
    if (b == -1) return wneg(a);
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

/* Python a % b (b != 0): the sign of b. */
static inline int64_t imod(int64_t a, int64_t b) {
    if (b == -1) return 0;
    int64_t m = a % b;
    return (m != 0 && ((m < 0) != (b < 0))) ? m + b : m;
}

/* a % d (Python's floor modulo, as imod) by one nonzero divisor without a division per row
 * (Lemire, Kaser and Kurz, "Faster Remainder by Direct Computation: Applications to Compilers
 * and Software Libraries"): M = floor((2^128 - 1) / |d|) + 1 once; then |a| mod |d| is the
 * high 64 bits of (M * |a| mod 2^128) * |d|, exact for every 64-bit |a|. */
typedef struct {
    __uint128_t m;
    uint64_t d; /* |divisor| */
    bool neg;   /* divisor < 0 */
} sc_fastmod;

static inline sc_fastmod fastmod_init(int64_t d) {
    sc_fastmod f;
    f.neg = d < 0;
    f.d = f.neg ? 0 - (uint64_t)d : (uint64_t)d;
    f.m = ~(__uint128_t)0 / f.d + 1;
    return f;
}

static inline int64_t fastmod(const sc_fastmod *f, int64_t a) {
    uint64_t ua = a < 0 ? 0 - (uint64_t)a : (uint64_t)a;
    __uint128_t low = f->m * ua;
    __uint128_t bottom = ((__uint128_t)(uint64_t)low * f->d) >> 64;
    uint64_t r = (uint64_t)((bottom + (low >> 64) * f->d) >> 64);
    /* floor: a nonzero remainder takes the divisor's sign: -a % d == d - a % d for d > 0,
     * and a % d == -((-a) % |d|) for d < 0 */
    bool flip = f->neg ? a > 0 : a < 0;
    if (flip && r) r = f->d - r;
    return f->neg ? (int64_t)(0 - r) : (int64_t)r;
}

/* pow(a, b, 2**64) for b >= 0, as a wrapped int64. */
static inline int64_t ipow(int64_t a, int64_t b) {
    uint64_t r = 1, x = (uint64_t)a, e = (uint64_t)b;
    while (e) {
        if (e & 1) r *= x;
        x *= x;
        e >>= 1;
    }
    return (int64_t)r;
}

/* evaluate._floordiv for floats (b != 0): floor(a / b) as float(math.floor(q)), so -0.0
 * becomes 0.0; inf and nan pass through. */
static inline double ffloordiv(double a, double b) {
    double q = a / b;
    return isfinite(q) ? floor(q) + 0.0 : q;
}

/* CPython float_rem (b != 0). */
static inline double fmod_py(double a, double b) {
    double m = fmod(a, b);
    if (m) {
        if ((b < 0) != (m < 0)) m += b;
    } else {
        m = copysign(0.0, b);
    }
    return m;
}
/* evaluate._pow for floats: CPython float_pow, with ZeroDivisionError and OverflowError as
 * +inf and a complex result as its real part. */
double fpow_py(double v, double w);

/* Order of two floats with NaN above every number and NaN == NaN: -1, 0, 1. */
static inline int cmp_f(double a, double b) {
    int na = a != a, nb = b != b;
    if (na | nb) return na - nb;
    return (a > b) - (a < b);
}

/* Exact order of an int and a float (Python compares them exactly); NaN is above. */
static inline int cmp_if(int64_t i, double d) {
    if (d != d) return -1;
    if (d >= 9223372036854775808.0) return -1;
    if (d < -9223372036854775808.0) return 1;
    double t = trunc(d);
    int64_t ti = (int64_t)t;
    if (i != ti) return i < ti ? -1 : 1;
    double fr = d - t;
    return fr > 0 ? -1 : (fr < 0 ? 1 : 0);
}

static inline int cmp_i(int64_t a, int64_t b) { return (a > b) - (a < b); }

/* A Python number of a numeric vector's row: an int, or a float. */
typedef struct pnum {
    bool isint;
    int64_t i;
    double f;
} pnum;

static inline pnum pn_at(const vec *v, int64_t r) {
    pnum p = { true, 0, 0.0 };
    if (v->lt != SC_LT_FLOAT) p.i = v->i[r];
    else if (v->isint && v->isint[r]) p.i = v->i[r];
    else {
        p.isint = false;
        p.f = v->f[r];
    }
    return p;
}

static inline double pn_f(pnum p) { return p.isint ? (double)p.i : p.f; }

static inline int pn_cmp(pnum x, pnum y) {
    if (x.isint && y.isint) return cmp_i(x.i, y.i);
    if (x.isint) return cmp_if(x.i, y.f);
    if (y.isint) return -cmp_if(y.i, x.f);
    return cmp_f(x.f, y.f);
}

/* Bytewise order of two strings (UTF-8: code point order): -1, 0, 1. */
static inline int cmp_str(const char *a, int32_t la, const char *b, int32_t lb) {
    int m = memcmp(a, b, (size_t)(la < lb ? la : lb));
    return m ? (m < 0 ? -1 : 1) : cmp_i(la, lb);
}

/* ---- Python / Polars numbers (expr_compat_num.c) */

/* The "C" locale (decimal point '.') for strtod / printf, whatever the process uses. */
locale_t c_locale(void);
static inline bool is_digit(char c) { return c >= '0' && c <= '9'; }
/* int() / float() input: s.strip(), then CPython's transform of Unicode decimal digits and
 * spaces to ASCII; false when another non-ASCII character is left. out: room for len. */
bool num_prep(const char *s, int32_t len, char *out, int32_t *olen);
/* wrap64(int(s)) of a prepared string; false where int() raises (syntax, > 4300 digits). */
bool parse_int_py(const char *s, int32_t n, int64_t *out);
/* float(s) of a prepared string (s has room for a terminator at s[n]; edited in place). */
bool parse_float_py(char *s, int32_t n, double *out);
/* s equals the lower-case ASCII word w, ignoring ASCII case. */
bool word_ci(const char *s, int32_t n, const char *w);
/* str(v) into out (room for 24); the length. */
int fmt_i64(int64_t v, char *out);
/* Polars' float -> str into out (room for 32); the length. Must run in the C locale. */
int fmt_f64(double x, char *out);
/* evaluate.round_float (Polars' round): rint(v * 10**d) / 10**d, ties to even. */
double round_f64(double v, int64_t d);

/* ---- Python dates (expr_compat_time.c) */

static inline int64_t floordiv_c(int64_t a, int64_t b) { /* b > 0 */
    int64_t q = a / b;
    return (a % b < 0) ? q - 1 : q;
}

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm). */
int64_t days_from_civil(int64_t y, int m, int d);
void civil_from_days(int64_t z, int64_t *y, int *m, int *d);
bool is_leap(int64_t y);
int days_in_month(int64_t y, int m);
#define US_MIN INT64_C(-62135596800000000) /* datetime(1, 1, 1) */
#define US_MAX INT64_C(253402300799999999) /* datetime(9999, 12, 31, 23, 59, 59, 999999) */
/* str(date): YYYY-MM-DD (out: room for 24) */
int fmt_date(int64_t days, char *out);
/* datetime.isoformat(sep=" ", timespec="microseconds") (out: room for 32) */
int fmt_datetime(int64_t us, char *out);
/* datetime.fromisoformat(s) as epoch microseconds (naive UTC); s[len] == 0, nchars its
 * code points. With a UTC offset the result is the UTC time. */
bool iso_datetime(const char *s, int32_t len, int32_t nchars, int64_t *out);
/* date.fromisoformat(s) as epoch days; s[len] == 0. */
bool iso_dateonly(const char *s, int32_t len, int64_t *out);

/* ---- Python str over UTF-8 (expr_compat_str.c) */

#define U_RAW 0x80000000u /* a malformed byte, passed through unchanged */
/* The code point at p[*i] (advancing *i), or U_RAW | byte for a malformed sequence. */
uint32_t u8_next(const uint8_t *p, int32_t n, int32_t *i);
/* The code point ending at p[*j - 1] (moving *j to its first byte). */
uint32_t u8_prev(const uint8_t *p, int32_t *j);
/* Encode c (U_RAW: the raw byte) at o; the byte count (1-4). */
int u8_put(char *o, uint32_t c);
/* str.lower() / str.upper() of one code point: 1-3 code points into out; the count. */
int u_lower(uint32_t c, uint32_t out[3]);
int u_upper(uint32_t c, uint32_t out[3]);
/* Digit value of a Unicode decimal, else -1. */
int u_decimal(uint32_t c);
/* str.isspace() */
bool u_space(uint32_t c);
/* str.strip(): the byte range [*b, *e) of s without leading and trailing whitespace. */
void u_strip(const char *s, int32_t len, int32_t *b, int32_t *e);
/* CPython's Final_Sigma context for the capital sigma at p[at, after). */
bool final_sigma(const uint8_t *p, int32_t n, int32_t at, int32_t after);

#pragma GCC visibility pop

#endif
