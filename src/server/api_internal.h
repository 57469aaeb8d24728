/*
 * api_internal.h — what the request parsers and reply builders of api.h
 * share (not part of api.h: the server, the tests and the fuzzer see api.h
 * only).
 *
 *   api.c          the parsing pipeline every body goes through (size, UTF-8, lexical checks,
 *                  cJSON), the field checks the parsers share (numbers, booleans, strings, seeds,
 *                  stop, logit_bias, output formats, lora), errors, JSON strings, request init/free
 *   api_openai.c   /v1/chat/completions and /v1/completions bodies (el_api_parse)
 *   api_tools.c    tools, tool_choice and the tool calls of chat messages
 *   api_native.c   llama-server's /completion: body and reply
 *   api_reply.c    OpenAI replies and stream chunks, logprobs
 *   api_tokens.c   /tokenize, /detokenize and embeddings: bodies and replies
 *
 * Field checkers fill err (a 400 naming the field, or 500 out of memory) and
 * return -1, or return 0; a NULL err is fine (errors then go nowhere).
 */
#ifndef EL_SERVER_API_INTERNAL_H
#define EL_SERVER_API_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "server/api.h"
#include "util/buf.h"

/* A 400 invalid_request_error (param, code, printf-style message). */
#define BAD(err, param, code, ...) el_api_set_error(err, 400, "invalid_request_error", param, code, __VA_ARGS__)

/* ---- api.c: errors, JSON ---------------------------------------------------- */

/* Adds key: s (sanitised UTF-8) or null; 0, or -1 out of memory. */
int api_add_str_or_null(cJSON *obj, const char *key, const char *s);
/* root as one line of JSON (malloc'd; NULL out of memory); root is deleted. */
char *api_print_and_delete(cJSON *root);

/* ---- api.c: the pipeline and the field checks ------------------------------- */

/* The JSON type's name ("string", "number", ...). */
const char *api_jtype(const cJSON *it);
/* "invalid type for 'param': expected what, got <type>" (400 invalid_type); -1. */
int api_type_error(el_api_error *err, const char *param, const char *what, const cJSON *it);
/* At most ~48 bytes of a user string for an error message, cut between characters. */
const char *api_quote(const char *s, char *buf, size_t cap);
/* A malloc'd copy, or NULL with err set (500 out of memory). */
char *api_dupstr(const char *s, el_api_error *err);
/* err: 500 out of memory; -1. */
int api_oom(el_api_error *err);
/* An integral number in [lo, hi]. */
int api_get_int(const cJSON *it, const char *param, double lo, double hi, double *out, el_api_error *err);
/* Optional fields (NULL: not given, nothing changes): checked, stored in *dst, *given set (given NULL: not
 * recorded). A number in [lo, hi] (open ends when lo_open / hi_open), an integer in [lo, hi], a boolean, a
 * string. */
int api_opt_num(const cJSON *it, const char *param, double lo, bool lo_open, double hi, bool hi_open, float *dst,
                bool *given, el_api_error *err);
int api_opt_int(const cJSON *it, const char *param, double lo, double hi, int *dst, bool *given,
                el_api_error *err);
int api_opt_bool(const cJSON *it, const char *param, bool *dst, bool *given, el_api_error *err);
int api_opt_str(const cJSON *it, const char *param, char **dst, el_api_error *err);
/* "seed": an integer in [lo, 2^64). */
int api_get_seed(const cJSON *it, double lo, double *v, el_api_error *err);
/* presence_penalty and frequency_penalty (-2..2). */
int api_penalties(const cJSON *presence, const cJSON *frequency, el_api_request *out, el_api_error *err);
/* it is a token id (an integer in [0, 2^31)): *out set. */
bool api_token_id(const cJSON *it, int32_t *out);
/* obj's member key, which must appear at most once (NULL: absent). */
int api_get_unique(const cJSON *obj, const char *key, const char *param, const cJSON **out,
                   el_api_error *err);
/* A request's defaults (OpenAI's, or llama-server's for EL_API_NATIVE). */
void api_request_init(el_api_request *r, el_api_kind kind);
/* Steps 1-4 of the pipeline: the body as a JSON object (the caller deletes it), or NULL with err filled. */
cJSON *api_parse_root(const char *body, size_t len, el_api_error *err);
/* A NULL output struct (the caller's bug): 500; -1. */
int api_no_output(el_api_error *err, const char *fn);
/* Steps 1-4, fields, then the "lora" list into out (initialised); out is freed on failure. */
int api_parse_request(const char *body, size_t len, int (*fields)(const cJSON *, el_api_request *, el_api_error *),
                      el_api_request *out, el_api_error *err);
/* Output formats: a JSON schema (NULL: any object when object_only, else any value) or GBNF ("grammar")
 * compiled into out->grammar. */
int api_set_schema_grammar(const cJSON *schema, bool object_only, const char *param, el_api_request *out,
                           el_api_error *err);
int api_parse_grammar_field(const cJSON *it, el_api_request *out, el_api_error *err);
/* logit_bias: room for n entries (at most EL_API_MAX_LOGIT_BIAS), one entry (a repeated id is a 400),
 * OpenAI's {"id": bias} form. */
int api_bias_alloc(int n, el_api_request *out, el_api_error *err);
int api_bias_add(int32_t id, float bias, el_api_request *out, el_api_error *err);
/* A text key (1..EL_API_MAX_BIAS_TEXT bytes; the server tokenizes it): room made by api_bias_alloc. */
int api_bias_add_text(const char *text, float bias, el_api_request *out, el_api_error *err);
int api_parse_logit_bias(const cJSON *it, el_api_request *out, el_api_error *err);
/* api_native.c: llama-server's "timings" members of r into the object t; false on OOM. */
bool api_fill_timings(cJSON *t, const el_api_native_result *r);
/* "stop": a string or an array of at most EL_API_MAX_STOP strings. */
int api_parse_stop(const cJSON *it, el_api_request *out, el_api_error *err);

/* ---- api_tools.c ----------------------------------------------------------- */

/* An assistant message's tool_calls (or legacy function_call) into dst; api_free_calls frees them. */
void api_free_calls(el_chat_msg *m);
int api_parse_msg_calls(const cJSON *m, int i, el_chat_msg *dst, el_api_error *err);
/* "tools" (legacy: "functions") and "tool_choice" (legacy: "function_call") into out. */
int api_parse_tools(const cJSON *it, bool legacy, el_api_request *out, el_api_error *err);
int api_parse_tool_choice(const cJSON *it, bool legacy, el_api_request *out, el_api_error *err);

/* ---- api_reply.c ----------------------------------------------------------- */

/* Adds key: text[0..len) as a JSON string (any bytes: el_api_json_string); 0, or -1 out of memory. */
int api_add_text(cJSON *obj, const char *key, const char *text, size_t len);
/* A log-probability (-9999 for -inf), and bytes as an array of numbers, appended to b. */
bool api_put_lp(el_buf *b, float lp);
bool api_put_bytes(el_buf *b, const char *s, size_t n);

#endif
