/*
 * quants_neon_dotprod.c — the NEON kernels of quants_neon_impl.h built with
 * the dotprod extension (SDOT for the int8 dot products): tables
 * el_cpu_kernels_quants_neon_dotprod and el_cpu_kernels_quants_block_neon_dotprod
 * (Q8_0/Q5_0 in block order). CMakeLists.txt compiles files named
 * *_neon_dotprod.c with -march=armv8.2-a+dotprod (dotprod is an Armv8.2
 * option, so every CPU with it is Armv8.2; GCC's arm_neon.h wants that base
 * for vdotq_s32); kernels.c applies the tables
 * only when the CPU reports it (hwcap ASIMDDP). Same bits as the base table:
 * integer sums are exact either way.
 */
#if defined(__aarch64__)
#if !defined(__ARM_FEATURE_DOTPROD)
#error "quants_neon_dotprod.c needs -march=armv8.2-a+dotprod (CMakeLists.txt sets it)"
#endif
#define EL_NEON_TABLE el_cpu_kernels_quants_neon_dotprod
#define EL_NEON_BLOCK_TABLE el_cpu_kernels_quants_block_neon_dotprod
#include "backend/cpu/arm/quants_neon_impl.h"
#else
typedef int el_quants_neon_dotprod_empty; /* ISO C: a translation unit is not empty */
#endif
