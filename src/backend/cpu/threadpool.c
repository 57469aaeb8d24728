/*
 * threadpool.c — see threadpool.h.
 *
 * Invariants: `gen` increases by one per job; a worker runs the job whose
 * generation it observed and then increments `done`; the caller waits for
 * done == nth - 1. Workers spin for a bounded number of iterations before
 * sleeping on `cv`, so back-to-back jobs (one per matmul) cost no syscalls.
 */
#include "backend/cpu/threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#define EL_SPIN_ITERS 4000 /* ~50-100 us of pause before sleeping or yielding */

struct el_pool {
    int n;
    pthread_t *threads;
    pthread_mutex_t run_lock; /* one job at a time */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    _Atomic unsigned gen;
    _Atomic int done;
    _Atomic int stop;
    _Atomic int sleepers;
    el_pool_fn fn;
    void *ctx;
};

typedef struct { el_pool *p; int ith; } worker_arg;

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

static void *worker_main(void *arg) {
    worker_arg wa = *(worker_arg *)arg;
    free(arg);
    el_pool *p = wa.p;
    unsigned seen = 0; /* gen is 0 until the first job, which may start before this thread does */
    for (;;) {
        int spins = 0;
        while (atomic_load_explicit(&p->gen, memory_order_acquire) == seen) {
            if (atomic_load(&p->stop)) return NULL;
            if (++spins < EL_SPIN_ITERS) { cpu_relax(); continue; }
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add(&p->sleepers, 1);
            while (atomic_load(&p->gen) == seen && !atomic_load(&p->stop))
                pthread_cond_wait(&p->cv, &p->mu);
            atomic_fetch_sub(&p->sleepers, 1);
            pthread_mutex_unlock(&p->mu);
            spins = 0;
        }
        if (atomic_load(&p->stop)) return NULL;
        seen = atomic_load(&p->gen);
        p->fn(p->ctx, wa.ith, p->n);
        atomic_fetch_add_explicit(&p->done, 1, memory_order_release);
    }
}

el_pool *el_pool_new(int n_threads) {
    if (n_threads < 1) n_threads = 1;
    el_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n = n_threads;
    pthread_mutex_init(&p->run_lock, NULL);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
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
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n; i++) pthread_join(p->threads[i], NULL);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    pthread_mutex_destroy(&p->run_lock);
    free(p->threads);
    free(p);
}

int el_pool_size(const el_pool *p) { return p->n; }

void el_pool_run(el_pool *p, el_pool_fn fn, void *ctx) {
    if (p->n == 1) { fn(ctx, 0, 1); return; }
    pthread_mutex_lock(&p->run_lock);
    p->fn = fn;
    p->ctx = ctx;
    atomic_store(&p->done, 0);
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
    if (atomic_load(&p->sleepers) > 0) pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    fn(ctx, 0, p->n);
    int spins = 0;
    while (atomic_load_explicit(&p->done, memory_order_acquire) < p->n - 1) {
        if (++spins < EL_SPIN_ITERS) cpu_relax();
        else sched_yield();
    }
    pthread_mutex_unlock(&p->run_lock);
}
