/*
 * smoke.c — the smoke test: a greedy run of the model, recorded at signing
 * and compared at install (contract in smoke.h).
 */
#include "deploy/smoke.h"

#include <stdlib.h>
#include <string.h>

#include "edgellm.h"

typedef struct smoke_out { int32_t *t; int n, cap; } smoke_out;

static bool smoke_cb(const el_token_info *t, void *user) {
    smoke_out *o = user;
    if (t->id >= 0 && o->n < o->cap) o->t[o->n++] = t->id;
    return true;
}

el_pkg_check el_pkg_smoke_run(const char *model_path, const char *prompt, int n_predict, int32_t **ptoks, int *np,
                              int32_t **otoks, int *no, el_pkg_error *err) {
    el_error e = {0};
    *ptoks = *otoks = NULL;
    el_model *mdl = el_model_load(model_path, NULL, &e);
    if (!mdl) return el_pkg_fail(err, EL_PKG_ERR_SMOKE, "smoke test: load failed: %s: %s", el_status_name(e.code), e.msg);
    el_pkg_check rc = EL_PKG_OK;
    el_session *s = NULL;
    size_t plen = strlen(prompt);
    int cap = (int)plen + 16;
    int32_t *pt = malloc((size_t)cap * sizeof *pt);
    int32_t *ot = malloc((size_t)(n_predict > 0 ? n_predict : 1) * sizeof *ot);
    if (!pt || !ot) { rc = el_pkg_fail(err, EL_PKG_ERR_SMOKE, "smoke test: out of memory"); goto out; }
    int n = el_tokenize(mdl, prompt, plen, pt, cap, EL_TOK_ADD_SPECIAL | EL_TOK_PARSE_SPECIAL);
    if (n <= 0 || n > cap || n > 4096) { rc = el_pkg_fail(err, EL_PKG_ERR_SMOKE, "smoke test: tokenizing the prompt failed (%d)", n); goto out; }
    el_session_params sp = el_session_default_params();
    sp.n_ctx = n + n_predict + 8;
    int train = el_model_n_ctx_train(mdl);
    if (train > 0 && sp.n_ctx > train) sp.n_ctx = train;
    if (!(s = el_session_new(mdl, &sp, &e))) {
        rc = el_pkg_fail(err, EL_PKG_ERR_SMOKE, "smoke test: session: %s: %s", el_status_name(e.code), e.msg);
        goto out;
    }
    el_generate_params gp;
    memset(&gp, 0, sizeof gp);
    gp.max_tokens = n_predict;
    gp.ignore_eos = true;
    gp.sampling = el_sampling_default();
    gp.sampling.temp = 0.0f;
    smoke_out so = {.t = ot, .n = 0, .cap = n_predict};
    el_generate_stats st;
    if (el_generate(s, pt, n, &gp, smoke_cb, &so, &st, &e) == EL_DONE_FAILED) {
        rc = el_pkg_fail(err, EL_PKG_ERR_SMOKE, "smoke test: generation failed: %s: %s", el_status_name(e.code), e.msg);
        goto out;
    }
    *ptoks = pt; *np = n; pt = NULL;
    *otoks = ot; *no = so.n; ot = NULL;
out:
    free(pt);
    free(ot);
    el_session_free(s);
    el_model_free(mdl);
    return rc;
}

el_pkg_check el_pkg_smoke_check(const char *model_path, const el_manifest *m, el_pkg_error *err) {
    if (!m->has_smoke) return el_pkg_fail(err, EL_PKG_ERR_SMOKE, "smoke test: the manifest records no expectation "
                                                                 "(sign without --no-smoke)");
    int32_t *pt, *ot;
    int np, no;
    el_pkg_check rc = el_pkg_smoke_run(model_path, m->smoke_prompt, m->smoke_n_predict, &pt, &np, &ot, &no, err);
    if (rc) return rc;
    if (np != m->n_smoke_prompt_tokens || memcmp(pt, m->smoke_prompt_tokens, (size_t)np * sizeof *pt) != 0) {
        rc = el_pkg_fail(err, EL_PKG_ERR_SMOKE, "smoke test: the prompt tokenizes to %d tokens, differently from the "
                         "%d recorded", np, m->n_smoke_prompt_tokens);
    } else {
        int k = 0;
        while (k < no && k < m->n_smoke_tokens && ot[k] == m->smoke_tokens[k]) k++;
        if (k < no || k < m->n_smoke_tokens)
            rc = el_pkg_fail(err, EL_PKG_ERR_SMOKE, "smoke test: generated token %d is %d, the manifest expects %d "
                             "(%d of %d tokens matched)", k, k < no ? ot[k] : -1,
                             k < m->n_smoke_tokens ? m->smoke_tokens[k] : -1, k, m->n_smoke_tokens);
    }
    free(pt);
    free(ot);
    return rc;
}
