/*
 * test_threadpool.c — the CPU thread pool's active-threads cap
 * (src/backend/cpu/threadpool.c, el_pool_set_active; the server's thermal
 * derating uses it).
 *
 * Asserts: a new pool is fully active; the cap clamps to 1..size; a job run
 * under a cap of k is cut into k * pieces-per-thread pieces (fn sees that
 * nth), every piece runs exactly once, and no more than k distinct threads
 * run pieces (cap 1: only the caller); raising the cap again gives the full
 * piece count back and the work is still complete; lowering and raising it
 * from another thread while jobs run loses no piece; el_pool_run_n cuts a job
 * into the pieces asked for, clamped to 1 .. active × per-thread, each run
 * once by at most that many threads; freeing a pool whose
 * workers sleep above the cap returns (no hang).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#include "backend/cpu/threadpool.h"
#include "testutil.h"

#define MAXP 4096

typedef struct job {
    _Atomic int hits[MAXP];
    _Atomic int nth_seen;
    pthread_t who[MAXP];
} job;

static void piece(void *ctx, int ith, int nth) {
    job *j = ctx;
    if (ith < MAXP) {
        atomic_fetch_add(&j->hits[ith], 1);
        j->who[ith] = pthread_self();
    }
    atomic_store(&j->nth_seen, nth);
}

/* Runs one job (el_pool_run, or el_pool_run_n with `pieces` when n); returns nth, checks every piece ran
 * once, counts the threads. */
static int run_job_n(el_pool *p, bool n, int pieces, int *n_threads_used) {
    static job j;
    memset(&j, 0, sizeof j);
    if (n) el_pool_run_n(p, piece, &j, pieces);
    else el_pool_run(p, piece, &j);
    const int nth = atomic_load(&j.nth_seen);
    int bad = 0;
    for (int i = 0; i < nth && i < MAXP; i++) bad += atomic_load(&j.hits[i]) != 1;
    CHECKF(bad == 0, "%d of %d pieces did not run exactly once", bad, nth);
    pthread_t seen[64];
    int ns = 0;
    for (int i = 0; i < nth && i < MAXP; i++) {
        int k = 0;
        while (k < ns && !pthread_equal(seen[k], j.who[i])) k++;
        if (k == ns && ns < 64) seen[ns++] = j.who[i];
    }
    *n_threads_used = ns;
    return nth;
}
static int run_job(el_pool *p, int *n_threads_used) { return run_job_n(p, false, 0, n_threads_used); }

typedef struct flipper {
    el_pool *p;
    _Atomic int stop;
} flipper;

static void *flip_main(void *arg) {
    flipper *f = arg;
    int k = 0;
    while (!atomic_load(&f->stop)) el_pool_set_active(f->p, 1 + (k++ % 4));
    return NULL;
}

int main(void) {
    el_pool *p = el_pool_new(4);
    CHECK(p != NULL);
    if (!p) return 1;
    CHECK(el_pool_size(p) == 4 && el_pool_active(p) == 4);
    int used = 0;
    const int full = run_job(p, &used);
    CHECKF(full >= 4 && full % 4 == 0 && used <= 4, "full: nth %d, threads %d", full, used);
    const int per = full / 4; /* pieces per thread */

    el_pool_set_active(p, 2);
    CHECK(el_pool_active(p) == 2);
    for (int rep = 0; rep < 50; rep++) {
        int nth = run_job(p, &used);
        CHECKF(nth == 2 * per && used <= 2, "cap 2: nth %d (want %d), threads %d", nth, 2 * per, used);
    }
    el_pool_set_active(p, 1);
    for (int rep = 0; rep < 10; rep++) {
        int nth = run_job(p, &used);
        CHECKF(nth == 1 && used == 1, "cap 1: nth %d, threads %d", nth, used);
    }
    el_pool_set_active(p, 0);
    CHECK(el_pool_active(p) == 1);
    el_pool_set_active(p, 99);
    CHECK(el_pool_active(p) == 4);
    for (int rep = 0; rep < 50; rep++) {
        int nth = run_job(p, &used);
        CHECKF(nth == full && used <= 4, "cap 4 again: nth %d, threads %d", nth, used);
    }

    /* el_pool_run_n: the job cut into the pieces asked for, clamped to 1 .. active × per; each runs once */
    {
        static const int ask[] = {1, 2, 3, 4, 5, 0, -3, 100000};
        for (size_t a = 0; a < sizeof ask / sizeof ask[0]; a++) {
            const int want = ask[a] < 1 ? 1 : ask[a] > full ? full : ask[a];
            int nth = run_job_n(p, true, ask[a], &used);
            CHECKF(nth == want && used <= want, "run_n(%d): nth %d (want %d), threads %d", ask[a], nth, want, used);
        }
        el_pool_set_active(p, 2);
        int nth = run_job_n(p, true, 8, &used);
        CHECKF(nth == 8 && used <= 2, "run_n(8) under cap 2: nth %d, threads %d", nth, used);
        nth = run_job_n(p, true, 1000, &used);
        CHECKF(nth == 2 * per, "run_n(1000) under cap 2: nth %d (want %d)", nth, 2 * per);
        el_pool_set_active(p, 4);
    }

    /* the cap changes from another thread while jobs run: every job complete */
    flipper f = {p, 0};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, flip_main, &f) == 0);
    for (int rep = 0; rep < 300; rep++) {
        int nth = run_job(p, &used);
        CHECKF(nth == 1 || nth == per * 2 || nth == per * 3 || nth == full, "flipping: nth %d", nth);
        CHECKF(used <= 4, "flipping: %d threads", used);
    }
    atomic_store(&f.stop, 1);
    pthread_join(th, NULL);

    el_pool_set_active(p, 1); /* workers asleep above the cap; free must wake and join them */
    el_pool_free(p);
    printf("%d checks, %d failures\n", el_test_checks, el_test_failures);
    return el_test_failures ? 1 : 0;
}
