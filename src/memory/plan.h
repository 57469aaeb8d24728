/*
 * plan.h — the memory plan of a session (layer L5).
 *
 * Everything a session needs — the KV cache of every layer, activation
 * scratch for n_batch tokens, quantized-activation scratch, logits — is laid
 * out in one block whose size is known before any work starts. el_session_new allocates exactly this block (and nothing
 * later); el_session_bytes reports it so a caller can refuse a request that
 * does not fit its budget.
 *
 * KV layout: layer il's K then V, layer after layer. A full layer holds
 * n_ctx rows; a sliding-window layer (Gemma 3's local layers) holds a ring
 * of kv_ring = min(n_ctx, window + n_batch) rows (position j in row
 * j % kv_ring), as llama.cpp's SWA cache keeps window + one ubatch, unless
 * swa_full asks for n_ctx rows there too. kv_ring = 0 when no layer rings.
 * A row holds n_head_kv * max(head_dim_k, head_dim_v) values in the cache's
 * type (F16 by default; BF16, Q8_0, Q4_0 with --cache-type-k/-v): its
 * el_row_size bytes, K and V each rounded up to 64 bytes per layer — the
 * same arithmetic as the capacity planner's el_kv_bytes (capacity.h).
 */
#ifndef EL_MEMORY_PLAN_H
#define EL_MEMORY_PLAN_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A matrix whose input rows a product quantizes (el_op_matmul_wsize): its
 * el_type and row length. */
/* The widest attention head a model may have: the session keeps one RoPE row of it. */
#define EL_MAX_HEAD_DIM 512

typedef struct el_plan_mat {
    int type;
    int64_t ne0;
} el_plan_mat;

/* What the memory layer knows of a model: its dimensions, which layers keep a
 * sliding-window ring, the matrices whose inputs are quantized, and the bytes
 * a session has beside its planned block. The runtime fills it once a model's
 * weights are bound (runtime/model.c, el_model.mem) and the planner and the
 * capacity planner read nothing else: memory/ includes nothing of runtime/. */
typedef struct el_mem_model {
    int n_layer, n_embd, n_ff, n_head, n_head_kv, head_dim_k, head_dim_v, n_vocab;
    int n_swa;                /* sliding window (0: none) */
    int n_ctx_train;
    const bool *layer_swa;    /* n_layer flags: the layer's cache can be a ring */
    const el_plan_mat *mats;  /* the layers' products (absent ones: type 0, ne0 0) */
    int n_mats;
    el_plan_mat output;       /* the output projection (n_logit_rows rows) */
    size_t session_fixed;     /* a session's bytes beside the block: its struct, per-layer cache pointers, executor */
    /* mixture of experts (0 experts: a dense model) */
    int n_expert, n_expert_used;
    int n_ff_moe;                /* the wider of one expert's and the shared expert's FFN length */
    uint64_t expert_bytes;       /* every layer's routed experts (gate, up, down), all of them */
    uint64_t expert_bytes_token; /* the share one token reads: n_expert_used of n_expert per layer */
    uint64_t moe_other_bytes;    /* routers and shared experts (every token reads them) */
    uint64_t expert_fixed;       /* of expert_bytes, what stays resident whatever the budget (memory/experts.h) */
    uint64_t expert_resident;    /* the expert residency budget (<= expert_bytes; = it: all resident) */
    int n_conv_layers;        /* LFM2: layers that are short-convolution blocks (0: none) */
    int conv_width;           /* their convolution's width (shortconv.l_cache) */
} el_mem_model;

typedef struct el_session_plan {
    size_t kv_bytes;      /* K + V for all layers */
    size_t kv_layer;      /* bytes of K of a full layer (n_ctx rows) */
    size_t kv_layer_swa;  /* bytes of K of a sliding-window layer (kv_ring rows; = kv_layer if none) */
    size_t kv_layer_v, kv_layer_v_swa; /* the same for V (= the K figures when both have one type) */
    int type_k, type_v;   /* the caches' el_type (EL_TYPE_F16 unless asked) */
    int kv_ring;          /* rows of a sliding-window layer's ring; 0: no layer rings */
    int n_layer_swa;      /* layers whose cache is a ring */
    size_t off_x, off_xb, off_q, off_k, off_v, off_att, off_gate, off_up, off_tmp;
    size_t off_logits, off_wq8, off_rope, off_top_ids, off_top_lps;
    size_t off_lora, lora_bytes; /* LoRA adapters' scratch (el_plan_add_lora); 0 bytes: none */
    size_t off_moe, moe_bytes;   /* el_op_moe's scratch for n_batch rows (el_moe_scratch_bytes); 0 bytes: dense */
    /* LFM2's short-convolution state: per conv layer a ring of conv_ring F32
     * rows of n_embd (position j in row j % conv_ring), conv_ring =
     * min(n_ctx, conv_width - 1 + n_batch): the conv_width - 1 inputs the
     * next position reads plus a batch of history, so a roll-back (speculative
     * rejection, a prompt cache) of up to n_batch positions finds its state.
     * It is session state like the KV cache, counted in scratch_bytes and
     * total. 0: no conv layers. */
    size_t off_conv, conv_bytes;
    int conv_ring;
    int lora_rank;
    int n_logit_rows;     /* rows of logits (1 + the most draft tokens a verification checks) */
    size_t scratch_bytes;
    size_t total;         /* kv_bytes + scratch_bytes */
} el_session_plan;

/* Fills the plan; returns 0, or -1 if the sizes overflow. swa_full: give
 * sliding-window layers the whole context (no ring). */
int el_plan_session(const el_mem_model *m, int n_ctx, int n_batch, int swa_full, el_session_plan *p);
/* The same with K and V caches of el_type type_k / type_v (0 = F16); -1 also
 * when a type is not one el_kv_type_ok (backend/cpu/ops.h) accepts for the
 * model's head size. */
int el_plan_session_kv(const el_mem_model *m, int n_ctx, int n_batch, int swa_full, int type_k, int type_v,
                       el_session_plan *p);
/* The same with n_logit_rows rows of logits (1..n_batch): a session that
 * verifies speculative drafts keeps the logits of every verified position. */
int el_plan_session_full(const el_mem_model *m, int n_ctx, int n_batch, int swa_full, int type_k, int type_v,
                         int n_logit_rows, el_session_plan *p);

/*
 * LoRA: adds to a filled plan the scratch of adapters whose ranks
 * (el_lora_rank_max) sum to at most lora_rank (0: nothing added), for
 * n_batch rows: el_lora_scratch_bytes (backend/cpu/lora_kernels.h) of
 * min(n_batch, EL_LORA_CHUNK) rows, 3 × lora_rank columns (Q/K/V: three
 * projections of one op, each of rank <= its adapter's largest) and an input
 * row of the model's widest projection input in a 2-byte vec_dot type (F16,
 * BF16; the Q8 types take less, F32 none). Updates scratch_bytes and total;
 * -1 on overflow or a negative rank.
 */
int el_plan_add_lora(const el_mem_model *m, int n_batch, int lora_rank, el_session_plan *p);

/* Byte offset of layer il's K cache in the block (V follows K). */
size_t el_plan_kv_offset(const el_mem_model *m, const el_session_plan *p, int il);

/* A session's whole size, as the runtime makes sessions: its batch at most
 * its context, 1 + n_draft rows of logits (0 <= n_draft <= EL_SPEC_MAX_DRAFT);
 * the block of el_plan_session_full plus the scratch of el_plan_add_lora
 * (lora_rank), plus m->session_fixed — what el_session_bytes_for reports and
 * el_session_new allocates, and what the capacity planner counts. 0 when the
 * plan fails (a bad argument, a cache type the head size cannot use,
 * overflow). */
size_t el_plan_session_bytes(const el_mem_model *m, int n_ctx, int n_batch, int swa_full, int type_k, int type_v,
                             int n_draft, int lora_rank);

#endif
