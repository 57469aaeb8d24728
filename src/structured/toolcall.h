/*
 * toolcall.h — tool (function) calls on the chat surface (layer L6): the
 * grammar that constrains a call, and parsing calls back out of generated
 * text, for each chat family with a tool-call convention (runtime/chat.h
 * el_chat_family_has_tools; the renderings are in runtime/chat.c).
 *
 * Wire shapes, one per family (what the prompt asks for and what is parsed):
 *   chatml  <tool_call>\n{"name": N, "arguments": {...}}\n</tool_call>  (Qwen2.5;
 *           several calls: blocks separated by "\n"); a reply with no such
 *           block that is, after any text, one bare {"name": N, "arguments":
 *           {...}} object is a call too (Qwen 2.5 often drops the tags)
 *   llama3  {"name": N, "parameters": {...}}  (the whole reply; one call —
 *           Llama 3.x's template allows one per message; "arguments" is
 *           accepted as the key when parsing too)
 *   gemma   ```tool_code\n{"name": N, "arguments": {...}}\n```  (edgellm's
 *           convention; several calls: blocks separated by "\n")
 *
 * Generated text is outside bytes: el_toolcall_parse never trusts it (fuzzed
 * by fuzz/fuzz_toolcall.c). A call counts only when its JSON parses, its name
 * is one of the offered tools and its arguments are a JSON object; anything
 * else stays content. Uses cJSON; no I/O, no global state.
 */
#ifndef EL_SERVICE_TOOLCALL_H
#define EL_SERVICE_TOOLCALL_H
#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "edgellm.h"
#include "runtime/chat.h"

#define EL_TOOL_MAX_TOOLS 128          /* tools (or functions) in one request */
#define EL_TOOL_MAX_DEF_BYTES (64u << 10) /* one tool definition, serialised */
#define EL_TOOL_MAX_NAME 64            /* function names: [A-Za-z0-9_-]{1,64} (OpenAI's rule) */
#define EL_TOOL_MAX_CALLS 128          /* tool calls in one message (history or reply) */

typedef enum {
    EL_TOOL_CHOICE_AUTO = 0, /* free text or calls (the default with tools) */
    EL_TOOL_CHOICE_NONE,     /* tools are rendered, never called */
    EL_TOOL_CHOICE_REQUIRED, /* at least one call (grammar-constrained) */
    EL_TOOL_CHOICE_NAMED,    /* a call of that one function (grammar-constrained) */
} el_tool_choice;

/* One offered function. */
typedef struct el_tool_def {
    char *name;
    char *parameters; /* its JSON Schema as compact JSON text ({"type":"object","properties":{}} if none given) */
} el_tool_def;

/* One call parsed out of generated text. */
typedef struct el_tool_call_out {
    char *name;
    char *arguments; /* compact JSON text of the arguments object */
} el_tool_call_out;

typedef struct el_toolcall_result {
    el_tool_call_out *calls;
    int n_calls;
    char *content; /* the text outside the calls, trimmed (pieces joined by "\n"); NULL when nothing is
                      left; NUL-terminated, but may hold NUL bytes itself: content_len is its length */
    size_t content_len;
} el_toolcall_result;

/* Python's json.dumps(v) (indent < 0: separators ", " and ": ") or
 * json.dumps(v, indent=indent) — what Jinja's tojson writes in HF's
 * apply_chat_template — with ensure_ascii=False. Integral numbers print as
 * integers (cJSON does not keep 1.0 apart from 1). malloc'd, NULL on OOM. */
char *el_tool_pydumps(const cJSON *v, int indent);

/* GBNF for the reply of tool_choice required / named in family f: one call
 * (or, when parallel and the family allows several, one or more) of
 * tools[only] (only >= 0) or of any of tools[0..n), each call's arguments
 * following that function's parameters schema (one JSON Schema, composed per
 * tool, compiled by structured/json_schema.c; $ref inside a tool's parameters is
 * rebased onto it). NULL with err (EL_ERR_GRAMMAR naming the tool, or
 * EL_ERR_NOMEM, EL_ERR_INVALID_ARG for a family without tool calls). */
char *el_toolcall_grammar(el_chat_family f, const el_tool_def *tools, int n, int only, bool parallel, el_error *err);

/* The grammar of tool_choice "auto": el_toolcall_grammar's for any tool,
 * plus (chatml) one bare {"name": N, "arguments": {...}} object, as Qwen 2.5
 * often answers without its tags; *triggers gets the family's static,
 * NULL-terminated trigger list for a lazy grammar (el_generate_params
 * grammar_triggers): chatml "<tool_call>" anywhere, "{\"name\"" and
 * "{ \"name\"" at the reply's start ('^': anchored); llama3 the two JSON
 * openers, anchored; gemma "```tool_code". Errors as el_toolcall_grammar. */
char *el_toolcall_grammar_lazy(el_chat_family f, const el_tool_def *tools, int n, bool parallel,
                               const char *const **triggers, el_error *err);

/* The calls in text[0..len) (any bytes) written the family's way, naming one
 * of tools[0..n). 0, or -1 out of memory (out then empty). */
int el_toolcall_parse(el_chat_family f, const char *text, size_t len, const el_tool_def *tools, int n,
                      el_toolcall_result *out);
void el_toolcall_result_free(el_toolcall_result *r);

#endif
