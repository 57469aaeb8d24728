/*
 * kernels_portable.c — portable C dot products, one per weight type, against
 * the weight type's vec_dot_type (see kernels.h).
 *
 * Numerics follow ggml's generic (non-SIMD) vec_dot_* kernels: the integer
 * part is exact (so any summation order gives the same integers), and the
 * float part performs the same operations in the same order: e.g. Q4_0
 * accumulates sumf += (float)sumi * d_x * d_y per block, and the K-quants
 * keep ggml's 8 float lanes (lane l holds elements e with e % 8 == l).
 * F32/F16/BF16 accumulate float products in double, as ggml's scalar path
 * (ggml_float); the 16 partial sums only change the order of the additions.
 *
 * Each block is first unpacked into plain int8 quants (64-bit SWAR for the
 * 32-element formats, constant-trip loops for the K-quants), then dotted with
 * the int8 activations in plain loops over restrict pointers, which GCC and
 * Clang auto-vectorize (checked with -fopt-info-vec at -O3 -march=native).
 * FP contraction is off: a*b+c is never fused into an FMA.
 */
#include <string.h>

#include "backend/cpu/kernels.h"
#include "package/quants_blocks.h"
#include "util/fp16.h"

/* No FMA contraction: clang honours the pragma; GCC does not contract in ISO
 * C mode (-std=c17, as the build uses); -ffp-contract=off makes it explicit. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#define NACC 16 /* partial sums of the float dot products */

/* ---------------------------------------------------------------- float */

static void vec_dot_f32(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const float *restrict x = vx;
    const float *restrict y = vy;
    double acc[NACC] = {0};
    int i = 0;
    for (; i + NACC <= n; i += NACC)
        for (int l = 0; l < NACC; ++l) acc[l] += (double)(x[i + l] * y[i + l]);
    double sum = 0.0;
    for (; i < n; ++i) sum += (double)(x[i] * y[i]);
    for (int l = 0; l < NACC; ++l) sum += acc[l];
    *s = (float)sum;
}

static void vec_dot_f16(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const el_fp16 *restrict x = vx;
    const el_fp16 *restrict y = vy;
    double acc[NACC] = {0};
    int i = 0;
    for (; i + NACC <= n; i += NACC)
        for (int l = 0; l < NACC; ++l)
            acc[l] += (double)(el_fp16_to_fp32(x[i + l]) * el_fp16_to_fp32(y[i + l]));
    double sum = 0.0;
    for (; i < n; ++i) sum += (double)(el_fp16_to_fp32(x[i]) * el_fp16_to_fp32(y[i]));
    for (int l = 0; l < NACC; ++l) sum += acc[l];
    *s = (float)sum;
}

static void vec_dot_bf16(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const el_bf16 *restrict x = vx;
    const el_bf16 *restrict y = vy;
    double acc[NACC] = {0};
    int i = 0;
    for (; i + NACC <= n; i += NACC)
        for (int l = 0; l < NACC; ++l)
            acc[l] += (double)(el_bf16_to_fp32(x[i + l]) * el_bf16_to_fp32(y[i + l]));
    double sum = 0.0;
    for (; i < n; ++i) sum += (double)(el_bf16_to_fp32(x[i]) * el_bf16_to_fp32(y[i]));
    for (int l = 0; l < NACC; ++l) sum += acc[l];
    *s = (float)sum;
}

/* ---------------------------------------------------------------- legacy (32) */

/*
 * Unpacking is done with 64-bit SWAR (little-endian byte order, as every
 * block format) so that no compiler turns it into byte-wise shuffles; the
 * 32-element integer dot products are plain loops the vectorizers handle.
 */
static inline uint64_t load_u64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline void store_u64(uint8_t *p, uint64_t v) { memcpy(p, &v, sizeof v); }

#define LO4 0x0F0F0F0F0F0F0F0Full

/* 16 bytes of nibbles -> 32 values 0..15: low nibbles (elements 0..15), then high. */
static inline void unpack_nibbles16(const uint8_t *restrict q, uint8_t *restrict a) {
    const uint64_t v0 = load_u64(q), v1 = load_u64(q + 8);
    store_u64(a + 0, v0 & LO4);
    store_u64(a + 8, v1 & LO4);
    store_u64(a + 16, (v0 >> 4) & LO4);
    store_u64(a + 24, (v1 >> 4) & LO4);
}

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

static inline int32_t dot32(const int8_t *restrict a, const int8_t *restrict q) {
    int32_t sum = 0;
    for (int j = 0; j < 32; ++j) sum += a[j] * q[j];
    return sum;
}

static void vec_dot_q4_0_q8_0(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q4_0 *restrict x = vx;
    const block_q8_0 *restrict y = vy;
    const int nb = n / EL_QK8_0;
    float sumf = 0.0f;
    for (int ib = 0; ib < nb; ++ib) {
        uint8_t a[EL_QK8_0];
        unpack_nibbles16(x[ib].qs, a);
        const int32_t sumi = dot32_u(a, y[ib].qs, 8);
        sumf += (float)sumi * el_fp16_to_fp32(x[ib].d) * el_fp16_to_fp32(y[ib].d);
    }
    *s = sumf;
}

static void vec_dot_q4_1_q8_1(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q4_1 *restrict x = vx;
    const block_q8_1 *restrict y = vy;
    const int nb = n / EL_QK8_1;
    float sumf = 0.0f;
    for (int ib = 0; ib < nb; ++ib) {
        uint8_t a[EL_QK8_1];
        unpack_nibbles16(x[ib].qs, a);
        const int32_t sumi = dot32_u(a, y[ib].qs, 0);
        sumf += (el_fp16_to_fp32(x[ib].d) * el_fp16_to_fp32(y[ib].d)) * (float)sumi +
                el_fp16_to_fp32(x[ib].m) * el_fp16_to_fp32(y[ib].s);
    }
    *s = sumf;
}

static inline uint32_t load_u32le(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void vec_dot_q5_0_q8_0(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q5_0 *restrict x = vx;
    const block_q8_0 *restrict y = vy;
    const int nb = n / EL_QK8_0;
    float sumf = 0.0f;
    for (int ib = 0; ib < nb; ++ib) {
        uint8_t a[EL_QK8_0];
        unpack_5bit(x[ib].qs, load_u32le(x[ib].qh), a);
        const int32_t sumi = dot32_u(a, y[ib].qs, 16);
        sumf += (el_fp16_to_fp32(x[ib].d) * el_fp16_to_fp32(y[ib].d)) * (float)sumi;
    }
    *s = sumf;
}

static void vec_dot_q5_1_q8_1(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q5_1 *restrict x = vx;
    const block_q8_1 *restrict y = vy;
    const int nb = n / EL_QK8_1;
    float sumf = 0.0f;
    for (int ib = 0; ib < nb; ++ib) {
        uint8_t a[EL_QK8_1];
        unpack_5bit(x[ib].qs, load_u32le(x[ib].qh), a);
        const int32_t sumi = dot32_u(a, y[ib].qs, 0);
        sumf += (el_fp16_to_fp32(x[ib].d) * el_fp16_to_fp32(y[ib].d)) * (float)sumi +
                el_fp16_to_fp32(x[ib].m) * el_fp16_to_fp32(y[ib].s);
    }
    *s = sumf;
}

static void vec_dot_q8_0_q8_0(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q8_0 *restrict x = vx;
    const block_q8_0 *restrict y = vy;
    const int nb = n / EL_QK8_0;
    float sumf = 0.0f;
    for (int ib = 0; ib < nb; ++ib) {
        const int32_t sumi = dot32(x[ib].qs, y[ib].qs);
        sumf += (float)sumi * (el_fp16_to_fp32(x[ib].d) * el_fp16_to_fp32(y[ib].d));
    }
    *s = sumf;
}

/* 32 IQ4 indices (nibble-unpacked) -> code values. */
static inline void iq4_lookup32(const uint8_t *restrict idx, int8_t *restrict a) {
    for (int j = 0; j < 32; ++j) a[j] = kvalues_iq4nl[idx[j]];
}

static void vec_dot_iq4_nl_q8_0(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_iq4_nl *restrict x = vx;
    const block_q8_0 *restrict y = vy;
    const int nb = n / EL_QK8_0;
    float sumf = 0.0f;
    for (int ib = 0; ib < nb; ++ib) {
        uint8_t idx[EL_QK4_NL];
        int8_t a[EL_QK4_NL];
        unpack_nibbles16(x[ib].qs, idx);
        iq4_lookup32(idx, a);
        const int32_t sumi = dot32(a, y[ib].qs);
        const float d = el_fp16_to_fp32(y[ib].d) * el_fp16_to_fp32(x[ib].d);
        sumf += d * (float)sumi;
    }
    *s = sumf;
}

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

static void vec_dot_q2_k_q8_k(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
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

static void vec_dot_q3_k_q8_k(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
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

static void vec_dot_q4_k_q8_k(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
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

static void vec_dot_q5_k_q8_k(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
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

static void vec_dot_q6_k_q8_k(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
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

static void vec_dot_iq4_xs_q8_k(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
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

/* ---------------------------------------------------------------- table */

static const el_cpu_type_kernels k_portable[EL_TYPE_COUNT] = {
    [EL_TYPE_F32] = {EL_TYPE_F32, vec_dot_f32},
    [EL_TYPE_F16] = {EL_TYPE_F16, vec_dot_f16},
    [EL_TYPE_BF16] = {EL_TYPE_BF16, vec_dot_bf16},
    [EL_TYPE_Q4_0] = {EL_TYPE_Q8_0, vec_dot_q4_0_q8_0},
    [EL_TYPE_Q4_1] = {EL_TYPE_Q8_1, vec_dot_q4_1_q8_1},
    [EL_TYPE_Q5_0] = {EL_TYPE_Q8_0, vec_dot_q5_0_q8_0},
    [EL_TYPE_Q5_1] = {EL_TYPE_Q8_1, vec_dot_q5_1_q8_1},
    [EL_TYPE_Q8_0] = {EL_TYPE_Q8_0, vec_dot_q8_0_q8_0},
    [EL_TYPE_Q2_K] = {EL_TYPE_Q8_K, vec_dot_q2_k_q8_k},
    [EL_TYPE_Q3_K] = {EL_TYPE_Q8_K, vec_dot_q3_k_q8_k},
    [EL_TYPE_Q4_K] = {EL_TYPE_Q8_K, vec_dot_q4_k_q8_k},
    [EL_TYPE_Q5_K] = {EL_TYPE_Q8_K, vec_dot_q5_k_q8_k},
    [EL_TYPE_Q6_K] = {EL_TYPE_Q8_K, vec_dot_q6_k_q8_k},
    [EL_TYPE_IQ4_NL] = {EL_TYPE_Q8_0, vec_dot_iq4_nl_q8_0},
    [EL_TYPE_IQ4_XS] = {EL_TYPE_Q8_K, vec_dot_iq4_xs_q8_k},
};

const el_cpu_type_kernels *el_cpu_kernels_portable(el_type t) {
    if ((int)t < 0 || (int)t >= EL_TYPE_COUNT || !k_portable[t].vec_dot) return NULL;
    return &k_portable[t];
}
