/*
 * attention.c — attention over the F16 KV cache (see ops.h), in the
 * arithmetic of ggml's CPU flash-attention kernel.
 */
#include <math.h>
#include <string.h>

#include "backend/cpu/kernels_internal.h"
#include "backend/cpu/ops.h"

#define EL_OPS_MAX_HEAD_DIM 512

/* ---- attention ------------------------------------------------------------ */

void el_op_kv_store(el_fp16 *cache, const float *x, int n, int pos0, int row_len) {
    for (int t = 0; t < n; t++) {
        el_fp16 *dst = cache + (size_t)(pos0 + t) * row_len;
        const float *src = x + (size_t)t * row_len;
        for (int i = 0; i < row_len; i++) dst[i] = el_fp32_to_fp16(src[i]);
    }
}

/*
 * Q·K for one cache row, in the arithmetic order of ggml's F16 dot product
 * as llama.cpp's reference build runs it (x86-64, 16-lane vectors, 4
 * accumulators of 64 elements per step, then a fixed reduction tree; the
 * tail below a multiple of 64 summed in double). Keeping the order keeps the
 * attention scores bit-identical, which matters for models whose
 * distributions are peaked: llama.cpp's own variants of this kernel differ
 * by more than the parity tolerance on such models.
 */
static float dot_f16_ggml_order(const el_fp16 *k, const float *qf, int n) {
    const int np = n & ~63;
    double sumf = 0.0;
    if (np > 0) {
        float acc[4][16];
        memset(acc, 0, sizeof acc);
        for (int i = 0; i < np; i += 64)
            for (int j = 0; j < 4; j++)
                for (int l = 0; l < 16; l++)
                    acc[j][l] = fmaf(el_fp16_to_fp32(k[i + j * 16 + l]), qf[i + j * 16 + l], acc[j][l]);
        for (int l = 0; l < 16; l++) {
            acc[0][l] += acc[2][l];
            acc[1][l] += acc[3][l];
        }
        for (int l = 0; l < 16; l++) acc[0][l] += acc[1][l];
        float t3[8], t6[4];
        for (int i = 0; i < 8; i++) t3[i] = acc[0][i + 8] + acc[0][i];
        for (int i = 0; i < 4; i++) t6[i] = t3[i + 4] + t3[i];
        sumf = (double)((t6[0] + t6[2]) + (t6[1] + t6[3]));
    }
    for (int i = np; i < n; i++) sumf += (double)(el_fp16_to_fp32(k[i]) * qf[i]);
    return (float)sumf;
}

/*
 * One (token, head) pair per job, computed the way ggml's CPU flash-attention
 * kernel does for an F16 cache (llama.cpp's default on CPU): Q rounded to F16,
 * Q·K in float, an online softmax over positions in order, and the weighted
 * sum of V accumulated in an F16 vector (rescaled in F16 when the running
 * maximum grows), converted to float and divided by the sum at the end.
 */
EL_CPU_CLONES static void attention_task(void *vctx, int ith, int nth) {
    const el_attn_args *a = vctx;
    const int hd = a->head_dim;
    const int kv_row = a->n_head_kv * hd;
    const int group = a->n_head / a->n_head_kv;
    int lo_job, hi_job;
    el_split_range(a->n * a->n_head, ith, nth, &lo_job, &hi_job);
    for (int job = lo_job; job < hi_job; job++) {
        const int t = job / a->n_head, h = job % a->n_head;
        const int p = a->pos0 + t;
        const int kvh = h / group;
        const int lo = a->window > 0 && p - a->window + 1 > 0 ? p - a->window + 1 : 0;
        const float *q = a->q + (size_t)t * a->n_head * hd + (size_t)h * hd;
        float qf[EL_OPS_MAX_HEAD_DIM]; /* Q rounded to F16, as the kernel converts it */
        for (int i = 0; i < hd; i++) qf[i] = el_fp16_to_fp32(el_fp32_to_fp16(q[i]));
        el_fp16 acc[EL_OPS_MAX_HEAD_DIM];
        memset(acc, 0, sizeof(el_fp16) * (size_t)hd);
        float M = -INFINITY, S = 0.0f;
        for (int j = lo; j <= p; j++) {
            const el_fp16 *k = a->kcache + (size_t)j * kv_row + (size_t)kvh * hd;
            const float s = dot_f16_ggml_order(k, qf, hd) * a->scale;
            float ms = 1.0f, vs = 1.0f;
            if (s > M) {
                const float Mold = M;
                M = s;
                ms = expf(Mold - M);
                for (int i = 0; i < hd; i++) acc[i] = el_fp32_to_fp16(el_fp16_to_fp32(acc[i]) * ms);
            } else {
                vs = expf(s - M);
            }
            const el_fp16 *v = a->vcache + (size_t)j * kv_row + (size_t)kvh * hd;
            for (int i = 0; i < hd; i++) acc[i] = el_fp32_to_fp16(fmaf(el_fp16_to_fp32(v[i]), vs, el_fp16_to_fp32(acc[i])));
            S = fmaf(S, ms, vs); /* contracted in llama.cpp's build */
        }
        const float inv = S == 0.0f ? 0.0f : 1.0f / S;
        float *o = a->out + (size_t)t * a->n_head * hd + (size_t)h * hd;
        for (int i = 0; i < hd; i++) o[i] = el_fp16_to_fp32(acc[i]) * inv;
    }
}

void el_op_attention(el_pool *pool, const el_attn_args *a) {
    el_pool_run(pool, attention_task, (void *)a);
}
