/*
 * attention_typed.h — what attention_typed.c (attention over BF16 / Q8_0 /
 * Q4_0 KV caches, and storing rows into them) shares with attention.c's
 * dispatch, its instruction-set variant and the tests.
 * el_op_attention and el_op_kv_store_typed (ops.h) are the way in: attention.c
 * keeps F16 caches and hands every other type here (el_attn_is_typed,
 * el_kv_is_f16), so an F16 cache never comes to attention_typed.c.
 */
#ifndef EL_BACKEND_CPU_ATTENTION_TYPED_H
#define EL_BACKEND_CPU_ATTENTION_TYPED_H

#include "backend/cpu/kernels.h"
#include "backend/cpu/ops.h"

/* F16 (0, as a zero-initialised struct holds, means F16 too): attention.c's own cache type. */
static inline int el_kv_is_f16(int type) { return type == 0 || type == EL_TYPE_F16; }

/* Caches of a type other than F16: el_op_attention hands them to el_attn_typed. */
static inline int el_attn_is_typed(const el_attn_args *a) { return !el_kv_is_f16(a->type_k) || !el_kv_is_f16(a->type_v); }

/* el_op_attention for such caches (the contract above attention_typed.c). */
void el_attn_typed(el_pool *pool, const el_attn_args *a);

/* el_op_kv_store_typed for a cache of type BF16, Q8_0 or Q4_0 (not F16). */
void el_attn_typed_store(int type, void *cache, const float *x, int n, int pos0, int row_len, int ring);

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
