/*
 * chat_jinja.h — a model's own chat template (Jinja, tokenizer.chat_template
 * or a --chat-template-file) as the chat renderer, in place of the built-in
 * families of runtime/chat.h.
 *
 * Contract:
 *   - el_chat_jinja_new compiles the template text (NULL with EL_ERR_TEMPLATE
 *     "TemplateSyntaxError: line L, column C: ..." when it does not parse);
 *     bos/eos are the texts of the vocab's BOS/EOS tokens (bos_token,
 *     eos_token; "" when absent).
 *   - el_chat_jinja_render renders the messages the way transformers'
 *     apply_chat_template would (runtime/jinja.h): messages as
 *     {"role", "content" ("" when NULL), "tool_calls": [{"id", "type":
 *     "function", "function": {"name", "arguments": the parsed JSON object
 *     (the text itself when it is not JSON)}}], "tool_call_id"}, tools as the
 *     parsed el_chat_tool.json objects, add_generation_prompt, bos_token,
 *     eos_token, today's local date as llama.cpp passes it (date_string
 *     "06 Dec 2026" for Llama 3.x, datetime "Dec 06 2026 10:00:00 GMT" for
 *     firefunction v2), then the members of kwargs (a JSON object: llama-server's
 *     chat_template_kwargs, e.g. {"enable_thinking": false}), and
 *     strftime_now on the current local date.
 *   - The result is an el_chat_text: every string of a message or tool
 *     definition is message content, everything else template text, so
 *     el_chat_tokenize_text parses special tokens only in the template's own
 *     text (content cannot forge a turn). A bos_token the template writes
 *     first is dropped (the tokenizer adds BOS), as runtime/chat.c does.
 *   - Errors (the template raised, a bound was hit, bad kwargs) are
 *     EL_ERR_TEMPLATE with the engine's message; -2/EL_ERR_NOMEM when out of
 *     memory.
 */
#ifndef EL_STRUCTURED_CHAT_JINJA_H
#define EL_STRUCTURED_CHAT_JINJA_H
#include <stdbool.h>
#include <stdint.h>

#include "edgellm.h"
#include "runtime/chat.h"
#include "structured/toolformat.h"

typedef struct el_chat_jinja el_chat_jinja;

el_chat_jinja *el_chat_jinja_new(const char *tmpl, size_t len, const char *bos, const char *eos, el_error *err);
/* The template of model m (tokenizer.chat_template) with its vocab's BOS/EOS
 * texts; NULL with err (EL_ERR_MISSING when the model has none). */
el_chat_jinja *el_chat_jinja_for_model(const struct el_model *m, el_error *err);
/* A template file with m's BOS/EOS texts (m may be NULL: "" for both). */
el_chat_jinja *el_chat_jinja_from_file(const char *path, const struct el_model *m, el_error *err);
void el_chat_jinja_free(el_chat_jinja *cj);
/* The tool-call format the template's text writes (structured/toolformat.h el_tool_format_detect,
 * decided once when it is compiled); EL_TF_NONE for NULL or an unknown one. */
el_tool_format el_chat_jinja_tool_format(const el_chat_jinja *cj);

/* 0 with *out filled (el_chat_text_free), else an el_status with err set. */
int el_chat_jinja_render(const el_chat_jinja *cj, const el_chat_msg *msgs, int n_msgs, const el_chat_tool *tools,
                         int n_tools, bool add_generation_prompt, const char *kwargs_json, el_chat_text *out,
                         el_error *err);
/* el_chat_jinja_render + el_chat_tokenize_text into a malloc'd *out: the
 * count, or -1 (err set: the template failed), -2 out of memory, -3 text
 * the tokenizer refuses (the conventions of el_chat_tokenize). */
int el_chat_jinja_tokenize(const struct el_model *m, const el_chat_jinja *cj, const el_chat_msg *msgs, int n_msgs,
                           const el_chat_tool *tools, int n_tools, bool add_generation_prompt, const char *kwargs_json,
                           int flags, int32_t **out, el_error *err);

#endif
