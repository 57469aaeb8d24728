/*
 * kernels.c — the CPU kernel dispatch point (see kernels.h).
 *
 * On first use the table is built once (pthread_once): every entry starts
 * from the portable C kernels; ISA-specific tables (AVX2, AVX-512, NEON, added
 * by later work) then override the entries they implement, after a CPUID /
 * hwcap check.  The result never changes afterwards, so lookups are lock-free.
 *
 * Environment:
 *   EL_FORCE_PORTABLE=1   use only the portable C kernels (any value other
 *                         than empty or "0" counts); for debugging and for
 *                         comparing ISA kernels against the reference.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/kernels.h"

static el_cpu_type_kernels g_kernels[EL_TYPE_COUNT];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static int force_portable(void) {
    const char *e = getenv("EL_FORCE_PORTABLE");
    return e && *e && strcmp(e, "0") != 0;
}

/* An ISA table: fills the entries it implements, leaves the others alone. */
typedef void (*el_cpu_isa_override_fn)(el_cpu_type_kernels table[EL_TYPE_COUNT]);

static void init_kernels(void) {
    for (int t = 0; t < EL_TYPE_COUNT; ++t) {
        const el_cpu_type_kernels *p = el_cpu_kernels_portable((el_type)t);
        if (p) g_kernels[t] = *p;
    }
    if (force_portable()) return;
    /* ISA overrides go here, most general first, e.g.:
     *   if (el_cpu_has_avx2()) el_cpu_kernels_avx2(g_kernels);
     *   if (el_cpu_has_avx512()) el_cpu_kernels_avx512(g_kernels);
     * An override must keep the entry's vec_dot_type (the activation format
     * the matmul quantizes to) unless it replaces the pair consistently. */
}

const el_cpu_type_kernels *el_cpu_kernels(el_type t) {
    if ((int)t < 0 || (int)t >= EL_TYPE_COUNT) return NULL;
    pthread_once(&g_once, init_kernels);
    return g_kernels[t].vec_dot ? &g_kernels[t] : NULL;
}
