/*
 * threadpool.h — a persistent pool of worker threads for millisecond steps.
 *
 * el_pool_run(pool, fn, ctx) calls fn(ctx, i, nth) once for every piece
 * i in [0, nth) and returns when all have finished. nth is a few pieces per
 * thread; the caller and the workers claim pieces as they become free, so a
 * descheduled worker does not stall the step. fn must not assume which thread
 * runs a piece, nor that i < n_threads (per-piece state lives on its stack).
 * Workers are created once; between jobs they spin briefly on an atomic
 * generation counter, then sleep on a condition variable. No allocation
 * happens after el_pool_new. A pool serves one caller at a time (calls are
 * serialised with a mutex), so sessions on different threads may share it.
 *
 * Active threads: el_pool_set_active(p, k) caps the threads that work on the
 * jobs started after it (the caller and workers 1..k-1; k clamped to
 * 1..el_pool_size). The other workers sleep (no spinning) until the cap
 * rises again. A job is then cut into k * pieces-per-thread pieces, so fn
 * sees nth follow the cap. Any thread may call it at any time (the server's
 * thermal derating); el_pool_run reads the cap once per job (one relaxed
 * atomic load).
 */
#ifndef EL_BACKEND_CPU_THREADPOOL_H
#define EL_BACKEND_CPU_THREADPOOL_H

typedef struct el_pool el_pool;
typedef void (*el_pool_fn)(void *ctx, int ith, int nth);

el_pool *el_pool_new(int n_threads); /* n_threads >= 1; NULL on failure */
void el_pool_free(el_pool *p);
int el_pool_size(const el_pool *p);
void el_pool_run(el_pool *p, el_pool_fn fn, void *ctx);
/* The same with the job cut into `pieces` pieces (clamped to 1 .. active × the
 * pieces per thread el_pool_run uses): fn sees nth = that count. A small job
 * whose pieces share a result (the LoRA terms of a decode step) pays for
 * every piece — a claim, a completion, the lines of its context — so one
 * piece per active thread is the cheaper cut there; pieces are still claimed
 * by whichever thread is free. */
void el_pool_run_n(el_pool *p, el_pool_fn fn, void *ctx, int pieces);
/* The threads the next jobs use (1..el_pool_size), and its setter (clamped). */
int el_pool_active(const el_pool *p);
void el_pool_set_active(el_pool *p, int n_active);

/* Splits [0, n) into nth near-equal ranges; range of thread ith. */
static inline void el_split_range(int n, int ith, int nth, int *lo, int *hi) {
    int per = n / nth, rem = n % nth;
    *lo = ith * per + (ith < rem ? ith : rem);
    *hi = *lo + per + (ith < rem ? 1 : 0);
}

#endif
