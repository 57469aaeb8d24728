/*
 * lora.h — LoRA adapters (internal side of edgellm.h's el_lora_* API).
 *
 * Contract:
 *   - An adapter is a GGUF file in llama.cpp's LoRA format: general.type =
 *     "adapter", adapter.type = "lora", adapter.lora.alpha (f32, absent = 0),
 *     general.architecture equal to the base model's, and for each adapted
 *     base weight W (ne0 = in, ne1 = out) a pair "<W name>.lora_a" [in, r]
 *     and "<W name>.lora_b" [r, out] (ggml order: ne0 first).
 *   - It is validated against the base before use (el_lora_parse): every
 *     tensor is half of a pair, every pair names a projection edgellm adapts
 *     (blk.N.attn_q/k/v/output, blk.N.ffn_gate/up/down, output) that exists
 *     in the base, the shapes agree, the types are ones the CPU kernels
 *     compute with. Any failure is a typed error naming the tensor.
 *   - The file is read into a buffer the adapter owns (el_lora_bytes counts
 *     it); the base weights are never copied or merged.
 *   - In the forward pass each adapted product becomes
 *     y = W·x + s·B·(A·x), s = scale × alpha / rank (scale when alpha = 0),
 *     llama.cpp's rule (llama-adapter.h get_scale): one EL_OPK_LORA op after
 *     each base matmul group (Q/K/V, gate/up, O, down, head) with the terms
 *     of every active adapter; adapters sum in order. A session with no
 *     adapter set (s->lora == NULL) builds no extra op.
 */
#ifndef EL_RUNTIME_LORA_H
#define EL_RUNTIME_LORA_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/cpu/lora_kernels.h"
#include "backend/cpu/ops.h"
#include "edgellm.h"
#include "package/gguf.h"

/* The projections of a layer an adapter may target, then the output head. */
enum {
    EL_LORA_Q = 0, EL_LORA_K, EL_LORA_V, EL_LORA_O, EL_LORA_GATE, EL_LORA_UP, EL_LORA_DOWN,
    EL_LORA_PER_LAYER
};
#define EL_LORA_MAX_ACTIVE 8  /* adapters one session applies at once */
#define EL_LORA_MAX_RANK 4096

/* The GGUF name suffix of slot k ("attn_q", ...). */
const char *el_lora_slot_name(int slot);

typedef struct el_lora_w {
    el_mat a, b;   /* a: ne0 = in, ne1 = rank; b: ne0 = rank, ne1 = out */
    int rank;      /* 0: this weight is not adapted */
} el_lora_w;

struct el_lora {
    const void *base;    /* the el_model it was validated against */
    void *buf;           /* the file's bytes */
    size_t bytes;
    el_gguf *g;
    float alpha;
    int n_layer;
    el_lora_w *w;        /* n_layer * EL_LORA_PER_LAYER, then the output head */
    int n_pairs, rank_max;
    int64_t in_max, out_max; /* over adapted weights */
    char arch[64];
};

/*
 * The base weights the validator checks against: weight(ctx, il, slot)
 * returns layer il's projection `slot` (il = -1: the output head, slot 0),
 * or NULL when the base has no such tensor of its own (a tied output head).
 */
typedef const el_mat *(*el_lora_base_fn)(void *ctx, int il, int slot);

/*
 * Parses and validates adapter g (kept by out; out->buf/bytes untouched)
 * against a base of architecture arch with n_layer layers. Fills out->w etc.
 * 0 or an el_status with err set ("tensor 'blk.0.attn_q.weight.lora_a' has
 * shape [...], the base weight is [...]").
 */
int el_lora_parse(el_gguf *g, const char *arch, int n_layer, el_lora_base_fn weight, void *ctx, el_lora *out,
                  el_error *err);
/* Frees what el_lora_parse allocated in a (not a itself, not a->g). */
void el_lora_release(el_lora *a);

/* A session's active adapters and the scratch their ops use (sized at set time).
 * The forward's op for a group of projections sharing an input (Q/K/V,
 * gate/up, O, down, the head) takes the terms of every active adapter at
 * once (backend/cpu/lora_kernels.h): tcols bounds their ranks' sum over any
 * group, xq_row the largest row of an input in an A's vec_dot type. */
typedef struct el_lora_set {
    int n;
    const el_lora *a[EL_LORA_MAX_ACTIVE];
    float scale[EL_LORA_MAX_ACTIVE];
    float *t;        /* chunk × tcols floats: the A products */
    void *tq;        /* the same bytes: them in B's vec_dot type */
    void *xq;        /* chunk × xq_row bytes: the input in A's vec_dot type */
    int chunk;       /* rows one pass over the scratch takes (min(session rows, EL_LORA_CHUNK)) */
    int64_t tcols;
    size_t xq_row;
    void *block;     /* t, tq, xq: NULL when they live in the session's block (planned) */
    size_t bytes;
} el_lora_set;

/* The scratch bytes a set of adapters needs for a session of `rows` rows
 * (max(n_batch, logit rows)); *tcols / *xq_row / *chunk receive its shape. */
size_t el_lora_set_scratch(el_lora *const *adapters, int n, int rows, int64_t *tcols, size_t *xq_row, int *chunk);

/* The adapted weight of W (layer il, or the output head when il < 0) in
 * adapter a of model m, or NULL. */
const el_lora_w *el_lora_find(const el_lora *a, const void *model, int il, const void *W);
/* s × alpha / rank as llama.cpp computes it (alpha 0: s). */
float el_lora_eff_scale(const el_lora *a, const el_lora_w *w, float s);
void el_lora_set_free(el_lora_set *set);

#endif
