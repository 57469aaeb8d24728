/*
 * grammar.c — GBNF parser, pushdown matcher and vocabulary-trie token mask.
 *
 * Contract (see grammar.h): the parser accepts llama.cpp's GBNF — rules
 * `name ::= alternatives` (a rule ends at a newline outside parentheses),
 * `|`, sequences, `( … )`, `*` `+` `?` `{m}` `{m,}` `{m,n}`, string literals,
 * `[…]` / `[^…]` classes with ranges, `.` (any code point), escapes
 * \n \r \t \\ \" \[ \] \- \xHH \uHHHH \UHHHHHHHH, `#` comments. Token
 * references (<…>) are refused. Errors carry line and column.
 *
 * Compiled form: one flat element array. Each rule is a list of
 * alternatives; an alternative is a run of elements ended by END. An element
 * is a CLASS (matches one code point) or a REF to a rule. Repetitions are
 * rewritten into helper rules the way llama.cpp does:
 *   S{m,n} → S…S (m times) O(n-m),  O(k) ::= S O(k-1) | ε,  O(1) ::= S | ε
 *   S{m,}  → S…S (m times) R,       R ::= S R | ε
 * so `*`, `+`, `?` are {0,}, {1,}, {0,1}. Left recursion (a rule reaching
 * itself without consuming input) is an error at compile time, which is what
 * makes stack expansion terminate.
 *
 * Matcher: a state is a set of stacks of positions (element indices). The top
 * of every stack is a CLASS element (or the stack is empty = the sentence may
 * end there). Advancing by a code point keeps the stacks whose top class
 * matches, moves their top past it and expands REF/END tops: a REF pushes
 * each alternative of its rule over the continuation (the continuation is
 * dropped when it is END: right recursion, e.g. repetitions, does not grow
 * the stack), END pops. Identical stacks are merged. All positions and stacks
 * live in buffers sized at el_gmatch_new; the current state sits at their
 * bottom and every computation uses the space above it, released in LIFO
 * order, so nothing is allocated after creation.
 *
 * Mask: depth-first over the trie; each trie node's state is computed once
 * from its parent's (bytes are decoded to code points on the way), an empty
 * stack set prunes the whole subtree.
 */
#include "runtime/grammar.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

/* ---- compiled grammar ------------------------------------------------------- */

enum { E_END = 0u, E_CLASS = 1u, E_REF = 2u };
#define ETYPE(e) ((e) >> 30)
#define EVAL(e) ((e) & 0x3fffffffu)
#define MKE(t, v) (((uint32_t)(t) << 30) | (uint32_t)(v))

typedef struct {
    uint32_t off; /* into ranges (pairs) */
    uint32_t n;
    uint32_t neg;
} gclass;

struct el_grammar {
    uint32_t *elems;
    size_t n_elems;
    uint32_t *alt_start; /* per alternative: its first element */
    uint32_t *rule_alt;  /* per rule: first alternative index; rule_alt[n_rules] = total */
    int n_rules;
    gclass *cls;
    uint32_t *ranges; /* lo, hi pairs */
    uint32_t root;
};

/* ---- parser ------------------------------------------------------------------ */

/* build-time body entries: B_ALT separates alternatives */
enum { B_CLASS = 1u, B_REF = 2u, B_ALT = 3u };

typedef struct {
    uint32_t *v;
    size_t n, cap;
} u32vec;

typedef struct {
    const char *name; /* the rule's name (an anonymous rule: its parent's) */
    size_t nlen;
    bool anon, defined;
    size_t ref_at; /* where it was first referenced (for "undefined rule") */
    u32vec body;
} gsym;

typedef struct {
    const char *s;
    size_t len, pos;
    el_error *err;
    bool failed;
    gsym *syms;
    int n_syms, cap_syms;
    u32vec ranges;
    gclass *cls;
    size_t n_cls, cap_cls;
    size_t n_elems; /* body entries over all rules */
    int nest;
    int *htab;       /* named rules by name: open addressing, -1 empty (anonymous rules are never looked up) */
    uint32_t hcap;   /* a power of two; at most half full */
    int n_named;
} parser;

static bool vpush(u32vec *v, uint32_t x) {
    if (v->n == v->cap) {
        size_t nc = v->cap ? v->cap * 2 : 16;
        uint32_t *p = realloc(v->v, nc * sizeof *p);
        if (!p) return false;
        v->v = p;
        v->cap = nc;
    }
    v->v[v->n++] = x;
    return true;
}

static void where(const parser *p, size_t at, int *line, int *col) {
    int l = 1, c = 1;
    for (size_t i = 0; i < at && i < p->len; i++) {
        if (p->s[i] == '\n') { l++; c = 1; } else c++;
    }
    *line = l;
    *col = c;
}

#define FAIL_AT(P, AT, ...)                                                                \
    do {                                                                                   \
        if (!(P)->failed) {                                                                \
            char m_[256];                                                                  \
            int l_, c_;                                                                    \
            snprintf(m_, sizeof m_, __VA_ARGS__);                                          \
            where((P), (AT), &l_, &c_);                                                    \
            el_set_error((P)->err, EL_ERR_GRAMMAR, "grammar: line %d, column %d: %s", l_, c_, m_); \
            (P)->failed = true;                                                            \
        }                                                                                  \
    } while (0)
#define FAIL(P, ...) FAIL_AT(P, (P)->pos, __VA_ARGS__)
#define OOM(P) FAIL(P, "out of memory")

static int cur(const parser *p) { return p->pos < p->len ? (unsigned char)p->s[p->pos] : -1; }
static int peek(const parser *p, size_t k) { return p->pos + k < p->len ? (unsigned char)p->s[p->pos + k] : -1; }

static bool is_word(int c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

static void space(parser *p, bool newline_ok) {
    for (;;) {
        int c = cur(p);
        if (c == ' ' || c == '\t') p->pos++;
        else if (c == '#') {
            while (cur(p) >= 0 && cur(p) != '\n' && cur(p) != '\r') p->pos++;
        } else if (newline_ok && (c == '\n' || c == '\r')) p->pos++;
        else return;
    }
}

static int new_sym(parser *p, const char *name, size_t nlen, bool anon) {
    if (p->n_syms >= EL_GRAMMAR_MAX_RULES) {
        FAIL(p, "more than %d rules", EL_GRAMMAR_MAX_RULES);
        return -1;
    }
    if (p->n_syms == p->cap_syms) {
        int nc = p->cap_syms ? p->cap_syms * 2 : 32;
        gsym *s = realloc(p->syms, (size_t)nc * sizeof *s);
        if (!s) { OOM(p); return -1; }
        p->syms = s;
        p->cap_syms = nc;
    }
    gsym *s = &p->syms[p->n_syms];
    memset(s, 0, sizeof *s);
    s->name = name;
    s->nlen = nlen;
    s->anon = anon;
    s->ref_at = p->pos;
    return p->n_syms++;
}

static uint32_t name_hash(const char *name, size_t nlen) {
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < nlen; i++) h = (h ^ (unsigned char)name[i]) * 16777619u;
    return h;
}

/* A name's rule, created on first use. Hashed: a linear search per reference was quadratic in the rule count
 * (45,000 rules in a 1 MB grammar took 7 s to parse). */
static int find_sym(parser *p, const char *name, size_t nlen) {
    if ((uint32_t)(p->n_named + 1) * 2 > p->hcap) {
        uint32_t nc = p->hcap ? p->hcap * 2 : 64;
        int *t = malloc(sizeof *t * nc);
        if (!t) { OOM(p); return -1; }
        memset(t, 0xff, sizeof *t * nc);
        for (int i = 0; i < p->n_syms; i++) {
            if (p->syms[i].anon) continue;
            uint32_t k = name_hash(p->syms[i].name, p->syms[i].nlen) & (nc - 1);
            while (t[k] >= 0) k = (k + 1) & (nc - 1);
            t[k] = i;
        }
        free(p->htab);
        p->htab = t;
        p->hcap = nc;
    }
    uint32_t k = name_hash(name, nlen) & (p->hcap - 1);
    for (; p->htab[k] >= 0; k = (k + 1) & (p->hcap - 1)) {
        const gsym *y = &p->syms[p->htab[k]];
        if (y->nlen == nlen && memcmp(y->name, name, nlen) == 0) return p->htab[k];
    }
    int r = new_sym(p, name, nlen, false);
    if (r >= 0) p->htab[k] = r, p->n_named++;
    return r;
}

static bool body_push(parser *p, int rule, uint32_t x) {
    if (p->n_elems >= EL_GRAMMAR_MAX_ELEMS) {
        FAIL(p, "grammar too large (more than %u elements after expanding repetitions)", EL_GRAMMAR_MAX_ELEMS);
        return false;
    }
    if (!vpush(&p->syms[rule].body, x)) { OOM(p); return false; }
    p->n_elems++;
    return true;
}

static int new_class(parser *p, bool neg) {
    if (p->n_cls == p->cap_cls) {
        size_t nc = p->cap_cls ? p->cap_cls * 2 : 32;
        gclass *c = realloc(p->cls, nc * sizeof *c);
        if (!c) { OOM(p); return -1; }
        p->cls = c;
        p->cap_cls = nc;
    }
    if (p->n_cls >= EL_GRAMMAR_MAX_ELEMS) { FAIL(p, "too many character classes"); return -1; }
    p->cls[p->n_cls] = (gclass){.off = (uint32_t)(p->ranges.n / 2), .n = 0, .neg = neg};
    return (int)p->n_cls++;
}

static bool class_range(parser *p, int ci, uint32_t lo, uint32_t hi) {
    if (!vpush(&p->ranges, lo) || !vpush(&p->ranges, hi)) { OOM(p); return false; }
    p->cls[ci].n++;
    return true;
}

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* decodes one UTF-8 code point at p->pos; -1 (failed) when invalid */
static int64_t utf8_at(parser *p) {
    int c = cur(p);
    int need = c < 0x80 ? 0 : (c & 0xe0) == 0xc0 ? 1 : (c & 0xf0) == 0xe0 ? 2 : (c & 0xf8) == 0xf0 ? 3 : -1;
    if (need < 0) { FAIL(p, "invalid UTF-8 byte 0x%02x", c); return -1; }
    uint32_t cp = need == 0 ? (uint32_t)c : need == 1 ? (uint32_t)(c & 0x1f) : need == 2 ? (uint32_t)(c & 0x0f) : (uint32_t)(c & 0x07);
    for (int i = 1; i <= need; i++) {
        int d = peek(p, (size_t)i);
        if (d < 0 || (d & 0xc0) != 0x80) { FAIL(p, "truncated UTF-8 sequence"); return -1; }
        cp = cp << 6 | (uint32_t)(d & 0x3f);
    }
    p->pos += (size_t)need + 1;
    return cp;
}

/* one character of a literal or class (escapes decoded); -1 on error */
static int64_t parse_char(parser *p) {
    if (cur(p) < 0) { FAIL(p, "unexpected end of input"); return -1; }
    if (cur(p) != '\\') return utf8_at(p);
    size_t at = p->pos;
    int e = peek(p, 1);
    int nhex = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
    if (nhex) {
        uint32_t v = 0;
        for (int i = 0; i < nhex; i++) {
            int h = hexval(peek(p, (size_t)(2 + i)));
            if (h < 0) { FAIL_AT(p, at, "bad \\%c escape: expecting %d hex digits", e, nhex); return -1; }
            v = v << 4 | (uint32_t)h;
        }
        if (v > 0x10ffff) { FAIL_AT(p, at, "code point 0x%x out of range", v); return -1; }
        p->pos += 2 + (size_t)nhex;
        return v;
    }
    int64_t v;
    switch (e) {
    case 'n': v = '\n'; break;
    case 'r': v = '\r'; break;
    case 't': v = '\t'; break;
    case '\\': case '"': case '[': case ']': case '-': case '^': case '\'': case '/': v = e; break;
    default:
        if (e < 0) FAIL_AT(p, at, "unexpected end of input after '\\'");
        else FAIL_AT(p, at, "unknown escape '\\%c'", e);
        return -1;
    }
    p->pos += 2;
    return v;
}

static bool parse_alternates(parser *p, int rule, bool nested);

static bool parse_uint(parser *p, uint64_t *out) {
    size_t at = p->pos;
    uint64_t v = 0;
    while (cur(p) >= '0' && cur(p) <= '9') {
        v = v * 10 + (uint64_t)(cur(p) - '0');
        if (v > 1000000) { FAIL_AT(p, at, "repetition count too large"); return false; }
        p->pos++;
    }
    if (p->pos == at) { FAIL(p, "expecting a number"); return false; }
    *out = v;
    return true;
}

/* Rewrites body[last..end) of rule as its repetition {mn, mx} (mx = UINT64_MAX: no bound). */
static bool repeat(parser *p, int rule, size_t last, uint64_t mn, uint64_t mx) {
    u32vec *b = &p->syms[rule].body;
    if (last >= b->n) { FAIL(p, "expecting an item before the repetition operator"); return false; }
    const bool nomax = mx == UINT64_MAX;
    size_t plen = b->n - last;
    uint64_t n_opt = nomax ? 1 : mx - mn;
    /* elements this adds: (mn-1) copies + n_opt rules of plen+2 */
    uint64_t add = (mn > 0 ? (mn - 1) * plen : 0) + n_opt * (plen + 2) + 1;
    if (add > EL_GRAMMAR_MAX_ELEMS || p->n_elems + add > EL_GRAMMAR_MAX_ELEMS) {
        FAIL(p, "repetition too large (%llu elements; the limit is %u)", (unsigned long long)add, EL_GRAMMAR_MAX_ELEMS);
        return false;
    }
    if (n_opt + (uint64_t)p->n_syms > EL_GRAMMAR_MAX_RULES) {
        FAIL(p, "repetition needs too many rules (limit %d)", EL_GRAMMAR_MAX_RULES);
        return false;
    }
    uint32_t *prev = malloc(plen * sizeof *prev);
    if (!prev) { OOM(p); return false; }
    memcpy(prev, b->v + last, plen * sizeof *prev);
    bool ok = true;
    if (mn == 0) {
        p->n_elems -= plen;
        b->n = last;
    } else {
        for (uint64_t i = 1; i < mn && ok; i++)
            for (size_t j = 0; j < plen && ok; j++) ok = body_push(p, rule, prev[j]);
    }
    int last_rec = -1;
    for (uint64_t i = 0; i < n_opt && ok; i++) {
        int r = new_sym(p, p->syms[rule].name, p->syms[rule].nlen, true);
        if (r < 0) { ok = false; break; }
        p->syms[r].defined = true;
        for (size_t j = 0; j < plen && ok; j++) ok = body_push(p, r, prev[j]);
        if (ok && (i > 0 || nomax)) ok = body_push(p, r, MKE(B_REF, (uint32_t)(nomax ? r : last_rec)));
        if (ok) ok = body_push(p, r, MKE(B_ALT, 0)); /* second alternative: empty */
        last_rec = r;
    }
    if (ok && n_opt > 0) ok = body_push(p, rule, MKE(B_REF, (uint32_t)last_rec));
    free(prev);
    return ok;
}

static bool parse_sequence(parser *p, int rule, bool nested) {
    size_t last = SIZE_MAX; /* start of the last item in the body */
    while (!p->failed) {
        int c = cur(p);
        u32vec *b = &p->syms[rule].body;
        if (c == '"') {
            p->pos++;
            last = b->n;
            while (cur(p) != '"') {
                int64_t ch = parse_char(p);
                if (ch < 0) return false;
                int ci = new_class(p, false);
                if (ci < 0 || !class_range(p, ci, (uint32_t)ch, (uint32_t)ch) ||
                    !body_push(p, rule, MKE(B_CLASS, (uint32_t)ci)))
                    return false;
            }
            p->pos++;
            if (last == p->syms[rule].body.n) last = SIZE_MAX; /* "" is nothing */
            space(p, nested);
        } else if (c == '[') {
            size_t at = p->pos++;
            bool neg = cur(p) == '^';
            if (neg) p->pos++;
            int ci = new_class(p, neg);
            if (ci < 0) return false;
            while (cur(p) != ']') {
                if (cur(p) < 0) { FAIL_AT(p, at, "unterminated character class"); return false; }
                int64_t lo = parse_char(p);
                if (lo < 0) return false;
                int64_t hi = lo;
                if (cur(p) == '-' && peek(p, 1) != ']' && peek(p, 1) >= 0) {
                    p->pos++;
                    hi = parse_char(p);
                    if (hi < 0) return false;
                    if (hi < lo) { FAIL(p, "character range is reversed"); return false; }
                }
                if (!class_range(p, ci, (uint32_t)lo, (uint32_t)hi)) return false;
            }
            p->pos++;
            last = b->n;
            if (!body_push(p, rule, MKE(B_CLASS, (uint32_t)ci))) return false;
            space(p, nested);
        } else if (c == '.') {
            p->pos++;
            int ci = new_class(p, true); /* [^] : any code point */
            if (ci < 0) return false;
            last = b->n;
            if (!body_push(p, rule, MKE(B_CLASS, (uint32_t)ci))) return false;
            space(p, nested);
        } else if (is_word(c)) {
            size_t at = p->pos;
            while (is_word(cur(p))) p->pos++;
            size_t save = p->pos;
            p->pos = at;
            int r = find_sym(p, p->s + at, save - at);
            p->pos = save;
            if (r < 0) return false;
            last = p->syms[rule].body.n;
            if (!body_push(p, rule, MKE(B_REF, (uint32_t)r))) return false;
            space(p, nested);
        } else if (c == '(') {
            size_t at = p->pos++;
            if (++p->nest > EL_GRAMMAR_MAX_NEST) { FAIL_AT(p, at, "groups nested deeper than %d", EL_GRAMMAR_MAX_NEST); return false; }
            space(p, true);
            int sub = new_sym(p, p->syms[rule].name, p->syms[rule].nlen, true);
            if (sub < 0) return false;
            p->syms[sub].defined = true;
            if (!parse_alternates(p, sub, true)) return false;
            if (cur(p) != ')') { FAIL_AT(p, at, "expecting ')' to close this group"); return false; }
            p->pos++;
            p->nest--;
            last = p->syms[rule].body.n;
            if (!body_push(p, rule, MKE(B_REF, (uint32_t)sub))) return false;
            space(p, nested);
        } else if (c == '*' || c == '+' || c == '?') {
            if (last == SIZE_MAX) { FAIL(p, "expecting an item before '%c'", c); return false; }
            p->pos++;
            if (!repeat(p, rule, last, c == '+' ? 1 : 0, c == '?' ? 1 : UINT64_MAX)) return false;
            space(p, nested);
        } else if (c == '{') {
            if (last == SIZE_MAX) { FAIL(p, "expecting an item before '{'"); return false; }
            p->pos++;
            space(p, nested);
            uint64_t mn, mx;
            if (!parse_uint(p, &mn)) return false;
            space(p, nested);
            if (cur(p) == ',') {
                p->pos++;
                space(p, nested);
                if (cur(p) >= '0' && cur(p) <= '9') {
                    if (!parse_uint(p, &mx)) return false;
                    space(p, nested);
                } else mx = UINT64_MAX;
            } else mx = mn;
            if (cur(p) != '}') { FAIL(p, "expecting '}'"); return false; }
            if (mx < mn) { FAIL(p, "repetition {%llu,%llu}: max below min", (unsigned long long)mn, (unsigned long long)mx); return false; }
            p->pos++;
            if (!repeat(p, rule, last, mn, mx)) return false;
            space(p, nested);
        } else if (c == '<' || c == '!') {
            FAIL(p, "token references (<…>) are not supported");
            return false;
        } else {
            return true;
        }
    }
    return false;
}

static bool parse_alternates(parser *p, int rule, bool nested) {
    if (!parse_sequence(p, rule, nested)) return false;
    while (cur(p) == '|') {
        p->pos++;
        if (!body_push(p, rule, MKE(B_ALT, 0))) return false;
        space(p, true);
        if (!parse_sequence(p, rule, nested)) return false;
    }
    return !p->failed;
}

static bool parse_rule(parser *p) {
    size_t at = p->pos;
    if (!is_word(cur(p))) { FAIL(p, "expecting a rule name"); return false; }
    while (is_word(cur(p))) p->pos++;
    size_t nlen = p->pos - at;
    size_t end = p->pos;
    p->pos = at;
    int r = find_sym(p, p->s + at, nlen);
    p->pos = end;
    if (r < 0) return false;
    if (p->syms[r].defined) { FAIL_AT(p, at, "rule '%.*s' is defined twice", (int)(nlen > 64 ? 64 : nlen), p->s + at); return false; }
    p->syms[r].defined = true;
    space(p, false);
    if (!(cur(p) == ':' && peek(p, 1) == ':' && peek(p, 2) == '=')) { FAIL(p, "expecting '::='"); return false; }
    p->pos += 3;
    space(p, true);
    if (!parse_alternates(p, r, false)) return false;
    if (cur(p) == '\r') p->pos++;
    if (cur(p) == '\n') p->pos++;
    else if (cur(p) >= 0) { FAIL(p, "unexpected '%c': expecting newline or end", cur(p)); return false; }
    space(p, true);
    return true;
}

/* ---- compile: flatten, nullable, left recursion ------------------------------ */

static bool left_recursion(parser *p, el_grammar *g) {
    const int nr = g->n_rules;
    uint8_t *nullable = calloc((size_t)nr, 1);
    uint8_t *color = calloc((size_t)nr, 1);
    int *stk = malloc(sizeof *stk * (size_t)nr * 3 + 3);
    bool bad = false;
    if (!nullable || !color || !stk) { OOM(p); bad = true; goto out; }
    /* nullable rules by a worklist: each alternative counts its elements not yet known nullable (a class
     * never is), and a rule found nullable decrements the alternatives that reference it. Linear in the
     * elements; the fixpoint pass it replaces was quadratic on a chain (20,000 rules: 2.3 s). */
    const uint32_t n_alt = g->rule_alt[nr];
    uint32_t *left = malloc(sizeof *left * (n_alt + 1));        /* per alternative: elements to go */
    uint32_t *alt_rule = malloc(sizeof *alt_rule * (n_alt + 1)); /* per alternative: its rule */
    uint32_t *uoff = calloc((size_t)nr + 1, sizeof *uoff);      /* per rule: where its uses start in use */
    uint32_t *use = malloc(sizeof *use * (g->n_elems + 1));     /* alternatives referencing each rule */
    int *work = malloc(sizeof *work * ((size_t)nr + 1));
    if (!left || !alt_rule || !uoff || !use || !work) {
        OOM(p);
        bad = true;
    } else {
        for (int r = 0; r < nr; r++)
            for (uint32_t a = g->rule_alt[r]; a < g->rule_alt[r + 1]; a++)
                for (uint32_t i = g->alt_start[a]; ETYPE(g->elems[i]) != E_END; i++)
                    if (ETYPE(g->elems[i]) == E_REF) uoff[EVAL(g->elems[i]) + 1]++;
        for (int r = 0; r < nr; r++) uoff[r + 1] += uoff[r];
        int nw = 0;
        for (int r = 0; r < nr; r++)
            for (uint32_t a = g->rule_alt[r]; a < g->rule_alt[r + 1]; a++) {
                uint32_t n = 0;
                bool cls = false;
                alt_rule[a] = (uint32_t)r;
                for (uint32_t i = g->alt_start[a]; ETYPE(g->elems[i]) != E_END; i++) {
                    const uint32_t e = g->elems[i];
                    if (ETYPE(e) == E_CLASS) cls = true;
                    else use[uoff[EVAL(e)]++] = a, n++;
                }
                left[a] = cls ? UINT32_MAX : n;
                if (n == 0 && !cls && !nullable[r]) nullable[r] = 1, work[nw++] = r;
            }
        for (int r = nr; r > 0; r--) uoff[r] = uoff[r - 1]; /* the fill advanced each start to its end */
        uoff[0] = 0;
        while (nw > 0) {
            const int x = work[--nw];
            for (uint32_t u = uoff[x]; u < uoff[x + 1]; u++) {
                const uint32_t a = use[u];
                if (left[a] == UINT32_MAX || --left[a] != 0) continue;
                const uint32_t r = alt_rule[a];
                if (!nullable[r]) nullable[r] = 1, work[nw++] = (int)r;
            }
        }
    }
    free(left);
    free(alt_rule);
    free(uoff);
    free(use);
    free(work);
    if (bad) goto out;
    /* DFS over "r can start with x" edges; a back edge is left recursion.
     * stk holds (rule, alternative, element) frames: the cursor is where the
     * next edge is looked for, so each element is visited once per rule (a
     * count of edges re-walked from the start on every step was quadratic:
     * 100,100 nullable references in one rule, from "(...){0}){100100}",
     * took minutes). */
    for (int s = 0; s < nr && !bad; s++) {
        if (color[s]) continue;
        int sp = 0;
        stk[sp++] = s;
        stk[sp++] = (int)g->rule_alt[s];
        stk[sp++] = -1;
        color[s] = 1;
        while (sp > 0 && !bad) {
            const int r = stk[sp - 3];
            int a = stk[sp - 2], i = stk[sp - 1], next = -1;
            while (next < 0 && (uint32_t)a < g->rule_alt[r + 1]) {
                if (i < 0) i = (int)g->alt_start[a];
                const uint32_t e = g->elems[i];
                if (ETYPE(e) != E_REF) { a++; i = -1; continue; } /* a class or the end stops this alternative */
                next = (int)EVAL(e);
                if (nullable[next]) i++; /* the element after a nullable one can start r too */
                else { a++; i = -1; }
            }
            stk[sp - 2] = a;
            stk[sp - 1] = i;
            if (next < 0) { color[r] = 2; sp -= 3; continue; }
            if (color[next] == 1) {
                const gsym *y = &p->syms[next];
                el_set_error(p->err, EL_ERR_GRAMMAR, "grammar: left recursion through rule '%.*s' (it can reach itself without consuming input)",
                             (int)(y->nlen > 64 ? 64 : y->nlen), y->name);
                p->failed = bad = true;
            } else if (color[next] == 0) {
                color[next] = 1;
                stk[sp++] = next;
                stk[sp++] = (int)g->rule_alt[next];
                stk[sp++] = -1;
            }
        }
    }
out:
    free(nullable);
    free(color);
    free(stk);
    return !bad;
}

void el_grammar_free(el_grammar *g) {
    if (!g) return;
    free(g->elems);
    free(g->alt_start);
    free(g->rule_alt);
    free(g->cls);
    free(g->ranges);
    free(g);
}

int el_grammar_n_rules(const el_grammar *g) { return g ? g->n_rules : 0; }

el_grammar *el_grammar_parse(const char *text, size_t len, el_error *err) {
    if (!text) { el_set_error(err, EL_ERR_INVALID_ARG, "grammar: no text"); return NULL; }
    if (len > EL_GRAMMAR_MAX_TEXT) {
        el_set_error(err, EL_ERR_GRAMMAR, "grammar: %zu bytes (limit %u)", len, EL_GRAMMAR_MAX_TEXT);
        return NULL;
    }
    parser p = {.s = text, .len = len, .err = err};
    el_grammar *g = NULL;
    space(&p, true);
    while (!p.failed && cur(&p) >= 0) parse_rule(&p);
    if (!p.failed) {
        for (int i = 0; i < p.n_syms; i++)
            if (!p.syms[i].defined) {
                FAIL_AT(&p, p.syms[i].ref_at, "undefined rule '%.*s'", (int)(p.syms[i].nlen > 64 ? 64 : p.syms[i].nlen), p.syms[i].name);
                break;
            }
    }
    int root = -1;
    for (int i = 0; i < p.n_syms && !p.failed; i++)
        if (!p.syms[i].anon && p.syms[i].nlen == 4 && memcmp(p.syms[i].name, "root", 4) == 0) root = i;
    if (!p.failed && root < 0) FAIL_AT(&p, 0, "no rule named 'root'");
    if (p.failed) goto out;

    g = calloc(1, sizeof *g);
    if (!g) { OOM(&p); goto out; }
    size_t n_alt = 0, n_el = 0;
    for (int i = 0; i < p.n_syms; i++) {
        n_alt++;
        for (size_t j = 0; j < p.syms[i].body.n; j++) {
            if (ETYPE(p.syms[i].body.v[j]) == B_ALT) n_alt++, n_el++;
            else n_el++;
        }
        n_el++;
    }
    g->n_rules = p.n_syms;
    g->elems = malloc(sizeof *g->elems * (n_el + 1));
    g->alt_start = malloc(sizeof *g->alt_start * (n_alt + 1));
    g->rule_alt = malloc(sizeof *g->rule_alt * ((size_t)p.n_syms + 1));
    g->cls = malloc(sizeof *g->cls * (p.n_cls + 1));
    g->ranges = malloc(sizeof *g->ranges * (p.ranges.n + 1));
    if (!g->elems || !g->alt_start || !g->rule_alt || !g->cls || !g->ranges) { OOM(&p); goto out; }
    if (p.n_cls) memcpy(g->cls, p.cls, sizeof *g->cls * p.n_cls);
    if (p.ranges.n) memcpy(g->ranges, p.ranges.v, sizeof *g->ranges * p.ranges.n);
    size_t ne = 0, na = 0;
    for (int i = 0; i < p.n_syms; i++) {
        g->rule_alt[i] = (uint32_t)na;
        g->alt_start[na++] = (uint32_t)ne;
        for (size_t j = 0; j < p.syms[i].body.n; j++) {
            uint32_t e = p.syms[i].body.v[j];
            if (ETYPE(e) == B_ALT) {
                g->elems[ne++] = MKE(E_END, 0);
                g->alt_start[na++] = (uint32_t)ne;
            } else {
                g->elems[ne++] = MKE(ETYPE(e) == B_CLASS ? E_CLASS : E_REF, EVAL(e));
            }
        }
        g->elems[ne++] = MKE(E_END, 0);
    }
    g->rule_alt[p.n_syms] = (uint32_t)na;
    g->n_elems = ne;
    g->root = (uint32_t)root;
    if (!left_recursion(&p, g)) goto out;
out:
    for (int i = 0; i < p.n_syms; i++) free(p.syms[i].body.v);
    free(p.syms);
    free(p.htab);
    free(p.cls);
    free(p.ranges.v);
    if (p.failed) {
        el_grammar_free(g);
        return NULL;
    }
    return g;
}

/* ---- matcher ------------------------------------------------------------------- */

typedef struct {
    uint32_t off, len;
} gstack;

#define POS_CAP (1u << 20)
#define ST_CAP (1u << 16)
#define TMP_CAP (1u << 16)
#define EXPAND_BUDGET 200000
#define MAX_RECURSION 4096

struct el_gmatch {
    const el_grammar *g;
    uint32_t *pos; /* stack contents */
    size_t pos_top;
    gstack *st;
    size_t st_top;
    uint32_t *tmp; /* expansion scratch */
    size_t tmp_top;
    size_t cur_n;   /* the state: st[0..cur_n), positions pos[0..cur_pos) */
    size_t cur_pos;
    uint32_t u_acc; /* a code point split across tokens: bits so far, bytes still needed */
    int u_need;
    int budget, depth;
    bool err;
};

static bool class_has(const el_grammar *g, uint32_t ci, uint32_t c) {
    const gclass *k = &g->cls[ci];
    const uint32_t *r = g->ranges + 2 * (size_t)k->off;
    bool in = false;
    for (uint32_t i = 0; i < k->n && !in; i++) in = c >= r[2 * i] && c <= r[2 * i + 1];
    return in != (k->neg != 0);
}

/* can the class match some code point in [lo, hi]? */
static bool class_meets(const el_grammar *g, uint32_t ci, uint32_t lo, uint32_t hi) {
    const gclass *k = &g->cls[ci];
    const uint32_t *r = g->ranges + 2 * (size_t)k->off;
    for (uint32_t i = 0; i < k->n; i++) {
        bool meets = r[2 * i] <= hi && r[2 * i + 1] >= lo;
        if (!k->neg && meets) return true;
        if (k->neg && r[2 * i] <= lo && r[2 * i + 1] >= hi) return false; /* one range covers it all */
    }
    return k->neg != 0;
}

static void emit(el_gmatch *m, const uint32_t *P, uint32_t L, size_t set_lo) {
    for (size_t i = set_lo; i < m->st_top; i++)
        if (m->st[i].len == L && memcmp(m->pos + m->st[i].off, P, L * sizeof *P) == 0) return;
    if (m->st_top - set_lo >= EL_GRAMMAR_MAX_STACKS || m->st_top >= ST_CAP || m->pos_top + L > POS_CAP) {
        m->err = true;
        return;
    }
    memcpy(m->pos + m->pos_top, P, L * sizeof *P);
    m->st[m->st_top++] = (gstack){(uint32_t)m->pos_top, L};
    m->pos_top += L;
}

/* P[0..L) lives in tmp (owned by the caller); expands until every stack's top is a class. */
static void expand(el_gmatch *m, uint32_t *P, uint32_t L, size_t set_lo) {
    const el_grammar *g = m->g;
    if (m->err) return;
    if (--m->budget < 0 || ++m->depth > MAX_RECURSION) { m->err = true; m->depth--; return; }
    for (;;) {
        if (L == 0) { emit(m, P, 0, set_lo); break; }
        uint32_t p = P[L - 1], e = g->elems[p];
        if (ETYPE(e) == E_END) { L--; continue; }
        if (ETYPE(e) == E_CLASS) { emit(m, P, L, set_lo); break; }
        uint32_t r = EVAL(e);
        if (ETYPE(g->elems[p + 1]) == E_END) L--; /* tail position: nothing to come back to */
        else P[L - 1] = p + 1;
        if (L + 1 > EL_GRAMMAR_MAX_DEPTH || m->tmp_top + L + 1 > TMP_CAP) { m->err = true; break; }
        uint32_t *Q = m->tmp + m->tmp_top;
        m->tmp_top += L + 1;
        for (uint32_t a = g->rule_alt[r]; a < g->rule_alt[r + 1] && !m->err; a++) {
            memcpy(Q, P, L * sizeof *P);
            Q[L] = g->alt_start[a];
            expand(m, Q, L + 1, set_lo);
        }
        m->tmp_top -= L + 1;
        break;
    }
    m->depth--;
}

/* stacks [lo, hi) advanced by code point c, appended as a new set; returns its start */
static size_t advance(el_gmatch *m, size_t lo, size_t hi, uint32_t c) {
    const el_grammar *g = m->g;
    size_t out = m->st_top;
    m->budget = EXPAND_BUDGET;
    for (size_t i = lo; i < hi && !m->err; i++) {
        gstack s = m->st[i];
        if (s.len == 0) continue;
        uint32_t p = m->pos[s.off + s.len - 1];
        if (!class_has(g, EVAL(g->elems[p]), c)) continue;
        if (m->tmp_top + s.len > TMP_CAP) { m->err = true; break; }
        uint32_t *Q = m->tmp + m->tmp_top;
        m->tmp_top += s.len;
        memcpy(Q, m->pos + s.off, s.len * sizeof *Q);
        Q[s.len - 1] = p + 1;
        expand(m, Q, s.len, out);
        m->tmp_top -= s.len;
    }
    return out;
}

/* A code point split across bytes: acc holds its bits so far; need packs
 * the sequence length (need >> 4) and the bytes still to come (need & 7);
 * need == 0 between code points. Only well-formed UTF-8 gets through (no
 * overlong forms, surrogates or values above U+10FFFF: the second byte is
 * checked as in Unicode's table 3-7), so the values a prefix can still become
 * are exactly [acc << 6r, (acc << 6r) | (2^6r - 1)] clamped to the sequence
 * length's range. */
static bool partial_ok(const el_gmatch *m, size_t lo, size_t hi, uint32_t acc, int need) {
    static const uint32_t MINV[5] = {0, 0, 0x80, 0x800, 0x10000};
    int rem = need & 7, len = need >> 4;
    uint32_t a = acc << (6 * rem), b = a | ((1u << (6 * rem)) - 1);
    if (a < MINV[len]) a = MINV[len];
    if (b > 0x10ffff) b = 0x10ffff;
    if (a > b) return false;
    for (size_t i = lo; i < hi; i++) {
        gstack s = m->st[i];
        if (s.len && class_meets(m->g, EVAL(m->g->elems[m->pos[s.off + s.len - 1]]), a, b)) return true;
    }
    return false;
}

/* UTF-8 decoder step: 1 a code point is complete (*cp), 0 more bytes needed, -1 ill-formed */
static int utf8_step(uint32_t *acc, int *need, unsigned char b, uint32_t *cp) {
    if (*need) {
        if ((b & 0xc0) != 0x80) return -1;
        int rem = *need & 7, len = *need >> 4;
        if (rem == len - 1) { /* the second byte */
            if (len == 3 && *acc == 0x0 && b < 0xa0) return -1;  /* E0: overlong */
            if (len == 3 && *acc == 0xd && b > 0x9f) return -1;  /* ED: surrogates */
            if (len == 4 && *acc == 0x0 && b < 0x90) return -1;  /* F0: overlong */
            if (len == 4 && *acc == 0x4 && b > 0x8f) return -1;  /* F4: above U+10FFFF */
        }
        *acc = *acc << 6 | (b & 0x3fu);
        if (--rem > 0) { *need = len << 4 | rem; return 0; }
        *need = 0;
        *cp = *acc;
        return 1;
    }
    if (b < 0x80) { *cp = b; return 1; }
    if (b >= 0xc2 && b <= 0xdf) { *acc = b & 0x1fu; *need = 2 << 4 | 1; return 0; }
    if ((b & 0xf0) == 0xe0) { *acc = b & 0x0fu; *need = 3 << 4 | 2; return 0; }
    if (b >= 0xf0 && b <= 0xf4) { *acc = b & 0x07u; *need = 4 << 4 | 3; return 0; }
    return -1;
}

el_gmatch *el_gmatch_new(const el_grammar *g, el_error *err) {
    if (!g) { el_set_error(err, EL_ERR_INVALID_ARG, "grammar: NULL"); return NULL; }
    el_gmatch *m = calloc(1, sizeof *m);
    if (!m) goto oom;
    m->g = g;
    m->pos = malloc(sizeof *m->pos * POS_CAP);
    m->st = malloc(sizeof *m->st * ST_CAP);
    m->tmp = malloc(sizeof *m->tmp * TMP_CAP);
    if (!m->pos || !m->st || !m->tmp) goto oom;
    uint32_t *Q = m->tmp;
    m->budget = EXPAND_BUDGET;
    for (uint32_t a = g->rule_alt[g->root]; a < g->rule_alt[g->root + 1] && !m->err; a++) {
        m->tmp_top = 1;
        Q[0] = g->alt_start[a];
        expand(m, Q, 1, 0);
    }
    m->tmp_top = 0;
    if (m->err) {
        el_set_error(err, EL_ERR_GRAMMAR, "grammar: the start state exceeds the matcher's limits (%d stacks, depth %d)",
                     EL_GRAMMAR_MAX_STACKS, EL_GRAMMAR_MAX_DEPTH);
        el_gmatch_free(m);
        return NULL;
    }
    m->cur_n = m->st_top;
    m->cur_pos = m->pos_top;
    return m;
oom:
    el_set_error(err, EL_ERR_NOMEM, "grammar: out of memory for the matcher");
    el_gmatch_free(m);
    return NULL;
}

void el_gmatch_free(el_gmatch *m) {
    if (!m) return;
    free(m->pos);
    free(m->st);
    free(m->tmp);
    free(m);
}

/* Runs bytes from the current state; leaves the final set at [*lo, *hi) above
 * the state. Returns 1 accepted, 0 rejected, -1 limit. */
static int run_bytes(el_gmatch *m, const char *bytes, size_t n, size_t *lo_out, size_t *hi_out, uint32_t *acc, int *need) {
    size_t lo = 0, hi = m->cur_n;
    *acc = m->u_acc;
    *need = m->u_need;
    for (size_t i = 0; i < n; i++) {
        uint32_t cp;
        int r = utf8_step(acc, need, (unsigned char)bytes[i], &cp);
        if (r < 0) return 0;
        if (r == 0) continue;
        size_t nlo = advance(m, lo, hi, cp);
        if (m->err) return -1;
        lo = nlo;
        hi = m->st_top;
        if (lo == hi) return 0;
    }
    *lo_out = lo;
    *hi_out = hi;
    if (*need > 0 && !partial_ok(m, lo, hi, *acc, *need)) return 0;
    return 1;
}

static void reset_above(el_gmatch *m) {
    m->st_top = m->cur_n;
    m->pos_top = m->cur_pos;
    m->tmp_top = 0;
    m->err = false;
    m->depth = 0;
}

int el_gmatch_check(el_gmatch *m, const char *bytes, size_t n) {
    if (!m || (!bytes && n)) return 0;
    size_t lo, hi;
    uint32_t acc;
    int need;
    int r = run_bytes(m, bytes, n, &lo, &hi, &acc, &need);
    reset_above(m);
    return r;
}

int el_gmatch_accept(el_gmatch *m, const char *bytes, size_t n, el_error *err) {
    if (!m || (!bytes && n)) return el_set_error(err, EL_ERR_INVALID_ARG, "grammar: NULL");
    size_t lo, hi;
    uint32_t acc;
    int need;
    int r = run_bytes(m, bytes, n, &lo, &hi, &acc, &need);
    if (r <= 0) {
        reset_above(m);
        if (r < 0)
            return el_set_error(err, EL_ERR_GRAMMAR, "grammar: matcher limit hit (%d stacks, depth %d)",
                                EL_GRAMMAR_MAX_STACKS, EL_GRAMMAR_MAX_DEPTH);
        return el_set_error(err, EL_ERR_GRAMMAR, "grammar: text not accepted by the grammar");
    }
    if (n > 0 && !(lo == 0 && hi == m->cur_n)) {
        /* move the new set to the bottom (source lies above the destination) */
        size_t np = 0;
        for (size_t i = lo; i < hi; i++) {
            gstack s = m->st[i];
            memmove(m->pos + np, m->pos + s.off, s.len * sizeof *m->pos);
            m->st[i - lo] = (gstack){(uint32_t)np, s.len};
            np += s.len;
        }
        m->cur_n = hi - lo;
        m->cur_pos = np;
    }
    m->u_acc = acc;
    m->u_need = need;
    reset_above(m);
    return 0;
}

bool el_gmatch_can_end(const el_gmatch *m) {
    if (!m || m->u_need) return false;
    for (size_t i = 0; i < m->cur_n; i++)
        if (m->st[i].len == 0) return true;
    return false;
}

bool el_gmatch_is_done(const el_gmatch *m) {
    if (!m || m->u_need) return false;
    for (size_t i = 0; i < m->cur_n; i++)
        if (m->st[i].len != 0) return false;
    return true;
}

/* ---- vocabulary trie ---------------------------------------------------------------- */

typedef struct {
    uint32_t first;  /* first child */
    uint32_t tok;    /* first terminal token in ids[] */
    uint16_t n_kid;
    uint16_t n_tok;  /* tokens whose text ends here (identical texts share a node) */
    uint8_t byte;
} tnode;

struct el_gtrie {
    tnode *node;
    size_t n_node;
    int32_t *ids; /* token ids sorted by text */
    int n_tok;    /* vocabulary size (mask length) */
};

typedef struct {
    const unsigned char *p;
    int len;
    int32_t id;
} tent;

static int tent_cmp(const void *a, const void *b) {
    const tent *x = a, *y = b;
    int n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->p, y->p, (size_t)n);
    if (c) return c;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

el_gtrie *el_gtrie_new(int n, const char *const *text, const int *len) {
    if (n <= 0 || !text || !len) return NULL;
    el_gtrie *t = calloc(1, sizeof *t);
    tent *e = malloc(sizeof *e * (size_t)n);
    uint32_t *rlo = NULL, *rhi = NULL, *dep = NULL;
    if (!t || !e) goto fail;
    int m = 0;
    size_t total = 0;
    for (int i = 0; i < n; i++)
        if (len[i] > 0 && text[i]) {
            e[m++] = (tent){(const unsigned char *)text[i], len[i], i};
            total += (size_t)len[i];
        }
    qsort(e, (size_t)m, sizeof *e, tent_cmp);
    size_t cap = total + 1;
    t->node = malloc(sizeof *t->node * cap);
    t->ids = malloc(sizeof *t->ids * ((size_t)m + 1));
    rlo = malloc(sizeof *rlo * cap);
    rhi = malloc(sizeof *rhi * cap);
    dep = malloc(sizeof *dep * cap);
    if (!t->node || !t->ids || !rlo || !rhi || !dep) goto fail;
    for (int i = 0; i < m; i++) t->ids[i] = e[i].id;
    t->n_tok = n;
    t->node[0] = (tnode){0};
    rlo[0] = 0;
    rhi[0] = (uint32_t)m;
    dep[0] = 0;
    size_t nn = 1;
    for (size_t q = 0; q < nn; q++) { /* breadth first: a node's children are appended together */
        uint32_t lo = rlo[q], hi = rhi[q], d = dep[q];
        uint32_t k = lo;
        while (k < hi && (uint32_t)e[k].len == d) k++;
        t->node[q].tok = lo;
        t->node[q].n_tok = (uint16_t)(k - lo > 65535 ? 65535 : k - lo);
        t->node[q].first = (uint32_t)nn;
        uint16_t kids = 0;
        while (k < hi) {
            unsigned char b = e[k].p[d];
            uint32_t j = k;
            while (j < hi && e[j].p[d] == b) j++;
            t->node[nn] = (tnode){.byte = b};
            rlo[nn] = k;
            rhi[nn] = j;
            dep[nn] = d + 1;
            nn++;
            kids++;
            k = j;
        }
        t->node[q].n_kid = kids;
    }
    t->n_node = nn;
    tnode *sh = realloc(t->node, sizeof *t->node * nn);
    if (sh) t->node = sh;
    free(e);
    free(rlo);
    free(rhi);
    free(dep);
    return t;
fail:
    free(e);
    free(rlo);
    free(rhi);
    free(dep);
    el_gtrie_free(t);
    return NULL;
}

void el_gtrie_free(el_gtrie *t) {
    if (!t) return;
    free(t->node);
    free(t->ids);
    free(t);
}

size_t el_gtrie_bytes(const el_gtrie *t) {
    return t ? t->n_node * sizeof *t->node + (size_t)t->n_tok * sizeof *t->ids : 0;
}

static int walk(el_gmatch *m, const el_gtrie *t, uint32_t node, size_t lo, size_t hi, uint32_t acc, int need,
                uint8_t *allowed) {
    int cnt = 0;
    const tnode *nd = &t->node[node];
    for (uint32_t c = nd->first; c < nd->first + nd->n_kid; c++) {
        const tnode *k = &t->node[c];
        size_t save_st = m->st_top, save_pos = m->pos_top;
        uint32_t a = acc, cp;
        int nd2 = need;
        int r = utf8_step(&a, &nd2, k->byte, &cp);
        if (r < 0) continue;
        size_t klo = lo, khi = hi;
        if (r == 1) {
            klo = advance(m, lo, hi, cp);
            if (m->err) return -1;
            khi = m->st_top;
        }
        if (klo < khi) {
            bool ok = nd2 == 0 || partial_ok(m, klo, khi, a, nd2);
            if (ok)
                for (uint32_t i = 0; i < k->n_tok; i++) { allowed[t->ids[k->tok + i]] = 1; cnt++; }
            if (k->n_kid) {
                int sub = walk(m, t, c, klo, khi, a, nd2, allowed);
                if (sub < 0) return -1;
                cnt += sub;
            }
        }
        m->st_top = save_st;
        m->pos_top = save_pos;
    }
    return cnt;
}

int el_gmatch_mask(el_gmatch *m, const el_gtrie *t, uint8_t *allowed) {
    if (!m || !t || !allowed) return -1;
    memset(allowed, 0, (size_t)t->n_tok);
    int r = walk(m, t, 0, 0, m->cur_n, m->u_acc, m->u_need, allowed);
    reset_above(m);
    return r;
}
