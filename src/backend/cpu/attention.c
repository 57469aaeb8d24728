/*
 * attention.c — attention over the F16 KV cache (see ops.h), in the
 * arithmetic of ggml's CPU flash-attention kernel.
 *
 * The portable kernel below is the specification; x86/attention_avx2.c and
 * x86/attention_avx512.c compute the same bits with F16C conversions and
 * vector FMAs. All three share the blocked driver of attention_impl.h. The
 * kernel is chosen once, from el_cpu_kernels_level() (so EL_CPU_ISA and
 * EL_FORCE_PORTABLE select it as they select the matmul kernels).
 * A one-token step over a long cache is split across it among the threads
 * (flash-decoding, attention_internal.h): each range keeps this arithmetic,
 * the ranges are combined as ggml's split-KV decode combines them.
 * Caches of another type (BF16, Q8_0, Q4_0) go to attention_typed.c, for
 * attention (el_op_attention) and for storing rows (el_op_kv_store_typed).
 */
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "backend/cpu/attention_internal.h"
#include "backend/cpu/attention_typed.h"
#include "backend/cpu/cpu_features.h"
#include "backend/cpu/kernel_common.h"
#include "backend/cpu/ops.h"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

/* ---- the portable kernel ------------------------------------------------- */

static inline void att_round_q(const float *q, float *qf, int hd) {
    for (int i = 0; i < hd; i++) qf[i] = el_fp16_to_fp32(el_fp32_to_fp16(q[i]));
}

/*
 * Q·K for one cache row, in the arithmetic order of ggml's F16 dot product
 * as llama.cpp's reference build runs it (x86-64, 16-lane vectors, 4
 * accumulators of 64 elements per step, then a fixed reduction tree; the
 * tail below a multiple of 64 summed in double). Keeping the order keeps the
 * attention scores bit-identical, which matters for models whose
 * distributions are peaked: llama.cpp's own variants of this kernel differ
 * by more than the parity tolerance on such models.
 */
static inline float att_dot(const el_fp16 *k, const float *qf, int n) {
    const int np = n & ~63;
    double sumf = 0.0;
    if (np > 0) {
        float acc[4][16];
        memset(acc, 0, sizeof acc);
        for (int i = 0; i < np; i += 64)
            for (int j = 0; j < 4; j++)
                for (int l = 0; l < 16; l++)
                    acc[j][l] = fmaf(el_fp16_to_fp32(k[i + j * 16 + l]), qf[i + j * 16 + l], acc[j][l]);
        for (int l = 0; l < 16; l++) {
            acc[0][l] += acc[2][l];
            acc[1][l] += acc[3][l];
        }
        for (int l = 0; l < 16; l++) acc[0][l] += acc[1][l];
        float t3[8], t6[4];
        for (int i = 0; i < 8; i++) t3[i] = acc[0][i + 8] + acc[0][i];
        for (int i = 0; i < 4; i++) t6[i] = t3[i + 4] + t3[i];
        sumf = (double)((t6[0] + t6[2]) + (t6[1] + t6[3]));
    }
    for (int i = np; i < n; i++) sumf += (double)(el_fp16_to_fp32(k[i]) * qf[i]);
    return (float)sumf;
}

static inline void att_scores(const el_fp16 *k, size_t kstride, int cnt, const float *qf, int hd, float scale,
                              float *sc) {
    for (int jj = 0; jj < cnt; jj++) sc[jj] = att_dot(k + (size_t)jj * kstride, qf, hd) * scale;
}

/*
 * The weighted sum of V is accumulated in an F16 vector, as ggml's kernel
 * does for an F16 cache: rescaled in F16 when the running maximum grows
 * (ms != 1), then acc = fp16(fma(v, vs, acc)) row after row.
 */
static inline void att_vpass(el_fp16 *acc, const el_fp16 *v, size_t vstride, int cnt, const float *ms,
                             const float *vs, int hd) {
    for (int jj = 0; jj < cnt; jj++, v += vstride) {
        if (ms[jj] != 1.0f)
            for (int i = 0; i < hd; i++) acc[i] = el_fp32_to_fp16(el_fp16_to_fp32(acc[i]) * ms[jj]);
        for (int i = 0; i < hd; i++) acc[i] = el_fp32_to_fp16(fmaf(el_fp16_to_fp32(v[i]), vs[jj], el_fp16_to_fp32(acc[i])));
    }
}

static inline void att_vpass2(el_fp16 *acc0, el_fp16 *acc1, const el_fp16 *v, size_t vstride, int cnt,
                              const float *ms0, const float *vs0, const float *ms1, const float *vs1, int hd) {
    att_vpass(acc0, v, vstride, cnt, ms0, vs0, hd);
    att_vpass(acc1, v, vstride, cnt, ms1, vs1, hd);
}

static inline void att_out(const el_fp16 *acc, float inv, float *o, int hd) {
    for (int i = 0; i < hd; i++) o[i] = el_fp16_to_fp32(acc[i]) * inv;
}

/*
 * One (token, head) pair is computed the way ggml's CPU flash-attention
 * kernel does for an F16 cache (llama.cpp's default on CPU): Q rounded to
 * F16, Q·K in float, an online softmax over positions in order, and the
 * weighted sum of V accumulated in an F16 vector, converted to float and
 * divided by the sum at the end. attention_impl.h walks the pairs in blocks.
 */
#define ATT_TASK el_attn_task_portable
#define EL_ATT_ATTR EL_CPU_CLONES
#include "backend/cpu/attention_impl.h"

/* ---- dispatch -------------------------------------------------------------- */

static el_cpu_level attn_level_cap(el_cpu_level level) {
#if defined(__x86_64__)
    const el_cpu_features *f = el_cpu_features_get();
    const int avx2 = f->avx2 && f->fma && f->f16c;
    const int avx512 = avx2 && f->avx512f && f->avx512bw && f->avx512vl && f->avx512dq;
    if (level == EL_CPU_AVX512 && avx512) return EL_CPU_AVX512;
    if ((level == EL_CPU_AVX512 || level == EL_CPU_AVX2) && avx2) return EL_CPU_AVX2;
#else
    (void)level;
#endif
    return EL_CPU_PORTABLE;
}

static el_pool_fn attn_split_for(el_cpu_level level) {
    switch (attn_level_cap(level)) {
#if defined(__x86_64__)
    case EL_CPU_AVX512: return el_attn_task_avx512_split;
    case EL_CPU_AVX2: return el_attn_task_avx2_split;
#endif
    default: return el_attn_task_portable_split;
    }
}

static el_pool_fn attn_task_for(el_cpu_level level) {
    switch (attn_level_cap(level)) {
#if defined(__x86_64__)
    case EL_CPU_AVX512: return el_attn_task_avx512;
    case EL_CPU_AVX2: return el_attn_task_avx2;
#endif
    default: return el_attn_task_portable;
    }
}

/* The tiled kernel (attention_tiled_impl.h), for batches of EL_ATT_TILE_Q+ tokens. */
static el_pool_fn attn_tiled_for(el_cpu_level level) {
    switch (attn_level_cap(level)) {
#if defined(__x86_64__)
    case EL_CPU_AVX512: return el_attn_tiled_avx512;
    case EL_CPU_AVX2: return el_attn_tiled_avx2;
#endif
    default: return el_attn_tiled_portable;
    }
}

typedef void (*f32_to_f16_fn)(const float *x, el_fp16 *y, int n);

static void f32_to_f16_portable(const float *x, el_fp16 *y, int n) {
    for (int i = 0; i < n; i++) y[i] = el_fp32_to_fp16(x[i]);
}

static f32_to_f16_fn f32_to_f16_for(el_cpu_level level) {
    switch (attn_level_cap(level)) {
#if defined(__x86_64__)
    case EL_CPU_AVX512: return el_fp32_to_fp16_row_avx512;
    case EL_CPU_AVX2: return el_fp32_to_fp16_row_avx2;
#endif
    default: return f32_to_f16_portable;
    }
}

static el_pool_fn g_attn, g_attn_tiled, g_attn_split;
static f32_to_f16_fn g_to_f16;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void init_attn(void) {
    const el_cpu_level lv = el_cpu_kernels_level();
    g_attn = attn_task_for(lv);
    g_attn_tiled = attn_tiled_for(lv);
    g_attn_split = attn_split_for(lv);
    g_to_f16 = f32_to_f16_for(lv);
}

/* The ranges in order, as ggml_flash_attn_ext_reduce_partials (attention_internal.h);
 * one range is the unsplit step: the accumulator times 1/S, as att_out. */
void el_attn_split_combine(const el_attn_args *a, const float *part, int n_chunk) {
    const int hd = a->head_dim;
    for (int h = 0; h < a->n_head; h++) {
        float *o = a->out + (size_t)h * hd;
        if (n_chunk == 1) {
            const float inv = part[(size_t)h * (hd + 2) + 1] == 0.0f ? 0.0f : 1.0f / part[(size_t)h * (hd + 2) + 1];
            for (int i = 0; i < hd; i++) o[i] = part[(size_t)h * (hd + 2) + 2 + i] * inv;
            continue;
        }
        float M = -INFINITY, S = 0.0f;
        memset(o, 0, sizeof(float) * (size_t)hd);
        for (int c = 0; c < n_chunk; c++) {
            const float *pc = part + ((size_t)h * n_chunk + c) * (size_t)(hd + 2);
            if (pc[1] == 0.0f) continue;
            const float Mn = fmaxf(M, pc[0]);
            const float so = expf(M - Mn), sn = expf(pc[0] - Mn);
            for (int i = 0; i < hd; i++) o[i] = o[i] * so + pc[2 + i] * sn;
            S = S * so + pc[1] * sn;
            M = Mn;
        }
        const float inv = S == 0.0f ? 0.0f : 1.0f / S;
        for (int i = 0; i < hd; i++) o[i] *= inv;
    }
}

/* A one-token step over a long cache: the ranges on the pool, then the combine. */
static void attn_split_run(el_pool *pool, const el_attn_args *a, int n_chunk, el_pool_fn task) {
    float part[EL_ATT_SPLIT_FLOATS];
    el_attn_split sp = {.a = a, .n_chunk = n_chunk, .part = part};
    el_pool_run(pool, task, &sp);
    el_attn_split_combine(a, part, n_chunk);
}

/*
 * llama.cpp runs its tiled flash-attention kernel for a micro-batch of 64 or
 * more query rows and the one-row kernel below that; edgellm's batches are
 * llama.cpp's micro-batches (n_batch = n_ubatch), so the same rows take the
 * same arithmetic. A one-token step over a cache view of 512+ cells is split
 * across the cache among the threads (attention_internal.h), as llama.cpp's
 * kernel splits it.
 */
/* Row order (el_op_matmul_row_order: speculative verification): each of a
 * few rows exactly as a one-token step computes it. The one-row kernel
 * already gives every row a decode step's bits unless that step would be
 * split across the cache (512+ cells, several threads): then every row runs
 * as its own step, so the verified tokens are the ones plain decoding picks.
 * Returns 1 when it ran the rows. */
static int attention_rows_as_steps(el_pool *pool, const el_attn_args *a, el_pool_fn split, el_pool_fn one) {
    if (a->n <= 1 || a->n >= EL_ATT_TILE_Q || !el_op_matmul_row_order_on()) return 0;
    el_attn_args last = *a;
    last.n = 1, last.pos0 = a->pos0 + a->n - 1;
    if (!el_attn_split_chunks(&last, el_pool_active(pool))) return 0; /* no row splits (the last sees the most) */
    const size_t row = (size_t)a->n_head * (size_t)a->head_dim;
    for (int r = 0; r < a->n; r++) {
        el_attn_args a1 = *a;
        a1.n = 1, a1.pos0 = a->pos0 + r, a1.q = a->q + (size_t)r * row, a1.out = a->out + (size_t)r * row;
        const int nc = el_attn_split_chunks(&a1, el_pool_active(pool));
        if (nc) attn_split_run(pool, &a1, nc, split);
        else el_pool_run(pool, one, &a1);
    }
    return 1;
}

void el_op_attention(el_pool *pool, const el_attn_args *a) {
    if (el_attn_is_typed(a)) { el_attn_typed(pool, a); return; } /* BF16/Q8_0/Q4_0 K or V: attention_typed.c */
    pthread_once(&g_once, init_attn);
    if (attention_rows_as_steps(pool, a, g_attn_split, g_attn)) return;
    const int nc = el_attn_split_chunks(a, el_pool_active(pool));
    if (nc) attn_split_run(pool, a, nc, g_attn_split);
    else el_pool_run(pool, a->n >= EL_ATT_TILE_Q ? g_attn_tiled : g_attn, (void *)a);
}

el_cpu_level el_op_attention_at(el_pool *pool, const el_attn_args *a, el_cpu_level level) {
    if (attention_rows_as_steps(pool, a, attn_split_for(level), attn_task_for(level))) return attn_level_cap(level);
    const int nc = el_attn_split_chunks(a, el_pool_active(pool));
    if (nc) attn_split_run(pool, a, nc, attn_split_for(level));
    else el_pool_run(pool, a->n >= EL_ATT_TILE_Q ? attn_tiled_for(level) : attn_task_for(level), (void *)a);
    return attn_level_cap(level);
}

void el_op_kv_store(el_fp16 *cache, const float *x, int n, int pos0, int row_len, int ring) {
    pthread_once(&g_once, init_attn);
    if (ring <= 0) {
        g_to_f16(x, cache + (size_t)pos0 * row_len, n * row_len); /* rows are contiguous */
        return;
    }
    const int r0 = pos0 % ring, n1 = r0 + n > ring ? ring - r0 : n; /* rows before the wrap */
    g_to_f16(x, cache + (size_t)r0 * row_len, n1 * row_len);
    if (n1 < n) g_to_f16(x + (size_t)n1 * row_len, cache, (n - n1) * row_len);
}

void el_op_kv_store_typed(int type, void *cache, const float *x, int n, int pos0, int row_len, int ring) {
    if (el_kv_is_f16(type)) el_op_kv_store(cache, x, n, pos0, row_len, ring);
    else el_attn_typed_store(type, cache, x, n, pos0, row_len, ring); /* BF16/Q8_0/Q4_0: attention_typed.c */
}

el_cpu_level el_op_kv_store_at(el_fp16 *cache, const float *x, int n, int pos0, int row_len, el_cpu_level level) {
    f32_to_f16_for(level)(x, cache + (size_t)pos0 * row_len, n * row_len);
    return attn_level_cap(level);
}
