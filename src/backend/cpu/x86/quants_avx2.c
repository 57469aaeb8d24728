/*
 * quants_avx2.c — AVX2 (+ FMA, F16C) kernels of the 32-element block formats
 * and the Q8_0/Q8_1 activation quantizers; the code is in quants_x86.h,
 * compiled here with vpmaddubsw/vpmaddwd integer dots. Same bits as the
 * portable kernels (tests/test_kernels.c). The second table holds the Q8_0
 * and Q5_0 kernels in block order (kernels.h, el_cpu_order; the code is in
 * quants_block_x86.h).
 */
#if defined(__x86_64__)
#include "backend/cpu/isa_tables.h"
#include "backend/cpu/x86/quants_block_x86.h"
#include "backend/cpu/x86/quants_x86.h"

QX_GEMM(gemm_q4_0, sum, QX_Q4_0)
QX_GEMM(gemm_q8_0, lanes, QX_Q8_0)
QX_GEMM(gemm_q5_0, lanes, QX_Q5_0)
QX_GEMM(gemm_q4_1, lanes, QX_Q4_1)
QX_GEMM(gemm_q5_1, lanes, QX_Q5_1)

/* IQ4_NL: its signed codes need the sign trick per product, which the
 * transposed layout cannot sum in int16; its gemm takes the per-row path. */
QX_GEMM(gemm_iq4_nl, sum, QX_IQ4_NL)
QX_GEMM(gemm_mxfp4, mxfp4, QX_MXFP4)

const el_cpu_type_kernels el_cpu_kernels_quants_avx2[EL_TYPE_COUNT] = {
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

const el_cpu_type_kernels el_cpu_kernels_quants_block_avx2[EL_TYPE_COUNT] = {
    [EL_TYPE_Q5_0] = {EL_TYPE_Q8_0, qx_vec_dot_q5_0_blk, qx_quantize_q8_0, NULL, gemm_q5_0_blk},
    [EL_TYPE_Q8_0] = {EL_TYPE_Q8_0, qx_vec_dot_q8_0_blk, qx_quantize_q8_0, NULL, gemm_q8_0_blk},
};
#endif
