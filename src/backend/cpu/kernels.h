/*
 * kernels.h — the CPU backend's compute kernels, per weight type.
 *
 * A matrix product W·x (W quantized) is computed the way ggml does: each
 * activation row x is first quantized to the weight type's `vec_dot_type`
 * (Q8_0 for Q4_0/Q5_0/Q8_0/IQ4_NL, Q8_1 for Q4_1/Q5_1, Q8_K for the K-quants
 * and IQ4_XS, F16 for F16, BF16 for BF16, F32 for F32) with that type's
 * from_float, then each output is vec_dot(weight row, quantized x row).
 * This keeps results within llama.cpp's numerics.
 *
 * The table returned by el_cpu_kernels() is the dispatch point: the portable C
 * path fills every entry; ISA-specific tables (x86/ AVX2 and AVX-512, arm/
 * NEON) override entries at init time after a CPUID / hwcap check. Every ISA
 * kernel gives the same bits as the portable one (tests/test_kernels.c).
 */
#ifndef EL_BACKEND_CPU_KERNELS_H
#define EL_BACKEND_CPU_KERNELS_H
#include "package/types.h"

/* s = dot(x[0..n), y[0..n)); x in the weight type, y in vec_dot_type; n % block == 0. */
typedef void (*el_vec_dot_fn)(int n, float *s, const void *x, const void *y);

/*
 * Where llama.cpp's x86 build computes some rows of a batched product with a
 * different kernel (repacked gemm tiles for Q2_K/Q4_K, llamafile's tinyBLAS
 * for F32/F16/BF16), the arithmetic order — and so the last bits — differ
 * from vec_dot. A selector returns the kernel for activation row `row` of an
 * n_rows-row product with rows of k elements, or NULL for vec_dot.
 */
typedef el_vec_dot_fn (*el_vec_dot_select_fn)(int n_rows, int row, int k);

/*
 * A block of a matrix product at once: for weight rows r in [0, nr) and
 * activation rows t in [0, nt),
 *     y[t * ldy + r] = dot(weight row r, activation row t)
 * with exactly the bits vec_dot (or the kernel `select` picks for activation
 * row t0 + t of an n_act-row product) gives. w points at the first weight row
 * (ldw bytes per row), x at the first activation row in vec_dot_type (ldx
 * bytes per row). A gemm reuses each unpacked weight block across several
 * activation rows (prefill); it must not change any result.
 */
typedef void (*el_gemm_fn)(int k, const void *w, size_t ldw, int nr, const void *x, size_t ldx,
                           int t0, int nt, int n_act, float *y, size_t ldy);

typedef struct el_cpu_type_kernels {
    el_type vec_dot_type;
    el_vec_dot_fn vec_dot;        /* NULL: type not computable */
    el_from_float_fn quantize;    /* activations → vec_dot_type (see below) */
    el_vec_dot_select_fn select;  /* optional, see above */
    el_gemm_fn gemm;              /* optional, see above; NULL: vec_dot per output */
} el_cpu_type_kernels;

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
 * Builds the kernel table for at most `max_level` (capped to what this CPU
 * supports) into out[EL_TYPE_COUNT]; returns the level actually used. The
 * process-wide table (el_cpu_kernels) is built with the highest level,
 * lowered by EL_CPU_ISA=portable|avx2|avx512|neon or EL_FORCE_PORTABLE=1.
 */
el_cpu_level el_cpu_kernels_build(el_cpu_type_kernels out[EL_TYPE_COUNT], el_cpu_level max_level);

/* The level of the process-wide table, and a name for it ("avx512", …). */
el_cpu_level el_cpu_kernels_level(void);
const char *el_cpu_level_name(el_cpu_level l);

/*
 * The activation quantizers of the CPU backend (the table's `quantize`). For
 * Q8_0 and Q8_1 they follow llama.cpp's x86 CPU backend rather than ggml's
 * reference quantizer: the scale's inverse is 127/amax (not 1/(amax/127))
 * and values round half to even. The two differ on a few values per row,
 * enough to move log-probabilities of peaked models by more than the parity
 * tolerance; llama.cpp's x86 build is the reference. Q8_K, F16, BF16 and F32
 * use the format table's from_float (ggml's x86 build does the same).
 */
void el_cpu_quantize_q8_0(const float *src, void *dst, int64_t n);
void el_cpu_quantize_q8_1(const float *src, void *dst, int64_t n);

/* Kernels for a weight type, NULL if none. */
const el_cpu_type_kernels *el_cpu_kernels(el_type t);

/* The portable C implementations (always available; the reference for tests). */
const el_cpu_type_kernels *el_cpu_kernels_portable(el_type t);

#endif
