/*
 * pack.h — a Hugging Face model directory → one GGUF file the runtime loads.
 *
 * Input: config.json, model.safetensors (or shards + model.safetensors.index.json),
 * tokenizer.json, and when present tokenizer_config.json (special tokens, chat
 * template), generation_config.json, chat_template.jinja. Architectures:
 * llama (LlamaForCausalLM, MistralForCausalLM), qwen2, qwen3, gemma3
 * (Gemma3ForCausalLM, and the text part of Gemma3ForConditionalGeneration).
 *
 * Output: GGUF v3 with llama.cpp's tensor names and metadata keys, the
 * conversion rules of llama.cpp's convert_hf_to_gguf.py that change numbers
 * (llama's Q/K row permutation for its RoPE layout, Gemma's norm weights + 1,
 * tied output, llama3 rope_freqs), and the tensor types llama.cpp's quantizer
 * chooses for the file type (quantize.h). Written through a temporary file
 * and renamed, one tensor (in row chunks) at a time.
 *
 * Library: edgellm-convert (needs cJSON); not part of the libc-only core.
 */
#ifndef EL_CONVERT_PACK_H
#define EL_CONVERT_PACK_H
#include <stdbool.h>
#include <stdint.h>

#include "edgellm.h"
#include "package/quantize.h"

/* done/total are bytes of tensor data written / to write; tensor is the GGUF name. */
typedef void (*el_pack_progress_fn)(void *ud, uint64_t done, uint64_t total, const char *tensor);

typedef struct el_pack_params {
    el_ftype ftype;              /* default EL_FTYPE_F16 */
    const char *name;            /* general.name; NULL: the directory's name */
    el_pack_progress_fn progress; /* may be NULL */
    void *progress_ud;
    int n_threads;               /* conversion threads; 0 = online CPUs (at most 16) */
    bool layout_r16;             /* Q4_0 / Q8_0 matrix weights in their R16 layout (package/layout.h) */
} el_pack_params;

el_pack_params el_pack_default_params(void);

/* Summary of what was written (optional out-parameter of el_pack). */
typedef struct el_pack_info {
    char arch[16];
    int n_tensors;
    int n_vocab;
    uint64_t file_bytes;
    int n_by_type[64]; /* tensors per el_type id (a layout's under its base type) */
    int n_layout;      /* tensors written in a weight layout */
} el_pack_info;

/* Reads a config.json text as el_pack does: 0 and the GGUF architecture in arch
 * (16 bytes), or the error el_pack would give. For tests and fuzzing. */
int el_pack_check_config(const char *config_json, char *arch, el_error *err);

int el_pack(const char *hf_dir, const char *out_path, const el_pack_params *p, el_pack_info *info, el_error *err);

/*
 * A PEFT LoRA adapter (peft_dir: adapter_config.json with r, lora_alpha;
 * adapter_model.safetensors with base_model.model.<module>.lora_A.weight
 * [r, in] and .lora_B.weight [out, r]) for the HF model in base_dir
 * (its config.json: architecture, heads) → llama.cpp's GGUF LoRA format:
 * general.type "adapter", adapter.type "lora", adapter.lora.alpha, tensors
 * "<GGUF base name>.lora_a" [in, r] / ".lora_b" [r, out] of type F32, F16 or
 * BF16. llama's Q/K row permutation (its RoPE layout) is applied to B's rows
 * as el_pack applies it to the base weights, so B·A matches the packed base.
 * Refused with a message: DoRA, rsLoRA, fan_in_fan_out, rank/alpha patterns,
 * modules_to_save, embedding or norm targets, a tied head, a lone half.
 */
int el_pack_lora(const char *peft_dir, const char *base_dir, const char *out_path, el_type type, el_pack_info *info,
                 el_error *err);

#endif
