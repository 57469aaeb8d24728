/*
 * quantize.h — weight quantization as llama.cpp's quantizer writes it.
 *
 * el_quantize_rows turns float rows into a ggml block format with the same
 * block layouts, scale searches and rounding as llama.cpp's `llama-quantize`
 * without an importance matrix, so the bytes equal what llama.cpp writes for
 * the same input. el_quant_plan chooses each tensor's type for a model the
 * way llama.cpp does for a file type ("ftype"), including the mixes
 * Q4_K_M / Q5_K_M and the fallbacks for rows that are not a multiple of the
 * block size.
 *
 * Pure C (libc + libm): part of the core library (L1 package).
 */
#ifndef EL_PACKAGE_QUANTIZE_H
#define EL_PACKAGE_QUANTIZE_H
#include <stddef.h>
#include <stdint.h>

#include "package/types.h"

/* Quantizes nrows rows of n_per_row floats (n_per_row a multiple of the
 * type's block size) into dst, el_row_size(t, n_per_row) bytes per row.
 * Returns the bytes written, or 0 when t is not a supported target. */
size_t el_quantize_rows(el_type t, const float *src, void *dst, int64_t nrows, int64_t n_per_row);

/* True if el_quantize_rows supports t. */
int el_quantize_supported(el_type t);

/* A model-wide quantization choice, as llama.cpp's file types (general.file_type). */
typedef enum el_ftype {
    EL_FTYPE_F32, EL_FTYPE_F16, EL_FTYPE_BF16, EL_FTYPE_Q8_0,
    EL_FTYPE_Q4_0, EL_FTYPE_Q4_1, EL_FTYPE_Q5_0, EL_FTYPE_Q5_1,
    EL_FTYPE_Q4_K, EL_FTYPE_Q5_K, EL_FTYPE_Q6_K, /* "pure-ish" K types: llama.cpp's Q4_K_S, Q5_K_S, Q6_K */
    EL_FTYPE_Q4_K_M, EL_FTYPE_Q5_K_M,
    EL_FTYPE_COUNT
} el_ftype;

/* "Q4_K_M" etc. (case-insensitive) -> ftype; 0 on success, -1 if unknown. */
int el_ftype_parse(const char *name, el_ftype *out);
const char *el_ftype_name(el_ftype ft);
/* The general.file_type value llama.cpp writes for this ftype (LLAMA_FTYPE_*). */
int el_ftype_gguf_id(el_ftype ft);

/* One tensor of a model to be quantized: its GGUF name and shape (ne[0] = row length). */
typedef struct el_qtensor {
    const char *name;
    int n_dims;
    int64_t ne[4];
} el_qtensor;

/* The model facts llama.cpp's type choice looks at. */
typedef struct el_qmodel {
    const char *arch;  /* general.architecture: "llama", "qwen2", "qwen3", "gemma3" */
    int n_layer;
    int n_head, n_head_kv;
    int n_expert;      /* 0 for dense models */
} el_qmodel;

/* out[i] = the type llama.cpp's quantizer gives tensor t[i] for ftype ft
 * (1-D tensors and norms stay F32; mixes and block-size fallbacks applied).
 * Returns 0, or -1 if some tensor cannot be represented (message in err, errcap bytes). */
int el_quant_plan(el_ftype ft, const el_qmodel *m, const el_qtensor *t, int n, el_type *out,
                  char *err, size_t errcap);

#endif
