/*
 * kernels_portable.c — portable C dot products, one per weight type, against
 * the weight type's vec_dot_type (see kernels.h).
 *
 * Numerics reproduce llama.cpp's x86 (AVX2/AVX-512) build bit for bit: the
 * integer parts are exact, and the float operations (FMA, lane layout,
 * horizontal-sum order) are those of the path llama.cpp runs for each type,
 * described above each kernel.
 *
 * Each block is first unpacked into plain int8 quants (64-bit SWAR for the
 * 32-element formats, constant-trip loops for the K-quants), then dotted with
 * the int8 activations in plain loops over restrict pointers, which GCC and
 * Clang auto-vectorize (checked with -fopt-info-vec at -O3 -march=native).
 * FP contraction is off: FMAs are explicit fmaf() calls.
 */
#include <math.h>
#include <string.h>

#include "backend/cpu/kernel_common.h"
#include "backend/cpu/kernels_kquants.h"
#include "backend/cpu/kernels_portable.h"
#include "package/quants.h"
#include "package/quants_blocks.h"
#include "util/fp16.h"

/* No FMA contraction: clang honours the pragma; GCC does not contract in ISO
 * C mode (-std=c17, as the build uses); -ffp-contract=off makes it explicit. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif


/* ---------------------------------------------------------------- float */

/*
 * The float dot products follow ggml's AVX-512 vec_dot (the one-token path):
 * F32/F16 keep 4 accumulators of 16 lanes over steps of 64 elements
 * (acc = fma(x, y, acc)), add them as (a0+a2)+(a1+a3) and reduce the 16 lanes
 * as _mm512_reduce_add_ps does; BF16 keeps 2 accumulators of 16 lanes, each
 * lane adding the odd then the even product of its bf16 pair (vdpbf16ps).
 * Leftover elements go through F16/BF16's double sum or F32's float sum.
 */

/* _mm512_reduce_add_ps: 256-bit halves, 128-bit halves, then pairs. */
static inline float reduce16_x86(const float *v) {
    float a[8], b[4];
    for (int i = 0; i < 8; ++i) a[i] = v[i + 8] + v[i];
    for (int i = 0; i < 4; ++i) b[i] = a[i + 4] + a[i];
    return (b[0] + b[2]) + (b[1] + b[3]);
}

/* GGML_F32x16_REDUCE of 4 accumulators of 16 lanes. */
static inline float reduce4x16_x86(float acc[4][16]) {
    float v[16];
    for (int l = 0; l < 16; ++l) v[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);
    return reduce16_x86(v);
}

EL_CPU_CLONES static void vec_dot_f32(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const float *restrict x = vx;
    const float *restrict y = vy;
    float acc[4][16] = {{0}};
    const int np = n & ~63;
    for (int i = 0; i < np; i += 64)
        for (int j = 0; j < 4; ++j)
            for (int l = 0; l < 16; ++l) acc[j][l] = fmaf(x[i + 16 * j + l], y[i + 16 * j + l], acc[j][l]);
    float sumf = reduce4x16_x86(acc);
    for (int i = np; i < n; ++i) sumf += x[i] * y[i];
    *s = sumf;
}

EL_CPU_CLONES static void vec_dot_f16(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const el_fp16 *restrict x = vx;
    const el_fp16 *restrict y = vy;
    float acc[4][16] = {{0}};
    const int np = n & ~63;
    for (int i = 0; i < np; i += 64)
        for (int j = 0; j < 4; ++j)
            for (int l = 0; l < 16; ++l)
                acc[j][l] = fmaf(el_fp16_to_fp32(x[i + 16 * j + l]), el_fp16_to_fp32(y[i + 16 * j + l]), acc[j][l]);
    double sumf = (double)reduce4x16_x86(acc);
    for (int i = np; i < n; ++i) sumf += (double)(el_fp16_to_fp32(x[i]) * el_fp16_to_fp32(y[i]));
    *s = (float)sumf;
}

EL_CPU_CLONES static void vec_dot_bf16(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const el_bf16 *restrict x = vx;
    const el_bf16 *restrict y = vy;
    float c[2][16] = {{0}};
    int i = 0;
    for (; i + 64 <= n; i += 64)
        for (int h = 0; h < 2; ++h)
            for (int l = 0; l < 16; ++l) {
                const int e = i + 32 * h + 2 * l;
                /* bf16 products are exact in float: only the two adds round */
                c[h][l] += el_bf16_to_fp32(x[e + 1]) * el_bf16_to_fp32(y[e + 1]);
                c[h][l] += el_bf16_to_fp32(x[e]) * el_bf16_to_fp32(y[e]);
            }
    double sumf = (double)reduce16_x86(c[0]);
    sumf += (double)reduce16_x86(c[1]);
    for (; i < n; ++i) sumf += (double)(el_bf16_to_fp32(x[i]) * el_bf16_to_fp32(y[i]));
    *s = (float)sumf;
}

/*
 * Batched F32/F16/BF16 products in llamafile tinyBLAS's order (what
 * llama.cpp's x86 build runs when a product has >= 2 activation rows and k
 * is a multiple of 16, or 32 for BF16): one 16-lane accumulator per output,
 * fused multiply-adds (BF16: the odd then the even product of each pair, as
 * vdpbf16ps does), then the 16-lane reduction.
 */
EL_CPU_CLONES static void vec_dot_f32_tinyblas(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const float *restrict x = vx;
    const float *restrict y = vy;
    float c[16] = {0};
    for (int i = 0; i < n; i += 16)
        for (int l = 0; l < 16; ++l) c[l] = fmaf(x[i + l], y[i + l], c[l]);
    *s = reduce16_x86(c);
}

EL_CPU_CLONES static void vec_dot_f16_tinyblas(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const el_fp16 *restrict x = vx;
    const el_fp16 *restrict y = vy;
    float c[16] = {0};
    for (int i = 0; i < n; i += 16)
        for (int l = 0; l < 16; ++l) c[l] = fmaf(el_fp16_to_fp32(x[i + l]), el_fp16_to_fp32(y[i + l]), c[l]);
    *s = reduce16_x86(c);
}

EL_CPU_CLONES static void vec_dot_bf16_tinyblas(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const el_bf16 *restrict x = vx;
    const el_bf16 *restrict y = vy;
    float c[16] = {0};
    for (int i = 0; i < n; i += 32)
        for (int l = 0; l < 16; ++l) {
            c[l] += el_bf16_to_fp32(x[i + 2 * l + 1]) * el_bf16_to_fp32(y[i + 2 * l + 1]);
            c[l] += el_bf16_to_fp32(x[i + 2 * l]) * el_bf16_to_fp32(y[i + 2 * l]);
        }
    *s = reduce16_x86(c);
}

static el_vec_dot_fn select_f32(int n_rows, int row, int k) { (void)row; return n_rows >= 2 && k % 16 == 0 ? vec_dot_f32_tinyblas : NULL; }
static el_vec_dot_fn select_f16(int n_rows, int row, int k) { (void)row; return n_rows >= 2 && k % 16 == 0 ? vec_dot_f16_tinyblas : NULL; }
static el_vec_dot_fn select_bf16(int n_rows, int row, int k) { (void)row; return n_rows >= 2 && k % 32 == 0 ? vec_dot_bf16_tinyblas : NULL; }

/* ---------------------------------------------------------------- legacy (32) */

/*
 * Unpacking is done with 64-bit SWAR (little-endian byte order, as every
 * block format) so that no compiler turns it into byte-wise shuffles; the
 * 32-element integer dot products are plain loops the vectorizers handle.
 */


/* 8 bits -> 8 bytes, byte k = 0x10 if bit k is set (the 5th bit of Q5_0/Q5_1). */
static inline uint64_t bits_to_x10(uint32_t b) {
    const uint64_t y = ((uint64_t)(b & 0xFF) * 0x0101010101010101ull) & 0x8040201008040201ull;
    return ((y + 0x7F7F7F7F7F7F7F7Full) & 0x8080808080808080ull) >> 3;
}

/* 16 bytes of nibbles + 32 high bits -> 32 values 0..31. */
static inline void unpack_5bit(const uint8_t *restrict q, uint32_t qh, uint8_t *restrict a) {
    const uint64_t v0 = load_u64(q), v1 = load_u64(q + 8);
    store_u64(a + 0, (v0 & LO4) | bits_to_x10(qh));
    store_u64(a + 8, (v1 & LO4) | bits_to_x10(qh >> 8));
    store_u64(a + 16, ((v0 >> 4) & LO4) | bits_to_x10(qh >> 16));
    store_u64(a + 24, ((v1 >> 4) & LO4) | bits_to_x10(qh >> 24));
}

/* sum over 32 elements of (a[j] - off) * q[j]. */
static inline int32_t dot32_u(const uint8_t *restrict a, const int8_t *restrict q, int off) {
    int32_t sum = 0;
    for (int j = 0; j < 32; ++j) sum += (a[j] - off) * q[j];
    return sum;
}


/*
 * llama.cpp's x86 build runs Q4_0 and IQ4_NL weights (rows a multiple of 8)
 * through its repacked 8x8 GEMV/GEMM kernels: one float accumulator per
 * output, acc = fma((float)block_sum, d_w * d_a, acc), block by block.
 */
EL_CPU_CLONES static void vec_dot_q4_0_q8_0(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q4_0 *restrict x = vx;
    const block_q8_0 *restrict y = vy;
    const int nb = n / EL_QK8_0;
    float acc = 0.0f;
    for (int ib = 0; ib < nb; ++ib) {
        uint8_t a[EL_QK8_0];
        unpack_nibbles16(x[ib].qs, a);
        const int32_t sumi = dot32_u(a, y[ib].qs, 8);
        acc = fmaf((float)sumi, el_fp16_to_fp32(x[ib].d) * el_fp16_to_fp32(y[ib].d), acc);
    }
    *s = acc;
}

static inline uint32_t load_u32le(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The 8 lane sums of llama.cpp's AVX2 kernels: lane l holds the integer dot
 * product of elements 4l..4l+3 of a 32-element block. */
static inline void lanes8_u(const uint8_t *restrict a, const int8_t *restrict q, int off, int32_t *restrict out) {
    for (int l = 0; l < 8; ++l) {
        int32_t t = 0;
        for (int k = 0; k < 4; ++k) t += (a[4 * l + k] - off) * q[4 * l + k];
        out[l] = t;
    }
}

/* Q5_0 (vec_dot for one token, tinyBLAS_Q0_AVX for batches: same order):
 * acc[l] = fma(d_w * d_a, lane_l, acc[l]); x86 horizontal sum. */
EL_CPU_CLONES static void vec_dot_q5_0_q8_0(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q5_0 *restrict x = vx;
    const block_q8_0 *restrict y = vy;
    const int nb = n / EL_QK8_0;
    float acc[8] = {0};
    for (int ib = 0; ib < nb; ++ib) {
        uint8_t a[EL_QK8_0];
        int32_t q[8];
        unpack_5bit(x[ib].qs, load_u32le(x[ib].qh), a);
        lanes8_u(a, y[ib].qs, 16, q);
        const float d = el_fp16_to_fp32(x[ib].d) * el_fp16_to_fp32(y[ib].d);
        for (int l = 0; l < 8; ++l) acc[l] = fmaf(d, (float)q[l], acc[l]);
    }
    *s = el_hsum8_x86(acc);
}

/* Q4_1/Q5_1 (vec_dot only): 8 lanes as Q5_0 plus a scalar min term
 * summs = fma(m_w, s_a, summs) (GCC contracts it); result hsum + summs. */
EL_CPU_CLONES static void vec_dot_q4_1_q8_1(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q4_1 *restrict x = vx;
    const block_q8_1 *restrict y = vy;
    const int nb = n / EL_QK8_1;
    float acc[8] = {0};
    float summs = 0.0f;
    for (int ib = 0; ib < nb; ++ib) {
        uint8_t a[EL_QK8_1];
        int32_t q[8];
        summs = fmaf(el_fp16_to_fp32(x[ib].m), el_fp16_to_fp32(y[ib].s), summs);
        unpack_nibbles16(x[ib].qs, a);
        lanes8_u(a, y[ib].qs, 0, q);
        const float d = el_fp16_to_fp32(x[ib].d) * el_fp16_to_fp32(y[ib].d);
        for (int l = 0; l < 8; ++l) acc[l] = fmaf(d, (float)q[l], acc[l]);
    }
    *s = el_hsum8_x86(acc) + summs;
}

EL_CPU_CLONES static void vec_dot_q5_1_q8_1(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q5_1 *restrict x = vx;
    const block_q8_1 *restrict y = vy;
    const int nb = n / EL_QK8_1;
    float acc[8] = {0};
    float summs = 0.0f;
    for (int ib = 0; ib < nb; ++ib) {
        uint8_t a[EL_QK8_1];
        int32_t q[8];
        summs = fmaf(el_fp16_to_fp32(x[ib].m), el_fp16_to_fp32(y[ib].s), summs);
        unpack_5bit(x[ib].qs, load_u32le(x[ib].qh), a);
        lanes8_u(a, y[ib].qs, 0, q);
        const float d = el_fp16_to_fp32(x[ib].d) * el_fp16_to_fp32(y[ib].d);
        for (int l = 0; l < 8; ++l) acc[l] = fmaf(d, (float)q[l], acc[l]);
    }
    *s = el_hsum8_x86(acc) + summs;
}

/* Q8_0·Q8_0 in llama.cpp's x86 order: 8 lanes, lane l holding the integer
 * sum of elements 4l..4l+3 of each block, accumulated as fma(dx*dy, sum, acc). */
EL_CPU_CLONES static void vec_dot_q8_0_q8_0(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q8_0 *restrict x = vx;
    const block_q8_0 *restrict y = vy;
    const int nb = n / EL_QK8_0;
    float acc[8] = {0};
    for (int ib = 0; ib < nb; ++ib) {
        const float d = el_fp16_to_fp32(x[ib].d) * el_fp16_to_fp32(y[ib].d);
        for (int l = 0; l < 8; ++l) {
            int32_t q = 0;
            for (int k = 0; k < 4; ++k) q += (int32_t)x[ib].qs[4 * l + k] * (int32_t)y[ib].qs[4 * l + k];
            acc[l] = fmaf(d, (float)q, acc[l]);
        }
    }
    *s = el_hsum8_x86(acc);
}


/* IQ4_NL: repacked 8x8 kernels, as Q4_0. */
EL_CPU_CLONES static void vec_dot_iq4_nl_q8_0(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_iq4_nl *restrict x = vx;
    const block_q8_0 *restrict y = vy;
    const int nb = n / EL_QK8_0;
    float acc = 0.0f;
    for (int ib = 0; ib < nb; ++ib) {
        uint8_t idx[EL_QK4_NL];
        int8_t a[EL_QK4_NL];
        unpack_nibbles16(x[ib].qs, idx);
        iq4_lookup32(idx, a);
        const int32_t sumi = dot32(a, y[ib].qs);
        acc = fmaf((float)sumi, el_fp16_to_fp32(x[ib].d) * el_fp16_to_fp32(y[ib].d), acc);
    }
    *s = acc;
}

/*
 * MXFP4: llama.cpp's x86 build repacks MXFP4 weights (rows a multiple of 8)
 * as it does IQ4_NL and runs the same 8x8 GEMV/GEMM template, the block's
 * scale being 2^(e - 128) (the doubled E2M1 codes' half exponent):
 * acc = fma((float)sumi, d_w * d_a, acc), block by block. Both d_w * d_a
 * and sumi are exact (a power of two times a half; |sumi| <= 32*12*127).
 */
EL_CPU_CLONES static void vec_dot_mxfp4_q8_0(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_mxfp4 *restrict x = vx;
    const block_q8_0 *restrict y = vy;
    const int nb = n / EL_QK8_0;
    float acc = 0.0f;
    for (int ib = 0; ib < nb; ++ib) {
        uint8_t idx[EL_QK_MXFP4];
        int8_t a[EL_QK_MXFP4];
        unpack_nibbles16(x[ib].qs, idx);
        mxfp4_lookup32(idx, a);
        const int32_t sumi = dot32(a, y[ib].qs);
        acc = fmaf((float)sumi, el_e8m0_to_fp32_half(x[ib].e) * el_fp16_to_fp32(y[ib].d), acc);
    }
    *s = acc;
}

/* ---------------------------------------------------------------- table */

/* ---- activation quantizers (llama.cpp x86 semantics, see kernels.h) ---- */

EL_CPU_CLONES void el_cpu_quantize_q8_0(const float *restrict src, void *dst, int64_t n) {
    block_q8_0 *y = dst;
    for (int64_t i = 0; i < n / EL_QK8_0; ++i, src += EL_QK8_0) {
        float amax = 0.0f;
        for (int j = 0; j < EL_QK8_0; ++j) amax = fmaxf(amax, fabsf(src[j]));
        const float d = amax / 127.0f;
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        y[i].d = el_fp32_to_fp16(d);
        for (int j = 0; j < EL_QK8_0; ++j) y[i].qs[j] = (int8_t)rintf(src[j] * id);
    }
}

EL_CPU_CLONES void el_cpu_quantize_q8_1(const float *restrict src, void *dst, int64_t n) {
    block_q8_1 *y = dst;
    for (int64_t i = 0; i < n / EL_QK8_1; ++i, src += EL_QK8_1) {
        float amax = 0.0f;
        for (int j = 0; j < EL_QK8_1; ++j) amax = fmaxf(amax, fabsf(src[j]));
        const float d = amax / 127.0f;
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        y[i].d = el_fp32_to_fp16(d);
        int sum = 0;
        for (int j = 0; j < EL_QK8_1; ++j) {
            y[i].qs[j] = (int8_t)rintf(src[j] * id);
            sum += y[i].qs[j];
        }
        y[i].s = el_fp32_to_fp16(d * (float)sum);
    }
}

static const el_cpu_type_kernels k_portable[EL_TYPE_COUNT] = {
    [EL_TYPE_F32] = {EL_TYPE_F32, vec_dot_f32, el_quant_f32, select_f32, NULL},
    [EL_TYPE_F16] = {EL_TYPE_F16, vec_dot_f16, el_quant_f16, select_f16, NULL},
    [EL_TYPE_BF16] = {EL_TYPE_BF16, vec_dot_bf16, el_quant_bf16, select_bf16, NULL},
    [EL_TYPE_Q4_0] = {EL_TYPE_Q8_0, vec_dot_q4_0_q8_0, el_cpu_quantize_q8_0, NULL, NULL},
    [EL_TYPE_Q4_1] = {EL_TYPE_Q8_1, vec_dot_q4_1_q8_1, el_cpu_quantize_q8_1, NULL, NULL},
    [EL_TYPE_Q5_0] = {EL_TYPE_Q8_0, vec_dot_q5_0_q8_0, el_cpu_quantize_q8_0, NULL, NULL},
    [EL_TYPE_Q5_1] = {EL_TYPE_Q8_1, vec_dot_q5_1_q8_1, el_cpu_quantize_q8_1, NULL, NULL},
    [EL_TYPE_Q8_0] = {EL_TYPE_Q8_0, vec_dot_q8_0_q8_0, el_cpu_quantize_q8_0, NULL, NULL},
    [EL_TYPE_Q2_K] = {EL_TYPE_Q8_K, el_vec_dot_q2_k_q8_k, el_quant_q8_k, el_select_q2_k, NULL},
    [EL_TYPE_Q3_K] = {EL_TYPE_Q8_K, el_vec_dot_q3_k_q8_k, el_quant_q8_k, NULL, NULL},
    [EL_TYPE_Q4_K] = {EL_TYPE_Q8_K, el_vec_dot_q4_k_q8_k, el_quant_q8_k, el_select_q4_k, NULL},
    [EL_TYPE_Q5_K] = {EL_TYPE_Q8_K, el_vec_dot_q5_k_q8_k, el_quant_q8_k, NULL, NULL},
    [EL_TYPE_Q6_K] = {EL_TYPE_Q8_K, el_vec_dot_q6_k_q8_k, el_quant_q8_k, NULL, NULL},
    [EL_TYPE_IQ4_NL] = {EL_TYPE_Q8_0, vec_dot_iq4_nl_q8_0, el_cpu_quantize_q8_0, NULL, NULL},
    [EL_TYPE_IQ4_XS] = {EL_TYPE_Q8_K, el_vec_dot_iq4_xs_q8_k, el_quant_q8_k, NULL, NULL},
    [EL_TYPE_MXFP4] = {EL_TYPE_Q8_0, vec_dot_mxfp4_q8_0, el_cpu_quantize_q8_0, NULL, NULL},
};

/*
 * Block order (kernels.h, EL_ORDER_BLOCK) for Q8_0 and Q5_0: one exact
 * integer sum per 32-element block, acc = fma((float)sumi, d_w * d_a, acc)
 * block after block — vec_dot_q4_0_q8_0's order. Q5_0's sum is formed as
 * sum(u * a) - 16 * sum(a) with u = the 5-bit value (exact either way).
 * Q6_K's block-order entry is el_vec_dot_q6_k_q8_k_blk (kernels_kquants.c).
 */
EL_CPU_CLONES static void vec_dot_q8_0_q8_0_blk(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q8_0 *restrict x = vx;
    const block_q8_0 *restrict y = vy;
    const int nb = n / EL_QK8_0;
    float acc = 0.0f;
    for (int ib = 0; ib < nb; ++ib) {
        const int32_t sumi = dot32(x[ib].qs, y[ib].qs);
        acc = fmaf((float)sumi, el_fp16_to_fp32(x[ib].d) * el_fp16_to_fp32(y[ib].d), acc);
    }
    *s = acc;
}

EL_CPU_CLONES static void vec_dot_q5_0_q8_0_blk(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q5_0 *restrict x = vx;
    const block_q8_0 *restrict y = vy;
    const int nb = n / EL_QK8_0;
    float acc = 0.0f;
    for (int ib = 0; ib < nb; ++ib) {
        uint8_t a[EL_QK8_0];
        unpack_5bit(x[ib].qs, load_u32le(x[ib].qh), a);
        const int32_t sumi = dot32_u(a, y[ib].qs, 16);
        acc = fmaf((float)sumi, el_fp16_to_fp32(x[ib].d) * el_fp16_to_fp32(y[ib].d), acc);
    }
    *s = acc;
}

static const el_cpu_type_kernels k_portable_block[EL_TYPE_COUNT] = {
    [EL_TYPE_Q5_0] = {EL_TYPE_Q8_0, vec_dot_q5_0_q8_0_blk, el_cpu_quantize_q8_0, NULL, NULL},
    [EL_TYPE_Q8_0] = {EL_TYPE_Q8_0, vec_dot_q8_0_q8_0_blk, el_cpu_quantize_q8_0, NULL, NULL},
    [EL_TYPE_Q6_K] = {EL_TYPE_Q8_K, el_vec_dot_q6_k_q8_k_blk, el_quant_q8_k, NULL, NULL},
};

const el_cpu_type_kernels *el_cpu_kernels_portable_block(el_type t) {
    if ((int)t < 0 || (int)t >= EL_TYPE_COUNT || !k_portable_block[t].vec_dot) return NULL;
    return &k_portable_block[t];
}

const el_cpu_type_kernels *el_cpu_kernels_portable(el_type t) {
    if ((int)t < 0 || (int)t >= EL_TYPE_COUNT || !k_portable[t].vec_dot) return NULL;
    return &k_portable[t];
}
