// sources: exec/arrow_bridge.c exec/select.c exec/expr.c exec/expr_vec.c exec/expr_fast.c exec/expr_funcs.c exec/expr_compile.c exec/expr_compat_num.c exec/expr_compat_time.c exec/expr_compat_str.c exec/ops_filter_project.c exec/common.c runtime/batch.c runtime/ring.c exec/lists.c
/* test_arrow_hold: Arrow in without copies (exec/arrow_bridge.h sc_arrow_import_ref).
 *
 * A hand-built struct array (int64 "l" with nulls, double "g", string "u") is moved into a
 * hold and imported as several slices: int64 / double values point into the array's buffers
 * (borrowed), validity and strings are copied, and every value reads back as the array's.
 * The array's release callback runs exactly once, only after the last batch pointing into it
 * is freed and sc_arrow_reclaim is called. Operators never grow a borrowed column: a project
 * passing columns through copies them into its output, which stays readable after the array
 * is released (ASan reports any use after free), and sc_batch_reserve gives a borrowed
 * column a copy of its own. The fused stage, when every row of a batch survives, moves the
 * borrowed columns into its output as they are, and the output holds a reference to the
 * array: the array is released only after that output is freed.
 *
 * Deferred batches (sc_arrow_defer): the schema is checked and moved into the hold once; each
 * batch, a shell without buffers (sc_batch_new_shell), only names its slice until
 * sc_batch_ready imports it (here also on another thread, as a worker does) into room made
 * for its rows, after which it grows and takes strings as any batch; a batch freed unfilled
 * gives its reference back; the array and the schema are released once, after the last
 * batch.
 */
#include "exec/arrow_bridge.h"
#include "exec/expr.h"
#include "exec/select.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

enum { N = 100 };

typedef struct fake {
    int64_t *ints;
    double *dbls;
    uint8_t valid[(N + 7) / 8];
    int32_t offs[N + 1];
    char bytes[N * 3];
    const void *b0[2], *b1[2], *b2[3];
    struct ArrowArray c0, c1, c2, *kids[3];
    const void *top_buffers[1];
} fake;

static int released;

static void release_array(struct ArrowArray *a) {
    fake *f = a->private_data;
    free(f->ints);
    free(f->dbls);
    free(f);
    released++;
    a->release = NULL;
}

static void child(struct ArrowArray *c, int64_t nbuf, const void **bufs, int64_t nulls) {
    memset(c, 0, sizeof *c);
    c->length = N;
    c->null_count = nulls;
    c->n_buffers = nbuf;
    c->buffers = bufs;
}

/* The array (its buffers malloc'd, so ASan sees any read after the release). */
static void make_array(struct ArrowArray *a) {
    fake *f = calloc(1, sizeof *f);
    f->ints = malloc(N * sizeof(int64_t));
    f->dbls = malloc(N * sizeof(double));
    for (int r = 0; r < N; r++) {
        f->ints[r] = r * 7 - 300;
        f->dbls[r] = r / 4.0;
        if (r % 9) f->valid[r / 8] |= (uint8_t)(1u << (r % 8));
        f->offs[r + 1] = f->offs[r] + r % 3;
        for (int i = 0; i < r % 3; i++) f->bytes[f->offs[r] + i] = (char)('a' + (r + i) % 26);
    }
    f->b0[0] = f->valid, f->b0[1] = f->ints;
    f->b1[0] = NULL, f->b1[1] = f->dbls;
    f->b2[0] = NULL, f->b2[1] = f->offs, f->b2[2] = f->bytes;
    child(&f->c0, 2, f->b0, (N + 8) / 9);
    child(&f->c1, 2, f->b1, 0);
    child(&f->c2, 3, f->b2, 0);
    f->kids[0] = &f->c0, f->kids[1] = &f->c1, f->kids[2] = &f->c2;
    memset(a, 0, sizeof *a);
    a->length = N;
    a->n_buffers = 1;
    a->buffers = f->top_buffers;
    a->n_children = 3;
    a->children = f->kids;
    a->release = release_array;
    a->private_data = f;
}

static struct ArrowSchema sc_l = { "l", "i", NULL, 2, 0, NULL, NULL, NULL, NULL };
static struct ArrowSchema sc_g = { "g", "f", NULL, 2, 0, NULL, NULL, NULL, NULL };
static struct ArrowSchema sc_u = { "u", "s", NULL, 2, 0, NULL, NULL, NULL, NULL };
static struct ArrowSchema *kids[3] = { &sc_l, &sc_g, &sc_u };
static struct ArrowSchema top = { "+s", "", NULL, 0, 3, kids, NULL, NULL, NULL };

static const uint8_t LT[5] = { SC_LT_INT, SC_LT_INT, SC_LT_INT, SC_LT_FLOAT, SC_LT_STR };

static void check_rows(const sc_batch *b, int64_t from) {
    for (int64_t r = 0; r < b->nrows; r++) {
        int64_t x = from + r;
        CHECK(sc_batch_get_i64(b, 0, r) == x);
        CHECK(sc_batch_is_valid(b, 2, r) == (x % 9 != 0));
        if (x % 9) CHECK(sc_batch_get_i64(b, 2, r) == x * 7 - 300);
        CHECK(sc_batch_get_f64(b, 3, r) == x / 4.0);
        int32_t len;
        const char *s = sc_batch_get_utf8(b, 4, r, &len);
        CHECK(len == x % 3);
        for (int i = 0; i < len; i++) CHECK(s[i] == (char)('a' + (x + i) % 26));
    }
}

static int schema_released;
static void release_schema(struct ArrowSchema *x) {
    schema_released++;
    x->release = NULL;
}

static void *ready_on_thread(void *b) { return (void *)(intptr_t)sc_batch_ready(b); }

static void deferred(const sc_schema *s) {
    released = 0;
    struct ArrowArray arr;
    make_array(&arr);
    sc_extbuf *hold = NULL;
    CHECK_RC(sc_arrow_hold_create(&hold, &arr));
    struct ArrowSchema sch = top;
    sch.release = release_schema;
    /* a target the array does not match: refused here, the schema stays the caller's */
    static const uint8_t BAD[5] = { SC_LT_INT, SC_LT_INT, SC_LT_STR, SC_LT_FLOAT, SC_LT_STR };
    sc_schema bad;
    sc_schema_init(&bad, 5, BAD);
    CHECK(sc_arrow_hold_defer(hold, &sch, &bad, NULL) == SC_ETYPE && sch.release == release_schema);
    sc_schema_free(&bad);
    CHECK_RC(sc_arrow_hold_defer(hold, &sch, s, NULL));
    CHECK(sch.release == NULL); /* moved */
    sc_batch *b[3];
    int64_t from[3] = { 0, 40, 70 }, len[3] = { 40, 30, 30 };
    for (int k = 0; k < 3; k++) { /* shells, as the pacer and the driver push them */
        CHECK_RC(sc_batch_new_shell(&b[k], s));
        CHECK(b[k]->capacity == 0 && b[k]->cols[4].type == SC_COL_UTF8 && !b[k]->cols[4].offsets);
        CHECK_RC(sc_arrow_defer(b[k], hold, from[k], len[k], from[k]));
        CHECK(b[k]->nrows == len[k] && b[k]->fill && !b[k]->ext);
    }
    sc_batch *extra = NULL;
    CHECK_RC(sc_batch_new(&extra, s, 1));
    CHECK(sc_arrow_defer(extra, hold, 90, 11, 90) == SC_EINVAL); /* past the array's end */
    sc_batch_release(extra);
    sc_extbuf_unref(hold); /* the driver's reference: the batches keep the hold */
    CHECK(sc_arrow_reclaim() == 0 && released == 0);
    CHECK_RC(sc_batch_ready(b[0]));
    CHECK(!b[0]->fill && b[0]->ext == hold && b[0]->cols[2].borrowed && b[0]->nrows == 40);
    check_rows(b[0], 0);
    CHECK_RC(sc_batch_ready(b[0])); /* ready once: a second call does nothing */
    pthread_t t;
    void *rc = NULL;
    CHECK(pthread_create(&t, NULL, ready_on_thread, b[1]) == 0);
    CHECK(pthread_join(t, &rc) == 0 && rc == NULL);
    check_rows(b[1], 40);
    /* a filled shell is a batch like any other: it grows (its borrowed columns copied) and
     * takes a string of its own after its rows */
    CHECK(b[1]->capacity == 30);
    CHECK_RC(sc_batch_reserve(b[1], 31));
    check_rows(b[1], 40);
    CHECK_RC(sc_batch_put_utf8(b[1], 4, 30, "tail", 4));
    b[1]->nrows = 31;
    int32_t tl;
    const char *tail = sc_batch_get_utf8(b[1], 4, 30, &tl);
    CHECK(tl == 4 && memcmp(tail, "tail", 4) == 0);
    sc_batch_release(b[2]); /* never filled: its reference goes with it */
    sc_batch_release(b[1]);
    CHECK(sc_arrow_reclaim() == 0 && released == 0 && schema_released == 0);
    sc_batch_release(b[0]);
    CHECK(sc_arrow_reclaim() == 1 && released == 1 && schema_released == 1);
}

enum { V = 64 };
typedef struct vfake {
    int64_t ints[V];
    uint8_t views[V * 16];
    char data[64];
    int64_t sizes[1];
    const void *b0[2], *b1[4];
    struct ArrowArray c0, c1, *kids[2];
    const void *top_buffers[1];
} vfake;

static int vreleased;
static void release_vfake(struct ArrowArray *a) {
    free(a->private_data);
    vreleased++;
    a->release = NULL;
}

/* row r's string: "s<r>" repeated to r % 13 bytes, except row 50: 20 bytes (not inline) */
static int vlen(int r) { return r == 50 ? 20 : r % 13; }
static char vchar(int r, int i) { return (char)('a' + (r * 3 + i) % 26); }

static void make_views(struct ArrowArray *a) {
    vfake *f = calloc(1, sizeof *f);
    for (int r = 0; r < V; r++) {
        f->ints[r] = r;
        int32_t len = vlen(r);
        uint8_t *v = f->views + 16 * r;
        memcpy(v, &len, 4);
        if (len <= 12) {
            for (int i = 0; i < len; i++) v[4 + i] = (uint8_t)vchar(r, i);
        } else {
            for (int i = 0; i < len; i++) f->data[i] = vchar(r, i);
            memcpy(v + 4, f->data, 4); /* prefix, buffer 0, offset 0 */
        }
    }
    f->sizes[0] = 20;
    f->b0[0] = NULL, f->b0[1] = f->ints;
    f->b1[0] = NULL, f->b1[1] = f->views, f->b1[2] = f->data, f->b1[3] = f->sizes;
    memset(&f->c0, 0, sizeof f->c0);
    f->c0.length = V, f->c0.n_buffers = 2, f->c0.buffers = f->b0;
    memset(&f->c1, 0, sizeof f->c1);
    f->c1.length = V, f->c1.n_buffers = 4, f->c1.buffers = f->b1;
    f->kids[0] = &f->c0, f->kids[1] = &f->c1;
    memset(a, 0, sizeof *a);
    a->length = V, a->n_buffers = 1, a->buffers = f->top_buffers, a->n_children = 2, a->children = f->kids;
    a->release = release_vfake;
    a->private_data = f;
}

static void check_strings(const sc_batch *b, int32_t col, const int32_t *rows, int64_t n) {
    for (int64_t j = 0; j < n; j++) {
        int r = rows ? rows[j] : (int)j;
        int32_t len;
        const char *p = sc_batch_get_utf8(b, col, j, &len);
        CHECK(len == vlen(r));
        for (int i = 0; i < len; i++) CHECK(p[i] == vchar(r, i));
    }
}

static void views_pass_through(void) {
    static struct ArrowSchema vl = { "l", "i", NULL, 2, 0, NULL, NULL, NULL, NULL };
    static struct ArrowSchema vu = { "vu", "s", NULL, 2, 0, NULL, NULL, NULL, NULL };
    static struct ArrowSchema *vk[2] = { &vl, &vu };
    struct ArrowSchema vt = { "+s", "", NULL, 0, 2, vk, NULL, NULL, NULL };
    vt.release = release_schema;
    static const uint8_t VLT[4] = { SC_LT_INT, SC_LT_INT, SC_LT_INT, SC_LT_STR };
    static const uint8_t KEEP[4] = { 0, 0, 0, 1 };
    sc_schema s;
    sc_schema_init(&s, 4, VLT);
    struct ArrowArray arr;
    make_views(&arr);
    sc_extbuf *hold = NULL;
    CHECK_RC(sc_arrow_hold_create(&hold, &arr));
    CHECK_RC(sc_arrow_hold_defer(hold, &vt, &s, KEEP));
    sc_batch *in = NULL, *longer = NULL;
    CHECK_RC(sc_batch_new(&in, &s, 1));
    CHECK_RC(sc_arrow_defer(in, hold, 0, 40, 0));
    CHECK_RC(sc_batch_new(&longer, &s, 1));
    CHECK_RC(sc_arrow_defer(longer, hold, 40, 24, 40));
    sc_extbuf_unref(hold);
    CHECK_RC(sc_batch_ready(in));
    CHECK_RC(sc_batch_ready(longer));
    CHECK(in->cols[3].views && in->cols[3].borrowed); /* all inline: views, not copied */
    CHECK(!longer->cols[3].views && !longer->cols[3].borrowed); /* row 50 is not inline */
    check_strings(in, 3, NULL, 40);
    int32_t rows40[24];
    for (int j = 0; j < 24; j++) rows40[j] = 40 + j;
    check_strings(longer, 3, rows40, 24);

    /* gathered as views */
    int32_t sel[20];
    for (int j = 0; j < 20; j++) sel[j] = 2 * j + 1;
    sc_batch *g = NULL;
    CHECK_RC(sc_batch_new(&g, &s, 20));
    CHECK_RC(sc_sel_gather_cols(g->cols, in->cols, 4, sel, 20, true));
    g->nrows = 20;
    CHECK(g->cols[3].views && !g->cols[3].borrowed);
    check_strings(g, 3, sel, 20);
    /* a string column gathered into it next: back to offsets / data */
    sc_batch *g2 = NULL;
    CHECK_RC(sc_batch_new(&g2, &s, 20));
    CHECK_RC(sc_sel_gather_cols(g2->cols, in->cols, 4, sel, 20, true));
    CHECK_RC(sc_sel_gather_cols(g2->cols, longer->cols, 4, sel, 10, true));
    g2->nrows = 10;
    CHECK(!g2->cols[3].views);
    int32_t sel40[10];
    for (int j = 0; j < 10; j++) sel40[j] = 40 + sel[j];
    check_strings(g2, 3, sel40, 10);

    /* appended to a string column: converted */
    sc_batch *acc = NULL;
    CHECK_RC(sc_batch_new(&acc, &s, 8));
    CHECK_RC(sc_batch_append(acc, longer));
    CHECK_RC(sc_batch_append(acc, g));
    CHECK(acc->nrows == 44 && !acc->cols[3].views);
    int32_t both[44];
    for (int j = 0; j < 24; j++) both[j] = 40 + j;
    for (int j = 0; j < 20; j++) both[24 + j] = sel[j];
    check_strings(acc, 3, both, 44);

    /* a side row copied from a views batch */
    sc_batch *side = NULL;
    CHECK_RC(sc_batch_new(&side, &s, 4));
    CHECK_RC(sc_batch_copy_row(side, 0, in, 7));
    side->nrows = 1;
    int32_t seven = 7;
    check_strings(side, 3, &seven, 1);

    /* exported as it is: "vu", the views buffer itself, no data */
    sc_batch *ex = NULL;
    CHECK_RC(sc_batch_clone(&ex, g));
    CHECK(ex->cols[3].views);
    check_strings(ex, 3, sel, 20);
    struct ArrowSchema es;
    struct ArrowArray ea;
    const void *gviews = ex->cols[3].values;
    CHECK_RC(sc_arrow_export(ex, &s, &es, &ea));
    CHECK(strcmp(es.children[3]->format, "vu") == 0 && ea.children[3]->n_buffers == 4);
    CHECK(ea.children[3]->buffers[1] == gviews && ((const int64_t *)ea.children[3]->buffers[3])[0] == 0);
    ea.release(&ea);
    es.release(&es);

    /* a views batch that grows: its strings go to offsets / data, still readable */
    CHECK_RC(sc_batch_reserve(g, 100));
    CHECK(!g->cols[3].views);
    check_strings(g, 3, sel, 20);

    sc_batch_release(g);
    sc_batch_release(g2);
    sc_batch_release(acc);
    sc_batch_release(side);
    sc_batch_release(longer);
    CHECK(sc_arrow_reclaim() == 0 && vreleased == 0); /* `in` still points into the array */
    sc_batch_release(in);
    CHECK(sc_arrow_reclaim() == 1 && vreleased == 1);
    sc_schema_free(&s);
}

int main(void) {
    sc_schema s;
    sc_schema_init(&s, 5, LT);
    struct ArrowArray arr;
    make_array(&arr);
    sc_extbuf *hold = NULL;
    CHECK_RC(sc_arrow_hold_create(&hold, &arr));
    CHECK(arr.release == NULL); /* moved: the producer's copy no longer releases it */
    const struct ArrowArray *a = sc_arrow_hold_array(hold);

    /* three slices, borrowed */
    sc_batch *b[3];
    int64_t from[3] = { 0, 30, 64 }, len[3] = { 30, 34, 36 };
    for (int k = 0; k < 3; k++) {
        CHECK_RC(sc_batch_new(&b[k], &s, len[k]));
        CHECK_RC(sc_arrow_import_ref(&top, a, from[k], len[k], &s, b[k], from[k], hold));
        CHECK(b[k]->ext == hold && b[k]->cols[2].borrowed && b[k]->cols[3].borrowed && !b[k]->cols[4].borrowed);
        check_rows(b[k], from[k]);
    }
    sc_extbuf_unref(hold); /* the importer's own reference */
    CHECK(sc_arrow_reclaim() == 0 && released == 0);
    hold->shared = 1; /* buffers outputs may share (a Polars frame's); 0 (the default): copied,
                       * checked below with a second array */

    /* a project passing i and f through, f2 = f * 2: the borrowed columns are copied, not moved */
    sc_schema so;
    static const uint8_t LTO[5] = { SC_LT_INT, SC_LT_INT, SC_LT_INT, SC_LT_FLOAT, SC_LT_FLOAT };
    sc_schema_init(&so, 5, LTO);
    sc_step_counters ctr;
    memset(&ctr, 0, sizeof ctr);
    sc_op_base base;
    CHECK_RC(sc_op_base_init(&base, 0, true, true, &ctr, &s, &so, 30, true)); /* outputs as large as the inputs: movable */
    sc_enode ex[3];
    memset(ex, 0, sizeof ex);
    ex[0].op = SC_E_COL, ex[0].lt = SC_LT_FLOAT, ex[0].a = 3, ex[0].b = ex[0].c = -1;
    ex[1].op = SC_E_LIT, ex[1].lt = SC_LT_FLOAT, ex[1].f = 2.0, ex[1].a = ex[1].b = ex[1].c = -1;
    ex[2].op = SC_E_MUL, ex[2].lt = SC_LT_FLOAT, ex[2].a = 0, ex[2].b = 1, ex[2].c = -1;
    const sc_enode *exprs[1] = { ex };
    int32_t nn[1] = { 3 }, src[5] = { 0, 1, 2, 3, -1 };
    void *proj = NULL, *part = NULL, *fused = NULL;
    CHECK_RC(sc_op_project_create(&proj, &base, src, 5, exprs, nn, 1));
    CHECK_RC(sc_op_project_create(&part, &base, src, 5, exprs, nn, 1));
    uint8_t kind = 2;
    sc_op_base **bases = NULL;
    CHECK_RC(sc_op_fused_create(&fused, &bases, &part, &kind, 1));
    free(bases);
    sc_op_base_free(&base);
    sc_batch *o0 = NULL, *o1 = NULL;
    CHECK_RC(sc_op_project_run(proj, b[0], &o0)); /* takes b[0] */
    CHECK_RC(sc_op_fused_run(fused, b[1], &o1));  /* takes b[1] */
    CHECK(o0 && o1 && !o0->ext && o1->ext == hold);
    for (int32_t c = 0; c < 5; c++) CHECK(!o0->cols[c].borrowed);
    /* the fused output shares i and f (borrowed, as in b[1]); f2 and the bitmaps are its own */
    CHECK(o1->cols[2].borrowed && o1->cols[3].borrowed && !o1->cols[4].borrowed);
    CHECK(o1->cols[3].values == (const double *)a->children[1]->buffers[1] + 30);

    /* reserve on a borrowed batch: its columns get copies of their own */
    CHECK_RC(sc_batch_reserve(b[2], 200));
    CHECK(!b[2]->cols[2].borrowed && !b[2]->cols[3].borrowed);
    check_rows(b[2], 64);
    sc_batch_release(b[2]); /* the last input batch: the fused output still holds the array */
    CHECK(sc_arrow_reclaim() == 0 && released == 0);
    for (int64_t r = 0; r < o1->nrows; r++) {
        CHECK(sc_batch_get_f64(o1, 3, r) == (30 + r) / 4.0);
        CHECK(sc_batch_get_f64(o1, 4, r) == (30 + r) / 2.0);
    }
    sc_batch_release(o1); /* now the array may go */
    CHECK(released == 0);
    CHECK(sc_arrow_reclaim() == 1 && released == 1);
    CHECK(sc_arrow_reclaim() == 0 && released == 1);

    /* the project's output outlives the array */
    for (int64_t r = 0; r < o0->nrows; r++) {
        CHECK(sc_batch_get_f64(o0, 4, r) == (double)r / 2.0);
        CHECK(!sc_batch_is_valid(o0, 2, r) || sc_batch_get_i64(o0, 2, r) == r * 7 - 300);
    }
    sc_batch_release(o0);
    /* an array whose buffers may not be shared: the fused output copies every column */
    struct ArrowArray arr2;
    make_array(&arr2);
    sc_extbuf *hold2 = NULL;
    CHECK_RC(sc_arrow_hold_create(&hold2, &arr2));
    CHECK(hold2->shared == 0);
    sc_batch *b2 = NULL, *o2 = NULL;
    CHECK_RC(sc_batch_new(&b2, &s, 30));
    CHECK_RC(sc_arrow_import_ref(&top, sc_arrow_hold_array(hold2), 0, 30, &s, b2, 0, hold2));
    sc_extbuf_unref(hold2);
    CHECK(b2->ext == hold2 && b2->cols[3].borrowed);
    CHECK_RC(sc_op_fused_run(fused, b2, &o2)); /* takes b2 */
    CHECK(o2 && !o2->ext && !o2->cols[2].borrowed && !o2->cols[3].borrowed);
    CHECK(sc_arrow_reclaim() == 1); /* b2 is gone: nothing holds the second array */
    for (int64_t r = 0; r < o2->nrows; r++) CHECK(sc_batch_get_f64(o2, 3, r) == r / 4.0);
    sc_batch_release(o2);

    sc_op_project_destroy(proj);
    sc_op_fused_destroy(fused);
    sc_schema_free(&so);
    deferred(&s);
    views_pass_through();
    sc_schema_free(&s);
    printf("test_arrow_hold: ok\n");
    return 0;
}
