/*
 * bincache.c — reading and writing the OpenCL program-binary cache files
 * (layout and contract in bincache.h).
 */
#include "backend/opencl/bincache.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char k_magic[8] = {'E', 'L', 'C', 'L', 'B', 'I', 'N', '1'};

uint64_t el_fnv1a(uint64_t h, const void *p, size_t n) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static uint64_t rd64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static void wr64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

int el_clbin_parse(const uint8_t *buf, size_t n, uint64_t key, const uint8_t **payload, size_t *len) {
    if (!buf || n < EL_CLBIN_HEADER) return -1;
    if (memcmp(buf, k_magic, sizeof k_magic) != 0) return -1;
    if (rd64(buf + 8) != key) return -1;
    const uint64_t plen = rd64(buf + 16);
    if (plen == 0 || plen != (uint64_t)(n - EL_CLBIN_HEADER)) return -1;
    if (el_fnv1a(EL_FNV_INIT, buf + EL_CLBIN_HEADER, (size_t)plen) != rd64(buf + 24)) return -1;
    *payload = buf + EL_CLBIN_HEADER;
    *len = (size_t)plen;
    return 0;
}

void el_clbin_header(uint8_t *hdr, uint64_t key, const uint8_t *payload, size_t len) {
    memcpy(hdr, k_magic, sizeof k_magic);
    wr64(hdr + 8, key);
    wr64(hdr + 16, (uint64_t)len);
    wr64(hdr + 24, el_fnv1a(EL_FNV_INIT, payload, len));
}

uint8_t *el_clbin_load(const char *path, uint64_t key, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    uint8_t *buf = NULL, *out = NULL;
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < EL_CLBIN_HEADER ||
        st.st_size > (off_t)1 << 30)
        goto done;
    const size_t n = (size_t)st.st_size;
    buf = malloc(n);
    if (!buf || fread(buf, 1, n, f) != n) goto done;
    const uint8_t *p;
    size_t plen;
    if (el_clbin_parse(buf, n, key, &p, &plen) != 0) goto done;
    out = malloc(plen);
    if (!out) goto done;
    memcpy(out, p, plen);
    *len = plen;
done:
    free(buf);
    fclose(f);
    return out;
}

/* mkdir -p of path's folder. */
static int make_parents(const char *path) {
    char tmp[4096];
    const size_t n = strlen(path);
    if (n >= sizeof tmp) return -1;
    memcpy(tmp, path, n + 1);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(tmp, 0700) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    return 0;
}

int el_clbin_store(const char *path, uint64_t key, const uint8_t *payload, size_t len) {
    if (!payload || len == 0 || make_parents(path) != 0) return -1;
    char tmp[4200];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp) return -1;
    FILE *f = fopen(tmp, "wb");
    if (!f) return -1;
    uint8_t hdr[EL_CLBIN_HEADER];
    el_clbin_header(hdr, key, payload, len);
    int ok = fwrite(hdr, 1, sizeof hdr, f) == sizeof hdr && fwrite(payload, 1, len, f) == len;
    if (fclose(f) != 0) ok = 0;
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

int el_clbin_dir(char *out, size_t cap) {
    const char *e = getenv("EL_OPENCL_CACHE_DIR");
    int n;
    if (e && *e) n = snprintf(out, cap, "%s", e);
    else if ((e = getenv("XDG_CACHE_HOME")) && *e) n = snprintf(out, cap, "%s/edgellm/opencl", e);
    else if ((e = getenv("HOME")) && *e) n = snprintf(out, cap, "%s/.cache/edgellm/opencl", e);
    else return -1;
    return n > 0 && (size_t)n < cap ? 0 : -1;
}
