/*
 * fuzz_toolformat.c — libFuzzer target for the per-family tool-call formats
 * (src/structured/toolformat.c).
 *
 * The first byte picks the format (low 4 bits, every el_tool_format and one
 * past them) and the reasoning_format (next 2 bits); the rest is a model's
 * reply. Parsing never fails except out of memory, never yields more than
 * EL_TOOL_MAX_CALLS calls; every call's name is 1..64 of [A-Za-z0-9_.-] and
 * its arguments parse back as a JSON object; content and reasoning, when
 * present, are non-empty, NUL-terminated at their length and no longer than
 * twice the input (pieces and a "\n" between); with reasoning_format none no reasoning comes out (the
 * <think> split and the formats' own channels are all off). The reply as a
 * chat template: el_tool_format_detect answers a known format.
 */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "structured/toolformat.h"

#define REQUIRE(c) do { if (!(c)) { fprintf(stderr, "invariant failed: %s\n", #c); abort(); } } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    el_tool_format f = (el_tool_format)(data[0] & 15);
    if (f > EL_TF_GPT_OSS + 1) f = EL_TF_HERMES;
    el_reasoning_format rf = (el_reasoning_format)((data[0] >> 4) % 3);
    const char *text = (const char *)data + 1;
    size_t n = size - 1;
    el_tool_parsed r;
    if (el_tool_format_parse(f, rf, text, n, &r)) return 0; /* out of memory only */
    REQUIRE(r.n_calls >= 0 && r.n_calls <= EL_TOOL_MAX_CALLS);
    for (int i = 0; i < r.n_calls; i++) {
        size_t l = strlen(r.calls[i].name);
        REQUIRE(l >= 1 && l <= EL_TOOL_MAX_NAME);
        REQUIRE(strspn(r.calls[i].name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") == l);
        cJSON *a = cJSON_Parse(r.calls[i].arguments);
        REQUIRE(cJSON_IsObject(a));
        cJSON_Delete(a);
    }
    REQUIRE((r.content != NULL) == (r.content_len > 0) && (r.reasoning != NULL) == (r.reasoning_len > 0));
    if (r.content) REQUIRE(r.content_len <= 2 * n && r.content[r.content_len] == 0);
    if (r.reasoning) REQUIRE(r.reasoning_len <= 2 * n && r.reasoning[r.reasoning_len] == 0);
    if (rf == EL_REASONING_NONE) REQUIRE(r.reasoning == NULL);
    el_tool_parsed_free(&r);
    char *t = malloc(n + 1);
    if (!t) return 0;
    memcpy(t, text, n);
    t[n] = 0;
    el_tool_format d = el_tool_format_detect(t);
    REQUIRE(d >= EL_TF_NONE && d <= EL_TF_GPT_OSS && strcmp(el_tool_format_name(d), "unknown"));
    free(t);
    return 0;
}
