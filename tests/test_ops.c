/*
 * test_ops.c — the element-wise operators give the bits of their reference
 * scalar arithmetic at every instruction-set level.
 *
 * The references below are the plain scalar forms of ops.c's contracts
 * (RMS norm with the sequential double sum, RoPE with its two fused
 * products, SiLU with ggml's polynomial exp over groups of 16 and libm's
 * expf for the rest, GELU through F16 roundings, add). For each level this
 * CPU has, the kernel set el_ops_kernels_for gives is run on random rows
 * with awkward lengths and special values (±0, large and tiny magnitudes,
 * infinities) and compared bit for bit; the public operators (the process
 * level) are compared too, and GELU over all 65536 F16 inputs.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/expf_poly.h"
#include "backend/cpu/ops.h"
#include "backend/cpu/ops_internal.h"
#include "testutil.h"
#include "util/fp16.h"

static uint64_t rng = 0x853C49E6748FEA9Bull;
static uint32_t rnd(void) { return el_test_rnd(&rng); }
static float rndf(void) { return el_test_rndf(&rng); }

static int same(const float *a, const float *b, int n, int *at) {
    for (int i = 0; i < n; i++) {
        if (isnan(a[i]) && isnan(b[i])) continue;
        if (memcmp(&a[i], &b[i], sizeof(float)) != 0) {
            *at = i;
            return 0;
        }
    }
    return 1;
}

/* ---- references ---- */

static float ref_exp(float x) {
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

static void ref_silu_mul(float *g, const float *u, int n_rows, int d) {
    const int dv = d & ~15;
    for (int r = 0; r < n_rows; r++)
        for (int i = 0; i < d; i++) {
            float *x = &g[(size_t)r * d + i];
            const float e = i < dv ? ref_exp(0.0f - *x) : expf(-*x);
            *x = (*x / (1.0f + e)) * u[(size_t)r * d + i];
        }
}

static void ref_rope_rotate(float *x, int n_heads, int head_dim, int n_rot, int neox, const float *cs) {
    for (int h = 0; h < n_heads; h++) {
        float *v = x + (size_t)h * head_dim;
        for (int i = 0; i < n_rot / 2; i++) {
            const int ia = neox ? i : 2 * i, ib = neox ? i + n_rot / 2 : 2 * i + 1;
            const float c = cs[2 * i], s = cs[2 * i + 1], a = v[ia], b = v[ib];
            v[ia] = fmaf(a, c, -(b * s));
            v[ib] = fmaf(a, s, b * c);
        }
    }
}

static float ref_gelu(float x) {
    if (x <= -10.0f) return 0.0f;
    if (x >= 10.0f) return x;
    const float h = el_fp16_to_fp32(el_fp32_to_fp16(x));
    const float g = 0.5f * h * (1.0f + tanhf(0.79788456080286535587989211986876f * h * fmaf(0.044715f * h, h, 1.0f)));
    return el_fp16_to_fp32(el_fp32_to_fp16(g));
}

static void ref_rmsnorm(const float *x, const float *w, float *out, int n_rows, int d, float eps) {
    for (int r = 0; r < n_rows; r++) {
        const float *xr = x + (size_t)r * d;
        double sum = 0.0;
        for (int i = 0; i < d; i++) sum += (double)(xr[i] * xr[i]);
        const float scale = 1.0f / sqrtf((float)(sum / d) + eps);
        for (int i = 0; i < d; i++) out[(size_t)r * d + i] = w ? (xr[i] * scale) * w[i] : xr[i] * scale;
    }
}

/* ---- data ---- */

static float special(void) {
    static const float sp[] = {0.0f, -0.0f, 1e-40f, -1e-40f, 88.0f, -88.0f, 89.5f, -103.0f, 120.0f, -150.0f,
                               200.0f, -200.0f, 1e30f, -1e30f, INFINITY, -INFINITY, 9.99f, -9.99f, 10.0f, -10.0f};
    return sp[rnd() % (sizeof sp / sizeof sp[0])];
}

static void fill(float *x, int n, float mag) {
    for (int i = 0; i < n; i++) x[i] = (rnd() % 23 == 0) ? special() : rndf() * mag;
}

#define MAXN 4096

/* el_op_log_norm's contract, written out: san, lane i % 16, lanes in order */
static float lsan(float x) { return x == x ? (x < 3.40282347e38f ? x : 3.40282347e38f) : -INFINITY; }
static void ref_log_norm(const float *x, int n, float *mx, double *sum) {
    float m[16];
    double acc[16] = {0};
    for (int i = 0; i < 16; i++) m[i] = -INFINITY;
    for (int i = 0; i < n; i++) m[i % 16] = lsan(x[i]) > m[i % 16] ? lsan(x[i]) : m[i % 16];
    *mx = m[0];
    for (int i = 1; i < 16; i++) *mx = m[i] > *mx ? m[i] : *mx;
    *sum = 0.0;
    if (*mx == -INFINITY) return;
    for (int i = 0; i < n; i++) acc[i % 16] += (double)el_expf_poly(lsan(x[i]) - *mx);
    for (int i = 0; i < 16; i++) *sum += acc[i];
}
/* one level's kernels driven as el_op_log_norm drives them */
static void kernel_log_norm(const el_ops_kernels *k, const float *x, int n, float *mx, double *sum) {
    const int nv = n & ~15;
    float tail[16], m[16];
    double acc[16] = {0};
    for (int i = 0; i < 16; i++) tail[i] = nv + i < n ? x[nv + i] : -INFINITY, m[i] = -INFINITY;
    k->lnorm_max(x, nv, m);
    k->lnorm_max(tail, 16, m);
    *mx = m[0];
    for (int i = 1; i < 16; i++) *mx = m[i] > *mx ? m[i] : *mx;
    *sum = 0.0;
    if (*mx == -INFINITY) return;
    k->lnorm_sum(x, nv, *mx, acc);
    k->lnorm_sum(tail, 16, *mx, acc);
    for (int i = 0; i < 16; i++) *sum += acc[i];
}

int main(void) {
    static float a[MAXN], b[MAXN], w[MAXN], r1[MAXN], r2[MAXN], cs[512];
    int at = 0;
    printf("process level: %s\n", el_cpu_level_name(el_cpu_kernels_level()));
    static const int lens[] = {1, 7, 15, 16, 17, 31, 64, 100, 640, 2048, 2050};
    for (int lv = EL_CPU_PORTABLE; lv <= EL_CPU_AVX512; lv++) {
        el_cpu_level used;
        const el_ops_kernels k = el_ops_kernels_for((el_cpu_level)lv, &used);
        if ((int)used != lv) {
            printf("  %s: not on this CPU\n", el_cpu_level_name((el_cpu_level)lv));
            continue;
        }
        const char *ln = el_cpu_level_name(used);
        int n_vals = 0;
        for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
            const int d = lens[li];
            for (int rep = 0; rep < 4; rep++) {
                const float mag = rep == 0 ? 1.0f : rep == 1 ? 8.0f : rep == 2 ? 60.0f : 0.01f;
                const int rows = d <= 1024 ? 2 : 1;
                /* silu_mul */
                fill(a, rows * d, mag);
                fill(b, rows * d, 1.0f);
                memcpy(r1, a, sizeof(float) * rows * d);
                memcpy(r2, a, sizeof(float) * rows * d);
                ref_silu_mul(r1, b, rows, d);
                k.silu_mul(r2, b, rows, d);
                CHECKF(same(r1, r2, rows * d, &at), "%s silu_mul d=%d: x=%a: %a vs %a", ln, d, a[at], r2[at], r1[at]);
                /* add */
                fill(a, d, mag);
                fill(b, d, mag);
                memcpy(r1, a, sizeof(float) * d);
                memcpy(r2, a, sizeof(float) * d);
                for (int i = 0; i < d; i++) r1[i] += b[i];
                k.add(r2, b, d);
                CHECKF(same(r1, r2, d, &at), "%s add d=%d at %d", ln, d, at);
                /* scale_mul, with and without weights, in place too */
                fill(w, d, 2.0f);
                const float sc = 1.0f / sqrtf(fabsf(rndf()) + 1e-3f);
                for (int i = 0; i < d; i++) r1[i] = (a[i] * sc) * w[i];
                k.scale_mul(a, w, r2, d, sc);
                CHECKF(same(r1, r2, d, &at), "%s scale_mul d=%d at %d", ln, d, at);
                for (int i = 0; i < d; i++) r1[i] = a[i] * sc;
                memcpy(r2, a, sizeof(float) * d);
                k.scale_mul(r2, NULL, r2, d, sc);
                CHECKF(same(r1, r2, d, &at), "%s scale_mul (no w, in place) d=%d at %d", ln, d, at);
                n_vals += 5 * d;
            }
        }
        /* rope: head dims with n_rot <= head_dim, both modes */
        static const int rope_shapes[][2] = {{64, 64}, {128, 128}, {256, 256}, {80, 80}, {128, 64}, {96, 32}, {72, 40}};
        for (size_t si = 0; si < sizeof rope_shapes / sizeof rope_shapes[0]; si++)
            for (int neox = 0; neox <= 1; neox++) {
                const int hd = rope_shapes[si][0], n_rot = rope_shapes[si][1], nh = 5;
                for (int i = 0; i < n_rot; i++) cs[i] = rndf();
                fill(a, nh * hd, 4.0f);
                /* a pair of +0 whose a·c is -0 and b·s +0: -(b·s) must be a negation, not 0 - b·s */
                a[0] = a[1] = a[n_rot / 2] = 0.0f;
                cs[0] = -0.5f;
                cs[1] = 0.5f;
                memcpy(r1, a, sizeof(float) * nh * hd);
                memcpy(r2, a, sizeof(float) * nh * hd);
                ref_rope_rotate(r1, nh, hd, n_rot, neox, cs);
                k.rope_rotate(r2, nh, hd, n_rot, neox, cs);
                CHECKF(same(r1, r2, nh * hd, &at), "%s rope hd=%d n_rot=%d neox=%d at %d: %a vs %a", ln, hd, n_rot, neox,
                       at, r2[at], r1[at]);
                n_vals += nh * hd;
            }
        /* log_norm: lane maxima and lane sums of el_expf_poly(san(x) - mx), tail padded with -inf */
        for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
            const int d = lens[li];
            for (int rep = 0; rep < 4; rep++) {
                fill(a, d, rep == 0 ? 1.0f : rep == 1 ? 30.0f : rep == 2 ? 100.0f : 1e-3f);
                if (rep == 3 && d > 3) a[d / 2] = NAN, a[1] = INFINITY;
                float mr, mk;
                double sr, sk;
                ref_log_norm(a, d, &mr, &sr);
                kernel_log_norm(&k, a, d, &mk, &sk);
                CHECKF(memcmp(&mr, &mk, sizeof mr) == 0 && memcmp(&sr, &sk, sizeof sr) == 0,
                       "%s log_norm d=%d rep=%d: max %a sum %a vs %a %a", ln, d, rep, mk, sk, mr, sr);
                n_vals += d;
            }
        }
        printf("  %s: %d values match the references\n", ln, n_vals);
    }

    /* el_op_log_norm at the process level: its bits, and within 1e-6 of the sum in double with libm */
    {
        static float big[262144 + 5];
        const int n = 262144 + 5;
        for (int i = 0; i < n; i++) big[i] = rndf() * 20.0f;
        float mr, mk;
        double sr, sk, sd = 0.0;
        ref_log_norm(big, n, &mr, &sr);
        el_op_log_norm(big, n, &mk, &sk);
        CHECKF(memcmp(&mr, &mk, sizeof mr) == 0 && memcmp(&sr, &sk, sizeof sr) == 0, "el_op_log_norm: %a %a vs %a %a", mk,
               sk, mr, sr);
        for (int i = 0; i < n; i++) sd += exp((double)big[i] - (double)mk);
        CHECKF(fabs(log(sk) - log(sd)) < 1e-6, "el_op_log_norm: log sum %.9g vs %.9g in double", log(sk), log(sd));
        const float allninf[3] = {-INFINITY, NAN, -INFINITY};
        el_op_log_norm(allninf, 3, &mk, &sk);
        CHECK(mk == -INFINITY && sk == 0.0);
    }

    /* the public operators at the process level */
    for (int rep = 0; rep < 6; rep++) {
        const int d = rep < 3 ? 2048 : 576 + rep;
        fill(a, 2 * d, rep % 2 ? 30.0f : 1.0f);
        fill(w, d, 1.0f);
        ref_rmsnorm(a, rep & 1 ? w : NULL, r1, 2, d, 1e-6f);
        el_op_rmsnorm(a, rep & 1 ? w : NULL, r2, 2, d, 1e-6f);
        CHECKF(same(r1, r2, 2 * d, &at), "el_op_rmsnorm d=%d at %d", d, at);
        ref_rmsnorm(a, w, r1, 2, d, 1e-6f);
        el_op_rmsnorm(a, w, a, 2, d, 1e-6f); /* in place */
        CHECKF(same(r1, a, 2 * d, &at), "el_op_rmsnorm in place d=%d at %d", d, at);
    }
    {
        el_rope rp = {.mode = EL_ROPE_NEOX, .n_rot = 64, .freq_base = 10000.0f, .freq_scale = 1.0f, .freq_factors = NULL};
        for (int mode = 0; mode < 2; mode++) {
            rp.mode = mode ? EL_ROPE_NEOX : EL_ROPE_NORM;
            const int pos = 37 + mode * 1000;
            fill(a, 4 * 64, 3.0f);
            memcpy(r1, a, sizeof(float) * 4 * 64);
            el_op_rope(a, 4, 64, pos, &rp, cs);
            float cs2[64];
            float theta = (float)pos;
            const float ts = powf(10000.0f, -2.0f / 64.0f);
            for (int i0 = 0; i0 < 64; i0 += 2) {
                cs2[i0] = cosf(1.0f * (theta / 1.0f));
                cs2[i0 + 1] = sinf(1.0f * (theta / 1.0f));
                theta *= ts;
            }
            ref_rope_rotate(r1, 4, 64, 64, mode, cs2);
            CHECKF(same(r1, a, 4 * 64, &at), "el_op_rope mode %d at %d", mode, at);
        }
    }
    /* GELU: every F16 value (and its neighbours in float), then random floats */
    int gelu_bad = 0;
    for (uint32_t h = 0; h < 65536 && !gelu_bad; h++) {
        const float x = el_fp16_to_fp32((el_fp16)h);
        float xs[3] = {x, nextafterf(x, INFINITY), nextafterf(x, -INFINITY)}, us[3] = {1.0f, -0.5f, 3.0f}, g[3];
        memcpy(g, xs, sizeof g);
        el_op_gelu_mul(g, us, 3);
        for (int i = 0; i < 3; i++) {
            const float want = ref_gelu(xs[i]) * us[i];
            if (!same(&want, &g[i], 1, &at)) {
                CHECKF(0, "el_op_gelu_mul x=%a: %a vs %a", xs[i], g[i], want);
                gelu_bad = 1;
            }
        }
    }
    CHECK(!gelu_bad);
    fill(a, MAXN, 6.0f);
    fill(b, MAXN, 1.0f);
    for (int i = 0; i < MAXN; i++) r1[i] = ref_gelu(a[i]) * b[i];
    el_op_gelu_mul(a, b, MAXN);
    CHECKF(same(r1, a, MAXN, &at), "el_op_gelu_mul at %d", at);
    /* the public SiLU and add */
    fill(a, 3 * 100, 10.0f);
    fill(b, 3 * 100, 1.0f);
    memcpy(r1, a, sizeof(float) * 300);
    ref_silu_mul(r1, b, 3, 100);
    el_op_silu_mul(a, b, 3, 100);
    CHECKF(same(r1, a, 300, &at), "el_op_silu_mul at %d", at);
    return el_test_finish("test_ops");
}
