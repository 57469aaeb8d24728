/*
 * fingerprint.h — what a package's files are: the deployment fingerprint of
 * a GGUF file (architecture, quantization, tensor types, the tokenizer's and
 * the chat template's SHA-256) and the streamed SHA-256 of any file.
 *
 * Contract: files are read, never mapped for hashing (el_pkg_hash_file
 * streams with read() and refuses anything but a regular file, so a device
 * or a FIFO cannot hang it); the tokenizer fingerprint covers every
 * tokenizer.* key but the chat templates, each as (key length, key, type
 * tag, value as stored), sorted by key bytes, so it is the same for the same
 * tokenizer whatever else the file holds.
 */
#ifndef EL_DEPLOY_FINGERPRINT_H
#define EL_DEPLOY_FINGERPRINT_H
#include <stddef.h>
#include <stdint.h>

#include "deploy/manifest_format.h"
#include "deploy/pkg_error.h"

/* Streamed SHA-256 of a file; size out as well (either may be NULL). */
el_pkg_check el_pkg_hash_file(const char *path, uint8_t out[32], uint64_t *size, el_pkg_error *err);

/* Fills m's arch, quant (type, file_type, tensor_types) and the tokenizer
 * and chat template hashes from the GGUF file at path; *general_name (if
 * given, once the file is open) gets a malloc'd copy of general.name, or
 * NULL. m owns what it gets
 * (el_manifest_free), also on failure. */
el_pkg_check el_pkg_fingerprint(const char *path, el_manifest *m, char **general_name, el_pkg_error *err);

/* The tokenizer fingerprint a manifest records (SHA-256 over every
 * tokenizer.* key but the chat templates, sorted by key) of a GGUF file;
 * `--draft-model` refuses a draft whose fingerprint differs from the target's. */
el_pkg_check el_pkg_tokenizer_sha256(const char *model_path, uint8_t out[32], el_pkg_error *err);

#endif
