/*
 * chat.h — the built-in chat template families: edgellm recognises the
 * common template families from the text of tokenizer.chat_template and
 * formats messages the way that family's template would render them, and
 * tokenizes a chat so that only the template's own markers become special
 * tokens (message content is plain text). By default `chat` and `serve`
 * render with the model's own template instead (runtime/jinja.h through
 * structured/chat_jinja.h, into the same el_chat_text); a family is used
 * when the model has no template, it does not parse, or --chat-template
 * NAME asks for one, and it still parses tool calls.
 */
#ifndef EL_RUNTIME_CHAT_H
#define EL_RUNTIME_CHAT_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    EL_CHAT_UNKNOWN = 0,
    EL_CHAT_CHATML,   /* <|im_start|>role\n...<|im_end|>\n  (Qwen, SmolLM, ...) */
    EL_CHAT_LLAMA3,   /* <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|> */
    EL_CHAT_LLAMA2,   /* [INST] <<SYS>>\n...\n<</SYS>>\n\n ... [/INST] */
    EL_CHAT_MISTRAL,  /* [INST] ... [/INST] (system folded into first user turn) */
    EL_CHAT_GEMMA,    /* <start_of_turn>user\n...<end_of_turn>\n<start_of_turn>model\n */
    EL_CHAT_PHI3,     /* <|user|>\n...<|end|>\n<|assistant|>\n */
    EL_CHAT_COUNT
} el_chat_family;

/* One function call an assistant message made (OpenAI's message.tool_calls). */
typedef struct el_chat_tool_call {
    const char *id;        /* the call's id (not rendered by these templates) */
    const char *name;      /* the function's name */
    const char *arguments; /* the arguments as the template prints them: JSON text in Python's
                              json.dumps form (what Jinja's tojson writes for the arguments object) */
} el_chat_tool_call;

typedef struct el_chat_msg {
    const char *role;    /* "system", "user", "assistant", "tool" (a function's result) */
    const char *content; /* NULL: empty (an assistant message that only calls functions) */
    const el_chat_tool_call *tool_calls; /* assistant: the calls it made (n_tool_calls of them) */
    int n_tool_calls;
    const char *tool_call_id; /* tool: the call this answers (not rendered by these templates) */
} el_chat_msg;

/* A tool (function) definition offered to the model, already serialised the
 * way the templates print it: json is Python's json.dumps(tool) (separators
 * ", " and ": ", non-ASCII kept), json_indent4 json.dumps(tool, indent=4)
 * (Llama 3.x). tool is OpenAI's {"type": "function", "function": {...}}. */
typedef struct el_chat_tool {
    const char *json;
    const char *json_indent4;
} el_chat_tool;

/* Family from template text; EL_CHAT_UNKNOWN if not recognised (or tmpl NULL). */
el_chat_family el_chat_detect(const char *tmpl);
/* Family by name ("gemma", "llama3", "chatml", "llama2", "mistral", "phi3"); UNKNOWN if none. */
el_chat_family el_chat_family_from_name(const char *name);
const char *el_chat_family_name(el_chat_family f);

struct el_model;

/* How el_chat_family_for_model chose. */
typedef enum { EL_CHAT_BY_TEMPLATE, EL_CHAT_BY_ARCH, EL_CHAT_BY_NONE } el_chat_source;

/* The family to use for a model: its chat template's family if recognised,
 * else the usual one for its architecture (gemma* → gemma, qwen2/qwen3 →
 * chatml, llama → llama3 if the vocab has <|eot_id|>, else llama2), else
 * EL_CHAT_UNKNOWN. *src (if not NULL) says which. */
el_chat_family el_chat_family_for_model(const struct el_model *m, el_chat_source *src);

/* Renders messages (BOS not included: the tokenizer adds it). Returns the
 * length needed (excluding NUL); writes at most cap bytes including a NUL.
 * Returns (size_t)-1 for an unknown role or family. */
size_t el_chat_apply(el_chat_family f, const el_chat_msg *msgs, int n_msgs,
                     bool add_generation_prompt, char *buf, size_t cap);

/* A rendering split into template text and message content: the bytes of
 * text[tmpl[i][0], tmpl[i][1]) (sorted, not overlapping, not adjacent) are the
 * template's own (markers, roles, separators); every other byte comes from a
 * message's content. text is what el_chat_apply writes, NUL-terminated. */
typedef struct el_chat_text {
    char *text;
    size_t len;
    size_t (*tmpl)[2];
    int n_tmpl;
} el_chat_text;

/* Renders into *out (malloc'd; el_chat_text_free). 0, or -1 for an unknown
 * role or family, -2 out of memory (*out is then empty). */
int el_chat_render(el_chat_family f, const el_chat_msg *msgs, int n_msgs, bool add_generation_prompt,
                   el_chat_text *out);
void el_chat_text_free(el_chat_text *t);

/* Tool calls: the families whose reference template (or documented
 * convention) defines them — chatml (Qwen2.5), llama3 (Llama 3.1/3.2's JSON
 * convention), gemma (edgellm's convention, chat.c). */
bool el_chat_family_has_tools(el_chat_family f);

/* el_chat_render with tool definitions (tools[0..n_tools)) rendered into the
 * prompt the family's way, and assistant tool calls / "tool" messages in the
 * history. n_tools 0 and no tool messages: exactly el_chat_render. -1 also
 * for tools, tool calls or tool messages with a family without tool calls,
 * and for a conversation the family's template refuses (llama3: more than one
 * call in a message, tools without a first message). Tool definitions, names,
 * arguments and results are message content (never special tokens). */
int el_chat_render_tools(el_chat_family f, const el_chat_msg *msgs, int n_msgs, const el_chat_tool *tools,
                         int n_tools, bool add_generation_prompt, el_chat_text *out);

/* Flags of el_chat_tokenize*: EL_TOK_ADD_SPECIAL (BOS per the vocab), and */
enum { EL_CHAT_TRUST_CONTENT = 1 << 8 }; /* message content is parsed for special tokens too (the old,
                                           trusted behaviour: content can then forge turns) */

/* Tokens of t->text[from, t->len): template text with special-token parsing,
 * message content as plain text (a control token's text in it stays text),
 * unless EL_CHAT_TRUST_CONTENT. Where the content holds no control-token text
 * the ids equal el_tokenize(whole text, EL_TOK_PARSE_SPECIAL). Returns the
 * count (if > cap only cap were written), negative on error. */
int el_chat_tokenize_text(const struct el_model *m, const el_chat_text *t, size_t from, int flags, int32_t *out,
                          int cap);
/* el_chat_render + el_chat_tokenize_text from 0, into a malloc'd array (*out).
 * Returns the count; -1 for an unknown role or family (nothing rendered), -2
 * out of memory, -3 text the tokenizer refuses. */
int el_chat_tokenize(const struct el_model *m, el_chat_family f, const el_chat_msg *msgs, int n_msgs,
                     bool add_generation_prompt, int flags, int32_t **out);

/* el_chat_tokenize with tool definitions (el_chat_render_tools). */
int el_chat_tokenize_tools(const struct el_model *m, el_chat_family f, const el_chat_msg *msgs, int n_msgs,
                           const el_chat_tool *tools, int n_tools, bool add_generation_prompt, int flags,
                           int32_t **out);

#endif
