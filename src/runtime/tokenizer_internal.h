/*
 * tokenizer_internal.h — what the tokenizer's files share; private to
 * src/runtime/tokenizer*.c (the API is tokenizer.h).
 *
 * Contract: the vocabulary's layout (struct el_vocab: token texts in one
 * blob, text → id and merge-pair → rank open-addressing tables, attributes,
 * special ids, the pre-tokenizer regexes), the lookups into it, the code
 * point helpers (llama.cpp's unicode.cpp decoding, U+FFFD for invalid bytes)
 * and the growable vectors tokenization fills. Everything called per byte or
 * per symbol is static inline here, so the hot loops of every file inline it.
 *
 * The files:
 *   tokenizer_vocab.c  load (metadata → el_vocab), free, accessors
 *   tokenizer_bpe.c    byte-level BPE: GPT-2 byte↔unicode map, pre-tokenizer
 *                      table and regex splitting, merges by rank
 *   tokenizer_spm.c    SentencePiece: merges by score, byte fallback
 *   tokenizer_merge.h  the symbol-merge engine SPM and BPE share
 *   tokenizer.c        special-token partition, el_vocab_tokenize*
 *   tokenizer_piece.c  token → piece, the streaming detokenizer
 */
#ifndef EL_RUNTIME_TOKENIZER_INTERNAL_H
#define EL_RUNTIME_TOKENIZER_INTERNAL_H
#ifndef PCRE2_CODE_UNIT_WIDTH
#define PCRE2_CODE_UNIT_WIDTH 8
#endif
#include <pcre2.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/tokenizer.h"

/* ---- token attributes (llama_token_attr bit values) -------------------- */
enum {
    ATTR_UNKNOWN = 1 << 0,
    ATTR_UNUSED = 1 << 1,
    ATTR_NORMAL = 1 << 2,
    ATTR_CONTROL = 1 << 3,
    ATTR_USER_DEFINED = 1 << 4,
    ATTR_BYTE = 1 << 5,
    ATTR_LSTRIP = 1 << 7,
    ATTR_RSTRIP = 1 << 8,
};

enum { VOCAB_SPM = 1, VOCAB_BPE = 2 };

#define MAX_REGEX 8

struct el_vocab {
    int type;
    char model_name[16];
    char *pre_name;
    int n_tokens;

    /* token texts: one blob, offsets + lengths */
    char *blob;
    uint32_t *toff;
    uint32_t *tlen;
    float *score;
    uint16_t *attr;

    /* text → id, open addressing */
    int32_t *ht;
    uint64_t ht_mask;

    /* BPE merges: (first, second) → rank */
    char *mblob;
    uint64_t *moff;   /* offset of "first second" in mblob */
    uint32_t *mfirst; /* length of first */
    uint32_t *msecond;
    int32_t *mht;
    uint64_t mht_mask;
    int64_t n_merges;

    int32_t bos, eos, unk, eot, eom;
    int32_t fim_pre, fim_suf, fim_mid, fim_pad, fim_rep, fim_sep;
    bool add_bos, add_eos, add_space_prefix, ignore_merges;

    uint8_t *eog; /* per token: 1 if end-of-generation */

    int32_t *special; /* control/user-defined/unknown ids, longest text first */
    int n_special;

    int32_t byte_tok[256]; /* SPM byte fallback ids (-1: none) */

    pcre2_code *re[MAX_REGEX];
    int n_re;
};

/* ---- small growable vectors -------------------------------------------- */
/* Room for element n of a vector d of elem-byte elements whose capacity is
 * *cap (doubling, from `first`): returns d or its reallocation; when out of
 * memory returns d unchanged and sets *oom. */
static inline void *vec_room(void *d, size_t n, size_t *cap, size_t elem, size_t first, bool *oom) {
    if (n < *cap) return d;
    size_t nc = *cap ? *cap * 2 : first;
    void *nd = realloc(d, nc * elem);
    if (!nd) {
        *oom = true;
        return d;
    }
    *cap = nc;
    return nd;
}

typedef struct { int32_t *d; size_t n, cap; bool oom; } ivec;
typedef struct { char *d; size_t n, cap; bool oom; } bvec;

static inline void iv_push(ivec *v, int32_t x) {
    if (v->oom) return;
    v->d = vec_room(v->d, v->n, &v->cap, sizeof *v->d, 64, &v->oom);
    if (v->oom) return;
    v->d[v->n++] = x;
}

static inline void bv_reserve(bvec *b, size_t extra) {
    if (b->oom || b->n + extra <= b->cap) return;
    size_t nc = b->cap ? b->cap : 256;
    while (nc < b->n + extra) nc *= 2;
    char *nd = realloc(b->d, nc);
    if (!nd) { b->oom = true; return; }
    b->d = nd;
    b->cap = nc;
}
static inline void bv_add(bvec *b, const void *p, size_t n) {
    bv_reserve(b, n);
    if (b->oom) return;
    memcpy(b->d + b->n, p, n);
    b->n += n;
}

/* ---- unicode helpers ---------------------------------------------------- */
/* Length a UTF-8 lead byte announces (1 for a continuation byte). */
static inline size_t utf8_len(uint8_t c) {
    static const uint8_t lookup[16] = { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4 };
    return lookup[c >> 4];
}

/* llama.cpp's unicode_cpt_from_utf8 + the U+FFFD fallback of unicode_cpts_from_utf8 */
static inline uint32_t cpt_decode(const uint8_t *s, size_t n, size_t *off) {
    size_t o = *off;
    uint8_t b = s[o];
    if (!(b & 0x80)) { *off = o + 1; return b; }
    if (!(b & 0x40)) goto bad;
    if (!(b & 0x20)) {
        if (o + 1 >= n || (s[o + 1] & 0xc0) != 0x80) goto bad;
        *off = o + 2;
        return ((uint32_t)(b & 0x1f) << 6) | (s[o + 1] & 0x3f);
    }
    if (!(b & 0x10)) {
        if (o + 2 >= n || (s[o + 1] & 0xc0) != 0x80 || (s[o + 2] & 0xc0) != 0x80) goto bad;
        *off = o + 3;
        return ((uint32_t)(b & 0x0f) << 12) | ((uint32_t)(s[o + 1] & 0x3f) << 6) | (s[o + 2] & 0x3f);
    }
    if (!(b & 0x08)) {
        if (o + 3 >= n || (s[o + 1] & 0xc0) != 0x80 || (s[o + 2] & 0xc0) != 0x80 ||
            (s[o + 3] & 0xc0) != 0x80) goto bad;
        *off = o + 4;
        return ((uint32_t)(b & 0x07) << 18) | ((uint32_t)(s[o + 1] & 0x3f) << 12) |
               ((uint32_t)(s[o + 2] & 0x3f) << 6) | (s[o + 3] & 0x3f);
    }
bad:
    *off = o + 1;
    return 0xFFFD;
}

/* Returns bytes written (1..4), 0 if cpt is not encodable (> U+10FFFF). */
static inline int cpt_encode(uint32_t c, char *o) {
    if (c <= 0x7f) { o[0] = (char)c; return 1; }
    if (c <= 0x7ff) { o[0] = (char)(0xc0 | (c >> 6)); o[1] = (char)(0x80 | (c & 0x3f)); return 2; }
    if (c <= 0xffff) {
        o[0] = (char)(0xe0 | (c >> 12)); o[1] = (char)(0x80 | ((c >> 6) & 0x3f));
        o[2] = (char)(0x80 | (c & 0x3f)); return 3;
    }
    if (c <= 0x10ffff) {
        o[0] = (char)(0xf0 | (c >> 18)); o[1] = (char)(0x80 | ((c >> 12) & 0x3f));
        o[2] = (char)(0x80 | ((c >> 6) & 0x3f)); o[3] = (char)(0x80 | (c & 0x3f)); return 4;
    }
    return 0;
}

/* ---- hashing and lookups ------------------------------------------------ */
static inline uint64_t hash_bytes(uint64_t h, const void *p, size_t n) {
    const uint8_t *s = p;
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}
static inline uint64_t hash_fin(uint64_t h) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h;
}
#define HASH_SEED 0xcbf29ce484222325ULL

/* Id of the token whose text is s[0, n), -1 if none. */
static inline int32_t find_token(const el_vocab *v, const char *s, size_t n) {
    uint64_t i = hash_fin(hash_bytes(HASH_SEED, s, n)) & v->ht_mask;
    for (;;) {
        int32_t id = v->ht[i];
        if (id < 0) return -1;
        if (v->tlen[id] == n && memcmp(v->blob + v->toff[id], s, n) == 0) return id;
        i = (i + 1) & v->ht_mask;
    }
}

/* The merge table's key: the text "a b". */
static inline uint64_t merge_hash(const char *a, size_t na, const char *b, size_t nb) {
    uint64_t h = hash_bytes(HASH_SEED, a, na);
    h = hash_bytes(h, " ", 1);
    return hash_fin(hash_bytes(h, b, nb));
}

/* Rank of the merge (a, b), -1 if none. */
static inline int32_t find_merge(const el_vocab *v, const char *a, size_t na, const char *b, size_t nb) {
    if (!v->mht) return -1;
    uint64_t i = merge_hash(a, na, b, nb) & v->mht_mask;
    for (;;) {
        int32_t r = v->mht[i];
        if (r < 0) return -1;
        const char *m = v->mblob + v->moff[r];
        if (v->mfirst[r] == na && v->msecond[r] == nb && memcmp(m, a, na) == 0 &&
            memcmp(m + na + 1, b, nb) == 0)
            return r;
        i = (i + 1) & v->mht_mask;
    }
}

/* ---- between the files -------------------------------------------------- */
/* A pre-tokenizer (tokenizer_bpe.c): its regexes and the vocab defaults it sets. */
typedef struct el_tok_pre el_tok_pre;
struct el_tok_pre {
    const char *names; /* '|'-separated tokenizer.ggml.pre values */
    const char *re[MAX_REGEX];
    bool ignore_merges;
    bool add_bos;
    bool no_bos; /* chatglm: special_bos_id = NULL */
};

/* The pre-tokenizer named by tokenizer.ggml.pre, NULL if none. */
const el_tok_pre *el_tok_pre_find(const char *name);
/* Compiles pd's regexes into v->re (JIT where available); false with err. */
bool el_tok_pre_compile(el_vocab *v, const el_tok_pre *pd, el_error *err);
/* Builds the GPT-2 byte↔unicode tables once (thread-safe); el_vocab_load
 * calls it, so every vocab's user sees them built. */
void el_tok_byte_tables_init(void);
/* GPT-2 bytes_to_unicode reversed: code point (< 324) → byte, -1 if none. */
extern int16_t el_tok_cpt_dec[324];

/* Append the tokens of one raw-text fragment; false if out of memory.
 * SPM: space_prefix puts U+2581 in front; scratch is reused between calls
 * (the caller frees it). BPE: *invalid set when a regex fails on the text. */
bool el_tok_spm(const el_vocab *v, const char *text, size_t len, bool space_prefix, bvec *scratch, ivec *out);
bool el_tok_bpe(const el_vocab *v, const char *text, size_t len, ivec *out, bool *invalid);

#endif
