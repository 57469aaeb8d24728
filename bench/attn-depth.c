/*
 * attn-depth.c — one decode step's attention over a long F16 cache, the
 * blocked kernel (el_attn_task_*) against the split decode (el_op_attention,
 * which takes the split from 512 visible positions), in the same process,
 * alternated, at the kernel level el_cpu_kernels_level() picks.
 *
 *   cc -O2 -Isrc -Iinclude bench/attn-depth.c build/libedgellm.a -lm -lpthread -o /tmp/attn-depth
 *   /tmp/attn-depth [threads] [reps] [shape] [depth] [split] [tokens]
 *
 * For each shape (Gemma 3 270M global layer: head_dim 256, 4 query heads on
 * 1 KV head; its sliding layer: the same heads, window 512 in a ring of 512
 * rows; TinyLlama: 64, 32 on 4) and depth (1k, 4k, 16k) it prints the
 * median µs per call of each path over `reps` alternated rounds, the ratio,
 * the largest |difference| of the outputs relative to the largest |out|,
 * each path's fastest call, and its median CPU time per call (all threads;
 * a call preempted on a loaded machine loses wall time, not CPU time).
 * `shape` (a prefix of a shape's name, "all" for every one) and `depth` (a
 * number, 0 for all) pick one case; `split` times only el_op_attention
 * (the path a decode step takes) — for callgrind, or for alternating the
 * binaries of two commits. `tokens` (default 1) > 1 times a batch of that
 * many query tokens at positions depth.. instead of one decode step
 * (64 and more: the tiled prefill kernel). Random K/V/Q, fixed seed. Not
 * part of `make test`.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/cpu/attention_internal.h"
#include "backend/cpu/threadpool.h"
#include "util/fp16.h"

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* CPU time of the whole process (all threads): on a loaded machine a call
 * preempted mid-way costs wall time but not CPU time. */
static double cpu_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp_d(const void *x, const void *y) {
    const double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float rndf(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

int main(int argc, char **argv) {
    const int threads = argc > 1 ? atoi(argv[1]) : 2;
    const int reps = argc > 2 ? atoi(argv[2]) : 21;
    const char *only = argc > 3 && strcmp(argv[3], "all") != 0 ? argv[3] : NULL;
    const int only_depth = argc > 4 ? atoi(argv[4]) : 0;
    const int split_only = argc > 5 && strcmp(argv[5], "split") == 0;
    const int ntok = argc > 6 && atoi(argv[6]) > 0 ? atoi(argv[6]) : 1;
    el_pool *pool = el_pool_new(threads > 0 ? threads : 1);
    if (!pool || reps < 1) return 1;
    const el_cpu_level lv = el_cpu_kernels_level();
    el_pool_fn blocked = el_attn_task_portable;
#if defined(__x86_64__)
    if (lv == EL_CPU_AVX512) blocked = el_attn_task_avx512;
    else if (lv == EL_CPU_AVX2) blocked = el_attn_task_avx2;
#endif
    static const struct { const char *name; int hd, nh, nkv, window; } shapes[] = {
        {"gemma3-270m global", 256, 4, 1, 0}, {"gemma3-270m sliding", 256, 4, 1, 512}, {"tinyllama", 64, 32, 4, 0}};
    static const int depths[] = {1024, 4096, 16384};
    printf("threads %d, level %s, %d alternated rounds, median µs per call\n", threads, el_cpu_level_name(lv), reps);
    printf("| shape | depth | KV MiB | blocked µs | split µs | blocked/split | max |Δ|/max|out| | blocked min µs | split min µs "
           "| blocked CPU µs | split CPU µs |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (size_t di = 0; di < sizeof depths / sizeof depths[0]; di++) {
            const int hd = shapes[s].hd, nh = shapes[s].nh, nkv = shapes[s].nkv, d = depths[di];
            const int win = shapes[s].window;
            if (only && strncmp(shapes[s].name, only, strlen(only)) != 0) continue;
            if (only_depth > 0 && d != only_depth) continue;
            if (win > 0 && ntok > win) continue;
            const size_t kvn = (size_t)(win > 0 ? win : d + ntok) * nkv * hd; /* a sliding layer: a ring of `win` rows */
            el_fp16 *k = malloc(kvn * sizeof *k), *v = malloc(kvn * sizeof *v);
            const size_t qn = (size_t)ntok * nh * hd;
            float *q = malloc(sizeof(float) * qn), *o1 = malloc(sizeof(float) * qn), *o2 = malloc(sizeof(float) * qn);
            double *t1 = malloc(sizeof(double) * reps), *t2 = malloc(sizeof(double) * reps);
            double *c1 = malloc(sizeof(double) * reps), *c2 = malloc(sizeof(double) * reps);
            if (!k || !v || !q || !o1 || !o2 || !t1 || !t2 || !c1 || !c2) return 1;
            for (size_t i = 0; i < kvn; i++) k[i] = el_fp32_to_fp16(rndf()), v[i] = el_fp32_to_fp16(rndf());
            for (size_t i = 0; i < qn; i++) q[i] = rndf() * 2.0f;
            el_attn_args a = {.q = q, .out = o1, .kcache = k, .vcache = v, .n = ntok, .pos0 = d, .n_head = nh,
                              .n_head_kv = nkv, .head_dim = hd, .window = win, .ring = win,
                              .scale = 1.0f / sqrtf((float)hd)};
            for (int r = 0; r < reps; r++) {
                a.out = o1;
                double x = now_us(), y = cpu_us();
                if (!split_only) el_pool_run(pool, blocked, &a);
                t1[r] = now_us() - x;
                c1[r] = cpu_us() - y;
                a.out = o2;
                x = now_us(), y = cpu_us();
                el_op_attention(pool, &a);
                t2[r] = now_us() - x;
                c2[r] = cpu_us() - y;
            }
            float mx = 0, md = 0;
            if (split_only) memcpy(o1, o2, sizeof(float) * qn);
            for (size_t i = 0; i < qn; i++) {
                if (fabsf(o1[i]) > mx) mx = fabsf(o1[i]);
                if (fabsf(o1[i] - o2[i]) > md) md = fabsf(o1[i] - o2[i]);
            }
            qsort(t1, reps, sizeof *t1, cmp_d);
            qsort(t2, reps, sizeof *t2, cmp_d);
            qsort(c1, reps, sizeof *c1, cmp_d);
            qsort(c2, reps, sizeof *c2, cmp_d);
            printf("| %s | %d | %.1f | %.0f | %.0f | %.2f× | %.2g | %.0f | %.0f | %.0f | %.0f |\n", shapes[s].name, d,
                   2.0 * kvn * sizeof(el_fp16) / 1048576.0, t1[reps / 2], t2[reps / 2], t1[reps / 2] / t2[reps / 2],
                   mx > 0 ? md / mx : md, t1[0], t2[0], c1[reps / 2], c2[reps / 2]);
            free(k), free(v), free(q), free(o1), free(o2), free(t1), free(t2), free(c1), free(c2);
        }
    el_pool_free(pool);
    return 0;
}
