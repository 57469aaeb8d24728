/*
 * layout.h — weight layouts made for the kernels: a matrix's rows stored in
 * the order a kernel reads them, beside the flat GGUF rows (issue 34, item 1).
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
 * A group is nb * 288 bytes, the size of its 16 flat rows. Q4_0 has one
 * order (the block order: llama.cpp's repacked Q4_0), so this layout runs in
 * either kernel order.
 *
 * The kernel meets
 * each block of 16 rows with one vpdpbusd per 4 elements and activation row
 * into one exact int32 sum a row, then acc = fma((float)sumi, d_w * d_a, acc):
 * the block order (kernels.h, EL_ORDER_BLOCK) of the flat Q8_0 and Q4_0
 * kernels, bit for bit (tests/test_layout.c), with no transposition at run
 * time and no lane reduction. So Q8_0's layout is used only where the block
 * order is.
 *
 * Which layout runs: EL_WEIGHT_LAYOUT=r16 (process-wide, read once, as
 * EL_KERNEL_ORDER) asks for the R16 layouts; el_cpu_layout_for grants one to
 * a Q4_0 matrix of 16k rows, and to a Q8_0 one when the kernels are in block
 * order, where the CPU has AVX-512 VNNI (elsewhere the flat kernels are
 * faster than the portable layout kernels, which are the specification). The runtime repacks such
 * matrices at load (runtime/model.c, apply_layouts) into memory the model
 * owns and the capacity plan counts with the weights (info states it).
 */
#ifndef EL_BACKEND_CPU_LAYOUT_H
#define EL_BACKEND_CPU_LAYOUT_H
#include <stddef.h>
#include <stdint.h>

#include "package/types.h"

typedef enum el_layout {
    EL_LAYOUT_FLAT = 0,     /* the GGUF rows as mapped */
    EL_LAYOUT_Q8_0_R16 = 1, /* Q8_0, 16 rows interleaved (above) */
    EL_LAYOUT_Q4_0_R16 = 2, /* Q4_0, 16 rows interleaved (above) */
} el_layout;

#define EL_LAYOUT_COUNT 3

#define EL_LAYOUT_R16_ROWS 16

/* "flat", "q8_0_r16", "q4_0_r16". */
const char *el_layout_name(el_layout l);

/* A set of layouts (bit l: layout l ran): "flat" when none, else their names joined by '+'. */
const char *el_layout_set_name(unsigned set);

/* Whether EL_WEIGHT_LAYOUT asks for the R16 layouts ("r16"; unset or "flat": no). */
int el_cpu_layout_requested(void);

/* The layout a matrix of type t with ne1 rows gets: the requested one when
 * the type, row count, kernel order and CPU allow it, else EL_LAYOUT_FLAT. */
el_layout el_cpu_layout_for(el_type t, int64_t ne0, int64_t ne1);

/* Bytes of an ne0 x ne1 matrix in layout l; 0 when l does not hold such a matrix. */
size_t el_layout_bytes(el_layout l, int64_t ne0, int64_t ne1);

/* Bytes of one group of EL_LAYOUT_R16_ROWS rows (a row block's offset unit). */
size_t el_layout_group_bytes(el_layout l, int64_t ne0);

/* Writes the flat rows (row_bytes apart) in layout l to dst (el_layout_bytes). */
void el_layout_pack(el_layout l, const void *flat, size_t row_bytes, int64_t ne0, int64_t ne1, void *dst);

/*
 * y[t * ldy + r] = row r of the packed rows · activation row t (x: Q8_0 rows
 * ldx bytes apart), r < nr (a multiple of 16), t < nt; w points at the
 * group of the first row. The portable kernels are the specification; the
 * AVX-512 ones give their bits.
 */
typedef void (*el_layout_gemm_fn)(int k, const void *w, int nr, const void *x, size_t ldx, int nt, float *y,
                                  size_t ldy);
void el_layout_gemm_q8_0_r16_portable(int k, const void *w, int nr, const void *x, size_t ldx, int nt, float *y,
                                      size_t ldy);
void el_layout_gemm_q4_0_r16_portable(int k, const void *w, int nr, const void *x, size_t ldx, int nt, float *y,
                                      size_t ldy);
/* The kernel the process uses for layout l (the CPU's best). */
el_layout_gemm_fn el_cpu_layout_gemm(el_layout l);

#if defined(__x86_64__)
/* x86/quants_avx512.c (AVX-512 VNNI). */
void el_layout_gemm_q8_0_r16_avx512(int k, const void *w, int nr, const void *x, size_t ldx, int nt, float *y,
                                    size_t ldy);
void el_layout_gemm_q4_0_r16_avx512(int k, const void *w, int nr, const void *x, size_t ldx, int nt, float *y,
                                    size_t ldy);
#endif

#endif
