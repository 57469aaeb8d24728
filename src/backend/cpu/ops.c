/*
 * ops.c — CPU transformer operators (see ops.h for the contract).
 */
#include "backend/cpu/ops.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <pthread.h>
#include <string.h>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/expf_poly.h"
#include "backend/cpu/kernel_common.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/layout.h"
#include "backend/cpu/ops_internal.h"


/* ---- matrix product ------------------------------------------------------ */

size_t el_op_matmul_wsize(el_type t, int64_t k, int n) {
    const el_cpu_type_kernels *kk = el_cpu_kernels(t);
    if (!kk) return 0;
    if (kk->vec_dot_type == EL_TYPE_F32) return 0;
    return el_row_size(kk->vec_dot_type, k) * (size_t)n;
}

#define EL_MM_MAX 4 /* matrices one el_op_matmul_n call may take */

typedef struct {
    int count;
    const el_mat *W[EL_MM_MAX];
    float *y[EL_MM_MAX];
    const float *bias[EL_MM_MAX];
    int64_t units[EL_MM_MAX + 1]; /* prefix sums of EL_MM_ALIGN-row units per matrix */
    const float *x;   /* activations as float (for the parallel quantization) */
    const void *xq;   /* activations in vec_dot_type */
    size_t xq_row;    /* bytes per activation row */
    int64_t k;        /* activation row length (every W's ne0) */
    int n;
    const el_cpu_type_kernels *kk[EL_MM_MAX];
    int toks;         /* activation rows a gemm call takes (prefill's token block) */
    el_from_float_fn quantize;
    bool row_order; /* every activation row in the arithmetic of a one-row product */
} matmul_ctx;

/* Set by el_op_matmul_row_order on the calling thread; read when a product starts. */
static _Thread_local bool g_row_order;

void el_op_matmul_row_order(bool on) { g_row_order = on; }

bool el_op_matmul_row_order_on(void) { return g_row_order; }

/*
 * Work split. The rows of all matrices of one call (Q, K, V; or gate, up)
 * are cut in units of EL_MM_ALIGN rows, and each thread takes a contiguous
 * share of the units: in decode the two cores stream disjoint parts of the
 * weights, with one pool job (one barrier) for the whole group. Prefill walks
 * each share in blocks of EL_MM_ROWS weight rows × EL_MM_TOKS activation rows
 * (or the larger block a matrix's gemm is made for, el_cpu_kernels_gemm_toks)
 * handed to the type's gemm (or vec_dot per output), so a block of weights is
 * unpacked once per block of tokens and stays in cache. Units keep threads
 * off each other's cache lines of y.
 */
#define EL_MM_ROWS 64
#define EL_MM_TOKS 64
#define EL_MM_ALIGN 16
#define EL_MM_LAYOUT_TOKS 8 /* up to this many activation rows, a packed matrix is one call per thread */

static void matmul_rows(const matmul_ctx *c, int mi, int64_t r0, int64_t r1, int t0, int t1) {
    const el_mat *W = c->W[mi];
    const int64_t rows = W->ne1;
    const int k = (int)W->ne0;
    const uint8_t *wbase = W->data;
    const el_cpu_type_kernels *kk = c->kk[mi];
    float *y = c->y[mi];
    /* row order: each row computed as the only row of a product (selectors see n = 1, row 0) */
    const int n_sel = c->row_order ? 1 : c->n;
    if (W->layout) { /* packed rows (layout.h): the type's arithmetic, any row count, so row order too */
        const size_t gb = el_layout_group_bytes((el_layout)W->layout, k);
        const el_layout_gemm_fn gemm = el_cpu_layout_gemm((el_layout)W->layout);
        /* at most EL_MM_TOKS activation rows a call (a gemm's larger token block is for the flat kernels'
         * unpacking; here the rows stream from cache once per group) */
        for (int tb = t0; tb < t1; tb += EL_MM_TOKS) {
            const int te = tb + EL_MM_TOKS < t1 ? tb + EL_MM_TOKS : t1;
            /* Q4_K's activation rows below n - n % 4 in its 4-row order, as the flat selector (none in row order) */
            const int lim = n_sel - n_sel % 4, ta = c->row_order ? 0 : tb;
            const int x4 = lim - ta <= 0 ? 0 : lim - ta < te - tb ? lim - ta : te - tb;
            gemm(k, (const uint8_t *)W->packed + gb * (size_t)(r0 / EL_LAYOUT_R16_ROWS), (int)(r1 - r0),
                 (const uint8_t *)c->xq + c->xq_row * (size_t)tb, c->xq_row, te - tb, y + (size_t)tb * (size_t)rows + r0,
                 (size_t)rows, x4);
        }
    } else if (kk->gemm) {
        kk->gemm(k, wbase + W->row_bytes * (size_t)r0, W->row_bytes, (int)(r1 - r0),
                 (const uint8_t *)c->xq + c->xq_row * (size_t)t0, c->xq_row, c->row_order ? 0 : t0, t1 - t0, n_sel,
                 y + (size_t)t0 * (size_t)rows + r0, (size_t)rows);
    } else {
        for (int t = t0; t < t1; t++) {
            const uint8_t *xr = (const uint8_t *)c->xq + c->xq_row * (size_t)t;
            float *yr = y + (size_t)t * (size_t)rows;
            el_vec_dot_fn dot = kk->select ? kk->select(n_sel, c->row_order ? 0 : t, k) : NULL;
            if (!dot) dot = kk->vec_dot;
            for (int64_t r = r0; r < r1; r++) dot(k, &yr[r], wbase + W->row_bytes * (size_t)r, xr);
        }
    }
    const float *bias = c->bias[mi];
    if (bias)
        for (int t = t0; t < t1; t++) {
            float *yr = y + (size_t)t * (size_t)rows;
            for (int64_t r = r0; r < r1; r++) yr[r] += bias[r];
        }
}

static void matmul_task(void *vctx, int ith, int nth) {
    const matmul_ctx *c = vctx;
    const int64_t total = c->units[c->count];
    const int64_t u0 = total * ith / nth, u1 = total * (ith + 1) / nth;
    for (int t0 = 0; t0 < c->n; t0 += c->toks) {
        const int t1 = t0 + c->toks < c->n ? t0 + c->toks : c->n;
        for (int mi = 0; mi < c->count; mi++) {
            const int64_t a = u0 > c->units[mi] ? u0 : c->units[mi];
            const int64_t b = u1 < c->units[mi + 1] ? u1 : c->units[mi + 1];
            if (a >= b) continue;
            const int64_t rows = c->W[mi]->ne1;
            const int64_t r0 = (a - c->units[mi]) * EL_MM_ALIGN;
            const int64_t r1 = (b - c->units[mi]) * EL_MM_ALIGN < rows ? (b - c->units[mi]) * EL_MM_ALIGN : rows;
            /* a packed matrix in decode: the thread's whole share in one call (its kernel streams it once) */
            const int64_t step = c->W[mi]->layout && t1 - t0 <= EL_MM_LAYOUT_TOKS ? r1 - r0 : EL_MM_ROWS;
            for (int64_t rb = r0; rb < r1; rb += step)
                matmul_rows(c, mi, rb, rb + step < r1 ? rb + step : r1, t0, t1);
        }
    }
}

/* Activation rows quantized to vec_dot_type, rows split across threads. */
static void quantize_task(void *vctx, int ith, int nth) {
    const matmul_ctx *c = vctx;
    int lo, hi;
    el_split_range(c->n, ith, nth, &lo, &hi);
    for (int t = lo; t < hi; t++)
        c->quantize(c->x + (size_t)t * (size_t)c->k, (uint8_t *)c->xq + c->xq_row * (size_t)t, c->k);
}

void el_op_matmul_n(el_pool *pool, int count, const el_mat *const W[], const float *x, int n,
                    float *const y[], const float *const bias[], void *wscratch) {
    /* One group shares the quantized activations: same row length and activation format. */
    int ok = count >= 1 && count <= EL_MM_MAX;
    for (int i = 1; ok && i < count; i++)
        ok = W[i]->ne0 == W[0]->ne0 &&
             el_cpu_kernels(W[i]->type)->vec_dot_type == el_cpu_kernels(W[0]->type)->vec_dot_type;
    if (!ok) {
        for (int i = 0; i < count; i++) el_op_matmul_n(pool, 1, &W[i], x, n, &y[i], bias ? &bias[i] : NULL, wscratch);
        return;
    }
    matmul_ctx c = {.count = count, .x = x, .n = n, .k = W[0]->ne0, .row_order = g_row_order, .toks = EL_MM_TOKS};
    for (int i = 0; i < count; i++) {
        c.W[i] = W[i];
        c.y[i] = y[i];
        c.bias[i] = bias ? bias[i] : NULL;
        c.kk[i] = el_cpu_kernels(W[i]->type);
        const int tk = c.kk[i]->gemm ? el_cpu_kernels_gemm_toks(W[i]->type) : 0;
        if (tk > c.toks) c.toks = tk;
        c.units[i + 1] = c.units[i] + (W[i]->ne1 + EL_MM_ALIGN - 1) / EL_MM_ALIGN;
    }
    const el_cpu_type_kernels *kk = c.kk[0];
    if (kk->vec_dot_type == EL_TYPE_F32) {
        c.xq = x;
        c.xq_row = sizeof(float) * (size_t)c.k;
    } else {
        c.quantize = kk->quantize;
        c.xq_row = el_row_size(kk->vec_dot_type, c.k);
        c.xq = wscratch;
        if (n >= 4) el_pool_run(pool, quantize_task, &c);
        else quantize_task(&c, 0, 1);
    }
    el_pool_run(pool, matmul_task, &c);
}

void el_op_matmul(el_pool *pool, const el_mat *W, const float *x, int n, float *y,
                  const float *bias, void *wscratch) {
    el_op_matmul_n(pool, 1, &W, x, n, &y, bias ? &bias : NULL, wscratch);
}

void el_op_get_row(const el_mat *W, int64_t row, float *out) {
    const el_type_info *t = el_type_get(W->type);
    if (W->data) {
        t->to_float((const uint8_t *)W->data + W->row_bytes * (size_t)row, out, W->ne0);
        return;
    }
    /* a file's layout with no flat rows (a tied embedding): the row's blocks gathered from its group */
    uint8_t blk[256]; /* the largest layout block (Q4_K: 144 bytes) */
    for (int64_t b = 0; b < W->ne0 / t->blck_size; b++) {
        el_layout_block((el_layout)W->layout, W->packed, W->ne0, row, b, blk);
        t->to_float(blk, out + t->blck_size * b, t->blck_size);
    }
}

/* ---- elementwise ---------------------------------------------------------- */

/*
 * The portable element-wise kernels (the specification); x86/ops_avx2.c and
 * x86/ops_avx512.c give the same bits with vectors. The set is chosen once
 * from el_cpu_kernels_level().
 */

static void add_portable(float *y, const float *x, int n) {
    for (int i = 0; i < n; i++) y[i] += x[i];
}

static void scale_mul_portable(const float *x, const float *w, float *out, int n, float scale) {
    if (w) for (int i = 0; i < n; i++) out[i] = (x[i] * scale) * w[i];
    else for (int i = 0; i < n; i++) out[i] = x[i] * scale;
}

/* The rotation contracts one product of each output into a fused multiply-add
 * exactly where llama.cpp's x86 build does, so rotated values match it bit for bit. */
EL_CPU_CLONES static void rope_rotate_portable(float *x, int n_heads, int head_dim, int n_rot, int neox, const float *cs) {
    for (int h = 0; h < n_heads; h++) {
        float *v = x + (size_t)h * head_dim;
        if (neox) {
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


EL_CPU_CLONES static void silu_mul_portable(float *gate, const float *up, int n_rows, int d) {
    const int dv = d & ~15; /* llama.cpp's vector path covers whole groups of 16 per row */
    for (int r = 0; r < n_rows; r++) {
        float *g = gate + (size_t)r * d;
        const float *u = up + (size_t)r * d;
        for (int i = 0; i < dv; i++) g[i] = (g[i] / (1.0f + el_expf_poly(0.0f - g[i]))) * u[i];
        for (int i = dv; i < d; i++) g[i] = (g[i] / (1.0f + expf(-g[i]))) * u[i];
    }
}

static inline float lnorm_san(float x) { return x == x ? (x < FLT_MAX ? x : FLT_MAX) : -INFINITY; }

static void lnorm_max_portable(const float *x, int n, float *m) {
    for (int i = 0; i < n; i++) {
        const float v = lnorm_san(x[i]);
        m[i & 15] = v > m[i & 15] ? v : m[i & 15];
    }
}

/* el_expf_poly's bits without the ldexpf call (the portable level is what
 * AArch64 runs here): j·2^a·2^b with a = ⌊n/2⌋, b = n − a, both powers normal,
 * so only the last product rounds, as ldexpf does — x86/expf_x86.h's 8-lane form. */
static inline float lnorm_pow2(int e) {
    const uint32_t u = (uint32_t)(e + 127) << 23;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline float lnorm_expf(float x) {
    float n;
    const float j = el_expf_poly_core(x, &n);
    const float nc = n < -192.0f ? -192.0f : n > 192.0f ? 192.0f : n;
    const int ni = nc == nc ? (int)nc : 0, a = ni >> 1;
    const float res = (j * lnorm_pow2(a)) * lnorm_pow2(ni - a);
    if (fabsf(n) > 192.0f) return n <= 0.0f ? 0.0f : INFINITY;
    return n != n ? j : res;
}

static void lnorm_sum_portable(const float *x, int n, float mx, double *acc) {
    for (int i = 0; i < n; i++) acc[i & 15] += (double)lnorm_expf(lnorm_san(x[i]) - mx);
}

static const el_ops_kernels k_ops_portable = {
    .silu_mul = silu_mul_portable,
    .add = add_portable,
    .scale_mul = scale_mul_portable,
    .rope_rotate = rope_rotate_portable,
    .lnorm_max = lnorm_max_portable,
    .lnorm_sum = lnorm_sum_portable,
};

el_ops_kernels el_ops_kernels_for(el_cpu_level level, el_cpu_level *used) {
    el_ops_kernels k = k_ops_portable;
    el_cpu_level u = EL_CPU_PORTABLE;
#if defined(__x86_64__)
    const el_cpu_features *f = el_cpu_features_get();
    const int avx2 = f->avx2 && f->fma && f->f16c;
    const int avx512 = avx2 && f->avx512f && f->avx512bw && f->avx512vl && f->avx512dq;
    if (level >= EL_CPU_AVX512 && level != EL_CPU_NEON && avx512) {
        k = el_ops_kernels_avx512;
        u = EL_CPU_AVX512;
    } else if (level >= EL_CPU_AVX2 && level != EL_CPU_NEON && avx2) {
        k = el_ops_kernels_avx2;
        u = EL_CPU_AVX2;
    }
#else
    (void)level;
#endif
    if (used) *used = u;
    return k;
}

static el_ops_kernels g_ops;
static pthread_once_t g_ops_once = PTHREAD_ONCE_INIT;
static void init_ops(void) { g_ops = el_ops_kernels_for(el_cpu_kernels_level(), NULL); }
static inline const el_ops_kernels *ops(void) {
    pthread_once(&g_ops_once, init_ops);
    return &g_ops;
}

/* The sum of squares stays sequential in double, as llama.cpp adds it. */
void el_op_rmsnorm(const float *x, const float *w, float *out, int n_rows, int d, float eps) {
    const el_ops_kernels *k = ops();
    for (int r = 0; r < n_rows; r++) {
        const float *xr = x + (size_t)r * d;
        double sum = 0.0;
        for (int i = 0; i < d; i++) sum += (double)(xr[i] * xr[i]);
        const float mean = (float)(sum / d);
        const float scale = 1.0f / sqrtf(mean + eps);
        k->scale_mul(xr, w, out + (size_t)r * d, d, scale);
    }
}

static float yarn_corr_dim(int n_rot, int n_ctx_orig, float beta, float base) {
    return (float)n_rot * logf((float)n_ctx_orig / (beta * 2.0f * 3.14159265358979323846f)) / (2.0f * logf(base));
}

void el_rope_yarn_corr(int n_rot, int n_ctx_orig, float freq_base, float beta_fast, float beta_slow, float *lo, float *hi) {
    const float start = floorf(yarn_corr_dim(n_rot, n_ctx_orig, beta_fast, freq_base));
    const float end = ceilf(yarn_corr_dim(n_rot, n_ctx_orig, beta_slow, freq_base));
    *lo = start > 0.0f ? start : 0.0f;
    *hi = end < (float)(n_rot - 1) ? end : (float)(n_rot - 1);
}

void el_op_rope(float *x, int n_heads, int head_dim, int pos, const el_rope *r, float *cs) {
    const int n_rot = r->n_rot;
    const float theta_scale = powf(r->freq_base, -2.0f / (float)n_rot);
    float theta = (float)pos;
    /* YaRN as llama.cpp's build computes ggml's rope_yarn: the blend and the
     * magnitude's 1 + 0.1·ln(1/freq_scale) each one fused multiply-add (the
     * blend's fma is what makes tiny-gpt-oss's goldens bit-equal; plain
     * arithmetic moved them by 0.01-0.39 nats) */
    if (r->ext_factor != 0.0f) {
        float ms = r->mscale != 0.0f ? r->mscale : 1.0f;
        ms *= fmaf(0.1f, logf(1.0f / r->freq_scale), 1.0f);
        const float span = r->corr_hi - r->corr_lo > 0.001f ? r->corr_hi - r->corr_lo : 0.001f;
        for (int i0 = 0; i0 < n_rot; i0 += 2) {
            const float ff = r->freq_factors ? r->freq_factors[i0 / 2] : 1.0f;
            const float extrap = theta / ff, interp = r->freq_scale * extrap;
            const float y = ((float)(i0 / 2) - r->corr_lo) / span;
            const float ramp = (1.0f - (y < 0.0f ? 0.0f : y > 1.0f ? 1.0f : y)) * r->ext_factor;
            const float th = fmaf(interp, 1.0f - ramp, extrap * ramp);
            cs[i0] = cosf(th) * ms;
            cs[i0 + 1] = sinf(th) * ms;
            theta *= theta_scale;
        }
        ops()->rope_rotate(x, n_heads, head_dim, n_rot, r->mode == EL_ROPE_NEOX, cs);
        return;
    }
    for (int i0 = 0; i0 < n_rot; i0 += 2) {
        const float ff = r->freq_factors ? r->freq_factors[i0 / 2] : 1.0f;
        const float th = r->freq_scale * (theta / ff);
        cs[i0] = cosf(th);
        cs[i0 + 1] = sinf(th);
        theta *= theta_scale;
    }
    if (r->mscale != 0.0f && r->mscale != 1.0f) /* ggml: cos·mscale, sin·mscale */
        for (int i = 0; i < n_rot; i++) cs[i] *= r->mscale;
    ops()->rope_rotate(x, n_heads, head_dim, n_rot, r->mode == EL_ROPE_NEOX, cs);
}

void el_op_silu_mul(float *gate, const float *up, int n_rows, int d) { ops()->silu_mul(gate, up, n_rows, d); }

/* ggml evaluates GELU through a table indexed by the F16 value of x and
 * stores F16 results (for |x| < 10); reproduce those roundings. The table
 * holds, for every F16 value h, fp16(gelu_tanh(h)) as a float: the same
 * function of h the formula gives, computed once. */
static inline float gelu_tanh(float x) {
    const float GELU_COEF_A = 0.044715f;
    const float SQRT_2_OVER_PI = 0.79788456080286535587989211986876f;
    return 0.5f * x * (1.0f + tanhf(SQRT_2_OVER_PI * x * fmaf(GELU_COEF_A * x, x, 1.0f)));
}

static float g_gelu[1 << 16];
static pthread_once_t g_gelu_once = PTHREAD_ONCE_INIT;
static void init_gelu(void) {
    for (uint32_t h = 0; h < (1u << 16); h++)
        g_gelu[h] = el_fp16_to_fp32(el_fp32_to_fp16(gelu_tanh(el_fp16_to_fp32((el_fp16)h))));
}

void el_op_gelu_mul(float *gate, const float *up, int n) {
    pthread_once(&g_gelu_once, init_gelu);
    for (int i = 0; i < n; i++) {
        const float x = gate[i];
        float g;
        if (x <= -10.0f) g = 0.0f;
        else if (x >= 10.0f) g = x;
        else g = g_gelu[el_fp32_to_fp16(x)];
        gate[i] = g * up[i];
    }
}

void el_op_add(float *y, const float *x, int n) { ops()->add(y, x, n); }

/* The tail (n % 16 values) goes through the kernels as one chunk padded with
 * −∞: its lanes keep their maxima and add expf(−∞) = +0 to their sums. */
void el_op_log_norm(const float *x, int n, float *mx_out, double *sum_out) {
    const el_ops_kernels *k = ops();
    const int nv = n > 0 ? n & ~15 : 0;
    float tail[16];
    for (int i = 0; i < 16; i++) tail[i] = nv + i < n ? x[nv + i] : -INFINITY;
    float m[16];
    for (int i = 0; i < 16; i++) m[i] = -INFINITY;
    k->lnorm_max(x, nv, m);
    k->lnorm_max(tail, 16, m);
    float mx = m[0];
    for (int i = 1; i < 16; i++) mx = m[i] > mx ? m[i] : mx;
    double acc[16] = {0}, sum = 0.0;
    if (mx > -INFINITY) {
        k->lnorm_sum(x, nv, mx, acc);
        k->lnorm_sum(tail, 16, mx, acc);
        for (int i = 0; i < 16; i++) sum += acc[i];
    }
    *mx_out = mx;
    *sum_out = sum;
}

void el_op_scale(float *y, float s, int n) {
    for (int i = 0; i < n; i++) y[i] *= s;
}
