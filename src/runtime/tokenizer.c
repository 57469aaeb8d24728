/*
 * tokenizer.c — SPM ("llama") and byte-level BPE ("gpt2") vocabularies read
 * from GGUF metadata, reproducing llama.cpp's llama_tokenize /
 * llama_token_to_piece token for token.
 *
 * Behaviour followed (llama.cpp's llama-vocab.cpp / unicode.cpp):
 *   - load: default special ids per model, metadata overrides, token
 *     attributes from token_type, text-based detection of EOT/EOM/FIM tokens
 *     (which become control tokens), the EOG set, the special-token cache
 *     (control / user-defined / unknown, longest text first) and the per-model
 *     attribute fix-ups (phi-3 rstrip, jina <mask> lstrip).
 *   - special-token partition: the text is split on special-token text;
 *     control and unknown tokens only when parse_special, user-defined always.
 *   - SPM: space prefix before text that follows BOS/start/special tokens,
 *     ' ' → U+2581, symbol merge by best score (ties: leftmost), byte
 *     fallback <0xXX> for symbols that are not tokens.
 *   - BPE: pre-tokenizer regexes applied in sequence (matches and the gaps
 *     between them both become pieces), GPT-2 byte→unicode encoding, merges
 *     by rank (ties: leftmost), ignore_merges for llama3-style vocabs.
 * The regexes run on PCRE2 (UTF + UCP). llama.cpp maps every non-ASCII
 * whitespace code point to U+000B before matching, decodes invalid UTF-8
 * bytes to U+FFFD; both are reproduced here.
 */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif
#define PCRE2_CODE_UNIT_WIDTH 8
#include "runtime/tokenizer.h"

#include <pcre2.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/utf8.h"

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
typedef struct { int32_t *d; size_t n, cap; bool oom; } ivec;

static void iv_push(ivec *v, int32_t x) {
    if (v->oom) return;
    if (v->n == v->cap) {
        size_t nc = v->cap ? v->cap * 2 : 64;
        int32_t *nd = realloc(v->d, nc * sizeof *nd);
        if (!nd) { v->oom = true; return; }
        v->d = nd;
        v->cap = nc;
    }
    v->d[v->n++] = x;
}

typedef struct { char *d; size_t n, cap; bool oom; } bvec;

static void bv_reserve(bvec *b, size_t extra) {
    if (b->oom || b->n + extra <= b->cap) return;
    size_t nc = b->cap ? b->cap : 256;
    while (nc < b->n + extra) nc *= 2;
    char *nd = realloc(b->d, nc);
    if (!nd) { b->oom = true; return; }
    b->d = nd;
    b->cap = nc;
}
static void bv_add(bvec *b, const void *p, size_t n) {
    bv_reserve(b, n);
    if (b->oom) return;
    memcpy(b->d + b->n, p, n);
    b->n += n;
}

/* ---- unicode helpers ---------------------------------------------------- */
static size_t utf8_len(uint8_t c) {
    static const uint8_t lookup[16] = { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4 };
    return lookup[c >> 4];
}

/* llama.cpp's unicode_cpt_from_utf8 + the U+FFFD fallback of unicode_cpts_from_utf8 */
static uint32_t cpt_decode(const uint8_t *s, size_t n, size_t *off) {
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
static int cpt_encode(uint32_t c, char *o) {
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

/* llama.cpp's unicode_set_whitespace (the Unicode White_Space property) */
static bool cpt_is_whitespace(uint32_t c) {
    return (c >= 0x09 && c <= 0x0d) || c == 0x20 || c == 0x85 || c == 0xa0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f ||
           c == 0x205f || c == 0x3000;
}

/* GPT-2 bytes_to_unicode */
static uint32_t byte_to_cpt(uint8_t b) {
    if ((b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae)) return b;
    int n = 0;
    for (int c = 0; c < b; c++)
        if (!((c >= 0x21 && c <= 0x7e) || (c >= 0xa1 && c <= 0xac) || (c >= 0xae))) n++;
    return 256 + (uint32_t)n;
}

typedef struct { char s[2]; uint8_t n; } byte_utf8;
static byte_utf8 g_byte_enc[256];
static int16_t g_cpt_dec[324]; /* cpt (< 0x144) → byte, -1 if none */
static pthread_once_t g_byte_once = PTHREAD_ONCE_INIT;
static void byte_tables_build(void) {
    for (int i = 0; i < 324; i++) g_cpt_dec[i] = -1;
    for (int b = 0; b < 256; b++) {
        uint32_t c = byte_to_cpt((uint8_t)b);
        char tmp[4];
        int n = cpt_encode(c, tmp);
        g_byte_enc[b].n = (uint8_t)n;
        memcpy(g_byte_enc[b].s, tmp, (size_t)n);
        g_cpt_dec[c] = (int16_t)b;
    }
}
static void byte_tables_init(void) { pthread_once(&g_byte_once, byte_tables_build); }

static bool is_c_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

/* ---- hashing ------------------------------------------------------------ */
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

static int32_t find_token(const el_vocab *v, const char *s, size_t n) {
    uint64_t i = hash_fin(hash_bytes(HASH_SEED, s, n)) & v->ht_mask;
    for (;;) {
        int32_t id = v->ht[i];
        if (id < 0) return -1;
        if (v->tlen[id] == n && memcmp(v->blob + v->toff[id], s, n) == 0) return id;
        i = (i + 1) & v->ht_mask;
    }
}

static uint64_t merge_hash(const char *a, size_t na, const char *b, size_t nb) {
    uint64_t h = hash_bytes(HASH_SEED, a, na);
    h = hash_bytes(h, " ", 1);
    return hash_fin(hash_bytes(h, b, nb));
}

static int32_t find_merge(const el_vocab *v, const char *a, size_t na, const char *b, size_t nb) {
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

/* ---- pre-tokenizers ----------------------------------------------------- */
#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define RE_LLAMA3 "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN2 "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_CJK "[\\x{4E00}-\\x{9FA5}\\x{0800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+"
/* deepseek-llm's letter class (cased letters), written with code point escapes */
#define RE_DS_LETTERS \
    "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}\\x{1C4}-\\x{293}" \
    "\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}\\x{37F}\\x{386}\\x{388}-\\x{38A}" \
    "\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}" \
    "\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}" \
    "\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}" \
    "\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}" \
    "\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}" \
    "\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}" \
    "\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}" \
    "\\x{212F}-\\x{2134}\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}" \
    "\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}" \
    "\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}" \
    "\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}" \
    "\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}" \
    "\\x{118A0}-\\x{118DF}\\x{1E900}-\\x{1E943}]+"
#define RE_DS_PUNCT "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+"
#define RE_PORO " ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{FF0C}\\x{3001}\\x{0964}\\x{06D4}\\x{060C})]+"
#define RE_GPT4O "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_TEKKEN "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_DS3_MAIN "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

typedef struct {
    const char *names; /* '|'-separated tokenizer.ggml.pre values */
    const char *re[MAX_REGEX];
    bool ignore_merges;
    bool add_bos;
    bool no_bos; /* chatglm: special_bos_id = NULL */
} pre_def;

static const pre_def k_pre[] = {
    { "default",
      { "[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+", "[0-9][0-9][0-9]" }, false, false, false },
    { "llama3|llama-v3|llama-bpe|falcon3|falcon-h1|pixtral|midm-2.0|lfm2|jina-v5-nano",
      { RE_LLAMA3 }, true, true, false },
    { "dbrx|smaug-bpe", { RE_LLAMA3 }, false, false, false },
    { "deepseek-llm",
      { "[\\r\\n]", RE_DS_LETTERS, RE_DS_PUNCT, "\\s+$", RE_CJK, "\\p{N}+" }, false, false, false },
    { "deepseek-coder",
      { "[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", RE_CJK, "\\p{N}" }, false, false, false },
    { "deepseek-v3|hunyuan-dense|joyai-llm|hy_v4",
      { "\\p{N}{1,3}", "[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+", RE_DS3_MAIN },
      false, false, false },
    { "falcon",
      { "[\\p{P}\\$\\+<=>\\^~\\|`]+", RE_GPT2, "[0-9][0-9][0-9]" }, false, false, false },
    { "starcoder|refact|command-r|smollm|codeshell|exaone|minerva-7b|mellum2",
      { "\\p{N}", RE_GPT2 }, false, false, false },
    { "gpt-2|phi-2|mpt|olmo|jais|trillion|granite-docling|jina-es|jina-de|gigachat|jina-v2-es|"
      "jina-v2-de|a.x-4.0|mellum|modern-bert|exaone4|jina-v1-en|jina-v2-code|roberta-bpe|gpt-neox",
      { RE_GPT2 }, false, false, false },
    { "qwen2|deepseek-r1-qwen|kormo|f2llmv2|megrez|stablelm2|hunyuan|solar-open|grok-2",
      { RE_QWEN2 }, false, false, false },
    { "poro-chat|bloom|gpt3-finnish", { RE_PORO }, false, false, false },
    { "viking", { RE_PORO, "\\p{N}" }, false, false, false },
    { "glm4|chatglm-bpe", { RE_LLAMA3 }, false, false, true },
    { "tekken", { RE_TEKKEN }, true, true, false },
    { "gpt-4o|llama4|kanana2|talkie|minimax-m2", { RE_GPT4O }, false, false, false },
    { "seed-coder",
      { "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+" },
      false, false, false },
    { "bailingmoe|bailingmoe2|llada-moe",
      { "'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+" },
      false, false, false },
    { "chameleon",
      { "<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", "([\\t\\n]|    |  )", "\\p{N}",
        "[\\p{P}!-/:-@\\[-`{-~]", RE_GPT2 },
      false, true, false },
};

static const pre_def *find_pre(const char *name) {
    size_t nl = strlen(name);
    for (size_t i = 0; i < sizeof k_pre / sizeof k_pre[0]; i++) {
        const char *p = k_pre[i].names;
        while (*p) {
            const char *e = strchr(p, '|');
            size_t l = e ? (size_t)(e - p) : strlen(p);
            if (l == nl && memcmp(p, name, l) == 0) return &k_pre[i];
            if (!e) break;
            p = e + 1;
        }
    }
    return NULL;
}

/* ---- load --------------------------------------------------------------- */
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
    byte_tables_init();
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

    const pre_def *pd = NULL;
    if (type == VOCAB_SPM) {
        v->bos = 1; v->eos = 2; v->unk = 0;
        v->add_bos = true; v->add_eos = false; v->add_space_prefix = true;
    } else {
        pd = find_pre(v->pre_name);
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
    el_gguf_vtype at;
    uint64_t n;
    const uint8_t *p;
    if (!el_gguf_get_arr(g, "tokenizer.ggml.tokens", &at, &n, &p)) {
        el_set_error(err, EL_ERR_MISSING, "tokenizer: tokenizer.ggml.tokens is missing");
        return load_fail(v);
    }
    if (at != EL_GGUF_STRING) {
        el_set_error(err, EL_ERR_BAD_VALUE, "tokenizer: tokenizer.ggml.tokens is not a string array");
        return load_fail(v);
    }
    if (n == 0 || n > (uint64_t)INT32_MAX / 2) {
        el_set_error(err, EL_ERR_BAD_COUNT, "tokenizer: tokenizer.ggml.tokens has %llu entries", (unsigned long long)n);
        return load_fail(v);
    }
    int nt = (int)n;
    v->n_tokens = nt;

    const uint8_t *scores = NULL;
    el_gguf_vtype st = EL_GGUF_FLOAT32;
    {
        uint64_t ns;
        if (el_gguf_get_arr(g, "tokenizer.ggml.scores", &st, &ns, &scores)) {
            if (st != EL_GGUF_FLOAT32 && st != EL_GGUF_INT32) {
                el_set_error(err, EL_ERR_BAD_VALUE, "tokenizer: tokenizer.ggml.scores has element type %s",
                             el_gguf_vtype_name(st));
                return load_fail(v);
            }
            if (ns < n) {
                el_set_error(err, EL_ERR_BAD_COUNT, "tokenizer: tokenizer.ggml.scores has %llu < %llu entries",
                             (unsigned long long)ns, (unsigned long long)n);
                return load_fail(v);
            }
        } else if (el_gguf_find(g, "tokenizer.ggml.scores")) {
            el_set_error(err, EL_ERR_BAD_VALUE, "tokenizer: tokenizer.ggml.scores is not an array");
            return load_fail(v);
        }
    }
    const uint8_t *ttypes = NULL;
    {
        uint64_t ntt;
        el_gguf_vtype tt;
        if (el_gguf_get_arr(g, "tokenizer.ggml.token_type", &tt, &ntt, &ttypes)) {
            if (tt != EL_GGUF_INT32) {
                el_set_error(err, EL_ERR_BAD_VALUE, "tokenizer: tokenizer.ggml.token_type has element type %s",
                             el_gguf_vtype_name(tt));
                return load_fail(v);
            }
            if (ntt < n) {
                el_set_error(err, EL_ERR_BAD_COUNT, "tokenizer: tokenizer.ggml.token_type has %llu < %llu entries",
                             (unsigned long long)ntt, (unsigned long long)n);
                return load_fail(v);
            }
        } else if (el_gguf_find(g, "tokenizer.ggml.token_type")) {
            el_set_error(err, EL_ERR_BAD_VALUE, "tokenizer: tokenizer.ggml.token_type is not an array");
            return load_fail(v);
        }
    }

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
        el_gguf_vtype mt;
        uint64_t nm;
        const uint8_t *mp;
        if (!el_gguf_get_arr(g, "tokenizer.ggml.merges", &mt, &nm, &mp)) {
            el_set_error(err, EL_ERR_MISSING, "tokenizer: tokenizer.ggml.merges is missing (gpt2 model)");
            return load_fail(v);
        }
        if (mt != EL_GGUF_STRING) {
            el_set_error(err, EL_ERR_BAD_VALUE, "tokenizer: tokenizer.ggml.merges is not a string array");
            return load_fail(v);
        }
        if (nm > (uint64_t)INT32_MAX / 2) {
            el_set_error(err, EL_ERR_BAD_COUNT, "tokenizer: tokenizer.ggml.merges has %llu entries",
                         (unsigned long long)nm);
            return load_fail(v);
        }
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
    if (type == VOCAB_BPE) {
        for (int i = 0; i < MAX_REGEX && pd->re[i]; i++) {
            int ec;
            PCRE2_SIZE eo;
            pcre2_code *re = pcre2_compile((PCRE2_SPTR)pd->re[i], PCRE2_ZERO_TERMINATED,
                                           PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &ec, &eo, NULL);
            if (!re) {
                PCRE2_UCHAR msg[160];
                pcre2_get_error_message(ec, msg, sizeof msg);
                el_set_error(err, EL_ERR_INTERNAL, "tokenizer: pre-tokenizer '%.64s' regex %d: %s at %zu",
                             v->pre_name, i, (const char *)msg, (size_t)eo);
                return load_fail(v);
            }
            pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* optional: falls back to the interpreter */
            v->re[v->n_re++] = re;
        }
    }
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

/* ---- special-token partition ------------------------------------------- */
typedef struct { int32_t tok; size_t off, len; } frag; /* tok < 0: raw text [off, off+len) */
typedef struct { frag *d; size_t n, cap; bool oom; } fvec;

static void fv_push(fvec *f, int32_t tok, size_t off, size_t len) {
    if (f->oom) return;
    if (f->n == f->cap) {
        size_t nc = f->cap ? f->cap * 2 : 16;
        frag *nd = realloc(f->d, nc * sizeof *nd);
        if (!nd) { f->oom = true; return; }
        f->d = nd;
        f->cap = nc;
    }
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

/* ---- SPM ---------------------------------------------------------------- */
/* 16 bytes each: SPM needs one symbol per character and up to one heap entry
 * per adjacent pair, so these set the tokenizer's scratch per prompt byte. */
typedef struct { int32_t prev, next; uint32_t off, n; } sym;
typedef struct { int32_t left, right; float score; uint32_t size; } spm_bigram;

static bool spm_less(const spm_bigram *a, const spm_bigram *b) { /* a has lower priority than b */
    return a->score < b->score || (a->score == b->score && a->left > b->left);
}

typedef struct { spm_bigram *d; size_t n, cap; bool oom; } spm_heap;

static void spm_push(spm_heap *h, spm_bigram x) {
    if (h->oom) return;
    if (h->n == h->cap) {
        size_t nc = h->cap ? h->cap * 2 : 64;
        spm_bigram *nd = realloc(h->d, nc * sizeof *nd);
        if (!nd) { h->oom = true; return; }
        h->d = nd;
        h->cap = nc;
    }
    size_t i = h->n++;
    h->d[i] = x;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!spm_less(&h->d[p], &h->d[i])) break;
        spm_bigram t = h->d[p]; h->d[p] = h->d[i]; h->d[i] = t;
        i = p;
    }
}

static spm_bigram spm_pop(spm_heap *h) {
    spm_bigram top = h->d[0];
    h->d[0] = h->d[--h->n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, best = i;
        if (l < h->n && spm_less(&h->d[best], &h->d[l])) best = l;
        if (r < h->n && spm_less(&h->d[best], &h->d[r])) best = r;
        if (best == i) break;
        spm_bigram t = h->d[best]; h->d[best] = h->d[i]; h->d[i] = t;
        i = best;
    }
    return top;
}

static void spm_try_add(const el_vocab *v, const char *text, sym *s, int left, int right, spm_heap *h) {
    if (left == -1 || right == -1) return;
    size_t n = s[left].n + s[right].n;
    int32_t id = find_token(v, text + s[left].off, n);
    if (id < 0) return;
    spm_push(h, (spm_bigram){ left, right, v->score[id], (uint32_t)n });
}

static bool spm_tokenize(const el_vocab *v, const char *text, size_t len, ivec *out) {
    if (len == 0) return true;
    if (len > (size_t)INT32_MAX) return false; /* 32-bit symbol offsets */
    sym *s = malloc(len * sizeof *s);
    if (!s) return false;
    int ns = 0;
    size_t off = 0;
    while (off < len) {
        size_t l = utf8_len((uint8_t)text[off]);
        if (l > len - off) l = len - off;
        s[ns].off = (uint32_t)off;
        s[ns].n = (uint32_t)l;
        off += l;
        s[ns].prev = ns - 1;
        s[ns].next = off == len ? -1 : ns + 1;
        ns++;
    }
    spm_heap h = { 0 };
    for (int i = 1; i < ns; i++) spm_try_add(v, text, s, i - 1, i, &h);
    while (h.n > 0 && !h.oom) {
        spm_bigram bg = spm_pop(&h);
        sym *L = &s[bg.left], *R = &s[bg.right];
        if (L->n == 0 || R->n == 0 || L->n + R->n != bg.size) continue;
        L->n += R->n;
        R->n = 0;
        L->next = R->next;
        if (R->next >= 0) s[R->next].prev = bg.left;
        spm_try_add(v, text, s, L->prev, bg.left, &h);
        spm_try_add(v, text, s, bg.left, L->next, &h);
    }
    bool ok = !h.oom;
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

/* ---- BPE ---------------------------------------------------------------- */
typedef struct { int left, right; int32_t rank; size_t size; } bpe_bigram;
typedef struct { bpe_bigram *d; size_t n, cap; bool oom; } bpe_heap;

static bool bpe_less(const bpe_bigram *a, const bpe_bigram *b) { /* a has lower priority */
    return a->rank > b->rank || (a->rank == b->rank && a->left > b->left);
}
static void bpe_push(bpe_heap *h, bpe_bigram x) {
    if (h->oom) return;
    if (h->n == h->cap) {
        size_t nc = h->cap ? h->cap * 2 : 64;
        bpe_bigram *nd = realloc(h->d, nc * sizeof *nd);
        if (!nd) { h->oom = true; return; }
        h->d = nd;
        h->cap = nc;
    }
    size_t i = h->n++;
    h->d[i] = x;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!bpe_less(&h->d[p], &h->d[i])) break;
        bpe_bigram t = h->d[p]; h->d[p] = h->d[i]; h->d[i] = t;
        i = p;
    }
}
static bpe_bigram bpe_pop(bpe_heap *h) {
    bpe_bigram top = h->d[0];
    h->d[0] = h->d[--h->n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, best = i;
        if (l < h->n && bpe_less(&h->d[best], &h->d[l])) best = l;
        if (r < h->n && bpe_less(&h->d[best], &h->d[r])) best = r;
        if (best == i) break;
        bpe_bigram t = h->d[best]; h->d[best] = h->d[i]; h->d[i] = t;
        i = best;
    }
    return top;
}

static void bpe_try_add(const el_vocab *v, const char *w, sym *s, int left, int right, bpe_heap *h) {
    if (left == -1 || right == -1) return;
    int32_t r = find_merge(v, w + s[left].off, s[left].n, w + s[right].off, s[right].n);
    if (r < 0) return;
    bpe_push(h, (bpe_bigram){ left, right, r, s[left].n + s[right].n });
}

typedef struct {
    sym *s;
    size_t cap;
    bpe_heap h;
} bpe_work;

/* One pre-tokenized, byte-encoded word. */
static bool bpe_word(const el_vocab *v, bpe_work *wk, const char *w, size_t n, ivec *out) {
    if (n == 0) return true;
    if (n > (size_t)INT32_MAX) return false; /* 32-bit symbol offsets */
    if (v->ignore_merges) {
        int32_t id = find_token(v, w, n);
        if (id >= 0) { iv_push(out, id); return !out->oom; }
    }
    if (wk->cap < n) {
        sym *ns = realloc(wk->s, n * sizeof *ns);
        if (!ns) return false;
        wk->s = ns;
        wk->cap = n;
    }
    sym *s = wk->s;
    int cnt = 0;
    size_t off = 0;
    while (off < n) {
        size_t l = utf8_len((uint8_t)w[off]);
        if (l > n - off) l = n - off;
        s[cnt].off = (uint32_t)off;
        s[cnt].n = (uint32_t)l;
        off += l;
        s[cnt].prev = cnt - 1;
        s[cnt].next = off == n ? -1 : cnt + 1;
        cnt++;
    }
    wk->h.n = 0;
    for (int i = 1; i < cnt; i++) bpe_try_add(v, w, s, i - 1, i, &wk->h);
    while (wk->h.n > 0 && !wk->h.oom) {
        bpe_bigram bg = bpe_pop(&wk->h);
        sym *L = &s[bg.left], *R = &s[bg.right];
        if (L->n == 0 || R->n == 0 || L->n + R->n != bg.size) continue;
        L->n += R->n;
        R->n = 0;
        L->next = R->next;
        if (R->next >= 0) s[R->next].prev = bg.left;
        bpe_try_add(v, w, s, L->prev, bg.left, &wk->h);
        bpe_try_add(v, w, s, bg.left, L->next, &wk->h);
    }
    if (wk->h.oom) return false;
    for (int i = 0; i != -1; i = s[i].next) {
        if (s[i].n == 0) continue;
        int32_t id = find_token(v, w + s[i].off, s[i].n);
        if (id >= 0) {
            iv_push(out, id);
        } else {
            for (size_t j = 0; j < s[i].n; j++) {
                int32_t b = find_token(v, w + s[i].off + j, 1);
                if (b >= 0) iv_push(out, b);
            }
        }
    }
    return !out->oom;
}

static bool seg_add(size_t **seg, size_t *n, size_t *cap, size_t end) {
    if (*n == *cap) {
        size_t nc = *cap * 2;
        size_t *t = realloc(*seg, (nc + 1) * sizeof *t);
        if (!t) return false;
        *seg = t;
        *cap = nc;
    }
    (*seg)[++*n] = end;
    return true;
}

static bool bpe_tokenize(const el_vocab *v, const char *text, size_t len, ivec *out, bool *invalid) {
    if (len == 0) return true;
    bool ok = false;
    uint32_t *cpts = malloc(len * sizeof *cpts);
    size_t *coff = malloc((len + 1) * sizeof *coff);    /* cpt → subject byte offset */
    int32_t *cidx = malloc((len * 4 + 1) * sizeof *cidx); /* subject byte offset → cpt */
    char *subj = malloc(len * 4 + 1);
    size_t *seg = NULL, *seg2 = NULL; /* segment boundaries in cpt indexes */
    bvec word = { 0 };
    bpe_work wk = { 0 };
    pcre2_match_data *md = NULL;
    if (!cpts || !coff || !cidx || !subj) goto done;

    size_t nc = 0, o = 0, sl = 0;
    while (o < len) {
        uint32_t c = cpt_decode((const uint8_t *)text, len, &o);
        coff[nc] = sl;
        cidx[sl] = (int32_t)nc;
        /* a 4-byte sequence above U+10FFFF: llama.cpp decodes it, then throws
         * when re-encoding; here it becomes U+FFFD like other invalid input */
        if (c > 0x10ffff) c = 0xFFFD;
        uint32_t sc = c;
        if (c > 0x7f && cpt_is_whitespace(c)) sc = 0x0b;
        else if (c >= 0xd800 && c <= 0xdfff) sc = 0xe000; /* keeps the PCRE2 subject valid UTF-8 */
        sl += (size_t)cpt_encode(sc, subj + sl);
        cpts[nc++] = c;
    }
    coff[nc] = sl;
    cidx[sl] = (int32_t)nc;
    subj[sl] = 0;

    size_t nseg = 1, cap = 16;
    seg = malloc((cap + 1) * sizeof *seg);
    if (!seg) goto done;
    seg[0] = 0;
    seg[1] = nc;
    for (int ri = 0; ri < v->n_re; ri++) {
        if (!md) {
            md = pcre2_match_data_create(32, NULL);
            if (!md) goto done;
        }
        size_t cap2 = nseg * 2 + 16, n2 = 0;
        seg2 = malloc((cap2 + 1) * sizeof *seg2);
        if (!seg2) goto done;
        seg2[0] = 0;
#define SEG_ADD(endc) do { if (!seg_add(&seg2, &n2, &cap2, (endc))) goto done; } while (0)
        for (size_t si = 0; si < nseg; si++) {
            size_t cs = coff[seg[si]], ce = coff[seg[si + 1]];
            const PCRE2_SPTR sub = (PCRE2_SPTR)(subj + cs);
            size_t slen = ce - cs, start = 0, prev = 0;
            while (start <= slen) {
                int rc = pcre2_match(v->re[ri], sub, slen, start, PCRE2_NO_UTF_CHECK, md, NULL);
                if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
                    rc = pcre2_match(v->re[ri], sub, slen, start, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md, NULL);
                if (rc == PCRE2_ERROR_NOMATCH) break;
                if (rc < 0) { *invalid = true; goto done; }
                PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
                size_t ms = ov[0], me = ov[1];
                if (me == ms) { /* empty match: produces no piece */
                    if (ms >= slen) break;
                    start = ms + utf8_len(subj[cs + ms]);
                    continue;
                }
                if (ms > prev) SEG_ADD((size_t)cidx[cs + ms]);
                SEG_ADD((size_t)cidx[cs + me]);
                prev = me;
                start = me;
            }
            if (prev < slen) SEG_ADD(seg[si + 1]);
        }
#undef SEG_ADD
        free(seg);
        seg = seg2;
        seg2 = NULL;
        nseg = n2;
    }

    for (size_t si = 0; si < nseg; si++) {
        word.n = 0;
        for (size_t k = seg[si]; k < seg[si + 1]; k++) {
            char u[4];
            int ul = cpt_encode(cpts[k], u);
            for (int j = 0; j < ul; j++) {
                const byte_utf8 *e = &g_byte_enc[(uint8_t)u[j]];
                bv_add(&word, e->s, e->n);
            }
        }
        if (word.oom) goto done;
        if (!bpe_word(v, &wk, word.d, word.n, out)) goto done;
    }
    ok = true;
done:
    if (md) pcre2_match_data_free(md);
    free(cpts);
    free(coff);
    free(cidx);
    free(subj);
    free(seg);
    free(seg2);
    free(word.d);
    free(wk.s);
    free(wk.h.d);
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

    if (v->type == VOCAB_SPM) {
        bool prev_special = true;
        if (add_special && v->add_bos) iv_push(&res, v->bos);
        bvec buf = { 0 };
        for (size_t i = 0; ok && i < fr.n; i++) {
            if (fr.d[i].tok >= 0) {
                iv_push(&res, fr.d[i].tok);
                prev_special = true;
                continue;
            }
            buf.n = 0;
            if (v->add_space_prefix && prev_special) bv_add(&buf, "\xe2\x96\x81", 3);
            const char *t = text + fr.d[i].off;
            for (size_t k = 0; k < fr.d[i].len; k++) {
                if (t[k] == ' ') bv_add(&buf, "\xe2\x96\x81", 3);
                else bv_add(&buf, &t[k], 1);
            }
            if (buf.oom) { ok = false; break; }
            ok = spm_tokenize(v, buf.d, buf.n, &res);
            prev_special = false;
        }
        free(buf.d);
        if (add_special && v->add_eos) iv_push(&res, v->eos);
    } else {
        if (add_special && v->add_bos) iv_push(&res, v->bos);
        for (size_t i = 0; ok && i < fr.n; i++) {
            if (fr.d[i].tok >= 0) iv_push(&res, fr.d[i].tok);
            else ok = bpe_tokenize(v, text + fr.d[i].off, fr.d[i].len, &res, &invalid);
        }
        if (add_special && v->add_eos) iv_push(&res, v->eos);
    }
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

/* ---- token → piece ------------------------------------------------------ */
static int put_piece(const char *s, size_t n, char *buf, int cap) {
    if (n > (size_t)INT32_MAX) return -1;
    if ((size_t)cap >= n && n) memcpy(buf, s, n);
    return (int)n;
}

/* Appends k bytes at *o if they fit in cap; always advances *o (the needed length). */
static void piece_emit(char *buf, int cap, size_t *o, const void *p, size_t k) {
    if (k && *o + k <= (size_t)cap) memcpy(buf + *o, p, k);
    *o += k;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int token_byte(const el_vocab *v, int32_t id) {
    /* strtol(text.substr(3, 2), 16) */
    const char *t = v->blob + v->toff[id];
    uint32_t n = v->tlen[id];
    int r = 0;
    for (uint32_t i = 3; i < 5 && i < n; i++) {
        int h = hexval(t[i]);
        if (h < 0) break;
        r = r * 16 + h;
    }
    return r & 0xff;
}

int el_vocab_token_to_piece(const el_vocab *v, int32_t id, char *buf, int cap, bool special) {
    if (!v || id < 0 || id >= v->n_tokens || cap < 0 || (cap > 0 && !buf)) return -1;
    uint16_t a = v->attr[id];
    if (!special && (a & (ATTR_UNKNOWN | ATTR_CONTROL))) return 0;
    const char *t = v->blob + v->toff[id];
    size_t n = v->tlen[id];
    if (a & (ATTR_UNKNOWN | ATTR_CONTROL | ATTR_USER_DEFINED)) return put_piece(t, n, buf, cap);
    if (a & ATTR_NORMAL) {
        /* Written straight into buf: this runs once per generated token, and the
         * decode loop allocates nothing. The full length is returned even when
         * buf is too small (then buf holds a prefix). */
        size_t o = 0;
        if (v->type == VOCAB_SPM) {
            for (size_t i = 0; i < n; i++) {
                if (i + 3 <= n && memcmp(t + i, "\xe2\x96\x81", 3) == 0) { piece_emit(buf, cap, &o, " ", 1); i += 2; }
                else piece_emit(buf, cap, &o, &t[i], 1);
            }
        } else {
            size_t at = 0;
            while (at < n) {
                uint32_t c = cpt_decode((const uint8_t *)t, n, &at);
                if (c < 324 && g_cpt_dec[c] >= 0) {
                    char bt = (char)g_cpt_dec[c];
                    piece_emit(buf, cap, &o, &bt, 1);
                } else {
                    char u[4], hx[8];
                    int ul = cpt_encode(c, u);
                    piece_emit(buf, cap, &o, "[UNK_BYTE_0x", 12);
                    for (int j = 0; j < ul; j++) {
                        snprintf(hx, sizeof hx, "%02x", (uint8_t)u[j]);
                        piece_emit(buf, cap, &o, hx, 2);
                    }
                    piece_emit(buf, cap, &o, t, n);
                    piece_emit(buf, cap, &o, "]", 1);
                }
            }
        }
        return o > (size_t)INT32_MAX ? -1 : (int)o;
    }
    if (a & ATTR_BYTE) {
        char c = (char)token_byte(v, id);
        return put_piece(&c, 1, buf, cap);
    }
    return 0;
}

/* ---- streaming detokenizer ---------------------------------------------- */
void el_detok_init(el_detok *d) {
    if (d) d->n_pending = 0;
}

int el_detok_push(el_detok *d, const char *piece, int len, char *out) {
    if (!d || !out || len < 0 || (len > 0 && !piece)) return 0;
    int np = d->n_pending;
    if (np < 0 || np > 3) np = 0;
    memcpy(out, d->pending, (size_t)np);
    if (len) memcpy(out + np, piece, (size_t)len);
    int total = np + len;
    int hold = (int)el_utf8_incomplete_tail(out, (size_t)total); /* a prefix that can still complete */
    memcpy(d->pending, out + total - hold, (size_t)hold);
    d->n_pending = hold;
    return total - hold;
}

int el_detok_flush(el_detok *d, char *out) {
    if (!d || !out) return 0;
    int np = d->n_pending;
    if (np < 0 || np > 3) np = 0;
    memcpy(out, d->pending, (size_t)np);
    d->n_pending = 0;
    return np;
}
