/*
 * test_parity_long.c — edgellm against llama.cpp on the tiny reference
 * models with prompts of ~64 to ~600 tokens (the shared goldens stop at 52).
 *
 * Goldens: tests/data/tiny-long/<model>.json, made by
 * tests/tools/gen_tiny_goldens.py (`make goldens`) with the llama.cpp build
 * recorded in each file; the models come from reference/models.
 * For each prompt: the tokenization must equal llama.cpp's; the greedy
 * continuation (24 steps) is followed while it equals llama.cpp's; a
 * divergence is accepted where llama.cpp's top-1/top-2 margin is < 0.05 or
 * one of its own variants (flash attention off, n_ubatch 32, one thread,
 * tiled K-quant matmul off, both) picks edgellm's
 * token, and the case stops there; at every matched step the log-probability
 * of llama.cpp's token must agree within the case's tolerance, max(0.05,
 * llama.cpp's own spread on that prompt between its default and variants).
 * Prints model × case: tokens, steps matched, max |Δlogprob|, spread.
 * EL_PARITY_FILTER=substring limits the models.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "edgellm.h"
#include "testutil.h"

#define MARGIN_OK 0.05
#define MAX_TOKS 1024


static double logprob_of(const float *x, int n, int id, int *best) {
    int b = 0;
    for (int i = 1; i < n; i++) if (x[i] > x[b]) b = i;
    double mx = x[b], sum = 0;
    for (int i = 0; i < n; i++) sum += exp((double)x[i] - mx);
    *best = b;
    return (double)x[id] - mx - log(sum);
}

static void run_model(const char *golden_path) {
    char *txt = el_test_read_file(golden_path, NULL);
    CHECKF(txt != NULL, "cannot read %s", golden_path);
    if (!txt) return;
    cJSON *root = cJSON_Parse(txt);
    free(txt);
    CHECKF(root != NULL, "bad JSON %s", golden_path);
    if (!root) return;
    const char *mname = cJSON_GetStringValue(cJSON_GetObjectItem(root, "model"));
    char rel[512];
    snprintf(rel, sizeof rel, "models/%s", mname ? mname : "?");
    el_error err = {0};
    el_model_params mp = el_model_default_params();
    mp.n_threads = 2;
    el_model *m = el_model_load(el_test_ref_path(rel), &mp, &err);
    CHECKF(m != NULL, "%s: load failed: %s", mname, err.msg);
    if (!m) { cJSON_Delete(root); return; }
    const int nv = el_model_n_vocab(m);
    el_session_params sp = el_session_default_params();
    sp.n_ctx = 1024;
    el_session *s = el_session_new(m, &sp, &err);
    CHECKF(s != NULL, "%s: session: %s", mname, err.msg);
    cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(root, "cases")) {
        if (!s) break;
        const char *cname = cJSON_GetStringValue(cJSON_GetObjectItem(c, "name"));
        const char *prompt = cJSON_GetStringValue(cJSON_GetObjectItem(c, "prompt"));
        const double tol = cJSON_GetObjectItem(c, "tolerance")->valuedouble;
        const double spread = cJSON_GetObjectItem(c, "spread")->valuedouble;
        static int32_t want[MAX_TOKS], got[MAX_TOKS];
        int np = 0;
        cJSON *e;
        cJSON_ArrayForEach(e, cJSON_GetObjectItem(c, "prompt_tokens")) if (np < MAX_TOKS) want[np++] = e->valueint;
        int ng = el_tokenize(m, prompt, strlen(prompt), got, MAX_TOKS, EL_TOK_ADD_SPECIAL);
        CHECKF(ng == np && memcmp(got, want, sizeof(int32_t) * (size_t)np) == 0,
               "%s %s: prompt tokenization differs (%d vs %d tokens)", mname, cname, ng, np);
        el_session_reset(s);
        if (el_session_eval(s, want, np, &err) != 0) {
            CHECKF(0, "%s %s: eval: %s", mname, cname, err.msg);
            continue;
        }
        cJSON *steps = cJSON_GetObjectItem(c, "steps");
        int n_steps = cJSON_GetArraySize(steps), matched = 0;
        double max_d = 0;
        const char *how = "all equal";
        for (int i = 0; i < n_steps; i++) {
            cJSON *st = cJSON_GetArrayItem(steps, i);
            int gid = cJSON_GetArrayItem(st, 0)->valueint, best;
            double glp = cJSON_GetArrayItem(st, 1)->valuedouble, margin = cJSON_GetArrayItem(st, 2)->valuedouble;
            double lp = logprob_of(el_session_logits(s), nv, gid, &best);
            if (best != gid) {
                bool variant = false;
                for (int v = 4; v < cJSON_GetArraySize(st); v++) variant |= cJSON_GetArrayItem(st, v)->valueint == best;
                CHECKF(margin < MARGIN_OK || variant,
                       "%s %s step %d: greedy token %d, llama.cpp %d (margin %.4f; no variant picks %d)", mname, cname, i,
                       best, gid, margin, best);
                how = margin < MARGIN_OK ? "tie" : "as a variant";
                break;
            }
            double d = fabs(lp - glp);
            CHECKF(d <= tol, "%s %s step %d: logprob %.4f, llama.cpp %.4f (tolerance %.4f)", mname, cname, i, lp, glp,
                   tol);
            if (d > max_d) max_d = d;
            matched++;
            int32_t t = gid;
            if (el_session_eval(s, &t, 1, &err) != 0) {
                CHECKF(0, "%s: eval: %s", mname, err.msg);
                break;
            }
        }
        printf("| %s | %s | %d | %d/%d %s | %.4f | %.4f | %.4f |\n", mname, cname, np, matched, n_steps, how, max_d,
               spread, tol);
        fflush(stdout);
    }
    el_session_free(s);
    el_model_free(m);
    cJSON_Delete(root);
}

int main(void) {
    if (!el_test_have_ref()) el_test_skip("fixtures absent (make fixtures)");
    const char *filter = getenv("EL_PARITY_FILTER");
    const char *dirp = EL_SOURCE_DIR "/tests/data/tiny-long";
    char *names[256];
    int n = el_test_list_json(dirp, filter, names, 256);
    CHECKF(n >= 0, "no goldens in %s", dirp);
    if (n < 0) return el_test_finish("test_parity_long");
    printf("| model | prompt | tokens | steps matched | max |Δlogprob| | llama.cpp spread | tolerance |\n"
           "|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dirp, names[i]);
        run_model(path);
        free(names[i]);
    }
    CHECK(n > 0);
    return el_test_finish("test_parity_long");
}
