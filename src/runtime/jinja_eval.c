/*
 * jinja_eval.c — the Jinja evaluator: runs a parsed template over a context
 * (el_jinja_render) with jinja2's runtime semantics.
 *
 * Contract:
 *   - Scopes: the render's globals (el_jctx_set), then one scope per for-loop
 *     iteration and per macro call; if-blocks share their parent's scope, so
 *     {% set %} inside a loop is not seen after it (namespace() is the way
 *     out, as in jinja2). Macros see the scope they were defined in.
 *   - Undefined is jinja2's default Undefined: printing, iterating, testing and
 *     default() work on it; taking an attribute or item of it, calling it or
 *     doing arithmetic with it is an UndefinedError.
 *   - Attribute lookup is jinja2's getattr: a method name on a str / list /
 *     dict (d.items, s.strip) is the bound method, else the dict's key; item
 *     lookup tries the key first. Missing ones are Undefined.
 *   - Bounds: every evaluated node and loop iteration is a step (max_steps);
 *     macro calls nest at most max_depth deep, evaluation at most
 *     EVAL_DEPTH_MAX; the output and every string are bounded; running past
 *     any is a "LimitError" naming the line. The arena's limit bounds memory.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/jinja_internal.h"
#include "util/error.h"

#define EVAL_DEPTH_MAX 3000

static jscope *scope_new(jrender *r, jscope *parent) {
    jscope *s = ja_alloc(r->A, sizeof *s);
    s->parent = parent;
    s->vars = jv_dict_(r);
    return s;
}

static jv *builtin(jrender *r, int fn) {
    jv *v = jv_new(r->A, JV_BUILTIN);
    v->u.bm.fn = fn;
    return v;
}

static jv *lookup(jrender *r, jscope *s, const char *name, size_t n) {
    for (; s; s = s->parent) {
        jv *v = jv_dget_s(s->vars, name, n);
        if (v) return v;
    }
    jv *g = jv_dget_s(r->c->globals, name, n);
    if (g) return g;
#define IS(lit) (n == sizeof lit - 1 && memcmp(name, lit, n) == 0)
    if (IS("namespace")) return builtin(r, JB_NAMESPACE);
    if (IS("range")) return builtin(r, JB_RANGE);
    if (IS("raise_exception")) return builtin(r, JB_RAISE);
    if (IS("strftime_now")) return builtin(r, JB_STRFTIME);
    if (IS("dict")) return builtin(r, JB_DICT);
#undef IS
    char hint[160];
    snprintf(hint, sizeof hint, "'%.*s' is undefined", (int)(n > 100 ? 100 : n), name);
    return jv_undef(r, hint);
}

_Noreturn static void undefined_error(jrender *r, const jv *u) {
    jr_fail(r, "UndefinedError", "%.*s", (int)u->u.s.n, u->u.s.s);
}

static jv *no_attr(jrender *r, const jv *obj, const char *name, size_t n) {
    char hint[200];
    snprintf(hint, sizeof hint, "'%s object' has no attribute '%.*s'", jv_typename(obj), (int)(n > 100 ? 100 : n), name);
    return jv_undef(r, hint);
}

static jv *getattr_(jrender *r, jv *obj, const char *name, size_t n) {
    if (obj->t == JV_UNDEF) undefined_error(r, obj);
    if (obj->t == JV_NS) {
        jv *v = jv_dget_s(obj, name, n);
        return v ? v : no_attr(r, obj, name, n);
    }
    if (obj->t == JV_LOOP && !(n == 5 && memcmp(name, "cycle", 5) == 0)) {
        jv *v = jv_dget_s(obj, name, n);
        return v ? v : no_attr(r, obj, name, n);
    }
    if (jf_is_method(obj, name, n)) {
        jv *m = builtin(r, JB_METHOD);
        m->u.bm.self = obj;
        m->u.bm.name = name;
        m->u.bm.n = n;
        return m;
    }
    if (obj->t == JV_DICT) {
        jv *v = jv_dget_s(obj, name, n);
        if (v) return v;
    }
    return no_attr(r, obj, name, n);
}

/* code point offsets of a UTF-8 string: byte offset of code point i */
static size_t cp_count(const char *s, size_t n) {
    size_t c = 0;
    for (size_t i = 0; i < n; i++) c += ((unsigned char)s[i] & 0xC0) != 0x80;
    return c;
}
static size_t cp_offset(const char *s, size_t n, size_t idx) {
    size_t c = 0;
    for (size_t i = 0; i < n; i++) {
        if (((unsigned char)s[i] & 0xC0) != 0x80) {
            if (c == idx) return i;
            c++;
        }
    }
    return n;
}

static jv *getitem(jrender *r, jv *obj, jv *key) {
    if (obj->t == JV_UNDEF) undefined_error(r, obj);
    if (obj->t == JV_DICT || obj->t == JV_NS || obj->t == JV_LOOP) {
        jv *v = jv_dget(obj, key);
        if (v) return v;
        if (key->t == JV_STR) return getattr_(r, obj, key->u.s.s, key->u.s.n);
        return jv_undef(r, "'dict object' has no such item");
    }
    if (obj->t == JV_LIST && (obj->flags & JVF_GEN)) jr_fail(r, "TypeError", "'generator' object is not subscriptable");
    if ((obj->t == JV_LIST || obj->t == JV_STR) && (key->t == JV_INT || key->t == JV_BOOL)) {
        int64_t i = key->t == JV_INT ? key->u.i : key->u.b;
        size_t len = obj->t == JV_LIST ? obj->u.l.n : cp_count(obj->u.s.s, obj->u.s.n);
        if (i < 0) i += (int64_t)len;
        if (i < 0 || (uint64_t)i >= len) return jv_undef(r, "index out of range");
        if (obj->t == JV_LIST) return obj->u.l.a[i];
        size_t a = cp_offset(obj->u.s.s, obj->u.s.n, (size_t)i), b = cp_offset(obj->u.s.s, obj->u.s.n, (size_t)i + 1);
        return jv_sub(r, obj, a, b - a);
    }
    if (key->t == JV_STR) return getattr_(r, obj, key->u.s.s, key->u.s.n);
    return jv_undef(r, "no such item");
}

static int64_t slice_arg(jrender *r, jv *v, int64_t dflt) {
    if (!v || v->t == JV_NONE) return dflt;
    if (v->t == JV_INT) return v->u.i;
    if (v->t == JV_BOOL) return v->u.b;
    jr_fail(r, "TypeError", "slice indices must be integers or None");
}

static jv *slice(jrender *r, jv *obj, jv *a, jv *b, jv *c) {
    if (obj->t == JV_UNDEF) undefined_error(r, obj);
    if ((obj->t != JV_LIST && obj->t != JV_STR) || (obj->flags & JVF_GEN))
        jr_fail(r, "TypeError", "'%s' object is not subscriptable", jv_typename(obj));
    int64_t len = obj->t == JV_LIST ? (int64_t)obj->u.l.n : (int64_t)cp_count(obj->u.s.s, obj->u.s.n);
    int64_t step = slice_arg(r, c, 1);
    if (step == 0) jr_fail(r, "ValueError", "slice step cannot be zero");
    int64_t lo, hi;
    if (step > 0) {
        lo = slice_arg(r, a, 0); hi = slice_arg(r, b, len);
        lo = lo < 0 ? (lo + len < 0 ? 0 : lo + len) : (lo > len ? len : lo);
        hi = hi < 0 ? (hi + len < 0 ? 0 : hi + len) : (hi > len ? len : hi);
    } else {
        lo = slice_arg(r, a, len - 1); hi = b && b->t != JV_NONE ? slice_arg(r, b, -1) : -1 - len;
        lo = lo < 0 ? (lo + len < 0 ? -1 : lo + len) : (lo >= len ? len - 1 : lo);
        hi = hi < 0 ? (hi + len < -1 ? -1 : hi + len) : (hi >= len ? len - 1 : hi);
    }
    jv *out = obj->t == JV_LIST ? jv_list_(r) : NULL;
    jout o = {0};
    for (int64_t i = lo; step > 0 ? i < hi : i > hi; i += step) {
        if (obj->t == JV_LIST) jv_push(r->A, out, obj->u.l.a[i]);
        else {
            size_t x = cp_offset(obj->u.s.s, obj->u.s.n, (size_t)i), y = cp_offset(obj->u.s.s, obj->u.s.n, (size_t)i + 1);
            jo_put_m(r, &o, obj->u.s.s + x, y - x, obj->u.s.m ? obj->u.s.m + x : NULL);
        }
    }
    if (out) out->flags = obj->flags;
    return out ? out : jo_str(r, &o);
}

static void assign(jrender *r, jscope *s, const jnode *t, jv *v) {
    if (t->k == E_NAME) {
        jv_dset_s(r, s->vars, t->name, v);
    } else if (t->k == E_ATTR) {
        jv *ns = lookup(r, s, t->a->name, t->a->nlen);
        if (ns->t != JV_NS) jr_fail(r, "TemplateRuntimeError", "cannot assign attribute on non-namespace object");
        jv_dset_s(r, ns, t->name, v);
    } else { /* tuple unpacking */
        jv *items = jf_iter_list(r, v);
        if (items->u.l.n != (size_t)t->nargs)
            jr_fail(r, "ValueError", "%s values to unpack (expected %d, got %zu)",
                    items->u.l.n > (size_t)t->nargs ? "too many" : "not enough", t->nargs, items->u.l.n);
        for (int i = 0; i < t->nargs; i++) assign(r, s, t->args[i], items->u.l.a[i]);
    }
}

static int64_t checked(jrender *r, int ok, int64_t v) {
    if (!ok) jr_fail(r, "OverflowError", "integer result does not fit in 64 bits");
    return v;
}

/* Python's str % args: %s %r %d %i %f %x %% with flags "-0", width and precision */
static jv *percent_format(jrender *r, jv *fmt, jv *b) {
    jv *args = b->t == JV_LIST && (b->flags & JVF_TUPLE) ? b : NULL;
    size_t ai = 0, na = args ? args->u.l.n : 1;
    jout o = {0};
    const char *p = fmt->u.s.s;
    size_t n = fmt->u.s.n;
    for (size_t i = 0; i < n; i++) {
        if (p[i] != '%') { jo_put_m(r, &o, p + i, 1, fmt->u.s.m ? fmt->u.s.m + i : NULL); continue; }
        if (++i >= n) jr_fail(r, "ValueError", "incomplete format");
        if (p[i] == '%') { jo_putc(r, &o, '%'); continue; }
        char spec[32];
        size_t sn = 0;
        spec[sn++] = '%';
        while (i < n && strchr("-0 +#", p[i]) && sn < 8) spec[sn++] = p[i++];
        long num = 0;
        while (i < n && p[i] >= '0' && p[i] <= '9' && sn < 16) { num = num * 10 + (p[i] - '0'); spec[sn++] = p[i++]; }
        if (i < n && p[i] == '.') {
            spec[sn++] = p[i++];
            long prec = 0;
            while (i < n && p[i] >= '0' && p[i] <= '9' && sn < 24) { prec = prec * 10 + (p[i] - '0'); spec[sn++] = p[i++]; }
            if (prec > num) num = prec;
        }
        if (num > 4096) jr_fail(r, "LimitError", "format width or precision %ld too large", num);
        if (i >= n || (i < n && p[i] >= '0' && p[i] <= '9')) jr_fail(r, "ValueError", "incomplete format");
        char conv = p[i];
        if (ai >= na) jr_fail(r, "TypeError", "not enough arguments for format string");
        jv *v = args ? args->u.l.a[ai++] : (ai++, b);
        if (conv == 's' || conv == 'r') {
            jout t = {0};
            if (conv == 's') jv_write_str(r, &t, v); else jv_write_repr(r, &t, v);
            spec[sn++] = 's';
            spec[sn] = 0;
            if (sn == 2) { jo_put_m(r, &o, t.p, t.n, t.m); continue; }
            char *tmp = ja_alloc(r->A, t.n + 1);
            if (t.n) memcpy(tmp, t.p, t.n);
            int w = snprintf(NULL, 0, spec, tmp);
            char *ob = ja_alloc(r->A, (size_t)w + 1);
            snprintf(ob, (size_t)w + 1, spec, tmp);
            size_t from = o.n;
            jo_put(r, &o, ob, (size_t)w);
            if (t.m && memchr(t.m, 1, t.n)) jo_mark(r, &o, from); /* padded content stays content */
        } else if (strchr("dixXfFeEgG", conv)) {
            if (!jv_is_num(v)) jr_fail(r, "TypeError", "%%%c format: a real number is required, not %s", conv, jv_typename(v));
            if (strchr("dixX", conv)) {
                spec[sn++] = 'l'; spec[sn++] = 'l'; spec[sn++] = conv == 'i' ? 'd' : conv; spec[sn] = 0;
                double f = jv_num(v);
                if (v->t == JV_FLOAT && !(f > -9.2e18 && f < 9.2e18)) jr_fail(r, "OverflowError", "cannot convert float to integer");
                long long x = v->t == JV_FLOAT ? (long long)f : v->t == JV_INT ? (long long)v->u.i : v->u.b;
                int w = snprintf(NULL, 0, spec, x);
                char *buf = ja_alloc(r->A, (size_t)w + 1);
                snprintf(buf, (size_t)w + 1, spec, x);
                jo_put(r, &o, buf, (size_t)w);
            } else {
                spec[sn++] = conv; spec[sn] = 0;
                int w = snprintf(NULL, 0, spec, jv_num(v));
                char *buf = ja_alloc(r->A, (size_t)w + 1);
                snprintf(buf, (size_t)w + 1, spec, jv_num(v));
                jo_put(r, &o, buf, (size_t)w);
            }
        } else jr_fail(r, "ValueError", "unsupported format character '%c'", conv);
    }
    if (ai < na) jr_fail(r, "TypeError", "not all arguments converted during string formatting");
    return jo_str(r, &o);
}

jv *je_binop(jrender *r, int op, jv *a, jv *b) {
    if (a->t == JV_UNDEF) undefined_error(r, a);
    if (b->t == JV_UNDEF) undefined_error(r, b);
    static const char *const sym[] = {"", "+", "-", "*", "/", "//", "%", "**"};
    if (jv_is_num(a) && jv_is_num(b)) {
        int ints = a->t != JV_FLOAT && b->t != JV_FLOAT;
        int64_t x = a->t == JV_INT ? a->u.i : a->t == JV_BOOL ? a->u.b : 0;
        int64_t y = b->t == JV_INT ? b->u.i : b->t == JV_BOOL ? b->u.b : 0;
        double fx = jv_num(a), fy = jv_num(b);
        int64_t z;
        switch (op) {
        case OP_ADD: if (ints) { int ok = !__builtin_add_overflow(x, y, &z); return jv_int_(r, checked(r, ok, z)); } return jv_float_(r, fx + fy);
        case OP_SUB: if (ints) { int ok = !__builtin_sub_overflow(x, y, &z); return jv_int_(r, checked(r, ok, z)); } return jv_float_(r, fx - fy);
        case OP_MUL: if (ints) { int ok = !__builtin_mul_overflow(x, y, &z); return jv_int_(r, checked(r, ok, z)); } return jv_float_(r, fx * fy);
        case OP_DIV:
            if (fy == 0) jr_fail(r, "ZeroDivisionError", "division by zero");
            return jv_float_(r, fx / fy);
        case OP_FLOORDIV: case OP_MOD:
            if (ints) {
                if (y == 0) jr_fail(r, "ZeroDivisionError", "integer division or modulo by zero");
                if (x == INT64_MIN && y == -1) jr_fail(r, "OverflowError", "integer result does not fit in 64 bits");
                int64_t q = x / y, m = x % y;
                if (m != 0 && ((m < 0) != (y < 0))) { q--; m += y; }
                return jv_int_(r, op == OP_FLOORDIV ? q : m);
            } else {
                if (fy == 0) jr_fail(r, "ZeroDivisionError", "float division by zero");
                double m = __builtin_fmod(fx, fy);
                if (m != 0 && ((m < 0) != (fy < 0))) m += fy;
                if (op == OP_MOD) return jv_float_(r, m);
                return jv_float_(r, __builtin_floor((fx - m) / fy + 0.5) == (fx - m) / fy ? (fx - m) / fy : __builtin_floor(fx / fy));
            }
        case OP_POW:
            if (ints && y >= 0) {
                int64_t acc = 1;
                for (int64_t i = 0; i < y; i++) {
                    if (__builtin_mul_overflow(acc, x, &acc)) jr_fail(r, "OverflowError", "integer result does not fit in 64 bits");
                    if (acc == 0 || acc == 1) break;
                }
                return jv_int_(r, acc);
            }
            return jv_float_(r, __builtin_pow(fx, fy));
        }
    }
    if (op == OP_MOD && a->t == JV_STR) return percent_format(r, a, b);
    if (op == OP_ADD && a->t == JV_STR && b->t == JV_STR) {
        int safe = (a->flags | b->flags) & JVF_SAFE; /* Markup + str escapes the str */
        if (safe) { a = jv_escape(r, a); b = jv_escape(r, b); }
        jout o = {0};
        jo_put_m(r, &o, a->u.s.s, a->u.s.n, a->u.s.m);
        jo_put_m(r, &o, b->u.s.s, b->u.s.n, b->u.s.m);
        jv *v = jo_str(r, &o);
        v->flags = safe;
        return v;
    }
    if (op == OP_ADD && a->t == JV_LIST && b->t == JV_LIST && !((a->flags | b->flags) & JVF_GEN)) {
        jv *l = jv_list_(r);
        for (size_t i = 0; i < a->u.l.n; i++) jv_push(r->A, l, a->u.l.a[i]);
        for (size_t i = 0; i < b->u.l.n; i++) jv_push(r->A, l, b->u.l.a[i]);
        return l;
    }
    if (op == OP_MUL && ((a->t == JV_STR || a->t == JV_LIST) && (b->t == JV_INT || b->t == JV_BOOL))) {
        int64_t k = b->t == JV_INT ? b->u.i : b->u.b;
        if (a->t == JV_STR) {
            jout o = {0};
            if (k > 0) jr_check_str(r, a->u.s.n * (size_t)(k > 1 << 30 ? 1 << 30 : k));
            for (int64_t i = 0; i < k; i++) jo_put_m(r, &o, a->u.s.s, a->u.s.n, a->u.s.m);
            return jo_str(r, &o);
        }
        jv *l = jv_list_(r);
        if (k > 0 && a->u.l.n * (size_t)(k > 1 << 30 ? 1 << 30 : k) > r->lim->max_string) jr_fail(r, "LimitError", "list too large");
        for (int64_t i = 0; i < k; i++)
            for (size_t j = 0; j < a->u.l.n; j++) jv_push(r->A, l, a->u.l.a[j]);
        return l;
    }
    if (op == OP_MUL && (b->t == JV_STR || b->t == JV_LIST) && (a->t == JV_INT || a->t == JV_BOOL)) return je_binop(r, op, b, a);
    if (op == OP_ADD && a->t == JV_STR)
        jr_fail(r, "TypeError", "can only concatenate str (not \"%s\") to str", jv_typename(b));
    if (op == OP_ADD && a->t == JV_LIST)
        jr_fail(r, "TypeError", "can only concatenate list (not \"%s\") to list", jv_typename(b));
    jr_fail(r, "TypeError", "unsupported operand type(s) for %s: '%s' and '%s'", sym[op <= OP_POW ? op : 0], jv_typename(a), jv_typename(b));
}

static int contains(jrender *r, jv *item, jv *c) {
    switch (c->t) {
    case JV_STR:
        if (item->t != JV_STR) jr_fail(r, "TypeError", "'in <string>' requires string as left operand, not %s", jv_typename(item));
        if (!item->u.s.n) return 1;
        for (size_t i = 0; i + item->u.s.n <= c->u.s.n; i++)
            if (memcmp(c->u.s.s + i, item->u.s.s, item->u.s.n) == 0) return 1;
        return 0;
    case JV_LIST:
        for (size_t i = 0; i < c->u.l.n; i++)
            if (jv_eq(c->u.l.a[i], item)) return 1;
        return 0;
    case JV_DICT: case JV_NS: return jv_dget(c, item) != NULL;
    case JV_UNDEF: return 0;
    default: jr_fail(r, "TypeError", "argument of type '%s' is not iterable", jv_typename(c));
    }
}

static void eval_args(jrender *r, const jnode *n, jscope *s, jv ***out) {
    *out = n->nargs ? ja_alloc(r->A, (size_t)n->nargs * sizeof(jv *)) : NULL;
    for (int i = 0; i < n->nargs; i++) (*out)[i] = je_eval(r, n->args[i], s);
}

static jv *apply_filter(jrender *r, const jnode *f, jscope *s, jv *base) {
    jv *x = f->a ? je_eval(r, f->a, s) : base;
    if (!f->a && f != r->filter_base_node) {}
    jv **args;
    eval_args(r, f, s, &args);
    r->line = f->line;
    if (f->unknown) jr_fail(r, "TemplateRuntimeError", "No filter named '%s' found.", f->name);
    return jf_filter(r, f, f->name, f->nlen, x, args, f->kw, f->nargs);
}

/* a filter chain whose innermost filter has no operand: applied to base */
static jv *apply_chain(jrender *r, const jnode *f, jscope *s, jv *base) {
    jv *x = f->a ? apply_chain(r, f->a, s, base) : base;
    jv **args;
    eval_args(r, f, s, &args);
    r->line = f->line;
    return jf_filter(r, f, f->name, f->nlen, x, args, f->kw, f->nargs);
}

static void step(jrender *r) {
    if (++r->steps > r->lim->max_steps) jr_fail(r, "LimitError", "template ran more than %llu steps (endless loop?)", (unsigned long long)r->lim->max_steps);
}

jv *je_eval(jrender *r, const jnode *n, jscope *s) {
    step(r);
    if (++r->edepth > EVAL_DEPTH_MAX) jr_fail(r, "LimitError", "evaluation nested too deep");
    r->line = n->line;
    jv *v = NULL;
    switch (n->k) {
    case E_CONST: v = n->cval; break;
    case E_NAME: v = lookup(r, s, n->name, n->nlen); break;
    case E_ATTR: v = getattr_(r, je_eval(r, n->a, s), n->name, n->nlen); break;
    case E_ITEM: { jv *o = je_eval(r, n->a, s); v = getitem(r, o, je_eval(r, n->b, s)); break; }
    case E_SLICE: {
        jv *o = je_eval(r, n->a, s);
        jv *p[3] = {0};
        for (int i = 0; i < 3; i++) if (n->args[i]) p[i] = je_eval(r, n->args[i], s);
        v = slice(r, o, p[0], p[1], p[2]);
        break;
    }
    case E_CALL: {
        jv *fn = je_eval(r, n->a, s);
        jv **args;
        eval_args(r, n, s, &args);
        r->line = n->line;
        v = je_call_value(r, n, fn, args, n->kw, n->nargs, s);
        break;
    }
    case E_FILTER: v = apply_filter(r, n, s, NULL); break;
    case E_TEST: {
        jv *x = je_eval(r, n->a, s);
        jv **args;
        eval_args(r, n, s, &args);
        r->line = n->line;
        if (n->unknown) jr_fail(r, "TemplateRuntimeError", "No test named '%s' found.", n->name);
        v = jv_bool_(r, jf_test(r, n->name, n->nlen, x, args, n->nargs) ^ n->op);
        break;
    }
    case E_BIN: { jv *a = je_eval(r, n->a, s); v = je_binop(r, n->op, a, je_eval(r, n->b, s)); break; }
    case E_NEG: case E_POS: {
        jv *a = je_eval(r, n->a, s);
        if (a->t == JV_UNDEF) undefined_error(r, a);
        if (a->t == JV_FLOAT) v = jv_float_(r, n->k == E_NEG ? -a->u.f : a->u.f);
        else if (a->t == JV_INT || a->t == JV_BOOL) {
            int64_t x = a->t == JV_INT ? a->u.i : a->u.b;
            if (n->k == E_NEG && x == INT64_MIN) jr_fail(r, "OverflowError", "integer result does not fit in 64 bits");
            v = jv_int_(r, n->k == E_NEG ? -x : x);
        } else jr_fail(r, "TypeError", "bad operand type for unary %c: '%s'", n->k == E_NEG ? '-' : '+', jv_typename(a));
        break;
    }
    case E_NOT: v = jv_bool_(r, !jv_truthy(je_eval(r, n->a, s))); break;
    case E_AND: { jv *a = je_eval(r, n->a, s); v = jv_truthy(a) ? je_eval(r, n->b, s) : a; break; }
    case E_OR: { jv *a = je_eval(r, n->a, s); v = jv_truthy(a) ? a : je_eval(r, n->b, s); break; }
    case E_COND:
        if (jv_truthy(je_eval(r, n->b, s))) v = je_eval(r, n->a, s);
        else v = n->c ? je_eval(r, n->c, s) : jv_undef(r, "the inline if expression on line evaluated to false and no else section was defined.");
        break;
    case E_LIST: case E_TUPLE:
        v = jv_list_(r);
        if (n->k == E_TUPLE) v->flags = JVF_TUPLE;
        for (int i = 0; i < n->nargs; i++) jv_push(r->A, v, je_eval(r, n->args[i], s));
        break;
    case E_DICT:
        v = jv_dict_(r);
        for (int i = 0; i + 1 < n->nargs; i += 2) {
            jv *k = je_eval(r, n->args[i], s);
            jv_dset(r->A, v, k, je_eval(r, n->args[i + 1], s));
        }
        break;
    case E_CONCAT: {
        jout o = {0};
        for (int i = 0; i < n->nargs; i++) jv_write_str(r, &o, je_eval(r, n->args[i], s));
        v = jo_str(r, &o);
        break;
    }
    case E_CMP: {
        jv *a = je_eval(r, n->a, s);
        int ok = 1;
        for (int i = 0; i < n->nargs && ok; i++) {
            jv *b = je_eval(r, n->args[i], s);
            r->line = n->line;
            switch (n->ops[i]) {
            case OP_EQ: ok = jv_eq(a, b); break;
            case OP_NE: ok = !jv_eq(a, b); break;
            case OP_LT: ok = jv_cmp(r, a, b) < 0; break;
            case OP_LE: ok = jv_cmp(r, a, b) <= 0; break;
            case OP_GT: ok = jv_cmp(r, a, b) > 0; break;
            case OP_GE: ok = jv_cmp(r, a, b) >= 0; break;
            case OP_IN: ok = contains(r, a, b); break;
            case OP_NOTIN: ok = !contains(r, a, b); break;
            }
            a = b;
        }
        v = jv_bool_(r, ok);
        break;
    }
    default: jr_fail(r, "TemplateRuntimeError", "not an expression");
    }
    r->edepth--;
    return v;
}

static jv *call_macro(jrender *r, const jnode *m, jscope *closure, jv **args, const char **kw, int nargs, jv *caller) {
    if (++r->depth > r->lim->max_depth) jr_fail(r, "LimitError", "macro calls nested deeper than %d (endless recursion?)", r->lim->max_depth);
    jscope *s = scope_new(r, closure);
    int npos = 0;
    for (int i = 0; i < nargs; i++) if (!kw[i]) npos++;
    const int accepts = m->k == N_MACRO ? m->op : 0; /* 1: varargs, 2: kwargs named in the body */
    if (npos > m->nargs && !(accepts & 1))
        jr_fail(r, "TypeError", "macro '%s' takes not more than %d argument(s)", m->name ? m->name : "caller", m->nargs);
    jv *varargs = jv_list_(r), *kwargs = jv_dict_(r);
    varargs->flags = JVF_TUPLE;
    int pi = 0;
    for (int i = 0; i < nargs; i++) {
        if (kw[i]) {
            int found = 0;
            for (int j = 0; j < m->nargs; j++)
                if (strcmp(m->args[j]->name, kw[i]) == 0) found = 1;
            if (!found && !(accepts & 2))
                jr_fail(r, "TypeError", "macro '%s' takes no keyword argument '%s'", m->name ? m->name : "caller", kw[i]);
            jv_dset_s(r, found ? s->vars : kwargs, kw[i], args[i]);
        } else if (pi < m->nargs) jv_dset_s(r, s->vars, m->args[pi++]->name, args[i]);
        else jv_push(r->A, varargs, args[i]);
    }
    jv_dset_s(r, s->vars, "varargs", varargs);
    jv_dset_s(r, s->vars, "kwargs", kwargs);
    for (int j = 0; j < m->nargs; j++) {
        const jnode *p = m->args[j];
        if (jv_dget_s(s->vars, p->name, p->nlen)) continue;
        jv_dset_s(r, s->vars, p->name, p->a ? je_eval(r, p->a, s) : jv_undef(r, "missing macro argument"));
    }
    if (caller) jv_dset_s(r, s->vars, "caller", caller);
    jout *saved = r->out, o = {0};
    r->out = &o;
    je_exec_body(r, m->body, m->nbody, s);
    r->out = saved;
    r->brk = 0;
    r->depth--;
    return jo_str(r, &o);
}

jv *je_call_value(jrender *r, const jnode *at, jv *fn, jv **args, const char **kw, int nargs, jscope *s) {
    (void)at;
    (void)s;
    if (fn->t == JV_UNDEF) undefined_error(r, fn);
    if (fn->t == JV_MACRO) {
        jv *caller = NULL;
        jv **a2 = args;
        const char **k2 = kw;
        int n2 = nargs;
        for (int i = 0; i < nargs; i++)
            if (kw[i] && strcmp(kw[i], "caller") == 0) {
                caller = args[i];
                a2 = ja_alloc(r->A, (size_t)nargs * sizeof *a2);
                k2 = ja_alloc(r->A, (size_t)nargs * sizeof *k2);
                n2 = 0;
                for (int j = 0; j < nargs; j++) if (j != i) { a2[n2] = args[j]; k2[n2++] = kw[j]; }
            }
        return call_macro(r, fn->u.m.node, fn->u.m.closure, a2, k2, n2, caller ? caller : fn->u.m.caller);
    }
    if (fn->t != JV_BUILTIN) jr_fail(r, "TypeError", "'%s' object is not callable", jv_typename(fn));
    switch (fn->u.bm.fn) {
    case JB_METHOD: {
        int found = 0;
        jv *v = jf_method(r, fn->u.bm.self, fn->u.bm.name, fn->u.bm.n, args, kw, nargs, &found);
        if (!found) jr_fail(r, "TypeError", "'%s' has no method '%.*s'", jv_typename(fn->u.bm.self), (int)fn->u.bm.n, fn->u.bm.name);
        return v;
    }
    case JB_NAMESPACE: case JB_DICT: {
        jv *d = jv_new(r->A, fn->u.bm.fn == JB_NAMESPACE ? JV_NS : JV_DICT);
        for (int i = 0; i < nargs; i++) {
            if (kw[i]) jv_dset_s(r, d, kw[i], args[i]);
            else if (args[i]->t == JV_DICT)
                for (size_t j = 0; j < args[i]->u.d.n; j++) jv_dset(r->A, d, args[i]->u.d.k[j], args[i]->u.d.v[j]);
            else jr_fail(r, "TypeError", "%s() takes mappings or keyword arguments", fn->u.bm.fn == JB_NAMESPACE ? "namespace" : "dict");
        }
        return d;
    }
    case JB_RANGE: {
        int64_t p[3] = {0, 0, 1};
        if (nargs < 1 || nargs > 3) jr_fail(r, "TypeError", "range expected 1 to 3 arguments, got %d", nargs);
        for (int i = 0; i < nargs; i++) {
            if (args[i]->t != JV_INT && args[i]->t != JV_BOOL) jr_fail(r, "TypeError", "'%s' object cannot be interpreted as an integer", jv_typename(args[i]));
            p[nargs == 1 ? 1 : i] = args[i]->t == JV_INT ? args[i]->u.i : args[i]->u.b;
        }
        if (p[2] == 0) jr_fail(r, "ValueError", "range() arg 3 must not be zero");
        jv *l = jv_list_(r);
        double cnt = ((double)p[1] - (double)p[0]) / (double)p[2];
        if (cnt > 100000) jr_fail(r, "OverflowError", "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
        for (int64_t i = p[0]; p[2] > 0 ? i < p[1] : i > p[1]; i += p[2]) jv_push(r->A, l, jv_int_(r, i));
        return l;
    }
    case JB_RAISE: {
        jv *m = nargs ? jv_to_str(r, args[0]) : jv_strz(r, "");
        jr_fail(r, "TemplateError", "%.*s", (int)(m->u.s.n > 300 ? 300 : m->u.s.n), m->u.s.s);
    }
    case JB_STRFTIME: {
        if (nargs != 1 || args[0]->t != JV_STR) jr_fail(r, "TypeError", "strftime_now() takes one format string");
        struct tm tm = r->now;
        if (!r->have_now) { time_t t = time(NULL); localtime_r(&t, &tm); }
        char fmt[256], buf[512];
        size_t n = args[0]->u.s.n < sizeof fmt - 1 ? args[0]->u.s.n : sizeof fmt - 1;
        memcpy(fmt, args[0]->u.s.s, n);
        fmt[n] = 0;
        size_t w = n ? strftime(buf, sizeof buf, fmt, &tm) : 0;
        return jv_str_n(r, buf, w);
    }
    }
    jr_fail(r, "TypeError", "not callable");
}

static void out_value(jrender *r, jv *v) {
    jv_write_str(r, r->out, v);
    if (r->out->n > r->lim->max_output) jr_fail(r, "LimitError", "output passes %zu bytes", r->lim->max_output);
}

static void exec_for(jrender *r, const jnode *n, jscope *s) {
    jv *seq = je_eval(r, n->b, s);
    if (seq->t == JV_NONE || seq->t == JV_INT || seq->t == JV_FLOAT || seq->t == JV_BOOL)
        jr_fail(r, "TypeError", "'%s' object is not iterable", jv_typename(seq));
    jv *items = jf_iter_list(r, seq);
    if (n->c) { /* loop filter: the items the condition keeps */
        jv *kept = jv_list_(r);
        for (size_t i = 0; i < items->u.l.n; i++) {
            step(r);
            jscope *fs = scope_new(r, s);
            assign(r, fs, n->a, items->u.l.a[i]);
            if (jv_truthy(je_eval(r, n->c, fs))) jv_push(r->A, kept, items->u.l.a[i]);
        }
        items = kept;
    }
    size_t len = items->u.l.n;
    for (size_t i = 0; i < len; i++) {
        step(r);
        jscope *is = scope_new(r, s);
        jv *loop = jv_new(r->A, JV_LOOP);
        jv_dset_s(r, loop, "index", jv_int_(r, (int64_t)i + 1));
        jv_dset_s(r, loop, "index0", jv_int_(r, (int64_t)i));
        jv_dset_s(r, loop, "revindex", jv_int_(r, (int64_t)(len - i)));
        jv_dset_s(r, loop, "revindex0", jv_int_(r, (int64_t)(len - i - 1)));
        jv_dset_s(r, loop, "first", jv_bool_(r, i == 0));
        jv_dset_s(r, loop, "last", jv_bool_(r, i + 1 == len));
        jv_dset_s(r, loop, "length", jv_int_(r, (int64_t)len));
        jv_dset_s(r, loop, "depth", jv_int_(r, 1));
        jv_dset_s(r, loop, "depth0", jv_int_(r, 0));
        jv_dset_s(r, loop, "previtem", i ? items->u.l.a[i - 1] : jv_undef(r, "there is no previous item"));
        jv_dset_s(r, loop, "nextitem", i + 1 < len ? items->u.l.a[i + 1] : jv_undef(r, "there is no next item"));
        jv_dset_s(r, is->vars, "loop", loop);
        assign(r, is, n->a, items->u.l.a[i]);
        je_exec_body(r, n->body, n->nbody, is);
        if (r->brk == 1) { r->brk = 0; break; }
        r->brk = 0;
    }
    if (len == 0 && n->nalt) je_exec_body(r, n->alt, n->nalt, s);
}

static void exec_stmt(jrender *r, const jnode *n, jscope *s) {
    step(r);
    r->line = n->line;
    switch (n->k) {
    case N_TEXT:
        jo_put(r, r->out, n->cval->u.s.s, n->cval->u.s.n);
        if (r->out->n > r->lim->max_output) jr_fail(r, "LimitError", "output passes %zu bytes", r->lim->max_output);
        break;
    case N_OUTPUT: out_value(r, je_eval(r, n->a, s)); break;
    case N_IF:
        if (jv_truthy(je_eval(r, n->a, s))) je_exec_body(r, n->body, n->nbody, s);
        else je_exec_body(r, n->alt, n->nalt, s);
        break;
    case N_FOR: exec_for(r, n, s); break;
    case N_SET: assign(r, s, n->a, je_eval(r, n->b, s)); break;
    case N_SETBLOCK: case N_FILTERBLOCK: {
        jout *saved = r->out, o = {0};
        r->out = &o;
        je_exec_body(r, n->body, n->nbody, s);
        r->out = saved;
        jv *v = jo_str(r, &o);
        if (n->c) v = apply_chain(r, n->c, s, v);
        if (n->k == N_SETBLOCK) assign(r, s, n->a, v);
        else out_value(r, v);
        break;
    }
    case N_MACRO: {
        jv *m = jv_new(r->A, JV_MACRO);
        m->u.m.node = n;
        m->u.m.closure = s;
        jv_dset_s(r, s->vars, n->name, m);
        break;
    }
    case N_CALLBLOCK: {
        jv *caller = jv_new(r->A, JV_MACRO);
        caller->u.m.node = n;
        caller->u.m.closure = s;
        const jnode *c = n->a;
        jv *fn = je_eval(r, c->a, s);
        jv **args;
        eval_args(r, c, s, &args);
        if (fn->t != JV_MACRO) jr_fail(r, "TypeError", "{%% call %%} needs a macro");
        out_value(r, call_macro(r, fn->u.m.node, fn->u.m.closure, args, c->kw, c->nargs, caller));
        break;
    }
    case N_BREAK: r->brk = 1; break;
    case N_CONTINUE: r->brk = 2; break;
    case N_BLOCK: je_exec_body(r, n->body, n->nbody, s); break;
    default: jr_fail(r, "TemplateRuntimeError", "not a statement");
    }
}

void je_exec_body(jrender *r, jnode **body, int n, jscope *s) {
    if (++r->edepth > EVAL_DEPTH_MAX) jr_fail(r, "LimitError", "evaluation nested too deep");
    for (int i = 0; i < n && !r->brk; i++) exec_stmt(r, body[i], s);
    r->edepth--;
}

/* ---- contexts and the entry point ---- */
el_jctx *el_jctx_new(const el_jinja_limits *lim) {
    el_jctx *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->lim = lim ? *lim : (el_jinja_limits){0};
    if (!c->lim.max_output) c->lim.max_output = 4u << 20;
    if (!c->lim.max_string) c->lim.max_string = 4u << 20;
    if (!c->lim.max_memory) c->lim.max_memory = 256u << 20;
    if (!c->lim.max_steps) c->lim.max_steps = 20000000;
    if (!c->lim.max_depth) c->lim.max_depth = 200;
    c->arena.limit = c->lim.max_memory;
    c->globals = jv_new(&c->arena, JV_DICT);
    if (!c->globals) { free(c); return NULL; }
    return c;
}

void el_jctx_free(el_jctx *c) {
    if (!c) return;
    ja_free_all(&c->arena);
    free(c);
}

void el_jctx_set_now(el_jctx *c, const struct tm *now) {
    c->now = *now;
    c->have_now = 1;
}

int el_jctx_set(el_jctx *c, const char *name, jv *v) {
    if (!v) return -1;
    jv *k = el_jv_str(c, name, strlen(name));
    if (!k) return -1;
    size_t before = c->arena.used;
    jv_dset(&c->arena, c->globals, k, v);
    (void)before;
    return jv_dget_s(c->globals, name, strlen(name)) == v ? 0 : -1;
}

jv *el_jv_none(el_jctx *c) { return jv_new(&c->arena, JV_NONE); }
jv *el_jv_bool(el_jctx *c, int b) { jv *v = jv_new(&c->arena, JV_BOOL); if (v) v->u.b = !!b; return v; }
jv *el_jv_int(el_jctx *c, int64_t i) { jv *v = jv_new(&c->arena, JV_INT); if (v) v->u.i = i; return v; }
jv *el_jv_float(el_jctx *c, double f) { jv *v = jv_new(&c->arena, JV_FLOAT); if (v) v->u.f = f; return v; }
jv *el_jv_str(el_jctx *c, const char *s, size_t n) {
    jv *v = jv_new(&c->arena, JV_STR);
    if (!v) return NULL;
    v->u.s.s = ja_strdup(&c->arena, s, n);
    v->u.s.n = n;
    return v->u.s.s ? v : NULL;
}
jv *el_jv_str_content(el_jctx *c, const char *s, size_t n) {
    jv *v = el_jv_str(c, s, n);
    if (!v || !n) return v;
    uint8_t *m = ja_alloc(&c->arena, n);
    if (!m) return NULL;
    memset(m, 1, n);
    v->u.s.m = m;
    return v;
}
jv *el_jv_list(el_jctx *c) { return jv_new(&c->arena, JV_LIST); }
jv *el_jv_dict(el_jctx *c) { return jv_new(&c->arena, JV_DICT); }
int el_jv_list_push(el_jctx *c, jv *list, jv *item) {
    if (!list || !item || list->t != JV_LIST) return -1;
    size_t n = list->u.l.n;
    jv_push(&c->arena, list, item);
    return list->u.l.n == n + 1 ? 0 : -1;
}
int el_jv_dict_put(el_jctx *c, jv *dict, jv *k, jv *v) {
    if (!dict || !k || !v || dict->t != JV_DICT) return -1;
    jv_dset(&c->arena, dict, k, v);
    return jv_dget(dict, k) == v ? 0 : -1;
}

int el_jv_dict_set(el_jctx *c, jv *dict, const char *key, size_t n, jv *v) {
    if (!dict || !v || dict->t != JV_DICT) return -1;
    jv *k = el_jv_str(c, key, n);
    if (!k) return -1;
    jv_dset(&c->arena, dict, k, v);
    return jv_dget(dict, k) == v ? 0 : -1;
}

int el_jinja_render(const el_jinja *t, el_jctx *c, char **out, size_t *out_len, el_error *err) {
    return el_jinja_render_mask(t, c, out, out_len, NULL, err);
}

int el_jinja_render_mask(const el_jinja *t, el_jctx *c, char **out, size_t *out_len, uint8_t **mask, el_error *err) {
    if (mask) *mask = NULL;
    *out = NULL;
    if (out_len) *out_len = 0;
    jrender *r = calloc(1, sizeof *r);
    if (!r) return el_set_error(err, EL_ERR_NOMEM, "out of memory");
    jout o = {0};
    r->c = c;
    r->A = &c->arena;
    r->lim = &c->lim;
    r->out = &o;
    r->now = c->now;
    r->have_now = c->have_now;
    c->arena.jb = &r->jb;
    c->arena.r = r;
    int rc = 0;
    if (setjmp(r->jb) == 0) {
        jscope *root = scope_new(r, NULL);
        je_exec_body(r, t->root->body, t->root->nbody, root);
        char *p = malloc(o.n + 1);
        if (!p) rc = el_set_error(err, EL_ERR_NOMEM, "out of memory");
        else {
            if (o.n) memcpy(p, o.p, o.n);
            p[o.n] = 0;
            *out = p;
            if (out_len) *out_len = o.n;
            if (mask && o.m && memchr(o.m, 1, o.n)) {
                *mask = malloc(o.n);
                if (!*mask) {
                    free(p);
                    *out = NULL;
                    rc = el_set_error(err, EL_ERR_NOMEM, "out of memory");
                } else memcpy(*mask, o.m, o.n);
            }
        }
    } else {
        rc = el_set_error(err, EL_ERR_TEMPLATE, "%s", r->msg);
    }
    c->arena.jb = NULL;
    c->arena.r = NULL;
    free(r);
    return rc;
}
