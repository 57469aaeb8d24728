/*
 * tokenizer_vocab.c — an el_vocab from GGUF metadata (tokenizer.ggml.*), as
 * llama.cpp's llama_vocab::load; its accessors and el_vocab_free.
 *
 * Contract: el_vocab_load refuses what edgellm does not implement (WPM, UGM,
 * RWKV, PLaMo-2, Gemma 4 tokenizers, no vocab, an unknown pre-tokenizer) and
 * malformed metadata with a message naming the key; otherwise it copies what
 * tokenization needs (the gguf may be closed after) and applies llama.cpp's
 * rules: default special ids per model, metadata overrides, token attributes
 * from token_type, text-based detection of EOT/EOM/FIM tokens (which become
 * control tokens), the EOG set, the special-token cache (control /
 * user-defined / unknown, longest text first), the per-model attribute
 * fix-ups (phi-3 rstrip, jina <mask> lstrip), the SPM byte-fallback table and
 * (BPE) the pre-tokenizer's compiled regexes. A failed load frees everything.
 */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif
#include "runtime/tokenizer_internal.h"

#include <stdio.h>

#include "util/error.h"

static bool str_is(const el_vocab *v, int32_t id, const char *s) {
    if (v->tlen[id] == 0 || v->blob[v->toff[id]] != s[0]) return false;
    size_t n = strlen(s);
    return v->tlen[id] == n && memcmp(v->blob + v->toff[id], s, n) == 0;
}

static bool text_contains(const char *hay, size_t hn, const char *needle) {
    size_t nn = strlen(needle);
    if (nn == 0) return true;
    for (size_t i = 0; i + nn <= hn; i++)
        if (memcmp(hay + i, needle, nn) == 0) return true;
    return false;
}

static el_vocab *load_fail(el_vocab *v) {
    el_vocab_free(v);
    return NULL;
}

static int cmp_special(const void *a, const void *b, void *ctx) {
    const el_vocab *v = ctx;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    if (v->tlen[x] != v->tlen[y]) return v->tlen[x] > v->tlen[y] ? -1 : 1;
    return (x > y) - (x < y);
}

/* insertion-free sort helper: qsort_r is GNU; use a plain merge sort instead */
static void sort_special(el_vocab *v, int32_t *a, int n, int32_t *tmp) {
    if (n < 2) return;
    int h = n / 2;
    sort_special(v, a, h, tmp);
    sort_special(v, a + h, n - h, tmp);
    int i = 0, j = h, k = 0;
    while (i < h && j < n) tmp[k++] = cmp_special(&a[j], &a[i], v) < 0 ? a[j++] : a[i++];
    while (i < h) tmp[k++] = a[i++];
    while (j < n) tmp[k++] = a[j++];
    memcpy(a, tmp, (size_t)n * sizeof *a);
}

static void read_special_id(const el_gguf *g, const char *key, int32_t *id, int n_tokens) {
    if (*id >= n_tokens) *id = -1; /* default out of range: disabled */
    uint32_t u;
    if (!el_gguf_get_u32(g, key, &u)) return;
    if (u < (uint32_t)n_tokens) *id = (int32_t)u;
}

/* The string array at key: min_n..INT32_MAX / 2 entries. false with err
 * (EL_ERR_MISSING, `note` after the message, when the key is absent). */
static bool string_arr(const el_gguf *g, const char *key, const char *note, uint64_t min_n, uint64_t *n,
                       const uint8_t **data, el_error *err) {
    el_gguf_vtype type;
    if (!el_gguf_get_arr(g, key, &type, n, data)) {
        el_set_error(err, EL_ERR_MISSING, "tokenizer: %s is missing%s", key, note);
        return false;
    }
    if (type != EL_GGUF_STRING) {
        el_set_error(err, EL_ERR_BAD_VALUE, "tokenizer: %s is not a string array", key);
        return false;
    }
    if (*n < min_n || *n > (uint64_t)INT32_MAX / 2) {
        el_set_error(err, EL_ERR_BAD_COUNT, "tokenizer: %s has %llu entries", key, (unsigned long long)*n);
        return false;
    }
    return true;
}

/* The per-token array at key, n entries at least, int32 elements (or
 * float32 where float_ok); *data stays NULL when the key is absent. false
 * with err when it is not such an array. */
static bool per_token_arr(const el_gguf *g, const char *key, bool float_ok, uint64_t n, const uint8_t **data,
                          el_gguf_vtype *type, el_error *err) {
    uint64_t na;
    if (!el_gguf_get_arr(g, key, type, &na, data)) {
        *data = NULL;
        if (!el_gguf_find(g, key)) return true;
        el_set_error(err, EL_ERR_BAD_VALUE, "tokenizer: %s is not an array", key);
        return false;
    }
    if (*type != EL_GGUF_INT32 && !(float_ok && *type == EL_GGUF_FLOAT32)) {
        el_set_error(err, EL_ERR_BAD_VALUE, "tokenizer: %s has element type %s", key, el_gguf_vtype_name(*type));
        return false;
    }
    if (na < n) {
        el_set_error(err, EL_ERR_BAD_COUNT, "tokenizer: %s has %llu < %llu entries", key, (unsigned long long)na,
                     (unsigned long long)n);
        return false;
    }
    return true;
}

static void mark_control(el_vocab *v, int32_t id) { v->attr[id] |= ATTR_CONTROL; }

el_vocab *el_vocab_load(const el_gguf *g, el_error *err) {
    if (!g) {
        el_set_error(err, EL_ERR_INVALID_ARG, "tokenizer: no gguf");
        return NULL;
    }
    el_str model;
    if (!el_gguf_get_str(g, "tokenizer.ggml.model", &model)) {
        el_set_error(err, EL_ERR_MISSING, "tokenizer: tokenizer.ggml.model is missing");
        return NULL;
    }
    int type;
    if (el_str_eq(model, "llama")) type = VOCAB_SPM;
    else if (el_str_eq(model, "gpt2")) type = VOCAB_BPE;
    else if (el_str_eq(model, "none") || el_str_eq(model, "no_vocab")) {
        el_set_error(err, EL_ERR_MISSING, "tokenizer: the model has no vocabulary (tokenizer.ggml.model = '%.*s')",
                     (int)model.len, model.ptr);
        return NULL;
    } else {
        const char *what = "unknown tokenizer";
        if (el_str_eq(model, "bert")) what = "WPM tokenizer";
        else if (el_str_eq(model, "t5")) what = "UGM tokenizer";
        else if (el_str_eq(model, "rwkv")) what = "RWKV tokenizer";
        else if (el_str_eq(model, "plamo2")) what = "PLaMo-2 tokenizer";
        else if (el_str_eq(model, "gemma4")) what = "Gemma 4 BPE tokenizer";
        el_set_error(err, EL_ERR_UNSUPPORTED, "tokenizer: %s '%.*s' is not supported (tokenizer.ggml.model)",
                     what, (int)(model.len > 64 ? 64 : model.len), model.ptr);
        return NULL;
    }

    el_vocab *v = calloc(1, sizeof *v);
    if (!v) {
        el_set_error(err, EL_ERR_NOMEM, "tokenizer: out of memory");
        return NULL;
    }
    el_tok_byte_tables_init();
    v->type = type;
    snprintf(v->model_name, sizeof v->model_name, "%s", type == VOCAB_SPM ? "llama" : "gpt2");
    v->bos = v->eos = v->unk = v->eot = v->eom = -1;
    v->fim_pre = v->fim_suf = v->fim_mid = v->fim_pad = v->fim_rep = v->fim_sep = -1;

    el_str pre;
    bool have_pre = el_gguf_get_str(g, "tokenizer.ggml.pre", &pre) && pre.len > 0;
    v->pre_name = have_pre ? el_str_dup(pre) : strdup("default");
    if (!v->pre_name) {
        el_set_error(err, EL_ERR_NOMEM, "tokenizer: out of memory");
        return load_fail(v);
    }

    const el_tok_pre *pd = NULL;
    if (type == VOCAB_SPM) {
        v->bos = 1; v->eos = 2; v->unk = 0;
        v->add_bos = true; v->add_eos = false; v->add_space_prefix = true;
    } else {
        pd = el_tok_pre_find(v->pre_name);
        if (!pd) {
            el_set_error(err, EL_ERR_UNSUPPORTED, "tokenizer: pre-tokenizer '%.64s' is not supported (tokenizer.ggml.pre)",
                         v->pre_name);
            return load_fail(v);
        }
        v->bos = 11; v->eos = 11; v->unk = -1;
        v->add_bos = pd->add_bos; v->add_eos = false; v->add_space_prefix = false;
        v->ignore_merges = pd->ignore_merges;
        if (pd->no_bos) v->bos = -1;
    }
    bool b;
    if (el_gguf_get_bool(g, "tokenizer.ggml.add_space_prefix", &b)) v->add_space_prefix = b;

    /* tokens */
    uint64_t n;
    const uint8_t *p;
    if (!string_arr(g, "tokenizer.ggml.tokens", "", 1, &n, &p, err)) return load_fail(v);
    int nt = (int)n;
    v->n_tokens = nt;

    const uint8_t *scores = NULL, *ttypes = NULL;
    el_gguf_vtype st = EL_GGUF_FLOAT32, tt = EL_GGUF_INT32;
    if (!per_token_arr(g, "tokenizer.ggml.scores", true, n, &scores, &st, err) ||
        !per_token_arr(g, "tokenizer.ggml.token_type", false, n, &ttypes, &tt, err))
        return load_fail(v);

    v->toff = malloc((size_t)nt * sizeof *v->toff);
    v->tlen = malloc((size_t)nt * sizeof *v->tlen);
    v->score = malloc((size_t)nt * sizeof *v->score);
    v->attr = malloc((size_t)nt * sizeof *v->attr);
    v->eog = calloc((size_t)nt, 1);
    uint64_t cap = 1;
    while (cap < (uint64_t)nt * 2) cap <<= 1;
    v->ht = malloc(cap * sizeof *v->ht);
    v->ht_mask = cap - 1;
    if (!v->toff || !v->tlen || !v->score || !v->attr || !v->eog || !v->ht) {
        el_set_error(err, EL_ERR_NOMEM, "tokenizer: out of memory for %d tokens", nt);
        return load_fail(v);
    }
    memset(v->ht, 0xff, cap * sizeof *v->ht);

    /* token text blob */
    {
        size_t total = 0;
        const uint8_t *q = p;
        for (int i = 0; i < nt; i++) {
            el_str s = el_gguf_str_next(&q);
            total += s.len ? s.len : 24;
        }
        if (total > UINT32_MAX) {
            el_set_error(err, EL_ERR_BAD_COUNT, "tokenizer: token texts too large");
            return load_fail(v);
        }
        v->blob = malloc(total + 1);
        if (!v->blob) {
            el_set_error(err, EL_ERR_NOMEM, "tokenizer: out of memory");
            return load_fail(v);
        }
        size_t off = 0;
        q = p;
        for (int i = 0; i < nt; i++) {
            el_str s = el_gguf_str_next(&q);
            v->toff[i] = (uint32_t)off;
            if (s.len == 0) {
                int k = snprintf(v->blob + off, 24, "[EMPTY_%d]", i);
                v->tlen[i] = (uint32_t)k;
                off += (size_t)k;
            } else {
                memcpy(v->blob + off, s.ptr, s.len);
                v->tlen[i] = (uint32_t)s.len;
                off += s.len;
            }
            /* insert into hash */
            const char *t = v->blob + v->toff[i];
            uint64_t h = hash_fin(hash_bytes(HASH_SEED, t, v->tlen[i])) & v->ht_mask;
            for (;;) {
                int32_t id = v->ht[h];
                if (id < 0) { v->ht[h] = i; break; }
                if (v->tlen[id] == v->tlen[i] && memcmp(v->blob + v->toff[id], t, v->tlen[i]) == 0) {
                    el_set_error(err, EL_ERR_BAD_VALUE, "tokenizer: duplicate token '%.*s' has ids %d and %d",
                                 (int)(v->tlen[i] > 64 ? 64 : v->tlen[i]), t, id, i);
                    return load_fail(v);
                }
                h = (h + 1) & v->ht_mask;
            }

            if (scores) {
                if (st == EL_GGUF_FLOAT32) memcpy(&v->score[i], scores + 4 * (size_t)i, 4);
                else { int32_t x; memcpy(&x, scores + 4 * (size_t)i, 4); v->score[i] = (float)x; }
            } else {
                v->score[i] = 0.0f;
            }
            uint16_t a = ATTR_NORMAL;
            if (ttypes) {
                int32_t tt;
                memcpy(&tt, ttypes + 4 * (size_t)i, 4);
                switch (tt) {
                case 1: a = ATTR_NORMAL; break;
                case 2: a = ATTR_UNKNOWN; break;
                case 3: a = ATTR_CONTROL; break;
                case 4: a = ATTR_USER_DEFINED; break;
                case 5: a = ATTR_UNUSED; break;
                case 6: a = ATTR_BYTE; break;
                default: a = 0; break;
                }
            }
            v->attr[i] = a;
        }
    }

    /* merges */
    if (type == VOCAB_BPE) {
        uint64_t nm;
        const uint8_t *mp;
        if (!string_arr(g, "tokenizer.ggml.merges", " (gpt2 model)", 0, &nm, &mp, err)) return load_fail(v);
        v->n_merges = (int64_t)nm;
        size_t total = 0;
        const uint8_t *q = mp;
        for (uint64_t i = 0; i < nm; i++) total += el_gguf_str_next(&q).len;
        uint64_t mc = 1;
        while (mc < nm * 2 + 2) mc <<= 1;
        v->mblob = malloc(total + 1);
        v->moff = malloc((nm + 1) * sizeof *v->moff);
        v->mfirst = malloc((nm + 1) * sizeof *v->mfirst);
        v->msecond = malloc((nm + 1) * sizeof *v->msecond);
        v->mht = malloc(mc * sizeof *v->mht);
        if (!v->mblob || !v->moff || !v->mfirst || !v->msecond || !v->mht) {
            el_set_error(err, EL_ERR_NOMEM, "tokenizer: out of memory for merges");
            return load_fail(v);
        }
        v->mht_mask = mc - 1;
        memset(v->mht, 0xff, mc * sizeof *v->mht);
        size_t off = 0;
        q = mp;
        for (uint64_t i = 0; i < nm; i++) {
            el_str s = el_gguf_str_next(&q);
            memcpy(v->mblob + off, s.ptr, s.len);
            v->moff[i] = off;
            const char *m = v->mblob + off;
            off += s.len;
            /* split at the first space after position 0 */
            size_t sp = 0;
            for (size_t k = 1; k < s.len; k++)
                if (m[k] == ' ') { sp = k; break; }
            if (sp == 0) { v->mfirst[i] = v->msecond[i] = 0; continue; } /* ("", "") never looked up */
            v->mfirst[i] = (uint32_t)sp;
            v->msecond[i] = (uint32_t)(s.len - sp - 1);
            uint64_t h = merge_hash(m, sp, m + sp + 1, s.len - sp - 1) & v->mht_mask;
            for (;;) {
                int32_t r = v->mht[h];
                if (r < 0) { v->mht[h] = (int32_t)i; break; }
                const char *o = v->mblob + v->moff[r];
                if (v->mfirst[r] == sp && v->msecond[r] == s.len - sp - 1 && memcmp(o, m, s.len) == 0)
                    break; /* duplicate pair: the first rank wins */
                h = (h + 1) & v->mht_mask;
            }
        }
    }

    /* special token ids from metadata */
    read_special_id(g, "tokenizer.ggml.bos_token_id", &v->bos, nt);
    read_special_id(g, "tokenizer.ggml.eos_token_id", &v->eos, nt);
    read_special_id(g, "tokenizer.ggml.eot_token_id", &v->eot, nt);
    read_special_id(g, "tokenizer.ggml.eom_token_id", &v->eom, nt);
    read_special_id(g, "tokenizer.ggml.unknown_token_id", &v->unk, nt);
    read_special_id(g, "tokenizer.ggml.fim_pre_token_id", &v->fim_pre, nt);
    read_special_id(g, "tokenizer.ggml.fim_suf_token_id", &v->fim_suf, nt);
    read_special_id(g, "tokenizer.ggml.fim_mid_token_id", &v->fim_mid, nt);
    read_special_id(g, "tokenizer.ggml.fim_pad_token_id", &v->fim_pad, nt);
    read_special_id(g, "tokenizer.ggml.fim_rep_token_id", &v->fim_rep, nt);
    read_special_id(g, "tokenizer.ggml.fim_sep_token_id", &v->fim_sep, nt);
    read_special_id(g, "tokenizer.ggml.prefix_token_id", &v->fim_pre, nt);
    read_special_id(g, "tokenizer.ggml.suffix_token_id", &v->fim_suf, nt);
    read_special_id(g, "tokenizer.ggml.middle_token_id", &v->fim_mid, nt);

    if (el_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &b)) v->add_bos = b;
    if (el_gguf_get_bool(g, "tokenizer.ggml.add_eos_token", &b)) v->add_eos = b;
    if (v->add_bos && v->bos < 0) {
        el_set_error(err, EL_ERR_BAD_VALUE, "tokenizer: tokenizer.ggml.add_bos_token is true, but tokenizer.ggml.bos_token_id is not set");
        return load_fail(v);
    }
    if (v->add_eos && v->eos < 0) {
        el_set_error(err, EL_ERR_BAD_VALUE, "tokenizer: tokenizer.ggml.add_eos_token is true, but tokenizer.ggml.eos_token_id is not set");
        return load_fail(v);
    }

    /* text-based detection of EOT / EOM / FIM tokens (they become control tokens) */
    {
        static const char *const eot_list[] = { "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>",
            "<|endoftext|>", "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]",
            "<\xef\xbd\x9c" "end\xe2\x96\x81" "of\xe2\x96\x81" "sentence\xef\xbd\x9c>", "<end_of_utterance>", NULL };
        static const char *const eom_list[] = { "<|eom_id|>", NULL };
        static const char *const pre_list[] = { "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",
            "<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>", "<PRE>", "\xe2\x96\x81<PRE>", "<|code_prefix|>",
            "<|prefix|>", NULL };
        static const char *const suf_list[] = { "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
            "<\xef\xbd\x9c" "fim\xe2\x96\x81" "hole\xef\xbd\x9c>", "<SUF>", "\xe2\x96\x81<SUF>", "<|code_suffix|>",
            "<|suffix|>", NULL };
        static const char *const mid_list[] = { "<|fim_middle|>", "<fim-middle>", "<fim_middle>",
            "<\xef\xbd\x9c" "fim\xe2\x96\x81" "end\xef\xbd\x9c>", "<MID>", "\xe2\x96\x81<MID>", "<|code_middle|>",
            "<|middle|>", NULL };
        static const char *const pad_list[] = { "<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", NULL };
        static const char *const rep_list[] = { "<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>",
            "<reponame>", NULL };
        static const char *const sep_list[] = { "<|file_sep|>", NULL };
        struct { int32_t *id; const char *const *list; } det[] = {
            { &v->eot, eot_list }, { &v->eom, eom_list }, { &v->fim_pre, pre_list }, { &v->fim_suf, suf_list },
            { &v->fim_mid, mid_list }, { &v->fim_pad, pad_list }, { &v->fim_rep, rep_list },
            { &v->fim_sep, sep_list },
        };
        /* llama.cpp walks its hash map and takes the first match; here: the lowest id */
        for (size_t k = 0; k < sizeof det / sizeof det[0]; k++) {
            if (*det[k].id != -1) continue;
            int32_t best = -1;
            for (const char *const *e = det[k].list; *e; e++) {
                int32_t id = find_token(v, *e, strlen(*e));
                if (id >= 0 && (best < 0 || id < best)) best = id;
            }
            if (best >= 0) {
                *det[k].id = best;
                mark_control(v, best);
            }
        }

        /* unused: control tokens whose text contains "unused" */
        for (int32_t id = 0; id < nt; id++) {
            if (!(v->attr[id] & ATTR_CONTROL)) continue;
            if (!(v->attr[id] & ATTR_UNUSED) && text_contains(v->blob + v->toff[id], v->tlen[id], "unused"))
                v->attr[id] |= ATTR_UNUSED;
        }

        /* end-of-generation set */
        static const char *const eog_list[] = { "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>",
            "<|flush|>", "<|calls|>", "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>",
            "[EOT]", "[EOS]", "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
            "<\xef\xbd\x9c" "end\xe2\x96\x81" "of\xe2\x96\x81" "sentence\xef\xbd\x9c>", "[e~[", NULL };
        if (v->fim_pad >= 0) v->eog[v->fim_pad] = 1;
        if (v->fim_rep >= 0) v->eog[v->fim_rep] = 1;
        if (v->fim_sep >= 0) v->eog[v->fim_sep] = 1;
        for (const char *const *e = eog_list; *e; e++) {
            int32_t id = find_token(v, *e, strlen(*e));
            if (id >= 0) {
                v->eog[id] = 1;
                mark_control(v, id);
            }
        }
        /* gpt-oss: always render these */
        static const char *const ud_list[] = { "<|channel|>", "<|message|>", "<|start|>", "<|constrain|>", NULL };
        for (const char *const *e = ud_list; *e; e++) {
            int32_t id = find_token(v, *e, strlen(*e));
            if (id >= 0) v->attr[id] = ATTR_USER_DEFINED;
        }

        if (v->eos >= 0) v->eog[v->eos] = 1;
        if (v->eot >= 0) v->eog[v->eot] = 1;
        if (v->eom >= 0) v->eog[v->eom] = 1;

        /* o200k_harmony / solar-open: <|end|> is not EOG when <|return|>+<|call|> or <|calls|>+<|flush|> */
        bool has_return = false, has_call = false, has_end = false, has_flush = false;
        bool has_tool_response = false, has_s = false;
        int32_t end_id = -1, s_id = -1;
        for (int32_t id = 0; id < nt; id++) {
            if (!v->eog[id]) continue;
            if (str_is(v, id, "<|return|>")) has_return = true;
            else if (str_is(v, id, "<|call|>") || str_is(v, id, "<|calls|>")) has_call = true;
            else if (str_is(v, id, "<|flush|>")) has_flush = true;
            else if (str_is(v, id, "<|end|>")) { has_end = true; end_id = id; }
        }
        if ((has_return && has_call && has_end) || (has_call && has_flush && has_end)) {
            v->eog[end_id] = 0;
            v->attr[end_id] = ATTR_USER_DEFINED;
        }
        for (int32_t id = 0; id < nt; id++) {
            if (!v->eog[id]) continue;
            if (str_is(v, id, "<|tool_response>")) has_tool_response = true;
            else if (str_is(v, id, "</s>")) { has_s = true; s_id = id; }
        }
        if (has_tool_response && has_s) {
            v->eog[s_id] = 0;
            v->attr[s_id] = ATTR_NORMAL;
        }
    }

    /* special tokens cache: longest text first */
    {
        int cnt = 0;
        for (int32_t id = 0; id < nt; id++)
            if (v->attr[id] & (ATTR_CONTROL | ATTR_USER_DEFINED | ATTR_UNKNOWN)) cnt++;
        v->special = malloc((size_t)(cnt ? cnt : 1) * sizeof *v->special);
        int32_t *tmp = malloc((size_t)(cnt ? cnt : 1) * sizeof *tmp);
        if (!v->special || !tmp) {
            free(tmp);
            el_set_error(err, EL_ERR_NOMEM, "tokenizer: out of memory");
            return load_fail(v);
        }
        cnt = 0;
        for (int32_t id = 0; id < nt; id++)
            if (v->attr[id] & (ATTR_CONTROL | ATTR_USER_DEFINED | ATTR_UNKNOWN)) v->special[cnt++] = id;
        sort_special(v, v->special, cnt, tmp);
        free(tmp);
        v->n_special = cnt;
    }

    /* per-model token attribute fix-ups */
    {
        el_str name = { "", 0 }, arch = { "", 0 };
        el_gguf_get_str(g, "general.name", &name);
        el_gguf_get_str(g, "general.architecture", &arch);
        char lname[256];
        size_t ln = name.len < sizeof lname - 1 ? (size_t)name.len : sizeof lname - 1;
        for (size_t i = 0; i < ln; i++) {
            char c = name.ptr[i];
            lname[i] = (c >= 'A' && c <= 'Z') ? (char)(c + 32) : c;
        }
        lname[ln] = 0;
        const char *pn = v->pre_name;
        size_t pl = strlen(pn);
        if (text_contains(pn, pl, "jina-v2-de") || text_contains(pn, pl, "jina-v2-es") ||
            text_contains(pn, pl, "jina-v2-code") || text_contains(arch.ptr, arch.len, "nomic-bert-moe") ||
            text_contains(arch.ptr, arch.len, "jina-bert-v3")) {
            int32_t id = find_token(v, "<mask>", 6);
            if (id >= 0) v->attr[id] |= ATTR_LSTRIP;
        } else if (text_contains(lname, ln, "phi-3") || text_contains(lname, ln, "phi3")) {
            for (int i = 0; i < v->n_special; i++) v->attr[v->special[i]] |= ATTR_RSTRIP;
            int32_t id = find_token(v, "</s>", 4);
            if (id >= 0) v->attr[id] |= ATTR_RSTRIP;
            static const char *const no_rstrip[] = { "<unk>", "<s>", "<|endoftext|>" };
            for (int k = 0; k < 3; k++) {
                id = find_token(v, no_rstrip[k], strlen(no_rstrip[k]));
                if (id >= 0) v->attr[id] &= (uint16_t)~ATTR_RSTRIP;
            }
        } else if (text_contains(lname, ln, "modern-bert")) {
            int32_t id = find_token(v, "[MASK]", 6);
            if (id >= 0) v->attr[id] |= ATTR_LSTRIP;
        }
    }

    /* SPM byte fallback table */
    for (int c = 0; c < 256; c++) {
        char buf[8];
        snprintf(buf, sizeof buf, "<0x%02X>", c);
        int32_t id = find_token(v, buf, 6);
        if (id < 0) {
            char one = (char)c;
            id = find_token(v, &one, 1);
        }
        v->byte_tok[c] = id;
    }

    /* pre-tokenizer regexes */
    if (type == VOCAB_BPE && !el_tok_pre_compile(v, pd, err)) return load_fail(v);
    return v;
}

void el_vocab_free(el_vocab *v) {
    if (!v) return;
    for (int i = 0; i < v->n_re; i++) pcre2_code_free(v->re[i]);
    free(v->pre_name);
    free(v->blob);
    free(v->toff);
    free(v->tlen);
    free(v->score);
    free(v->attr);
    free(v->ht);
    free(v->mblob);
    free(v->moff);
    free(v->mfirst);
    free(v->msecond);
    free(v->mht);
    free(v->eog);
    free(v->special);
    free(v);
}

/* ---- accessors ---------------------------------------------------------- */
int el_vocab_n_tokens(const el_vocab *v) { return v ? v->n_tokens : 0; }
int32_t el_vocab_bos(const el_vocab *v) { return v ? v->bos : -1; }
int32_t el_vocab_eos(const el_vocab *v) { return v ? v->eos : -1; }
int32_t el_vocab_eot(const el_vocab *v) { return v ? v->eot : -1; }
bool el_vocab_add_bos(const el_vocab *v) { return v && v->add_bos; }
bool el_vocab_add_eos(const el_vocab *v) { return v && v->add_eos; }
bool el_vocab_is_eog(const el_vocab *v, int32_t id) {
    return v && id >= 0 && id < v->n_tokens && v->eog[id];
}
bool el_vocab_is_control(const el_vocab *v, int32_t id) {
    return v && id >= 0 && id < v->n_tokens && (v->attr[id] & ATTR_CONTROL);
}
const char *el_vocab_model_name(const el_vocab *v) { return v ? v->model_name : ""; }
const char *el_vocab_pre_name(const el_vocab *v) { return v ? v->pre_name : ""; }
int32_t el_vocab_find(const el_vocab *v, const char *text, size_t len) {
    if (!v || (!text && len)) return -1;
    return find_token(v, text ? text : "", len);
}
