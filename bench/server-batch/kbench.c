/*
 * kbench.c — a decode product alone, 1..8 activation rows, one thread:
 * what a batched decode step (runtime/batch.h) asks of the kernel per extra
 * stream. A K × N weight matrix of TYPE (Q4_0, Q5_0 or Q8_0; default Q4_0
 * 2048 × 16896, TinyLlama's gate+up+down worth of rows; Gemma 3's output
 * matrix is Q8_0 640 × 262144) of random quants and scales, activations of
 * random floats quantized to Q8_0 by the table's quantizer, y = W x through
 * the process's kernel table (el_cpu_kernels: the highest ISA level, or
 * EL_CPU_ISA) in 64-row calls as ops.c's decode does. Prints per row count
 * the best-of-REPS CPU time, the ratio to one row, and an FNV-1a hash of y
 * (the bits: equal across builds that keep the kernel's arithmetic, and the
 * same for each row whatever the row count, which it checks).
 *
 * With LAYOUT r16 (Q8_0 or Q4_0) the matrix is packed into layout.h's
 * EL_LAYOUT_Q8_0_R16 / EL_LAYOUT_Q4_0_R16 first and each product is one call
 * of the layout's kernel over all N rows (what ops.c hands a thread in
 * decode); its hashes equal the flat kernels' (for Q8_0: in the block
 * order, EL_KERNEL_ORDER=block).
 *
 * usage: kbench [K] [N] [REPS] [TYPE] [LAYOUT]
 * Contract: measures only; exit 1 if a row's output differs between row counts.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/cpu/kernels.h"
#include "backend/cpu/layout.h"
#include "package/quants_blocks.h"
#include "util/fp16.h"

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}
static uint64_t fnv(const void *p, size_t n) {
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}
static uint32_t rng = 12345;
static uint32_t rnd(void) { rng = rng * 1664525u + 1013904223u; return rng >> 8; }

int main(int argc, char **argv) {
    const int K = argc > 1 ? atoi(argv[1]) : 2048, N = argc > 2 ? atoi(argv[2]) : 16896, reps = argc > 3 ? atoi(argv[3]) : 5;
    const char *tn = argc > 4 ? argv[4] : "Q4_0";
    /* the block types with the fp16 scale first: random bytes, then a small random scale */
    const struct { const char *name; el_type type; size_t bytes; } types[] = {
        {"Q4_0", EL_TYPE_Q4_0, sizeof(block_q4_0)}, {"Q5_0", EL_TYPE_Q5_0, sizeof(block_q5_0)},
        {"Q8_0", EL_TYPE_Q8_0, sizeof(block_q8_0)}};
    int ti = -1;
    for (int i = 0; i < 3; i++)
        if (!strcmp(tn, types[i].name)) ti = i;
    if (K < 32 || K % 32 || N < 64 || N % 64 || reps < 1 || ti < 0) {
        fprintf(stderr, "usage: kbench [K%%32] [N%%64] [REPS] [Q4_0|Q5_0|Q8_0]\n");
        return 2;
    }
    const int r16 = argc > 5 && !strcmp(argv[5], "r16");
    const el_layout lay = types[ti].type == EL_TYPE_Q8_0 ? EL_LAYOUT_Q8_0_R16 : EL_LAYOUT_Q4_0_R16;
    if (r16 && types[ti].type != EL_TYPE_Q8_0 && types[ti].type != EL_TYPE_Q4_0) {
        fprintf(stderr, "kbench: layout r16 is for Q8_0 and Q4_0\n");
        return 2;
    }
    const el_cpu_type_kernels *kk = el_cpu_kernels(types[ti].type);
    const int TT = 8;
    const size_t bb = types[ti].bytes, ldw = (size_t)K / 32 * bb, ldx = (size_t)K / 32 * sizeof(block_q8_0);
    uint8_t *w = aligned_alloc(64, (ldw * N + 63) / 64 * 64);
    for (int r = 0; r < N; r++)
        for (int b = 0; b < K / 32; b++) {
            uint8_t *blk = w + ldw * r + bb * b;
            for (size_t i = 2; i < bb; i++) blk[i] = (uint8_t)rnd();
            const el_fp16 d = el_fp32_to_fp16(((int)(rnd() % 2001) - 1000) * 1e-5f);
            memcpy(blk, &d, sizeof d);
        }
    uint8_t *wp = NULL;
    el_layout_gemm_fn lg = NULL;
    if (r16) {
        const size_t pb = el_layout_bytes(lay, K, N);
        wp = aligned_alloc(64, (pb + 63) / 64 * 64);
        el_layout_pack(lay, w, ldw, K, N, wp);
        lg = el_cpu_layout_gemm(lay);
    }
    float *xf = malloc(sizeof(float) * K * TT);
    for (int i = 0; i < K * TT; i++) xf[i] = ((int)(rnd() % 20001) - 10000) * 1e-4f;
    uint8_t *xq = aligned_alloc(64, (ldx * TT + 63) / 64 * 64);
    for (int t = 0; t < TT; t++) kk->quantize(xf + (size_t)K * t, xq + ldx * t, K);
    float *y = malloc(sizeof(float) * (size_t)N * TT);
    double t1 = 0;
    int bad = 0;
    printf("%s %d x %d, one thread, best of %d (CPU time), kernel order %s, layout %s\n", tn, K, N, reps,
           el_cpu_order_name(el_cpu_kernels_order()), el_layout_name(r16 ? lay : EL_LAYOUT_FLAT));
    for (int nt = 1; nt <= TT; nt++) {
        double best = 1e30;
        for (int r = 0; r < reps; r++) {
            const double c0 = cpu_now();
            if (lg) lg(K, wp, N, xq, ldx, nt, y, (size_t)N, 0);
            else
                for (int r0 = 0; r0 < N; r0 += 64)
                    kk->gemm(K, w + ldw * r0, ldw, 64, xq, ldx, 0, nt, 1, y + r0, (size_t)N);
            const double c = cpu_now() - c0;
            if (c < best) best = c;
        }
        if (nt == 1) t1 = best;
        printf("  %d rows: %.3f ms  (%.2fx one row, %.2f per row)  y %016llx\n", nt, best * 1e3, best / t1, best / t1 / nt,
               (unsigned long long)fnv(y, sizeof(float) * (size_t)N * nt));
        /* each row of the nt-row product equals that row computed alone */
        for (int t = 0; t < nt; t++) {
            float *y1 = malloc(sizeof(float) * (size_t)N);
            if (lg) lg(K, wp, N, xq + ldx * t, ldx, 1, y1, (size_t)N, 0);
            else
                for (int r0 = 0; r0 < N; r0 += 64)
                    kk->gemm(K, w + ldw * r0, ldw, 64, xq + ldx * t, ldx, 0, 1, 1, y1 + r0, (size_t)N);
            if (memcmp(y1, y + (size_t)N * t, sizeof(float) * (size_t)N)) {
                printf("  row %d of %d differs from the same row alone\n", t, nt);
                bad = 1;
            }
            free(y1);
        }
    }
    free(w), free(wp), free(xf), free(xq), free(y);
    return bad;
}
