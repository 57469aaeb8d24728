/*
 * api_openai.c — the OpenAI request bodies: /v1/chat/completions and
 * /v1/completions (el_api_parse).
 *
 * The body goes through the pipeline of api.c (size, UTF-8, lexical checks,
 * cJSON: api_parse_request); then every field OpenAI defines is checked here
 * (g_fields: which route knows it): a known field given twice is rejected,
 * JSON null is "not given" for the optional ones, unknown fields are ignored
 * as OpenAI does. Unsupported values are a 400 that names the field, never
 * ignored: n and best_of other than 1, a non-empty suffix, echo together with
 * logprobs. Messages (roles system, user, assistant, tool and the legacy
 * function; content a string or an array of text parts; an assistant's tool
 * calls and a tool result's tool_call_id: api_tools.c) become
 * el_api_request.msgs. Output formats (response_format, llama-server's
 * grammar and json_schema) become el_api_request.grammar, compiled here: an
 * invalid one is a 400 naming the field and the place; with tools and a
 * tool_choice other than "none" they are a 400. /v1/completions without
 * max_tokens generates 16 tokens (OpenAI's default); chat leaves it unset
 * (the server fills the context).
 */
#include "server/api_internal.h"
#include "structured/toolformat.h"

#include <stdlib.h>
#include <string.h>

enum {
    F_MODEL, F_MESSAGES, F_PROMPT, F_MAX_TOKENS, F_MAX_COMPLETION_TOKENS, F_TEMPERATURE, F_TOP_P,
    F_PRESENCE, F_FREQUENCY, F_SEED, F_STOP, F_STREAM, F_STREAM_OPTIONS, F_N, F_USER,
    F_LOGPROBS, F_TOP_LOGPROBS, F_ECHO, F_BEST_OF, F_SUFFIX, F_LOGIT_BIAS, F_CACHE_PROMPT, F_RESPONSE_FORMAT, F_GRAMMAR, F_JSON_SCHEMA,
    F_TOOLS, F_FUNCTIONS, F_TOOL_CHOICE, F_FUNCTION_CALL, F_PARALLEL_TOOL_CALLS, F_CHAT_TEMPLATE_KWARGS, F_REASONING_FORMAT,
    F_VERBOSE, F_TIMINGS_PER_TOKEN, F_ADD_GENERATION_PROMPT, F_CONTINUE_FINAL, F_COUNT
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
    [F_LOGPROBS] = {"logprobs", K_CHAT | K_COMP},
    [F_TOP_LOGPROBS] = {"top_logprobs", K_CHAT},
    [F_ECHO] = {"echo", K_COMP},
    [F_BEST_OF] = {"best_of", K_COMP},
    [F_SUFFIX] = {"suffix", K_COMP},
    [F_LOGIT_BIAS] = {"logit_bias", K_CHAT | K_COMP},
    [F_CACHE_PROMPT] = {"cache_prompt", K_CHAT | K_COMP}, /* llama-server's, default true */
    [F_RESPONSE_FORMAT] = {"response_format", K_CHAT | K_COMP},
    [F_GRAMMAR] = {"grammar", K_CHAT | K_COMP},         /* llama-server's extensions */
    [F_JSON_SCHEMA] = {"json_schema", K_CHAT | K_COMP},
    [F_TOOLS] = {"tools", K_CHAT | K_COMP}, /* completions: a 400 (chat only) */
    [F_FUNCTIONS] = {"functions", K_CHAT | K_COMP},
    [F_TOOL_CHOICE] = {"tool_choice", K_CHAT | K_COMP},
    [F_FUNCTION_CALL] = {"function_call", K_CHAT | K_COMP},
    [F_PARALLEL_TOOL_CALLS] = {"parallel_tool_calls", K_CHAT | K_COMP},
    [F_CHAT_TEMPLATE_KWARGS] = {"chat_template_kwargs", K_CHAT}, /* llama-server's: variables for the Jinja template */
    [F_REASONING_FORMAT] = {"reasoning_format", K_CHAT}, /* llama-server's: none | deepseek | auto */
    [F_VERBOSE] = {"verbose", K_CHAT | K_COMP},           /* llama-server's: "__verbose" in the reply */
    [F_TIMINGS_PER_TOKEN] = {"timings_per_token", K_CHAT | K_COMP}, /* llama-server's: "timings" per chunk */
    [F_ADD_GENERATION_PROMPT] = {"add_generation_prompt", K_CHAT}, /* llama-server's / vLLM's */
    [F_CONTINUE_FINAL] = {"continue_final_message", K_CHAT},       /* vLLM's name for the prefill */
};

static int parse_response_format(const cJSON *it, el_api_request *out, el_api_error *err) {
    if (!cJSON_IsObject(it)) return api_type_error(err, "response_format", "an object", it);
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(it, "type");
    if (!cJSON_IsString(type)) {
        BAD(err, "response_format", "invalid_value", "response_format.type: expected \"text\", \"json_object\" or \"json_schema\"");
        return -1;
    }
    if (!strcmp(type->valuestring, "text")) return 0;
    if (!strcmp(type->valuestring, "json_object")) {
        const cJSON *sc = cJSON_GetObjectItemCaseSensitive(it, "schema");
        return api_set_schema_grammar(sc && !cJSON_IsNull(sc) ? sc : NULL, true, "response_format", out, err);
    }
    if (!strcmp(type->valuestring, "json_schema")) {
        const cJSON *js = cJSON_GetObjectItemCaseSensitive(it, "json_schema");
        if (!cJSON_IsObject(js)) {
            BAD(err, "response_format", "invalid_value", "response_format.json_schema: expected an object");
            return -1;
        }
        const cJSON *sc = cJSON_GetObjectItemCaseSensitive(js, "schema");
        return api_set_schema_grammar(sc && !cJSON_IsNull(sc) ? sc : NULL, false, "response_format", out, err);
    }
    BAD(err, "response_format", "invalid_value", "response_format.type '%.40s' is not supported (text, json_object, json_schema)",
        type->valuestring);
    return -1;
}

static const char *const g_roles[] = {"system", "user", "assistant", "tool", "function"};

static int parse_message(const cJSON *m, int i, el_chat_msg *dst, el_api_error *err) {
    char q[52];
    if (!cJSON_IsObject(m)) {
        BAD(err, "messages", "invalid_type", "messages[%d]: expected an object, got %s", i, api_jtype(m));
        return -1;
    }
    const cJSON *role, *content;
    if (api_get_unique(m, "role", "messages", &role, err) || api_get_unique(m, "content", "messages", &content, err))
        return -1;
    if (!role) {
        BAD(err, "messages", "missing_required_parameter", "messages[%d].role: missing", i);
        return -1;
    }
    if (!cJSON_IsString(role)) {
        BAD(err, "messages", "invalid_type", "messages[%d].role: expected a string, got %s", i, api_jtype(role));
        return -1;
    }
    const char *rname = NULL;
    for (size_t k = 0; k < sizeof g_roles / sizeof *g_roles; k++)
        if (!strcmp(role->valuestring, g_roles[k])) rname = g_roles[k];
    if (!rname) {
        BAD(err, "messages", "invalid_value", "messages[%d].role: unknown role '%s'", i,
            api_quote(role->valuestring, q, sizeof q));
        return -1;
    }
    if (!strcmp(rname, "function")) rname = "tool"; /* legacy function result */
    if (!strcmp(rname, "assistant")) {
        if (api_parse_msg_calls(m, i, dst, err)) return -1;
        if (dst->n_tool_calls > 0 && (!content || cJSON_IsNull(content))) content = NULL; /* calls only */
    }
    if (!strcmp(rname, "tool")) {
        const cJSON *id;
        if (api_get_unique(m, "tool_call_id", "messages", &id, err)) return -1;
        if (id && !cJSON_IsNull(id)) {
            if (!cJSON_IsString(id)) {
                BAD(err, "messages", "invalid_type", "messages[%d].tool_call_id: expected a string, got %s", i,
                    api_jtype(id));
                return -1;
            }
            if (!(dst->tool_call_id = api_dupstr(id->valuestring, err))) return -1;
        }
    }
    if (!content && dst->n_tool_calls == 0) {
        BAD(err, "messages", "missing_required_parameter", "messages[%d].content: missing", i);
        return -1;
    }
    char *text;
    if (!content) {
        if (!(text = api_dupstr("", err))) return -1;
    } else if (cJSON_IsString(content)) {
        if (!(text = api_dupstr(content->valuestring, err))) return -1;
    } else if (cJSON_IsArray(content)) {
        /* array of {"type":"text","text":...} parts: concatenated */
        size_t total = 0;
        int j = 0;
        const cJSON *part;
        cJSON_ArrayForEach(part, content) {
            const cJSON *type, *t;
            if (!cJSON_IsObject(part)) {
                BAD(err, "messages", "invalid_type", "messages[%d].content[%d]: expected an object, got %s", i, j,
                    api_jtype(part));
                return -1;
            }
            if (api_get_unique(part, "type", "messages", &type, err) || api_get_unique(part, "text", "messages", &t, err))
                return -1;
            if (!cJSON_IsString(type)) {
                BAD(err, "messages", type ? "invalid_type" : "missing_required_parameter",
                    "messages[%d].content[%d].type: expected a string, got %s", i, j, type ? api_jtype(type) : "nothing");
                return -1;
            }
            if (strcmp(type->valuestring, "text")) {
                BAD(err, "messages", "invalid_value", "messages[%d].content[%d]: unsupported content part type '%s'",
                    i, j, api_quote(type->valuestring, q, sizeof q));
                return -1;
            }
            if (!cJSON_IsString(t)) {
                BAD(err, "messages", t ? "invalid_type" : "missing_required_parameter",
                    "messages[%d].content[%d].text: expected a string, got %s", i, j, t ? api_jtype(t) : "nothing");
                return -1;
            }
            total += strlen(t->valuestring);
            j++;
        }
        if (!(text = malloc(total + 1))) return api_oom(err);
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
            "messages[%d].content: expected a string or an array of text parts, got %s", i, api_jtype(content));
        return -1;
    }
    char *r = api_dupstr(rname, err);
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
    if (!cJSON_IsArray(it)) return api_type_error(err, "messages", "an array", it);
    int n = cJSON_GetArraySize(it);
    if (n <= 0) {
        BAD(err, "messages", "invalid_value", "'messages' must contain at least one message");
        return -1;
    }
    out->msgs = calloc((size_t)n, sizeof *out->msgs);
    if (!out->msgs) return api_oom(err);
    out->n_msgs = n; /* entries stay NULL until filled: free() copes */
    int i = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, it) {
        if (parse_message(m, i, &out->msgs[i], err)) return -1;
        i++;
    }
    /* as llama-server: one trailing assistant message is a prefill to continue, two are an error */
    if (n >= 2 && out->msgs[n - 1].role && out->msgs[n - 2].role && !strcmp(out->msgs[n - 1].role, "assistant") &&
        !strcmp(out->msgs[n - 2].role, "assistant")) {
        BAD(err, "messages", "invalid_value", "messages[%d]: two or more assistant messages cannot end the list", n - 1);
        return -1;
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
    if (!cJSON_IsString(it)) return api_type_error(err, "prompt", "a string", it);
    return (out->prompt = api_dupstr(it->valuestring, err)) ? 0 : -1;
}

static int parse_tool_fields(el_api_kind kind, const cJSON *const *f, el_api_request *out, el_api_error *err) {
    if (kind != EL_API_CHAT) { /* a field that asks for a call is a 400; [], "none", "auto" ask for nothing */
        static const int ids[] = {F_TOOLS, F_FUNCTIONS, F_TOOL_CHOICE, F_FUNCTION_CALL};
        for (size_t i = 0; i < sizeof ids / sizeof *ids; i++) {
            const cJSON *it = f[ids[i]];
            if (!it || (cJSON_IsArray(it) && cJSON_GetArraySize(it) == 0) ||
                (cJSON_IsString(it) && (!strcmp(it->valuestring, "none") || !strcmp(it->valuestring, "auto"))))
                continue;
            BAD(err, g_fields[ids[i]].name, "unsupported_value", "'%s' is for /v1/chat/completions only",
                g_fields[ids[i]].name);
            return -1;
        }
        return 0;
    }
    if (f[F_TOOLS] && f[F_FUNCTIONS]) {
        BAD(err, "functions", "invalid_value", "give 'tools' or the legacy 'functions', not both");
        return -1;
    }
    if (f[F_TOOL_CHOICE] && f[F_FUNCTION_CALL]) {
        BAD(err, "function_call", "invalid_value", "give 'tool_choice' or the legacy 'function_call', not both");
        return -1;
    }
    if (f[F_TOOLS] && api_parse_tools(f[F_TOOLS], false, out, err)) return -1;
    if (f[F_FUNCTIONS] && api_parse_tools(f[F_FUNCTIONS], true, out, err)) return -1;
    out->tool_choice = out->n_tools > 0 ? EL_TOOL_CHOICE_AUTO : EL_TOOL_CHOICE_NONE;
    if (f[F_TOOL_CHOICE] && api_parse_tool_choice(f[F_TOOL_CHOICE], false, out, err)) return -1;
    if (f[F_FUNCTION_CALL] && api_parse_tool_choice(f[F_FUNCTION_CALL], true, out, err)) return -1;
    if (out->n_tools == 0) out->tool_choice = EL_TOOL_CHOICE_NONE;
    if (f[F_PARALLEL_TOOL_CALLS]) {
        if (!cJSON_IsBool(f[F_PARALLEL_TOOL_CALLS]))
            return api_type_error(err, "parallel_tool_calls", "a boolean", f[F_PARALLEL_TOOL_CALLS]);
        out->parallel_tool_calls = cJSON_IsTrue(f[F_PARALLEL_TOOL_CALLS]);
    }
    if (f[F_FUNCTIONS] && !f[F_PARALLEL_TOOL_CALLS]) out->parallel_tool_calls = false; /* one function_call */
    if (out->tool_choice != EL_TOOL_CHOICE_NONE && out->grammar) {
        BAD(err, f[F_RESPONSE_FORMAT] ? "response_format" : f[F_JSON_SCHEMA] ? "json_schema" : "grammar",
            "invalid_value", "an output format cannot be combined with tools (unless tool_choice is \"none\")");
        return -1;
    }
    return 0;
}

/* add_generation_prompt and continue_final_message (llama-server's and vLLM's) into out; both true is
 * the 400 llama-server gives. (The chat route refuses what it does not do: see their fields.) */
static int parse_continuation(const cJSON *agp, const cJSON *cont, el_api_request *out, el_api_error *err) {
    bool g = true, has_g = false, c = false;
    if (api_opt_bool(agp, "add_generation_prompt", &g, &has_g, err)) return -1;
    if (cont && !cJSON_IsNull(cont)) {
        if (cJSON_IsBool(cont)) c = cJSON_IsTrue(cont);
        else if (cJSON_IsString(cont)) c = true; /* "content" / "reasoning_content" */
        else return api_type_error(err, "continue_final_message", "a boolean or a string", cont);
    }
    if (c && has_g && g) {
        BAD(err, "continue_final_message", "invalid_value",
            "cannot set both add_generation_prompt and continue_final_message to true");
        return -1;
    }
    out->no_generation_prompt = has_g && !g;
    out->continue_final = c;
    return 0;
}

static int parse_fields(const cJSON *root, el_api_request *out, el_api_error *err) {
    const el_api_kind kind = out->kind;
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
    if (api_opt_str(f[F_MODEL], "model", &out->model, err) ||
        api_opt_int(f[F_MAX_TOKENS], "max_tokens", 1, 1 << 20, &out->max_tokens, &out->has_max_tokens, err) ||
        /* the newer name wins when both are given */
        api_opt_int(f[F_MAX_COMPLETION_TOKENS], "max_completion_tokens", 1, 1 << 20, &out->max_tokens,
                    &out->has_max_tokens, err) ||
        api_opt_num(f[F_TEMPERATURE], "temperature", 0, false, 2, false, &out->temperature, &out->has_temperature, err) ||
        api_opt_num(f[F_TOP_P], "top_p", 0, true, 1, false, &out->top_p, NULL, err) ||
        api_penalties(f[F_PRESENCE], f[F_FREQUENCY], out, err) ||
        api_opt_bool(f[F_CACHE_PROMPT], "cache_prompt", &out->cache_prompt, &out->has_cache_prompt, err))
        return -1;
    if ((it = f[F_SEED])) { /* int64 (stored two's complement) or uint64 */
        if (api_get_seed(it, -9223372036854775808.0, &v, err)) return -1;
        out->has_seed = true;
        out->seed = v < 0 ? (uint64_t)(int64_t)v : (uint64_t)v;
    }
    if ((it = f[F_STOP]) && api_parse_stop(it, out, err)) return -1;
    if ((it = f[F_CHAT_TEMPLATE_KWARGS])) {
        if (!cJSON_IsObject(it)) return api_type_error(err, "chat_template_kwargs", "an object", it);
        char *t = cJSON_PrintUnformatted(it);
        out->chat_template_kwargs = t ? strdup(t) : NULL;
        cJSON_free(t);
        if (!out->chat_template_kwargs) {
            BAD(err, "chat_template_kwargs", "invalid_value", "out of memory");
            return -1;
        }
    }
    if ((it = f[F_REASONING_FORMAT])) {
        if (!cJSON_IsString(it)) return api_type_error(err, "reasoning_format", "a string", it);
        char q[52];
        if ((out->reasoning_format = el_reasoning_format_parse(it->valuestring)) < 0) {
            BAD(err, "reasoning_format", "invalid_value", "reasoning_format: expected \"none\", \"deepseek\" or \"auto\", got '%s'",
                api_quote(it->valuestring, q, sizeof q));
            return -1;
        }
    }
    if (api_opt_bool(f[F_STREAM], "stream", &out->stream, NULL, err) ||
        api_opt_bool(f[F_VERBOSE], "verbose", &out->verbose, NULL, err) ||
        api_opt_bool(f[F_TIMINGS_PER_TOKEN], "timings_per_token", &out->timings_per_token, NULL, err))
        return -1;
    if (kind == EL_API_CHAT && parse_continuation(f[F_ADD_GENERATION_PROMPT], f[F_CONTINUE_FINAL], out, err)) return -1;
    if ((it = f[F_STREAM_OPTIONS])) {
        if (!cJSON_IsObject(it)) return api_type_error(err, "stream_options", "an object", it);
        const cJSON *iu;
        if (api_get_unique(it, "include_usage", "stream_options", &iu, err)) return -1;
        if (iu && !cJSON_IsNull(iu)) {
            if (!cJSON_IsBool(iu)) return api_type_error(err, "stream_options.include_usage", "a boolean", iu);
            out->include_usage = cJSON_IsTrue(iu);
        }
    }
    if ((it = f[F_N])) {
        if (api_get_int(it, "n", -2147483648.0, 2147483647.0, &v, err)) return -1;
        if (v != 1) {
            BAD(err, "n", "invalid_value", "n must be 1");
            return -1;
        }
    }
    if ((it = f[F_USER]) && !cJSON_IsString(it)) return api_type_error(err, "user", "a string", it);
    if (kind == EL_API_CHAT ? api_opt_bool(f[F_LOGPROBS], "logprobs", &out->logprobs, NULL, err)
                            : api_opt_int(f[F_LOGPROBS], "logprobs", 0, 5, &out->top_logprobs, &out->logprobs, err))
        return -1;
    if ((it = f[F_TOP_LOGPROBS])) {
        if (api_get_int(it, "top_logprobs", 0, EL_API_MAX_TOP_LOGPROBS, &v, err)) return -1;
        if (!out->logprobs) {
            BAD(err, "top_logprobs", "invalid_value", "'top_logprobs' needs 'logprobs': true");
            return -1;
        }
        out->top_logprobs = (int)v;
    }
    if ((it = f[F_ECHO])) {
        if (api_opt_bool(it, "echo", &out->echo, NULL, err)) return -1;
        if (out->echo && out->logprobs) {
            BAD(err, "echo", "unsupported_value", "'echo' together with 'logprobs' is not supported "
                "(the prompt's log-probabilities are not computed)");
            return -1;
        }
    }
    if ((it = f[F_BEST_OF])) {
        if (api_get_int(it, "best_of", -2147483648.0, 2147483647.0, &v, err)) return -1;
        if (v != 1) {
            BAD(err, "best_of", "unsupported_value", "best_of must be 1 (one completion per request)");
            return -1;
        }
    }
    if ((it = f[F_SUFFIX])) {
        if (!cJSON_IsString(it)) return api_type_error(err, "suffix", "a string", it);
        if (it->valuestring[0]) {
            BAD(err, "suffix", "unsupported_value", "'suffix' (insertion) is not supported");
            return -1;
        }
    }
    if ((it = f[F_LOGIT_BIAS]) && api_parse_logit_bias(it, out, err)) return -1;
    if (!!f[F_RESPONSE_FORMAT] + !!f[F_JSON_SCHEMA] + !!(f[F_GRAMMAR] && !(cJSON_IsString(f[F_GRAMMAR]) && !f[F_GRAMMAR]->valuestring[0])) > 1) {
        BAD(err, f[F_RESPONSE_FORMAT] ? "response_format" : "grammar", "invalid_value",
            "give only one of 'response_format', 'json_schema' and 'grammar'");
        return -1;
    }
    if ((it = f[F_RESPONSE_FORMAT]) && parse_response_format(it, out, err)) return -1;
    if ((it = f[F_JSON_SCHEMA]) && api_set_schema_grammar(it, false, "json_schema", out, err)) return -1;
    if ((it = f[F_GRAMMAR]) && api_parse_grammar_field(it, out, err)) return -1;
    if (parse_tool_fields(kind, f, out, err)) return -1;
    if (kind == EL_API_COMPLETION && out->max_tokens < 0) out->max_tokens = 16; /* OpenAI's default */
    out->local_unsupported = NULL; /* every OpenAI field edgellm knows is honoured locally now */
    return 0;
}

int el_api_parse(el_api_kind kind, const char *body, size_t len, el_api_request *out, el_api_error *err) {
    if (!out) return api_no_output(err, "el_api_parse");
    api_request_init(out, kind);
    if (kind != EL_API_CHAT && kind != EL_API_COMPLETION) {
        el_api_set_error(err, 500, "server_error", NULL, NULL, "el_api_parse: bad kind");
        return -1;
    }
    return api_parse_request(body, len, parse_fields, out, err);
}
