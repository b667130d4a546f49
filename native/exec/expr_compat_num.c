/* expr_compat_num: Python and Polars number semantics for the expression evaluator
 * (contract in expr_internal.h): float ** float as CPython's float_pow, int() / float() of
 * text (Unicode digits, underscores, the 4300-digit limit), str(int), Polars' float -> str
 * (repr()'s shortest round-trip digits), and Polars' round.
 */
#define _GNU_SOURCE
#include "expr_internal.h"

#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
double fpow_py(double v, double w) {
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

/* ------------------------------------------------------------- numbers from text */

static pthread_once_t cloc_once = PTHREAD_ONCE_INIT;
static locale_t cloc;
static void cloc_init(void) { cloc = newlocale(LC_ALL_MASK, "C", (locale_t)0); }

/* The "C" locale (decimal point '.') for strtod / printf, whatever the process uses. */
locale_t c_locale(void) {
    pthread_once(&cloc_once, cloc_init);
    return cloc;
}

/* int() / float() input: s.strip(), then CPython's transform of Unicode decimal digits and
 * spaces to ASCII; false when another non-ASCII character is left. out: room for len. */
bool num_prep(const char *s, int32_t len, char *out, int32_t *olen) {
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


/* wrap64(int(s)) of a prepared string; false where int() raises (syntax, > 4300 digits). */
bool parse_int_py(const char *s, int32_t n, int64_t *out) {
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

bool word_ci(const char *s, int32_t n, const char *w) {
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
bool parse_float_py(char *s, int32_t n, double *out) {
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

int fmt_i64(int64_t v, char *out) {
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

int fmt_f64(double x, char *out) {
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
double round_f64(double v, int64_t d) {
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
