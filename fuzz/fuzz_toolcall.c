/*
 * fuzz_toolcall.c — libFuzzer target for tool calls (src/structured/toolcall.c):
 * el_toolcall_parse on generated text (outside bytes), el_tool_pydumps, the
 * call grammar composed from a schema, and tool rendering in runtime/chat.c.
 *
 * The first byte picks the family (chatml, llama3, gemma, or one without
 * tool calls); the rest is the model's reply (chatml's includes a bare JSON
 * call without tags). Parsing never fails except out
 * of memory, never yields more than EL_TOOL_MAX_CALLS calls, every call names
 * one of the offered tools and its arguments parse back as a JSON object;
 * content, when present, is non-empty, NUL-terminated at content_len and no
 * longer than twice the input (pieces and a "\n" after each). Each
 * call's arguments, dumped Python-style (el_tool_pydumps, compact and indent
 * 4), parse back with the same compact form. The input as a JSON Schema for a
 * tool's parameters: when the composed call grammar (or, for inputs of odd
 * length, tool_choice "auto"'s lazy one, with its triggers) is produced for
 * a tool family, it compiles. The reply split at NULs into a tool result, a call
 * (its arguments) and a tool definition renders (el_chat_render_tools) with
 * sorted template ranges inside the text, and the content pieces lie outside
 * every template range.
 */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/chat.h"
#include "runtime/grammar.h"
#include "structured/toolcall.h"

#define REQUIRE(c) do { if (!(c)) { fprintf(stderr, "invariant failed: %s\n", #c); abort(); } } while (0)

static const el_chat_family FAMS[] = {EL_CHAT_CHATML, EL_CHAT_LLAMA3, EL_CHAT_GEMMA, EL_CHAT_PHI3};

static void check_parse(el_chat_family f, const char *text, size_t n) {
    el_tool_def defs[] = {{"f", "{}"}, {"get_weather", "{}"}, {"a-b_c", "{}"}};
    el_toolcall_result r;
    if (el_toolcall_parse(f, text, n, defs, 3, &r)) return; /* out of memory only */
    REQUIRE(r.n_calls >= 0 && r.n_calls <= EL_TOOL_MAX_CALLS);
    if (!el_chat_family_has_tools(f)) REQUIRE(r.n_calls == 0);
    for (int i = 0; i < r.n_calls; i++) {
        bool known = false;
        for (int k = 0; k < 3; k++) known |= !strcmp(r.calls[i].name, defs[k].name);
        REQUIRE(known);
        cJSON *a = cJSON_Parse(r.calls[i].arguments);
        REQUIRE(cJSON_IsObject(a));
        char *py = el_tool_pydumps(a, -1), *py4 = el_tool_pydumps(a, 4);
        if (py && py4) {
            cJSON *b = cJSON_Parse(py), *c = cJSON_Parse(py4);
            char *pb = b ? cJSON_PrintUnformatted(b) : NULL, *pc = c ? cJSON_PrintUnformatted(c) : NULL;
            char *pa = cJSON_PrintUnformatted(a);
            /* NaN / infinities cannot come out of cJSON's parser, so the dump is JSON again */
            REQUIRE(b && c);
            if (pa && pb && pc) REQUIRE(!strcmp(pa, pb) && !strcmp(pa, pc));
            free(pa);
            free(pb);
            free(pc);
            cJSON_Delete(b);
            cJSON_Delete(c);
        }
        free(py);
        free(py4);
        cJSON_Delete(a);
    }
    REQUIRE((r.content != NULL) == (r.content_len > 0));
    if (r.content) REQUIRE(r.content_len <= 2 * n && r.content[r.content_len] == 0); /* pieces + "\n" each */
    el_toolcall_result_free(&r);
}

static void check_grammar(el_chat_family f, const char *text, size_t n) {
    char *schema = malloc(n + 1);
    if (!schema) return;
    memcpy(schema, text, n);
    schema[n] = 0;
    cJSON *j = cJSON_ParseWithLength(text, n);
    if (cJSON_IsObject(j)) {
        el_tool_def defs[] = {{"t", schema}, {"u", "{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"integer\"}}}"}};
        el_error e = {0};
        const char *const *trig = NULL; /* odd lengths: tool_choice "auto"'s lazy grammar */
        char *g = n % 2 ? el_toolcall_grammar_lazy(f, defs, 2, true, &trig, &e) : el_toolcall_grammar(f, defs, 2, -1, true, &e);
        if (g && n % 2) REQUIRE(trig && trig[0]);
        if (!el_chat_family_has_tools(f)) REQUIRE(!g && e.code == EL_ERR_INVALID_ARG);
        if (g) {
            el_grammar *cg = el_grammar_parse(g, strlen(g), &e);
            REQUIRE(cg || e.code == EL_ERR_GRAMMAR || e.code == EL_ERR_NOMEM); /* limits only */
            el_grammar_free(cg);
            free(g);
        } else {
            REQUIRE(e.code != 0 && e.msg[0]);
        }
    }
    cJSON_Delete(j);
    free(schema);
}

static bool in_tmpl(const el_chat_text *t, size_t at) {
    for (int i = 0; i < t->n_tmpl; i++)
        if (at >= t->tmpl[i][0] && at < t->tmpl[i][1]) return true;
    return false;
}

static void check_render(el_chat_family f, const char *text, size_t n) {
    char *copy = malloc(n + 1);
    if (!copy) return;
    memcpy(copy, text, n);
    copy[n] = 0;
    const char *piece[3] = {"", "", ""};
    int np = 0;
    for (char *p = copy; np < 3;) {
        piece[np++] = p;
        size_t l = strlen(p);
        if (p + l >= copy + n) break;
        p += l + 1;
    }
    el_chat_tool_call call = {"id", "f", piece[1]};
    el_chat_tool tool = {piece[2], piece[2]};
    el_chat_msg msgs[] = {
        {.role = "system", .content = "s"},
        {.role = "user", .content = "u"},
        {.role = "assistant", .content = piece[0], .tool_calls = &call, .n_tool_calls = 1},
        {.role = "tool", .content = piece[0]},
    };
    el_chat_text t;
    int rc = el_chat_render_tools(f, msgs, 4, &tool, 1, n % 2 == 0, &t);
    if (!el_chat_family_has_tools(f)) REQUIRE(rc == -1);
    if (rc == 0) {
        REQUIRE(strlen(t.text) == t.len);
        for (int i = 0; i < t.n_tmpl; i++)
            REQUIRE(t.tmpl[i][0] < t.tmpl[i][1] && t.tmpl[i][1] <= t.len && (i == 0 || t.tmpl[i - 1][1] < t.tmpl[i][0]));
        /* the arguments text appears verbatim as content (chatml and gemma write it unchanged) */
        if (f != EL_CHAT_LLAMA3 && piece[1][0]) {
            const char *at = strstr(t.text, piece[1]);
            REQUIRE(at != NULL);
        }
        /* the tool result (unchanged in chatml and gemma, untrimmed in chatml): all its bytes are content */
        if (f == EL_CHAT_CHATML && piece[0][0]) {
            const char *resp = t.text; /* the template's opener (content may hold the same text) */
            while ((resp = strstr(resp, "<tool_response>\n")) != NULL && !in_tmpl(&t, (size_t)(resp - t.text))) resp++;
            REQUIRE(resp);
            size_t off = (size_t)(resp - t.text) + 16;
            for (size_t b = 0; b < strlen(piece[0]); b++) REQUIRE(!in_tmpl(&t, off + b));
        }
        el_chat_text_free(&t);
    }
    free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    el_chat_family f = FAMS[data[0] % 4];
    const char *text = (const char *)data + 1;
    size_t n = size - 1;
    check_parse(f, text, n);
    check_grammar(f, text, n);
    check_render(f, text, n);
    return 0;
}
