/*
 * slot_file.h — a server slot's saved state (llama-server's
 * POST /slots/N?action=save|restore): the slot's tokens and its session's KV
 * cache in one file, validated like any other outside file before a byte of
 * it reaches a session.
 *
 * Format (version 1, all integers little-endian):
 *
 *   header   magic "ELSLOT\r\n" (8) | u32 version = 1 | u32 header bytes
 *            (= 80 + 24 * n_layer) | model SHA-256 (32: the GGUF file's) |
 *            u32 n_ctx | u32 n_layer | u32 n_vocab | u32 kv_ring (rows of a
 *            sliding-window layer's ring, 0: none) | u32 n_swa (window) |
 *            u32 n_tokens | u32 0 | u32 0
 *   layers   n_layer records of 6 u32: K type, V type (ggml type ids: F16 = 1;
 *            one per cache, so a file of another cache type is refused by
 *            name), K row bytes, V row bytes, rows of the cache (n_ctx, or
 *            kv_ring for a ring), rows stored (n_tokens, or min(n_tokens,
 *            kv_ring) for a ring: the ring's rows as they lie)
 *   tokens   n_tokens i32, each in 0..n_vocab-1
 *   data     per layer: K rows stored x K row bytes, then V likewise
 *   checksum SHA-256 of every byte before it (32)
 *
 * el_slot_parse checks, in this order, without trusting any count before it
 * is bounded: the magic, the version, the header size, the whole file's size
 * against the sizes the header implies (overflow-checked), the checksum
 * (corrupt), then that the file fits the expected geometry (another model,
 * context size, layer count, ring, KV type or row size: refused naming both
 * values) and every token id. Only then does el_slot_restore copy rows into
 * the session (nothing is written to it on any error).
 *
 * Files. A file name is 1..128 bytes of [A-Za-z0-9._-], not starting with a
 * dot (so no "..", no "/", no NUL, no hidden or temporary file can be named);
 * el_slot_save writes a temporary file inside the directory (openat on the
 * directory's descriptor, O_EXCL), fsyncs and renames it over the name, so a
 * reader never sees half a file and nothing is written outside the directory;
 * el_slot_restore opens with O_NOFOLLOW (a symlink in the directory is not
 * followed out of it) and refuses a file larger than the geometry allows
 * before reading it.
 */
#ifndef EL_SERVICE_SLOT_FILE_H
#define EL_SERVICE_SLOT_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "edgellm.h"

#define EL_SLOT_VERSION 1u
#define EL_SLOT_MAX_LAYERS 1024
#define EL_SLOT_NAME_MAX 128

typedef struct el_slot_layer {
    uint32_t k_type, v_type;         /* ggml type ids */
    uint32_t k_row_bytes, v_row_bytes;
    uint32_t n_rows;                 /* rows of this layer's cache */
    uint32_t ring;                   /* 1: a ring (position j in row j % n_rows) */
} el_slot_layer;

/* What a file must match to be restored into a session. */
typedef struct el_slot_geom {
    uint8_t model_sha256[32];
    uint32_t n_ctx, n_layer, n_vocab, kv_ring, n_swa;
    el_slot_layer layers[EL_SLOT_MAX_LAYERS];
} el_slot_geom;

/* A parsed file: pointers into the caller's buffer. */
typedef struct el_slot_view {
    uint32_t n_tokens;
    const uint8_t *tokens;           /* n_tokens little-endian i32 */
    const uint8_t *k[EL_SLOT_MAX_LAYERS], *v[EL_SLOT_MAX_LAYERS];
    uint32_t n_stored[EL_SLOT_MAX_LAYERS];
} el_slot_view;

/* The geometry of session s of a model whose file hashes to sha256. 0, or
 * EL_ERR_UNSUPPORTED (more layers than EL_SLOT_MAX_LAYERS). */
int el_slot_geom_of(const el_session *s, const uint8_t sha256[32], el_slot_geom *g, el_error *err);

/* Rows a layer stores for n_tokens positions. */
uint32_t el_slot_rows_stored(const el_slot_layer *L, uint32_t n_tokens);

/* Parses buf[0..len) (see the format above) against want. 0 with *out
 * filled, or an el_status with a message saying what is wrong and where:
 * EL_ERR_BAD_MAGIC, EL_ERR_BAD_VERSION, EL_ERR_TRUNCATED / EL_ERR_BAD_COUNT
 * (sizes), EL_ERR_BAD_VALUE (checksum, token ids), EL_ERR_UNSUPPORTED
 * (another model, context, geometry or KV type). */
int el_slot_parse(const uint8_t *buf, size_t len, const el_slot_geom *want, el_slot_view *out, el_error *err);

/* The size of a file holding n_tokens for geometry g (0 on overflow). */
size_t el_slot_file_bytes(const el_slot_geom *g, uint32_t n_tokens);

/* 0 if name is a file name a slot file may have, else EL_ERR_INVALID_ARG with why. */
int el_slot_name_check(const char *name, size_t len, el_error *err);

/* Writes the session's first n_tokens positions (toks: their ids; the
 * session must hold exactly n_tokens) to dir/name. 0 with *bytes set, or an
 * el_status with err filled (nothing left behind in dir on error); os_errno
 * (may be NULL) gets the OS error of a failed system call (ENOSPC: the disk
 * is full), 0 for any other failure. */
int el_slot_save(const el_session *s, const uint8_t sha256[32], const int32_t *toks, int n_tokens, const char *dir,
                 const char *name, size_t *bytes, int *os_errno, el_error *err);

/* Reads dir/name, validates it against session s, and only then loads it:
 * the session holds the file's positions and toks (capacity n_ctx) their
 * ids. Returns the token count (>= 0) with *bytes set, or -el_status with
 * err filled and the session untouched. */
int el_slot_restore(el_session *s, const uint8_t sha256[32], const char *dir, const char *name, int32_t *toks,
                    size_t *bytes, el_error *err);

#endif
