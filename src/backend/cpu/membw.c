/*
 * membw.c — memory read bandwidth probe (see membw.h).
 */
#include "backend/cpu/membw.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend/cpu/threadpool.h"

typedef struct membw_job {
    uint64_t *buf;
    size_t n_words;
    int touch;                 /* 1: write the words (first touch), 0: read-sum */
    uint64_t sums[256];        /* per-thread results (kept so the loads are not dead) */
} membw_job;

static void membw_work(void *ctx, int ith, int nth) {
    membw_job *j = ctx;
    size_t per = j->n_words / (size_t)nth;
    size_t lo = per * (size_t)ith;
    size_t hi = ith == nth - 1 ? j->n_words : lo + per;
    if (j->touch) {
        uint64_t *w = j->buf;
        for (size_t i = lo; i < hi; i++) w[i] = (uint64_t)i * 0x9e3779b97f4a7c15ull;
        return;
    }
    /* Four independent accumulators so the adds do not serialise the loads. */
    const uint64_t *p = j->buf;
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    size_t i = lo;
    for (; i + 4 <= hi; i += 4) {
        s0 += p[i];
        s1 += p[i + 1];
        s2 += p[i + 2];
        s3 += p[i + 3];
    }
    for (; i < hi; i++) s0 += p[i];
    if (ith < 256) j->sums[ith] = s0 + s1 + s2 + s3;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double el_membw_read_gbs(size_t bytes, int n_threads, int passes) {
    if (n_threads <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = n > 0 ? (int)n : 1;
    }
    if (n_threads > 256) n_threads = 256;
    if (passes <= 0) passes = 5;
    size_t n_words = bytes / sizeof(uint64_t);
    if (n_words < (size_t)n_threads * 64) n_words = (size_t)n_threads * 64;

    uint64_t *buf = NULL;
    if (posix_memalign((void **)&buf, 4096, n_words * sizeof *buf) != 0) return -1.0;
    el_pool *pool = el_pool_new(n_threads);
    if (!pool) { free(buf); return -1.0; }

    membw_job *job = calloc(1, sizeof *job);
    if (!job) { el_pool_free(pool); free(buf); return -1.0; }
    job->buf = buf;
    job->n_words = n_words;

    /* Touch every page from the threads that will read it (NUMA first touch). */
    job->touch = 1;
    el_pool_run(pool, membw_work, job);
    job->touch = 0;
    el_pool_run(pool, membw_work, job); /* warm-up pass, untimed */

    double best = 0.0;
    volatile uint64_t sink = 0;
    for (int r = 0; r < passes; r++) {
        double t0 = now_s();
        el_pool_run(pool, membw_work, job);
        double dt = now_s() - t0;
        uint64_t s = 0;
        for (int t = 0; t < n_threads; t++) s += job->sums[t];
        sink += s;
        if (dt > 0) {
            double gbs = (double)(n_words * sizeof *buf) / dt * 1e-9;
            if (gbs > best) best = gbs;
        }
    }
    (void)sink;
    free(job);
    el_pool_free(pool);
    free(buf);
    return best;
}
