/*
 * quants_x86.h — the x86 SIMD kernels of the 32-element block formats (Q4_0,
 * Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, MXFP4) and of the Q8_0/Q8_1 activation quantizers,
 * written once for two instruction sets. It is included by exactly two files:
 *   quants_avx2.c    (AVX2 + FMA + F16C): integer dots with vpmaddubsw/vpmaddwd;
 *   quants_avx512.c  (+ AVX-512 F/BW/VL + VNNI, QX_VNNI defined): vpdpbusd on
 *                    256- and 512-bit registers, 32 registers for wider tiles.
 * Everything here is static, so each including file gets its own copy compiled
 * for its ISA; nothing is called before kernels.c has checked the CPU.
 *
 * Numerics: the portable kernels (kernels_portable.c) are the specification
 * and every function here gives their bits. Integer block sums are exact in
 * any order (no int16 saturation: see the bounds at each vpmaddubsw); the
 * float operations per output are the portable ones, lane for lane:
 *   Q4_0, IQ4_NL, MXFP4: acc = fma((float)sumi, d_w * d_a, acc), block by block
 *     (MXFP4's d_w = 2^(e - 128));
 *   Q8_0, Q5_0, Q4_1, Q5_1: 8 lanes, lane l = integer sum of elements 4l..4l+3,
 *     acc[l] = fma(d_w * d_a, (float)lane_l, acc[l]); then the x86 horizontal
 *     sum; Q4_1/Q5_1 add summs = fma(m_w, s_a, summs), block by block.
 * The activations are the Q8 blocks the quantizers here (or the portable ones,
 * same bytes) produce: |q| <= 127, which the sign trick of the signed×signed
 * AVX2 dots (Q8_0, IQ4_NL) relies on.
 *
 * Matrix blocks (el_gemm_fn):
 *   - Q4_0/IQ4_NL ("sum" types): QX_GR weight rows (8 with AVX2, 16 in a
 *     512-bit register with VNNI) are transposed so that one register holds 4
 *     consecutive weights of each row; a broadcast of the matching 4
 *     activation bytes and one dot instruction advance QX_GR outputs at once,
 *     and lane r ends with row r's block sum with no horizontal reduction; the
 *     float update is one fma over the rows. Weights are transposed once per
 *     chunk of QX_KC blocks and reused by every activation row of the call.
 *     Q4_0 with 1..3 activation rows (decode): per-row dots, two rows per
 *     register, the lanes of 8 rows summed by three vphaddd, the activation
 *     offset and scale precomputed per call, the next rows prefetched into
 *     L2 (qx_gemm_q4_0_dec); IQ4_NL with one row: qx_gemm_sum_rows, alike.
 *   - Q8_0/Q5_0/Q4_1/Q5_1 ("lane" types): the 8 lanes of the specification are
 *     the 8 int32 lanes of one dot instruction, so a tile of RR weight rows ×
 *     TT activation rows keeps RR·TT accumulators in registers (qx_gemm_lanes).
 *     VNNI with 5 or more activation rows: 16 rows transposed, one
 *     accumulator per lane over 16 rows (qx_gemm_lanes_t). With one
 *     activation row the next rows are prefetched. Q8_0 with 1..4
 *     activation rows: qx_gemm_q8_0_dec, 4 (AVX2) or 8 (VNNI) weight rows
 *     per tile, each weight block loaded once for the activation rows; with
 *     VNNI it takes one row, and Q8_0/Q5_0 with 2..4 (a batched decode step)
 *     go through qx_gemm_pair_dec: 8 weight rows, two a 512-bit register,
 *     unpacked once per block for every activation row.
 *   - MXFP4: groups of 8 weight rows decoded once per chunk for all
 *     activation rows; the 8 rows' block sums reduced together so the fma
 *     runs over 8 lanes (qx_gemm_mxfp4).
 *   Which path runs never changes a result: every path computes the same
 *   per-output operations in the same order.
 *
 * Stack: a gemm call keeps up to ~63 KB of work arrays (transposed chunk,
 * per-row accumulators, a tile's activation corrections); calls larger than
 * QX_RMAX × QX_TMAX are split.
 */
#ifndef EL_BACKEND_CPU_X86_QUANTS_X86_H
#define EL_BACKEND_CPU_X86_QUANTS_X86_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "backend/cpu/kernel_types.h"
#include "package/quants_blocks.h"
#include "util/fp16.h"

#define QX_INLINE static inline __attribute__((always_inline))

/* ---------------------------------------------------------------- helpers */

QX_INLINE float qx_h2f(el_fp16 h) { return _cvtsh_ss(h); } /* exact, as el_fp16_to_fp32 */

QX_INLINE uint32_t qx_load32(const void *p) {
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* _mm256 x86 horizontal sum: (hi128 + lo128), then (r0 + r2) + (r1 + r3). */
QX_INLINE float qx_hsum8(__m256 v) {
    __m128 r = _mm_add_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
    r = _mm_add_ps(r, _mm_movehl_ps(r, r));
    r = _mm_add_ss(r, _mm_movehdup_ps(r));
    return _mm_cvtss_f32(r);
}

QX_INLINE int32_t qx_hsum_i32(__m256i v) {
    __m128i r = _mm_add_epi32(_mm256_extracti128_si256(v, 1), _mm256_castsi256_si128(v));
    r = _mm_add_epi32(r, _mm_unpackhi_epi64(r, r));
    r = _mm_add_epi32(r, _mm_shuffle_epi32(r, 1));
    return _mm_cvtsi128_si32(r);
}

/* 16 bytes of nibbles -> 32 values 0..15: low nibbles (elements 0..15), then high. */
QX_INLINE __m256i qx_unpack4(const uint8_t *qs) {
    const __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
    return _mm256_and_si256(_mm256_srlv_epi64(v, _mm256_set_epi64x(4, 4, 0, 0)), _mm256_set1_epi8(0x0F));
}

/* 32 bits -> 32 bytes, byte j = 0x10 if bit j is set (the 5th bit of Q5_0/Q5_1). */
QX_INLINE __m256i qx_bits_x10(uint32_t qh) {
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303ll, 0x0202020202020202ll, 0x0101010101010101ll, 0);
    const __m256i bm = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), shuf);
    v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bm), bm);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}

QX_INLINE __m256i qx_unpack5(const uint8_t *qs, const uint8_t *qh) {
    return _mm256_or_si256(qx_unpack4(qs), qx_bits_x10(qx_load32(qh)));
}

QX_INLINE __m256i qx_iq4_table(void) {
    return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)kvalues_iq4nl));
}

/*
 * 8 int32 lanes, lane l = acc_l + sum_{j<4} u[4l+j] * s[4l+j], u unsigned and
 * s signed bytes. AVX2: vpmaddubsw then vpmaddwd; exact when every pair
 * u0*s0 + u1*s1 fits int16, i.e. u <= 127 with |s| <= 128 (callers say why).
 */
QX_INLINE __m256i qx_dot4(__m256i acc, __m256i u, __m256i s) {
#if defined(QX_VNNI)
    return _mm256_dpbusd_epi32(acc, u, s);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
#endif
}

/* 8 halves at p[i] + off, in registers (a store/reload of narrow values stalls store forwarding). */
QX_INLINE __m128i qx_gather_h8(const uint8_t *const *p, size_t off) {
    uint16_t h[8];
    for (int i = 0; i < 8; ++i) memcpy(&h[i], p[i] + off, 2);
    __m128i v = _mm_cvtsi32_si128(h[0]);
    v = _mm_insert_epi16(v, h[1], 1);
    v = _mm_insert_epi16(v, h[2], 2);
    v = _mm_insert_epi16(v, h[3], 3);
    v = _mm_insert_epi16(v, h[4], 4);
    v = _mm_insert_epi16(v, h[5], 5);
    v = _mm_insert_epi16(v, h[6], 6);
    return _mm_insert_epi16(v, h[7], 7);
}

/* ---------------------------------------------------------------- quantizers */

#define QX_RNE (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC) /* rintf in the default rounding mode */

/* One block of 32 floats -> 32 int8 (rint(x * id)) in element order; *sum = their sum. */
QX_INLINE __m256i qx_quant32(const float *src, float *d_out, int32_t *sum) {
    const __m256 v0 = _mm256_loadu_ps(src), v1 = _mm256_loadu_ps(src + 8);
    const __m256 v2 = _mm256_loadu_ps(src + 16), v3 = _mm256_loadu_ps(src + 24);
    const __m256 sgn = _mm256_set1_ps(-0.0f);
    __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sgn, v0), _mm256_andnot_ps(sgn, v1)),
                             _mm256_max_ps(_mm256_andnot_ps(sgn, v2), _mm256_andnot_ps(sgn, v3)));
    __m128 m4 = _mm_max_ps(_mm256_extractf128_ps(m, 1), _mm256_castps256_ps128(m));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float amax = _mm_cvtss_f32(m4);
    *d_out = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    const __m256 vid = _mm256_set1_ps(id);
    const __m256i i0 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v0, vid), QX_RNE));
    const __m256i i1 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v1, vid), QX_RNE));
    const __m256i i2 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v2, vid), QX_RNE));
    const __m256i i3 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v3, vid), QX_RNE));
    if (sum) *sum = qx_hsum_i32(_mm256_add_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3)));
    const __m256i b = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
    return _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

static void qx_quantize_q8_0(const float *restrict src, void *dst, int64_t n) {
    block_q8_0 *y = dst;
    for (int64_t i = 0; i < n / EL_QK8_0; ++i, src += EL_QK8_0) {
        float d;
        const __m256i q = qx_quant32(src, &d, NULL);
        y[i].d = el_fp32_to_fp16(d);
        _mm256_storeu_si256((__m256i *)y[i].qs, q);
    }
}

static void qx_quantize_q8_1(const float *restrict src, void *dst, int64_t n) {
    block_q8_1 *y = dst;
    for (int64_t i = 0; i < n / EL_QK8_1; ++i, src += EL_QK8_1) {
        float d;
        int32_t sum;
        const __m256i q = qx_quant32(src, &d, &sum);
        y[i].d = el_fp32_to_fp16(d);
        y[i].s = el_fp32_to_fp16(d * (float)sum);
        _mm256_storeu_si256((__m256i *)y[i].qs, q);
    }
}

/* ---------------------------------------------------------------- vec_dot */

/* Q4_0: sumi = sum (n - 8) * a; pairs (n - 8)a: maddubs(n, a) - maddubs(8, a), each <= 15*128*2. */
static void qx_vec_dot_q4_0(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q4_0 *restrict x = vx;
    const block_q8_0 *restrict y = vy;
    const int nb = n / EL_QK8_0;
    float acc = 0.0f;
    for (int ib = 0; ib < nb; ++ib) {
        const __m256i u = qx_unpack4(x[ib].qs);
        const __m256i a = _mm256_loadu_si256((const __m256i *)y[ib].qs);
#if defined(QX_VNNI)
        const __m256i l = _mm256_sub_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), u, a),
                                           _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(8), a));
#else
        const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(u, a), _mm256_maddubs_epi16(_mm256_set1_epi8(8), a));
        const __m256i l = _mm256_madd_epi16(p, _mm256_set1_epi16(1));
#endif
        const int32_t sumi = qx_hsum_i32(l);
        acc = _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss((float)sumi), _mm_set_ss(qx_h2f(x[ib].d) * qx_h2f(y[ib].d)),
                                         _mm_set_ss(acc)));
    }
    *s = acc;
}

/* IQ4_NL: code values v in [-127, 113]; |v| * sign(a, v) (|a| <= 127): pairs <= 2*127*127. */
static void qx_vec_dot_iq4_nl(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_iq4_nl *restrict x = vx;
    const block_q8_0 *restrict y = vy;
    const int nb = n / EL_QK8_0;
    const __m256i tab = qx_iq4_table();
    float acc = 0.0f;
    for (int ib = 0; ib < nb; ++ib) {
        const __m256i v = _mm256_shuffle_epi8(tab, qx_unpack4(x[ib].qs));
        const __m256i a = _mm256_loadu_si256((const __m256i *)y[ib].qs);
        const __m256i l = qx_dot4(_mm256_setzero_si256(), _mm256_abs_epi8(v), _mm256_sign_epi8(a, v));
        const int32_t sumi = qx_hsum_i32(l);
        acc = _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss((float)sumi), _mm_set_ss(qx_h2f(x[ib].d) * qx_h2f(y[ib].d)),
                                         _mm_set_ss(acc)));
    }
    *s = acc;
}

/* MXFP4: doubled E2M1 codes v in [-12, 12], as IQ4_NL: |v| * sign(a, v), pairs <= 2*12*127;
 * the block scale 2^(e - 128) (el_e8m0_to_fp32_half) times d_a, exact. */
static void qx_vec_dot_mxfp4(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_mxfp4 *restrict x = vx;
    const block_q8_0 *restrict y = vy;
    const int nb = n / EL_QK8_0;
    const __m256i tab = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)kvalues_mxfp4));
    float acc = 0.0f;
    for (int ib = 0; ib < nb; ++ib) {
        const __m256i v = _mm256_shuffle_epi8(tab, qx_unpack4(x[ib].qs));
        const __m256i a = _mm256_loadu_si256((const __m256i *)y[ib].qs);
        const __m256i l = qx_dot4(_mm256_setzero_si256(), _mm256_abs_epi8(v), _mm256_sign_epi8(a, v));
        const int32_t sumi = qx_hsum_i32(l);
        acc = _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss((float)sumi),
                                         _mm_set_ss(el_e8m0_to_fp32_half(x[ib].e) * qx_h2f(y[ib].d)), _mm_set_ss(acc)));
    }
    *s = acc;
}

/* Q8_0: |w| * sign(a, w): |w| <= 128, |a| <= 127, pairs <= 2*128*127. */
static void qx_vec_dot_q8_0(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q8_0 *restrict x = vx;
    const block_q8_0 *restrict y = vy;
    const int nb = n / EL_QK8_0;
    __m256 acc = _mm256_setzero_ps();
    for (int ib = 0; ib < nb; ++ib) {
        const __m256i w = _mm256_loadu_si256((const __m256i *)x[ib].qs);
        const __m256i a = _mm256_loadu_si256((const __m256i *)y[ib].qs);
        const __m256i l = qx_dot4(_mm256_setzero_si256(), _mm256_abs_epi8(w), _mm256_sign_epi8(a, w));
        const __m256 d = _mm256_set1_ps(qx_h2f(x[ib].d) * qx_h2f(y[ib].d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(l), acc);
    }
    *s = qx_hsum8(acc);
}

/* Q5_0: lanes of (u - 16) * a, u in 0..31: maddubs(u, a) - maddubs(16, a), pairs <= 2*31*128. */
static void qx_vec_dot_q5_0(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q5_0 *restrict x = vx;
    const block_q8_0 *restrict y = vy;
    const int nb = n / EL_QK8_0;
    __m256 acc = _mm256_setzero_ps();
    for (int ib = 0; ib < nb; ++ib) {
        const __m256i u = qx_unpack5(x[ib].qs, x[ib].qh);
        const __m256i a = _mm256_loadu_si256((const __m256i *)y[ib].qs);
        const __m256i l = _mm256_sub_epi32(qx_dot4(_mm256_setzero_si256(), u, a),
                                           qx_dot4(_mm256_setzero_si256(), _mm256_set1_epi8(16), a));
        const __m256 d = _mm256_set1_ps(qx_h2f(x[ib].d) * qx_h2f(y[ib].d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(l), acc);
    }
    *s = qx_hsum8(acc);
}

/* Q4_1/Q5_1: lanes of u * a (u <= 31), plus summs = fma(m_w, s_a, summs). */
static void qx_vec_dot_q4_1(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q4_1 *restrict x = vx;
    const block_q8_1 *restrict y = vy;
    const int nb = n / EL_QK8_1;
    __m256 acc = _mm256_setzero_ps();
    __m128 summs = _mm_setzero_ps();
    for (int ib = 0; ib < nb; ++ib) {
        summs = _mm_fmadd_ss(_mm_set_ss(qx_h2f(x[ib].m)), _mm_set_ss(qx_h2f(y[ib].s)), summs);
        const __m256i u = qx_unpack4(x[ib].qs);
        const __m256i a = _mm256_loadu_si256((const __m256i *)y[ib].qs);
        const __m256i l = qx_dot4(_mm256_setzero_si256(), u, a);
        const __m256 d = _mm256_set1_ps(qx_h2f(x[ib].d) * qx_h2f(y[ib].d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(l), acc);
    }
    *s = qx_hsum8(acc) + _mm_cvtss_f32(summs);
}

static void qx_vec_dot_q5_1(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    const block_q5_1 *restrict x = vx;
    const block_q8_1 *restrict y = vy;
    const int nb = n / EL_QK8_1;
    __m256 acc = _mm256_setzero_ps();
    __m128 summs = _mm_setzero_ps();
    for (int ib = 0; ib < nb; ++ib) {
        summs = _mm_fmadd_ss(_mm_set_ss(qx_h2f(x[ib].m)), _mm_set_ss(qx_h2f(y[ib].s)), summs);
        const __m256i u = qx_unpack5(x[ib].qs, x[ib].qh);
        const __m256i a = _mm256_loadu_si256((const __m256i *)y[ib].qs);
        const __m256i l = qx_dot4(_mm256_setzero_si256(), u, a);
        const __m256 d = _mm256_set1_ps(qx_h2f(x[ib].d) * qx_h2f(y[ib].d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(l), acc);
    }
    *s = qx_hsum8(acc) + _mm_cvtss_f32(summs);
}

/* ---------------------------------------------------------------- gemm */

enum { QX_Q4_0, QX_Q4_1, QX_Q5_0, QX_Q5_1, QX_Q8_0, QX_IQ4_NL, QX_MXFP4 };

/* Limits of one call's work arrays; larger blocks are split (results do not depend on it). */
#define QX_KC 32   /* weight blocks per transposed chunk ("sum" types) */
#define QX_TMAX 64 /* activation rows */
#define QX_RMAX 64 /* weight rows */

typedef void (*qx_gemm_body)(int k, const uint8_t *w, size_t ldw, int nr, const uint8_t *x, size_t ldx, int nt,
                             float *y, size_t ldy);

/* Splits a gemm call into pieces of at most QX_RMAX rows × QX_TMAX activation rows. */
static void qx_gemm_split(qx_gemm_body body, int k, const void *w, size_t ldw, int nr, const void *x, size_t ldx,
                          int nt, float *y, size_t ldy) {
    for (int t = 0; t < nt; t += QX_TMAX)
        for (int r = 0; r < nr; r += QX_RMAX)
            body(k, (const uint8_t *)w + ldw * (size_t)r, ldw, nr - r < QX_RMAX ? nr - r : QX_RMAX,
                 (const uint8_t *)x + ldx * (size_t)t, ldx, nt - t < QX_TMAX ? nt - t : QX_TMAX,
                 y + ldy * (size_t)t + r, ldy);
}

/* ---- "sum" types: Q4_0, IQ4_NL ---- */

/*
 * One transposed block of 8 rows: register j, dword r = weights 4j..4j+3 of
 * row r as the dot's unsigned operand (lo nibbles are elements 0..15, hi
 * nibbles 16..31, so register j pairs with activation bytes 4j..4j+3).
 * Q4_0: nibbles 0..15 (true weight n - 8). IQ4_NL: code + 128 (VNNI only).
 */
QX_INLINE void qx_transpose8(int type, const uint8_t *const *q, __m256i *out) {
    __m256i A[4];
    for (int i = 0; i < 4; ++i)
        A[i] = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)q[i])),
                                       _mm_loadu_si128((const __m128i *)q[i + 4]), 1);
    const __m256i t0 = _mm256_unpacklo_epi32(A[0], A[1]), t1 = _mm256_unpackhi_epi32(A[0], A[1]);
    const __m256i t2 = _mm256_unpacklo_epi32(A[2], A[3]), t3 = _mm256_unpackhi_epi32(A[2], A[3]);
    const __m256i Q[4] = {_mm256_unpacklo_epi64(t0, t2), _mm256_unpackhi_epi64(t0, t2),
                          _mm256_unpacklo_epi64(t1, t3), _mm256_unpackhi_epi64(t1, t3)};
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int c = 0; c < 4; ++c) {
        out[c] = _mm256_and_si256(Q[c], m4);
        out[c + 4] = _mm256_and_si256(_mm256_srli_epi16(Q[c], 4), m4);
    }
    if (type == QX_IQ4_NL) {
        const __m256i tab = _mm256_add_epi8(qx_iq4_table(), _mm256_set1_epi8((char)0x80));
        for (int j = 0; j < 8; ++j) out[j] = _mm256_shuffle_epi8(tab, out[j]);
    }
}

/*
 * A group of QX_GR weight rows is one vector of int32 lanes: 16 rows in a
 * 512-bit register with VNNI (two transposed 8-row halves), 8 rows in a
 * 256-bit register with AVX2.
 */
#if defined(QX_VNNI)
#define QX_HAS_VNNI 1
#define QX_GR 16
#define QX_SUM_TT 8
#ifndef QX_SUM_MIN_NT
#define QX_SUM_MIN_NT 2 /* fewer activation rows: qx_gemm_sum_rows */
#endif
typedef __m512i qx_vi;
typedef __m512 qx_vf;
#define QX_VI_LOAD(p) _mm512_load_si512(p)
#define QX_VI_SET1(x) _mm512_set1_epi32(x)
#define QX_VF_ZERO() _mm512_setzero_ps()
#define QX_VF_LOAD(p) _mm512_load_ps(p)
#define QX_VF_STORE(p, v) _mm512_store_ps(p, v)
#define QX_VF_SET1(x) _mm512_set1_ps(x)
#define QX_VF_MUL(a, b) _mm512_mul_ps(a, b)
#define QX_VF_FMADD(a, b, c) _mm512_fmadd_ps(a, b, c)
#define QX_VF_CVT(a) _mm512_cvtepi32_ps(a)
#else
#define QX_HAS_VNNI 0
#define QX_GR 8
#ifndef QX_SUM_TT
#define QX_SUM_TT 4
#endif
#ifndef QX_SUM_MIN_NT
#define QX_SUM_MIN_NT 2 /* one activation row: qx_gemm_sum_rows (it prefetches) */
#endif
typedef __m256i qx_vi;
typedef __m256 qx_vf;
#define QX_VI_LOAD(p) _mm256_load_si256(p)
#define QX_VI_SET1(x) _mm256_set1_epi32(x)
#define QX_VF_ZERO() _mm256_setzero_ps()
#define QX_VF_LOAD(p) _mm256_load_ps(p)
#define QX_VF_STORE(p, v) _mm256_store_ps(p, v)
#define QX_VF_SET1(x) _mm256_set1_ps(x)
#define QX_VF_MUL(a, b) _mm256_mul_ps(a, b)
#define QX_VF_FMADD(a, b, c) _mm256_fmadd_ps(a, b, c)
#define QX_VF_CVT(a) _mm256_cvtepi32_ps(a)
#endif

typedef int32_t qx_i32u __attribute__((aligned(1), may_alias));

#if defined(QX_VNNI)
/* acc += dot4(u, broadcast of the 4 signed bytes at p): vpdpbusd with an
 * embedded {1to16} broadcast, which compilers do not form from the intrinsics. */
QX_INLINE __m512i qx_dpbusd_bcast(__m512i acc, __m512i u, const uint8_t *p) {
    __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(u), "m"(*(const qx_i32u *)p));
    return acc;
}
#endif

/*
 * TT activation rows against one transposed chunk of QX_GR weight rows:
 * acc[t] (lane r = row r) = fma((float)sumi, d_w[r] * d_a, acc[t]) block by block.
 * sumi = dot(u, a) + corr, corr = -8 * sum(a) (Q4_0) or -128 * sum(a) (IQ4_NL).
 * AVX2 (Q4_0 only): 8 vpmaddubsw summed in int16 (each pair <= 2*15*128, 8 of
 * them <= 30720) before one vpmaddwd.
 */
QX_INLINE void qx_sum_tile(int TT, const qx_vi *wb, const qx_vf *dwb, int kc, const uint8_t *x, size_t ldx,
                           const int32_t *corr, const float *da, float *acc_io, int first) {
    qx_vf acc[QX_SUM_TT];
    for (int t = 0; t < TT; ++t) acc[t] = first ? QX_VF_ZERO() : QX_VF_LOAD(acc_io + QX_GR * t);
    for (int b = 0; b < kc; ++b) {
        qx_vi s[QX_SUM_TT];
        const uint8_t *xb = x + 34 * b + 2;
#if defined(QX_VNNI)
        for (int t = 0; t < TT; ++t) s[t] = QX_VI_SET1(corr[t * QX_KC + b]);
        for (int j = 0; j < 8; ++j) {
            const qx_vi w = QX_VI_LOAD(wb + 8 * b + j);
            for (int t = 0; t < TT; ++t)
                s[t] = qx_dpbusd_bcast(s[t], w, xb + ldx * t + 4 * j);
        }
#else
        for (int t = 0; t < TT; ++t) s[t] = _mm256_setzero_si256();
        for (int j = 0; j < 8; ++j) {
            const qx_vi w = QX_VI_LOAD(wb + 8 * b + j);
            for (int t = 0; t < TT; ++t)
                s[t] = _mm256_add_epi16(s[t], _mm256_maddubs_epi16(w, QX_VI_SET1(*(const qx_i32u *)(xb + ldx * t + 4 * j))));
        }
        for (int t = 0; t < TT; ++t)
            s[t] = _mm256_add_epi32(_mm256_madd_epi16(s[t], _mm256_set1_epi16(1)), _mm256_set1_epi32(corr[t * QX_KC + b]));
#endif
        const qx_vf dw = dwb[b];
        for (int t = 0; t < TT; ++t)
            acc[t] = QX_VF_FMADD(QX_VF_CVT(s[t]), QX_VF_MUL(dw, QX_VF_SET1(da[t * QX_KC + b])), acc[t]);
    }
    for (int t = 0; t < TT; ++t) QX_VF_STORE(acc_io + QX_GR * t, acc[t]);
}

/* Transposes block b of the QX_GR rows rp[] into wb[8], their scales into *dw. */
QX_INLINE void qx_sum_pack(int type, const uint8_t *const *rp, int b, qx_vi *wb, qx_vf *dw) {
    const uint8_t *q[QX_GR];
    for (int i = 0; i < QX_GR; ++i) q[i] = rp[i] + 18 * b + 2;
#if defined(QX_VNNI)
    __m256i lo[8], hi[8];
    qx_transpose8(type, q, lo);
    qx_transpose8(type, q + 8, hi);
    for (int j = 0; j < 8; ++j) wb[j] = _mm512_inserti64x4(_mm512_castsi256_si512(lo[j]), hi[j], 1);
    *dw = _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(qx_gather_h8(q, (size_t)-2)),
                                                  qx_gather_h8(q + 8, (size_t)-2), 1));
#else
    qx_transpose8(type, q, wb);
    *dw = _mm256_cvtph_ps(qx_gather_h8(q, (size_t)-2));
#endif
}

/*
 * Decode streams each weight row once, a few rows at a time; rows are short
 * (a few dozen cache lines), too short for the hardware prefetcher to ramp
 * up on each. So while a group of rows is computed, the contiguous bytes of
 * the next group ([next, next + bytes)) are prefetched, spread evenly over the
 * nb block steps. Past the block's last row this touches the rows the next
 * call will read (or nothing useful); prefetches never fault.
 */
/* Cache lines a block step prefetches so that nb steps cover `bytes`. */
QX_INLINE size_t qx_pf_lines(size_t bytes, int nb) { return (bytes + 64 * (size_t)nb - 1) / (64 * (size_t)nb); }

QX_INLINE void qx_prefetch_next(const uint8_t *next, size_t bytes, int b, int nb) {
    const size_t per = qx_pf_lines(bytes, nb);
    for (size_t i = 0; i < per; ++i) {
        const size_t off = 64 * ((size_t)b * per + i);
        if (off < bytes) _mm_prefetch((const char *)(next + off), _MM_HINT_T0);
    }
}

/*
 * Few activation rows (decode): no transposed copy. Two weight rows share a
 * 256-bit register (row r in the low 128 bits, row r + 1 in the high ones):
 * low nibbles against activation bytes 0..15, high nibbles against 16..31,
 * both halves broadcast, so lanes 0..3 hold row r's partial sums and lanes
 * 4..7 row r + 1's. Three vphaddd over 4 such registers leave the 8 block
 * sums in the lane order 0, 2, 4, 6, 1, 3, 5, 7 (the scales are gathered in
 * that order, the result permuted once at the end); then acc = fma(sumi,
 * d_w * d_a, acc) as in qx_sum_tile.
 */
static const int qx_rows_order[8] = {0, 2, 4, 6, 1, 3, 5, 7};

QX_INLINE void qx_gemm_sum_rows(int type, int k, const uint8_t *w, size_t ldw, int nr, const uint8_t *x, size_t ldx,
                                int nt, float *y, size_t ldy) {
    const int nb = k / 32;
    static const uint8_t zero_row[18]; /* a zero block for the rows past nr */
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i tab = _mm256_add_epi8(qx_iq4_table(), _mm256_set1_epi8((char)0x80)); /* VNNI: code + 128 */
    const __m256i tab_s = qx_iq4_table();                                                /* AVX2: signed codes */
    (void)tab, (void)tab_s;
    const __m256i offb = _mm256_set1_epi8(type == QX_Q4_0 ? 8 : (char)0x80);
    for (int g = 0; g < nr; g += 8) {
        const uint8_t *rp[8];
        for (int i = 0; i < 8; ++i) rp[i] = g + i < nr ? w + ldw * (size_t)(g + i) : NULL;
        for (int t = 0; t < nt; ++t) {
            const block_q8_0 *xa = (const block_q8_0 *)(x + ldx * (size_t)t);
            __m256 acc = _mm256_setzero_ps();
            for (int b = 0; b < nb; ++b) {
                if (t == 0) qx_prefetch_next(w + ldw * (size_t)(g + 8), 8 * ldw, b, nb);
                const __m256i alo = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)xa[b].qs));
                const __m256i ahi = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(xa[b].qs + 16)));
                const uint8_t *bp[8], *bo[8];
                for (int i = 0; i < 8; ++i) bp[i] = rp[i] ? rp[i] + 18 * (size_t)b : zero_row;
                for (int i = 0; i < 8; ++i) bo[i] = bp[qx_rows_order[i]];
#if defined(QX_VNNI)
                const __m256i c = _mm256_sub_epi32(_mm256_setzero_si256(),
                                                   _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), offb, alo), offb, ahi));
#else
                /* Q4_0 pairs: (lo + hi) * a - 8 * (a_lo + a_hi) pairs, each term <= 2*15*128 */
                const __m256i c16 = _mm256_add_epi16(_mm256_maddubs_epi16(offb, alo), _mm256_maddubs_epi16(offb, ahi));
#endif
                __m256i L[4];
                for (int i = 0; i < 4; ++i) {
                    const __m256i v = _mm256_inserti128_si256(
                        _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(bp[2 * i] + 2))),
                        _mm_loadu_si128((const __m128i *)(bp[2 * i + 1] + 2)), 1);
                    __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
#if defined(QX_VNNI)
                    if (type == QX_IQ4_NL) {
                        lo = _mm256_shuffle_epi8(tab, lo);
                        hi = _mm256_shuffle_epi8(tab, hi);
                    }
                    L[i] = _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(c, lo, alo), hi, ahi);
#else
                    if (type == QX_IQ4_NL) { /* signed codes: |v| * sign(a, v), pairs <= 2*127*127 */
                        lo = _mm256_shuffle_epi8(tab_s, lo);
                        hi = _mm256_shuffle_epi8(tab_s, hi);
                        L[i] = qx_dot4(qx_dot4(_mm256_setzero_si256(), _mm256_abs_epi8(lo), _mm256_sign_epi8(alo, lo)),
                                       _mm256_abs_epi8(hi), _mm256_sign_epi8(ahi, hi));
                    } else {
                        const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(lo, alo), _mm256_maddubs_epi16(hi, ahi));
                        L[i] = _mm256_madd_epi16(_mm256_sub_epi16(p, c16), _mm256_set1_epi16(1));
                    }
#endif
                }
                const __m256i sumi = _mm256_hadd_epi32(_mm256_hadd_epi32(L[0], L[1]), _mm256_hadd_epi32(L[2], L[3]));
                const __m256 dw = _mm256_cvtph_ps(qx_gather_h8(bo, 0));
                const __m256 dd = _mm256_mul_ps(dw, _mm256_set1_ps(qx_h2f(xa[b].d)));
                acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), dd, acc);
            }
            /* lanes 0..7 hold rows 0, 2, 4, 6, 1, 3, 5, 7 */
            _Alignas(32) float out[8];
            _mm256_store_ps(out, _mm256_permutevar8x32_ps(acc, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
            memcpy(y + ldy * (size_t)t + g, out, sizeof(float) * (size_t)(nr - g < 8 ? nr - g : 8));
        }
    }
}

#define QX_DEC_NBMAX 512 /* activation blocks precomputed on the stack (k <= 16384) */
/* Q4_0 activation rows one qx_q4_0_rows8 call takes: a batched decode step
 * (runtime/batch.h) of up to 8 streams unpacks each weight block once for all
 * of them; VNNI's 32 registers hold the 8 accumulators, AVX2 keeps 3. */
#if defined(QX_VNNI)
#define QX_DEC_TT 8
#else
#define QX_DEC_TT 3
#endif
/*
 * Decode prefetch: the next group of rows, spread over the block steps, into
 * L1 when the group is at most 8 KB, else into L2 (_MM_HINT_T1): a larger
 * group prefetched into L1 beside the one being read evicts it. Streaming
 * rows from an mmapped file on one core (2 alternating rounds, GB/s):
 *   Q8_0 k = 640 (8-row group 5.4 KB):  this 23.0, 21.6; before 15.2, 17.3
 *   Q8_0 k = 2048 (17 KB):               this 22.8, 21.7; before 11.7, 9.5
 *   Q4_0 k = 2048 (9.2 KB):              this 19.5, 19.4; before 9.2, 16.9
 * (all-L2 ran Q8_0 k = 640 at 14-16; all-L1 ran Q8_0 k = 2048 at 9-11 and
 * Q4_0 at 10-12; prefetching 2 or 4 groups ahead or with NTA was not better.)
 * Those figures are from an earlier machine. On AMD EPYC Zen 4 the Q8_0
 * decode groups go into L2, 16 KB ahead (qx_gemm_q8_0_dec); Q4_0 keeps this
 * rule there (Q4_0 k = 1,536 in L2: 14.6-16.7 GB/s, in L1: 19.0-19.5).
 */
#ifndef QX_PF_HINT
#define QX_PF_HINT _MM_HINT_T1
#endif

/* Groups of at most this many bytes fit in L1 beside the group being read (Q4_0's rule). */
#define QX_PF_L1_SMALL 8192

/* How far ahead the Q8_0 and Q5_0 decode kernels prefetch into L2: at least
 * QX_DEC_AHEAD bytes past a group's start, in whole groups of `group` bytes
 * (qx_gemm_q8_0_dec says why). */
#ifndef QX_DEC_AHEAD
#define QX_DEC_AHEAD 16384
#endif
QX_INLINE size_t qx_dec_ahead(size_t group) { return group * ((QX_DEC_AHEAD + group - 1) / group); }

/* Prefetch step b of [next, next + bytes), per lines a step: into L1 when the
 * group is at most l1_max bytes (a constant: QX_PF_L1_SMALL, or 0: always
 * L2), else L2. */
QX_INLINE void qx_dec_prefetch(const uint8_t *next, size_t bytes, size_t per, int b, size_t l1_max) {
    for (size_t i = 0; i < per; ++i) {
        const size_t off = 64 * ((size_t)b * per + i);
        if (off >= bytes) break;
        if (bytes <= l1_max)
            _mm_prefetch((const char *)(next + off), _MM_HINT_T0);
        else
            _mm_prefetch((const char *)(next + off), QX_PF_HINT);
    }
}

/*
 * Q4_0 decode, 8 full weight rows (same bits as qx_gemm_sum_rows):
 * qx_q4_0_row1x8 for one activation row, qx_q4_0_rows8 for TT = 2 or 3, the
 * nibbles and scales of a block unpacked once for the TT rows. Per call the
 * activation side is precomputed once per block: corr[b] = -8 * sum(a_b)
 * (the nibble offset, added to the exact integer block sums after the
 * vphaddd tree) and da[b] = d_a. The 8 rows'
 * fp16 scales come from the same two-rows-per-register loads as the nibbles,
 * one 16-byte load earlier (scale at word 0 of each 128-bit lane), packed by
 * two unpacks and a permute into the lane order 0, 2, 4, 6, 1, 3, 5, 7.
 * AVX2 int16 pairs: lo*a + hi*a' <= 2 * 2*15*127 = 7620, no saturation.
 */
QX_INLINE __m256 qx_q4_0_row1x8(int nb, const uint8_t *w, size_t ldw, const block_q8_0 *xa, const int32_t *corr,
                               const float *da, const uint8_t *next, size_t per) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256 acc = _mm256_setzero_ps();
    for (int b = 0; b < nb; ++b) {
        qx_dec_prefetch(next, per ? 8 * ldw : 0, per, b, QX_PF_L1_SMALL);
        const uint8_t *p = w + 18 * (size_t)b;
        const __m256i alo = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)xa[b].qs));
        const __m256i ahi = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(xa[b].qs + 16)));
        __m256i L[4], D[4];
        for (int i = 0; i < 4; ++i) {
            const uint8_t *r0 = p + ldw * (size_t)(2 * i), *r1 = r0 + ldw;
            const __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(r0 + 2))),
                                                      _mm_loadu_si128((const __m128i *)(r1 + 2)), 1);
            D[i] = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)r0)),
                                           _mm_loadu_si128((const __m128i *)r1), 1);
            const __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
#if defined(QX_VNNI)
            L[i] = _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), lo, alo), hi, ahi);
#else
            L[i] = _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(lo, alo), _mm256_maddubs_epi16(hi, ahi)),
                                     _mm256_set1_epi16(1));
#endif
        }
        const __m256i sumi = _mm256_add_epi32(
            _mm256_hadd_epi32(_mm256_hadd_epi32(L[0], L[1]), _mm256_hadd_epi32(L[2], L[3])), _mm256_set1_epi32(corr[b]));
        const __m256i dh = _mm256_unpacklo_epi32(_mm256_unpacklo_epi16(D[0], D[1]), _mm256_unpacklo_epi16(D[2], D[3]));
        const __m256 dw = _mm256_cvtph_ps(_mm256_castsi256_si128(_mm256_permute4x64_epi64(dh, 0x08)));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), _mm256_mul_ps(dw, _mm256_set1_ps(da[b])), acc);
    }
    return _mm256_permutevar8x32_ps(acc, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

QX_INLINE void qx_q4_0_rows8(int TT, int nb, const uint8_t *w, size_t ldw, const uint8_t *x, size_t ldx,
                             const int32_t *corr, const float *da, const uint8_t *next, size_t per, float *y,
                             size_t ldy) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256 acc[QX_DEC_TT];
    for (int t = 0; t < TT; ++t) acc[t] = _mm256_setzero_ps();
    for (int b = 0; b < nb; ++b) {
        qx_dec_prefetch(next, per ? 8 * ldw : 0, per, b, QX_PF_L1_SMALL);
        const uint8_t *p = w + 18 * (size_t)b;
        __m256i lo[4], hi[4], D[4];
        for (int i = 0; i < 4; ++i) {
            const uint8_t *r0 = p + ldw * (size_t)(2 * i), *r1 = r0 + ldw;
            const __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(r0 + 2))),
                                                      _mm_loadu_si128((const __m128i *)(r1 + 2)), 1);
            D[i] = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)r0)),
                                           _mm_loadu_si128((const __m128i *)r1), 1);
            lo[i] = _mm256_and_si256(v, m4);
            hi[i] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
        }
        const __m256i dh = _mm256_unpacklo_epi32(_mm256_unpacklo_epi16(D[0], D[1]), _mm256_unpacklo_epi16(D[2], D[3]));
        const __m256 dw = _mm256_cvtph_ps(_mm256_castsi256_si128(_mm256_permute4x64_epi64(dh, 0x08)));
        for (int t = 0; t < TT; ++t) {
            const block_q8_0 *xb = (const block_q8_0 *)(x + ldx * (size_t)t) + b;
            const __m256i alo = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)xb->qs));
            const __m256i ahi = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(xb->qs + 16)));
            __m256i L[4];
            for (int i = 0; i < 4; ++i) {
#if defined(QX_VNNI)
                L[i] = _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), lo[i], alo), hi[i], ahi);
#else
                L[i] = _mm256_madd_epi16(
                    _mm256_add_epi16(_mm256_maddubs_epi16(lo[i], alo), _mm256_maddubs_epi16(hi[i], ahi)),
                    _mm256_set1_epi16(1));
#endif
            }
            const __m256i sumi =
                _mm256_add_epi32(_mm256_hadd_epi32(_mm256_hadd_epi32(L[0], L[1]), _mm256_hadd_epi32(L[2], L[3])),
                                 _mm256_set1_epi32(corr[QX_DEC_NBMAX * t + b]));
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), _mm256_mul_ps(dw, _mm256_set1_ps(da[QX_DEC_NBMAX * t + b])),
                                     acc[t]);
        }
    }
    for (int t = 0; t < TT; ++t)
        _mm256_storeu_ps(y + ldy * (size_t)t, _mm256_permutevar8x32_ps(acc[t], _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
}

#if defined(QX_VNNI)
#ifndef QX_DEC16_MIN
#define QX_DEC16_MIN 2 /* activation rows from which qx_q4_0_rows16 takes pairs of 8-row groups */
#endif
/* Four 16-byte loads as the four 128-bit lanes of one register. */
QX_INLINE __m512i qx_ld4x128(const uint8_t *a, const uint8_t *b, const uint8_t *c, const uint8_t *d) {
    __m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)a));
    v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)b), 1);
    v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)c), 2);
    return _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)d), 3);
}

/*
 * Q4_0 decode, 16 full weight rows × TT (4..QX_DEC_TT) activation rows, on
 * 512-bit registers (a batched decode step, runtime/batch.h). Per block the 16
 * rows' nibbles are unpacked and transposed once into 8 "row lane" registers
 * W[g] (int32 lane q = 4j + m: the 4 quants of group g of row 4m + j; groups
 * 0..3 are the low nibbles = weights 0..15, 4..7 the high ones = weights
 * 16..31): four rows per register by 128-bit lane loads, then a 4×4 dword
 * transpose inside each 128-bit lane (unpack 32/64). Each activation row then
 * costs 8 vpdpbusd with an embedded broadcast of its 4 bytes of that group
 * (two chains, summed) and no horizontal reduction: every lane is one output.
 * The block sums are exact integers in any order; per output the float
 * operations are qx_q4_0_rows8's (and so qx_gemm_sum_rows'): acc =
 * fma(float(sumi + corr), d_w * d_a, acc) block after block — the same bits.
 * The accumulators are put back in row order once at the end. Against a
 * reduction tree per activation row (register i = rows 4i..4i+3, dot, then
 * unpack/add to one sum per lane) this is 12 instead of 21 vector operations
 * per activation row and block, for the transposing shuffles per block shared
 * by all TT rows. Those are 8, not 16: the quant bytes are transposed before
 * the nibble split (bytewise, so it commutes with a dword shuffle), and the
 * 16 fp16 scales come from one dword gather in W's lane order (vpmovdw keeps
 * each dword's low word, the scale) instead of 16 lane loads, 3 unpacks and a
 * permute. batch-kbench (2048 x 16896, one thread, CPU time, same bits), this
 * against the form before (16 shuffles, scales by lane loads), alternating:
 * 2 rows 0.90x, 3 rows 0.92x, 4 rows 0.96x, 8 rows 0.94x; with the rows in L2
 * (2048 x 512) 2-4 rows 0.93-0.95x. One dependency chain per activation row
 * instead of two was 7-27 % slower (the dots' latency), four chains no better
 * than two.
 */
QX_INLINE void qx_q4_0_rows16(int TT, int nb, const uint8_t *w, size_t ldw, const uint8_t *x, size_t ldx,
                              const int32_t *corr, const float *da, const uint8_t *next, size_t per, float *y,
                              size_t ldy) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    /* lane q of W holds row 4 (q % 4) + q / 4: the scale gather's byte offsets, in that order */
    const __m512i sidx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15),
                                            _mm512_set1_epi32((int)ldw));
    __m512 acc[QX_DEC_TT];
    for (int t = 0; t < TT; ++t) acc[t] = _mm512_setzero_ps();
    for (int b = 0; b < nb; ++b) {
        qx_dec_prefetch(next, per ? 16 * ldw : 0, per, b, QX_PF_L1_SMALL);
        const uint8_t *p = w + 18 * (size_t)b;
        __m512i v[4];
        for (int i = 0; i < 4; ++i) {
            const uint8_t *r0 = p + ldw * (size_t)(4 * i), *r1 = r0 + ldw, *r2 = r1 + ldw, *r3 = r2 + ldw;
            v[i] = qx_ld4x128(r0 + 2, r1 + 2, r2 + 2, r3 + 2); /* lane m: the 16 quant bytes of row 4i + m */
        }
        /* within each 128-bit lane m: dword i of T[g] = dword g of v[i] (row 4i + m); the nibble split
         * below is bytewise, so it commutes with this dword transpose (done once for both halves) */
        const __m512i t0 = _mm512_unpacklo_epi32(v[0], v[1]), t1 = _mm512_unpackhi_epi32(v[0], v[1]);
        const __m512i t2 = _mm512_unpacklo_epi32(v[2], v[3]), t3 = _mm512_unpackhi_epi32(v[2], v[3]);
        const __m512i T[4] = {_mm512_unpacklo_epi64(t0, t2), _mm512_unpackhi_epi64(t0, t2), _mm512_unpacklo_epi64(t1, t3),
                              _mm512_unpackhi_epi64(t1, t3)};
        __m512i W[8];
        for (int g = 0; g < 4; ++g) {
            W[g] = _mm512_and_si512(T[g], m4);                             /* weights 4g..4g+3 */
            W[4 + g] = _mm512_and_si512(_mm512_srli_epi16(T[g], 4), m4); /* weights 16 + 4g.. */
        }
        /* the 16 fp16 scales (word 0 of each row's block), gathered in W's lane order */
        const __m512 dw = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_i32gather_epi32(sidx, (const void *)p, 1)));
        for (int t = 0; t < TT; ++t) {
            const uint8_t *xq = (const uint8_t *)((const block_q8_0 *)(x + ldx * (size_t)t) + b)->qs;
            /* group g of the low nibbles pairs with activation bytes 4g..4g+3, of the high ones with 16 + 4g.. */
            __m512i s0 = _mm512_set1_epi32(corr[QX_DEC_NBMAX * t + b]), s1 = _mm512_setzero_si512();
            s0 = qx_dpbusd_bcast(s0, W[0], xq + 0);
            s1 = qx_dpbusd_bcast(s1, W[1], xq + 4);
            s0 = qx_dpbusd_bcast(s0, W[2], xq + 8);
            s1 = qx_dpbusd_bcast(s1, W[3], xq + 12);
            s0 = qx_dpbusd_bcast(s0, W[4], xq + 16);
            s1 = qx_dpbusd_bcast(s1, W[5], xq + 20);
            s0 = qx_dpbusd_bcast(s0, W[6], xq + 24);
            s1 = qx_dpbusd_bcast(s1, W[7], xq + 28);
            const __m512i sumi = _mm512_add_epi32(s0, s1);
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi), _mm512_mul_ps(dw, _mm512_set1_ps(da[QX_DEC_NBMAX * t + b])),
                                     acc[t]);
        }
    }
    /* lane q = 4j + m holds row 4m + j: row r comes from lane 4 (r % 4) + r / 4 */
    const __m512i back = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    for (int t = 0; t < TT; ++t) _mm512_storeu_ps(y + ldy * (size_t)t, _mm512_permutexvar_ps(back, acc[t]));
}
#endif

/* Q4_0, one activation row: full groups of 8 rows through qx_q4_0_row1x8, the rest through qx_gemm_sum_rows. */
QX_INLINE void qx_gemm_q4_0_dec1(int k, const uint8_t *w, size_t ldw, int nr, const uint8_t *x, size_t ldx, int nt,
                                float *y, size_t ldy) {
    const int nb = k / 32;
    if (nb > QX_DEC_NBMAX) {
        qx_gemm_sum_rows(QX_Q4_0, k, w, ldw, nr, x, ldx, nt, y, ldy);
        return;
    }
    const int ng = nr / 8;
    const size_t per = qx_pf_lines(8 * ldw, nb);
    int32_t corr[QX_DEC_NBMAX];
    float da[QX_DEC_NBMAX];
    for (int t = 0; t < nt; ++t) {
        const block_q8_0 *xa = (const block_q8_0 *)(x + ldx * (size_t)t);
        for (int b = 0; b < nb; ++b) {
            const __m256i av = _mm256_loadu_si256((const __m256i *)xa[b].qs);
            corr[b] = -8 * qx_hsum_i32(_mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), av), _mm256_set1_epi16(1)));
            da[b] = qx_h2f(xa[b].d);
        }
        for (int g = 0; g < ng; ++g) {
            const uint8_t *wg = w + ldw * (size_t)(8 * g);
            _mm256_storeu_ps(y + ldy * (size_t)t + 8 * g,
                             qx_q4_0_row1x8(nb, wg, ldw, xa, corr, da, wg + 8 * ldw, t == 0 ? per : 0));
        }
    }
    if (8 * ng < nr)
        qx_gemm_sum_rows(QX_Q4_0, k, w + ldw * (size_t)(8 * ng), ldw, nr - 8 * ng, x, ldx, nt, y + 8 * ng, ldy);
}

/* Q4_0 with 1..QX_DEC_TT activation rows (2..QX_DEC_TT: with VNNI qx_q4_0_rows16 on pairs of 8-row groups, then
 * qx_q4_0_rows8 on a full group left, the rest qx_gemm_sum_rows). */
QX_INLINE void qx_gemm_q4_0_dec(int k, const uint8_t *w, size_t ldw, int nr, const uint8_t *x, size_t ldx, int nt,
                                float *y, size_t ldy) {
    if (nt == 1) { /* separate, 4 % faster in cache than the TT = 1 instance below */
        qx_gemm_q4_0_dec1(k, w, ldw, nr, x, ldx, nt, y, ldy);
        return;
    }
    const int nb = k / 32;
    if (nb > QX_DEC_NBMAX || nt > QX_DEC_TT) {
        qx_gemm_sum_rows(QX_Q4_0, k, w, ldw, nr, x, ldx, nt, y, ldy);
        return;
    }
    const int ng = nr / 8;
    const size_t per = qx_pf_lines(8 * ldw, nb);
    int32_t corr[QX_DEC_TT * QX_DEC_NBMAX];
    float da[QX_DEC_TT * QX_DEC_NBMAX];
    for (int t = 0; t < nt; ++t) {
        const block_q8_0 *xa = (const block_q8_0 *)(x + ldx * (size_t)t);
        for (int b = 0; b < nb; ++b) {
            const __m256i av = _mm256_loadu_si256((const __m256i *)xa[b].qs);
            corr[QX_DEC_NBMAX * t + b] =
                -8 * qx_hsum_i32(_mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), av), _mm256_set1_epi16(1)));
            da[QX_DEC_NBMAX * t + b] = qx_h2f(xa[b].d);
        }
    }
    int g = 0;
#if defined(QX_VNNI)
    if (nt >= QX_DEC16_MIN) { /* pairs of groups on 512-bit registers */
        const size_t per16 = qx_pf_lines(16 * ldw, nb);
        for (; g + 1 < ng; g += 2) {
            const uint8_t *wg = w + ldw * (size_t)(8 * g);
            switch (nt) {
            case 2: qx_q4_0_rows16(2, nb, wg, ldw, x, ldx, corr, da, wg + 16 * ldw, per16, y + 8 * g, ldy); break;
            case 3: qx_q4_0_rows16(3, nb, wg, ldw, x, ldx, corr, da, wg + 16 * ldw, per16, y + 8 * g, ldy); break;
            case 4: qx_q4_0_rows16(4, nb, wg, ldw, x, ldx, corr, da, wg + 16 * ldw, per16, y + 8 * g, ldy); break;
            case 5: qx_q4_0_rows16(5, nb, wg, ldw, x, ldx, corr, da, wg + 16 * ldw, per16, y + 8 * g, ldy); break;
            case 6: qx_q4_0_rows16(6, nb, wg, ldw, x, ldx, corr, da, wg + 16 * ldw, per16, y + 8 * g, ldy); break;
            case 7: qx_q4_0_rows16(7, nb, wg, ldw, x, ldx, corr, da, wg + 16 * ldw, per16, y + 8 * g, ldy); break;
            default: qx_q4_0_rows16(8, nb, wg, ldw, x, ldx, corr, da, wg + 16 * ldw, per16, y + 8 * g, ldy); break;
            }
        }
    }
#endif
    for (; g < ng; ++g) {
        const uint8_t *wg = w + ldw * (size_t)(8 * g);
        switch (nt) { /* 2..QX_DEC_TT, each a constant so the row loop unrolls */
        case 2: qx_q4_0_rows8(2, nb, wg, ldw, x, ldx, corr, da, wg + 8 * ldw, per, y + 8 * g, ldy); break;
#if QX_DEC_TT > 3
        case 4: qx_q4_0_rows8(4, nb, wg, ldw, x, ldx, corr, da, wg + 8 * ldw, per, y + 8 * g, ldy); break;
        case 5: qx_q4_0_rows8(5, nb, wg, ldw, x, ldx, corr, da, wg + 8 * ldw, per, y + 8 * g, ldy); break;
        case 6: qx_q4_0_rows8(6, nb, wg, ldw, x, ldx, corr, da, wg + 8 * ldw, per, y + 8 * g, ldy); break;
        case 7: qx_q4_0_rows8(7, nb, wg, ldw, x, ldx, corr, da, wg + 8 * ldw, per, y + 8 * g, ldy); break;
        case 8: qx_q4_0_rows8(8, nb, wg, ldw, x, ldx, corr, da, wg + 8 * ldw, per, y + 8 * g, ldy); break;
#endif
        default: qx_q4_0_rows8(3, nb, wg, ldw, x, ldx, corr, da, wg + 8 * ldw, per, y + 8 * g, ldy); break;
        }
    }
    if (8 * ng < nr)
        qx_gemm_sum_rows(QX_Q4_0, k, w + ldw * (size_t)(8 * ng), ldw, nr - 8 * ng, x, ldx, nt, y + 8 * ng, ldy);
}

/* Bytes of one weight block of a 32-element type. */
QX_INLINE size_t qx_wblock(int type) {
    return type == QX_Q4_0 || type == QX_IQ4_NL ? sizeof(block_q4_0) : type == QX_Q8_0 ? sizeof(block_q8_0)
         : type == QX_Q5_0 ? sizeof(block_q5_0) : type == QX_Q4_1 ? sizeof(block_q4_1) : sizeof(block_q5_1);
}

#if defined(QX_VNNI)
QX_INLINE void qx_lt_pack(int type, const uint8_t *const *rp, int b, size_t ahead, __m512i *wb, __m512 *dw, __m512 *mw);
#endif

/*
 * The activation side of a chunk of a transposed tile: for activation rows
 * t < nt (Q8_0, ldx bytes apart) and blocks [c0, c0 + kc), the offset
 * correction corr = -off * sum(a) and the scale da = d_a, at t * stride + b.
 */
QX_INLINE void qx_act_chunk(const uint8_t *x, size_t ldx, int nt, int c0, int kc, int32_t off, int stride,
                            int32_t *corr, float *da) {
    for (int t = 0; t < nt; ++t)
        for (int b = 0; b < kc; ++b) {
            const block_q8_0 *a = (const block_q8_0 *)(x + ldx * (size_t)t) + c0 + b;
            const __m256i av = _mm256_loadu_si256((const __m256i *)a->qs);
            corr[t * stride + b] = -off * qx_hsum_i32(qx_dot4(_mm256_setzero_si256(), _mm256_set1_epi8(1), av));
            da[t * stride + b] = qx_h2f(a->d);
        }
}

/*
 * The transposed tiles of the "sum" order: chunks of QX_KC blocks of QX_GR
 * rows packed once (Q4_0/IQ4_NL: qx_sum_pack; with VNNI also Q8_0/Q5_0 in
 * the block order, kernels.h: qx_lt_pack, natural element order), then
 * qx_sum_tile for every activation row. The activation offset correction is
 * -off * sum(a): off = the weight bias of the unsigned operand (Q4_0 8,
 * IQ4_NL and Q8_0 128, Q5_0 16).
 */
QX_INLINE void qx_gemm_sum_t(int type, int k, const uint8_t *w, size_t ldw, int nr, const uint8_t *x, size_t ldx,
                             int nt, float *y, size_t ldy) {
    const int nb = k / 32;
    const int32_t off = type == QX_Q4_0 ? 8 : type == QX_Q5_0 ? 16 : 128;
    const size_t bs = qx_wblock(type);
    _Alignas(64) qx_vi wbuf[QX_KC * 8];
    _Alignas(64) qx_vf dwbuf[QX_KC];
    _Alignas(64) float acc[QX_RMAX / QX_GR][QX_TMAX][QX_GR];
    int32_t corr[QX_TMAX * QX_KC];
    float da[QX_TMAX * QX_KC];
    static const uint8_t zero_blocks[QX_KC * sizeof(block_q8_0)]; /* the largest block */
    const int ng = (nr + QX_GR - 1) / QX_GR;
    for (int c0 = 0; c0 < nb; c0 += QX_KC) {
        const int kc = nb - c0 < QX_KC ? nb - c0 : QX_KC;
        qx_act_chunk(x, ldx, nt, c0, kc, off, QX_KC, corr, da);
        for (int g = 0; g < ng; ++g) {
            const uint8_t *rp[QX_GR];
            for (int i = 0; i < QX_GR; ++i)
                rp[i] = QX_GR * g + i < nr ? w + ldw * (size_t)(QX_GR * g + i) + bs * (size_t)c0 : zero_blocks;
#if defined(QX_VNNI)
            if (type == QX_Q8_0 || type == QX_Q5_0) {
                qx_vf mw;
                const size_t ahead = g + 1 < ng && nt <= 16 ? QX_GR * ldw : 0;
                for (int b = 0; b < kc; ++b) qx_lt_pack(type, rp, b, ahead, wbuf + 8 * b, dwbuf + b, &mw);
            } else
#endif
            for (int b = 0; b < kc; ++b) qx_sum_pack(type, rp, b, wbuf + 8 * b, dwbuf + b);
            const uint8_t *xc = x + sizeof(block_q8_0) * (size_t)c0;
            int t = 0;
            for (; t + QX_SUM_TT <= nt; t += QX_SUM_TT)
                qx_sum_tile(QX_SUM_TT, wbuf, dwbuf, kc, xc + ldx * (size_t)t, ldx, corr + t * QX_KC, da + t * QX_KC,
                            acc[g][t], c0 == 0);
            for (; t < nt; ++t)
                qx_sum_tile(1, wbuf, dwbuf, kc, xc + ldx * (size_t)t, ldx, corr + t * QX_KC, da + t * QX_KC, acc[g][t],
                            c0 == 0);
        }
    }
    for (int g = 0; g < ng; ++g) {
        const int n = nr - QX_GR * g < QX_GR ? nr - QX_GR * g : QX_GR;
        for (int t = 0; t < nt; ++t) memcpy(y + ldy * (size_t)t + QX_GR * g, acc[g][t], sizeof(float) * (size_t)n);
    }
}

QX_INLINE void qx_gemm_sum(int type, int k, const uint8_t *w, size_t ldw, int nr, const uint8_t *x, size_t ldx, int nt,
                           float *y, size_t ldy) {
    if (type == QX_Q4_0 && nt <= QX_DEC_TT) {
        qx_gemm_q4_0_dec(k, w, ldw, nr, x, ldx, nt, y, ldy);
        return;
    }
    if (nt < QX_SUM_MIN_NT || (!QX_HAS_VNNI && type == QX_IQ4_NL)) {
        qx_gemm_sum_rows(type, k, w, ldw, nr, x, ldx, nt, y, ldy);
        return;
    }
    qx_gemm_sum_t(type, k, w, ldw, nr, x, ldx, nt, y, ldy);
}

/* ---- "lane" types: Q8_0, Q5_0, Q4_1, Q5_1 ---- */

/* Weight block -> unsigned dot operand u (and for AVX2 Q8_0 the signed weights v), scales. */
QX_INLINE void qx_wprep(int type, const uint8_t *blk, __m256i *u, __m256i *v, float *d, float *m) {
    switch (type) {
    case QX_Q8_0: {
        const block_q8_0 *b = (const block_q8_0 *)blk;
        const __m256i q = _mm256_loadu_si256((const __m256i *)b->qs);
#if defined(QX_VNNI)
        *u = _mm256_xor_si256(q, _mm256_set1_epi8((char)0x80)); /* w + 128 */
        (void)v;
#else
        *u = _mm256_abs_epi8(q);
        *v = q;
#endif
        *d = qx_h2f(b->d);
        (void)m;
        break;
    }
    case QX_Q5_0: {
        const block_q5_0 *b = (const block_q5_0 *)blk;
        *u = qx_unpack5(b->qs, b->qh);
        *d = qx_h2f(b->d);
        (void)v, (void)m;
        break;
    }
    case QX_Q4_1: {
        const block_q4_1 *b = (const block_q4_1 *)blk;
        *u = qx_unpack4(b->qs);
        *d = qx_h2f(b->d);
        *m = qx_h2f(b->m);
        (void)v;
        break;
    }
    default: {
        const block_q5_1 *b = (const block_q5_1 *)blk;
        *u = qx_unpack5(b->qs, b->qh);
        *d = qx_h2f(b->d);
        *m = qx_h2f(b->m);
        (void)v;
        break;
    }
    }
}

/* Per activation block: the offset correction lanes (-off * lane sums of a), 0 if none. */
QX_INLINE __m256i qx_acorr(int type, __m256i a) {
#if defined(QX_VNNI)
    if (type == QX_Q8_0)
        return _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8((char)0x80), a));
#endif
    if (type == QX_Q5_0)
        return _mm256_sub_epi32(_mm256_setzero_si256(), qx_dot4(_mm256_setzero_si256(), _mm256_set1_epi8(16), a));
    return _mm256_setzero_si256();
}

/* The 8 exact lanes of a weight block against an activation block. */
QX_INLINE __m256i qx_lanes(int type, __m256i u, __m256i v, __m256i a, __m256i corr) {
#if defined(QX_VNNI)
    (void)v, (void)type;
    return _mm256_dpbusd_epi32(corr, u, a); /* u <= 255, exact in int32 */
#else
    if (type == QX_Q8_0) { (void)corr; return qx_dot4(_mm256_setzero_si256(), u, _mm256_sign_epi8(a, v)); } /* 2*128*127 */
    if (type == QX_Q5_0) return qx_dot4(corr, u, a); /* u <= 31 */
    (void)v;
    return qx_dot4(_mm256_setzero_si256(), u, a); /* u <= 31 */
#endif
}

#if defined(QX_VNNI)
#define QX_LANES_RR 4
#define QX_LANES_TT 4
#else
#define QX_LANES_RR 2
#define QX_LANES_TT 4
#endif

/* RR weight rows × TT activation rows, all nb blocks; writes y[t * ldy + r]. */
QX_INLINE void qx_lanes_tile(int type, int RR, int TT, int nb, const uint8_t *w, size_t ldw, const uint8_t *x,
                             size_t ldx, float *y, size_t ldy, int pf) {
    const int one = type == QX_Q4_1 || type == QX_Q5_1; /* Q8_1 activations, min term */
    const size_t wb = qx_wblock(type), ab = one ? sizeof(block_q8_1) : sizeof(block_q8_0);
    __m256 acc[QX_LANES_RR][QX_LANES_TT];
    __m128 summs[QX_LANES_RR];
    for (int r = 0; r < RR; ++r) {
        summs[r] = _mm_setzero_ps();
        for (int t = 0; t < TT; ++t) acc[r][t] = _mm256_setzero_ps();
    }
    for (int b = 0; b < nb; ++b) {
        if (TT == 1 && pf) qx_prefetch_next(w + ldw * (size_t)RR, RR * ldw, b, nb);
        __m256i u[QX_LANES_RR], v[QX_LANES_RR];
        __m256 dw[QX_LANES_RR];
        float m[QX_LANES_RR];
        for (int r = 0; r < RR; ++r) {
            float d;
            qx_wprep(type, w + ldw * (size_t)r + wb * (size_t)b, &u[r], &v[r], &d, &m[r]);
            dw[r] = _mm256_set1_ps(d);
        }
        if (one) {
            float sa[4] = {0, 0, 0, 0};
            for (int t = 0; t < TT; ++t) sa[t] = qx_h2f(((const block_q8_1 *)(x + ldx * (size_t)t) + b)->s);
            const __m128 sv = _mm_loadu_ps(sa);
            for (int r = 0; r < RR; ++r) summs[r] = _mm_fmadd_ps(_mm_set1_ps(m[r]), sv, summs[r]);
        }
        for (int t = 0; t < TT; ++t) {
            const uint8_t *ablk = x + ldx * (size_t)t + ab * (size_t)b;
            const __m256i a = _mm256_loadu_si256((const __m256i *)(ablk + (one ? 4 : 2)));
            el_fp16 dah;
            memcpy(&dah, ablk, 2);
            const __m256 dat = _mm256_set1_ps(qx_h2f(dah));
            const __m256i corr = qx_acorr(type, a);
            for (int r = 0; r < RR; ++r)
                acc[r][t] = _mm256_fmadd_ps(_mm256_mul_ps(dw[r], dat), _mm256_cvtepi32_ps(qx_lanes(type, u[r], v[r], a, corr)),
                                            acc[r][t]);
        }
    }
    for (int r = 0; r < RR; ++r) {
        float sm[4];
        _mm_storeu_ps(sm, summs[r]);
        for (int t = 0; t < TT; ++t) y[ldy * (size_t)t + r] = one ? qx_hsum8(acc[r][t]) + sm[t] : qx_hsum8(acc[r][t]);
    }
}

/*
 * Q8_0 with 1..3 activation rows (decode): RR weight rows × TT activation
 * rows, each weight block loaded once for the TT rows (same operations per
 * output as qx_lanes_tile). A later group of RR rows (at least QX_DEC_AHEAD
 * bytes on, whole groups: qx_dec_ahead) is prefetched into L2, a fixed number of lines per
 * block step computed once per call (no division in the loop). The weight
 * scale is broadcast as fp16 and converted in the vector unit.
 *
 * Into L2 and 16 KB ahead, where it was the next group into L1 when the group
 * is at most 8 KB: Gemma 3's tied 262,144 x 640 output matrix (5.4 KB
 * groups, 178 MB, three quarters of the weights a token reads) streamed at
 * 10.3-13.6 GB/s on one thread and now at 22.3-25.7 (bench/kq-decode.c
 * k = 640, AMD EPYC Zen 4, 6 runs each; one group ahead into L2: 16.7-17.8).
 * k = 2,048 (17 KB groups, already L2 and one group) stays at 21-23.
 */
#if defined(QX_VNNI)
#ifndef QX_Q8D_RR
#define QX_Q8D_RR 8
#endif
#else
#define QX_Q8D_RR 4
#endif

/* activation rows qx_gemm_q8_0_dec takes (a batched decode step of up to 4 streams) */
#define QX_Q8D_TT 4

QX_INLINE void qx_q8_0_dec_tile(int RR, int TT, int nb, const uint8_t *w, size_t ldw, const uint8_t *x, size_t ldx,
                                float *y, size_t ldy, const uint8_t *next, size_t per) {
    __m256 acc[QX_Q8D_RR][3];
    for (int r = 0; r < RR; ++r)
        for (int t = 0; t < TT; ++t) acc[r][t] = _mm256_setzero_ps();
    for (int b = 0; b < nb; ++b) {
        qx_dec_prefetch(next, per ? (size_t)RR * ldw : 0, per, b, 0);
        __m256i a[3];
        __m256 da[3];
#if defined(QX_VNNI)
        __m256i corr[3];
#endif
        for (int t = 0; t < TT; ++t) {
            const block_q8_0 *xb = (const block_q8_0 *)(x + ldx * (size_t)t) + b;
            a[t] = _mm256_loadu_si256((const __m256i *)xb->qs);
            da[t] = _mm256_set1_ps(qx_h2f(xb->d));
#if defined(QX_VNNI)
            corr[t] = _mm256_sub_epi32(_mm256_setzero_si256(),
                                       _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8((char)0x80), a[t]));
#endif
        }
        for (int r = 0; r < RR; ++r) {
            const block_q8_0 *wb = (const block_q8_0 *)(w + ldw * (size_t)r) + b;
            const __m256i q = _mm256_loadu_si256((const __m256i *)wb->qs);
            const __m256 dw = _mm256_cvtph_ps(_mm_set1_epi16((short)wb->d));
#if defined(QX_VNNI)
            const __m256i u = _mm256_xor_si256(q, _mm256_set1_epi8((char)0x80)); /* w + 128 */
#else
            const __m256i u = _mm256_abs_epi8(q);
#endif
            for (int t = 0; t < TT; ++t) {
#if defined(QX_VNNI)
                const __m256i l = _mm256_dpbusd_epi32(corr[t], u, a[t]);
#else
                const __m256i l = qx_dot4(_mm256_setzero_si256(), u, _mm256_sign_epi8(a[t], q)); /* 2*128*127 */
#endif
                acc[r][t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, da[t]), _mm256_cvtepi32_ps(l), acc[r][t]);
            }
        }
    }
    for (int r = 0; r < RR; ++r)
        for (int t = 0; t < TT; ++t) y[ldy * (size_t)t + r] = qx_hsum8(acc[r][t]);
}

QX_INLINE void qx_gemm_q8_0_dec(int k, const uint8_t *w, size_t ldw, int nr, const uint8_t *x, size_t ldx, int nt,
                                float *y, size_t ldy) {
    const int nb = k / 32;
    const size_t per = qx_pf_lines(QX_Q8D_RR * ldw, nb), ahead = qx_dec_ahead(QX_Q8D_RR * ldw);
    int r = 0;
    for (; r + QX_Q8D_RR <= nr; r += QX_Q8D_RR) {
        const uint8_t *wr = w + ldw * (size_t)r;
        /* up to 3 activation rows a tile; a 4th (a batched step of 4 streams) reads the group again from L1 */
        for (int t = 0; t < nt; t += 3) {
            const uint8_t *xt = x + ldx * (size_t)t;
            float *yt = y + ldy * (size_t)t + r;
            const size_t pt = t == 0 ? per : 0;
            const uint8_t *nx = wr + ahead;
            switch (nt - t) {
            case 1: qx_q8_0_dec_tile(QX_Q8D_RR, 1, nb, wr, ldw, xt, ldx, yt, ldy, nx, pt); break;
            case 2: qx_q8_0_dec_tile(QX_Q8D_RR, 2, nb, wr, ldw, xt, ldx, yt, ldy, nx, pt); break;
            default: qx_q8_0_dec_tile(QX_Q8D_RR, 3, nb, wr, ldw, xt, ldx, yt, ldy, nx, pt); break;
            }
        }
    }
    for (; r < nr; ++r)
        for (int t = 0; t < nt; ++t)
            qx_q8_0_dec_tile(1, 1, nb, w + ldw * (size_t)r, ldw, x + ldx * (size_t)t, ldx, y + ldy * (size_t)t + r, ldy,
                             w, 0);
}

#if defined(QX_VNNI)
/*
 * Q5_0, one activation row (decode): 8 weight rows a group, two rows a
 * 512-bit register. A row's block is its 16 nibble bytes loaded twice into
 * one 256-bit half and shifted by 0 | 4 per 128-bit lane (the low nibbles
 * are elements 0-15, the high ones 16-31: natural order), its 32 high bits
 * a byte mask (qh of the two rows, one 64-bit k register) that adds 16; one
 * vpdpbusd with the activation block in both halves and the -16 * sum(a)
 * correction as its start gives each row's 8 exact lanes. The activation
 * side (block, correction, d_a) is prepared once per call. Per output the
 * operations of qx_lanes_tile (one fma with d_w * d_a per block over the 8
 * lanes, then the 8-lane sum): the same bits. A later group (at least
 * QX_DEC_AHEAD bytes on, whole groups) is prefetched into L2 (as Q8_0).
 *
 * qx_lanes_tile's one-row path did 256-bit work per row and block with the
 * 5th bits from a shuffle/compare: 15.2-15.4 GB/s with the rows in L2 and
 * 13.2-13.6 from memory at k = 640 (Gemma 3 270M's attention and
 * ffn_gate/up), one thread, AMD EPYC Zen 4; this kernel 21.2-21.4 and
 * 17.7-18.1 (k = 2,048: 15.7 -> 22.4 in L2). One 8-byte load for d and qh
 * of a row instead of two was not faster (20.1-20.2 in L2).
 */
#define QX_Q5D_NBMAX 256 /* blocks a row (k <= 8192): the activation arrays on the stack */

/* The unsigned 5-bit values (0..31) of a block of two Q5_0 rows, row r0 in the
 * low 256 bits, r1 in the high: each row's 16 nibble bytes twice, shifted
 * 0 | 4 per 128-bit lane (elements 0-15, then 16-31), the 32 high bits a
 * byte mask that adds 16. Shared by the decode kernels of both orders. */
QX_INLINE __m512i qx_q5_0_pair(const block_q5_0 *r0, const block_q5_0 *r1) {
    const long long s4 = 0x0004000400040004ll;
    const __m512i sh = _mm512_set_epi64(s4, s4, 0, 0, s4, s4, 0, 0); /* 128-bit lanes 1, 3: the high nibbles */
    const __m512i q = _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)r0->qs))),
        _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)r1->qs)), 1);
    const __mmask64 hb = _cvtu64_mask64((uint64_t)qx_load32(r0->qh) | (uint64_t)qx_load32(r1->qh) << 32);
    const __m512i u = _mm512_and_si512(_mm512_srlv_epi16(q, sh), _mm512_set1_epi8(0x0F));
    return _mm512_mask_add_epi8(u, hb, u, _mm512_set1_epi8(0x10)); /* + 16 where the 5th bit is set (u <= 15: an or) */
}

/* The unsigned operands of a block of two Q8_0 (bytes + 128) or Q5_0 rows
 * (qx_q5_0_pair), r0 in the low 256 bits, r1 in the high. */
QX_INLINE __m512i qx_lane_pair(int type, const uint8_t *r0, const uint8_t *r1) {
    if (type == QX_Q5_0) return qx_q5_0_pair((const block_q5_0 *)r0, (const block_q5_0 *)r1);
    const __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(r0 + 2))),
                                         _mm256_loadu_si256((const __m256i *)(r1 + 2)), 1);
    return _mm512_xor_si512(q, _mm512_set1_epi8((char)0x80)); /* w + 128 */
}

/* d_w of two rows' blocks (fp16 first in Q8_0 and Q5_0 blocks): lanes 0 and 1. */
QX_INLINE __m128 qx_pair_d(const uint8_t *r0, const uint8_t *r1) {
    return _mm_cvtph_ps(_mm_cvtsi32_si128((int)((qx_load32(r0) & 0xFFFFu) | qx_load32(r1) << 16)));
}

QX_INLINE void qx_q5_0_dec_rows8(int nb, const uint8_t *w, size_t ldw, const __m256i *a, const __m256i *c,
                                 const float *da, const uint8_t *next, size_t per, float *y) {
    const __m512i pair = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    __m512 acc[4];
    for (int p = 0; p < 4; ++p) acc[p] = _mm512_setzero_ps();
    for (int b = 0; b < nb; ++b) {
        qx_dec_prefetch(next, per ? 8 * ldw : 0, per, b, 0);
        const __m512i a2 = _mm512_broadcast_i64x4(a[b]), c2 = _mm512_broadcast_i64x4(c[b]);
        const __m128 dab = _mm_set1_ps(da[b]);
        for (int p = 0; p < 4; ++p) {
            const block_q5_0 *r0 = (const block_q5_0 *)(w + ldw * (size_t)(2 * p)) + b;
            const block_q5_0 *r1 = (const block_q5_0 *)((const uint8_t *)r0 + ldw);
            const __m512i l = _mm512_dpbusd_epi32(c2, qx_q5_0_pair(r0, r1), a2);
            const __m128 dd = _mm_mul_ps(qx_pair_d((const uint8_t *)r0, (const uint8_t *)r1), dab);
            const __m512 s2 = _mm512_permutexvar_ps(pair, _mm512_castps128_ps512(dd)); /* d_w * d_a of each row */
            acc[p] = _mm512_fmadd_ps(s2, _mm512_cvtepi32_ps(l), acc[p]);
        }
    }
    for (int p = 0; p < 4; ++p) {
        y[2 * p] = qx_hsum8(_mm512_castps512_ps256(acc[p]));
        y[2 * p + 1] = qx_hsum8(_mm512_extractf32x8_ps(acc[p], 1));
    }
}

/* Q5_0 decode: groups of 8 rows through qx_q5_0_dec_rows8, the rest one by one (qx_lanes_tile). */
QX_INLINE void qx_gemm_q5_0_dec(int k, const uint8_t *w, size_t ldw, int nr, const uint8_t *x, float *y) {
    const int nb = k / 32;
    const block_q8_0 *xa = (const block_q8_0 *)x;
    __m256i a[QX_Q5D_NBMAX], c[QX_Q5D_NBMAX];
    float da[QX_Q5D_NBMAX];
    for (int b = 0; b < nb; ++b) {
        a[b] = _mm256_loadu_si256((const __m256i *)xa[b].qs);
        c[b] = qx_acorr(QX_Q5_0, a[b]);
        da[b] = qx_h2f(xa[b].d);
    }
    const size_t per = qx_pf_lines(8 * ldw, nb), ahead = qx_dec_ahead(8 * ldw);
    int r = 0;
    for (; r + 8 <= nr; r += 8) {
        const uint8_t *wr = w + ldw * (size_t)r;
        qx_q5_0_dec_rows8(nb, wr, ldw, a, c, da, wr + ahead, per, y + r);
    }
    for (; r < nr; ++r) qx_lanes_tile(QX_Q5_0, 1, 1, nb, w + ldw * (size_t)r, ldw, x, 0, y + r, 0, 0);
}
#endif

#if defined(QX_VNNI)
/*
 * Q8_0 and Q5_0, a batched decode step of 2-4 streams (VNNI): 8 weight rows
 * (4 pairs, two rows a 512-bit register: Q8_0 as bytes + 128, Q5_0 through
 * qx_q5_0_pair) unpacked once per block for all TT activation rows; per
 * pair and activation row one vpdpbusd (the -128 | -16 * sum(a) correction
 * as its start), one conversion, one product d_w * d_a (d_w of the two rows
 * in the two halves) and one fma. Per output these are qx_lanes_tile's
 * operations (8 exact lanes, one fma with d_w * d_a per block, the 8-lane
 * sum): the same bits as each row alone. Where qx_q8_0_dec_tile ran 3 + 1
 * activation rows in ymm and Q5_0 went through qx_lanes_tile (its weights
 * unpacked per 256-bit row), a 4-row step of Gemma 3's 640-wide Q8_0 and
 * Q5_0 matrices cost 2.35x and 3.18x one row (bench/server-batch/kbench.c).
 */
#define QX_PAIR_TT 4

QX_INLINE void qx_pair_dec_tile(int type, int TT, int nb, const uint8_t *w, size_t ldw, const uint8_t *x, size_t ldx,
                                float *y, size_t ldy, const uint8_t *next, size_t per) {
    const size_t wb = qx_wblock(type);
    const __m512i halves = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    __m512 acc[4][QX_PAIR_TT];
    for (int p = 0; p < 4; ++p)
        for (int t = 0; t < TT; ++t) acc[p][t] = _mm512_setzero_ps();
    for (int b = 0; b < nb; ++b) {
        qx_dec_prefetch(next, per ? 8 * ldw : 0, per, b, 0);
        __m512i a2[QX_PAIR_TT], c2[QX_PAIR_TT];
        __m512 da[QX_PAIR_TT];
        for (int t = 0; t < TT; ++t) {
            const block_q8_0 *xb = (const block_q8_0 *)(x + ldx * (size_t)t) + b;
            const __m256i a = _mm256_loadu_si256((const __m256i *)xb->qs);
            a2[t] = _mm512_broadcast_i64x4(a);
            c2[t] = _mm512_broadcast_i64x4(qx_acorr(type, a));
            da[t] = _mm512_set1_ps(qx_h2f(xb->d));
        }
        for (int p = 0; p < 4; ++p) {
            const uint8_t *r0 = w + ldw * (size_t)(2 * p) + wb * (size_t)b, *r1 = r0 + ldw;
            const __m512i u = qx_lane_pair(type, r0, r1);
            const __m512 dw = _mm512_permutexvar_ps(halves, _mm512_castps128_ps512(qx_pair_d(r0, r1)));
            for (int t = 0; t < TT; ++t)
                acc[p][t] = _mm512_fmadd_ps(_mm512_mul_ps(dw, da[t]),
                                            _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(c2[t], u, a2[t])), acc[p][t]);
        }
    }
    for (int p = 0; p < 4; ++p)
        for (int t = 0; t < TT; ++t) {
            y[ldy * (size_t)t + 2 * p] = qx_hsum8(_mm512_castps512_ps256(acc[p][t]));
            y[ldy * (size_t)t + 2 * p + 1] = qx_hsum8(_mm512_extractf32x8_ps(acc[p][t], 1));
        }
}

/* 2-4 activation rows: groups of 8 weight rows through qx_pair_dec_tile, the rest through qx_lanes_tile. */
QX_INLINE void qx_gemm_pair_dec(int type, int k, const uint8_t *w, size_t ldw, int nr, const uint8_t *x, size_t ldx,
                                int nt, float *y, size_t ldy) {
    const int nb = k / 32;
    const size_t per = qx_pf_lines(8 * ldw, nb), ahead = qx_dec_ahead(8 * ldw);
    int r = 0;
    for (; r + 8 <= nr; r += 8) {
        const uint8_t *wr = w + ldw * (size_t)r;
        switch (nt) {
        case 2: qx_pair_dec_tile(type, 2, nb, wr, ldw, x, ldx, y + r, ldy, wr + ahead, per); break;
        case 3: qx_pair_dec_tile(type, 3, nb, wr, ldw, x, ldx, y + r, ldy, wr + ahead, per); break;
        default: qx_pair_dec_tile(type, 4, nb, wr, ldw, x, ldx, y + r, ldy, wr + ahead, per); break;
        }
    }
    for (; r < nr; ++r)
        for (int t = 0; t < nt; ++t)
            qx_lanes_tile(type, 1, 1, nb, w + ldw * (size_t)r, ldw, x + ldx * (size_t)t, ldx, y + ldy * (size_t)t + r, ldy, 0);
}
#endif

QX_INLINE void qx_gemm_lanes(int type, int k, const uint8_t *w, size_t ldw, int nr, const uint8_t *x, size_t ldx,
                             int nt, float *y, size_t ldy) {
#if defined(QX_VNNI)
    if ((type == QX_Q8_0 || type == QX_Q5_0) && nt >= 2 && nt <= QX_PAIR_TT) { /* batched decode */
        qx_gemm_pair_dec(type, k, w, ldw, nr, x, ldx, nt, y, ldy);
        return;
    }
#endif
    if (type == QX_Q8_0 && nt <= QX_Q8D_TT) { /* decode, batched decode */
        qx_gemm_q8_0_dec(k, w, ldw, nr, x, ldx, nt, y, ldy);
        return;
    }
#if defined(QX_VNNI)
    if (type == QX_Q5_0 && nt == 1 && k / 32 <= QX_Q5D_NBMAX) { /* decode */
        qx_gemm_q5_0_dec(k, w, ldw, nr, x, y);
        return;
    }
#endif
    const int nb = k / 32;
    int r = 0;
    for (; r + QX_LANES_RR <= nr; r += QX_LANES_RR) {
        int t = 0;
        for (; t + QX_LANES_TT <= nt; t += QX_LANES_TT)
            qx_lanes_tile(type, QX_LANES_RR, QX_LANES_TT, nb, w + ldw * (size_t)r, ldw, x + ldx * (size_t)t, ldx,
                          y + ldy * (size_t)t + r, ldy, 0);
        for (; t < nt; ++t)
            qx_lanes_tile(type, QX_LANES_RR, 1, nb, w + ldw * (size_t)r, ldw, x + ldx * (size_t)t, ldx,
                          y + ldy * (size_t)t + r, ldy, t == 0);
    }
    for (; r < nr; ++r) {
        int t = 0;
        for (; t + QX_LANES_TT <= nt; t += QX_LANES_TT)
            qx_lanes_tile(type, 1, QX_LANES_TT, nb, w + ldw * (size_t)r, ldw, x + ldx * (size_t)t, ldx,
                          y + ldy * (size_t)t + r, ldy, 0);
        for (; t < nt; ++t)
            qx_lanes_tile(type, 1, 1, nb, w + ldw * (size_t)r, ldw, x + ldx * (size_t)t, ldx, y + ldy * (size_t)t + r,
                          ldy, t == 0);
    }
}

#if defined(QX_VNNI)
/*
 * VNNI "lane" gemm, transposed: a group of 16 weight rows is unpacked to
 * 32 unsigned bytes per row and block (natural element order) and transposed
 * so that register l holds elements 4l..4l+3 of the 16 rows. One vpdpbusd
 * with a broadcast of activation bytes 4l..4l+3 then gives lane l of 16
 * outputs; each of the 8 lanes has its own accumulator (a vector over the 16
 * rows), so d_w * d_a is one product per block for 16 outputs, and the final
 * x86 horizontal sum over the 8 lanes is vector adds over rows.
 */

/* 8 rows of 32 bytes -> 8 registers, register l = dword l of rows 0..7. */
QX_INLINE void qx_transpose8x8(const __m256i *U, __m256i *out) {
    __m256i t[8], v[8];
    for (int i = 0; i < 4; ++i) {
        t[2 * i] = _mm256_unpacklo_epi32(U[2 * i], U[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_epi32(U[2 * i], U[2 * i + 1]);
    }
    for (int h = 0; h < 2; ++h) { /* rows 4h..4h+3 */
        v[4 * h + 0] = _mm256_unpacklo_epi64(t[4 * h + 0], t[4 * h + 2]); /* dwords 0 | 4 */
        v[4 * h + 1] = _mm256_unpackhi_epi64(t[4 * h + 0], t[4 * h + 2]); /* 1 | 5 */
        v[4 * h + 2] = _mm256_unpacklo_epi64(t[4 * h + 1], t[4 * h + 3]); /* 2 | 6 */
        v[4 * h + 3] = _mm256_unpackhi_epi64(t[4 * h + 1], t[4 * h + 3]); /* 3 | 7 */
    }
    for (int c = 0; c < 4; ++c) {
        out[c] = _mm256_permute2x128_si256(v[c], v[4 + c], 0x20);
        out[c + 4] = _mm256_permute2x128_si256(v[c], v[4 + c], 0x31);
    }
}

/* Unsigned dot operand of one weight block, natural order (see qx_wprep). */
QX_INLINE __m256i qx_wunpack(int type, const uint8_t *blk) {
    switch (type) {
    case QX_Q8_0: return _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)((const block_q8_0 *)blk)->qs),
                                          _mm256_set1_epi8((char)0x80));
    case QX_Q5_0: return qx_unpack5(((const block_q5_0 *)blk)->qs, ((const block_q5_0 *)blk)->qh);
    case QX_Q4_1: return qx_unpack4(((const block_q4_1 *)blk)->qs);
    default: return qx_unpack5(((const block_q5_1 *)blk)->qs, ((const block_q5_1 *)blk)->qh);
    }
}

#define QX_LT_TT 3
#ifndef QX_LT_MIN_NT
#define QX_LT_MIN_NT 5 /* 1..4 activation rows (decode, a batched step of up to 4 streams): register tiles */
#endif

/* Packs block b of the 16 rows rp; `ahead` (bytes, 0: none) is the next
 * group's distance: its block b is prefetched into L2 meanwhile. A group's
 * blocks are 16 streams that the hardware prefetchers do not follow: Gemma
 * 3's 262,144 x 640 Q8_0 output matrix, 5 activation rows, one thread, ran
 * 32.3 ms without, 21.9 ms with, 4 rows (the register tiles) 15.0 ms.
 * Callers pass 0 for more than 16 activation rows (prefill): there the
 * activations fill L2 and the prefetched group evicted them (Gemma pp512
 * 4 % slower). */
QX_INLINE void qx_lt_pack(int type, const uint8_t *const *rp, int b, size_t ahead, __m512i *wb, __m512 *dw, __m512 *mw) {
    const size_t bs = qx_wblock(type);
    __m256i U[16], lo[8], hi[8];
    const uint8_t *bp[16];
    for (int i = 0; i < 16; ++i) {
        bp[i] = rp[i] + bs * (size_t)b;
        if (ahead) _mm_prefetch((const char *)bp[i] + ahead, _MM_HINT_T1);
        U[i] = qx_wunpack(type, bp[i]);
    }
    qx_transpose8x8(U, lo);
    qx_transpose8x8(U + 8, hi);
    for (int l = 0; l < 8; ++l) wb[l] = _mm512_inserti64x4(_mm512_castsi256_si512(lo[l]), hi[l], 1);
    *dw = _mm512_cvtph_ps(
        _mm256_inserti128_si256(_mm256_castsi128_si256(qx_gather_h8(bp, 0)), qx_gather_h8(bp + 8, 0), 1));
    if (type == QX_Q4_1 || type == QX_Q5_1)
        *mw = _mm512_cvtph_ps(
            _mm256_inserti128_si256(_mm256_castsi128_si256(qx_gather_h8(bp, 2)), qx_gather_h8(bp + 8, 2), 1));
}

/* TT activation rows against one packed chunk; acc_io[t][l][16 rows], sm_io[t][16]. */
QX_INLINE void qx_lt_tile(int type, int TT, const __m512i *wb, const __m512 *dwb, const __m512 *mwb, int kc,
                          const uint8_t *x, size_t ldx, float *acc_io, float *sm_io, int first) {
    const int one = type == QX_Q4_1 || type == QX_Q5_1;
    const int off = type == QX_Q8_0 ? 128 : type == QX_Q5_0 ? 16 : 0;
    const size_t ab = one ? sizeof(block_q8_1) : sizeof(block_q8_0);
    __m512 acc[QX_LT_TT][8], sm[QX_LT_TT];
    for (int t = 0; t < TT; ++t) {
        for (int l = 0; l < 8; ++l) acc[t][l] = first ? _mm512_setzero_ps() : _mm512_load_ps(acc_io + 128 * t + 16 * l);
        sm[t] = first || !one ? _mm512_setzero_ps() : _mm512_load_ps(sm_io + 16 * t);
    }
    /* The offset corrections of the tile's activation blocks, computed up
     * front: in the dot loop each is a broadcast from memory (a load, no ALU
     * work); computed there, the compiler extracted the 8 lanes with shuffles. */
    _Alignas(32) int32_t cbuf[QX_LT_TT][QX_KC][8];
    if (off)
        for (int t = 0; t < TT; ++t)
            for (int b = 0; b < kc; ++b) {
                const uint8_t *qs = x + ldx * (size_t)t + ab * (size_t)b + (one ? 4 : 2);
                const __m256i cv = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8((char)off),
                                                       _mm256_loadu_si256((const __m256i *)qs));
                _mm256_store_si256((__m256i *)cbuf[t][b], _mm256_sub_epi32(_mm256_setzero_si256(), cv));
            }
    for (int b = 0; b < kc; ++b) {
        /* each packed weight register is loaded once for the TT rows */
        __m512 d[QX_LT_TT];
        const uint8_t *qs[QX_LT_TT];
        for (int t = 0; t < TT; ++t) {
            const uint8_t *ablk = x + ldx * (size_t)t + ab * (size_t)b;
            qs[t] = ablk + (one ? 4 : 2);
            el_fp16 h[2];
            memcpy(h, ablk, 4);
            d[t] = _mm512_mul_ps(dwb[b], _mm512_set1_ps(qx_h2f(h[0])));
            if (one) sm[t] = _mm512_fmadd_ps(mwb[b], _mm512_set1_ps(qx_h2f(h[1])), sm[t]);
        }
        for (int l = 0; l < 8; ++l) {
            const __m512i wl = wb[8 * b + l];
            for (int t = 0; t < TT; ++t) {
                const __m512i s0 = off ? _mm512_set1_epi32(cbuf[t][b][l]) : _mm512_setzero_si512();
                const __m512i s = qx_dpbusd_bcast(s0, wl, qs[t] + 4 * l);
                acc[t][l] = _mm512_fmadd_ps(d[t], _mm512_cvtepi32_ps(s), acc[t][l]);
            }
        }
    }
    for (int t = 0; t < TT; ++t) {
        for (int l = 0; l < 8; ++l) _mm512_store_ps(acc_io + 128 * t + 16 * l, acc[t][l]);
        if (one) _mm512_store_ps(sm_io + 16 * t, sm[t]);
    }
}

QX_INLINE void qx_gemm_lanes_t(int type, int k, const uint8_t *w, size_t ldw, int nr, const uint8_t *x, size_t ldx,
                               int nt, float *y, size_t ldy) {
    if (nt < QX_LT_MIN_NT) { /* the transposition would not pay: register tiles */
        qx_gemm_lanes(type, k, w, ldw, nr, x, ldx, nt, y, ldy);
        return;
    }
    const int nb = k / 32;
    const int one = type == QX_Q4_1 || type == QX_Q5_1;
    const size_t bs = qx_wblock(type), ab = one ? sizeof(block_q8_1) : sizeof(block_q8_0);
    _Alignas(64) __m512i wbuf[QX_KC * 8];
    _Alignas(64) __m512 dwbuf[QX_KC], mwbuf[QX_KC];
    _Alignas(64) float acc[QX_TMAX][8][16];
    _Alignas(64) float sm[QX_TMAX][16];
    static const uint8_t zero_blocks[QX_KC * sizeof(block_q8_0)]; /* the largest block */
    for (int g = 0; g < nr; g += 16) {
        const uint8_t *rp[16];
        for (int c0 = 0; c0 < nb; c0 += QX_KC) {
            const int kc = nb - c0 < QX_KC ? nb - c0 : QX_KC;
            for (int i = 0; i < 16; ++i) rp[i] = g + i < nr ? w + ldw * (size_t)(g + i) + bs * (size_t)c0 : zero_blocks;
            const size_t ahead = g + 32 <= nr && nt <= 16 ? 16 * ldw : 0;
            for (int b = 0; b < kc; ++b) qx_lt_pack(type, rp, b, ahead, wbuf + 8 * b, dwbuf + b, mwbuf + b);
            const uint8_t *xc = x + ab * (size_t)c0;
            int t = 0;
            for (; t + QX_LT_TT <= nt; t += QX_LT_TT)
                qx_lt_tile(type, QX_LT_TT, wbuf, dwbuf, mwbuf, kc, xc + ldx * (size_t)t, ldx, acc[t][0], sm[t], c0 == 0);
            for (; t < nt; ++t)
                qx_lt_tile(type, 1, wbuf, dwbuf, mwbuf, kc, xc + ldx * (size_t)t, ldx, acc[t][0], sm[t], c0 == 0);
        }
        /* x86 horizontal sum of the 8 lanes, for 16 rows at once */
        const int n = nr - g < 16 ? nr - g : 16;
        for (int t = 0; t < nt; ++t) {
            __m512 r[4];
            for (int i = 0; i < 4; ++i) r[i] = _mm512_add_ps(_mm512_load_ps(acc[t][i + 4]), _mm512_load_ps(acc[t][i]));
            __m512 v = _mm512_add_ps(_mm512_add_ps(r[0], r[2]), _mm512_add_ps(r[1], r[3]));
            if (one) v = _mm512_add_ps(v, _mm512_load_ps(sm[t]));
            _mm512_mask_storeu_ps(y + ldy * (size_t)t + g, (__mmask16)((1u << n) - 1), v);
        }
    }
}
#endif

/* el_gemm_fn entry points (no selector for these types: t0, n_act unused). */
/*
 * MXFP4 (type QX_MXFP4): groups of 8 weight rows, decoded once per chunk of
 * QX_KC blocks (nibbles looked up into signed codes v, kept with |v|) and
 * reused by every activation row of the call. Per activation row and block,
 * the 8 rows' 8-lane integer dots (|v| * sign(a, v)) are reduced together by
 * a vphaddd tree plus one cross-lane add, leaving row r's block sum in lane
 * r; then one fma over the 8 rows: acc = fma(sumi, d_w * d_a, acc), block by
 * block, vec_dot's operations per output. Rows past nr read a zero block.
 */
QX_INLINE void qx_gemm_mxfp4(int type, int k, const uint8_t *w, size_t ldw, int nr, const uint8_t *x, size_t ldx,
                             int nt, float *y, size_t ldy) {
    (void)type;
    static const block_mxfp4 zero_block; /* e = 0, codes 0: sums 0 */
    const int nb = k / EL_QK_MXFP4;
    const __m256i tab = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)kvalues_mxfp4));
    __m256i v[QX_KC][8], u[QX_KC][8];
    __m256 dw[QX_KC];
    __m256 acc[QX_TMAX];
    for (int g = 0; g < nr; g += 8) {
        const block_mxfp4 *rp[8];
        for (int i = 0; i < 8; ++i) rp[i] = g + i < nr ? (const block_mxfp4 *)(w + ldw * (size_t)(g + i)) : NULL;
        for (int t = 0; t < nt; ++t) acc[t] = _mm256_setzero_ps();
        if (nt == 1) { /* decode: nothing to reuse, decode each block where it is used */
            const block_q8_0 *xa = (const block_q8_0 *)x;
            __m256 a = acc[0];
            for (int b = 0; b < nb; ++b) {
                const __m256i q = _mm256_loadu_si256((const __m256i *)xa[b].qs);
                __m256i L[8];
                float d[8];
                for (int i = 0; i < 8; ++i) {
                    const block_mxfp4 *blk = rp[i] ? &rp[i][b] : &zero_block;
                    const __m256i vi = _mm256_shuffle_epi8(tab, qx_unpack4(blk->qs));
                    L[i] = qx_dot4(_mm256_setzero_si256(), _mm256_abs_epi8(vi), _mm256_sign_epi8(q, vi));
                    d[i] = el_e8m0_to_fp32_half(blk->e);
                }
                const __m256i h0 = _mm256_hadd_epi32(_mm256_hadd_epi32(L[0], L[1]), _mm256_hadd_epi32(L[2], L[3]));
                const __m256i h1 = _mm256_hadd_epi32(_mm256_hadd_epi32(L[4], L[5]), _mm256_hadd_epi32(L[6], L[7]));
                const __m256i sumi = _mm256_add_epi32(_mm256_permute2x128_si256(h0, h1, 0x20),
                                                      _mm256_permute2x128_si256(h0, h1, 0x31));
                a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi),
                                    _mm256_mul_ps(_mm256_loadu_ps(d), _mm256_set1_ps(qx_h2f(xa[b].d))), a);
            }
            acc[0] = a;
        }
        for (int b0 = 0; nt > 1 && b0 < nb; b0 += QX_KC) {
            const int kc = nb - b0 < QX_KC ? nb - b0 : QX_KC;
            for (int b = 0; b < kc; ++b) {
                float d[8];
                for (int i = 0; i < 8; ++i) {
                    const block_mxfp4 *blk = rp[i] ? &rp[i][b0 + b] : &zero_block;
                    v[b][i] = _mm256_shuffle_epi8(tab, qx_unpack4(blk->qs));
                    u[b][i] = _mm256_abs_epi8(v[b][i]);
                    d[i] = el_e8m0_to_fp32_half(blk->e);
                }
                dw[b] = _mm256_loadu_ps(d);
            }
            for (int t = 0; t < nt; ++t) {
                const block_q8_0 *xa = (const block_q8_0 *)(x + ldx * (size_t)t) + b0;
                __m256 a = acc[t];
                for (int b = 0; b < kc; ++b) {
                    const __m256i q = _mm256_loadu_si256((const __m256i *)xa[b].qs);
                    __m256i L[8];
                    for (int i = 0; i < 8; ++i)
                        L[i] = qx_dot4(_mm256_setzero_si256(), u[b][i], _mm256_sign_epi8(q, v[b][i]));
                    /* 128-bit halves: lanes 0-3 = rows 0-3 (low half sums), 4-7 = rows 0-3 (high) */
                    const __m256i h0 = _mm256_hadd_epi32(_mm256_hadd_epi32(L[0], L[1]), _mm256_hadd_epi32(L[2], L[3]));
                    const __m256i h1 = _mm256_hadd_epi32(_mm256_hadd_epi32(L[4], L[5]), _mm256_hadd_epi32(L[6], L[7]));
                    const __m256i sumi = _mm256_add_epi32(_mm256_permute2x128_si256(h0, h1, 0x20),
                                                          _mm256_permute2x128_si256(h0, h1, 0x31));
                    a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), _mm256_mul_ps(dw[b], _mm256_set1_ps(qx_h2f(xa[b].d))),
                                        a);
                }
                acc[t] = a;
            }
        }
        for (int t = 0; t < nt; ++t) {
            _Alignas(32) float out[8];
            _mm256_store_ps(out, acc[t]);
            memcpy(y + ldy * (size_t)t + g, out, sizeof(float) * (size_t)(nr - g < 8 ? nr - g : 8));
        }
    }
}

#define QX_GEMM(NAME, KIND, TYPE)                                                                                  \
    static void NAME##_body(int k, const uint8_t *w, size_t ldw, int nr, const uint8_t *x, size_t ldx, int nt,    \
                            float *y, size_t ldy) {                                                                \
        qx_gemm_##KIND(TYPE, k, w, ldw, nr, x, ldx, nt, y, ldy);                                                   \
    }                                                                                                              \
    static void NAME(int k, const void *w, size_t ldw, int nr, const void *x, size_t ldx, int t0, int nt,          \
                     int n_act, float *y, size_t ldy) {                                                            \
        (void)t0, (void)n_act;                                                                                     \
        qx_gemm_split(NAME##_body, k, w, ldw, nr, x, ldx, nt, y, ldy);                                             \
    }

#endif
