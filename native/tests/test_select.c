// sources: exec/select.c exec/expr.c exec/expr_vec.c exec/expr_fast.c exec/expr_funcs.c exec/expr_compile.c exec/expr_compat_num.c exec/expr_compat_time.c exec/expr_compat_str.c exec/ops_filter_project.c exec/common.c runtime/batch.c runtime/ring.c exec/lists.c
/* test_select: selection vectors (exec/select.h) and the fused filter / project stage.
 *
 * - sc_sel_from_mask against a row-by-row oracle, for masks of every density;
 * - sc_sel_gather for int64, double, bool and UTF8 columns, with and without nulls, into a
 *   fresh destination and into one that already holds rows and nulls, at byte-aligned and
 *   unaligned destination offsets, and UTF8 growth (and SC_EFULL when growth is not allowed);
 *   sc_sel_gather_cols over all columns at once;
 * - the fused stage against the same filter and project operators run one after another:
 *   output rows cell by cell, every step's counters and every step's dead letters (row and
 *   reason), for batches of random sizes with nulls and cast errors, with a filter that keeps
 *   most rows, one that keeps under a quarter (the stage compacts before the next part), one
 *   that keeps every row (columns moved, no gather) and one that keeps none;
 * - one fused stage run by 4 threads at once (a stateless operator: per-call scratch from
 *   shared free lists), each batch's output equal to the sequential one (run under TSan).
 */
#include "exec/expr.h"
#include "exec/select.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static uint64_t rng = 88172645463325252ull;
static uint64_t next(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void test_from_mask(void) {
    uint8_t keep[300];
    int32_t sel[300];
    for (int it = 0; it < 200; it++) {
        int64_t n = (int64_t)(next() % 300);
        unsigned density = (unsigned)(next() % 5); /* 0: none .. 4: all */
        for (int64_t r = 0; r < n; r++) keep[r] = (uint8_t)(density == 4 || (next() % 4) < density);
        int64_t k = sc_sel_from_mask(keep, n, sel), j = 0;
        for (int64_t r = 0; r < n; r++)
            if (keep[r]) CHECK(j < k && sel[j++] == r);
        CHECK(j == k);
    }
}

/* sc_bits_count (the popcnt loop where the CPU has it) against a bit-by-bit count, at every
 * alignment of the start and lengths around whole words */
static void test_bits_count(void) {
    uint8_t bm[128];
    for (int it = 0; it < 2000; it++) {
        for (size_t i = 0; i < sizeof bm; i++) bm[i] = (uint8_t)next();
        int64_t from = (int64_t)(next() % 200), n = (int64_t)(next() % (8 * sizeof bm - 200 + 1));
        int64_t want = 0;
        for (int64_t r = from; r < from + n; r++) want += sc_bit_get(bm, r);
        CHECK(sc_bits_count(bm, from, n) == want);
    }
}

/* sc_bits_read against a bit-by-bit copy: every source offset and length, the source exactly
 * as long as the range needs (ASan sees any read past it), dst's bits past n kept. */
static void test_bits_read(void) {
    uint8_t want[80], got[80];
    for (int it = 0; it < 20000; it++) {
        int64_t off = (int64_t)(next() % 64), n = (int64_t)(next() % 520);
        size_t len = (size_t)((off + n + 7) / 8);
        uint8_t *src = malloc(len ? len : 1);
        CHECK(src != NULL);
        for (size_t i = 0; i < len; i++) src[i] = (uint8_t)next();
        for (size_t i = 0; i < sizeof want; i++) want[i] = got[i] = (uint8_t)next();
        for (int64_t r = 0; r < n; r++) sc_bit_set(want, r, sc_bit_get(src, off + r));
        sc_bits_read(got, src, off, n);
        CHECK(memcmp(want, got, sizeof want) == 0);
        free(src);
    }
}

/* ---- gather */

enum { CI = 0, CF, CB, CS, NG };
static const uint8_t GLT[NG] = { SC_LT_INT, SC_LT_FLOAT, SC_LT_BOOL, SC_LT_STR };

static void fill(sc_batch *b, int64_t n, bool nulls) {
    char s[40];
    for (int64_t r = 0; r < n; r++) {
        sc_batch_set_i64(b, CI, r, (int64_t)(next() % 1000) - 500);
        sc_batch_set_f64(b, CF, r, (double)(next() % 1000) / 7.0);
        sc_batch_set_bool(b, CB, r, next() & 1);
        int len = (int)(next() % 30);
        for (int i = 0; i < len; i++) s[i] = (char)('a' + (next() % 26));
        CHECK_RC(sc_batch_put_utf8(b, CS, r, s, len));
        for (int c = 0; nulls && c < NG; c++)
            if (next() % 5 == 0) sc_batch_set_null(b, c, r);
    }
    b->nrows = n;
}

static bool cell_eq(const sc_batch *a, int32_t ca, int64_t ra, const sc_batch *b, int32_t cb, int64_t rb) {
    bool va = sc_batch_is_valid(a, ca, ra), vb = sc_batch_is_valid(b, cb, rb);
    if (va != vb) return false;
    if (!va) return true;
    switch (a->cols[ca].type) {
    case SC_COL_INT64: return sc_batch_get_i64(a, ca, ra) == sc_batch_get_i64(b, cb, rb);
    case SC_COL_DOUBLE: {
        double x = sc_batch_get_f64(a, ca, ra), y = sc_batch_get_f64(b, cb, rb);
        return x == y || (x != x && y != y);
    }
    case SC_COL_BOOL: return sc_batch_get_bool(a, ca, ra) == sc_batch_get_bool(b, cb, rb);
    case SC_COL_UTF8: {
        int32_t la, lb;
        const char *x = sc_batch_get_utf8(a, ca, ra, &la), *y = sc_batch_get_utf8(b, cb, rb, &lb);
        return la == lb && memcmp(x, y, (size_t)la) == 0;
    }
    }
    return false;
}

static int64_t nulls_of(const sc_batch *b, int32_t c, int64_t n) {
    int64_t k = 0;
    for (int64_t r = 0; r < n; r++) k += !sc_batch_is_valid(b, c, r);
    return k;
}

static void test_gather(void) {
    sc_schema s;
    sc_schema_init(&s, NG, GLT);
    int32_t sel[400];
    uint8_t keep[400];
    for (int it = 0; it < 300; it++) {
        int64_t n = 1 + (int64_t)(next() % 400);
        bool src_nulls = it & 1, dst_nulls = it & 2;
        sc_batch *src = NULL, *dst = NULL;
        CHECK_RC(sc_batch_new(&src, &s, n));
        fill(src, n, src_nulls);
        for (int64_t r = 0; r < n; r++) keep[r] = (uint8_t)((next() % 10) < (unsigned)(it % 11));
        int64_t k = sc_sel_from_mask(keep, n, sel);
        /* rows already there: d0 of them (unaligned unless d0 % 8 == 0) */
        int64_t d0 = (it & 4) ? (int64_t)(next() % 20) : 0;
        CHECK_RC(sc_batch_new(&dst, &s, d0 + k + 1));
        fill(dst, d0, dst_nulls);
        sc_batch *before = NULL;
        CHECK_RC(sc_batch_clone(&before, dst));
        if (d0 == 0 && (it & 8)) /* every column at once (fixed-width ones through sel together) */
            CHECK_RC(sc_sel_gather_cols(dst->cols, src->cols, NG, sel, k, true));
        else
            for (int32_t c = 0; c < NG; c++) CHECK_RC(sc_sel_gather(&dst->cols[c], d0, &src->cols[c], sel, k, true));
        dst->nrows = d0 + k;
        for (int32_t c = 0; c < NG; c++) {
            for (int64_t r = 0; r < d0; r++) CHECK(cell_eq(dst, c, r, before, c, r));
            for (int64_t j = 0; j < k; j++) CHECK(cell_eq(dst, c, d0 + j, src, c, sel[j]));
            CHECK(dst->cols[c].null_count == nulls_of(dst, c, d0 + k));
        }
        sc_batch_release(before);
        sc_batch_release(dst);
        /* no growth allowed: a destination too small for the bytes is SC_EFULL */
        if (k > 0 && src->cols[CS].offsets[n] > 0) {
            sc_batch *small = NULL;
            CHECK_RC(sc_batch_new(&small, &s, k));
            small->cols[CS].data_cap = 0;
            int64_t bytes = 0;
            for (int64_t j = 0; j < k; j++) bytes += src->cols[CS].offsets[sel[j] + 1] - src->cols[CS].offsets[sel[j]];
            int rc = sc_sel_gather(&small->cols[CS], 0, &src->cols[CS], sel, k, false);
            CHECK(bytes > 0 ? rc == SC_EFULL : rc == SC_OK);
            sc_batch_release(small);
        }
        sc_batch_release(src);
    }
    sc_schema_free(&s);
}

/* ---- compress by mask: the same rows as the gather through sel, for many widths (each
 * vector path the CPU has, and none: 64-row AVX-512 / 32-row AVX2 blocks and pext words,
 * then the scalar tails), five fixed-width columns (a group of four and one more), nulls,
 * strings, bools and string views alongside */
enum { NC = 8, CV = 7 };
static const uint8_t CLT[NC] = { SC_LT_INT, SC_LT_FLOAT, SC_LT_INT, SC_LT_FLOAT, SC_LT_INT, SC_LT_STR, SC_LT_BOOL, SC_LT_STR };

static void test_compress(void) {
    sc_schema s;
    sc_schema_init(&s, NC, CLT);
    enum { MAXN = 700 };
    static int32_t sel[MAXN], scratch[MAXN];
    static uint8_t keep[MAXN];
    char str[20];
    /* every path; AVX2 without pext; AVX2 and pext (no AVX-512); scalar */
    static const int paths[] = { -1, 1, 3, 0 };
    for (int it = 0; it < 800; it++) {
        int was = sc_sel_allow_paths(paths[(it / 2) % 4]);
        int64_t n = 1 + (int64_t)(next() % MAXN);
        sc_batch *src = NULL, *a = NULL, *b = NULL;
        CHECK_RC(sc_batch_new(&src, &s, n));
        CHECK_RC(sc_column_views_room(&src->cols[CV], n));
        for (int64_t r = 0; r < n; r++) {
            for (int32_t c = 0; c < 5; c++) {
                if (c & 1) sc_batch_set_f64(src, c, r, (double)(next() % 100000) / 3.0);
                else sc_batch_set_i64(src, c, r, (int64_t)next());
                if (it & 1 && next() % 7 == 0) sc_batch_set_null(src, c, r);
            }
            int len = (int)(next() % 16);
            for (int i = 0; i < len; i++) str[i] = (char)('a' + next() % 26);
            CHECK_RC(sc_batch_put_utf8(src, 5, r, str, len));
            sc_batch_set_bool(src, 6, r, next() & 1);
            if (it & 1 && next() % 5 == 0) sc_batch_set_null(src, 6, r);
            uint8_t *v = (uint8_t *)src->cols[CV].values + 16 * r; /* a view: length, then inline bytes */
            int32_t vl = (int32_t)(next() % 13);
            memset(v, 0, 16);
            memcpy(v, &vl, 4);
            for (int i = 0; i < vl; i++) v[4 + i] = (uint8_t)('A' + next() % 26);
            if (it & 1 && next() % 6 == 0) sc_batch_set_null(src, CV, r);
        }
        src->nrows = n;
        unsigned pct = (unsigned)(it % 12) * 10; /* 0% .. 110%: none, some, all kept */
        for (int64_t r = 0; r < n; r++) keep[r] = (uint8_t)((next() % 100) < pct ? 1 + next() % 3 : 0);
        int64_t k = sc_sel_from_mask(keep, n, sel);
        CHECK_RC(sc_batch_new(&a, &s, n));
        CHECK_RC(sc_batch_new(&b, &s, n));
        CHECK_RC(sc_sel_gather_cols(a->cols, src->cols, NC, sel, k, true));
        memset(scratch, 0xA5, sizeof scratch); /* no selection vector given: made if needed */
        CHECK_RC(sc_sel_compress_cols(b->cols, src->cols, NC, keep, n, scratch, k, true));
        a->nrows = b->nrows = k;
        CHECK(b->cols[CV].views);
        for (int32_t c = 0; c < NC; c++) {
            for (int64_t j = 0; j < k; j++) CHECK(cell_eq(a, c, j, b, c, j) && cell_eq(b, c, j, src, c, sel[j]));
            CHECK(a->cols[c].null_count == b->cols[c].null_count && b->cols[c].null_count == nulls_of(b, c, k));
            for (int64_t r = k; r < n; r++) CHECK(sc_batch_is_valid(b, c, r)); /* rows past k: still valid */
        }
        sc_batch_release(a);
        sc_batch_release(b);
        sc_batch_release(src);
        sc_sel_allow_paths(was);
    }
    sc_schema_free(&s);
}

/* ---- the fused stage against its parts run one after another
 *
 * input:  seq, pos, i (int), f (float), s (str), b (bool)
 * part 0: filter i % 3 != 0
 * part 1: project seq, pos, i, s, x = int(s) (cast errors: dead letters), y = f * 2.0
 * part 2: filter y > T (T picks how many rows survive)
 * part 3: project seq, pos, s, x, z = x + i
 */
enum { IN_I = 2, IN_F, IN_S, IN_B, NIN };
static const uint8_t LT0[NIN] = { SC_LT_INT, SC_LT_INT, SC_LT_INT, SC_LT_FLOAT, SC_LT_STR, SC_LT_BOOL };
static const uint8_t LT1[6] = { SC_LT_INT, SC_LT_INT, SC_LT_INT, SC_LT_STR, SC_LT_INT, SC_LT_FLOAT };
static const uint8_t LT3[5] = { SC_LT_INT, SC_LT_INT, SC_LT_STR, SC_LT_INT, SC_LT_INT };

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
static sc_enode ilit(int64_t v) {
    sc_enode n = nd(SC_E_LIT, SC_LT_INT, -1, -1);
    n.i = v;
    return n;
}
static sc_enode flit(double v) {
    sc_enode n = nd(SC_E_LIT, SC_LT_FLOAT, -1, -1);
    n.f = v;
    return n;
}

typedef struct chain {
    void *part[4];
    sc_step_counters ctr[4];
} chain;

/* keep_all: part 0 keeps every row; narrow: part 0 keeps about a fifth (i % 5 == 0), so the
 * fused stage compacts before part 1 and part 1's dead rows come after a compaction. */
static void make_chain_of(chain *ch, double t, bool keep_all, bool narrow) {
    sc_schema s0, s1, s3;
    sc_schema_init(&s0, NIN, LT0);
    sc_schema_init(&s1, 6, LT1);
    sc_schema_init(&s3, 5, LT3);
    memset(ch->ctr, 0, sizeof ch->ctr);
    sc_op_base b;
    /* part 0 */
    sc_enode p0[] = { nd(SC_E_COL, SC_LT_INT, IN_I, -1), ilit(3), nd(SC_E_MOD, SC_LT_INT, 0, 1), ilit(0),
                      nd(SC_E_NE, SC_LT_BOOL, 2, 3) };
    sc_enode all[] = { ilit(0), nd(SC_E_IS_NOT_NULL, SC_LT_BOOL, 0, -1) };
    sc_enode fifth[] = { nd(SC_E_COL, SC_LT_INT, IN_I, -1), ilit(5), nd(SC_E_MOD, SC_LT_INT, 0, 1), ilit(0),
                         nd(SC_E_EQ, SC_LT_BOOL, 2, 3) };
    CHECK_RC(sc_op_base_init(&b, 0, true, true, &ch->ctr[0], &s0, &s0, 64, true));
    if (keep_all) CHECK_RC(sc_op_filter_create(&ch->part[0], &b, all, 2)); /* is_not_null(0): true */
    else if (narrow) CHECK_RC(sc_op_filter_create(&ch->part[0], &b, fifth, 5));
    else CHECK_RC(sc_op_filter_create(&ch->part[0], &b, p0, 5));
    sc_op_base_free(&b);
    /* part 1 */
    sc_enode x[] = { nd(SC_E_COL, SC_LT_STR, IN_S, -1), nd(SC_E_CAST, SC_LT_INT, 0, -1) };
    sc_enode y[] = { nd(SC_E_COL, SC_LT_FLOAT, IN_F, -1), flit(2.0), nd(SC_E_MUL, SC_LT_FLOAT, 0, 1) };
    const sc_enode *e1[] = { x, y };
    int32_t n1[] = { 2, 3 }, src1[] = { 0, 1, IN_I, IN_S, -1, -2 };
    CHECK_RC(sc_op_base_init(&b, 1, true, true, &ch->ctr[1], &s0, &s1, 64, true));
    CHECK_RC(sc_op_project_create(&ch->part[1], &b, src1, 6, e1, n1, 2));
    sc_op_base_free(&b);
    /* part 2 */
    sc_enode p2[] = { nd(SC_E_COL, SC_LT_FLOAT, 5, -1), flit(t), nd(SC_E_GT, SC_LT_BOOL, 0, 1) };
    CHECK_RC(sc_op_base_init(&b, 2, true, true, &ch->ctr[2], &s1, &s1, 64, true));
    CHECK_RC(sc_op_filter_create(&ch->part[2], &b, p2, 3));
    sc_op_base_free(&b);
    /* part 3 */
    sc_enode z[] = { nd(SC_E_COL, SC_LT_INT, 4, -1), nd(SC_E_COL, SC_LT_INT, 2, -1), nd(SC_E_ADD, SC_LT_INT, 0, 1) };
    const sc_enode *e3[] = { z };
    int32_t n3[] = { 3 }, src3[] = { 0, 1, 3, 4, -1 };
    CHECK_RC(sc_op_base_init(&b, 3, true, true, &ch->ctr[3], &s1, &s3, 64, true));
    CHECK_RC(sc_op_project_create(&ch->part[3], &b, src3, 5, e3, n3, 1));
    sc_op_base_free(&b);
    sc_schema_free(&s0);
    sc_schema_free(&s1);
    sc_schema_free(&s3);
}

static void make_chain(chain *ch, double t, bool keep_all) { make_chain_of(ch, t, keep_all, false); }

static const uint8_t KINDS[4] = { 1, 2, 1, 2 };

static int run_seq(chain *ch, int np, sc_batch *in, sc_batch **out) {
    sc_batch *b = in;
    for (int p = 0; p < np && b; p++) {
        sc_batch *o = NULL;
        CHECK_RC(KINDS[p] == 1 ? sc_op_filter_run(ch->part[p], b, &o) : sc_op_project_run(ch->part[p], b, &o));
        CHECK(!o || !o->next);
        b = o;
    }
    *out = b;
    return SC_OK;
}

/* clean: no nulls and only strings that cast (every row survives a filter that keeps all). */
static sc_batch *input(int64_t n, bool clean) {
    static const char *words[] = { "12", "-7", " 40 ", "3", "100", "0", "x", "", "9x" };
    sc_schema s;
    sc_schema_init(&s, NIN, LT0);
    sc_batch *b = NULL;
    CHECK_RC(sc_batch_new(&b, &s, n));
    for (int64_t r = 0; r < n; r++) {
        sc_batch_set_i64(b, 0, r, r);
        sc_batch_set_i64(b, 1, r, 0);
        sc_batch_set_i64(b, IN_I, r, (int64_t)(next() % 100) - 50);
        sc_batch_set_f64(b, IN_F, r, (double)(next() % 1000) / 10.0);
        const char *w = words[next() % (clean ? 6 : 9)];
        CHECK_RC(sc_batch_put_utf8(b, IN_S, r, w, (int32_t)strlen(w)));
        sc_batch_set_bool(b, IN_B, r, next() & 1);
        for (int c = IN_I; !clean && c < NIN; c++)
            if (next() % 7 == 0) sc_batch_set_null(b, c, r);
    }
    b->nrows = n;
    sc_schema_free(&s);
    return b;
}

/* The dead letters of a side log: (seq, reason) in order; the count. */
static int64_t side_rows(sc_side *s, uint64_t *seqs, char reasons[][128], int64_t cap) {
    sc_batch *rows = NULL;
    sc_side_meta *meta = NULL;
    int64_t m = 0;
    CHECK_RC(sc_side_take(s, &rows, &meta, &m));
    CHECK(m <= cap);
    for (int64_t j = 0; j < m; j++) {
        seqs[j] = (uint64_t)sc_batch_get_i64(rows, 0, j);
        snprintf(reasons[j], 128, "%s", meta[j].reason ? meta[j].reason : "");
    }
    if (rows) sc_batch_release(rows);
    sc_side_meta_free(meta, m);
    return m;
}

/* The first np parts of the chain (4: ends in a project, which then computes after the
 * gather; 3: ends in a filter, which gathers computed columns too). lean: the fused stage
 * gets each batch lean (exec.h), its hidden columns scribbled over, and must still give the
 * user columns and the dead rows' serials the parts give one after another. */
static int64_t max_rows = 64; /* rows of the largest input batch */

static void test_fused_of(double t, bool keep_all, int np, bool narrow, bool lean) {
    chain a, f;
    make_chain_of(&a, t, keep_all, narrow);
    make_chain_of(&f, t, keep_all, narrow);
    void *fused = NULL;
    sc_op_base **bases = NULL;
    CHECK_RC(sc_op_fused_create(&fused, &bases, f.part, KINDS, np));
    for (int p = np; p < 4; p++) sc_op_project_destroy(f.part[p]); /* not part of it */
    for (int p = 0; p < np; p++) CHECK(bases[p] == f.part[p]); /* each part's base leads its state */
    int32_t ncols = np == 4 ? 5 : 6;
    static uint64_t sa[4096], sf[4096];
    static char ra[4096][128], rf[4096][128];
    int64_t rows = 0, out_rows = 0, moved = 0, exact = 0;
    for (int it = 0; it < 60; it++) {
        int64_t n = 1 + (int64_t)(next() % max_rows); /* 64: batches fit the ops' capacity */
        sc_batch *in = input(n, keep_all && it % 2), *copy = NULL, *x = NULL, *y = NULL;
        int64_t first = rows + 1000 * it; /* serials first, first + 1, ... */
        for (int64_t r = 0; r < n; r++) sc_batch_set_i64(in, 0, r, first + r);
        CHECK_RC(sc_batch_clone(&copy, in));
        if (lean) {
            copy->lean = 1;
            copy->first_row = (uint64_t)first;
            for (int64_t r = 0; r < n; r++) {
                sc_batch_set_i64(copy, 0, r, -7);
                sc_batch_set_i64(copy, 1, r, 12345);
            }
        }
        CHECK_RC(run_seq(&a, np, in, &x));
        CHECK_RC(sc_op_fused_run(fused, copy, &y));
        CHECK((x ? x->nrows : 0) == (y ? y->nrows : 0));
        CHECK(!y || (y->ncols == ncols && !y->next));
        CHECK(!y || y->lean == lean);
        int32_t c0 = lean ? SC_NHIDDEN : 0;
        for (int64_t r = 0; y && r < y->nrows; r++)
            for (int32_t c = c0; c < ncols; c++) CHECK(cell_eq(x, c, r, y, c, r));
        for (int32_t c = c0; y && c < ncols; c++) CHECK(y->cols[c].null_count == nulls_of(y, c, y->nrows));
        CHECK(!y || y->capacity >= y->nrows);
        /* gathered rows that would fill less than half of a batch get exactly their room */
        exact += y && y->capacity == y->nrows && 2 * y->nrows < 64 && max_rows == 64;
        rows += n;
        out_rows += y ? y->nrows : 0;
        moved += y && y->nrows == n;
        sc_batch_release(x);
        sc_batch_release(y);
        for (int p = 0; p < np; p++) { /* dead letters: the same rows, reasons, order */
            sc_op_base *pa = a.part[p];
            int64_t ma = side_rows(pa->side, sa, ra, 4096), mf = side_rows(bases[p]->side, sf, rf, 4096);
            CHECK(ma == mf);
            for (int64_t j = 0; j < ma; j++) CHECK(sa[j] == sf[j] && strcmp(ra[j], rf[j]) == 0);
        }
    }
    for (int p = 0; p < np; p++) {
        CHECK(sc_u64_load_relaxed(&a.ctr[p].rows_in) == sc_u64_load_relaxed(&f.ctr[p].rows_in));
        CHECK(sc_u64_load_relaxed(&a.ctr[p].rows_out) == sc_u64_load_relaxed(&f.ctr[p].rows_out));
        CHECK(sc_u64_load_relaxed(&a.ctr[p].filtered) == sc_u64_load_relaxed(&f.ctr[p].filtered));
        CHECK(sc_u64_load_relaxed(&a.ctr[p].dead) == sc_u64_load_relaxed(&f.ctr[p].dead));
    }
    CHECK(sc_u64_load_relaxed(&f.ctr[1].dead) > 0); /* the casts did fail somewhere */
    CHECK(!keep_all || moved > 0);                 /* and whole batches left without a gather */
    CHECK(np != 3 || t < 100 || !out_rows || exact); /* and small gathered outputs had exact room */
    printf("  fused %d parts (T = %g%s%s%s): %lld rows in, %lld out, %lld dead, %lld batches kept whole\n", np, t,
           keep_all ? ", filter 0 keeps all" : "", narrow ? ", filter 0 keeps a fifth" : "", lean ? ", lean" : "",
           (long long)rows, (long long)out_rows, (long long)sc_u64_load_relaxed(&f.ctr[1].dead), (long long)moved);
    free(bases);
    sc_op_fused_destroy(fused);
    for (int p = 0; p < 4; p++) KINDS[p] == 1 ? sc_op_filter_destroy(a.part[p]) : sc_op_project_destroy(a.part[p]);
}

static void test_fused(double t, bool keep_all, int np) {
    test_fused_of(t, keep_all, np, false, false);
    test_fused_of(t, keep_all, np, false, true);
}

/* A chain whose parts do not fit together is refused (and its parts freed: ASan checks). */
static void test_fused_refuses(void) {
    chain c;
    make_chain(&c, 0.0, false);
    void *st = NULL, *parts[2] = { c.part[0], c.part[2] }; /* filter over s0, then one over s1 */
    uint8_t kinds[2] = { 1, 1 };
    sc_op_base **bases = NULL;
    CHECK(sc_op_fused_create(&st, &bases, parts, kinds, 2) == SC_EINVAL && st == NULL && bases == NULL);
    sc_op_project_destroy(c.part[1]);
    sc_op_project_destroy(c.part[3]);
}

enum { NTHREADS = 4, NB = 64 };
typedef struct job {
    void *fused;
    sc_batch **in, **want;
    int from;
} job;

static void *worker(void *arg) {
    job *j = arg;
    for (int k = j->from; k < NB; k += NTHREADS) {
        sc_batch *y = NULL, *x = j->want[k];
        CHECK_RC(sc_op_fused_run(j->fused, j->in[k], &y));
        CHECK((x ? x->nrows : 0) == (y ? y->nrows : 0));
        for (int64_t r = 0; y && r < y->nrows; r++)
            for (int32_t c = 0; c < 5; c++) CHECK(cell_eq(x, c, r, y, c, r));
        sc_batch_release(y);
    }
    return NULL;
}

static void test_fused_threads(void) {
    chain a, f;
    make_chain(&a, 50.0, false);
    make_chain(&f, 50.0, false);
    void *fused = NULL;
    sc_op_base **bases = NULL;
    CHECK_RC(sc_op_fused_create(&fused, &bases, f.part, KINDS, 4));
    free(bases);
    static sc_batch *in[NB], *want[NB];
    for (int k = 0; k < NB; k++) {
        sc_batch *b = input(1 + (int64_t)(next() % 64), k % 3 == 0);
        CHECK_RC(sc_batch_clone(&in[k], b));
        CHECK_RC(run_seq(&a, 4, b, &want[k]));
    }
    pthread_t t[NTHREADS];
    job jobs[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        jobs[i] = (job){ fused, in, want, i };
        CHECK(pthread_create(&t[i], NULL, worker, &jobs[i]) == 0);
    }
    for (int i = 0; i < NTHREADS; i++) pthread_join(t[i], NULL);
    for (int p = 0; p < 4; p++) {
        CHECK(sc_u64_load_relaxed(&a.ctr[p].rows_out) == sc_u64_load_relaxed(&f.ctr[p].rows_out));
        CHECK(sc_u64_load_relaxed(&a.ctr[p].dead) == sc_u64_load_relaxed(&f.ctr[p].dead));
    }
    for (int k = 0; k < NB; k++) sc_batch_release(want[k]);
    sc_op_fused_destroy(fused);
    for (int p = 0; p < 4; p++) KINDS[p] == 1 ? sc_op_filter_destroy(a.part[p]) : sc_op_project_destroy(a.part[p]);
}

int main(void) {
    test_from_mask();
    test_bits_count();
    test_bits_read();
    test_gather();
    test_compress();
    for (int np = 3; np <= 4; np++) {
        test_fused(50.0, false, np);  /* most rows survive part 2 */
        test_fused(180.0, false, np); /* under a quarter survive: compacted before part 3 */
        test_fused(-1.0, true, np);   /* every row survives the filters; clean batches stay whole */
        test_fused(1e9, false, np);   /* none survive */
        test_fused_of(50.0, false, np, true, false); /* compacted before part 1: its dead rows after */
        test_fused_of(50.0, false, np, true, true);
    }
    /* batches of up to twice the ops' capacity: the scratch keeps the largest one's room, the
     * outputs of smaller ones are gathered out of it */
    max_rows = 128;
    for (int np = 3; np <= 4; np++) {
        test_fused(50.0, false, np);
        test_fused(-1.0, true, np);
        test_fused_of(50.0, false, np, true, true);
    }
    max_rows = 64;
    test_fused_refuses();
    test_fused_threads();
    printf("test_select: ok\n");
    return 0;
}
