/*
 * float_avx512.c — F32, F16 and BF16 weight kernels with AVX-512 (and F16C),
 * giving exactly the bits of kernels_portable.c:
 *   - vec_dot (one activation row): ggml's AVX-512 order, 4 accumulators of
 *     16 lanes over steps of 64 (BF16: 2 accumulators, one per half of a
 *     step), the accumulators added as (a0+a2)+(a1+a3), the 16 lanes reduced
 *     as _mm512_reduce_add_ps does, the tail in double (F16/BF16) or float;
 *   - the tinyBLAS order picked per activation row by select (n_rows >= 2):
 *     one 16-lane accumulator per output over steps of 16 (BF16: 32);
 *   - gemm: the tinyBLAS order for tiles of 4 weight rows × 4 activation
 *     rows held in 16 registers, so each loaded vector serves 4 outputs.
 * BF16 products of a pair are added one at a time (odd then even element, as
 * vdpbf16ps specifies) with a separate multiply and add, as the portable code
 * does: vdpbf16ps itself flushes subnormals, so it is not used.
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

/* _mm512_reduce_add_ps's order: 256-bit halves, 128-bit halves, then (0+2)+(1+3). */
AI float red16(__m512 v) {
    const __m256 t3 = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    const __m128 t6 = _mm_add_ps(_mm256_castps256_ps128(t3), _mm256_extractf128_ps(t3, 1));
    const __m128 t7 = _mm_add_ps(t6, _mm_movehl_ps(t6, t6));
    return _mm_cvtss_f32(_mm_add_ss(t7, _mm_movehdup_ps(t7)));
}

AI __m512 ld_f32(const void *p, int i) { return _mm512_loadu_ps((const float *)p + i); }
AI __m512 ld_f16(const void *p, int i) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const el_fp16 *)p + i))); }
/* 32 bf16 at p + i: lane l gets element 2l+1 (odd) and 2l (even) as floats. */
AI __m512 bf_odd(__m512i u) { return _mm512_castsi512_ps(_mm512_and_si512(u, _mm512_set1_epi32((int)0xFFFF0000u))); }
AI __m512 bf_even(__m512i u) { return _mm512_castsi512_ps(_mm512_slli_epi32(u, 16)); }
AI __m512i ld_bf(const void *p, int i) { return _mm512_loadu_si512((const void *)((const el_bf16 *)p + i)); }
/* c += odd product, then c += even product, each product rounded then added */
AI __m512 bf_step(__m512 c, __m512i x, __m512i y) {
    c = _mm512_add_ps(c, _mm512_mul_ps(bf_odd(x), bf_odd(y)));
    return _mm512_add_ps(c, _mm512_mul_ps(bf_even(x), bf_even(y)));
}

/* ---- one-token dot products (ggml's AVX-512 vec_dot order) ---- */

static void vec_dot_f32(int n, float *s, const void *vx, const void *vy) {
    const float *x = vx, *y = vy;
    const int np = n & ~63;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int i = 0; i < np; i += 64) {
        a0 = _mm512_fmadd_ps(ld_f32(x, i), ld_f32(y, i), a0);
        a1 = _mm512_fmadd_ps(ld_f32(x, i + 16), ld_f32(y, i + 16), a1);
        a2 = _mm512_fmadd_ps(ld_f32(x, i + 32), ld_f32(y, i + 32), a2);
        a3 = _mm512_fmadd_ps(ld_f32(x, i + 48), ld_f32(y, i + 48), a3);
    }
    float sumf = red16(_mm512_add_ps(_mm512_add_ps(a0, a2), _mm512_add_ps(a1, a3)));
    for (int i = np; i < n; ++i) sumf += x[i] * y[i];
    *s = sumf;
}

static void vec_dot_f16(int n, float *s, const void *vx, const void *vy) {
    const el_fp16 *x = vx, *y = vy;
    const int np = n & ~63;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int i = 0; i < np; i += 64) {
        a0 = _mm512_fmadd_ps(ld_f16(x, i), ld_f16(y, i), a0);
        a1 = _mm512_fmadd_ps(ld_f16(x, i + 16), ld_f16(y, i + 16), a1);
        a2 = _mm512_fmadd_ps(ld_f16(x, i + 32), ld_f16(y, i + 32), a2);
        a3 = _mm512_fmadd_ps(ld_f16(x, i + 48), ld_f16(y, i + 48), a3);
    }
    double sumf = (double)red16(_mm512_add_ps(_mm512_add_ps(a0, a2), _mm512_add_ps(a1, a3)));
    for (int i = np; i < n; ++i) sumf += (double)(el_fp16_to_fp32(x[i]) * el_fp16_to_fp32(y[i]));
    *s = (float)sumf;
}

static void vec_dot_bf16(int n, float *s, const void *vx, const void *vy) {
    const el_bf16 *x = vx, *y = vy;
    __m512 c0 = _mm512_setzero_ps(), c1 = c0;
    int i = 0;
    for (; i + 64 <= n; i += 64) {
        c0 = bf_step(c0, ld_bf(x, i), ld_bf(y, i));
        c1 = bf_step(c1, ld_bf(x, i + 32), ld_bf(y, i + 32));
    }
    double sumf = (double)red16(c0);
    sumf += (double)red16(c1);
    for (; i < n; ++i) sumf += (double)(el_bf16_to_fp32(x[i]) * el_bf16_to_fp32(y[i]));
    *s = (float)sumf;
}

/* ---- tinyBLAS order (batched products) ---- */

static void vec_dot_f32_tinyblas(int n, float *s, const void *vx, const void *vy) {
    __m512 c = _mm512_setzero_ps();
    for (int i = 0; i < n; i += 16) c = _mm512_fmadd_ps(ld_f32(vx, i), ld_f32(vy, i), c);
    *s = red16(c);
}

static void vec_dot_f16_tinyblas(int n, float *s, const void *vx, const void *vy) {
    __m512 c = _mm512_setzero_ps();
    for (int i = 0; i < n; i += 16) c = _mm512_fmadd_ps(ld_f16(vx, i), ld_f16(vy, i), c);
    *s = red16(c);
}

static void vec_dot_bf16_tinyblas(int n, float *s, const void *vx, const void *vy) {
    __m512 c = _mm512_setzero_ps();
    for (int i = 0; i < n; i += 32) c = bf_step(c, ld_bf(vx, i), ld_bf(vy, i));
    *s = red16(c);
}

static el_vec_dot_fn select_f32(int n_rows, int row, int k) { (void)row; return n_rows >= 2 && k % 16 == 0 ? vec_dot_f32_tinyblas : NULL; }
static el_vec_dot_fn select_f16(int n_rows, int row, int k) { (void)row; return n_rows >= 2 && k % 16 == 0 ? vec_dot_f16_tinyblas : NULL; }
static el_vec_dot_fn select_bf16(int n_rows, int row, int k) { (void)row; return n_rows >= 2 && k % 32 == 0 ? vec_dot_bf16_tinyblas : NULL; }

/* ---- gemm: RM × RN tiles of tinyBLAS accumulators ---- */

#define TILE_M 4
#define TILE_N 4

/* F32/F16: acc[i][j] = fma(w_i, x_j, acc) over steps of 16, then reduced. */
#define DEF_TILE(NAME, LD, ESZ)                                                                              \
    AI void NAME(int k, const uint8_t *w, size_t ldw, int rm, const uint8_t *x, size_t ldx, int rn, float *y, \
                 size_t ldy) {                                                                               \
        __m512 acc[TILE_M][TILE_N];                                                                          \
        for (int i = 0; i < rm; i++)                                                                         \
            for (int j = 0; j < rn; j++) acc[i][j] = _mm512_setzero_ps();                                    \
        for (int kk = 0; kk < k; kk += 16) {                                                                 \
            __m512 wv[TILE_M];                                                                               \
            for (int i = 0; i < rm; i++) wv[i] = LD(w + ldw * (size_t)i, kk);                                \
            for (int j = 0; j < rn; j++) {                                                                   \
                const __m512 xv = LD(x + ldx * (size_t)j, kk);                                               \
                for (int i = 0; i < rm; i++) acc[i][j] = _mm512_fmadd_ps(wv[i], xv, acc[i][j]);              \
            }                                                                                                \
        }                                                                                                    \
        for (int j = 0; j < rn; j++)                                                                         \
            for (int i = 0; i < rm; i++) y[ldy * (size_t)j + (size_t)i] = red16(acc[i][j]);                  \
        (void)(ESZ);                                                                                         \
    }
DEF_TILE(tile_f32, ld_f32, 4)
DEF_TILE(tile_f16, ld_f16, 2)

AI void tile_bf16(int k, const uint8_t *w, size_t ldw, int rm, const uint8_t *x, size_t ldx, int rn, float *y,
                  size_t ldy) {
    __m512 acc[TILE_M][TILE_N];
    for (int i = 0; i < rm; i++)
        for (int j = 0; j < rn; j++) acc[i][j] = _mm512_setzero_ps();
    for (int kk = 0; kk < k; kk += 32) {
        __m512 wo[TILE_M], we[TILE_M];
        for (int i = 0; i < rm; i++) {
            const __m512i u = ld_bf(w + ldw * (size_t)i, kk);
            wo[i] = bf_odd(u);
            we[i] = bf_even(u);
        }
        for (int j = 0; j < rn; j++) {
            const __m512i u = ld_bf(x + ldx * (size_t)j, kk);
            const __m512 xo = bf_odd(u), xe = bf_even(u);
            for (int i = 0; i < rm; i++) {
                acc[i][j] = _mm512_add_ps(acc[i][j], _mm512_mul_ps(wo[i], xo));
                acc[i][j] = _mm512_add_ps(acc[i][j], _mm512_mul_ps(we[i], xe));
            }
        }
    }
    for (int j = 0; j < rn; j++)
        for (int i = 0; i < rm; i++) y[ldy * (size_t)j + (size_t)i] = red16(acc[i][j]);
}

/* Instantiates the tile for each edge shape with constant bounds (fully unrolled, in registers). */
#define TILE_CASES(T)                                                                                       \
    switch (rm * 8 + rn) {                                                                                  \
    case 4 * 8 + 4: T(k, wp, ldw, 4, xp, ldx, 4, yp, ldy); break;                                          \
    case 4 * 8 + 3: T(k, wp, ldw, 4, xp, ldx, 3, yp, ldy); break;                                          \
    case 4 * 8 + 2: T(k, wp, ldw, 4, xp, ldx, 2, yp, ldy); break;                                          \
    case 4 * 8 + 1: T(k, wp, ldw, 4, xp, ldx, 1, yp, ldy); break;                                          \
    case 3 * 8 + 4: T(k, wp, ldw, 3, xp, ldx, 4, yp, ldy); break;                                          \
    case 3 * 8 + 3: T(k, wp, ldw, 3, xp, ldx, 3, yp, ldy); break;                                          \
    case 3 * 8 + 2: T(k, wp, ldw, 3, xp, ldx, 2, yp, ldy); break;                                          \
    case 3 * 8 + 1: T(k, wp, ldw, 3, xp, ldx, 1, yp, ldy); break;                                          \
    case 2 * 8 + 4: T(k, wp, ldw, 2, xp, ldx, 4, yp, ldy); break;                                          \
    case 2 * 8 + 3: T(k, wp, ldw, 2, xp, ldx, 3, yp, ldy); break;                                          \
    case 2 * 8 + 2: T(k, wp, ldw, 2, xp, ldx, 2, yp, ldy); break;                                          \
    case 2 * 8 + 1: T(k, wp, ldw, 2, xp, ldx, 1, yp, ldy); break;                                          \
    case 1 * 8 + 4: T(k, wp, ldw, 1, xp, ldx, 4, yp, ldy); break;                                          \
    case 1 * 8 + 3: T(k, wp, ldw, 1, xp, ldx, 3, yp, ldy); break;                                          \
    case 1 * 8 + 2: T(k, wp, ldw, 1, xp, ldx, 2, yp, ldy); break;                                          \
    default: T(k, wp, ldw, 1, xp, ldx, 1, yp, ldy); break;                                                 \
    }

/* Outputs not in the tinyBLAS order (one activation row, or k not a multiple of the step): vec_dot. */
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

/* Activations to F16: vcvtps2ph rounds as el_fp32_to_fp16; NaNs as there (0x7E00 | sign). */
static void quant_f16(const float *src, void *dst, int64_t n) {
    el_fp16 *d = dst;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 v = _mm512_loadu_ps(src + i);
        __m256i h = _mm512_cvtps_ph(v, RNE);
        const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        if (nan)
            h = _mm256_mask_blend_epi16(nan, h, _mm256_or_si256(_mm256_and_si256(h, _mm256_set1_epi16((short)0x8000)),
                                                                _mm256_set1_epi16(0x7E00)));
        _mm256_storeu_si256((__m256i *)(d + i), h);
    }
    for (; i < n; i++) d[i] = el_fp32_to_fp16(src[i]);
}

const el_cpu_type_kernels el_cpu_kernels_float_avx512[EL_TYPE_COUNT] = {
    [EL_TYPE_F32] = {EL_TYPE_F32, vec_dot_f32, NULL, select_f32, gemm_f32},
    [EL_TYPE_F16] = {EL_TYPE_F16, vec_dot_f16, quant_f16, select_f16, gemm_f16},
    [EL_TYPE_BF16] = {EL_TYPE_BF16, vec_dot_bf16, NULL, select_bf16, gemm_bf16},
};
#endif
