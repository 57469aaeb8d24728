/*
 * attention_avx512.c — the attention kernel of attention.c with AVX-512 and
 * F16C: the same bits (see attention_impl.h for the arithmetic contract).
 * The F16 dot keeps ggml's 4 accumulators of 16 lanes and its reduction
 * tree; the F16 accumulator of V is rounded through vcvtps2ph (round to
 * nearest even, as el_fp32_to_fp16) after every multiply and every FMA.
 */
#if defined(__x86_64__)
#include <immintrin.h>

/* No FMA contraction of the scalar tails (clang; GCC does not contract in ISO C mode). */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif
#include <math.h>

#include "backend/cpu/attention_internal.h"
#include "util/fp16.h"

#define RNE (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

static inline __m512 ld16h(const el_fp16 *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)); }
static inline __m512 r16(__m512 x) { return _mm512_cvtph_ps(_mm512_cvtps_ph(x, RNE)); }

static inline void att_round_q(const float *q, float *qf, int hd) {
    int i = 0;
    for (; i + 16 <= hd; i += 16) _mm512_storeu_ps(qf + i, r16(_mm512_loadu_ps(q + i)));
    for (; i < hd; i++) qf[i] = el_fp16_to_fp32(el_fp32_to_fp16(q[i]));
}

static inline float att_dot(const el_fp16 *k, const float *qf, int n) {
    const int np = n & ~63;
    double sumf = 0.0;
    if (np > 0) {
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int i = 0; i < np; i += 64) {
            a0 = _mm512_fmadd_ps(ld16h(k + i), _mm512_loadu_ps(qf + i), a0);
            a1 = _mm512_fmadd_ps(ld16h(k + i + 16), _mm512_loadu_ps(qf + i + 16), a1);
            a2 = _mm512_fmadd_ps(ld16h(k + i + 32), _mm512_loadu_ps(qf + i + 32), a2);
            a3 = _mm512_fmadd_ps(ld16h(k + i + 48), _mm512_loadu_ps(qf + i + 48), a3);
        }
        a0 = _mm512_add_ps(a0, a2);
        a1 = _mm512_add_ps(a1, a3);
        a0 = _mm512_add_ps(a0, a1);
        const __m256 t3 = _mm256_add_ps(_mm512_castps512_ps256(a0), _mm512_extractf32x8_ps(a0, 1));
        const __m128 t6 = _mm_add_ps(_mm256_castps256_ps128(t3), _mm256_extractf128_ps(t3, 1));
        const __m128 t7 = _mm_add_ps(t6, _mm_movehl_ps(t6, t6));        /* t6[0]+t6[2], t6[1]+t6[3] */
        sumf = (double)_mm_cvtss_f32(_mm_add_ss(t7, _mm_movehdup_ps(t7)));
    }
    for (int i = np; i < n; i++) sumf += (double)(el_fp16_to_fp32(k[i]) * qf[i]);
    return (float)sumf;
}

/* The 16-lane vector (a0+a2)+(a1+a3) of one row's dot (head_dim a multiple of 64). */
static inline __m512 dot_lanes(const el_fp16 *k, const float *qf, int n) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int i = 0; i < n; i += 64) {
        a0 = _mm512_fmadd_ps(ld16h(k + i), _mm512_loadu_ps(qf + i), a0);
        a1 = _mm512_fmadd_ps(ld16h(k + i + 16), _mm512_loadu_ps(qf + i + 16), a1);
        a2 = _mm512_fmadd_ps(ld16h(k + i + 32), _mm512_loadu_ps(qf + i + 32), a2);
        a3 = _mm512_fmadd_ps(ld16h(k + i + 48), _mm512_loadu_ps(qf + i + 48), a3);
    }
    return _mm512_add_ps(_mm512_add_ps(a0, a2), _mm512_add_ps(a1, a3));
}

/*
 * Scores of 16 rows at once. Each row's 16 lanes are reduced with exactly
 * att_dot's adds (lane i+8 onto i, then i+4 onto i, then (0+2)+(1+3)), but
 * for 16 rows side by side: the vectors are transposed step by step so one
 * add serves several rows. With head_dim a multiple of 64 there is no tail,
 * and (float)(double)x is x, so the result is att_dot's.
 */
static inline __m512 reduce16x16(const __m512 v[16]) {
    __m512 t[8], u[4];
    for (int r = 0; r < 8; r++) /* [A.t3 | B.t3]: A.t3[i] = A[i] + A[i+8] */
        t[r] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * r], v[2 * r + 1], 0x44),
                             _mm512_shuffle_f32x4(v[2 * r], v[2 * r + 1], 0xEE));
    for (int r = 0; r < 4; r++) /* [A.t6 | B.t6 | C.t6 | D.t6]: t6[i] = t3[i] + t3[i+4] */
        u[r] = _mm512_add_ps(_mm512_shuffle_f32x4(t[2 * r], t[2 * r + 1], 0x88),
                             _mm512_shuffle_f32x4(t[2 * r], t[2 * r + 1], 0xDD));
    /* 128-bit lane r: [t6[0]+t6[2], t6[1]+t6[3]] of rows r, r+4 (w0) and r+8, r+12 (w1) */
    const __m512 w0 = _mm512_add_ps(_mm512_shuffle_ps(u[0], u[1], _MM_SHUFFLE(1, 0, 1, 0)),
                                    _mm512_shuffle_ps(u[0], u[1], _MM_SHUFFLE(3, 2, 3, 2)));
    const __m512 w1 = _mm512_add_ps(_mm512_shuffle_ps(u[2], u[3], _MM_SHUFFLE(1, 0, 1, 0)),
                                    _mm512_shuffle_ps(u[2], u[3], _MM_SHUFFLE(3, 2, 3, 2)));
    /* lane 4r + c: the sum of row r + 4c */
    const __m512 s = _mm512_add_ps(_mm512_shuffle_ps(w0, w1, _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm512_shuffle_ps(w0, w1, _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), s);
}

static inline void att_scores(const el_fp16 *k, size_t kstride, int cnt, const float *qf, int hd, float scale,
                              float *sc) {
    int jj = 0;
    if ((hd & 63) == 0) {
        const __m512 vs = _mm512_set1_ps(scale);
        for (; jj + 16 <= cnt; jj += 16) {
            __m512 v[16];
            for (int r = 0; r < 16; r++) v[r] = dot_lanes(k + (size_t)(jj + r) * kstride, qf, hd);
            _mm512_storeu_ps(sc + jj, _mm512_mul_ps(reduce16x16(v), vs));
        }
    }
    for (; jj < cnt; jj++) sc[jj] = att_dot(k + (size_t)jj * kstride, qf, hd) * scale;
}

static inline void att_vpass(el_fp16 *acc, const el_fp16 *v0, size_t vstride, int cnt, const float *ms,
                             const float *vs, int hd) {
    int c = 0;
    for (; c + 64 <= hd; c += 64) {
        __m512 x0 = ld16h(acc + c), x1 = ld16h(acc + c + 16), x2 = ld16h(acc + c + 32), x3 = ld16h(acc + c + 48);
        const el_fp16 *v = v0 + c;
        for (int jj = 0; jj < cnt; jj++, v += vstride) {
            if (ms[jj] != 1.0f) {
                const __m512 m = _mm512_set1_ps(ms[jj]);
                x0 = r16(_mm512_mul_ps(x0, m));
                x1 = r16(_mm512_mul_ps(x1, m));
                x2 = r16(_mm512_mul_ps(x2, m));
                x3 = r16(_mm512_mul_ps(x3, m));
            }
            const __m512 w = _mm512_set1_ps(vs[jj]);
            x0 = r16(_mm512_fmadd_ps(ld16h(v), w, x0));
            x1 = r16(_mm512_fmadd_ps(ld16h(v + 16), w, x1));
            x2 = r16(_mm512_fmadd_ps(ld16h(v + 32), w, x2));
            x3 = r16(_mm512_fmadd_ps(ld16h(v + 48), w, x3));
        }
        _mm256_storeu_si256((__m256i *)(acc + c), _mm512_cvtps_ph(x0, RNE));
        _mm256_storeu_si256((__m256i *)(acc + c + 16), _mm512_cvtps_ph(x1, RNE));
        _mm256_storeu_si256((__m256i *)(acc + c + 32), _mm512_cvtps_ph(x2, RNE));
        _mm256_storeu_si256((__m256i *)(acc + c + 48), _mm512_cvtps_ph(x3, RNE));
    }
    for (; c + 16 <= hd; c += 16) {
        __m512 x0 = ld16h(acc + c);
        const el_fp16 *v = v0 + c;
        for (int jj = 0; jj < cnt; jj++, v += vstride) {
            if (ms[jj] != 1.0f) x0 = r16(_mm512_mul_ps(x0, _mm512_set1_ps(ms[jj])));
            x0 = r16(_mm512_fmadd_ps(ld16h(v), _mm512_set1_ps(vs[jj]), x0));
        }
        _mm256_storeu_si256((__m256i *)(acc + c), _mm512_cvtps_ph(x0, RNE));
    }
    if (c < hd) {
        const el_fp16 *v = v0;
        for (int jj = 0; jj < cnt; jj++, v += vstride) {
            if (ms[jj] != 1.0f)
                for (int i = c; i < hd; i++) acc[i] = el_fp32_to_fp16(el_fp16_to_fp32(acc[i]) * ms[jj]);
            for (int i = c; i < hd; i++)
                acc[i] = el_fp32_to_fp16(fmaf(el_fp16_to_fp32(v[i]), vs[jj], el_fp16_to_fp32(acc[i])));
        }
    }
}

/* Two queries over the same rows: each V vector loaded once, two independent rounding chains. */
static inline void att_vpass2(el_fp16 *acc0, el_fp16 *acc1, const el_fp16 *v0, size_t vstride, int cnt,
                              const float *ms0, const float *vs0, const float *ms1, const float *vs1, int hd) {
    int c = 0;
    for (; c + 64 <= hd; c += 64) {
        __m512 x[4], y[4];
        for (int i = 0; i < 4; i++) {
            x[i] = ld16h(acc0 + c + 16 * i);
            y[i] = ld16h(acc1 + c + 16 * i);
        }
        const el_fp16 *v = v0 + c;
        for (int jj = 0; jj < cnt; jj++, v += vstride) {
            if (ms0[jj] != 1.0f) {
                const __m512 m = _mm512_set1_ps(ms0[jj]);
                for (int i = 0; i < 4; i++) x[i] = r16(_mm512_mul_ps(x[i], m));
            }
            if (ms1[jj] != 1.0f) {
                const __m512 m = _mm512_set1_ps(ms1[jj]);
                for (int i = 0; i < 4; i++) y[i] = r16(_mm512_mul_ps(y[i], m));
            }
            const __m512 w0 = _mm512_set1_ps(vs0[jj]), w1 = _mm512_set1_ps(vs1[jj]);
            for (int i = 0; i < 4; i++) {
                const __m512 vv = ld16h(v + 16 * i);
                x[i] = r16(_mm512_fmadd_ps(vv, w0, x[i]));
                y[i] = r16(_mm512_fmadd_ps(vv, w1, y[i]));
            }
        }
        for (int i = 0; i < 4; i++) {
            _mm256_storeu_si256((__m256i *)(acc0 + c + 16 * i), _mm512_cvtps_ph(x[i], RNE));
            _mm256_storeu_si256((__m256i *)(acc1 + c + 16 * i), _mm512_cvtps_ph(y[i], RNE));
        }
    }
    if (c < hd) {
        att_vpass(acc0 + c, v0 + c, vstride, cnt, ms0, vs0, hd - c);
        att_vpass(acc1 + c, v0 + c, vstride, cnt, ms1, vs1, hd - c);
    }
}

static inline void att_out(const el_fp16 *acc, float inv, float *o, int hd) {
    int i = 0;
    const __m512 s = _mm512_set1_ps(inv);
    for (; i + 16 <= hd; i += 16) _mm512_storeu_ps(o + i, _mm512_mul_ps(ld16h(acc + i), s));
    for (; i < hd; i++) o[i] = el_fp16_to_fp32(acc[i]) * inv;
}

#define ATT_TASK el_attn_task_avx512
#define EL_ATT_ATTR
#include "backend/cpu/attention_impl.h"

/* vcvtps2ph rounds as el_fp32_to_fp16 does; NaNs become 0x7E00 | sign as there. */
void el_fp32_to_fp16_row_avx512(const float *x, el_fp16 *y, int n) {
    int i = 0;
    const __m256i qnan = _mm256_set1_epi16(0x7E00);
    for (; i + 16 <= n; i += 16) {
        const __m512 v = _mm512_loadu_ps(x + i);
        __m256i h = _mm512_cvtps_ph(v, RNE);
        const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        if (nan) {
            const __m256i sign = _mm256_and_si256(h, _mm256_set1_epi16((short)0x8000));
            h = _mm256_mask_blend_epi16(nan, h, _mm256_or_si256(sign, qnan));
        }
        _mm256_storeu_si256((__m256i *)(y + i), h);
    }
    for (; i < n; i++) y[i] = el_fp32_to_fp16(x[i]);
}
#endif
