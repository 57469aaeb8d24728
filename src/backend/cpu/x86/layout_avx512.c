/*
 * layout_avx512.c — the Q4_K and Q5_0 weight layouts' kernels (package/layout.h:
 * EL_LAYOUT_Q4_K_R16, EL_LAYOUT_Q5_0_R16) with AVX-512 VNNI: 16 rows a register, one dword lane
 * a row, straight from the packed blocks with no transposition.
 *
 * Q4_K. Per super-block, 16 rows and activation row: 64 vpdpbusd (the activation
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
 *
 * Q5_0 (k5_tile below). Per block, 16 rows and activation row: the 5-bit
 * weights of register j (elements 4j..4j+3 of the 16 rows) are its nibbles
 * plus 16 under mask j, one vpdpbusd each, started at -16 times the
 * activation's 4-byte sum: lane j of the flat kernel's x86 order, exact, for
 * 16 rows at once. The llama order then takes 8 conversions and 8 fma (one
 * accumulator per lane, d_w * d_a one product for the 16 rows) and the x86
 * horizontal sum as vector adds at the end; the block order one chain, one
 * conversion and one fma. Both are el_layout_gemm_q5_0_r16_portable's bits,
 * which are the flat Q5_0 kernels' in that order. The blocks stream front to
 * back (each block's bits and scales follow its quants).
 */
#if defined(__x86_64__)
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "backend/cpu/kernels.h"
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

/* ---- Q5_0 ---- */

#define K5_TT 2  /* activation rows a decode tile (1..4 rows: the weights unpacked in registers) */
#define K5_KC 32 /* blocks a prefill chunk */
#define K5_PT 3  /* activation rows a prefill tile */
#define K5_B EL_Q50_R16_BLOCK

/* Block q of a group: the 8 registers of unsigned 5-bit weights (register j: elements 4j..4j+3 of the 16
 * rows, the nibbles plus 16 under mask j) and the 16 rows' d. */
static inline __attribute__((always_inline)) void k5_unpack(const uint8_t *q, __m512i *W, __m512 *dw) {
    const __m512i m4 = _mm512_set1_epi8(0x0F), s16 = _mm512_set1_epi8(16);
    for (int c = 0; c < 4; ++c) {
        const __m512i v = _mm512_loadu_si512(q + 64 * c);
        W[c] = _mm512_and_si512(v, m4);
        W[c + 4] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
    }
    for (int j = 0; j < 8; ++j) {
        uint64_t m;
        memcpy(&m, q + EL_Q50_R16_QH + 8 * j, 8);
        W[j] = _mm512_mask_add_epi8(W[j], _cvtu64_mask64(m), W[j], s16);
    }
    *dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(q + EL_Q50_R16_D)));
}

/* -16 times each 4-byte sum of an activation block: the 8 lanes' offsets (the weights are stored + 16). */
static inline __attribute__((always_inline)) void k5_offsets(const block_q8_0 *a, int32_t *cb) {
    const __m256i cs = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(16),
                                           _mm256_loadu_si256((const __m256i *)a->qs));
    _mm256_store_si256((__m256i *)cb, _mm256_sub_epi32(_mm256_setzero_si256(), cs));
}

/* One block of 16 rows against activation block a (its offsets cb): the llama order's 8 lanes, each
 * acc[j] = fma(d_w * d_a, lane j, acc[j]); blk: the block order, acc[0] = fma(sum, d_w * d_a, acc[0]). */
static inline __attribute__((always_inline)) void k5_block(const int blk, const __m512i *W, __m512 dw,
                                                           const block_q8_0 *a, const int32_t *cb, __m512 *acc) {
    const __m512 d = _mm512_mul_ps(dw, _mm512_set1_ps(_cvtsh_ss(a->d)));
    const int8_t *qs = (const int8_t *)a->qs;
    if (blk) {
        __m512i s = _mm512_set1_epi32(cb[0] + cb[1] + cb[2] + cb[3] + cb[4] + cb[5] + cb[6] + cb[7]);
        for (int j = 0; j < 8; ++j) s = _mm512_dpbusd_epi32(s, W[j], kr_bcast(qs + 4 * j));
        acc[0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), d, acc[0]);
        return;
    }
    for (int j = 0; j < 8; ++j)
        acc[j] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_set1_epi32(cb[j]), W[j], kr_bcast(qs + 4 * j))),
                                 acc[j]);
}

/* The 16 outputs: the block order's accumulator, or the x86 horizontal sum of the 8 lanes,
 * ((l4 + l0) + (l6 + l2)) + ((l5 + l1) + (l7 + l3)). */
static inline __attribute__((always_inline)) __m512 k5_out(const int blk, const __m512 *acc) {
    if (blk) return acc[0];
    __m512 r[4];
    for (int i = 0; i < 4; ++i) r[i] = _mm512_add_ps(acc[i + 4], acc[i]);
    return _mm512_add_ps(_mm512_add_ps(r[0], r[2]), _mm512_add_ps(r[1], r[3]));
}

/* Decode: TT activation rows against a whole group, each block unpacked into registers once. */
static inline __attribute__((always_inline)) void k5_tile(const int TT, const int blk, int nb, const uint8_t *grp,
                                                          const uint8_t *x, size_t ldx, float *y, size_t ldy) {
    __m512 acc[K5_TT][8];
    for (int t = 0; t < TT; ++t)
        for (int j = 0; j < 8; ++j) acc[t][j] = _mm512_setzero_ps();
    for (int b = 0; b < nb; ++b) {
        __m512i W[8];
        __m512 dw;
        k5_unpack(grp + (size_t)K5_B * (size_t)b, W, &dw);
        for (int t = 0; t < TT; ++t) {
            const block_q8_0 *a = (const block_q8_0 *)(x + ldx * (size_t)t) + b;
            _Alignas(32) int32_t cb[8];
            k5_offsets(a, cb);
            k5_block(blk, W, dw, a, cb, acc[t]);
        }
    }
    for (int t = 0; t < TT; ++t) _mm512_storeu_ps(y + ldy * (size_t)t, k5_out(blk, acc[t]));
}

/* Prefill (more activation rows): a chunk of K5_KC blocks of a group is unpacked once into wb (8
 * registers a block) and dwb, then every tile of K5_PT activation rows reads it from L1, its offsets
 * formed up front (in the dot loop each is a broadcast from memory, as in qx_lt_tile); the accumulators
 * live in acc_io ([row][lane][16]) between chunks. */
static inline __attribute__((always_inline)) void k5_ptile(const int TT, const int blk, int kc, const __m512i *wb,
                                                           const __m512 *dwb, const uint8_t *x, size_t ldx,
                                                           float *acc_io, int first) {
    __m512 acc[K5_PT][8];
    for (int t = 0; t < TT; ++t)
        for (int j = 0; j < (blk ? 1 : 8); ++j)
            acc[t][j] = first ? _mm512_setzero_ps() : _mm512_load_ps(acc_io + 128 * t + 16 * j);
    _Alignas(32) int32_t cbuf[K5_PT][K5_KC][8];
    for (int t = 0; t < TT; ++t)
        for (int b = 0; b < kc; ++b) k5_offsets((const block_q8_0 *)(x + ldx * (size_t)t) + b, cbuf[t][b]);
    for (int b = 0; b < kc; ++b)
        for (int t = 0; t < TT; ++t)
            k5_block(blk, wb + 8 * b, dwb[b], (const block_q8_0 *)(x + ldx * (size_t)t) + b, cbuf[t][b], acc[t]);
    for (int t = 0; t < TT; ++t)
        for (int j = 0; j < (blk ? 1 : 8); ++j) _mm512_store_ps(acc_io + 128 * t + 16 * j, acc[t][j]);
}

/* nt activation rows (at most 64, ops.c's bound for a layout call; more in further passes) against one group. */
static void k5_prefill(int blk, int nb, const uint8_t *grp, const uint8_t *x, size_t ldx, int nt, float *y, size_t ldy) {
    _Alignas(64) __m512i wb[K5_KC * 8];
    _Alignas(64) __m512 dwb[K5_KC];
    _Alignas(64) float acc[64 * 8 * 16];
    for (int n0 = 0; n0 < nt; n0 += 64) {
        const int nn = nt - n0 < 64 ? nt - n0 : 64;
        const uint8_t *xn = x + ldx * (size_t)n0;
        for (int c0 = 0; c0 < nb; c0 += K5_KC) {
            const int kc = nb - c0 < K5_KC ? nb - c0 : K5_KC;
            for (int b = 0; b < kc; ++b) k5_unpack(grp + (size_t)K5_B * (size_t)(c0 + b), wb + 8 * b, dwb + b);
            const uint8_t *xc = xn + sizeof(block_q8_0) * (size_t)c0;
            int t = 0;
            for (; t + K5_PT <= nn; t += K5_PT)
                blk ? k5_ptile(K5_PT, 1, kc, wb, dwb, xc + ldx * (size_t)t, ldx, acc + 128 * t, c0 == 0)
                    : k5_ptile(K5_PT, 0, kc, wb, dwb, xc + ldx * (size_t)t, ldx, acc + 128 * t, c0 == 0);
            for (; t < nn; ++t)
                blk ? k5_ptile(1, 1, kc, wb, dwb, xc + ldx * (size_t)t, ldx, acc + 128 * t, c0 == 0)
                    : k5_ptile(1, 0, kc, wb, dwb, xc + ldx * (size_t)t, ldx, acc + 128 * t, c0 == 0);
        }
        for (int t = 0; t < nn; ++t) {
            __m512 a[8];
            for (int l = 0; l < (blk ? 1 : 8); ++l) a[l] = _mm512_load_ps(acc + 128 * t + 16 * l);
            _mm512_storeu_ps(y + ldy * (size_t)(n0 + t), k5_out(blk, a));
        }
    }
}

void el_layout_gemm_q5_0_r16_avx512(int k, const void *w, int nr, const void *x, size_t ldx, int nt, float *y,
                                    size_t ldy, int x4) {
    (void)x4;
    const int nb = k / 32, blk = el_cpu_kernels_order() == EL_ORDER_BLOCK;
    const size_t gb = (size_t)K5_B * (size_t)nb;
    for (int g = 0; g < nr / 16; ++g) {
        const uint8_t *grp = (const uint8_t *)w + gb * (size_t)g;
        /* 1..4 rows (decode, a batched step of up to 4 streams) in register tiles, more through the
         * unpacked chunks. Gemma 3 270M's 18 ffn_up (2048 x 640), one thread, AMD EPYC Zen 4: 1 row
         * 0.52 ms (flat Q5_0 0.80), 4 rows 1.76 (flat 1.86; through the chunks 2.15), 64 rows 21.3 (flat
         * 20.2). */
        if (nt > 4) {
            k5_prefill(blk, nb, grp, (const uint8_t *)x, ldx, nt, y + 16 * (size_t)g, ldy);
            continue;
        }
        for (int t0 = 0; t0 < nt; t0 += K5_TT) {
            const uint8_t *xt = (const uint8_t *)x + ldx * (size_t)t0;
            float *yt = y + ldy * (size_t)t0 + 16 * (size_t)g;
            if (nt - t0 >= 2)
                blk ? k5_tile(2, 1, nb, grp, xt, ldx, yt, ldy) : k5_tile(2, 0, nb, grp, xt, ldx, yt, ldy);
            else
                blk ? k5_tile(1, 1, nb, grp, xt, ldx, yt, ldy) : k5_tile(1, 0, nb, grp, xt, ldx, yt, ldy);
        }
    }
}
#endif
