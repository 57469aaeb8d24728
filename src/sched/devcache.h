/*
 * devcache.h — the device capability cache: a backend's microbenchmark
 * (el_backend_i.measure) runs once per device and its el_device_caps are
 * kept in a file, keyed by the backend's cache_key (device + driver + build).
 *
 * Where: $EL_DEVCACHE_DIR if set, else $XDG_CACHE_HOME/edgellm/devices, else
 * $HOME/.cache/edgellm/devices; the file is <16 hex digits of FNV-1a-64 of
 * the key>.caps. Format (text, one `name value` per line, in this order):
 *
 *     edgellm-devcache 1
 *     key <the key, verbatim to the end of the line>
 *     name <caps.name>
 *     desc <caps.desc>
 *     kind <0..3>
 *     ops 0x<hex>
 *     matmul_types 0x<hex>
 *     kv_types 0x<hex>
 *     matmul_gflops <%.17g>
 *     matmul_gflops_type <el_type id> <%.17g>     (0 or more, nonzero rates only)
 *     gflops, mem_gbps, h2d_gbps, d2h_gbps, launch_us, matmul1_gbps, sync_us <%.17g>
 *     mem_bytes <decimal>
 *     end
 *
 * Contract: load answers 1 only for a complete file of this version whose
 * key equals the caller's and whose every value is in range (rates 0 or in
 * [EL_RATE_MIN, EL_RATE_MAX] of placement.h,
 * names fitting their fields); anything else — no file, a directory or other
 * non-regular file in its place, over 64 KiB, truncated (no `end`), garbage,
 * another version, another key — is 0 and leaves *caps untouched (the caller
 * measures again and stores). Store writes a temporary file in the same
 * directory and renames it over the old one (readers see the old or the new
 * file, never half of one); it creates the directories. Keys that are
 * empty, over 1023 bytes or hold a control byte (newline, tab) are refused
 * (load 0, store -1). `simulated` is never
 * stored: a loaded table is a measured one.
 */
#ifndef EL_SCHED_DEVCACHE_H
#define EL_SCHED_DEVCACHE_H
#include <stddef.h>

#include "backend/backend.h"

#define EL_DEVCACHE_VERSION 2 /* 2: matmul1_gbps and sync_us */
#define EL_DEVCACHE_MAX_BYTES 65536

/* 1: *caps filled from the cache; 0: miss, stale or corrupt (*caps untouched). */
int el_devcache_load(const char *key, el_device_caps *caps);
/* 0: stored; -1: not (bad key, no directory, write failed). */
int el_devcache_store(const char *key, const el_device_caps *caps);
/* The parser load uses, on text[0..len): 1 and *caps filled (simulated
 * false) when it is a complete cache file for key, else 0 (*caps untouched). */
int el_devcache_parse(const char *text, size_t len, const char *key, el_device_caps *caps);
/* The file the key maps to, in buf; 0, or -1 (no directory known, or too long). */
int el_devcache_path(const char *key, char *buf, size_t cap);

#endif
