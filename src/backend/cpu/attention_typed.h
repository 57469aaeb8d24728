/*
 * attention_typed.h — what attention_typed.c (attention over BF16 / Q8_0 /
 * Q4_0 KV caches) shares with its instruction-set variant and the tests.
 * el_op_attention (ops.h) is the way in; el_attn_typed is declared in
 * attention_internal.h for attention.c's dispatch.
 */
#ifndef EL_BACKEND_CPU_ATTENTION_TYPED_H
#define EL_BACKEND_CPU_ATTENTION_TYPED_H

#include "backend/cpu/kernels.h"
#include "backend/cpu/ops.h"

/* el_attn_typed with the V step of instruction-set level `level` (lowered to
 * what this CPU has); returns the level run. Same bits at every level. */
el_cpu_level el_attn_typed_at(el_pool *pool, const el_attn_args *a, el_cpu_level level);

#if defined(__x86_64__)
/* if (ms != 1) acc *= ms; acc = fma(to_float(row), vs, acc) for one cache row
 * of hd values (hd % 32 == 0) of type BF16, Q8_0 or Q4_0. */
void el_attn_vmad_avx512(int type, const void *row, float *acc, float ms, float vs, int hd);
/* ggml_vec_dot_q4_0_q8_0's x86 order (see attention_typed.c), with VNNI. */
void el_attn_dot_q4_0_avx512(int n, float *s, const void *vx, const void *vy);
#endif

#endif
