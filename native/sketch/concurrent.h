/* Generic concurrent sketch (Rinberg et al., Algorithm 2 "OptParSketch", with section 5.3's eager
 * propagation for small streams).
 *
 * N writers each own two local sketches (double buffering). A writer updates its current
 * local sketch with the sketch's own update function, then reports how many updates it added
 * (sc_conc_added). Once the local buffer holds b updates the writer flips to its other buffer
 * and marks the full one pending; a propagator pthread merges pending buffers into the global
 * sketch, resets them, and hands the global sketch's hint (Θ: its theta) back to the writer,
 * which uses it to pre-filter updates that could never change the global sketch.
 * While vt->n(global) < eager_limit the framework is EAGER: every reported update is merged
 * into the global sketch by the writer itself before sc_conc_added returns (b = 1, so small
 * streams answer exactly like the sequential sketch); past the limit it is LAZY (buffers of b).
 *
 * Relaxation (the one declared relaxation of the semantics contract): a query misses at most
 *     r = 2 * N * b
 * of the (pre-filter-accepted) updates that precede it; in the eager phase at most N
 * (one in-flight update per writer). sc_conc_relaxation() reports r.
 *
 * Thread-safety contract and progress:
 *  - writer w's functions (sc_conc_writer_enter/exit, _local, _hint, _room, _added) are called
 *    by one thread at a time per w; enter/exit hold a per-writer try-lock so a second thread
 *    using the same w gets SC_EFULL instead of corrupting it (a flush holding w only delays
 *    it). Different writers share nothing but the global sketch's merge lock (taken by
 *    writers only in the eager phase).
 *  - a writer waits only when both of its buffers are full (the previous one not yet merged):
 *    it spins briefly, then yields. In the eager phase it takes the merge lock per update.
 *  - sc_conc_summary is lock-free for readers (seqlock over atomics; retries while a publish
 *    is in progress) and never blocks writers or the propagator.
 *  - sc_conc_snapshot takes the merge lock for one deep copy: it may delay the propagator and
 *    eager-phase writers by one copy, never lazy-phase writers.
 *  - sc_conc_flush may run concurrently with writers: it takes each writer's lock in turn
 *    (waiting for an in-flight batch of that writer to end), pushes its partial buffer, waits
 *    until every buffer is merged, then calls vt->finalize on the global sketch.
 *  - ordering: a query sees every update whose merge completed before the query's summary
 *    read began (merge publishes with release, query reads with acquire).
 *
 * The vtable is the contract in native/sketch_concurrent_interface.md; the two fields after
 * `n` are additions (optional, may be NULL).
 */
#ifndef SC_CONCURRENT_H
#define SC_CONCURRENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SC_CONC_SUMMARY_WORDS 8
#define SC_CONC_MAX_WRITERS 256

typedef struct sc_sketch_vtable {
    const char *name;
    /* new empty sketch from the sketch's own config struct; NULL on ENOMEM */
    void *(*create)(const void *config);
    void (*destroy)(void *sk);
    /* clear a sketch for reuse as a local buffer (keeps its allocation) */
    void (*reset)(void *sk);
    /* global := global ∪ local; returns 0 or a negative sc_status */
    int (*merge_into)(void *global, const void *local);
    /* deep copy for a query snapshot; returns 0 or a negative sc_status */
    int (*copy)(void **out, const void *sk);
    /* hint published to writers after a merge (Θ: current theta as uint64; 0 = no hint) */
    uint64_t (*hint)(const void *global);
    /* number of updates absorbed (for eager-propagation thresholds and metrics) */
    uint64_t (*n)(const void *sk);
    /* --- additions (optional) --- */
    /* a few words the query side needs, published after every merge (Θ: retained, theta,
     * empty); read back lock-free by sc_conc_summary */
    void (*summarize)(const void *global, uint64_t out[SC_CONC_SUMMARY_WORDS]);
    /* canonicalise the global sketch after a full flush (Θ: trim to k in estimation mode) */
    int (*finalize)(void *global);
} sc_sketch_vtable;

typedef struct sc_conc_config {
    const sc_sketch_vtable *vt;
    const void *global_config;  /* passed to vt->create for the global sketch */
    const void *local_config;   /* for the 2N local sketches; NULL: global_config */
    uint32_t writers;           /* N, 1..SC_CONC_MAX_WRITERS */
    uint64_t buffer;            /* b >= 1: updates per local buffer in the lazy phase */
    uint64_t eager_limit;       /* eager while vt->n(global) < eager_limit; 0: never eager */
} sc_conc_config;

typedef struct sc_conc_stats {
    uint64_t seq;               /* publish counter (even) */
    uint64_t n_global;          /* vt->n(global) at the publish */
    uint64_t propagations;      /* lazy merges done by the propagator */
    uint64_t eager_merges;      /* merges done by writers in the eager phase */
    int eager;                  /* 1 while in the eager phase */
} sc_conc_stats;

typedef struct sc_concurrent sc_concurrent;

/* Create the sketches and start the propagator thread. */
int sc_conc_create(sc_concurrent **out, const sc_conc_config *cfg);
/* Stop the propagator (no flush) and free everything. NULL is a no-op. */
void sc_conc_destroy(sc_concurrent *c);
/* Flush, then stop the propagator; later writer calls return SC_ECLOSED. Idempotent. */
int sc_conc_close(sc_concurrent *c);

/* ---- writer side (see the contract above) ---- */
int sc_conc_writer_enter(sc_concurrent *c, uint32_t w);  /* SC_EFULL if w is in use */
void sc_conc_writer_exit(sc_concurrent *c, uint32_t w);
void *sc_conc_local(sc_concurrent *c, uint32_t w);       /* the local sketch to update now */
uint64_t sc_conc_hint(sc_concurrent *c, uint32_t w);     /* writer's cached hint, 0 = none */
uint64_t sc_conc_room(sc_concurrent *c, uint32_t w);     /* updates until _added propagates */
/* k updates went into sc_conc_local(c, w); propagates when the buffer is full or while eager.
 * Afterwards re-read _local, _hint and _room. */
/* Returns the first failed merge of any buffer (SC_ENOMEM) from then on, as do flush and
 * snapshot: a sketch that lost a batch is never shown as if it had not. */
int sc_conc_added(sc_concurrent *c, uint32_t w, uint64_t k);

/* ---- any thread ---- */
int sc_conc_flush(sc_concurrent *c);
int sc_conc_snapshot(sc_concurrent *c, void **out);      /* vt->copy of the global sketch */
/* Copy the last published summary words and stats; lock-free, never blocks. */
void sc_conc_summary(const sc_concurrent *c, uint64_t out[SC_CONC_SUMMARY_WORDS],
                     sc_conc_stats *stats);
uint64_t sc_conc_relaxation(const sc_concurrent *c);     /* r = 2 * N * b */
uint32_t sc_conc_writers(const sc_concurrent *c);
const sc_sketch_vtable *sc_conc_vtable(const sc_concurrent *c);

#endif
