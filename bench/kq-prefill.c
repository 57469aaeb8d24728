/*
 * kq-prefill.c — the prefill matrix products of the CPU table, alone: an
 * N × K weight matrix of TYPE (random quants, moderate fp16 scales, fixed
 * seed) against T activation rows (random floats quantized by the table's
 * quantizer), through the type's gemm entry in 64-row calls of T tokens each,
 * as ops.c's prefill hands them to one thread (T = 64, or 256 where the
 * table's gemm asks for it: el_cpu_kernels_gemm_toks). One thread; prints
 * the best-of-REPS CPU time, GMAC/s (multiply-adds per second) and an
 * FNV-1a hash of the outputs (the bits: equal across builds that keep the
 * kernel's arithmetic, different between the two kernel orders).
 *
 *   cc -O2 -Isrc -Iinclude bench/kq-prefill.c build/libedgellm.a -lm -lpthread -o /tmp/kq-prefill
 *   /tmp/kq-prefill TYPE K N [REPS] [T]      (EL_KERNEL_ORDER, EL_CPU_ISA as usual)
 *
 * TYPE: Q4_0, Q5_0, Q8_0, Q4_K or Q6_K (K a multiple of 256 for the
 * K-quants). Qwen2.5-Coder 1.5B's shapes: K = 1,536 (attention, ffn_gate/up)
 * and 8,960 (ffn_down). Not part of `make test`.
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

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

static uint64_t fnv(const void *p, size_t n) {
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

int main(int argc, char **argv) {
    static const struct { const char *name; el_type type; size_t d_off, dmin_off; } types[] = {
        {"Q4_0", EL_TYPE_Q4_0, 0, 0}, {"Q5_0", EL_TYPE_Q5_0, 0, 0}, {"Q8_0", EL_TYPE_Q8_0, 0, 0},
        {"Q4_K", EL_TYPE_Q4_K, offsetof(block_q4_K, d), offsetof(block_q4_K, dmin)},
        {"Q6_K", EL_TYPE_Q6_K, offsetof(block_q6_K, d), offsetof(block_q6_K, d)}};
    int ti = -1;
    for (size_t i = 0; argc > 1 && i < sizeof types / sizeof types[0]; i++)
        if (!strcmp(argv[1], types[i].name)) ti = (int)i;
    const int k = argc > 2 ? atoi(argv[2]) : 0, n = argc > 3 ? atoi(argv[3]) : 0;
    const int reps = argc > 4 ? atoi(argv[4]) : 5;
    const el_type t = ti >= 0 ? types[ti].type : EL_TYPE_Q4_0;
    const int toks = el_cpu_kernels_gemm_toks(t) > 64 ? el_cpu_kernels_gemm_toks(t) : 64;
    const int nt = argc > 5 ? atoi(argv[5]) : toks;
    const el_type_info *inf = el_type_get(t);
    if (ti < 0 || k <= 0 || k % inf->blck_size || n < 64 || n % 64 || reps < 1 || nt < 1) {
        fprintf(stderr, "usage: kq-prefill Q4_0|Q5_0|Q8_0|Q4_K|Q6_K K N [REPS] [T]  (N a multiple of 64)\n");
        return 2;
    }
    const el_cpu_type_kernels *kk = el_cpu_kernels(t);
    if (!kk || !kk->gemm) {
        fprintf(stderr, "%s has no gemm at this level\n", types[ti].name);
        return 2;
    }
    const size_t ldw = el_row_size(t, k), ldx = el_row_size(kk->vec_dot_type, k);
    uint8_t *w = malloc(ldw * (size_t)n);
    for (size_t i = 0; i < ldw * (size_t)n; i++) w[i] = (uint8_t)rnd();
    for (size_t b = 0; b < ldw * (size_t)n / inf->type_size; b++) {
        uint8_t *blk = w + b * inf->type_size;
        const el_fp16 d = el_fp32_to_fp16(0.01f + 0.001f * (float)(rnd() % 8)), m = el_fp32_to_fp16(0.02f);
        memcpy(blk + types[ti].d_off, &d, sizeof d);
        if (types[ti].dmin_off != types[ti].d_off) memcpy(blk + types[ti].dmin_off, &m, sizeof m);
    }
    float *x = malloc(sizeof(float) * (size_t)k * nt);
    for (size_t i = 0; i < (size_t)k * nt; i++) x[i] = (float)((double)rnd() / 4294967296.0 * 2.0 - 1.0);
    uint8_t *xq = malloc(ldx * (size_t)nt);
    for (int a = 0; a < nt; a++) kk->quantize(x + (size_t)k * a, xq + ldx * a, k);
    float *y = malloc(sizeof(float) * (size_t)n * nt);
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        const double c0 = cpu_now();
        for (int r0 = 0; r0 < n; r0 += 64) kk->gemm(k, w + ldw * (size_t)r0, ldw, 64, xq, ldx, 0, nt, nt, y + r0, (size_t)n);
        const double c = cpu_now() - c0;
        if (c < best) best = c;
    }
    printf("%s k=%d n=%d, %d activation rows a call, %s, %s order: %.3f ms, %.1f GMAC/s, y %016llx\n",
           types[ti].name, k, n, nt, el_cpu_level_name(el_cpu_kernels_level()),
           el_cpu_order_name(el_cpu_kernels_order()), best * 1e3, (double)k * n * nt / best / 1e9,
           (unsigned long long)fnv(y, sizeof(float) * (size_t)n * nt));
    free(w), free(x), free(xq), free(y);
    return 0;
}
