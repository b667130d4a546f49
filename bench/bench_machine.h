/* Machine and timing helpers shared by the C benchmarks (bench_sketch_concurrent.c,
 * bench_entities_work.c, bench_runtime_structures.c): wall and process CPU seconds, the busy
 * seconds of all cores (for the machine's outside load during a run), the median of doubles,
 * and busy work of a given length calibrated on the thread's CPU time.
 *
 * Everything is `static inline`, so a bench that uses only some of the helpers compiles
 * without unused-function warnings. Include it once, from the bench's .c file.
 */
#ifndef STREAMCELL_BENCH_MACHINE_H
#define STREAMCELL_BENCH_MACHINE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* wall seconds (monotonic clock) */
static inline double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* CPU seconds of this process (getrusage: user + system, all threads) */
static inline double cpu_s(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec / 1e6;
}

/* busy seconds of all cores since boot, -1 if unknown */
static inline double proc_busy(void) {
    FILE *f = fopen("/proc/stat", "r");
    if (!f) return -1;
    unsigned long long v[8] = { 0 };
    int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4],
                   &v[5], &v[6], &v[7]);
    fclose(f);
    if (n < 4) return -1;
    /* user, nice, system, irq, softirq, steal (not idle, not iowait) */
    return (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / (double)sysconf(_SC_CLK_TCK);
}

static inline int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
/* the median of v[0..n) (sorts v in place) */
static inline double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ---- spin-calibrated busy work ---- */
static double g_spins_per_ns;
/* about `ns` ns of this thread's CPU time; call calibrate() first */
static inline void busy(uint64_t ns) {
    uint64_t n = (uint64_t)((double)ns * g_spins_per_ns);
    for (volatile uint64_t i = 0; i < n; i++) {
    }
}
/* spins per ns of this thread's CPU time (not wall time: on a loaded machine a preempted
 * calibration would make every busy() too short); the fastest of 5 tries */
static inline void calibrate(void) {
    g_spins_per_ns = 1;
    double best = 0;
    for (int i = 0; i < 5; i++) {
        struct timespec a, b;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
        busy(10000000);
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
        double ns = (double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec);
        if (ns > 0 && 10000000.0 / ns > best) best = 10000000.0 / ns;
    }
    g_spins_per_ns = best;
}

#endif
