// sources: exec/arrow_bridge.c exec/common.c runtime/batch.c runtime/ring.c exec/lists.c
/* test_arrow_stream: output batches handed out as one Arrow C stream (sc_arrow_export_stream).
 *
 * Three batches of (int, str with nulls) go into a stream. The schema is a struct of the
 * columns' formats named c0, c1; the arrays come out in order with their rows and exact null
 * counts, and the end of the stream is an array without a release callback; leading (hidden)
 * columns can be left out of the stream. Ownership: an
 * exported array keeps its batch after the stream is released; a stream released before it is
 * read to the end frees the batches it still holds; a stream refused (a batch of another
 * shape) leaves the array and the batches with the caller. ASan checks that nothing leaks and
 * nothing is freed twice. */
#include "exec/arrow_bridge.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static sc_batch *make(const sc_schema *s, int64_t first, int64_t n) {
    sc_batch *b;
    CHECK_RC(sc_batch_new(&b, s, n));
    for (int64_t r = 0; r < n; r++) {
        sc_batch_set_i64(b, 0, r, first + r);
        if ((first + r) % 3 == 1) {
            sc_batch_set_null(b, 1, r);
        } else {
            char txt[32];
            int len = snprintf(txt, sizeof txt, "row %lld", (long long)(first + r));
            CHECK_RC(sc_batch_put_utf8(b, 1, r, txt, len));
        }
    }
    b->nrows = n;
    return b;
}

static sc_batch **three(const sc_schema *s) {
    sc_batch **bs = malloc(3 * sizeof *bs);
    bs[0] = make(s, 0, 5);
    bs[1] = make(s, 5, 7);
    bs[2] = make(s, 12, 2);
    return bs;
}

static void check_array(const struct ArrowArray *a, int64_t first, int64_t n) {
    CHECK(a->release != NULL && a->length == n && a->n_children == 2);
    const struct ArrowArray *ints = a->children[0], *strs = a->children[1];
    const int64_t *v = ints->buffers[1];
    int64_t nulls = 0;
    for (int64_t r = 0; r < n; r++) {
        CHECK(v[r] == first + r);
        nulls += (first + r) % 3 == 1;
    }
    CHECK(ints->null_count == 0 && strs->null_count == nulls && strs->n_buffers == 4);
    const uint8_t *views = strs->buffers[1];
    for (int64_t r = 0; r < n; r++) {
        if ((first + r) % 3 == 1) continue;
        char txt[32];
        int len = snprintf(txt, sizeof txt, "row %lld", (long long)(first + r));
        int32_t got;
        memcpy(&got, views + 16 * r, 4);
        CHECK(got == len && len <= 12 && memcmp(views + 16 * r + 4, txt, (size_t)len) == 0);
    }
}

int main(void) {
    uint8_t lt[] = { SC_LT_INT, SC_LT_STR };
    sc_schema s;
    CHECK_RC(sc_schema_init(&s, 2, lt));

    /* read to the end; the arrays outlive the stream */
    struct ArrowArrayStream st;
    CHECK_RC(sc_arrow_export_stream(three(&s), 3, &s, 0, &st));
    struct ArrowSchema sch;
    CHECK(st.get_schema(&st, &sch) == 0);
    CHECK(strcmp(sch.format, "+s") == 0 && sch.n_children == 2);
    CHECK(strcmp(sch.children[0]->format, "l") == 0 && strcmp(sch.children[0]->name, "c0") == 0);
    CHECK(strcmp(sch.children[1]->format, "vu") == 0 && strcmp(sch.children[1]->name, "c1") == 0);
    sch.release(&sch);
    struct ArrowArray a[4];
    const int64_t first[] = { 0, 5, 12 }, rows[] = { 5, 7, 2 };
    for (int i = 0; i < 3; i++) {
        CHECK(st.get_next(&st, &a[i]) == 0);
        check_array(&a[i], first[i], rows[i]);
    }
    CHECK(st.get_next(&st, &a[3]) == 0 && a[3].release == NULL); /* the end */
    st.release(&st);
    CHECK(st.release == NULL);
    check_array(&a[1], 5, 7); /* still readable: the array owns its batch */
    for (int i = 0; i < 3; i++) a[i].release(&a[i]);

    /* released after one array: the stream frees the two batches it still holds */
    CHECK_RC(sc_arrow_export_stream(three(&s), 3, &s, 0, &st));
    CHECK(st.get_next(&st, &a[0]) == 0);
    check_array(&a[0], 0, 5);
    st.release(&st);
    a[0].release(&a[0]);

    /* the leading column left out: the strings alone, named c0; the ints go with the batch */
    CHECK_RC(sc_arrow_export_stream(three(&s), 3, &s, 1, &st));
    CHECK(st.get_schema(&st, &sch) == 0);
    CHECK(sch.n_children == 1 && strcmp(sch.children[0]->format, "vu") == 0 && strcmp(sch.children[0]->name, "c0") == 0);
    sch.release(&sch);
    CHECK(st.get_next(&st, &a[0]) == 0);
    CHECK(a[0].length == 5 && a[0].n_children == 1 && a[0].children[0]->null_count == 2);
    int32_t len0;
    memcpy(&len0, (const uint8_t *)a[0].children[0]->buffers[1], 4);
    CHECK(len0 == 5 && memcmp((const uint8_t *)a[0].children[0]->buffers[1] + 4, "row 0", 5) == 0);
    st.release(&st);
    a[0].release(&a[0]);
    CHECK(sc_arrow_export_stream(NULL, 0, &s, 3, &st) == SC_EINVAL);

    /* an empty stream ends at once */
    CHECK_RC(sc_arrow_export_stream(NULL, 0, &s, 0, &st));
    CHECK(st.get_next(&st, &a[0]) == 0 && a[0].release == NULL);
    st.release(&st);

    /* a batch of another shape: refused, the caller keeps everything */
    uint8_t lt1[] = { SC_LT_INT };
    sc_schema one;
    CHECK_RC(sc_schema_init(&one, 1, lt1));
    sc_batch **bs = three(&s);
    CHECK(sc_arrow_export_stream(bs, 3, &one, 0, &st) == SC_EINVAL);
    for (int i = 0; i < 3; i++) sc_batch_release(bs[i]);
    free(bs);
    sc_schema_free(&one);

    sc_schema_free(&s);
    printf("test_arrow_stream: ok\n");
    return 0;
}
