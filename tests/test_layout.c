/*
 * test_layout.c — the weight layouts (backend/cpu/layout.h) compute the
 * flat kernels' bits.
 *
 * For random Q8_0 and Q4_0 matrices (every byte value as quants, -128
 * included; finite fp16 scales) and activations quantized by the Q8_0
 * quantizer:
 *   - the portable Q8_0_R16 / Q4_0_R16 kernels equal the portable flat
 *     kernels (Q8_0 in the block order; Q4_0 has one order), output by
 *     output, bit for bit, for 1..9, 16, 17, 64 and 300 activation rows and
 *     row lengths of 1 to 280 blocks;
 *   - the AVX-512 kernel (where the CPU has it) equals the portable one,
 *     with row counts past its accumulator pieces (4,096 floats: 256 groups
 *     at one activation row, 32 at eight) and block counts past its 64-block
 *     chunks (2,080 and 8,960 elements);
 *   - packing puts every byte where the layout says (a block read back),
 *     unpacking inverts it, one row's block gathers back, and the sizes: a
 *     group is the size of its 16 flat rows; the file's type ids map to the
 *     layouts and carry their base types' sizes;
 *   - el_cpu_layout_for grants Q4_0's layout to matrices of 16k rows, and
 *     Q8_0's only in the block order, when the R16 layouts are asked for.
 *
 * For random Q4_K matrices (every byte value as quants and packed scales,
 * so every 6-bit scale and min; finite fp16 d and dmin) and activations
 * quantized to Q8_K: the portable Q4_K_R16 kernel equals the flat kernels
 * row by row — the one-row order (el_vec_dot_q4_k_q8_k) and the 4-row order
 * (el_select_q4_k's, el_vec_dot_q4_k_q8_k_x4) for the rows its x4 argument
 * gives, split as the selector splits, all one way and all the other — at
 * 1..9, 16, 17 and 64 activation rows and 1 to 35 super-blocks, the AVX-512 one
 * equals the portable one, and packing, unpacking and the block gather hold
 * as above (the scale bytes where layout.h puts them).
 *
 * For random Q5_0 matrices (every byte value as quants and fifth bits;
 * finite fp16 scales): the portable Q5_0_R16 kernel equals the portable flat
 * Q5_0 kernel of the process's order (llama: 8 lanes; test_layout_block:
 * the block order), the AVX-512 one the portable one, at the Q8_0 cases'
 * sizes, with packing, unpacking and the gather as above (the fifth bits in
 * their masks).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/kernels.h"
#include "backend/cpu/kernels_kquants.h"
#include "backend/cpu/layout.h"
#include "package/quants_blocks.h"
#include "package/types.h"
#include "testutil.h"
#include "util/fp16.h"

static int g_isa_checked;

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) { return el_test_rnd(&rng); }
static float rndf(void) { return el_test_rndf(&rng); }

/* Random blocks of a 32-element type with its fp16 scale first: random quant bytes, a small scale. */
static void random_blocks(uint8_t *w, size_t nblocks, size_t bb) {
    for (size_t b = 0; b < nblocks; ++b) {
        uint8_t *blk = w + bb * b;
        for (size_t i = 2; i < bb; ++i) blk[i] = (uint8_t)(rnd() & 0xFF);
        const el_fp16 d = el_fp32_to_fp16(rndf() * 0.02f);
        memcpy(blk, &d, sizeof d);
    }
}

static int same(const float *a, const float *b, size_t n, size_t *at) {
    for (size_t i = 0; i < n; ++i)
        if (memcmp(&a[i], &b[i], sizeof(float))) {
            *at = i;
            return 0;
        }
    return 1;
}

/* The portable layout kernel por against the flat kernels' outputs yf (nt rows of nr), bit for bit, and the
 * process's kernel for lay (the ISA's, where there is one) against the portable one. */
static void check_kernels(el_layout lay, el_layout_gemm_fn por, int k, const uint8_t *p, int nr, const uint8_t *xq,
                          size_t xr, int nt, int x4, const float *yf) {
    const size_t ny = (size_t)nr * (size_t)nt;
    float *yp = malloc(sizeof(float) * ny), *ya = malloc(sizeof(float) * ny);
    por(k, p, nr, xq, xr, nt, yp, (size_t)nr, x4);
    size_t at = 0;
    CHECKF(same(yf, yp, ny, &at), "portable %s != flat: k %d nr %d nt %d x4 %d at %zu: %.9g vs %.9g", el_layout_name(lay),
           k, nr, nt, x4, at, yp[at], yf[at]);
    el_layout_gemm_fn fast = el_cpu_layout_gemm(lay);
    if (fast && fast != por) {
        memset(ya, 0xFF, sizeof(float) * ny);
        fast(k, p, nr, xq, xr, nt, ya, (size_t)nr, x4);
        CHECKF(same(yp, ya, ny, &at), "ISA %s != portable: k %d nr %d nt %d x4 %d at %zu: %.9g vs %.9g",
               el_layout_name(lay), k, nr, nt, x4, at, ya[at], yp[at]);
        g_isa_checked++;
    }
    free(yp), free(ya);
}

/* Packed p of the flat rows w (nr x k, rb bytes a row): unpacking gives w back, and row `row`'s block b
 * is gathered from its group as the flat block src (bb bytes). */
static void check_inverse(el_layout lay, const uint8_t *w, const uint8_t *p, int k, int nr, size_t rb, int row, int b,
                          const void *src, size_t bb) {
    uint8_t *back = malloc(rb * (size_t)nr), blk[256];
    el_layout_unpack(lay, p, k, nr, back, rb);
    CHECKF(!memcmp(back, w, rb * (size_t)nr), "%s k %d nr %d: unpack(pack(w)) != w", el_layout_name(lay), k, nr);
    free(back);
    el_layout_block(lay, p, k, row, b, blk);
    CHECKF(!memcmp(blk, src, bb), "%s k %d: el_layout_block row %d block %d", el_layout_name(lay), k, row, b);
}

/* nt random activation rows quantized by flat, the flat outputs of the rows w (rows t < x4 through x4dot,
 * the others through flat->vec_dot), and the layout kernels against them (check_kernels). */
static void check_against_flat(el_layout lay, el_layout_gemm_fn por, const el_cpu_type_kernels *flat,
                               el_vec_dot_fn x4dot, const uint8_t *w, size_t rb, const uint8_t *p, int k, int nr,
                               int nt, int x4) {
    const size_t xr = el_row_size(flat->vec_dot_type, k);
    uint8_t *xq = malloc(xr * (size_t)nt);
    float *xf = malloc(sizeof(float) * (size_t)k);
    for (int t = 0; t < nt; ++t) {
        for (int i = 0; i < k; ++i) xf[i] = rndf() * (t % 3 == 0 ? 4.0f : 0.5f);
        flat->quantize(xf, xq + xr * (size_t)t, k);
    }
    float *yf = malloc(sizeof(float) * (size_t)nr * (size_t)nt);
    for (int t = 0; t < nt; ++t)
        for (int i = 0; i < nr; ++i)
            (t < x4 ? x4dot : flat->vec_dot)(k, &yf[(size_t)t * nr + i], w + rb * (size_t)i, xq + xr * (size_t)t);
    check_kernels(lay, por, k, p, nr, xq, xr, nt, x4, yf);
    free(xq), free(xf), free(yf);
}

/* One matrix of layout lay: nr x k weights, nt activation rows. flat: the type's portable kernels
 * (Q8_0 in the block order). */
static void check_case(el_layout lay, const el_cpu_type_kernels *flat, int k, int nr, int nt) {
    const int q4 = lay == EL_LAYOUT_Q4_0_R16;
    const el_type type = q4 ? EL_TYPE_Q4_0 : EL_TYPE_Q8_0;
    const size_t rb = el_row_size(type, k), nbk = (size_t)k / EL_QK8_0, bb = rb / nbk, qb = q4 ? 256 : 512;
    uint8_t *w = malloc(rb * (size_t)nr);
    random_blocks(w, nbk * (size_t)nr, bb);
    const size_t pb = el_layout_bytes(lay, k, nr);
    CHECKF(pb == rb * (size_t)nr, "%s k %d nr %d: layout %zu bytes, flat %zu", el_layout_name(lay), k, nr, pb,
          rb * (size_t)nr);
    uint8_t *p = aligned_alloc(64, (pb + 63) / 64 * 64);
    el_layout_pack(lay, w, rb, k, nr, p);

    /* a block read back: row 16g + r, block b, register l, byte e */
    const int g = nr / 16 - 1, r = (int)(rnd() % 16), b = (int)(rnd() % nbk), l = (int)(rnd() % (q4 ? 4 : 8));
    const uint8_t *gp = p + el_layout_group_bytes(lay, k) * (size_t)g;
    const uint8_t *src = w + rb * (size_t)(16 * g + r) + bb * (size_t)b; /* d, then the quant bytes */
    for (int e = 0; e < 4; ++e)
        CHECKF(gp[qb * (size_t)b + 64 * l + 4 * r + e] == (uint8_t)(src[2 + 4 * l + e] + (q4 ? 0 : 128)),
              "%s k %d: quant byte", el_layout_name(lay), k);
    CHECKF(!memcmp(gp + qb * nbk + 32 * (size_t)b + 2 * (size_t)r, src, 2), "%s k %d: scale", el_layout_name(lay), k);
    /* unpacking is the inverse, and one row's block is gathered from its group as the flat block */
    check_inverse(lay, w, p, k, nr, rb, 16 * g + r, b, src, bb);
    check_against_flat(lay, q4 ? el_layout_gemm_q4_0_r16_portable : el_layout_gemm_q8_0_r16_portable, flat, NULL, w, rb,
                       p, k, nr, nt, 0);
    free(w), free(p);
}

/* Q4_K: an nr x k matrix, nt activation rows, the first x4 of them in the 4-row order (see the top). */
static void check_q4k(const el_cpu_type_kernels *flat, int k, int nr, int nt, int x4) {
    const el_layout lay = EL_LAYOUT_Q4_K_R16;
    const size_t rb = el_row_size(EL_TYPE_Q4_K, k), nbk = (size_t)k / EL_QK_K;
    uint8_t *w = malloc(rb * (size_t)nr);
    for (size_t b = 0; b < nbk * (size_t)nr; ++b) {
        block_q4_K *blk = (block_q4_K *)(w + sizeof(block_q4_K) * b);
        for (size_t i = 0; i < sizeof blk->scales; ++i) blk->scales[i] = (uint8_t)(rnd() & 0xFF);
        for (size_t i = 0; i < sizeof blk->qs; ++i) blk->qs[i] = (uint8_t)(rnd() & 0xFF);
        blk->d = el_fp32_to_fp16(rndf() * 0.01f);
        blk->dmin = el_fp32_to_fp16(rndf() * 0.01f);
    }
    const size_t pb = el_layout_bytes(lay, k, nr);
    CHECKF(pb == rb * (size_t)nr, "q4_k_r16 k %d nr %d: layout %zu bytes, flat %zu", k, nr, pb, rb * (size_t)nr);
    uint8_t *p = aligned_alloc(64, (pb + 63) / 64 * 64);
    el_layout_pack(lay, w, rb, k, nr, p);
    /* a super-block read back: row 16g + r, super-block b */
    const int g = nr / 16 - 1, r = (int)(rnd() % 16), b = (int)(rnd() % nbk), c = (int)(rnd() % 32), pq = (int)(rnd() % 4);
    const uint8_t *q = p + el_layout_group_bytes(lay, k) * (size_t)g + 2304 * (size_t)b;
    const block_q4_K *src = (const block_q4_K *)(w + rb * (size_t)(16 * g + r)) + b;
    uint8_t sc[8], m[8];
    for (int j = 0; j < 8; ++j) el_get_scale_min_k4(j, src->scales, &sc[j], &m[j]);
    CHECKF(!memcmp(q + EL_Q4K_R16_QS + 64 * c + 4 * r, src->qs + 4 * c, 4) && !memcmp(q + EL_Q4K_R16_D + 2 * r, &src->d, 2) &&
               !memcmp(q + EL_Q4K_R16_DMIN + 2 * r, &src->dmin, 2),
           "q4_k_r16 k %d: quants, d, dmin", k);
    CHECKF(q[EL_Q4K_R16_SC + 16 * pq + r] == ((sc[pq] & 15) | (sc[pq + 4] & 15) << 4) &&
               q[EL_Q4K_R16_MN + 16 * pq + r] == ((m[pq] & 15) | (m[pq + 4] & 15) << 4) &&
               q[EL_Q4K_R16_HI + 16 * pq + r] == (sc[pq] >> 4 | (sc[pq + 4] >> 4) << 2 | (m[pq] >> 4) << 4 | (m[pq + 4] >> 4) << 6),
           "q4_k_r16 k %d: scale bytes", k);
    check_inverse(lay, w, p, k, nr, rb, 16 * g + r, b, src, sizeof(block_q4_K));
    check_against_flat(lay, el_layout_gemm_q4_k_r16_portable, flat, el_select_q4_k(4, 0, k), w, rb, p, k, nr, nt, x4);
    free(w), free(p);
}

/* Q5_0: an nr x k matrix, nt activation rows; flat: the portable Q5_0 kernel of the process's order (the
 * layout computes that order). */
static void check_q50(const el_cpu_type_kernels *flat, int k, int nr, int nt) {
    const el_layout lay = EL_LAYOUT_Q5_0_R16;
    const size_t rb = el_row_size(EL_TYPE_Q5_0, k), nbk = (size_t)k / EL_QK8_0;
    uint8_t *w = malloc(rb * (size_t)nr);
    random_blocks(w, nbk * (size_t)nr, sizeof(block_q5_0));
    const size_t pb = el_layout_bytes(lay, k, nr);
    CHECKF(pb == rb * (size_t)nr, "q5_0_r16 k %d nr %d: layout %zu bytes, flat %zu", k, nr, pb, rb * (size_t)nr);
    uint8_t *p = aligned_alloc(64, (pb + 63) / 64 * 64);
    el_layout_pack(lay, w, rb, k, nr, p);
    /* a block read back: row 16g + r, block b, quant register c, element 4j + e's fifth bit */
    const int g = nr / 16 - 1, r = (int)(rnd() % 16), b = (int)(rnd() % nbk), c = (int)(rnd() % 4), j = (int)(rnd() % 8);
    const uint8_t *q = p + el_layout_group_bytes(lay, k) * (size_t)g + EL_Q50_R16_BLOCK * (size_t)b;
    const block_q5_0 *src = (const block_q5_0 *)(w + rb * (size_t)(16 * g + r)) + b;
    uint32_t qh;
    memcpy(&qh, src->qh, 4);
    uint64_t mask;
    memcpy(&mask, q + EL_Q50_R16_QH + 8 * j, 8);
    CHECKF(!memcmp(q + 64 * c + 4 * r, src->qs + 4 * c, 4) && !memcmp(q + EL_Q50_R16_D + 2 * r, &src->d, 2),
           "q5_0_r16 k %d: quants, d", k);
    CHECKF((mask >> (4 * r) & 15) == (qh >> (4 * j) & 15), "q5_0_r16 k %d: fifth bits of row %d, mask %d", k, r, j);
    check_inverse(lay, w, p, k, nr, rb, 16 * g + r, b, src, sizeof(block_q5_0));
    check_against_flat(lay, el_layout_gemm_q5_0_r16_portable, flat, NULL, w, rb, p, k, nr, nt, 0);
    free(w), free(p);
}

int main(void) {
    el_cpu_type_kernels por[EL_TYPE_COUNT];
    el_cpu_kernels_build(por, EL_CPU_PORTABLE, EL_ORDER_BLOCK);
    el_cpu_type_kernels por_llama[EL_TYPE_COUNT];
    el_cpu_kernels_build(por_llama, EL_CPU_PORTABLE, EL_ORDER_LLAMA);
    /* Q4_0 has one order: its kernel is the same in both tables */
    CHECKF(por[EL_TYPE_Q4_0].vec_dot == por_llama[EL_TYPE_Q4_0].vec_dot, "Q4_0: one kernel in both orders");
    static const el_layout lays[] = {EL_LAYOUT_Q8_0_R16, EL_LAYOUT_Q4_0_R16};

    static const int ks[] = {32, 96, 640, 2048, 2080, 8960};
    static const int nts[] = {1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 64};
    int cases = 0;
    for (size_t li = 0; li < 2; ++li) {
        const el_layout lay = lays[li];
        const el_cpu_type_kernels *flat = &por[lay == EL_LAYOUT_Q4_0_R16 ? EL_TYPE_Q4_0 : EL_TYPE_Q8_0];
        for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ++ki)
            for (size_t ti = 0; ti < sizeof nts / sizeof nts[0]; ++ti) {
                if (ks[ki] == 8960 && nts[ti] > 9) continue; /* keeps the portable reference quick */
                check_case(lay, flat, ks[ki], ks[ki] >= 2048 ? 32 : 48, nts[ti]);
                cases++;
            }
        check_case(lay, flat, 640, 16 * 272, 1); /* 272 groups: two accumulator pieces at one activation row */
        check_case(lay, flat, 64, 16 * 40, 8);   /* 40 groups: two pieces at eight */
        check_case(lay, flat, 96, 16, 300);      /* activation tiles past 8, 64 and 256 */
        cases += 3;
    }

    /* Q4_K: the flat one-row kernel is the table's vec_dot in either order */
    CHECKF(por[EL_TYPE_Q4_K].vec_dot == por_llama[EL_TYPE_Q4_K].vec_dot, "Q4_K: one one-row kernel in both orders");
    static const int kks[] = {256, 512, 1536, 2048, 8960};
    for (size_t ki = 0; ki < sizeof kks / sizeof kks[0]; ++ki)
        for (size_t ti = 0; ti < sizeof nts / sizeof nts[0]; ++ti) {
            if (kks[ki] == 8960 && nts[ti] > 9) continue;
            /* the selector's split (rows below nt - nt % 4 in the 4-row order), all one-row, all 4-row */
            const int x4s[] = {nts[ti] - nts[ti] % 4, 0, nts[ti]};
            for (int xi = 0; xi < 3; ++xi, cases++) check_q4k(&por[EL_TYPE_Q4_K], kks[ki], kks[ki] >= 2048 ? 32 : 48, nts[ti], x4s[xi]);
        }
    check_q4k(&por[EL_TYPE_Q4_K], 256, 16 * 40, 5, 4); /* many groups, a second tile */
    check_q4k(&por[EL_TYPE_Q4_K], 512, 32, 7, 3);     /* a split inside a tile */
    cases += 2;

    /* Q5_0, in the process's kernel order (test_layout_block runs the block order): the two orders differ */
    CHECKF(por[EL_TYPE_Q5_0].vec_dot != por_llama[EL_TYPE_Q5_0].vec_dot, "Q5_0: a kernel an order");
    const el_cpu_type_kernels *q50 = &(el_cpu_kernels_order() == EL_ORDER_BLOCK ? por : por_llama)[EL_TYPE_Q5_0];
    for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ++ki)
        for (size_t ti = 0; ti < sizeof nts / sizeof nts[0]; ++ti) {
            if (ks[ki] == 8960 && nts[ti] > 9) continue;
            check_q50(q50, ks[ki], ks[ki] >= 2048 ? 32 : 48, nts[ti]);
            cases++;
        }
    check_q50(q50, 640, 16 * 40, 5); /* many groups */
    cases++;

    /* which matrices get the layout (the process's request and order decide; here: none asked) */
    CHECKF(el_layout_bytes(EL_LAYOUT_Q8_0_R16, 640, 17) == 0, "17 rows: no layout");
    CHECKF(el_layout_bytes(EL_LAYOUT_FLAT, 640, 16) == 0, "flat: no packed bytes");
    const int asked = el_cpu_layout_requested();
    const int block = el_cpu_kernels_order() == EL_ORDER_BLOCK;
    const int vnni = el_cpu_kernels_level() == EL_CPU_AVX512;
    CHECKF(el_cpu_layout_for(EL_TYPE_Q8_0, 640, 2048) == (asked && block && vnni ? EL_LAYOUT_Q8_0_R16 : EL_LAYOUT_FLAT),
          "Q8_0 640 x 2048: asked %d, block order %d, VNNI %d", asked, block, vnni);
    CHECKF(el_cpu_layout_for(EL_TYPE_Q8_0, 640, 2040) == EL_LAYOUT_FLAT, "2040 rows: flat");
    CHECKF(el_cpu_layout_for(EL_TYPE_Q4_0, 2048, 5632) == (asked && vnni ? EL_LAYOUT_Q4_0_R16 : EL_LAYOUT_FLAT),
          "Q4_0 2048 x 5632: asked %d, VNNI %d", asked, vnni);
    CHECKF(el_cpu_layout_for(EL_TYPE_Q4_0, 2048, 5640) == EL_LAYOUT_FLAT, "Q4_0 5640 rows: flat");
    CHECKF(el_cpu_layout_for(EL_TYPE_Q5_0, 640, 2048) == (asked && vnni ? EL_LAYOUT_Q5_0_R16 : EL_LAYOUT_FLAT),
           "Q5_0 640 x 2048: asked %d, VNNI %d", asked, vnni);
    CHECKF(el_cpu_layout_for(EL_TYPE_Q5_0, 640, 2040) == EL_LAYOUT_FLAT, "Q5_0 2040 rows: flat");
    CHECKF(!strcmp(el_layout_set_name(1u << EL_LAYOUT_Q5_0_R16 | 1u << EL_LAYOUT_Q8_0_R16), "q5_0_r16+q8_0_r16") &&
               !strcmp(el_layout_set_name(1u << EL_LAYOUT_Q5_0_R16 | 1u << EL_LAYOUT_Q4_K_R16), "q4_k_r16+q5_0_r16") &&
               !strcmp(el_layout_set_name(30u), "q4_0_r16+q4_k_r16+q5_0_r16+q8_0_r16") &&
               !strcmp(el_layout_name(EL_LAYOUT_Q5_0_R16), "q5_0_r16"),
           "layout set names with Q5_0");
    CHECKF(!strcmp(el_layout_set_name(0), "flat") && !strcmp(el_layout_set_name(1u << EL_LAYOUT_Q4_0_R16), "q4_0_r16") &&
              !strcmp(el_layout_set_name(1u << EL_LAYOUT_Q4_0_R16 | 1u << EL_LAYOUT_Q8_0_R16), "q4_0_r16+q8_0_r16"),
          "layout set names");
    CHECKF(el_cpu_layout_for(EL_TYPE_Q4_K, 2048, 2048) == (asked && vnni ? EL_LAYOUT_Q4_K_R16 : EL_LAYOUT_FLAT),
           "Q4_K 2048 x 2048: asked %d, VNNI %d", asked, vnni);
    CHECKF(el_cpu_layout_for(EL_TYPE_Q4_K, 2048, 2040) == EL_LAYOUT_FLAT, "Q4_K 2040 rows: flat");
    CHECKF(!strcmp(el_layout_set_name(1u << EL_LAYOUT_Q4_K_R16 | 1u << EL_LAYOUT_Q8_0_R16), "q4_k_r16+q8_0_r16") &&
               !strcmp(el_layout_set_name(1u << EL_LAYOUT_Q4_K_R16 | 1u << EL_LAYOUT_Q4_0_R16 | 1u << EL_LAYOUT_Q8_0_R16),
                       "q4_0_r16+q4_k_r16+q8_0_r16") &&
               !strcmp(el_layout_name(EL_LAYOUT_Q4_K_R16), "q4_k_r16"),
           "layout set names with Q4_K");
    /* the file's type ids (package/layout.h): edgellm's own, sized as their base types, no flat reader */
    for (int li = 1; li < EL_LAYOUT_COUNT; ++li) {
        const el_layout l = (el_layout)li;
        const int ty = el_layout_type(l), base = el_layout_base(l);
        const el_type_info *ti = el_type_get(ty), *bi = el_type_get(base);
        CHECKF(ty >= 0x4000 && el_layout_of_type(ty) == l && el_layout_r16_of((el_type)base) == l, "%s: type ids",
               el_layout_name(l));
        CHECKF(ti && bi && ti->blck_size == bi->blck_size && ti->type_size == bi->type_size && !ti->weights_supported &&
                   !ti->to_float && el_row_size((el_type)ty, 640) == el_row_size((el_type)base, 640),
               "%s: type entry", el_layout_name(l));
    }
    CHECKF(el_layout_of_type(EL_TYPE_Q8_0) == EL_LAYOUT_FLAT && el_layout_type(EL_LAYOUT_FLAT) == -1 &&
               !strcmp(el_type_name(EL_TYPE_Q4_0_R16), "Q4_0_R16") && el_type_get(0x4005) == NULL,
           "layout type ids: flat and unknown");

    printf("test_layout: %d cases, %d against the ISA kernels (R16 layouts %s, order %s)\n", cases, g_isa_checked,
           asked ? "requested" : "not requested", el_cpu_order_name(el_cpu_kernels_order()));
    return el_test_finish("test_layout");
}
