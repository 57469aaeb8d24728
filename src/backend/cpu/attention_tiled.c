/*
 * attention_tiled.c — the portable tiled attention kernel (the arithmetic is
 * specified in attention_tiled_impl.h; x86/attention_tiled_avx2.c and
 * x86/attention_tiled_avx512.c compute the same bits with vectors), and
 * el_att_vexpf, the scalar form of the vector expf that kernel's softmax
 * uses (ggml's AVX-512 ggml_v_expf, lane by lane).
 */
#include <math.h>

#include "backend/cpu/attention_internal.h"
#include "backend/cpu/attention_tiled_ops.h"
#include "backend/cpu/kernel_common.h"
#include "util/fp16.h"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

static inline void tl_cvt(const el_fp16 *h, float *f, int n) {
    for (int i = 0; i < n; i++) f[i] = el_fp16_to_fp32(h[i]);
}

static inline void tl_scores(const float *qt, int R, const float *kf, int cnt, int hd, float *sc) {
    for (int k = 0; k < cnt; k++)
        for (int r = 0; r < R; r++) {
            float s = 0.0f;
            for (int d = 0; d < hd; d++) s = fmaf(qt[(size_t)d * R + r], kf[(size_t)k * hd + d], s);
            sc[(size_t)k * R + r] = s;
        }
}

static inline double tl_expsum(float *s, float M) {
    double sum = 0.0;
    for (int g = 0; g < EL_ATT_TILE_KV; g += 16) {
        float *e = s + g;
        for (int i = 0; i < 16; i++) e[i] = el_att_vexpf(e[i] - M);
        sum += (double)el_att_reduce16(e);
    }
    return sum;
}

static inline void tl_vacc(float *acc, const float *e, const float *vf, int cnt, int hd) {
    for (int k = 0; k < cnt; k++) {
        if (e[k] == 0.0f) continue;
        const float *v = vf + (size_t)k * hd;
        for (int d = 0; d < hd; d++) acc[d] = fmaf(e[k], v[d], acc[d]);
    }
}

static inline void tl_scale(float *acc, float s, int hd) {
    for (int d = 0; d < hd; d++) acc[d] *= s;
}

#define TL_TASK el_attn_tiled_portable
#define EL_ATT_ATTR EL_CPU_CLONES
#include "backend/cpu/attention_tiled_impl.h"
