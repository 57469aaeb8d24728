/*
 * qwen2.c — the Qwen2 / Qwen2.5 forward pass.
 *
 * Llama's block with two differences: the Q, K and V projections carry a
 * bias, and RoPE rotates the two halves of each head (ggml "NEOX" mode).
 * The output head is usually tied to the token embedding.
 */
#include "runtime/model.h"
#include "runtime/exec.h"

static int qwen2_load(el_model *m, el_error *err) {
    m->hp.rope_mode = EL_ROPE_NEOX;
    return el_bind_common_tensors(m, true, false, false, err);
}

static void qwen2_forward(el_session *s, const int32_t *toks, int n) {
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
        el_fwd_attention(s, il, n, &rope, 0); /* Q/K/V + bias */
        el_fwd_add(s, il, "attn_residual", EL_T_X, EL_T_TMP, n * E);
        if (il == hp->n_layer - 1) el_fwd_keep_last_row(s, &n);
        el_fwd_norm(s, il, "ffn_norm", EL_T_X, L->ffn_norm, EL_T_XB, n, E, hp->norm_eps);
        el_fwd_ffn(s, il, n, false);
        el_fwd_add(s, il, "ffn_residual", EL_T_X, EL_T_TMP, n * E);
    }
    el_fwd_output(s, n);
}

const el_arch el_arch_qwen2 = {"qwen2", qwen2_load, qwen2_forward, false};
