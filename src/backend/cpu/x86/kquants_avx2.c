/*
 * kquants_avx2.c — K-quant kernels for AVX2 + FMA + F16C (x86-64-v3): the
 * table el_cpu_kernels_kquants_avx2. The kernels are in kquants_x86.h (shared
 * with the AVX-512 VNNI table); here the u8 x s8 dot products are
 * vpmaddubsw + vpmaddwd.
 */
#if defined(__x86_64__)
#define KQ_VNNI 0
#define KQ_TABLE el_cpu_kernels_kquants_avx2
#define KQ_BLOCK_TABLE el_cpu_kernels_kquants_block_avx2
#include "backend/cpu/x86/kquants_x86.h"
#include "backend/cpu/x86/kquants_block_x86.h"
#endif
