/*
 * fuzz_plan.c — libFuzzer target for the capacity planner's outside-input
 * parsers and its arithmetic (src/memory/capacity.c).
 *
 * The input is split at the first NUL: the part before goes to
 * el_parse_size, the part after to el_parse_shape (both NUL-terminated
 * copies; the whole input also goes to each). A failure must return -1 with a
 * non-empty message and leave the output untouched; a size that parses must
 * round-trip for plain byte counts; a shape that parses must keep the bounds
 * capacity.h promises. Every accepted shape is then planned with the parsed
 * size as weights against a few budgets: KV bytes grow with the context,
 * el_mem_max_ctx's answer fits and one more token does not, el_mem_max_sessions
 * sessions fit and one more does not — all without overflow (UBSan) or abort.
 * Each part is also a KV cache type name (el_cache_type_parse, -ctk/-ctv):
 * accepted only as one of the four names up to case; with a shape, the
 * mixed-type plan and admission are checked too.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "edgellm.h"
#include "memory/capacity.h"

#define REQUIRE(c) do { if (!(c)) { fprintf(stderr, "invariant failed: %s\n", #c); abort(); } } while (0)

static int parse_size(const char *t, uint64_t *v) {
    char err[256] = "";
    uint64_t out = 12345;
    const int rc = el_parse_size(t, &out, err, sizeof err);
    REQUIRE(rc == 0 || rc == -1);
    if (rc) {
        REQUIRE(err[0] != 0);
        REQUIRE(out == 12345);
        return -1;
    }
    /* a plain decimal byte count is itself */
    size_t n = strlen(t), i = 0;
    while (i < n && t[i] >= '0' && t[i] <= '9') i++;
    if (i == n && n < 19) REQUIRE(out == strtoull(t, NULL, 10));
    *v = out;
    return 0;
}

static int parse_shape(const char *t, el_mem_shape *s) {
    char err[256] = "";
    el_mem_shape out;
    memset(&out, 0x5a, sizeof out);
    const el_mem_shape before = out;
    const int rc = el_parse_shape(t, &out, err, sizeof err);
    REQUIRE(rc == 0 || rc == -1);
    if (rc) {
        REQUIRE(err[0] != 0);
        REQUIRE(memcmp(&out, &before, sizeof out) == 0);
        return -1;
    }
    REQUIRE(out.n_layer >= 1 && out.n_layer <= 65536);
    REQUIRE(out.n_head_kv >= 1 && out.n_head_kv <= 65536);
    REQUIRE(out.head_dim >= 1 && out.head_dim <= 65536);
    REQUIRE(out.n_layer_swa >= 0 && out.n_layer_swa <= out.n_layer);
    REQUIRE((out.n_layer_swa > 0) == (out.n_swa > 0));
    REQUIRE(out.n_ctx_max >= 0);
    *s = out;
    return 0;
}

static void plan(const el_mem_shape *s, uint64_t weights) {
    static const uint64_t budgets[] = {0, 1, 1ull << 20, 8ull << 30, 1ull << 50, UINT64_MAX - 1};
    for (int t = 0; t < EL_KV_TYPE_COUNT; t++) {
        uint64_t prev = 0;
        for (int c = 1; c <= 1 << 24; c *= 64) {
            const uint64_t kv = el_kv_bytes(s, (el_kv_type)t, c, 512);
            REQUIRE(kv >= prev);
            prev = kv;
        }
        for (size_t b = 0; b < sizeof budgets / sizeof budgets[0]; b++) {
            el_mem_request r = {.shape = *s, .weights = weights, .budget = budgets[b], .n_batch = 512};
            const int mc = el_mem_max_ctx(&r, (el_kv_type)t);
            REQUIRE(mc >= 0 && mc <= (1 << 24));
            if (mc > 0) {
                const uint64_t need = el_mem_session_bytes(&r, (el_kv_type)t, mc);
                REQUIRE(need != UINT64_MAX && weights <= r.budget && need <= r.budget - weights);
                const int cap = s->n_ctx_max > 0 && s->n_ctx_max < (1 << 24) ? s->n_ctx_max : (1 << 24);
                if (mc < cap) {
                    const uint64_t more = el_mem_session_bytes(&r, (el_kv_type)t, mc + 1);
                    REQUIRE(more == UINT64_MAX || weights + more > r.budget || more > r.budget - weights);
                }
            }
            const int ctx = s->n_ctx_max > 0 && s->n_ctx_max < 4096 ? s->n_ctx_max : 4096;
            const uint64_t ns = el_mem_max_sessions(&r, (el_kv_type)t, ctx);
            if (ns > 0) {
                const uint64_t one = el_mem_session_bytes(&r, (el_kv_type)t, ctx);
                REQUIRE(one != UINT64_MAX && weights <= r.budget);
                REQUIRE(ns <= (r.budget - weights) / one && ns + 1 > (r.budget - weights) / one);
            }
            char msg[512];
            if (t == EL_KV_F16 && el_mem_admit(&r, ctx, 2, msg, sizeof msg)) REQUIRE(msg[0] != 0);
        }
    }
}

/* A KV cache type name (-ctk/-ctv): -1, or one of the four types whose name
 * is the input up to ASCII case. */
static int parse_cache_type(const char *t) {
    const int c = el_cache_type_parse(t);
    REQUIRE(c == -1 || c == EL_CACHE_F16 || c == EL_CACHE_BF16 || c == EL_CACHE_Q8_0 || c == EL_CACHE_Q4_0);
    if (c > 0) {
        const char *n = el_cache_type_name(c);
        REQUIRE(n && strlen(n) == strlen(t));
        for (size_t i = 0; n[i]; i++) REQUIRE(n[i] == (t[i] >= 'A' && t[i] <= 'Z' ? t[i] + 32 : t[i]));
    }
    return c;
}

/* Admission with mixed cache types: the typed plan is between the cheapest and the dearest single type. */
static void plan_mixed(const el_mem_shape *s, int ck, int cv) {
    const el_kv_type tk = el_kv_type_of_cache(ck), tv = el_kv_type_of_cache(cv);
    REQUIRE(tk != EL_KV_TYPE_COUNT && tv != EL_KV_TYPE_COUNT);
    el_mem_request r = {.shape = *s, .weights = 1, .budget = 8ull << 30, .n_batch = 512, .type_k = ck, .type_v = cv};
    const int ctx = s->n_ctx_max > 0 && s->n_ctx_max < 4096 ? s->n_ctx_max : 4096;
    const uint64_t kv = el_mem_session_bytes_kv(&r, tk, tv, ctx), a = el_mem_session_bytes(&r, tk, ctx),
                   b = el_mem_session_bytes(&r, tv, ctx);
    if (a != UINT64_MAX && b != UINT64_MAX) REQUIRE(kv >= (a < b ? a : b) && kv <= (a > b ? a : b));
    REQUIRE(el_mem_max_ctx_kv(&r, tk, tv) >= 0);
    char msg[512];
    if (el_mem_admit(&r, ctx, 1, msg, sizeof msg)) REQUIRE(msg[0] != 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 4096) return 0;
    char *all = malloc(size + 1);
    if (!all) return 0;
    memcpy(all, data, size);
    all[size] = 0;
    const size_t first = strlen(all); /* up to the first NUL */
    const char *second = first < size ? all + first + 1 : "";
    uint64_t w = 0, dummy;
    el_mem_shape s, s2;
    const int have_w = parse_size(all, &w) == 0;
    (void)parse_size(second, &dummy);
    const int have_s = parse_shape(second, &s) == 0;
    if (parse_shape(all, &s2) == 0) plan(&s2, have_w ? w : 1);
    if (have_s) plan(&s, have_w ? w : 0);
    const int ck = parse_cache_type(all), cv = parse_cache_type(second);
    if (have_s && ck > 0) plan_mixed(&s, ck, cv > 0 ? cv : EL_CACHE_F16);
    free(all);
    return 0;
}
