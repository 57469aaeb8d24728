/*
 * jinja_value.c — the Jinja engine's values: arena, constructors, Python
 * truthiness / equality / ordering, and the three ways a value is written out
 * (str(), repr(), json.dumps) byte-exactly as CPython writes them.
 *
 * Contract: see jinja_internal.h. Floats print as Python's repr (the
 * shortest digits that read back to the same double; fixed notation for
 * decimal exponents -4..15, else d.dde+XX). Strings repr with single quotes
 * unless the text holds ' and no ", escaping \\, the quote, \t \n \r and
 * non-printable code points (\xNN); non-ASCII printable text is kept.
 * json.dumps follows ensure_ascii=False: only ", \\ and control characters
 * are escaped; dict keys that are not strings become "1", "true", "null"...
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/jinja_internal.h"

/* ---- arena ---- */
typedef struct jchunk { struct jchunk *next; size_t size, used; max_align_t data[]; } jchunk;

void *ja_alloc(jarena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (n == 0) n = 16;
    jchunk *c = a->head;
    if (!c || c->size - c->used < n) {
        size_t sz = n > 65536 ? n : 65536;
        if (a->used + sz > a->limit || !(c = malloc(sizeof(jchunk) + sz))) {
            if (a->jb && a->r) jr_fail(a->r, "LimitError", "template memory limit (%zu bytes) reached", a->limit);
            return NULL;
        }
        a->used += sz;
        c->size = sz;
        c->used = 0;
        c->next = a->head;
        a->head = c;
    }
    void *p = (char *)c->data + c->used;
    c->used += n;
    memset(p, 0, n);
    return p;
}

void ja_free_all(jarena *a) {
    jchunk *c = a->head;
    while (c) {
        jchunk *nx = c->next;
        free(c);
        c = nx;
    }
    a->head = NULL;
    a->used = 0;
}

char *ja_strdup(jarena *a, const char *s, size_t n) {
    char *p = ja_alloc(a, n + 1);
    if (p && n) memcpy(p, s, n);
    return p;
}

_Noreturn void jr_fail(jrender *r, const char *cls, const char *fmt, ...) {
    char m[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    snprintf(r->msg, sizeof r->msg, "%s: line %d: %s", cls, r->line, m);
    longjmp(r->jb, 1);
}

/* ---- constructors ---- */
jv *jv_new(jarena *a, jv_type t) {
    jv *v = ja_alloc(a, sizeof *v);
    if (v) v->t = t;
    return v;
}

void jr_check_str(jrender *r, size_t n) {
    if (n > r->lim->max_string) jr_fail(r, "LimitError", "a string of %zu bytes passes the limit (%zu)", n, r->lim->max_string);
}

jv *jv_str_n(jrender *r, const char *s, size_t n) {
    jr_check_str(r, n);
    jv *v = jv_new(r->A, JV_STR);
    v->u.s.s = ja_strdup(r->A, s, n);
    v->u.s.n = n;
    return v;
}
jv *jv_strz(jrender *r, const char *s) { return jv_str_n(r, s, strlen(s)); }
jv *jv_int_(jrender *r, int64_t i) { jv *v = jv_new(r->A, JV_INT); v->u.i = i; return v; }
jv *jv_float_(jrender *r, double f) { jv *v = jv_new(r->A, JV_FLOAT); v->u.f = f; return v; }
jv *jv_bool_(jrender *r, int b) { jv *v = jv_new(r->A, JV_BOOL); v->u.b = !!b; return v; }
jv *jv_none_(jrender *r) { return jv_new(r->A, JV_NONE); }
jv *jv_list_(jrender *r) { return jv_new(r->A, JV_LIST); }
jv *jv_dict_(jrender *r) { return jv_new(r->A, JV_DICT); }
jv *jv_undef(jrender *r, const char *hint) {
    jv *v = jv_new(r->A, JV_UNDEF);
    v->u.s.s = ja_strdup(r->A, hint, strlen(hint));
    v->u.s.n = strlen(hint);
    return v;
}

static int grow(jarena *a, void ***arr, size_t n, size_t *cap) {
    if (n < *cap) return 0;
    size_t nc = *cap ? *cap * 2 : 4;
    void **na = ja_alloc(a, nc * sizeof(void *));
    if (!na) return -1;
    if (n) memcpy(na, *arr, n * sizeof(void *));
    *arr = na;
    *cap = nc;
    return 0;
}

void jv_push(jarena *a, jv *l, jv *x) {
    if (grow(a, (void ***)&l->u.l.a, l->u.l.n, &l->u.l.cap) == 0) l->u.l.a[l->u.l.n++] = x;
}

jv *jv_dget(const jv *d, const jv *k) {
    for (size_t i = 0; i < d->u.d.n; i++)
        if (jv_eq(d->u.d.k[i], k)) return d->u.d.v[i];
    return NULL;
}

jv *jv_dget_s(const jv *d, const char *k, size_t n) {
    for (size_t i = 0; i < d->u.d.n; i++) {
        const jv *x = d->u.d.k[i];
        if (x->t == JV_STR && x->u.s.n == n && memcmp(x->u.s.s, k, n) == 0) return d->u.d.v[i];
    }
    return NULL;
}

void jv_dset(jarena *a, jv *d, jv *k, jv *v) {
    for (size_t i = 0; i < d->u.d.n; i++)
        if (jv_eq(d->u.d.k[i], k)) {
            d->u.d.v[i] = v;
            return;
        }
    size_t cap = d->u.d.cap;
    if (grow(a, (void ***)&d->u.d.k, d->u.d.n, &cap) != 0) return;
    if (grow(a, (void ***)&d->u.d.v, d->u.d.n, &d->u.d.cap) != 0) return;
    d->u.d.cap = cap;
    d->u.d.k[d->u.d.n] = k;
    d->u.d.v[d->u.d.n++] = v;
}

void jv_dset_s(jrender *r, jv *d, const char *k, jv *v) { jv_dset(r->A, d, jv_strz(r, k), v); }

/* ---- Python semantics ---- */
int jv_is_num(const jv *v) { return v->t == JV_BOOL || v->t == JV_INT || v->t == JV_FLOAT; }
double jv_num(const jv *v) {
    return v->t == JV_FLOAT ? v->u.f : v->t == JV_INT ? (double)v->u.i : (double)v->u.b;
}

int jv_truthy(const jv *v) {
    switch (v->t) {
    case JV_UNDEF: case JV_NONE: return 0;
    case JV_BOOL: return v->u.b;
    case JV_INT: return v->u.i != 0;
    case JV_FLOAT: return v->u.f != 0.0;
    case JV_STR: return v->u.s.n != 0;
    case JV_LIST: return v->u.l.n != 0 || (v->flags & JVF_GEN);
    case JV_DICT: return v->u.d.n != 0;
    default: return 1;
    }
}

int jv_eq(const jv *a, const jv *b) {
    if (a == b) return 1;
    if (jv_is_num(a) && jv_is_num(b)) {
        if (a->t != JV_FLOAT && b->t != JV_FLOAT) {
            int64_t x = a->t == JV_INT ? a->u.i : a->u.b, y = b->t == JV_INT ? b->u.i : b->u.b;
            return x == y;
        }
        return jv_num(a) == jv_num(b);
    }
    if (a->t != b->t) return 0;
    switch (a->t) {
    case JV_UNDEF: case JV_NONE: return 1;
    case JV_STR: return a->u.s.n == b->u.s.n && memcmp(a->u.s.s, b->u.s.s, a->u.s.n) == 0;
    case JV_LIST:
        if (a->u.l.n != b->u.l.n || (a->flags & JVF_TUPLE) != (b->flags & JVF_TUPLE) || ((a->flags | b->flags) & JVF_GEN)) return 0;
        for (size_t i = 0; i < a->u.l.n; i++)
            if (!jv_eq(a->u.l.a[i], b->u.l.a[i])) return 0;
        return 1;
    case JV_DICT:
        if (a->u.d.n != b->u.d.n) return 0;
        for (size_t i = 0; i < a->u.d.n; i++) {
            jv *o = jv_dget(b, a->u.d.k[i]);
            if (!o || !jv_eq(a->u.d.v[i], o)) return 0;
        }
        return 1;
    case JV_BUILTIN: return a->u.bm.fn == b->u.bm.fn && a->u.bm.self == b->u.bm.self;
    default: return 0;
    }
}

const char *jv_typename(const jv *v) {
    switch (v->t) {
    case JV_UNDEF: return "Undefined";
    case JV_NONE: return "NoneType";
    case JV_BOOL: return "bool";
    case JV_INT: return "int";
    case JV_FLOAT: return "float";
    case JV_STR: return "str";
    case JV_LIST: return v->flags & JVF_GEN ? "generator" : v->flags & JVF_TUPLE ? "tuple" : "list";
    case JV_DICT: return "dict";
    case JV_MACRO: return "Macro";
    case JV_BUILTIN: return "function";
    case JV_NS: return "Namespace";
    case JV_LOOP: return "LoopContext";
    }
    return "object";
}

int jv_cmp(jrender *r, const jv *a, const jv *b) {
    if (jv_is_num(a) && jv_is_num(b)) {
        if (a->t != JV_FLOAT && b->t != JV_FLOAT) {
            int64_t x = a->t == JV_INT ? a->u.i : a->u.b, y = b->t == JV_INT ? b->u.i : b->u.b;
            return x < y ? -1 : x > y;
        }
        double x = jv_num(a), y = jv_num(b);
        return x < y ? -1 : x > y;
    }
    if (a->t == JV_STR && b->t == JV_STR) {
        size_t n = a->u.s.n < b->u.s.n ? a->u.s.n : b->u.s.n;
        int c = memcmp(a->u.s.s, b->u.s.s, n);
        if (c) return c < 0 ? -1 : 1;
        return a->u.s.n < b->u.s.n ? -1 : a->u.s.n > b->u.s.n;
    }
    if (a->t == JV_LIST && b->t == JV_LIST) {
        size_t n = a->u.l.n < b->u.l.n ? a->u.l.n : b->u.l.n;
        for (size_t i = 0; i < n; i++) {
            if (jv_eq(a->u.l.a[i], b->u.l.a[i])) continue;
            return jv_cmp(r, a->u.l.a[i], b->u.l.a[i]);
        }
        return a->u.l.n < b->u.l.n ? -1 : a->u.l.n > b->u.l.n;
    }
    jr_fail(r, "TypeError", "'<' not supported between instances of '%s' and '%s'", jv_typename(a), jv_typename(b));
}

/* ---- output buffers ---- */
void jo_put_m(jrender *r, jout *o, const char *s, size_t n, const uint8_t *m) {
    if (!n) return;
    if (o->n + n > r->lim->max_string && o != r->out)
        jr_fail(r, "LimitError", "a string passes the limit (%zu bytes)", r->lim->max_string);
    if (o->n + n + 1 > o->cap) {
        size_t nc = o->cap ? o->cap * 2 : 256;
        while (nc < o->n + n + 1) nc *= 2;
        char *np = ja_alloc(r->A, nc);
        if (o->n) memcpy(np, o->p, o->n);
        o->p = np;
        if (o->m) {
            uint8_t *nm = ja_alloc(r->A, nc);
            memcpy(nm, o->m, o->n);
            o->m = nm;
        }
        o->cap = nc;
    }
    if (m && !o->m && memchr(m, 1, n)) o->m = ja_alloc(r->A, o->cap); /* zeroed: all before is template */
    memcpy(o->p + o->n, s, n);
    if (o->m) {
        if (m) memcpy(o->m + o->n, m, n);
        else memset(o->m + o->n, 0, n);
    }
    o->n += n;
}

void jo_put(jrender *r, jout *o, const char *s, size_t n) { jo_put_m(r, o, s, n, NULL); }

void jo_mark(jrender *r, jout *o, size_t from) {
    if (from >= o->n) return;
    if (!o->m) o->m = ja_alloc(r->A, o->cap);
    memset(o->m + from, 1, o->n - from);
}

int jv_tainted(const jv *v) { return v->t == JV_STR && v->u.s.m && memchr(v->u.s.m, 1, v->u.s.n) != NULL; }

jv *jv_sub(jrender *r, const jv *s, size_t off, size_t n) {
    jv *v = jv_str_n(r, s->u.s.s + off, n);
    if (s->u.s.m && memchr(s->u.s.m + off, 1, n)) {
        uint8_t *m = ja_alloc(r->A, n + 1);
        memcpy(m, s->u.s.m + off, n);
        v->u.s.m = m;
    }
    v->flags = s->flags & JVF_SAFE;
    return v;
}

jv *jv_taint(jrender *r, jv *res, int content) {
    if (!content || res->t != JV_STR || !res->u.s.n) return res;
    jv *v = jv_new(r->A, JV_STR);
    *v = *res;
    uint8_t *m = ja_alloc(r->A, res->u.s.n);
    memset(m, 1, res->u.s.n);
    v->u.s.m = m;
    return v;
}
void jo_putc(jrender *r, jout *o, char ch) { jo_put(r, o, &ch, 1); }
void jo_printf(jrender *r, jout *o, const char *fmt, ...) {
    char b[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b, sizeof b, fmt, ap);
    va_end(ap);
    jo_put(r, o, b, n < (int)sizeof b ? (size_t)n : sizeof b - 1);
}
jv *jo_str(jrender *r, jout *o) {
    jv *v = jv_new(r->A, JV_STR);
    v->u.s.s = o->p ? o->p : "";
    v->u.s.n = o->n;
    v->u.s.m = o->m && memchr(o->m, 1, o->n) ? o->m : NULL;
    return v;
}

void jv_write_float(jrender *r, jout *o, double f) {
    if (isnan(f)) { jo_put(r, o, "nan", 3); return; }
    if (isinf(f)) { jo_put(r, o, f < 0 ? "-inf" : "inf", f < 0 ? 4 : 3); return; }
    char b[40];
    int p;
    for (p = 1; p <= 17; p++) {
        snprintf(b, sizeof b, "%.*e", p - 1, f);
        if (strtod(b, NULL) == f) break;
    }
    /* b = [-]d.ddde[+-]XX: digits and decimal exponent */
    char digits[24];
    int nd = 0, neg = b[0] == '-';
    const char *q = b + neg;
    for (; *q && *q != 'e'; q++)
        if (*q >= '0' && *q <= '9') digits[nd++] = *q;
    int e = atoi(q + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    if (neg) jo_putc(r, o, '-');
    if (e >= -4 && e < 16) {
        if (e < 0) {
            jo_put(r, o, "0.", 2);
            for (int i = 0; i < -e - 1; i++) jo_putc(r, o, '0');
            jo_put(r, o, digits, nd);
        } else {
            for (int i = 0; i <= e; i++) jo_putc(r, o, i < nd ? digits[i] : '0');
            jo_putc(r, o, '.');
            if (nd > e + 1) jo_put(r, o, digits + e + 1, nd - e - 1);
            else jo_putc(r, o, '0');
        }
    } else {
        jo_putc(r, o, digits[0]);
        if (nd > 1) {
            jo_putc(r, o, '.');
            jo_put(r, o, digits + 1, nd - 1);
        }
        jo_printf(r, o, "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
    }
}

static void write_int(jrender *r, jout *o, int64_t i) { jo_printf(r, o, "%lld", (long long)i); }

static void write_repr_str(jrender *r, jout *o, const char *s, size_t n) {
    int q = '\'';
    if (memchr(s, '\'', n) && !memchr(s, '"', n)) q = '"';
    jo_putc(r, o, (char)q);
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '\\') jo_put(r, o, "\\\\", 2);
        else if (ch == q) { jo_putc(r, o, '\\'); jo_putc(r, o, (char)q); }
        else if (ch == '\n') jo_put(r, o, "\\n", 2);
        else if (ch == '\r') jo_put(r, o, "\\r", 2);
        else if (ch == '\t') jo_put(r, o, "\\t", 2);
        else if (ch < 0x20 || ch == 0x7f) jo_printf(r, o, "\\x%02x", ch);
        else if (ch == 0xc2 && i + 1 < n && ((unsigned char)s[i + 1] < 0xa1 || (unsigned char)s[i + 1] == 0xad)) {
            jo_printf(r, o, "\\x%02x", (unsigned char)s[i + 1]); /* C1 controls, NBSP, soft hyphen */
            i++;
        } else jo_putc(r, o, (char)ch);
    }
    jo_putc(r, o, (char)q);
}

void jv_write_repr(jrender *r, jout *o, const jv *v) {
    if (++r->depth > r->lim->max_depth) jr_fail(r, "LimitError", "value nested too deep");
    switch (v->t) {
    case JV_STR: {
        size_t from = o->n;
        write_repr_str(r, o, v->u.s.s, v->u.s.n);
        if (jv_tainted(v)) jo_mark(r, o, from);
        break;
    }
    case JV_LIST: {
        if (v->flags & JVF_GEN) { jo_put(r, o, "<generator object>", 18); break; }
        int tup = v->flags & JVF_TUPLE;
        jo_putc(r, o, tup ? '(' : '[');
        for (size_t i = 0; i < v->u.l.n; i++) {
            if (i) jo_put(r, o, ", ", 2);
            jv_write_repr(r, o, v->u.l.a[i]);
        }
        if (tup && v->u.l.n == 1) jo_putc(r, o, ',');
        jo_putc(r, o, tup ? ')' : ']');
        break;
    }
    case JV_DICT:
        jo_putc(r, o, '{');
        for (size_t i = 0; i < v->u.d.n; i++) {
            if (i) jo_put(r, o, ", ", 2);
            jv_write_repr(r, o, v->u.d.k[i]);
            jo_put(r, o, ": ", 2);
            jv_write_repr(r, o, v->u.d.v[i]);
        }
        jo_putc(r, o, '}');
        break;
    default: jv_write_str(r, o, v);
    }
    r->depth--;
}

void jv_write_str(jrender *r, jout *o, const jv *v) {
    switch (v->t) {
    case JV_UNDEF: break;
    case JV_NONE: jo_put(r, o, "None", 4); break;
    case JV_BOOL: jo_put(r, o, v->u.b ? "True" : "False", v->u.b ? 4 : 5); break;
    case JV_INT: write_int(r, o, v->u.i); break;
    case JV_FLOAT: jv_write_float(r, o, v->u.f); break;
    case JV_STR: jo_put_m(r, o, v->u.s.s, v->u.s.n, v->u.s.m); break;
    case JV_LIST: case JV_DICT: jv_write_repr(r, o, v); break;
    case JV_NS: jo_put(r, o, "<Namespace>", 11); break;
    case JV_LOOP: jo_put(r, o, "<LoopContext>", 13); break;
    case JV_MACRO: jo_put(r, o, "<Macro>", 7); break;
    case JV_BUILTIN: jo_put(r, o, "<function>", 10); break;
    }
}

jv *jv_to_str(jrender *r, const jv *v) {
    if (v->t == JV_STR) return (jv *)v;
    jout o = {0};
    jv_write_str(r, &o, v);
    return jo_str(r, &o);
}

jv *jv_escape(jrender *r, jv *v) {
    if (v->t == JV_STR && (v->flags & JVF_SAFE)) return v;
    jv *s = jv_to_str(r, v);
    jout o = {0};
    for (size_t i = 0; i < s->u.s.n; i++) {
        char c = s->u.s.s[i];
        if (c == '&') jo_put(r, &o, "&amp;", 5);
        else if (c == '<') jo_put(r, &o, "&lt;", 4);
        else if (c == '>') jo_put(r, &o, "&gt;", 4);
        else if (c == '"') jo_put(r, &o, "&#34;", 5);
        else if (c == '\'') jo_put(r, &o, "&#39;", 5);
        else jo_putc(r, &o, c);
    }
    jv *out = jv_taint(r, jo_str(r, &o), jv_tainted(s));
    out->flags = JVF_SAFE;
    return out;
}

static void write_json_str(jrender *r, jout *o, const char *s, size_t n) {
    jo_putc(r, o, '"');
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        switch (ch) {
        case '"': jo_put(r, o, "\\\"", 2); break;
        case '\\': jo_put(r, o, "\\\\", 2); break;
        case '\n': jo_put(r, o, "\\n", 2); break;
        case '\r': jo_put(r, o, "\\r", 2); break;
        case '\t': jo_put(r, o, "\\t", 2); break;
        case '\b': jo_put(r, o, "\\b", 2); break;
        case '\f': jo_put(r, o, "\\f", 2); break;
        default:
            if (ch < 0x20) jo_printf(r, o, "\\u%04x", ch);
            else if (ch >= 0x80 && r->ensure_ascii) { /* \uXXXX, surrogate pairs above U+FFFF */
                unsigned cp = ch, extra = ch >= 0xF0 ? 3 : ch >= 0xE0 ? 2 : 1;
                cp &= extra == 3 ? 0x07 : extra == 2 ? 0x0F : 0x1F;
                for (unsigned k = 0; k < extra && i + 1 < n; k++) cp = (cp << 6) | ((unsigned char)s[++i] & 0x3F);
                if (cp >= 0x10000) {
                    cp -= 0x10000;
                    jo_printf(r, o, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
                } else jo_printf(r, o, "\\u%04x", cp);
            } else jo_putc(r, o, (char)ch);
        }
    }
    jo_putc(r, o, '"');
}

static void json_nl(jrender *r, jout *o, int indent, int level) {
    jo_putc(r, o, '\n');
    for (int i = 0; i < indent * level; i++) jo_putc(r, o, ' ');
}

static int key_cmp_r(const void *a, const void *b, void *ctx) {
    jrender *r = ctx;
    const jv *x = *(jv *const *)a, *y = *(jv *const *)b;
    return jv_cmp(r, x, y);
}

static void json_key(jrender *r, jout *o, const jv *k) {
    switch (k->t) {
    case JV_STR: { size_t from = o->n; write_json_str(r, o, k->u.s.s, k->u.s.n); if (jv_tainted(k)) jo_mark(r, o, from); break; }
    case JV_INT: jo_putc(r, o, '"'); write_int(r, o, k->u.i); jo_putc(r, o, '"'); break;
    case JV_FLOAT: jo_putc(r, o, '"'); jv_write_float(r, o, k->u.f); jo_putc(r, o, '"'); break;
    case JV_BOOL: jo_put(r, o, k->u.b ? "\"true\"" : "\"false\"", k->u.b ? 6 : 7); break;
    case JV_NONE: jo_put(r, o, "\"null\"", 6); break;
    default: jr_fail(r, "TypeError", "keys must be str, int, float, bool or None, not %s", jv_typename(k));
    }
}

void jv_write_json_ascii(jrender *r, jout *o, const jv *v, int indent, const char *isep, const char *ksep, int sort_keys) {
    r->ensure_ascii = 1;
    jv_write_json(r, o, v, indent, 0, isep, ksep, sort_keys);
    r->ensure_ascii = 0;
}

void jv_write_json(jrender *r, jout *o, const jv *v, int indent, int level,
                   const char *isep, const char *ksep, int sort_keys) {
    if (level > r->lim->max_depth) jr_fail(r, "LimitError", "value nested too deep for tojson");
    switch (v->t) {
    case JV_NONE: jo_put(r, o, "null", 4); break;
    case JV_BOOL: jo_put(r, o, v->u.b ? "true" : "false", v->u.b ? 4 : 5); break;
    case JV_INT: write_int(r, o, v->u.i); break;
    case JV_FLOAT:
        if (isnan(v->u.f)) jo_put(r, o, "NaN", 3);
        else if (isinf(v->u.f)) jo_put(r, o, v->u.f < 0 ? "-Infinity" : "Infinity", v->u.f < 0 ? 9 : 8);
        else jv_write_float(r, o, v->u.f);
        break;
    case JV_STR: { size_t from = o->n; write_json_str(r, o, v->u.s.s, v->u.s.n); if (jv_tainted(v)) jo_mark(r, o, from); break; }
    case JV_LIST:
        if (v->flags & JVF_GEN) jr_fail(r, "TypeError", "Object of type generator is not JSON serializable");
        if (!v->u.l.n) { jo_put(r, o, "[]", 2); break; }
        jo_putc(r, o, '[');
        for (size_t i = 0; i < v->u.l.n; i++) {
            if (i) jo_put(r, o, isep, strlen(isep));
            if (indent >= 0) json_nl(r, o, indent, level + 1);
            jv_write_json(r, o, v->u.l.a[i], indent, level + 1, isep, ksep, sort_keys);
        }
        if (indent >= 0) json_nl(r, o, indent, level);
        jo_putc(r, o, ']');
        break;
    case JV_DICT: {
        if (!v->u.d.n) { jo_put(r, o, "{}", 2); break; }
        size_t n = v->u.d.n;
        size_t *idx = ja_alloc(r->A, n * sizeof *idx);
        for (size_t i = 0; i < n; i++) idx[i] = i;
        if (sort_keys) { /* insertion sort on the keys (stable, small dicts) */
            for (size_t i = 1; i < n; i++)
                for (size_t j = i; j > 0 && key_cmp_r(&v->u.d.k[idx[j]], &v->u.d.k[idx[j - 1]], r) < 0; j--) {
                    size_t t = idx[j]; idx[j] = idx[j - 1]; idx[j - 1] = t;
                }
        }
        jo_putc(r, o, '{');
        for (size_t i = 0; i < n; i++) {
            if (i) jo_put(r, o, isep, strlen(isep));
            if (indent >= 0) json_nl(r, o, indent, level + 1);
            json_key(r, o, v->u.d.k[idx[i]]);
            jo_put(r, o, ksep, strlen(ksep));
            jv_write_json(r, o, v->u.d.v[idx[i]], indent, level + 1, isep, ksep, sort_keys);
        }
        if (indent >= 0) json_nl(r, o, indent, level);
        jo_putc(r, o, '}');
        break;
    }
    default:
        jr_fail(r, "TypeError", "Object of type %s is not JSON serializable", jv_typename(v));
    }
}
