/*
 * toolformat.h — the tool-call wire formats of instruct model families, as
 * llama.cpp's chat layer knows them, recognised from a chat template's text
 * and parsed out of generated text (layer L6). Pure functions: no I/O, no
 * global state, cJSON only.
 *
 * Formats (what a reply looks like; "..." is content the parser keeps):
 *   hermes          ... <tool_call>{"name": N, "arguments": {…}}</tool_call> ...
 *                   (Hermes 2 Pro, Qwen 2.5/3); no tag at all: one bare
 *                   {"name": N, "arguments": {…}} object after any text
 *   llama3          {"name": N, "parameters": {…}} as the whole reply, an optional
 *                   <|python_tag|> before it ("arguments" accepted too)
 *   mistral_nemo    ... [TOOL_CALLS][{"name": N, "arguments": {…}, "id": I}, …]
 *   functionary31   ... <function=N>{…}</function> ...; <|python_tag|>CODE is a
 *                   call of "python" with {"code": CODE}
 *   functionary32   segments "N\n{…}" joined by ">>>" (the first one's ">>>" is the
 *                   prompt's); N "all" is content; "python" takes raw code
 *   command_r       <|START_THINKING|>R<|END_THINKING|> <|START_ACTION|>[{"tool_call_id":
 *                   I, "tool_name": N, "parameters": {…}}]<|END_ACTION|>
 *                   <|START_RESPONSE|>...<|END_RESPONSE|> (Command R7B), or
 *                   Action: ```json [{"tool_name": N, "parameters": {…}}] ``` (Command R+)
 *   deepseek        ... <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>N
 *                   ```json {…} ```<｜tool▁call▁end｜>…<｜tool▁calls▁end｜> (R1), or
 *                   <｜tool▁call▁begin｜>N<｜tool▁sep｜>{…}<｜tool▁call▁end｜> (V3.1)
 *   granite         ... <|tool_call|>[{"name": N, "arguments": {…}}, …]; content may be
 *                   wrapped in <response>…</response>
 *   gpt_oss         harmony messages: [<|start|>assistant]<|channel|>C[ to=functions.N]
 *                   [ <|constrain|>json]<|message|>BODY, each ended by <|end|>,
 *                   <|call|>, <|return|> or the text's end; C analysis is
 *                   reasoning, final (and commentary without a recipient) content,
 *                   a recipient functions.N makes BODY the arguments of a call of N
 *
 * Reasoning (reasoning_format, as llama-server's): NONE leaves <think>…</think>
 * in the content; DEEPSEEK and AUTO move a leading <think>…</think> (or, when the
 * template opened it, everything before the first </think>; an unclosed
 * <think> takes the rest) into reasoning, as they do the format's own
 * reasoning channel (gpt_oss analysis, command_r THINKING).
 *
 * Generated text is outside bytes: any bytes, any length. A call counts only
 * when its name is 1..64 of [A-Za-z0-9_.-] and its arguments are a JSON
 * object (or a JSON string holding one); anything else stays content, as
 * written. Work is linear in the input (bare-object candidates are capped,
 * at most EL_TOOL_MAX_CALLS calls). Fuzzed by fuzz/fuzz_toolformat.c.
 */
#ifndef EL_STRUCTURED_TOOLFORMAT_H
#define EL_STRUCTURED_TOOLFORMAT_H
#include <stddef.h>

#include "structured/toolcall.h"

typedef enum {
    EL_TF_NONE = 0,
    EL_TF_HERMES,
    EL_TF_LLAMA3,
    EL_TF_MISTRAL_NEMO,
    EL_TF_FUNCTIONARY31,
    EL_TF_FUNCTIONARY32,
    EL_TF_COMMAND_R,
    EL_TF_DEEPSEEK,
    EL_TF_GRANITE,
    EL_TF_GPT_OSS,
} el_tool_format;

typedef enum { EL_REASONING_NONE = 0, EL_REASONING_DEEPSEEK, EL_REASONING_AUTO } el_reasoning_format;

typedef struct el_tool_parsed {
    char *content;   /* NULL when none is left (trimmed pieces joined by "\n"); NUL-terminated at
                        content_len, but may hold NUL bytes of its own */
    char *reasoning; /* NULL when none; likewise, reasoning_len bytes */
    size_t content_len, reasoning_len;
    el_tool_call_out *calls;
    int n_calls;
} el_tool_parsed;

/* The format a chat template's text (any bytes, NUL-terminated) writes tool
 * calls in, by the markers it contains; EL_TF_NONE when none is known. */
el_tool_format el_tool_format_detect(const char *tmpl);
const char *el_tool_format_name(el_tool_format f);
/* "none" / "deepseek" / "auto" (NULL or unknown: -1). */
int el_reasoning_format_parse(const char *s);

/* Splits text[0..len) written in format f. 0, or -1 out of memory (out then empty). */
int el_tool_format_parse(el_tool_format f, el_reasoning_format rf, const char *text, size_t len, el_tool_parsed *out);
void el_tool_parsed_free(el_tool_parsed *p);

/* The built-in family whose call grammar (toolcall.h el_toolcall_grammar) writes format f's call
 * syntax: hermes -> chatml (<tool_call> blocks, bare JSON under "auto"), llama3 -> llama3;
 * EL_CHAT_UNKNOWN for the formats whose markers are special tokens (mistral_nemo [TOOL_CALLS],
 * granite <|tool_call|>, deepseek, command_r, gpt_oss) or that name the function outside the JSON
 * (functionary): no grammar constrains those. */
el_chat_family el_tool_format_grammar_family(el_tool_format f);

#endif
