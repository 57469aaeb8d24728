/*
 * requantize.h — a GGUF model → the same model at another file type, as
 * llama.cpp's `llama-quantize IN OUT TYPE` does (no importance matrix).
 *
 * Contract: IN is opened with the validating GGUF reader; every metadata
 * key/value is copied in order, general.file_type set to the target
 * (llama.cpp's LLAMA_FTYPE id) and general.quantization_version to 2 (kept in
 * place when present, appended when not), the tensor infos are written in IN's
 * order with the types el_quant_plan chooses for the model (the choice of
 * llama.cpp's quantizer: mixes, fallbacks, tensors left F32), and each
 * tensor's data is: IN's bytes when its type does not change, else IN's
 * values (dequantized to float) quantized with el_quantize_rows. The output
 * appears atomically (gguf_write.h: temporary file, fsync, rename).
 *
 * Sources that are already quantized (anything but F32/F16/BF16) are refused
 * unless allow_requantize is set, as llama-quantize refuses them without
 * --allow-requantize: quantizing quantized values compounds the error. (F32,
 * F16 and BF16 targets from a quantized source are exact dequantizations.)
 * A tensor the target type cannot represent (NaN/Inf, F16 overflow) fails
 * the whole conversion with the tensor's name; no output file is left.
 * So does a source tensor whose values are invalid encodings
 * (el_gguf_check_values: an MXFP4 block exponent 0xFF), before anything is
 * written.
 *
 * When IN is quantized (allow_requantize) and its general.file_type is
 * already the target's, every tensor keeps its own type, whatever the plan
 * would choose (llama-quantize versions mix Q4_K_M differently): IN's
 * bytes, in the layout asked for.
 *
 * With layout_r16, eligible tensors are written in a weight layout: the
 * same bytes permuted (package/layout.h). A source tensor in a layout is
 * unpacked to its flat rows first, so a laid-out file converts back exactly.
 *
 * The bytes do not depend on n_threads. Pure C (libc, libm, pthreads): part
 * of the core library (L1 package).
 */
#ifndef EL_PACKAGE_REQUANTIZE_H
#define EL_PACKAGE_REQUANTIZE_H
#include <stdbool.h>
#include <stdint.h>

#include "edgellm.h"
#include "package/quantize.h"

typedef struct el_requant_params {
    el_ftype ftype;
    int n_threads;          /* 0: all CPUs */
    bool allow_requantize;  /* accept quantized source tensors */
    /* write the matrix weights (attention and FFN projections, output) that come out Q4_0, Q8_0, Q4_K or
     * Q5_0 with 16k rows in their R16 weight layout (package/layout.h: EL_TYPE_Q4_0_R16 ...), an
     * exact permutation of their bytes; a source in a layout is read through its flat rows either way */
    bool layout_r16;
    /* called after each tensor (and once at the start with done = 0) */
    void (*progress)(void *ud, uint64_t done, uint64_t total, const char *tensor);
    void *progress_ud;
} el_requant_params;

typedef struct el_requant_info {
    const char *arch;                /* points into a static copy; valid until the next call */
    int n_tensors;
    int n_requantized;               /* tensors whose type changed */
    int n_by_type[64];               /* output tensors per el_type (a layout's under its base type) */
    int n_layout;                    /* output tensors written in a weight layout */
    uint64_t in_bytes, out_bytes;    /* file sizes */
} el_requant_info;

el_requant_params el_requant_default_params(void);

/* 0 on success (info filled when non-NULL), else an el_status with err set. */
int el_requantize(const char *in_path, const char *out_path, const el_requant_params *p, el_requant_info *info,
                  el_error *err);

#endif
