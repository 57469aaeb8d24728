/*
 * manifest_format.h — the manifest as a format: the el_manifest a manifest
 * file holds, its strict parser (JSON bytes, the canonical form of "signed",
 * the schema of every field), the canonical JSON serializer, the signed
 * object's builder and the dates it carries. The format itself (fields,
 * canonical form, signed message) is described in manifest.h.
 *
 * Contract: nothing read from a manifest is used before the schema check
 * accepts it: el_manifest_parse either fills *m with every field checked
 * (and m->message with the signed message: EL_MANIFEST_SIGN_PREFIX + the
 * canonical JSON of the parsed "signed") or leaves it empty and names the
 * field. It checks no signature and reads no file but the manifest.
 */
#ifndef EL_DEPLOY_MANIFEST_FORMAT_H
#define EL_DEPLOY_MANIFEST_FORMAT_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "deploy/keys.h"
#include "deploy/pkg_error.h"

#define EL_MANIFEST_FORMAT "edgellm-manifest/1"
#define EL_MANIFEST_SUFFIX ".manifest.json"
#define EL_MANIFEST_MAX_BYTES (4u << 20) /* a manifest file larger than this is refused */
#define EL_MANIFEST_SIGN_PREFIX "edgellm-manifest-v1\n" /* what the signed message starts with */
#define EL_MANIFEST_MAX_INT 9007199254740992.0       /* 2^53: the largest integer the format holds */

typedef struct el_pkg_artifact {
    char *path;   /* basename, relative to the manifest's folder */
    uint64_t size;
    uint8_t sha256[32];
} el_pkg_artifact;

typedef struct el_pkg_typecount { char *type; int64_t count; } el_pkg_typecount;

typedef struct el_manifest {
    char *name;
    int64_t version;
    char *created, *expires;
    int64_t expires_t;          /* seconds since the epoch */
    el_pkg_artifact *artifacts;
    int n_artifacts;
    /* fingerprint */
    char *source_checkpoint, *source_revision, *converter;
    char *quant_type;           /* the tensor type holding most bytes, e.g. "Q8_0" */
    int64_t quant_file_type;    /* general.file_type, -1 if absent */
    char *quant_config;         /* free text given at signing ("" if none) */
    el_pkg_typecount *tensor_types;
    int n_tensor_types;
    char *arch;
    uint8_t tokenizer_sha256[32];
    bool has_chat_template;
    uint8_t chat_template_sha256[32];
    char *runtime_min;
    char **device_classes;
    int n_device_classes;
    /* smoke expectation */
    bool has_smoke;
    char *smoke_prompt;
    int32_t *smoke_prompt_tokens;
    int n_smoke_prompt_tokens;
    int smoke_n_predict;
    int32_t *smoke_tokens;
    int n_smoke_tokens;
    /* signatures as read (not yet verified) */
    int n_sigs;
    char (*sig_keyids)[17];
    uint8_t (*sigs)[EL_PKG_SIG_BYTES];
    /* the signed message (prefix + canonical JSON of "signed"), as parsed */
    char *message;
    size_t message_len;
} el_manifest;

void el_manifest_free(el_manifest *m);

/* Parses a manifest file's bytes: JSON, the canonical form of "signed", the
 * schema of every field above. Does not check signatures. */
el_pkg_check el_manifest_parse(const char *json, size_t len, el_manifest *m, el_pkg_error *err);
el_pkg_check el_manifest_read(const char *path, el_manifest *m, el_pkg_error *err);

/* Canonical JSON (the form manifest.h describes) of any cJSON value,
 * appended to *out (an el_buf); false with a reason in why[256] if it has
 * none. */
struct cJSON;
struct el_buf;
bool el_manifest_canonical(const struct cJSON *v, struct el_buf *out, char why[256]);

/* "YYYY-MM-DD" (midnight UTC) or "YYYY-MM-DDTHH:MM:SSZ" -> seconds since the epoch. */
bool el_pkg_parse_date(const char *s, int64_t *out);

/* "<model>.manifest.json" into out; false if it does not fit. */
bool el_pkg_manifest_path(const char *model, char *out, size_t cap);

/* The "signed" object of m (format, fields, fingerprint, smoke) as cJSON,
 * for signing; NULL when out of memory. */
struct cJSON *el_manifest_build_signed(const el_manifest *m);

/* seconds since the epoch -> "YYYY-MM-DDTHH:MM:SSZ" (UTC). */
void el_pkg_format_date(int64_t t, char out[21]);

/* An artifact's name as the format allows it: a plain file name (no '/' or
 * '\', not starting with '.', printable, 1..255 bytes). */
bool el_pkg_plain_name(const char *p);

#endif
