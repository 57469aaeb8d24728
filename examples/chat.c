/*
 * chat.c — a chat turn with the model's own template: el_chat_format shows the
 * rendering, el_session_chat tokenizes it (template markers special, message
 * text plain) and streams the assistant's reply.
 * Usage: chat MODEL.gguf USER_MESSAGE [N_TOKENS]
 * Prints "template: NAME", the rendered prompt between "--- prompt" and
 * "--- reply" lines, then the reply and "\n[finish=N]".
 */
#include <edgellm.h>
#include <stdio.h>
#include <stdlib.h>

static bool on_token(const el_token_info *t, void *user) {
    (void)user;
    fwrite(t->piece, 1, (size_t)t->piece_len, stdout);
    return true;
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: %s MODEL.gguf USER_MESSAGE [N_TOKENS]\n", argv[0]); return 2; }
    el_error err;
    el_model *m = el_model_load(argv[1], NULL, &err);
    if (!m) { fprintf(stderr, "error: %s\n", err.msg); return 1; }
    el_chat_message msgs[] = {
        {"system", "You are a helpful assistant."},
        {"user", argv[2]},
    };
    const char *tmpl = el_chat_template_name(m); /* NULL template name below = this one */
    printf("template: %s\n", tmpl ? tmpl : "(none)");
    char text[4096];
    int len = el_chat_format(m, NULL, msgs, 2, true, text, sizeof text, &err);
    if (len < 0 || len >= (int)sizeof text) { fprintf(stderr, "error: %s\n", err.msg); el_model_free(m); return 1; }
    printf("--- prompt\n%s\n--- reply\n", text);

    el_session_params sp = el_session_default_params();
    sp.n_ctx = 1024;
    el_session *s = el_session_new(m, &sp, &err);
    if (!s) { fprintf(stderr, "error: %s\n", err.msg); el_model_free(m); return 1; }
    el_generate_params gp = {0};
    gp.max_tokens = argc > 3 ? atoi(argv[3]) : 32;
    gp.sampling = el_sampling_default();
    gp.sampling.temp = 0;
    el_finish fin = el_session_chat(s, NULL, msgs, 2, &gp, on_token, NULL, NULL, &err);
    printf("\n[finish=%d]\n", (int)fin);
    if (fin == EL_DONE_FAILED) fprintf(stderr, "error: %s\n", err.msg);
    el_session_free(s);
    el_model_free(m);
    return fin == EL_DONE_FAILED;
}
