/* expr: vectorized evaluation of plan expressions, and the filter / project operators
 * (contract in expr.h; semantics are kernel/streamcell/backends/evaluate.py row for row).
 *
 * How it works: the post-order nodes are evaluated one after the other, each over the
 * whole batch, into a vector with one validity byte, one error byte and one value per row
 * (scratch owned by the call, so one sc_expr serves any number of threads). The root
 * vector is then written into the output column.
 *
 * Fidelity notes (each one is what the reference does):
 * - Errors are lazy like Python's: a child's error fails the row only where the reference
 *   evaluates that child (not the right operand after a null left one, not an untaken
 *   when/fill_null branch, not the right side of an and/or decided by its left side).
 * - A FLOAT vector may hold Python ints: when/fill_null unify int with float but the
 *   reference keeps the int value, so those rows are flagged (vec.isint) and consumers treat
 *   them as ints (int ** negative int fails, int + int wraps, str(3) == "3", exact compares).
 *   The output column gets float(v), like the reference's output conversion.
 * - Strings are UTF-8. upper/lower are Python's full Unicode mappings (tables generated from
 *   CPython 3.11 / Unicode 14 at the end of this file, final sigma included). str -> int /
 *   float follow int() / float() (Unicode digits and spaces, underscores, the 4300-digit
 *   limit); str -> datetime / date port CPython 3.11's C fromisoformat; float -> str is
 *   Polars' cast (repr()'s shortest round-trip digits, NaN, decimals down to 1e-5, 1e-7).
 * Deviations, where the reference has no representable answer:
 * - abs(INT64_MIN) wraps to INT64_MIN (Python gives 2**63, which no int64 column holds).
 * - A string with a UTC offset cast to datetime becomes naive UTC (Python: an aware
 *   datetime, which the reference converts to naive UTC when it stores it).
 */
#define _GNU_SOURCE
#include "expr.h"
#include "lists.h"

#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
} vec;

/* List vectors (lt >= SC_LT_LIST) hold each row's encoded list (lists.h) in s / sl. */
static inline bool is_strlike(uint8_t lt) { return lt == SC_LT_STR || sc_ltype_is_list(lt); }

typedef struct ctx {
    int64_t n; /* rows */
    void **blk;
    size_t nblk, cap;
} ctx;

static const char EMPTY[1] = "";

static void *cx_adopt(ctx *c, void *p) {
    if (!p) return NULL;
    if (c->nblk == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 32;
        void **q = realloc(c->blk, cap * sizeof *q);
        if (!q) {
            free(p);
            return NULL;
        }
        c->blk = q;
        c->cap = cap;
    }
    c->blk[c->nblk++] = p;
    return p;
}

static void *cx_alloc(ctx *c, size_t bytes) { return cx_adopt(c, malloc(bytes ? bytes : 1)); }

static void *cx_zalloc(ctx *c, size_t bytes) { return cx_adopt(c, calloc(bytes ? bytes : 1, 1)); }

static void cx_free(ctx *c) {
    for (size_t k = 0; k < c->nblk; k++) free(c->blk[k]);
    free(c->blk);
    c->blk = NULL;
    c->nblk = c->cap = 0;
}

/* A fresh vector of type lt: values zeroed (strings empty), validity and errors unset. */
static int vnew(ctx *c, vec *v, uint8_t lt) {
    size_t n = (size_t)c->n;
    memset(v, 0, sizeof *v);
    v->lt = lt;
    v->ok = cx_alloc(c, n);
    bool vals;
    switch (is_strlike(lt) ? SC_LT_STR : lt) {
    case SC_LT_FLOAT: vals = (v->f = cx_zalloc(c, n * sizeof(double))) != NULL; break;
    case SC_LT_BOOL: vals = (v->b = cx_zalloc(c, n)) != NULL; break;
    case SC_LT_STR:
        v->s = cx_alloc(c, n * sizeof(char *));
        v->sl = cx_zalloc(c, n * sizeof(int32_t));
        vals = v->s && v->sl;
        for (size_t r = 0; vals && r < n; r++) v->s[r] = EMPTY;
        break;
    default: vals = (v->i = cx_zalloc(c, n * sizeof(int64_t))) != NULL; break;
    }
    return v->ok && vals ? SC_OK : SC_ENOMEM;
}

/* Give a FLOAT vector room for int rows. */
static int v_mixed(ctx *c, vec *v) {
    if (!v->isint) v->isint = cx_zalloc(c, (size_t)c->n);
    if (!v->i) v->i = cx_zalloc(c, (size_t)c->n * sizeof(int64_t));
    return v->isint && v->i ? SC_OK : SC_ENOMEM;
}

static inline void set_int_row(vec *v, int64_t r, int64_t x) {
    v->isint[r] = 1;
    v->i[r] = x;
    v->f[r] = (double)x;
}

static int err_alloc(ctx *c, vec *v) {
    if (!v->err) v->err = cx_zalloc(c, (size_t)c->n);
    return v->err ? SC_OK : SC_ENOMEM;
}

static inline void fail_row(vec *v, int64_t r, uint8_t code) {
    v->ok[r] = 0;
    if (!v->err[r]) v->err[r] = code;
}

/* Errors of a one-operand node: the operand's. */
static int err_unary(ctx *c, vec *o, const vec *a) {
    if (!a->err) return SC_OK;
    if (err_alloc(c, o)) return SC_ENOMEM;
    memcpy(o->err, a->err, (size_t)c->n);
    return SC_OK;
}

/* Errors of a strict two-operand node: a's, then b's where a is valid (Python evaluates the
 * second operand only after a non-null first one). */
static int err_strict(ctx *c, vec *o, const vec *a, const vec *b) {
    if (!a->err && !b->err) return SC_OK;
    if (err_alloc(c, o)) return SC_ENOMEM;
    for (int64_t r = 0; r < c->n; r++) {
        uint8_t ea = a->err ? a->err[r] : 0, eb = b->err && a->ok[r] ? b->err[r] : 0;
        o->err[r] = ea ? ea : eb;
    }
    return SC_OK;
}

/* A failed row is never valid. */
static void seal(const ctx *c, vec *o) {
    if (!o->err) return;
    for (int64_t r = 0; r < c->n; r++) o->ok[r] &= (uint8_t)(o->err[r] == 0);
}

static void and_ok(const ctx *c, vec *o, const vec *a, const vec *b) {
    for (int64_t r = 0; r < c->n; r++) o->ok[r] = a->ok[r] & (b ? b->ok[r] : 1);
}

/* The vector's values as doubles (ints converted, as Python's float(int)). */
static const double *as_f64(ctx *c, const vec *v) {
    if (v->lt == SC_LT_FLOAT) return v->f;
    double *f = cx_alloc(c, (size_t)c->n * sizeof(double));
    if (f)
        for (int64_t r = 0; r < c->n; r++) f[r] = (double)v->i[r];
    return f;
}

/* The vector's values as int64 (bools widened). */
static const int64_t *as_i64(ctx *c, const vec *v) {
    if (v->lt != SC_LT_BOOL) return v->i;
    int64_t *x = cx_alloc(c, (size_t)c->n * sizeof(int64_t));
    if (x)
        for (int64_t r = 0; r < c->n; r++) x[r] = v->b[r];
    return x;
}

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

static inline bool odd_integer(double x) { return fmod(fabs(x), 2.0) == 1.0; }

/* Real part of CPython's complex power of a negative base (complex_pow -> _Py_c_pow); an
 * OverflowError (an infinite part) is +inf in evaluate._pow. */
static double cpow_real(double v, double w) {
    double len = pow(fabs(v), w), phase = atan2(0.0, v) * w;
    double re = len * cos(phase), im = len * sin(phase);
    return (isinf(re) || isinf(im)) ? INFINITY : re;
}

/* evaluate._pow for floats: CPython float_pow, with ZeroDivisionError and OverflowError as
 * +inf and a complex result as its real part. */
static double fpow_py(double v, double w) {
    if (w == 0.0) return 1.0;
    if (isnan(v)) return v;
    if (isnan(w)) return v == 1.0 ? 1.0 : w;
    if (isinf(w)) {
        v = fabs(v);
        if (v == 1.0) return 1.0;
        return ((w > 0.0) == (v > 1.0)) ? fabs(w) : 0.0;
    }
    if (isinf(v)) {
        bool odd = odd_integer(w);
        if (w > 0.0) return odd ? v : fabs(v);
        return odd ? copysign(0.0, v) : 0.0;
    }
    if (v == 0.0) {
        if (w < 0.0) return INFINITY;
        return odd_integer(w) ? v : 0.0;
    }
    bool neg = false;
    if (v < 0.0) {
        if (w != floor(w)) return cpow_real(v, w);
        v = -v;
        neg = odd_integer(w);
    }
    if (v == 1.0) return neg ? -1.0 : 1.0;
    errno = 0;
    double x = pow(v, w);
    if (errno == 0 && isinf(x)) errno = ERANGE;
    else if (errno == ERANGE && x == 0.0) errno = 0;
    if (errno) return INFINITY;
    return neg ? -x : x;
}

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

/* -------------------------------------------------------------------------- calendar */

static inline int64_t floordiv_c(int64_t a, int64_t b) { /* b > 0 */
    int64_t q = a / b;
    return (a % b < 0) ? q - 1 : q;
}

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm). */
static int64_t days_from_civil(int64_t y, int m, int d) {
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, int *m, int *d) {
    if (z > (INT64_C(1) << 40)) z = INT64_C(1) << 40; /* far outside datetime's range */
    if (z < -(INT64_C(1) << 40)) z = -(INT64_C(1) << 40);
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

static bool is_leap(int64_t y) { return y % 4 == 0 && (y % 100 != 0 || y % 400 == 0); }

static int days_in_month(int64_t y, int m) {
    static const int dim[13] = { 0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
    return m == 2 && is_leap(y) ? 29 : dim[m];
}

#define US_MIN INT64_C(-62135596800000000) /* datetime(1, 1, 1) */
#define US_MAX INT64_C(253402300799999999) /* datetime(9999, 12, 31, 23, 59, 59, 999999) */


/* ---------------------------------------------------------------------------- UTF-8 */

#define U_RAW 0x80000000u /* a malformed byte, passed through unchanged */

/* The code point at p[*i] (advancing *i), or U_RAW | byte for a malformed sequence. */
static uint32_t u8_next(const uint8_t *p, int32_t n, int32_t *i) {
    uint32_t c = p[*i];
    if (c < 0x80) {
        (*i)++;
        return c;
    }
    int k = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : c >= 0xC0 ? 1 : 0;
    if (k == 0 || c > 0xF7 || *i + k >= n) {
        (*i)++;
        return U_RAW | c;
    }
    uint32_t cp = c & (0x3Fu >> k);
    for (int j = 1; j <= k; j++) {
        uint32_t t = p[*i + j];
        if ((t & 0xC0) != 0x80) {
            (*i)++;
            return U_RAW | c;
        }
        cp = (cp << 6) | (t & 0x3F);
    }
    *i += k + 1;
    return cp;
}

/* The code point ending at p[*j - 1] (moving *j to its first byte). */
static uint32_t u8_prev(const uint8_t *p, int32_t *j) {
    int32_t e = *j, s = e - 1;
    while (s > 0 && e - s < 4 && (p[s] & 0xC0) == 0x80) s--;
    int32_t k = s;
    uint32_t cp = u8_next(p, e, &k);
    if (k != e) {
        *j = e - 1;
        return U_RAW | p[e - 1];
    }
    *j = s;
    return cp;
}

static int u8_put(char *o, uint32_t c) {
    if (c & U_RAW) {
        o[0] = (char)(c & 0xFF);
        return 1;
    }
    if (c < 0x80) {
        o[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        o[0] = (char)(0xC0 | (c >> 6));
        o[1] = (char)(0x80 | (c & 0x3F));
        return 2;
    }
    if (c < 0x10000) {
        o[0] = (char)(0xE0 | (c >> 12));
        o[1] = (char)(0x80 | ((c >> 6) & 0x3F));
        o[2] = (char)(0x80 | (c & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (c >> 18));
    o[1] = (char)(0x80 | ((c >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((c >> 6) & 0x3F));
    o[3] = (char)(0x80 | (c & 0x3F));
    return 4;
}

/* Unicode tables (defined at the end of the file). */
static int u_lower(uint32_t c, uint32_t out[3]);
static int u_upper(uint32_t c, uint32_t out[3]);
static bool u_cased(uint32_t c);          /* cased and not case-ignorable */
static bool u_case_ignorable(uint32_t c);
static int u_decimal(uint32_t c);         /* digit value of a Unicode decimal, else -1 */

/* str.isspace() */
static bool u_space(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
           c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
           c == 0x202F || c == 0x205F || c == 0x3000;
}

/* str.strip(): the byte range [*b, *e) of s without leading and trailing whitespace. */
static void u_strip(const char *s, int32_t len, int32_t *b, int32_t *e) {
    const uint8_t *p = (const uint8_t *)s;
    int32_t i = 0, j = len;
    while (i < len) {
        int32_t k = i;
        if (!u_space(u8_next(p, len, &k))) break;
        i = k;
    }
    while (j > i) {
        int32_t k = j;
        if (!u_space(u8_prev(p, &k))) break;
        j = k;
    }
    *b = i;
    *e = j;
}

/* CPython's Final_Sigma context for the capital sigma at p[at, after). */
static bool final_sigma(const uint8_t *p, int32_t n, int32_t at, int32_t after) {
    int32_t j = at;
    uint32_t c = 0;
    bool found = false;
    while (j > 0) {
        c = u8_prev(p, &j);
        if (!u_case_ignorable(c)) {
            found = true;
            break;
        }
    }
    if (!found || !u_cased(c)) return false;
    j = after;
    while (j < n) {
        c = u8_next(p, n, &j);
        if (!u_case_ignorable(c)) return !u_cased(c);
    }
    return true;
}

/* ---------------------------------------------------------------- string builder */

/* Strings of a new STR vector, appended row by row into one buffer owned by the scratch. */
typedef struct sbld {
    ctx *c;
    size_t slot; /* the buffer's block in c */
    char *p;
    size_t len, cap;
    size_t *at; /* row -> start offset (SIZE_MAX: not written) */
} sbld;

static int sb_open(ctx *c, sbld *b, size_t guess) {
    b->c = c;
    b->len = 0;
    b->cap = guess < 64 ? 64 : guess;
    b->at = cx_alloc(c, (size_t)c->n * sizeof(size_t));
    b->p = cx_alloc(c, b->cap);
    if (!b->at || !b->p) return SC_ENOMEM;
    b->slot = c->nblk - 1;
    memset(b->at, 0xFF, (size_t)c->n * sizeof(size_t));
    return SC_OK;
}

static int sb_room(sbld *b, size_t extra) {
    if (b->len + extra <= b->cap) return SC_OK;
    size_t cap = b->cap * 2;
    while (cap < b->len + extra) cap *= 2;
    char *q = realloc(b->p, cap);
    if (!q) return SC_ENOMEM;
    b->p = q;
    b->cap = cap;
    b->c->blk[b->slot] = q;
    return SC_OK;
}

static int sb_add(sbld *b, const char *s, size_t n) {
    if (sb_room(b, n)) return SC_ENOMEM;
    if (n) memcpy(b->p + b->len, s, n);
    b->len += n;
    return SC_OK;
}

static inline void sb_begin(sbld *b, int64_t r) { b->at[r] = b->len; }

static int sb_end(sbld *b, vec *o, int64_t r) {
    size_t n = b->len - b->at[r];
    if (n > INT32_MAX) return SC_EINVAL;
    o->sl[r] = (int32_t)n;
    return SC_OK;
}

/* Point the vector's rows at the finished buffer. */
static void sb_close(sbld *b, vec *o) {
    for (int64_t r = 0; r < b->c->n; r++)
        if (b->at[r] != SIZE_MAX) o->s[r] = b->p + b->at[r];
}

/* Append s upper- or lower-cased as Python's str.upper() / str.lower(). */
static int sb_case(sbld *b, const char *s, int32_t len, bool upper) {
    const uint8_t *p = (const uint8_t *)s;
    if (sb_room(b, (size_t)len)) return SC_ENOMEM;
    int32_t i = 0;
    for (; i < len && p[i] < 0x80; i++) {
        uint8_t ch = p[i];
        if (upper ? (ch >= 'a' && ch <= 'z') : (ch >= 'A' && ch <= 'Z')) ch ^= 0x20;
        b->p[b->len++] = (char)ch;
    }
    while (i < len) {
        int32_t at = i;
        uint32_t cp = u8_next(p, len, &i), m[3];
        int k = 1;
        if (!upper && cp == 0x3A3) m[0] = final_sigma(p, len, at, i) ? 0x3C2 : 0x3C3;
        else k = upper ? u_upper(cp, m) : u_lower(cp, m);
        if (sb_room(b, 12)) return SC_ENOMEM;
        for (int j = 0; j < k; j++) b->len += (size_t)u8_put(b->p + b->len, m[j]);
    }
    return SC_OK;
}

/* ------------------------------------------------------------- numbers from text */

static pthread_once_t cloc_once = PTHREAD_ONCE_INIT;
static locale_t cloc;
static void cloc_init(void) { cloc = newlocale(LC_ALL_MASK, "C", (locale_t)0); }

/* The "C" locale (decimal point '.') for strtod / printf, whatever the process uses. */
static locale_t c_locale(void) {
    pthread_once(&cloc_once, cloc_init);
    return cloc;
}

/* int() / float() input: s.strip(), then CPython's transform of Unicode decimal digits and
 * spaces to ASCII; false when another non-ASCII character is left. out: room for len. */
static bool num_prep(const char *s, int32_t len, char *out, int32_t *olen) {
    int32_t b, e, n = 0;
    u_strip(s, len, &b, &e);
    const uint8_t *p = (const uint8_t *)s;
    for (int32_t i = b; i < e;) {
        uint32_t c = u8_next(p, e, &i);
        int d;
        if (c < 127) out[n++] = (char)c;
        else if (u_space(c)) out[n++] = ' ';
        else if ((d = u_decimal(c)) >= 0) out[n++] = (char)('0' + d);
        else return false;
    }
    *olen = n;
    return true;
}

static inline bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* wrap64(int(s)) of a prepared string; false where int() raises (syntax, > 4300 digits). */
static bool parse_int_py(const char *s, int32_t n, int64_t *out) {
    int32_t i = 0, digits = 0;
    bool neg = false;
    if (i < n && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
    if (i < n && s[i] == '_') return false;
    uint64_t v = 0;
    char prev = 0;
    for (; i < n && (is_digit(s[i]) || s[i] == '_'); i++) {
        if (s[i] == '_' && prev == '_') return false;
        if (s[i] != '_') {
            v = v * 10 + (uint64_t)(s[i] - '0');
            digits++;
        }
        prev = s[i];
    }
    if (prev == '_' || digits == 0 || i != n || digits > 4300) return false;
    *out = (int64_t)(neg ? 0 - v : v);
    return true;
}

static bool word_ci(const char *s, int32_t n, const char *w) {
    int32_t k = (int32_t)strlen(w);
    if (n != k) return false;
    for (int32_t i = 0; i < n; i++)
        if ((s[i] | 0x20) != w[i]) return false;
    return true;
}

/* CPython's float syntax (_Py_dg_strtod, then _Py_parse_inf_or_nan), underscores removed. */
static bool float_syntax(const char *s, int32_t n) {
    int32_t i = 0, nd = 0;
    if (i < n && (s[i] == '+' || s[i] == '-')) i++;
    if (word_ci(s + i, n - i, "inf") || word_ci(s + i, n - i, "infinity") ||
        word_ci(s + i, n - i, "nan"))
        return true;
    for (; i < n && is_digit(s[i]); i++) nd++;
    if (i < n && s[i] == '.')
        for (i++; i < n && is_digit(s[i]); i++) nd++;
    if (nd == 0) return false;
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        int32_t j = i + 1;
        if (j < n && (s[j] == '+' || s[j] == '-')) j++;
        int32_t k = j;
        while (j < n && is_digit(s[j])) j++;
        if (j > k) i = j;
    }
    return i == n;
}

/* float(s) of a prepared string (s has room for a terminator at s[n]; edited in place). */
static bool parse_float_py(char *s, int32_t n, double *out) {
    if (memchr(s, '_', (size_t)n)) { /* _Py_string_to_number_with_underscores */
        int32_t m = 0;
        char prev = 0;
        for (int32_t i = 0; i < n; i++) {
            char ch = s[i];
            if (ch == '_') {
                if (!is_digit(prev)) return false;
            } else {
                if (prev == '_' && !is_digit(ch)) return false;
                s[m++] = ch;
            }
            prev = ch;
        }
        if (prev == '_') return false;
        n = m;
    }
    if (!float_syntax(s, n)) return false;
    s[n] = 0;
    locale_t l = c_locale();
    *out = l ? strtod_l(s, NULL, l) : strtod(s, NULL);
    return true;
}

/* ---------------------------------------------------------------- numbers to text */

static int fmt_i64(int64_t v, char *out) {
    char tmp[24];
    int n = 0, k = 0;
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0) out[k++] = '-';
    while (n) out[k++] = tmp[--n];
    return k;
}

/* Digits of m * 10**q without trailing zeros; *decpt = exponent of 0.d1d2... */
static int digits_of(uint64_t m, int q, char *dig, int *decpt) {
    char tmp[24];
    int n = 0;
    while (m % 10 == 0 && m) {
        m /= 10;
        q++;
    }
    do {
        tmp[n++] = (char)('0' + m % 10);
        m /= 10;
    } while (m);
    for (int k = 0; k < n; k++) dig[k] = tmp[n - 1 - k];
    *decpt = n + q;
    return n;
}

/* "%.Ne" text -> mantissa as an integer and the exponent of its last digit. */
static void split_e(const char *buf, uint64_t *m, int *q) {
    uint64_t v = 0;
    int nd = 0;
    const char *p = buf;
    for (; *p && *p != 'e'; p++)
        if (is_digit(*p)) {
            v = v * 10 + (uint64_t)(*p - '0');
            nd++;
        }
    *m = v;
    *q = atoi(p + 1) - (nd - 1);
}

/* The p-significant-digit decimal nearest to x, or its neighbour, that reads back as x
 * (p < 17; only these three can lie in x's rounding interval): digits into dig. */
static int probe_digits(double x, int p, locale_t l, char *dig, int *decpt) {
    char buf[48];
    uint64_t m;
    int q;
    snprintf(buf, sizeof buf, "%.*e", p - 1, x);
    split_e(buf, &m, &q);
    if ((l ? strtod_l(buf, NULL, l) : strtod(buf, NULL)) == x || p >= 17) return digits_of(m, q, dig, decpt);
    for (int s = -1; s <= 1; s += 2) {
        uint64_t m2 = s < 0 ? m - 1 : m + 1;
        snprintf(buf, sizeof buf, "%llue%d", (unsigned long long)m2, q);
        if (m2 && (l ? strtod_l(buf, NULL, l) : strtod(buf, NULL)) == x) return digits_of(m2, q, dig, decpt);
    }
    return 0;
}

/* Shortest digits that read back as x (finite, > 0), the nearest among the shortest: what
 * CPython's repr (dtoa mode 0) prints. "Some p-digit decimal reads back as x" is monotone in
 * p, so p is found by bisection. Must run in the C locale. */
static int shortest_digits(double x, char *dig, int *decpt) {
    locale_t l = c_locale();
    int lo = 1, hi = 17;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (probe_digits(x, mid, l, dig, decpt)) hi = mid;
        else lo = mid + 1;
    }
    return probe_digits(x, lo, l, dig, decpt);
}

static int put_str(char *out, const char *s) {
    size_t n = strlen(s);
    memcpy(out, s, n);
    return (int)n;
}

static int fmt_f64(double x, char *out) {
    if (isnan(x)) return put_str(out, "NaN");
    if (isinf(x)) return put_str(out, x > 0 ? "inf" : "-inf");
    int n = 0;
    if (signbit(x)) {
        out[n++] = '-';
        x = -x;
    }
    if (x == 0) return n + put_str(out + n, "0.0");
    char d[24] = { 0 };
    int decpt = 0, nd = shortest_digits(x, d, &decpt);
    if (decpt <= -5 || decpt > 16) { /* Polars: decimals down to 1e-5, Python to 1e-4 */
        out[n++] = d[0];
        if (nd > 1) {
            out[n++] = '.';
            memcpy(out + n, d + 1, (size_t)nd - 1);
            n += nd - 1;
        }
        int e = decpt - 1, ae = e < 0 ? -e : e;
        out[n++] = 'e';
        out[n++] = e < 0 ? '-' : '+';
        if (ae >= 100) out[n++] = (char)('0' + ae / 100); /* no zero padding: 1e-7 */
        if (ae >= 10) out[n++] = (char)('0' + ae / 10 % 10);
        out[n++] = (char)('0' + ae % 10);
    } else if (decpt <= 0) {
        out[n++] = '0';
        out[n++] = '.';
        for (int k = 0; k < -decpt; k++) out[n++] = '0';
        memcpy(out + n, d, (size_t)nd);
        n += nd;
    } else if (decpt >= nd) {
        memcpy(out + n, d, (size_t)nd);
        n += nd;
        for (int k = nd; k < decpt; k++) out[n++] = '0';
        out[n++] = '.';
        out[n++] = '0';
    } else {
        memcpy(out + n, d, (size_t)decpt);
        n += decpt;
        out[n++] = '.';
        memcpy(out + n, d + decpt, (size_t)(nd - decpt));
        n += nd - decpt;
    }
    return n;
}

static int put2(char *o, int v) {
    o[0] = (char)('0' + v / 10);
    o[1] = (char)('0' + v % 10);
    return 2;
}

/* str(date): YYYY-MM-DD */
static int fmt_date(int64_t days, char *out) {
    int64_t y;
    int m, d;
    civil_from_days(days, &y, &m, &d);
    int n = snprintf(out, 24, "%04lld-", (long long)y);
    n += put2(out + n, m);
    out[n++] = '-';
    return n + put2(out + n, d);
}

/* datetime.isoformat(sep=" ", timespec="microseconds") */
static int fmt_datetime(int64_t us, char *out) {
    int64_t days = floordiv_c(us, SC_US_PER_DAY), t = us - days * SC_US_PER_DAY;
    int n = fmt_date(days, out);
    int64_t secs = t / 1000000;
    out[n++] = ' ';
    n += put2(out + n, (int)(secs / 3600));
    out[n++] = ':';
    n += put2(out + n, (int)(secs / 60 % 60));
    out[n++] = ':';
    n += put2(out + n, (int)(secs % 60));
    out[n++] = '.';
    int frac = (int)(t % 1000000);
    for (int k = 5; k >= 0; k--, frac /= 10) out[n + k] = (char)('0' + frac % 10);
    return n + 6;
}

/* ----------------------------------------------- datetime.fromisoformat (CPython 3.11) */

/* The parser below follows Modules/_datetimemodule.c of CPython 3.11 step by step (it reads
 * a NUL-terminated copy, as CPython reads its UTF-8 buffer), quirks included. */

static bool iso_digits(const char **pp, int *var, int n) {
    const char *p = *pp;
    for (int k = 0; k < n; k++) {
        unsigned t = (unsigned)(unsigned char)*p - '0';
        if (t > 9) return false;
        p++;
        *var = *var * 10 + (int)t;
    }
    *pp = p;
    return true;
}

/* ISO year / week / weekday -> *days (epoch days); false when out of range. */
static bool iso_week_days(int y, int wk, int wd, int64_t *days) {
    if (y < 1) return false;
    int64_t jan1 = days_from_civil(y, 1, 1);
    int first = (int)((jan1 + 3) % 7 + 7) % 7; /* Monday = 0 */
    if (wk <= 0 || wk >= 53) {
        if (!(wk == 53 && (first == 3 || (first == 2 && is_leap(y))))) return false;
    }
    if (wd <= 0 || wd >= 8) return false;
    int64_t monday = jan1 - first + (first > 3 ? 7 : 0);
    *days = monday + (wk - 1) * 7 + wd - 1;
    return true;
}

/* parse_isoformat_date: YYYY-MM-DD, YYYYMMDD, YYYY-Www[-D], YYYYWww[D]. Week dates are
 * resolved into y / m / d. 0 on success. */
static int iso_date(const char *s, size_t len, int *y, int *m, int *d) {
    const char *p = s;
    if (!iso_digits(&p, y, 4)) return -1;
    bool sep = *p == '-';
    if (sep) p++;
    if (*p == 'W') {
        int wk = 0, wd = 0;
        int64_t days, yy;
        p++;
        if (!iso_digits(&p, &wk, 2)) return -3;
        if ((size_t)(p - s) < len) {
            if (sep && *(p++) != '-') return -2;
            if (!iso_digits(&p, &wd, 1)) return -4;
        } else {
            wd = 1;
        }
        if (!iso_week_days(*y, wk, wd, &days)) return -3;
        civil_from_days(days, &yy, m, d);
        *y = (int)yy;
        return 0;
    }
    if (!iso_digits(&p, m, 2)) return -1;
    if (sep && *(p++) != '-') return -2;
    if (!iso_digits(&p, d, 2)) return -1;
    return 0;
}

/* parse_hh_mm_ss_ff over [s, end): < 0 error, 1 when not at the end of the string. */
static int iso_hms(const char *s, const char *end, int *h, int *mi, int *se, int *us) {
    *h = *mi = *se = *us = 0;
    const char *p = s;
    int *vals[3] = { h, mi, se };
    bool sep = true;
    for (int i = 0; i < 3; i++) {
        if (!iso_digits(&p, vals[i], 2)) return -3;
        char c = *(p++);
        if (i == 0) sep = c == ':';
        if (p >= end) return c != '\0';
        if (sep && c == ':') continue;
        if (c == '.' || c == ',') break;
        if (!sep) p--;
        else return -4;
    }
    size_t remains = (size_t)(end - p), todo = remains >= 6 ? 6 : remains;
    if (todo == 0 || !iso_digits(&p, us, (int)todo)) return -3; /* todo > 0 always */
    static const int scale[] = { 100000, 10000, 1000, 100, 10 };
    if (todo < 6) *us *= scale[todo - 1];
    while (is_digit(*p)) p++;
    return *p != '\0';
}

/* parse_isoformat_time: 0 (naive) or 1 (with a UTC offset of *tzs seconds + *tzus us). */
static int iso_time(const char *p, size_t len, int *h, int *mi, int *se, int *us, int *tzs, int *tzus) {
    const char *end = p + len, *tz = p;
    do {
        if (*tz == 'Z' || *tz == '+' || *tz == '-') break;
    } while (++tz < end);
    int rv = iso_hms(p, tz, h, mi, se, us);
    if (rv < 0) return rv;
    if (tz == end) return rv == 1 ? -5 : 0;
    if (*tz == 'Z') {
        *tzs = *tzus = 0;
        return tz[1] != '\0' ? -5 : 1;
    }
    int sign = *tz == '-' ? -1 : 1, th, tm, ts;
    rv = iso_hms(tz + 1, end, &th, &tm, &ts, tzus);
    *tzs = sign * (th * 3600 + tm * 60 + ts);
    *tzus *= sign;
    return rv ? -5 : 1;
}

/* _find_isoformat_datetime_separator */
static int32_t iso_sep(const char *s, int32_t len) {
    if (len == 7) return 7;
    if (s[4] == '-') {
        if (s[5] != 'W') return 10;
        if (len < 8) return -1;
        if (len > 8 && s[8] == '-') {
            if (len == 9) return -1;
            return (len > 10 && is_digit(s[10])) ? 8 : 10;
        }
        return 8;
    }
    if (s[4] != 'W') return 8;
    int32_t idx = 7;
    while (idx < len && is_digit(s[idx])) idx++;
    if (idx < 9) return idx;
    return idx % 2 == 0 ? 7 : 8;
}

static bool ymd_ok(int y, int m, int d) { return y >= 1 && y <= 9999 && m >= 1 && m <= 12 && d >= 1 && d <= days_in_month(y, m); }

/* datetime.fromisoformat(s) as epoch microseconds (naive UTC); s[len] == 0, nchars its
 * code points. With a UTC offset the result is the UTC time. */
static bool iso_datetime(const char *s, int32_t len, int32_t nchars, int64_t *out) {
    if (nchars < 7) return false;
    int32_t sep = iso_sep(s, len);
    if (sep < 0) return false;
    int y = 0, m = 0, d = 0, h = 0, mi = 0, se = 0, us = 0, tzs = 0, tzus = 0;
    int rv = iso_date(s, (size_t)sep, &y, &m, &d);
    if (!rv && len > sep) {
        const char *p = s + sep;
        uint8_t c0 = (uint8_t)p[0];
        p += (c0 & 0x80) == 0 ? 1 : (c0 & 0xF0) == 0xE0 ? 3 : (c0 & 0xF0) == 0xF0 ? 4 : 2;
        if (p > s + len) return false;
        rv = iso_time(p, (size_t)(s + len - p), &h, &mi, &se, &us, &tzs, &tzus);
    }
    if (rv < 0 || !ymd_ok(y, m, d) || h > 23 || mi > 59 || se > 59) return false;
    int64_t off = 0;
    if (rv == 1 && tzs != 0) {
        off = (int64_t)tzs * 1000000 + tzus;
        if (off <= -SC_US_PER_DAY || off >= SC_US_PER_DAY) return false;
    }
    int64_t t = days_from_civil(y, m, d) * SC_US_PER_DAY + ((int64_t)h * 3600 + mi * 60 + se) * 1000000 + us - off;
    if (t < US_MIN || t > US_MAX) return false;
    *out = t;
    return true;
}

/* date.fromisoformat(s) as epoch days; s[len] == 0. */
static bool iso_dateonly(const char *s, int32_t len, int64_t *out) {
    int y = 0, m = 0, d = 0;
    if (len != 7 && len != 8 && len != 10) return false;
    if (iso_date(s, (size_t)len, &y, &m, &d) || !ymd_ok(y, m, d)) return false;
    *out = days_from_civil(y, m, d);
    return true;
}

/* ------------------------------------------------------------------ the compiled form */

struct sc_expr {
    int32_t n;
    sc_enode *nodes; /* copies; literal strings and lists are owned copies too */
};

/* --------------------------------------------------------------------------- leaves */

static int ev_col(ctx *c, vec *o, const sc_batch *in, int32_t col, uint8_t lt) {
    const sc_column *k = &in->cols[col];
    size_t n = (size_t)c->n;
    memset(o, 0, sizeof *o);
    o->lt = lt;
    if (!(o->ok = cx_alloc(c, n))) return SC_ENOMEM;
    for (int64_t r = 0; r < c->n; r++) o->ok[r] = (k->validity[r >> 3] >> (r & 7)) & 1;
    if (lt == SC_LT_NULL) memset(o->ok, 0, n);
    switch (k->type) {
    case SC_COL_INT64: o->i = k->values; break; /* borrowed: a node never writes its inputs */
    case SC_COL_DOUBLE: o->f = k->values; break;
    case SC_COL_BOOL:
        if (!(o->b = cx_alloc(c, n))) return SC_ENOMEM;
        for (int64_t r = 0; r < c->n; r++) o->b[r] = sc_bit_get(k->values, r);
        break;
    case SC_COL_UTF8:
        o->s = cx_alloc(c, n * sizeof(char *));
        o->sl = cx_alloc(c, n * sizeof(int32_t));
        if (!o->s || !o->sl) return SC_ENOMEM;
        for (int64_t r = 0; r < c->n; r++) {
            o->s[r] = o->ok[r] ? k->data + k->offsets[r] : EMPTY;
            o->sl[r] = o->ok[r] ? k->offsets[r + 1] - k->offsets[r] : 0;
        }
        break;
    }
    return SC_OK;
}

static int ev_lit(ctx *c, const sc_enode *nd, vec *o) {
    int rc = vnew(c, o, nd->lt);
    if (rc) return rc;
    bool valid = !nd->is_null && nd->lt != SC_LT_NULL;
    memset(o->ok, valid, (size_t)c->n);
    if (!valid) return SC_OK;
    for (int64_t r = 0; r < c->n; r++) {
        switch (is_strlike(nd->lt) ? SC_LT_STR : nd->lt) {
        case SC_LT_FLOAT: o->f[r] = nd->f; break;
        case SC_LT_BOOL: o->b[r] = nd->i != 0; break;
        case SC_LT_STR:
            o->s[r] = nd->s;
            o->sl[r] = nd->slen;
            break;
        default: o->i[r] = nd->i; break;
        }
    }
    return SC_OK;
}

/* ---------------------------------------------------------------------------- unary */

static int ev_neg(ctx *c, const sc_enode *nd, vec *o, const vec *a) {
    int rc = vnew(c, o, nd->lt);
    if (!rc) rc = err_unary(c, o, a);
    if (!rc && a->isint) rc = v_mixed(c, o);
    if (rc) return rc;
    and_ok(c, o, a, NULL);
    if (a->lt == SC_LT_INT) {
        for (int64_t r = 0; r < c->n; r++) o->i[r] = wneg(a->i[r]);
    } else if (a->lt == SC_LT_FLOAT) {
        for (int64_t r = 0; r < c->n; r++) o->f[r] = -a->f[r];
        for (int64_t r = 0; a->isint && r < c->n; r++)
            if (a->isint[r]) set_int_row(o, r, wneg(a->i[r]));
    } else {
        memset(o->ok, 0, (size_t)c->n);
    }
    seal(c, o);
    return SC_OK;
}

static int ev_not(ctx *c, vec *o, const vec *a) {
    int rc = vnew(c, o, SC_LT_BOOL);
    if (!rc) rc = err_unary(c, o, a);
    if (rc) return rc;
    and_ok(c, o, a, NULL);
    if (a->lt == SC_LT_BOOL)
        for (int64_t r = 0; r < c->n; r++) o->b[r] = !a->b[r];
    else
        memset(o->ok, 0, (size_t)c->n);
    seal(c, o);
    return SC_OK;
}

/* ----------------------------------------------------------------------- arithmetic */

/* int op int (wrapping; // and % null on a zero divisor; ** < 0 fails the row). */
static int arith_int(ctx *c, int op, vec *o, const int64_t *x, const int64_t *y) {
    int64_t n = c->n, *z = o->i;
    uint8_t *ok = o->ok;
    switch (op) {
    case SC_E_ADD: for (int64_t r = 0; r < n; r++) z[r] = wadd(x[r], y[r]); break;
    case SC_E_SUB: for (int64_t r = 0; r < n; r++) z[r] = wsub(x[r], y[r]); break;
    case SC_E_MUL: for (int64_t r = 0; r < n; r++) z[r] = wmul(x[r], y[r]); break;
    case SC_E_DIV: for (int64_t r = 0; r < n; r++) o->f[r] = (double)x[r] / (double)y[r]; break;
    case SC_E_FLOORDIV:
        for (int64_t r = 0; r < n; r++) {
            ok[r] &= y[r] != 0;
            z[r] = ok[r] ? ifloordiv(x[r], y[r]) : 0;
        }
        break;
    case SC_E_MOD:
        for (int64_t r = 0; r < n; r++) {
            ok[r] &= y[r] != 0;
            z[r] = ok[r] ? imod(x[r], y[r]) : 0;
        }
        break;
    case SC_E_POW:
        if (err_alloc(c, o)) return SC_ENOMEM;
        for (int64_t r = 0; r < n; r++) {
            if (!ok[r]) continue;
            if (y[r] < 0) fail_row(o, r, ERR_POW);
            else z[r] = ipow(x[r], y[r]);
        }
        break;
    }
    return SC_OK;
}

/* float op float (ints already converted, as Python does for int op float). */
static void arith_float(const ctx *c, int op, vec *o, const double *x, const double *y) {
    int64_t n = c->n;
    double *z = o->f;
    uint8_t *ok = o->ok;
    switch (op) {
    case SC_E_ADD: for (int64_t r = 0; r < n; r++) z[r] = x[r] + y[r]; break;
    case SC_E_SUB: for (int64_t r = 0; r < n; r++) z[r] = x[r] - y[r]; break;
    case SC_E_MUL: for (int64_t r = 0; r < n; r++) z[r] = x[r] * y[r]; break;
    case SC_E_DIV: for (int64_t r = 0; r < n; r++) z[r] = x[r] / y[r]; break; /* = _div */
    case SC_E_FLOORDIV:
        for (int64_t r = 0; r < n; r++) {
            ok[r] &= y[r] != 0.0;
            z[r] = ok[r] ? ffloordiv(x[r], y[r]) : 0.0;
        }
        break;
    case SC_E_MOD:
        for (int64_t r = 0; r < n; r++) {
            ok[r] &= y[r] != 0.0;
            z[r] = ok[r] ? fmod_py(x[r], y[r]) : 0.0;
        }
        break;
    case SC_E_POW:
        for (int64_t r = 0; r < n; r++) z[r] = ok[r] ? fpow_py(x[r], y[r]) : 0.0;
        break;
    }
}

/* Rows holding Python ints in a FLOAT operand: each row by its own Python types. */
static int arith_mixed(ctx *c, int op, vec *o, const vec *a, const vec *b) {
    if (v_mixed(c, o) || err_alloc(c, o)) return SC_ENOMEM;
    for (int64_t r = 0; r < c->n; r++) {
        if (!o->ok[r]) continue;
        pnum x = pn_at(a, r), y = pn_at(b, r);
        bool zero = y.isint ? y.i == 0 : y.f == 0.0;
        if ((op == SC_E_FLOORDIV || op == SC_E_MOD) && zero) {
            o->ok[r] = 0;
        } else if (op == SC_E_DIV) {
            o->f[r] = pn_f(x) / pn_f(y);
        } else if (x.isint && y.isint) {
            int64_t v = 0;
            switch (op) {
            case SC_E_ADD: v = wadd(x.i, y.i); break;
            case SC_E_SUB: v = wsub(x.i, y.i); break;
            case SC_E_MUL: v = wmul(x.i, y.i); break;
            case SC_E_FLOORDIV: v = ifloordiv(x.i, y.i); break;
            case SC_E_MOD: v = imod(x.i, y.i); break;
            case SC_E_POW:
                if (y.i < 0) {
                    fail_row(o, r, ERR_POW);
                    continue;
                }
                v = ipow(x.i, y.i);
                break;
            }
            set_int_row(o, r, v);
        } else {
            double fx = pn_f(x), fy = pn_f(y), v = 0.0;
            switch (op) {
            case SC_E_ADD: v = fx + fy; break;
            case SC_E_SUB: v = fx - fy; break;
            case SC_E_MUL: v = fx * fy; break;
            case SC_E_FLOORDIV: v = ffloordiv(fx, fy); break;
            case SC_E_MOD: v = fmod_py(fx, fy); break;
            case SC_E_POW: v = fpow_py(fx, fy); break;
            }
            o->f[r] = v;
        }
    }
    return SC_OK;
}

static int concat(ctx *c, vec *o, const vec *a, const vec *b) {
    sbld sb;
    if (sb_open(c, &sb, 0)) return SC_ENOMEM;
    for (int64_t r = 0; r < c->n; r++) {
        if (!o->ok[r]) continue;
        sb_begin(&sb, r);
        if (sb_add(&sb, a->s[r], (size_t)a->sl[r]) || sb_add(&sb, b->s[r], (size_t)b->sl[r])) return SC_ENOMEM;
        if (sb_end(&sb, o, r)) return SC_EINVAL;
    }
    sb_close(&sb, o);
    return SC_OK;
}

static int ev_arith(ctx *c, const sc_enode *nd, vec *o, const vec *a, const vec *b) {
    int rc = vnew(c, o, nd->lt);
    if (!rc) rc = err_strict(c, o, a, b);
    if (rc) return rc;
    and_ok(c, o, a, b);
    if (a->lt == SC_LT_NULL || b->lt == SC_LT_NULL) {
        memset(o->ok, 0, (size_t)c->n);
    } else if (nd->lt == SC_LT_STR) {
        rc = concat(c, o, a, b);
    } else if (a->lt == SC_LT_INT && b->lt == SC_LT_INT) {
        rc = arith_int(c, nd->op, o, a->i, b->i);
    } else if (!a->isint && !b->isint) {
        const double *x = as_f64(c, a), *y = as_f64(c, b);
        if (!x || !y) return SC_ENOMEM;
        arith_float(c, nd->op, o, x, y);
    } else {
        rc = arith_mixed(c, nd->op, o, a, b);
    }
    seal(c, o);
    return rc;
}

/* ---------------------------------------------------------------------- comparisons */

static inline int cmp_str(const char *a, int32_t la, const char *b, int32_t lb) {
    int m = memcmp(a, b, (size_t)(la < lb ? la : lb));
    return m ? (m < 0 ? -1 : 1) : cmp_i(la, lb);
}

/* cm[r] = order of a[r] and b[r] (-1, 0, 1) by the operands' Python types. */
static int compare(ctx *c, int8_t *cm, const vec *a, const vec *b) {
    int64_t n = c->n;
    if (a->lt == SC_LT_STR) {
        for (int64_t r = 0; r < n; r++) cm[r] = (int8_t)cmp_str(a->s[r], a->sl[r], b->s[r], b->sl[r]);
    } else if (a->isint || b->isint) {
        for (int64_t r = 0; r < n; r++) cm[r] = (int8_t)pn_cmp(pn_at(a, r), pn_at(b, r));
    } else if (a->lt == SC_LT_FLOAT && b->lt == SC_LT_FLOAT) {
        for (int64_t r = 0; r < n; r++) cm[r] = (int8_t)cmp_f(a->f[r], b->f[r]);
    } else if (a->lt == SC_LT_FLOAT) {
        for (int64_t r = 0; r < n; r++) cm[r] = (int8_t)-cmp_if(b->i[r], a->f[r]);
    } else if (b->lt == SC_LT_FLOAT) {
        for (int64_t r = 0; r < n; r++) cm[r] = (int8_t)cmp_if(a->i[r], b->f[r]);
    } else {
        const int64_t *x = as_i64(c, a), *y = as_i64(c, b);
        if (!x || !y) return SC_ENOMEM;
        for (int64_t r = 0; r < n; r++) cm[r] = (int8_t)cmp_i(x[r], y[r]);
    }
    return SC_OK;
}

/* The element type of row r of a list vector (rows with int leaves in a vector with float
 * leaves: the same type with an INT leaf, which is one less). */
static inline uint8_t elem_type(const vec *v, int64_t r) {
    return (uint8_t)(v->lt - SC_LT_LIST - (v->isint && v->isint[r] ? 1 : 0));
}

/* Lists compare as Python lists (lists.h); an unorderable pair is a row error. */
static int cmp_lists(ctx *c, const sc_enode *nd, vec *o, const vec *a, const vec *b) {
    int op = nd->op - SC_E_EQ; /* SC_E_EQ.. SC_E_GE in SC_LCMP_* order */
    for (int64_t r = 0; r < c->n; r++) {
        if (!o->ok[r]) continue;
        int v = sc_list_compare(a->s[r], a->sl[r], elem_type(a, r), b->s[r], b->sl[r], elem_type(b, r), op);
        if (v == SC_LCMP_ERR) {
            if (err_alloc(c, o)) return SC_ENOMEM;
            fail_row(o, r, ERR_LISTCMP);
            continue;
        }
        o->b[r] = (uint8_t)v;
    }
    seal(c, o);
    return SC_OK;
}

static int ev_cmp(ctx *c, const sc_enode *nd, vec *o, const vec *a, const vec *b) {
    int rc = vnew(c, o, SC_LT_BOOL);
    if (!rc) rc = err_strict(c, o, a, b);
    if (rc) return rc;
    and_ok(c, o, a, b);
    if (a->lt == SC_LT_NULL || b->lt == SC_LT_NULL) {
        memset(o->ok, 0, (size_t)c->n);
        seal(c, o);
        return SC_OK;
    }
    if (sc_ltype_is_list(a->lt)) return cmp_lists(c, nd, o, a, b);
    int8_t *cm = cx_alloc(c, (size_t)c->n);
    if (!cm || compare(c, cm, a, b)) return SC_ENOMEM;
    int64_t n = c->n;
    uint8_t *z = o->b;
    switch (nd->op) {
    case SC_E_EQ: for (int64_t r = 0; r < n; r++) z[r] = cm[r] == 0; break;
    case SC_E_NE: for (int64_t r = 0; r < n; r++) z[r] = cm[r] != 0; break;
    case SC_E_LT: for (int64_t r = 0; r < n; r++) z[r] = cm[r] < 0; break;
    case SC_E_LE: for (int64_t r = 0; r < n; r++) z[r] = cm[r] <= 0; break;
    case SC_E_GT: for (int64_t r = 0; r < n; r++) z[r] = cm[r] > 0; break;
    case SC_E_GE: for (int64_t r = 0; r < n; r++) z[r] = cm[r] >= 0; break;
    }
    seal(c, o);
    return SC_OK;
}

/* --------------------------------------------------------------- logic and choices */

/* Kleene and / or. The right side's error counts unless the left side decided the row. */
static int ev_andor(ctx *c, int op, vec *o, const vec *a, const vec *b) {
    int rc = vnew(c, o, SC_LT_BOOL);
    if (!rc && (a->err || b->err)) rc = err_alloc(c, o);
    if (rc) return rc;
    bool isand = op == SC_E_AND;
    if (!o->err && a->lt == SC_LT_BOOL && b->lt == SC_LT_BOOL) { /* the common case, branch-free */
        const uint8_t *ad = a->ok, *av = a->b, *bd = b->ok, *bv = b->b;
        for (int64_t r = 0; r < c->n; r++) {
            uint8_t x = isand ? (ad[r] & !av[r]) | (bd[r] & !bv[r]) : (ad[r] & av[r]) | (bd[r] & bv[r]);
            o->ok[r] = x | (ad[r] & bd[r]);
            o->b[r] = isand ? ad[r] & bd[r] & av[r] & bv[r] : x;
        }
        return SC_OK;
    }
    for (int64_t r = 0; r < c->n; r++) {
        uint8_t av = a->lt == SC_LT_BOOL && a->b[r], bv = b->lt == SC_LT_BOOL && b->b[r];
        uint8_t ad = a->ok[r], bd = b->ok[r];
        uint8_t adecides = isand ? (ad & !av) : (ad & av); /* False and _ / True or _ */
        uint8_t bdecides = isand ? (bd & !bv) : (bd & bv);
        uint8_t both = ad & bd;
        o->ok[r] = adecides | bdecides | both;
        o->b[r] = isand ? (both & av & bv) : (adecides | bdecides);
        if (o->err) {
            uint8_t ea = a->err ? a->err[r] : 0, eb = b->err && !adecides ? b->err[r] : 0;
            o->err[r] = ea ? ea : eb;
        }
    }
    seal(c, o);
    return SC_OK;
}

/* o[r] = take[r] ? A[r] : B[r], converting int rows into a FLOAT result as Python ints. */
static int pick(ctx *c, vec *o, const uint8_t *take, const vec *A, const vec *B) {
    bool ints = o->lt == SC_LT_FLOAT && (A->lt == SC_LT_INT || B->lt == SC_LT_INT || A->isint || B->isint);
    if (ints && v_mixed(c, o)) return SC_ENOMEM;
    if (sc_ltype_is_list(o->lt)) { /* list[int] rows of a list[float] result keep their ints */
        const uint8_t LI = (uint8_t)(o->lt - 1); /* the same list type with int leaves */
        bool li = sc_list_leaf(o->lt) == SC_LT_FLOAT && (A->lt == LI || B->lt == LI || A->isint || B->isint);
        if (li && !(o->isint = cx_zalloc(c, (size_t)c->n))) return SC_ENOMEM;
        for (int64_t r = 0; r < c->n; r++) {
            const vec *s = take[r] ? A : B;
            o->ok[r] = s->lt != SC_LT_NULL && s->ok[r];
            if (!o->ok[r]) continue;
            o->s[r] = s->s[r];
            o->sl[r] = s->sl[r];
            if (li) o->isint[r] = s->lt == LI || (s->isint && s->isint[r]);
        }
        return SC_OK;
    }
    for (int64_t r = 0; r < c->n; r++) {
        const vec *s = take[r] ? A : B;
        o->ok[r] = s->lt != SC_LT_NULL && s->ok[r];
        if (!o->ok[r]) continue;
        switch (o->lt) {
        case SC_LT_FLOAT:
            if (s->lt != SC_LT_FLOAT || (s->isint && s->isint[r])) set_int_row(o, r, s->i[r]);
            else o->f[r] = s->f[r];
            break;
        case SC_LT_BOOL: o->b[r] = s->b[r]; break;
        case SC_LT_STR:
            o->s[r] = s->s[r];
            o->sl[r] = s->sl[r];
            break;
        case SC_LT_NULL: o->ok[r] = 0; break;
        default: o->i[r] = s->i[r]; break;
        }
    }
    return SC_OK;
}

/* when(cond).then(A).otherwise(B): only the taken branch's error counts. */
static int ev_when(ctx *c, const sc_enode *nd, vec *o, const vec *cond, const vec *A, const vec *B) {
    uint8_t *take = cx_alloc(c, (size_t)c->n);
    int rc = take ? vnew(c, o, nd->lt) : SC_ENOMEM;
    if (!rc && (cond->err || A->err || B->err)) rc = err_alloc(c, o);
    if (rc) return rc;
    for (int64_t r = 0; r < c->n; r++) take[r] = cond->lt == SC_LT_BOOL && cond->ok[r] && cond->b[r];
    for (int64_t r = 0; o->err && r < c->n; r++) {
        const vec *br = take[r] ? A : B;
        uint8_t ec = cond->err ? cond->err[r] : 0, eb = br->err ? br->err[r] : 0;
        o->err[r] = ec ? ec : eb;
    }
    rc = pick(c, o, take, A, B);
    seal(c, o);
    return rc;
}

/* fill_null(A, B): B (and its error) only where A is null. */
static int ev_fill(ctx *c, const sc_enode *nd, vec *o, const vec *A, const vec *B) {
    int rc = vnew(c, o, nd->lt);
    if (!rc && (A->err || B->err)) rc = err_alloc(c, o);
    if (rc) return rc;
    for (int64_t r = 0; o->err && r < c->n; r++) {
        uint8_t ea = A->err ? A->err[r] : 0, eb = B->err && !A->ok[r] ? B->err[r] : 0;
        o->err[r] = ea ? ea : eb;
    }
    rc = pick(c, o, A->ok, A, B);
    seal(c, o);
    return rc;
}

static int ev_is_null(ctx *c, const sc_enode *nd, vec *o, const vec *a) {
    int rc = vnew(c, o, SC_LT_BOOL);
    if (!rc) rc = err_unary(c, o, a);
    if (rc) return rc;
    bool want = nd->op == SC_E_IS_NOT_NULL;
    for (int64_t r = 0; r < c->n; r++) {
        o->ok[r] = 1;
        o->b[r] = (a->ok[r] != 0) == want;
    }
    seal(c, o);
    return SC_OK;
}

/* ----------------------------------------------------------------------------- cast */

static inline void cast_fail(vec *o, int64_t r) { fail_row(o, r, (uint8_t)(ERR_CAST + o->lt)); }

static void cast_fail_all(const ctx *c, vec *o) {
    for (int64_t r = 0; r < c->n; r++)
        if (o->ok[r]) cast_fail(o, r);
}

/* Scratch for one prepared string of the vector (room for its longest row + 1). */
static char *row_scratch(ctx *c, const vec *a) {
    int32_t m = 0;
    for (int64_t r = 0; r < c->n; r++)
        if (a->ok[r] && a->sl[r] > m) m = a->sl[r];
    return cx_alloc(c, (size_t)m + 1);
}

static int cast_int(ctx *c, vec *o, const vec *a) {
    int64_t n = c->n;
    switch (a->lt) {
    case SC_LT_BOOL: for (int64_t r = 0; r < n; r++) o->i[r] = a->b[r]; break;
    case SC_LT_FLOAT:
        for (int64_t r = 0; r < n; r++) {
            double f = a->f[r];
            if (!o->ok[r]) continue;
            if (a->isint && a->isint[r]) o->i[r] = a->i[r];
            else if (f != f || f < -9223372036854775808.0 || f >= 9223372036854775808.0) cast_fail(o, r);
            else o->i[r] = (int64_t)f; /* int(float) truncates */
        }
        break;
    case SC_LT_STR: {
        char *buf = row_scratch(c, a);
        if (!buf) return SC_ENOMEM;
        for (int64_t r = 0; r < n; r++) {
            int32_t m;
            if (o->ok[r] && !(num_prep(a->s[r], a->sl[r], buf, &m) && parse_int_py(buf, m, &o->i[r]))) cast_fail(o, r);
        }
        break;
    }
    default: memcpy(o->i, a->i, (size_t)n * sizeof(int64_t)); break; /* int; datetime us; date days */
    }
    return SC_OK;
}

static int cast_float(ctx *c, vec *o, const vec *a) {
    int64_t n = c->n;
    switch (a->lt) {
    case SC_LT_BOOL: for (int64_t r = 0; r < n; r++) o->f[r] = a->b[r]; break;
    case SC_LT_FLOAT: memcpy(o->f, a->f, (size_t)n * sizeof(double)); break;
    case SC_LT_DATE: /* float(epoch_us(date)): the exact product, rounded once */
        for (int64_t r = 0; r < n; r++) o->f[r] = (double)a->i[r] * 86400000000.0;
        break;
    case SC_LT_STR: {
        char *buf = row_scratch(c, a);
        if (!buf) return SC_ENOMEM;
        for (int64_t r = 0; r < n; r++) {
            int32_t m;
            if (o->ok[r] && !(num_prep(a->s[r], a->sl[r], buf, &m) && parse_float_py(buf, m, &o->f[r]))) cast_fail(o, r);
        }
        break;
    }
    default: for (int64_t r = 0; r < n; r++) o->f[r] = (double)a->i[r]; break; /* int, datetime */
    }
    return SC_OK;
}

static int cast_str(ctx *c, vec *o, const vec *a) {
    sbld sb;
    char buf[48];
    if (sb_open(c, &sb, (size_t)c->n * 8)) return SC_ENOMEM;
    locale_t l = c_locale(), prev = l ? uselocale(l) : (locale_t)0;
    int rc = SC_OK;
    for (int64_t r = 0; !rc && r < c->n; r++) {
        if (!o->ok[r]) continue;
        const char *p = buf;
        int len = 0;
        switch (a->lt) {
        case SC_LT_BOOL:
            p = a->b[r] ? "true" : "false";
            len = a->b[r] ? 4 : 5;
            break;
        case SC_LT_FLOAT:
            len = a->isint && a->isint[r] ? fmt_i64(a->i[r], buf) : fmt_f64(a->f[r], buf);
            break;
        case SC_LT_STR:
            p = a->s[r];
            len = a->sl[r];
            break;
        case SC_LT_DATETIME: len = fmt_datetime(a->i[r], buf); break;
        case SC_LT_DATE: len = fmt_date(a->i[r], buf); break;
        default: len = fmt_i64(a->i[r], buf); break;
        }
        sb_begin(&sb, r);
        rc = sb_add(&sb, p, (size_t)len);
        if (!rc) rc = sb_end(&sb, o, r);
    }
    if (l) uselocale(prev);
    if (!rc) sb_close(&sb, o);
    return rc;
}

static void cast_bool(const ctx *c, vec *o, const vec *a) {
    for (int64_t r = 0; r < c->n; r++) {
        if (!o->ok[r]) continue;
        switch (a->lt) {
        case SC_LT_BOOL: o->b[r] = a->b[r]; break;
        case SC_LT_INT: o->b[r] = a->i[r] != 0; break;
        case SC_LT_FLOAT: o->b[r] = (a->isint && a->isint[r]) ? a->i[r] != 0 : a->f[r] != 0.0; break;
        case SC_LT_STR: {
            int32_t b, e;
            u_strip(a->s[r], a->sl[r], &b, &e);
            if (word_ci(a->s[r] + b, e - b, "true")) o->b[r] = 1;
            else if (word_ci(a->s[r] + b, e - b, "false")) o->b[r] = 0;
            else cast_fail(o, r);
            break;
        }
        default: cast_fail(o, r); break; /* datetime / date */
        }
    }
}

/* s.strip() of row r as a NUL-terminated copy in buf; *nchars its code points. */
static int32_t strip_copy(const vec *a, int64_t r, char *buf, int32_t *nchars) {
    int32_t b, e, k = 0;
    u_strip(a->s[r], a->sl[r], &b, &e);
    memcpy(buf, a->s[r] + b, (size_t)(e - b));
    buf[e - b] = 0;
    for (int32_t i = 0; i < e - b; i++) k += ((uint8_t)buf[i] & 0xC0) != 0x80;
    *nchars = k;
    return e - b;
}

/* The Python int in row r of a numeric vector, if the row holds one. */
static bool int_at(const vec *a, int64_t r, int64_t *v) {
    if (a->lt != SC_LT_INT && !(a->lt == SC_LT_FLOAT && a->isint && a->isint[r])) return false;
    *v = a->i[r];
    return true;
}

/* -> datetime: datetime, date, int (epoch us within datetime's range), str (fromisoformat);
 * -> date: datetime, date, str. Anything else fails (bool, float, int -> date). */
static int cast_temporal(ctx *c, vec *o, const vec *a) {
    bool dt = o->lt == SC_LT_DATETIME;
    char *buf = a->lt == SC_LT_STR ? row_scratch(c, a) : NULL;
    if (a->lt == SC_LT_STR && !buf) return SC_ENOMEM;
    for (int64_t r = 0; r < c->n; r++) {
        int64_t v;
        int32_t nch, len;
        if (!o->ok[r]) continue;
        switch (a->lt) {
        case SC_LT_STR:
            len = strip_copy(a, r, buf, &nch);
            if (!(dt ? iso_datetime(buf, len, nch, &o->i[r]) : iso_dateonly(buf, len, &o->i[r]))) cast_fail(o, r);
            break;
        case SC_LT_DATETIME: o->i[r] = dt ? a->i[r] : floordiv_c(a->i[r], SC_US_PER_DAY); break;
        case SC_LT_DATE: o->i[r] = dt ? wmul(a->i[r], SC_US_PER_DAY) : a->i[r]; break;
        default:
            if (dt && int_at(a, r, &v) && v >= US_MIN && v <= US_MAX) o->i[r] = v; /* from_epoch_us */
            else cast_fail(o, r);
            break;
        }
    }
    return SC_OK;
}

/* cast(a, node lt) as evaluate.cast_value: failures are row errors. */
static int ev_cast(ctx *c, const sc_enode *nd, vec *o, const vec *a) {
    int rc = vnew(c, o, nd->lt);
    if (!rc) rc = err_unary(c, o, a);
    if (!rc) rc = err_alloc(c, o);
    if (rc) return rc;
    and_ok(c, o, a, NULL);
    if (a->lt == SC_LT_NULL) {
        memset(o->ok, 0, (size_t)c->n);
        return SC_OK;
    }
    switch (nd->lt) {
    case SC_LT_INT: rc = cast_int(c, o, a); break;
    case SC_LT_FLOAT: rc = cast_float(c, o, a); break;
    case SC_LT_STR: rc = cast_str(c, o, a); break;
    case SC_LT_BOOL: cast_bool(c, o, a); break;
    case SC_LT_DATETIME:
    case SC_LT_DATE: rc = cast_temporal(c, o, a); break;
    default: cast_fail_all(c, o); break; /* to null: no value converts */
    }
    seal(c, o);
    return rc;
}

/* ------------------------------------------------------------------- functions */

/* `x in values` for a number: exact int / float equality (NaN never matches). */
static bool in_numbers(const sc_enode *nd, pnum x) {
    for (int32_t k = 0; k < nd->nlist; k++) {
        if (nd->ilist && (x.isint ? x.i == nd->ilist[k] : cmp_if(nd->ilist[k], x.f) == 0)) return true;
        if (nd->flist && (x.isint ? cmp_if(x.i, nd->flist[k]) == 0 : x.f == nd->flist[k])) return true;
    }
    return false;
}

static bool in_strings(const sc_enode *nd, const char *s, int32_t n) {
    for (int32_t k = 0; nd->slist && k < nd->nlist; k++)
        if (nd->slens[k] == n && memcmp(nd->slist[k], s, (size_t)n) == 0) return true;
    return false;
}

/* `x in values` for a list: equal to one of the literal lists (encoded as x's type). */
static bool in_lists(const sc_enode *nd, const vec *a, int64_t r) {
    uint8_t et = elem_type(a, r), lt = (uint8_t)(a->lt - SC_LT_LIST);
    for (int32_t k = 0; nd->slist && k < nd->nlist; k++)
        if (sc_list_compare(a->s[r], a->sl[r], et, nd->slist[k], nd->slens[k], lt, SC_LCMP_EQ) == 1) return true;
    return false;
}

static int ev_is_in(ctx *c, const sc_enode *nd, vec *o, const vec *a) {
    int rc = vnew(c, o, SC_LT_BOOL);
    if (!rc) rc = err_unary(c, o, a);
    if (rc) return rc;
    for (int64_t r = 0; r < c->n; r++) {
        if (!a->ok[r]) { /* None in values: True when the list has None, else null */
            o->ok[r] = o->b[r] = nd->list_has_null;
            continue;
        }
        o->ok[r] = 1;
        if (sc_ltype_is_list(a->lt)) o->b[r] = in_lists(nd, a, r);
        else if (a->lt == SC_LT_STR) o->b[r] = in_strings(nd, a->s[r], a->sl[r]);
        else if (a->lt == SC_LT_BOOL) o->b[r] = in_numbers(nd, (pnum){ true, a->b[r], 0.0 });
        else o->b[r] = in_numbers(nd, pn_at(a, r));
    }
    seal(c, o);
    return SC_OK;
}

static int ev_abs(ctx *c, const sc_enode *nd, vec *o, const vec *a) {
    int rc = vnew(c, o, nd->lt);
    if (!rc) rc = err_unary(c, o, a);
    if (!rc && a->isint) rc = v_mixed(c, o);
    if (rc) return rc;
    and_ok(c, o, a, NULL);
    if (a->lt == SC_LT_INT) {
        for (int64_t r = 0; r < c->n; r++) o->i[r] = a->i[r] < 0 ? wneg(a->i[r]) : a->i[r];
    } else if (a->lt == SC_LT_FLOAT) {
        for (int64_t r = 0; r < c->n; r++) o->f[r] = fabs(a->f[r]);
        for (int64_t r = 0; a->isint && r < c->n; r++)
            if (a->isint[r]) set_int_row(o, r, a->i[r] < 0 ? wneg(a->i[r]) : a->i[r]);
    } else {
        memset(o->ok, 0, (size_t)c->n);
    }
    seal(c, o);
    return SC_OK;
}

/* Rust's f64::powi (LLVM's __powidf2): binary powering, what Polars' round computes 10**d
 * with; beyond 10**22 it can differ from pow() in the last bit. */
static double powi_f64(double a, int64_t b) {
    int recip = b < 0;
    uint64_t n = recip ? (uint64_t)0 - (uint64_t)b : (uint64_t)b;
    double r = 1.0;
    for (;;) {
        if (n & 1) r *= a;
        n >>= 1;
        if (!n) break;
        a *= a;
    }
    return recip ? 1.0 / r : r;
}

/* evaluate.round_float (Polars' round): rint(v * 10**d) / 10**d, ties to even (rint in the
 * default rounding mode), v itself when that is not finite; 10**d split into 2**d * 5**d
 * from 300 digits, v unchanged from 326. */
static double round_f64(double v, int64_t d) {
    if (d == 0) return isfinite(v) ? rint(v) : v;
    if (d >= 326 || !isfinite(v)) return v;
    volatile double t; /* no fused or reassociated arithmetic: the reference's exact steps */
    double ret;
    if (d >= 300) {
        double mul2 = ldexp(1.0, (int)d), mul5 = powi_f64(5.0, d);
        t = v * mul2;
        t = t * mul5;
        ret = isfinite(t) ? rint(t) / mul5 * (1.0 / mul2) : INFINITY;
    } else {
        double m = powi_f64(10.0, d);
        t = v * m;
        ret = isfinite(t) ? rint(t) / m : INFINITY;
    }
    return isfinite(ret) ? ret : v;
}

/* evaluate._round: ints unchanged; floats as round_f64 (Polars: half to even). */
static int ev_round(ctx *c, const sc_enode *nd, vec *o, const vec *a, const vec *d) {
    int rc = vnew(c, o, nd->lt);
    if (!rc) rc = d ? err_strict(c, o, a, d) : err_unary(c, o, a);
    if (!rc && a->isint) rc = v_mixed(c, o);
    if (rc) return rc;
    and_ok(c, o, a, d);
    if (a->lt == SC_LT_NULL || (d && d->lt != SC_LT_INT)) {
        memset(o->ok, 0, (size_t)c->n);
    } else if (a->lt == SC_LT_INT) {
        memcpy(o->i, a->i, (size_t)c->n * sizeof(int64_t));
    } else {
        for (int64_t r = 0; r < c->n; r++) {
            if (!o->ok[r]) continue;
            if (a->isint && a->isint[r]) {
                set_int_row(o, r, a->i[r]);
                continue;
            }
            o->f[r] = round_f64(a->f[r], d ? d->i[r] : 0);
        }
    }
    seal(c, o);
    return SC_OK;
}

static int ev_str_test(ctx *c, const sc_enode *nd, vec *o, const vec *a, const vec *p) {
    int rc = vnew(c, o, SC_LT_BOOL);
    if (!rc) rc = err_strict(c, o, a, p);
    if (rc) return rc;
    and_ok(c, o, a, p);
    if (a->lt != SC_LT_STR || p->lt != SC_LT_STR) memset(o->ok, 0, (size_t)c->n);
    for (int64_t r = 0; r < c->n; r++) {
        if (!o->ok[r]) continue;
        const char *s = a->s[r], *q = p->s[r];
        size_t n = (size_t)a->sl[r], m = (size_t)p->sl[r];
        bool v = m <= n;
        if (v && nd->op == SC_E_STR_CONTAINS) v = m == 0 || memmem(s, n, q, m) != NULL;
        else if (v && nd->op == SC_E_STR_STARTS_WITH) v = memcmp(s, q, m) == 0;
        else if (v) v = memcmp(s + n - m, q, m) == 0;
        o->b[r] = v;
    }
    seal(c, o);
    return SC_OK;
}

static int ev_str_case(ctx *c, const sc_enode *nd, vec *o, const vec *a) {
    sbld sb;
    int rc = vnew(c, o, SC_LT_STR);
    if (!rc) rc = err_unary(c, o, a);
    if (!rc) rc = sb_open(c, &sb, 0);
    if (rc) return rc;
    and_ok(c, o, a, NULL);
    if (a->lt != SC_LT_STR) memset(o->ok, 0, (size_t)c->n);
    for (int64_t r = 0; r < c->n; r++) {
        if (!o->ok[r]) continue;
        sb_begin(&sb, r);
        if (sb_case(&sb, a->s[r], a->sl[r], nd->op == SC_E_STR_UPPER)) return SC_ENOMEM;
        if (sb_end(&sb, o, r)) return SC_EINVAL;
    }
    sb_close(&sb, o);
    seal(c, o);
    return SC_OK;
}

static int ev_str_len(ctx *c, vec *o, const vec *a) {
    int rc = vnew(c, o, SC_LT_INT);
    if (!rc) rc = err_unary(c, o, a);
    if (rc) return rc;
    and_ok(c, o, a, NULL);
    if (a->lt != SC_LT_STR) memset(o->ok, 0, (size_t)c->n);
    for (int64_t r = 0; r < c->n; r++) {
        if (!o->ok[r]) continue;
        int64_t k = 0;
        const uint8_t *s = (const uint8_t *)a->s[r];
        for (int32_t j = 0; j < a->sl[r]; j++) k += (s[j] & 0xC0) != 0x80;
        o->i[r] = k;
    }
    seal(c, o);
    return SC_OK;
}

/* dt.*: fields of a datetime (us) or date (days), proleptic Gregorian, floor division. */
static int ev_dt(ctx *c, const sc_enode *nd, vec *o, const vec *a) {
    int rc = vnew(c, o, nd->lt);
    if (!rc) rc = err_unary(c, o, a);
    if (rc) return rc;
    and_ok(c, o, a, NULL);
    if (a->lt != SC_LT_DATETIME && a->lt != SC_LT_DATE) {
        memset(o->ok, 0, (size_t)c->n);
        seal(c, o);
        return SC_OK;
    }
    bool date = a->lt == SC_LT_DATE;
    const int64_t D = SC_US_PER_DAY, *x = a->i;
    int64_t n = c->n, *z = o->i;
    switch (nd->op) {
    case SC_E_DT_YEAR:
    case SC_E_DT_MONTH:
    case SC_E_DT_DAY:
        for (int64_t r = 0; r < n; r++) {
            int64_t y;
            int m, d;
            civil_from_days(date ? x[r] : floordiv_c(x[r], D), &y, &m, &d);
            z[r] = nd->op == SC_E_DT_YEAR ? y : nd->op == SC_E_DT_MONTH ? m : d;
        }
        break;
    case SC_E_DT_HOUR:
    case SC_E_DT_MINUTE:
    case SC_E_DT_SECOND: {
        const int64_t unit = nd->op == SC_E_DT_HOUR ? INT64_C(3600000000) : nd->op == SC_E_DT_MINUTE ? 60000000 : 1000000;
        const int64_t wrap = nd->op == SC_E_DT_HOUR ? 24 : 60;
        for (int64_t r = 0; r < n; r++) {
            int64_t t = date ? 0 : wsub(x[r], wmul(floordiv_c(x[r], D), D)); /* time of day */
            z[r] = t / unit % wrap;
        }
        break;
    }
    case SC_E_DT_WEEKDAY: /* 1970-01-01 was a Thursday (4) */
        for (int64_t r = 0; r < n; r++) {
            int64_t days = date ? x[r] : floordiv_c(x[r], D);
            z[r] = (days % 7 + 7 + 3) % 7 + 1;
        }
        break;
    case SC_E_DT_DATE:
        for (int64_t r = 0; r < n; r++) z[r] = date ? x[r] : floordiv_c(x[r], D);
        break;
    case SC_E_DT_EPOCH_US:
        for (int64_t r = 0; r < n; r++) z[r] = date ? wmul(x[r], D) : x[r];
        break;
    }
    seal(c, o);
    return SC_OK;
}

/* ------------------------------------------------------------------- user functions */

static int ev_udf(ctx *c, const sc_enode *nd, vec *o, const vec *v) {
    int rc = vnew(c, o, nd->lt);
    if (rc) return rc;
    int32_t na = nd->nlist;
    const void **vals = cx_alloc(c, (size_t)na * sizeof(void *));
    const uint8_t **oks = cx_alloc(c, (size_t)na * sizeof(uint8_t *));
    if (!vals || !oks) return SC_ENOMEM;
    bool null_typed = false, any_err = false;
    for (int32_t j = 0; j < na; j++) {
        const vec *a = &v[nd->ilist[j]];
        oks[j] = a->ok;
        any_err |= a->err != NULL;
        vals[j] = NULL;
        if (a->lt == SC_LT_NULL) {
            null_typed = true;
            continue;
        }
        switch (nd->s[j]) {
        case 'd': vals[j] = as_f64(c, a); break;
        case 'i': vals[j] = as_i64(c, a); break;
        default: vals[j] = a->b; break;
        }
        if (!vals[j]) return SC_ENOMEM;
    }
    if (any_err) { /* Python evaluates every argument before the call: the first error wins */
        if (err_alloc(c, o)) return SC_ENOMEM;
        for (int64_t r = 0; r < c->n; r++)
            for (int32_t j = 0; j < na && !o->err[r]; j++) {
                const vec *a = &v[nd->ilist[j]];
                if (a->err) o->err[r] = a->err[r];
            }
    }
    if (null_typed) {
        memset(o->ok, 0, (size_t)c->n);
    } else {
        void *out = nd->lt == SC_LT_FLOAT ? (void *)o->f : nd->lt == SC_LT_BOOL ? (void *)o->b : (void *)o->i;
        ((sc_udf_kernel)(uintptr_t)nd->i)(c->n, vals, oks, out, o->ok);
    }
    seal(c, o);
    return SC_OK;
}

/* ----------------------------------------------------------------------- evaluation */

static int eval_node(const sc_expr *e, int32_t k, const sc_batch *in, ctx *c, vec *v) {
    const sc_enode *nd = &e->nodes[k];
    vec *o = &v[k];
    if (nd->op == SC_E_COL) return ev_col(c, o, in, nd->a, nd->lt);
    if (nd->op == SC_E_LIT) return ev_lit(c, nd, o);
    const vec *a = &v[nd->a], *b = nd->b >= 0 ? &v[nd->b] : NULL, *cc = nd->c >= 0 ? &v[nd->c] : NULL;
    switch (nd->op) {
    case SC_E_NEG: return ev_neg(c, nd, o, a);
    case SC_E_NOT: return ev_not(c, o, a);
    case SC_E_ADD:
    case SC_E_SUB:
    case SC_E_MUL:
    case SC_E_DIV:
    case SC_E_FLOORDIV:
    case SC_E_MOD:
    case SC_E_POW: return ev_arith(c, nd, o, a, b);
    case SC_E_EQ:
    case SC_E_NE:
    case SC_E_LT:
    case SC_E_LE:
    case SC_E_GT:
    case SC_E_GE: return ev_cmp(c, nd, o, a, b);
    case SC_E_AND:
    case SC_E_OR: return ev_andor(c, nd->op, o, a, b);
    case SC_E_WHEN: return ev_when(c, nd, o, a, b, cc);
    case SC_E_IS_NULL:
    case SC_E_IS_NOT_NULL: return ev_is_null(c, nd, o, a);
    case SC_E_FILL_NULL: return ev_fill(c, nd, o, a, b);
    case SC_E_CAST: return ev_cast(c, nd, o, a);
    case SC_E_IS_IN: return ev_is_in(c, nd, o, a);
    case SC_E_ABS: return ev_abs(c, nd, o, a);
    case SC_E_ROUND: return ev_round(c, nd, o, a, b);
    case SC_E_STR_CONTAINS:
    case SC_E_STR_STARTS_WITH:
    case SC_E_STR_ENDS_WITH: return ev_str_test(c, nd, o, a, b);
    case SC_E_STR_LOWER:
    case SC_E_STR_UPPER: return ev_str_case(c, nd, o, a);
    case SC_E_STR_LEN_CHARS: return ev_str_len(c, o, a);
    case SC_E_UDF: return ev_udf(c, nd, o, v);
    default: return ev_dt(c, nd, o, a);
    }
}

/* Evaluate every node over `in`; *root is the last node's vector (scratch in c). */
static int eval_all(const sc_expr *e, const sc_batch *in, ctx *c, vec **root) {
    for (int32_t k = 0; k < e->n; k++) {
        const sc_enode *nd = &e->nodes[k];
        if (nd->op == SC_E_COL && (nd->a >= in->ncols || in->cols[nd->a].type != sc_ltype_physical((sc_ltype)nd->lt)))
            return SC_EINVAL;
    }
    c->n = in->nrows;
    vec *v = cx_zalloc(c, (size_t)e->n * sizeof(vec));
    if (!v) return SC_ENOMEM;
    for (int32_t k = 0; k < e->n; k++) {
        int rc = eval_node(e, k, in, c, v);
        if (rc) return rc;
    }
    *root = &v[e->n - 1];
    return SC_OK;
}

/* Rows [0, n) of column col of out = the vector (validity and null_count kept exact). */
static int write_col(const ctx *c, const vec *v, sc_batch *out, int32_t col) {
    sc_column *k = &out->cols[col];
    int64_t n = c->n;
    switch (k->type) {
    case SC_COL_INT64: {
        int64_t *d = k->values;
        for (int64_t r = 0; r < n; r++) d[r] = v->ok[r] ? v->i[r] : 0;
        break;
    }
    case SC_COL_DOUBLE: {
        double *d = k->values;
        for (int64_t r = 0; r < n; r++) d[r] = v->ok[r] ? v->f[r] : 0.0;
        break;
    }
    case SC_COL_BOOL:
        for (int64_t r = 0; r < n; r++) sc_bit_set(k->values, r, v->ok[r] && v->b[r]);
        break;
    case SC_COL_UTF8: {
        char *conv = NULL; /* list[int] rows of a list[float] vector, re-encoded */
        int rc = SC_OK;
        for (int64_t r = 0; !rc && r < n; r++) {
            if (!v->ok[r]) {
                sc_batch_set_null(out, col, r);
                continue;
            }
            const char *p = v->s[r];
            if (v->isint && v->isint[r] && sc_ltype_is_list(v->lt)) {
                char *q = realloc(conv, (size_t)v->sl[r] + 1);
                if (!q) {
                    rc = SC_ENOMEM;
                    break;
                }
                conv = q;
                sc_list_ints_to_floats(p, v->sl[r], (uint8_t)(v->lt - SC_LT_LIST - 1), conv);
                p = conv;
            }
            rc = sc_batch_put_utf8(out, col, r, p, v->sl[r]);
        }
        free(conv);
        return rc;
    }
    }
    for (int64_t r = 0; r < n; r++) {
        bool was = sc_bit_get(k->validity, r), now = v->ok[r];
        if (was != now) {
            sc_bit_set(k->validity, r, now);
            k->null_count += was ? 1 : -1;
        }
    }
    return SC_OK;
}

/* Evaluate into out[col]; codes[r] = the row's first error code (ERR_*), left if set. */
static int eval_into(const sc_expr *e, const sc_batch *in, sc_batch *out, int32_t col, uint8_t *codes) {
    if (col < 0 || col >= out->ncols || out->capacity < in->nrows ||
        out->cols[col].type != sc_ltype_physical(sc_expr_type(e)))
        return SC_EINVAL;
    ctx c = { 0, NULL, 0, 0 };
    vec *root = NULL;
    int rc = eval_all(e, in, &c, &root);
    if (!rc) rc = write_col(&c, root, out, col);
    for (int64_t r = 0; !rc && codes && root->err && r < c.n; r++)
        if (!codes[r]) codes[r] = root->err[r];
    cx_free(&c);
    return rc;
}

int sc_expr_eval(const sc_expr *e, const sc_batch *in, sc_batch *out, int32_t col, uint8_t *err) {
    if (!e || !in || !out) return SC_EINVAL;
    int64_t n = in->nrows;
    uint8_t *codes = n ? calloc((size_t)n, 1) : NULL;
    if (n && !codes) return SC_ENOMEM;
    int rc = eval_into(e, in, out, col, codes);
    for (int64_t r = 0; !rc && err && r < n; r++) err[r] |= codes[r] != 0;
    free(codes);
    return rc;
}

/* ------------------------------------------------------------------- compilation */

static int unify(int a, int b) {
    if (a == b) return a;
    if (a == SC_LT_NULL) return b;
    if (b == SC_LT_NULL) return a;
    if (a >= SC_LT_LIST && b >= SC_LT_LIST) { /* element types unify (list[null] with any) */
        int u = unify(a - SC_LT_LIST, b - SC_LT_LIST);
        return u < 0 ? -1 : SC_LT_LIST + u;
    }
    if ((a == SC_LT_INT && b == SC_LT_FLOAT) || (a == SC_LT_FLOAT && b == SC_LT_INT)) return SC_LT_FLOAT;
    return -1;
}

static bool num_or_null(int t) { return t == SC_LT_INT || t == SC_LT_FLOAT || t == SC_LT_NULL; }
static bool bool_or_null(int t) { return t == SC_LT_BOOL || t == SC_LT_NULL; }

static int arith_type(int op, int a, int b) {
    if (op == SC_E_ADD && a == SC_LT_STR && (b == SC_LT_STR || b == SC_LT_NULL)) return SC_LT_STR;
    if (!num_or_null(a) || !num_or_null(b)) return -1;
    if (op == SC_E_DIV || (op == SC_E_POW && (a == SC_LT_FLOAT || b == SC_LT_FLOAT))) return SC_LT_FLOAT;
    if (op == SC_E_POW) return a == SC_LT_INT && b == SC_LT_INT ? SC_LT_INT : SC_LT_FLOAT;
    int u = unify(a, b);
    return u == SC_LT_NULL ? SC_LT_INT : u;
}

static int dt_type(int op, int a) {
    if (a != SC_LT_DATETIME && a != SC_LT_DATE && a != SC_LT_NULL) return -1;
    if (a == SC_LT_DATE && (op == SC_E_DT_HOUR || op == SC_E_DT_MINUTE || op == SC_E_DT_SECOND)) return -1;
    return op == SC_E_DT_DATE ? SC_LT_DATE : SC_LT_INT;
}

static bool list_ok(const sc_enode *nd) {
    if (nd->nlist < 0) return false;
    if (nd->nlist == 0) return true;
    return (nd->ilist || nd->flist || nd->slist) && (!nd->slist || nd->slens);
}

/* The result type compiler._Typer gives node k (its children are checked already), or -1. */
static int node_type(const sc_enode *nodes, int32_t k, const sc_schema *in) {
    const sc_enode *nd = &nodes[k];
    if (nd->op == SC_E_COL) return nd->a >= 0 && nd->a < in->ncols ? in->lt[nd->a] : -1;
    if (nd->op == SC_E_LIT) {
        if (sc_ltype_is_list(nd->lt)) { /* an encoded list literal */
            int64_t cnt;
            bool ok = sc_list_leaf(nd->lt) <= SC_LT_DATE &&
                      (nd->is_null || (nd->slen >= 0 && (nd->s || !nd->slen) &&
                                       sc_list_count(nd->s, nd->slen, (uint8_t)(nd->lt - SC_LT_LIST), &cnt) == SC_OK));
            return ok ? nd->lt : -1;
        }
        return nd->lt <= SC_LT_DATE && (nd->is_null || nd->lt != SC_LT_STR || nd->slen >= 0) ? nd->lt : -1;
    }
    int A = nd->a >= 0 && nd->a < k ? nodes[nd->a].lt : -1;
    int B = nd->b >= 0 && nd->b < k ? nodes[nd->b].lt : -1;
    int C = nd->c >= 0 && nd->c < k ? nodes[nd->c].lt : -1;
    if (A < 0) return -1;
    switch (nd->op) {
    case SC_E_NEG:
    case SC_E_ABS: return num_or_null(A) ? A : -1;
    case SC_E_NOT: return bool_or_null(A) ? SC_LT_BOOL : -1;
    case SC_E_ADD:
    case SC_E_SUB:
    case SC_E_MUL:
    case SC_E_DIV:
    case SC_E_FLOORDIV:
    case SC_E_MOD:
    case SC_E_POW: return B < 0 ? -1 : arith_type(nd->op, A, B);
    case SC_E_EQ:
    case SC_E_NE:
    case SC_E_LT:
    case SC_E_LE:
    case SC_E_GT:
    case SC_E_GE: return B >= 0 && (A == SC_LT_NULL || B == SC_LT_NULL || unify(A, B) >= 0) ? SC_LT_BOOL : -1;
    case SC_E_AND:
    case SC_E_OR: return bool_or_null(A) && bool_or_null(B) ? SC_LT_BOOL : -1;
    case SC_E_WHEN: return bool_or_null(A) && B >= 0 && C >= 0 ? unify(B, C) : -1;
    case SC_E_IS_NULL:
    case SC_E_IS_NOT_NULL: return SC_LT_BOOL;
    case SC_E_FILL_NULL: return B < 0 ? -1 : unify(A, B);
    case SC_E_CAST: return nd->lt <= SC_LT_DATE ? nd->lt : -1;
    case SC_E_IS_IN: /* a list subject: slist holds encoded lists of its element type */
        if (A >= SC_LT_LIST) return list_ok(nd) && !nd->ilist && !nd->flist ? SC_LT_BOOL : -1;
        return list_ok(nd) ? SC_LT_BOOL : -1;
    case SC_E_ROUND:
        if (nd->b >= 0 && B != SC_LT_INT && B != SC_LT_NULL) return -1;
        return num_or_null(A) ? A : -1;
    case SC_E_STR_CONTAINS:
    case SC_E_STR_STARTS_WITH:
    case SC_E_STR_ENDS_WITH: return (A == SC_LT_STR || A == SC_LT_NULL) && B == SC_LT_STR ? SC_LT_BOOL : -1;
    case SC_E_STR_LOWER:
    case SC_E_STR_UPPER:
    case SC_E_STR_LEN_CHARS:
        if (A != SC_LT_STR && A != SC_LT_NULL) return -1;
        return nd->op == SC_E_STR_LEN_CHARS ? SC_LT_INT : SC_LT_STR;
    case SC_E_DT_YEAR:
    case SC_E_DT_MONTH:
    case SC_E_DT_DAY:
    case SC_E_DT_HOUR:
    case SC_E_DT_MINUTE:
    case SC_E_DT_SECOND:
    case SC_E_DT_WEEKDAY:
    case SC_E_DT_DATE:
    case SC_E_DT_EPOCH_US: return dt_type(nd->op, A);
    case SC_E_UDF: {
        if (nd->nlist < 1 || !nd->ilist || !nd->s || nd->slen != nd->nlist || nd->i == 0 || nd->ilist[0] != nd->a)
            return -1;
        for (int32_t j = 0; j < nd->nlist; j++) {
            int64_t x = nd->ilist[j];
            if (x < 0 || x >= k) return -1;
            int T = nodes[x].lt;
            bool ok = T == SC_LT_NULL || (nd->s[j] == 'd' && (T == SC_LT_INT || T == SC_LT_FLOAT)) ||
                      (nd->s[j] == 'i' && T == SC_LT_INT) || (nd->s[j] == 'b' && T == SC_LT_BOOL);
            if (!ok) return -1;
        }
        return nd->lt == SC_LT_FLOAT || nd->lt == SC_LT_INT || nd->lt == SC_LT_BOOL ? nd->lt : -1;
    }
    default: return -1;
    }
}

static void *dup_bytes(const void *p, size_t n) {
    void *q = malloc(n ? n : 1);
    if (q && n) memcpy(q, p, n);
    return q;
}

/* Own copies of a node's literal string and lists. */
static int copy_payload(sc_enode *d, const sc_enode *s) {
    d->s = NULL;
    d->ilist = NULL;
    d->flist = NULL;
    d->slist = NULL;
    d->slens = NULL;
    if (s->op == SC_E_LIT && is_strlike(s->lt) && !s->is_null) {
        if (s->slen && !s->s) return SC_EINVAL;
        if (!(d->s = dup_bytes(s->s, (size_t)s->slen))) return SC_ENOMEM;
    }
    if (s->op == SC_E_UDF) {
        if (s->nlist < 1 || !s->ilist || !s->s) return SC_EINVAL;
        if (!(d->ilist = dup_bytes(s->ilist, (size_t)s->nlist * sizeof(int64_t)))) return SC_ENOMEM;
        if (!(d->s = dup_bytes(s->s, (size_t)s->slen))) return SC_ENOMEM;
        return SC_OK;
    }
    if (s->op != SC_E_IS_IN || s->nlist == 0) return SC_OK;
    size_t n = (size_t)s->nlist;
    if (s->ilist && !(d->ilist = dup_bytes(s->ilist, n * sizeof(int64_t)))) return SC_ENOMEM;
    if (s->flist && !(d->flist = dup_bytes(s->flist, n * sizeof(double)))) return SC_ENOMEM;
    if (!s->slist) return SC_OK;
    const char **sl = calloc(n, sizeof(char *));
    d->slist = sl;
    if (!sl || !(d->slens = dup_bytes(s->slens, n * sizeof(int32_t)))) return SC_ENOMEM;
    for (size_t k = 0; k < n; k++) {
        if (s->slens[k] < 0 || (s->slens[k] && !s->slist[k])) return SC_EINVAL;
        if (!(sl[k] = dup_bytes(s->slist[k], (size_t)s->slens[k]))) return SC_ENOMEM;
    }
    return SC_OK;
}

static void free_payload(sc_enode *d) {
    free((void *)d->s);
    free((void *)d->ilist);
    free((void *)d->flist);
    for (int32_t k = 0; d->slist && k < d->nlist; k++) free((void *)d->slist[k]);
    free((void *)d->slist);
    free((void *)d->slens);
}

int sc_expr_create(sc_expr **out, const sc_enode *nodes, int32_t nnodes, const sc_schema *in) {
    if (!out || !nodes || nnodes <= 0 || !in) return SC_EINVAL;
    for (int32_t k = 0; k < nnodes; k++)
        if (node_type(nodes, k, in) != nodes[k].lt) return SC_EINVAL;
    sc_expr *e = calloc(1, sizeof *e);
    if (!e || !(e->nodes = calloc((size_t)nnodes, sizeof(sc_enode)))) {
        free(e);
        return SC_ENOMEM;
    }
    int rc = SC_OK;
    for (int32_t k = 0; k < nnodes; k++) {
        e->nodes[k] = nodes[k];
        e->n = k + 1;
        rc = copy_payload(&e->nodes[k], &nodes[k]);
        if (rc) break;
    }
    if (rc) {
        sc_expr_destroy(e);
        return rc;
    }
    *out = e;
    return SC_OK;
}

void sc_expr_destroy(sc_expr *e) {
    if (!e) return;
    for (int32_t k = 0; k < e->n; k++) free_payload(&e->nodes[k]);
    free(e->nodes);
    free(e);
}

sc_ltype sc_expr_type(const sc_expr *e) { return (sc_ltype)e->nodes[e->n - 1].lt; }

/* ----------------------------------------------------------------------- operators */

static const char *lt_name(int lt) {
    static const char *names[] = { "null", "int", "float", "bool", "str", "datetime", "date" };
    return lt >= 0 && lt <= SC_LT_DATE ? names[lt] : "?";
}

/* The fallback dead-letter reason (the driver re-derives the reference's exact text). */
static void reason(char *buf, size_t cap, uint8_t code, int32_t col) {
    int n = code == ERR_POW       ? snprintf(buf, cap, "integer ** negative exponent; cast to float first")
            : code == ERR_LISTCMP ? snprintf(buf, cap, "lists with a null element where they differ cannot be ordered")
                                  : snprintf(buf, cap, "cannot cast value to %s", lt_name(code - ERR_CAST));
    if (col >= 0 && n > 0 && (size_t)n < cap) snprintf(buf + n, cap - (size_t)n, " (output column %d)", (int)col);
}

static bool schema_eq(const sc_schema *a, const sc_schema *b) {
    return a->ncols == b->ncols && (a->ncols == 0 || memcmp(a->lt, b->lt, (size_t)a->ncols) == 0);
}

typedef struct filter_st {
    sc_op_base base;
    sc_expr *pred;
} filter_st;

int sc_op_filter_create(void **st, const sc_op_base *base, const sc_enode *pred, int32_t npred) {
    if (!st || !base || !schema_eq(&base->in, &base->out)) return SC_EINVAL;
    filter_st *f = calloc(1, sizeof *f);
    if (!f) return SC_ENOMEM;
    int rc = sc_expr_create(&f->pred, pred, npred, &base->in);
    if (!rc && !bool_or_null(sc_expr_type(f->pred))) rc = SC_EINVAL;
    if (rc) {
        sc_expr_destroy(f->pred);
        free(f);
        return rc;
    }
    rc = sc_op_base_copy(&f->base, base);
    if (rc) {
        sc_expr_destroy(f->pred);
        free(f);
        return rc;
    }
    *st = f;
    return SC_OK;
}

/* Rows of `in` with keep[r] into a new output batch (*out NULL when none). */
static int gather(sc_op_base *base, sc_batch *in, const uint8_t *keep, int64_t nkeep, sc_batch **out) {
    *out = NULL;
    if (nkeep == 0) return SC_OK;
    int64_t stack_idx[1024], *idx = stack_idx;
    if (in->nrows > 1024 && !(idx = malloc((size_t)in->nrows * sizeof *idx))) return SC_ENOMEM;
    int64_t j = 0;
    for (int64_t r = 0; r < in->nrows; r++) {
        idx[j] = r;
        j += keep[r] != 0;
    }
    int rc = sc_op_new_out(base, in, out);
    if (!rc) rc = sc_batch_take(*out, in, idx, j);
    if (idx != stack_idx) free(idx);
    if (rc && *out) {
        sc_batch_release(*out);
        *out = NULL;
    }
    return rc;
}

/* Send error rows to the side log; keep[r] = 0 for them. */
static int dead_rows(sc_op_base *base, const sc_batch *in, const uint8_t *code, const int32_t *col, uint8_t *keep) {
    char why[128];
    for (int64_t r = 0; r < in->nrows; r++) {
        if (!code[r]) continue;
        keep[r] = 0;
        reason(why, sizeof why, code[r], col ? col[r] : -1);
        int rc = sc_op_dead(base, in, r, why);
        if (rc) return rc;
    }
    return SC_OK;
}

int sc_op_filter_run(void *vst, sc_batch *in, sc_batch **out) {
    filter_st *st = vst;
    *out = NULL;
    if (in->eos) {
        *out = in;
        return SC_OK;
    }
    int64_t n = in->nrows, npass = 0, ndead = 0;
    sc_count_in(&st->base, n);
    ctx c = { 0, NULL, 0, 0 };
    vec *v = NULL;
    uint8_t *keep = NULL;
    int rc = n ? eval_all(st->pred, in, &c, &v) : SC_OK;
    if (!rc && n && !(keep = cx_alloc(&c, (size_t)n))) rc = SC_ENOMEM;
    for (int64_t r = 0; !rc && r < n; r++) {
        keep[r] = v->lt == SC_LT_BOOL && v->ok[r] && v->b[r];
        npass += keep[r];
        ndead += v->err && v->err[r];
    }
    if (!rc && ndead) rc = dead_rows(&st->base, in, v->err, NULL, keep);
    if (!rc) sc_count_filtered(&st->base, n - npass - ndead);
    if (!rc && npass == n && n) {
        *out = in; /* every row passes: forward the batch itself */
        in = NULL;
    } else if (!rc) {
        rc = gather(&st->base, in, keep, npass, out);
    }
    if (!rc) sc_count_out(&st->base, npass);
    if (in) sc_batch_release(in);
    cx_free(&c);
    return rc;
}

void sc_op_filter_destroy(void *vst) {
    filter_st *st = vst;
    if (!st) return;
    sc_expr_destroy(st->pred);
    sc_op_base_free(&st->base);
    free(st);
}

typedef struct project_st {
    sc_op_base base;
    int32_t nout;
    int32_t *src; /* per output column: input column, or -(expression + 1) */
    int32_t nex;
    sc_expr **ex;
} project_st;

void sc_op_project_destroy(void *vst) {
    project_st *st = vst;
    if (!st) return;
    for (int32_t j = 0; st->ex && j < st->nex; j++) sc_expr_destroy(st->ex[j]);
    free(st->ex);
    free(st->src);
    sc_op_base_free(&st->base);
    free(st);
}

/* Does output column k's source fit the output schema? */
static bool project_col_ok(const project_st *st, const sc_op_base *base, int32_t k) {
    int32_t s = k < SC_NHIDDEN ? k : st->src[k];
    sc_col_type want = sc_ltype_physical((sc_ltype)base->out.lt[k]);
    if (s >= 0) return s < base->in.ncols && sc_ltype_physical((sc_ltype)base->in.lt[s]) == want;
    int32_t j = -s - 1;
    return j < st->nex && sc_ltype_physical(sc_expr_type(st->ex[j])) == want;
}

int sc_op_project_create(void **st, const sc_op_base *base, const int32_t *src, int32_t nout,
                         const sc_enode *const *exprs, const int32_t *nnodes, int32_t nexprs) {
    if (!st || !base || !src || nout < SC_NHIDDEN || nout != base->out.ncols || base->in.ncols < SC_NHIDDEN ||
        nexprs < 0 || (nexprs && (!exprs || !nnodes)))
        return SC_EINVAL;
    project_st *p = calloc(1, sizeof *p);
    if (!p) return SC_ENOMEM;
    p->nout = nout;
    p->src = malloc((size_t)nout * sizeof(int32_t));
    p->ex = calloc((size_t)(nexprs ? nexprs : 1), sizeof(sc_expr *));
    int rc = p->src && p->ex ? SC_OK : SC_ENOMEM;
    if (!rc) memcpy(p->src, src, (size_t)nout * sizeof(int32_t));
    for (int32_t j = 0; !rc && j < nexprs; j++) {
        rc = sc_expr_create(&p->ex[j], exprs[j], nnodes[j], &base->in);
        p->nex = rc ? j : j + 1;
    }
    for (int32_t k = 0; !rc && k < nout; k++)
        if (!project_col_ok(p, base, k)) rc = SC_EINVAL;
    if (rc) {
        sc_op_project_destroy(p); /* base not taken yet: zeroed, nothing to free */
        return rc;
    }
    rc = sc_op_base_copy(&p->base, base);
    if (rc) {
        sc_op_project_destroy(p);
        return rc;
    }
    *st = p;
    return SC_OK;
}

/* dst[dc] rows [0, n) = src[sc] rows [0, n). */
static int copy_col(sc_batch *dst, int32_t dc, const sc_batch *src, int32_t scol, int64_t n) {
    const sc_column *s = &src->cols[scol];
    sc_column *d = &dst->cols[dc];
    if (s->type == SC_COL_UTF8 && n > 0) {
        int32_t first = s->offsets[0];
        int64_t bytes = (int64_t)s->offsets[n] - first;
        if (bytes > d->data_cap) {
            if (dst->pool) return SC_EFULL;
            char *p = realloc(d->data, (size_t)bytes);
            if (!p) return SC_ENOMEM;
            d->data = p;
            d->data_cap = bytes;
        }
        memcpy(d->data, s->data + first, (size_t)bytes);
        for (int64_t r = 0; r <= n; r++) d->offsets[r] = s->offsets[r] - first;
    } else if (s->type == SC_COL_BOOL) {
        memcpy(d->values, s->values, (size_t)(n + 7) / 8);
    } else {
        memcpy(d->values, s->values, (size_t)n * 8);
    }
    memcpy(d->validity, s->validity, (size_t)(n + 7) / 8);
    d->null_count = 0;
    for (int64_t r = 0; r < n; r++) d->null_count += !sc_bit_get(d->validity, r);
    return SC_OK;
}

/* Evaluate / copy every output column of `in` into o (code[r]: first error, col[r]: where).
 * Expressions first; then columns passed through. When no row failed, a column passed through
 * once is moved (buffers swapped with o's empty ones) instead of copied: `in` is released
 * right after and nothing reads it again. */
static int project_fill(project_st *st, sc_batch *in, sc_batch *o, uint8_t *code, int32_t *col) {
    int64_t n = in->nrows;
    bool failed = false;
    for (int32_t k = SC_NHIDDEN; k < st->nout; k++) {
        int32_t s = st->src[k];
        if (s >= 0) continue;
        int rc = eval_into(st->ex[-s - 1], in, o, k, code);
        if (rc) return rc;
        for (int64_t r = 0; r < n; r++)
            if (code[r] && col[r] < 0) {
                col[r] = k;
                failed = true;
            }
    }
    bool movable = !failed && in->pool == NULL && in->capacity == o->capacity;
    for (int32_t k = 0; k < st->nout; k++) {
        int32_t s = k < SC_NHIDDEN ? k : st->src[k];
        if (s < 0) continue;
        int uses = 0;
        for (int32_t j = 0; movable && j < st->nout; j++) uses += (j < SC_NHIDDEN ? j : st->src[j]) == s;
        if (movable && uses == 1) {
            sc_column t = o->cols[k];
            o->cols[k] = in->cols[s];
            in->cols[s] = t;
            continue;
        }
        int rc = copy_col(o, k, in, s, n);
        if (rc) return rc;
    }
    o->nrows = n;
    return SC_OK;
}

int sc_op_project_run(void *vst, sc_batch *in, sc_batch **out) {
    project_st *st = vst;
    *out = NULL;
    if (in->eos) {
        *out = in;
        return SC_OK;
    }
    int64_t n = in->nrows, ndead = 0;
    sc_count_in(&st->base, n);
    if (n == 0) {
        sc_batch_release(in);
        return SC_OK;
    }
    sc_batch *o = NULL;
    uint8_t *code = calloc((size_t)n, 2);
    int32_t *col = malloc((size_t)n * sizeof(int32_t));
    int rc = code && col ? sc_op_new_out(&st->base, in, &o) : SC_ENOMEM;
    for (int64_t r = 0; !rc && r < n; r++) col[r] = -1;
    if (!rc) rc = project_fill(st, in, o, code, col);
    for (int64_t r = 0; !rc && r < n; r++) ndead += code[r] != 0;
    if (!rc && ndead) {
        uint8_t *keep = code + n; /* second half of the allocation */
        memset(keep, 1, (size_t)n);
        rc = dead_rows(&st->base, in, code, col, keep);
        sc_batch *kept = NULL;
        if (!rc) rc = gather(&st->base, o, keep, n - ndead, &kept);
        sc_batch_release(o);
        o = kept;
    }
    if (!rc && o) sc_count_out(&st->base, o->nrows);
    if (rc && o) sc_batch_release(o);
    else *out = o;
    sc_batch_release(in);
    free(code);
    free(col);
    return rc;
}

/* ------------------------------------------------------------------ Unicode tables */

/* Generated from CPython 3.11 (unicodedata 14.0.0) by probing str methods over every code
 * point (surrogates excluded):
 *   *_RUNS   c -> c + delta for c = cp, cp + stride, ... (n of them): str.lower / str.upper
 *            of single characters that map to one character (spans never overlap);
 *   *_MULTI  characters whose lower / upper is 2-3 characters (SpecialCasing);
 *   CASE_IGNORABLE, CASED  ranges for the final-sigma rule, found as: c is case-ignorable
 *            iff ("A" + c + "Σ").lower() ends in "ς" but (c + "Σ").lower() does not; c is
 *            (in CASED) cased and not case-ignorable iff (c + "Σ").lower() ends in "ς";
 *   DECIMAL_ZERO  the zero of each run of ten Unicode decimal digits (str.isdecimal). */

typedef struct case_run {
    uint32_t cp;
    uint16_t n;
    uint8_t stride;
    int32_t delta;
} case_run;

typedef struct case_multi {
    uint32_t cp;
    uint32_t to[3]; /* 0-terminated */
} case_multi;

static const case_run LOWER_RUNS[] = {
    {0x41, 26, 1, 32}, {0xC0, 23, 1, 32}, {0xD8, 7, 1, 32}, {0x100, 24, 2, 1},
    {0x132, 3, 2, 1}, {0x139, 8, 2, 1}, {0x14A, 23, 2, 1}, {0x178, 1, 1, -121},
    {0x179, 3, 2, 1}, {0x181, 1, 1, 210}, {0x182, 2, 2, 1}, {0x186, 1, 1, 206},
    {0x187, 1, 1, 1}, {0x189, 2, 1, 205}, {0x18B, 1, 1, 1}, {0x18E, 1, 1, 79},
    {0x18F, 1, 1, 202}, {0x190, 1, 1, 203}, {0x191, 1, 1, 1}, {0x193, 1, 1, 205},
    {0x194, 1, 1, 207}, {0x196, 1, 1, 211}, {0x197, 1, 1, 209}, {0x198, 1, 1, 1},
    {0x19C, 1, 1, 211}, {0x19D, 1, 1, 213}, {0x19F, 1, 1, 214}, {0x1A0, 3, 2, 1},
    {0x1A6, 1, 1, 218}, {0x1A7, 1, 1, 1}, {0x1A9, 1, 1, 218}, {0x1AC, 1, 1, 1},
    {0x1AE, 1, 1, 218}, {0x1AF, 1, 1, 1}, {0x1B1, 2, 1, 217}, {0x1B3, 2, 2, 1},
    {0x1B7, 1, 1, 219}, {0x1B8, 1, 1, 1}, {0x1BC, 1, 1, 1}, {0x1C4, 1, 1, 2},
    {0x1C5, 1, 1, 1}, {0x1C7, 1, 1, 2}, {0x1C8, 1, 1, 1}, {0x1CA, 1, 1, 2},
    {0x1CB, 9, 2, 1}, {0x1DE, 9, 2, 1}, {0x1F1, 1, 1, 2}, {0x1F2, 2, 2, 1},
    {0x1F6, 1, 1, -97}, {0x1F7, 1, 1, -56}, {0x1F8, 20, 2, 1}, {0x220, 1, 1, -130},
    {0x222, 9, 2, 1}, {0x23A, 1, 1, 10795}, {0x23B, 1, 1, 1}, {0x23D, 1, 1, -163},
    {0x23E, 1, 1, 10792}, {0x241, 1, 1, 1}, {0x243, 1, 1, -195}, {0x244, 1, 1, 69},
    {0x245, 1, 1, 71}, {0x246, 5, 2, 1}, {0x370, 2, 2, 1}, {0x376, 1, 1, 1},
    {0x37F, 1, 1, 116}, {0x386, 1, 1, 38}, {0x388, 3, 1, 37}, {0x38C, 1, 1, 64},
    {0x38E, 2, 1, 63}, {0x391, 17, 1, 32}, {0x3A3, 9, 1, 32}, {0x3CF, 1, 1, 8},
    {0x3D8, 12, 2, 1}, {0x3F4, 1, 1, -60}, {0x3F7, 1, 1, 1}, {0x3F9, 1, 1, -7},
    {0x3FA, 1, 1, 1}, {0x3FD, 3, 1, -130}, {0x400, 16, 1, 80}, {0x410, 32, 1, 32},
    {0x460, 17, 2, 1}, {0x48A, 27, 2, 1}, {0x4C0, 1, 1, 15}, {0x4C1, 7, 2, 1},
    {0x4D0, 48, 2, 1}, {0x531, 38, 1, 48}, {0x10A0, 38, 1, 7264}, {0x10C7, 1, 1, 7264},
    {0x10CD, 1, 1, 7264}, {0x13A0, 80, 1, 38864}, {0x13F0, 6, 1, 8}, {0x1C90, 43, 1, -3008},
    {0x1CBD, 3, 1, -3008}, {0x1E00, 75, 2, 1}, {0x1E9E, 1, 1, -7615}, {0x1EA0, 48, 2, 1},
    {0x1F08, 8, 1, -8}, {0x1F18, 6, 1, -8}, {0x1F28, 8, 1, -8}, {0x1F38, 8, 1, -8},
    {0x1F48, 6, 1, -8}, {0x1F59, 4, 2, -8}, {0x1F68, 8, 1, -8}, {0x1F88, 8, 1, -8},
    {0x1F98, 8, 1, -8}, {0x1FA8, 8, 1, -8}, {0x1FB8, 2, 1, -8}, {0x1FBA, 2, 1, -74},
    {0x1FBC, 1, 1, -9}, {0x1FC8, 4, 1, -86}, {0x1FCC, 1, 1, -9}, {0x1FD8, 2, 1, -8},
    {0x1FDA, 2, 1, -100}, {0x1FE8, 2, 1, -8}, {0x1FEA, 2, 1, -112}, {0x1FEC, 1, 1, -7},
    {0x1FF8, 2, 1, -128}, {0x1FFA, 2, 1, -126}, {0x1FFC, 1, 1, -9}, {0x2126, 1, 1, -7517},
    {0x212A, 1, 1, -8383}, {0x212B, 1, 1, -8262}, {0x2132, 1, 1, 28}, {0x2160, 16, 1, 16},
    {0x2183, 1, 1, 1}, {0x24B6, 26, 1, 26}, {0x2C00, 48, 1, 48}, {0x2C60, 1, 1, 1},
    {0x2C62, 1, 1, -10743}, {0x2C63, 1, 1, -3814}, {0x2C64, 1, 1, -10727}, {0x2C67, 3, 2, 1},
    {0x2C6D, 1, 1, -10780}, {0x2C6E, 1, 1, -10749}, {0x2C6F, 1, 1, -10783}, {0x2C70, 1, 1, -10782},
    {0x2C72, 1, 1, 1}, {0x2C75, 1, 1, 1}, {0x2C7E, 2, 1, -10815}, {0x2C80, 50, 2, 1},
    {0x2CEB, 2, 2, 1}, {0x2CF2, 1, 1, 1}, {0xA640, 23, 2, 1}, {0xA680, 14, 2, 1},
    {0xA722, 7, 2, 1}, {0xA732, 31, 2, 1}, {0xA779, 2, 2, 1}, {0xA77D, 1, 1, -35332},
    {0xA77E, 5, 2, 1}, {0xA78B, 1, 1, 1}, {0xA78D, 1, 1, -42280}, {0xA790, 2, 2, 1},
    {0xA796, 10, 2, 1}, {0xA7AA, 1, 1, -42308}, {0xA7AB, 1, 1, -42319}, {0xA7AC, 1, 1, -42315},
    {0xA7AD, 1, 1, -42305}, {0xA7AE, 1, 1, -42308}, {0xA7B0, 1, 1, -42258}, {0xA7B1, 1, 1, -42282},
    {0xA7B2, 1, 1, -42261}, {0xA7B3, 1, 1, 928}, {0xA7B4, 8, 2, 1}, {0xA7C4, 1, 1, -48},
    {0xA7C5, 1, 1, -42307}, {0xA7C6, 1, 1, -35384}, {0xA7C7, 2, 2, 1}, {0xA7D0, 1, 1, 1},
    {0xA7D6, 2, 2, 1}, {0xA7F5, 1, 1, 1}, {0xFF21, 26, 1, 32}, {0x10400, 40, 1, 40},
    {0x104B0, 36, 1, 40}, {0x10570, 11, 1, 39}, {0x1057C, 15, 1, 39}, {0x1058C, 7, 1, 39},
    {0x10594, 2, 1, 39}, {0x10C80, 51, 1, 64}, {0x118A0, 32, 1, 32}, {0x16E40, 32, 1, 32},
    {0x1E900, 34, 1, 34},
};
static const case_multi LOWER_MULTI[] = {
    {0x130, {0x69, 0x307, 0x0}},
};
static const case_run UPPER_RUNS[] = {
    {0x61, 26, 1, -32}, {0xB5, 1, 1, 743}, {0xE0, 23, 1, -32}, {0xF8, 7, 1, -32},
    {0xFF, 1, 1, 121}, {0x101, 24, 2, -1}, {0x131, 1, 1, -232}, {0x133, 3, 2, -1},
    {0x13A, 8, 2, -1}, {0x14B, 23, 2, -1}, {0x17A, 3, 2, -1}, {0x17F, 1, 1, -300},
    {0x180, 1, 1, 195}, {0x183, 2, 2, -1}, {0x188, 1, 1, -1}, {0x18C, 1, 1, -1},
    {0x192, 1, 1, -1}, {0x195, 1, 1, 97}, {0x199, 1, 1, -1}, {0x19A, 1, 1, 163},
    {0x19E, 1, 1, 130}, {0x1A1, 3, 2, -1}, {0x1A8, 1, 1, -1}, {0x1AD, 1, 1, -1},
    {0x1B0, 1, 1, -1}, {0x1B4, 2, 2, -1}, {0x1B9, 1, 1, -1}, {0x1BD, 1, 1, -1},
    {0x1BF, 1, 1, 56}, {0x1C5, 1, 1, -1}, {0x1C6, 1, 1, -2}, {0x1C8, 1, 1, -1},
    {0x1C9, 1, 1, -2}, {0x1CB, 1, 1, -1}, {0x1CC, 1, 1, -2}, {0x1CE, 8, 2, -1},
    {0x1DD, 1, 1, -79}, {0x1DF, 9, 2, -1}, {0x1F2, 1, 1, -1}, {0x1F3, 1, 1, -2},
    {0x1F5, 1, 1, -1}, {0x1F9, 20, 2, -1}, {0x223, 9, 2, -1}, {0x23C, 1, 1, -1},
    {0x23F, 2, 1, 10815}, {0x242, 1, 1, -1}, {0x247, 5, 2, -1}, {0x250, 1, 1, 10783},
    {0x251, 1, 1, 10780}, {0x252, 1, 1, 10782}, {0x253, 1, 1, -210}, {0x254, 1, 1, -206},
    {0x256, 2, 1, -205}, {0x259, 1, 1, -202}, {0x25B, 1, 1, -203}, {0x25C, 1, 1, 42319},
    {0x260, 1, 1, -205}, {0x261, 1, 1, 42315}, {0x263, 1, 1, -207}, {0x265, 1, 1, 42280},
    {0x266, 1, 1, 42308}, {0x268, 1, 1, -209}, {0x269, 1, 1, -211}, {0x26A, 1, 1, 42308},
    {0x26B, 1, 1, 10743}, {0x26C, 1, 1, 42305}, {0x26F, 1, 1, -211}, {0x271, 1, 1, 10749},
    {0x272, 1, 1, -213}, {0x275, 1, 1, -214}, {0x27D, 1, 1, 10727}, {0x280, 1, 1, -218},
    {0x282, 1, 1, 42307}, {0x283, 1, 1, -218}, {0x287, 1, 1, 42282}, {0x288, 1, 1, -218},
    {0x289, 1, 1, -69}, {0x28A, 2, 1, -217}, {0x28C, 1, 1, -71}, {0x292, 1, 1, -219},
    {0x29D, 1, 1, 42261}, {0x29E, 1, 1, 42258}, {0x345, 1, 1, 84}, {0x371, 2, 2, -1},
    {0x377, 1, 1, -1}, {0x37B, 3, 1, 130}, {0x3AC, 1, 1, -38}, {0x3AD, 3, 1, -37},
    {0x3B1, 17, 1, -32}, {0x3C2, 1, 1, -31}, {0x3C3, 9, 1, -32}, {0x3CC, 1, 1, -64},
    {0x3CD, 2, 1, -63}, {0x3D0, 1, 1, -62}, {0x3D1, 1, 1, -57}, {0x3D5, 1, 1, -47},
    {0x3D6, 1, 1, -54}, {0x3D7, 1, 1, -8}, {0x3D9, 12, 2, -1}, {0x3F0, 1, 1, -86},
    {0x3F1, 1, 1, -80}, {0x3F2, 1, 1, 7}, {0x3F3, 1, 1, -116}, {0x3F5, 1, 1, -96},
    {0x3F8, 1, 1, -1}, {0x3FB, 1, 1, -1}, {0x430, 32, 1, -32}, {0x450, 16, 1, -80},
    {0x461, 17, 2, -1}, {0x48B, 27, 2, -1}, {0x4C2, 7, 2, -1}, {0x4CF, 1, 1, -15},
    {0x4D1, 48, 2, -1}, {0x561, 38, 1, -48}, {0x10D0, 43, 1, 3008}, {0x10FD, 3, 1, 3008},
    {0x13F8, 6, 1, -8}, {0x1C80, 1, 1, -6254}, {0x1C81, 1, 1, -6253}, {0x1C82, 1, 1, -6244},
    {0x1C83, 2, 1, -6242}, {0x1C85, 1, 1, -6243}, {0x1C86, 1, 1, -6236}, {0x1C87, 1, 1, -6181},
    {0x1C88, 1, 1, 35266}, {0x1D79, 1, 1, 35332}, {0x1D7D, 1, 1, 3814}, {0x1D8E, 1, 1, 35384},
    {0x1E01, 75, 2, -1}, {0x1E9B, 1, 1, -59}, {0x1EA1, 48, 2, -1}, {0x1F00, 8, 1, 8},
    {0x1F10, 6, 1, 8}, {0x1F20, 8, 1, 8}, {0x1F30, 8, 1, 8}, {0x1F40, 6, 1, 8},
    {0x1F51, 4, 2, 8}, {0x1F60, 8, 1, 8}, {0x1F70, 2, 1, 74}, {0x1F72, 4, 1, 86},
    {0x1F76, 2, 1, 100}, {0x1F78, 2, 1, 128}, {0x1F7A, 2, 1, 112}, {0x1F7C, 2, 1, 126},
    {0x1FB0, 2, 1, 8}, {0x1FBE, 1, 1, -7205}, {0x1FD0, 2, 1, 8}, {0x1FE0, 2, 1, 8},
    {0x1FE5, 1, 1, 7}, {0x214E, 1, 1, -28}, {0x2170, 16, 1, -16}, {0x2184, 1, 1, -1},
    {0x24D0, 26, 1, -26}, {0x2C30, 48, 1, -48}, {0x2C61, 1, 1, -1}, {0x2C65, 1, 1, -10795},
    {0x2C66, 1, 1, -10792}, {0x2C68, 3, 2, -1}, {0x2C73, 1, 1, -1}, {0x2C76, 1, 1, -1},
    {0x2C81, 50, 2, -1}, {0x2CEC, 2, 2, -1}, {0x2CF3, 1, 1, -1}, {0x2D00, 38, 1, -7264},
    {0x2D27, 1, 1, -7264}, {0x2D2D, 1, 1, -7264}, {0xA641, 23, 2, -1}, {0xA681, 14, 2, -1},
    {0xA723, 7, 2, -1}, {0xA733, 31, 2, -1}, {0xA77A, 2, 2, -1}, {0xA77F, 5, 2, -1},
    {0xA78C, 1, 1, -1}, {0xA791, 2, 2, -1}, {0xA794, 1, 1, 48}, {0xA797, 10, 2, -1},
    {0xA7B5, 8, 2, -1}, {0xA7C8, 2, 2, -1}, {0xA7D1, 1, 1, -1}, {0xA7D7, 2, 2, -1},
    {0xA7F6, 1, 1, -1}, {0xAB53, 1, 1, -928}, {0xAB70, 80, 1, -38864}, {0xFF41, 26, 1, -32},
    {0x10428, 40, 1, -40}, {0x104D8, 36, 1, -40}, {0x10597, 11, 1, -39}, {0x105A3, 15, 1, -39},
    {0x105B3, 7, 1, -39}, {0x105BB, 2, 1, -39}, {0x10CC0, 51, 1, -64}, {0x118C0, 32, 1, -32},
    {0x16E60, 32, 1, -32}, {0x1E922, 34, 1, -34},
};
static const case_multi UPPER_MULTI[] = {
    {0xDF, {0x53, 0x53, 0x0}}, {0x149, {0x2BC, 0x4E, 0x0}}, {0x1F0, {0x4A, 0x30C, 0x0}},
    {0x390, {0x399, 0x308, 0x301}}, {0x3B0, {0x3A5, 0x308, 0x301}}, {0x587, {0x535, 0x552, 0x0}},
    {0x1E96, {0x48, 0x331, 0x0}}, {0x1E97, {0x54, 0x308, 0x0}}, {0x1E98, {0x57, 0x30A, 0x0}},
    {0x1E99, {0x59, 0x30A, 0x0}}, {0x1E9A, {0x41, 0x2BE, 0x0}}, {0x1F50, {0x3A5, 0x313, 0x0}},
    {0x1F52, {0x3A5, 0x313, 0x300}}, {0x1F54, {0x3A5, 0x313, 0x301}}, {0x1F56, {0x3A5, 0x313, 0x342}},
    {0x1F80, {0x1F08, 0x399, 0x0}}, {0x1F81, {0x1F09, 0x399, 0x0}}, {0x1F82, {0x1F0A, 0x399, 0x0}},
    {0x1F83, {0x1F0B, 0x399, 0x0}}, {0x1F84, {0x1F0C, 0x399, 0x0}}, {0x1F85, {0x1F0D, 0x399, 0x0}},
    {0x1F86, {0x1F0E, 0x399, 0x0}}, {0x1F87, {0x1F0F, 0x399, 0x0}}, {0x1F88, {0x1F08, 0x399, 0x0}},
    {0x1F89, {0x1F09, 0x399, 0x0}}, {0x1F8A, {0x1F0A, 0x399, 0x0}}, {0x1F8B, {0x1F0B, 0x399, 0x0}},
    {0x1F8C, {0x1F0C, 0x399, 0x0}}, {0x1F8D, {0x1F0D, 0x399, 0x0}}, {0x1F8E, {0x1F0E, 0x399, 0x0}},
    {0x1F8F, {0x1F0F, 0x399, 0x0}}, {0x1F90, {0x1F28, 0x399, 0x0}}, {0x1F91, {0x1F29, 0x399, 0x0}},
    {0x1F92, {0x1F2A, 0x399, 0x0}}, {0x1F93, {0x1F2B, 0x399, 0x0}}, {0x1F94, {0x1F2C, 0x399, 0x0}},
    {0x1F95, {0x1F2D, 0x399, 0x0}}, {0x1F96, {0x1F2E, 0x399, 0x0}}, {0x1F97, {0x1F2F, 0x399, 0x0}},
    {0x1F98, {0x1F28, 0x399, 0x0}}, {0x1F99, {0x1F29, 0x399, 0x0}}, {0x1F9A, {0x1F2A, 0x399, 0x0}},
    {0x1F9B, {0x1F2B, 0x399, 0x0}}, {0x1F9C, {0x1F2C, 0x399, 0x0}}, {0x1F9D, {0x1F2D, 0x399, 0x0}},
    {0x1F9E, {0x1F2E, 0x399, 0x0}}, {0x1F9F, {0x1F2F, 0x399, 0x0}}, {0x1FA0, {0x1F68, 0x399, 0x0}},
    {0x1FA1, {0x1F69, 0x399, 0x0}}, {0x1FA2, {0x1F6A, 0x399, 0x0}}, {0x1FA3, {0x1F6B, 0x399, 0x0}},
    {0x1FA4, {0x1F6C, 0x399, 0x0}}, {0x1FA5, {0x1F6D, 0x399, 0x0}}, {0x1FA6, {0x1F6E, 0x399, 0x0}},
    {0x1FA7, {0x1F6F, 0x399, 0x0}}, {0x1FA8, {0x1F68, 0x399, 0x0}}, {0x1FA9, {0x1F69, 0x399, 0x0}},
    {0x1FAA, {0x1F6A, 0x399, 0x0}}, {0x1FAB, {0x1F6B, 0x399, 0x0}}, {0x1FAC, {0x1F6C, 0x399, 0x0}},
    {0x1FAD, {0x1F6D, 0x399, 0x0}}, {0x1FAE, {0x1F6E, 0x399, 0x0}}, {0x1FAF, {0x1F6F, 0x399, 0x0}},
    {0x1FB2, {0x1FBA, 0x399, 0x0}}, {0x1FB3, {0x391, 0x399, 0x0}}, {0x1FB4, {0x386, 0x399, 0x0}},
    {0x1FB6, {0x391, 0x342, 0x0}}, {0x1FB7, {0x391, 0x342, 0x399}}, {0x1FBC, {0x391, 0x399, 0x0}},
    {0x1FC2, {0x1FCA, 0x399, 0x0}}, {0x1FC3, {0x397, 0x399, 0x0}}, {0x1FC4, {0x389, 0x399, 0x0}},
    {0x1FC6, {0x397, 0x342, 0x0}}, {0x1FC7, {0x397, 0x342, 0x399}}, {0x1FCC, {0x397, 0x399, 0x0}},
    {0x1FD2, {0x399, 0x308, 0x300}}, {0x1FD3, {0x399, 0x308, 0x301}}, {0x1FD6, {0x399, 0x342, 0x0}},
    {0x1FD7, {0x399, 0x308, 0x342}}, {0x1FE2, {0x3A5, 0x308, 0x300}}, {0x1FE3, {0x3A5, 0x308, 0x301}},
    {0x1FE4, {0x3A1, 0x313, 0x0}}, {0x1FE6, {0x3A5, 0x342, 0x0}}, {0x1FE7, {0x3A5, 0x308, 0x342}},
    {0x1FF2, {0x1FFA, 0x399, 0x0}}, {0x1FF3, {0x3A9, 0x399, 0x0}}, {0x1FF4, {0x38F, 0x399, 0x0}},
    {0x1FF6, {0x3A9, 0x342, 0x0}}, {0x1FF7, {0x3A9, 0x342, 0x399}}, {0x1FFC, {0x3A9, 0x399, 0x0}},
    {0xFB00, {0x46, 0x46, 0x0}}, {0xFB01, {0x46, 0x49, 0x0}}, {0xFB02, {0x46, 0x4C, 0x0}},
    {0xFB03, {0x46, 0x46, 0x49}}, {0xFB04, {0x46, 0x46, 0x4C}}, {0xFB05, {0x53, 0x54, 0x0}},
    {0xFB06, {0x53, 0x54, 0x0}}, {0xFB13, {0x544, 0x546, 0x0}}, {0xFB14, {0x544, 0x535, 0x0}},
    {0xFB15, {0x544, 0x53B, 0x0}}, {0xFB16, {0x54E, 0x546, 0x0}}, {0xFB17, {0x544, 0x53D, 0x0}},
};
static const uint32_t CASE_IGNORABLE[] = {
    0x27, 0x27, 0x2E, 0x2E, 0x3A, 0x3A, 0x5E, 0x5E, 0x60, 0x60, 0xA8, 0xA8,
    0xAD, 0xAD, 0xAF, 0xAF, 0xB4, 0xB4, 0xB7, 0xB8, 0x2B0, 0x36F, 0x374, 0x375,
    0x37A, 0x37A, 0x384, 0x385, 0x387, 0x387, 0x483, 0x489, 0x559, 0x559, 0x55F, 0x55F,
    0x591, 0x5BD, 0x5BF, 0x5BF, 0x5C1, 0x5C2, 0x5C4, 0x5C5, 0x5C7, 0x5C7, 0x5F4, 0x5F4,
    0x600, 0x605, 0x610, 0x61A, 0x61C, 0x61C, 0x640, 0x640, 0x64B, 0x65F, 0x670, 0x670,
    0x6D6, 0x6DD, 0x6DF, 0x6E8, 0x6EA, 0x6ED, 0x70F, 0x70F, 0x711, 0x711, 0x730, 0x74A,
    0x7A6, 0x7B0, 0x7EB, 0x7F5, 0x7FA, 0x7FA, 0x7FD, 0x7FD, 0x816, 0x82D, 0x859, 0x85B,
    0x888, 0x888, 0x890, 0x891, 0x898, 0x89F, 0x8C9, 0x902, 0x93A, 0x93A, 0x93C, 0x93C,
    0x941, 0x948, 0x94D, 0x94D, 0x951, 0x957, 0x962, 0x963, 0x971, 0x971, 0x981, 0x981,
    0x9BC, 0x9BC, 0x9C1, 0x9C4, 0x9CD, 0x9CD, 0x9E2, 0x9E3, 0x9FE, 0x9FE, 0xA01, 0xA02,
    0xA3C, 0xA3C, 0xA41, 0xA42, 0xA47, 0xA48, 0xA4B, 0xA4D, 0xA51, 0xA51, 0xA70, 0xA71,
    0xA75, 0xA75, 0xA81, 0xA82, 0xABC, 0xABC, 0xAC1, 0xAC5, 0xAC7, 0xAC8, 0xACD, 0xACD,
    0xAE2, 0xAE3, 0xAFA, 0xAFF, 0xB01, 0xB01, 0xB3C, 0xB3C, 0xB3F, 0xB3F, 0xB41, 0xB44,
    0xB4D, 0xB4D, 0xB55, 0xB56, 0xB62, 0xB63, 0xB82, 0xB82, 0xBC0, 0xBC0, 0xBCD, 0xBCD,
    0xC00, 0xC00, 0xC04, 0xC04, 0xC3C, 0xC3C, 0xC3E, 0xC40, 0xC46, 0xC48, 0xC4A, 0xC4D,
    0xC55, 0xC56, 0xC62, 0xC63, 0xC81, 0xC81, 0xCBC, 0xCBC, 0xCBF, 0xCBF, 0xCC6, 0xCC6,
    0xCCC, 0xCCD, 0xCE2, 0xCE3, 0xD00, 0xD01, 0xD3B, 0xD3C, 0xD41, 0xD44, 0xD4D, 0xD4D,
    0xD62, 0xD63, 0xD81, 0xD81, 0xDCA, 0xDCA, 0xDD2, 0xDD4, 0xDD6, 0xDD6, 0xE31, 0xE31,
    0xE34, 0xE3A, 0xE46, 0xE4E, 0xEB1, 0xEB1, 0xEB4, 0xEBC, 0xEC6, 0xEC6, 0xEC8, 0xECD,
    0xF18, 0xF19, 0xF35, 0xF35, 0xF37, 0xF37, 0xF39, 0xF39, 0xF71, 0xF7E, 0xF80, 0xF84,
    0xF86, 0xF87, 0xF8D, 0xF97, 0xF99, 0xFBC, 0xFC6, 0xFC6, 0x102D, 0x1030, 0x1032, 0x1037,
    0x1039, 0x103A, 0x103D, 0x103E, 0x1058, 0x1059, 0x105E, 0x1060, 0x1071, 0x1074, 0x1082, 0x1082,
    0x1085, 0x1086, 0x108D, 0x108D, 0x109D, 0x109D, 0x10FC, 0x10FC, 0x135D, 0x135F, 0x1712, 0x1714,
    0x1732, 0x1733, 0x1752, 0x1753, 0x1772, 0x1773, 0x17B4, 0x17B5, 0x17B7, 0x17BD, 0x17C6, 0x17C6,
    0x17C9, 0x17D3, 0x17D7, 0x17D7, 0x17DD, 0x17DD, 0x180B, 0x180F, 0x1843, 0x1843, 0x1885, 0x1886,
    0x18A9, 0x18A9, 0x1920, 0x1922, 0x1927, 0x1928, 0x1932, 0x1932, 0x1939, 0x193B, 0x1A17, 0x1A18,
    0x1A1B, 0x1A1B, 0x1A56, 0x1A56, 0x1A58, 0x1A5E, 0x1A60, 0x1A60, 0x1A62, 0x1A62, 0x1A65, 0x1A6C,
    0x1A73, 0x1A7C, 0x1A7F, 0x1A7F, 0x1AA7, 0x1AA7, 0x1AB0, 0x1ACE, 0x1B00, 0x1B03, 0x1B34, 0x1B34,
    0x1B36, 0x1B3A, 0x1B3C, 0x1B3C, 0x1B42, 0x1B42, 0x1B6B, 0x1B73, 0x1B80, 0x1B81, 0x1BA2, 0x1BA5,
    0x1BA8, 0x1BA9, 0x1BAB, 0x1BAD, 0x1BE6, 0x1BE6, 0x1BE8, 0x1BE9, 0x1BED, 0x1BED, 0x1BEF, 0x1BF1,
    0x1C2C, 0x1C33, 0x1C36, 0x1C37, 0x1C78, 0x1C7D, 0x1CD0, 0x1CD2, 0x1CD4, 0x1CE0, 0x1CE2, 0x1CE8,
    0x1CED, 0x1CED, 0x1CF4, 0x1CF4, 0x1CF8, 0x1CF9, 0x1D2C, 0x1D6A, 0x1D78, 0x1D78, 0x1D9B, 0x1DFF,
    0x1FBD, 0x1FBD, 0x1FBF, 0x1FC1, 0x1FCD, 0x1FCF, 0x1FDD, 0x1FDF, 0x1FED, 0x1FEF, 0x1FFD, 0x1FFE,
    0x200B, 0x200F, 0x2018, 0x2019, 0x2024, 0x2024, 0x2027, 0x2027, 0x202A, 0x202E, 0x2060, 0x2064,
    0x2066, 0x206F, 0x2071, 0x2071, 0x207F, 0x207F, 0x2090, 0x209C, 0x20D0, 0x20F0, 0x2C7C, 0x2C7D,
    0x2CEF, 0x2CF1, 0x2D6F, 0x2D6F, 0x2D7F, 0x2D7F, 0x2DE0, 0x2DFF, 0x2E2F, 0x2E2F, 0x3005, 0x3005,
    0x302A, 0x302D, 0x3031, 0x3035, 0x303B, 0x303B, 0x3099, 0x309E, 0x30FC, 0x30FE, 0xA015, 0xA015,
    0xA4F8, 0xA4FD, 0xA60C, 0xA60C, 0xA66F, 0xA672, 0xA674, 0xA67D, 0xA67F, 0xA67F, 0xA69C, 0xA69F,
    0xA6F0, 0xA6F1, 0xA700, 0xA721, 0xA770, 0xA770, 0xA788, 0xA78A, 0xA7F2, 0xA7F4, 0xA7F8, 0xA7F9,
    0xA802, 0xA802, 0xA806, 0xA806, 0xA80B, 0xA80B, 0xA825, 0xA826, 0xA82C, 0xA82C, 0xA8C4, 0xA8C5,
    0xA8E0, 0xA8F1, 0xA8FF, 0xA8FF, 0xA926, 0xA92D, 0xA947, 0xA951, 0xA980, 0xA982, 0xA9B3, 0xA9B3,
    0xA9B6, 0xA9B9, 0xA9BC, 0xA9BD, 0xA9CF, 0xA9CF, 0xA9E5, 0xA9E6, 0xAA29, 0xAA2E, 0xAA31, 0xAA32,
    0xAA35, 0xAA36, 0xAA43, 0xAA43, 0xAA4C, 0xAA4C, 0xAA70, 0xAA70, 0xAA7C, 0xAA7C, 0xAAB0, 0xAAB0,
    0xAAB2, 0xAAB4, 0xAAB7, 0xAAB8, 0xAABE, 0xAABF, 0xAAC1, 0xAAC1, 0xAADD, 0xAADD, 0xAAEC, 0xAAED,
    0xAAF3, 0xAAF4, 0xAAF6, 0xAAF6, 0xAB5B, 0xAB5F, 0xAB69, 0xAB6B, 0xABE5, 0xABE5, 0xABE8, 0xABE8,
    0xABED, 0xABED, 0xFB1E, 0xFB1E, 0xFBB2, 0xFBC2, 0xFE00, 0xFE0F, 0xFE13, 0xFE13, 0xFE20, 0xFE2F,
    0xFE52, 0xFE52, 0xFE55, 0xFE55, 0xFEFF, 0xFEFF, 0xFF07, 0xFF07, 0xFF0E, 0xFF0E, 0xFF1A, 0xFF1A,
    0xFF3E, 0xFF3E, 0xFF40, 0xFF40, 0xFF70, 0xFF70, 0xFF9E, 0xFF9F, 0xFFE3, 0xFFE3, 0xFFF9, 0xFFFB,
    0x101FD, 0x101FD, 0x102E0, 0x102E0, 0x10376, 0x1037A, 0x10780, 0x10785, 0x10787, 0x107B0, 0x107B2, 0x107BA,
    0x10A01, 0x10A03, 0x10A05, 0x10A06, 0x10A0C, 0x10A0F, 0x10A38, 0x10A3A, 0x10A3F, 0x10A3F, 0x10AE5, 0x10AE6,
    0x10D24, 0x10D27, 0x10EAB, 0x10EAC, 0x10F46, 0x10F50, 0x10F82, 0x10F85, 0x11001, 0x11001, 0x11038, 0x11046,
    0x11070, 0x11070, 0x11073, 0x11074, 0x1107F, 0x11081, 0x110B3, 0x110B6, 0x110B9, 0x110BA, 0x110BD, 0x110BD,
    0x110C2, 0x110C2, 0x110CD, 0x110CD, 0x11100, 0x11102, 0x11127, 0x1112B, 0x1112D, 0x11134, 0x11173, 0x11173,
    0x11180, 0x11181, 0x111B6, 0x111BE, 0x111C9, 0x111CC, 0x111CF, 0x111CF, 0x1122F, 0x11231, 0x11234, 0x11234,
    0x11236, 0x11237, 0x1123E, 0x1123E, 0x112DF, 0x112DF, 0x112E3, 0x112EA, 0x11300, 0x11301, 0x1133B, 0x1133C,
    0x11340, 0x11340, 0x11366, 0x1136C, 0x11370, 0x11374, 0x11438, 0x1143F, 0x11442, 0x11444, 0x11446, 0x11446,
    0x1145E, 0x1145E, 0x114B3, 0x114B8, 0x114BA, 0x114BA, 0x114BF, 0x114C0, 0x114C2, 0x114C3, 0x115B2, 0x115B5,
    0x115BC, 0x115BD, 0x115BF, 0x115C0, 0x115DC, 0x115DD, 0x11633, 0x1163A, 0x1163D, 0x1163D, 0x1163F, 0x11640,
    0x116AB, 0x116AB, 0x116AD, 0x116AD, 0x116B0, 0x116B5, 0x116B7, 0x116B7, 0x1171D, 0x1171F, 0x11722, 0x11725,
    0x11727, 0x1172B, 0x1182F, 0x11837, 0x11839, 0x1183A, 0x1193B, 0x1193C, 0x1193E, 0x1193E, 0x11943, 0x11943,
    0x119D4, 0x119D7, 0x119DA, 0x119DB, 0x119E0, 0x119E0, 0x11A01, 0x11A0A, 0x11A33, 0x11A38, 0x11A3B, 0x11A3E,
    0x11A47, 0x11A47, 0x11A51, 0x11A56, 0x11A59, 0x11A5B, 0x11A8A, 0x11A96, 0x11A98, 0x11A99, 0x11C30, 0x11C36,
    0x11C38, 0x11C3D, 0x11C3F, 0x11C3F, 0x11C92, 0x11CA7, 0x11CAA, 0x11CB0, 0x11CB2, 0x11CB3, 0x11CB5, 0x11CB6,
    0x11D31, 0x11D36, 0x11D3A, 0x11D3A, 0x11D3C, 0x11D3D, 0x11D3F, 0x11D45, 0x11D47, 0x11D47, 0x11D90, 0x11D91,
    0x11D95, 0x11D95, 0x11D97, 0x11D97, 0x11EF3, 0x11EF4, 0x13430, 0x13438, 0x16AF0, 0x16AF4, 0x16B30, 0x16B36,
    0x16B40, 0x16B43, 0x16F4F, 0x16F4F, 0x16F8F, 0x16F9F, 0x16FE0, 0x16FE1, 0x16FE3, 0x16FE4, 0x1AFF0, 0x1AFF3,
    0x1AFF5, 0x1AFFB, 0x1AFFD, 0x1AFFE, 0x1BC9D, 0x1BC9E, 0x1BCA0, 0x1BCA3, 0x1CF00, 0x1CF2D, 0x1CF30, 0x1CF46,
    0x1D167, 0x1D169, 0x1D173, 0x1D182, 0x1D185, 0x1D18B, 0x1D1AA, 0x1D1AD, 0x1D242, 0x1D244, 0x1DA00, 0x1DA36,
    0x1DA3B, 0x1DA6C, 0x1DA75, 0x1DA75, 0x1DA84, 0x1DA84, 0x1DA9B, 0x1DA9F, 0x1DAA1, 0x1DAAF, 0x1E000, 0x1E006,
    0x1E008, 0x1E018, 0x1E01B, 0x1E021, 0x1E023, 0x1E024, 0x1E026, 0x1E02A, 0x1E130, 0x1E13D, 0x1E2AE, 0x1E2AE,
    0x1E2EC, 0x1E2EF, 0x1E8D0, 0x1E8D6, 0x1E944, 0x1E94B, 0x1F3FB, 0x1F3FF, 0xE0001, 0xE0001, 0xE0020, 0xE007F,
    0xE0100, 0xE01EF,
};
static const uint32_t CASED[] = {
    0x41, 0x5A, 0x61, 0x7A, 0xAA, 0xAA, 0xB5, 0xB5, 0xBA, 0xBA, 0xC0, 0xD6,
    0xD8, 0xF6, 0xF8, 0x1BA, 0x1BC, 0x1BF, 0x1C4, 0x293, 0x295, 0x2AF, 0x370, 0x373,
    0x376, 0x377, 0x37B, 0x37D, 0x37F, 0x37F, 0x386, 0x386, 0x388, 0x38A, 0x38C, 0x38C,
    0x38E, 0x3A1, 0x3A3, 0x3F5, 0x3F7, 0x481, 0x48A, 0x52F, 0x531, 0x556, 0x560, 0x588,
    0x10A0, 0x10C5, 0x10C7, 0x10C7, 0x10CD, 0x10CD, 0x10D0, 0x10FA, 0x10FD, 0x10FF, 0x13A0, 0x13F5,
    0x13F8, 0x13FD, 0x1C80, 0x1C88, 0x1C90, 0x1CBA, 0x1CBD, 0x1CBF, 0x1D00, 0x1D2B, 0x1D6B, 0x1D77,
    0x1D79, 0x1D9A, 0x1E00, 0x1F15, 0x1F18, 0x1F1D, 0x1F20, 0x1F45, 0x1F48, 0x1F4D, 0x1F50, 0x1F57,
    0x1F59, 0x1F59, 0x1F5B, 0x1F5B, 0x1F5D, 0x1F5D, 0x1F5F, 0x1F7D, 0x1F80, 0x1FB4, 0x1FB6, 0x1FBC,
    0x1FBE, 0x1FBE, 0x1FC2, 0x1FC4, 0x1FC6, 0x1FCC, 0x1FD0, 0x1FD3, 0x1FD6, 0x1FDB, 0x1FE0, 0x1FEC,
    0x1FF2, 0x1FF4, 0x1FF6, 0x1FFC, 0x2102, 0x2102, 0x2107, 0x2107, 0x210A, 0x2113, 0x2115, 0x2115,
    0x2119, 0x211D, 0x2124, 0x2124, 0x2126, 0x2126, 0x2128, 0x2128, 0x212A, 0x212D, 0x212F, 0x2134,
    0x2139, 0x2139, 0x213C, 0x213F, 0x2145, 0x2149, 0x214E, 0x214E, 0x2160, 0x217F, 0x2183, 0x2184,
    0x24B6, 0x24E9, 0x2C00, 0x2C7B, 0x2C7E, 0x2CE4, 0x2CEB, 0x2CEE, 0x2CF2, 0x2CF3, 0x2D00, 0x2D25,
    0x2D27, 0x2D27, 0x2D2D, 0x2D2D, 0xA640, 0xA66D, 0xA680, 0xA69B, 0xA722, 0xA76F, 0xA771, 0xA787,
    0xA78B, 0xA78E, 0xA790, 0xA7CA, 0xA7D0, 0xA7D1, 0xA7D3, 0xA7D3, 0xA7D5, 0xA7D9, 0xA7F5, 0xA7F6,
    0xA7FA, 0xA7FA, 0xAB30, 0xAB5A, 0xAB60, 0xAB68, 0xAB70, 0xABBF, 0xFB00, 0xFB06, 0xFB13, 0xFB17,
    0xFF21, 0xFF3A, 0xFF41, 0xFF5A, 0x10400, 0x1044F, 0x104B0, 0x104D3, 0x104D8, 0x104FB, 0x10570, 0x1057A,
    0x1057C, 0x1058A, 0x1058C, 0x10592, 0x10594, 0x10595, 0x10597, 0x105A1, 0x105A3, 0x105B1, 0x105B3, 0x105B9,
    0x105BB, 0x105BC, 0x10C80, 0x10CB2, 0x10CC0, 0x10CF2, 0x118A0, 0x118DF, 0x16E40, 0x16E7F, 0x1D400, 0x1D454,
    0x1D456, 0x1D49C, 0x1D49E, 0x1D49F, 0x1D4A2, 0x1D4A2, 0x1D4A5, 0x1D4A6, 0x1D4A9, 0x1D4AC, 0x1D4AE, 0x1D4B9,
    0x1D4BB, 0x1D4BB, 0x1D4BD, 0x1D4C3, 0x1D4C5, 0x1D505, 0x1D507, 0x1D50A, 0x1D50D, 0x1D514, 0x1D516, 0x1D51C,
    0x1D51E, 0x1D539, 0x1D53B, 0x1D53E, 0x1D540, 0x1D544, 0x1D546, 0x1D546, 0x1D54A, 0x1D550, 0x1D552, 0x1D6A5,
    0x1D6A8, 0x1D6C0, 0x1D6C2, 0x1D6DA, 0x1D6DC, 0x1D6FA, 0x1D6FC, 0x1D714, 0x1D716, 0x1D734, 0x1D736, 0x1D74E,
    0x1D750, 0x1D76E, 0x1D770, 0x1D788, 0x1D78A, 0x1D7A8, 0x1D7AA, 0x1D7C2, 0x1D7C4, 0x1D7CB, 0x1DF00, 0x1DF09,
    0x1DF0B, 0x1DF1E, 0x1E900, 0x1E943, 0x1F130, 0x1F149, 0x1F150, 0x1F169, 0x1F170, 0x1F189,
};
static const uint32_t DECIMAL_ZERO[] = {
    0x30, 0x660, 0x6F0, 0x7C0, 0x966, 0x9E6, 0xA66, 0xAE6, 0xB66, 0xBE6,
    0xC66, 0xCE6, 0xD66, 0xDE6, 0xE50, 0xED0, 0xF20, 0x1040, 0x1090, 0x17E0,
    0x1810, 0x1946, 0x19D0, 0x1A80, 0x1A90, 0x1B50, 0x1BB0, 0x1C40, 0x1C50, 0xA620,
    0xA8D0, 0xA900, 0xA9D0, 0xA9F0, 0xAA50, 0xABF0, 0xFF10, 0x104A0, 0x10D30, 0x11066,
    0x110F0, 0x11136, 0x111D0, 0x112F0, 0x11450, 0x114D0, 0x11650, 0x116C0, 0x11730, 0x118E0,
    0x11950, 0x11C50, 0x11D50, 0x11DA0, 0x16A60, 0x16AC0, 0x16B50, 0x1D7CE, 0x1D7D8, 0x1D7E2,
    0x1D7EC, 0x1D7F6, 0x1E140, 0x1E2F0, 0x1E950, 0x1FBF0,
};

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

static int case_map(const case_run *runs, size_t nr, const case_multi *multi, size_t nm, uint32_t c,
                    uint32_t out[3]) {
    out[0] = c;
    if (c < 0x41 || (c & U_RAW)) return 1;
    size_t lo = 0, hi = nm;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (multi[mid].cp < c) lo = mid + 1;
        else hi = mid;
    }
    if (lo < nm && multi[lo].cp == c) {
        int k = 0;
        for (; k < 3 && multi[lo].to[k]; k++) out[k] = multi[lo].to[k];
        return k;
    }
    lo = 0;
    hi = nr;
    while (lo < hi) { /* first run starting after c */
        size_t mid = (lo + hi) / 2;
        if (runs[mid].cp <= c) lo = mid + 1;
        else hi = mid;
    }
    if (lo > 0) {
        const case_run *r = &runs[lo - 1];
        uint32_t off = c - r->cp;
        if (off % r->stride == 0 && off / r->stride < r->n) out[0] = (uint32_t)((int64_t)c + r->delta);
    }
    return 1;
}

static int u_lower(uint32_t c, uint32_t out[3]) {
    return case_map(LOWER_RUNS, NELEM(LOWER_RUNS), LOWER_MULTI, NELEM(LOWER_MULTI), c, out);
}

static int u_upper(uint32_t c, uint32_t out[3]) {
    return case_map(UPPER_RUNS, NELEM(UPPER_RUNS), UPPER_MULTI, NELEM(UPPER_MULTI), c, out);
}

/* Is c inside one of the sorted [lo, hi] pairs of t? */
static bool in_ranges(const uint32_t *t, size_t npairs, uint32_t c) {
    size_t lo = 0, hi = npairs;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (t[2 * mid + 1] < c) lo = mid + 1;
        else hi = mid;
    }
    return lo < npairs && t[2 * lo] <= c;
}

static bool u_cased(uint32_t c) { return !(c & U_RAW) && in_ranges(CASED, NELEM(CASED) / 2, c); }

static bool u_case_ignorable(uint32_t c) {
    return !(c & U_RAW) && in_ranges(CASE_IGNORABLE, NELEM(CASE_IGNORABLE) / 2, c);
}

static int u_decimal(uint32_t c) {
    if (c < 0x80) return c >= '0' && c <= '9' ? (int)(c - '0') : -1;
    if (c & U_RAW) return -1;
    size_t lo = 0, hi = NELEM(DECIMAL_ZERO);
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (DECIMAL_ZERO[mid] <= c) lo = mid + 1;
        else hi = mid;
    }
    return lo > 0 && c - DECIMAL_ZERO[lo - 1] < 10 ? (int)(c - DECIMAL_ZERO[lo - 1]) : -1;
}
