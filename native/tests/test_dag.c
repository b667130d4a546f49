// sources: exec/dag.c exec/common.c runtime/batch.c runtime/metrics.c runtime/ring.c exec/lists.c
/* Tests for exec/dag (Zimmerman and Chandy): two sources, a fan-out, a union merge, stateful vertices
 * feeding two sinks. Many phases of random sizes are pushed with 1, 2 and 4 workers; the
 * sinks must equal a sequential model exactly, every stateful vertex must see its rows in
 * arrival order, and a vertex must execute only in the phases where its input changed
 * (plus the end-of-stream phase). Run under TSan by `make sanitize`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "exec/dag.h"

static const uint8_t LTS[3] = { SC_LT_INT, SC_LT_INT, SC_LT_INT }; /* seq, pos, v */
static sc_schema S;

/* keep rows with an even v (stateless) */
static int keep_even(void *st, sc_batch *in, sc_batch **out) {
    (void)st;
    *out = NULL;
    if (in->eos) return sc_forward_eos(in, out);
    sc_batch *o;
    int rc = sc_batch_new(&o, &S, in->nrows ? in->nrows : 1);
    if (rc) {
        sc_batch_release(in);
        return rc;
    }
    const int64_t *v = in->cols[2].values;
    for (int64_t r = 0; r < in->nrows; r++)
        if (v[r] % 2 == 0) sc_batch_copy_row(o, o->nrows++, in, r);
    sc_batch_release(in);
    if (o->nrows == 0) {
        sc_batch_release(o);
        return SC_OK;
    }
    *out = o;
    return SC_OK;
}

/* v := running sum of v, in place; checks that seq only grows (stateful) */
typedef struct running {
    int64_t sum, last_seq;
    int disorder;
} running;

static int run_sum(void *st, sc_batch *in, sc_batch **out) {
    running *s = st;
    *out = NULL;
    if (in->eos) return sc_forward_eos(in, out);
    int64_t *v = in->cols[2].values;
    const int64_t *seq = in->cols[0].values;
    for (int64_t r = 0; r < in->nrows; r++) {
        if (seq[r] <= s->last_seq) s->disorder++;
        s->last_seq = seq[r];
        s->sum += v[r];
        v[r] = s->sum;
    }
    *out = in;
    return SC_OK;
}

static void free_state(void *st) { free(st); }

static sc_batch *rows(const int64_t *seq, const int64_t *v, int64_t n) {
    sc_batch *b;
    CHECK(sc_batch_new(&b, &S, n ? n : 1) == SC_OK);
    for (int64_t r = 0; r < n; r++) {
        sc_batch_set_i64(b, 0, r, seq[r]);
        sc_batch_set_i64(b, 1, r, 0);
        sc_batch_set_i64(b, 2, r, v[r]);
    }
    b->nrows = n;
    return b;
}

static void take_all(sc_dag *d, uint32_t sink, int64_t *got, int64_t *n) {
    sc_batch *b;
    while (sc_dag_take(d, sink, &b) == SC_OK) {
        const int64_t *v = b->cols[2].values;
        for (int64_t r = 0; r < b->nrows; r++) got[(*n)++] = v[r];
        sc_batch_release(b);
    }
}

#define PHASES 300
#define MAXK 12

static void run_case(uint32_t workers, unsigned seed) {
    srand(seed);
    sc_dag *d;
    CHECK(sc_dag_create(&d, 4, 4, 2, 2, 8, 16) == SC_OK);
    /* 0: source A (keep even) -> 2 and 3; 1: source B -> 3; 2: running(A) -> sink 1;
     * 3: union(A, B) then running -> sink 0. Numbered by last predecessor: 0, 0, 1, 2. */
    CHECK(sc_dag_vertex(d, 0, "a", 1, -1) == SC_OK);
    CHECK(sc_dag_vertex(d, 1, "b", 1, -1) == SC_OK);
    CHECK(sc_dag_vertex(d, 2, "a_running", 1, 1) == SC_OK);
    CHECK(sc_dag_vertex(d, 3, "union", 2, 0) == SC_OK);
    CHECK(sc_dag_source(d, 0, 0) == SC_OK);
    CHECK(sc_dag_source(d, 1, 1) == SC_OK);
    CHECK(sc_dag_edge(d, 0, 2, 0) == SC_OK);
    CHECK(sc_dag_edge(d, 0, 3, 0) == SC_OK);
    CHECK(sc_dag_edge(d, 1, 3, 1) == SC_OK);
    int32_t map[6] = { 0, 1, 2, 0, 1, 2 };
    CHECK(sc_dag_merge(d, 3, &S, map, -1) == SC_OK);
    CHECK(sc_dag_add_op(d, 0, "even", true, keep_even, NULL, NULL, NULL) == SC_OK);
    running *r1 = calloc(1, sizeof *r1), *r2 = calloc(1, sizeof *r2);
    r1->last_seq = r2->last_seq = -1;
    CHECK(sc_dag_add_op(d, 2, "sum", false, run_sum, free_state, r1, NULL) == SC_OK);
    CHECK(sc_dag_add_op(d, 3, "sum", false, run_sum, free_state, r2, NULL) == SC_OK);
    CHECK(sc_dag_start(d, workers) == SC_OK);

    int64_t *want0 = malloc(sizeof(int64_t) * PHASES * 2 * MAXK);
    int64_t *want1 = malloc(sizeof(int64_t) * PHASES * MAXK);
    int64_t *got0 = malloc(sizeof(int64_t) * PHASES * 2 * MAXK);
    int64_t *got1 = malloc(sizeof(int64_t) * PHASES * MAXK);
    int64_t n0 = 0, n1 = 0, g0 = 0, g1 = 0, sum0 = 0, sum1 = 0, base = 0;
    int64_t a_phases = 0, phases = 0;
    for (int p = 0; p < PHASES; p++) {
        int64_t k = rand() % (MAXK + 1);
        int64_t sa[MAXK], va[MAXK], sb[MAXK], vb[MAXK];
        bool any_even = false;
        bool odd_only = rand() % 3 == 0; /* phases where A's filter passes nothing */
        for (int64_t j = 0; j < k; j++) {
            sa[j] = base + 2 * j;
            va[j] = odd_only ? 2 * (rand() % 50) + 1 : rand() % 100;
            sb[j] = base + 2 * j + 1;
            vb[j] = rand() % 100 + 1000;
            /* the model: the merged order is a0 b0 a1 b1 ...; A keeps even values */
            if (va[j] % 2 == 0) {
                any_even = true;
                sum0 += va[j];
                want0[n0++] = sum0;
                sum1 += va[j];
                want1[n1++] = sum1;
            }
            sum0 += vb[j];
            want0[n0++] = sum0;
        }
        base += 2 * k;
        if (k == 0) continue; /* no rows: no phase */
        phases++;
        if (any_even) a_phases++;
        sc_batch *in[2] = { rows(sa, va, k), rows(sb, vb, k) };
        int rc;
        while ((rc = sc_dag_push(d, in, 1000000)) == SC_EFULL) {
            take_all(d, 0, got0, &g0);
            take_all(d, 1, got1, &g1);
        }
        CHECK(rc == SC_OK);
    }
    int rc;
    while ((rc = sc_dag_finish(d, 1000000)) == SC_EFULL) {
        take_all(d, 0, got0, &g0);
        take_all(d, 1, got1, &g1);
    }
    CHECK(rc == SC_OK);
    while ((rc = sc_dag_wait(d, 5000000)) == 0) {
        take_all(d, 0, got0, &g0);
        take_all(d, 1, got1, &g1);
    }
    CHECK(rc == 1);
    take_all(d, 0, got0, &g0);
    take_all(d, 1, got1, &g1);
    CHECK(g0 == n0 && g1 == n1);
    CHECK(memcmp(got0, want0, sizeof(int64_t) * (size_t)n0) == 0);
    CHECK(memcmp(got1, want1, sizeof(int64_t) * (size_t)n1) == 0);
    CHECK(r1->disorder == 0 && r2->disorder == 0);

    sc_dag_stats st;
    sc_dag_stats_get(d, &st);
    CHECK(st.phases == (uint64_t)phases + 1);
    sc_dag_vstats vs;
    CHECK(sc_dag_vertex_stats(d, 0, &vs) == SC_OK);
    CHECK(vs.executions == (uint64_t)phases + 1);
    /* Δ-propagation: A's branch runs only where the filter passed a row, and at the end */
    CHECK(sc_dag_vertex_stats(d, 2, &vs) == SC_OK);
    CHECK(vs.executions == (uint64_t)a_phases + 1);
    CHECK(sc_dag_vertex_stats(d, 3, &vs) == SC_OK);
    CHECK(vs.executions == (uint64_t)phases + 1); /* B has rows in every phase */
    CHECK(st.pairs == 2 * (uint64_t)(phases + 1) + (uint64_t)a_phases + 1 + (uint64_t)phases + 1);
    CHECK(sc_dag_stop(d) == 0);
    sc_dag_destroy(d);
    free(want0);
    free(want1);
    free(got0);
    free(got1);
    printf("dag: workers=%u phases=%lld a_phases=%lld in_flight_max=%llu ok\n", workers,
           (long long)phases, (long long)a_phases, (unsigned long long)st.in_flight_max);
}

static void test_numbering_is_checked(void) {
    sc_dag *d;
    /* vertex 1 depends on vertex 2's index order: 0 -> 2, 0 -> 1, 2 -> 1 is not topological */
    CHECK(sc_dag_create(&d, 1, 3, 1, 1, 4, 4) == SC_OK);
    CHECK(sc_dag_vertex(d, 0, "s", 1, -1) == SC_OK);
    CHECK(sc_dag_vertex(d, 1, "x", 1, -1) == SC_OK);
    CHECK(sc_dag_vertex(d, 2, "y", 2, 0) == SC_OK);
    CHECK(sc_dag_source(d, 0, 0) == SC_OK);
    CHECK(sc_dag_edge(d, 2, 1, 0) == SC_EINVAL); /* edges go up */
    sc_dag_destroy(d);
    /* topological but not sorted by last predecessor: 0 -> 1 -> 2, 0 -> 3 */
    CHECK(sc_dag_create(&d, 1, 4, 1, 1, 4, 4) == SC_OK);
    CHECK(sc_dag_vertex(d, 0, "s", 1, -1) == SC_OK);
    CHECK(sc_dag_vertex(d, 1, "a", 1, -1) == SC_OK);
    CHECK(sc_dag_vertex(d, 2, "b", 1, 0) == SC_OK);
    CHECK(sc_dag_vertex(d, 3, "c", 1, -1) == SC_OK);
    CHECK(sc_dag_source(d, 0, 0) == SC_OK);
    CHECK(sc_dag_edge(d, 0, 1, 0) == SC_OK);
    CHECK(sc_dag_edge(d, 1, 2, 0) == SC_OK);
    CHECK(sc_dag_edge(d, 0, 3, 0) == SC_OK);
    CHECK(sc_dag_start(d, 1) == SC_EINVAL);
    sc_dag_destroy(d);
}

int main(void) {
    sc_schema_init(&S, 3, LTS);
    test_numbering_is_checked();
    uint32_t ws[3] = { 1, 2, 4 };
    for (int i = 0; i < 3; i++)
        for (unsigned seed = 1; seed <= 3; seed++) run_case(ws[i], seed);
    sc_schema_free(&S);
    printf("test_dag: ok\n");
    return 0;
}
