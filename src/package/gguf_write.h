/*
 * gguf_write.h — a GGUF v3 writer that streams tensor data to disk.
 *
 * Use: create a writer, add metadata key/values (any GGUF value type,
 * including string arrays) and tensor infos (name, type, shape) in the
 * order they should appear, then el_gguf_w_begin() writes the header, the
 * metadata and the tensor infos to a temporary file beside the target, and
 * el_gguf_w_tensor_data() is called once per tensor, in the order the infos
 * were added, with exactly that tensor's bytes (it may be called several
 * times per tensor with consecutive pieces). el_gguf_w_finish() pads, flushes,
 * fsyncs and renames the temporary file over the target, so a reader never
 * sees a half-written file; el_gguf_w_free() of an unfinished writer removes
 * the temporary file.
 *
 * Tensor offsets are laid out at add time (each tensor starts at a multiple
 * of the alignment, general.alignment if set as a u32 before the first
 * tensor is added, else 32), so tensor data is never held in memory by the
 * writer: a caller converts one tensor at a time and hands it over.
 *
 * Pure C (libc): part of the core library (L1 package).
 */
#ifndef EL_PACKAGE_GGUF_WRITE_H
#define EL_PACKAGE_GGUF_WRITE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "edgellm.h"
#include "package/gguf.h"

typedef struct el_gguf_writer el_gguf_writer;

el_gguf_writer *el_gguf_writer_new(void);
/* Frees; removes the temporary file if el_gguf_w_finish did not succeed. */
void el_gguf_writer_free(el_gguf_writer *w);

/* Metadata. Keys must be unique (a duplicate is an error). Every setter
 * returns 0 or an el_status (also recorded; later calls then fail too, and
 * el_gguf_w_error() gives the first message). */
int el_gguf_w_u8(el_gguf_writer *w, const char *key, uint8_t v);
int el_gguf_w_i8(el_gguf_writer *w, const char *key, int8_t v);
int el_gguf_w_u16(el_gguf_writer *w, const char *key, uint16_t v);
int el_gguf_w_i16(el_gguf_writer *w, const char *key, int16_t v);
int el_gguf_w_u32(el_gguf_writer *w, const char *key, uint32_t v);
int el_gguf_w_i32(el_gguf_writer *w, const char *key, int32_t v);
int el_gguf_w_u64(el_gguf_writer *w, const char *key, uint64_t v);
int el_gguf_w_i64(el_gguf_writer *w, const char *key, int64_t v);
int el_gguf_w_f32(el_gguf_writer *w, const char *key, float v);
int el_gguf_w_f64(el_gguf_writer *w, const char *key, double v);
int el_gguf_w_bool(el_gguf_writer *w, const char *key, bool v);
int el_gguf_w_str(el_gguf_writer *w, const char *key, const char *s);
int el_gguf_w_strn(el_gguf_writer *w, const char *key, const char *s, size_t len);
/* An array of n scalars of type t (not STRING/ARRAY); data holds n * size(t) bytes
 * (BOOL elements are one byte, 0 or 1). */
int el_gguf_w_arr(el_gguf_writer *w, const char *key, el_gguf_vtype t, const void *data, uint64_t n);
/* An array of n strings; lens may be NULL (then strlen). */
int el_gguf_w_arr_str(el_gguf_writer *w, const char *key, const char *const *strs, const size_t *lens, uint64_t n);
bool el_gguf_w_has(const el_gguf_writer *w, const char *key);

/* A tensor info: ne[0] is the row length (a multiple of the type's block size).
 * Returns 0 or an el_status. */
int el_gguf_w_add_tensor(el_gguf_writer *w, const char *name, int type, int n_dims, const int64_t *ne);
int64_t el_gguf_w_n_tensors(const el_gguf_writer *w);
/* Bytes of tensor i's data. */
size_t el_gguf_w_tensor_nbytes(const el_gguf_writer *w, int64_t i);
/* Total bytes the finished file will have. */
uint64_t el_gguf_w_file_size(const el_gguf_writer *w);

/* Writes header, metadata and tensor infos to PATH's temporary file. */
int el_gguf_w_begin(el_gguf_writer *w, const char *path, el_error *err);
/* The next bytes of tensor data (tensors in order; pieces of one tensor consecutive). */
int el_gguf_w_tensor_data(el_gguf_writer *w, const void *data, size_t n, el_error *err);
/* Checks every tensor got all its bytes, syncs and renames into place. */
int el_gguf_w_finish(el_gguf_writer *w, el_error *err);

/* The first error recorded by a setter (empty if none). */
const char *el_gguf_w_error(const el_gguf_writer *w);

#endif
