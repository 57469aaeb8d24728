/*
 * accept_record.h — the deployment decision record an acceptance run
 * writes: the deployment fingerprint, the verdict per device class and the
 * hashes of the evidence, signed with the package key (Ed25519, as packages
 * are: the message is "edgellm-acceptance-v1\n" + the canonical JSON of
 * "signed", manifest.h's canonical form).
 *
 *   {"signed": {"format": "edgellm-acceptance/1", "created": "YYYY-MM-DDTHH:MM:SSZ",
 *               "fingerprint": {"model_sha256", "model_size", "arch", "quant_type",
 *                   "quant_file_type", "tensor_types": {TYPE: n}, "tokenizer_sha256",
 *                   "chat_template_sha256" | null, "runtime", "build", "package": {"name",
 *                   "version"} | null, "policies": {"routing": V, "matrix_format": V},
 *                   "matrix_name", "matrix_sha256"},
 *               "verdicts": {"<device class>": {"verdict": "pass"|"fail", "cells": N, "passed": N}},
 *               "evidence": [{"path": "<plain name>", "sha256": "<64 hex>"}]},
 *    "signatures": [{"keyid": "<16 hex>", "sig": "<128 hex>"}]}
 *
 * Contract: the parser is strict (unknown or duplicate keys, wrong types,
 * bad hex, evidence paths that are not plain names, more than the limits →
 * refused naming the path) and reads bytes only; el_accept_record_read
 * refuses anything but a regular file up to EL_ACCEPT_RECORD_MAX_BYTES.
 * el_accept_record_check verifies in order: signature (by a trusted key) →
 * fingerprint (model SHA-256 and the GGUF's fingerprint, when a model is
 * given) → device class (a "pass" verdict for it, when one is given) →
 * evidence (each file beside the record, when check_evidence), stopping at
 * the first failure with a message naming it.
 */
#ifndef EL_DEPLOY_ACCEPT_RECORD_H
#define EL_DEPLOY_ACCEPT_RECORD_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "deploy/keys.h"
#include "deploy/pkg_error.h"

#define EL_ACCEPT_RECORD_FORMAT "edgellm-acceptance/1"
#define EL_ACCEPT_RECORD_PREFIX "edgellm-acceptance-v1\n"
#define EL_ACCEPT_RECORD_MAX_BYTES (1u << 20)
#define EL_ACCEPT_RECORD_SUFFIX ".acceptance.json" /* beside a model: MODEL.gguf.acceptance.json */
#define EL_ACCEPT_MAX_CLASSES 16
#define EL_ACCEPT_MAX_EVIDENCE 16

typedef struct el_accept_verdict {
    char device_class[64];
    bool pass;
    int64_t cells, passed;
} el_accept_verdict;

typedef struct el_accept_evidence {
    char path[128];
    uint8_t sha256[32];
} el_accept_evidence;

typedef struct el_accept_record {
    struct cJSON *signed_obj;   /* the "signed" object as parsed (owned) */
    uint8_t model_sha256[32];
    int64_t model_size;
    int n_verdicts;
    el_accept_verdict verdicts[EL_ACCEPT_MAX_CLASSES];
    int n_evidence;
    el_accept_evidence evidence[EL_ACCEPT_MAX_EVIDENCE];
    int n_sigs;
    char sig_keyids[4][17];
    uint8_t sigs[4][EL_PKG_SIG_BYTES];
    char *message;              /* prefix + canonical JSON of "signed" */
    size_t message_len;
} el_accept_record;

/* What the run measured, to be recorded. */
typedef struct el_accept_record_in {
    const char *model_path;
    const char *package_name;   /* NULL: not a package */
    int64_t package_version;
    const char *matrix_name;
    const uint8_t *matrix_sha256;
    const char *routing_policy; /* the routing policy version the cells ran under */
    const el_accept_verdict *verdicts; int n_verdicts;
    const char *evidence_dir;   /* the evidence files are read from here */
    const char *const *evidence; int n_evidence; /* plain names */
    int64_t now;                /* 0: time(NULL) */
} el_accept_record_in;

/* Builds, signs with sk and writes the record to out_path atomically. */
el_pkg_check el_accept_record_write(const char *out_path, const el_accept_record_in *in,
                                    const uint8_t sk[EL_PKG_SEC_BYTES], el_pkg_error *err);

el_pkg_check el_accept_record_parse(const char *json, size_t len, el_accept_record *r, el_pkg_error *err);
el_pkg_check el_accept_record_read(const char *path, el_accept_record *r, el_pkg_error *err);
void el_accept_record_free(el_accept_record *r);

typedef struct el_accept_check_opts {
    const el_pubkey *trusted; int n_trusted;
    const char *model_path;     /* NULL: the fingerprint is not compared */
    const char *device_class;   /* NULL: no verdict required */
    const char *evidence_dir;   /* NULL: evidence not checked */
} el_accept_check_opts;

el_pkg_check el_accept_record_check(const el_accept_record *r, const el_accept_check_opts *o, el_pkg_error *err);

/* The store's acceptance gate (el_store_install calls it before copying).
 * A store's device policy, DIR/device-policy.json:
 *   {"device_class": "<class>", "require_acceptance": true|false}
 * (strict: unknown keys, wrong types refused naming the key). Without the
 * file, or with require_acceptance false, the gate is open. Otherwise the
 * package must bring MODEL.gguf.acceptance.json beside its model: a record
 * signed by the store's key (trusted), whose fingerprint matches the model
 * and whose verdict for the policy's device class is "pass"; else the
 * install is refused naming what failed. */
el_pkg_check el_accept_store_gate(const char *store_dir, const char *model_path, const el_pubkey *store_key,
                                  el_pkg_error *err);

#endif
