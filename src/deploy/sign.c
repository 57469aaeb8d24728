/*
 * sign.c — signing a package: its description (fingerprint, artifacts,
 * smoke expectation), the signature over its canonical form, the manifest
 * written beside the model (contract in sign.h).
 */
#include "deploy/sign.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "edgellm.h"
#include "deploy/fingerprint.h"
#include "deploy/fsutil.h"
#include "deploy/hex.h"
#include "deploy/manifest_format.h"
#include "deploy/smoke.h"
#include "util/buf.h"

static el_pkg_check add_artifact(el_manifest *m, const char *path, el_pkg_error *err) {
    el_pkg_artifact *a = &m->artifacts[m->n_artifacts];
    if (!el_pkg_plain_name(el_fs_base_name(path)))
        return el_pkg_fail(err, EL_PKG_ERR_USAGE, "%s: artifact names must be plain file names", path);
    el_pkg_check c = el_pkg_hash_file(path, a->sha256, &a->size, err);
    if (c) return c;
    if (!(a->path = strdup(el_fs_base_name(path)))) return el_pkg_fail(err, EL_PKG_ERR_IO, "out of memory");
    m->n_artifacts++;
    return EL_PKG_OK;
}

el_pkg_check el_pkg_sign(const char *model_path, const uint8_t sk[EL_PKG_SEC_BYTES], const el_pkg_sign_params *p,
                         el_pkg_error *err) {
    if (!el_pkg_init()) return el_pkg_fail(err, EL_PKG_ERR_IO, "libsodium failed to initialise");
    if (p->version < 1 || (double)p->version > EL_MANIFEST_MAX_INT)
        return el_pkg_fail(err, EL_PKG_ERR_USAGE, "version must be an integer >= 1");
    el_manifest m;
    memset(&m, 0, sizeof m);
    el_pkg_check rc;
    char *gname = NULL, *text = NULL;
    cJSON *root = NULL;
    el_buf msg = {0};

    int64_t now = p->now ? p->now : (int64_t)time(NULL);
    int64_t expires = p->expires_t ? p->expires_t : now + 365 * 86400;
    char created_s[21], expires_s[21];
    el_pkg_format_date(now, created_s);
    el_pkg_format_date(expires, expires_s);

    m.version = p->version;
    m.created = strdup(created_s);
    m.expires = strdup(expires_s);
    m.expires_t = expires;
    m.artifacts = calloc((size_t)p->n_extra + 1, sizeof *m.artifacts);
    if (!m.created || !m.expires || !m.artifacts) { rc = el_pkg_fail(err, EL_PKG_ERR_IO, "out of memory"); goto out; }
    if ((rc = el_pkg_fingerprint(model_path, &m, &gname, err))) goto out;
    if ((rc = add_artifact(&m, model_path, err))) goto out;
    char *dir = el_fs_dir_of(model_path);
    for (int i = 0; i < p->n_extra && rc == EL_PKG_OK; i++) {
        char full[PATH_MAX];
        const char *x = p->extra_artifacts[i];
        if (strchr(x, '/')) {
            char *xd = el_fs_dir_of(x);
            bool same = xd && dir && strcmp(xd, dir) == 0;
            free(xd);
            if (!same) rc = el_pkg_fail(err, EL_PKG_ERR_USAGE, "%s: extra artifacts must lie beside the model", x);
            else snprintf(full, sizeof full, "%s", x);
        } else {
            snprintf(full, sizeof full, "%s/%s", dir ? dir : ".", x);
        }
        if (rc == EL_PKG_OK) rc = add_artifact(&m, full, err);
        for (int k = 0; rc == EL_PKG_OK && k + 1 < m.n_artifacts; k++)
            if (!strcmp(m.artifacts[k].path, m.artifacts[m.n_artifacts - 1].path))
                rc = el_pkg_fail(err, EL_PKG_ERR_USAGE, "%s: listed twice", x);
    }
    free(dir);
    if (rc) goto out;

    if (p->name) m.name = strdup(p->name);
    else {
        const char *b = el_fs_base_name(model_path);
        size_t l = strlen(b);
        m.name = (l > 5 && !strcmp(b + l - 5, ".gguf")) ? strndup(b, l - 5) : strdup(b);
    }
    m.source_checkpoint = strdup(p->source_checkpoint ? p->source_checkpoint : gname ? gname : "unknown");
    m.source_revision = strdup(p->source_revision ? p->source_revision : "unknown");
    m.converter = strdup(p->converter ? p->converter : "unknown");
    m.quant_config = strdup(p->quant_config ? p->quant_config : "");
    m.runtime_min = strdup(p->runtime_min ? p->runtime_min : EL_VERSION_STRING);
    int ndc = p->n_device_classes > 0 ? p->n_device_classes : 1;
    m.device_classes = calloc((size_t)ndc, sizeof *m.device_classes);
    if (!m.name || !m.source_checkpoint || !m.source_revision || !m.converter || !m.quant_config || !m.runtime_min ||
        !m.device_classes) {
        rc = el_pkg_fail(err, EL_PKG_ERR_IO, "out of memory");
        goto out;
    }
    for (int i = 0; i < ndc; i++) {
        m.device_classes[i] = strdup(p->n_device_classes > 0 ? p->device_classes[i] : "cpu");
        if (!m.device_classes[i]) { rc = el_pkg_fail(err, EL_PKG_ERR_IO, "out of memory"); goto out; }
        m.n_device_classes++;
    }
    if (p->smoke) {
        m.has_smoke = true;
        m.smoke_prompt = strdup(p->smoke_prompt ? p->smoke_prompt : "Once upon a time");
        m.smoke_n_predict = p->smoke_n_predict > 0 ? p->smoke_n_predict : 8;
        if (!m.smoke_prompt) { rc = el_pkg_fail(err, EL_PKG_ERR_IO, "out of memory"); goto out; }
        if ((rc = el_pkg_smoke_run(model_path, m.smoke_prompt, m.smoke_n_predict, &m.smoke_prompt_tokens,
                                   &m.n_smoke_prompt_tokens, &m.smoke_tokens, &m.n_smoke_tokens, err)))
            goto out;
    }

    /* Serialize, then parse back through the verifier's own schema: what is
     * signed is exactly what a verifier will canonicalize. */
    cJSON *sg = el_manifest_build_signed(&m);
    if (!sg) { rc = el_pkg_fail(err, EL_PKG_ERR_IO, "out of memory"); goto out; }
    root = cJSON_CreateObject();
    if (!root) { cJSON_Delete(sg); rc = el_pkg_fail(err, EL_PKG_ERR_IO, "out of memory"); goto out; }
    cJSON_AddItemToObject(root, "signed", sg);
    char why[256];
    if (!el_buf_str(&msg, EL_MANIFEST_SIGN_PREFIX) || !el_manifest_canonical(sg, &msg, why)) {
        rc = el_pkg_fail(err, EL_PKG_ERR_MALFORMED, "cannot canonicalize the manifest: %s", why);
        goto out;
    }
    uint8_t sig[EL_PKG_SIG_BYTES];
    crypto_sign_detached(sig, NULL, (const uint8_t *)msg.p, msg.len, sk);
    char keyid[17];
    el_pkg_keyid(sk + 32, keyid);
    cJSON *sigs = cJSON_AddArrayToObject(root, "signatures");
    cJSON *so = cJSON_CreateObject();
    cJSON_AddStringToObject(so, "keyid", keyid);
    char sig_hex[2 * EL_PKG_SIG_BYTES + 1];
    el_hex_encode(sig, sizeof sig, sig_hex);
    cJSON_AddStringToObject(so, "sig", sig_hex);
    cJSON_AddItemToArray(sigs, so);
    text = cJSON_Print(root);
    if (!text) { rc = el_pkg_fail(err, EL_PKG_ERR_IO, "out of memory"); goto out; }
    {
        el_manifest back;
        el_pkg_error e2;
        if (el_manifest_parse(text, strlen(text), &back, &e2) != EL_PKG_OK ||
            back.message_len != msg.len || memcmp(back.message, msg.p, msg.len) != 0) {
            el_manifest_free(&back);
            rc = el_pkg_fail(err, EL_PKG_ERR_MALFORMED, "the manifest does not read back as written: %s", e2.msg);
            goto out;
        }
        el_manifest_free(&back);
    }
    char mpath[PATH_MAX];
    if (!el_pkg_manifest_path(model_path, mpath, sizeof mpath)) {
        rc = el_pkg_fail(err, EL_PKG_ERR_USAGE, "%s: path too long", model_path);
        goto out;
    }
    size_t tl = strlen(text);
    char *withnl = realloc(text, tl + 2);
    if (!withnl) { rc = el_pkg_fail(err, EL_PKG_ERR_IO, "out of memory"); goto out; }
    text = withnl;
    text[tl] = '\n';
    text[tl + 1] = 0;
    if (!el_fs_write_atomic(mpath, text, tl + 1, 0644, err)) rc = err ? err->check : EL_PKG_ERR_IO;
out:
    free(text);
    free(gname);
    el_buf_free(&msg);
    cJSON_Delete(root);
    el_manifest_free(&m);
    return rc;
}
