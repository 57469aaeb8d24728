/*
 * generate.c — streaming generation with libedgellm: load a model, tokenize a
 * prompt, generate greedily and print each token's text as it comes.
 * Usage: generate MODEL.gguf PROMPT [N_TOKENS]
 * Prints the generated text, then "\n[finish=N tokens=K]" on stdout; errors
 * go to stderr with the library's message, exit status 1.
 */
#include <edgellm.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool on_token(const el_token_info *t, void *user) {
    int *count = user;
    if (t->id >= 0) (*count)++;
    fwrite(t->piece, 1, (size_t)t->piece_len, stdout);
    fflush(stdout);
    return true; /* false would stop here (EL_DONE_STOP) */
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: %s MODEL.gguf PROMPT [N_TOKENS]\n", argv[0]); return 2; }
    el_error err;
    el_model *m = el_model_load(argv[1], NULL, &err);
    if (!m) { fprintf(stderr, "error: %s\n", err.msg); return 1; }

    int32_t toks[512];
    int n = el_tokenize(m, argv[2], strlen(argv[2]), toks, 512, EL_TOK_ADD_SPECIAL | EL_TOK_PARSE_SPECIAL);
    if (n <= 0 || n > 512) { fprintf(stderr, "error: cannot tokenize the prompt (%d)\n", n); el_model_free(m); return 1; }

    el_session_params sp = el_session_default_params();
    sp.n_ctx = 1024;
    el_session *s = el_session_new(m, &sp, &err);
    if (!s) { fprintf(stderr, "error: %s\n", err.msg); el_model_free(m); return 1; }

    el_generate_params gp = {0};
    gp.max_tokens = argc > 3 ? atoi(argv[3]) : 32;
    gp.sampling = el_sampling_default();
    gp.sampling.temp = 0; /* greedy: the same tokens as `edgellm run --temp 0` */

    int count = 0;
    el_generate_stats st;
    el_finish fin = el_generate(s, toks, n, &gp, on_token, &count, &st, &err);
    int rc = 0;
    if (fin == EL_DONE_FAILED) { fprintf(stderr, "\nerror: %s\n", err.msg); rc = 1; }
    else printf("\n[finish=%d tokens=%d]\n", (int)fin, count);
    el_session_free(s);
    el_model_free(m);
    return rc;
}
