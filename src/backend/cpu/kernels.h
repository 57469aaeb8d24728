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
 * path fills every entry; ISA-specific paths (AVX2, AVX-512, NEON) override
 * entries at init time after CPUID checks.
 */
#ifndef EL_BACKEND_CPU_KERNELS_H
#define EL_BACKEND_CPU_KERNELS_H
#include "package/types.h"

/* s = dot(x[0..n), y[0..n)); x in the weight type, y in vec_dot_type; n % block == 0. */
typedef void (*el_vec_dot_fn)(int n, float *s, const void *x, const void *y);

typedef struct el_cpu_type_kernels {
    el_type vec_dot_type;
    el_vec_dot_fn vec_dot; /* NULL: type not computable */
} el_cpu_type_kernels;

/* Kernels for a weight type, NULL if none. */
const el_cpu_type_kernels *el_cpu_kernels(el_type t);

/* The portable C implementations (always available; the reference for tests). */
const el_cpu_type_kernels *el_cpu_kernels_portable(el_type t);

#endif
