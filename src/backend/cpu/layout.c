/*
 * layout.c — the weight layouts on the CPU (layout.h): which matrix gets
 * one, and the portable kernel (the specification the ISA kernels match bit
 * for bit). The byte format is package/layout.c's.
 */
#include "backend/cpu/layout.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "backend/cpu/kernel_common.h"
#include "backend/cpu/kernels.h"
#include "package/quants_blocks.h"
#include "util/fp16.h"

#define R16 EL_LAYOUT_R16_ROWS

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_requested, g_flat;

static void init_requested(void) {
    const char *e = getenv("EL_WEIGHT_LAYOUT");
    g_requested = e && !strcasecmp(e, "r16");
    g_flat = e && !strcasecmp(e, "flat");
}

int el_cpu_layout_runs(el_layout l) {
    pthread_once(&g_once, init_requested);
    return !g_flat && l > EL_LAYOUT_FLAT && l < EL_LAYOUT_COUNT && el_cpu_kernels_level() == EL_CPU_AVX512;
}

int el_cpu_layout_requested(void) {
    pthread_once(&g_once, init_requested);
    return g_requested;
}

el_layout el_cpu_layout_for(el_type t, int64_t ne0, int64_t ne1) {
    if (!el_cpu_layout_requested()) return EL_LAYOUT_FLAT;
    if (ne0 <= 0 || ne0 % EL_QK8_0 || ne1 <= 0 || ne1 % R16) return EL_LAYOUT_FLAT;
    /* the fast kernels need VNNI */
    if (el_cpu_kernels_level() != EL_CPU_AVX512) return EL_LAYOUT_FLAT;
    if (t == EL_TYPE_Q4_0) return EL_LAYOUT_Q4_0_R16;
    /* Q4_K's layout takes the flat kernels' two orders, row by row as their selector (either kernel order) */
    if (t == EL_TYPE_Q4_K && ne0 % EL_QK_K == 0) return EL_LAYOUT_Q4_K_R16;
    /* Q5_0's layout computes the flat Q5_0 kernels' order, either one */
    if (t == EL_TYPE_Q5_0) return EL_LAYOUT_Q5_0_R16;
    /* Q8_0's layout computes the block order */
    if (t == EL_TYPE_Q8_0 && el_cpu_kernels_order() == EL_ORDER_BLOCK) return EL_LAYOUT_Q8_0_R16;
    return EL_LAYOUT_FLAT;
}

/* Element 4c + e of row r in block b's quants (the weight as the dot uses it, offset removed). */
static int32_t r16_weight(el_layout l, const uint8_t *qblock, int r, int c, int e) {
    if (l == EL_LAYOUT_Q8_0_R16) return (int32_t)qblock[64 * c + 4 * r + e] - 128;
    const uint8_t v = qblock[64 * (c & 3) + 4 * r + e];
    return (int32_t)(c < 4 ? v & 0x0F : v >> 4) - 8;
}

static void gemm_r16_portable(el_layout l, int k, const void *w, int nr, const void *x, size_t ldx, int nt, float *y,
                              size_t ldy) {
    const int nb = k / EL_QK8_0;
    /* a block of a group: its quants (package/layout.h), then 16 fp16 scales */
    const size_t gb = el_layout_group_bytes(l, k), qb = gb / (size_t)nb - 2 * R16;
    for (int g = 0; g < nr / R16; ++g) {
        const uint8_t *q = (const uint8_t *)w + gb * (size_t)g;
        const el_fp16 *d = (const el_fp16 *)(q + (size_t)nb * qb);
        for (int t = 0; t < nt; ++t) {
            const block_q8_0 *a = (const block_q8_0 *)((const uint8_t *)x + ldx * (size_t)t);
            for (int r = 0; r < R16; ++r) {
                float acc = 0.0f;
                for (int b = 0; b < nb; ++b) {
                    /* element 4c + e pairs with activation byte 4c + e (Q4_0: c >= 4 are the high nibbles) */
                    int32_t sumi = 0;
                    for (int c = 0; c < 8; ++c)
                        for (int e = 0; e < 4; ++e) sumi += r16_weight(l, q + qb * (size_t)b, r, c, e) * a[b].qs[4 * c + e];
                    acc = fmaf((float)sumi, el_fp16_to_fp32(d[R16 * b + r]) * el_fp16_to_fp32(a[b].d), acc);
                }
                y[ldy * (size_t)t + (size_t)(R16 * g + r)] = acc;
            }
        }
    }
}

void el_layout_gemm_q8_0_r16_portable(int k, const void *w, int nr, const void *x, size_t ldx, int nt, float *y,
                                      size_t ldy, int x4) {
    (void)x4;
    gemm_r16_portable(EL_LAYOUT_Q8_0_R16, k, w, nr, x, ldx, nt, y, ldy);
}

void el_layout_gemm_q4_0_r16_portable(int k, const void *w, int nr, const void *x, size_t ldx, int nt, float *y,
                                      size_t ldy, int x4) {
    (void)x4;
    gemm_r16_portable(EL_LAYOUT_Q4_0_R16, k, w, nr, x, ldx, nt, y, ldy);
}

/* Q4_K (package/layout.h): per row the exact integer sums of scale x sub-block dot (isum) and min x the
 * activation's sub-block sum (summ), then acc = fma(isum, d * d_a, acc), accm = fma(summ, dmin * d_a, accm)
 * per pair of sub-blocks (activation rows t < x4: el_vec_dot_q4_k_q8_k_x4's order) or per super-block
 * (el_vec_dot_q4_k_q8_k's, the flat decode kernels'), and y = acc - accm. */
void el_layout_gemm_q4_k_r16_portable(int k, const void *w, int nr, const void *x, size_t ldx, int nt, float *y,
                                      size_t ldy, int x4) {
    const int nb = k / EL_QK_K;
    const size_t gb = el_layout_group_bytes(EL_LAYOUT_Q4_K_R16, k), sb = gb / (size_t)nb;
    for (int g = 0; g < nr / R16; ++g)
        for (int t = 0; t < nt; ++t) {
            const block_q8_K *a = (const block_q8_K *)((const uint8_t *)x + ldx * (size_t)t);
            for (int r = 0; r < R16; ++r) {
                float acc = 0.0f, accm = 0.0f;
                for (int i = 0; i < nb; ++i) {
                    const uint8_t *q = (const uint8_t *)w + gb * (size_t)g + sb * (size_t)i;
                    const el_fp16 *dd = (const el_fp16 *)(q + EL_Q4K_R16_D);
                    const float d = el_fp16_to_fp32(dd[r]) * a[i].d, dmin = el_fp16_to_fp32(dd[R16 + r]) * a[i].d;
                    int32_t isum = 0, summ = 0;
                    for (int j = 0; j < 8; ++j) {
                        uint8_t sc, m;
                        el_layout_q4k_scale_min(q, r, j, &sc, &m);
                        /* sub-block j: elements 32j..32j+31, the low (even j) or high nibbles of registers 8(j/2).. */
                        int32_t dot = 0;
                        for (int c = 8 * (j / 2); c < 8 * (j / 2) + 8; ++c)
                            for (int e = 0; e < 4; ++e) {
                                const uint8_t v = q[EL_Q4K_R16_QS + 64 * c + 4 * r + e];
                                dot += (j & 1 ? v >> 4 : v & 15) * a[i].qs[32 * j + 4 * (c % 8) + e];
                            }
                        isum += sc * dot;
                        summ += m * (a[i].bsums[2 * j] + a[i].bsums[2 * j + 1]);
                        if ((j & 1) && t < x4) { /* the 4-row order: one fma pair per 64 elements */
                            acc = fmaf((float)isum, d, acc);
                            accm = fmaf((float)summ, dmin, accm);
                            isum = summ = 0;
                        }
                    }
                    if (t >= x4) {
                        acc = fmaf((float)isum, d, acc);
                        accm = fmaf((float)summ, dmin, accm);
                    }
                }
                y[ldy * (size_t)t + (size_t)(R16 * g + r)] = acc - accm;
            }
        }
}

/* Element 4j + e of row r in the 352-byte Q5_0 block q, unsigned (0..31: the weight + 16). */
static int32_t q50_weight(const uint8_t *q, int r, int j, int e) {
    const uint8_t v = q[64 * (j & 3) + 4 * r + e];
    const int hi = q[EL_Q50_R16_QH + 8 * j + r / 2] >> (4 * (r & 1) + e) & 1;
    return (j < 4 ? v & 15 : v >> 4) | hi << 4;
}

/* Q5_0 (package/layout.h): the flat Q5_0 kernels' arithmetic in the process's kernel order. Llama order
 * (vec_dot_q5_0_q8_0): per block 8 exact lanes (lane j: elements 4j..4j+3, weights - 16), each
 * acc[j] = fma(d_w * d_a, lane, acc[j]), then the x86 horizontal sum. Block order: the block's exact sum,
 * acc = fma(sum, d_w * d_a, acc). */
void el_layout_gemm_q5_0_r16_portable(int k, const void *w, int nr, const void *x, size_t ldx, int nt, float *y,
                                      size_t ldy, int x4) {
    (void)x4;
    const int nb = k / EL_QK8_0, blk = el_cpu_kernels_order() == EL_ORDER_BLOCK;
    const size_t gb = el_layout_group_bytes(EL_LAYOUT_Q5_0_R16, k);
    for (int g = 0; g < nr / R16; ++g)
        for (int t = 0; t < nt; ++t) {
            const block_q8_0 *a = (const block_q8_0 *)((const uint8_t *)x + ldx * (size_t)t);
            for (int r = 0; r < R16; ++r) {
                float acc[8] = {0}, acc1 = 0.0f;
                for (int b = 0; b < nb; ++b) {
                    const uint8_t *q = (const uint8_t *)w + gb * (size_t)g + EL_Q50_R16_BLOCK * (size_t)b;
                    const float d = el_fp16_to_fp32(((const el_fp16 *)(q + EL_Q50_R16_D))[r]) * el_fp16_to_fp32(a[b].d);
                    int32_t lane[8], sum = 0;
                    for (int j = 0; j < 8; ++j) {
                        lane[j] = 0;
                        for (int e = 0; e < 4; ++e) lane[j] += (q50_weight(q, r, j, e) - 16) * a[b].qs[4 * j + e];
                        sum += lane[j];
                    }
                    if (blk)
                        acc1 = fmaf((float)sum, d, acc1);
                    else
                        for (int j = 0; j < 8; ++j) acc[j] = fmaf(d, (float)lane[j], acc[j]);
                }
                y[ldy * (size_t)t + (size_t)(R16 * g + r)] = blk ? acc1 : el_hsum8_x86(acc);
            }
        }
}

el_layout_gemm_fn el_cpu_layout_gemm(el_layout l) {
    const int fast = el_cpu_kernels_level() == EL_CPU_AVX512;
#if defined(__x86_64__)
    if (fast && l == EL_LAYOUT_Q8_0_R16) return el_layout_gemm_q8_0_r16_avx512;
    if (fast && l == EL_LAYOUT_Q4_0_R16) return el_layout_gemm_q4_0_r16_avx512;
    if (fast && l == EL_LAYOUT_Q4_K_R16) return el_layout_gemm_q4_k_r16_avx512;
    if (fast && l == EL_LAYOUT_Q5_0_R16) return el_layout_gemm_q5_0_r16_avx512;
#else
    (void)fast;
#endif
    return l == EL_LAYOUT_Q8_0_R16 ? el_layout_gemm_q8_0_r16_portable
         : l == EL_LAYOUT_Q4_0_R16 ? el_layout_gemm_q4_0_r16_portable
         : l == EL_LAYOUT_Q4_K_R16 ? el_layout_gemm_q4_k_r16_portable
         : l == EL_LAYOUT_Q5_0_R16 ? el_layout_gemm_q5_0_r16_portable : NULL;
}
