/*
 * hex.h — the lowercase hex text the package formats use for keys, key ids,
 * signatures and SHA-256 digests.
 *
 * Contract: el_hex_encode writes 2n lowercase digits and a NUL;
 * el_hex_decode accepts exactly 2n lowercase hex digits (uppercase is not
 * canonical and is refused) and writes n bytes, false otherwise (out may be
 * partly written then). Header only: no state, no allocation.
 */
#ifndef EL_DEPLOY_HEX_H
#define EL_DEPLOY_HEX_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline void el_hex_encode(const uint8_t *b, size_t n, char *out) {
    static const char H[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = H[b[i] >> 4];
        out[2 * i + 1] = H[b[i] & 15];
    }
    out[2 * n] = 0;
}

static inline int el_hex_digit(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1; /* uppercase is not canonical: refused */
}

/* Exactly 2n lowercase hex digits. */
static inline bool el_hex_decode(const char *s, uint8_t *out, size_t n) {
    if (!s || strlen(s) != 2 * n) return false;
    for (size_t i = 0; i < n; i++) {
        int a = el_hex_digit((unsigned char)s[2 * i]), b = el_hex_digit((unsigned char)s[2 * i + 1]);
        if (a < 0 || b < 0) return false;
        out[i] = (uint8_t)(a << 4 | b);
    }
    return true;
}

#endif
