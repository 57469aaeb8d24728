/*
 * hf_tokenizer.c — tokenizer.json and friends → GGUF tokenizer metadata
 * (see hf_tokenizer.h for what is produced and why).
 */
#include "convert/hf_tokenizer.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/error.h"
#include "util/file.h"

/* The pre-tokenizer regexes of tokenizer.json that llama.cpp's converter maps to a
 * tokenizer.ggml.pre name (and edgellm's tokenizer implements). */
static const struct { const char *re; const char *name; } k_pre_regex[] = {
    {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     "qwen2"},
    {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     "llama-bpe"},
    {"'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+", "gpt-2"},
};

char *el_conv_read_file(const char *path, size_t max_bytes, el_error *err) {
    char why[256];
    FILE *f = el_fopen_regular(path, why, sizeof why);
    if (!f) {
        el_set_error(err, errno == ENOENT ? EL_ERR_MISSING : EL_ERR_IO, "cannot open: %s", why);
        return NULL;
    }
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        fclose(f);
        el_set_error(err, EL_ERR_IO, "%s: stat: %s", path, strerror(errno));
        return NULL;
    }
    if ((uint64_t)st.st_size > max_bytes) {
        fclose(f);
        el_set_error(err, EL_ERR_BAD_COUNT, "%s: %lld bytes, more than the %zu allowed", path, (long long)st.st_size, max_bytes);
        return NULL;
    }
    size_t n = (size_t)st.st_size;
    char *b = malloc(n + 1);
    if (!b) {
        fclose(f);
        el_set_error(err, EL_ERR_NOMEM, "out of memory reading %s", path);
        return NULL;
    }
    size_t r = fread(b, 1, n, f);
    fclose(f);
    if (r != n) {
        free(b);
        el_set_error(err, EL_ERR_IO, "%s: short read", path);
        return NULL;
    }
    b[n] = 0;
    if (memchr(b, 0, n)) {
        free(b);
        el_set_error(err, EL_ERR_BAD_VALUE, "%s: contains a NUL byte", path);
        return NULL;
    }
    return b;
}

/* Parses a JSON file; NULL (and err) when missing-and-required, unreadable or invalid.
 * A missing optional file gives NULL with err->code EL_OK. */
static cJSON *load_json(const char *dir, const char *name, bool required, el_error *err) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    el_error e = {0};
    char *text = el_conv_read_file(path, (size_t)256 << 20, &e);
    if (!text) {
        if (e.code == EL_ERR_MISSING && !required) { err->code = EL_OK; return NULL; }
        *err = e;
        return NULL;
    }
    cJSON *j = cJSON_Parse(text);
    free(text);
    if (!j) el_set_error(err, EL_ERR_BAD_VALUE, "%s: not valid JSON", path);
    return j;
}

/* ---- a string → id hash map ---------------------------------------------- */

typedef struct smap { int32_t *slot; size_t mask; char **tok; size_t *len; } smap;

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

static bool smap_init(smap *m, el_hf_vocab *v) {
    size_t cap = 16;
    while (cap < (size_t)v->n * 2) cap *= 2;
    m->slot = malloc(cap * sizeof(int32_t));
    if (!m->slot) return false;
    for (size_t i = 0; i < cap; i++) m->slot[i] = -1;
    m->mask = cap - 1;
    m->tok = v->tok;
    m->len = v->len;
    for (int i = 0; i < v->n; i++) {
        if (!v->tok[i]) continue;
        size_t h = (size_t)hash_bytes(v->tok[i], v->len[i]) & m->mask;
        while (m->slot[h] >= 0) {
            int32_t o = m->slot[h];
            if (m->len[o] == v->len[i] && memcmp(m->tok[o], v->tok[i], v->len[i]) == 0) break; /* keep the first id */
            h = (h + 1) & m->mask;
        }
        if (m->slot[h] < 0) m->slot[h] = i;
    }
    return true;
}

static int32_t smap_get(const smap *m, const char *s, size_t n) {
    size_t h = (size_t)hash_bytes(s, n) & m->mask;
    while (m->slot[h] >= 0) {
        int32_t o = m->slot[h];
        if (m->len[o] == n && memcmp(m->tok[o], s, n) == 0) return o;
        h = (h + 1) & m->mask;
    }
    return -1;
}

/* ---- helpers ------------------------------------------------------------- */

void el_hf_vocab_free(el_hf_vocab *v) {
    if (!v) return;
    if (v->tok)
        for (int i = 0; i < v->n; i++) free(v->tok[i]);
    free(v->tok);
    free(v->len);
    free(v->scores);
    free(v->types);
    for (int i = 0; i < v->n_merges; i++) free(v->merges[i]);
    free(v->merges);
    free(v->chat_template);
    memset(v, 0, sizeof *v);
}

static bool set_tok(el_hf_vocab *v, int id, const char *s) {
    free(v->tok[id]);
    v->tok[id] = strdup(s);
    v->len[id] = strlen(s);
    return v->tok[id] != NULL;
}

/* does any node of a normalizer/pre-tokenizer tree (Sequence or single) satisfy pred? */
typedef bool (*node_pred)(const cJSON *node);
static bool any_node(const cJSON *n, node_pred pred) {
    if (!cJSON_IsObject(n)) return false;
    if (pred(n)) return true;
    const char *kids[] = {"normalizers", "pretokenizers", "pre_tokenizers"};
    for (size_t k = 0; k < 3; k++) {
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(n, kids[k]);
        const cJSON *c;
        cJSON_ArrayForEach(c, arr) if (any_node(c, pred)) return true;
    }
    return false;
}
static bool type_is(const cJSON *n, const char *t) {
    const cJSON *ty = cJSON_GetObjectItemCaseSensitive(n, "type");
    return cJSON_IsString(ty) && strcmp(ty->valuestring, t) == 0;
}
static bool is_prepend_space(const cJSON *n) {
    if (type_is(n, "Prepend")) {
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(n, "prepend");
        return cJSON_IsString(p) && strcmp(p->valuestring, "\xe2\x96\x81") == 0;
    }
    if (type_is(n, "Metaspace")) {
        const cJSON *ps = cJSON_GetObjectItemCaseSensitive(n, "prepend_scheme");
        const cJSON *ap = cJSON_GetObjectItemCaseSensitive(n, "add_prefix_space");
        if (cJSON_IsString(ps)) return strcmp(ps->valuestring, "never") != 0;
        return cJSON_IsTrue(ap);
    }
    return false;
}
static bool is_metaspace_like(const cJSON *n) {
    if (type_is(n, "Metaspace")) return true;
    if (type_is(n, "Replace")) {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(n, "content");
        return cJSON_IsString(c) && strcmp(c->valuestring, "\xe2\x96\x81") == 0;
    }
    return false;
}
static bool is_bytelevel(const cJSON *n) { return type_is(n, "ByteLevel"); }

static bool looks_special(const char *t) {
    size_t n = strlen(t);
    if (!strcmp(t, "<pad>") || !strcmp(t, "<mask>") || !strcmp(t, "<2mass>") || !strcmp(t, "[@BOS@]")) return true;
    if (n >= 4 && !strncmp(t, "<|", 2) && !strcmp(t + n - 2, "|>")) return true;
    if (n >= 8 && !strncmp(t, "<\xef\xbd\x9c", 4) && !strcmp(t + n - 4, "\xef\xbd\x9c>")) return true; /* <｜...｜> */
    if (!strncmp(t, "<unused", 7) && t[n - 1] == '>') return true;
    return false;
}

/* "▁" → " " in token id (in place: the replacement is shorter) */
static bool unspace(el_hf_vocab *v, int id) {
    char *t = v->tok[id];
    size_t o = 0;
    for (size_t i = 0; t[i];) {
        if (!strncmp(t + i, "\xe2\x96\x81", 3)) { t[o++] = ' '; i += 3; }
        else t[o++] = t[i++];
    }
    t[o] = 0;
    v->len[id] = o;
    return true;
}

/* tokenizer_config's "bos_token": a string, {"content": ...} or null */
static const char *special_text(const cJSON *tc, const char *key) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(tc, key);
    if (cJSON_IsString(j)) return j->valuestring;
    if (cJSON_IsObject(j)) {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(j, "content");
        if (cJSON_IsString(c)) return c->valuestring;
    }
    return NULL;
}

static bool is_byte_token(const char *s, size_t n) {
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return false;
    for (int i = 3; i < 5; i++) {
        char c = s[i];
        if (!((c >= '0' && c <= '9') || (c >= 'A' && c <= 'F') || (c >= 'a' && c <= 'f'))) return false;
    }
    return true;
}

/* "a b" from a merge given as a string or a two-element array */
static char *merge_text(const cJSON *m) {
    if (cJSON_IsString(m)) return strdup(m->valuestring);
    if (cJSON_IsArray(m) && cJSON_GetArraySize(m) == 2 && cJSON_IsString(m->child) && cJSON_IsString(m->child->next)) {
        size_t a = strlen(m->child->valuestring), b = strlen(m->child->next->valuestring);
        char *s = malloc(a + b + 2);
        if (!s) return NULL;
        memcpy(s, m->child->valuestring, a);
        s[a] = ' ';
        memcpy(s + a + 1, m->child->next->valuestring, b + 1);
        return s;
    }
    return NULL;
}

static int first_eos_id(const cJSON *j) {
    if (cJSON_IsNumber(j)) return (int)j->valuedouble;
    if (cJSON_IsArray(j) && cJSON_IsNumber(j->child)) return (int)j->child->valuedouble;
    return -1;
}

/* ---- main ---------------------------------------------------------------- */

/* The conversion proper, on parsed JSON (tc, gc may be NULL); dir only labels messages.
 * Takes ownership of nothing. */
static int vocab_build(const char *dir, const cJSON *tj, const cJSON *tc, const cJSON *gc, int n_vocab, int config_bos,
                       int config_eos, el_hf_vocab *v, el_error *err) {
    memset(v, 0, sizeof *v);
    v->bos = v->eos = v->unk = v->pad = v->eot = -1;
    int rc = 0;
    smap map = {0};
    if (!cJSON_IsObject(tj)) return el_set_error(err, EL_ERR_BAD_VALUE, "%s/tokenizer.json: not a JSON object", dir);

    const cJSON *model = cJSON_GetObjectItemCaseSensitive(tj, "model");
    const cJSON *mtype = cJSON_GetObjectItemCaseSensitive(model, "type");
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(tj, "added_tokens");
    const cJSON *norm = cJSON_GetObjectItemCaseSensitive(tj, "normalizer");
    const cJSON *pret = cJSON_GetObjectItemCaseSensitive(tj, "pre_tokenizer");
    bool unigram = cJSON_IsString(mtype) && strcmp(mtype->valuestring, "Unigram") == 0;
    bool bpe = cJSON_IsString(mtype) && strcmp(mtype->valuestring, "BPE") == 0;
    if (!bpe && !unigram) {
        rc = el_set_error(err, EL_ERR_UNSUPPORTED, "%s/tokenizer.json: model type '%s' is not supported (BPE, Unigram)", dir,
                          cJSON_IsString(mtype) ? mtype->valuestring : "?");
        goto done;
    }
    if ((bpe && !cJSON_IsObject(vocab)) || (unigram && !cJSON_IsArray(vocab))) {
        rc = el_set_error(err, EL_ERR_BAD_VALUE, "%s/tokenizer.json: model.vocab has the wrong JSON type", dir);
        goto done;
    }
    bool byte_fallback = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(model, "byte_fallback"));
    bool spm = unigram || byte_fallback || any_node(norm, is_metaspace_like) || any_node(pret, is_metaspace_like);
    bool bytelevel = any_node(pret, is_bytelevel);
    if (!spm && !bytelevel) {
        rc = el_set_error(err, EL_ERR_UNSUPPORTED, "%s/tokenizer.json: neither SentencePiece-style (byte fallback / \xe2\x96\x81) nor byte-level BPE", dir);
        goto done;
    }
    snprintf(v->model, sizeof v->model, "%s", spm ? "llama" : "gpt2");

    /* size: the largest id + 1, raised to config's vocab_size */
    int max_id = -1;
    const cJSON *e;
    if (bpe) {
        cJSON_ArrayForEach(e, vocab) {
            if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble > 1e8 || (double)(int)e->valuedouble != e->valuedouble) {
                rc = el_set_error(err, EL_ERR_BAD_VALUE, "%s/tokenizer.json: vocab entry '%.64s' has no valid id", dir, e->string ? e->string : "");
                goto done;
            }
            if ((int)e->valuedouble > max_id) max_id = (int)e->valuedouble;
        }
    } else {
        max_id = cJSON_GetArraySize(vocab) - 1;
    }
    cJSON_ArrayForEach(e, added) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id");
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(e, "content");
        if (!cJSON_IsNumber(id) || id->valuedouble < 0 || id->valuedouble > 1e8 || !cJSON_IsString(c)) {
            rc = el_set_error(err, EL_ERR_BAD_VALUE, "%s/tokenizer.json: an added_tokens entry lacks id/content", dir);
            goto done;
        }
        if ((int)id->valuedouble > max_id) max_id = (int)id->valuedouble;
    }
    if (max_id < 0) { rc = el_set_error(err, EL_ERR_BAD_VALUE, "%s/tokenizer.json: empty vocabulary", dir); goto done; }
    if (n_vocab > 0 && max_id >= n_vocab) {
        rc = el_set_error(err, EL_ERR_BAD_VALUE, "%s: the tokenizer has id %d but config.json's vocab_size is %d", dir, max_id, n_vocab);
        goto done;
    }
    v->n = n_vocab > 0 ? n_vocab : max_id + 1;
    v->tok = calloc((size_t)v->n, sizeof(char *));
    v->len = calloc((size_t)v->n, sizeof(size_t));
    v->types = calloc((size_t)v->n, sizeof(int32_t));
    if (spm) v->scores = calloc((size_t)v->n, sizeof(float));
    if (!v->tok || !v->len || !v->types || (spm && !v->scores)) { rc = el_set_error(err, EL_ERR_NOMEM, "out of memory"); goto done; }

    if (bpe) {
        cJSON_ArrayForEach(e, vocab) {
            int id = (int)e->valuedouble;
            if (v->tok[id]) { rc = el_set_error(err, EL_ERR_BAD_VALUE, "%s/tokenizer.json: id %d appears twice in the vocab", dir, id); goto done; }
            if (!set_tok(v, id, e->string)) { rc = el_set_error(err, EL_ERR_NOMEM, "out of memory"); goto done; }
            v->types[id] = EL_TT_NORMAL;
        }
    } else {
        int id = 0;
        cJSON_ArrayForEach(e, vocab) {
            if (!cJSON_IsArray(e) || cJSON_GetArraySize(e) != 2 || !cJSON_IsString(e->child) || !cJSON_IsNumber(e->child->next)) {
                rc = el_set_error(err, EL_ERR_BAD_VALUE, "%s/tokenizer.json: Unigram vocab entry %d is not [piece, score]", dir, id);
                goto done;
            }
            if (!set_tok(v, id, e->child->valuestring)) { rc = el_set_error(err, EL_ERR_NOMEM, "out of memory"); goto done; }
            v->scores[id] = (float)e->child->next->valuedouble;
            v->types[id] = EL_TT_NORMAL;
            id++;
        }
    }
    /* added tokens: their content (raw text) replaces the piece at that id. As llama.cpp's
     * converter: special ones, and ones that look special (<|...|>, <unused...>, <pad>, <mask>),
     * are CONTROL; the rest USER_DEFINED, with SentencePiece's "▁" turned back into spaces */
    cJSON_ArrayForEach(e, added) {
        int id = (int)cJSON_GetObjectItemCaseSensitive(e, "id")->valuedouble;
        const char *c = cJSON_GetObjectItemCaseSensitive(e, "content")->valuestring;
        bool special = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "special")) || looks_special(c);
        if (!set_tok(v, id, c)) { rc = el_set_error(err, EL_ERR_NOMEM, "out of memory"); goto done; }
        if (!special && spm && !unspace(v, id)) { rc = el_set_error(err, EL_ERR_NOMEM, "out of memory"); goto done; }
        v->types[id] = special ? EL_TT_CONTROL : EL_TT_USER_DEFINED;
    }
    for (int i = 0; i < v->n; i++) {
        if (v->tok[i]) continue;
        char pad[32];
        snprintf(pad, sizeof pad, "[PAD%d]", i);
        if (!set_tok(v, i, pad)) { rc = el_set_error(err, EL_ERR_NOMEM, "out of memory"); goto done; }
        v->types[i] = spm ? EL_TT_UNUSED : EL_TT_USER_DEFINED;
    }
    if (!smap_init(&map, v)) { rc = el_set_error(err, EL_ERR_NOMEM, "out of memory"); goto done; }

    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    if (spm) {
        const cJSON *unk = cJSON_GetObjectItemCaseSensitive(model, "unk_token");
        if (cJSON_IsString(unk)) v->unk = smap_get(&map, unk->valuestring, strlen(unk->valuestring));
        const cJSON *unk_id = cJSON_GetObjectItemCaseSensitive(model, "unk_id");
        if (unigram && cJSON_IsNumber(unk_id) && unk_id->valuedouble >= 0 && unk_id->valuedouble < v->n) v->unk = (int)unk_id->valuedouble;
        if (v->unk >= v->n) v->unk = -1;
        if (v->unk >= 0) v->types[v->unk] = EL_TT_UNKNOWN;
        for (int i = 0; i < v->n; i++)
            if (v->types[i] == EL_TT_NORMAL && byte_fallback && is_byte_token(v->tok[i], v->len[i])) v->types[i] = EL_TT_BYTE;
        if (bpe) {
            /* score of a piece = -(rank of the first merge making it); others 0 */
            bool *scored = calloc((size_t)v->n, sizeof(bool));
            if (!scored) { rc = el_set_error(err, EL_ERR_NOMEM, "out of memory"); goto done; }
            int rank = 0;
            cJSON_ArrayForEach(e, merges) {
                char *m = merge_text(e);
                if (!m) { free(scored); rc = el_set_error(err, EL_ERR_BAD_VALUE, "%s/tokenizer.json: merge %d is malformed", dir, rank); goto done; }
                /* the pieces of a SentencePiece vocab contain no spaces: the first space separates */
                char *sp = strchr(m, ' ');
                if (sp) {
                    memmove(sp, sp + 1, strlen(sp + 1) + 1);
                    int32_t id = smap_get(&map, m, strlen(m));
                    if (id >= 0 && !scored[id] && v->types[id] == EL_TT_NORMAL) {
                        v->scores[id] = -(float)(rank + 1);
                        scored[id] = true;
                    }
                }
                free(m);
                rank++;
            }
            free(scored);
        }
        v->add_space_prefix = any_node(norm, is_prepend_space) || any_node(pret, is_prepend_space);
        v->add_bos = 1;
    } else {
        int nm = cJSON_GetArraySize(merges);
        v->merges = calloc((size_t)(nm ? nm : 1), sizeof(char *));
        if (!v->merges) { rc = el_set_error(err, EL_ERR_NOMEM, "out of memory"); goto done; }
        cJSON_ArrayForEach(e, merges) {
            char *m = merge_text(e);
            if (!m) { rc = el_set_error(err, EL_ERR_BAD_VALUE, "%s/tokenizer.json: merge %d is malformed", dir, v->n_merges); goto done; }
            v->merges[v->n_merges++] = m;
        }
        /* the pre-tokenizer's name from its shape, as the combinations llama.cpp names:
         *   Split(regex) + ByteLevel(use_regex=false)   by the regex (qwen2, llama-bpe, gpt-2)
         *   ByteLevel(use_regex=true) alone             gpt-2
         *   Digits(individual) + ByteLevel(use_regex)   smollm (digits one by one, then GPT-2's)
         * anything else is refused rather than tokenized differently */
        const cJSON *nodes[8];
        int nn = 0;
        if (type_is(pret, "Sequence")) {
            const cJSON *c;
            cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(pret, "pretokenizers")) {
                if (nn == 8) break;
                nodes[nn++] = c;
            }
        } else if (cJSON_IsObject(pret)) {
            nodes[nn++] = pret;
        }
        const char *name = NULL, *re = NULL;
        const cJSON *last = nn ? nodes[nn - 1] : NULL;
        bool bl_regex = false;
        if (last && type_is(last, "ByteLevel")) {
            const cJSON *ur = cJSON_GetObjectItemCaseSensitive(last, "use_regex");
            bl_regex = !ur || cJSON_IsTrue(ur);
        }
        if (nn == 2 && type_is(nodes[0], "Split") && last && type_is(last, "ByteLevel") && !bl_regex) {
            const cJSON *pat = cJSON_GetObjectItemCaseSensitive(nodes[0], "pattern");
            const cJSON *r = cJSON_GetObjectItemCaseSensitive(pat, "Regex");
            if (cJSON_IsString(r)) re = r->valuestring;
            for (size_t i = 0; re && i < sizeof k_pre_regex / sizeof k_pre_regex[0]; i++)
                if (strcmp(re, k_pre_regex[i].re) == 0) name = k_pre_regex[i].name;
        } else if (nn == 1 && bl_regex) {
            name = "gpt-2";
        } else if (nn == 2 && type_is(nodes[0], "Digits") && bl_regex &&
                   cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(nodes[0], "individual_digits"))) {
            name = "smollm";
        }
        if (!name) {
            rc = el_set_error(err, EL_ERR_UNSUPPORTED, "%s/tokenizer.json: a pre-tokenizer edgellm does not know (%.80s)", dir,
                              re ? re : "not Split+ByteLevel, ByteLevel, or Digits+ByteLevel");
            goto done;
        }
        snprintf(v->pre, sizeof v->pre, "%s", name);
        v->add_bos = 0;
    }

    /* special tokens: tokenizer_config names them; config.json's ids are the fallback */
    const char *keys[4] = {"bos_token", "eos_token", "unk_token", "pad_token"};
    int *ids[4] = {&v->bos, &v->eos, &v->unk, &v->pad};
    for (int k = 0; k < 4; k++) {
        const char *s = tc ? special_text(tc, keys[k]) : NULL;
        if (!s) continue;
        int32_t id = smap_get(&map, s, strlen(s));
        if (id < 0) { rc = el_set_error(err, EL_ERR_BAD_VALUE, "%s/tokenizer_config.json: %s '%.64s' is not a token", dir, keys[k], s); goto done; }
        *ids[k] = id;
    }
    /* (as llama.cpp's converter: config.json's bos_token_id even where tokenizer_config says null — Qwen) */
    if (v->bos < 0 && config_bos >= 0 && config_bos < v->n) v->bos = config_bos;
    if (v->eos < 0 && config_eos >= 0 && config_eos < v->n) v->eos = config_eos;
    if (v->eos < 0 && gc) {
        int id = first_eos_id(cJSON_GetObjectItemCaseSensitive(gc, "eos_token_id"));
        if (id >= 0 && id < v->n) v->eos = id;
    }
    /* end of turn: an id generation_config ends on besides eos that is a control token */
    const cJSON *geos = gc ? cJSON_GetObjectItemCaseSensitive(gc, "eos_token_id") : NULL;
    cJSON_ArrayForEach(e, geos) {
        if (!cJSON_IsNumber(e)) continue;
        int id = (int)e->valuedouble;
        if (id >= 0 && id < v->n && id != v->eos && v->types[id] == EL_TT_CONTROL) { v->eot = id; break; }
    }
    /* add_bos/add_eos: tokenizer_config says, else the post-processor's template */
    const cJSON *ab = tc ? cJSON_GetObjectItemCaseSensitive(tc, "add_bos_token") : NULL;
    const cJSON *ae = tc ? cJSON_GetObjectItemCaseSensitive(tc, "add_eos_token") : NULL;
    if (cJSON_IsBool(ab)) v->add_bos = cJSON_IsTrue(ab);
    else {
        const cJSON *pp = cJSON_GetObjectItemCaseSensitive(tj, "post_processor");
        if (cJSON_IsObject(pp)) {
            /* TemplateProcessing: a SpecialToken before the first Sequence of "single" means BOS */
            const cJSON *proc = pp, *c;
            const cJSON *list = cJSON_GetObjectItemCaseSensitive(pp, "processors");
            cJSON_ArrayForEach(c, list) if (type_is(c, "TemplateProcessing")) proc = c;
            const cJSON *single = cJSON_GetObjectItemCaseSensitive(proc, "single");
            if (type_is(proc, "TemplateProcessing") && cJSON_IsArray(single))
                v->add_bos = cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(single->child, "SpecialToken"));
            else if (type_is(pp, "ByteLevel"))
                v->add_bos = 0;
        }
    }
    v->add_eos = cJSON_IsTrue(ae);
    if (v->add_bos && v->bos < 0) v->add_bos = 0;
    if (v->add_eos && v->eos < 0) v->add_eos = 0;

    /* chat template: tokenizer_config (string, or a list of {name, template}), else chat_template.jinja/.json */
    const cJSON *ct = tc ? cJSON_GetObjectItemCaseSensitive(tc, "chat_template") : NULL;
    if (cJSON_IsString(ct)) v->chat_template = strdup(ct->valuestring);
    else if (cJSON_IsArray(ct)) {
        cJSON_ArrayForEach(e, ct) {
            const cJSON *nm = cJSON_GetObjectItemCaseSensitive(e, "name");
            const cJSON *tp = cJSON_GetObjectItemCaseSensitive(e, "template");
            if (cJSON_IsString(nm) && cJSON_IsString(tp) && strcmp(nm->valuestring, "default") == 0) v->chat_template = strdup(tp->valuestring);
        }
    }
    if (cJSON_IsString(ct) && !v->chat_template) rc = el_set_error(err, EL_ERR_NOMEM, "out of memory");
done:
    free(map.slot);
    if (rc) el_hf_vocab_free(v);
    return rc;
}

int el_hf_vocab_from_json(const char *tokenizer_json, const char *tokenizer_config_json, const char *generation_config_json,
                          int n_vocab, int config_bos, int config_eos, el_hf_vocab *v, el_error *err) {
    memset(v, 0, sizeof *v);
    cJSON *tj = cJSON_Parse(tokenizer_json ? tokenizer_json : "");
    cJSON *tc = tokenizer_config_json ? cJSON_Parse(tokenizer_config_json) : NULL;
    cJSON *gc = generation_config_json ? cJSON_Parse(generation_config_json) : NULL;
    int rc;
    if (!tj) rc = el_set_error(err, EL_ERR_BAD_VALUE, "tokenizer.json: not valid JSON");
    else if (tokenizer_config_json && !tc) rc = el_set_error(err, EL_ERR_BAD_VALUE, "tokenizer_config.json: not valid JSON");
    else if (generation_config_json && !gc) rc = el_set_error(err, EL_ERR_BAD_VALUE, "generation_config.json: not valid JSON");
    else rc = vocab_build("(memory)", tj, tc, gc, n_vocab, config_bos, config_eos, v, err);
    cJSON_Delete(tj);
    cJSON_Delete(tc);
    cJSON_Delete(gc);
    return rc;
}

int el_hf_vocab_load(const char *dir, int n_vocab, int config_bos, int config_eos, el_hf_vocab *v, el_error *err) {
    memset(v, 0, sizeof *v);
    cJSON *tj = load_json(dir, "tokenizer.json", true, err);
    if (!tj) return err->code;
    cJSON *tc = load_json(dir, "tokenizer_config.json", false, err);
    if (!tc && err->code) { cJSON_Delete(tj); return err->code; }
    cJSON *gc = load_json(dir, "generation_config.json", false, err);
    if (!gc && err->code) { cJSON_Delete(tj); cJSON_Delete(tc); return err->code; }
    int rc = vocab_build(dir, tj, tc, gc, n_vocab, config_bos, config_eos, v, err);
    cJSON_Delete(tj);
    cJSON_Delete(tc);
    cJSON_Delete(gc);
    if (rc) return rc;
    /* no template in tokenizer_config: transformers 5 saves it beside, as chat_template.jinja (or .json) */
    if (!v->chat_template) {
        char path[4096];
        snprintf(path, sizeof path, "%s/chat_template.jinja", dir);
        el_error e2 = {0};
        v->chat_template = el_conv_read_file(path, (size_t)1 << 20, &e2);
        if (!v->chat_template && e2.code != EL_ERR_MISSING) { *err = e2; el_hf_vocab_free(v); return e2.code; }
    }
    if (!v->chat_template) {
        cJSON *cj = load_json(dir, "chat_template.json", false, err);
        if (!cj && err->code) { el_hf_vocab_free(v); return err->code; }
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(cj, "chat_template");
        if (cJSON_IsString(s)) v->chat_template = strdup(s->valuestring);
        cJSON_Delete(cj);
    }
    return 0;
}
