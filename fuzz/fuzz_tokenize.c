/*
 * fuzz_tokenize.c — libFuzzer target for the tokenizers and the chat-template
 * detector (text from outside: prompts, template strings).
 *
 * The first input byte picks a vocab (SPM llama, byte-level BPE gpt-2, BPE
 * llama3-style deepseek-llm) and the flags; the rest is the text. The target
 * tokenizes it, checks every id is in the vocab and that a too-small output
 * buffer reports the same count, then streams the pieces through el_detok
 * and checks it never holds more than 3 bytes. The same bytes also go to
 * el_chat_detect. Vocab files come from $EL_FIXTURE_DIR (default: the fixtures
 * `make fixtures` writes) /reference/tokenizer/.
 *
 * Chat tokenization (template text special, content plain):
 * el_vocab_tokenize_ranges with one range over the whole text must equal
 * el_vocab_tokenize with parse_special, with no range equal it without;
 * with ranges cut from the input (the second byte seeds the cuts) every id
 * is in the vocab and a 1-token buffer reports the same count. The text,
 * split at NUL bytes into message contents, is rendered by el_chat_render
 * for every family: the text equals el_chat_apply's, the template ranges are
 * sorted, apart and inside it, and tokenizing with them keeps ids in range.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "package/gguf.h"
#include "runtime/chat.h"
#include "runtime/tokenizer.h"

#define REQUIRE(c) do { if (!(c)) { fprintf(stderr, "invariant failed: %s\n", #c); abort(); } } while (0)

static const char *const k_vocabs[] = {"ggml-vocab-llama-spm.gguf", "ggml-vocab-gpt-2.gguf", "ggml-vocab-deepseek-llm.gguf"};
#define N_VOCABS (sizeof k_vocabs / sizeof k_vocabs[0])
static el_vocab *g_vocab[N_VOCABS];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    const char *shared = getenv("EL_FIXTURE_DIR");
    if (!shared) shared = EL_FIXTURE_DIR;
    for (size_t i = 0; i < N_VOCABS; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/reference/tokenizer/%s", shared, k_vocabs[i]);
        el_error err;
        el_gguf *g = el_gguf_open(path, &err);
        if (!g) { fprintf(stderr, "fuzz_tokenize: %s: %s\n", path, err.msg); exit(1); }
        g_vocab[i] = el_vocab_load(g, &err);
        el_gguf_close(g);
        if (!g_vocab[i]) { fprintf(stderr, "fuzz_tokenize: %s: %s\n", path, err.msg); exit(1); }
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const el_vocab *v = g_vocab[data[0] % N_VOCABS];
    const bool add_special = data[0] & 0x10, parse_special = data[0] & 0x20;
    const char *text = (const char *)data + 1;
    const size_t len = size - 1;

    static int32_t toks[1 << 16];
    int n = el_vocab_tokenize(v, text, len, add_special, parse_special, toks, (int)(sizeof toks / sizeof toks[0]));
    if (n < 0 || n > (int)(sizeof toks / sizeof toks[0])) return 0;
    const int nv = el_vocab_n_tokens(v);
    for (int i = 0; i < n; i++) REQUIRE(toks[i] >= 0 && toks[i] < nv);
    if (n > 0) {
        int32_t one;
        REQUIRE(el_vocab_tokenize(v, text, len, add_special, parse_special, &one, 1) == n);
    }

    el_detok d;
    el_detok_init(&d);
    char piece[512], out[512 + 8];
    for (int i = 0; i < n; i++) {
        int pl = el_vocab_token_to_piece(v, toks[i], piece, (int)sizeof piece, true);
        REQUIRE(pl >= 0);
        if (pl > (int)sizeof piece) continue;
        el_detok_push(&d, piece, pl, out);
        REQUIRE(d.n_pending >= 0 && d.n_pending <= 3);
    }
    el_detok_flush(&d, out);

    /* ranges: everything special == parse_special; nothing special == plain */
    static int32_t t2[1 << 16];
    const int cap = (int)(sizeof t2 / sizeof t2[0]);
    size_t all[1][2] = {{0, len}};
    int n2 = el_vocab_tokenize_ranges(v, text, len, add_special, (const size_t(*)[2])all, 1, t2, cap);
    int nps = el_vocab_tokenize(v, text, len, add_special, true, toks, cap);
    REQUIRE(n2 == nps);
    if (n2 > 0 && n2 <= cap) REQUIRE(!memcmp(t2, toks, (size_t)n2 * sizeof *t2));
    n2 = el_vocab_tokenize_ranges(v, text, len, add_special, NULL, 0, t2, cap);
    int npl = el_vocab_tokenize(v, text, len, add_special, false, toks, cap);
    REQUIRE(n2 == npl);
    if (n2 > 0 && n2 <= cap) REQUIRE(!memcmp(t2, toks, (size_t)n2 * sizeof *t2));
    /* ranges cut from the input: a cheap LCG seeded by the second byte */
    if (len > 1) {
        size_t rg[16][2];
        int nr = 0;
        uint32_t x = (uint8_t)text[0] * 2654435761u + 1;
        size_t pos = 0;
        while (nr < 16 && pos < len) {
            x = x * 1103515245u + 12345u;
            size_t a = pos + (x >> 8) % (len - pos + 1);
            x = x * 1103515245u + 12345u;
            size_t b = a + (x >> 8) % (len - a + 1);
            if (b == a) break;
            rg[nr][0] = a;
            rg[nr][1] = b;
            nr++;
            pos = b + 1;
        }
        n2 = el_vocab_tokenize_ranges(v, text, len, add_special, (const size_t(*)[2])rg, nr, t2, cap);
        if (n2 >= 0 && n2 <= cap) {
            for (int i = 0; i < n2; i++) REQUIRE(t2[i] >= 0 && t2[i] < nv);
            int32_t one;
            if (n2 > 0) REQUIRE(el_vocab_tokenize_ranges(v, text, len, add_special, (const size_t(*)[2])rg, nr, &one, 1) == n2);
        }
    }
    /* chat rendering with the text (split at NULs) as message contents */
    {
        static const char *const roles[] = {"system", "user", "assistant", "user"};
        char *copy = malloc(len + 1);
        if (copy) {
            memcpy(copy, text, len);
            copy[len] = 0;
            el_chat_msg msgs[4] = {0};
            int nm = 0;
            for (char *p = copy; nm < 4;) {
                msgs[nm].role = roles[nm];
                msgs[nm].content = p;
                nm++;
                size_t l = strlen(p);
                if (p + l >= copy + len) break;
                p += l + 1;
            }
            for (int f = 1; f < EL_CHAT_COUNT; f++) {
                el_chat_text ct;
                if (el_chat_render((el_chat_family)f, msgs, nm, add_special, &ct) != 0) continue;
                size_t need = el_chat_apply((el_chat_family)f, msgs, nm, add_special, NULL, 0);
                REQUIRE(need == ct.len && strlen(ct.text) == ct.len);
                char *b = malloc(need + 1);
                if (b) {
                    el_chat_apply((el_chat_family)f, msgs, nm, add_special, b, need + 1);
                    REQUIRE(!memcmp(b, ct.text, need));
                    free(b);
                }
                for (int i = 0; i < ct.n_tmpl; i++) {
                    REQUIRE(ct.tmpl[i][0] < ct.tmpl[i][1] && ct.tmpl[i][1] <= ct.len);
                    if (i) REQUIRE(ct.tmpl[i][0] > ct.tmpl[i - 1][1]);
                }
                n2 = el_vocab_tokenize_ranges(v, ct.text, ct.len, true, (const size_t(*)[2])ct.tmpl, ct.n_tmpl, t2, cap);
                for (int i = 0; i < n2 && i < cap; i++) REQUIRE(t2[i] >= 0 && t2[i] < nv);
                el_chat_text_free(&ct);
            }
            free(copy);
        }
    }

    char *tmpl = malloc(len + 1);
    if (tmpl) {
        memcpy(tmpl, text, len);
        tmpl[len] = 0;
        el_chat_family f = el_chat_detect(tmpl);
        REQUIRE(f >= EL_CHAT_UNKNOWN && f < EL_CHAT_COUNT);
        free(tmpl);
    }
    return 0;
}
