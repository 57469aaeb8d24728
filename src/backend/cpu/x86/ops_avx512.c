/*
 * ops_avx512.c — the element-wise operators of ops.c with AVX-512, giving
 * the portable bits: the same IEEE operations per element (fused where the
 * portable code calls fmaf, separate elsewhere), only 16 elements at a time.
 * SiLU's exp is ggml's AVX-512 polynomial, whose final 2^n scaling is
 * vscalefps (what ldexpf computes: j·2^n correctly rounded).
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
    const __m512 one = _mm512_set1_ps(1.0f);
    for (int r = 0; r < n_rows; r++) {
        float *g = gate + (size_t)r * d;
        const float *u = up + (size_t)r * d;
        for (int i = 0; i < dv; i += 16) {
            const __m512 x = _mm512_loadu_ps(g + i);
            const __m512 e = expf_poly16(_mm512_sub_ps(_mm512_setzero_ps(), x));
            _mm512_storeu_ps(g + i, _mm512_mul_ps(_mm512_div_ps(x, _mm512_add_ps(one, e)), _mm512_loadu_ps(u + i)));
        }
        for (int i = dv; i < d; i++) g[i] = (g[i] / (1.0f + expf(-g[i]))) * u[i];
    }
}

static void add(float *y, const float *x, int n) {
    int i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_add_ps(_mm512_loadu_ps(y + i), _mm512_loadu_ps(x + i)));
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(y + i, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, y + i), _mm512_maskz_loadu_ps(m, x + i)));
    }
}

static void scale_mul(const float *x, const float *w, float *out, int n, float scale) {
    const __m512 s = _mm512_set1_ps(scale);
    int i = 0;
    if (w)
        for (; i + 16 <= n; i += 16)
            _mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(x + i), s), _mm512_loadu_ps(w + i)));
    else
        for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_loadu_ps(x + i), s));
    for (; i < n; i++) out[i] = w ? (x[i] * scale) * w[i] : x[i] * scale;
}

/*
 * Normal mode, 8 pairs (a, b) per vector with their (c, s): lane 2i gets
 * fma(a, c, -(b·s)), lane 2i+1 fma(a, s, b·c) — i.e. fma(A, CS, B·CS')
 * with A, B the pair's a and b in both lanes, CS' = (-s, c).
 * NEOX mode: the halves with cos and sin deinterleaved.
 */
static void rope_rotate(float *x, int n_heads, int head_dim, int n_rot, int neox, const float *cs) {
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
            for (; i + 16 <= half; i += 16) {
                const __m512 a = _mm512_loadu_ps(v + i), b = _mm512_loadu_ps(v + i + half);
                const __m512 c = _mm512_loadu_ps(cv + i), s = _mm512_loadu_ps(sv + i);
                _mm512_storeu_ps(v + i, _mm512_fmadd_ps(a, c, _mm512_xor_ps(_mm512_mul_ps(b, s), _mm512_set1_ps(-0.0f))));
                _mm512_storeu_ps(v + i + half, _mm512_fmadd_ps(a, s, _mm512_mul_ps(b, c)));
            }
            for (; i < half; i++) {
                const float c = cv[i], s = sv[i], a = v[i], b = v[i + half];
                v[i] = fmaf(a, c, -(b * s));
                v[i + half] = fmaf(a, s, b * c);
            }
        }
        return;
    }
    const __m512 negeven = _mm512_castsi512_ps(_mm512_set_epi32(0, (int)0x80000000, 0, (int)0x80000000, 0, (int)0x80000000, 0,
                                                                (int)0x80000000, 0, (int)0x80000000, 0, (int)0x80000000, 0,
                                                                (int)0x80000000, 0, (int)0x80000000));
    for (int h = 0; h < n_heads; h++) {
        float *v = x + (size_t)h * head_dim;
        int i0 = 0;
        for (; i0 + 16 <= n_rot; i0 += 16) {
            const __m512 p = _mm512_loadu_ps(v + i0), c = _mm512_loadu_ps(cs + i0);
            const __m512 a = _mm512_moveldup_ps(p), b = _mm512_movehdup_ps(p);
            const __m512 cs2 = _mm512_xor_ps(_mm512_permute_ps(c, 0xB1), negeven); /* (-s, c) */
            _mm512_storeu_ps(v + i0, _mm512_fmadd_ps(a, c, _mm512_mul_ps(b, cs2)));
        }
        for (; i0 < n_rot; i0 += 2) {
            const float c = cs[i0], s = cs[i0 + 1], a = v[i0], b = v[i0 + 1];
            v[i0] = fmaf(a, c, -(b * s));
            v[i0 + 1] = fmaf(a, s, b * c);
        }
    }
}

static inline __m512 lnorm_san16(__m512 x) {
    const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    return _mm512_mask_blend_ps(nan, _mm512_min_ps(x, _mm512_set1_ps(FLT_MAX)), _mm512_set1_ps(-INFINITY));
}

static void lnorm_max(const float *x, int n, float *m) {
    __m512 mv = _mm512_loadu_ps(m);
    for (int i = 0; i < n; i += 16) mv = _mm512_max_ps(lnorm_san16(_mm512_loadu_ps(x + i)), mv); /* v > m ? v : m */
    _mm512_storeu_ps(m, mv);
}

static void lnorm_sum(const float *x, int n, float mx, double *acc) {
    __m512d lo = _mm512_loadu_pd(acc), hi = _mm512_loadu_pd(acc + 8);
    const __m512 m = _mm512_set1_ps(mx);
    for (int i = 0; i < n; i += 16) {
        const __m512 e = expf_poly16(_mm512_sub_ps(lnorm_san16(_mm512_loadu_ps(x + i)), m));
        lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
        hi = _mm512_add_pd(hi, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1))));
    }
    _mm512_storeu_pd(acc, lo);
    _mm512_storeu_pd(acc + 8, hi);
}

const el_ops_kernels el_ops_kernels_avx512 = {
    .silu_mul = silu_mul,
    .add = add,
    .scale_mul = scale_mul,
    .rope_rotate = rope_rotate,
    .lnorm_max = lnorm_max,
    .lnorm_sum = lnorm_sum,
};
#endif
