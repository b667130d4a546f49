/* common: schemas, standalone batches, side logs and operator bases (see exec.h). */
#include "exec.h"

#include <stdlib.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

int sc_schema_init(sc_schema *s, int32_t ncols, const uint8_t *lt) {
    if (ncols < 0 || (ncols && !lt)) return SC_EINVAL;
    s->ncols = ncols;
    s->lt = malloc((size_t)(ncols ? ncols : 1));
    if (!s->lt) return SC_ENOMEM;
    if (ncols) memcpy(s->lt, lt, (size_t)ncols);
    return SC_OK;
}

int sc_schema_copy(sc_schema *dst, const sc_schema *src) { return sc_schema_init(dst, src->ncols, src->lt); }

void sc_schema_free(sc_schema *s) {
    free(s->lt);
    s->lt = NULL;
    s->ncols = 0;
}

/* ------------------------------------------------------------------ standalone batches */

static int64_t bm_bytes(int64_t bits) { return (bits + 7) / 8; }

/* A column with room for cap rows. `views`: a string column made as 16-byte views, without the
 * offsets and bytes it would need only if it turned into plain strings (sc_column_unview then
 * makes them): an output that takes an input's views gets nothing it does not use. Zeroed
 * offsets for a column of 8K rows were 32 KB of fresh memory written per batch, and with the
 * 64 KB of bytes beside them about a tenth of a paced run's batch latency. */
static int col_alloc(sc_column *c, sc_col_type t, int64_t cap, bool views) {
    memset(c, 0, sizeof *c);
    c->type = t;
    c->validity = sc_colbuf_alloc((size_t)bm_bytes(cap));
    if (!c->validity) return SC_ENOMEM;
    memset(c->validity, 0xFF, (size_t)bm_bytes(cap));
    if (views && t == SC_COL_UTF8) return sc_column_views_room(c, cap);
    return sc_column_room(c, cap);
}

/* ------------------------------------------------------------------ views columns */

int sc_views_to_utf8(sc_column *d, int64_t d0, const sc_column *x, const int32_t *sel, const int64_t *idx,
                     int64_t n) {
    const uint8_t *v = x->values;
    int64_t base = d->offsets[d0], bytes = base;
    for (int64_t j = 0; j < n; j++) {
        int64_t r = sel ? sel[j] : idx ? idx[j] : j;
        int32_t len;
        memcpy(&len, v + 16 * r, 4);
        bytes += len;
    }
    if (bytes > INT32_MAX) return SC_EINVAL;
    if (bytes > d->data_cap) {
        int64_t cap = d->data_cap > 64 ? d->data_cap : 64;
        while (cap < bytes) cap *= 2;
        char *q = sc_colbuf_realloc(d->data, (size_t)cap);
        if (!q) return SC_ENOMEM;
        d->data = q;
        d->data_cap = cap;
    }
    int32_t at = (int32_t)base;
    for (int64_t j = 0; j < n; j++) {
        int64_t r = sel ? sel[j] : idx ? idx[j] : j;
        int32_t len;
        memcpy(&len, v + 16 * r, 4);
        memcpy(d->data + at, v + 16 * r + 4, (size_t)len);
        at += len;
        d->offsets[d0 + j + 1] = at;
    }
    return SC_OK;
}

int sc_column_views_room(sc_column *c, int64_t rows) {
    if (c->borrowed) return SC_EINVAL; /* never written: views are written to fresh batches */
    void *v = sc_colbuf_realloc(c->views ? c->values : NULL, (size_t)(rows ? rows : 1) * 16);
    if (!v) return SC_ENOMEM;
    if (!c->views && c->values) sc_colbuf_free(c->values);
    c->values = v;
    c->views = 1;
    return SC_OK;
}

int sc_column_unview(sc_column *c, int64_t nrows) {
    if (!c->views) return SC_OK;
    /* one made as views (col_alloc) gets offsets and bytes for the room its views had */
    int64_t cap = c->offsets || c->borrowed ? nrows : (int64_t)(sc_colbuf_size(c->values) / 16);
    sc_column was = *c;
    c->views = 0;
    int rc = sc_column_room(c, cap > nrows ? cap : nrows); /* nothing to do when it has them */
    if (!rc) {
        c->offsets[0] = 0;
        rc = sc_views_to_utf8(c, 0, &was, NULL, NULL, nrows);
    }
    if (rc) {
        c->views = 1;
        return rc;
    }
    if (!was.borrowed) sc_colbuf_free(was.values);
    c->values = NULL;
    c->borrowed = 0;
    return SC_OK;
}

void sc_exec_tune_allocator(void) {
#ifdef __GLIBC__
    mallopt(M_MMAP_THRESHOLD, 64 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
#endif
}

int sc_batch_new(sc_batch **out, const sc_schema *s, int64_t capacity) {
    return sc_batch_new_views(out, s, capacity, NULL);
}

int sc_batch_new_views(sc_batch **out, const sc_schema *s, int64_t capacity, const uint8_t *views) {
    if (!out || !s || capacity <= 0 || capacity > INT32_MAX / 2) return SC_EINVAL;
    sc_batch *b = calloc(1, sizeof *b);
    if (!b) return SC_ENOMEM;
    b->capacity = capacity;
    b->ncols = s->ncols;
    b->cols = calloc((size_t)(s->ncols ? s->ncols : 1), sizeof(sc_column));
    if (!b->cols) {
        free(b);
        return SC_ENOMEM;
    }
    for (int32_t i = 0; i < s->ncols; i++) {
        int rc = col_alloc(&b->cols[i], sc_ltype_physical((sc_ltype)s->lt[i]), capacity, views && views[i]);
        if (rc) {
            b->ncols = i + 1;
            sc_batch_free_standalone(b);
            return rc;
        }
    }
    *out = b;
    return SC_OK;
}

int sc_batch_new_shell(sc_batch **out, const sc_schema *s) {
    if (!out || !s) return SC_EINVAL;
    sc_batch *b = calloc(1, sizeof *b);
    if (!b) return SC_ENOMEM;
    b->ncols = s->ncols;
    b->cols = calloc((size_t)(s->ncols ? s->ncols : 1), sizeof(sc_column));
    if (!b->cols) {
        free(b);
        return SC_ENOMEM;
    }
    for (int32_t i = 0; i < s->ncols; i++) b->cols[i].type = sc_ltype_physical((sc_ltype)s->lt[i]);
    *out = b;
    return SC_OK;
}

static int grow(void **p, size_t bytes) { /* a column buffer */
    void *q = sc_colbuf_realloc(*p, bytes);
    if (!q) return SC_ENOMEM;
    *p = q;
    return SC_OK;
}

int sc_column_room(sc_column *c, int64_t cap) {
    switch (c->type) {
    case SC_COL_INT64:
    case SC_COL_DOUBLE:
        if (!c->values && !(c->values = sc_colbuf_alloc((size_t)cap * 8))) return SC_ENOMEM;
        break;
    case SC_COL_BOOL:
        if (!c->values && !(c->values = sc_colbuf_calloc((size_t)bm_bytes(cap), 1))) return SC_ENOMEM;
        break;
    case SC_COL_UTF8:
        if (c->views) return SC_OK;
        if (!c->offsets && !(c->offsets = sc_colbuf_calloc((size_t)cap + 1, sizeof(int32_t)))) return SC_ENOMEM;
        if (!c->data) {
            c->data_cap = cap * 8 > 64 ? cap * 8 : 64;
            if (!(c->data = sc_colbuf_alloc((size_t)c->data_cap))) return SC_ENOMEM;
        }
        break;
    default: return SC_EINVAL;
    }
    return SC_OK;
}

int sc_batch_shell_room(sc_batch *b, int64_t rows) {
    if (b->pool || b->capacity || rows <= 0 || rows > INT32_MAX / 2) return SC_EINVAL;
    for (int32_t i = 0; i < b->ncols; i++) {
        sc_column *c = &b->cols[i];
        if (c->validity || c->values || c->offsets || c->data) return SC_EINVAL; /* not a shell */
        c->validity = sc_colbuf_alloc((size_t)bm_bytes(rows));
        if (!c->validity) return SC_ENOMEM;
        memset(c->validity, 0xFF, (size_t)bm_bytes(rows));
        if (i < SC_NHIDDEN || c->type == SC_COL_BOOL) {
            int rc = sc_column_room(c, rows);
            if (rc) return rc;
        }
    }
    b->capacity = rows;
    return SC_OK;
}

int sc_batch_reserve(sc_batch *b, int64_t rows) {
    if (b->pool) return rows <= b->capacity ? SC_OK : SC_EFULL;
    if (rows <= b->capacity) return SC_OK;
    int64_t cap = b->capacity * 2;
    if (cap < rows) cap = rows;
    if (cap > INT32_MAX / 2) return SC_EINVAL;
    for (int32_t i = 0; i < b->ncols; i++) {
        sc_column *c = &b->cols[i];
        if (c->views) { /* a batch that grows is written: strings go back to offsets / data */
            int rc = sc_column_unview(c, b->nrows);
            if (rc) return rc;
        }
        int64_t old = bm_bytes(b->capacity), now = bm_bytes(cap);
        if (grow((void **)&c->validity, (size_t)now)) return SC_ENOMEM;
        memset(c->validity + old, 0xFF, (size_t)(now - old));
        /* bits past capacity in the last old byte are already 1 (set at alloc/reset) */
        switch (c->type) {
        case SC_COL_INT64:
        case SC_COL_DOUBLE:
            if (c->borrowed) { /* a copy of its own, then grown */
                void *v = sc_colbuf_alloc((size_t)cap * 8);
                if (!v) return SC_ENOMEM;
                memcpy(v, c->values, (size_t)b->nrows * 8);
                c->values = v;
                c->borrowed = 0;
            } else if (grow(&c->values, (size_t)cap * 8)) {
                return SC_ENOMEM;
            }
            break;
        case SC_COL_BOOL:
            if (grow(&c->values, (size_t)now)) return SC_ENOMEM;
            memset((uint8_t *)c->values + old, 0, (size_t)(now - old));
            break;
        case SC_COL_UTF8:
            if (grow((void **)&c->offsets, (size_t)(cap + 1) * sizeof(int32_t))) return SC_ENOMEM;
            if (!c->data) { /* a shell's first room (sc_batch_new_shell): as col_alloc makes it */
                c->offsets[0] = 0;
                c->data_cap = cap * 8 > 64 ? cap * 8 : 64;
                c->data = sc_colbuf_alloc((size_t)c->data_cap);
                if (!c->data) return SC_ENOMEM;
            }
            break;
        }
    }
    b->capacity = cap;
    return SC_OK;
}

int sc_batch_put_utf8(sc_batch *b, int32_t col, int64_t row, const char *s, int32_t len) {
    sc_column *c = &b->cols[col];
    int64_t start = c->offsets[row];
    if (start + len > c->data_cap) {
        if (b->pool) return SC_EFULL;
        int64_t cap = c->data_cap * 2;
        while (cap < start + len) cap *= 2;
        if (cap > INT32_MAX) return SC_EINVAL;
        if (grow((void **)&c->data, (size_t)cap)) return SC_ENOMEM;
        c->data_cap = cap;
    }
    if (len) memcpy(c->data + start, s, (size_t)len);
    c->offsets[row + 1] = (int32_t)(start + len);
    if (!sc_bit_get(c->validity, row)) { sc_bit_set(c->validity, row, true); c->null_count--; }
    return SC_OK;
}

int sc_batch_copy_cell(sc_batch *dst, int32_t dcol, int64_t drow, const sc_batch *src, int32_t scol,
                       int64_t srow) {
    const sc_column *s = &src->cols[scol];
    sc_column *d = &dst->cols[dcol];
    if (!sc_bit_get(s->validity, srow)) {
        sc_batch_set_null(dst, dcol, drow);
        return SC_OK;
    }
    switch (s->type) {
    case SC_COL_INT64:
    case SC_COL_DOUBLE: ((int64_t *)d->values)[drow] = ((const int64_t *)s->values)[srow]; break;
    case SC_COL_BOOL: sc_bit_set(d->values, drow, sc_bit_get(s->values, srow)); break;
    case SC_COL_UTF8: {
        int32_t len;
        const char *p = sc_batch_get_utf8(src, scol, srow, &len);
        return sc_batch_put_utf8(dst, dcol, drow, p, len);
    }
    }
    sc_batch_set_valid(dst, dcol, drow);
    return SC_OK;
}

int sc_batch_copy_row(sc_batch *dst, int64_t drow, const sc_batch *src, int64_t srow) {
    for (int32_t c = 0; c < src->ncols; c++) {
        int rc = sc_batch_copy_cell(dst, c, drow, src, c, srow);
        if (rc) return rc;
    }
    return SC_OK;
}

/* dst bits [doff, doff+n) = src bits [0, n), a byte of src at a time (shifted into place
 * when dst is not byte-aligned); bits of dst outside the range are kept. */
static void bits_copy(uint8_t *dst, int64_t doff, const uint8_t *src, int64_t n) {
    int64_t whole = n >> 3, r;
    int sh = (int)(doff & 7);
    uint8_t *d = dst + (doff >> 3);
    if (sh == 0) {
        memcpy(d, src, (size_t)whole);
    } else {
        uint8_t lo = (uint8_t)((1u << sh) - 1);
        for (int64_t i = 0; i < whole; i++) {
            uint8_t v = src[i];
            d[i] = (uint8_t)((d[i] & lo) | (v << sh));
            d[i + 1] = (uint8_t)((d[i + 1] & ~lo) | (v >> (8 - sh)));
        }
    }
    for (r = whole << 3; r < n; r++) sc_bit_set(dst, doff + r, sc_bit_get(src, r));
}

int sc_batch_take_col(sc_batch *dst, int32_t dcol, int64_t d0, const sc_batch *src, int32_t scol,
                      const int64_t *idx, int64_t n) {
    if (d0 + n > dst->capacity) return SC_EFULL;
    const sc_column *x = &src->cols[scol];
    sc_column *d = &dst->cols[dcol];
    /* no nulls on either side: the new rows' bits are already 1 (fresh or reset) */
    for (int64_t i = 0; (x->null_count || d->null_count) && i < n; i++) {
        bool v = sc_bit_get(x->validity, idx[i]);
        if (sc_bit_get(d->validity, d0 + i) != v) {
            sc_bit_set(d->validity, d0 + i, v);
            d->null_count += v ? -1 : 1;
        }
    }
    switch (x->type) {
    case SC_COL_INT64:
    case SC_COL_DOUBLE: {
        const int64_t *sv = x->values;
        int64_t *dv = (int64_t *)d->values + d0;
        for (int64_t i = 0; i < n; i++) dv[i] = sv[idx[i]];
        break;
    }
    case SC_COL_BOOL:
        for (int64_t i = 0; i < n; i++) sc_bit_set(d->values, d0 + i, sc_bit_get(x->values, idx[i]));
        break;
    case SC_COL_UTF8: {
        if (d->views) {
            int rc = sc_column_unview(d, d0);
            if (rc) return rc;
        }
        if (x->views) {
            if (dst->pool) return SC_EFULL;
            return sc_views_to_utf8(d, d0, x, NULL, idx, n);
        }
        int64_t bytes = d->offsets[d0];
        for (int64_t i = 0; i < n; i++) bytes += x->offsets[idx[i] + 1] - x->offsets[idx[i]];
        if (bytes > d->data_cap) {
            if (dst->pool) return SC_EFULL;
            int64_t cap = d->data_cap * 2;
            while (cap < bytes) cap *= 2;
            if (cap > INT32_MAX) return SC_EINVAL;
            if (grow((void **)&d->data, (size_t)cap)) return SC_ENOMEM;
            d->data_cap = cap;
        }
        int32_t at = d->offsets[d0];
        for (int64_t i = 0; i < n; i++) {
            int32_t a = x->offsets[idx[i]], len = x->offsets[idx[i] + 1] - a;
            memcpy(d->data + at, x->data + a, (size_t)len);
            at += len;
            d->offsets[d0 + i + 1] = at;
        }
        break;
    }
    }
    return SC_OK;
}

int sc_batch_take(sc_batch *dst, const sc_batch *src, const int64_t *idx, int64_t n) {
    int64_t d0 = dst->nrows;
    if (d0 + n > dst->capacity) return SC_EFULL;
    for (int32_t c = 0; c < src->ncols; c++) {
        int rc = sc_batch_take_col(dst, c, d0, src, c, idx, n);
        if (rc) return rc;
    }
    dst->nrows = d0 + n;
    return SC_OK;
}

int sc_batch_append(sc_batch *dst, const sc_batch *src) {
    int64_t d0 = dst->nrows, m = src->nrows;
    if (d0 + m > dst->capacity) {
        int rc = sc_batch_reserve(dst, d0 + m);
        if (rc) return rc;
    }
    if (src->lean) dst->lean = 1; /* hidden columns: not moved (nothing reads them) */
    for (int32_t c = src->lean ? SC_NHIDDEN : 0; c < dst->ncols && m; c++) {
        sc_column *d = &dst->cols[c];
        const sc_column *x = &src->cols[c];
        bits_copy(d->validity, d0, x->validity, m);
        d->null_count += x->null_count;
        switch (d->type) {
        case SC_COL_INT64:
        case SC_COL_DOUBLE: memcpy((int64_t *)d->values + d0, x->values, (size_t)m * 8); break;
        case SC_COL_BOOL: bits_copy(d->values, d0, x->values, m); break;
        case SC_COL_UTF8: {
            int rc = sc_column_unview(d, d0);
            if (!rc && x->views) rc = sc_views_to_utf8(d, d0, x, NULL, NULL, m);
            if (rc) return rc;
            if (x->views) break;
            int32_t base = d->offsets[d0], first = x->offsets[0];
            int64_t bytes = (int64_t)x->offsets[m] - first;
            if (base + bytes > d->data_cap) {
                int64_t cap = d->data_cap * 2;
                while (cap < base + bytes) cap *= 2;
                if (cap > INT32_MAX) return SC_EINVAL;
                if (grow((void **)&d->data, (size_t)cap)) return SC_ENOMEM;
                d->data_cap = cap;
            }
            if (bytes) memcpy(d->data + base, x->data + first, (size_t)bytes);
            for (int64_t r = 1; r <= m; r++) d->offsets[d0 + r] = base + (x->offsets[r] - first);
            break;
        }
        }
    }
    dst->nrows = d0 + m;
    return SC_OK;
}

int sc_batch_list_add(sc_batch_list *l, sc_batch *b) {
    if (l->n == l->cap) {
        int32_t cap = l->cap ? l->cap * 2 : 64;
        sc_batch **a = realloc(l->b, (size_t)cap * sizeof *a);
        if (!a) {
            sc_batch_release(b);
            return SC_ENOMEM;
        }
        l->b = a;
        l->cap = cap;
    }
    l->b[l->n++] = b;
    l->rows += b->nrows;
    return SC_OK;
}

int sc_batch_list_join(sc_batch_list *l, const sc_schema *s, sc_batch **out) {
    int rc = SC_OK;
    *out = NULL;
    if (l->n == 1) *out = l->b[0];
    else if (l->n > 1) rc = sc_batch_concat(out, s, l->b, l->n);
    for (int32_t i = 0; l->n > 1 && i < l->n; i++) sc_batch_release(l->b[i]);
    free(l->b);
    memset(l, 0, sizeof *l);
    return rc;
}

int sc_batch_concat(sc_batch **out, const sc_schema *s, sc_batch *const *parts, int32_t n) {
    int64_t total = 0;
    for (int32_t k = 0; k < n; k++) total += parts[k]->nrows;
    sc_batch *b = NULL;
    int rc = sc_batch_new(&b, s, total > 0 ? total : 1);
    for (int32_t k = 0; !rc && k < n; k++) rc = sc_batch_append(b, parts[k]);
    if (rc) {
        if (b) sc_batch_free_standalone(b);
        return rc;
    }
    if (n > 0) {
        b->serial = parts[0]->serial;
        b->first_row = parts[0]->first_row;
        b->marker_ns = parts[0]->marker_ns;
    }
    *out = b;
    return SC_OK;
}

int sc_batch_clone(sc_batch **out, const sc_batch *src) {
    sc_batch *b = calloc(1, sizeof *b);
    if (!b) return SC_ENOMEM;
    int64_t cap = src->capacity;
    b->capacity = cap;
    b->ncols = src->ncols;
    b->cols = calloc((size_t)(src->ncols ? src->ncols : 1), sizeof(sc_column));
    if (!b->cols) {
        free(b);
        return SC_ENOMEM;
    }
    for (int32_t i = 0; i < src->ncols; i++) {
        const sc_column *s = &src->cols[i];
        sc_column *d = &b->cols[i];
        int rc = col_alloc(d, s->type, cap, false);
        if (!rc && s->views) { /* the views, copied */
            rc = sc_column_views_room(d, cap);
            if (!rc) memcpy(d->values, s->values, (size_t)src->nrows * 16);
        }
        if (!rc && s->type == SC_COL_UTF8 && !s->views && s->offsets[src->nrows] > d->data_cap) {
            d->data_cap = s->offsets[src->nrows];
            rc = grow((void **)&d->data, (size_t)d->data_cap);
        }
        if (rc) {
            b->ncols = i + 1;
            sc_batch_free_standalone(b);
            return rc;
        }
        memcpy(d->validity, s->validity, (size_t)bm_bytes(cap));
        d->null_count = s->null_count;
        switch (s->type) {
        case SC_COL_INT64:
        case SC_COL_DOUBLE: memcpy(d->values, s->values, (size_t)src->nrows * 8); break;
        case SC_COL_BOOL: memcpy(d->values, s->values, (size_t)bm_bytes(cap)); break;
        case SC_COL_UTF8:
            if (s->views) break;
            memcpy(d->offsets, s->offsets, (size_t)(src->nrows + 1) * sizeof(int32_t));
            memcpy(d->data, s->data, (size_t)s->offsets[src->nrows]);
            break;
        }
    }
    b->serial = src->serial;
    b->first_row = src->first_row;
    b->nrows = src->nrows;
    b->marker_ns = src->marker_ns;
    b->part = src->part;
    b->group_n = src->group_n;
    b->eos = src->eos;
    b->lean = src->lean;
    *out = b;
    return SC_OK;
}

/* ------------------------------------------------------------------------- side logs */

#define SIDE_ROWS 256

struct sc_side {
    pthread_mutex_t mu;
    sc_schema schema;
    uint32_t step;
    sc_batch *rows; /* current batch being filled */
    sc_side_meta *meta;
    int64_t n, cap;
};

int sc_side_create(sc_side **out, const sc_schema *row_schema, uint32_t step) {
    sc_side *s = calloc(1, sizeof *s);
    if (!s) return SC_ENOMEM;
    int rc = sc_schema_copy(&s->schema, row_schema);
    if (rc) {
        free(s);
        return rc;
    }
    pthread_mutex_init(&s->mu, NULL);
    s->step = step;
    *out = s;
    return SC_OK;
}

void sc_side_destroy(sc_side *s) {
    if (!s) return;
    sc_batch_release(s->rows);
    sc_side_meta_free(s->meta, s->n);
    sc_schema_free(&s->schema);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

uint32_t sc_side_step(const sc_side *s) { return s->step; }
const sc_schema *sc_side_schema(const sc_side *s) { return &s->schema; }

/* A hidden cell written, and valid whatever the copied row had there (a lean row's hidden
 * columns hold nothing). */
static void put_hidden(sc_batch *b, int32_t col, int64_t row, int64_t v) {
    sc_column *c = &b->cols[col];
    if (!sc_bit_get(c->validity, row)) {
        sc_bit_set(c->validity, row, true);
        c->null_count--;
    }
    sc_batch_set_i64(b, col, row, v);
}

static int side_add(sc_side *s, sc_side_kind kind, const sc_batch *b, int64_t row, const int64_t *seq,
                    const char *reason) {
    char *r = NULL;
    if (reason && !(r = strdup(reason))) return SC_ENOMEM;
    pthread_mutex_lock(&s->mu);
    int rc = SC_OK;
    if (!s->rows) rc = sc_batch_new(&s->rows, &s->schema, SIDE_ROWS);
    if (!rc && s->n >= s->rows->capacity) rc = sc_batch_reserve(s->rows, s->n + 1);
    if (!rc && s->n >= s->cap) {
        int64_t cap = s->cap ? s->cap * 2 : SIDE_ROWS;
        sc_side_meta *m = realloc(s->meta, (size_t)cap * sizeof *m);
        if (!m) rc = SC_ENOMEM;
        else {
            s->meta = m;
            s->cap = cap;
        }
    }
    if (!rc) rc = sc_batch_copy_row(s->rows, s->n, b, row);
    if (!rc && seq) {
        put_hidden(s->rows, SC_COL_SEQ, s->n, *seq);
        put_hidden(s->rows, SC_COL_POS, s->n, 0);
    }
    if (!rc) {
        s->meta[s->n] = (sc_side_meta){ (uint8_t)kind, b->serial, row, r };
        s->n++;
        s->rows->nrows = s->n;
    }
    pthread_mutex_unlock(&s->mu);
    if (rc) free(r);
    return rc;
}

int sc_side_add(sc_side *s, sc_side_kind kind, const sc_batch *b, int64_t row, const char *reason) {
    return side_add(s, kind, b, row, NULL, reason);
}

int sc_side_add_seq(sc_side *s, sc_side_kind kind, const sc_batch *b, int64_t row, int64_t seq,
                    const char *reason) {
    return side_add(s, kind, b, row, &seq, reason);
}

int sc_side_take(sc_side *s, sc_batch **rows, sc_side_meta **meta, int64_t *n) {
    pthread_mutex_lock(&s->mu);
    *rows = s->rows;
    *meta = s->meta;
    *n = s->n;
    s->rows = NULL;
    s->meta = NULL;
    s->n = s->cap = 0;
    pthread_mutex_unlock(&s->mu);
    return SC_OK;
}

void sc_side_meta_free(sc_side_meta *meta, int64_t n) {
    for (int64_t i = 0; meta && i < n; i++) free(meta[i].reason);
    free(meta);
}

/* ---------------------------------------------------------------------- operator base */

int sc_op_base_init(sc_op_base *b, uint32_t step, bool count_in, bool count_out,
                    sc_step_counters *counters, const sc_schema *in, const sc_schema *out,
                    int64_t capacity, bool with_side) {
    memset(b, 0, sizeof *b);
    b->step = step;
    b->count_in = count_in;
    b->count_out = count_out;
    b->counters = counters;
    b->capacity = capacity > 0 ? capacity : 1024;
    sc_i64_init(&b->state_size, 0);
    int rc = sc_schema_copy(&b->in, in);
    if (!rc) rc = sc_schema_copy(&b->out, out);
    if (!rc && with_side) rc = sc_side_create(&b->side, in, step);
    if (rc) sc_op_base_free(b);
    return rc;
}

int sc_op_base_copy(sc_op_base *dst, const sc_op_base *src) {
    return sc_op_base_init(dst, src->step, src->count_in, src->count_out, src->counters, &src->in, &src->out,
                           src->capacity, src->side != NULL);
}

void sc_op_base_free(sc_op_base *b) {
    sc_schema_free(&b->in);
    sc_schema_free(&b->out);
    sc_side_destroy(b->side);
    b->side = NULL;
}

int sc_op_dead(sc_op_base *b, const sc_batch *in, int64_t row, const char *reason) {
    sc_u64_fetch_add_relaxed(&b->counters->dead, 1);
    return b->side ? sc_side_add(b->side, SC_SIDE_DEAD, in, row, reason) : SC_OK;
}

int sc_op_dead_seq(sc_op_base *b, const sc_batch *in, int64_t row, int64_t seq, const char *reason) {
    sc_u64_fetch_add_relaxed(&b->counters->dead, 1);
    return b->side ? sc_side_add_seq(b->side, SC_SIDE_DEAD, in, row, seq, reason) : SC_OK;
}

int sc_op_late(sc_op_base *b, const sc_batch *in, int64_t row) {
    sc_u64_fetch_add_relaxed(&b->counters->late, 1);
    return b->side ? sc_side_add(b->side, SC_SIDE_LATE, in, row, NULL) : SC_OK;
}

int sc_op_new_out(sc_op_base *b, const sc_batch *in, sc_batch **out) {
    return sc_op_new_out_rows(b, in, in && in->nrows > b->capacity ? in->nrows : b->capacity, out);
}

int sc_op_new_out_rows(sc_op_base *b, const sc_batch *in, int64_t cap, sc_batch **out) {
    return sc_op_new_out_views(b, in, cap, NULL, out);
}

int sc_op_new_out_views(sc_op_base *b, const sc_batch *in, int64_t cap, const uint8_t *views, sc_batch **out) {
    int rc = sc_batch_new_views(out, &b->out, cap > 0 ? cap : 1, views);
    if (rc) return rc;
    if (in) {
        (*out)->serial = in->serial;
        (*out)->first_row = in->first_row;
        (*out)->part = in->part;
        (*out)->group_n = in->group_n;
    }
    return SC_OK;
}
