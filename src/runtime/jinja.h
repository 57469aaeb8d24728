/*
 * jinja.h — a Jinja2 template engine for chat templates (tokenizer.chat_template).
 *
 * Contract:
 *   - The language is what Hugging Face chat templates are written in, with
 *     the semantics of Python's jinja2 as transformers' apply_chat_template
 *     configures it: trim_blocks, lstrip_blocks, loop controls (break,
 *     continue), {% generation %} blocks, the immutable sandbox (list.append,
 *     dict.update... raise SecurityError), tojson = json.dumps(ensure_ascii=
 *     False, indent, separators, sort_keys), raise_exception(msg) and
 *     strftime_now(fmt) (on the date el_jctx_set_now gives, else the clock).
 *     Output is byte-exact with jinja2 for everything it supports; what it
 *     does not support is an error, never a guess.
 *   - el_jinja_parse compiles a template once (immutable afterwards, shareable
 *     between threads). A syntax error is EL_ERR_TEMPLATE with
 *     "TemplateSyntaxError: line L, column C: ...".
 *   - A render's values live in an el_jctx (one arena, freed at once by
 *     el_jctx_free). Builders return NULL only when the context's memory limit
 *     is reached. el_jinja_render writes the text (malloc'd, NUL-terminated)
 *     or fails with EL_ERR_TEMPLATE: "<Python exception class>: line L: msg"
 *     (TemplateError for raise_exception, UndefinedError, TypeError,
 *     SecurityError, ...) — or "LimitError: line L: ..." when a bound of
 *     el_jinja_limits is crossed (steps, call depth, output bytes, one
 *     string's bytes, arena bytes): a template that loops or recurses without
 *     end stops, never hangs or overflows the C stack.
 *   - Nothing here reads files or the environment; the cJSON bridge is in
 *     jinja_json.h (the service library).
 */
#ifndef EL_RUNTIME_JINJA_H
#define EL_RUNTIME_JINJA_H
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "edgellm.h"

typedef struct el_jinja el_jinja;
typedef struct el_jctx el_jctx;
typedef struct jv jv;

typedef struct el_jinja_limits {
    size_t max_output;   /* bytes of rendered text (default 4 MiB) */
    size_t max_string;   /* bytes of any one string value (default 4 MiB) */
    size_t max_memory;   /* arena bytes of one render (default 256 MiB) */
    uint64_t max_steps;  /* evaluated nodes + loop iterations (default 20 M) */
    int max_depth;       /* nested macro calls / expression depth (default 200) */
} el_jinja_limits;

#define EL_JINJA_MAX_SOURCE (4u << 20) /* bytes of template text */
#define EL_JINJA_MAX_NEST 100          /* nesting of blocks / parentheses in the source */

el_jinja *el_jinja_parse(const char *src, size_t len, el_error *err);
void el_jinja_free(el_jinja *t);

/* lim NULL: the defaults above. NULL only when out of memory. */
el_jctx *el_jctx_new(const el_jinja_limits *lim);
void el_jctx_free(el_jctx *c);
/* strftime_now's "now" (local broken-down time); without it, the clock. */
void el_jctx_set_now(el_jctx *c, const struct tm *now);
/* A global variable (replaces one of the same name). 0, or -1 out of memory. */
int el_jctx_set(el_jctx *c, const char *name, jv *v);

jv *el_jv_none(el_jctx *c);
jv *el_jv_bool(el_jctx *c, int b);
jv *el_jv_int(el_jctx *c, int64_t i);
jv *el_jv_float(el_jctx *c, double f);
jv *el_jv_str(el_jctx *c, const char *s, size_t n); /* copied */
/* A string of message content (copied): its bytes stay marked as content
 * through the render (concatenation, slicing, strip, split, join, format,
 * indent and case mapping keep each byte's mark; other transformations mark
 * their whole result content when any input byte was), so that a caller can
 * tell template text from content in the output (el_jinja_render_mask). */
jv *el_jv_str_content(el_jctx *c, const char *s, size_t n);
jv *el_jv_list(el_jctx *c);
jv *el_jv_dict(el_jctx *c);
int el_jv_list_push(el_jctx *c, jv *list, jv *item);                     /* 0 / -1 */
int el_jv_dict_set(el_jctx *c, jv *dict, const char *key, size_t n, jv *v); /* 0 / -1 */
int el_jv_dict_put(el_jctx *c, jv *dict, jv *key, jv *v);                  /* any key value; 0 / -1 */

/* Renders with c's variables; *out malloc'd (caller frees), *out_len bytes. */
int el_jinja_render(const el_jinja *t, el_jctx *c, char **out, size_t *out_len, el_error *err);
/* el_jinja_render that also gives *mask (malloc'd, out_len bytes, caller
 * frees; NULL when no byte came from content): 1 for a byte of message
 * content (el_jv_str_content), 0 for template text. */
int el_jinja_render_mask(const el_jinja *t, el_jctx *c, char **out, size_t *out_len, uint8_t **mask, el_error *err);

#endif
