/*
 * smollm3.c — the SmolLM3 forward pass.
 *
 * Llama's block (RMS pre-norms, GQA, SwiGLU, adjacent-pair RoPE), except
 * that every 4th layer (il + 1 ≡ 0 mod 4) attends without RoPE ("NoPE"
 * layers). llama.cpp fixes the step at 4 (hparams.n_no_rope_layer_step) and
 * reads no metadata key for it, so neither does edgellm: a file cannot
 * choose another step, and there is no value to validate.
 */
#include "runtime/model.h"
#include "runtime/exec.h"

#define SMOLLM3_NO_ROPE_STEP 4 /* layer il skips RoPE iff (il + 1) % 4 == 0 */

static int smollm3_load(el_model *m, el_error *err) {
    m->hp.rope_mode = EL_ROPE_NORM;
    int rc = el_bind_common_tensors(m, false, false, false, err);
    if (rc) return rc;
    for (int il = 0; il < m->hp.n_layer; il++) m->layers[il].no_rope = (il + 1) % SMOLLM3_NO_ROPE_STEP == 0;
    return 0;
}

static void smollm3_forward(el_session *s, const int32_t *toks, int n) {
    const el_model *m = s->m;
    const el_hparams *hp = &m->hp;
    const int E = hp->n_embd;
    const el_rope rope = {.mode = EL_ROPE_NORM, .n_rot = hp->n_rot, .freq_base = hp->rope_base,
                          .freq_scale = hp->rope_scale, .freq_factors = NULL};
    el_fwd_embed(s, toks, n, 1.0f);
    for (int il = 0; il < hp->n_layer; il++) {
        el_fwd_layer_begin(s, il);
        const el_layer *L = &m->layers[il];
        el_fwd_norm(s, il, "attn_norm", EL_T_X, L->attn_norm, EL_T_XB, n, E, hp->norm_eps);
        el_fwd_attention(s, il, n, L->no_rope ? NULL : &rope, 0);
        el_fwd_add(s, il, "attn_residual", EL_T_X, EL_T_TMP, n * E);
        if (il == hp->n_layer - 1) el_fwd_keep_last_row(s, &n);
        el_fwd_norm(s, il, "ffn_norm", EL_T_X, L->ffn_norm, EL_T_XB, n, E, hp->norm_eps);
        el_fwd_ffn(s, il, n, false);
        el_fwd_add(s, il, "ffn_residual", EL_T_X, EL_T_TMP, n * E);
    }
    el_fwd_output(s, n);
}

const el_arch el_arch_smollm3 = {"smollm3", smollm3_load, smollm3_forward, false};
