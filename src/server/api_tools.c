/*
 * api_tools.c — tool calls in a chat request: "tools" (or the legacy
 * "functions"), "tool_choice" (or "function_call") and the tool calls of an
 * assistant message in the history.
 *
 * api.h (el_api_request.tools) states the limits: at most EL_TOOL_MAX_TOOLS
 * tools, names [A-Za-z0-9_-]{1,64} and unique, each definition at most
 * EL_TOOL_MAX_DEF_BYTES serialised the way the templates print it
 * (el_tool_pydumps), each parameters schema compiled here so a bad one is a
 * 400 naming the tool and the place. An assistant's calls become
 * el_chat_msg.tool_calls with their arguments re-serialised as the templates
 * print them (a string that is not JSON stays a JSON string). Which fields a
 * route accepts and how they combine (api_openai.c parse_tool_fields) is not
 * here.
 */
#include "server/api_internal.h"

#include <stdlib.h>
#include <string.h>

#include "runtime/grammar.h"
#include "structured/json_schema.h"

/* OpenAI's function-name rule. */
static bool tool_name_ok(const char *s) {
    size_t n = strlen(s);
    if (n < 1 || n > EL_TOOL_MAX_NAME) return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
              s[i] == '_' || s[i] == '-'))
            return false;
    return true;
}

void api_free_calls(el_chat_msg *m) {
    el_chat_tool_call *c = (el_chat_tool_call *)m->tool_calls;
    for (int k = 0; c && k < m->n_tool_calls; k++) {
        free((char *)c[k].id);
        free((char *)c[k].name);
        free((char *)c[k].arguments);
    }
    free(c);
    m->tool_calls = NULL;
    m->n_tool_calls = 0;
}

/* One call of an assistant message: {id, type: "function", function: {name, arguments}} (legacy:
 * fn given directly, id NULL). Arguments (a JSON string) become the template's text. */
static int parse_msg_call(const cJSON *call, const cJSON *fn, int i, int k, el_chat_tool_call *dst,
                          el_api_error *err) {
    if (call) {
        const cJSON *type, *id;
        if (!cJSON_IsObject(call)) {
            BAD(err, "messages", "invalid_type", "messages[%d].tool_calls[%d]: expected an object, got %s", i, k,
                api_jtype(call));
            return -1;
        }
        if (api_get_unique(call, "type", "messages", &type, err) || api_get_unique(call, "id", "messages", &id, err) ||
            api_get_unique(call, "function", "messages", &fn, err))
            return -1;
        if (type && !cJSON_IsNull(type) && !(cJSON_IsString(type) && !strcmp(type->valuestring, "function"))) {
            BAD(err, "messages", "invalid_value", "messages[%d].tool_calls[%d].type: expected \"function\"", i, k);
            return -1;
        }
        if (id && !cJSON_IsNull(id)) {
            if (!cJSON_IsString(id)) {
                BAD(err, "messages", "invalid_type", "messages[%d].tool_calls[%d].id: expected a string, got %s", i,
                    k, api_jtype(id));
                return -1;
            }
            if (!(dst->id = api_dupstr(id->valuestring, err))) return -1;
        }
    }
    const cJSON *name, *args;
    if (!cJSON_IsObject(fn)) {
        BAD(err, "messages", fn ? "invalid_type" : "missing_required_parameter",
            "messages[%d].tool_calls[%d].function: expected an object, got %s", i, k, fn ? api_jtype(fn) : "nothing");
        return -1;
    }
    if (api_get_unique(fn, "name", "messages", &name, err) || api_get_unique(fn, "arguments", "messages", &args, err))
        return -1;
    if (!cJSON_IsString(name) || !tool_name_ok(name->valuestring)) {
        BAD(err, "messages", "invalid_value",
            "messages[%d].tool_calls[%d].function.name: expected a name of 1..%d characters [A-Za-z0-9_-]", i, k,
            EL_TOOL_MAX_NAME);
        return -1;
    }
    if (!(dst->name = api_dupstr(name->valuestring, err))) return -1;
    char *text;
    if (!args || cJSON_IsNull(args)) {
        text = strdup("{}");
    } else if (cJSON_IsString(args)) {
        cJSON *pj = cJSON_Parse(args->valuestring);
        text = el_tool_pydumps(pj ? pj : args, -1);
        cJSON_Delete(pj);
    } else if (cJSON_IsObject(args)) { /* lenient: an object instead of its JSON text */
        text = el_tool_pydumps(args, -1);
    } else {
        BAD(err, "messages", "invalid_type",
            "messages[%d].tool_calls[%d].function.arguments: expected a JSON string, got %s", i, k, api_jtype(args));
        return -1;
    }
    if (!text) return api_oom(err);
    dst->arguments = text;
    return 0;
}

int api_parse_msg_calls(const cJSON *m, int i, el_chat_msg *dst, el_api_error *err) {
    const cJSON *tc, *fc;
    if (api_get_unique(m, "tool_calls", "messages", &tc, err) || api_get_unique(m, "function_call", "messages", &fc, err))
        return -1;
    if (tc && cJSON_IsNull(tc)) tc = NULL;
    if (fc && cJSON_IsNull(fc)) fc = NULL;
    if (!tc && !fc) return 0;
    if (tc && !cJSON_IsArray(tc)) {
        BAD(err, "messages", "invalid_type", "messages[%d].tool_calls: expected an array, got %s", i, api_jtype(tc));
        return -1;
    }
    int n = tc ? cJSON_GetArraySize(tc) : 0;
    if (fc) n++;
    if (n > EL_TOOL_MAX_CALLS) {
        BAD(err, "messages", "invalid_value", "messages[%d].tool_calls: at most %d calls (got %d)", i,
            EL_TOOL_MAX_CALLS, n);
        return -1;
    }
    if (n == 0) return 0;
    el_chat_tool_call *c = calloc((size_t)n, sizeof *c);
    if (!c) return api_oom(err);
    dst->tool_calls = c;
    dst->n_tool_calls = n; /* entries stay NULL until filled: api_free_calls copes */
    int k = 0;
    const cJSON *call;
    if (tc)
        cJSON_ArrayForEach(call, tc) {
            if (parse_msg_call(call, NULL, i, k, &c[k], err)) return -1;
            k++;
        }
    if (fc && parse_msg_call(NULL, fc, i, k, &c[k], err)) return -1;
    return 0;
}

/* "tools" (legacy: "functions", whose entries are the function objects themselves). */
int api_parse_tools(const cJSON *it, bool legacy, el_api_request *out, el_api_error *err) {
    const char *param = legacy ? "functions" : "tools";
    if (!cJSON_IsArray(it)) return api_type_error(err, param, "an array", it);
    int n = cJSON_GetArraySize(it);
    if (n > EL_TOOL_MAX_TOOLS) {
        BAD(err, param, "invalid_value", "at most %d tools are allowed (got %d)", EL_TOOL_MAX_TOOLS, n);
        return -1;
    }
    if (n == 0) return 0;
    out->tools = calloc((size_t)n, sizeof *out->tools);
    out->chat_tools = calloc((size_t)n, sizeof *out->chat_tools);
    if (!out->tools || !out->chat_tools) return api_oom(err);
    int i = 0;
    const cJSON *t;
    char q[52];
    cJSON_ArrayForEach(t, it) {
        out->n_tools = i + 1; /* entries stay NULL until filled: free copes */
        const cJSON *fn = t, *type, *name, *desc, *params, *strict;
        if (!cJSON_IsObject(t)) {
            BAD(err, param, "invalid_type", "%s[%d]: expected an object, got %s", param, i, api_jtype(t));
            return -1;
        }
        if (!legacy) {
            if (api_get_unique(t, "type", param, &type, err) || api_get_unique(t, "function", param, &fn, err)) return -1;
            if (!cJSON_IsString(type) || strcmp(type->valuestring, "function")) {
                BAD(err, param, "invalid_value", "tools[%d].type: expected \"function\"", i);
                return -1;
            }
            if (!cJSON_IsObject(fn)) {
                BAD(err, param, fn ? "invalid_type" : "missing_required_parameter",
                    "tools[%d].function: expected an object, got %s", i, fn ? api_jtype(fn) : "nothing");
                return -1;
            }
        }
        if (api_get_unique(fn, "name", param, &name, err) || api_get_unique(fn, "description", param, &desc, err) ||
            api_get_unique(fn, "parameters", param, &params, err) || api_get_unique(fn, "strict", param, &strict, err))
            return -1;
        const char *at = legacy ? "" : ".function";
        if (!cJSON_IsString(name) || !tool_name_ok(name->valuestring)) {
            BAD(err, param, "invalid_value", "%s[%d]%s.name: expected a name of 1..%d characters [A-Za-z0-9_-]",
                param, i, at, EL_TOOL_MAX_NAME);
            return -1;
        }
        for (int k = 0; k < i; k++)
            if (!strcmp(out->tools[k].name, name->valuestring)) {
                BAD(err, param, "invalid_value", "%s[%d]%s.name: '%s' is given twice (also %s[%d])", param, i, at,
                    api_quote(name->valuestring, q, sizeof q), param, k);
                return -1;
            }
        if (desc && !cJSON_IsNull(desc) && !cJSON_IsString(desc)) {
            BAD(err, param, "invalid_type", "%s[%d]%s.description: expected a string, got %s", param, i, at,
                api_jtype(desc));
            return -1;
        }
        if (strict && !cJSON_IsNull(strict) && !cJSON_IsBool(strict)) {
            BAD(err, param, "invalid_type", "%s[%d]%s.strict: expected a boolean, got %s", param, i, at,
                api_jtype(strict));
            return -1;
        }
        if (params && cJSON_IsNull(params)) params = NULL;
        if (params && !cJSON_IsObject(params)) {
            BAD(err, param, "invalid_type", "%s[%d]%s.parameters: expected a JSON Schema object, got %s", param, i,
                at, api_jtype(params));
            return -1;
        }
        if (!(out->tools[i].name = api_dupstr(name->valuestring, err))) return -1;
        out->tools[i].parameters = params ? cJSON_PrintUnformatted(params)
                                          : strdup("{\"type\":\"object\",\"properties\":{}}");
        if (!out->tools[i].parameters) return api_oom(err);
        /* the schema must compile (the same check as response_format's) */
        el_error e = {0};
        char *g = el_json_schema_text_to_gbnf(out->tools[i].parameters, strlen(out->tools[i].parameters), &e);
        el_grammar *cg = g ? el_grammar_parse(g, strlen(g), &e) : NULL;
        free(g);
        el_grammar_free(cg);
        if (!cg) {
            if (e.code == EL_ERR_NOMEM) return api_oom(err);
            BAD(err, param, "invalid_value", "%s[%d]%s.parameters: %s", param, i, at, e.msg);
            return -1;
        }
        /* the definition as the template prints it: the tool object as sent (legacy: wrapped) */
        cJSON *wrap = NULL;
        const cJSON *def = t;
        if (legacy) {
            wrap = cJSON_CreateObject();
            cJSON *dup = wrap ? cJSON_Duplicate(fn, true) : NULL;
            if (!dup || !cJSON_AddStringToObject(wrap, "type", "function")) { cJSON_Delete(dup); cJSON_Delete(wrap); return api_oom(err); }
            cJSON_AddItemToObject(wrap, "function", dup);
            def = wrap;
        }
        out->chat_tools[i].json = el_tool_pydumps(def, -1);
        out->chat_tools[i].json_indent4 = el_tool_pydumps(def, 4);
        cJSON_Delete(wrap);
        if (!out->chat_tools[i].json || !out->chat_tools[i].json_indent4) return api_oom(err);
        size_t sz = strlen(out->chat_tools[i].json_indent4);
        if (sz > EL_TOOL_MAX_DEF_BYTES) {
            BAD(err, param, "invalid_value", "%s[%d]: the definition is %zu bytes serialised (limit %u)", param, i,
                sz, EL_TOOL_MAX_DEF_BYTES);
            return -1;
        }
        i++;
    }
    return 0;
}

/* "tool_choice" (legacy "function_call": "none" | "auto" | {"name"}). */
int api_parse_tool_choice(const cJSON *it, bool legacy, el_api_request *out, el_api_error *err) {
    const char *param = legacy ? "function_call" : "tool_choice";
    char q[52];
    if (cJSON_IsString(it)) {
        const char *v = it->valuestring;
        if (!strcmp(v, "none")) out->tool_choice = EL_TOOL_CHOICE_NONE;
        else if (!strcmp(v, "auto")) out->tool_choice = EL_TOOL_CHOICE_AUTO;
        else if (!legacy && !strcmp(v, "required")) out->tool_choice = EL_TOOL_CHOICE_REQUIRED;
        else {
            BAD(err, param, "invalid_value", "%s: expected %s or an object naming a function, got '%s'", param,
                legacy ? "\"none\", \"auto\"" : "\"none\", \"auto\", \"required\"", api_quote(v, q, sizeof q));
            return -1;
        }
    } else if (cJSON_IsObject(it)) {
        const cJSON *fn = it, *type, *name;
        if (!legacy) {
            if (api_get_unique(it, "type", param, &type, err) || api_get_unique(it, "function", param, &fn, err)) return -1;
            if (!cJSON_IsString(type) || strcmp(type->valuestring, "function")) {
                BAD(err, param, "invalid_value", "tool_choice.type: expected \"function\"");
                return -1;
            }
            if (!cJSON_IsObject(fn)) {
                BAD(err, param, "invalid_type", "tool_choice.function: expected an object, got %s",
                    fn ? api_jtype(fn) : "nothing");
                return -1;
            }
        }
        if (api_get_unique(fn, "name", param, &name, err)) return -1;
        if (!cJSON_IsString(name)) {
            BAD(err, param, "invalid_type", "%s: the function's name: expected a string, got %s", param,
                name ? api_jtype(name) : "nothing");
            return -1;
        }
        int k = -1;
        for (int i = 0; i < out->n_tools; i++)
            if (!strcmp(out->tools[i].name, name->valuestring)) k = i;
        if (k < 0) {
            BAD(err, param, "invalid_value", "%s names the function '%s', which is not among the tools", param,
                api_quote(name->valuestring, q, sizeof q));
            return -1;
        }
        out->tool_choice = EL_TOOL_CHOICE_NAMED;
        out->tool_named = k;
    } else {
        return api_type_error(err, param, "a string or an object", it);
    }
    if (out->n_tools == 0 && out->tool_choice != EL_TOOL_CHOICE_NONE && out->tool_choice != EL_TOOL_CHOICE_AUTO) {
        BAD(err, param, "invalid_value", "%s asks for a tool call but no tools are given", param);
        return -1;
    }
    return 0;
}
