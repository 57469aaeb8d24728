/*
 * json_schema_string.c — "string" schemas as GBNF (contract in
 * json_schema_internal.h): minLength / maxLength as a bounded repeat of
 * JSON string characters, format date, time, date-time and uuid as their
 * exact shapes, pattern as a regex subset (literals, ., [classes], \d \w \s
 * and negations, groups, (?:…), |, * + ? {m,n}, lazy quantifiers read as
 * greedy, ^ $ at the ends only; an unanchored end matches anything there).
 * Every class leaves out what a JSON string must escape; anything outside
 * the subset (lookaround, backreferences, \p, …) is an error naming it.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "structured/json_schema_internal.h"
#include "util/utf8.h"

/* ---- string patterns (a regex subset) ---------------------------------------------- */

typedef struct {
    gen *g;
    const char *s;
    size_t n, i;
    const char *path;
    int depth;
} rx;

#define RX_FAIL(R, ...) (el_js_fail((R)->g, (R)->path, __VA_ARGS__), false)

/* adds [lo,hi] minus the code points a JSON string must escape */
static void rx_range(sbuf *b, uint32_t lo, uint32_t hi) {
    static const uint32_t cut[][2] = {{0, 0x1f}, {0x22, 0x22}, {0x5c, 0x5c}, {0x7f, 0x7f}};
    uint32_t a = lo;
    for (size_t k = 0; k < 4 && a <= hi; k++) {
        if (cut[k][1] < a) continue;
        if (cut[k][0] > hi) break;
        if (cut[k][0] > a) el_js_sb_printf(b, "\\U%08X-\\U%08X", a, cut[k][0] - 1);
        a = cut[k][1] + 1;
    }
    if (a <= hi) el_js_sb_printf(b, "\\U%08X-\\U%08X", a, hi);
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
        for (int k = 0; k < n; k++) el_js_sb_printf(b, "\\U%08X-\\U%08X", rg[k][0], rg[k][1]);
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
                if (!comma) el_js_sb_printf(b, "{%lu}", m);
                else if (hasx) el_js_sb_printf(b, "{%lu,%lu}", m, x);
                else el_js_sb_printf(b, "{%lu,}", m);
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
    if (n > 4096) { el_js_fail(g, path, "pattern longer than 4096 bytes"); return false; }
    bool a0 = n && pat[0] == '^', a1 = n > (size_t)a0 && pat[n - 1] == '$' && (n < 2 || pat[n - 2] != '\\');
    rx r = {.g = g, .s = pat + a0, .n = n - a0 - a1, .path = path};
    el_js_prim(g, "char");
    sb_puts(b, "\"\\\"\" ");
    if (!a0) sb_puts(b, "char* ");
    sb_puts(b, "(");
    if (!rx_alt(&r, b)) return false;
    if (r.i != r.n) { el_js_fail(g, path, "pattern: unexpected ')' at offset %zu", r.i + a0); return false; }
    sb_puts(b, ")");
    if (!a1) sb_puts(b, " char*");
    sb_puts(b, " \"\\\"\" space");
    return true;
}

/* ---- strings ------------------------------------------------------------------------------ */

const char *el_js_visit_string(gen *g, const cJSON *s, const char *name, const char *path) {
    const cJSON *pat = cJSON_GetObjectItemCaseSensitive(s, "pattern");
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(s, "format");
    long mn = 0, mx = -1;
    if (!el_js_count_kw(g, s, "minLength", path, &mn) || !el_js_count_kw(g, s, "maxLength", path, &mx)) return NULL;
    if (mx >= 0 && mx < mn) { el_js_fail(g, path, "maxLength below minLength"); return NULL; }
    el_js_prim(g, "space");
    el_js_prim(g, "char");
    sbuf b = {0};
    if (pat) {
        if (!cJSON_IsString(pat)) { el_js_fail(g, path, "pattern: expected a string"); return NULL; }
        if (mn > 0 || mx >= 0) { el_js_fail(g, path, "pattern together with minLength/maxLength is not supported"); return NULL; }
        if (!pattern(g, &b, pat->valuestring, path)) { free(b.p); return NULL; }
    } else if (fmt && cJSON_IsString(fmt) && strcmp(fmt->valuestring, "date") && strcmp(fmt->valuestring, "time") &&
               strcmp(fmt->valuestring, "date-time") && strcmp(fmt->valuestring, "uuid")) {
        el_js_fail(g, path, "format '%.40s' is not supported (date, time, date-time, uuid are)", fmt->valuestring);
        return NULL;
    } else if (fmt && cJSON_IsString(fmt)) {
        const char *f = fmt->valuestring;
        const char *date = "[0-9]{4} \"-\" (\"0\" [1-9] | \"1\" [0-2]) \"-\" (\"0\" [1-9] | [1-2] [0-9] | \"3\" [0-1])";
        const char *time = "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] (\".\" [0-9]{3})? (\"Z\" | [+-] ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9])";
        if (!strcmp(f, "date")) el_js_sb_printf(&b, "\"\\\"\" %s \"\\\"\" space", date);
        else if (!strcmp(f, "time")) el_js_sb_printf(&b, "\"\\\"\" %s \"\\\"\" space", time);
        else if (!strcmp(f, "date-time")) { sb_puts(&b, "\"\\\"\" "); sb_puts(&b, date); sb_puts(&b, " \"T\" "); sb_puts(&b, time); sb_puts(&b, " \"\\\"\" space"); }
        else sb_puts(&b, "\"\\\"\" [0-9a-f]{8} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{12} \"\\\"\" space");
    } else if (mn == 0 && mx < 0) {
        free(b.p);
        return el_js_prim(g, "string");
    } else if (mx < 0) el_js_sb_printf(&b, "\"\\\"\" char{%ld,} \"\\\"\" space", mn);
    else el_js_sb_printf(&b, "\"\\\"\" char{%ld,%ld} \"\\\"\" space", mn, mx);
    const char *r = NULL;
    if (b.oom) el_js_fail(g, path, "out of memory");
    else r = el_js_add_rule(g, name, b.p);
    free(b.p);
    return r;
}

