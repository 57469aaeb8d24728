/*
 * api_native.c — llama-server's /completion: its request body
 * (el_api_parse_native) and its reply (el_api_native_response,
 * el_api_native_probs_json).
 *
 * The body goes through api.c's pipeline (api_parse_request); its fields are
 * llama-server's (g_native), and the samplers and features edgellm lacks are
 * accepted only with the value that turns them off (g_neutral: a 400 naming
 * the field otherwise). The prompt is text, token ids or both (parts, the
 * server tokenizes); logit_bias is llama-server's [[id or text, bias | false],
 * ...] or OpenAI's object (text keys: the server tokenizes them). The reply is one JSON object (a stream chunk, or the
 * final object with timings, generation_settings and the stop); a request's
 * response_fields pick from the whole object ("a/b": key b of object a).
 */
#include "server/api_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the request ----------------------------------------------------------- */

/* Fields of llama-server's /completion. SUPPORTED are parsed into the request;
 * NEUTRAL name samplers and features edgellm does not implement: accepted
 * only with the value that turns them off (a 400 naming the field otherwise);
 * IGNORED are parameters of features that are off (mirostat_tau without
 * mirostat, ...), which llama-server itself ignores then. Anything else is
 * ignored, like llama-server does. */
enum {
    N_PROMPT, N_N_PREDICT, N_MAX_TOKENS, N_TEMPERATURE, N_TOP_K, N_TOP_P, N_MIN_P, N_REPEAT_PENALTY,
    N_REPEAT_LAST_N, N_PRESENCE, N_FREQUENCY, N_SEED, N_STOP, N_LOGIT_BIAS, N_N_PROBS, N_IGNORE_EOS,
    N_CACHE_PROMPT, N_RETURN_TOKENS, N_RESPONSE_FIELDS, N_STREAM, N_ID_SLOT, N_MODEL, N_GRAMMAR, N_JSON_SCHEMA, N_COUNT
};

static const char *const g_native[N_COUNT] = {
    "prompt", "n_predict", "max_tokens", "temperature", "top_k", "top_p", "min_p", "repeat_penalty",
    "repeat_last_n", "presence_penalty", "frequency_penalty", "seed", "stop", "logit_bias", "n_probs",
    "ignore_eos", "cache_prompt", "return_tokens", "response_fields", "stream", "id_slot", "model",
    "grammar", "json_schema",
};

/* kind: 'n' number equal to num, 'b' false, 's' "" , 'a' [] , 'z' absent (null only) */
static const struct { const char *name; char kind; double num; } g_neutral[] = {
    {"mirostat", 'n', 0},        {"typical_p", 'n', 1},          {"dynatemp_range", 'n', 0},
    {"dry_multiplier", 'n', 0},  {"xtc_probability", 'n', 0},    {"top_n_sigma", 'n', -1},
    {"n_keep", 'n', 0},          {"n_discard", 'n', 0},          {"n_indent", 'n', 0},
    {"n_cmpl", 'n', 1},          {"n", 'n', 1},                  {"min_keep", 'n', 0},
    {"t_max_predict_ms", 'n', 0}, {"n_cache_reuse", 'n', 0},     {"samplers", 'z', 0},
    {"image_data", 'a', 0},      {"multimodal_data", 'a', 0},    {"post_sampling_probs", 'b', 0},
    {"timings_per_token", 'b', 0}, {"return_progress", 'b', 0},  {"echo", 'b', 0},
};

static int native_neutral(const cJSON *it, const char *name, char kind, double num, el_api_error *err) {
    if (cJSON_IsNull(it)) return 0;
    bool ok = kind == 'n' ? cJSON_IsNumber(it) && it->valuedouble == num
            : kind == 'b' ? cJSON_IsFalse(it)
            : kind == 's' ? cJSON_IsString(it) && !it->valuestring[0]
            : kind == 'a' ? cJSON_IsArray(it) && cJSON_GetArraySize(it) == 0
            : false;
    if (ok) return 0;
    if (kind == 'n')
        BAD(err, name, "unsupported_value", "'%s' is not supported by edgellm (only %g, which turns it off)", name, num);
    else
        BAD(err, name, "unsupported_value", "'%s' is not supported by edgellm", name);
    return -1;
}

static int native_prompt(const cJSON *it, el_api_request *out, el_api_error *err) {
    if (!it || cJSON_IsNull(it)) {
        BAD(err, "prompt", "missing_required_parameter", "missing required parameter: 'prompt'");
        return -1;
    }
    if (cJSON_IsString(it)) {
        out->parts = calloc(1, sizeof *out->parts);
        if (!out->parts) return api_oom(err);
        out->n_parts = 1;
        return (out->parts[0].text = api_dupstr(it->valuestring, err)) ? 0 : -1;
    }
    if (!cJSON_IsArray(it)) return api_type_error(err, "prompt", "a string or an array of token ids and strings", it);
    int n = cJSON_GetArraySize(it);
    if (n == 1 && cJSON_IsArray(cJSON_GetArrayItem(it, 0))) it = cJSON_GetArrayItem(it, 0); /* [[ids]]: one prompt */
    n = cJSON_GetArraySize(it);
    if (n == 0) {
        BAD(err, "prompt", "invalid_value", "'prompt' is empty");
        return -1;
    }
    if (n > EL_API_MAX_PROMPT_PARTS) {
        BAD(err, "prompt", "invalid_value", "'prompt' has %d parts; at most %d are allowed", n, EL_API_MAX_PROMPT_PARTS);
        return -1;
    }
    out->parts = calloc((size_t)n, sizeof *out->parts);
    if (!out->parts) return api_oom(err);
    out->n_parts = n;
    int i = 0, n_str = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, it) {
        if (cJSON_IsString(e)) {
            if (!(out->parts[i].text = api_dupstr(e->valuestring, err))) return -1;
            n_str++;
        } else if (cJSON_IsNumber(e)) {
            if (!api_token_id(e, &out->parts[i].tok)) {
                BAD(err, "prompt", "invalid_value", "prompt[%d] is not a token id (an integer >= 0)", i);
                return -1;
            }
        } else if (cJSON_IsArray(e) || cJSON_IsObject(e)) {
            BAD(err, "prompt", "unsupported_value",
                "several prompts in one request (or multimodal prompt objects) are not supported; send one prompt");
            return -1;
        } else {
            BAD(err, "prompt", "invalid_type", "prompt[%d]: expected a token id or a string, got %s", i, api_jtype(e));
            return -1;
        }
        i++;
    }
    if (n_str > 1 && n_str == n) { /* ["a", "b"]: llama-server reads this as two prompts */
        BAD(err, "prompt", "unsupported_value", "several prompts in one request are not supported; send one prompt");
        return -1;
    }
    return 0;
}

/* [[id, bias | false], ...] (llama-server) or {"id": bias} (OpenAI). */
static int native_logit_bias(const cJSON *it, el_api_request *out, el_api_error *err) {
    if (cJSON_IsObject(it)) return api_parse_logit_bias(it, out, err); /* OpenAI's object form (biases -100..100) */
    if (!cJSON_IsArray(it)) return api_type_error(err, "logit_bias", "an array of [token id, bias] pairs", it);
    if (api_bias_alloc(cJSON_GetArraySize(it), out, err)) return -1;
    int i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, it) {
        const cJSON *id = cJSON_GetArrayItem(e, 0), *b = cJSON_GetArrayItem(e, 1);
        if (!cJSON_IsArray(e) || cJSON_GetArraySize(e) != 2) {
            BAD(err, "logit_bias", "invalid_value", "logit_bias[%d]: expected a [token id, bias] pair", i);
            return -1;
        }
        int32_t tok = -1;
        if (!cJSON_IsString(id) && !api_token_id(id, &tok)) {
            BAD(err, "logit_bias", "invalid_value",
                "logit_bias[%d][0] is neither a token id (an integer >= 0) nor a text", i);
            return -1;
        }
        float bias;
        if (cJSON_IsFalse(b)) bias = -1e30f; /* never produced (a finite stand-in for -inf) */
        else if (cJSON_IsNumber(b) && isfinite(b->valuedouble) && fabs(b->valuedouble) <= 1e6) bias = (float)b->valuedouble;
        else {
            BAD(err, "logit_bias", "invalid_value", "logit_bias[%d][1]: expected a number in [-1e6, 1e6] or false", i);
            return -1;
        }
        /* a text: every token of it (llama-server tokenizes it without special tokens) */
        if (cJSON_IsString(id)) {
            if (api_bias_add_text(id->valuestring, bias, out, err)) return -1;
        } else { /* an id given again adds up, as llama.cpp's bias sampler applies each entry */
            int k = 0;
            while (k < out->n_logit_bias && out->logit_bias_id[k] != tok) k++;
            if (k < out->n_logit_bias) out->logit_bias[k] += bias;
            else if (api_bias_add(tok, bias, out, err)) return -1;
        }
        i++;
    }
    return 0;
}

static int native_fields(const cJSON *root, el_api_request *out, el_api_error *err) {
    const cJSON *f[N_COUNT] = {0};
    const cJSON *it;
    cJSON_ArrayForEach(it, root) {
        if (!it->string) continue;
        for (int k = 0; k < N_COUNT; k++) {
            if (strcmp(it->string, g_native[k])) continue;
            if (f[k]) {
                BAD(err, g_native[k], "duplicate_key", "duplicate key '%s' in request body", g_native[k]);
                return -1;
            }
            f[k] = it;
        }
        for (size_t k = 0; k < sizeof g_neutral / sizeof *g_neutral; k++)
            if (!strcmp(it->string, g_neutral[k].name) &&
                native_neutral(it, g_neutral[k].name, g_neutral[k].kind, g_neutral[k].num, err))
                return -1;
    }
    if (native_prompt(f[N_PROMPT], out, err)) return -1;
    for (int k = 0; k < N_COUNT; k++)
        if (f[k] && cJSON_IsNull(f[k])) f[k] = NULL;
    double v;
    const cJSON *np = f[N_N_PREDICT] ? f[N_N_PREDICT] : f[N_MAX_TOKENS];
    if (np) {
        const char *name = f[N_N_PREDICT] ? "n_predict" : "max_tokens";
        if (api_get_int(np, name, -1, (double)(1 << 20), &v, err)) return -1;
        if (v == 0) {
            BAD(err, name, "unsupported_value", "'%s': 0 (evaluate the prompt only) is not supported", name);
            return -1;
        }
        out->max_tokens = (int)v; /* -1: until the context is full */
        out->has_max_tokens = true;
    }
    if (api_opt_num(f[N_TEMPERATURE], "temperature", -1e9, false, 2, false, &out->temperature, &out->has_temperature,
                    err) ||
        api_opt_int(f[N_TOP_K], "top_k", -2147483648.0, 2147483647.0, &out->top_k, NULL, err) ||
        api_opt_num(f[N_TOP_P], "top_p", 0, false, 1, false, &out->top_p, NULL, err) ||
        api_opt_num(f[N_MIN_P], "min_p", 0, false, 1, false, &out->min_p, NULL, err) ||
        api_opt_num(f[N_REPEAT_PENALTY], "repeat_penalty", 0, false, 10, false, &out->repeat_penalty, NULL, err) ||
        api_opt_int(f[N_REPEAT_LAST_N], "repeat_last_n", -1, 1 << 20, &out->repeat_last_n, NULL, err) ||
        api_penalties(f[N_PRESENCE], f[N_FREQUENCY], out, err))
        return -1;
    /* llama-server's readings of the values as sent: a negative temperature is greedy, a negative top_k
     * is off (0), top_p 0 (as 1) leaves top-p off, repeat_penalty 0 is 1 (off) */
    if (f[N_TEMPERATURE] && f[N_TEMPERATURE]->valuedouble < 0) out->temperature = 0.0f;
    if (f[N_TOP_K] && f[N_TOP_K]->valuedouble < 0) out->top_k = 0;
    if (f[N_TOP_P] && f[N_TOP_P]->valuedouble <= 0) out->top_p = 1.0f;
    if (f[N_REPEAT_PENALTY] && f[N_REPEAT_PENALTY]->valuedouble == 0) out->repeat_penalty = 1.0f;
    if ((it = f[N_SEED])) {
        if (api_get_seed(it, -1, &v, err)) return -1;
        if (v >= 0 && v != 4294967295.0) { /* -1 and 0xFFFFFFFF (LLAMA_DEFAULT_SEED): random */
            out->has_seed = true;
            out->seed = (uint64_t)v;
        }
    }
    if ((it = f[N_STOP]) && api_parse_stop(it, out, err)) return -1;
    if ((it = f[N_LOGIT_BIAS]) && native_logit_bias(it, out, err)) return -1;
    if (api_opt_int(f[N_N_PROBS], "n_probs", 0, 2147483647.0, &out->n_probs, NULL, err) ||
        api_opt_bool(f[N_IGNORE_EOS], "ignore_eos", &out->ignore_eos, NULL, err))
        return -1;
    if (f[N_GRAMMAR] && f[N_JSON_SCHEMA] && !(cJSON_IsString(f[N_GRAMMAR]) && !f[N_GRAMMAR]->valuestring[0])) {
        BAD(err, "grammar", "invalid_value", "give either 'json_schema' or 'grammar', not both");
        return -1;
    }
    if ((it = f[N_JSON_SCHEMA]) && api_set_schema_grammar(it, false, "json_schema", out, err)) return -1;
    if ((it = f[N_GRAMMAR]) && api_parse_grammar_field(it, out, err)) return -1;
    if (api_opt_bool(f[N_CACHE_PROMPT], "cache_prompt", &out->cache_prompt, &out->has_cache_prompt, err) ||
        api_opt_bool(f[N_RETURN_TOKENS], "return_tokens", &out->return_tokens, NULL, err) ||
        api_opt_bool(f[N_STREAM], "stream", &out->stream, NULL, err) ||
        api_opt_int(f[N_ID_SLOT], "id_slot", -1, 2147483647.0, &out->id_slot, NULL, err) ||
        api_opt_str(f[N_MODEL], "model", &out->model, err))
        return -1;
    if ((it = f[N_RESPONSE_FIELDS])) {
        if (!cJSON_IsArray(it)) return api_type_error(err, "response_fields", "an array of strings", it);
        int n = cJSON_GetArraySize(it), i = 0;
        if (n > EL_API_MAX_RESP_FIELDS) {
            BAD(err, "response_fields", "invalid_value", "at most %d response_fields are allowed (got %d)",
                EL_API_MAX_RESP_FIELDS, n);
            return -1;
        }
        const cJSON *e;
        cJSON_ArrayForEach(e, it) {
            if (!cJSON_IsString(e) || strlen(e->valuestring) > 256) {
                BAD(err, "response_fields", "invalid_value", "response_fields[%d]: expected a string of <= 256 bytes", i);
                return -1;
            }
            if (!(out->resp_fields[out->n_resp_fields++] = api_dupstr(e->valuestring, err))) return -1;
            i++;
        }
    }
    return 0;
}

int el_api_parse_native(const char *body, size_t len, el_api_request *out, el_api_error *err) {
    if (!out) return api_no_output(err, "el_api_parse_native");
    api_request_init(out, EL_API_NATIVE);
    return api_parse_request(body, len, native_fields, out, err);
}

/* ---- the reply ------------------------------------------------------------- */

static bool put_native_tok(el_buf *b, int32_t id, const char *text, size_t len, float lp) {
    char num[24];
    int k = snprintf(num, sizeof num, "{\"id\":%d", (int)id);
    return el_buf_append(b, num, (size_t)k) && el_buf_str(b, ",\"token\":") && el_api_json_string(b, text, len) &&
           el_buf_str(b, ",\"bytes\":") && api_put_bytes(b, text, len) && el_buf_str(b, ",\"logprob\":") && api_put_lp(b, lp);
}

char *el_api_native_probs_json(const el_api_token_lp *t, int n) {
    el_buf b = {0};
    bool ok = el_buf_str(&b, "[");
    for (int i = 0; ok && i < n; i++) {
        ok = (!i || el_buf_str(&b, ",")) && put_native_tok(&b, t[i].id, t[i].text, t[i].len, t[i].logprob) &&
             el_buf_str(&b, ",\"top_logprobs\":[");
        for (int k = 0; ok && k < t[i].n_top; k++)
            ok = (!k || el_buf_str(&b, ",")) &&
                 put_native_tok(&b, t[i].top[k].id, t[i].top[k].text, t[i].top[k].len, t[i].top[k].logprob) &&
                 el_buf_str(&b, "}");
        if (ok) ok = el_buf_str(&b, "]}");
    }
    if (ok) ok = el_buf_str(&b, "]");
    if (!ok) { el_buf_free(&b); return NULL; }
    return b.p;
}

static int add_timings(cJSON *root, const el_api_native_result *r) {
    cJSON *t = cJSON_AddObjectToObject(root, "timings");
    if (!t) return -1;
    return api_fill_timings(t, r) ? 0 : -1;
}

char *el_api_timings_json(const el_api_native_result *r) {
    cJSON *t = cJSON_CreateObject();
    if (!t || !api_fill_timings(t, r)) {
        cJSON_Delete(t);
        return NULL;
    }
    return api_print_and_delete(t);
}

bool api_fill_timings(cJSON *t, const el_api_native_result *r) {
    double pn = r->n_prompt - r->n_cache_reused, gn = r->n_predicted;
    return cJSON_AddNumberToObject(t, "cache_n", r->n_cache_reused) && cJSON_AddNumberToObject(t, "prompt_n", pn) &&
                   cJSON_AddNumberToObject(t, "prompt_ms", r->prompt_ms) &&
                   cJSON_AddNumberToObject(t, "prompt_per_token_ms", pn > 0 ? r->prompt_ms / pn : 0) &&
                   cJSON_AddNumberToObject(t, "prompt_per_second", r->prompt_ms > 0 ? 1e3 * pn / r->prompt_ms : 0) &&
                   cJSON_AddNumberToObject(t, "predicted_n", gn) &&
                   cJSON_AddNumberToObject(t, "predicted_ms", r->predicted_ms) &&
                   cJSON_AddNumberToObject(t, "predicted_per_token_ms", gn > 0 ? r->predicted_ms / gn : 0) &&
                   cJSON_AddNumberToObject(t, "predicted_per_second",
                                           r->predicted_ms > 0 ? 1e3 * gn / r->predicted_ms : 0);
}

/* Keeps only the response_fields of root (see el_api_native_response). */
static cJSON *pick_fields(cJSON *root, char *const *fields, int n) {
    cJSON *out = cJSON_CreateObject();
    if (!out) return NULL;
    for (int i = 0; i < n; i++) {
        const char *f = fields[i];
        if (cJSON_GetObjectItemCaseSensitive(out, f)) continue; /* named twice */
        const char *slash = strchr(f, '/');
        cJSON *it;
        if (slash) {
            char obj[260];
            size_t l = (size_t)(slash - f);
            if (l >= sizeof obj) continue;
            memcpy(obj, f, l);
            obj[l] = 0;
            cJSON *o = cJSON_GetObjectItemCaseSensitive(root, obj);
            it = cJSON_IsObject(o) ? cJSON_DetachItemFromObjectCaseSensitive(o, slash + 1) : NULL;
        } else {
            it = cJSON_DetachItemFromObjectCaseSensitive(root, f);
        }
        if (it) cJSON_AddItemToObject(out, f, it);
    }
    cJSON_Delete(root);
    return out;
}

char *el_api_native_response(const el_api_native_result *r, char *const *fields, int n_fields) {
    cJSON *root = cJSON_CreateObject();
    if (!root) return NULL;
    el_buf toks = {0};
    bool ok = el_buf_str(&toks, "[");
    for (int i = 0; ok && i < r->n_tokens; i++) {
        char num[16];
        int k = snprintf(num, sizeof num, i ? ",%d" : "%d", (int)r->tokens[i]);
        ok = el_buf_append(&toks, num, (size_t)k);
    }
    ok = ok && el_buf_str(&toks, "]");
    ok = ok && cJSON_AddNumberToObject(root, "index", 0) && !api_add_text(root, "content", r->content, r->len) &&
         cJSON_AddRawToObject(root, "tokens", toks.p) && cJSON_AddNumberToObject(root, "id_slot", r->id_slot) &&
         cJSON_AddBoolToObject(root, "stop", r->stop) && !api_add_str_or_null(root, "model", r->model ? r->model : "") &&
         cJSON_AddNumberToObject(root, "tokens_predicted", r->n_predicted) &&
         cJSON_AddNumberToObject(root, "tokens_evaluated", r->n_prompt);
    el_buf_free(&toks);
    if (ok && r->stop) {
        bool nl = r->content && memchr(r->content, '\n', r->len) != NULL;
        cJSON *gs = r->settings ? cJSON_Parse(r->settings) : NULL; /* an object, so "generation_settings/x" can pick */
        if (gs) cJSON_AddItemToObject(root, "generation_settings", gs);
        ok = (!r->settings || gs) &&
             (!r->prompt || !api_add_text(root, "prompt", r->prompt, r->prompt_len)) &&
             cJSON_AddBoolToObject(root, "has_new_line", nl) && cJSON_AddBoolToObject(root, "truncated", r->truncated) &&
             !api_add_str_or_null(root, "stop_type", r->stop_type ? r->stop_type : "none") &&
             !api_add_str_or_null(root, "stopping_word", r->stopping_word ? r->stopping_word : "") &&
             cJSON_AddNumberToObject(root, "tokens_cached", r->n_cached) && !add_timings(root, r);
    }
    if (ok && r->probs) ok = cJSON_AddRawToObject(root, "completion_probabilities", r->probs) != NULL;
    if (!ok) {
        cJSON_Delete(root);
        return NULL;
    }
    if (n_fields > 0 && !(root = pick_fields(root, fields, n_fields))) return NULL;
    return api_print_and_delete(root);
}
