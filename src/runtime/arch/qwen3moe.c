/*
 * qwen3moe.c — the Qwen3 mixture-of-experts forward pass (Qwen3-30B-A3B and kin).
 *
 * Attention as Qwen3 (no QKV bias, per-head RMS norm of Q and K before NEOX
 * RoPE). The FFN is a mixture of experts (el_fwd_moe, backend/cpu/moe.c):
 * router softmax over expert_count experts, the expert_used_count largest
 * chosen, their weights renormalised to sum 1 (llama.cpp's qwen3moe graph
 * always normalises), SiLU-gated experts of expert_feed_forward_length. No
 * shared expert.
 */
#include "runtime/model.h"
#include "runtime/exec.h"

static int qwen3moe_load(el_model *m, el_error *err) {
    m->hp.rope_mode = EL_ROPE_NEOX;
    int rc;
    if ((rc = el_load_moe_hparams(m, false, err))) return rc;
    if ((rc = el_bind_common_tensors(m, false, true, false, err))) return rc;
    return el_bind_moe_tensors(m, false, true, err);
}

static void qwen3moe_forward(el_session *s, const int32_t *toks, int n) {
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
        el_fwd_attention(s, il, n, &rope, 0); /* Q/K norm per head, then RoPE */
        el_fwd_add(s, il, "attn_residual", EL_T_X, EL_T_TMP, n * E);
        if (il == hp->n_layer - 1) el_fwd_keep_last_row(s, &n);
        el_fwd_norm(s, il, "ffn_norm", EL_T_X, L->ffn_norm, EL_T_XB, n, E, hp->norm_eps);
        el_fwd_moe(s, il, n);
        el_fwd_add(s, il, "ffn_residual", EL_T_X, EL_T_TMP, n * E);
    }
    el_fwd_output(s, n);
}

const el_arch el_arch_qwen3moe = {"qwen3moe", qwen3moe_load, qwen3moe_forward, false};
