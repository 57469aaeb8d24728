/*
 * pack.c — Hugging Face directory → GGUF (see pack.h).
 *
 * Steps: config.json → hyperparameters (both the classic keys — rope_theta,
 * rope_scaling, rope_local_base_freq — and transformers 5's rope_parameters,
 * per layer type for Gemma 3); safetensors → the list of output tensors with
 * their GGUF names, shapes and row transforms; the tokenizer (hf_tokenizer.c);
 * each tensor's type from el_quant_plan; then the GGUF is written: metadata,
 * tensor infos, and tensor data converted CHUNK_ROWS rows at a time (source
 * rows → float32 → transform → target type), so memory stays at one chunk
 * however large the model.
 *
 * What the runtime cannot compute is refused here with a message, rather
 * than packed into a file that loads and computes something else: rope
 * scaling other than linear/llama3, logit soft-capping, Gemma's
 * query_pre_attn_scalar other than head_dim, biases on llama, activations
 * other than SiLU (llama, qwen) / tanh-GELU (gemma3).
 */
#include "convert/pack.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "convert/hf_tokenizer.h"
#include "convert/safetensors.h"
#include "package/gguf.h"
#include "package/gguf_write.h"
#include "package/layout.h"
#include "package/quants.h"
#include "package/types.h"
#include "util/error.h"
#include "util/fp16.h"

#define CHUNK_ELEMS ((int64_t)1 << 22) /* ~16 MB of float32 per chunk */

el_pack_params el_pack_default_params(void) {
    el_pack_params p = {.ftype = EL_FTYPE_F16};
    return p;
}

/* ---- config.json ---------------------------------------------------------- */

typedef struct hparams {
    char arch[16];
    int n_vocab, n_embd, n_ff, n_layer, n_head, n_head_kv, head_dim, n_ctx;
    bool head_dim_given;
    double norm_eps, rope_base, rope_base_swa;
    bool tied;
    /* rope scaling */
    char rope_type[16]; /* "" = none, "linear", "llama3" */
    double rope_factor, low_freq_factor, high_freq_factor;
    int rope_orig_ctx;
    int sliding_window;
    int bos, eos;
} hparams;

static bool num(const cJSON *o, const char *key, double *out) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(j)) return false;
    *out = j->valuedouble;
    return true;
}

static int need_int(const cJSON *o, const char *key, int dflt, bool required, int *out, el_error *err) {
    double v;
    if (!num(o, key, &v)) {
        if (required) return el_set_error(err, EL_ERR_MISSING, "config.json: '%s' is missing", key);
        *out = dflt;
        return 0;
    }
    if (v < 0 || v > (double)(1 << 30) || floor(v) != v)
        return el_set_error(err, EL_ERR_BAD_VALUE, "config.json: '%s' = %g is not a valid count", key, v);
    *out = (int)v;
    return 0;
}

static const char *str_of(const cJSON *o, const char *key) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(j) ? j->valuestring : NULL;
}

/* rope: a scaling object {"rope_type"|"type", "factor", ...} → hp fields */
static int read_rope_scaling(const cJSON *rs, hparams *hp, el_error *err) {
    if (!cJSON_IsObject(rs)) return 0;
    const char *t = str_of(rs, "rope_type");
    if (!t) t = str_of(rs, "type");
    if (!t || !strcmp(t, "default") || !strcmp(t, "none")) return 0;
    double f = 0;
    if (!strcmp(t, "linear")) {
        if (!num(rs, "factor", &f) || !(f > 0)) return el_set_error(err, EL_ERR_BAD_VALUE, "config.json: linear rope scaling without a factor");
        snprintf(hp->rope_type, sizeof hp->rope_type, "linear");
        hp->rope_factor = f;
        return 0;
    }
    if (!strcmp(t, "llama3")) {
        snprintf(hp->rope_type, sizeof hp->rope_type, "llama3");
        hp->rope_factor = num(rs, "factor", &f) ? f : 8.0;
        hp->low_freq_factor = num(rs, "low_freq_factor", &f) ? f : 1.0;
        hp->high_freq_factor = num(rs, "high_freq_factor", &f) ? f : 4.0;
        hp->rope_orig_ctx = num(rs, "original_max_position_embeddings", &f) ? (int)f : 8192;
        if (hp->high_freq_factor <= hp->low_freq_factor || hp->rope_factor <= 0)
            return el_set_error(err, EL_ERR_BAD_VALUE, "config.json: llama3 rope scaling factors are inconsistent");
        return 0;
    }
    return el_set_error(err, EL_ERR_UNSUPPORTED, "config.json: rope scaling '%s' is not supported by edgellm (linear, llama3)", t);
}

static int read_config(const cJSON *root, hparams *hp, el_error *err) {
    memset(hp, 0, sizeof *hp);
    hp->bos = hp->eos = -1;
    const cJSON *archs = cJSON_GetObjectItemCaseSensitive(root, "architectures");
    const char *a = cJSON_IsArray(archs) && cJSON_IsString(archs->child) ? archs->child->valuestring : NULL;
    const char *mt = str_of(root, "model_type");
    const cJSON *c = root;
    const char *arch = NULL;
    if (a) {
        if (!strcmp(a, "LlamaForCausalLM") || !strcmp(a, "MistralForCausalLM")) arch = "llama";
        else if (!strcmp(a, "Qwen2ForCausalLM")) arch = "qwen2";
        else if (!strcmp(a, "Qwen3ForCausalLM")) arch = "qwen3";
        else if (!strcmp(a, "Gemma3ForCausalLM")) arch = "gemma3";
        else if (!strcmp(a, "Gemma3ForConditionalGeneration")) {
            arch = "gemma3";
            c = cJSON_GetObjectItemCaseSensitive(root, "text_config");
            if (!cJSON_IsObject(c)) return el_set_error(err, EL_ERR_MISSING, "config.json: Gemma3ForConditionalGeneration without text_config");
        } else
            return el_set_error(err, EL_ERR_UNSUPPORTED, "config.json: architecture '%s' is not supported (llama, mistral, qwen2, qwen3, gemma3)", a);
    } else if (mt) {
        if (!strcmp(mt, "llama") || !strcmp(mt, "mistral")) arch = "llama";
        else if (!strcmp(mt, "qwen2")) arch = "qwen2";
        else if (!strcmp(mt, "qwen3")) arch = "qwen3";
        else if (!strcmp(mt, "gemma3_text")) arch = "gemma3";
        else return el_set_error(err, EL_ERR_UNSUPPORTED, "config.json: model_type '%s' is not supported", mt);
    } else {
        return el_set_error(err, EL_ERR_MISSING, "config.json: neither 'architectures' nor 'model_type'");
    }
    snprintf(hp->arch, sizeof hp->arch, "%s", arch);
    bool gemma = !strcmp(arch, "gemma3");
    int rc;
    if ((rc = need_int(c, "hidden_size", 0, true, &hp->n_embd, err))) return rc;
    if ((rc = need_int(c, "intermediate_size", 0, true, &hp->n_ff, err))) return rc;
    if ((rc = need_int(c, "num_hidden_layers", 0, true, &hp->n_layer, err))) return rc;
    if ((rc = need_int(c, "num_attention_heads", 8, !gemma, &hp->n_head, err))) return rc;
    if ((rc = need_int(c, "num_key_value_heads", gemma ? 4 : hp->n_head, false, &hp->n_head_kv, err))) return rc;
    if ((rc = need_int(c, "vocab_size", gemma ? 262208 : 0, !gemma, &hp->n_vocab, err))) return rc; /* Gemma3TextConfig's default */
    if ((rc = need_int(c, "max_position_embeddings", gemma ? 131072 : 2048, false, &hp->n_ctx, err))) return rc;
    if (hp->n_embd <= 0 || hp->n_layer <= 0 || hp->n_head <= 0 || hp->n_head_kv <= 0 || hp->n_ff <= 0 || hp->n_head % hp->n_head_kv)
        return el_set_error(err, EL_ERR_BAD_VALUE, "config.json: inconsistent sizes (hidden %d, layers %d, heads %d/%d, ffn %d)", hp->n_embd,
                            hp->n_layer, hp->n_head, hp->n_head_kv, hp->n_ff);
    double v;
    hp->head_dim_given = num(c, "head_dim", &v) && v > 0;
    hp->head_dim = hp->head_dim_given ? (int)v : (gemma ? 256 : hp->n_embd / hp->n_head);
    if (gemma) hp->head_dim_given = true;
    if (!hp->head_dim_given && hp->n_embd % hp->n_head)
        return el_set_error(err, EL_ERR_BAD_VALUE, "config.json: hidden_size %d is not a multiple of num_attention_heads %d", hp->n_embd, hp->n_head);
    if (hp->head_dim <= 0 || hp->head_dim % 2) return el_set_error(err, EL_ERR_BAD_VALUE, "config.json: head_dim %d is not even", hp->head_dim);
    hp->norm_eps = num(c, "rms_norm_eps", &v) ? v : (gemma ? 1e-6 : 1e-5);
    /* tied output: the config says (Gemma ties by default) */
    const cJSON *tie = cJSON_GetObjectItemCaseSensitive(c, "tie_word_embeddings");
    if (!tie) tie = cJSON_GetObjectItemCaseSensitive(root, "tie_word_embeddings");
    hp->tied = tie ? cJSON_IsTrue(tie) : gemma;

    /* rope base and scaling: classic keys or rope_parameters (flat, or per layer type) */
    const cJSON *rp = cJSON_GetObjectItemCaseSensitive(c, "rope_parameters");
    const cJSON *rp_full = cJSON_GetObjectItemCaseSensitive(rp, "full_attention");
    const cJSON *rp_swa = cJSON_GetObjectItemCaseSensitive(rp, "sliding_attention");
    if (!cJSON_IsObject(rp_full)) rp_full = rp;
    double dflt_base = gemma ? 1e6 : 10000.0;
    if (num(c, "rope_theta", &v)) hp->rope_base = v;
    else if (num(rp_full, "rope_theta", &v)) hp->rope_base = v;
    else hp->rope_base = dflt_base;
    hp->rope_base_swa = 10000.0;
    if (num(c, "rope_local_base_freq", &v)) hp->rope_base_swa = v;
    else if (num(rp_swa, "rope_theta", &v)) hp->rope_base_swa = v;
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(c, "rope_scaling");
    if ((rc = read_rope_scaling(cJSON_IsObject(rs) ? rs : rp_full, hp, err))) return rc;
    if (gemma && cJSON_IsObject(rp_swa)) {
        hparams tmp = *hp;
        tmp.rope_type[0] = 0;
        if ((rc = read_rope_scaling(rp_swa, &tmp, err))) return rc;
        if (tmp.rope_type[0]) return el_set_error(err, EL_ERR_UNSUPPORTED, "config.json: rope scaling on sliding-window layers is not supported");
    }
    if (!strcmp(hp->rope_type, "llama3") && strcmp(arch, "llama") != 0)
        return el_set_error(err, EL_ERR_UNSUPPORTED, "config.json: llama3 rope scaling on %s", arch);

    /* what the runtime does not compute: refuse */
    const char *act = str_of(c, "hidden_act");
    if (gemma) {
        const char *ga = str_of(c, "hidden_activation");
        if (!ga) ga = act;
        if (ga && strcmp(ga, "gelu_pytorch_tanh") && strcmp(ga, "gelu_tanh"))
            return el_set_error(err, EL_ERR_UNSUPPORTED, "config.json: gemma3 activation '%s' (edgellm computes tanh-GELU)", ga);
        double qs;
        if (num(c, "query_pre_attn_scalar", &qs) && qs != (double)hp->head_dim && hp->n_layer != 62)
            return el_set_error(err, EL_ERR_UNSUPPORTED, "config.json: query_pre_attn_scalar %g differs from head_dim %d", qs, hp->head_dim);
        double sw;
        hp->sliding_window = num(c, "sliding_window", &sw) ? (int)sw : 4096;
        const cJSON *lt = cJSON_GetObjectItemCaseSensitive(c, "layer_types");
        int il = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, lt) {
            bool want_swa = (il + 1) % 6 != 0;
            bool is_swa = cJSON_IsString(e) && !strcmp(e->valuestring, "sliding_attention");
            if (want_swa != is_swa)
                return el_set_error(err, EL_ERR_UNSUPPORTED, "config.json: layer %d's attention type breaks Gemma 3's 5-local/1-global pattern", il);
            il++;
        }
    } else if (act && strcmp(act, "silu") != 0) {
        return el_set_error(err, EL_ERR_UNSUPPORTED, "config.json: activation '%s' (edgellm computes SiLU for %s)", act, arch);
    }
    const char *soft[2] = {"final_logit_softcapping", "attn_logit_softcapping"};
    for (int i = 0; i < 2; i++)
        if (num(c, soft[i], &v)) return el_set_error(err, EL_ERR_UNSUPPORTED, "config.json: %s = %g is not computed by edgellm", soft[i], v);
    if (!strcmp(arch, "llama") && (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "attention_bias")) ||
                                   cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "mlp_bias"))))
        return el_set_error(err, EL_ERR_UNSUPPORTED, "config.json: llama with attention/MLP biases");
    if (!strcmp(arch, "qwen2") && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "use_sliding_window")))
        return el_set_error(err, EL_ERR_UNSUPPORTED, "config.json: qwen2 with use_sliding_window");
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(c, "bos_token_id");
    if (!b) b = cJSON_GetObjectItemCaseSensitive(root, "bos_token_id");
    if (cJSON_IsNumber(b)) hp->bos = (int)b->valuedouble;
    const cJSON *eo = cJSON_GetObjectItemCaseSensitive(c, "eos_token_id");
    if (!eo) eo = cJSON_GetObjectItemCaseSensitive(root, "eos_token_id");
    if (cJSON_IsNumber(eo)) hp->eos = (int)eo->valuedouble;
    else if (cJSON_IsArray(eo) && cJSON_IsNumber(eo->child)) hp->eos = (int)eo->child->valuedouble;
    return 0;
}

int el_pack_check_config(const char *config_json, char *arch, el_error *err) {
    cJSON *c = cJSON_Parse(config_json);
    if (!c) return el_set_error(err, EL_ERR_BAD_VALUE, "config.json: not valid JSON");
    hparams hp;
    int rc = cJSON_IsObject(c) ? read_config(c, &hp, err) : (int)el_set_error(err, EL_ERR_BAD_VALUE, "config.json: not an object");
    cJSON_Delete(c);
    if (rc == 0) memcpy(arch, hp.arch, sizeof hp.arch);
    return rc;
}

/* ---- tensor mapping ------------------------------------------------------- */

typedef struct otensor {
    char name[96];
    const el_st_tensor *src; /* NULL: gen holds the data */
    float *gen;
    int n_dims;
    int64_t ne[4];
    int permute_heads; /* > 0: llama's Q/K row permutation with this many heads */
    float add;         /* added to every value (Gemma norms: +1) */
    el_type type;
    int order;         /* sort key */
} otensor;

static const struct { const char *hf, *gguf; } k_layer_map[] = {
    {"input_layernorm.weight", "attn_norm.weight"},
    {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.o_proj.weight", "attn_output.weight"},
    {"self_attn.q_proj.bias", "attn_q.bias"},
    {"self_attn.k_proj.bias", "attn_k.bias"},
    {"self_attn.v_proj.bias", "attn_v.bias"},
    {"self_attn.q_norm.weight", "attn_q_norm.weight"},
    {"self_attn.k_norm.weight", "attn_k_norm.weight"},
    {"post_attention_layernorm.weight", NULL}, /* ffn_norm, or gemma3's post_attention_norm */
    {"pre_feedforward_layernorm.weight", "ffn_norm.weight"},
    {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},
    {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"},
};
#define N_LAYER_MAP ((int)(sizeof k_layer_map / sizeof k_layer_map[0]))

static bool has_prefix(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }
static bool has_suffix(const char *s, const char *x) {
    size_t a = strlen(s), b = strlen(x);
    return a >= b && strcmp(s + a - b, x) == 0;
}

/* Maps one HF tensor; returns 1 if mapped into *o, 0 if deliberately skipped, -1 on error (in err). */
#define MAP_FAIL(...) (el_set_error(__VA_ARGS__), -1)
static int map_tensor(const hparams *hp, const el_st_tensor *t, otensor *o, el_error *err) {
    const char *n = t->name;
    /* multimodal Gemma 3: keep the language model only */
    if (has_prefix(n, "vision_tower.") || has_prefix(n, "multi_modal_projector.") || has_prefix(n, "model.vision_tower.") ||
        has_prefix(n, "model.multi_modal_projector."))
        return 0;
    char buf[512];
    if (has_prefix(n, "language_model.")) n += strlen("language_model.");
    if (has_prefix(n, "model.language_model.")) {
        snprintf(buf, sizeof buf, "model.%s", n + strlen("model.language_model."));
        n = buf;
    }
    if (has_suffix(n, "rotary_emb.inv_freq")) return 0; /* recomputed from rope_theta */
    memset(o, 0, sizeof *o);
    o->src = t;
    bool gemma = !strcmp(hp->arch, "gemma3");
    if (!strcmp(n, "model.embed_tokens.weight")) { snprintf(o->name, sizeof o->name, "token_embd.weight"); o->order = 0; }
    else if (!strcmp(n, "model.norm.weight")) { snprintf(o->name, sizeof o->name, "output_norm.weight"); o->order = 1 << 28; }
    else if (!strcmp(n, "lm_head.weight")) {
        if (hp->tied) return 0;
        snprintf(o->name, sizeof o->name, "output.weight");
        o->order = (1 << 28) + 1;
    } else if (has_prefix(n, "model.layers.")) {
        const char *p = n + strlen("model.layers.");
        char *end;
        long il = strtol(p, &end, 10);
        if (end == p || *end != '.' || il < 0 || il >= hp->n_layer)
            return MAP_FAIL(err, EL_ERR_BAD_TENSOR, "tensor '%s': layer index out of range (%d layers)", t->name, hp->n_layer);
        const char *suf = end + 1;
        const char *g = NULL;
        int k;
        for (k = 0; k < N_LAYER_MAP; k++)
            if (!strcmp(suf, k_layer_map[k].hf)) break;
        if (k == N_LAYER_MAP) return MAP_FAIL(err, EL_ERR_UNSUPPORTED, "tensor '%s' has no GGUF counterpart for %s", t->name, hp->arch);
        g = k_layer_map[k].gguf;
        if (!g) g = gemma ? "post_attention_norm.weight" : "ffn_norm.weight";
        if (!gemma && (k == 11 || k == 12)) return MAP_FAIL(err, EL_ERR_UNSUPPORTED, "tensor '%s' is not part of %s", t->name, hp->arch);
        snprintf(o->name, sizeof o->name, "blk.%ld.%s", il, g);
        o->order = 1 + (int)il * 64 + k;
        /* llama's rotary layout: HF rotates halves, GGUF/llama.cpp adjacent pairs */
        if (!strcmp(hp->arch, "llama")) {
            if (k == 1 || k == 5) o->permute_heads = hp->n_head;
            if (k == 2 || k == 6) o->permute_heads = hp->n_head_kv;
        }
    } else {
        return MAP_FAIL(err, EL_ERR_UNSUPPORTED, "tensor '%s' has no GGUF counterpart for %s", t->name, hp->arch);
    }
    /* Gemma's RMSNorm multiplies by (1 + w); llama.cpp stores 1 + w */
    if (gemma && has_suffix(n, "norm.weight")) o->add = 1.0f;
    if (!el_st_dtype_is_float(t->dtype))
        return MAP_FAIL(err, EL_ERR_UNSUPPORTED, "tensor '%s' has dtype %s (F32, F16, BF16 only)", t->name, el_st_dtype_name(t->dtype));
    if (t->n_dims < 1 || t->n_dims > 2)
        return MAP_FAIL(err, EL_ERR_BAD_TENSOR, "tensor '%s' has %d dims (1 or 2 expected)", t->name, t->n_dims);
    o->n_dims = t->n_dims;
    o->ne[0] = t->shape[t->n_dims - 1];
    o->ne[1] = t->n_dims == 2 ? t->shape[0] : 1;
    o->ne[2] = o->ne[3] = 1;
    if (o->ne[0] == 0 || o->ne[1] == 0) return MAP_FAIL(err, EL_ERR_BAD_TENSOR, "tensor '%s' is empty", t->name);
    if (o->permute_heads && (o->ne[1] % (2 * o->permute_heads)))
        return MAP_FAIL(err, EL_ERR_BAD_TENSOR, "tensor '%s': %lld rows do not split into %d heads of even size", t->name,
                            (long long)o->ne[1], o->permute_heads);
    return 1;
}

#undef MAP_FAIL

static int cmp_otensor(const void *a, const void *b) {
    const otensor *x = a, *y = b;
    return (x->order > y->order) - (x->order < y->order);
}

/* Every tensor the runtime binds for this architecture is there (a checkpoint missing one would
 * pack into a file that does not load). */
static int check_complete(const hparams *hp, const otensor *ot, int n, el_error *err) {
    static const char *const common[] = {"attn_norm.weight", "attn_q.weight", "attn_k.weight", "attn_v.weight",
                                         "attn_output.weight", "ffn_norm.weight", "ffn_gate.weight", "ffn_up.weight",
                                         "ffn_down.weight"};
    static const char *const bias[] = {"attn_q.bias", "attn_k.bias", "attn_v.bias"};
    static const char *const qk[] = {"attn_q_norm.weight", "attn_k_norm.weight"};
    static const char *const post[] = {"post_attention_norm.weight", "post_ffw_norm.weight"};
    bool is_qwen2 = !strcmp(hp->arch, "qwen2"), is_qwen3 = !strcmp(hp->arch, "qwen3"), is_gemma = !strcmp(hp->arch, "gemma3");
    char name[96];
    for (int il = -1; il < hp->n_layer; il++) {
        const char *const *lists[4] = {common, is_qwen2 ? bias : NULL, (is_qwen3 || is_gemma) ? qk : NULL, is_gemma ? post : NULL};
        const int counts[4] = {9, 3, 2, 2};
        for (int l = 0; l < 4; l++) {
            if (!lists[l]) continue;
            for (int k = 0; k < counts[l]; k++) {
                if (il < 0) {
                    if (l || k) break;
                    snprintf(name, sizeof name, "output_norm.weight");
                } else {
                    snprintf(name, sizeof name, "blk.%d.%s", il, lists[l][k]);
                }
                bool found = false;
                for (int i = 0; i < n && !found; i++) found = !strcmp(ot[i].name, name);
                if (!found) return el_set_error(err, EL_ERR_MISSING, "the checkpoint has no tensor for '%s' (%s)", name, hp->arch);
            }
        }
    }
    return 0;
}

/* llama3 rope scaling as per-frequency divisors (rope_freqs.weight), computed as
 * convert_hf_to_gguf.py does: frequencies in float32, the rest in double. */
static float *llama3_rope_freqs(const hparams *hp) {
    int dim = hp->head_dim, n = dim / 2;
    float *f = malloc(sizeof(float) * (size_t)n);
    if (!f) return NULL;
    double lo_wl = hp->rope_orig_ctx / hp->low_freq_factor, hi_wl = hp->rope_orig_ctx / hp->high_freq_factor;
    for (int i = 0; i < n; i++) {
        float freq = 1.0f / powf((float)hp->rope_base, (float)(2 * i) / (float)dim);
        double wl = 2.0 * M_PI / (double)freq;
        double r;
        if (wl < hi_wl) r = 1.0;
        else if (wl > lo_wl) r = hp->rope_factor;
        else {
            double smooth = (hp->rope_orig_ctx / wl - hp->low_freq_factor) / (hp->high_freq_factor - hp->low_freq_factor);
            r = 1.0 / ((1.0 - smooth) / hp->rope_factor + smooth);
        }
        f[i] = (float)r;
    }
    return f;
}

/* ---- data ----------------------------------------------------------------- */

static void src_row_f32(const el_st_tensor *t, int64_t row, int64_t ne0, float *dst) {
    const uint8_t *p = t->data + (size_t)row * (size_t)ne0 * el_st_dtype_size(t->dtype);
    switch (t->dtype) {
    case EL_ST_F32: memcpy(dst, p, (size_t)ne0 * 4); break;
    case EL_ST_F16:
        for (int64_t i = 0; i < ne0; i++) { uint16_t h; memcpy(&h, p + 2 * i, 2); dst[i] = el_fp16_to_fp32(h); }
        break;
    default: /* BF16 (checked by map_tensor) */
        for (int64_t i = 0; i < ne0; i++) { uint16_t h; memcpy(&h, p + 2 * i, 2); dst[i] = el_bf16_to_fp32(h); }
        break;
    }
}

/* out row r of a permuted Q/K weight comes from this source row */
static int64_t permuted_src_row(int64_t r, int64_t rows, int heads) {
    int64_t hd = rows / heads, half = hd / 2;
    int64_t h = r / hd, w = r % hd, i = w / 2, j = w % 2;
    return h * hd + j * half + i;
}

static int convert_rows(el_type t, const float *src, void *dst, int64_t nrows, int64_t ne0, el_error *err) {
    int64_t n = nrows * ne0;
    switch (t) {
    case EL_TYPE_F32: memcpy(dst, src, (size_t)n * 4); return 0;
    case EL_TYPE_F16: el_quant_f16(src, dst, n); return 0;
    case EL_TYPE_BF16: el_quant_bf16(src, dst, n); return 0;
    default:
        if (el_quantize_rows(t, src, dst, nrows, ne0) == 0)
            return el_set_error(err, EL_ERR_UNSUPPORTED, "quantizing to %s is not supported", el_type_name(t));
        return 0;
    }
}

/* One chunk of a tensor: rows [r0, r0 + nr) → float32 (permuted, shifted) → target
 * type, split across threads by rows (rows are independent, quantize.h). */
typedef struct chunk_job {
    const otensor *o;
    int64_t r0, rbeg, rend, rows;
    float *fbuf;
    uint8_t *qbuf;
    int rc;
    el_error err;
} chunk_job;

static void *chunk_worker(void *arg) {
    chunk_job *j = arg;
    const otensor *o = j->o;
    int64_t ne0 = o->ne[0];
    for (int64_t r = j->rbeg; r < j->rend; r++) {
        float *dst = j->fbuf + r * ne0;
        int64_t sr = o->permute_heads ? permuted_src_row(j->r0 + r, j->rows, o->permute_heads) : j->r0 + r;
        if (o->gen) memcpy(dst, o->gen + sr * ne0, sizeof(float) * (size_t)ne0);
        else src_row_f32(o->src, sr, ne0, dst);
        if (o->add != 0.0f)
            for (int64_t k = 0; k < ne0; k++) dst[k] += o->add;
    }
    size_t row_bytes = el_row_size(o->type, ne0);
    j->rc = j->rend > j->rbeg ? convert_rows(o->type, j->fbuf + j->rbeg * ne0, j->qbuf + (size_t)j->rbeg * row_bytes,
                                             j->rend - j->rbeg, ne0, &j->err)
                              : 0;
    return NULL;
}

#define PACK_MAX_THREADS 16

static int convert_chunk(const otensor *o, int64_t r0, int64_t nr, int64_t rows, float *fbuf, void *qbuf, int n_threads,
                         el_error *err) {
    chunk_job jobs[PACK_MAX_THREADS];
    pthread_t th[PACK_MAX_THREADS];
    bool started[PACK_MAX_THREADS] = {false};
    int nt = n_threads;
    if (nt > nr) nt = (int)nr;
    if (nt < 1) nt = 1;
    for (int t = 0; t < nt; t++) {
        memset(&jobs[t], 0, sizeof jobs[t]);
        jobs[t].o = o;
        jobs[t].r0 = r0;
        jobs[t].rows = rows;
        jobs[t].rbeg = nr * t / nt;
        jobs[t].rend = nr * (t + 1) / nt;
        jobs[t].fbuf = fbuf;
        jobs[t].qbuf = qbuf;
    }
    for (int t = 1; t < nt; t++) started[t] = pthread_create(&th[t], NULL, chunk_worker, &jobs[t]) == 0;
    chunk_worker(&jobs[0]);
    for (int t = 1; t < nt; t++) {
        if (started[t]) pthread_join(th[t], NULL);
        else chunk_worker(&jobs[t]); /* no thread: do it here */
    }
    for (int t = 0; t < nt; t++)
        if (jobs[t].rc) { *err = jobs[t].err; return jobs[t].rc; }
    return 0;
}

/* ---- the file ------------------------------------------------------------- */

static const char *base_name(const char *dir, char *buf, size_t cap) {
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    size_t s = n;
    while (s > 0 && dir[s - 1] != '/') s--;
    snprintf(buf, cap, "%.*s", (int)(n - s), dir + s);
    return buf;
}

static int write_meta(el_gguf_writer *w, const hparams *hp, const el_hf_vocab *v, const el_pack_params *p, const char *dir) {
    char key[128], nb[256];
#define K(s) (snprintf(key, sizeof key, "%s.%s", hp->arch, s), key)
    el_gguf_w_str(w, "general.architecture", hp->arch);
    el_gguf_w_str(w, "general.type", "model");
    el_gguf_w_str(w, "general.name", p->name ? p->name : base_name(dir, nb, sizeof nb));
    el_gguf_w_u32(w, "general.file_type", (uint32_t)el_ftype_gguf_id(p->ftype));
    el_gguf_w_u32(w, "general.quantization_version", 2);
    el_gguf_w_u32(w, K("vocab_size"), (uint32_t)v->n);
    el_gguf_w_u32(w, K("context_length"), (uint32_t)hp->n_ctx);
    el_gguf_w_u32(w, K("embedding_length"), (uint32_t)hp->n_embd);
    el_gguf_w_u32(w, K("feed_forward_length"), (uint32_t)hp->n_ff);
    el_gguf_w_u32(w, K("block_count"), (uint32_t)hp->n_layer);
    el_gguf_w_u32(w, K("attention.head_count"), (uint32_t)hp->n_head);
    el_gguf_w_u32(w, K("attention.head_count_kv"), (uint32_t)hp->n_head_kv);
    el_gguf_w_f32(w, K("attention.layer_norm_rms_epsilon"), (float)hp->norm_eps);
    el_gguf_w_f32(w, K("rope.freq_base"), (float)hp->rope_base);
    if (hp->head_dim_given) {
        el_gguf_w_u32(w, K("attention.key_length"), (uint32_t)hp->head_dim);
        el_gguf_w_u32(w, K("attention.value_length"), (uint32_t)hp->head_dim);
    }
    if (!strcmp(hp->arch, "llama")) el_gguf_w_u32(w, K("rope.dimension_count"), (uint32_t)hp->head_dim);
    if (!strcmp(hp->rope_type, "linear")) {
        el_gguf_w_str(w, K("rope.scaling.type"), "linear");
        el_gguf_w_f32(w, K("rope.scaling.factor"), (float)hp->rope_factor);
    }
    if (!strcmp(hp->arch, "gemma3")) {
        el_gguf_w_u32(w, K("attention.sliding_window"), (uint32_t)hp->sliding_window);
        el_gguf_w_f32(w, K("rope.freq_base_swa"), (float)hp->rope_base_swa);
    }
#undef K
    /* tokenizer */
    el_gguf_w_str(w, "tokenizer.ggml.model", v->model);
    if (v->pre[0]) el_gguf_w_str(w, "tokenizer.ggml.pre", v->pre);
    el_gguf_w_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)v->tok, v->len, (uint64_t)v->n);
    if (v->scores) el_gguf_w_arr(w, "tokenizer.ggml.scores", EL_GGUF_FLOAT32, v->scores, (uint64_t)v->n);
    el_gguf_w_arr(w, "tokenizer.ggml.token_type", EL_GGUF_INT32, v->types, (uint64_t)v->n);
    if (v->merges) el_gguf_w_arr_str(w, "tokenizer.ggml.merges", (const char *const *)v->merges, NULL, (uint64_t)v->n_merges);
    if (v->bos >= 0) el_gguf_w_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)v->bos);
    if (v->eos >= 0) el_gguf_w_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)v->eos);
    if (v->eot >= 0) el_gguf_w_u32(w, "tokenizer.ggml.eot_token_id", (uint32_t)v->eot);
    if (v->unk >= 0) el_gguf_w_u32(w, "tokenizer.ggml.unknown_token_id", (uint32_t)v->unk);
    if (v->pad >= 0) el_gguf_w_u32(w, "tokenizer.ggml.padding_token_id", (uint32_t)v->pad);
    el_gguf_w_bool(w, "tokenizer.ggml.add_bos_token", v->add_bos != 0);
    el_gguf_w_bool(w, "tokenizer.ggml.add_eos_token", v->add_eos != 0);
    if (!strcmp(v->model, "llama")) el_gguf_w_bool(w, "tokenizer.ggml.add_space_prefix", v->add_space_prefix);
    if (v->chat_template) el_gguf_w_str(w, "tokenizer.chat_template", v->chat_template);
    return el_gguf_w_error(w)[0] ? -1 : 0;
}

int el_pack(const char *hf_dir, const char *out_path, const el_pack_params *pp, el_pack_info *info, el_error *err) {
    el_pack_params dp = el_pack_default_params();
    const el_pack_params *p = pp ? pp : &dp;
    if (err) { err->code = EL_OK; err->msg[0] = 0; }
    el_error dummy;
    if (!err) err = &dummy;
    if ((unsigned)p->ftype >= EL_FTYPE_COUNT) return el_set_error(err, EL_ERR_INVALID_ARG, "unknown file type %d", (int)p->ftype);
    int rc = 0;
    cJSON *cfg = NULL;
    el_st_set *st = NULL;
    el_hf_vocab voc;
    memset(&voc, 0, sizeof voc);
    otensor *ot = NULL;
    el_qtensor *qt = NULL;
    el_type *types = NULL;
    el_gguf_writer *w = NULL;
    float *fbuf = NULL;
    void *qbuf = NULL, *pbuf = NULL;
    el_layout *lays = NULL;
    int n_out = 0;

    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", hf_dir);
    char *text = el_conv_read_file(path, (size_t)16 << 20, err);
    if (!text) return err->code;
    cfg = cJSON_Parse(text);
    free(text);
    if (!cfg) { rc = el_set_error(err, EL_ERR_BAD_VALUE, "%s: not valid JSON", path); goto done; }
    hparams hp;
    if ((rc = read_config(cfg, &hp, err))) goto done;
    if (!(st = el_st_open_dir(hf_dir, err))) { rc = err->code; goto done; }
    if ((rc = el_hf_vocab_load(hf_dir, hp.n_vocab, hp.bos, hp.eos, &voc, err))) goto done;

    /* output tensors */
    int ns = el_st_count(st);
    ot = calloc((size_t)ns + 1, sizeof *ot);
    if (!ot) { rc = el_set_error(err, EL_ERR_NOMEM, "out of memory"); goto done; }
    for (int i = 0; i < ns; i++) {
        int r = map_tensor(&hp, el_st_at(st, i), &ot[n_out], err);
        if (r < 0) { rc = err->code ? err->code : EL_ERR_INTERNAL; goto done; }
        if (r == 1) n_out++;
    }
    if (!strcmp(hp.rope_type, "llama3")) {
        otensor *o = &ot[n_out++];
        memset(o, 0, sizeof *o);
        snprintf(o->name, sizeof o->name, "rope_freqs.weight");
        o->gen = llama3_rope_freqs(&hp);
        if (!o->gen) { rc = el_set_error(err, EL_ERR_NOMEM, "out of memory"); goto done; }
        o->n_dims = 1;
        o->ne[0] = hp.head_dim / 2;
        o->ne[1] = o->ne[2] = o->ne[3] = 1;
        o->order = 1 << 27;
    }
    qsort(ot, (size_t)n_out, sizeof *ot, cmp_otensor);
    bool have_embd = false;
    for (int i = 0; i < n_out; i++) {
        have_embd |= !strcmp(ot[i].name, "token_embd.weight");
        if (!strcmp(ot[i].name, "token_embd.weight") && ot[i].ne[1] != voc.n) {
            rc = el_set_error(err, EL_ERR_BAD_TENSOR, "model.embed_tokens.weight has %lld rows, the vocabulary %d tokens", (long long)ot[i].ne[1], voc.n);
            goto done;
        }
    }
    if (!have_embd) { rc = el_set_error(err, EL_ERR_MISSING, "%s: no model.embed_tokens.weight", hf_dir); goto done; }
    if ((rc = check_complete(&hp, ot, n_out, err))) goto done;
    if (!hp.tied && !el_st_find(st, "lm_head.weight")) hp.tied = true; /* no head stored: the runtime ties */

    /* types */
    qt = calloc((size_t)n_out, sizeof *qt);
    types = calloc((size_t)n_out, sizeof *types);
    lays = calloc((size_t)n_out, sizeof *lays);
    if (!qt || !types || !lays) { rc = el_set_error(err, EL_ERR_NOMEM, "out of memory"); goto done; }
    for (int i = 0; i < n_out; i++) {
        qt[i].name = ot[i].name;
        qt[i].n_dims = ot[i].n_dims;
        memcpy(qt[i].ne, ot[i].ne, sizeof qt[i].ne);
    }
    el_qmodel qm = {.arch = hp.arch, .n_layer = hp.n_layer, .n_head = hp.n_head, .n_head_kv = hp.n_head_kv, .n_expert = 0};
    char perr[256] = {0};
    if (el_quant_plan(p->ftype, &qm, qt, n_out, types, perr, sizeof perr) != 0) {
        rc = el_set_error(err, EL_ERR_UNSUPPORTED, "%s: %s", el_ftype_name(p->ftype), perr);
        goto done;
    }

    /* the file */
    w = el_gguf_writer_new();
    if (!w) { rc = el_set_error(err, EL_ERR_NOMEM, "out of memory"); goto done; }
    write_meta(w, &hp, &voc, p, hf_dir);
    int64_t max_row = 1;
    bool tied = true;
    for (int i = 0; i < n_out; i++) tied &= strcmp(ot[i].name, "output.weight") != 0;
    for (int i = 0; i < n_out; i++) {
        ot[i].type = types[i];
        lays[i] = p->layout_r16 ? el_layout_r16_for(ot[i].name, ot[i].n_dims, ot[i].ne, types[i], tied) : EL_LAYOUT_FLAT;
        el_gguf_w_add_tensor(w, ot[i].name, lays[i] ? el_layout_type(lays[i]) : (int)types[i], ot[i].n_dims, ot[i].ne);
        if (ot[i].ne[0] > max_row) max_row = ot[i].ne[0];
    }
    if (el_gguf_w_error(w)[0]) { rc = el_set_error(err, EL_ERR_INVALID_ARG, "%s", el_gguf_w_error(w)); goto done; }
    uint64_t total = 0;
    for (int i = 0; i < n_out; i++) total += el_gguf_w_tensor_nbytes(w, i);
    int64_t chunk_rows_max = CHUNK_ELEMS / max_row;
    if (chunk_rows_max < 1) chunk_rows_max = 1;
    if (chunk_rows_max < EL_LAYOUT_R16_ROWS) chunk_rows_max = EL_LAYOUT_R16_ROWS; /* a layout packs whole groups */
    fbuf = malloc(sizeof(float) * (size_t)(chunk_rows_max * max_row));
    qbuf = malloc(sizeof(float) * (size_t)(chunk_rows_max * max_row)); /* every target is <= 4 bytes per element */
    if (p->layout_r16) pbuf = malloc(sizeof(float) * (size_t)(chunk_rows_max * max_row)); /* qbuf in a layout */
    if (!fbuf || !qbuf || (p->layout_r16 && !pbuf)) { rc = el_set_error(err, EL_ERR_NOMEM, "out of memory"); goto done; }
    if ((rc = el_gguf_w_begin(w, out_path, err))) goto done;
    uint64_t done_bytes = 0;
    int n_threads = p->n_threads;
    if (n_threads <= 0) {
        long nc = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = nc > 0 ? (int)nc : 1;
    }
    if (n_threads > PACK_MAX_THREADS) n_threads = PACK_MAX_THREADS;
    if (p->progress) p->progress(p->progress_ud, 0, total, "");
    for (int i = 0; i < n_out; i++) {
        const otensor *o = &ot[i];
        int64_t ne0 = o->ne[0], rows = o->ne[1] * o->ne[2] * o->ne[3];
        int64_t chunk = CHUNK_ELEMS / ne0;
        if (chunk < 1) chunk = 1;
        if (lays[i]) chunk = chunk < EL_LAYOUT_R16_ROWS ? EL_LAYOUT_R16_ROWS : chunk - chunk % EL_LAYOUT_R16_ROWS;
        for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
            int64_t nr = rows - r0 < chunk ? rows - r0 : chunk;
            if ((rc = convert_chunk(o, r0, nr, rows, fbuf, qbuf, n_threads, err))) goto done;
            size_t nbytes = el_row_size(o->type, ne0) * (size_t)nr;
            const uint8_t *out = qbuf;
            if (lays[i]) { /* whole groups: chunks start at multiples of 16 rows, the tensor holds 16k */
                el_layout_pack(lays[i], qbuf, el_row_size(o->type, ne0), ne0, nr, pbuf);
                out = pbuf;
            }
            if ((rc = el_gguf_w_tensor_data(w, out, nbytes, err))) goto done;
            done_bytes += nbytes;
            if (p->progress) p->progress(p->progress_ud, done_bytes, total, o->name);
        }
    }
    if ((rc = el_gguf_w_finish(w, err))) goto done;
    /* read it back through the validating reader */
    el_gguf *g = el_gguf_open(out_path, err);
    if (!g) { rc = err->code; goto done; }
    if (info) {
        memset(info, 0, sizeof *info);
        snprintf(info->arch, sizeof info->arch, "%s", hp.arch);
        info->n_tensors = n_out;
        info->n_vocab = voc.n;
        info->file_bytes = el_gguf_file_size(g);
        for (int i = 0; i < n_out; i++) {
            if ((unsigned)ot[i].type < 64) info->n_by_type[ot[i].type]++;
            info->n_layout += lays[i] != EL_LAYOUT_FLAT;
        }
    }
    el_gguf_close(g);
done:
    el_gguf_writer_free(w);
    free(fbuf);
    free(qbuf);
    free(pbuf);
    free(lays);
    if (ot)
        for (int i = 0; i < n_out; i++) free(ot[i].gen);
    free(ot);
    free(qt);
    free(types);
    el_hf_vocab_free(&voc);
    el_st_close(st);
    cJSON_Delete(cfg);
    return rc;
}

/* ---- PEFT LoRA adapters (el_pack_lora) ------------------------------------ */

/* "base_model.model.<HF weight stem>.lora_A.weight" → the base's HF weight name and which half (0: A, 1: B). */
static int peft_base_name(const char *n, char *out, size_t cap, int *half) {
    const char *pre = "base_model.model.";
    if (strncmp(n, pre, strlen(pre)) != 0) return 0;
    n += strlen(pre);
    const char *sa = ".lora_A.weight", *sb = ".lora_B.weight";
    size_t len = strlen(n);
    if (len > strlen(sa) && !strcmp(n + len - strlen(sa), sa)) *half = 0;
    else if (len > strlen(sb) && !strcmp(n + len - strlen(sb), sb)) *half = 1;
    else return 0;
    const size_t stem = len - strlen(sa);
    if (stem + 8 > cap) return 0;
    memcpy(out, n, stem);
    memcpy(out + stem, ".weight", 8);
    return 1;
}

int el_pack_lora(const char *peft_dir, const char *base_dir, const char *out_path, el_type type, el_pack_info *info,
                 el_error *err) {
    el_error dummy;
    if (!err) err = &dummy;
    err->code = EL_OK, err->msg[0] = 0;
    if (type != EL_TYPE_F32 && type != EL_TYPE_F16 && type != EL_TYPE_BF16)
        return el_set_error(err, EL_ERR_INVALID_ARG, "a LoRA adapter is written as F32, F16 or BF16, not %s", el_type_name(type));
    int rc = 0;
    cJSON *bcfg = NULL, *acfg = NULL;
    el_st_set *st = NULL;
    otensor *ot = NULL;
    int *half = NULL;
    el_gguf_writer *w = NULL;
    float *fbuf = NULL;
    void *qbuf = NULL;
    int n_out = 0;
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", base_dir);
    char *text = el_conv_read_file(path, (size_t)16 << 20, err);
    if (!text) return err->code;
    bcfg = cJSON_Parse(text);
    free(text);
    if (!bcfg) { rc = el_set_error(err, EL_ERR_BAD_VALUE, "%s: not valid JSON", path); goto done; }
    hparams hp;
    if ((rc = read_config(bcfg, &hp, err))) goto done;
    snprintf(path, sizeof path, "%s/adapter_config.json", peft_dir);
    if (!(text = el_conv_read_file(path, (size_t)1 << 20, err))) { rc = err->code; goto done; }
    acfg = cJSON_Parse(text);
    free(text);
    if (!cJSON_IsObject(acfg)) { rc = el_set_error(err, EL_ERR_BAD_VALUE, "%s: not a JSON object", path); goto done; }
    const char *pt = str_of(acfg, "peft_type");
    if (pt && strcmp(pt, "LORA")) { rc = el_set_error(err, EL_ERR_UNSUPPORTED, "%s: peft_type '%s' (only LORA)", path, pt); goto done; }
    double alpha = 0, r_cfg = 0;
    if (!num(acfg, "lora_alpha", &alpha) || !isfinite(alpha) || alpha < 0 || alpha > 1e6) {
        rc = el_set_error(err, EL_ERR_BAD_VALUE, "%s: \"lora_alpha\" must be a number >= 0", path);
        goto done;
    }
    if (!num(acfg, "r", &r_cfg) || r_cfg < 1 || r_cfg > 4096 || r_cfg != floor(r_cfg)) {
        rc = el_set_error(err, EL_ERR_BAD_VALUE, "%s: \"r\" must be an integer in 1..4096", path);
        goto done;
    }
    static const char *const refused[] = {"use_dora", "use_rslora", "fan_in_fan_out"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(acfg, refused[i]))) {
            rc = el_set_error(err, EL_ERR_UNSUPPORTED, "%s: \"%s\": true is not supported (llama.cpp's LoRA format "
                              "holds plain A/B pairs scaled by alpha / r)", path, refused[i]);
            goto done;
        }
    static const char *const patterns[] = {"rank_pattern", "alpha_pattern", "modules_to_save"};
    for (size_t i = 0; i < sizeof patterns / sizeof patterns[0]; i++) {
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(acfg, patterns[i]);
        if (x && !cJSON_IsNull(x) && cJSON_GetArraySize(x) > 0) {
            rc = el_set_error(err, EL_ERR_UNSUPPORTED, "%s: a non-empty \"%s\" is not supported", path, patterns[i]);
            goto done;
        }
    }
    snprintf(path, sizeof path, "%s/adapter_model.safetensors", peft_dir);
    if (!(st = el_st_open_file(path, err))) { rc = err->code; goto done; }
    const int ns = el_st_count(st);
    ot = calloc((size_t)ns + 1, sizeof *ot);
    half = calloc((size_t)ns + 1, sizeof *half);
    if (!ot || !half) { rc = el_set_error(err, EL_ERR_NOMEM, "out of memory"); goto done; }
    for (int i = 0; i < ns; i++) {
        const el_st_tensor *t = el_st_at(st, i);
        char bn[512];
        if (!peft_base_name(t->name, bn, sizeof bn, &half[n_out])) {
            rc = el_set_error(err, EL_ERR_UNSUPPORTED, "%s: tensor '%s' is not a PEFT LoRA weight "
                              "(base_model.model.<module>.lora_A/lora_B.weight)", path, t->name);
            goto done;
        }
        el_st_tensor bt = *t;
        bt.name = bn;
        /* A [r, in]: mapped with a row count any head split accepts (its rows are ranks, never permuted) */
        if (half[n_out] == 0 && bt.n_dims == 2) bt.shape[0] = 2 * (int64_t)(hp.n_head > 0 ? hp.n_head : 1);
        int m = map_tensor(&hp, &bt, &ot[n_out], err);
        if (m == 1 && t->n_dims == 2) ot[n_out].ne[1] = t->shape[0];
        if (m < 0) { rc = err->code ? err->code : EL_ERR_INTERNAL; goto done; }
        char *dot = strrchr(ot[n_out].name, '.');
        const bool linear = m == 1 && t->n_dims == 2 && dot && !strcmp(dot, ".weight") && strstr(ot[n_out].name, "norm") == NULL &&
                            strcmp(ot[n_out].name, "token_embd.weight") != 0;
        if (!linear) {
            rc = el_set_error(err, EL_ERR_UNSUPPORTED, "%s: tensor '%s' adapts '%s', which is not a projection a LoRA "
                              "adapter can target here (q/k/v/o, gate/up/down, an untied output head)", path, t->name, bn);
            goto done;
        }
        ot[n_out].src = t;
        ot[n_out].add = 0.0f;
        ot[n_out].order = ot[n_out].order * 2 + half[n_out]; /* the base's order, A before B */
        if (half[n_out] == 0) ot[n_out].permute_heads = 0; /* A [r, in]: the rotary row order is B's (its rows are outputs) */
        const size_t l = strlen(ot[n_out].name);
        snprintf(ot[n_out].name + l, sizeof ot[n_out].name - l, "%s", half[n_out] ? ".lora_b" : ".lora_a");
        if (ot[n_out].permute_heads && ot[n_out].ne[1] % (2 * ot[n_out].permute_heads)) {
            rc = el_set_error(err, EL_ERR_BAD_TENSOR, "tensor '%s': %lld rows do not split into %d heads", t->name,
                              (long long)ot[n_out].ne[1], ot[n_out].permute_heads);
            goto done;
        }
        n_out++;
    }
    if (n_out == 0) { rc = el_set_error(err, EL_ERR_MISSING, "%s: no LoRA tensors", path); goto done; }
    qsort(ot, (size_t)n_out, sizeof *ot, cmp_otensor);
    /* pairs: every A has its B, ranks agree (A [in, r], B [r, out]) */
    for (int i = 0; i < n_out; i++) {
        const size_t l = strlen(ot[i].name);
        const bool is_a = l > 7 && !strcmp(ot[i].name + l - 7, ".lora_a");
        char other[sizeof ot[i].name];
        snprintf(other, sizeof other, "%.*s%s", (int)(l - 7), ot[i].name, is_a ? ".lora_b" : ".lora_a");
        int j = 0;
        while (j < n_out && strcmp(ot[j].name, other)) j++;
        if (j == n_out) { rc = el_set_error(err, EL_ERR_MISSING, "LoRA pair for '%s' has no '%s'", ot[i].name, other); goto done; }
        const otensor *a = is_a ? &ot[i] : &ot[j], *b = is_a ? &ot[j] : &ot[i];
        if (a->ne[1] != b->ne[0]) {
            rc = el_set_error(err, EL_ERR_BAD_TENSOR, "'%s': lora_A has rank %lld, lora_B %lld", a->name, (long long)a->ne[1],
                              (long long)b->ne[0]);
            goto done;
        }
    }
    w = el_gguf_writer_new();
    if (!w) { rc = el_set_error(err, EL_ERR_NOMEM, "out of memory"); goto done; }
    el_gguf_w_str(w, "general.architecture", hp.arch);
    el_gguf_w_str(w, "general.type", "adapter");
    el_gguf_w_str(w, "adapter.type", "lora");
    el_gguf_w_f32(w, "adapter.lora.alpha", (float)alpha);
    char nb[256];
    el_gguf_w_str(w, "general.name", base_name(peft_dir, nb, sizeof nb));
    int64_t max_n = 1;
    for (int i = 0; i < n_out; i++) {
        ot[i].type = type;
        el_gguf_w_add_tensor(w, ot[i].name, (int)type, 2, ot[i].ne);
        if (ot[i].ne[0] * ot[i].ne[1] > max_n) max_n = ot[i].ne[0] * ot[i].ne[1];
    }
    if (el_gguf_w_error(w)[0]) { rc = el_set_error(err, EL_ERR_INVALID_ARG, "%s", el_gguf_w_error(w)); goto done; }
    fbuf = malloc(sizeof(float) * (size_t)max_n);
    qbuf = malloc(sizeof(float) * (size_t)max_n);
    if (!fbuf || !qbuf) { rc = el_set_error(err, EL_ERR_NOMEM, "out of memory"); goto done; }
    if ((rc = el_gguf_w_begin(w, out_path, err))) goto done;
    for (int i = 0; i < n_out; i++) {
        const otensor *o = &ot[i];
        const int64_t ne0 = o->ne[0], rows = o->ne[1];
        for (int64_t r = 0; r < rows; r++)
            src_row_f32(o->src, o->permute_heads ? permuted_src_row(r, rows, o->permute_heads) : r, ne0, fbuf + r * ne0);
        if ((rc = convert_rows(type, fbuf, qbuf, rows, ne0, err))) goto done;
        if ((rc = el_gguf_w_tensor_data(w, qbuf, el_row_size(type, ne0) * (size_t)rows, err))) goto done;
    }
    if ((rc = el_gguf_w_finish(w, err))) goto done;
    el_gguf *g = el_gguf_open(out_path, err);
    if (!g) { rc = err->code; goto done; }
    if (info) {
        memset(info, 0, sizeof *info);
        snprintf(info->arch, sizeof info->arch, "%s", hp.arch);
        info->n_tensors = n_out;
        info->file_bytes = el_gguf_file_size(g);
        info->n_by_type[type] = n_out;
    }
    el_gguf_close(g);
done:
    el_gguf_writer_free(w);
    free(fbuf);
    free(qbuf);
    free(ot);
    free(half);
    el_st_close(st);
    cJSON_Delete(acfg);
    cJSON_Delete(bcfg);
    return rc;
}
