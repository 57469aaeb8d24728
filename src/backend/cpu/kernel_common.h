/*
 * kernel_common.h — the small pieces the CPU kernel files share: the
 * function-clone attribute and the SWAR block unpacking and int8 dot
 * helpers of the portable kernels (kernels_portable.c, kernels_kquants.c,
 * the attention and ops kernels, and the ISA headers that reuse them).
 *
 * Contract: macros and static inline functions only (they inline into each
 * kernel's loop); no state, no ISA-specific code. Every helper's result is
 * exact (integer or bit moves) or one fixed order of float operations
 * (el_hsum8_x86), so any caller gets the same bits.
 */
#ifndef EL_BACKEND_CPU_KERNEL_COMMON_H
#define EL_BACKEND_CPU_KERNEL_COMMON_H

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

/* The x86 horizontal sum of 8 float lanes (hi128 + lo128, then pairs):
 * ((l4 + l0) + (l6 + l2)) + ((l5 + l1) + (l7 + l3)). */
static inline float el_hsum8_x86(const float *l) {
    const float r0 = l[4] + l[0], r1 = l[5] + l[1], r2 = l[6] + l[2], r3 = l[7] + l[3];
    return (r0 + r2) + (r1 + r3);
}

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

/* 32 MXFP4 indices (nibble-unpacked) -> doubled E2M1 code values. */
static inline void mxfp4_lookup32(const uint8_t *restrict idx, int8_t *restrict a) {
    for (int j = 0; j < 32; ++j) a[j] = kvalues_mxfp4[idx[j]];
}

#endif
