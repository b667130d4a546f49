/* expr_funcs: the evaluator's casts and functions (is_in, abs, round, str.*, dt.*, user
 * functions), node by node over whole vectors like expr.c (semantics in expr.h).
 */
#define _GNU_SOURCE
#include "expr_internal.h"
#include "lists.h"

#include <locale.h>
#include <math.h>
#include <string.h>

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
int ev_cast(ctx *c, const sc_enode *nd, vec *o, const vec *a) {
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

int ev_is_in(ctx *c, const sc_enode *nd, vec *o, const vec *a) {
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

int ev_abs(ctx *c, const sc_enode *nd, vec *o, const vec *a) {
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


/* evaluate._round: ints unchanged; floats as round_f64 (Polars: half to even). */
int ev_round(ctx *c, const sc_enode *nd, vec *o, const vec *a, const vec *d) {
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

int ev_str_test(ctx *c, const sc_enode *nd, vec *o, const vec *a, const vec *p) {
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

int ev_str_case(ctx *c, const sc_enode *nd, vec *o, const vec *a) {
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

int ev_str_len(ctx *c, vec *o, const vec *a) {
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
int ev_dt(ctx *c, const sc_enode *nd, vec *o, const vec *a) {
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

int ev_udf(ctx *c, const sc_enode *nd, vec *o, const vec *v) {
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
