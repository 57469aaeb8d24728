/*
 * fuzz_grammar.c — libFuzzer target for the structured-output compilers:
 * el_grammar_parse (GBNF text, src/runtime/grammar.c) and
 * el_json_schema_text_to_gbnf (JSON Schema, src/structured/json_schema.c).
 *
 * The input up to its first NUL is GBNF; everything (and the part after the
 * NUL) is also a JSON schema. A refused grammar/schema has EL_ERR_GRAMMAR (or
 * EL_ERR_NOMEM) and a message; an accepted grammar gets a matcher that is fed
 * the bytes after the NUL one at a time (accept or check, both must agree:
 * check == 1 exactly when accept succeeds, and a refused accept leaves the
 * state as it was) and a mask over a small vocabulary made of slices of the
 * input that must equal per-token checks. Every GBNF text a schema compiles
 * to must itself compile (or fail only on a matcher/compile limit, with a
 * message) — the converter never emits malformed GBNF.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/grammar.h"
#include "structured/json_schema.h"

#define REQUIRE(c) do { if (!(c)) { fprintf(stderr, "invariant failed: %s\n", #c); abort(); } } while (0)

static void run_grammar(const char *text, size_t n, const uint8_t *feed, size_t nf) {
    el_error e = {0};
    el_grammar *g = el_grammar_parse(text, n, &e);
    if (!g) {
        REQUIRE((e.code == EL_ERR_GRAMMAR || e.code == EL_ERR_NOMEM) && e.msg[0]);
        return;
    }
    el_gmatch *m = el_gmatch_new(g, &e);
    if (!m) {
        REQUIRE(e.code == EL_ERR_GRAMMAR || e.code == EL_ERR_NOMEM);
        el_grammar_free(g);
        return;
    }
    /* a tiny vocabulary: 1..3-byte slices of the feed */
    enum { NT = 24 };
    const char *tt[NT];
    int tl[NT];
    for (int i = 0; i < NT; i++) {
        size_t at = nf ? (size_t)(i * 7) % nf : 0;
        int l = 1 + i % 3;
        if (at + (size_t)l > nf) l = (int)(nf - at);
        tt[i] = (const char *)feed + at;
        tl[i] = l < 0 ? 0 : l;
    }
    el_gtrie *t = el_gtrie_new(NT, tt, tl);
    uint8_t mask[NT];
    for (size_t i = 0; i < nf && i < 64; i++) {
        if (t && i % 8 == 0) {
            int cnt = el_gmatch_mask(m, t, mask);
            if (cnt >= 0) {
                int want = 0;
                for (int k = 0; k < NT; k++) {
                    int c = tl[k] ? el_gmatch_check(m, tt[k], (size_t)tl[k]) : 0;
                    if (c < 0) { want = -1; break; }
                    REQUIRE((c == 1) == (mask[k] == 1));
                    want += c == 1;
                }
                REQUIRE(want < 0 || want == cnt);
            }
        }
        bool could_end = el_gmatch_can_end(m);
        int c = el_gmatch_check(m, (const char *)feed + i, 1);
        int r = el_gmatch_accept(m, (const char *)feed + i, 1, &e);
        if (c >= 0) REQUIRE((c == 1) == (r == 0));
        if (r != 0) REQUIRE(el_gmatch_can_end(m) == could_end); /* unchanged */
    }
    el_gtrie_free(t);
    el_gmatch_free(m);
    el_grammar_free(g);
}

static void run_schema(const char *text, size_t n) {
    el_error e = {0};
    char *gb = el_json_schema_text_to_gbnf(text, n, &e);
    if (!gb) {
        REQUIRE((e.code == EL_ERR_GRAMMAR || e.code == EL_ERR_NOMEM) && e.msg[0]);
        return;
    }
    el_grammar *g = el_grammar_parse(gb, strlen(gb), &e);
    if (!g) {
        /* only limits and left recursion through $ref cycles may refuse it */
        if (!(strstr(e.msg, "left recursion") || strstr(e.msg, "too large") || strstr(e.msg, "too many") ||
              strstr(e.msg, "more than") || strstr(e.msg, "nested deeper") || strstr(e.msg, "repetition count"))) {
            fprintf(stderr, "schema compiled to bad GBNF: %s\n%s\n", e.msg, gb);
            abort();
        }
    }
    el_grammar_free(g);
    free(gb);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t n1 = nul ? (size_t)(nul - data) : size;
    const uint8_t *rest = nul ? nul + 1 : data + size;
    size_t nr = size - n1 - (nul ? 1 : 0);
    run_grammar((const char *)data, n1, rest, nr);
    run_schema((const char *)data, size);
    if (nul) run_schema((const char *)rest, nr);
    return 0;
}
