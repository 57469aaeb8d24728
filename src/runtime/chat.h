/*
 * chat.h — chat templates. edgellm does not run Jinja: it recognises the
 * common template families from the text of tokenizer.chat_template and
 * formats messages the way that family's template would render them.
 */
#ifndef EL_RUNTIME_CHAT_H
#define EL_RUNTIME_CHAT_H
#include <stdbool.h>
#include <stddef.h>

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

typedef struct el_chat_msg {
    const char *role;    /* "system", "user", "assistant" */
    const char *content;
} el_chat_msg;

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

#endif
