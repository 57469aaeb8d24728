/*
 * api.h — the OpenAI-compatible request/response formats (layer L6).
 *
 * Parsing validates every field of a request body (outside bytes) and turns
 * any problem into an OpenAI-style error with an HTTP status, never a crash.
 * Builders produce the JSON bodies and server-sent-event chunks the server
 * sends. Uses cJSON; no I/O, no global state.
 */
#ifndef EL_SERVICE_API_H
#define EL_SERVICE_API_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/chat.h"

#define EL_API_MAX_BODY (1u << 20)   /* request bodies above this: 413 */
#define EL_API_MAX_STOP 8

typedef enum { EL_API_CHAT = 0, EL_API_COMPLETION = 1 } el_api_kind;

typedef struct el_api_request {
    el_api_kind kind;
    el_chat_msg *msgs;       /* chat: role/content strings owned by the request */
    int n_msgs;
    char *prompt;            /* completion: the prompt text */
    char *model;             /* as sent (may be NULL) */
    int max_tokens;          /* -1: not given */
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
} el_api_request;

typedef struct el_api_error {
    int status;              /* HTTP status: 400, 401, 404, 405, 413, 429, 503, 500 */
    const char *type;        /* "invalid_request_error", "authentication_error", ... */
    const char *param;       /* offending field or NULL */
    const char *code;        /* short code or NULL */
    char message[320];
} el_api_error;

/* Parse a /v1/chat/completions or /v1/completions body. Returns 0, or -1 with err filled.
 * Checks: valid UTF-8 and JSON object; types of every known field; messages
 * non-empty with known roles (system/user/assistant) and string content;
 * n absent or 1; max_tokens 1..(1<<20); temperature 0..2; top_p (0,1];
 * penalties -2..2; stop a string or array of <= EL_API_MAX_STOP strings. */
int el_api_parse(el_api_kind kind, const char *body, size_t len, el_api_request *out, el_api_error *err);
void el_api_request_free(el_api_request *r);

/* Fill err (printf-style message). */
void el_api_set_error(el_api_error *err, int status, const char *type, const char *param, const char *code,
                      const char *fmt, ...);
/* {"error":{"message":…,"type":…,"param":…,"code":…}} — malloc'd. */
char *el_api_error_json(const el_api_error *err);

typedef struct el_api_usage { int prompt_tokens, completion_tokens; } el_api_usage;

/* Whole (non-streamed) response bodies, malloc'd. finish: "stop" | "length". */
char *el_api_chat_response(const char *id, const char *model, long created, const char *fingerprint,
                           const char *content, const char *finish, el_api_usage usage);
char *el_api_completion_response(const char *id, const char *model, long created, const char *fingerprint,
                                 const char *text, const char *finish, el_api_usage usage);
/* One streamed chunk's JSON (without "data: " framing), malloc'd.
 * delta: text piece or NULL; finish: NULL until the last chunk; usage: only
 * in the usage chunk (choices empty) when include_usage. first: chat chunks
 * carry role "assistant" in the first delta. */
char *el_api_chat_chunk(const char *id, const char *model, long created, const char *fingerprint,
                        const char *delta, bool first, const char *finish, const el_api_usage *usage);
char *el_api_completion_chunk(const char *id, const char *model, long created, const char *fingerprint,
                              const char *text, const char *finish, const el_api_usage *usage);

#endif
