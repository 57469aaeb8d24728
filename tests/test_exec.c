/*
 * test_exec.c — the executor (src/runtime/exec.c): ops placed across two
 * backends give the bits the CPU alone gives, and the evidence says where
 * they ran.
 *
 * The second backend is a second CPU backend with buffers of its own
 * (--backend cpu,cpu): the same kernels, so any difference in the results is
 * the executor's — an operand not moved, a stale copy read, a KV cache left
 * behind. EL_CPU1_OPS limits the op kinds it takes, cutting each pass into
 * many partitions. On every reference architecture (llama, qwen2 with
 * biases, qwen3 with Q/K norms, gemma3 with sliding-window rings), with
 * prompts of 1, 9 and 150 tokens (batches of 64: several pass shapes, several
 * placements) and 16 greedy tokens after:
 *   - the tokens and the last logits row are bit-identical to the CPU alone,
 *     for three splits (everything on cpu1; matmul/attention/kv_store on cpu1;
 *     the complement), and with a Q8_0 KV cache (the rotation ops);
 *   - bytes were moved and both devices ran ops where the split says so;
 *   - speculative verification (n-gram drafts) and an embedding pass give the
 *     CPU's bits too;
 *   - el_exec_sync_host brings the caches' current rows to the host (equal to
 *     the CPU-alone session's), and after el_exec_host_wrote a generation
 *     continues from the host bytes;
 *   - the placement report (text and JSON) names the devices and counts;
 *   - a device that fails mid-pass (EL_CPU1_FAIL_AFTER): the op runs on the
 *     CPU, the device takes no more ops, the bits are still the CPU's, and
 *     the report records the fallback with its reason.
 * Bad requests: an unknown backend or preferred device is refused at load; an
 * OpenCL device that does not exist falls back to the CPU, and the report
 * says so.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "edgellm.h"
#include "runtime/model.h"
#include "runtime/exec.h"
#include "sched/spec.h"
#include "testutil.h"

#define N_GEN 16

typedef struct {
    int32_t ids[256];
    int n;
} toks_out;

static bool collect(const el_token_info *t, void *user) {
    toks_out *o = user;
    if (t->id >= 0 && o->n < 256) o->ids[o->n++] = t->id;
    return true;
}

static el_model *load(const char *path, const char *backend, bool measure, el_error *err) {
    el_backend_params bp = {.backend = backend, .measure = measure};
    el_model_params mp = el_model_default_params();
    mp.n_threads = 2;
    mp.backend = &bp;
    return el_model_load(path, &mp, err);
}

static int prompt_of(const el_model *m, int n, int32_t *out) {
    const int nv = el_model_n_vocab(m);
    for (int i = 0; i < n; i++) out[i] = (int32_t)((i * 7919 + 13) % (nv - 10)) + 5;
    return n;
}

typedef struct {
    toks_out toks;
    el_generate_stats st;
    float *logits; /* the last row after the generation */
    int n_vocab;
} run_out;

static void run_gen(el_model *m, int n_prompt, int type_kv, const el_spec_params *spec, bool copy, run_out *r) {
    el_session_params sp = el_session_default_params();
    sp.n_ctx = 512;
    sp.n_batch = 64;
    sp.type_k = sp.type_v = type_kv;
    if (spec) sp.n_draft_max = 8;
    el_error err = {0};
    el_session *s = el_session_new(m, &sp, &err);
    CHECKF(s != NULL, "session: %s", err.msg);
    if (!s) return;
    int32_t p[256];
    prompt_of(m, n_prompt, p);
    if (copy) { /* a copy-heavy prompt: the continuation repeats */
        for (int i = n_prompt / 2; i < n_prompt; i++) p[i] = p[i - n_prompt / 2];
    }
    el_generate_params gp;
    memset(&gp, 0, sizeof gp);
    gp.sampling = el_sampling_default();
    gp.sampling.temp = 0;
    gp.max_tokens = N_GEN;
    gp.ignore_eos = true;
    gp.spec = spec;
    memset(&r->toks, 0, sizeof r->toks);
    el_finish fin = el_generate(s, p, n_prompt, &gp, collect, &r->toks, &r->st, &err);
    CHECKF(fin == EL_DONE_LENGTH, "generation: finish %d (%s)", (int)fin, err.msg);
    r->n_vocab = el_model_n_vocab(m);
    r->logits = malloc(sizeof(float) * (size_t)r->n_vocab);
    memcpy(r->logits, el_session_logits(s), sizeof(float) * (size_t)r->n_vocab);
    el_session_free(s);
}

static void same(const run_out *a, const run_out *b, const char *label) {
    CHECKF(a->toks.n == b->toks.n && memcmp(a->toks.ids, b->toks.ids, sizeof(int32_t) * (size_t)a->toks.n) == 0,
           "%s: tokens differ", label);
    CHECKF(memcmp(a->logits, b->logits, sizeof(float) * (size_t)a->n_vocab) == 0, "%s: logits differ", label);
}

/* The report as JSON, parsed. */
static cJSON *report_json(el_session *s) {
    const size_t need = el_session_placement_report(s, 1, NULL, 0);
    char *buf = malloc(need + 1);
    el_session_placement_report(s, 1, buf, need + 1);
    cJSON *j = cJSON_Parse(buf);
    CHECKF(j != NULL, "report JSON does not parse: %.200s", buf);
    free(buf);
    return j;
}

static const char *const SPLITS[] = {"", "matmul,attention,kv_store", "rmsnorm,add,rope,scale,silu_mul,gelu_mul,copy,get_rows"};

static void model_case(const char *path, const char *label, int type_kv) {
    el_error err = {0};
    el_model *ref = load(path, "cpu", false, &err);
    CHECKF(ref != NULL, "%s: %s", label, err.msg);
    if (!ref) return;
    static const int lens[] = {1, 9, 150};
    run_out base[3];
    for (int i = 0; i < 3; i++) run_gen(ref, lens[i], type_kv, NULL, false, &base[i]);
    for (size_t k = 0; k < sizeof SPLITS / sizeof *SPLITS; k++) {
        setenv("EL_CPU1_OPS", SPLITS[k], 1);
        el_model *m = load(path, "cpu,cpu", false, &err);
        CHECKF(m != NULL, "%s cpu,cpu: %s", label, err.msg);
        if (!m) continue;
        for (int i = 0; i < 3; i++) {
            run_out r;
            run_gen(m, lens[i], type_kv, NULL, false, &r);
            char l[160];
            snprintf(l, sizeof l, "%s, split '%s', prompt %d", label, SPLITS[k], lens[i]);
            same(&base[i], &r, l);
            free(r.logits);
        }
        const unsigned long long on0 = m->ops_run[0], on1 = m->ops_run[1];
        CHECKF(on1 > 0, "%s split '%s': cpu1 ran no op", label, SPLITS[k]);
        if (k > 0) {
            CHECKF(on0 > 0, "%s split '%s': the cpu ran no op", label, SPLITS[k]);
            CHECKF(m->bytes_moved > 0, "%s split '%s': nothing moved", label, SPLITS[k]);
        }
        CHECKF(m->fallbacks == 0, "%s split '%s': %llu fallbacks", label, SPLITS[k], m->fallbacks);
        el_model_free(m);
    }
    unsetenv("EL_CPU1_OPS");
    for (int i = 0; i < 3; i++) free(base[i].logits);
    el_model_free(ref);
}

/* Speculative verification, embeddings, cache sync and host writes on the split model. */
static void session_paths(const char *path, const char *label) {
    el_error err = {0};
    el_model *ref = load(path, "cpu", false, &err);
    setenv("EL_CPU1_OPS", "matmul,attention,kv_store,rmsnorm", 1);
    el_model *m = load(path, "cpu,cpu", true, &err);
    unsetenv("EL_CPU1_OPS");
    CHECKF(ref && m, "%s: %s", label, err.msg);
    if (!ref || !m) { el_model_free(ref); el_model_free(m); return; }

    /* speculative greedy verification equals plain decoding on the CPU */
    run_out a, b;
    run_gen(ref, 40, 0, NULL, true, &a);
    /* drafts from a prediction: the plain output with one token changed mid-way (a rejection, a roll-back) */
    int32_t pred[N_GEN];
    memcpy(pred, a.toks.ids, sizeof pred);
    pred[N_GEN / 2] = (pred[N_GEN / 2] + 1) % el_model_n_vocab(ref);
    el_spec_params spec = {.mode = EL_SPEC_PREDICT, .n_draft_max = 4, .fixed = 1, .prediction = pred, .n_prediction = N_GEN};
    run_gen(m, 40, 0, &spec, true, &b);
    CHECKF(a.toks.n == b.toks.n && memcmp(a.toks.ids, b.toks.ids, sizeof(int32_t) * (size_t)a.toks.n) == 0,
           "%s: speculative tokens on the split differ from plain decoding", label);
    CHECKF(b.st.n_spec_rounds > 0 && b.st.n_accepted > 0, "%s: no draft verified on the split (%d rounds, %d accepted)", label,
           b.st.n_spec_rounds, b.st.n_accepted);
    free(a.logits), free(b.logits);

    /* an embedding pass */
    el_session_params sp = el_session_default_params();
    sp.n_ctx = 256, sp.n_batch = 32;
    el_session *sa = el_session_new(ref, &sp, &err), *sb = el_session_new(m, &sp, &err);
    CHECK(sa && sb);
    if (!sa || !sb) goto out;
    {
        int32_t p[70];
        prompt_of(ref, 70, p);
        const int E = ref->hp.n_embd;
        float *ea = malloc(sizeof(float) * (size_t)E), *eb = malloc(sizeof(float) * (size_t)E);
        int ra = el_embed(sa, p, 70, EL_POOLING_MEAN, ea, (size_t)E, &err);
        int rb = el_embed(sb, p, 70, EL_POOLING_MEAN, eb, (size_t)E, &err);
        CHECKF(ra == rb && ra > 0 && memcmp(ea, eb, sizeof(float) * (size_t)E) == 0, "%s: embeddings differ (%d %d)", label, ra, rb);
        free(ea), free(eb);
        el_session_reset(sa), el_session_reset(sb);

        /* caches: after a prompt on the split, sync brings the current rows home */
        CHECK(el_session_eval(sa, p, 50, &err) == 0);
        CHECK(el_session_eval(sb, p, 50, &err) == 0);
        CHECK(el_exec_sync_host(sb, &err) == 0);
        const size_t rows = 50;
        const int kv_row = ref->hp.n_head_kv * ref->hp.head_dim_k;
        int diff = 0;
        for (int il = 0; il < ref->hp.n_layer; il++) {
            size_t bytes = rows * (size_t)kv_row * 2; /* F16 rows; a sliding-window ring may hold fewer */
            const size_t cap = el_exec_tensor(sb->exec, el_t_kc(il))->bytes;
            if (bytes > cap) bytes = cap;
            if (memcmp(sa->kc[il], sb->kc[il], bytes) || memcmp(sa->vc[il], sb->vc[il], bytes)) diff++;
        }
        CHECKF(diff == 0, "%s: %d layers' caches differ on the host after el_exec_sync_host", label, diff);

        /* the host copy written behind the executor's back is what the next pass reads */
        for (int il = 0; il < ref->hp.n_layer; il++) {
            const size_t cap = el_exec_tensor(sb->exec, el_t_kc(il))->bytes;
            memset(sb->kc[il], 0, rows * (size_t)kv_row * 2 < cap ? rows * (size_t)kv_row * 2 : cap);
            el_exec_host_wrote(sb, el_t_kc(il));
        }
        const int32_t next = p[50];
        CHECK(el_session_eval(sa, &next, 1, &err) == 0);
        CHECK(el_session_eval(sb, &next, 1, &err) == 0);
        CHECKF(memcmp(el_session_logits(sa), el_session_logits(sb), sizeof(float) * (size_t)el_model_n_vocab(ref)) != 0,
               "%s: zeroed K rows on the host were not what the pass read (stale device copy used)", label);
    }
    {
        /* the report: text names both devices; JSON parses with the counts */
        char text[256];
        const size_t need = el_session_placement_report(sb, 0, text, sizeof text);
        CHECKF(need > 0 && strstr(text, "cpu1") != NULL, "report text: %s", text);
        cJSON *j = report_json(sb);
        if (j) {
            const cJSON *devs = cJSON_GetObjectItem(j, "devices");
            CHECK(cJSON_GetArraySize(devs) == 2);
            const cJSON *ops = cJSON_GetObjectItem(j, "ops_run");
            CHECK(ops && cJSON_GetObjectItem(ops, "cpu1") && cJSON_GetObjectItem(ops, "cpu1")->valuedouble > 0);
            CHECK(cJSON_GetObjectItem(j, "bytes_moved") && cJSON_GetObjectItem(j, "bytes_moved")->valuedouble > 0);
            CHECK(cJSON_IsObject(cJSON_GetObjectItem(j, "placement")));
            cJSON_Delete(j);
        }
    }
out:
    el_session_free(sa);
    el_session_free(sb);
    el_model_free(m);
    el_model_free(ref);
}

/* A device that fails mid-pass: the op runs on the CPU, the device takes no
 * more, the report records it — and the bits are still the CPU's. */
static void device_failure(const char *path) {
    el_error err = {0};
    el_model *ref = load(path, "cpu", false, &err);
    setenv("EL_CPU1_OPS", "matmul,attention,kv_store", 1);
    setenv("EL_CPU1_FAIL_AFTER", "25", 1);
    el_model *m = load(path, "cpu,cpu", true, &err);
    unsetenv("EL_CPU1_OPS");
    unsetenv("EL_CPU1_FAIL_AFTER");
    CHECKF(ref && m, "device_failure: %s", err.msg);
    if (!ref || !m) { el_model_free(ref); el_model_free(m); return; }
    run_out a, b;
    run_gen(ref, 9, 0, NULL, false, &a);
    run_gen(m, 9, 0, NULL, false, &b);
    same(&a, &b, "a device failing mid-pass");
    CHECKF(m->fallbacks == 1, "%llu run-time fallbacks (expected exactly 1: the device takes no more ops)", m->fallbacks);
    CHECKF(m->ops_run[1] == 25, "the device ran %llu ops before failing (25 expected)", m->ops_run[1]);
    /* the report says which op fell back and why */
    el_session_params sp = el_session_default_params();
    sp.n_ctx = 64;
    el_session *s = el_session_new(m, &sp, &err);
    int32_t p[3];
    prompt_of(m, 3, p);
    CHECK(s && el_session_eval(s, p, 3, &err) == 0);
    /* (the device's failure counter has run out: this session's first op there fails too) */
    static char text[1 << 17];
    el_session_placement_report(s, 0, text, sizeof text);
    CHECKF(strstr(text, "fallback:error") && strstr(text, "injected failure"), "the report does not record the failure");
    el_session_free(s);
    free(a.logits), free(b.logits);
    el_model_free(m);
    el_model_free(ref);
}

static void bad_requests(const char *path) {
    el_error err = {0};
    el_model *m = load(path, "warp-drive", false, &err);
    CHECKF(m == NULL && err.code == EL_ERR_INVALID_ARG && strstr(err.msg, "warp-drive"), "unknown backend: %s", err.msg);
    el_model_free(m);
    el_backend_params bp = {.backend = "cpu,cpu", .prefer = "npu7"};
    el_model_params mp = el_model_default_params();
    mp.backend = &bp;
    m = el_model_load(path, &mp, &err);
    CHECKF(m == NULL && err.code == EL_ERR_INVALID_ARG && strstr(err.msg, "npu7") && strstr(err.msg, "cpu1"),
           "unknown preferred device: %s", err.msg);
    el_model_free(m);
    /* an OpenCL device that does not exist: a clean CPU run, and the report says why */
    m = load(path, "opencl:63", true, &err);
    CHECKF(m != NULL, "opencl:63 should fall back to the cpu: %s", err.msg);
    if (!m) return;
    CHECK(m->n_be == 1);
    CHECKF(strstr(m->backend_note, "opencl63 unavailable") != NULL, "note: %s", m->backend_note);
    run_out r;
    run_gen(m, 5, 0, NULL, false, &r);
    free(r.logits);
    el_session_params sp = el_session_default_params();
    sp.n_ctx = 64;
    el_session *s = el_session_new(m, &sp, &err);
    int32_t p[4];
    prompt_of(m, 4, p);
    CHECK(s && el_session_eval(s, p, 4, &err) == 0);
    char text[2048];
    el_session_placement_report(s, 0, text, sizeof text);
    CHECKF(strstr(text, "opencl63 unavailable") != NULL, "the report does not say the device was missing: %s", text);
    el_session_free(s);
    el_model_free(m);
}

int main(void) {
    if (!el_test_have_ref()) el_test_skip("fixtures absent (make fixtures)");
    static const struct { const char *model; int type; } cases[] = {
        {"models/tiny-llama-Q4_K_M.gguf", 0}, {"models/tiny-llama-F16.gguf", 0}, {"models/tiny-qwen2-Q4_K_M.gguf", 0},
        {"models/tiny-qwen3-Q6_K.gguf", 0},   {"models/tiny-gemma3-Q4_K_M.gguf", 0},
        {"models/tiny-gemma3-Q8_0.gguf", EL_CACHE_Q8_0}, /* Hadamard rotation ops */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char label[128];
        snprintf(label, sizeof label, "%s%s", cases[i].model, cases[i].type ? " (q8_0 KV)" : "");
        model_case(el_test_ref_path(cases[i].model), label, cases[i].type);
    }
    session_paths(el_test_ref_path("models/tiny-gemma3-Q4_K_M.gguf"), "tiny-gemma3-Q4_K_M");
    session_paths(el_test_ref_path("models/tiny-llama-Q4_K_M.gguf"), "tiny-llama-Q4_K_M");
    device_failure(el_test_ref_path("models/tiny-llama-Q4_K_M.gguf"));
    bad_requests(el_test_ref_path("models/tiny-llama-Q4_K_M.gguf"));
    return el_test_finish("test_exec");
}
