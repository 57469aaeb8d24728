/*
 * fuzz_request.c — libFuzzer target for the OpenAI request parser and the
 * response builders (src/service/api.c).
 *
 * Every input is parsed as both a chat and a completion body. On failure the
 * error must be a 400/413 with a type and a message, and its JSON must parse.
 * On success the request must satisfy every promise of api.h (ranges, roles,
 * stop list, valid UTF-8 strings), and responses and chunks built from the
 * parsed strings must parse back as JSON with the same strings. Finally the
 * raw input (possibly invalid UTF-8) is fed to the builders as generated
 * text: their output must still be valid UTF-8 JSON.
 */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/api.h"

#define REQUIRE(c) do { if (!(c)) { fprintf(stderr, "invariant failed: %s\n", #c); abort(); } } while (0)

/* Independent strict UTF-8 check (the oracle; not api.c's). */
static int utf8_ok(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        uint32_t cp;
        size_t l;
        if (c < 0x80) { i++; continue; }
        if ((c & 0xE0) == 0xC0) { l = 2; cp = c & 0x1F; }
        else if ((c & 0xF0) == 0xE0) { l = 3; cp = c & 0x0F; }
        else if ((c & 0xF8) == 0xF0) { l = 4; cp = c & 0x07; }
        else return 0;
        if (i + l > n) return 0;
        for (size_t k = 1; k < l; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return 0;
            cp = cp << 6 | (s[i + k] & 0x3F);
        }
        static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < min[l] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
        i += l;
    }
    return 1;
}
static int str_ok(const char *s) { return s && utf8_ok((const unsigned char *)s, strlen(s)); }

/* s must be valid UTF-8 JSON; returns the parsed tree (caller deletes). */
static cJSON *reparse(char *s) {
    REQUIRE(s != NULL);
    REQUIRE(str_ok(s));
    REQUIRE(!strchr(s, '\n') && !strchr(s, '\r')); /* SSE-safe: one line */
    cJSON *p = cJSON_Parse(s);
    REQUIRE(p != NULL);
    free(s);
    return p;
}

static const char *first_text(const cJSON *p, const char *inner, const char *key) {
    const cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(p, "choices"), 0);
    if (inner) c = cJSON_GetObjectItemCaseSensitive(c, inner);
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(c, key);
    REQUIRE(cJSON_IsString(t));
    return t->valuestring;
}

static void check_request(const el_api_request *r, el_api_kind kind) {
    REQUIRE(r->kind == kind);
    if (kind == EL_API_CHAT) {
        REQUIRE(r->n_msgs > 0 && r->msgs && !r->prompt);
        for (int i = 0; i < r->n_msgs; i++) {
            const char *role = r->msgs[i].role;
            REQUIRE(role && (!strcmp(role, "system") || !strcmp(role, "user") || !strcmp(role, "assistant")));
            REQUIRE(str_ok(r->msgs[i].content));
        }
    } else {
        REQUIRE(r->n_msgs == 0 && !r->msgs && str_ok(r->prompt));
    }
    REQUIRE(!r->model || str_ok(r->model));
    REQUIRE(r->max_tokens == -1 || (r->max_tokens >= 1 && r->max_tokens <= (1 << 20)));
    REQUIRE(r->temperature >= 0 && r->temperature <= 2);
    REQUIRE(r->top_p > 0 && r->top_p <= 1);
    REQUIRE(r->presence_penalty >= -2 && r->presence_penalty <= 2);
    REQUIRE(r->frequency_penalty >= -2 && r->frequency_penalty <= 2);
    REQUIRE(r->n_stop >= 0 && r->n_stop <= EL_API_MAX_STOP && r->stop[r->n_stop] == NULL);
    for (int i = 0; i < r->n_stop; i++) {
        size_t l = r->stop[i] ? strlen(r->stop[i]) : 0;
        REQUIRE(l >= 1 && l <= 256 && str_ok(r->stop[i]));
    }
}

static void round_trip(const el_api_request *r) {
    const char *model = r->model ? r->model : "";
    const char *text = r->kind == EL_API_CHAT ? r->msgs[r->n_msgs - 1].content : r->prompt;
    const char *fp = r->n_stop ? r->stop[0] : NULL;
    el_api_usage u = {r->max_tokens, r->n_msgs};
    cJSON *p;

    p = reparse(el_api_chat_response(model, model, (long)r->seed, fp, text, "stop", u));
    REQUIRE(!strcmp(first_text(p, "message", "content"), text));
    REQUIRE(!strcmp(cJSON_GetObjectItemCaseSensitive(p, "model")->valuestring, model));
    cJSON_Delete(p);
    p = reparse(el_api_completion_response("cmpl-x", model, 0, fp, text, "length", u));
    REQUIRE(!strcmp(first_text(p, NULL, "text"), text));
    cJSON_Delete(p);
    p = reparse(el_api_chat_chunk("chatcmpl-x", model, 1, fp, text, r->stream, NULL, NULL));
    REQUIRE(!strcmp(first_text(p, "delta", "content"), text));
    cJSON_Delete(p);
    p = reparse(el_api_chat_chunk("chatcmpl-x", model, 1, fp, NULL, false, "length", NULL));
    cJSON_Delete(p);
    p = reparse(el_api_chat_chunk("chatcmpl-x", model, 1, fp, NULL, false, NULL, &u));
    REQUIRE(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(p, "choices")) == 0);
    cJSON_Delete(p);
    p = reparse(el_api_completion_chunk("cmpl-x", model, 1, fp, text, NULL, NULL));
    REQUIRE(!strcmp(first_text(p, NULL, "text"), text));
    cJSON_Delete(p);
    p = reparse(el_api_completion_chunk("cmpl-x", model, 1, fp, NULL, NULL, &u));
    cJSON_Delete(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    for (int k = 0; k < 2; k++) {
        el_api_kind kind = k ? EL_API_COMPLETION : EL_API_CHAT;
        el_api_request r;
        el_api_error e;
        memset(&e, 0, sizeof e);
        if (el_api_parse(kind, (const char *)data, size, &r, &e) == 0) {
            check_request(&r, kind);
            round_trip(&r);
        } else {
            REQUIRE(e.status == 400 || e.status == 413);
            REQUIRE(e.type && e.message[0]);
            REQUIRE(r.msgs == NULL && r.prompt == NULL && r.model == NULL && r.stop[0] == NULL);
            cJSON *p = reparse(el_api_error_json(&e));
            cJSON_Delete(p);
        }
        el_api_request_free(&r);
        el_api_request_free(&r);
    }
    /* raw bytes as generated text: output must still be valid UTF-8 JSON */
    char *raw = malloc(size + 1);
    if (!raw) return 0;
    memcpy(raw, data, size);
    raw[size] = 0;
    el_api_usage u = {1, 2};
    cJSON_Delete(reparse(el_api_chat_chunk(raw, raw, 1, raw, raw, true, NULL, NULL)));
    cJSON_Delete(reparse(el_api_completion_response(raw, raw, 1, raw, raw, raw, u)));
    free(raw);
    return 0;
}
