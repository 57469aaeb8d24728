/*
 * attention_common.h — what every attention kernel of the CPU backend
 * agrees on, whatever the cache type: the largest head it takes and which
 * cache positions a query sees. The F16 kernels (attention.c and its
 * blocked, tiled and split variants, attention_internal.h) and the kernel
 * for BF16 / Q8_0 / Q4_0 caches (attention_typed.c) both build on it.
 *
 * Contract: constants and static inline functions only; no state.
 */
#ifndef EL_BACKEND_CPU_ATTENTION_COMMON_H
#define EL_BACKEND_CPU_ATTENTION_COMMON_H

#define EL_ATT_MAX_HD 512 /* head_dim limit */

/* First cache row a query at position p sees. */
static inline int el_attn_lo(int p, int window) { return window > 0 && p - window + 1 > 0 ? p - window + 1 : 0; }

#endif
