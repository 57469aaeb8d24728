/*
 * attention_avx512.c — the attention kernel of attention.c with AVX-512 and
 * F16C: the same bits (see attention_impl.h for the arithmetic contract).
 * The F16 dot keeps ggml's 4 accumulators of 16 lanes and its reduction
 * tree; the F16 accumulator of V is rounded through vcvtps2ph (round to
 * nearest even, as el_fp32_to_fp16) after every multiply and every FMA.
 */
#if defined(__x86_64__)
#include <immintrin.h>

/* No FMA contraction of the scalar tails (clang; GCC does not contract in ISO C mode). */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "backend/cpu/attention_internal.h"
#include "util/fp16.h"

#define RNE (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

static inline __m512 ld16h(const el_fp16 *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)); }
static inline __m512 r16(__m512 x) { return _mm512_cvtph_ps(_mm512_cvtps_ph(x, RNE)); }

/*
 * Software prefetch into L2 of the cache row ATT_PF_ROWS rows ahead (the
 * `bytes` this KV head reads of it), issued as the kernel reads each row.
 * At 16k cells a layer's K+V (16 MiB) does not stay in L2, and the hardware
 * prefetchers did not keep up with the kernel's walk (each KV head reads a
 * slice of every row, rows 512 B apart for TinyLlama): the K and V loads
 * were a fifth of the time (perf). A prefetch never faults; the address is
 * formed as an integer, so one past the cache is no pointer arithmetic.
 */
#define ATT_PF_ROWS 32
static inline void att_prefetch_row(const el_fp16 *row, size_t stride, size_t bytes) {
    const uintptr_t p = (uintptr_t)row + (uintptr_t)ATT_PF_ROWS * stride * sizeof(el_fp16);
    for (size_t b = 0; b < bytes; b += 64) _mm_prefetch((const char *)(p + b), _MM_HINT_T1);
    _mm_prefetch((const char *)(p + bytes - 1), _MM_HINT_T1);
}

static inline void att_round_q(const float *q, float *qf, int hd) {
    int i = 0;
    for (; i + 16 <= hd; i += 16) _mm512_storeu_ps(qf + i, r16(_mm512_loadu_ps(q + i)));
    for (; i < hd; i++) qf[i] = el_fp16_to_fp32(el_fp32_to_fp16(q[i]));
}

static inline float att_dot(const el_fp16 *k, const float *qf, int n) {
    const int np = n & ~63;
    double sumf = 0.0;
    if (np > 0) {
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int i = 0; i < np; i += 64) {
            a0 = _mm512_fmadd_ps(ld16h(k + i), _mm512_loadu_ps(qf + i), a0);
            a1 = _mm512_fmadd_ps(ld16h(k + i + 16), _mm512_loadu_ps(qf + i + 16), a1);
            a2 = _mm512_fmadd_ps(ld16h(k + i + 32), _mm512_loadu_ps(qf + i + 32), a2);
            a3 = _mm512_fmadd_ps(ld16h(k + i + 48), _mm512_loadu_ps(qf + i + 48), a3);
        }
        a0 = _mm512_add_ps(a0, a2);
        a1 = _mm512_add_ps(a1, a3);
        a0 = _mm512_add_ps(a0, a1);
        const __m256 t3 = _mm256_add_ps(_mm512_castps512_ps256(a0), _mm512_extractf32x8_ps(a0, 1));
        const __m128 t6 = _mm_add_ps(_mm256_castps256_ps128(t3), _mm256_extractf128_ps(t3, 1));
        const __m128 t7 = _mm_add_ps(t6, _mm_movehl_ps(t6, t6));        /* t6[0]+t6[2], t6[1]+t6[3] */
        sumf = (double)_mm_cvtss_f32(_mm_add_ss(t7, _mm_movehdup_ps(t7)));
    }
    for (int i = np; i < n; i++) sumf += (double)(el_fp16_to_fp32(k[i]) * qf[i]);
    return (float)sumf;
}

/* The 16-lane vector (a0+a2)+(a1+a3) of one row's dot (head_dim a multiple of 64). */
static inline __m512 dot_lanes(const el_fp16 *k, const float *qf, int n) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int i = 0; i < n; i += 64) {
        a0 = _mm512_fmadd_ps(ld16h(k + i), _mm512_loadu_ps(qf + i), a0);
        a1 = _mm512_fmadd_ps(ld16h(k + i + 16), _mm512_loadu_ps(qf + i + 16), a1);
        a2 = _mm512_fmadd_ps(ld16h(k + i + 32), _mm512_loadu_ps(qf + i + 32), a2);
        a3 = _mm512_fmadd_ps(ld16h(k + i + 48), _mm512_loadu_ps(qf + i + 48), a3);
    }
    return _mm512_add_ps(_mm512_add_ps(a0, a2), _mm512_add_ps(a1, a3));
}

/*
 * Scores of 16 rows at once. Each row's 16 lanes are reduced with exactly
 * att_dot's adds (lane i+8 onto i, then i+4 onto i, then (0+2)+(1+3)), but
 * for 16 rows side by side: the vectors are transposed step by step so one
 * add serves several rows. With head_dim a multiple of 64 there is no tail,
 * and (float)(double)x is x, so the result is att_dot's.
 */
static inline __m512 reduce16x16(const __m512 v[16]) {
    __m512 t[8], u[4];
    for (int r = 0; r < 8; r++) /* [A.t3 | B.t3]: A.t3[i] = A[i] + A[i+8] */
        t[r] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * r], v[2 * r + 1], 0x44),
                             _mm512_shuffle_f32x4(v[2 * r], v[2 * r + 1], 0xEE));
    for (int r = 0; r < 4; r++) /* [A.t6 | B.t6 | C.t6 | D.t6]: t6[i] = t3[i] + t3[i+4] */
        u[r] = _mm512_add_ps(_mm512_shuffle_f32x4(t[2 * r], t[2 * r + 1], 0x88),
                             _mm512_shuffle_f32x4(t[2 * r], t[2 * r + 1], 0xDD));
    /* 128-bit lane r: [t6[0]+t6[2], t6[1]+t6[3]] of rows r, r+4 (w0) and r+8, r+12 (w1) */
    const __m512 w0 = _mm512_add_ps(_mm512_shuffle_ps(u[0], u[1], _MM_SHUFFLE(1, 0, 1, 0)),
                                    _mm512_shuffle_ps(u[0], u[1], _MM_SHUFFLE(3, 2, 3, 2)));
    const __m512 w1 = _mm512_add_ps(_mm512_shuffle_ps(u[2], u[3], _MM_SHUFFLE(1, 0, 1, 0)),
                                    _mm512_shuffle_ps(u[2], u[3], _MM_SHUFFLE(3, 2, 3, 2)));
    /* lane 4r + c: the sum of row r + 4c */
    const __m512 s = _mm512_add_ps(_mm512_shuffle_ps(w0, w1, _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm512_shuffle_ps(w0, w1, _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), s);
}

static inline void att_scores(const el_fp16 *k, size_t kstride, int cnt, const float *qf, int hd, float scale,
                              float *sc) {
    int jj = 0;
    if ((hd & 63) == 0) {
        const __m512 vs = _mm512_set1_ps(scale);
        for (; jj + 16 <= cnt; jj += 16) {
            __m512 v[16];
            for (int r = 0; r < 16; r++) v[r] = dot_lanes(k + (size_t)(jj + r) * kstride, qf, hd);
            _mm512_storeu_ps(sc + jj, _mm512_mul_ps(reduce16x16(v), vs));
        }
    }
    for (; jj < cnt; jj++) sc[jj] = att_dot(k + (size_t)jj * kstride, qf, hd) * scale;
}

static inline void att_vpass(el_fp16 *acc, const el_fp16 *v0, size_t vstride, int cnt, const float *ms,
                             const float *vs, int hd) {
    int c = 0;
    for (; c + 64 <= hd; c += 64) {
        __m512 x0 = ld16h(acc + c), x1 = ld16h(acc + c + 16), x2 = ld16h(acc + c + 32), x3 = ld16h(acc + c + 48);
        const el_fp16 *v = v0 + c;
        for (int jj = 0; jj < cnt; jj++, v += vstride) {
            if (ms[jj] != 1.0f) {
                const __m512 m = _mm512_set1_ps(ms[jj]);
                x0 = r16(_mm512_mul_ps(x0, m));
                x1 = r16(_mm512_mul_ps(x1, m));
                x2 = r16(_mm512_mul_ps(x2, m));
                x3 = r16(_mm512_mul_ps(x3, m));
            }
            const __m512 w = _mm512_set1_ps(vs[jj]);
            x0 = r16(_mm512_fmadd_ps(ld16h(v), w, x0));
            x1 = r16(_mm512_fmadd_ps(ld16h(v + 16), w, x1));
            x2 = r16(_mm512_fmadd_ps(ld16h(v + 32), w, x2));
            x3 = r16(_mm512_fmadd_ps(ld16h(v + 48), w, x3));
        }
        _mm256_storeu_si256((__m256i *)(acc + c), _mm512_cvtps_ph(x0, RNE));
        _mm256_storeu_si256((__m256i *)(acc + c + 16), _mm512_cvtps_ph(x1, RNE));
        _mm256_storeu_si256((__m256i *)(acc + c + 32), _mm512_cvtps_ph(x2, RNE));
        _mm256_storeu_si256((__m256i *)(acc + c + 48), _mm512_cvtps_ph(x3, RNE));
    }
    for (; c + 16 <= hd; c += 16) {
        __m512 x0 = ld16h(acc + c);
        const el_fp16 *v = v0 + c;
        for (int jj = 0; jj < cnt; jj++, v += vstride) {
            if (ms[jj] != 1.0f) x0 = r16(_mm512_mul_ps(x0, _mm512_set1_ps(ms[jj])));
            x0 = r16(_mm512_fmadd_ps(ld16h(v), _mm512_set1_ps(vs[jj]), x0));
        }
        _mm256_storeu_si256((__m256i *)(acc + c), _mm512_cvtps_ph(x0, RNE));
    }
    if (c < hd) {
        const el_fp16 *v = v0;
        for (int jj = 0; jj < cnt; jj++, v += vstride) {
            if (ms[jj] != 1.0f)
                for (int i = c; i < hd; i++) acc[i] = el_fp32_to_fp16(el_fp16_to_fp32(acc[i]) * ms[jj]);
            for (int i = c; i < hd; i++)
                acc[i] = el_fp32_to_fp16(fmaf(el_fp16_to_fp32(v[i]), vs[jj], el_fp16_to_fp32(acc[i])));
        }
    }
}

/* Two queries over the same rows: each V vector loaded once, two independent rounding chains. */
static inline void att_vpass2(el_fp16 *acc0, el_fp16 *acc1, const el_fp16 *v0, size_t vstride, int cnt,
                              const float *ms0, const float *vs0, const float *ms1, const float *vs1, int hd) {
    int c = 0;
    for (; c + 64 <= hd; c += 64) {
        __m512 x[4], y[4];
        for (int i = 0; i < 4; i++) {
            x[i] = ld16h(acc0 + c + 16 * i);
            y[i] = ld16h(acc1 + c + 16 * i);
        }
        const el_fp16 *v = v0 + c;
        for (int jj = 0; jj < cnt; jj++, v += vstride) {
            if (ms0[jj] != 1.0f) {
                const __m512 m = _mm512_set1_ps(ms0[jj]);
                for (int i = 0; i < 4; i++) x[i] = r16(_mm512_mul_ps(x[i], m));
            }
            if (ms1[jj] != 1.0f) {
                const __m512 m = _mm512_set1_ps(ms1[jj]);
                for (int i = 0; i < 4; i++) y[i] = r16(_mm512_mul_ps(y[i], m));
            }
            const __m512 w0 = _mm512_set1_ps(vs0[jj]), w1 = _mm512_set1_ps(vs1[jj]);
            for (int i = 0; i < 4; i++) {
                const __m512 vv = ld16h(v + 16 * i);
                x[i] = r16(_mm512_fmadd_ps(vv, w0, x[i]));
                y[i] = r16(_mm512_fmadd_ps(vv, w1, y[i]));
            }
        }
        for (int i = 0; i < 4; i++) {
            _mm256_storeu_si256((__m256i *)(acc0 + c + 16 * i), _mm512_cvtps_ph(x[i], RNE));
            _mm256_storeu_si256((__m256i *)(acc1 + c + 16 * i), _mm512_cvtps_ph(y[i], RNE));
        }
    }
    if (c < hd) {
        att_vpass(acc0 + c, v0 + c, vstride, cnt, ms0, vs0, hd - c);
        att_vpass(acc1 + c, v0 + c, vstride, cnt, ms1, vs1, hd - c);
    }
}

/*
 * Four queries of a KV head (att_span's group, or half of one of 8: e.g. all of
 * Gemma 3's heads) over the same rows: each K and V vector is loaded and
 * converted once for the four, and every query keeps its own arithmetic
 * (the same FMA chains and reduction tree for its dot, its own F16 rounding
 * chain for its accumulator), so each result is att_scores's / att_vpass's.
 */

/* The lanes (a0+a2)+(a1+a3) of four queries' dots with one K row (head_dim a multiple of 64). */
static inline void dot_lanes4(const el_fp16 *k, const float *qf, int hd, __m512 *l0, __m512 *l1, __m512 *l2,
                              __m512 *l3) {
    __m512 a[4][4];
    for (int e = 0; e < 4; e++)
        for (int j = 0; j < 4; j++) a[e][j] = _mm512_setzero_ps();
    for (int i = 0; i < hd; i += 64) {
        const __m512 k0 = ld16h(k + i), k1 = ld16h(k + i + 16), k2 = ld16h(k + i + 32), k3 = ld16h(k + i + 48);
        for (int e = 0; e < 4; e++) {
            const float *q = qf + (size_t)e * hd + i;
            a[e][0] = _mm512_fmadd_ps(k0, _mm512_loadu_ps(q), a[e][0]);
            a[e][1] = _mm512_fmadd_ps(k1, _mm512_loadu_ps(q + 16), a[e][1]);
            a[e][2] = _mm512_fmadd_ps(k2, _mm512_loadu_ps(q + 32), a[e][2]);
            a[e][3] = _mm512_fmadd_ps(k3, _mm512_loadu_ps(q + 48), a[e][3]);
        }
    }
    *l0 = _mm512_add_ps(_mm512_add_ps(a[0][0], a[0][2]), _mm512_add_ps(a[0][1], a[0][3]));
    *l1 = _mm512_add_ps(_mm512_add_ps(a[1][0], a[1][2]), _mm512_add_ps(a[1][1], a[1][3]));
    *l2 = _mm512_add_ps(_mm512_add_ps(a[2][0], a[2][2]), _mm512_add_ps(a[2][1], a[2][3]));
    *l3 = _mm512_add_ps(_mm512_add_ps(a[3][0], a[3][2]), _mm512_add_ps(a[3][1], a[3][3]));
}

/* att_dot's reduction of one row's lanes (i+8 onto i, i+4 onto i, (0+2)+(1+3)). */
static inline float reduce1(__m512 a0) {
    const __m256 t3 = _mm256_add_ps(_mm512_castps512_ps256(a0), _mm512_extractf32x8_ps(a0, 1));
    const __m128 t6 = _mm_add_ps(_mm256_castps256_ps128(t3), _mm256_extractf128_ps(t3, 1));
    const __m128 t7 = _mm_add_ps(t6, _mm_movehl_ps(t6, t6));
    return _mm_cvtss_f32(_mm_add_ss(t7, _mm_movehdup_ps(t7)));
}

static inline void att_scores_g4(const el_fp16 *k, size_t kstride, int cnt, const float *qf, int nq, int hd,
                                 float scale, float *sc) {
    if (nq != 4 || (hd & 63) != 0) {
        for (int e = 0; e < nq; e++) att_scores(k, kstride, cnt, qf + (size_t)e * hd, hd, scale, sc + e * EL_ATT_MAX_KVB);
        return;
    }
    const __m512 vsc = _mm512_set1_ps(scale);
    int jj = 0;
    for (; jj + 16 <= cnt; jj += 16) {
        __m512 l[4][16];
        for (int r = 0; r < 16; r++) {
            att_prefetch_row(k + (size_t)(jj + r) * kstride, kstride, sizeof(el_fp16) * (size_t)hd);
            dot_lanes4(k + (size_t)(jj + r) * kstride, qf, hd, &l[0][r], &l[1][r], &l[2][r], &l[3][r]);
        }
        for (int e = 0; e < 4; e++) _mm512_storeu_ps(sc + e * EL_ATT_MAX_KVB + jj, _mm512_mul_ps(reduce16x16(l[e]), vsc));
    }
    for (; jj < cnt; jj++) {
        __m512 l0, l1, l2, l3;
        dot_lanes4(k + (size_t)jj * kstride, qf, hd, &l0, &l1, &l2, &l3);
        sc[jj] = reduce1(l0) * scale;
        sc[EL_ATT_MAX_KVB + jj] = reduce1(l1) * scale;
        sc[2 * EL_ATT_MAX_KVB + jj] = reduce1(l2) * scale;
        sc[3 * EL_ATT_MAX_KVB + jj] = reduce1(l3) * scale;
    }
}

static inline void att_vpass_g4(el_fp16 *acc, const el_fp16 *v0, size_t vstride, int cnt, const float *ms,
                                const float *vs, int nq, int hd) {
    if (nq != 4) {
        int e = 0;
        for (; e + 2 <= nq; e += 2)
            att_vpass2(acc + (size_t)e * hd, acc + (size_t)(e + 1) * hd, v0, vstride, cnt, ms + e * EL_ATT_MAX_KVB,
                       vs + e * EL_ATT_MAX_KVB, ms + (e + 1) * EL_ATT_MAX_KVB, vs + (e + 1) * EL_ATT_MAX_KVB, hd);
        if (e < nq) att_vpass(acc + (size_t)e * hd, v0, vstride, cnt, ms + e * EL_ATT_MAX_KVB, vs + e * EL_ATT_MAX_KVB, hd);
        return;
    }
    int c = 0;
    for (; c + 64 <= hd; c += 64) {
        __m512 x[4][4];
        for (int e = 0; e < 4; e++)
            for (int i = 0; i < 4; i++) x[e][i] = ld16h(acc + (size_t)e * hd + c + 16 * i);
        const el_fp16 *v = v0 + c;
        for (int jj = 0; jj < cnt; jj++, v += vstride) {
            for (int e = 0; e < 4; e++) {
                const float m = ms[e * EL_ATT_MAX_KVB + jj];
                if (m != 1.0f) {
                    const __m512 mm = _mm512_set1_ps(m);
                    for (int i = 0; i < 4; i++) x[e][i] = r16(_mm512_mul_ps(x[e][i], mm));
                }
            }
            att_prefetch_row(v, vstride, 64 * sizeof(el_fp16));
            const __m512 v0v = ld16h(v), v1v = ld16h(v + 16), v2v = ld16h(v + 32), v3v = ld16h(v + 48);
            for (int e = 0; e < 4; e++) {
                const __m512 w = _mm512_set1_ps(vs[e * EL_ATT_MAX_KVB + jj]);
                x[e][0] = r16(_mm512_fmadd_ps(v0v, w, x[e][0]));
                x[e][1] = r16(_mm512_fmadd_ps(v1v, w, x[e][1]));
                x[e][2] = r16(_mm512_fmadd_ps(v2v, w, x[e][2]));
                x[e][3] = r16(_mm512_fmadd_ps(v3v, w, x[e][3]));
            }
        }
        for (int e = 0; e < 4; e++)
            for (int i = 0; i < 4; i++)
                _mm256_storeu_si256((__m256i *)(acc + (size_t)e * hd + c + 16 * i), _mm512_cvtps_ph(x[e][i], RNE));
    }
    if (c < hd)
        for (int e = 0; e < 4; e++)
            att_vpass(acc + (size_t)e * hd + c, v0 + c, vstride, cnt, ms + e * EL_ATT_MAX_KVB, vs + e * EL_ATT_MAX_KVB,
                      hd - c);
}

/*
 * Eight query heads on one KV head with head_dim 64 (TinyLlama, Llama-style
 * models of 64-dim heads): each K and V row of the slice is converted once
 * for all eight (EL_ATT_GROUP = 8; the four-head kernels above ran twice per
 * row). Every head keeps its arithmetic: with head_dim 64 the dot's four
 * accumulators take one FMA each from zero (as in dot_lanes4), added as
 * (a0+a2)+(a1+a3), reduced by reduce16x16; the V pass runs the 64 columns as
 * two halves of 32 (8 heads × 2 vectors of accumulators in registers), and
 * every accumulator lane sees the same rows in the same order with the same
 * rescale and F16 rounding, so the bits are att_vpass's.
 */
static inline void dot_lanes8_64(const el_fp16 *k, const float *qf, __m512 l[8]) {
    const __m512 k0 = ld16h(k), k1 = ld16h(k + 16), k2 = ld16h(k + 32), k3 = ld16h(k + 48);
    const __m512 z = _mm512_setzero_ps();
    for (int e = 0; e < 8; e++) {
        const float *q = qf + (size_t)e * 64;
        const __m512 a0 = _mm512_fmadd_ps(k0, _mm512_loadu_ps(q), z);
        const __m512 a1 = _mm512_fmadd_ps(k1, _mm512_loadu_ps(q + 16), z);
        const __m512 a2 = _mm512_fmadd_ps(k2, _mm512_loadu_ps(q + 32), z);
        const __m512 a3 = _mm512_fmadd_ps(k3, _mm512_loadu_ps(q + 48), z);
        l[e] = _mm512_add_ps(_mm512_add_ps(a0, a2), _mm512_add_ps(a1, a3));
    }
}

static inline void att_scores_g8_64(const el_fp16 *k, size_t kstride, int cnt, const float *qf, float scale,
                                    float *sc) {
    const __m512 vsc = _mm512_set1_ps(scale);
    int jj = 0;
    for (; jj + 16 <= cnt; jj += 16) {
        __m512 l[8][16], t[8];
        for (int r = 0; r < 16; r++) {
            att_prefetch_row(k + (size_t)(jj + r) * kstride, kstride, 64 * sizeof(el_fp16));
            dot_lanes8_64(k + (size_t)(jj + r) * kstride, qf, t);
            for (int e = 0; e < 8; e++) l[e][r] = t[e];
        }
        for (int e = 0; e < 8; e++) _mm512_storeu_ps(sc + e * EL_ATT_MAX_KVB + jj, _mm512_mul_ps(reduce16x16(l[e]), vsc));
    }
    for (; jj < cnt; jj++) {
        __m512 t[8];
        dot_lanes8_64(k + (size_t)jj * kstride, qf, t);
        for (int e = 0; e < 8; e++) sc[e * EL_ATT_MAX_KVB + jj] = reduce1(t[e]) * scale;
    }
}

static inline void att_vpass_g8_64(el_fp16 *acc, const el_fp16 *v0, size_t vstride, int cnt, const float *ms,
                                   const float *vs) {
    for (int c = 0; c < 64; c += 32) {
        __m512 x[8][2];
        for (int e = 0; e < 8; e++)
            for (int i = 0; i < 2; i++) x[e][i] = ld16h(acc + (size_t)e * 64 + c + 16 * i);
        const el_fp16 *v = v0 + c;
        for (int jj = 0; jj < cnt; jj++, v += vstride) {
            if (c == 0) att_prefetch_row(v0 + (size_t)jj * vstride, vstride, 64 * sizeof(el_fp16));
            for (int e = 0; e < 8; e++) {
                const float m = ms[e * EL_ATT_MAX_KVB + jj];
                if (m != 1.0f) {
                    const __m512 mm = _mm512_set1_ps(m);
                    x[e][0] = r16(_mm512_mul_ps(x[e][0], mm));
                    x[e][1] = r16(_mm512_mul_ps(x[e][1], mm));
                }
            }
            const __m512 va = ld16h(v), vb = ld16h(v + 16);
            for (int e = 0; e < 8; e++) {
                const __m512 w = _mm512_set1_ps(vs[e * EL_ATT_MAX_KVB + jj]);
                x[e][0] = r16(_mm512_fmadd_ps(va, w, x[e][0]));
                x[e][1] = r16(_mm512_fmadd_ps(vb, w, x[e][1]));
            }
        }
        for (int e = 0; e < 8; e++)
            for (int i = 0; i < 2; i++)
                _mm256_storeu_si256((__m256i *)(acc + (size_t)e * 64 + c + 16 * i), _mm512_cvtps_ph(x[e][i], RNE));
    }
}

/* A group (EL_ATT_GROUP = 8): eight heads of dim 64 together, else by fours. */
#define ATT_HAVE_GROUP 1
static inline void att_scores_g(const el_fp16 *k, size_t kstride, int cnt, const float *qf, int nq, int hd,
                                float scale, float *sc) {
    if (nq == 8 && hd == 64) {
        att_scores_g8_64(k, kstride, cnt, qf, scale, sc);
        return;
    }
    for (int e = 0; e < nq; e += 4)
        att_scores_g4(k, kstride, cnt, qf + (size_t)e * hd, nq - e < 4 ? nq - e : 4, hd, scale, sc + e * EL_ATT_MAX_KVB);
}

static inline void att_vpass_g(el_fp16 *acc, const el_fp16 *v, size_t vstride, int cnt, const float *ms,
                               const float *vs, int nq, int hd) {
    if (nq == 8 && hd == 64) {
        att_vpass_g8_64(acc, v, vstride, cnt, ms, vs);
        return;
    }
    for (int e = 0; e < nq; e += 4)
        att_vpass_g4(acc + (size_t)e * hd, v, vstride, cnt, ms + e * EL_ATT_MAX_KVB, vs + e * EL_ATT_MAX_KVB,
                     nq - e < 4 ? nq - e : 4, hd);
}

static inline void att_out(const el_fp16 *acc, float inv, float *o, int hd) {
    int i = 0;
    const __m512 s = _mm512_set1_ps(inv);
    for (; i + 16 <= hd; i += 16) _mm512_storeu_ps(o + i, _mm512_mul_ps(ld16h(acc + i), s));
    for (; i < hd; i++) o[i] = el_fp16_to_fp32(acc[i]) * inv;
}

/*
 * libm's expf, 16 at a time. The softmax factors of the one-row kernel are
 * libm expf (as ggml's kernel calls it), one call per head per position.
 * glibc (2.28 on) computes expf on x86-64 with FMA as below — x in double,
 * k = round(x·32/ln2) by the 1.5·2^52 shift, r = x·32/ln2 − k by an FMA,
 * 2^(k/32) from a 32-entry table of 2^(i/32) plus k in the exponent, a
 * cubic in r by three FMAs, one product, one rounding to float — and the
 * same steps on 8 doubles per vector give its bits. Lanes off the main path
 * (|x| >= 88: underflow, -inf, NaN, overflow) call expf itself. Whether the
 * expf this process links is that function is checked once, at first use,
 * against a spread of inputs (vexp_ok); if not, every factor is libm's call.
 * tests/test_attention.c compares the two on every float in [-104, 0].
 */
static const double vexp_tab[32] = { /* bits(2^(i/32)) - (i << 47) */
    0x1p+0, 0x1.fd9b0d3158574p-1, 0x1.fb5586cf9890fp-1, 0x1.f9301d0125b51p-1, 0x1.f72b83c7d517bp-1,
    0x1.f54873168b9aap-1, 0x1.f387a6e756238p-1, 0x1.f1e9df51fdee1p-1, 0x1.f06fe0a31b715p-1,
    0x1.ef1a7373aa9cbp-1, 0x1.edea64c123422p-1, 0x1.ece086061892dp-1, 0x1.ebfdad5362a27p-1,
    0x1.eb42b569d4f82p-1, 0x1.eab07dd485429p-1, 0x1.ea47eb03a5585p-1, 0x1.ea09e667f3bcdp-1,
    0x1.e9f75e8ec5f74p-1, 0x1.ea11473eb0187p-1, 0x1.ea589994cce13p-1, 0x1.eace5422aa0dbp-1,
    0x1.eb737b0cdc5e5p-1, 0x1.ec49182a3f090p-1, 0x1.ed503b23e255dp-1, 0x1.ee89f995ad3adp-1,
    0x1.eff76f2fb5e47p-1, 0x1.f199bdd85529cp-1, 0x1.f3720dcef9069p-1, 0x1.f5818dcfba487p-1,
    0x1.f7c97337b9b5fp-1, 0x1.fa4afa2a490dap-1, 0x1.fd0765b6e4540p-1};

static inline __m256 vexp8(__m256 x) {
    const __m512d xd = _mm512_cvtps_pd(x);
    const __m512d inv = _mm512_set1_pd(0x1.71547652b82fep+5), shift = _mm512_set1_pd(0x1.8p+52);
    __m512d kd = _mm512_fmadd_pd(inv, xd, shift);
    const __m512i ki = _mm512_castpd_si512(kd);
    kd = _mm512_sub_pd(kd, shift);
    const __m512d r = _mm512_fmsub_pd(inv, xd, kd);
    const __m512d t0 = _mm512_loadu_pd(vexp_tab), t1 = _mm512_loadu_pd(vexp_tab + 8);
    const __m512d t2 = _mm512_loadu_pd(vexp_tab + 16), t3 = _mm512_loadu_pd(vexp_tab + 24);
    const __m512d lo = _mm512_permutex2var_pd(t0, ki, t1), hi = _mm512_permutex2var_pd(t2, ki, t3);
    const __m512d t = _mm512_mask_blend_pd(_mm512_test_epi64_mask(ki, _mm512_set1_epi64(16)), lo, hi);
    const __m512d sc = _mm512_castsi512_pd(_mm512_add_epi64(_mm512_castpd_si512(t), _mm512_slli_epi64(ki, 47)));
    const __m512d z = _mm512_fmadd_pd(r, _mm512_set1_pd(0x1.c6af84b912394p-20), _mm512_set1_pd(0x1.ebfce50fac4f3p-13));
    const __m512d r2 = _mm512_mul_pd(r, r);
    __m512d y = _mm512_fmadd_pd(r, _mm512_set1_pd(0x1.62e42ff0c52d6p-6), _mm512_set1_pd(1.0));
    y = _mm512_fmadd_pd(z, r2, y);
    return _mm512_cvtpd_ps(_mm512_mul_pd(y, sc));
}

/* expf of n <= 16 values (the rest of the 16 read as 0). */
static inline void vexp16(const float *x, float *y, int n) {
    const __mmask16 live = (__mmask16)(n >= 16 ? 0xFFFF : (1u << n) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(live, x);
    const __m512 e = _mm512_insertf32x8(_mm512_castps256_ps512(vexp8(_mm512_castps512_ps256(v))),
                                        vexp8(_mm512_extractf32x8_ps(v, 1)), 1);
    _mm512_mask_storeu_ps(y, live, e);
    const __m512i top = _mm512_and_si512(_mm512_srli_epi32(_mm512_castps_si512(v), 20), _mm512_set1_epi32(0x7ff));
    unsigned off = _mm512_cmpgt_epi32_mask(top, _mm512_set1_epi32(0x42a)) & live; /* |x| >= 88, inf, NaN */
    while (off) {
        const int i = __builtin_ctz(off);
        off &= off - 1;
        y[i] = expf(x[i]);
    }
}

static int g_vexp_ok;
static pthread_once_t g_vexp_once = PTHREAD_ONCE_INIT;
static void vexp_check(void) {
    float x[16], y[16];
    int ok = 1;
    uint32_t r = 0x9E3779B9u;
    for (int it = 0; it < 4096 && ok; it++) {
        for (int i = 0; i < 16; i++) {
            r = r * 1664525u + 1013904223u;
            x[i] = -(float)(r >> 8) * (106.0f / 16777216.0f); /* [-106, 0] */
        }
        vexp16(x, y, 16);
        for (int i = 0; i < 16; i++) ok &= memcmp(&y[i], &(float){expf(x[i])}, sizeof(float)) == 0;
    }
    g_vexp_ok = ok;
}

int el_attn_vexp_avx512(const float *x, float *y, int n) {
    pthread_once(&g_vexp_once, vexp_check);
    for (int i = 0; i < n; i += 16) vexp16(x + i, y + i, n - i < 16 ? n - i : 16);
    return g_vexp_ok;
}

/* The online-softmax factors of cnt scores (attention_impl.h's scalar loop,
 * the same values): the arguments of expf in order, the expf 16 at a time. */
#define ATT_HAVE_SOFTMAX 1
static inline void att_softmax(const float *sc, int cnt, float *pM, float *pS, float *ms, float *vs) {
    pthread_once(&g_vexp_once, vexp_check);
    if (!g_vexp_ok) {
        el_att_softmax_scalar(sc, cnt, pM, pS, ms, vs);
        return;
    }
    float Mq = *pM, Sq = *pS;
    float arg[EL_ATT_MAX_KVB], ex[EL_ATT_MAX_KVB];
    uint64_t up = 0; /* bit jj: a new maximum at jj */
    for (int jj = 0; jj < cnt; jj++) {
        const float s = sc[jj];
        if (s > Mq) {
            arg[jj] = Mq - s;
            Mq = s;
            up |= 1ull << jj;
        } else {
            arg[jj] = s - Mq;
        }
    }
    for (int g = 0; g < cnt; g += 16) vexp16(arg + g, ex + g, cnt - g < 16 ? cnt - g : 16);
    for (int jj = 0; jj < cnt; jj++) {
        const int u = (int)(up >> jj) & 1;
        const float m = u ? ex[jj] : 1.0f, v = u ? 1.0f : ex[jj];
        ms[jj] = m;
        vs[jj] = v;
        Sq = fmaf(Sq, m, v);
    }
    *pM = Mq, *pS = Sq;
}

/*
 * att_softmax for a group of 4 or 8 heads: the same values per head as
 * att_softmax (the same expf arguments, vexp16, S = fmaf(S, m, v) row
 * after row), computed without its two scalar loops per head: the head
 * after head scalar softmax was ~13 % of a TinyLlama step's attention at
 * 16k and ~19 % in cache (perf), most of it the serial chain of S.
 */
#define ATT_HAVE_SOFTMAX_G 1
/*
 * The running maximum over 16 positions without a loop: the scalar loop's
 * M after row j is op(... op(op(M, s0), s1) ..., sj) with op(a, b) =
 * b > a ? b : a, which is vmaxps(b, a) (it returns its second operand
 * unless the first is greater). Without NaNs op is associative (it picks
 * the earliest of the greatest values; -0 and +0 count equal and the
 * earlier is kept), so a prefix scan in 4 steps gives every lane's M
 * exactly: *incl lane j = M after row j, *excl lane j = M before row j.
 * Dead lanes must hold -inf (op(a, -inf) = a).
 */
static inline void scan_max16(__m512 s, float m_in, __m512 *incl, __m512 *excl) {
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    __m512 p = s;
    p = _mm512_max_ps(p, _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(p), _mm512_castps_si512(ninf), 15)));
    p = _mm512_max_ps(p, _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(p), _mm512_castps_si512(ninf), 14)));
    p = _mm512_max_ps(p, _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(p), _mm512_castps_si512(ninf), 12)));
    p = _mm512_max_ps(p, _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(p), _mm512_castps_si512(ninf), 8)));
    const __m512 m = _mm512_set1_ps(m_in);
    *incl = _mm512_max_ps(p, m);
    *excl = _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(*incl), _mm512_castps_si512(m), 15));
}

/*
 * Per head, 16 positions at a time: the running maximum by scan_max16,
 * the expf arguments (s - M, or M_old - s where s is a new maximum, as the
 * scalar loop forms them), vexp16, the factors (ms, vs) by masks; then the
 * sums S = fmaf(S, m, v), a serial chain per head, with the group's heads
 * interleaved so the chains' latencies overlap. Scores with a NaN (op is
 * not associative there) send the whole group to att_softmax per head.
 */
static inline __attribute__((always_inline)) void att_softmax_gn(const float *sc, int cnt, const int nq, float *pM,
                                                                 float *pS, float *ms, float *vs) {
    unsigned nan = 0;
    for (int e = 0; e < nq; e++)
        for (int g = 0; g < cnt; g += 16) {
            const __mmask16 live = (__mmask16)(cnt - g >= 16 ? 0xFFFF : (1u << (cnt - g)) - 1);
            const __m512 x = _mm512_maskz_loadu_ps(live, sc + e * EL_ATT_MAX_KVB + g);
            nan |= _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
        }
    if (nan) {
        for (int e = 0; e < nq; e++)
            att_softmax(sc + e * EL_ATT_MAX_KVB, cnt, pM + e, pS + e, ms + e * EL_ATT_MAX_KVB, vs + e * EL_ATT_MAX_KVB);
        return;
    }
    const __m512 one = _mm512_set1_ps(1.0f);
    for (int e = 0; e < nq; e++) {
        float Mq = pM[e];
        for (int g = 0; g < cnt; g += 16) {
            const int n = cnt - g >= 16 ? 16 : cnt - g;
            const __mmask16 live = (__mmask16)(n >= 16 ? 0xFFFF : (1u << n) - 1);
            const __m512 x = _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), live, sc + e * EL_ATT_MAX_KVB + g);
            __m512 incl, excl;
            scan_max16(x, Mq, &incl, &excl);
            const __mmask16 up = _mm512_cmp_ps_mask(x, excl, _CMP_GT_OQ) & live; /* s > M */
            const __m512 arg = _mm512_mask_sub_ps(_mm512_sub_ps(x, excl), up, excl, x);
            float *pv = vs + e * EL_ATT_MAX_KVB + g, *pm = ms + e * EL_ATT_MAX_KVB + g;
            _mm512_mask_storeu_ps(pv, live, arg);
            vexp16(pv, pm, n);
            const __m512 ex = _mm512_maskz_loadu_ps(live, pm);
            _mm512_mask_storeu_ps(pm, live, _mm512_mask_blend_ps(up, one, ex));
            _mm512_mask_storeu_ps(pv, live, _mm512_mask_blend_ps(up, ex, one));
            Mq = _mm_cvtss_f32(_mm512_castps512_ps128(_mm512_permutexvar_ps(_mm512_set1_epi32(15), incl)));
        }
        pM[e] = Mq;
    }
    float Sq[EL_ATT_GROUP];
    for (int e = 0; e < nq; e++) Sq[e] = pS[e];
    for (int jj = 0; jj < cnt; jj++)
        for (int e = 0; e < nq; e++) Sq[e] = fmaf(Sq[e], ms[e * EL_ATT_MAX_KVB + jj], vs[e * EL_ATT_MAX_KVB + jj]);
    for (int e = 0; e < nq; e++) pS[e] = Sq[e];
}

static inline void att_softmax_g(const float *sc, int cnt, int nq, float *pM, float *pS, float *ms, float *vs) {
    pthread_once(&g_vexp_once, vexp_check);
    if (g_vexp_ok && nq == 8) att_softmax_gn(sc, cnt, 8, pM, pS, ms, vs);
    else if (g_vexp_ok && nq == 4) att_softmax_gn(sc, cnt, 4, pM, pS, ms, vs);
    else
        for (int e = 0; e < nq; e++)
            att_softmax(sc + e * EL_ATT_MAX_KVB, cnt, pM + e, pS + e, ms + e * EL_ATT_MAX_KVB, vs + e * EL_ATT_MAX_KVB);
}

#define ATT_GROUP EL_ATT_GROUP /* 8: att_scores_g8_64 / att_vpass_g8_64 */
#define ATT_TASK el_attn_task_avx512
#define EL_ATT_ATTR
#include "backend/cpu/attention_impl.h"

/* vcvtps2ph rounds as el_fp32_to_fp16 does; NaNs become 0x7E00 | sign as there. */
void el_fp32_to_fp16_row_avx512(const float *x, el_fp16 *y, int n) {
    int i = 0;
    const __m256i qnan = _mm256_set1_epi16(0x7E00);
    for (; i + 16 <= n; i += 16) {
        const __m512 v = _mm512_loadu_ps(x + i);
        __m256i h = _mm512_cvtps_ph(v, RNE);
        const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        if (nan) {
            const __m256i sign = _mm256_and_si256(h, _mm256_set1_epi16((short)0x8000));
            h = _mm256_mask_blend_epi16(nan, h, _mm256_or_si256(sign, qnan));
        }
        _mm256_storeu_si256((__m256i *)(y + i), h);
    }
    for (; i < n; i++) y[i] = el_fp32_to_fp16(x[i]);
}
#endif
