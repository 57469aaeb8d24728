/*
 * pkg_error.c — the package code's failure reports: check names, exit codes,
 * el_pkg_fail (contract in pkg_error.h).
 */
#include "deploy/pkg_error.h"

#include <stdarg.h>
#include <stdio.h>

static const char *const CHECK_NAMES[EL_PKG_CHECK_COUNT] = {
    [EL_PKG_OK] = "ok",           [EL_PKG_ERR_IO] = "io",
    [EL_PKG_ERR_NO_MANIFEST] = "manifest", [EL_PKG_ERR_MALFORMED] = "manifest",
    [EL_PKG_ERR_KEY] = "key",     [EL_PKG_ERR_SIGNATURE] = "signature",
    [EL_PKG_ERR_EXPIRED] = "expiry", [EL_PKG_ERR_VERSION] = "version",
    [EL_PKG_ERR_RUNTIME] = "runtime", [EL_PKG_ERR_DEVICE] = "device",
    [EL_PKG_ERR_SIZE] = "size",   [EL_PKG_ERR_HASH] = "hash",
    [EL_PKG_ERR_SMOKE] = "smoke", [EL_PKG_ERR_NOSPACE] = "space",
    [EL_PKG_ERR_STORE] = "store", [EL_PKG_ERR_USAGE] = "usage",
};

const char *el_pkg_check_name(el_pkg_check c) {
    return (unsigned)c < EL_PKG_CHECK_COUNT ? CHECK_NAMES[c] : "?";
}

int el_pkg_exit_code(el_pkg_check c) { return c == EL_PKG_OK ? 0 : 10 + (int)c; }

el_pkg_check el_pkg_fail(el_pkg_error *err, el_pkg_check c, const char *fmt, ...) {
    if (err) {
        err->check = c;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return c;
}
