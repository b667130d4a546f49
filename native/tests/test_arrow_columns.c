// sources: exec/arrow_columns.c exec/arrow_bridge.c exec/select.c exec/expr.c exec/expr_vec.c exec/expr_fast.c exec/expr_funcs.c exec/expr_compile.c exec/expr_compat_num.c exec/expr_compat_time.c exec/expr_compat_str.c exec/ops_filter_project.c exec/common.c runtime/batch.c runtime/ring.c exec/lists.c
/* test_arrow_columns: a source read as one Arrow C stream per column (exec/arrow_columns.h).
 *
 * Two hand-made streams (int64 "l" with nulls, double "g"), each a column cut into chunks
 * of given lengths, are read in step: every step is a hold whose deferred batches read back
 * the columns' values at their rows, also filled on another thread, as a worker does; every
 * chunk, schema and stream is released exactly once, only after the last batch that points
 * into it (ASan reports a read after a release). Chunks of different lengths, columns that
 * end apart, a column of the wrong type and a stream's own error are each refused, and
 * release what they read.
 */
#include "exec/arrow_columns.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

enum { MAXCH = 8 };

/* ------------------------------------------------------------------ a column's stream */

static int chunks_released, schemas_released, streams_released;

typedef struct chunk {
    void *values;
    uint8_t *valid;
    const void *bufs[2];
} chunk;

static void release_chunk(struct ArrowArray *a) {
    chunk *c = a->private_data;
    free(c->values);
    free(c->valid);
    free(c);
    chunks_released++;
    a->release = NULL;
}

static void release_col_schema(struct ArrowSchema *s) {
    schemas_released++;
    s->release = NULL;
}

typedef struct colstream {
    char format[4];
    int64_t lens[MAXCH];
    int nch, next;
    int64_t row;    /* the column's row of the next chunk's first value */
    int fail_at;    /* the chunk whose get_next fails (-1: none) */
} colstream;

/* Row r of the int column: r * 3 - 50, null when r % 7 == 2; of the double column: r / 8. */
static int get_next(struct ArrowArrayStream *s, struct ArrowArray *out) {
    colstream *cs = s->private_data;
    if (cs->next == cs->fail_at) return 5; /* EIO */
    memset(out, 0, sizeof *out);
    if (cs->next == cs->nch) return 0; /* the end: release NULL */
    int64_t n = cs->lens[cs->next++];
    chunk *c = calloc(1, sizeof *c);
    bool ints = cs->format[0] == 'l';
    c->values = malloc((size_t)(n ? n : 1) * 8);
    if (ints) c->valid = calloc((size_t)(n + 7) / 8 + 1, 1);
    int64_t nulls = 0;
    for (int64_t r = 0; r < n; r++) {
        int64_t x = cs->row + r;
        if (ints) {
            ((int64_t *)c->values)[r] = x * 3 - 50;
            if (x % 7 != 2) c->valid[r / 8] |= (uint8_t)(1u << (r % 8));
            else nulls++;
        } else {
            ((double *)c->values)[r] = x / 8.0;
        }
    }
    cs->row += n;
    c->bufs[0] = c->valid;
    c->bufs[1] = c->values;
    *out = (struct ArrowArray){ .length = n, .null_count = nulls, .n_buffers = 2, .buffers = c->bufs,
                                .release = release_chunk, .private_data = c };
    return 0;
}

static int stream_schema(struct ArrowArrayStream *s, struct ArrowSchema *out) {
    colstream *cs = s->private_data;
    *out = (struct ArrowSchema){ .format = cs->format, .name = "c", .flags = 2, .release = release_col_schema };
    return 0;
}
static const char *last_error(struct ArrowArrayStream *s) {
    (void)s;
    return "the disk went away";
}
static void release_stream(struct ArrowArrayStream *s) {
    free(s->private_data);
    streams_released++;
    s->release = NULL;
}

static struct ArrowArrayStream make_stream(const char *format, const int64_t *lens, int nch, int fail_at) {
    colstream *cs = calloc(1, sizeof *cs);
    snprintf(cs->format, sizeof cs->format, "%s", format);
    memcpy(cs->lens, lens, (size_t)nch * sizeof *lens);
    cs->nch = nch;
    cs->fail_at = fail_at;
    return (struct ArrowArrayStream){ .get_schema = stream_schema, .get_next = get_next,
                                      .get_last_error = last_error, .release = release_stream,
                                      .private_data = cs };
}

/* ------------------------------------------------------------------ checks */

static const uint8_t LT[4] = { SC_LT_INT, SC_LT_INT, SC_LT_INT, SC_LT_FLOAT };

static void check_rows(const sc_batch *b, int64_t from) {
    for (int64_t r = 0; r < b->nrows; r++) {
        int64_t x = from + r;
        CHECK(sc_batch_get_i64(b, 0, r) == x); /* the sequence number */
        CHECK(sc_batch_is_valid(b, 2, r) == (x % 7 != 2));
        if (x % 7 != 2) CHECK(sc_batch_get_i64(b, 2, r) == x * 3 - 50);
        CHECK(sc_batch_get_f64(b, 3, r) == x / 8.0);
    }
}

static void *ready_on_thread(void *b) { return (void *)(intptr_t)sc_batch_ready(b); }

static void reset_counts(void) { chunks_released = schemas_released = streams_released = 0; }

/* Chunks of 5, 0, 12 and 1 rows in step, batches of at most 4 rows, some filled on another
 * thread and one freed unfilled; every batch kept until the end. */
static void test_read_in_step(void) {
    reset_counts();
    sc_schema target;
    CHECK(sc_schema_init(&target, 4, LT) == SC_OK);
    const int64_t lens[] = { 5, 0, 12, 1 };
    struct ArrowArrayStream s[2] = { make_stream("l", lens, 4, -1), make_stream("g", lens, 4, -1) };
    sc_arrow_columns *c = NULL;
    CHECK(sc_arrow_columns_create(&c, s, 2, &target, NULL, 1) == SC_OK);
    CHECK(s[0].release == NULL && s[1].release == NULL); /* moved in */
    sc_batch *kept[16];
    int nk = 0;
    int64_t row = 0;
    for (int step = 0;; step++) {
        sc_extbuf *h = NULL;
        CHECK(sc_arrow_columns_next(c, &h) == SC_OK);
        if (!h) break;
        CHECK(h->shared == 1);
        int64_t len = sc_arrow_hold_array(h)->length;
        CHECK(len == lens[step]);
        for (int64_t off = 0; off < len; off += 4) {
            int64_t m = len - off < 4 ? len - off : 4;
            sc_batch *b = NULL;
            CHECK(sc_batch_new(&b, &target, 1) == SC_OK);
            CHECK(sc_arrow_defer(b, h, off, m, row + off) == SC_OK);
            if (nk % 3 == 1) {
                pthread_t t;
                void *rc = NULL;
                pthread_create(&t, NULL, ready_on_thread, b);
                pthread_join(t, &rc);
                CHECK((intptr_t)rc == SC_OK);
            } else if (nk == 4) {
                sc_batch_release(b); /* freed unfilled: its reference goes back */
                continue;
            } else {
                CHECK(sc_batch_ready(b) == SC_OK);
            }
            check_rows(b, row + off);
            kept[nk++] = b;
        }
        sc_extbuf_unref(h);
        row += len;
    }
    CHECK(row == 18);
    sc_arrow_columns_free(c);
    CHECK(streams_released == 2);
    sc_arrow_reclaim();
    /* the step of 0 rows and the end are released at once, the others with their batches */
    CHECK(chunks_released == 2);
    for (int i = 0; i < nk; i++) {
        check_rows(kept[i], sc_batch_get_i64(kept[i], 0, 0)); /* still readable */
        sc_batch_release(kept[i]);
    }
    sc_arrow_reclaim();
    CHECK(chunks_released == 8);
    CHECK(schemas_released == 2);
    sc_schema_free(&target);
}

/* Each refusal releases what it read; the source's streams are released once. */
static void refused(const char *f0, const int64_t *l0, int n0, const char *f1, const int64_t *l1, int n1,
                    int fail_at, int want_create, int want_next, const char *want_error) {
    reset_counts();
    sc_schema target;
    CHECK(sc_schema_init(&target, 4, LT) == SC_OK);
    struct ArrowArrayStream s[2] = { make_stream(f0, l0, n0, -1), make_stream(f1, l1, n1, fail_at) };
    sc_arrow_columns *c = NULL;
    int rc = sc_arrow_columns_create(&c, s, 2, &target, NULL, 0);
    CHECK(rc == want_create);
    if (rc == SC_OK) {
        sc_extbuf *h = NULL;
        int got = SC_OK;
        while (got == SC_OK) {
            got = sc_arrow_columns_next(c, &h);
            if (got == SC_OK && !h) break;
            if (got == SC_OK) sc_extbuf_unref(h);
        }
        CHECK(got == want_next);
        if (want_error) CHECK(strcmp(sc_arrow_columns_error(c), want_error) == 0);
        sc_arrow_columns_free(c);
    }
    sc_arrow_reclaim();
    CHECK(streams_released == 2);
    CHECK(schemas_released == 2 || rc != SC_OK);
    int read = (n0 < n1 ? n0 : n1) * 2; /* at most: each released exactly once (ASan: never twice) */
    CHECK(chunks_released <= read + 2);
    sc_schema_free(&target);
}

static void test_refusals(void) {
    const int64_t a[] = { 4, 6 }, b[] = { 4, 5 }, c[] = { 4, 6, 2 };
    refused("l", a, 2, "g", b, 2, -1, SC_OK, SC_EFORMAT, "its columns' chunks differ in length");
    refused("l", a, 2, "g", c, 3, -1, SC_OK, SC_EFORMAT, "its columns end apart");
    refused("l", a, 2, "l", a, 2, -1, SC_OK, SC_ETYPE, NULL);  /* an int where a double goes */
    refused("l", a, 2, "g", a, 2, 1, SC_OK, SC_EFORMAT, "the disk went away"); /* a stream's error */
}

int main(void) {
    test_read_in_step();
    test_refusals();
    printf("test_arrow_columns: ok\n");
    return 0;
}
