/*
 * test_kernels.c — every ISA kernel gives the portable kernel's bits.
 *
 * The portable kernels are the arithmetic's specification (see
 * kernels_portable.c). So for each arithmetic order (kernels.h: llama.cpp's
 * vec_dot order and the block order of Q8_0/Q5_0), each instruction-set level
 * this CPU has (AVX2, AVX-512, NEON), and each weight type, the table
 * el_cpu_kernels_build gives must agree with the portable table bit for bit:
 *   - quantize: the activation bytes;
 *   - vec_dot: every (weight row, activation row) dot product;
 *   - select: the kernel chosen for each activation row of an n-row product;
 *   - gemm: every output of blocks of several shapes and offsets, against the
 *     portable vec_dot / select per output.
 * Weights are random blocks (scales kept finite), activations random floats
 * with a few outliers, at row lengths of 1, 2, 8 and 22 super-blocks (and 80
 * elements for the float types, whose kernels have tails past 64 or 32).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/kernels.h"
#include "package/quants_blocks.h"
#include "package/types.h"
#include "testutil.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) { return el_test_rnd(&rng); }
static float rndf(void) { return el_test_rndf(&rng); }

static int same_bits(float a, float b) {
    if (isnan(a) && isnan(b)) return 1;
    return memcmp(&a, &b, sizeof a) == 0;
}

/* Random weight blocks whose dequantized values are finite and moderate. */
static void random_weights(el_type t, uint8_t *w, int64_t nrows, int k) {
    const el_type_info *ti = el_type_get(t);
    const size_t bb = ti->type_size;
    const int64_t nb = (int64_t)k / ti->blck_size * nrows;
    float tmp[256];
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *blk = w + (size_t)b * bb;
        for (int attempt = 0;; attempt++) {
            for (size_t i = 0; i < bb; i++) blk[i] = (uint8_t)rnd();
            ti->to_float(blk, tmp, ti->blck_size);
            int ok = 1;
            for (int i = 0; i < (int)ti->blck_size; i++)
                if (!isfinite(tmp[i]) || fabsf(tmp[i]) > 1e4f) { ok = 0; break; }
            if (ok) break;
            if (attempt > 1000) { memset(blk, 0, bb); break; }
        }
    }
}

/* 80, 1000: float types only (tails past 64 and 32); 96: three blocks of the 32-element types (the
 * block-order vec_dot tails past groups of 4 blocks) */
static const int k_lengths[] = {80, 96, 256, 512, 1000, 2048, 5632};
#define N_ACT 13
#define N_W 37

static void check_type(el_type t, const el_cpu_type_kernels *isa, const el_cpu_type_kernels *por,
                       const char *level, int *n_checked) {
    const char *tn = el_type_name(t);
    for (size_t li = 0; li < sizeof k_lengths / sizeof k_lengths[0]; li++) {
        const int k = k_lengths[li];
        if (k % el_type_get(t)->blck_size) continue;
        const size_t wrow = el_row_size(t, k);
        uint8_t *w = malloc(wrow * N_W);
        random_weights(t, w, N_W, k);
        float *x = malloc(sizeof(float) * (size_t)k * N_ACT);
        for (int i = 0; i < k * N_ACT; i++) x[i] = rndf() * (i % 97 == 0 ? 40.0f : 1.0f);
        const size_t xrow = por->vec_dot_type == EL_TYPE_F32 ? sizeof(float) * (size_t)k
                                                              : el_row_size(por->vec_dot_type, k);
        uint8_t *xp = malloc(xrow * N_ACT), *xi = malloc(xrow * N_ACT);
        for (int a = 0; a < N_ACT; a++) {
            por->quantize(x + (size_t)a * k, xp + xrow * a, k);
            isa->quantize(x + (size_t)a * k, xi + xrow * a, k);
        }
        CHECKF(isa->vec_dot_type == por->vec_dot_type, "%s %s: vec_dot_type %d vs %d", level, tn,
               isa->vec_dot_type, por->vec_dot_type);
        CHECKF(memcmp(xp, xi, xrow * N_ACT) == 0, "%s %s k=%d: activation bytes differ", level, tn, k);

        /* reference: portable, per output, with the portable selector */
        float *ref = malloc(sizeof(float) * N_ACT * N_W * N_ACT); /* [n_act][a][r] */
        for (int n_act = 1; n_act <= N_ACT; n_act++)
            for (int a = 0; a < n_act; a++) {
                el_vec_dot_fn d = por->select ? por->select(n_act, a, k) : NULL;
                if (!d) d = por->vec_dot;
                for (int r = 0; r < N_W; r++)
                    d(k, &ref[((size_t)(n_act - 1) * N_ACT + a) * N_W + r], w + wrow * r, xp + xrow * a);
            }
        int bad = 0;
        /* vec_dot and select */
        for (int n_act = 1; n_act <= N_ACT && !bad; n_act++)
            for (int a = 0; a < n_act && !bad; a++) {
                el_vec_dot_fn d = isa->select ? isa->select(n_act, a, k) : NULL;
                if (!d) d = isa->vec_dot;
                for (int r = 0; r < N_W; r++) {
                    float s;
                    d(k, &s, w + wrow * r, xp + xrow * a);
                    const float want = ref[((size_t)(n_act - 1) * N_ACT + a) * N_W + r];
                    (*n_checked)++;
                    if (!same_bits(s, want)) {
                        CHECKF(0, "%s %s k=%d n_act=%d act %d row %d: %.9g vs portable %.9g", level, tn, k,
                               n_act, a, r, s, want);
                        bad = 1;
                        break;
                    }
                }
            }
        /* gemm blocks: several shapes and offsets */
        if (isa->gemm && !bad) {
            static const int shapes[][4] = {/* r0, nr, t0, nt */
                {0, 1, 0, 1}, {0, 37, 0, 1}, {3, 16, 0, 4}, {0, 37, 0, 13}, {5, 29, 2, 7},
                {0, 8, 4, 9}, {1, 35, 1, 12}, {0, 37, 8, 5}, {7, 3, 12, 1}};
            for (int n_act = 1; n_act <= N_ACT && !bad; n_act++)
                for (size_t si = 0; si < sizeof shapes / sizeof shapes[0] && !bad; si++) {
                    const int r0 = shapes[si][0], nr = shapes[si][1], t0 = shapes[si][2];
                    int nt = shapes[si][3];
                    if (t0 >= n_act) continue;
                    if (t0 + nt > n_act) nt = n_act - t0;
                    const size_t ldy = N_W + 3;
                    float y[N_ACT * (N_W + 3)];
                    for (size_t i = 0; i < sizeof y / sizeof y[0]; i++) y[i] = -777.0f;
                    isa->gemm(k, w + wrow * r0, wrow, nr, xp + xrow * t0, xrow, t0, nt, n_act, y, ldy);
                    for (int a = 0; a < nt && !bad; a++)
                        for (int r = 0; r < nr; r++) {
                            const float want = ref[((size_t)(n_act - 1) * N_ACT + t0 + a) * N_W + r0 + r];
                            (*n_checked)++;
                            if (!same_bits(y[a * ldy + r], want)) {
                                CHECKF(0, "%s %s gemm k=%d n_act=%d block(r0=%d nr=%d t0=%d nt=%d) act %d row %d: "
                                       "%.9g vs portable %.9g", level, tn, k, n_act, r0, nr, t0, nt, t0 + a, r0 + r,
                                       y[a * ldy + r], want);
                                bad = 1;
                                break;
                            }
                        }
                    /* nothing written outside the block */
                    for (int a = 0; a < nt; a++)
                        for (size_t r = (size_t)nr; r < ldy; r++)
                            CHECKF(y[a * ldy + r] == -777.0f, "%s %s gemm wrote outside its block", level, tn);
                }
        }
        free(ref);
        free(xp);
        free(xi);
        free(x);
        free(w);
    }
}

/* One arithmetic order (kernels.h, el_cpu_order): every ISA table against the portable one. */
static void check_order(el_cpu_order order) {
    static el_cpu_type_kernels por[EL_TYPE_COUNT], tab[EL_TYPE_COUNT];
    const el_cpu_level got_por = el_cpu_kernels_build(por, EL_CPU_PORTABLE, order);
    CHECK(got_por == EL_CPU_PORTABLE);
    for (int t = 0; t < EL_TYPE_COUNT; t++) {
        const el_cpu_type_kernels *p = el_cpu_kernels_portable((el_type)t);
        const el_cpu_type_kernels *pb = el_cpu_kernels_portable_block((el_type)t);
        if (order == EL_ORDER_BLOCK && pb) p = pb;
        CHECK(p ? memcmp(p, &por[t], sizeof *p) == 0 : por[t].vec_dot == NULL);
    }
    printf("order %s:\n", el_cpu_order_name(order));
    int levels_run = 0;
    for (int lv = EL_CPU_AVX2; lv <= EL_CPU_NEON; lv++) {
        const el_cpu_level got = el_cpu_kernels_build(tab, (el_cpu_level)lv, order);
        if (got != (el_cpu_level)lv) {
            printf("  %-8s not on this CPU (or no kernels for it in this build)\n", el_cpu_level_name((el_cpu_level)lv));
            continue;
        }
        levels_run++;
        printf("  %-8s", el_cpu_level_name((el_cpu_level)lv));
        int overridden = 0;
        for (int t = 0; t < EL_TYPE_COUNT; t++) {
            if (!por[t].vec_dot) continue;
            const int differs = memcmp(&tab[t], &por[t], sizeof tab[t]) != 0;
            if (!differs) continue;
            overridden++;
            int n = 0;
            const int before = el_test_failures;
            check_type((el_type)t, &tab[t], &por[t], el_cpu_level_name((el_cpu_level)lv), &n);
            printf(" %s(%d%s%s)", el_type_name(t), n, tab[t].gemm ? ",gemm" : "", el_test_failures == before ? "" : " FAIL");
        }
        printf("\n  %-8s %d types with ISA kernels\n", "", overridden);
    }
    if (!levels_run) printf("no ISA level beyond portable on this CPU/build: only the portable table checked\n");
}

/*
 * The two orders are two arithmetics: on random rows the Q8_0, Q5_0 and Q6_K
 * block-order dots differ from the llama-order ones in the last bits for some
 * rows (else the order switch would switch nothing), and stay within a
 * float rounding of the exact dot product (so the block order is a dot
 * product at all: both are checked against a double-precision sum).
 */
static void check_orders_differ(void) {
    static const el_type types[] = {EL_TYPE_Q8_0, EL_TYPE_Q5_0, EL_TYPE_Q6_K};
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const el_type t = types[ti];
        const el_cpu_type_kernels *pl = el_cpu_kernels_portable(t), *pb = el_cpu_kernels_portable_block(t);
        const el_type at = pl->vec_dot_type; /* Q8_0, or Q8_K for Q6_K */
        CHECKF(pb && pb->vec_dot != pl->vec_dot, "%s: no block-order kernel", el_type_name(t));
        if (!pb) continue;
        const int k = 2048, rows = 64;
        const size_t wrow = el_row_size(t, k), xrow = el_row_size(at, k);
        uint8_t *w = malloc(wrow * rows), *xq = malloc(xrow);
        float *x = malloc(sizeof(float) * k), *wf = malloc(sizeof(float) * k), *xf = malloc(sizeof(float) * k);
        random_weights(t, w, rows, k);
        for (int i = 0; i < k; i++) x[i] = rndf();
        pl->quantize(x, xq, k);
        if (at == EL_TYPE_Q8_K) { /* no to_float for the activation-only type: d * q */
            for (int i = 0; i < k; i++) {
                const block_q8_K *b = (const block_q8_K *)xq + i / EL_QK_K;
                xf[i] = b->d * (float)b->qs[i % EL_QK_K];
            }
        } else {
            el_type_get(at)->to_float(xq, xf, k);
        }
        int differ = 0;
        for (int r = 0; r < rows; r++) {
            float sl, sb;
            pl->vec_dot(k, &sl, w + wrow * r, xq);
            pb->vec_dot(k, &sb, w + wrow * r, xq);
            el_type_get(t)->to_float(w + wrow * r, wf, k);
            double exact = 0, mag = 0;
            for (int i = 0; i < k; i++) {
                exact += (double)wf[i] * xf[i];
                mag += fabs((double)wf[i] * xf[i]);
            }
            differ += !same_bits(sl, sb);
            CHECKF(fabs(sb - exact) <= 1e-5 * mag + 1e-30, "%s row %d: block order %.9g, exact %.9g", el_type_name(t), r,
                   sb, exact);
            CHECKF(fabs(sl - exact) <= 1e-5 * mag + 1e-30, "%s row %d: llama order %.9g, exact %.9g", el_type_name(t), r,
                   sl, exact);
        }
        printf("%s: %d of %d rows differ in bits between the orders\n", el_type_name(t), differ, rows);
        CHECKF(differ > 0, "%s: the two orders gave the same bits on every row", el_type_name(t));
        free(w), free(xq), free(x), free(wf), free(xf);
    }
}

int main(void) {
    printf("process table level: %s, order %s\n", el_cpu_level_name(el_cpu_kernels_level()),
           el_cpu_order_name(el_cpu_kernels_order()));
    check_order(EL_ORDER_LLAMA);
    check_order(EL_ORDER_BLOCK);
    check_orders_differ();
    return el_test_finish("test_kernels");
}
