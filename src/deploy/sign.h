/*
 * sign.h — signing a package: describe a GGUF file and the files beside it
 * (fingerprint, artifacts' sizes and SHA-256, the smoke expectation), sign
 * the canonical form of the result with an Ed25519 secret key and write the
 * manifest beside the model.
 *
 * Contract: what is signed is exactly what a verifier will canonicalize: the
 * manifest is parsed back through el_manifest_parse and its signed message
 * compared before anything is written; the manifest file is replaced
 * atomically (el_fs_write_atomic), so a failure leaves the old one or none.
 * Artifacts are plain file names in the model's folder, each listed once.
 */
#ifndef EL_DEPLOY_SIGN_H
#define EL_DEPLOY_SIGN_H
#include <stdbool.h>
#include <stdint.h>

#include "deploy/keys.h"
#include "deploy/pkg_error.h"

typedef struct el_pkg_sign_params {
    const char *name;              /* NULL: the model's basename without .gguf */
    int64_t version;               /* >= 1 */
    int64_t expires_t;             /* absolute; 0: created + 365 days */
    int64_t now;                   /* 0: time(NULL) */
    const char *source_checkpoint; /* NULL: general.name / general.basename or "unknown" */
    const char *source_revision;   /* NULL: "unknown" */
    const char *converter;         /* NULL: "unknown" */
    const char *quant_config;      /* NULL: "" */
    const char *runtime_min;       /* NULL: EL_VERSION_STRING */
    const char *const *device_classes; int n_device_classes; /* 0: {"cpu"} */
    const char *const *extra_artifacts; int n_extra;       /* more files beside the model */
    bool smoke;                    /* run the model and record the greedy expectation */
    const char *smoke_prompt;      /* NULL: "Once upon a time" */
    int smoke_n_predict;           /* 0: 8 */
} el_pkg_sign_params;

/* Describes model_path (fingerprint, artifacts, smoke), signs with sk and
 * writes model_path.manifest.json atomically (temp file, fsync, rename). */
el_pkg_check el_pkg_sign(const char *model_path, const uint8_t sk[EL_PKG_SEC_BYTES],
                         const el_pkg_sign_params *p, el_pkg_error *err);

#endif
