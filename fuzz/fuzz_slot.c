/*
 * fuzz_slot.c — libFuzzer target for the slot-file parser
 * (src/server/slot_file.c: el_slot_parse, el_slot_name_check).
 *
 * Each input is parsed three ways: as it is against a fixed geometry (2
 * layers, n_ctx 64, no ring); against the geometry its own header claims
 * (when that header names at most 8 layers), so structurally plausible
 * inputs reach the size checks; and the same with its last 32 bytes replaced
 * by the right SHA-256, so mutations get past the checksum to the geometry,
 * type and token checks. A refusal has a known code and a message; an
 * accepted file keeps every promise of slot_file.h: n_tokens <= n_ctx, every
 * token id in the vocabulary, each layer's stored rows equal to
 * el_slot_rows_stored and its K and V bytes inside the input, before the
 * checksum. The input (up to its first NUL, and whole) is also a file name:
 * an accepted one is 1..128 bytes of [A-Za-z0-9._-] not starting with '.'.
 * By hand: clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE
 *   -Iinclude -Isrc fuzz/fuzz_slot.c src/server/slot_file.c src/util/error.c
 *   src/package/types.c src/package/quants.c -lsodium -lm
 * (slot_file.c's save/restore need the runtime: link build/libedgellm.a.)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "server/slot_file.h"

#define REQUIRE(c) do { if (!(c)) { fprintf(stderr, "invariant failed: %s\n", #c); abort(); } } while (0)

static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void check(const uint8_t *buf, size_t len, const el_slot_geom *g) {
    static el_slot_view v;
    el_error err;
    memset(&err, 0, sizeof err);
    const int rc = el_slot_parse(buf, len, g, &v, &err);
    if (rc) {
        REQUIRE(err.msg[0] != 0);
        REQUIRE(rc == EL_ERR_TRUNCATED || rc == EL_ERR_BAD_MAGIC || rc == EL_ERR_BAD_VERSION || rc == EL_ERR_BAD_COUNT ||
                rc == EL_ERR_BAD_VALUE || rc == EL_ERR_UNSUPPORTED);
        return;
    }
    REQUIRE(len >= 32 && v.n_tokens <= g->n_ctx);
    const uint8_t *end = buf + len - 32;
    REQUIRE(v.tokens >= buf && v.tokens + 4 * (size_t)v.n_tokens <= end);
    for (uint32_t i = 0; i < v.n_tokens; i++) REQUIRE(rd32(v.tokens + 4 * (size_t)i) < g->n_vocab);
    for (uint32_t il = 0; il < g->n_layer; il++) {
        const el_slot_layer *L = &g->layers[il];
        REQUIRE(v.n_stored[il] == el_slot_rows_stored(L, v.n_tokens));
        REQUIRE(v.k[il] >= buf && v.k[il] + (size_t)v.n_stored[il] * L->k_row_bytes <= end);
        REQUIRE(v.v[il] >= buf && v.v[il] + (size_t)v.n_stored[il] * L->v_row_bytes <= end);
    }
    REQUIRE(len == el_slot_file_bytes(g, v.n_tokens));
}

static void check_name(const char *s, size_t n) {
    el_error err;
    if (el_slot_name_check(s, n, &err)) {
        REQUIRE(err.msg[0] != 0);
        return;
    }
    REQUIRE(n >= 1 && n <= EL_SLOT_NAME_MAX && s[0] != '.');
    for (size_t i = 0; i < n; i++) {
        const char c = s[i];
        REQUIRE((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
                c == '-');
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static el_slot_geom fixed, own;
    static bool init;
    if (!init) {
        if (sodium_init() < 0) abort();
        memset(&fixed, 0, sizeof fixed);
        fixed.n_ctx = 64;
        fixed.n_layer = 2;
        fixed.n_vocab = 100;
        for (int il = 0; il < 2; il++)
            fixed.layers[il] = (el_slot_layer){1, 1, 16, 16, 64, 0};
        init = true;
    }
    check(data, size, &fixed);
    const char *nul = memchr(data, 0, size);
    check_name((const char *)data, nul ? (size_t)(nul - (const char *)data) : size);
    check_name((const char *)data, size);
    /* the geometry the input's header claims (layers with at most 4 KiB rows) */
    if (size < 80 + 32) return 0;
    const uint32_t nl = rd32(data + 52);
    if (nl < 1 || nl > 8 || size < 80 + 24 * (size_t)nl + 32) return 0;
    memset(&own, 0, sizeof own);
    memcpy(own.model_sha256, data + 16, 32);
    own.n_ctx = rd32(data + 48);
    own.n_layer = nl;
    own.n_vocab = rd32(data + 56);
    own.kv_ring = rd32(data + 60);
    own.n_swa = rd32(data + 64);
    for (uint32_t il = 0; il < nl; il++) {
        const uint8_t *p = data + 80 + 24 * (size_t)il;
        el_slot_layer *L = &own.layers[il];
        L->k_type = rd32(p);
        L->v_type = rd32(p + 4);
        L->k_row_bytes = rd32(p + 8) & 0xfff;
        L->v_row_bytes = rd32(p + 12) & 0xfff;
        L->n_rows = rd32(p + 16) & 0xffff;
        L->ring = own.kv_ring > 0 && L->n_rows == own.kv_ring;
    }
    check(data, size, &own);
    /* past the checksum: the same bytes with the right SHA-256 at the end */
    uint8_t *w = malloc(size);
    if (!w) return 0;
    memcpy(w, data, size);
    crypto_hash_sha256(w + size - 32, w, (unsigned long long)(size - 32));
    check(w, size, &own);
    check(w, size, &fixed);
    free(w);
    return 0;
}
