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
 */
#ifndef EL_SERVICE_MANIFEST_H
#define EL_SERVICE_MANIFEST_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "edgellm.h"
#include "deploy/pkg_error.h"

#define EL_MANIFEST_FORMAT "edgellm-manifest/1"
#define EL_MANIFEST_SUFFIX ".manifest.json"
#define EL_MANIFEST_MAX_BYTES (4u << 20) /* a manifest file larger than this is refused */

/* ---- keys -------------------------------------------------------------- */
#define EL_PKG_PUB_BYTES 32
#define EL_PKG_SEC_BYTES 64
#define EL_PKG_SIG_BYTES 64

typedef struct el_pubkey {
    uint8_t pk[EL_PKG_PUB_BYTES];
    char keyid[17]; /* hex of SHA-256(pk)[0..8) */
} el_pubkey;

/* libsodium initialisation (idempotent); false if it cannot start. */
bool el_pkg_init(void);
/* Writes base.sec (0600, created exclusively unless force) and base.pub. */
el_pkg_check el_pkg_keygen(const char *base, bool force, el_pubkey *out, el_pkg_error *err);
el_pkg_check el_pkg_read_pub(const char *path, el_pubkey *out, el_pkg_error *err);
el_pkg_check el_pkg_read_sec(const char *path, uint8_t sk[EL_PKG_SEC_BYTES], el_pubkey *pub, el_pkg_error *err);
void el_pkg_keyid(const uint8_t pk[EL_PKG_PUB_BYTES], char out[17]);

/* ---- the manifest in memory -------------------------------------------- */
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

/* Canonical JSON (see the top of this file) of any cJSON value, appended to
 * *out (an el_buf); false with a reason in why[256] if it has none. */
struct cJSON;
struct el_buf;
bool el_manifest_canonical(const struct cJSON *v, struct el_buf *out, char why[256]);

/* "YYYY-MM-DD" (midnight UTC) or "YYYY-MM-DDTHH:MM:SSZ" -> seconds since the epoch. */
bool el_pkg_parse_date(const char *s, int64_t *out);

/* "<model>.manifest.json" into out; false if it does not fit. */
bool el_pkg_manifest_path(const char *model, char *out, size_t cap);

/* ---- signing ------------------------------------------------------------- */
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

/* ---- verification -------------------------------------------------------- */
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

/* Streamed SHA-256 of a file; size out as well (either may be NULL). */
el_pkg_check el_pkg_hash_file(const char *path, uint8_t out[32], uint64_t *size, el_pkg_error *err);

/* The device classes this build runs on: "cpu" and "cpu-<machine>". */
const char *el_pkg_device_class(void);

/* ---- smoke test ---------------------------------------------------------- */
/* Loads model_path, tokenizes m's smoke prompt, generates its n_predict tokens
 * greedily (EOS ignored) and compares prompt tokens and output tokens with the
 * recorded ones. EL_PKG_ERR_SMOKE names the first differing position. */
el_pkg_check el_pkg_smoke_check(const char *model_path, const el_manifest *m, el_pkg_error *err);

/* One line describing the package on stderr-friendly text: name, version,
 * key, SHA-256 prefix, quant, arch, expiry. */
void el_pkg_describe(const el_manifest *m, const char *signed_by, char *out, size_t cap);

/* For unsigned files: SHA-256 prefix, dominant tensor type and arch of a GGUF. */
el_pkg_check el_pkg_describe_unsigned(const char *model_path, char *out, size_t cap, el_pkg_error *err);

/* The tokenizer fingerprint a manifest records (SHA-256 over every
 * tokenizer.* key but the chat templates, sorted by key) of a GGUF file;
 * `--draft-model` refuses a draft whose fingerprint differs from the target's. */
el_pkg_check el_pkg_tokenizer_sha256(const char *model_path, uint8_t out[32], el_pkg_error *err);

#endif
