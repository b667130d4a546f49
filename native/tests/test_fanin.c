// sources: exec/ops_join.c exec/ops_correlate.c exec/ops_state.c exec/keyhash.c exec/rowstore.c exec/common.c runtime/batch.c runtime/ring.c exec/lists.c
/* Tests for the multi-input operators over the tagged layout (exec/fanin.h): ops_join and
 * ops_correlate. Each is fed random tagged rows (several ports, null keys and times, late
 * rows, NaN, strings) over random batch splits and compared, output row by output row and
 * counter by counter, with a sequential model written straight from the definition (the
 * reference's JoinOp / CorrelateOp): the model keeps every admitted row forever (no
 * eviction, no sweeps), so the test also shows that the operators' eviction is not
 * observable. A few hand-computed cases pin the semantics down. */
#pragma GCC optimize("fp-contract=off") /* the model's floats round as the operator's */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/ops_correlate.h"
#include "exec/ops_join.h"
#include "exec/ops_state.h"

#include "check.h"

#define STEP 2
#define MAXW 4

static sc_step_counters cnt;
static uint64_t rnd_state = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) {
    rnd_state ^= rnd_state << 13;
    rnd_state ^= rnd_state >> 7;
    rnd_state ^= rnd_state << 17;
    return rnd_state;
}
static int rndn(int n) { return (int)(rnd() % (uint64_t)n); }
static uint64_t C(sc_atomic_u64 *a) { return sc_u64_load_relaxed(a); }

/* ------------------------------------------------------------------ text */

typedef struct {
    char *s;
    size_t len, cap;
} text;

static void tprintf(text *t, const char *fmt, ...) {
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int n = vsnprintf(t->s ? t->s + t->len : NULL, t->s ? t->cap - t->len : 0, fmt, ap);
        va_end(ap);
        CHECK(n >= 0);
        if (t->s && t->len + (size_t)n < t->cap) {
            t->len += (size_t)n;
            return;
        }
        t->cap = (t->cap + (size_t)n + 1) * 2;
        t->s = realloc(t->s, t->cap);
        CHECK(t->s);
    }
}

static void expect_same(const char *what, const text *got, const text *want) {
    const char *g = got->s ? got->s : "", *w = want->s ? want->s : "";
    if (!strcmp(g, w)) return;
    size_t i = 0;
    while (g[i] && g[i] == w[i]) i++;
    size_t from = i > 200 ? i - 200 : 0;
    fprintf(stderr, "%s: output differs at byte %zu\n--- got:\n%.400s\n--- want:\n%.400s\n", what, i, g + from,
            w + from);
    exit(1);
}

/* ------------------------------------------------------------------ tagged rows */

typedef struct {
    bool valid;
    int64_t i;
    double f;
    char s[8];
} cell;

typedef struct {
    int port;
    cell c[MAXW];
} trow;

/* one input: user column types (i int, f float, s str, t time), key and time positions */
typedef struct {
    const char *types;
    int key, time;
} port_def;

static int width(const port_def *d) { return (int)strlen(d->types); }

static uint8_t lt_of(char c, bool days) {
    switch (c) {
    case 'i': return SC_LT_INT;
    case 'f': return SC_LT_FLOAT;
    case 's': return SC_LT_STR;
    case 't': return days ? SC_LT_DATE : SC_LT_INT;
    }
    CHECK(!"bad type");
    return 0;
}

static void tagged_schema(sc_schema *s, const port_def *defs, int nports, bool days, int32_t *first) {
    uint8_t lt[64] = { SC_LT_INT, SC_LT_INT, SC_LT_INT };
    int n = 3;
    for (int p = 0; p < nports; p++) {
        first[p] = n;
        for (const char *c = defs[p].types; *c; c++) lt[n++] = lt_of(*c, days);
    }
    CHECK_RC(sc_schema_init(s, n, lt));
}

static void put(sc_batch *b, int32_t col, int64_t r, char type, const cell *c) {
    if (!c || !c->valid) {
        sc_batch_set_null(b, col, r);
        return;
    }
    switch (type) {
    case 'f': sc_batch_set_f64(b, col, r, c->f); break;
    case 's': CHECK_RC(sc_batch_put_utf8(b, col, r, c->s, (int32_t)strlen(c->s))); return;
    default: sc_batch_set_i64(b, col, r, c->i);
    }
    sc_batch_set_valid(b, col, r);
}

static sc_batch *mk_batch(const sc_schema *s, const port_def *defs, int nports, const int32_t *first,
                          const trow *rows, int64_t n, int64_t seq0) {
    sc_batch *b;
    CHECK_RC(sc_batch_new(&b, s, n ? n : 1));
    for (int64_t r = 0; r < n; r++) {
        sc_batch_set_i64(b, SC_COL_SEQ, r, seq0 + r);
        sc_batch_set_i64(b, SC_COL_POS, r, seq0 - 1 + r); /* the global row index */
        sc_batch_set_i64(b, 2, r, rows[r].port);
        for (int p = 0; p < nports; p++)
            for (int j = 0; j < width(&defs[p]); j++)
                put(b, first[p] + j, r, defs[p].types[j], rows[r].port == p ? &rows[r].c[j] : NULL);
    }
    b->nrows = n;
    return b;
}

static void print_batches(text *t, sc_batch *b) {
    for (; b; b = b->next) {
        for (int64_t r = 0; r < b->nrows; r++) {
            tprintf(t, "%lld:%lld|", (long long)sc_batch_get_i64(b, 0, r), (long long)sc_batch_get_i64(b, 1, r));
            for (int32_t c = SC_NHIDDEN; c < b->ncols; c++) {
                if (c > SC_NHIDDEN) tprintf(t, ",");
                if (!sc_batch_is_valid(b, c, r)) {
                    tprintf(t, "_");
                    continue;
                }
                switch (b->cols[c].type) {
                case SC_COL_INT64: tprintf(t, "%lld", (long long)sc_batch_get_i64(b, c, r)); break;
                case SC_COL_DOUBLE: tprintf(t, "%.17g", sc_batch_get_f64(b, c, r)); break;
                case SC_COL_BOOL: tprintf(t, "%c", sc_batch_get_bool(b, c, r) ? 'T' : 'F'); break;
                case SC_COL_UTF8: {
                    int32_t len;
                    const char *p = sc_batch_get_utf8(b, c, r, &len);
                    tprintf(t, "%.*s", (int)len, p);
                    break;
                }
                }
            }
            tprintf(t, "\n");
        }
    }
}

/* Feed rows in random batch splits (then eos), print every output row, free the side log. */
static void feed(int (*run)(void *, sc_batch *, sc_batch **), void *st, const sc_schema *s, const port_def *defs,
                 int nports, const int32_t *first, const trow *rows, int64_t n, int maxb, text *out, int64_t *side_n) {
    int64_t at = 0;
    while (at < n) {
        int64_t k = 1 + rndn(maxb);
        if (k > n - at) k = n - at;
        sc_batch *o = NULL;
        CHECK_RC(run(st, mk_batch(s, defs, nports, first, rows + at, k, at + 1), &o));
        print_batches(out, o);
        sc_batch_release_chain(o);
        at += k;
    }
    sc_batch *eos, *o = NULL;
    CHECK_RC(sc_batch_new(&eos, s, 1));
    eos->eos = 1;
    CHECK_RC(run(st, eos, &o));
    CHECK(o == eos && !o->next); /* nothing held back: the eos batch comes out alone */
    sc_batch_release(o);
    sc_batch *srows;
    sc_side_meta *meta;
    CHECK_RC(sc_side_take(((sc_op_base *)st)->side, &srows, &meta, side_n));
    if (srows) sc_batch_release(srows);
    sc_side_meta_free(meta, *side_n);
}

static int64_t ticks(const cell *c, bool days) { return days ? c->i * SC_US_PER_DAY : c->i; }

static bool key_eq(const trow *a, const port_def *da, const trow *b, const port_def *db) {
    const cell *x = &a->c[da->key], *y = &b->c[db->key];
    return x->valid == y->valid && (!x->valid || x->i == y->i);
}

/* random rows: keys in [0, nkeys) (null 1 in 10), times drifting up with disorder up to
 * `disorder` (null 1 in 40), floats (NaN 1 in 50), ints, short strings; nulls 1 in 8 */
static void random_rows(trow *rows, int64_t n, const port_def *defs, int nports, int nkeys, int disorder) {
    int64_t clock = 0;
    for (int64_t r = 0; r < n; r++) {
        trow *t = &rows[r];
        memset(t, 0, sizeof *t);
        t->port = rndn(nports);
        const port_def *d = &defs[t->port];
        clock += rndn(3);
        for (int j = 0; j < width(d); j++) {
            cell *c = &t->c[j];
            c->valid = rndn(8) != 0;
            if (j == d->key) {
                c->valid = rndn(10) != 0;
                c->i = rndn(nkeys);
            } else if (j == d->time) {
                c->valid = rndn(40) != 0;
                c->i = clock - rndn(disorder + 1);
            } else if (d->types[j] == 'f') {
                c->f = rndn(50) == 0 ? NAN : rndn(20) == 0 ? -0.0 : (double)(rndn(2000) - 1000) / 7.0 + (double)rndn(3) * 1e15;
            } else if (d->types[j] == 'i') {
                c->i = rndn(2000) - 1000 + (rndn(20) == 0 ? INT64_MAX / 2 : 0);
            } else {
                int len = rndn(4);
                for (int q = 0; q < len; q++) c->s[q] = (char)('a' + rndn(3));
            }
        }
    }
}

static void mk_base(sc_op_base *b, const sc_schema *in, const sc_schema *out, int64_t cap) {
    memset(&cnt, 0, sizeof cnt);
    CHECK_RC(sc_op_base_init(b, STEP, true, true, &cnt, in, out, cap, true));
}

/* ================================================================== join */

static const port_def JL = { "its", 0, 1 }, JR = { "tifi", 1, 0 };

static void pcell(text *t, char type, const cell *c) {
    if (!c->valid) tprintf(t, "_");
    else if (type == 'f') tprintf(t, "%.17g", c->f);
    else if (type == 's') tprintf(t, "%s", c->s);
    else tprintf(t, "%lld", (long long)c->i);
}

static void join_model(const trow *rows, int64_t n, int64_t within, int64_t lateness, bool days, text *want,
                       int64_t *dead, int64_t *late) {
    const port_def *defs[2] = { &JL, &JR };
    bool *stored = calloc((size_t)n + 1, 1);
    bool has = false;
    int64_t max_t = 0;
    *dead = *late = 0;
    for (int64_t r = 0; r < n; r++) {
        const trow *a = &rows[r];
        const port_def *d = defs[a->port];
        if (!a->c[d->time].valid) {
            ++*dead;
            continue;
        }
        int64_t t = ticks(&a->c[d->time], days);
        if (has && t < max_t - lateness) {
            ++*late;
            continue;
        }
        if (!a->c[d->key].valid) continue;
        for (int64_t q = 0; q < r; q++) {
            const trow *b = &rows[q];
            if (!stored[q] || b->port == a->port || !key_eq(a, d, b, defs[b->port])) continue;
            int64_t dt = ticks(&b->c[defs[b->port]->time], days) - t;
            if (dt < -within || dt > within) continue;
            const trow *l = a->port == 0 ? a : b, *rr = a->port == 0 ? b : a;
            tprintf(want, "%lld:%lld|", (long long)(r + 1), (long long)r);
            for (int j = 0; j < 3; j++) {
                if (j) tprintf(want, ",");
                pcell(want, JL.types[j], &l->c[j]);
            }
            for (int j = 0; j < 4; j++) {
                if (j == JR.key) continue;
                tprintf(want, ",");
                pcell(want, JR.types[j], &rr->c[j]);
            }
            tprintf(want, "\n");
        }
        stored[r] = true;
        if (!has || t > max_t) max_t = t;
        has = true;
    }
    free(stored);
}

static void *mk_join(sc_schema *in, sc_schema *out, int32_t *first, bool days, int64_t within, int64_t lateness) {
    const port_def defs[2] = { JL, JR };
    tagged_schema(in, defs, 2, days, first);
    /* k, t, lv, t_right, rv, extra */
    const uint8_t olt[] = { SC_LT_INT, SC_LT_INT, SC_LT_INT, lt_of('t', days), SC_LT_STR,
                            lt_of('t', days), SC_LT_FLOAT, SC_LT_INT };
    CHECK_RC(sc_schema_init(out, 8, olt));
    const int32_t kl[] = { first[0] + JL.key }, kr[] = { first[1] + JR.key };
    const int32_t outs[] = { first[0], first[0] + 1, first[0] + 2, first[1], first[1] + 2, first[1] + 3 };
    sc_join_spec spec = { { 3, 4 }, { kl, kr }, 1, { first[0] + JL.time, first[1] + JR.time }, within, lateness,
                          outs, "null event time in column 't'" };
    sc_op_base b;
    mk_base(&b, in, out, 7);
    void *st = NULL;
    CHECK_RC(sc_op_join_create(&st, &b, &spec));
    sc_op_base_free(&b);
    return st;
}

static void join_random(int64_t n, int nkeys, int disorder, int64_t within, int64_t lateness, bool days) {
    const port_def defs[2] = { JL, JR };
    trow *rows = malloc((size_t)n * sizeof *rows);
    random_rows(rows, n, defs, 2, nkeys, disorder);
    int64_t mul = days ? SC_US_PER_DAY : 1;
    sc_schema in, out;
    int32_t first[2];
    void *st = mk_join(&in, &out, first, days, within * mul, lateness * mul);
    text got = { 0 }, want = { 0 };
    int64_t side_n, dead, late;
    feed(sc_op_join_run, st, &in, defs, 2, first, rows, n, 40, &got, &side_n);
    join_model(rows, n, within * mul, lateness * mul, days, &want, &dead, &late);
    expect_same("join vs model", &got, &want);
    CHECK(C(&cnt.dead) == (uint64_t)dead && C(&cnt.late) == (uint64_t)late && side_n == dead + late);
    CHECK(C(&cnt.rows_in) == (uint64_t)n);
    int64_t lines = 0;
    for (size_t i = 0; i < want.len; i++) lines += want.s[i] == '\n';
    CHECK(C(&cnt.rows_out) == (uint64_t)lines);
    if (n >= 4000) CHECK(sc_i64_load_relaxed(&((sc_op_base *)st)->state_size) < n / 2); /* evicted */
    sc_op_join_destroy(st);
    sc_schema_free(&in);
    sc_schema_free(&out);
    free(got.s);
    free(want.s);
    free(rows);
}

/* hand-computed: the reference test's arrival l1(10) r1(5) l2(20) r2(14) r3 (key 2) */
static void join_hand(void) {
    const port_def defs[2] = { JL, JR };
    sc_schema in, out;
    int32_t first[2];
    void *st = mk_join(&in, &out, first, false, 5, 100);
    trow rows[5];
    memset(rows, 0, sizeof rows);
    int64_t v[5][3] = { { 0, 1, 10 }, { 1, 1, 5 }, { 0, 1, 20 }, { 1, 1, 14 }, { 1, 2, 20 } };
    for (int r = 0; r < 5; r++) {
        rows[r].port = (int)v[r][0];
        const port_def *d = &defs[rows[r].port];
        for (int j = 0; j < width(d); j++) rows[r].c[j].valid = true;
        rows[r].c[d->key].i = v[r][1];
        rows[r].c[d->time].i = v[r][2];
        rows[r].c[2].s[0] = 'x';
        rows[r].c[2].s[1] = (char)('0' + r);
        rows[r].c[2].f = r + 0.5;
        rows[r].c[3].i = 100 + r;
    }
    text got = { 0 };
    int64_t side_n;
    feed(sc_op_join_run, st, &in, defs, 2, first, rows, 5, 2, &got, &side_n);
    /* r1 finds l1 at distance exactly 5; l2 nothing; r2 finds l1 (4) but not l2 (6) */
    text want = { 0 };
    tprintf(&want, "2:1|1,10,x0,5,1.5,101\n4:3|1,10,x0,14,3.5,103\n");
    expect_same("join by hand", &got, &want);
    CHECK(side_n == 0 && C(&cnt.rows_out) == 2);
    sc_op_join_destroy(st);
    sc_schema_free(&in);
    sc_schema_free(&out);
    free(got.s);
    free(want.s);
}

/* the create checks the spec against the tagged schema */
static void join_bad_spec(void) {
    const port_def defs[2] = { JL, JR };
    sc_schema in, out;
    int32_t first[2];
    tagged_schema(&in, defs, 2, false, first);
    const uint8_t olt[] = { SC_LT_INT, SC_LT_INT, SC_LT_INT };
    CHECK_RC(sc_schema_init(&out, 3, olt));
    const int32_t kl[] = { first[0] }, kr[] = { first[0] + 1 }; /* right key on the left side */
    const int32_t outs[] = { first[0] };
    sc_join_spec spec = { { 3, 4 }, { kl, kr }, 1, { first[0] + 1, first[1] }, 1, 0, outs, NULL };
    sc_op_base b;
    mk_base(&b, &in, &out, 7);
    void *st = NULL;
    CHECK(sc_op_join_create(&st, &b, &spec) == SC_EINVAL);
    spec.width[1] = 3; /* the layout does not add up */
    CHECK(sc_op_join_create(&st, &b, &spec) == SC_EINVAL);
    sc_op_base_free(&b);
    sc_schema_free(&in);
    sc_schema_free(&out);
}

/* ================================================================== correlate */

static const port_def CP[3] = { { "itfs", 0, 1 }, { "iti", 0, 1 }, { "tif", 1, 0 } };
/* (fn, port, column of that port or -1) */
static const int CA[][3] = {
    { SC_CORR_COUNT, 0, -1 }, { SC_CORR_COUNT, 0, 2 }, { SC_CORR_SUM, 0, 2 },   { SC_CORR_MEAN, 0, 2 },
    { SC_CORR_STD, 0, 2 },    { SC_CORR_MIN, 0, 2 },   { SC_CORR_MAX, 0, 2 },   { SC_CORR_LAST, 0, 2 },
    { SC_CORR_MIN, 0, 3 },    { SC_CORR_MAX, 0, 3 },   { SC_CORR_LAST, 0, 3 },  { SC_CORR_COUNT, 1, -1 },
    { SC_CORR_SUM, 1, 2 },    { SC_CORR_MEAN, 1, 2 },  { SC_CORR_STD, 1, 2 },   { SC_CORR_MIN, 1, 2 },
    { SC_CORR_MAX, 1, 2 },    { SC_CORR_LAST, 1, 2 },  { SC_CORR_MEAN, 2, 2 },  { SC_CORR_STD, 2, 2 },
    { SC_CORR_COUNT, 2, -1 },
};
#define NCA ((int)(sizeof CA / sizeof CA[0]))

static uint8_t agg_lt(int j) {
    char type = CA[j][2] < 0 ? 'i' : CP[CA[j][1]].types[CA[j][2]];
    switch (CA[j][0]) {
    case SC_CORR_COUNT: return SC_LT_INT;
    case SC_CORR_MEAN:
    case SC_CORR_STD: return SC_LT_FLOAT;
    default: return lt_of(type, false);
    }
}

static void *mk_corr(sc_schema *in, sc_schema *out, int32_t *first, bool days, int64_t over, int64_t lateness) {
    tagged_schema(in, CP, 3, days, first);
    uint8_t olt[64] = { SC_LT_INT, SC_LT_INT, SC_LT_INT, lt_of('t', days) };
    sc_corr_agg aggs[NCA];
    int32_t kind[NCA + 2] = { SC_CORR_INPUT, SC_CORR_INPUT }, arg[NCA + 2] = { 0, 1 };
    for (int j = 0; j < NCA; j++) {
        olt[4 + j] = agg_lt(j);
        aggs[j] = (sc_corr_agg){ CA[j][0], CA[j][1], CA[j][2] < 0 ? -1 : first[CA[j][1]] + CA[j][2] };
        kind[2 + j] = SC_CORR_AGG;
        arg[2 + j] = j;
    }
    CHECK_RC(sc_schema_init(out, 4 + NCA, olt));
    int32_t widths[3], keys[3], times[3];
    for (int p = 0; p < 3; p++) {
        widths[p] = width(&CP[p]);
        keys[p] = first[p] + CP[p].key;
        times[p] = first[p] + CP[p].time;
    }
    sc_corr_spec spec = { 3, widths, keys, 1, times, over, lateness, aggs, NCA, kind, arg, "null event time in column 't'" };
    sc_op_base b;
    mk_base(&b, in, out, 5);
    void *st = NULL;
    CHECK_RC(sc_op_correlate_create(&st, &b, &spec));
    sc_op_base_free(&b);
    return st;
}

static bool less_cell(char type, const cell *a, const cell *b) {
    if (type == 'f') return isnan(a->f) ? false : isnan(b->f) ? true : a->f < b->f;
    if (type == 's') return strcmp(a->s, b->s) < 0;
    return a->i < b->i;
}

/* aggregate j over rows[idx[0..n)] (kept rows of its port and key, in insertion order) */
static void model_agg(text *t, int j, const trow *rows, const int64_t *idx, int64_t n) {
    int fn = CA[j][0], col = CA[j][2];
    char type = col < 0 ? 'i' : CP[CA[j][1]].types[col];
    if (fn == SC_CORR_COUNT) {
        int64_t c = 0;
        for (int64_t q = 0; q < n; q++) c += col < 0 || rows[idx[q]].c[col].valid;
        tprintf(t, "%lld", (long long)c);
        return;
    }
    if (fn == SC_CORR_LAST) {
        if (n) pcell(t, type, &rows[idx[n - 1]].c[col]);
        else tprintf(t, "_");
        return;
    }
    const cell *vals[4096];
    int64_t m = 0;
    for (int64_t q = 0; q < n; q++)
        if (rows[idx[q]].c[col].valid) vals[m++] = &rows[idx[q]].c[col];
    CHECK(m < 4096);
    if (m == 0 || (fn == SC_CORR_STD && m < 2)) {
        tprintf(t, "_");
        return;
    }
    if (fn == SC_CORR_MIN || fn == SC_CORR_MAX) {
        const cell *best = vals[0];
        for (int64_t q = 1; q < m; q++)
            if (fn == SC_CORR_MIN ? less_cell(type, vals[q], best) : less_cell(type, best, vals[q])) best = vals[q];
        pcell(t, type, best);
        return;
    }
    double fs = vals[0]->f;
    uint64_t is = (uint64_t)vals[0]->i;
    for (int64_t q = 1; q < m; q++) {
        fs = fs + vals[q]->f;
        is += (uint64_t)vals[q]->i;
    }
    if (fn == SC_CORR_SUM) {
        if (type == 'f') tprintf(t, "%.17g", fs);
        else tprintf(t, "%lld", (long long)(int64_t)is);
        return;
    }
    double mean = type == 'f' ? fs / (double)m : sc_div_i64((int64_t)is, m);
    if (fn == SC_CORR_STD) {
        double ss = 0.0;
        for (int64_t q = 0; q < m; q++) {
            double d = (type == 'f' ? vals[q]->f : (double)vals[q]->i) - mean;
            ss = ss + d * d;
        }
        mean = sqrt(ss / (double)(m - 1));
    }
    tprintf(t, "%.17g", mean);
}

static void corr_model(const trow *rows, int64_t n, int nkeys, int64_t over, int64_t lateness, bool days, text *want,
                       int64_t *dead, int64_t *late) {
    bool *kept = calloc((size_t)n + 1, 1), *seen = calloc((size_t)nkeys + 1, 1);
    int64_t *clock = calloc((size_t)nkeys + 1, sizeof *clock), *idx = malloc(((size_t)n + 1) * sizeof *idx);
    bool has = false;
    int64_t max_t = 0;
    *dead = *late = 0;
    for (int64_t r = 0; r < n; r++) {
        const trow *a = &rows[r];
        const port_def *d = &CP[a->port];
        if (!a->c[d->time].valid) {
            ++*dead;
            continue;
        }
        int64_t t = ticks(&a->c[d->time], days);
        if (has && t < max_t - lateness) {
            ++*late;
            continue;
        }
        if (!has || t > max_t) max_t = t;
        has = true;
        int kx = a->c[d->key].valid ? (int)a->c[d->key].i : nkeys; /* null: one key value */
        if (!seen[kx] || t > clock[kx]) clock[kx] = t;
        seen[kx] = true;
        kept[r] = true;
        for (int64_t q = 0; q <= r; q++)
            if (kept[q] && key_eq(a, d, &rows[q], &CP[rows[q].port]) &&
                ticks(&rows[q].c[CP[rows[q].port].time], days) <= clock[kx] - over)
                kept[q] = false;
        tprintf(want, "%lld:%lld|", (long long)(r + 1), (long long)r);
        pcell(want, 'i', &a->c[d->key]);
        tprintf(want, ",");
        pcell(want, 'i', &a->c[d->time]);
        for (int j = 0; j < NCA; j++) {
            int64_t m = 0;
            for (int64_t q = 0; q <= r; q++)
                if (kept[q] && rows[q].port == CA[j][1] && key_eq(a, d, &rows[q], &CP[rows[q].port])) idx[m++] = q;
            tprintf(want, ",");
            model_agg(want, j, rows, idx, m);
        }
        tprintf(want, "\n");
    }
    free(kept);
    free(seen);
    free(clock);
    free(idx);
}

static void corr_random(int64_t n, int nkeys, int disorder, int64_t over, int64_t lateness, bool days, int maxb) {
    trow *rows = malloc((size_t)n * sizeof *rows);
    random_rows(rows, n, CP, 3, nkeys, disorder);
    int64_t mul = days ? SC_US_PER_DAY : 1;
    sc_schema in, out;
    int32_t first[3];
    void *st = mk_corr(&in, &out, first, days, over * mul, lateness * mul);
    text got = { 0 }, want = { 0 };
    int64_t side_n, dead, late;
    feed(sc_op_correlate_run, st, &in, CP, 3, first, rows, n, maxb, &got, &side_n);
    corr_model(rows, n, nkeys, over * mul, lateness * mul, days, &want, &dead, &late);
    expect_same("correlate vs model", &got, &want);
    CHECK(C(&cnt.dead) == (uint64_t)dead && C(&cnt.late) == (uint64_t)late && side_n == dead + late);
    CHECK(C(&cnt.rows_in) == (uint64_t)n && C(&cnt.rows_out) == (uint64_t)(n - dead - late));
    if (n >= 4000) CHECK(sc_i64_load_relaxed(&((sc_op_base *)st)->state_size) < n / 2); /* evicted */
    sc_op_correlate_destroy(st);
    sc_schema_free(&in);
    sc_schema_free(&out);
    free(got.s);
    free(want.s);
    free(rows);
}

/* hand-computed (README example shape): a (port 0) and b (port 1), over = 60, one key */
static void corr_hand(void) {
    sc_schema in, out;
    int32_t first[3];
    void *st = mk_corr(&in, &out, first, false, 60, 0);
    /* port, key, time, value: a(1,0,x=20) b(1,1,y=18) a(1,10,x=22) b(1,20,y=19) a(1,70,x=30) */
    int64_t v[5][4] = { { 0, 1, 0, 20 }, { 1, 1, 1, 18 }, { 0, 1, 10, 22 }, { 1, 1, 20, 19 }, { 0, 1, 70, 30 } };
    trow rows[5];
    memset(rows, 0, sizeof rows);
    for (int r = 0; r < 5; r++) {
        rows[r].port = (int)v[r][0];
        const port_def *d = &CP[rows[r].port];
        rows[r].c[d->key] = (cell){ true, v[r][1], 0, "" };
        rows[r].c[d->time] = (cell){ true, v[r][2], 0, "" };
        rows[r].c[2] = (cell){ true, v[r][3], (double)v[r][3], "" };
    }
    text got = { 0 };
    int64_t side_n;
    feed(sc_op_correlate_run, st, &in, CP, 3, first, rows, 5, 3, &got, &side_n);
    /* the last row (t = 70) drops a(0) and b(1) (<= 70 - 60 = 10 drops a(10) too) */
    const char *want =
        "1:0|1,0,1,1,20,20,_,20,20,20,_,_,_,0,_,_,_,_,_,_,_,_,0\n"
        "2:1|1,1,1,1,20,20,_,20,20,20,_,_,_,1,18,18,_,18,18,18,_,_,0\n"
        "3:2|1,10,2,2,42,21,1.4142135623730951,20,22,22,_,_,_,1,18,18,_,18,18,18,_,_,0\n"
        "4:3|1,20,2,2,42,21,1.4142135623730951,20,22,22,_,_,_,2,37,18.5,0.70710678118654757,18,19,19,_,_,0\n"
        "5:4|1,70,1,1,30,30,_,30,30,30,_,_,_,1,19,19,_,19,19,19,_,_,0\n";
    text w = { 0 };
    tprintf(&w, "%s", want);
    expect_same("correlate by hand", &got, &w);
    sc_op_correlate_destroy(st);
    sc_schema_free(&in);
    sc_schema_free(&out);
    free(got.s);
    free(w.s);
}

int main(void) {
    join_hand();
    join_bad_spec();
    corr_hand();
    for (int i = 0; i < 6; i++) {
        join_random(300, 3, 5, rndn(6), rndn(8), i == 5);
        corr_random(300, 3, 5, 1 + rndn(12), rndn(8), i == 5, 7);
    }
    for (int i = 0; i < 4; i++) { /* ties at the watermark (lateness 0); rows dropped on arrival */
        join_random(400, 4, 0, 1 + rndn(3), 0, false);
        corr_random(400, 4, 0, 1 + rndn(3), 0, false, 9);
        corr_random(400, 4, 12, 1 + rndn(3), 12, false, 9);
    }
    join_random(6000, 400, 2, 3, 2, false); /* many keys coming and going: sweeps */
    corr_random(1500, 2, 6, 6, 3, false, 64);
    corr_random(6000, 400, 2, 4, 2, false, 64);
    printf("test_fanin: ok\n");
    return 0;
}
