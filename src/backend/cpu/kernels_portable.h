/*
 * kernels_portable.h — the portable C kernels (kernels_portable.c), one
 * entry per weight type: the reference every ISA table must match bit for
 * bit (tests/test_kernels.c), and the base the dispatch (kernels.h) starts
 * from before ISA tables override it.
 *
 * Contract: el_cpu_kernels_portable is always available, on every CPU; it
 * calls no ISA-specific code. The K-quant entries are kernels_kquants.c's.
 */
#ifndef EL_BACKEND_CPU_KERNELS_PORTABLE_H
#define EL_BACKEND_CPU_KERNELS_PORTABLE_H
#include <stdint.h>

#include "backend/cpu/kernel_types.h"

/*
 * The activation quantizers of the CPU backend (the table's `quantize`). For
 * Q8_0 and Q8_1 they follow llama.cpp's x86 CPU backend rather than ggml's
 * reference quantizer: the scale's inverse is 127/amax (not 1/(amax/127))
 * and values round half to even. The two differ on a few values per row,
 * enough to move log-probabilities of peaked models by more than the parity
 * tolerance; llama.cpp's x86 build is the reference. Q8_K, F16, BF16 and F32
 * use the format table's from_float (ggml's x86 build does the same).
 */
void el_cpu_quantize_q8_0(const float *src, void *dst, int64_t n);
void el_cpu_quantize_q8_1(const float *src, void *dst, int64_t n);

/* The portable C implementations (always available; the reference for tests). */
const el_cpu_type_kernels *el_cpu_kernels_portable(el_type t);

/* The portable Q8_0, Q5_0 and Q6_K kernels in block order (kernels.h,
 * el_cpu_order); NULL for every other type (they have one order). */
const el_cpu_type_kernels *el_cpu_kernels_portable_block(el_type t);

#endif
