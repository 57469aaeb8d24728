/*
 * load_check.c — the package check `run`, `chat`, `serve` and `act` make
 * before a byte of the model is loaded (cli_verify_before_load), and the
 * message every package command prints for a failed check (cli_pkg_fail).
 *
 * Contract: a model with a manifest beside it is verified (el_pkg_verify)
 * against --pub or $EL_TRUSTED_KEY, or with the signature skipped under
 * --allow-unsigned; a model without one loads only with --allow-unsigned;
 * --store DIR loads the store's active version, checked against the store's
 * trusted key. --lora adapters of a signed package must be its artifacts.
 * The package's one-line description goes to stderr; a failed check prints
 * "error: <check> check failed: <what>" and returns 10 + the check's code.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "deploy/manifest.h"
#include "deploy/store.h"

int cli_pkg_fail(const el_pkg_error *e) {
    fprintf(stderr, "error: %s check failed: %s\n", el_pkg_check_name(e->check), e->msg);
    return el_pkg_exit_code(e->check);
}

/* --lora with a signed package (verified against a trusted key): each adapter must be one of its artifacts
 * (beside the model, listed in the manifest, so el_pkg_verify checked its size and SHA-256); --allow-unsigned lets
 * others load with a note. -1 to go on, else the exit code. */
static int lora_artifacts_check(const cli_opts *o, const el_manifest *m, bool signed_pkg) {
    for (int i = 0; i < o->n_lora; i++) {
        const char *lp = o->lora_path[i];
        char ld[PATH_MAX], md[PATH_MAX];
        snprintf(ld, sizeof ld, "%s", lp);
        snprintf(md, sizeof md, "%s", o->model);
        char *ls = strrchr(ld, '/'), *ms = strrchr(md, '/');
        const char *lbase = ls ? ls + 1 : ld;
        if (ls) *ls = 0; else snprintf(ld, sizeof ld, ".");
        if (ms) *ms = 0; else snprintf(md, sizeof md, ".");
        char lr[PATH_MAX], mr[PATH_MAX];
        bool listed = false;
        if (realpath(ld, lr) && realpath(md, mr) && !strcmp(lr, mr))
            for (int k = 0; k < m->n_artifacts; k++) listed |= !strcmp(m->artifacts[k].path, lbase);
        if (listed) {
            fprintf(stderr, "lora %s: an artifact of the %s package (size and SHA-256 checked)\n", lp,
                    signed_pkg ? "signed" : "verified");
        } else if (signed_pkg && !o->allow_unsigned) {
            fprintf(stderr, "error: manifest check failed: --lora %s is not an artifact of the signed package: sign it "
                    "with the model (edgellm sign --key KEY.sec %s --artifact %s) or pass --allow-unsigned\n", lp, o->model,
                    lbase);
            return el_pkg_exit_code(EL_PKG_ERR_NO_MANIFEST);
        } else {
            fprintf(stderr, "lora %s: UNSIGNED (not an artifact of the model's package)\n", lp);
        }
    }
    return -1;
}

int cli_verify_before_load(cli_opts *o) {
    static char store_model[PATH_MAX];
    el_pkg_error e;
    el_manifest m;
    char by[17], line[1024];
    if (o->store) {
        if (o->model) return cli_usage_error(o->cmd, "give -m MODEL or --store DIR, not both");
        if (o->pub) return cli_usage_error(o->cmd, "--store uses the store's trusted key; drop --pub");
        if (el_store_check_active(o->store, false, store_model, sizeof store_model, &m, by, &e)) return cli_pkg_fail(&e);
        if (o->min_version > 0 && m.version < o->min_version) {
            el_manifest_free(&m);
            el_pkg_fail(&e, EL_PKG_ERR_VERSION, "%s: active version is lower than --min-version", o->store);
            return cli_pkg_fail(&e);
        }
        o->model = store_model;
        el_pkg_describe(&m, by, line, sizeof line);
        fprintf(stderr, "%s\n", line);
        el_manifest_free(&m);
        return -1;
    }
    char mp[PATH_MAX];
    if (!el_pkg_manifest_path(o->model, mp, sizeof mp)) return cli_failf("%s: path too long", o->model);
    struct stat st;
    bool has_manifest = stat(mp, &st) == 0;
    const char *pub = o->pub ? o->pub : getenv("EL_TRUSTED_KEY");
    if (pub && !*pub) pub = NULL;
    if (!has_manifest) {
        if (!o->allow_unsigned) {
            fprintf(stderr, "error: manifest check failed: %s: no manifest beside the model, so it is not a signed "
                    "package; sign it (edgellm sign --key KEY.sec %s) or pass --allow-unsigned to load it anyway\n",
                    mp, o->model);
            return el_pkg_exit_code(EL_PKG_ERR_NO_MANIFEST);
        }
        /* a missing or unreadable file is left to the loader, which names the problem */
        if (el_pkg_describe_unsigned(o->model, line, sizeof line, &e) == EL_PKG_OK) fprintf(stderr, "%s\n", line);
        return -1;
    }
    el_pubkey key;
    if (pub && el_pkg_read_pub(pub, &key, &e)) return cli_pkg_fail(&e);
    if (!pub && !o->allow_unsigned) {
        el_pkg_fail(&e, EL_PKG_ERR_KEY, "%s: the model is signed but no trusted key was given: pass --pub KEY.pub or "
                    "set EL_TRUSTED_KEY (or --allow-unsigned to skip the signature)", mp);
        return cli_pkg_fail(&e);
    }
    el_pkg_verify_opts vo = {.trusted = pub ? &key : NULL, .n_trusted = pub ? 1 : 0, .skip_signature = !pub,
                             .min_version = o->min_version};
    if (el_pkg_verify(o->model, &vo, &m, by, &e)) return cli_pkg_fail(&e);
    el_pkg_describe(&m, by, line, sizeof line);
    fprintf(stderr, "%s\n", line);
    const int lr = lora_artifacts_check(o, &m, pub != NULL);
    el_manifest_free(&m);
    return lr;
}
