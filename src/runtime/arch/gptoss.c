/*
 * gptoss.c — the gpt-oss forward pass (OpenAI's gpt-oss-20b/120b;
 * general.architecture "gpt-oss", llama.cpp's LLM_ARCH_OPENAI_MOE).
 *
 *   for each layer:
 *       a = attention(rmsnorm(x, attn_norm))  Q/K/V biases (optional, as
 *                                             llama.cpp), NEOX RoPE, scale
 *                                             1/sqrt(head_dim), a per-head
 *                                             sink logit in the softmax's
 *                                             denominator (attn_sinks), even
 *                                             layers attend only to the last
 *                                             `sliding_window` positions;
 *                                             output projection + its bias
 *       x += a
 *       x += moe(rmsnorm(x, post_attention_norm))
 *   logits = output · rmsnorm(x)        (the last row; the last layer runs
 *                                        on every row, as llama.cpp's graph)
 *
 * The MoE (el_op_moe): router logits + bias, the expert_used_count largest
 * logits chosen, their weights the softmax over the chosen (llama.cpp's
 * SOFTMAX_WEIGHT gating); each expert's gate/up/down products plus that
 * expert's bias row; the activation is the clamped SwiGLU (ggml_swiglu_oai,
 * alpha 1.702, limit 7: min(g,7)·σ(1.702·min(g,7))·(clamp(u,±7)+1)).
 *
 * Metadata as llama.cpp reads it: attention.sliding_window required, > 0;
 * attention.sliding_window_pattern, if present, must be 2 (layer il slides
 * iff il % 2 == 0); rope.freq_base_swa defaults to rope.freq_base;
 * expert_feed_forward_length required. Every tensor's shape is checked, with
 * an error naming it, before the session allocates anything. YaRN RoPE
 * (rope.scaling.type "yarn", as the released gpt-oss files carry): factor
 * rope.scaling.factor, original context rope.scaling.original_context_length
 * (default context_length), beta_fast 32, beta_slow 1, ext_factor 1 and
 * llama_context's attention factor (1/(1+0.1 ln f) cancelling get_mscale)
 * times ggml's 1 + 0.1 ln f, on global and sliding layers alike.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "runtime/model.h"
#include "runtime/exec.h"

#define GPTOSS_SWA_PATTERN 2

static int gptoss_hparams(el_model *m, el_error *err) {
    el_hparams *hp = &m->hp;
    int rc;
    char key[256];
    hp->rope_mode = EL_ROPE_NEOX;
    if ((rc = el_hp_u32(m, "attention.sliding_window", true, 0, &hp->n_swa, err))) return rc;
    if ((rc = el_hp_check(m, "attention.sliding_window", hp->n_swa, hp->n_swa > 0, "> 0", err))) return rc;
    uint32_t pat = 0;
    if (el_gguf_find(m->gguf, el_arch_key(m, "attention.sliding_window_pattern", key, sizeof key)) &&
        (!el_gguf_get_u32(m->gguf, key, &pat) || pat != GPTOSS_SWA_PATTERN))
        return el_set_error(err, EL_ERR_UNSUPPORTED, "metadata '%s': only the pattern %d (every other layer) is supported", key,
                            GPTOSS_SWA_PATTERN);
    if ((rc = el_hp_f32_pos(m, "rope.freq_base_swa", hp->rope_base, &hp->rope_base_swa, err))) return rc;
    hp->rope_scale_swa = hp->rope_scale;
    hp->swa_pattern = GPTOSS_SWA_PATTERN;
    if (hp->rope_yarn) { /* as llama.cpp: the original context, beta_fast 32, beta_slow 1, ext_factor 1 */
        if ((rc = el_hp_u32(m, "rope.scaling.original_context_length", false, hp->n_ctx_train, &m->n_ctx_orig, err))) return rc;
        if ((rc = el_hp_check(m, "rope.scaling.original_context_length", m->n_ctx_orig, m->n_ctx_orig > 0, "> 0", err)))
            return rc;
        float attn = 1.0f;
        if ((rc = el_hp_f32_pos(m, "rope.scaling.attn_factor", 1.0f, &attn, err))) return rc;
        /* llama_context: get_mscale(factor, 1) · 1/(1 + 0.1·ln factor) · attn_factor, each rounded to float */
        const float factor = 1.0f / hp->rope_scale;
        const float lf = logf(factor), ms = factor <= 1.0f ? 1.0f : 0.1f * lf + 1.0f;
        const float cancel = 1.0f / (1.0f + 0.1f * lf);
        m->rope_mscale = ms * cancel * attn;
    }
    hp->attn_scale = 1.0f / sqrtf((float)hp->n_rot); /* llama.cpp: 1/sqrt(n_rot) */
    if (!el_gguf_find(m->gguf, el_arch_key(m, "expert_feed_forward_length", key, sizeof key)))
        return el_set_error(err, EL_ERR_MISSING, "metadata '%s' is missing", key);
    return el_load_moe_hparams(m, false, err);
}

/* A 2-D F32 bias [ne0, ne1] (ne1 experts' rows), required. */
static int bind_rows(el_model *m, const char *name, int64_t ne0, int64_t ne1, const float **out, el_error *err) {
    const el_gguf_tensor *t = el_gguf_find_tensor(m->gguf, name);
    if (!t) return el_set_error(err, EL_ERR_MISSING, "tensor '%s' is missing", name);
    if (t->n_dims != 2 || t->ne[0] != ne0 || t->ne[1] != ne1)
        return el_set_error(err, EL_ERR_BAD_TENSOR, "tensor '%s' has %d dims [%lld, %lld], expected [%lld, %lld]", name, t->n_dims,
                            (long long)t->ne[0], (long long)(t->n_dims > 1 ? t->ne[1] : 1), (long long)ne0, (long long)ne1);
    if (t->type != EL_TYPE_F32 || (uintptr_t)t->data % sizeof(float))
        return el_set_error(err, EL_ERR_UNSUPPORTED, "tensor '%s' has type %s, expected F32", name, el_type_name(t->type));
    *out = t->data;
    return 0;
}

static int gptoss_load(el_model *m, el_error *err) {
    el_hparams *hp = &m->hp;
    int rc;
    if ((rc = gptoss_hparams(m, err))) return rc;
    const int64_t E = hp->n_embd, Q = (int64_t)hp->n_head * hp->head_dim_k, KV = (int64_t)hp->n_head_kv * hp->head_dim_k;
    const int64_t F = hp->n_ff_exp, NE = hp->n_expert;
    if ((rc = el_bind_mat(m, "token_embd.weight", E, hp->n_vocab, true, &m->tok_embd, err))) return rc;
    if ((rc = el_bind_vec(m, "output_norm.weight", E, true, &m->output_norm, err))) return rc;
    if ((rc = el_bind_mat(m, "output.weight", E, hp->n_vocab, true, &m->output, err))) return rc;
    m->layers = calloc((size_t)hp->n_layer, sizeof(el_layer));
    if (!m->layers) return el_set_error(err, EL_ERR_NOMEM, "out of memory");
    for (int il = 0; il < hp->n_layer; il++) {
        el_layer *L = &m->layers[il];
        el_moe *mo = &L->moe;
        char n[128];
#define NAME(s) (snprintf(n, sizeof n, "blk.%d.%s", il, s), n)
        if ((rc = el_bind_vec(m, NAME("attn_norm.weight"), E, true, &L->attn_norm, err))) return rc;
        if ((rc = el_bind_mat(m, NAME("attn_q.weight"), E, Q, true, &L->wq, err))) return rc;
        if ((rc = el_bind_mat(m, NAME("attn_k.weight"), E, KV, true, &L->wk, err))) return rc;
        if ((rc = el_bind_mat(m, NAME("attn_v.weight"), E, KV, true, &L->wv, err))) return rc;
        if ((rc = el_bind_mat(m, NAME("attn_output.weight"), Q, E, true, &L->wo, err))) return rc;
        if ((rc = el_bind_vec(m, NAME("attn_q.bias"), Q, false, &L->bq, err))) return rc;
        if ((rc = el_bind_vec(m, NAME("attn_k.bias"), KV, false, &L->bk, err))) return rc;
        if ((rc = el_bind_vec(m, NAME("attn_v.bias"), KV, false, &L->bv, err))) return rc;
        if ((rc = el_bind_vec(m, NAME("attn_output.bias"), E, true, &L->bo, err))) return rc;
        if ((rc = el_bind_vec(m, NAME("attn_sinks.weight"), hp->n_head, true, &L->sinks, err))) return rc;
        if ((rc = el_bind_vec(m, NAME("post_attention_norm.weight"), E, true, &L->ffn_norm, err))) return rc;
        if ((rc = el_bind_vec(m, NAME("ffn_gate_inp.bias"), NE, true, &mo->router_b, err))) return rc;
        if ((rc = bind_rows(m, NAME("ffn_gate_exps.bias"), F, NE, &mo->gate_b, err))) return rc;
        if ((rc = bind_rows(m, NAME("ffn_up_exps.bias"), F, NE, &mo->up_b, err))) return rc;
        if ((rc = bind_rows(m, NAME("ffn_down_exps.bias"), E, NE, &mo->down_b, err))) return rc;
#undef NAME
        L->swa = il % GPTOSS_SWA_PATTERN < GPTOSS_SWA_PATTERN - 1;
    }
    /* the router and the experts' matrices (shape and type checked, naming the tensor) */
    if ((rc = el_bind_moe_tensors(m, false, false, err))) return rc;
    for (int il = 0; il < hp->n_layer; il++) {
        m->layers[il].moe.softmax_weight = true;
        m->layers[il].moe.swiglu_oai = true;
    }
    return 0;
}

static void gptoss_forward(el_session *s, const int32_t *toks, int n) {
    const el_model *m = s->m;
    const el_hparams *hp = &m->hp;
    const int E = hp->n_embd;
    el_rope rope_global = {.mode = EL_ROPE_NEOX, .n_rot = hp->n_rot, .freq_base = hp->rope_base,
                           .freq_scale = hp->rope_scale, .freq_factors = NULL};
    el_rope rope_local = {.mode = EL_ROPE_NEOX, .n_rot = hp->n_rot, .freq_base = hp->rope_base_swa,
                          .freq_scale = hp->rope_scale_swa, .freq_factors = NULL};
    if (hp->rope_yarn) {
        el_rope *r[2] = {&rope_global, &rope_local};
        for (int i = 0; i < 2; i++) {
            r[i]->ext_factor = 1.0f, r[i]->mscale = m->rope_mscale;
            el_rope_yarn_corr(hp->n_rot, m->n_ctx_orig, r[i]->freq_base, 32.0f, 1.0f, &r[i]->corr_lo, &r[i]->corr_hi);
        }
    }
    el_fwd_embed(s, toks, n, 1.0f);
    for (int il = 0; il < hp->n_layer; il++) {
        el_fwd_layer_begin(s, il);
        const el_layer *L = &m->layers[il];
        el_fwd_norm(s, il, "attn_norm", EL_T_X, L->attn_norm, EL_T_XB, n, E, hp->norm_eps);
        if (L->swa) el_fwd_attention(s, il, n, &rope_local, hp->n_swa); /* + sinks, + output bias */
        else el_fwd_attention(s, il, n, &rope_global, 0);
        el_fwd_add(s, il, "attn_residual", EL_T_X, EL_T_TMP, n * E);
        el_fwd_norm(s, il, "post_attn_norm", EL_T_X, L->ffn_norm, EL_T_XB, n, E, hp->norm_eps);
        el_fwd_moe(s, il, n);
        el_fwd_add(s, il, "ffn_residual", EL_T_X, EL_T_TMP, n * E);
    }
    /* llama.cpp's gpt-oss graph runs the last layer's MoE on every row and picks
     * the output rows after it (its router product then takes the batched order) */
    el_fwd_keep_last_row(s, &n);
    el_fwd_output(s, n);
}

const el_arch el_arch_gptoss = {"gpt-oss", gptoss_load, gptoss_forward, false};
