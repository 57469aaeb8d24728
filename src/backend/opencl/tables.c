/*
 * tables.c — the CPU's RoPE and GELU tables on the OpenCL device (tables.h),
 * made by the CPU backend's own code.
 */
#include <stdint.h>
#include <stdlib.h>

#include "backend/opencl/launch.h"
#include "backend/opencl/tables.h"
#include "util/fp16.h"

/* The CPU's RoPE cos/sin for r at positions 0..need-1 (el_op_rope's own code
 * fills them: it is called with no heads to rotate), on the device; NULL
 * with err on failure. Tables grow by doubling; ROPE_TABS configurations are
 * kept, the oldest replaced. */
cl_mem el_ocl_rope_table(ocl *c, const el_rope *r, int need, el_error *err) {
    rope_tab *t = NULL;
    for (int i = 0; i < ROPE_TABS; i++) {
        rope_tab *e = &c->rope[i];
        if (e->mem && e->n_rot == r->n_rot && e->freq_base == r->freq_base && e->freq_scale == r->freq_scale &&
            e->ff == r->freq_factors) {
            t = e;
            break;
        }
    }
    if (t && t->cap >= need) return t->mem;
    if (!t) {
        for (int i = 0; i < ROPE_TABS && !t; i++)
            if (!c->rope[i].mem) t = &c->rope[i];
        if (!t) {
            t = &c->rope[c->rope_next];
            c->rope_next = (c->rope_next + 1) % ROPE_TABS;
        }
        if (t->mem) {
            clFinish(c->q); /* queued kernels may still read it */
            clReleaseMemObject(t->mem);
        }
        *t = (rope_tab){.freq_base = r->freq_base, .freq_scale = r->freq_scale, .n_rot = r->n_rot, .ff = r->freq_factors};
    }
    int cap = t->cap > 0 ? t->cap : 256;
    while (cap < need) cap *= 2;
    const size_t bytes = sizeof(float) * (size_t)cap * (size_t)r->n_rot;
    float *host = malloc(bytes);
    if (!host) {
        el_set_error(err, EL_ERR_NOMEM, "OpenCL: out of host memory for a RoPE table");
        return NULL;
    }
    for (int p = 0; p < cap; p++) el_op_rope(NULL, 0, r->n_rot, p, r, host + (size_t)p * r->n_rot);
    cl_mem m = el_ocl_alloc(c, bytes, err);
    if (m) {
        const cl_int e = clEnqueueWriteBuffer(c->q, m, CL_TRUE, 0, bytes, host, 0, NULL, NULL);
        if (e != CL_SUCCESS) {
            clReleaseMemObject(m);
            m = NULL;
            el_ocl_fail(err, "clEnqueueWriteBuffer (RoPE table)", e);
        }
    }
    free(host);
    if (!m) return NULL;
    if (t->mem) {
        clFinish(c->q);
        clReleaseMemObject(t->mem);
    }
    t->mem = m;
    t->cap = cap;
    return m;
}

/* The CPU's GELU table on the device: T[h] for every F16 bit pattern h, made
 * by the CPU's el_op_gelu_mul itself (gate = the value of h, up = 1; the
 * kernel handles |x| >= 10 as the CPU does, outside the table). */
cl_mem el_ocl_gelu_table(ocl *c, el_error *err) {
    if (c->gelu_tab) return c->gelu_tab;
    float *g = malloc(sizeof(float) << 16), *one = malloc(sizeof(float) << 16);
    if (!g || !one) {
        free(g), free(one);
        el_set_error(err, EL_ERR_NOMEM, "OpenCL: out of host memory for the GELU table");
        return NULL;
    }
    for (uint32_t h = 0; h < (1u << 16); h++) {
        g[h] = el_fp16_to_fp32((el_fp16)h);
        one[h] = 1.0f;
    }
    el_op_gelu_mul(g, one, 1 << 16);
    cl_mem m = el_ocl_alloc(c, sizeof(float) << 16, err);
    if (m) {
        const cl_int e = clEnqueueWriteBuffer(c->q, m, CL_TRUE, 0, sizeof(float) << 16, g, 0, NULL, NULL);
        if (e != CL_SUCCESS) {
            clReleaseMemObject(m);
            m = NULL;
            el_ocl_fail(err, "clEnqueueWriteBuffer (GELU table)", e);
        }
    }
    free(g), free(one);
    c->gelu_tab = m;
    return m;
}
