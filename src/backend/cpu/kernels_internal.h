/* kernels_internal.h — dot-product kernels shared between the CPU kernel files. */
#ifndef EL_BACKEND_CPU_KERNELS_INTERNAL_H
#define EL_BACKEND_CPU_KERNELS_INTERNAL_H

#include <stdint.h>
#include <string.h>

#include "package/quants_blocks.h"

/*
 * EL_CPU_CLONES: GCC builds the function twice — for x86-64-v3 (AVX2, FMA)
 * and baseline x86-64 — and picks one at load time by CPUID. Results are
 * identical (fmaf is exactly rounded either way, float expressions are not
 * contracted in ISO C mode, integer sums are exact); only speed differs. The
 * hand-written SIMD kernels of the next step replace this.
 */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define EL_CPU_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define EL_CPU_CLONES
#endif

#define LO4 0x0F0F0F0F0F0F0F0Full

static inline void store_u64(uint8_t *p, uint64_t v) { memcpy(p, &v, sizeof v); }

static inline uint64_t load_u64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* 16 bytes of nibbles -> 32 values 0..15: low nibbles (elements 0..15), then high. */
static inline void unpack_nibbles16(const uint8_t *restrict q, uint8_t *restrict a) {
    const uint64_t v0 = load_u64(q), v1 = load_u64(q + 8);
    store_u64(a + 0, v0 & LO4);
    store_u64(a + 8, v1 & LO4);
    store_u64(a + 16, (v0 >> 4) & LO4);
    store_u64(a + 24, (v1 >> 4) & LO4);
}

static inline int32_t dot32(const int8_t *restrict a, const int8_t *restrict q) {
    int32_t sum = 0;
    for (int j = 0; j < 32; ++j) sum += a[j] * q[j];
    return sum;
}

/* 32 IQ4 indices (nibble-unpacked) -> code values. */
static inline void iq4_lookup32(const uint8_t *restrict idx, int8_t *restrict a) {
    for (int j = 0; j < 32; ++j) a[j] = kvalues_iq4nl[idx[j]];
}


void el_vec_dot_q2_k_q8_k(int n, float *s, const void *vx, const void *vy);
void el_vec_dot_q3_k_q8_k(int n, float *s, const void *vx, const void *vy);
void el_vec_dot_q4_k_q8_k(int n, float *s, const void *vx, const void *vy);
void el_vec_dot_q5_k_q8_k(int n, float *s, const void *vx, const void *vy);
void el_vec_dot_q6_k_q8_k(int n, float *s, const void *vx, const void *vy);
void el_vec_dot_iq4_xs_q8_k(int n, float *s, const void *vx, const void *vy);
/* Row selectors (el_vec_dot_select_fn) for the repacked types; see kernels.h. */
typedef void (*el_vec_dot_fn_)(int n, float *s, const void *vx, const void *vy);
el_vec_dot_fn_ el_select_q2_k(int n_rows, int row, int k);
el_vec_dot_fn_ el_select_q4_k(int n_rows, int row, int k);

#endif
