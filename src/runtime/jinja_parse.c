/*
 * jinja_parse.c — the Jinja parser: tokens into a syntax tree (el_jinja_parse).
 *
 * Contract: the grammar and operator precedence of jinja2's parser:
 *   expr    := or ("if" or ["else" expr])*         (conditional)
 *   or      := and ("or" and)* ; and := not ("and" not)* ; not := "not" not | compare
 *   compare := math1 (("=="|"!="|"<"|"<="|">"|">="|"in"|"not" "in") math1)*
 *   math1   := concat (("+"|"-") concat)* ; concat := math2 ("~" math2)*
 *   math2   := pow (("*"|"/"|"//"|"%") pow)* ; pow := unary ("**" unary)*
 *   unary   := ("-"|"+") unary-without-filters | primary postfix* (filter|test|call)*
 * Statements: if/elif/else, for [recursive] [if] / else, set (expression and
 * block form, with filters), macro, call, filter, break, continue, raw,
 * generation. Node shapes per kind are listed in jinja_internal.h's jnode and
 * at each builder below. Unknown filters and tests fail at parse time
 * (TemplateAssertionError, as jinja2 does when compiling). Nesting of blocks
 * and expressions is bounded (EL_JINJA_MAX_NEST); errors name line and column.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/jinja_internal.h"
#include "util/error.h"

typedef struct ps {
    jarena *A;
    jtok *t;
    size_t nt, i;
    int depth;
    char err[400];
    jmp_buf jb;
} ps;

_Noreturn static void perr(ps *P, const jtok *k, const char *cls, const char *fmt, ...) {
    char m[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    snprintf(P->err, sizeof P->err, "%s: line %d, column %d: %s", cls, k->line, k->col, m);
    longjmp(P->jb, 1);
}
#define SYNTAX(P, k, ...) perr(P, k, "TemplateSyntaxError", __VA_ARGS__)

static void *palloc(ps *P, size_t n) {
    void *p = ja_alloc(P->A, n);
    if (!p) perr(P, &P->t[P->i], "MemoryError", "template too large");
    return p;
}

static jv *pval(ps *P, jv_type t) {
    jv *v = palloc(P, sizeof *v);
    v->t = t;
    return v;
}

static jtok *cur(ps *P) { return &P->t[P->i]; }
static jtok *peek(ps *P, int k) { return P->i + k < P->nt ? &P->t[P->i + k] : &P->t[P->nt - 1]; }
static int is_op(const jtok *k, const char *op) { return k->t == T_OP && k->n == strlen(op) && memcmp(k->s, op, k->n) == 0; }
static int is_name(const jtok *k, const char *nm) { return k->t == T_NAME && k->n == strlen(nm) && memcmp(k->s, nm, k->n) == 0; }
static int accept_op(ps *P, const char *op) { if (is_op(cur(P), op)) { P->i++; return 1; } return 0; }
static int accept_name(ps *P, const char *nm) { if (is_name(cur(P), nm)) { P->i++; return 1; } return 0; }
static const char *tokdesc(const jtok *k) {
    switch (k->t) {
    case T_EOF: return "end of template";
    case T_TEXT: return "text";
    case T_VAR_BEGIN: return "'{{'";
    case T_VAR_END: return "'}}'";
    case T_BLOCK_BEGIN: return "'{%'";
    case T_BLOCK_END: return "'%}'";
    case T_NAME: return "a name";
    case T_STRING: return "a string";
    case T_INT: case T_FLOAT: return "a number";
    default: return "an operator";
    }
}
static void expect_op(ps *P, const char *op) {
    if (!accept_op(P, op)) SYNTAX(P, cur(P), "expected '%s', got %s", op, tokdesc(cur(P)));
}
static void expect(ps *P, jt_type t) {
    if (cur(P)->t != t) SYNTAX(P, cur(P), "unexpected %s", tokdesc(cur(P)));
    P->i++;
}

static jnode *node(ps *P, jn_kind k, const jtok *at) {
    jnode *n = palloc(P, sizeof *n);
    n->k = k;
    n->line = at->line;
    n->col = at->col;
    return n;
}

typedef struct { jnode **a; const char **kw; int n, cap; int *ops; } nlist;
static void nl_push(ps *P, nlist *l, jnode *x, const char *kw, int op) {
    if (l->n == l->cap) {
        int nc = l->cap ? l->cap * 2 : 4;
        jnode **na = palloc(P, (size_t)nc * sizeof *na);
        const char **nk = palloc(P, (size_t)nc * sizeof *nk);
        int *no = palloc(P, (size_t)nc * sizeof *no);
        if (l->n) { memcpy(na, l->a, (size_t)l->n * sizeof *na); memcpy(nk, l->kw, (size_t)l->n * sizeof *nk); memcpy(no, l->ops, (size_t)l->n * sizeof *no); }
        l->a = na; l->kw = nk; l->ops = no; l->cap = nc;
    }
    l->a[l->n] = x;
    l->kw[l->n] = kw;
    l->ops[l->n++] = op;
}

static jnode *parse_expr(ps *P);
static jnode *parse_or(ps *P);
static jnode *parse_unary(ps *P, int with_filter);

static void enter(ps *P) { if (++P->depth > EL_JINJA_MAX_NEST) SYNTAX(P, cur(P), "nested too deep (limit %d)", EL_JINJA_MAX_NEST); }

/* "(" args ")" after the "(": positional and name=value arguments */
static void parse_args(ps *P, jnode *n) {
    nlist l = {0};
    while (!accept_op(P, ")")) {
        if (l.n) {
            expect_op(P, ",");
            if (accept_op(P, ")")) break;
        }
        const char *kw = NULL;
        if (cur(P)->t == T_NAME && is_op(peek(P, 1), "=")) {
            kw = ja_strdup(P->A, cur(P)->s, cur(P)->n);
            P->i += 2;
        } else if (is_op(cur(P), "*") || is_op(cur(P), "**")) SYNTAX(P, cur(P), "*args / **kwargs are not supported");
        nl_push(P, &l, parse_expr(P), kw, 0);
    }
    n->args = l.a; n->kw = l.kw; n->nargs = l.n;
}

static jnode *parse_filter(ps *P, jnode *base) {
    jtok *k = cur(P);
    if (k->t != T_NAME) SYNTAX(P, k, "expected a filter name");
    P->i++;
    size_t len = k->n;
    while (is_op(cur(P), ".") && peek(P, 1)->t == T_NAME) { /* dotted names */
        len = (size_t)(peek(P, 1)->s + peek(P, 1)->n - k->s);
        P->i += 2;
    }
    jnode *n = node(P, E_FILTER, k);
    n->a = base;
    n->name = ja_strdup(P->A, k->s, len);
    n->nlen = len;
    n->unknown = !jf_has_filter(n->name, len); /* checked by check_names once the tree is whole */
    if (accept_op(P, "(")) parse_args(P, n);
    return n;
}

static jnode *parse_primary(ps *P) {
    jtok *k = cur(P);
    jnode *n;
    enter(P);
    switch (k->t) {
    case T_NAME:
        P->i++;
        if (is_name(k, "true") || is_name(k, "True") || is_name(k, "false") || is_name(k, "False")) {
            n = node(P, E_CONST, k);
            n->cval = pval(P, JV_BOOL);
            n->cval->u.b = k->s[0] == 't' || k->s[0] == 'T';
        } else if (is_name(k, "none") || is_name(k, "None")) {
            n = node(P, E_CONST, k);
            n->cval = pval(P, JV_NONE);
        } else {
            n = node(P, E_NAME, k);
            n->name = ja_strdup(P->A, k->s, k->n);
            n->nlen = k->n;
        }
        break;
    case T_STRING: {
        size_t total = 0, j = P->i;
        while (P->t[j].t == T_STRING) total += P->t[j++].n;
        char *s = palloc(P, total + 1);
        size_t off = 0;
        while (cur(P)->t == T_STRING) { memcpy(s + off, cur(P)->s, cur(P)->n); off += cur(P)->n; P->i++; }
        n = node(P, E_CONST, k);
        n->cval = pval(P, JV_STR);
        n->cval->u.s.s = s;
        n->cval->u.s.n = total;
        break;
    }
    case T_INT: case T_FLOAT:
        P->i++;
        n = node(P, E_CONST, k);
        n->cval = pval(P, k->t == T_INT ? JV_INT : JV_FLOAT);
        if (k->t == T_INT) n->cval->u.i = k->i; else n->cval->u.f = k->f;
        break;
    case T_OP:
        if (accept_op(P, "(")) {
            if (accept_op(P, ")")) { n = node(P, E_TUPLE, k); break; }
            jnode *e = parse_expr(P);
            if (is_op(cur(P), ",")) {
                nlist l = {0};
                nl_push(P, &l, e, NULL, 0);
                while (accept_op(P, ",")) {
                    if (is_op(cur(P), ")")) break;
                    nl_push(P, &l, parse_expr(P), NULL, 0);
                }
                n = node(P, E_TUPLE, k);
                n->args = l.a; n->nargs = l.n;
            } else n = e;
            expect_op(P, ")");
            break;
        }
        if (accept_op(P, "[")) {
            nlist l = {0};
            while (!accept_op(P, "]")) {
                if (l.n) { expect_op(P, ","); if (accept_op(P, "]")) break; }
                nl_push(P, &l, parse_expr(P), NULL, 0);
            }
            n = node(P, E_LIST, k);
            n->args = l.a; n->nargs = l.n;
            break;
        }
        if (accept_op(P, "{")) {
            nlist l = {0};
            while (!accept_op(P, "}")) {
                if (l.n) { expect_op(P, ","); if (accept_op(P, "}")) break; }
                nl_push(P, &l, parse_expr(P), NULL, 0);
                expect_op(P, ":");
                nl_push(P, &l, parse_expr(P), NULL, 0);
            }
            n = node(P, E_DICT, k);
            n->args = l.a; n->nargs = l.n;
            break;
        }
        /* fallthrough */
    default:
        SYNTAX(P, k, "unexpected %s", tokdesc(k));
    }
    P->depth--;
    return n;
}

static jnode *parse_subscript(ps *P, jnode *obj) {
    jtok *k = cur(P);
    if (accept_op(P, ".")) {
        jtok *a = cur(P);
        if (a->t == T_NAME) {
            P->i++;
            jnode *n = node(P, E_ATTR, k);
            n->a = obj;
            n->name = ja_strdup(P->A, a->s, a->n);
            n->nlen = a->n;
            return n;
        }
        if (a->t == T_INT) {
            P->i++;
            jnode *n = node(P, E_ITEM, k);
            n->a = obj;
            n->b = node(P, E_CONST, a);
            n->b->cval = pval(P, JV_INT);
            n->b->cval->u.i = a->i;
            return n;
        }
        SYNTAX(P, a, "expected a name after '.'");
    }
    expect_op(P, "[");
    jnode *parts[3] = {0};
    int np = 0, slice = 0;
    for (;;) {
        if (is_op(cur(P), ":")) {
            P->i++;
            slice = 1;
            if (++np > 2) SYNTAX(P, cur(P), "bad slice");
            continue;
        }
        if (is_op(cur(P), "]")) { P->i++; break; }
        if (parts[np]) SYNTAX(P, cur(P), "expected ']'");
        parts[np] = parse_expr(P);
        if (!slice && is_op(cur(P), ",")) SYNTAX(P, cur(P), "tuple subscripts are not supported");
    }
    jnode *n;
    if (slice) {
        n = node(P, E_SLICE, k);
        n->args = palloc(P, 3 * sizeof(jnode *));
        memcpy(n->args, parts, sizeof parts);
        n->nargs = 3;
    } else {
        if (!parts[0]) SYNTAX(P, k, "empty subscript");
        n = node(P, E_ITEM, k);
        n->b = parts[0];
    }
    n->a = obj;
    return n;
}

static jnode *parse_postfix(ps *P, jnode *n) {
    for (;;) {
        jtok *k = cur(P);
        if (is_op(k, ".") || is_op(k, "[")) n = parse_subscript(P, n);
        else if (is_op(k, "(")) {
            P->i++;
            jnode *c = node(P, E_CALL, k);
            c->a = n;
            parse_args(P, c);
            n = c;
        } else return n;
    }
}

static jnode *parse_test(ps *P, jnode *base) {
    jtok *k = cur(P);
    int neg = accept_name(P, "not");
    jtok *nm = cur(P);
    if (nm->t != T_NAME) SYNTAX(P, nm, "expected a test name");
    P->i++;
    jnode *n = node(P, E_TEST, k);
    n->a = base;
    n->op = neg;
    n->name = ja_strdup(P->A, nm->s, nm->n);
    n->nlen = nm->n;
    n->unknown = !jf_has_test(n->name, n->nlen);
    jtok *a = cur(P);
    if (is_op(a, "(")) { P->i++; parse_args(P, n); }
    else if ((a->t == T_NAME || a->t == T_STRING || a->t == T_INT || a->t == T_FLOAT || is_op(a, "[") || is_op(a, "{")) &&
             !is_name(a, "else") && !is_name(a, "or") && !is_name(a, "and") && !is_name(a, "if") && !is_name(a, "in") &&
             !is_name(a, "not") && !is_name(a, "is")) {
        jnode *arg = parse_postfix(P, parse_primary(P));
        n->args = palloc(P, sizeof(jnode *));
        n->kw = palloc(P, sizeof(char *));
        n->args[0] = arg;
        n->nargs = 1;
    }
    return n;
}

static jnode *parse_unary(ps *P, int with_filter) {
    jtok *k = cur(P);
    jnode *n;
    enter(P);
    if (accept_op(P, "-")) { n = node(P, E_NEG, k); n->a = parse_unary(P, 0); }
    else if (accept_op(P, "+")) { n = node(P, E_POS, k); n->a = parse_unary(P, 0); }
    else n = parse_postfix(P, parse_primary(P));
    if (with_filter) {
        for (;;) {
            if (accept_op(P, "|")) n = parse_filter(P, n);
            else if (accept_name(P, "is")) n = parse_test(P, n);
            else if (is_op(cur(P), "(")) n = parse_postfix(P, n);
            else break;
        }
    }
    P->depth--;
    return n;
}

static jnode *binop(ps *P, const jtok *k, jn_kind kind, int op, jnode *a, jnode *b) {
    jnode *n = node(P, kind, k);
    n->op = op;
    n->a = a;
    n->b = b;
    return n;
}

static jnode *parse_pow(ps *P) {
    jnode *n = parse_unary(P, 1);
    while (is_op(cur(P), "**")) { jtok *k = cur(P); P->i++; n = binop(P, k, E_BIN, OP_POW, n, parse_unary(P, 1)); }
    return n;
}
static jnode *parse_math2(ps *P) {
    jnode *n = parse_pow(P);
    for (;;) {
        jtok *k = cur(P);
        int op = is_op(k, "*") ? OP_MUL : is_op(k, "/") ? OP_DIV : is_op(k, "//") ? OP_FLOORDIV : is_op(k, "%") ? OP_MOD : 0;
        if (!op) return n;
        P->i++;
        n = binop(P, k, E_BIN, op, n, parse_pow(P));
    }
}
static jnode *parse_concat(ps *P) {
    jnode *n = parse_math2(P);
    if (!is_op(cur(P), "~")) return n;
    jnode *c = node(P, E_CONCAT, cur(P));
    nlist l = {0};
    nl_push(P, &l, n, NULL, 0);
    while (accept_op(P, "~")) nl_push(P, &l, parse_math2(P), NULL, 0);
    c->args = l.a; c->nargs = l.n;
    return c;
}
static jnode *parse_math1(ps *P) {
    jnode *n = parse_concat(P);
    for (;;) {
        jtok *k = cur(P);
        int op = is_op(k, "+") ? OP_ADD : is_op(k, "-") ? OP_SUB : 0;
        if (!op) return n;
        P->i++;
        n = binop(P, k, E_BIN, op, n, parse_concat(P));
    }
}
static jnode *parse_compare(ps *P) {
    jtok *k0 = cur(P);
    jnode *first = parse_math1(P);
    nlist l = {0};
    for (;;) {
        jtok *k = cur(P);
        int op = is_op(k, "==") ? OP_EQ : is_op(k, "!=") ? OP_NE : is_op(k, "<") ? OP_LT : is_op(k, "<=") ? OP_LE
               : is_op(k, ">") ? OP_GT : is_op(k, ">=") ? OP_GE : is_name(k, "in") ? OP_IN : 0;
        if (!op && is_name(k, "not") && is_name(peek(P, 1), "in")) { op = OP_NOTIN; P->i++; }
        if (!op) break;
        P->i++;
        nl_push(P, &l, parse_math1(P), NULL, op);
    }
    if (!l.n) return first;
    jnode *n = node(P, E_CMP, k0);
    n->a = first;
    n->args = l.a; n->nargs = l.n; n->ops = l.ops;
    return n;
}
static jnode *parse_not(ps *P) {
    jtok *k = cur(P);
    if (accept_name(P, "not")) {
        enter(P);
        jnode *n = node(P, E_NOT, k);
        n->a = parse_not(P);
        P->depth--;
        return n;
    }
    return parse_compare(P);
}
static jnode *parse_and(ps *P) {
    jnode *n = parse_not(P);
    while (is_name(cur(P), "and")) { jtok *k = cur(P); P->i++; n = binop(P, k, E_AND, 0, n, parse_not(P)); }
    return n;
}
static jnode *parse_or(ps *P) {
    jnode *n = parse_and(P);
    while (is_name(cur(P), "or")) { jtok *k = cur(P); P->i++; n = binop(P, k, E_OR, 0, n, parse_and(P)); }
    return n;
}
static jnode *parse_expr(ps *P) {
    enter(P);
    jnode *n = parse_or(P);
    while (is_name(cur(P), "if")) {
        jtok *k = cur(P);
        P->i++;
        jnode *c = node(P, E_COND, k);
        c->a = n;
        c->b = parse_or(P);
        if (accept_name(P, "else")) c->c = parse_expr(P);
        n = c;
    }
    P->depth--;
    return n;
}

/* expr ("," expr)* as a tuple when there is a comma; with_cond 0: no conditional (for's iterable) */
static jnode *parse_tuple(ps *P, int with_cond) {
    jtok *k = cur(P);
    jnode *e = with_cond ? parse_expr(P) : parse_or(P);
    if (!is_op(cur(P), ",")) return e;
    nlist l = {0};
    nl_push(P, &l, e, NULL, 0);
    while (accept_op(P, ",")) {
        if (cur(P)->t == T_VAR_END || cur(P)->t == T_BLOCK_END || is_op(cur(P), "=") || is_name(cur(P), "in")) break;
        nl_push(P, &l, with_cond ? parse_expr(P) : parse_or(P), NULL, 0);
    }
    jnode *n = node(P, E_TUPLE, k);
    n->args = l.a; n->nargs = l.n;
    return n;
}

/* an assignment target: name, name.attr, or names separated by commas */
static jnode *parse_target(ps *P, int allow_attr) {
    jtok *k = cur(P);
    nlist l = {0};
    do {
        jtok *nm = cur(P);
        if (nm->t != T_NAME) SYNTAX(P, nm, "expected a name to assign to");
        P->i++;
        jnode *n = node(P, E_NAME, nm);
        n->name = ja_strdup(P->A, nm->s, nm->n);
        n->nlen = nm->n;
        if (allow_attr && is_op(cur(P), ".") && peek(P, 1)->t == T_NAME) {
            P->i++;
            jnode *a = node(P, E_ATTR, cur(P));
            a->a = n;
            a->name = ja_strdup(P->A, cur(P)->s, cur(P)->n);
            a->nlen = cur(P)->n;
            P->i++;
            n = a;
        }
        nl_push(P, &l, n, NULL, 0);
    } while (accept_op(P, ","));
    if (l.n == 1) return l.a[0];
    jnode *t = node(P, E_TUPLE, k);
    t->args = l.a; t->nargs = l.n;
    return t;
}

static const char *const END_NONE[] = {NULL};
static void parse_body(ps *P, nlist *out, const char *const *ends);

/* the body up to one of ends; returns the index of the end name met (cursor after it) */
static int body_until(ps *P, nlist *out, const char *const *ends, const jtok *open) {
    enter(P);
    parse_body(P, out, ends);
    if (cur(P)->t == T_EOF) SYNTAX(P, open, "unexpected end of template: block opened here is not closed (expected '%s')", ends[0]);
    for (int e = 0; ends[e]; e++)
        if (is_name(cur(P), ends[e])) { P->i++; P->depth--; return e; }
    SYNTAX(P, cur(P), "unexpected tag");
}

static void end_tag(ps *P) { expect(P, T_BLOCK_END); }

static void macro_params(ps *P, nlist *params) {
    expect_op(P, "(");
    while (!accept_op(P, ")")) {
        if (params->n) { expect_op(P, ","); if (accept_op(P, ")")) break; }
        jtok *nm = cur(P);
        if (nm->t != T_NAME) SYNTAX(P, nm, "expected a parameter name");
        P->i++;
        jnode *p = node(P, E_NAME, nm);
        p->name = ja_strdup(P->A, nm->s, nm->n);
        p->nlen = nm->n;
        if (accept_op(P, "=")) p->a = parse_expr(P);
        nl_push(P, params, p, NULL, 0);
    }
}

static jnode *parse_statement(ps *P) {
    jtok *open = cur(P);
    jtok *k = cur(P);
    if (k->t != T_NAME) SYNTAX(P, k, "expected a statement name");
    P->i++;
    if (is_name(k, "if")) {
        jnode *n = node(P, N_IF, k), *last = n;
        n->a = parse_expr(P);
        end_tag(P);
        static const char *const ends[] = {"endif", "elif", "else", NULL};
        nlist body = {0};
        int e = body_until(P, &body, ends, open);
        n->body = body.a; n->nbody = body.n;
        while (e == 1) { /* elif: a nested if in the else branch */
            jnode *x = node(P, N_IF, cur(P));
            x->a = parse_expr(P);
            end_tag(P);
            nlist b = {0};
            e = body_until(P, &b, ends, open);
            x->body = b.a; x->nbody = b.n;
            last->alt = palloc(P, sizeof(jnode *));
            last->alt[0] = x;
            last->nalt = 1;
            last = x;
        }
        if (e == 2) {
            end_tag(P);
            static const char *const ends2[] = {"endif", NULL};
            nlist b = {0};
            body_until(P, &b, ends2, open);
            last->alt = b.a; last->nalt = b.n;
        }
        end_tag(P);
        return n;
    }
    if (is_name(k, "for")) {
        jnode *n = node(P, N_FOR, k);
        n->a = parse_target(P, 0);
        if (!accept_name(P, "in")) SYNTAX(P, cur(P), "expected 'in'");
        n->b = parse_tuple(P, 0);
        if (accept_name(P, "if")) n->c = parse_expr(P);
        if (accept_name(P, "recursive")) SYNTAX(P, k, "recursive for loops are not supported");
        end_tag(P);
        static const char *const ends[] = {"endfor", "else", NULL};
        nlist body = {0};
        int e = body_until(P, &body, ends, open);
        n->body = body.a; n->nbody = body.n;
        if (e == 1) {
            end_tag(P);
            static const char *const ends2[] = {"endfor", NULL};
            nlist b = {0};
            body_until(P, &b, ends2, open);
            n->alt = b.a; n->nalt = b.n;
        }
        end_tag(P);
        return n;
    }
    if (is_name(k, "set")) {
        jnode *target = parse_target(P, 1);
        if (accept_op(P, "=")) {
            jnode *n = node(P, N_SET, k);
            n->a = target;
            n->b = parse_tuple(P, 1);
            end_tag(P);
            return n;
        }
        if (target->k != E_NAME && target->k != E_ATTR) SYNTAX(P, cur(P), "expected '='");
        jnode *n = node(P, N_SETBLOCK, k);
        n->a = target;
        while (accept_op(P, "|")) n->c = parse_filter(P, n->c);
        end_tag(P);
        static const char *const ends[] = {"endset", NULL};
        nlist body = {0};
        body_until(P, &body, ends, open);
        n->body = body.a; n->nbody = body.n;
        end_tag(P);
        return n;
    }
    if (is_name(k, "macro")) {
        size_t first_tok = P->i;
        jnode *n = node(P, N_MACRO, k);
        jtok *nm = cur(P);
        if (nm->t != T_NAME) SYNTAX(P, nm, "expected a macro name");
        P->i++;
        n->name = ja_strdup(P->A, nm->s, nm->n);
        n->nlen = nm->n;
        nlist params = {0};
        macro_params(P, &params);
        n->args = params.a; n->nargs = params.n;
        end_tag(P);
        static const char *const ends[] = {"endmacro", NULL};
        nlist body = {0};
        body_until(P, &body, ends, open);
        n->body = body.a; n->nbody = body.n;
        for (size_t j = first_tok; j < P->i; j++) { /* jinja2: extra arguments only when the body names them */
            if (is_name(&P->t[j], "varargs")) n->op |= 1;
            if (is_name(&P->t[j], "kwargs")) n->op |= 2;
        }
        if (cur(P)->t == T_NAME) P->i++; /* {% endmacro name %} */
        end_tag(P);
        return n;
    }
    if (is_name(k, "call")) {
        jnode *n = node(P, N_CALLBLOCK, k);
        nlist params = {0};
        if (is_op(cur(P), "(")) macro_params(P, &params);
        n->args = params.a; n->nargs = params.n;
        n->a = parse_expr(P);
        if (n->a->k != E_CALL) SYNTAX(P, k, "expected a call after {%% call %%}");
        end_tag(P);
        static const char *const ends[] = {"endcall", NULL};
        nlist body = {0};
        body_until(P, &body, ends, open);
        n->body = body.a; n->nbody = body.n;
        end_tag(P);
        return n;
    }
    if (is_name(k, "filter")) {
        jnode *n = node(P, N_FILTERBLOCK, k);
        n->c = parse_filter(P, NULL);
        while (accept_op(P, "|")) n->c = parse_filter(P, n->c);
        end_tag(P);
        static const char *const ends[] = {"endfilter", NULL};
        nlist body = {0};
        body_until(P, &body, ends, open);
        n->body = body.a; n->nbody = body.n;
        end_tag(P);
        return n;
    }
    if (is_name(k, "generation")) {
        jnode *n = node(P, N_BLOCK, k);
        end_tag(P);
        static const char *const ends[] = {"endgeneration", NULL};
        nlist body = {0};
        body_until(P, &body, ends, open);
        n->body = body.a; n->nbody = body.n;
        end_tag(P);
        return n;
    }
    if (is_name(k, "break") || is_name(k, "continue")) {
        if (P->depth == 0) {}
        jnode *n = node(P, is_name(k, "break") ? N_BREAK : N_CONTINUE, k);
        end_tag(P);
        return n;
    }
    SYNTAX(P, k, "Encountered unknown tag '%.*s'.", (int)k->n, k->s);
}

static void parse_body(ps *P, nlist *out, const char *const *ends) {
    for (;;) {
        jtok *k = cur(P);
        if (k->t == T_EOF) return;
        if (k->t == T_TEXT) {
            jnode *n = node(P, N_TEXT, k);
            n->cval = pval(P, JV_STR);
            n->cval->u.s.s = k->s;
            n->cval->u.s.n = k->n;
            nl_push(P, out, n, NULL, 0);
            P->i++;
        } else if (k->t == T_VAR_BEGIN) {
            P->i++;
            jnode *n = node(P, N_OUTPUT, k);
            n->a = parse_tuple(P, 1);
            expect(P, T_VAR_END);
            nl_push(P, out, n, NULL, 0);
        } else if (k->t == T_BLOCK_BEGIN) {
            jtok *nm = peek(P, 1);
            for (int e = 0; ends[e]; e++)
                if (is_name(nm, ends[e])) { P->i++; return; }
            P->i++;
            nl_push(P, out, parse_statement(P), NULL, 0);
        } else SYNTAX(P, k, "unexpected %s", tokdesc(k));
    }
}

/* jinja2 refuses an unknown filter or test when compiling, except inside an
 * if statement (its tests and bodies) or a conditional expression ("soft"
 * frames), where it fails only if reached; bodies of for, macro, call, set
 * and filter blocks start a new, strict frame. */
static void check_names(ps *P, const jnode *n, int soft);
static void check_list(ps *P, jnode *const *l, int cnt, int soft) {
    for (int i = 0; i < cnt; i++) check_names(P, l[i], soft);
}
static void check_names(ps *P, const jnode *n, int soft) {
    if (!n) return;
    if (n->unknown && !soft) {
        jtok at = {.line = n->line, .col = n->col};
        perr(P, &at, "TemplateAssertionError", "No %s named '%s'.", n->k == E_FILTER ? "filter" : "test", n->name);
    }
    switch (n->k) {
    case N_IF:
        check_names(P, n->a, 1);
        check_list(P, n->body, n->nbody, 1);
        check_list(P, n->alt, n->nalt, 1);
        return;
    case E_COND:
        check_names(P, n->a, 1); check_names(P, n->b, 1); check_names(P, n->c, 1);
        return;
    case N_FOR: case N_MACRO: case N_CALLBLOCK: case N_SETBLOCK: case N_FILTERBLOCK:
        check_names(P, n->a, soft); check_names(P, n->b, soft); check_names(P, n->c, n->k == N_FOR ? 0 : soft);
        for (int i = 0; i < n->nargs; i++) if (n->args[i]) check_names(P, n->args[i]->a, soft);
        if (n->k == N_CALLBLOCK) check_list(P, n->a->args, n->a->nargs, soft);
        check_list(P, n->body, n->nbody, 0);
        check_list(P, n->alt, n->nalt, 0);
        return;
    case E_SLICE:
        check_names(P, n->a, soft);
        for (int i = 0; i < 3; i++) check_names(P, n->args[i], soft);
        return;
    default:
        check_names(P, n->a, soft); check_names(P, n->b, soft); check_names(P, n->c, soft);
        check_list(P, n->args, n->nargs, soft);
        check_list(P, n->body, n->nbody, soft);
        check_list(P, n->alt, n->nalt, soft);
    }
}

el_jinja *el_jinja_parse(const char *src, size_t len, el_error *err) {
    if (!src || len > EL_JINJA_MAX_SOURCE) {
        el_set_error(err, EL_ERR_TEMPLATE, "TemplateSyntaxError: template of %zu bytes passes the limit (%u)", len, EL_JINJA_MAX_SOURCE);
        return NULL;
    }
    el_jinja *t = calloc(1, sizeof *t);
    if (!t) { el_set_error(err, EL_ERR_NOMEM, "out of memory"); return NULL; }
    t->arena.limit = (size_t)512 * len + (4u << 20);
    static ps Pz;
    ps *P = malloc(sizeof *P);
    if (!P) { free(t); el_set_error(err, EL_ERR_NOMEM, "out of memory"); return NULL; }
    *P = Pz;
    P->A = &t->arena;
    char lerr[300];
    if (jl_lex(P->A, src, len, &P->t, &P->nt, lerr, sizeof lerr) != 0) {
        el_set_error(err, EL_ERR_TEMPLATE, "TemplateSyntaxError: %s", lerr);
        goto fail;
    }
    if (setjmp(P->jb)) {
        el_set_error(err, EL_ERR_TEMPLATE, "%s", P->err);
        goto fail;
    }
    nlist body = {0};
    parse_body(P, &body, END_NONE);
    if (cur(P)->t != T_EOF) SYNTAX(P, cur(P), "unexpected tag");
    t->root = node(P, N_BLOCK, &P->t[0]);
    t->root->body = body.a;
    t->root->nbody = body.n;
    check_names(P, t->root, 0);
    free(P);
    return t;
fail:
    free(P);
    ja_free_all(&t->arena);
    free(t);
    return NULL;
}

void el_jinja_free(el_jinja *t) {
    if (!t) return;
    ja_free_all(&t->arena);
    free(t);
}
