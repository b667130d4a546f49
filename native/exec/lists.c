/* lists: see lists.h. */
#include "lists.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct buf {
    char *p;
    int64_t len, cap;
} buf;

static int buf_put(buf *b, const void *x, int64_t n) {
    if (b->len + n > b->cap) {
        int64_t cap = b->cap ? b->cap * 2 : 256;
        while (cap < b->len + n) cap *= 2;
        char *q = realloc(b->p, (size_t)cap);
        if (!q) return SC_ENOMEM;
        b->p = q;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->len, x, (size_t)n);
    b->len += n;
    return SC_OK;
}

static bool abit(const uint8_t *bm, int64_t i) { return !bm || ((bm[i >> 3] >> (i & 7)) & 1); }

/* element i of a string child ("u", "U" or "vu") */
static void child_str(const struct ArrowArray *a, const char *fmt, int64_t i, const char **p, int32_t *len) {
    if (fmt[0] == 'v') {
        const uint8_t *v = (const uint8_t *)a->buffers[1] + 16 * i;
        memcpy(len, v, 4);
        if (*len <= 12) {
            *p = (const char *)v + 4;
        } else {
            int32_t bi, bo;
            memcpy(&bi, v + 8, 4);
            memcpy(&bo, v + 12, 4);
            *p = (const char *)a->buffers[2 + bi] + bo;
        }
    } else if (fmt[0] == 'U') {
        const int64_t *o = a->buffers[1];
        *p = (const char *)a->buffers[2] + o[i];
        *len = (int32_t)(o[i + 1] - o[i]);
    } else {
        const int32_t *o = a->buffers[1];
        *p = (const char *)a->buffers[2] + o[i];
        *len = o[i + 1] - o[i];
    }
}

static bool child_format_ok(uint8_t inner, const char *f) {
    if (inner >= SC_LT_LIST) return !strcmp(f, "+l") || !strcmp(f, "+L");
    switch (inner) {
    case SC_LT_INT: return !strcmp(f, "l");
    case SC_LT_FLOAT: return !strcmp(f, "g");
    case SC_LT_BOOL: return !strcmp(f, "b");
    case SC_LT_STR: return !strcmp(f, "u") || !strcmp(f, "U") || !strcmp(f, "vu");
    case SC_LT_DATETIME: return !strncmp(f, "tsu:", 4);
    case SC_LT_DATE: return !strcmp(f, "tdD");
    case SC_LT_NULL: return !strcmp(f, "n");
    default: return false;
    }
}

/* Is the Arrow schema's tree readable as list[inner] (children formats, recursively)? */
static bool schema_ok(const struct ArrowSchema *schema, const struct ArrowArray *a, uint8_t inner) {
    bool large = !strcmp(schema->format, "+L");
    if ((!large && strcmp(schema->format, "+l")) || schema->n_children != 1 || a->n_children != 1) return false;
    const struct ArrowSchema *cs = schema->children[0];
    if (!child_format_ok(inner, cs->format)) return false;
    return inner < SC_LT_LIST || schema_ok(cs, a->children[0], (uint8_t)(inner - SC_LT_LIST));
}

/* Append the encoding of list i (valid) of array a (list of inner) to b. */
static int encode_list_row(buf *b, uint8_t inner, const struct ArrowSchema *schema, const struct ArrowArray *a,
                           int64_t i) {
    bool large = !strcmp(schema->format, "+L");
    const struct ArrowSchema *cs = schema->children[0];
    const struct ArrowArray *ch = a->children[0];
    const char *cf = cs->format;
    const uint8_t *cvalid = inner == SC_LT_NULL ? NULL : ch->buffers[0];
    int64_t lo = large ? ((const int64_t *)a->buffers[1])[i] : ((const int32_t *)a->buffers[1])[i];
    int64_t hi = large ? ((const int64_t *)a->buffers[1])[i + 1] : ((const int32_t *)a->buffers[1])[i + 1];
    int rc = SC_OK;
    for (int64_t e = lo; rc == SC_OK && e < hi; e++) {
        int64_t j = ch->offset + e;
        uint8_t tag = inner != SC_LT_NULL && abit(cvalid, j);
        rc = buf_put(b, &tag, 1);
        if (rc || !tag) continue;
        if (inner >= SC_LT_LIST) { /* a nested list: 4-byte length, then its encoding */
            int64_t at = b->len;
            int32_t len = 0;
            rc = buf_put(b, &len, 4);
            if (!rc) rc = encode_list_row(b, (uint8_t)(inner - SC_LT_LIST), cs, ch, j);
            if (!rc && b->len - at - 4 > INT32_MAX) rc = SC_EINVAL;
            if (!rc) {
                len = (int32_t)(b->len - at - 4);
                memcpy(b->p + at, &len, 4);
            }
            continue;
        }
        switch (inner) {
        case SC_LT_INT:
        case SC_LT_FLOAT:
        case SC_LT_DATETIME: rc = buf_put(b, (const int64_t *)ch->buffers[1] + j, 8); break;
        case SC_LT_DATE: {
            int64_t d = ((const int32_t *)ch->buffers[1])[j];
            rc = buf_put(b, &d, 8);
            break;
        }
        case SC_LT_BOOL: {
            uint8_t v = abit(ch->buffers[1], j);
            rc = buf_put(b, &v, 1);
            break;
        }
        case SC_LT_STR: {
            const char *p;
            int32_t len;
            child_str(ch, cf, j, &p, &len);
            rc = buf_put(b, &len, 4);
            if (!rc) rc = buf_put(b, p, len);
            break;
        }
        }
    }
    return rc;
}

int sc_list_import(sc_batch *out, int32_t col, uint8_t inner, const struct ArrowSchema *schema,
                   const struct ArrowArray *a, int64_t start, int64_t n) {
    if (!schema_ok(schema, a, inner)) return SC_ETYPE;
    const uint8_t *valid = a->n_buffers > 0 ? a->buffers[0] : NULL;
    buf b = { 0 };
    int rc = SC_OK;
    for (int64_t r = 0; rc == SC_OK && r < n; r++) {
        int64_t i = start + r;
        if (!abit(valid, i)) {
            sc_batch_set_null(out, col, r);
            continue;
        }
        b.len = 0;
        rc = encode_list_row(&b, inner, schema, a, i);
        if (rc == SC_OK && b.len > INT32_MAX) rc = SC_EINVAL;
        if (rc == SC_OK) rc = sc_batch_put_utf8(out, col, r, b.p, (int32_t)b.len);
    }
    free(b.p);
    sc_column *c = &out->cols[col];
    c->null_count = 0;
    for (int64_t r = 0; r < n; r++) c->null_count += !sc_bit_get(c->validity, r);
    return rc;
}

/* ----------------------------------------------------------------------------- reading */

/* Advance over one element at p (end e); its tag, and its value's bytes. */
static int next_elem(const char **p, const char *e, uint8_t inner, uint8_t *tag, const char **val, int32_t *vlen) {
    if (*p >= e) return SC_EINVAL;
    *tag = (uint8_t) * (*p)++;
    *val = *p;
    *vlen = 0;
    if (!*tag) return SC_OK;
    int32_t w = inner == SC_LT_BOOL ? 1 : 8;
    if (inner == SC_LT_NULL) return SC_EINVAL;
    if (inner == SC_LT_STR || inner >= SC_LT_LIST) { /* length-prefixed: text, nested list */
        if (e - *p < 4) return SC_EINVAL;
        memcpy(&w, *p, 4);
        *p += 4;
        *val = *p;
    }
    if (w < 0 || e - *p < w) return SC_EINVAL;
    *vlen = w;
    *p += w;
    return SC_OK;
}

int sc_list_count(const char *p, int32_t len, uint8_t inner, int64_t *count) {
    const char *e = p + len, *v;
    uint8_t tag;
    int32_t vl;
    int64_t n = 0;
    while (p < e) {
        int rc = next_elem(&p, e, inner, &tag, &v, &vl);
        if (rc) return rc;
        n++;
    }
    *count = n;
    return SC_OK;
}

int sc_list_next(const char **p, const char *e, uint8_t inner, uint8_t *tag, const char **val,
                 int32_t *vlen) {
    return next_elem(p, e, inner, tag, val, vlen);
}

/* ----------------------------------------------------------------------- comparing */

typedef struct lval {
    uint8_t tag, t; /* t: the element's type */
    int64_t i;
    double f;
    const char *s;
    int32_t sl;
} lval;

static lval lval_of(uint8_t tag, uint8_t t, const char *v, int32_t vl) {
    lval x = { tag, t, 0, 0.0, v, vl };
    if (!tag) return x;
    if (t == SC_LT_FLOAT) memcpy(&x.f, v, 8);
    else if (t == SC_LT_BOOL) x.i = *v != 0;
    else if (t != SC_LT_STR) memcpy(&x.i, v, 8);
    return x;
}

/* Exact order of an int and a float (not NaN): -1, 0, 1. */
static int cmp_int_float(int64_t i, double d) {
    if (d >= 9223372036854775808.0) return -1;
    if (d < -9223372036854775808.0) return 1;
    double t = trunc(d);
    int64_t ti = (int64_t)t;
    if (i != ti) return i < ti ? -1 : 1;
    double fr = d - t;
    return fr > 0 ? -1 : (fr < 0 ? 1 : 0);
}

/* Order of two valid elements; 2 when unordered (a NaN is involved). */
static int lval_cmp(const lval *x, const lval *y) {
    if (x->t == SC_LT_STR) {
        int32_t n = x->sl < y->sl ? x->sl : y->sl;
        int m = n ? memcmp(x->s, y->s, (size_t)n) : 0;
        if (m) return m < 0 ? -1 : 1;
        return (x->sl > y->sl) - (x->sl < y->sl);
    }
    bool xf = x->t == SC_LT_FLOAT, yf = y->t == SC_LT_FLOAT;
    if ((xf && isnan(x->f)) || (yf && isnan(y->f))) return 2;
    if (xf && yf) return (x->f > y->f) - (x->f < y->f);
    if (xf) return -cmp_int_float(y->i, x->f);
    if (yf) return cmp_int_float(x->i, y->f);
    return (x->i > y->i) - (x->i < y->i);
}

int sc_list_compare(const char *a, int32_t la, uint8_t ia, const char *b, int32_t lb, uint8_t ib, int op) {
    const char *ea = a + la, *eb = b + lb;
    if (op == SC_LCMP_EQ || op == SC_LCMP_NE) {
        int64_t na = 0, nb = 0;
        if (sc_list_count(a, la, ia, &na) || sc_list_count(b, lb, ib, &nb)) return SC_LCMP_ERR;
        if (na != nb) return op == SC_LCMP_NE;
    }
    while (a < ea && b < eb) {
        uint8_t ta, tb;
        const char *va, *vb;
        int32_t vla, vlb;
        if (next_elem(&a, ea, ia, &ta, &va, &vla) || next_elem(&b, eb, ib, &tb, &vb, &vlb)) return SC_LCMP_ERR;
        if (!ta && !tb) continue; /* None is None */
        if (ta && tb && ia >= SC_LT_LIST) { /* nested lists: equal, else ordered recursively */
            uint8_t ea = (uint8_t)(ia - SC_LT_LIST), eb2 = (uint8_t)(ib - SC_LT_LIST);
            int eq = sc_list_compare(va, vla, ea, vb, vlb, eb2, SC_LCMP_EQ);
            if (eq == SC_LCMP_ERR) return SC_LCMP_ERR;
            if (eq) continue;
            if (op == SC_LCMP_EQ) return 0;
            if (op == SC_LCMP_NE) return 1;
            return sc_list_compare(va, vla, ea, vb, vlb, eb2, op);
        }
        lval x = lval_of(ta, ia, va, vla), y = lval_of(tb, ib, vb, vlb);
        int c = ta && tb ? lval_cmp(&x, &y) : 3; /* 3: null against a value */
        if (c == 0) continue;
        /* the first differing element decides */
        if (op == SC_LCMP_EQ) return 0;
        if (op == SC_LCMP_NE) return 1;
        if (c == 3) return SC_LCMP_ERR;
        if (c == 2) return 0; /* NaN: every ordering is false */
        switch (op) {
        case SC_LCMP_LT: return c < 0;
        case SC_LCMP_LE: return c <= 0;
        case SC_LCMP_GT: return c > 0;
        default: return c >= 0;
        }
    }
    int c = (a < ea) - (b < eb); /* the longer list is greater */
    switch (op) {
    case SC_LCMP_EQ: return c == 0;
    case SC_LCMP_NE: return c != 0;
    case SC_LCMP_LT: return c < 0;
    case SC_LCMP_LE: return c <= 0;
    case SC_LCMP_GT: return c > 0;
    default: return c >= 0;
    }
}

void sc_list_ints_to_floats(const char *p, int32_t len, uint8_t inner, char *out) {
    const char *e = p + len, *v;
    char *o = out;
    uint8_t tag;
    int32_t vl;
    while (p < e) {
        const char *at = p;
        if (next_elem(&p, e, inner, &tag, &v, &vl)) {
            memcpy(o, at, (size_t)(e - at)); /* malformed: copied as is */
            return;
        }
        *o++ = (char)tag;
        if (!tag) continue;
        if (inner >= SC_LT_LIST) { /* same length prefix; the nested list converted */
            memcpy(o, v - 4, 4);
            sc_list_ints_to_floats(v, vl, (uint8_t)(inner - SC_LT_LIST), o + 4);
            o += 4 + vl;
            continue;
        }
        int64_t i;
        memcpy(&i, v, 8);
        double d = (double)i;
        memcpy(o, &d, 8);
        o += 8;
    }
}

void sc_list_norm_floats(char *p, int32_t len, uint8_t inner) {
    const char *e = p + len, *v;
    uint8_t tag;
    int32_t vl;
    while (p < e) {
        const char *q = p;
        if (next_elem(&q, e, inner, &tag, &v, &vl)) return;
        p = (char *)q;
        if (!tag) continue;
        char *w = (char *)v;
        if (inner >= SC_LT_LIST) {
            sc_list_norm_floats(w, vl, (uint8_t)(inner - SC_LT_LIST));
            continue;
        }
        double d;
        memcpy(&d, w, 8);
        if (isnan(d)) d = NAN;
        else if (d == 0.0) d = 0.0;
        memcpy(w, &d, 8);
    }
}

void sc_list_decoded_free(sc_list_decoded *d) {
    free(d->offsets);
    free(d->validity);
    free(d->values);
    free(d->str_offsets);
    free(d->str_data);
    memset(d, 0, sizeof *d);
}

int sc_list_decode(const sc_column *c, int64_t n, uint8_t inner, sc_list_decoded *d) {
    memset(d, 0, sizeof *d);
    d->n = n;
    d->offsets = malloc((size_t)(n + 1) * sizeof(int64_t));
    if (!d->offsets) return SC_ENOMEM;
    d->offsets[0] = 0;
    int64_t m = 0, sbytes = 0;
    for (int64_t r = 0; r < n; r++) {
        if (sc_bit_get(c->validity, r)) {
            const char *p = c->data + c->offsets[r], *e = c->data + c->offsets[r + 1], *v;
            uint8_t tag;
            int32_t vl;
            while (p < e) {
                int rc = next_elem(&p, e, inner, &tag, &v, &vl);
                if (rc) {
                    sc_list_decoded_free(d);
                    return rc;
                }
                m++;
                if (inner == SC_LT_STR || inner >= SC_LT_LIST) sbytes += vl;
            }
        }
        d->offsets[r + 1] = m;
    }
    d->m = m;
    d->str_bytes = sbytes;
    size_t bm = (size_t)(m + 7) / 8 + 1;
    d->validity = calloc(bm, 1);
    bool strlike = inner == SC_LT_STR || inner >= SC_LT_LIST; /* nested: encoded lists */
    if (inner == SC_LT_BOOL) d->values = calloc(bm, 1);
    else if (strlike) {
        d->str_offsets = malloc((size_t)(m + 1) * sizeof(int64_t));
        d->str_data = malloc((size_t)(sbytes ? sbytes : 1));
    } else d->values = malloc((size_t)(m ? m : 1) * 8);
    if (!d->validity || (!strlike && !d->values) || (strlike && (!d->str_offsets || !d->str_data))) {
        sc_list_decoded_free(d);
        return SC_ENOMEM;
    }
    int64_t k = 0, at = 0;
    if (d->str_offsets) d->str_offsets[0] = 0;
    for (int64_t r = 0; r < n; r++) {
        if (!sc_bit_get(c->validity, r)) continue;
        const char *p = c->data + c->offsets[r], *e = c->data + c->offsets[r + 1], *v;
        uint8_t tag;
        int32_t vl;
        while (p < e) {
            next_elem(&p, e, inner, &tag, &v, &vl);
            if (tag) sc_bit_set(d->validity, k, true);
            switch (strlike ? SC_LT_STR : inner) {
            case SC_LT_BOOL:
                if (tag && *v) sc_bit_set(d->values, k, true);
                break;
            case SC_LT_STR:
                if (vl) memcpy(d->str_data + at, v, (size_t)vl);
                at += vl;
                d->str_offsets[k + 1] = at;
                break;
            case SC_LT_DATE: {
                int64_t x = 0;
                if (tag) memcpy(&x, v, 8);
                ((int32_t *)d->values)[k] = (int32_t)x; /* date32 */
                break;
            }
            case SC_LT_NULL: break;
            default:
                if (tag) memcpy((int64_t *)d->values + k, v, 8);
                else ((int64_t *)d->values)[k] = 0;
            }
            k++;
        }
    }
    return SC_OK;
}

/* ----------------------------------------------------------------------------- explode */

typedef struct explode_st {
    sc_op_base base;
    int32_t ncols;
    int32_t *cols;  /* exploded columns (same index in input and output) */
    uint8_t *inner; /* their element types */
    char *reason;
} explode_st;

void sc_op_explode_destroy(void *vst) {
    explode_st *st = vst;
    if (!st) return;
    free(st->cols);
    free(st->inner);
    free(st->reason);
    sc_op_base_free(&st->base);
    free(st);
}

int sc_op_explode_create(void **out, const sc_op_base *base, const int32_t *cols, int32_t ncols,
                         const char *reason) {
    explode_st *st = calloc(1, sizeof *st);
    if (!st) return SC_ENOMEM;
    int rc = sc_op_base_copy(&st->base, base);
    st->ncols = ncols;
    st->cols = malloc((size_t)(ncols ? ncols : 1) * sizeof(int32_t));
    st->inner = malloc((size_t)(ncols ? ncols : 1));
    st->reason = strdup(reason ? reason : "explode: lists of different lengths");
    if (!rc && (!st->cols || !st->inner || !st->reason)) rc = SC_ENOMEM;
    for (int32_t k = 0; !rc && k < ncols; k++) {
        int32_t c = cols[k];
        if (c < SC_NHIDDEN || c >= base->in.ncols || !sc_ltype_is_list(base->in.lt[c]) ||
            base->out.lt[c] != base->in.lt[c] - SC_LT_LIST) {
            rc = SC_EINVAL;
            break;
        }
        st->cols[k] = c;
        st->inner[k] = (uint8_t)(base->in.lt[c] - SC_LT_LIST);
    }
    if (!rc && base->in.ncols != base->out.ncols) rc = SC_EINVAL;
    if (rc) {
        sc_op_explode_destroy(st);
        return rc;
    }
    *out = st;
    return SC_OK;
}

/* write element (tag, v) of type inner at row `row` of column col */
static int put_elem(sc_batch *o, int32_t col, int64_t row, uint8_t inner, uint8_t tag, const char *v, int32_t vl) {
    if (!tag || inner == SC_LT_NULL) {
        sc_batch_set_null(o, col, row);
        return SC_OK;
    }
    if (inner == SC_LT_STR || inner >= SC_LT_LIST) return sc_batch_put_utf8(o, col, row, v, vl); /* text, a list */
    if (inner == SC_LT_BOOL) {
        sc_batch_set_bool(o, col, row, *v != 0);
        return SC_OK;
    }
    int64_t x;
    memcpy(&x, v, 8);
    sc_batch_set_i64(o, col, row, x); /* doubles travel as their bits */
    return SC_OK;
}

int sc_op_explode_run(void *vst, sc_batch *in, sc_batch **out) {
    explode_st *st = vst;
    *out = NULL;
    if (in->eos) {
        *out = in;
        return SC_OK;
    }
    int64_t n = in->nrows;
    sc_count_in(&st->base, n);
    int64_t *len = malloc((size_t)(n ? n : 1) * sizeof(int64_t)); /* output rows per input row, -1 dead */
    int rc = len ? SC_OK : SC_ENOMEM;
    int64_t total = 0;
    for (int64_t r = 0; !rc && r < n; r++) {
        int64_t L = 0;
        for (int32_t k = 0; !rc && k < st->ncols; k++) {
            int32_t c = st->cols[k];
            if (!sc_batch_is_valid(in, c, r)) continue;
            int32_t bl;
            const char *p = sc_batch_get_utf8(in, c, r, &bl);
            int64_t cnt;
            rc = sc_list_count(p, bl, st->inner[k], &cnt);
            if (rc || cnt == 0) continue;
            if (L && cnt != L) L = -1;
            else if (L >= 0) L = cnt;
        }
        if (rc) break;
        if (L < 0) {
            rc = sc_op_dead(&st->base, in, r, st->reason);
            len[r] = -1;
            continue;
        }
        len[r] = L ? L : 1;
        total += len[r];
    }
    int64_t *idx = !rc ? malloc((size_t)(total ? total : 1) * sizeof(int64_t)) : NULL;
    if (!rc && !idx) rc = SC_ENOMEM;
    sc_batch *o = NULL;
    if (!rc && total) {
        int64_t j = 0;
        for (int64_t r = 0; r < n; r++)
            for (int64_t i = 0; i < len[r]; i++) idx[j++] = r;
        rc = sc_op_new_out(&st->base, in, &o);
        if (!rc) rc = sc_batch_reserve(o, total);
        for (int32_t c = 0; !rc && c < in->ncols; c++) {
            bool exploded = false;
            for (int32_t k = 0; k < st->ncols; k++) exploded |= st->cols[k] == c;
            if (!exploded) rc = sc_batch_take_col(o, c, 0, in, c, idx, total);
        }
        for (int32_t k = 0; !rc && k < st->ncols; k++) {
            int32_t c = st->cols[k];
            uint8_t inner = st->inner[k];
            int64_t row = 0;
            for (int64_t r = 0; !rc && r < n; r++) {
                if (len[r] < 0) continue;
                int32_t bl = 0;
                const char *p = sc_batch_is_valid(in, c, r) ? sc_batch_get_utf8(in, c, r, &bl) : NULL;
                if (!p || bl == 0) { /* a null or empty list: nulls alongside the others */
                    for (int64_t i = 0; i < len[r]; i++) sc_batch_set_null(o, c, row++);
                    continue;
                }
                const char *e = p + bl, *v;
                uint8_t tag;
                int32_t vl;
                while (!rc && p < e) {
                    rc = next_elem(&p, e, inner, &tag, &v, &vl);
                    if (!rc) rc = put_elem(o, c, row++, inner, tag, v, vl);
                }
            }
        }
        if (!rc) o->nrows = total;
    }
    if (!rc) sc_count_out(&st->base, total);
    if (rc && o) sc_batch_release(o);
    else *out = o;
    free(idx);
    free(len);
    sc_batch_release(in);
    return rc;
}
