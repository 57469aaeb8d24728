/*
 * attention_avx2.c — the attention kernel of attention.c with AVX2, FMA and
 * F16C: the same bits (see attention_impl.h for the arithmetic contract).
 * ggml's 16-lane accumulators of the F16 dot are pairs of 256-bit registers
 * (lanes 0-7, 8-15), so the reduction tree (lanes i+8 onto i, then i+4 onto
 * i, …) starts with one add of the pair.
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

static inline __m256 ld8h(const el_fp16 *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }
static inline __m256 r8(__m256 x) { return _mm256_cvtph_ps(_mm256_cvtps_ph(x, RNE)); }
static inline void st8h(el_fp16 *p, __m256 x) { _mm_storeu_si128((__m128i *)p, _mm256_cvtps_ph(x, RNE)); }

static inline void att_round_q(const float *q, float *qf, int hd) {
    int i = 0;
    for (; i + 8 <= hd; i += 8) _mm256_storeu_ps(qf + i, r8(_mm256_loadu_ps(q + i)));
    for (; i < hd; i++) qf[i] = el_fp16_to_fp32(el_fp32_to_fp16(q[i]));
}

static inline float att_dot(const el_fp16 *k, const float *qf, int n) {
    const int np = n & ~63;
    double sumf = 0.0;
    if (np > 0) {
        __m256 a[8]; /* accumulator j, lanes 0-7 in a[2j], 8-15 in a[2j+1] */
        for (int r = 0; r < 8; r++) a[r] = _mm256_setzero_ps();
        for (int i = 0; i < np; i += 64)
            for (int r = 0; r < 8; r++) a[r] = _mm256_fmadd_ps(ld8h(k + i + 8 * r), _mm256_loadu_ps(qf + i + 8 * r), a[r]);
        const __m256 lo = _mm256_add_ps(_mm256_add_ps(a[0], a[4]), _mm256_add_ps(a[2], a[6]));
        const __m256 hi = _mm256_add_ps(_mm256_add_ps(a[1], a[5]), _mm256_add_ps(a[3], a[7]));
        const __m256 t3 = _mm256_add_ps(lo, hi);
        const __m128 t6 = _mm_add_ps(_mm256_castps256_ps128(t3), _mm256_extractf128_ps(t3, 1));
        const __m128 t7 = _mm_add_ps(t6, _mm_movehl_ps(t6, t6));
        sumf = (double)_mm_cvtss_f32(_mm_add_ss(t7, _mm_movehdup_ps(t7)));
    }
    for (int i = np; i < n; i++) sumf += (double)(el_fp16_to_fp32(k[i]) * qf[i]);
    return (float)sumf;
}

static inline void att_scores(const el_fp16 *k, size_t kstride, int cnt, const float *qf, int hd, float scale,
                              float *sc) {
    for (int jj = 0; jj < cnt; jj++) sc[jj] = att_dot(k + (size_t)jj * kstride, qf, hd) * scale;
}

static inline void att_vpass(el_fp16 *acc, const el_fp16 *v0, size_t vstride, int cnt, const float *ms,
                             const float *vs, int hd) {
    int c = 0;
    for (; c + 32 <= hd; c += 32) {
        __m256 x0 = ld8h(acc + c), x1 = ld8h(acc + c + 8), x2 = ld8h(acc + c + 16), x3 = ld8h(acc + c + 24);
        const el_fp16 *v = v0 + c;
        for (int jj = 0; jj < cnt; jj++, v += vstride) {
            if (ms[jj] != 1.0f) {
                const __m256 m = _mm256_set1_ps(ms[jj]);
                x0 = r8(_mm256_mul_ps(x0, m));
                x1 = r8(_mm256_mul_ps(x1, m));
                x2 = r8(_mm256_mul_ps(x2, m));
                x3 = r8(_mm256_mul_ps(x3, m));
            }
            const __m256 w = _mm256_set1_ps(vs[jj]);
            x0 = r8(_mm256_fmadd_ps(ld8h(v), w, x0));
            x1 = r8(_mm256_fmadd_ps(ld8h(v + 8), w, x1));
            x2 = r8(_mm256_fmadd_ps(ld8h(v + 16), w, x2));
            x3 = r8(_mm256_fmadd_ps(ld8h(v + 24), w, x3));
        }
        st8h(acc + c, x0);
        st8h(acc + c + 8, x1);
        st8h(acc + c + 16, x2);
        st8h(acc + c + 24, x3);
    }
    for (; c + 8 <= hd; c += 8) {
        __m256 x0 = ld8h(acc + c);
        const el_fp16 *v = v0 + c;
        for (int jj = 0; jj < cnt; jj++, v += vstride) {
            if (ms[jj] != 1.0f) x0 = r8(_mm256_mul_ps(x0, _mm256_set1_ps(ms[jj])));
            x0 = r8(_mm256_fmadd_ps(ld8h(v), _mm256_set1_ps(vs[jj]), x0));
        }
        st8h(acc + c, x0);
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
    for (; c + 32 <= hd; c += 32) {
        __m256 x[4], y[4];
        for (int i = 0; i < 4; i++) {
            x[i] = ld8h(acc0 + c + 8 * i);
            y[i] = ld8h(acc1 + c + 8 * i);
        }
        const el_fp16 *v = v0 + c;
        for (int jj = 0; jj < cnt; jj++, v += vstride) {
            if (ms0[jj] != 1.0f) {
                const __m256 m = _mm256_set1_ps(ms0[jj]);
                for (int i = 0; i < 4; i++) x[i] = r8(_mm256_mul_ps(x[i], m));
            }
            if (ms1[jj] != 1.0f) {
                const __m256 m = _mm256_set1_ps(ms1[jj]);
                for (int i = 0; i < 4; i++) y[i] = r8(_mm256_mul_ps(y[i], m));
            }
            const __m256 w0 = _mm256_set1_ps(vs0[jj]), w1 = _mm256_set1_ps(vs1[jj]);
            for (int i = 0; i < 4; i++) {
                const __m256 vv = ld8h(v + 8 * i);
                x[i] = r8(_mm256_fmadd_ps(vv, w0, x[i]));
                y[i] = r8(_mm256_fmadd_ps(vv, w1, y[i]));
            }
        }
        for (int i = 0; i < 4; i++) {
            st8h(acc0 + c + 8 * i, x[i]);
            st8h(acc1 + c + 8 * i, y[i]);
        }
    }
    if (c < hd) {
        att_vpass(acc0 + c, v0 + c, vstride, cnt, ms0, vs0, hd - c);
        att_vpass(acc1 + c, v0 + c, vstride, cnt, ms1, vs1, hd - c);
    }
}

static inline void att_out(const el_fp16 *acc, float inv, float *o, int hd) {
    int i = 0;
    const __m256 s = _mm256_set1_ps(inv);
    for (; i + 8 <= hd; i += 8) _mm256_storeu_ps(o + i, _mm256_mul_ps(ld8h(acc + i), s));
    for (; i < hd; i++) o[i] = el_fp16_to_fp32(acc[i]) * inv;
}

#define ATT_TASK el_attn_task_avx2
#define EL_ATT_ATTR
#include "backend/cpu/attention_impl.h"

/* vcvtps2ph rounds as el_fp32_to_fp16 does; NaNs become 0x7E00 | sign as there. */
void el_fp32_to_fp16_row_avx2(const float *x, el_fp16 *y, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        __m128i h = _mm256_cvtps_ph(v, RNE);
        if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q))) {
            _mm_storeu_si128((__m128i *)(y + i), h);
            for (int l = 0; l < 8; l++) y[i + l] = el_fp32_to_fp16(x[i + l]);
            continue;
        }
        _mm_storeu_si128((__m128i *)(y + i), h);
    }
    for (; i < n; i++) y[i] = el_fp32_to_fp16(x[i]);
}
#endif
