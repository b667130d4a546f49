// sources: exec/arrow_bridge.c exec/common.c runtime/batch.c runtime/ring.c exec/lists.c
/* test_arrow_strings: strings in through the Arrow C data interface in each layout Polars and
 * pyarrow hand over ("u", "U", "vu"), and exported null counts.
 *
 * One column of N strings (lengths 0..29, so both inline (<= 12 bytes) and out-of-line
 * string_view entries, the latter spread over two data buffers), every 7th row null and the
 * null rows' offsets non-empty (Arrow allows it), is imported in every layout as slices at
 * byte-aligned and unaligned offsets, into fresh batches and into a batch whose byte buffer is
 * too small (it grows). Each row must read back as the array's, null rows empty, with the
 * exact null count; a slice without nulls takes the one-memcpy path. Exported columns carry
 * their exact null count and no bitmap when there are none, and string views byte for byte.
 */
#include "exec/arrow_bridge.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

enum { N = 300 };

static int len_of(int r) { return (r * 7) % 30; }
static char byte_of(int r, int i) { return (char)('a' + (r * 3 + i) % 26); }
static int is_null(int r) { return r % 7 == 3; }

typedef struct strs {
    uint8_t valid[(N + 7) / 8];
    int32_t o32[N + 1];
    int64_t o64[N + 1];
    char *bytes;     /* offsets layout */
    uint8_t *views;  /* string_view layout, N * 16 */
    char *vbuf[2];   /* its two data buffers */
    const void *bu[3], *bU[3], *bv[5];
    int64_t vsizes[2];
} strs;

static void make(strs *s) {
    memset(s, 0, sizeof *s);
    s->bytes = malloc(N * 32);
    s->views = calloc(N, 16);
    s->vbuf[0] = malloc(N * 32);
    s->vbuf[1] = malloc(N * 32);
    int64_t at = 0, vat[2] = { 0, 0 };
    for (int r = 0; r < N; r++) {
        int len = len_of(r);
        if (!is_null(r)) s->valid[r / 8] |= (uint8_t)(1u << (r % 8));
        /* null rows keep their bytes too: a consumer must not read them as the row's value */
        for (int i = 0; i < len; i++) s->bytes[at + i] = byte_of(r, i);
        at += len;
        s->o32[r + 1] = (int32_t)at;
        s->o64[r + 1] = at;
        uint8_t *v = s->views + 16 * r;
        int32_t l32 = len;
        memcpy(v, &l32, 4);
        if (len <= 12) {
            for (int i = 0; i < len; i++) v[4 + i] = (uint8_t)byte_of(r, i);
        } else {
            int32_t b = r % 2, off = (int32_t)vat[b];
            for (int i = 0; i < len; i++) s->vbuf[b][off + i] = byte_of(r, i);
            vat[b] += len;
            memcpy(v + 4, s->vbuf[b] + off, 4);
            memcpy(v + 8, &b, 4);
            memcpy(v + 12, &off, 4);
        }
    }
    s->vsizes[0] = vat[0], s->vsizes[1] = vat[1];
    s->bu[0] = s->valid, s->bu[1] = s->o32, s->bu[2] = s->bytes;
    s->bU[0] = s->valid, s->bU[1] = s->o64, s->bU[2] = s->bytes;
    s->bv[0] = s->valid, s->bv[1] = s->views, s->bv[2] = s->vbuf[0], s->bv[3] = s->vbuf[1], s->bv[4] = s->vsizes;
}

static void unmake(strs *s) {
    free(s->bytes);
    free(s->views);
    free(s->vbuf[0]);
    free(s->vbuf[1]);
}

static void check_slice(const sc_batch *b, int64_t from, int with_nulls) {
    int64_t nulls = 0;
    for (int64_t r = 0; r < b->nrows; r++) {
        int x = (int)(from + r);
        int null = with_nulls && is_null(x);
        nulls += null;
        CHECK(sc_batch_is_valid(b, 2, r) == !null);
        int32_t len;
        const char *p = sc_batch_get_utf8(b, 2, r, &len);
        CHECK(len == (null ? 0 : len_of(x)));
        for (int i = 0; i < len; i++) CHECK(p[i] == byte_of(x, i));
    }
    CHECK(b->cols[2].null_count == nulls);
}

static void import_one(const char *fmt, const void **bufs, int64_t nbuf, int with_nulls, int64_t from, int64_t n,
                       int64_t cap, int64_t array_offset) {
    static const uint8_t LT[3] = { SC_LT_INT, SC_LT_INT, SC_LT_STR };
    sc_schema s;
    sc_schema_init(&s, 3, LT);
    const void *b[5];
    memcpy(b, bufs, (size_t)nbuf * sizeof *b);
    if (!with_nulls) b[0] = NULL;
    struct ArrowArray col = { .length = N - array_offset, .null_count = with_nulls ? -1 : 0,
                              .offset = array_offset, .n_buffers = nbuf, .buffers = b };
    struct ArrowArray *kids[1] = { &col };
    const void *top_bufs[1] = { NULL };
    struct ArrowArray top = { .length = N - array_offset, .n_buffers = 1, .buffers = top_bufs, .n_children = 1,
                              .children = kids };
    struct ArrowSchema cs = { .format = fmt, .name = "s", .flags = 2 };
    struct ArrowSchema *cks[1] = { &cs };
    struct ArrowSchema ts = { .format = "+s", .name = "", .n_children = 1, .children = cks };
    sc_batch *out = NULL;
    CHECK_RC(sc_batch_new(&out, &s, cap));
    CHECK_RC(sc_arrow_import(&ts, &top, from, n, &s, out, 0));
    CHECK(out->nrows == n);
    check_slice(out, array_offset + from, with_nulls);
    sc_batch_release(out);
    sc_schema_free(&s);
}

/* Export: a column without nulls has no bitmap and null_count 0; one with nulls its exact
 * count. */
static void export_counts(void) {
    static const uint8_t LT[4] = { SC_LT_INT, SC_LT_INT, SC_LT_INT, SC_LT_STR };
    sc_schema s;
    sc_schema_init(&s, 4, LT);
    sc_batch *b = NULL;
    CHECK_RC(sc_batch_new(&b, &s, 200));
    for (int64_t r = 0; r < 150; r++) {
        sc_batch_set_i64(b, 0, r, r);
        sc_batch_set_i64(b, 1, r, 0);
        sc_batch_set_i64(b, 2, r, r);
        if (r % 10 == 4) sc_batch_set_null(b, 2, r);
        CHECK_RC(sc_batch_set_utf8(b, 3, r, "xy", 2));
    }
    b->nrows = 150;
    struct ArrowSchema sch;
    struct ArrowArray arr;
    CHECK_RC(sc_arrow_export(b, &s, &sch, &arr));
    CHECK(arr.children[0]->null_count == 0 && arr.children[0]->buffers[0] == NULL);
    CHECK(arr.children[2]->null_count == 15 && arr.children[2]->buffers[0] != NULL);
    CHECK(arr.children[3]->null_count == 0 && arr.children[3]->buffers[0] == NULL);
    CHECK(strcmp(sch.children[3]->format, "vu") == 0);
    /* the views point into the batch's bytes */
    const uint8_t *v = arr.children[3]->buffers[1];
    int32_t len;
    memcpy(&len, v + 16 * 149, 4);
    CHECK(len == 2 && memcmp(v + 16 * 149 + 4, "xy", 2) == 0);
    arr.release(&arr); /* frees the batch (ASan: no leak) */
    sch.release(&sch);
    sc_schema_free(&s);
}

/* Exported string views, byte for byte: length, inline bytes zero-padded, or prefix, buffer
 * 0 and offset; strings of every length 0..20, the last ones ending at the end of the byte
 * buffer (the exact-copy path). */
static void export_views_exact(void) {
    static const uint8_t LT[3] = { SC_LT_INT, SC_LT_INT, SC_LT_STR };
    sc_schema s;
    sc_schema_init(&s, 3, LT);
    sc_batch *b = NULL;
    CHECK_RC(sc_batch_new(&b, &s, 21));
    char txt[32];
    for (int r = 0; r < 21; r++) {
        for (int i = 0; i < r; i++) txt[i] = (char)('A' + (r + i) % 26);
        CHECK_RC(sc_batch_put_utf8(b, 2, r, txt, r)); /* grows its bytes */
    }
    b->nrows = 21;
    sc_column *c = &b->cols[2];
    /* shrink the buffer's room to its bytes, so the last strings end at its end */
    c->data_cap = c->offsets[21];
    struct ArrowSchema sch;
    struct ArrowArray arr;
    CHECK_RC(sc_arrow_export(b, &s, &sch, &arr));
    const uint8_t *v = arr.children[2]->buffers[1];
    const char *data = arr.children[2]->buffers[2];
    for (int r = 0; r < 21; r++) {
        const uint8_t *w = v + 16 * r;
        int32_t len, at;
        memcpy(&len, w, 4);
        CHECK(len == r);
        for (int i = 0; i < r; i++) txt[i] = (char)('A' + (r + i) % 26);
        if (len <= 12) {
            CHECK(memcmp(w + 4, txt, (size_t)len) == 0);
            for (int i = 4 + len; i < 16; i++) CHECK(w[i] == 0);
        } else {
            int32_t buf;
            memcpy(&buf, w + 8, 4);
            memcpy(&at, w + 12, 4);
            CHECK(buf == 0 && memcmp(w + 4, txt, 4) == 0 && memcmp(data + at, txt, (size_t)len) == 0);
        }
    }
    arr.release(&arr);
    sch.release(&sch);
    sc_schema_free(&s);
}

int main(void) {
    strs s;
    make(&s);
    struct {
        const char *fmt;
        const void **bufs;
        int64_t nbuf;
    } layouts[3] = { { "u", s.bu, 3 }, { "U", s.bU, 3 }, { "vu", s.bv, 5 } };
    int64_t from[4] = { 0, 8, 13, 77 }, len[4] = { N - 1, 64, 101, 1 };
    for (int l = 0; l < 3; l++)
        for (int nulls = 0; nulls < 2; nulls++)
            for (int k = 0; k < 4; k++)
                for (int64_t off = 0; off < 6; off += 5) { /* the child array's own offset too */
                    int64_t n = len[k] < N - off - from[k] ? len[k] : N - off - from[k];
                    import_one(layouts[l].fmt, layouts[l].bufs, layouts[l].nbuf, nulls, from[k], n, n, off);
                    /* capacity for 1 row (the batch grows its rows, then its bytes) */
                    import_one(layouts[l].fmt, layouts[l].bufs, layouts[l].nbuf, nulls, from[k], n, 1, off);
                }
    export_counts();
    export_views_exact();
    unmake(&s);
    printf("test_arrow_strings: ok\n");
    return 0;
}
