/*
 * phi3.c — the Phi-3 / Phi-3.5 / Phi-4-mini forward pass.
 *
 *   x = embed(tokens)
 *   for each layer:
 *       q, k, v = rows of Wqkv · rmsnorm(x)          one fused projection
 *       x += Wo · attention(rope(q) / sqrt(head_dim), rope(k), v)   NEOX RoPE
 *       g, u = rows of Wup · rmsnorm(x)              fused gate+up (2·n_ff rows)
 *       x += Wdown · (silu(g) * u)
 *   logits = Wout · rmsnorm(x)            (Wout = token_embd when absent)
 *
 * The fused tensors are bound as row-range views (el_mat_rows): attn_qkv's
 * first n_embd rows are Q, then K, then V; ffn_up's first n_ff rows are the
 * gate, the next n_ff the up projection (llama.cpp's swiglu of the halves).
 * Separate attn_q/attn_k/attn_v are taken when attn_qkv is absent.
 *
 * Long RoPE (Phi-3 128k): rope_factors_long / rope_factors_short (n_rot/2
 * per-pair divisors) — the long ones when the session's context, rounded up
 * to a multiple of 256 as llama.cpp pads it, exceeds
 * rope.scaling.original_context_length (default: context_length), as
 * llama.cpp's get_rope_factors chooses — and rope.scaling.attn_factor, which
 * multiplies cos and sin (ggml's mscale). Q is scaled by 1/sqrt(head_dim)
 * after RoPE and attention runs with scale 1, as llama.cpp does.
 * attention.sliding_window is read and ignored: llama.cpp disables Phi's
 * sliding window (its conversion does not describe it correctly), and the
 * reference decides what the file means.
 */
#include <math.h>
#include <stdlib.h>

#include "runtime/model.h"
#include "runtime/exec.h"

static int phi3_load(el_model *m, el_error *err) {
    el_hparams *hp = &m->hp;
    int rc;
    hp->rope_mode = EL_ROPE_NEOX;
    hp->q_prescale = true; /* Q · 1/sqrt(head_dim) after RoPE, attention scale 1 */
    int swa = 0;
    if ((rc = el_hp_u32(m, "attention.sliding_window", false, 0, &swa, err))) return rc; /* read, then ignored */
    if ((rc = el_hp_u32(m, "rope.scaling.original_context_length", false, hp->n_ctx_train, &m->n_ctx_orig, err))) return rc;
    if ((rc = el_hp_check(m, "rope.scaling.original_context_length", m->n_ctx_orig, m->n_ctx_orig > 0, "> 0", err))) return rc;
    if ((rc = el_hp_f32_pos(m, "rope.scaling.attn_factor", 1.0f, &m->rope_mscale, err))) return rc;
    if (hp->head_dim_k * hp->n_head != hp->n_embd)
        return el_set_error(err, EL_ERR_BAD_VALUE, "phi3: head_count %d x key_length %d must equal embedding_length %d",
                            hp->n_head, hp->head_dim_k, hp->n_embd);
    const int64_t E = hp->n_embd, KV = (int64_t)hp->n_head_kv * hp->head_dim_k, F = hp->n_ff;
    if ((rc = el_bind_mat(m, "token_embd.weight", E, hp->n_vocab, true, &m->tok_embd, err))) return rc;
    if ((rc = el_bind_vec(m, "output_norm.weight", E, true, &m->output_norm, err))) return rc;
    if ((rc = el_bind_mat(m, "output.weight", E, hp->n_vocab, false, &m->output, err))) return rc;
    if (!m->output.data && !m->output.packed) m->output = m->tok_embd; /* tied */
    if ((rc = el_bind_vec(m, "rope_factors_long.weight", hp->n_rot / 2, false, &m->rope_long, err))) return rc;
    if ((rc = el_bind_vec(m, "rope_factors_short.weight", hp->n_rot / 2, false, &m->rope_short, err))) return rc;
    if (!m->rope_long != !m->rope_short)
        return el_set_error(err, EL_ERR_MISSING, "tensor '%s' is missing (long RoPE needs both factor tensors)",
                            m->rope_long ? "rope_factors_short.weight" : "rope_factors_long.weight");
    m->layers = calloc((size_t)hp->n_layer, sizeof(el_layer));
    if (!m->layers) return el_set_error(err, EL_ERR_NOMEM, "out of memory");
    for (int il = 0; il < hp->n_layer; il++) {
        el_layer *L = &m->layers[il];
        char n[128];
#define NAME(s) (snprintf(n, sizeof n, "blk.%d.%s", il, s), n)
        if ((rc = el_bind_vec(m, NAME("attn_norm.weight"), E, true, &L->attn_norm, err))) return rc;
        el_mat qkv;
        if ((rc = el_bind_mat(m, NAME("attn_qkv.weight"), E, E + 2 * KV, false, &qkv, err))) return rc;
        if (qkv.data) {
            L->wq = el_mat_rows(&qkv, 0, E);
            L->wk = el_mat_rows(&qkv, E, KV);
            L->wv = el_mat_rows(&qkv, E + KV, KV);
        } else {
            if (!el_gguf_find_tensor(m->gguf, NAME("attn_q.weight")))
                return el_set_error(err, EL_ERR_MISSING, "tensor 'blk.%d.attn_qkv.weight' is missing (nor are there attn_q/k/v)", il);
            if ((rc = el_bind_mat(m, NAME("attn_q.weight"), E, E, true, &L->wq, err))) return rc;
            if ((rc = el_bind_mat(m, NAME("attn_k.weight"), E, KV, true, &L->wk, err))) return rc;
            if ((rc = el_bind_mat(m, NAME("attn_v.weight"), E, KV, true, &L->wv, err))) return rc;
        }
        if ((rc = el_bind_mat(m, NAME("attn_output.weight"), E, E, true, &L->wo, err))) return rc;
        if ((rc = el_bind_vec(m, NAME("ffn_norm.weight"), E, true, &L->ffn_norm, err))) return rc;
        el_mat up;
        if ((rc = el_bind_mat(m, NAME("ffn_up.weight"), E, 2 * F, true, &up, err))) return rc;
        L->w_gate = el_mat_rows(&up, 0, F);
        L->w_up = el_mat_rows(&up, F, F);
        if ((rc = el_bind_mat(m, NAME("ffn_down.weight"), F, E, true, &L->w_down, err))) return rc;
#undef NAME
    }
    return 0;
}

static void phi3_forward(el_session *s, const int32_t *toks, int n) {
    const el_model *m = s->m;
    const el_hparams *hp = &m->hp;
    const int E = hp->n_embd;
    /* llama.cpp: the long factors when the context per sequence exceeds the original training
     * context — its context rounded up to a multiple of 256 (llama_context pads n_ctx so) */
    const long n_ctx_seq = ((long)s->n_ctx + 255) / 256 * 256;
    const float *ff = n_ctx_seq > m->n_ctx_orig ? m->rope_long : m->rope_short;
    const el_rope rope = {.mode = EL_ROPE_NEOX, .n_rot = hp->n_rot, .freq_base = hp->rope_base,
                          .freq_scale = hp->rope_scale, .freq_factors = ff, .mscale = m->rope_mscale};
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

const el_arch el_arch_phi3 = {"phi3", phi3_load, phi3_forward, false};
