/* arrow_bridge: see arrow_bridge.h. */
#include "arrow_bridge.h"

#include "lists.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Column c's validity for rows [0, n) from the Arrow bitmap bits [start, start + n) (all
 * valid when there is none), and its exact null count. */
static void import_validity(sc_column *c, const uint8_t *valid, int64_t start, int64_t n) {
    if (valid) sc_bits_read(c->validity, valid, start, n);
    else if (c->null_count) memset(c->validity, 0xFF, (size_t)((n + 7) / 8));
    c->null_count = valid ? n - sc_bits_count(c->validity, 0, n) : 0;
}

/* Room in c's byte buffer for `need` bytes in all (a standalone batch grows; a pool batch
 * cannot: SC_EFULL). */
static int utf8_room(const sc_batch *out, sc_column *c, int64_t need) {
    if (need <= c->data_cap) return SC_OK;
    if (out->pool) return SC_EFULL;
    int64_t cap = c->data_cap > 64 ? c->data_cap : 64;
    while (cap < need) cap *= 2;
    if (cap > INT32_MAX) return SC_EINVAL;
    char *p = sc_colbuf_realloc(c->data, (size_t)cap);
    if (!p) return SC_ENOMEM;
    c->data = p;
    c->data_cap = cap;
    return SC_OK;
}

/* Offsets-and-bytes strings ("u": width 4, "U": width 8), rows [start, start + n). Without
 * nulls the bytes are one memcpy and the offsets one rebase; a null row is empty. */
static int import_strings(sc_batch *out, sc_column *c, const struct ArrowArray *a, int64_t start, int64_t n,
                          int width) {
    const char *data = a->buffers[2];
    const int32_t *o32 = a->buffers[1];
    const int64_t *o64 = a->buffers[1];
#define SRC_OFF(i) (width == 4 ? (int64_t)o32[i] : o64[i])
    int32_t *off = c->offsets;
    int64_t at = off[0], s0 = SRC_OFF(start);
    int rc = utf8_room(out, c, at + SRC_OFF(start + n) - s0);
    if (rc) return rc;
    if (c->null_count == 0) {
        int64_t bytes = SRC_OFF(start + n) - s0;
        if (bytes) memcpy(c->data + at, data + s0, (size_t)bytes);
        int64_t shift = at - s0;
        if (width == 4)
            for (int64_t r = 0; r < n; r++) off[r + 1] = (int32_t)(o32[start + r + 1] + shift);
        else
            for (int64_t r = 0; r < n; r++) off[r + 1] = (int32_t)(o64[start + r + 1] + shift);
        return SC_OK;
    }
    for (int64_t r = 0; r < n; r++) {
        if (sc_bit_get(c->validity, r)) {
            int64_t s = SRC_OFF(start + r), len = SRC_OFF(start + r + 1) - s;
            if (len) memcpy(c->data + at, data + s, (size_t)len);
            at += len;
        }
        off[r + 1] = (int32_t)at;
    }
#undef SRC_OFF
    return SC_OK;
}

/* string_view ("vu"): 16-byte views; <= 12 bytes inline, else (len, prefix, buffer index,
 * offset). One pass sums the lengths (the buffer grows once), one copies: an inline string is
 * a fixed 12-byte copy (the buffer keeps 12 bytes of slack), a null row is empty. */
static int import_views(sc_batch *out, sc_column *c, const struct ArrowArray *a, int64_t start, int64_t n) {
    const uint8_t *views = (const uint8_t *)a->buffers[1] + 16 * start;
    bool nulls = c->null_count != 0;
    int64_t total = 0;
    for (int64_t r = 0; r < n; r++) {
        int32_t len;
        memcpy(&len, views + 16 * r, 4);
        total += (!nulls || sc_bit_get(c->validity, r)) ? len : 0;
    }
    int32_t *off = c->offsets;
    int64_t at = off[0];
    int rc = utf8_room(out, c, at + total + 12);
    if (rc) return rc;
    char *d = c->data;
    for (int64_t r = 0; r < n; r++) {
        const uint8_t *v = views + 16 * r;
        int32_t len;
        memcpy(&len, v, 4);
        if (nulls && !sc_bit_get(c->validity, r)) {
            len = 0;
        } else if (len <= 12) {
            memcpy(d + at, v + 4, 12);
        } else {
            int32_t buf, boff;
            memcpy(&buf, v + 8, 4);
            memcpy(&boff, v + 12, 4);
            memcpy(d + at, (const char *)a->buffers[2 + buf] + boff, (size_t)len);
        }
        at += len;
        off[r + 1] = (int32_t)at;
    }
    return SC_OK;
}

/* Column c's values point at rows [start, start + n) of an int64 / double Arrow buffer that
 * `ext` keeps alive, when the buffer is there and aligned; otherwise they are copied. */
static int values64(sc_column *c, const void *buf, int64_t start, int64_t n, int64_t cap, sc_extbuf *ext) {
    const int64_t *p = buf ? (const int64_t *)buf + start : NULL;
    if (ext && p && n > 0 && ((uintptr_t)p & 7) == 0) {
        if (!c->borrowed) sc_colbuf_free(c->values);
        c->values = (void *)(uintptr_t)p; /* read-only from here on: borrowed columns are never written */
        c->borrowed = 1;
        return SC_OK;
    }
    int rc = sc_column_room(c, cap); /* a shell's room leaves it to the column (sc_batch_shell_room) */
    if (!rc && n > 0) memcpy(c->values, p, (size_t)n * 8);
    return rc;
}

/* A "vu" column's rows [start, start + n) taken as they are (views column, borrowed) when every
 * string is inline: the views then need none of the array's data buffers. An array without
 * data buffers (buffers: validity, views, variadic sizes) and without nulls has only inline
 * strings by construction, and its views are not read one by one here (a pass over 16 bytes
 * a row); with nulls they are, a null's view being undefined in the format. */
static bool borrow_views(sc_column *c, const struct ArrowArray *a, int64_t start, int64_t n) {
    if (a->n_buffers < 2 || !a->buffers[1] || n <= 0) return false;
    const uint8_t *v = (const uint8_t *)a->buffers[1] + 16 * start;
    bool inline_only = a->n_buffers <= 3 && a->null_count == 0;
    for (int64_t r = 0; !inline_only && r < n; r++) {
        int32_t len;
        memcpy(&len, v + 16 * r, 4);
        if (len < 0 || len > 12) return false;
    }
    c->values = (void *)(uintptr_t)v; /* read-only, as any borrowed column */
    c->borrowed = 1;
    c->views = 1;
    return true;
}

static int import_column(sc_batch *out, int32_t col, sc_ltype lt, const struct ArrowSchema *sch,
                         const struct ArrowArray *a, int64_t off, int64_t n, sc_extbuf *ext, bool keep_views) {
    const char *fmt = sch->format;
    sc_column *c = &out->cols[col];
    const uint8_t *valid = a->n_buffers > 0 ? a->buffers[0] : NULL;
    int64_t start = a->offset + off;
    int rc;
    bool borrow_fixed = lt == SC_LT_INT || lt == SC_LT_FLOAT || lt == SC_LT_DATETIME;
    bool views_kept = lt == SC_LT_STR && keep_views && ext && strcmp(fmt, "vu") == 0;
    if (!borrow_fixed && !views_kept && (rc = sc_column_room(c, out->capacity))) return rc;
    if (sc_ltype_is_list((uint8_t)lt) && strcmp(fmt, "n"))
        return sc_list_import(out, col, (uint8_t)(lt - SC_LT_LIST), sch, a, start, n);
    if (strcmp(fmt, "n") == 0) {
        if (borrow_fixed && (rc = sc_column_room(c, out->capacity))) return rc;
        for (int64_t r = 0; r < n; r++) sc_batch_set_null(out, col, r);
        return SC_OK;
    }
    switch (lt) {
    case SC_LT_INT:
        if (strcmp(fmt, "l")) return SC_ETYPE;
        if ((rc = values64(c, a->buffers[1], start, n, out->capacity, ext))) return rc;
        break;
    case SC_LT_FLOAT:
        if (strcmp(fmt, "g")) return SC_ETYPE;
        if ((rc = values64(c, a->buffers[1], start, n, out->capacity, ext))) return rc;
        break;
    case SC_LT_DATETIME:
        if (strncmp(fmt, "tsu:", 4)) return SC_ETYPE;
        if ((rc = values64(c, a->buffers[1], start, n, out->capacity, ext))) return rc;
        break;
    case SC_LT_DATE: {
        if (strcmp(fmt, "tdD")) return SC_ETYPE;
        const int32_t *d = (const int32_t *)a->buffers[1] + start;
        int64_t *v = c->values;
        for (int64_t r = 0; r < n; r++) v[r] = d[r];
        break;
    }
    case SC_LT_BOOL:
        if (strcmp(fmt, "b")) return SC_ETYPE;
        sc_bits_read(c->values, a->buffers[1], start, n);
        break;
    case SC_LT_STR:
        if (strcmp(fmt, "u") && strcmp(fmt, "U") && strcmp(fmt, "vu")) return SC_ETYPE;
        import_validity(c, valid, start, n);
        if (strcmp(fmt, "vu") == 0) {
            if (views_kept && borrow_views(c, a, start, n)) return SC_OK;
            rc = sc_column_room(c, out->capacity); /* views it could not keep: strings */
            return rc ? rc : import_views(out, c, a, start, n);
        }
        return import_strings(out, c, a, start, n, fmt[0] == 'u' ? 4 : 8);
    case SC_LT_NULL:
        for (int64_t r = 0; r < n; r++) sc_batch_set_null(out, col, r);
        return SC_OK;
    default: return SC_ETYPE;
    }
    if (valid) import_validity(c, valid, start, n);
    return SC_OK;
}

int sc_arrow_import(const struct ArrowSchema *schema, const struct ArrowArray *array, int64_t offset,
                    int64_t n, const sc_schema *target, sc_batch *out, int64_t seq0) {
    return sc_arrow_import_ref(schema, array, offset, n, target, out, seq0, NULL);
}

static int import_ref(const struct ArrowSchema *schema, const struct ArrowArray *array, int64_t offset, int64_t n,
                      const sc_schema *target, sc_batch *out, int64_t seq0, sc_extbuf *ext, const uint8_t *keep) {
    if (ext && (out->pool || out->ext)) return SC_EINVAL;
    if (!schema || !array || strcmp(schema->format, "+s") || schema->n_children != target->ncols - SC_NHIDDEN ||
        array->n_children != schema->n_children || offset < 0 || n < 0 || offset + n > array->length)
        return SC_EINVAL;
    if (ext && out->capacity == 0) { /* a shell (sc_batch_new_shell): room for what is not borrowed */
        int rc = sc_batch_shell_room(out, n > 0 ? n : 1);
        if (rc) return rc;
    } else if (n > out->capacity || out->capacity == 0) {
        int rc = sc_batch_reserve(out, n > 0 ? n : 1);
        if (rc) return rc;
    }
    out->first_row = (uint64_t)seq0;
    if (!out->lean) { /* a lean batch's hidden columns stay unwritten (exec.h) */
        int64_t *seq = out->cols[SC_COL_SEQ].values, *pos = out->cols[SC_COL_POS].values;
        for (int64_t r = 0; r < n; r++) {
            seq[r] = seq0 + r;
            pos[r] = 0;
        }
    }
    for (int64_t k = 0; k < schema->n_children; k++) {
        int32_t col = (int32_t)(SC_NHIDDEN + k);
        int rc = import_column(out, col, (sc_ltype)target->lt[col], schema->children[k], array->children[k],
                               array->offset + offset, n, ext, keep && keep[col]);
        if (!out->ext && out->cols[col].borrowed) {
            out->ext = ext;
            sc_extbuf_ref(ext);
        }
        if (rc) return rc;
    }
    out->nrows = n;
    return SC_OK;
}

int sc_arrow_import_ref(const struct ArrowSchema *schema, const struct ArrowArray *array, int64_t offset,
                        int64_t n, const sc_schema *target, sc_batch *out, int64_t seq0, sc_extbuf *ext) {
    return import_ref(schema, array, offset, n, target, out, seq0, ext, NULL);
}

/* ------------------------------------------------------------------ imported arrays held */

typedef struct arrow_hold {
    sc_extbuf e; /* first: the sc_extbuf * is the hold */
    struct ArrowArray array;
    /* for deferred batches (sc_arrow_hold_defer): the array's schema, moved in, and the
     * batches' schema (a copy); schema.release NULL when there is none */
    struct ArrowSchema schema;
    sc_schema target;
    uint8_t *keep; /* per target column: its strings may stay views (NULL: none) */
    struct arrow_hold *next;
} arrow_hold;

static pthread_mutex_t reclaim_mu = PTHREAD_MUTEX_INITIALIZER;
static arrow_hold *reclaim_list; /* holds whose last batch is gone, not released yet */

static void hold_drop(sc_extbuf *e) {
    arrow_hold *h = (arrow_hold *)e;
    pthread_mutex_lock(&reclaim_mu);
    h->next = reclaim_list;
    reclaim_list = h;
    pthread_mutex_unlock(&reclaim_mu);
}

int sc_arrow_hold_create(sc_extbuf **out, struct ArrowArray *array) {
    if (!out || !array || !array->release) return SC_EINVAL;
    arrow_hold *h = calloc(1, sizeof *h);
    if (!h) return SC_ENOMEM;
    h->array = *array;
    array->release = NULL; /* moved (the C data interface's move: the source is marked released) */
    h->e.refs = 1;
    h->e.drop = hold_drop;
    *out = &h->e;
    return SC_OK;
}

const struct ArrowArray *sc_arrow_hold_array(const sc_extbuf *e) { return &((const arrow_hold *)e)->array; }

int sc_arrow_hold_defer(sc_extbuf *e, struct ArrowSchema *schema, const sc_schema *target, const uint8_t *keep) {
    arrow_hold *h = (arrow_hold *)e;
    if (!schema || !schema->release || h->schema.release || !target) return SC_EINVAL;
    /* every type check an import makes before its first row, made once here (a deferred
     * batch's fill can still fail on its rows: see the header) */
    sc_batch *probe = NULL;
    int rc = sc_batch_new(&probe, target, 1);
    if (rc) return rc;
    rc = sc_arrow_import_ref(schema, &h->array, 0, 0, target, probe, 0, NULL);
    sc_batch_free_standalone(probe);
    if (!rc) rc = sc_schema_copy(&h->target, target);
    if (!rc && keep) {
        h->keep = malloc((size_t)(target->ncols ? target->ncols : 1));
        if (h->keep) memcpy(h->keep, keep, (size_t)target->ncols);
        else rc = SC_ENOMEM;
    }
    if (rc) return rc;
    h->schema = *schema;
    schema->release = NULL; /* moved, as the array */
    return SC_OK;
}

/* The worker's half of a deferred batch: the import itself (its buffers referenced, as by
 * sc_arrow_import_ref), then the batch's reference to the hold for the fill is dropped. */
static int hold_fill(sc_batch *b) {
    arrow_hold *h = (arrow_hold *)b->fill_src;
    int64_t n = b->nrows;
    b->fill = NULL;
    b->fill_src = NULL;
    b->nrows = 0;
    int rc = import_ref(&h->schema, &h->array, b->fill_off, n, &h->target, b, b->fill_seq, &h->e, h->keep);
    sc_extbuf_unref(&h->e);
    return rc;
}

int sc_arrow_defer(sc_batch *b, sc_extbuf *e, int64_t offset, int64_t n, int64_t seq0) {
    arrow_hold *h = (arrow_hold *)e;
    if (!b || !e || b->pool || b->ext || b->fill || !h->schema.release || offset < 0 || n < 0 ||
        offset + n > h->array.length)
        return SC_EINVAL;
    sc_extbuf_ref(e);
    b->fill = hold_fill;
    b->fill_src = e;
    b->fill_off = offset;
    b->fill_seq = seq0;
    b->nrows = n;
    return SC_OK;
}

int64_t sc_arrow_reclaim(void) {
    pthread_mutex_lock(&reclaim_mu);
    arrow_hold *h = reclaim_list;
    reclaim_list = NULL;
    pthread_mutex_unlock(&reclaim_mu);
    int64_t n = 0;
    while (h) {
        arrow_hold *next = h->next;
        if (h->array.release) h->array.release(&h->array);
        if (h->schema.release) h->schema.release(&h->schema);
        sc_schema_free(&h->target);
        free(h->keep);
        free(h);
        h = next;
        n++;
    }
    return n;
}

/* ----------------------------------------------------------------------------- export */

typedef struct export_holder {
    sc_batch *batch;
    int64_t refs; /* the parent array plus each child not yet released */
} export_holder;

typedef struct export_child {
    export_holder *h;
    const void *buffers[4];
    uint8_t *views;    /* string columns: the string_view views (owned) */
    int64_t sizes[1];  /* and the size of their one data buffer (the batch's bytes) */
} export_child;

/* A string column as string_view ("vu"): 16-byte views over the batch's bytes (strings of at
 * most 12 bytes inline), the layout Polars keeps its strings in, so it adopts the column as
 * is instead of converting offsets to views on the thread that receives the batch. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "export_views builds views as little-endian words");

static int export_views(export_child *ec, const sc_column *c, int64_t n) {
    if (c->views) { /* already views, every string inline: exported as they are, no data */
        ec->sizes[0] = 0;
        ec->buffers[1] = c->values;
        ec->buffers[2] = c->data ? (const void *)c->data : (const void *)ec->sizes;
        ec->buffers[3] = ec->sizes;
        return SC_OK;
    }
    ec->views = sc_colbuf_alloc((size_t)(n ? n : 1) * 16);
    if (!ec->views) return SC_ENOMEM;
    const int32_t *off = c->offsets;
    const char *data = c->data;
    for (int64_t r = 0; r < n; r++) {
        int32_t at = off[r], len = off[r + 1] - at;
        /* the view as two little-endian words: (len, bytes 0-3) and (bytes 4-11), or
         * (len, prefix) and (buffer 0, offset) */
        uint64_t lo, hi = 0, w0 = (uint32_t)len, w1;
        if (len <= 12) {
            uint32_t top = 0;
            if ((int64_t)at + 12 <= c->data_cap) { /* a fixed 12-byte load, masked to len */
                memcpy(&lo, data + at, 8);
                memcpy(&top, data + at + 8, 4);
                if (len < 8) {
                    lo &= len ? ~0ull >> (64 - 8 * len) : 0;
                    top = 0;
                } else {
                    top &= len == 8 ? 0u : ~0u >> (32 - 8 * (len - 8));
                }
            } else { /* near the end of the buffer: copy exactly */
                char t[12] = { 0 };
                if (len) memcpy(t, data + at, (size_t)len);
                memcpy(&lo, t, 8);
                memcpy(&top, t + 8, 4);
            }
            hi = top;
            w0 |= lo << 32;
            w1 = (lo >> 32) | (hi << 32);
        } else {
            uint32_t prefix;
            memcpy(&prefix, data + at, 4);
            w0 |= (uint64_t)prefix << 32;
            w1 = (uint64_t)(uint32_t)at << 32; /* buffer 0, then the offset */
        }
        memcpy(ec->views + 16 * r, &w0, 8);
        memcpy(ec->views + 16 * r + 8, &w1, 8);
    }
    ec->sizes[0] = off[n];
    ec->buffers[1] = ec->views;
    ec->buffers[2] = c->data;
    ec->buffers[3] = ec->sizes;
    return SC_OK;
}

/* Nulls among the batch's rows of a column: counted from its bitmap where the batch became
 * an output chunk (sc_batch.nulls_counted), else from its bitmap now (not its null_count:
 * exporting a count that a producer forgot to keep would hide nulls). */
static int64_t count_nulls(const sc_batch *b, const sc_column *c) {
    return b->nulls_counted ? c->null_count : b->nrows - sc_bits_count(c->validity, 0, b->nrows);
}

static void holder_unref(export_holder *h) {
    if (__atomic_sub_fetch(&h->refs, 1, __ATOMIC_ACQ_REL) == 0) {
        sc_batch_release(h->batch);
        free(h);
    }
}

static void release_child(struct ArrowArray *a) {
    export_child *c = a->private_data;
    holder_unref(c->h);
    sc_colbuf_free(c->views);
    free(c);
    a->release = NULL;
}

typedef struct export_parent {
    export_holder *h;
    struct ArrowArray **children;
    struct ArrowArray *child_mem;
    const void *buffers[1];
} export_parent;

static void release_parent(struct ArrowArray *a) {
    export_parent *p = a->private_data;
    for (int64_t k = 0; k < a->n_children; k++)
        if (p->children[k]->release) p->children[k]->release(p->children[k]);
    free(p->child_mem);
    free(p->children);
    holder_unref(p->h);
    free(p);
    a->release = NULL;
}

static const char *format_of(sc_ltype lt) {
    if (sc_ltype_is_list((uint8_t)lt)) return "z"; /* encoded lists, decoded by the caller (lists.h) */
    switch (lt) {
    case SC_LT_FLOAT: return "g";
    case SC_LT_BOOL: return "b";
    case SC_LT_STR: return "vu"; /* export_views */
    case SC_LT_DATETIME: return "tsu:";
    default: return "l";
    }
}

typedef struct schema_priv {
    struct ArrowSchema **children;
    struct ArrowSchema *child_mem;
    char *names;
} schema_priv;

static void release_schema_child(struct ArrowSchema *s) { s->release = NULL; }

static void release_schema(struct ArrowSchema *s) {
    schema_priv *p = s->private_data;
    for (int64_t k = 0; k < s->n_children; k++)
        if (p->children[k]->release) p->children[k]->release(p->children[k]);
    free(p->child_mem);
    free(p->children);
    free(p->names);
    free(p);
    s->release = NULL;
}

/* The schema of columns [skip, ncols) of `s`, named c0, c1, ... */
static int export_schema(const sc_schema *s, int32_t skip, struct ArrowSchema *schema) {
    int64_t nc = s->ncols - skip;
    schema_priv *sp = calloc(1, sizeof *sp);
    struct ArrowSchema *smem = calloc((size_t)(nc ? nc : 1), sizeof *smem);
    struct ArrowSchema **sptr = calloc((size_t)(nc ? nc : 1), sizeof *sptr);
    char *names = calloc((size_t)(nc ? nc : 1), 12);
    if (!sp || !smem || !sptr || !names) {
        free(sp), free(smem), free(sptr), free(names);
        return SC_ENOMEM;
    }
    for (int64_t k = 0; k < nc; k++) {
        char *nm = names + 12 * k;
        snprintf(nm, 12, "c%d", (int)k);
        smem[k] = (struct ArrowSchema){ .format = format_of((sc_ltype)s->lt[skip + k]), .name = nm, .metadata = NULL,
                                        .flags = ARROW_FLAG_NULLABLE, .n_children = 0, .children = NULL,
                                        .dictionary = NULL, .release = release_schema_child, .private_data = NULL };
        sptr[k] = &smem[k];
    }
    sp->children = sptr;
    sp->child_mem = smem;
    sp->names = names;
    *schema = (struct ArrowSchema){ .format = "+s", .name = "", .metadata = NULL, .flags = 0, .n_children = nc,
                                    .children = sptr, .dictionary = NULL, .release = release_schema,
                                    .private_data = sp };
    return SC_OK;
}

int sc_arrow_export_schema(const sc_schema *s, struct ArrowSchema *schema) { return export_schema(s, 0, schema); }

/* Columns [skip, ncols) of b as a struct array (and its schema unless NULL); the array owns
 * b, whose other columns go with it. */
static int export_batch(sc_batch *b, const sc_schema *s, int32_t skip, struct ArrowSchema *schema,
                        struct ArrowArray *array) {
    if (b->ncols != s->ncols || skip < 0 || skip > s->ncols) return SC_EINVAL;
    int64_t nc = b->ncols - skip;
    export_holder *h = malloc(sizeof *h);
    export_parent *pp = calloc(1, sizeof *pp);
    struct ArrowArray *cmem = calloc((size_t)(nc ? nc : 1), sizeof *cmem);
    struct ArrowArray **cptr = calloc((size_t)(nc ? nc : 1), sizeof *cptr);
    export_child **kids = calloc((size_t)(nc ? nc : 1), sizeof *kids);
    bool ok = h && pp && cmem && cptr && kids;
    for (int64_t k = 0; ok && k < nc; k++) ok = (kids[k] = calloc(1, sizeof(export_child))) != NULL;
    for (int64_t k = 0; ok && k < nc; k++)
        if (!sc_ltype_is_list(s->lt[skip + k]) && s->lt[skip + k] == SC_LT_STR)
            ok = export_views(kids[k], &b->cols[skip + k], b->nrows) == SC_OK;
    if (ok && schema) ok = export_schema(s, skip, schema) == SC_OK;
    if (!ok) {
        for (int64_t k = 0; kids && k < nc; k++)
            if (kids[k]) sc_colbuf_free(kids[k]->views), free(kids[k]);
        free(kids), free(h), free(pp), free(cmem), free(cptr);
        return SC_ENOMEM;
    }
    h->batch = b;
    h->refs = 1 + nc;
    for (int64_t k = 0; k < nc; k++) {
        sc_column *c = &b->cols[skip + k];
        export_child *ec = kids[k];
        ec->h = h;
        /* the exact null count, and no bitmap when there are none (the consumer then skips
         * counting and checking validity) */
        int64_t nulls = count_nulls(b, c);
        ec->buffers[0] = nulls ? c->validity : NULL;
        int64_t nbuf = 2;
        if (ec->views || c->views) {
            nbuf = 4; /* validity, views, the data buffer, its size */
        } else if (c->type == SC_COL_UTF8) {
            ec->buffers[1] = c->offsets;
            ec->buffers[2] = c->data;
            nbuf = 3;
        } else {
            ec->buffers[1] = c->values;
        }
        cmem[k] = (struct ArrowArray){ .length = b->nrows, .null_count = nulls, .offset = 0, .n_buffers = nbuf,
                                       .n_children = 0, .buffers = ec->buffers, .children = NULL,
                                       .dictionary = NULL, .release = release_child, .private_data = ec };
        cptr[k] = &cmem[k];
    }
    free(kids);
    pp->h = h;
    pp->children = cptr;
    pp->child_mem = cmem;
    pp->buffers[0] = NULL;
    *array = (struct ArrowArray){ .length = b->nrows, .null_count = 0, .offset = 0, .n_buffers = 1,
                                  .n_children = nc, .buffers = pp->buffers, .children = cptr,
                                  .dictionary = NULL, .release = release_parent, .private_data = pp };
    return SC_OK;
}

int sc_arrow_export(sc_batch *b, const sc_schema *s, struct ArrowSchema *schema, struct ArrowArray *array) {
    return export_batch(b, s, 0, schema, array);
}

/* ------------------------------------------------------------------ the C stream */

typedef struct stream_priv {
    sc_batch **b;    /* b[next..n) not handed out yet (owned) */
    int32_t n, next;
    sc_schema schema;
    int32_t skip; /* leading columns left out */
    const char *error;
} stream_priv;

static int stream_get_schema(struct ArrowArrayStream *st, struct ArrowSchema *out) {
    stream_priv *p = st->private_data;
    if (export_schema(&p->schema, p->skip, out) == SC_OK) return 0;
    p->error = "out of memory exporting the schema";
    return 12; /* ENOMEM */
}

static int stream_get_next(struct ArrowArrayStream *st, struct ArrowArray *out) {
    stream_priv *p = st->private_data;
    if (p->next == p->n) { /* the end */
        memset(out, 0, sizeof *out);
        return 0;
    }
    if (export_batch(p->b[p->next], &p->schema, p->skip, NULL, out) != SC_OK) {
        p->error = "out of memory exporting a batch";
        return 12; /* ENOMEM; the batch stays with the stream */
    }
    p->b[p->next++] = NULL; /* the exported array owns it */
    return 0;
}

static const char *stream_last_error(struct ArrowArrayStream *st) { return ((stream_priv *)st->private_data)->error; }

static void stream_release(struct ArrowArrayStream *st) {
    stream_priv *p = st->private_data;
    for (int32_t i = p->next; i < p->n; i++) sc_batch_release(p->b[i]);
    free(p->b);
    sc_schema_free(&p->schema);
    free(p);
    st->release = NULL;
}

int sc_arrow_export_stream(sc_batch **batches, int32_t n, const sc_schema *s, int32_t skip,
                           struct ArrowArrayStream *out) {
    if (skip < 0 || skip > s->ncols) return SC_EINVAL;
    for (int32_t i = 0; i < n; i++)
        if (batches[i]->ncols != s->ncols) return SC_EINVAL;
    stream_priv *p = calloc(1, sizeof *p);
    if (!p) return SC_ENOMEM;
    if (sc_schema_copy(&p->schema, s) != SC_OK) {
        free(p);
        return SC_ENOMEM;
    }
    p->b = batches;
    p->n = n;
    p->skip = skip;
    *out = (struct ArrowArrayStream){ .get_schema = stream_get_schema, .get_next = stream_get_next,
                                      .get_last_error = stream_last_error, .release = stream_release,
                                      .private_data = p };
    return SC_OK;
}
