/*
 * attention_internal.h — what attention.c shares with its instruction-set
 * variants (x86/attention_avx2.c, x86/attention_avx512.c) and the tests:
 * the work plan of the blocked kernel (attention_impl.h) and the kernels.
 */
#ifndef EL_BACKEND_CPU_ATTENTION_INTERNAL_H
#define EL_BACKEND_CPU_ATTENTION_INTERNAL_H

#include <math.h>

#include "backend/cpu/attention_common.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/ops.h"

/* EL_ATT_MAX_HD, the head_dim limit, and el_attn_lo: attention_common.h */
#define EL_ATT_MAX_QHD 8192   /* queries per work unit × head_dim (state on the stack: 48 KiB) */
#define EL_ATT_MAX_Q 64       /* queries per work unit */
#define EL_ATT_MAX_KVB 64     /* cache rows per block */
#define EL_ATT_TILE_Q 64      /* batches of this many query tokens or more take the tiled kernel */
#define EL_ATT_TILE_KV 64     /* positions per tile of the tiled kernel */
#define EL_ATT_GROUP 8        /* most query heads of a KV head advanced together over each K/V row (one-row kernel) */

/* Cache rows per block: K and V of a block take about 16 KiB (half of L1d). */
static inline int el_attn_kv_block(int hd) {
    int b = 16384 / (hd * 4);
    return b < 8 ? 8 : b > EL_ATT_MAX_KVB ? EL_ATT_MAX_KVB : b;
}

/*
 * A work unit: tb query tokens × hpu query heads of one KV head. Units are
 * numbered token block outermost, then KV head, then head block, and thread
 * ith takes units ith, ith + nth, … (the causal triangle's later rows cost
 * more; interleaving balances them). Units are made smaller until there are
 * at least two per thread (decode of a model with one KV head splits heads).
 */
typedef struct el_attn_plan {
    int tb, hpu;        /* tokens and heads per unit */
    int n_hb, n_units;  /* head blocks per KV head, units in all */
} el_attn_plan;

static inline void el_attn_plan_make(const el_attn_args *a, int nth, el_attn_plan *pl) {
    const int group = a->n_head / a->n_head_kv;
    int qmax = EL_ATT_MAX_QHD / a->head_dim;
    if (qmax > EL_ATT_MAX_Q) qmax = EL_ATT_MAX_Q;
    if (qmax < 1) qmax = 1; /* head_dim <= EL_ATT_MAX_HD keeps one query's state in the buffers */
    int hpu = group < qmax ? group : qmax;
    int tb = qmax / hpu;
    if (tb > a->n) tb = a->n;
    if (tb < 1) tb = 1;
    for (;;) {
        pl->tb = tb;
        pl->hpu = hpu;
        pl->n_hb = (group + hpu - 1) / hpu;
        pl->n_units = (a->n + tb - 1) / tb * a->n_head_kv * pl->n_hb;
        if (pl->n_units >= 2 * nth || (tb == 1 && hpu == 1)) break;
        if (tb > 1) tb = (tb + 1) / 2;
        else hpu = (hpu + 1) / 2;
    }
}

/* Work unit u of a plan: query tokens [t0, t1) × query heads [h0, h1), all of KV head kvh. */
typedef struct el_attn_unit { int t0, t1, h0, h1, kvh; } el_attn_unit;

static inline el_attn_unit el_attn_unit_of(const el_attn_args *a, const el_attn_plan *pl, int u) {
    const int group = a->n_head / a->n_head_kv;
    el_attn_unit w;
    const int hb = u % pl->n_hb; /* token block outermost, then KV head, then head block */
    w.kvh = (u / pl->n_hb) % a->n_head_kv;
    const int tbi = u / (pl->n_hb * a->n_head_kv);
    w.t0 = tbi * pl->tb;
    w.t1 = w.t0 + pl->tb < a->n ? w.t0 + pl->tb : a->n;
    w.h0 = w.kvh * group + hb * pl->hpu;
    w.h1 = w.h0 + pl->hpu < (w.kvh + 1) * group ? w.h0 + pl->hpu : (w.kvh + 1) * group;
    return w;
}

/*
 * Split decode (flash-decoding), as llama.cpp's CPU kernel splits a
 * one-token step: with nth threads and a cache view of n_kv cells (the
 * visible positions rounded up to 256, as llama_kv_cache::get_n_kv pads),
 * n_kv >= 512 cuts the cells into nth ranges of ceil(n_kv / nth); each
 * range runs the one-row arithmetic from a fresh state over its visible
 * positions and the ranges are combined in order as
 * ggml_flash_attn_ext_reduce_partials does: M' = max(M, Mc),
 * a = exp(M - M'), b = exp(Mc - M'), O = O·a + Oc·b, S = S·a + Sc·b, then
 * O · (1/S) (a range with S = 0 is skipped). So a step gives llama.cpp's
 * bits for the same thread count, and, like llama.cpp's, depends on it.
 * A sliding-window ring (its cells are not positions) is cut into nth
 * near-equal ranges of its visible positions from 512 of them.
 *
 * A work unit is one range × every query head of the KV heads whose state
 * fits (EL_ATT_MAX_QHD, EL_ATT_MAX_Q: all of them for the usual shapes),
 * walked block by block with every KV head, so each cache row is read once
 * per step (the blocked plan splits the heads of a model with few KV heads
 * across units, each reading the whole cache). On one thread the
 * step is one range: the blocked kernel's bits, the cache read once.
 * Limits: at most EL_ATT_SPLIT_MAX_CHUNKS ranges, the partials within
 * EL_ATT_SPLIT_FLOATS (the caller's stack), a KV head's query state within a
 * unit; otherwise the blocked kernel runs.
 */
#define EL_ATT_SPLIT_MIN 512      /* cells (llama.cpp: nek1 >= 512) */
#define EL_ATT_SPLIT_PAD 256      /* llama.cpp's KV view padding */
#define EL_ATT_SPLIT_ONE 256      /* one thread: one range from this many visible positions */
#define EL_ATT_SPLIT_MAX_CHUNKS 16
#define EL_ATT_SPLIT_FLOATS 16384 /* partials on the caller's stack: 64 KiB */

typedef struct el_attn_split {
    const el_attn_args *a;
    int n_chunk; /* ranges */
    float *part; /* [query head][range][2 + head_dim]: M, S, the F16 accumulator as float */
} el_attn_split;

/* Ranges for the split decode of a on nth threads, or 0: the blocked kernel. */
static inline int el_attn_split_chunks(const el_attn_args *a, int nth) {
    if (a->n != 1 || a->n_head_kv <= 0 || a->n_head % a->n_head_kv || nth < 1) return 0;
    const int lo = el_attn_lo(a->pos0, a->window), len = a->pos0 - lo + 1;
    const int group = a->n_head / a->n_head_kv;
    if (group > EL_ATT_MAX_Q || group * a->head_dim > EL_ATT_MAX_QHD) return 0;
    if (nth == 1) return len >= EL_ATT_SPLIT_ONE ? 1 : 0;
    const int n_kv = (a->pos0 + EL_ATT_SPLIT_PAD) / EL_ATT_SPLIT_PAD * EL_ATT_SPLIT_PAD;
    if ((a->ring > 0 || a->window > 0 ? len : n_kv) < EL_ATT_SPLIT_MIN) return 0;
    if (nth > EL_ATT_SPLIT_MAX_CHUNKS || nth * a->n_head * (a->head_dim + 2) > EL_ATT_SPLIT_FLOATS) return 0;
    return nth;
}

/* Visible positions [*j0, *j1) of range c of nc (possibly empty). */
static inline void el_attn_split_range(const el_attn_args *a, int nc, int c, int *j0, int *j1) {
    const int lo = el_attn_lo(a->pos0, a->window), len = a->pos0 - lo + 1;
    if (a->ring > 0 || a->window > 0) { /* a sliding layer: the same ranges whether its cache is a ring or flat */
        const int per = len / nc, rem = len % nc;
        *j0 = lo + c * per + (c < rem ? c : rem);
        *j1 = *j0 + per + (c < rem ? 1 : 0);
        return;
    }
    const int n_kv = (a->pos0 + EL_ATT_SPLIT_PAD) / EL_ATT_SPLIT_PAD * EL_ATT_SPLIT_PAD;
    const int cs = (n_kv + nc - 1) / nc;
    *j0 = c * cs > lo ? c * cs : lo;
    *j1 = (c + 1) * cs < a->pos0 + 1 ? (c + 1) * cs : a->pos0 + 1;
    if (*j1 < *j0) *j1 = *j0;
}

/* The kernels (el_pool_fn on an el_attn_args); same bits at every level.
 * el_attn_task_*: one-row kernel (attention_impl.h), batches below
 * EL_ATT_TILE_Q; el_attn_tiled_*: tiled kernel (attention_tiled_impl.h). */
void el_attn_task_portable(void *a, int ith, int nth);
void el_attn_tiled_portable(void *a, int ith, int nth);
/* el_attn_task_*_split: the ranges of the split decode (on an el_attn_split) */
void el_attn_task_portable_split(void *sp, int ith, int nth);
#if defined(__x86_64__)
void el_attn_task_avx2(void *a, int ith, int nth);
void el_attn_task_avx512(void *a, int ith, int nth);
void el_attn_task_avx2_split(void *sp, int ith, int nth);
void el_attn_task_avx512_split(void *sp, int ith, int nth);
void el_attn_tiled_avx2(void *a, int ith, int nth);
void el_attn_tiled_avx512(void *a, int ith, int nth);
/* y[i] = expf(x[i]) as the AVX-512 one-row kernel computes its softmax
 * factors (libm's bits, 16 at a time); returns 1 when the check against
 * this process's expf passed (the kernel then uses it), 0 when the kernel
 * calls expf instead. */
int el_attn_vexp_avx512(const float *x, float *y, int n);
/* y[i] = fp16(x[i]) exactly as el_fp32_to_fp16 (NaN included). */
void el_fp32_to_fp16_row_avx2(const float *x, el_fp16 *y, int n);
void el_fp32_to_fp16_row_avx512(const float *x, el_fp16 *y, int n);
#endif

/*
 * el_op_attention with the kernel of instruction-set level `level` (lowered
 * to what this CPU has and this build provides); returns the level run. The
 * process-wide choice (el_op_attention) follows el_cpu_kernels_level(), so
 * EL_CPU_ISA / EL_FORCE_PORTABLE apply to it as to the matmul kernels.
 */
el_cpu_level el_op_attention_at(el_pool *pool, const el_attn_args *a, el_cpu_level level);
/* The combine step of the split decode (attention.c), for the tests. */
void el_attn_split_combine(const el_attn_args *a, const float *part, int n_chunk);
/* el_op_kv_store likewise. */
el_cpu_level el_op_kv_store_at(el_fp16 *cache, const float *x, int n, int pos0, int row_len, el_cpu_level level);

/* The online softmax over cnt scores in order: the running maximum *pM and
 * sum *pS, and per position the factors ms (rescale of what came before)
 * and vs (weight of this position), one of them 1 — the one-row kernel's
 * arithmetic (attention_impl.h), with libm's expf. */
/* Soft-capping of nq heads' scores (rows of EL_ATT_MAX_KVB, cnt each), after
 * they were scaled by scale/cap: s = cap·tanhf(s), as ggml's flash attention. */
static inline void el_att_softcap_g(float *sc, int cnt, int nq, float cap) {
    for (int e = 0; e < nq; e++)
        for (int j = 0; j < cnt; j++) sc[e * EL_ATT_MAX_KVB + j] = cap * tanhf(sc[e * EL_ATT_MAX_KVB + j]);
}

/* Head h's sink (el_attn_args.sinks) joined to its finished state: the
 * maximum M, the sum *S and the accumulator o[hd] as float, as ggml's flash
 * attention does after its last position. Unlike the per-position update,
 * llama.cpp's build does not fuse S·ms + 1 into one fma (an fma there moved
 * tiny-gpt-oss-F16's first prompt by 4e-4 nats; two statements keep clang's
 * -ffp-contract=on from fusing it too). */
static inline void el_att_sink(const el_attn_args *a, int h, float *M, float *S, float *o, int hd) {
    const float s = a->sinks[h];
    if (s > *M) {
        const float ms = expf(*M - s);
        for (int i = 0; i < hd; i++) o[i] *= ms;
        const float scaled = *S * ms; /* rounded, then added: not contracted in llama.cpp's build */
        *S = scaled + 1.0f;
        *M = s;
    } else {
        *S = *S + expf(s - *M);
    }
}

static inline void el_att_softmax_scalar(const float *sc, int cnt, float *pM, float *pS, float *ms, float *vs) {
    float Mq = *pM, Sq = *pS;
    for (int jj = 0; jj < cnt; jj++) {
        const float s = sc[jj];
        float m = 1.0f, v = 1.0f;
        if (s > Mq) {
            const float Mold = Mq;
            Mq = s;
            m = expf(Mold - Mq);
        } else {
            v = expf(s - Mq);
        }
        ms[jj] = m;
        vs[jj] = v;
        Sq = fmaf(Sq, m, v); /* contracted in llama.cpp's build */
    }
    *pM = Mq, *pS = Sq;
}

#endif
