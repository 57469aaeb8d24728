/*
 * qwen2moe.c — the Qwen2 mixture-of-experts forward pass (Qwen1.5-MoE-A2.7B,
 * Qwen2-57B-A14B).
 *
 * Attention as Qwen2 (Q/K/V bias, NEOX RoPE). The FFN is a mixture of
 * experts (el_fwd_moe, backend/cpu/moe.c): router softmax, the
 * expert_used_count largest chosen with their softmax probabilities as
 * weights, not renormalised (llama.cpp's qwen2moe graph), plus a shared
 * expert of expert_shared_feed_forward_length on every token, gated by
 * sigmoid(ffn_gate_inp_shexp · x).
 */
#include "runtime/model.h"
#include "runtime/exec.h"

static int qwen2moe_load(el_model *m, el_error *err) {
    m->hp.rope_mode = EL_ROPE_NEOX;
    int rc;
    if ((rc = el_load_moe_hparams(m, true, err))) return rc;
    if ((rc = el_bind_common_tensors(m, true, false, false, err))) return rc;
    return el_bind_moe_tensors(m, true, false, err);
}

static void qwen2moe_forward(el_session *s, const int32_t *toks, int n) {
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
        el_fwd_moe(s, il, n); /* routed experts + the gated shared expert */
        el_fwd_add(s, il, "ffn_residual", EL_T_X, EL_T_TMP, n * E);
    }
    el_fwd_output(s, n);
}

const el_arch el_arch_qwen2moe = {"qwen2moe", qwen2moe_load, qwen2moe_forward, false};
