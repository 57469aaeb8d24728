/*
 * ops_avx2.c — the element-wise operators of ops.c with AVX2 and FMA, giving
 * the portable bits (see x86/ops_avx512.c). SiLU keeps ggml's 16-element
 * groups (two 8-lane halves); the exp's final j·2^n, which AVX2 has no
 * instruction for, is (j·2^a)·2^b with a = floor(n/2), b = n - a: the first
 * product is exact (|a| <= 96 keeps it normal), the second rounds once, so
 * the result is j·2^n correctly rounded, as ldexpf gives.
 */
#if defined(__x86_64__)
#include <immintrin.h>

/* No FMA contraction of the scalar tails (clang; GCC does not contract in ISO C mode). */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif
#include <float.h>
#include <math.h>

#include "backend/cpu/ops_internal.h"
#include "backend/cpu/x86/expf_x86.h"


static void silu_mul(float *gate, const float *up, int n_rows, int d) {
    const int dv = d & ~15;
    const __m256 one = _mm256_set1_ps(1.0f);
    for (int r = 0; r < n_rows; r++) {
        float *g = gate + (size_t)r * d;
        const float *u = up + (size_t)r * d;
        for (int i = 0; i < dv; i += 8) {
            const __m256 x = _mm256_loadu_ps(g + i);
            const __m256 e = expf_poly8(_mm256_sub_ps(_mm256_setzero_ps(), x));
            _mm256_storeu_ps(g + i, _mm256_mul_ps(_mm256_div_ps(x, _mm256_add_ps(one, e)), _mm256_loadu_ps(u + i)));
        }
        for (int i = dv; i < d; i++) g[i] = (g[i] / (1.0f + expf(-g[i]))) * u[i];
    }
}

static void add(float *y, const float *x, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_loadu_ps(x + i)));
    for (; i < n; i++) y[i] += x[i];
}

static void scale_mul(const float *x, const float *w, float *out, int n, float scale) {
    const __m256 s = _mm256_set1_ps(scale);
    int i = 0;
    if (w)
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), s), _mm256_loadu_ps(w + i)));
    else
        for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), s));
    for (; i < n; i++) out[i] = w ? (x[i] * scale) * w[i] : x[i] * scale;
}

/* See x86/ops_avx512.c: fma(A, CS, B·(-s, c)) in normal mode; NEOX on deinterleaved cos and sin. */
static void rope_rotate(float *x, int n_heads, int head_dim, int n_rot, int neox, const float *cs) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    if (neox) {
        const int half = n_rot / 2;
        float cv[256], sv[256];
        for (int i = 0; i < half; i++) {
            cv[i] = cs[2 * i];
            sv[i] = cs[2 * i + 1];
        }
        for (int h = 0; h < n_heads; h++) {
            float *v = x + (size_t)h * head_dim;
            int i = 0;
            for (; i + 8 <= half; i += 8) {
                const __m256 a = _mm256_loadu_ps(v + i), b = _mm256_loadu_ps(v + i + half);
                const __m256 c = _mm256_loadu_ps(cv + i), s = _mm256_loadu_ps(sv + i);
                _mm256_storeu_ps(v + i, _mm256_fmadd_ps(a, c, _mm256_xor_ps(_mm256_mul_ps(b, s), sign)));
                _mm256_storeu_ps(v + i + half, _mm256_fmadd_ps(a, s, _mm256_mul_ps(b, c)));
            }
            for (; i < half; i++) {
                const float c = cv[i], s = sv[i], a = v[i], b = v[i + half];
                v[i] = fmaf(a, c, -(b * s));
                v[i + half] = fmaf(a, s, b * c);
            }
        }
        return;
    }
    const __m256 negeven = _mm256_castsi256_ps(_mm256_set_epi32(0, (int)0x80000000, 0, (int)0x80000000, 0, (int)0x80000000, 0,
                                                                (int)0x80000000));
    for (int h = 0; h < n_heads; h++) {
        float *v = x + (size_t)h * head_dim;
        int i0 = 0;
        for (; i0 + 8 <= n_rot; i0 += 8) {
            const __m256 p = _mm256_loadu_ps(v + i0), c = _mm256_loadu_ps(cs + i0);
            const __m256 a = _mm256_moveldup_ps(p), b = _mm256_movehdup_ps(p);
            const __m256 cs2 = _mm256_xor_ps(_mm256_permute_ps(c, 0xB1), negeven);
            _mm256_storeu_ps(v + i0, _mm256_fmadd_ps(a, c, _mm256_mul_ps(b, cs2)));
        }
        for (; i0 < n_rot; i0 += 2) {
            const float c = cs[i0], s = cs[i0 + 1], a = v[i0], b = v[i0 + 1];
            v[i0] = fmaf(a, c, -(b * s));
            v[i0 + 1] = fmaf(a, s, b * c);
        }
    }
}

static inline __m256 lnorm_san8(__m256 x) {
    const __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
    return _mm256_blendv_ps(_mm256_min_ps(x, _mm256_set1_ps(FLT_MAX)), _mm256_set1_ps(-INFINITY), nan);
}

static void lnorm_max(const float *x, int n, float *m) {
    __m256 m0 = _mm256_loadu_ps(m), m1 = _mm256_loadu_ps(m + 8);
    for (int i = 0; i < n; i += 16) {
        m0 = _mm256_max_ps(lnorm_san8(_mm256_loadu_ps(x + i)), m0); /* v > m ? v : m */
        m1 = _mm256_max_ps(lnorm_san8(_mm256_loadu_ps(x + i + 8)), m1);
    }
    _mm256_storeu_ps(m, m0);
    _mm256_storeu_ps(m + 8, m1);
}

static void lnorm_sum(const float *x, int n, float mx, double *acc) {
    __m256d a[4];
    for (int j = 0; j < 4; j++) a[j] = _mm256_loadu_pd(acc + 4 * j);
    const __m256 m = _mm256_set1_ps(mx);
    for (int i = 0; i < n; i += 16) {
        for (int h = 0; h < 2; h++) {
            const __m256 e = expf_poly8(_mm256_sub_ps(lnorm_san8(_mm256_loadu_ps(x + i + 8 * h)), m));
            a[2 * h] = _mm256_add_pd(a[2 * h], _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
            a[2 * h + 1] = _mm256_add_pd(a[2 * h + 1], _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
        }
    }
    for (int j = 0; j < 4; j++) _mm256_storeu_pd(acc + 4 * j, a[j]);
}

const el_ops_kernels el_ops_kernels_avx2 = {
    .silu_mul = silu_mul,
    .add = add,
    .scale_mul = scale_mul,
    .rope_rotate = rope_rotate,
    .lnorm_max = lnorm_max,
    .lnorm_sum = lnorm_sum,
};
#endif
