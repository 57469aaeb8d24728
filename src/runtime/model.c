/*
 * model.c — loading a model: map and validate the GGUF, read the vocab, pick
 * the architecture by general.architecture, let it read its hyperparameters
 * and bind its tensors (shapes and types checked), start the thread pool.
 *
 * Invariant: after el_model_load returns a model, every el_mat / vector
 * pointer of the model points inside the validated mapping (or into a buffer
 * the model owns) with the shape the forward pass expects.
 */
#include "runtime/model.h"
#include "runtime/grammar.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backend/cpu/kernels.h"
#include "backend/cpu/layout.h"
#include "runtime/chat.h"
#include "util/error.h"

static const el_arch *const k_archs[] = {&el_arch_llama,   &el_arch_qwen2,    &el_arch_qwen3,    &el_arch_gemma3,
                                         &el_arch_granite, &el_arch_smollm3,  &el_arch_olmo2,    &el_arch_phi3,
                                         &el_arch_gemma2,  &el_arch_qwen3moe, &el_arch_qwen2moe, &el_arch_lfm2,
                                         &el_arch_gptoss};

el_model_params el_model_default_params(void) {
    el_model_params p = {.n_threads = 0, .vocab_only = false};
    return p;
}

const char *el_arch_key(const el_model *m, const char *suffix, char *buf, size_t cap) {
    snprintf(buf, cap, "%s.%s", m->arch_name, suffix);
    return buf;
}

int el_hp_u32(el_model *m, const char *suffix, bool required, int dflt, int *out, el_error *err) {
    char key[256];
    el_arch_key(m, suffix, key, sizeof key);
    const el_gguf_kv *kv = el_gguf_find(m->gguf, key);
    if (!kv) {
        if (required) return el_set_error(err, EL_ERR_MISSING, "metadata key '%s' is missing", key);
        *out = dflt;
        return 0;
    }
    uint32_t v;
    if (!el_gguf_get_u32(m->gguf, key, &v)) {
        /* some files store per-layer arrays (e.g. head_count_kv); take the first when uniform */
        if (kv->type == EL_GGUF_ARRAY && kv->arr_n > 0) {
            int64_t first, x;
            if (!el_gguf_arr_i64(kv, 0, &first)) return el_set_error(err, EL_ERR_BAD_VALUE, "'%s' is not an integer array", key);
            for (uint64_t i = 1; i < kv->arr_n; i++)
                if (!el_gguf_arr_i64(kv, i, &x) || x != first)
                    return el_set_error(err, EL_ERR_UNSUPPORTED, "'%s' varies per layer", key);
            v = (uint32_t)first;
        } else {
            return el_set_error(err, EL_ERR_BAD_VALUE, "metadata '%s' is not a 32-bit unsigned integer", key);
        }
    }
    if (v > (1u << 30)) return el_set_error(err, EL_ERR_BAD_VALUE, "metadata '%s' = %u is out of range", key, v);
    *out = (int)v;
    return 0;
}

int el_hp_kv_per_layer(el_model *m, int n_layer, int *n_kv, bool *flags, el_error *err) {
    char key[256];
    el_arch_key(m, "attention.head_count_kv", key, sizeof key);
    const el_gguf_kv *kv = el_gguf_find(m->gguf, key);
    if (!kv) return el_set_error(err, EL_ERR_MISSING, "metadata key '%s' is missing", key);
    uint32_t v;
    if (el_gguf_get_u32(m->gguf, key, &v)) { /* one value for every layer */
        if (v == 0 || v > (1u << 30)) return el_set_error(err, EL_ERR_BAD_VALUE, "metadata '%s' = %u is out of range", key, v);
        *n_kv = (int)v;
        if (flags) for (int il = 0; il < n_layer; il++) flags[il] = false;
        return 0;
    }
    if (kv->type != EL_GGUF_ARRAY)
        return el_set_error(err, EL_ERR_BAD_VALUE, "metadata '%s' is neither an integer nor an integer array", key);
    if (kv->arr_n != (uint64_t)n_layer)
        return el_set_error(err, EL_ERR_BAD_VALUE, "metadata '%s' has %llu entries, expected block_count = %d", key,
                            (unsigned long long)kv->arr_n, n_layer);
    int64_t common = 0;
    for (int il = 0; il < n_layer; il++) {
        int64_t x;
        if (!el_gguf_arr_i64(kv, (uint64_t)il, &x)) return el_set_error(err, EL_ERR_BAD_VALUE, "'%s' is not an integer array", key);
        if (x < 0 || x > (1 << 30))
            return el_set_error(err, EL_ERR_BAD_VALUE, "metadata '%s'[%d] = %lld is out of range", key, il, (long long)x);
        if (x && common && x != common)
            return el_set_error(err, EL_ERR_UNSUPPORTED, "metadata '%s': attention layers with %lld and %lld KV heads", key,
                                (long long)common, (long long)x);
        if (x) common = x;
        if (flags) flags[il] = x == 0;
    }
    if (!common) return el_set_error(err, EL_ERR_UNSUPPORTED, "metadata '%s': no layer has attention (every entry is 0)", key);
    *n_kv = (int)common;
    return 0;
}

int el_hp_f32(el_model *m, const char *suffix, bool required, float dflt, float *out, el_error *err) {
    char key[256];
    el_arch_key(m, suffix, key, sizeof key);
    if (!el_gguf_find(m->gguf, key)) {
        if (required) return el_set_error(err, EL_ERR_MISSING, "metadata key '%s' is missing", key);
        *out = dflt;
        return 0;
    }
    if (!el_gguf_get_f32(m->gguf, key, out))
        return el_set_error(err, EL_ERR_BAD_VALUE, "metadata '%s' is not a float", key);
    return 0;
}

int el_hp_check(el_model *m, const char *suffix, double v, bool ok, const char *rule, el_error *err) {
    if (ok) return 0;
    char key[256];
    el_arch_key(m, suffix, key, sizeof key);
    return el_set_error(err, EL_ERR_BAD_VALUE, "metadata '%s' = %g is out of range (%s)", key, v, rule);
}

int el_hp_f32_pos(el_model *m, const char *suffix, float dflt, float *out, el_error *err) {
    int rc = el_hp_f32(m, suffix, false, dflt, out, err);
    if (rc) return rc;
    return el_hp_check(m, suffix, *out, isfinite(*out) && *out > 0.0f, "finite, > 0", err);
}

el_mat el_mat_rows(const el_mat *w, int64_t r0, int64_t n) {
    el_mat v = *w;
    /* a file layout has no flat rows (data NULL): a view that splits a group has neither, and the load refuses it */
    v.data = w->data ? (const uint8_t *)w->data + (size_t)r0 * w->row_bytes : NULL;
    v.ne1 = n;
    if (w->layout && r0 % EL_LAYOUT_R16_ROWS == 0 && n % EL_LAYOUT_R16_ROWS == 0) /* whole groups: the packed view */
        v.packed = (const uint8_t *)w->packed + el_layout_group_bytes(w->layout, w->ne0) * (size_t)(r0 / EL_LAYOUT_R16_ROWS);
    else /* the flat rows: the same bits (a layout keeps its type's arithmetic) */
        v.packed = NULL, v.layout = EL_LAYOUT_FLAT;
    return v;
}

static int own(el_model *m, void *p) {
    if (m->n_owned == m->cap_owned) {
        int cap = m->cap_owned ? m->cap_owned * 2 : 16;
        void **n = realloc(m->owned, sizeof(void *) * (size_t)cap);
        if (!n) return -1;
        m->owned = n;
        m->cap_owned = cap;
    }
    m->owned[m->n_owned++] = p;
    return 0;
}

/* Flat rows for a matrix the file stores in a layout the CPU does not run: unpacked into memory the
 * model owns (counted with the weights); products read them with the flat kernels. */
static int mat_unpack(el_model *m, el_mat *w, el_error *err) {
    const size_t bytes = w->row_bytes * (size_t)w->ne1;
    void *p = malloc(bytes ? bytes : 1);
    if (!p || own(m, p)) {
        free(p);
        return el_set_error(err, EL_ERR_NOMEM, "out of memory unpacking a %" PRId64 " x %" PRId64 " matrix (%s)", w->ne0,
                            w->ne1, el_layout_name((el_layout)w->layout));
    }
    el_layout_unpack((el_layout)w->layout, w->packed, w->ne0, w->ne1, p, w->row_bytes);
    w->data = p;
    w->packed = NULL;
    w->layout = EL_LAYOUT_FLAT;
    m->owned_bytes += bytes;
    m->layout_unpacked++;
    m->layout_unpacked_bytes += bytes;
    return 0;
}

int el_bind_mat(el_model *m, const char *name, int64_t ne0, int64_t ne1, bool required, el_mat *out, el_error *err) {
    memset(out, 0, sizeof *out);
    const el_gguf_tensor *t = el_gguf_find_tensor(m->gguf, name);
    if (!t) {
        if (required) return el_set_error(err, EL_ERR_MISSING, "tensor '%s' is missing", name);
        return 0;
    }
    if (t->n_dims > 2 || t->ne[0] != ne0 || t->ne[1] != ne1)
        return el_set_error(err, EL_ERR_BAD_TENSOR, "tensor '%s' has shape [%lld, %lld, %lld], expected [%lld, %lld]", name,
                            (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)ne0, (long long)ne1);
    /* a weight layout the packager wrote (package/layout.h) computes with its base type's arithmetic */
    const el_layout fl = el_layout_of_type(t->type);
    const el_type type = fl ? (el_type)el_layout_base(fl) : (el_type)t->type;
    const el_type_info *ti = el_type_get(type);
    const el_cpu_type_kernels *k = el_cpu_kernels(type);
    if (!ti || !ti->weights_supported || !ti->to_float || !k || !k->vec_dot)
        return el_set_error(err, EL_ERR_UNSUPPORTED, "tensor '%s' has type %s, which edgellm cannot compute with", name,
                            el_type_name(t->type));
    /* MXFP4: refuse a NaN exponent before anything computes with it (a read of the tensor) */
    int rc = el_gguf_check_values(t, err);
    if (rc) return rc;
    out->type = type;
    out->ne0 = ne0;
    out->ne1 = ne1;
    out->data = t->data;
    out->row_bytes = el_row_size(out->type, ne0);
    if (fl) {
        out->data = NULL; /* no flat rows: products read the packed groups, mapped as they are */
        out->packed = t->data;
        out->layout = fl;
        if (!el_cpu_layout_runs(fl) && (rc = mat_unpack(m, out, err))) return rc;
        if (out->layout) m->layout_file_mats++, m->layout_set |= 1u << fl;
    }
    return 0;
}

static int bind_floats(el_model *m, const char *name, const el_gguf_tensor *t, int64_t n, const float **out, el_error *err);

int el_bind_vec(el_model *m, const char *name, int64_t n, bool required, const float **out, el_error *err) {
    *out = NULL;
    const el_gguf_tensor *t = el_gguf_find_tensor(m->gguf, name);
    if (!t) {
        if (required) return el_set_error(err, EL_ERR_MISSING, "tensor '%s' is missing", name);
        return 0;
    }
    if (t->n_dims != 1 || t->ne[0] != n)
        return el_set_error(err, EL_ERR_BAD_TENSOR, "tensor '%s' has %d dims and %lld elements, expected a vector of %lld",
                            name, t->n_dims, (long long)t->ne[0], (long long)n);
    return bind_floats(m, name, t, n, out, err);
}

int el_bind_flat(el_model *m, const char *name, int64_t n, const float **out, el_error *err) {
    *out = NULL;
    const el_gguf_tensor *t = el_gguf_find_tensor(m->gguf, name);
    if (!t) return el_set_error(err, EL_ERR_MISSING, "tensor '%s' is missing", name);
    int64_t all = 1;
    for (int d = 0; d < t->n_dims; d++) all *= t->ne[d];
    if (all != n)
        return el_set_error(err, EL_ERR_BAD_TENSOR, "tensor '%s' has %lld elements, expected %lld", name, (long long)all,
                            (long long)n);
    return bind_floats(m, name, t, n, out, err);
}

static int bind_floats(el_model *m, const char *name, const el_gguf_tensor *t, int64_t n, const float **out, el_error *err) {
    /* read in place, except when matrices are repacked at load: their flat pages leave the process, and a
     * read of a vector between them would map large page-cache folios around it back in (PERFORMANCE.md) */
    if (t->type == EL_TYPE_F32 && ((uintptr_t)t->data % sizeof(float)) == 0 && !el_cpu_layout_requested()) {
        *out = t->data;
        return 0;
    }
    const el_type_info *ti = el_type_get(t->type);
    if (!ti || !ti->to_float || n % ti->blck_size)
        return el_set_error(err, EL_ERR_UNSUPPORTED, "tensor '%s' has type %s, unsupported for a vector", name, el_type_name(t->type));
    float *buf = malloc(sizeof(float) * (size_t)n);
    if (!buf || own(m, buf)) { free(buf); return el_set_error(err, EL_ERR_NOMEM, "out of memory converting '%s'", name); }
    m->owned_bytes += sizeof(float) * (size_t)n;
    ti->to_float(t->data, buf, n);
    *out = buf;
    return 0;
}

int el_load_common_hparams(el_model *m, el_error *err) {
    el_hparams *hp = &m->hp;
    int rc;
    if ((rc = el_hp_u32(m, "embedding_length", true, 0, &hp->n_embd, err))) return rc;
    if ((rc = el_hp_u32(m, "block_count", true, 0, &hp->n_layer, err))) return rc;
    if ((rc = el_hp_u32(m, "attention.head_count", true, 0, &hp->n_head, err))) return rc;
    if (m->arch->kv_per_layer) {
        if (hp->n_layer <= 0 || hp->n_layer > (1 << 16))
            return el_hp_check(m, "block_count", hp->n_layer, false, "1..65536", err);
        if ((rc = el_hp_kv_per_layer(m, hp->n_layer, &hp->n_head_kv, NULL, err))) return rc;
    } else if ((rc = el_hp_u32(m, "attention.head_count_kv", false, hp->n_head, &hp->n_head_kv, err))) {
        return rc;
    }
    if ((rc = el_hp_u32(m, "feed_forward_length", true, 0, &hp->n_ff, err))) return rc;
    if ((rc = el_hp_u32(m, "context_length", false, 2048, &hp->n_ctx_train, err))) return rc;
    if (hp->n_embd <= 0 || hp->n_layer <= 0 || hp->n_head <= 0 || hp->n_head_kv <= 0 || hp->n_ff <= 0)
        return el_set_error(err, EL_ERR_BAD_VALUE, "%s: zero embedding/layers/heads/ffn in metadata", m->arch_name);
    /* every layer has its own tensors: with fewer tensors than layers some are missing (checked
     * before the block count sizes per-layer arrays) */
    if ((int64_t)hp->n_layer > el_gguf_n_tensors(m->gguf))
        return el_set_error(err, EL_ERR_MISSING, "%s: block_count %d but the file has only %lld tensors: layer tensors are missing",
                            m->arch_name, hp->n_layer, (long long)el_gguf_n_tensors(m->gguf));
    if (hp->n_head % hp->n_head_kv)
        return el_set_error(err, EL_ERR_BAD_VALUE, "%s: head_count %d is not a multiple of head_count_kv %d", m->arch_name,
                            hp->n_head, hp->n_head_kv);
    int dflt_hd = hp->n_embd / hp->n_head;
    if ((rc = el_hp_u32(m, "attention.key_length", false, dflt_hd, &hp->head_dim_k, err))) return rc;
    if ((rc = el_hp_u32(m, "attention.value_length", false, hp->head_dim_k, &hp->head_dim_v, err))) return rc;
    if (hp->head_dim_k != hp->head_dim_v || hp->head_dim_k <= 0 || hp->head_dim_k > EL_MAX_HEAD_DIM || hp->head_dim_k % 2)
        return el_set_error(err, EL_ERR_UNSUPPORTED, "%s: head dims k=%d v=%d unsupported (equal, even, <= %d)", m->arch_name,
                            hp->head_dim_k, hp->head_dim_v, EL_MAX_HEAD_DIM);
    if (hp->n_ctx_train <= 0) return el_hp_check(m, "context_length", hp->n_ctx_train, false, "> 0", err);
    if ((rc = el_hp_f32(m, "attention.layer_norm_rms_epsilon", true, 0, &hp->norm_eps, err))) return rc;
    /* a NaN, zero or huge epsilon loads fine and computes garbage (NaN logits): refuse it here */
    if ((rc = el_hp_check(m, "attention.layer_norm_rms_epsilon", hp->norm_eps,
                          isfinite(hp->norm_eps) && hp->norm_eps > 0.0f && hp->norm_eps <= 1e-2f, "finite, 0 < eps <= 0.01",
                          err)))
        return rc;
    if ((rc = el_hp_f32(m, "rope.freq_base", false, 10000.0f, &hp->rope_base, err))) return rc;
    if ((rc = el_hp_check(m, "rope.freq_base", hp->rope_base, isfinite(hp->rope_base) && hp->rope_base > 0.0f,
                          "finite, > 0", err)))
        return rc;
    if ((rc = el_hp_u32(m, "rope.dimension_count", false, hp->head_dim_k, &hp->n_rot, err))) return rc;
    if (hp->n_rot <= 0 || hp->n_rot > hp->head_dim_k || hp->n_rot % 2)
        return el_set_error(err, EL_ERR_BAD_VALUE, "%s: rope.dimension_count %d invalid for head dim %d", m->arch_name, hp->n_rot,
                            hp->head_dim_k);
    /* linear rope scaling: positions × 1/factor */
    float factor = 0.0f;
    if ((rc = el_hp_f32(m, "rope.scaling.factor", false, 0.0f, &factor, err))) return rc;
    char key[256];
    if (el_gguf_find(m->gguf, el_arch_key(m, "rope.scaling.factor", key, sizeof key)) &&
        (rc = el_hp_check(m, "rope.scaling.factor", factor, isfinite(factor) && factor > 0.0f, "finite, > 0", err)))
        return rc;
    el_str stype = {0};
    bool has_type = el_gguf_get_str(m->gguf, el_arch_key(m, "rope.scaling.type", key, sizeof key), &stype);
    hp->rope_scale = 1.0f;
    hp->rope_yarn = false;
    /* YaRN: only an architecture that builds its RoPE with it (gpt-oss) takes it */
    const bool yarn_ok = !strcmp(m->arch_name, "gpt-oss");
    if (has_type && (el_str_eq(stype, "linear") || (yarn_ok && el_str_eq(stype, "yarn"))) && factor > 0.0f) {
        hp->rope_scale = 1.0f / factor;
        hp->rope_yarn = el_str_eq(stype, "yarn");
    } else if (has_type && !el_str_eq(stype, "none") && !el_str_eq(stype, "linear") && !(yarn_ok && el_str_eq(stype, "yarn")))
        return el_set_error(err, EL_ERR_UNSUPPORTED, "%s: rope scaling type '%.*s' is not supported", m->arch_name,
                            (int)stype.len, stype.ptr);
    hp->rope_base_swa = hp->rope_base;
    hp->rope_scale_swa = 1.0f;
    hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim_k);
    hp->embd_scale = 1.0f;
    const el_gguf_tensor *emb = el_gguf_find_tensor(m->gguf, "token_embd.weight");
    if (!emb) return el_set_error(err, EL_ERR_MISSING, "tensor 'token_embd.weight' is missing");
    hp->n_vocab = (int)emb->ne[1];
    if (hp->n_vocab != el_vocab_n_tokens(m->vocab))
        return el_set_error(err, EL_ERR_BAD_TENSOR, "token_embd.weight has %d rows but the vocab has %d tokens", hp->n_vocab,
                            el_vocab_n_tokens(m->vocab));
    return 0;
}

int el_bind_common_tensors(el_model *m, bool qkv_bias, bool qk_norm, bool post_norms, el_error *err) {
    el_hparams *hp = &m->hp;
    int rc;
    const int64_t E = hp->n_embd, Q = (int64_t)hp->n_head * hp->head_dim_k, KV = (int64_t)hp->n_head_kv * hp->head_dim_k;
    if ((rc = el_bind_mat(m, "token_embd.weight", E, hp->n_vocab, true, &m->tok_embd, err))) return rc;
    if ((rc = el_bind_vec(m, "output_norm.weight", E, true, &m->output_norm, err))) return rc;
    if ((rc = el_bind_mat(m, "output.weight", E, hp->n_vocab, false, &m->output, err))) return rc;
    if (!m->output.data && !m->output.packed) m->output = m->tok_embd; /* tied */
    if ((rc = el_bind_vec(m, "rope_freqs.weight", hp->n_rot / 2, false, &m->rope_freqs, err))) return rc;
    m->layers = calloc((size_t)hp->n_layer, sizeof(el_layer));
    if (!m->layers) return el_set_error(err, EL_ERR_NOMEM, "out of memory");
    for (int il = 0; il < hp->n_layer; il++) {
        el_layer *L = &m->layers[il];
        char n[128];
#define NAME(s) (snprintf(n, sizeof n, "blk.%d.%s", il, s), n)
        if ((rc = el_bind_vec(m, NAME("attn_norm.weight"), E, true, &L->attn_norm, err))) return rc;
        if ((rc = el_bind_mat(m, NAME("attn_q.weight"), E, Q, true, &L->wq, err))) return rc;
        if ((rc = el_bind_mat(m, NAME("attn_k.weight"), E, KV, true, &L->wk, err))) return rc;
        if ((rc = el_bind_mat(m, NAME("attn_v.weight"), E, KV, true, &L->wv, err))) return rc;
        if ((rc = el_bind_mat(m, NAME("attn_output.weight"), Q, E, true, &L->wo, err))) return rc;
        if (qkv_bias) {
            if ((rc = el_bind_vec(m, NAME("attn_q.bias"), Q, true, &L->bq, err))) return rc;
            if ((rc = el_bind_vec(m, NAME("attn_k.bias"), KV, true, &L->bk, err))) return rc;
            if ((rc = el_bind_vec(m, NAME("attn_v.bias"), KV, true, &L->bv, err))) return rc;
        }
        if (qk_norm) {
            if ((rc = el_bind_vec(m, NAME("attn_q_norm.weight"), hp->head_dim_k, true, &L->q_norm, err))) return rc;
            if ((rc = el_bind_vec(m, NAME("attn_k_norm.weight"), hp->head_dim_k, true, &L->k_norm, err))) return rc;
        }
        if (post_norms) {
            if ((rc = el_bind_vec(m, NAME("post_attention_norm.weight"), E, true, &L->post_attn_norm, err))) return rc;
            if ((rc = el_bind_vec(m, NAME("post_ffw_norm.weight"), E, true, &L->post_ffn_norm, err))) return rc;
        }
        if ((rc = el_bind_vec(m, NAME("ffn_norm.weight"), E, true, &L->ffn_norm, err))) return rc;
        if (hp->n_expert > 0) continue; /* a mixture of experts instead (el_bind_moe_tensors) */
        if ((rc = el_bind_mat(m, NAME("ffn_gate.weight"), E, hp->n_ff, true, &L->w_gate, err))) return rc;
        if ((rc = el_bind_mat(m, NAME("ffn_up.weight"), E, hp->n_ff, true, &L->w_up, err))) return rc;
        if ((rc = el_bind_mat(m, NAME("ffn_down.weight"), hp->n_ff, E, true, &L->w_down, err))) return rc;
#undef NAME
    }
    return 0;
}

int el_load_moe_hparams(el_model *m, bool shared, el_error *err) {
    el_hparams *hp = &m->hp;
    int rc;
    if ((rc = el_hp_u32(m, "expert_count", true, 0, &hp->n_expert, err))) return rc;
    if ((rc = el_hp_check(m, "expert_count", hp->n_expert, hp->n_expert >= 1 && hp->n_expert <= EL_MAX_EXPERTS,
                          "1 to 1024", err)))
        return rc;
    if ((rc = el_hp_u32(m, "expert_used_count", true, 0, &hp->n_expert_used, err))) return rc;
    if ((rc = el_hp_check(m, "expert_used_count", hp->n_expert_used,
                          hp->n_expert_used >= 1 && hp->n_expert_used <= hp->n_expert, "1 to expert_count", err)))
        return rc;
    /* llama.cpp's default when the key is absent: feed_forward_length / expert_used_count */
    if ((rc = el_hp_u32(m, "expert_feed_forward_length", false, hp->n_ff / hp->n_expert_used, &hp->n_ff_exp, err)))
        return rc;
    if ((rc = el_hp_check(m, "expert_feed_forward_length", hp->n_ff_exp, hp->n_ff_exp >= 1 && hp->n_ff_exp <= (1 << 20),
                          "1 to 2^20", err)))
        return rc;
    hp->n_ff_shexp = 0;
    if (shared) {
        if ((rc = el_hp_u32(m, "expert_shared_feed_forward_length", false, hp->n_ff, &hp->n_ff_shexp, err))) return rc;
        if ((rc = el_hp_check(m, "expert_shared_feed_forward_length", hp->n_ff_shexp,
                              hp->n_ff_shexp >= 1 && hp->n_ff_shexp <= (1 << 20), "1 to 2^20", err)))
            return rc;
    }
    return 0;
}

/* A 3-D expert tensor [ne0, ne1, n_expert]: expert 0's matrix in *out, the bytes between experts in *stride. */
static int bind_experts(el_model *m, const char *name, int64_t ne0, int64_t ne1, int64_t n_expert, el_mat *out,
                        size_t *stride, el_error *err) {
    memset(out, 0, sizeof *out);
    const el_gguf_tensor *t = el_gguf_find_tensor(m->gguf, name);
    if (!t) return el_set_error(err, EL_ERR_MISSING, "tensor '%s' is missing", name);
    if (t->n_dims != 3 || t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != n_expert)
        return el_set_error(err, EL_ERR_BAD_TENSOR, "tensor '%s' has %d dims [%lld, %lld, %lld], expected [%lld, %lld, %lld]",
                            name, t->n_dims, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)ne0,
                            (long long)ne1, (long long)n_expert);
    const el_type_info *ti = el_type_get(t->type);
    const el_cpu_type_kernels *k = el_cpu_kernels((el_type)t->type);
    if (!ti || !ti->weights_supported || !ti->to_float || !k || !k->vec_dot || ne0 % ti->blck_size)
        return el_set_error(err, EL_ERR_UNSUPPORTED, "tensor '%s' has type %s, which edgellm cannot compute with", name,
                            el_type_name(t->type));
    out->type = (el_type)t->type;
    out->ne0 = ne0;
    out->ne1 = ne1;
    out->data = t->data;
    out->row_bytes = el_row_size(out->type, ne0);
    *stride = out->row_bytes * (size_t)ne1;
    return 0;
}

int el_bind_moe_tensors(el_model *m, bool shared, bool norm_w, el_error *err) {
    const el_hparams *hp = &m->hp;
    const int64_t E = hp->n_embd, F = hp->n_ff_exp, NE = hp->n_expert;
    int rc;
    for (int il = 0; il < hp->n_layer; il++) {
        el_moe *mo = &m->layers[il].moe;
        char n[128];
#define NAME(s) (snprintf(n, sizeof n, "blk.%d.%s", il, s), n)
        mo->n_expert = hp->n_expert, mo->n_used = hp->n_expert_used, mo->norm_w = norm_w, mo->w_scale = 0.0f;
        if ((rc = el_bind_mat(m, NAME("ffn_gate_inp.weight"), E, NE, true, &mo->router, err))) return rc;
        if ((rc = bind_experts(m, NAME("ffn_gate_exps.weight"), E, F, NE, &mo->gate, &mo->stride_gate, err))) return rc;
        if ((rc = bind_experts(m, NAME("ffn_up_exps.weight"), E, F, NE, &mo->up, &mo->stride_up, err))) return rc;
        if ((rc = bind_experts(m, NAME("ffn_down_exps.weight"), F, E, NE, &mo->down, &mo->stride_down, err))) return rc;
        mo->has_shared = shared;
        if (shared) {
            const int64_t S = hp->n_ff_shexp;
            if ((rc = el_bind_mat(m, NAME("ffn_gate_inp_shexp.weight"), E, 1, true, &mo->sh_inp, err))) return rc;
            if ((rc = el_bind_mat(m, NAME("ffn_gate_shexp.weight"), E, S, true, &mo->sh_gate, err))) return rc;
            if ((rc = el_bind_mat(m, NAME("ffn_up_shexp.weight"), E, S, true, &mo->sh_up, err))) return rc;
            if ((rc = el_bind_mat(m, NAME("ffn_down_shexp.weight"), S, E, true, &mo->sh_down, err))) return rc;
        }
#undef NAME
    }
    return 0;
}

void el_logf(const el_model *m, el_log_level level, const char *fmt, ...) {
    if (!m || !m->log_cb) return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    m->log_cb(level, msg, m->log_user);
}

#define EL_LAYER_MATS 15 /* the products a layer may have (fill_mem) */

/*
 * Weight layouts (backend/cpu/layout.h, EL_WEIGHT_LAYOUT): every dense
 * product whose matrix gets a layout is repacked into memory the model owns
 * and counts with its weights (owned_bytes, which the capacity plan adds to
 * the file). The flat rows stay mapped for every other reader (the token
 * embedding of a tied output matrix, the other backends, LoRA); with --load
 * mmap their pages are dropped from the process once packed (pack_task).
 * The model's threads pack.
 */
typedef struct {
    const el_mat *w;
    el_layout l;
    void *dst;
    int64_t rows; /* rows of a piece (whole groups) */
    long pg;      /* page size: drop the flat pages of a packed piece; 0: keep them */
} pack_job;

/* Thread ith packs pieces ith, ith + nth, ... of about 4 MiB each; with --load mmap the flat pages a
 * piece read leave the process once it is packed (they are the file's, read again from the page cache
 * if something reads them: a tied embedding's rows), so neither the peak nor the resident weights grow
 * by the copy's size (one page a piece boundary may stay). The other load modes lock or prefetch them. */
static void pack_task(void *ctx, int ith, int nth) {
    const pack_job *j = ctx;
    const el_mat *w = j->w;
    const size_t gb = el_layout_group_bytes(j->l, w->ne0);
    for (int64_t r0 = j->rows * ith; r0 < w->ne1; r0 += j->rows * nth) {
        const int64_t n = w->ne1 - r0 < j->rows ? w->ne1 - r0 : j->rows;
        const uint8_t *src = (const uint8_t *)w->data + w->row_bytes * (size_t)r0;
        el_layout_pack(j->l, src, w->row_bytes, w->ne0, n, (uint8_t *)j->dst + gb * (size_t)(r0 / EL_LAYOUT_R16_ROWS));
        if (j->pg <= 0) continue;
        const uintptr_t pg = (uintptr_t)j->pg, a = ((uintptr_t)src + pg - 1) / pg * pg;
        const uintptr_t e = ((uintptr_t)src + w->row_bytes * (size_t)n) / pg * pg;
        if (e > a) (void)madvise((void *)a, e - a, MADV_DONTNEED);
    }
}

/* After the architecture bound its tensors: views that split a group of a file's layout refused (an
 * embedding reads its rows from the groups: el_op_get_row); then, with EL_WEIGHT_LAYOUT=r16, the flat
 * matrices repacked. */
static int apply_layouts(el_model *m, el_error *err) {
    for (int il = 0; il < m->hp.n_layer; il++) {
        const el_layer *L = &m->layers[il];
        const el_mat *lm[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down, &L->conv_in, &L->conv_out};
        for (size_t i = 0; i < sizeof lm / sizeof lm[0]; i++)
            if (lm[i]->ne1 > 0 && !lm[i]->data && !lm[i]->packed)
                return el_set_error(err, EL_ERR_BAD_TENSOR,
                                    "layer %d: a fused tensor in a weight layout is split at a row that is not a multiple "
                                    "of %d; write this model without --layout",
                                    il, EL_LAYOUT_R16_ROWS);
    }
    if (m->layout_file_mats || m->layout_unpacked)
        el_logf(m, EL_LOG_INFO, "weight layout from the file: %d matrices mapped as packed, %d unpacked (%zu bytes)",
                m->layout_file_mats, m->layout_unpacked, m->layout_unpacked_bytes);
    if (!el_cpu_layout_requested()) return 0;
    for (int il = -1; il < m->hp.n_layer; il++) {
        el_layer *L = il >= 0 ? &m->layers[il] : NULL;
        el_mat *mats[10] = {&m->output};
        int n = 1;
        if (L) {
            el_mat *lm[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down, &L->conv_in, &L->conv_out};
            n = 0;
            for (size_t i = 0; i < sizeof lm / sizeof lm[0]; i++) mats[n++] = lm[i];
        }
        for (int i = 0; i < n; i++) {
            el_mat *w = mats[i];
            if (!w->data || w->packed) continue;
            const el_layout l = el_cpu_layout_for(w->type, w->ne0, w->ne1);
            if (l == EL_LAYOUT_FLAT) continue;
            const size_t bytes = el_layout_bytes(l, w->ne0, w->ne1);
            void *p = aligned_alloc(64, (bytes + 63) / 64 * 64);
            if (!p || own(m, p)) {
                free(p);
                return el_set_error(err, EL_ERR_NOMEM, "out of memory repacking a %" PRId64 " x %" PRId64 " matrix (%s)",
                                    w->ne0, w->ne1, el_layout_name(l));
            }
            pack_job job = {.w = w, .l = l, .dst = p, .pg = m->load.mode == EL_LOAD_MMAP ? sysconf(_SC_PAGESIZE) : 0};
            const int64_t piece = (int64_t)((4u << 20) / w->row_bytes) / EL_LAYOUT_R16_ROWS * EL_LAYOUT_R16_ROWS;
            job.rows = piece > EL_LAYOUT_R16_ROWS ? piece : EL_LAYOUT_R16_ROWS;
            el_pool_run(m->pool, pack_task, &job);
            w->packed = p;
            w->layout = l;
            m->owned_bytes += bytes;
            m->layout_bytes += bytes;
            m->layout_mats++;
            m->layout_set |= 1u << l;
        }
    }
    if (m->layout_mats)
        el_logf(m, EL_LOG_INFO, "weight layout %s: %d matrices repacked, %zu bytes", el_layout_set_name(m->layout_set),
                m->layout_mats, m->layout_bytes);
    return 0;
}

/* m->mem: what the memory layer plans from (memory/plan.h), read off the bound
 * weights; the bytes a session has beside its block are this file's to know. */
static int fill_mem(el_model *m, el_error *err) {
    const el_hparams *hp = &m->hp;
    const int n = hp->n_layer;
    m->mem_swa = calloc((size_t)n, sizeof(bool));
    m->mem_mats = calloc((size_t)n * EL_LAYER_MATS, sizeof(el_plan_mat));
    if (!m->mem_swa || !m->mem_mats) { el_set_error(err, EL_ERR_NOMEM, "out of memory"); return -1; }
    uint64_t exp_bytes = 0, exp_token = 0, moe_fixed = 0;
    for (int il = 0; il < n; il++) {
        const el_layer *L = &m->layers[il];
        const el_moe *mo = &L->moe;
        /* a MoE layer's products: the router, one expert's gate/up/down, the shared expert's (absent: zeros);
         * a conv layer's: in_proj in Q's place, out_proj in O's */
        const el_mat *wq = L->conv ? &L->conv_in : &L->wq, *wo = L->conv ? &L->conv_out : &L->wo;
        const el_mat *mats[EL_LAYER_MATS] = {wq,           &L->wk,     &L->wv,   wo,             &L->w_gate,  &L->w_up,
                                             &L->w_down,   &mo->router, &mo->gate, &mo->up,       &mo->down,   &mo->sh_inp,
                                             &mo->sh_gate, &mo->sh_up,  &mo->sh_down};
        for (int i = 0; i < EL_LAYER_MATS; i++)
            m->mem_mats[il * EL_LAYER_MATS + i] = (el_plan_mat){.type = mats[i]->type, .ne0 = mats[i]->ne0};
        m->mem_swa[il] = L->swa;
        if (hp->n_expert > 0) {
            const uint64_t all = (uint64_t)mo->stride_gate + mo->stride_up + mo->stride_down;
            exp_bytes += all * (uint64_t)mo->n_expert;
            exp_token += all * (uint64_t)mo->n_used;
            moe_fixed += (uint64_t)mo->router.row_bytes * (uint64_t)mo->router.ne1;
            if (mo->has_shared)
                moe_fixed += (uint64_t)mo->sh_inp.row_bytes + (uint64_t)mo->sh_gate.row_bytes * mo->sh_gate.ne1 +
                             (uint64_t)mo->sh_up.row_bytes * mo->sh_up.ne1 + (uint64_t)mo->sh_down.row_bytes * mo->sh_down.ne1;
        }
    }
    m->mem = (el_mem_model){
        .n_layer = n, .n_embd = hp->n_embd,
        /* a MoE layer has no dense FFN: its own scratch (el_moe_scratch_bytes) holds the experts' rows */
        .n_ff = hp->n_expert > 0 ? (hp->n_ff_shexp > hp->n_ff_exp ? hp->n_ff_shexp : hp->n_ff_exp) : hp->n_ff, .n_head = hp->n_head, .n_head_kv = hp->n_head_kv,
        .head_dim_k = hp->head_dim_k, .head_dim_v = hp->head_dim_v, .n_vocab = hp->n_vocab, .n_swa = hp->n_swa,
        .n_ctx_train = hp->n_ctx_train, .layer_swa = m->mem_swa, .mats = m->mem_mats, .n_mats = n * EL_LAYER_MATS,
        .n_conv_layers = hp->n_conv, .conv_width = hp->conv_width,
        .output = {.type = m->output.type, .ne0 = m->output.ne0},
        .n_expert = hp->n_expert, .n_expert_used = hp->n_expert_used,
        .n_ff_moe = hp->n_ff_shexp > hp->n_ff_exp ? hp->n_ff_shexp : hp->n_ff_exp,
        .expert_bytes = exp_bytes, .expert_bytes_token = exp_token, .moe_other_bytes = moe_fixed,
        .session_fixed = sizeof(el_session) + 2 * sizeof(void *) * (size_t)n + el_exec_bytes(n)};
    return 0;
}

/* The expert residency set (memory/experts.h) over every MoE layer's routed experts, everything
 * resident until a budget is set; m->mem learns the bytes a release can drop. */
static int experts_open(el_model *m, el_load_mode mode, el_error *err) {
    const int n = m->hp.n_layer;
    el_experts_layer *ls = calloc((size_t)n, sizeof *ls);
    if (!ls) return el_set_error(err, EL_ERR_NOMEM, "out of memory");
    for (int il = 0; il < n; il++) {
        const el_moe *mo = &m->layers[il].moe;
        ls[il] = (el_experts_layer){.base = {mo->gate.data, mo->up.data, mo->down.data},
                                    .stride = {mo->stride_gate, mo->stride_up, mo->stride_down}};
    }
    m->experts = el_experts_new(ls, n, m->hp.n_expert, m->hp.n_expert_used, UINT64_MAX);
    free(ls);
    if (!m->experts) return el_set_error(err, EL_ERR_NOMEM, "out of memory (expert residency set)");
    el_experts_stats st;
    el_experts_get_stats(m->experts, &st);
    /* only pages of the file's own mapping may be released: a locked load keeps them all */
    m->experts_releasable = mode == EL_LOAD_MMAP || mode == EL_LOAD_PREFETCH;
    m->mem.expert_fixed = m->experts_releasable ? st.fixed : st.total;
    m->mem.expert_resident = st.total;
    return 0;
}

int el_model_set_expert_budget(el_model *m, uint64_t bytes, el_error *err) {
    if (!m) return el_set_error(err, EL_ERR_INVALID_ARG, "model is NULL");
    const double M = 1048576.0;
    if (!m->experts)
        return el_set_error(err, EL_ERR_INVALID_ARG, "expert budget: this %s model has no routed experts", m->arch_name);
    el_experts_stats st;
    el_experts_get_stats(m->experts, &st);
    if (bytes < st.per_token)
        return el_set_error(err, EL_ERR_INVALID_ARG,
                            "expert budget of %.2f MiB is below one token's experts (%.2f MiB: %d of %d experts in each "
                            "of %d layers)", bytes / M, st.per_token / M, m->hp.n_expert_used, m->hp.n_expert,
                            m->hp.n_layer);
    if (bytes < st.total && !m->experts_releasable)
        return el_set_error(err, EL_ERR_INVALID_ARG,
                            "expert budget of %.2f MiB is below the experts' %.2f MiB, but the load mode %s locks "
                            "them in memory (use --load mmap)", bytes / M, st.total / M, el_load_mode_name(m->load.mode));
    if (el_experts_set_budget(m->experts, bytes)) return el_set_error(err, EL_ERR_INTERNAL, "expert budget refused");
    m->mem.expert_resident = bytes < st.total ? bytes : st.total;
    return 0;
}

int el_model_expert_stats(const el_model *m, el_expert_stats *out) {
    if (!out) return -1;
    memset(out, 0, sizeof *out);
    if (!m || !m->experts) return -1;
    el_experts_stats st;
    el_experts_get_stats(m->experts, &st);
    *out = (el_expert_stats){.total_bytes = st.total, .budget_bytes = st.budget < st.total ? st.budget : st.total,
                             .resident_bytes = st.resident, .per_token_bytes = st.per_token, .hits = st.hits,
                             .misses = st.misses, .bytes_faulted = st.bytes_faulted, .releases = st.releases,
                             .bytes_released = st.bytes_released};
    return 0;
}

uint64_t el_model_weights_resident_bytes(const el_model *m) {
    const uint64_t w = el_model_weights_bytes(m);
    if (!m->experts || m->mem.expert_resident >= m->mem.expert_bytes) return w;
    /* the experts beyond the budget leave; their slices' partial pages (expert_fixed) stay */
    const uint64_t drop = m->mem.expert_bytes - m->mem.expert_resident;
    const uint64_t d = drop > m->mem.expert_bytes - m->mem.expert_fixed ? m->mem.expert_bytes - m->mem.expert_fixed : drop;
    return w > d ? w - d : 0;
}

int el_model_fit_experts(el_model *m, uint64_t requested, uint64_t room, el_error *err) {
    if (requested) return el_model_set_expert_budget(m, requested, err);
    const uint64_t w = el_model_weights_bytes(m);
    if (!m->experts || room >= w || !m->experts_releasable) return 0; /* admission decides */
    const uint64_t releasable = m->mem.expert_bytes - m->mem.expert_fixed, keep = w - releasable;
    const double M = 1048576.0;
    el_experts_stats st;
    el_experts_get_stats(m->experts, &st);
    if (room <= keep || room - keep < st.per_token)
        return el_set_error(err, EL_ERR_NOMEM,
                            "the memory budget leaves %.1f MiB for the weights: the weights other than routed experts "
                            "take %.1f MiB and one token's experts %.1f MiB more", room / M, keep / M, st.per_token / M);
    return el_model_set_expert_budget(m, room - keep, err);
}

uint64_t el_model_weights_bytes(const el_model *m) {
    const uint64_t file = (uint64_t)el_gguf_file_size(m->gguf), owned = (uint64_t)m->owned_bytes;
    return file > UINT64_MAX - owned ? UINT64_MAX : file + owned;
}

el_model *el_model_load(const char *path, const el_model_params *p, el_error *err) {
    el_model_params dp = el_model_default_params();
    if (!p) p = &dp;
    if (err) { err->code = EL_OK; err->msg[0] = 0; }
    if (!path) { el_set_error(err, EL_ERR_INVALID_ARG, "model path is NULL"); return NULL; }
    el_model *m = calloc(1, sizeof *m);
    if (!m) { el_set_error(err, EL_ERR_NOMEM, "out of memory"); return NULL; }
    m->log_cb = p->log_cb;
    m->log_user = p->log_user;
    m->gguf = el_gguf_open(path, err);
    if (!m->gguf) {
        if (err && err->code != EL_ERR_IO && strstr(err->msg, path) == NULL) { /* name the file */
            char msg[sizeof err->msg];
            size_t pl = strlen(path);
            if (pl > 120) pl = 120;
            snprintf(msg, sizeof msg, "%.*s: %.*s", (int)pl, path, (int)(sizeof msg - pl - 3), err->msg);
            memcpy(err->msg, msg, sizeof msg);
        }
        goto fail;
    }
    el_str s;
    if (!el_gguf_get_str(m->gguf, "general.architecture", &s)) {
        if (!p->vocab_only) { el_set_error(err, EL_ERR_MISSING, "metadata 'general.architecture' is missing"); goto fail; }
        m->arch_name = strdup("none");
    } else {
        m->arch_name = el_str_dup(s);
    }
    if (el_gguf_get_str(m->gguf, "tokenizer.chat_template", &s)) m->chat_template = el_str_dup(s);
    m->vocab = el_vocab_load(m->gguf, err);
    if (!m->vocab) goto fail;
    if (p->vocab_only) {
        el_logf(m, EL_LOG_INFO, "loaded vocabulary (%d tokens) from %s", el_vocab_n_tokens(m->vocab), path);
        return m;
    }
    for (size_t i = 0; i < sizeof k_archs / sizeof k_archs[0]; i++)
        if (strcmp(k_archs[i]->name, m->arch_name) == 0) m->arch = k_archs[i];
    if (!m->arch) {
        char names[256] = "";
        for (size_t i = 0; i < sizeof k_archs / sizeof k_archs[0]; i++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "", k_archs[i]->name);
        el_set_error(err, EL_ERR_UNSUPPORTED, "architecture '%s' is not supported (%s)", m->arch_name, names);
        goto fail;
    }
    if (el_load_common_hparams(m, err)) goto fail;
    if (m->arch->load(m, err)) goto fail;
    int nt = p->n_threads;
    if (nt <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        nt = n > 0 ? (int)n : 1;
    }
    if (nt > 256) nt = 256;
    m->n_threads = nt;
    m->pool = el_pool_new(nt);
    if (!m->pool) { el_set_error(err, EL_ERR_NOMEM, "cannot start %d threads", nt); goto fail; }
    if (el_backends_open(m, p->backend, err)) goto fail;
    /* last: the weights come in as the load strategy says (memory/load.h); on failure nothing stays locked */
    if (el_load_prepare(&m->load, m->gguf, m->hp.n_layer, p->load, err) || el_load_apply(&m->load, err)) goto fail;
    if (apply_layouts(m, err) || fill_mem(m, err)) goto fail;
    if (m->hp.n_expert > 0 && experts_open(m, p->load, err)) goto fail;
    if (p->load != EL_LOAD_MMAP)
        el_logf(m, EL_LOG_INFO, "load %s: %zu bytes locked", el_load_mode_name(p->load), m->load.locked);
    el_logf(m, EL_LOG_INFO, "loaded %s model from %s: %d layers, %d embd, vocab %d, trained context %d, %d threads",
            m->arch_name, path, m->hp.n_layer, m->hp.n_embd, m->hp.n_vocab, m->hp.n_ctx_train, nt);
    return m;
fail:
    if (m->log_cb) {
        el_error tmp;
        const el_error *e = err ? err : &tmp;
        if (!err) tmp.msg[0] = 0;
        el_logf(m, EL_LOG_ERROR, "loading %s failed: %s", path, e->msg);
    }
    el_model_free(m);
    return NULL;
}

void el_model_free(el_model *m) {
    if (!m) return;
    el_backends_close(m); /* before the pool the CPU backend runs on */
    if (m->pool) el_pool_free(m->pool);
    el_load_release(&m->load); /* before the mapping goes */
    el_experts_free(m->experts);
    for (int i = 0; i < m->n_owned; i++) free(m->owned[i]);
    free(m->owned);
    for (int i = 0; i < m->n_meta_strs; i++) free(m->meta_strs[i]);
    free(m->meta_strs);
    free(m->layers);
    free(m->mem_swa);
    free(m->mem_mats);
    el_vocab_free(m->vocab);
    el_gtrie_free(atomic_load(&m->gtrie));
    free(m->chat_template);
    free(m->arch_name);
    el_gguf_close(m->gguf);
    free(m);
}

const char *el_model_arch(const el_model *m) { return m ? m->arch_name : NULL; }
int el_model_n_vocab(const el_model *m) { return m ? el_vocab_n_tokens(m->vocab) : 0; }
int el_model_n_ctx_train(const el_model *m) { return m ? m->hp.n_ctx_train : 0; }
int el_model_n_embd(const el_model *m) { return m && m->arch ? m->hp.n_embd : 0; }
int el_model_pooling(const el_model *m) {
    char key[128];
    uint32_t v;
    if (!m || !m->arch) return EL_POOLING_NONE;
    if (!el_gguf_get_u32(m->gguf, el_arch_key(m, "pooling_type", key, sizeof key), &v)) return EL_POOLING_NONE;
    return v > 0x7fffffff ? EL_POOLING_NONE : (int)v;
}
const char *el_model_chat_template(const el_model *m) { return m ? m->chat_template : NULL; }

const char *el_model_meta_str(const el_model *m, const char *key) {
    if (!m || !key) return NULL;
    el_str s;
    if (!el_gguf_get_str(m->gguf, key, &s)) return NULL;
    el_model *mm = (el_model *)m; /* the cache of copies is logically const */
    char **n = realloc(mm->meta_strs, sizeof(char *) * (size_t)(mm->n_meta_strs + 1));
    if (!n) return NULL;
    mm->meta_strs = n;
    char *c = el_str_dup(s);
    if (!c) return NULL;
    mm->meta_strs[mm->n_meta_strs++] = c;
    return c;
}

int el_tokenize(const el_model *m, const char *text, size_t len, int32_t *out, int cap, int flags) {
    if (!m || (!text && len) || cap < 0 || (!out && cap > 0)) return -1;
    if (!text) text = "";
    return el_vocab_tokenize(m->vocab, text, len, (flags & EL_TOK_ADD_SPECIAL) != 0, (flags & EL_TOK_PARSE_SPECIAL) != 0, out, cap);
}
int el_token_to_piece(const el_model *m, int32_t tok, char *buf, int cap, bool special) {
    if (!m || cap < 0 || (!buf && cap > 0)) return -1;
    return el_vocab_token_to_piece(m->vocab, tok, buf, cap, special);
}
int32_t el_token_bos(const el_model *m) { return m ? el_vocab_bos(m->vocab) : -1; }
int32_t el_token_eos(const el_model *m) { return m ? el_vocab_eos(m->vocab) : -1; }
bool el_token_is_eog(const el_model *m, int32_t tok) { return m ? el_vocab_is_eog(m->vocab, tok) : false; }

int el_chat_tokenize_text(const el_model *m, const el_chat_text *t, size_t from, int flags, int32_t *out, int cap) {
    if (!m || !t || (!t->text && t->len) || from > t->len || t->n_tmpl < 0) return -1;
    const bool bos = (flags & EL_TOK_ADD_SPECIAL) != 0;
    if (flags & EL_CHAT_TRUST_CONTENT) return el_vocab_tokenize(m->vocab, t->text + from, t->len - from, bos, true, out, cap);
    /* the template ranges that reach past `from`, clipped and shifted to it */
    int first = 0;
    while (first < t->n_tmpl && t->tmpl[first][1] <= from) first++;
    int n = t->n_tmpl - first;
    size_t(*rg)[2] = n > 0 ? malloc((size_t)n * sizeof *rg) : NULL;
    if (n > 0 && !rg) return -2;
    for (int i = 0; i < n; i++) {
        size_t a = t->tmpl[first + i][0], b = t->tmpl[first + i][1];
        rg[i][0] = (a > from ? a : from) - from;
        rg[i][1] = b - from;
    }
    int r = el_vocab_tokenize_ranges(m->vocab, t->text + from, t->len - from, bos, (const size_t(*)[2])rg, n, out, cap);
    free(rg);
    return r;
}

int el_chat_tokenize(const el_model *m, el_chat_family f, const el_chat_msg *msgs, int n_msgs,
                     bool add_generation_prompt, int flags, int32_t **out) {
    *out = NULL;
    el_chat_text t;
    int rc = el_chat_render(f, msgs, n_msgs, add_generation_prompt, &t);
    if (rc) return rc;
    if (t.len > (size_t)INT32_MAX / 2 - 16) { el_chat_text_free(&t); return -3; }
    int cap = (int)t.len + 16, n = -1;
    int32_t *ids = NULL;
    for (int attempt = 0; attempt < 2; attempt++) { /* a second pass only if the first guess was short */
        free(ids);
        ids = malloc((size_t)cap * sizeof *ids);
        n = ids ? el_chat_tokenize_text(m, &t, 0, flags, ids, cap) : -2;
        if (n <= cap) break;
        cap = n;
    }
    el_chat_text_free(&t);
    if (n < 0 || n > cap) {
        free(ids);
        return n == -2 ? -2 : -3;
    }
    *out = ids;
    return n;
}

el_chat_family el_chat_family_for_model(const el_model *m, el_chat_source *src) {
    el_chat_family f = el_chat_detect(m->chat_template);
    el_chat_source how = EL_CHAT_BY_TEMPLATE;
    if (f == EL_CHAT_UNKNOWN) {
        const char *a = m->arch_name ? m->arch_name : "";
        how = EL_CHAT_BY_ARCH;
        if (!strcmp(a, "gemma3") || !strcmp(a, "gemma2") || !strcmp(a, "gemma")) f = EL_CHAT_GEMMA;
        else if (!strcmp(a, "qwen2") || !strcmp(a, "qwen3") || !strcmp(a, "qwen2moe") || !strcmp(a, "qwen3moe"))
            f = EL_CHAT_CHATML;
        else if (!strcmp(a, "llama"))
            f = el_vocab_find(m->vocab, "<|eot_id|>", strlen("<|eot_id|>")) >= 0 ? EL_CHAT_LLAMA3 : EL_CHAT_LLAMA2;
        else how = EL_CHAT_BY_NONE;
    }
    if (src) *src = how;
    return f;
}
