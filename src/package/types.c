/*
 * types.c — the one table of ggml tensor formats (see types.h).
 * Sizes are ggml's: a block of blck_size elements takes type_size bytes.
 */
#include "package/types.h"

#include "package/quants.h"

#define QK_K EL_QK_K
static const el_type_info k_types[EL_TYPE_COUNT] = {
    /* id            name       block  bytes              weights to_float          from_float */
    [EL_TYPE_F32]    = {"F32",     1,  4,                  true,  el_dequant_f32,    el_quant_f32},
    [EL_TYPE_F16]    = {"F16",     1,  2,                  true,  el_dequant_f16,    el_quant_f16},
    [EL_TYPE_Q4_0]   = {"Q4_0",   32,  2 + 16,             true,  el_dequant_q4_0,   0},
    [EL_TYPE_Q4_1]   = {"Q4_1",   32,  2 + 2 + 16,         true,  el_dequant_q4_1,   0},
    [EL_TYPE_Q5_0]   = {"Q5_0",   32,  2 + 4 + 16,         true,  el_dequant_q5_0,   0},
    [EL_TYPE_Q5_1]   = {"Q5_1",   32,  2 + 2 + 4 + 16,     true,  el_dequant_q5_1,   0},
    [EL_TYPE_Q8_0]   = {"Q8_0",   32,  2 + 32,             true,  el_dequant_q8_0,   el_quant_q8_0},
    [EL_TYPE_Q8_1]   = {"Q8_1",   32,  2 + 2 + 32,         false, 0,                 el_quant_q8_1},
    [EL_TYPE_Q2_K]   = {"Q2_K", QK_K,  QK_K/16 + QK_K/4 + 2 + 2,            true, el_dequant_q2_k, 0},
    [EL_TYPE_Q3_K]   = {"Q3_K", QK_K,  QK_K/8 + QK_K/4 + 12 + 2,            true, el_dequant_q3_k, 0},
    [EL_TYPE_Q4_K]   = {"Q4_K", QK_K,  2 + 2 + 12 + QK_K/2,                 true, el_dequant_q4_k, 0},
    [EL_TYPE_Q5_K]   = {"Q5_K", QK_K,  2 + 2 + 12 + QK_K/8 + QK_K/2,        true, el_dequant_q5_k, 0},
    [EL_TYPE_Q6_K]   = {"Q6_K", QK_K,  QK_K/2 + QK_K/4 + QK_K/16 + 2,       true, el_dequant_q6_k, 0},
    [EL_TYPE_Q8_K]   = {"Q8_K", QK_K,  4 + QK_K + QK_K/16*2,                false, 0, el_quant_q8_k},
    [EL_TYPE_IQ2_XXS]= {"IQ2_XXS", QK_K, 2 + QK_K/8*2,                      false, 0, 0},
    [EL_TYPE_IQ2_XS] = {"IQ2_XS", QK_K, 2 + QK_K/8*2 + QK_K/32,             false, 0, 0},
    [EL_TYPE_IQ3_XXS]= {"IQ3_XXS", QK_K, 2 + QK_K/4 + QK_K/8,               false, 0, 0},
    [EL_TYPE_IQ1_S]  = {"IQ1_S", QK_K, 2 + QK_K/8 + QK_K/16,                false, 0, 0},
    [EL_TYPE_IQ4_NL] = {"IQ4_NL",  32, 2 + 16,                              true, el_dequant_iq4_nl, 0},
    [EL_TYPE_IQ3_S]  = {"IQ3_S", QK_K, 2 + QK_K/4 + QK_K/8 + QK_K/32 + 4,   false, 0, 0},
    [EL_TYPE_IQ2_S]  = {"IQ2_S", QK_K, 2 + QK_K/4 + QK_K/16,                false, 0, 0},
    [EL_TYPE_IQ4_XS] = {"IQ4_XS", QK_K, 2 + 2 + QK_K/64 + QK_K/2,           true, el_dequant_iq4_xs, 0},
    [EL_TYPE_I8]     = {"I8",      1,  1,                  false, 0, 0},
    [EL_TYPE_I16]    = {"I16",     1,  2,                  false, 0, 0},
    [EL_TYPE_I32]    = {"I32",     1,  4,                  false, 0, 0},
    [EL_TYPE_I64]    = {"I64",     1,  8,                  false, 0, 0},
    [EL_TYPE_F64]    = {"F64",     1,  8,                  false, 0, 0},
    [EL_TYPE_IQ1_M]  = {"IQ1_M", QK_K, QK_K/8 + QK_K/16 + QK_K/32,          false, 0, 0},
    [EL_TYPE_BF16]   = {"BF16",    1,  2,                  true,  el_dequant_bf16,   el_quant_bf16},
    [EL_TYPE_TQ1_0]  = {"TQ1_0", QK_K, (QK_K - 4*QK_K/64)/5 + QK_K/64 + 2,  false, 0, 0},
    [EL_TYPE_TQ2_0]  = {"TQ2_0", QK_K, 2 + QK_K/4,                          false, 0, 0},
    [EL_TYPE_MXFP4]  = {"MXFP4",  32,  1 + 16,             true,  el_dequant_mxfp4,  0},
};

/* the weight layouts (package/layout.h): sizes of the rows they interleave, read only by the layout kernels */
static const el_type_info k_q8_0_r16 = {"Q8_0_R16", 32, 2 + 32, false, 0, 0};
static const el_type_info k_q4_0_r16 = {"Q4_0_R16", 32, 2 + 16, false, 0, 0};
static const el_type_info k_q4_k_r16 = {"Q4_K_R16", QK_K, 2 * 2 + 12 + QK_K / 2, false, 0, 0};
static const el_type_info k_q5_0_r16 = {"Q5_0_R16", 32, 2 + 4 + 16, false, 0, 0};

const el_type_info *el_type_get(int type) {
    if (type == EL_TYPE_Q8_0_R16) return &k_q8_0_r16;
    if (type == EL_TYPE_Q4_0_R16) return &k_q4_0_r16;
    if (type == EL_TYPE_Q4_K_R16) return &k_q4_k_r16;
    if (type == EL_TYPE_Q5_0_R16) return &k_q5_0_r16;
    if (type < 0 || type >= EL_TYPE_COUNT) return 0;
    const el_type_info *t = &k_types[type];
    return t->blck_size > 0 ? t : 0;
}

const char *el_type_name(int type) {
    const el_type_info *t = el_type_get(type);
    return t ? t->name : "?";
}

size_t el_row_size(el_type type, int64_t n) {
    const el_type_info *t = el_type_get(type);
    if (!t || n < 0 || n % t->blck_size) return 0;
    return (size_t)(n / t->blck_size) * t->type_size;
}
