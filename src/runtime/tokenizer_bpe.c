/*
 * tokenizer_bpe.c — byte-level BPE ("gpt2") tokenization of one raw-text
 * fragment, as llama.cpp's llm_tokenizer_bpe.
 *
 * Contract:
 *   - the pre-tokenizers: the regex lists chosen by tokenizer.ggml.pre
 *     (el_tok_pre_find) and their compilation (PCRE2, UTF + UCP, JIT where
 *     available: el_tok_pre_compile);
 *   - el_tok_bpe: the fragment is decoded to code points (invalid UTF-8 →
 *     U+FFFD), the regexes run in sequence over a subject in which every
 *     non-ASCII whitespace code point is U+000B (llama.cpp's trick), each
 *     regex splitting every piece so far into its matches and the gaps
 *     between them; each piece is GPT-2 byte→unicode encoded and merged by
 *     rank (ties: leftmost; tokenizer_merge.h), or taken whole when it is a
 *     token and the vocab ignores merges (llama3-style); a symbol left that
 *     is not a token becomes its bytes' one-character tokens;
 *   - the GPT-2 bytes_to_unicode tables both ways (built once).
 */
#include "runtime/tokenizer_internal.h"
#include "runtime/tokenizer_merge.h"

#include <pthread.h>

#include "util/error.h"

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
int16_t el_tok_cpt_dec[324]; /* cpt (< 0x144) → byte, -1 if none */
static pthread_once_t g_byte_once = PTHREAD_ONCE_INIT;
static void byte_tables_build(void) {
    for (int i = 0; i < 324; i++) el_tok_cpt_dec[i] = -1;
    for (int b = 0; b < 256; b++) {
        uint32_t c = byte_to_cpt((uint8_t)b);
        char tmp[4];
        int n = cpt_encode(c, tmp);
        g_byte_enc[b].n = (uint8_t)n;
        memcpy(g_byte_enc[b].s, tmp, (size_t)n);
        el_tok_cpt_dec[c] = (int16_t)b;
    }
}
void el_tok_byte_tables_init(void) { pthread_once(&g_byte_once, byte_tables_build); }

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

static const el_tok_pre k_pre[] = {
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

const el_tok_pre *el_tok_pre_find(const char *name) {
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


bool el_tok_pre_compile(el_vocab *v, const el_tok_pre *pd, el_error *err) {
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
            return false;
        }
        pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* optional: falls back to the interpreter */
        v->re[v->n_re++] = re;
    }
    return true;
}

/* ---- merges -------------------------------------------------------------- */
typedef struct {
    sym *s;
    size_t cap;
    bigram_heap h;
} bpe_work; /* reused from word to word */

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
    int cnt = sym_split(w, n, s);
    if (!sym_merge(v, w, s, cnt, &wk->h, true)) return false;
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

/* ---- pre-tokenize, encode, merge ------------------------------------------ */
bool el_tok_bpe(const el_vocab *v, const char *text, size_t len, ivec *out, bool *invalid) {
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

