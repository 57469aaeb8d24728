/*
 * attention_tiled_avx2.c — the tiled attention kernel of attention_tiled.c
 * with AVX2, FMA and F16C: the same bits (attention_tiled_impl.h states the
 * arithmetic). The softmax's expf is ggml's AVX-512 form computed in 8-lane
 * vectors (x86/expf_x86.h: vscalefps's j·2^n as two exact-then-once-rounded
 * multiplies), so an AVX2 machine gets the bits of the AVX-512 build edgellm
 * follows.
 */
#if defined(__x86_64__)
#include <immintrin.h>

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif
#include <math.h>

#include "backend/cpu/attention_internal.h"
#include "backend/cpu/attention_tiled_ops.h"
#include "backend/cpu/x86/expf_x86.h"
#include "util/fp16.h"

static inline void tl_cvt(const el_fp16 *h, float *f, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(f + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + i))));
    for (; i < n; i++) f[i] = el_fp16_to_fp32(h[i]);
}

static inline void tl_scores(const float *qt, int R, const float *kf, int cnt, int hd, float *sc) {
    for (int rb = 0; rb < R; rb += 8) {
        int k = 0;
        for (; k + 8 <= cnt; k += 8) {
            __m256 acc[8];
            for (int i = 0; i < 8; i++) acc[i] = _mm256_setzero_ps();
            const float *kp = kf + (size_t)k * hd;
            for (int d = 0; d < hd; d++) {
                const __m256 q = _mm256_loadu_ps(qt + (size_t)d * R + rb);
                for (int i = 0; i < 8; i++) acc[i] = _mm256_fmadd_ps(q, _mm256_set1_ps(kp[(size_t)i * hd + d]), acc[i]);
            }
            for (int i = 0; i < 8; i++) _mm256_storeu_ps(sc + (size_t)(k + i) * R + rb, acc[i]);
        }
        for (; k < cnt; k++) {
            __m256 acc = _mm256_setzero_ps();
            const float *kp = kf + (size_t)k * hd;
            for (int d = 0; d < hd; d++)
                acc = _mm256_fmadd_ps(_mm256_loadu_ps(qt + (size_t)d * R + rb), _mm256_set1_ps(kp[d]), acc);
            _mm256_storeu_ps(sc + (size_t)k * R + rb, acc);
        }
    }
}


static inline double tl_expsum(float *s, float M) {
    double sum = 0.0;
    const __m256 vm = _mm256_set1_ps(M);
    for (int g = 0; g < EL_ATT_TILE_KV; g += 16) {
        const __m256 lo = expf_poly8(_mm256_sub_ps(_mm256_loadu_ps(s + g), vm));
        const __m256 hi = expf_poly8(_mm256_sub_ps(_mm256_loadu_ps(s + g + 8), vm));
        _mm256_storeu_ps(s + g, lo);
        _mm256_storeu_ps(s + g + 8, hi);
        const __m256 t3 = _mm256_add_ps(hi, lo);
        const __m128 t6 = _mm_add_ps(_mm256_extractf128_ps(t3, 1), _mm256_castps256_ps128(t3));
        const __m128 t8 = _mm_add_ps(t6, _mm_movehl_ps(t6, t6)); /* t6[0]+t6[2], t6[1]+t6[3] */
        sum += (double)_mm_cvtss_f32(_mm_add_ss(t8, _mm_movehdup_ps(t8)));
    }
    return sum;
}

static inline void tl_vacc(float *acc, const float *e, const float *vf, int cnt, int hd) {
    int d = 0;
    for (; d + 64 <= hd; d += 64) {
        __m256 a[8];
        for (int i = 0; i < 8; i++) a[i] = _mm256_loadu_ps(acc + d + 8 * i);
        for (int k = 0; k < cnt; k++) {
            if (e[k] == 0.0f) continue;
            const __m256 w = _mm256_set1_ps(e[k]);
            const float *v = vf + (size_t)k * hd + d;
            for (int i = 0; i < 8; i++) a[i] = _mm256_fmadd_ps(w, _mm256_loadu_ps(v + 8 * i), a[i]);
        }
        for (int i = 0; i < 8; i++) _mm256_storeu_ps(acc + d + 8 * i, a[i]);
    }
    for (; d + 8 <= hd; d += 8) {
        __m256 a = _mm256_loadu_ps(acc + d);
        for (int k = 0; k < cnt; k++)
            if (e[k] != 0.0f) a = _mm256_fmadd_ps(_mm256_set1_ps(e[k]), _mm256_loadu_ps(vf + (size_t)k * hd + d), a);
        _mm256_storeu_ps(acc + d, a);
    }
    for (; d < hd; d++)
        for (int k = 0; k < cnt; k++)
            if (e[k] != 0.0f) acc[d] = fmaf(e[k], vf[(size_t)k * hd + d], acc[d]);
}

static inline void tl_scale(float *acc, float s, int hd) {
    int d = 0;
    for (; d + 8 <= hd; d += 8) _mm256_storeu_ps(acc + d, _mm256_mul_ps(_mm256_loadu_ps(acc + d), _mm256_set1_ps(s)));
    for (; d < hd; d++) acc[d] *= s;
}

#define TL_TASK el_attn_tiled_avx2
#define EL_ATT_ATTR
#include "backend/cpu/attention_tiled_impl.h"
#endif
