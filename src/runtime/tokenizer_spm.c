/*
 * tokenizer_spm.c — SentencePiece ("llama") tokenization of one raw-text
 * fragment, as llama.cpp's llm_tokenizer_spm.
 *
 * Contract: el_tok_spm escapes the fragment (' ' → U+2581, and U+2581 in
 * front when space_prefix: tokenizer.c says when), merges its characters by
 * best token score (ties: leftmost; tokenizer_merge.h) and appends each
 * resulting symbol's token; a symbol that is not a token falls back to its
 * bytes' <0xXX> tokens (or the byte's own one-byte token), unk where neither
 * exists. false only when out of memory (or a fragment over 2 GiB).
 */
#include "runtime/tokenizer_internal.h"
#include "runtime/tokenizer_merge.h"

/* The escaped text: symbols, merged, then tokens. */
static bool spm_merge(const el_vocab *v, const char *text, size_t len, ivec *out) {
    if (len == 0) return true;
    if (len > (size_t)INT32_MAX) return false; /* 32-bit symbol offsets */
    sym *s = malloc(len * sizeof *s);
    if (!s) return false;
    int ns = sym_split(text, len, s);
    bigram_heap h = { 0 };
    bool ok = sym_merge(v, text, s, ns, &h, false);
    free(h.d);
    for (int i = 0; ok && i != -1; i = s[i].next) {
        int32_t id = find_token(v, text + s[i].off, s[i].n);
        if (id >= 0) {
            iv_push(out, id);
        } else {
            /* byte fallback (a merged symbol is always a token, so llama.cpp's
             * rev_merge re-segmentation never applies to what reaches here) */
            for (size_t j = 0; j < s[i].n; j++) {
                int32_t b = v->byte_tok[(uint8_t)text[s[i].off + j]];
                iv_push(out, b >= 0 ? b : v->unk);
            }
        }
    }
    free(s);
    return ok && !out->oom;
}

bool el_tok_spm(const el_vocab *v, const char *text, size_t len, bool space_prefix, bvec *scratch, ivec *out) {
    scratch->n = 0;
    if (space_prefix) bv_add(scratch, "\xe2\x96\x81", 3);
    for (size_t k = 0; k < len; k++) {
        if (text[k] == ' ') bv_add(scratch, "\xe2\x96\x81", 3);
        else bv_add(scratch, &text[k], 1);
    }
    if (scratch->oom) return false;
    return spm_merge(v, scratch->d, scratch->n, out);
}
