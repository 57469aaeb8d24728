/*
 * attention_typed_avx512.c — the V step of attention_typed.c with AVX-512:
 * one BF16 / Q8_0 / Q4_0 cache row added into an F32 accumulator,
 *     if (ms != 1) acc *= ms;  acc = fma(to_float(v), vs, acc)
 * with to_float exactly ggml's (BF16: the bits shifted; Q8_0: (float)q * d;
 * Q4_0: (float)(nibble - 8) * d, one rounding each), so the bits equal the
 * portable code's (tests/test_kv_types.c compares them). hd % 32 == 0.
 */
#if defined(__x86_64__)
#include <immintrin.h>

#include "backend/cpu/attention_typed.h"
#include "package/quants_blocks.h"
#include "util/fp16.h"

static inline void mad16(float *acc, __m512 v, __m512 m, __m512 w, int scale) {
    __m512 a = _mm512_loadu_ps(acc);
    if (scale) a = _mm512_mul_ps(a, m);
    _mm512_storeu_ps(acc, _mm512_fmadd_ps(v, w, a));
}

void el_attn_vmad_avx512(int type, const void *row, float *acc, float ms, float vs, int hd) {
    const __m512 m = _mm512_set1_ps(ms), w = _mm512_set1_ps(vs);
    const int sc = ms != 1.0f;
    switch (type) {
    case EL_TYPE_Q8_0: {
        const block_q8_0 *b = row;
        for (int i = 0; i < hd / 32; i++, acc += 32) {
            const __m512 d = _mm512_set1_ps(el_fp16_to_fp32(b[i].d));
            const __m128i q0 = _mm_loadu_si128((const __m128i *)b[i].qs);
            const __m128i q1 = _mm_loadu_si128((const __m128i *)(b[i].qs + 16));
            mad16(acc, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q0)), d), m, w, sc);
            mad16(acc + 16, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q1)), d), m, w, sc);
        }
        break;
    }
    case EL_TYPE_Q4_0: {
        const block_q4_0 *b = row;
        const __m128i lo4 = _mm_set1_epi8(0x0F), eight = _mm_set1_epi8(8);
        for (int i = 0; i < hd / 32; i++, acc += 32) {
            const __m512 d = _mm512_set1_ps(el_fp16_to_fp32(b[i].d));
            const __m128i q = _mm_loadu_si128((const __m128i *)b[i].qs);
            const __m128i lo = _mm_sub_epi8(_mm_and_si128(q, lo4), eight);                    /* elements 0..15 */
            const __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(q, 4), lo4), eight); /* 16..31 */
            mad16(acc, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(lo)), d), m, w, sc);
            mad16(acc + 16, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(hi)), d), m, w, sc);
        }
        break;
    }
    default: { /* BF16 */
        const el_bf16 *b = row;
        for (int i = 0; i < hd; i += 16) {
            const __m256i h = _mm256_loadu_si256((const __m256i *)(b + i));
            const __m512 v = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
            mad16(acc + i, v, m, w, sc);
        }
        break;
    }
    }
}

void el_attn_dot_q4_0_avx512(int n, float *s, const void *vx, const void *vy) {
    const block_q4_0 *x = vx;
    const block_q8_0 *y = vy;
    const __m128i lo4 = _mm_set1_epi8(0x0F);
    __m256 acc = _mm256_setzero_ps();
    for (int ib = 0; ib < n / 32; ib++) {
        const __m128i q = _mm_loadu_si128((const __m128i *)x[ib].qs);
        const __m256i nib = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), lo4), _mm_and_si128(q, lo4));
        const __m256i qx = _mm256_sub_epi8(nib, _mm256_set1_epi8(8));
        const __m256i qy = _mm256_loadu_si256((const __m256i *)y[ib].qs);
        const __m256i l = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_sign_epi8(qx, qx), _mm256_sign_epi8(qy, qx));
        const __m256 d = _mm256_set1_ps(el_fp16_to_fp32(x[ib].d) * el_fp16_to_fp32(y[ib].d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(l), acc);
    }
    __m128 r = _mm_add_ps(_mm256_extractf128_ps(acc, 1), _mm256_castps256_ps128(acc));
    r = _mm_add_ps(r, _mm_movehl_ps(r, r));
    r = _mm_add_ss(r, _mm_movehdup_ps(r));
    *s = _mm_cvtss_f32(r);
}
#endif
