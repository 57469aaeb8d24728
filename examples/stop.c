/*
 * stop.c — stop strings: generation ends as soon as the text contains one of
 * them; the stop string itself (and text after it) is never delivered.
 * Usage: stop MODEL.gguf PROMPT STOP [STOP...]
 * Prints the text, then "\n[finish=stop|eos|length]".
 */
#include <edgellm.h>
#include <stdio.h>
#include <string.h>

static bool on_token(const el_token_info *t, void *user) {
    (void)user;
    fwrite(t->piece, 1, (size_t)t->piece_len, stdout);
    return true;
}

int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: %s MODEL.gguf PROMPT STOP [STOP...]\n", argv[0]); return 2; }
    el_error err;
    el_model *m = el_model_load(argv[1], NULL, &err);
    if (!m) { fprintf(stderr, "error: %s\n", err.msg); return 1; }
    int32_t toks[512];
    int n = el_tokenize(m, argv[2], strlen(argv[2]), toks, 512, EL_TOK_ADD_SPECIAL | EL_TOK_PARSE_SPECIAL);
    el_session_params sp = el_session_default_params();
    sp.n_ctx = 512;
    el_session *s = n > 0 && n <= 512 ? el_session_new(m, &sp, &err) : NULL;
    if (!s) { fprintf(stderr, "error: %s\n", n > 0 ? err.msg : "bad prompt"); el_model_free(m); return 1; }

    el_generate_params gp = {0};
    gp.max_tokens = 64;
    gp.stop = (const char *const *)&argv[3]; /* argv is NULL-terminated */
    gp.sampling = el_sampling_default();
    gp.sampling.temp = 0;
    el_generate_stats st;
    el_finish fin = el_generate(s, toks, n, &gp, on_token, NULL, &st, &err);
    const char *why = fin == EL_DONE_STOP ? "stop" : fin == EL_DONE_EOS ? "eos" : fin == EL_DONE_LENGTH ? "length" : "failed";
    printf("\n[finish=%s]\n", why);
    if (fin == EL_DONE_FAILED) fprintf(stderr, "error: %s\n", err.msg);
    el_session_free(s);
    el_model_free(m);
    return fin == EL_DONE_FAILED;
}
