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
 * Reference: the llama.cpp vendored by llama-cpp-python 0.3.36 (ggml 0.25.3,
 * libllama 0.5.0): ggml-quants.c's quantize_row_*_ref (the path taken when
 * no importance matrix is given) and llama-quant.cpp's
 * llama_tensor_get_type with default llama_model_quantize_params.
 * tests/test_quantize.c compares both against goldens that
 * tests/tools/gen_quantize_goldens.py recorded with that library.
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
 * Returns the bytes written, or 0 when t is not a supported target, the
 * shape does not fit, src holds a NaN or infinity, or a value or block scale
 * overflows its half-precision field (llama.cpp's quantizer rejects such a
 * tensor too: ggml_validate_row_data); dst's contents are then unspecified.
 * Float32-subnormal groups are quantized as ggml's x86-64 build does.
 * Reentrant, and rows are independent: callers may split the rows of a
 * tensor across threads and get the same bytes. */
size_t el_quantize_rows(el_type t, const float *src, void *dst, int64_t nrows, int64_t n_per_row);

/* One row of n floats (n % 32 == 0) to Q4_0 exactly as ggml's
 * quantize_row_q4_0_ref (the CPU backend's from_float for Q4_0, which is
 * what llama.cpp stores a Q4_0 KV cache row with), without
 * el_quantize_rows' checks: a non-finite input gives what ggml gives. */
void el_quantize_row_q4_0(const float *src, void *dst, int64_t n);

/* True if el_quantize_rows supports t: F32 (a copy), F16, BF16, Q8_0, Q4_0,
 * Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, MXFP4. */
int el_quantize_supported(el_type t);

/* A model-wide quantization choice, as llama.cpp's file types (general.file_type). */
typedef enum el_ftype {
    EL_FTYPE_F32, EL_FTYPE_F16, EL_FTYPE_BF16, EL_FTYPE_Q8_0,
    EL_FTYPE_Q4_0, EL_FTYPE_Q4_1, EL_FTYPE_Q5_0, EL_FTYPE_Q5_1,
    EL_FTYPE_Q4_K, EL_FTYPE_Q5_K, EL_FTYPE_Q6_K, /* "pure-ish" K types: llama.cpp's Q4_K_S, Q5_K_S, Q6_K */
    EL_FTYPE_Q4_K_M, EL_FTYPE_Q5_K_M,
    EL_FTYPE_MXFP4_MOE, /* llama.cpp's MXFP4_MOE: expert tensors MXFP4, the others Q8_0 */
    EL_FTYPE_MXFP4,     /* every quantized tensor MXFP4 (llama-quantize --pure MXFP4_MOE) */
    EL_FTYPE_COUNT
} el_ftype;

/* "Q4_K_M" etc. (case-insensitive) -> ftype; 0 on success, -1 if unknown.
 * Names: F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q4_K Q5_K Q6_K Q4_K_M Q5_K_M
 * MXFP4_MOE MXFP4;
 * llama.cpp's Q4_K_S / Q5_K_S are accepted for Q4_K / Q5_K. (Unlike
 * llama-quantize, where "Q4_K" is an alias of Q4_K_M.) */
int el_ftype_parse(const char *name, el_ftype *out);
const char *el_ftype_name(el_ftype ft); /* the first name above; "?" if out of range */
/* The general.file_type value llama.cpp writes for this ftype (LLAMA_FTYPE_*:
 * Q4_K -> 14 (Q4_K_S), Q5_K -> 16 (Q5_K_S), MXFP4 and MXFP4_MOE -> 38);
 * -1 if out of range. */
int el_ftype_gguf_id(el_ftype ft);
/* The ftype's default tensor type (llama_ftype_get_default_type): Q4_K_M -> Q4_K ... */
el_type el_ftype_base_type(el_ftype ft);

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
 * Returns 0, or -1 if some tensor cannot be represented (message in err, errcap bytes).
 *
 * t must list every tensor of the model (the choice depends on the others):
 * - tensors llama.cpp never quantizes (fewer than 2 dims counting as ggml
 *   does, names not ending in "weight", *_norm.weight, ffn_gate_inp, ...)
 *   get EL_TYPE_F32, i.e. they keep the F32 they are given;
 * - F32/F16/BF16 ftypes give every other tensor that type;
 * - output.weight, and token_embd.weight when there is no output.weight
 *   (tied embeddings), get Q6_K (Q8_0 for ftype Q8_0, or when the row does
 *   not split into blocks of the ftype's base type); untied token_embd keeps
 *   the base type;
 * - Q4_K_M/Q5_K_M: attn_v (also attn_qkv, attn_kv_b) and ffn_down get Q6_K
 *   in the "use_more_bits" layers (the first and last eighth and every third
 *   in between); Q4_K (Q4_K_S): attn_v of the first 4 such tensors and
 *   ffn_down of the first eighth of the layers get Q5_K; llama 70B (80
 *   layers, GQA) and qwen2 with 80 layers: Q4_K attn_v -> Q5_K; 8 experts:
 *   attn_v/attn_k -> Q8_0 and Q4_K(_M) attn_output -> Q5_K;
 * - rows not a multiple of the block: Q4_K -> Q5_0, Q5_K -> Q5_1,
 *   Q6_K -> Q8_0, Q2_K/Q3_K -> Q4_0, and F16 if still not a multiple of 32;
 * - MXFP4_MOE: tensors with a third dimension > 1 (experts) get MXFP4, all
 *   others Q8_0 (output.weight included); MXFP4 ("pure"): every quantized
 *   tensor MXFP4, F16 where its rows are not a multiple of 32. 
 * Counting follows llama.cpp: tensors are visited by layer number, then name. */
int el_quant_plan(el_ftype ft, const el_qmodel *m, const el_qtensor *t, int n, el_type *out,
                  char *err, size_t errcap);

#endif
