// sources: runtime/batch.c runtime/ring.c
/* Tests for the column-buffer allocator of runtime/batch.h (sc_colbuf_*): contents survive
 * realloc across sizes, calloc zeroes reused memory, freed large buffers are handed out again
 * (not in sanitizer builds, which cache nothing), also to a request whose own class is empty
 * when they are at most four classes larger, a new buffer of up to 4 MB comes with every page
 * faulted in, the cache never holds more than sc_colbuf_limit(), a full cache makes room for a
 * newly freed buffer by releasing its oldest ones, trim releases by age, and threads
 * allocating and freeing at once neither lose nor share a buffer; a list freed at once is
 * cached as if freed one by one. */
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "runtime/batch.h"

#include "check.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CACHING 0
#else
#define CACHING 1
#endif

static void fill(uint8_t *p, size_t n, uint8_t seed) {
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(seed + i * 7);
}
static int same(const uint8_t *p, size_t n, uint8_t seed) {
    for (size_t i = 0; i < n; i++)
        if (p[i] != (uint8_t)(seed + i * 7)) return 0;
    return 1;
}
/* One byte value over the whole buffer, by libc (the threads test moves about a gigabyte: a
 * byte loop takes minutes under the sanitizers); every byte equals v when the first does and
 * each equals the next. */
static void fill_byte(uint8_t *p, size_t n, uint8_t v) { memset(p, v, n); }
static int same_byte(const uint8_t *p, size_t n, uint8_t v) { return p[0] == v && memcmp(p, p + 1, n - 1) == 0; }

static void test_realloc_keeps_contents(void) {
    sc_colbuf_trim(0);
    /* small -> small, small -> large, large -> larger class, shrink (kept in place) */
    size_t sizes[] = { 1, 100, 4000, 20000, 70000, 300000, 1 << 22, 5000 };
    uint8_t *p = sc_colbuf_alloc(sizes[0]);
    CHECK(p);
    fill(p, sizes[0], 3);
    for (size_t k = 1; k < sizeof sizes / sizeof *sizes; k++) {
        size_t keep = sizes[k - 1] < sizes[k] ? sizes[k - 1] : sizes[k];
        p = sc_colbuf_realloc(p, sizes[k]);
        CHECK(p);
        CHECK(((uintptr_t)p & 15) == 0); /* malloc's alignment kept */
        CHECK(same(p, keep, 3));
        fill(p, sizes[k], 3);
    }
    sc_colbuf_free(p);
    sc_colbuf_free(NULL);
    p = sc_colbuf_realloc(NULL, 10); /* realloc(NULL) allocates */
    CHECK(p);
    sc_colbuf_free(p);
}

static void test_reuse_and_calloc(void) {
    sc_colbuf_trim(0);
    CHECK(sc_colbuf_cached() == 0);
    uint8_t *a = sc_colbuf_alloc(131072);
    CHECK(a);
    fill(a, 131072, 9);
    sc_colbuf_free(a);
    CHECK(sc_colbuf_cached() == (CACHING ? 131072 : 0));
    uint8_t *b = sc_colbuf_calloc(131072 - 1000, 1); /* the same class */
    CHECK(b);
    CHECK(CACHING ? b == a : 1);
    for (size_t i = 0; i < 131072 - 1000; i++) CHECK(b[i] == 0);
    CHECK(sc_colbuf_cached() == 0);
    /* a small buffer is never cached */
    uint8_t *s = sc_colbuf_alloc(SC_COLBUF_MIN - 1);
    CHECK(s);
    sc_colbuf_free(s);
    CHECK(sc_colbuf_cached() == 0);
    sc_colbuf_free(b);
    CHECK(sc_colbuf_calloc(SIZE_MAX / 2, 4) == NULL); /* overflow refused */
}

static void test_cap_and_trim(void) {
    sc_colbuf_trim(0);
    int64_t limit = sc_colbuf_limit();
    CHECK(limit >= ((int64_t)64 << 20) && limit <= SC_COLBUF_CACHE_MAX);
    enum { N = 72 };
    size_t sz = 16u << 20; /* 72 x 16 MB > the largest limit, 1 GB (untouched: above 4 MB, not faulted in) */
    void *p[N];
    for (int i = 0; i < N; i++) CHECK((p[i] = sc_colbuf_alloc(sz)) != NULL);
    for (int i = 0; i < N; i++) sc_colbuf_free(p[i]);
    int64_t cached = sc_colbuf_cached();
    CHECK(cached <= limit);
    CHECK(CACHING ? cached == limit / (int64_t)sz * (int64_t)sz : cached == 0);
    CHECK(sc_colbuf_trim(3600ull * 1000000000ull) == 0); /* nothing is an hour old */
    CHECK(sc_colbuf_cached() == cached);
    struct timespec ts = { 0, 20 * 1000 * 1000 };
    nanosleep(&ts, NULL);
    CHECK(sc_colbuf_trim(10 * 1000 * 1000) == cached); /* everything is 10 ms old */
    CHECK(sc_colbuf_cached() == 0);
}

/* A full cache keeps what is freed last: a buffer of another size freed into a cache filled
 * with 16 MB buffers is kept (handed out again) and the oldest 16 MB buffers make room; the
 * newest stay, handed out newest first; trim takes the oldest first. */
static void test_full_cache_keeps_the_newest(void) {
    sc_colbuf_trim(0);
    int64_t limit = sc_colbuf_limit();
    enum { N = 200 };
    size_t sz = 16u << 20; /* 200 x 16 MB > the largest limit (above 4 MB: not faulted in) */
    void *p[N];
    for (int i = 0; i < N; i++) CHECK((p[i] = sc_colbuf_alloc(sz)) != NULL);
    for (int i = 0; i < N; i++) sc_colbuf_free(p[i]);
    int64_t kept = limit / (int64_t)sz; /* the newest `kept` of them: p[N - kept .. N) */
    CHECK(CACHING ? sc_colbuf_cached() == kept * (int64_t)sz : sc_colbuf_cached() == 0);
    uint8_t *small = sc_colbuf_alloc(65536); /* no 64K buffer is cached: a new one */
    CHECK(small != NULL);
    fill(small, 65536, 5);
    sc_colbuf_free(small);
    CHECK(sc_colbuf_cached() <= limit);
    int64_t room = limit - kept * (int64_t)sz; /* the 64K buffer fits beside them, or one goes */
    int64_t left = room >= 65536 ? kept : kept - 1;
    CHECK(CACHING ? sc_colbuf_cached() == left * (int64_t)sz + 65536 : sc_colbuf_cached() == 0);
    uint8_t *again = sc_colbuf_alloc(65536);
    CHECK(CACHING ? again == small : 1);
    sc_colbuf_free(again);
    void *q[N];
    for (int64_t i = 0; i < left; i++) { /* newest first; the oldest (p[N - kept]) went if one did */
        q[i] = sc_colbuf_alloc(sz);
        CHECK(CACHING ? q[i] == p[N - 1 - i] : 1);
    }
    for (int64_t i = left - 1; i >= 0; i--) sc_colbuf_free(q[i]); /* q[0] = p[N-1] is now newest */
    /* trim by age takes the oldest end: sleep, free one more, trim what is older than the sleep */
    struct timespec ts = { 0, 20 * 1000 * 1000 };
    nanosleep(&ts, NULL);
    void *last = sc_colbuf_alloc(sz);
    CHECK(last != NULL);
    sc_colbuf_free(last);
    int64_t before = sc_colbuf_cached();
    CHECK(sc_colbuf_trim(10 * 1000 * 1000) == (CACHING ? before - (int64_t)sz : 0));
    CHECK(sc_colbuf_cached() == (CACHING ? (int64_t)sz : 0));
    void *newest = sc_colbuf_alloc(sz);
    CHECK(CACHING ? newest == last : newest != NULL);
    sc_colbuf_free(newest);
    sc_colbuf_trim(0);
    CHECK(sc_colbuf_cached() == 0);
}

/* A class's cached buffers are handed out newest first also after the oldest were trimmed
 * and more came than the room they had: 10 old ones, 54 young, trim the 10, then 20 more. */
static void test_order_after_trim_and_growth(void) {
    sc_colbuf_trim(0);
    enum { OLD = 10, YOUNG = 54, MORE = 20 };
    void *p[OLD + YOUNG + MORE];
    for (int i = 0; i < OLD + YOUNG + MORE; i++) CHECK((p[i] = sc_colbuf_alloc(65536)) != NULL);
    for (int i = 0; i < OLD; i++) sc_colbuf_free(p[i]);
    struct timespec ts = { 0, 20 * 1000 * 1000 };
    nanosleep(&ts, NULL);
    for (int i = OLD; i < OLD + YOUNG; i++) sc_colbuf_free(p[i]);
    CHECK(sc_colbuf_trim(10 * 1000 * 1000) == (CACHING ? OLD * 65536 : 0));
    for (int i = OLD + YOUNG; i < OLD + YOUNG + MORE; i++) sc_colbuf_free(p[i]);
    CHECK(sc_colbuf_cached() == (CACHING ? (YOUNG + MORE) * 65536 : 0));
    for (int i = OLD + YOUNG + MORE - 1; i >= OLD; i--) {
        void *q = sc_colbuf_alloc(65536);
        CHECK(CACHING ? q == p[i] : q != NULL);
        p[i] = q;
    }
    CHECK(sc_colbuf_cached() == 0);
    for (int i = OLD; i < OLD + YOUNG + MORE; i++) sc_colbuf_free(p[i]);
    sc_colbuf_trim(0);
}

/* sc_colbuf_free_n frees a list across its lots of 32, NULLs and small buffers included:
 * the large ones are cached as if freed one by one, in order (the last one first out). */
static void test_free_many(void) {
    sc_colbuf_trim(0);
    enum { N = 70 };
    void *p[N];
    for (int i = 0; i < N; i++) p[i] = i % 7 == 3 ? NULL : sc_colbuf_alloc(i % 5 == 0 ? 100 : 32768);
    int64_t big = 0;
    for (int i = 0; i < N; i++) big += p[i] && i % 5 != 0 ? 32768 : 0;
    sc_colbuf_free_n(p, N);
    CHECK(sc_colbuf_cached() == (CACHING ? big : 0));
    for (int i = N - 1; i >= 0; i--) {
        if (!p[i] || i % 5 == 0) continue;
        void *q = sc_colbuf_alloc(32768);
        CHECK(CACHING ? q == p[i] : q != NULL);
        sc_colbuf_free_n(&q, 1);
        q = sc_colbuf_alloc(32768); /* the one just freed comes straight back */
        CHECK(CACHING ? q == p[i] : q != NULL);
        p[i] = q;
    }
    CHECK(sc_colbuf_cached() == 0);
    for (int i = 0; i < N; i++)
        if (i % 5 != 0) sc_colbuf_free(p[i]);
    sc_colbuf_trim(0);
}

/* A request whose class is empty takes the smallest cached buffer of the next four classes
 * (at most twice its size) and gives it back to that buffer's own class; a buffer more than
 * four classes up stays cached. Classes: 16K 20K 24K 28K 32K 40K 48K 56K 64K ... */
static void test_reuse_across_classes(void) {
    sc_colbuf_trim(0);
    uint8_t *big = sc_colbuf_alloc(65536), *mid = sc_colbuf_alloc(40000);
    CHECK(big && mid);
    fill(mid, 40000, 3);
    sc_colbuf_free(big);
    sc_colbuf_free(mid);
    CHECK(sc_colbuf_cached() == (CACHING ? 65536 + 40960 : 0));
    uint8_t *a = sc_colbuf_alloc(30000); /* class 32K, empty: the 40K buffer, not the 64K one */
    CHECK(a);
    CHECK(CACHING ? a == mid : 1);
    CHECK(sc_colbuf_cached() == (CACHING ? 65536 : 0));
    fill(a, 30000, 5);
    sc_colbuf_free(a); /* back to the 40K class: a 40K request finds it */
    CHECK(sc_colbuf_cached() == (CACHING ? 65536 + 40960 : 0));
    uint8_t *b = sc_colbuf_alloc(16384); /* class 16K: 40K and 64K are five and eight up */
    CHECK(b);
    CHECK(b != mid && b != big);
    CHECK(sc_colbuf_cached() == (CACHING ? 65536 + 40960 : 0));
    uint8_t *c = sc_colbuf_alloc(36000); /* class 40K itself */
    CHECK(c);
    CHECK(CACHING ? c == mid : 1);
    fill(c, 36000, 7);
    CHECK(same(c, 36000, 7));
    sc_colbuf_free(b);
    sc_colbuf_free(c);
    sc_colbuf_trim(0);
    CHECK(sc_colbuf_cached() == 0);
}

/* Pages of [p, p + n) resident now (mincore). */
static size_t resident_pages(const void *p, size_t n, size_t *pages) {
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = (uintptr_t)p & ~(uintptr_t)(pg - 1), hi = ((uintptr_t)p + n + pg - 1) & ~(uintptr_t)(pg - 1);
    *pages = (hi - lo) / pg;
    unsigned char *vec = malloc(*pages);
    CHECK(vec);
    CHECK(mincore((void *)lo, hi - lo, vec) == 0);
    size_t r = 0;
    for (size_t i = 0; i < *pages; i++) r += vec[i] & 1;
    free(vec);
    return r;
}

/* A new buffer the cache may keep comes with every page faulted in, so a first user that
 * writes only part of it leaves no page to fault in under the next user; one above 4 MB is
 * left untouched (room it may never use). A fixed mmap threshold makes each request a fresh
 * mapping of its own, whose pages are resident only if touched. Sanitizer builds cache
 * nothing and touch nothing. */
static void test_new_buffers_are_faulted_in(void) {
    sc_colbuf_trim(0);
    CHECK(mallopt(M_MMAP_THRESHOLD, 128 << 10) == 1 || !CACHING);
    size_t n = (size_t)2 << 20, big = (size_t)8 << 20, pages;
    uint8_t *p = sc_colbuf_alloc(n), *q = sc_colbuf_alloc(big);
    CHECK(p && q);
    size_t rp = resident_pages(p, n, &pages);
    CHECK(CACHING ? rp == pages : 1);
    size_t rq = resident_pages(q, big, &pages);
    CHECK(CACHING ? rq <= 2 : 1); /* the size header's page, maybe the next */
    memset(p, 1, n);
    memset(q, 2, big);
    CHECK(same_byte(p, n, 1) && same_byte(q, big, 2));
    sc_colbuf_free(p);
    sc_colbuf_free(q);
    sc_colbuf_trim(0);
}

typedef struct {
    int id;
    int bad;
} worker_arg;

static void *worker(void *v) {
    worker_arg *w = v;
    uint64_t s = 0x9E3779B97F4A7C15ull * (uint64_t)(w->id + 1);
    enum { LIVE = 8 };
    uint8_t *mine[LIVE] = { 0 };
    size_t len[LIVE] = { 0 };
    for (int it = 0; it < 4000; it++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        int k = (int)(s % LIVE);
        if (mine[k]) {
            if (!same_byte(mine[k], len[k], (uint8_t)(w->id * 31 + k))) w->bad = 1; /* shared with another */
            sc_colbuf_free(mine[k]);
        }
        len[k] = (size_t)(s >> 20) % (256u << 10) + 1;
        mine[k] = sc_colbuf_alloc(len[k]);
        if (!mine[k]) {
            w->bad = 1;
            break;
        }
        fill_byte(mine[k], len[k], (uint8_t)(w->id * 31 + k));
    }
    for (int k = 0; k < LIVE; k++) {
        if (mine[k] && !same_byte(mine[k], len[k], (uint8_t)(w->id * 31 + k))) w->bad = 1;
        sc_colbuf_free(mine[k]);
    }
    return NULL;
}

static void test_threads(void) {
    enum { T = 4 };
    pthread_t th[T];
    worker_arg a[T];
    for (int i = 0; i < T; i++) {
        a[i] = (worker_arg){ i, 0 };
        CHECK(pthread_create(&th[i], NULL, worker, &a[i]) == 0);
    }
    for (int i = 0; i < T; i++) {
        CHECK(pthread_join(th[i], NULL) == 0);
        CHECK(!a[i].bad);
    }
    CHECK(sc_colbuf_cached() <= sc_colbuf_limit());
    sc_colbuf_trim(0);
    CHECK(sc_colbuf_cached() == 0);
}

int main(void) {
    test_realloc_keeps_contents();
    test_reuse_and_calloc();
    test_reuse_across_classes();
    test_new_buffers_are_faulted_in();
    test_cap_and_trim();
    test_full_cache_keeps_the_newest();
    test_order_after_trim_and_growth();
    test_free_many();
    test_threads();
    printf("test_colbuf: ok\n");
    return 0;
}
