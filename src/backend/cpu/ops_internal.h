/*
 * ops_internal.h — the element-wise operators of ops.c that have SIMD
 * variants (x86/ops_avx2.c, x86/ops_avx512.c), and the way to pick them.
 * Every variant gives the portable code's bits; ops.c uses the set of
 * el_cpu_kernels_level() (so EL_CPU_ISA / EL_FORCE_PORTABLE apply).
 */
#ifndef EL_BACKEND_CPU_OPS_INTERNAL_H
#define EL_BACKEND_CPU_OPS_INTERNAL_H

#include "backend/cpu/kernels.h"

typedef struct el_ops_kernels {
    /* gate = silu(gate) * up, n_rows rows of d (ops.h) */
    void (*silu_mul)(float *gate, const float *up, int n_rows, int d);
    /* y += x */
    void (*add)(float *y, const float *x, int n);
    /* out = (x * scale) * w, or x * scale if w is NULL; out may be x */
    void (*scale_mul)(const float *x, const float *w, float *out, int n, float scale);
    /* the rotation of el_op_rope for n_heads heads, cs = (cos, sin) pairs of n_rot/2 angles */
    void (*rope_rotate)(float *x, int n_heads, int head_dim, int n_rot, int neox, const float *cs);
    /* el_op_log_norm (ops.h) over 16-element chunks of x, n a multiple of 16:
     * lane maxima m[16] and lane sums acc[16] are updated in place; pass 1
     * updates m, pass 2 (with the final mx) updates acc */
    void (*lnorm_max)(const float *x, int n, float *m);
    void (*lnorm_sum)(const float *x, int n, float mx, double *acc);
} el_ops_kernels;

/* The set for instruction-set level `level` (lowered to what this CPU has); *used: the level given. */
el_ops_kernels el_ops_kernels_for(el_cpu_level level, el_cpu_level *used);

#if defined(__x86_64__)
extern const el_ops_kernels el_ops_kernels_avx2;
extern const el_ops_kernels el_ops_kernels_avx512;
#endif

#endif
