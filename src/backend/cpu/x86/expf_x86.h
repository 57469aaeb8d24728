/*
 * expf_x86.h — ggml's vector expf (its AVX-512 form: range reduction by the
 * 1.5·2^23 trick, a degree-5 polynomial in fused steps, j·2^n) in 16 lanes
 * (AVX-512: vscalefps) and 8 lanes (AVX2: j·2^n as (j·2^a)·2^b, a =
 * floor(n/2), b = n − a — the first product exact, the second rounding once,
 * so the result is j·2^n correctly rounded, as vscalefps and ldexpf give).
 * Lane for lane the bits of el_expf_poly (backend/cpu/expf_poly.h). Shared
 * by SiLU (ops_avx*.c) and the tiled attention's softmax
 * (attention_tiled_avx*.c); each includer is compiled for its ISA.
 */
#ifndef EL_BACKEND_CPU_X86_EXPF_X86_H
#define EL_BACKEND_CPU_X86_EXPF_X86_H
#include <immintrin.h>
#include <math.h>

#if defined(__AVX512F__)
static inline __m512 expf_poly16(__m512 x) {
    const __m512 r = _mm512_set1_ps(0x1.8p23f);
    const __m512 z = _mm512_fmadd_ps(x, _mm512_set1_ps(0x1.715476p+0f), r);
    const __m512 n = _mm512_sub_ps(z, r);
    const __m512 b = _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.7f7d1cp-20f),
                                      _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.62e4p-1f), x));
    const __m512 u = _mm512_mul_ps(b, b);
    const __m512 j = _mm512_fmadd_ps(
        _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_set1_ps(0x1.0e4020p-7f), b, _mm512_set1_ps(0x1.573e2ep-5f)), u,
                        _mm512_fmadd_ps(_mm512_set1_ps(0x1.555e66p-3f), b, _mm512_set1_ps(0x1.fffdb6p-2f))),
        u, _mm512_fmadd_ps(_mm512_set1_ps(0x1.ffffecp-1f), b, _mm512_set1_ps(1.0f)));
    const __m512 res = _mm512_scalef_ps(j, n);
    const __mmask16 big = _mm512_cmp_ps_mask(_mm512_abs_ps(n), _mm512_set1_ps(192.0f), _CMP_GT_OQ);
    if (!big) return res;
    const __mmask16 neg = _mm512_cmp_ps_mask(n, _mm512_setzero_ps(), _CMP_LE_OQ);
    const __m512 alt = _mm512_mask_blend_ps(neg, _mm512_set1_ps(INFINITY), _mm512_setzero_ps());
    return _mm512_mask_blend_ps(big, res, alt);
}
#endif

#if defined(__AVX2__) && defined(__FMA__)
static inline __m256 pow2i(__m256i e) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(e, _mm256_set1_epi32(127)), 23)); }

static inline __m256 expf_poly8(__m256 x) {
    const __m256 r = _mm256_set1_ps(0x1.8p23f);
    const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), r);
    const __m256 n = _mm256_sub_ps(z, r);
    const __m256 b = _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f),
                                      _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x));
    const __m256 u = _mm256_mul_ps(b, b);
    const __m256 j = _mm256_fmadd_ps(
        _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b, _mm256_set1_ps(0x1.573e2ep-5f)), u,
                        _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b, _mm256_set1_ps(0x1.fffdb6p-2f))),
        u, _mm256_fmadd_ps(_mm256_set1_ps(0x1.ffffecp-1f), b, _mm256_set1_ps(1.0f)));
    const __m256 absn = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), n);
    const __m256 big = _mm256_cmp_ps(absn, _mm256_set1_ps(192.0f), _CMP_GT_OQ);
    /* in range, n is an integer in [-192, 192]; out of range (or NaN) the lanes are replaced below or stay NaN */
    const __m256 nc = _mm256_min_ps(_mm256_max_ps(n, _mm256_set1_ps(-192.0f)), _mm256_set1_ps(192.0f));
    const __m256i ni = _mm256_cvttps_epi32(nc);
    const __m256i a = _mm256_srai_epi32(ni, 1);
    const __m256i bb = _mm256_sub_epi32(ni, a);
    const __m256 res = _mm256_mul_ps(_mm256_mul_ps(j, pow2i(a)), pow2i(bb));
    if (!_mm256_movemask_ps(big)) return res;
    const __m256 neg = _mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_LE_OQ);
    const __m256 alt = _mm256_blendv_ps(_mm256_set1_ps(INFINITY), _mm256_setzero_ps(), neg);
    return _mm256_blendv_ps(res, alt, big);
}
#endif

#endif
