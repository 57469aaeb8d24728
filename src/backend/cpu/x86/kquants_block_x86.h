/*
 * kquants_block_x86.h — the x86 K-quant kernels in block order (kernels.h,
 * EL_ORDER_BLOCK): Q6_K. Included by kquants_avx2.c and kquants_avx512.c
 * after kquants_x86.h (its unpack, lanes, gemm macro and helpers), with
 * KQ_BLOCK_TABLE naming the table this file defines.
 *
 * The arithmetic is el_vec_dot_q6_k_q8_k_blk's (kernels_kquants.c): per
 * output and super-block the exact integer sum over the 16 groups (scale
 * times the group's dot, the -32 offset through the activation's bsums),
 * then one fma, block after block. Integer sums are exact in any
 * instruction order, and the float product d_w * d_a, the conversion and the
 * fma are the portable ones, so every kernel here gives the portable bits:
 *  - vec_dot, decode and batches of up to 4 activation rows: the vec_dot
 *    order's unpack and integer lanes (q6k_unpack, q6k_lanes) summed to one
 *    integer (q6k_block_b), through kquants_x86.h's gemm and decode macros;
 *  - prefill on the AVX-512 table (kq_gemm16_q6_k_blk, more than 4
 *    activation rows): 16 weight rows in the lanes of 512-bit registers, as
 *    kq_gemm16_q4_k: one vpdpbusd with a broadcast activation word feeds 16
 *    outputs, a vpmulld per group applies the 16 rows' scales, and the offset
 *    is a vpmaddwd of the rows' scale pairs with the bsums pairs. The vec_dot
 *    order needs two multiply instructions per 64 products and per output;
 *    this one needs about one and a quarter per 64 and per 16 outputs.
 */
#ifndef EL_BACKEND_CPU_X86_KQUANTS_BLOCK_X86_H
#define EL_BACKEND_CPU_X86_KQUANTS_BLOCK_X86_H

#include "backend/cpu/x86/kquants_x86.h"

/* One block in block order: the 8 lanes' integer sum, one fma into st->s. */
KQ_INLINE void q6k_block_b(const q6k_unpacked *u, const block_q8_K *y, kq_state *st) {
    st->s = fmaf((float)kq_hsum_i32(q6k_lanes(u, y)), u->d * y->d, st->s);
}

KQ_DEC_Q6K(kq_dec_q6_k_blk, q6k_block_b, 1)
KQ_X86_ORDER(q6_k_blk, block_q6_K, q6k_unpacked, q6k_unpack, q6k_block_b, 1, kq_dec_q6_k_blk)

#if KQ_VNNI
/* 16 weight rows of one super-block in row lanes. */
typedef struct {
    __m512i w[64];  /* w[m] lane r: word m of row r (quants 4m..4m+3, unsigned 0..63) */
    __m512i sc[16]; /* group g's scale of row r (int32) */
    __m512i scp[8]; /* int16 pair (scale 2j, scale 2j + 1) of row r */
    __m512 d;       /* row r's d */
} q6k_pack16;

KQ_INLINE void q6k_pack16_build(const block_q6_K *const rows[16], q6k_pack16 *pk, __m256i tmp[64]) {
    alignas(64) int32_t scb[16][16], scpb[8][16];
    alignas(64) float db[16];
    for (int h = 0; h < 2; ++h) {
        q6k_unpacked u[8];
        for (int r = 0; r < 8; ++r) q6k_unpack(rows[8 * h + r], &u[r]);
        for (int c = 0; c < 8; ++c) {
            /* chunk c (words 8c..8c+7) of each row; q[p] holds chunks 2p | 2p + 1 */
            __m256i a[8];
            for (int r = 0; r < 8; ++r)
                a[r] = c & 1 ? _mm512_extracti64x4_epi64(u[r].q[c / 2], 1) : _mm512_castsi512_si256(u[r].q[c / 2]);
            if (h == 0) {
                kq_transpose8(a, tmp + 8 * c);
            } else {
                __m256i t[8];
                kq_transpose8(a, t);
                for (int i = 0; i < 8; ++i)
                    pk->w[8 * c + i] = _mm512_inserti64x4(_mm512_castsi256_si512(tmp[8 * c + i]), t[i], 1);
            }
        }
    }
    for (int r = 0; r < 16; ++r) {
        const int8_t *s8 = rows[r]->scales;
        for (int g = 0; g < 16; ++g) scb[g][r] = s8[g];
        for (int j = 0; j < 8; ++j) scpb[j][r] = (int32_t)((uint32_t)(uint16_t)s8[2 * j] | ((uint32_t)(uint16_t)s8[2 * j + 1] << 16));
        db[r] = kq_f16(rows[r]->d);
    }
    for (int g = 0; g < 16; ++g) pk->sc[g] = _mm512_load_si512(scb[g]);
    for (int j = 0; j < 8; ++j) pk->scp[j] = _mm512_load_si512(scpb[j]);
    pk->d = _mm512_load_ps(db);
}

/* na (1..4) activation rows against a packed block: acc (16 row lanes each)
 * takes one fma per super-block (one order: x4 and accm, which stays 0, are
 * KQ_GEMM16_BODY's). Two groups' dot chains per activation row are in
 * flight. */
KQ_INLINE void q6k_acts16(const q6k_pack16 *pk, const block_q8_K *const *yb, const int *x4, __m512 *acc,
                          __m512 *accm, const int na) {
    (void)x4, (void)accm;
    __m512i tot[4], off[4];
    for (int a = 0; a < na; ++a) {
        tot[a] = off[a] = _mm512_setzero_si512();
        for (int j = 0; j < 8; ++j)
            off[a] = _mm512_add_epi32(off[a], _mm512_madd_epi16(pk->scp[j], _mm512_set1_epi32(kq_load_i32(yb[a]->bsums + 2 * j))));
    }
    for (int c = 0; c < 8; ++c) {
        const int g0 = 2 * c, g1 = 2 * c + 1;
        __m512i p0[4], p1[4];
        for (int a = 0; a < na; ++a) p0[a] = p1[a] = _mm512_setzero_si512();
        for (int k = 0; k < 4; ++k) {
            const __m512i w0 = pk->w[4 * g0 + k], w1 = pk->w[4 * g1 + k];
            for (int a = 0; a < na; ++a) {
                p0[a] = _mm512_dpbusd_epi32(p0[a], w0, _mm512_set1_epi32(kq_load_i32(yb[a]->qs + 16 * g0 + 4 * k)));
                p1[a] = _mm512_dpbusd_epi32(p1[a], w1, _mm512_set1_epi32(kq_load_i32(yb[a]->qs + 16 * g1 + 4 * k)));
            }
        }
        for (int a = 0; a < na; ++a)
            tot[a] = _mm512_add_epi32(tot[a], _mm512_add_epi32(_mm512_mullo_epi32(p0[a], pk->sc[g0]),
                                                               _mm512_mullo_epi32(p1[a], pk->sc[g1])));
    }
    for (int a = 0; a < na; ++a) {
        const __m512i isum = _mm512_sub_epi32(tot[a], _mm512_slli_epi32(off[a], 5));
        acc[a] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(pk->d, _mm512_set1_ps(yb[a]->d)), acc[a]);
    }
}

typedef __m256i q6k_pack16_tmp[64];
KQ_GEMM16_BODY(q6_k_blk, block_q6_K, q6k_pack16, q6k_pack16_tmp, q6k_pack16_build, q6k_acts16)

/* The Q6_K block-order gemm of the AVX-512 table: up to 4 activation rows
 * (decode, batched decode) through kq_gemm_q6_k_blk, more in 16-row groups. */
static void kq_gemm16_q6_k_blk(int k, const void *w, size_t ldw, int nr, const void *x, size_t ldx, int t0, int nt,
                               int n_act, float *y, size_t ldy) {
    if (nt <= 4) {
        kq_gemm_q6_k_blk(k, w, ldw, nr, x, ldx, t0, nt, n_act, y, ldy);
        return;
    }
    kq_gemm16_body_q6_k_blk(k, w, ldw, nr, x, ldx, t0, nt, n_act, y, ldy);
}
#define KQ_GEMM_Q6_K_BLK kq_gemm16_q6_k_blk
#else
#define KQ_GEMM_Q6_K_BLK kq_gemm_q6_k_blk
#endif

const el_cpu_type_kernels KQ_BLOCK_TABLE[EL_TYPE_COUNT] = {
    [EL_TYPE_Q6_K] = {EL_TYPE_Q8_K, kq_vec_dot_q6_k_blk, kq_quantize_q8_k, NULL, KQ_GEMM_Q6_K_BLK},
};

#if KQ_VNNI
/* The token blocks of this file's 16-row gemms (Q4_K's in either order, Q6_K's in block order; Q6_K's
 * vec_dot-order gemm walks 16-row x 16-token tiles and takes any block as well). */
const int el_cpu_gemm_toks_kquants_avx512[EL_TYPE_COUNT] = {[EL_TYPE_Q4_K] = KQ_TT16, [EL_TYPE_Q6_K] = KQ_TT16};
#endif

#endif
