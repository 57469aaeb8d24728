/*
 * quantize_interim.c — a stand-in for src/package/quantize.c (being written on
 * another branch) so that edgellm-convert builds and its F32/F16/BF16/Q8_0
 * paths can be tested before it lands. CMakeLists.txt compiles this file only
 * while src/package/quantize.c does not exist; delete it once that is merged.
 *
 * Covers: the ftype names and GGUF ids; Q8_0 rows with ggml's reference
 * rounding (el_quant_q8_0); a plan that keeps 1-D tensors in F32 and puts
 * every matrix in the ftype's type. No K-quants, no mixes.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "package/quantize.h"
#include "package/quants.h"

static const struct { const char *name; int gguf_id; el_type type; } k_ft[EL_FTYPE_COUNT] = {
    [EL_FTYPE_F32] = {"F32", 0, EL_TYPE_F32},       [EL_FTYPE_F16] = {"F16", 1, EL_TYPE_F16},
    [EL_FTYPE_BF16] = {"BF16", 32, EL_TYPE_BF16},   [EL_FTYPE_Q8_0] = {"Q8_0", 7, EL_TYPE_Q8_0},
    [EL_FTYPE_Q4_0] = {"Q4_0", 2, EL_TYPE_Q4_0},    [EL_FTYPE_Q4_1] = {"Q4_1", 3, EL_TYPE_Q4_1},
    [EL_FTYPE_Q5_0] = {"Q5_0", 8, EL_TYPE_Q5_0},    [EL_FTYPE_Q5_1] = {"Q5_1", 9, EL_TYPE_Q5_1},
    [EL_FTYPE_Q4_K] = {"Q4_K", 14, EL_TYPE_Q4_K},   [EL_FTYPE_Q5_K] = {"Q5_K", 16, EL_TYPE_Q5_K},
    [EL_FTYPE_Q6_K] = {"Q6_K", 18, EL_TYPE_Q6_K},   [EL_FTYPE_Q4_K_M] = {"Q4_K_M", 15, EL_TYPE_Q4_K},
    [EL_FTYPE_Q5_K_M] = {"Q5_K_M", 17, EL_TYPE_Q5_K},
};

int el_quantize_supported(el_type t) { return t == EL_TYPE_Q8_0; }

size_t el_quantize_rows(el_type t, const float *src, void *dst, int64_t nrows, int64_t n_per_row) {
    if (t != EL_TYPE_Q8_0 || n_per_row % 32) return 0;
    el_quant_q8_0(src, dst, nrows * n_per_row);
    return el_row_size(t, n_per_row) * (size_t)nrows;
}

int el_ftype_parse(const char *name, el_ftype *out) {
    for (int i = 0; i < EL_FTYPE_COUNT; i++)
        if (strcasecmp(name, k_ft[i].name) == 0) { *out = (el_ftype)i; return 0; }
    return -1;
}
const char *el_ftype_name(el_ftype ft) { return (unsigned)ft < EL_FTYPE_COUNT ? k_ft[ft].name : "?"; }
int el_ftype_gguf_id(el_ftype ft) { return (unsigned)ft < EL_FTYPE_COUNT ? k_ft[ft].gguf_id : -1; }

int el_quant_plan(el_ftype ft, const el_qmodel *m, const el_qtensor *t, int n, el_type *out, char *err, size_t errcap) {
    (void)m;
    if ((unsigned)ft >= EL_FTYPE_COUNT) { snprintf(err, errcap, "unknown ftype"); return -1; }
    el_type want = k_ft[ft].type;
    if (want != EL_TYPE_F32 && want != EL_TYPE_F16 && want != EL_TYPE_BF16 && !el_quantize_supported(want)) {
        snprintf(err, errcap, "%s needs src/package/quantize.c (not merged yet)", k_ft[ft].name);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        if (t[i].n_dims < 2) { out[i] = EL_TYPE_F32; continue; }
        out[i] = el_row_size(want, t[i].ne[0]) ? want : EL_TYPE_F16;
    }
    return 0;
}
