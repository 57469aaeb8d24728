/*
 * bincache.h — the OpenCL backend's program-binary cache files.
 *
 * A built program's binary is kept in one file per (device, driver, kernel
 * source, build options) key, so a second start skips the kernel compiler.
 * The file is outside input (anything may have written or cut it), so it is
 * read through el_clbin_parse, which accepts only the exact layout below and
 * never reads past the bytes it is given; a refused file means "build from
 * source and write a fresh one", never an error for the caller.
 *
 * Layout (little-endian): "ELCLBIN1" (8 bytes), u64 key hash, u64 payload
 * length, u64 FNV-1a 64 of the payload, payload (the CL_PROGRAM_BINARIES
 * bytes).
 *
 * Pure C (no OpenCL), so the fuzz target builds without a driver.
 */
#ifndef EL_BACKEND_OPENCL_BINCACHE_H
#define EL_BACKEND_OPENCL_BINCACHE_H
#include <stddef.h>
#include <stdint.h>

#define EL_CLBIN_HEADER 32

/* FNV-1a 64 over n bytes, continuing from h (start with EL_FNV_INIT). */
#define EL_FNV_INIT 0xcbf29ce484222325ull
uint64_t el_fnv1a(uint64_t h, const void *p, size_t n);

/* 0 and *payload and *len set (pointing into buf) if buf is a whole, intact
 * cache file for `key`; -1 otherwise (wrong magic or key, length not the
 * file's, checksum mismatch, empty payload). */
int el_clbin_parse(const uint8_t *buf, size_t n, uint64_t key, const uint8_t **payload, size_t *len);

/* Writes the header for a payload into hdr[EL_CLBIN_HEADER]. */
void el_clbin_header(uint8_t *hdr, uint64_t key, const uint8_t *payload, size_t len);

/* Whole-file helpers. el_clbin_load: the payload (malloc'd) of the cache
 * file at path if it parses, else NULL. el_clbin_store: writes
 * path.tmp.<pid> then renames it over path (creating missing folders of
 * path); 0 or -1 (the cache is then just absent). */
uint8_t *el_clbin_load(const char *path, uint64_t key, size_t *len);
int el_clbin_store(const char *path, uint64_t key, const uint8_t *payload, size_t len);

/* The cache folder: $EL_OPENCL_CACHE_DIR, else $XDG_CACHE_HOME/edgellm/opencl,
 * else $HOME/.cache/edgellm/opencl; 0, or -1 when none can be named. */
int el_clbin_dir(char *out, size_t cap);

#endif
