/*
 * prompt.c — the text a command works on and its tokens: -p (with C-style
 * escapes unless --no-escape) or -f, and tokenization into an array that
 * grows until the tokenizer's count fits (declared in cli.h).
 *
 * Contract: -p escapes \n \r \t \a \b \f \v \' \" \? \\ and \xHH are
 * processed, any other escape is kept verbatim; -f is read as raw bytes
 * (for `run` one trailing newline dropped). On failure the error is printed
 * and NULL (or -1) returned, nothing left allocated.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

/* ---- the prompt -------------------------------------------------------- */

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* In place; returns the new length. Unknown escapes are kept verbatim. */
static size_t process_escapes(char *s, size_t len) {
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] != '\\' || i + 1 >= len) { s[o++] = s[i]; continue; }
        char c = s[++i];
        switch (c) {
        case 'n': s[o++] = '\n'; break;
        case 'r': s[o++] = '\r'; break;
        case 't': s[o++] = '\t'; break;
        case 'a': s[o++] = '\a'; break;
        case 'b': s[o++] = '\b'; break;
        case 'f': s[o++] = '\f'; break;
        case 'v': s[o++] = '\v'; break;
        case '\'': s[o++] = '\''; break;
        case '"': s[o++] = '"'; break;
        case '?': s[o++] = '?'; break;
        case '\\': s[o++] = '\\'; break;
        case 'x': {
            int h1 = i + 1 < len ? hexval((unsigned char)s[i + 1]) : -1;
            int h2 = i + 2 < len ? hexval((unsigned char)s[i + 2]) : -1;
            if (h1 >= 0 && h2 >= 0) {
                s[o++] = (char)(h1 * 16 + h2);
                i += 2;
            } else {
                s[o++] = '\\';
                s[o++] = 'x';
            }
            break;
        }
        default:
            s[o++] = '\\';
            s[o++] = c;
        }
    }
    s[o] = 0;
    return o;
}

char *cli_read_prompt(const cli_opts *o, bool strip_trailing_newline, size_t *len) {
    if (o->prompt) {
        size_t n = strlen(o->prompt);
        char *s = malloc(n + 1);
        if (!s) { cli_failf("out of memory"); return NULL; }
        memcpy(s, o->prompt, n + 1);
        if (!o->no_escape) n = process_escapes(s, n);
        *len = n;
        return s;
    }
    FILE *f = fopen(o->prompt_file, "rb");
    if (!f) {
        cli_failf("%s: cannot open prompt file: %s", o->prompt_file, strerror(errno));
        return NULL;
    }
    el_buf b = {0};
    char chunk[65536];
    size_t r;
    while ((r = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (!el_buf_append(&b, chunk, r)) {
            fclose(f);
            el_buf_free(&b);
            cli_failf("out of memory reading %s", o->prompt_file);
            return NULL;
        }
    }
    bool bad = ferror(f);
    fclose(f);
    if (bad) {
        el_buf_free(&b);
        cli_failf("%s: read error", o->prompt_file);
        return NULL;
    }
    if (!b.p && !el_buf_append(&b, "", 0)) { cli_failf("out of memory"); return NULL; }
    if (strip_trailing_newline && b.len && b.p[b.len - 1] == '\n') b.p[--b.len] = 0;
    *len = b.len;
    return b.p;
}

/* ---- tokens ------------------------------------------------------------ */

int cli_tokenize_with(cli_tokenize_fn fn, const void *ctx, size_t len, int32_t **out) {
    int cap = (int)(len < (size_t)INT_MAX / 2 - 16 ? len + 16 : (size_t)INT_MAX / 2);
    for (int attempt = 0; attempt < 3; attempt++) {
        int32_t *toks = malloc((size_t)cap * sizeof *toks);
        if (!toks) { cli_failf("out of memory tokenizing %zu bytes", len); return -1; }
        int n = fn(ctx, toks, cap);
        if (n < 0) {
            free(toks);
            cli_failf("tokenization failed (%d)", n);
            return -1;
        }
        if (n <= cap) { *out = toks; return n; }
        free(toks);
        cap = n;
    }
    cli_failf("tokenization did not settle on a token count");
    return -1;
}

typedef struct plain_tok { const el_model *m; const char *text; size_t len; int flags; } plain_tok;

static int plain_tokenize(const void *ctx, int32_t *out, int cap) {
    const plain_tok *t = ctx;
    return el_tokenize(t->m, t->text, t->len, out, cap, t->flags);
}

int cli_tokenize(const el_model *m, const char *text, size_t len, int flags, int32_t **out) {
    plain_tok t = {m, text, len, flags};
    return cli_tokenize_with(plain_tokenize, &t, len, out);
}
