/*
 * kernels.c — the CPU kernel dispatch point (see kernels.h).
 *
 * On first use the process-wide table is built once (pthread_once): every
 * entry starts from the portable C kernels; the ISA tables of isa_tables.h
 * whose CPU features are present then override the fields they fill, lowest
 * level first. The result never changes afterwards, so lookups are lock-free.
 *
 * Environment:
 *   EL_CPU_ISA=portable|avx2|avx512|neon   highest level to use (default: the best this CPU has)
 *   EL_FORCE_PORTABLE=1                    same as EL_CPU_ISA=portable (any value but "" or "0")
 *   EL_KERNEL_ORDER=llama|block            the Q8_0/Q5_0/Q6_K arithmetic order (kernels.h; default llama)
 *
 * In block order the Q8_0, Q5_0 and Q6_K entries come from the portable block
 * table and then only from the ISA tables' `block` tables (an ISA without
 * one keeps the portable block kernels): an entry never mixes the orders.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/isa_tables.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/kernels_portable.h"

typedef struct isa_table {
    const char *name;
    el_cpu_level level;
    const el_cpu_type_kernels *table; /* EL_TYPE_COUNT entries */
    int (*supported)(const el_cpu_features *f);
    const el_cpu_type_kernels *block; /* block-order entries (Q8_0/Q5_0, Q6_K), or NULL */
    const int *gemm_toks;             /* per type: the token block its gemms are made for, or NULL (kernels.h) */
} isa_table;

#if defined(__x86_64__)
__attribute__((unused)) static int has_avx2(const el_cpu_features *f) { return f->avx2 && f->fma && f->f16c && f->bmi2; }
__attribute__((unused)) static int has_avx512(const el_cpu_features *f) {
    return has_avx2(f) && f->avx512f && f->avx512bw && f->avx512vl && f->avx512dq && f->avx512vnni;
}
#endif
#if defined(__aarch64__)
__attribute__((unused)) static int has_neon(const el_cpu_features *f) { return f->neon; }
__attribute__((unused)) static int has_neon_dotprod(const el_cpu_features *f) { return f->neon && f->dotprod; }
#endif

/* In order of level: later tables override earlier ones. */
static const isa_table k_isa[] = {
#if defined(__x86_64__)
    {"float_avx2", EL_CPU_AVX2, el_cpu_kernels_float_avx2, has_avx2, NULL, NULL},
    {"float_avx512", EL_CPU_AVX512, el_cpu_kernels_float_avx512, has_avx512, NULL, NULL},
    {"kquants_avx2", EL_CPU_AVX2, el_cpu_kernels_kquants_avx2, has_avx2, el_cpu_kernels_kquants_block_avx2, NULL},
    {"kquants_avx512", EL_CPU_AVX512, el_cpu_kernels_kquants_avx512, has_avx512, el_cpu_kernels_kquants_block_avx512,
     el_cpu_gemm_toks_kquants_avx512},
    {"quants_avx2", EL_CPU_AVX2, el_cpu_kernels_quants_avx2, has_avx2, el_cpu_kernels_quants_block_avx2, NULL},
    {"quants_avx512", EL_CPU_AVX512, el_cpu_kernels_quants_avx512, has_avx512, el_cpu_kernels_quants_block_avx512,
     NULL},
#endif
#if defined(__aarch64__)
    {"neon", EL_CPU_NEON, el_cpu_kernels_quants_neon, has_neon, el_cpu_kernels_quants_block_neon, NULL},
    {"neon+dotprod", EL_CPU_NEON, el_cpu_kernels_quants_neon_dotprod, has_neon_dotprod,
     el_cpu_kernels_quants_block_neon_dotprod, NULL},
#endif
    {NULL, EL_CPU_PORTABLE, NULL, NULL, NULL, NULL},
};

/* Merges src into dst; a gemm brings its token block (toks) into *dst_toks. */
static void merge(el_cpu_type_kernels *dst, const el_cpu_type_kernels *src, int *dst_toks, int toks) {
    if (!src->vec_dot && !src->quantize && !src->select && !src->gemm) return;
    /* An override keeps the activation format unless it replaces vec_dot and quantize together. */
    if (src->vec_dot_type != dst->vec_dot_type && !(src->vec_dot && src->quantize)) return;
    if (src->vec_dot && src->quantize) dst->vec_dot_type = src->vec_dot_type;
    if (src->vec_dot) dst->vec_dot = src->vec_dot;
    if (src->quantize) dst->quantize = src->quantize;
    if (src->select) dst->select = src->select;
    if (src->gemm) {
        dst->gemm = src->gemm;
        *dst_toks = toks;
    }
}

/* el_cpu_kernels_build, and the token blocks of the gemms it took (toks, EL_TYPE_COUNT ints). */
static el_cpu_level build(el_cpu_type_kernels out[EL_TYPE_COUNT], int toks[EL_TYPE_COUNT], el_cpu_level max_level,
                          el_cpu_order order) {
    memset(out, 0, sizeof(el_cpu_type_kernels) * EL_TYPE_COUNT);
    memset(toks, 0, sizeof(int) * EL_TYPE_COUNT);
    for (int t = 0; t < EL_TYPE_COUNT; ++t) {
        const el_cpu_type_kernels *p = el_cpu_kernels_portable((el_type)t);
        const el_cpu_type_kernels *pb = el_cpu_kernels_portable_block((el_type)t);
        if (order == EL_ORDER_BLOCK && pb) p = pb;
        if (p) out[t] = *p;
    }
    const el_cpu_features *f = el_cpu_features_get();
    el_cpu_level used = EL_CPU_PORTABLE;
    for (size_t i = 0; k_isa[i].table; ++i) {
        const isa_table *it = &k_isa[i];
        if (it->level > max_level || !it->supported(f)) continue;
        for (int t = 0; t < EL_TYPE_COUNT; ++t) {
            if (!out[t].vec_dot) continue;
            const int tk = it->gemm_toks ? it->gemm_toks[t] : 0;
            if (order == EL_ORDER_BLOCK && el_cpu_kernels_portable_block((el_type)t)) {
                if (it->block) merge(&out[t], &it->block[t], &toks[t], tk);
            } else {
                merge(&out[t], &it->table[t], &toks[t], tk);
            }
        }
        if (it->level > used) used = it->level;
    }
    return used;
}

el_cpu_level el_cpu_kernels_build(el_cpu_type_kernels out[EL_TYPE_COUNT], el_cpu_level max_level, el_cpu_order order) {
    int toks[EL_TYPE_COUNT];
    return build(out, toks, max_level, order);
}

static el_cpu_type_kernels g_kernels[EL_TYPE_COUNT];
static int g_toks[EL_TYPE_COUNT];
static el_cpu_level g_level;
static el_cpu_order g_order;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static el_cpu_level env_max_level(void) {
    const char *e = getenv("EL_FORCE_PORTABLE");
    if (e && *e && strcmp(e, "0") != 0) return EL_CPU_PORTABLE;
    e = getenv("EL_CPU_ISA");
    if (e && *e) {
        for (int l = EL_CPU_PORTABLE; l <= EL_CPU_NEON; ++l)
            if (!strcasecmp(e, el_cpu_level_name((el_cpu_level)l))) return (el_cpu_level)l;
    }
    return EL_CPU_NEON; /* no cap */
}

static el_cpu_order env_order(void) {
    const char *e = getenv("EL_KERNEL_ORDER");
    return e && !strcasecmp(e, "block") ? EL_ORDER_BLOCK : EL_ORDER_LLAMA;
}

static void init_kernels(void) {
    g_order = env_order();
    g_level = build(g_kernels, g_toks, env_max_level(), g_order);
}

const el_cpu_type_kernels *el_cpu_kernels(el_type t) {
    if ((int)t < 0 || (int)t >= EL_TYPE_COUNT) return NULL;
    pthread_once(&g_once, init_kernels);
    return g_kernels[t].vec_dot ? &g_kernels[t] : NULL;
}

int el_cpu_kernels_gemm_toks(el_type t) {
    if ((int)t < 0 || (int)t >= EL_TYPE_COUNT) return 0;
    pthread_once(&g_once, init_kernels);
    return g_toks[t];
}

el_cpu_level el_cpu_kernels_level(void) {
    pthread_once(&g_once, init_kernels);
    return g_level;
}

el_cpu_order el_cpu_kernels_order(void) {
    pthread_once(&g_once, init_kernels);
    return g_order;
}

const char *el_cpu_order_name(el_cpu_order o) { return o == EL_ORDER_LLAMA ? "llama" : "block"; }

const char *el_cpu_level_name(el_cpu_level l) {
    switch (l) {
    case EL_CPU_PORTABLE: return "portable";
    case EL_CPU_AVX2: return "avx2";
    case EL_CPU_AVX512: return "avx512";
    case EL_CPU_NEON: return "neon";
    }
    return "?";
}
