/*
 * test_attention.c — the attention kernels and the KV-cache store give the
 * bits of the reference arithmetic at every instruction-set level.
 *
 * The reference below is the straightforward form of the kernel's contract
 * (ops.h, attention.c): one (token, head) pair at a time, Q rounded to F16,
 * the F16 dot in ggml's 16-lane × 4-accumulator order, an online softmax over
 * the visible cache rows in order, the weighted sum of V in an F16 vector
 * (rescaled when the maximum grows), divided by the sum at the end. Every
 * level this CPU has (portable, AVX2, AVX-512) runs the blocked kernel on
 * random Q/K/V — head dims 64/80/128/256 (80: a tail below 64), GQA groups,
 * sliding windows, 1 to 70 query tokens at positions pos0 > 0, 1 to 3
 * threads — and must match the reference bit for bit. The KV store's F32 →
 * F16 conversion is checked the same way, including infinities, NaNs,
 * subnormals and overflow. Batches of 64+ tokens take the tiled kernel and
 * are held to its own reference (ref_tiled), ring caches included; the
 * tiled softmax's expf is checked against libm's. Groups of 5, 6 and 7
 * query heads per KV head exercise the one-row kernel's groups of four
 * heads and their remainders; the AVX-512 kernel's vector expf (its softmax
 * factors) is held to libm expf's bits (check_vexp_libm).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/attention_internal.h"
#include "backend/cpu/attention_tiled_ops.h"
#include "backend/cpu/cpu_features.h"
#include "backend/cpu/ops.h"
#include "testutil.h"
#include "util/fp16.h"

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static uint32_t rnd(void) { return el_test_rnd(&rng); }
static float rndf(void) { return el_test_rndf(&rng); }

static int same_bits(float a, float b) {
    if (isnan(a) && isnan(b)) return 1;
    return memcmp(&a, &b, sizeof a) == 0;
}

static float ref_dot(const el_fp16 *k, const float *qf, int n) {
    const int np = n & ~63;
    double sumf = 0.0;
    if (np > 0) {
        float acc[4][16] = {{0}};
        for (int i = 0; i < np; i += 64)
            for (int j = 0; j < 4; j++)
                for (int l = 0; l < 16; l++)
                    acc[j][l] = fmaf(el_fp16_to_fp32(k[i + j * 16 + l]), qf[i + j * 16 + l], acc[j][l]);
        float v[16], t3[8], t6[4];
        for (int l = 0; l < 16; l++) v[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);
        for (int i = 0; i < 8; i++) t3[i] = v[i + 8] + v[i];
        for (int i = 0; i < 4; i++) t6[i] = t3[i + 4] + t3[i];
        sumf = (double)((t6[0] + t6[2]) + (t6[1] + t6[3]));
    }
    for (int i = np; i < n; i++) sumf += (double)(el_fp16_to_fp32(k[i]) * qf[i]);
    return (float)sumf;
}

/* The cache row of position j (ring caches hold j in row j % ring). */
static size_t ref_row(const el_attn_args *a, int j) { return (size_t)(a->ring > 0 ? j % a->ring : j); }

static void ref_attention(const el_attn_args *a) {
    const int hd = a->head_dim, kv_row = a->n_head_kv * hd, group = a->n_head / a->n_head_kv;
    float qf[512];
    el_fp16 acc[512];
    for (int t = 0; t < a->n; t++)
        for (int h = 0; h < a->n_head; h++) {
            const int p = a->pos0 + t, kvh = h / group;
            const int lo = a->window > 0 && p - a->window + 1 > 0 ? p - a->window + 1 : 0;
            const float *q = a->q + (size_t)t * a->n_head * hd + (size_t)h * hd;
            for (int i = 0; i < hd; i++) qf[i] = el_fp16_to_fp32(el_fp32_to_fp16(q[i]));
            memset(acc, 0, sizeof acc);
            float M = -INFINITY, S = 0.0f;
            for (int j = lo; j <= p; j++) {
                const float s = ref_dot((const el_fp16 *)a->kcache + ref_row(a, j) * kv_row + (size_t)kvh * hd, qf, hd) * a->scale;
                float ms = 1.0f, vs = 1.0f;
                if (s > M) {
                    const float Mold = M;
                    M = s;
                    ms = expf(Mold - M);
                    for (int i = 0; i < hd; i++) acc[i] = el_fp32_to_fp16(el_fp16_to_fp32(acc[i]) * ms);
                } else {
                    vs = expf(s - M);
                }
                const el_fp16 *v = (const el_fp16 *)a->vcache + ref_row(a, j) * kv_row + (size_t)kvh * hd;
                for (int i = 0; i < hd; i++)
                    acc[i] = el_fp32_to_fp16(fmaf(el_fp16_to_fp32(v[i]), vs, el_fp16_to_fp32(acc[i])));
                S = fmaf(S, ms, vs);
            }
            const float inv = S == 0.0f ? 0.0f : 1.0f / S;
            float *o = a->out + (size_t)t * a->n_head * hd + (size_t)h * hd;
            for (int i = 0; i < hd; i++) o[i] = el_fp16_to_fp32(acc[i]) * inv;
        }
}

/*
 * The tiled kernel's contract (attention_tiled_impl.h), for batches of 64+
 * tokens: Q in float, tiles of 64 positions aligned to multiples of 64,
 * scores as fma chains, the tile's softmax with ggml's vector expf and its
 * 16-lane sums in double, V accumulated in float — written out position by
 * position (masked positions included: fma(0, v, acc) leaves acc as is).
 */
static void ref_tiled(const el_attn_args *a) {
    const int hd = a->head_dim, kv_row = a->n_head_kv * hd, group = a->n_head / a->n_head_kv;
    float acc[512];
    for (int t = 0; t < a->n; t++)
        for (int h = 0; h < a->n_head; h++) {
            const int p = a->pos0 + t, kvh = h / group;
            const int lo = a->window > 0 && p - a->window + 1 > 0 ? p - a->window + 1 : 0;
            const float *q = a->q + (size_t)t * a->n_head * hd + (size_t)h * hd;
            memset(acc, 0, sizeof acc);
            float M = -INFINITY, S = 0.0f;
            for (int j0 = lo / 64 * 64; j0 <= p; j0 += 64) {
                float e[64], tmax = -INFINITY;
                for (int k = 0; k < 64; k++) {
                    const int j = j0 + k;
                    e[k] = -INFINITY;
                    if (j < lo || j > p) continue;
                    const el_fp16 *kr = (const el_fp16 *)a->kcache + ref_row(a, j) * kv_row + (size_t)kvh * hd;
                    float d = 0.0f;
                    for (int i = 0; i < hd; i++) d = fmaf(q[i], el_fp16_to_fp32(kr[i]), d);
                    e[k] = d * a->scale;
                    if (e[k] > tmax) tmax = e[k];
                }
                const float Mnew = fmaxf(M, tmax);
                if (Mnew > M) {
                    const float ms = expf(M - Mnew);
                    for (int i = 0; i < hd; i++) acc[i] *= ms;
                    S *= ms;
                }
                M = Mnew;
                double sum = 0.0;
                for (int g = 0; g < 64; g += 16) {
                    for (int i = 0; i < 16; i++) e[g + i] = el_att_vexpf(e[g + i] - M);
                    sum += (double)el_att_reduce16(e + g);
                }
                S = (float)((double)S + sum);
                for (int k = 0; k < 64; k++) {
                    const int j = j0 + k;
                    if (j < lo || j > p) continue; /* rows outside a ring's span may hold other positions */
                    const el_fp16 *v = (const el_fp16 *)a->vcache + ref_row(a, j) * kv_row + (size_t)kvh * hd;
                    for (int i = 0; i < hd; i++) acc[i] = fmaf(e[k], el_fp16_to_fp32(v[i]), acc[i]);
                }
            }
            const float inv = S == 0.0f ? 0.0f : 1.0f / S;
            float *o = a->out + (size_t)t * a->n_head * hd + (size_t)h * hd;
            for (int i = 0; i < hd; i++) o[i] = acc[i] * inv;
        }
}

typedef struct { int hd, n_head, n_head_kv, window, n, pos0; float qscale; int ring; } cfg;

static el_pool *pools[4];
static int n_cases, n_values;

static void run_case(const cfg *c) {
    const int hd = c->hd, kv_row = c->n_head_kv * hd, q_row = c->n_head * hd;
    const int n_ctx = c->pos0 + c->n;
    float *q = malloc(sizeof(float) * (size_t)c->n * q_row);
    float *kv = calloc(1, sizeof(float) * (size_t)n_ctx * kv_row);
    el_fp16 *kc = malloc(sizeof(el_fp16) * (size_t)n_ctx * kv_row);
    el_fp16 *vc = malloc(sizeof(el_fp16) * (size_t)n_ctx * kv_row);
    float *ref = malloc(sizeof(float) * (size_t)c->n * q_row);
    float *out = malloc(sizeof(float) * (size_t)c->n * q_row);
    for (int i = 0; i < c->n * q_row; i++) q[i] = rndf() * c->qscale;
    /* the cache as the model fills it: through el_op_kv_store */
    for (int i = 0; i < n_ctx * kv_row; i++) kv[i] = rndf() * 2.0f;
    el_op_kv_store_at(kc, kv, n_ctx, 0, kv_row, EL_CPU_PORTABLE);
    for (int i = 0; i < n_ctx * kv_row; i++) kv[i] = rndf() * (i % 31 == 0 ? 30.0f : 1.0f);
    el_op_kv_store_at(vc, kv, n_ctx, 0, kv_row, EL_CPU_PORTABLE);
    if (c->ring > 0) /* a ring cache as the runtime leaves it: position j in row j % ring, later ones last */
        for (int j = c->ring; j < n_ctx; j++) {
            memcpy(kc + (size_t)(j % c->ring) * kv_row, kc + (size_t)j * kv_row, sizeof(el_fp16) * (size_t)kv_row);
            memcpy(vc + (size_t)(j % c->ring) * kv_row, vc + (size_t)j * kv_row, sizeof(el_fp16) * (size_t)kv_row);
        }
    el_attn_args a = {.q = q, .out = ref, .kcache = kc, .vcache = vc, .n = c->n, .pos0 = c->pos0,
                      .n_head = c->n_head, .n_head_kv = c->n_head_kv, .head_dim = hd, .window = c->window,
                      .ring = c->ring, .scale = 1.0f / sqrtf((float)hd)};
    if (c->n >= EL_ATT_TILE_Q) ref_tiled(&a);
    else ref_attention(&a);
    a.out = out;
    el_cpu_level prev = (el_cpu_level)-1;
    for (int lv = EL_CPU_PORTABLE; lv <= EL_CPU_AVX512; lv++) {
        for (int th = 1; th <= 3; th++) {
            for (int i = 0; i < c->n * q_row; i++) out[i] = -777.0f;
            const el_cpu_level got = el_op_attention_at(pools[th], &a, (el_cpu_level)lv);
            if (got == prev && th == 1) break; /* level not on this CPU: already run */
            if (th == 1) prev = got;
            int bad = 0;
            for (int i = 0; i < c->n * q_row && !bad; i++) {
                n_values++;
                if (!same_bits(out[i], ref[i])) {
                    CHECKF(0, "%s threads=%d hd=%d heads=%d/%d window=%d n=%d pos0=%d: out[t=%d][%d] %.9g vs reference %.9g",
                           el_cpu_level_name(got), th, hd, c->n_head, c->n_head_kv, c->window, c->n, c->pos0,
                           i / q_row, i % q_row, out[i], ref[i]);
                    bad = 1;
                }
            }
            if (!bad) CHECK(1);
        }
    }
    n_cases++;
    free(q);
    free(kv);
    free(kc);
    free(vc);
    free(ref);
    free(out);
}

static void check_kv_store(void) {
    const int n = 2051; /* not a multiple of any vector width */
    float *x = malloc(sizeof(float) * n);
    el_fp16 *want = malloc(sizeof(el_fp16) * (n + 8)), *got = malloc(sizeof(el_fp16) * (n + 8));
    static const float special[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 65504.0f, 65519.0f, 65520.0f,
                                    -65520.0f, 1e9f, 6.1e-5f, 5.96e-8f, 2.98e-8f, 2.99e-8f, 1e-10f, -3e-6f, 1.0f / 3.0f};
    for (int i = 0; i < n; i++) {
        const int kind = i % 7;
        if (kind == 0) x[i] = special[(i / 7) % (sizeof special / sizeof special[0])];
        else if (kind == 1) x[i] = el_bits_to_f32(rnd() << 16 | rnd()); /* any bit pattern */
        else x[i] = rndf() * powf(2.0f, (float)((int)(rnd() % 40) - 28));
    }
    for (int i = 0; i < n; i++) want[i] = el_fp32_to_fp16(x[i]);
    for (int lv = EL_CPU_PORTABLE; lv <= EL_CPU_AVX512; lv++) {
        /* rows of 293 at position 2: 7 rows, the cache offset by 2 rows */
        memset(got, 0xAB, sizeof(el_fp16) * (n + 8));
        const el_cpu_level used = el_op_kv_store_at(got - 0, x, 7, 0, 293, (el_cpu_level)lv);
        CHECKF(memcmp(got, want, sizeof(el_fp16) * 7 * 293) == 0, "kv_store %s: F16 bits differ", el_cpu_level_name(used));
        for (int i = 0; i < 7 * 293; i++)
            if (got[i] != want[i]) {
                fprintf(stderr, "  x=%a (0x%08x): got 0x%04x want 0x%04x\n", x[i], el_f32_to_bits(x[i]), got[i], want[i]);
                break;
            }
        memset(got, 0xAB, sizeof(el_fp16) * (n + 8));
        el_op_kv_store_at(got, x + 586, 5, 2, 293, (el_cpu_level)lv);
        CHECKF(memcmp(got + 586, want + 586, sizeof(el_fp16) * 5 * 293) == 0 && got[585] == 0xABAB &&
                   got[586 + 5 * 293] == 0xABAB,
               "kv_store %s at pos0=2: wrong bits or wrote outside its rows", el_cpu_level_name(used));
    }
    free(x);
    free(want);
    free(got);
}

/* ggml's vector expf (el_att_vexpf) is an approximation of exp: within a
 * few ulp of libm's over the softmax's range, exact at the ends. */
static void check_vexpf(void) {
    CHECK(el_att_vexpf(0.0f) == 1.0f);
    CHECK(el_att_vexpf(-INFINITY) == 0.0f);
    CHECK(el_att_vexpf(-1000.0f) == 0.0f);
    CHECK(isinf(el_att_vexpf(1000.0f)));
    CHECK(isnan(el_att_vexpf(NAN)));
    float worst = 0.0f;
    for (int i = 0; i <= 200000; i++) {
        const float x = -87.0f * (float)i / 200000.0f; /* results stay normal */
        const float got = el_att_vexpf(x), want = expf(x);
        const float ulp = nextafterf(want, INFINITY) - want;
        const float err = fabsf(got - want) / ulp;
        if (err > worst) worst = err;
    }
    CHECKF(worst <= 3.0f, "vexpf differs from expf by %.2f ulp", worst);
    /* subnormal results: one rounding of the exact j * 2^n, monotone to 0 */
    float prev = el_att_vexpf(-87.0f);
    for (float x = -87.0f; x > -104.0f; x -= 0.01f) {
        const float got = el_att_vexpf(x);
        CHECKF(got <= prev && got >= 0.0f, "vexpf not monotone at %g", x);
        prev = got;
    }
    printf("vexpf: max %.2f ulp from libm expf on [-87, 0]\n", worst);
}

/*
 * The AVX-512 one-row kernel takes its softmax factors 16 at a time from
 * el_attn_vexp_avx512, which must give libm expf's bits. On glibc it must
 * have passed its own check (glibc's expf is the function it follows), and
 * it is compared with expf on every 97th float of [-88, 0] (the factors'
 * arguments are never positive), on every float of [-104, -88] (the
 * underflow), and on infinities and NaN; EL_TEST_EXHAUSTIVE=1 compares
 * every float in [-104, 0].
 */
static void check_vexp_libm(void) {
#if defined(__x86_64__)
    const el_cpu_features *f = el_cpu_features_get();
    if (!(f->avx2 && f->fma && f->f16c && f->avx512f && f->avx512bw && f->avx512vl && f->avx512dq)) {
        printf("vexp: no AVX-512 on this CPU, not checked\n");
        return;
    }
    enum { B = 4096 };
    static float x[B], y[B];
    const int ok = el_attn_vexp_avx512(x, y, 0);
#if defined(__GLIBC__)
    CHECKF(ok, "the AVX-512 expf failed its check against glibc's expf");
#endif
    if (!ok) {
        printf("vexp: this libm's expf is not the one the AVX-512 form follows: the kernel calls expf\n");
        return;
    }
    const int full = getenv("EL_TEST_EXHAUSTIVE") != NULL;
    const uint32_t lo = 0x80000000u, hi = 0xC2D00000u; /* -0.0 .. -104.0 */
    long n = 0, bad = 0;
    uint32_t u = lo;
    const uint32_t step = full ? 1 : 97;
    for (;;) {
        int m = 0;
        for (; m < B && u <= hi; m++) {
            x[m] = el_bits_to_f32(u);
            u += u >= 0xC2B00000u ? 1 : step; /* every float from -88 on: the underflow */
        }
        if (m == 0) break;
        el_attn_vexp_avx512(x, y, m);
        for (int i = 0; i < m; i++) {
            const float want = expf(x[i]);
            if (memcmp(&want, &y[i], sizeof want) != 0 && bad++ < 5)
                fprintf(stderr, "  vexp(%a) = %a, expf = %a\n", x[i], y[i], want);
        }
        n += m;
    }
    static const float special[] = {-INFINITY, INFINITY, NAN, -NAN, 88.0f, 89.0f, -200.0f, 0.5f, -0.0f, 0.0f, -1e-30f};
    const int ns = (int)(sizeof special / sizeof special[0]);
    el_attn_vexp_avx512(special, y, ns);
    for (int i = 0; i < ns; i++) {
        const float want = expf(special[i]);
        if (!same_bits(want, y[i]) && bad++ < 5) fprintf(stderr, "  vexp(%a) = %a, expf = %a\n", special[i], y[i], want);
    }
    CHECKF(bad == 0, "vexp differs from libm expf on %ld of %ld floats", bad, n + ns);
    printf("vexp: libm expf's bits on %ld floats in [-104, 0]%s\n", n, full ? " (all)" : "");
#endif
}

int main(void) {
    for (int th = 1; th <= 3; th++) {
        pools[th] = el_pool_new(th);
        CHECK(pools[th] != NULL);
        if (!pools[th]) return el_test_finish("test_attention");
    }
    printf("kernel levels on this CPU: up to %s\n", el_cpu_level_name(el_cpu_kernels_level()));
    check_kv_store();
    check_vexpf();
    check_vexp_libm();

    /* fixed cases: decode and prefill of the shapes the models use */
    static const cfg fixed[] = {
        {64, 32, 4, 0, 1, 37, 1.0f, 0},    /* TinyLlama decode */
        {64, 32, 4, 0, 70, 5, 1.0f, 0},    /* TinyLlama prefill */
        {256, 4, 1, 0, 1, 50, 1.0f, 0},    /* Gemma 3 270M decode (global layer) */
        {256, 4, 1, 16, 70, 9, 1.0f, 0},   /* Gemma 3 270M sliding layer, prefill past the window */
        {256, 4, 1, 16, 1, 60, 1.0f, 0},   /* sliding decode */
        {128, 16, 8, 0, 33, 100, 8.0f, 0}, /* peaked scores: the maximum moves a lot */
        {64, 4, 4, 0, 1, 0, 1.0f, 0},      /* first token */
        {80, 6, 2, 7, 21, 3, 4.0f, 0},     /* head dim with a tail */
        {72, 4, 2, 0, 19, 11, 2.0f, 0},    /* a tail below the vector width of AVX-512 */
        {32, 8, 8, 3, 9, 30, 1.0f, 0},     /* head dim below 64: the dot is all tail */
        {128, 12, 2, 0, 1, 140, 2.0f, 0},  /* 6 heads per KV head: a group of 4 and one of 2 */
        {256, 7, 1, 0, 2, 90, 1.0f, 0},    /* 7 heads on one KV head: 4 + 3 */
        {64, 5, 1, 0, 1, 200, 8.0f, 0},    /* 5 heads: 4 + 1, peaked (under 256 cells: not split) */
        {256, 4, 1, 0, 1, 16, 1.0f, 0},    /* 17 positions: one block of 16 and one row */
        /* 64+ tokens: the tiled kernel */
        {64, 32, 4, 0, 64, 0, 1.0f, 0},      /* exactly one tile of queries from position 0 */
        {64, 32, 4, 0, 130, 77, 1.0f, 0},    /* TinyLlama prefill, tiles not aligned to the batch */
        {256, 4, 1, 512, 96, 600, 1.0f, 0},  /* Gemma 3 sliding layer past its window */
        {256, 4, 1, 0, 65, 3, 8.0f, 0},      /* Gemma global layer, peaked scores */
        {128, 16, 8, 50, 70, 200, 10.0f, 123}, /* ring cache (50 + 70 + 3 rows), wrapping mid-tile */
        {64, 8, 2, 17, 80, 40, 1.0f, 97},      /* ring, window below a tile */
        {80, 6, 2, 0, 66, 1, 4.0f, 0},       /* head dim with a tail */
        {32, 8, 8, 3, 64, 30, 1.0f, 0},      /* head dim below the vector width */
    };
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) run_case(&fixed[i]);

    /* random cases */
    static const int hds[] = {64, 128, 256, 80};
    static const int gqa[][2] = {{4, 4}, {8, 2}, {4, 1}, {12, 4}, {2, 1}};
    static const int windows[] = {0, 0, 1, 5, 17, 64};
    for (int it = 0; it < 40; it++) {
        cfg c;
        c.hd = hds[rnd() % 4];
        const int g = (int)(rnd() % 5);
        c.n_head = gqa[g][0];
        c.n_head_kv = gqa[g][1];
        c.window = windows[rnd() % 6];
        c.n = 1 + (int)(rnd() % 70);
        c.pos0 = (int)(rnd() % 3) == 0 ? 0 : 1 + (int)(rnd() % 90);
        c.qscale = (rnd() % 3) == 0 ? 10.0f : 1.0f;
        c.ring = 0;
        if (c.hd == 256 && c.n > 40) c.n = 40; /* keep the reference quick under the sanitizers */
        run_case(&c);
    }
    printf("%d attention cases, %d values compared\n", n_cases, n_values);
    for (int th = 1; th <= 3; th++) el_pool_free(pools[th]);
    return el_test_finish("test_attention");
}
