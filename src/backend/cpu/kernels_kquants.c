/*
 * kernels_kquants.c — portable C dot products of the K-quants (Q2_K … Q6_K)
 * and IQ4_XS against Q8_K activations. Entries of the CPU kernel table
 * (kernels_portable.c); declared in kernels_kquants.h.
 */
#include <math.h>
#include <string.h>

#include "backend/cpu/kernel_common.h"
#include "backend/cpu/kernels_kquants.h"
#include "package/quants.h"
#include "package/quants_blocks.h"
#include "util/fp16.h"

/* No FMA contraction: clang honours the pragma; GCC does not contract in ISO
 * C mode (-std=c17, as the build uses); -ffp-contract=off makes it explicit. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

/*
 * Float operation order: these kernels reproduce, in scalar C, the order of
 * llama.cpp's x86 build (AVX2/AVX-512) so that results are bit-identical to
 * the reference.  Three shapes occur there:
 *
 *  - Q2_K and Q4_K weights are repacked (8 rows interleaved) and multiplied by
 *    the gemv/gemm kernels, which keep ONE float lane per output:
 *    acc = fma(isum, dx*dy, acc) and accm = fma(summ, dmin*dy, accm) with
 *    exact integer partial sums; the result is acc - accm.  The gemv kernel
 *    (single activation rows, and the n % 4 last rows of a batch) takes one
 *    fma per super-block: el_vec_dot_q{2,4}_k_q8_k.  The gemm kernel (the
 *    first n - n % 4 rows of a batch, 4 at a time) takes one fma per 128
 *    (Q2_K) or 64 (Q4_K) elements: el_vec_dot_q{2,4}_k_q8_k_x4.
 *  - Q3_K, Q5_K, Q6_K and IQ4_XS, for batches of fewer than 8 activation
 *    rows, use the AVX2 vec_dot: 8 float lanes, lane l holding the integer sum
 *    over elements 32c + 4l .. 32c + 4l + 3 of every 32-element chunk c,
 *    accumulated as fma(d, lane, acc[l]), reduced with the x86 horizontal sum.
 *    The goldens' llama.cpp build does this for every batch size.
 *  - Newer ggml builds (llama-cpp-python 0.3.36's, unless run with
 *    GGML_CPU_TILED_MM=0) send batches of 8 rows or more of these types
 *    through a "tiled" K-quant matmul with yet another order; the goldens'
 *    build does not, so neither does edgellm.
 * Integer arithmetic is exact, so only the lane assignment matters there.
 * el_select_q2_k / el_select_q4_k (the table's row selectors) tell the matmul
 * which variant a given activation row of an n-row batch needs. llama.cpp
 * repacks only weights whose row count is a multiple of 8 — true of every
 * supported architecture's Q2_K/Q4_K matrices in practice; others would take
 * the AVX2 order, which edgellm does not reproduce for these two types.
 */

/* Batched-order variants (see above) and their selector. */
EL_CPU_CLONES void el_vec_dot_q2_k_q8_k_x4(int n, float *restrict s, const void *restrict vx, const void *restrict vy);
EL_CPU_CLONES void el_vec_dot_q4_k_q8_k_x4(int n, float *restrict s, const void *restrict vx, const void *restrict vy);

/* Integer lanes of one super-block in the AVX2 layout: lane l = sum over the 8
 * chunks c of sc16[2c + l/4] * sum_{k<4} a[32c+4l+k] * q[32c+4l+k]
 * (element e uses scale sc16[e/16]). */
static inline void lanes8_x86(const int8_t *restrict a, const int8_t *restrict q,
                              const int32_t *restrict sc16, int32_t *restrict out) {
    for (int l = 0; l < 8; ++l) out[l] = 0;
    for (int c = 0; c < EL_QK_K / 32; ++c) {
        const int8_t *ac = a + 32 * c, *qc = q + 32 * c;
        for (int l = 0; l < 8; ++l) {
            int32_t p = 0;
            for (int k = 0; k < 4; ++k) p += ac[4 * l + k] * qc[4 * l + k];
            out[l] += sc16[2 * c + (l >> 2)] * p;
        }
    }
}

/* sum over 16 groups of sc16[g] * (sum a*q) — the whole block as one integer. */
static inline int32_t scaled_sum(const int8_t *restrict a, const int8_t *restrict q,
                                 const int32_t *restrict sc16) {
    int32_t sum = 0;
    for (int g = 0; g < EL_QK_K / 16; ++g) {
        int32_t p = 0;
        for (int l = 0; l < 16; ++l) p += a[16 * g + l] * q[16 * g + l];
        sum += sc16[g] * p;
    }
    return sum;
}

/* Q2_K: repacked gemv/gemm order (single lane, separate min accumulator). */
EL_CPU_CLONES void el_vec_dot_q2_k_q8_k(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q2_K *restrict x = vx;
    const block_q8_K *restrict y = vy;
    const int nb = n / EL_QK_K;
    float acc = 0.0f, accm = 0.0f;
    for (int i = 0; i < nb; ++i) {
        int8_t a[EL_QK_K];
        int32_t sc[16];
        el_unpack_q2_k(&x[i], a);
        int32_t summs = 0;
        for (int g = 0; g < 16; ++g) {
            sc[g] = x[i].scales[g] & 0xF;
            summs += y[i].bsums[g] * (x[i].scales[g] >> 4);
        }
        const int32_t isum = scaled_sum(a, y[i].qs, sc);
        const float dall = el_fp16_to_fp32(x[i].d) * y[i].d;
        const float dmin = el_fp16_to_fp32(x[i].dmin) * y[i].d;
        acc = fmaf((float)isum, dall, acc);
        accm = fmaf((float)summs, dmin, accm);
    }
    *s = acc - accm;
}

/* Q2_K, repacked gemm order: one fma pair per half super-block (8 groups of 16). */
EL_CPU_CLONES void el_vec_dot_q2_k_q8_k_x4(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q2_K *restrict x = vx;
    const block_q8_K *restrict y = vy;
    const int nb = n / EL_QK_K;
    float acc = 0.0f, accm = 0.0f;
    for (int i = 0; i < nb; ++i) {
        int8_t a[EL_QK_K];
        el_unpack_q2_k(&x[i], a);
        const float dall = el_fp16_to_fp32(x[i].d) * y[i].d;
        const float dmin = el_fp16_to_fp32(x[i].dmin) * y[i].d;
        for (int h = 0; h < 2; ++h) {
            int32_t isum = 0, summs = 0;
            for (int g = 8 * h; g < 8 * h + 8; ++g) {
                int32_t p = 0;
                for (int l = 0; l < 16; ++l) p += a[16 * g + l] * y[i].qs[16 * g + l];
                isum += (x[i].scales[g] & 0xF) * p;
                summs += y[i].bsums[g] * (x[i].scales[g] >> 4);
            }
            acc = fmaf((float)isum, dall, acc);
            accm = fmaf((float)summs, dmin, accm);
        }
    }
    *s = acc - accm;
}

/* Q3_K: AVX2 vec_dot order. */
EL_CPU_CLONES void el_vec_dot_q3_k_q8_k(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q3_K *restrict x = vx;
    const block_q8_K *restrict y = vy;
    const int nb = n / EL_QK_K;
    float acc[8] = {0};
    for (int i = 0; i < nb; ++i) {
        int8_t a[EL_QK_K];
        int32_t sc[16], lanes[8];
        el_unpack_q3_k(&x[i], a);
        for (int g = 0; g < 16; ++g) sc[g] = el_q3k_scale(g, x[i].scales) - 32;
        lanes8_x86(a, y[i].qs, sc, lanes);
        const float d = y[i].d * el_fp16_to_fp32(x[i].d);
        for (int l = 0; l < 8; ++l) acc[l] = fmaf(d, (float)lanes[l], acc[l]);
    }
    *s = el_hsum8_x86(acc);
}

/* Q4_K / Q5_K: 8 sub-blocks of 32 with 6-bit scales and mins. */
static inline int32_t k4_scales_mins(const uint8_t *packed, const int16_t *restrict bsums,
                                     int32_t *restrict sc16) {
    int32_t summ = 0;
    for (int j = 0; j < 8; ++j) {
        uint8_t sc, m;
        el_get_scale_min_k4(j, packed, &sc, &m);
        sc16[2 * j] = sc16[2 * j + 1] = sc;
        summ += (bsums[2 * j] + bsums[2 * j + 1]) * m;
    }
    return summ;
}

/* Q4_K: repacked gemv/gemm order (single lane, separate min accumulator). */
EL_CPU_CLONES void el_vec_dot_q4_k_q8_k(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q4_K *restrict x = vx;
    const block_q8_K *restrict y = vy;
    const int nb = n / EL_QK_K;
    float acc = 0.0f, accm = 0.0f;
    for (int i = 0; i < nb; ++i) {
        int8_t a[EL_QK_K];
        int32_t sc[16];
        el_unpack_q4_k(&x[i], a);
        const int32_t summ = k4_scales_mins(x[i].scales, y[i].bsums, sc);
        const int32_t isum = scaled_sum(a, y[i].qs, sc);
        const float d = el_fp16_to_fp32(x[i].d) * y[i].d;
        const float dmin = el_fp16_to_fp32(x[i].dmin) * y[i].d;
        acc = fmaf((float)isum, d, acc);
        accm = fmaf((float)summ, dmin, accm);
    }
    *s = acc - accm;
}

/* Q4_K, repacked gemm order: one fma pair per 64 elements (two sub-blocks). */
EL_CPU_CLONES void el_vec_dot_q4_k_q8_k_x4(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q4_K *restrict x = vx;
    const block_q8_K *restrict y = vy;
    const int nb = n / EL_QK_K;
    float acc = 0.0f, accm = 0.0f;
    for (int i = 0; i < nb; ++i) {
        int8_t a[EL_QK_K];
        el_unpack_q4_k(&x[i], a);
        const float d = el_fp16_to_fp32(x[i].d) * y[i].d;
        const float dmin = el_fp16_to_fp32(x[i].dmin) * y[i].d;
        for (int sb = 0; sb < 4; ++sb) {
            int32_t isum = 0, summ = 0;
            for (int j = 2 * sb; j < 2 * sb + 2; ++j) {
                uint8_t sc, m;
                el_get_scale_min_k4(j, x[i].scales, &sc, &m);
                int32_t p = 0;
                for (int l = 0; l < 32; ++l) p += a[32 * j + l] * y[i].qs[32 * j + l];
                isum += sc * p;
                summ += m * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
            }
            acc = fmaf((float)isum, d, acc);
            accm = fmaf((float)summ, dmin, accm);
        }
    }
    *s = acc - accm;
}

/* Q5_K: AVX2 vec_dot order; the mins go to a scalar fma chain added last. */
EL_CPU_CLONES void el_vec_dot_q5_k_q8_k(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q5_K *restrict x = vx;
    const block_q8_K *restrict y = vy;
    const int nb = n / EL_QK_K;
    float acc[8] = {0};
    float summs = 0.0f;
    for (int i = 0; i < nb; ++i) {
        int8_t a[EL_QK_K];
        int32_t sc[16], lanes[8];
        el_unpack_q5_k(&x[i], a);
        const int32_t summ = k4_scales_mins(x[i].scales, y[i].bsums, sc);
        const float d = y[i].d * el_fp16_to_fp32(x[i].d);
        const float dmin = -y[i].d * el_fp16_to_fp32(x[i].dmin);
        summs = fmaf(dmin, (float)summ, summs);
        lanes8_x86(a, y[i].qs, sc, lanes);
        for (int l = 0; l < 8; ++l) acc[l] = fmaf(d, (float)lanes[l], acc[l]);
    }
    *s = el_hsum8_x86(acc) + summs;
}

/* Q6_K: AVX2 vec_dot order.  Quants are used unsigned (0..63); the -32 offset
 * is taken off lane l as 32 * (bsums[2l]*sc[2l] + bsums[2l+1]*sc[2l+1]). */
EL_CPU_CLONES void el_vec_dot_q6_k_q8_k(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q6_K *restrict x = vx;
    const block_q8_K *restrict y = vy;
    const int nb = n / EL_QK_K;
    float acc[8] = {0};
    for (int i = 0; i < nb; ++i) {
        int8_t a[EL_QK_K];
        int32_t sc[16], lanes[8];
        el_unpack_q6_k(&x[i], a);
        for (int e = 0; e < EL_QK_K; ++e) a[e] = (int8_t)(a[e] + 32);
        for (int g = 0; g < 16; ++g) sc[g] = x[i].scales[g];
        lanes8_x86(a, y[i].qs, sc, lanes);
        for (int l = 0; l < 8; ++l)
            lanes[l] -= 32 * (y[i].bsums[2 * l] * sc[2 * l] + y[i].bsums[2 * l + 1] * sc[2 * l + 1]);
        const float d = y[i].d * el_fp16_to_fp32(x[i].d);
        for (int l = 0; l < 8; ++l) acc[l] = fmaf(d, (float)lanes[l], acc[l]);
    }
    *s = el_hsum8_x86(acc);
}

/* Q6_K in block order (kernels.h, EL_ORDER_BLOCK): per super-block the exact
 * integer sum over its 16 groups (scale times the group's dot, the -32 offset
 * included), then one fma. llama.cpp's x86 build has no repacked Q6_K, and
 * its newer builds take prompt batches of Q6_K through a tiled kernel of
 * their own order: this is the order of neither. */
EL_CPU_CLONES void el_vec_dot_q6_k_q8_k_blk(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q6_K *restrict x = vx;
    const block_q8_K *restrict y = vy;
    const int nb = n / EL_QK_K;
    float acc = 0.0f;
    for (int i = 0; i < nb; ++i) {
        int8_t a[EL_QK_K];
        el_unpack_q6_k(&x[i], a);
        int32_t isum = 0;
        for (int g = 0; g < 16; ++g) {
            int32_t p = 0;
            for (int l = 0; l < 16; ++l) p += a[16 * g + l] * y[i].qs[16 * g + l];
            isum += x[i].scales[g] * p;
        }
        acc = fmaf((float)isum, el_fp16_to_fp32(x[i].d) * y[i].d, acc);
    }
    *s = acc;
}

/* IQ4_XS: AVX2 vec_dot order. */
EL_CPU_CLONES void el_vec_dot_iq4_xs_q8_k(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_iq4_xs *restrict x = vx;
    const block_q8_K *restrict y = vy;
    const int nb = n / EL_QK_K;
    float acc[8] = {0};
    for (int i = 0; i < nb; ++i) {
        int8_t a[EL_QK_K];
        int32_t sc[16], lanes[8];
        for (int ib = 0; ib < EL_QK_K / 32; ++ib) {
            uint8_t idx[32];
            unpack_nibbles16(x[i].qs + 16 * ib, idx);
            iq4_lookup32(idx, a + 32 * ib);
            sc[2 * ib] = sc[2 * ib + 1] = el_iq4xs_scale(&x[i], ib) - 32;
        }
        lanes8_x86(a, y[i].qs, sc, lanes);
        const float d = el_fp16_to_fp32(x[i].d) * y[i].d;
        for (int l = 0; l < 8; ++l) acc[l] = fmaf(d, (float)lanes[l], acc[l]);
    }
    *s = el_hsum8_x86(acc);
}

/*
 * The kernel llama.cpp's x86 build effectively runs for activation row `row`
 * of an n_rows-row matmul (weights of 256-multiple K whose row count is a
 * multiple of 8, as in the supported models), or NULL where the type's table
 * entry applies unchanged.
 *  - Q2_K, Q4_K: repacked; rows below n_rows - n_rows % 4 go through the gemm
 *    kernel, the rest (and single rows) through the gemv one.
 *  - Q3_K, Q5_K, Q6_K, IQ4_XS: the table's vec_dot (AVX2 order).
 */
el_vec_dot_fn el_select_q2_k(int n_rows, int row, int k) {
    (void)k;
    return row < n_rows - n_rows % 4 ? el_vec_dot_q2_k_q8_k_x4 : NULL;
}

el_vec_dot_fn el_select_q4_k(int n_rows, int row, int k) {
    (void)k;
    return row < n_rows - n_rows % 4 ? el_vec_dot_q4_k_q8_k_x4 : NULL;
}
