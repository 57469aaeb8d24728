/*
 * layout_avx512.c — the Q4_K weight layout's kernel (package/layout.h:
 * EL_LAYOUT_Q4_K_R16) with AVX-512 VNNI: 16 rows a register, one dword lane
 * a row, straight from the packed super-blocks with no transposition.
 *
 * Per super-block, 16 rows and activation row: 64 vpdpbusd (the activation
 * dwords broadcast from memory) into two int32 chains per pair of sub-blocks
 * (the low nibbles, and the high nibbles kept in place: 16 times the sum,
 * shifted back once), one vpmulld by the sub-block's scales each, and the
 * mins against the activation's sub-block sums (int16 pairs, one vpdpwssd
 * per pair of sub-blocks): the exact integers isum and
 * summ of el_layout_gemm_q4_k_r16_portable, then the same fma pairs (per
 * pair of sub-blocks for rows in the 4-row order, per super-block for the
 * others) and one subtraction — its bits (tests/test_layout.c), which are
 * the flat Q4_K kernels' bits. The scales are unpacked once per group and
 * super-block for up to KR_TT activation rows; more rows take further tiles
 * over the same group while it is in cache. The first tile streams the
 * weights front to back (each super-block's scales lead it), which the
 * hardware prefetchers follow; no software prefetch: 16 KiB ahead into L2
 * measured slower on Zen 4 (Qwen2.5-Coder 1.5B one thread tg64 22.7 t/s vs
 * 26.7 without, TinyLlama-shape Q4_K_M 34-37 at 4.5-36 KiB vs 36-39).
 */
#if defined(__x86_64__)
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "backend/cpu/layout.h"
#include "package/quants_blocks.h"

#define KR_TT 4
#define KR_SB EL_Q4K_R16_SB /* bytes of one super-block of a group */

static inline __attribute__((always_inline)) __m512i kr_bcast(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

/* 128-bit lane l of v: 16 bytes, one a row, widened to int32 (a vector index, not an immediate: l need
 * not be a constant expression, which clang requires of vextracti32x4's). */
static inline __attribute__((always_inline)) __m512i kr_widen(__m512i v, int l) {
    return _mm512_cvtepu8_epi32(_mm512_castsi512_si128(_mm512_permutexvar_epi64(_mm512_setr_epi64(2 * l, 2 * l + 1, 0, 0, 0, 0, 0, 0), v)));
}

/* x4: bit t set for activation rows in the 4-row order. */
static inline __attribute__((always_inline)) void kr_tile(const int TT, int nb, const uint8_t *grp, const uint8_t *x,
                                                          size_t ldx, float *y, size_t ldy, unsigned x4) {
    const __m512i m4 = _mm512_set1_epi8(0x0F), m3 = _mm512_set1_epi8(3);
    __m512 acc[KR_TT], accm[KR_TT];
    const block_q8_K *xa[KR_TT];
    for (int t = 0; t < TT; ++t) {
        acc[t] = accm[t] = _mm512_setzero_ps();
        xa[t] = (const block_q8_K *)(x + ldx * (size_t)t);
    }
    for (int i = 0; i < nb; ++i) {
        const uint8_t *q = grp + (size_t)KR_SB * (size_t)i;
        /* scales and mins as bytes [sub-block][row]: sc[0] sub-blocks 0-3 (a 128-bit lane each), sc[1] 4-7,
         * mn[0], mn[1] the mins; widened in registers where a sub-block pair needs them */
        const __m512i sl = _mm512_loadu_si512(q + EL_Q4K_R16_SC), ml = _mm512_loadu_si512(q + EL_Q4K_R16_MN);
        const __m512i h = _mm512_loadu_si512(q + EL_Q4K_R16_HI);
        const __m512i sc[2] = {
            _mm512_or_si512(_mm512_and_si512(sl, m4), _mm512_slli_epi16(_mm512_and_si512(h, m3), 4)),
            _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(sl, 4), m4),
                            _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(h, 2), m3), 4))};
        const __m512i mn[2] = {
            _mm512_or_si512(_mm512_and_si512(ml, m4), _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(h, 4), m3), 4)),
            _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ml, 4), m4),
                            _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(h, 6), m3), 4))};
        const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(q + EL_Q4K_R16_D)));
        const __m512 dm = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(q + EL_Q4K_R16_DMIN)));
        __m512 dy[KR_TT], dmy[KR_TT];
        __m512i isum[KR_TT], summ[KR_TT];
        __m128i bp[KR_TT]; /* the activation's sub-block sums, dword p = (int16 sum of 2p, of 2p + 1) */
        for (int t = 0; t < TT; ++t) {
            isum[t] = summ[t] = _mm512_setzero_si512();
            bp[t] = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)xa[t][i].bsums),
                                   _mm_loadu_si128((const __m128i *)(xa[t][i].bsums + 8)));
            const __m512 yd = _mm512_set1_ps(xa[t][i].d);
            dy[t] = _mm512_mul_ps(d, yd), dmy[t] = _mm512_mul_ps(dm, yd);
        }
#pragma GCC unroll 4
        for (int jp = 0; jp < 4; ++jp) { /* unrolled: the lane indexes fold into constants */
            __m512i se[KR_TT], so[KR_TT];
            for (int t = 0; t < TT; ++t) se[t] = so[t] = _mm512_setzero_si512();
            for (int cc = 0; cc < 8; ++cc) {
                const __m512i w = _mm512_loadu_si512(q + EL_Q4K_R16_QS + 64 * (8 * jp + cc));
                const __m512i lo = _mm512_and_si512(w, m4), hi = _mm512_andnot_si512(m4, w);
                for (int t = 0; t < TT; ++t) {
                    se[t] = _mm512_dpbusd_epi32(se[t], lo, kr_bcast(xa[t][i].qs + 64 * jp + 4 * cc));
                    so[t] = _mm512_dpbusd_epi32(so[t], hi, kr_bcast(xa[t][i].qs + 64 * jp + 32 + 4 * cc));
                }
            }
            const int j = 2 * jp; /* sub-blocks j (low nibbles) and j + 1 (high) */
            const __m512i s0 = kr_widen(sc[j >> 2], j & 3), s1 = kr_widen(sc[(j + 1) >> 2], (j + 1) & 3);
            /* the mins of sub-blocks j, j + 1 as an int16 pair a row, against the activation's pair: one vpdpwssd */
            const __m512i mp = _mm512_or_si512(kr_widen(mn[j >> 2], j & 3), _mm512_slli_epi32(kr_widen(mn[(j + 1) >> 2], (j + 1) & 3), 16));
            for (int t = 0; t < TT; ++t) {
                isum[t] = _mm512_add_epi32(isum[t], _mm512_add_epi32(_mm512_mullo_epi32(se[t], s0),
                                                                     _mm512_mullo_epi32(_mm512_srai_epi32(so[t], 4), s1)));
                summ[t] = _mm512_dpwssd_epi32(summ[t], mp, _mm512_permutexvar_epi32(_mm512_set1_epi32(jp), _mm512_castsi128_si512(bp[t])));
                if (x4 >> t & 1) { /* the 4-row order: one fma pair per 64 elements */
                    acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), dy[t], acc[t]);
                    accm[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(summ[t]), dmy[t], accm[t]);
                    isum[t] = summ[t] = _mm512_setzero_si512();
                }
            }
        }
        for (int t = 0; t < TT; ++t)
            if (!(x4 >> t & 1)) {
                acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), dy[t], acc[t]);
                accm[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(summ[t]), dmy[t], accm[t]);
            }
    }
    for (int t = 0; t < TT; ++t) _mm512_storeu_ps(y + ldy * (size_t)t, _mm512_sub_ps(acc[t], accm[t]));
}

void el_layout_gemm_q4_k_r16_avx512(int k, const void *w, int nr, const void *x, size_t ldx, int nt, float *y,
                                    size_t ldy, int x4) {
    const int nb = k / EL_QK_K;
    const size_t gb = (size_t)KR_SB * (size_t)nb;
    for (int g = 0; g < nr / 16; ++g) {
        const uint8_t *grp = (const uint8_t *)w + gb * (size_t)g;
        /* every tile of activation rows over this group while it is in cache */
        for (int t0 = 0; t0 < nt; t0 += KR_TT) {
            const int T = nt - t0 < KR_TT ? nt - t0 : KR_TT;
            const uint8_t *xt = (const uint8_t *)x + ldx * (size_t)t0;
            float *yt = y + ldy * (size_t)t0 + 16 * (size_t)g;
            const int n4 = x4 - t0 < 0 ? 0 : x4 - t0 > T ? T : x4 - t0;
            const unsigned m4 = (1u << n4) - 1u; /* the tile's rows in the 4-row order */
            /* each T a constant, so the tile's loops unroll; the order mask a constant where it is all one order */
#define KR_TILE(TC)                                                                                             \
    (m4 == 0 ? kr_tile(TC, nb, grp, xt, ldx, yt, ldy, 0u)                                              \
     : m4 == (1u << (TC)) - 1u ? kr_tile(TC, nb, grp, xt, ldx, yt, ldy, (1u << (TC)) - 1u)             \
                               : kr_tile(TC, nb, grp, xt, ldx, yt, ldy, m4))
            switch (T) {
            case 1: KR_TILE(1); break;
            case 2: KR_TILE(2); break;
            case 3: KR_TILE(3); break;
            default: KR_TILE(4); break;
            }
#undef KR_TILE
        }
    }
}
#endif
