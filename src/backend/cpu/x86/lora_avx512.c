/*
 * lora_avx512.c — the one-activation-row B product of a LoRA term with
 * AVX-512 (lora_kernels.c calls it when the AVX-512 kernel table is in use):
 *
 *     y[r] = y[r] + dot(B row r, x) · s      for r < nr
 *
 * where B has k < 64 values per row (the rank), F32 or F16, and dot is
 * exactly the table's vec_dot for one activation row: for k < 64 its vector
 * loop does not run, so it is the scalar tail — F32: a float sum from +0 of
 * float products in index order; F16: a double sum from 0 of the float
 * products of the converted halves, rounded to float at the end (x is the
 * activation row in F16 then). Here 16 output rows run in the 16 lanes of a
 * vector, each lane doing that row's operations in the same order, so the
 * bits are vec_dot's while the 16-deep chain of dependent adds per output
 * is no longer the decode step's bottleneck. Products and adds are separate
 * instructions (no FMA), as the scalar code is compiled. B's 16 rows are
 * read with plain loads (consecutive lines, prefetched 128 rows ahead), 16
 * columns at a time; each row's 16 products (w[i] · x[i], rounded as the
 * scalar code rounds them) are one vector multiply, the 16 product vectors
 * are transposed in registers (64 shuffles) so lane l holds row l's
 * products, and these are added in column order. At 8cae717 the columns
 * were gathered (F32: straight from B, 16 lines per gather, 88 % of this
 * function's decode samples; F16: from an L1 tile); the transpose took a
 * quarter of the function's samples away for both types (perf, decode -t 1).
 */
#if defined(__x86_64__)
#include <immintrin.h>

#include <stddef.h>
#include <stdint.h>

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#include "package/types.h"
#include "util/fp16.h"

#define B1_PF 128 /* B rows prefetched ahead (eight blocks of 16): decode reads B from memory once per token */

/* Prefetches B row r (row_bytes bytes) into L1, when r < nr. */
static inline void pf_row(const void *w, size_t ldw, int r, int nr, size_t row_bytes) {
    if (r >= nr) return;
    const char *p = (const char *)w + ldw * (size_t)r;
    for (size_t o = 0; o < row_bytes; o += 64) _mm_prefetch(p + o, _MM_HINT_T0);
}

/* In-place transpose of a 16 x 16 float matrix held as 16 row vectors (v[r] lane c = element (r, c)). */
static inline void tr16(__m512 v[16]) {
    __m512 t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(v[i], v[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(v[i], v[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        v[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
        v[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
        v[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
        v[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
    }
    /* v[4b + j] now holds, in its 128-bit lane q, column 4q + j of rows 4b .. 4b + 3 */
    for (int j = 0; j < 4; j++) {
        const __m512 a = _mm512_shuffle_f32x4(v[j], v[4 + j], 0x88), b = _mm512_shuffle_f32x4(v[j], v[4 + j], 0xDD);
        const __m512 c = _mm512_shuffle_f32x4(v[8 + j], v[12 + j], 0x88), d = _mm512_shuffle_f32x4(v[8 + j], v[12 + j], 0xDD);
        t[j] = _mm512_shuffle_f32x4(a, c, 0x88);      /* column j      (lanes q = 0) */
        t[4 + j] = _mm512_shuffle_f32x4(b, d, 0x88);  /* column 4 + j  (q = 1) */
        t[8 + j] = _mm512_shuffle_f32x4(a, c, 0xDD);  /* column 8 + j  (q = 2) */
        t[12 + j] = _mm512_shuffle_f32x4(b, d, 0xDD); /* column 12 + j (q = 3) */
    }
    for (int i = 0; i < 16; i++) v[i] = t[i];
}

/* The float products w[r+l][i0+i] · x[i0+i] of 16 B rows (F32, or F16
 * widened) over the columns in mask m, transposed so lane l of p[i] is row
 * r+l's product for column i0+i; prefetches the rows B1_PF ahead. */
static inline void b1_products(int type, int k, const void *w, size_t ldw, int r, int nr, int i0, __mmask16 m, __m512 xv,
                               __m512 p[16]) {
    const size_t esz = type == EL_TYPE_F32 ? sizeof(float) : sizeof(el_fp16);
    for (int l = 0; l < 16; l++) {
        pf_row(w, ldw, r + B1_PF + l, nr, esz * (size_t)k);
        const uint8_t *wr = (const uint8_t *)w + ldw * (size_t)(r + l);
        const __m512 wv = type == EL_TYPE_F32 ? _mm512_maskz_loadu_ps(m, (const float *)wr + i0)
                                              : _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const el_fp16 *)wr + i0));
        p[l] = _mm512_mul_ps(wv, xv);
    }
    tr16(p);
}

void el_lora_b1_avx512(int type, int k, const void *w, size_t ldw, int nr, const void *x, float s, float *y);

void el_lora_b1_avx512(int type, int k, const void *w, size_t ldw, int nr, const void *x, float s, float *y) {
    const __m512 sv = _mm512_set1_ps(s);
    int r = 0;
    if (type == EL_TYPE_F32) {
        const float *xf = x;
        for (; r + 16 <= nr; r += 16) {
            /* per 16 columns: the 16 rows' products (lanes = columns, w[i] · x[i] rounded as the scalar code
             * rounds them), transposed so lane l holds row l's products, then added in column order */
            __m512 acc = _mm512_setzero_ps();
            for (int i0 = 0; i0 < k; i0 += 16) {
                const int n = k - i0 < 16 ? k - i0 : 16;
                const __mmask16 m = (__mmask16)((1u << n) - 1u);
                const __m512 xv = _mm512_maskz_loadu_ps(m, xf + i0);
                __m512 p[16];
                b1_products(EL_TYPE_F32, k, w, ldw, r, nr, i0, m, xv, p);
                for (int i = 0; i < n; i++) acc = _mm512_add_ps(acc, p[i]);
            }
            _mm512_storeu_ps(y + r, _mm512_add_ps(_mm512_loadu_ps(y + r), _mm512_mul_ps(acc, sv)));
        }
        for (; r < nr; r++) {
            const float *wr = (const float *)((const uint8_t *)w + ldw * (size_t)r);
            float sumf = 0.0f;
            for (int i = 0; i < k; i++) sumf += wr[i] * xf[i];
            const float ab = sumf * s;
            y[r] = y[r] + ab;
        }
        return;
    }
    /* F16 */
    const el_fp16 *xh = x;
    float xf[64];
    for (int i = 0; i < k; i++) xf[i] = el_fp16_to_fp32(xh[i]);
    for (; r + 16 <= nr; r += 16) {
        /* as for F32: the float products per 16 columns, transposed, then added in column order in double */
        __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
        for (int i0 = 0; i0 < k; i0 += 16) {
            const int n = k - i0 < 16 ? k - i0 : 16;
            const __mmask16 m = (__mmask16)((1u << n) - 1u);
            const __m512 xv = _mm512_maskz_loadu_ps(m, xf + i0);
            __m512 p[16];
            b1_products(EL_TYPE_F16, k, w, ldw, r, nr, i0, m, xv, p);
            for (int i = 0; i < n; i++) {
                lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm512_castps512_ps256(p[i])));
                hi = _mm512_add_pd(hi, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(p[i]), 1))));
            }
        }
        const __m512 d = _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(lo)), _mm512_cvtpd_ps(hi), 1);
        _mm512_storeu_ps(y + r, _mm512_add_ps(_mm512_loadu_ps(y + r), _mm512_mul_ps(d, sv)));
    }
    for (; r < nr; r++) {
        const el_fp16 *wr = (const el_fp16 *)((const uint8_t *)w + ldw * (size_t)r);
        double sumf = 0.0;
        for (int i = 0; i < k; i++) sumf += (double)(el_fp16_to_fp32(wr[i]) * xf[i]);
        const float ab = (float)sumf * s;
        y[r] = y[r] + ab;
    }
}

/*
 * The B product of a LoRA term for nt activation rows of a product whose
 * kernels take the tinyBLAS order (n >= 2 rows, k a multiple of 16; F32, or
 * F16 with x in F16): per output, 16 lanes accumulate fma(w[16j+l], x[16j+l])
 * over steps j from 0, then the lanes are added as red16 adds them
 * ((l, l+8), then (l, l+4), (0, 2) and (1, 3), then the two). Here the 16
 * lanes of one output become 16 vectors over 16 output rows (B's block
 * transposed once, reused by every activation row), so each output costs
 * k/16 vector FMAs' share instead of an FMA and a horizontal reduction; the
 * operations per output are the same. y[t * ldy + r] = y + dot · s for rows
 * r < nr16 (a multiple of 16; the caller does the rest), k <= 64.
 *
 * Memory order: the rows go in groups whose transposed blocks fill 16 KiB
 * (256 rows for k = 16, 64 for k = 64), and for each group the activation
 * rows go one after the other, each writing its group's outputs as one run
 * of consecutive lines of y, the next rows' runs prefetched: y's rows lie
 * out × 4 bytes apart (a page or more), so a 16-row block per activation row
 * — one line in another page each time — left every y access a demand miss
 * (at 8cae717, 70 % of this function's prefill samples fell on y's store).
 */
#define BN_TBUF 256 /* transposed vectors per group (16 KiB) */
#define BN_PF 2     /* activation rows of y prefetched ahead */

void el_lora_bn_avx512(int type, int k, const void *w, size_t ldw, int nr16, const void *x, size_t ldx, int nt,
                       float s, float *y, size_t ldy);

void el_lora_bn_avx512(int type, int k, const void *w, size_t ldw, int nr16, const void *x, size_t ldx, int nt,
                       float s, float *y, size_t ldy) {
    const __m512 sv = _mm512_set1_ps(s);
    __m512 T[BN_TBUF]; /* T[b * k + i]: element i of the 16 rows of block b of the group */
    const int gb = BN_TBUF / k; /* blocks per group (>= 4) */
    const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                           _mm512_set1_epi32(k));
    for (int r0 = 0; r0 < nr16; r0 += 16 * gb) {
        const int nb = (nr16 - r0) / 16 < gb ? (nr16 - r0) / 16 : gb;
        for (int t = 0; t < BN_PF && t < nt; t++)
            for (int b = 0; b < nb; b++) _mm_prefetch((const char *)(y + ldy * (size_t)t + (size_t)(r0 + 16 * b)), _MM_HINT_T0);
        for (int b = 0; b < nb; b++) {
            float tile[16 * 64];
            for (int l = 0; l < 16; l++) {
                const uint8_t *wr = (const uint8_t *)w + ldw * (size_t)(r0 + 16 * b + l);
                for (int i = 0; i < k; i += 16)
                    _mm512_storeu_ps(tile + l * k + i, type == EL_TYPE_F32 ? _mm512_loadu_ps((const float *)wr + i)
                                                                           : _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const el_fp16 *)wr + i))));
            }
            for (int i = 0; i < k; i++) T[b * k + i] = _mm512_i32gather_ps(idx, tile + i, 4);
        }
        for (int t = 0; t < nt; t++) {
            if (t + BN_PF < nt)
                for (int b = 0; b < nb; b++)
                    _mm_prefetch((const char *)(y + ldy * (size_t)(t + BN_PF) + (size_t)(r0 + 16 * b)), _MM_HINT_T0);
            float xf[64];
            const uint8_t *xr = (const uint8_t *)x + ldx * (size_t)t;
            for (int i = 0; i < k; i += 16)
                _mm512_storeu_ps(xf + i, type == EL_TYPE_F32 ? _mm512_loadu_ps((const float *)xr + i)
                                                             : _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const el_fp16 *)xr + i))));
            float *yr = y + ldy * (size_t)t + (size_t)r0;
            for (int b = 0; b < nb; b++) {
                const __m512 *Tb = T + b * k;
                __m512 a[16];
                for (int l = 0; l < 16; l++) a[l] = _mm512_fmadd_ps(Tb[l], _mm512_set1_ps(xf[l]), _mm512_setzero_ps());
                for (int j = 16; j < k; j += 16)
                    for (int l = 0; l < 16; l++) a[l] = _mm512_fmadd_ps(Tb[j + l], _mm512_set1_ps(xf[j + l]), a[l]);
                for (int l = 0; l < 8; l++) a[l] = _mm512_add_ps(a[l], a[l + 8]);
                for (int l = 0; l < 4; l++) a[l] = _mm512_add_ps(a[l], a[l + 4]);
                const __m512 d = _mm512_add_ps(_mm512_add_ps(a[0], a[2]), _mm512_add_ps(a[1], a[3]));
                _mm512_storeu_ps(yr + 16 * b, _mm512_add_ps(_mm512_loadu_ps(yr + 16 * b), _mm512_mul_ps(d, sv)));
            }
        }
    }
}
#endif
