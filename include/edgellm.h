/*
 * edgellm.h — the one public header of the edgellm library.
 *
 * Contract:
 *   - Opaque handles, no global state: a model (weights, vocab, mapped
 *     read-only and shareable between sessions and threads) and sessions
 *     (tokens, KV cache, scratch, sampler state) that belong to one caller.
 *   - Errors are returned, never printed: every call that can fail takes an
 *     el_error* and fills code + message (what was wrong and where).
 *   - A session allocates everything it will need when it is created; the
 *     decode loop allocates nothing.
 *   - el_session_cancel() may be called from any thread at any time; the
 *     generation loop checks it once per decode step (the safe point).
 */
#ifndef EDGELLM_H
#define EDGELLM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define EL_VERSION_STRING "0.1.0"

/* ---- errors ------------------------------------------------------------ */
typedef enum {
    EL_OK = 0,
    EL_ERR_IO,            /* open/stat/mmap/read failed */
    EL_ERR_BAD_MAGIC,     /* not a GGUF file */
    EL_ERR_BAD_VERSION,   /* GGUF version not 2 or 3 */
    EL_ERR_TRUNCATED,     /* a field runs past the end of the file */
    EL_ERR_BAD_COUNT,     /* absurd count / length / dimension */
    EL_ERR_BAD_VALUE,     /* a metadata value of the wrong type or range */
    EL_ERR_BAD_TENSOR,    /* tensor out of file, overlapping, misaligned, bad shape */
    EL_ERR_BAD_TYPE,      /* unknown ggml type id */
    EL_ERR_UNSUPPORTED,   /* known but not supported (architecture, type, tokenizer) */
    EL_ERR_MISSING,       /* a required key or tensor is absent */
    EL_ERR_NOMEM,         /* allocation failed or memory budget exceeded */
    EL_ERR_INVALID_ARG,   /* caller passed something invalid */
    EL_ERR_CONTEXT,       /* prompt (+ generation) does not fit the context */
    EL_ERR_TEMPLATE,      /* chat template unknown or failed */
    EL_ERR_CANCELLED,     /* the request was cancelled */
    EL_ERR_INTERNAL,
    EL_ERR_NUMERIC        /* the model computed a NaN or infinity (logits): broken weights or metadata */
} el_status;

typedef struct el_error {
    el_status code;
    char msg[384];
} el_error;

const char *el_status_name(el_status s);

/* ---- model ------------------------------------------------------------- */
typedef struct el_model el_model;

typedef struct el_model_params {
    int n_threads;        /* 0 = number of online CPUs */
    bool vocab_only;      /* load tokenizer only (vocab GGUF files) */
} el_model_params;

el_model_params el_model_default_params(void);
el_model *el_model_load(const char *path, const el_model_params *p, el_error *err);
void el_model_free(el_model *m);

const char *el_model_arch(const el_model *m);         /* "llama", "qwen2", ... */
int   el_model_n_vocab(const el_model *m);
int   el_model_n_ctx_train(const el_model *m);
const char *el_model_chat_template(const el_model *m); /* NULL if none */
/* Read a metadata string (NULL if absent / not a string). Copy lives as long as the model. */
const char *el_model_meta_str(const el_model *m, const char *key);

/* Bytes a session of n_ctx tokens needs, before creating it: exactly what
 * el_session_new allocates (KV — sliding-window layers as rings, see
 * memory/plan.h — scratch, logits, the session struct) when swa_full is 0;
 * n_ctx/n_batch 0 = the defaults; 0 if the size overflows. */
size_t el_session_bytes(const el_model *m, int n_ctx, int n_batch);

/* ---- tokens ------------------------------------------------------------ */
enum {
    EL_TOK_ADD_SPECIAL   = 1, /* add BOS/EOS as the vocab says */
    EL_TOK_PARSE_SPECIAL = 2  /* recognise control-token text like <start_of_turn> */
};
/* Returns the number of tokens; if > cap, nothing beyond cap was written and
 * the caller should retry with a larger buffer. Negative on error. */
int el_tokenize(const el_model *m, const char *text, size_t len, int32_t *out, int cap, int flags);
/* Bytes of one token's piece (special tokens rendered only if `special`). Returns
 * length; if > cap the buffer was too small. */
int el_token_to_piece(const el_model *m, int32_t tok, char *buf, int cap, bool special);
int32_t el_token_bos(const el_model *m);
int32_t el_token_eos(const el_model *m);
bool el_token_is_eog(const el_model *m, int32_t tok); /* EOS, EOT, end_of_turn, ... */

/* ---- sessions ---------------------------------------------------------- */
typedef struct el_session el_session;

typedef struct el_session_params {
    int n_ctx;    /* tokens of context (KV cache length); 0 = min(train ctx, 4096) */
    int n_batch;  /* prompt tokens per prefill batch; 0 = 512 (as llama.cpp's n_ubatch) */
    int swa_full; /* 1: sliding-window layers keep the whole context instead of a ring of
                     window + n_batch positions (llama.cpp's --swa-full); same tokens either way */
} el_session_params;

el_session_params el_session_default_params(void);
el_session *el_session_new(el_model *m, const el_session_params *p, el_error *err);
void el_session_free(el_session *s);
void el_session_reset(el_session *s);        /* forget history, keep buffers */
int  el_session_n_ctx(const el_session *s);
int  el_session_n_past(const el_session *s); /* tokens in KV */

/* ---- sampling ---------------------------------------------------------- */
typedef struct el_sampling {
    float temp;             /* <= 0: greedy */
    int   top_k;            /* <= 0: off */
    float top_p;            /* >= 1: off */
    float min_p;            /* <= 0: off */
    float repeat_penalty;   /* 1: off */
    float freq_penalty;     /* 0: off */
    float presence_penalty; /* 0: off */
    int   penalty_last_n;   /* tokens of history the penalties see; -1 = context */
    uint64_t seed;
    /* logit bias (added after 0.1.0; zero = none): logit_bias[i] is added to
     * the logit of token logit_bias_id[i] before the penalties and every other
     * step, as llama.cpp's logit-bias sampler (OpenAI's logit_bias). The
     * arrays are copied when the sampler is created; ids outside the
     * vocabulary are ignored. Reported log-probabilities are not biased. */
    int   n_logit_bias;
    const int32_t *logit_bias_id;
    const float *logit_bias;
} el_sampling;

el_sampling el_sampling_default(void); /* llama.cpp's defaults: temp .8, top_k 40, top_p .95, min_p .05 */

/* ---- generation -------------------------------------------------------- */
typedef enum { EL_DONE_EOS, EL_DONE_STOP, EL_DONE_LENGTH, EL_DONE_CANCELLED, EL_DONE_FAILED } el_finish;

typedef struct el_token_info {
    int32_t id;
    const char *piece;   /* the token's text bytes; an incomplete UTF-8 tail is held back (comes later), but
                            bytes that can never form a character (a stray continuation byte) pass as they are,
                            and the last call (id = -1) may end in an incomplete sequence: not always valid UTF-8 */
    int piece_len;
    float logprob;       /* log-probability of `id`: log-softmax of the model's raw logits (before
                            logit bias, penalties, temperature and truncation) */
    int n_top;           /* entries in top[] (as many as requested), best first, same log-softmax */
    const int32_t *top_id;
    const float *top_logprob;
} el_token_info;

/* Called once per generated token (EOS/EOT are not delivered). Text a stop
 * string might still claim, or an incomplete UTF-8 tail, is held back and
 * delivered with a later token; what remains at the end comes in one last
 * call with id = -1. Return false to stop generation (ends as EL_DONE_STOP). */
typedef bool (*el_token_cb)(const el_token_info *tok, void *user);

typedef struct el_generate_params {
    int max_tokens;          /* <= 0: until context is full */
    bool ignore_eos;
    const char *const *stop; /* NULL-terminated list of stop strings, or NULL */
    int n_top_logprobs;      /* 0..64 */
    el_sampling sampling;
} el_generate_params;

typedef struct el_generate_stats {
    int n_prompt, n_generated;
    double prefill_ms, decode_ms, ttft_ms;
    el_finish finish;
} el_generate_stats;

/* Appends prompt tokens after the session's history, prefills, then decodes
 * until EOS/stop/max_tokens/cancel. Returns the finish reason (EL_DONE_FAILED
 * with err filled on error; EL_ERR_NUMERIC, naming the step, when a logits
 * row holds a NaN or infinity — no token is sampled from it). */
el_finish el_generate(el_session *s, const int32_t *prompt, int n_prompt,
                      const el_generate_params *gp, el_token_cb cb, void *user,
                      el_generate_stats *stats, el_error *err);

/* Lower level: evaluate tokens, leaving the last token's logits readable.
 * 0, or an el_status (EL_ERR_NUMERIC if that row holds a NaN or infinity). */
int el_session_eval(el_session *s, const int32_t *toks, int n, el_error *err);
const float *el_session_logits(const el_session *s);

void el_session_cancel(el_session *s); /* any thread; takes effect at the next decode step */

#ifdef __cplusplus
}
#endif
#endif
