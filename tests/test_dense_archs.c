/*
 * test_dense_archs.c — the dense architectures added after llama/qwen/gemma3
 * (granite, smollm3, olmo2, phi3, gemma2): what their loaders refuse, and the
 * kernel parameters they brought (attention soft-capping, the RoPE magnitude
 * scale), which every backend must honour or refuse.
 *
 *   1. bad metadata: each new key's out-of-range value (a scale of 0, a cap
 *      <= 0 or NaN, a window or original context of 0 ...) patched into a
 *      copy of the tiny reference model is refused at load with
 *      EL_ERR_BAD_VALUE naming the key and the value;
 *   2. bad tensors: a missing tensor (its name patched) or a misshaped one
 *      (a dimension patched smaller) is refused naming the tensor;
 *   3. the CPU attention kernels with a soft-cap (one-row, tiled and the
 *      Q8_0-cache kernel) against a double-precision reference, and
 *      different from the uncapped result (so the cap is really applied);
 *      the RoPE magnitude scale multiplies the rotated pairs;
 *   4. an OpenCL device (PoCL here) refuses the ops whose new parameters it
 *      has no kernel for — attention with a soft-cap, a soft-capping scale,
 *      RoPE with a magnitude scale — and keeps taking the plain ones (skips
 *      that part without a device);
 *   5. phi3 chooses its long-RoPE factors by the context as llama.cpp pads
 *      it (a multiple of 256).
 * Parity of the five with llama.cpp is test_parity's (their goldens).
 * Parts 1–2 skip (77) without the reference fixtures; under CI=true a
 * missing fixture fails.
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
#include "package/gguf.h"
#include "testutil.h"
#include "util/fp16.h"

/* ---- patching a copy of a reference model ---- */

static char g_tmp[] = "/tmp/el_test_dense_XXXXXX";

/* The bytes of a model with its metadata value `key` (4 bytes: f32 or u32) replaced. */
static char *patched_kv(const char *model, const char *key, const void *val, size_t *len) {
    char rel[256];
    snprintf(rel, sizeof rel, "models/%s", model);
    char *buf = el_test_read_file(el_test_ref_path(rel), len);
    el_error err;
    el_gguf *g = el_gguf_open(el_test_ref_path(rel), &err);
    const el_gguf_kv *kv = g ? el_gguf_find(g, key) : NULL;
    const bool ok = buf && kv && (kv->type == EL_GGUF_FLOAT32 || kv->type == EL_GGUF_UINT32);
    CHECKF(ok, "%s: no 4-byte key %s", model, key);
    if (ok) memcpy(buf + (kv->data - el_gguf_base(g)), val, 4);
    el_gguf_close(g);
    if (!ok) { free(buf); return NULL; }
    return buf;
}

/* The offset just past tensor `name`'s name in the header (its u64 length, then the bytes). */
static size_t tensor_info_at(const char *buf, size_t len, const char *name) {
    const size_t nl = strlen(name);
    for (size_t i = 8; i + nl + 4 <= len; i++) {
        uint64_t l;
        memcpy(&l, buf + i - 8, 8);
        if (l == nl && memcmp(buf + i, name, nl) == 0) return i + nl;
    }
    return 0;
}

typedef struct {
    const char *model, *key;
    float f;        /* the value (f32 keys) */
    uint32_t u;     /* the value (u32 keys, when is_u32) */
    bool is_u32;
    const char *shown; /* how the message prints it */
} bad_kv;

static void test_bad_metadata(void) {
    printf("[1] out-of-range values of the new keys\n");
    const bad_kv cases[] = {
        {"tiny-granite-F16.gguf", "granite.logit_scale", 0.0f, 0, false, "= 0 "},
        {"tiny-granite-F16.gguf", "granite.logit_scale", NAN, 0, false, "nan"},
        {"tiny-granite-F16.gguf", "granite.logit_scale", -2.0f, 0, false, "-2"},
        {"tiny-granite-F16.gguf", "granite.residual_scale", 0.0f, 0, false, "= 0 "},
        {"tiny-granite-F16.gguf", "granite.embedding_scale", -1.0f, 0, false, "-1"},
        {"tiny-granite-F16.gguf", "granite.embedding_scale", INFINITY, 0, false, "inf"},
        {"tiny-granite-F16.gguf", "granite.attention.scale", 0.0f, 0, false, "= 0 "},
        {"tiny-granite-F16.gguf", "granite.attention.scale", NAN, 0, false, "nan"},
        {"tiny-gemma2-F16.gguf", "gemma2.attn_logit_softcapping", 0.0f, 0, false, "= 0 "},
        {"tiny-gemma2-F16.gguf", "gemma2.attn_logit_softcapping", -1.0f, 0, false, "-1"},
        {"tiny-gemma2-F16.gguf", "gemma2.attn_logit_softcapping", NAN, 0, false, "nan"},
        {"tiny-gemma2-F16.gguf", "gemma2.final_logit_softcapping", 0.0f, 0, false, "= 0 "},
        {"tiny-gemma2-F16.gguf", "gemma2.final_logit_softcapping", INFINITY, 0, false, "inf"},
        {"tiny-gemma2-F16.gguf", "gemma2.attention.sliding_window", 0, 0, true, "= 0 "},
        {"tiny-phi3-F16.gguf", "phi3.rope.scaling.attn_factor", 0.0f, 0, false, "= 0 "},
        {"tiny-phi3-F16.gguf", "phi3.rope.scaling.attn_factor", NAN, 0, false, "nan"},
        {"tiny-phi3-F16.gguf", "phi3.rope.scaling.original_context_length", 0, 0, true, "= 0 "},
        {"tiny-olmo2-F16.gguf", "olmo2.attention.layer_norm_rms_epsilon", NAN, 0, false, "nan"},
        {"tiny-smollm3-F16.gguf", "smollm3.rope.freq_base", 0.0f, 0, false, "= 0 "},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const bad_kv *c = &cases[i];
        size_t len;
        char *buf = patched_kv(c->model, c->key, c->is_u32 ? (const void *)&c->u : (const void *)&c->f, &len);
        if (!buf) continue;
        el_error err = el_test_load_bytes(g_tmp, buf, len);
        free(buf);
        printf("  %s: %s \"%s\"\n", c->key, el_status_name(err.code), err.msg);
        CHECKF(err.code == EL_ERR_BAD_VALUE && strstr(err.msg, c->key) && strstr(err.msg, c->shown),
               "%s (%s): want a bad-value error naming it, got %s: %s", c->key, c->shown, el_status_name(err.code), err.msg);
    }
}

typedef struct {
    const char *model, *tensor;
    int dim;          /* < 0: rename the tensor (it goes missing); else: ne[dim] = ne */
    uint64_t ne;
    el_status want;
} bad_tensor;

static void test_bad_tensors(void) {
    printf("[2] missing and misshaped tensors\n");
    const bad_tensor cases[] = {
        {"tiny-phi3-F16.gguf", "blk.1.attn_qkv.weight", -1, 0, EL_ERR_MISSING},
        {"tiny-phi3-F16.gguf", "blk.1.attn_qkv.weight", 1, 511, EL_ERR_BAD_TENSOR},
        {"tiny-phi3-F16.gguf", "blk.2.ffn_up.weight", 1, 768, EL_ERR_BAD_TENSOR},
        {"tiny-phi3-F16.gguf", "rope_factors_short.weight", -1, 0, EL_ERR_MISSING},
        {"tiny-phi3-F16.gguf", "rope_factors_long.weight", 0, 8, EL_ERR_BAD_TENSOR},
        {"tiny-olmo2-F16.gguf", "blk.0.attn_k_norm.weight", 0, 32, EL_ERR_BAD_TENSOR},
        {"tiny-olmo2-F16.gguf", "blk.0.attn_q_norm.weight", 0, 32, EL_ERR_BAD_TENSOR},
        {"tiny-olmo2-F16.gguf", "blk.3.post_ffw_norm.weight", -1, 0, EL_ERR_MISSING},
        {"tiny-olmo2-F16.gguf", "output.weight", -1, 0, EL_ERR_MISSING},
        {"tiny-gemma2-F16.gguf", "blk.5.post_attention_norm.weight", -1, 0, EL_ERR_MISSING},
        {"tiny-gemma2-F16.gguf", "blk.4.post_ffw_norm.weight", 0, 128, EL_ERR_BAD_TENSOR},
        {"tiny-granite-F16.gguf", "blk.0.ffn_gate.weight", -1, 0, EL_ERR_MISSING},
        {"tiny-smollm3-F16.gguf", "blk.7.attn_k.weight", 1, 96, EL_ERR_BAD_TENSOR},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const bad_tensor *c = &cases[i];
        char rel[256];
        snprintf(rel, sizeof rel, "models/%s", c->model);
        size_t len;
        char *buf = el_test_read_file(el_test_ref_path(rel), &len);
        const size_t at = buf ? tensor_info_at(buf, len, c->tensor) : 0;
        CHECKF(at > 0, "%s: no tensor %s", c->model, c->tensor);
        if (!at) { free(buf); continue; }
        if (c->dim < 0) buf[at - 2] = '~'; /* "blk.1.attn_qkv.weig~t": the name is gone */
        else memcpy(buf + at + 4 + 8 * (size_t)c->dim, &c->ne, 8);
        el_error err = el_test_load_bytes(g_tmp, buf, len);
        free(buf);
        printf("  %s %s: %s \"%s\"\n", c->tensor, c->dim < 0 ? "missing" : "misshaped", el_status_name(err.code), err.msg);
        CHECKF(err.code == c->want && strstr(err.msg, c->tensor), "%s: want %s naming it, got %s: %s", c->tensor,
               el_status_name(c->want), el_status_name(err.code), err.msg);
    }
}

/* ---- the kernels' new parameters ---- */

static uint64_t g_rng = 88172645463325252ull;
static float frand(void) {
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return (float)((g_rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

/* softmax(cap·tanh(q·k·scale/cap)) · V in double, from the cache as stored (F16 rows) */
static void ref_attention(const el_attn_args *a, const float *kf, const float *vf, float *out) {
    const int hd = a->head_dim, kvr = a->n_head_kv * hd, group = a->n_head / a->n_head_kv;
    for (int t = 0; t < a->n; t++)
        for (int h = 0; h < a->n_head; h++) {
            const int p = a->pos0 + t, kvh = h / group;
            const float *q = a->q + ((size_t)t * a->n_head + h) * hd;
            double s[512], mx = -INFINITY, sum = 0;
            for (int j = 0; j <= p; j++) {
                double d = 0;
                for (int i = 0; i < hd; i++) d += (double)q[i] * kf[(size_t)j * kvr + kvh * hd + i];
                d *= a->scale;
                if (a->softcap > 0) d = a->softcap * tanh(d / a->softcap);
                s[j] = d;
                if (d > mx) mx = d;
            }
            for (int j = 0; j <= p; j++) sum += s[j] = exp(s[j] - mx);
            for (int i = 0; i < hd; i++) {
                double o = 0;
                for (int j = 0; j <= p; j++) o += s[j] * vf[(size_t)j * kvr + kvh * hd + i];
                out[((size_t)t * a->n_head + h) * hd + i] = (float)(o / sum);
            }
        }
}

static void test_softcap_kernels(el_pool *pool) {
    printf("[3] attention soft-capping in the CPU kernels\n");
    enum { HD = 64, NH = 4, NKV = 2, NPOS = 96 };
    const int kvr = NKV * HD;
    float *kf = malloc(sizeof(float) * NPOS * kvr), *vf = malloc(sizeof(float) * NPOS * kvr);
    float *q = malloc(sizeof(float) * NPOS * NH * HD);
    float *o = malloc(sizeof(float) * NPOS * NH * HD), *o0 = malloc(sizeof(float) * NPOS * NH * HD);
    float *r = malloc(sizeof(float) * NPOS * NH * HD);
    void *kc = malloc(4 * (size_t)NPOS * kvr), *vc = malloc(4 * (size_t)NPOS * kvr);
    for (int i = 0; i < NPOS * kvr; i++) kf[i] = 2.0f * frand(), vf[i] = frand();
    for (int i = 0; i < NPOS * NH * HD; i++) q[i] = 2.0f * frand();
    const struct { int type, n, pos0; const char *what; } cases[] = {
        {EL_TYPE_F16, 3, 20, "F16 cache, one-row kernel"},
        {EL_TYPE_F16, 70, 0, "F16 cache, tiled kernel (70 rows)"},
        {EL_TYPE_Q8_0, 3, 40, "Q8_0 cache"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        const int type = cases[c].type, n = cases[c].n, pos0 = cases[c].pos0;
        el_op_kv_store_typed(type, kc, kf, pos0 + n, 0, kvr, 0);
        el_op_kv_store_typed(type, vc, vf, pos0 + n, 0, kvr, 0);
        el_attn_args a = {.q = q, .out = o, .kcache = kc, .vcache = vc, .n = n, .pos0 = pos0, .n_head = NH,
                          .n_head_kv = NKV, .head_dim = HD, .scale = 0.125f, .softcap = 1.5f, .type_k = type, .type_v = type};
        el_op_attention(pool, &a);
        el_attn_args a0 = a;
        a0.softcap = 0.0f, a0.out = o0;
        el_op_attention(pool, &a0);
        ref_attention(&a, kf, vf, r);
        double d = 0, d0 = 0;
        for (int i = 0; i < n * NH * HD; i++) {
            d = fmax(d, fabs((double)o[i] - r[i]));
            d0 = fmax(d0, fabs((double)o0[i] - r[i]));
        }
        printf("  %-34s max |capped - reference| %.2e, uncapped vs it %.2e\n", cases[c].what, d, d0);
        CHECKF(d < 2e-2, "%s: soft-capped attention off the reference by %g", cases[c].what, d);
        CHECKF(d0 > 10 * d, "%s: the cap changes nothing (%g vs %g)", cases[c].what, d0, d);
    }
    /* RoPE: mscale multiplies the rotated pairs (ggml's cos·mscale, sin·mscale), leaves the rest */
    float x[HD], y[HD], cs[HD];
    for (int i = 0; i < HD; i++) x[i] = y[i] = frand();
    el_rope rp = {.mode = EL_ROPE_NEOX, .n_rot = 32, .freq_base = 10000.0f, .freq_scale = 1.0f};
    el_op_rope(x, 1, HD, 7, &rp, cs);
    rp.mscale = 1.25f;
    el_op_rope(y, 1, HD, 7, &rp, cs);
    double dr = 0;
    for (int i = 0; i < 32; i++) dr = fmax(dr, fabs((double)y[i] - 1.25 * x[i]));
    CHECKF(dr < 1e-5, "rope mscale: rotated dims off by %g", dr);
    CHECK(memcmp(x + 32, y + 32, sizeof(float) * (HD - 32)) == 0);
    printf("  rope mscale 1.25: rotated pairs scaled (max |d| %.1e), the rest untouched\n", dr);
    free(kf), free(vf), free(q), free(o), free(o0), free(r), free(kc), free(vc);
}

static void test_opencl_refuses(void) {
    printf("[4] an OpenCL device refuses what it has no kernel for\n");
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
    el_op at = {.kind = EL_OPK_ATTENTION, .n = 1, .d = 256};
    at.p.attn.a = (el_attn_args){.n = 1, .n_head = 4, .n_head_kv = 1, .head_dim = 64, .scale = 1.0f,
                                 .type_k = EL_TYPE_F16, .type_v = EL_TYPE_F16};
    CHECKF(be->i->supports(be, &at), "opencl: plain attention refused");
    at.p.attn.a.softcap = 50.0f;
    CHECKF(!be->i->supports(be, &at), "opencl: attention with a soft-cap accepted");
    el_op sc = {.kind = EL_OPK_SCALE, .n = 1, .d = 16};
    sc.p.scale.s = 0.5f, sc.p.scale.count = 16;
    CHECKF(be->i->supports(be, &sc), "opencl: plain scale refused");
    sc.p.scale.cap = 30.0f;
    CHECKF(!be->i->supports(be, &sc), "opencl: soft-capping scale accepted");
    el_op ro = {.kind = EL_OPK_ROPE, .n = 1, .d = 256};
    ro.p.rope.rope = (el_rope){.mode = EL_ROPE_NEOX, .n_rot = 64, .freq_base = 10000.0f, .freq_scale = 1.0f};
    ro.p.rope.n_heads = 4, ro.p.rope.head_dim = 64;
    CHECKF(be->i->supports(be, &ro), "opencl: plain rope refused");
    ro.p.rope.rope.mscale = 1.2f;
    CHECKF(!be->i->supports(be, &ro), "opencl: rope with a magnitude scale accepted");
    printf("  %s: soft-capped attention, soft-capping scale, scaled rope refused; their plain forms taken\n", be->caps.name);
    el_backend_free(be);
}

/* Phi-3 picks its RoPE factors by the context as llama.cpp pads it (a multiple of 256): a
 * 64-position session past the fixture's original 128 takes the long ones, as a 256 one does. */
static void test_phi3_factor_choice(void) {
    printf("[5] phi3: long/short RoPE factors by the padded context\n");
    el_error err = {0};
    el_model_params mp = el_model_default_params();
    mp.n_threads = 2;
    el_model *m = el_model_load(el_test_ref_path("models/tiny-phi3-F16.gguf"), &mp, &err);
    CHECKF(m != NULL, "tiny-phi3: %s", err.msg);
    if (!m) return;
    const int32_t toks[8] = {1, 1551, 346, 2501, 263, 931, 727, 471};
    const int nv = el_model_n_vocab(m);
    float *lg[2] = {malloc(sizeof(float) * (size_t)nv), malloc(sizeof(float) * (size_t)nv)};
    const int ctx[2] = {64, 256};
    for (int i = 0; i < 2; i++) {
        el_session_params sp = el_session_default_params();
        sp.n_ctx = ctx[i];
        el_session *s = el_session_new(m, &sp, &err);
        CHECKF(s && el_session_eval(s, toks, 8, &err) == 0, "phi3 n_ctx %d: %s", ctx[i], err.msg);
        if (s) memcpy(lg[i], el_session_logits(s), sizeof(float) * (size_t)nv);
        el_session_free(s);
    }
    CHECKF(memcmp(lg[0], lg[1], sizeof(float) * (size_t)nv) == 0, "phi3: n_ctx 64 and 256 (both padded to 256 > 128) differ");
    printf("  n_ctx 64 and 256: the same logits (the long factors in both, as llama.cpp)\n");
    free(lg[0]), free(lg[1]);
    el_model_free(m);
}

int main(void) {
    el_pool *pool = el_pool_new(2);
    test_softcap_kernels(pool);
    el_pool_free(pool);
    test_opencl_refuses();
    if (!el_test_have_ref()) {
        el_test_skip("reference fixtures missing (make fixtures): the loader checks were not run");
        return el_test_finish("test_dense_archs");
    }
    int fd = mkstemp(g_tmp);
    CHECK(fd >= 0);
    if (fd >= 0) {
        close(fd);
        test_bad_metadata();
        test_bad_tensors();
        unlink(g_tmp);
    }
    test_phi3_factor_choice();
    return el_test_finish("test_dense_archs");
}
