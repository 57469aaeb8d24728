/*
 * test_kquants_x86.c — the edge cases of the SIMD K-quant kernels that random
 * data (test_kernels) does not reach, at every ISA level this CPU has:
 *  - the Q8_K activation quantizer on blocks with ties of opposite sign (the
 *    first value of largest magnitude sets the scale), zeros and -0, a single
 *    non-zero value, tiny (subnormal) and huge values, infinities and NaN:
 *    same bytes as the portable quantizer (el_quant_q8_k);
 *  - the range the integer kernels rely on: no quantized activation is -128
 *    (the AVX2 IQ4_XS kernel flips activation signs);
 *  - extreme quants: weight blocks of all-0xFF / all-0x00 / alternating bytes
 *    (largest quants and scales, so the largest int16 pair sums) against
 *    activations of +-127 everywhere: vec_dot, select and gemm give the
 *    portable kernel's bits;
 *  - the decode paths' edges (gemm with 1..4 activation rows): rows long
 *    enough that the Q4_K decode kernel's precomputed bsums pairs are full
 *    (64 super-blocks) or would overflow (65: the kernel must decline), and
 *    blocks of activation rows whose orders differ (the x4 and vec_dot
 *    orders in one call): the portable kernel's bits, per output;
 *  - the one-activation-row decode at row counts that are not a multiple of
 *    the 8-row groups (1..33 rows, short and long rows), with d, dmin and
 *    the packed scales different in every block of every row (a row or
 *    lane mixed up in the 8-row reduction changes an output), the outputs
 *    past the last row left alone;
 *  - prefill-sized gemm blocks (up to 64 weight rows, 17..290 activation
 *    rows at offsets that mix the x4 and vec_dot orders), across the
 *    kernels' row and activation tiles (the 16-row gemms take 256): the
 *    portable bits per output.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/kernels.h"
#include "package/quants.h"
#include "package/quants_blocks.h"
#include "package/types.h"
#include "testutil.h"

static const el_type k_types[] = {EL_TYPE_Q2_K, EL_TYPE_Q3_K, EL_TYPE_Q4_K,
                                  EL_TYPE_Q5_K, EL_TYPE_Q6_K, EL_TYPE_IQ4_XS};

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static uint32_t rnd(void) { return el_test_rnd(&rng); }
static float rndf(void) { return el_test_rndf(&rng); }

static int same_bits(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

/* Fills one 256-float block with case c (0..N_QCASES-1). */
#define N_QCASES 14
static void q_case(int c, float *x) {
    for (int j = 0; j < EL_QK_K; j++) x[j] = rndf();
    switch (c) {
    case 0: break;                                             /* plain */
    case 1: x[17] = 5.0f; x[200] = -5.0f; break;               /* tie, + first */
    case 2: x[3] = -5.0f; x[100] = 5.0f; x[255] = -5.0f; break; /* tie, - first */
    case 3: memset(x, 0, sizeof(float) * EL_QK_K); break;      /* zeros */
    case 4: for (int j = 0; j < EL_QK_K; j++) x[j] = -0.0f; break;
    case 5: memset(x, 0, sizeof(float) * EL_QK_K); x[255] = -3e-3f; break; /* one value */
    case 6: for (int j = 0; j < EL_QK_K; j++) x[j] *= 1e-41f; break;       /* subnormal */
    case 7: for (int j = 0; j < EL_QK_K; j++) x[j] *= 3e38f; break;        /* huge */
    case 8: x[77] = INFINITY; break;
    case 9: x[5] = -INFINITY; x[6] = INFINITY; break;
    case 10: x[128] = NAN; break;
    case 11: for (int j = 0; j < EL_QK_K; j++) x[j] = 1.0f; break;          /* all equal */
    case 12: for (int j = 0; j < EL_QK_K; j++) x[j] = (j & 1) ? -1.0f : 1.0f; break;
    case 13: for (int j = 0; j < EL_QK_K; j++) x[j] = (float)(j % 255) - 127.0f; break; /* every level */
    }
}

static void check_quantizer(const el_cpu_type_kernels *tab, const char *level) {
    float x[EL_QK_K * 2];
    block_q8_K want[2], got[2];
    for (size_t ti = 0; ti < sizeof k_types / sizeof k_types[0]; ti++) {
        const el_type t = k_types[ti];
        for (int c = 0; c < N_QCASES; c++) {
            q_case(c, x);
            q_case((c + 5) % N_QCASES, x + EL_QK_K); /* two blocks per row */
            memset(want, 0x5A, sizeof want);
            memset(got, 0xA5, sizeof got);
            el_quant_q8_k(x, want, 2 * EL_QK_K);
            tab[t].quantize(x, got, 2 * EL_QK_K);
            CHECKF(memcmp(want, got, sizeof want) == 0, "%s %s quantize case %d: bytes differ", level,
                   el_type_name(t), c);
            if (c != 10)
                for (int b = 0; b < 2; b++)
                    for (int j = 0; j < EL_QK_K; j++)
                        if (got[b].qs[j] < -127) {
                            CHECKF(0, "%s case %d: quantized activation %d", level, c, got[b].qs[j]);
                            break;
                        }
        }
    }
}

/* Weight rows of extreme bytes; the fp16 scales set to moderate values. */
static void extreme_weights(el_type t, uint8_t *w, int nrows, int k, int pattern) {
    const el_type_info *ti = el_type_get(t);
    const size_t bb = ti->type_size;
    const int nb = k / EL_QK_K * nrows;
    for (int b = 0; b < nb; b++) {
        uint8_t *blk = w + (size_t)b * bb;
        for (size_t i = 0; i < bb; i++) {
            switch ((pattern + b) % 4) {
            case 0: blk[i] = 0xFF; break;
            case 1: blk[i] = 0x00; break;
            case 2: blk[i] = (i & 1) ? 0xFF : 0x00; break;
            default: blk[i] = (uint8_t)rnd(); break;
            }
        }
        const el_fp16 d = el_fp32_to_fp16(0.01f + 0.001f * (float)(b % 7)), dm = el_fp32_to_fp16(0.02f);
        switch (t) {
        case EL_TYPE_Q2_K: memcpy(blk + offsetof(block_q2_K, d), &d, 2); memcpy(blk + offsetof(block_q2_K, dmin), &dm, 2); break;
        case EL_TYPE_Q3_K: memcpy(blk + offsetof(block_q3_K, d), &d, 2); break;
        case EL_TYPE_Q4_K: memcpy(blk + offsetof(block_q4_K, d), &d, 2); memcpy(blk + offsetof(block_q4_K, dmin), &dm, 2); break;
        case EL_TYPE_Q5_K: memcpy(blk + offsetof(block_q5_K, d), &d, 2); memcpy(blk + offsetof(block_q5_K, dmin), &dm, 2); break;
        case EL_TYPE_Q6_K: memcpy(blk + offsetof(block_q6_K, d), &d, 2); break;
        case EL_TYPE_IQ4_XS: memcpy(blk + offsetof(block_iq4_xs, d), &d, 2); break;
        default: break;
        }
    }
}

#define NW 19
#define NA 9
static void check_extremes(const el_cpu_type_kernels *tab, const el_cpu_type_kernels *por, const char *level) {
    const int k = 4 * EL_QK_K;
    float *x = malloc(sizeof(float) * (size_t)k * NA);
    /* activation rows of +-127 everywhere (and one mixed row) */
    for (int a = 0; a < NA; a++)
        for (int j = 0; j < k; j++) {
            float v;
            switch (a % 4) {
            case 0: v = 1.0f; break;                    /* -> all -127 */
            case 1: v = -1.0f; break;                   /* -> all +127 */
            case 2: v = (j & 1) ? 1.0f : -1.0f; break;  /* alternating */
            default: v = (j % 3) ? 1.0f : -0.5f; break;
            }
            x[(size_t)a * k + j] = v;
        }
    for (size_t ti = 0; ti < sizeof k_types / sizeof k_types[0]; ti++) {
        const el_type t = k_types[ti];
        const size_t wrow = el_row_size(t, k), xrow = el_row_size(EL_TYPE_Q8_K, k);
        uint8_t *w = malloc(wrow * NW), *xq = malloc(xrow * NA);
        for (int a = 0; a < NA; a++) por[t].quantize(x + (size_t)a * k, xq + xrow * a, k);
        for (int pattern = 0; pattern < 4; pattern++) {
            extreme_weights(t, w, NW, k, pattern);
            int bad = 0;
            for (int n_act = 1; n_act <= NA && !bad; n_act++) {
                float want[NA][NW], got[NA][NW + 1];
                for (int a = 0; a < n_act; a++) {
                    el_vec_dot_fn dp = por[t].select ? por[t].select(n_act, a, k) : NULL;
                    el_vec_dot_fn di = tab[t].select ? tab[t].select(n_act, a, k) : NULL;
                    if (!dp) dp = por[t].vec_dot;
                    if (!di) di = tab[t].vec_dot;
                    for (int r = 0; r < NW; r++) {
                        float s;
                        dp(k, &want[a][r], w + wrow * r, xq + xrow * a);
                        di(k, &s, w + wrow * r, xq + xrow * a);
                        if (!same_bits(s, want[a][r]) && !bad) {
                            CHECKF(0, "%s %s pattern %d n_act %d act %d row %d: %.9g vs portable %.9g", level,
                                   el_type_name(t), pattern, n_act, a, r, s, want[a][r]);
                            bad = 1;
                        }
                    }
                }
                if (tab[t].gemm && !bad) {
                    tab[t].gemm(k, w, wrow, NW, xq, xrow, 0, n_act, n_act, &got[0][0], NW + 1);
                    for (int a = 0; a < n_act && !bad; a++)
                        for (int r = 0; r < NW; r++)
                            if (!same_bits(got[a][r], want[a][r])) {
                                CHECKF(0, "%s %s gemm pattern %d n_act %d act %d row %d: %.9g vs %.9g", level,
                                       el_type_name(t), pattern, n_act, a, r, got[a][r], want[a][r]);
                                bad = 1;
                                break;
                            }
                }
                CHECK(!bad);
            }
        }
        free(w);
        free(xq);
    }
    free(x);
}

/* Random weights (moderate fp16 scales) and activations; gemm blocks of
 * 1..4 activation rows at offsets t0 of an n_act-row product. */
static void check_decode_edges(const el_cpu_type_kernels *tab, const el_cpu_type_kernels *por, const char *level) {
    static const int lens[] = {64 * EL_QK_K, 65 * EL_QK_K};
    static const int orders[][2] = {/* n_act, t0 */ {1, 0}, {2, 0}, {3, 0}, {4, 0}, {5, 3}, {6, 3}, {7, 4}, {9, 7}};
    static const el_type types[] = {EL_TYPE_Q4_K, EL_TYPE_Q6_K, EL_TYPE_Q2_K, EL_TYPE_Q5_K};
    const int nw = 21;
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        const int k = lens[li];
        float *x = malloc(sizeof(float) * (size_t)k * 9);
        for (int i = 0; i < k * 9; i++) x[i] = rndf();
        for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
            const el_type t = types[ti];
            if (!tab[t].gemm) continue; /* the portable table: vec_dot per output */
            const size_t wrow = el_row_size(t, k), xrow = el_row_size(EL_TYPE_Q8_K, k);
            uint8_t *w = malloc(wrow * nw), *xq = malloc(xrow * 9);
            extreme_weights(t, w, nw, k, 3); /* pattern 3 + b: every kind of block along the row */
            for (int a = 0; a < 9; a++) por[t].quantize(x + (size_t)a * k, xq + xrow * a, k);
            int bad = 0;
            for (size_t oi = 0; oi < sizeof orders / sizeof orders[0] && !bad; oi++) {
                const int n_act = orders[oi][0], t0 = orders[oi][1];
                for (int nt = 1; nt <= 4 && t0 + nt <= n_act && !bad; nt++) {
                    float got[4][24];
                    for (int a = 0; a < 4; a++)
                        for (int r = 0; r < 24; r++) got[a][r] = -777.0f;
                    tab[t].gemm(k, w, wrow, nw, xq + xrow * t0, xrow, t0, nt, n_act, &got[0][0], 24);
                    for (int a = 0; a < nt && !bad; a++) {
                        el_vec_dot_fn dp = por[t].select ? por[t].select(n_act, t0 + a, k) : NULL;
                        if (!dp) dp = por[t].vec_dot;
                        for (int r = 0; r < 24 && !bad; r++) {
                            if (r >= nw) {
                                CHECKF(got[a][r] == -777.0f, "%s %s decode gemm wrote outside its block", level,
                                       el_type_name(t));
                                continue;
                            }
                            float want;
                            dp(k, &want, w + wrow * r, xq + xrow * (t0 + a));
                            if (!same_bits(got[a][r], want)) {
                                CHECKF(0, "%s %s k=%d n_act %d t0 %d nt %d act %d row %d: %.9g vs portable %.9g",
                                       level, el_type_name(t), k, n_act, t0, nt, t0 + a, r, got[a][r], want);
                                bad = 1;
                            }
                        }
                    }
                }
            }
            CHECK(!bad);
            free(w);
            free(xq);
        }
        free(x);
    }
}

/* Prefill-sized gemm blocks (as ops.c hands them: up to 64 weight rows,
 * 64 or 256 activation rows): tiles of weight and activation rows that do
 * not divide the block (the x86-order gemm walks KQ_XO_RG x KQ_XO_TA tiles,
 * Q4_K 16-row groups and KQ_TT activation rows), offsets t0 that mix the x4
 * and vec_dot orders: the portable bits per output, nothing written outside. */
static void check_prefill_tiles(const el_cpu_type_kernels *tab, const el_cpu_type_kernels *por, const char *level) {
    static const int shapes[][4] = {/* nr, t0, nt, n_act */ {64, 0, 64, 64}, {37, 0, 17, 17}, {50, 5, 33, 40},
                                    {64, 64, 70, 134}, {19, 1, 130, 131}, {21, 3, 290, 297}};
    const int k = 2 * EL_QK_K, na = 297, nw = 64, ldy = nw + 3;
    float *x = malloc(sizeof(float) * (size_t)k * na), *y = malloc(sizeof(float) * (size_t)ldy * na);
    for (int i = 0; i < k * na; i++) x[i] = rndf();
    for (size_t ti = 0; ti < sizeof k_types / sizeof k_types[0]; ti++) {
        const el_type t = k_types[ti];
        if (!tab[t].gemm) continue;
        const size_t wrow = el_row_size(t, k), xrow = el_row_size(EL_TYPE_Q8_K, k);
        uint8_t *w = malloc(wrow * nw), *xq = malloc(xrow * na);
        extreme_weights(t, w, nw, k, 3);
        for (int a = 0; a < na; a++) por[t].quantize(x + (size_t)a * k, xq + xrow * a, k);
        int bad = 0;
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0] && !bad; si++) {
            const int nr = shapes[si][0], t0 = shapes[si][1], nt = shapes[si][2], n_act = shapes[si][3];
            for (int i = 0; i < ldy * na; i++) y[i] = -777.0f;
            tab[t].gemm(k, w, wrow, nr, xq + xrow * t0, xrow, t0, nt, n_act, y, (size_t)ldy);
            for (int a = 0; a < na && !bad; a++) {
                el_vec_dot_fn dp = por[t].select ? por[t].select(n_act, t0 + a, k) : NULL;
                if (!dp) dp = por[t].vec_dot;
                for (int r = 0; r < ldy && !bad; r++) {
                    const float got = y[(size_t)a * ldy + r];
                    if (a >= nt || r >= nr) {
                        if (got != -777.0f) {
                            CHECKF(0, "%s %s prefill gemm nr %d nt %d wrote outside its block (act %d row %d)", level,
                                   el_type_name(t), nr, nt, a, r);
                            bad = 1;
                        }
                        continue;
                    }
                    float want;
                    dp(k, &want, w + wrow * r, xq + xrow * (t0 + a));
                    if (!same_bits(got, want)) {
                        CHECKF(0, "%s %s prefill gemm nr %d t0 %d nt %d n_act %d act %d row %d: %.9g vs portable %.9g",
                               level, el_type_name(t), nr, t0, nt, n_act, t0 + a, r, got, want);
                        bad = 1;
                    }
                }
            }
        }
        CHECK(!bad);
        free(w);
        free(xq);
    }
    free(x);
    free(y);
}

/* One activation row, nr weight rows (the 8-row groups and the rows left
 * over), every block's scales random: the portable bits per output. */
static void check_decode_rows(const el_cpu_type_kernels *tab, const el_cpu_type_kernels *por, const char *level) {
    static const int lens[] = {1, 2, 8, 22};
    static const int nrs[] = {1, 3, 7, 8, 9, 15, 16, 17, 24, 33};
    static const el_type types[] = {EL_TYPE_Q4_K, EL_TYPE_Q6_K};
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const el_type t = types[ti];
        if (!tab[t].gemm) continue;
        for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
            const int k = lens[li] * EL_QK_K;
            const size_t wrow = el_row_size(t, k), xrow = el_row_size(EL_TYPE_Q8_K, k);
            float *x = malloc(sizeof(float) * (size_t)k);
            for (int i = 0; i < k; i++) x[i] = rndf();
            void *xq = malloc(xrow);
            por[t].quantize(x, xq, k);
            int bad = 0;
            for (size_t ni = 0; ni < sizeof nrs / sizeof nrs[0] && !bad; ni++) {
                const int nr = nrs[ni];
                uint8_t *w = malloc(wrow * (size_t)nr); /* exact size: an over-read shows under ASan */
                for (size_t i = 0; i < wrow * (size_t)nr; i++) w[i] = (uint8_t)rnd();
                const el_type_info *inf = el_type_get(t);
                for (size_t b = 0; b < wrow * (size_t)nr / inf->type_size; b++) {
                    uint8_t *blk = w + b * inf->type_size;
                    const el_fp16 d = el_fp32_to_fp16(0.001f + 0.0001f * (float)(rnd() % 400));
                    const el_fp16 dm = el_fp32_to_fp16(0.001f + 0.0001f * (float)(rnd() % 400));
                    if (t == EL_TYPE_Q4_K) {
                        memcpy(blk + offsetof(block_q4_K, d), &d, 2);
                        memcpy(blk + offsetof(block_q4_K, dmin), &dm, 2);
                    } else {
                        memcpy(blk + offsetof(block_q6_K, d), &d, 2);
                    }
                }
                float got[33 + 8];
                for (int r = 0; r < nr + 8; r++) got[r] = -777.0f;
                tab[t].gemm(k, w, wrow, nr, xq, xrow, 0, 1, 1, got, (size_t)nr);
                for (int r = 0; r < nr + 8 && !bad; r++) {
                    if (r >= nr) {
                        CHECKF(got[r] == -777.0f, "%s %s decode nr %d wrote past its rows", level, el_type_name(t), nr);
                        continue;
                    }
                    float want;
                    por[t].vec_dot(k, &want, w + wrow * (size_t)r, xq);
                    if (!same_bits(got[r], want)) {
                        CHECKF(0, "%s %s decode k=%d nr %d row %d: %.9g vs portable %.9g", level, el_type_name(t), k, nr,
                               r, got[r], want);
                        bad = 1;
                    }
                }
                free(w);
            }
            CHECK(!bad);
            free(x);
            free(xq);
        }
    }
}

int main(void) {
    static el_cpu_type_kernels por[EL_TYPE_COUNT], tab[EL_TYPE_COUNT];
    el_cpu_kernels_build(por, EL_CPU_PORTABLE, el_cpu_kernels_order());
    int levels = 0;
    for (int lv = EL_CPU_PORTABLE; lv <= EL_CPU_NEON; lv++) {
        if (el_cpu_kernels_build(tab, (el_cpu_level)lv, el_cpu_kernels_order()) != (el_cpu_level)lv) continue;
        const char *name = el_cpu_level_name((el_cpu_level)lv);
        const int before = el_test_failures;
        check_quantizer(tab, name);
        check_extremes(tab, por, name);
        check_decode_edges(tab, por, name);
        check_decode_rows(tab, por, name);
        check_prefill_tiles(tab, por, name);
        printf("  %-8s %s\n", name, el_test_failures == before ? "ok" : "FAIL");
        levels++;
    }
    CHECK(levels >= 1);
    return el_test_finish("test_kquants_x86");
}
