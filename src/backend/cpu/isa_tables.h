/*
 * isa_tables.h — the ISA kernel tables kernels.c may apply (see kernels.h;
 * their entries have kernel_types.h's shape).
 * Each is defined in one file under x86/ or arm/, compiled with that ISA's
 * flags (CMakeLists.txt); a table is plain data, so referencing it runs no
 * ISA-specific code. Only el_cpu_kernels_build calls into a table's kernels,
 * and only after the CPU check.
 */
#ifndef EL_BACKEND_CPU_ISA_TABLES_H
#define EL_BACKEND_CPU_ISA_TABLES_H
#include "backend/cpu/kernel_types.h"

#if defined(__x86_64__)
/* x86 files named ..._avx2.c: AVX2 + FMA + F16C (+ BMI2) */
extern const el_cpu_type_kernels el_cpu_kernels_float_avx2[EL_TYPE_COUNT];   /* F32, F16, BF16 */
/* x86 files named ..._avx512.c: the above + AVX-512 F/BW/VL/DQ + VNNI (+ BF16) */
extern const el_cpu_type_kernels el_cpu_kernels_float_avx512[EL_TYPE_COUNT]; /* F32, F16, BF16 */
extern const el_cpu_type_kernels el_cpu_kernels_kquants_avx2[EL_TYPE_COUNT];
/* x86 files named ..._avx512.c: the above + AVX-512 F/BW/VL/DQ + VNNI (+ BF16) */
extern const el_cpu_type_kernels el_cpu_kernels_kquants_avx512[EL_TYPE_COUNT];
extern const el_cpu_type_kernels el_cpu_kernels_quants_avx2[EL_TYPE_COUNT];
/* x86 files named ..._avx512.c: the above + AVX-512 F/BW/VL/DQ + VNNI (+ BF16) */
extern const el_cpu_type_kernels el_cpu_kernels_quants_avx512[EL_TYPE_COUNT];
/* the same files' Q8_0/Q5_0 entries in block order (kernels.h, el_cpu_order) */
extern const el_cpu_type_kernels el_cpu_kernels_quants_block_avx2[EL_TYPE_COUNT];
extern const el_cpu_type_kernels el_cpu_kernels_quants_block_avx512[EL_TYPE_COUNT];
/* the K-quant files' Q6_K entry in block order */
extern const el_cpu_type_kernels el_cpu_kernels_kquants_block_avx2[EL_TYPE_COUNT];
extern const el_cpu_type_kernels el_cpu_kernels_kquants_block_avx512[EL_TYPE_COUNT];
/* the AVX-512 K-quant gemms' token blocks, per type (kernels.h, el_cpu_kernels_gemm_toks) */
extern const int el_cpu_gemm_toks_kquants_avx512[EL_TYPE_COUNT];
#endif

#if defined(__aarch64__)
/* arm files named ..._neon.c: base ARMv8-A Advanced SIMD */
extern const el_cpu_type_kernels el_cpu_kernels_quants_neon[EL_TYPE_COUNT];
/* arm files named ..._neon_dotprod.c: the above + the dotprod extension (SDOT) */
extern const el_cpu_type_kernels el_cpu_kernels_quants_neon_dotprod[EL_TYPE_COUNT];
/* the same files' Q8_0/Q5_0 entries in block order (kernels.h, el_cpu_order) */
extern const el_cpu_type_kernels el_cpu_kernels_quants_block_neon[EL_TYPE_COUNT];
extern const el_cpu_type_kernels el_cpu_kernels_quants_block_neon_dotprod[EL_TYPE_COUNT];
#endif

#endif
