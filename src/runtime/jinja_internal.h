/*
 * jinja_internal.h — what the files of the Jinja engine share: values, the
 * arena, the syntax tree, the render state. Not for use outside jinja_*.c.
 *
 * Invariants: every value and node lives in an arena (values: the render's
 * el_jctx; nodes: the template's). Values are never freed one by one; strings
 * are immutable byte ranges (UTF-8, not NUL-terminated); lists and dicts grow
 * in place (dicts keep insertion order, keys are any value compared with
 * Python equality). During a render, an error longjmps to el_jinja_render
 * (jr_fail), which reports it: nothing needs unwinding since the arena owns
 * everything.
 */
#ifndef EL_RUNTIME_JINJA_INTERNAL_H
#define EL_RUNTIME_JINJA_INTERNAL_H
#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "runtime/jinja.h"

/* ---- arena ---- */
typedef struct jarena {
    struct jchunk *head;
    size_t used, limit;
    jmp_buf *jb; /* set during a render: running out longjmps */
    struct jrender *r;
} jarena;
void *ja_alloc(jarena *a, size_t n); /* zeroed; NULL (outside a render) or longjmp */
void ja_free_all(jarena *a);
char *ja_strdup(jarena *a, const char *s, size_t n);

/* ---- values ---- */
typedef enum {
    JV_UNDEF, JV_NONE, JV_BOOL, JV_INT, JV_FLOAT, JV_STR, JV_LIST, JV_DICT,
    JV_MACRO, JV_BUILTIN, JV_NS, JV_LOOP
} jv_type;
enum { JVF_TUPLE = 1, JVF_SAFE = 2 /* Markup */, JVF_GEN = 4 /* a generator / iterator (map, select, reverse...) */ };

struct jnode;
struct jscope;
struct jv {
    jv_type t;
    int flags;
    union {
        int b;
        int64_t i;
        double f;
        struct { const char *s; size_t n; const uint8_t *m; } s; /* JV_STR (m: per byte 1 = from content, NULL: none); JV_UNDEF: the hint */
        struct { jv **a; size_t n, cap; } l;          /* JV_LIST */
        struct { jv **k, **v; size_t n, cap; } d;     /* JV_DICT, JV_NS, JV_LOOP */
        struct { const struct jnode *node; struct jscope *closure; jv *caller; } m; /* JV_MACRO */
        struct { int fn; jv *self; const char *name; size_t n; } bm; /* JV_BUILTIN (JB_METHOD: self.name) */
    } u;
};
enum { JB_NAMESPACE = 1, JB_RANGE, JB_RAISE, JB_STRFTIME, JB_DICT, JB_METHOD };

/* ---- syntax tree ---- */
typedef enum {
    /* statements */
    N_TEXT, N_OUTPUT, N_IF, N_FOR, N_SET, N_SETBLOCK, N_MACRO, N_CALLBLOCK,
    N_FILTERBLOCK, N_BREAK, N_CONTINUE, N_BLOCK,
    /* expressions */
    E_CONST, E_NAME, E_ATTR, E_ITEM, E_SLICE, E_CALL, E_FILTER, E_TEST,
    E_BIN, E_NEG, E_POS, E_NOT, E_AND, E_OR, E_COND, E_LIST, E_TUPLE, E_DICT,
    E_CONCAT, E_CMP
} jn_kind;
typedef enum {
    OP_ADD = 1, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW,
    OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_IN, OP_NOTIN
} jn_op;

typedef struct jnode {
    jn_kind k;
    int op;
    int line, col;
    jv *cval;                      /* E_CONST; N_TEXT: the text */
    const char *name; size_t nlen; /* E_NAME, E_ATTR, E_FILTER, E_TEST, N_MACRO, N_SET(block) target name */
    struct jnode *a, *b, *c;       /* children (see jinja_parse.c for each kind) */
    struct jnode **args; const char **kw; int nargs; /* call / filter / test args; kw[i] NULL = positional */
    struct jnode **body; int nbody;
    struct jnode **alt; int nalt;
    int *ops;                      /* E_CMP: one op per args[i>0] */
    int unknown;                   /* E_FILTER / E_TEST: no such name (an error when run) */
} jnode;

struct el_jinja {
    jarena arena;
    jnode *root; /* N_BLOCK */
};

/* lexer */
typedef enum { T_EOF, T_TEXT, T_VAR_BEGIN, T_VAR_END, T_BLOCK_BEGIN, T_BLOCK_END,
               T_NAME, T_STRING, T_INT, T_FLOAT, T_OP } jt_type;
typedef struct jtok {
    jt_type t;
    int line, col;
    const char *s; size_t n; /* T_TEXT/T_STRING: decoded (arena); T_NAME/T_OP: in the source */
    int64_t i; double f;
} jtok;
/* Tokens of src into *toks (arena); 0, or -1 with err set ("line L, column C: ...") */
int jl_lex(jarena *a, const char *src, size_t len, jtok **toks, size_t *ntok, char *err, size_t errcap);

/* ---- render state ---- */
typedef struct jscope {
    struct jscope *parent;
    jv *vars; /* JV_DICT */
} jscope;

typedef struct jout { char *p; uint8_t *m; size_t n, cap; } jout; /* m: content mask, NULL until content is written */

typedef struct jrender {
    el_jctx *c;
    jarena *A;
    jmp_buf jb;
    char msg[512];
    int line;
    jout *out;
    size_t out_total;
    uint64_t steps;
    int depth;      /* nested macro calls */
    int edepth;     /* nested evaluation (C stack) */
    const jnode *filter_base_node; jv *filter_base;
    int brk; /* 1 break, 2 continue pending */
    int ensure_ascii; /* tojson(ensure_ascii=True) in progress */
    const el_jinja_limits *lim;
    struct tm now;
    int have_now;
} jrender;

struct el_jctx {
    jarena arena;
    jv *globals;
    el_jinja_limits lim;
    struct tm now;
    int have_now;
};

/* jinja_value.c */
_Noreturn void jr_fail(jrender *r, const char *cls, const char *fmt, ...);
jv *jv_new(jarena *a, jv_type t);
jv *jv_str_n(jrender *r, const char *s, size_t n);
jv *jv_strz(jrender *r, const char *s);
jv *jv_int_(jrender *r, int64_t i);
jv *jv_float_(jrender *r, double f);
jv *jv_bool_(jrender *r, int b);
jv *jv_none_(jrender *r);
jv *jv_undef(jrender *r, const char *hint);
jv *jv_list_(jrender *r);
jv *jv_dict_(jrender *r);
void jv_push(jarena *a, jv *l, jv *x);
void jv_dset(jarena *a, jv *d, jv *k, jv *v);
void jv_dset_s(jrender *r, jv *d, const char *k, jv *v);
jv *jv_dget(const jv *d, const jv *k);
jv *jv_dget_s(const jv *d, const char *k, size_t n);
int jv_truthy(const jv *v);
int jv_eq(const jv *a, const jv *b);
int jv_cmp(jrender *r, const jv *a, const jv *b); /* <0 =0 >0; TypeError when unorderable */
const char *jv_typename(const jv *v);
/* growing byte buffer in the arena */
void jo_put(jrender *r, jout *o, const char *s, size_t n);
void jo_put_m(jrender *r, jout *o, const char *s, size_t n, const uint8_t *m); /* with a content mask (NULL: template) */
void jo_mark(jrender *r, jout *o, size_t from); /* bytes [from, n) are content */
int jv_tainted(const jv *v);                     /* a string with any content byte */
jv *jv_sub(jrender *r, const jv *s, size_t off, size_t n); /* substring, mask kept */
jv *jv_taint(jrender *r, jv *res, int content);  /* res marked all content when content */
void jo_putc(jrender *r, jout *o, char ch);
void jo_printf(jrender *r, jout *o, const char *fmt, ...);
jv *jo_str(jrender *r, jout *o);
void jv_write_str(jrender *r, jout *o, const jv *v);  /* Python str() */
void jv_write_repr(jrender *r, jout *o, const jv *v); /* Python repr() */
void jv_write_json(jrender *r, jout *o, const jv *v, int indent, int level,
                   const char *isep, const char *ksep, int sort_keys);
void jv_write_float(jrender *r, jout *o, double f);
jv *jv_escape(jrender *r, jv *v);
void jv_write_json_ascii(jrender *r, jout *o, const jv *v, int indent, const char *isep, const char *ksep, int sort_keys); /* markupsafe.escape: a Markup string */
jv *jv_to_str(jrender *r, const jv *v);
int jv_is_num(const jv *v); /* bool, int, float */
double jv_num(const jv *v);
void jr_check_str(jrender *r, size_t n);

/* jinja_filters.c */
jv *jf_filter(jrender *r, const jnode *n, const char *name, size_t nlen, jv *x, jv **args, const char **kw, int nargs);
int jf_test(jrender *r, const char *name, size_t nlen, jv *x, jv **args, int nargs);
jv *jf_method(jrender *r, jv *obj, const char *name, size_t nlen, jv **args, const char **kw, int nargs, int *found);
int jf_is_method(const jv *obj, const char *name, size_t nlen);
int jf_has_filter(const char *name, size_t nlen);
int jf_has_test(const char *name, size_t nlen);
jv *jf_iter_list(jrender *r, jv *x); /* a list of what iterating x yields */

/* jinja_eval.c */
jv *je_eval(jrender *r, const jnode *n, jscope *s);
jv *je_call_value(jrender *r, const jnode *at, jv *fn, jv **args, const char **kw, int nargs, jscope *s);
void je_exec_body(jrender *r, jnode **body, int n, jscope *s);
jv *je_binop(jrender *r, int op, jv *a, jv *b);

#endif
