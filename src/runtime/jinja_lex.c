/*
 * jinja_lex.c — the Jinja lexer: template text into tokens, with jinja2's
 * whitespace rules as transformers sets them (trim_blocks, lstrip_blocks).
 *
 * Contract: jl_lex turns the source into T_TEXT runs and tag contents
 * (T_VAR_BEGIN ... T_VAR_END, T_BLOCK_BEGIN ... T_BLOCK_END); comments and
 * {% raw %} markers leave no token (raw content becomes text). Rules, as
 * jinja2's lexer applies them:
 *   - one trailing newline of the template is dropped (keep_trailing_newline
 *     False); newlines in text and string literals are normalised to \n;
 *   - "{%-", "{{-", "{#-" strip all whitespace before the tag, "-%}", "-}}",
 *     "-#}" all whitespace after it;
 *   - trim_blocks: the first "\n" after a block or comment tag is removed;
 *   - lstrip_blocks: spaces/tabs from the start of a line up to a block or
 *     comment tag are removed (not before "{%+", not before "{{");
 *   - a tag ends at "}}" / "%}" only outside (), [], {} in its expression.
 * String literals are decoded like Python's (\n, \t, \xNN, \uNNNN, ...;
 * unknown escapes stay as written). Errors carry "line L, column C".
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/jinja_internal.h"

typedef struct lx {
    jarena *A;
    const char *s;
    size_t n, pos;
    size_t lpos; int line, col; /* cursor for line/column */
    jtok *t; size_t nt, cap;
    char *err; size_t errcap;
} lx;

static void where(lx *L, size_t off, int *line, int *col) {
    if (off < L->lpos) { L->lpos = 0; L->line = 1; L->col = 1; }
    for (; L->lpos < off; L->lpos++) {
        if (L->s[L->lpos] == '\n') { L->line++; L->col = 1; }
        else L->col++;
    }
    *line = L->line;
    *col = L->col;
}

static int fail(lx *L, size_t off, const char *msg) {
    int line, col;
    where(L, off, &line, &col);
    snprintf(L->err, L->errcap, "line %d, column %d: %s", line, col, msg);
    return -1;
}

static jtok *push(lx *L, jt_type t, size_t off) {
    if (L->nt == L->cap) {
        size_t nc = L->cap ? L->cap * 2 : 256;
        jtok *nt = ja_alloc(L->A, nc * sizeof *nt);
        if (!nt) return NULL;
        if (L->nt) memcpy(nt, L->t, L->nt * sizeof *nt);
        L->t = nt;
        L->cap = nc;
    }
    jtok *k = &L->t[L->nt++];
    memset(k, 0, sizeof *k);
    k->t = t;
    where(L, off, &k->line, &k->col);
    return k;
}

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

/* text [a, b) as a T_TEXT token with newlines normalised */
static int emit_text(lx *L, size_t a, size_t b) {
    if (b <= a) return 0;
    char *p = ja_alloc(L->A, b - a + 1);
    if (!p) return fail(L, a, "out of memory");
    size_t n = 0;
    for (size_t i = a; i < b; i++) {
        if (L->s[i] == '\r') {
            p[n++] = '\n';
            if (i + 1 < b && L->s[i + 1] == '\n') i++;
        } else p[n++] = L->s[i];
    }
    jtok *k = push(L, T_TEXT, a);
    if (!k) return fail(L, a, "out of memory");
    k->s = p;
    k->n = n;
    return 0;
}

/* where the next tag opener ({{ {% {#) is, or n */
static size_t next_tag(lx *L, size_t from) {
    for (size_t i = from; i + 1 < L->n; i++)
        if (L->s[i] == '{' && (L->s[i + 1] == '{' || L->s[i + 1] == '%' || L->s[i + 1] == '#')) return i;
    return L->n;
}

/* the end of the text [a, b) once whitespace control before a tag at b applies */
static size_t strip_before(lx *L, size_t a, size_t b, char kind, char sign) {
    if (sign == '-') {
        while (b > a && is_ws(L->s[b - 1])) b--;
        return b;
    }
    if (sign == '+' || kind == '{') return b;
    size_t l = b;
    while (l > a && L->s[l - 1] != '\n') l--;
    int line_start = l > a || a == 0 || L->s[a - 1] == '\n';
    if (!line_start) return b;
    for (size_t i = l; i < b; i++)
        if (!is_ws(L->s[i])) return b;
    return l;
}

static int lex_string(lx *L, size_t *pp) {
    size_t p = *pp, start = p;
    char q = L->s[p++];
    char *out = ja_alloc(L->A, L->n - p + 1);
    if (!out) return fail(L, start, "out of memory");
    size_t n = 0;
    for (;;) {
        if (p >= L->n) return fail(L, start, "unterminated string");
        char c = L->s[p];
        if (c == q) { p++; break; }
        if (c == '\\' && p + 1 < L->n) {
            char e = L->s[p + 1];
            unsigned long cp = 0;
            int hex = 0;
            p += 2;
            switch (e) {
            case 'n': out[n++] = '\n'; continue;
            case 't': out[n++] = '\t'; continue;
            case 'r': out[n++] = '\r'; continue;
            case 'b': out[n++] = '\b'; continue;
            case 'f': out[n++] = '\f'; continue;
            case 'v': out[n++] = '\v'; continue;
            case 'a': out[n++] = '\a'; continue;
            case '0': out[n++] = '\0'; continue;
            case '\\': out[n++] = '\\'; continue;
            case '\'': out[n++] = '\''; continue;
            case '"': out[n++] = '"'; continue;
            case '\n': continue;
            case 'x': hex = 2; break;
            case 'u': hex = 4; break;
            case 'U': hex = 8; break;
            default: out[n++] = '\\'; out[n++] = e; continue;
            }
            for (int i = 0; i < hex; i++, p++) {
                char h = p < L->n ? L->s[p] : 0;
                int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
                if (d < 0) return fail(L, p, "truncated \\x/\\u escape in a string");
                cp = cp * 16 + (unsigned long)d;
            }
            if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return fail(L, p, "bad code point in a string escape");
            if (cp < 0x80) out[n++] = (char)cp;
            else if (cp < 0x800) { out[n++] = (char)(0xC0 | cp >> 6); out[n++] = (char)(0x80 | (cp & 63)); }
            else if (cp < 0x10000) { out[n++] = (char)(0xE0 | cp >> 12); out[n++] = (char)(0x80 | ((cp >> 6) & 63)); out[n++] = (char)(0x80 | (cp & 63)); }
            else { out[n++] = (char)(0xF0 | cp >> 18); out[n++] = (char)(0x80 | ((cp >> 12) & 63)); out[n++] = (char)(0x80 | ((cp >> 6) & 63)); out[n++] = (char)(0x80 | (cp & 63)); }
            continue;
        }
        if (c == '\r') {
            out[n++] = '\n';
            p++;
            if (p < L->n && L->s[p] == '\n') p++;
            continue;
        }
        out[n++] = c;
        p++;
    }
    jtok *k = push(L, T_STRING, start);
    if (!k) return fail(L, start, "out of memory");
    k->s = out;
    k->n = n;
    *pp = p;
    return 0;
}

static int isdig(char c) { return c >= '0' && c <= '9'; }
static int isid(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || isdig(c); }

static int lex_number(lx *L, size_t *pp) {
    size_t p = *pp, start = p;
    char buf[64];
    size_t bn = 0;
    int is_float = 0;
    while (p < L->n && (isdig(L->s[p]) || (L->s[p] == '_' && p + 1 < L->n && isdig(L->s[p + 1])))) {
        if (L->s[p] != '_' && bn < 60) buf[bn++] = L->s[p];
        p++;
    }
    if (p + 1 < L->n && L->s[p] == '.' && isdig(L->s[p + 1]) && !(start > 0 && L->s[start - 1] == '.')) {
        is_float = 1;
        buf[bn++] = '.';
        p++;
        while (p < L->n && (isdig(L->s[p]) || (L->s[p] == '_' && p + 1 < L->n && isdig(L->s[p + 1])))) {
            if (L->s[p] != '_' && bn < 60) buf[bn++] = L->s[p];
            p++;
        }
    }
    if (p < L->n && (L->s[p] == 'e' || L->s[p] == 'E')) {
        size_t q = p + 1;
        if (q < L->n && (L->s[q] == '+' || L->s[q] == '-')) q++;
        if (q < L->n && isdig(L->s[q])) {
            is_float = 1;
            if (bn < 60) buf[bn++] = 'e';
            for (p++; p < L->n && (isdig(L->s[p]) || L->s[p] == '+' || L->s[p] == '-' || L->s[p] == '_'); p++)
                if (L->s[p] != '_' && bn < 62) buf[bn++] = L->s[p];
        }
    }
    buf[bn] = 0;
    jtok *k = push(L, is_float ? T_FLOAT : T_INT, start);
    if (!k) return fail(L, start, "out of memory");
    if (is_float) k->f = strtod(buf, NULL);
    else {
        errno = 0;
        k->i = strtoll(buf, NULL, 10);
        if (errno || bn > 19) return fail(L, start, "integer literal too large for 64 bits");
    }
    *pp = p;
    return 0;
}

/* the tokens of one tag's inside, from *pp to its end; kind '{' or '%' */
static int lex_tag(lx *L, size_t *pp, char kind, int *strip_after) {
    size_t p = *pp;
    int depth = 0;
    char close = kind == '{' ? '}' : '%';
    for (;;) {
        while (p < L->n && is_ws(L->s[p])) p++;
        if (p >= L->n) return fail(L, *pp, kind == '{' ? "unexpected end of template, expected '}}'" : "unexpected end of template, expected '%}'");
        char c = L->s[p];
        if (depth == 0) {
            if (c == '-' && p + 2 < L->n && L->s[p + 1] == close && L->s[p + 2] == '}') { *strip_after = 1; p += 3; break; }
            if (c == close && p + 1 < L->n && L->s[p + 1] == '}') { *strip_after = 0; p += 2; break; }
        }
        if (c == '\'' || c == '"') { if (lex_string(L, &p)) return -1; continue; }
        if (isdig(c)) { if (lex_number(L, &p)) return -1; continue; }
        if (isid(c)) {
            size_t a = p;
            while (p < L->n && isid(L->s[p])) p++;
            jtok *k = push(L, T_NAME, a);
            if (!k) return fail(L, a, "out of memory");
            k->s = L->s + a;
            k->n = p - a;
            continue;
        }
        static const char *two[] = {"//", "**", "==", "!=", "<=", ">="};
        size_t len = 0;
        for (int i = 0; i < 6; i++)
            if (p + 1 < L->n && L->s[p] == two[i][0] && L->s[p + 1] == two[i][1]) len = 2;
        if (!len && strchr("+-*/%~<>=()[]{},.:|", c)) len = 1;
        if (!len) {
            char m[64];
            snprintf(m, sizeof m, "unexpected char '%c'", c >= 32 && c < 127 ? c : '?');
            return fail(L, p, m);
        }
        if (c == '(' || c == '[' || c == '{') {
            if (++depth > EL_JINJA_MAX_NEST) return fail(L, p, "brackets nested too deep");
        } else if (c == ')' || c == ']' || c == '}') {
            if (depth == 0) return fail(L, p, "unexpected closing bracket");
            depth--;
        }
        jtok *k = push(L, T_OP, p);
        if (!k) return fail(L, p, "out of memory");
        k->s = L->s + p;
        k->n = len;
        p += len;
    }
    *pp = p;
    return 0;
}

/* {% raw %} just lexed as BLOCK_BEGIN NAME(raw) BLOCK_END: take the text up to {% endraw %} */
static int lex_raw(lx *L, size_t *pp, int strip_after) {
    size_t p = *pp, a = p;
    if (strip_after) while (a < L->n && is_ws(L->s[a])) a++;
    for (size_t i = a; i + 1 < L->n; i++) {
        if (L->s[i] != '{' || L->s[i + 1] != '%') continue;
        size_t j = i + 2;
        char sign = j < L->n && (L->s[j] == '-' || L->s[j] == '+') ? L->s[j++] : 0;
        while (j < L->n && is_ws(L->s[j])) j++;
        if (L->n - j < 6 || memcmp(L->s + j, "endraw", 6) != 0) continue;
        j += 6;
        while (j < L->n && is_ws(L->s[j])) j++;
        int strip = 0;
        if (j < L->n && L->s[j] == '-') { strip = 1; j++; }
        if (j + 1 >= L->n || L->s[j] != '%' || L->s[j + 1] != '}') return fail(L, i, "bad endraw tag");
        j += 2;
        L->nt -= 3; /* drop the raw tag's tokens */
        if (emit_text(L, a, strip_before(L, a, i, '%', sign))) return -1;
        if (strip) while (j < L->n && is_ws(L->s[j])) j++;
        else if (j < L->n && L->s[j] == '\n') j++;
        *pp = j;
        return 0;
    }
    return fail(L, p, "missing {% endraw %}");
}

int jl_lex(jarena *a, const char *src, size_t len, jtok **toks, size_t *ntok, char *err, size_t errcap) {
    lx L = {.A = a, .s = src, .n = len, .line = 1, .col = 1, .err = err, .errcap = errcap};
    if (L.n >= 2 && L.s[L.n - 2] == '\r' && L.s[L.n - 1] == '\n') L.n -= 2;
    else if (L.n && (L.s[L.n - 1] == '\n' || L.s[L.n - 1] == '\r')) L.n--;
    int strip_next = 0;
    while (L.pos < L.n) {
        size_t a0 = L.pos;
        if (strip_next) while (a0 < L.n && is_ws(L.s[a0])) a0++;
        strip_next = 0;
        size_t t = next_tag(&L, a0);
        if (t >= L.n) { if (emit_text(&L, a0, L.n)) return -1; break; }
        char kind = L.s[t + 1];
        char sign = t + 2 < L.n && (L.s[t + 2] == '-' || L.s[t + 2] == '+') ? L.s[t + 2] : 0;
        if (kind == '{' && sign == '+') sign = 0;
        if (emit_text(&L, a0, strip_before(&L, a0, t, kind, sign))) return -1;
        size_t p = t + 2 + (sign ? 1 : 0);
        if (kind == '#') {
            size_t e = p;
            while (e + 1 < L.n && !(L.s[e] == '#' && L.s[e + 1] == '}')) e++;
            if (e + 1 >= L.n) return fail(&L, t, "unterminated comment");
            int strip = e > p && L.s[e - 1] == '-';
            L.pos = e + 2;
            if (strip) strip_next = 1;
            else if (L.pos < L.n && L.s[L.pos] == '\n') L.pos++;
            continue;
        }
        if (!push(&L, kind == '{' ? T_VAR_BEGIN : T_BLOCK_BEGIN, t)) return fail(&L, t, "out of memory");
        size_t first = L.nt;
        int strip_after = 0;
        if (lex_tag(&L, &p, kind, &strip_after)) return -1;
        if (!push(&L, kind == '{' ? T_VAR_END : T_BLOCK_END, p - 2)) return fail(&L, p, "out of memory");
        L.pos = p;
        if (kind == '%' && L.nt == first + 2 && L.t[first].t == T_NAME && L.t[first].n == 3 &&
            memcmp(L.t[first].s, "raw", 3) == 0) {
            /* jinja2 keeps the newline after {% raw %} (its raw rule has no trim_blocks suffix) */
            if (lex_raw(&L, &L.pos, strip_after)) return -1;
            continue;
        }
        if (strip_after) strip_next = 1;
        else if (kind == '%' && L.pos < L.n && L.s[L.pos] == '\n') L.pos++;
    }
    if (!push(&L, T_EOF, L.n)) return fail(&L, L.n, "out of memory");
    *toks = L.t;
    *ntok = L.nt;
    return 0;
}
