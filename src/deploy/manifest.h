/*
 * manifest.h — signed model packages (L6): keys, the manifest beside a GGUF
 * file, its deployment fingerprint, Ed25519 signatures (libsodium) and the
 * verification every load goes through.
 *
 * A package is MODEL.gguf plus MODEL.gguf.manifest.json in the same folder:
 *
 *   {"signed": {...}, "signatures": [{"keyid": "<16 hex>", "sig": "<128 hex>"}]}
 *
 * Only the "signed" object is covered by the signature and only it is read
 * after verification; everything outside it is ignored. Its fields:
 *
 *   format       "edgellm-manifest/1"
 *   name         package name (a plain file-name-like string)
 *   version      integer >= 1; installs must increase it (rollback defence)
 *   created      "YYYY-MM-DDTHH:MM:SSZ" (UTC)
 *   expires      "YYYY-MM-DDTHH:MM:SSZ" (UTC); the package is refused after it
 *   artifacts    [{"path": "<basename>", "size": N, "sha256": "<64 hex>"}],
 *                the model first; paths are plain names in the manifest's folder
 *   fingerprint  {"source_checkpoint", "source_revision", "converter",
 *                 "quant": {"type", "file_type", "config", "tensor_types": {TYPE: count}},
 *                 "arch", "tokenizer_sha256", "chat_template_sha256" (or null),
 *                 "runtime_min": "X.Y.Z", "device_classes": ["cpu", ...]}
 *   smoke        {"prompt", "prompt_tokens": [...], "n_predict", "tokens": [...]}
 *                or null: the greedy expectation `install` compares against
 *
 * Canonical form (what is signed). The signed message is the ASCII line
 * "edgellm-manifest-v1\n" followed by the canonical JSON of the parsed
 * "signed" value, which is:
 *   - objects: members sorted by key, bytewise (unsigned), a duplicate key is
 *     an error; "{" key ":" value ("," key ":" value)* "}", no whitespace;
 *   - arrays: elements in order, "," separated, no whitespace;
 *   - strings: '"' + bytes, with '"' -> \" , '\' -> \\ , bytes < 0x20 ->
 *     \u00xx (lowercase hex), every other byte verbatim + '"';
 *   - numbers: integers only, |n| <= 2^53, decimal, no leading zeros or '+';
 *     a fraction or exponent value is an error;
 *   - true, false, null.
 * The verifier never trusts the file's bytes or field order: it parses the
 * file, re-serializes "signed" this way and checks the signature over that.
 *
 * Keys: NAME.pub holds "edgellm-ed25519-public <64 hex>\n", NAME.sec
 * "edgellm-ed25519-secret <128 hex>\n" (mode 0600). A key's id is the first
 * 8 bytes of SHA-256(public key), in hex.
 *
 * Verification (el_pkg_verify) runs the checks in this order and stops at the
 * first that fails, naming it: manifest (present, parses, schema) →
 * signature (a trusted key's signature verifies; "key" if the manifest is
 * signed only by keys that are not trusted) → expiry → version (>= the
 * floor) → runtime (runtime_min <= this runtime) → device (this device's
 * class listed) → size (each artifact, so truncation is caught before
 * hashing) → hash (streamed SHA-256 of each artifact).
 *
 * This header gathers the package code's units, each with its own header
 * and contract; an arrow points from a unit to those it uses, never back:
 *
 *   pkg_error.h        which check failed, and why (el_pkg_error)
 *   fsutil.h           durable writes, copies, removal; path helpers
 *   keys.h             Ed25519 keys, key files, key ids
 *   manifest_format.h  el_manifest, the strict parser, canonical JSON, the
 *                      signed object's builder
 *   fingerprint.h      the GGUF fingerprint, streamed SHA-256 of a file
 *   smoke.h            the greedy smoke run and its comparison
 *   sign.h             el_pkg_sign: describe, sign, write the manifest
 *   verify.h           el_pkg_verify (the order above), descriptions
 *
 * store.h (the A/B store) and package_api.c (include/edgellm_package.h)
 * build on this header.
 */
#ifndef EL_SERVICE_MANIFEST_H
#define EL_SERVICE_MANIFEST_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "edgellm.h"
#include "deploy/fingerprint.h"
#include "deploy/keys.h"
#include "deploy/manifest_format.h"
#include "deploy/pkg_error.h"
#include "deploy/sign.h"
#include "deploy/smoke.h"
#include "deploy/verify.h"

#endif
