/*
 * quants_blocks.h — byte layouts of the ggml block formats (shared by the
 * reference (de)quantizers in quants.c and the CPU kernels).
 *
 * Every struct matches ggml's public block format byte for byte (checked by
 * the static_asserts below).  Half-precision fields are raw IEEE binary16
 * bits (el_fp16); convert them with el_fp16_to_fp32().  Multi-byte fields are
 * little-endian, as in GGUF files; edgellm only targets little-endian hosts.
 *
 * Alignment: blocks containing el_fp16 need 2-byte alignment, block_q8_K
 * (float d) needs 4.  GGUF tensor data is 32-byte aligned and every row size
 * is a multiple of the block size, so weight rows in a mapped file qualify.
 */
#ifndef EL_PACKAGE_QUANTS_BLOCKS_H
#define EL_PACKAGE_QUANTS_BLOCKS_H
#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "package/types.h"
#include "util/fp16.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the ggml block formats are read in place: a little-endian host is required"
#endif

#define EL_QK4_0 32
#define EL_QK4_1 32
#define EL_QK5_0 32
#define EL_QK5_1 32
#define EL_QK8_0 32
#define EL_QK8_1 32
#define EL_QK4_NL 32
#define EL_QK_MXFP4 32
/* EL_QK_K (256) comes from types.h */
#define EL_K_SCALE_SIZE 12

/* ---- legacy 32-element formats ---- */

typedef struct {
    el_fp16 d;                /* scale */
    uint8_t qs[EL_QK4_0 / 2]; /* nibbles: element j (low), j+16 (high) */
} block_q4_0;
static_assert(sizeof(block_q4_0) == 2 + EL_QK4_0 / 2, "block_q4_0 size");

typedef struct {
    el_fp16 d;                /* scale */
    el_fp16 m;                /* min */
    uint8_t qs[EL_QK4_1 / 2];
} block_q4_1;
static_assert(sizeof(block_q4_1) == 2 * 2 + EL_QK4_1 / 2, "block_q4_1 size");

typedef struct {
    el_fp16 d;
    uint8_t qh[4];            /* 5th bit of element j at bit j (little-endian u32) */
    uint8_t qs[EL_QK5_0 / 2];
} block_q5_0;
static_assert(sizeof(block_q5_0) == 2 + 4 + EL_QK5_0 / 2, "block_q5_0 size");

typedef struct {
    el_fp16 d;
    el_fp16 m;
    uint8_t qh[4];
    uint8_t qs[EL_QK5_1 / 2];
} block_q5_1;
static_assert(sizeof(block_q5_1) == 2 * 2 + 4 + EL_QK5_1 / 2, "block_q5_1 size");

typedef struct {
    el_fp16 d;
    int8_t qs[EL_QK8_0];
} block_q8_0;
static_assert(sizeof(block_q8_0) == 2 + EL_QK8_0, "block_q8_0 size");

typedef struct {
    el_fp16 d;                /* scale */
    el_fp16 s;                /* d * sum(qs) */
    int8_t qs[EL_QK8_1];
} block_q8_1;
static_assert(sizeof(block_q8_1) == 2 * 2 + EL_QK8_1, "block_q8_1 size");

/* ---- K-quants: 256-element super-blocks ---- */

/* 2.625 bits/weight: 16 sub-blocks of 16; 4-bit scale and 4-bit min each. */
typedef struct {
    uint8_t scales[EL_QK_K / 16]; /* low nibble: scale, high nibble: min */
    uint8_t qs[EL_QK_K / 4];      /* 2-bit quants */
    el_fp16 d;                    /* super-block scale for scales */
    el_fp16 dmin;                 /* super-block scale for mins */
} block_q2_K;
static_assert(sizeof(block_q2_K) == 2 * 2 + EL_QK_K / 16 + EL_QK_K / 4, "block_q2_K size");

/* 3.4375 bits/weight: 16 sub-blocks of 16; 6-bit signed scales (offset 32). */
typedef struct {
    uint8_t hmask[EL_QK_K / 8];   /* high bit (set: +0, clear: -4) */
    uint8_t qs[EL_QK_K / 4];      /* low 2 bits */
    uint8_t scales[12];           /* 16 x 6-bit scales, packed */
    el_fp16 d;
} block_q3_K;
static_assert(sizeof(block_q3_K) == 2 + EL_QK_K / 4 + EL_QK_K / 8 + 12, "block_q3_K size");

/* 4.5 bits/weight: 8 sub-blocks of 32; 6-bit scale and min each. */
typedef struct {
    el_fp16 d;
    el_fp16 dmin;
    uint8_t scales[EL_K_SCALE_SIZE]; /* 8 scales + 8 mins, 6 bits each, packed */
    uint8_t qs[EL_QK_K / 2];
} block_q4_K;
static_assert(sizeof(block_q4_K) == 2 * 2 + EL_K_SCALE_SIZE + EL_QK_K / 2, "block_q4_K size");

/* 5.5 bits/weight: as Q4_K plus one high bit per weight. */
typedef struct {
    el_fp16 d;
    el_fp16 dmin;
    uint8_t scales[EL_K_SCALE_SIZE];
    uint8_t qh[EL_QK_K / 8];
    uint8_t qs[EL_QK_K / 2];
} block_q5_K;
static_assert(sizeof(block_q5_K) == 2 * 2 + EL_K_SCALE_SIZE + EL_QK_K / 2 + EL_QK_K / 8,
              "block_q5_K size");

/* 6.5625 bits/weight: 16 sub-blocks of 16; 8-bit signed scales. */
typedef struct {
    uint8_t ql[EL_QK_K / 2];      /* low 4 bits */
    uint8_t qh[EL_QK_K / 4];      /* high 2 bits */
    int8_t scales[EL_QK_K / 16];
    el_fp16 d;
} block_q6_K;
static_assert(sizeof(block_q6_K) == 2 + EL_QK_K / 16 + 3 * EL_QK_K / 4, "block_q6_K size");

/* Activation format for the K-quants (never stored in files). */
typedef struct {
    float d;
    int8_t qs[EL_QK_K];
    int16_t bsums[EL_QK_K / 16]; /* sum of qs in groups of 16 */
} block_q8_K;
static_assert(sizeof(block_q8_K) == 4 + EL_QK_K + EL_QK_K / 16 * 2, "block_q8_K size");

/* ---- non-linear 4-bit ---- */

typedef struct {
    el_fp16 d;
    uint8_t qs[EL_QK4_NL / 2];    /* indices into kvalues_iq4nl */
} block_iq4_nl;
static_assert(sizeof(block_iq4_nl) == 2 + EL_QK4_NL / 2, "block_iq4_nl size");

typedef struct {
    el_fp16 d;
    uint16_t scales_h;            /* high 2 bits of the 8 6-bit scales */
    uint8_t scales_l[EL_QK_K / 64]; /* low 4 bits of the scales */
    uint8_t qs[EL_QK_K / 2];
} block_iq4_xs;
static_assert(sizeof(block_iq4_xs) == 2 + 2 + EL_QK_K / 64 + EL_QK_K / 2, "block_iq4_xs size");

/* The 16 IQ4_NL/IQ4_XS code values (defined in quants.c). */
extern const int8_t kvalues_iq4nl[16];

/* ---- microscaling FP4 (OCP MX v1.0, gpt-oss's expert weights) ---- */

/*
 * MXFP4: 32 E2M1 values sharing one E8M0 exponent. Element j is the low
 * nibble of qs[j] (j < 16) or the high nibble of qs[j - 16]; a nibble is
 * sign (bit 3), 2 exponent bits, 1 mantissa bit. As ggml, the code values
 * are stored doubled (kvalues_mxfp4: 0, 0.5, 1, ... 6 -> 0, 1, 2, ... 12)
 * and the exponent is read as half its value, 2^(e - 128)
 * (el_e8m0_to_fp32_half), so value = kvalues_mxfp4[nibble] * 2^(e - 128)
 * = E2M1(nibble) * 2^(e - 127). e = 0xFF is NaN in the MX spec; ggml does
 * not decode it (its validator rejects it) and neither does edgellm: the
 * loader refuses a tensor that holds one (el_mxfp4_find_bad_exponent).
 */
typedef struct {
    uint8_t e;                      /* E8M0 shared exponent, bias 127 */
    uint8_t qs[EL_QK_MXFP4 / 2];    /* E2M1 nibbles: element j (low), j+16 (high) */
} block_mxfp4;
static_assert(sizeof(block_mxfp4) == 1 + EL_QK_MXFP4 / 2, "block_mxfp4 size");

/* The 16 E2M1 code values, doubled (defined in quants.c). */
extern const int8_t kvalues_mxfp4[16];

/* 2^(e - 128) as a float, bit-built: e = 0, 1 give the subnormals 2^-128,
 * 2^-127; e >= 2 the normal with biased exponent e - 1. Exact for every e. */
static inline float el_e8m0_to_fp32_half(uint8_t e) {
    const uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/*
 * Q4_K/Q5_K packed 6-bit scales: sub-block j (0..7) -> scale *sc, min *m.
 * Bytes 0-3: scales 0-3 (low 6 bits) + high 2 bits of scales 4-7;
 * bytes 4-7: mins 0-3 likewise; bytes 8-11: low nibbles of scales/mins 4-7.
 */
static inline void el_get_scale_min_k4(int j, const uint8_t *q, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/*
 * Q3_K packed 6-bit scales: sub-block j (0..15) -> unsigned 0..63 (subtract 32
 * for the signed scale).  Low 4 bits: bytes 0-7 (j<8 low nibble, j>=8 high
 * nibble of byte j-8); high 2 bits: byte 8 + j%4, bit pair j/4.
 */
static inline int el_q3k_scale(int j, const uint8_t *s) {
    const int lo = j < 8 ? (s[j] & 0xF) : (s[j - 8] >> 4);
    const int hi = (s[8 + (j & 3)] >> (2 * (j >> 2))) & 3;
    return lo | (hi << 4);
}

/*
 * Unpacking a K-quant super-block into its 256 small integer quants, in
 * element order (shared by dequantization and the portable dot products).
 * Element e uses sub-block scale e/16 (Q2_K, Q3_K, Q6_K) or e/32 (Q4_K, Q5_K).
 */

/* Q2_K: 0..3.  Element n*128 + j*32 + l = bits 2j..2j+1 of qs[n*32 + l]. */
static inline void el_unpack_q2_k(const block_q2_K *restrict b, int8_t *restrict a) {
    for (int n = 0; n < 2; ++n) {
        const uint8_t *restrict q = b->qs + 32 * n;
        for (int j = 0; j < 4; ++j)
            for (int l = 0; l < 32; ++l) a[128 * n + 32 * j + l] = (int8_t)((q[l] >> (2 * j)) & 3);
    }
}

/* Q3_K: -4..3.  Low 2 bits as Q2_K; hmask[l] bit 4n+j clear subtracts 4. */
static inline void el_unpack_q3_k(const block_q3_K *restrict b, int8_t *restrict a) {
    for (int n = 0; n < 2; ++n) {
        const uint8_t *restrict q = b->qs + 32 * n;
        for (int j = 0; j < 4; ++j) {
            const int bit = 4 * n + j;
            for (int l = 0; l < 32; ++l)
                a[128 * n + 32 * j + l] =
                    (int8_t)(((q[l] >> (2 * j)) & 3) - (((b->hmask[l] >> bit) & 1) ? 0 : 4));
        }
    }
}

/* Q4_K: 0..15.  Element 64j + l = low nibble of qs[32j + l], 64j + 32 + l the high one. */
static inline void el_unpack_q4_k(const block_q4_K *restrict b, int8_t *restrict a) {
    for (int j = 0; j < 4; ++j) {
        const uint8_t *restrict q = b->qs + 32 * j;
        for (int l = 0; l < 32; ++l) a[64 * j + l] = (int8_t)(q[l] & 0xF);
        for (int l = 0; l < 32; ++l) a[64 * j + 32 + l] = (int8_t)(q[l] >> 4);
    }
}

/* Q5_K: 0..31.  As Q4_K plus 16 * bit (e/32) of qh[e%32]. */
static inline void el_unpack_q5_k(const block_q5_K *restrict b, int8_t *restrict a) {
    for (int j = 0; j < 4; ++j) {
        const uint8_t *restrict q = b->qs + 32 * j;
        for (int l = 0; l < 32; ++l)
            a[64 * j + l] = (int8_t)((q[l] & 0xF) | (((b->qh[l] >> (2 * j)) & 1) << 4));
        for (int l = 0; l < 32; ++l)
            a[64 * j + 32 + l] = (int8_t)((q[l] >> 4) | (((b->qh[l] >> (2 * j + 1)) & 1) << 4));
    }
}

/* Q6_K: -32..31.  Per 128 elements: 4 bits from ql (64 bytes), 2 from qh (32 bytes). */
static inline void el_unpack_q6_k(const block_q6_K *restrict b, int8_t *restrict a) {
    for (int n = 0; n < 2; ++n) {
        const uint8_t *restrict ql = b->ql + 64 * n;
        const uint8_t *restrict qh = b->qh + 32 * n;
        int8_t *restrict o = a + 128 * n;
        for (int l = 0; l < 32; ++l) {
            o[l + 0] = (int8_t)(((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
            o[l + 32] = (int8_t)(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
            o[l + 64] = (int8_t)(((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
            o[l + 96] = (int8_t)(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
        }
    }
}

/* IQ4_XS sub-block ib (0..7) scale, 6 bits unsigned (subtract 32 for the signed scale). */
static inline int el_iq4xs_scale(const block_iq4_xs *b, int ib) {
    return ((b->scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((b->scales_h >> (2 * ib)) & 3) << 4);
}

#endif
