/*
 * test_quants_simd.c — the x86 kernels of the 32-element block formats
 * (src/backend/cpu/x86/quants_*.c) on the inputs test_kernels does not reach:
 *   - gemm calls larger than one work block (more than 64 weight rows or 64
 *     activation rows, so the kernels split them), with row counts that leave
 *     partial 8- and 16-row groups and lengths that leave a partial chunk;
 *   - extreme integer inputs: weights at the ends of their range (Q8_0 -128,
 *     all-15 / all-0 nibbles, every Q5 high bit set) against activations of
 *     ±127 of one sign, where an int16 intermediate would saturate if any
 *     bound in the kernels were wrong;
 *   - activation quantizer ties (x * 127/amax exactly k + 0.5: round half to
 *     even) and all-zero blocks.
 * Every result must have the portable kernel's bits (vec_dot per output).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/kernels.h"
#include "package/types.h"
#include "testutil.h"

static uint64_t rng = 0x243F6A8885A308D3ull;
static uint32_t rnd(void) { return el_test_rnd(&rng); }

static int same_bits(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

static const el_type k_types[] = {EL_TYPE_Q4_0, EL_TYPE_Q4_1, EL_TYPE_Q5_0, EL_TYPE_Q5_1, EL_TYPE_Q8_0, EL_TYPE_IQ4_NL,
                                  EL_TYPE_MXFP4};

/* Weight rows: mode 0 random bytes, 1 all bits set, 2 all quant bits clear, 3 Q8_0-style -128. Scales 1.0 or
 * random moderate halves; the min of Q4_1/Q5_1 likewise. */
static void fill_weights(el_type t, uint8_t *w, size_t row, int nrows, int mode) {
    const el_type_info *ti = el_type_get(t);
    const size_t bb = ti->type_size;
    for (size_t i = 0; i < row * (size_t)nrows; i++) {
        uint8_t v = (uint8_t)rnd();
        if (mode == 1) v = 0xFF;
        if (mode == 2) v = 0x00;
        if (mode == 3) v = 0x80;
        w[i] = v;
    }
    const size_t nblk = row * (size_t)nrows / bb;
    for (size_t b = 0; b < nblk; b++) {
        uint8_t *blk = w + b * bb;
        if (t == EL_TYPE_MXFP4) { /* E8M0: the extremes 0 and 0xFE (no NaN 0xFF) and moderate ones */
            const uint32_t r = rnd() % 8;
            blk[0] = r == 0 ? 0 : r == 1 ? 0xFE : (uint8_t)(120 + rnd() % 16);
            continue;
        }
        /* fp16 in [0.5, 2) with random mantissa, random sign: finite */
        const uint16_t d = (uint16_t)(0x3800 | (rnd() & 0x07FF) | (rnd() & 1 ? 0x8000 : 0));
        memcpy(blk, &d, 2);
        if (t == EL_TYPE_Q4_1 || t == EL_TYPE_Q5_1) {
            const uint16_t m = (uint16_t)(0x3400 | (rnd() & 0x07FF) | (rnd() & 1 ? 0x8000 : 0));
            memcpy(blk + 2, &m, 2);
        }
    }
}

/* Activations: mode 0 random floats with outliers, 1 all +1 (q = 127), 2 all -1 (q = -127), 3 ties/zeros. */
static void fill_acts(float *x, int n, int mode) {
    for (int i = 0; i < n; i++) {
        switch (mode) {
        case 0: x[i] = (float)((double)rnd() / 4294967296.0 * 2.0 - 1.0) * (i % 61 == 0 ? 30.0f : 1.0f); break;
        case 1: x[i] = 1.0f; break;
        case 2: x[i] = -1.0f; break;
        default: {
            /* block b: amax 127 at element 0, others k + 0.5 (exact ties at id = 1); every 3rd block zero */
            const int b = i / 32, j = i % 32;
            if (b % 3 == 2) x[i] = 0.0f;
            else if (j == 0) x[i] = b % 2 ? -127.0f : 127.0f;
            else x[i] = (float)((int)(rnd() % 253) - 126) + 0.5f;
        }
        }
    }
}

static void check_level(el_cpu_level lv, const el_cpu_type_kernels *isa, const el_cpu_type_kernels *por) {
    static const int lens[] = {32, 1056};
    static const int shapes[][2] = {/* nr, nt */ {150, 70}, {67, 1}, {131, 2}, {40, 5}};
    for (size_t ti = 0; ti < sizeof k_types / sizeof k_types[0]; ti++) {
        const el_type t = k_types[ti];
        const el_cpu_type_kernels *I = &isa[t], *P = &por[t];
        if (!memcmp(I, P, sizeof *I)) continue; /* no kernels of this level for the type */
        for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++)
            for (int wm = 0; wm < 4; wm++)
                for (int am = 0; am < 4; am++) {
                    const int k = lens[li];
                    const int nr = shapes[(wm + am) % 4][0], nt = shapes[(wm + am) % 4][1];
                    const size_t wrow = el_row_size(t, k), xrow = el_row_size(P->vec_dot_type, k);
                    uint8_t *w = malloc(wrow * (size_t)nr);
                    float *x = malloc(sizeof(float) * (size_t)k * (size_t)nt);
                    uint8_t *xp = malloc(xrow * (size_t)nt), *xi = malloc(xrow * (size_t)nt);
                    const size_t ldy = (size_t)nr + 5;
                    float *y = malloc(sizeof(float) * ldy * (size_t)nt);
                    fill_weights(t, w, wrow, nr, wm);
                    fill_acts(x, k * nt, am);
                    for (int a = 0; a < nt; a++) {
                        P->quantize(x + (size_t)a * k, xp + xrow * a, k);
                        I->quantize(x + (size_t)a * k, xi + xrow * a, k);
                    }
                    CHECKF(!memcmp(xp, xi, xrow * (size_t)nt), "%s %s k=%d act mode %d: quantized bytes differ",
                           el_cpu_level_name(lv), el_type_name(t), k, am);
                    for (size_t i = 0; i < ldy * (size_t)nt; i++) y[i] = -555.0f;
                    if (I->gemm) I->gemm(k, w, wrow, nr, xp, xrow, 0, nt, nt, y, ldy);
                    int bad = 0;
                    for (int a = 0; a < nt && !bad; a++)
                        for (int r = 0; r < nr; r++) {
                            float want, got;
                            P->vec_dot(k, &want, w + wrow * r, xp + xrow * a);
                            I->vec_dot(k, &got, w + wrow * r, xp + xrow * a);
                            CHECKF(same_bits(got, want), "%s %s vec_dot k=%d w%d a%d row %d act %d: %.9g vs %.9g",
                                   el_cpu_level_name(lv), el_type_name(t), k, wm, am, r, a, got, want);
                            if (I->gemm && !same_bits(y[(size_t)a * ldy + r], want)) {
                                CHECKF(0, "%s %s gemm k=%d nr=%d nt=%d w%d a%d row %d act %d: %.9g vs %.9g",
                                       el_cpu_level_name(lv), el_type_name(t), k, nr, nt, wm, am, r, a,
                                       y[(size_t)a * ldy + r], want);
                                bad = 1;
                                break;
                            }
                        }
                    if (I->gemm)
                        for (int a = 0; a < nt; a++)
                            for (size_t r = (size_t)nr; r < ldy; r++)
                                CHECKF(y[(size_t)a * ldy + r] == -555.0f, "%s %s gemm wrote outside its block",
                                       el_cpu_level_name(lv), el_type_name(t));
                    free(y);
                    free(xi);
                    free(xp);
                    free(x);
                    free(w);
                }
        printf("  %-8s %s checked%s\n", el_cpu_level_name(lv), el_type_name(t), I->gemm ? " (vec_dot, gemm)" : " (vec_dot)");
    }
}

int main(void) {
    static el_cpu_type_kernels por[EL_TYPE_COUNT], tab[EL_TYPE_COUNT];
    el_cpu_kernels_build(por, EL_CPU_PORTABLE, el_cpu_kernels_order());
    int levels = 0;
    for (int lv = EL_CPU_AVX2; lv <= EL_CPU_AVX512; lv++) {
        if (el_cpu_kernels_build(tab, (el_cpu_level)lv, el_cpu_kernels_order()) != (el_cpu_level)lv) continue;
        levels++;
        check_level((el_cpu_level)lv, tab, por);
    }
    if (!levels) el_test_skip_hw("no x86 SIMD level on this CPU/build");
    return el_test_finish("test_quants_simd");
}
