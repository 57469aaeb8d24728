/*
 * json_schema.c — JSON Schema → GBNF (contract in json_schema.h).
 *
 * Each schema node becomes one named rule (names from the JSON path, made
 * unique); shared building blocks (space, string, number, value, …) are added
 * once on demand. Whitespace between tokens is llama.cpp's bounded `space`
 * (nothing, one space, or 1-2 newlines and up to 20 blanks), so a model
 * cannot pad forever. Objects put required properties first in property
 * order, then the optional ones in property order, each optional one free to
 * be skipped: rest(i) ::= kv(i) ("," space rest(i+1))? | kv(i+1) … chains
 * (quadratic in the number of optional properties, bounded by the limits).
 * Extra properties (additionalProperties true / a schema) come last with keys
 * that differ from every declared key (a code-point trie of the declared keys
 * turned into "not one of these strings"; a key spelled with \u escapes is
 * treated as different). Integer ranges are exact: the decimal strings of
 * [lo, hi] split by length and by leading digit.
 */
#include "structured/json_schema.h"

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/utf8.h"

#define MAX_DEPTH 64
#define MAX_RULES 4096
#define MAX_TEXT (1u << 20)

typedef struct {
    char *p;
    size_t n, cap;
    bool oom;
} sbuf;

static void sb_add(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 64;
        while (nc < b->n + n + 1) nc *= 2;
        char *q = realloc(b->p, nc);
        if (!q) { b->oom = true; return; }
        b->p = q;
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}
static void sb_puts(sbuf *b, const char *s) { sb_add(b, s, strlen(s)); }
static void sb_printf(sbuf *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n >= sizeof tmp) n = (int)sizeof tmp - 1;
    sb_add(b, tmp, (size_t)n);
}

typedef struct {
    char *name, *body;
} rule;

typedef struct {
    char *ref, *name;
} refmap;

typedef struct {
    const cJSON *root;
    el_error *err;
    bool failed;
    rule *rules;
    int n_rules, cap_rules;
    refmap *refs;
    int n_refs, cap_refs;
    size_t text;
    int depth;
} gen;

static void fail(gen *g, const char *path, const char *fmt, ...) {
    if (g->failed) return;
    char m[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    el_set_error(g->err, EL_ERR_GRAMMAR, "json schema: at %s: %s", path && *path ? path : "/", m);
    g->failed = true;
}

static const rule *find_rule(const gen *g, const char *name) {
    for (int i = 0; i < g->n_rules; i++)
        if (!strcmp(g->rules[i].name, name)) return &g->rules[i];
    return NULL;
}

/* Adds name ::= body (a name in use with another body gets a -N suffix);
 * returns the rule's name (owned by g) or NULL. */
static const char *add_rule(gen *g, const char *base, const char *body) {
    if (g->failed) return NULL;
    char name[128];
    size_t k = 0;
    for (const char *s = base; *s && k < 80; s++) {
        char c = *s;
        name[k++] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ? c : '-';
    }
    if (k == 0) name[k++] = 'r';
    name[k] = 0;
    char cand[160];
    snprintf(cand, sizeof cand, "%s", name);
    for (int i = 1;; i++) {
        const rule *r = find_rule(g, cand);
        if (!r) break;
        if (!strcmp(r->body, body)) return r->name;
        snprintf(cand, sizeof cand, "%s-%d", name, i);
    }
    if (g->n_rules >= MAX_RULES) { fail(g, "", "the schema needs more than %d grammar rules", MAX_RULES); return NULL; }
    g->text += strlen(cand) + strlen(body) + 6;
    if (g->text > MAX_TEXT) { fail(g, "", "the grammar exceeds %u bytes", MAX_TEXT); return NULL; }
    if (g->n_rules == g->cap_rules) {
        int nc = g->cap_rules ? g->cap_rules * 2 : 32;
        rule *r = realloc(g->rules, sizeof *r * (size_t)nc);
        if (!r) { fail(g, "", "out of memory"); return NULL; }
        g->rules = r;
        g->cap_rules = nc;
    }
    rule *r = &g->rules[g->n_rules];
    r->name = strdup(cand);
    r->body = strdup(body);
    if (!r->name || !r->body) { free(r->name); free(r->body); fail(g, "", "out of memory"); return NULL; }
    g->n_rules++;
    return r->name;
}

/* reserve a name now, set its body later (for $ref recursion) */
static rule *reserve(gen *g, const char *base, const char *ref) {
    char ph[300];
    snprintf(ph, sizeof ph, "\x01%s", ref); /* placeholder body, unique per reference */
    const char *n = add_rule(g, base, ph);
    if (!n) return NULL;
    for (int i = 0; i < g->n_rules; i++)
        if (g->rules[i].name == n) return &g->rules[i];
    return NULL;
}

#define SPACE_RULE "| \" \" | \"\\n\"{1,2} [ \\t]{0,20}"
#define CHAR_RULE "[^\"\\\\\\x7F\\x00-\\x1F] | [\\\\] ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})"

/* adds a shared building block with its dependencies; returns its name */
static const char *prim(gen *g, const char *name) {
    if (!strcmp(name, "space")) return add_rule(g, "space", SPACE_RULE);
    if (!strcmp(name, "char")) return add_rule(g, "char", CHAR_RULE);
    if (!strcmp(name, "boolean")) { prim(g, "space"); return add_rule(g, "boolean", "(\"true\" | \"false\") space"); }
    if (!strcmp(name, "null")) { prim(g, "space"); return add_rule(g, "null", "\"null\" space"); }
    if (!strcmp(name, "string")) {
        prim(g, "space");
        prim(g, "char");
        return add_rule(g, "string", "\"\\\"\" char* \"\\\"\" space");
    }
    if (!strcmp(name, "integral-part")) return add_rule(g, "integral-part", "[0] | [1-9] [0-9]{0,15}");
    if (!strcmp(name, "number")) {
        prim(g, "space");
        prim(g, "integral-part");
        add_rule(g, "decimal-part", "[0-9]{1,16}");
        return add_rule(g, "number", "(\"-\"? integral-part) (\".\" decimal-part)? ([eE] [-+]? integral-part)? space");
    }
    if (!strcmp(name, "integer")) {
        prim(g, "space");
        prim(g, "integral-part");
        return add_rule(g, "integer", "(\"-\"? integral-part) space");
    }
    if (!strcmp(name, "value") || !strcmp(name, "object") || !strcmp(name, "array")) {
        prim(g, "string");
        prim(g, "number");
        prim(g, "boolean");
        prim(g, "null");
        add_rule(g, "value", "object | array | string | number | boolean | null");
        add_rule(g, "object", "\"{\" space ( string \":\" space value (\",\" space string \":\" space value)* )? \"}\" space");
        add_rule(g, "array", "\"[\" space ( value (\",\" space value)* )? \"]\" space");
        return find_rule(g, name) ? find_rule(g, name)->name : NULL;
    }
    return NULL;
}

/* text as a GBNF string literal (quotes included); false (b unchanged in
 * meaning) when s is not valid UTF-8 */
static bool gbnf_literal(sbuf *b, const char *s, size_t n) {
    if (el_utf8_check((const unsigned char *)s, n) != n) return false;
    sb_puts(b, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"') sb_puts(b, "\\\"");
        else if (c == '\\') sb_puts(b, "\\\\");
        else if (c == '\n') sb_puts(b, "\\n");
        else if (c == '\r') sb_puts(b, "\\r");
        else if (c == '\t') sb_puts(b, "\\t");
        else if (c < 0x20 || c == 0x7f) sb_printf(b, "\\x%02X", c);
        else sb_add(b, (const char *)&c, 1);
    }
    sb_puts(b, "\"");
    return true;
}

/* a JSON value's compact text as a GBNF literal */
static bool json_literal(gen *g, sbuf *b, const cJSON *v, const char *path) {
    char *t = cJSON_PrintUnformatted(v);
    if (!t) { fail(g, path, "out of memory"); return false; }
    bool ok = gbnf_literal(b, t, strlen(t));
    free(t);
    if (!ok) fail(g, path, "a string that is not valid UTF-8");
    return ok;
}

static const char *visit(gen *g, const cJSON *s, const char *name, const char *path);

static void child_path(char *out, size_t cap, const char *path, const char *key) {
    snprintf(out, cap, "%s/%s", path, key);
}

/* ---- integers ------------------------------------------------------------------ */

/* decimal strings lo..hi of equal length (no sign, leading zeros only as the strings have them) */
static void same_len(sbuf *b, const char *lo, const char *hi) {
    size_t n = strlen(lo);
    if (n == 0) return;
    if (lo[0] == hi[0]) {
        sb_printf(b, "\"%c\"", lo[0]);
        if (n > 1) { sb_puts(b, " "); same_len(b, lo + 1, hi + 1); }
        return;
    }
    bool lo_zeros = strspn(lo + 1, "0") == n - 1, hi_nines = strspn(hi + 1, "9") == n - 1;
    sb_puts(b, "(");
    int first = lo[0] - '0', last = hi[0] - '0';
    bool alt = false;
    if (!lo_zeros) {
        char nines[32];
        memset(nines, '9', n - 1);
        nines[n - 1] = 0;
        sb_printf(b, "\"%c\" (", lo[0]);
        same_len(b, lo + 1, nines);
        sb_puts(b, ")");
        first++;
        alt = true;
    }
    int mid_hi = hi_nines ? last : last - 1;
    if (first <= mid_hi) {
        if (alt) sb_puts(b, " | ");
        sb_printf(b, "[%d-%d]", first, mid_hi);
        if (n > 1) sb_printf(b, " [0-9]{%zu}", n - 1);
        alt = true;
    }
    if (!hi_nines) {
        char zeros[32];
        memset(zeros, '0', n - 1);
        zeros[n - 1] = 0;
        if (alt) sb_puts(b, " | ");
        sb_printf(b, "\"%c\" (", hi[0]);
        same_len(b, zeros, hi + 1);
        sb_puts(b, ")");
    }
    sb_puts(b, ")");
}

static int ndigits(uint64_t v) {
    int d = 1;
    while (v >= 10) { v /= 10; d++; }
    return d;
}

/* non-negative integers in [a, b] (has_b false: no upper bound), no leading zeros */
static void uint_range(sbuf *b, uint64_t a, bool has_b, uint64_t bb) {
    static const uint64_t P10[] = {1ull, 10ull, 100ull, 1000ull, 10000ull, 100000ull, 1000000ull, 10000000ull,
                                   100000000ull, 1000000000ull, 10000000000ull, 100000000000ull, 1000000000000ull,
                                   10000000000000ull, 100000000000000ull, 1000000000000000ull, 10000000000000000ull};
    int la = ndigits(a), lb = has_b ? ndigits(bb) : 16;
    bool first = true;
    sb_puts(b, "(");
    for (int L = la; L <= lb; L++) {
        uint64_t lo = L == 1 ? 0 : P10[L - 1], hi = P10[L] - 1;
        if (lo < a) lo = a;
        if (has_b && hi > bb) hi = bb;
        if (lo > hi) continue;
        char ls[32], hs[32];
        snprintf(ls, sizeof ls, "%llu", (unsigned long long)lo);
        snprintf(hs, sizeof hs, "%llu", (unsigned long long)hi);
        if (!first) sb_puts(b, " | ");
        first = false;
        sb_puts(b, "(");
        same_len(b, ls, hs);
        sb_puts(b, ")");
    }
    if (first) sb_puts(b, "[0]"); /* not reached: callers pass a <= b */
    sb_puts(b, ")");
}

/* integers in [lo, hi] (has_* false: unbounded on that side) as a GBNF expression */
static void int_range(sbuf *b, bool has_lo, int64_t lo, bool has_hi, int64_t hi) {
    bool neg = !has_lo || lo < 0, pos = !has_hi || hi >= 0;
    sb_puts(b, "(");
    if (neg) { /* -v for v in [max(1, -hi), -lo] */
        uint64_t va = has_hi && hi < 0 ? (uint64_t)(-hi) : 1;
        sb_puts(b, "\"-\" ");
        uint_range(b, va, has_lo, has_lo ? (uint64_t)(-lo) : 0);
    }
    if (pos) {
        if (neg) sb_puts(b, " | ");
        uint_range(b, has_lo && lo > 0 ? (uint64_t)lo : 0, has_hi, has_hi ? (uint64_t)hi : 0);
    }
    sb_puts(b, ")");
}

#define INT_LIMIT 1e15

/* reads minimum/maximum/exclusive* into an integer range; false on error */
static bool bounds(gen *g, const cJSON *s, const char *path, bool *has_lo, int64_t *lo, bool *has_hi, int64_t *hi) {
    const cJSON *mn = cJSON_GetObjectItemCaseSensitive(s, "minimum"), *mx = cJSON_GetObjectItemCaseSensitive(s, "maximum");
    const cJSON *emn = cJSON_GetObjectItemCaseSensitive(s, "exclusiveMinimum"),
                *emx = cJSON_GetObjectItemCaseSensitive(s, "exclusiveMaximum");
    *has_lo = *has_hi = false;
    double l = -INFINITY, h = INFINITY;
    bool l_ex = false, h_ex = false;
    if (mn) { if (!cJSON_IsNumber(mn)) { fail(g, path, "minimum: expected a number"); return false; } l = mn->valuedouble; }
    if (mx) { if (!cJSON_IsNumber(mx)) { fail(g, path, "maximum: expected a number"); return false; } h = mx->valuedouble; }
    if (emn) {
        if (cJSON_IsBool(emn)) l_ex = cJSON_IsTrue(emn);
        else if (cJSON_IsNumber(emn)) { if (emn->valuedouble >= l) { l = emn->valuedouble; l_ex = true; } }
        else { fail(g, path, "exclusiveMinimum: expected a number"); return false; }
    }
    if (emx) {
        if (cJSON_IsBool(emx)) h_ex = cJSON_IsTrue(emx);
        else if (cJSON_IsNumber(emx)) { if (emx->valuedouble <= h) { h = emx->valuedouble; h_ex = true; } }
        else { fail(g, path, "exclusiveMaximum: expected a number"); return false; }
    }
    if (isfinite(l)) {
        double c = l_ex ? floor(l) + 1 : ceil(l);
        if (fabs(c) > INT_LIMIT) { fail(g, path, "minimum %g beyond ±1e15", l); return false; }
        *has_lo = true;
        *lo = (int64_t)c;
    }
    if (isfinite(h)) {
        double c = h_ex ? ceil(h) - 1 : floor(h);
        if (fabs(c) > INT_LIMIT) { fail(g, path, "maximum %g beyond ±1e15", h); return false; }
        *has_hi = true;
        *hi = (int64_t)c;
    }
    if (*has_lo && *has_hi && *lo > *hi) { fail(g, path, "no integer lies in the range [%g, %g]", l, h); return false; }
    return true;
}

/* ---- string patterns (a regex subset) ---------------------------------------------- */

typedef struct {
    gen *g;
    const char *s;
    size_t n, i;
    const char *path;
    int depth;
} rx;

#define RX_FAIL(R, ...) (fail((R)->g, (R)->path, __VA_ARGS__), false)

/* adds [lo,hi] minus the code points a JSON string must escape */
static void rx_range(sbuf *b, uint32_t lo, uint32_t hi) {
    static const uint32_t cut[][2] = {{0, 0x1f}, {0x22, 0x22}, {0x5c, 0x5c}, {0x7f, 0x7f}};
    uint32_t a = lo;
    for (size_t k = 0; k < 4 && a <= hi; k++) {
        if (cut[k][1] < a) continue;
        if (cut[k][0] > hi) break;
        if (cut[k][0] > a) sb_printf(b, "\\U%08X-\\U%08X", a, cut[k][0] - 1);
        a = cut[k][1] + 1;
    }
    if (a <= hi) sb_printf(b, "\\U%08X-\\U%08X", a, hi);
}

static bool rx_utf8(rx *r, uint32_t *cp) {
    if (!el_utf8_seq((const unsigned char *)r->s + r->i, r->n - r->i)) return RX_FAIL(r, "pattern: invalid UTF-8");
    unsigned char c = (unsigned char)r->s[r->i];
    int need = c < 0x80 ? 0 : (c & 0xe0) == 0xc0 ? 1 : (c & 0xf0) == 0xe0 ? 2 : (c & 0xf8) == 0xf0 ? 3 : -1;
    if (need < 0 || r->i + (size_t)need >= r->n + (need ? 0 : 1)) return RX_FAIL(r, "pattern: invalid UTF-8");
    uint32_t v = need == 0 ? c : need == 1 ? (c & 0x1fu) : need == 2 ? (c & 0x0fu) : (c & 0x07u);
    for (int k = 1; k <= need; k++) {
        unsigned char d = (unsigned char)r->s[r->i + (size_t)k];
        if ((d & 0xc0) != 0x80) return RX_FAIL(r, "pattern: invalid UTF-8");
        v = v << 6 | (d & 0x3fu);
    }
    r->i += (size_t)need + 1;
    *cp = v;
    return true;
}

/* a class shorthand (\d \w \s and negations) into ranges of a class body; neg_out: it is negated */
static int rx_shorthand(char c, uint32_t rg[][2], bool *neg) {
    *neg = c == 'D' || c == 'W' || c == 'S';
    switch (c) {
    case 'd': case 'D': rg[0][0] = '0', rg[0][1] = '9'; return 1;
    case 'w': case 'W': rg[0][0] = '0', rg[0][1] = '9'; rg[1][0] = 'A', rg[1][1] = 'Z'; rg[2][0] = 'a', rg[2][1] = 'z'; rg[3][0] = '_', rg[3][1] = '_'; return 4;
    case 's': case 'S': rg[0][0] = ' ', rg[0][1] = ' '; rg[1][0] = '\t', rg[1][1] = '\r'; return 2;
    default: return 0;
    }
}

static void rx_class_out(sbuf *b, uint32_t rg[][2], int n, bool neg) {
    if (neg) {
        sb_puts(b, "[^\"\\\\\\x00-\\x1F\\x7F");
        for (int k = 0; k < n; k++) sb_printf(b, "\\U%08X-\\U%08X", rg[k][0], rg[k][1]);
        sb_puts(b, "]");
    } else {
        size_t before = b->n;
        sb_puts(b, "[");
        size_t open = b->n;
        for (int k = 0; k < n; k++) rx_range(b, rg[k][0], rg[k][1]);
        if (b->n == open) { b->n = before; sb_puts(b, "[^\\x00-\\U0010FFFF]"); } /* empty: matches nothing */
        else sb_puts(b, "]");
    }
}

static bool rx_alt(rx *r, sbuf *b);

static bool rx_atom(rx *r, sbuf *b) {
    char c = r->s[r->i];
    if (c == '(') {
        if (++r->depth > 32) return RX_FAIL(r, "pattern: groups nested too deep");
        r->i++;
        if (r->i + 1 < r->n && r->s[r->i] == '?') {
            if (r->s[r->i + 1] != ':') return RX_FAIL(r, "pattern: lookaround and named groups are not supported");
            r->i += 2;
        }
        sb_puts(b, "(");
        if (!rx_alt(r, b)) return false;
        if (r->i >= r->n || r->s[r->i] != ')') return RX_FAIL(r, "pattern: missing ')'");
        r->i++;
        r->depth--;
        sb_puts(b, ")");
        return true;
    }
    if (c == '.') {
        r->i++;
        sb_puts(b, "[^\"\\\\\\x00-\\x1F\\x7F]");
        return true;
    }
    if (c == '[') {
        r->i++;
        bool neg = r->i < r->n && r->s[r->i] == '^';
        if (neg) r->i++;
        uint32_t rg[256][2];
        int n = 0;
        bool firstc = true;
        while (r->i < r->n && (r->s[r->i] != ']' || firstc)) {
            firstc = false;
            if (n > 250) return RX_FAIL(r, "pattern: character class too long");
            uint32_t lo;
            if (r->s[r->i] == '\\') {
                if (r->i + 1 >= r->n) return RX_FAIL(r, "pattern: trailing '\\'");
                char e = r->s[r->i + 1];
                if ((unsigned char)e >= 0x80) return RX_FAIL(r, "pattern: '\\' before a non-ASCII character");
                bool sneg;
                uint32_t tmp[4][2];
                int k = rx_shorthand(e, tmp, &sneg);
                if (k) {
                    if (sneg) return RX_FAIL(r, "pattern: \\%c inside a class is not supported", e);
                    for (int j = 0; j < k; j++) rg[n][0] = tmp[j][0], rg[n][1] = tmp[j][1], n++;
                    r->i += 2;
                    continue;
                }
                lo = e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : (uint32_t)(unsigned char)e;
                r->i += 2;
            } else if (!rx_utf8(r, &lo)) return false;
            uint32_t hi = lo;
            if (r->i + 1 < r->n && r->s[r->i] == '-' && r->s[r->i + 1] != ']') {
                r->i++;
                if (r->s[r->i] == '\\') {
                    if (r->i + 1 >= r->n) return RX_FAIL(r, "pattern: trailing '\\'");
                    hi = (unsigned char)r->s[r->i + 1];
                    if (hi >= 0x80) return RX_FAIL(r, "pattern: '\\' before a non-ASCII character");
                    r->i += 2;
                } else if (!rx_utf8(r, &hi)) return false;
                if (hi < lo) return RX_FAIL(r, "pattern: reversed range in a class");
            }
            rg[n][0] = lo, rg[n][1] = hi, n++;
        }
        if (r->i >= r->n) return RX_FAIL(r, "pattern: missing ']'");
        r->i++;
        rx_class_out(b, rg, n, neg);
        return true;
    }
    if (c == '\\') {
        if (r->i + 1 >= r->n) return RX_FAIL(r, "pattern: trailing '\\'");
        char e = r->s[r->i + 1];
        if ((unsigned char)e >= 0x80) return RX_FAIL(r, "pattern: '\\' before a non-ASCII character");
        r->i += 2;
        uint32_t rg[4][2];
        bool neg;
        int k = rx_shorthand(e, rg, &neg);
        if (k) { rx_class_out(b, rg, k, neg); return true; }
        if (e == 'n') { sb_puts(b, "\"\\\\n\""); return true; }
        if (e == 't') { sb_puts(b, "\"\\\\t\""); return true; }
        if ((e >= '0' && e <= '9') || e == 'b' || e == 'B' || e == 'p' || e == 'P' || e == 'u' || e == 'x')
            return RX_FAIL(r, "pattern: \\%c is not supported", e);
        c = e;
        goto literal;
    }
    if (c == '*' || c == '+' || c == '?' || c == '{' || c == ')' || c == '|')
        return RX_FAIL(r, "pattern: unexpected '%c' at offset %zu", c, r->i);
    if (c == '^' || c == '$') return RX_FAIL(r, "pattern: anchors are supported only at the ends");
    {
        uint32_t cp;
        size_t at = r->i;
        if (!rx_utf8(r, &cp)) return false;
        if (cp < 0x20 || cp == 0x7f) return RX_FAIL(r, "pattern: control character");
        sb_puts(b, "\"");
        if (cp == '"') sb_puts(b, "\\\\\\\"");
        else sb_add(b, r->s + at, r->i - at);
        sb_puts(b, "\"");
        return true;
    }
literal:
    if (c == '"') sb_puts(b, "\"\\\\\\\"\"");
    else if (c == '\\') sb_puts(b, "\"\\\\\\\\\"");
    else if ((unsigned char)c < 0x20 || c == 0x7f) return RX_FAIL(r, "pattern: control character");
    else { sb_puts(b, "\""); sb_add(b, &c, 1); sb_puts(b, "\""); }
    return true;
}

static bool rx_seq(rx *r, sbuf *b) {
    bool any = false;
    while (r->i < r->n && r->s[r->i] != '|' && r->s[r->i] != ')') {
        if (any) sb_puts(b, " ");
        sb_puts(b, "(");
        if (!rx_atom(r, b)) return false;
        sb_puts(b, ")");
        any = true;
        if (r->i < r->n) {
            char q = r->s[r->i];
            if (q == '*' || q == '+' || q == '?') { sb_add(b, &q, 1); r->i++; }
            else if (q == '{') {
                size_t j = r->i + 1;
                unsigned long m = 0, x = 0;
                bool hasx = true, comma = false;
                size_t d0 = j;
                while (j < r->n && r->s[j] >= '0' && r->s[j] <= '9' && m < 100000) m = m * 10 + (unsigned long)(r->s[j++] - '0');
                if (j == d0) return RX_FAIL(r, "pattern: bad {m,n}");
                if (j < r->n && r->s[j] == ',') {
                    comma = true;
                    j++;
                    size_t d1 = j;
                    while (j < r->n && r->s[j] >= '0' && r->s[j] <= '9' && x < 100000) x = x * 10 + (unsigned long)(r->s[j++] - '0');
                    hasx = j > d1;
                } else x = m;
                if (j >= r->n || r->s[j] != '}' || (hasx && x < m) || m > 1000 || (hasx && x > 1000))
                    return RX_FAIL(r, "pattern: bad or too large {m,n} (counts up to 1000)");
                if (!comma) sb_printf(b, "{%lu}", m);
                else if (hasx) sb_printf(b, "{%lu,%lu}", m, x);
                else sb_printf(b, "{%lu,}", m);
                r->i = j + 1;
            }
            if (r->i < r->n && r->s[r->i] == '?') r->i++; /* lazy: same language */
        }
    }
    if (!any) sb_puts(b, "\"\"");
    return true;
}

static bool rx_alt(rx *r, sbuf *b) {
    if (!rx_seq(r, b)) return false;
    while (r->i < r->n && r->s[r->i] == '|') {
        r->i++;
        sb_puts(b, " | ");
        if (!rx_seq(r, b)) return false;
    }
    return true;
}

static bool pattern(gen *g, sbuf *b, const char *pat, const char *path) {
    size_t n = strlen(pat);
    if (n > 4096) { fail(g, path, "pattern longer than 4096 bytes"); return false; }
    bool a0 = n && pat[0] == '^', a1 = n > (size_t)a0 && pat[n - 1] == '$' && (n < 2 || pat[n - 2] != '\\');
    rx r = {.g = g, .s = pat + a0, .n = n - a0 - a1, .path = path};
    prim(g, "char");
    sb_puts(b, "\"\\\"\" ");
    if (!a0) sb_puts(b, "char* ");
    sb_puts(b, "(");
    if (!rx_alt(&r, b)) return false;
    if (r.i != r.n) { fail(g, path, "pattern: unexpected ')' at offset %zu", r.i + a0); return false; }
    sb_puts(b, ")");
    if (!a1) sb_puts(b, " char*");
    sb_puts(b, " \"\\\"\" space");
    return true;
}

/* ---- objects -------------------------------------------------------------------------- */

typedef struct ktrie {
    uint32_t cp;
    bool end;
    struct ktrie *kid, *next;
} ktrie;

static void ktrie_free(ktrie *t) {
    while (t) {
        ktrie *n = t->next;
        ktrie_free(t->kid);
        free(t);
        t = n;
    }
}

/* strings not in the trie (the text between the quotes) */
static const char *not_keys(gen *g, ktrie *node, bool is_end, const char *base) {
    sbuf b = {0};
    bool alt = false;
    if (!is_end) sb_puts(&b, "| "); /* the key may end here (an empty first alternative) */
    for (ktrie *k = node; k; k = k->next) {
        const char *sub = not_keys(g, k->kid, k->end, base);
        if (!sub) { free(b.p); return NULL; }
        if (alt) sb_puts(&b, " | ");
        sb_printf(&b, "[\\U%08X] %s", k->cp, sub);
        alt = true;
    }
    if (alt) sb_puts(&b, " | ");
    sb_puts(&b, "[^\"\\\\\\x7F\\x00-\\x1F");
    for (ktrie *k = node; k; k = k->next) sb_printf(&b, "\\U%08X", k->cp);
    sb_puts(&b, "] char* | [\\\\] ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4}) char*");
    if (b.oom) { fail(g, "", "out of memory"); free(b.p); return NULL; }
    const char *r = add_rule(g, base, b.p);
    free(b.p);
    return r;
}

static bool ktrie_add(ktrie **root, const char *s) {
    ktrie **lvl = root, *node = NULL;
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        uint32_t cp = *p++;
        if (cp >= 0x80) { /* decode (keys come from cJSON: valid UTF-8 or passed through) */
            int need = (cp & 0xe0) == 0xc0 ? 1 : (cp & 0xf0) == 0xe0 ? 2 : (cp & 0xf8) == 0xf0 ? 3 : 0;
            cp &= need == 1 ? 0x1f : need == 2 ? 0x0f : 0x07;
            for (int k = 0; k < need && (*p & 0xc0) == 0x80; k++) cp = cp << 6 | (*p++ & 0x3fu);
        }
        node = *lvl;
        while (node && node->cp != cp) node = node->next;
        if (!node) {
            node = calloc(1, sizeof *node);
            if (!node) return false;
            node->cp = cp;
            node->next = *lvl;
            *lvl = node;
        }
        lvl = &node->kid;
    }
    if (node) node->end = true;
    return true;
}

static const char *visit_object(gen *g, const cJSON *s, const char *name, const char *path) {
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(s, "required");
    const cJSON *addl = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
    char cp[300];
    if (props && !cJSON_IsObject(props)) { fail(g, path, "properties: expected an object"); return NULL; }
    if (req && !cJSON_IsArray(req)) { fail(g, path, "required: expected an array"); return NULL; }
    for (const cJSON *r = req ? req->child : NULL; r; r = r->next) {
        if (!cJSON_IsString(r)) { fail(g, path, "required: expected strings"); return NULL; }
        if (!props || !cJSON_GetObjectItemCaseSensitive(props, r->valuestring)) {
            fail(g, path, "required property '%.60s' is not among the properties", r->valuestring);
            return NULL;
        }
    }
    bool extras = addl && !cJSON_IsFalse(addl);
    if (addl && !cJSON_IsBool(addl) && !cJSON_IsObject(addl)) { fail(g, path, "additionalProperties: expected a boolean or a schema"); return NULL; }
    prim(g, "space");
    int n = props ? cJSON_GetArraySize(props) : 0;
    if (n > 256) { fail(g, path, "more than 256 properties"); return NULL; }
    const char **kv = calloc((size_t)n + 1, sizeof *kv);
    bool *isreq = calloc((size_t)n + 1, sizeof *isreq);
    const char **rest = calloc((size_t)n + 2, sizeof *rest);
    sbuf b = {0};
    const char *result = NULL;
    if (!kv || !isreq || !rest) { fail(g, path, "out of memory"); goto out; }
    int i = 0;
    for (const cJSON *p = props ? props->child : NULL; p; p = p->next, i++) {
        if (!p->string) { fail(g, path, "properties: a member without a name"); goto out; }
        for (const cJSON *q = props->child; q != p; q = q->next)
            if (!strcmp(q->string, p->string)) { fail(g, path, "property '%.60s' appears twice", p->string); goto out; }
        child_path(cp, sizeof cp, path, p->string);
        char nm[160];
        snprintf(nm, sizeof nm, "%s-%s", name, p->string);
        const char *v = visit(g, p, nm, cp);
        if (!v) goto out;
        sbuf kb = {0};
        char *key = cJSON_PrintUnformatted(&(cJSON){.type = cJSON_String, .valuestring = p->string});
        if (!key) { fail(g, path, "out of memory"); goto out; }
        bool kok = gbnf_literal(&kb, key, strlen(key));
        free(key);
        if (!kok) { free(kb.p); fail(g, path, "a property name that is not valid UTF-8"); goto out; }
        sb_printf(&kb, " space \":\" space %s", v);
        snprintf(nm, sizeof nm, "%s-%s-kv", name, p->string);
        kv[i] = kb.oom ? NULL : add_rule(g, nm, kb.p);
        free(kb.p);
        if (!kv[i]) { fail(g, path, "out of memory"); goto out; }
        for (const cJSON *r = req ? req->child : NULL; r; r = r->next)
            if (!strcmp(r->valuestring, p->string)) isreq[i] = true;
    }
    /* extras */
    const char *extra = NULL;
    if (extras) {
        ktrie *kt = NULL;
        for (const cJSON *p = props ? props->child : NULL; p; p = p->next)
            if (!ktrie_add(&kt, p->string)) { ktrie_free(kt); fail(g, path, "out of memory"); goto out; }
        char nm[160];
        snprintf(nm, sizeof nm, "%s-additional-key", name);
        prim(g, "char");
        const char *nk = not_keys(g, kt, false, nm);
        ktrie_free(kt);
        if (!nk) goto out;
        const char *av;
        child_path(cp, sizeof cp, path, "additionalProperties");
        snprintf(nm, sizeof nm, "%s-additional-value", name);
        if (cJSON_IsObject(addl)) av = visit(g, addl, nm, cp);
        else av = prim(g, "value");
        if (!av) goto out;
        sbuf eb = {0};
        sb_printf(&eb, "\"\\\"\" %s \"\\\"\" space \":\" space %s", nk, av);
        snprintf(nm, sizeof nm, "%s-additional-kv", name);
        const char *ekv = eb.oom ? NULL : add_rule(g, nm, eb.p);
        free(eb.p);
        if (!ekv) goto out;
        eb = (sbuf){0};
        sb_printf(&eb, "%s (\",\" space %s)*", ekv, ekv);
        snprintf(nm, sizeof nm, "%s-additional", name);
        extra = eb.oom ? NULL : add_rule(g, nm, eb.p);
        free(eb.p);
        if (!extra) goto out;
    }
    /* optional chain: rest[j] for the j-th optional (in order) */
    int opt[257], nopt = 0;
    for (int k = 0; k < n; k++)
        if (!isreq[k]) opt[nopt++] = k;
    rest[nopt] = extra;
    for (int j = nopt - 1; j >= 0; j--) {
        sbuf rb = {0};
        for (int k = j; k < nopt; k++) {
            if (k > j) sb_puts(&rb, " | ");
            sb_puts(&rb, kv[opt[k]]);
            if (rest[k + 1]) sb_printf(&rb, " (\",\" space %s)?", rest[k + 1]);
        }
        if (extra) sb_printf(&rb, " | %s", extra);
        char nm[160];
        snprintf(nm, sizeof nm, "%s-rest-%d", name, j);
        rest[j] = rb.oom ? NULL : add_rule(g, nm, rb.p);
        free(rb.p);
        if (!rest[j]) goto out;
    }
    sb_puts(&b, "\"{\" space");
    bool anyreq = false;
    for (int k = 0; k < n; k++)
        if (isreq[k]) {
            sb_printf(&b, anyreq ? " \",\" space %s" : " %s", kv[k]);
            anyreq = true;
        }
    if (rest[0]) sb_printf(&b, anyreq ? " (\",\" space %s)?" : " (%s)?", rest[0]);
    sb_puts(&b, " \"}\" space");
    if (b.oom) { fail(g, path, "out of memory"); goto out; }
    result = add_rule(g, name, b.p);
out:
    free(b.p);
    free(kv);
    free(isreq);
    free(rest);
    return result;
}

/* ---- arrays ---------------------------------------------------------------------------- */

static bool count_kw(gen *g, const cJSON *s, const char *kw, const char *path, long *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, kw);
    if (!v) return true;
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble != floor(v->valuedouble)) {
        fail(g, path, "%s: expected a non-negative integer", kw);
        return false;
    }
    if (v->valuedouble > 4096) { fail(g, path, "%s %g: counts above 4096 are not supported", kw, v->valuedouble); return false; }
    *out = (long)v->valuedouble;
    return true;
}

static const char *visit_array(gen *g, const cJSON *s, const char *name, const char *path) {
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(s, "items");
    const cJSON *prefix = cJSON_GetObjectItemCaseSensitive(s, "prefixItems");
    char cp[300], nm[160];
    long mn = 0, mx = -1;
    if (!count_kw(g, s, "minItems", path, &mn) || !count_kw(g, s, "maxItems", path, &mx)) return NULL;
    if (mx >= 0 && mx < mn) { fail(g, path, "maxItems below minItems"); return NULL; }
    prim(g, "space");
    sbuf b = {0};
    const char *res = NULL;
    if (prefix || cJSON_IsArray(items)) { /* a tuple: exactly these items */
        const cJSON *arr = prefix ? prefix : items;
        if (!cJSON_IsArray(arr)) { fail(g, path, "prefixItems: expected an array"); return NULL; }
        int n = cJSON_GetArraySize(arr);
        if (n < mn || (mx >= 0 && n > mx)) { fail(g, path, "a tuple of %d items outside minItems/maxItems", n); return NULL; }
        sb_puts(&b, "\"[\" space");
        int i = 0;
        for (const cJSON *it = arr->child; it; it = it->next, i++) {
            snprintf(cp, sizeof cp, "%s/prefixItems/%d", path, i);
            snprintf(nm, sizeof nm, "%s-%d", name, i);
            const char *v = visit(g, it, nm, cp);
            if (!v) { free(b.p); return NULL; }
            sb_printf(&b, i ? " \",\" space %s" : " %s", v);
        }
        sb_puts(&b, " \"]\" space");
    } else {
        const char *item;
        if (!items || cJSON_IsTrue(items)) item = prim(g, "value");
        else if (cJSON_IsObject(items)) {
            child_path(cp, sizeof cp, path, "items");
            snprintf(nm, sizeof nm, "%s-item", name);
            item = visit(g, items, nm, cp);
        } else { fail(g, path, "items: expected a schema"); return NULL; }
        if (!item) return NULL;
        if (mx == 0) sb_puts(&b, "\"[\" space \"]\" space");
        else if (mn == 0) {
            if (mx < 0) sb_printf(&b, "\"[\" space ( %s (\",\" space %s)* )? \"]\" space", item, item);
            else sb_printf(&b, "\"[\" space ( %s (\",\" space %s){0,%ld} )? \"]\" space", item, item, mx - 1);
        } else {
            if (mx < 0) sb_printf(&b, "\"[\" space %s (\",\" space %s){%ld,} \"]\" space", item, item, mn - 1);
            else sb_printf(&b, "\"[\" space %s (\",\" space %s){%ld,%ld} \"]\" space", item, item, mn - 1, mx - 1);
        }
    }
    if (b.oom) fail(g, path, "out of memory");
    else res = add_rule(g, name, b.p);
    free(b.p);
    return res;
}

/* ---- strings ------------------------------------------------------------------------------ */

static const char *visit_string(gen *g, const cJSON *s, const char *name, const char *path) {
    const cJSON *pat = cJSON_GetObjectItemCaseSensitive(s, "pattern");
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(s, "format");
    long mn = 0, mx = -1;
    if (!count_kw(g, s, "minLength", path, &mn) || !count_kw(g, s, "maxLength", path, &mx)) return NULL;
    if (mx >= 0 && mx < mn) { fail(g, path, "maxLength below minLength"); return NULL; }
    prim(g, "space");
    prim(g, "char");
    sbuf b = {0};
    if (pat) {
        if (!cJSON_IsString(pat)) { fail(g, path, "pattern: expected a string"); return NULL; }
        if (mn > 0 || mx >= 0) { fail(g, path, "pattern together with minLength/maxLength is not supported"); return NULL; }
        if (!pattern(g, &b, pat->valuestring, path)) { free(b.p); return NULL; }
    } else if (fmt && cJSON_IsString(fmt) && strcmp(fmt->valuestring, "date") && strcmp(fmt->valuestring, "time") &&
               strcmp(fmt->valuestring, "date-time") && strcmp(fmt->valuestring, "uuid")) {
        fail(g, path, "format '%.40s' is not supported (date, time, date-time, uuid are)", fmt->valuestring);
        return NULL;
    } else if (fmt && cJSON_IsString(fmt)) {
        const char *f = fmt->valuestring;
        const char *date = "[0-9]{4} \"-\" (\"0\" [1-9] | \"1\" [0-2]) \"-\" (\"0\" [1-9] | [1-2] [0-9] | \"3\" [0-1])";
        const char *time = "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] (\".\" [0-9]{3})? (\"Z\" | [+-] ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9])";
        if (!strcmp(f, "date")) sb_printf(&b, "\"\\\"\" %s \"\\\"\" space", date);
        else if (!strcmp(f, "time")) sb_printf(&b, "\"\\\"\" %s \"\\\"\" space", time);
        else if (!strcmp(f, "date-time")) { sb_puts(&b, "\"\\\"\" "); sb_puts(&b, date); sb_puts(&b, " \"T\" "); sb_puts(&b, time); sb_puts(&b, " \"\\\"\" space"); }
        else sb_puts(&b, "\"\\\"\" [0-9a-f]{8} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{12} \"\\\"\" space");
    } else if (mn == 0 && mx < 0) {
        free(b.p);
        return prim(g, "string");
    } else if (mx < 0) sb_printf(&b, "\"\\\"\" char{%ld,} \"\\\"\" space", mn);
    else sb_printf(&b, "\"\\\"\" char{%ld,%ld} \"\\\"\" space", mn, mx);
    const char *r = NULL;
    if (b.oom) fail(g, path, "out of memory");
    else r = add_rule(g, name, b.p);
    free(b.p);
    return r;
}

/* ---- dispatch ---------------------------------------------------------------------------- */

static const char *visit_ref(gen *g, const char *ref, const char *path) {
    for (int i = 0; i < g->n_refs; i++)
        if (!strcmp(g->refs[i].ref, ref)) return g->refs[i].name;
    const cJSON *t = NULL;
    if (!strcmp(ref, "#")) t = g->root;
    else if (!strncmp(ref, "#/", 2)) {
        t = g->root;
        char seg[256];
        const char *p = ref + 2;
        while (t && *p) {
            size_t k = 0;
            while (*p && *p != '/' && k + 1 < sizeof seg) {
                if (p[0] == '~' && p[1] == '1') { seg[k++] = '/'; p += 2; }
                else if (p[0] == '~' && p[1] == '0') { seg[k++] = '~'; p += 2; }
                else seg[k++] = *p++;
            }
            seg[k] = 0;
            if (*p == '/') p++;
            t = cJSON_IsObject(t) ? cJSON_GetObjectItemCaseSensitive(t, seg) : NULL;
        }
    } else {
        fail(g, path, "$ref '%.80s': only references within the schema (#/...) are supported", ref);
        return NULL;
    }
    if (!t) { fail(g, path, "$ref '%.80s' does not resolve", ref); return NULL; }
    const char *base = strrchr(ref, '/');
    base = base && base[1] ? base + 1 : "ref";
    rule *slot = reserve(g, base, ref);
    if (!slot) return NULL;
    if (g->n_refs == g->cap_refs) {
        int nc = g->cap_refs ? g->cap_refs * 2 : 8;
        refmap *r = realloc(g->refs, sizeof *r * (size_t)nc);
        if (!r) { fail(g, path, "out of memory"); return NULL; }
        g->refs = r;
        g->cap_refs = nc;
    }
    char *name = strdup(slot->name);
    char *rc = strdup(ref);
    if (!name || !rc) { free(name); free(rc); fail(g, path, "out of memory"); return NULL; }
    g->refs[g->n_refs++] = (refmap){rc, name};
    char nm[160];
    snprintf(nm, sizeof nm, "%s-def", name);
    const char *v = visit(g, t, nm, ref + 1);
    if (!v) return NULL;
    for (int i = 0; i < g->n_rules; i++) /* slot may have moved (realloc) */
        if (!strcmp(g->rules[i].name, name)) {
            char *body = strdup(v);
            if (!body) { fail(g, path, "out of memory"); return NULL; }
            free(g->rules[i].body);
            g->rules[i].body = body;
            return g->rules[i].name;
        }
    return NULL;
}

static const char *visit_type(gen *g, const cJSON *s, const char *type, const char *name, const char *path) {
    if (!strcmp(type, "object")) {
        if (!cJSON_GetObjectItemCaseSensitive(s, "properties") && !cJSON_GetObjectItemCaseSensitive(s, "additionalProperties"))
            return prim(g, "object");
        return visit_object(g, s, name, path);
    }
    if (!strcmp(type, "array")) return visit_array(g, s, name, path);
    if (!strcmp(type, "string")) return visit_string(g, s, name, path);
    if (!strcmp(type, "boolean")) return prim(g, "boolean");
    if (!strcmp(type, "null")) return prim(g, "null");
    if (!strcmp(type, "integer") || !strcmp(type, "number")) {
        bool hl, hh;
        int64_t lo = 0, hi = 0;
        if (!bounds(g, s, path, &hl, &lo, &hh, &hi)) return NULL;
        if (!hl && !hh) return prim(g, type);
        prim(g, "space");
        sbuf b = {0};
        int_range(&b, hl, lo, hh, hi);
        sb_puts(&b, " space");
        const char *r = b.oom ? NULL : add_rule(g, name, b.p);
        free(b.p);
        return r;
    }
    fail(g, path, "unknown type '%.40s'", type);
    return NULL;
}

static const char *alternatives(gen *g, const cJSON *arr, const char *kw, const char *name, const char *path) {
    if (!cJSON_IsArray(arr) || !arr->child) { fail(g, path, "%s: expected a non-empty array", kw); return NULL; }
    sbuf b = {0};
    int i = 0;
    char cp[300], nm[160];
    for (const cJSON *it = arr->child; it; it = it->next, i++) {
        snprintf(cp, sizeof cp, "%s/%s/%d", path, kw, i);
        snprintf(nm, sizeof nm, "%s-%d", name, i);
        const char *v = visit(g, it, nm, cp);
        if (!v) { free(b.p); return NULL; }
        if (i) sb_puts(&b, " | ");
        sb_puts(&b, v);
    }
    const char *r = b.oom ? NULL : add_rule(g, name, b.p);
    free(b.p);
    return r;
}

static const char *visit(gen *g, const cJSON *s, const char *name, const char *path) {
    if (g->failed) return NULL;
    if (cJSON_IsTrue(s)) return prim(g, "value");
    if (cJSON_IsFalse(s)) { fail(g, path, "schema false admits nothing"); return NULL; }
    if (!cJSON_IsObject(s)) { fail(g, path, "expected a schema (an object or a boolean)"); return NULL; }
    if (++g->depth > MAX_DEPTH) { fail(g, path, "schema nested deeper than %d", MAX_DEPTH); return NULL; }
    const char *r = NULL;
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(s, "$ref");
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(s, "enum");
    const cJSON *cn = cJSON_GetObjectItemCaseSensitive(s, "const");
    const cJSON *any = cJSON_GetObjectItemCaseSensitive(s, "anyOf");
    const cJSON *one = cJSON_GetObjectItemCaseSensitive(s, "oneOf");
    const cJSON *all = cJSON_GetObjectItemCaseSensitive(s, "allOf");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(s, "type");
    if (ref) {
        if (!cJSON_IsString(ref)) fail(g, path, "$ref: expected a string");
        else r = visit_ref(g, ref->valuestring, path);
    } else if (cn || en) {
        prim(g, "space");
        sbuf b = {0};
        if (cn) json_literal(g, &b, cn, path);
        else if (!cJSON_IsArray(en) || !en->child) fail(g, path, "enum: expected a non-empty array");
        else
            for (const cJSON *v = en->child; v; v = v->next) {
                if (v != en->child) sb_puts(&b, " | ");
                json_literal(g, &b, v, path);
            }
        if (!g->failed) {
            char *body = NULL;
            sbuf w = {0};
            sb_printf(&w, "(%s) space", b.p ? b.p : "\"\"");
            body = w.p;
            r = w.oom ? NULL : add_rule(g, name, body);
            free(body);
        }
        free(b.p);
    } else if (any || one) {
        r = alternatives(g, any ? any : one, any ? "anyOf" : "oneOf", name, path);
    } else if (all) {
        if (!cJSON_IsArray(all) || cJSON_GetArraySize(all) != 1) fail(g, path, "allOf is supported with one member only");
        else {
            char cp[300];
            snprintf(cp, sizeof cp, "%s/allOf/0", path);
            r = visit(g, all->child, name, cp);
        }
    } else if (cJSON_IsString(type)) {
        r = visit_type(g, s, type->valuestring, name, path);
    } else if (cJSON_IsArray(type)) {
        sbuf b = {0};
        int i = 0;
        for (const cJSON *t = type->child; t && !g->failed; t = t->next, i++) {
            if (!cJSON_IsString(t)) { fail(g, path, "type: expected strings"); break; }
            char nm[160];
            snprintf(nm, sizeof nm, "%s-%s", name, t->valuestring);
            const char *v = visit_type(g, s, t->valuestring, nm, path);
            if (!v) break;
            if (i) sb_puts(&b, " | ");
            sb_puts(&b, v);
        }
        if (!i && !g->failed) fail(g, path, "type: an empty list");
        if (!g->failed) r = b.oom ? NULL : add_rule(g, name, b.p);
        free(b.p);
    } else if (type) {
        fail(g, path, "type: expected a string or a list");
    } else if (cJSON_GetObjectItemCaseSensitive(s, "properties")) {
        r = visit_type(g, s, "object", name, path);
    } else if (cJSON_GetObjectItemCaseSensitive(s, "items") || cJSON_GetObjectItemCaseSensitive(s, "prefixItems")) {
        r = visit_type(g, s, "array", name, path);
    } else {
        r = prim(g, "value");
    }
    g->depth--;
    if (!r && !g->failed) fail(g, path, "out of memory");
    return r;
}

char *el_json_schema_to_gbnf(const cJSON *schema, el_error *err) {
    if (!schema) { el_set_error(err, EL_ERR_INVALID_ARG, "json schema: NULL"); return NULL; }
    gen g = {.root = schema, .err = err};
    const char *top = visit(&g, schema, "root-value", "");
    char *out = NULL;
    if (top && !g.failed) {
        sbuf b = {0};
        sb_printf(&b, "root ::= %s\n", top);
        for (int i = 0; i < g.n_rules; i++) {
            sb_puts(&b, g.rules[i].name);
            sb_puts(&b, " ::= ");
            sb_puts(&b, g.rules[i].body);
            sb_puts(&b, "\n");
        }
        if (b.oom) { el_set_error(err, EL_ERR_NOMEM, "json schema: out of memory"); free(b.p); }
        else out = b.p;
    }
    for (int i = 0; i < g.n_rules; i++) { free(g.rules[i].name); free(g.rules[i].body); }
    free(g.rules);
    for (int i = 0; i < g.n_refs; i++) { free(g.refs[i].ref); free(g.refs[i].name); }
    free(g.refs);
    return out;
}

char *el_json_schema_text_to_gbnf(const char *text, size_t len, el_error *err) {
    if (!text) { el_set_error(err, EL_ERR_INVALID_ARG, "json schema: NULL"); return NULL; }
    if (len > MAX_TEXT) { el_set_error(err, EL_ERR_GRAMMAR, "json schema: %zu bytes (limit %u)", len, MAX_TEXT); return NULL; }
    const char *end = NULL;
    cJSON *s = cJSON_ParseWithLengthOpts(text, len, &end, false);
    if (!s) {
        size_t at = end && end >= text ? (size_t)(end - text) : 0;
        el_set_error(err, EL_ERR_GRAMMAR, "json schema: not valid JSON (near byte %zu)", at);
        return NULL;
    }
    char *r = el_json_schema_to_gbnf(s, err);
    cJSON_Delete(s);
    return r;
}

const char *el_json_object_gbnf(void) {
    return "root ::= object\n"
           "value ::= object | array | string | number | boolean | null\n"
           "object ::= \"{\" space ( string \":\" space value (\",\" space string \":\" space value)* )? \"}\" space\n"
           "array ::= \"[\" space ( value (\",\" space value)* )? \"]\" space\n"
           "string ::= \"\\\"\" char* \"\\\"\" space\n"
           "char ::= " CHAR_RULE "\n"
           "number ::= (\"-\"? integral-part) (\".\" decimal-part)? ([eE] [-+]? integral-part)? space\n"
           "integral-part ::= [0] | [1-9] [0-9]{0,15}\n"
           "decimal-part ::= [0-9]{1,16}\n"
           "boolean ::= (\"true\" | \"false\") space\n"
           "null ::= \"null\" space\n"
           "space ::= " SPACE_RULE "\n";
}
