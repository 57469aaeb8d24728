/*
 * cmd_tokenize.c — `edgellm tokenize -m MODEL (-p TEXT | -f FILE)`: the
 * token ids of the text as a JSON-style list on stdout, loading the
 * vocabulary only (no weights).
 */
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"

int cli_cmd_tokenize(cli_opts *o) {
    size_t len = 0;
    char *text = cli_read_prompt(o, false, &len);
    if (!text) return CLI_EXIT_ERROR;
    el_error err = {0};
    el_model *m = cli_load_model(o, true, &err);
    if (!m) { free(text); return cli_fail(&err); }
    int flags = (o->no_bos ? 0 : EL_TOK_ADD_SPECIAL) | (o->no_parse_special ? 0 : EL_TOK_PARSE_SPECIAL);
    int32_t *toks = NULL;
    int n = cli_tokenize(m, text, len, flags, &toks);
    free(text);
    if (n < 0) { el_model_free(m); return CLI_EXIT_ERROR; }
    putchar('[');
    for (int i = 0; i < n; i++) printf(i ? ", %d" : "%d", (int)toks[i]);
    puts("]");
    free(toks);
    el_model_free(m);
    return fflush(stdout) == 0 ? CLI_EXIT_OK : cli_failf("writing to stdout failed");
}
