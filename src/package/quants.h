/*
 * quants.h — reference (de)quantization of the ggml block formats.
 * Block layouts follow ggml's definitions byte for byte; rounding of the
 * quantizers (used for activations: Q8_0, Q8_1, Q8_K) follows ggml's
 * reference quantize_row_*_ref so the integer dot products match llama.cpp.
 * Block structs are in quants_blocks.h (shared with the CPU kernels).
 */
#ifndef EL_PACKAGE_QUANTS_H
#define EL_PACKAGE_QUANTS_H
#include <stdint.h>

/* dequantize: n elements (n % block == 0) */
void el_dequant_f32(const void *src, float *dst, int64_t n);
void el_dequant_f16(const void *src, float *dst, int64_t n);
void el_dequant_bf16(const void *src, float *dst, int64_t n);
void el_dequant_q4_0(const void *src, float *dst, int64_t n);
void el_dequant_q4_1(const void *src, float *dst, int64_t n);
void el_dequant_q5_0(const void *src, float *dst, int64_t n);
void el_dequant_q5_1(const void *src, float *dst, int64_t n);
void el_dequant_q8_0(const void *src, float *dst, int64_t n);
void el_dequant_q2_k(const void *src, float *dst, int64_t n);
void el_dequant_q3_k(const void *src, float *dst, int64_t n);
void el_dequant_q4_k(const void *src, float *dst, int64_t n);
void el_dequant_q5_k(const void *src, float *dst, int64_t n);
void el_dequant_q6_k(const void *src, float *dst, int64_t n);
void el_dequant_iq4_nl(const void *src, float *dst, int64_t n);
void el_dequant_iq4_xs(const void *src, float *dst, int64_t n);
void el_dequant_mxfp4(const void *src, float *dst, int64_t n);

/* The first of nblocks MXFP4 blocks whose E8M0 exponent is 0xFF (NaN in the
 * MX spec, never written by a quantizer), or -1 if none. */
int64_t el_mxfp4_find_bad_exponent(const void *src, int64_t nblocks);

/* quantize (activation formats) */
void el_quant_f32(const float *src, void *dst, int64_t n);
void el_quant_f16(const float *src, void *dst, int64_t n);
void el_quant_bf16(const float *src, void *dst, int64_t n);
void el_quant_q8_0(const float *src, void *dst, int64_t n);
void el_quant_q8_1(const float *src, void *dst, int64_t n);
void el_quant_q8_k(const float *src, void *dst, int64_t n);

#endif
