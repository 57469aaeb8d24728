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
 *
 * ABI rules (libedgellm.so.EL_ABI_VERSION; the SONAME changes when one breaks):
 *   - Only what this header declares (EL_API) is exported; everything else in
 *     the library has hidden visibility.
 *   - Handles (el_model, el_session) are opaque: their layout is not ABI.
 *   - Structs the caller fills and passes by pointer (el_model_params,
 *     el_session_params, el_generate_params) and structs the library fills in
 *     the caller's memory (el_generate_stats) end in reserved space: later
 *     versions take new fields from it, and zero there keeps the old meaning.
 *     Start from el_*_default_params() or zero-initialise. el_sampling is
 *     embedded in el_generate_params and is frozen; el_error is frozen.
 *   - Structs the library owns and passes to a callback (el_token_info) may
 *     gain fields at the end; a caller only reads them.
 *   - Every enum value is spelled out and never changes; new values are only
 *     added after the last one. Unknown values must be tolerated by callers.
 *   - Functions are only added; a changed signature is a new name.
 *
 * Bad input: every function accepts NULL handles and pointers where it can
 * check them (an error code / EL_ERR_INVALID_ARG, a NULL or 0 result, a no-op
 * for the *_free and cancel functions). A handle used after it was freed, or a
 * model freed while one of its sessions is still alive, cannot be checked:
 * that is undefined behaviour, as for free().
 */
#ifndef EDGELLM_H
#define EDGELLM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32) && defined(EL_BUILDING_SHARED)
#define EL_API __declspec(dllexport)
#elif defined(__GNUC__) || defined(__clang__)
#define EL_API __attribute__((visibility("default")))
#else
#define EL_API
#endif

#define EL_VERSION_MAJOR 0
#define EL_VERSION_MINOR 1
#define EL_VERSION_PATCH 0
#define EL_VERSION_STRING "0.1.0"
#define EL_ABI_VERSION 0 /* the shared library's SONAME: libedgellm.so.0 */

/* The library's version, "MAJOR.MINOR.PATCH" (what `edgellm --version`
 * prints). Compare with EL_VERSION_STRING to catch a header/library mismatch. */
EL_API const char *el_version(void);

/* ---- errors ------------------------------------------------------------ */
typedef enum {
    EL_OK = 0,
    EL_ERR_IO = 1,            /* open/stat/mmap/read failed */
    EL_ERR_BAD_MAGIC = 2,     /* not a GGUF file */
    EL_ERR_BAD_VERSION = 3,   /* GGUF version not 2 or 3 */
    EL_ERR_TRUNCATED = 4,     /* a field runs past the end of the file */
    EL_ERR_BAD_COUNT = 5,     /* absurd count / length / dimension */
    EL_ERR_BAD_VALUE = 6,     /* a metadata value of the wrong type or range */
    EL_ERR_BAD_TENSOR = 7,    /* tensor out of file, overlapping, misaligned, bad shape */
    EL_ERR_BAD_TYPE = 8,      /* unknown ggml type id */
    EL_ERR_UNSUPPORTED = 9,   /* known but not supported (architecture, type, tokenizer) */
    EL_ERR_MISSING = 10,       /* a required key or tensor is absent */
    EL_ERR_NOMEM = 11,         /* allocation failed or memory budget exceeded */
    EL_ERR_INVALID_ARG = 12,   /* caller passed something invalid */
    EL_ERR_CONTEXT = 13,       /* prompt (+ generation) does not fit the context */
    EL_ERR_TEMPLATE = 14,      /* chat template unknown or failed */
    EL_ERR_CANCELLED = 15,     /* the request was cancelled */
    EL_ERR_INTERNAL = 16,
    EL_ERR_NUMERIC = 17,       /* the model computed a NaN or infinity (logits): broken weights or metadata */
    EL_ERR_GRAMMAR = 18        /* a grammar / JSON schema is invalid or too large, or admits no token at some step */
} el_status;

typedef struct el_error {
    el_status code;
    char msg[384];
} el_error;

EL_API const char *el_status_name(el_status s);

/* ---- logging ------------------------------------------------------------ */
/* The library prints nothing. What it has to say (a model loaded, a session
 * sized, a load that failed) goes to the log callback given in
 * el_model_params, with one of these levels; no callback: nothing is said.
 * Messages carry no prompt or output text. The callback runs on the calling
 * thread, inside the call that logs; it must not call back into the library
 * with the same model or session. msg is valid only during the call. */
typedef enum {
    EL_LOG_ERROR = 0,
    EL_LOG_WARN = 1,
    EL_LOG_INFO = 2,
    EL_LOG_DEBUG = 3
} el_log_level;
typedef void (*el_log_cb)(el_log_level level, const char *msg, void *user);

/* ---- model ------------------------------------------------------------- */
typedef struct el_model el_model;

/* How the weights come into memory (seed 000 §5.4's load strategies). The
 * file is always mapped read-only; the modes differ in what is brought in
 * before el_model_load returns and what stays on demand. */
typedef enum {
    EL_LOAD_MMAP = 0,     /* pages come in when first touched (default) */
    EL_LOAD_PRELOAD = 1,  /* every page read and mlock'd before load returns; fails with
                           * EL_ERR_NOMEM naming RLIMIT_MEMLOCK when the limit is too small */
    EL_LOAD_PREFETCH = 2, /* on demand, and while layer i computes the next layers'
                           * weights are requested (madvise WILLNEED) */
    EL_LOAD_HOT = 3       /* the layers and the output head read and mlock'd; the token
                           * embedding table (sparse rows) stays on demand */
} el_load_mode;

/*
 * Where the ops run (L3/L4, docs/HETEROGENEOUS.md). "cpu" (NULL): the CPU
 * backend alone. "opencl" or "opencl:N": every op the OpenCL device N (0)
 * runs goes there, the rest to the CPU. "auto": the scheduler places each op
 * on the CPU or any OpenCL device by their measured capability tables (the
 * preferred device within 1.5x of the fastest). A device that cannot be had
 * falls back to the CPU, logged and shown in the placement report.
 */
typedef struct el_backend_params {
    const char *backend;  /* "cpu" | "opencl[:N]" | "auto"; NULL = "cpu" */
    const char *prefer;   /* "auto": the device preferred ("opencl0", "cpu"); NULL: the fastest */
    float tax_budget;     /* alarm share of transfer time in a pass; 0 = 0.15 */
    float tolerance;      /* the preferred device's allowance; 0 = 1.5 */
    bool measure;         /* synchronise and time every partition (for the report) */
} el_backend_params;

typedef struct el_model_params {
    int n_threads;        /* 0 = number of online CPUs */
    bool vocab_only;      /* load tokenizer only (vocab GGUF files) */
    el_log_cb log_cb;     /* NULL: silent. Used by the model and its sessions */
    void *log_user;
    el_load_mode load;    /* EL_LOAD_MMAP (0) = as before */
    /* (added after 0.1.0, from the reserved space) */
    const el_backend_params *backend; /* NULL: the CPU backend alone */
    void *reserved[4];    /* zero */
} el_model_params;

EL_API el_model_params el_model_default_params(void);
EL_API el_model *el_model_load(const char *path, const el_model_params *p, el_error *err);
EL_API void el_model_free(el_model *m);

EL_API const char *el_model_arch(const el_model *m);         /* "llama", "qwen2", ... */
EL_API int   el_model_n_vocab(const el_model *m);
EL_API int   el_model_n_ctx_train(const el_model *m);
EL_API const char *el_model_chat_template(const el_model *m); /* NULL if none */
/* Read a metadata string (NULL if absent / not a string). Copy lives as long as the model. */
EL_API const char *el_model_meta_str(const el_model *m, const char *key);

/* Mixture of experts: expert residency (memory/experts.h). The routed experts
 * stay mapped from the file; at most `bytes` of them stay resident (the most
 * recently used), the rest are released after each MoE op and fault back in
 * on their next use. Residency never changes a number the model computes.
 * Refused (EL_ERR_INVALID_ARG, with the figures) for a dense model, below one
 * token's experts (n_used of n_expert in every layer), and below all of them
 * when the load mode locks the weights. bytes >= the experts' total: all
 * resident (the default). */
EL_API int el_model_set_expert_budget(el_model *m, uint64_t bytes, el_error *err);
typedef struct el_expert_stats {
    uint64_t total_bytes;     /* every routed expert of every layer */
    uint64_t budget_bytes;    /* at most this many stay resident (<= total_bytes) */
    uint64_t resident_bytes;  /* now resident (used and not released) */
    uint64_t per_token_bytes; /* one token's experts: the smallest budget */
    uint64_t hits, misses;    /* expert uses (each expert an op used, once) resident / not */
    uint64_t bytes_faulted;   /* experts' bytes brought back by the misses */
    uint64_t releases;        /* experts released */
    uint64_t bytes_released;  /* page bytes madvised away */
} el_expert_stats;
/* The counters since load; -1 (and zeros) for a dense model. */
EL_API int el_model_expert_stats(const el_model *m, el_expert_stats *out);

/* Bytes a session of n_ctx tokens needs, before creating it: exactly what
 * el_session_new allocates (KV — sliding-window layers as rings, see
 * memory/plan.h — scratch, logits, the session struct) when swa_full is 0
 * and the cache is F16 (el_session_bytes_for takes every parameter);
 * n_ctx/n_batch 0 = the defaults; 0 if the size overflows. */
EL_API size_t el_session_bytes(const el_model *m, int n_ctx, int n_batch);

/* ---- tokens ------------------------------------------------------------ */
enum {
    EL_TOK_ADD_SPECIAL   = 1, /* add BOS/EOS as the vocab says */
    EL_TOK_PARSE_SPECIAL = 2  /* recognise control-token text like <start_of_turn> */
};
/* Returns the number of tokens; if > cap, nothing beyond cap was written and
 * the caller should retry with a larger buffer. Negative on error. */
EL_API int el_tokenize(const el_model *m, const char *text, size_t len, int32_t *out, int cap, int flags);
/* Bytes of one token's piece (special tokens rendered only if `special`). Returns
 * length; if > cap the buffer was too small. */
EL_API int el_token_to_piece(const el_model *m, int32_t tok, char *buf, int cap, bool special);
EL_API int32_t el_token_bos(const el_model *m);
EL_API int32_t el_token_eos(const el_model *m);
EL_API bool el_token_is_eog(const el_model *m, int32_t tok); /* EOS, EOT, end_of_turn, ... */

/* ---- sessions ---------------------------------------------------------- */
typedef struct el_session el_session;

/* Types of the KV cache (llama.cpp's --cache-type-k/-v): the ggml type ids.
 * Q8_0 and Q4_0 (and BF16) need a head size that is a multiple of 32. */
typedef enum {
    EL_CACHE_DEFAULT = 0, /* F16 */
    EL_CACHE_F16 = 1,
    EL_CACHE_Q4_0 = 2,
    EL_CACHE_Q8_0 = 8,
    EL_CACHE_BF16 = 30
} el_cache_type;

typedef struct el_session_params {
    int n_ctx;    /* tokens of context (KV cache length); 0 = min(train ctx, 4096) */
    int n_batch;  /* prompt tokens per prefill batch; 0 = 512 (as llama.cpp's n_ubatch) */
    int swa_full; /* 1: sliding-window layers keep the whole context instead of a ring of
                     window + n_batch positions (llama.cpp's --swa-full); same tokens either way */
    int n_draft_max; /* speculative decoding (added after 0.1.0): the most draft tokens one step
                        may verify, 0..32 (0: none). The session keeps 1 + n_draft_max rows of
                        logits (n_vocab floats each) — counted in its memory plan. */
    /* (added after 0.1.0, from the reserved space; 0 = F16 as before) */
    int type_k;   /* el_cache_type of the K cache */
    int type_v;   /* el_cache_type of the V cache */
    /* (added from the reserved space; 0 = none planned, as before) LoRA: the sum of the
     * ranks (el_lora_rank_max) of the adapters the session may apply at once. The
     * session's memory plan (el_session_bytes_for) then holds their scratch and
     * el_session_set_adapters allocates nothing; a set that needs more is refused. */
    int lora_rank;
    void *reserved[6 - 16 / sizeof(void *)]; /* zero; the struct keeps its size and alignment */
} el_session_params;

/* "f16", "bf16", "q8_0", "q4_0" (llama.cpp's names, case-insensitive) -> an
 * el_cache_type; -1 for anything else. */
EL_API int el_cache_type_parse(const char *name);
/* "f16", "bf16", "q8_0", "q4_0" (0 = "f16"); NULL for a value that is not a cache type. */
EL_API const char *el_cache_type_name(int type);
/* el_session_bytes for these params (cache types and swa_full included):
 * exactly what el_session_new(m, p) allocates; 0 if the params are invalid
 * (a cache type the model's head size cannot use) or the size overflows. */
EL_API size_t el_session_bytes_for(const el_model *m, const el_session_params *p);

EL_API el_session_params el_session_default_params(void);
EL_API el_session *el_session_new(el_model *m, const el_session_params *p, el_error *err);
EL_API void el_session_free(el_session *s);
/* The placement report of the session's last forward pass (where each op
 * ran, partitions, bytes across boundaries, estimated and measured times,
 * fallbacks): text, or JSON when json != 0, into buf (cap bytes, always
 * terminated when cap > 0). Returns the length the whole report needs
 * (excluding the terminator), as snprintf does. */
EL_API size_t el_session_placement_report(el_session *s, int json, char *buf, size_t cap);
EL_API void el_session_reset(el_session *s);        /* forget history, keep buffers */
EL_API int  el_session_n_ctx(const el_session *s);
EL_API int  el_session_n_past(const el_session *s); /* tokens in KV */
/* Keep only the first n_keep positions of the KV cache (a prompt cache rolls
 * back to the prefix a new prompt shares). Any prefix of a full-context
 * layer; a sliding-window layer's ring (Gemma 3) only while it still holds
 * the window the next position needs (a roll-back of at most n_batch + 1
 * positions once the ring has wrapped). 0, or EL_ERR_CONTEXT (the ring has
 * lost those rows: truncate to 0 and recompute), EL_ERR_INVALID_ARG (n_keep
 * outside 0..n_past, NULL, busy); the session is unchanged on error. */
EL_API int  el_session_truncate(el_session *s, int n_keep, el_error *err);

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

EL_API el_sampling el_sampling_default(void); /* llama.cpp's defaults: temp .8, top_k 40, top_p .95, min_p .05 */

/* ---- generation -------------------------------------------------------- */
typedef enum {
    EL_DONE_EOS = 0,
    EL_DONE_STOP = 1,      /* a stop string, or the callback returned false */
    EL_DONE_LENGTH = 2,    /* max_tokens, or the context is full */
    EL_DONE_CANCELLED = 3, /* el_session_cancel */
    EL_DONE_FAILED = 4     /* err says why */
} el_finish;

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

/*
 * Speculative decoding (added after 0.1.0). EL_SPEC_NGRAM drafts by prompt
 * lookup: the continuation of the most recent earlier occurrence of the
 * last n tokens (n from ngram_max down to ngram_min) in the prompt and the
 * output so far. EL_SPEC_PREDICT drafts from an expected output the caller
 * gives (a document being edited, a previous answer). The target verifies 1 + γ positions in one forward pass,
 * each in the arithmetic of a plain decode step; rejected positions are
 * rolled back. The output is the plain output: token for token with greedy
 * sampling, and in distribution otherwise (speculative sampling: accept a
 * draft token with probability p, else draw from p without it). γ is chosen
 * each round by the controller (src/sched/spec.h) from the measured
 * acceptance rate and verification cost, and is 0 — a plain step — when
 * speculating would not pay; `fixed` = always n_draft_max.
 */
/*
 * EL_SPEC_DRAFT drafts with a second, smaller model (llama.cpp's -md): `draft`
 * is a session of that model (its own KV cache; create it with the target's
 * n_ctx and an n_batch of at least n_draft_max + 1). Each round the draft
 * decodes γ tokens greedily; after verification its cache is rolled back to
 * the accepted prefix. Between calls the draft session mirrors the target's
 * history (kept in step by el_generate: drive both only through it, and
 * reset or truncate the target freely — the draft follows at the next call;
 * a draft that cannot follow is re-filled from this call's prompt, which
 * changes only the acceptance rate, never the output). Refused before
 * generation: a draft whose vocabulary differs from the target's (token
 * count, or any token's text), a draft with more weight bytes than the
 * target, a draft session that is the target session or is busy. The
 * controller's cost c then includes the draft's measured time per token.
 */
typedef enum { EL_SPEC_OFF = 0, EL_SPEC_NGRAM = 1, EL_SPEC_PREDICT = 2, EL_SPEC_DRAFT = 3 } el_spec_mode;
typedef struct el_spec_params {
    int mode;              /* el_spec_mode */
    int n_draft_max;       /* γ at most (1..the session's n_draft_max; 0: the session's) */
    int n_draft_min;       /* γ at least when speculating (0: 1) */
    int ngram_min, ngram_max; /* n-gram sizes looked up (0: 1 and 4) */
    int fixed;             /* 1: always γ = n_draft_max, no controller */
    /* EL_SPEC_PREDICT (OpenAI's "predicted outputs"): the expected output;
     * the draft for output token k is prediction[k..]; read during
     * el_generate, so it must stay valid until el_generate returns. */
    const int32_t *prediction;
    int n_prediction;
    /* EL_SPEC_DRAFT (added from the reserved space): the draft model's session */
    el_session *draft;
    int reserved[sizeof(void *) == 8 ? 4 : 5]; /* zero; the struct keeps its size */
} el_spec_params;

typedef struct el_generate_params {
    int max_tokens;          /* <= 0: until context is full */
    bool ignore_eos;
    const char *const *stop; /* NULL-terminated list of stop strings, or NULL */
    int n_top_logprobs;      /* 0..64 */
    el_sampling sampling;
    const el_spec_params *spec; /* speculative decoding (NULL: off; added after 0.1.0) */
    /* GBNF grammar text (llama.cpp's syntax, start rule "root") the output must
     * follow, or NULL (added after 0.1.0). Compiled before prefill: an invalid
     * grammar fails with EL_ERR_GRAMMAR naming line and column. Every sampler
     * setting and speculative decoding work under it (a draft token the
     * grammar rejects is never accepted); end-of-generation tokens are allowed
     * only where the grammar can end and then end the generation even with
     * ignore_eos; a step where the grammar allows no token fails with
     * EL_ERR_GRAMMAR. */
    const char *grammar;
    /* Lazy grammar (added after 0.1.0; NULL: the grammar applies from the
     * first token): a NULL-terminated list of trigger strings. The output is
     * free until one of them appears in it; the grammar then applies to the
     * output from the start of that trigger on (the text already generated
     * from there is fed to it; if the grammar rejects that text, the output
     * stays free). A trigger starting with '^' counts only at the start of
     * the output (after whitespace). Tool calls under tool_choice "auto"
     * use it. */
    const char *const *grammar_triggers;
    int grammar_flags;       /* EL_GRAMMAR_* (added after 0.1.0; 0: none) */
    void *reserved[4];       /* zero */
} el_generate_params;

/* el_generate_params.grammar_flags. END_EARLY: the generation ends (finish
 * EL_DONE_EOS) once nothing but the end can follow, or once the grammar could
 * end (possibly before whitespace accepted since) and the model's most likely
 * next token, unconstrained, is one the grammar would not take: a complete
 * tool call ends the reply unless the model itself opens another. */
#define EL_GRAMMAR_END_EARLY 1

typedef struct el_generate_stats {
    int n_prompt, n_generated;
    double prefill_ms, decode_ms, ttft_ms;
    el_finish finish;
    /* speculative decoding (zero without): tokens drafted and verified, of them accepted,
     * verification rounds (forward passes of 2+ positions), plain decode steps */
    int n_drafted, n_accepted, n_spec_rounds, n_plain_steps;
    /* (added from the reserved space) the controller's cost c per drafted token at the end,
     * relative to a plain decode step (verification row + draft model step), in millionths;
     * and the γ of the last verification round */
    int spec_cost_ppm, spec_last_gamma;
    int reserved[2];
} el_generate_stats;

/* Appends prompt tokens after the session's history, prefills, then decodes
 * until EOS/stop/max_tokens/cancel. Returns the finish reason (EL_DONE_FAILED
 * with err filled on error; EL_ERR_NUMERIC, naming the step, when a logits
 * row holds a NaN or infinity — no token is sampled from it). cb may be NULL.
 * gp NULL: greedy, until EOS or the context is full.
 * From inside cb: el_session_cancel(s) is fine (the generation ends as
 * EL_DONE_CANCELLED before the next token); el_generate / el_session_eval /
 * el_session_chat on the same session fail with EL_ERR_INVALID_ARG ("busy"),
 * el_session_reset is ignored; el_session_free(s) or el_model_free is
 * undefined. The same holds for another thread while a generation runs. */
EL_API el_finish el_generate(el_session *s, const int32_t *prompt, int n_prompt,
                      const el_generate_params *gp, el_token_cb cb, void *user,
                      el_generate_stats *stats, el_error *err);

/* Lower level: evaluate tokens, leaving the last token's logits readable.
 * 0, or an el_status (EL_ERR_NUMERIC if that row holds a NaN or infinity). */
EL_API int el_session_eval(el_session *s, const int32_t *toks, int n, el_error *err);
EL_API const float *el_session_logits(const el_session *s);

EL_API void el_session_cancel(el_session *s); /* any thread; takes effect at the next decode step */

/* ---- embeddings ---------------------------------------------------------- */
/* The model's final hidden state after its output norm (what llama.cpp calls
 * the embeddings of a decoder model, its t_embd), pooled over the input's
 * tokens. Values are llama.cpp's LLAMA_POOLING_TYPE_*. */
typedef enum {
    EL_POOLING_NONE = 0, /* one vector per token (n * n_embd floats) */
    EL_POOLING_MEAN = 1, /* the mean over the tokens */
    EL_POOLING_CLS = 2,  /* the first token's vector */
    EL_POOLING_LAST = 3  /* the last token's vector */
} el_pooling;

/* The hidden size (floats per embedding vector); 0 for NULL or vocab-only. */
EL_API int el_model_n_embd(const el_model *m);
/* The pooling the model file asks for (GGUF "<arch>.pooling_type"), or
 * EL_POOLING_NONE when it names none (as llama.cpp defaults: decoder LMs
 * carry no such key). A value edgellm cannot pool (rank) is returned as is. */
EL_API int el_model_pooling(const el_model *m);

/* Embeds toks[0..n) as one sequence at positions 0..n-1 (the session's
 * history is dropped first and after: the session is left reset) and writes
 * the pooled vector — n_embd floats, or n * n_embd for EL_POOLING_NONE — to
 * out (cap floats). Not normalised (llama_get_embeddings_seq's values; the
 * server L2-normalises). Returns the number of floats written, or a negative
 * el_status with err filled: EL_ERR_INVALID_ARG (NULL, n < 1, a token
 * outside the vocab, an unknown pooling, cap too small — naming the size
 * needed, or the session busy), EL_ERR_CONTEXT (n beyond the session's
 * context, with both numbers), EL_ERR_CANCELLED (el_session_cancel between
 * batches), EL_ERR_NUMERIC (a NaN or infinity in the result). Prompts longer
 * than n_batch run in n_batch chunks. The normal generation path is not
 * changed by this call's existence (one flag tested per forward pass). */
EL_API int el_embed(el_session *s, const int32_t *toks, int n, el_pooling pooling, float *out, size_t cap,
                    el_error *err);

/* ---- chat -------------------------------------------------------------- */
/* edgellm does not run Jinja: it recognises the common chat-template families
 * ("gemma", "llama3", "chatml", "llama2", "mistral", "phi3") from the model's
 * tokenizer.chat_template and renders messages as that family's template
 * would. template_name NULL (or "") = the model's own family: its template's
 * if recognised, else the usual one for its architecture. Only the template's
 * markers (<start_of_turn>, <|im_start|>, ...) become special tokens; message
 * content is plain text, so a message cannot forge a turn. */
typedef struct el_chat_message {
    const char *role;    /* "system", "user" or "assistant" */
    const char *content; /* UTF-8, NUL-terminated */
} el_chat_message;

/* The family name the model chats with by default ("gemma", ...), or NULL
 * when neither its template nor its architecture names one. */
EL_API const char *el_chat_template_name(const el_model *m);

/* Renders the messages as text (no BOS: tokenizing adds it). Returns the
 * length (excluding the NUL); writes at most cap bytes including a NUL, so a
 * result >= cap means "retry with a buffer of result + 1". -1 on error
 * (unknown template or role: EL_ERR_TEMPLATE; bad arguments). */
EL_API int el_chat_format(const el_model *m, const char *template_name, const el_chat_message *msgs, int n_msgs,
                          bool add_generation_prompt, char *buf, size_t cap, el_error *err);

/* Tokens of the rendered chat (BOS added as the vocab says). Returns the
 * count; if > cap nothing beyond cap was written (retry larger). -1 on error. */
EL_API int el_chat_tokenize_messages(const el_model *m, const char *template_name, const el_chat_message *msgs,
                                     int n_msgs, bool add_generation_prompt, int32_t *out, int cap, el_error *err);

/* One chat turn: the session's history is replaced by the conversation
 * (el_session_reset, then the rendering with the generation prompt is
 * prefilled) and the assistant's reply is generated and streamed as by
 * el_generate. Stops at the model's end-of-turn token. The whole
 * conversation is prefilled every turn; an app that wants to reuse the KV
 * cache across turns feeds the new tokens itself with el_generate. */
EL_API el_finish el_session_chat(el_session *s, const char *template_name, const el_chat_message *msgs, int n_msgs,
                                 const el_generate_params *gp, el_token_cb cb, void *user, el_generate_stats *stats,
                                 el_error *err);

/* ---- LoRA adapters --------------------------------------------------------
 * An adapter in llama.cpp's GGUF LoRA format (general.type = "adapter",
 * adapter.type = "lora", adapter.lora.alpha; tensor pairs "<base>.lora_a"
 * [in, r] / "<base>.lora_b" [r, out]) for the q/k/v/o projections, the FFN
 * (gate/up/down) and the output head. el_lora_load reads the file into a
 * buffer of its own and validates it against the model (architecture, every
 * target tensor present, shapes, types): errors name the tensor. The base
 * weights are never modified: a session applies y = W·x + s·B·(A·x) with
 * s = scale × alpha / rank (scale alone when alpha is 0), several adapters
 * summed. An adapter must outlive every session it is set on, and the model
 * must outlive the adapter. */
typedef struct el_lora el_lora;
EL_API el_lora *el_lora_load(el_model *m, const char *path, el_error *err);
EL_API void el_lora_free(el_lora *a);
EL_API size_t el_lora_bytes(const el_lora *a);   /* bytes it holds (the file) */
EL_API float el_lora_alpha(const el_lora *a);
EL_API int el_lora_rank_max(const el_lora *a);   /* the largest rank of its pairs */
EL_API int el_lora_n_pairs(const el_lora *a);    /* adapted weights */
/* Sets the session's active adapters (n = 0 clears them): scales[i] applies to
 * adapters[i]. Each scale must be finite and >= 0 (0: the adapter is skipped,
 * the logits are the base model's bit for bit); each adapter must belong to
 * the session's model; at most 8, none twice. The scratch their products need
 * is in the session's memory plan when it was created with
 * el_session_params.lora_rank >= the adapters' summed rank (a set needing more
 * than the plan holds: EL_ERR_NOMEM with the numbers, nothing changed); with
 * lora_rank 0 it is allocated here (never in the decode loop). Refused
 * (nothing changed) while a generation runs on the session. 0 or an el_status
 * with err filled. */
EL_API int el_session_set_adapters(el_session *s, el_lora *const *adapters, const float *scales, int n,
                                   el_error *err);

/* ---- what is not in this library ------------------------------------------
 * Signed model packages (manifest + Ed25519 signature + SHA-256 of each
 * artifact) are verified by `edgellm verify` / `edgellm install` (the store),
 * not by libedgellm: verification needs libsodium and cJSON, and the core
 * library depends only on libc, libm, pthreads and PCRE2 so that it embeds
 * anywhere. An app verifies a package when it installs it (the CLI, or its
 * own check of the manifest), then loads the verified GGUF with
 * el_model_load, which validates every byte of the GGUF structure it reads. */

#ifdef __cplusplus
}
#endif
#endif
