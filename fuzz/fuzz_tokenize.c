/*
 * fuzz_tokenize.c — libFuzzer target for the tokenizers and the chat-template
 * detector (text from outside: prompts, template strings).
 *
 * The first input byte picks a vocab (SPM llama, byte-level BPE gpt-2, BPE
 * llama3-style deepseek-llm) and the flags; the rest is the text. The target
 * tokenizes it, checks every id is in the vocab and that a too-small output
 * buffer reports the same count, then streams the pieces through el_detok
 * and checks it never holds more than 3 bytes. The same bytes also go to
 * el_chat_detect. Vocab files come from $EL_FUZZ_SHARED (default: the
 * ../shared beside the source tree) /reference/tokenizer/.
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
    const char *shared = getenv("EL_FUZZ_SHARED");
    if (!shared) shared = EL_SHARED_DIR;
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
