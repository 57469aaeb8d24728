/*
 * threadpool.c — see threadpool.h.
 *
 * A job is cut into n_chunks = n_threads * EL_POOL_CHUNKS pieces, fn(ctx, c,
 * n_chunks) for c = 0 .. n_chunks-1, and whichever thread is running claims
 * the next piece. So a worker the OS has descheduled (other processes on the
 * cores, a phone's big.LITTLE scheduler) delays a step by at most the piece it
 * holds: the caller takes the rest instead of waiting for a time slice.
 *
 * The claim word packs (generation, next piece, piece count) in 64 bits, so a
 * thread that looked at an old job can never claim a piece of a newer one
 * with stale parameters: a claim is one compare-and-swap on the whole word,
 * and fn/ctx are read only after a successful claim (the caller does not
 * publish the next job before every piece of this one is done).
 *
 * Workers spin on the word for a bounded time between jobs (back-to-back jobs
 * of a decode step cost no syscalls), then sleep on a condition variable.
 *
 * The active cap (el_pool_set_active): el_pool_run reads it once per job and
 * cuts the job into active * EL_POOL_CHUNKS pieces; a worker whose index is
 * at or above the cap takes no piece and sleeps on its own condition
 * variable (act_cv) until the cap covers it again. A worker that sees the
 * cap drop while it looks at a job may still claim that job's pieces: that
 * is safe (claims are per job) and lasts one job.
 */
#include "backend/cpu/threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#define EL_SPIN_ITERS 4000 /* ~50-100 us of pause before sleeping or yielding */
#define EL_POOL_CHUNKS 4   /* pieces per thread */

struct el_pool {
    int n;
    pthread_t *threads;
    pthread_mutex_t run_lock; /* one job at a time */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    _Atomic uint64_t word; /* gen:32 | next:16 | count:16 */
    _Atomic int done;      /* pieces finished of the current job */
    _Atomic int stop;
    _Atomic int sleepers;
    _Atomic int active;    /* threads that work on new jobs (el_pool_set_active) */
    pthread_cond_t act_cv; /* workers above the cap sleep here */
    el_pool_fn fn;
    void *ctx;
};

typedef struct { el_pool *p; int ith; } worker_arg;

static inline uint32_t w_gen(uint64_t w) { return (uint32_t)(w >> 32); }
static inline int w_next(uint64_t w) { return (int)((w >> 16) & 0xFFFF); }
static inline int w_count(uint64_t w) { return (int)(w & 0xFFFF); }

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

/* Claims and runs pieces of job `gen` until none is left. */
static void run_pieces(el_pool *p, uint32_t gen) {
    uint64_t w = atomic_load_explicit(&p->word, memory_order_acquire);
    for (;;) {
        if (w_gen(w) != gen || w_next(w) >= w_count(w)) return;
        if (!atomic_compare_exchange_weak_explicit(&p->word, &w, w + (1u << 16), memory_order_acq_rel,
                                                   memory_order_acquire))
            continue; /* w reloaded */
        p->fn(p->ctx, w_next(w), w_count(w));
        atomic_fetch_add_explicit(&p->done, 1, memory_order_release);
        w = atomic_load_explicit(&p->word, memory_order_acquire);
    }
}

static void *worker_main(void *arg) {
    worker_arg wa = *(worker_arg *)arg;
    free(arg);
    el_pool *p = wa.p;
    uint32_t seen = 0; /* gen is 0 until the first job, which may start before this thread does */
    for (;;) {
        if (wa.ith >= atomic_load_explicit(&p->active, memory_order_relaxed)) { /* above the cap: sleep */
            pthread_mutex_lock(&p->mu);
            while (wa.ith >= atomic_load(&p->active) && !atomic_load(&p->stop)) pthread_cond_wait(&p->act_cv, &p->mu);
            pthread_mutex_unlock(&p->mu);
            if (atomic_load(&p->stop)) return NULL;
            seen = w_gen(atomic_load_explicit(&p->word, memory_order_acquire)); /* from the next job on */
            continue;
        }
        int spins = 0;
        while (w_gen(atomic_load_explicit(&p->word, memory_order_acquire)) == seen) {
            if (atomic_load_explicit(&p->stop, memory_order_relaxed)) return NULL;
            if (++spins < EL_SPIN_ITERS) { cpu_relax(); continue; }
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add(&p->sleepers, 1);
            while (w_gen(atomic_load(&p->word)) == seen && !atomic_load(&p->stop))
                pthread_cond_wait(&p->cv, &p->mu);
            atomic_fetch_sub(&p->sleepers, 1);
            pthread_mutex_unlock(&p->mu);
            spins = 0;
        }
        if (atomic_load(&p->stop)) return NULL;
        seen = w_gen(atomic_load_explicit(&p->word, memory_order_acquire));
        if (wa.ith < atomic_load_explicit(&p->active, memory_order_relaxed)) run_pieces(p, seen);
    }
}

el_pool *el_pool_new(int n_threads) {
    if (n_threads < 1) n_threads = 1;
    if (n_threads > 0xFFFF / EL_POOL_CHUNKS) n_threads = 0xFFFF / EL_POOL_CHUNKS;
    el_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n = n_threads;
    atomic_init(&p->active, n_threads);
    pthread_mutex_init(&p->run_lock, NULL);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    pthread_cond_init(&p->act_cv, NULL);
    p->threads = calloc((size_t)n_threads, sizeof(pthread_t));
    if (!p->threads) { free(p); return NULL; }
    for (int i = 1; i < n_threads; i++) {
        worker_arg *wa = malloc(sizeof *wa);
        if (!wa) { p->n = i; el_pool_free(p); return NULL; }
        wa->p = p;
        wa->ith = i;
        if (pthread_create(&p->threads[i], NULL, worker_main, wa) != 0) {
            free(wa);
            p->n = i;
            el_pool_free(p);
            return NULL;
        }
    }
    return p;
}

void el_pool_free(el_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->stop, 1);
    pthread_cond_broadcast(&p->cv);
    pthread_cond_broadcast(&p->act_cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n; i++) pthread_join(p->threads[i], NULL);
    pthread_cond_destroy(&p->cv);
    pthread_cond_destroy(&p->act_cv);
    pthread_mutex_destroy(&p->mu);
    pthread_mutex_destroy(&p->run_lock);
    free(p->threads);
    free(p);
}

int el_pool_size(const el_pool *p) { return p->n; }

int el_pool_active(const el_pool *p) { return atomic_load_explicit(&((el_pool *)p)->active, memory_order_relaxed); }

void el_pool_set_active(el_pool *p, int n_active) {
    if (n_active < 1) n_active = 1;
    if (n_active > p->n) n_active = p->n;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->active, n_active);
    pthread_cond_broadcast(&p->act_cv);
    pthread_mutex_unlock(&p->mu);
}

void el_pool_run(el_pool *p, el_pool_fn fn, void *ctx) { el_pool_run_n(p, fn, ctx, 0xFFFF); }

void el_pool_run_n(el_pool *p, el_pool_fn fn, void *ctx, int pieces) {
    const int act = atomic_load_explicit(&p->active, memory_order_relaxed);
    if (act == 1 || pieces <= 1) { fn(ctx, 0, 1); return; }
    pthread_mutex_lock(&p->run_lock);
    const int count = pieces < act * EL_POOL_CHUNKS ? pieces : act * EL_POOL_CHUNKS;
    p->fn = fn;
    p->ctx = ctx;
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    const uint32_t gen = w_gen(atomic_load(&p->word)) + 1;
    /* seq_cst store then load, paired with the worker's sleepers++ then re-check: no lost wake-up */
    atomic_store(&p->word, ((uint64_t)gen << 32) | (uint64_t)count);
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
    run_pieces(p, gen);
    int spins = 0;
    while (atomic_load_explicit(&p->done, memory_order_acquire) < count) {
        if (++spins < EL_SPIN_ITERS) cpu_relax();
        else sched_yield();
    }
    pthread_mutex_unlock(&p->run_lock);
}
