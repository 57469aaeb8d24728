/*
 * layout.c — the weight layouts' byte format (layout.h): names, type ids,
 * sizes, and packing between flat rows and 16-row groups.
 */
#include "package/layout.h"

#include <stdbool.h>
#include <string.h>

#include "package/quants_blocks.h"

#define R16 EL_LAYOUT_R16_ROWS

/* Quant bytes of one block of a group (16 rows): Q8_0 512, Q4_0 256; 0: not an R16 layout. */
static size_t qbytes(el_layout l) { return l == EL_LAYOUT_Q8_0_R16 ? 512 : l == EL_LAYOUT_Q4_0_R16 ? 256 : 0; }

const char *el_layout_name(el_layout l) {
    return l == EL_LAYOUT_Q8_0_R16 ? "q8_0_r16" : l == EL_LAYOUT_Q4_0_R16 ? "q4_0_r16" : "flat";
}

const char *el_layout_set_name(unsigned set) {
    const unsigned q8 = 1u << EL_LAYOUT_Q8_0_R16, q4 = 1u << EL_LAYOUT_Q4_0_R16;
    if ((set & (q8 | q4)) == (q8 | q4)) return "q4_0_r16+q8_0_r16";
    return set & q8 ? "q8_0_r16" : set & q4 ? "q4_0_r16" : "flat";
}

el_layout el_layout_of_type(int type) {
    return type == EL_TYPE_Q8_0_R16 ? EL_LAYOUT_Q8_0_R16 : type == EL_TYPE_Q4_0_R16 ? EL_LAYOUT_Q4_0_R16 : EL_LAYOUT_FLAT;
}

int el_layout_type(el_layout l) {
    return l == EL_LAYOUT_Q8_0_R16 ? EL_TYPE_Q8_0_R16 : l == EL_LAYOUT_Q4_0_R16 ? EL_TYPE_Q4_0_R16 : -1;
}

int el_layout_base(el_layout l) {
    return l == EL_LAYOUT_Q8_0_R16 ? EL_TYPE_Q8_0 : l == EL_LAYOUT_Q4_0_R16 ? EL_TYPE_Q4_0 : -1;
}

el_layout el_layout_r16_of(el_type t) {
    return t == EL_TYPE_Q8_0 ? EL_LAYOUT_Q8_0_R16 : t == EL_TYPE_Q4_0 ? EL_LAYOUT_Q4_0_R16 : EL_LAYOUT_FLAT;
}

el_layout el_layout_r16_for(const char *name, int n_dims, const int64_t ne[4], el_type type, int tied) {
    static const char *const k_suffix[] = {".attn_q.weight",   ".attn_k.weight",      ".attn_v.weight",
                                           ".attn_qkv.weight", ".attn_output.weight", ".ffn_gate.weight",
                                           ".ffn_up.weight",   ".ffn_down.weight",    ".shortconv.in_proj.weight",
                                           ".shortconv.out_proj.weight"};
    if (n_dims != 2 || ne[1] <= 0 || ne[1] % R16) return EL_LAYOUT_FLAT;
    bool matmul = !strcmp(name, "output.weight") || (tied && !strcmp(name, "token_embd.weight"));
    if (!strncmp(name, "blk.", 4)) {
        const size_t n = strlen(name);
        for (size_t i = 0; i < sizeof k_suffix / sizeof k_suffix[0] && !matmul; i++) {
            const size_t k = strlen(k_suffix[i]);
            matmul = n > k && !strcmp(name + n - k, k_suffix[i]);
        }
    }
    return matmul ? el_layout_r16_of(type) : EL_LAYOUT_FLAT;
}

size_t el_layout_group_bytes(el_layout l, int64_t ne0) {
    if (!qbytes(l) || ne0 <= 0 || ne0 % EL_QK8_0) return 0;
    return (size_t)(ne0 / EL_QK8_0) * (qbytes(l) + 2 * R16);
}

size_t el_layout_bytes(el_layout l, int64_t ne0, int64_t ne1) {
    if (ne1 <= 0 || ne1 % R16) return 0;
    return el_layout_group_bytes(l, ne0) * (size_t)(ne1 / R16);
}

/* One row's block, both ways: dir 0 copies flat block x (d, then qs) into lane `lane` of group q's
 * block b, dir 1 back. Q8_0 stores q + 128, which is q ^ 0x80 in each byte: its own inverse. */
static void move_block(el_layout l, int dir, uint8_t *x, uint8_t *q, int64_t nb, int lane, int64_t b) {
    const size_t qb = qbytes(l);
    const int nc = l == EL_LAYOUT_Q8_0_R16 ? 8 : 4;
    const uint32_t flip = l == EL_LAYOUT_Q8_0_R16 ? 0x80808080u : 0;
    uint8_t *qq = q + qb * (size_t)b + 4 * (size_t)lane;
    uint8_t *dd = q + (size_t)nb * qb + 2 * (size_t)(R16 * b + lane);
    for (int c = 0; c < nc; ++c) {
        uint32_t v;
        memcpy(&v, dir ? qq + 64 * c : x + 2 + 4 * c, 4);
        v ^= flip;
        memcpy(dir ? x + 2 + 4 * c : qq + 64 * c, &v, 4);
    }
    memcpy(dir ? x : dd, dir ? dd : x, 2);
}

/* The whole permutation: pack (dir 0) flat -> packed, unpack (dir 1) packed -> flat. */
static void permute(el_layout l, int dir, uint8_t *flat, size_t row_bytes, int64_t ne0, int64_t ne1, uint8_t *packed) {
    if (!qbytes(l)) return;
    const int64_t nb = ne0 / EL_QK8_0;
    const size_t gb = el_layout_group_bytes(l, ne0);
    const size_t bsz = l == EL_LAYOUT_Q8_0_R16 ? sizeof(block_q8_0) : sizeof(block_q4_0);
    for (int64_t g = 0; g < ne1 / R16; ++g)
        for (int r = 0; r < R16; ++r) {
            uint8_t *row = flat + row_bytes * (size_t)(R16 * g + r);
            for (int64_t b = 0; b < nb; ++b) move_block(l, dir, row + bsz * (size_t)b, packed + gb * (size_t)g, nb, r, b);
        }
}

void el_layout_pack(el_layout l, const void *flat, size_t row_bytes, int64_t ne0, int64_t ne1, void *dst) {
    permute(l, 0, (uint8_t *)(uintptr_t)flat, row_bytes, ne0, ne1, dst);
}

void el_layout_unpack(el_layout l, const void *packed, int64_t ne0, int64_t ne1, void *flat, size_t row_bytes) {
    permute(l, 1, flat, row_bytes, ne0, ne1, (uint8_t *)(uintptr_t)packed);
}

void el_layout_block(el_layout l, const void *packed, int64_t ne0, int64_t r, int64_t b, void *blk) {
    if (!qbytes(l)) return;
    uint8_t *q = (uint8_t *)(uintptr_t)packed + el_layout_group_bytes(l, ne0) * (size_t)(r / R16);
    move_block(l, 1, blk, q, ne0 / EL_QK8_0, (int)(r % R16), b);
}
