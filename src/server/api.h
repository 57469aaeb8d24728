/*
 * api.h — the OpenAI-compatible request/response formats (layer L6).
 *
 * The same for llama-server's native /completion (el_api_parse_native,
 * el_api_native_response) and for embeddings (el_api_parse_embeddings,
 * el_api_embeddings_response / _native): one parser and builder pair per
 * wire shape.
 *
 * Parsing validates every field of a request body (outside bytes) and turns
 * any problem into an OpenAI-style error with an HTTP status, never a crash.
 * Builders produce the JSON bodies and server-sent-event chunks the server
 * sends. Generated text is passed with its length, never as a C string: it
 * may hold NUL bytes (a <0x00> byte token), which come out as \u0000, and
 * ill-formed UTF-8, which comes out as U+FFFD (one per maximal ill-formed
 * subpart, Unicode's recommended practice). Uses cJSON (strings that may hold
 * NUL are escaped here and embedded as raw JSON); no I/O, no global state.
 */
#ifndef EL_SERVICE_API_H
#define EL_SERVICE_API_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/chat.h"
#include "structured/toolcall.h"
#include "util/buf.h"

#define EL_API_MAX_LORA 32      /* entries of a request's "lora" list */
#define EL_API_MAX_LORA_ID 31   /* the largest adapter id a request may name */
#define EL_API_MAX_BODY (1u << 20)   /* request bodies above this: 413 */
#define EL_API_MAX_STOP 8
#define EL_API_MAX_TOP_LOGPROBS 20   /* chat top_logprobs 0..20; completions logprobs 0..5 */
#define EL_API_MAX_LOGIT_BIAS 1024   /* entries in logit_bias */
#define EL_API_MAX_BIAS_TEXT 256     /* bytes in one of logit_bias's text keys */
#define EL_API_MAX_N_PROBS 64        /* /completion n_probs (el_generate's top-k limit) */
#define EL_API_MAX_PROMPT_PARTS 65536 /* /completion prompt: text pieces + token ids */
#define EL_API_MAX_RESP_FIELDS 32    /* /completion response_fields entries */

/* CHAT: /v1/chat/completions; COMPLETION: /v1/completions (OpenAI's legacy
 * shape); NATIVE: llama-server's own /completion. */
typedef enum { EL_API_CHAT = 0, EL_API_COMPLETION = 1, EL_API_NATIVE = 2 } el_api_kind;

/* One piece of a /completion prompt: text (tokenized by the server) or one token id. */
typedef struct el_api_prompt_part {
    char *text;              /* NULL: a token id */
    int32_t tok;             /* checked >= 0 here, against the vocabulary by the server */
} el_api_prompt_part;

typedef struct el_api_request {
    el_api_kind kind;
    el_chat_msg *msgs;       /* chat: role/content strings owned by the request */
    int n_msgs;
    char *prompt;            /* completion: the prompt text */
    char *model;             /* as sent (may be NULL) */
    int max_tokens;          /* chat: -1 when not given; completion: 16 when not given (OpenAI) */
    float temperature;       /* default 1.0 (OpenAI) */
    float top_p;             /* default 1.0 */
    float presence_penalty;  /* default 0 */
    float frequency_penalty; /* default 0 */
    bool has_seed;
    uint64_t seed;
    char *stop[EL_API_MAX_STOP + 1]; /* NULL-terminated */
    int n_stop;
    bool stream;
    bool include_usage;      /* stream_options.include_usage */
    bool logprobs;           /* chat: "logprobs": true; completion: "logprobs" given (an integer) */
    int top_logprobs;        /* chat: "top_logprobs" 0..20; completion: the "logprobs" value 0..5 */
    bool echo;               /* completion: the prompt is prepended to the text */
    int n_logit_bias;        /* "logit_bias": {"token id": -100..100}; ids checked < 2^31 here, */
    int32_t *logit_bias_id;  /* against the vocabulary by the server */
    float *logit_bias;
    bool verbose;            /* llama-server's "verbose": the reply carries "__verbose" (its /completion object) */
    bool timings_per_token;  /* llama-server's: every stream chunk carries "timings" */
    bool no_generation_prompt; /* chat: "add_generation_prompt": false (only /apply-template renders so) */
    bool continue_final;     /* chat: "continue_final_message" true / a string (not done: the chat route's 400) */
    int n_logit_bias_text;   /* text keys (llama-server's): each is tokenized by the server (no special */
    char **logit_bias_text;  /* tokens) and the bias added to every token of it, a token met twice */
    float *logit_bias_text_bias; /* getting the sum (llama.cpp's bias sampler adds each entry) */
    /* given explicitly (else the server's --temp / --n-predict apply) */
    bool has_temperature, has_max_tokens;
    /* llama-server's /completion (EL_API_NATIVE) only; its defaults otherwise */
    el_api_prompt_part *parts; /* prompt pieces, in order (a plain string is one text part) */
    int n_parts;
    int top_k;               /* native default 40; OpenAI kinds: 0 (off) */
    float min_p;             /* native default 0.05; OpenAI kinds: 0 */
    float repeat_penalty;    /* default 1 (off) */
    int repeat_last_n;       /* native default 64; -1: the whole context */
    int n_probs;             /* 0..2^31-1 here; the server checks it against the vocabulary and EL_API_MAX_N_PROBS */
    bool ignore_eos, cache_prompt, return_tokens;
    bool has_cache_prompt;   /* cache_prompt was given (else: true on /completion, false on the OpenAI
                                routes, unless serve --cache-prompt / --no-cache-prompt say otherwise) */
    int id_slot;             /* -1: any */
    char *resp_fields[EL_API_MAX_RESP_FIELDS]; /* response_fields ("a" or "obj/key") */
    int n_resp_fields;
    /* OpenAI routes: the first constraint the request asks for that edgellm's own generation cannot
     * honour (a static string naming the field), NULL when none; the server refuses it with 400 before
     * generating locally (a cloud route forwards the body as sent). Tool calls are honoured now: NULL. */
    const char *local_unsupported;
    /* chat: tool calls. "tools" [{"type": "function", "function": {name, description, parameters,
     * strict}}] (or legacy "functions" [{name, ...}]): tools[i] (name, parameters as compact JSON) and
     * chat_tools[i] (the definition serialised for the template, toolcall.h el_tool_pydumps); at most
     * EL_TOOL_MAX_TOOLS, each at most EL_TOOL_MAX_DEF_BYTES serialised, names [A-Za-z0-9_-]{1,64} and
     * unique, each parameters schema compiled here (an error names the tool and the schema place).
     * "tool_choice" "none" | "auto" | "required" | {"type": "function", "function": {"name"}} (or
     * legacy "function_call" "none" | "auto" | {"name"}); the name must be an offered tool; required /
     * named need tools. Default: auto with tools, none without. "parallel_tool_calls" (default true).
     * With tools and a choice other than none, response_format / grammar / json_schema are a 400 (as
     * llama-server). Messages: an assistant's "tool_calls" [{id, type: "function", function: {name,
     * arguments: a JSON string}}] (or legacy "function_call") become msgs[i].tool_calls, arguments
     * re-serialised as the templates print them (Python json.dumps of the parsed object; a string that
     * is not JSON stays a JSON string); "tool" (legacy "function") messages carry their content and
     * tool_call_id. */
    /* chat: "chat_template_kwargs" (llama-server's), an object whose members become variables of the
     * model's Jinja template (e.g. {"enable_thinking": false}), as compact JSON; NULL when not given.
     * The built-in families ignore it. */
    char *chat_template_kwargs;
    /* chat: "reasoning_format" (llama-server's) "none" | "deepseek" | "auto" (structured/toolformat.h
     * el_reasoning_format): whether <think>…</think> (and a format's reasoning channel) becomes
     * message.reasoning_content; -1 when not given (the server's --reasoning-format). */
    int reasoning_format;
    el_tool_def *tools;
    el_chat_tool *chat_tools;
    int n_tools;
    el_tool_choice tool_choice;
    int tool_named;          /* EL_TOOL_CHOICE_NAMED: index into tools */
    bool parallel_tool_calls;
    /* constrained output: GBNF the reply must follow (compiled and checked at
     * parse time), or NULL. OpenAI routes: "response_format" {"type":"text"},
     * {"type":"json_object"} (any JSON object; with a "schema" member, that
     * schema, as llama-server), {"type":"json_schema","json_schema":{"schema":
     * …,"strict":…}} (the schema; absent: any JSON value); llama-server's
     * "grammar" (GBNF text; "" = none) and "json_schema" (a schema) on every
     * route; at most one of them. */
    char *grammar;
    /* LoRA adapters (llama-server's "lora": [{"id": N, "scale": S}], every route): has_lora when a
     * non-empty list was given (an empty one or null: the server's defaults). Ids 0..EL_API_MAX_LORA_ID
     * (checked against the registered adapters by the server), scales finite >= 0 (a missing scale is 0,
     * as llama-server); a repeated id keeps its last scale. */
    bool has_lora;
    int n_lora;
    int lora_id[EL_API_MAX_LORA];
    float lora_scale[EL_API_MAX_LORA];
} el_api_request;

/* /tokenize {"content": str, "add_special": bool, "parse_special": bool, "with_pieces": bool} and
 * /detokenize {"tokens": [int, ...]} bodies, parsed by the same pipeline. */
typedef struct el_api_tok_request {
    char *content;           /* tokenize: valid UTF-8 without NUL */
    size_t content_len;
    bool add_special;        /* default false */
    bool parse_special;      /* default true */
    bool with_pieces;        /* tokenize: each token as {id, piece} (llama-server's); default false */
    int32_t *tokens;         /* detokenize: ids in [0, 2^31) (the server checks the vocabulary) */
    int n_tokens;
} el_api_tok_request;

typedef struct el_api_error {
    int status;              /* HTTP status: 400, 401, 404, 405, 413, 429, 503, 500 */
    const char *type;        /* "invalid_request_error", "authentication_error", ... */
    const char *param;       /* offending field or NULL */
    const char *code;        /* short code or NULL */
    char message[320];
    int n_prompt_tokens;     /* context overflow (code "context_length_exceeded"): the prompt's */
    int n_ctx;               /* tokens and the context, as llama-server reports them; 0: absent */
} el_api_error;

/* Parse a /v1/chat/completions or /v1/completions body. Returns 0, or -1 with err filled.
 * Checks: valid UTF-8 and JSON object; types of every known field; messages
 * non-empty with known roles (system/user/assistant/tool) and string content
 * (an assistant message with tool_calls may have null content); tools,
 * tool_choice and parallel_tool_calls as described at el_api_request.tools;
 * n and best_of absent, null or 1; suffix absent, null or ""; max_tokens
 * 1..(1<<20); temperature 0..2; top_p (0,1]; penalties -2..2; stop a string
 * or array of <= EL_API_MAX_STOP strings; logprobs (chat: boolean;
 * completion: integer 0..5) and top_logprobs (chat: 0..20, needs logprobs);
 * echo (completion: boolean; not together with logprobs); logit_bias an
 * object of "token id": -100..100. A field that is not supported with a
 * given value is a 400 naming it (param), never silently ignored. */
int el_api_parse(el_api_kind kind, const char *body, size_t len, el_api_request *out, el_api_error *err);
/* Parse llama-server's /completion body (kind EL_API_NATIVE), same pipeline
 * and error shapes. prompt: a string, or an array of token ids (>= 0) and
 * strings (<= EL_API_MAX_PROMPT_PARTS), or an array holding one string;
 * several prompts are a 400. n_predict -1 (unlimited) or 1..(1<<20) (0,
 * prompt evaluation only, is a 400); temperature 0..2 (negative: greedy, as
 * llama-server); top_k >= 0; top_p and min_p 0..1; repeat_penalty 0..10;
 * repeat_last_n >= -1; penalties -2..2; seed -1 (random) or an integer;
 * stop an array of <= EL_API_MAX_STOP strings (a lone string too); logit_bias
 * [[id, bias | false], ...] or {"id": bias}; n_probs >= 0; ignore_eos,
 * cache_prompt, return_tokens, stream booleans; id_slot -1 or >= 0;
 * response_fields an array of <= EL_API_MAX_RESP_FIELDS strings. Sampler
 * fields edgellm does not implement are a 400 naming them unless they hold
 * their neutral value (mirostat 0, typical_p 1, dry_multiplier 0,
 * xtc_probability 0, dynatemp_range 0, grammar "", n_keep 0, ...). */
int el_api_parse_native(const char *body, size_t len, el_api_request *out, el_api_error *err);
void el_api_request_free(el_api_request *r);

/* /tokenize and /detokenize bodies: the same size, UTF-8, lexical and cJSON
 * steps as el_api_parse, the same errors. 0, or -1 with err filled. */
int el_api_parse_tokenize(const char *body, size_t len, el_api_tok_request *out, el_api_error *err);
int el_api_parse_detokenize(const char *body, size_t len, el_api_tok_request *out, el_api_error *err);
void el_api_tok_request_free(el_api_tok_request *r);

/* ---- embeddings (/v1/embeddings, /embeddings, /embedding) ---------------- */
#define EL_API_MAX_EMBD_INPUTS 2048    /* inputs in one request (OpenAI's limit) */
#define EL_API_MAX_EMBD_NORMALIZE 64   /* embd_normalize: -1..this */

/* One input: text pieces (tokenized by the server) and token ids, in order. */
typedef struct el_api_embd_input {
    el_api_prompt_part *parts;
    int n_parts;                 /* >= 1 */
} el_api_embd_input;

typedef struct el_api_embd_request {
    el_api_embd_input *inputs;
    int n_inputs;                /* 1..EL_API_MAX_EMBD_INPUTS */
    bool oai;                    /* "input" was given (OpenAI's shape); false: "content", llama-server's
                                    native reply shape even on /v1/embeddings (as llama-server) */
    bool base64;                 /* encoding_format "base64" (little-endian float32 bytes) */
    int normalize;               /* embd_normalize: -1 none, 0 max-abs to int16 range, 1 taxicab,
                                    2 euclidean (default), > 2 p-norm */
    int dimensions;              /* 0: not given; else 1..2^20 (the server wants n_embd) */
    char *model;                 /* as sent, or NULL (the OpenAI reply echoes it) */
} el_api_embd_request;

/* Parse an embeddings body (llama-server's shapes): "input" (or "content"):
 * a string; an array holding at least one token id (one input of ids and
 * strings); or an array of inputs, each a string or an array of ids and
 * strings. An empty array, an empty input (no ids and only empty strings),
 * an object entry (multimodal), a nested array inside an input, a negative or
 * non-integral id, more than EL_API_MAX_EMBD_INPUTS inputs or
 * EL_API_MAX_PROMPT_PARTS parts are a 400 naming the index.
 * encoding_format "float" | "base64"; embd_normalize an integer in
 * -1..EL_API_MAX_EMBD_NORMALIZE; dimensions an integer >= 1; model and user
 * strings. 0, or -1 with err filled (nothing left allocated). */
int el_api_parse_embeddings(const char *body, size_t len, el_api_embd_request *out, el_api_error *err);
void el_api_embd_request_free(el_api_embd_request *r);

/* llama.cpp's common_embd_normalize, in place: mode -1 none, 0 max-abs
 * scaled to 32760, 1.. p-norm (2: euclidean). A zero vector stays zero. */
void el_api_embd_normalize(float *v, int n, int mode);

/* OpenAI's reply: {"model", "object": "list", "usage": {"prompt_tokens",
 * "total_tokens"}, "data": [{"embedding": [floats] | "base64", "index",
 * "object": "embedding"}]}; vecs[i] has dim floats. malloc'd, NULL on OOM.
 * Floats are written with 9 significant digits (they read back exactly). */
char *el_api_embeddings_response(const char *model, const float *const *vecs, int n_vecs, int dim, bool base64,
                                 int prompt_tokens);
/* llama-server's native reply: [{"index": i, "embedding": [[floats], ...]}]:
 * rows[i] vectors of dim floats per input (one when pooled, one per token
 * for pooling none). malloc'd, NULL on OOM. */
char *el_api_embeddings_native(const float *const *vecs, const int *rows, int n_inputs, int dim);

/* Appends s[0..n) as a JSON string literal (quotes included): sanitised
 * (el_utf8_sanitize, util/utf8.h), NUL as \u0000, control characters escaped. false on OOM. */
bool el_api_json_string(el_buf *out, const char *s, size_t n);

/* /tokenize and /detokenize response bodies, malloc'd. */
char *el_api_tokenize_response(const int32_t *toks, int n);
/* /tokenize with "with_pieces" (llama-server's shape): {"tokens": [{"id": N, "piece": P}]}, token
 * i's piece being bytes [off[i], off[i+1]) of pieces: a string when valid UTF-8, else an array of
 * its byte values (a token that is part of a character). NULL on OOM. */
char *el_api_tokenize_pieces_response(const int32_t *toks, int n, const char *pieces, const size_t *off);
char *el_api_detokenize_response(const char *text, size_t len);

/* Log-probabilities of generated tokens, for the response's "logprobs". */
typedef struct el_api_top_lp { const char *text; size_t len; float logprob; int32_t id; } el_api_top_lp;
typedef struct el_api_token_lp {
    const char *text;        /* the token's own bytes (may be part of a character) */
    size_t len;
    float logprob;
    int n_top;
    const el_api_top_lp *top;
    int32_t id;              /* the token id (native /completion only) */
} el_api_token_lp;
/* The "logprobs" value as raw JSON, malloc'd. Chat: {"content":[{token,
 * logprob, bytes, top_logprobs:[{token, logprob, bytes}]}], "refusal": null}.
 * Completion (legacy): {tokens, token_logprobs, top_logprobs: [{tok: lp}],
 * text_offset}; *offset is the text offset (in Unicode code points of the
 * returned text) of the first token and is advanced past the last one. */
char *el_api_logprobs_json(el_api_kind kind, const el_api_token_lp *t, int n, size_t *offset);

/* /completion's "completion_probabilities" array as raw JSON, malloc'd:
 * [{id, token, bytes, logprob, top_logprobs: [{id, token, bytes, logprob}]}]. */
char *el_api_native_probs_json(const el_api_token_lp *t, int n);

/* One /completion result (a whole response, or one stream chunk). */
typedef struct el_api_native_result {
    const char *content;     /* text by length (any bytes; sanitised as above) */
    size_t len;
    const int32_t *tokens;   /* generated ids for "tokens" (NULL with n_tokens 0: []) */
    int n_tokens;
    bool stop;               /* false: a stream chunk; true: the final object */
    const char *model;
    int id_slot;
    int n_prompt, n_predicted;
    int n_cache_reused;      /* final: prompt tokens taken from the slot's cache (timings cache_n; prompt_n is the rest) */
    int n_cached;            /* final: tokens the slot's cache holds after the request ("tokens_cached") */
    const char *stop_type;   /* final only: "eos", "limit", "word" (else "none") */
    const char *stopping_word;
    bool truncated;
    double prompt_ms, predicted_ms;
    const char *prompt;      /* final only: the prompt as text (NULL: omitted) */
    size_t prompt_len;
    const char *settings;    /* final only: generation_settings raw JSON (NULL: omitted) */
    const char *probs;       /* completion_probabilities raw JSON (NULL: omitted) */
} el_api_native_result;
/* The JSON object, malloc'd. fields (n_fields > 0): only those keys; "a/b"
 * takes key b of object a, named "a/b" at the top level; a missing field is
 * left out (llama-server's response_fields). NULL on OOM. */
char *el_api_native_response(const el_api_native_result *r, char *const *fields, int n_fields);
/* {"timings": ...} member values: prompt_n, prompt_ms, prompt_per_token_ms,
 * prompt_per_second, predicted_n, predicted_ms, predicted_per_token_ms,
 * predicted_per_second, cache_n (prompt tokens reused from the slot's cache). */
char *el_api_timings_json(const el_api_native_result *r); /* that object alone, malloc'd; NULL on OOM */
/* json (an object; taken and freed) with key: raw (JSON text, taken and freed) added at the top level,
 * as llama-server adds "__verbose" and "timings" to OpenAI replies. NULL on OOM or if either is not
 * JSON. */
char *el_api_with_member(char *json, const char *key, char *raw);

/* --ctx-overflow truncate: json (a response body or the finish chunk, taken
 * and freed) with "truncated": true and "n_messages_dropped": n added at the
 * top level (llama-server's /completion calls its flag "truncated"). NULL on
 * OOM or if json is not an object. */
char *el_api_with_truncation(char *json, int n_messages_dropped);

/* Fill err (printf-style message). */
void el_api_set_error(el_api_error *err, int status, const char *type, const char *param, const char *code,
                      const char *fmt, ...);
/* {"error":{"message":…,"type":…,"param":…,"code":…}} — malloc'd. */
char *el_api_error_json(const el_api_error *err);

/* cached_tokens: prompt tokens reused from the slot's cache (usage.prompt_tokens_details.cached_tokens) */
typedef struct el_api_usage { int prompt_tokens, completion_tokens, cached_tokens; } el_api_usage;

/* Whole (non-streamed) response bodies, malloc'd. finish: "stop" | "length".
 * Text is content[0..len) (NULL: ""). logprobs: raw JSON from
 * el_api_logprobs_json, or NULL for null. */
char *el_api_chat_response(const char *id, const char *model, long created, const char *fingerprint,
                           const char *content, size_t len, const char *finish, el_api_usage usage,
                           const char *logprobs);
/* A reply's tool calls: ids[i] ("call_…") for calls[i]. */
typedef struct el_api_tool_calls {
    const el_tool_call_out *calls;
    char *const *ids;
    int n;
} el_api_tool_calls;
/* el_api_chat_response with message.tool_calls [{id, type: "function", function: {name,
 * arguments (a JSON string)}}] (tc->n > 0), content NULL → null, and message.reasoning_content
 * (reasoning[0..rlen), when reasoning is not NULL). */
char *el_api_chat_response_tools(const char *id, const char *model, long created, const char *fingerprint,
                                 const char *content, size_t len, const char *reasoning, size_t rlen,
                                 const el_api_tool_calls *tc, const char *finish, el_api_usage usage,
                                 const char *logprobs);
/* A stream chunk with delta.reasoning_content text[0..len) (first: the delta also has role "assistant"
 * and content null); logprobs as el_api_chat_chunk's. */
char *el_api_chat_reasoning_chunk(const char *id, const char *model, long created, const char *fingerprint,
                                  const char *text, size_t len, bool first, const char *logprobs);
/* A stream chunk with delta.tool_calls [{index, id, type: "function", function: {name, arguments: ""}}]
 * (the call's first chunk: args NULL) or [{index, function: {arguments: args}}] (a fragment) —
 * OpenAI's streaming shape. */
char *el_api_chat_tool_chunk(const char *id, const char *model, long created, const char *fingerprint, int index,
                             const char *call_id, const char *name, const char *args, size_t args_len);
char *el_api_completion_response(const char *id, const char *model, long created, const char *fingerprint,
                                 const char *text, size_t len, const char *finish, el_api_usage usage,
                                 const char *logprobs);
/* One streamed chunk's JSON (without "data: " framing), malloc'd.
 * delta: text piece delta[0..len) or NULL; finish: NULL until the last chunk;
 * usage: only in the usage chunk (choices empty) when include_usage. first:
 * chat chunks carry role "assistant" in the first delta. logprobs: the raw
 * JSON of this chunk's tokens, or NULL. */
char *el_api_chat_chunk(const char *id, const char *model, long created, const char *fingerprint,
                        const char *delta, size_t len, bool first, const char *finish, const el_api_usage *usage,
                        const char *logprobs);
/* Chat streams open with one chunk that carries the role only:
 * {"delta":{"role":"assistant","content":null}} (llama-server's and OpenAI's
 * shape); the chunks after it carry non-empty content (or logprobs). */
char *el_api_chat_role_chunk(const char *id, const char *model, long created, const char *fingerprint);
/* An error inside a stream, llama-server's shape: {"error":{"code": HTTP
 * status (a number), "message", "type"}} (+ n_prompt_tokens, n_ctx). */
char *el_api_stream_error_json(const el_api_error *err);
char *el_api_completion_chunk(const char *id, const char *model, long created, const char *fingerprint,
                              const char *text, size_t len, const char *finish, const el_api_usage *usage,
                              const char *logprobs);

#endif
