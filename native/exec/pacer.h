/* pacer: the thread that pushes a throttled source's rows into a program when they are due.
 *
 * A source throttled to `rate` rows/s has row i due at origin + i / rate. The rows go in as
 * batches of `batch_size` rows, `burst` batches together when the first one's rows are due
 * (groups of batch_size * burst rows from row 0; a batch that crosses into the next group, as
 * a chunk that does not start on a batch boundary cuts them, waits for that group: never early)
 * (the rows due in one pacing interval, cut so that several workers run them at once), and a
 * batch's latency is measured from its push. The driver thread that took outputs, built the
 * table's frames and ran Python between pushes delayed them by up to a millisecond: the rows
 * due meanwhile then went in back to back and queued behind each other. The pacer pushes on
 * its own thread, without the interpreter, while the driver takes outputs; it sleeps until
 * the next batch is due (never spins: the workers need the cores) and wakes the driver when
 * outputs are due (sc_prog_take_due) or a job is done.
 *
 * Batches of at least EXPECT_MIN_ROWS rows, for which idle workers spin shortly before they
 * are due, are not pushed by this thread: it hands a few groups at a time to the workers
 * ARM_AHEAD_NS before the first is due (sc_prog_arm, runtime/pool.h), and from each batch's due
 * time the next idle worker pushes it and runs it. This thread takes them back (what went in
 * counts; what no worker pushed it pushes itself) when it hands over the next ones, so it
 * wakes once for those groups, while the workers wait for the next. When it pushed at the due time itself,
 * on one of the two cores of this machine, the worker spinning there for the group's second
 * batch started it 8.5 us later (p50; 43 us p90) than the first: the pacer held its core
 * until it went back to sleep. Handing over: the second starts with the first, and the run
 * takes 12 rather than 14-15 ns of CPU per row at 70% of peak.
 *
 * The schedule is a token bucket (streamcell.backends.pacing): where it fell more than
 * catchup_ns behind the clock (a stall, a pause), the origin moves forward so that no row is
 * due more than catchup_ns in the past; the source goes on at `rate`, it does not catch up.
 *
 * Jobs: rows [offset, offset + n) of an imported array (sc_arrow_hold_create /
 * sc_arrow_hold_defer), source rows seq0.. ; each batch only names its rows and the worker
 * that runs it imports them (sc_arrow_defer). At most two jobs wait (the one being pushed and
 * the next), so the driver hands the next chunk of the source over before this one ends.
 *
 * Threads: one driver thread calls everything here; the pacer thread is the program's only
 * feeder while it has jobs (sc_prog_push; a group it handed over has one feeder at a time, the
 * worker that holds it), so the driver pushes nothing itself then and calls sc_prog_finish
 * only once the pacer is idle.
 */
#ifndef SC_EXEC_PACER_H
#define SC_EXEC_PACER_H

#include <stdbool.h>

#include "arrow_bridge.h"
#include "program.h"

typedef struct sc_pacer sc_pacer;

/* Start the pacer thread for program p (started), its input schema `in` (copied) and batches
 * marked `lean` (exec.h). origin_ns is when row 0 is due (sc_now_ns's clock), at the earliest:
 * the schedule starts when the pacer takes its first job, so the first job's first row is due
 * then if origin_ns has passed. A run's setup and its source's first read are not time the
 * source fell behind: kept from an earlier origin, the schedule had pushed the rows "due"
 * meanwhile back to back (up to catchup_ns of them), and the first batches queued behind each
 * other for milliseconds. */
int sc_pacer_create(sc_pacer **out, sc_prog *p, const sc_schema *in, bool lean, double rate,
                    int64_t batch_size, int64_t burst, uint64_t origin_ns, uint64_t catchup_ns);
/* Queue a job; the pacer takes its own reference to `hold`. SC_EFULL when two jobs wait;
 * the run's error (or SC_ECLOSED) once a push failed. */
int sc_pacer_submit(sc_pacer *pc, sc_extbuf *hold, int64_t offset, int64_t n, int64_t seq0);
/* Wait up to timeout_ns for news: a job done, outputs due, an error, a halt. *pushed gets
 * the rows pushed so far (all jobs), *idle whether no job waits. Returns the first push error
 * (SC_ECLOSED when the run stopped), else SC_OK. */
int sc_pacer_wait(sc_pacer *pc, int64_t timeout_ns, int64_t *pushed, int *idle);
/* The rows pushed so far (all jobs), without waiting or taking the news; *in_flight (may be
 * NULL) the rows of the batch being pushed at that instant, or of the group handed to the
 * workers and not yet taken back, which the workers may already be running (an operator's
 * count read before this one is at most the two together). A group's rows count as pushed
 * once it is taken back: up to one group's interval after they went in. */
int64_t sc_pacer_pushed(sc_pacer *pc, int64_t *in_flight);
/* Push nothing more: the batch being pushed goes in or not, a group with the workers is taken
 * back (the batches they pushed count), the jobs are dropped; returns once the pacer thread
 * has let go of them. *pushed as above (the rows of the source that went in
 * are exactly seq0 of the first job ever queued .. + *pushed). Jobs may be queued again. */
int sc_pacer_halt(sc_pacer *pc, int64_t *pushed);
/* Halt and join the thread. */
void sc_pacer_destroy(sc_pacer *pc);

/* When the batch starting at source row `row` goes in: when the first row of its group of
 * `group` rows is due (groups count from row 0). */
static inline uint64_t sc_paced_due(uint64_t origin_ns, int64_t row, int64_t group, double rate) {
    return origin_ns + (uint64_t)((double)(row - row % group) * 1e9 / rate);
}

#endif
