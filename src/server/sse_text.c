/*
 * sse_text.c — the text of an OpenAI-compatible SSE stream (contract in
 * sse_text.h). Lines are assembled in one growing buffer (bounded by
 * EL_SSE_LINE_MAX) and each complete "data:" line is parsed with cJSON.
 */
#include "server/sse_text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

void el_sse_text_init(el_sse_text *p, bool chat) {
    memset(p, 0, sizeof *p);
    p->chat = chat;
}

void el_sse_text_free(el_sse_text *p) {
    free(p->line);
    p->line = NULL;
    p->len = p->cap = 0;
}

static void fail(el_sse_text *p, const char *code) {
    p->failed = true;
    snprintf(p->code, sizeof p->code, "%s", code);
}

static bool word_ok(const char *s, size_t max, bool digits) {
    size_t n = strlen(s);
    if (n == 0 || n > max) return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || *s == '_' || (digits && *s >= '0' && *s <= '9'))) return false;
    return true;
}

static void data_line(el_sse_text *p, const char *d, size_t n, el_sse_emit emit, void *user) {
    while (n && (*d == ' ' || *d == '\t')) d++, n--;
    while (n && (d[n - 1] == ' ' || d[n - 1] == '\t' || d[n - 1] == '\r')) n--;
    if (n == 6 && !memcmp(d, "[DONE]", 6)) {
        p->done = true;
        return;
    }
    const char *end = NULL;
    cJSON *o = cJSON_ParseWithLengthOpts(d, n, &end, 0);
    if (o && end) /* nothing but blanks may follow the object */
        while (end < d + n && (*end == ' ' || *end == '\t')) end++;
    if (!o || !cJSON_IsObject(o) || end != d + n) {
        cJSON_Delete(o);
        fail(p, "cloud_bad_response");
        return;
    }
    p->n_events++;
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(o, "error");
    if (e && !cJSON_IsNull(e)) {
        const cJSON *c = cJSON_IsObject(e) ? cJSON_GetObjectItemCaseSensitive(e, "code") : NULL;
        fail(p, cJSON_IsString(c) && word_ok(c->valuestring, sizeof p->code - 1, true) ? c->valuestring : "cloud_error");
        cJSON_Delete(o);
        return;
    }
    const cJSON *ch = cJSON_GetObjectItemCaseSensitive(o, "choices");
    if (ch && !cJSON_IsArray(ch)) {
        cJSON_Delete(o);
        fail(p, "cloud_bad_response");
        return;
    }
    const cJSON *c0 = ch ? cJSON_GetArrayItem(ch, 0) : NULL;
    if (c0) {
        if (!cJSON_IsObject(c0)) {
            cJSON_Delete(o);
            fail(p, "cloud_bad_response");
            return;
        }
        const cJSON *t = NULL;
        if (p->chat) {
            const cJSON *dl = cJSON_GetObjectItemCaseSensitive(c0, "delta");
            t = cJSON_IsObject(dl) ? cJSON_GetObjectItemCaseSensitive(dl, "content") : NULL;
        } else {
            t = cJSON_GetObjectItemCaseSensitive(c0, "text");
        }
        if (cJSON_IsString(t) && t->valuestring[0] && emit) emit(user, t->valuestring, strlen(t->valuestring));
        const cJSON *fr = cJSON_GetObjectItemCaseSensitive(c0, "finish_reason");
        if (cJSON_IsString(fr))
            snprintf(p->finish, sizeof p->finish, "%s", word_ok(fr->valuestring, sizeof p->finish - 1, false) ? fr->valuestring : "other");
    }
    cJSON_Delete(o);
}

bool el_sse_text_feed(el_sse_text *p, const char *bytes, size_t n, el_sse_emit emit, void *user) {
    for (size_t i = 0; i < n && !p->done && !p->failed; i++) {
        const char b = bytes[i];
        if (b != '\n') {
            if (p->len + 1 >= EL_SSE_LINE_MAX) {
                fail(p, "cloud_bad_response");
                break;
            }
            if (p->len + 1 >= p->cap) {
                size_t cap = p->cap ? p->cap * 2 : 256;
                if (cap > EL_SSE_LINE_MAX) cap = EL_SSE_LINE_MAX;
                char *nl = realloc(p->line, cap);
                if (!nl) {
                    fail(p, "out_of_memory");
                    break;
                }
                p->line = nl;
                p->cap = cap;
            }
            p->line[p->len++] = b;
            continue;
        }
        if (p->len >= 5 && !memcmp(p->line, "data:", 5)) data_line(p, p->line + 5, p->len - 5, emit, user);
        p->len = 0;
    }
    return !p->done && !p->failed;
}
