/*
 * toolformat.c — tool-call formats per model family (contract: toolformat.h).
 *
 * Every parser walks the text once from left to right: it finds the next
 * marker of its format, hands the text before it to the content, takes the
 * call(s) the marker opens (a JSON value parsed in place by cJSON, bounded by
 * the text's end) and goes on after them. A marker whose call does not parse
 * gives its text back to the content unchanged; a marker left open at the end
 * (a reply cut short) is content too. The reasoning split runs first (the
 * generic <think> block, or the format's own channel inside its parser).
 */
#include "structured/toolformat.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "util/buf.h"

#define BARE_TRIES 16 /* bare {"name" objects tried before giving up (hostile text stays linear) */

/* DeepSeek's markers use U+FF5C (fullwidth vertical line) and U+2581 (lower one eighth block). */
#define DS_CALLS_BEGIN "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "begin\xef\xbd\x9c>"
#define DS_CALLS_END "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "end\xef\xbd\x9c>"
#define DS_CALL_BEGIN "<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "begin\xef\xbd\x9c>"
#define DS_CALL_END "<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "end\xef\xbd\x9c>"
#define DS_SEP "<\xef\xbd\x9ctool\xe2\x96\x81" "sep\xef\xbd\x9c>"

typedef struct {
    el_buf content, reasoning;
    el_tool_parsed *out;
    bool oom;
} acc;

/* ---- helpers ----------------------------------------------------------------------------------- */

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static const char *find(const char *h, const char *e, const char *needle) {
    size_t m = strlen(needle);
    for (const char *p = h; p && e - p >= (ptrdiff_t)m; p++) {
        p = memchr(p, needle[0], (size_t)(e - p));
        if (!p || e - p < (ptrdiff_t)m) return NULL;
        if (!memcmp(p, needle, m)) return p;
    }
    return NULL;
}

static bool starts(const char *p, const char *e, const char *s) {
    size_t m = strlen(s);
    return e - p >= (ptrdiff_t)m && !memcmp(p, s, m);
}

static const char *skip_ws(const char *p, const char *e) {
    while (p < e && is_ws(*p)) p++;
    return p;
}

static void piece(acc *a, el_buf *b, const char *s, const char *e) {
    while (s < e && is_ws(*s)) s++;
    while (e > s && is_ws(e[-1])) e--;
    if (s >= e || a->oom) return;
    if (b->len && !el_buf_append(b, "\n", 1)) a->oom = true;
    if (!a->oom && !el_buf_append(b, s, (size_t)(e - s))) a->oom = true;
}
static void content(acc *a, const char *s, const char *e) { piece(a, &a->content, s, e); }

/* The JSON value at p (after blanks), its end in *end; NULL when none parses. NUL bytes never pass. */
static cJSON *json_at(const char *p, const char *e, const char **end) {
    p = skip_ws(p, e);
    if (p >= e || (*p != '{' && *p != '[')) return NULL;
    const char *z = NULL;
    cJSON *v = cJSON_ParseWithLengthOpts(p, (size_t)(e - p), &z, false);
    if (!v) return NULL;
    if (!z || z <= p || z > e || memchr(p, 0, (size_t)(z - p))) {
        cJSON_Delete(v);
        return NULL;
    }
    *end = z;
    return v;
}

static bool name_ok(const char *s, size_t n) {
    if (n == 0 || n > EL_TOOL_MAX_NAME) return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
              c == '.'))
            return false;
    }
    return true;
}

/* Appends a call of name[0..n) with args (an object, or a string holding one). true: taken. */
static bool add_call(acc *a, const char *name, size_t n, const cJSON *args) {
    if (a->oom || a->out->n_calls >= EL_TOOL_MAX_CALLS || !name_ok(name, n)) return false;
    cJSON *parsed = NULL;
    if (cJSON_IsString(args)) args = parsed = cJSON_Parse(args->valuestring);
    if (!cJSON_IsObject(args)) {
        cJSON_Delete(parsed);
        return false;
    }
    el_tool_call_out *p = realloc(a->out->calls, (size_t)(a->out->n_calls + 1) * sizeof *p);
    if (!p) {
        cJSON_Delete(parsed);
        a->oom = true;
        return false;
    }
    a->out->calls = p;
    el_tool_call_out *c = &p[a->out->n_calls];
    c->name = strndup(name, n);
    c->arguments = cJSON_PrintUnformatted(args);
    cJSON_Delete(parsed);
    if (!c->name || !c->arguments) {
        free(c->name);
        free(c->arguments);
        a->oom = true;
        return false;
    }
    a->out->n_calls++;
    return true;
}

/* An object {name_key: N, args_key (or alt_key): A} as a call. */
static bool obj_call(acc *a, const cJSON *o, const char *name_key, const char *args_key, const char *alt_key) {
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(o, name_key);
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(o, args_key);
    if (!g && alt_key) g = cJSON_GetObjectItemCaseSensitive(o, alt_key);
    return cJSON_IsObject(o) && cJSON_IsString(n) && add_call(a, n->valuestring, strlen(n->valuestring), g);
}

/* An array of call objects: all of them taken, or none (the caller keeps the text). */
static bool array_calls(acc *a, const cJSON *arr, const char *name_key, const char *args_key, const char *alt_key) {
    if (!cJSON_IsArray(arr) || !arr->child) return false;
    int n0 = a->out->n_calls;
    for (const cJSON *c = arr->child; c; c = c->next)
        if (!obj_call(a, c, name_key, args_key, alt_key)) {
            while (a->out->n_calls > n0) { /* roll back */
                a->out->n_calls--;
                free(a->out->calls[a->out->n_calls].name);
                free(a->out->calls[a->out->n_calls].arguments);
            }
            return false;
        }
    return true;
}

/* ---- reasoning ------------------------------------------------------------------------------------ */

/* Moves a leading <think>…</think> (or the text before a lone </think>) to the reasoning; *p moves past it. */
static void think_split(acc *a, const char **p, const char *e) {
    const char *s = skip_ws(*p, e);
    if (starts(s, e, "<think>")) {
        const char *z = find(s + 7, e, "</think>");
        piece(a, &a->reasoning, s + 7, z ? z : e);
        *p = z ? z + 8 : e;
        return;
    }
    const char *z = find(s, e, "</think>");
    if (z && !find(s, z, "<think>")) {
        piece(a, &a->reasoning, s, z);
        *p = z + 8;
    }
}

/* ---- formats ---------------------------------------------------------------------------------------- */

static void parse_hermes(acc *a, const char *p, const char *e) {
    if (!find(p, e, "<tool_call>")) { /* a bare call object, after any text */
        int tries = 0;
        for (const char *q = p; q < e && tries < BARE_TRIES; q++) {
            if (!(q = memchr(q, '{', (size_t)(e - q)))) break;
            const char *k = skip_ws(q + 1, e);
            if (!starts(k, e, "\"name\"")) continue;
            tries++;
            const char *z;
            cJSON *o = json_at(q, e, &z);
            bool ok = o && obj_call(a, o, "name", "arguments", NULL);
            cJSON_Delete(o);
            if (ok) {
                /* a call fenced as a code block (```json\n{…}\n```, as Qwen2.5-Coder writes it): the
                 * fence goes with the call, not into the content */
                const char *b = q, *f = skip_ws(z, e);
                while (b > p && is_ws(b[-1])) b--;
                if (b - p >= 7 && !memcmp(b - 7, "```json", 7) && starts(f, e, "```")) b -= 7, z = f + 3;
                else if (b - p >= 3 && !memcmp(b - 3, "```", 3) && starts(f, e, "```")) b -= 3, z = f + 3;
                else b = q;
                content(a, p, b);
                content(a, z, e);
                return;
            }
        }
        content(a, p, e);
        return;
    }
    while (p < e) {
        const char *o = find(p, e, "<tool_call>");
        const char *z = o ? find(o + 11, e, "</tool_call>") : NULL;
        if (!z) break;
        content(a, p, o);
        const char *end;
        cJSON *v = json_at(o + 11, z, &end);
        bool ok = v && skip_ws(end, z) == z && obj_call(a, v, "name", "arguments", NULL);
        cJSON_Delete(v);
        if (!ok) content(a, o, z + 12);
        p = z + 12;
    }
    content(a, p, e);
}

static void parse_llama3(acc *a, const char *p, const char *e) {
    const char *s = skip_ws(p, e);
    if (starts(s, e, "<|python_tag|>")) s += 14;
    const char *z;
    cJSON *v = json_at(s, e, &z);
    bool ok = v && skip_ws(z, e) == e && obj_call(a, v, "name", "parameters", "arguments");
    cJSON_Delete(v);
    if (!ok) content(a, p, e);
}

static void parse_mistral(acc *a, const char *p, const char *e) {
    const char *m = find(p, e, "[TOOL_CALLS]");
    const char *z;
    cJSON *v = m ? json_at(m + 12, e, &z) : NULL;
    bool ok = v && array_calls(a, v, "name", "arguments", NULL);
    cJSON_Delete(v);
    if (!ok) {
        content(a, p, e);
        return;
    }
    content(a, p, m);
    content(a, z, e);
}

static void parse_functionary31(acc *a, const char *p, const char *e) {
    while (p < e) {
        const char *f = find(p, e, "<function="), *py = find(p, e, "<|python_tag|>");
        if (py && (!f || py < f)) { /* the rest is python code */
            content(a, p, py);
            cJSON *o = cJSON_CreateObject();
            char *code = strndup(py + 14, (size_t)(e - py - 14));
            bool ok = o && code && memchr(py + 14, 0, (size_t)(e - py - 14)) == NULL &&
                      cJSON_AddStringToObject(o, "code", code) && add_call(a, "python", 6, o);
            if (!o || !code) a->oom = true;
            cJSON_Delete(o);
            free(code);
            if (!ok) content(a, py, e);
            return;
        }
        if (!f) break;
        const char *gt = memchr(f + 10, '>', (size_t)(e - f - 10));
        const char *end = NULL;
        cJSON *v = gt ? json_at(gt + 1, e, &end) : NULL;
        const char *close = v ? skip_ws(end, e) : NULL;
        bool ok = v && starts(close, e, "</function>") && add_call(a, f + 10, (size_t)(gt - f - 10), v);
        cJSON_Delete(v);
        content(a, p, f);
        if (!ok) { /* not a call: the rest stays content as written */
            content(a, f, e);
            return;
        }
        p = close + 11;
    }
    content(a, p, e);
}

static void parse_functionary32(acc *a, const char *p, const char *e) {
    while (p < e) {
        const char *next = find(p, e, ">>>");
        const char *se = next ? next : e;
        const char *nl = memchr(p, '\n', (size_t)(se - p));
        bool ok = false;
        if (nl) {
            const char *n0 = skip_ws(p, nl), *n1 = nl;
            while (n1 > n0 && is_ws(n1[-1])) n1--;
            if (n1 - n0 == 3 && !memcmp(n0, "all", 3)) {
                content(a, nl + 1, se);
                ok = true;
            } else if (name_ok(n0, (size_t)(n1 - n0))) {
                const char *z;
                cJSON *v = json_at(nl + 1, se, &z);
                ok = v && skip_ws(z, se) == se && add_call(a, n0, (size_t)(n1 - n0), v);
                cJSON_Delete(v);
                if (!ok && n1 - n0 == 6 && !memcmp(n0, "python", 6) && !memchr(nl + 1, 0, (size_t)(se - nl - 1))) {
                    cJSON *o = cJSON_CreateObject();
                    char *code = strndup(nl + 1, (size_t)(se - nl - 1));
                    ok = o && code && cJSON_AddStringToObject(o, "code", code) && add_call(a, "python", 6, o);
                    if (!o || !code) a->oom = true;
                    cJSON_Delete(o);
                    free(code);
                }
            }
        }
        if (!ok) content(a, p, se);
        p = next ? next + 3 : e;
    }
}

static void parse_command_r(acc *a, el_reasoning_format rf, const char *p, const char *e) {
    static const char *const open[] = {"<|START_THINKING|>", "<|START_ACTION|>", "<|START_RESPONSE|>", "Action:"};
    static const char *const close[] = {"<|END_THINKING|>", "<|END_ACTION|>", "<|END_RESPONSE|>", NULL};
    while (p < e) {
        const char *m = NULL;
        int k = -1;
        for (int i = 0; i < 4; i++) {
            const char *f = find(p, e, open[i]);
            if (f && (!m || f < m)) m = f, k = i;
        }
        if (!m) break;
        content(a, p, m);
        const char *body = m + strlen(open[k]);
        const char *z = close[k] ? find(body, e, close[k]) : NULL;
        const char *be = z ? z : e, *after = z ? z + strlen(close[k]) : e;
        if (k == 0) {
            if (rf != EL_REASONING_NONE) piece(a, &a->reasoning, body, be);
            else content(a, m, after);
        } else if (k == 2) {
            content(a, body, be);
        } else { /* an action: a JSON array of {tool_name, parameters}; R+ fences it in ```json */
            const char *s = skip_ws(body, be);
            if (k == 3 && starts(s, be, "```json")) s += 7;
            else if (k == 3 && starts(s, be, "```")) s += 3;
            const char *jz;
            cJSON *v = json_at(s, be, &jz);
            bool ok = v && array_calls(a, v, "tool_name", "parameters", NULL);
            cJSON_Delete(v);
            if (ok && k == 3) { /* R+: the action ends after the array (and its fence) */
                after = skip_ws(jz, e);
                if (starts(after, e, "```")) after += 3;
            }
            if (!ok) {
                content(a, m, k == 3 ? body : after);
                if (k == 3) after = body;
            }
        }
        p = after;
    }
    content(a, p, e);
}

static void parse_deepseek(acc *a, const char *p, const char *e) {
    const char *m = find(p, e, DS_CALLS_BEGIN);
    const char *q = m ? m + strlen(DS_CALLS_BEGIN) : find(p, e, DS_CALL_BEGIN);
    if (!q) {
        content(a, p, e);
        return;
    }
    content(a, p, m ? m : q);
    const char *back = m ? m : q; /* where the text goes back to content if the first call fails */
    for (;;) {
        const char *s = skip_ws(q, e);
        if (!starts(s, e, DS_CALL_BEGIN)) break;
        const char *b = s + strlen(DS_CALL_BEGIN), *z = find(b, e, DS_CALL_END), *sep = z ? find(b, z, DS_SEP) : NULL;
        bool ok = false;
        if (sep) {
            const char *l0 = skip_ws(b, sep), *l1 = sep, *r = sep + strlen(DS_SEP), *jz;
            while (l1 > l0 && is_ws(l1[-1])) l1--;
            const char *name = l0, *ne = l1;
            if (l1 - l0 == 8 && !memcmp(l0, "function", 8)) { /* R1: function<sep>NAME\n```json\n{…}\n``` */
                const char *nl = memchr(r, '\n', (size_t)(z - r));
                name = r, ne = nl ? nl : z;
                while (ne > name && is_ws(ne[-1])) ne--;
                r = nl ? skip_ws(nl, z) : z;
                if (starts(r, z, "```json")) r += 7;
            }
            cJSON *v = json_at(r, z, &jz);
            const char *t = v ? skip_ws(jz, z) : NULL;
            if (t && starts(t, z, "```")) t = skip_ws(t + 3, z);
            ok = v && t == z && add_call(a, name, (size_t)(ne - name), v);
            cJSON_Delete(v);
        }
        if (!ok) { /* not a call (or cut short): the rest stays content, from the block's start if it is the first */
            content(a, back, e);
            return;
        }
        q = back = z + strlen(DS_CALL_END);
    }
    q = skip_ws(q, e);
    if (starts(q, e, DS_CALLS_END)) q += strlen(DS_CALLS_END);
    content(a, q, e);
}

static void granite_content(acc *a, const char *p, const char *e) {
    const char *s = skip_ws(p, e);
    if (starts(s, e, "<response>")) {
        const char *z = find(s + 10, e, "</response>");
        content(a, s + 10, z ? z : e);
        if (z) content(a, z + 11, e);
        return;
    }
    content(a, p, e);
}

static void parse_granite(acc *a, const char *p, const char *e) {
    const char *m = find(p, e, "<|tool_call|>");
    const char *z;
    cJSON *v = m ? json_at(m + 13, e, &z) : NULL;
    bool ok = v && array_calls(a, v, "name", "arguments", NULL);
    cJSON_Delete(v);
    if (!ok) {
        granite_content(a, p, e);
        return;
    }
    granite_content(a, p, m);
    content(a, z, e);
}

static void parse_gpt_oss(acc *a, el_reasoning_format rf, const char *p, const char *e) {
    while (p < e) {
        const char *msg = find(p, e, "<|message|>");
        if (!msg) break;
        const char *body = msg + 11, *end = e, *after = e;
        static const char *const ends[] = {"<|end|>", "<|call|>", "<|return|>", "<|start|>"};
        for (int i = 0; i < 4; i++) {
            const char *f = find(body, end, ends[i]);
            if (f) end = f, after = i == 3 ? f : f + strlen(ends[i]);
        }
        /* the header [p, msg): the channel and a recipient */
        const char *ch = find(p, msg, "<|channel|>"), *to = find(p, msg, "to=functions.");
        const char *cn = ch ? ch + 11 : NULL, *ce = cn;
        while (ce && ce < msg && !is_ws(*ce) && *ce != '<') ce++;
        if (to) {
            const char *n = to + 13, *ne = n;
            while (ne < msg && !is_ws(*ne) && *ne != '<') ne++;
            const char *jz;
            cJSON *v = json_at(body, end, &jz);
            bool ok = v && skip_ws(jz, end) == end && add_call(a, n, (size_t)(ne - n), v);
            cJSON_Delete(v);
            if (!ok) content(a, p, after);
        } else if (cn && ce - cn == 8 && !memcmp(cn, "analysis", 8) && rf != EL_REASONING_NONE) {
            piece(a, &a->reasoning, body, end);
        } else if (cn) {
            content(a, body, end); /* final, commentary without a recipient */
        } else {
            content(a, p, after); /* not a harmony message: as written */
        }
        p = after;
    }
    content(a, p, e);
}

/* ---- entry points --------------------------------------------------------------------------------- */

el_tool_format el_tool_format_detect(const char *t) {
    if (!t) return EL_TF_NONE;
#define HAS(s) (strstr(t, s) != NULL)
    if (HAS("<|channel|>")) return EL_TF_GPT_OSS;
    if (HAS(">>>all")) return EL_TF_FUNCTIONARY32;
    if (HAS(DS_CALLS_BEGIN) || HAS(DS_CALL_BEGIN)) return EL_TF_DEEPSEEK;
    if (HAS("[TOOL_CALLS]")) return EL_TF_MISTRAL_NEMO;
    if (HAS("<|START_ACTION|>") || (HAS("Action:") && HAS("tool_name"))) return EL_TF_COMMAND_R;
    if (HAS("<|tool_call|>")) return EL_TF_GRANITE;
    if (HAS("<tool_call>")) return EL_TF_HERMES;
    if (HAS("<function=")) return EL_TF_FUNCTIONARY31;
    if (HAS("<|start_header_id|>") && (HAS("ipython") || HAS("<|python_tag|>"))) return EL_TF_LLAMA3;
#undef HAS
    return EL_TF_NONE;
}

const char *el_tool_format_name(el_tool_format f) {
    static const char *const names[] = {"none",          "hermes",    "llama3",   "mistral_nemo", "functionary31",
                                        "functionary32", "command_r", "deepseek", "granite",      "gpt_oss"};
    return (unsigned)f < sizeof names / sizeof *names ? names[f] : "unknown";
}

int el_reasoning_format_parse(const char *s) {
    if (!s) return -1;
    if (!strcmp(s, "none")) return EL_REASONING_NONE;
    if (!strcmp(s, "deepseek")) return EL_REASONING_DEEPSEEK;
    if (!strcmp(s, "auto")) return EL_REASONING_AUTO;
    return -1;
}

el_chat_family el_tool_format_grammar_family(el_tool_format f) {
    return f == EL_TF_HERMES ? EL_CHAT_CHATML : f == EL_TF_LLAMA3 ? EL_CHAT_LLAMA3 : EL_CHAT_UNKNOWN;
}

void el_tool_parsed_free(el_tool_parsed *p) {
    if (!p) return;
    for (int i = 0; i < p->n_calls; i++) {
        free(p->calls[i].name);
        free(p->calls[i].arguments);
    }
    free(p->calls);
    free(p->content);
    free(p->reasoning);
    memset(p, 0, sizeof *p);
}

int el_tool_format_parse(el_tool_format f, el_reasoning_format rf, const char *text, size_t len, el_tool_parsed *out) {
    memset(out, 0, sizeof *out);
    acc a = {.out = out};
    const char *p = text ? text : "", *e = p + (text ? len : 0);
    if (rf != EL_REASONING_NONE && f != EL_TF_GPT_OSS) think_split(&a, &p, e);
    switch (f) {
    case EL_TF_HERMES: parse_hermes(&a, p, e); break;
    case EL_TF_LLAMA3: parse_llama3(&a, p, e); break;
    case EL_TF_MISTRAL_NEMO: parse_mistral(&a, p, e); break;
    case EL_TF_FUNCTIONARY31: parse_functionary31(&a, p, e); break;
    case EL_TF_FUNCTIONARY32: parse_functionary32(&a, p, e); break;
    case EL_TF_COMMAND_R: parse_command_r(&a, rf, p, e); break;
    case EL_TF_DEEPSEEK: parse_deepseek(&a, p, e); break;
    case EL_TF_GRANITE: parse_granite(&a, p, e); break;
    case EL_TF_GPT_OSS: parse_gpt_oss(&a, rf, p, e); break;
    default: content(&a, p, e); break;
    }
    if (a.oom) {
        el_buf_free(&a.content);
        el_buf_free(&a.reasoning);
        el_tool_parsed_free(out);
        return -1;
    }
    out->content = a.content.p; /* NULL when nothing was added; el_buf keeps it NUL-terminated */
    out->reasoning = a.reasoning.p;
    out->content_len = a.content.len;
    out->reasoning_len = a.reasoning.len;
    return 0;
}
