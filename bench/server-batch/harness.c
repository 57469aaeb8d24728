/*
 * harness.c — batched decoding without HTTP (runtime/batch.h): K sessions of
 * one model on K threads generate greedily at once through one batcher (or
 * each alone: --no-batch, and always for K = 1), the way the server's slots
 * do, minus the server. It separates what the forward costs from what the
 * HTTP/streaming path adds, and is the program to run under perf/callgrind
 * for a k-row round against a 1-row step.
 *
 * usage: harness MODEL [-k K] [-n N] [-t THREADS] [-w WAIT_US] [-a ADMIT_US] [-r REPS] [--no-batch]
 *   K streams (default 4), N tokens each (default 48, ignore_eos), THREADS
 *   of the model's pool (default 2), WAIT_US the batcher's bound (default
 *   the batcher's; -1: none — a round starts as soon as one stream waits,
 *   as --batch-wait-us 0 does), ADMIT_US the admission window (default the
 *   batcher's; -1: off). REPS runs (default 1), one JSON line each:
 *   aggregate tok/s = tokens after each stream's first / (last token - the
 *   last stream's first token) — the decode phase with all K streams in it —
 *   inter-token latency p50/p95 over all streams, process CPU time per token,
 *   and the batcher's counters for the run (rounds, rows per round, rounds
 *   ended by the wait bound, mean submission gap, prefill chunks and those
 *   admitted ahead of a fresh round).
 * Contract: measures only; prints what it measured. Exit 1 on a load/generate error.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "edgellm.h"
#include "runtime/batch.h"

#define KMAX 32
#define NMAX 4096

static const char *PROMPTS[8] = {"Once upon a time", "The capital of France is", "def main():",
                                 "In a hole in the ground", "The weather today", "My favourite recipe is",
                                 "Dear diary,", "The quick brown fox"};

typedef struct stream {
    el_session *s;
    int32_t prompt[64];
    int n_prompt, n;
    double t[NMAX]; /* seconds, monotonic, per delivered token */
    int nt;
    el_finish fin;
    el_error err;
} stream;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}
static double cpu_s(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

static bool on_tok(const el_token_info *t, void *user) {
    stream *st = user;
    if (t->id >= 0 && st->nt < NMAX) st->t[st->nt++] = now_s();
    return true;
}

static void *run(void *arg) {
    stream *st = arg;
    el_generate_params gp;
    memset(&gp, 0, sizeof gp);
    gp.sampling = el_sampling_default();
    gp.sampling.temp = 0.0f;
    gp.max_tokens = st->n;
    gp.ignore_eos = true;
    st->nt = 0;
    st->fin = el_generate(st->s, st->prompt, st->n_prompt, &gp, on_tok, st, NULL, &st->err);
    return NULL;
}

static int cmp_d(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static double pct(double *v, int n, double q) {
    if (n <= 0) return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    int i = (int)(q * (n - 1) + 0.5);
    return v[i < 0 ? 0 : i >= n ? n - 1 : i];
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL [-k K] [-n N] [-t THREADS] [-w WAIT_US] [-a ADMIT_US] [-r REPS] [--no-batch]\n",
                argv[0]);
        return 2;
    }
    int k = 4, n = 48, th = 2, wait_us = 0, admit_us = 0, reps = 1;
    bool no_batch = false;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--no-batch")) no_batch = true;
        else if (i + 1 < argc && !strcmp(argv[i], "-k")) k = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "-n")) n = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "-t")) th = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "-w")) wait_us = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "-a")) admit_us = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "-r")) reps = atoi(argv[++i]);
        else { fprintf(stderr, "harness: unknown argument %s\n", argv[i]); return 2; }
    }
    if (k < 1 || k > KMAX || n < 2 || n > NMAX || th < 1 || reps < 1) {
        fprintf(stderr, "harness: -k 1..%d, -n 2..%d, -t >= 1, -r >= 1\n", KMAX, NMAX);
        return 2;
    }
    el_error err = {0};
    el_model_params mp = el_model_default_params();
    mp.n_threads = th;
    el_model *m = el_model_load(argv[1], &mp, &err);
    if (!m) { fprintf(stderr, "harness: %s\n", err.msg); return 1; }
    static stream ss[KMAX];
    el_session_params sp = el_session_default_params();
    sp.n_ctx = 512;
    for (int i = 0; i < k; i++) {
        ss[i].s = el_session_new(m, &sp, &err);
        if (!ss[i].s) { fprintf(stderr, "harness: %s\n", err.msg); return 1; }
        ss[i].n_prompt = el_tokenize(m, PROMPTS[i % 8], strlen(PROMPTS[i % 8]), ss[i].prompt, 64, EL_TOK_ADD_SPECIAL);
        ss[i].n = n;
    }
    el_batcher *b = NULL;
    if (k > 1 && !no_batch) {
        el_batcher_params bp = {.max_rows = k < 8 ? 8 : k, .wait_us = wait_us, .admit_us = admit_us};
        b = el_batcher_new(m, &bp, &err);
        if (!b) { fprintf(stderr, "harness: %s\n", err.msg); return 1; }
        for (int i = 0; i < k; i++)
            if (el_batcher_attach(b, ss[i].s, &err)) { fprintf(stderr, "harness: %s\n", err.msg); return 1; }
    }
    for (int r = 0; r < reps; r++) {
        for (int i = 0; i < k; i++) el_session_reset(ss[i].s);
        const el_batcher_stats s0 = el_batcher_get_stats(b);
        const double c0 = cpu_s();
        pthread_t t[KMAX];
        for (int i = 0; i < k; i++) pthread_create(&t[i], NULL, run, &ss[i]);
        for (int i = 0; i < k; i++) pthread_join(t[i], NULL);
        const double cpu = cpu_s() - c0;
        const el_batcher_stats s1 = el_batcher_get_stats(b);
        double t0 = 0, t1 = 0;
        int toks = 0, ng = 0;
        static double gaps[KMAX * NMAX];
        for (int i = 0; i < k; i++) {
            if (ss[i].fin == EL_DONE_FAILED) { fprintf(stderr, "harness: stream %d: %s\n", i, ss[i].err.msg); return 1; }
            if (ss[i].nt < 2) continue;
            if (ss[i].t[0] > t0) t0 = ss[i].t[0];
            if (ss[i].t[ss[i].nt - 1] > t1) t1 = ss[i].t[ss[i].nt - 1];
            for (int j = 1; j < ss[i].nt; j++) gaps[ng++] = (ss[i].t[j] - ss[i].t[j - 1]) * 1e3;
        }
        for (int i = 0; i < k; i++) /* tokens after the last stream's first token */
            for (int j = 0; j < ss[i].nt; j++) toks += ss[i].t[j] > t0;
        const double agg = t1 > t0 ? toks / (t1 - t0) : 0;
        const uint64_t rounds = s1.rounds - s0.rounds, rows = s1.streams - s0.streams, gn = s1.gaps - s0.gaps;
        const double p50 = pct(gaps, ng, 0.5), p95 = pct(gaps, ng, 0.95);
        printf("{\"streams\": %d, \"batched\": %s, \"n\": %d, \"threads\": %d, \"agg_tok_s\": %.2f, \"itl_p50_ms\": %.2f, "
               "\"itl_p95_ms\": %.2f, \"cpu_ms_per_tok\": %.2f, \"rounds\": %llu, \"rows_per_round\": %.2f, "
               "\"timed_rounds\": %llu, \"gap_mean_us\": %.0f, \"bound_us\": %.0f, \"chunks\": %llu, \"admitted\": %llu}\n",
               k, b ? "true" : "false", n, th, agg, p50, p95, cpu * 1e3 / (k * n), (unsigned long long)rounds,
               rounds ? (double)rows / rounds : 0.0, (unsigned long long)(s1.timed_rounds - s0.timed_rounds),
               gn ? (double)(s1.gap_ns_sum - s0.gap_ns_sum) / gn / 1e3 : 0.0, s1.bound_ns / 1e3,
               (unsigned long long)(s1.prefill_chunks - s0.prefill_chunks),
               (unsigned long long)(s1.admitted_chunks - s0.admitted_chunks));
        fflush(stdout);
    }
    for (int i = 0; i < k; i++) {
        if (b) el_batcher_detach(b, ss[i].s);
        el_session_free(ss[i].s);
    }
    el_batcher_free(b);
    el_model_free(m);
    return 0;
}
