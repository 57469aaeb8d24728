/*
 * ops.c — CPU transformer operators (see ops.h for the contract).
 */
#include "backend/cpu/ops.h"

#include <math.h>
#include <string.h>

#include "backend/cpu/kernels.h"
#include "backend/cpu/kernels_internal.h"

#define EL_OPS_MAX_HEAD_DIM 512

/* ---- matrix product ------------------------------------------------------ */

size_t el_op_matmul_wsize(el_type t, int64_t k, int n) {
    const el_cpu_type_kernels *kk = el_cpu_kernels(t);
    if (!kk) return 0;
    if (kk->vec_dot_type == EL_TYPE_F32) return 0;
    return el_row_size(kk->vec_dot_type, k) * (size_t)n;
}

typedef struct {
    const el_mat *W;
    const void *xq;   /* activations in vec_dot_type */
    size_t xq_row;    /* bytes per activation row */
    int n;
    float *y;
    const float *bias;
    el_vec_dot_fn dot;
    el_vec_dot_select_fn select;
} matmul_ctx;

#define EL_MM_ROW_TILE 16

static void matmul_task(void *vctx, int ith, int nth) {
    const matmul_ctx *c = vctx;
    const el_mat *W = c->W;
    const int64_t rows = W->ne1;
    /* Split rows in tiles so each thread's range is contiguous and balanced. */
    int64_t per = (rows + nth - 1) / nth;
    int64_t r0 = per * ith, r1 = r0 + per;
    if (r1 > rows) r1 = rows;
    const uint8_t *wbase = W->data;
    for (int64_t rt = r0; rt < r1; rt += EL_MM_ROW_TILE) {
        int64_t re = rt + EL_MM_ROW_TILE < r1 ? rt + EL_MM_ROW_TILE : r1;
        for (int t = 0; t < c->n; t++) {
            const uint8_t *xr = (const uint8_t *)c->xq + c->xq_row * (size_t)t;
            float *yr = c->y + (size_t)t * (size_t)rows;
            el_vec_dot_fn dot = c->select ? c->select(c->n, t, (int)W->ne0) : NULL;
            if (!dot) dot = c->dot;
            for (int64_t r = rt; r < re; r++) {
                float s;
                dot((int)W->ne0, &s, wbase + W->row_bytes * (size_t)r, xr);
                yr[r] = c->bias ? s + c->bias[r] : s;
            }
        }
    }
}

void el_op_matmul(el_pool *pool, const el_mat *W, const float *x, int n, float *y,
                  const float *bias, void *wscratch) {
    const el_cpu_type_kernels *kk = el_cpu_kernels(W->type);
    matmul_ctx c = {.W = W, .n = n, .y = y, .bias = bias, .dot = kk->vec_dot, .select = kk->select};
    if (kk->vec_dot_type == EL_TYPE_F32) {
        c.xq = x;
        c.xq_row = sizeof(float) * (size_t)W->ne0;
    } else {
        c.xq_row = el_row_size(kk->vec_dot_type, W->ne0);
        for (int t = 0; t < n; t++)
            kk->quantize(x + (size_t)t * (size_t)W->ne0, (uint8_t *)wscratch + c.xq_row * (size_t)t, W->ne0);
        c.xq = wscratch;
    }
    el_pool_run(pool, matmul_task, &c);
}

void el_op_get_row(const el_mat *W, int64_t row, float *out) {
    const el_type_info *t = el_type_get(W->type);
    t->to_float((const uint8_t *)W->data + W->row_bytes * (size_t)row, out, W->ne0);
}

/* ---- elementwise ---------------------------------------------------------- */

void el_op_rmsnorm(const float *x, const float *w, float *out, int n_rows, int d, float eps) {
    for (int r = 0; r < n_rows; r++) {
        const float *xr = x + (size_t)r * d;
        float *o = out + (size_t)r * d;
        double sum = 0.0;
        for (int i = 0; i < d; i++) sum += (double)(xr[i] * xr[i]);
        const float mean = (float)(sum / d);
        const float scale = 1.0f / sqrtf(mean + eps);
        if (w) for (int i = 0; i < d; i++) o[i] = (xr[i] * scale) * w[i];
        else for (int i = 0; i < d; i++) o[i] = xr[i] * scale;
    }
}

/* The rotation contracts one product of each output into a fused multiply-add
 * exactly where llama.cpp's x86 build does, so rotated values match it bit for bit. */
EL_CPU_CLONES void el_op_rope(float *x, int n_heads, int head_dim, int pos, const el_rope *r, float *cs) {
    const int n_rot = r->n_rot;
    const float theta_scale = powf(r->freq_base, -2.0f / (float)n_rot);
    float theta = (float)pos;
    for (int i0 = 0; i0 < n_rot; i0 += 2) {
        const float ff = r->freq_factors ? r->freq_factors[i0 / 2] : 1.0f;
        const float th = r->freq_scale * (theta / ff);
        cs[i0] = cosf(th);
        cs[i0 + 1] = sinf(th);
        theta *= theta_scale;
    }
    for (int h = 0; h < n_heads; h++) {
        float *v = x + (size_t)h * head_dim;
        if (r->mode == EL_ROPE_NEOX) {
            const int half = n_rot / 2;
            for (int i = 0; i < half; i++) {
                const float c = cs[2 * i], s = cs[2 * i + 1];
                const float a = v[i], b = v[i + half];
                v[i] = fmaf(a, c, -(b * s));
                v[i + half] = fmaf(a, s, b * c);
            }
        } else {
            for (int i0 = 0; i0 < n_rot; i0 += 2) {
                const float c = cs[i0], s = cs[i0 + 1];
                const float a = v[i0], b = v[i0 + 1];
                v[i0] = fmaf(a, c, -(b * s));
                v[i0 + 1] = fmaf(a, s, b * c);
            }
        }
    }
}

/*
 * exp(x) as llama.cpp's x86 CPU backend evaluates it inside SiLU (a
 * polynomial after range reduction, adapted from Arm's optimized routines),
 * step for step in scalar C: the same fused multiply-adds and the same final
 * scaling by 2^n. It differs from libm's expf in the last bits, and those
 * bits decide how activations round when quantized for the next matmul.
 */
static inline float expf_ggml_poly(float x) {
    const float r = 0x1.8p23f;
    const float z = fmaf(x, 0x1.715476p+0f, r);
    const float n = z - r;
    const float b = fmaf(-n, 0x1.7f7d1cp-20f, fmaf(-n, 0x1.62e4p-1f, x));
    const float u = b * b;
    const float j = fmaf(fmaf(fmaf(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, fmaf(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)), u,
                         fmaf(0x1.ffffecp-1f, b, 1.0f));
    if (fabsf(n) > 192.0f) return n <= 0.0f ? 0.0f : INFINITY;
    return ldexpf(j, (int)n);
}

EL_CPU_CLONES void el_op_silu_mul(float *gate, const float *up, int n_rows, int d) {
    const int dv = d & ~15; /* llama.cpp's vector path covers whole groups of 16 per row */
    for (int r = 0; r < n_rows; r++) {
        float *g = gate + (size_t)r * d;
        const float *u = up + (size_t)r * d;
        for (int i = 0; i < dv; i++) g[i] = (g[i] / (1.0f + expf_ggml_poly(0.0f - g[i]))) * u[i];
        for (int i = dv; i < d; i++) g[i] = (g[i] / (1.0f + expf(-g[i]))) * u[i];
    }
}

/* ggml evaluates GELU through a table indexed by the F16 value of x and
 * stores F16 results (for |x| < 10); reproduce those roundings. */
static inline float gelu_tanh(float x) {
    const float GELU_COEF_A = 0.044715f;
    const float SQRT_2_OVER_PI = 0.79788456080286535587989211986876f;
    return 0.5f * x * (1.0f + tanhf(SQRT_2_OVER_PI * x * fmaf(GELU_COEF_A * x, x, 1.0f)));
}

void el_op_gelu_mul(float *gate, const float *up, int n) {
    for (int i = 0; i < n; i++) {
        const float x = gate[i];
        float g;
        if (x <= -10.0f) g = 0.0f;
        else if (x >= 10.0f) g = x;
        else g = el_fp16_to_fp32(el_fp32_to_fp16(gelu_tanh(el_fp16_to_fp32(el_fp32_to_fp16(x)))));
        gate[i] = g * up[i];
    }
}

void el_op_add(float *y, const float *x, int n) {
    for (int i = 0; i < n; i++) y[i] += x[i];
}

void el_op_scale(float *y, float s, int n) {
    for (int i = 0; i < n; i++) y[i] *= s;
}

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
