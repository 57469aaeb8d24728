/*
 * json_schema.c — JSON Schema → GBNF (contract in json_schema.h): the
 * compilation, its rules, the shared building blocks, enum / const literals,
 * the dispatch on a node's keywords ($ref, enum, const, anyOf / oneOf,
 * allOf, type) and the API. The per-type visitors are in
 * json_schema_object.c, json_schema_string.c and json_schema_number.c
 * (json_schema_internal.h says what they share).
 *
 * Each schema node becomes one named rule (names from the JSON path, made
 * unique); shared building blocks (space, string, number, value, …) are added
 * once on demand. Whitespace between tokens is llama.cpp's bounded `space`
 * (nothing, one space, or 1-2 newlines and up to 20 blanks), so a model
 * cannot pad forever. A $ref's rule is named before its target is visited,
 * so recursive schemas refer to themselves.
 */
#include "structured/json_schema.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include "structured/json_schema_internal.h"
#include "util/error.h"
#include "util/utf8.h"

void el_js_sb_printf(sbuf *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof tmp) {
        sb_add(b, tmp, (size_t)n);
    } else if (n >= 0) {
        /* never truncated: a cut literal would be malformed GBNF */
        char *big = malloc((size_t)n + 1);
        if (big) {
            vsnprintf(big, (size_t)n + 1, fmt, ap2);
            sb_add(b, big, (size_t)n);
            free(big);
        } else {
            b->oom = true;
        }
    }
    va_end(ap2);
}

void el_js_fail(gen *g, const char *path, const char *fmt, ...) {
    if (g->failed) return;
    char m[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    el_set_error(g->err, EL_ERR_GRAMMAR, "json schema: at %s: %s", path && *path ? path : "/", m);
    g->failed = true;
}

static const rule *find_rule(const gen *g, const char *name) {
    for (int i = 0; i < g->n_rules; i++)
        if (!strcmp(g->rules[i].name, name)) return &g->rules[i];
    return NULL;
}

/* Adds name ::= body (a name in use with another body gets a -N suffix);
 * returns the rule's name (owned by g) or NULL. */
const char *el_js_add_rule(gen *g, const char *base, const char *body) {
    if (g->failed) return NULL;
    char name[128];
    size_t k = 0;
    for (const char *s = base; *s && k < 80; s++) {
        char c = *s;
        name[k++] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ? c : '-';
    }
    if (k == 0) name[k++] = 'r';
    name[k] = 0;
    char cand[160];
    snprintf(cand, sizeof cand, "%s", name);
    for (int i = 1;; i++) {
        const rule *r = find_rule(g, cand);
        if (!r) break;
        if (!strcmp(r->body, body)) return r->name;
        snprintf(cand, sizeof cand, "%s-%d", name, i);
    }
    if (g->n_rules >= MAX_RULES) { el_js_fail(g, "", "the schema needs more than %d grammar rules", MAX_RULES); return NULL; }
    g->text += strlen(cand) + strlen(body) + 6;
    if (g->text > MAX_TEXT) { el_js_fail(g, "", "the grammar exceeds %u bytes", MAX_TEXT); return NULL; }
    if (g->n_rules == g->cap_rules) {
        int nc = g->cap_rules ? g->cap_rules * 2 : 32;
        rule *r = realloc(g->rules, sizeof *r * (size_t)nc);
        if (!r) { el_js_fail(g, "", "out of memory"); return NULL; }
        g->rules = r;
        g->cap_rules = nc;
    }
    rule *r = &g->rules[g->n_rules];
    r->name = strdup(cand);
    r->body = strdup(body);
    if (!r->name || !r->body) { free(r->name); free(r->body); el_js_fail(g, "", "out of memory"); return NULL; }
    g->n_rules++;
    return r->name;
}

/* reserve a name now, set its body later (for $ref recursion) */
static rule *reserve(gen *g, const char *base, const char *ref) {
    char ph[300];
    snprintf(ph, sizeof ph, "\x01%s", ref); /* placeholder body, unique per reference */
    const char *n = el_js_add_rule(g, base, ph);
    if (!n) return NULL;
    for (int i = 0; i < g->n_rules; i++)
        if (g->rules[i].name == n) return &g->rules[i];
    return NULL;
}

#define SPACE_RULE "| \" \" | \"\\n\"{1,2} [ \\t]{0,20}"
#define CHAR_RULE "[^\"\\\\\\x7F\\x00-\\x1F] | [\\\\] ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})"

/* adds a shared building block with its dependencies; returns its name */
const char *el_js_prim(gen *g, const char *name) {
    if (!strcmp(name, "space")) return el_js_add_rule(g, "space", SPACE_RULE);
    if (!strcmp(name, "char")) return el_js_add_rule(g, "char", CHAR_RULE);
    if (!strcmp(name, "boolean")) { el_js_prim(g, "space"); return el_js_add_rule(g, "boolean", "(\"true\" | \"false\") space"); }
    if (!strcmp(name, "null")) { el_js_prim(g, "space"); return el_js_add_rule(g, "null", "\"null\" space"); }
    if (!strcmp(name, "string")) {
        el_js_prim(g, "space");
        el_js_prim(g, "char");
        return el_js_add_rule(g, "string", "\"\\\"\" char* \"\\\"\" space");
    }
    if (!strcmp(name, "integral-part")) return el_js_add_rule(g, "integral-part", "[0] | [1-9] [0-9]{0,15}");
    if (!strcmp(name, "number")) {
        el_js_prim(g, "space");
        el_js_prim(g, "integral-part");
        el_js_add_rule(g, "decimal-part", "[0-9]{1,16}");
        return el_js_add_rule(g, "number", "(\"-\"? integral-part) (\".\" decimal-part)? ([eE] [-+]? integral-part)? space");
    }
    if (!strcmp(name, "integer")) {
        el_js_prim(g, "space");
        el_js_prim(g, "integral-part");
        return el_js_add_rule(g, "integer", "(\"-\"? integral-part) space");
    }
    if (!strcmp(name, "value") || !strcmp(name, "object") || !strcmp(name, "array")) {
        el_js_prim(g, "string");
        el_js_prim(g, "number");
        el_js_prim(g, "boolean");
        el_js_prim(g, "null");
        el_js_add_rule(g, "value", "object | array | string | number | boolean | null");
        el_js_add_rule(g, "object", "\"{\" space ( string \":\" space value (\",\" space string \":\" space value)* )? \"}\" space");
        el_js_add_rule(g, "array", "\"[\" space ( value (\",\" space value)* )? \"]\" space");
        return find_rule(g, name) ? find_rule(g, name)->name : NULL;
    }
    return NULL;
}

/* text as a GBNF string literal (quotes included); false (b unchanged in
 * meaning) when s is not valid UTF-8 */
bool el_js_gbnf_literal(sbuf *b, const char *s, size_t n) {
    if (el_utf8_check((const unsigned char *)s, n) != n) return false;
    sb_puts(b, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"') sb_puts(b, "\\\"");
        else if (c == '\\') sb_puts(b, "\\\\");
        else if (c == '\n') sb_puts(b, "\\n");
        else if (c == '\r') sb_puts(b, "\\r");
        else if (c == '\t') sb_puts(b, "\\t");
        else if (c < 0x20 || c == 0x7f) el_js_sb_printf(b, "\\x%02X", c);
        else sb_add(b, (const char *)&c, 1);
    }
    sb_puts(b, "\"");
    return true;
}

/* a JSON value's compact text as a GBNF literal */
static bool json_literal(gen *g, sbuf *b, const cJSON *v, const char *path) {
    char *t = cJSON_PrintUnformatted(v);
    if (!t) { el_js_fail(g, path, "out of memory"); return false; }
    bool ok = el_js_gbnf_literal(b, t, strlen(t));
    free(t);
    if (!ok) el_js_fail(g, path, "a string that is not valid UTF-8");
    return ok;
}

bool el_js_count_kw(gen *g, const cJSON *s, const char *kw, const char *path, long *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, kw);
    if (!v) return true;
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble != floor(v->valuedouble)) {
        el_js_fail(g, path, "%s: expected a non-negative integer", kw);
        return false;
    }
    if (v->valuedouble > 4096) { el_js_fail(g, path, "%s %g: counts above 4096 are not supported", kw, v->valuedouble); return false; }
    *out = (long)v->valuedouble;
    return true;
}

/* ---- dispatch ---------------------------------------------------------------------------- */

static const char *visit_ref(gen *g, const char *ref, const char *path) {
    for (int i = 0; i < g->n_refs; i++)
        if (!strcmp(g->refs[i].ref, ref)) return g->refs[i].name;
    const cJSON *t = NULL;
    if (!strcmp(ref, "#")) t = g->root;
    else if (!strncmp(ref, "#/", 2)) {
        t = g->root;
        char seg[256];
        const char *p = ref + 2;
        while (t && *p) {
            size_t k = 0;
            while (*p && *p != '/' && k + 1 < sizeof seg) {
                if (p[0] == '~' && p[1] == '1') { seg[k++] = '/'; p += 2; }
                else if (p[0] == '~' && p[1] == '0') { seg[k++] = '~'; p += 2; }
                else seg[k++] = *p++;
            }
            seg[k] = 0;
            if (*p == '/') p++;
            t = cJSON_IsObject(t) ? cJSON_GetObjectItemCaseSensitive(t, seg) : NULL;
        }
    } else {
        el_js_fail(g, path, "$ref '%.80s': only references within the schema (#/...) are supported", ref);
        return NULL;
    }
    if (!t) { el_js_fail(g, path, "$ref '%.80s' does not resolve", ref); return NULL; }
    const char *base = strrchr(ref, '/');
    base = base && base[1] ? base + 1 : "ref";
    rule *slot = reserve(g, base, ref);
    if (!slot) return NULL;
    if (g->n_refs == g->cap_refs) {
        int nc = g->cap_refs ? g->cap_refs * 2 : 8;
        refmap *r = realloc(g->refs, sizeof *r * (size_t)nc);
        if (!r) { el_js_fail(g, path, "out of memory"); return NULL; }
        g->refs = r;
        g->cap_refs = nc;
    }
    char *name = strdup(slot->name);
    char *rc = strdup(ref);
    if (!name || !rc) { free(name); free(rc); el_js_fail(g, path, "out of memory"); return NULL; }
    g->refs[g->n_refs++] = (refmap){rc, name};
    char nm[160];
    snprintf(nm, sizeof nm, "%s-def", name);
    const char *v = el_js_visit(g, t, nm, ref + 1);
    if (!v) return NULL;
    for (int i = 0; i < g->n_rules; i++) /* slot may have moved (realloc) */
        if (!strcmp(g->rules[i].name, name)) {
            char *body = strdup(v);
            if (!body) { el_js_fail(g, path, "out of memory"); return NULL; }
            free(g->rules[i].body);
            g->rules[i].body = body;
            return g->rules[i].name;
        }
    return NULL;
}

static const char *visit_type(gen *g, const cJSON *s, const char *type, const char *name, const char *path) {
    if (!strcmp(type, "object")) {
        if (!cJSON_GetObjectItemCaseSensitive(s, "properties") && !cJSON_GetObjectItemCaseSensitive(s, "additionalProperties"))
            return el_js_prim(g, "object");
        return el_js_visit_object(g, s, name, path);
    }
    if (!strcmp(type, "array")) return el_js_visit_array(g, s, name, path);
    if (!strcmp(type, "string")) return el_js_visit_string(g, s, name, path);
    if (!strcmp(type, "boolean")) return el_js_prim(g, "boolean");
    if (!strcmp(type, "null")) return el_js_prim(g, "null");
    if (!strcmp(type, "integer") || !strcmp(type, "number")) return el_js_visit_number(g, s, type, name, path);
    el_js_fail(g, path, "unknown type '%.40s'", type);
    return NULL;
}

static const char *alternatives(gen *g, const cJSON *arr, const char *kw, const char *name, const char *path) {
    if (!cJSON_IsArray(arr) || !arr->child) { el_js_fail(g, path, "%s: expected a non-empty array", kw); return NULL; }
    sbuf b = {0};
    int i = 0;
    char cp[300], nm[160];
    for (const cJSON *it = arr->child; it; it = it->next, i++) {
        snprintf(cp, sizeof cp, "%s/%s/%d", path, kw, i);
        snprintf(nm, sizeof nm, "%s-%d", name, i);
        const char *v = el_js_visit(g, it, nm, cp);
        if (!v) { free(b.p); return NULL; }
        if (i) sb_puts(&b, " | ");
        sb_puts(&b, v);
    }
    const char *r = b.oom ? NULL : el_js_add_rule(g, name, b.p);
    free(b.p);
    return r;
}

const char *el_js_visit(gen *g, const cJSON *s, const char *name, const char *path) {
    if (g->failed) return NULL;
    if (cJSON_IsTrue(s)) return el_js_prim(g, "value");
    if (cJSON_IsFalse(s)) { el_js_fail(g, path, "schema false admits nothing"); return NULL; }
    if (!cJSON_IsObject(s)) { el_js_fail(g, path, "expected a schema (an object or a boolean)"); return NULL; }
    if (++g->depth > MAX_DEPTH) { el_js_fail(g, path, "schema nested deeper than %d", MAX_DEPTH); return NULL; }
    const char *r = NULL;
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(s, "$ref");
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(s, "enum");
    const cJSON *cn = cJSON_GetObjectItemCaseSensitive(s, "const");
    const cJSON *any = cJSON_GetObjectItemCaseSensitive(s, "anyOf");
    const cJSON *one = cJSON_GetObjectItemCaseSensitive(s, "oneOf");
    const cJSON *all = cJSON_GetObjectItemCaseSensitive(s, "allOf");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(s, "type");
    if (ref) {
        if (!cJSON_IsString(ref)) el_js_fail(g, path, "$ref: expected a string");
        else r = visit_ref(g, ref->valuestring, path);
    } else if (cn || en) {
        el_js_prim(g, "space");
        sbuf b = {0};
        if (cn) json_literal(g, &b, cn, path);
        else if (!cJSON_IsArray(en) || !en->child) el_js_fail(g, path, "enum: expected a non-empty array");
        else
            for (const cJSON *v = en->child; v; v = v->next) {
                if (v != en->child) sb_puts(&b, " | ");
                json_literal(g, &b, v, path);
            }
        if (!g->failed) {
            char *body = NULL;
            sbuf w = {0};
            el_js_sb_printf(&w, "(%s) space", b.p ? b.p : "\"\"");
            body = w.p;
            r = w.oom ? NULL : el_js_add_rule(g, name, body);
            free(body);
        }
        free(b.p);
    } else if (any || one) {
        r = alternatives(g, any ? any : one, any ? "anyOf" : "oneOf", name, path);
    } else if (all) {
        if (!cJSON_IsArray(all) || cJSON_GetArraySize(all) != 1) el_js_fail(g, path, "allOf is supported with one member only");
        else {
            char cp[300];
            snprintf(cp, sizeof cp, "%s/allOf/0", path);
            r = el_js_visit(g, all->child, name, cp);
        }
    } else if (cJSON_IsString(type)) {
        r = visit_type(g, s, type->valuestring, name, path);
    } else if (cJSON_IsArray(type)) {
        sbuf b = {0};
        int i = 0;
        for (const cJSON *t = type->child; t && !g->failed; t = t->next, i++) {
            if (!cJSON_IsString(t)) { el_js_fail(g, path, "type: expected strings"); break; }
            char nm[160];
            snprintf(nm, sizeof nm, "%s-%s", name, t->valuestring);
            const char *v = visit_type(g, s, t->valuestring, nm, path);
            if (!v) break;
            if (i) sb_puts(&b, " | ");
            sb_puts(&b, v);
        }
        if (!i && !g->failed) el_js_fail(g, path, "type: an empty list");
        if (!g->failed) r = b.oom ? NULL : el_js_add_rule(g, name, b.p);
        free(b.p);
    } else if (type) {
        el_js_fail(g, path, "type: expected a string or a list");
    } else if (cJSON_GetObjectItemCaseSensitive(s, "properties")) {
        r = visit_type(g, s, "object", name, path);
    } else if (cJSON_GetObjectItemCaseSensitive(s, "items") || cJSON_GetObjectItemCaseSensitive(s, "prefixItems")) {
        r = visit_type(g, s, "array", name, path);
    } else {
        r = el_js_prim(g, "value");
    }
    g->depth--;
    if (!r && !g->failed) el_js_fail(g, path, "out of memory");
    return r;
}

char *el_json_schema_to_gbnf(const cJSON *schema, el_error *err) {
    if (!schema) { el_set_error(err, EL_ERR_INVALID_ARG, "json schema: NULL"); return NULL; }
    gen g = {.root = schema, .err = err};
    const char *top = el_js_visit(&g, schema, "root-value", "");
    char *out = NULL;
    if (top && !g.failed) {
        sbuf b = {0};
        el_js_sb_printf(&b, "root ::= %s\n", top);
        for (int i = 0; i < g.n_rules; i++) {
            sb_puts(&b, g.rules[i].name);
            sb_puts(&b, " ::= ");
            sb_puts(&b, g.rules[i].body);
            sb_puts(&b, "\n");
        }
        if (b.oom) { el_set_error(err, EL_ERR_NOMEM, "json schema: out of memory"); free(b.p); }
        else out = b.p;
    }
    for (int i = 0; i < g.n_rules; i++) { free(g.rules[i].name); free(g.rules[i].body); }
    free(g.rules);
    for (int i = 0; i < g.n_refs; i++) { free(g.refs[i].ref); free(g.refs[i].name); }
    free(g.refs);
    return out;
}

char *el_json_schema_text_to_gbnf(const char *text, size_t len, el_error *err) {
    if (!text) { el_set_error(err, EL_ERR_INVALID_ARG, "json schema: NULL"); return NULL; }
    if (len > MAX_TEXT) { el_set_error(err, EL_ERR_GRAMMAR, "json schema: %zu bytes (limit %u)", len, MAX_TEXT); return NULL; }
    const char *end = NULL;
    cJSON *s = cJSON_ParseWithLengthOpts(text, len, &end, false);
    if (!s) {
        size_t at = end && end >= text ? (size_t)(end - text) : 0;
        el_set_error(err, EL_ERR_GRAMMAR, "json schema: not valid JSON (near byte %zu)", at);
        return NULL;
    }
    char *r = el_json_schema_to_gbnf(s, err);
    cJSON_Delete(s);
    return r;
}

const char *el_json_object_gbnf(void) {
    return "root ::= object\n"
           "value ::= object | array | string | number | boolean | null\n"
           "object ::= \"{\" space ( string \":\" space value (\",\" space string \":\" space value)* )? \"}\" space\n"
           "array ::= \"[\" space ( value (\",\" space value)* )? \"]\" space\n"
           "string ::= \"\\\"\" char* \"\\\"\" space\n"
           "char ::= " CHAR_RULE "\n"
           "number ::= (\"-\"? integral-part) (\".\" decimal-part)? ([eE] [-+]? integral-part)? space\n"
           "integral-part ::= [0] | [1-9] [0-9]{0,15}\n"
           "decimal-part ::= [0-9]{1,16}\n"
           "boolean ::= (\"true\" | \"false\") space\n"
           "null ::= \"null\" space\n"
           "space ::= " SPACE_RULE "\n";
}
