/*
 * api.c — the parts of the public API (include/edgellm.h) that an embedding
 * application needs beyond load/tokenize/generate: the library's version and
 * chat (rendering, tokenizing and one chat turn on a session).
 *
 * Contract:
 *   - el_version() is EL_VERSION_STRING, the string `edgellm --version` prints.
 *   - The chat functions resolve a template name (NULL/"" = the model's own
 *     family, el_chat_family_for_model) and wrap src/runtime/chat.h: only the
 *     template's markers are special tokens, message content is plain text.
 *     Every pointer argument is checked; errors fill el_error and return -1
 *     (or EL_DONE_FAILED).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/chat.h"
#include "runtime/model.h"
#include "util/error.h"

const char *el_version(void) { return EL_VERSION_STRING; }

const char *el_chat_template_name(const el_model *m) {
    if (!m) return NULL;
    el_chat_family f = el_chat_family_for_model(m, NULL);
    return f == EL_CHAT_UNKNOWN ? NULL : el_chat_family_name(f);
}

/* The family for a name (NULL/"": the model's); EL_CHAT_UNKNOWN with err filled. */
static el_chat_family resolve_family(const el_model *m, const char *name, el_error *err) {
    el_chat_family f;
    if (!name || !*name) {
        f = el_chat_family_for_model(m, NULL);
        if (f == EL_CHAT_UNKNOWN)
            el_set_error(err, EL_ERR_TEMPLATE,
                         "the model's chat template is not recognised and its architecture '%s' names none: "
                         "give a template name (gemma, llama3, chatml, llama2, mistral, phi3)",
                         m->arch_name ? m->arch_name : "?");
        return f;
    }
    f = el_chat_family_from_name(name);
    if (f == EL_CHAT_UNKNOWN)
        el_set_error(err, EL_ERR_TEMPLATE, "unknown chat template '%.64s' (gemma, llama3, chatml, llama2, mistral, phi3)",
                     name);
    return f;
}

/* Checks the arguments and copies the messages into the internal type (malloc'd; *out NULL when n is 0). */
static int prepare(const el_model *m, const el_chat_message *msgs, int n_msgs, el_chat_msg **out, el_error *err) {
    *out = NULL;
    if (!m) return el_set_error(err, EL_ERR_INVALID_ARG, "model is NULL");
    if (n_msgs < 0 || (n_msgs > 0 && !msgs)) return el_set_error(err, EL_ERR_INVALID_ARG, "messages are NULL or their count is negative");
    if (n_msgs == 0) return 0;
    el_chat_msg *c = calloc((size_t)n_msgs, sizeof *c); /* no tool calls (chat.h's fields beyond role/content) */
    if (!c) return el_set_error(err, EL_ERR_NOMEM, "out of memory for %d messages", n_msgs);
    for (int i = 0; i < n_msgs; i++) {
        if (!msgs[i].role) {
            free(c);
            return el_set_error(err, EL_ERR_INVALID_ARG, "message %d has no role", i);
        }
        if (!strcmp(msgs[i].role, "tool")) { /* tool results are the server's (chat.h), not this API's */
            free(c);
            return el_set_error(err, EL_ERR_TEMPLATE, "message %d: role 'tool' is not system, user or assistant", i);
        }
        c[i].role = msgs[i].role;
        c[i].content = msgs[i].content ? msgs[i].content : "";
    }
    *out = c;
    return 0;
}

static int bad_role(const el_chat_message *msgs, int n_msgs, el_error *err) {
    for (int i = 0; i < n_msgs; i++)
        if (strcmp(msgs[i].role, "system") && strcmp(msgs[i].role, "user") && strcmp(msgs[i].role, "assistant"))
            return el_set_error(err, EL_ERR_TEMPLATE, "message %d: role '%.32s' is not system, user or assistant", i,
                                msgs[i].role);
    return el_set_error(err, EL_ERR_TEMPLATE, "the chat template cannot render these messages");
}

int el_chat_format(const el_model *m, const char *template_name, const el_chat_message *msgs, int n_msgs,
                   bool add_generation_prompt, char *buf, size_t cap, el_error *err) {
    if (err) { err->code = EL_OK; err->msg[0] = 0; }
    if (!buf && cap) { el_set_error(err, EL_ERR_INVALID_ARG, "buffer is NULL"); return -1; }
    el_chat_msg *c;
    if (prepare(m, msgs, n_msgs, &c, err)) return -1;
    el_chat_family f = resolve_family(m, template_name, err);
    if (f == EL_CHAT_UNKNOWN) { free(c); return -1; }
    size_t n = el_chat_apply(f, c, n_msgs, add_generation_prompt, buf, cap);
    free(c);
    if (n == (size_t)-1) { bad_role(msgs, n_msgs, err); return -1; }
    if (n > (size_t)0x7fffffff) { el_set_error(err, EL_ERR_INVALID_ARG, "the rendered chat is over 2 GiB"); return -1; }
    return (int)n;
}

/* Tokens of the rendering in a malloc'd array (*out); count, or -1 with err filled. */
static int chat_tokens(const el_model *m, const char *template_name, const el_chat_message *msgs, int n_msgs,
                       bool add_generation_prompt, int32_t **out, el_error *err) {
    *out = NULL;
    el_chat_msg *c;
    if (prepare(m, msgs, n_msgs, &c, err)) return -1;
    el_chat_family f = resolve_family(m, template_name, err);
    if (f == EL_CHAT_UNKNOWN) { free(c); return -1; }
    int n = el_chat_tokenize(m, f, c, n_msgs, add_generation_prompt, EL_TOK_ADD_SPECIAL, out);
    free(c);
    if (n == -1) bad_role(msgs, n_msgs, err);
    else if (n == -2) el_set_error(err, EL_ERR_NOMEM, "out of memory tokenizing the chat");
    else if (n < 0) el_set_error(err, EL_ERR_BAD_VALUE, "the tokenizer refused the rendered chat");
    return n < 0 ? -1 : n;
}

int el_chat_tokenize_messages(const el_model *m, const char *template_name, const el_chat_message *msgs, int n_msgs,
                              bool add_generation_prompt, int32_t *out, int cap, el_error *err) {
    if (err) { err->code = EL_OK; err->msg[0] = 0; }
    if (cap < 0 || (!out && cap > 0)) { el_set_error(err, EL_ERR_INVALID_ARG, "output buffer is NULL or cap negative"); return -1; }
    int32_t *ids;
    int n = chat_tokens(m, template_name, msgs, n_msgs, add_generation_prompt, &ids, err);
    if (n < 0) return -1;
    if (n > 0 && cap > 0) memcpy(out, ids, (size_t)(n < cap ? n : cap) * sizeof *ids);
    free(ids);
    return n;
}

el_finish el_session_chat(el_session *s, const char *template_name, const el_chat_message *msgs, int n_msgs,
                          const el_generate_params *gp, el_token_cb cb, void *user, el_generate_stats *stats,
                          el_error *err) {
    if (err) { err->code = EL_OK; err->msg[0] = 0; }
    if (stats) { memset(stats, 0, sizeof *stats); stats->finish = EL_DONE_FAILED; }
    if (!s) { el_set_error(err, EL_ERR_INVALID_ARG, "session is NULL"); return EL_DONE_FAILED; }
    if (atomic_load(&s->busy)) { /* el_generate would refuse too; do not reset a running session */
        el_set_error(err, EL_ERR_INVALID_ARG, "session is busy (a generation on it is running)");
        return EL_DONE_FAILED;
    }
    int32_t *ids;
    int n = chat_tokens(s->m, template_name, msgs, n_msgs, true, &ids, err);
    if (n < 0) return EL_DONE_FAILED;
    if (n == 0) {
        free(ids);
        el_set_error(err, EL_ERR_INVALID_ARG, "the chat renders to no tokens");
        return EL_DONE_FAILED;
    }
    el_session_reset(s);
    el_finish fin = el_generate(s, ids, n, gp, cb, user, stats, err);
    free(ids);
    return fin;
}
