/*
 * keys.h — the Ed25519 keys that sign packages (libsodium): generating a key
 * pair, reading key files, key ids.
 *
 * Key files: NAME.pub holds "edgellm-ed25519-public <64 hex>\n", NAME.sec
 * "edgellm-ed25519-secret <128 hex>\n" (mode 0600). A key's id is the first
 * 8 bytes of SHA-256(public key), in hex.
 *
 * Contract: the secret key's text and bytes in this unit's own buffers are
 * wiped (sodium_memzero) once used; a key file that is not exactly such a
 * line (its end of line optional) is refused as EL_PKG_ERR_KEY; a secret key
 * whose public half disagrees with its seed is refused; keygen leaves no
 * NAME.sec behind when it fails.
 */
#ifndef EL_DEPLOY_KEYS_H
#define EL_DEPLOY_KEYS_H
#include <stdbool.h>
#include <stdint.h>

#include "deploy/pkg_error.h"

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

#endif
