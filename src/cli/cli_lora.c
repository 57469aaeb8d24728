/*
 * cli_lora.c — the --lora flags of run, chat, bench and perplexity.
 *
 * Contract: `--lora FILE[:SCALE]` (repeatable; SCALE 1 when absent) and
 * llama.cpp's `--lora-scaled FILE SCALE` add an adapter; cli_lora_parse turns
 * one spelling into (path, scale) and refuses a scale that is not a finite
 * number >= 0 (NaN, inf, negative) with a usage error. cli_lora_load loads
 * every adapter against the model (el_lora_load: architecture, targets,
 * shapes checked; errors name the file and the tensor) before the session
 * exists and gives the summed rank the session plans its adapter scratch for
 * (el_session_params.lora_rank: the scratch is in the session's block, not
 * allocated by el_session_set_adapters); cli_lora_set sets them on the
 * session. Nothing is left loaded on failure. A SCALE suffix is only taken
 * when what follows the last ':' is a number, so a path with ':' still works.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

int cli_lora_parse(cli_opts *o, const char *cmd, const char *spec, const char *scale_text) {
    if (o->n_lora >= CLI_MAX_LORA) return cli_usage_error(cmd, "at most %d --lora adapters", CLI_MAX_LORA);
    const char *path = spec;
    float scale = 1.0f;
    const char *st = scale_text;
    size_t plen = strlen(spec);
    if (!st) {
        const char *c = strrchr(spec, ':');
        if (c && c[1]) {
            char *end;
            errno = 0;
            (void)strtof(c + 1, &end);
            if (!*end && end != c + 1) st = c + 1, plen = (size_t)(c - spec);
        }
    }
    if (st) {
        char *end;
        errno = 0;
        scale = strtof(st, &end);
        if (errno || end == st || *end || !isfinite(scale) || scale < 0)
            return cli_usage_error(cmd, "--lora %s: scale '%s' is not a finite number >= 0", spec, st);
    }
    if (plen == 0) return cli_usage_error(cmd, "--lora: empty file name");
    if (plen >= sizeof o->lora_buf[0]) return cli_usage_error(cmd, "--lora: file name too long");
    memcpy(o->lora_buf[o->n_lora], path, plen);
    o->lora_buf[o->n_lora][plen] = 0;
    o->lora_path[o->n_lora] = o->lora_buf[o->n_lora];
    o->lora_scale[o->n_lora] = scale;
    o->n_lora++;
    return -1;
}

int cli_lora_load(const cli_opts *o, el_model *m, el_lora **out, int *rank) {
    for (int i = 0; i < CLI_MAX_LORA; i++) out[i] = NULL;
    *rank = 0;
    if (o->n_lora == 0) return -1;
    if (o->n_lora > 8) return cli_failf("--lora: at most 8 adapters at once (%d given)", o->n_lora);
    el_error err;
    for (int i = 0; i < o->n_lora; i++) {
        out[i] = el_lora_load(m, o->lora_path[i], &err);
        if (!out[i]) {
            cli_lora_free(out);
            *rank = 0;
            return cli_failf("--lora: %s", err.msg);
        }
        *rank += el_lora_rank_max(out[i]);
    }
    return -1;
}

int cli_lora_set(const cli_opts *o, el_session *s, el_lora **out) {
    if (o->n_lora == 0) return -1;
    el_error err;
    if (el_session_set_adapters(s, out, o->lora_scale, o->n_lora, &err)) {
        cli_lora_free(out);
        return cli_failf("--lora: %s", err.msg);
    }
    if (o->verbose)
        for (int i = 0; i < o->n_lora; i++)
            fprintf(stderr, "lora %s: scale %g, alpha %g, rank <= %d, %d weights, %.1f KiB\n", o->lora_path[i],
                    (double)o->lora_scale[i], (double)el_lora_alpha(out[i]), el_lora_rank_max(out[i]),
                    el_lora_n_pairs(out[i]), el_lora_bytes(out[i]) / 1024.0);
    return -1;
}

void cli_lora_free(el_lora **a) {
    for (int i = 0; i < CLI_MAX_LORA; i++) el_lora_free(a[i]), a[i] = NULL;
}
