/*
 * spec_util.h — what test_spec.c (n-gram and predicted drafts) and
 * test_spec_draft.c (a draft model) share. Each test is one executable
 * (tests/test_X.c + tests/testutil.c), so everything here is static: include
 * it from one test file, after testutil.h's CHECK macros are wanted.
 *
 * - gen_out / collect: a generation's token ids (up to 512); cancel_at > 0
 *   cancels the session once that many tokens have come.
 * - COPY_PROMPT (copies itself: drafts get accepted) and PLAIN_PROMPT.
 * - spec_generate: one el_generate with the given sampling temperature, seed,
 *   ignore_eos and spec (NULL: plain decoding); err NULL prints a failure's
 *   message on stderr, else the caller reads it there.
 * - spec_load: a model with 2 threads, one CHECKF that it loaded.
 * - spec_plain_turns: plain greedy decoding's two turns, the references a
 *   speculative run is compared with.
 * - same_ids: two generations gave the same tokens.
 * - chi2_crit / two_sample_chi2: the upper 0.1% point of chi-square, and
 *   the two-sample statistic of two histograms.
 */
#ifndef EL_TEST_SPEC_UTIL_H
#define EL_TEST_SPEC_UTIL_H
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "edgellm.h"
#include "testutil.h"

typedef struct { int32_t ids[512]; int n; int cancel_at; el_session *s; } gen_out;

static inline bool collect(const el_token_info *t, void *user) {
    gen_out *g = user;
    if (t->id >= 0 && g->n < 512) g->ids[g->n++] = t->id;
    if (g->cancel_at > 0 && g->n == g->cancel_at) el_session_cancel(g->s);
    return true;
}

static const char *const COPY_PROMPT =
    "Rename the variables to snake_case and keep the code otherwise the same.\n\n"
    "def computeTotal(itemList, taxRate):\n    subTotal = 0\n    for itemEntry in itemList:\n"
    "        subTotal += itemEntry.unitPrice * itemEntry.quantity\n    return subTotal * (1 + taxRate)\n\n"
    "Renamed:\n\ndef compute_total(item_list, tax_rate):\n";
static const char *const PLAIN_PROMPT = "The history of the lighthouse begins with";

static inline el_finish spec_generate(el_session *s, const int32_t *p, int n, const el_spec_params *spec, int max_tokens,
                                      float temp, uint64_t seed, bool ignore_eos, gen_out *out, el_generate_stats *st,
                                      el_error *err) {
    el_generate_params gp;
    memset(&gp, 0, sizeof gp);
    gp.sampling = el_sampling_default();
    gp.sampling.temp = temp;
    gp.sampling.seed = seed;
    gp.max_tokens = max_tokens;
    gp.ignore_eos = ignore_eos;
    gp.spec = spec;
    el_error e = {0};
    if (!err) err = &e;
    out->n = 0;
    out->s = s;
    el_finish f = el_generate(s, p, n, &gp, collect, out, st, err);
    if (f == EL_DONE_FAILED && err == &e) fprintf(stderr, "  el_generate: %s\n", e.msg);
    return f;
}

/* The model at path with 2 threads; NULL (and a failed check naming label) if it does not load. */
static inline el_model *spec_load(const char *path, const char *label) {
    el_error err = {0};
    el_model_params mp = el_model_default_params();
    mp.n_threads = 2;
    el_model *m = el_model_load(path, &mp, &err);
    CHECKF(m != NULL, "%s: %s", label, err.msg);
    return m;
}

/* Plain greedy decoding on session a (reset first): toks[0..n) for max_tokens into ref, then a
 * second turn, "\nAgain:" (its tokens in more[0..*nm)), for 24 tokens into ref2. Returns a's
 * n_past after the first turn. */
static inline int spec_plain_turns(el_session *a, const el_model *m, const int32_t *toks, int n, int max_tokens,
                                   gen_out *ref, gen_out *ref2, int32_t more[8], int *nm) {
    el_generate_stats st;
    el_session_reset(a);
    spec_generate(a, toks, n, NULL, max_tokens, 0.0f, 1, false, ref, &st, NULL);
    const int past = el_session_n_past(a);
    *nm = el_tokenize(m, "\nAgain:", 7, more, 8, 0);
    spec_generate(a, more, *nm, NULL, 24, 0.0f, 1, false, ref2, &st, NULL);
    return past;
}

static inline bool same_ids(const gen_out *got, const gen_out *ref) {
    return got->n == ref->n && memcmp(got->ids, ref->ids, sizeof(int32_t) * (size_t)ref->n) == 0;
}

/* Upper 0.1% point of chi-square with d degrees of freedom (Wilson-Hilferty). */
static inline double chi2_crit(int d) {
    const double z = 3.09, a = 2.0 / (9.0 * d);
    return d * pow(1 - a + z * sqrt(a), 3);
}

/* Two-sample chi-square of the histograms a and b over n bins (0 when either is NULL); bins with
 * fewer than 10 draws in both together are left out, *bins is how many were counted. */
static inline double two_sample_chi2(const long *a, const long *b, int n, int *bins) {
    double chi = 0;
    *bins = 0;
    for (int i = 0; a && b && i < n; i++) {
        const double tot = (double)(a[i] + b[i]);
        if (tot < 10) continue;
        chi += ((double)a[i] - (double)b[i]) * ((double)a[i] - (double)b[i]) / tot;
        (*bins)++;
    }
    return chi;
}

#endif
