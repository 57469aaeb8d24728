/*
 * lora_kernels.h — the CPU kernel of LoRA terms: for one group of outputs
 * that share an input (Q/K/V, gate/up, or a single projection) and every
 * active adapter at once,
 *
 *     y_i += s_k · B_k·(A_k·x)     for each term k with dst_k = i, in term order
 *
 * with the arithmetic of llama.cpp's build_lora_mm per output element:
 * t = A·x (a matrix product, F32 result), ab = B·t (a matrix product, t
 * converted to B's vec_dot type first), ab *= s (a float multiply), y += ab
 * (a float add), adapters summed in order. Every product is computed with
 * the CPU kernel table (kernels.h) as el_op_matmul computes it for a product
 * of n activation rows — the vec_dot/select/gemm choice for n rows, or the
 * one-row choice under el_op_matmul_row_order — so the bits equal two
 * el_op_matmul calls, el_op_scale and el_op_add; the cost differs:
 *
 *   - one call per group (not two matmuls per projection): the A products of
 *     all terms are one pass over x (one pool job split by activation rows;
 *     tiny ones on the calling thread), the B products of all terms and
 *     members one pool job whose output pass scales and adds in place (no
 *     n × out scratch); with fewer than 8 rows (decode) one pool job does
 *     both: its pieces first share A's rows (every thread streams a part of
 *     A), wait for the last A row, then share the B pass;
 *   - n rows in chunks of `chunk` rows (the scratch's rows); each product
 *     still selects its kernels for the whole n.
 *
 * Scratch (host memory, el_lora_scratch_bytes): t: chunk × tcols floats (the
 * A products, term k in columns off_k .. off_k + r_k, tcols = Σ r_k); tq:
 * the same bytes again (t in B's vec_dot type, term-major); xq: chunk rows of
 * x in the A's vec_dot type (the largest row). Allocates nothing.
 */
#ifndef EL_BACKEND_CPU_LORA_KERNELS_H
#define EL_BACKEND_CPU_LORA_KERNELS_H
#include <stddef.h>
#include <stdint.h>

#include "backend/cpu/ops.h"
#include "backend/cpu/threadpool.h"

#define EL_LORA_MAX_DST 3    /* outputs of one group (Q, K, V) */
#define EL_LORA_MAX_TERMS 24 /* 8 adapters × 3 outputs */
#define EL_LORA_CHUNK 64     /* activation rows per pass over the scratch */

/* One adapter's pair on one output of the group. a: ne0 = in, ne1 = r; b: ne0 = r, ne1 = out. */
typedef struct el_lora_term {
    const el_mat *a, *b;
    float s;   /* the effective scale (scale × alpha / rank) */
    int dst;   /* which output of the group (0 .. n_dst-1) */
} el_lora_term;

typedef struct el_lora_job {
    const float *x;        /* n rows of in floats */
    int n;
    int64_t in;
    float *y[EL_LORA_MAX_DST]; /* n rows of out_i floats each (out_i = the B's ne1 of its terms) */
    int n_dst;
    const el_lora_term *term;
    int n_term;
    float *t;              /* scratch, see above */
    void *tq, *xq;
    int chunk;             /* rows the scratch holds (>= 1) */
} el_lora_job;

/* Scratch bytes for `chunk` rows of n_term terms of ranks summing to tcols, with an
 * input row of `in` values whose largest vec_dot row is xq_row bytes (0: F32 only). */
size_t el_lora_scratch_bytes(int chunk, int64_t tcols, size_t xq_row);
/* Bytes of one activation row of `in` values in the vec_dot type of A type t (0 for F32). */
size_t el_lora_xq_row(el_type t, int64_t in);

/* Runs the job (see above). */
void el_op_lora(el_pool *pool, const el_lora_job *job);

#endif
