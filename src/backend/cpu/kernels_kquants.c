/*
 * kernels_kquants.c — portable C dot products of the K-quants (Q2_K … Q6_K)
 * and IQ4_XS against Q8_K activations. Entries of the CPU kernel table
 * (kernels_portable.c); declared in kernels_internal.h.
 */
#include <math.h>
#include <string.h>

#include "backend/cpu/kernels.h"
#include "backend/cpu/kernels_internal.h"
#include "package/quants.h"
#include "package/quants_blocks.h"
#include "util/fp16.h"

/* No FMA contraction: clang honours the pragma; GCC does not contract in ISO
 * C mode (-std=c17, as the build uses); -ffp-contract=off makes it explicit. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#define NACC 16 /* partial sums of the float dot products */

/* ---------------------------------------------------------------- K-quants (256) */

/*
 * ggml's 8 integer lanes of one super-block: lane l = sum over elements
 * e = 8k + l of sc16[e/16] * a[e] * q[e].  Computed as 16 lanes and folded
 * (exact integer arithmetic, so identical to ggml's aux32[8]).
 */
static inline void lanes8(const int8_t *restrict a, const int8_t *restrict q,
                          const int32_t *restrict sc16, int32_t *restrict out) {
    int32_t acc[16] = {0};
    for (int g = 0; g < EL_QK_K / 16; ++g) {
        const int32_t sc = sc16[g];
        for (int l = 0; l < 16; ++l) acc[l] += sc * (a[16 * g + l] * q[16 * g + l]);
    }
    for (int l = 0; l < 8; ++l) out[l] = acc[l] + acc[l + 8];
}

/* sum over 16 groups of sc16[g] * (sum_l a*q) — the whole block as one integer. */
static inline int32_t scaled_sum(const int8_t *restrict a, const int8_t *restrict q,
                                 const int32_t *restrict sc16) {
    int32_t acc[16] = {0};
    for (int g = 0; g < EL_QK_K / 16; ++g) {
        const int32_t sc = sc16[g];
        for (int l = 0; l < 16; ++l) acc[l] += sc * (a[16 * g + l] * q[16 * g + l]);
    }
    int32_t sum = 0;
    for (int l = 0; l < 16; ++l) sum += acc[l];
    return sum;
}

void el_vec_dot_q2_k_q8_k(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q2_K *restrict x = vx;
    const block_q8_K *restrict y = vy;
    const int nb = n / EL_QK_K;
    float sumf = 0.0f;
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
        const float dall = y[i].d * el_fp16_to_fp32(x[i].d);
        const float dmin = y[i].d * el_fp16_to_fp32(x[i].dmin);
        sumf += dall * (float)isum - dmin * (float)summs;
    }
    *s = sumf;
}

void el_vec_dot_q3_k_q8_k(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q3_K *restrict x = vx;
    const block_q8_K *restrict y = vy;
    const int nb = n / EL_QK_K;
    float sums[8] = {0};
    for (int i = 0; i < nb; ++i) {
        int8_t a[EL_QK_K];
        int32_t sc[16], lanes[8];
        el_unpack_q3_k(&x[i], a);
        for (int g = 0; g < 16; ++g) sc[g] = el_q3k_scale(g, x[i].scales) - 32;
        lanes8(a, y[i].qs, sc, lanes);
        const float d = el_fp16_to_fp32(x[i].d) * y[i].d;
        for (int l = 0; l < 8; ++l) sums[l] += d * (float)lanes[l];
    }
    float sumf = 0.0f;
    for (int l = 0; l < 8; ++l) sumf += sums[l];
    *s = sumf;
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

void el_vec_dot_q4_k_q8_k(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q4_K *restrict x = vx;
    const block_q8_K *restrict y = vy;
    const int nb = n / EL_QK_K;
    float sums[8] = {0};
    float sumf = 0.0f;
    for (int i = 0; i < nb; ++i) {
        int8_t a[EL_QK_K];
        int32_t sc[16], lanes[8];
        el_unpack_q4_k(&x[i], a);
        const int32_t summ = k4_scales_mins(x[i].scales, y[i].bsums, sc);
        lanes8(a, y[i].qs, sc, lanes);
        const float d = el_fp16_to_fp32(x[i].d) * y[i].d;
        for (int l = 0; l < 8; ++l) sums[l] += d * (float)lanes[l];
        const float dmin = el_fp16_to_fp32(x[i].dmin) * y[i].d;
        sumf -= dmin * (float)summ;
    }
    for (int l = 0; l < 8; ++l) sumf += sums[l];
    *s = sumf;
}

void el_vec_dot_q5_k_q8_k(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q5_K *restrict x = vx;
    const block_q8_K *restrict y = vy;
    const int nb = n / EL_QK_K;
    float sums[8] = {0};
    float sumf = 0.0f;
    for (int i = 0; i < nb; ++i) {
        int8_t a[EL_QK_K];
        int32_t sc[16], lanes[8];
        el_unpack_q5_k(&x[i], a);
        const int32_t summ = k4_scales_mins(x[i].scales, y[i].bsums, sc);
        lanes8(a, y[i].qs, sc, lanes);
        const float d = el_fp16_to_fp32(x[i].d) * y[i].d;
        for (int l = 0; l < 8; ++l) sums[l] += d * (float)lanes[l];
        const float dmin = el_fp16_to_fp32(x[i].dmin) * y[i].d;
        sumf -= dmin * (float)summ;
    }
    for (int l = 0; l < 8; ++l) sumf += sums[l];
    *s = sumf;
}

void el_vec_dot_q6_k_q8_k(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q6_K *restrict x = vx;
    const block_q8_K *restrict y = vy;
    const int nb = n / EL_QK_K;
    float sums[8] = {0};
    for (int i = 0; i < nb; ++i) {
        int8_t a[EL_QK_K];
        int32_t sc[16], lanes[8];
        el_unpack_q6_k(&x[i], a);
        for (int g = 0; g < 16; ++g) sc[g] = x[i].scales[g];
        lanes8(a, y[i].qs, sc, lanes);
        const float d = el_fp16_to_fp32(x[i].d) * y[i].d;
        for (int l = 0; l < 8; ++l) sums[l] += d * (float)lanes[l];
    }
    float sumf = 0.0f;
    for (int l = 0; l < 8; ++l) sumf += sums[l];
    *s = sumf;
}

void el_vec_dot_iq4_xs_q8_k(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_iq4_xs *restrict x = vx;
    const block_q8_K *restrict y = vy;
    const int nb = n / EL_QK_K;
    float sumf = 0.0f;
    for (int i = 0; i < nb; ++i) {
        int32_t sumi[EL_QK_K / 32];
        for (int ib = 0; ib < EL_QK_K / 32; ++ib) {
            uint8_t idx[32];
            int8_t a[32];
            unpack_nibbles16(x[i].qs + 16 * ib, idx);
            iq4_lookup32(idx, a);
            sumi[ib] = dot32(a, y[i].qs + 32 * ib);
        }
        const float d4d8 = el_fp16_to_fp32(x[i].d) * y[i].d;
        for (int ib = 0; ib < EL_QK_K / 32; ++ib) {
            const float dl = d4d8 * (float)(el_iq4xs_scale(&x[i], ib) - 32);
            sumf += dl * (float)sumi[ib];
        }
    }
    *s = sumf;
}

