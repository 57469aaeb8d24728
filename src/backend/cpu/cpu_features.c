/* cpu_features.c — see cpu_features.h. */
#include "backend/cpu/cpu_features.h"

#include <pthread.h>

#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMD
#define HWCAP_ASIMD (1 << 1)
#endif
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif
#endif

static el_cpu_features g_features;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void detect(void) {
    el_cpu_features *f = &g_features;
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
    __builtin_cpu_init();
    f->avx2 = __builtin_cpu_supports("avx2");
    f->fma = __builtin_cpu_supports("fma");
    f->bmi2 = __builtin_cpu_supports("bmi2");
    f->avx512f = __builtin_cpu_supports("avx512f");
    f->avx512bw = __builtin_cpu_supports("avx512bw");
    f->avx512vl = __builtin_cpu_supports("avx512vl");
    f->avx512dq = __builtin_cpu_supports("avx512dq");
    f->avx512vnni = __builtin_cpu_supports("avx512vnni");
    f->avx512bf16 = __builtin_cpu_supports("avx512bf16");
    /* F16C has no __builtin_cpu_supports name in older compilers: CPUID.1:ECX[29]. */
    unsigned a, b, c, d;
    __asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(1), "c"(0));
    f->f16c = f->avx2 && ((c >> 29) & 1); /* AVX2 implies the OS saves YMM state */
#elif defined(__aarch64__)
    f->neon = 1; /* Advanced SIMD is part of the AArch64 base */
#if defined(__linux__)
    const unsigned long hw = getauxval(AT_HWCAP);
    f->neon = (hw & HWCAP_ASIMD) != 0;
    f->dotprod = (hw & HWCAP_ASIMDDP) != 0;
#endif
#endif
}

const el_cpu_features *el_cpu_features_get(void) {
    pthread_once(&g_once, detect);
    return &g_features;
}
