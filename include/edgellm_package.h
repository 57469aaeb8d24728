/*
 * edgellm_package.h — the public header of libedgellm-package: signed model
 * packages checked before a model is loaded.
 *
 * Contract:
 *   - A package is MODEL.gguf plus a manifest (by default
 *     MODEL.gguf.manifest.json beside it) signed with Ed25519. Before an app
 *     hands MODEL.gguf to el_model_load (edgellm.h), el_package_verify runs
 *     the same checks, in the same order and with the same names and codes,
 *     as `edgellm verify` and the load path of `edgellm run`: manifest → key →
 *     signature → expiry → version → runtime → device → size → hash (and,
 *     when asked, smoke). The first that fails is returned and named.
 *   - el_package_store_active resolves the active version of an on-device
 *     store (`edgellm install --store DIR`) to its model path, verified
 *     against the store's own trusted key — what `edgellm run --store DIR`
 *     loads.
 *   - Errors are returned, never printed; the library has no global state
 *     an app can observe and needs no initialisation call. Thread-safe: calls
 *     share nothing but read-only files.
 *   - Verification reads the files (sizes with stat, SHA-256 streamed with
 *     read()); it never maps or loads the model unless smoke is asked for.
 *     Between a successful verify and the app's el_model_load the file can
 *     only change if someone can write it: keep packages where the app's
 *     users cannot.
 *
 * This library is separate from libedgellm (the core runtime needs only libc,
 * libm, pthreads and PCRE2): it adds libsodium (Ed25519, SHA-256) and cJSON
 * (the manifest). Link it with pkg-config `edgellm-package` or CMake
 * `edgellm::package` (static: `edgellm::package_static`).
 *
 * ABI rules (libedgellm-package.so.EL_PACKAGE_ABI_VERSION; the SONAME changes
 * when one breaks), the same as edgellm.h's:
 *   - Only what this header declares (EL_PACKAGE_API) is exported.
 *   - Structs the caller fills (el_package_params) and structs the library
 *     fills in the caller's memory (el_package_info) end in reserved space:
 *     later versions take new fields from it, and zero there keeps the old
 *     meaning. Zero-initialise them. el_package_error is frozen.
 *   - Every enum value is spelled out and never changes; new values are only
 *     added after the last one. Unknown values must be tolerated by callers.
 *   - Functions are only added; a changed signature is a new name.
 *
 * Bad input: NULL pointers where a path is required are EL_PACKAGE_ERR_USAGE;
 * a NULL info or err is allowed (nothing is written there). Every byte of a
 * manifest, key and store state is validated (the parsers are fuzzed:
 * fuzz/fuzz_manifest.c).
 */
#ifndef EDGELLM_PACKAGE_H
#define EDGELLM_PACKAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define EL_PACKAGE_API __attribute__((visibility("default")))
#else
#define EL_PACKAGE_API
#endif

#define EL_PACKAGE_ABI_VERSION 0 /* the shared library's SONAME: libedgellm-package.so.0 */

/* Which check failed. The names (el_package_check_name) are those the CLI
 * prints ("error: <name> check failed: ..."), the exit codes
 * (el_package_exit_code: 10 + value) those `edgellm verify` exits with. */
typedef enum {
    EL_PACKAGE_OK = 0,
    EL_PACKAGE_ERR_IO = 1,          /* "io": a file could not be read */
    EL_PACKAGE_ERR_NO_MANIFEST = 2, /* "manifest": no manifest */
    EL_PACKAGE_ERR_MALFORMED = 3,   /* "manifest": not strict JSON, a field wrong, or for another file */
    EL_PACKAGE_ERR_KEY = 4,         /* "key": signed only by untrusted keys, or no trusted key given */
    EL_PACKAGE_ERR_SIGNATURE = 5,   /* "signature": a trusted key's signature does not verify */
    EL_PACKAGE_ERR_EXPIRED = 6,     /* "expiry": the manifest's expiry has passed */
    EL_PACKAGE_ERR_VERSION = 7,     /* "version": lower than the floor (min_version, the store's active) */
    EL_PACKAGE_ERR_RUNTIME = 8,     /* "runtime": needs a newer runtime than this library's */
    EL_PACKAGE_ERR_DEVICE = 9,      /* "device": this device's class is not listed */
    EL_PACKAGE_ERR_SIZE = 10,       /* "size": an artifact's size differs (truncated, extended, missing) */
    EL_PACKAGE_ERR_HASH = 11,       /* "hash": an artifact's SHA-256 differs */
    EL_PACKAGE_ERR_SMOKE = 12,      /* "smoke": the greedy smoke test gave other tokens than recorded */
    EL_PACKAGE_ERR_SPACE = 13,      /* "space": (store installs; not returned by this header's calls) */
    EL_PACKAGE_ERR_STORE = 14,      /* "store": no active version, damaged state, slot/state mismatch */
    EL_PACKAGE_ERR_USAGE = 15       /* "usage": a bad argument (NULL path, pub and store both given, ...) */
} el_package_check;

typedef struct el_package_error {
    el_package_check check;
    char msg[512]; /* what failed and where (file, numbers) */
} el_package_error;

typedef struct el_package_params {
    const char *manifest;  /* the manifest file; NULL: MODEL + ".manifest.json" */
    const char *pub;       /* trusted public key file (`edgellm keygen`'s NAME.pub) */
    const char *store;     /* or a store folder: its DIR/trusted.pub is the key and its
                              active version the version floor. Exactly one of pub
                              and store is required (else EL_PACKAGE_ERR_KEY /
                              EL_PACKAGE_ERR_USAGE) */
    int64_t min_version;   /* 0: no floor of its own */
    int64_t now;           /* seconds since the epoch for the expiry check; 0: the clock */
    bool smoke;            /* also load the model and run the manifest's greedy smoke test */
    void *reserved[8];     /* zero */
} el_package_params;

/* What a verified package is (filled on success; zeroed on failure). */
typedef struct el_package_info {
    char name[128];        /* the package name */
    int64_t version;
    char key_id[17];       /* the trusted key that verified (16 hex digits) */
    char sha256[65];       /* the model file's SHA-256, hex */
    char quant[16];        /* the dominant tensor type, e.g. "Q4_K" */
    char arch[32];         /* general.architecture */
    char expires[24];      /* "YYYY-MM-DDTHH:MM:SSZ" */
    int64_t expires_t;     /* the same, seconds since the epoch */
    char model_path[4096]; /* the model file verified (for a store: inside its active slot) */
    char summary[1024];    /* the one-line description the CLI prints before loading */
    uint8_t reserved[256]; /* zero */
} el_package_info;

/* The library's version ("MAJOR.MINOR.PATCH", edgellm's EL_VERSION_STRING):
 * a manifest's runtime_min is compared with it. */
EL_PACKAGE_API const char *el_package_version(void);

/* The check's name ("manifest", "key", "signature", "expiry", "version",
 * "runtime", "device", "size", "hash", "smoke", "space", "store", "usage",
 * "io"; "ok" for EL_PACKAGE_OK; "?" for a value this version does not know). */
EL_PACKAGE_API const char *el_package_check_name(el_package_check c);

/* The CLI's exit status for a failed check: 10 + c (0 for EL_PACKAGE_OK). */
EL_PACKAGE_API int el_package_exit_code(el_package_check c);

/* Verifies the package of the model file `model` with p (NULL: all zero,
 * which fails the key check: a trusted key is always required). Returns
 * EL_PACKAGE_OK and fills info, or the first check that failed with err. */
EL_PACKAGE_API el_package_check el_package_verify(const char *model, const el_package_params *p,
                                                  el_package_info *info, el_package_error *err);

/* The active version of the store `store`: verified against DIR/trusted.pub
 * (every check above; the smoke test too when smoke), its path in
 * info->model_path. EL_PACKAGE_ERR_STORE when the store has no active version
 * or its state is damaged. */
EL_PACKAGE_API el_package_check el_package_store_active(const char *store, bool smoke, el_package_info *info,
                                                        el_package_error *err);

#ifdef __cplusplus
}
#endif
#endif
