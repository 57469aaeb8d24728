/*
 * attention_tiled_avx512.c — the tiled attention kernel of
 * attention_tiled.c with AVX-512: the same bits (attention_tiled_impl.h
 * states the arithmetic). Scores are 16 query rows per vector (the fma
 * chain of each (row, position) pair runs over head_dim in order), the
 * softmax uses ggml's AVX-512 expf itself, V is accumulated 16 dims per
 * vector.
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
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(f + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(h + i))));
    for (; i < n; i++) f[i] = el_fp16_to_fp32(h[i]);
}

static inline void tl_scores(const float *qt, int R, const float *kf, int cnt, int hd, float *sc) {
    for (int rb = 0; rb < R; rb += 16) {
        int k = 0;
        for (; k + 8 <= cnt; k += 8) {
            __m512 acc[8];
            for (int i = 0; i < 8; i++) acc[i] = _mm512_setzero_ps();
            const float *kp = kf + (size_t)k * hd;
            for (int d = 0; d < hd; d++) {
                const __m512 q = _mm512_loadu_ps(qt + (size_t)d * R + rb);
                for (int i = 0; i < 8; i++) acc[i] = _mm512_fmadd_ps(q, _mm512_set1_ps(kp[(size_t)i * hd + d]), acc[i]);
            }
            for (int i = 0; i < 8; i++) _mm512_storeu_ps(sc + (size_t)(k + i) * R + rb, acc[i]);
        }
        for (; k < cnt; k++) {
            __m512 acc = _mm512_setzero_ps();
            const float *kp = kf + (size_t)k * hd;
            for (int d = 0; d < hd; d++)
                acc = _mm512_fmadd_ps(_mm512_loadu_ps(qt + (size_t)d * R + rb), _mm512_set1_ps(kp[d]), acc);
            _mm512_storeu_ps(sc + (size_t)k * R + rb, acc);
        }
    }
}


static inline double tl_expsum(float *s, float M) {
    double sum = 0.0;
    for (int g = 0; g < EL_ATT_TILE_KV; g += 16) {
        const __m512 e = expf_poly16(_mm512_sub_ps(_mm512_loadu_ps(s + g), _mm512_set1_ps(M)));
        _mm512_storeu_ps(s + g, e);
        float l[16];
        _mm512_storeu_ps(l, e);
        sum += (double)el_att_reduce16(l);
    }
    return sum;
}

static inline void tl_vacc(float *acc, const float *e, const float *vf, int cnt, int hd) {
    int d = 0;
    for (; d + 128 <= hd; d += 128) {
        __m512 a[8];
        for (int i = 0; i < 8; i++) a[i] = _mm512_loadu_ps(acc + d + 16 * i);
        for (int k = 0; k < cnt; k++) {
            if (e[k] == 0.0f) continue;
            const __m512 w = _mm512_set1_ps(e[k]);
            const float *v = vf + (size_t)k * hd + d;
            for (int i = 0; i < 8; i++) a[i] = _mm512_fmadd_ps(w, _mm512_loadu_ps(v + 16 * i), a[i]);
        }
        for (int i = 0; i < 8; i++) _mm512_storeu_ps(acc + d + 16 * i, a[i]);
    }
    for (; d + 16 <= hd; d += 16) {
        __m512 a = _mm512_loadu_ps(acc + d);
        for (int k = 0; k < cnt; k++)
            if (e[k] != 0.0f) a = _mm512_fmadd_ps(_mm512_set1_ps(e[k]), _mm512_loadu_ps(vf + (size_t)k * hd + d), a);
        _mm512_storeu_ps(acc + d, a);
    }
    for (; d < hd; d++)
        for (int k = 0; k < cnt; k++)
            if (e[k] != 0.0f) acc[d] = fmaf(e[k], vf[(size_t)k * hd + d], acc[d]);
}

/* Four queries at once: each V vector loaded once, 16 accumulators (4
 * queries × 64 dims) in registers; each (query, dim) chain is tl_vacc's. */
#define TL_HAVE_VACC4 1
static inline void tl_vacc4(float *acc, const float *e, const float *vf, int cnt, int hd) {
    const float *e0 = e, *e1 = e + EL_ATT_TILE_KV, *e2 = e + 2 * EL_ATT_TILE_KV, *e3 = e + 3 * EL_ATT_TILE_KV;
    int d = 0;
    for (; d + 64 <= hd; d += 64) {
        __m512 a[4][4];
        for (int q = 0; q < 4; q++)
            for (int i = 0; i < 4; i++) a[q][i] = _mm512_loadu_ps(acc + (size_t)q * hd + d + 16 * i);
        for (int k = 0; k < cnt; k++) {
            const float *v = vf + (size_t)k * hd + d;
            const __m512 v0 = _mm512_loadu_ps(v), v1 = _mm512_loadu_ps(v + 16), v2 = _mm512_loadu_ps(v + 32),
                         v3 = _mm512_loadu_ps(v + 48);
            const float w[4] = {e0[k], e1[k], e2[k], e3[k]};
            for (int q = 0; q < 4; q++) {
                if (w[q] == 0.0f) continue;
                const __m512 wq = _mm512_set1_ps(w[q]);
                a[q][0] = _mm512_fmadd_ps(wq, v0, a[q][0]);
                a[q][1] = _mm512_fmadd_ps(wq, v1, a[q][1]);
                a[q][2] = _mm512_fmadd_ps(wq, v2, a[q][2]);
                a[q][3] = _mm512_fmadd_ps(wq, v3, a[q][3]);
            }
        }
        for (int q = 0; q < 4; q++)
            for (int i = 0; i < 4; i++) _mm512_storeu_ps(acc + (size_t)q * hd + d + 16 * i, a[q][i]);
    }
    for (int q = 0; q < 4 && d < hd; q++) { /* the dims past the last 64 */
        const float *eq = e + q * EL_ATT_TILE_KV;
        float *aq = acc + (size_t)q * hd;
        int dd = d;
        for (; dd + 16 <= hd; dd += 16) {
            __m512 x = _mm512_loadu_ps(aq + dd);
            for (int k = 0; k < cnt; k++)
                if (eq[k] != 0.0f) x = _mm512_fmadd_ps(_mm512_set1_ps(eq[k]), _mm512_loadu_ps(vf + (size_t)k * hd + dd), x);
            _mm512_storeu_ps(aq + dd, x);
        }
        for (; dd < hd; dd++)
            for (int k = 0; k < cnt; k++)
                if (eq[k] != 0.0f) aq[dd] = fmaf(eq[k], vf[(size_t)k * hd + dd], aq[dd]);
    }
}

static inline void tl_scale(float *acc, float s, int hd) {
    int d = 0;
    for (; d + 16 <= hd; d += 16) _mm512_storeu_ps(acc + d, _mm512_mul_ps(_mm512_loadu_ps(acc + d), _mm512_set1_ps(s)));
    for (; d < hd; d++) acc[d] *= s;
}

#define TL_TASK el_attn_tiled_avx512
#define EL_ATT_ATTR
#include "backend/cpu/attention_tiled_impl.h"
#endif
