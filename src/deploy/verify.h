/*
 * verify.h — verification, the check every load of a package goes through,
 * and the one-line descriptions printed once a model passed it.
 *
 * Contract: el_pkg_verify runs the checks in the order manifest.h lists
 * (manifest, signature or key, expiry, version, runtime, device, size, hash)
 * and stops at the first that fails, naming it; after it succeeds every
 * field of the returned manifest came from the signed object that a trusted
 * key signed (unless the caller asked to skip the signature). The model file
 * is never mapped here: sizes are stat'ed first (so truncation is caught
 * before hashing), hashes streamed with read().
 */
#ifndef EL_DEPLOY_VERIFY_H
#define EL_DEPLOY_VERIFY_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "deploy/keys.h"
#include "deploy/manifest_format.h"
#include "deploy/pkg_error.h"

typedef struct el_pkg_verify_opts {
    const el_pubkey *trusted;   /* keys whose signature is accepted */
    int n_trusted;              /* 0: the signature cannot be checked -> EL_PKG_ERR_KEY
                                   unless skip_signature */
    bool skip_signature;        /* --allow-unsigned with a manifest but no key: check the rest */
    int64_t min_version;        /* 0: no floor */
    int64_t now;                /* 0: time(NULL) */
    const char *device_class;   /* NULL: this machine's ("cpu-x86_64", ...; "cpu" always matches) */
    const char *manifest_path;  /* NULL: model_path + EL_MANIFEST_SUFFIX; artifacts stay relative to
                                   the model's folder either way */
} el_pkg_verify_opts;

/* Verifies the package whose model is model_path (manifest beside it, or
 * o->manifest_path).
 * On success *m (if given) holds the manifest (free with el_manifest_free);
 * on failure it is left empty. signed_by[17] (if given) gets the key id that
 * verified, or "" when the signature was skipped. */
el_pkg_check el_pkg_verify(const char *model_path, const el_pkg_verify_opts *o, el_manifest *m,
                           char signed_by[17], el_pkg_error *err);

/* The device classes this build runs on: "cpu" and "cpu-<machine>". */
const char *el_pkg_device_class(void);

/* One line describing the package on stderr-friendly text: name, version,
 * key, SHA-256 prefix, quant, arch, expiry. */
void el_pkg_describe(const el_manifest *m, const char *signed_by, char *out, size_t cap);

/* For unsigned files: SHA-256 prefix, dominant tensor type and arch of a GGUF. */
el_pkg_check el_pkg_describe_unsigned(const char *model_path, char *out, size_t cap, el_pkg_error *err);

#endif
