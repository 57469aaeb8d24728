/*
 * toolcall.c — tool-call grammars and parsing (contract: toolcall.h).
 *
 * Grammar composition: one JSON Schema describes a call —
 *   {"$defs": {"tc<i>": P_i, ...},
 *    "anyOf": [{"type": "object", "properties": {"name": {"const": N_i},
 *               "arguments" (llama3: "parameters"): {"$ref": "#/$defs/tc<i>"}},
 *               "required": ["name", <args key>], "additionalProperties": false}, ...]}
 * — where P_i is a copy of tool i's parameters schema in which every "$ref"
 * ("#" or "#/…") is rebased onto P_i's place ("#/$defs/tc<i>…"), so a tool's
 * own definitions still resolve. structured/json_schema.c compiles it (its root rule renamed tc-call)
 * and the family's wrapper is added around it:
 *   chatml  root ::= tc-one ("\n" tc-one)*   tc-one ::= "<tool_call>\n" tc-call "\n</tool_call>"
 *   gemma   root ::= tc-one ("\n" tc-one)*   tc-one ::= "```tool_code\n" tc-call "\n```"
 *   llama3  root ::= tc-call
 * (the repetition only when parallel calls are allowed; tool_choice "auto"'s
 * lazy grammar adds "| tc-call" to chatml's root: Qwen's bare JSON call).
 *
 * Parsing: chatml / gemma look for the opener and the closer and parse the
 * JSON between (chatml without any opener: the first bare call object, of
 * at most 16 candidate '{' followed by "name", so hostile text stays linear); llama3 parses the whole (trimmed) reply as one object. The
 * text around the calls is the content (trimmed; NULL when empty).
 */
#include "structured/toolcall.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "structured/json_schema.h"
#include "util/buf.h"
#include "util/error.h"

/* ---- Python json.dumps --------------------------------------------------------------------- */

static bool py_str(el_buf *b, const char *s) {
    bool ok = el_buf_append(b, "\"", 1);
    const char *run = s;
    for (const char *p = s; ok && *p; p++) {
        unsigned char c = (unsigned char)*p;
        char u[8];
        const char *esc = NULL;
        switch (c) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        default:
            if (c < 0x20) {
                snprintf(u, sizeof u, "\\u%04x", c);
                esc = u;
            }
        }
        if (!esc) continue;
        ok = el_buf_append(b, run, (size_t)(p - run)) && el_buf_str(b, esc);
        run = p + 1;
    }
    return ok && el_buf_str(b, run) && el_buf_append(b, "\"", 1);
}

static bool py_num(el_buf *b, double v) {
    char t[40];
    if (!isfinite(v)) snprintf(t, sizeof t, "%s", isnan(v) ? "NaN" : v > 0 ? "Infinity" : "-Infinity");
    else if (v == floor(v) && fabs(v) < 1e16) snprintf(t, sizeof t, "%.0f", v);
    else {
        for (int p = 1; p <= 17; p++) { /* shortest text that reads back (Python's repr) */
            snprintf(t, sizeof t, "%.*g", p, v);
            if (strtod(t, NULL) == v) break;
        }
        if (!strchr(t, '.') && !strchr(t, 'e') && !strchr(t, 'n')) strcat(t, ".0");
    }
    return el_buf_str(b, t);
}

static bool py_indent(el_buf *b, int indent, int depth) {
    if (!el_buf_append(b, "\n", 1)) return false;
    for (int i = 0; i < indent * depth; i++)
        if (!el_buf_append(b, " ", 1)) return false;
    return true;
}

static bool py_dump(el_buf *b, const cJSON *v, int indent, int depth) {
    if (depth > 200) return false; /* cJSON's nesting limit is lower; belt and braces */
    if (cJSON_IsNull(v)) return el_buf_str(b, "null");
    if (cJSON_IsTrue(v)) return el_buf_str(b, "true");
    if (cJSON_IsFalse(v)) return el_buf_str(b, "false");
    if (cJSON_IsNumber(v)) return py_num(b, v->valuedouble);
    if (cJSON_IsString(v)) return py_str(b, v->valuestring);
    if (cJSON_IsRaw(v)) return el_buf_str(b, v->valuestring);
    bool obj = cJSON_IsObject(v);
    if (!obj && !cJSON_IsArray(v)) return false;
    if (!v->child) return el_buf_str(b, obj ? "{}" : "[]");
    bool ok = el_buf_str(b, obj ? "{" : "[");
    for (const cJSON *c = v->child; ok && c; c = c->next) {
        if (indent >= 0) ok = py_indent(b, indent, depth + 1);
        if (ok && obj) ok = py_str(b, c->string ? c->string : "") && el_buf_str(b, ": ");
        if (ok) ok = py_dump(b, c, indent, depth + 1);
        if (ok && c->next) ok = el_buf_str(b, indent >= 0 ? "," : ", ");
    }
    if (ok && indent >= 0) ok = py_indent(b, indent, depth);
    return ok && el_buf_str(b, obj ? "}" : "]");
}

char *el_tool_pydumps(const cJSON *v, int indent) {
    el_buf b = {0};
    if (!v || !py_dump(&b, v, indent, 0) || !el_buf_append(&b, "", 1)) {
        el_buf_free(&b);
        return NULL;
    }
    return b.p;
}

/* ---- grammar --------------------------------------------------------------------------------- */

/* Rebases every "$ref" in v onto prefix (a JSON pointer such as "#/anyOf/0/properties/arguments"). */
static bool rebase_refs(cJSON *v, const char *prefix) {
    for (cJSON *c = v ? v->child : NULL; c; c = c->next) {
        if (c->string && !strcmp(c->string, "$ref") && cJSON_IsString(c) && c->valuestring[0] == '#') {
            size_t n = strlen(prefix) + strlen(c->valuestring) + 1;
            char *r = malloc(n);
            if (!r) return false;
            snprintf(r, n, "%s%s", prefix, c->valuestring + 1);
            if (!cJSON_SetValuestring(c, r)) { free(r); return false; }
            free(r);
        } else if (!rebase_refs(c, prefix)) {
            return false;
        }
    }
    return true;
}

static const char *args_key(el_chat_family f) { return f == EL_CHAT_LLAMA3 ? "parameters" : "arguments"; }

/* The composed call schema (see the file comment); NULL with err. */
static cJSON *call_schema(el_chat_family f, const el_tool_def *tools, int n, int only, el_error *err) {
    cJSON *root = cJSON_CreateObject();
    cJSON *defs = root ? cJSON_AddObjectToObject(root, "$defs") : NULL;
    cJSON *any = defs ? cJSON_AddArrayToObject(root, "anyOf") : NULL;
    if (!any) goto oom;
    for (int i = 0; i < n; i++) {
        if (only >= 0 && i != only) continue;
        cJSON *params = cJSON_Parse(tools[i].parameters ? tools[i].parameters : "{}");
        if (!params) {
            el_set_error(err, EL_ERR_GRAMMAR, "tool '%s': parameters are not valid JSON", tools[i].name);
            cJSON_Delete(root);
            return NULL;
        }
        char key[32], ref[48];
        snprintf(key, sizeof key, "tc%d", i);
        snprintf(ref, sizeof ref, "#/$defs/%s", key);
        if (!rebase_refs(params, ref)) { cJSON_Delete(params); goto oom; }
        cJSON_AddItemToObject(defs, key, params);
        cJSON *alt = cJSON_CreateObject(), *props = NULL, *name = NULL, *args = NULL, *req = NULL;
        if (alt) cJSON_AddItemToArray(any, alt);
        bool ok = alt && cJSON_AddStringToObject(alt, "type", "object") &&
                  (props = cJSON_AddObjectToObject(alt, "properties")) &&
                  (name = cJSON_AddObjectToObject(props, "name")) &&
                  cJSON_AddStringToObject(name, "const", tools[i].name) &&
                  (args = cJSON_AddObjectToObject(props, args_key(f))) && cJSON_AddStringToObject(args, "$ref", ref) &&
                  (req = cJSON_AddArrayToObject(alt, "required")) &&
                  cJSON_AddItemToArray(req, cJSON_CreateString("name")) &&
                  cJSON_AddItemToArray(req, cJSON_CreateString(args_key(f))) &&
                  cJSON_AddFalseToObject(alt, "additionalProperties");
        if (!ok) goto oom;
    }
    if (cJSON_GetArraySize(any) == 0) {
        el_set_error(err, EL_ERR_INVALID_ARG, "tool call grammar: no tool");
        cJSON_Delete(root);
        return NULL;
    }
    return root;
oom:
    cJSON_Delete(root);
    el_set_error(err, EL_ERR_NOMEM, "tool call grammar: out of memory");
    return NULL;
}

static char *grammar(el_chat_family f, const el_tool_def *tools, int n, int only, bool parallel, bool lazy,
                     el_error *err) {
    if (!el_chat_family_has_tools(f)) {
        el_set_error(err, EL_ERR_INVALID_ARG, "the %s chat family has no tool-call convention", el_chat_family_name(f));
        return NULL;
    }
    if (!tools || n <= 0 || only >= n) {
        el_set_error(err, EL_ERR_INVALID_ARG, "tool call grammar: no tool");
        return NULL;
    }
    cJSON *schema = call_schema(f, tools, n, only, err);
    if (!schema) return NULL;
    char *g = el_json_schema_to_gbnf(schema, err);
    cJSON_Delete(schema);
    if (!g) return NULL;
    if (strncmp(g, "root ::= ", 9) != 0) { /* json_schema.c's first line */
        free(g);
        el_set_error(err, EL_ERR_INTERNAL, "tool call grammar: unexpected schema grammar");
        return NULL;
    }
    el_buf b = {0};
    bool ok;
    if (f == EL_CHAT_LLAMA3) {
        ok = el_buf_str(&b, "root ::= tc-call\n");
    } else {
        ok = el_buf_str(&b, parallel ? "root ::= tc-one (\"\\n\" tc-one)*" : "root ::= tc-one") &&
             el_buf_str(&b, lazy && f == EL_CHAT_CHATML ? " | tc-call\n" : "\n") && /* Qwen's bare JSON call */
             el_buf_str(&b, f == EL_CHAT_CHATML ? "tc-one ::= \"<tool_call>\\n\" tc-call \"\\n</tool_call>\"\n"
                                                : "tc-one ::= \"```tool_code\\n\" tc-call \"\\n```\"\n");
    }
    ok = ok && el_buf_str(&b, "tc-call ::= ") && el_buf_str(&b, g + 9) && el_buf_append(&b, "", 1);
    free(g);
    if (!ok) {
        el_buf_free(&b);
        el_set_error(err, EL_ERR_NOMEM, "tool call grammar: out of memory");
        return NULL;
    }
    return b.p;
}

char *el_toolcall_grammar(el_chat_family f, const el_tool_def *tools, int n, int only, bool parallel, el_error *err) {
    return grammar(f, tools, n, only, parallel, false, err);
}

char *el_toolcall_grammar_lazy(el_chat_family f, const el_tool_def *tools, int n, bool parallel,
                               const char *const **triggers, el_error *err) {
    /* bare JSON only at the reply's start (as llama.cpp anchors its pattern): a JSON answer later in the
     * text that happens to have a "name" key is not taken for a call */
    static const char *const chatml[] = {"<tool_call>", "^{\"name\"", "^{ \"name\"", NULL};
    static const char *const llama3[] = {"^{\"name\"", "^{ \"name\"", NULL};
    static const char *const gemma[] = {"```tool_code", NULL};
    char *g = grammar(f, tools, n, -1, parallel, true, err);
    if (g && triggers) *triggers = f == EL_CHAT_CHATML ? chatml : f == EL_CHAT_LLAMA3 ? llama3 : gemma;
    return g;
}

/* ---- parsing ----------------------------------------------------------------------------------- */

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static const char *find(const char *h, size_t n, const char *needle) {
    size_t m = strlen(needle);
    if (m > n) return NULL;
    for (size_t i = 0; i + m <= n; i++)
        if (h[i] == needle[0] && !memcmp(h + i, needle, m)) return h + i;
    return NULL;
}

static int tool_index(const el_tool_def *tools, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (tools[i].name && !strcmp(tools[i].name, name)) return i;
    return -1;
}

/* s[0..n) as a call object naming an offered tool: appended to out. 1: a call, 0: not one, -1: OOM. */
static int take_call(el_chat_family f, const char *s, size_t n, const el_tool_def *tools, int nt,
                     el_toolcall_result *out) {
    if (out->n_calls >= EL_TOOL_MAX_CALLS) return 0;
    const char *end = NULL;
    cJSON *o = cJSON_ParseWithLengthOpts(s, n, &end, false);
    if (!o) return 0;
    while (end && end < s + n && is_ws(*end)) end++;
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(o, "name");
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(o, args_key(f));
    if (!args && f == EL_CHAT_LLAMA3) args = cJSON_GetObjectItemCaseSensitive(o, "arguments");
    int rc = 0;
    if (end == s + n && cJSON_IsObject(o) && cJSON_IsString(name) && cJSON_IsObject(args) &&
        tool_index(tools, nt, name->valuestring) >= 0) {
        el_tool_call_out *p = realloc(out->calls, (size_t)(out->n_calls + 1) * sizeof *p);
        if (!p) { cJSON_Delete(o); return -1; }
        out->calls = p;
        el_tool_call_out *c = &p[out->n_calls];
        c->name = strdup(name->valuestring);
        c->arguments = cJSON_PrintUnformatted(args);
        if (!c->name || !c->arguments) {
            free(c->name);
            free(c->arguments);
            cJSON_Delete(o);
            return -1;
        }
        out->n_calls++;
        rc = 1;
    }
    cJSON_Delete(o);
    return rc;
}

static bool content_add(el_buf *b, const char *s, size_t n) {
    if (n == 0) return true;
    if (b->len && !el_buf_append(b, "\n", 1)) return false;
    return el_buf_append(b, s, n);
}

void el_toolcall_result_free(el_toolcall_result *r) {
    if (!r) return;
    for (int i = 0; i < r->n_calls; i++) {
        free(r->calls[i].name);
        free(r->calls[i].arguments);
    }
    free(r->calls);
    free(r->content);
    memset(r, 0, sizeof *r);
}

static void trim(const char **s, size_t *n) {
    while (*n && is_ws(**s)) (*s)++, (*n)--;
    while (*n && is_ws((*s)[*n - 1])) (*n)--;
}

/* A bare call object in text[0..len) (chatml without tags): the first '{' (of at most
 * BARE_TRIES whose next token is "name") that opens a call naming an offered tool. 1 with
 * [*a, *z) its span and the call appended, 0 none, -1 OOM. */
#define BARE_TRIES 16
static int bare_call(el_chat_family f, const char *text, size_t len, const el_tool_def *tools, int nt,
                     el_toolcall_result *out, const char **a, const char **z) {
    int tries = 0;
    for (const char *p = text, *e = text + len; p < e && tries < BARE_TRIES; p++) {
        if (*p != '{') continue;
        const char *q = p + 1;
        while (q < e && is_ws(*q)) q++;
        if ((size_t)(e - q) < 6 || memcmp(q, "\"name\"", 6)) continue;
        tries++;
        const char *end = NULL;
        cJSON *o = cJSON_ParseWithLengthOpts(p, (size_t)(e - p), &end, false);
        cJSON_Delete(o);
        if (!o || !end || end <= p || end > e || memchr(p, 0, (size_t)(end - p))) continue;
        int rc = take_call(f, p, (size_t)(end - p), tools, nt, out);
        if (rc != 0) {
            *a = p;
            *z = end;
            return rc;
        }
    }
    return 0;
}

int el_toolcall_parse(el_chat_family f, const char *text, size_t len, const el_tool_def *tools, int n,
                      el_toolcall_result *out) {
    memset(out, 0, sizeof *out);
    if (!text) len = 0;
    el_buf content = {0};
    bool ok = true;
    if (f == EL_CHAT_LLAMA3) {
        const char *s = text;
        size_t l = len;
        trim(&s, &l);
        int rc = l && memchr(s, 0, l) == NULL ? take_call(f, s, l, tools, n, out) : 0;
        if (rc < 0) ok = false;
        else if (rc == 0) ok = content_add(&content, s, l);
    } else if (f == EL_CHAT_CHATML && !find(text, len, "<tool_call>")) { /* no tags: a bare call? */
        const char *a = NULL, *z = NULL;
        int rc = bare_call(f, text, len, tools, n, out, &a, &z);
        const char *s1 = text, *s2 = z;
        size_t l1 = rc > 0 ? (size_t)(a - text) : len, l2 = rc > 0 ? (size_t)(text + len - z) : 0;
        trim(&s1, &l1);
        if (rc > 0) trim(&s2, &l2);
        if (rc < 0) ok = false;
        else ok = content_add(&content, s1, l1) && (l2 == 0 || content_add(&content, s2, l2));
    } else if (f == EL_CHAT_CHATML || f == EL_CHAT_GEMMA) {
        const char *open = f == EL_CHAT_CHATML ? "<tool_call>" : "```tool_code";
        const char *close = f == EL_CHAT_CHATML ? "</tool_call>" : "```";
        size_t lo = strlen(open), lc = strlen(close);
        const char *p = text, *e = text + len;
        while (ok && p < e) {
            const char *a = find(p, (size_t)(e - p), open);
            const char *z = a ? find(a + lo, (size_t)(e - a - lo), close) : NULL;
            const char *seg = p;
            size_t sl = (size_t)((z ? a : e) - p);
            trim(&seg, &sl);
            if (!z) { /* no (complete) call left: the rest is content */
                ok = content_add(&content, seg, sl);
                break;
            }
            const char *js = a + lo;
            size_t jl = (size_t)(z - js);
            trim(&js, &jl);
            int rc = jl && memchr(js, 0, jl) == NULL ? take_call(f, js, jl, tools, n, out) : 0;
            if (rc < 0) { ok = false; break; }
            ok = content_add(&content, seg, sl);
            if (ok && rc == 0) { /* not a call: the block stays content, as written */
                const char *blk = a;
                size_t bl = (size_t)(z + lc - a);
                ok = content_add(&content, blk, bl);
            }
            p = z + lc;
        }
    } else {
        const char *s = text;
        size_t l = len;
        trim(&s, &l);
        ok = content_add(&content, s, l);
    }
    if (ok && content.len) {
        out->content_len = content.len;
        out->content = content.p; /* el_buf keeps it NUL-terminated */
        content.p = NULL;
    }
    el_buf_free(&content);
    if (!ok) {
        el_toolcall_result_free(out);
        return -1;
    }
    return 0;
}
