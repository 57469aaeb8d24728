/*
 * json_schema_internal.h — what the JSON Schema → GBNF compiler's files
 * share; private to src/structured/json_schema*.c (the API is
 * json_schema.h).
 *
 * Contract: one compilation is a `gen`: the named rules made so far (a name
 * is reused for the same body, suffixed -N for another), the $ref names, the
 * text budget and the first error (later failures keep the first message).
 * A visitor turns the schema node s (at JSON path `path`) into a rule named
 * after `name` and returns that rule's name (owned by the gen), or NULL with
 * the error set. Grammar text is assembled in sbufs whose allocation failure
 * is sticky (checked once at the end through .oom).
 *
 * The files:
 *   json_schema.c          the gen, rules, building blocks, literals, the
 *                          dispatch on a node's keywords, $ref, the API
 *   json_schema_object.c   objects (required / optional chains, extra keys)
 *                          and arrays (items, tuples, counts)
 *   json_schema_string.c   strings: lengths, formats, patterns (regex subset)
 *   json_schema_number.c   integer and number ranges as exact digit rules
 */
#ifndef EL_STRUCTURED_JSON_SCHEMA_INTERNAL_H
#define EL_STRUCTURED_JSON_SCHEMA_INTERNAL_H
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "edgellm.h"

#define MAX_DEPTH 64
#define MAX_RULES 4096
#define MAX_TEXT (1u << 20)

/* ---- text buffers -------------------------------------------------------- */
typedef struct {
    char *p;
    size_t n, cap;
    bool oom;
} sbuf;

static inline void sb_add(sbuf *b, const char *s, size_t n) {
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
static inline void sb_puts(sbuf *b, const char *s) { sb_add(b, s, strlen(s)); }
/* Formatted text (at most 511 bytes). */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
void el_js_sb_printf(sbuf *b, const char *fmt, ...);

/* ---- a compilation ------------------------------------------------------- */
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

/* Records the first error: EL_ERR_GRAMMAR "json schema: at PATH: message". */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
void el_js_fail(gen *g, const char *path, const char *fmt, ...);
/* Adds base ::= body (see the contract above); the rule's name or NULL. */
const char *el_js_add_rule(gen *g, const char *base, const char *body);
/* A shared building block (space, char, string, number, integer,
 * integral-part, boolean, null, value, object, array) with what it uses. */
const char *el_js_prim(gen *g, const char *name);
/* Text as a GBNF string literal (quotes included); false when s is not valid UTF-8. */
bool el_js_gbnf_literal(sbuf *b, const char *s, size_t n);
/* The keyword kw of s as a count 0..4096 into *out (left alone when absent); false with the error. */
bool el_js_count_kw(gen *g, const cJSON *s, const char *kw, const char *path, long *out);

static inline void child_path(char *out, size_t cap, const char *path, const char *key) {
    snprintf(out, cap, "%s/%s", path, key);
}

/* ---- the visitors ------------------------------------------------------------ */
const char *el_js_visit(gen *g, const cJSON *s, const char *name, const char *path);
const char *el_js_visit_object(gen *g, const cJSON *s, const char *name, const char *path);
const char *el_js_visit_array(gen *g, const cJSON *s, const char *name, const char *path);
const char *el_js_visit_string(gen *g, const cJSON *s, const char *name, const char *path);
/* type "integer" or "number": with bounds, the integers in range; else the plain prim. */
const char *el_js_visit_number(gen *g, const cJSON *s, const char *type, const char *name, const char *path);

#endif
