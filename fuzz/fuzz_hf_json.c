/*
 * fuzz_hf_json.c — libFuzzer target for the Hugging Face JSON that
 * `edgellm pack` reads (src/convert/): config.json (el_pack_check_config)
 * and tokenizer.json + tokenizer_config.json + generation_config.json
 * (el_hf_vocab_from_json).
 *
 * The input is split at the first two bytes 0x00: config/tokenizer text,
 * tokenizer_config, generation_config (missing parts are absent files). The
 * first part is tried both as config.json and as tokenizer.json. On success
 * every promise of hf_tokenizer.h must hold: n tokens with non-NULL text of
 * the stated length, token types 1..6, special ids in range or -1, merges
 * non-NULL; on failure the error carries a code and a message.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert/hf_tokenizer.h"
#include "convert/pack.h"

#define REQUIRE(c) do { if (!(c)) { fprintf(stderr, "invariant failed: %s\n", #c); abort(); } } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *buf = malloc(size + 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    buf[size] = 0;
    char *parts[3] = {buf, NULL, NULL};
    char *z = memchr(buf, 0, size);
    if (z && (size_t)(z - buf) < size) {
        parts[1] = z + 1;
        char *z2 = memchr(parts[1], 0, size - (size_t)(parts[1] - buf));
        if (z2 && (size_t)(z2 - buf) < size) parts[2] = z2 + 1;
    }
    el_error err = {0};
    char arch[16];
    if (el_pack_check_config(parts[0], arch, &err) == 0) REQUIRE(arch[0]);
    else REQUIRE(err.code != EL_OK && err.msg[0]);

    int n_vocab = (int)(size % 5 == 0 ? 0 : size % 700);
    el_hf_vocab v;
    memset(&err, 0, sizeof err);
    if (el_hf_vocab_from_json(parts[0], parts[1], parts[2], n_vocab, (int)(size % 7) - 1, (int)(size % 11) - 1, &v, &err) == 0) {
        REQUIRE(v.n > 0 && (n_vocab == 0 || v.n == n_vocab));
        REQUIRE(!strcmp(v.model, "llama") || !strcmp(v.model, "gpt2"));
        for (int i = 0; i < v.n; i++) {
            REQUIRE(v.tok[i] && strlen(v.tok[i]) == v.len[i]);
            REQUIRE(v.types[i] >= 1 && v.types[i] <= 6);
        }
        int ids[5] = {v.bos, v.eos, v.unk, v.pad, v.eot};
        for (int k = 0; k < 5; k++) REQUIRE(ids[k] >= -1 && ids[k] < v.n);
        for (int i = 0; i < v.n_merges; i++) REQUIRE(v.merges[i] != NULL);
        REQUIRE((v.scores != NULL) == !strcmp(v.model, "llama"));
        el_hf_vocab_free(&v);
    } else {
        REQUIRE(err.code != EL_OK && err.msg[0]);
    }
    free(buf);
    return 0;
}
