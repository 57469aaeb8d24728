/*
 * verify.c — verify a signed model package before loading it
 * (libedgellm-package, include/edgellm_package.h), then load the model with
 * libedgellm. Nothing unverified reaches el_model_load.
 * Usage: verify MODEL.gguf --pub KEY.pub [--manifest FILE]   a package beside the app
 *        verify MODEL.gguf --store DIR                        checked against a store's key
 *        verify --store DIR                                   the store's active model
 * Prints "ok: <summary>" and "loaded <arch> model, <n> tokens in vocab" on
 * success; on a failed check prints "refused: <check> check failed: <why>"
 * and exits with the check's code (the same as `edgellm verify`'s).
 */
#include <edgellm.h>
#include <edgellm_package.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    const char *model = NULL;
    el_package_params p;
    memset(&p, 0, sizeof p); /* reserved space zero */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--pub") && i + 1 < argc) p.pub = argv[++i];
        else if (!strcmp(argv[i], "--store") && i + 1 < argc) p.store = argv[++i];
        else if (!strcmp(argv[i], "--manifest") && i + 1 < argc) p.manifest = argv[++i];
        else if (!model && argv[i][0] != '-') model = argv[i];
        else { fprintf(stderr, "usage: %s [MODEL.gguf] (--pub KEY.pub | --store DIR) [--manifest FILE]\n", argv[0]); return 2; }
    }
    el_package_info info;
    el_package_error perr;
    el_package_check c = model ? el_package_verify(model, &p, &info, &perr)
                               : el_package_store_active(p.store, false, &info, &perr);
    if (c != EL_PACKAGE_OK) {
        printf("refused: %s check failed: %s\n", el_package_check_name(c), perr.msg);
        return el_package_exit_code(c);
    }
    printf("ok: %s\n", info.summary);
    el_error err;
    el_model *m = el_model_load(info.model_path, NULL, &err); /* the verified path */
    if (!m) { fprintf(stderr, "error: %s\n", err.msg); return 1; }
    printf("loaded %s model, %d tokens in vocab\n", el_model_arch(m), el_model_n_vocab(m));
    el_model_free(m);
    return 0;
}
