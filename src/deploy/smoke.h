/*
 * smoke.h — the smoke test of a package: the greedy run `sign` records in
 * the manifest and `install` (or `verify --smoke`) compares against.
 *
 * Contract: the run is deterministic for a model file: the smoke prompt is
 * tokenized with EL_TOK_ADD_SPECIAL | EL_TOK_PARSE_SPECIAL and n_predict
 * tokens are generated at temperature 0 with EOS ignored, in a session just
 * large enough (capped at the model's training context). Every failure is
 * EL_PKG_ERR_SMOKE; the model is unloaded before either function returns.
 */
#ifndef EL_DEPLOY_SMOKE_H
#define EL_DEPLOY_SMOKE_H
#include <stdint.h>

#include "deploy/manifest_format.h"
#include "deploy/pkg_error.h"

/* Runs prompt greedily on model_path: its prompt tokens (*ptoks, *np) and
 * n_predict output tokens (*otoks, *no; fewer if generation ends early),
 * both malloc'd (NULL on failure). */
el_pkg_check el_pkg_smoke_run(const char *model_path, const char *prompt, int n_predict, int32_t **ptoks, int *np,
                              int32_t **otoks, int *no, el_pkg_error *err);

/* Loads model_path, tokenizes m's smoke prompt, generates its n_predict tokens
 * greedily (EOS ignored) and compares prompt tokens and output tokens with the
 * recorded ones. EL_PKG_ERR_SMOKE names the first differing position. */
el_pkg_check el_pkg_smoke_check(const char *model_path, const el_manifest *m, el_pkg_error *err);

#endif
