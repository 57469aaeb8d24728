/*
 * ops.h — the CPU backend's transformer operators.
 *
 * Numerics follow ggml's CPU backend where it matters for parity with
 * llama.cpp: activations are quantized to the weight type's vec_dot_type
 * before a matrix product; RMS norm sums in double; RoPE angles are built
 * by repeated multiplication in float; the KV cache is F16 and queries are
 * rounded to F16 before Q·K, as ggml's F16 matmul / flash attention do.
 *
 * Every operator works on caller-provided memory and allocates nothing.
 */
#ifndef EL_BACKEND_CPU_OPS_H
#define EL_BACKEND_CPU_OPS_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/cpu/threadpool.h"
#include "package/types.h"
#include "util/fp16.h"

/* A 2-D weight matrix: rows of ne0 elements, ne1 rows, in `type`. */
typedef struct el_mat {
    el_type type;
    int64_t ne0, ne1;
    const void *data;
    size_t row_bytes;
    /* a copy of the rows in a kernel's layout (backend/cpu/layout.h), made at
     * load; products on the CPU read it, everything else reads data */
    const void *packed;
    int layout; /* el_layout; 0 (flat): packed is NULL */
} el_mat;

/* Bytes of scratch el_op_matmul needs to quantize n rows of k activations for weight type t. */
size_t el_op_matmul_wsize(el_type t, int64_t k, int n);

/* y[n][W.ne1] = x[n][W.ne0] · Wᵀ (+ bias[W.ne1] if bias). wscratch: el_op_matmul_wsize bytes. */
void el_op_matmul(el_pool *pool, const el_mat *W, const float *x, int n, float *y,
                  const float *bias, void *wscratch);

/* Several products of the same activations at once (Q/K/V, gate/up): y[i] = x · W[i]ᵀ
 * (+ bias[i]); count <= 4, bias may be NULL or hold NULLs. The activations are
 * quantized once when every W[i] has the same row length and activation
 * format, and the rows of all W[i] are split across the threads in one job.
 * Each y[i] has the bits el_op_matmul gives. wscratch: el_op_matmul_wsize of W[0]. */
/*
 * Row order (calling thread only; off by default): while on, products of
 * several activation rows compute each row with the arithmetic of a one-row
 * product (llama.cpp's batched kernel choices — repacked gemm tiles,
 * tinyBLAS — are not taken), so a batch gives each row exactly the bits a
 * decode step gives it. Speculative verification uses it; weights are still
 * read once per block of rows.
 */
void el_op_matmul_row_order(bool on);
/* Whether row order is on for the calling thread (other backends follow it). */
bool el_op_matmul_row_order_on(void);
void el_op_matmul_n(el_pool *pool, int count, const el_mat *const W[], const float *x, int n,
                    float *const y[], const float *const bias[], void *wscratch);

/*
 * A mixture-of-experts FFN (llama.cpp's build_moe_ffn with softmax gating and
 * SiLU-gated experts, runtime/arch/qwen3moe.c, qwen2moe.c). Per row x:
 *   p = softmax(router · x) over n_expert; the n_used largest p_e are chosen
 *   (ties: the lower expert id first); w_j = p_e(j), divided by max(Σw, 2^-14)
 *   when norm_w, times w_scale when w_scale is neither 0 nor 1;
 *   y = Σ_j w_j · down_e(j)(silu(gate_e(j)·x) ⊙ up_e(j)·x), summed in the
 *   order of the choice (largest p first), as llama.cpp adds its views;
 *   with a shared expert (has_shared): y += shared(x) · σ(sh_inp · x), σ(v)
 *   computed as silu(v)/v like llama.cpp.
 * Expert e of gate/up/down is the matrix at data + e·stride (a 3-D GGUF
 * tensor [ne0, ne1, n_expert]); all weight types el_op_matmul takes work.
 */
typedef struct el_moe {
    el_mat router;              /* n_expert rows of the model width */
    el_mat gate, up, down;      /* expert 0's matrices (ne0/ne1 of one expert) */
    size_t stride_gate, stride_up, stride_down; /* bytes from one expert to the next */
    int n_expert, n_used;
    bool norm_w;
    float w_scale;
    /* gpt-oss: router logits + router_b (n_expert) or NULL; softmax_weight:
     * the top k of the logits chosen, their weights the softmax over those k
     * (not over all); gate_b/up_b [n_expert][ne1 of gate], down_b
     * [n_expert][model width], or NULL: each expert's product plus its row;
     * swiglu_oai: the activation is min(g, 7)·σ(1.702·min(g, 7))·(clamp(u, ±7) + 1)
     * instead of silu(g)·u */
    const float *router_b, *gate_b, *up_b, *down_b;
    bool softmax_weight, swiglu_oai;
    bool has_shared;
    el_mat sh_inp;              /* one row: the shared expert's gate logit */
    el_mat sh_gate, sh_up, sh_down;
} el_moe;

/* Bytes of float/int scratch el_op_moe needs for n rows (the quantized
 * activations are el_op_matmul's wscratch, sized by the caller from the
 * matrices' types). d: model width; ff: the wider of the expert and shared
 * FFN lengths. SIZE_MAX on overflow. */
size_t el_moe_scratch_bytes(int n, int64_t d, int n_expert, int n_used, int64_t ff);

/*
 * y[n][d] = the MoE FFN of x[n][d]. Rows that chose the same expert are
 * gathered and computed as one product, so each chosen expert's weights are
 * read once per call; every row's result is independent of which other rows
 * share the call when el_op_matmul_row_order is on. scratch:
 * el_moe_scratch_bytes(n, ...) bytes, 64-byte aligned; wscratch: enough for
 * el_op_matmul of n rows of any of the moe's matrices.
 */
void el_op_moe(el_pool *pool, const el_moe *moe, const float *x, int n, float *y, void *scratch, void *wscratch);
/* After el_op_moe(..., n, ..., scratch): the n_expert + 1 prefix sums of the
 * rows that chose each expert (expert e: offsets[e] .. offsets[e+1]), read
 * from that scratch (valid until it is reused); NULL on bad figures. */
const int32_t *el_moe_expert_offsets(const el_moe *moe, int n, const void *scratch);

/* Row `row` of W dequantized into out[W.ne0] (embedding lookup). */
void el_op_get_row(const el_mat *W, int64_t row, float *out);

/* out[i] = x[i] * scale * w[i] with scale = 1/sqrt(mean(x²)+eps); n rows of d. w may be NULL. out may alias x. */
void el_op_rmsnorm(const float *x, const float *w, float *out, int n_rows, int d, float eps);

/* In place: rotate n_heads heads of head_dim at position pos (first n_rot dims). */
typedef enum { EL_ROPE_NORM = 0, EL_ROPE_NEOX = 2 } el_rope_mode;
typedef struct el_rope {
    el_rope_mode mode;
    int n_rot;              /* rotated dims per head (usually head_dim) */
    float freq_base;
    float freq_scale;       /* 1/linear factor */
    const float *freq_factors; /* llama3-style per-pair divisors (n_rot/2) or NULL */
    float mscale;           /* multiplies every cos and sin (llama.cpp's attn_factor: Phi-3 long RoPE); 0 or 1: none */
    /* YaRN (ggml's rope_yarn; gpt-oss): ext_factor != 0 blends, for pair i0/2,
     * theta = freq_scale·t·(1 - r) + t·r with r = ramp(i0)·ext_factor,
     * ramp = 1 - clamp((i0/2 - corr_lo) / max(0.001, corr_hi - corr_lo), 0, 1),
     * and multiplies cos/sin by (mscale or 1)·(1 + 0.1·ln(1/freq_scale));
     * corr_lo/hi from el_rope_yarn_corr. 0: plain scaling. */
    float ext_factor;
    float corr_lo, corr_hi;
} el_rope;
/* ggml_rope_yarn_corr_dims: the dims where YaRN's blend starts and ends for a
 * rotation of n_rot dims trained on n_ctx_orig positions at base freq_base. */
void el_rope_yarn_corr(int n_rot, int n_ctx_orig, float freq_base, float beta_fast, float beta_slow, float *lo, float *hi);
/* cs: scratch of n_rot floats for cos/sin pairs computed per position. */
void el_op_rope(float *x, int n_heads, int head_dim, int pos, const el_rope *r, float *cs);

void el_op_silu_mul(float *gate, const float *up, int n_rows, int d); /* gate = silu(gate) * up, rows of d */
void el_op_gelu_mul(float *gate, const float *up, int n);      /* gate = gelu_tanh(gate) * up (ggml fp16 table semantics) */
void el_op_add(float *y, const float *x, int n);              /* y += x */
void el_op_scale(float *y, float s, int n);
/* The normaliser of a log-softmax over v_i = san(x_i) (NaN → −∞, +∞ →
 * FLT_MAX): *mx = max v_i, *sum = Σ expf(v_i − mx) with ggml's vector expf
 * (expf_poly.h), each term added in double to lane i % 16 of sixteen
 * accumulators, which are then added lane 0 to 15 (and the lane maxima taken
 * in that order): the same bits at every kernel level. *sum = 0 when every
 * v_i is −∞. The samplers' log-probabilities over a whole vocabulary use it. */
void el_op_log_norm(const float *x, int n, float *mx, double *sum);

/* Attention over an F16 KV cache for n query tokens at positions pos0..pos0+n-1
 * (the cache already holds their K/V). q: [n][n_head*hd]; out: [n][n_head*hd].
 * kcache/vcache: [n_ctx][n_head_kv*hd]. Each query at position p sees cache
 * rows j with lo(p) <= j <= p, lo = window > 0 ? max(0, p - window + 1) : 0.
 * Needs no scratch: the online softmax keeps its state per (token, head).
 * ring > 0: the cache is a ring of `ring` rows holding position j in row
 * j % ring (a sliding-window layer's cache; ring >= window + n - 1, so every
 * visible position is still there); positions are visited in the same
 * ascending order as with a flat cache, so the result is bit-identical.
 * ring = 0: row j holds position j. */
typedef struct el_attn_args {
    const float *q;
    float *out;
    const void *kcache, *vcache; /* rows of type_k / type_v (F16: el_fp16) */
    int n, pos0, n_head, n_head_kv, head_dim, window, ring;
    float scale;
    /* > 0: scores are soft-capped before the softmax, s = softcap·tanh(Q·K·scale/softcap)
     * (Gemma 2; ggml's flash attention: scale/softcap, then softcap·tanhf); 0: none */
    float softcap;
    /* n_head floats or NULL: each head's sink, a learned logit that joins the
     * softmax's denominator only (gpt-oss). As ggml's flash attention: after
     * the last visible position, with the running maximum M and sum S and the
     * accumulator as float, s > M: acc *= expf(M - s), S = S·expf(M - s) + 1;
     * else S += expf(s - M); then acc / S. A split decode applies it to its
     * first range only, before the ranges are combined. */
    const float *sinks;
    /* The caches' el_type: EL_TYPE_F16 (0, as a zero-initialised struct
     * holds, means F16 too), or EL_TYPE_BF16 / EL_TYPE_Q8_0 / EL_TYPE_Q4_0
     * (head_dim a multiple of 32), for which el_op_attention runs the kernel
     * of attention_typed.c: llama.cpp's one-row flash attention for
     * non-F16 caches (Q in K's vec_dot type, V summed in F32). */
    int type_k, type_v;
} el_attn_args;
void el_op_attention(el_pool *pool, const el_attn_args *a);

/* Store n rows of K and V (float) into the F16 cache for positions pos0..;
 * ring > 0: position j goes to row j % ring (n <= ring), else to row j. */
void el_op_kv_store(el_fp16 *cache, const float *x, int n, int pos0, int row_len, int ring);

/* A KV cache type: 1 if el_op_attention / el_op_kv_store_typed handle
 * caches of type t with this head size (F16 any; BF16, Q8_0, Q4_0 need
 * head_dim % 32 == 0 — a row of a quantized cache is whole blocks per head). */
int el_kv_type_ok(int type, int head_dim);
/* el_op_kv_store for a cache of any type el_kv_type_ok accepts: each row of
 * row_len floats is converted as llama.cpp's CPU backend stores it
 * (ggml_set_rows with the type's CPU from_float: F16 and BF16 rounded to
 * nearest even, Q8_0 by the x86 quantize_row_q8_0, Q4_0 by
 * quantize_row_q4_0_ref); rows are el_row_size(type, row_len) bytes. */
void el_op_kv_store_typed(int type, void *cache, const float *x, int n, int pos0, int row_len, int ring);

/*
 * llama.cpp rotates attention for a quantized cache (Q8_0/Q4_0; not
 * F16/BF16): with a quantized K cache and head_dim_k % 64 == 0, Q and K are
 * multiplied by an orthonormal Walsh-Hadamard matrix of size nrot_k (the
 * largest 64 * 2^i dividing head_dim_k) before K is stored; with a quantized
 * V cache and head_dim_v % 64 == 0, V is rotated by the 64 x 64 one before it
 * is stored and the attention output by the same matrix after (H·H = I).
 * These give the rotation sizes, 0 for none (llama_kv_cache's attn_rot_k/v).
 */
int el_kv_rot_k(int type_k, int head_dim_k);
int el_kv_rot_v(int type_v, int head_dim_v);
/* In place, each of n_rows rows of nrot floats (nrot a power of two):
 * x = H_nrot · x in ggml's fast Walsh-Hadamard arithmetic (the CPU
 * backend's mul_mat with GGML_HINT_SRC0_IS_HADAMARD): every value times
 * 1/sqrtf(nrot) first, then butterflies (u + v, u - v) of span 1, 2, 4, … */
void el_op_fwht(float *x, int n_rows, int nrot);

#endif
