/*
 * api_reply.c — the OpenAI reply bodies: whole responses and stream chunks
 * of chat and legacy completions (text, tool calls, usage), and the
 * "logprobs" value.
 *
 * Builders take generated text by length: it may hold NUL bytes (a <0x00>
 * byte token), which are escaped as \u0000, and ill-formed UTF-8, of which
 * each maximal ill-formed subpart becomes one U+FFFD (Unicode's recommended
 * practice, so a character cut short is one U+FFFD, not one per byte). Such
 * strings are escaped by el_api_json_string (api.c) and embedded into the
 * cJSON tree as raw JSON (api_add_text), since cJSON holds strings as C
 * strings. Every body is one line of valid UTF-8 JSON; a body with one
 * choice is head + choice (+ usage): choice_body.
 */
#include "server/api_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/utf8.h"

/* {id, object, created, model, system_fingerprint} — the head every body shares. */
static cJSON *head(const char *object, const char *id, const char *model, long created, const char *fingerprint) {
    cJSON *root = cJSON_CreateObject();
    if (!root) return NULL;
    if (api_add_str_or_null(root, "id", id ? id : "") || !cJSON_AddStringToObject(root, "object", object) ||
        !cJSON_AddNumberToObject(root, "created", (double)created) ||
        api_add_str_or_null(root, "model", model ? model : "") ||
        api_add_str_or_null(root, "system_fingerprint", fingerprint)) {
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

static int add_usage(cJSON *root, el_api_usage u) {
    cJSON *o = cJSON_AddObjectToObject(root, "usage"), *d = NULL;
    return o && cJSON_AddNumberToObject(o, "prompt_tokens", u.prompt_tokens) &&
                   cJSON_AddNumberToObject(o, "completion_tokens", u.completion_tokens) &&
                   cJSON_AddNumberToObject(o, "total_tokens", (double)u.prompt_tokens + (double)u.completion_tokens) &&
                   (d = cJSON_AddObjectToObject(o, "prompt_tokens_details")) &&
                   cJSON_AddNumberToObject(d, "cached_tokens", u.cached_tokens)
               ? 0
               : -1;
}

/* Adds key: the JSON string of text[0..len) (any bytes; see el_api_json_string). */
int api_add_text(cJSON *obj, const char *key, const char *text, size_t len) {
    el_buf b = {0};
    bool ok = el_api_json_string(&b, text ? text : "", text ? len : 0);
    cJSON *it = ok ? cJSON_CreateRaw(b.p) : NULL;
    el_buf_free(&b);
    if (!it) return -1;
    cJSON_AddItemToObject(obj, key, it);
    return 0;
}

/* Adds key: raw JSON, or null when raw is NULL. */
static int add_raw_or_null(cJSON *obj, const char *key, const char *raw) {
    if (!raw) return cJSON_AddNullToObject(obj, key) ? 0 : -1;
    return cJSON_AddRawToObject(obj, key, raw) ? 0 : -1;
}

/* Appends {index:0, <body...>, finish_reason, logprobs} to the choices array;
 * the caller's filler writes the body. */
typedef int (*fill_fn)(cJSON *choice, const void *ctx);

static int add_choice(cJSON *root, fill_fn fill, const void *ctx, const char *finish, const char *logprobs) {
    cJSON *arr = cJSON_AddArrayToObject(root, "choices");
    cJSON *c = cJSON_CreateObject();
    if (!arr || !c) { cJSON_Delete(c); return -1; }
    cJSON_AddItemToArray(arr, c);
    if (!cJSON_AddNumberToObject(c, "index", 0) || fill(c, ctx) || api_add_str_or_null(c, "finish_reason", finish) ||
        add_raw_or_null(c, "logprobs", logprobs))
        return -1;
    return 0;
}

/* A body with one choice: head(object, ...), the choice (fill writes its body) and, when usage is given,
 * usage. malloc'd, NULL on OOM. */
static char *choice_body(const char *object, const char *id, const char *model, long created,
                         const char *fingerprint, fill_fn fill, const void *ctx, const char *finish,
                         const char *logprobs, const el_api_usage *usage) {
    cJSON *root = head(object, id, model, created, fingerprint);
    if (!root) return NULL;
    if (add_choice(root, fill, ctx, finish, logprobs) || (usage && add_usage(root, *usage))) {
        cJSON_Delete(root);
        return NULL;
    }
    return api_print_and_delete(root);
}

struct text_ctx { const char *text; size_t len; bool first; };

static int fill_message(cJSON *c, const void *ctx) {
    const struct text_ctx *t = ctx;
    cJSON *m = cJSON_AddObjectToObject(c, "message");
    return m && cJSON_AddStringToObject(m, "role", "assistant") && !api_add_text(m, "content", t->text, t->len) ? 0 : -1;
}

static int fill_text(cJSON *c, const void *ctx) {
    const struct text_ctx *t = ctx;
    return api_add_text(c, "text", t->text, t->len);
}

static int fill_delta(cJSON *c, const void *ctx) {
    const struct text_ctx *d = ctx;
    cJSON *o = cJSON_AddObjectToObject(c, "delta");
    if (!o) return -1;
    if (d->first && !cJSON_AddStringToObject(o, "role", "assistant")) return -1;
    if (d->text || d->first) /* the first delta always carries content, "" if none yet */
        return api_add_text(o, "content", d->text, d->len);
    return 0;
}

char *el_api_with_truncation(char *json, int n_messages_dropped) {
    if (!json) return NULL;
    cJSON *root = cJSON_Parse(json);
    free(json);
    if (!cJSON_IsObject(root) || !cJSON_AddBoolToObject(root, "truncated", 1) ||
        !cJSON_AddNumberToObject(root, "n_messages_dropped", n_messages_dropped)) {
        cJSON_Delete(root);
        return NULL;
    }
    return api_print_and_delete(root);
}

char *el_api_with_member(char *json, const char *key, char *raw) {
    /* spliced as text before the closing brace: a parse and print would cut strings at an escaped NUL */
    size_t n = json ? strlen(json) : 0;
    while (n > 0 && (json[n - 1] == '\n' || json[n - 1] == ' ')) n--;
    cJSON *check = raw ? cJSON_Parse(raw) : NULL;
    bool ok = check && n >= 2 && json[0] == '{' && json[n - 1] == '}';
    cJSON_Delete(check);
    el_buf b = {0};
    ok = ok && el_buf_append(&b, json, n - 1) && (n == 2 || el_buf_str(&b, ",")) && el_api_json_string(&b, key, strlen(key)) &&
         el_buf_str(&b, ":") && el_buf_str(&b, raw) && el_buf_str(&b, "}");
    free(json);
    free(raw);
    if (!ok) {
        el_buf_free(&b);
        return NULL;
    }
    return b.p;
}

char *el_api_chat_response(const char *id, const char *model, long created, const char *fingerprint,
                           const char *content, size_t len, const char *finish, el_api_usage usage,
                           const char *logprobs) {
    struct text_ctx t = {content, len, false};
    return choice_body("chat.completion", id, model, created, fingerprint, fill_message, &t, finish, logprobs, &usage);
}

char *el_api_completion_response(const char *id, const char *model, long created, const char *fingerprint,
                                 const char *text, size_t len, const char *finish, el_api_usage usage,
                                 const char *logprobs) {
    struct text_ctx t = {text, len, false};
    return choice_body("text_completion", id, model, created, fingerprint, fill_text, &t, finish, logprobs, &usage);
}

/* The usage chunk: choices [] plus usage. */
static char *usage_chunk(const char *object, const char *id, const char *model, long created,
                         const char *fingerprint, const el_api_usage *usage) {
    cJSON *root = head(object, id, model, created, fingerprint);
    if (!root) return NULL;
    if (!cJSON_AddArrayToObject(root, "choices") || add_usage(root, *usage)) {
        cJSON_Delete(root);
        return NULL;
    }
    return api_print_and_delete(root);
}

char *el_api_chat_chunk(const char *id, const char *model, long created, const char *fingerprint,
                        const char *delta, size_t len, bool first, const char *finish, const el_api_usage *usage,
                        const char *logprobs) {
    if (usage) return usage_chunk("chat.completion.chunk", id, model, created, fingerprint, usage);
    struct text_ctx d = {delta, len, first};
    return choice_body("chat.completion.chunk", id, model, created, fingerprint, fill_delta, &d, finish, logprobs,
                       NULL);
}

static int fill_reasoning_delta(cJSON *c, const void *ctx) {
    const struct text_ctx *d = ctx;
    cJSON *o = cJSON_AddObjectToObject(c, "delta");
    if (!o) return -1;
    if (d->first && (!cJSON_AddStringToObject(o, "role", "assistant") || !cJSON_AddNullToObject(o, "content")))
        return -1;
    return api_add_text(o, "reasoning_content", d->text ? d->text : "", d->text ? d->len : 0);
}

char *el_api_chat_reasoning_chunk(const char *id, const char *model, long created, const char *fingerprint,
                                  const char *text, size_t len, bool first, const char *logprobs) {
    struct text_ctx d = {text, len, first};
    return choice_body("chat.completion.chunk", id, model, created, fingerprint, fill_reasoning_delta, &d, NULL,
                       logprobs, NULL);
}

char *el_api_chat_role_chunk(const char *id, const char *model, long created, const char *fingerprint) {
    cJSON *root = head("chat.completion.chunk", id, model, created, fingerprint);
    cJSON *arr = root ? cJSON_AddArrayToObject(root, "choices") : NULL;
    cJSON *c = arr ? cJSON_CreateObject() : NULL;
    if (!c) { cJSON_Delete(root); return NULL; }
    cJSON_AddItemToArray(arr, c);
    cJSON *d = cJSON_AddObjectToObject(c, "delta");
    if (!cJSON_AddNumberToObject(c, "index", 0) || !d || !cJSON_AddStringToObject(d, "role", "assistant") ||
        !cJSON_AddNullToObject(d, "content") || !cJSON_AddNullToObject(c, "finish_reason") ||
        !cJSON_AddNullToObject(c, "logprobs")) {
        cJSON_Delete(root);
        return NULL;
    }
    return api_print_and_delete(root);
}

struct tools_ctx { const char *text; size_t len; const el_api_tool_calls *tc; const char *rtext; size_t rlen; };

static int fill_tool_message(cJSON *c, const void *ctx) {
    const struct tools_ctx *t = ctx;
    cJSON *m = cJSON_AddObjectToObject(c, "message");
    if (!m || !cJSON_AddStringToObject(m, "role", "assistant")) return -1;
    if (t->text ? api_add_text(m, "content", t->text, t->len) : !cJSON_AddNullToObject(m, "content")) return -1;
    if (t->rtext && api_add_text(m, "reasoning_content", t->rtext, t->rlen)) return -1;
    if (!t->tc || t->tc->n <= 0) return 0;
    cJSON *arr = cJSON_AddArrayToObject(m, "tool_calls");
    if (!arr) return -1;
    for (int i = 0; i < t->tc->n; i++) {
        const el_tool_call_out *call = &t->tc->calls[i];
        cJSON *o = cJSON_CreateObject(), *fn = NULL;
        if (!o) return -1;
        cJSON_AddItemToArray(arr, o);
        if (api_add_str_or_null(o, "id", t->tc->ids[i]) || !cJSON_AddStringToObject(o, "type", "function") ||
            !(fn = cJSON_AddObjectToObject(o, "function")) || api_add_str_or_null(fn, "name", call->name) ||
            api_add_text(fn, "arguments", call->arguments, strlen(call->arguments)))
            return -1;
    }
    return 0;
}

char *el_api_chat_response_tools(const char *id, const char *model, long created, const char *fingerprint,
                                 const char *content, size_t len, const char *reasoning, size_t rlen,
                                 const el_api_tool_calls *tc, const char *finish, el_api_usage usage,
                                 const char *logprobs) {
    struct tools_ctx t = {content, len, tc, reasoning, rlen};
    return choice_body("chat.completion", id, model, created, fingerprint, fill_tool_message, &t, finish, logprobs,
                       &usage);
}

struct tool_delta { int index; const char *call_id, *name, *args; size_t args_len; };

static int fill_tool_delta(cJSON *c, const void *ctx) {
    const struct tool_delta *d = ctx;
    cJSON *o = cJSON_AddObjectToObject(c, "delta");
    cJSON *arr = o ? cJSON_AddArrayToObject(o, "tool_calls") : NULL;
    cJSON *tc = arr ? cJSON_CreateObject() : NULL, *fn = NULL;
    if (!tc) return -1;
    cJSON_AddItemToArray(arr, tc);
    if (!cJSON_AddNumberToObject(tc, "index", d->index)) return -1;
    if (d->call_id && (api_add_str_or_null(tc, "id", d->call_id) || !cJSON_AddStringToObject(tc, "type", "function")))
        return -1;
    if (!(fn = cJSON_AddObjectToObject(tc, "function"))) return -1;
    if (d->name && api_add_str_or_null(fn, "name", d->name)) return -1;
    return api_add_text(fn, "arguments", d->args ? d->args : "", d->args ? d->args_len : 0);
}

char *el_api_chat_tool_chunk(const char *id, const char *model, long created, const char *fingerprint, int index,
                             const char *call_id, const char *name, const char *args, size_t args_len) {
    struct tool_delta d = {index, call_id, name, args, args_len};
    return choice_body("chat.completion.chunk", id, model, created, fingerprint, fill_tool_delta, &d, NULL, NULL,
                       NULL);
}

char *el_api_completion_chunk(const char *id, const char *model, long created, const char *fingerprint,
                              const char *text, size_t len, const char *finish, const el_api_usage *usage,
                              const char *logprobs) {
    if (usage) return usage_chunk("text_completion", id, model, created, fingerprint, usage);
    struct text_ctx t = {text, len, false};
    return choice_body("text_completion", id, model, created, fingerprint, fill_text, &t, finish, logprobs, NULL);
}

/* ---- logprobs --------------------------------------------------------------- */

/* A log-probability as JSON: finite, or -9999 for -inf (JSON has no infinity). */
bool api_put_lp(el_buf *b, float lp) {
    char num[32];
    int k = snprintf(num, sizeof num, "%.9g", isfinite(lp) ? (double)lp : -9999.0);
    return el_buf_append(b, num, (size_t)k);
}

bool api_put_bytes(el_buf *b, const char *s, size_t n) {
    bool ok = el_buf_str(b, "[");
    for (size_t i = 0; ok && i < n; i++) {
        char num[8];
        int k = snprintf(num, sizeof num, i ? ",%u" : "%u", (unsigned)(unsigned char)s[i]);
        ok = el_buf_append(b, num, (size_t)k);
    }
    return ok && el_buf_str(b, "]");
}

/* Unicode code points of text once sanitised (as the client sees it). */
static size_t n_code_points(const char *s, size_t n) {
    el_buf c = {0};
    size_t cps = 0;
    if (el_utf8_sanitize(s, n, &c))
        for (size_t i = 0; i < c.len; i++) cps += ((unsigned char)c.p[i] & 0xC0) != 0x80;
    el_buf_free(&c);
    return cps;
}

char *el_api_logprobs_json(el_api_kind kind, const el_api_token_lp *t, int n, size_t *offset) {
    el_buf b = {0};
    bool ok = true;
    if (kind == EL_API_CHAT) {
        ok = el_buf_str(&b, "{\"content\":[");
        for (int i = 0; ok && i < n; i++) {
            ok = el_buf_str(&b, i ? ",{\"token\":" : "{\"token\":") && el_api_json_string(&b, t[i].text, t[i].len) &&
                 el_buf_str(&b, ",\"logprob\":") && api_put_lp(&b, t[i].logprob) && el_buf_str(&b, ",\"bytes\":") &&
                 api_put_bytes(&b, t[i].text, t[i].len) && el_buf_str(&b, ",\"top_logprobs\":[");
            for (int k = 0; ok && k < t[i].n_top; k++) {
                const el_api_top_lp *e = &t[i].top[k];
                ok = el_buf_str(&b, k ? ",{\"token\":" : "{\"token\":") && el_api_json_string(&b, e->text, e->len) &&
                     el_buf_str(&b, ",\"logprob\":") && api_put_lp(&b, e->logprob) && el_buf_str(&b, ",\"bytes\":") &&
                     api_put_bytes(&b, e->text, e->len) && el_buf_str(&b, "}");
            }
            if (ok) ok = el_buf_str(&b, "]}");
        }
        if (ok) ok = el_buf_str(&b, "],\"refusal\":null}");
    } else {
        size_t off = offset ? *offset : 0;
        ok = el_buf_str(&b, "{\"tokens\":[");
        for (int i = 0; ok && i < n; i++)
            ok = (!i || el_buf_str(&b, ",")) && el_api_json_string(&b, t[i].text, t[i].len);
        if (ok) ok = el_buf_str(&b, "],\"token_logprobs\":[");
        for (int i = 0; ok && i < n; i++) ok = (!i || el_buf_str(&b, ",")) && api_put_lp(&b, t[i].logprob);
        if (ok) ok = el_buf_str(&b, "],\"top_logprobs\":[");
        for (int i = 0; ok && i < n; i++) {
            ok = el_buf_str(&b, i ? ",{" : "{");
            for (int k = 0; ok && k < t[i].n_top; k++)
                ok = (!k || el_buf_str(&b, ",")) && el_api_json_string(&b, t[i].top[k].text, t[i].top[k].len) &&
                     el_buf_str(&b, ":") && api_put_lp(&b, t[i].top[k].logprob);
            if (ok) ok = el_buf_str(&b, "}");
        }
        if (ok) ok = el_buf_str(&b, "],\"text_offset\":[");
        for (int i = 0; ok && i < n; i++) {
            char num[24];
            int k = snprintf(num, sizeof num, i ? ",%zu" : "%zu", off);
            ok = el_buf_append(&b, num, (size_t)k);
            off += n_code_points(t[i].text, t[i].len);
        }
        if (ok) ok = el_buf_str(&b, "]}");
        if (offset) *offset = off;
    }
    if (!ok) { el_buf_free(&b); return NULL; }
    return b.p;
}
