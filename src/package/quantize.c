/*
 * quantize.c — llama.cpp-exact weight quantization (see quantize.h).
 *
 * Row quantizers: the arithmetic of ggml's reference quantizers (the path
 * llama.cpp's quantizer takes without an importance matrix), one float
 * operation at a time in the same order, so the blocks come out byte-equal.
 * Every scale is rounded to fp16 before the quants are derived from it, as
 * ggml does, and "round to nearest" is ggml's magic-number trick (ties to
 * even, inputs below 2^22 in magnitude).
 *
 * Type plan: llama.cpp's tensor type choice for a file type, see el_quant_plan.
 */
#include "package/quantize.h"

#include <ctype.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "package/quants.h"
#include "package/quants_blocks.h"
#include "util/fp16.h"

/* No FMA contraction (it rounds differently from ggml's build): clang honours
 * the pragma; GCC does not contract in ISO C mode (-std=c17). */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

/* Smallest group maximum that is not treated as all zero (ggml's GROUP_MAX_EPS). */
#define QZ_EPS 1e-15f

static inline int imin(int a, int b) { return a < b ? a : b; }
static inline int imax(int a, int b) { return a > b ? a : b; }
static inline int iclamp(int v, int lo, int hi) { return imax(lo, imin(hi, v)); }

/* Round to nearest, ties to even, by adding 1.5 * 2^23 and reading the
 * mantissa: the result ggml's quantizers use (valid for |v| < 2^22). */
static inline int round_magic(float v) {
    const float biased = v + 12582912.0f;
    const uint32_t bits = el_f32_to_bits(biased);
    return (int)(bits & 0x007fffffu) - 0x00400000;
}

/* float -> integer truncation as ggml's x86-64 build does it (cvttss2si, then
 * the low byte): values outside the int32 range and NaN give INT32_MIN, whose
 * low byte is 0. They arise only for float32-subnormal groups, where the
 * inverse scale overflows to infinity; C leaves that conversion undefined,
 * so it is spelled out here. */
static inline int32_t trunc_i32(float v) {
    if (!(v > -2147483648.0f && v < 2147483648.0f)) return INT32_MIN;
    return (int32_t)v;
}
static inline int8_t low_i8(int32_t v) { return (int8_t)(uint8_t)((uint32_t)v & 0xFFu); }

/* ------------------------------------------------ legacy 32-element formats */

/* The signed value of the first element with the largest magnitude (0 when
 * all are zero). */
static float signed_absmax(const float *x, int n) {
    float a = 0.0f, v = 0.0f;
    for (int i = 0; i < n; ++i) {
        if (a < fabsf(x[i])) { a = fabsf(x[i]); v = x[i]; }
    }
    return v;
}

/* Symmetric 4/5-bit (Q4_0, Q5_0): d = signed max / -2^(bits-1); quant =
 * trunc(x/d + offset + 0.5), capped at the top code. Fills q[32] with codes. */
static float sym_block(const float *x, int half_range, uint8_t q[32]) {
    const float peak = signed_absmax(x, 32);
    const float d = peak / (float)-half_range;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const float bias = (float)half_range + 0.5f;
    const int top = 2 * half_range - 1;
    for (int j = 0; j < 32; ++j) {
        const int8_t t = low_i8(trunc_i32(x[j] * id + bias));
        q[j] = (uint8_t)imin(top, t);
    }
    return d;
}

/* Asymmetric 4/5-bit (Q4_1, Q5_1): d = (max - min) / (2^bits - 1), m = min. */
static void asym_block(const float *x, int levels, uint8_t q[32], float *d_out, float *m_out,
                       int cap) {
    float lo = FLT_MAX, hi = -FLT_MAX;
    for (int j = 0; j < 32; ++j) {
        if (x[j] < lo) lo = x[j];
        if (x[j] > hi) hi = x[j];
    }
    const float d = (hi - lo) / (float)levels;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < 32; ++j) {
        const float v = (x[j] - lo) * id + 0.5f;
        const int32_t t = trunc_i32(v);
        q[j] = cap ? (uint8_t)imin(levels, low_i8(t)) : (uint8_t)((uint32_t)t & 0xFFu);
    }
    *d_out = d;
    *m_out = lo;
}

static void pack_nibbles(const uint8_t q[32], uint8_t qs[16]) {
    for (int j = 0; j < 16; ++j) qs[j] = (uint8_t)((q[j] & 0x0F) | ((q[j + 16] & 0x0F) << 4));
}

static void pack_fifth_bits(const uint8_t q[32], uint8_t qh_out[4]) {
    uint32_t qh = 0;
    for (int j = 0; j < 32; ++j) qh |= (uint32_t)((q[j] >> 4) & 1u) << j;
    memcpy(qh_out, &qh, 4);
}

static void q4_0_rows(const float *x, void *dst, int64_t nb) {
    block_q4_0 *y = dst;
    uint8_t q[32];
    for (int64_t i = 0; i < nb; ++i, x += 32) {
        y[i].d = el_fp32_to_fp16(sym_block(x, 8, q));
        pack_nibbles(q, y[i].qs);
    }
}

void el_quantize_row_q4_0(const float *src, void *dst, int64_t n) { q4_0_rows(src, dst, n / 32); }

static void q5_0_rows(const float *x, void *dst, int64_t nb) {
    block_q5_0 *y = dst;
    uint8_t q[32];
    for (int64_t i = 0; i < nb; ++i, x += 32) {
        y[i].d = el_fp32_to_fp16(sym_block(x, 16, q));
        pack_nibbles(q, y[i].qs);
        pack_fifth_bits(q, y[i].qh);
    }
}

static void q4_1_rows(const float *x, void *dst, int64_t nb) {
    block_q4_1 *y = dst;
    uint8_t q[32];
    float d, m;
    for (int64_t i = 0; i < nb; ++i, x += 32) {
        asym_block(x, 15, q, &d, &m, 1);
        y[i].d = el_fp32_to_fp16(d);
        y[i].m = el_fp32_to_fp16(m);
        pack_nibbles(q, y[i].qs);
    }
}

/* Q8_0: d = absmax / 127, quants round(x / d) (half away from zero). */
static void q8_0_rows(const float *x, void *dst, int64_t nb) {
    block_q8_0 *y = dst;
    for (int64_t i = 0; i < nb; ++i, x += 32) {
        float amax = 0.0f;
        for (int j = 0; j < 32; ++j) amax = amax > fabsf(x[j]) ? amax : fabsf(x[j]);
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = el_fp32_to_fp16(d);
        for (int j = 0; j < 32; ++j) y[i].qs[j] = low_i8(trunc_i32(roundf(x[j] * id)));
    }
}

static void q5_1_rows(const float *x, void *dst, int64_t nb) {
    block_q5_1 *y = dst;
    uint8_t q[32];
    float d, m;
    for (int64_t i = 0; i < nb; ++i, x += 32) {
        asym_block(x, 31, q, &d, &m, 0);
        y[i].d = el_fp32_to_fp16(d);
        y[i].m = el_fp32_to_fp16(m);
        pack_nibbles(q, y[i].qs);
        pack_fifth_bits(q, y[i].qh);
    }
}

/* --------------------------------------------------- K-quant scale searches */

/* Signed symmetric group quantizer with a weighted least-squares scale
 * (ggml's make_qx_quants, weights x^2, no importance matrix): tries the
 * plain scale and 18 perturbed ones, keeps the best. Codes in [0, 2*nmax). */
static float fit_signed_weighted(int n, int nmax, const float *x, int8_t *L) {
    float amax = 0.0f, peak = 0.0f;
    for (int i = 0; i < n; ++i) {
        const float ax = fabsf(x[i]);
        if (ax > amax) { amax = ax; peak = x[i]; }
    }
    if (amax < QZ_EPS) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    float iscale = (float)-nmax / peak;
    float sumlx = 0.0f, suml2 = 0.0f;
    for (int i = 0; i < n; ++i) {
        const int l = iclamp(round_magic(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)(l + nmax);
        const float w = x[i] * x[i];
        sumlx += w * x[i] * (float)l;
        suml2 += w * (float)l * (float)l;
    }
    float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int step = -9; step <= 9; ++step) {
        if (step == 0) continue;
        iscale = -((float)nmax + 0.1f * (float)step) / peak;
        float slx = 0.0f, sl2 = 0.0f;
        for (int i = 0; i < n; ++i) {
            const int l = iclamp(round_magic(iscale * x[i]), -nmax, nmax - 1);
            const float w = x[i] * x[i];
            slx += w * x[i] * (float)l;
            sl2 += w * (float)l * (float)l;
        }
        if (sl2 > 0.0f && slx * slx > best * sl2) {
            for (int i = 0; i < n; ++i)
                L[i] = (int8_t)(nmax + iclamp(round_magic(iscale * x[i]), -nmax, nmax - 1));
            scale = slx / sl2;
            best = scale * slx;
        }
    }
    return scale;
}

/* Signed 3-bit group quantizer (ggml's make_q3_quants with rmse): start from
 * the max-based scale, then up to 5 passes of per-element coordinate descent
 * on the x^2-weighted fit. Codes in [0, 2*nmax). */
static float fit_signed_q3(int n, int nmax, const float *x, int8_t *L) {
    float amax = 0.0f, peak = 0.0f;
    for (int i = 0; i < n; ++i) {
        const float ax = fabsf(x[i]);
        if (ax > amax) { amax = ax; peak = x[i]; }
    }
    if (amax < QZ_EPS) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    const float iscale = (float)-nmax / peak;
    float sumlx = 0.0f, suml2 = 0.0f;
    for (int i = 0; i < n; ++i) {
        const int l = iclamp(round_magic(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)l;
        const float w = x[i] * x[i];
        sumlx += w * x[i] * (float)l;
        suml2 += w * (float)l * (float)l;
    }
    for (int pass = 0; pass < 5; ++pass) {
        int changed = 0;
        for (int i = 0; i < n; ++i) {
            const float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * (float)L[i];
            if (!(slx > 0.0f)) continue;
            float sl2 = suml2 - w * (float)L[i] * (float)L[i];
            const int nl = iclamp(round_magic(x[i] * sl2 / slx), -nmax, nmax - 1);
            if (nl == L[i]) continue;
            slx += w * x[i] * (float)nl;
            sl2 += w * (float)nl * (float)nl;
            if (sl2 > 0.0f && slx * slx * suml2 > sumlx * sumlx * sl2) {
                L[i] = (int8_t)nl;
                sumlx = slx;
                suml2 = sl2;
                ++changed;
            }
        }
        if (!changed) break;
    }
    for (int i = 0; i < n; ++i) L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* Scale-and-min group quantizer (ggml's make_qkx2_quants): codes in
 * [0, nmax] for x ≈ scale*L - min; grid-searches nstep+1 scales between
 * (nmax + rmin) and (nmax + rmin + nstep*rdelta) over the range, fitting
 * scale and min by weighted least squares for each, and keeps the one with
 * the least weighted error (absolute when use_mad, else squared).
 * Returns scale; *neg_min = -min (>= 0). */
static float fit_scale_min(int n, int nmax, const float *x, const float *w, uint8_t *L,
                           float *neg_min, uint8_t *Ltry, float rmin, float rdelta, int nstep,
                           int use_mad) {
    float lo = x[0], hi = x[0];
    float sum_w = w[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        if (x[i] < lo) lo = x[i];
        if (x[i] > hi) hi = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (lo > 0.0f) lo = 0.0f;
    if (hi == lo) {
        memset(L, 0, (size_t)n);
        *neg_min = -lo;
        return 0.0f;
    }
    /* lo is the current min: the search continues from the best fit so far */
    float iscale = (float)nmax / (hi - lo);
    float scale = 1.0f / iscale;
    float best_err = 0.0f;
    for (int i = 0; i < n; ++i) {
        L[i] = (uint8_t)iclamp(round_magic(iscale * (x[i] - lo)), 0, nmax);
        float e = scale * (float)L[i] + lo - x[i];
        e = use_mad ? fabsf(e) : e * e;
        best_err += w[i] * e;
    }
    for (int s = 0; s <= nstep; ++s) {
        iscale = (rmin + rdelta * (float)s + (float)nmax) / (hi - lo);
        float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
        for (int i = 0; i < n; ++i) {
            const int l = iclamp(round_magic(iscale * (x[i] - lo)), 0, nmax);
            Ltry[i] = (uint8_t)l;
            sum_l += w[i] * (float)l;
            sum_l2 += w[i] * (float)l * (float)l;
            sum_xl += w[i] * (float)l * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (!(D > 0.0f)) continue;
        float s_try = (sum_w * sum_xl - sum_x * sum_l) / D;
        float m_try = (sum_l2 * sum_x - sum_l * sum_xl) / D;
        if (m_try > 0.0f) {
            m_try = 0.0f;
            s_try = sum_xl / sum_l2;
        }
        float err = 0.0f;
        for (int i = 0; i < n; ++i) {
            float e = s_try * (float)Ltry[i] + m_try - x[i];
            e = use_mad ? fabsf(e) : e * e;
            err += w[i] * e;
        }
        if (err < best_err) {
            memcpy(L, Ltry, (size_t)n);
            best_err = err;
            scale = s_try;
            lo = m_try;
        }
    }
    *neg_min = -lo;
    return scale;
}

/* 6-bit scale/min pairs of Q4_K/Q5_K: sub-blocks 0-3 whole in bytes 0-7,
 * sub-blocks 4-7 as nibbles in bytes 8-11 plus 2 high bits on bytes 0-7. */
static void pack_k4_scales(uint8_t out[12], const uint8_t ls[8], const uint8_t lm[8]) {
    for (int j = 0; j < 4; ++j) {
        out[j] = ls[j];
        out[j + 4] = lm[j];
    }
    for (int j = 4; j < 8; ++j) {
        out[j + 4] = (uint8_t)((ls[j] & 0x0F) | ((lm[j] & 0x0F) << 4));
        out[j - 4] |= (uint8_t)((ls[j] >> 4) << 6);
        out[j] |= (uint8_t)((lm[j] >> 4) << 6);
    }
}

static void unpack_k4_scale(int j, const uint8_t s[12], int *sc, int *m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4);
        *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

/* Shared by Q4_K (nmax 15) and Q5_K (nmax 31): 8 sub-blocks of 32, each fit
 * with scale and min, both then quantized to 6 bits against the super-block
 * maxima; the final codes are recomputed from the stored (rounded) scales. */
static void k_scale_min_superblock(const float *x, int nmax, float rmin, int nstep,
                                   uint8_t scales_out[12], el_fp16 *d_out, el_fp16 *dmin_out,
                                   uint8_t L[EL_QK_K]) {
    float scales[8], mins[8], w[32];
    uint8_t Ltry[32];
    float max_scale = 0.0f, max_min = 0.0f;
    for (int j = 0; j < 8; ++j) {
        const float *xs = x + 32 * j;
        float sum_x2 = 0.0f;
        for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
        const float av = sqrtf(sum_x2 / 32.0f);
        for (int l = 0; l < 32; ++l) w[l] = av + fabsf(xs[l]);
        scales[j] = fit_scale_min(32, nmax, xs, w, L + 32 * j, &mins[j], Ltry, rmin, 0.1f, nstep, 0);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    const float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
    const float inv_min = max_min > 0.0f ? 63.0f / max_min : 0.0f;
    uint8_t ls[8], lm[8];
    for (int j = 0; j < 8; ++j) {
        const uint8_t a = (uint8_t)round_magic(inv_scale * scales[j]);
        const uint8_t b = (uint8_t)round_magic(inv_min * mins[j]);
        ls[j] = a < 63 ? a : 63;
        lm[j] = b < 63 ? b : 63;
    }
    memset(scales_out, 0, 12);
    pack_k4_scales(scales_out, ls, lm);
    *d_out = el_fp32_to_fp16(max_scale / 63.0f);
    *dmin_out = el_fp32_to_fp16(max_min / 63.0f);
    const float dd = el_fp16_to_fp32(*d_out), dm = el_fp16_to_fp32(*dmin_out);
    for (int j = 0; j < 8; ++j) {
        int sc, m;
        unpack_k4_scale(j, scales_out, &sc, &m);
        const float d = dd * (float)sc;
        if (d == 0.0f) continue;
        const float off = dm * (float)m;
        for (int i = 0; i < 32; ++i)
            L[32 * j + i] = (uint8_t)iclamp(round_magic((x[32 * j + i] + off) / d), 0, nmax);
    }
}

static void q4_k_rows(const float *x, void *dst, int64_t nb) {
    block_q4_K *y = dst;
    uint8_t L[EL_QK_K];
    for (int64_t i = 0; i < nb; ++i, x += EL_QK_K) {
        k_scale_min_superblock(x, 15, -1.0f, 20, y[i].scales, &y[i].d, &y[i].dmin, L);
        /* 64-element chunks: first 32 in the low nibbles, next 32 high */
        for (int c = 0; c < 4; ++c)
            for (int l = 0; l < 32; ++l)
                y[i].qs[32 * c + l] = (uint8_t)(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
    }
}

static void q5_k_rows(const float *x, void *dst, int64_t nb) {
    block_q5_K *y = dst;
    uint8_t L[EL_QK_K];
    for (int64_t i = 0; i < nb; ++i, x += EL_QK_K) {
        k_scale_min_superblock(x, 31, -0.5f, 15, y[i].scales, &y[i].d, &y[i].dmin, L);
        memset(y[i].qh, 0, sizeof y[i].qh);
        for (int c = 0; c < 4; ++c) {
            const uint8_t bit_lo = (uint8_t)(1u << (2 * c)), bit_hi = (uint8_t)(2u << (2 * c));
            for (int l = 0; l < 32; ++l) {
                int a = L[64 * c + l], b = L[64 * c + 32 + l];
                if (a > 15) { a -= 16; y[i].qh[l] |= bit_lo; }
                if (b > 15) { b -= 16; y[i].qh[l] |= bit_hi; }
                y[i].qs[32 * c + l] = (uint8_t)(a | (b << 4));
            }
        }
    }
}

static void q2_k_rows(const float *x, void *dst, int64_t nb) {
    block_q2_K *y = dst;
    uint8_t L[EL_QK_K], Ltry[16];
    float w[16], scales[16], mins[16];
    for (int64_t i = 0; i < nb; ++i, x += EL_QK_K) {
        float max_scale = 0.0f, max_min = 0.0f;
        for (int j = 0; j < 16; ++j) {
            for (int l = 0; l < 16; ++l) w[l] = fabsf(x[16 * j + l]);
            scales[j] = fit_scale_min(16, 3, x + 16 * j, w, L + 16 * j, &mins[j], Ltry, -0.5f, 0.1f, 15, 1);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        if (max_scale > 0.0f) {
            const float is = 15.0f / max_scale;
            for (int j = 0; j < 16; ++j) y[i].scales[j] = (uint8_t)round_magic(is * scales[j]);
            y[i].d = el_fp32_to_fp16(max_scale / 15.0f);
        } else {
            memset(y[i].scales, 0, sizeof y[i].scales);
            y[i].d = el_fp32_to_fp16(0.0f);
        }
        if (max_min > 0.0f) {
            const float im = 15.0f / max_min;
            for (int j = 0; j < 16; ++j) y[i].scales[j] |= (uint8_t)((uint32_t)round_magic(im * mins[j]) << 4);
            y[i].dmin = el_fp32_to_fp16(max_min / 15.0f);
        } else {
            y[i].dmin = el_fp32_to_fp16(0.0f);
        }
        const float dd = el_fp16_to_fp32(y[i].d), dm = el_fp16_to_fp32(y[i].dmin);
        for (int j = 0; j < 16; ++j) {
            const float d = dd * (float)(y[i].scales[j] & 0x0F);
            if (d == 0.0f) continue;
            const float off = dm * (float)(y[i].scales[j] >> 4);
            for (int l = 0; l < 16; ++l)
                L[16 * j + l] = (uint8_t)iclamp(round_magic((x[16 * j + l] + off) / d), 0, 3);
        }
        for (int c = 0; c < 2; ++c)
            for (int l = 0; l < 32; ++l) {
                const uint8_t *s = L + 128 * c + l;
                y[i].qs[32 * c + l] = (uint8_t)(s[0] | (s[32] << 2) | (s[64] << 4) | (s[96] << 6));
            }
    }
}

static void q3_k_rows(const float *x, void *dst, int64_t nb) {
    block_q3_K *y = dst;
    int8_t L[EL_QK_K];
    float scales[16];
    for (int64_t i = 0; i < nb; ++i, x += EL_QK_K) {
        float amax = 0.0f, max_scale = 0.0f;
        for (int j = 0; j < 16; ++j) {
            scales[j] = fit_signed_q3(16, 4, x + 16 * j, L + 16 * j);
            if (fabsf(scales[j]) > amax) { amax = fabsf(scales[j]); max_scale = scales[j]; }
        }
        memset(y[i].scales, 0, 12);
        if (max_scale != 0.0f) {
            const float is = -32.0f / max_scale;
            for (int j = 0; j < 16; ++j) {
                /* 6-bit code (offset 32): low nibble in bytes 0-7 (j < 8 low
                 * half, else high half), top 2 bits in bytes 8-11 */
                const int8_t r = (int8_t)round_magic(is * scales[j]);
                const int code = iclamp(r, -32, 31) + 32;
                if (j < 8) y[i].scales[j] = (uint8_t)(code & 0x0F);
                else y[i].scales[j - 8] |= (uint8_t)((code & 0x0F) << 4);
                y[i].scales[8 + j % 4] |= (uint8_t)((code >> 4) << (2 * (j / 4)));
            }
            y[i].d = el_fp32_to_fp16(1.0f / is);
        } else {
            y[i].d = el_fp32_to_fp16(0.0f);
        }
        const float dd = el_fp16_to_fp32(y[i].d);
        for (int j = 0; j < 16; ++j) {
            const int lo = j < 8 ? (y[i].scales[j] & 0x0F) : (y[i].scales[j - 8] >> 4);
            const int sc = (lo | (((y[i].scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
            const float d = dd * (float)sc;
            if (d == 0.0f) continue;
            for (int l = 0; l < 16; ++l)
                L[16 * j + l] = (int8_t)(iclamp(round_magic(x[16 * j + l] / d), -4, 3) + 4);
        }
        memset(y[i].hmask, 0, sizeof y[i].hmask);
        /* high bit of element e goes to hmask[e % 32], bit e / 32 */
        for (int e = 0; e < EL_QK_K; ++e) {
            if (L[e] > 3) {
                y[i].hmask[e % 32] |= (uint8_t)(1u << (e / 32));
                L[e] = (int8_t)(L[e] - 4);
            }
        }
        for (int c = 0; c < 2; ++c)
            for (int l = 0; l < 32; ++l) {
                const int8_t *s = L + 128 * c + l;
                y[i].qs[32 * c + l] = (uint8_t)(s[0] | (s[32] << 2) | (s[64] << 4) | (s[96] << 6));
            }
    }
}

static void q6_k_rows(const float *x, void *dst, int64_t nb) {
    block_q6_K *y = dst;
    int8_t L[EL_QK_K];
    float scales[16];
    for (int64_t i = 0; i < nb; ++i, x += EL_QK_K) {
        float max_abs = 0.0f, max_scale = 0.0f;
        for (int j = 0; j < 16; ++j) {
            scales[j] = fit_signed_weighted(16, 32, x + 16 * j, L + 16 * j);
            if (fabsf(scales[j]) > max_abs) { max_abs = fabsf(scales[j]); max_scale = scales[j]; }
        }
        if (max_abs < QZ_EPS) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        const float is = -128.0f / max_scale;
        y[i].d = el_fp32_to_fp16(1.0f / is);
        for (int j = 0; j < 16; ++j) y[i].scales[j] = (int8_t)imin(127, round_magic(is * scales[j]));
        const float dd = el_fp16_to_fp32(y[i].d);
        for (int j = 0; j < 16; ++j) {
            const float d = dd * (float)y[i].scales[j];
            if (d == 0.0f) continue;
            for (int l = 0; l < 16; ++l)
                L[16 * j + l] = (int8_t)(iclamp(round_magic(x[16 * j + l] / d), -32, 31) + 32);
        }
        /* per 128 elements: ql holds low nibbles of (l, l+64) and (l+32, l+96);
         * qh the 2 high bits of l, l+32, l+64, l+96 */
        for (int c = 0; c < 2; ++c) {
            const int8_t *s = L + 128 * c;
            uint8_t *ql = y[i].ql + 64 * c, *qh = y[i].qh + 32 * c;
            for (int l = 0; l < 32; ++l) {
                ql[l] = (uint8_t)((s[l] & 0x0F) | ((s[l + 64] & 0x0F) << 4));
                ql[l + 32] = (uint8_t)((s[l + 32] & 0x0F) | ((s[l + 96] & 0x0F) << 4));
                qh[l] = (uint8_t)((s[l] >> 4) | ((s[l + 32] >> 4) << 2) | ((s[l + 64] >> 4) << 4) |
                                  ((s[l + 96] >> 4) << 6));
            }
        }
    }
}

/* ------------------------------------------------------------- MXFP4 */

/* The code (index into kvalues_mxfp4) nearest to x at scale d: the first of
 * the smallest |code * d - x| (each product is exact: a power of two times
 * a small integer), so ties go to the lower index as in ggml. */
static uint8_t mxfp4_nearest(float x, float d) {
    int best = 0;
    float best_err = fabsf((float)kvalues_mxfp4[0] * d - x);
    for (int i = 1; i < 16; ++i) {
        const float err = fabsf((float)kvalues_mxfp4[i] * d - x);
        if (err < best_err) {
            best = i;
            best_err = err;
        }
    }
    return (uint8_t)best;
}

/* ggml's quantize_row_mxfp4_ref: e = floor(log2(amax)) - 2 + 127 (so amax
 * lands in [4, 8) * 2^(e - 128), next to the largest doubled code 12), 0 for
 * an all-zero block; each value to its nearest code. The exponent is
 * converted through int and kept modulo 256 as llama.cpp's x86-64 build
 * does (cvttss2si): a block with amax below 2^-125 wraps, and one in
 * [2^-126, 2^-125) gives 0xFF, which output_valid then refuses as
 * llama.cpp's validator does. */
static void mxfp4_rows(const float *x, void *dst, int64_t nb) {
    block_mxfp4 *y = dst;
    for (int64_t i = 0; i < nb; ++i, x += EL_QK_MXFP4) {
        float amax = 0.0f;
        for (int j = 0; j < EL_QK_MXFP4; ++j)
            if (amax < fabsf(x[j])) amax = fabsf(x[j]);
        const int ei = amax > 0.0f ? (int)(floorf(log2f(amax)) - 2.0f + 127.0f) : 0;
        const uint8_t e = (uint8_t)(unsigned)ei;
        const float d = el_e8m0_to_fp32_half(e);
        y[i].e = e;
        for (int j = 0; j < EL_QK_MXFP4 / 2; ++j)
            y[i].qs[j] = (uint8_t)(mxfp4_nearest(x[j], d) | mxfp4_nearest(x[j + EL_QK_MXFP4 / 2], d) << 4);
    }
}

/* ------------------------------------------------------------- dispatch */

typedef void (*block_fn)(const float *x, void *dst, int64_t nblocks);

static void f32_rows(const float *x, void *dst, int64_t n) { memcpy(dst, x, (size_t)n * sizeof(float)); }
static void f16_rows(const float *x, void *dst, int64_t n) { el_quant_f16(x, dst, n); }
static void bf16_rows(const float *x, void *dst, int64_t n) { el_quant_bf16(x, dst, n); }

static block_fn quantizer_for(el_type t) {
    switch (t) {
    case EL_TYPE_F32: return f32_rows;
    case EL_TYPE_F16: return f16_rows;
    case EL_TYPE_BF16: return bf16_rows;
    case EL_TYPE_Q8_0: return q8_0_rows;
    case EL_TYPE_Q4_0: return q4_0_rows;
    case EL_TYPE_Q4_1: return q4_1_rows;
    case EL_TYPE_Q5_0: return q5_0_rows;
    case EL_TYPE_Q5_1: return q5_1_rows;
    case EL_TYPE_Q2_K: return q2_k_rows;
    case EL_TYPE_Q3_K: return q3_k_rows;
    case EL_TYPE_Q4_K: return q4_k_rows;
    case EL_TYPE_Q5_K: return q5_k_rows;
    case EL_TYPE_Q6_K: return q6_k_rows;
    case EL_TYPE_MXFP4: return mxfp4_rows;
    default: return NULL;
    }
}

int el_quantize_supported(el_type t) { return quantizer_for(t) != NULL; }

static int half_finite(el_fp16 h) { return (h & 0x7C00u) != 0x7C00u; }
static int bhalf_finite(el_bf16 h) { return (h & 0x7F80u) != 0x7F80u; }

/* ggml_validate_row_data's test: every stored half (F16/BF16) or block
 * scale/min is finite. llama.cpp's quantizer fails on a tensor otherwise. */
static int output_valid(el_type t, const void *q, int64_t nb) {
    const uint8_t *p = q;
    switch (t) {
    case EL_TYPE_F16:
        for (int64_t i = 0; i < nb; ++i) if (!half_finite(((const el_fp16 *)q)[i])) return 0;
        return 1;
    case EL_TYPE_BF16:
        for (int64_t i = 0; i < nb; ++i) if (!bhalf_finite(((const el_bf16 *)q)[i])) return 0;
        return 1;
    case EL_TYPE_MXFP4:
        return el_mxfp4_find_bad_exponent(q, nb) < 0;
    default: break;
    }
    /* offsets of the fp16 fields inside each block */
    size_t bsz, off1, off2 = (size_t)-1;
    switch (t) {
    case EL_TYPE_Q4_0: bsz = sizeof(block_q4_0); off1 = offsetof(block_q4_0, d); break;
    case EL_TYPE_Q5_0: bsz = sizeof(block_q5_0); off1 = offsetof(block_q5_0, d); break;
    case EL_TYPE_Q8_0: bsz = sizeof(block_q8_0); off1 = offsetof(block_q8_0, d); break;
    case EL_TYPE_Q4_1: bsz = sizeof(block_q4_1); off1 = offsetof(block_q4_1, d); off2 = offsetof(block_q4_1, m); break;
    case EL_TYPE_Q5_1: bsz = sizeof(block_q5_1); off1 = offsetof(block_q5_1, d); off2 = offsetof(block_q5_1, m); break;
    case EL_TYPE_Q2_K: bsz = sizeof(block_q2_K); off1 = offsetof(block_q2_K, d); off2 = offsetof(block_q2_K, dmin); break;
    case EL_TYPE_Q4_K: bsz = sizeof(block_q4_K); off1 = offsetof(block_q4_K, d); off2 = offsetof(block_q4_K, dmin); break;
    case EL_TYPE_Q5_K: bsz = sizeof(block_q5_K); off1 = offsetof(block_q5_K, d); off2 = offsetof(block_q5_K, dmin); break;
    case EL_TYPE_Q3_K: bsz = sizeof(block_q3_K); off1 = offsetof(block_q3_K, d); break;
    case EL_TYPE_Q6_K: bsz = sizeof(block_q6_K); off1 = offsetof(block_q6_K, d); break;
    default: return 1;
    }
    for (int64_t i = 0; i < nb; ++i, p += bsz) {
        el_fp16 h;
        memcpy(&h, p + off1, 2);
        if (!half_finite(h)) return 0;
        if (off2 != (size_t)-1) {
            memcpy(&h, p + off2, 2);
            if (!half_finite(h)) return 0;
        }
    }
    return 1;
}

size_t el_quantize_rows(el_type t, const float *src, void *dst, int64_t nrows, int64_t n_per_row) {
    const block_fn fn = quantizer_for(t);
    const el_type_info *ti = el_type_get(t);
    if (!fn || !ti || !src || !dst || nrows <= 0 || n_per_row <= 0 || n_per_row % ti->blck_size != 0)
        return 0;
    const int64_t n = nrows * n_per_row;
    for (int64_t i = 0; i < n; ++i)
        if (!isfinite(src[i])) return 0;
    /* blocks never straddle rows, so the rows are one run of blocks */
    const int64_t nb = n / ti->blck_size;
    fn(src, dst, nb);
    if (!output_valid(t, dst, nb)) return 0;
    return el_row_size(t, n_per_row) * (size_t)nrows;
}

/* ------------------------------------------------------------- file types */

static const struct {
    const char *name;
    int gguf_id;      /* LLAMA_FTYPE_* */
    el_type base;     /* llama_ftype_get_default_type */
} k_ftypes[EL_FTYPE_COUNT] = {
    [EL_FTYPE_F32] = {"F32", 0, EL_TYPE_F32},
    [EL_FTYPE_F16] = {"F16", 1, EL_TYPE_F16},
    [EL_FTYPE_BF16] = {"BF16", 32, EL_TYPE_BF16},
    [EL_FTYPE_Q8_0] = {"Q8_0", 7, EL_TYPE_Q8_0},
    [EL_FTYPE_Q4_0] = {"Q4_0", 2, EL_TYPE_Q4_0},
    [EL_FTYPE_Q4_1] = {"Q4_1", 3, EL_TYPE_Q4_1},
    [EL_FTYPE_Q5_0] = {"Q5_0", 8, EL_TYPE_Q5_0},
    [EL_FTYPE_Q5_1] = {"Q5_1", 9, EL_TYPE_Q5_1},
    [EL_FTYPE_Q4_K] = {"Q4_K", 14, EL_TYPE_Q4_K},   /* LLAMA_FTYPE_MOSTLY_Q4_K_S */
    [EL_FTYPE_Q5_K] = {"Q5_K", 16, EL_TYPE_Q5_K},   /* LLAMA_FTYPE_MOSTLY_Q5_K_S */
    [EL_FTYPE_Q6_K] = {"Q6_K", 18, EL_TYPE_Q6_K},
    [EL_FTYPE_Q4_K_M] = {"Q4_K_M", 15, EL_TYPE_Q4_K},
    [EL_FTYPE_Q5_K_M] = {"Q5_K_M", 17, EL_TYPE_Q5_K},
    [EL_FTYPE_MXFP4_MOE] = {"MXFP4_MOE", 38, EL_TYPE_MXFP4},
    [EL_FTYPE_MXFP4] = {"MXFP4", 38, EL_TYPE_MXFP4},   /* llama-quantize --pure MXFP4_MOE */
};

static int name_eq(const char *a, const char *b) {
    for (; *a && *b; ++a, ++b)
        if (toupper((unsigned char)*a) != toupper((unsigned char)*b)) return 0;
    return *a == *b;
}

int el_ftype_parse(const char *name, el_ftype *out) {
    if (!name || !out) return -1;
    for (int i = 0; i < EL_FTYPE_COUNT; ++i) {
        if (name_eq(name, k_ftypes[i].name)) { *out = (el_ftype)i; return 0; }
    }
    if (name_eq(name, "Q4_K_S")) { *out = EL_FTYPE_Q4_K; return 0; }
    if (name_eq(name, "Q5_K_S")) { *out = EL_FTYPE_Q5_K; return 0; }
    return -1;
}

const char *el_ftype_name(el_ftype ft) {
    return (unsigned)ft < EL_FTYPE_COUNT ? k_ftypes[ft].name : "?";
}

int el_ftype_gguf_id(el_ftype ft) {
    return (unsigned)ft < EL_FTYPE_COUNT ? k_ftypes[ft].gguf_id : -1;
}

el_type el_ftype_base_type(el_ftype ft) {
    return (unsigned)ft < EL_FTYPE_COUNT ? k_ftypes[ft].base : EL_TYPE_COUNT;
}

/* ------------------------------------------------------------- type plan */

typedef enum {
    CAT_OTHER, CAT_OUTPUT, CAT_TOKEN_EMBD, CAT_ATTN_QKV, CAT_ATTN_KV_B, CAT_ATTN_V,
    CAT_ATTN_K, CAT_ATTN_Q, CAT_ATTN_OUTPUT, CAT_FFN_UP, CAT_FFN_GATE, CAT_FFN_DOWN
} tcat;

static int has(const char *s, const char *part) { return strstr(s, part) != NULL; }

/* llama.cpp's broad tensor categories, first match wins. */
static tcat categorize(const char *name) {
    if (strcmp(name, "output.weight") == 0) return CAT_OUTPUT;
    if (strcmp(name, "token_embd.weight") == 0 || strcmp(name, "per_layer_token_embd.weight") == 0)
        return CAT_TOKEN_EMBD;
    static const struct { const char *part; tcat cat; } k_parts[] = {
        {"attn_qkv.weight", CAT_ATTN_QKV}, {"attn_kv_b.weight", CAT_ATTN_KV_B},
        {"attn_v.weight", CAT_ATTN_V},     {"attn_k.weight", CAT_ATTN_K},
        {"attn_q.weight", CAT_ATTN_Q},     {"attn_output.weight", CAT_ATTN_OUTPUT},
        {"ffn_up", CAT_FFN_UP},            {"ffn_gate", CAT_FFN_GATE},
        {"ffn_down", CAT_FFN_DOWN},
    };
    for (size_t i = 0; i < sizeof k_parts / sizeof k_parts[0]; ++i)
        if (has(name, k_parts[i].part)) return k_parts[i].cat;
    return CAT_OTHER;
}

static int is_attn_v_like(tcat c) { return c == CAT_ATTN_V || c == CAT_ATTN_QKV || c == CAT_ATTN_KV_B; }

/* ggml_n_dims: trailing extents of 1 do not count. */
static int effective_dims(const el_qtensor *t) {
    const int nd = t->n_dims < 1 ? 1 : (t->n_dims > 4 ? 4 : t->n_dims);
    for (int i = nd - 1; i >= 1; --i)
        if (t->ne[i] > 1) return i + 1;
    return 1;
}

/* Which tensors llama.cpp quantizes at all (the others keep their type). */
static int quantizable(const el_qtensor *t) {
    if (effective_dims(t) < 2) return 0;
    const char *n = t->name;
    const size_t len = strlen(n);
    if (len < 6 || strcmp(n + len - 6, "weight") != 0) return 0;
    static const char *const k_never[] = {
        "_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel",
        "per_layer_model_proj", "ssm_conv1d", "shortconv.conv.weight", "indexer.k_proj.weight",
        "indexer.q_proj.weight", "time_mix_first.weight", "time_mix_w0.weight",
        "time_mix_w1.weight", "time_mix_w2.weight", "time_mix_v0.weight", "time_mix_v1.weight",
        "time_mix_v2.weight", "time_mix_a0.weight", "time_mix_a1.weight", "time_mix_a2.weight",
        "time_mix_g1.weight", "time_mix_g2.weight", "time_mix_decay_w1.weight",
        "time_mix_decay_w2.weight", "time_mix_lerp_fused.weight", "attn_rel_b.weight",
        ".position_embd", "sam.pos_embd", "sam.neck.", "sam.net_", ".rel_pos", ".patch_embd",
        ".patch_merger", "a.rvq.codebook", "mm.a.code_embd",
    };
    for (size_t i = 0; i < sizeof k_never / sizeof k_never[0]; ++i)
        if (has(n, k_never[i])) return 0;
    if (strcmp(n, "position_embd.weight") == 0 || strcmp(n, "token_types.weight") == 0) return 0;
    return 1;
}

static int is_quantized_type(el_type t) {
    return t != EL_TYPE_F32 && t != EL_TYPE_F16 && t != EL_TYPE_BF16;
}

static int blck(el_type t) {
    const el_type_info *ti = el_type_get(t);
    return ti ? ti->blck_size : 1;
}

/* llama.cpp's weights order: by layer ("blk.N.", others as -1), then by name. */
static int layer_of(const char *name) {
    int l = -1;
    if (sscanf(name, "blk.%d.", &l) != 1) l = -1;
    return l;
}

typedef struct { const char *name; int layer; int idx; } order_item;

static int order_cmp(const void *pa, const void *pb) {
    const order_item *a = pa, *b = pb;
    if (a->layer != b->layer) return a->layer < b->layer ? -1 : 1;
    const int c = strcmp(a->name, b->name);
    if (c) return c;
    return a->idx - b->idx;
}

static int use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

typedef struct {
    el_ftype ft;
    const el_qmodel *m;
    int tied;                 /* no output.weight: token_embd doubles as output */
    int is_70b;               /* llama.cpp's LLM_TYPE_70B (only that size matters) */
    int n_attn_v, i_attn_v;   /* attn_v-like tensors: total, seen so far */
    int n_layer, i_ffn_down, i_ffn_gate, i_ffn_up;
    char *err;
    size_t errcap;
} plan_state;

static int plan_fail(plan_state *s, const char *fmt, ...) {
    if (s->err && s->errcap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(s->err, s->errcap, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* The layer llama.cpp attributes an ffn tensor to: its running count for
 * dense models, the "blk.N." number for MoE (experts are not in order). */
static int ffn_layer(plan_state *s, int counter, const char *name, int *layer) {
    if (s->m->n_expert > 1) {
        int l;
        if (sscanf(name, "blk.%d.", &l) != 1) return plan_fail(s, "cannot tell the layer of %s", name);
        if (l < 0 || l >= s->n_layer)
            return plan_fail(s, "tensor %s: layer %d outside [0, %d)", name, l, s->n_layer);
        *layer = l;
    } else {
        *layer = counter;
    }
    return 0;
}

/* llama_tensor_get_type_impl for the ftypes edgellm offers. */
static int mix_type(plan_state *s, const el_qtensor *t, tcat cat, el_type *type) {
    const el_ftype ft = s->ft;
    const int k_m = ft == EL_FTYPE_Q4_K_M || ft == EL_FTYPE_Q5_K_M;
    el_type nt = *type;
    if (ft == EL_FTYPE_MXFP4) {
        /* pure: every quantized tensor keeps the base type */
    } else if (cat == CAT_OUTPUT || (s->tied && cat == CAT_TOKEN_EMBD)) {
        if (ft == EL_FTYPE_MXFP4_MOE || t->ne[0] % blck(nt) != 0) nt = EL_TYPE_Q8_0;
        else if (nt != EL_TYPE_Q8_0) nt = EL_TYPE_Q6_K;
    } else if (ft == EL_FTYPE_MXFP4_MOE) {
        /* expert tensors (a third dimension) MXFP4, everything else Q8_0 */
        nt = t->n_dims >= 3 && t->ne[2] > 1 ? EL_TYPE_MXFP4 : EL_TYPE_Q8_0;
    } else if (cat == CAT_TOKEN_EMBD) {
        /* untied embeddings keep the file type's base type */
    } else if (is_attn_v_like(cat)) {
        if (k_m && use_more_bits(s->i_attn_v, s->n_attn_v)) nt = EL_TYPE_Q6_K;
        else if (ft == EL_FTYPE_Q4_K && s->i_attn_v < 4) nt = EL_TYPE_Q5_K;
        if (s->is_70b && (nt == EL_TYPE_Q3_K || nt == EL_TYPE_Q4_K)) nt = EL_TYPE_Q5_K;
        if (s->m->n_expert == 8) nt = EL_TYPE_Q8_0;
        ++s->i_attn_v;
    } else if (cat == CAT_ATTN_K) {
        if (s->m->n_expert == 8) nt = EL_TYPE_Q8_0;
    } else if (cat == CAT_FFN_DOWN) {
        int il = 0;
        if (ffn_layer(s, s->i_ffn_down, t->name, &il)) return -1;
        const int nl = s->n_layer;
        if (k_m) {
            if (use_more_bits(il, nl)) nt = EL_TYPE_Q6_K;
        } else if (ft == EL_FTYPE_Q4_K && il < nl / 8) {
            nt = EL_TYPE_Q5_K;
        }
        ++s->i_ffn_down;
    } else if (cat == CAT_ATTN_OUTPUT) {
        if (s->m->n_expert == 8 && (ft == EL_FTYPE_Q4_K || ft == EL_FTYPE_Q4_K_M)) nt = EL_TYPE_Q5_K;
    } else if (cat == CAT_FFN_GATE || cat == CAT_FFN_UP) {
        int il = 0;
        int *ctr = cat == CAT_FFN_GATE ? &s->i_ffn_gate : &s->i_ffn_up;
        if (ffn_layer(s, *ctr, t->name, &il)) return -1;
        ++*ctr;
    }
    *type = nt;
    return 0;
}

/* Rows that do not split into whole blocks of the chosen type: K-quants step
 * down to a 32-block type, and anything still not fitting becomes F16. */
static el_type block_fallback(el_type want, int64_t ncols, int *ok) {
    *ok = 1;
    if (ncols % blck(want) == 0) return want;
    el_type alt;
    switch (want) {
    case EL_TYPE_Q2_K: case EL_TYPE_Q3_K: case EL_TYPE_TQ1_0: case EL_TYPE_TQ2_0: alt = EL_TYPE_Q4_0; break;
    case EL_TYPE_Q4_K: alt = EL_TYPE_Q5_0; break;
    case EL_TYPE_Q5_K: alt = EL_TYPE_Q5_1; break;
    case EL_TYPE_Q6_K: alt = EL_TYPE_Q8_0; break;
    case EL_TYPE_IQ1_S: case EL_TYPE_IQ1_M: case EL_TYPE_IQ2_XXS: case EL_TYPE_IQ2_XS:
    case EL_TYPE_IQ2_S: case EL_TYPE_IQ3_XXS: case EL_TYPE_IQ3_S: case EL_TYPE_IQ4_XS:
        alt = EL_TYPE_IQ4_NL; break;
    default:
        if (blck(want) > 32) { *ok = 0; return want; }
        alt = want;
        break;
    }
    if (ncols % blck(alt) != 0) alt = EL_TYPE_F16;
    return alt;
}

int el_quant_plan(el_ftype ft, const el_qmodel *m, const el_qtensor *t, int n, el_type *out,
                  char *err, size_t errcap) {
    plan_state s = {.ft = ft, .m = m, .err = err, .errcap = errcap, .tied = 1};
    if (err && errcap) err[0] = '\0';
    if ((unsigned)ft >= EL_FTYPE_COUNT) return plan_fail(&s, "unknown file type %d", (int)ft);
    if (!m || (n > 0 && (!t || !out)) || n < 0) return plan_fail(&s, "bad arguments");
    if (m->n_layer <= 0) return plan_fail(&s, "model has %d layers", m->n_layer);
    s.n_layer = m->n_layer;
    const char *arch = m->arch ? m->arch : "";
    s.is_70b = m->n_layer == 80 && ((strcmp(arch, "llama") == 0 && m->n_head != m->n_head_kv) ||
                                    strcmp(arch, "qwen2") == 0);
    for (int i = 0; i < n; ++i) {
        if (!t[i].name) return plan_fail(&s, "tensor %d has no name", i);
        const tcat c = categorize(t[i].name);
        if (is_attn_v_like(c)) ++s.n_attn_v;
        if (c == CAT_OUTPUT) s.tied = 0;
    }
    order_item *ord = malloc(sizeof *ord * (size_t)(n > 0 ? n : 1));
    if (!ord) return plan_fail(&s, "out of memory");
    for (int i = 0; i < n; ++i) ord[i] = (order_item){t[i].name, layer_of(t[i].name), i};
    qsort(ord, (size_t)n, sizeof *ord, order_cmp);

    const el_type base = k_ftypes[ft].base;
    int rc = 0;
    for (int k = 0; k < n && rc == 0; ++k) {
        const el_qtensor *ti = &t[ord[k].idx];
        el_type ty = EL_TYPE_F32; /* not quantized: stays as given (F32 input) */
        if (quantizable(ti)) {
            ty = base;
            if (is_quantized_type(base)) {
                rc = mix_type(&s, ti, categorize(ti->name), &ty);
                if (rc) break;
                int ok;
                ty = block_fallback(ty, ti->ne[0], &ok);
                if (!ok) {
                    rc = plan_fail(&s, "%s: no fallback for %s rows of %lld", ti->name,
                                   el_type_name(ty), (long long)ti->ne[0]);
                    break;
                }
            }
        }
        out[ord[k].idx] = ty;
    }
    free(ord);
    return rc;
}
