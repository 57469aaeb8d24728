/*
 * keys.c — Ed25519 package keys with libsodium: key pairs, key files, key
 * ids (contract in keys.h).
 */
#include "deploy/keys.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "deploy/fsutil.h"
#include "deploy/hex.h"
#include "util/file.h"

bool el_pkg_init(void) { return sodium_init() >= 0; }

#define PUB_TAG "edgellm-ed25519-public "
#define SEC_TAG "edgellm-ed25519-secret "

void el_pkg_keyid(const uint8_t pk[EL_PKG_PUB_BYTES], char out[17]) {
    uint8_t h[crypto_hash_sha256_BYTES];
    crypto_hash_sha256(h, pk, EL_PKG_PUB_BYTES);
    el_hex_encode(h, 8, out);
}

el_pkg_check el_pkg_keygen(const char *base, bool force, el_pubkey *out, el_pkg_error *err) {
    if (!el_pkg_init()) return el_pkg_fail(err, EL_PKG_ERR_IO, "libsodium failed to initialise");
    char sec_path[PATH_MAX], pub_path[PATH_MAX];
    if (snprintf(sec_path, sizeof sec_path, "%s.sec", base) >= (int)sizeof sec_path ||
        snprintf(pub_path, sizeof pub_path, "%s.pub", base) >= (int)sizeof pub_path)
        return el_pkg_fail(err, EL_PKG_ERR_USAGE, "%s: path too long", base);
    uint8_t pk[crypto_sign_PUBLICKEYBYTES], sk[crypto_sign_SECRETKEYBYTES];
    crypto_sign_keypair(pk, sk);
    char line[sizeof SEC_TAG + 2 * crypto_sign_SECRETKEYBYTES + 2];
    char hex[2 * crypto_sign_SECRETKEYBYTES + 1];

    int fd = open(sec_path, O_WRONLY | O_CREAT | O_CLOEXEC | (force ? O_TRUNC : O_EXCL), 0600);
    if (fd < 0) {
        sodium_memzero(sk, sizeof sk);
        return el_pkg_fail(err, EL_PKG_ERR_IO, "%s: cannot create: %s%s", sec_path, strerror(errno),
                           errno == EEXIST ? " (use --force to overwrite)" : "");
    }
    fchmod(fd, 0600);
    el_hex_encode(sk, sizeof sk, hex);
    int n = snprintf(line, sizeof line, SEC_TAG "%s\n", hex);
    sodium_memzero(sk, sizeof sk);
    sodium_memzero(hex, sizeof hex);
    bool ok = el_fs_write_all(fd, line, (size_t)n) && fsync(fd) == 0;
    sodium_memzero(line, sizeof line);
    if (close(fd) != 0) ok = false;
    if (!ok) {
        unlink(sec_path);
        return el_pkg_fail(err, EL_PKG_ERR_IO, "%s: write failed: %s", sec_path, strerror(errno));
    }
    el_hex_encode(pk, sizeof pk, hex);
    n = snprintf(line, sizeof line, PUB_TAG "%s\n", hex);
    if (!el_fs_write_atomic(pub_path, line, (size_t)n, 0644, err)) {
        unlink(sec_path);
        return err ? err->check : EL_PKG_ERR_IO;
    }
    if (out) {
        memcpy(out->pk, pk, sizeof pk);
        el_pkg_keyid(pk, out->keyid);
    }
    return EL_PKG_OK;
}

/* Reads a one-line key file "TAG<hex>\n" of nbytes bytes into out. */
static el_pkg_check read_key_file(const char *path, const char *tag, uint8_t *out, size_t nbytes,
                                  el_pkg_error *err) {
    char why[256];
    FILE *f = el_fopen_regular(path, why, sizeof why);
    if (!f) return el_pkg_fail(err, EL_PKG_ERR_IO, "cannot open key: %s", why);
    char line[512];
    size_t r = fread(line, 1, sizeof line - 1, f);
    fclose(f);
    line[r] = 0;
    size_t tl = strlen(tag);
    if (r < tl || memcmp(line, tag, tl) != 0) {
        sodium_memzero(line, sizeof line);
        return el_pkg_fail(err, EL_PKG_ERR_KEY, "%s: not an edgellm %s key file", path,
                           strstr(tag, "public") ? "public" : "secret");
    }
    char *hex = line + tl;
    size_t hl = strcspn(hex, "\r\n");
    bool trailing_ok = hex[hl] == 0 || (hex[hl] == '\n' && hex[hl + 1] == 0) ||
                       (hex[hl] == '\r' && hex[hl + 1] == '\n' && hex[hl + 2] == 0);
    hex[hl] = 0;
    bool ok = trailing_ok && el_hex_decode(hex, out, nbytes);
    sodium_memzero(line, sizeof line);
    if (!ok) return el_pkg_fail(err, EL_PKG_ERR_KEY, "%s: malformed key (expected %zu hex digits)", path, 2 * nbytes);
    return EL_PKG_OK;
}

el_pkg_check el_pkg_read_pub(const char *path, el_pubkey *out, el_pkg_error *err) {
    if (!el_pkg_init()) return el_pkg_fail(err, EL_PKG_ERR_IO, "libsodium failed to initialise");
    el_pkg_check c = read_key_file(path, PUB_TAG, out->pk, EL_PKG_PUB_BYTES, err);
    if (c == EL_PKG_OK) el_pkg_keyid(out->pk, out->keyid);
    return c;
}

el_pkg_check el_pkg_read_sec(const char *path, uint8_t sk[EL_PKG_SEC_BYTES], el_pubkey *pub, el_pkg_error *err) {
    if (!el_pkg_init()) return el_pkg_fail(err, EL_PKG_ERR_IO, "libsodium failed to initialise");
    el_pkg_check c = read_key_file(path, SEC_TAG, sk, EL_PKG_SEC_BYTES, err);
    if (c) return c;
    uint8_t pk[EL_PKG_PUB_BYTES];
    crypto_sign_ed25519_sk_to_pk(pk, sk);
    /* libsodium's secret key is seed || public key: they must agree */
    if (memcmp(pk, sk + 32, 32) != 0) {
        sodium_memzero(sk, EL_PKG_SEC_BYTES);
        return el_pkg_fail(err, EL_PKG_ERR_KEY, "%s: secret key is inconsistent", path);
    }
    if (pub) {
        memcpy(pub->pk, pk, sizeof pk);
        el_pkg_keyid(pk, pub->keyid);
    }
    return EL_PKG_OK;
}
