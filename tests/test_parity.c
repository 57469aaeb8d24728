/*
 * test_parity.c — edgellm against llama.cpp on every reference model.
 *
 * For each model in reference/goldens and each case:
 *   - the prompt tokenizes to llama.cpp's prompt_tokens exactly;
 *   - the greedy continuation equals llama.cpp's tokens; where it diverges,
 *     llama.cpp's own top-1/top-2 margin at that step must be < 0.05 nats and
 *     the comparison of that case stops there;
 *   - at every compared step, the log-probabilities of llama.cpp's top-8
 *     tokens agree within 0.05 (F32/F16/BF16/Q8_0) or 0.15 (other types).
 * Prints the parity table (model × cases matched, tokens, max |Δlogprob|).
 * EL_PARITY_FILTER=substring limits the models (for debugging).
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "edgellm.h"
#include "testutil.h"


static double tolerance_for(const char *model) {
    const char *tight[] = {"-F32.", "-F16.", "-BF16.", "-Q8_0."};
    for (size_t i = 0; i < sizeof tight / sizeof tight[0]; i++)
        if (strstr(model, tight[i])) return 0.05;
    return 0.15;
}

static void log_softmax(const float *logits, int n, double *out) {
    double mx = -INFINITY;
    for (int i = 0; i < n; i++) if (logits[i] > mx) mx = logits[i];
    double sum = 0;
    for (int i = 0; i < n; i++) sum += exp((double)logits[i] - mx);
    double lse = mx + log(sum);
    for (int i = 0; i < n; i++) out[i] = (double)logits[i] - lse;
}

typedef struct { int cases, cases_ok, steps, steps_cmp, diverged_ok; double max_diff; } row_stats;

static int run_model(const char *golden_path, row_stats *rs, char *model_name, size_t name_cap) {
    char *txt = el_test_read_file(golden_path, NULL);
    if (!txt) { CHECKF(0, "cannot read %s", golden_path); return -1; }
    cJSON *root = cJSON_Parse(txt);
    free(txt);
    if (!root) { CHECKF(0, "bad JSON %s", golden_path); return -1; }
    const char *mname = cJSON_GetObjectItem(root, "model")->valuestring;
    snprintf(model_name, name_cap, "%s", mname);
    char rel[512];
    snprintf(rel, sizeof rel, "models/%s", mname);
    el_error err;
    el_model_params mp = el_model_default_params();
    mp.n_threads = 2;
    el_model *m = el_model_load(el_test_ref_path(rel), &mp, &err);
    CHECKF(m != NULL, "%s: load failed: %s", mname, err.msg);
    if (!m) { cJSON_Delete(root); return -1; }
    const double tol = tolerance_for(mname);
    const int nv = el_model_n_vocab(m);
    double *lp = malloc(sizeof(double) * (size_t)nv);
    el_session_params sp = {.n_ctx = 256, .n_batch = 0};
    el_session *s = el_session_new(m, &sp, &err);
    CHECKF(s != NULL, "%s: session: %s", mname, err.msg);
    cJSON *cases = cJSON_GetObjectItem(root, "cases");
    int ci = 0;
    cJSON *c;
    cJSON_ArrayForEach(c, cases) {
        rs->cases++;
        const char *prompt = cJSON_GetObjectItem(c, "prompt")->valuestring;
        cJSON *ptoks = cJSON_GetObjectItem(c, "prompt_tokens");
        int np = cJSON_GetArraySize(ptoks);
        int32_t *want = malloc(sizeof(int32_t) * (size_t)np), got[1024];
        for (int i = 0; i < np; i++) want[i] = cJSON_GetArrayItem(ptoks, i)->valueint;
        int ng = el_tokenize(m, prompt, strlen(prompt), got, 1024, EL_TOK_ADD_SPECIAL);
        bool tok_ok = ng == np && memcmp(got, want, sizeof(int32_t) * (size_t)np) == 0;
        CHECKF(tok_ok, "%s case %d: prompt tokenization differs (%d vs %d tokens)", mname, ci, ng, np);
        /* Evaluate llama.cpp's prompt tokens, then follow the greedy path. */
        el_session_reset(s);
        bool case_ok = tok_ok;
        if (el_session_eval(s, want, np, &err) != 0) {
            CHECKF(0, "%s case %d: eval: %s", mname, ci, err.msg);
            case_ok = false;
        }
        cJSON *steps = cJSON_GetObjectItem(c, "steps");
        int si = 0;
        cJSON *step;
        cJSON_ArrayForEach(step, steps) {
            if (!case_ok) break;
            rs->steps++;
            const float *logits = el_session_logits(s);
            log_softmax(logits, nv, lp);
            int best = 0;
            for (int i = 1; i < nv; i++) if (lp[i] > lp[best]) best = i;
            cJSON *top = cJSON_GetObjectItem(step, "top");
            int gid = cJSON_GetObjectItem(step, "id")->valueint;
            double g1 = cJSON_GetArrayItem(cJSON_GetArrayItem(top, 0), 1)->valuedouble;
            double g2 = cJSON_GetArrayItem(cJSON_GetArrayItem(top, 1), 1)->valuedouble;
            cJSON *pair;
            bool lp_ok = true;
            cJSON_ArrayForEach(pair, top) {
                int id = cJSON_GetArrayItem(pair, 0)->valueint;
                double want_lp = cJSON_GetArrayItem(pair, 1)->valuedouble;
                double d = fabs(lp[id] - want_lp);
                if (d > rs->max_diff) rs->max_diff = d;
                if (d > tol) {
                    lp_ok = false;
                    CHECKF(0, "%s case %d step %d: logprob of %d is %.4f, llama.cpp %.4f (tol %.2f)", mname, ci, si, id, lp[id],
                           want_lp, tol);
                }
            }
            rs->steps_cmp++;
            if (!lp_ok) { case_ok = false; break; }
            if (best != gid) {
                if (g1 - g2 < 0.05) { rs->diverged_ok++; break; } /* a tie in llama.cpp itself */
                CHECKF(0, "%s case %d step %d: greedy token %d, llama.cpp %d (margin %.4f)", mname, ci, si, best, gid, g1 - g2);
                case_ok = false;
                break;
            }
            int32_t t = gid;
            if (el_session_eval(s, &t, 1, &err) != 0) { CHECKF(0, "%s: eval: %s", mname, err.msg); case_ok = false; break; }
            si++;
        }
        if (case_ok) rs->cases_ok++;
        free(want);
        ci++;
    }
    free(lp);
    el_session_free(s);
    el_model_free(m);
    cJSON_Delete(root);
    return 0;
}

int main(void) {
    if (!el_test_have_ref()) el_test_skip("fixtures absent (make fixtures)");
    const char *filter = getenv("EL_PARITY_FILTER");
    char dirp[4096];
    snprintf(dirp, sizeof dirp, "%s", el_test_ref_path("goldens"));
    char *names[256];
    int n = el_test_list_json(dirp, filter, names, 256);
    CHECK(n >= 0);
    if (n < 0) return el_test_finish("test_parity");
    printf("| model | tol | cases matched | steps compared | tie-divergences | max |Δlogprob| |\n|---|---|---|---|---|---|\n");
    int total_cases = 0, total_ok = 0;
    for (int i = 0; i < n; i++) {
        char path[4096 + 64], model[256] = "?";
        snprintf(path, sizeof path, "%s/%s", dirp, names[i]);
        row_stats rs = {0};
        run_model(path, &rs, model, sizeof model);
        printf("| %s | %.2f | %d/%d | %d | %d | %.4f |\n", model, tolerance_for(model), rs.cases_ok, rs.cases, rs.steps_cmp,
               rs.diverged_ok, rs.max_diff);
        fflush(stdout);
        total_cases += rs.cases;
        total_ok += rs.cases_ok;
        free(names[i]);
    }
    printf("parity: %d/%d cases matched across %d models\n", total_ok, total_cases, n);
    CHECK(n > 0);
    return el_test_finish("test_parity");
}
