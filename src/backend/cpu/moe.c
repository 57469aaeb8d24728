/*
 * moe.c — the mixture-of-experts FFN on the CPU (el_op_moe, ops.h).
 *
 * One call: router product for all rows, softmax and top-k per row, then
 * expert by expert the rows that chose it are gathered into one block and run
 * through that expert's gate/up product, SiLU-gate and down product with
 * el_op_matmul (so every weight type the CPU backend multiplies works, and
 * each chosen expert's weights stream once per call: prefill, batched decode
 * and speculative verification share the read). The down products land in a
 * buffer of one row per (token, choice); each token's output sums its choices
 * in the order llama.cpp adds them (largest probability first), so a row's
 * bits depend only on the row itself when el_op_matmul_row_order is on.
 * Numerics follow the goldens' llama.cpp build (x86, AVX-512, tiled K-quant
 * matmul off): expert products in one-row arithmetic (ggml's mul_mat_id takes
 * vec_dot per row, or the repacked gemv, which edgellm's one-row kernels
 * reproduce), the router and the shared expert's FFN as ordinary products,
 * the shared gate's one-row weight by vec_dot, softmax as ggml_soft_max.
 *
 * After the call the scratch still holds the per-expert row counts
 * (el_moe_expert_offsets): the runtime's expert residency set reads them.
 * gpt-oss's form (router bias, the softmax over the chosen logits, the
 * experts' biases added to their products as ggml_add_id does, the clamped
 * SwiGLU) is the same walk with those steps swapped in.
 *
 * Invariant: no allocation; scratch is el_moe_scratch_bytes(n, ...) bytes.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "backend/cpu/expf_poly.h"
#include "backend/cpu/ops.h"

static size_t a64(size_t x) { return (x + 63) & ~(size_t)63; }

/* The scratch's parts, in order: probabilities, choices, weights, the
 * per-expert lists, the gathered rows, gate and up, the (token, choice) rows,
 * the shared expert's logits. */
typedef struct moe_layout {
    size_t probs, ids, wts, cnt, list, inv, xg, g, u, yk, sh, total;
} moe_layout;

static int layout(int n, int64_t d, int n_expert, int n_used, int64_t ff, moe_layout *L) {
    if (n <= 0 || d <= 0 || n_expert <= 0 || n_used <= 0 || n_used > n_expert || ff <= 0) return -1;
    const double total = (double)n * (n_expert + 2.0 * n_used + d + 2.0 * ff + (double)n_used * d + 1) * 4.0 +
                         (n_expert + 1.0) * 4.0 + (double)n * n_used * 8.0 + 704.0;
    if (total > (double)SIZE_MAX / 2) return -1;
    size_t c = 0;
    const size_t N = (size_t)n, K = (size_t)n_used;
    L->probs = c, c = a64(c + N * (size_t)n_expert * sizeof(float));
    L->ids = c, c = a64(c + N * K * sizeof(int32_t));
    L->wts = c, c = a64(c + N * K * sizeof(float));
    L->cnt = c, c = a64(c + ((size_t)n_expert + 1) * sizeof(int32_t));
    L->list = c, c = a64(c + N * K * sizeof(int32_t));
    L->inv = c, c = a64(c + N * K * sizeof(int32_t));
    L->xg = c, c = a64(c + N * (size_t)d * sizeof(float));
    L->g = c, c = a64(c + N * (size_t)ff * sizeof(float));
    L->u = c, c = a64(c + N * (size_t)ff * sizeof(float));
    L->yk = c, c = a64(c + N * K * (size_t)d * sizeof(float));
    L->sh = c, c = a64(c + N * sizeof(float));
    L->total = c;
    return 0;
}

size_t el_moe_scratch_bytes(int n, int64_t d, int n_expert, int n_used, int64_t ff) {
    moe_layout L;
    return layout(n, d, n_expert, n_used, ff, &L) ? SIZE_MAX : L.total;
}

/* _mm512_reduce_add_ps's tree over 16 lanes: halves, quarters, then pairs. */
static float reduce16(const float *v) {
    float a[8], b[4];
    for (int i = 0; i < 8; i++) a[i] = v[i + 8] + v[i];
    for (int i = 0; i < 4; i++) b[i] = a[i + 4] + a[i];
    return (b[2] + b[0]) + (b[3] + b[1]);
}

/* p = softmax(l) as the goldens' llama.cpp build (x86, AVX-512) computes
 * ggml_soft_max: exp(l - max) by ggml's vector expf in blocks of 16 whose
 * lanes are reduced as _mm512_reduce_add_ps does, the rest by libm's expf,
 * everything summed in double; then each times (float)(1/sum). */
static void softmax_row(const float *l, float *p, int ne) {
    float mx = -INFINITY;
    for (int i = 0; i < ne; i++) mx = l[i] > mx ? l[i] : mx;
    double sum = 0.0;
    int i = 0;
    for (; i + 15 < ne; i += 16) {
        for (int j = 0; j < 16; j++) p[i + j] = el_expf_poly(l[i + j] - mx);
        sum += (double)reduce16(p + i);
    }
    for (; i < ne; i++) {
        p[i] = expf(l[i] - mx);
        sum += (double)p[i];
    }
    const float inv = (float)(1.0 / sum);
    for (i = 0; i < ne; i++) p[i] *= inv;
}

/* The k largest of p (descending; equal values: the lower index first). */
static void top_k(const float *p, int ne, int k, int32_t *ids) {
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int e = 0; e < ne; e++) {
            bool taken = false;
            for (int i = 0; i < j; i++) taken |= ids[i] == e;
            if (taken) continue;
            if (best < 0 || p[e] > p[best]) best = e;
        }
        ids[j] = best;
    }
}

/* gpt-oss's SwiGLU (ggml_swiglu_oai, alpha 1.702, limit 7): g = min(g, 7),
 * u = clamp(u, -7, 7), g = g / (1 + expf(-1.702·g)) · (u + 1), in ggml's order. */
static void swiglu_oai(float *g, const float *u, size_t count) {
    const float alpha = 1.702f, limit = 7.0f;
    for (size_t i = 0; i < count; i++) {
        const float x = g[i] < limit ? g[i] : limit;
        const float y = u[i] < -limit ? -limit : u[i] > limit ? limit : u[i];
        const float glu = x / (1.0f + expf(alpha * (-x)));
        g[i] = glu * (y + 1.0f);
    }
}

static el_mat expert(const el_mat *m, size_t stride, int e) {
    el_mat r = *m;
    r.data = (const uint8_t *)m->data + stride * (size_t)e;
    return r;
}

static int64_t ff_of(const el_moe *moe) {
    const int64_t F = moe->gate.ne1;
    return moe->has_shared && moe->sh_gate.ne1 > F ? moe->sh_gate.ne1 : F;
}

const int32_t *el_moe_expert_offsets(const el_moe *moe, int n, const void *scratch) {
    moe_layout L;
    if (!moe || !scratch || layout(n, moe->router.ne0, moe->n_expert, moe->n_used, ff_of(moe), &L)) return NULL;
    return (const int32_t *)((const uint8_t *)scratch + L.cnt);
}

void el_op_moe(el_pool *pool, const el_moe *moe, const float *x, int n, float *y, void *scratch, void *wscratch) {
    const int64_t d = moe->router.ne0, F = moe->gate.ne1;
    const int NE = moe->n_expert, K = moe->n_used;
    const int64_t ff = ff_of(moe);
    moe_layout L;
    if (layout(n, d, NE, K, ff, &L)) return; /* the caller planned the scratch from the same figures */
    uint8_t *sc = scratch;
    float *probs = (float *)(sc + L.probs), *wts = (float *)(sc + L.wts), *xg = (float *)(sc + L.xg);
    float *g = (float *)(sc + L.g), *u = (float *)(sc + L.u), *yk = (float *)(sc + L.yk), *sh = (float *)(sc + L.sh);
    int32_t *ids = (int32_t *)(sc + L.ids), *cnt = (int32_t *)(sc + L.cnt), *list = (int32_t *)(sc + L.list);
    int32_t *inv = (int32_t *)(sc + L.inv);

    /* router: logits (+ bias) into probs, then softmax, choice and weights row by row */
    el_op_matmul(pool, &moe->router, x, n, probs, moe->router_b, wscratch);
    for (int t = 0; t < n; t++) {
        float *p = probs + (size_t)t * NE;
        if (!moe->softmax_weight) softmax_row(p, p, NE);
        int32_t *id = ids + (size_t)t * K;
        float *w = wts + (size_t)t * K;
        top_k(p, NE, K, id);
        for (int j = 0; j < K; j++) w[j] = p[id[j]];
        if (moe->softmax_weight) softmax_row(w, w, K); /* gpt-oss: the softmax of the chosen logits */
        if (moe->norm_w) {
            double s = 0.0; /* ggml_sum_rows: in double, stored as float */
            for (int j = 0; j < K; j++) s += (double)w[j];
            float sf = (float)s;
            if (sf < 6.103515625e-5f) sf = 6.103515625e-5f;
            for (int j = 0; j < K; j++) w[j] = w[j] / sf;
        }
        if (moe->w_scale != 0.0f && moe->w_scale != 1.0f)
            for (int j = 0; j < K; j++) w[j] *= moe->w_scale;
    }

    /* counting sort of the (token, choice) pairs by expert: expert e's pairs
     * are list[cnt[e] .. cnt[e+1]), tokens ascending */
    memset(cnt, 0, sizeof(int32_t) * (size_t)(NE + 1));
    for (int i = 0; i < n * K; i++) cnt[ids[i] + 1]++;
    for (int e = 0; e < NE; e++) cnt[e + 1] += cnt[e];
    for (int e = 0; e < NE; e++) {
        int at = cnt[e];
        for (int i = 0; i < n * K; i++)
            if (ids[i] == e) inv[i] = at, list[at++] = i;
    }

    /* each chosen expert once: gather its rows, gate/up, SiLU gate, down into yk (in list order).
     * llama.cpp's mul_mat_id computes every row with the one-row dot product (no batched gemm), so
     * the experts' products run in row order: the weights still stream once per block of rows. */
    const bool row_order = el_op_matmul_row_order_on();
    el_op_matmul_row_order(true);
    for (int e = 0; e < NE; e++) {
        const int r0 = cnt[e], nr = cnt[e + 1] - cnt[e];
        if (nr == 0) continue;
        for (int r = 0; r < nr; r++)
            memcpy(xg + (size_t)r * d, x + (size_t)(list[r0 + r] / K) * d, sizeof(float) * (size_t)d);
        const el_mat Wg = expert(&moe->gate, moe->stride_gate, e), Wu = expert(&moe->up, moe->stride_up, e);
        const el_mat Wd = expert(&moe->down, moe->stride_down, e);
        const el_mat *gu[2] = {&Wg, &Wu};
        float *const gu_out[2] = {g, u};
        const float *gu_b[2] = {moe->gate_b ? moe->gate_b + (size_t)e * F : NULL, moe->up_b ? moe->up_b + (size_t)e * F : NULL};
        el_op_matmul_n(pool, 2, gu, xg, nr, gu_out, gu_b, wscratch);
        if (moe->swiglu_oai) swiglu_oai(g, u, (size_t)nr * (size_t)F);
        else el_op_silu_mul(g, u, nr, (int)F);
        el_op_matmul(pool, &Wd, g, nr, yk + (size_t)r0 * d, moe->down_b ? moe->down_b + (size_t)e * d : NULL, wscratch);
    }
    el_op_matmul_row_order(row_order);

    /* y[t] = Σ_j w_j · yk[pair (t, j)], j in choice order (pair i sits at list position inv[i]) */
    for (int t = 0; t < n; t++) {
        float *yt = y + (size_t)t * d;
        for (int j = 0; j < K; j++) {
            const int i = t * K + j;
            const float *src = yk + (size_t)inv[i] * d, wj = wts[i];
            if (j == 0)
                for (int c = 0; c < d; c++) yt[c] = src[c] * wj;
            else
                for (int c = 0; c < d; c++) yt[c] += src[c] * wj;
        }
    }

    if (!moe->has_shared) return;
    /* shared expert on every row, gated by σ(sh_inp · x) = silu(v)/v */
    const int64_t Fs = moe->sh_gate.ne1;
    /* llama.cpp computes this one-row product (src0 [d, 1]) with ggml's vec_dot per token, not the
     * batched tinyBLAS order: row order gives those bits */
    el_op_matmul_row_order(true);
    el_op_matmul(pool, &moe->sh_inp, x, n, sh, NULL, wscratch);
    el_op_matmul_row_order(row_order);
    const el_mat *sgu[2] = {&moe->sh_gate, &moe->sh_up};
    float *const sgu_out[2] = {g, u};
    el_op_matmul_n(pool, 2, sgu, x, n, sgu_out, NULL, wscratch);
    el_op_silu_mul(g, u, n, (int)Fs);
    el_op_matmul(pool, &moe->sh_down, g, n, xg, NULL, wscratch);
    for (int t = 0; t < n; t++) {
        const float v = sh[t];
        const float gate = (v / (1.0f + expf(-v))) / v;
        const float *st = xg + (size_t)t * d;
        float *yt = y + (size_t)t * d;
        for (int c = 0; c < d; c++) yt[c] += st[c] * gate;
    }
}
