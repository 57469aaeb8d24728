/*
 * olmo2.c — the OLMo 2 forward pass.
 *
 *   x = embed(tokens)
 *   for each layer:                       (no pre-norms)
 *       q = rmsnorm(Wq·x, attn_q_norm)    over the whole projection
 *       k = rmsnorm(Wk·x, attn_k_norm)    (n_head·head_dim, not per head)
 *       a = Wo · attention(rope(q), rope(k), Wv·x)     NEOX RoPE
 *       x += rmsnorm(a, post_attention_norm)
 *       x += rmsnorm(Wdown · (silu(Wgate·x) * Wup·x), post_ffw_norm)
 *   logits = Wout · rmsnorm(x)            (output.weight required)
 *
 * A sliding window (OLMo 3's attention.sliding_window > 0) is refused:
 * edgellm does not implement that variant.
 */
#include <stdlib.h>

#include "runtime/model.h"
#include "runtime/exec.h"

static int olmo2_load(el_model *m, el_error *err) {
    el_hparams *hp = &m->hp;
    int rc;
    hp->rope_mode = EL_ROPE_NEOX;
    hp->qk_norm_full = true;
    int swa = 0;
    if ((rc = el_hp_u32(m, "attention.sliding_window", false, 0, &swa, err))) return rc;
    if (swa > 0) {
        char key[256];
        return el_set_error(err, EL_ERR_UNSUPPORTED, "metadata '%s' = %d: OLMo 3's sliding-window layers are not supported",
                            el_arch_key(m, "attention.sliding_window", key, sizeof key), swa);
    }
    if (hp->head_dim_k * hp->n_head != hp->n_embd)
        return el_set_error(err, EL_ERR_BAD_VALUE, "olmo2: head_count %d x key_length %d must equal embedding_length %d",
                            hp->n_head, hp->head_dim_k, hp->n_embd);
    const int64_t E = hp->n_embd, Q = (int64_t)hp->n_head * hp->head_dim_k, KV = (int64_t)hp->n_head_kv * hp->head_dim_k;
    if ((rc = el_bind_mat(m, "token_embd.weight", E, hp->n_vocab, true, &m->tok_embd, err))) return rc;
    if ((rc = el_bind_vec(m, "output_norm.weight", E, true, &m->output_norm, err))) return rc;
    if ((rc = el_bind_mat(m, "output.weight", E, hp->n_vocab, true, &m->output, err))) return rc;
    m->layers = calloc((size_t)hp->n_layer, sizeof(el_layer));
    if (!m->layers) return el_set_error(err, EL_ERR_NOMEM, "out of memory");
    for (int il = 0; il < hp->n_layer; il++) {
        el_layer *L = &m->layers[il];
        char n[128];
#define NAME(s) (snprintf(n, sizeof n, "blk.%d.%s", il, s), n)
        if ((rc = el_bind_mat(m, NAME("attn_q.weight"), E, Q, true, &L->wq, err))) return rc;
        if ((rc = el_bind_mat(m, NAME("attn_k.weight"), E, KV, true, &L->wk, err))) return rc;
        if ((rc = el_bind_mat(m, NAME("attn_v.weight"), E, KV, true, &L->wv, err))) return rc;
        if ((rc = el_bind_mat(m, NAME("attn_output.weight"), Q, E, true, &L->wo, err))) return rc;
        if ((rc = el_bind_vec(m, NAME("attn_q_norm.weight"), Q, true, &L->q_norm, err))) return rc;
        if ((rc = el_bind_vec(m, NAME("attn_k_norm.weight"), KV, true, &L->k_norm, err))) return rc;
        if ((rc = el_bind_vec(m, NAME("post_attention_norm.weight"), E, true, &L->post_attn_norm, err))) return rc;
        if ((rc = el_bind_mat(m, NAME("ffn_gate.weight"), E, hp->n_ff, true, &L->w_gate, err))) return rc;
        if ((rc = el_bind_mat(m, NAME("ffn_up.weight"), E, hp->n_ff, true, &L->w_up, err))) return rc;
        if ((rc = el_bind_mat(m, NAME("ffn_down.weight"), hp->n_ff, E, true, &L->w_down, err))) return rc;
        if ((rc = el_bind_vec(m, NAME("post_ffw_norm.weight"), E, true, &L->post_ffn_norm, err))) return rc;
#undef NAME
    }
    return 0;
}

static void olmo2_forward(el_session *s, const int32_t *toks, int n) {
    const el_model *m = s->m;
    const el_hparams *hp = &m->hp;
    const int E = hp->n_embd;
    const el_rope rope = {.mode = EL_ROPE_NEOX, .n_rot = hp->n_rot, .freq_base = hp->rope_base,
                          .freq_scale = hp->rope_scale, .freq_factors = NULL};
    el_fwd_embed(s, toks, n, 1.0f);
    for (int il = 0; il < hp->n_layer; il++) {
        el_fwd_layer_begin(s, il);
        const el_layer *L = &m->layers[il];
        el_fwd_copy(s, il, "attn_in", EL_T_X, EL_T_XB, n * E); /* no pre-norm: the blocks read xb */
        el_fwd_attention(s, il, n, &rope, 0);
        el_fwd_norm(s, il, "post_attn_norm", EL_T_TMP, L->post_attn_norm, EL_T_TMP, n, E, hp->norm_eps);
        el_fwd_add(s, il, "attn_residual", EL_T_X, EL_T_TMP, n * E);
        if (il == hp->n_layer - 1) el_fwd_keep_last_row(s, &n);
        el_fwd_copy(s, il, "ffn_in", EL_T_X, EL_T_XB, n * E);
        el_fwd_ffn(s, il, n, false);
        el_fwd_norm(s, il, "post_ffn_norm", EL_T_TMP, L->post_ffn_norm, EL_T_TMP, n, E, hp->norm_eps);
        el_fwd_add(s, il, "ffn_residual", EL_T_X, EL_T_TMP, n * E);
    }
    el_fwd_output(s, n);
}

const el_arch el_arch_olmo2 = {"olmo2", olmo2_load, olmo2_forward, false};
