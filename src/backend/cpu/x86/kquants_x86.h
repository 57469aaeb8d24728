/*
 * kquants_x86.h — the body of the x86 K-quant kernels, shared by
 * kquants_avx2.c (AVX2 + FMA + F16C) and kquants_avx512.c (the same 256-bit
 * code with AVX-512 VNNI dot products). The including file defines KQ_VNNI
 * (0 or 1) and KQ_TABLE (the table's name) and is compiled with its ISA flags.
 *
 * Every kernel gives the bits of its portable counterpart in
 * kernels_kquants.c (read the comments there): integer partial sums are exact
 * whatever the instruction order (u8 x s8 pair sums stay far below the int16
 * limit: weights are at most 63, activations at most 127 in magnitude), and
 * the float operations are the portable ones lane for lane — the same
 * fma / mul / add sequence per output, the same horizontal-sum order.
 *
 * Two layouts are used for the batched product (gemm):
 *  - Q4_K (one float lane per output in llama.cpp's repacked order): 8 weight
 *    rows are transposed into "row lanes" (lane r of a vector holds 4
 *    consecutive quants of row r), so one dot-product instruction with a
 *    broadcast activation word feeds 8 outputs; per-row scales and the float
 *    fma then work on 8 outputs at once, and no horizontal sum is needed. The
 *    transposed block is built once and used for every activation row. The
 *    AVX-512 table puts two such 8-row halves side by side in 512-bit
 *    registers (16 outputs per instruction, kq_gemm16_q4_k).
 *  - Q6_K (8 float lanes per output, x86 vec_dot order): a weight row's block
 *    is unpacked once into registers and multiplied with each activation row;
 *    lane l of the accumulator is exactly the portable lane l. The AVX-512
 *    table holds two 32-element chunks per 512-bit register and adds the
 *    halves' lanes (exact integers) before the float fma.
 * Decode (1..3 activation rows) of Q4_K on the AVX-512 table (kq_dec_q4_k):
 * one activation row takes 8 weight rows at a time (kq_q4k_dec_rows8: the
 * activation rearranged once per call, 4 rows' scales unpacked together, one
 * reduction tree for the 8 rows, the next 8 rows prefetched), 2..3 rows (and
 * the last nr % 8 weight rows) one weight row at a time (kq_q4k_dec_rows);
 * both give the per-super-block reduction of kq_vec_dot_q4_k.
 */
#ifndef EL_BACKEND_CPU_X86_KQUANTS_X86_H
#define EL_BACKEND_CPU_X86_KQUANTS_X86_H

#include <immintrin.h>
#include <math.h>
#include <stdalign.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "backend/cpu/kernel_common.h"
#include "backend/cpu/kernel_types.h"
#include "package/quants.h"
#include "package/quants_blocks.h"
#include "util/fp16.h"

/* No FMA contraction of plain float expressions (explicit fma only), as in
 * kernels_kquants.c: clang honours the pragma, GCC does not contract in ISO C. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#define KQ_INLINE static inline __attribute__((always_inline))

/* acc + (u8 x s8 products summed in groups of 4), per int32 lane. */
#if KQ_VNNI
#define KQ_DPBUSD(acc, u, s) _mm256_dpbusd_epi32((acc), (u), (s))
#define KQ_DPWSSD(acc, a, b) _mm256_dpwssd_epi32((acc), (a), (b))
#else
#define KQ_DPBUSD(acc, u, s) \
    _mm256_add_epi32((acc), _mm256_madd_epi16(_mm256_maddubs_epi16((u), (s)), _mm256_set1_epi16(1)))
#define KQ_DPWSSD(acc, a, b) _mm256_add_epi32((acc), _mm256_madd_epi16((a), (b)))
#endif

static inline int32_t kq_load_i32(const void *p) {
    int32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline int32_t kq_hsum_i32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
    return _mm_cvtsi128_si32(s);
}

/* The x86 float horizontal sum: ((l4+l0)+(l6+l2)) + ((l5+l1)+(l7+l3)). */
static inline float kq_hsum_f32(__m256 v) {
    __m128 r = _mm_add_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
    r = _mm_add_ps(r, _mm_movehl_ps(r, r));
    r = _mm_add_ss(r, _mm_movehdup_ps(r));
    return _mm_cvtss_f32(r);
}

static inline float kq_f16(el_fp16 h) { return _cvtsh_ss(h); }

/* Two consecutive fp16 (d, dmin) as floats in lanes 0 and 1 (lanes 2, 3: 0). */
static inline __m128 kq_f16x2(const void *p) {
    return _mm_cvtph_ps(_mm_cvtsi32_si128(kq_load_i32(p)));
}

/* 8x8 transpose of 32-bit elements: out[k] lane r = a[r] lane k. */
KQ_INLINE void kq_transpose8(const __m256i a[8], __m256i *out) {
    const __m256i t0 = _mm256_unpacklo_epi32(a[0], a[1]), t1 = _mm256_unpackhi_epi32(a[0], a[1]);
    const __m256i t2 = _mm256_unpacklo_epi32(a[2], a[3]), t3 = _mm256_unpackhi_epi32(a[2], a[3]);
    const __m256i t4 = _mm256_unpacklo_epi32(a[4], a[5]), t5 = _mm256_unpackhi_epi32(a[4], a[5]);
    const __m256i t6 = _mm256_unpacklo_epi32(a[6], a[7]), t7 = _mm256_unpackhi_epi32(a[6], a[7]);
    const __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
    const __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
    const __m256i u4 = _mm256_unpacklo_epi64(t4, t6), u5 = _mm256_unpackhi_epi64(t4, t6);
    const __m256i u6 = _mm256_unpacklo_epi64(t5, t7), u7 = _mm256_unpackhi_epi64(t5, t7);
    out[0] = _mm256_permute2x128_si256(u0, u4, 0x20);
    out[1] = _mm256_permute2x128_si256(u1, u5, 0x20);
    out[2] = _mm256_permute2x128_si256(u2, u6, 0x20);
    out[3] = _mm256_permute2x128_si256(u3, u7, 0x20);
    out[4] = _mm256_permute2x128_si256(u0, u4, 0x31);
    out[5] = _mm256_permute2x128_si256(u1, u5, 0x31);
    out[6] = _mm256_permute2x128_si256(u2, u6, 0x31);
    out[7] = _mm256_permute2x128_si256(u3, u7, 0x31);
}

/* Stores the first n (1..8) lanes of v. */
static inline void kq_store_n(float *dst, __m256 v, int n) {
    if (n == 8) {
        _mm256_storeu_ps(dst, v);
    } else {
        alignas(32) float tmp[8];
        _mm256_store_ps(tmp, v);
        memcpy(dst, tmp, sizeof(float) * (size_t)n);
    }
}

/* Chunk c's int16 scale vector from 16 int8 scales: sc[2c] x8 then sc[2c+1] x8. */
static inline __m256i kq_scale_pair(__m128i s8, int c) {
    const __m128i idx = _mm_set_epi64x((long long)(0x0101010101010101ull * (uint64_t)(2 * c + 1)),
                                       (long long)(0x0101010101010101ull * (uint64_t)(2 * c)));
    return _mm256_cvtepi8_epi16(_mm_shuffle_epi8(s8, idx));
}

/* kq_scale_pair for c = 0..7 (two sign extensions, then one shuffle each). */
static inline void kq_scale_pairs(__m128i s8, __m256i out[8]) {
    const __m256i lo = _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(s8));
    const __m256i hi = _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(_mm_unpackhi_epi64(s8, s8)));
    for (int c = 0; c < 8; ++c) {
        /* int16 (2c mod 8) in the low half, (2c + 1 mod 8) in the high half */
        const int e = (2 * c) & 7;
        const __m256i idx = _mm256_setr_epi8(
            2 * e, 2 * e + 1, 2 * e, 2 * e + 1, 2 * e, 2 * e + 1, 2 * e, 2 * e + 1, 2 * e, 2 * e + 1, 2 * e,
            2 * e + 1, 2 * e, 2 * e + 1, 2 * e, 2 * e + 1, 2 * e + 2, 2 * e + 3, 2 * e + 2, 2 * e + 3, 2 * e + 2,
            2 * e + 3, 2 * e + 2, 2 * e + 3, 2 * e + 2, 2 * e + 3, 2 * e + 2, 2 * e + 3, 2 * e + 2, 2 * e + 3,
            2 * e + 2, 2 * e + 3);
        out[c] = _mm256_shuffle_epi8(c < 4 ? lo : hi, idx);
    }
}

static inline __m256i kq_ld(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }

/* Largest number of activation rows a gemm keeps accumulators for at once. */
#define KQ_TT 64

/* ======================================================================== */
/* Q4_K                                                                     */
/* ======================================================================== */

/* The packed 6-bit scales and mins of a Q4_K/Q5_K block as bytes:
 * out bytes 0..7 = scales of sub-blocks 0..7, bytes 8..15 = mins. */
static inline void kq_k4_scales(const uint8_t *q, uint32_t out[4]) {
    uint32_t a0, a1, a2;
    memcpy(&a0, q, 4);
    memcpy(&a1, q + 4, 4);
    memcpy(&a2, q + 8, 4);
    out[0] = a0 & 0x3f3f3f3fu;
    out[1] = (a2 & 0x0f0f0f0fu) | ((a0 >> 2) & 0x30303030u);
    out[2] = a1 & 0x3f3f3f3fu;
    out[3] = ((a2 >> 4) & 0x0f0f0f0fu) | ((a1 >> 2) & 0x30303030u);
}

/* sum over 16 bsums of bsums[g] * m[g/2] as 8 int32 lanes (m: 8 bytes). */
static inline __m256i kq_mins_dot(const int16_t *bsums, uint64_t m8) {
    const __m128i m = _mm_cvtsi64_si128((long long)m8);
    const __m256i m16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m, m));
    return _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)bsums), m16);
}

/* The 8 sub-block scales (bytes) as int16, the 128-bit half repeated. */
static inline __m256i kq_scales16(const uint8_t *sc8) {
    uint64_t v;
    memcpy(&v, sc8, 8);
    return _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)v)));
}

/* Scale j (0..7) of kq_scales16 in every int16 lane. */
static inline __m256i kq_scale_j(__m256i s16, int j) {
    return _mm256_shuffle_epi8(s16, _mm256_set1_epi16((int16_t)(0x0100 * (2 * j + 1) + 2 * j)));
}

/* Integer sums of one 64-element chunk c of a Q4_K block: sc[2c] * dot(sub-block
 * 2c) + sc[2c+1] * dot(sub-block 2c+1), as 8 int32 lanes (s16: kq_scales16). */
KQ_INLINE __m256i q4k_chunk(const uint8_t *qs, const int8_t *y, int c, __m256i s16) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
    const __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
    const __m256i p0 = _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)(y + 64 * c)));
    const __m256i p1 = _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(y + 64 * c + 32)));
    __m256i s = KQ_DPWSSD(_mm256_setzero_si256(), p0, kq_scale_j(s16, 2 * c));
    return KQ_DPWSSD(s, p1, kq_scale_j(s16, 2 * c + 1));
}

/* el_vec_dot_q4_k_q8_k: one fma pair per super-block. */
static void kq_vec_dot_q4_k(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q4_K *restrict x = vx;
    const block_q8_K *restrict y = vy;
    const int nb = n / EL_QK_K;
    __m128 acc = _mm_setzero_ps();
    for (int i = 0; i < nb; ++i) {
        uint32_t sm[4];
        kq_k4_scales(x[i].scales, sm);
        const uint8_t *sc = (const uint8_t *)sm;
        uint64_t m8;
        memcpy(&m8, sc + 8, 8);
        const __m256i s16 = kq_scales16(sc);
        const __m256i is = _mm256_add_epi32(_mm256_add_epi32(q4k_chunk(x[i].qs, y[i].qs, 0, s16), q4k_chunk(x[i].qs, y[i].qs, 1, s16)),
                                            _mm256_add_epi32(q4k_chunk(x[i].qs, y[i].qs, 2, s16), q4k_chunk(x[i].qs, y[i].qs, 3, s16)));
        const __m256i mm = kq_mins_dot(y[i].bsums, m8);
        /* both horizontal sums at once */
        const __m128i a = _mm_add_epi32(_mm256_castsi256_si128(is), _mm256_extracti128_si256(is, 1));
        const __m128i b = _mm_add_epi32(_mm256_castsi256_si128(mm), _mm256_extracti128_si256(mm, 1));
        __m128i h = _mm_hadd_epi32(a, b);
        h = _mm_hadd_epi32(h, h); /* [isum, summ, isum, summ] */
        /* lane 0: acc = fma(isum, d * y.d, acc); lane 1: accm = fma(summ, dmin * y.d, accm) */
        const __m128 dd = _mm_mul_ps(kq_f16x2(&x[i].d), _mm_set1_ps(y[i].d));
        acc = _mm_fmadd_ps(_mm_cvtepi32_ps(h), dd, acc);
    }
    *s = _mm_cvtss_f32(_mm_sub_ss(acc, _mm_movehdup_ps(acc)));
}

/* el_vec_dot_q4_k_q8_k_x4: one fma pair per 64 elements. */
static void kq_vec_dot_q4_k_x4(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q4_K *restrict x = vx;
    const block_q8_K *restrict y = vy;
    const int nb = n / EL_QK_K;
    float acc = 0.0f, accm = 0.0f;
    for (int i = 0; i < nb; ++i) {
        uint32_t sm[4];
        kq_k4_scales(x[i].scales, sm);
        const uint8_t *sc = (const uint8_t *)sm, *m = sc + 8;
        const __m256i s16 = kq_scales16(sc);
        __m128i q[4];
        for (int c = 0; c < 4; ++c) {
            const __m256i v = q4k_chunk(x[i].qs, y[i].qs, c, s16);
            q[c] = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
        }
        alignas(16) int32_t isum[4];
        _mm_store_si128((__m128i *)isum, _mm_hadd_epi32(_mm_hadd_epi32(q[0], q[1]), _mm_hadd_epi32(q[2], q[3])));
        const float d = kq_f16(x[i].d) * y[i].d;
        const float dmin = kq_f16(x[i].dmin) * y[i].d;
        const int16_t *bs = y[i].bsums;
        for (int c = 0; c < 4; ++c) {
            const int32_t summ = m[2 * c] * (bs[4 * c] + bs[4 * c + 1]) + m[2 * c + 1] * (bs[4 * c + 2] + bs[4 * c + 3]);
            acc = fmaf((float)isum[c], d, acc);
            accm = fmaf((float)summ, dmin, accm);
        }
    }
    *s = acc - accm;
}

static el_vec_dot_fn kq_select_q4_k(int n_rows, int row, int k) {
    (void)k;
    return row < n_rows - n_rows % 4 ? kq_vec_dot_q4_k_x4 : NULL;
}

/* 8 weight rows of one super-block in row lanes. */
typedef struct {
    __m256i w[64];  /* w[8j + k] lane r: quants 4k..4k+3 of sub-block j of row r */
    __m256i sc[8];  /* sub-block j scale of row r: int32 (VNNI) or two int16 copies (AVX2) */
    __m256i mn[4];  /* chunk c, lane r: int16 pair (min of 2c, min of 2c+1) */
    __m256 d, dmin; /* lane r: the row's d, dmin */
} q4k_pack;

KQ_INLINE void q4k_pack8(const block_q4_K *const rows[8], q4k_pack *pk) {
    alignas(32) uint8_t scb[8][8]; /* [j][r] */
    alignas(32) int32_t mnv[4][8]; /* [c][r] */
    alignas(16) uint16_t dh[8], mh[8];
    for (int r = 0; r < 8; ++r) {
        uint32_t sm[4];
        kq_k4_scales(rows[r]->scales, sm);
        const uint8_t *b = (const uint8_t *)sm;
        for (int j = 0; j < 8; ++j) scb[j][r] = b[j];
        for (int c = 0; c < 4; ++c) mnv[c][r] = b[8 + 2 * c] | (b[9 + 2 * c] << 16);
        dh[r] = rows[r]->d;
        mh[r] = rows[r]->dmin;
    }
    for (int j = 0; j < 8; ++j) {
        const __m256i s32 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)scb[j]));
#if KQ_VNNI
        pk->sc[j] = s32;
#else
        pk->sc[j] = _mm256_or_si256(s32, _mm256_slli_epi32(s32, 16));
#endif
    }
    for (int c = 0; c < 4; ++c) pk->mn[c] = _mm256_load_si256((const __m256i *)mnv[c]);
    pk->d = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)dh));
    pk->dmin = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)mh));
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int c = 0; c < 4; ++c) {
        __m256i a[8];
        for (int r = 0; r < 8; ++r)
            a[r] = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(rows[r]->qs + 32 * c)), m4);
        kq_transpose8(a, pk->w + 8 * (2 * c));
        for (int r = 0; r < 8; ++r)
            a[r] = _mm256_and_si256(_mm256_srli_epi16(_mm256_loadu_si256((const __m256i *)(rows[r]->qs + 32 * c)), 4), m4);
        kq_transpose8(a, pk->w + 8 * (2 * c + 1));
    }
}

/* na (1..8) activation rows against a packed block: updates acc/accm (8 row
 * lanes each) in the x4 order (one fma pair per chunk) where x4[a], else in
 * the vec_dot order (one fma pair per block). The two sub-blocks of a chunk
 * are interleaved so that 2 * na dot-product chains are in flight. */
KQ_INLINE void q4k_acts(const q4k_pack *pk, const block_q8_K *const *yb, const int *x4, __m256 *acc,
                        __m256 *accm, const int na) {
    __m256i tot[8], totm[8];
    __m256 dv[8], dmv[8];
    alignas(16) int32_t bsp[8][4]; /* chunk c: int16 pair (bsums 4c + 4c+1, bsums 4c+2 + 4c+3) */
    for (int a = 0; a < na; ++a) {
        tot[a] = totm[a] = _mm256_setzero_si256();
        const __m256 yd = _mm256_set1_ps(yb[a]->d);
        dv[a] = _mm256_mul_ps(pk->d, yd);
        dmv[a] = _mm256_mul_ps(pk->dmin, yd);
        const int16_t *bs = yb[a]->bsums;
        _mm_store_si128((__m128i *)bsp[a], _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)bs),
                                                          _mm_loadu_si128((const __m128i *)(bs + 8))));
    }
    for (int c = 0; c < 4; ++c) {
        __m256i is[8];
        const int j0 = 2 * c, j1 = 2 * c + 1;
#if KQ_VNNI
        __m256i p0[8], p1[8];
        for (int a = 0; a < na; ++a) p0[a] = p1[a] = _mm256_setzero_si256();
        for (int k = 0; k < 8; ++k) {
            const __m256i w0 = pk->w[8 * j0 + k], w1 = pk->w[8 * j1 + k];
            for (int a = 0; a < na; ++a) {
                p0[a] = _mm256_dpbusd_epi32(p0[a], w0, _mm256_set1_epi32(kq_load_i32(yb[a]->qs + 32 * j0 + 4 * k)));
                p1[a] = _mm256_dpbusd_epi32(p1[a], w1, _mm256_set1_epi32(kq_load_i32(yb[a]->qs + 32 * j1 + 4 * k)));
            }
        }
        for (int a = 0; a < na; ++a)
            is[a] = _mm256_add_epi32(_mm256_mullo_epi32(p0[a], pk->sc[j0]), _mm256_mullo_epi32(p1[a], pk->sc[j1]));
#else
        for (int a = 0; a < na; ++a) is[a] = _mm256_setzero_si256();
        for (int k = 0; k < 8; ++k) {
            const __m256i w0 = pk->w[8 * j0 + k], w1 = pk->w[8 * j1 + k];
            for (int a = 0; a < na; ++a) {
                const __m256i y0 = _mm256_set1_epi32(kq_load_i32(yb[a]->qs + 32 * j0 + 4 * k));
                const __m256i y1 = _mm256_set1_epi32(kq_load_i32(yb[a]->qs + 32 * j1 + 4 * k));
                const __m256i s0 = _mm256_madd_epi16(_mm256_maddubs_epi16(w0, y0), pk->sc[j0]);
                const __m256i s1 = _mm256_madd_epi16(_mm256_maddubs_epi16(w1, y1), pk->sc[j1]);
                is[a] = _mm256_add_epi32(is[a], _mm256_add_epi32(s0, s1));
            }
        }
#endif
        for (int a = 0; a < na; ++a) {
            const __m256i mm = _mm256_madd_epi16(pk->mn[c], _mm256_set1_epi32(bsp[a][c]));
            if (x4[a]) {
                acc[a] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is[a]), dv[a], acc[a]);
                accm[a] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mm), dmv[a], accm[a]);
            } else {
                tot[a] = _mm256_add_epi32(tot[a], is[a]);
                totm[a] = _mm256_add_epi32(totm[a], mm);
            }
        }
    }
    for (int a = 0; a < na; ++a)
        if (!x4[a]) {
            acc[a] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(tot[a]), dv[a], acc[a]);
            accm[a] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(totm[a]), dmv[a], accm[a]);
        }
}

/* Per output with the row's kernel (few activation rows: a transposed block
 * would be used too few times to pay for itself). */
static void kq_gemm_per_output(el_vec_dot_fn vec, el_vec_dot_select_fn sel, int k, const void *w, size_t ldw,
                               int nr, const void *x, size_t ldx, int t0, int nt, int n_act, float *y, size_t ldy) {
    for (int a = 0; a < nt; ++a) {
        el_vec_dot_fn f = sel ? sel(n_act, t0 + a, k) : NULL;
        if (!f) f = vec;
        for (int r = 0; r < nr; ++r)
            f(k, y + (size_t)a * ldy + r, (const uint8_t *)w + ldw * (size_t)r, (const uint8_t *)x + ldx * (size_t)a);
    }
}

/*
 * Software prefetch for streamed weight rows: the lines KQ_PF_DIST bytes
 * past the block being read (rows are contiguous, so this runs ahead into
 * the rows that follow). The hardware prefetcher alone kept one core's
 * stream of a K-quant matrix well under the bandwidth (bench/kq-decode.c).
 */
#ifndef KQ_PF_DIST
#define KQ_PF_DIST 4096
#endif
KQ_INLINE void kq_dec_prefetch(const void *p, size_t bytes) {
#if KQ_PF_DIST > 0
    for (size_t o = 0; o < bytes; o += 64) _mm_prefetch((const char *)p + KQ_PF_DIST + o, _MM_HINT_T0);
#else
    (void)p, (void)bytes;
#endif
}

/* The tiled gemm's stream (5..KQ_XO_TA activation rows): block i of a row
 * of the next tile (`ahead` bytes on) into L2 while the current tile meets
 * it; the tile's 16 rows are 16 streams the hardware prefetchers do not
 * follow. Qwen2.5-Coder 1.5B's 151,936 x 1,536 Q6_K output matrix, one
 * thread, 8 activation rows: 72.2 ms without, 38.1 ms with (into L1: 34.6,
 * but an in-cache 8,960-wide matrix then lost its activations from L1 and
 * slowed by 40 %). Not for prefill (more rows): the activations fill L2
 * there, and Qwen's pp512 fell 6 % with it. */
#ifndef KQ_TILE_HINT
#define KQ_TILE_HINT _MM_HINT_T1
#endif
KQ_INLINE void kq_tile_prefetch(const void *p, size_t ahead, size_t bytes) {
    for (size_t o = 0; o < bytes; o += 64) _mm_prefetch((const char *)p + ahead + o, KQ_TILE_HINT);
}

/* ======================================================================== */
/* Decode: 1..KQ_DEC_TT activation rows, 512-bit registers (AVX-512 table)  */
/* ======================================================================== */

/*
 * Q4_K: one weight row at a time, each super-block unpacked once into 512-bit
 * registers and met by every activation row of the call (a decode step, or a
 * batched step of up to KQ_DEC_TT streams). Register c holds sub-blocks 2c
 * and 2c + 1 side by side, the activation's own element order: the 32 qs
 * bytes of chunk c loaded into both halves (a load-port broadcast) and
 * shifted right by 0 | 4, so the activation quants are read straight from
 * the block_q8_K; the int16 scale vectors come from one vpermw each. Integer
 * sums are exact; the float operations per output are kq_vec_dot_q4_k's (one
 * fma pair per super-block), so the bits are the portable kernel's.
 */
#if KQ_VNNI
#define KQ_DEC_TT 4     /* activation rows one call takes */
#define KQ_DEC_NBMAX 64 /* super-blocks per row (k <= 16384) for the precomputed bsums pairs */
/* 32 bytes at p in both 256-bit halves (vbroadcasti64x4: a load, no ALU). */
KQ_INLINE __m512i kq_bcast256(const void *p) { return _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)p)); }

/* kq_k4_scales in a vector register: bytes 0..7 the scales, 8..15 the mins
 * (reads 16 bytes at q: the 12 scale bytes and 4 bytes of the block's qs). */
KQ_INLINE __m128i kq_k4_scales_v(const uint8_t *q) {
    const __m128i v = _mm_loadu_si128((const __m128i *)q); /* dwords a0 a1 a2 . */
    const __m128i s1 = _mm_srlv_epi32(_mm_shuffle_epi32(v, _MM_SHUFFLE(2, 1, 2, 0)), _mm_setr_epi32(0, 0, 0, 4));
    const __m128i s2 = _mm_srli_epi32(_mm_shuffle_epi32(v, _MM_SHUFFLE(1, 1, 0, 0)), 2);
    return _mm_or_si128(_mm_and_si128(s1, _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f)),
                        _mm_and_si128(s2, _mm_setr_epi32(0, 0x30303030, 0, 0x30303030)));
}

/* vpermw index: words 0..15 take word a, 16..31 word b (scale vectors). */
KQ_INLINE __m512i kq_idx_pair(int a, int b) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16((short)a)), _mm256_set1_epi16((short)b), 1);
}

/* Q4_K, TT activation rows in the vec_dot order (kq_vec_dot_q4_k's bits):
 * per super-block isum = sum_j sc_j * dot_j and summ = sum_j m_j * (bsums
 * 2j + 2j+1), acc = fma(isum, d * yd, acc), accm = fma(summ, dmin * yd, accm),
 * kept in lanes 0 and 2 of one register; the output is lane 0 - lane 2. */
KQ_INLINE void kq_q4k_dec_rows(const int TT, int nb, const uint8_t *w, size_t ldw, int nr,
                               const block_q8_K *const *xa, const __m128i *bs8, float *y, size_t ldy) {
    const __m512i m4 = _mm512_set1_epi8(0x0F), sh = _mm512_setr_epi64(0, 0, 0, 0, 4, 4, 4, 4);
    const __m512i ix0 = kq_idx_pair(0, 1), ix1 = kq_idx_pair(2, 3), ix2 = kq_idx_pair(4, 5), ix3 = kq_idx_pair(6, 7);
    for (int r = 0; r < nr; ++r) {
        const block_q4_K *b = (const block_q4_K *)(w + ldw * (size_t)r);
        __m128 acc[KQ_DEC_TT];
        for (int t = 0; t < TT; ++t) acc[t] = _mm_setzero_ps();
        for (int i = 0; i < nb; ++i) {
            const block_q4_K *bb = b + i;
            kq_dec_prefetch(bb, sizeof *bb);
            const __m128i sm = kq_k4_scales_v(bb->scales);
            const __m256i s16 = _mm256_cvtepu8_epi16(sm); /* words 0..7 scales, 8..15 mins */
            const __m128i m16 = _mm256_extracti128_si256(s16, 1);
            const __m512i sz = _mm512_castsi256_si512(s16);
            /* chunk c: [sub-block 2c | sub-block 2c + 1] and its scales */
            const __m512i q0 = _mm512_and_si512(_mm512_srlv_epi64(kq_bcast256(bb->qs), sh), m4);
            const __m512i q1 = _mm512_and_si512(_mm512_srlv_epi64(kq_bcast256(bb->qs + 32), sh), m4);
            const __m512i q2 = _mm512_and_si512(_mm512_srlv_epi64(kq_bcast256(bb->qs + 64), sh), m4);
            const __m512i q3 = _mm512_and_si512(_mm512_srlv_epi64(kq_bcast256(bb->qs + 96), sh), m4);
            const __m512i S0 = _mm512_permutexvar_epi16(ix0, sz), S1 = _mm512_permutexvar_epi16(ix1, sz);
            const __m512i S2 = _mm512_permutexvar_epi16(ix2, sz), S3 = _mm512_permutexvar_epi16(ix3, sz);
            const __m128 dm = kq_f16x2(&bb->d); /* d, dmin, 0, 0 */
            const __m128 dd2 = _mm_unpacklo_ps(dm, dm);
            for (int t = 0; t < TT; ++t) {
                const int8_t *yq = xa[t][i].qs;
                const __m512i z = _mm512_setzero_si512();
                __m512i s0 = _mm512_dpwssd_epi32(z, _mm512_maddubs_epi16(q0, _mm512_loadu_si512(yq)), S0);
                __m512i s1 = _mm512_dpwssd_epi32(z, _mm512_maddubs_epi16(q2, _mm512_loadu_si512(yq + 128)), S2);
                s0 = _mm512_dpwssd_epi32(s0, _mm512_maddubs_epi16(q1, _mm512_loadu_si512(yq + 64)), S1);
                s1 = _mm512_dpwssd_epi32(s1, _mm512_maddubs_epi16(q3, _mm512_loadu_si512(yq + 192)), S3);
                const __m512i T = _mm512_add_epi32(s0, s1);
                const __m256i t8 = _mm256_add_epi32(_mm512_castsi512_si256(T), _mm512_extracti64x4_epi64(T, 1));
                const __m128i t4 = _mm_add_epi32(_mm256_castsi256_si128(t8), _mm256_extracti128_si256(t8, 1));
                const __m128i mm = _mm_madd_epi16(m16, bs8[KQ_DEC_NBMAX * t + i]);
                __m128i h = _mm_add_epi32(_mm_unpacklo_epi64(t4, mm), _mm_unpackhi_epi64(t4, mm));
                h = _mm_add_epi32(h, _mm_shuffle_epi32(h, _MM_SHUFFLE(2, 3, 0, 1))); /* isum, isum, summ, summ */
                acc[t] = _mm_fmadd_ps(_mm_cvtepi32_ps(h), _mm_mul_ps(dd2, _mm_set1_ps(xa[t][i].d)), acc[t]);
            }
        }
        for (int t = 0; t < TT; ++t)
            y[ldy * (size_t)t + r] = _mm_cvtss_f32(_mm_sub_ss(acc[t], _mm_movehl_ps(acc[t], acc[t])));
    }
}

/*
 * Q4_K, one activation row, 8 weight rows (kq_q4k_dec_rows8). Per
 * super-block and row: two 64-byte loads of qs (chunks 0-1, 2-3) whose low
 * and high nibbles give four registers, sub-blocks (0 | 2), (1 | 3), (4 | 6),
 * (5 | 7); the activation is rearranged once per call into the same order
 * (kq_q4k_dec_yarr), so each register meets one plain 64-byte load of it
 * in a vpdpbusd, and pairs of those meet the scales in one vpdpwssd
 * (kq_q4k_dec_row). The
 * scales and mins of 4 rows are unpacked together (one 128-bit lane a row,
 * the 16 bytes at the block start: d, dmin and the 12 packed bytes) and
 * widened to int16 once; each row's scale vectors are 2 vpermw from that
 * table, the 4 rows' mins meet the bsums pairs in one
 * vpmaddwd. The 8 rows' int32 partials are reduced by one unpack/add tree
 * into row order, and the float fma pair per super-block is done for the
 * 8 rows at once: per output the operations of kq_vec_dot_q4_k (the same
 * bits), a third of the old kernel's instructions.
 *
 * The stream: while a group of 8 rows is read, a later group's bytes
 * (contiguous rows, KQ_PF_AHEAD bytes on, rounded up to whole groups) are
 * prefetched, its i-th 1152 bytes
 * (18 lines, one pointer) at super-block step i — into L1 when a group is
 * at most KQ_PF_L1_MAX bytes, else into L2 (as the Q4_0 decode kernel,
 * quants_x86.h); rows with gaps between them (ldw larger than the row): block
 * i of each next row into L2.
 */
/* Into L1 only for groups of at most KQ_PF_L1_MAX bytes: 0, i.e. always L2.
 * The L1 form (once the default for groups <= 8 KB) streamed k = 1024 and
 * k = 1536 rows (Qwen2.5 1.5B's attention and ffn_gate/up) at 0.5-0.7x the
 * L2 form from memory (bench/kq-decode.c; docs/PERFORMANCE.md, round
 * three: Qwen2.5-Coder 1.5B decode on Zen 4): an L1 prefetch that misses
 * holds one of the core's few L1 miss buffers for the whole memory latency,
 * where L2 has more. */
#ifndef KQ_PF_L1_MAX
#define KQ_PF_L1_MAX 0
#endif

/* The activation of one row in the order of kq_q4k_dec_rows8's registers:
 * ya[4i + 0] = qs[0..31] | qs[64..95], [4i + 1] = qs[32..63] | qs[96..127],
 * [4i + 2] = qs[128..159] | qs[192..223], [4i + 3] = qs[160..191] | qs[224..255]. */
static void kq_q4k_dec_yarr(int nb, const block_q8_K *xa, __m512i *ya) {
    static const int lo[4] = {0, 32, 128, 160};
    for (int i = 0; i < nb; ++i)
        for (int c = 0; c < 4; ++c) {
            const int8_t *q = xa[i].qs + lo[c];
            ya[4 * i + c] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)q)),
                                               _mm256_loadu_si256((const __m256i *)(q + 64)), 1);
        }
}

/* Scales (low 256 bits, row r at words 8r..8r+7 after widening) and mins
 * (high 256 bits) of 4 rows from their first 16 block bytes v (lane r = row
 * r: dwords dm, a0, a1, a2): kq_k4_scales lane-wise, then the qwords sorted. */
KQ_INLINE __m512i kq_k4_scales4(__m512i v) {
    const __m512i s1 = _mm512_srlv_epi32(_mm512_shuffle_epi32(v, (_MM_PERM_ENUM)_MM_SHUFFLE(3, 2, 3, 1)),
                                         _mm512_set4_epi32(4, 0, 0, 0)); /* a0, a2, a1, a2 >> 4 */
    const __m512i s2 = _mm512_srli_epi32(_mm512_shuffle_epi32(v, (_MM_PERM_ENUM)_MM_SHUFFLE(2, 2, 1, 1)), 2);
    const __m512i k1 = _mm512_set4_epi32(0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f);
    const __m512i k2 = _mm512_set4_epi32(0x30303030, 0, 0x30303030, 0);
    /* (s1 & k1) | (s2 & k2): lane r bytes 0..7 scales, 8..15 mins */
    const __m512i b = _mm512_ternarylogic_epi32(_mm512_and_si512(s1, k1), s2, k2, 0xF8);
    return _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7), b);
}

/* The first 16 bytes of the blocks at p, p + ldw, p + 2 ldw, p + 3 ldw. */
KQ_INLINE __m512i kq_ld4x16(const uint8_t *p, size_t ldw) {
    __m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)p));
    v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(p + ldw)), 1);
    v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(p + 2 * ldw)), 2);
    return _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(p + 3 * ldw)), 3);
}

/* One row's isum partials (16 int32 lanes) of one super-block. The nibbles
 * meet the activation in vpdpbusd (u8 x s8, 4 products a dword: |sum| <=
 * 4 * 15 * 128, so it fits int16); two such registers are packed to int16
 * (vpackssdw: per 128-bit lane 4 dwords of each) and meet the scales in one
 * vpdpwssd: 6 multiplies a row where vpmaddubsw + vpdpwssd per register
 * took 8, and 2 scale shuffles where it took 4. The lanes' total is the same
 * integer. sc: the int16 scales of 4 rows (row r at words 8r..8r+7); i01,
 * i23: this row's vpermw indexes (kq_q4k_idx). */
KQ_INLINE __m512i kq_q4k_dec_row(const uint8_t *qs, const __m512i *ya, __m512i sc, __m512i i01, __m512i i23) {
    const __m512i m4 = _mm512_set1_epi8(0x0F), z = _mm512_setzero_si512();
    const __m512i qa = _mm512_loadu_si512(qs), qb = _mm512_loadu_si512(qs + 64);
    /* sub-blocks (0 | 2), (1 | 3), (4 | 6), (5 | 7) */
    const __m512i d0 = _mm512_dpbusd_epi32(z, _mm512_and_si512(qa, m4), ya[0]);
    const __m512i d1 = _mm512_dpbusd_epi32(z, _mm512_and_si512(_mm512_srli_epi16(qa, 4), m4), ya[1]);
    const __m512i d2 = _mm512_dpbusd_epi32(z, _mm512_and_si512(qb, m4), ya[2]);
    const __m512i d3 = _mm512_dpbusd_epi32(z, _mm512_and_si512(_mm512_srli_epi16(qb, 4), m4), ya[3]);
    /* lanes 0-1: sub-blocks 0, 1 (then 4, 5); lanes 2-3: 2, 3 (then 6, 7) */
    const __m512i t = _mm512_dpwssd_epi32(z, _mm512_packs_epi32(d0, d1), _mm512_permutexvar_epi16(i01, sc));
    return _mm512_dpwssd_epi32(t, _mm512_packs_epi32(d2, d3), _mm512_permutexvar_epi16(i23, sc));
}

/* kq_q4k_dec_row's scale indexes for row r of 4: per 128-bit lane, words
 * 0-3 the scale of the first sub-block packed there, 4-7 the second's. */
KQ_INLINE __m512i kq_q4k_idx(int r, int base) {
    const int a = 8 * r + base;
    const __m128i lo = _mm_setr_epi16((short)a, (short)a, (short)a, (short)a, (short)(a + 1), (short)(a + 1),
                                      (short)(a + 1), (short)(a + 1));
    const __m128i hi = _mm_add_epi16(lo, _mm_set1_epi16(2));
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set_m128i(lo, lo)), _mm256_set_m128i(hi, hi), 1);
}

/* Sum of the 4 int32 of each 128-bit lane, in every dword of the lane. */
KQ_INLINE __m512i kq_lane_sum4(__m512i v) {
    v = _mm512_add_epi32(v, _mm512_shuffle_epi32(v, (_MM_PERM_ENUM)_MM_SHUFFLE(2, 3, 0, 1)));
    return _mm512_add_epi32(v, _mm512_shuffle_epi32(v, (_MM_PERM_ENUM)_MM_SHUFFLE(1, 0, 3, 2)));
}

/* The 3 cache lines from p (hint h: a constant). */
#define kq_pf3(p, h) (_mm_prefetch((p), (h)), _mm_prefetch((p) + 64, (h)), _mm_prefetch((p) + 128, (h)))
/* The 18 lines from p, straight-line code. */
#define kq_pf18(p, h)                                                                                           \
    (kq_pf3((p), (h)), kq_pf3((p) + 192, (h)), kq_pf3((p) + 384, (h)), kq_pf3((p) + 576, (h)),                 \
     kq_pf3((p) + 768, (h)), kq_pf3((p) + 960, (h)))

/* How kq_q4k_dec_rows8 prefetches the next group: contiguous rows (ldw =
 * nb blocks) into L1 or L2, or rows with gaps one by one into L2. */
enum { KQ_PF_L1, KQ_PF_L2, KQ_PF_ROWS, KQ_PF_NONE };

/* 8 weight rows at w (stride ldw), nb super-blocks, one activation row (ya:
 * kq_q4k_dec_yarr, bs8: bsums pairs, xa: its d); y[0..7]. next: the 8 rows
 * to prefetch (stride ldw), pf: how (a constant at each call). */
KQ_INLINE void kq_q4k_dec_rows8(int nb, const uint8_t *w, size_t ldw, const block_q8_K *xa, const __m512i *ya,
                                const __m128i *bs8, const uint8_t *next, const int pf, float *y) {
    const __m512i i01[4] = {kq_q4k_idx(0, 0), kq_q4k_idx(1, 0), kq_q4k_idx(2, 0), kq_q4k_idx(3, 0)};
    const __m512i i23[4] = {kq_q4k_idx(0, 4), kq_q4k_idx(1, 4), kq_q4k_idx(2, 4), kq_q4k_idx(3, 4)};
    const __m512i rowsel = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8, 12, 16, 20, 24, 28);
    const __m512i qlo = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13), qhi = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 0, 2, 4, 6, 8, 10, 12, 14);
    const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 1, 3, 5, 7, 9, 11, 13, 15);
    __m256 acc = _mm256_setzero_ps(), accm = _mm256_setzero_ps();
    for (int i = 0; i < nb; ++i) {
        const uint8_t *p = w + sizeof(block_q4_K) * (size_t)i;
        if (pf == KQ_PF_ROWS) { /* block i of the next group's 8 rows (3 lines each: consecutive blocks cover every line) */
            const char *nx = (const char *)next + sizeof(block_q4_K) * (size_t)i;
            for (int r = 0; r < 8; ++r) kq_pf3(nx + ldw * (size_t)r, _MM_HINT_T1);
        } else if (pf != KQ_PF_NONE) { /* contiguous rows: the group's i-th 1152 bytes, 18 lines from one pointer */
            const char *nx = (const char *)next + 8 * sizeof(block_q4_K) * (size_t)i;
            if (pf == KQ_PF_L1) kq_pf18(nx, _MM_HINT_T0);
            else kq_pf18(nx, _MM_HINT_T1);
        }
        const __m512i *yi = ya + 4 * i;
        const __m512i bsb = _mm512_broadcast_i32x4(bs8[i]);
        __m512i t[8], mg[2], v[2];
        for (int g = 0; g < 2; ++g) {
            const uint8_t *pg = p + ldw * (size_t)(4 * g);
            v[g] = kq_ld4x16(pg, ldw);
            const __m512i sm = kq_k4_scales4(v[g]);
            const __m512i sc = _mm512_cvtepu8_epi16(_mm512_castsi512_si256(sm)); /* row r: words 8r.. */
            mg[g] = _mm512_madd_epi16(_mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64(sm, 1)), bsb);
            const size_t qo = offsetof(block_q4_K, qs);
            for (int r = 0; r < 4; ++r) t[4 * g + r] = kq_q4k_dec_row(pg + ldw * (size_t)r + qo, yi, sc, i01[r], i23[r]);
        }
        /* isum: pairs of rows (even dwords row a, odd row b), then 4 rows a lane, then the lanes */
        __m512i a2[4];
        for (int q = 0; q < 4; ++q)
            a2[q] = _mm512_add_epi32(_mm512_unpacklo_epi32(t[2 * q], t[2 * q + 1]), _mm512_unpackhi_epi32(t[2 * q], t[2 * q + 1]));
        const __m512i b0 = _mm512_add_epi32(_mm512_unpacklo_epi64(a2[0], a2[1]), _mm512_unpackhi_epi64(a2[0], a2[1]));
        const __m512i b1 = _mm512_add_epi32(_mm512_unpacklo_epi64(a2[2], a2[3]), _mm512_unpackhi_epi64(a2[2], a2[3]));
        const __m512i c = _mm512_add_epi32(_mm512_permutex2var_epi64(b0, qlo, b1), _mm512_permutex2var_epi64(b0, qhi, b1));
        const __m256i isum = _mm256_add_epi32(_mm512_castsi512_si256(c), _mm512_extracti64x4_epi64(c, 1));
        /* summ: lane r of mg[g] is row 4g + r */
        const __m256i summ = _mm512_castsi512_si256(_mm512_permutex2var_epi32(kq_lane_sum4(mg[0]), rowsel, kq_lane_sum4(mg[1])));
        /* fp16 (d, dmin) of the 8 rows: dword 0 of each lane */
        const __m512 f = _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutex2var_epi32(v[0], rowsel, v[1])));
        const __m256 d8 = _mm512_castps512_ps256(_mm512_permutexvar_ps(even, f));
        const __m256 m8 = _mm512_castps512_ps256(_mm512_permutexvar_ps(odd, f));
        const __m256 yd = _mm256_set1_ps(xa[i].d);
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(d8, yd), acc);
        accm = _mm256_fmadd_ps(_mm256_cvtepi32_ps(summ), _mm256_mul_ps(m8, yd), accm);
    }
    _mm256_storeu_ps(y, _mm256_sub_ps(acc, accm));
}

/* How far ahead kq_q4k_dec_rows8 prefetches contiguous rows: at least
 * KQ_PF_AHEAD bytes, in whole 8-row groups (k = 1,536: 3 groups of 6.9 KB;
 * k >= 2,816: the next group). One group ahead (6.9 KB) left one thread's
 * stream of Qwen2.5 1.5B's k = 1,536 rows at 15-19 GB/s from memory; 2-3
 * groups ahead streamed them at 18-25 (bench/kq-decode.c, AMD EPYC Zen 4;
 * docs/PERFORMANCE.md, round three). */
#ifndef KQ_PF_AHEAD
#define KQ_PF_AHEAD 16384
#endif

#ifndef KQ_DEC_ROWS8
#define KQ_DEC_ROWS8 1
#endif

/* kq_q4k_dec_rows with its row count nt (1..KQ_DEC_TT) as a constant. */
static void kq_q4k_dec_rows_nt(int nt, int nb, const uint8_t *w, size_t ldw, int nr, const block_q8_K *const *xa,
                               const __m128i *bs8, float *y, size_t ldy) {
    switch (nt) {
    case 1: kq_q4k_dec_rows(1, nb, w, ldw, nr, xa, bs8, y, ldy); break;
    case 2: kq_q4k_dec_rows(2, nb, w, ldw, nr, xa, bs8, y, ldy); break;
    case 3: kq_q4k_dec_rows(3, nb, w, ldw, nr, xa, bs8, y, ldy); break;
    default: kq_q4k_dec_rows(4, nb, w, ldw, nr, xa, bs8, y, ldy); break;
    }
}

/* Q4_K with 1..KQ_DEC_TT activation rows, all in the vec_dot order; 0 if not taken. */
static int kq_dec_q4_k(int k, const void *w, size_t ldw, int nr, const void *x, size_t ldx, int nt, float *y,
                       size_t ldy) {
    const int nb = k / EL_QK_K;
    if (nt < 1 || nt > KQ_DEC_TT || nb > KQ_DEC_NBMAX) return 0;
    const block_q8_K *xa[KQ_DEC_TT];
    __m128i bs8[KQ_DEC_TT * KQ_DEC_NBMAX];
    for (int t = 0; t < nt; ++t) {
        xa[t] = (const block_q8_K *)((const uint8_t *)x + ldx * (size_t)t);
        for (int i = 0; i < nb; ++i)
            bs8[KQ_DEC_NBMAX * t + i] = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)xa[t][i].bsums),
                                                       _mm_loadu_si128((const __m128i *)(xa[t][i].bsums + 8)));
    }
    if (KQ_DEC_ROWS8 && nr >= 8) {
        /* each activation row through the one-row kernel (the solo bits by construction), group by group, so
         * rows 2..nt read the 8 weight rows from L1 */
        const int n8 = nr / 8 * 8;
        __m512i ya[KQ_DEC_TT][4 * KQ_DEC_NBMAX];
        for (int t = 0; t < nt; ++t) kq_q4k_dec_yarr(nb, xa[t], ya[t]);
        /* the next 8 rows (past the last group: the rows the next call reads) */
        const int pf = ldw != sizeof(block_q4_K) * (size_t)nb ? KQ_PF_ROWS : 8 * ldw <= KQ_PF_L1_MAX ? KQ_PF_L1 : KQ_PF_L2;
        const size_t ahead = 8 * ldw * ((KQ_PF_AHEAD + 8 * ldw - 1) / (8 * ldw));
        for (int r = 0; r < n8; r += 8) {
            const uint8_t *wr = (const uint8_t *)w + ldw * (size_t)r;
            if (pf == KQ_PF_L2) kq_q4k_dec_rows8(nb, wr, ldw, xa[0], ya[0], bs8, wr + ahead, KQ_PF_L2, y + r);
            else if (pf == KQ_PF_L1) kq_q4k_dec_rows8(nb, wr, ldw, xa[0], ya[0], bs8, wr + ahead, KQ_PF_L1, y + r);
            else kq_q4k_dec_rows8(nb, wr, ldw, xa[0], ya[0], bs8, wr + 8 * ldw, KQ_PF_ROWS, y + r);
            for (int t = 1; t < nt; ++t)
                kq_q4k_dec_rows8(nb, wr, ldw, xa[t], ya[t], bs8 + KQ_DEC_NBMAX * t, wr, KQ_PF_NONE, y + ldy * (size_t)t + r);
        }
        if (n8 < nr) kq_q4k_dec_rows_nt(nt, nb, (const uint8_t *)w + ldw * (size_t)n8, ldw, nr - n8, xa, bs8, y + n8, ldy);
        return 1;
    }
    kq_q4k_dec_rows_nt(nt, nb, w, ldw, nr, xa, bs8, y, ldy);
    return 1;
}

#else
#define kq_dec_q4_k kq_dec_none
#endif

/* No decode kernel: the gemm's own path. */
static inline int kq_dec_none(int k, const void *w, size_t ldw, int nr, const void *x, size_t ldx, int nt, float *y,
                              size_t ldy) {
    (void)k, (void)w, (void)ldw, (void)nr, (void)x, (void)ldx, (void)nt, (void)y, (void)ldy;
    return 0;
}

/* gemm over 8-row groups of packed blocks (PT, built by PACK), activation
 * rows 4 (or 1) at a time through ACTS; the x4 order for activation rows
 * below n_act - n_act % 4, as the selector. */
#define KQ_ROW_LANES_GEMM(NAME, BT, PT, PACK, ACTS, DEC)                                                    \
    /* decode: every activation row in the vec_dot order (the selector says so) through DEC; 1 if taken */  \
    static inline int kq_try_dec_##NAME(int k, const void *w, size_t ldw, int nr, const void *x, size_t ldx, \
                                        int t0, int nt, int n_act, float *y, size_t ldy) {                  \
        int vec_order = 1;                                                                                  \
        for (int a = 0; a < nt && vec_order; ++a) vec_order = kq_select_##NAME(n_act, t0 + a, k) == NULL;   \
        return vec_order && DEC(k, w, ldw, nr, x, ldx, nt, y, ldy);                                         \
    }                                                                                                       \
    static void kq_gemm_##NAME(int k, const void *w, size_t ldw, int nr, const void *x, size_t ldx, int t0,  \
                               int nt, int n_act, float *y, size_t ldy) {                                   \
        if (kq_try_dec_##NAME(k, w, ldw, nr, x, ldx, t0, nt, n_act, y, ldy)) return;                        \
        if (nt < 3) {                                                                                       \
            kq_gemm_per_output(kq_vec_dot_##NAME, kq_select_##NAME, k, w, ldw, nr, x, ldx, t0, nt, n_act, y, ldy); \
            return;                                                                                         \
        }                                                                                                   \
        const int nb = k / EL_QK_K;                                                                         \
        const int lim = n_act - n_act % 4;                                                                  \
        PT pk;                                                                                              \
        __m256 acc[KQ_TT], accm[KQ_TT];                                                                     \
        int x4[KQ_TT];                                                                                      \
        for (int r0 = 0; r0 < nr; r0 += 8) {                                                                \
            const int rn = nr - r0 < 8 ? nr - r0 : 8;                                                       \
            for (int ta = 0; ta < nt; ta += KQ_TT) {                                                        \
                const int tn = nt - ta < KQ_TT ? nt - ta : KQ_TT;                                           \
                for (int a = 0; a < tn; ++a) {                                                              \
                    acc[a] = accm[a] = _mm256_setzero_ps();                                                 \
                    x4[a] = t0 + ta + a < lim;                                                              \
                }                                                                                           \
                for (int i = 0; i < nb; ++i) {                                                              \
                    const BT *rows[8];                                                                      \
                    for (int r = 0; r < 8; ++r)                                                             \
                        rows[r] = (const BT *)((const uint8_t *)w + ldw * (size_t)(r0 + (r < rn ? r : rn - 1))) + i; \
                    PACK(rows, &pk);                                                                        \
                    /* the next block of these rows (or the first of the next group): its bytes      \
                     * arrive while this one meets every activation row */                           \
                    for (int r = 0; r < 8; ++r) {                                                           \
                        const uint8_t *nx = i + 1 < nb ? (const uint8_t *)(rows[r] + 1)                      \
                                                       : (const uint8_t *)w + ldw * (size_t)(r0 + 8 + r < nr ? r0 + 8 + r : nr - 1); \
                        for (size_t o = 0; o < sizeof(BT); o += 64) _mm_prefetch((const char *)nx + o, _MM_HINT_T0); \
                    }                                                                                       \
                    int a = 0;                                                                              \
                    for (; a + 4 <= tn; a += 4) {                                                           \
                        const block_q8_K *yb[4];                                                            \
                        for (int q = 0; q < 4; ++q)                                                         \
                            yb[q] = (const block_q8_K *)((const uint8_t *)x + ldx * (size_t)(ta + a + q)) + i; \
                        ACTS(&pk, yb, x4 + a, acc + a, accm + a, 4);                                        \
                    }                                                                                       \
                    for (; a < tn; ++a) {                                                                   \
                        const block_q8_K *yb[1] = {(const block_q8_K *)((const uint8_t *)x + ldx * (size_t)(ta + a)) + i}; \
                        ACTS(&pk, yb, x4 + a, acc + a, accm + a, 1);                                        \
                    }                                                                                       \
                }                                                                                           \
                for (int a = 0; a < tn; ++a)                                                                \
                    kq_store_n(y + (size_t)(ta + a) * ldy + r0, _mm256_sub_ps(acc[a], accm[a]), rn);        \
            }                                                                                               \
        }                                                                                                   \
    }

KQ_ROW_LANES_GEMM(q4_k, block_q4_K, q4k_pack, q4k_pack8, q4k_acts, kq_dec_q4_k)

#if KQ_VNNI
/*
 * Q4_K prefill on 512-bit registers: 16 weight rows per group (two
 * q4k_pack8 halves side by side), so one vpdpbusd with a broadcast
 * activation word feeds 16 outputs. Per output the operations are
 * q4k_acts' (exact integer chunk sums times the int32 scales, the mins
 * through the bsums pairs, then the same fma pair per chunk in the x4 order
 * or per super-block in the vec_dot order): the same bits.
 */
typedef struct {
    __m512i w[64]; /* w[8j + k] lane r (0..15): quants 4k..4k+3 of sub-block j of row r */
    __m512i sc[8]; /* sub-block j scale of row r (int32) */
    __m512i mn[4]; /* chunk c, lane r: int16 pair (min of 2c, min of 2c+1) */
    __m512 d, dmin;
} q4k_pack16;

KQ_INLINE void q4k_pack16_build(const block_q4_K *const rows[16], q4k_pack16 *pk, q4k_pack *tmp) {
    q4k_pack8(rows, &tmp[0]);
    q4k_pack8(rows + 8, &tmp[1]);
    for (int i = 0; i < 64; ++i) pk->w[i] = _mm512_inserti64x4(_mm512_castsi256_si512(tmp[0].w[i]), tmp[1].w[i], 1);
    for (int j = 0; j < 8; ++j) pk->sc[j] = _mm512_inserti64x4(_mm512_castsi256_si512(tmp[0].sc[j]), tmp[1].sc[j], 1);
    for (int c = 0; c < 4; ++c) pk->mn[c] = _mm512_inserti64x4(_mm512_castsi256_si512(tmp[0].mn[c]), tmp[1].mn[c], 1);
    pk->d = _mm512_insertf32x8(_mm512_castps256_ps512(tmp[0].d), tmp[1].d, 1);
    pk->dmin = _mm512_insertf32x8(_mm512_castps256_ps512(tmp[0].dmin), tmp[1].dmin, 1);
}

KQ_INLINE void q4k_acts16(const q4k_pack16 *pk, const block_q8_K *const *yb, const int *x4, __m512 *acc,
                          __m512 *accm, const int na) {
    __m512i tot[4], totm[4];
    __m512 dv[4], dmv[4];
    alignas(16) int32_t bsp[4][4]; /* chunk c: int16 pair (bsums 4c + 4c+1, bsums 4c+2 + 4c+3) */
    for (int a = 0; a < na; ++a) {
        tot[a] = totm[a] = _mm512_setzero_si512();
        const __m512 yd = _mm512_set1_ps(yb[a]->d);
        dv[a] = _mm512_mul_ps(pk->d, yd);
        dmv[a] = _mm512_mul_ps(pk->dmin, yd);
        const int16_t *bs = yb[a]->bsums;
        _mm_store_si128((__m128i *)bsp[a], _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)bs),
                                                          _mm_loadu_si128((const __m128i *)(bs + 8))));
    }
    for (int c = 0; c < 4; ++c) {
        const int j0 = 2 * c, j1 = 2 * c + 1;
        __m512i p0[4], p1[4];
        for (int a = 0; a < na; ++a) p0[a] = p1[a] = _mm512_setzero_si512();
        for (int k = 0; k < 8; ++k) {
            const __m512i w0 = pk->w[8 * j0 + k], w1 = pk->w[8 * j1 + k];
            for (int a = 0; a < na; ++a) {
                p0[a] = _mm512_dpbusd_epi32(p0[a], w0, _mm512_set1_epi32(kq_load_i32(yb[a]->qs + 32 * j0 + 4 * k)));
                p1[a] = _mm512_dpbusd_epi32(p1[a], w1, _mm512_set1_epi32(kq_load_i32(yb[a]->qs + 32 * j1 + 4 * k)));
            }
        }
        for (int a = 0; a < na; ++a) {
            const __m512i is = _mm512_add_epi32(_mm512_mullo_epi32(p0[a], pk->sc[j0]), _mm512_mullo_epi32(p1[a], pk->sc[j1]));
            const __m512i mm = _mm512_madd_epi16(pk->mn[c], _mm512_set1_epi32(bsp[a][c]));
            if (x4[a]) {
                acc[a] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is), dv[a], acc[a]);
                accm[a] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(mm), dmv[a], accm[a]);
            } else {
                tot[a] = _mm512_add_epi32(tot[a], is);
                totm[a] = _mm512_add_epi32(totm[a], mm);
            }
        }
    }
    for (int a = 0; a < na; ++a)
        if (!x4[a]) {
            acc[a] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(tot[a]), dv[a], acc[a]);
            accm[a] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(totm[a]), dmv[a], accm[a]);
        }
}

/*
 * The 16-row gemm over packed blocks (PT, built by BUILD with a TMPT
 * scratch): per 16-row group and tile of KQ_TT activation rows, block by
 * block, the block packed once and met by every activation row of the tile
 * through ACTS, 4 at a time, then one at a time. ACTS keeps two
 * accumulators (acc, accm: the output is acc - accm) and takes the x4 order
 * for activation rows below n_act - n_act % 4 where its type has two orders.
 */
/* Activation rows one packed block meets (el_cpu_gemm_toks_kquants_avx512:
 * the token block the matmul driver hands these gemms): at 256 rather than 64 the
 * packing costs a quarter as much per product, and a 16-row group's
 * accumulators (32 KB) still sit in L1/L2. */
#ifndef KQ_TT16
#define KQ_TT16 256
#endif
#define KQ_GEMM16_BODY(NAME, BT, PT, TMPT, BUILD, ACTS)                                                       \
    static void kq_gemm16_body_##NAME(int k, const void *w, size_t ldw, int nr, const void *x, size_t ldx,   \
                                      int t0, int nt, int n_act, float *y, size_t ldy) {                     \
        const int nb = k / EL_QK_K;                                                                          \
        const int lim = n_act - n_act % 4;                                                                   \
        PT pk;                                                                                               \
        TMPT tmp;                                                                                            \
        __m512 acc[KQ_TT16], accm[KQ_TT16];                                                                  \
        int x4[KQ_TT16];                                                                                     \
        for (int r0 = 0; r0 < nr; r0 += 16) {                                                                \
            const int rn = nr - r0 < 16 ? nr - r0 : 16;                                                      \
            for (int ta = 0; ta < nt; ta += KQ_TT16) {                                                       \
                const int tn = nt - ta < KQ_TT16 ? nt - ta : KQ_TT16;                                        \
                for (int a = 0; a < tn; ++a) {                                                               \
                    acc[a] = accm[a] = _mm512_setzero_ps();                                                  \
                    x4[a] = t0 + ta + a < lim;                                                               \
                }                                                                                            \
                for (int i = 0; i < nb; ++i) {                                                               \
                    const BT *rows[16];                                                                      \
                    for (int r = 0; r < 16; ++r)                                                             \
                        rows[r] = (const BT *)((const uint8_t *)w + ldw * (size_t)(r0 + (r < rn ? r : rn - 1))) + i; \
                    BUILD(rows, &pk, tmp);                                                                   \
                    /* the next block of these rows (or the first of the next group) */                     \
                    for (int r = 0; r < 16; ++r) {                                                           \
                        const uint8_t *nx = i + 1 < nb ? (const uint8_t *)(rows[r] + 1)                       \
                                                       : (const uint8_t *)w + ldw * (size_t)(r0 + 16 + r < nr ? r0 + 16 + r : nr - 1); \
                        for (size_t o = 0; o < sizeof(BT); o += 64) _mm_prefetch((const char *)nx + o, _MM_HINT_T0); \
                    }                                                                                        \
                    int a = 0;                                                                               \
                    for (; a + 4 <= tn; a += 4) {                                                            \
                        const block_q8_K *yb[4];                                                             \
                        for (int q = 0; q < 4; ++q)                                                          \
                            yb[q] = (const block_q8_K *)((const uint8_t *)x + ldx * (size_t)(ta + a + q)) + i; \
                        ACTS(&pk, yb, x4 + a, acc + a, accm + a, 4);                                         \
                    }                                                                                        \
                    for (; a < tn; ++a) {                                                                    \
                        const block_q8_K *yb[1] = {(const block_q8_K *)((const uint8_t *)x + ldx * (size_t)(ta + a)) + i}; \
                        ACTS(&pk, yb, x4 + a, acc + a, accm + a, 1);                                         \
                    }                                                                                        \
                }                                                                                            \
                for (int a = 0; a < tn; ++a)                                                                 \
                    _mm512_mask_storeu_ps(y + (size_t)(ta + a) * ldy + r0, (__mmask16)((1u << rn) - 1),      \
                                          _mm512_sub_ps(acc[a], accm[a]));                                   \
            }                                                                                                \
        }                                                                                                    \
    }

typedef q4k_pack q4k_pack16_tmp[2];
KQ_GEMM16_BODY(q4_k, block_q4_K, q4k_pack16, q4k_pack16_tmp, q4k_pack16_build, q4k_acts16)

/* The Q4_K gemm entry of the AVX-512 table: decode and 1-2 activation rows
 * through kq_gemm_q4_k, larger blocks in 16-row groups. */
static void kq_gemm16_q4_k(int k, const void *w, size_t ldw, int nr, const void *x, size_t ldx, int t0, int nt,
                           int n_act, float *y, size_t ldy) {
    if (nt < 3) {
        kq_gemm_q4_k(k, w, ldw, nr, x, ldx, t0, nt, n_act, y, ldy);
        return;
    }
    /* a batched decode step: the decode kernel */
    if (nt <= KQ_DEC_TT && kq_try_dec_q4_k(k, w, ldw, nr, x, ldx, t0, nt, n_act, y, ldy)) return;
    kq_gemm16_body_q4_k(k, w, ldw, nr, x, ldx, t0, nt, n_act, y, ldy);
}
#define KQ_GEMM_Q4_K kq_gemm16_q4_k
#else
#define KQ_GEMM_Q4_K kq_gemm_q4_k
#endif

/* ======================================================================== */
/* Q2_K                                                                     */
/* ======================================================================== */

/* Chunk c (elements 32c..32c+31) of a Q2_K block: quants 0..3. */
static inline __m256i q2k_chunk_q(const uint8_t *qs, int c) {
    return _mm256_and_si256(_mm256_srli_epi16(kq_ld(qs + 32 * (c >> 2)), 2 * (c & 3)), _mm256_set1_epi8(3));
}

/* Integer sums per chunk (scaled per 16) and per-half mins of one block:
 * is[c] (8 lanes, summed later), mm (lanes 0-3: first half, 4-7: second). */
KQ_INLINE void q2k_row_block(const block_q2_K *b, const block_q8_K *y, __m256i *is_half, __m256i *mm) {
    const __m128i s8 = _mm_loadu_si128((const __m128i *)b->scales);
    const __m128i sc8 = _mm_and_si128(s8, _mm_set1_epi8(0x0F));
    const __m128i m8 = _mm_and_si128(_mm_srli_epi16(s8, 4), _mm_set1_epi8(0x0F));
    for (int h = 0; h < 2; ++h) {
        __m256i a0 = _mm256_setzero_si256(), a1 = _mm256_setzero_si256();
        for (int c = 4 * h; c < 4 * h + 4; c += 2) {
            a0 = KQ_DPWSSD(a0, _mm256_maddubs_epi16(q2k_chunk_q(b->qs, c), kq_ld(y->qs + 32 * c)), kq_scale_pair(sc8, c));
            a1 = KQ_DPWSSD(a1, _mm256_maddubs_epi16(q2k_chunk_q(b->qs, c + 1), kq_ld(y->qs + 32 * c + 32)),
                           kq_scale_pair(sc8, c + 1));
        }
        is_half[h] = _mm256_add_epi32(a0, a1);
    }
    *mm = _mm256_madd_epi16(kq_ld(y->bsums), _mm256_cvtepu8_epi16(m8));
}

/* el_vec_dot_q2_k_q8_k: one fma pair per super-block. */
static void kq_vec_dot_q2_k(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q2_K *restrict x = vx;
    const block_q8_K *restrict y = vy;
    const int nb = n / EL_QK_K;
    __m128 acc = _mm_setzero_ps();
    for (int i = 0; i < nb; ++i) {
        __m256i is[2], mm;
        q2k_row_block(&x[i], &y[i], is, &mm);
        const __m256i t = _mm256_add_epi32(is[0], is[1]);
        const __m128i a = _mm_add_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
        const __m128i b = _mm_add_epi32(_mm256_castsi256_si128(mm), _mm256_extracti128_si256(mm, 1));
        __m128i h = _mm_hadd_epi32(a, b);
        h = _mm_hadd_epi32(h, h); /* [isum, summs, isum, summs] */
        const __m128 dd = _mm_mul_ps(kq_f16x2(&x[i].d), _mm_set1_ps(y[i].d));
        acc = _mm_fmadd_ps(_mm_cvtepi32_ps(h), dd, acc);
    }
    *s = _mm_cvtss_f32(_mm_sub_ss(acc, _mm_movehdup_ps(acc)));
}

/* el_vec_dot_q2_k_q8_k_x4: one fma pair per 128 elements. */
static void kq_vec_dot_q2_k_x4(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q2_K *restrict x = vx;
    const block_q8_K *restrict y = vy;
    const int nb = n / EL_QK_K;
    float acc = 0.0f, accm = 0.0f;
    for (int i = 0; i < nb; ++i) {
        __m256i is[2], mm;
        q2k_row_block(&x[i], &y[i], is, &mm);
        const __m128i a = _mm_add_epi32(_mm256_castsi256_si128(is[0]), _mm256_extracti128_si256(is[0], 1));
        const __m128i b = _mm_add_epi32(_mm256_castsi256_si128(is[1]), _mm256_extracti128_si256(is[1], 1));
        /* [is half 0, is half 1, mins half 0, mins half 1] */
        const __m128i h = _mm_hadd_epi32(_mm_hadd_epi32(a, b), _mm_hadd_epi32(_mm256_castsi256_si128(mm),
                                                                             _mm256_extracti128_si256(mm, 1)));
        alignas(16) int32_t v[4];
        _mm_store_si128((__m128i *)v, h);
        const float dall = kq_f16(x[i].d) * y[i].d;
        const float dmin = kq_f16(x[i].dmin) * y[i].d;
        for (int hh = 0; hh < 2; ++hh) {
            acc = fmaf((float)v[hh], dall, acc);
            accm = fmaf((float)v[2 + hh], dmin, accm);
        }
    }
    *s = acc - accm;
}

static el_vec_dot_fn kq_select_q2_k(int n_rows, int row, int k) {
    (void)k;
    return row < n_rows - n_rows % 4 ? kq_vec_dot_q2_k_x4 : NULL;
}

/* 8 weight rows of one Q2_K super-block in row lanes. */
typedef struct {
    __m256i w[64];  /* w[8c + k] lane r: quants 4k..4k+3 of chunk c of row r */
    __m256i sc[16]; /* 16-element group G scale of row r: int32 (VNNI) or two int16 copies (AVX2) */
    __m256i mn[8];  /* pair p, lane r: int16 pair (min of 2p, min of 2p+1) */
    __m256 d, dmin;
} q2k_pack;

KQ_INLINE void q2k_pack8(const block_q2_K *const rows[8], q2k_pack *pk) {
    alignas(32) uint8_t scb[16][8]; /* [G][r] */
    alignas(32) int32_t mnv[8][8];  /* [p][r] */
    alignas(16) uint16_t dh[8], mh[8];
    for (int r = 0; r < 8; ++r) {
        const uint8_t *s = rows[r]->scales;
        for (int g = 0; g < 16; ++g) scb[g][r] = s[g] & 0x0F;
        for (int q = 0; q < 8; ++q) mnv[q][r] = (s[2 * q] >> 4) | ((s[2 * q + 1] >> 4) << 16);
        dh[r] = rows[r]->d;
        mh[r] = rows[r]->dmin;
    }
    for (int g = 0; g < 16; ++g) {
        const __m256i s32 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)scb[g]));
#if KQ_VNNI
        pk->sc[g] = s32;
#else
        pk->sc[g] = _mm256_or_si256(s32, _mm256_slli_epi32(s32, 16));
#endif
    }
    for (int q = 0; q < 8; ++q) pk->mn[q] = _mm256_load_si256((const __m256i *)mnv[q]);
    pk->d = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)dh));
    pk->dmin = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)mh));
    for (int c = 0; c < 8; ++c) {
        __m256i a[8];
        for (int r = 0; r < 8; ++r) a[r] = q2k_chunk_q(rows[r]->qs, c);
        kq_transpose8(a, pk->w + 8 * c);
    }
}

/* As q4k_acts, for Q2_K: x4 order = one fma pair per half block. */
KQ_INLINE void q2k_acts(const q2k_pack *pk, const block_q8_K *const *yb, const int *x4, __m256 *acc,
                        __m256 *accm, const int na) {
    __m256i tot[4], totm[4];
    __m256 dv[4], dmv[4];
    for (int a = 0; a < na; ++a) {
        tot[a] = totm[a] = _mm256_setzero_si256();
        const __m256 yd = _mm256_set1_ps(yb[a]->d);
        dv[a] = _mm256_mul_ps(pk->d, yd);
        dmv[a] = _mm256_mul_ps(pk->dmin, yd);
    }
    for (int h = 0; h < 2; ++h) {
        __m256i is[4];
        for (int a = 0; a < na; ++a) is[a] = _mm256_setzero_si256();
        for (int c = 4 * h; c < 4 * h + 4; ++c) {
#if KQ_VNNI
            __m256i p0[4], p1[4];
            for (int a = 0; a < na; ++a) p0[a] = p1[a] = _mm256_setzero_si256();
            for (int k = 0; k < 4; ++k) {
                const __m256i w0 = pk->w[8 * c + k], w1 = pk->w[8 * c + 4 + k];
                for (int a = 0; a < na; ++a) {
                    p0[a] = _mm256_dpbusd_epi32(p0[a], w0, _mm256_set1_epi32(kq_load_i32(yb[a]->qs + 32 * c + 4 * k)));
                    p1[a] = _mm256_dpbusd_epi32(p1[a], w1, _mm256_set1_epi32(kq_load_i32(yb[a]->qs + 32 * c + 16 + 4 * k)));
                }
            }
            for (int a = 0; a < na; ++a)
                is[a] = _mm256_add_epi32(is[a], _mm256_add_epi32(_mm256_mullo_epi32(p0[a], pk->sc[2 * c]),
                                                                 _mm256_mullo_epi32(p1[a], pk->sc[2 * c + 1])));
#else
            for (int k = 0; k < 4; ++k) {
                const __m256i w0 = pk->w[8 * c + k], w1 = pk->w[8 * c + 4 + k];
                for (int a = 0; a < na; ++a) {
                    const __m256i y0 = _mm256_set1_epi32(kq_load_i32(yb[a]->qs + 32 * c + 4 * k));
                    const __m256i y1 = _mm256_set1_epi32(kq_load_i32(yb[a]->qs + 32 * c + 16 + 4 * k));
                    const __m256i s0 = _mm256_madd_epi16(_mm256_maddubs_epi16(w0, y0), pk->sc[2 * c]);
                    const __m256i s1 = _mm256_madd_epi16(_mm256_maddubs_epi16(w1, y1), pk->sc[2 * c + 1]);
                    is[a] = _mm256_add_epi32(is[a], _mm256_add_epi32(s0, s1));
                }
            }
#endif
        }
        for (int a = 0; a < na; ++a) {
            const int16_t *bs = yb[a]->bsums;
            __m256i mm = _mm256_setzero_si256();
            for (int q = 4 * h; q < 4 * h + 4; ++q)
                mm = _mm256_add_epi32(mm, _mm256_madd_epi16(pk->mn[q], _mm256_set1_epi32(kq_load_i32(bs + 2 * q))));
            if (x4[a]) {
                acc[a] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is[a]), dv[a], acc[a]);
                accm[a] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mm), dmv[a], accm[a]);
            } else {
                tot[a] = _mm256_add_epi32(tot[a], is[a]);
                totm[a] = _mm256_add_epi32(totm[a], mm);
            }
        }
    }
    for (int a = 0; a < na; ++a)
        if (!x4[a]) {
            acc[a] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(tot[a]), dv[a], acc[a]);
            accm[a] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(totm[a]), dmv[a], accm[a]);
        }
}

KQ_ROW_LANES_GEMM(q2_k, block_q2_K, q2k_pack, q2k_pack8, q2k_acts, kq_dec_none)

/* ======================================================================== */
/* The x86 vec_dot order: Q3_K, Q5_K, Q6_K, IQ4_XS                          */
/* ======================================================================== */

/*
 * Per output, 8 float lanes: lane l holds the integer sum over elements
 * 32c + 4l .. 32c + 4l + 3 of every 32-element chunk c (times the scale of
 * that element's 16-element group), and takes acc = fma(d, lane, acc) per
 * block; the output is the x86 horizontal sum (plus, for Q5_K, a scalar min
 * chain). A weight block is unpacked once into registers and used for every
 * activation row of the gemm.
 */
typedef struct {
    __m256 acc;
    float s; /* Q5_K: the min chain */
} kq_state;

/* ---- Q6_K: quants used unsigned (0..63); the -32 goes through the bsums ---- */
#if KQ_VNNI
/*
 * 512-bit registers: register p holds chunks 2p and 2p + 1 side by side (the
 * activation's element order): the low or high nibbles of 64 ql bytes, and
 * the high bits of 32 qh bytes loaded into both halves and rotated per half
 * to bits 4-5. Integer lane l of the 8 is the sum of the two halves' lane l
 * (exact); the -32 offset is a first vpdpwssd of the bsums with -32 * scales
 * into the low half. Same lanes, same fma and horizontal sum as the AVX2
 * form below.
 */
/* vpermw index: word i takes word base + i / 8 (Q6_K: four 16-element groups). */
KQ_INLINE __m512i kq_idx_quad(int base) {
    const __m128i a = _mm_set1_epi16((short)base), b = _mm_set1_epi16((short)(base + 1));
    const __m128i c = _mm_set1_epi16((short)(base + 2)), d = _mm_set1_epi16((short)(base + 3));
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set_m128i(b, a)), _mm256_set_m128i(d, c), 1);
}

typedef struct {
    __m512i q[4];  /* chunks 2p | 2p + 1 */
    __m512i sc[4]; /* their int16 group scales */
    __m512i c32;   /* -32 * the 16 scales (int16) in the low half, 0 above */
    float d;
} q6k_unpacked;

KQ_INLINE void q6k_unpack(const block_q6_K *b, q6k_unpacked *u) {
    const __m512i m0f = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
    const __m512i rlo = _mm512_inserti64x4(_mm512_set1_epi32(4), _mm256_set1_epi32(2), 1);
    const __m512i rhi = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi32(30), 1);
    for (int h = 0; h < 2; ++h) {
        const __m512i L = _mm512_loadu_si512(b->ql + 64 * h);
        const __m512i H = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(b->qh + 32 * h)));
        /* (A ? B : C) bitwise with A = 0x0F: the nibble from B, bits 4-7 from C */
        u->q[2 * h] = _mm512_ternarylogic_epi32(m0f, L, _mm512_and_si512(_mm512_rolv_epi32(H, rlo), m30), 0xCA);
        u->q[2 * h + 1] = _mm512_ternarylogic_epi32(m0f, _mm512_srli_epi16(L, 4),
                                                    _mm512_and_si512(_mm512_rolv_epi32(H, rhi), m30), 0xCA);
    }
    const __m256i s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b->scales));
    const __m512i sz = _mm512_castsi256_si512(s16);
    for (int p = 0; p < 4; ++p) u->sc[p] = _mm512_permutexvar_epi16(kq_idx_quad(4 * p), sz);
    u->c32 = _mm512_zextsi256_si512(_mm256_mullo_epi16(s16, _mm256_set1_epi16(-32))); /* |.| <= 4096 */
    u->d = kq_f16(b->d);
}

/* The 8 integer lanes of one block (exact). */
KQ_INLINE __m256i q6k_lanes(const q6k_unpacked *u, const block_q8_K *y) {
    const __m512i z = _mm512_setzero_si512();
    __m512i s0 = _mm512_dpwssd_epi32(z, _mm512_zextsi256_si512(kq_ld(y->bsums)), u->c32);
    __m512i s1 = _mm512_dpwssd_epi32(z, _mm512_maddubs_epi16(u->q[2], _mm512_loadu_si512(y->qs + 128)), u->sc[2]);
    s0 = _mm512_dpwssd_epi32(s0, _mm512_maddubs_epi16(u->q[0], _mm512_loadu_si512(y->qs)), u->sc[0]);
    s1 = _mm512_dpwssd_epi32(s1, _mm512_maddubs_epi16(u->q[3], _mm512_loadu_si512(y->qs + 192)), u->sc[3]);
    s0 = _mm512_dpwssd_epi32(s0, _mm512_maddubs_epi16(u->q[1], _mm512_loadu_si512(y->qs + 64)), u->sc[1]);
    const __m512i T = _mm512_add_epi32(s0, s1);
    return _mm256_add_epi32(_mm512_castsi512_si256(T), _mm512_extracti64x4_epi64(T, 1));
}
#else
typedef struct {
    __m256i q[8];   /* chunk c: elements 32c..32c+31 */
    __m256i sc[8];  /* chunk c: kq_scale_pair */
    __m256i sc16;   /* the 16 scales times -32, as int16 */
    float d;
} q6k_unpacked;

KQ_INLINE void q6k_unpack(const block_q6_K *b, q6k_unpacked *u) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
    for (int h = 0; h < 2; ++h) {
        const __m256i l0 = kq_ld(b->ql + 64 * h), l1 = kq_ld(b->ql + 64 * h + 32), qh = kq_ld(b->qh + 32 * h);
        u->q[4 * h + 0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30));
        u->q[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30));
        u->q[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(qh, m30));
        u->q[4 * h + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                          _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
    }
    const __m128i s8 = _mm_loadu_si128((const __m128i *)b->scales);
    u->sc16 = _mm256_mullo_epi16(_mm256_cvtepi8_epi16(s8), _mm256_set1_epi16(-32)); /* |.| <= 4096 */
    kq_scale_pairs(s8, u->sc);
    u->d = kq_f16(b->d);
}

KQ_INLINE __m256i q6k_lanes(const q6k_unpacked *u, const block_q8_K *y) {
    /* the -32 offset: bsums . (-32 * scales) starts one chain (integers: exact in any order) */
    __m256i l0 = _mm256_madd_epi16(kq_ld(y->bsums), u->sc16), l1 = _mm256_setzero_si256();
    for (int c = 0; c < 8; c += 2) {
        l0 = KQ_DPWSSD(l0, _mm256_maddubs_epi16(u->q[c], kq_ld(y->qs + 32 * c)), u->sc[c]);
        l1 = KQ_DPWSSD(l1, _mm256_maddubs_epi16(u->q[c + 1], kq_ld(y->qs + 32 * c + 32)), u->sc[c + 1]);
    }
    return _mm256_add_epi32(l0, l1);
}

#endif

/* The vec_dot order: one fma per lane and block. */
KQ_INLINE void q6k_block(const q6k_unpacked *u, const block_q8_K *y, kq_state *st) {
    const __m256i lane = q6k_lanes(u, y);
    const float d = y->d * u->d;
    st->acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(lane), st->acc);
}

/* ---- Q5_K: quants 0..31, one scale per 32; mins in a scalar fma chain ---- */
typedef struct {
    __m256i q[8];
    __m256i sc[8];  /* chunk c: int16 scale of sub-block c, x16 */
    __m256i m16;    /* int16 min of sub-block g/2 at position g */
    float d, dmin;
} q5k_unpacked;

KQ_INLINE void q5k_unpack(const block_q5_K *b, q5k_unpacked *u) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
    const __m256i qh = kq_ld(b->qh);
    for (int j = 0; j < 4; ++j) {
        const __m256i q = kq_ld(b->qs + 32 * j);
        const __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * j), one), 4);
        const __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * j + 1), one), 4);
        u->q[2 * j] = _mm256_or_si256(_mm256_and_si256(q, m4), h0);
        u->q[2 * j + 1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), h1);
    }
    uint32_t sm[4];
    kq_k4_scales(b->scales, sm);
    const uint8_t *sc = (const uint8_t *)sm;
    const __m256i s16 = kq_scales16(sc);
    for (int c = 0; c < 8; ++c) u->sc[c] = kq_scale_j(s16, c);
    const __m128i m = _mm_cvtsi32_si128((int)sm[2]), m2 = _mm_insert_epi32(m, (int)sm[3], 1);
    u->m16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m2, m2));
    u->d = kq_f16(b->d);
    u->dmin = kq_f16(b->dmin);
}

KQ_INLINE void q5k_block(const q5k_unpacked *u, const block_q8_K *y, kq_state *st) {
    __m256i l0 = _mm256_setzero_si256(), l1 = _mm256_setzero_si256();
    for (int c = 0; c < 8; c += 2) {
        l0 = KQ_DPWSSD(l0, _mm256_maddubs_epi16(u->q[c], kq_ld(y->qs + 32 * c)), u->sc[c]);
        l1 = KQ_DPWSSD(l1, _mm256_maddubs_epi16(u->q[c + 1], kq_ld(y->qs + 32 * c + 32)), u->sc[c + 1]);
    }
    const int32_t summ = kq_hsum_i32(_mm256_madd_epi16(kq_ld(y->bsums), u->m16));
    const float d = y->d * u->d;
    const float dmin = -y->d * u->dmin;
    st->s = fmaf(dmin, (float)summ, st->s);
    st->acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(_mm256_add_epi32(l0, l1)), st->acc);
}

/* ---- Q3_K: quants -4..3 used as 0..7; the 4 * y is taken off in int16 ---- */
typedef struct {
    __m256i q[8];   /* quant + 4 */
    __m256i sc[8];  /* chunk c: kq_scale_pair of the signed scales */
    float d;
} q3k_unpacked;

KQ_INLINE void q3k_unpack(const block_q3_K *b, q3k_unpacked *u) {
    const __m256i m3 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
    const __m256i hm = kq_ld(b->hmask);
    for (int n = 0; n < 2; ++n) {
        const __m256i q = kq_ld(b->qs + 32 * n);
        for (int j = 0; j < 4; ++j) {
            const int bit = 4 * n + j;
            /* (q >> 2j) & 3, plus 4 where the hmask bit is set */
            const __m256i lo = _mm256_and_si256(_mm256_srli_epi16(q, 2 * j), m3);
            const __m256i hb = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hm, bit), one), 2);
            u->q[4 * n + j] = _mm256_or_si256(lo, hb);
        }
    }
    /* el_q3k_scale for the 16 groups at once: group 4G + b = low nibble
     * (bytes 0-7, then their high nibbles) | bits 2G..2G+1 of byte 8 + b */
    uint32_t a0, a1, a2, w[4];
    memcpy(&a0, b->scales, 4);
    memcpy(&a1, b->scales + 4, 4);
    memcpy(&a2, b->scales + 8, 4);
    w[0] = (a0 & 0x0f0f0f0fu) | ((a2 & 0x03030303u) << 4);
    w[1] = (a1 & 0x0f0f0f0fu) | (((a2 >> 2) & 0x03030303u) << 4);
    w[2] = ((a0 >> 4) & 0x0f0f0f0fu) | (((a2 >> 4) & 0x03030303u) << 4);
    w[3] = ((a1 >> 4) & 0x0f0f0f0fu) | (((a2 >> 6) & 0x03030303u) << 4);
    const __m128i s8 = _mm_sub_epi8(_mm_loadu_si128((const __m128i *)w), _mm_set1_epi8(32));
    kq_scale_pairs(s8, u->sc);
    u->d = kq_f16(b->d);
}

KQ_INLINE void q3k_block(const q3k_unpacked *u, const block_q8_K *y, kq_state *st) {
    const __m256i four = _mm256_set1_epi8(4);
    __m256i l0 = _mm256_setzero_si256(), l1 = _mm256_setzero_si256();
    for (int c = 0; c < 8; c += 2) {
        const __m256i y0 = kq_ld(y->qs + 32 * c), y1 = kq_ld(y->qs + 32 * c + 32);
        const __m256i p0 = _mm256_sub_epi16(_mm256_maddubs_epi16(u->q[c], y0), _mm256_maddubs_epi16(four, y0));
        const __m256i p1 = _mm256_sub_epi16(_mm256_maddubs_epi16(u->q[c + 1], y1), _mm256_maddubs_epi16(four, y1));
        l0 = KQ_DPWSSD(l0, p0, u->sc[c]);
        l1 = KQ_DPWSSD(l1, p1, u->sc[c + 1]);
    }
    const float d = y->d * u->d;
    st->acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(_mm256_add_epi32(l0, l1)), st->acc);
}

/* ---- IQ4_XS: code values -127..113, one signed scale per 32 ---- */
typedef struct {
#if KQ_VNNI
    __m256i q[8];   /* code value + 128 (unsigned) */
#else
    __m256i q[8];   /* |code value| */
    __m256i sg[8];  /* code value (for the sign) */
#endif
    __m256i sc[8];  /* chunk c: scale - 32, as int32 (VNNI) or int16 x16 (AVX2) */
    float d;
} iq4xs_unpacked;

KQ_INLINE void iq4xs_unpack(const block_iq4_xs *b, iq4xs_unpacked *u) {
    const __m128i m4 = _mm_set1_epi8(0x0F);
    const __m128i tab = _mm_loadu_si128((const __m128i *)kvalues_iq4nl);
    for (int ib = 0; ib < 8; ++ib) {
        const __m128i q = _mm_loadu_si128((const __m128i *)(b->qs + 16 * ib));
        const __m128i lo = _mm_shuffle_epi8(tab, _mm_and_si128(q, m4));
        const __m128i hi = _mm_shuffle_epi8(tab, _mm_and_si128(_mm_srli_epi16(q, 4), m4));
        const __m256i v = _mm256_set_m128i(hi, lo);
        const int sc = el_iq4xs_scale(b, ib) - 32;
#if KQ_VNNI
        u->q[ib] = _mm256_xor_si256(v, _mm256_set1_epi8((char)0x80));
        u->sc[ib] = _mm256_set1_epi32(sc);
#else
        u->q[ib] = _mm256_abs_epi8(v);
        u->sg[ib] = v;
        u->sc[ib] = _mm256_set1_epi16((int16_t)sc);
#endif
    }
    u->d = kq_f16(b->d);
}

KQ_INLINE void iq4xs_block(const iq4xs_unpacked *u, const block_q8_K *y, kq_state *st) {
    __m256i l0 = _mm256_setzero_si256(), l1 = _mm256_setzero_si256();
#if KQ_VNNI
    /* (v + 128) . y - 128 * sum(y): exact in int32 */
    const __m256i k80 = _mm256_set1_epi8((char)0x80);
    for (int c = 0; c < 8; c += 2) {
        const __m256i y0 = kq_ld(y->qs + 32 * c), y1 = kq_ld(y->qs + 32 * c + 32);
        const __m256i z = _mm256_setzero_si256();
        const __m256i p0 = _mm256_sub_epi32(_mm256_dpbusd_epi32(z, u->q[c], y0), _mm256_dpbusd_epi32(z, k80, y0));
        const __m256i p1 = _mm256_sub_epi32(_mm256_dpbusd_epi32(z, u->q[c + 1], y1), _mm256_dpbusd_epi32(z, k80, y1));
        l0 = _mm256_add_epi32(l0, _mm256_mullo_epi32(p0, u->sc[c]));
        l1 = _mm256_add_epi32(l1, _mm256_mullo_epi32(p1, u->sc[c + 1]));
    }
#else
    /* |v| . (y * sign v): Q8_K activations lie in [-127, 127] (el_quant_q8_k
     * clamps to 127, -127/max * x >= -127, and an overflowed scale stores 0;
     * test_kquants_x86 checks), so the sign flip cannot wrap and the int16
     * pair sums (at most 2 * 127 * 127) cannot saturate. */
    for (int c = 0; c < 8; c += 2) {
        const __m256i y0 = _mm256_sign_epi8(kq_ld(y->qs + 32 * c), u->sg[c]);
        const __m256i y1 = _mm256_sign_epi8(kq_ld(y->qs + 32 * c + 32), u->sg[c + 1]);
        l0 = KQ_DPWSSD(l0, _mm256_maddubs_epi16(u->q[c], y0), u->sc[c]);
        l1 = KQ_DPWSSD(l1, _mm256_maddubs_epi16(u->q[c + 1], y1), u->sc[c + 1]);
    }
#endif
    const float d = u->d * y->d;
    st->acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(_mm256_add_epi32(l0, l1)), st->acc);
}

static inline float kq_finish(const kq_state *st, int with_s) {
    const float h = kq_hsum_f32(st->acc);
    return with_s ? h + st->s : h;
}

/* vec_dot and gemm (weight row outer, block, then every activation row). */
/* The gemm's tile: KQ_XO_RG weight rows x KQ_XO_TA activation rows, walked
 * block by block, so one block of the tile's activation rows (KQ_XO_TA x 292
 * bytes) stays in L1 for the KQ_XO_RG rows that meet it, with their
 * accumulators (KQ_XO_RG x KQ_XO_TA states); every output still takes its
 * blocks in order, one BLOCK each: the same bits for any tile. Decode and
 * batches of up to 4 rows (a batched step of 4 streams) walk one weight row
 * at a time, its blocks in sequence, as the stream prefetch (kq_dec_prefetch,
 * 4 KB ahead in the weights) expects: Qwen2.5-Coder 1.5B's 151,936 x 1,536
 * Q6_K output matrix, 4 activation rows, one thread, AMD EPYC Zen 4, took
 * 57.7 ms in 16-row tiles, 27.1 ms in tiles with kq_tile_prefetch, 19.1 ms
 * a row at a time (3 rows: 15.5 ms). */
#ifndef KQ_XO_RG
#define KQ_XO_RG 16
#endif
#ifndef KQ_XO_TA
#define KQ_XO_TA 16
#endif

#define KQ_X86_ORDER(NAME, BT, UT, UNPACK, BLOCK, WITH_S, DEC)                                              \
    static void kq_vec_dot_##NAME(int n, float *restrict s, const void *restrict vx, const void *restrict vy) { \
        const BT *restrict x = vx;                                                                          \
        const block_q8_K *restrict y = vy;                                                                  \
        const int nb = n / EL_QK_K;                                                                         \
        kq_state st = {_mm256_setzero_ps(), 0.0f};                                                          \
        for (int i = 0; i < nb; ++i) {                                                                      \
            UT u;                                                                                           \
            UNPACK(&x[i], &u);                                                                              \
            BLOCK(&u, &y[i], &st);                                                                          \
        }                                                                                                   \
        *s = kq_finish(&st, WITH_S);                                                                        \
    }                                                                                                       \
    static void kq_gemm_##NAME(int k, const void *w, size_t ldw, int nr, const void *x, size_t ldx, int t0,  \
                               int nt, int n_act, float *y, size_t ldy) {                                   \
        (void)t0;                                                                                           \
        (void)n_act;                                                                                        \
        if (DEC(k, w, ldw, nr, x, ldx, nt, y, ldy)) return;                                                 \
        const int nb = k / EL_QK_K;                                                                         \
        kq_state st[KQ_XO_RG * KQ_XO_TA];                                                                   \
        const int rg = nt <= 4 ? 1 : KQ_XO_RG;                                                              \
        for (int r0 = 0; r0 < nr; r0 += rg) {                                                               \
            const int rn = nr - r0 < rg ? nr - r0 : rg;                                                     \
            for (int ta = 0; ta < nt; ta += KQ_XO_TA) {                                                     \
                const int tn = nt - ta < KQ_XO_TA ? nt - ta : KQ_XO_TA;                                     \
                for (int q = 0; q < rn * KQ_XO_TA; ++q) {                                                   \
                    st[q].acc = _mm256_setzero_ps();                                                        \
                    st[q].s = 0.0f;                                                                         \
                }                                                                                           \
                for (int i = 0; i < nb; ++i)                                                                \
                    for (int r = 0; r < rn; ++r) {                                                          \
                        const BT *wb = (const BT *)((const uint8_t *)w + ldw * (size_t)(r0 + r)) + i;       \
                        UT u;                                                                               \
                        if (nt <= 4) kq_dec_prefetch(wb, sizeof(BT));                                       \
                        else if (nt <= KQ_XO_TA && r0 + rg < nr) kq_tile_prefetch(wb, rg * ldw, sizeof(BT));       \
                        UNPACK(wb, &u);                                                                     \
                        for (int a = 0; a < tn; ++a)                                                        \
                            BLOCK(&u, (const block_q8_K *)((const uint8_t *)x + ldx * (size_t)(ta + a)) + i, \
                                  &st[KQ_XO_TA * r + a]);                                                   \
                    }                                                                                       \
                for (int r = 0; r < rn; ++r)                                                                \
                    for (int a = 0; a < tn; ++a)                                                            \
                        y[(size_t)(ta + a) * ldy + r0 + r] = kq_finish(&st[KQ_XO_TA * r + a], WITH_S);      \
            }                                                                                               \
        }                                                                                                   \
    }

/*
 * Q6_K, one activation row (decode): the gemm's per-row work (q6k_unpack,
 * BLOCK, kq_finish: the same bits), with the weight stream prefetched
 * KQ_Q6K_PF_ROWS rows ahead (block i of the row that many rows on, at block
 * step i) into KQ_Q6K_PF_HINT (L2; the gemm's own path prefetches 4 KB ahead
 * into L1). 0 (not taken) for more activation rows.
 */
#ifndef KQ_Q6K_PF_ROWS
#define KQ_Q6K_PF_ROWS 8
#endif
#ifndef KQ_Q6K_PF_HINT
#define KQ_Q6K_PF_HINT _MM_HINT_T1
#endif
#define KQ_DEC_Q6K(NAME, BLOCK, WITH_S)                                                                       \
    static int NAME(int k, const void *w, size_t ldw, int nr, const void *x, size_t ldx, int nt, float *y,      \
                    size_t ldy) {                                                                               \
        (void)ldx, (void)ldy;                                                                                   \
        if (nt != 1) return 0;                                                                                  \
        const int nb = k / EL_QK_K;                                                                             \
        const block_q8_K *xa = x;                                                                               \
        for (int r = 0; r < nr; ++r) {                                                                          \
            const block_q6_K *wr = (const block_q6_K *)((const uint8_t *)w + ldw * (size_t)r);                  \
            kq_state st = {_mm256_setzero_ps(), 0.0f};                                                          \
            for (int i = 0; i < nb; ++i) {                                                                      \
                /* block i of the row KQ_Q6K_PF_ROWS on (4 lines: consecutive blocks cover every line) */      \
                const char *pf = (const char *)&wr[i] + KQ_Q6K_PF_ROWS * ldw;                                   \
                for (int o = 0; o < 256; o += 64) _mm_prefetch(pf + o, KQ_Q6K_PF_HINT);                         \
                q6k_unpacked u;                                                                                 \
                q6k_unpack(&wr[i], &u);                                                                         \
                BLOCK(&u, &xa[i], &st);                                                                         \
            }                                                                                                   \
            y[r] = kq_finish(&st, WITH_S);                                                                      \
        }                                                                                                       \
        return 1;                                                                                               \
    }

KQ_DEC_Q6K(kq_dec_q6_k, q6k_block, 0)

KQ_X86_ORDER(q3_k, block_q3_K, q3k_unpacked, q3k_unpack, q3k_block, 0, kq_dec_none)
KQ_X86_ORDER(q5_k, block_q5_K, q5k_unpacked, q5k_unpack, q5k_block, 1, kq_dec_none)
KQ_X86_ORDER(q6_k, block_q6_K, q6k_unpacked, q6k_unpack, q6k_block, 0, kq_dec_q6_k)
KQ_X86_ORDER(iq4_xs, block_iq4_xs, iq4xs_unpacked, iq4xs_unpack, iq4xs_block, 0, kq_dec_none)

/* ======================================================================== */
/* Q8_K activations                                                         */
/* ======================================================================== */

/*
 * el_quant_q8_k, vectorized: the same operations per element (iscale * x as
 * a float product, the 1.5 * 2^23 rounding trick, the clamp at 127), the
 * same scale (the signed value of largest magnitude, first one on ties),
 * d = 1 / iscale, and the int8 conversion wraps like the C cast (a block of
 * values so small that -127 / max overflows to -inf gives -2^22, stored as
 * 0). A block holding a NaN goes to el_quant_q8_k itself.
 */
static void kq_quantize_q8_k(const float *restrict src, void *dst, int64_t n) {
    block_q8_K *restrict y = dst;
    const int64_t nb = n / EL_QK_K;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t i = 0; i < nb; ++i, src += EL_QK_K) {
        __m256 vmax = _mm256_setzero_ps(), nan = _mm256_setzero_ps();
        for (int j = 0; j < EL_QK_K; j += 8) {
            const __m256 v = _mm256_loadu_ps(src + j);
            vmax = _mm256_max_ps(vmax, _mm256_andnot_ps(sign, v));
            nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        }
        if (_mm256_movemask_ps(nan)) {
            el_quant_q8_k(src, &y[i], EL_QK_K);
            continue;
        }
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(vmax), _mm256_extractf128_ps(vmax, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        const float amax = _mm_cvtss_f32(m4);
        if (amax == 0.0f) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        float max = 0.0f;
        const __m256 va = _mm256_set1_ps(amax);
        for (int j = 0; j < EL_QK_K; j += 8) {
            const int hit = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(src + j)), va, _CMP_EQ_OQ));
            if (hit) {
                max = src[j + __builtin_ctz((unsigned)hit)];
                break;
            }
        }
        const float iscale = -127.0f / max;
        const __m256 vis = _mm256_set1_ps(iscale), magic = _mm256_set1_ps(12582912.0f);
        const __m256i mant = _mm256_set1_epi32(0x007fffff), bias = _mm256_set1_epi32(0x00400000);
        const __m256i lim = _mm256_set1_epi32(127), perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
        __m256i gs[16];
        for (int j = 0; j < EL_QK_K; j += 32) {
            __m256i q[4];
            for (int u = 0; u < 4; ++u) {
                const __m256 f = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(src + j + 8 * u), vis), magic);
                const __m256i v = _mm256_min_epi32(_mm256_sub_epi32(_mm256_and_si256(_mm256_castps_si256(f), mant), bias), lim);
                /* the (int8_t) conversion: wraps (only reached when iscale overflows to inf) */
                q[u] = _mm256_srai_epi32(_mm256_slli_epi32(v, 24), 24);
            }
            gs[j / 16] = _mm256_add_epi32(q[0], q[1]);
            gs[j / 16 + 1] = _mm256_add_epi32(q[2], q[3]);
            const __m256i b = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
            _mm256_storeu_si256((__m256i *)(y[i].qs + j), _mm256_permutevar8x32_epi32(b, perm));
        }
        for (int g = 0; g < 16; g += 4) {
            const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(gs[g], gs[g + 1]), _mm256_hadd_epi32(gs[g + 2], gs[g + 3]));
            const __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
            _mm_storel_epi64((__m128i *)(y[i].bsums + g), _mm_packs_epi32(s4, s4));
        }
        y[i].d = 1.0f / iscale;
    }
}

/* ======================================================================== */
/* The table                                                                */
/* ======================================================================== */

const el_cpu_type_kernels KQ_TABLE[EL_TYPE_COUNT] = {
    [EL_TYPE_Q4_K] = {EL_TYPE_Q8_K, kq_vec_dot_q4_k, kq_quantize_q8_k, kq_select_q4_k, KQ_GEMM_Q4_K},
    [EL_TYPE_Q2_K] = {EL_TYPE_Q8_K, kq_vec_dot_q2_k, kq_quantize_q8_k, kq_select_q2_k, kq_gemm_q2_k},
    [EL_TYPE_Q3_K] = {EL_TYPE_Q8_K, kq_vec_dot_q3_k, kq_quantize_q8_k, NULL, kq_gemm_q3_k},
    [EL_TYPE_Q5_K] = {EL_TYPE_Q8_K, kq_vec_dot_q5_k, kq_quantize_q8_k, NULL, kq_gemm_q5_k},
    [EL_TYPE_Q6_K] = {EL_TYPE_Q8_K, kq_vec_dot_q6_k, kq_quantize_q8_k, NULL, kq_gemm_q6_k},
    [EL_TYPE_IQ4_XS] = {EL_TYPE_Q8_K, kq_vec_dot_iq4_xs, kq_quantize_q8_k, NULL, kq_gemm_iq4_xs},
};

#endif
