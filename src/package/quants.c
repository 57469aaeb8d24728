/*
 * quants.c — reference (de)quantization of the ggml formats (see quants.h).
 *
 * Dequantization reproduces ggml's dequantize_row_* value for value: the same
 * float operations in the same order (scale products first, then times the
 * integer quant, minus the min term).  The activation quantizers reproduce
 * ggml's quantize_row_q8_0_ref / q8_1_ref / q8_K_ref bit for bit.
 *
 * Floating-point contraction is disabled so that no compiler fuses a*b+c into
 * an FMA (which would round differently from ggml's reference build).
 */
#include "package/quants.h"

#include <math.h>
#include <string.h>

#include "package/quants_blocks.h"
#include "util/fp16.h"

/* No FMA contraction: clang honours the pragma; GCC does not contract in ISO
 * C mode (-std=c17, as the build uses); -ffp-contract=off makes it explicit. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

const int8_t kvalues_iq4nl[16] = {
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
};

/* E2M1 (sign, 2 exponent bits, 1 mantissa bit) times two: 0 0.5 1 1.5 2 3 4 6, then negated. */
const int8_t kvalues_mxfp4[16] = {
    0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12,
};

/* ---------------------------------------------------------------- plain */

void el_dequant_f32(const void *src, float *dst, int64_t n) {
    if (n > 0 && (const void *)dst != src) memmove(dst, src, (size_t)n * sizeof(float));
}

void el_dequant_f16(const void *src, float *dst, int64_t n) {
    const el_fp16 *s = src;
    for (int64_t i = 0; i < n; ++i) dst[i] = el_fp16_to_fp32(s[i]);
}

void el_dequant_bf16(const void *src, float *dst, int64_t n) {
    const el_bf16 *s = src;
    for (int64_t i = 0; i < n; ++i) dst[i] = el_bf16_to_fp32(s[i]);
}

void el_quant_f32(const float *src, void *dst, int64_t n) {
    if (n > 0 && dst != (const void *)src) memmove(dst, src, (size_t)n * sizeof(float));
}

void el_quant_f16(const float *src, void *dst, int64_t n) {
    el_fp16 *d = dst;
    for (int64_t i = 0; i < n; ++i) d[i] = el_fp32_to_fp16(src[i]);
}

void el_quant_bf16(const float *src, void *dst, int64_t n) {
    el_bf16 *d = dst;
    for (int64_t i = 0; i < n; ++i) d[i] = el_fp32_to_bf16(src[i]);
}

/* ---------------------------------------------------------------- legacy */

void el_dequant_q4_0(const void *src, float *restrict dst, int64_t n) {
    const block_q4_0 *x = src;
    const int64_t nb = n / EL_QK4_0;
    for (int64_t i = 0; i < nb; ++i, dst += EL_QK4_0) {
        const float d = el_fp16_to_fp32(x[i].d);
        for (int j = 0; j < EL_QK4_0 / 2; ++j) {
            const int v0 = (x[i].qs[j] & 0x0F) - 8;
            const int v1 = (x[i].qs[j] >> 4) - 8;
            dst[j] = (float)v0 * d;
            dst[j + EL_QK4_0 / 2] = (float)v1 * d;
        }
    }
}

void el_dequant_q4_1(const void *src, float *restrict dst, int64_t n) {
    const block_q4_1 *x = src;
    const int64_t nb = n / EL_QK4_1;
    for (int64_t i = 0; i < nb; ++i, dst += EL_QK4_1) {
        const float d = el_fp16_to_fp32(x[i].d);
        const float m = el_fp16_to_fp32(x[i].m);
        for (int j = 0; j < EL_QK4_1 / 2; ++j) {
            const int v0 = x[i].qs[j] & 0x0F;
            const int v1 = x[i].qs[j] >> 4;
            dst[j] = (float)v0 * d + m;
            dst[j + EL_QK4_1 / 2] = (float)v1 * d + m;
        }
    }
}

static inline uint32_t load_u32le(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void el_dequant_q5_0(const void *src, float *restrict dst, int64_t n) {
    const block_q5_0 *x = src;
    const int64_t nb = n / EL_QK5_0;
    for (int64_t i = 0; i < nb; ++i, dst += EL_QK5_0) {
        const float d = el_fp16_to_fp32(x[i].d);
        const uint32_t qh = load_u32le(x[i].qh);
        for (int j = 0; j < EL_QK5_0 / 2; ++j) {
            const int h0 = (int)((qh >> j) & 1) << 4;
            const int h1 = (int)((qh >> (j + 16)) & 1) << 4;
            const int v0 = ((x[i].qs[j] & 0x0F) | h0) - 16;
            const int v1 = ((x[i].qs[j] >> 4) | h1) - 16;
            dst[j] = (float)v0 * d;
            dst[j + EL_QK5_0 / 2] = (float)v1 * d;
        }
    }
}

void el_dequant_q5_1(const void *src, float *restrict dst, int64_t n) {
    const block_q5_1 *x = src;
    const int64_t nb = n / EL_QK5_1;
    for (int64_t i = 0; i < nb; ++i, dst += EL_QK5_1) {
        const float d = el_fp16_to_fp32(x[i].d);
        const float m = el_fp16_to_fp32(x[i].m);
        const uint32_t qh = load_u32le(x[i].qh);
        for (int j = 0; j < EL_QK5_1 / 2; ++j) {
            const int h0 = (int)((qh >> j) & 1) << 4;
            const int h1 = (int)((qh >> (j + 16)) & 1) << 4;
            const int v0 = (x[i].qs[j] & 0x0F) | h0;
            const int v1 = (x[i].qs[j] >> 4) | h1;
            dst[j] = (float)v0 * d + m;
            dst[j + EL_QK5_1 / 2] = (float)v1 * d + m;
        }
    }
}

void el_dequant_q8_0(const void *src, float *restrict dst, int64_t n) {
    const block_q8_0 *x = src;
    const int64_t nb = n / EL_QK8_0;
    for (int64_t i = 0; i < nb; ++i, dst += EL_QK8_0) {
        const float d = el_fp16_to_fp32(x[i].d);
        for (int j = 0; j < EL_QK8_0; ++j) dst[j] = (float)x[i].qs[j] * d;
    }
}

/* ---------------------------------------------------------------- K-quants */

void el_dequant_q2_k(const void *src, float *restrict dst, int64_t n) {
    const block_q2_K *x = src;
    const int64_t nb = n / EL_QK_K;
    int8_t a[EL_QK_K];
    for (int64_t i = 0; i < nb; ++i, dst += EL_QK_K) {
        const float d = el_fp16_to_fp32(x[i].d);
        const float dmin = el_fp16_to_fp32(x[i].dmin);
        el_unpack_q2_k(&x[i], a);
        for (int g = 0; g < EL_QK_K / 16; ++g) {
            const uint8_t sc = x[i].scales[g];
            const float dl = d * (float)(sc & 0xF);
            const float ml = dmin * (float)(sc >> 4);
            for (int l = 0; l < 16; ++l) dst[16 * g + l] = dl * (float)a[16 * g + l] - ml;
        }
    }
}

void el_dequant_q3_k(const void *src, float *restrict dst, int64_t n) {
    const block_q3_K *x = src;
    const int64_t nb = n / EL_QK_K;
    int8_t a[EL_QK_K];
    for (int64_t i = 0; i < nb; ++i, dst += EL_QK_K) {
        const float d = el_fp16_to_fp32(x[i].d);
        el_unpack_q3_k(&x[i], a);
        for (int g = 0; g < EL_QK_K / 16; ++g) {
            const float dl = d * (float)(el_q3k_scale(g, x[i].scales) - 32);
            for (int l = 0; l < 16; ++l) dst[16 * g + l] = dl * (float)a[16 * g + l];
        }
    }
}

void el_dequant_q4_k(const void *src, float *restrict dst, int64_t n) {
    const block_q4_K *x = src;
    const int64_t nb = n / EL_QK_K;
    int8_t a[EL_QK_K];
    for (int64_t i = 0; i < nb; ++i, dst += EL_QK_K) {
        const float d = el_fp16_to_fp32(x[i].d);
        const float dmin = el_fp16_to_fp32(x[i].dmin);
        el_unpack_q4_k(&x[i], a);
        for (int g = 0; g < EL_QK_K / 32; ++g) {
            uint8_t sc, m;
            el_get_scale_min_k4(g, x[i].scales, &sc, &m);
            const float d1 = d * (float)sc;
            const float m1 = dmin * (float)m;
            for (int l = 0; l < 32; ++l) dst[32 * g + l] = d1 * (float)a[32 * g + l] - m1;
        }
    }
}

void el_dequant_q5_k(const void *src, float *restrict dst, int64_t n) {
    const block_q5_K *x = src;
    const int64_t nb = n / EL_QK_K;
    int8_t a[EL_QK_K];
    for (int64_t i = 0; i < nb; ++i, dst += EL_QK_K) {
        const float d = el_fp16_to_fp32(x[i].d);
        const float dmin = el_fp16_to_fp32(x[i].dmin);
        el_unpack_q5_k(&x[i], a);
        for (int g = 0; g < EL_QK_K / 32; ++g) {
            uint8_t sc, m;
            el_get_scale_min_k4(g, x[i].scales, &sc, &m);
            const float d1 = d * (float)sc;
            const float m1 = dmin * (float)m;
            for (int l = 0; l < 32; ++l) dst[32 * g + l] = d1 * (float)a[32 * g + l] - m1;
        }
    }
}

void el_dequant_q6_k(const void *src, float *restrict dst, int64_t n) {
    const block_q6_K *x = src;
    const int64_t nb = n / EL_QK_K;
    int8_t a[EL_QK_K];
    for (int64_t i = 0; i < nb; ++i, dst += EL_QK_K) {
        const float d = el_fp16_to_fp32(x[i].d);
        el_unpack_q6_k(&x[i], a);
        for (int g = 0; g < EL_QK_K / 16; ++g) {
            const float dl = d * (float)x[i].scales[g];
            for (int l = 0; l < 16; ++l) dst[16 * g + l] = dl * (float)a[16 * g + l];
        }
    }
}

/* ---------------------------------------------------------------- IQ4 */

void el_dequant_iq4_nl(const void *src, float *restrict dst, int64_t n) {
    const block_iq4_nl *x = src;
    const int64_t nb = n / EL_QK4_NL;
    for (int64_t i = 0; i < nb; ++i, dst += EL_QK4_NL) {
        const float d = el_fp16_to_fp32(x[i].d);
        for (int j = 0; j < EL_QK4_NL / 2; ++j) {
            dst[j] = d * (float)kvalues_iq4nl[x[i].qs[j] & 0xF];
            dst[j + EL_QK4_NL / 2] = d * (float)kvalues_iq4nl[x[i].qs[j] >> 4];
        }
    }
}

void el_dequant_iq4_xs(const void *src, float *restrict dst, int64_t n) {
    const block_iq4_xs *x = src;
    const int64_t nb = n / EL_QK_K;
    for (int64_t i = 0; i < nb; ++i) {
        const float d = el_fp16_to_fp32(x[i].d);
        const uint8_t *qs = x[i].qs;
        for (int ib = 0; ib < EL_QK_K / 32; ++ib, qs += 16, dst += 32) {
            const float dl = d * (float)(el_iq4xs_scale(&x[i], ib) - 32);
            for (int j = 0; j < 16; ++j) {
                dst[j] = dl * (float)kvalues_iq4nl[qs[j] & 0xF];
                dst[j + 16] = dl * (float)kvalues_iq4nl[qs[j] >> 4];
            }
        }
    }
}

/* ---------------------------------------------------------------- MXFP4 */

/* value = (float)code * 2^(e - 128): one product of a small integer and a
 * power of two, exact unless it overflows (e >= 0xFE with |code| >= 8). */
void el_dequant_mxfp4(const void *src, float *restrict dst, int64_t n) {
    const block_mxfp4 *x = src;
    const int64_t nb = n / EL_QK_MXFP4;
    for (int64_t i = 0; i < nb; ++i, dst += EL_QK_MXFP4) {
        const float d = el_e8m0_to_fp32_half(x[i].e);
        for (int j = 0; j < EL_QK_MXFP4 / 2; ++j) {
            dst[j] = (float)kvalues_mxfp4[x[i].qs[j] & 0xF] * d;
            dst[j + EL_QK_MXFP4 / 2] = (float)kvalues_mxfp4[x[i].qs[j] >> 4] * d;
        }
    }
}

int64_t el_mxfp4_find_bad_exponent(const void *src, int64_t nblocks) {
    const uint8_t *p = src;
    for (int64_t i = 0; i < nblocks; ++i)
        if (p[(size_t)i * sizeof(block_mxfp4)] == 0xFF) return i;
    return -1;
}

/* ---------------------------------------------------------------- activations */

/* ggml's Q8_0 reference: d = amax/127, q = roundf(x/d) (half away from zero). */
void el_quant_q8_0(const float *restrict src, void *dst, int64_t n) {
    block_q8_0 *y = dst;
    const int64_t nb = n / EL_QK8_0;
    for (int64_t i = 0; i < nb; ++i, src += EL_QK8_0) {
        float amax = 0.0f;
        for (int j = 0; j < EL_QK8_0; ++j) {
            const float ax = fabsf(src[j]);
            amax = amax > ax ? amax : ax; /* ggml: MAX(amax, fabsf(v)) */
        }
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = el_fp32_to_fp16(d);
        for (int j = 0; j < EL_QK8_0; ++j) y[i].qs[j] = (int8_t)roundf(src[j] * id);
    }
}

/* ggml's Q8_1 reference: as Q8_0, plus s = fp16(d * sum(q)). */
void el_quant_q8_1(const float *restrict src, void *dst, int64_t n) {
    block_q8_1 *y = dst;
    const int64_t nb = n / EL_QK8_1;
    for (int64_t i = 0; i < nb; ++i, src += EL_QK8_1) {
        float amax = 0.0f;
        for (int j = 0; j < EL_QK8_1; ++j) {
            const float ax = fabsf(src[j]);
            amax = amax > ax ? amax : ax; /* ggml: MAX(amax, fabsf(v)) */
        }
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = el_fp32_to_fp16(d);
        int sum = 0;
        for (int j = 0; j < EL_QK8_1; ++j) {
            y[i].qs[j] = (int8_t)roundf(src[j] * id);
            sum += y[i].qs[j];
        }
        y[i].s = el_fp32_to_fp16((float)sum * d);
    }
}

/* ggml's nearest_int: round half to even via the 1.5*2^23 trick (|x| < 2^22). */
static inline int nearest_int(float f) {
    const float v = f + 12582912.0f;
    int32_t i;
    memcpy(&i, &v, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

/* ggml's Q8_K reference: scale from the signed value of largest magnitude,
 * q = min(127, nearest_int(-127/max * x)), d = 1/iscale, bsums per 16. */
void el_quant_q8_k(const float *restrict src, void *dst, int64_t n) {
    block_q8_K *y = dst;
    const int64_t nb = n / EL_QK_K;
    for (int64_t i = 0; i < nb; ++i, src += EL_QK_K) {
        float max = 0.0f, amax = 0.0f;
        for (int j = 0; j < EL_QK_K; ++j) {
            const float ax = fabsf(src[j]);
            if (ax > amax) {
                amax = ax;
                max = src[j];
            }
        }
        if (amax == 0.0f) {
            /* ggml leaves bsums unset here; zero them (they multiply d = 0). */
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        const float iscale = -127.0f / max;
        for (int j = 0; j < EL_QK_K; ++j) {
            const int v = nearest_int(iscale * src[j]);
            y[i].qs[j] = (int8_t)(v < 127 ? v : 127);
        }
        for (int g = 0; g < EL_QK_K / 16; ++g) {
            int sum = 0;
            for (int l = 0; l < 16; ++l) sum += y[i].qs[16 * g + l];
            y[i].bsums[g] = (int16_t)sum;
        }
        y[i].d = 1.0f / iscale;
    }
}
