/*
 * kq-decode.c — the decode (one activation row) matrix-vector kernels of the
 * CPU table, alone: streams a weight matrix through the type's gemm entry in
 * 64-row calls (as the matmul driver hands them to a thread) on one thread,
 * and prints GB/s of weights read. Two sizes: one far larger than the caches
 * (memory-bound) and one that stays in L2 (the kernel's own speed). Random
 * quants with moderate fp16 scales; fixed seed.
 *
 *   cc -O2 -Isrc -Iinclude bench/kq-decode.c build/libedgellm.a -lm -lpthread -o /tmp/kq-decode
 *   /tmp/kq-decode [reps] [big_MiB]       (EL_CPU_ISA=avx2 etc. lower the level as usual)
 *
 * Also the instruction count per weight byte, which is stable on a shared
 * machine: valgrind --tool=callgrind /tmp/kq-decode 1 64 (the gemm entries'
 * inclusive Ir ÷ the bytes printed). Not part of `make test`.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/cpu/kernels.h"
#include "package/quants_blocks.h"
#include "package/types.h"
#include "util/fp16.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

/* Offsets of the fp16 scales in a block (moderate values, no subnormals or NaN). */
static void fix_scales(el_type t, uint8_t *blk) {
    const el_fp16 d = el_fp32_to_fp16(0.01f + 0.001f * (float)(rnd() % 8)), m = el_fp32_to_fp16(0.02f);
    switch (t) {
    case EL_TYPE_Q4_K: memcpy(blk, &d, 2); memcpy(blk + 2, &m, 2); break;
    case EL_TYPE_Q6_K: memcpy(blk + offsetof(block_q6_K, d), &d, 2); break;
    default: memcpy(blk, &d, 2); break; /* Q4_0, Q8_0: d first */
    }
}

static double run(const el_cpu_type_kernels *kk, int k, const uint8_t *w, size_t ldw, int rows, const void *xq,
                  size_t ldx, float *y, int passes) {
    const double t0 = now_s();
    for (int p = 0; p < passes; p++)
        for (int r = 0; r < rows; r += 64)
            kk->gemm(k, w + ldw * (size_t)r, ldw, rows - r < 64 ? rows - r : 64, xq, ldx, 0, 1, 1, y + r, (size_t)rows);
    return now_s() - t0;
}

int main(int argc, char **argv) {
    const int reps = argc > 1 ? atoi(argv[1]) : 5;
    const size_t big = (size_t)(argc > 2 ? atoi(argv[2]) : 1024) << 20;
    const int k = 2048;
    static const el_type types[] = {EL_TYPE_Q4_0, EL_TYPE_Q8_0, EL_TYPE_Q4_K, EL_TYPE_Q6_K};
    printf("level %s, k = %d, one thread, 64-row calls, one activation row\n", el_cpu_level_name(el_cpu_kernels_level()), k);
    printf("%-6s %12s %12s\n", "type", "mem GB/s", "L2 GB/s");
    float *x = malloc(sizeof(float) * k);
    for (int i = 0; i < k; i++) x[i] = (float)((double)rnd() / 4294967296.0 * 2.0 - 1.0);
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const el_type t = types[ti];
        const el_cpu_type_kernels *kk = el_cpu_kernels(t);
        const el_type_info *inf = el_type_get(t);
        const size_t ldw = el_row_size(t, k), ldx = el_row_size(kk->vec_dot_type, k);
        const int rows_big = (int)(big / ldw) / 64 * 64, rows_small = (int)((1u << 20) / ldw) / 64 * 64;
        uint8_t *w = malloc(ldw * (size_t)rows_big);
        for (size_t i = 0; i < ldw * (size_t)rows_big; i++) w[i] = (uint8_t)rnd();
        for (size_t b = 0; b < ldw * (size_t)rows_big / inf->type_size; b++) fix_scales(t, w + b * inf->type_size);
        void *xq = malloc(ldx);
        kk->quantize(x, xq, k);
        float *y = malloc(sizeof(float) * (size_t)rows_big);
        double best_big = 1e30, best_small = 1e30;
        const int small_passes = (int)(((size_t)64 << 20) / (ldw * (size_t)rows_small));
        run(kk, k, w, ldw, rows_small, xq, ldx, y, 1);
        for (int r = 0; r < reps; r++) {
            const double a = run(kk, k, w, ldw, rows_big, xq, ldx, y, 1);
            const double s = run(kk, k, w, ldw, rows_small, xq, ldx, y, small_passes);
            if (a < best_big) best_big = a;
            if (s < best_small) best_small = s;
        }
        printf("%-6s %12.2f %12.2f\n", inf->name, (double)ldw * rows_big / best_big / 1e9,
               (double)ldw * rows_small * small_passes / best_small / 1e9);
        free(w);
        free(xq);
        free(y);
    }
    free(x);
    return 0;
}
