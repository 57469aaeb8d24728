/*
 * safetensors.h — a validating reader of Hugging Face safetensors
 * checkpoints (one file, or shards listed by model.safetensors.index.json),
 * over mmap.
 *
 * Format: u64 little-endian header length N | N bytes of JSON
 * {"name": {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]}, ...,
 *  "__metadata__": {string: string}} | data (offsets relative to its start).
 *
 * Contract: after a successful open every tensor has a known dtype, a shape
 * of at most 8 non-negative dims whose element count times the dtype size is
 * exactly end - begin, [begin, end) lies inside the file's data section, no
 * two tensors of one file overlap, names are unique across all shards, and
 * (sharded) the index's weight map and the shards' contents agree exactly.
 * A bad file gives an el_status with a message naming file, tensor and field.
 */
#ifndef EL_CONVERT_SAFETENSORS_H
#define EL_CONVERT_SAFETENSORS_H
#include <stddef.h>
#include <stdint.h>

#include "edgellm.h"

typedef enum el_st_dtype {
    EL_ST_F64, EL_ST_F32, EL_ST_F16, EL_ST_BF16, EL_ST_I64, EL_ST_I32, EL_ST_I16, EL_ST_I8,
    EL_ST_U8, EL_ST_BOOL, EL_ST_F8_E4M3, EL_ST_F8_E5M2, EL_ST_DTYPE_COUNT
} el_st_dtype;

#define EL_ST_MAX_DIMS 8

typedef struct el_st_tensor {
    const char *name;
    el_st_dtype dtype;
    int n_dims;                      /* 0 for a scalar */
    int64_t shape[EL_ST_MAX_DIMS];   /* outermost first (PyTorch order) */
    int64_t n_elements;
    const uint8_t *data;             /* inside the mapping (not aligned) */
    size_t nbytes;
    int shard;                       /* index of the file it lives in */
} el_st_tensor;

typedef struct el_st_set el_st_set;

/* dir/model.safetensors, or the shards named by dir/model.safetensors.index.json. */
el_st_set *el_st_open_dir(const char *dir, el_error *err);
/* One safetensors file. */
el_st_set *el_st_open_file(const char *path, el_error *err);
/* A safetensors image in memory the caller owns (tests, fuzzing); it must outlive the set. */
el_st_set *el_st_open_buffer(const void *buf, size_t size, el_error *err);
void el_st_close(el_st_set *s);

int el_st_count(const el_st_set *s);
const el_st_tensor *el_st_at(const el_st_set *s, int i);
const el_st_tensor *el_st_find(const el_st_set *s, const char *name); /* NULL if absent */
int el_st_n_shards(const el_st_set *s);

const char *el_st_dtype_name(el_st_dtype t);
size_t el_st_dtype_size(el_st_dtype t);
/* True for the float dtypes el_st_to_f32 converts (F32, F16, BF16). */
int el_st_dtype_is_float(el_st_dtype t);
/* Converts all n_elements of t to float32 (F32, F16, BF16 only). */
int el_st_to_f32(const el_st_tensor *t, float *dst, el_error *err);

#endif
