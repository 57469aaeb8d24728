/*
 * kquants_avx512.c — K-quant kernels for AVX-512 VNNI (with VL): the table
 * el_cpu_kernels_kquants_avx512. The kernels are in kquants_x86.h (shared
 * with the AVX2 table); here the dot products are vpdpbusd / vpdpwssd on
 * 256-bit vectors.
 */
#if defined(__x86_64__)
#define KQ_VNNI 1
#define KQ_TABLE el_cpu_kernels_kquants_avx512
#define KQ_BLOCK_TABLE el_cpu_kernels_kquants_block_avx512
#include "backend/cpu/x86/kquants_x86.h"
#include "backend/cpu/x86/kquants_block_x86.h"
#endif
