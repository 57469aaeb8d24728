/*
 * model.h — the runtime's view of a loaded model and a session (internal).
 *
 * Process state (el_model): the GGUF mapping (read-only, shared), the vocab,
 * hyperparameters read from metadata, weight views bound to tensors, the
 * thread pool. Session state (el_session): KV cache, scratch activations,
 * logits, position — all sized and allocated in el_session_new.
 *
 * An architecture is a table entry (el_arch): `load` reads its
 * hyperparameters and binds its tensors; `forward` runs n tokens through the
 * network at positions n_past.. and writes the last token's logits.
 */
#ifndef EL_RUNTIME_MODEL_H
#define EL_RUNTIME_MODEL_H
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "backend/backend.h"
#include "backend/cpu/ops.h"
#include "edgellm.h"
#include "memory/experts.h"
#include "memory/load.h"
#include "memory/plan.h"
#include "package/gguf.h"
#include "runtime/tokenizer.h"
#include "sched/placement.h"


typedef struct el_hparams {
    int n_vocab, n_embd, n_layer, n_head, n_head_kv;
    int head_dim_k, head_dim_v; /* per-head sizes (key_length / value_length) */
    int n_ff;
    int n_ctx_train;
    float norm_eps;
    float rope_base, rope_scale;         /* global layers */
    float rope_base_swa, rope_scale_swa; /* sliding-window layers */
    bool rope_yarn;                      /* rope.scaling.type "yarn" (gpt-oss; rope_scale = 1/factor) */
    int n_rot;
    el_rope_mode rope_mode;
    int n_swa;          /* sliding window (0: none) */
    int swa_pattern;    /* every swa_pattern-th layer is global (0: none) */
    float attn_scale;   /* multiplier on Q·K */
    bool q_prescale;    /* apply attn_scale to Q after RoPE (Gemma, Phi-3), not to the scores */
    float attn_softcap; /* > 0: scores soft-capped, cap·tanh(s/cap), before the softmax (Gemma 2); 0: none */
    float final_softcap; /* > 0: logits soft-capped the same way (Gemma 2); 0: none */
    float logit_mul;    /* != 0 and != 1: logits multiplied by it (Granite: 1/logit_scale); 0: none */
    float embd_scale;   /* Granite: token embeddings times it (llama.cpp's embedding_scale); 1 elsewhere */
    float residual_scale; /* != 0: each block's output times it before the residual add (Granite); 0: none */
    bool qk_norm_full;  /* Q/K RMS-norm over the whole projection (n_head·head_dim), not per head (OLMo 2) */
    /* mixture of experts (qwen3moe, qwen2moe; 0 experts: a dense FFN) */
    int n_expert, n_expert_used;
    int n_ff_exp;       /* one expert's FFN length (expert_feed_forward_length) */
    int n_ff_shexp;     /* the shared expert's (expert_shared_feed_forward_length; 0: none) */
    int conv_width;     /* LFM2: shortconv.l_cache, the causal convolution's width (2..EL_MAX_CONV_WIDTH); 0: no conv layers */
    int n_conv;         /* layers that are short-convolution blocks (el_layer.conv) */
} el_hparams;

#define EL_MAX_EXPERTS 1024 /* llama.cpp's LLAMA_MAX_EXPERTS */

/* The widest short convolution (LFM2's shortconv.l_cache) a model may have. */
#define EL_MAX_CONV_WIDTH 64

typedef struct el_layer {
    const float *attn_norm;
    el_mat wq, wk, wv, wo;
    const float *bq, *bk, *bv;           /* qwen2, gpt-oss */
    const float *bo;                     /* gpt-oss: the output projection's bias */
    const float *sinks;                  /* gpt-oss: n_head attention sinks (F32, el_attn_args.sinks) */
    const float *q_norm, *k_norm;        /* qwen3, gemma3 */
    const float *post_attn_norm;         /* gemma3 */
    const float *ffn_norm;
    el_mat w_gate, w_up, w_down;
    const float *post_ffn_norm;          /* gemma2/3, olmo2 */
    el_moe moe;                          /* qwen3moe, qwen2moe: the FFN is this (w_gate/up/down unused) */
    bool swa;                            /* sliding-window layer */
    bool no_rope;                        /* Q and K are not rotated (SmolLM3's every 4th layer) */
    /* LFM2 short-convolution block (conv): in_proj [E -> 3E: B, C, x rows],
     * the depthwise kernel conv_w [E][conv_width] (F32), out_proj [E -> E];
     * conv_idx: its index among the model's conv layers (its state's slot) */
    bool conv;
    int conv_idx;
    el_mat conv_in, conv_out;
    const float *conv_w;
} el_layer;

typedef struct el_session el_session;
typedef struct el_model el_model;
typedef struct el_exec el_exec; /* runtime/exec.h: runs a session's ops on the model's backends */

typedef struct el_arch {
    const char *name;
    int (*load)(el_model *m, el_error *err);
    /* Run toks[0..n) at positions s->n_past..; logits of the last token into s->logits. */
    void (*forward)(el_session *s, const int32_t *toks, int n);
    /* attention.head_count_kv may be a per-layer array with zeros (LFM2: 0 =
     * a layer without attention); el_load_common_hparams then checks its
     * length and takes its non-zero value (el_hp_kv_per_layer). */
    bool kv_per_layer;
} el_arch;

struct el_model {
    el_gguf *gguf;
    el_vocab *vocab;
    const el_arch *arch;
    char *arch_name;
    el_hparams hp;
    el_layer *layers;
    /* what the memory layer plans from (el_model_fill_mem, after the weights are bound) */
    el_mem_model mem;
    bool *mem_swa;
    el_plan_mat *mem_mats;
    el_mat tok_embd, output;
    const float *output_norm;
    const float *rope_freqs;
    const float *rope_long, *rope_short; /* Phi-3 long RoPE: per-pair divisors, long past n_ctx_orig */
    int n_ctx_orig;                      /* rope.scaling.original_context_length (Phi-3's choice of factors) */
    float rope_mscale;                   /* rope.scaling.attn_factor (Phi-3; 1: none) */
    el_pool *pool;
    char *chat_template;
    int n_threads;
    void **owned; int n_owned, cap_owned; /* buffers converted at load (non-F32 norms) */
    size_t owned_bytes;                   /* their bytes (the capacity plan counts them as weights) */
    int layout_mats;                      /* matrices repacked into a kernel layout (backend/cpu/layout.h) */
    unsigned layout_set;                  /* bit l: some matrix runs layout l */
    size_t layout_bytes;                  /* their bytes (owned: in owned_bytes) */
    int layout_file_mats;                 /* matrices the file stores in a layout, run as mapped */
    int layout_unpacked;                  /* file-layout matrices unpacked into flat rows (owned) */
    size_t layout_unpacked_bytes;         /* their bytes (in owned_bytes) */
    char **meta_strs; int n_meta_strs;   /* el_model_meta_str copies */
    el_log_cb log_cb; void *log_user;    /* el_model_params: where el_logf goes (NULL: nowhere) */
    el_load_state load;                  /* el_model_params.load: what was locked, the prefetch segments */
    el_experts *experts;                 /* MoE: the routed experts' residency set (NULL: dense) */
    bool experts_releasable;             /* their pages may be released (an unlocked mapping) */
    /* the backends (runtime/exec.h, el_backends_open): be[0] the CPU */
    el_backend *be[EL_MAX_BACKENDS];
    int n_be;
    el_sched_params sched;
    bool measure;                        /* el_backend_params.measure */
    char backend_req[32];                /* what was asked for ("cpu", "opencl", "auto") */
    char backend_note[256];              /* why a device asked for is absent */
    /* every session's executor adds its counts here after each pass (/health) */
    _Atomic unsigned long long ops_run[EL_MAX_BACKENDS], bytes_moved, fallbacks;
    _Atomic(struct el_gtrie *) gtrie;    /* grammar: the vocabulary trie, built on first use (runtime/constrain.c) */
};

struct el_session {
    el_model *m;
    int n_ctx, n_batch, n_past;
    /* KV cache, rows of type_k / type_v (el_type; F16 unless asked): per
     * layer [n_ctx][n_head_kv*head_dim], or for a sliding-window layer when
     * kv_ring > 0 a ring [kv_ring][...] holding position j in row
     * j % kv_ring (memory/plan.h) */
    void **kc, **vc;
    int kv_ring;
    int type_k, type_v;
    /* scratch, sized for n_batch tokens */
    float *x, *xb, *q, *k, *v, *att, *gate, *up, *tmp;
    float *logits;      /* n_logit_rows rows of n_vocab; a forward writes out_rows of them (1: the last token's) */
    int n_logit_rows;   /* 1 + the most draft tokens one verification checks (el_session_params.n_draft_max) */
    int out_rows;       /* > 1: the next forward keeps all its rows (n must equal it) and writes their logits */
    void *wq8;          /* quantized activations */
    void *moe_scratch;  /* el_op_moe's scratch for n_batch rows (NULL: a dense model) */
    float *rope_cs;     /* EL_MAX_HEAD_DIM */
    /* LFM2's short-convolution state (memory/plan.h, conv_ring): per conv
     * layer a ring [conv_ring][n_embd] of F32 rows B·x, position j in row
     * j % conv_ring; rows of positions >= conv_lo that are still in the ring
     * are valid (el_session_can_truncate). NULL: no conv layers. */
    float *conv_state;
    int conv_ring;
    void *block;        /* one allocation for everything above */
    size_t block_bytes;
    atomic_bool cancel;
    atomic_bool busy;   /* a generation/eval runs (re-entry from its callback or another thread is refused) */
    int32_t *top_ids; float *top_lps; /* 64 each */
    /* el_embed (session.c): while embd_pool > 0 (el_pooling + 1) forward()
     * keeps every row through the last layer and el_fwd_output pools the
     * output-normed rows into embd_out instead of computing logits.
     * embd_row0: this batch's first row within the input of embd_n rows. */
    int embd_pool, embd_row0, embd_n;
    float *embd_out;
    el_exec *exec;      /* runs the forward passes' ops (runtime/exec.h) */
    struct el_lora_set *lora; /* active LoRA adapters (runtime/lora.h); NULL: none, no extra op */
    void *lora_scratch;        /* the adapters' scratch in the session's block (el_session_params.lora_rank > 0) */
    size_t lora_scratch_bytes; /* its bytes (memory/plan.h el_plan_add_lora); 0: none planned */
    int lora_rank;             /* the summed rank it was planned for */
    bool describing;    /* the executor is describing a pass: nothing runs */
    /* batched decoding (runtime/batch.h): the batcher this session's
     * generations go through (NULL: none), and where it stands in it (0: not
     * generating through it, 1: prefilling, 2: decoding; batch.c writes it
     * under its lock). brow: while a batched step runs on this (the
     * batcher's scratch) session, its n_brows rows are one token each of
     * brow[i].s at position brow[i].pos; el_fwd_attention ropes, stores and
     * attends each row with that session's position and cache. */
    struct el_batcher *batcher;
    int batch_phase;
    const struct el_batch_row *brow;
    int n_brows;
};

/* One row of a batched decode step: a session and the position its token takes. */
typedef struct el_batch_row {
    el_session *s;
    int pos;
} el_batch_row;

/* Clears a cancel that arrived after the generation it meant had ended
 * (el_session_reset without forgetting the cache). */
void el_session_uncancel(el_session *s);
/* Whether el_session_truncate(s, n_keep) would succeed (1) or not (0). */
int el_session_can_truncate(const el_session *s, int n_keep);
/* el_generate whose first n_cached prompt tokens (0 <= n_cached < n_prompt,
 * n_cached <= n_past) are the session's last n_cached positions already: only
 * prompt[n_cached..] is evaluated; the sampler's history (penalties) and the
 * drafter still see the whole prompt, so the result equals el_generate of the
 * whole prompt on a session holding n_past - n_cached positions (session.c). */
el_finish el_generate_cached(el_session *s, const int32_t *prompt, int n_prompt, int n_cached,
                             const el_generate_params *gp, el_token_cb cb, void *user, el_generate_stats *stats,
                             el_error *err);

/* Sends a formatted message to the model's log callback, if any (api.c). m may be NULL. */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
/* (model.c) Formats into a bounded stack buffer and calls the model's log
 * callback; with no callback it does nothing (the library never prints). */
void el_logf(const el_model *m, el_log_level level, const char *fmt, ...);
/* M_weights as resident under the expert budget (el_model_set_expert_budget):
 * el_model_weights_bytes less the routed experts beyond the budget (their
 * slices' partial pages, memory/experts.h, stay counted). = it for a dense
 * model or a full budget. What admission counts. */
uint64_t el_model_weights_resident_bytes(const el_model *m);
/* Sets the expert budget for admission: `requested` bytes when not 0; else,
 * when the weights do not fit `room` (the budget less runtime and sessions)
 * and the model's experts may be released, the room beyond the other weights.
 * A dense model, or weights that fit: nothing changes. -1 with the figures
 * when not even one token's experts fit. */
int el_model_fit_experts(el_model *m, uint64_t requested, uint64_t room, el_error *err);
/* M_weights of the capacity plan (memory/capacity.h): the file's size plus
 * the buffers converted at load, saturating. */
uint64_t el_model_weights_bytes(const el_model *m);
/* (runtime/exec.c) Heap bytes el_exec_new allocates for a session of a model
 * with n_layer layers on the CPU backend alone (el_mem_model.session_fixed
 * counts them). */
size_t el_exec_bytes(int n_layer);
/* (runtime/model_backends.c) Creates the backends el_backend_params asks for
 * (CPU always at 0) and measures or loads their capability tables. A device
 * that cannot be had (no OpenCL platform, a kernel that does not build) is a
 * clean fallback to the CPU: logged as a warning and recorded, so the
 * placement report says the run is CPU-only and why. 0, or an el_status for a
 * malformed request. el_backends_close frees them. */
int el_backends_open(el_model *m, const el_backend_params *bp, el_error *err);
void el_backends_close(el_model *m);
/* (runtime/exec.c) The model's backends as JSON: what was asked, each device
 * with the ops it ran (all sessions), the note on a device that could not be
 * had, bytes moved, run-time fallbacks (the server's /health "placement"). */
void el_backends_json(const el_model *m, FILE *f);

/* The forward pass calls this at the start of each layer (the load
 * strategy's hook: prefetch requests the next layers' weights). */
static inline void el_fwd_layer_begin(el_session *s, int il) {
    if (s->m->load.mode == EL_LOAD_PREFETCH && !s->describing) el_load_on_layer(&s->m->load, il);
}

/* Helpers for arch loaders (model.c). */
const char *el_arch_key(const el_model *m, const char *suffix, char *buf, size_t cap);
int el_hp_u32(el_model *m, const char *suffix, bool required, int dflt, int *out, el_error *err);
int el_hp_f32(el_model *m, const char *suffix, bool required, float dflt, float *out, el_error *err);
/* 0 if ok, else EL_ERR_BAD_VALUE "metadata '<arch>.<suffix>' = <v> is out of range (<rule>)". */
int el_hp_check(el_model *m, const char *suffix, double v, bool ok, const char *rule, el_error *err);
/* Bind a 2-D weight "name" with rows of ne0 and ne1 rows (checks shape and type support). */
int el_bind_mat(el_model *m, const char *name, int64_t ne0, int64_t ne1, bool required, el_mat *out, el_error *err);
/* Bind a 1-D F32 vector of n (converting F16/BF16 at load). */
int el_bind_vec(el_model *m, const char *name, int64_t n, bool required, const float **out, el_error *err);
/* Bind a required tensor of any shape holding n values as F32 (converting at load; LFM2's conv kernel). */
int el_bind_flat(el_model *m, const char *name, int64_t n, const float **out, el_error *err);
/* Common: llama-style hparams (vocab, embd, layers, heads, ff, ctx, eps, rope). */
int el_load_common_hparams(el_model *m, el_error *err);
/* Common: token_embd, output_norm, output (tied if absent), per-layer attention + FFN
 * (the dense FFN's tensors only when hp.n_expert == 0). */
int el_bind_common_tensors(el_model *m, bool qkv_bias, bool qk_norm, bool post_norms, el_error *err);
/* MoE hyperparameters (expert_count, expert_used_count, expert_feed_forward_length and, with shared,
 * expert_shared_feed_forward_length), each checked with a clear error before anything is allocated. */
int el_load_moe_hparams(el_model *m, bool shared, el_error *err);
/* Each layer's router, the 3-D expert tensors (ffn_{gate,up,down}_exps: [E, n_ff_exp, n_expert],
 * [n_ff_exp, E, n_expert]) and, with shared, ffn_gate_inp_shexp + ffn_{gate,up,down}_shexp into L->moe. */
int el_bind_moe_tensors(el_model *m, bool shared, bool norm_w, el_error *err);

/* Shared building blocks for forward passes (blocks.c); each hands its ops to the executor. */
/* dst = rmsnorm(src) * w (w may be NULL): n rows of d; tensors are EL_T_* ids (runtime/exec.h); dst may be src. */
void el_fwd_norm(el_session *s, int il, const char *site, int src, const float *w, int dst, int n, int d, float eps);
/* y += x over count floats (the residual add). */
void el_fwd_add(el_session *s, int il, const char *site, int y, int x, int count);
/* id *= sc over count floats (Granite's residual scale). */
void el_fwd_scale(el_session *s, int il, const char *site, int id, float sc, int count);
/* dst = src over count floats (OLMo 2: a block's input without a pre-norm). */
void el_fwd_copy(el_session *s, int il, const char *site, int src, int dst, int count);
void el_fwd_embed(el_session *s, const int32_t *toks, int n, float scale);
/* x → norm → Q,K,V (+bias) → (q/k norm) → rope (rope NULL: none) → store KV → attention → out proj into s->tmp. */
void el_fwd_attention(el_session *s, int il, int n, const el_rope *rope, int window);
/* xb (normed) → the layer's mixture of experts (L->moe) into s->tmp. */
void el_fwd_moe(el_session *s, int il, int n);
/* xb (normed) → FFN (gate/up/down, activation) into s->tmp. gelu: gemma. */
void el_fwd_ffn(el_session *s, int il, int n, bool gelu);
/* After the last layer's attention only the last row feeds the logits: drop
 * the others so the FFN runs on one row (as llama.cpp does, which also
 * decides the kernel order its batched products use). Not when s->out_rows > 1. */
void el_fwd_keep_last_row(el_session *s, int *n);
/* LFM2 short-convolution block: xb (normed) → in_proj → B, C, x; B·x into
 * the session's conv ring; depthwise causal conv over the last conv_width
 * positions; C·conv → out_proj into s->tmp. Each row of a batched step uses
 * its own session's ring. */
void el_fwd_shortconv(el_session *s, int il, int n);
/* Parity debugging (-DEL_DEBUG_DUMP): write n floats to $EL_DUMP_DIR/<name>-<il>.bin; a no-op otherwise. */
void el_fwd_dump(const char *name, int il, const float *x, size_t n);
/* final norm + output projection into s->logits: the last token's, or all
 * n rows when s->out_rows > 1 (speculative verification); in an el_embed
 * pass (s->embd_pool) the final norm of every row, pooled into s->embd_out,
 * and no logits. */
void el_fwd_output(el_session *s, int n);

/* A view of rows r0..r0+n of a bound weight (a fused tensor's part: Phi-3's attn_qkv, ffn_up). */
el_mat el_mat_rows(const el_mat *w, int64_t r0, int64_t n);
/* 0 if the float metadata key <arch>.<suffix> (when present) is finite and > 0, else EL_ERR_BAD_VALUE naming it. */
int el_hp_f32_pos(el_model *m, const char *suffix, float dflt, float *out, el_error *err);

extern const el_arch el_arch_llama, el_arch_qwen2, el_arch_qwen3, el_arch_gemma3;
extern const el_arch el_arch_granite, el_arch_smollm3, el_arch_olmo2, el_arch_phi3, el_arch_gemma2, el_arch_lfm2;
extern const el_arch el_arch_qwen3moe, el_arch_qwen2moe, el_arch_gptoss;
/* attention.head_count_kv of an el_arch.kv_per_layer model: an array of
 * block_count entries, each 0 or one common value (returned in *n_kv, > 0),
 * or a single integer; flags[il] (may be NULL) = entry il is 0. */
int el_hp_kv_per_layer(el_model *m, int n_layer, int *n_kv, bool *flags, el_error *err);

#endif
