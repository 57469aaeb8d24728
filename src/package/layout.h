/*
 * layout.h — the weight layouts as a byte format: rows of a matrix stored in
 * the order a kernel reads them, beside (or instead of) the flat GGUF rows
 * (issue 34, item 1). The format is the package layer's; which layout a
 * kernel runs is the backend's (backend/cpu/layout.h).
 *
 * EL_LAYOUT_Q8_0_R16: Q8_0 rows interleaved by 16. Group g holds rows
 * 16g..16g+15; for each 32-element block b of the group:
 *   quants: 512 bytes at group + 512 * b. Register l (64 bytes, l = 0..7)
 *           holds elements 4l..4l+3 of row r at bytes 4r..4r+3, each as the
 *           unsigned byte q + 128 (the operand vpdpbusd multiplies);
 *   scales: the 16 rows' fp16 d at group + 512 * nb + 32 * b.
 * A group is nb * 544 bytes, the size of its 16 flat rows.
 *
 * EL_LAYOUT_Q4_0_R16: Q4_0 rows interleaved by 16, the same way. For each
 * block b of group g:
 *   quants: 256 bytes at group + 256 * b. Register c (64 bytes, c = 0..3)
 *           holds bytes 4c..4c+3 of row r's qs at bytes 4r..4r+3: the low
 *           nibbles are elements 4c..4c+3, the high ones 16+4c..16+4c+3;
 *   scales: the 16 rows' fp16 d at group + 256 * nb + 32 * b.
 * A group is nb * 288 bytes, the size of its 16 flat rows.
 *
 * EL_LAYOUT_Q4_K_R16: Q4_K rows interleaved by 16, super-block by
 * super-block. Super-block i of group g is 2304 bytes at group + 2304 * i,
 * its scales first (a kernel reads it front to back):
 *   scales: the 6-bit scales sc[8] and mins m[8] of each row (the flat
 *           block's 12 packed bytes, el_get_scale_min_k4), regrouped. Byte
 *           16p + r (p = 0..3) of each 64-byte part:
 *             +0:   sc[p] & 15 | (sc[p + 4] & 15) << 4;
 *             +64:  m[p] & 15 | (m[p + 4] & 15) << 4;
 *             +128: sc[p] >> 4 | (sc[p + 4] >> 4) << 2 | (m[p] >> 4) << 4
 *                   | (m[p + 4] >> 4) << 6;
 *   d: the 16 rows' fp16 d at +192, dmin: their fp16 dmin at +224;
 *   quants: 2048 bytes at +256. Register c (64 bytes, c = 0..31) holds bytes
 *           4c..4c+3 of row r's qs at bytes 4r..4r+3: with j = c / 8 and
 *           l = 4 (c % 8), the low nibbles are elements 64j + l..l+3 (sub-block
 *           2j), the high ones 64j + 32 + l..l+3 (sub-block 2j + 1).
 * A group is nb * 2304 bytes, the size of its 16 flat rows.
 *
 * EL_LAYOUT_Q5_0_R16: Q5_0 rows interleaved by 16, block by block. Block b
 * of group g is 352 bytes at group + 352 * b (read front to back):
 *   quants: 256 bytes at +0, as Q4_0's: register c (c = 0..3) holds bytes
 *           4c..4c+3 of row r's qs at bytes 4r..4r+3, the low nibbles
 *           elements 4c..4c+3, the high ones 16+4c..16+4c+3;
 *   high bits: 8 little-endian 64-bit masks at +256: bit 4r + e of mask j
 *           is the fifth bit (qh) of element 4j + e of row r, so mask j
 *           (j < 4) goes with the low nibbles of register j, mask j (j >= 4)
 *           with the high nibbles of register j - 4;
 *   d: the 16 rows' fp16 d at +320.
 * A group is nb * 352 bytes, the size of its 16 flat rows.
 *
 * In a GGUF file (written by `edgellm quantize --layout r16`): a 2-D tensor
 * whose ne[1] is a multiple of 16 may carry the type id EL_TYPE_Q8_0_R16
 * (0x4001), EL_TYPE_Q4_0_R16 (0x4002), EL_TYPE_Q4_K_R16 (0x4003) or EL_TYPE_Q5_0_R16 (0x4004) —
 * edgellm's own ids, 0x4000 +
 * the layout, far above ggml's (< 64) and ik_llama.cpp's (< 1024). Its
 * bytes are the packed groups in order: as many as the flat tensor's, so
 * the type's block and byte sizes are its base type's. Readers that know
 * only flat rows see an unknown type and refuse the tensor. Packing and
 * unpacking are exact byte permutations (el_layout_unpack(el_layout_pack(x))
 * == x).
 */
#ifndef EL_PACKAGE_LAYOUT_H
#define EL_PACKAGE_LAYOUT_H
#include <stddef.h>
#include <stdint.h>

#include "package/types.h"

typedef enum el_layout {
    EL_LAYOUT_FLAT = 0,     /* the GGUF rows as mapped */
    EL_LAYOUT_Q8_0_R16 = 1, /* Q8_0, 16 rows interleaved (above) */
    EL_LAYOUT_Q4_0_R16 = 2, /* Q4_0, 16 rows interleaved (above) */
    EL_LAYOUT_Q4_K_R16 = 3, /* Q4_K, 16 rows interleaved by super-block (above) */
    EL_LAYOUT_Q5_0_R16 = 4, /* Q5_0, 16 rows interleaved block by block (above) */
} el_layout;

#define EL_LAYOUT_COUNT 5

#define EL_LAYOUT_R16_ROWS 16

/* EL_LAYOUT_Q4_K_R16's super-block (above): its bytes and the offsets of its parts. */
#define EL_Q4K_R16_SB 2304
#define EL_Q4K_R16_SC 0
#define EL_Q4K_R16_MN 64
#define EL_Q4K_R16_HI 128
#define EL_Q4K_R16_D 192
#define EL_Q4K_R16_DMIN 224
#define EL_Q4K_R16_QS 256

/* EL_LAYOUT_Q5_0_R16's block (above): its bytes and the offsets of its parts. */
#define EL_Q50_R16_BLOCK 352
#define EL_Q50_R16_QH 256
#define EL_Q50_R16_D 320

/* "flat", "q8_0_r16", "q4_0_r16", "q4_k_r16", "q5_0_r16". */
const char *el_layout_name(el_layout l);

/* A set of layouts (bit l: layout l ran): "flat" when none, else their names joined by '+'. */
const char *el_layout_set_name(unsigned set);

/* The layout a GGUF type id stores (EL_LAYOUT_FLAT for every ggml type). */
el_layout el_layout_of_type(int type);
/* The type id of layout l in a file (EL_TYPE_Q8_0_R16 ...); -1 for flat. */
int el_layout_type(el_layout l);
/* The block format whose rows layout l interleaves (EL_TYPE_Q8_0 ...); -1 for flat. */
int el_layout_base(el_layout l);
/* The R16 layout of block format t (Q8_0, Q4_0, Q4_K, Q5_0), else EL_LAYOUT_FLAT. */
el_layout el_layout_r16_of(el_type t);

/* The layout a packager writes a tensor in when asked for the R16 layouts (quantize / pack
 * --layout r16): R16 for a Q4_0, Q8_0, Q4_K or Q5_0 matrix of whole 16-row groups that the forward pass
 * multiplies by (blk.N.attn_q/k/v/qkv/output, ffn_gate/up/down, shortconv in/out_proj,
 * output.weight; token_embd only when tied: the file has no output.weight), else flat. */
el_layout el_layout_r16_for(const char *name, int n_dims, const int64_t ne[4], el_type type, int tied);

/* Bytes of an ne0 x ne1 matrix in layout l; 0 when l does not hold such a matrix. */
size_t el_layout_bytes(el_layout l, int64_t ne0, int64_t ne1);

/* EL_LAYOUT_Q4_K_R16: sub-block j's (0..7) 6-bit scale and min of row r (0..15) of the super-block at sb. */
void el_layout_q4k_scale_min(const uint8_t *sb, int r, int j, uint8_t *sc, uint8_t *m);

/* Bytes of one group of EL_LAYOUT_R16_ROWS rows (a row block's offset unit). */
size_t el_layout_group_bytes(el_layout l, int64_t ne0);

/* Writes the flat rows (row_bytes apart) in layout l to dst (el_layout_bytes). */
void el_layout_pack(el_layout l, const void *flat, size_t row_bytes, int64_t ne0, int64_t ne1, void *dst);

/* The inverse: the packed groups of an ne0 x ne1 matrix back to flat rows, row_bytes apart. */
void el_layout_unpack(el_layout l, const void *packed, int64_t ne0, int64_t ne1, void *flat, size_t row_bytes);

/* Block b of row r of a packed ne0-column matrix, as its flat block (Q8_0: 34 bytes, Q4_0: 18, Q4_K: 144,
 * Q5_0: 22) to blk:
 * what a row lookup (an embedding) reads without unpacking the matrix. */
void el_layout_block(el_layout l, const void *packed, int64_t ne0, int64_t r, int64_t b, void *blk);

#endif
