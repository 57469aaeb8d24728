/*
 * tokenizer.h — vocabularies read from GGUF metadata (tokenizer.ggml.*).
 *
 *   model "llama": SentencePiece-style (scores, ▁ for space, byte fallback
 *                  <0xXX>, optional add_space_prefix), as llama.cpp's SPM.
 *   model "gpt2":  byte-level BPE (merges, bytes↔unicode map) with the
 *                  pre-tokenizer regexes chosen by tokenizer.ggml.pre
 *                  (default, llama-bpe/llama3, qwen2, gpt-2, deepseek-llm,
 *                  deepseek-coder, falcon, starcoder, refact, mpt, gpt-neox,
 *                  …), matched with PCRE2 (UTF + UCP).
 * Special tokens (control / user-defined) are split out of the text first
 * when parse_special is on, as llama.cpp does. Output equals llama.cpp's
 * llama_tokenize for the same vocab and flags.
 */
#ifndef EL_RUNTIME_TOKENIZER_H
#define EL_RUNTIME_TOKENIZER_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "edgellm.h"
#include "package/gguf.h"

typedef struct el_vocab el_vocab;

/* Builds the vocab from metadata; copies what it needs (the gguf may be closed after). */
el_vocab *el_vocab_load(const el_gguf *g, el_error *err);
void el_vocab_free(el_vocab *v);

int el_vocab_n_tokens(const el_vocab *v);
int32_t el_vocab_bos(const el_vocab *v);   /* -1 if none */
int32_t el_vocab_eos(const el_vocab *v);   /* -1 if none */
int32_t el_vocab_eot(const el_vocab *v);   /* -1 if none */
bool el_vocab_add_bos(const el_vocab *v);
bool el_vocab_add_eos(const el_vocab *v);
bool el_vocab_is_eog(const el_vocab *v, int32_t id);     /* EOS, EOT, <end_of_turn>, <|im_end|>, <|eot_id|>, ... */
bool el_vocab_is_control(const el_vocab *v, int32_t id);
const char *el_vocab_model_name(const el_vocab *v);      /* "llama" / "gpt2" */
const char *el_vocab_pre_name(const el_vocab *v);        /* tokenizer.ggml.pre or "default" */
/* Token id of an exact token text, -1 if none. */
int32_t el_vocab_find(const el_vocab *v, const char *text, size_t len);

/* add_special: BOS (and EOS) per vocab flags. parse_special: recognise
 * special-token text in `text`. Returns number of tokens (may exceed cap; then
 * only cap were written), or -1 on error (invalid input). */
int el_vocab_tokenize(const el_vocab *v, const char *text, size_t len,
                      bool add_special, bool parse_special, int32_t *out, int cap);

/* As el_vocab_tokenize with parse_special on, except that control (and
 * unknown) tokens are recognised only where their whole text lies inside one
 * of the byte ranges [special_ranges[i][0], special_ranges[i][1]) (sorted,
 * not overlapping, inside the text); elsewhere the text is tokenized as with
 * parse_special off (user-defined tokens still match, as llama.cpp's). So
 * text outside the ranges can never become a control token, and where it
 * holds no control-token text the ids equal el_vocab_tokenize(parse_special)
 * of the whole text — the same fragments, the same SPM space prefix after a
 * special token, the same lstrip/rstrip. -1 for bad ranges. */
int el_vocab_tokenize_ranges(const el_vocab *v, const char *text, size_t len, bool add_special,
                             const size_t (*special_ranges)[2], int n_ranges, int32_t *out, int cap);

/* llama_token_to_piece semantics: ▁ → space (SPM), <0xXX> → that byte, BPE
 * byte-unicode chars → bytes; control tokens render only when `special`.
 * Returns the piece length (may exceed cap; then nothing useful written). */
int el_vocab_token_to_piece(const el_vocab *v, int32_t id, char *buf, int cap, bool special);

/* Streaming detokenizer: feeds pieces, releases only complete UTF-8 sequences. */
typedef struct el_detok {
    char pending[8];
    int n_pending;
} el_detok;
void el_detok_init(el_detok *d);
/* Appends piece to pending bytes and writes to out the longest prefix that
 * ends on a UTF-8 boundary (invalid bytes are passed through, never held
 * forever). Returns bytes written (out must hold len + 8). */
int el_detok_push(el_detok *d, const char *piece, int len, char *out);
/* Flush whatever remains at the end of a stream. */
int el_detok_flush(el_detok *d, char *out);

#endif
