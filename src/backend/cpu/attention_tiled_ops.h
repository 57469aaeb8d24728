/*
 * attention_tiled_ops.h — the scalar arithmetic the tiled attention kernel
 * shares across instruction sets: ggml's vector expf (its AVX-512 form, one
 * lane) and the 16-lane reduction of _mm512_reduce_add_ps. The vector
 * versions in x86/attention_tiled_*.c give the same bits lane by lane.
 */
#ifndef EL_BACKEND_CPU_ATTENTION_TILED_OPS_H
#define EL_BACKEND_CPU_ATTENTION_TILED_OPS_H

#include <math.h>

/*
 * exp(x) as ggml_v_expf (AVX-512) computes it: n = round(x·log2 e) by the
 * 1.5·2^23 trick, b = x − n·ln2 in two fused steps, a degree-5 polynomial in
 * fused steps, then j·2^n (vscalefps: one rounding, subnormals included).
 * |n| > 192 gives 0 (n ≤ 0) or +∞.
 */
static inline float el_att_vexpf(float x) {
    const float r = 0x1.8p23f;
    const float z = fmaf(x, 0x1.715476p+0f, r);
    const float n = z - r;
    const float b = fmaf(-n, 0x1.7f7d1cp-20f, fmaf(-n, 0x1.62e4p-1f, x));
    const float u = b * b;
    const float j = fmaf(fmaf(fmaf(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, fmaf(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)), u,
                         fmaf(0x1.ffffecp-1f, b, 1.0f));
    if (fabsf(n) > 192.0f) return n <= 0.0f ? 0.0f : INFINITY;
    if (n != n) return j; /* NaN in, NaN out */
    return ldexpf(j, (int)n);
}

/* _mm512_reduce_add_ps's order: lane i+8 onto i, then i+4 onto i, then (0+2)+(1+3). */
static inline float el_att_reduce16(const float *e) {
    float t3[8], t6[4];
    for (int i = 0; i < 8; i++) t3[i] = e[i + 8] + e[i];
    for (int i = 0; i < 4; i++) t6[i] = t3[i + 4] + t3[i];
    return (t6[0] + t6[2]) + (t6[1] + t6[3]);
}

#endif
