/* Extra atomic helpers for the runtime, on top of native/common/sc_atomic.h (which stays the
 * shared vocabulary). Everything here is header-only and static inline.
 *
 * - sequentially consistent load/store/exchange on pointers and flags, needed where the
 *   reorder buffer relies on a store-then-load (Dekker-style) pattern for its re-check;
 * - 32-bit atomics for small counters;
 * - a monotonic nanosecond clock and a bounded exponential backoff used by waiting callers.
 */
#ifndef SC_RUNTIME_ATOMIC_EXT_H
#define SC_RUNTIME_ATOMIC_EXT_H

#include "../common/sc_atomic.h"
#include <sched.h>
#include <string.h>
#include <time.h>


static inline void *sc_ptr_load_relaxed(const sc_atomic_ptr *a) { return atomic_load_explicit((_Atomic(void *) *)&a->v, memory_order_relaxed); }
static inline void *sc_ptr_load_seqcst(const sc_atomic_ptr *a) { return atomic_load_explicit((_Atomic(void *) *)&a->v, memory_order_seq_cst); }
static inline void sc_ptr_store_relaxed(sc_atomic_ptr *a, void *x) { atomic_store_explicit(&a->v, x, memory_order_relaxed); }
static inline void sc_ptr_store_seqcst(sc_atomic_ptr *a, void *x) { atomic_store_explicit(&a->v, x, memory_order_seq_cst); }
static inline bool sc_ptr_cas_seqcst(sc_atomic_ptr *a, void **expected, void *desired) {
    return atomic_compare_exchange_strong_explicit(&a->v, expected, desired, memory_order_seq_cst, memory_order_seq_cst);
}

/* try-lock flag with seq_cst ordering (acquire on success, and it takes part in the single
 * total order with the slot stores and the re-check load). */
static inline bool sc_flag_try_acquire_seqcst(sc_atomic_flag_t *f) {
    return atomic_exchange_explicit(&f->v, 1, memory_order_seq_cst) == 0;
}
static inline void sc_flag_release_seqcst(sc_atomic_flag_t *f) { atomic_store_explicit(&f->v, 0, memory_order_seq_cst); }
static inline int sc_flag_load_seqcst(const sc_atomic_flag_t *f) { return atomic_load_explicit((_Atomic int *)&f->v, memory_order_seq_cst); }

static inline int64_t sc_i64_fetch_sub_acqrel(sc_atomic_i64 *a, int64_t x) { return atomic_fetch_sub_explicit(&a->v, x, memory_order_acq_rel); }
static inline int64_t sc_i64_load_seqcst(const sc_atomic_i64 *a) { return atomic_load_explicit((_Atomic int64_t *)&a->v, memory_order_seq_cst); }
static inline uint64_t sc_u64_fetch_or_acqrel(sc_atomic_u64 *a, uint64_t x) { return atomic_fetch_or_explicit(&a->v, x, memory_order_acq_rel); }
static inline bool sc_u64_cas_weak_relaxed(sc_atomic_u64 *a, uint64_t *expected, uint64_t desired) {
    return atomic_compare_exchange_weak_explicit(&a->v, expected, desired, memory_order_relaxed, memory_order_relaxed);
}
/* raise *a to at least x (relaxed; used for max statistics) */
static inline void sc_u64_max_relaxed(sc_atomic_u64 *a, uint64_t x) {
    uint64_t cur = sc_u64_load_relaxed(a);
    while (cur < x && !sc_u64_cas_weak_relaxed(a, &cur, x)) {
    }
}
/* a double stored in a u64 cell */
static inline double sc_u64_as_double(uint64_t bits) { double d; memcpy(&d, &bits, sizeof d); return d; }
static inline uint64_t sc_double_as_u64(double d) { uint64_t b; memcpy(&b, &d, sizeof b); return b; }

typedef struct { _Atomic uint32_t v; } sc_atomic_u32;
static inline void sc_u32_init(sc_atomic_u32 *a, uint32_t x) { atomic_init(&a->v, x); }
static inline uint32_t sc_u32_load_acquire(const sc_atomic_u32 *a) { return atomic_load_explicit((_Atomic uint32_t *)&a->v, memory_order_acquire); }
static inline uint32_t sc_u32_load_relaxed(const sc_atomic_u32 *a) { return atomic_load_explicit((_Atomic uint32_t *)&a->v, memory_order_relaxed); }
static inline void sc_u32_store_release(sc_atomic_u32 *a, uint32_t x) { atomic_store_explicit(&a->v, x, memory_order_release); }
static inline bool sc_u32_cas_acqrel(sc_atomic_u32 *a, uint32_t *expected, uint32_t desired) {
    return atomic_compare_exchange_strong_explicit(&a->v, expected, desired, memory_order_acq_rel, memory_order_acquire);
}
static inline uint32_t sc_u32_fetch_sub_acqrel(sc_atomic_u32 *a, uint32_t x) { return atomic_fetch_sub_explicit(&a->v, x, memory_order_acq_rel); }
static inline uint32_t sc_u32_fetch_add_seqcst(sc_atomic_u32 *a, uint32_t x) { return atomic_fetch_add_explicit(&a->v, x, memory_order_seq_cst); }
static inline uint32_t sc_u32_fetch_sub_seqcst(sc_atomic_u32 *a, uint32_t x) { return atomic_fetch_sub_explicit(&a->v, x, memory_order_seq_cst); }

/* aligned_alloc demands a size that is a multiple of the alignment: round it up. */
#include <stdlib.h>
static inline void *sc_alloc_aligned(size_t size) {
    size_t rounded = (size + SC_CACHELINE - 1) / SC_CACHELINE * SC_CACHELINE;
    return aligned_alloc(SC_CACHELINE, rounded ? rounded : SC_CACHELINE);
}

/* monotonic clock in nanoseconds */
static inline uint64_t sc_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Bounded backoff for callers that must wait (never used inside the lock-free operations
 * themselves): spin with pause, then yield, then sleep up to max_sleep_ns. */
typedef struct { uint32_t step; } sc_backoff;
#define SC_BACKOFF_YIELD 16u /* the first step that yields instead of spinning */
#define SC_BACKOFF_SLEEP 24u /* the first step that sleeps */
static inline void sc_backoff_reset(sc_backoff *b) { b->step = 0; }
static inline void sc_backoff_wait(sc_backoff *b, uint64_t max_sleep_ns) {
    uint32_t s = b->step++;
    if (s < SC_BACKOFF_YIELD) {
        for (uint32_t i = 0; i < (1u << (s < 6 ? s : 6)); i++) sc_cpu_relax();
    } else if (s < SC_BACKOFF_SLEEP) {
        sched_yield();
    } else {
        uint64_t ns = 1000ull << ((s - SC_BACKOFF_SLEEP) < 10 ? (s - SC_BACKOFF_SLEEP) : 10);
        if (ns > max_sleep_ns) ns = max_sleep_ns;
        struct timespec ts = { (time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull) };
        nanosleep(&ts, NULL);
    }
}

#ifdef SC_DEBUG
#include <stdio.h>
#include <stdlib.h>
#define SC_INVARIANT(cond, msg)                                                              \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            fprintf(stderr, "streamcell invariant violated at %s:%d: %s\n", __FILE__,        \
                    __LINE__, msg);                                                          \
            abort();                                                                         \
        }                                                                                    \
    } while (0)
#else
#define SC_INVARIANT(cond, msg) ((void)0)
#endif

#endif
