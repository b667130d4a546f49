/* expr: vectorized evaluation of plan expressions (contract in expr.h; semantics are kernel/streamcell/backends/evaluate.py row for row).
 *
 * How it works (the other files are listed in expr_internal.h): the post-order nodes are evaluated one after the other, each over the
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
 *   CPython 3.11 / Unicode 14 in expr_compat_str.c, final sigma included). str -> int /
 *   float follow int() / float() (Unicode digits and spaces, underscores, the 4300-digit
 *   limit); str -> datetime / date port CPython 3.11's C fromisoformat; float -> str is
 *   Polars' cast (repr()'s shortest round-trip digits, NaN, decimals down to 1e-5, 1e-7).
 * Deviations, where the reference has no representable answer:
 * - abs(INT64_MIN) wraps to INT64_MIN (Python gives 2**63, which no int64 column holds).
 * - A string with a UTC offset cast to datetime becomes naive UTC (Python: an aware
 *   datetime, which the reference converts to naive UTC when it stores it).
 */
#include "expr_internal.h"
#include "lists.h"

#include <stdlib.h>
#include <string.h>

const char EMPTY[1] = "";

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

void *cx_alloc(ctx *c, size_t bytes) { return cx_adopt(c, malloc(bytes ? bytes : 1)); }

void *cx_zalloc(ctx *c, size_t bytes) { return cx_adopt(c, calloc(bytes ? bytes : 1, 1)); }

void cx_free(ctx *c) {
    for (size_t k = 0; k < c->nblk; k++) free(c->blk[k]);
    free(c->blk);
    c->blk = NULL;
    c->nblk = c->cap = 0;
}

/* A fresh vector of type lt: values zeroed (strings empty), validity and errors unset. */
int vnew(ctx *c, vec *v, uint8_t lt) {
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
int v_mixed(ctx *c, vec *v) {
    if (!v->isint) v->isint = cx_zalloc(c, (size_t)c->n);
    if (!v->i) v->i = cx_zalloc(c, (size_t)c->n * sizeof(int64_t));
    return v->isint && v->i ? SC_OK : SC_ENOMEM;
}

int err_alloc(ctx *c, vec *v) {
    if (!v->err) v->err = cx_zalloc(c, (size_t)c->n);
    return v->err ? SC_OK : SC_ENOMEM;
}

/* Errors of a one-operand node: the operand's. */
int err_unary(ctx *c, vec *o, const vec *a) {
    if (!a->err) return SC_OK;
    if (err_alloc(c, o)) return SC_ENOMEM;
    memcpy(o->err, a->err, (size_t)c->n);
    return SC_OK;
}

/* Errors of a strict two-operand node: a's, then b's where a is valid (Python evaluates the
 * second operand only after a non-null first one). */
int err_strict(ctx *c, vec *o, const vec *a, const vec *b) {
    if (!a->err && !b->err) return SC_OK;
    if (err_alloc(c, o)) return SC_ENOMEM;
    for (int64_t r = 0; r < c->n; r++) {
        uint8_t ea = a->err ? a->err[r] : 0, eb = b->err && a->ok[r] ? b->err[r] : 0;
        o->err[r] = ea ? ea : eb;
    }
    return SC_OK;
}

/* A failed row is never valid. */
void seal(const ctx *c, vec *o) {
    if (!o->err) return;
    for (int64_t r = 0; r < c->n; r++) o->ok[r] &= (uint8_t)(o->err[r] == 0);
}

void and_ok(const ctx *c, vec *o, const vec *a, const vec *b) {
    for (int64_t r = 0; r < c->n; r++) o->ok[r] = a->ok[r] & (b ? b->ok[r] : 1);
}

/* The vector's values as doubles (ints converted, as Python's float(int)). */
const double *as_f64(ctx *c, const vec *v) {
    if (v->lt == SC_LT_FLOAT) return v->f;
    double *f = cx_alloc(c, (size_t)c->n * sizeof(double));
    if (f)
        for (int64_t r = 0; r < c->n; r++) f[r] = (double)v->i[r];
    return f;
}

/* The vector's values as int64 (bools widened). */
const int64_t *as_i64(ctx *c, const vec *v) {
    if (v->lt != SC_LT_BOOL) return v->i;
    int64_t *x = cx_alloc(c, (size_t)c->n * sizeof(int64_t));
    if (x)
        for (int64_t r = 0; r < c->n; r++) x[r] = v->b[r];
    return x;
}

/* ---------------------------------------------------------------- string builder */

int sb_open(ctx *c, sbld *b, size_t guess) {
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

int sb_room(sbld *b, size_t extra) {
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

int sb_add(sbld *b, const char *s, size_t n) {
    if (sb_room(b, n)) return SC_ENOMEM;
    if (n) memcpy(b->p + b->len, s, n);
    b->len += n;
    return SC_OK;
}

int sb_end(sbld *b, vec *o, int64_t r) {
    size_t n = b->len - b->at[r];
    if (n > INT32_MAX) return SC_EINVAL;
    o->sl[r] = (int32_t)n;
    return SC_OK;
}

/* Point the vector's rows at the finished buffer. */
void sb_close(sbld *b, vec *o) {
    for (int64_t r = 0; r < b->c->n; r++)
        if (b->at[r] != SIZE_MAX) o->s[r] = b->p + b->at[r];
}


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
int eval_all(const sc_expr *e, const sc_batch *in, ctx *c, vec **root) {
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
int eval_into(const sc_expr *e, const sc_batch *in, sc_batch *out, int32_t col, uint8_t *codes) {
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
