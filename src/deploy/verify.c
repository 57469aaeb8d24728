/*
 * verify.c — verification of a package before its model is loaded, and the
 * lines that describe a package or an unsigned model (contract in
 * verify.h, the check order in manifest.h).
 *
 * Invariant: the model file is never mapped here (sizes are stat'ed, hashes
 * streamed with read()).
 */
#include "deploy/verify.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>

#include "edgellm.h"
#include "deploy/fingerprint.h"
#include "deploy/fsutil.h"
#include "deploy/hex.h"

/* ---- device class, runtime version ------------------------------------ */

const char *el_pkg_device_class(void) {
    static char cls[80];
    if (!cls[0]) {
        struct utsname u;
        if (uname(&u) == 0) snprintf(cls, sizeof cls, "cpu-%.64s", u.machine);
        else snprintf(cls, sizeof cls, "cpu");
    }
    return cls;
}

/* -1, 0, 1 as a < b, ==, > (X.Y.Z, numeric). */
static int cmp_version(const char *a, const char *b) {
    unsigned x[3] = {0}, y[3] = {0};
    sscanf(a, "%u.%u.%u", &x[0], &x[1], &x[2]);
    sscanf(b, "%u.%u.%u", &y[0], &y[1], &y[2]);
    for (int i = 0; i < 3; i++)
        if (x[i] != y[i]) return x[i] < y[i] ? -1 : 1;
    return 0;
}

/* ---- verification ------------------------------------------------------ */

el_pkg_check el_pkg_verify(const char *model_path, const el_pkg_verify_opts *o, el_manifest *out,
                           char signed_by[17], el_pkg_error *err) {
    if (out) memset(out, 0, sizeof *out);
    if (signed_by) signed_by[0] = 0;
    if (!el_pkg_init()) return el_pkg_fail(err, EL_PKG_ERR_IO, "libsodium failed to initialise");
    el_pkg_verify_opts dflt = {0};
    if (!o) o = &dflt;
    char mpath[PATH_MAX];
    if (o->manifest_path ? snprintf(mpath, sizeof mpath, "%s", o->manifest_path) >= (int)sizeof mpath
                         : !el_pkg_manifest_path(model_path, mpath, sizeof mpath))
        return el_pkg_fail(err, EL_PKG_ERR_USAGE, "%s: path too long", o->manifest_path ? o->manifest_path : model_path);
    el_manifest m;
    el_pkg_check rc = el_manifest_read(mpath, &m, err);
    if (rc) return rc;

    /* signature */
    if (o->n_trusted == 0 && !o->skip_signature) {
        rc = el_pkg_fail(err, EL_PKG_ERR_KEY, "%s: no trusted public key to check the signature with "
                         "(give --pub KEY.pub or set EL_TRUSTED_KEY)", mpath);
        goto fail;
    }
    if (o->n_trusted > 0) {
        bool matched = false, ok = false;
        for (int i = 0; i < m.n_sigs && !ok; i++)
            for (int k = 0; k < o->n_trusted && !ok; k++) {
                if (strcmp(m.sig_keyids[i], o->trusted[k].keyid) != 0) continue;
                matched = true;
                if (crypto_sign_verify_detached(m.sigs[i], (const uint8_t *)m.message, m.message_len,
                                                o->trusted[k].pk) == 0) {
                    ok = true;
                    if (signed_by) memcpy(signed_by, o->trusted[k].keyid, 17);
                }
            }
        if (!matched) {
            rc = el_pkg_fail(err, EL_PKG_ERR_KEY, "%s: signed by %s%s, which is not a trusted key (trusted: %s%s)", mpath,
                             m.n_sigs ? "key " : "no key", m.n_sigs ? m.sig_keyids[0] : "", o->trusted[0].keyid,
                             o->n_trusted > 1 ? ", ..." : "");
            goto fail;
        }
        if (!ok) {
            rc = el_pkg_fail(err, EL_PKG_ERR_SIGNATURE, "%s: the signature of key %s does not verify: the manifest "
                             "was altered or the signature forged", mpath, o->trusted[0].keyid);
            goto fail;
        }
    }
    /* expiry */
    int64_t now = o->now ? o->now : (int64_t)time(NULL);
    if (now >= m.expires_t) {
        rc = el_pkg_fail(err, EL_PKG_ERR_EXPIRED, "%s: the package expired at %s", mpath, m.expires);
        goto fail;
    }
    /* version floor */
    if (o->min_version > 0 && m.version < o->min_version) {
        rc = el_pkg_fail(err, EL_PKG_ERR_VERSION, "%s: version %" PRId64 " is lower than %" PRId64
                         " (a downgrade: refused as a rollback attack)", mpath, m.version, o->min_version);
        goto fail;
    }
    /* runtime */
    if (cmp_version(m.runtime_min, EL_VERSION_STRING) > 0) {
        rc = el_pkg_fail(err, EL_PKG_ERR_RUNTIME, "%s: needs runtime %s or newer; this is %s", mpath, m.runtime_min,
                         EL_VERSION_STRING);
        goto fail;
    }
    /* device class */
    {
        const char *cls = o->device_class ? o->device_class : el_pkg_device_class();
        bool ok = false;
        for (int i = 0; i < m.n_device_classes && !ok; i++)
            ok = !strcmp(m.device_classes[i], "cpu") || !strcmp(m.device_classes[i], cls);
        if (!ok) {
            rc = el_pkg_fail(err, EL_PKG_ERR_DEVICE, "%s: device class %s is not among the package's (%s%s)", mpath, cls,
                             m.device_classes[0], m.n_device_classes > 1 ? ", ..." : "");
            goto fail;
        }
    }
    /* the manifest must describe this model file */
    if (strcmp(m.artifacts[0].path, el_fs_base_name(model_path)) != 0) {
        rc = el_pkg_fail(err, EL_PKG_ERR_MALFORMED, "%s: the manifest is for \"%s\", not \"%s\"", mpath,
                         m.artifacts[0].path, el_fs_base_name(model_path));
        goto fail;
    }
    /* sizes first (cheap, and catches truncation), then hashes */
    char *dir = el_fs_dir_of(model_path);
    if (!dir) { rc = el_pkg_fail(err, EL_PKG_ERR_IO, "out of memory"); goto fail; }
    for (int pass = 0; pass < 2 && rc == EL_PKG_OK; pass++)
        for (int i = 0; i < m.n_artifacts && rc == EL_PKG_OK; i++) {
            char ap[PATH_MAX];
            snprintf(ap, sizeof ap, "%s/%s", dir, m.artifacts[i].path);
            if (pass == 0) {
                struct stat st;
                if (stat(ap, &st) != 0)
                    rc = el_pkg_fail(err, errno == ENOENT ? EL_PKG_ERR_SIZE : EL_PKG_ERR_IO, "%s: %s", ap,
                                     errno == ENOENT ? "missing" : strerror(errno));
                else if (!S_ISREG(st.st_mode))
                    rc = el_pkg_fail(err, EL_PKG_ERR_SIZE, "%s: not a regular file", ap);
                else if ((uint64_t)st.st_size != m.artifacts[i].size)
                    rc = el_pkg_fail(err, EL_PKG_ERR_SIZE, "%s: %lld bytes, the manifest says %" PRIu64 "%s", ap,
                                     (long long)st.st_size, m.artifacts[i].size,
                                     (uint64_t)st.st_size < m.artifacts[i].size ? " (truncated)" : "");
            } else {
                uint8_t h[32];
                uint64_t sz = 0;
                rc = el_pkg_hash_file(ap, h, &sz, err);
                if (rc == EL_PKG_OK && sz != m.artifacts[i].size)
                    rc = el_pkg_fail(err, EL_PKG_ERR_SIZE, "%s: changed size while hashing", ap);
                else if (rc == EL_PKG_OK && sodium_memcmp(h, m.artifacts[i].sha256, 32) != 0) {
                    char got[65], want[65];
                    el_hex_encode(h, 32, got);
                    el_hex_encode(m.artifacts[i].sha256, 32, want);
                    rc = el_pkg_fail(err, EL_PKG_ERR_HASH, "%s: SHA-256 %.16s... differs from the manifest's %.16s...",
                                     ap, got, want);
                }
            }
        }
    free(dir);
    if (rc) goto fail;
    if (out) *out = m;
    else el_manifest_free(&m);
    return EL_PKG_OK;
fail:
    el_manifest_free(&m);
    if (signed_by) signed_by[0] = 0;
    return rc;
}

/* ---- description ------------------------------------------------------- */

void el_pkg_describe(const el_manifest *m, const char *signed_by, char *out, size_t cap) {
    char h[65];
    el_hex_encode(m->artifacts[0].sha256, 32, h);
    bool v = signed_by && signed_by[0];
    snprintf(out, cap, "package %s v%" PRId64 ", %s%s%s, sha256 %.16s, quant %s, arch %s, expires %s, from %s@%s",
             m->name, m->version, v ? "signature verified (key " : "SIGNATURE NOT CHECKED (no trusted key)",
             v ? signed_by : "", v ? ")" : "", h, m->quant_type, m->arch, m->expires, m->source_checkpoint,
             m->source_revision);
}

el_pkg_check el_pkg_describe_unsigned(const char *model_path, char *out, size_t cap, el_pkg_error *err) {
    if (!el_pkg_init()) return el_pkg_fail(err, EL_PKG_ERR_IO, "libsodium failed to initialise");
    uint8_t h[32];
    el_pkg_check c = el_pkg_hash_file(model_path, h, NULL, err);
    if (c) return c;
    el_manifest m;
    memset(&m, 0, sizeof m);
    char hex[65];
    el_hex_encode(h, 32, hex);
    if (el_pkg_fingerprint(model_path, &m, NULL, NULL) == EL_PKG_OK)
        snprintf(out, cap, "UNSIGNED model (no manifest), sha256 %.16s, quant %s, arch %s", hex, m.quant_type, m.arch);
    else
        snprintf(out, cap, "UNSIGNED model (no manifest), sha256 %.16s (not a readable GGUF file)", hex);
    el_manifest_free(&m);
    return EL_PKG_OK;
}
