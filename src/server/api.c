/*
 * api.c — what every request parser of api.h shares: the parsing pipeline,
 * the field checks, errors and JSON strings (L6). api_internal.h lists the
 * other api_*.c files: one wire shape each.
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
 * Steps 1-4 are api_parse_root; api_parse_request runs them, a route's
 * fields (api_openai.c, api_native.c) and the "lora" list. After step 4
 * every string is valid UTF-8 without NULs (cJSON rejects lone surrogate
 * escapes), so everything copied into el_api_request is too.
 *
 * Field checks shared by the parsers: optional numbers, integers, booleans
 * and strings (api_opt_*: one helper per type, the range and the error text
 * given once), seeds, penalties, token ids, stop sequences, logit_bias's
 * object form, output formats (response_format's schemas, grammar,
 * json_schema: compiled here, so an invalid one is a 400 naming the field
 * and the place) and llama-server's per-request "lora" list.
 *
 * Errors keep OpenAI's shape; inside a stream they take llama-server's
 * (el_api_stream_error_json), and a context overflow carries
 * n_prompt_tokens and n_ctx in both. Strings that may hold NUL bytes or
 * ill-formed UTF-8 are written by el_api_json_string (sanitised, \u0000).
 *
 * Known cJSON limits: numbers are doubles, so "max_tokens": 16.0 is accepted
 * as 16, and seeds beyond 2^53 lose their low bits.
 */
#include "server/api.h"
#include "server/api_internal.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/grammar.h"
#include "structured/json_schema.h"
#include "util/utf8.h"

#define STOP_MAX_BYTES 256

bool el_api_json_string(el_buf *out, const char *s, size_t n) {
    el_buf clean = {0};
    if (!el_utf8_sanitize(s ? s : "", s ? n : 0, &clean)) return false;
    bool ok = el_buf_append(out, "\"", 1);
    size_t i = 0, run = 0;
    for (; ok && i < clean.len; i++) {
        unsigned char c = (unsigned char)clean.p[i];
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        ok = el_buf_append(out, clean.p + run, i - run);
        char esc[8];
        switch (c) {
        case '"': memcpy(esc, "\\\"", 3); break;
        case '\\': memcpy(esc, "\\\\", 3); break;
        case '\n': memcpy(esc, "\\n", 3); break;
        case '\r': memcpy(esc, "\\r", 3); break;
        case '\t': memcpy(esc, "\\t", 3); break;
        default: snprintf(esc, sizeof esc, "\\u%04x", c); break;
        }
        if (ok) ok = el_buf_str(out, esc);
        run = i + 1;
    }
    if (ok) ok = el_buf_append(out, clean.p ? clean.p + run : "", clean.len - run) && el_buf_append(out, "\"", 1);
    el_buf_free(&clean);
    return ok;
}

/* Returns s itself when valid UTF-8; otherwise a malloc'd copy (*owned set)
 * with every maximal ill-formed subpart replaced by U+FFFD. NULL s -> NULL.
 * NULL on OOM. */
static const char *utf8_clean(const char *s, char **owned) {
    *owned = NULL;
    if (!s) return NULL;
    size_t n = strlen(s);
    if (el_utf8_check((const unsigned char *)s, n) == n) return s;
    el_buf b = {0};
    if (!el_utf8_sanitize(s, n, &b)) { el_buf_free(&b); return NULL; }
    *owned = b.p;
    return b.p;
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
    err->n_prompt_tokens = 0; /* the caller sets these after, for a context overflow */
    err->n_ctx = 0;
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
    }
}

/* Adds key: string (sanitised) or null. Returns 0 / -1 on OOM. */
int api_add_str_or_null(cJSON *obj, const char *key, const char *s) {
    if (!s) return cJSON_AddNullToObject(obj, key) ? 0 : -1;
    char *owned;
    const char *c = utf8_clean(s, &owned);
    cJSON *it = c ? cJSON_AddStringToObject(obj, key, c) : NULL;
    free(owned);
    return it ? 0 : -1;
}

char *api_print_and_delete(cJSON *root) {
    char *out = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return out;
}

/* {"error": {...}}: OpenAI's members (message, type, param, code) or, inside a stream, llama-server's
 * (code: the HTTP status, message, type); a context overflow adds n_prompt_tokens and n_ctx. */
static char *error_json(const el_api_error *err, bool in_stream) {
    if (!err) return NULL;
    cJSON *root = cJSON_CreateObject();
    cJSON *e = root ? cJSON_AddObjectToObject(root, "error") : NULL;
    /* the message may have been cut mid-character by vsnprintf: sanitised */
    char msg[sizeof err->message];
    memcpy(msg, err->message, sizeof msg);
    msg[sizeof msg - 1] = 0;
    bool ok = e != NULL;
    if (ok && in_stream)
        ok = cJSON_AddNumberToObject(e, "code", err->status) && !api_add_str_or_null(e, "message", msg) &&
             !api_add_str_or_null(e, "type", err->status == 503 ? "unavailable_error" : err->type);
    else if (ok)
        ok = !api_add_str_or_null(e, "message", msg) && !api_add_str_or_null(e, "type", err->type) &&
             !api_add_str_or_null(e, "param", err->param) && !api_add_str_or_null(e, "code", err->code);
    ok = ok && (err->n_ctx <= 0 || (cJSON_AddNumberToObject(e, "n_prompt_tokens", err->n_prompt_tokens) &&
                                    cJSON_AddNumberToObject(e, "n_ctx", err->n_ctx)));
    if (!ok) {
        cJSON_Delete(root);
        return NULL;
    }
    return api_print_and_delete(root);
}

char *el_api_error_json(const el_api_error *err) { return error_json(err, false); }

char *el_api_stream_error_json(const el_api_error *err) { return error_json(err, true); }

/* ------------------------------------------------------------------ parsing */

const char *api_jtype(const cJSON *it) {
    if (cJSON_IsString(it)) return "string";
    if (cJSON_IsNumber(it)) return "number";
    if (cJSON_IsBool(it)) return "boolean";
    if (cJSON_IsNull(it)) return "null";
    if (cJSON_IsArray(it)) return "array";
    if (cJSON_IsObject(it)) return "object";
    return "unknown";
}

int api_type_error(el_api_error *err, const char *param, const char *what, const cJSON *it) {
    BAD(err, param, "invalid_type", "invalid type for '%s': expected %s, got %s", param, what, api_jtype(it));
    return -1;
}

/* Copies at most ~48 bytes of a (valid UTF-8) user string for quoting in an
 * error message, cutting on a character boundary. */
const char *api_quote(const char *s, char *buf, size_t cap) {
    size_t n = strlen(s), lim = cap - 4; /* room for "..." + NUL */
    if (n <= cap - 1) { memcpy(buf, s, n + 1); return buf; }
    while (lim > 0 && ((unsigned char)s[lim] & 0xC0) == 0x80) lim--;
    memcpy(buf, s, lim);
    memcpy(buf + lim, "...", 4);
    return buf;
}

char *api_dupstr(const char *s, el_api_error *err) {
    size_t n = strlen(s);
    char *d = malloc(n + 1);
    if (!d) {
        el_api_set_error(err, 500, "server_error", NULL, NULL, "out of memory");
        return NULL;
    }
    memcpy(d, s, n + 1);
    return d;
}

int api_oom(el_api_error *err) {
    el_api_set_error(err, 500, "server_error", NULL, NULL, "out of memory");
    return -1;
}

/* A finite number in [lo, hi] (open ends when lo_open / hi_open). */
static int get_num(const cJSON *it, const char *param, double lo, bool lo_open, double hi, bool hi_open,
                   double *out, el_api_error *err) {
    if (!cJSON_IsNumber(it)) return api_type_error(err, param, "a number", it);
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
int api_get_int(const cJSON *it, const char *param, double lo, double hi, double *out, el_api_error *err) {
    if (!cJSON_IsNumber(it)) return api_type_error(err, param, "an integer", it);
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

/* Optional fields, one helper per type: it NULL (not given, or JSON null) changes nothing and is 0;
 * otherwise it is checked (get_num, api_get_int, a boolean, a string), stored in *dst and, when given is not
 * NULL, *given is set. -1 with err filled. */
int api_opt_num(const cJSON *it, const char *param, double lo, bool lo_open, double hi, bool hi_open, float *dst,
                bool *given, el_api_error *err) {
    double v = 0;
    if (!it) return 0;
    if (get_num(it, param, lo, lo_open, hi, hi_open, &v, err)) return -1;
    *dst = (float)v;
    if (given) *given = true;
    return 0;
}

int api_opt_int(const cJSON *it, const char *param, double lo, double hi, int *dst, bool *given,
                el_api_error *err) {
    double v = 0;
    if (!it) return 0;
    if (api_get_int(it, param, lo, hi, &v, err)) return -1;
    *dst = (int)v;
    if (given) *given = true;
    return 0;
}

int api_opt_bool(const cJSON *it, const char *param, bool *dst, bool *given, el_api_error *err) {
    if (!it) return 0;
    if (!cJSON_IsBool(it)) return api_type_error(err, param, "a boolean", it);
    *dst = cJSON_IsTrue(it);
    if (given) *given = true;
    return 0;
}

int api_opt_str(const cJSON *it, const char *param, char **dst, el_api_error *err) {
    if (!it) return 0;
    if (!cJSON_IsString(it)) return api_type_error(err, param, "a string", it);
    return (*dst = api_dupstr(it->valuestring, err)) ? 0 : -1;
}

/* "seed": an integer from lo below 2^64 (as a double 2^64 - 1 is 2^64: checked apart). */
int api_get_seed(const cJSON *it, double lo, double *v, el_api_error *err) {
    if (api_get_int(it, "seed", lo, 18446744073709551615.0, v, err)) return -1;
    if (*v >= 18446744073709551616.0) {
        BAD(err, "seed", "invalid_value", "'seed' is out of range");
        return -1;
    }
    return 0;
}

/* presence_penalty and frequency_penalty, -2..2 on every route. */
int api_penalties(const cJSON *presence, const cJSON *frequency, el_api_request *out, el_api_error *err) {
    if (api_opt_num(presence, "presence_penalty", -2, false, 2, false, &out->presence_penalty, NULL, err) ||
        api_opt_num(frequency, "frequency_penalty", -2, false, 2, false, &out->frequency_penalty, NULL, err))
        return -1;
    return 0;
}

/* A token id: a number that is an integer in [0, 2^31) (checked against the vocabulary by the server). */
bool api_token_id(const cJSON *it, int32_t *out) {
    double v = cJSON_IsNumber(it) ? it->valuedouble : -1;
    if (!(v >= 0 && v <= INT32_MAX) || v != (double)(int32_t)v) return false;
    *out = (int32_t)v;
    return true;
}

/* schema (NULL: any JSON object when object_only, else any value) → out->grammar, checked by compiling it */
int api_set_schema_grammar(const cJSON *schema, bool object_only, const char *param, el_api_request *out,
                           el_api_error *err) {
    el_error e = {0};
    char *g = schema ? el_json_schema_to_gbnf(schema, &e)
                     : object_only ? strdup(el_json_object_gbnf()) : el_json_schema_text_to_gbnf("{}", 2, &e);
    if (!g) {
        if (!schema && !e.code) return api_oom(err);
        if (e.code == EL_ERR_NOMEM) return api_oom(err);
        BAD(err, param, "invalid_value", "%s: %s", param, e.msg);
        return -1;
    }
    el_grammar *cg = el_grammar_parse(g, strlen(g), &e);
    if (!cg) {
        free(g);
        if (e.code == EL_ERR_NOMEM) return api_oom(err);
        BAD(err, param, "invalid_value", "%s: %s", param, e.msg);
        return -1;
    }
    el_grammar_free(cg);
    free(out->grammar);
    out->grammar = g;
    return 0;
}

/* "grammar": GBNF text ("" = none), compiled to check it */
int api_parse_grammar_field(const cJSON *it, el_api_request *out, el_api_error *err) {
    if (!cJSON_IsString(it)) return api_type_error(err, "grammar", "a string", it);
    if (!it->valuestring[0]) return 0;
    el_error e = {0};
    el_grammar *cg = el_grammar_parse(it->valuestring, strlen(it->valuestring), &e);
    if (!cg) {
        if (e.code == EL_ERR_NOMEM) return api_oom(err);
        BAD(err, "grammar", "invalid_value", "grammar: %s", e.msg);
        return -1;
    }
    el_grammar_free(cg);
    free(out->grammar);
    return (out->grammar = api_dupstr(it->valuestring, err)) ? 0 : -1;
}

/* logit_bias's arrays for n entries (at most EL_API_MAX_LOGIT_BIAS; none for 0). 0, or -1 with err filled. */
int api_bias_alloc(int n, el_api_request *out, el_api_error *err) {
    if (n > EL_API_MAX_LOGIT_BIAS) {
        BAD(err, "logit_bias", "invalid_value", "at most %d logit_bias entries are allowed (got %d)",
            EL_API_MAX_LOGIT_BIAS, n);
        return -1;
    }
    if (n == 0) return 0;
    out->logit_bias_id = malloc((size_t)n * sizeof *out->logit_bias_id);
    out->logit_bias = malloc((size_t)n * sizeof *out->logit_bias);
    out->logit_bias_text = malloc((size_t)n * sizeof *out->logit_bias_text);
    out->logit_bias_text_bias = malloc((size_t)n * sizeof *out->logit_bias_text_bias);
    return out->logit_bias_id && out->logit_bias && out->logit_bias_text && out->logit_bias_text_bias ? 0
                                                                                                   : api_oom(err);
}

int api_bias_add_text(const char *text, float bias, el_api_request *out, el_api_error *err) {
    char q[52];
    size_t len = strlen(text);
    if (len == 0 || len > EL_API_MAX_BIAS_TEXT) {
        BAD(err, "logit_bias", "invalid_value", "logit_bias: text key '%s' must be 1..%d bytes (got %zu)",
            api_quote(text, q, sizeof q), EL_API_MAX_BIAS_TEXT, len);
        return -1;
    }
    char *t = api_dupstr(text, err);
    if (!t) return -1;
    out->logit_bias_text[out->n_logit_bias_text] = t;
    out->logit_bias_text_bias[out->n_logit_bias_text++] = bias;
    return 0;
}

/* Appends one entry (room made by api_bias_alloc); a token given twice is a 400. */
int api_bias_add(int32_t id, float bias, el_api_request *out, el_api_error *err) {
    for (int i = 0; i < out->n_logit_bias; i++)
        if (out->logit_bias_id[i] == id) {
            BAD(err, "logit_bias", "duplicate_key", "logit_bias: token id %d given twice", (int)id);
            return -1;
        }
    out->logit_bias_id[out->n_logit_bias] = id;
    out->logit_bias[out->n_logit_bias++] = bias;
    return 0;
}

/* "logit_bias": {"<token id>" or "<text>": bias in [-100, 100], ...}. A key of digits (a sign
 * too) is a token id and must be one; any other key is text, as llama-server reads it. */
int api_parse_logit_bias(const cJSON *it, el_api_request *out, el_api_error *err) {
    if (!cJSON_IsObject(it)) return api_type_error(err, "logit_bias", "an object", it);
    if (api_bias_alloc(cJSON_GetArraySize(it), out, err)) return -1;
    const cJSON *e;
    cJSON_ArrayForEach(e, it) {
        char q[52];
        const char *k = e->string ? e->string : "";
        if (!cJSON_IsNumber(e) || !isfinite(e->valuedouble) || e->valuedouble < -100 || e->valuedouble > 100) {
            BAD(err, "logit_bias", "invalid_value", "logit_bias[\"%s\"]: expected a number in [-100, 100]",
                api_quote(k, q, sizeof q));
            return -1;
        }
        const char *d = k + (*k == '-' || *k == '+');
        bool numeric = *d != '\0' && strspn(d, "0123456789") == strlen(d);
        if (!numeric) {
            if (api_bias_add_text(k, (float)e->valuedouble, out, err)) return -1;
            continue;
        }
        long long id = *k == '-' || strlen(d) > 10 ? -1 : strtoll(d, NULL, 10);
        if (id < 0 || id > INT32_MAX) {
            BAD(err, "logit_bias", "invalid_value", "logit_bias: key '%s' is not a token id", api_quote(k, q, sizeof q));
            return -1;
        }
        if (api_bias_add((int32_t)id, (float)e->valuedouble, out, err)) return -1;
    }
    return 0;
}

/* Looks up a key that must appear at most once in obj. 0 (item or NULL), -1 on duplicate. */
int api_get_unique(const cJSON *obj, const char *key, const char *param, const cJSON **out,
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

static int add_stop(const cJSON *s, int idx, el_api_request *out, el_api_error *err) {
    if (!cJSON_IsString(s)) {
        if (idx < 0) return api_type_error(err, "stop", "a string or an array of strings", s);
        BAD(err, "stop", "invalid_type", "stop[%d]: expected a string, got %s", idx, api_jtype(s));
        return -1;
    }
    size_t l = strlen(s->valuestring);
    if (l == 0 || l > STOP_MAX_BYTES) {
        BAD(err, "stop", "invalid_value", "stop sequences must be 1..%d bytes long (got %zu)", STOP_MAX_BYTES, l);
        return -1;
    }
    char *d = api_dupstr(s->valuestring, err);
    if (!d) return -1;
    out->stop[out->n_stop++] = d;
    return 0;
}

int api_parse_stop(const cJSON *it, el_api_request *out, el_api_error *err) {
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

void api_request_init(el_api_request *r, el_api_kind kind) {
    memset(r, 0, sizeof *r);
    r->kind = kind;
    r->max_tokens = -1;
    r->temperature = 1.0f;
    r->top_p = 1.0f;
    r->repeat_penalty = 1.0f;
    r->repeat_last_n = -1;
    r->id_slot = -1;
    r->parallel_tool_calls = true;
    r->reasoning_format = -1; /* the server's default */
    if (kind == EL_API_NATIVE) { /* llama-server's /completion defaults */
        r->temperature = 0.8f;
        r->top_p = 0.95f;
        r->top_k = 40;
        r->min_p = 0.05f;
        r->repeat_last_n = 64;
        r->cache_prompt = true;
    }
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

/* Steps 1-4 of the pipeline: the body as a cJSON object (caller deletes), or
 * NULL with err filled. */
cJSON *api_parse_root(const char *body, size_t len, el_api_error *err) {
    if (len > EL_API_MAX_BODY) {
        el_api_set_error(err, 413, "invalid_request_error", NULL, "request_too_large",
                         "request body too large (%zu bytes; the limit is %u)", len, (unsigned)EL_API_MAX_BODY);
        return NULL;
    }
    if (!body) len = 0;
    const unsigned char *s = (const unsigned char *)body;
    if (len >= 3 && !memcmp(s, "\xEF\xBB\xBF", 3)) { s += 3; len -= 3; } /* BOM */
    if (el_utf8_check(s, len) != len) {
        BAD(err, NULL, "invalid_utf8", "invalid UTF-8 in request body");
        return NULL;
    }
    if (lex_check(s, len, err)) return NULL;

    char *copy = malloc(len + 1);
    if (!copy) { api_oom(err); return NULL; }
    if (len) memcpy(copy, s, len);
    copy[len] = 0;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(copy, len + 1, &end, 1);
    free(copy);
    if (!root) {
        BAD(err, NULL, "invalid_json", "request body is not valid JSON");
        return NULL;
    }
    if (!cJSON_IsObject(root)) {
        BAD(err, NULL, "invalid_json", "request body must be a JSON object");
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

/* "lora": [{"id": N, "scale": S}, ...] (llama-server's per-request adapters; api.h). */
static int parse_lora(const cJSON *root, el_api_request *out, el_api_error *err) {
    const cJSON *it = NULL;
    if (api_get_unique(root, "lora", "lora", &it, err)) {
        BAD(err, "lora", "duplicate_key", "duplicate key 'lora' in request body");
        return -1;
    }
    if (!it || cJSON_IsNull(it)) return 0;
    if (!cJSON_IsArray(it)) return api_type_error(err, "lora", "an array of {\"id\", \"scale\"} objects", it);
    const cJSON *e;
    cJSON_ArrayForEach(e, it) {
        if (!cJSON_IsObject(e)) return api_type_error(err, "lora", "an array of {\"id\", \"scale\"} objects", e);
        double id, sc = 0;
        const cJSON *jid = cJSON_GetObjectItemCaseSensitive(e, "id"), *js = cJSON_GetObjectItemCaseSensitive(e, "scale");
        if (!jid) {
            BAD(err, "lora", "invalid_value", "'lora' entries need an \"id\"");
            return -1;
        }
        if (api_get_int(jid, "lora.id", 0, EL_API_MAX_LORA_ID, &id, err)) return -1;
        if (js && !cJSON_IsNull(js) && get_num(js, "lora.scale", 0, false, 1e6, false, &sc, err)) return -1;
        int k = 0;
        while (k < out->n_lora && out->lora_id[k] != (int)id) k++;
        if (k == out->n_lora) {
            if (out->n_lora == EL_API_MAX_LORA) {
                BAD(err, "lora", "invalid_value", "'lora' lists more than %d adapters", EL_API_MAX_LORA);
                return -1;
            }
            out->n_lora++;
        }
        out->lora_id[k] = (int)id;
        out->lora_scale[k] = (float)sc;
    }
    out->has_lora = out->n_lora > 0;
    return 0;
}

/* A caller's bug: no output struct (a 500). A NULL err is fine everywhere: errors then go nowhere. */
int api_no_output(el_api_error *err, const char *fn) {
    el_api_set_error(err, 500, "server_error", NULL, NULL, "%s: no output struct", fn);
    return -1;
}

/* Steps 1-4, then the route's fields and the "lora" list into out (api_request_init'ed); out is freed on failure. */
int api_parse_request(const char *body, size_t len, int (*fields)(const cJSON *, el_api_request *, el_api_error *),
                      el_api_request *out, el_api_error *err) {
    cJSON *root = api_parse_root(body, len, err);
    if (!root) return -1;
    int rc = fields(root, out, err);
    if (!rc) rc = parse_lora(root, out, err);
    cJSON_Delete(root);
    if (rc) el_api_request_free(out);
    return rc;
}

/* ------------------------------------------------------------------ requests */

void el_api_request_free(el_api_request *r) {
    if (!r) return;
    el_api_kind kind = r->kind;
    if (r->msgs) {
        for (int i = 0; i < r->n_msgs; i++) {
            free((char *)r->msgs[i].role);
            free((char *)r->msgs[i].content);
            free((char *)r->msgs[i].tool_call_id);
            api_free_calls(&r->msgs[i]);
        }
        free(r->msgs);
    }
    free(r->prompt);
    free(r->model);
    for (int i = 0; i < EL_API_MAX_STOP; i++) free(r->stop[i]);
    free(r->logit_bias_id);
    free(r->logit_bias);
    for (int i = 0; r->logit_bias_text && i < r->n_logit_bias_text; i++) free(r->logit_bias_text[i]);
    free(r->logit_bias_text);
    free(r->logit_bias_text_bias);
    for (int i = 0; r->parts && i < r->n_parts; i++) free(r->parts[i].text);
    free(r->parts);
    for (int i = 0; i < EL_API_MAX_RESP_FIELDS; i++) free(r->resp_fields[i]);
    free(r->grammar);
    free(r->chat_template_kwargs);
    for (int i = 0; i < r->n_tools; i++) {
        if (r->tools) { free(r->tools[i].name); free(r->tools[i].parameters); }
        if (r->chat_tools) { free((char *)r->chat_tools[i].json); free((char *)r->chat_tools[i].json_indent4); }
    }
    free(r->tools);
    free(r->chat_tools);
    api_request_init(r, kind);
}
