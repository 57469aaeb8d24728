/*
 * gemma2.c — the Gemma 2 forward pass.
 *
 *   x = embed(tokens) * sqrt(n_embd)
 *   for each layer:
 *       a = attention(rmsnorm(x))           NEOX RoPE; scores soft-capped:
 *                                           s = cap·tanh(s/cap) before softmax;
 *                                           even layers attend only to the
 *                                           last `sliding_window` positions
 *       x += rmsnorm(a, post_attention_norm)
 *       f = Wdown · (gelu_tanh(Wgate·h) * Wup·h),  h = rmsnorm(x, ffn_norm)
 *       x += rmsnorm(f, post_ffw_norm)
 *   logits = final_cap·tanh(token_embd · rmsnorm(x) / final_cap)   (tied)
 *
 * As llama.cpp: Q is scaled by 1/sqrt(head_dim) after RoPE (1/sqrt(n_embd /
 * n_head) for the 46-layer 27B) and attention runs with scale 1 (it does not
 * read query_pre_attn_scalar); attn_logit_softcapping defaults to 50,
 * final_logit_softcapping to 30, sliding_window to 4096, rope.freq_base_swa
 * to rope.freq_base; layer il slides iff il % 2 == 0 (pattern 2). A cap that
 * is present must be finite and > 0; a sliding_window_pattern other than 2 is
 * refused. Norm weights in GGUF already include Gemma's +1.
 */
#include <math.h>

#include "runtime/model.h"
#include "runtime/exec.h"

#define GEMMA2_SWA_PATTERN 2 /* layer il slides iff il % 2 < 1 */

static int gemma2_load(el_model *m, el_error *err) {
    el_hparams *hp = &m->hp;
    int rc;
    char key[256];
    hp->rope_mode = EL_ROPE_NEOX;
    if ((rc = el_hp_u32(m, "attention.sliding_window", false, 4096, &hp->n_swa, err))) return rc;
    if ((rc = el_hp_check(m, "attention.sliding_window", hp->n_swa, hp->n_swa > 0, "> 0", err))) return rc;
    uint32_t pat = 0;
    if (el_gguf_find(m->gguf, el_arch_key(m, "attention.sliding_window_pattern", key, sizeof key)) &&
        (!el_gguf_get_u32(m->gguf, key, &pat) || pat != GEMMA2_SWA_PATTERN))
        return el_set_error(err, EL_ERR_UNSUPPORTED, "metadata '%s': only the pattern %d (every other layer) is supported", key,
                            GEMMA2_SWA_PATTERN);
    if ((rc = el_hp_f32_pos(m, "rope.freq_base_swa", hp->rope_base, &hp->rope_base_swa, err))) return rc;
    hp->rope_scale_swa = hp->rope_scale;
    if ((rc = el_hp_f32_pos(m, "attn_logit_softcapping", 50.0f, &hp->attn_softcap, err))) return rc;
    if ((rc = el_hp_f32_pos(m, "final_logit_softcapping", 30.0f, &hp->final_softcap, err))) return rc;
    hp->swa_pattern = GEMMA2_SWA_PATTERN;
    hp->q_prescale = true;
    if (hp->n_layer == 46) hp->attn_scale = 1.0f / sqrtf((float)(hp->n_embd / hp->n_head)); /* 27B */
    if ((rc = el_bind_common_tensors(m, false, false, true, err))) return rc;
    m->output = m->tok_embd; /* llama.cpp always ties Gemma 2's output to token_embd */
    for (int il = 0; il < hp->n_layer; il++) m->layers[il].swa = il % GEMMA2_SWA_PATTERN < GEMMA2_SWA_PATTERN - 1;
    return 0;
}

static void gemma2_forward(el_session *s, const int32_t *toks, int n) {
    const el_model *m = s->m;
    const el_hparams *hp = &m->hp;
    const int E = hp->n_embd;
    const el_rope rope_global = {.mode = EL_ROPE_NEOX, .n_rot = hp->n_rot, .freq_base = hp->rope_base,
                                 .freq_scale = hp->rope_scale, .freq_factors = NULL};
    const el_rope rope_local = {.mode = EL_ROPE_NEOX, .n_rot = hp->n_rot, .freq_base = hp->rope_base_swa,
                                .freq_scale = hp->rope_scale_swa, .freq_factors = NULL};
    el_fwd_embed(s, toks, n, sqrtf((float)E));
    for (int il = 0; il < hp->n_layer; il++) {
        el_fwd_layer_begin(s, il);
        const el_layer *L = &m->layers[il];
        el_fwd_norm(s, il, "attn_norm", EL_T_X, L->attn_norm, EL_T_XB, n, E, hp->norm_eps);
        if (L->swa) el_fwd_attention(s, il, n, &rope_local, hp->n_swa);
        else el_fwd_attention(s, il, n, &rope_global, 0);
        el_fwd_norm(s, il, "post_attn_norm", EL_T_TMP, L->post_attn_norm, EL_T_TMP, n, E, hp->norm_eps);
        el_fwd_add(s, il, "attn_residual", EL_T_X, EL_T_TMP, n * E);
        if (il == hp->n_layer - 1) el_fwd_keep_last_row(s, &n);
        el_fwd_norm(s, il, "ffn_norm", EL_T_X, L->ffn_norm, EL_T_XB, n, E, hp->norm_eps);
        el_fwd_ffn(s, il, n, true);
        el_fwd_norm(s, il, "post_ffn_norm", EL_T_TMP, L->post_ffn_norm, EL_T_TMP, n, E, hp->norm_eps);
        el_fwd_add(s, il, "ffn_residual", EL_T_X, EL_T_TMP, n * E);
    }
    el_fwd_output(s, n);
}

const el_arch el_arch_gemma2 = {"gemma2", gemma2_load, gemma2_forward, false};
