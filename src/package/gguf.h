/*
 * gguf.h — a validating reader of GGUF v2/v3 files over mmap.
 *
 * Contract: el_gguf_open() maps the file read-only (a regular file only: a
 * FIFO, device, socket or directory is refused without blocking) and checks, before anything
 * is used, that every count, string length, array length, dimension and
 * offset lies inside the file, that tensor data is aligned, in the file and
 * not overlapping, and that every tensor type is a known ggml type. A bad file
 * gives a typed error (el_status) whose message names the field or tensor —
 * never a crash, never an out-of-bounds read. After a successful open every
 * accessor below is safe without further checks.
 *
 * Strings (el_str) point into the mapping and are NOT NUL-terminated.
 */
#ifndef EL_PACKAGE_GGUF_H
#define EL_PACKAGE_GGUF_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "edgellm.h"

typedef enum {
    EL_GGUF_UINT8 = 0, EL_GGUF_INT8 = 1, EL_GGUF_UINT16 = 2, EL_GGUF_INT16 = 3,
    EL_GGUF_UINT32 = 4, EL_GGUF_INT32 = 5, EL_GGUF_FLOAT32 = 6, EL_GGUF_BOOL = 7,
    EL_GGUF_STRING = 8, EL_GGUF_ARRAY = 9, EL_GGUF_UINT64 = 10, EL_GGUF_INT64 = 11,
    EL_GGUF_FLOAT64 = 12, EL_GGUF_TYPE_COUNT
} el_gguf_vtype;

typedef struct el_str { const char *ptr; uint64_t len; } el_str;

typedef struct el_gguf_kv {
    el_str key;
    el_gguf_vtype type;     /* value type */
    el_gguf_vtype arr_type; /* element type when type == ARRAY */
    uint64_t arr_n;         /* element count when type == ARRAY */
    const uint8_t *data;    /* the value bytes (for arrays: the first element) */
} el_gguf_kv;

typedef struct el_gguf_tensor {
    el_str name;
    int n_dims;         /* 1..4 */
    int64_t ne[4];      /* ne[0] = elements per row (innermost); unused dims = 1 */
    int type;           /* el_type id */
    uint64_t offset;    /* relative to the data section */
    const void *data;   /* pointer into the mapping */
    size_t nbytes;
} el_gguf_tensor;

typedef struct el_gguf el_gguf;

el_gguf *el_gguf_open(const char *path, el_error *err);
/* Parse a buffer the caller owns (tests, fuzzing). The buffer must outlive the handle. */
el_gguf *el_gguf_open_buffer(const void *buf, size_t size, el_error *err);
void el_gguf_close(el_gguf *g);

uint32_t el_gguf_version(const el_gguf *g);
size_t el_gguf_alignment(const el_gguf *g);
size_t el_gguf_file_size(const el_gguf *g);
const uint8_t *el_gguf_base(const el_gguf *g); /* start of the mapping */

int64_t el_gguf_n_kv(const el_gguf *g);
const el_gguf_kv *el_gguf_kv_at(const el_gguf *g, int64_t i);
const el_gguf_kv *el_gguf_find(const el_gguf *g, const char *key); /* NULL if absent */

int64_t el_gguf_n_tensors(const el_gguf *g);
const el_gguf_tensor *el_gguf_tensor_at(const el_gguf *g, int64_t i);
const el_gguf_tensor *el_gguf_find_tensor(const el_gguf *g, const char *name);

/*
 * The values check of a tensor's data, for the block formats that have
 * invalid encodings the structure checks cannot see. Today that is MXFP4:
 * a block whose E8M0 exponent is 0xFF (NaN in the MX spec; llama.cpp's
 * ggml_validate_row_data refuses it too) -> EL_ERR_BAD_TENSOR naming the
 * tensor and the block. Reads one byte per 17-byte block, i.e. every cache
 * line of the tensor (a full read of it); other types return EL_OK without
 * touching the data. The loader runs it on each MXFP4 weight it binds.
 */
el_status el_gguf_check_values(const el_gguf_tensor *t, el_error *err);

/* Typed getters: false if absent or not convertible (integers of any width
 * convert when the value fits; floats accept FLOAT32/FLOAT64). */
bool el_gguf_get_u32(const el_gguf *g, const char *key, uint32_t *out);
bool el_gguf_get_i64(const el_gguf *g, const char *key, int64_t *out);
bool el_gguf_get_f32(const el_gguf *g, const char *key, float *out);
bool el_gguf_get_bool(const el_gguf *g, const char *key, bool *out);
bool el_gguf_get_str(const el_gguf *g, const char *key, el_str *out);
/* Array value: element type, count and pointer to first element. */
bool el_gguf_get_arr(const el_gguf *g, const char *key, el_gguf_vtype *type, uint64_t *n, const uint8_t **data);

/* Walk a validated string array: reads the string at *p and advances *p. */
el_str el_gguf_str_next(const uint8_t **p);
/* Element i (scalar arrays only) converted; false if type not numeric. */
bool el_gguf_arr_f32(const el_gguf_kv *kv, uint64_t i, float *out);
bool el_gguf_arr_i64(const el_gguf_kv *kv, uint64_t i, int64_t *out);

bool el_str_eq(el_str s, const char *c);
/* malloc'd NUL-terminated copy (caller frees). */
char *el_str_dup(el_str s);
size_t el_gguf_vtype_size(el_gguf_vtype t); /* 0 for STRING/ARRAY */
const char *el_gguf_vtype_name(el_gguf_vtype t);

#endif
