/*
 * lfm2.c — the Liquid LFM2 forward pass (hybrid: attention and short
 * convolutions).
 *
 *   x = embed(tokens)
 *   for each layer:
 *       h = rmsnorm(x, attn_norm)                      ("operator norm")
 *       attention layer:  a = attention(h)           GQA, per-head Q/K RMS norm,
 *                                                    NEOX RoPE, 1/sqrt(head_dim)
 *       conv layer:       B, C, xx = in_proj · h     (rows 0..E, E..2E, 2E..3E)
 *                         bx = B * xx
 *                         conv = depthwise causal conv1d of bx over the last
 *                                shortconv.l_cache positions (the earlier ones
 *                                from the session's conv state)
 *                         a = out_proj · (C * conv)
 *       x += a
 *       x += Wdown · (silu(Wgate·g) * Wup·g),  g = rmsnorm(x, ffn_norm)
 *   logits = output · rmsnorm(x, token_embd_norm)    (output tied if absent)
 *
 * As llama.cpp reads it: attention.head_count_kv is a per-layer array, 0
 * marking a conv layer (a single value: every layer attends); the final norm
 * is the tensor 'token_embd_norm'. edgellm requires shortconv.l_cache in
 * 2..EL_MAX_CONV_WIDTH, the array's length to be block_count, the attention
 * layers to share one KV head count, Q's width n_head·head_dim = n_embd, and
 * each conv layer's tensors in their shapes (in_proj [E -> 3E], conv
 * [l_cache] x E, out_proj [E -> E]) — refused at load naming the key or
 * tensor. LFM2's sliding window (attention.sliding_window > 0) and the MoE
 * variant (lfm2moe) are not supported.
 *
 * The conv state lives in the session (plan.h conv_ring, session.c): rows of
 * B·x per position, so a roll-back re-reads the rows it needs.
 */
#include <math.h>
#include <stdlib.h>

#include "runtime/model.h"
#include "runtime/exec.h"

static int lfm2_load(el_model *m, el_error *err) {
    el_hparams *hp = &m->hp;
    int rc;
    char key[256];
    hp->rope_mode = EL_ROPE_NEOX;
    if ((rc = el_hp_u32(m, "shortconv.l_cache", true, 0, &hp->conv_width, err))) return rc;
    if ((rc = el_hp_check(m, "shortconv.l_cache", hp->conv_width, hp->conv_width >= 2 && hp->conv_width <= EL_MAX_CONV_WIDTH,
                          "2..64", err)))
        return rc;
    int swa = 0;
    if ((rc = el_hp_u32(m, "attention.sliding_window", false, 0, &swa, err))) return rc;
    if (swa > 0)
        return el_set_error(err, EL_ERR_UNSUPPORTED, "metadata '%s' = %d: LFM2's sliding window is not supported",
                            el_arch_key(m, "attention.sliding_window", key, sizeof key), swa);
    const int64_t E = hp->n_embd, KV = (int64_t)hp->n_head_kv * hp->head_dim_k;
    if ((int64_t)hp->n_head * hp->head_dim_k != E)
        return el_set_error(err, EL_ERR_UNSUPPORTED, "lfm2: head_count %d x head dim %d != embedding_length %d", hp->n_head,
                            hp->head_dim_k, hp->n_embd);
    bool *is_conv = calloc((size_t)hp->n_layer, sizeof(bool));
    if (!is_conv) return el_set_error(err, EL_ERR_NOMEM, "out of memory");
    rc = el_hp_kv_per_layer(m, hp->n_layer, &hp->n_head_kv, is_conv, err);
    if (!rc && !(m->layers = calloc((size_t)hp->n_layer, sizeof(el_layer)))) rc = el_set_error(err, EL_ERR_NOMEM, "out of memory");
    for (int il = 0; !rc && il < hp->n_layer; il++) m->layers[il].conv = is_conv[il];
    free(is_conv);
    if (rc) return rc;
    if ((rc = el_bind_mat(m, "token_embd.weight", E, hp->n_vocab, true, &m->tok_embd, err))) return rc;
    if ((rc = el_bind_vec(m, "token_embd_norm.weight", E, true, &m->output_norm, err))) return rc;
    if ((rc = el_bind_mat(m, "output.weight", E, hp->n_vocab, false, &m->output, err))) return rc;
    if (!m->output.data && !m->output.packed) m->output = m->tok_embd; /* tied */
    hp->n_conv = 0;
    for (int il = 0; il < hp->n_layer; il++) {
        el_layer *L = &m->layers[il];
        char n[128];
#define NAME(s) (snprintf(n, sizeof n, "blk.%d.%s", il, s), n)
        if ((rc = el_bind_vec(m, NAME("attn_norm.weight"), E, true, &L->attn_norm, err))) return rc;
        if (L->conv) {
            L->conv_idx = hp->n_conv++;
            if ((rc = el_bind_mat(m, NAME("shortconv.in_proj.weight"), E, 3 * E, true, &L->conv_in, err))) return rc;
            if ((rc = el_bind_mat(m, NAME("shortconv.out_proj.weight"), E, E, true, &L->conv_out, err))) return rc;
            /* the kernel [E][l_cache]: bound as a vector of E·l_cache after its shape is checked */
            const el_gguf_tensor *t = el_gguf_find_tensor(m->gguf, NAME("shortconv.conv.weight"));
            if (!t) return el_set_error(err, EL_ERR_MISSING, "tensor '%s' is missing", n);
            if (t->n_dims != 2 || t->ne[0] != hp->conv_width || t->ne[1] != E)
                return el_set_error(err, EL_ERR_BAD_TENSOR, "tensor '%s' has shape [%lld, %lld] (%d dims), expected [%d, %lld]", n,
                                    (long long)t->ne[0], (long long)(t->n_dims > 1 ? t->ne[1] : 1), t->n_dims,
                                    hp->conv_width, (long long)E);
            if ((rc = el_bind_flat(m, n, E * hp->conv_width, &L->conv_w, err))) return rc;
        } else {
            if ((rc = el_bind_mat(m, NAME("attn_q.weight"), E, E, true, &L->wq, err))) return rc;
            if ((rc = el_bind_mat(m, NAME("attn_k.weight"), E, KV, true, &L->wk, err))) return rc;
            if ((rc = el_bind_mat(m, NAME("attn_v.weight"), E, KV, true, &L->wv, err))) return rc;
            if ((rc = el_bind_mat(m, NAME("attn_output.weight"), E, E, true, &L->wo, err))) return rc;
            if ((rc = el_bind_vec(m, NAME("attn_q_norm.weight"), hp->head_dim_k, true, &L->q_norm, err))) return rc;
            if ((rc = el_bind_vec(m, NAME("attn_k_norm.weight"), hp->head_dim_k, true, &L->k_norm, err))) return rc;
        }
        if ((rc = el_bind_vec(m, NAME("ffn_norm.weight"), E, true, &L->ffn_norm, err))) return rc;
        if ((rc = el_bind_mat(m, NAME("ffn_gate.weight"), E, hp->n_ff, true, &L->w_gate, err))) return rc;
        if ((rc = el_bind_mat(m, NAME("ffn_up.weight"), E, hp->n_ff, true, &L->w_up, err))) return rc;
        if ((rc = el_bind_mat(m, NAME("ffn_down.weight"), hp->n_ff, E, true, &L->w_down, err))) return rc;
#undef NAME
    }
    return 0;
}

static void lfm2_forward(el_session *s, const int32_t *toks, int n) {
    const el_model *m = s->m;
    const el_hparams *hp = &m->hp;
    const int E = hp->n_embd;
    const el_rope rope = {.mode = EL_ROPE_NEOX, .n_rot = hp->n_rot, .freq_base = hp->rope_base,
                          .freq_scale = hp->rope_scale, .freq_factors = NULL};
    el_fwd_embed(s, toks, n, 1.0f);
    for (int il = 0; il < hp->n_layer; il++) {
        el_fwd_layer_begin(s, il);
        const el_layer *L = &m->layers[il];
        el_fwd_norm(s, il, "attn_norm", EL_T_X, L->attn_norm, EL_T_XB, n, E, hp->norm_eps);
        if (L->conv) el_fwd_shortconv(s, il, n);
        else el_fwd_attention(s, il, n, &rope, 0);
        el_fwd_add(s, il, "attn_residual", EL_T_X, EL_T_TMP, n * E);
        if (il == hp->n_layer - 1) el_fwd_keep_last_row(s, &n);
        el_fwd_norm(s, il, "ffn_norm", EL_T_X, L->ffn_norm, EL_T_XB, n, E, hp->norm_eps);
        el_fwd_ffn(s, il, n, false);
        el_fwd_add(s, il, "ffn_residual", EL_T_X, EL_T_TMP, n * E);
    }
    el_fwd_output(s, n);
}

const el_arch el_arch_lfm2 = {"lfm2", lfm2_load, lfm2_forward, true};
