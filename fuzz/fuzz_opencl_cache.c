/*
 * fuzz_opencl_cache.c — libFuzzer target for the OpenCL backend's
 * program-binary cache files (src/backend/opencl/bincache.c): bytes anything
 * may have written or cut, read back at every backend start.
 *
 * The input goes to el_clbin_parse under two keys (the one its own header
 * names, so mutations get past the key check, and a fixed one), and as a
 * file through el_clbin_load. An accepted input has the exact layout of
 * bincache.h (the payload is the rest of the input, non-empty, its checksum
 * right); anything else is refused without reading past the input. The
 * header el_clbin_header writes for the payload, followed by the payload,
 * is accepted and gives the payload back; with the checksum's last byte
 * changed, it is refused.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/opencl/bincache.h"

#define REQUIRE(c) do { if (!(c)) { fprintf(stderr, "invariant failed: %s\n", #c); abort(); } } while (0)

static uint64_t rd64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static void check_parse(const uint8_t *data, size_t size, uint64_t key) {
    /* a copy of exactly size bytes: ASan catches a read past it */
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) return;
    if (size) memcpy(buf, data, size);
    const uint8_t *p = NULL;
    size_t len = 0;
    const int rc = el_clbin_parse(buf, size, key, &p, &len);
    REQUIRE(rc == 0 || rc == -1);
    if (rc == 0) {
        REQUIRE(size >= EL_CLBIN_HEADER && memcmp(buf, "ELCLBIN1", 8) == 0);
        REQUIRE(rd64(buf + 8) == key);
        REQUIRE(p == buf + EL_CLBIN_HEADER && len == size - EL_CLBIN_HEADER && len > 0);
        REQUIRE(el_fnv1a(EL_FNV_INIT, p, len) == rd64(buf + 24));
    }
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint64_t own = size >= 16 ? rd64(data + 8) : 0;
    check_parse(data, size, own);
    check_parse(data, size, 0x0123456789abcdefull);

    /* header + payload (the input) round-trips; a wrong checksum is refused */
    if (size > 0 && size < (1u << 20)) {
        uint8_t *f = malloc(EL_CLBIN_HEADER + size);
        if (f) {
            el_clbin_header(f, 42, data, size);
            memcpy(f + EL_CLBIN_HEADER, data, size);
            const uint8_t *p;
            size_t len;
            REQUIRE(el_clbin_parse(f, EL_CLBIN_HEADER + size, 42, &p, &len) == 0);
            REQUIRE(len == size && memcmp(p, data, size) == 0);
            REQUIRE(el_clbin_parse(f, EL_CLBIN_HEADER + size, 43, &p, &len) == -1);
            REQUIRE(el_clbin_parse(f, EL_CLBIN_HEADER + size - 1, 42, &p, &len) == -1);
            f[31] ^= 1;
            REQUIRE(el_clbin_parse(f, EL_CLBIN_HEADER + size, 42, &p, &len) == -1);
            free(f);
        }
    }

    /* the same bytes as a file on disk */
    static char path[64];
    if (!path[0]) snprintf(path, sizeof path, "/tmp/fuzz_opencl_cache.%ld.bin", (long)getpid());
    FILE *fp = fopen(path, "wb");
    if (fp) {
        const int ok = fwrite(data, 1, size, fp) == size;
        fclose(fp);
        if (ok) {
            size_t len = 0;
            uint8_t *pl = el_clbin_load(path, own, &len);
            if (pl) {
                REQUIRE(size > EL_CLBIN_HEADER && len == size - EL_CLBIN_HEADER);
                REQUIRE(memcmp(pl, data + EL_CLBIN_HEADER, len) == 0);
                free(pl);
            }
        }
        unlink(path);
    }
    return 0;
}
