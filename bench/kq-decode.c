/*
 * kq-decode.c — the decode (one activation row) matrix-vector kernels of the
 * CPU table, alone: streams a weight matrix through the type's gemm entry in
 * 64-row calls (as the matmul driver hands them to a thread) on 1 or more
 * threads (each takes a contiguous share of the rows, as the driver splits
 * them), and prints GB/s of weights read. Two sizes: one far larger than the
 * caches (memory-bound) and one that stays in L2 (the kernel's own speed, one
 * thread each on its own copy). Random quants with moderate fp16 scales; fixed
 * seed. Q4_0, Q5_0, Q8_0, Q4_K, Q6_K at row length k (2048: TinyLlama's
 * attention and ffn_gate/up; 5632: its ffn_down; 640: Gemma 3 270M's rows and
 * its tied output matrix — the K-quants only run where k is a multiple of 256).
 *
 *   cc -O2 -Isrc -Iinclude bench/kq-decode.c build/libedgellm.a -lm -lpthread -o /tmp/kq-decode
 *   /tmp/kq-decode [reps] [big_MiB] [threads] [k] [types]   (EL_CPU_ISA=avx2 etc. lower the level as usual)
 *
 * types: a comma-separated subset of Q4_0,Q5_0,Q8_0,Q4_K,Q6_K (default all).
 *
 * Also the instruction count per weight byte, which is stable on a shared
 * machine: valgrind --tool=callgrind /tmp/kq-decode 1 64 (the gemm entries'
 * inclusive Ir ÷ the bytes printed; valgrind runs the AVX2 table). Not part
 * of `make test`.
 */
#include <pthread.h>
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

typedef struct {
    const el_cpu_type_kernels *kk;
    int k, rows, passes;
    const uint8_t *w;
    size_t ldw, ldx;
    const void *xq;
    float *y;
} share;

static void *run_share(void *v) {
    const share *s = v;
    for (int p = 0; p < s->passes; p++)
        for (int r = 0; r < s->rows; r += 64)
            s->kk->gemm(s->k, s->w + s->ldw * (size_t)r, s->ldw, s->rows - r < 64 ? s->rows - r : 64, s->xq, s->ldx, 0,
                        1, 1, s->y + r, (size_t)s->rows);
    return NULL;
}

/* rows split in nth contiguous shares of whole 64-row calls; w[t] != w[0]
 * gives each thread its own copy (the L2 case). */
static double run(const el_cpu_type_kernels *kk, int k, uint8_t *const *w, size_t ldw, int rows, int per_thread_copy,
                  const void *xq, size_t ldx, float *y, int passes, int nth) {
    share sh[16];
    pthread_t th[16];
    const int calls = (rows + 63) / 64;
    for (int t = 0; t < nth; t++) {
        const int c0 = per_thread_copy ? 0 : calls * t / nth, c1 = per_thread_copy ? calls : calls * (t + 1) / nth;
        const int r0 = 64 * c0, r1 = 64 * c1 < rows ? 64 * c1 : rows;
        sh[t] = (share){kk, k, r1 - r0, passes, (per_thread_copy ? w[t] : w[0]) + ldw * (size_t)r0, ldw, ldx, xq,
                        y + (size_t)(per_thread_copy ? rows * t : r0)};
    }
    const double t0 = now_s();
    for (int t = 1; t < nth; t++) pthread_create(&th[t], NULL, run_share, &sh[t]);
    run_share(&sh[0]);
    for (int t = 1; t < nth; t++) pthread_join(th[t], NULL);
    return now_s() - t0;
}

int main(int argc, char **argv) {
    const int reps = argc > 1 ? atoi(argv[1]) : 5;
    const size_t big = (size_t)(argc > 2 ? atoi(argv[2]) : 1024) << 20;
    int nth = argc > 3 ? atoi(argv[3]) : 1;
    const int k = argc > 4 ? atoi(argv[4]) : 2048;
    if (nth < 1 || nth > 16 || k <= 0 || k % 32) {
        fprintf(stderr, "usage: kq-decode [reps] [big_MiB] [threads 1..16] [k, a multiple of 32; of 256 for K-quants]\n");
        return 2;
    }
    static const el_type types[] = {EL_TYPE_Q4_0, EL_TYPE_Q5_0, EL_TYPE_Q8_0, EL_TYPE_Q4_K, EL_TYPE_Q6_K};
    printf("level %s, k = %d, %d thread(s), 64-row calls, one activation row\n", el_cpu_level_name(el_cpu_kernels_level()),
           k, nth);
    printf("%-6s %12s %12s\n", "type", "mem GB/s", "L2 GB/s");
    float *x = malloc(sizeof(float) * k);
    for (int i = 0; i < k; i++) x[i] = (float)((double)rnd() / 4294967296.0 * 2.0 - 1.0);
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const el_type t = types[ti];
        const el_cpu_type_kernels *kk = el_cpu_kernels(t);
        const el_type_info *inf = el_type_get(t);
        if (k % inf->blck_size) continue; /* K-quants: k a multiple of 256 */
        if (argc > 5) { /* only the types named */
            char list[256];
            snprintf(list, sizeof list, ",%s,", argv[5]);
            char name[32];
            snprintf(name, sizeof name, ",%s,", inf->name);
            if (!strstr(list, name)) continue;
        }
        const size_t ldw = el_row_size(t, k), ldx = el_row_size(kk->vec_dot_type, k);
        const int rows_big = (int)(big / ldw) / 64 * 64;
        int rows_small = (int)(((size_t)1 << 19) / ldw) / 64 * 64; /* 512 KiB a thread: in its L2 */
        if (rows_small < 64) rows_small = 64;
        uint8_t *w[16];
        w[0] = malloc(ldw * (size_t)rows_big);
        for (size_t i = 0; i < ldw * (size_t)rows_big; i++) w[0][i] = (uint8_t)rnd();
        for (size_t b = 0; b < ldw * (size_t)rows_big / inf->type_size; b++) fix_scales(t, w[0] + b * inf->type_size);
        for (int th = 0; th < nth; th++) w[th] = w[0] + (size_t)th * ldw * (size_t)rows_small; /* disjoint copies */
        void *xq = malloc(ldx);
        kk->quantize(x, xq, k);
        float *y = malloc(sizeof(float) * (size_t)(rows_big > nth * rows_small ? rows_big : nth * rows_small));
        double best_big = 1e30, best_small = 1e30;
        const int small_passes = (int)(((size_t)64 << 20) / (ldw * (size_t)rows_small));
        run(kk, k, w, ldw, rows_small, 1, xq, ldx, y, 1, nth);
        for (int r = 0; r < reps; r++) {
            const double a = run(kk, k, w, ldw, rows_big, 0, xq, ldx, y, 1, nth);
            const double s = run(kk, k, w, ldw, rows_small, 1, xq, ldx, y, small_passes, nth);
            if (a < best_big) best_big = a;
            if (s < best_small) best_small = s;
        }
        printf("%-6s %12.2f %12.2f\n", inf->name, (double)ldw * rows_big / best_big / 1e9,
               (double)ldw * rows_small * small_passes * nth / best_small / 1e9);
        free(w[0]);
        free(xq);
        free(y);
    }
    free(x);
    return 0;
}
