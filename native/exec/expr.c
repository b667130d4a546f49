/* expr: vectorized evaluation of plan expressions (contract in expr.h; semantics are
 * kernel/streamcell/backends/evaluate.py row for row). The other files of the evaluator are
 * listed in expr_internal.h.
 *
 * How it works: the post-order nodes are evaluated one after the other, each over the
 * whole batch, into a vector with one validity byte, one error byte and one value per row
 * (scratch from a pooled context, so one sc_expr serves any number of threads). Columns
 * without nulls and the results computed from them carry no validity of their own,
 * literals stay scalars, and arithmetic / comparisons over numbers take the fast kernels of
 * expr_fast.c; the general kernels below handle everything else. The root vector is then
 * written into the output column (a fast root writes it directly).
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

/* --------------------------------------------------------------------------- leaves */

/* A column, borrowed where its layout is the vector's (int64, double); validity from the
 * bitmap, or none at all when the column has no null. */
static int ev_col(ctx *c, vec *o, const sc_batch *in, int32_t col, uint8_t lt) {
    const sc_column *k = &in->cols[col];
    int64_t n = c->n;
    memset(o, 0, sizeof *o);
    o->lt = lt;
    if (lt == SC_LT_NULL) {
        o->ok = c->zeros;
    } else if (k->null_count == 0 || !k->validity) {
        o->ok = c->ones;
        o->nonull = true;
    } else {
        if (!(o->ok = cx_alloc(c, (size_t)n))) return SC_ENOMEM;
        bits_to_bytes(k->validity, n, o->ok);
    }
    switch (k->type) {
    case SC_COL_INT64: o->i = k->values; break; /* borrowed: a node never writes its inputs */
    case SC_COL_DOUBLE: o->f = k->values; break;
    case SC_COL_BOOL:
        if (!(o->b = cx_alloc(c, (size_t)n))) return SC_ENOMEM;
        bits_to_bytes(k->values, n, o->b);
        break;
    case SC_COL_UTF8:
        o->s = cx_alloc(c, (size_t)n * sizeof(char *));
        o->sl = cx_alloc(c, (size_t)n * sizeof(int32_t));
        if (!o->s || !o->sl) return SC_ENOMEM;
        if (o->nonull) {
            for (int64_t r = 0; r < n; r++) {
                o->s[r] = k->data + k->offsets[r];
                o->sl[r] = k->offsets[r + 1] - k->offsets[r];
            }
        } else {
            for (int64_t r = 0; r < n; r++) {
                o->s[r] = o->ok[r] ? k->data + k->offsets[r] : EMPTY;
                o->sl[r] = o->ok[r] ? k->offsets[r + 1] - k->offsets[r] : 0;
            }
        }
        break;
    }
    return SC_OK;
}

/* A literal is a scalar: its value in row 0, shared validity (v_broadcast widens it for the
 * kernels that want full vectors). */
static int ev_lit(ctx *c, const sc_enode *nd, vec *o) {
    memset(o, 0, sizeof *o);
    o->lt = nd->lt;
    o->scalar = true;
    bool valid = !nd->is_null && nd->lt != SC_LT_NULL;
    o->ok = valid ? c->ones : c->zeros;
    o->nonull = valid;
    switch (is_strlike(nd->lt) ? SC_LT_STR : nd->lt) {
    case SC_LT_FLOAT:
        if (!(o->f = cx_alloc(c, sizeof(double)))) return SC_ENOMEM;
        o->f[0] = valid ? nd->f : 0.0;
        break;
    case SC_LT_BOOL:
        if (!(o->b = cx_alloc(c, 1))) return SC_ENOMEM;
        o->b[0] = valid && nd->i != 0;
        break;
    case SC_LT_STR:
        o->s = cx_alloc(c, sizeof(char *));
        o->sl = cx_alloc(c, sizeof(int32_t));
        if (!o->s || !o->sl) return SC_ENOMEM;
        o->s[0] = valid ? nd->s : EMPTY;
        o->sl[0] = valid ? nd->slen : 0;
        break;
    default:
        if (!(o->i = cx_alloc(c, sizeof(int64_t)))) return SC_ENOMEM;
        o->i[0] = valid ? nd->i : 0;
        break;
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
    bool isand = op == SC_E_AND;
    if (a->nonull && b->nonull && a->lt == SC_LT_BOOL && b->lt == SC_LT_BOOL) { /* no null, no error */
        if (vnew_raw(c, o, SC_LT_BOOL)) return SC_ENOMEM;
        o->ok = c->ones;
        o->nonull = true;
        const uint8_t *av = a->b, *bv = b->b;
        if (isand)
            for (int64_t r = 0; r < c->n; r++) o->b[r] = av[r] & bv[r];
        else
            for (int64_t r = 0; r < c->n; r++) o->b[r] = av[r] | bv[r];
        return SC_OK;
    }
    int rc = vnew(c, o, SC_LT_BOOL);
    if (!rc && (a->err || b->err)) rc = err_alloc(c, o);
    if (rc) return rc;
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

static bool is_arith(int op) { return op >= SC_E_ADD && op <= SC_E_POW; }
static bool is_cmp(int op) { return op >= SC_E_EQ && op <= SC_E_GE; }

static int eval_node(const sc_expr *e, int32_t k, const sc_batch *in, ctx *c, vec *v) {
    const sc_enode *nd = &e->nodes[k];
    vec *o = &v[k];
    if (nd->op == SC_E_COL) return ev_col(c, o, in, nd->a, nd->lt);
    if (nd->op == SC_E_LIT) return ev_lit(c, nd, o);
    vec *a = &v[nd->a], *b = nd->b >= 0 ? &v[nd->b] : NULL, *cc = nd->c >= 0 ? &v[nd->c] : NULL;
    if (is_arith(nd->op) && arith_fast_ok(nd, a, b))
        return ev_arith_fast(c, nd, o, a, b, k == e->n - 1 ? c->dest : NULL);
    if (is_cmp(nd->op) && cmp_fast_ok(a, b)) return ev_cmp_fast(c, nd, o, a, b);
    /* the general kernels read full vectors */
    if (v_broadcast(c, a) || (b && v_broadcast(c, b)) || (cc && v_broadcast(c, cc))) return SC_ENOMEM;
    for (int32_t j = 0; nd->op == SC_E_UDF && j < nd->nlist; j++)
        if (v_broadcast(c, &v[nd->ilist[j]])) return SC_ENOMEM;
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

int eval_all(const sc_expr *e, const sc_batch *in, ctx *c, vec **root) {
    for (int32_t k = 0; k < e->n; k++) {
        const sc_enode *nd = &e->nodes[k];
        if (nd->op == SC_E_COL && (nd->a >= in->ncols || in->cols[nd->a].type != sc_ltype_physical((sc_ltype)nd->lt)))
            return SC_EINVAL;
    }
    if (c->n != in->nrows) return SC_EINTERNAL;
    vec *v = cx_zalloc(c, (size_t)e->n * sizeof(vec));
    if (!v) return SC_ENOMEM;
    for (int32_t k = 0; k < e->n; k++) {
        int rc = eval_node(e, k, in, c, v);
        if (rc) return rc;
    }
    *root = &v[e->n - 1];
    return v_broadcast(c, *root);
}

/* Rows [0, n) of column col of out = the vector (validity and null_count kept exact; null
 * rows hold 0 / false / ""). */
static int write_col(const ctx *c, const vec *v, sc_batch *out, int32_t col) {
    sc_column *k = &out->cols[col];
    const int64_t n = c->n;
    const uint8_t *ok = v->ok;
    const bool all = v->nonull;
    switch (k->type) {
    case SC_COL_INT64: {
        int64_t *d = k->values;
        const int64_t *x = v->i;
        if (all && x != d) memmove(d, x, (size_t)n * sizeof *d);
        else if (!all)
            for (int64_t r = 0; r < n; r++) d[r] = ok[r] ? x[r] : 0;
        break;
    }
    case SC_COL_DOUBLE: {
        double *d = k->values;
        const double *x = v->f;
        if (all && x != d) memmove(d, x, (size_t)n * sizeof *d);
        else if (!all)
            for (int64_t r = 0; r < n; r++) d[r] = ok[r] ? x[r] : 0.0;
        break;
    }
    case SC_COL_BOOL:
        if (all) bytes_to_bits(v->b, n, k->values);
        else bytes_and_to_bits(v->b, ok, n, k->values);
        break;
    case SC_COL_UTF8: { /* sc_batch_put_utf8 / sc_batch_set_null keep the validity */
        char *conv = NULL; /* list[int] rows of a list[float] vector, re-encoded */
        int rc = SC_OK;
        for (int64_t r = 0; !rc && r < n; r++) {
            if (!ok[r]) {
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
    /* the validity of rows [0, n), 8 rows at a time; null_count by the change in set bits */
    int64_t before = k->null_count == 0 ? n : sc_bits_count(k->validity, 0, n);
    if (all) bits_fill(k->validity, n);
    else bytes_to_bits(ok, n, k->validity);
    k->null_count += before - (all ? n : sc_bits_count(k->validity, 0, n));
    return SC_OK;
}

int eval_into(const sc_expr *e, const sc_batch *in, sc_batch *out, int32_t col, ctx *c, uint8_t *codes,
              bool *failed) {
    if (col < 0 || col >= out->ncols || out->capacity < in->nrows ||
        out->cols[col].type != sc_ltype_physical(sc_expr_type(e)))
        return SC_EINVAL;
    vec *root = NULL;
    sc_col_type t = out->cols[col].type;
    c->dest = t == SC_COL_INT64 || t == SC_COL_DOUBLE ? out->cols[col].values : NULL;
    int rc = eval_all(e, in, c, &root);
    c->dest = NULL;
    if (!rc) rc = write_col(c, root, out, col);
    if (rc || !root->err) return rc;
    for (int64_t r = 0; r < c->n; r++) {
        if (!root->err[r]) continue;
        *failed = true;
        if (!codes[r]) codes[r] = root->err[r];
    }
    return SC_OK;
}

int sc_expr_eval(const sc_expr *e, const sc_batch *in, sc_batch *out, int32_t col, uint8_t *err) {
    if (!e || !in || !out) return SC_EINVAL;
    int64_t n = in->nrows;
    cx_pool *pool = (cx_pool *)&e->pool; /* the pool is synchronized; the expression is not changed */
    ctx *c = cx_take(pool, n);
    if (!c) return SC_ENOMEM;
    uint8_t *codes = cx_zalloc(c, (size_t)n);
    bool failed = false;
    int rc = codes ? eval_into(e, in, out, col, c, codes, &failed) : SC_ENOMEM;
    for (int64_t r = 0; !rc && failed && err && r < n; r++) err[r] |= codes[r] != 0;
    cx_give(pool, c);
    return rc;
}
