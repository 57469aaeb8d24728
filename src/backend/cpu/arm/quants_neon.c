/*
 * quants_neon.c — NEON kernels for base ARMv8-A (Advanced SIMD, no SDOT):
 * tables el_cpu_kernels_quants_neon and el_cpu_kernels_quants_block_neon
 * (Q8_0/Q5_0 in block order). The kernels are in quants_neon_impl.h,
 * shared with quants_neon_dotprod.c; kernels.c applies these tables when the
 * CPU reports Advanced SIMD (hwcap ASIMD).
 */
#if defined(__aarch64__)
#define EL_NEON_TABLE el_cpu_kernels_quants_neon
#define EL_NEON_BLOCK_TABLE el_cpu_kernels_quants_block_neon
#include "backend/cpu/arm/quants_neon_impl.h"
#else
typedef int el_quants_neon_empty; /* ISO C: a translation unit is not empty */
#endif
