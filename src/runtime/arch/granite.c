/*
 * granite.c — the IBM Granite (3.x dense) forward pass.
 *
 * Llama's block with four multipliers from the metadata:
 *
 *   x = embed(tokens) * embedding_scale
 *   for each layer:
 *       x += residual_scale * Wo · attention(...)      scores · attention.scale
 *       x += residual_scale * Wdown · (silu(Wgate·h) * Wup·h)
 *   logits = (Wout · rmsnorm(x)) / logit_scale
 *
 * attention.scale replaces 1/sqrt(head_dim). As llama.cpp reads them:
 * logit_scale is required; embedding_scale, residual_scale and
 * attention.scale are optional (absent: no multiplier / 1/sqrt(head_dim)).
 * edgellm refuses a present value that is not finite and > 0 (a zero scale
 * would silently turn a block off, a zero logit_scale divides by zero).
 * rope.scaling.finetuned = false switches RoPE off in every layer (llama.cpp's
 * rope_pattern for Granite); absent means true. RoPE: adjacent pairs (NORM).
 */
#include <math.h>

#include "runtime/model.h"
#include "runtime/exec.h"

static int granite_load(el_model *m, el_error *err) {
    el_hparams *hp = &m->hp;
    int rc;
    hp->rope_mode = EL_ROPE_NORM;
    float logit_scale, embd_scale, residual_scale, attn_scale;
    if ((rc = el_hp_f32(m, "logit_scale", true, 0.0f, &logit_scale, err))) return rc;
    if ((rc = el_hp_check(m, "logit_scale", logit_scale, isfinite(logit_scale) && logit_scale > 0.0f, "finite, > 0", err)))
        return rc;
    if ((rc = el_hp_f32_pos(m, "embedding_scale", 1.0f, &embd_scale, err))) return rc;
    if ((rc = el_hp_f32_pos(m, "residual_scale", 1.0f, &residual_scale, err))) return rc;
    if ((rc = el_hp_f32_pos(m, "attention.scale", hp->attn_scale, &attn_scale, err))) return rc;
    hp->logit_mul = 1.0f / logit_scale;
    hp->residual_scale = residual_scale;
    hp->attn_scale = attn_scale;
    hp->embd_scale = embd_scale;
    char key[256];
    bool finetuned = true;
    const el_gguf_kv *kv = el_gguf_find(m->gguf, el_arch_key(m, "rope.scaling.finetuned", key, sizeof key));
    if (kv && !el_gguf_get_bool(m->gguf, key, &finetuned))
        return el_set_error(err, EL_ERR_BAD_VALUE, "metadata '%s' is not a bool", key);
    if ((rc = el_bind_common_tensors(m, false, false, false, err))) return rc;
    for (int il = 0; il < hp->n_layer; il++) m->layers[il].no_rope = !finetuned;
    return 0;
}

static void granite_forward(el_session *s, const int32_t *toks, int n) {
    const el_model *m = s->m;
    const el_hparams *hp = &m->hp;
    const int E = hp->n_embd;
    const el_rope rope = {.mode = EL_ROPE_NORM, .n_rot = hp->n_rot, .freq_base = hp->rope_base,
                          .freq_scale = hp->rope_scale, .freq_factors = m->rope_freqs};
    el_fwd_embed(s, toks, n, hp->embd_scale);
    for (int il = 0; il < hp->n_layer; il++) {
        el_fwd_layer_begin(s, il);
        const el_layer *L = &m->layers[il];
        el_fwd_norm(s, il, "attn_norm", EL_T_X, L->attn_norm, EL_T_XB, n, E, hp->norm_eps);
        el_fwd_attention(s, il, n, L->no_rope ? NULL : &rope, 0);
        el_fwd_scale(s, il, "attn_residual_scale", EL_T_TMP, hp->residual_scale, n * E);
        el_fwd_add(s, il, "attn_residual", EL_T_X, EL_T_TMP, n * E);
        if (il == hp->n_layer - 1) el_fwd_keep_last_row(s, &n);
        el_fwd_norm(s, il, "ffn_norm", EL_T_X, L->ffn_norm, EL_T_XB, n, E, hp->norm_eps);
        el_fwd_ffn(s, il, n, false);
        el_fwd_scale(s, il, "ffn_residual_scale", EL_T_TMP, hp->residual_scale, n * E);
        el_fwd_add(s, il, "ffn_residual", EL_T_X, EL_T_TMP, n * E);
    }
    el_fwd_output(s, n);
}

const el_arch el_arch_granite = {"granite", granite_load, granite_forward, false};
