/*
 * api.c — OpenAI-compatible request parsing and response building (L6).
 *
 * Parsing pipeline for a request body (bytes from the network):
 *   1. size      len > EL_API_MAX_BODY                          -> 413
 *   2. UTF-8     strict RFC 3629: no overlongs, no surrogates, nothing above
 *                U+10FFFF, no truncated or stray sequences        -> 400
 *                (a leading UTF-8 BOM is skipped, RFC 8259 §8.1)
 *   3. lexical   cJSON is lax where JSON is strict, and stores strings as
 *                C strings, so before it runs we reject: any NUL byte; raw
 *                control characters (< 0x20) inside strings; the escape
 *                \u0000 (it would silently truncate a string)     -> 400
 *   4. cJSON     on a NUL-terminated private copy (so cJSON never reads
 *                past our buffer), with only whitespace allowed after the
 *                value; depth is bounded by CJSON_NESTING_LIMIT   -> 400
 *   5. fields    each known field is type- and range-checked; JSON null is
 *                treated as "not given" for optional fields (clients such as
 *                LangChain send "stop": null); a known field given twice is
 *                rejected (two parsers must not disagree on which one wins);
 *                unknown fields are ignored, like OpenAI does.
 * After step 4 every string is valid UTF-8 without NULs (cJSON rejects lone
 * surrogate escapes), so everything copied into el_api_request is too.
 *
 * Builders sanitise every string they embed (invalid UTF-8 -> U+FFFD), so the
 * bodies they return are always valid UTF-8 JSON even if a generated piece
 * ends in the middle of a multi-byte character. (For streaming the server
 * should still hold back an incomplete trailing sequence until the next
 * token completes it, or the client sees U+FFFD.)
 *
 * Known cJSON limits: numbers are doubles, so "max_tokens": 16.0 is accepted
 * as 16, and seeds beyond 2^53 lose their low bits.
 */
#include "service/api.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STOP_MAX_BYTES 256

/* ------------------------------------------------------------------ utf-8 */

/* Length (1..4) of the well-formed UTF-8 sequence at p, 0 if ill-formed or
 * truncated (Unicode Table 3-7). */
static size_t utf8_seq(const unsigned char *p, size_t n) {
    unsigned c = p[0];
    if (c < 0x80) return 1;
    size_t len;
    unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c == 0xE0) { len = 3; lo = 0xA0; }
    else if (c >= 0xE1 && c <= 0xEC) len = 3;
    else if (c == 0xED) { len = 3; hi = 0x9F; }          /* no surrogates */
    else if (c >= 0xEE && c <= 0xEF) len = 3;
    else if (c == 0xF0) { len = 4; lo = 0x90; }
    else if (c >= 0xF1 && c <= 0xF3) len = 4;
    else if (c == 0xF4) { len = 4; hi = 0x8F; }          /* <= U+10FFFF */
    else return 0;                                      /* 80..C1, F5..FF */
    if (n < len) return 0;
    if (p[1] < lo || p[1] > hi) return 0;
    for (size_t i = 2; i < len; i++)
        if ((p[i] & 0xC0) != 0x80) return 0;
    return len;
}

/* Offset of the first ill-formed byte, or n if all of s[0..n) is valid. */
static size_t utf8_check(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        if (s[i] < 0x80) { i++; continue; }
        size_t l = utf8_seq(s + i, n - i);
        if (!l) return i;
        i += l;
    }
    return n;
}

/* Returns s itself when valid UTF-8; otherwise a malloc'd copy (*owned set)
 * with every ill-formed byte replaced by U+FFFD. NULL s -> NULL. NULL on OOM. */
static const char *utf8_clean(const char *s, char **owned) {
    *owned = NULL;
    if (!s) return NULL;
    size_t n = strlen(s);
    size_t bad = utf8_check((const unsigned char *)s, n);
    if (bad == n) return s;
    char *o = malloc(n * 3 + 1);
    if (!o) return NULL;
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0, j = 0;
    while (i < n) {
        size_t l = p[i] < 0x80 ? 1 : utf8_seq(p + i, n - i);
        if (l) { memcpy(o + j, p + i, l); i += l; j += l; }
        else { memcpy(o + j, "\xEF\xBF\xBD", 3); j += 3; i++; }
    }
    o[j] = 0;
    *owned = o;
    return o;
}

/* ------------------------------------------------------------------ errors */

void el_api_set_error(el_api_error *err, int status, const char *type, const char *param, const char *code,
                      const char *fmt, ...) {
    if (!err) return;
    err->status = status;
    err->type = type;
    err->param = param;
    err->code = code;
    err->message[0] = 0;
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
    }
}

/* Adds key: string (sanitised) or null. Returns 0 / -1 on OOM. */
static int add_str_or_null(cJSON *obj, const char *key, const char *s) {
    if (!s) return cJSON_AddNullToObject(obj, key) ? 0 : -1;
    char *owned;
    const char *c = utf8_clean(s, &owned);
    cJSON *it = c ? cJSON_AddStringToObject(obj, key, c) : NULL;
    free(owned);
    return it ? 0 : -1;
}

static char *print_and_delete(cJSON *root) {
    char *out = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return out;
}

char *el_api_error_json(const el_api_error *err) {
    if (!err) return NULL;
    cJSON *root = cJSON_CreateObject();
    cJSON *e = root ? cJSON_AddObjectToObject(root, "error") : NULL;
    if (!e) { cJSON_Delete(root); return NULL; }
    /* the message may have been cut mid-character by vsnprintf: sanitised */
    char msg[sizeof err->message];
    memcpy(msg, err->message, sizeof msg);
    msg[sizeof msg - 1] = 0;
    if (add_str_or_null(e, "message", msg) || add_str_or_null(e, "type", err->type) ||
        add_str_or_null(e, "param", err->param) || add_str_or_null(e, "code", err->code)) {
        cJSON_Delete(root);
        return NULL;
    }
    return print_and_delete(root);
}

/* ------------------------------------------------------------------ parsing */

#define BAD(err, param, code, ...) el_api_set_error(err, 400, "invalid_request_error", param, code, __VA_ARGS__)

static const char *jtype(const cJSON *it) {
    if (cJSON_IsString(it)) return "string";
    if (cJSON_IsNumber(it)) return "number";
    if (cJSON_IsBool(it)) return "boolean";
    if (cJSON_IsNull(it)) return "null";
    if (cJSON_IsArray(it)) return "array";
    if (cJSON_IsObject(it)) return "object";
    return "unknown";
}

static int type_error(el_api_error *err, const char *param, const char *what, const cJSON *it) {
    BAD(err, param, "invalid_type", "invalid type for '%s': expected %s, got %s", param, what, jtype(it));
    return -1;
}

/* Copies at most ~48 bytes of a (valid UTF-8) user string for quoting in an
 * error message, cutting on a character boundary. */
static const char *quote(const char *s, char *buf, size_t cap) {
    size_t n = strlen(s), lim = cap - 4; /* room for "..." + NUL */
    if (n <= cap - 1) { memcpy(buf, s, n + 1); return buf; }
    while (lim > 0 && ((unsigned char)s[lim] & 0xC0) == 0x80) lim--;
    memcpy(buf, s, lim);
    memcpy(buf + lim, "...", 4);
    return buf;
}

static char *dupstr(const char *s, el_api_error *err) {
    size_t n = strlen(s);
    char *d = malloc(n + 1);
    if (!d) {
        el_api_set_error(err, 500, "server_error", NULL, NULL, "out of memory");
        return NULL;
    }
    memcpy(d, s, n + 1);
    return d;
}

static int oom(el_api_error *err) {
    el_api_set_error(err, 500, "server_error", NULL, NULL, "out of memory");
    return -1;
}

/* A finite number in [lo, hi] (open ends when lo_open / hi_open). */
static int get_num(const cJSON *it, const char *param, double lo, bool lo_open, double hi, bool hi_open,
                   double *out, el_api_error *err) {
    if (!cJSON_IsNumber(it)) return type_error(err, param, "a number", it);
    double v = it->valuedouble;
    if (!isfinite(v)) {
        BAD(err, param, "invalid_value", "'%s' must be a finite number", param);
        return -1;
    }
    if ((lo_open ? v <= lo : v < lo) || (hi_open ? v >= hi : v > hi)) {
        BAD(err, param, "invalid_value", "'%s' must be %s %g and %s %g, got %g", param,
            lo_open ? "greater than" : "at least", lo, hi_open ? "less than" : "at most", hi, v);
        return -1;
    }
    *out = v;
    return 0;
}

/* An integral number in [lo, hi]. */
static int get_int(const cJSON *it, const char *param, double lo, double hi, double *out, el_api_error *err) {
    if (!cJSON_IsNumber(it)) return type_error(err, param, "an integer", it);
    double v = it->valuedouble;
    double a = v < 0 ? -v : v; /* every double >= 2^53 is integral; below, the cast is exact */
    if (!isfinite(v) || (a < 9007199254740992.0 && v != (double)(long long)v)) {
        BAD(err, param, "invalid_type", "invalid type for '%s': expected an integer, got a non-integral number",
            param);
        return -1;
    }
    if (v < lo || v > hi) {
        BAD(err, param, "invalid_value", "'%s' must be an integer between %.0f and %.0f, got %.0f", param, lo,
            hi, v);
        return -1;
    }
    *out = v;
    return 0;
}

enum {
    F_MODEL, F_MESSAGES, F_PROMPT, F_MAX_TOKENS, F_MAX_COMPLETION_TOKENS, F_TEMPERATURE, F_TOP_P,
    F_PRESENCE, F_FREQUENCY, F_SEED, F_STOP, F_STREAM, F_STREAM_OPTIONS, F_N, F_USER, F_COUNT
};
#define K_CHAT 1u
#define K_COMP 2u
static const struct { const char *name; unsigned kinds; } g_fields[F_COUNT] = {
    [F_MODEL] = {"model", K_CHAT | K_COMP},
    [F_MESSAGES] = {"messages", K_CHAT},
    [F_PROMPT] = {"prompt", K_COMP},
    [F_MAX_TOKENS] = {"max_tokens", K_CHAT | K_COMP},
    [F_MAX_COMPLETION_TOKENS] = {"max_completion_tokens", K_CHAT},
    [F_TEMPERATURE] = {"temperature", K_CHAT | K_COMP},
    [F_TOP_P] = {"top_p", K_CHAT | K_COMP},
    [F_PRESENCE] = {"presence_penalty", K_CHAT | K_COMP},
    [F_FREQUENCY] = {"frequency_penalty", K_CHAT | K_COMP},
    [F_SEED] = {"seed", K_CHAT | K_COMP},
    [F_STOP] = {"stop", K_CHAT | K_COMP},
    [F_STREAM] = {"stream", K_CHAT | K_COMP},
    [F_STREAM_OPTIONS] = {"stream_options", K_CHAT | K_COMP},
    [F_N] = {"n", K_CHAT | K_COMP},
    [F_USER] = {"user", K_CHAT | K_COMP},
};

/* Looks up a key that must appear at most once in obj. 0 (item or NULL), -1 on duplicate. */
static int get_unique(const cJSON *obj, const char *key, const char *param, const cJSON **out,
                      el_api_error *err) {
    *out = NULL;
    const cJSON *it;
    cJSON_ArrayForEach(it, obj) {
        if (it->string && !strcmp(it->string, key)) {
            if (*out) {
                BAD(err, param, "duplicate_key", "duplicate key '%s' in %s", key, param);
                return -1;
            }
            *out = it;
        }
    }
    return 0;
}

static const char *const g_roles[] = {"system", "user", "assistant"};

static int parse_message(const cJSON *m, int i, el_chat_msg *dst, el_api_error *err) {
    char q[52];
    if (!cJSON_IsObject(m)) {
        BAD(err, "messages", "invalid_type", "messages[%d]: expected an object, got %s", i, jtype(m));
        return -1;
    }
    const cJSON *role, *content;
    if (get_unique(m, "role", "messages", &role, err) || get_unique(m, "content", "messages", &content, err))
        return -1;
    if (!role) {
        BAD(err, "messages", "missing_required_parameter", "messages[%d].role: missing", i);
        return -1;
    }
    if (!cJSON_IsString(role)) {
        BAD(err, "messages", "invalid_type", "messages[%d].role: expected a string, got %s", i, jtype(role));
        return -1;
    }
    const char *rname = NULL;
    for (size_t k = 0; k < sizeof g_roles / sizeof *g_roles; k++)
        if (!strcmp(role->valuestring, g_roles[k])) rname = g_roles[k];
    if (!rname) {
        BAD(err, "messages", "invalid_value", "messages[%d].role: unknown role '%s'", i,
            quote(role->valuestring, q, sizeof q));
        return -1;
    }
    if (!content) {
        BAD(err, "messages", "missing_required_parameter", "messages[%d].content: missing", i);
        return -1;
    }
    char *text;
    if (cJSON_IsString(content)) {
        if (!(text = dupstr(content->valuestring, err))) return -1;
    } else if (cJSON_IsArray(content)) {
        /* array of {"type":"text","text":...} parts: concatenated */
        size_t total = 0;
        int j = 0;
        const cJSON *part;
        cJSON_ArrayForEach(part, content) {
            const cJSON *type, *t;
            if (!cJSON_IsObject(part)) {
                BAD(err, "messages", "invalid_type", "messages[%d].content[%d]: expected an object, got %s", i, j,
                    jtype(part));
                return -1;
            }
            if (get_unique(part, "type", "messages", &type, err) || get_unique(part, "text", "messages", &t, err))
                return -1;
            if (!cJSON_IsString(type)) {
                BAD(err, "messages", type ? "invalid_type" : "missing_required_parameter",
                    "messages[%d].content[%d].type: expected a string, got %s", i, j, type ? jtype(type) : "nothing");
                return -1;
            }
            if (strcmp(type->valuestring, "text")) {
                BAD(err, "messages", "invalid_value", "messages[%d].content[%d]: unsupported content part type '%s'",
                    i, j, quote(type->valuestring, q, sizeof q));
                return -1;
            }
            if (!cJSON_IsString(t)) {
                BAD(err, "messages", t ? "invalid_type" : "missing_required_parameter",
                    "messages[%d].content[%d].text: expected a string, got %s", i, j, t ? jtype(t) : "nothing");
                return -1;
            }
            total += strlen(t->valuestring);
            j++;
        }
        if (!(text = malloc(total + 1))) return oom(err);
        size_t o = 0;
        cJSON_ArrayForEach(part, content) {
            const char *s = cJSON_GetObjectItemCaseSensitive(part, "text")->valuestring;
            size_t l = strlen(s);
            memcpy(text + o, s, l);
            o += l;
        }
        text[o] = 0;
    } else {
        BAD(err, "messages", "invalid_type",
            "messages[%d].content: expected a string or an array of text parts, got %s", i, jtype(content));
        return -1;
    }
    char *r = dupstr(rname, err);
    if (!r) { free(text); return -1; }
    dst->role = r;
    dst->content = text;
    return 0;
}

static int parse_messages(const cJSON *it, el_api_request *out, el_api_error *err) {
    if (!it) {
        BAD(err, "messages", "missing_required_parameter", "missing required parameter: 'messages'");
        return -1;
    }
    if (!cJSON_IsArray(it)) return type_error(err, "messages", "an array", it);
    int n = cJSON_GetArraySize(it);
    if (n <= 0) {
        BAD(err, "messages", "invalid_value", "'messages' must contain at least one message");
        return -1;
    }
    out->msgs = calloc((size_t)n, sizeof *out->msgs);
    if (!out->msgs) return oom(err);
    out->n_msgs = n; /* entries stay NULL until filled: free() copes */
    int i = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, it) {
        if (parse_message(m, i, &out->msgs[i], err)) return -1;
        i++;
    }
    return 0;
}

static int parse_prompt(const cJSON *it, el_api_request *out, el_api_error *err) {
    if (!it) {
        BAD(err, "prompt", "missing_required_parameter", "missing required parameter: 'prompt'");
        return -1;
    }
    if (cJSON_IsArray(it)) {
        int n = cJSON_GetArraySize(it);
        const cJSON *first = cJSON_GetArrayItem(it, 0);
        if (n == 1 && cJSON_IsString(first)) {
            it = first;
        } else if (n >= 1 && cJSON_IsNumber(first)) {
            BAD(err, "prompt", "invalid_value", "token-id prompts are not supported; send the prompt as a string");
            return -1;
        } else {
            BAD(err, "prompt", "invalid_value", "'prompt' must be a string or an array of exactly one string");
            return -1;
        }
    }
    if (!cJSON_IsString(it)) return type_error(err, "prompt", "a string", it);
    return (out->prompt = dupstr(it->valuestring, err)) ? 0 : -1;
}

static int add_stop(const cJSON *s, int idx, el_api_request *out, el_api_error *err) {
    if (!cJSON_IsString(s)) {
        if (idx < 0) return type_error(err, "stop", "a string or an array of strings", s);
        BAD(err, "stop", "invalid_type", "stop[%d]: expected a string, got %s", idx, jtype(s));
        return -1;
    }
    size_t l = strlen(s->valuestring);
    if (l == 0 || l > STOP_MAX_BYTES) {
        BAD(err, "stop", "invalid_value", "stop sequences must be 1..%d bytes long (got %zu)", STOP_MAX_BYTES, l);
        return -1;
    }
    char *d = dupstr(s->valuestring, err);
    if (!d) return -1;
    out->stop[out->n_stop++] = d;
    return 0;
}

static int parse_stop(const cJSON *it, el_api_request *out, el_api_error *err) {
    if (cJSON_IsArray(it)) {
        int n = cJSON_GetArraySize(it);
        if (n > EL_API_MAX_STOP) {
            BAD(err, "stop", "invalid_value", "at most %d stop sequences are allowed (got %d)", EL_API_MAX_STOP, n);
            return -1;
        }
        int i = 0;
        const cJSON *s;
        cJSON_ArrayForEach(s, it) {
            if (add_stop(s, i++, out, err)) return -1;
        }
        return 0;
    }
    return add_stop(it, -1, out, err);
}

static int parse_fields(el_api_kind kind, const cJSON *root, el_api_request *out, el_api_error *err) {
    const cJSON *f[F_COUNT] = {0};
    unsigned kbit = kind == EL_API_CHAT ? K_CHAT : K_COMP;
    const cJSON *it;
    cJSON_ArrayForEach(it, root) {
        if (!it->string) continue;
        for (int k = 0; k < F_COUNT; k++) {
            if (!(g_fields[k].kinds & kbit) || strcmp(it->string, g_fields[k].name)) continue;
            if (f[k]) {
                BAD(err, g_fields[k].name, "duplicate_key", "duplicate key '%s' in request body", g_fields[k].name);
                return -1;
            }
            f[k] = it;
        }
    }
    /* required first, so a missing one is reported before optional nits */
    if (kind == EL_API_CHAT ? parse_messages(f[F_MESSAGES], out, err) : parse_prompt(f[F_PROMPT], out, err))
        return -1;
    /* optional: null means not given */
    for (int k = 0; k < F_COUNT; k++)
        if (f[k] && cJSON_IsNull(f[k]) && k != F_MESSAGES && k != F_PROMPT) f[k] = NULL;

    double v;
    if ((it = f[F_MODEL])) {
        if (!cJSON_IsString(it)) return type_error(err, "model", "a string", it);
        if (!(out->model = dupstr(it->valuestring, err))) return -1;
    }
    if ((it = f[F_MAX_TOKENS])) {
        if (get_int(it, "max_tokens", 1, (double)(1 << 20), &v, err)) return -1;
        out->max_tokens = (int)v;
    }
    if ((it = f[F_MAX_COMPLETION_TOKENS])) { /* the newer name wins when both are given */
        if (get_int(it, "max_completion_tokens", 1, (double)(1 << 20), &v, err)) return -1;
        out->max_tokens = (int)v;
    }
    if ((it = f[F_TEMPERATURE])) {
        if (get_num(it, "temperature", 0, false, 2, false, &v, err)) return -1;
        out->temperature = (float)v;
    }
    if ((it = f[F_TOP_P])) {
        if (get_num(it, "top_p", 0, true, 1, false, &v, err)) return -1;
        out->top_p = (float)v;
    }
    if ((it = f[F_PRESENCE])) {
        if (get_num(it, "presence_penalty", -2, false, 2, false, &v, err)) return -1;
        out->presence_penalty = (float)v;
    }
    if ((it = f[F_FREQUENCY])) {
        if (get_num(it, "frequency_penalty", -2, false, 2, false, &v, err)) return -1;
        out->frequency_penalty = (float)v;
    }
    if ((it = f[F_SEED])) {
        /* int64 (stored two's complement) or uint64 */
        if (get_int(it, "seed", -9223372036854775808.0, 18446744073709551615.0, &v, err)) return -1;
        if (v >= 18446744073709551616.0) { /* 2^64-1 rounds up to 2^64 as a double */
            BAD(err, "seed", "invalid_value", "'seed' is out of range");
            return -1;
        }
        out->has_seed = true;
        out->seed = v < 0 ? (uint64_t)(int64_t)v : (uint64_t)v;
    }
    if ((it = f[F_STOP]) && parse_stop(it, out, err)) return -1;
    if ((it = f[F_STREAM])) {
        if (!cJSON_IsBool(it)) return type_error(err, "stream", "a boolean", it);
        out->stream = cJSON_IsTrue(it);
    }
    if ((it = f[F_STREAM_OPTIONS])) {
        if (!cJSON_IsObject(it)) return type_error(err, "stream_options", "an object", it);
        const cJSON *iu;
        if (get_unique(it, "include_usage", "stream_options", &iu, err)) return -1;
        if (iu && !cJSON_IsNull(iu)) {
            if (!cJSON_IsBool(iu)) return type_error(err, "stream_options.include_usage", "a boolean", iu);
            out->include_usage = cJSON_IsTrue(iu);
        }
    }
    if ((it = f[F_N])) {
        if (get_int(it, "n", -2147483648.0, 2147483647.0, &v, err)) return -1;
        if (v != 1) {
            BAD(err, "n", "invalid_value", "n must be 1");
            return -1;
        }
    }
    if ((it = f[F_USER]) && !cJSON_IsString(it)) return type_error(err, "user", "a string", it);
    return 0;
}

static void request_init(el_api_request *r, el_api_kind kind) {
    memset(r, 0, sizeof *r);
    r->kind = kind;
    r->max_tokens = -1;
    r->temperature = 1.0f;
    r->top_p = 1.0f;
}

/* Lexical checks cJSON does not do (see the file comment). 0 or -1. */
static int lex_check(const unsigned char *s, size_t n, el_api_error *err) {
    bool in_str = false;
    for (size_t i = 0; i < n; i++) {
        unsigned c = s[i];
        if (c == 0) {
            BAD(err, NULL, "invalid_json", "request body is not valid JSON: NUL byte at offset %zu", i);
            return -1;
        }
        if (!in_str) {
            if (c == '"') in_str = true;
            continue;
        }
        if (c == '"') {
            in_str = false;
        } else if (c < 0x20) {
            BAD(err, NULL, "invalid_json",
                "request body is not valid JSON: unescaped control character in string at offset %zu", i);
            return -1;
        } else if (c == '\\' && i + 1 < n) {
            if (s[i + 1] == 'u' && i + 5 < n && !memcmp(s + i + 2, "0000", 4)) {
                BAD(err, NULL, "invalid_json", "request body contains a NUL character (\\u0000) at offset %zu", i);
                return -1;
            }
            i++; /* skip the escaped character ('"' or '\\' must not toggle state) */
        }
    }
    return 0;
}

int el_api_parse(el_api_kind kind, const char *body, size_t len, el_api_request *out, el_api_error *err) {
    el_api_error dummy;
    if (!err) err = &dummy;
    if (!out) {
        el_api_set_error(err, 500, "server_error", NULL, NULL, "el_api_parse: no output struct");
        return -1;
    }
    request_init(out, kind);
    if (kind != EL_API_CHAT && kind != EL_API_COMPLETION) {
        el_api_set_error(err, 500, "server_error", NULL, NULL, "el_api_parse: bad kind");
        return -1;
    }
    if (len > EL_API_MAX_BODY) {
        el_api_set_error(err, 413, "invalid_request_error", NULL, "request_too_large",
                         "request body too large (%zu bytes; the limit is %u)", len, (unsigned)EL_API_MAX_BODY);
        return -1;
    }
    if (!body) len = 0;
    const unsigned char *s = (const unsigned char *)body;
    if (len >= 3 && !memcmp(s, "\xEF\xBB\xBF", 3)) { s += 3; len -= 3; } /* BOM */
    if (utf8_check(s, len) != len) {
        BAD(err, NULL, "invalid_utf8", "invalid UTF-8 in request body");
        return -1;
    }
    if (lex_check(s, len, err)) return -1;

    char *copy = malloc(len + 1);
    if (!copy) return oom(err);
    if (len) memcpy(copy, s, len);
    copy[len] = 0;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(copy, len + 1, &end, 1);
    free(copy);
    if (!root) {
        BAD(err, NULL, "invalid_json", "request body is not valid JSON");
        return -1;
    }
    int rc = 0;
    if (!cJSON_IsObject(root)) {
        BAD(err, NULL, "invalid_json", "request body must be a JSON object");
        rc = -1;
    } else {
        rc = parse_fields(kind, root, out, err);
    }
    cJSON_Delete(root);
    if (rc) el_api_request_free(out);
    return rc;
}

void el_api_request_free(el_api_request *r) {
    if (!r) return;
    el_api_kind kind = r->kind;
    if (r->msgs) {
        for (int i = 0; i < r->n_msgs; i++) {
            free((char *)r->msgs[i].role);
            free((char *)r->msgs[i].content);
        }
        free(r->msgs);
    }
    free(r->prompt);
    free(r->model);
    for (int i = 0; i < EL_API_MAX_STOP; i++) free(r->stop[i]);
    request_init(r, kind);
}

/* ------------------------------------------------------------------ builders */

/* {id, object, created, model, system_fingerprint} — the head every body shares. */
static cJSON *head(const char *object, const char *id, const char *model, long created, const char *fingerprint) {
    cJSON *root = cJSON_CreateObject();
    if (!root) return NULL;
    if (add_str_or_null(root, "id", id ? id : "") || !cJSON_AddStringToObject(root, "object", object) ||
        !cJSON_AddNumberToObject(root, "created", (double)created) ||
        add_str_or_null(root, "model", model ? model : "") ||
        add_str_or_null(root, "system_fingerprint", fingerprint)) {
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

static int add_usage(cJSON *root, el_api_usage u) {
    cJSON *o = cJSON_AddObjectToObject(root, "usage");
    return o && cJSON_AddNumberToObject(o, "prompt_tokens", u.prompt_tokens) &&
                   cJSON_AddNumberToObject(o, "completion_tokens", u.completion_tokens) &&
                   cJSON_AddNumberToObject(o, "total_tokens", (double)u.prompt_tokens + (double)u.completion_tokens)
               ? 0
               : -1;
}

/* Appends {index:0, <body...>, finish_reason, logprobs:null} to the choices array;
 * returns the choice object (body filled by the caller before finish/logprobs
 * would be nicer for key order, so the caller passes a filler). */
typedef int (*fill_fn)(cJSON *choice, const void *ctx);

static int add_choice(cJSON *root, fill_fn fill, const void *ctx, const char *finish) {
    cJSON *arr = cJSON_AddArrayToObject(root, "choices");
    cJSON *c = cJSON_CreateObject();
    if (!arr || !c) { cJSON_Delete(c); return -1; }
    cJSON_AddItemToArray(arr, c);
    if (!cJSON_AddNumberToObject(c, "index", 0) || fill(c, ctx) || add_str_or_null(c, "finish_reason", finish) ||
        !cJSON_AddNullToObject(c, "logprobs"))
        return -1;
    return 0;
}

static int fill_message(cJSON *c, const void *ctx) {
    cJSON *m = cJSON_AddObjectToObject(c, "message");
    return m && cJSON_AddStringToObject(m, "role", "assistant") &&
                   !add_str_or_null(m, "content", ctx ? (const char *)ctx : "")
               ? 0
               : -1;
}

static int fill_text(cJSON *c, const void *ctx) {
    return add_str_or_null(c, "text", ctx ? (const char *)ctx : "");
}

struct delta_ctx { const char *text; bool first; };

static int fill_delta(cJSON *c, const void *ctx) {
    const struct delta_ctx *d = ctx;
    cJSON *o = cJSON_AddObjectToObject(c, "delta");
    if (!o) return -1;
    if (d->first && !cJSON_AddStringToObject(o, "role", "assistant")) return -1;
    if (d->text || d->first) /* the first delta always carries content, "" if none yet */
        return add_str_or_null(o, "content", d->text ? d->text : "");
    return 0;
}

char *el_api_chat_response(const char *id, const char *model, long created, const char *fingerprint,
                           const char *content, const char *finish, el_api_usage usage) {
    cJSON *root = head("chat.completion", id, model, created, fingerprint);
    if (!root) return NULL;
    if (add_choice(root, fill_message, content, finish) || add_usage(root, usage)) {
        cJSON_Delete(root);
        return NULL;
    }
    return print_and_delete(root);
}

char *el_api_completion_response(const char *id, const char *model, long created, const char *fingerprint,
                                 const char *text, const char *finish, el_api_usage usage) {
    cJSON *root = head("text_completion", id, model, created, fingerprint);
    if (!root) return NULL;
    if (add_choice(root, fill_text, text, finish) || add_usage(root, usage)) {
        cJSON_Delete(root);
        return NULL;
    }
    return print_and_delete(root);
}

/* The usage chunk: choices [] plus usage. */
static char *usage_chunk(const char *object, const char *id, const char *model, long created,
                         const char *fingerprint, const el_api_usage *usage) {
    cJSON *root = head(object, id, model, created, fingerprint);
    if (!root) return NULL;
    if (!cJSON_AddArrayToObject(root, "choices") || add_usage(root, *usage)) {
        cJSON_Delete(root);
        return NULL;
    }
    return print_and_delete(root);
}

char *el_api_chat_chunk(const char *id, const char *model, long created, const char *fingerprint,
                        const char *delta, bool first, const char *finish, const el_api_usage *usage) {
    if (usage) return usage_chunk("chat.completion.chunk", id, model, created, fingerprint, usage);
    cJSON *root = head("chat.completion.chunk", id, model, created, fingerprint);
    if (!root) return NULL;
    struct delta_ctx d = {delta, first};
    if (add_choice(root, fill_delta, &d, finish)) {
        cJSON_Delete(root);
        return NULL;
    }
    return print_and_delete(root);
}

char *el_api_completion_chunk(const char *id, const char *model, long created, const char *fingerprint,
                              const char *text, const char *finish, const el_api_usage *usage) {
    if (usage) return usage_chunk("text_completion", id, model, created, fingerprint, usage);
    cJSON *root = head("text_completion", id, model, created, fingerprint);
    if (!root) return NULL;
    if (add_choice(root, fill_text, text, finish)) {
        cJSON_Delete(root);
        return NULL;
    }
    return print_and_delete(root);
}
