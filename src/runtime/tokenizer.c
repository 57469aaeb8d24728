/*
 * tokenizer.c — SPM ("llama") and byte-level BPE ("gpt2") vocabularies read
 * from GGUF metadata, reproducing llama.cpp's llama_tokenize /
 * llama_token_to_piece token for token (contract in tokenizer.h). This file:
 * the special-token partition and el_vocab_tokenize / _ranges; the rest is
 * spread by concern (tokenizer_internal.h lists the files).
 *
 * Behaviour followed (llama.cpp's llama-vocab.cpp / unicode.cpp):
 *   - special-token partition: the text is split on special-token text;
 *     control and unknown tokens only when parse_special (and, with ranges,
 *     only inside them), user-defined always; lstrip / rstrip attributes eat
 *     the ASCII whitespace beside a match.
 *   - SPM: space prefix before text that follows BOS/start/special tokens,
 *     ' ' → U+2581, then symbol merge by best score (tokenizer_spm.c).
 *   - BPE: pre-tokenizer regexes, byte→unicode encoding, merges by rank
 *     (tokenizer_bpe.c).
 *   - BOS / EOS around the whole when add_special and the vocab says so.
 */
#include "runtime/tokenizer_internal.h"

static bool is_c_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

/* ---- special-token partition ------------------------------------------- */
typedef struct { int32_t tok; size_t off, len; } frag; /* tok < 0: raw text [off, off+len) */
typedef struct { frag *d; size_t n, cap; bool oom; } fvec;

static void fv_push(fvec *f, int32_t tok, size_t off, size_t len) {
    if (f->oom) return;
    f->d = vec_room(f->d, f->n, &f->cap, sizeof *f->d, 16, &f->oom);
    if (f->oom) return;
    f->d[f->n++] = (frag){ tok, off, len };
}

static size_t find_sub(const char *s, size_t from, size_t to, const char *t, size_t tn) {
    if (tn == 0 || to < from || to - from < tn) return (size_t)-1;
    size_t last = to - tn;
    for (size_t i = from; i <= last;) {
        const char *hit = memchr(s + i, (unsigned char)t[0], last - i + 1);
        if (!hit) return (size_t)-1;
        size_t k = (size_t)(hit - s);
        if (memcmp(s + k, t, tn) == 0) return k;
        i = k + 1;
    }
    return (size_t)-1;
}

/* Byte ranges [r[i][0], r[i][1]) of the text in which control tokens may be
 * recognised (sorted, not overlapping); NULL: everywhere. */
typedef struct { const size_t (*r)[2]; int n; } ranges;

/* Whether [m, m + n) lies inside one of the ranges. */
static bool in_ranges(const ranges *rg, size_t m, size_t n) {
    int lo = 0, hi = rg->n - 1;
    while (lo <= hi) { /* last range starting at or before m */
        int mid = lo + (hi - lo) / 2;
        if (rg->r[mid][0] <= m) lo = mid + 1;
        else hi = mid - 1;
    }
    return hi >= 0 && m + n <= rg->r[hi][1];
}

/* First match of t in text[from, to) that may be taken: anywhere, or for a
 * control token (ctrl) with ranges given, only inside one of them. */
static size_t find_match(const char *s, size_t from, size_t to, const char *t, size_t tn, bool ctrl, const ranges *rg) {
    size_t m = find_sub(s, from, to, t, tn);
    while (m != (size_t)-1 && ctrl && rg && !in_ranges(rg, m, tn)) m = find_sub(s, m + 1, to, t, tn);
    return m;
}

static bool partition(const el_vocab *v, const char *text, size_t len, bool parse_special, const ranges *rg, fvec *out) {
    fvec cur = { 0 }, nxt = { 0 };
    fv_push(&cur, -1, 0, len);
    /* byte-pair presence filter: a token whose first two bytes never occur
     * next to each other in the text cannot match */
    uint8_t *pairs = calloc(8192, 1);
    uint8_t present[32] = { 0 };
    if (!pairs || cur.oom) { free(pairs); free(cur.d); return false; }
    for (size_t i = 0; i < len; i++) {
        uint8_t c0 = (uint8_t)text[i];
        present[c0 >> 3] |= (uint8_t)(1u << (c0 & 7));
        if (i + 1 < len) {
            unsigned k = ((unsigned)c0 << 8) | (uint8_t)text[i + 1];
            pairs[k >> 3] |= (uint8_t)(1u << (k & 7));
        }
    }
    for (int si = 0; si < v->n_special; si++) {
        int32_t id = v->special[si];
        uint16_t a = v->attr[id];
        if (!parse_special && (a & (ATTR_CONTROL | ATTR_UNKNOWN))) continue;
        const char *t = v->blob + v->toff[id];
        size_t tn = v->tlen[id];
        if (tn > len) continue;
        if (tn == 1) {
            uint8_t c0 = (uint8_t)t[0];
            if (!(present[c0 >> 3] & (1u << (c0 & 7)))) continue;
        } else {
            unsigned k = ((unsigned)(uint8_t)t[0] << 8) | (uint8_t)t[1];
            if (!(pairs[k >> 3] & (1u << (k & 7)))) continue;
        }
        nxt.n = 0;
        bool any = false;
        for (size_t fi = 0; fi < cur.n; fi++) {
            frag f = cur.d[fi];
            if (f.tok >= 0) { fv_push(&nxt, f.tok, 0, 0); continue; }
            size_t base = f.off, blen = f.len;
            const bool ctrl = (a & (ATTR_CONTROL | ATTR_UNKNOWN)) != 0;
            size_t m = find_match(text, base, base + blen, t, tn, ctrl, rg);
            if (m == (size_t)-1) { fv_push(&nxt, -1, base, blen); continue; }
            any = true;
            while (m != (size_t)-1) {
                if (m > base) {
                    size_t ll = m - base;
                    if (a & ATTR_LSTRIP)
                        while (ll > 0 && is_c_space(text[base + ll - 1])) ll--;
                    if (ll > 0) fv_push(&nxt, -1, base, ll);
                }
                fv_push(&nxt, id, 0, 0);
                if (m + tn < base + blen) {
                    size_t ro = m + tn, rl = base + blen - ro;
                    if (a & ATTR_RSTRIP)
                        while (rl > 0 && is_c_space(text[ro])) { ro++; rl--; }
                    base = ro;
                    blen = rl;
                    m = find_match(text, base, base + blen, t, tn, ctrl, rg);
                    if (m == (size_t)-1 && blen > 0) fv_push(&nxt, -1, base, blen);
                } else {
                    break;
                }
            }
        }
        if (nxt.oom) break;
        if (any) { fvec sw = cur; cur = nxt; nxt = sw; }
    }
    free(pairs);
    bool ok = !cur.oom && !nxt.oom;
    free(nxt.d);
    *out = cur;
    return ok;
}

/* ---- tokenize ----------------------------------------------------------- */
static int tokenize_impl(const el_vocab *v, const char *text, size_t len, bool add_special, bool parse_special,
                         const ranges *rg, int32_t *out, int cap) {
    if (!v || (!text && len) || cap < 0 || (cap > 0 && !out)) return -1;
    ivec res = { 0 };
    fvec fr = { 0 };
    bool ok = true, invalid = false;
    if (len > 0 && !partition(v, text, len, parse_special, rg, &fr)) { free(fr.d); return -1; }

    if (add_special && v->add_bos) iv_push(&res, v->bos);
    bool prev_special = true; /* SPM: the space prefix goes at the start and after each special token */
    bvec scratch = { 0 };
    for (size_t i = 0; ok && i < fr.n; i++) {
        const frag *f = &fr.d[i];
        if (f->tok >= 0) {
            iv_push(&res, f->tok);
            prev_special = true;
            continue;
        }
        if (v->type == VOCAB_SPM)
            ok = el_tok_spm(v, text + f->off, f->len, v->add_space_prefix && prev_special, &scratch, &res);
        else
            ok = el_tok_bpe(v, text + f->off, f->len, &res, &invalid);
        prev_special = false;
    }
    free(scratch.d);
    if (add_special && v->add_eos) iv_push(&res, v->eos);
    free(fr.d);
    if (!ok || res.oom || res.n > (size_t)INT32_MAX) {
        free(res.d);
        return -1;
    }
    size_t nw = res.n < (size_t)cap ? res.n : (size_t)cap;
    if (nw) memcpy(out, res.d, nw * sizeof *out);
    int r = (int)res.n;
    free(res.d);
    return r;
}

int el_vocab_tokenize(const el_vocab *v, const char *text, size_t len, bool add_special, bool parse_special,
                      int32_t *out, int cap) {
    return tokenize_impl(v, text, len, add_special, parse_special, NULL, out, cap);
}

int el_vocab_tokenize_ranges(const el_vocab *v, const char *text, size_t len, bool add_special,
                             const size_t (*special_ranges)[2], int n_ranges, int32_t *out, int cap) {
    if (n_ranges < 0 || (n_ranges > 0 && !special_ranges)) return -1;
    for (int i = 0; i < n_ranges; i++)
        if (special_ranges[i][0] > special_ranges[i][1] || special_ranges[i][1] > len ||
            (i > 0 && special_ranges[i][0] < special_ranges[i - 1][1]))
            return -1;
    ranges rg = { special_ranges, n_ranges };
    return tokenize_impl(v, text, len, add_special, true, &rg, out, cap);
}

