/*
 * pkg_error.h — how the package code (manifest, keys, verification, the
 * store, durable writes) reports a failure: which check failed (el_pkg_check,
 * each with its own name and process exit code) and a message.
 *
 * Contract: a function of src/deploy that fails returns a check other than
 * EL_PKG_OK and, when given an el_pkg_error, sets it to that check and a
 * one-line message. This unit depends on nothing else of the package code:
 * every other unit of src/deploy may include it.
 */
#ifndef EL_DEPLOY_PKG_ERROR_H
#define EL_DEPLOY_PKG_ERROR_H

/* Which check failed. Each has its own name (el_pkg_check_name) and exit code. */
typedef enum el_pkg_check {
    EL_PKG_OK = 0,
    EL_PKG_ERR_IO,          /* "io": a file could not be read or written */
    EL_PKG_ERR_NO_MANIFEST, /* "manifest": no manifest beside the model */
    EL_PKG_ERR_MALFORMED,   /* "manifest": not JSON, not canonicalizable, or a field wrong */
    EL_PKG_ERR_KEY,         /* "key": not signed by any trusted key (wrong key), or no trusted key */
    EL_PKG_ERR_SIGNATURE,   /* "signature": a trusted key's signature does not verify (forged/altered) */
    EL_PKG_ERR_EXPIRED,     /* "expiry": the manifest expired */
    EL_PKG_ERR_VERSION,     /* "version": lower than the floor (downgrade / rollback attack) */
    EL_PKG_ERR_RUNTIME,     /* "runtime": needs a newer runtime */
    EL_PKG_ERR_DEVICE,      /* "device": this device class is not supported */
    EL_PKG_ERR_SIZE,        /* "size": an artifact's size differs (truncated, extended) */
    EL_PKG_ERR_HASH,        /* "hash": an artifact's SHA-256 differs */
    EL_PKG_ERR_SMOKE,       /* "smoke": the smoke test's tokens differ from the recorded ones */
    EL_PKG_ERR_NOSPACE,     /* "space": not enough free space in the store */
    EL_PKG_ERR_STORE,       /* "store": store state missing, unreadable or inconsistent */
    EL_PKG_ERR_USAGE,       /* "usage": bad argument */
    EL_PKG_CHECK_COUNT
} el_pkg_check;

typedef struct el_pkg_error {
    el_pkg_check check;
    char msg[512];
} el_pkg_error;

const char *el_pkg_check_name(el_pkg_check c);
/* Process exit code for a failed check (10 + check), so scripts can tell them apart. */
int el_pkg_exit_code(el_pkg_check c);
/* Sets err (may be NULL) and returns c. */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
el_pkg_check el_pkg_fail(el_pkg_error *err, el_pkg_check c, const char *fmt, ...);

#endif
