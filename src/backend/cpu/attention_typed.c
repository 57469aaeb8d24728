/*
 * attention_typed.c — attention over a KV cache of type BF16, Q8_0 or Q4_0
 * (either of K or V, the other may be F16), and storing rows into such a
 * cache. el_op_attention (attention.c) hands an el_attn_args here when
 * el_attn_is_typed says so; an F16/F16 cache never comes here. Likewise
 * el_op_kv_store_typed (attention.c) hands over the rows of a cache that is
 * not F16 (el_attn_typed_store).
 *
 * Contract: every (query, head) pair is computed in the arithmetic of
 * llama.cpp's CPU flash attention for caches that are not F16
 * (ggml_compute_forward_flash_attn_ext_f16_one_chunk, the kernel llama.cpp
 * runs for such caches at every batch size — its tiled and split-KV paths
 * are for F16/F32 caches only):
 *   - Q is converted once to K's vec_dot type with that type's CPU
 *     from_float (Q8_0 for Q8_0 and Q4_0 keys, BF16 for BF16, F16 for F16);
 *   - each visible position, in ascending order, gets the score
 *     s = vec_dot_K(k row, Q) * scale (ggml's vec_dot for K's type: the CPU
 *     kernels' for F16, BF16 and Q8_0 (kernels.h, SIMD), this file's for
 *     Q4_0, see dot_q4_0_portable);
 *   - online softmax: if s > M { M = s; ms = expf(Mold - M); scale the
 *     accumulator by ms } else vs = expf(s - M); S = S*ms + vs (fused);
 *   - V not F16: the accumulator is F32 (VKQ32): the V row is converted to
 *     float (the type's to_float, one rounding per value: q*d) and added as
 *     acc = fma(v, vs, acc) (ggml_vec_mad_f32);
 *     V F16: the accumulator is F16, as in attention.c (acc = fp16(acc*ms),
 *     acc = fp16(fma(v, vs, acc)));
 *   - out = acc * (S == 0 ? 0 : 1/S).
 * The caller (runtime/blocks.c) rotates Q, K, V and the output as
 * llama.cpp does for Q8_0/Q4_0 caches (el_kv_rot_k/v, el_op_fwht below);
 * the kernel itself sees only the rotated vectors.
 * No dequantized copy of the cache is made: K rows are dotted in place and
 * V rows are converted on the fly (x86/attention_typed_avx512.c: in
 * registers; the portable code: one row into a buffer on the stack).
 *
 * Work split: units of (query token, KV head, block of query heads sharing
 * that KV head), interleaved across the pool's threads; a unit walks its
 * visible positions once, advancing each of its heads per position, so a
 * K/V row is read once per unit. Each pair's sequence of operations is the
 * one above whatever the split, so the result does not depend on the
 * number of threads. A ring cache (a->ring > 0) holds position j in row
 * j % ring; positions are still visited in ascending order.
 */
#include <math.h>
#include <string.h>

#include <pthread.h>

#include "backend/cpu/attention_common.h"
#include "backend/cpu/attention_internal.h" /* el_att_sink */
#include "backend/cpu/attention_typed.h"
#include "backend/cpu/cpu_features.h"
#include "backend/cpu/kernel_common.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/ops.h"
#include "package/quantize.h"
#include "package/quants.h"
#include "package/quants_blocks.h"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#define TY_MAX_HPU 8 /* query heads per unit: their state lives on the stack */

static int norm_type(int t) { return t == 0 ? EL_TYPE_F16 : t; }

int el_kv_type_ok(int type, int head_dim) {
    switch (norm_type(type)) {
    case EL_TYPE_F16: return head_dim > 0;
    case EL_TYPE_BF16:
    case EL_TYPE_Q8_0:
    case EL_TYPE_Q4_0: return head_dim > 0 && head_dim % 32 == 0;
    default: return 0;
    }
}

/* ---- the rotation of a quantized cache (ops.h) ------------------------------ */

static int is_quantized(int t) { return t == EL_TYPE_Q8_0 || t == EL_TYPE_Q4_0; }

int el_kv_rot_k(int type_k, int hd) {
    if (!is_quantized(type_k) || hd <= 0 || hd % 64 != 0) return 0;
    int nrot = 64;
    while (hd % (nrot * 2) == 0) nrot *= 2;
    return nrot;
}

int el_kv_rot_v(int type_v, int hd) { return is_quantized(type_v) && hd > 0 && hd % 64 == 0 ? 64 : 0; }

EL_CPU_CLONES void el_op_fwht(float *x, int n_rows, int nrot) {
    const float scale = 1.0f / sqrtf((float)nrot);
    for (int r = 0; r < n_rows; r++, x += nrot) {
        for (int j = 0; j < nrot; j++) x[j] = x[j] * scale;
        for (int len = 1; len < nrot; len <<= 1)
            for (int i = 0; i < nrot; i += 2 * len)
                for (int j = 0; j < len; j++) {
                    const float u = x[i + j], v = x[i + len + j];
                    x[i + j] = u + v;
                    x[i + len + j] = u - v;
                }
    }
}

/* ---- storing rows ---------------------------------------------------------- */

static void store_rows(int type, void *dst, const float *x, int n, int row_len) {
    const size_t rb = el_row_size((el_type)type, row_len);
    uint8_t *d = dst;
    switch (type) {
    case EL_TYPE_Q8_0: { /* ggml's CPU from_float for Q8_0: the x86 quantize_row_q8_0 */
        const el_from_float_fn q = el_cpu_kernels(EL_TYPE_Q8_0)->quantize;
        for (int r = 0; r < n; r++) q(x + (size_t)r * row_len, d + (size_t)r * rb, row_len);
        break;
    }
    case EL_TYPE_Q4_0:
        for (int r = 0; r < n; r++) el_quantize_row_q4_0(x + (size_t)r * row_len, d + (size_t)r * rb, row_len);
        break;
    case EL_TYPE_BF16: el_quant_bf16(x, dst, (int64_t)n * row_len); break;
    default: el_quant_f16(x, dst, (int64_t)n * row_len); break;
    }
}

void el_attn_typed_store(int type, void *cache, const float *x, int n, int pos0, int row_len, int ring) {
    const size_t rb = el_row_size((el_type)type, row_len);
    uint8_t *c = cache;
    if (ring <= 0) {
        store_rows(type, c + (size_t)pos0 * rb, x, n, row_len);
        return;
    }
    const int r0 = pos0 % ring, n1 = r0 + n > ring ? ring - r0 : n; /* rows before the wrap */
    store_rows(type, c + (size_t)r0 * rb, x, n1, row_len);
    if (n1 < n) store_rows(type, c, x + (size_t)n1 * row_len, n - n1, row_len);
}

/* ---- one V row into the accumulators -------------------------------------- */

/* v32 = to_float(row) for a BF16 / Q8_0 / Q4_0 row of hd values (ggml's
 * to_float: exact for BF16, q*d rounded once for Q8_0 and (q-8)*d for Q4_0). */
EL_CPU_CLONES static void v_to_float(int type, const void *row, float *restrict v32, int hd) {
    switch (type) {
    case EL_TYPE_Q8_0: {
        const block_q8_0 *b = row;
        for (int i = 0; i < hd / 32; i++) {
            const float d = el_fp16_to_fp32(b[i].d);
            for (int j = 0; j < 32; j++) v32[i * 32 + j] = (float)b[i].qs[j] * d;
        }
        break;
    }
    case EL_TYPE_Q4_0: {
        const block_q4_0 *b = row;
        for (int i = 0; i < hd / 32; i++) {
            const float d = el_fp16_to_fp32(b[i].d);
            for (int j = 0; j < 16; j++) {
                v32[i * 32 + j] = (float)((b[i].qs[j] & 0x0F) - 8) * d;
                v32[i * 32 + j + 16] = (float)((b[i].qs[j] >> 4) - 8) * d;
            }
        }
        break;
    }
    default: { /* BF16 */
        const el_bf16 *b = row;
        for (int i = 0; i < hd; i++) v32[i] = el_bf16_to_fp32(b[i]);
        break;
    }
    }
}

/* F32 accumulator: acc *= ms when the maximum grew (ms != 1), then acc = fma(to_float(row), vs, acc). */
EL_CPU_CLONES static void vmad_portable(int type, const void *row, float *restrict acc, float ms, float vs, int hd) {
    float v32[EL_ATT_MAX_HD];
    v_to_float(type, row, v32, hd);
    if (ms != 1.0f)
        for (int i = 0; i < hd; i++) acc[i] *= ms;
    for (int i = 0; i < hd; i++) acc[i] = fmaf(v32[i], vs, acc[i]);
}

typedef void (*vmad_fn)(int type, const void *row, float *acc, float ms, float vs, int hd);

/*
 * Q4_0 keys: ggml_vec_dot_q4_0_q8_0 as llama.cpp's x86 build runs it in
 * flash attention (8 float lanes, lane l summing elements 4l..4l+3 of each
 * block as an exact integer, acc_l = fma(d_x*d_y, lane, acc_l), then
 * hsum_float_8). The CPU kernels' Q4_0 vec_dot (kernels.h) follows
 * llama.cpp's repacked weight kernels instead, whose order differs.
 */
EL_CPU_CLONES static void dot_q4_0_portable(int n, float *s, const void *vx, const void *vy) {
    const block_q4_0 *x = vx;
    const block_q8_0 *y = vy;
    float acc[8] = {0};
    for (int ib = 0; ib < n / 32; ib++) {
        const float d = el_fp16_to_fp32(x[ib].d) * el_fp16_to_fp32(y[ib].d);
        for (int l = 0; l < 8; l++) {
            int32_t q = 0;
            for (int k = 0; k < 4; k++) {
                const int e = 4 * l + k;
                const int nib = e < 16 ? x[ib].qs[e] & 0x0F : x[ib].qs[e - 16] >> 4;
                q += (nib - 8) * y[ib].qs[e];
            }
            acc[l] = fmaf(d, (float)q, acc[l]);
        }
    }
    *s = el_hsum8_x86(acc);
}

static el_vec_dot_fn dot_q4_0_for(el_cpu_level level) {
#if defined(__x86_64__)
    const el_cpu_features *f = el_cpu_features_get();
    if (level == EL_CPU_AVX512 && f->avx512f && f->avx512bw && f->avx512vl && f->avx512dq && f->avx512vnni)
        return el_attn_dot_q4_0_avx512;
#else
    (void)level;
#endif
    return dot_q4_0_portable;
}

static vmad_fn vmad_for(el_cpu_level level) {
#if defined(__x86_64__)
    const el_cpu_features *f = el_cpu_features_get();
    if (level == EL_CPU_AVX512 && f->avx512f && f->avx512bw && f->avx512vl && f->avx512dq) return el_attn_vmad_avx512;
#else
    (void)level;
#endif
    return vmad_portable;
}

/* F16 accumulator (V is F16): as attention.c's att_vpass for one row. */
EL_CPU_CLONES static void mad_f16(el_fp16 *restrict acc, const el_fp16 *restrict v, float ms, float vs, int hd) {
    if (ms != 1.0f)
        for (int i = 0; i < hd; i++) acc[i] = el_fp32_to_fp16(el_fp16_to_fp32(acc[i]) * ms);
    for (int i = 0; i < hd; i++) acc[i] = el_fp32_to_fp16(fmaf(el_fp16_to_fp32(v[i]), vs, el_fp16_to_fp32(acc[i])));
}

/* ---- the kernel ------------------------------------------------------------ */

typedef struct ty_plan {
    int hpu, n_hb, n_units;
} ty_plan;

/* Heads per unit: as many as share a KV head (each V row is then read and
 * converted once for all of them), halved until every thread has a unit. */
static void ty_plan_make(const el_attn_args *a, int nth, ty_plan *pl) {
    const int group = a->n_head / a->n_head_kv;
    int hpu = group < TY_MAX_HPU ? group : TY_MAX_HPU;
    for (;;) {
        pl->hpu = hpu;
        pl->n_hb = (group + hpu - 1) / hpu;
        pl->n_units = a->n * a->n_head_kv * pl->n_hb;
        if (pl->n_units >= nth || hpu == 1) break;
        hpu = (hpu + 1) / 2;
    }
}

typedef struct ty_ctx {
    const el_attn_args *a;
    vmad_fn vmad;
    el_vec_dot_fn dot_q4_0;
} ty_ctx;

static void ty_task(void *vctx, int ith, int nth) {
    const ty_ctx *tc = vctx;
    const el_attn_args *a = tc->a;
    const vmad_fn vmad = tc->vmad;
    const int hd = a->head_dim;
    const int tk = norm_type(a->type_k), tv = norm_type(a->type_v);
    const int group = a->n_head / a->n_head_kv;
    const el_cpu_type_kernels *kk = el_cpu_kernels((el_type)tk);
    const el_type qt = kk->vec_dot_type;
    const el_vec_dot_fn dot = tk == EL_TYPE_Q4_0 ? tc->dot_q4_0 : kk->vec_dot;
    const el_from_float_fn q_to = el_cpu_kernels(qt)->quantize;
    const size_t k_head = el_row_size((el_type)tk, hd), v_head = el_row_size((el_type)tv, hd);
    const size_t k_row = k_head * (size_t)a->n_head_kv, v_row = v_head * (size_t)a->n_head_kv;
    const float cap = a->softcap, scale = cap > 0.0f ? a->scale / cap : a->scale; /* ggml's softcap order */
    ty_plan pl;
    ty_plan_make(a, nth, &pl);

    /* per head of the unit: Q in K's vec_dot type, the accumulator, M and S */
    _Alignas(64) uint8_t qq[TY_MAX_HPU][EL_ATT_MAX_HD * 2];
    _Alignas(64) float acc32[TY_MAX_HPU][EL_ATT_MAX_HD];
    _Alignas(64) el_fp16 acc16[TY_MAX_HPU][EL_ATT_MAX_HD];
    float M[TY_MAX_HPU], S[TY_MAX_HPU];

    for (int u = ith; u < pl.n_units; u += nth) {
        const int hb = u % pl.n_hb;
        const int kvh = (u / pl.n_hb) % a->n_head_kv;
        const int t = u / (pl.n_hb * a->n_head_kv);
        const int h0 = kvh * group + hb * pl.hpu;
        const int h1 = h0 + pl.hpu < (kvh + 1) * group ? h0 + pl.hpu : (kvh + 1) * group;
        const int nh = h1 - h0;
        for (int e = 0; e < nh; e++) {
            q_to(a->q + (size_t)t * a->n_head * hd + (size_t)(h0 + e) * hd, qq[e], hd);
            if (tv == EL_TYPE_F16) memset(acc16[e], 0, sizeof(el_fp16) * (size_t)hd);
            else memset(acc32[e], 0, sizeof(float) * (size_t)hd);
            M[e] = -INFINITY;
            S[e] = 0.0f;
        }
        const int p = a->pos0 + t;
        const int lo = el_attn_lo(p, a->window);
        const uint8_t *kbase = (const uint8_t *)a->kcache + (size_t)kvh * k_head;
        const uint8_t *vbase = (const uint8_t *)a->vcache + (size_t)kvh * v_head;
        for (int j = lo; j <= p; j++) {
            const size_t r = (size_t)(a->ring > 0 ? j % a->ring : j);
            const uint8_t *krow = kbase + r * k_row, *vrow = vbase + r * v_row;
            for (int e = 0; e < nh; e++) {
                float s;
                dot(hd, &s, krow, qq[e]);
                s = s * scale;
                if (cap > 0.0f) s = cap * tanhf(s);
                float ms = 1.0f, vs = 1.0f;
                if (s > M[e]) {
                    const float Mold = M[e];
                    M[e] = s;
                    ms = expf(Mold - s);
                } else {
                    vs = expf(s - M[e]);
                }
                if (tv == EL_TYPE_F16) mad_f16(acc16[e], (const el_fp16 *)vrow, ms, vs, hd);
                else vmad(tv, vrow, acc32[e], ms, vs, hd);
                S[e] = fmaf(S[e], ms, vs); /* contracted in llama.cpp's build */
            }
        }
        for (int e = 0; e < nh; e++) {
            float *o = a->out + (size_t)t * a->n_head * hd + (size_t)(h0 + e) * hd;
            if (a->sinks) { /* the accumulator as float, the sink (ops.h), then 1/S */
                for (int i = 0; i < hd; i++) o[i] = tv == EL_TYPE_F16 ? el_fp16_to_fp32(acc16[e][i]) : acc32[e][i];
                el_att_sink(a, h0 + e, &M[e], &S[e], o, hd);
                const float inv = S[e] == 0.0f ? 0.0f : 1.0f / S[e];
                for (int i = 0; i < hd; i++) o[i] *= inv;
                continue;
            }
            const float inv = S[e] == 0.0f ? 0.0f : 1.0f / S[e];
            if (tv == EL_TYPE_F16)
                for (int i = 0; i < hd; i++) o[i] = el_fp16_to_fp32(acc16[e][i]) * inv;
            else
                for (int i = 0; i < hd; i++) o[i] = acc32[e][i] * inv;
        }
    }
}

static vmad_fn g_vmad;
static el_vec_dot_fn g_dot_q4_0;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static void init_typed(void) {
    g_vmad = vmad_for(el_cpu_kernels_level());
    g_dot_q4_0 = dot_q4_0_for(el_cpu_kernels_level());
}

void el_attn_typed(el_pool *pool, const el_attn_args *a) {
    pthread_once(&g_once, init_typed);
    ty_ctx c = {a, g_vmad, g_dot_q4_0};
    el_pool_run(pool, ty_task, &c);
}

el_cpu_level el_attn_typed_at(el_pool *pool, const el_attn_args *a, el_cpu_level level) {
    ty_ctx c = {a, vmad_for(level), dot_q4_0_for(level)};
    el_pool_run(pool, ty_task, &c);
    return c.vmad == vmad_portable && c.dot_q4_0 == dot_q4_0_portable ? EL_CPU_PORTABLE : level;
}
