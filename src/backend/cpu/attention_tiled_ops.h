/*
 * attention_tiled_ops.h — the scalar arithmetic the tiled attention kernel
 * shares across instruction sets: ggml's vector expf (expf_poly.h, one lane)
 * and the 16-lane reduction of _mm512_reduce_add_ps. The vector versions in
 * x86/attention_tiled_*.c give the same bits lane by lane.
 */
#ifndef EL_BACKEND_CPU_ATTENTION_TILED_OPS_H
#define EL_BACKEND_CPU_ATTENTION_TILED_OPS_H

#include <math.h>

#include "backend/cpu/expf_poly.h"

/* ggml's vector expf, one lane (expf_poly.h). */
static inline float el_att_vexpf(float x) { return el_expf_poly(x); }

/* _mm512_reduce_add_ps's order: lane i+8 onto i, then i+4 onto i, then (0+2)+(1+3). */
static inline float el_att_reduce16(const float *e) {
    float t3[8], t6[4];
    for (int i = 0; i < 8; i++) t3[i] = e[i + 8] + e[i];
    for (int i = 0; i < 4; i++) t6[i] = t3[i + 4] + t3[i];
    return (t6[0] + t6[2]) + (t6[1] + t6[3]);
}

#endif
