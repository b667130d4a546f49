// sources: runtime/reorder.c
/* Stress tests for runtime/reorder (both variants): workers take serials from a shared
 * counter, "process" them with random delays, and send outputs; emit checks that serials come
 * out exactly once, consecutive and in order, including serials with no output, multi-part
 * outputs, and a downstream that randomly reports full (partial emits, helping drains). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "runtime/atomic_ext.h"
#include "runtime/reorder.h"

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SCALE_DIV 8
#else
#define SCALE_DIV 1
#endif
#include "check.h"

static uint64_t rnd(uint64_t *s) { *s ^= *s << 13; *s ^= *s >> 7; *s ^= *s << 17; return *s; }

typedef struct {
    uint64_t serial;
    int parts; /* emitted one part at a time; downstream may take only some */
} item_t;

typedef struct {
    sc_reorder *r;
    uint64_t n;
    int full_rate;       /* 1/full_rate emits report a full downstream (0 = never) */
    _Atomic uint64_t next_serial;
    item_t *items;
    /* emit-side state: touched only by the (serialized) emitter, so TSan checks the hand-off */
    uint64_t expect, parts_out, emitted, rnd;
} ctx_t;

static int emit(void *vctx, uint64_t serial, void **item) {
    ctx_t *c = vctx;
    item_t *it = *item;
    CHECK(serial == c->expect || (serial > c->expect && c->items[c->expect].parts == -1));
    /* serials skipped in between must be NOTHING serials */
    while (c->expect < serial) { CHECK(c->items[c->expect].parts == -1); c->expect++; }
    CHECK(it == &c->items[serial] && it->serial == serial && it->parts > 0);
    while (it->parts > 0) {
        if (c->full_rate && rnd(&c->rnd) % (uint64_t)c->full_rate == 0) return SC_EFULL;
        it->parts--;
        c->parts_out++;
    }
    c->expect = serial + 1;
    c->emitted++;
    return SC_OK;
}

static void *worker(void *p) {
    ctx_t *c = p;
    uint64_t s = (uint64_t)(uintptr_t)&s | 1;
    for (;;) {
        uint64_t t = atomic_fetch_add(&c->next_serial, 1);
        if (t >= c->n) break;
        uint64_t r = rnd(&s);
        if ((r & 15) == 0) for (uint64_t i = (r >> 8) & 1023; i; i--) sc_cpu_relax();
        if ((r & 2047) == 1) sched_yield();
        void *item = c->items[t].parts == -1 ? SC_REORDER_NOTHING : &c->items[t];
        sc_backoff bo;
        sc_backoff_reset(&bo);
        int rc;
        while ((rc = sc_reorder_send(c->r, t, item)) == SC_EFULL) {
            sc_reorder_drain(c->r); /* help: maybe the head was blocked downstream */
            sc_backoff_wait(&bo, 10000);
        }
        CHECK(rc == SC_OK);
        if (c->full_rate && sc_reorder_has_ready(c->r)) sc_reorder_drain(c->r);
    }
    return NULL;
}

static void run(sc_reorder_kind kind, uint32_t window, int nworkers, uint64_t n, int full_rate) {
    ctx_t c = { .n = n, .full_rate = full_rate, .rnd = 12345 };
    atomic_init(&c.next_serial, 0);
    c.items = calloc(n, sizeof(item_t));
    uint64_t s = 777, nothing = 0;
    for (uint64_t i = 0; i < n; i++) {
        c.items[i].serial = i;
        uint64_t r = rnd(&s) % 8;
        c.items[i].parts = r == 0 ? -1 : (int)(r % 3) + 1;
        nothing += r == 0;
    }
    CHECK(sc_reorder_create(&c.r, kind, window, 0, emit, &c) == SC_OK);
    pthread_t t[16];
    uint64_t t0 = sc_now_ns();
    for (int i = 0; i < nworkers; i++) pthread_create(&t[i], NULL, worker, &c);
    for (int i = 0; i < nworkers; i++) pthread_join(t[i], NULL);
    if (!full_rate) {
        /* no thread inside and emit never refused: nothing may be stranded */
        CHECK(sc_reorder_next(c.r) == n);
    } else {
        while (sc_reorder_next(c.r) < n) CHECK(sc_reorder_drain(c.r) == SC_OK || 1);
    }
    double ms = (double)(sc_now_ns() - t0) / 1e6;
    CHECK(c.emitted + nothing == n);
    for (uint64_t i = 0; i < n; i++)
        if (c.items[i].parts != -1) CHECK(c.items[i].parts == 0); /* every part emitted */
    CHECK(!sc_reorder_has_ready(c.r));
    printf("  %-11s window=%-4u workers=%d serials=%llu full_rate=%d: in order, none lost/duplicated (%.0f ms)\n",
           kind == SC_REORDER_LOCKED ? "lock-based" : "nonblocking", sc_reorder_window(c.r), nworkers,
           (unsigned long long)n, full_rate, ms);
    sc_reorder_destroy(c.r, NULL, NULL);
    free(c.items);
}

static int basic_emits;
static int basic_emit(void *ctx, uint64_t serial, void **item) {
    uint64_t *out = ctx;
    if ((uintptr_t)*item == 0x50) return SC_EFULL;
    if ((uintptr_t)*item == 0x60) { *item = (void *)0x70; return SC_EFULL; } /* partial */
    if ((uintptr_t)*item == 0x80) return SC_EINTERNAL;
    out[basic_emits++] = serial;
    return SC_OK;
}
static int dropped;
static void drop(void *ctx, void *item) { dropped++; }

static void test_basic(sc_reorder_kind kind) {
    uint64_t out[16];
    basic_emits = 0;
    dropped = 0;
    sc_reorder *r;
    CHECK(sc_reorder_create(&r, kind, 0, 0, basic_emit, out) == SC_EINVAL);
    CHECK(sc_reorder_create(&r, kind, 3, 10, basic_emit, out) == SC_OK);
    CHECK(sc_reorder_window(r) == 4 && sc_reorder_next(r) == 10);
    CHECK(sc_reorder_send(r, 9, (void *)0x10) == SC_EINVAL);   /* already emitted */
    CHECK(sc_reorder_send(r, 14, (void *)0x10) == SC_EFULL);   /* outside the window */
    CHECK(sc_reorder_send(r, 11, (void *)0x10) == SC_OK);
    CHECK(sc_reorder_send(r, 12, SC_REORDER_NOTHING) == SC_OK);
    CHECK(basic_emits == 0 && !sc_reorder_has_ready(r));
    CHECK(sc_reorder_send(r, 10, (void *)0x10) == SC_OK);
    CHECK(basic_emits == 2 && out[0] == 10 && out[1] == 11 && sc_reorder_next(r) == 13);
    CHECK(sc_reorder_send(r, 13, (void *)0x50) == SC_OK);      /* downstream full: stays */
    CHECK(sc_reorder_next(r) == 13 && sc_reorder_has_ready(r));
    CHECK(sc_reorder_drain(r) == SC_EFULL);
    CHECK(sc_reorder_send(r, 14, (void *)0x60) == SC_OK);
    CHECK(sc_reorder_send(r, 15, (void *)0x80) == SC_OK);
    sc_reorder_destroy(r, drop, NULL);
    CHECK(dropped == 3);
    /* partial emit replaces the item */
    basic_emits = 0;
    CHECK(sc_reorder_create(&r, kind, 2, 0, basic_emit, out) == SC_OK);
    CHECK(sc_reorder_send(r, 0, (void *)0x60) == SC_OK);
    CHECK(sc_reorder_next(r) == 0 && sc_reorder_has_ready(r));
    CHECK(sc_reorder_drain(r) == SC_OK && basic_emits == 1 && sc_reorder_next(r) == 1); /* 0x70 taken */
    CHECK(sc_reorder_send(r, 1, (void *)0x80) == SC_EINTERNAL);
    dropped = 0;
    sc_reorder_destroy(r, drop, NULL);
    CHECK(dropped == 1);
}

int main(void) {
    printf("test_reorder\n");
    test_basic(SC_REORDER_NONBLOCKING);
    test_basic(SC_REORDER_LOCKED);
    printf("  basic ok (both variants)\n");
    for (int k = 0; k < 2; k++) {
        sc_reorder_kind kind = k ? SC_REORDER_LOCKED : SC_REORDER_NONBLOCKING;
        run(kind, 1, 4, 10000 / SCALE_DIV, 0);
        run(kind, 2, 5, 30000 / SCALE_DIV, 0);
        run(kind, 8, 6, 60000 / SCALE_DIV, 0);
        run(kind, 1024, 3, 500000 / SCALE_DIV, 0);
        run(kind, 64, 2, 500000 / SCALE_DIV, 0);
        run(kind, 4, 5, 40000 / SCALE_DIV, 16);
    }
    return 0;
}
