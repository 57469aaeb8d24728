/*
 * jinja_filters.c — the Jinja engine's library: filters, tests, and the
 * str / list / dict methods templates call, with jinja2's (and Python's)
 * results.
 *
 * Contract: jf_has_filter / jf_has_test name exactly the filters and tests
 * implemented here (the parser refuses others, as jinja2 refuses unknown
 * names). Arguments follow jinja2's signatures, positional or by keyword.
 * Methods that change a list or dict (append, pop, update, ...) raise
 * SecurityError, as transformers' ImmutableSandboxedEnvironment does.
 * Case mapping and whitespace are ASCII plus what UTF-8 text needs kept
 * intact (non-ASCII bytes pass through unchanged); str.split() without a
 * separator splits on ASCII whitespace runs.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/jinja_internal.h"

#define EQ(lit) (nlen == sizeof lit - 1 && memcmp(name, lit, nlen) == 0)

/* ---- argument binding: positional then keyword, by parameter name ---- */
static jv *arg(jv **args, const char **kw, int nargs, int pos, const char *pname) {
    int p = 0;
    for (int i = 0; i < nargs; i++) {
        if (kw && kw[i]) {
            if (strcmp(kw[i], pname) == 0) return args[i];
        } else if (p++ == pos) return args[i];
    }
    return NULL;
}

static int is_space(unsigned char c) { return c == ' ' || (c >= 9 && c <= 13) || (c >= 0x1c && c <= 0x1f); }
static char up(char c) { return c >= 'a' && c <= 'z' ? (char)(c - 32) : c; }
static char lo(char c) { return c >= 'A' && c <= 'Z' ? (char)(c + 32) : c; }
static int is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

static jv *need_str(jrender *r, jv *v, const char *what) {
    if (!v || v->t != JV_STR) jr_fail(r, "TypeError", "%s must be a string, not %s", what, v ? jv_typename(v) : "nothing");
    return v;
}

jv *jf_iter_list(jrender *r, jv *x) {
    switch (x->t) {
    case JV_LIST: return x;
    case JV_DICT: case JV_NS: {
        jv *l = jv_list_(r);
        for (size_t i = 0; i < x->u.d.n; i++) jv_push(r->A, l, x->u.d.k[i]);
        return l;
    }
    case JV_STR: {
        jv *l = jv_list_(r);
        for (size_t i = 0; i < x->u.s.n;) {
            size_t j = i + 1;
            while (j < x->u.s.n && ((unsigned char)x->u.s.s[j] & 0xC0) == 0x80) j++;
            jv_push(r->A, l, jv_sub(r, x, i, j - i));
            i = j;
        }
        return l;
    }
    case JV_UNDEF: return jv_list_(r);
    default: jr_fail(r, "TypeError", "'%s' object is not iterable", jv_typename(x));
    }
}

static jv *tuple2(jrender *r, jv *a, jv *b) {
    jv *t = jv_list_(r);
    t->flags = JVF_TUPLE;
    jv_push(r->A, t, a);
    jv_push(r->A, t, b);
    return t;
}

/* ---- string helpers ---- */
static jv *strip(jrender *r, jv *s, jv *chars, int left, int right) {
    const char *p = s->u.s.s;
    size_t a = 0, b = s->u.s.n;
    if (chars && chars->t != JV_NONE) {
        need_str(r, chars, "strip argument");
        while (left && a < b && memchr(chars->u.s.s, p[a], chars->u.s.n)) a++;
        while (right && b > a && memchr(chars->u.s.s, p[b - 1], chars->u.s.n)) b--;
    } else {
        while (left && a < b && is_space((unsigned char)p[a])) a++;
        while (right && b > a && is_space((unsigned char)p[b - 1])) b--;
    }
    return jv_sub(r, s, a, b - a);
}

static jv *split(jrender *r, jv *s, jv *sep, jv *maxv, int from_right) {
    int64_t maxsplit = maxv && maxv->t == JV_INT ? maxv->u.i : -1;
    jv *l = jv_list_(r);
    const char *p = s->u.s.s;
    size_t n = s->u.s.n;
    if (!sep || sep->t == JV_NONE) {
        /* whitespace runs; leading/trailing ignored */
        if (from_right) {
            jv *parts = jv_list_(r);
            size_t e = n;
            while (e > 0) {
                while (e > 0 && is_space((unsigned char)p[e - 1])) e--;
                if (!e) break;
                if (maxsplit >= 0 && (int64_t)parts->u.l.n == maxsplit) { jv_push(r->A, parts, jv_sub(r, s, 0, e)); e = 0; break; }
                size_t b = e;
                while (b > 0 && !is_space((unsigned char)p[b - 1])) b--;
                jv_push(r->A, parts, jv_sub(r, s, b, e - b));
                e = b;
            }
            for (size_t i = parts->u.l.n; i > 0; i--) jv_push(r->A, l, parts->u.l.a[i - 1]);
            return l;
        }
        size_t i = 0;
        while (i < n) {
            while (i < n && is_space((unsigned char)p[i])) i++;
            if (i >= n) break;
            if (maxsplit >= 0 && (int64_t)l->u.l.n == maxsplit) {
                size_t e = n;
                while (e > i && is_space((unsigned char)p[e - 1])) e--;
                jv_push(r->A, l, jv_sub(r, s, i, e - i));
                break;
            }
            size_t j = i;
            while (j < n && !is_space((unsigned char)p[j])) j++;
            jv_push(r->A, l, jv_sub(r, s, i, j - i));
            i = j;
        }
        return l;
    }
    need_str(r, sep, "separator");
    size_t m = sep->u.s.n;
    if (!m) jr_fail(r, "ValueError", "empty separator");
    if (from_right) {
        jv *parts = jv_list_(r);
        size_t e = n;
        int64_t cnt = 0;
        size_t i = n;
        while (i >= m && (maxsplit < 0 || cnt < maxsplit)) {
            if (memcmp(p + i - m, sep->u.s.s, m) == 0) {
                jv_push(r->A, parts, jv_sub(r, s, i, e - i));
                i -= m;
                e = i;
                cnt++;
            } else i--;
        }
        jv_push(r->A, parts, jv_sub(r, s, 0, e));
        for (size_t k = parts->u.l.n; k > 0; k--) jv_push(r->A, l, parts->u.l.a[k - 1]);
        return l;
    }
    size_t b = 0, i = 0;
    int64_t cnt = 0;
    while (i + m <= n && (maxsplit < 0 || cnt < maxsplit)) {
        if (memcmp(p + i, sep->u.s.s, m) == 0) {
            jv_push(r->A, l, jv_sub(r, s, b, i - b));
            i += m;
            b = i;
            cnt++;
        } else i++;
    }
    jv_push(r->A, l, jv_sub(r, s, b, n - b));
    return l;
}

static jv *replace_(jrender *r, jv *s, jv *old, jv *nw, jv *count);
static jv *replace(jrender *r, jv *s, jv *old, jv *nw, jv *count) {
    jv *v = replace_(r, s, old, nw, count);
    return jv_taint(r, v, jv_tainted(s) || jv_tainted(nw));
}
static jv *replace_(jrender *r, jv *s, jv *old, jv *nw, jv *count) {
    need_str(r, old, "replace argument");
    need_str(r, nw, "replace argument");
    int64_t max = count && count->t == JV_INT ? count->u.i : -1;
    jout o = {0};
    const char *p = s->u.s.s;
    size_t n = s->u.s.n, m = old->u.s.n, i = 0;
    int64_t done = 0;
    if (!m) { /* Python inserts new between every character */
        for (size_t k = 0; k <= n; k++) {
            if (max < 0 || done < max) { jo_put(r, &o, nw->u.s.s, nw->u.s.n); done++; }
            if (k < n) jo_putc(r, &o, p[k]);
        }
        return jo_str(r, &o);
    }
    while (i < n) {
        if ((max < 0 || done < max) && i + m <= n && memcmp(p + i, old->u.s.s, m) == 0) {
            jo_put(r, &o, nw->u.s.s, nw->u.s.n);
            i += m;
            done++;
        } else jo_putc(r, &o, p[i++]);
    }
    return jo_str(r, &o);
}

/* upper/lower of a 2-byte UTF-8 code point (Latin-1, Latin Extended-A, Greek, Cyrillic): same length */
static unsigned cp_case(unsigned cp, int upper) {
    if (upper) {
        if ((cp >= 0xE0 && cp <= 0xFE && cp != 0xF7) || (cp >= 0x3B1 && cp <= 0x3C9 && cp != 0x3C2) || (cp >= 0x430 && cp <= 0x44F)) return cp - 0x20;
        if (cp >= 0x450 && cp <= 0x45F) return cp - 0x50;
        if (cp == 0xFF) return 0x178;
        if (cp >= 0x100 && cp <= 0x17F && cp != 0x131 && cp != 0x138 && cp != 0x149 && cp != 0x17F)
            return (cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17E) ? (cp % 2 == 0 ? cp - 1 : cp) : (cp % 2 ? cp - 1 : cp);
        return cp;
    }
    if ((cp >= 0xC0 && cp <= 0xDE && cp != 0xD7) || (cp >= 0x391 && cp <= 0x3A9 && cp != 0x3A2) || (cp >= 0x410 && cp <= 0x42F)) return cp + 0x20;
    if (cp >= 0x400 && cp <= 0x40F) return cp + 0x50;
    if (cp == 0x178) return 0xFF;
    if (cp >= 0x100 && cp <= 0x17F && cp != 0x130 && cp != 0x138 && cp != 0x149 && cp != 0x17F)
        return (cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17E) ? (cp % 2 ? cp + 1 : cp) : (cp % 2 == 0 ? cp + 1 : cp);
    return cp;
}
static int is_cased2(unsigned cp) { return cp_case(cp, 1) != cp || cp_case(cp, 0) != cp; }

static jv *map_case(jrender *r, jv *s, int mode) { /* 0 lower 1 upper 2 capitalize 3 jinja title 4 str.title */
    jout o = {0};
    jo_put_m(r, &o, s->u.s.s, s->u.s.n, s->u.s.m);
    int word_start = 1, prev_cased = 0;
    for (size_t i = 0; i < o.n; i++) {
        char c = o.p[i];
        unsigned char b0 = (unsigned char)c;
        if (b0 >= 0xC2 && b0 <= 0xDF && i + 1 < o.n && ((unsigned char)o.p[i + 1] & 0xC0) == 0x80) {
            unsigned cp = ((b0 & 0x1Fu) << 6) | ((unsigned char)o.p[i + 1] & 0x3Fu);
            int up_ = mode == 1 || ((mode == 2 && i == 0) || (mode == 3 && word_start) || (mode == 4 && !prev_cased));
            if (mode == 3) word_start = 0;
            if (mode == 4) prev_cased = is_cased2(cp);
            unsigned m = cp_case(cp, up_);
            if (m < 0x800 && m >= 0x80) { o.p[i] = (char)(0xC0 | (m >> 6)); o.p[i + 1] = (char)(0x80 | (m & 0x3F)); }
            i++;
            continue;
        }
        switch (mode) {
        case 0: o.p[i] = lo(c); break;
        case 1: o.p[i] = up(c); break;
        case 2: o.p[i] = i == 0 ? up(c) : lo(c); break;
        case 3:
            if (c == '-' || is_space((unsigned char)c) || c == '(' || c == '{' || c == '[' || c == '<') word_start = 1;
            else { o.p[i] = word_start ? up(c) : lo(c); word_start = 0; }
            break;
        case 4:
            o.p[i] = prev_cased ? lo(c) : up(c);
            prev_cased = is_alpha(c) || ((unsigned char)c >= 0x80);
            break;
        }
    }
    return jo_str(r, &o);
}

static int starts_with(jv *s, jv *p, int end) {
    if (p->t != JV_STR || p->u.s.n > s->u.s.n) return 0;
    return memcmp(s->u.s.s + (end ? s->u.s.n - p->u.s.n : 0), p->u.s.s, p->u.s.n) == 0;
}

static int64_t find(jv *s, jv *sub, int rev) {
    size_t n = s->u.s.n, m = sub->u.s.n;
    if (m > n) return -1;
    size_t best = (size_t)-1;
    for (size_t i = 0; i + m <= n; i++)
        if (memcmp(s->u.s.s + i, sub->u.s.s, m) == 0) { best = i; if (!rev) break; }
    if (best == (size_t)-1) return -1;
    int64_t cp = 0;
    for (size_t i = 0; i < best; i++) cp += ((unsigned char)s->u.s.s[i] & 0xC0) != 0x80;
    return cp;
}

static jv *str_format(jrender *r, jv *fmt, jv **args, const char **kw, int nargs) {
    jout o = {0};
    const char *p = fmt->u.s.s;
    size_t n = fmt->u.s.n;
    int auto_i = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '{' && i + 1 < n && p[i + 1] == '{') { jo_put_m(r, &o, p + i, 1, fmt->u.s.m ? fmt->u.s.m + i : NULL); i++; continue; }
        if (p[i] == '}' && i + 1 < n && p[i + 1] == '}') { jo_put_m(r, &o, p + i, 1, fmt->u.s.m ? fmt->u.s.m + i : NULL); i++; continue; }
        if (p[i] != '{') { jo_put_m(r, &o, p + i, 1, fmt->u.s.m ? fmt->u.s.m + i : NULL); continue; }
        size_t j = i + 1;
        while (j < n && p[j] != '}') j++;
        if (j >= n) jr_fail(r, "ValueError", "Single '{' encountered in format string");
        const char *f = p + i + 1;
        size_t fl = j - i - 1;
        if (memchr(f, ':', fl) || memchr(f, '!', fl)) jr_fail(r, "ValueError", "format specs are not supported");
        jv *v = NULL;
        if (fl == 0) v = arg(args, kw, nargs, auto_i++, "\x01");
        else if (f[0] >= '0' && f[0] <= '9') v = arg(args, kw, nargs, atoi(f), "\x01");
        else
            for (int k = 0; k < nargs; k++)
                if (kw[k] && strlen(kw[k]) == fl && memcmp(kw[k], f, fl) == 0) v = args[k];
        if (!v) jr_fail(r, "IndexError", "Replacement index out of range for positional args tuple");
        jv_write_str(r, &o, v);
        i = j;
    }
    return jo_str(r, &o);
}

int jf_is_method(const jv *obj, const char *name, size_t nlen) {
    if (obj->t == JV_STR)
        return EQ("startswith") || EQ("endswith") || EQ("split") || EQ("rsplit") || EQ("strip") || EQ("lstrip") ||
               EQ("rstrip") || EQ("replace") || EQ("upper") || EQ("lower") || EQ("title") || EQ("capitalize") ||
               EQ("find") || EQ("rfind") || EQ("count") || EQ("join") || EQ("format") || EQ("isdigit") ||
               EQ("isalpha") || EQ("isspace") || EQ("isalnum") || EQ("isupper") || EQ("islower") || EQ("splitlines") || EQ("index");
    if (obj->t == JV_LIST)
        return EQ("append") || EQ("pop") || EQ("extend") || EQ("insert") || EQ("remove") || EQ("clear") ||
               EQ("sort") || EQ("reverse") || EQ("index") || EQ("count") || EQ("copy");
    if (obj->t == JV_DICT)
        return EQ("items") || EQ("keys") || EQ("values") || EQ("get") || EQ("copy") || EQ("update") || EQ("pop") ||
               EQ("setdefault") || EQ("clear") || EQ("popitem");
    if (obj->t == JV_LOOP) return EQ("cycle");
    return 0;
}

jv *jf_method(jrender *r, jv *obj, const char *name, size_t nlen, jv **args, const char **kw, int nargs, int *found) {
    *found = 1;
    jv *a0 = arg(args, kw, nargs, 0, "\x01"), *a1 = arg(args, kw, nargs, 1, "\x01");
    if (obj->t == JV_LOOP && EQ("cycle")) {
        if (!nargs) jr_fail(r, "TypeError", "no items for cycling given");
        jv *i0 = jv_dget_s(obj, "index0", 6);
        return args[i0->u.i % nargs];
    }
    if (obj->t == JV_STR) {
        if (EQ("startswith") || EQ("endswith")) {
            if (!a0) jr_fail(r, "TypeError", "%.*s() takes at least 1 argument", (int)nlen, name);
            int e = EQ("endswith");
            if (a0->t == JV_LIST) {
                for (size_t i = 0; i < a0->u.l.n; i++) if (starts_with(obj, a0->u.l.a[i], e)) return jv_bool_(r, 1);
                return jv_bool_(r, 0);
            }
            need_str(r, a0, name);
            return jv_bool_(r, starts_with(obj, a0, e));
        }
        if (EQ("split")) return split(r, obj, arg(args, kw, nargs, 0, "sep"), arg(args, kw, nargs, 1, "maxsplit"), 0);
        if (EQ("rsplit")) return split(r, obj, arg(args, kw, nargs, 0, "sep"), arg(args, kw, nargs, 1, "maxsplit"), 1);
        if (EQ("strip")) return strip(r, obj, a0, 1, 1);
        if (EQ("lstrip")) return strip(r, obj, a0, 1, 0);
        if (EQ("rstrip")) return strip(r, obj, a0, 0, 1);
        if (EQ("replace")) { if (!a1) jr_fail(r, "TypeError", "replace() takes 2 arguments"); return replace(r, obj, a0, a1, arg(args, kw, nargs, 2, "count")); }
        if (EQ("upper")) return map_case(r, obj, 1);
        if (EQ("lower")) return map_case(r, obj, 0);
        if (EQ("capitalize")) return map_case(r, obj, 2);
        if (EQ("title")) return map_case(r, obj, 4);
        if (EQ("find") || EQ("rfind") || EQ("index")) {
            int64_t i = find(obj, need_str(r, a0, "find argument"), EQ("rfind"));
            if (i < 0 && EQ("index")) jr_fail(r, "ValueError", "substring not found");
            return jv_int_(r, i);
        }
        if (EQ("count")) {
            need_str(r, a0, "count argument");
            int64_t c = 0;
            size_t m = a0->u.s.n;
            if (!m) return jv_int_(r, (int64_t)obj->u.s.n + 1);
            for (size_t i = 0; i + m <= obj->u.s.n;)
                if (memcmp(obj->u.s.s + i, a0->u.s.s, m) == 0) { c++; i += m; } else i++;
            return jv_int_(r, c);
        }
        if (EQ("join")) {
            jv *items = jf_iter_list(r, a0 ? a0 : jv_list_(r));
            jout o = {0};
            for (size_t i = 0; i < items->u.l.n; i++) {
                if (i) jo_put_m(r, &o, obj->u.s.s, obj->u.s.n, obj->u.s.m);
                jv *it = need_str(r, items->u.l.a[i], "join item");
                jo_put_m(r, &o, it->u.s.s, it->u.s.n, it->u.s.m);
            }
            return jo_str(r, &o);
        }
        if (EQ("format")) return str_format(r, obj, args, kw, nargs);
        if (EQ("splitlines")) {
            jv *l = jv_list_(r);
            size_t b = 0, n = obj->u.s.n;
            const char *p = obj->u.s.s;
            for (size_t i = 0; i < n; i++)
                if (p[i] == '\n' || p[i] == '\r') {
                    jv_push(r->A, l, jv_sub(r, obj, b, i - b));
                    if (p[i] == '\r' && i + 1 < n && p[i + 1] == '\n') i++;
                    b = i + 1;
                }
            if (b < n) jv_push(r->A, l, jv_sub(r, obj, b, n - b));
            return l;
        }
        int all = obj->u.s.n > 0, any_cased = 0;
        for (size_t i = 0; i < obj->u.s.n; i++) {
            char c = obj->u.s.s[i];
            if (EQ("isdigit")) all &= c >= '0' && c <= '9';
            else if (EQ("isalpha")) all &= is_alpha(c);
            else if (EQ("isalnum")) all &= is_alpha(c) || (c >= '0' && c <= '9');
            else if (EQ("isspace")) all &= is_space((unsigned char)c);
            else if (EQ("isupper")) { all &= !(c >= 'a' && c <= 'z'); any_cased |= c >= 'A' && c <= 'Z'; }
            else if (EQ("islower")) { all &= !(c >= 'A' && c <= 'Z'); any_cased |= c >= 'a' && c <= 'z'; }
        }
        if (EQ("isupper") || EQ("islower")) all = all && any_cased;
        return jv_bool_(r, all);
    }
    if (obj->t == JV_LIST) {
        if (EQ("index")) {
            for (size_t i = 0; i < obj->u.l.n; i++) if (a0 && jv_eq(obj->u.l.a[i], a0)) return jv_int_(r, (int64_t)i);
            jr_fail(r, "ValueError", "item is not in list");
        }
        if (EQ("count")) {
            int64_t c = 0;
            for (size_t i = 0; i < obj->u.l.n; i++) c += a0 && jv_eq(obj->u.l.a[i], a0);
            return jv_int_(r, c);
        }
        if (EQ("copy")) { jv *l = jv_list_(r); for (size_t i = 0; i < obj->u.l.n; i++) jv_push(r->A, l, obj->u.l.a[i]); return l; }
        jr_fail(r, "SecurityError", "access to attribute '%.*s' of '%s' object is unsafe.", (int)nlen, name, jv_typename(obj));
    }
    if (obj->t == JV_DICT) {
        if (EQ("items")) { jv *l = jv_list_(r); for (size_t i = 0; i < obj->u.d.n; i++) jv_push(r->A, l, tuple2(r, obj->u.d.k[i], obj->u.d.v[i])); return l; }
        if (EQ("keys")) return jf_iter_list(r, obj);
        if (EQ("values")) { jv *l = jv_list_(r); for (size_t i = 0; i < obj->u.d.n; i++) jv_push(r->A, l, obj->u.d.v[i]); return l; }
        if (EQ("get")) {
            jv *v = a0 ? jv_dget(obj, a0) : NULL;
            return v ? v : a1 ? a1 : jv_none_(r);
        }
        if (EQ("copy")) { jv *d = jv_dict_(r); for (size_t i = 0; i < obj->u.d.n; i++) jv_dset(r->A, d, obj->u.d.k[i], obj->u.d.v[i]); return d; }
        jr_fail(r, "SecurityError", "access to attribute '%.*s' of 'dict' object is unsafe.", (int)nlen, name);
    }
    *found = 0;
    return NULL;
}

/* ---- attribute paths for map / selectattr / sort / ... ("a.b.0") ---- */
static jv *attr_path(jrender *r, jv *x, jv *path, jv *dflt) {
    if (path->t == JV_INT) {
        if (x->t == JV_LIST && path->u.i >= 0 && (size_t)path->u.i < x->u.l.n) return x->u.l.a[path->u.i];
        return jv_undef(r, "no such item");
    }
    need_str(r, path, "attribute");
    const char *p = path->u.s.s, *e = p + path->u.s.n;
    while (p <= e) {
        const char *d = memchr(p, '.', (size_t)(e - p));
        if (!d) d = e;
        if (x->t == JV_UNDEF) jr_fail(r, "UndefinedError", "%.*s", (int)x->u.s.n, x->u.s.s);
        jv *nx = NULL;
        if (d > p && p[0] >= '0' && p[0] <= '9' && x->t == JV_LIST) {
            long i = strtol(p, NULL, 10);
            if (i >= 0 && (size_t)i < x->u.l.n) nx = x->u.l.a[i];
        } else if (x->t == JV_DICT || x->t == JV_NS) nx = jv_dget_s(x, p, (size_t)(d - p));
        if (!nx) {
            char h[160];
            snprintf(h, sizeof h, "'%s object' has no attribute '%.*s'", jv_typename(x), (int)(d - p > 80 ? 80 : d - p), p);
            nx = jv_undef(r, h);
        }
        x = nx->t == JV_UNDEF && dflt ? dflt : nx;
        p = d + 1;
    }
    return x;
}

static int64_t len_of(jrender *r, jv *x) {
    switch (x->t) {
    case JV_STR: { int64_t c = 0; for (size_t i = 0; i < x->u.s.n; i++) c += ((unsigned char)x->u.s.s[i] & 0xC0) != 0x80; return c; }
    case JV_LIST:
        if (x->flags & JVF_GEN) jr_fail(r, "TypeError", "object of type 'generator' has no len()");
        return (int64_t)x->u.l.n;
    case JV_DICT: case JV_NS: return (int64_t)x->u.d.n;
    case JV_UNDEF: return 0;
    default: jr_fail(r, "TypeError", "object of type '%s' has no len()", jv_typename(x));
    }
}

/* sort keys: case-folded strings unless case_sensitive */
static jv *sort_key(jrender *r, jv *x, int cs) { return !cs && x->t == JV_STR ? map_case(r, x, 0) : x; }

static void sort_list(jrender *r, jv **a, jv **keys, size_t n, int reverse) {
    for (size_t i = 1; i < n; i++) /* insertion sort: stable, lists here are short */
        for (size_t j = i; j > 0; j--) {
            int c = jv_cmp(r, keys[j - 1], keys[j]);
            if (reverse ? c >= 0 : c <= 0) break;
            jv *t = a[j]; a[j] = a[j - 1]; a[j - 1] = t;
            t = keys[j]; keys[j] = keys[j - 1]; keys[j - 1] = t;
        }
}

static const char *const FILTERS[] = {
    "tojson", "trim", "length", "count", "join", "default", "d", "first", "last", "map", "select", "reject",
    "selectattr", "rejectattr", "list", "string", "int", "float", "round", "indent", "unique", "safe", "upper",
    "lower", "capitalize", "title", "replace", "items", "dictsort", "reverse", "sort", "sum", "min", "max", "abs",
    "batch", "wordcount", "escape", "e", "attr", "bool", "center", "truncate", "slice", NULL};
static const char *const TESTS[] = {
    "defined", "undefined", "none", "string", "number", "integer", "float", "mapping", "iterable", "sequence",
    "boolean", "true", "false", "even", "odd", "divisibleby", "eq", "equalto", "ne", "lt", "lessthan", "le", "gt",
    "greaterthan", "ge", "in", "sameas", "callable", "lower", "upper", "escaped", NULL};

static int in_list(const char *const *l, const char *name, size_t nlen) {
    for (int i = 0; l[i]; i++) if (strlen(l[i]) == nlen && memcmp(l[i], name, nlen) == 0) return 1;
    return 0;
}
int jf_has_filter(const char *name, size_t nlen) { return in_list(FILTERS, name, nlen) && !EQ("bool"); }
int jf_has_test(const char *name, size_t nlen) { return in_list(TESTS, name, nlen); }

int jf_test(jrender *r, const char *name, size_t nlen, jv *x, jv **args, int nargs) {
    jv *a = nargs ? args[0] : NULL;
    if (EQ("defined")) return x->t != JV_UNDEF;
    if (EQ("undefined")) return x->t == JV_UNDEF;
    if (EQ("none")) return x->t == JV_NONE;
    if (EQ("string")) return x->t == JV_STR;
    if (EQ("number")) return jv_is_num(x);
    if (EQ("integer")) return x->t == JV_INT;
    if (EQ("float")) return x->t == JV_FLOAT;
    if (EQ("boolean")) return x->t == JV_BOOL;
    if (EQ("true")) return x->t == JV_BOOL && x->u.b;
    if (EQ("false")) return x->t == JV_BOOL && !x->u.b;
    if (EQ("mapping")) return x->t == JV_DICT;
    if (EQ("iterable")) return x->t == JV_STR || x->t == JV_LIST || x->t == JV_DICT || x->t == JV_UNDEF;
    if (EQ("sequence")) return x->t == JV_STR || x->t == JV_LIST || x->t == JV_DICT;
    if (EQ("callable")) return x->t == JV_MACRO || x->t == JV_BUILTIN;
    if (EQ("lower") || EQ("upper")) {
        if (x->t != JV_STR) jr_fail(r, "AttributeError", "'%s' object has no attribute '%.*s'", jv_typename(x), (int)nlen, name);
        jv *m = map_case(r, x, EQ("upper"));
        return jv_eq(m, x);
    }
    if (EQ("escaped")) return 0;
    if (EQ("even") || EQ("odd") || EQ("divisibleby")) {
        if (x->t != JV_INT && x->t != JV_BOOL) jr_fail(r, "TypeError", "%.*s needs an integer", (int)nlen, name);
        int64_t v = x->t == JV_INT ? x->u.i : x->u.b;
        if (EQ("even")) return v % 2 == 0;
        if (EQ("odd")) return v % 2 != 0;
        if (!a || a->t != JV_INT || a->u.i == 0) jr_fail(r, "TypeError", "divisibleby needs a non-zero integer");
        return v % a->u.i == 0;
    }
    if (!a) jr_fail(r, "TypeError", "test '%.*s' needs an argument", (int)nlen, name);
    if (EQ("eq") || EQ("equalto")) return jv_eq(x, a);
    if (EQ("ne")) return !jv_eq(x, a);
    if (EQ("lt") || EQ("lessthan")) return jv_cmp(r, x, a) < 0;
    if (EQ("le")) return jv_cmp(r, x, a) <= 0;
    if (EQ("gt") || EQ("greaterthan")) return jv_cmp(r, x, a) > 0;
    if (EQ("ge")) return jv_cmp(r, x, a) >= 0;
    if (EQ("sameas")) return x == a || (x->t == a->t && (x->t == JV_NONE || (x->t == JV_BOOL && x->u.b == a->u.b)));
    if (EQ("in")) {
        if (a->t == JV_STR && x->t == JV_STR) {
            for (size_t i = 0; i + x->u.s.n <= a->u.s.n; i++) if (memcmp(a->u.s.s + i, x->u.s.s, x->u.s.n) == 0) return 1;
            return 0;
        }
        jv *l = jf_iter_list(r, a);
        for (size_t i = 0; i < l->u.l.n; i++) if (jv_eq(l->u.l.a[i], x)) return 1;
        return 0;
    }
    jr_fail(r, "TemplateRuntimeError", "No test named '%.*s'.", (int)nlen, name);
}

static int64_t int_arg(jrender *r, jv *v, int64_t dflt) {
    if (!v || v->t == JV_NONE) return dflt;
    if (v->t == JV_INT) return v->u.i;
    if (v->t == JV_BOOL) return v->u.b;
    jr_fail(r, "TypeError", "'%s' object cannot be interpreted as an integer", jv_typename(v));
}

/* select/reject/selectattr/rejectattr: the test named by args[first] with the rest as its arguments */
static jv *gen(jv *l) { l->flags = JVF_GEN; return l; }

static jv *select_(jrender *r, jv *x, jv **args, int nargs, int by_attr, int keep) {
    jv *out = gen(jv_list_(r));
    if (!jv_truthy(x)) return out; /* jinja2: "if value:" */
    jv *items = jf_iter_list(r, x);
    int t0 = by_attr ? 1 : 0;
    jv *test = nargs > t0 ? args[t0] : NULL;
    if (test) need_str(r, test, "test name");
    if (test && !jf_has_test(test->u.s.s, test->u.s.n)) jr_fail(r, "TemplateRuntimeError", "No test named '%.*s'.", (int)test->u.s.n, test->u.s.s);
    if (by_attr && nargs < 1) jr_fail(r, "TypeError", "missing attribute");
    for (size_t i = 0; i < items->u.l.n; i++) {
        jv *v = by_attr ? attr_path(r, items->u.l.a[i], args[0], NULL) : items->u.l.a[i];
        int ok = test ? jf_test(r, test->u.s.s, test->u.s.n, v, args + t0 + 1, nargs - t0 - 1) : jv_truthy(v);
        if (ok == keep) jv_push(r->A, out, items->u.l.a[i]);
    }
    return out;
}

static jv *indent_(jrender *r, jv *s, jv *width, jv *first, jv *blank) {
    jout ind = {0};
    if (width && width->t == JV_STR) jo_put_m(r, &ind, width->u.s.s, width->u.s.n, width->u.s.m);
    else for (int64_t i = int_arg(r, width, 4); i > 0; i--) jo_putc(r, &ind, ' ');
    jout sn = {0}; /* jinja2 splits s + "\n" (so a trailing newline keeps its empty last line) */
    jo_put_m(r, &sn, s->u.s.s, s->u.s.n, s->u.s.m);
    jo_putc(r, &sn, '\n');
    jv *lines = jf_method(r, jo_str(r, &sn), "splitlines", 10, NULL, NULL, 0, &(int){0});
    jout o = {0};
    if (first && jv_truthy(first)) jo_put_m(r, &o, ind.p, ind.n, ind.m);
    for (size_t i = 0; i < lines->u.l.n; i++) {
        jv *ln = lines->u.l.a[i];
        if (i) {
            jo_putc(r, &o, '\n');
            if (ln->u.s.n || (blank && jv_truthy(blank))) jo_put_m(r, &o, ind.p, ind.n, ind.m);
        }
        jo_put_m(r, &o, ln->u.s.s, ln->u.s.n, ln->u.s.m);
    }
    return jo_str(r, &o);
}

jv *jf_filter(jrender *r, const jnode *n, const char *name, size_t nlen, jv *x, jv **args, const char **kw, int nargs) {
    (void)n;
#define A(i, nm) arg(args, kw, nargs, i, nm)
    if (EQ("default") || EQ("d")) {
        jv *dv = A(0, "default_value"), *b = A(1, "boolean");
        int use = x->t == JV_UNDEF || (b && jv_truthy(b) && !jv_truthy(x));
        return use ? (dv ? dv : jv_strz(r, "")) : x;
    }
    if (EQ("safe")) {
        jv *s = jv_to_str(r, x);
        if (s->flags & JVF_SAFE) return s;
        jv *m = jv_sub(r, s, 0, s->u.s.n);
        m->flags = JVF_SAFE;
        return m;
    }
    if (EQ("string")) return jv_to_str(r, x);
    if (EQ("tojson")) {
        jv *ea = A(0, "ensure_ascii"), *ind = A(1, "indent"), *sep = A(2, "separators"), *sk = A(3, "sort_keys");
        int indent = ind && ind->t != JV_NONE ? (int)int_arg(r, ind, 0) : -1;
        if (indent > 64) indent = 64;
        const char *isep = indent >= 0 ? "," : ", ", *ksep = ": ";
        if (sep && sep->t == JV_LIST && sep->u.l.n == 2 && sep->u.l.a[0]->t == JV_STR && sep->u.l.a[1]->t == JV_STR) {
            isep = ja_strdup(r->A, sep->u.l.a[0]->u.s.s, sep->u.l.a[0]->u.s.n);
            ksep = ja_strdup(r->A, sep->u.l.a[1]->u.s.s, sep->u.l.a[1]->u.s.n);
        }
        jout o = {0};
        if (ea && jv_truthy(ea)) jv_write_json_ascii(r, &o, x, indent, isep, ksep, sk && jv_truthy(sk));
        else jv_write_json(r, &o, x, indent, 0, isep, ksep, sk && jv_truthy(sk));
        return jo_str(r, &o);
    }
    if (EQ("length") || EQ("count")) return jv_int_(r, len_of(r, x));
    if (EQ("list")) {
        jv *l = jv_list_(r), *it = jf_iter_list(r, x);
        for (size_t i = 0; i < it->u.l.n; i++) jv_push(r->A, l, it->u.l.a[i]);
        return l;
    }
    if (EQ("items")) {
        if (x->t == JV_UNDEF) return jv_list_(r);
        if (x->t != JV_DICT) jr_fail(r, "TypeError", "Can only get item pairs from a mapping.");
        int f;
        return gen(jf_method(r, x, "items", 5, NULL, NULL, 0, &f));
    }
    if (EQ("first") || EQ("last")) {
        jv *it = jf_iter_list(r, x);
        if (!it->u.l.n) return jv_undef(r, EQ("first") ? "No first item, sequence was empty." : "No last item, sequence was empty.");
        return it->u.l.a[EQ("first") ? 0 : it->u.l.n - 1];
    }
    if (EQ("join")) {
        jv *d = A(0, "d"), *at = A(1, "attribute");
        jv *it = jf_iter_list(r, x);
        jout o = {0};
        for (size_t i = 0; i < it->u.l.n; i++) {
            if (i && d) jv_write_str(r, &o, d);
            jv_write_str(r, &o, at ? attr_path(r, it->u.l.a[i], at, NULL) : it->u.l.a[i]);
        }
        return jo_str(r, &o);
    }
    if (EQ("map")) {
        jv *it = jf_iter_list(r, x), *out = gen(jv_list_(r));
        jv *at = A(-1, "attribute");
        if (at) {
            jv *dflt = A(-1, "default");
            for (size_t i = 0; i < it->u.l.n; i++) {
                jv_push(r->A, out, attr_path(r, it->u.l.a[i], at, dflt));
            }
            return out;
        }
        jv *fname = A(0, "\x01");
        if (!fname || fname->t != JV_STR) jr_fail(r, "FilterArgumentError", "map requires a filter argument");
        if (!jf_has_filter(fname->u.s.s, fname->u.s.n)) jr_fail(r, "TemplateRuntimeError", "No filter named '%.*s'.", (int)fname->u.s.n, fname->u.s.s);
        for (size_t i = 0; i < it->u.l.n; i++)
            jv_push(r->A, out, jf_filter(r, n, fname->u.s.s, fname->u.s.n, it->u.l.a[i], args + 1, kw ? kw + 1 : NULL, nargs - 1));
        return out;
    }
    if (EQ("select")) return select_(r, x, args, nargs, 0, 1);
    if (EQ("reject")) return select_(r, x, args, nargs, 0, 0);
    if (EQ("selectattr")) return select_(r, x, args, nargs, 1, 1);
    if (EQ("rejectattr")) return select_(r, x, args, nargs, 1, 0);
    if (EQ("unique")) {
        jv *cs = A(0, "case_sensitive"), *at = A(1, "attribute");
        jv *it = jf_iter_list(r, x), *out = gen(jv_list_(r)), *seen = jv_list_(r);
        for (size_t i = 0; i < it->u.l.n; i++) {
            jv *k = sort_key(r, at ? attr_path(r, it->u.l.a[i], at, NULL) : it->u.l.a[i], cs && jv_truthy(cs));
            int dup = 0;
            for (size_t j = 0; j < seen->u.l.n && !dup; j++) dup = jv_eq(seen->u.l.a[j], k);
            if (!dup) { jv_push(r->A, seen, k); jv_push(r->A, out, it->u.l.a[i]); }
        }
        return out;
    }
    if (EQ("sort") || EQ("dictsort")) {
        int dict = EQ("dictsort");
        jv *rev = A(dict ? 2 : 0, "reverse"), *cs = A(dict ? 0 : 1, "case_sensitive");
        jv *at = dict ? NULL : A(2, "attribute"), *by = dict ? A(1, "by") : NULL;
        jv *src = dict ? NULL : jf_iter_list(r, x);
        if (dict) {
            if (x->t != JV_DICT) jr_fail(r, "FilterArgumentError", "dictsort needs a mapping");
            int f;
            src = jf_method(r, x, "items", 5, NULL, NULL, 0, &f);
        }
        size_t cnt = src->u.l.n;
        jv **a = ja_alloc(r->A, (cnt + 1) * sizeof *a), **keys = ja_alloc(r->A, (cnt + 1) * sizeof *keys);
        int by_value = by && by->t == JV_STR && by->u.s.n == 5 && memcmp(by->u.s.s, "value", 5) == 0;
        for (size_t i = 0; i < cnt; i++) {
            a[i] = src->u.l.a[i];
            jv *k = dict ? a[i]->u.l.a[by_value] : at ? attr_path(r, a[i], at, NULL) : a[i];
            keys[i] = sort_key(r, k, cs && jv_truthy(cs));
        }
        sort_list(r, a, keys, cnt, rev && jv_truthy(rev));
        jv *out = jv_list_(r);
        for (size_t i = 0; i < cnt; i++) jv_push(r->A, out, a[i]);
        return out;
    }
    if (EQ("reverse")) {
        if (x->t == JV_STR) {
            jv *chars = jf_iter_list(r, x);
            jout o = {0};
            for (size_t i = chars->u.l.n; i > 0; i--) jv_write_str(r, &o, chars->u.l.a[i - 1]);
            return jo_str(r, &o);
        }
        jv *it = jf_iter_list(r, x), *out = gen(jv_list_(r));
        for (size_t i = it->u.l.n; i > 0; i--) jv_push(r->A, out, it->u.l.a[i - 1]);
        return out;
    }
    if (EQ("sum")) {
        jv *at = A(0, "attribute"), *acc = A(1, "start");
        if (!acc) acc = jv_int_(r, 0);
        jv *it = jf_iter_list(r, x);
        for (size_t i = 0; i < it->u.l.n; i++) acc = je_binop(r, OP_ADD, acc, at ? attr_path(r, it->u.l.a[i], at, NULL) : it->u.l.a[i]);
        return acc;
    }
    if (EQ("min") || EQ("max")) {
        jv *cs = A(0, "case_sensitive"), *at = A(1, "attribute");
        jv *it = jf_iter_list(r, x), *best = NULL, *bk = NULL;
        for (size_t i = 0; i < it->u.l.n; i++) {
            jv *k = sort_key(r, at ? attr_path(r, it->u.l.a[i], at, NULL) : it->u.l.a[i], cs && jv_truthy(cs));
            if (!best || (EQ("min") ? jv_cmp(r, k, bk) < 0 : jv_cmp(r, k, bk) > 0)) { best = it->u.l.a[i]; bk = k; }
        }
        return best ? best : jv_undef(r, "No aggregated item, sequence was empty.");
    }
    if (EQ("batch")) {
        int64_t size = int_arg(r, A(0, "linecount"), 1);
        if (size < 1) jr_fail(r, "ValueError", "batch size must be positive");
        jv *fill = A(1, "fill_with");
        jv *it = jf_iter_list(r, x), *out = gen(jv_list_(r)), *cur = NULL;
        for (size_t i = 0; i < it->u.l.n; i++) {
            if (!cur || (int64_t)cur->u.l.n == size) { cur = jv_list_(r); jv_push(r->A, out, cur); }
            jv_push(r->A, cur, it->u.l.a[i]);
        }
        if (cur && fill && fill->t != JV_NONE) while ((int64_t)cur->u.l.n < size) jv_push(r->A, cur, fill);
        return out;
    }
    if (EQ("slice")) { /* jinja2's: `slices` lists, the first len % slices one longer; fill_with pads the rest */
        jv *sl = A(0, "slices"), *fill = A(1, "fill_with");
        if (!sl) jr_fail(r, "TypeError", "do_slice() missing 1 required positional argument: 'slices'");
        int64_t ns = int_arg(r, sl, 0);
        if (ns == 0) jr_fail(r, "ZeroDivisionError", "integer division or modulo by zero");
        if (ns > 0 && (uint64_t)ns > r->lim->max_steps) jr_fail(r, "LimitError", "slice count too large");
        jv *it = jf_iter_list(r, x), *out = gen(jv_list_(r));
        const int64_t n = (int64_t)it->u.l.n, per = n / ns, extra = n % ns;
        int64_t off = 0;
        for (int64_t k = 0; k < ns; k++) { /* ns < 0: range(ns) is empty, as in Python */
            int64_t st = off + k * per;
            if (k < extra) off++;
            int64_t en = off + (k + 1) * per;
            jv *cur = jv_list_(r);
            for (int64_t i = st; i < en && i < n; i++) jv_push(r->A, cur, it->u.l.a[i]);
            if (fill && fill->t != JV_NONE && k >= extra) jv_push(r->A, cur, fill);
            jv_push(r->A, out, cur);
        }
        return out;
    }
    if (EQ("attr")) {
        jv *nm = need_str(r, A(0, "name"), "attribute name");
        if (x->t == JV_DICT) { jv *v = jv_dget_s(x, nm->u.s.s, nm->u.s.n); if (v && !jf_is_method(x, nm->u.s.s, nm->u.s.n)) return v; }
        return jv_undef(r, "no such attribute");
    }
    if (EQ("abs")) {
        if (x->t == JV_INT) { if (x->u.i == INT64_MIN) jr_fail(r, "OverflowError", "integer result does not fit in 64 bits"); return jv_int_(r, x->u.i < 0 ? -x->u.i : x->u.i); }
        if (x->t == JV_BOOL) return jv_int_(r, x->u.b);
        if (x->t == JV_FLOAT) return jv_float_(r, fabs(x->u.f));
        jr_fail(r, "TypeError", "bad operand type for abs(): '%s'", jv_typename(x));
    }
    if (EQ("int")) {
        jv *dflt = A(0, "default");
        if (x->t == JV_INT) return x;
        if (x->t == JV_BOOL) return jv_int_(r, x->u.b);
        if (x->t == JV_FLOAT && isfinite(x->u.f) && fabs(x->u.f) < 9.2e18) return jv_int_(r, (int64_t)x->u.f);
        if (x->t == JV_STR) {
            jv *t = strip(r, x, NULL, 1, 1);
            char buf[64];
            if (t->u.s.n && t->u.s.n < sizeof buf) {
                memcpy(buf, t->u.s.s, t->u.s.n);
                buf[t->u.s.n] = 0;
                char *e;
                long long v = strtoll(buf, &e, 10);
                if (*e == 0) return jv_int_(r, v);
                double f = strtod(buf, &e);
                if (*e == 0 && isfinite(f) && fabs(f) < 9.2e18) return jv_int_(r, (int64_t)f);
            }
        }
        return dflt ? dflt : jv_int_(r, 0);
    }
    if (EQ("float")) {
        jv *dflt = A(0, "default");
        if (jv_is_num(x)) return jv_float_(r, jv_num(x));
        if (x->t == JV_STR) {
            jv *t = strip(r, x, NULL, 1, 1);
            char buf[64];
            if (t->u.s.n && t->u.s.n < sizeof buf) {
                memcpy(buf, t->u.s.s, t->u.s.n);
                buf[t->u.s.n] = 0;
                char *e;
                double f = strtod(buf, &e);
                if (*e == 0) return jv_float_(r, f);
            }
        }
        return dflt ? dflt : jv_float_(r, 0.0);
    }
    if (EQ("round")) {
        int64_t prec = int_arg(r, A(0, "precision"), 0);
        jv *method = A(1, "method");
        if (!jv_is_num(x)) jr_fail(r, "TypeError", "round needs a number");
        double f = jv_num(x), p = pow(10.0, (double)(prec < 0 ? 0 : prec > 15 ? 15 : prec));
        if (method && method->t == JV_STR && method->u.s.n == 4 && memcmp(method->u.s.s, "ceil", 4) == 0) f = ceil(f * p) / p;
        else if (method && method->t == JV_STR && method->u.s.n == 5 && memcmp(method->u.s.s, "floor", 5) == 0) f = floor(f * p) / p;
        else {
            char buf[64];
            snprintf(buf, sizeof buf, "%.*f", (int)(prec < 0 ? 0 : prec > 15 ? 15 : prec), f);
            f = strtod(buf, NULL);
        }
        if (x->t != JV_FLOAT) return jv_int_(r, (int64_t)f);
        return jv_float_(r, f);
    }
    if (EQ("wordcount")) {
        jv *s = jv_to_str(r, x);
        int64_t c = 0;
        int in = 0;
        for (size_t i = 0; i < s->u.s.n; i++) {
            char ch = s->u.s.s[i];
            int w = is_alpha(ch) || (ch >= '0' && ch <= '9') || ch == '_' || (unsigned char)ch >= 0x80;
            if (w && !in) c++;
            in = w;
        }
        return jv_int_(r, c);
    }
    /* the rest work on str(x) */
    jv *s = jv_to_str(r, x);
    if (EQ("trim")) return strip(r, s, A(0, "chars"), 1, 1);
    if (EQ("upper")) return map_case(r, s, 1);
    if (EQ("lower")) return map_case(r, s, 0);
    if (EQ("capitalize")) return map_case(r, s, 2);
    if (EQ("title")) return map_case(r, s, 3);
    if (EQ("replace")) return replace(r, s, jv_to_str(r, A(0, "old") ? A(0, "old") : jv_strz(r, "")),
                                      jv_to_str(r, A(1, "new") ? A(1, "new") : jv_strz(r, "")), A(2, "count"));
    if (EQ("indent")) return indent_(r, s, A(0, "width"), A(1, "first"), A(2, "blank"));
    if (EQ("truncate")) { /* jinja2's: length 255, killwords false, end "...", leeway 5 (its default policy) */
        int64_t length = int_arg(r, A(0, "length"), 255), leeway = int_arg(r, A(3, "leeway"), 5);
        jv *kill = A(1, "killwords"), *end = jv_to_str(r, A(2, "end") ? A(2, "end") : jv_strz(r, "..."));
        if (x->t != JV_STR) { /* jinja2 takes len() of the value itself: an int raises that TypeError */
            len_of(r, x);
            jr_fail(r, "TypeError", "truncate: expected a string, got %s", jv_typename(x));
        }
        int64_t elen = len_of(r, end);
        if (length < elen) jr_fail(r, "AssertionError", "expected length >= %lld, got %lld", (long long)elen, (long long)length);
        if (leeway < 0) jr_fail(r, "AssertionError", "expected leeway >= 0, got %lld", (long long)leeway);
        if (len_of(r, s) <= length + leeway) return s;
        size_t cut = 0; /* the byte offset of character length - len(end) */
        for (int64_t c = 0; cut < s->u.s.n; cut++) {
            if (((unsigned char)s->u.s.s[cut] & 0xC0) != 0x80 && c++ == length - elen) break;
        }
        if (!(kill && jv_truthy(kill))) { /* rsplit(" ", 1)[0]: up to the last space, if any */
            size_t k = cut;
            while (k > 0 && s->u.s.s[k - 1] != ' ') k--;
            if (k > 0) cut = k - 1;
        }
        jout o = {0};
        jo_put_m(r, &o, s->u.s.s, cut, s->u.s.m);
        jo_put_m(r, &o, end->u.s.s, end->u.s.n, end->u.s.m);
        return jo_str(r, &o);
    }
    if (EQ("center")) {
        int64_t w = int_arg(r, A(0, "width"), 80), len = len_of(r, s);
        if (w > (int64_t)r->lim->max_string) jr_fail(r, "LimitError", "center width too large");
        jout o = {0};
        int64_t pad = w - len, left = pad / 2 + (pad & w & 1);
        for (int64_t i = 0; i < left; i++) jo_putc(r, &o, ' ');
        jo_put_m(r, &o, s->u.s.s, s->u.s.n, s->u.s.m);
        for (int64_t i = left; i < pad; i++) jo_putc(r, &o, ' ');
        return jo_str(r, &o);
    }
    if (EQ("escape") || EQ("e")) return jv_escape(r, x);
#undef A
    jr_fail(r, "TemplateRuntimeError", "No filter named '%.*s'.", (int)nlen, name);
}
