/*
 * kernels.h — the CPU backend's compute kernels, per weight type.
 *
 * A matrix product W·x (W quantized) is computed the way ggml does: each
 * activation row x is first quantized to the weight type's `vec_dot_type`
 * (Q8_0 for Q4_0/Q5_0/Q8_0/IQ4_NL/MXFP4, Q8_1 for Q4_1/Q5_1, Q8_K for the K-quants
 * and IQ4_XS, F16 for F16, BF16 for BF16, F32 for F32) with that type's
 * from_float, then each output is vec_dot(weight row, quantized x row).
 * This keeps results within llama.cpp's numerics.
 *
 * The table returned by el_cpu_kernels() is the dispatch point: the portable C
 * path fills every entry; ISA-specific tables (x86/ AVX2 and AVX-512, arm/
 * NEON) override entries at init time after a CPUID / hwcap check. Every ISA
 * kernel gives the same bits as the portable one (tests/test_kernels.c).
 * The entry's shape is kernel_types.h's; the portable table and the
 * activation quantizers are kernels_portable.h's (included here for the
 * dispatch's users).
 */
#ifndef EL_BACKEND_CPU_KERNELS_H
#define EL_BACKEND_CPU_KERNELS_H
#include "backend/cpu/kernel_types.h"
#include "backend/cpu/kernels_portable.h"

/*
 * Instruction-set levels of the dispatch. An ISA table (one per kernel file
 * under x86/ or arm/) overrides the non-NULL fields of the entries it fills,
 * when the CPU has every feature the table needs; tables are applied in
 * order of level, so the widest available wins.
 */
typedef enum el_cpu_level {
    EL_CPU_PORTABLE = 0,
    EL_CPU_AVX2 = 1,    /* x86-64: AVX2 + FMA + F16C (x86-64-v3) */
    EL_CPU_AVX512 = 2,  /* x86-64: AVX-512 F/BW/VL/DQ + VNNI (+ BF16 where a table says so) */
    EL_CPU_NEON = 3,    /* AArch64: Advanced SIMD (+ dotprod where a table says so) */
} el_cpu_level;

/*
 * The arithmetic order of the Q8_0, Q5_0 and Q6_K dot products
 * (docs/FIDELITY.md, "Two orders for Q8_0, Q5_0 and Q6_K"). Every other type
 * has one order.
 *
 *   EL_ORDER_LLAMA (the default): llama.cpp's x86 vec_dot order (8 float
 *     lanes per output, lane l holding elements 4l..4l+3 of each block, one
 *     fma per lane and block, the x86 horizontal sum): the bit-level goldens'
 *     order.
 *   EL_ORDER_BLOCK (EL_KERNEL_ORDER=block): per output one float accumulator,
 *     and per 32-element block one exact integer sum: acc = fma((float)sumi,
 *     d_w * d_a, acc), block after block — the order of llama.cpp's repacked
 *     Q4_0 and IQ4_NL kernels (which edgellm's Q4_0 follows). Integer sums
 *     are exact in any order, so a prefill tile forms them with one vpdpbusd
 *     chain for 16 rows: a third of the llama order's vector operations.
 *     Q6_K in block order: per 256-element super-block one exact integer
 *     sum (the 16 groups' scale x dot, the -32 offset included) and one fma;
 *     the llama order is llama.cpp's x86 vec_dot (8 lanes, as above). Its
 *     prefill tile puts 16 rows in the lanes of one vpdpbusd, as Q4_K's does.
 *     Against llama.cpp it lands about as far from llama.cpp's default as
 *     llama.cpp's own variants do, but not inside their recorded spread on
 *     every golden, so it is not the default (FIDELITY.md has the figures).
 *
 * Every ISA gives the portable kernel's bits in both orders (test_kernels),
 * and in either order batched = solo and speculative = plain.
 */
typedef enum el_cpu_order {
    EL_ORDER_LLAMA = 0,
    EL_ORDER_BLOCK = 1,
} el_cpu_order;

/*
 * Builds the kernel table for at most `max_level` (capped to what this CPU
 * supports) in arithmetic order `order` into out[EL_TYPE_COUNT]; returns the
 * level actually used. The process-wide table (el_cpu_kernels) is built with
 * the highest level, lowered by EL_CPU_ISA=portable|avx2|avx512|neon or
 * EL_FORCE_PORTABLE=1, in the order EL_KERNEL_ORDER=llama|block names
 * (default llama).
 */
el_cpu_level el_cpu_kernels_build(el_cpu_type_kernels out[EL_TYPE_COUNT], el_cpu_level max_level, el_cpu_order order);

/* The order of the process-wide table, and its name ("block", "llama"). */
el_cpu_order el_cpu_kernels_order(void);
const char *el_cpu_order_name(el_cpu_order o);

/* The level of the process-wide table, and a name for it ("avx512", …). */
el_cpu_level el_cpu_kernels_level(void);
const char *el_cpu_level_name(el_cpu_level l);

/* Kernels for a weight type, NULL if none. */
const el_cpu_type_kernels *el_cpu_kernels(el_type t);

/* The activation rows the process table's gemm for weight type t is made to
 * take per call (its packed weight block amortized over them); 0 when it
 * states none (the matmul driver then uses its own block). A property of
 * speed only: any block gives the same bits. */
int el_cpu_kernels_gemm_toks(el_type t);

#endif
