/*
 * float_avx2.c — F32, F16 and BF16 weight kernels with AVX2, FMA and F16C,
 * giving exactly the bits of kernels_portable.c (see x86/float_avx512.c for
 * the orders). The 16-lane accumulators of ggml's AVX-512 order are pairs of
 * 256-bit registers (lanes 0-7 and 8-15); the 16-lane reduction then starts
 * with one add of the pair (lane i+8 onto lane i) and goes on as on 128-bit
 * halves.
 */
#if defined(__x86_64__)
#include <immintrin.h>

/* No FMA contraction of the scalar tails (clang; GCC does not contract in ISO C mode). */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#include "backend/cpu/isa_tables.h"
#include "backend/cpu/kernel_types.h"
#include "package/quants.h"
#include "util/fp16.h"

#define RNE (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define AI static inline __attribute__((always_inline))

/* A 16-lane vector as two halves. */
typedef struct { __m256 lo, hi; } v16;

AI v16 v16_zero(void) { v16 r = {_mm256_setzero_ps(), _mm256_setzero_ps()}; return r; }
AI v16 v16_add(v16 a, v16 b) { v16 r = {_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)}; return r; }
AI v16 v16_fma(v16 a, v16 b, v16 c) { v16 r = {_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)}; return r; }

AI float red16(v16 v) {
    const __m256 t3 = _mm256_add_ps(v.lo, v.hi);
    const __m128 t6 = _mm_add_ps(_mm256_castps256_ps128(t3), _mm256_extractf128_ps(t3, 1));
    const __m128 t7 = _mm_add_ps(t6, _mm_movehl_ps(t6, t6));
    return _mm_cvtss_f32(_mm_add_ss(t7, _mm_movehdup_ps(t7)));
}

AI v16 ld_f32(const void *p, int i) {
    const float *f = (const float *)p + i;
    v16 r = {_mm256_loadu_ps(f), _mm256_loadu_ps(f + 8)};
    return r;
}
AI v16 ld_f16(const void *p, int i) {
    const el_fp16 *h = (const el_fp16 *)p + i;
    v16 r = {_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h)), _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + 8)))};
    return r;
}
/* 16 bf16 at p + i (8 pairs): odd elements, even elements as floats. */
AI __m256 bf_odd(__m256i u) { return _mm256_castsi256_ps(_mm256_and_si256(u, _mm256_set1_epi32((int)0xFFFF0000u))); }
AI __m256 bf_even(__m256i u) { return _mm256_castsi256_ps(_mm256_slli_epi32(u, 16)); }
AI __m256i ld_bf(const void *p, int i) { return _mm256_loadu_si256((const __m256i *)((const el_bf16 *)p + i)); }
AI __m256 bf_step(__m256 c, __m256i x, __m256i y) {
    c = _mm256_add_ps(c, _mm256_mul_ps(bf_odd(x), bf_odd(y)));
    return _mm256_add_ps(c, _mm256_mul_ps(bf_even(x), bf_even(y)));
}
/* 32 bf16 at p + i into the 16 lanes (lo: pairs 0-7, hi: pairs 8-15). */
AI v16 bf_step16(v16 c, const void *x, const void *y, int i) {
    v16 r = {bf_step(c.lo, ld_bf(x, i), ld_bf(y, i)), bf_step(c.hi, ld_bf(x, i + 16), ld_bf(y, i + 16))};
    return r;
}

/* ---- one-token dot products ---- */

static void vec_dot_f32(int n, float *s, const void *vx, const void *vy) {
    const float *x = vx, *y = vy;
    const int np = n & ~63;
    v16 a0 = v16_zero(), a1 = a0, a2 = a0, a3 = a0;
    for (int i = 0; i < np; i += 64) {
        a0 = v16_fma(ld_f32(x, i), ld_f32(y, i), a0);
        a1 = v16_fma(ld_f32(x, i + 16), ld_f32(y, i + 16), a1);
        a2 = v16_fma(ld_f32(x, i + 32), ld_f32(y, i + 32), a2);
        a3 = v16_fma(ld_f32(x, i + 48), ld_f32(y, i + 48), a3);
    }
    float sumf = red16(v16_add(v16_add(a0, a2), v16_add(a1, a3)));
    for (int i = np; i < n; ++i) sumf += x[i] * y[i];
    *s = sumf;
}

static void vec_dot_f16(int n, float *s, const void *vx, const void *vy) {
    const el_fp16 *x = vx, *y = vy;
    const int np = n & ~63;
    v16 a0 = v16_zero(), a1 = a0, a2 = a0, a3 = a0;
    for (int i = 0; i < np; i += 64) {
        a0 = v16_fma(ld_f16(x, i), ld_f16(y, i), a0);
        a1 = v16_fma(ld_f16(x, i + 16), ld_f16(y, i + 16), a1);
        a2 = v16_fma(ld_f16(x, i + 32), ld_f16(y, i + 32), a2);
        a3 = v16_fma(ld_f16(x, i + 48), ld_f16(y, i + 48), a3);
    }
    double sumf = (double)red16(v16_add(v16_add(a0, a2), v16_add(a1, a3)));
    for (int i = np; i < n; ++i) sumf += (double)(el_fp16_to_fp32(x[i]) * el_fp16_to_fp32(y[i]));
    *s = (float)sumf;
}

static void vec_dot_bf16(int n, float *s, const void *vx, const void *vy) {
    const el_bf16 *x = vx, *y = vy;
    v16 c0 = v16_zero(), c1 = c0;
    int i = 0;
    for (; i + 64 <= n; i += 64) {
        c0 = bf_step16(c0, x, y, i);
        c1 = bf_step16(c1, x, y, i + 32);
    }
    double sumf = (double)red16(c0);
    sumf += (double)red16(c1);
    for (; i < n; ++i) sumf += (double)(el_bf16_to_fp32(x[i]) * el_bf16_to_fp32(y[i]));
    *s = (float)sumf;
}

/* ---- tinyBLAS order ---- */

static void vec_dot_f32_tinyblas(int n, float *s, const void *vx, const void *vy) {
    v16 c = v16_zero();
    for (int i = 0; i < n; i += 16) c = v16_fma(ld_f32(vx, i), ld_f32(vy, i), c);
    *s = red16(c);
}

static void vec_dot_f16_tinyblas(int n, float *s, const void *vx, const void *vy) {
    v16 c = v16_zero();
    for (int i = 0; i < n; i += 16) c = v16_fma(ld_f16(vx, i), ld_f16(vy, i), c);
    *s = red16(c);
}

static void vec_dot_bf16_tinyblas(int n, float *s, const void *vx, const void *vy) {
    v16 c = v16_zero();
    for (int i = 0; i < n; i += 32) c = bf_step16(c, vx, vy, i);
    *s = red16(c);
}

static el_vec_dot_fn select_f32(int n_rows, int row, int k) { (void)row; return n_rows >= 2 && k % 16 == 0 ? vec_dot_f32_tinyblas : NULL; }
static el_vec_dot_fn select_f16(int n_rows, int row, int k) { (void)row; return n_rows >= 2 && k % 16 == 0 ? vec_dot_f16_tinyblas : NULL; }
static el_vec_dot_fn select_bf16(int n_rows, int row, int k) { (void)row; return n_rows >= 2 && k % 32 == 0 ? vec_dot_bf16_tinyblas : NULL; }

/* ---- gemm: 2 × 2 tiles (8 accumulator registers of the 16) ---- */

#define TILE_M 2
#define TILE_N 2

/* F32/F16: the two halves of every 16-lane step are independent lanes, done one after the other. */
#define DEF_TILE(NAME, LD)                                                                                   \
    AI void NAME(int k, const uint8_t *w, size_t ldw, int rm, const uint8_t *x, size_t ldx, int rn, float *y, \
                 size_t ldy) {                                                                               \
        v16 acc[TILE_M][TILE_N];                                                                             \
        for (int i = 0; i < rm; i++)                                                                         \
            for (int j = 0; j < rn; j++) acc[i][j] = v16_zero();                                             \
        for (int kk = 0; kk < k; kk += 16) {                                                                 \
            v16 wv[TILE_M];                                                                                  \
            for (int i = 0; i < rm; i++) wv[i] = LD(w + ldw * (size_t)i, kk);                                \
            for (int j = 0; j < rn; j++) {                                                                   \
                const v16 xv = LD(x + ldx * (size_t)j, kk);                                                  \
                for (int i = 0; i < rm; i++) acc[i][j] = v16_fma(wv[i], xv, acc[i][j]);                      \
            }                                                                                                \
        }                                                                                                    \
        for (int j = 0; j < rn; j++)                                                                         \
            for (int i = 0; i < rm; i++) y[ldy * (size_t)j + (size_t)i] = red16(acc[i][j]);                  \
    }
DEF_TILE(tile_f32, ld_f32)
DEF_TILE(tile_f16, ld_f16)

AI void tile_bf16(int k, const uint8_t *w, size_t ldw, int rm, const uint8_t *x, size_t ldx, int rn, float *y,
                  size_t ldy) {
    v16 acc[TILE_M][TILE_N];
    for (int i = 0; i < rm; i++)
        for (int j = 0; j < rn; j++) acc[i][j] = v16_zero();
    for (int kk = 0; kk < k; kk += 32)
        for (int j = 0; j < rn; j++)
            for (int i = 0; i < rm; i++) acc[i][j] = bf_step16(acc[i][j], w + ldw * (size_t)i, x + ldx * (size_t)j, kk);
    for (int j = 0; j < rn; j++)
        for (int i = 0; i < rm; i++) y[ldy * (size_t)j + (size_t)i] = red16(acc[i][j]);
}

#define TILE_CASES(T)                                                                                       \
    switch (rm * 8 + rn) {                                                                                  \
    case 2 * 8 + 2: T(k, wp, ldw, 2, xp, ldx, 2, yp, ldy); break;                                          \
    case 2 * 8 + 1: T(k, wp, ldw, 2, xp, ldx, 1, yp, ldy); break;                                          \
    case 1 * 8 + 2: T(k, wp, ldw, 1, xp, ldx, 2, yp, ldy); break;                                          \
    default: T(k, wp, ldw, 1, xp, ldx, 1, yp, ldy); break;                                                 \
    }

static void gemm_by_dot(el_vec_dot_fn dot, int k, const uint8_t *w, size_t ldw, int nr, const uint8_t *x, size_t ldx,
                        int nt, float *y, size_t ldy) {
    for (int t = 0; t < nt; t++)
        for (int r = 0; r < nr; r++) dot(k, &y[ldy * (size_t)t + (size_t)r], w + ldw * (size_t)r, x + ldx * (size_t)t);
}

#define DEF_GEMM(NAME, TILE, DOT, STEP)                                                                    \
    static void NAME(int k, const void *vw, size_t ldw, int nr, const void *vx, size_t ldx, int t0, int nt,  \
                     int n_act, float *y, size_t ldy) {                                                    \
        (void)t0;                                                                                          \
        const uint8_t *w = vw, *x = vx;                                                                    \
        if (!(n_act >= 2 && k % (STEP) == 0)) {                                                            \
            gemm_by_dot(DOT, k, w, ldw, nr, x, ldx, nt, y, ldy);                                           \
            return;                                                                                        \
        }                                                                                                  \
        for (int r = 0; r < nr; r += TILE_M) {                                                             \
            const int rm = nr - r < TILE_M ? nr - r : TILE_M;                                              \
            for (int t = 0; t < nt; t += TILE_N) {                                                         \
                const int rn = nt - t < TILE_N ? nt - t : TILE_N;                                          \
                const uint8_t *wp = w + ldw * (size_t)r, *xp = x + ldx * (size_t)t;                        \
                float *yp = y + ldy * (size_t)t + (size_t)r;                                               \
                TILE_CASES(TILE)                                                                           \
            }                                                                                              \
        }                                                                                                  \
    }
DEF_GEMM(gemm_f32, tile_f32, vec_dot_f32, 16)
DEF_GEMM(gemm_f16, tile_f16, vec_dot_f16, 16)
DEF_GEMM(gemm_bf16, tile_bf16, vec_dot_bf16, 32)

/* Activations to F16: vcvtps2ph rounds as el_fp32_to_fp16; a group with a NaN goes the scalar way. */
static void quant_f16(const float *src, void *dst, int64_t n) {
    el_fp16 *d = dst;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(src + i);
        if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q))) {
            for (int l = 0; l < 8; l++) d[i + l] = el_fp32_to_fp16(src[i + l]);
            continue;
        }
        _mm_storeu_si128((__m128i *)(d + i), _mm256_cvtps_ph(v, RNE));
    }
    for (; i < n; i++) d[i] = el_fp32_to_fp16(src[i]);
}

const el_cpu_type_kernels el_cpu_kernels_float_avx2[EL_TYPE_COUNT] = {
    [EL_TYPE_F32] = {EL_TYPE_F32, vec_dot_f32, NULL, select_f32, gemm_f32},
    [EL_TYPE_F16] = {EL_TYPE_F16, vec_dot_f16, quant_f16, select_f16, gemm_f16},
    [EL_TYPE_BF16] = {EL_TYPE_BF16, vec_dot_bf16, NULL, select_bf16, gemm_bf16},
};
#endif
