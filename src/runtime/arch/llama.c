/*
 * llama.c — the Llama forward pass (Llama 2/3.x, TinyLlama, Mistral, SmolLM).
 *
 *   x = embed(tokens)
 *   for each layer:
 *       x += Wo · attention(rope(Wq·rmsnorm(x)), rope(Wk·…), Wv·…)   GQA
 *       x += Wdown · (silu(Wgate·rmsnorm(x)) * Wup·rmsnorm(x))
 *   logits = Wout · rmsnorm(x)          (Wout = token_embd when tied)
 *
 * RoPE rotates adjacent pairs (ggml "NORM" mode); Llama 3.1+ rope scaling
 * arrives as per-frequency divisors in the rope_freqs tensor.
 */
#include "runtime/model.h"
#include "runtime/exec.h"

static int llama_load(el_model *m, el_error *err) {
    m->hp.rope_mode = EL_ROPE_NORM;
    return el_bind_common_tensors(m, false, false, false, err);
}

static void llama_forward(el_session *s, const int32_t *toks, int n) {
    const el_model *m = s->m;
    const el_hparams *hp = &m->hp;
    const int E = hp->n_embd;
    const el_rope rope = {.mode = EL_ROPE_NORM, .n_rot = hp->n_rot, .freq_base = hp->rope_base,
                          .freq_scale = hp->rope_scale, .freq_factors = m->rope_freqs};
    el_fwd_embed(s, toks, n, 1.0f);
    for (int il = 0; il < hp->n_layer; il++) {
        el_fwd_layer_begin(s, il);
        const el_layer *L = &m->layers[il];
        el_fwd_norm(s, il, "attn_norm", EL_T_X, L->attn_norm, EL_T_XB, n, E, hp->norm_eps);
        el_fwd_attention(s, il, n, &rope, 0);
        el_fwd_add(s, il, "attn_residual", EL_T_X, EL_T_TMP, n * E);
        if (il == hp->n_layer - 1) el_fwd_keep_last_row(s, &n);
        el_fwd_norm(s, il, "ffn_norm", EL_T_X, L->ffn_norm, EL_T_XB, n, E, hp->norm_eps);
        el_fwd_ffn(s, il, n, false);
        el_fwd_add(s, il, "ffn_residual", EL_T_X, EL_T_TMP, n * E);
    }
    el_fwd_output(s, n);
}

const el_arch el_arch_llama = {"llama", llama_load, llama_forward, false};
