/*
 * types.h — the ggml tensor formats, declared once in one table (types.c).
 *
 * Each entry states what a format *is*: its GGUF type id (ggml numbering),
 * name, elements per block, bytes per block, and its reference conversions
 * (to_float: dequantize; from_float: quantize, only where edgellm needs it —
 * the activation formats Q8_0/Q8_1/Q8_K/F16/BF16/F32).  Kernels that compute
 * with a format live in the backend (src/backend/cpu/kernels.h).
 * Block layouts and rounding follow ggml bit for bit.
 */
#ifndef EL_PACKAGE_TYPES_H
#define EL_PACKAGE_TYPES_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    EL_TYPE_F32 = 0, EL_TYPE_F16 = 1, EL_TYPE_Q4_0 = 2, EL_TYPE_Q4_1 = 3,
    /* 4, 5: removed Q4_2 / Q4_3 */
    EL_TYPE_Q5_0 = 6, EL_TYPE_Q5_1 = 7, EL_TYPE_Q8_0 = 8, EL_TYPE_Q8_1 = 9,
    EL_TYPE_Q2_K = 10, EL_TYPE_Q3_K = 11, EL_TYPE_Q4_K = 12, EL_TYPE_Q5_K = 13,
    EL_TYPE_Q6_K = 14, EL_TYPE_Q8_K = 15, EL_TYPE_IQ2_XXS = 16, EL_TYPE_IQ2_XS = 17,
    EL_TYPE_IQ3_XXS = 18, EL_TYPE_IQ1_S = 19, EL_TYPE_IQ4_NL = 20, EL_TYPE_IQ3_S = 21,
    EL_TYPE_IQ2_S = 22, EL_TYPE_IQ4_XS = 23, EL_TYPE_I8 = 24, EL_TYPE_I16 = 25,
    EL_TYPE_I32 = 26, EL_TYPE_I64 = 27, EL_TYPE_F64 = 28, EL_TYPE_IQ1_M = 29,
    EL_TYPE_BF16 = 30,
    /* 31-33: removed Q4_0_4_4 etc. */
    EL_TYPE_TQ1_0 = 34, EL_TYPE_TQ2_0 = 35,
    /* 36-38: removed IQ4_NL_4_4 etc. */
    EL_TYPE_MXFP4 = 39,
    EL_TYPE_COUNT = 40,
    /* edgellm's own ids, 0x4000 + a weight layout (package/layout.h): Q8_0 / Q4_0
     * / Q4_K / Q5_0 rows interleaved by 16. Outside the table: no flat reader computes with them. */
    EL_TYPE_Q8_0_R16 = 0x4001, EL_TYPE_Q4_0_R16 = 0x4002, EL_TYPE_Q4_K_R16 = 0x4003, EL_TYPE_Q5_0_R16 = 0x4004
} el_type;

#define EL_QK_K 256 /* super-block size of the K-quants */

typedef void (*el_to_float_fn)(const void *src, float *dst, int64_t n);
typedef void (*el_from_float_fn)(const float *src, void *dst, int64_t n);

typedef struct el_type_info {
    const char *name;       /* "Q4_K" */
    int blck_size;          /* elements per block (0: id unused) */
    size_t type_size;       /* bytes per block */
    bool weights_supported; /* edgellm computes with tensors of this type */
    el_to_float_fn to_float;     /* NULL where not implemented; n % blck_size == 0 */
    el_from_float_fn from_float; /* NULL where edgellm never quantizes to it */
} el_type_info;

/* NULL for ids that are out of range or unused (4, 5, 31-33, 36-38). The
 * layout ids (EL_TYPE_Q8_0_R16 ... EL_TYPE_Q5_0_R16) have an entry with their
 * base type's block and byte sizes, no conversions, weights_supported false. */
const el_type_info *el_type_get(int type);
const char *el_type_name(int type); /* "?" when unknown */
/* Bytes of a row of n elements; 0 if n is not a multiple of the block size. */
size_t el_row_size(el_type t, int64_t n);

#endif
