/*
 * test_gptoss.c — what gpt-oss adds (runtime/arch/gptoss.c): attention sinks
 * in every CPU attention kernel, the gpt-oss form of the MoE op, the hostile
 * files its loader refuses, and an OpenCL device's refusal of sinks.
 *
 * 1. el_op_attention with sinks against a double-precision reference of
 *    softmax([scores..., sink]) · V (the sink in the denominator only), on
 *    F16 caches through the one-row kernel (a few query rows), the tiled
 *    kernel (64+ rows), the split decode (one row over 600 positions, 2
 *    threads) and a sliding window, and on a Q8_0 cache (the typed kernel):
 *    within F16 rounding of the reference, and away from the result without
 *    sinks by far more than that (a kernel ignoring them fails).
 * 2. el_op_moe in gpt-oss's form (router bias, top-k of the logits then the
 *    softmax over the chosen, experts' gate/up/down biases, the clamped
 *    SwiGLU with values past its limit) against a double reference.
 * 3. Hostile copies of tiny-gpt-oss-F16: sliding_window 0, a missing
 *    window or expert FFN length, a head count that does not fit Q, a YaRN
 *    original context of 0, expert counts 0 / too many / not the tensors', the sinks
 *    missing or misshaped, a missing or misshaped expert bias, a missing
 *    router bias or output bias — refused at load naming the key or tensor.
 * 4. An OpenCL device (if any) refuses attention with sinks and YaRN RoPE,
 *    takes their plain forms. (YaRN's arithmetic itself is checked by
 *    test_parity: the tiny gpt-oss asks for it, and its goldens match bit for bit.)
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "backend/cpu/ops.h"
#include "backend/cpu/threadpool.h"
#include "edgellm.h"
#include "testutil.h"
#include "util/fp16.h"

static uint64_t g_rng = 0x2545f4914f6cdd1dull;
static float frand(void) { /* uniform in [-1, 1) */
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return (float)((double)(g_rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}
static float *rand_vec(size_t n, float scale) {
    float *a = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) a[i] = frand() * scale;
    return a;
}
static float r16(float x) { return el_fp16_to_fp32(el_fp32_to_fp16(x)); }

/* ---- 1. attention with sinks ------------------------------------------------ */

enum { NH = 8, NKV = 2, HD = 64 };

static void attn_case(const char *what, int n, int pos0, int window, int type, int threads) {
    const int npos = pos0 + n, kvr = NKV * HD, qr = NH * HD;
    float *kf = rand_vec((size_t)npos * kvr, 1.0f), *vf = rand_vec((size_t)npos * kvr, 1.0f);
    float *q = rand_vec((size_t)n * qr, 0.5f), *o = malloc(sizeof(float) * (size_t)n * qr);
    float *o0 = malloc(sizeof(float) * (size_t)n * qr), sinks[NH];
    const float big = 4.0f + logf((float)(npos < 16 || window > 0 ? 16 : npos)); /* outweighs the visible scores */
    for (int h = 0; h < NH; h++) sinks[h] = h % 2 ? big + frand() : -1.0f + frand();
    const size_t rb = el_row_size((el_type)type, kvr);
    void *kc = calloc((size_t)npos, rb), *vc = calloc((size_t)npos, rb);
    el_op_kv_store_typed(type, kc, kf, npos, 0, kvr, 0);
    el_op_kv_store_typed(type, vc, vf, npos, 0, kvr, 0);
    /* the reference reads the cache back as stored */
    float *kr = malloc(sizeof(float) * (size_t)npos * kvr), *vr = malloc(sizeof(float) * (size_t)npos * kvr);
    const el_type_info *ti = el_type_get((el_type)type);
    for (int j = 0; j < npos; j++) {
        ti->to_float((const uint8_t *)kc + (size_t)j * rb, kr + (size_t)j * kvr, kvr);
        ti->to_float((const uint8_t *)vc + (size_t)j * rb, vr + (size_t)j * kvr, kvr);
    }
    el_pool *pool = el_pool_new(threads);
    el_attn_args a = {.q = q, .out = o, .kcache = kc, .vcache = vc, .n = n, .pos0 = pos0, .n_head = NH, .n_head_kv = NKV,
                      .head_dim = HD, .window = window, .scale = 1.0f / 8.0f, .sinks = sinks, .type_k = type, .type_v = type};
    el_op_attention(pool, &a);
    a.out = o0, a.sinks = NULL;
    el_op_attention(pool, &a);
    double maxd = 0, maxoff = 0;
    for (int t = 0; t < n; t++) {
        const int p = pos0 + t, lo = window > 0 && p - window + 1 > 0 ? p - window + 1 : 0;
        for (int h = 0; h < NH; h++) {
            const int kvh = h / (NH / NKV);
            double qd[HD], mx = sinks[h], s[1024], den = 0, acc[HD] = {0};
            for (int i = 0; i < HD; i++) qd[i] = type == EL_TYPE_F16 ? r16(q[(size_t)t * qr + h * HD + i]) : q[(size_t)t * qr + h * HD + i];
            for (int j = lo; j <= p; j++) {
                double d = 0;
                for (int i = 0; i < HD; i++) d += qd[i] * kr[(size_t)j * kvr + kvh * HD + i];
                s[j - lo] = d / 8.0;
                if (s[j - lo] > mx) mx = s[j - lo];
            }
            den = exp(sinks[h] - mx);
            for (int j = lo; j <= p; j++) {
                const double e = exp(s[j - lo] - mx);
                den += e;
                for (int i = 0; i < HD; i++) acc[i] += e * vr[(size_t)j * kvr + kvh * HD + i];
            }
            for (int i = 0; i < HD; i++) {
                const size_t at = (size_t)t * qr + h * HD + i;
                maxd = fmax(maxd, fabs(acc[i] / den - o[at]));
                maxoff = fmax(maxoff, fabs(o0[at] - o[at]));
            }
        }
    }
    printf("  %s: max |out - ref| %.1e; without sinks the output moves by %.2f\n", what, maxd, maxoff);
    CHECKF(maxd < 4e-3, "%s: sinks attention %g from the reference", what, maxd);
    CHECKF(maxoff > 20 * maxd && maxoff > 1e-2, "%s: the sinks change little (%g)", what, maxoff);
    el_pool_free(pool);
    free(kf), free(vf), free(q), free(o), free(o0), free(kc), free(vc), free(kr), free(vr);
}

static void test_sinks(void) {
    printf("[1] attention with sinks\n");
    attn_case("one-row kernel, 5 rows at 20", 5, 20, 0, EL_TYPE_F16, 2);
    attn_case("tiled kernel, 70 rows", 70, 3, 0, EL_TYPE_F16, 2);
    attn_case("split decode, 1 row at 600, 2 threads", 1, 600, 0, EL_TYPE_F16, 2);
    attn_case("window 16, 9 rows at 40", 9, 40, 16, EL_TYPE_F16, 1);
    attn_case("Q8_0 cache, 3 rows at 30", 3, 30, 0, EL_TYPE_Q8_0, 2);
}

/* ---- 2. the MoE in gpt-oss's form --------------------------------------------- */

static el_mat f32_mat(const float *w, int64_t ne0, int64_t ne1) {
    return (el_mat){.type = EL_TYPE_F32, .ne0 = ne0, .ne1 = ne1, .data = w, .row_bytes = sizeof(float) * (size_t)ne0};
}
static void mv(const float *W, const float *x, int rows, int k, const float *b, double *y) {
    for (int r = 0; r < rows; r++) {
        double s = b ? b[r] : 0.0;
        for (int i = 0; i < k; i++) s += (double)W[(size_t)r * k + i] * x[i];
        y[r] = s;
    }
}

static void test_moe_oai(void) {
    printf("[2] el_op_moe, gpt-oss form\n");
    enum { D = 64, F = 48, NE = 8, K = 2, N = 11 };
    float *router = rand_vec((size_t)NE * D, 0.6f), *rb = rand_vec(NE, 0.5f);
    float *G = rand_vec((size_t)NE * F * D, 0.6f), *U = rand_vec((size_t)NE * F * D, 0.6f);
    float *Dn = rand_vec((size_t)NE * D * F, 0.1f), *gb = rand_vec((size_t)NE * F, 1.0f), *ub = rand_vec((size_t)NE * F, 1.0f);
    float *db = rand_vec((size_t)NE * D, 0.2f), *x = rand_vec((size_t)N * D, 2.0f), *y = malloc(sizeof(float) * N * D);
    el_moe moe = {.router = f32_mat(router, D, NE), .gate = f32_mat(G, D, F), .up = f32_mat(U, D, F), .down = f32_mat(Dn, F, D),
                  .n_expert = NE, .n_used = K, .router_b = rb, .gate_b = gb, .up_b = ub, .down_b = db,
                  .softmax_weight = true, .swiglu_oai = true};
    moe.stride_gate = moe.stride_up = sizeof(float) * (size_t)F * D;
    moe.stride_down = sizeof(float) * (size_t)D * F;
    void *scratch = NULL, *ws = NULL;
    CHECK(posix_memalign(&scratch, 64, el_moe_scratch_bytes(N, D, NE, K, F)) == 0 && posix_memalign(&ws, 64, 1 << 16) == 0);
    el_pool *pool = el_pool_new(2);
    el_op_moe(pool, &moe, x, N, y, scratch, ws);
    double maxd = 0, maxv = 0;
    int clamped = 0;
    for (int t = 0; t < N; t++) {
        const float *xt = x + (size_t)t * D;
        double l[NE], out[D] = {0};
        mv(router, xt, NE, D, rb, l);
        int id[K];
        bool used[NE] = {0};
        for (int j = 0; j < K; j++) {
            int b = -1;
            for (int e = 0; e < NE; e++)
                if (!used[e] && (b < 0 || l[e] > l[b])) b = e;
            used[b] = true, id[j] = b;
        }
        double mx = l[id[0]], s = 0, w[K];
        for (int j = 0; j < K; j++) s += w[j] = exp(l[id[j]] - mx);
        for (int j = 0; j < K; j++) {
            const int e = id[j];
            double g[F], u[F], dn[D];
            float h[F];
            mv(G + (size_t)e * F * D, xt, F, D, gb + (size_t)e * F, g);
            mv(U + (size_t)e * F * D, xt, F, D, ub + (size_t)e * F, u);
            for (int i = 0; i < F; i++) {
                clamped += g[i] > 7.0 || fabs(u[i]) > 7.0;
                const double gg = fmin(g[i], 7.0), uu = fmax(-7.0, fmin(u[i], 7.0));
                h[i] = (float)(gg / (1.0 + exp(-1.702 * gg)) * (uu + 1.0));
            }
            mv(Dn + (size_t)e * D * F, h, D, F, db + (size_t)e * D, dn);
            for (int c = 0; c < D; c++) out[c] += w[j] / s * dn[c];
        }
        for (int c = 0; c < D; c++) {
            maxd = fmax(maxd, fabs(out[c] - y[(size_t)t * D + c]));
            maxv = fmax(maxv, fabs(out[c]));
        }
    }
    printf("  %d experts, %d used, %d rows (%d gate/up values past the clamp): max |y - ref| %.2e (max |y| %.2f)\n", NE, K,
           N, clamped, maxd, maxv);
    CHECK(clamped > 0);
    CHECKF(maxd < 1e-4 * (maxv > 1 ? maxv : 1), "gpt-oss moe: max difference %g from the reference", maxd);
    el_pool_free(pool);
    free(router), free(rb), free(G), free(U), free(Dn), free(gb), free(ub), free(db), free(x), free(y), free(scratch), free(ws);
}

/* ---- 3. hostile files ------------------------------------------------------- */

#define P_U32 EL_TEST_PATCH_U32
#define P_NAME EL_TEST_PATCH_NAME
#define P_NE EL_TEST_PATCH_NE
typedef struct {
    el_test_patch_kind kind;
    const char *name; /* key or tensor */
    uint64_t v;       /* P_U32: the value; P_NE: (dim << 32) | value */
    el_status code;
    const char *says;
} hostile;

static bool write_hostile(const char *model, const hostile *h, const char *path) {
    size_t len = 0;
    char *buf = el_test_read_file(el_test_ref_path(model), &len);
    if (!buf) return false;
    const bool ok = el_test_gguf_patch(buf, len, h->kind, h->name, h->v) && el_test_write_file(path, buf, len);
    free(buf);
    return ok;
}

static void test_hostile(void) {
    printf("[3] hostile gpt-oss files\n");
    const char *model = "models/tiny-gpt-oss-F16.gguf";
    char path[] = "/tmp/el_test_gptoss_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return;
    close(fd);
    const hostile cases[] = {
        {P_U32, "gpt-oss.attention.sliding_window", 0, EL_ERR_BAD_VALUE, "gpt-oss.attention.sliding_window"},
        {P_NAME, "gpt-oss.attention.sliding_window", 0, EL_ERR_MISSING, "gpt-oss.attention.sliding_window"},
        {P_NAME, "gpt-oss.expert_feed_forward_length", 0, EL_ERR_MISSING, "gpt-oss.expert_feed_forward_length"},
        {P_U32, "gpt-oss.expert_count", 0, EL_ERR_BAD_VALUE, "gpt-oss.expert_count"},
        {P_U32, "gpt-oss.expert_count", 1u << 20, EL_ERR_BAD_VALUE, "gpt-oss.expert_count"},
        {P_U32, "gpt-oss.expert_count", 16, EL_ERR_BAD_TENSOR, "blk.0.ffn_gate_inp.bias"},
        {P_U32, "gpt-oss.expert_used_count", 9, EL_ERR_BAD_VALUE, "gpt-oss.expert_used_count"},
        {P_U32, "gpt-oss.expert_used_count", 0, EL_ERR_BAD_VALUE, "gpt-oss.expert_used_count"},
        {P_U32, "gpt-oss.expert_feed_forward_length", 128, EL_ERR_BAD_TENSOR, "blk.0.ffn_gate_exps.bias"},
        {P_U32, "gpt-oss.attention.head_count", 4, EL_ERR_BAD_TENSOR, "blk.0.attn_q.weight"},
        {P_U32, "gpt-oss.rope.scaling.original_context_length", 0, EL_ERR_BAD_VALUE,
         "gpt-oss.rope.scaling.original_context_length"},
        {P_NAME, "blk.2.attn_sinks.weight", 0, EL_ERR_MISSING, "blk.2.attn_sinks.weight"},
        {P_NE, "blk.1.attn_sinks.weight", 4, EL_ERR_BAD_TENSOR, "blk.1.attn_sinks.weight"},
        {P_NAME, "blk.0.attn_output.bias", 0, EL_ERR_MISSING, "blk.0.attn_output.bias"},
        {P_NAME, "blk.3.ffn_gate_inp.bias", 0, EL_ERR_MISSING, "blk.3.ffn_gate_inp.bias"},
        {P_NAME, "blk.1.ffn_up_exps.bias", 0, EL_ERR_MISSING, "blk.1.ffn_up_exps.bias"},
        {P_NE, "blk.2.ffn_down_exps.bias", (1ull << 32) | 4, EL_ERR_BAD_TENSOR, "blk.2.ffn_down_exps.bias"},
        {P_NAME, "blk.0.post_attention_norm.weight", 0, EL_ERR_MISSING, "blk.0.post_attention_norm.weight"},
        {P_NE, "blk.3.ffn_gate_exps.weight", (2ull << 32) | 4, EL_ERR_BAD_TENSOR, "blk.3.ffn_gate_exps.weight"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const hostile *h = &cases[i];
        if (!write_hostile(model, h, path)) continue;
        char what[160];
        if (h->kind == P_U32) snprintf(what, sizeof what, "%s = %llu", h->name, (unsigned long long)h->v);
        else if (h->kind == P_NE) snprintf(what, sizeof what, "%s ne[%u] = %u", h->name, (unsigned)(h->v >> 32), (unsigned)h->v);
        else snprintf(what, sizeof what, "no %s", h->name);
        el_model_params mp = el_model_default_params();
        mp.n_threads = 1;
        el_error err = {EL_OK, ""};
        el_model *m = el_model_load(path, &mp, &err);
        printf("  %s: %s \"%s\"\n", what, el_status_name(err.code), err.msg);
        CHECKF(m == NULL && err.code == h->code && strstr(err.msg, h->says), "%s: %s (%s), expected %s naming '%s'", what,
               m ? "loaded" : el_status_name(err.code), err.msg, el_status_name(h->code), h->says);
        el_model_free(m);
    }
    unlink(path);
}

/* ---- 4. OpenCL ------------------------------------------------------------------- */

static void test_opencl_refuses(void) {
    printf("[4] an OpenCL device refuses attention with sinks\n");
    if (el_backend_opencl_count() <= 0) {
        printf("  no OpenCL device: skipped\n");
        return;
    }
    el_error err;
    el_backend *be = el_backend_opencl_new(0, &err);
    if (!be) {
        printf("  OpenCL device 0 unavailable (%s): skipped\n", err.msg);
        return;
    }
    static const float sinks[4] = {1, 2, 3, 4};
    el_op at = {.kind = EL_OPK_ATTENTION, .n = 1, .d = 256};
    at.p.attn.a = (el_attn_args){.n = 1, .n_head = 4, .n_head_kv = 1, .head_dim = 64, .scale = 1.0f,
                                 .type_k = EL_TYPE_F16, .type_v = EL_TYPE_F16};
    CHECKF(be->i->supports(be, &at), "opencl: plain attention refused");
    at.p.attn.a.sinks = sinks;
    CHECKF(!be->i->supports(be, &at), "opencl: attention with sinks accepted");
    el_op ro = {.kind = EL_OPK_ROPE, .n = 1, .d = 256};
    ro.p.rope.rope = (el_rope){.mode = EL_ROPE_NEOX, .n_rot = 64, .freq_base = 10000.0f, .freq_scale = 0.25f};
    ro.p.rope.n_heads = 4, ro.p.rope.head_dim = 64;
    CHECKF(be->i->supports(be, &ro), "opencl: plain rope refused");
    ro.p.rope.rope.ext_factor = 1.0f, ro.p.rope.rope.corr_hi = 13.0f;
    CHECKF(!be->i->supports(be, &ro), "opencl: YaRN rope accepted");
    el_op mo = {.kind = EL_OPK_MOE, .n = 1, .d = 256};
    CHECKF(!be->i->supports(be, &mo), "opencl: the MoE op accepted");
    printf("  %s: attention with sinks, YaRN rope and the MoE op refused (the CPU runs them)\n", be->caps.name);
    el_backend_free(be);
}

int main(void) {
    test_sinks();
    test_moe_oai();
    test_opencl_refuses();
    if (!el_test_have_ref()) el_test_skip("fixtures absent (make fixtures): model tests skipped");
    test_hostile();
    return el_test_finish("test_gptoss");
}
