/*
 * fuzz_jinja.c — libFuzzer target for the Jinja chat-template engine
 * (src/runtime/jinja_*.c). The input up to its first NUL is a template; the
 * rest, when it parses as a JSON object, is its variables (else a fixed
 * conversation: messages with a tool call, tools, add_generation_prompt,
 * bos/eos). Small limits (steps, depth, output, string, memory) keep every
 * run short. Invariants: a refused template is EL_ERR_TEMPLATE with
 * "TemplateSyntaxError|TemplateAssertionError: line L, column C: ..."; a
 * failed render is EL_ERR_TEMPLATE with "<Class>: line L: ..."; a success
 * has at most max_output bytes and rendering again (a fresh context) gives
 * the same bytes. Seeds: fuzz/seeds-jinja/ (small templates of each
 * construct and a chat template).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "runtime/jinja.h"
#include "runtime/jinja_json.h"

#define REQUIRE(c) do { if (!(c)) { fprintf(stderr, "invariant failed: %s\n", #c); abort(); } } while (0)

static const char *FIXED =
    "{\"messages\":[{\"role\":\"system\",\"content\":\"S\"},{\"role\":\"user\",\"content\":\"hi \\u00e9\"},"
    "{\"role\":\"assistant\",\"content\":\"\",\"reasoning_content\":\"r\",\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\","
    "\"function\":{\"name\":\"f\",\"arguments\":{\"a\":1,\"b\":[true,null,1.5]}}}]},"
    "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"42\"}],"
    "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"description\":\"d\",\"parameters\":{\"type\":\"object\"}}}],"
    "\"add_generation_prompt\":true,\"bos_token\":\"<s>\",\"eos_token\":\"</s>\"}";

static int class_prefix(const char *m) {
    const char *c = strchr(m, ':');
    if (!c || c == m) return 0;
    for (const char *p = m; p < c; p++)
        if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z'))) return 0;
    return strncmp(c, ": line ", 7) == 0;
}

static char *render(const el_jinja *t, const cJSON *vars, size_t *len, el_error *err) {
    el_jinja_limits lim = {.max_output = 1 << 16, .max_string = 1 << 16, .max_memory = 16u << 20,
                           .max_steps = 200000, .max_depth = 40};
    el_jctx *c = el_jctx_new(&lim);
    REQUIRE(c);
    struct tm now = {.tm_year = 126, .tm_mon = 6, .tm_mday = 26, .tm_hour = 12};
    el_jctx_set_now(c, &now);
    char *out = NULL;
    *len = 0;
    if (el_jctx_set_json(c, vars) == 0) {
        int rc = el_jinja_render(t, c, &out, len, err);
        if (rc) {
            REQUIRE(rc == EL_ERR_TEMPLATE || rc == EL_ERR_NOMEM);
            REQUIRE(out == NULL && class_prefix(err->msg));
        } else REQUIRE(out && *len <= lim.max_output && out[*len] == 0);
    }
    el_jctx_free(c);
    return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t tlen = nul ? (size_t)(nul - data) : size;
    cJSON *vars = NULL;
    if (nul) vars = cJSON_ParseWithLength((const char *)nul + 1, size - tlen - 1);
    if (!cJSON_IsObject(vars)) {
        cJSON_Delete(vars);
        vars = cJSON_Parse(FIXED);
    }
    el_error err = {0};
    el_jinja *t = el_jinja_parse((const char *)data, tlen, &err);
    if (!t) {
        REQUIRE(err.code == EL_ERR_TEMPLATE || err.code == EL_ERR_NOMEM);
        REQUIRE(err.code == EL_ERR_NOMEM || strncmp(err.msg, "TemplateSyntaxError: ", 21) == 0 ||
                strncmp(err.msg, "TemplateAssertionError: ", 24) == 0);
        REQUIRE(err.code == EL_ERR_NOMEM || strstr(err.msg, "line ") != NULL);
    } else {
        size_t n1, n2;
        el_error e1 = {0}, e2 = {0};
        char *a = render(t, vars, &n1, &e1), *b = render(t, vars, &n2, &e2);
        REQUIRE((a == NULL) == (b == NULL));
        if (a) REQUIRE(n1 == n2 && memcmp(a, b, n1) == 0);
        else REQUIRE(strcmp(e1.msg, e2.msg) == 0 || strstr(e1.msg, "strftime") != NULL);
        free(a);
        free(b);
        el_jinja_free(t);
    }
    cJSON_Delete(vars);
    return 0;
}
