/*
 * cpu_features.h — what this CPU can run, read once (CPUID on x86-64, hwcaps
 * on AArch64). Features count only when the OS also saves the registers
 * (XSAVE state), which the compiler's CPU-detection runtime checks.
 */
#ifndef EL_BACKEND_CPU_FEATURES_H
#define EL_BACKEND_CPU_FEATURES_H

typedef struct el_cpu_features {
    int avx2, fma, f16c, bmi2;                                   /* x86-64-v3 */
    int avx512f, avx512bw, avx512vl, avx512dq, avx512vnni, avx512bf16;
    int neon, dotprod;                                           /* AArch64 */
} el_cpu_features;

const el_cpu_features *el_cpu_features_get(void);

#endif
