/* Thin inline wrappers around C11 <stdatomic.h> so Cython (which cannot declare _Atomic)
 * and plain C share one vocabulary. All atomics are 64-bit or pointer-sized.
 *
 * Memory orders are explicit in the names: _relaxed, _acquire, _release, _acqrel, _seqcst.
 */
#ifndef SC_ATOMIC_H
#define SC_ATOMIC_H

#include <stdatomic.h>
#include <stdint.h>
#include <stdbool.h>

typedef struct { _Atomic int64_t v; } sc_atomic_i64;
typedef struct { _Atomic uint64_t v; } sc_atomic_u64;
typedef struct { _Atomic(void *) v; } sc_atomic_ptr;
typedef struct { _Atomic int v; } sc_atomic_flag_t;

#define SC_CACHELINE 64
#define SC_ALIGNED __attribute__((aligned(SC_CACHELINE)))

static inline void sc_i64_init(sc_atomic_i64 *a, int64_t x) { atomic_init(&a->v, x); }
static inline int64_t sc_i64_load_relaxed(const sc_atomic_i64 *a) { return atomic_load_explicit((_Atomic int64_t *)&a->v, memory_order_relaxed); }
static inline int64_t sc_i64_load_acquire(const sc_atomic_i64 *a) { return atomic_load_explicit((_Atomic int64_t *)&a->v, memory_order_acquire); }
static inline void sc_i64_store_relaxed(sc_atomic_i64 *a, int64_t x) { atomic_store_explicit(&a->v, x, memory_order_relaxed); }
static inline void sc_i64_store_release(sc_atomic_i64 *a, int64_t x) { atomic_store_explicit(&a->v, x, memory_order_release); }
static inline int64_t sc_i64_fetch_add_relaxed(sc_atomic_i64 *a, int64_t x) { return atomic_fetch_add_explicit(&a->v, x, memory_order_relaxed); }
static inline int64_t sc_i64_fetch_add_acqrel(sc_atomic_i64 *a, int64_t x) { return atomic_fetch_add_explicit(&a->v, x, memory_order_acq_rel); }
static inline bool sc_i64_cas_acqrel(sc_atomic_i64 *a, int64_t *expected, int64_t desired) {
    return atomic_compare_exchange_strong_explicit(&a->v, expected, desired, memory_order_acq_rel, memory_order_acquire);
}

static inline void sc_u64_init(sc_atomic_u64 *a, uint64_t x) { atomic_init(&a->v, x); }
static inline uint64_t sc_u64_load_relaxed(const sc_atomic_u64 *a) { return atomic_load_explicit((_Atomic uint64_t *)&a->v, memory_order_relaxed); }
static inline uint64_t sc_u64_load_acquire(const sc_atomic_u64 *a) { return atomic_load_explicit((_Atomic uint64_t *)&a->v, memory_order_acquire); }
static inline void sc_u64_store_relaxed(sc_atomic_u64 *a, uint64_t x) { atomic_store_explicit(&a->v, x, memory_order_relaxed); }
static inline void sc_u64_store_release(sc_atomic_u64 *a, uint64_t x) { atomic_store_explicit(&a->v, x, memory_order_release); }
static inline uint64_t sc_u64_fetch_add_relaxed(sc_atomic_u64 *a, uint64_t x) { return atomic_fetch_add_explicit(&a->v, x, memory_order_relaxed); }
static inline uint64_t sc_u64_fetch_add_acqrel(sc_atomic_u64 *a, uint64_t x) { return atomic_fetch_add_explicit(&a->v, x, memory_order_acq_rel); }
static inline bool sc_u64_cas_acqrel(sc_atomic_u64 *a, uint64_t *expected, uint64_t desired) {
    return atomic_compare_exchange_strong_explicit(&a->v, expected, desired, memory_order_acq_rel, memory_order_acquire);
}

static inline void sc_ptr_init(sc_atomic_ptr *a, void *x) { atomic_init(&a->v, x); }
static inline void *sc_ptr_load_acquire(const sc_atomic_ptr *a) { return atomic_load_explicit((_Atomic(void *) *)&a->v, memory_order_acquire); }
static inline void sc_ptr_store_release(sc_atomic_ptr *a, void *x) { atomic_store_explicit(&a->v, x, memory_order_release); }
static inline void *sc_ptr_exchange_acqrel(sc_atomic_ptr *a, void *x) { return atomic_exchange_explicit(&a->v, x, memory_order_acq_rel); }
static inline bool sc_ptr_cas_acqrel(sc_atomic_ptr *a, void **expected, void *desired) {
    return atomic_compare_exchange_strong_explicit(&a->v, expected, desired, memory_order_acq_rel, memory_order_acquire);
}

/* A try-lock flag (Prasaad et al. Fig. 4 style): 0 = free, 1 = held. */
static inline void sc_flag_init(sc_atomic_flag_t *f) { atomic_init(&f->v, 0); }
static inline bool sc_flag_try_acquire(sc_atomic_flag_t *f) {
    int expected = 0;
    return atomic_compare_exchange_strong_explicit(&f->v, &expected, 1, memory_order_acquire, memory_order_relaxed);
}
static inline void sc_flag_release(sc_atomic_flag_t *f) { atomic_store_explicit(&f->v, 0, memory_order_release); }
static inline int sc_flag_load(const sc_atomic_flag_t *f) { return atomic_load_explicit((_Atomic int *)&f->v, memory_order_acquire); }

static inline void sc_fence_seqcst(void) { atomic_thread_fence(memory_order_seq_cst); }
static inline void sc_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

#endif
