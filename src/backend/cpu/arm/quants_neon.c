/*
 * quants_neon.c — NEON kernels for base ARMv8-A (Advanced SIMD, no SDOT):
 * table el_cpu_kernels_quants_neon. The kernels are in quants_neon_impl.h,
 * shared with quants_neon_dotprod.c; kernels.c applies this table when the
 * CPU reports Advanced SIMD (hwcap ASIMD).
 */
#if defined(__aarch64__)
#define EL_NEON_TABLE el_cpu_kernels_quants_neon
#include "backend/cpu/arm/quants_neon_impl.h"
#else
typedef int el_quants_neon_empty; /* ISO C: a translation unit is not empty */
#endif
