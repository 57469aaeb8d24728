/*
 * kernels_kquants.h — the portable K-quant and IQ4_XS dot products
 * (kernels_kquants.c) against Q8_K activations, and the row selectors of
 * the types llama.cpp's x86 build repacks (Q2_K, Q4_K).
 *
 * Contract: each function has the type and meaning kernel_types.h states
 * (el_vec_dot_fn, el_vec_dot_select_fn); kernels_portable.c puts them in
 * the portable table, the ISA kernels give their bits.
 */
#ifndef EL_BACKEND_CPU_KERNELS_KQUANTS_H
#define EL_BACKEND_CPU_KERNELS_KQUANTS_H

#include "backend/cpu/kernel_types.h"

void el_vec_dot_q2_k_q8_k(int n, float *s, const void *vx, const void *vy);
void el_vec_dot_q3_k_q8_k(int n, float *s, const void *vx, const void *vy);
void el_vec_dot_q4_k_q8_k(int n, float *s, const void *vx, const void *vy);
void el_vec_dot_q5_k_q8_k(int n, float *s, const void *vx, const void *vy);
void el_vec_dot_q6_k_q8_k(int n, float *s, const void *vx, const void *vy);
/* Q6_K in block order (kernels.h, EL_ORDER_BLOCK): one fma per super-block. */
void el_vec_dot_q6_k_q8_k_blk(int n, float *s, const void *vx, const void *vy);
void el_vec_dot_iq4_xs_q8_k(int n, float *s, const void *vx, const void *vy);
/* Row selectors (el_vec_dot_select_fn) for the repacked types; see kernel_types.h. */
el_vec_dot_fn el_select_q2_k(int n_rows, int row, int k);
el_vec_dot_fn el_select_q4_k(int n_rows, int row, int k);

#endif
