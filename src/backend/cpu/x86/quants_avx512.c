/*
 * quants_avx512.c — AVX-512 VNNI kernels of the 32-element block formats and
 * the Q8_0/Q8_1 activation quantizers; the code is in quants_x86.h, compiled
 * here with vpdpbusd (on 256-bit registers: 32 of them hold the wider gemm
 * tiles). Same bits as the portable kernels (tests/test_kernels.c). The
 * second table holds the Q8_0 and Q5_0 kernels in block order (kernels.h,
 * el_cpu_order; the code is in quants_block_x86.h).
 */
#if defined(__x86_64__)
#define QX_VNNI 1
#include "backend/cpu/isa_tables.h"
#include "backend/cpu/x86/quants_block_x86.h"
#include "backend/cpu/x86/quants_x86.h"

QX_GEMM(gemm_q4_0_vnni, sum, QX_Q4_0)
QX_GEMM(gemm_iq4_nl_vnni, sum, QX_IQ4_NL)

/*
 * One activation row (decode) of IQ4_NL: the AVX2 table's kernel (same
 * bits; every AVX-512 CPU has AVX2). Streaming Q4_0 rows from memory on one
 * core (75 MB in 64-row calls) through this per-row path, that build ran at
 * 14-16 GB/s where this file's build ran at 7-15 GB/s (5 alternating runs).
 * Q4_0 decode has its own kernel (qx_q4_0_rows8), whose VNNI build here ran
 * 10 % faster than the AVX2 one with the rows in cache (26.4 vs 24.0 GB/s).
 */
static void gemm_q4_0(int k, const void *w, size_t ldw, int nr, const void *x, size_t ldx, int t0, int nt,
                      int n_act, float *y, size_t ldy) {
    gemm_q4_0_vnni(k, w, ldw, nr, x, ldx, t0, nt, n_act, y, ldy);
}

static void gemm_iq4_nl(int k, const void *w, size_t ldw, int nr, const void *x, size_t ldx, int t0, int nt,
                        int n_act, float *y, size_t ldy) {
    el_gemm_fn f = nt == 1 ? el_cpu_kernels_quants_avx2[EL_TYPE_IQ4_NL].gemm : gemm_iq4_nl_vnni;
    f(k, w, ldw, nr, x, ldx, t0, nt, n_act, y, ldy);
}
QX_GEMM(gemm_q8_0, lanes_t, QX_Q8_0)
QX_GEMM(gemm_q5_0, lanes_t, QX_Q5_0)
QX_GEMM(gemm_q4_1, lanes_t, QX_Q4_1)
QX_GEMM(gemm_q5_1, lanes_t, QX_Q5_1)
QX_GEMM(gemm_mxfp4, mxfp4, QX_MXFP4)

const el_cpu_type_kernels el_cpu_kernels_quants_avx512[EL_TYPE_COUNT] = {
    [EL_TYPE_Q4_0] = {EL_TYPE_Q8_0, qx_vec_dot_q4_0, qx_quantize_q8_0, NULL, gemm_q4_0},
    [EL_TYPE_Q4_1] = {EL_TYPE_Q8_1, qx_vec_dot_q4_1, qx_quantize_q8_1, NULL, gemm_q4_1},
    [EL_TYPE_Q5_0] = {EL_TYPE_Q8_0, qx_vec_dot_q5_0, qx_quantize_q8_0, NULL, gemm_q5_0},
    [EL_TYPE_Q5_1] = {EL_TYPE_Q8_1, qx_vec_dot_q5_1, qx_quantize_q8_1, NULL, gemm_q5_1},
    [EL_TYPE_Q8_0] = {EL_TYPE_Q8_0, qx_vec_dot_q8_0, qx_quantize_q8_0, NULL, gemm_q8_0},
    [EL_TYPE_IQ4_NL] = {EL_TYPE_Q8_0, qx_vec_dot_iq4_nl, qx_quantize_q8_0, NULL, gemm_iq4_nl},
    [EL_TYPE_MXFP4] = {EL_TYPE_Q8_0, qx_vec_dot_mxfp4, qx_quantize_q8_0, NULL, gemm_mxfp4},
};

/* Block order (kernels.h, EL_ORDER_BLOCK): quants_block_x86.h. */
QX_GEMM(gemm_q8_0_blk, blk, QX_Q8_0)
QX_GEMM(gemm_q5_0_blk, blk, QX_Q5_0)

const el_cpu_type_kernels el_cpu_kernels_quants_block_avx512[EL_TYPE_COUNT] = {
    [EL_TYPE_Q5_0] = {EL_TYPE_Q8_0, qx_vec_dot_q5_0_blk, qx_quantize_q8_0, NULL, gemm_q5_0_blk},
    [EL_TYPE_Q8_0] = {EL_TYPE_Q8_0, qx_vec_dot_q8_0_blk, qx_quantize_q8_0, NULL, gemm_q8_0_blk},
};
#endif
