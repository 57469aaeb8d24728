/*
 * blocks.c — the building blocks the architecture files compose: token
 * embedding, the attention block (projections, Q/K norm, RoPE, KV store,
 * attention, output projection) and the gated FFN, and the output head.
 *
 * Each block reads its input from session scratch (s->x / s->xb) and writes
 * its result to s->tmp, so an architecture's forward() reads like the paper:
 * norm → block → (post-norm) → residual add.
 */
#include <math.h>
#include <string.h>

#include "runtime/model.h"

/*
 * Parity debugging: built with -DEL_DEBUG_DUMP, every block writes its
 * intermediate activations to $EL_DUMP_DIR/<name>-<layer>.bin (raw float32,
 * all rows of the batch), to compare op by op with llama.cpp's tensors
 * (tests/tools/llama_dump.py, tests/tools/cmp_dump.py). A file that exists is
 * not overwritten: an empty directory ends up with the first batch of the
 * prompt, not the decode steps after it.
 */
#ifdef EL_DEBUG_DUMP
#include <stdio.h>
#include <stdlib.h>
static void dbg_dump(const char *name, int il, const float *x, size_t n) {
    const char *d = getenv("EL_DUMP_DIR");
    if (!d) return;
    char p[512];
    snprintf(p, sizeof p, "%s/%s-%d.bin", d, name, il);
    FILE *f = fopen(p, "wbx");
    if (!f) return;
    fwrite(x, sizeof(float), n, f);
    fclose(f);
}
#else
#define dbg_dump(name, il, x, n) ((void)0)
#endif

void el_fwd_dump(const char *name, int il, const float *x, size_t n) {
    dbg_dump(name, il, x, n);
    (void)name, (void)il, (void)x, (void)n;
}

void el_fwd_embed(el_session *s, const int32_t *toks, int n, float scale) {
    const el_model *m = s->m;
    const int E = m->hp.n_embd;
    for (int t = 0; t < n; t++) {
        el_op_get_row(&m->tok_embd, toks[t], s->x + (size_t)t * E);
        if (scale != 1.0f) el_op_scale(s->x + (size_t)t * E, scale, E);
    }
}

void el_fwd_attention(el_session *s, int il, int n, const el_rope *rope, int window) {
    const el_model *m = s->m;
    const el_hparams *hp = &m->hp;
    const el_layer *L = &m->layers[il];
    const int hd = hp->head_dim_k;
    const int q_row = hp->n_head * hd, kv_row = hp->n_head_kv * hd;

    const el_mat *qkv[3] = {&L->wq, &L->wk, &L->wv};
    float *const qkv_out[3] = {s->q, s->k, s->v};
    const float *const qkv_bias[3] = {L->bq, L->bk, L->bv};
    dbg_dump("attn_norm", il, s->xb, (size_t)n * hp->n_embd);
    el_op_matmul_n(m->pool, 3, qkv, s->xb, n, qkv_out, qkv_bias, s->wq8);
    dbg_dump("Q", il, s->q, (size_t)n * q_row);
    dbg_dump("K", il, s->k, (size_t)n * kv_row);
    if (L->q_norm) el_op_rmsnorm(s->q, L->q_norm, s->q, n * hp->n_head, hd, hp->norm_eps);
    if (L->k_norm) el_op_rmsnorm(s->k, L->k_norm, s->k, n * hp->n_head_kv, hd, hp->norm_eps);
    if (L->q_norm) dbg_dump("Qnorm", il, s->q, (size_t)n * q_row);
    if (L->k_norm) dbg_dump("Knorm", il, s->k, (size_t)n * kv_row);
    for (int t = 0; t < n; t++) {
        const int pos = s->n_past + t;
        el_op_rope(s->q + (size_t)t * q_row, hp->n_head, hd, pos, rope, s->rope_cs);
        el_op_rope(s->k + (size_t)t * kv_row, hp->n_head_kv, hd, pos, rope, s->rope_cs);
    }
    dbg_dump("Qrope", il, s->q, (size_t)n * q_row);
    dbg_dump("Krope", il, s->k, (size_t)n * kv_row);
    dbg_dump("V", il, s->v, (size_t)n * kv_row);
    if (hp->q_prescale) el_op_scale(s->q, hp->attn_scale, n * q_row);
    /* a Q8_0/Q4_0 cache: Q, K, V rotated as llama.cpp does before the store (ops.h, el_kv_rot_k) */
    const int rot_k = el_kv_rot_k(s->type_k, hd), rot_v = el_kv_rot_v(s->type_v, hp->head_dim_v);
    if (rot_k) {
        el_op_fwht(s->q, n * q_row / rot_k, rot_k);
        el_op_fwht(s->k, n * kv_row / rot_k, rot_k);
    }
    if (rot_v) el_op_fwht(s->v, n * kv_row / rot_v, rot_v);
    const int ring = window > 0 && L->swa ? s->kv_ring : 0; /* this layer's cache is a ring (memory/plan.h) */
    el_op_kv_store_typed(s->type_k, s->kc[il], s->k, n, s->n_past, kv_row, ring);
    el_op_kv_store_typed(s->type_v, s->vc[il], s->v, n, s->n_past, kv_row, ring);

    el_attn_args a = {
        .q = s->q, .out = s->att, .kcache = s->kc[il], .vcache = s->vc[il],
        .n = n, .pos0 = s->n_past, .n_head = hp->n_head, .n_head_kv = hp->n_head_kv,
        .head_dim = hd, .window = window, .ring = ring, .scale = hp->q_prescale ? 1.0f : hp->attn_scale,
        .type_k = s->type_k, .type_v = s->type_v,
    };
    el_op_attention(m->pool, &a);
    dbg_dump("kqv", il, s->att, (size_t)n * q_row);
    if (rot_v) el_op_fwht(s->att, n * q_row / rot_v, rot_v); /* back: H·H = I */
    el_op_matmul(m->pool, &L->wo, s->att, n, s->tmp, NULL, s->wq8);
    dbg_dump("attn_out", il, s->tmp, (size_t)n * hp->n_embd);
}

void el_fwd_ffn(el_session *s, int il, int n, bool gelu) {
    const el_model *m = s->m;
    const el_layer *L = &m->layers[il];
    const int F = m->hp.n_ff;
    const el_mat *gate_up[2] = {&L->w_gate, &L->w_up};
    float *const gate_up_out[2] = {s->gate, s->up};
    el_op_matmul_n(m->pool, 2, gate_up, s->xb, n, gate_up_out, NULL, s->wq8);
    dbg_dump("ffn_norm", il, s->xb, (size_t)n * m->hp.n_embd);
    dbg_dump("gate", il, s->gate, (size_t)n * F);
    dbg_dump("up", il, s->up, (size_t)n * F);
    if (gelu) el_op_gelu_mul(s->gate, s->up, n * F);
    else el_op_silu_mul(s->gate, s->up, n, F);
    dbg_dump("swiglu", il, s->gate, (size_t)n * F);
    el_op_matmul(m->pool, &L->w_down, s->gate, n, s->tmp, NULL, s->wq8);
    dbg_dump("ffn_out", il, s->tmp, (size_t)n * m->hp.n_embd);
}

void el_fwd_keep_last_row(el_session *s, int *n) {
    if (s->out_rows > 1) return; /* every row's logits are wanted */
    if (s->embd_pool) return; /* an embedding pass needs every row (llama.cpp outputs all of them then) */
    const int E = s->m->hp.n_embd;
    if (*n > 1) memmove(s->x, s->x + (size_t)(*n - 1) * E, sizeof(float) * (size_t)E);
    *n = 1;
}

/* el_embed's output: rows r0..r0+n of the input, output-normed, pooled. */
static void embd_output(el_session *s, int n) {
    const el_model *m = s->m;
    const int E = m->hp.n_embd;
    el_op_rmsnorm(s->x, m->output_norm, s->xb, n, E, m->hp.norm_eps);
    el_fwd_dump("result_norm", -1, s->xb, (size_t)n * E);
    const int r0 = s->embd_row0;
    float *out = s->embd_out;
    switch (s->embd_pool - 1) {
    case EL_POOLING_NONE:
        memcpy(out + (size_t)r0 * E, s->xb, sizeof(float) * (size_t)n * E);
        break;
    case EL_POOLING_MEAN: /* sum here; session.c divides once at the end */
        for (int t = 0; t < n; t++)
            for (int j = 0; j < E; j++) out[j] += s->xb[(size_t)t * E + j];
        break;
    case EL_POOLING_CLS:
        if (r0 == 0) memcpy(out, s->xb, sizeof(float) * (size_t)E);
        break;
    case EL_POOLING_LAST:
        if (r0 + n == s->embd_n) memcpy(out, s->xb + (size_t)(n - 1) * E, sizeof(float) * (size_t)E);
        break;
    }
}

void el_fwd_output(el_session *s, int n) {
    if (s->embd_pool) { embd_output(s, n); return; }
    const el_model *m = s->m;
    const int E = m->hp.n_embd;
    const int r = s->out_rows > 1 ? n : 1;
    el_op_rmsnorm(s->x + (size_t)(n - r) * E, m->output_norm, s->xb, r, E, m->hp.norm_eps);
    el_op_matmul(m->pool, &m->output, s->xb, r, s->logits, NULL, s->wq8);
}
