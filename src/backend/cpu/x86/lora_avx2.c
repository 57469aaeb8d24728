/*
 * lora_avx2.c — the B products of a LoRA term with AVX2 + FMA + F16C, the
 * AVX2 table's counterpart of x86/lora_avx512.c (same contracts, same
 * operations per output lane for lane, 8 output rows per 256-bit vector
 * instead of 16 per 512-bit one; lora_kernels.c calls these when the AVX2
 * kernel table is in use). The AVX2 table computes the AVX-512 orders
 * exactly (x86/float_avx2.c), so the orders here are lora_avx512.c's:
 *
 *   el_lora_b1_avx2: one activation row, B rows of k < 64 values (vec_dot's
 *     scalar tail: F32 a float sum from +0 of float products in index
 *     order; F16 a double sum of the float products of the converted halves,
 *     rounded to float at the end), y[r] = y[r] + dot · s for r < nr;
 *   el_lora_bn_avx2: nt activation rows in the tinyBLAS order (k a multiple
 *     of 16, k <= 64: per output 16 lanes of fma over steps of 16 from 0,
 *     then red16's tree (l, l+8), (l, l+4), (0, 2) + (1, 3)), rows r < nr16
 *     (a multiple of 16), y[t * ldy + r] = y + dot · s.
 *
 * Products and adds of the scalar orders are separate instructions (no FMA
 * contraction: ISO C mode for GCC, the pragma for clang).
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

void el_lora_b1_avx2(int type, int k, const void *w, size_t ldw, int nr, const void *x, float s, float *y);
void el_lora_bn_avx2(int type, int k, const void *w, size_t ldw, int nr16, const void *x, size_t ldx, int nt,
                     float s, float *y, size_t ldy);

#define B1_PF 16 /* B rows prefetched ahead (two blocks of 8): decode reads B from memory once per token */

/* Prefetches B row r (row_bytes bytes) into L1, when r < nr. */
static inline void pf_row(const void *w, size_t ldw, int r, int nr, size_t row_bytes) {
    if (r >= nr) return;
    const char *p = (const char *)w + ldw * (size_t)r;
    for (size_t o = 0; o < row_bytes; o += 64) _mm_prefetch(p + o, _MM_HINT_T0);
}

/* Row l (< 8) of a tile of 8 B rows as floats (exact), k values from w's row. */
static void tile_row(int type, int k, const uint8_t *wr, float *dst) {
    if (type == EL_TYPE_F32) {
        const float *f = (const float *)wr;
        int i = 0;
        for (; i + 8 <= k; i += 8) _mm256_storeu_ps(dst + i, _mm256_loadu_ps(f + i));
        for (; i < k; i++) dst[i] = f[i];
    } else {
        const el_fp16 *h = (const el_fp16 *)wr;
        int i = 0;
        for (; i + 8 <= k; i += 8) _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + i))));
        for (; i < k; i++) dst[i] = el_fp16_to_fp32(h[i]);
    }
}

void el_lora_b1_avx2(int type, int k, const void *w, size_t ldw, int nr, const void *x, float s, float *y) {
    const __m256 sv = _mm256_set1_ps(s);
    const __m256i idx = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(k));
    float xf[64];
    if (type == EL_TYPE_F32)
        for (int i = 0; i < k; i++) xf[i] = ((const float *)x)[i];
    else
        for (int i = 0; i < k; i++) xf[i] = el_fp16_to_fp32(((const el_fp16 *)x)[i]);
    float tile[8 * 64];
    int r = 0;
    for (; r + 8 <= nr; r += 8) {
        for (int l = 0; l < 8; l++) {
            pf_row(w, ldw, r + B1_PF + l, nr, (type == EL_TYPE_F32 ? 4u : 2u) * (size_t)k);
            tile_row(type, k, (const uint8_t *)w + ldw * (size_t)(r + l), tile + l * k);
        }
        __m256 d;
        if (type == EL_TYPE_F32) {
            __m256 acc = _mm256_setzero_ps();
            for (int i = 0; i < k; i++)
                acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_i32gather_ps(tile + i, idx, 4), _mm256_set1_ps(xf[i])));
            d = acc;
        } else {
            __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
            for (int i = 0; i < k; i++) {
                const __m256 p = _mm256_mul_ps(_mm256_i32gather_ps(tile + i, idx, 4), _mm256_set1_ps(xf[i]));
                lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(p)));
                hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(p, 1)));
            }
            d = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm256_cvtpd_ps(lo)), _mm256_cvtpd_ps(hi), 1);
        }
        _mm256_storeu_ps(y + r, _mm256_add_ps(_mm256_loadu_ps(y + r), _mm256_mul_ps(d, sv)));
    }
    for (; r < nr; r++) {
        const uint8_t *wr = (const uint8_t *)w + ldw * (size_t)r;
        float ab;
        if (type == EL_TYPE_F32) {
            float sumf = 0.0f;
            for (int i = 0; i < k; i++) sumf += ((const float *)wr)[i] * xf[i];
            ab = sumf * s;
        } else {
            double sumf = 0.0;
            for (int i = 0; i < k; i++) sumf += (double)(el_fp16_to_fp32(((const el_fp16 *)wr)[i]) * xf[i]);
            ab = (float)sumf * s;
        }
        y[r] = y[r] + ab;
    }
}

#define BN_TBUF 512 /* transposed 8-row vectors per group (16 KiB) */
#define BN_PF 2     /* activation rows of y prefetched ahead */

void el_lora_bn_avx2(int type, int k, const void *w, size_t ldw, int nr16, const void *x, size_t ldx, int nt,
                     float s, float *y, size_t ldy) {
    const __m256 sv = _mm256_set1_ps(s);
    __m256 T[BN_TBUF]; /* T[b * k + i]: element i of the 8 rows of block b of the group */
    const int gb = (BN_TBUF / k) & ~1; /* 8-row blocks per group (even: groups of 16-row units) */
    const __m256i idx = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(k));
    for (int r0 = 0; r0 < nr16; r0 += 8 * gb) {
        const int nb = (nr16 - r0) / 8 < gb ? (nr16 - r0) / 8 : gb;
        for (int b = 0; b < nb; b++) {
            float tile[8 * 64];
            for (int l = 0; l < 8; l++) tile_row(type, k, (const uint8_t *)w + ldw * (size_t)(r0 + 8 * b + l), tile + l * k);
            for (int i = 0; i < k; i++) T[b * k + i] = _mm256_i32gather_ps(tile + i, idx, 4);
        }
        for (int t = 0; t < nt; t++) {
            if (t + BN_PF < nt)
                for (int b = 0; b < nb; b += 2)
                    _mm_prefetch((const char *)(y + ldy * (size_t)(t + BN_PF) + (size_t)(r0 + 8 * b)), _MM_HINT_T0);
            float xf[64];
            const uint8_t *xr = (const uint8_t *)x + ldx * (size_t)t;
            tile_row(type, k, xr, xf);
            float *yr = y + ldy * (size_t)t + (size_t)r0;
            for (int b = 0; b < nb; b++) {
                const __m256 *Tb = T + b * k;
                /* lane l of the 16: fma over steps j from 0; then (l, l+8) as soon as both are done */
                __m256 h[8];
                for (int l = 0; l < 8; l++) {
                    __m256 a0 = _mm256_fmadd_ps(Tb[l], _mm256_set1_ps(xf[l]), _mm256_setzero_ps());
                    __m256 a1 = _mm256_fmadd_ps(Tb[l + 8], _mm256_set1_ps(xf[l + 8]), _mm256_setzero_ps());
                    for (int j = 16; j < k; j += 16) {
                        a0 = _mm256_fmadd_ps(Tb[j + l], _mm256_set1_ps(xf[j + l]), a0);
                        a1 = _mm256_fmadd_ps(Tb[j + l + 8], _mm256_set1_ps(xf[j + l + 8]), a1);
                    }
                    h[l] = _mm256_add_ps(a0, a1);
                }
                for (int l = 0; l < 4; l++) h[l] = _mm256_add_ps(h[l], h[l + 4]);
                const __m256 d = _mm256_add_ps(_mm256_add_ps(h[0], h[2]), _mm256_add_ps(h[1], h[3]));
                _mm256_storeu_ps(yr + 8 * b, _mm256_add_ps(_mm256_loadu_ps(yr + 8 * b), _mm256_mul_ps(d, sv)));
            }
        }
    }
}
#endif
