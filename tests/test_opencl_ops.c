/*
 * test_opencl_ops.c — the OpenCL backend (src/backend/opencl/) through its
 * el_backend vtable, against the CPU kernels and a float reference.
 *
 * Every op runs on el_tensor operands made by hand (host buffer + a device
 * buffer from buf_alloc; write, run, sync, read), at byte offsets != 0, and
 * is compared with the CPU operator of backend/cpu/ops.h called directly,
 * in ULPs: the kernels compute the CPU backend's arithmetic, so on a device
 * with fp64 (PoCL here) every op must give the CPU's bits — 0 ULP — except
 * where the CPU calls libm's expf (attention's softmax; SiLU past a row's
 * last group of 16), where the kernels' correctly rounded exp may differ
 * from glibc's in the last bit (asserted: SiLU <= 1 ULP and 0 on the vector
 * part, attention <= 16 ULP); the worst ULP per op is printed at the end.
 * Looser bounds hold on a device without fp64:
 *   - matmul, weights F32 F16 Q8_0 Q4_0 Q5_0 Q4_K Q6_K made by the project's
 *     quantizer, n = 1, 7, 8, 9, 64, row lengths 256/512 (and 640 for the
 *     32-element types), 1..3 products, with and without bias, and with the
 *     CPU's row order on (each row as a one-row product):
 *     |ocl - ref| <= 2e-5 (F32) / 5e-4 (F16) / 1e-2 (Q8 activations) *
 *     sum_k |x_k w_k| per output, where ref is the double-precision product
 *     of x with the weights dequantised by the type's to_float; and
 *     |ocl - cpu| <= 2e-6 * max|y|;
 *   - rmsnorm (with/without weight, in place): rel. 1e-5 of max |out|;
 *   - rope NORM/NEOX, head_dim 64/128/256, n_rot < head_dim, freq_scale,
 *     freq_factors, pos0 up to 4000: abs 2e-5 * max|x|;
 *   - scale, add (exact), silu_mul (rel. 1e-5; rows with and without a
 *     tail past the groups of 16), gelu_mul (rel. 2e-3), copy incl.
 *     overlapping ranges of one buffer (exact, memmove);
 *   - kv_store flat and ring with a wrap: bit-identical F16 rows;
 *   - attention over F16 caches, head_dim 64/80/128/256, GQA, n = 1, 3, 7
 *     (the CPU's one-row kernel) and 64, 65, 70, 80 (its tiled kernel),
 *     window + ring: |ocl - cpu| <= 1e-6 (fp64) / 4e-3 * max|V|, where cpu
 *     is the CPU on one thread: on several threads the CPU splits a
 *     one-token step over 512+ cells across the cache (attention.c, as
 *     llama.cpp does), which the OpenCL kernel does not; against that split
 *     result |ocl - cpu| <= 4e-3 * max|V| (the split's own rounding).
 * And the machinery: the program-binary cache (second construction loads
 * the binary; a truncated or corrupt file is rebuilt), a bad
 * EL_OPENCL_BUILD_OPTIONS (NULL + clear message), allocations beyond
 * CL_DEVICE_MAX_MEM_ALLOC_SIZE (clean EL_ERR_NOMEM), no device 99, no
 * platform at all (a child run with OCL_ICD_VENDORS naming an empty folder), supports()
 * refusals, run() on missing operands/constants, measure(), and the decode
 * matmul speed on Gemma 3 270M shapes next to the CPU kernels (printed).
 * Skips (77) where no OpenCL device exists. EL_OPENCL_TEST_ONLY=speed runs
 * only the speed section (for tuning the kernels).
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backend/backend.h"
#include "backend/cpu/ops.h"
#include "backend/cpu/threadpool.h"
#include "backend/opencl/bincache.h"
#include "backend/opencl/opencl.h"
#include "package/quantize.h"
#include "package/types.h"
#include "testutil.h"
#include "util/fp16.h"

#if defined(__SANITIZE_ADDRESS__)
#define EL_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EL_ASAN 1
#endif
#endif
#ifndef EL_ASAN
#define EL_ASAN 0
#endif

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) { return el_test_rnd(&rng); }
static float rndf(void) { return el_test_rndf(&rng); }

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* CPU time of the whole process (every thread, PoCL's included): a steadier
 * comparison than wall time on a machine other jobs load. */
static double cpu_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static el_backend *g_be;
static el_pool *g_pool, *g_pool1; /* 2 threads; 1 thread (attention's unsplit reference) */

/* Host memory uploaded as a constant stays allocated until the backends are
 * freed: the registry is keyed by address, and a freed block's address could
 * come back from malloc holding other bytes (a model's weights live as long
 * as the backend does). */
static void *g_keep[4096];
static int g_nkeep;
static void keep(void *p) {
    if (!p) return;
    if (g_nkeep == (int)(sizeof g_keep / sizeof g_keep[0])) {
        fprintf(stderr, "keep list full\n");
        exit(1);
    }
    g_keep[g_nkeep++] = p;
}

/* ---- tensors made by hand ---------------------------------------------------- */

static el_tensor *tensor(size_t bytes) {
    el_tensor *t = calloc(1, sizeof *t);
    t->name = "t";
    t->layer = -1;
    t->home = -1;
    t->bytes = bytes;
    t->host = calloc(1, bytes);
    el_error err = {0};
    t->dev[g_be->index] = g_be->i->buf_alloc(g_be, bytes, &err);
    if (!t->dev[g_be->index]) {
        fprintf(stderr, "buf_alloc(%zu): %s\n", bytes, err.msg);
        exit(1);
    }
    return t;
}

static void tensor_free(el_tensor *t) {
    if (!t) return;
    g_be->i->buf_free(g_be, t->dev[g_be->index]);
    free(t->host);
    free(t);
}

static void put(el_tensor *t) {
    el_error err = {0};
    if (g_be->i->buf_write(g_be, t->dev[g_be->index], 0, t->host, t->bytes, &err) != 0) {
        fprintf(stderr, "buf_write: %s\n", err.msg);
        exit(1);
    }
}

/* Device copy into out (t->bytes). */
static void get(el_tensor *t, void *out) {
    el_error err = {0};
    if (g_be->i->buf_read(g_be, t->dev[g_be->index], 0, out, t->bytes, &err) != 0) {
        fprintf(stderr, "buf_read: %s\n", err.msg);
        exit(1);
    }
}

static el_tref ref(el_tensor *t, size_t off, size_t len) { return (el_tref){t, off, len}; }

static int run_op(const el_op *op) {
    el_error err = {0};
    if (!g_be->i->supports(g_be, op)) {
        fprintf(stderr, "supports() refused op kind %d\n", (int)op->kind);
        return -1;
    }
    int rc = g_be->i->run(g_be, op, &err);
    if (rc == 0) rc = g_be->i->sync(g_be, &err);
    if (rc != 0) fprintf(stderr, "run: %s\n", err.msg);
    return rc;
}

static void upload(const void *host, size_t bytes) {
    el_error err = {0};
    if (g_be->i->upload_const(g_be, host, bytes, true, &err) != 0) {
        fprintf(stderr, "upload_const: %s\n", err.msg);
        exit(1);
    }
}

static void fill(float *x, size_t n, float scale) {
    for (size_t i = 0; i < n; i++) x[i] = rndf() * scale;
}

static float maxabs(const float *x, size_t n) {
    float m = 0;
    for (size_t i = 0; i < n; i++) m = fmaxf(m, fabsf(x[i]));
    return m;
}

/* ---- distance to the CPU's bits ------------------------------------------------------
 * ULPs between two floats (how many representable floats apart; 0: the same
 * bits, +0 and -0 equal), and the worst per op over the whole run, printed at
 * the end. On a device with fp64 (el_opencl_info.exact) the kernels compute
 * the CPU's arithmetic, so every op must give 0 ULP except where the CPU calls
 * libm's expf (attention's softmax, SiLU past a row's last group of 16): the
 * kernels take the correctly rounded exp there, which glibc's expf misses
 * for ~1 in 12,000 arguments, so those ops may move by a few ULP. */
static bool g_exact;

static uint32_t ordered(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (u & 0x80000000u) ? 0x80000000u - (u & 0x7FFFFFFFu) : 0x80000000u + u;
}

static uint64_t ulps(float a, float b) {
    if (a != a || b != b) return (a != a && b != b) ? 0 : UINT64_MAX;
    const uint32_t x = ordered(a), y = ordered(b);
    return x > y ? x - y : y - x;
}

static uint64_t max_ulps(const float *a, const float *b, size_t n) {
    uint64_t m = 0;
    for (size_t i = 0; i < n; i++) {
        const uint64_t u = ulps(a[i], b[i]);
        if (u > m) m = u;
    }
    return m;
}

enum { U_MATMUL, U_RMSNORM, U_ROPE, U_SCALE, U_ADD, U_SILU, U_GELU, U_ATTN1, U_ATTNT, U_N };
static const char *const k_unames[U_N] = {"matmul (all types)", "rmsnorm", "rope", "scale", "add", "silu_mul",
                                          "gelu_mul", "attention (< 64 rows)", "attention (tiled, >= 64 rows)"};
static uint64_t g_umax[U_N];
static int g_ucases[U_N];

/* Records op u's worst ULP for a case and, on an exact device, asserts it
 * is within allowed (0 for the ops without libm's expf). */
static void ulp_record(int u, uint64_t worst, uint64_t allowed, const char *what) {
    if (worst > g_umax[u]) g_umax[u] = worst;
    g_ucases[u]++;
    if (g_exact) CHECKF(worst <= allowed, "%s: %llu ULP from the CPU backend's result (allowed %llu)", what,
                        (unsigned long long)worst, (unsigned long long)allowed);
}

static void ulp_report(void) {
    printf("max ULP vs the CPU backend per op (%s device):\n", g_exact ? "fp64, exact" : "no fp64, approximate");
    for (int u = 0; u < U_N; u++)
        if (g_ucases[u]) printf("  %-30s %llu (%d cases)\n", k_unames[u], (unsigned long long)g_umax[u], g_ucases[u]);
}

/* ---- matmul -------------------------------------------------------------------- */

static const el_type k_types[] = {EL_TYPE_F32,  EL_TYPE_F16,  EL_TYPE_Q8_0, EL_TYPE_Q4_0,
                                  EL_TYPE_Q5_0, EL_TYPE_Q4_K, EL_TYPE_Q6_K};

typedef struct wmat {
    el_mat m;
    float *deq; /* to_float of the bytes */
    void *data;
} wmat;

static void wmat_make(wmat *w, el_type t, int K, int M) {
    float *src = malloc(sizeof(float) * (size_t)K * M);
    fill(src, (size_t)K * M, 1.0f);
    const size_t rb = el_row_size(t, K);
    w->data = malloc(rb * M);
    if (el_quantize_rows(t, src, w->data, M, K) == 0) {
        fprintf(stderr, "quantize %s failed\n", el_type_name(t));
        exit(1);
    }
    w->deq = malloc(sizeof(float) * (size_t)K * M);
    for (int o = 0; o < M; o++) el_type_get(t)->to_float((uint8_t *)w->data + rb * o, w->deq + (size_t)o * K, K);
    w->m = (el_mat){.type = t, .ne0 = K, .ne1 = M, .data = w->data, .row_bytes = rb};
    free(src);
}

static void wmat_free(wmat *w) {
    free(w->deq);
    keep(w->data);
}

/* One matmul case: n tokens, n_w products of K -> M_i, x at float offset xo, outputs at yo. */
static void matmul_case(el_type t, int n, int n_w, int K, bool bias) {
    static const int Ms[3] = {67, 32, 5};
    wmat w[3];
    float *b[3] = {0};
    const int xo = 24, yo = 8;
    el_tensor *x = tensor(sizeof(float) * ((size_t)xo + (size_t)n * K));
    fill((float *)x->host + xo, (size_t)n * K, 1.0f);
    put(x);
    el_tensor *y[3];
    el_op op = {.kind = EL_OPK_MATMUL, .layer = 0, .site = "test", .n = n, .d = K, .n_w = n_w};
    op.src[0] = ref(x, sizeof(float) * xo, sizeof(float) * (size_t)n * K);
    for (int i = 0; i < n_w; i++) {
        wmat_make(&w[i], t, K, Ms[i]);
        upload(w[i].data, w[i].m.row_bytes * Ms[i]);
        op.w[i] = &w[i].m;
        if (bias && i != 1) {
            b[i] = malloc(sizeof(float) * Ms[i]);
            fill(b[i], Ms[i], 0.5f);
            upload(b[i], sizeof(float) * Ms[i]);
        }
        op.vec[i] = b[i];
        y[i] = tensor(sizeof(float) * ((size_t)yo + (size_t)n * Ms[i]));
        put(y[i]); /* zeros: the bytes before the operand must stay so */
        op.dst[i] = ref(y[i], sizeof(float) * yo, sizeof(float) * (size_t)n * Ms[i]);
    }
    CHECKF(run_op(&op) == 0, "matmul %s n=%d", el_type_name(t), n);
    const float *xh = (const float *)x->host + xo;
    void *ws = malloc(el_op_matmul_wsize(t, K, n) + 64);
    double worst_ref = 0, worst_cpu = 0;
    uint64_t worst_ulp = 0;
    for (int i = 0; i < n_w; i++) {
        const int M = Ms[i];
        float *got = malloc(y[i]->bytes);
        get(y[i], got);
        float *cpu = malloc(sizeof(float) * (size_t)n * M);
        el_op_matmul(g_pool, &w[i].m, xh, n, cpu, b[i], ws);
        float mx = 0;
        double *refv = malloc(sizeof(double) * (size_t)n * M);
        for (int r = 0; r < n; r++)
            for (int o = 0; o < M; o++) {
                double s = 0, l1 = 0;
                for (int k = 0; k < K; k++) {
                    const double p = (double)xh[(size_t)r * K + k] * w[i].deq[(size_t)o * K + k];
                    s += p;
                    l1 += fabs(p);
                }
                if (b[i]) s += b[i][o];
                refv[(size_t)r * M + o] = s;
                mx = fmaxf(mx, (float)fabs(s));
                const double e = fabs(got[yo + (size_t)r * M + o] - s) / (l1 + 1e-30);
                if (e > worst_ref) worst_ref = e;
            }
        for (size_t j = 0; j < (size_t)n * M; j++) {
            const double e = fabs(got[yo + j] - cpu[j]) / mx;
            if (e > worst_cpu) worst_cpu = e;
        }
        const uint64_t u = max_ulps(got + yo, cpu, (size_t)n * M);
        if (u > worst_ulp) worst_ulp = u;
        /* bytes before the operand are untouched */
        for (int j = 0; j < yo; j++) CHECK(got[j] == 0.0f);
        free(refv);
        free(got);
        free(cpu);
    }
    /* the kernels take the activations in the CPU's format for the weight type (act_quant): they compute the CPU's
     * products, and differ from the exact float product by the CPU's own rounding of x (F16: 2^-11, Q8: 1/254) */
    const double ref_bound = t == EL_TYPE_F32 ? 2e-5 : t == EL_TYPE_F16 ? 5e-4 : 1e-2;
    CHECKF(worst_ref <= ref_bound, "matmul %s n=%d n_w=%d: error vs float reference %.3g (of sum|x*w|)", el_type_name(t),
           n, n_w, worst_ref);
    CHECKF(worst_cpu <= 2e-6, "matmul %s n=%d: error vs CPU kernel %.3g (of max|y|)", el_type_name(t), n, worst_cpu);
    char what[96];
    snprintf(what, sizeof what, "matmul %s K=%d n=%d n_w=%d", el_type_name(t), K, n, n_w);
    ulp_record(U_MATMUL, worst_ulp, 0, what);
    printf("  matmul %-5s K=%-3d n=%-2d n_w=%d bias=%d: vs float ref %.2e, vs CPU %.2e (%llu ULP)\n", el_type_name(t), K,
           n, n_w, bias, worst_ref, worst_cpu, (unsigned long long)worst_ulp);
    free(ws);
    for (int i = 0; i < n_w; i++) {
        wmat_free(&w[i]);
        keep(b[i]);
        tensor_free(y[i]);
    }
    tensor_free(x);
}

static void test_matmul(void) {
    for (size_t ti = 0; ti < sizeof k_types / sizeof k_types[0]; ti++) {
        const el_type t = k_types[ti];
        matmul_case(t, 1, 1, 512, false);
        matmul_case(t, 7, 3, 512, true);
        matmul_case(t, 64, 2, 256, true);
        if (el_type_get(t)->blck_size == 32 || t == EL_TYPE_F32 || t == EL_TYPE_F16) {
            /* Gemma 3 270M's row length: 20 units, not a multiple of the work-group */
            matmul_case(t, 1, 1, 640, false);
            matmul_case(t, 9, 1, 640, true);
        }
        if (t == EL_TYPE_F32 || t == EL_TYPE_F16) /* a tail past the 64-element steps (F16: summed in double) */
            matmul_case(t, 1, 1, 608, true);
    }
}

/* The CPU's row order (ops.h el_op_matmul_row_order, speculative verification):
 * with it on, the backend computes every row of a batch as a one-row product,
 * as the CPU then does. The variants differ in the last bits for F32/F16
 * (tinyBLAS order) and Q4_K (repacked gemm order), which the first check
 * confirms on the CPU so that the comparison can tell. */
static void test_row_order(void) {
    static const el_type ts[] = {EL_TYPE_F32, EL_TYPE_F16, EL_TYPE_Q4_K};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) {
        const int n = 8, K = 512, M = 67;
        wmat w;
        wmat_make(&w, ts[i], K, M);
        float *x = malloc(sizeof(float) * n * K), *a = malloc(sizeof(float) * n * M), *b = malloc(sizeof(float) * n * M);
        fill(x, (size_t)n * K, 1.0f);
        void *ws = malloc(el_op_matmul_wsize(ts[i], K, n) + 64);
        el_op_matmul(g_pool, &w.m, x, n, a, NULL, ws);
        el_op_matmul_row_order(true);
        el_op_matmul(g_pool, &w.m, x, n, b, NULL, ws);
        el_op_matmul_row_order(false);
        CHECKF(memcmp(a, b, sizeof(float) * n * M) != 0, "%s: row order changes no bit on the CPU", el_type_name(ts[i]));
        free(ws), free(x), free(a), free(b);
        wmat_free(&w);
        el_op_matmul_row_order(true);
        matmul_case(ts[i], n, 1, K, true);
        el_op_matmul_row_order(false);
    }
}

/* ---- rmsnorm, rope, element-wise ------------------------------------------------ */

static void test_rmsnorm(void) {
    const int n = 7, d = 640, off = 16;
    float *w = malloc(sizeof(float) * d);
    fill(w, d, 2.0f);
    upload(w, sizeof(float) * d);
    for (int variant = 0; variant < 3; variant++) { /* 0: weight, 1: no weight, 2: in place with weight */
        el_tensor *x = tensor(sizeof(float) * (off + (size_t)n * d));
        el_tensor *y = variant == 2 ? x : tensor(sizeof(float) * (off + (size_t)n * d));
        fill((float *)x->host + off, (size_t)n * d, 3.0f);
        put(x);
        float *want = malloc(sizeof(float) * (size_t)n * d);
        el_op_rmsnorm((float *)x->host + off, variant == 1 ? NULL : w, want, n, d, 1e-6f);
        el_op op = {.kind = EL_OPK_RMSNORM, .n = n, .d = d, .layer = -1};
        op.src[0] = ref(x, sizeof(float) * off, sizeof(float) * (size_t)n * d);
        op.dst[0] = ref(y, sizeof(float) * off, sizeof(float) * (size_t)n * d);
        op.vec[0] = variant == 1 ? NULL : w;
        op.p.rmsnorm.eps = 1e-6f;
        CHECK(run_op(&op) == 0);
        float *got = malloc(y->bytes);
        get(y, got);
        const float mx = maxabs(want, (size_t)n * d);
        double worst = 0;
        for (size_t i = 0; i < (size_t)n * d; i++) worst = fmax(worst, fabs(got[off + i] - want[i]) / mx);
        CHECKF(worst <= 1e-5, "rmsnorm variant %d: %.3g", variant, worst);
        const uint64_t u = max_ulps(got + off, want, (size_t)n * d);
        ulp_record(U_RMSNORM, u, 0, "rmsnorm");
        printf("  rmsnorm variant %d: %.2e (%llu ULP)\n", variant, worst, (unsigned long long)u);
        free(got);
        free(want);
        if (y != x) tensor_free(y);
        tensor_free(x);
    }
    keep(w);
}

static void rope_case(el_rope_mode mode, int head_dim, int n_rot, int n_heads, int n, int pos0, float fscale,
                      bool ff) {
    const int row = n_heads * head_dim, off = 4;
    float *factors = NULL;
    if (ff) {
        factors = malloc(sizeof(float) * (n_rot / 2));
        for (int i = 0; i < n_rot / 2; i++) factors[i] = 1.0f + (float)(rnd() % 8);
        upload(factors, sizeof(float) * (n_rot / 2));
    }
    el_rope r = {.mode = mode, .n_rot = n_rot, .freq_base = 10000.0f, .freq_scale = fscale, .freq_factors = factors};
    el_tensor *x = tensor(sizeof(float) * (off + (size_t)n * row));
    fill((float *)x->host + off, (size_t)n * row, 2.0f);
    put(x);
    float *want = malloc(sizeof(float) * (size_t)n * row);
    memcpy(want, (float *)x->host + off, sizeof(float) * (size_t)n * row);
    float cs[512];
    for (int t = 0; t < n; t++) el_op_rope(want + (size_t)t * row, n_heads, head_dim, pos0 + t, &r, cs);
    el_op op = {.kind = EL_OPK_ROPE, .n = n, .layer = -1};
    op.dst[0] = ref(x, sizeof(float) * off, sizeof(float) * (size_t)n * row);
    op.p.rope.rope = r;
    op.p.rope.n_heads = n_heads;
    op.p.rope.head_dim = head_dim;
    op.p.rope.pos0 = pos0;
    CHECK(run_op(&op) == 0);
    float *got = malloc(x->bytes);
    get(x, got);
    const float mx = maxabs(want, (size_t)n * row);
    double worst = 0;
    for (size_t i = 0; i < (size_t)n * row; i++) worst = fmax(worst, fabs(got[off + i] - want[i]) / mx);
    CHECKF(worst <= 2e-5, "rope mode %d hd %d n_rot %d pos0 %d: %.3g", (int)mode, head_dim, n_rot, pos0, worst);
    const uint64_t u = max_ulps(got + off, want, (size_t)n * row);
    ulp_record(U_ROPE, u, 0, "rope");
    printf("  rope %s hd=%d n_rot=%d pos0=%d ff=%d: %.2e (%llu ULP)\n", mode == EL_ROPE_NEOX ? "neox" : "norm", head_dim,
           n_rot, pos0, ff, worst, (unsigned long long)u);
    free(got);
    free(want);
    keep(factors);
    tensor_free(x);
}

static void test_rope(void) {
    rope_case(EL_ROPE_NORM, 64, 64, 8, 7, 0, 1.0f, false);
    rope_case(EL_ROPE_NEOX, 128, 128, 4, 7, 1000, 1.0f, false);
    rope_case(EL_ROPE_NEOX, 256, 256, 4, 3, 4000, 0.125f, true);
    rope_case(EL_ROPE_NORM, 64, 32, 2, 5, 17, 0.5f, true);
    rope_case(EL_ROPE_NEOX, 128, 64, 2, 1, 300, 1.0f, false);
}

static void test_elementwise(void) {
    const int count = 1000, off = 12;
    el_tensor *g = tensor(sizeof(float) * (off + count)), *u = tensor(sizeof(float) * (off + count));
    float *want = malloc(sizeof(float) * count), *got = malloc(g->bytes);
    for (int kind = 0; kind < 5; kind++) {
        fill((float *)g->host + off, count, 12.0f); /* past +-10: gelu's cut-offs */
        fill((float *)u->host + off, count, 1.0f);
        put(g);
        put(u);
        memcpy(want, (float *)g->host + off, sizeof(float) * count);
        el_op op = {.layer = -1};
        op.dst[0] = ref(g, sizeof(float) * off, sizeof(float) * count);
        op.src[1] = ref(u, sizeof(float) * off, sizeof(float) * count);
        const char *name;
        double tol;
        switch (kind) {
        case 0:
            op.kind = EL_OPK_SCALE;
            op.p.scale.s = 0.37f;
            op.p.scale.count = count;
            el_op_scale(want, 0.37f, count);
            name = "scale";
            tol = 0;
            break;
        case 1:
            op.kind = EL_OPK_ADD;
            op.p.elt.count = count;
            el_op_add(want, (float *)u->host + off, count);
            name = "add";
            tol = 0;
            break;
        case 2: /* rows of 125: 112 values through the vector expf, 13 through libm's */
            op.kind = EL_OPK_SILU_MUL;
            op.n = 8;
            op.d = count / 8;
            el_op_silu_mul(want, (float *)u->host + off, 8, count / 8);
            name = "silu_mul";
            tol = 1e-5;
            break;
        case 3: /* rows of 200 (groups of 16 but the last 8): as case 2, another split */
            op.kind = EL_OPK_SILU_MUL;
            op.n = 5;
            op.d = count / 5;
            el_op_silu_mul(want, (float *)u->host + off, 5, count / 5);
            name = "silu_mul";
            tol = 1e-5;
            break;
        default:
            op.kind = EL_OPK_GELU_MUL;
            op.p.elt.count = count;
            el_op_gelu_mul(want, (float *)u->host + off, count);
            name = "gelu_mul";
            tol = 2e-3;
            break;
        }
        CHECK(run_op(&op) == 0);
        get(g, got);
        double worst = 0;
        for (int i = 0; i < count; i++) {
            const double e = fabs(got[off + i] - want[i]) / fmax(fabs(want[i]), 1e-3);
            worst = fmax(worst, e);
        }
        CHECKF(worst <= tol, "%s: %.3g > %.3g", name, worst, tol);
        const uint64_t uw = max_ulps(got + off, want, count);
        /* SiLU: up to 1 ULP where libm's expf runs (the tail of each row); the rest exact */
        ulp_record(kind == 0 ? U_SCALE : kind == 1 ? U_ADD : kind <= 3 ? U_SILU : U_GELU, uw, kind == 2 || kind == 3 ? 1 : 0,
                   name);
        if (kind == 2 || kind == 3) {
            uint64_t vec = 0;
            for (int i = 0; i < count; i++)
                if (i % op.d < (op.d & ~15)) vec = ulps(got[off + i], want[i]) > vec ? ulps(got[off + i], want[i]) : vec;
            if (g_exact) CHECKF(vec == 0, "silu_mul: %llu ULP where the CPU's vector expf runs", (unsigned long long)vec);
        }
        printf("  %s: %.2e (%llu ULP)\n", name, worst, (unsigned long long)uw);
    }
    /* copy: to another buffer, then overlapping ranges of one buffer both ways */
    {
        uint8_t *h = g->host;
        for (size_t i = 0; i < g->bytes; i++) h[i] = (uint8_t)rnd();
        put(g);
        el_op op = {.kind = EL_OPK_COPY, .layer = -1};
        op.src[0] = ref(g, 8, 3000);
        op.dst[0] = ref(u, 100, 3000);
        CHECK(run_op(&op) == 0);
        uint8_t *uo = malloc(u->bytes);
        get(u, uo);
        CHECK(memcmp(uo + 100, h + 8, 3000) == 0);
        const size_t cases[2][2] = {{8, 40}, {1000, 3}}; /* forward overlap, backward overlap */
        for (int c = 0; c < 2; c++) {
            uint8_t *want_b = malloc(g->bytes);
            for (size_t i = 0; i < g->bytes; i++) h[i] = (uint8_t)rnd();
            put(g);
            memcpy(want_b, h, g->bytes);
            memmove(want_b + cases[c][1], want_b + cases[c][0], 2900);
            op.src[0] = ref(g, cases[c][0], 2900);
            op.dst[0] = ref(g, cases[c][1], 2900);
            CHECK(run_op(&op) == 0);
            get(g, uo);
            CHECKF(memcmp(uo, want_b, g->bytes) == 0, "overlapping copy %zu -> %zu", cases[c][0], cases[c][1]);
            free(want_b);
        }
        free(uo);
        printf("  copy (incl. overlapping): exact\n");
    }
    free(want);
    free(got);
    tensor_free(g);
    tensor_free(u);
}

/* ---- kv_store + attention --------------------------------------------------------- */

static void test_kv_store(void) {
    const int row_len = 2 * 128, n = 9, ring = 16, pos0 = 12; /* wraps: rows 12..15, 0..4 */
    for (int use_ring = 0; use_ring < 2; use_ring++) {
        const int rows = use_ring ? ring : pos0 + n;
        const size_t coff = 64; /* bytes */
        el_tensor *x = tensor(sizeof(float) * (4 + (size_t)n * row_len));
        el_tensor *c = tensor(coff + sizeof(el_fp16) * (size_t)rows * row_len);
        fill((float *)x->host + 4, (size_t)n * row_len, 3.0f);
        ((float *)x->host)[4] = 1e6f; /* overflows F16: inf */
        ((float *)x->host)[5] = 3e-8f; /* subnormal F16 */
        put(x);
        put(c);
        el_fp16 *want = calloc((size_t)rows * row_len, sizeof(el_fp16));
        el_op_kv_store(want, (float *)x->host + 4, n, pos0, row_len, use_ring ? ring : 0);
        el_op op = {.kind = EL_OPK_KV_STORE, .n = n, .layer = 0};
        op.src[0] = ref(x, 16, sizeof(float) * (size_t)n * row_len);
        op.dst[0] = ref(c, coff, sizeof(el_fp16) * (size_t)rows * row_len);
        op.p.kv_store.type = EL_TYPE_F16;
        op.p.kv_store.pos0 = pos0;
        op.p.kv_store.row_len = row_len;
        op.p.kv_store.ring = use_ring ? ring : 0;
        CHECK(run_op(&op) == 0);
        uint8_t *got = malloc(c->bytes);
        get(c, got);
        CHECKF(memcmp(got + coff, want, sizeof(el_fp16) * (size_t)rows * row_len) == 0, "kv_store ring=%d", use_ring);
        printf("  kv_store ring=%d: %s\n", use_ring,
               memcmp(got + coff, want, sizeof(el_fp16) * (size_t)rows * row_len) == 0 ? "bit-identical" : "DIFFERS");
        free(got);
        free(want);
        tensor_free(x);
        tensor_free(c);
    }
}

typedef struct attn_case {
    int hd, n_head, n_head_kv, n, pos0, window, ring;
} attn_case;

static void attention_case(const attn_case *ac) {
    const int hd = ac->hd, kvrow = ac->n_head_kv * hd, qrow = ac->n_head * hd;
    const int last = ac->pos0 + ac->n - 1;
    const int rows = ac->ring > 0 ? ac->ring : last + 1;
    const size_t coff = 128, qoff = 32, ooff = 16; /* bytes */
    /* the cache holds positions 0..last: K/V rows stored through the CPU kv_store */
    el_fp16 *kc = calloc((size_t)rows * kvrow, sizeof(el_fp16)), *vc = calloc((size_t)rows * kvrow, sizeof(el_fp16));
    float *tmp = malloc(sizeof(float) * kvrow);
    const int first = ac->ring > 0 ? (last + 1 > ac->ring ? last + 1 - ac->ring : 0) : 0;
    for (int p = first; p <= last; p++) {
        fill(tmp, kvrow, 1.0f);
        el_op_kv_store(kc, tmp, 1, p, kvrow, ac->ring);
        fill(tmp, kvrow, 1.0f);
        el_op_kv_store(vc, tmp, 1, p, kvrow, ac->ring);
    }
    free(tmp);
    el_tensor *q = tensor(qoff + sizeof(float) * (size_t)ac->n * qrow);
    el_tensor *o = tensor(ooff + sizeof(float) * (size_t)ac->n * qrow);
    el_tensor *k = tensor(coff + sizeof(el_fp16) * (size_t)rows * kvrow);
    el_tensor *v = tensor(coff + sizeof(el_fp16) * (size_t)rows * kvrow);
    fill((float *)((uint8_t *)q->host + qoff), (size_t)ac->n * qrow, 2.0f);
    memcpy((uint8_t *)k->host + coff, kc, sizeof(el_fp16) * (size_t)rows * kvrow);
    memcpy((uint8_t *)v->host + coff, vc, sizeof(el_fp16) * (size_t)rows * kvrow);
    put(q);
    put(o);
    put(k);
    put(v);
    el_attn_args a = {.n = ac->n, .pos0 = ac->pos0, .n_head = ac->n_head, .n_head_kv = ac->n_head_kv, .head_dim = hd,
                      .window = ac->window, .ring = ac->ring, .scale = 1.0f / sqrtf((float)hd)};
    float *want = malloc(sizeof(float) * (size_t)ac->n * qrow);
    el_attn_args ca = a;
    ca.q = (const float *)((uint8_t *)q->host + qoff);
    ca.out = want;
    ca.kcache = kc;
    ca.vcache = vc;
    el_op_attention(g_pool1, &ca); /* one thread: the unsplit arithmetic the kernel follows */
    float *want_mt = malloc(sizeof(float) * (size_t)ac->n * qrow);
    ca.out = want_mt;
    el_op_attention(g_pool, &ca); /* 2 threads: split across the cache at 512+ cells */
    el_op op = {.kind = EL_OPK_ATTENTION, .n = ac->n, .layer = 0};
    op.src[0] = ref(q, qoff, sizeof(float) * (size_t)ac->n * qrow);
    op.dst[0] = ref(o, ooff, sizeof(float) * (size_t)ac->n * qrow);
    op.src[1] = ref(k, coff, sizeof(el_fp16) * (size_t)rows * kvrow);
    op.src[2] = ref(v, coff, sizeof(el_fp16) * (size_t)rows * kvrow);
    op.p.attn.a = a;
    CHECK(run_op(&op) == 0);
    float *got = malloc(o->bytes);
    get(o, got);
    const float *g = (const float *)((uint8_t *)got + ooff);
    double worst = 0;
    for (size_t i = 0; i < (size_t)ac->n * qrow; i++) worst = fmax(worst, fabs(g[i] - want[i])); /* |V| <= 1 */
    CHECKF(worst <= (g_exact ? 1e-6 : 4e-3), "attention hd=%d heads=%d/%d n=%d pos0=%d window=%d ring=%d: %.3g", hd,
           ac->n_head, ac->n_head_kv, ac->n, ac->pos0, ac->window, ac->ring, worst);
    double worst_mt = 0;
    for (size_t i = 0; i < (size_t)ac->n * qrow; i++) worst_mt = fmax(worst_mt, fabs(g[i] - want_mt[i]));
    CHECKF(worst_mt <= 4e-3, "attention hd=%d n=%d pos0=%d: %.3g from the CPU on %d threads", hd, ac->n, ac->pos0,
           worst_mt, el_pool_size(g_pool));
    free(want_mt);
    const uint64_t u = max_ulps(g, want, (size_t)ac->n * qrow);
    /* libm's expf (see ulp_record): a weight 1 ULP off moves an output by a few ULP of the output */
    ulp_record(ac->n >= 64 ? U_ATTNT : U_ATTN1, u, 16, "attention");
    printf("  attention hd=%d heads=%d/%d n=%d pos0=%d window=%d ring=%d: %.2e (%llu ULP)\n", hd, ac->n_head,
           ac->n_head_kv, ac->n, ac->pos0, ac->window, ac->ring, worst, (unsigned long long)u);
    free(got);
    free(want);
    free(kc);
    free(vc);
    tensor_free(q);
    tensor_free(o);
    tensor_free(k);
    tensor_free(v);
}

static void test_attention(void) {
    static const attn_case cases[] = {
        {64, 8, 8, 1, 37, 0, 0},    {128, 8, 2, 7, 50, 0, 0},   {256, 4, 1, 64, 0, 0, 0},
        {256, 4, 1, 1, 300, 0, 0},  {128, 4, 2, 7, 100, 16, 0}, {256, 4, 1, 7, 100, 16, 24},
        {64, 6, 3, 64, 40, 32, 96}, {256, 4, 1, 1, 1000, 512, 512}, {80, 4, 4, 3, 70, 0, 0},
        {128, 4, 2, 80, 100, 0, 0}, {256, 4, 1, 70, 200, 128, 128}, {80, 2, 2, 65, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) attention_case(&cases[i]);
}

/* ---- supports(), bad operands, allocation limits ------------------------------------ */

static void test_refusals(void) {
    el_op op = {.kind = EL_OPK_GET_ROWS, .n = 1, .d = 64};
    CHECK(!g_be->i->supports(g_be, &op));
    op.kind = EL_OPK_FWHT;
    CHECK(!g_be->i->supports(g_be, &op));
    op.kind = EL_OPK_HOST;
    CHECK(!g_be->i->supports(g_be, &op));
    el_mat wq41 = {.type = EL_TYPE_Q4_1, .ne0 = 64, .ne1 = 4, .row_bytes = 40};
    op = (el_op){.kind = EL_OPK_MATMUL, .n = 1, .d = 64, .n_w = 1, .w = {&wq41}};
    CHECK(!g_be->i->supports(g_be, &op));
    el_mat wodd = {.type = EL_TYPE_F32, .ne0 = 48, .ne1 = 4, .row_bytes = 192};
    op.w[0] = &wodd;
    CHECK(!g_be->i->supports(g_be, &op));
    op = (el_op){.kind = EL_OPK_KV_STORE, .n = 1};
    op.p.kv_store.type = EL_TYPE_Q8_0;
    op.p.kv_store.row_len = 64;
    CHECK(!g_be->i->supports(g_be, &op));
    op = (el_op){.kind = EL_OPK_ATTENTION, .n = 1};
    op.p.attn.a = (el_attn_args){.n = 1, .n_head = 4, .n_head_kv = 1, .head_dim = 128, .type_k = EL_TYPE_Q8_0};
    CHECK(!g_be->i->supports(g_be, &op));
    op.p.attn.a.type_k = EL_TYPE_F16;
    CHECK(g_be->i->supports(g_be, &op));
    op.p.attn.a.n_head_kv = 3; /* 4 % 3 */
    CHECK(!g_be->i->supports(g_be, &op));

    /* run() with a weight that was never uploaded, and an operand without a device buffer */
    el_error err = {0};
    wmat w;
    wmat_make(&w, EL_TYPE_Q8_0, 64, 4);
    el_tensor *x = tensor(256), *y = tensor(64);
    op = (el_op){.kind = EL_OPK_MATMUL, .n = 1, .d = 64, .n_w = 1, .w = {&w.m}};
    op.src[0] = ref(x, 0, 256);
    op.dst[0] = ref(y, 0, 16);
    CHECK(g_be->i->run(g_be, &op, &err) != 0);
    CHECKF(strstr(err.msg, "not uploaded") != NULL, "%s", err.msg);
    el_tensor nodev = {.name = "nodev", .host = x->host, .bytes = 256, .layer = -1, .home = -1};
    upload(w.data, w.m.row_bytes * 4);
    op.src[0] = ref(&nodev, 0, 256);
    CHECK(g_be->i->run(g_be, &op, &err) != 0);
    CHECKF(strstr(err.msg, "no buffer") != NULL, "%s", err.msg);
    op.src[0] = ref(x, 2, 254); /* not float-aligned */
    CHECK(g_be->i->run(g_be, &op, &err) != 0);
    CHECKF(strstr(err.msg, "offset") != NULL, "%s", err.msg);
    /* the same constant again: no new upload, no error; larger than registered: refused */
    CHECK(g_be->i->upload_const(g_be, w.data, w.m.row_bytes * 4, false, &err) == 0);
    CHECK(g_be->i->upload_const(g_be, w.data, w.m.row_bytes * 8, false, &err) != 0);
    tensor_free(x);
    tensor_free(y);
    wmat_free(&w);

    /* allocations beyond CL_DEVICE_MAX_MEM_ALLOC_SIZE fail cleanly */
    err = (el_error){0};
    void *huge = g_be->i->buf_alloc(g_be, (size_t)1 << 62, &err);
    CHECK(huge == NULL);
    CHECKF(err.code == EL_ERR_NOMEM && strstr(err.msg, "CL_DEVICE_MAX_MEM_ALLOC_SIZE"), "%s", err.msg);
    printf("  huge buf_alloc: %s\n", err.msg);
    static const uint8_t small[64];
    err = (el_error){0};
    CHECK(g_be->i->upload_const(g_be, small, (size_t)1 << 62, false, &err) == EL_ERR_NOMEM);
    printf("  huge upload_const: %s\n", err.msg);
    /* the device's whole memory plus more, in one buffer, also fails (or is refused by the size check) */
    err = (el_error){0};
    huge = g_be->i->buf_alloc(g_be, (size_t)(g_be->caps.mem_bytes + ((uint64_t)1 << 30)), &err);
    CHECK(huge == NULL && err.code == EL_ERR_NOMEM);
}

/* ---- construction: binary cache, bad options, no device ------------------------------ */

static void test_construction(void) {
    char dir[] = "/tmp/el_ocl_cacheXXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char sub[300];
    snprintf(sub, sizeof sub, "%s/nested/cache", dir);
    char saved[300];
    snprintf(saved, sizeof saved, "%s", getenv("EL_OPENCL_CACHE_DIR") ? getenv("EL_OPENCL_CACHE_DIR") : "");
    setenv("EL_OPENCL_CACHE_DIR", sub, 1);
    el_error err = {0};
    el_opencl_info i1, i2, i3, i4;

    el_backend *b1 = el_backend_opencl_new(0, &err);
    CHECKF(b1 != NULL, "%s", err.msg);
    if (!b1) {
        setenv("EL_OPENCL_CACHE_DIR", saved, 1);
        return;
    }
    CHECK(el_backend_opencl_info(b1, &i1) == 0);
    CHECK(!i1.from_cache && i1.cache_written);
    el_backend_free(b1);
    struct stat st;
    CHECKF(stat(i1.cache_path, &st) == 0 && st.st_size > EL_CLBIN_HEADER, "%s", i1.cache_path);

    el_backend *b2 = el_backend_opencl_new(0, &err);
    CHECKF(b2 != NULL, "%s", err.msg);
    CHECK(el_backend_opencl_info(b2, &i2) == 0);
    CHECK(i2.from_cache && !i2.cache_written);
    CHECK(strcmp(i1.cache_path, i2.cache_path) == 0);
    printf("  program: built from source in %.1f ms, loaded from the binary cache in %.1f ms\n", i1.build_ms,
           i2.build_ms);
    /* (times only printed: PoCL keeps its own kernel cache too, and other jobs load this machine) */
    el_backend_free(b2);

    /* a truncated cache file: rebuilt from source, rewritten */
    CHECK(truncate(i1.cache_path, st.st_size / 2) == 0);
    el_backend *b3 = el_backend_opencl_new(0, &err);
    CHECKF(b3 != NULL, "%s", err.msg);
    CHECK(el_backend_opencl_info(b3, &i3) == 0);
    CHECK(!i3.from_cache && i3.cache_written);
    el_backend_free(b3);

    /* a file with an intact header and checksum but garbage for a binary: the
     * driver refuses it, the backend builds from source */
    {
        size_t n = 4096;
        uint8_t *junk = malloc(n);
        for (size_t i = 0; i < n; i++) junk[i] = (uint8_t)rnd();
        FILE *f = fopen(i1.cache_path, "rb");
        uint8_t hdr[EL_CLBIN_HEADER];
        CHECK(f && fread(hdr, 1, sizeof hdr, f) == sizeof hdr);
        if (f) fclose(f);
        uint64_t key = 0;
        for (int i = 7; i >= 0; i--) key = (key << 8) | hdr[8 + i];
        CHECK(el_clbin_store(i1.cache_path, key, junk, n) == 0);
        free(junk);
        el_backend *b4 = el_backend_opencl_new(0, &err);
        CHECKF(b4 != NULL, "%s", err.msg);
        CHECK(el_backend_opencl_info(b4, &i4) == 0);
        CHECK(!i4.from_cache && i4.cache_written);
        /* and it computes: a small Q4_0 product on the rebuilt program */
        el_backend *keep = g_be;
        g_be = b4;
        b4->index = keep->index;
        matmul_case(EL_TYPE_Q4_0, 3, 1, 256, false);
        g_be = keep;
        el_backend_free(b4);
    }

    /* a build option the compiler refuses: NULL, a message naming the build */
    setenv("EL_OPENCL_BUILD_OPTIONS", "-cl-no-such-option-edgellm", 1);
    err = (el_error){0};
    el_backend *bad = el_backend_opencl_new(0, &err);
    CHECK(bad == NULL);
    CHECKF(strstr(err.msg, "clBuildProgram") != NULL, "%s", err.msg);
    printf("  bad build option: %s\n", err.msg);
    el_backend_free(bad);
    setenv("EL_OPENCL_BUILD_OPTIONS", "-DNT=(", 1); /* a define that breaks the kernels' source */
    err = (el_error){0};
    bad = el_backend_opencl_new(0, &err);
    CHECK(bad == NULL);
    CHECKF(strstr(err.msg, "clBuildProgram") != NULL, "%s", err.msg);
    el_backend_free(bad);
    unsetenv("EL_OPENCL_BUILD_OPTIONS");

    /* no such device */
    err = (el_error){0};
    CHECK(el_backend_opencl_new(99, &err) == NULL);
    char want[64];
    snprintf(want, sizeof want, "no OpenCL device 99 (%d found)", el_backend_opencl_count());
    CHECKF(strstr(err.msg, want) != NULL, "%s", err.msg);
    CHECK(el_backend_opencl_new(-1, &err) == NULL);

    /* clean up the temp cache */
    setenv("EL_OPENCL_CACHE_DIR", saved, 1);
    unlink(i1.cache_path);
    char p[400];
    snprintf(p, sizeof p, "%s/nested/cache", dir);
    rmdir(p);
    snprintf(p, sizeof p, "%s/nested", dir);
    rmdir(p);
    rmdir(dir);
}

/* ---- measure + speed ------------------------------------------------------------------ */

static void test_measure(void) {
    el_device_caps caps = g_be->caps;
    el_error err = {0};
    const double t0 = now_ms();
    CHECKF(g_be->i->measure(g_be, &caps, &err) == 0, "%s", err.msg);
    const double dt = now_ms() - t0;
    printf("  measure (%.0f ms): matmul %.1f GFLOP/s (", dt, caps.matmul_gflops);
    for (size_t i = 0; i < sizeof k_types / sizeof k_types[0]; i++) {
        printf("%s %.1f%s", el_type_name(k_types[i]), caps.matmul_gflops_type[k_types[i]],
               i + 1 < sizeof k_types / sizeof k_types[0] ? ", " : "");
        CHECK(caps.matmul_gflops_type[k_types[i]] > 0 && isfinite(caps.matmul_gflops_type[k_types[i]]));
    }
    printf("), other %.1f GFLOP/s, read %.1f GB/s, h2d %.1f GB/s, d2h %.1f GB/s, launch %.1f us\n", caps.gflops,
           caps.mem_gbps, caps.h2d_gbps, caps.d2h_gbps, caps.launch_us);
    CHECK(caps.matmul_gflops > 0 && caps.gflops > 0 && caps.mem_gbps > 0 && caps.h2d_gbps > 0 && caps.d2h_gbps > 0 &&
          caps.launch_us > 0);
    CHECK(isfinite(caps.gflops) && isfinite(caps.mem_gbps) && isfinite(caps.launch_us));
}

/* Random valid weight blocks (scales finite) without the quantizer: fast for big matrices. */
static void random_blocks(el_type t, uint8_t *w, size_t rows, int K) {
    const el_type_info *ti = el_type_get(t);
    const size_t nb = rows * (size_t)(K / ti->blck_size);
    for (size_t i = 0; i < nb * ti->type_size; i += 4) {
        const uint32_t r = rnd();
        memcpy(w + i, &r, nb * ti->type_size - i < 4 ? nb * ti->type_size - i : 4);
    }
    const el_fp16 d = el_fp32_to_fp16(0.01f);
    for (size_t b = 0; b < nb; b++) {
        uint8_t *blk = w + b * ti->type_size;
        switch (t) {
        case EL_TYPE_Q8_0:
        case EL_TYPE_Q4_0:
        case EL_TYPE_Q5_0: memcpy(blk, &d, 2); break;
        case EL_TYPE_Q4_K: memcpy(blk, &d, 2); memcpy(blk + 2, &d, 2); break;
        case EL_TYPE_Q6_K: memcpy(blk + 208, &d, 2); break;
        default: break;
        }
    }
}

static void bench_case(const char *what, el_type t, int K, int M, int n) {
    const size_t rb = el_row_size(t, K);
    uint8_t *w = malloc(rb * (size_t)M);
    random_blocks(t, w, (size_t)M, K);
    upload(w, rb * (size_t)M);
    el_mat m = {.type = t, .ne0 = K, .ne1 = M, .data = w, .row_bytes = rb};
    el_tensor *x = tensor(sizeof(float) * (size_t)n * K), *y = tensor(sizeof(float) * (size_t)n * M);
    fill(x->host, (size_t)n * K, 1.0f);
    put(x);
    el_op op = {.kind = EL_OPK_MATMUL, .n = n, .d = K, .n_w = 1, .w = {&m}};
    op.src[0] = ref(x, 0, sizeof(float) * (size_t)n * K);
    op.dst[0] = ref(y, 0, sizeof(float) * (size_t)n * M);
    CHECK(run_op(&op) == 0); /* warm-up (and the upload) */
    const int reps = M > 100000 ? 3 : n > 1 ? 5 : 20;
    double best_ocl = 1e30, best_cpu = 1e30, cpu_ocl = 1e30, cpu_cpu = 1e30;
    for (int r = 0; r < reps; r++) {
        const double t0 = now_ms(), c0 = cpu_ms();
        CHECK(run_op(&op) == 0);
        best_ocl = fmin(best_ocl, now_ms() - t0);
        cpu_ocl = fmin(cpu_ocl, cpu_ms() - c0);
    }
    void *ws = malloc(el_op_matmul_wsize(t, K, n) + 64);
    float *cy = malloc(sizeof(float) * (size_t)n * M);
    el_op_matmul(g_pool, &m, x->host, n, cy, NULL, ws);
    for (int r = 0; r < reps; r++) {
        const double t0 = now_ms(), c0 = cpu_ms();
        el_op_matmul(g_pool, &m, x->host, n, cy, NULL, ws);
        best_cpu = fmin(best_cpu, now_ms() - t0);
        cpu_cpu = fmin(cpu_cpu, cpu_ms() - c0);
    }
    /* and the two agree (the CPU's Q8 activations aside) */
    float *got = malloc(y->bytes);
    get(y, got);
    const float mx = maxabs(cy, (size_t)n * M);
    double worst = 0;
    for (size_t i = 0; i < (size_t)n * M; i++) worst = fmax(worst, fabs(got[i] - cy[i]) / mx);
    CHECKF(worst <= 0.03, "%s: %.3g", what, worst);
    printf("  n=%-2d %-30s %-5s %4dx%-6d: OpenCL %8.3f ms (cpu time %8.3f; %5.2f GB/s, %5.1f GFLOP/s)  CPU (%d "
           "threads) %8.3f ms (cpu time %8.3f)\n",
           n, what, el_type_name(t), K, M, best_ocl, cpu_ocl, rb * (double)M / (best_ocl * 1e6),
           2.0 * n * K * M / (best_ocl * 1e6), el_pool_size(g_pool), best_cpu, cpu_cpu);
    free(got);
    free(cy);
    free(ws);
    tensor_free(x);
    tensor_free(y);
    keep(w);
}

/* Decode attention (one query) at position pos over an F16 cache, OpenCL vs CPU. */
static void bench_attention(int hd, int n_head, int n_head_kv, int pos) {
    const int kvrow = n_head_kv * hd, rows = pos + 1;
    el_tensor *q = tensor(sizeof(float) * n_head * hd), *o = tensor(sizeof(float) * n_head * hd);
    el_tensor *k = tensor(sizeof(el_fp16) * (size_t)rows * kvrow), *v = tensor(sizeof(el_fp16) * (size_t)rows * kvrow);
    fill(q->host, (size_t)n_head * hd, 1.0f);
    el_fp16 *kh = k->host, *vh = v->host;
    for (size_t i = 0; i < (size_t)rows * kvrow; i++) {
        kh[i] = el_fp32_to_fp16(rndf());
        vh[i] = el_fp32_to_fp16(rndf());
    }
    put(q);
    put(k);
    put(v);
    el_attn_args a = {.n = 1, .pos0 = pos, .n_head = n_head, .n_head_kv = n_head_kv, .head_dim = hd,
                      .scale = 1.0f / sqrtf((float)hd)};
    el_op op = {.kind = EL_OPK_ATTENTION, .n = 1, .layer = 0};
    op.src[0] = ref(q, 0, q->bytes);
    op.dst[0] = ref(o, 0, o->bytes);
    op.src[1] = ref(k, 0, k->bytes);
    op.src[2] = ref(v, 0, v->bytes);
    op.p.attn.a = a;
    CHECK(run_op(&op) == 0);
    double best_ocl = 1e30, best_cpu = 1e30;
    for (int r = 0; r < 10; r++) {
        const double t0 = now_ms();
        CHECK(run_op(&op) == 0);
        best_ocl = fmin(best_ocl, now_ms() - t0);
    }
    float *cpu_out = malloc(o->bytes);
    el_attn_args ca = a;
    ca.q = q->host;
    ca.out = cpu_out;
    ca.kcache = kh;
    ca.vcache = vh;
    for (int r = 0; r < 10; r++) {
        const double t0 = now_ms();
        el_op_attention(g_pool, &ca);
        best_cpu = fmin(best_cpu, now_ms() - t0);
    }
    printf("  n=1 attention hd=%d heads=%d/%d at pos %d: OpenCL %8.3f ms  CPU (%d threads) %8.3f ms\n", hd, n_head,
           n_head_kv, pos, best_ocl, el_pool_size(g_pool), best_cpu);
    free(cpu_out);
    tensor_free(q);
    tensor_free(o);
    tensor_free(k);
    tensor_free(v);
}

static void test_speed(void) {
    bench_attention(256, 4, 1, 511);
    bench_case("ffn_down (Gemma 3 270M)", EL_TYPE_Q4_K, 2048, 640, 1);
    bench_case("attn_output", EL_TYPE_Q4_K, 1024, 640, 1);
    bench_case("ffn_gate/up", EL_TYPE_Q5_0, 640, 2048, 1);
    bench_case("ffn_down (Q6_K layers)", EL_TYPE_Q6_K, 2048, 640, 1);
    bench_case("ffn_down, 64-token prefill", EL_TYPE_Q4_K, 2048, 640, 64);
    bench_case("ffn_gate/up, 64-token prefill", EL_TYPE_Q5_0, 640, 2048, 64);
    if (EL_ASAN) {
        printf("  (output layer skipped under the sanitizers)\n");
        return;
    }
    bench_case("output (tied token_embd)", EL_TYPE_Q8_0, 640, 262144, 1);
}

/* Child mode (--no-platform): run with OCL_ICD_VENDORS naming an empty folder,
 * so the ICD loader finds no platform. */
static int no_platform_child(void) {
    el_error err = {0};
    const int n = el_backend_opencl_count();
    el_backend *be = el_backend_opencl_new(0, &err);
    printf("count=%d backend=%s msg=%s\n", n, be ? "yes" : "NULL", err.msg);
    el_backend_free(be);
    return n == 0 && !be && strstr(err.msg, "no OpenCL platform") ? 0 : 1;
}

static void test_no_platform(void) {
    char dir[] = "/tmp/el_ocl_novendorsXXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char old[512];
    snprintf(old, sizeof old, "%s", getenv("OCL_ICD_VENDORS") ? getenv("OCL_ICD_VENDORS") : "");
    setenv("OCL_ICD_VENDORS", dir, 1);
    el_test_proc r;
    const char *args[] = {"--no-platform", NULL};
    const bool ran = el_test_run_timeout("/proc/self/exe", args, 60, &r);
    if (old[0]) setenv("OCL_ICD_VENDORS", old, 1);
    else unsetenv("OCL_ICD_VENDORS");
    rmdir(dir);
    CHECK(ran);
    if (!ran) return;
    CHECKF(r.status == 0, "status %d: %s %s", r.status, r.out, r.err);
    printf("  no platform (OCL_ICD_VENDORS=<empty folder>): %s", r.out);
    el_test_proc_free(&r);
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--no-platform") == 0) return no_platform_child();
    const int ndev = el_backend_opencl_count();
    if (ndev == 0) el_test_skip_hw("no OpenCL device (el_backend_opencl_count() == 0)");
    /* the binary cache of every construction goes to a temp folder */
    char dir[] = "/tmp/el_ocl_mainXXXXXX";
    if (!mkdtemp(dir)) return 1;
    setenv("EL_OPENCL_CACHE_DIR", dir, 1);
    el_error err = {0};
    g_be = el_backend_opencl_new(0, &err);
    if (!g_be) {
        fprintf(stderr, "el_backend_opencl_new(0): %s\n", err.msg);
        return 1;
    }
    g_be->index = 1;
    el_opencl_info info;
    el_backend_opencl_info(g_be, &info);
    printf("device: %s [%s] kind %d, %llu MiB, %d device(s); cache key %s; matmul work-group %d; constants %s\n",
           g_be->caps.desc, g_be->caps.name, (int)g_be->caps.kind,
           (unsigned long long)(g_be->caps.mem_bytes >> 20), ndev, g_be->cache_key, info.mm_ls,
           info.host_ptr ? "used in place" : "copied");
    g_exact = info.exact;
    CHECK(strcmp(g_be->caps.name, "opencl0") == 0);
    CHECK(g_be->caps.matmul_types & (1ull << EL_TYPE_Q4_K));
    CHECK(g_be->caps.kv_types == (1u << EL_TYPE_F16));
    CHECK(!(g_be->caps.ops & (1u << EL_OPK_GET_ROWS)));
    g_pool = el_pool_new(2);
    g_pool1 = el_pool_new(1);

    const char *only = getenv("EL_OPENCL_TEST_ONLY"); /* "speed": just the speed section (tuning) */
    if (only && strcmp(only, "speed") == 0) {
        test_speed();
        goto out;
    }
    test_matmul();
    test_row_order();
    test_rmsnorm();
    test_rope();
    test_elementwise();
    test_kv_store();
    test_attention();
    test_refusals();
    test_measure();
    ulp_report();
    test_speed();
    test_construction();
    test_no_platform();

    /* constants copied instead of used in place: one matmul per type on a second backend */
    setenv("EL_OPENCL_COPY_CONST", "1", 1);
    el_backend *copy_be = el_backend_opencl_new(0, &err);
    unsetenv("EL_OPENCL_COPY_CONST");
    CHECKF(copy_be != NULL, "%s", err.msg);
    if (copy_be) {
        el_opencl_info ci;
        el_backend_opencl_info(copy_be, &ci);
        CHECK(!ci.host_ptr);
        el_backend *keep = g_be;
        copy_be->index = keep->index;
        g_be = copy_be;
        printf("constants copied to the device:\n");
        for (size_t ti = 0; ti < sizeof k_types / sizeof k_types[0]; ti++) matmul_case(k_types[ti], 7, 1, 256, true);
        g_be = keep;
        el_backend_free(copy_be);
    }

    /* the float path of a device without fp64 (forced with -DEL_NO_FP64): not exact, within the
     * absolute bounds */
    setenv("EL_OPENCL_BUILD_OPTIONS", "-DEL_NO_FP64", 1);
    el_backend *f32_be = el_backend_opencl_new(0, &err);
    unsetenv("EL_OPENCL_BUILD_OPTIONS");
    CHECKF(f32_be != NULL, "%s", err.msg);
    if (f32_be) {
        el_opencl_info fi;
        el_backend_opencl_info(f32_be, &fi);
        CHECK(!fi.exact);
        el_backend *keep = g_be;
        const bool keep_exact = g_exact;
        f32_be->index = keep->index;
        g_be = f32_be;
        g_exact = false;
        printf("without fp64 (-DEL_NO_FP64):\n");
        matmul_case(EL_TYPE_F16, 1, 1, 608, true);
        test_rmsnorm();
        test_attention();
        g_be = keep;
        g_exact = keep_exact;
        el_backend_free(f32_be);
    }

out:
    el_backend_free(g_be);
    el_pool_free(g_pool);
    el_pool_free(g_pool1);
    for (int i = 0; i < g_nkeep; i++) free(g_keep[i]);
    /* the temp cache folder */
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return el_test_finish("test_opencl_ops");
}
