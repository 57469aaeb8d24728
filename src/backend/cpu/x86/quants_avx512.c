/*
 * quants_avx512.c — AVX-512 VNNI kernels of the 32-element block formats and
 * the Q8_0/Q8_1 activation quantizers; the code is in quants_x86.h, compiled
 * here with vpdpbusd (on 256-bit registers: 32 of them hold the wider gemm
 * tiles). Same bits as the portable kernels (tests/test_kernels.c). The
 * second table holds the Q8_0 and Q5_0 kernels in block order (kernels.h,
 * el_cpu_order; the code is in quants_block_x86.h).
 */
#if defined(__x86_64__)
#define QX_VNNI 1
#include "backend/cpu/isa_tables.h"
#include "backend/cpu/x86/quants_block_x86.h"
#include "backend/cpu/x86/quants_x86.h"

QX_GEMM(gemm_q4_0_vnni, sum, QX_Q4_0)
QX_GEMM(gemm_iq4_nl_vnni, sum, QX_IQ4_NL)

/*
 * One activation row (decode) of IQ4_NL: the AVX2 table's kernel (same
 * bits; every AVX-512 CPU has AVX2). Streaming Q4_0 rows from memory on one
 * core (75 MB in 64-row calls) through this per-row path, that build ran at
 * 14-16 GB/s where this file's build ran at 7-15 GB/s (5 alternating runs).
 * Q4_0 decode has its own kernel (qx_q4_0_rows8), whose VNNI build here ran
 * 10 % faster than the AVX2 one with the rows in cache (26.4 vs 24.0 GB/s).
 */
static void gemm_q4_0(int k, const void *w, size_t ldw, int nr, const void *x, size_t ldx, int t0, int nt,
                      int n_act, float *y, size_t ldy) {
    gemm_q4_0_vnni(k, w, ldw, nr, x, ldx, t0, nt, n_act, y, ldy);
}

static void gemm_iq4_nl(int k, const void *w, size_t ldw, int nr, const void *x, size_t ldx, int t0, int nt,
                        int n_act, float *y, size_t ldy) {
    el_gemm_fn f = nt == 1 ? el_cpu_kernels_quants_avx2[EL_TYPE_IQ4_NL].gemm : gemm_iq4_nl_vnni;
    f(k, w, ldw, nr, x, ldx, t0, nt, n_act, y, ldy);
}
QX_GEMM(gemm_q8_0, lanes_t, QX_Q8_0)
QX_GEMM(gemm_q5_0, lanes_t, QX_Q5_0)
QX_GEMM(gemm_q4_1, lanes_t, QX_Q4_1)
QX_GEMM(gemm_q5_1, lanes_t, QX_Q5_1)
QX_GEMM(gemm_mxfp4, mxfp4, QX_MXFP4)

const el_cpu_type_kernels el_cpu_kernels_quants_avx512[EL_TYPE_COUNT] = {
    [EL_TYPE_Q4_0] = {EL_TYPE_Q8_0, qx_vec_dot_q4_0, qx_quantize_q8_0, NULL, gemm_q4_0},
    [EL_TYPE_Q4_1] = {EL_TYPE_Q8_1, qx_vec_dot_q4_1, qx_quantize_q8_1, NULL, gemm_q4_1},
    [EL_TYPE_Q5_0] = {EL_TYPE_Q8_0, qx_vec_dot_q5_0, qx_quantize_q8_0, NULL, gemm_q5_0},
    [EL_TYPE_Q5_1] = {EL_TYPE_Q8_1, qx_vec_dot_q5_1, qx_quantize_q8_1, NULL, gemm_q5_1},
    [EL_TYPE_Q8_0] = {EL_TYPE_Q8_0, qx_vec_dot_q8_0, qx_quantize_q8_0, NULL, gemm_q8_0},
    [EL_TYPE_IQ4_NL] = {EL_TYPE_Q8_0, qx_vec_dot_iq4_nl, qx_quantize_q8_0, NULL, gemm_iq4_nl},
    [EL_TYPE_MXFP4] = {EL_TYPE_Q8_0, qx_vec_dot_mxfp4, qx_quantize_q8_0, NULL, gemm_mxfp4},
};

/* Block order (kernels.h, EL_ORDER_BLOCK): quants_block_x86.h. */
QX_GEMM(gemm_q8_0_blk, blk, QX_Q8_0)
QX_GEMM(gemm_q5_0_blk, blk, QX_Q5_0)

const el_cpu_type_kernels el_cpu_kernels_quants_block_avx512[EL_TYPE_COUNT] = {
    [EL_TYPE_Q5_0] = {EL_TYPE_Q8_0, qx_vec_dot_q5_0_blk, qx_quantize_q8_0, NULL, gemm_q5_0_blk},
    [EL_TYPE_Q8_0] = {EL_TYPE_Q8_0, qx_vec_dot_q8_0_blk, qx_quantize_q8_0, NULL, gemm_q8_0_blk},
};

/*
 * Rows interleaved by 16 (layout.h: EL_LAYOUT_Q8_0_R16, EL_LAYOUT_Q4_0_R16):
 * qx_sum_tile's arithmetic straight from the packed groups, no transposition.
 * Per block, 16 rows and activation row: 8 vpdpbusd (the activation dwords
 * broadcast from memory) into one int32 chain started at -off * sum(a) (Q8_0
 * stored as q + 128: off 128; Q4_0 nibbles: off 8, the 4 registers of a
 * block split into low and high nibbles once for every activation row), one
 * conversion, one product d_w * d_a and one fma: the block order's
 * operations per output, the flat kernels' bits (test_layout). The
 * activation sums and scales are formed once per tile of R16_TT rows and
 * chunk of R16_KC blocks for up to R16_ACC / (16 * tile) weight rows: for
 * decode (one tile) the driver hands a thread its whole share of rows, and
 * the stream is prefetched R16_AHEAD bytes on into L2.
 */
#include "backend/cpu/layout.h"

#define R16_KC 64
#define R16_TT 8
#define R16_ACC 4096 /* floats: groups x activation rows x 16 */
#ifndef R16_AHEAD
#define R16_AHEAD 16384
#endif

QX_INLINE void r16_tile(int q4, int TT, const uint8_t *q, const el_fp16 *d, int c0, int kc, const uint8_t *x,
                        size_t ldx, const int32_t *corr, const float *da, float *acc_io, int first, int pf) {
    const size_t qb = q4 ? 256 : 512, bb = qb + 32;
    __m512 acc[R16_TT];
    for (int t = 0; t < TT; ++t) acc[t] = first ? _mm512_setzero_ps() : _mm512_load_ps(acc_io + 16 * t);
    for (int b = 0; b < kc; ++b) {
        const __m512i *wq = (const __m512i *)(q + qb * (size_t)(c0 + b));
        if (pf) { /* decode: the stream R16_AHEAD bytes on into L2, a block's bytes a step */
            const char *p = (const char *)q + bb * (size_t)(c0 + b) + R16_AHEAD;
            for (size_t i = 0; i < (bb + 63) / 64; ++i) _mm_prefetch(p + 64 * i, _MM_HINT_T1);
        }
        const uint8_t *xb = x + sizeof(block_q8_0) * (size_t)(c0 + b) + 2;
        __m512i W[8]; /* a group is nb * (qb + 32) bytes: not always 64-aligned, so unaligned loads */
        if (q4) {
            const __m512i m4 = _mm512_set1_epi8(0x0F);
            for (int c = 0; c < 4; ++c) {
                const __m512i v = _mm512_loadu_si512(wq + c);
                W[c] = _mm512_and_si512(v, m4);
                W[c + 4] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
            }
        } else {
            for (int c = 0; c < 8; ++c) W[c] = _mm512_loadu_si512(wq + c);
        }
        __m512i s[R16_TT];
        for (int t = 0; t < TT; ++t) s[t] = _mm512_set1_epi32(corr[t * R16_KC + b]);
        for (int j = 0; j < 8; ++j)
            for (int t = 0; t < TT; ++t) s[t] = qx_dpbusd_bcast(s[t], W[j], xb + ldx * (size_t)t + 4 * j);
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(d + 16 * (size_t)(c0 + b))));
        for (int t = 0; t < TT; ++t)
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[t]), _mm512_mul_ps(dw, _mm512_set1_ps(da[t * R16_KC + b])),
                                     acc[t]);
    }
    for (int t = 0; t < TT; ++t) _mm512_store_ps(acc_io + 16 * t, acc[t]);
}

QX_INLINE void r16_gemm(int q4, int k, const void *w, int nr, const void *x, size_t ldx, int nt, float *y,
                        size_t ldy) {
    const int nb = k / 32, ng = nr / 16;
    const size_t qb = q4 ? 256 : 512, gb = (size_t)nb * (qb + 32);
    const int32_t off = q4 ? 8 : 128;
    _Alignas(64) float acc[R16_ACC];
    int32_t corr[R16_TT * R16_KC];
    float da[R16_TT * R16_KC];
    const int pf = nt <= 4;
    for (int t0 = 0; t0 < nt; t0 += R16_TT) {
        const int T = nt - t0 < R16_TT ? nt - t0 : R16_TT;
        const uint8_t *xt = (const uint8_t *)x + ldx * (size_t)t0;
        const int gp = R16_ACC / (16 * T);
        for (int g0 = 0; g0 < ng; g0 += gp) {
            const int G = ng - g0 < gp ? ng - g0 : gp;
            for (int c0 = 0; c0 < nb; c0 += R16_KC) {
                const int kc = nb - c0 < R16_KC ? nb - c0 : R16_KC;
                qx_act_chunk(xt, ldx, T, c0, kc, off, R16_KC, corr, da);
                for (int g = 0; g < G; ++g) {
                    const uint8_t *q = (const uint8_t *)w + gb * (size_t)(g0 + g);
                    const el_fp16 *d = (const el_fp16 *)(q + qb * (size_t)nb);
                    float *ag = acc + 16 * T * g;
                    switch (T) { /* each T a constant, so the tile's loops unroll */
                    case 1: r16_tile(q4, 1, q, d, c0, kc, xt, ldx, corr, da, ag, c0 == 0, pf); break;
                    case 2: r16_tile(q4, 2, q, d, c0, kc, xt, ldx, corr, da, ag, c0 == 0, pf); break;
                    case 3: r16_tile(q4, 3, q, d, c0, kc, xt, ldx, corr, da, ag, c0 == 0, pf); break;
                    case 4: r16_tile(q4, 4, q, d, c0, kc, xt, ldx, corr, da, ag, c0 == 0, pf); break;
                    case 8: r16_tile(q4, 8, q, d, c0, kc, xt, ldx, corr, da, ag, c0 == 0, pf); break;
                    default: r16_tile(q4, T, q, d, c0, kc, xt, ldx, corr, da, ag, c0 == 0, pf); break;
                    }
                }
            }
            for (int g = 0; g < G; ++g)
                for (int t = 0; t < T; ++t)
                    memcpy(y + ldy * (size_t)(t0 + t) + 16 * (size_t)(g0 + g), acc + 16 * T * g + 16 * t,
                           16 * sizeof(float));
        }
    }
}

void el_layout_gemm_q8_0_r16_avx512(int k, const void *w, int nr, const void *x, size_t ldx, int nt, float *y,
                                    size_t ldy, int x4) {
    (void)x4;
    r16_gemm(0, k, w, nr, x, ldx, nt, y, ldy);
}

void el_layout_gemm_q4_0_r16_avx512(int k, const void *w, int nr, const void *x, size_t ldx, int nt, float *y,
                                    size_t ldy, int x4) {
    (void)x4;
    r16_gemm(1, k, w, nr, x, ldx, nt, y, ldy);
}
#endif
