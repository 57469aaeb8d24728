/*
 * gemma3.c — the Gemma 3 (text) forward pass.
 *
 *   x = embed(tokens) * sqrt(n_embd)
 *   for each layer:
 *       a = attention(rmsnorm(x))        Q/K RMS-norm per head, NEOX RoPE;
 *                                        5 of every 6 layers attend only to
 *                                        the last `sliding_window` positions
 *                                        and use their own rope base (10k)
 *       x += rmsnorm(a, post_attention_norm)
 *       f = Wdown · (gelu_tanh(Wgate·h) * Wup·h),  h = rmsnorm(x, ffn_norm)
 *       x += rmsnorm(f, post_ffw_norm)
 *   logits = token_embd · rmsnorm(x)     (tied output)
 *
 * Q is scaled by 1/sqrt(head_dim) (1/sqrt(n_embd/n_head) for the 27B
 * shape, as llama.cpp does). Norm weights in GGUF already include Gemma's +1.
 */
#include <math.h>

#include "runtime/model.h"
#include "runtime/exec.h"

#define GEMMA3_SWA_PATTERN 6 /* layer il is global iff (il + 1) % 6 == 0 */

static int gemma3_load(el_model *m, el_error *err) {
    el_hparams *hp = &m->hp;
    int rc;
    hp->rope_mode = EL_ROPE_NEOX;
    if ((rc = el_hp_u32(m, "attention.sliding_window", false, 0, &hp->n_swa, err))) return rc;
    if ((rc = el_hp_f32(m, "rope.freq_base_swa", false, 10000.0f, &hp->rope_base_swa, err))) return rc;
    if ((rc = el_hp_check(m, "rope.freq_base_swa", hp->rope_base_swa, isfinite(hp->rope_base_swa) && hp->rope_base_swa > 0.0f,
                          "finite, > 0", err)))
        return rc;
    hp->rope_scale_swa = 1.0f;
    hp->swa_pattern = hp->n_swa > 0 ? GEMMA3_SWA_PATTERN : 0;
    hp->q_prescale = true; /* llama.cpp scales Q after RoPE and runs attention with scale 1 */
    /* 27B (62 layers, 5376 embd) scales by the model dim per head instead of head_dim. */
    if (hp->n_layer == 62) hp->attn_scale = 1.0f / sqrtf((float)(hp->n_embd / hp->n_head));
    if ((rc = el_bind_common_tensors(m, false, true, true, err))) return rc;
    for (int il = 0; il < hp->n_layer; il++)
        m->layers[il].swa = hp->swa_pattern > 0 && (il + 1) % hp->swa_pattern != 0;
    return 0;
}

static void gemma3_forward(el_session *s, const int32_t *toks, int n) {
    const el_model *m = s->m;
    const el_hparams *hp = &m->hp;
    const int E = hp->n_embd;
    const el_rope rope_global = {.mode = EL_ROPE_NEOX, .n_rot = hp->n_rot, .freq_base = hp->rope_base,
                                 .freq_scale = hp->rope_scale, .freq_factors = NULL};
    const el_rope rope_local = {.mode = EL_ROPE_NEOX, .n_rot = hp->n_rot, .freq_base = hp->rope_base_swa,
                                .freq_scale = hp->rope_scale_swa, .freq_factors = NULL};
    el_fwd_embed(s, toks, n, sqrtf((float)E));
    el_fwd_dump("inp_scaled", -1, s->x, (size_t)n * E);
    for (int il = 0; il < hp->n_layer; il++) {
        el_fwd_layer_begin(s, il);
        const el_layer *L = &m->layers[il];
        el_fwd_norm(s, il, "attn_norm", EL_T_X, L->attn_norm, EL_T_XB, n, E, hp->norm_eps);
        if (L->swa) el_fwd_attention(s, il, n, &rope_local, hp->n_swa);
        else el_fwd_attention(s, il, n, &rope_global, 0);
        el_fwd_norm(s, il, "post_attn_norm", EL_T_TMP, L->post_attn_norm, EL_T_TMP, n, E, hp->norm_eps);
        el_fwd_dump("attn_post_norm", il, s->tmp, (size_t)n * E);
        el_fwd_add(s, il, "attn_residual", EL_T_X, EL_T_TMP, n * E);
        if (il == hp->n_layer - 1) el_fwd_keep_last_row(s, &n);
        el_fwd_norm(s, il, "ffn_norm", EL_T_X, L->ffn_norm, EL_T_XB, n, E, hp->norm_eps);
        el_fwd_ffn(s, il, n, true);
        el_fwd_norm(s, il, "post_ffn_norm", EL_T_TMP, L->post_ffn_norm, EL_T_TMP, n, E, hp->norm_eps);
        el_fwd_dump("ffn_post_norm", il, s->tmp, (size_t)n * E);
        el_fwd_add(s, il, "ffn_residual", EL_T_X, EL_T_TMP, n * E);
        el_fwd_dump("l_out", il, s->x, (size_t)n * E);
    }
    el_fwd_output(s, n);
}

const el_arch el_arch_gemma3 = {"gemma3", gemma3_load, gemma3_forward, false};
