/*
 * layout.h — which weight layout (package/layout.h: the byte format) a
 * matrix runs in on the CPU, and the kernels that read them.
 *
 * The kernel meets each block of 16 rows with one vpdpbusd per 4 elements
 * and activation row into one exact int32 sum a row, then
 * acc = fma((float)sumi, d_w * d_a, acc): the block order (kernels.h,
 * EL_ORDER_BLOCK) of the flat Q8_0 and Q4_0 kernels, bit for bit
 * (tests/test_layout.c), with no transposition at run time and no lane
 * reduction. Q4_0 has one order (the block order: llama.cpp's repacked
 * Q4_0), so its layout runs in either kernel order. The Q4_K layout
 * (x86/layout_avx512.c) forms the flat Q4_K kernels' exact integers per
 * sub-block pair and takes their two float orders row by row, as their
 * selector does (the x4 argument below), so it too runs in either order.
 * The Q5_0 layout (x86/layout_avx512.c) forms the flat Q5_0 kernel's 8
 * exact lanes a block for 16 rows and takes the process's kernel order
 * (llama: a float accumulator a lane and the x86 horizontal sum; block:
 * one sum), so it runs in either order too.
 *
 * Two ways in:
 * - from the file: tensors a packager wrote in a layout (`edgellm quantize
 *   --layout r16`) are mapped as they are, no copy, where the CPU has
 *   AVX-512 VNNI (el_cpu_layout_runs); elsewhere, or with
 *   EL_WEIGHT_LAYOUT=flat, the loader unpacks them into flat rows (a copy
 *   the capacity plan counts). A Q8_0 file layout computes the block order
 *   even where the other Q8_0 matrices run in llama.cpp's: the packager chose it.
 * - at load: EL_WEIGHT_LAYOUT=r16 (process-wide, read once, as
 *   EL_KERNEL_ORDER) asks for the R16 layouts; el_cpu_layout_for grants one
 *   to a Q4_0, Q4_K or Q5_0 matrix of 16k rows, and to a Q8_0 one when the kernels
 *   are in block order, where the CPU has AVX-512 VNNI (elsewhere the flat kernels
 *   are faster than the portable layout kernels, which are the
 *   specification). The runtime repacks such matrices (runtime/model.c,
 *   apply_layouts) into memory the model owns and the capacity plan counts
 *   with the weights (info states it).
 */
#ifndef EL_BACKEND_CPU_LAYOUT_H
#define EL_BACKEND_CPU_LAYOUT_H
#include <stddef.h>
#include <stdint.h>

#include "package/layout.h"
#include "package/types.h"

/* Whether EL_WEIGHT_LAYOUT asks for the R16 layouts at load ("r16"; unset or "flat": no). */
int el_cpu_layout_requested(void);

/* Whether a matrix the file stores in layout l runs as it is (AVX-512 VNNI,
 * and EL_WEIGHT_LAYOUT is not "flat"); else the loader unpacks it. */
int el_cpu_layout_runs(el_layout l);

/* The layout a matrix of type t with ne1 rows gets: the requested one when
 * the type, row count, kernel order and CPU allow it, else EL_LAYOUT_FLAT. */
el_layout el_cpu_layout_for(el_type t, int64_t ne0, int64_t ne1);

/*
 * y[t * ldy + r] = row r of the packed rows · activation row t (x: Q8_0 rows
 * ldx bytes apart; Q8_K for Q4_K), r < nr (a multiple of 16), t < nt; w
 * points at the group of the first row. x4: how many of the first activation
 * rows take Q4_K's 4-row (gemm) order, the rest its one-row order, as the
 * flat kernels' selector (el_select_q4_k) picks them; the one-order layouts
 * ignore it. The portable kernels are the specification; the AVX-512 ones
 * give their bits.
 */
typedef void (*el_layout_gemm_fn)(int k, const void *w, int nr, const void *x, size_t ldx, int nt, float *y,
                                  size_t ldy, int x4);
void el_layout_gemm_q8_0_r16_portable(int k, const void *w, int nr, const void *x, size_t ldx, int nt, float *y,
                                      size_t ldy, int x4);
void el_layout_gemm_q4_0_r16_portable(int k, const void *w, int nr, const void *x, size_t ldx, int nt, float *y,
                                      size_t ldy, int x4);
/* Q4_K: x holds Q8_K rows; el_vec_dot_q4_k_q8_k_x4's arithmetic for rows t < x4, el_vec_dot_q4_k_q8_k's after. */
void el_layout_gemm_q4_k_r16_portable(int k, const void *w, int nr, const void *x, size_t ldx, int nt, float *y,
                                      size_t ldy, int x4);
/* Q5_0: the flat Q5_0 kernels' arithmetic in the process's kernel order (llama: 8 lanes a row; block: one sum). */
void el_layout_gemm_q5_0_r16_portable(int k, const void *w, int nr, const void *x, size_t ldx, int nt, float *y,
                                      size_t ldy, int x4);
/* The kernel the process uses for layout l (the CPU's best). */
el_layout_gemm_fn el_cpu_layout_gemm(el_layout l);

#if defined(__x86_64__)
/* x86/quants_avx512.c (AVX-512 VNNI). */
void el_layout_gemm_q8_0_r16_avx512(int k, const void *w, int nr, const void *x, size_t ldx, int nt, float *y,
                                    size_t ldy, int x4);
void el_layout_gemm_q4_0_r16_avx512(int k, const void *w, int nr, const void *x, size_t ldx, int nt, float *y,
                                    size_t ldy, int x4);
/* x86/layout_avx512.c (AVX-512 VNNI). */
void el_layout_gemm_q4_k_r16_avx512(int k, const void *w, int nr, const void *x, size_t ldx, int nt, float *y,
                                    size_t ldy, int x4);
void el_layout_gemm_q5_0_r16_avx512(int k, const void *w, int nr, const void *x, size_t ldx, int nt, float *y,
                                    size_t ldy, int x4);
#endif

#endif
