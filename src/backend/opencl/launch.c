/*
 * launch.c — the OpenCL backend's device buffers and kernel launches
 * (launch.h): each sets a kernel's arguments and enqueues it.
 */
#include <stdio.h>

#include "backend/opencl/launch.h"

const el_type el_ocl_mm_types[MM_NTYPES] = {EL_TYPE_F32,  EL_TYPE_F16,  EL_TYPE_Q8_0, EL_TYPE_Q4_0,
                                            EL_TYPE_Q5_0, EL_TYPE_Q4_K, EL_TYPE_Q6_K};
const char *const el_ocl_mm_names[MM_NTYPES] = {"f32", "f16", "q8_0", "q4_0", "q5_0", "q4_k", "q6_k"};

/* ---- buffers --------------------------------------------------------------- */

cl_mem el_ocl_alloc(ocl *c, size_t bytes, el_error *err) {
    if (bytes == 0) bytes = 4;
    if ((cl_ulong)bytes > c->max_alloc) {
        el_set_error(err, EL_ERR_NOMEM,
                     "OpenCL: clCreateBuffer: %zu bytes exceed the device's CL_DEVICE_MAX_MEM_ALLOC_SIZE (%llu)",
                     bytes, (unsigned long long)c->max_alloc);
        return NULL;
    }
    cl_int e;
    cl_mem m = clCreateBuffer(c->ctx, CL_MEM_READ_WRITE, bytes, NULL, &e);
    if (e != CL_SUCCESS) {
        el_set_error(err, el_ocl_status(e), "OpenCL: clCreateBuffer(%zu bytes) failed: %s", bytes, el_ocl_err_name(e));
        return NULL;
    }
    return m;
}

/* ---- launching ------------------------------------------------------------- */

int el_ocl_enqueue(ocl *c, cl_kernel k, cl_uint dims, const size_t *gws, const size_t *lws, const char *what,
                   el_error *err) {
    for (cl_uint i = 0; i < dims; i++)
        if (gws[i] == 0) return 0; /* nothing to do */
    const cl_int e = clEnqueueNDRangeKernel(c->q, k, dims, NULL, gws, lws, 0, NULL, NULL);
    if (e != CL_SUCCESS) {
        char msg[96];
        snprintf(msg, sizeof msg, "clEnqueueNDRangeKernel(%s)", what);
        return el_ocl_fail(err, msg, e);
    }
    return 0;
}

int el_ocl_mm_index(el_type t) {
    for (int i = 0; i < MM_NTYPES; i++)
        if (el_ocl_mm_types[i] == t) return i;
    return -1;
}

int el_ocl_launch_matmul(ocl *c, int ti, cl_mem w, size_t row_bytes, int K, int M, cl_mem x, size_t xoff,
                         size_t xrow, int n, cl_mem y, int y0, cl_mem bias, bool row1, el_error *err) {
    cl_kernel k = c->mm[ti];
    const size_t ls = c->mm_ls;
    ARG(k, 0, cl_mem, w);
    ARG(k, 1, cl_ulong, (cl_ulong)row_bytes);
    ARG(k, 2, cl_int, K);
    ARG(k, 3, cl_int, M);
    ARG(k, 4, cl_mem, x);
    ARG(k, 5, cl_ulong, (cl_ulong)xoff);
    ARG(k, 6, cl_ulong, (cl_ulong)xrow);
    ARG(k, 7, cl_int, n);
    ARG(k, 8, cl_mem, y);
    ARG(k, 9, cl_int, y0);
    ARG(k, 10, cl_mem, bias ? bias : c->dummy);
    ARG(k, 11, cl_int, bias ? 1 : 0);
    ARG(k, 12, cl_int, row1 ? 1 : 0);
    const size_t gws[2] = {ls * (((size_t)M + ls - 1) / ls), (size_t)((n + MM_NT - 1) / MM_NT)};
    const size_t lws[2] = {ls, 1};
    return el_ocl_enqueue(c, k, 2, gws, lws, n == 1 ? "matmul n=1" : "matmul", err);
}

int el_ocl_act_mode(el_type t) {
    switch (t) {
    case EL_TYPE_F16: return 1;
    case EL_TYPE_Q8_0: case EL_TYPE_Q4_0: case EL_TYPE_Q5_0: return 2;
    case EL_TYPE_Q4_K: case EL_TYPE_Q6_K: return 3;
    default: return 0;
    }
}

size_t el_ocl_act_row_bytes(int mode, int K) {
    switch (mode) {
    case 1: return 2 * (size_t)K;
    case 2: return (size_t)(K / 32) * 34;
    case 3: return (size_t)(K / 256) * 292;
    default: return 4 * (size_t)K;
    }
}

int el_ocl_launch_act_quant(ocl *c, cl_mem x, int x0, int K, int n, int mode, el_error *err) {
    const size_t xrow = el_ocl_act_row_bytes(mode, K);
    const size_t need = xrow * (size_t)n;
    if (need > c->act_cap) {
        if (c->act) clReleaseMemObject(c->act);
        c->act_cap = 0;
        if (!(c->act = el_ocl_alloc(c, need, err))) return err && err->code ? (int)err->code : EL_ERR_NOMEM;
        c->act_cap = need;
    }
    cl_kernel k = c->k_act;
    ARG(k, 0, cl_mem, x);
    ARG(k, 1, cl_int, x0);
    ARG(k, 2, cl_int, K);
    ARG(k, 3, cl_int, n);
    ARG(k, 4, cl_int, mode);
    ARG(k, 5, cl_mem, c->act);
    ARG(k, 6, cl_ulong, (cl_ulong)xrow);
    const size_t gws[1] = {(size_t)n * (size_t)(K / (mode == 3 ? 256 : 32))};
    return el_ocl_enqueue(c, k, 1, gws, NULL, "act_quant", err);
}

int el_ocl_launch_attention(ocl *c, cl_mem q, int q0, cl_mem o, int o0, cl_mem kc, int k0, cl_mem vc, int v0,
                            const el_attn_args *a, el_error *err) {
    const bool tiled = a->n >= 64;
    cl_kernel k = tiled ? c->k_attn_tiled : c->k_attn;
    const size_t ls = c->att_ls;
    ARG(k, 0, cl_mem, q);
    ARG(k, 1, cl_int, q0);
    ARG(k, 2, cl_mem, o);
    ARG(k, 3, cl_int, o0);
    ARG(k, 4, cl_mem, kc);
    ARG(k, 5, cl_int, k0);
    ARG(k, 6, cl_mem, vc);
    ARG(k, 7, cl_int, v0);
    ARG(k, 8, cl_int, a->n_head);
    ARG(k, 9, cl_int, a->n_head_kv);
    ARG(k, 10, cl_int, a->head_dim);
    ARG(k, 11, cl_int, a->pos0);
    ARG(k, 12, cl_int, a->window);
    ARG(k, 13, cl_int, a->ring);
    ARG(k, 14, cl_float, a->scale);
    LOCAL(k, 15, sizeof(float) * (size_t)a->head_dim);
    if (tiled) {
        LOCAL(k, 16, sizeof(float) * 64);
    } else {
        LOCAL(k, 16, sizeof(float) * ls);
        LOCAL(k, 17, sizeof(float) * ls);
        LOCAL(k, 18, sizeof(float) * ls);
    }
    const size_t gws[2] = {ls * (size_t)a->n_head, (size_t)a->n};
    const size_t lws[2] = {ls, 1};
    return el_ocl_enqueue(c, k, 2, gws, lws, "attention", err);
}
