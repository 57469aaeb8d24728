/*
 * launch.h — the OpenCL backend's device buffers and kernel launches: one
 * function per kernel family that sets its arguments from host values and
 * enqueues it on the backend's in-order queue (no wait).
 *
 * Contract: the caller holds the backend's mutex (kernel arguments are per
 * kernel object). Operands are whole buffers plus element (or byte, where
 * named so) offsets, as kernels.cl states. Each function returns 0, or an
 * el_status with err naming the CL call and error; a launch with an empty
 * range enqueues nothing and succeeds. ARG / LOCAL set one kernel argument
 * and return from the calling function (which has an `el_error *err`) on
 * failure.
 */
#ifndef EL_BACKEND_OPENCL_LAUNCH_H
#define EL_BACKEND_OPENCL_LAUNCH_H
#include <stdbool.h>

#include "backend/cpu/ops.h"
#include "backend/opencl/clutil.h"
#include "backend/opencl/state.h"
#include "util/error.h"

#define ARG(k, i, T, v)                                                          \
    do {                                                                         \
        T arg_v_ = (v);                                                          \
        const cl_int arg_e_ = clSetKernelArg((k), (i), sizeof(T), &arg_v_);      \
        if (arg_e_ != CL_SUCCESS) return el_ocl_fail(err, "clSetKernelArg", arg_e_); \
    } while (0)
#define LOCAL(k, i, bytes)                                                       \
    do {                                                                         \
        const cl_int arg_e_ = clSetKernelArg((k), (i), (bytes), NULL);           \
        if (arg_e_ != CL_SUCCESS) return el_ocl_fail(err, "clSetKernelArg", arg_e_); \
    } while (0)


/* A device buffer of `bytes` (within the device's largest allocation); NULL with err. */
cl_mem el_ocl_alloc(ocl *c, size_t bytes, el_error *err);

/* Enqueues k over dims dimensions (nothing when a size is 0); what names it in errors. */
int el_ocl_enqueue(ocl *c, cl_kernel k, cl_uint dims, const size_t *gws, const size_t *lws, const char *what,
                   el_error *err);

/* The MM_* index of weight type t, or -1 (no matmul kernel for it). */
int el_ocl_mm_index(el_type t);

/* y[y0 + t*M + o] = W[o] · activation row t (+ bias), t < n: the rows at
 * byte offset xoff of x, xrow bytes apart, in the weight type's activation
 * format (act_quant's bytes; F32 weights: floats). One work-item per weight
 * row and NT tokens (kernels.cl MM_KERNEL). row1: every row in the
 * arithmetic of a one-row product (the CPU's row order). ti: MM_*. */
int el_ocl_launch_matmul(ocl *c, int ti, cl_mem w, size_t row_bytes, int K, int M, cl_mem x, size_t xoff,
                         size_t xrow, int n, cl_mem y, int y0, cl_mem bias, bool row1, el_error *err);

/* How the CPU backend converts a matmul's activations for weights of type t
 * (its vec_dot_type; kernels.cl act_quant's mode): 0 none (F32), 1 F16,
 * 2 Q8_0, 3 Q8_K. */
int el_ocl_act_mode(el_type t);
/* Bytes of one activation row of K values in mode's format. */
size_t el_ocl_act_row_bytes(int mode, int K);
/* x (n rows of K floats at x0) converted for mode into c->act (grown as needed). */
int el_ocl_launch_act_quant(ocl *c, cl_mem x, int x0, int K, int n, int mode, el_error *err);

/* Attention in the CPU's arithmetic: its one-row kernel's below 64 query
 * rows, its tiled kernel's from 64 (backend/cpu/attention.c's switch).
 * q, o: floats at q0, o0; kc, vc: F16 caches at k0, v0 (elements). */
int el_ocl_launch_attention(ocl *c, cl_mem q, int q0, cl_mem o, int o0, cl_mem kc, int k0, cl_mem vc, int v0,
                            const el_attn_args *a, el_error *err);

#endif
