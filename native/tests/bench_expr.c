// sources: exec/expr.c exec/expr_vec.c exec/expr_fast.c exec/expr_funcs.c exec/expr_compile.c exec/expr_compat_num.c exec/expr_compat_time.c exec/expr_compat_str.c exec/ops_filter_project.c exec/select.c exec/common.c runtime/batch.c runtime/ring.c exec/lists.c
/* bench_expr: CPU time per row of the stateless filter + project operators over a
 * clickstream-shaped table (the workload of bench/ "filter + with_columns"):
 *
 *     filter(price > 20.0)
 *     .with_columns(total = price * 1.1 + item_id % 7, cheap = price < 50.0)
 *
 * on batches of 16,384 rows, one thread, with and without nulls in price / item_id. Prints
 * ns per input row for each operator, for the same two steps as one fused stage (the engine's
 * path), and for a plain C loop over the same columns (the yardstick of DESIGN.md section 6). Not a test: `make -C native/tests bench-expr` builds it
 * at -O3 and runs it; `ROWS=... ./bench_expr` sets the size. For repeatable instruction
 * counts run it under `perf stat -e instructions` or callgrind with
 * --toggle-collect=sc_op_filter_run --toggle-collect=sc_op_project_run (separate) or
 * --toggle-collect=sc_op_fused_run (fused).
 */
#include "exec/expr.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"

enum { SEQ, POS, TS, USER, ITEM, CAT, EVENT, PRICE, NCOLS };
static const uint8_t LTS[NCOLS] = { SC_LT_INT, SC_LT_INT, SC_LT_DATETIME, SC_LT_INT,
                                    SC_LT_INT, SC_LT_INT, SC_LT_STR, SC_LT_FLOAT };
enum { TOTAL = NCOLS, CHEAP, NOUT };
static const uint8_t OUT_LTS[NOUT] = { SC_LT_INT, SC_LT_INT, SC_LT_DATETIME, SC_LT_INT, SC_LT_INT,
                                       SC_LT_INT, SC_LT_STR, SC_LT_FLOAT, SC_LT_FLOAT, SC_LT_BOOL };
#define BATCH 16384

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static uint64_t rng = 88172645463325252ull;
static uint64_t next(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* One input batch; null_every > 0: every null_every-th price and item_id is null. */
static sc_batch *mk(const sc_schema *s, int64_t first, int null_every) {
    static const char *events[] = { "view", "cart", "purchase" };
    sc_batch *b = NULL;
    CHECK_RC(sc_batch_new(&b, s, BATCH));
    for (int64_t r = 0; r < BATCH; r++) {
        sc_batch_set_i64(b, SEQ, r, first + r);
        sc_batch_set_i64(b, POS, r, 0);
        sc_batch_set_i64(b, TS, r, INT64_C(1704067200000000) + (first + r) * 100000);
        sc_batch_set_i64(b, USER, r, (int64_t)(next() % 1000));
        sc_batch_set_i64(b, ITEM, r, (int64_t)(next() % 5000));
        sc_batch_set_i64(b, CAT, r, (int64_t)(next() % 20));
        const char *e = events[next() % 3];
        CHECK_RC(sc_batch_put_utf8(b, EVENT, r, e, (int32_t)strlen(e)));
        sc_batch_set_f64(b, PRICE, r, (double)(next() % 10000) / 100.0);
        if (null_every && r % null_every == 3) {
            sc_batch_set_null(b, PRICE, r);
            sc_batch_set_null(b, ITEM, r);
        }
    }
    b->nrows = BATCH;
    return b;
}

static sc_enode nd(int op, int lt, int a, int b) {
    sc_enode n;
    memset(&n, 0, sizeof n);
    n.op = op;
    n.lt = (uint8_t)lt;
    n.a = a;
    n.b = b;
    n.c = -1;
    return n;
}
static sc_enode lit_f(double v) {
    sc_enode n = nd(SC_E_LIT, SC_LT_FLOAT, -1, -1);
    n.f = v;
    return n;
}
static sc_enode lit_i(int64_t v) {
    sc_enode n = nd(SC_E_LIT, SC_LT_INT, -1, -1);
    n.i = v;
    return n;
}

/* The same work as a plain C loop: keep, gather price / item_id, compute both columns. */
static double plain_loop(sc_batch *const *in, int nb) {
    double *p = malloc(BATCH * sizeof(double)), *tot = malloc(BATCH * sizeof(double));
    int64_t *it = malloc(BATCH * sizeof(int64_t));
    uint8_t *cheap = malloc(BATCH);
    double t0 = now(), sink = 0;
    for (int k = 0; k < nb; k++) {
        const double *pr = in[k]->cols[PRICE].values;
        const int64_t *iv = in[k]->cols[ITEM].values;
        int64_t m = 0;
        for (int64_t r = 0; r < BATCH; r++) {
            p[m] = pr[r];
            it[m] = iv[r];
            m += pr[r] > 20.0;
        }
        for (int64_t r = 0; r < m; r++) {
            int64_t q = it[r] % 7;
            tot[r] = p[r] * 1.1 + (double)(q < 0 ? q + 7 : q);
            cheap[r] = p[r] < 50.0;
        }
        sink += tot[m / 2] + cheap[m / 3];
    }
    double t = now() - t0;
    if (sink == 42.4242) puts("");
    free(p), free(tot), free(it), free(cheap);
    return t;
}

static void run(const char *label, int64_t rows, int null_every) {
    sc_schema in_s, out_s;
    sc_step_counters ctr[2];
    memset(ctr, 0, sizeof ctr);
    CHECK_RC(sc_schema_init(&in_s, NCOLS, LTS));
    CHECK_RC(sc_schema_init(&out_s, NOUT, OUT_LTS));
    sc_op_base fb, pb;
    CHECK_RC(sc_op_base_init(&fb, 0, true, true, &ctr[0], &in_s, &in_s, BATCH, true));
    CHECK_RC(sc_op_base_init(&pb, 1, true, true, &ctr[1], &in_s, &out_s, BATCH, true));
    sc_enode pred[] = { nd(SC_E_COL, SC_LT_FLOAT, PRICE, -1), lit_f(20.0), nd(SC_E_GT, SC_LT_BOOL, 0, 1) };
    sc_enode total[] = { nd(SC_E_COL, SC_LT_FLOAT, PRICE, -1), lit_f(1.1), nd(SC_E_MUL, SC_LT_FLOAT, 0, 1),
                         nd(SC_E_COL, SC_LT_INT, ITEM, -1),    lit_i(7),    nd(SC_E_MOD, SC_LT_INT, 3, 4),
                         nd(SC_E_ADD, SC_LT_FLOAT, 2, 5) };
    sc_enode cheap[] = { nd(SC_E_COL, SC_LT_FLOAT, PRICE, -1), lit_f(50.0), nd(SC_E_LT, SC_LT_BOOL, 0, 1) };
    const sc_enode *exprs[] = { total, cheap };
    int32_t nn[] = { 7, 3 }, src[NOUT] = { 0, 1, TS, USER, ITEM, CAT, EVENT, PRICE, -1, -2 };
    void *f = NULL, *p = NULL, *fp[2] = { NULL, NULL }, *fused = NULL;
    static const uint8_t kinds[2] = { 1, 2 };
    CHECK_RC(sc_op_filter_create(&f, &fb, pred, 3));
    CHECK_RC(sc_op_project_create(&p, &pb, src, NOUT, exprs, nn, 2));
    CHECK_RC(sc_op_filter_create(&fp[0], &fb, pred, 3));
    CHECK_RC(sc_op_project_create(&fp[1], &pb, src, NOUT, exprs, nn, 2));
    sc_op_base **fbases = NULL;
    CHECK_RC(sc_op_fused_create(&fused, &fbases, fp, kinds, 2));
    free(fbases);
    sc_op_base_free(&fb);
    sc_op_base_free(&pb);

    int nb = (int)(rows / BATCH), ntmpl = 16;
    sc_batch *tmpl[16];
    for (int k = 0; k < ntmpl; k++) tmpl[k] = mk(&in_s, (int64_t)k * BATCH, null_every);
    sc_batch **in = malloc((size_t)nb * sizeof *in), **in2 = malloc((size_t)nb * sizeof *in2);
    for (int k = 0; k < nb; k++) CHECK_RC(sc_batch_clone(&in[k], tmpl[k % ntmpl]));
    for (int k = 0; k < nb; k++) CHECK_RC(sc_batch_clone(&in2[k], tmpl[k % ntmpl]));
    double tf = 0, tp = 0, tu = 0;
    int64_t kept = 0, kept2 = 0;
    for (int k = 0; k < nb; k++) {
        sc_batch *mid = NULL, *out = NULL;
        double t0 = now();
        CHECK_RC(sc_op_filter_run(f, in[k], &mid));
        double t1 = now();
        if (mid) {
            CHECK_RC(sc_op_project_run(p, mid, &out));
            kept += out->nrows;
            sc_batch_release_chain(out);
        }
        tf += t1 - t0;
        tp += now() - t1;
    }
    for (int k = 0; k < nb; k++) { /* the same two steps as one fused stage */
        sc_batch *out = NULL;
        double t0 = now();
        CHECK_RC(sc_op_fused_run(fused, in2[k], &out));
        tu += now() - t0;
        kept2 += out ? out->nrows : 0;
        sc_batch_release_chain(out);
    }
    CHECK(kept2 == kept);
    double tl = plain_loop(tmpl, ntmpl);
    int64_t n = (int64_t)nb * BATCH;
    printf("%-10s rows %lld kept %lld: filter %.2f ns/row, project %.2f ns/row, both %.2f ns/row; "
           "fused %.2f ns/row (both / fused %.2fx); plain C loop %.2f ns/row\n",
           label, (long long)n, (long long)kept, tf * 1e9 / n, tp * 1e9 / n, (tf + tp) * 1e9 / n, tu * 1e9 / n,
           (tf + tp) / tu, tl * 1e9 / (ntmpl * BATCH));
    for (int k = 0; k < ntmpl; k++) sc_batch_release(tmpl[k]);
    free(in);
    free(in2);
    sc_op_fused_destroy(fused);
    sc_op_filter_destroy(f);
    sc_op_project_destroy(p);
    sc_schema_free(&in_s);
    sc_schema_free(&out_s);
}

int main(void) {
    const char *e = getenv("ROWS");
    int64_t rows = e ? atoll(e) : 4000000;
    sc_exec_tune_allocator(); /* as the engine does */
    run("no nulls", rows, 0);
    run("10% nulls", rows, 10);
    return 0;
}
