/*
 * expf_poly.h — exp(x) as llama.cpp's x86 CPU backend evaluates it (ggml's
 * vector expf, adapted from Arm's optimized routines), step for step in
 * scalar C: n = round(x·log2 e) by the 1.5·2^23 trick, b = x − n·ln2 in two
 * fused steps, a degree-5 polynomial in fused steps, then j·2^n correctly
 * rounded (ldexpf, as vscalefps); |n| > 192 gives 0 (n ≤ 0) or +∞, NaN
 * stays NaN. It differs from libm's expf in the last bits, and those bits
 * decide how activations round (SiLU, then the next matmul's quantization)
 * and how the tiled attention's softmax weights come out.
 * x86/expf_x86.h has the 8- and 16-lane forms with the same bits.
 */
#ifndef EL_BACKEND_CPU_EXPF_POLY_H
#define EL_BACKEND_CPU_EXPF_POLY_H
#include <math.h>

/* The reduction and the polynomial: exp(x) = j·2^n before the scaling. */
static inline float el_expf_poly_core(float x, float *n_out) {
    const float r = 0x1.8p23f;
    const float z = fmaf(x, 0x1.715476p+0f, r);
    const float n = z - r;
    const float b = fmaf(-n, 0x1.7f7d1cp-20f, fmaf(-n, 0x1.62e4p-1f, x));
    const float u = b * b;
    *n_out = n;
    return fmaf(fmaf(fmaf(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, fmaf(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)), u,
                fmaf(0x1.ffffecp-1f, b, 1.0f));
}

static inline float el_expf_poly(float x) {
    float n;
    const float j = el_expf_poly_core(x, &n);
    if (fabsf(n) > 192.0f) return n <= 0.0f ? 0.0f : INFINITY;
    if (n != n) return j; /* NaN in, NaN out (and no conversion of NaN to int) */
    return ldexpf(j, (int)n);
}

#endif
