/* expr_compat_time: Python datetime semantics for the expression evaluator (contract in
 * expr_internal.h): the proleptic Gregorian calendar, str(date) / str(datetime), and
 * date.fromisoformat / datetime.fromisoformat ported from CPython 3.11.
 */
#include "expr_internal.h"

#include <stdio.h>

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm). */
int64_t days_from_civil(int64_t y, int m, int d) {
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

void civil_from_days(int64_t z, int64_t *y, int *m, int *d) {
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

bool is_leap(int64_t y) { return y % 4 == 0 && (y % 100 != 0 || y % 400 == 0); }

int days_in_month(int64_t y, int m) {
    static const int dim[13] = { 0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
    return m == 2 && is_leap(y) ? 29 : dim[m];
}

static int put2(char *o, int v) {
    o[0] = (char)('0' + v / 10);
    o[1] = (char)('0' + v % 10);
    return 2;
}

/* str(date): YYYY-MM-DD */
int fmt_date(int64_t days, char *out) {
    int64_t y;
    int m, d;
    civil_from_days(days, &y, &m, &d);
    int n = snprintf(out, 24, "%04lld-", (long long)y);
    n += put2(out + n, m);
    out[n++] = '-';
    return n + put2(out + n, d);
}

/* datetime.isoformat(sep=" ", timespec="microseconds") */
int fmt_datetime(int64_t us, char *out) {
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
bool iso_datetime(const char *s, int32_t len, int32_t nchars, int64_t *out) {
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
bool iso_dateonly(const char *s, int32_t len, int64_t *out) {
    int y = 0, m = 0, d = 0;
    if (len != 7 && len != 8 && len != 10) return false;
    if (iso_date(s, (size_t)len, &y, &m, &d) || !ymd_ok(y, m, d)) return false;
    *out = days_from_civil(y, m, d);
    return true;
}
