/*
 * kernel_types.h — the shape of a CPU compute kernel, per weight type: the
 * function types of a dot product, a row selector and a gemm block, and the
 * table entry (el_cpu_type_kernels) that holds them.
 *
 * Contract: types only, no code. Every kernel file (kernels_portable.c,
 * kernels_kquants.c, the ISA tables under x86/ and arm/) fills entries of
 * this shape; the dispatch (kernels.h) merges them into one table. Each
 * field's meaning is stated here.
 */
#ifndef EL_BACKEND_CPU_KERNEL_TYPES_H
#define EL_BACKEND_CPU_KERNEL_TYPES_H
#include <stddef.h>

#include "package/types.h"

/* s = dot(x[0..n), y[0..n)); x in the weight type, y in vec_dot_type; n % block == 0. */
typedef void (*el_vec_dot_fn)(int n, float *s, const void *x, const void *y);

/*
 * Where llama.cpp's x86 build computes some rows of a batched product with a
 * different kernel (repacked gemm tiles for Q2_K/Q4_K, llamafile's tinyBLAS
 * for F32/F16/BF16), the arithmetic order — and so the last bits — differ
 * from vec_dot. A selector returns the kernel for activation row `row` of an
 * n_rows-row product with rows of k elements, or NULL for vec_dot.
 */
typedef el_vec_dot_fn (*el_vec_dot_select_fn)(int n_rows, int row, int k);

/*
 * A block of a matrix product at once: for weight rows r in [0, nr) and
 * activation rows t in [0, nt),
 *     y[t * ldy + r] = dot(weight row r, activation row t)
 * with exactly the bits vec_dot (or the kernel `select` picks for activation
 * row t0 + t of an n_act-row product) gives. w points at the first weight row
 * (ldw bytes per row), x at the first activation row in vec_dot_type (ldx
 * bytes per row). A gemm reuses each unpacked weight block across several
 * activation rows (prefill); it must not change any result.
 */
typedef void (*el_gemm_fn)(int k, const void *w, size_t ldw, int nr, const void *x, size_t ldx,
                           int t0, int nt, int n_act, float *y, size_t ldy);

typedef struct el_cpu_type_kernels {
    el_type vec_dot_type;
    el_vec_dot_fn vec_dot;        /* NULL: type not computable */
    el_from_float_fn quantize;    /* activations → vec_dot_type (kernels_portable.h) */
    el_vec_dot_select_fn select;  /* optional, see above */
    el_gemm_fn gemm;              /* optional, see above; NULL: vec_dot per output */
} el_cpu_type_kernels;

#endif
