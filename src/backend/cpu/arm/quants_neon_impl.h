/*
 * quants_neon_impl.h — the AArch64 Advanced SIMD (NEON) kernels, included by
 * quants_neon.c (base ARMv8-A) and quants_neon_dotprod.c (+ the dotprod
 * extension, SDOT), each defining EL_NEON_TABLE and EL_NEON_BLOCK_TABLE, the
 * names of its two tables: the kernels in llama.cpp's order, and the Q8_0 /
 * Q5_0 kernels in block order (kernels.h, el_cpu_order).
 *
 * Every kernel gives the portable kernel's bits (kernels_portable.c,
 * kernels_kquants.c are the specification; tests/test_kernels.c checks it):
 *  - integer partial sums are exact however they are formed: SDOT, or
 *    SMULL (int8 x int8 -> int16, never saturating: |product| <= 2^14) then
 *    pairwise widening adds (SADDLP / SADALP) into int32 (the block-order
 *    Q5_0 kernels, |product| <= 2^11, first sum 8 products per int16 lane
 *    with SMLAL and ADDP: |sum| <= 2^14);
 *  - the float work is lane for lane that of the portable code, i.e. of
 *    llama.cpp's x86 build: its 8 float lanes are two float32x4_t (lanes 0-3,
 *    4-7), its 16 lanes four; each fmaf() is one FMLA (fused, one rounding),
 *    each plain a*b + c stays two roundings; the x86 horizontal sums are
 *    reproduced add for add (float addition is commutative, so only the
 *    pairing matters);
 *  - half-precision values are widened with FCVT, exact like
 *    el_fp16_to_fp32 (they may differ only in the payload of a NaN);
 *  - rintf / nearest_int round to nearest even: FCVTNS.
 * Kernels: vec_dot of every weight type, MXFP4 included (with the portable selectors' row
 * choices: Q2_K/Q4_K gemm order, tinyBLAS order for F32/F16/BF16), the
 * Q8_0/Q8_1/Q8_K activation quantizers, and gemm blocks for Q4_0, Q8_0,
 * Q4_K, Q5_K, Q6_K (table EL_NEON_TABLE); and, in block order, vec_dot and
 * gemm blocks for Q8_0 and Q5_0 (table EL_NEON_BLOCK_TABLE; the portable
 * vec_dot_q8_0_q8_0_blk / vec_dot_q5_0_q8_0_blk are their specification):
 * per output acc = fma((float)sumi, d_w * d_a, acc), block after block, each
 * a lane of an FMLA (or a scalar fmaf) with the rounded FMUL product. The
 * .c files including this compile to nothing except on AArch64.
 */
#ifndef EL_NEON_TABLE
#error "define EL_NEON_TABLE before including quants_neon_impl.h"
#endif
#ifndef EL_NEON_BLOCK_TABLE
#error "define EL_NEON_BLOCK_TABLE before including quants_neon_impl.h"
#endif

#include <arm_neon.h>
#include <math.h>
#include <string.h>

#include "backend/cpu/kernel_common.h"
#include "backend/cpu/kernel_types.h"
#include "package/quants.h"
#include "package/quants_blocks.h"
#include "util/fp16.h"

/* No FMA contraction of the scalar parts (tails, a*b then +): clang honours the
 * pragma; GCC does not contract in ISO C mode (-std=c17, as the build uses). */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

static inline float h2f(el_fp16 h) {
    __fp16 v;
    memcpy(&v, &h, sizeof v);
    return (float)v;
}

/* ---------------------------------------------------------------- integer dot helpers */

/* Lane i = sum over k < 4 of a[4i + k] * b[4i + k] (the layout of one SDOT). */
static inline int32x4_t dot4(int8x16_t a, int8x16_t b) {
#if defined(__ARM_FEATURE_DOTPROD)
    return vdotq_s32(vdupq_n_s32(0), a, b);
#else
    const int16x8_t lo = vmull_s8(vget_low_s8(a), vget_low_s8(b));
    const int16x8_t hi = vmull_high_s8(a, b);
    return vpaddq_s32(vpaddlq_s16(lo), vpaddlq_s16(hi));
#endif
}

/* acc + the 16 products a[j] * b[j], spread over the 4 lanes (lane layout unspecified). */
static inline int32x4_t dot_acc(int32x4_t acc, int8x16_t a, int8x16_t b) {
#if defined(__ARM_FEATURE_DOTPROD)
    return vdotq_s32(acc, a, b);
#else
    acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(a), vget_low_s8(b)));
    return vpadalq_s16(acc, vmull_high_s8(a, b));
#endif
}

/* x86 horizontal sum of 8 lanes (lo = lanes 0-3, hi = 4-7): (l4+l0, l5+l1, l6+l2, l7+l3) = r,
 * then (r0+r2) + (r1+r3). */
static inline float hsum8(float32x4_t lo, float32x4_t hi) {
    const float32x4_t r = vaddq_f32(hi, lo);
    const float32x2_t t = vadd_f32(vget_low_f32(r), vget_high_f32(r));
    return vget_lane_f32(t, 0) + vget_lane_f32(t, 1);
}

/* _mm512_reduce_add_ps of 16 lanes v0..v3 (4 lanes each): a = (v2,v3) + (v0,v1); b = a1 + a0; pairs. */
static inline float hsum16(float32x4_t v0, float32x4_t v1, float32x4_t v2, float32x4_t v3) {
    return hsum8(vaddq_f32(v2, v0), vaddq_f32(v3, v1));
}

/* ---------------------------------------------------------------- activation quantizers */

/* One block of el_cpu_quantize_q8_0: q = rint(x * (127/amax)); returns d = amax/127. */
static inline float q8_block(const float *restrict src, int8_t *restrict qs) {
    float32x4_t v[8];
    float32x4_t m = vdupq_n_f32(0.0f); /* fmaxf(0, ...): a NaN is skipped, as by fmaxf */
    for (int j = 0; j < 8; ++j) {
        v[j] = vld1q_f32(src + 4 * j);
        m = vmaxnmq_f32(m, vabsq_f32(v[j]));
    }
    const float amax = vmaxnmvq_f32(m);
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    const float32x4_t vid = vdupq_n_f32(id);
    for (int j = 0; j < 8; j += 4) {
        const int32x4_t q0 = vcvtnq_s32_f32(vmulq_f32(v[j], vid));
        const int32x4_t q1 = vcvtnq_s32_f32(vmulq_f32(v[j + 1], vid));
        const int32x4_t q2 = vcvtnq_s32_f32(vmulq_f32(v[j + 2], vid));
        const int32x4_t q3 = vcvtnq_s32_f32(vmulq_f32(v[j + 3], vid));
        const int16x8_t h0 = vcombine_s16(vmovn_s32(q0), vmovn_s32(q1));
        const int16x8_t h1 = vcombine_s16(vmovn_s32(q2), vmovn_s32(q3));
        vst1q_s8(qs + 4 * j, vcombine_s8(vmovn_s16(h0), vmovn_s16(h1)));
    }
    return amax / 127.0f;
}

/* el_cpu_quantize_q8_0. */
static void quantize_q8_0(const float *restrict src, void *dst, int64_t n) {
    block_q8_0 *y = dst;
    for (int64_t i = 0; i < n / EL_QK8_0; ++i, src += EL_QK8_0) y[i].d = el_fp32_to_fp16(q8_block(src, y[i].qs));
}

/* el_cpu_quantize_q8_1: as Q8_0, plus s = d * sum(q). */
static void quantize_q8_1(const float *restrict src, void *dst, int64_t n) {
    block_q8_1 *y = dst;
    for (int64_t i = 0; i < n / EL_QK8_1; ++i, src += EL_QK8_1) {
        const float d = q8_block(src, y[i].qs);
        y[i].d = el_fp32_to_fp16(d);
        const int sum = vaddlvq_s8(vld1q_s8(y[i].qs)) + vaddlvq_s8(vld1q_s8(y[i].qs + 16));
        y[i].s = el_fp32_to_fp16(d * (float)sum);
    }
}

/* el_quant_q8_k (ggml's reference): max = the first value of largest magnitude,
 * iscale = -127/max, q = min(127, nearest(iscale * x)), d = 1/iscale, bsums per 16. */
static void quantize_q8_k(const float *restrict src, void *dst, int64_t n) {
    block_q8_K *y = dst;
    for (int64_t i = 0; i < n / EL_QK_K; ++i, src += EL_QK_K) {
        float32x4_t m = vdupq_n_f32(0.0f);
        for (int j = 0; j < EL_QK_K; j += 4) m = vmaxnmq_f32(m, vabsq_f32(vld1q_f32(src + j)));
        const float amax = vmaxnmvq_f32(m);
        if (amax == 0.0f) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        int jm = 0;
        while (fabsf(src[jm]) != amax) ++jm; /* the first one, as the scalar `ax > amax` scan keeps */
        const float iscale = -127.0f / src[jm];
        const float32x4_t vis = vdupq_n_f32(iscale);
        const int32x4_t cap = vdupq_n_s32(127);
        for (int j = 0; j < EL_QK_K; j += 16) {
            int32x4_t q[4];
            for (int k = 0; k < 4; ++k)
                q[k] = vminq_s32(vcvtnq_s32_f32(vmulq_f32(vis, vld1q_f32(src + j + 4 * k))), cap);
            const int16x8_t h0 = vcombine_s16(vmovn_s32(q[0]), vmovn_s32(q[1]));
            const int16x8_t h1 = vcombine_s16(vmovn_s32(q[2]), vmovn_s32(q[3]));
            const int8x16_t b = vcombine_s8(vmovn_s16(h0), vmovn_s16(h1));
            vst1q_s8(y[i].qs + j, b);
            y[i].bsums[j / 16] = (int16_t)vaddlvq_s8(b);
        }
        y[i].d = 1.0f / iscale;
    }
}

/* ---------------------------------------------------------------- Q4_0, Q8_0 */

/* Q4_0: one float accumulator, acc = fma(block sum, d_w * d_a, acc) (repacked 8x8 order). */
static inline int32_t q4_0_block_sum(const block_q4_0 *restrict x, const block_q8_0 *restrict y) {
    const uint8x16_t v = vld1q_u8(x->qs);
    const int8x16_t a0 = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(0x0F))), vdupq_n_s8(8));
    const int8x16_t a1 = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(v, 4)), vdupq_n_s8(8));
    int32x4_t s = dot_acc(vdupq_n_s32(0), a0, vld1q_s8(y->qs));
    s = dot_acc(s, a1, vld1q_s8(y->qs + 16));
    return vaddvq_s32(s);
}

static void vec_dot_q4_0(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q4_0 *restrict x = vx;
    const block_q8_0 *restrict y = vy;
    const int nb = n / EL_QK8_0;
    float acc = 0.0f;
    for (int ib = 0; ib < nb; ++ib)
        acc = fmaf((float)q4_0_block_sum(&x[ib], &y[ib]), h2f(x[ib].d) * h2f(y[ib].d), acc);
    *s = acc;
}

/* Q8_0: 8 lanes, lane l = integer sum of elements 4l..4l+3 of a block, fma(d, lane, acc). */
static void vec_dot_q8_0(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q8_0 *restrict x = vx;
    const block_q8_0 *restrict y = vy;
    const int nb = n / EL_QK8_0;
    float32x4_t acc0 = vdupq_n_f32(0.0f), acc1 = vdupq_n_f32(0.0f);
    for (int ib = 0; ib < nb; ++ib) {
        const int32x4_t g0 = dot4(vld1q_s8(x[ib].qs), vld1q_s8(y[ib].qs));
        const int32x4_t g1 = dot4(vld1q_s8(x[ib].qs + 16), vld1q_s8(y[ib].qs + 16));
        const float32x4_t d = vdupq_n_f32(h2f(x[ib].d) * h2f(y[ib].d));
        acc0 = vfmaq_f32(acc0, d, vcvtq_f32_s32(g0));
        acc1 = vfmaq_f32(acc1, d, vcvtq_f32_s32(g1));
    }
    *s = hsum8(acc0, acc1);
}

/* ---------------------------------------------------------------- Q4_K */

/* The 256 quants 0..15 of a super-block, 16 per vector in element order. */
static inline void q4_k_unpack(const block_q4_K *restrict x, int8x16_t *restrict a) {
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    for (int jj = 0; jj < 4; ++jj) {
        const uint8x16_t v0 = vld1q_u8(x->qs + 32 * jj), v1 = vld1q_u8(x->qs + 32 * jj + 16);
        a[4 * jj + 0] = vreinterpretq_s8_u8(vandq_u8(v0, m4));
        a[4 * jj + 1] = vreinterpretq_s8_u8(vandq_u8(v1, m4));
        a[4 * jj + 2] = vreinterpretq_s8_u8(vshrq_n_u8(v0, 4));
        a[4 * jj + 3] = vreinterpretq_s8_u8(vshrq_n_u8(v1, 4));
    }
}

/* The 8 sub-block integer dots p[j] = sum over elements 32j..32j+31 of a * q. */
static inline void sub32_dots(const int8x16_t *restrict a, const int8_t *restrict q, int32_t *restrict p) {
    for (int j = 0; j < 8; ++j)
        p[j] = vaddvq_s32(dot_acc(dot_acc(vdupq_n_s32(0), a[2 * j], vld1q_s8(q + 32 * j)), a[2 * j + 1],
                                  vld1q_s8(q + 32 * j + 16)));
}

static inline void q4_k_sub_dots(const block_q4_K *restrict x, const int8_t *restrict q, int32_t *restrict p) {
    int8x16_t a[16];
    q4_k_unpack(x, a);
    sub32_dots(a, q, p);
}

static inline void q4_k_scales(const block_q4_K *restrict x, int32_t *restrict sc, int32_t *restrict mn) {
    for (int j = 0; j < 8; ++j) {
        uint8_t a, b;
        el_get_scale_min_k4(j, x->scales, &a, &b);
        sc[j] = a;
        mn[j] = b;
    }
}

/* gemv order: one fma pair per super-block. */
static void vec_dot_q4_k(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q4_K *restrict x = vx;
    const block_q8_K *restrict y = vy;
    const int nb = n / EL_QK_K;
    float acc = 0.0f, accm = 0.0f;
    for (int i = 0; i < nb; ++i) {
        int32_t p[8], sc[8], mn[8];
        q4_k_sub_dots(&x[i], y[i].qs, p);
        q4_k_scales(&x[i], sc, mn);
        int32_t isum = 0, summ = 0;
        for (int j = 0; j < 8; ++j) {
            isum += sc[j] * p[j];
            summ += mn[j] * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
        }
        const float d = h2f(x[i].d) * y[i].d;
        const float dmin = h2f(x[i].dmin) * y[i].d;
        acc = fmaf((float)isum, d, acc);
        accm = fmaf((float)summ, dmin, accm);
    }
    *s = acc - accm;
}

/* gemm order: one fma pair per 64 elements. */
static void vec_dot_q4_k_x4(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q4_K *restrict x = vx;
    const block_q8_K *restrict y = vy;
    const int nb = n / EL_QK_K;
    float acc = 0.0f, accm = 0.0f;
    for (int i = 0; i < nb; ++i) {
        int32_t p[8], sc[8], mn[8];
        q4_k_sub_dots(&x[i], y[i].qs, p);
        q4_k_scales(&x[i], sc, mn);
        const float d = h2f(x[i].d) * y[i].d;
        const float dmin = h2f(x[i].dmin) * y[i].d;
        for (int sb = 0; sb < 4; ++sb) {
            const int j = 2 * sb;
            const int32_t isum = sc[j] * p[j] + sc[j + 1] * p[j + 1];
            const int32_t summ = mn[j] * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]) +
                                 mn[j + 1] * (y[i].bsums[2 * j + 2] + y[i].bsums[2 * j + 3]);
            acc = fmaf((float)isum, d, acc);
            accm = fmaf((float)summ, dmin, accm);
        }
    }
    *s = acc - accm;
}

/* The rows el_select_q4_k sends to the gemm order (see kernels_kquants.c). */
static el_vec_dot_fn select_q4_k(int n_rows, int row, int k) {
    (void)k;
    return row < n_rows - n_rows % 4 ? vec_dot_q4_k_x4 : NULL;
}

/* ---------------------------------------------------------------- Q6_K */

/* The 256 quants of a super-block plus 32 (0..63), 16 per vector in element order. */
static inline void q6_k_unpack(const block_q6_K *restrict x, int8x16_t *restrict a) {
    const uint8x16_t m4 = vdupq_n_u8(0x0F), m3 = vdupq_n_u8(0x03);
    for (int h = 0; h < 2; ++h) {
        const uint8_t *ql = x->ql + 64 * h, *qh = x->qh + 32 * h;
        for (int half = 0; half < 2; ++half) { /* elements 16*half .. +15 of each chunk of 32 */
            const uint8x16_t l0 = vld1q_u8(ql + 16 * half), l1 = vld1q_u8(ql + 32 + 16 * half);
            const uint8x16_t hb = vld1q_u8(qh + 16 * half);
            int8x16_t *o = a + 8 * h + half; /* chunk c = 4h + k: vector 2c + half */
            o[0] = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(l0, m4), vshlq_n_u8(vandq_u8(hb, m3), 4)));
            o[2] = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(l1, m4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 2), m3), 4)));
            o[4] = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(l0, 4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 4), m3), 4)));
            o[6] = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(l1, 4), vshlq_n_u8(vshrq_n_u8(hb, 6), 4)));
        }
    }
}

/* AVX2 vec_dot order: 8 lanes; lane l = sum over the 8 chunks c of 32 of
 * sc[2c + l/4] * (sum of elements 32c+4l..+3 of (q6+32) * q8), minus
 * 32 * (bsums[2l]*sc[2l] + bsums[2l+1]*sc[2l+1]). */
static inline void q6_k_lanes(const int8x16_t *restrict a, const int8_t *restrict sc, const block_q8_K *restrict y,
                              int32x4_t *L0, int32x4_t *L1) {
    int32x4_t l0 = vdupq_n_s32(0), l1 = vdupq_n_s32(0);
    for (int c = 0; c < 8; ++c) {
        l0 = vmlaq_n_s32(l0, dot4(a[2 * c], vld1q_s8(y->qs + 32 * c)), sc[2 * c]);
        l1 = vmlaq_n_s32(l1, dot4(a[2 * c + 1], vld1q_s8(y->qs + 32 * c + 16)), sc[2 * c + 1]);
    }
    const int16x8_t sc16a = vmovl_s8(vld1_s8(sc)), sc16b = vmovl_s8(vld1_s8(sc + 8));
    const int16x8_t bsa = vld1q_s16(y->bsums), bsb = vld1q_s16(y->bsums + 8);
    const int32x4_t c0 = vpaddq_s32(vmull_s16(vget_low_s16(bsa), vget_low_s16(sc16a)), vmull_high_s16(bsa, sc16a));
    const int32x4_t c1 = vpaddq_s32(vmull_s16(vget_low_s16(bsb), vget_low_s16(sc16b)), vmull_high_s16(bsb, sc16b));
    *L0 = vsubq_s32(l0, vshlq_n_s32(c0, 5));
    *L1 = vsubq_s32(l1, vshlq_n_s32(c1, 5));
}

/* acc = fma(d, lane, acc) per lane, d = d_a * d_w. */
static void vec_dot_q6_k(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q6_K *restrict x = vx;
    const block_q8_K *restrict y = vy;
    const int nb = n / EL_QK_K;
    float32x4_t acc0 = vdupq_n_f32(0.0f), acc1 = vdupq_n_f32(0.0f);
    for (int i = 0; i < nb; ++i) {
        int8x16_t a[16];
        int32x4_t L0, L1;
        q6_k_unpack(&x[i], a);
        q6_k_lanes(a, x[i].scales, &y[i], &L0, &L1);
        const float32x4_t d = vdupq_n_f32(y[i].d * h2f(x[i].d));
        acc0 = vfmaq_f32(acc0, d, vcvtq_f32_s32(L0));
        acc1 = vfmaq_f32(acc1, d, vcvtq_f32_s32(L1));
    }
    *s = hsum8(acc0, acc1);
}

/* ---------------------------------------------------------------- Q5_0, Q4_1, Q5_1, IQ4_NL */

/* 8 bits of qh (bytes b_lo for lanes 0-7, b_hi for 8-15) -> 0x10 where the bit is set. */
static inline uint8x16_t bits_x10(uint8_t b_lo, uint8_t b_hi) {
    static const uint8_t k_bit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    const uint8x16_t v = vcombine_u8(vdup_n_u8(b_lo), vdup_n_u8(b_hi));
    return vandq_u8(vtstq_u8(v, vld1q_u8(k_bit)), vdupq_n_u8(0x10));
}

/* 16 bytes of nibbles + 32 high bits -> elements 0-15 (a0), 16-31 (a1), values 0..31. */
static inline void unpack5(const uint8_t *qs, const uint8_t *qh, uint8x16_t *a0, uint8x16_t *a1) {
    const uint8x16_t v = vld1q_u8(qs);
    *a0 = vorrq_u8(vandq_u8(v, vdupq_n_u8(0x0F)), bits_x10(qh[0], qh[1]));
    *a1 = vorrq_u8(vshrq_n_u8(v, 4), bits_x10(qh[2], qh[3]));
}

/* Q5_0: 8 lanes, fma(d, lane, acc) (the AVX2 vec_dot / tinyBLAS order). */
static void vec_dot_q5_0(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q5_0 *restrict x = vx;
    const block_q8_0 *restrict y = vy;
    const int nb = n / EL_QK8_0;
    float32x4_t acc0 = vdupq_n_f32(0.0f), acc1 = vdupq_n_f32(0.0f);
    for (int ib = 0; ib < nb; ++ib) {
        uint8x16_t a0, a1;
        unpack5(x[ib].qs, x[ib].qh, &a0, &a1);
        const int8x16_t s0 = vsubq_s8(vreinterpretq_s8_u8(a0), vdupq_n_s8(16));
        const int8x16_t s1 = vsubq_s8(vreinterpretq_s8_u8(a1), vdupq_n_s8(16));
        const int32x4_t g0 = dot4(s0, vld1q_s8(y[ib].qs)), g1 = dot4(s1, vld1q_s8(y[ib].qs + 16));
        const float32x4_t d = vdupq_n_f32(h2f(x[ib].d) * h2f(y[ib].d));
        acc0 = vfmaq_f32(acc0, d, vcvtq_f32_s32(g0));
        acc1 = vfmaq_f32(acc1, d, vcvtq_f32_s32(g1));
    }
    *s = hsum8(acc0, acc1);
}

/* Q4_1 / Q5_1: 8 lanes as Q5_0 (quants 0..15 / 0..31), plus summs = fma(m_w, s_a, summs). */
static void vec_dot_q4_1(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q4_1 *restrict x = vx;
    const block_q8_1 *restrict y = vy;
    const int nb = n / EL_QK8_1;
    float32x4_t acc0 = vdupq_n_f32(0.0f), acc1 = vdupq_n_f32(0.0f);
    float summs = 0.0f;
    for (int ib = 0; ib < nb; ++ib) {
        summs = fmaf(h2f(x[ib].m), h2f(y[ib].s), summs);
        const uint8x16_t v = vld1q_u8(x[ib].qs);
        const int8x16_t a0 = vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(0x0F)));
        const int8x16_t a1 = vreinterpretq_s8_u8(vshrq_n_u8(v, 4));
        const int32x4_t g0 = dot4(a0, vld1q_s8(y[ib].qs)), g1 = dot4(a1, vld1q_s8(y[ib].qs + 16));
        const float32x4_t d = vdupq_n_f32(h2f(x[ib].d) * h2f(y[ib].d));
        acc0 = vfmaq_f32(acc0, d, vcvtq_f32_s32(g0));
        acc1 = vfmaq_f32(acc1, d, vcvtq_f32_s32(g1));
    }
    *s = hsum8(acc0, acc1) + summs;
}

static void vec_dot_q5_1(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q5_1 *restrict x = vx;
    const block_q8_1 *restrict y = vy;
    const int nb = n / EL_QK8_1;
    float32x4_t acc0 = vdupq_n_f32(0.0f), acc1 = vdupq_n_f32(0.0f);
    float summs = 0.0f;
    for (int ib = 0; ib < nb; ++ib) {
        summs = fmaf(h2f(x[ib].m), h2f(y[ib].s), summs);
        uint8x16_t a0, a1;
        unpack5(x[ib].qs, x[ib].qh, &a0, &a1);
        const int32x4_t g0 = dot4(vreinterpretq_s8_u8(a0), vld1q_s8(y[ib].qs));
        const int32x4_t g1 = dot4(vreinterpretq_s8_u8(a1), vld1q_s8(y[ib].qs + 16));
        const float32x4_t d = vdupq_n_f32(h2f(x[ib].d) * h2f(y[ib].d));
        acc0 = vfmaq_f32(acc0, d, vcvtq_f32_s32(g0));
        acc1 = vfmaq_f32(acc1, d, vcvtq_f32_s32(g1));
    }
    *s = hsum8(acc0, acc1) + summs;
}

/* IQ4_NL: the Q4_0 order (one accumulator), quants looked up in kvalues_iq4nl. */
static void vec_dot_iq4_nl(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_iq4_nl *restrict x = vx;
    const block_q8_0 *restrict y = vy;
    const int nb = n / EL_QK8_0;
    const int8x16_t kv = vld1q_s8(kvalues_iq4nl);
    float acc = 0.0f;
    for (int ib = 0; ib < nb; ++ib) {
        const uint8x16_t v = vld1q_u8(x[ib].qs);
        const int8x16_t a0 = vqtbl1q_s8(kv, vandq_u8(v, vdupq_n_u8(0x0F)));
        const int8x16_t a1 = vqtbl1q_s8(kv, vshrq_n_u8(v, 4));
        int32x4_t t = dot_acc(vdupq_n_s32(0), a0, vld1q_s8(y[ib].qs));
        t = dot_acc(t, a1, vld1q_s8(y[ib].qs + 16));
        acc = fmaf((float)vaddvq_s32(t), h2f(x[ib].d) * h2f(y[ib].d), acc);
    }
    *s = acc;
}

/* MXFP4: as IQ4_NL, codes looked up in kvalues_mxfp4 (doubled E2M1), the
 * block scale 2^(e - 128) (el_e8m0_to_fp32_half) times d_a, exact. */
static void vec_dot_mxfp4(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_mxfp4 *restrict x = vx;
    const block_q8_0 *restrict y = vy;
    const int nb = n / EL_QK8_0;
    const int8x16_t kv = vld1q_s8(kvalues_mxfp4);
    float acc = 0.0f;
    for (int ib = 0; ib < nb; ++ib) {
        const uint8x16_t v = vld1q_u8(x[ib].qs);
        const int8x16_t a0 = vqtbl1q_s8(kv, vandq_u8(v, vdupq_n_u8(0x0F)));
        const int8x16_t a1 = vqtbl1q_s8(kv, vshrq_n_u8(v, 4));
        int32x4_t t = dot_acc(vdupq_n_s32(0), a0, vld1q_s8(y[ib].qs));
        t = dot_acc(t, a1, vld1q_s8(y[ib].qs + 16));
        acc = fmaf((float)vaddvq_s32(t), el_e8m0_to_fp32_half(x[ib].e) * h2f(y[ib].d), acc);
    }
    *s = acc;
}

/* ---------------------------------------------------------------- K-quants, AVX2 lane order */

/* The 8 integer lanes of one super-block in the AVX2 layout (kernels_kquants.c, lanes8_x86):
 * lane l = sum over chunks c of 32 of sc16[2c + l/4] * (sum of a*q over elements 32c+4l..+3).
 * a: the 256 unpacked quants. */
static inline void lanes8(const int8_t *restrict a, const int8_t *restrict q, const int32_t *restrict sc16,
                          int32x4_t *L0, int32x4_t *L1) {
    int32x4_t l0 = vdupq_n_s32(0), l1 = vdupq_n_s32(0);
    for (int c = 0; c < EL_QK_K / 32; ++c) {
        l0 = vmlaq_n_s32(l0, dot4(vld1q_s8(a + 32 * c), vld1q_s8(q + 32 * c)), sc16[2 * c]);
        l1 = vmlaq_n_s32(l1, dot4(vld1q_s8(a + 32 * c + 16), vld1q_s8(q + 32 * c + 16)), sc16[2 * c + 1]);
    }
    *L0 = l0;
    *L1 = l1;
}

/* Q2_K/Q3_K low bits: element 128n + 32j + l = bits 2j..2j+1 of qs[32n + l]. */
static inline void unpack2(const uint8_t *restrict qs, int8_t *restrict a) {
    const uint8x16_t m3 = vdupq_n_u8(3);
    for (int n = 0; n < 2; ++n)
        for (int h = 0; h < 2; ++h) {
            const uint8x16_t v = vld1q_u8(qs + 32 * n + 16 * h);
            int8_t *o = a + 128 * n + 16 * h;
            vst1q_s8(o + 0, vreinterpretq_s8_u8(vandq_u8(v, m3)));
            vst1q_s8(o + 32, vreinterpretq_s8_u8(vandq_u8(vshrq_n_u8(v, 2), m3)));
            vst1q_s8(o + 64, vreinterpretq_s8_u8(vandq_u8(vshrq_n_u8(v, 4), m3)));
            vst1q_s8(o + 96, vreinterpretq_s8_u8(vshrq_n_u8(v, 6)));
        }
}

/* Q3_K: -4..3; hmask[l] bit 4n+j clear subtracts 4. */
static inline void unpack_q3_k(const block_q3_K *restrict b, int8_t *restrict a) {
    unpack2(b->qs, a);
    static const uint8_t k_bit[8] = {1, 2, 4, 8, 16, 32, 64, 128};
    for (int bit = 0; bit < 8; ++bit) {
        const uint8x16_t m = vdupq_n_u8(k_bit[bit]);
        for (int h = 0; h < 2; ++h) {
            int8_t *o = a + 32 * bit + 16 * h; /* 128n + 32j with bit = 4n + j */
            const uint8x16_t set = vtstq_u8(vld1q_u8(b->hmask + 16 * h), m);
            const int8x16_t sub = vreinterpretq_s8_u8(vbicq_u8(vdupq_n_u8(4), set));
            vst1q_s8(o, vsubq_s8(vld1q_s8(o), sub));
        }
    }
}

static void vec_dot_q3_k(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q3_K *restrict x = vx;
    const block_q8_K *restrict y = vy;
    const int nb = n / EL_QK_K;
    float32x4_t acc0 = vdupq_n_f32(0.0f), acc1 = vdupq_n_f32(0.0f);
    for (int i = 0; i < nb; ++i) {
        int8_t a[EL_QK_K];
        int32_t sc[16];
        unpack_q3_k(&x[i], a);
        for (int g = 0; g < 16; ++g) sc[g] = el_q3k_scale(g, x[i].scales) - 32;
        int32x4_t L0, L1;
        lanes8(a, y[i].qs, sc, &L0, &L1);
        const float32x4_t d = vdupq_n_f32(y[i].d * h2f(x[i].d));
        acc0 = vfmaq_f32(acc0, d, vcvtq_f32_s32(L0));
        acc1 = vfmaq_f32(acc1, d, vcvtq_f32_s32(L1));
    }
    *s = hsum8(acc0, acc1);
}

/* Q5_K: the 256 quants 0..31 of a super-block, in element order. */
static inline void q5_k_unpack(const block_q5_K *restrict x, int8_t *restrict a) {
    const uint8x16_t m4 = vdupq_n_u8(0x0F), one = vdupq_n_u8(1);
    for (int h = 0; h < 2; ++h) {
        const uint8x16_t hb = vld1q_u8(x->qh + 16 * h);
        for (int j = 0; j < 4; ++j) {
            const uint8x16_t v = vld1q_u8(x->qs + 32 * j + 16 * h);
            const uint8x16_t b0 = vshlq_n_u8(vandq_u8(vshlq_u8(hb, vdupq_n_s8((int8_t)(-2 * j))), one), 4);
            const uint8x16_t b1 = vshlq_n_u8(vandq_u8(vshlq_u8(hb, vdupq_n_s8((int8_t)(-2 * j - 1))), one), 4);
            vst1q_s8(a + 64 * j + 16 * h, vreinterpretq_s8_u8(vorrq_u8(vandq_u8(v, m4), b0)));
            vst1q_s8(a + 64 * j + 32 + 16 * h, vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(v, 4), b1)));
        }
    }
}

/* Q4_K/Q5_K 6-bit scales per 16 elements (sc16) and the 8 mins. */
static inline void k4_scales16(const uint8_t *restrict packed, int32_t *restrict sc16, int32_t *restrict mn) {
    for (int j = 0; j < 8; ++j) {
        uint8_t sc, m;
        el_get_scale_min_k4(j, packed, &sc, &m);
        sc16[2 * j] = sc16[2 * j + 1] = sc;
        mn[j] = m;
    }
}

static inline int32_t k4_summ(const int32_t *restrict mn, const int16_t *restrict bsums) {
    int32_t summ = 0;
    for (int j = 0; j < 8; ++j) summ += (bsums[2 * j] + bsums[2 * j + 1]) * mn[j];
    return summ;
}

/* Q5_K: AVX2 order; the mins go to a scalar fma chain added last. */
static void vec_dot_q5_k(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q5_K *restrict x = vx;
    const block_q8_K *restrict y = vy;
    const int nb = n / EL_QK_K;
    float32x4_t acc0 = vdupq_n_f32(0.0f), acc1 = vdupq_n_f32(0.0f);
    float summs = 0.0f;
    for (int i = 0; i < nb; ++i) {
        int8_t a[EL_QK_K];
        int32_t sc16[16], mn[8];
        q5_k_unpack(&x[i], a);
        k4_scales16(x[i].scales, sc16, mn);
        const int32_t summ = k4_summ(mn, y[i].bsums);
        const float d = y[i].d * h2f(x[i].d);
        const float dmin = -y[i].d * h2f(x[i].dmin);
        summs = fmaf(dmin, (float)summ, summs);
        int32x4_t L0, L1;
        lanes8(a, y[i].qs, sc16, &L0, &L1);
        const float32x4_t vd = vdupq_n_f32(d);
        acc0 = vfmaq_f32(acc0, vd, vcvtq_f32_s32(L0));
        acc1 = vfmaq_f32(acc1, vd, vcvtq_f32_s32(L1));
    }
    *s = hsum8(acc0, acc1) + summs;
}

/* IQ4_XS: AVX2 order. */
static void vec_dot_iq4_xs(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_iq4_xs *restrict x = vx;
    const block_q8_K *restrict y = vy;
    const int nb = n / EL_QK_K;
    const int8x16_t kv = vld1q_s8(kvalues_iq4nl);
    float32x4_t acc0 = vdupq_n_f32(0.0f), acc1 = vdupq_n_f32(0.0f);
    for (int i = 0; i < nb; ++i) {
        int8_t a[EL_QK_K];
        int32_t sc[16];
        for (int ib = 0; ib < EL_QK_K / 32; ++ib) {
            const uint8x16_t v = vld1q_u8(x[i].qs + 16 * ib);
            vst1q_s8(a + 32 * ib, vqtbl1q_s8(kv, vandq_u8(v, vdupq_n_u8(0x0F))));
            vst1q_s8(a + 32 * ib + 16, vqtbl1q_s8(kv, vshrq_n_u8(v, 4)));
            sc[2 * ib] = sc[2 * ib + 1] = el_iq4xs_scale(&x[i], ib) - 32;
        }
        int32x4_t L0, L1;
        lanes8(a, y[i].qs, sc, &L0, &L1);
        const float32x4_t d = vdupq_n_f32(h2f(x[i].d) * y[i].d);
        acc0 = vfmaq_f32(acc0, d, vcvtq_f32_s32(L0));
        acc1 = vfmaq_f32(acc1, d, vcvtq_f32_s32(L1));
    }
    *s = hsum8(acc0, acc1);
}

/* ---------------------------------------------------------------- Q2_K */

/* The 16 group dots p[g] = sum over 16 elements of a * q. */
static inline void group16_dots(const int8_t *restrict a, const int8_t *restrict q, int32_t *restrict p) {
    for (int g = 0; g < 16; ++g)
        p[g] = vaddvq_s32(dot_acc(vdupq_n_s32(0), vld1q_s8(a + 16 * g), vld1q_s8(q + 16 * g)));
}

/* gemv order: one fma pair per super-block. */
static void vec_dot_q2_k(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q2_K *restrict x = vx;
    const block_q8_K *restrict y = vy;
    const int nb = n / EL_QK_K;
    float acc = 0.0f, accm = 0.0f;
    for (int i = 0; i < nb; ++i) {
        int8_t a[EL_QK_K];
        int32_t p[16];
        unpack2(x[i].qs, a);
        group16_dots(a, y[i].qs, p);
        int32_t isum = 0, summs = 0;
        for (int g = 0; g < 16; ++g) {
            isum += (x[i].scales[g] & 0xF) * p[g];
            summs += y[i].bsums[g] * (x[i].scales[g] >> 4);
        }
        const float dall = h2f(x[i].d) * y[i].d;
        const float dmin = h2f(x[i].dmin) * y[i].d;
        acc = fmaf((float)isum, dall, acc);
        accm = fmaf((float)summs, dmin, accm);
    }
    *s = acc - accm;
}

/* gemm order: one fma pair per 128 elements. */
static void vec_dot_q2_k_x4(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q2_K *restrict x = vx;
    const block_q8_K *restrict y = vy;
    const int nb = n / EL_QK_K;
    float acc = 0.0f, accm = 0.0f;
    for (int i = 0; i < nb; ++i) {
        int8_t a[EL_QK_K];
        int32_t p[16];
        unpack2(x[i].qs, a);
        group16_dots(a, y[i].qs, p);
        const float dall = h2f(x[i].d) * y[i].d;
        const float dmin = h2f(x[i].dmin) * y[i].d;
        for (int h = 0; h < 2; ++h) {
            int32_t isum = 0, summs = 0;
            for (int g = 8 * h; g < 8 * h + 8; ++g) {
                isum += (x[i].scales[g] & 0xF) * p[g];
                summs += y[i].bsums[g] * (x[i].scales[g] >> 4);
            }
            acc = fmaf((float)isum, dall, acc);
            accm = fmaf((float)summs, dmin, accm);
        }
    }
    *s = acc - accm;
}

static el_vec_dot_fn select_q2_k(int n_rows, int row, int k) {
    (void)k;
    return row < n_rows - n_rows % 4 ? vec_dot_q2_k_x4 : NULL;
}

/* ---------------------------------------------------------------- F32, F16, BF16 */

/* 4 lanes of F16 (raw binary16 bits) -> float, exactly. */
static inline float32x4_t ld_f16x4(const el_fp16 *p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }
/* 4 lanes of BF16 -> float (exact: the bits shifted up). */
static inline float32x4_t bf16_lo(uint16x8_t v) { return vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(v), 16)); }
static inline float32x4_t bf16_hi(uint16x8_t v) { return vreinterpretq_f32_u32(vshll_high_n_u16(v, 16)); }

/* GGML_F32x16_REDUCE of 4 accumulators of 16 lanes (a[j][q]: lanes 4q..4q+3 of accumulator j):
 * v = (a0 + a2) + (a1 + a3) per lane, then the 16-lane x86 reduction. */
static inline float reduce4x16(float32x4_t a[4][4]) {
    float32x4_t v[4];
    for (int q = 0; q < 4; ++q) v[q] = vaddq_f32(vaddq_f32(a[0][q], a[2][q]), vaddq_f32(a[1][q], a[3][q]));
    return hsum16(v[0], v[1], v[2], v[3]);
}

/* F32 / F16 (one-token path): 4 accumulators of 16 lanes over steps of 64, acc = fma(x, y, acc). */
static void vec_dot_f32(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const float *restrict x = vx;
    const float *restrict y = vy;
    float32x4_t acc[4][4];
    for (int j = 0; j < 4; ++j)
        for (int q = 0; q < 4; ++q) acc[j][q] = vdupq_n_f32(0.0f);
    const int np = n & ~63;
    for (int i = 0; i < np; i += 64)
        for (int j = 0; j < 4; ++j)
            for (int q = 0; q < 4; ++q) {
                const int e = i + 16 * j + 4 * q;
                acc[j][q] = vfmaq_f32(acc[j][q], vld1q_f32(x + e), vld1q_f32(y + e));
            }
    float sumf = reduce4x16(acc);
    for (int i = np; i < n; ++i) sumf += x[i] * y[i];
    *s = sumf;
}

static void vec_dot_f16(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const el_fp16 *restrict x = vx;
    const el_fp16 *restrict y = vy;
    float32x4_t acc[4][4];
    for (int j = 0; j < 4; ++j)
        for (int q = 0; q < 4; ++q) acc[j][q] = vdupq_n_f32(0.0f);
    const int np = n & ~63;
    for (int i = 0; i < np; i += 64)
        for (int j = 0; j < 4; ++j)
            for (int q = 0; q < 4; ++q) {
                const int e = i + 16 * j + 4 * q;
                acc[j][q] = vfmaq_f32(acc[j][q], ld_f16x4(x + e), ld_f16x4(y + e));
            }
    double sumf = (double)reduce4x16(acc);
    for (int i = np; i < n; ++i) sumf += (double)(h2f(x[i]) * h2f(y[i]));
    *s = (float)sumf;
}

/* 16 BF16 lanes l of 32 elements p[0..31]: lane l pairs elements 2l (even) and 2l+1 (odd);
 * c += odd product, then c += even product (vdpbf16ps), unfused (bf16 products are exact). */
static inline void bf16_pairs32(const el_bf16 *x, const el_bf16 *y, float32x4_t c[4]) {
    for (int h = 0; h < 2; ++h) { /* lanes 8h .. 8h+7 */
        const uint16x8x2_t xv = vld2q_u16(x + 16 * h), yv = vld2q_u16(y + 16 * h);
        c[2 * h] = vaddq_f32(c[2 * h], vmulq_f32(bf16_lo(xv.val[1]), bf16_lo(yv.val[1])));
        c[2 * h] = vaddq_f32(c[2 * h], vmulq_f32(bf16_lo(xv.val[0]), bf16_lo(yv.val[0])));
        c[2 * h + 1] = vaddq_f32(c[2 * h + 1], vmulq_f32(bf16_hi(xv.val[1]), bf16_hi(yv.val[1])));
        c[2 * h + 1] = vaddq_f32(c[2 * h + 1], vmulq_f32(bf16_hi(xv.val[0]), bf16_hi(yv.val[0])));
    }
}

/* BF16 (one-token path): 2 accumulators of 16 lanes over steps of 64. */
static void vec_dot_bf16(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const el_bf16 *restrict x = vx;
    const el_bf16 *restrict y = vy;
    float32x4_t c[2][4];
    for (int h = 0; h < 2; ++h)
        for (int q = 0; q < 4; ++q) c[h][q] = vdupq_n_f32(0.0f);
    int i = 0;
    for (; i + 64 <= n; i += 64)
        for (int h = 0; h < 2; ++h) bf16_pairs32(x + i + 32 * h, y + i + 32 * h, c[h]);
    double sumf = (double)hsum16(c[0][0], c[0][1], c[0][2], c[0][3]);
    sumf += (double)hsum16(c[1][0], c[1][1], c[1][2], c[1][3]);
    for (; i < n; ++i) sumf += (double)(el_bf16_to_fp32(x[i]) * el_bf16_to_fp32(y[i]));
    *s = (float)sumf;
}

/* tinyBLAS order (batches): one 16-lane accumulator, fma, 16-lane reduction. */
static void vec_dot_f32_tinyblas(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const float *restrict x = vx;
    const float *restrict y = vy;
    float32x4_t c[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
    for (int i = 0; i < n; i += 16)
        for (int q = 0; q < 4; ++q) c[q] = vfmaq_f32(c[q], vld1q_f32(x + i + 4 * q), vld1q_f32(y + i + 4 * q));
    *s = hsum16(c[0], c[1], c[2], c[3]);
}

static void vec_dot_f16_tinyblas(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const el_fp16 *restrict x = vx;
    const el_fp16 *restrict y = vy;
    float32x4_t c[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
    for (int i = 0; i < n; i += 16)
        for (int q = 0; q < 4; ++q) c[q] = vfmaq_f32(c[q], ld_f16x4(x + i + 4 * q), ld_f16x4(y + i + 4 * q));
    *s = hsum16(c[0], c[1], c[2], c[3]);
}

static void vec_dot_bf16_tinyblas(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const el_bf16 *restrict x = vx;
    const el_bf16 *restrict y = vy;
    float32x4_t c[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
    for (int i = 0; i < n; i += 32) bf16_pairs32(x + i, y + i, c);
    *s = hsum16(c[0], c[1], c[2], c[3]);
}

/* The portable selectors' conditions (kernels_portable.c). */
static el_vec_dot_fn select_f32(int n_rows, int row, int k) { (void)row; return n_rows >= 2 && k % 16 == 0 ? vec_dot_f32_tinyblas : NULL; }
static el_vec_dot_fn select_f16(int n_rows, int row, int k) { (void)row; return n_rows >= 2 && k % 16 == 0 ? vec_dot_f16_tinyblas : NULL; }
static el_vec_dot_fn select_bf16(int n_rows, int row, int k) { (void)row; return n_rows >= 2 && k % 32 == 0 ? vec_dot_bf16_tinyblas : NULL; }

/* ---------------------------------------------------------------- gemm blocks */

/*
 * el_gemm_fn (kernels.h): y[t * ldy + r] = dot(weight row r, activation row t)
 * for r < nr, t < nt, each with exactly the bits of the vec_dot (or selected
 * kernel) above: every output keeps its own accumulators and takes the same
 * operations in the same order; only the work is shared — a weight block is
 * unpacked once for several activation rows, an activation block loaded once
 * for several weight rows.
 */
#define ROW(base, ld, i) ((const void *)((const uint8_t *)(base) + (ld) * (size_t)(i)))

/* Q4_0: tiles of 4 weight rows x up to 4 activation rows; the 4 rows' accumulators
 * of one activation row share a vector (lane = weight row). */
static inline __attribute__((always_inline)) void q4_0_tile(int nb, const block_q4_0 *const *wr,
                                                            const block_q8_0 *const *xt, int tn,
                                                            float32x4_t *acc) {
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    const int8x16_t s8 = vdupq_n_s8(8);
    for (int u = 0; u < tn; ++u) acc[u] = vdupq_n_f32(0.0f);
    for (int ib = 0; ib < nb; ++ib) {
        int8x16_t a[4][2];
        float dw[4];
        for (int q = 0; q < 4; ++q) {
            const uint8x16_t v = vld1q_u8(wr[q][ib].qs);
            a[q][0] = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(v, m4)), s8);
            a[q][1] = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(v, 4)), s8);
            dw[q] = h2f(wr[q][ib].d);
        }
        const float32x4_t vdw = vld1q_f32(dw);
        for (int u = 0; u < tn; ++u) {
            const int8x16_t y0 = vld1q_s8(xt[u][ib].qs), y1 = vld1q_s8(xt[u][ib].qs + 16);
            int32x4_t p[4];
            for (int q = 0; q < 4; ++q) p[q] = dot_acc(dot_acc(vdupq_n_s32(0), a[q][0], y0), a[q][1], y1);
            const int32x4_t sums = vpaddq_s32(vpaddq_s32(p[0], p[1]), vpaddq_s32(p[2], p[3]));
            const float32x4_t d = vmulq_n_f32(vdw, h2f(xt[u][ib].d)); /* d_w * d_a per lane */
            acc[u] = vfmaq_f32(acc[u], vcvtq_f32_s32(sums), d);
        }
    }
}

static void gemm_q4_0(int k, const void *w, size_t ldw, int nr, const void *x, size_t ldx, int t0, int nt,
                      int n_act, float *y, size_t ldy) {
    (void)t0;
    (void)n_act;
    const int nb = k / EL_QK8_0;
    int r = 0;
    for (; r + 4 <= nr; r += 4) {
        const block_q4_0 *wr[4];
        for (int q = 0; q < 4; ++q) wr[q] = ROW(w, ldw, r + q);
        int t = 0;
        for (; t + 4 <= nt; t += 4) {
            const block_q8_0 *xt[4];
            float32x4_t acc[4];
            for (int u = 0; u < 4; ++u) xt[u] = ROW(x, ldx, t + u);
            q4_0_tile(nb, wr, xt, 4, acc);
            for (int u = 0; u < 4; ++u) vst1q_f32(y + (size_t)(t + u) * ldy + r, acc[u]);
        }
        if (t < nt) {
            const block_q8_0 *xt[4];
            float32x4_t acc[4];
            const int tn = nt - t;
            for (int u = 0; u < tn; ++u) xt[u] = ROW(x, ldx, t + u);
            q4_0_tile(nb, wr, xt, tn, acc);
            for (int u = 0; u < tn; ++u) vst1q_f32(y + (size_t)(t + u) * ldy + r, acc[u]);
        }
    }
    for (; r < nr; ++r)
        for (int t = 0; t < nt; ++t) vec_dot_q4_0(k, y + (size_t)t * ldy + r, ROW(w, ldw, r), ROW(x, ldx, t));
}

/* Q8_0: tiles of 2 weight rows x up to 4 activation rows, 8 lanes (two vectors) per output. */
static void gemm_q8_0(int k, const void *w, size_t ldw, int nr, const void *x, size_t ldx, int t0, int nt,
                      int n_act, float *y, size_t ldy) {
    (void)t0;
    (void)n_act;
    const int nb = k / EL_QK8_0;
    int r = 0;
    for (; r + 2 <= nr; r += 2) {
        const block_q8_0 *w0 = ROW(w, ldw, r), *w1 = ROW(w, ldw, r + 1);
        for (int t = 0; t < nt; t += 4) {
            const int tn = nt - t < 4 ? nt - t : 4;
            const block_q8_0 *xt[4];
            float32x4_t acc[4][2][2]; /* [act][weight row][lanes 0-3 / 4-7] */
            for (int u = 0; u < tn; ++u) {
                xt[u] = ROW(x, ldx, t + u);
                acc[u][0][0] = acc[u][0][1] = acc[u][1][0] = acc[u][1][1] = vdupq_n_f32(0.0f);
            }
            for (int ib = 0; ib < nb; ++ib) {
                const int8x16_t a00 = vld1q_s8(w0[ib].qs), a01 = vld1q_s8(w0[ib].qs + 16);
                const int8x16_t a10 = vld1q_s8(w1[ib].qs), a11 = vld1q_s8(w1[ib].qs + 16);
                const float d0 = h2f(w0[ib].d), d1 = h2f(w1[ib].d);
                for (int u = 0; u < tn; ++u) {
                    const int8x16_t y0 = vld1q_s8(xt[u][ib].qs), y1 = vld1q_s8(xt[u][ib].qs + 16);
                    const float da = h2f(xt[u][ib].d);
                    const float32x4_t e0 = vdupq_n_f32(d0 * da), e1 = vdupq_n_f32(d1 * da);
                    acc[u][0][0] = vfmaq_f32(acc[u][0][0], e0, vcvtq_f32_s32(dot4(a00, y0)));
                    acc[u][0][1] = vfmaq_f32(acc[u][0][1], e0, vcvtq_f32_s32(dot4(a01, y1)));
                    acc[u][1][0] = vfmaq_f32(acc[u][1][0], e1, vcvtq_f32_s32(dot4(a10, y0)));
                    acc[u][1][1] = vfmaq_f32(acc[u][1][1], e1, vcvtq_f32_s32(dot4(a11, y1)));
                }
            }
            for (int u = 0; u < tn; ++u) {
                y[(size_t)(t + u) * ldy + r] = hsum8(acc[u][0][0], acc[u][0][1]);
                y[(size_t)(t + u) * ldy + r + 1] = hsum8(acc[u][1][0], acc[u][1][1]);
            }
        }
    }
    for (; r < nr; ++r)
        for (int t = 0; t < nt; ++t) vec_dot_q8_0(k, y + (size_t)t * ldy + r, ROW(w, ldw, r), ROW(x, ldx, t));
}

/* Q4_K: one weight row at a time, each super-block unpacked once for up to 8 activation rows;
 * per activation row the gemv or gemm order that select_q4_k picks for it. */
static void gemm_q4_k(int k, const void *w, size_t ldw, int nr, const void *x, size_t ldx, int t0, int nt,
                      int n_act, float *y, size_t ldy) {
    const int nb = k / EL_QK_K;
    const int split = n_act - n_act % 4; /* rows below: gemm (x4) order */
    for (int r = 0; r < nr; ++r) {
        const block_q4_K *wr = ROW(w, ldw, r);
        for (int t = 0; t < nt; t += 8) {
            const int tn = nt - t < 8 ? nt - t : 8;
            float acc[8] = {0}, accm[8] = {0};
            for (int i = 0; i < nb; ++i) {
                int8x16_t a[16];
                int32_t sc[8], mn[8];
                q4_k_unpack(&wr[i], a);
                q4_k_scales(&wr[i], sc, mn);
                const float wd = h2f(wr[i].d), wdmin = h2f(wr[i].dmin);
                for (int u = 0; u < tn; ++u) {
                    const block_q8_K *yb = (const block_q8_K *)ROW(x, ldx, t + u) + i;
                    int32_t p[8];
                    sub32_dots(a, yb->qs, p);
                    const float d = wd * yb->d, dmin = wdmin * yb->d;
                    if (t0 + t + u < split) {
                        for (int j = 0; j < 8; j += 2) {
                            const int32_t isum = sc[j] * p[j] + sc[j + 1] * p[j + 1];
                            const int32_t summ = mn[j] * (yb->bsums[2 * j] + yb->bsums[2 * j + 1]) +
                                                 mn[j + 1] * (yb->bsums[2 * j + 2] + yb->bsums[2 * j + 3]);
                            acc[u] = fmaf((float)isum, d, acc[u]);
                            accm[u] = fmaf((float)summ, dmin, accm[u]);
                        }
                    } else {
                        int32_t isum = 0, summ = 0;
                        for (int j = 0; j < 8; ++j) {
                            isum += sc[j] * p[j];
                            summ += mn[j] * (yb->bsums[2 * j] + yb->bsums[2 * j + 1]);
                        }
                        acc[u] = fmaf((float)isum, d, acc[u]);
                        accm[u] = fmaf((float)summ, dmin, accm[u]);
                    }
                }
            }
            for (int u = 0; u < tn; ++u) y[(size_t)(t + u) * ldy + r] = acc[u] - accm[u];
        }
    }
}

/* Q6_K: one weight row at a time, each super-block unpacked once for up to 8 activation rows. */
static void gemm_q6_k(int k, const void *w, size_t ldw, int nr, const void *x, size_t ldx, int t0, int nt,
                      int n_act, float *y, size_t ldy) {
    (void)t0;
    (void)n_act;
    const int nb = k / EL_QK_K;
    for (int r = 0; r < nr; ++r) {
        const block_q6_K *wr = ROW(w, ldw, r);
        for (int t = 0; t < nt; t += 8) {
            const int tn = nt - t < 8 ? nt - t : 8;
            float32x4_t acc[8][2];
            for (int u = 0; u < tn; ++u) acc[u][0] = acc[u][1] = vdupq_n_f32(0.0f);
            for (int i = 0; i < nb; ++i) {
                int8x16_t a[16];
                q6_k_unpack(&wr[i], a);
                const float wd = h2f(wr[i].d);
                for (int u = 0; u < tn; ++u) {
                    const block_q8_K *yb = (const block_q8_K *)ROW(x, ldx, t + u) + i;
                    int32x4_t L0, L1;
                    q6_k_lanes(a, wr[i].scales, yb, &L0, &L1);
                    const float32x4_t d = vdupq_n_f32(yb->d * wd);
                    acc[u][0] = vfmaq_f32(acc[u][0], d, vcvtq_f32_s32(L0));
                    acc[u][1] = vfmaq_f32(acc[u][1], d, vcvtq_f32_s32(L1));
                }
            }
            for (int u = 0; u < tn; ++u) y[(size_t)(t + u) * ldy + r] = hsum8(acc[u][0], acc[u][1]);
        }
    }
}

/* Q5_K: one weight row at a time, each super-block unpacked once for up to 8 activation rows. */
static void gemm_q5_k(int k, const void *w, size_t ldw, int nr, const void *x, size_t ldx, int t0, int nt,
                      int n_act, float *y, size_t ldy) {
    (void)t0;
    (void)n_act;
    const int nb = k / EL_QK_K;
    for (int r = 0; r < nr; ++r) {
        const block_q5_K *wr = ROW(w, ldw, r);
        for (int t = 0; t < nt; t += 8) {
            const int tn = nt - t < 8 ? nt - t : 8;
            float32x4_t acc[8][2];
            float summs[8];
            for (int u = 0; u < tn; ++u) {
                acc[u][0] = acc[u][1] = vdupq_n_f32(0.0f);
                summs[u] = 0.0f;
            }
            for (int i = 0; i < nb; ++i) {
                int8_t a[EL_QK_K];
                int32_t sc16[16], mn[8];
                q5_k_unpack(&wr[i], a);
                k4_scales16(wr[i].scales, sc16, mn);
                const float wd = h2f(wr[i].d), wdmin = h2f(wr[i].dmin);
                for (int u = 0; u < tn; ++u) {
                    const block_q8_K *yb = (const block_q8_K *)ROW(x, ldx, t + u) + i;
                    const int32_t summ = k4_summ(mn, yb->bsums);
                    summs[u] = fmaf(-yb->d * wdmin, (float)summ, summs[u]);
                    int32x4_t L0, L1;
                    lanes8(a, yb->qs, sc16, &L0, &L1);
                    const float32x4_t d = vdupq_n_f32(yb->d * wd);
                    acc[u][0] = vfmaq_f32(acc[u][0], d, vcvtq_f32_s32(L0));
                    acc[u][1] = vfmaq_f32(acc[u][1], d, vcvtq_f32_s32(L1));
                }
            }
            for (int u = 0; u < tn; ++u) y[(size_t)(t + u) * ldy + r] = hsum8(acc[u][0], acc[u][1]) + summs[u];
        }
    }
}

#undef ROW

/* ---------------------------------------------------------------- Q8_0, Q5_0 in block order */

/*
 * Block order (kernels.h, EL_ORDER_BLOCK; the portable vec_dot_q8_0_q8_0_blk /
 * vec_dot_q5_0_q8_0_blk): per output one float accumulator and per 32-element
 * block one exact integer sum, acc = fma((float)sumi, d_w * d_a, acc), block
 * after block. Four such sums (four weight rows, or four blocks of one row)
 * are formed in one int32x4_t, so the conversion, the d_w * d_a products (one
 * rounding each, FMUL) and the fma (FMLA, one rounding) are lane for lane the
 * portable scalar operations. `q5` is a constant after inlining: 0 Q8_0, 1 Q5_0.
 */

/* A weight block's 32 quants as int8: elements 0-15 (a0), 16-31 (a1); Q5_0 as q - 16 in [-16, 15]. */
static inline __attribute__((always_inline)) void blk_wquants(const int q5, const void *restrict b, int8x16_t *a0,
                                                              int8x16_t *a1) {
    if (q5) {
        const block_q5_0 *x = b;
        uint8x16_t u0, u1;
        unpack5(x->qs, x->qh, &u0, &u1);
        *a0 = vsubq_s8(vreinterpretq_s8_u8(u0), vdupq_n_s8(16));
        *a1 = vsubq_s8(vreinterpretq_s8_u8(u1), vdupq_n_s8(16));
    } else {
        const block_q8_0 *x = b;
        *a0 = vld1q_s8(x->qs);
        *a1 = vld1q_s8(x->qs + 16);
    }
}

/* The scale of a weight block (the first field of both block types). */
static inline __attribute__((always_inline)) const el_fp16 *blk_wd(const int q5, const void *b) {
    return q5 ? &((const block_q5_0 *)b)->d : &((const block_q8_0 *)b)->d;
}

/* Four fp16 values widened (FCVTL: exact, as h2f). */
static inline float32x4_t blk_h2f4(const el_fp16 *p0, const el_fp16 *p1, const el_fp16 *p2, const el_fp16 *p3) {
    uint16x4_t h = vld1_dup_u16(p0);
    h = vld1_lane_u16(p1, h, 1);
    h = vld1_lane_u16(p2, h, 2);
    h = vld1_lane_u16(p3, h, 3);
    return vcvt_f32_f16(vreinterpret_f16_u16(h));
}

/*
 * Lane i = the exact integer dot of block i: weights a[2i], a[2i + 1] with
 * activations y[2i], y[2i + 1]. SDOT with dotprod; without, SMULL/SMLAL into
 * int16 then pairwise widening adds. int16 bounds: a Q8_0 product has
 * |p| <= 128 * 128 = 2^14, so each stays alone in its int16 lane (SADDLP/SADALP
 * widen at once); a Q5_0 product has |p| <= 16 * 128 = 2^11, so a lane holds
 * 4 of them (<= 2^13) and one int16 pairwise add more (<= 2^14) before widening.
 */
static inline __attribute__((always_inline)) int32x4_t blk_sums4(const int q5, const int8x16_t *a, const int8x16_t *y) {
    int32x4_t p[4];
#if defined(__ARM_FEATURE_DOTPROD)
    (void)q5;
    for (int i = 0; i < 4; ++i) p[i] = vdotq_s32(vdotq_s32(vdupq_n_s32(0), a[2 * i], y[2 * i]), a[2 * i + 1], y[2 * i + 1]);
#else
    if (q5) {
        int16x8_t m[4];
        for (int i = 0; i < 4; ++i) {
            const int8x16_t a0 = a[2 * i], a1 = a[2 * i + 1], y0 = y[2 * i], y1 = y[2 * i + 1];
            m[i] = vmull_s8(vget_low_s8(a0), vget_low_s8(y0));
            m[i] = vmlal_high_s8(m[i], a0, y0);
            m[i] = vmlal_s8(m[i], vget_low_s8(a1), vget_low_s8(y1));
            m[i] = vmlal_high_s8(m[i], a1, y1);
        }
        /* [b0, b0, b1, b1] and [b2, b2, b3, b3], then the pairs */
        const int32x4_t s01 = vpaddlq_s16(vpaddq_s16(m[0], m[1])), s23 = vpaddlq_s16(vpaddq_s16(m[2], m[3]));
        return vpaddq_s32(s01, s23);
    }
    for (int i = 0; i < 4; ++i) {
        const int8x16_t a0 = a[2 * i], a1 = a[2 * i + 1], y0 = y[2 * i], y1 = y[2 * i + 1];
        p[i] = vpaddlq_s16(vmull_s8(vget_low_s8(a0), vget_low_s8(y0)));
        p[i] = vpadalq_s16(p[i], vmull_high_s8(a0, y0));
        p[i] = vpadalq_s16(p[i], vmull_s8(vget_low_s8(a1), vget_low_s8(y1)));
        p[i] = vpadalq_s16(p[i], vmull_high_s8(a1, y1));
    }
#endif
    return vpaddq_s32(vpaddq_s32(p[0], p[1]), vpaddq_s32(p[2], p[3]));
}

/* The exact integer dot of one block (the vec_dot tail). */
static inline __attribute__((always_inline)) int32_t blk_sum1(const int q5, int8x16_t a0, int8x16_t a1, int8x16_t y0,
                                                              int8x16_t y1) {
#if defined(__ARM_FEATURE_DOTPROD)
    (void)q5;
    return vaddvq_s32(vdotq_s32(vdotq_s32(vdupq_n_s32(0), a0, y0), a1, y1));
#else
    if (q5) {
        int16x8_t m = vmull_s8(vget_low_s8(a0), vget_low_s8(y0));
        m = vmlal_high_s8(m, a0, y0);
        m = vmlal_s8(m, vget_low_s8(a1), vget_low_s8(y1));
        m = vmlal_high_s8(m, a1, y1);
        return vaddvq_s32(vpaddlq_s16(m));
    }
    return vaddvq_s32(dot_acc(dot_acc(vdupq_n_s32(0), a0, y0), a1, y1));
#endif
}

/* One row: four blocks' sums per vector, then the four fmas in block order. */
static inline __attribute__((always_inline)) void blk_vec_dot(const int q5, int n, float *restrict s,
                                                              const void *restrict vx, const void *restrict vy) {
    const uint8_t *restrict x = vx;
    const block_q8_0 *restrict y = vy;
    const size_t bs = q5 ? sizeof(block_q5_0) : sizeof(block_q8_0);
    const int nb = n / EL_QK8_0;
    float acc = 0.0f;
    int ib = 0;
    for (; ib + 4 <= nb; ib += 4) {
        int8x16_t a[8], v[8];
        const uint8_t *b = x + bs * (size_t)ib;
        for (int i = 0; i < 4; ++i) {
            blk_wquants(q5, b + bs * (size_t)i, &a[2 * i], &a[2 * i + 1]);
            v[2 * i] = vld1q_s8(y[ib + i].qs);
            v[2 * i + 1] = vld1q_s8(y[ib + i].qs + 16);
        }
        const float32x4_t sf = vcvtq_f32_s32(blk_sums4(q5, a, v));
        const float32x4_t d = vmulq_f32(blk_h2f4(blk_wd(q5, b), blk_wd(q5, b + bs), blk_wd(q5, b + 2 * bs),
                                                 blk_wd(q5, b + 3 * bs)),
                                        blk_h2f4(&y[ib].d, &y[ib + 1].d, &y[ib + 2].d, &y[ib + 3].d));
        acc = fmaf(vgetq_lane_f32(sf, 0), vgetq_lane_f32(d, 0), acc);
        acc = fmaf(vgetq_lane_f32(sf, 1), vgetq_lane_f32(d, 1), acc);
        acc = fmaf(vgetq_lane_f32(sf, 2), vgetq_lane_f32(d, 2), acc);
        acc = fmaf(vgetq_lane_f32(sf, 3), vgetq_lane_f32(d, 3), acc);
    }
    for (; ib < nb; ++ib) {
        const uint8_t *b = x + bs * (size_t)ib;
        int8x16_t a0, a1;
        blk_wquants(q5, b, &a0, &a1);
        const int32_t sumi = blk_sum1(q5, a0, a1, vld1q_s8(y[ib].qs), vld1q_s8(y[ib].qs + 16));
        acc = fmaf((float)sumi, h2f(*blk_wd(q5, b)) * h2f(y[ib].d), acc);
    }
    *s = acc;
}

static void vec_dot_q8_0_blk(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    blk_vec_dot(0, n, s, vx, vy);
}

static void vec_dot_q5_0_blk(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    blk_vec_dot(1, n, s, vx, vy);
}

#define BLK_TT 4 /* activation rows of a tile */

/*
 * 4 weight rows (wr[0..3]) x tt activation rows (x, ldx bytes apart), all nb
 * blocks: lane q of acc[u] is the output of weight row q, activation row u.
 * Each weight block is unpacked once for the tt activation rows; each
 * activation block is loaded once for the 4 weight rows. Writes the first n
 * lanes of each activation row's outputs to y (ldy floats apart).
 */
static inline __attribute__((always_inline)) void blk_tile(const int q5, const int tt, int nb,
                                                           const uint8_t *const *wr, const uint8_t *x, size_t ldx,
                                                           float *y, size_t ldy, int n) {
    const size_t bs = q5 ? sizeof(block_q5_0) : sizeof(block_q8_0);
    float32x4_t acc[BLK_TT];
    for (int u = 0; u < tt; ++u) acc[u] = vdupq_n_f32(0.0f);
    for (int ib = 0; ib < nb; ++ib) {
        const uint8_t *b[4];
        int8x16_t a[8];
        for (int q = 0; q < 4; ++q) {
            b[q] = wr[q] + bs * (size_t)ib;
            blk_wquants(q5, b[q], &a[2 * q], &a[2 * q + 1]);
        }
        const float32x4_t dw = blk_h2f4(blk_wd(q5, b[0]), blk_wd(q5, b[1]), blk_wd(q5, b[2]), blk_wd(q5, b[3]));
        for (int u = 0; u < tt; ++u) {
            const block_q8_0 *xb = (const block_q8_0 *)(x + ldx * (size_t)u) + ib;
            const int8x16_t y0 = vld1q_s8(xb->qs), y1 = vld1q_s8(xb->qs + 16);
            const int8x16_t v[8] = {y0, y1, y0, y1, y0, y1, y0, y1};
            const float32x4_t d = vmulq_n_f32(dw, h2f(xb->d)); /* d_w * d_a per lane */
            acc[u] = vfmaq_f32(acc[u], vcvtq_f32_s32(blk_sums4(q5, a, v)), d);
        }
    }
    for (int u = 0; u < tt; ++u) {
        float *yu = y + ldy * (size_t)u;
        if (n == 4) {
            vst1q_f32(yu, acc[u]);
        } else {
            float out[4];
            vst1q_f32(out, acc[u]);
            memcpy(yu, out, sizeof(float) * (size_t)n);
        }
    }
}

/* Groups of 4 weight rows (the last one padded with copies of the last row, whose
 * outputs are not stored) x tiles of up to BLK_TT activation rows. */
static inline __attribute__((always_inline)) void blk_gemm(const int q5, int k, const void *w, size_t ldw, int nr,
                                                           const void *x, size_t ldx, int nt, float *y, size_t ldy) {
    const int nb = k / EL_QK8_0;
    for (int r = 0; r < nr; r += 4) {
        const uint8_t *wr[4];
        for (int q = 0; q < 4; ++q) wr[q] = (const uint8_t *)w + ldw * (size_t)(r + q < nr ? r + q : nr - 1);
        const int n = nr - r < 4 ? nr - r : 4;
        for (int t = 0; t < nt; t += BLK_TT) {
            const uint8_t *xt = (const uint8_t *)x + ldx * (size_t)t;
            float *yt = y + ldy * (size_t)t + r;
            switch (nt - t) { /* each tt a constant, so the tile's loops unroll */
            case 1: blk_tile(q5, 1, nb, wr, xt, ldx, yt, ldy, n); break;
            case 2: blk_tile(q5, 2, nb, wr, xt, ldx, yt, ldy, n); break;
            case 3: blk_tile(q5, 3, nb, wr, xt, ldx, yt, ldy, n); break;
            default: blk_tile(q5, BLK_TT, nb, wr, xt, ldx, yt, ldy, n); break;
            }
        }
    }
}

static void gemm_q8_0_blk(int k, const void *w, size_t ldw, int nr, const void *x, size_t ldx, int t0, int nt,
                          int n_act, float *y, size_t ldy) {
    (void)t0;
    (void)n_act;
    blk_gemm(0, k, w, ldw, nr, x, ldx, nt, y, ldy);
}

static void gemm_q5_0_blk(int k, const void *w, size_t ldw, int nr, const void *x, size_t ldx, int t0, int nt,
                          int n_act, float *y, size_t ldy) {
    (void)t0;
    (void)n_act;
    blk_gemm(1, k, w, ldw, nr, x, ldx, nt, y, ldy);
}

#undef BLK_TT

/* ---------------------------------------------------------------- table */

const el_cpu_type_kernels EL_NEON_TABLE[EL_TYPE_COUNT] = {
    [EL_TYPE_F32] = {EL_TYPE_F32, vec_dot_f32, NULL, select_f32, NULL},
    [EL_TYPE_F16] = {EL_TYPE_F16, vec_dot_f16, NULL, select_f16, NULL},
    [EL_TYPE_BF16] = {EL_TYPE_BF16, vec_dot_bf16, NULL, select_bf16, NULL},
    [EL_TYPE_Q4_0] = {EL_TYPE_Q8_0, vec_dot_q4_0, quantize_q8_0, NULL, gemm_q4_0},
    [EL_TYPE_Q4_1] = {EL_TYPE_Q8_1, vec_dot_q4_1, quantize_q8_1, NULL, NULL},
    [EL_TYPE_Q5_0] = {EL_TYPE_Q8_0, vec_dot_q5_0, quantize_q8_0, NULL, NULL},
    [EL_TYPE_Q5_1] = {EL_TYPE_Q8_1, vec_dot_q5_1, quantize_q8_1, NULL, NULL},
    [EL_TYPE_Q8_0] = {EL_TYPE_Q8_0, vec_dot_q8_0, quantize_q8_0, NULL, gemm_q8_0},
    [EL_TYPE_IQ4_NL] = {EL_TYPE_Q8_0, vec_dot_iq4_nl, quantize_q8_0, NULL, NULL},
    [EL_TYPE_Q2_K] = {EL_TYPE_Q8_K, vec_dot_q2_k, quantize_q8_k, select_q2_k, NULL},
    [EL_TYPE_Q3_K] = {EL_TYPE_Q8_K, vec_dot_q3_k, quantize_q8_k, NULL, NULL},
    [EL_TYPE_Q4_K] = {EL_TYPE_Q8_K, vec_dot_q4_k, quantize_q8_k, select_q4_k, gemm_q4_k},
    [EL_TYPE_Q5_K] = {EL_TYPE_Q8_K, vec_dot_q5_k, quantize_q8_k, NULL, gemm_q5_k},
    [EL_TYPE_Q6_K] = {EL_TYPE_Q8_K, vec_dot_q6_k, quantize_q8_k, NULL, gemm_q6_k},
    [EL_TYPE_IQ4_XS] = {EL_TYPE_Q8_K, vec_dot_iq4_xs, quantize_q8_k, NULL, NULL},
    [EL_TYPE_MXFP4] = {EL_TYPE_Q8_0, vec_dot_mxfp4, quantize_q8_0, NULL, NULL},
};

/* Block order (kernels.h, EL_ORDER_BLOCK): kernels.c takes the Q8_0 and Q5_0
 * entries from this table only, in block order. */
const el_cpu_type_kernels EL_NEON_BLOCK_TABLE[EL_TYPE_COUNT] = {
    [EL_TYPE_Q5_0] = {EL_TYPE_Q8_0, vec_dot_q5_0_blk, quantize_q8_0, NULL, gemm_q5_0_blk},
    [EL_TYPE_Q8_0] = {EL_TYPE_Q8_0, vec_dot_q8_0_blk, quantize_q8_0, NULL, gemm_q8_0_blk},
};
