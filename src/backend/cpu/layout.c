/*
 * layout.c — the weight layouts of layout.h: which matrix gets one, the
 * packing from flat GGUF rows, and the portable kernel (the specification
 * the ISA kernels match bit for bit).
 */
#include "backend/cpu/layout.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "backend/cpu/kernels.h"
#include "package/quants_blocks.h"
#include "util/fp16.h"

#define R16 EL_LAYOUT_R16_ROWS
#define R16_QBYTES (R16 * EL_QK8_0)          /* quants of one block of a group: 512 */
#define R16_BLOCK (R16_QBYTES + R16 * 2)     /* with the scales: 544 = 16 flat blocks */

const char *el_layout_name(el_layout l) { return l == EL_LAYOUT_Q8_0_R16 ? "q8_0_r16" : "flat"; }

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static el_layout g_requested;

static void init_requested(void) {
    const char *e = getenv("EL_WEIGHT_LAYOUT");
    g_requested = e && (!strcasecmp(e, "r16") || !strcasecmp(e, "q8_0_r16")) ? EL_LAYOUT_Q8_0_R16 : EL_LAYOUT_FLAT;
}

el_layout el_cpu_layout_requested(void) {
    pthread_once(&g_once, init_requested);
    return g_requested;
}

el_layout el_cpu_layout_for(el_type t, int64_t ne0, int64_t ne1) {
    if (el_cpu_layout_requested() != EL_LAYOUT_Q8_0_R16) return EL_LAYOUT_FLAT;
    if (t != EL_TYPE_Q8_0 || ne0 <= 0 || ne0 % EL_QK8_0 || ne1 <= 0 || ne1 % R16) return EL_LAYOUT_FLAT;
    /* the layout computes the block order; its fast kernel needs VNNI */
    if (el_cpu_kernels_order() != EL_ORDER_BLOCK || el_cpu_kernels_level() != EL_CPU_AVX512) return EL_LAYOUT_FLAT;
    return EL_LAYOUT_Q8_0_R16;
}

size_t el_layout_group_bytes(el_layout l, int64_t ne0) {
    if (l != EL_LAYOUT_Q8_0_R16 || ne0 <= 0 || ne0 % EL_QK8_0) return 0;
    return (size_t)(ne0 / EL_QK8_0) * R16_BLOCK;
}

size_t el_layout_bytes(el_layout l, int64_t ne0, int64_t ne1) {
    if (ne1 <= 0 || ne1 % R16) return 0;
    return el_layout_group_bytes(l, ne0) * (size_t)(ne1 / R16);
}

void el_layout_pack(el_layout l, const void *flat, size_t row_bytes, int64_t ne0, int64_t ne1, void *dst) {
    if (l != EL_LAYOUT_Q8_0_R16) return;
    const int64_t nb = ne0 / EL_QK8_0;
    const size_t gb = el_layout_group_bytes(l, ne0);
    for (int64_t g = 0; g < ne1 / R16; ++g) {
        uint8_t *q = (uint8_t *)dst + gb * (size_t)g;
        el_fp16 *d = (el_fp16 *)(q + (size_t)nb * R16_QBYTES);
        for (int r = 0; r < R16; ++r) {
            const block_q8_0 *row = (const block_q8_0 *)((const uint8_t *)flat + row_bytes * (size_t)(R16 * g + r));
            for (int64_t b = 0; b < nb; ++b) {
                d[R16 * b + r] = row[b].d;
                for (int l4 = 0; l4 < 8; ++l4)
                    for (int e = 0; e < 4; ++e)
                        q[R16_QBYTES * b + 64 * l4 + 4 * r + e] = (uint8_t)(row[b].qs[4 * l4 + e] + 128);
            }
        }
    }
}

void el_layout_gemm_q8_0_r16_portable(int k, const void *w, int nr, const void *x, size_t ldx, int nt, float *y,
                                      size_t ldy) {
    const int nb = k / EL_QK8_0;
    const size_t gb = (size_t)nb * R16_BLOCK;
    for (int g = 0; g < nr / R16; ++g) {
        const uint8_t *q = (const uint8_t *)w + gb * (size_t)g;
        const el_fp16 *d = (const el_fp16 *)(q + (size_t)nb * R16_QBYTES);
        for (int t = 0; t < nt; ++t) {
            const block_q8_0 *a = (const block_q8_0 *)((const uint8_t *)x + ldx * (size_t)t);
            for (int r = 0; r < R16; ++r) {
                float acc = 0.0f;
                for (int b = 0; b < nb; ++b) {
                    int32_t sumi = 0;
                    for (int l4 = 0; l4 < 8; ++l4)
                        for (int e = 0; e < 4; ++e)
                            sumi += ((int32_t)q[R16_QBYTES * (size_t)b + 64 * l4 + 4 * r + e] - 128) *
                                    a[b].qs[4 * l4 + e];
                    acc = fmaf((float)sumi, el_fp16_to_fp32(d[R16 * b + r]) * el_fp16_to_fp32(a[b].d), acc);
                }
                y[ldy * (size_t)t + (size_t)(R16 * g + r)] = acc;
            }
        }
    }
}

el_layout_gemm_fn el_cpu_layout_gemm(el_layout l) {
    if (l != EL_LAYOUT_Q8_0_R16) return NULL;
#if defined(__x86_64__)
    if (el_cpu_kernels_level() == EL_CPU_AVX512) return el_layout_gemm_q8_0_r16_avx512;
#endif
    return el_layout_gemm_q8_0_r16_portable;
}
