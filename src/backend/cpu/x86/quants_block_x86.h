/*
 * quants_block_x86.h — the x86 kernels of Q8_0 and Q5_0 in block order
 * (kernels.h, EL_ORDER_BLOCK): per output one float accumulator and per
 * 32-element block one exact integer sum,
 *     acc = fma((float)sumi, d_w * d_a, acc), block after block,
 * the portable vec_dot_q8_0_q8_0_blk / vec_dot_q5_0_q8_0_blk bit for bit
 * (tests/test_kernels.c). Included after quants_x86.h (its helpers: qx_wprep,
 * qx_acorr, qx_lanes, qx_q5_0_pair and the transposed tiles of
 * qx_gemm_sum_t) by
 * quants_avx2.c and quants_avx512.c, which define the block tables.
 *
 * Because a block's integer sum is exact in any order, the kernels form it
 * however the hardware likes:
 *   - qx_blk_rows8 (decode and small batches, both ISAs): 8 weight rows x up
 *     to QX_BLK_TT activation rows. Per block, the 8 rows' 8-lane dots (the
 *     lanes of qx_lanes, activation offset correction included) are reduced
 *     by a vphaddd tree and one cross-lane add to one sum per row, and one
 *     fma advances 8 outputs. The next group of rows is prefetched into L2
 *     (QX_DEC_AHEAD bytes on, as the llama-order Q8_0 decode).
 *   - VNNI with QX_BLK_T_MIN or more activation rows (prefill): 16 rows
 *     transposed once per chunk of QX_KC blocks (qx_lt_pack: register l holds
 *     elements 4l..4l+3 of the 16 rows), then qx_sum_tile — Q4_0's tiles,
 *     the same qx_gemm_sum_t: 8
 *     vpdpbusd with a broadcast activation dword into one int32 chain per
 *     activation row, one conversion and one fma per 16 outputs and block,
 *     where the llama order needs 8 of each.
 */
#ifndef EL_BACKEND_CPU_X86_QUANTS_BLOCK_X86_H
#define EL_BACKEND_CPU_X86_QUANTS_BLOCK_X86_H
#include <math.h>

#include "backend/cpu/x86/quants_x86.h"

#define QX_BLK_TT 4 /* activation rows of a qx_blk_rows8 tile */
#ifndef QX_BLK_T_MIN
#define QX_BLK_T_MIN 5 /* VNNI: from this many activation rows the transposed tiles */
#endif

/* Lane sums of 8 vectors -> one vector, lane i = sum of the lanes of L[i] (exact int32). */
QX_INLINE __m256i qx_reduce8(const __m256i *L) {
    const __m256i h0 = _mm256_hadd_epi32(_mm256_hadd_epi32(L[0], L[1]), _mm256_hadd_epi32(L[2], L[3]));
    const __m256i h1 = _mm256_hadd_epi32(_mm256_hadd_epi32(L[4], L[5]), _mm256_hadd_epi32(L[6], L[7]));
    return _mm256_add_epi32(_mm256_permute2x128_si256(h0, h1, 0x20), _mm256_permute2x128_si256(h0, h1, 0x31));
}

/*
 * 8 weight rows (rp[i]; NULL: a zero block, for rows past the matrix) x TT
 * activation rows, blocks [0, nb); writes the first n of the 8 outputs of each
 * activation row. per > 0: prefetch [next, next + bytes) into L2 over the nb
 * block steps, per lines a step.
 */
QX_INLINE void qx_blk_rows8(int type, int TT, int nb, const uint8_t *const *rp, const uint8_t *x, size_t ldx,
                            float *y, size_t ldy, int n, const uint8_t *next, size_t bytes, size_t per) {
    static const uint8_t zero_block[sizeof(block_q8_0)]; /* d = 0, quants 0 (Q5_0: -16, times d = 0) */
    const size_t bs = qx_wblock(type);
    __m256 acc[QX_BLK_TT];
    for (int t = 0; t < TT; ++t) acc[t] = _mm256_setzero_ps();
    for (int b = 0; b < nb; ++b) {
        if (per) qx_dec_prefetch(next, bytes, per, b, 0);
        const uint8_t *bp[8];
        __m256i u[8], v[8];
        for (int i = 0; i < 8; ++i) {
            float d, m;
            bp[i] = rp[i] ? rp[i] + bs * (size_t)b : zero_block;
            qx_wprep(type, bp[i], &u[i], &v[i], &d, &m);
            (void)d, (void)m;
        }
        const __m256 dw = _mm256_cvtph_ps(qx_gather_h8(bp, 0));
        for (int t = 0; t < TT; ++t) {
            const block_q8_0 *xb = (const block_q8_0 *)(x + ldx * (size_t)t) + b;
            const __m256i a = _mm256_loadu_si256((const __m256i *)xb->qs);
            const __m256i corr = qx_acorr(type, a);
            __m256i L[8];
            for (int i = 0; i < 8; ++i) L[i] = qx_lanes(type, u[i], v[i], a, corr);
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(qx_reduce8(L)), _mm256_mul_ps(dw, _mm256_set1_ps(qx_h2f(xb->d))),
                                     acc[t]);
        }
    }
    for (int t = 0; t < TT; ++t) {
        if (n == 8) {
            _mm256_storeu_ps(y + ldy * (size_t)t, acc[t]);
        } else {
            _Alignas(32) float out[8];
            _mm256_store_ps(out, acc[t]);
            memcpy(y + ldy * (size_t)t, out, sizeof(float) * (size_t)n);
        }
    }
}

#if defined(QX_VNNI)
/*
 * VNNI decode / batched decode: 8 full weight rows (stride ldw) x TT (1..4)
 * activation rows, two rows a 512-bit register (row 2p in the low half, row
 * 2p + 1 in the high one: qx_lane_pair). One vpdpbusd per register against the activation block
 * in both halves (its offset correction as the start) leaves 8 lanes a row;
 * unpacks and adds over the 4 registers reduce them to one sum a row, in the
 * lane order 0, 2, 4, 6, 1, 3, 5, 7 (the scales are gathered in that order,
 * the result permuted back once at the end). Then acc = fma((float)sumi,
 * d_w * d_a, acc): qx_blk_rows8's operations per output, the same bits.
 * The 8 fp16 scales are loaded as words and inserted (qx_gather_h8): a dword
 * gather (vpgatherdd, low words kept) ran k = 2,048 Q8_0 rows in L2 at 34-35
 * GB/s, this at 38, no scales at all at 47 (bench/kq-decode, one thread, AMD
 * EPYC Zen 4); from memory all three stream at 18-23.
 */
QX_INLINE void qx_blk_dec8(int type, int TT, int nb, const uint8_t *w, size_t ldw, const uint8_t *x, size_t ldx,
                           float *y, size_t ldy, const uint8_t *next, size_t per) {
    const size_t bs = qx_wblock(type);
    __m256 acc[QX_BLK_TT];
    for (int t = 0; t < TT; ++t) acc[t] = _mm256_setzero_ps();
    for (int b = 0; b < nb; ++b) {
        if (per) qx_dec_prefetch(next, 8 * ldw, per, b, 0);
        const uint8_t *p0 = w + bs * (size_t)b;
        __m512i u[4];
        for (int p = 0; p < 4; ++p) u[p] = qx_lane_pair(type, p0 + ldw * (size_t)(2 * p), p0 + ldw * (size_t)(2 * p + 1));
        const uint8_t *bo[8];
        for (int i = 0; i < 8; ++i) bo[i] = p0 + ldw * (size_t)qx_rows_order[i];
        const __m256 dw = _mm256_cvtph_ps(qx_gather_h8(bo, 0));
        for (int t = 0; t < TT; ++t) {
            const block_q8_0 *xb = (const block_q8_0 *)(x + ldx * (size_t)t) + b;
            const __m256i a = _mm256_loadu_si256((const __m256i *)xb->qs);
            const __m512i a2 = _mm512_broadcast_i64x4(a), c2 = _mm512_broadcast_i64x4(qx_acorr(type, a));
            __m512i l[4];
            for (int p = 0; p < 4; ++p) l[p] = _mm512_dpbusd_epi32(c2, u[p], a2);
            /* per 128-bit lane: [l0, l1, l2, l3] partial sums (4 lanes each) */
            const __m512i x0 = _mm512_add_epi32(_mm512_unpacklo_epi32(l[0], l[1]), _mm512_unpackhi_epi32(l[0], l[1]));
            const __m512i x1 = _mm512_add_epi32(_mm512_unpacklo_epi32(l[2], l[3]), _mm512_unpackhi_epi32(l[2], l[3]));
            const __m512i yv = _mm512_add_epi32(_mm512_unpacklo_epi64(x0, x1), _mm512_unpackhi_epi64(x0, x1));
            /* 128-bit lanes 0, 1: the two halves of rows 0, 2, 4, 6; lanes 2, 3: of rows 1, 3, 5, 7 */
            const __m256i lo = _mm512_castsi512_si256(yv), hi = _mm512_extracti64x4_epi64(yv, 1);
            const __m256i sumi = _mm256_add_epi32(_mm256_permute2x128_si256(lo, hi, 0x20), _mm256_permute2x128_si256(lo, hi, 0x31));
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), _mm256_mul_ps(dw, _mm256_set1_ps(qx_h2f(xb->d))), acc[t]);
        }
    }
    for (int t = 0; t < TT; ++t)
        _mm256_storeu_ps(y + ldy * (size_t)t, _mm256_permutevar8x32_ps(acc[t], _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
}
#endif

/* Groups of 8 rows x tiles of up to QX_BLK_TT activation rows; the first tile of a group prefetches a later group. */
QX_INLINE void qx_gemm_blk_rows(int type, int k, const uint8_t *w, size_t ldw, int nr, const uint8_t *x, size_t ldx,
                                int nt, float *y, size_t ldy) {
    const int nb = k / 32;
    const size_t per = qx_pf_lines(8 * ldw, nb), ahead = qx_dec_ahead(8 * ldw);
    for (int g = 0; g < nr; g += 8) {
        const uint8_t *rp[8];
        for (int i = 0; i < 8; ++i) rp[i] = g + i < nr ? w + ldw * (size_t)(g + i) : NULL;
        const int n = nr - g < 8 ? nr - g : 8;
        const uint8_t *next = w + ldw * (size_t)g + ahead;
#if defined(QX_VNNI)
        if (n == 8) {
            for (int t = 0; t < nt; t += QX_BLK_TT) {
                const uint8_t *xt = x + ldx * (size_t)t;
                float *yt = y + ldy * (size_t)t + g;
                const uint8_t *wg = w + ldw * (size_t)g;
                const size_t pt = t == 0 ? per : 0;
                switch (nt - t) {
                case 1: qx_blk_dec8(type, 1, nb, wg, ldw, xt, ldx, yt, ldy, next, pt); break;
                case 2: qx_blk_dec8(type, 2, nb, wg, ldw, xt, ldx, yt, ldy, next, pt); break;
                case 3: qx_blk_dec8(type, 3, nb, wg, ldw, xt, ldx, yt, ldy, next, pt); break;
                default: qx_blk_dec8(type, 4, nb, wg, ldw, xt, ldx, yt, ldy, next, pt); break;
                }
            }
            continue;
        }
#endif
        for (int t = 0; t < nt; t += QX_BLK_TT) {
            const uint8_t *xt = x + ldx * (size_t)t;
            float *yt = y + ldy * (size_t)t + g;
            const size_t pt = t == 0 ? per : 0;
            switch (nt - t) { /* each TT a constant, so the tile's loops unroll */
            case 1: qx_blk_rows8(type, 1, nb, rp, xt, ldx, yt, ldy, n, next, 8 * ldw, pt); break;
            case 2: qx_blk_rows8(type, 2, nb, rp, xt, ldx, yt, ldy, n, next, 8 * ldw, pt); break;
            case 3: qx_blk_rows8(type, 3, nb, rp, xt, ldx, yt, ldy, n, next, 8 * ldw, pt); break;
            default: qx_blk_rows8(type, 4, nb, rp, xt, ldx, yt, ldy, n, next, 8 * ldw, pt); break;
            }
        }
    }
}

/* The gemm block: transposed tiles for prefill with VNNI, else qx_gemm_blk_rows. */
QX_INLINE void qx_gemm_blk(int type, int k, const uint8_t *w, size_t ldw, int nr, const uint8_t *x, size_t ldx, int nt,
                           float *y, size_t ldy) {
#if defined(QX_VNNI)
    if (nt >= QX_BLK_T_MIN) {
        qx_gemm_sum_t(type, k, w, ldw, nr, x, ldx, nt, y, ldy);
        return;
    }
#endif
    qx_gemm_blk_rows(type, k, w, ldw, nr, x, ldx, nt, y, ldy);
}

/* One row (vec_dot): per block the 8 lanes summed, then the scalar fma. */
QX_INLINE void qx_vec_dot_blk(int type, int n, float *s, const uint8_t *w, const void *vy) {
    const block_q8_0 *y = vy;
    const size_t bs = qx_wblock(type);
    float acc = 0.0f;
    for (int b = 0; b < n / 32; ++b) {
        __m256i u, v;
        float d, m;
        qx_wprep(type, w + bs * (size_t)b, &u, &v, &d, &m);
        (void)m;
        const __m256i a = _mm256_loadu_si256((const __m256i *)y[b].qs);
        const int32_t sumi = qx_hsum_i32(qx_lanes(type, u, v, a, qx_acorr(type, a)));
        acc = fmaf((float)sumi, d * qx_h2f(y[b].d), acc);
    }
    *s = acc;
}

static void qx_vec_dot_q8_0_blk(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    qx_vec_dot_blk(QX_Q8_0, n, s, vx, vy);
}

static void qx_vec_dot_q5_0_blk(int n, float *restrict s, const void *restrict vx, const void *restrict vy) {
    qx_vec_dot_blk(QX_Q5_0, n, s, vx, vy);
}

#endif
