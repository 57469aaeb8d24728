/*
 * hf_tokenizer.h — a Hugging Face tokenizer (tokenizer.json,
 * tokenizer_config.json, generation_config.json, chat template) turned into
 * the GGUF tokenizer metadata llama.cpp and edgellm read (tokenizer.ggml.*).
 *
 * Two kinds are recognized from tokenizer.json:
 *   - SentencePiece-style ("llama"): a BPE model with byte_fallback (or a
 *     Unigram model) over "▁"-marked text. Scores: Unigram's own, or for BPE
 *     -(rank of the first merge that makes the piece) so that llama.cpp's
 *     SPM tokenizer (highest score first) merges in the BPE order; pieces
 *     no merge makes score 0. Token types: <0xXX> BYTE, the unk token
 *     UNKNOWN, added tokens CONTROL when special or special-looking
 *     (<|...|>, <unused..>, <pad>, <mask>: llama.cpp's rule) else
 *     USER_DEFINED (with "▁" back to spaces), else NORMAL. add_space_prefix from a Prepend("▁")
 *     normalizer or a Metaspace pre-tokenizer that prepends.
 *   - byte-level BPE ("gpt2"): tokens as stored, merges as "a b", the
 *     pre-tokenizer named by comparing its Split regex with the ones llama.cpp
 *     knows (qwen2, llama-bpe, gpt-2 ...).
 * Ids past the tokenizer's own up to config.json's vocab_size become
 * "[PADn]" tokens (as llama.cpp's converter writes them).
 */
#ifndef EL_CONVERT_HF_TOKENIZER_H
#define EL_CONVERT_HF_TOKENIZER_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "edgellm.h"

enum { EL_TT_NORMAL = 1, EL_TT_UNKNOWN = 2, EL_TT_CONTROL = 3, EL_TT_USER_DEFINED = 4, EL_TT_UNUSED = 5, EL_TT_BYTE = 6 };

typedef struct el_hf_vocab {
    char model[8];       /* "llama" or "gpt2" (tokenizer.ggml.model) */
    char pre[32];        /* tokenizer.ggml.pre ("" for SPM) */
    int n;               /* tokens */
    char **tok;          /* n strings (owned) */
    size_t *len;
    float *scores;       /* n (SPM) or NULL */
    int32_t *types;      /* n */
    char **merges;       /* gpt2: "a b" strings */
    int n_merges;
    bool add_space_prefix;
    int add_bos, add_eos; /* 0/1 */
    int bos, eos, unk, pad, eot; /* -1 when absent */
    char *chat_template; /* NULL when absent */
} el_hf_vocab;

/* Reads dir/tokenizer.json (required) and, when present, tokenizer_config.json,
 * generation_config.json, chat_template.jinja / chat_template.json. n_vocab is
 * config.json's vocab_size (0: the tokenizer's own size); config_bos/eos are
 * config.json's ids (-1 if none), used when tokenizer_config names none. */
int el_hf_vocab_load(const char *dir, int n_vocab, int config_bos, int config_eos, el_hf_vocab *v, el_error *err);
/* The same from JSON texts (tokenizer_config/generation_config may be NULL); no
 * chat_template.jinja fallback. For tests and fuzzing. */
int el_hf_vocab_from_json(const char *tokenizer_json, const char *tokenizer_config_json, const char *generation_config_json,
                          int n_vocab, int config_bos, int config_eos, el_hf_vocab *v, el_error *err);
void el_hf_vocab_free(el_hf_vocab *v);

/* A whole text file (malloc'd, NUL-terminated); NULL with an error if it cannot be read
 * (EL_ERR_MISSING if it does not exist). */
char *el_conv_read_file(const char *path, size_t max_bytes, el_error *err);

#endif
