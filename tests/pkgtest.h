/*
 * pkgtest.h — helpers shared by the package and store tests (test_manifest,
 * test_store, test_store_fault, test_store_fs): temporary folders, file
 * copies, and re-signing a manifest after editing its signed object (to make
 * validly signed manifests with chosen contents). They run the CLI with
 * testutil's el_test_run_cli.
 */
#ifndef EL_PKGTEST_H
#define EL_PKGTEST_H
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "deploy/fsutil.h"
#include "deploy/manifest.h"
#include "testutil.h"
#include "util/buf.h"

#ifndef EL_CLI_PATH
#error "EL_CLI_PATH must name the built edgellm binary"
#endif


/* mkdtemp under $TMPDIR or /tmp; static buffer per call site is the caller's. */
static inline bool make_tmpdir(char *out, size_t cap, const char *tag) {
    const char *base = getenv("TMPDIR");
    if (!base || !*base) base = "/tmp";
    snprintf(out, cap, "%s/el_%s_XXXXXX", base, tag);
    return mkdtemp(out) != NULL;
}

static inline bool copy_file(const char *src, const char *dst) {
    unlink(dst);
    el_pkg_error e;
    return el_fs_copy(src, dst, &e);
}

/* The small reference model the package tests use. */
static inline const char *pkg_ref_model(void) {
    return el_test_ref_path("models/tiny-llama-Q8_0.gguf");
}

typedef void (*signed_edit_fn)(cJSON *signed_obj, void *user);

/* Reads manifest_path, lets edit() change its "signed" object, signs the
 * result with sk (the canonical form of manifest.h) under keyid_as (NULL: the
 * signing key's id) and writes it back. */
static inline bool resign_manifest(const char *manifest_path, const uint8_t sk[64], signed_edit_fn edit, void *user,
                                   const char *keyid_as) {
    size_t len;
    char *text = el_test_read_file(manifest_path, &len);
    if (!text) return false;
    cJSON *root = cJSON_Parse(text);
    free(text);
    cJSON *sg = cJSON_GetObjectItemCaseSensitive(root, "signed");
    if (!sg) { cJSON_Delete(root); return false; }
    if (edit) edit(sg, user);
    el_buf msg = {0};
    char why[256];
    bool ok = el_buf_str(&msg, "edgellm-manifest-v1\n") && el_manifest_canonical(sg, &msg, why);
    if (ok) {
        uint8_t sig[64];
        crypto_sign_detached(sig, NULL, (const uint8_t *)msg.p, msg.len, sk);
        char hex[129], kid[17];
        sodium_bin2hex(hex, sizeof hex, sig, sizeof sig);
        el_pkg_keyid(sk + 32, kid);
        cJSON_DeleteItemFromObjectCaseSensitive(root, "signatures");
        cJSON *arr = cJSON_AddArrayToObject(root, "signatures");
        cJSON *so = cJSON_CreateObject();
        cJSON_AddStringToObject(so, "keyid", keyid_as ? keyid_as : kid);
        cJSON_AddStringToObject(so, "sig", hex);
        cJSON_AddItemToArray(arr, so);
        char *out = cJSON_Print(root);
        el_pkg_error e;
        ok = out && el_fs_write_atomic(manifest_path, out, strlen(out), 0644, &e);
        free(out);
    }
    el_buf_free(&msg);
    cJSON_Delete(root);
    return ok;
}

#endif
