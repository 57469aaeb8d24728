/*
 * layout.c — the weight layouts' byte format (layout.h): names, type ids,
 * sizes, and packing between flat rows and 16-row groups.
 */
#include "package/layout.h"

#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#include "package/quants_blocks.h"

#define R16 EL_LAYOUT_R16_ROWS

/* Quant bytes of one block of a group (16 rows) when a group keeps its quants before its scales: Q8_0 512,
 * Q4_0 256; 0 for Q4_K and Q5_0 (block by block, scales inline) and flat. */
static size_t qbytes(el_layout l) { return l == EL_LAYOUT_Q8_0_R16 ? 512 : l == EL_LAYOUT_Q4_0_R16 ? 256 : 0; }

static const struct {
    const char *name;
    int type, base;
} k_layouts[EL_LAYOUT_COUNT] = {
    [EL_LAYOUT_FLAT] = {"flat", -1, -1},
    [EL_LAYOUT_Q8_0_R16] = {"q8_0_r16", EL_TYPE_Q8_0_R16, EL_TYPE_Q8_0},
    [EL_LAYOUT_Q4_0_R16] = {"q4_0_r16", EL_TYPE_Q4_0_R16, EL_TYPE_Q4_0},
    [EL_LAYOUT_Q4_K_R16] = {"q4_k_r16", EL_TYPE_Q4_K_R16, EL_TYPE_Q4_K},
    [EL_LAYOUT_Q5_0_R16] = {"q5_0_r16", EL_TYPE_Q5_0_R16, EL_TYPE_Q5_0},
};

static bool valid(el_layout l) { return l > EL_LAYOUT_FLAT && l < EL_LAYOUT_COUNT; }

const char *el_layout_name(el_layout l) { return valid(l) ? k_layouts[l].name : "flat"; }

/* Every subset of the layouts (index: set >> 1): their names in alphabetical order joined by '+', "flat"
 * for none; built once from k_layouts. */
#define N_SETS (1u << (EL_LAYOUT_COUNT - 1))
static char g_sets[N_SETS][EL_LAYOUT_COUNT * 12];
static pthread_once_t g_sets_once = PTHREAD_ONCE_INIT;

static void build_sets(void) {
    int order[EL_LAYOUT_COUNT - 1]; /* the layouts, by name */
    for (int i = 0; i < EL_LAYOUT_COUNT - 1; ++i) {
        int j = i;
        for (; j > 0 && strcmp(k_layouts[order[j - 1]].name, k_layouts[i + 1].name) > 0; --j) order[j] = order[j - 1];
        order[j] = i + 1;
    }
    for (unsigned set = 0; set < N_SETS; ++set) {
        char *o = g_sets[set];
        for (int i = 0; i < EL_LAYOUT_COUNT - 1; ++i)
            if (set >> (order[i] - 1) & 1) {
                if (*o) strcat(o, "+");
                strcat(o, k_layouts[order[i]].name);
            }
        if (!*o) strcpy(o, "flat");
    }
}

const char *el_layout_set_name(unsigned set) {
    pthread_once(&g_sets_once, build_sets);
    return g_sets[(set >> 1) & (N_SETS - 1)];
}

el_layout el_layout_of_type(int type) {
    for (int l = 1; l < EL_LAYOUT_COUNT; ++l)
        if (k_layouts[l].type == type) return (el_layout)l;
    return EL_LAYOUT_FLAT;
}

int el_layout_type(el_layout l) { return valid(l) ? k_layouts[l].type : -1; }

int el_layout_base(el_layout l) { return valid(l) ? k_layouts[l].base : -1; }

el_layout el_layout_r16_of(el_type t) {
    for (int l = 1; l < EL_LAYOUT_COUNT; ++l)
        if (k_layouts[l].base == (int)t) return (el_layout)l;
    return EL_LAYOUT_FLAT;
}

el_layout el_layout_r16_for(const char *name, int n_dims, const int64_t ne[4], el_type type, int tied) {
    static const char *const k_suffix[] = {".attn_q.weight",   ".attn_k.weight",      ".attn_v.weight",
                                           ".attn_qkv.weight", ".attn_output.weight", ".ffn_gate.weight",
                                           ".ffn_up.weight",   ".ffn_down.weight",    ".shortconv.in_proj.weight",
                                           ".shortconv.out_proj.weight"};
    if (n_dims != 2 || ne[1] <= 0 || ne[1] % R16) return EL_LAYOUT_FLAT;
    bool matmul = !strcmp(name, "output.weight") || (tied && !strcmp(name, "token_embd.weight"));
    if (!strncmp(name, "blk.", 4)) {
        const size_t n = strlen(name);
        for (size_t i = 0; i < sizeof k_suffix / sizeof k_suffix[0] && !matmul; i++) {
            const size_t k = strlen(k_suffix[i]);
            matmul = n > k && !strcmp(name + n - k, k_suffix[i]);
        }
    }
    return matmul ? el_layout_r16_of(type) : EL_LAYOUT_FLAT;
}

size_t el_layout_group_bytes(el_layout l, int64_t ne0) {
    if (!valid(l) || ne0 <= 0) return 0;
    const el_type_info *ti = el_type_get(k_layouts[l].base);
    return ne0 % ti->blck_size ? 0 : (size_t)R16 * el_row_size((el_type)k_layouts[l].base, ne0);
}

size_t el_layout_bytes(el_layout l, int64_t ne0, int64_t ne1) {
    if (ne1 <= 0 || ne1 % R16) return 0;
    return el_layout_group_bytes(l, ne0) * (size_t)(ne1 / R16);
}

void el_layout_q4k_scale_min(const uint8_t *sb, int r, int j, uint8_t *sc, uint8_t *m) {
    const int p = j & 3, hi = j >> 2;
    const uint8_t lo = sb[EL_Q4K_R16_SC + 16 * p + r], ml = sb[EL_Q4K_R16_MN + 16 * p + r], h = sb[EL_Q4K_R16_HI + 16 * p + r];
    *sc = (uint8_t)((hi ? lo >> 4 : lo & 15) | (h >> (2 * hi) & 3) << 4);
    *m = (uint8_t)((hi ? ml >> 4 : ml & 15) | (h >> (4 + 2 * hi) & 3) << 4);
}

/* Q4_K (layout.h): one row's super-block x (block_q4_K) to lane r of the 2304-byte chunk q (dir 0), or back
 * (dir 1). The 12 packed scale bytes are a bijection of the 16 six-bit values, so they are rebuilt exactly. */
static void move_block_q4_k(int dir, uint8_t *x, uint8_t *q, int r) {
    block_q4_K *b = (block_q4_K *)x;
    uint8_t *qs = q + EL_Q4K_R16_QS + 4 * r;
    for (int c = 0; c < 32; ++c) memcpy(dir ? b->qs + 4 * c : qs + 64 * c, dir ? qs + 64 * c : b->qs + 4 * c, 4);
    uint8_t *d = (uint8_t *)&b->d, *dmin = (uint8_t *)&b->dmin;
    memcpy(dir ? d : q + EL_Q4K_R16_D + 2 * r, dir ? q + EL_Q4K_R16_D + 2 * r : d, 2);
    memcpy(dir ? dmin : q + EL_Q4K_R16_DMIN + 2 * r, dir ? q + EL_Q4K_R16_DMIN + 2 * r : dmin, 2);
    uint8_t sc[8], m[8];
    if (!dir) {
        for (int j = 0; j < 8; ++j) el_get_scale_min_k4(j, b->scales, &sc[j], &m[j]);
        for (int p = 0; p < 4; ++p) {
            q[EL_Q4K_R16_SC + 16 * p + r] = (uint8_t)((sc[p] & 15) | (sc[p + 4] & 15) << 4);
            q[EL_Q4K_R16_MN + 16 * p + r] = (uint8_t)((m[p] & 15) | (m[p + 4] & 15) << 4);
            q[EL_Q4K_R16_HI + 16 * p + r] = (uint8_t)(sc[p] >> 4 | (sc[p + 4] >> 4) << 2 | (m[p] >> 4) << 4 | (m[p + 4] >> 4) << 6);
        }
        return;
    }
    for (int j = 0; j < 8; ++j) el_layout_q4k_scale_min(q, r, j, &sc[j], &m[j]);
    /* the flat encoding (el_get_scale_min_k4 read backwards) */
    for (int j = 0; j < 4; ++j) {
        b->scales[j] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
        b->scales[j + 4] = (uint8_t)(m[j] | (m[j + 4] >> 4) << 6);
        b->scales[j + 8] = (uint8_t)((sc[j + 4] & 15) | (m[j + 4] & 15) << 4);
    }
}

/* Q5_0 (layout.h): one row's block x (block_q5_0) to lane r of the 352-byte block q (dir 0), or back (dir 1).
 * The 32 fifth bits go to bits 4r..4r+3 of the 8 masks, 4 a mask. */
static void move_block_q5_0(int dir, uint8_t *x, uint8_t *q, int r) {
    block_q5_0 *b = (block_q5_0 *)x;
    for (int c = 0; c < 4; ++c) memcpy(dir ? b->qs + 4 * c : q + 64 * c + 4 * r, dir ? q + 64 * c + 4 * r : b->qs + 4 * c, 4);
    memcpy(dir ? (uint8_t *)&b->d : q + EL_Q50_R16_D + 2 * r, dir ? q + EL_Q50_R16_D + 2 * r : (uint8_t *)&b->d, 2);
    uint8_t *m = q + EL_Q50_R16_QH + (size_t)r / 2; /* bits 4r..4r+3 of each 64-bit mask: a nibble of byte r / 2 */
    const int sh = 4 * (r & 1);
    uint32_t qh = 0;
    if (!dir) memcpy(&qh, b->qh, 4);
    for (int j = 0; j < 8; ++j) {
        if (dir)
            qh |= (uint32_t)(m[8 * j] >> sh & 15) << 4 * j;
        else
            m[8 * j] = (uint8_t)((m[8 * j] & ~(15 << sh)) | (qh >> 4 * j & 15) << sh);
    }
    if (dir) memcpy(b->qh, &qh, 4);
}

/* One row's block, both ways: dir 0 copies flat block x (d, then qs) into lane `lane` of group q's
 * block b, dir 1 back. Q8_0 stores q + 128, which is q ^ 0x80 in each byte: its own inverse. */
static void move_block(el_layout l, int dir, uint8_t *x, uint8_t *q, int64_t nb, int lane, int64_t b) {
    if (l == EL_LAYOUT_Q4_K_R16) {
        move_block_q4_k(dir, x, q + EL_Q4K_R16_SB * (size_t)b, lane);
        return;
    }
    if (l == EL_LAYOUT_Q5_0_R16) {
        move_block_q5_0(dir, x, q + EL_Q50_R16_BLOCK * (size_t)b, lane);
        return;
    }
    const size_t qb = qbytes(l);
    const int nc = l == EL_LAYOUT_Q8_0_R16 ? 8 : 4;
    const uint32_t flip = l == EL_LAYOUT_Q8_0_R16 ? 0x80808080u : 0;
    uint8_t *qq = q + qb * (size_t)b + 4 * (size_t)lane;
    uint8_t *dd = q + (size_t)nb * qb + 2 * (size_t)(R16 * b + lane);
    for (int c = 0; c < nc; ++c) {
        uint32_t v;
        memcpy(&v, dir ? qq + 64 * c : x + 2 + 4 * c, 4);
        v ^= flip;
        memcpy(dir ? x + 2 + 4 * c : qq + 64 * c, &v, 4);
    }
    memcpy(dir ? x : dd, dir ? dd : x, 2);
}

/* The whole permutation: pack (dir 0) flat -> packed, unpack (dir 1) packed -> flat. */
static void permute(el_layout l, int dir, uint8_t *flat, size_t row_bytes, int64_t ne0, int64_t ne1, uint8_t *packed) {
    if (!valid(l)) return;
    const el_type_info *ti = el_type_get(k_layouts[l].base);
    const int64_t nb = ne0 / ti->blck_size;
    const size_t gb = el_layout_group_bytes(l, ne0), bsz = ti->type_size;
    for (int64_t g = 0; g < ne1 / R16; ++g)
        for (int r = 0; r < R16; ++r) {
            uint8_t *row = flat + row_bytes * (size_t)(R16 * g + r);
            for (int64_t b = 0; b < nb; ++b) move_block(l, dir, row + bsz * (size_t)b, packed + gb * (size_t)g, nb, r, b);
        }
}

void el_layout_pack(el_layout l, const void *flat, size_t row_bytes, int64_t ne0, int64_t ne1, void *dst) {
    permute(l, 0, (uint8_t *)(uintptr_t)flat, row_bytes, ne0, ne1, dst);
}

void el_layout_unpack(el_layout l, const void *packed, int64_t ne0, int64_t ne1, void *flat, size_t row_bytes) {
    permute(l, 1, flat, row_bytes, ne0, ne1, (uint8_t *)(uintptr_t)packed);
}

void el_layout_block(el_layout l, const void *packed, int64_t ne0, int64_t r, int64_t b, void *blk) {
    if (!valid(l)) return;
    uint8_t *q = (uint8_t *)(uintptr_t)packed + el_layout_group_bytes(l, ne0) * (size_t)(r / R16);
    move_block(l, 1, blk, q, ne0 / el_type_get(k_layouts[l].base)->blck_size, (int)(r % R16), b);
}
