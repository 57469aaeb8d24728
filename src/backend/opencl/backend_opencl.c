/*
 * backend_opencl.c — the OpenCL backend (backend.h's el_backend_i on any
 * OpenCL 1.2 device: PoCL on this machine's CPU, or a GPU driver).
 *
 * Contract:
 *   - Devices are numbered 0.. over every platform's devices in ICD order
 *     (el_backend_opencl_count). el_backend_opencl_new(d) makes a context and
 *     one in-order queue on device d and builds the kernels (kernels.cl,
 *     embedded) at once: from a cached program binary when one exists for
 *     this device + driver + kernel source + build options (bincache.h;
 *     $EL_OPENCL_CACHE_DIR, else $XDG_CACHE_HOME/edgellm/opencl), else from
 *     source, writing the cache. $EL_OPENCL_BUILD_OPTIONS is appended to the
 *     build options. Any failure: NULL with the CL call and error name in err.
 *   - Session tensors: buf_alloc gives a cl_mem (as void *); operands are
 *     passed to kernels as the whole buffer plus an element offset.
 *   - Constants (weights, norm vectors, biases, rope factors) are registered
 *     by host address in an open-addressing hash map; the bytes are the
 *     file's (never dequantised). On a device sharing host memory
 *     (CL_DEVICE_HOST_UNIFIED_MEMORY) they are used in place
 *     (CL_MEM_USE_HOST_PTR) unless EL_OPENCL_COPY_CONST=1; else copied
 *     (asynchronously when asked).
 *   - run() enqueues and returns; sync() is clFinish. run() allocates only
 *     on first need: the activations scratch (grown to the largest op), the
 *     GELU table, a RoPE cos/sin table per configuration (grown by doubling
 *     positions; these two are written blocking, once). A mutex makes
 *     run/measure safe from several threads (kernel arguments are per
 *     kernel object).
 *   - Numerics: every op gives the CPU backend's bits on a device with
 *     cl_khr_fp64 (el_opencl_info.exact; kernels.cl states how), up to
 *     libm's expf in attention and SiLU tails (the correctly rounded exp,
 *     which glibc's expf misses in ~1 of 12,000 arguments): activations
 *     converted to the CPU's vec_dot_type bytes, its dot products, its
 *     RoPE cos/sin and GELU table made by its own code (el_op_rope,
 *     el_op_gelu_mul), its row order (el_op_matmul_row_order_on).
 *   - supports(): MATMUL (F32, F16, Q8_0, Q4_0, Q5_0, Q4_K, Q6_K weights;
 *     row length a multiple of 32, of 256 for Q4_K/Q6_K; 1..3 products), RMSNORM, ROPE (NORM,
 *     NEOX; not with a magnitude scale, rope.mscale, nor YaRN), SCALE (not a
 *     soft-capping one, scale.cap), KV_STORE and ATTENTION on F16 caches
 *     (not soft-capped, attn.softcap; no sinks, attn.sinks), SILU_MUL,
 *     GELU_MUL, ADD, COPY. The
 *     refused forms run on the CPU by placement. Float operands need
 *     4-byte aligned offsets.
 *   - Every CL call is checked; errors name the call and the CL error
 *     (CL_OUT_OF_RESOURCES, ...). Out of device memory is EL_ERR_NOMEM.
 *
 * This file is the vtable (buffers, constants, supports, run, sync, the
 * measure entry) and the lifetime; the state it shares with the rest is
 * state.h's, and each concern has its file: program.c (building kernels.cl,
 * the binary cache), launch.c (device buffers, one launch per kernel
 * family), tables.c (the CPU's RoPE and GELU tables on the device),
 * measure.c (the benchmarks), consts.c (the constant registry), clutil.c
 * (CL error names, device strings, the clock).
 */
#include <CL/cl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/ops.h"
#include "backend/opencl/bincache.h"
#include "backend/opencl/clutil.h"
#include "backend/opencl/consts.h"
#include "backend/opencl/launch.h"
#include "backend/opencl/measure.h"
#include "backend/opencl/opencl.h"
#include "backend/opencl/program.h"
#include "backend/opencl/state.h"
#include "backend/opencl/tables.h"
#include "util/error.h"

extern const char el_opencl_kernels_src[];
extern const size_t el_opencl_kernels_src_len;

static ocl *ctx_of(el_backend *be) { return be->ctx; }

/* ---- devices ------------------------------------------------------------- */

/* The device with global index want (over all platforms, in order); returns
 * the total count, and *plat and *dev when want < count. -1: no platform. */
static int enum_devices(int want, cl_platform_id *plat, cl_device_id *dev) {
    cl_uint np = 0;
    if (clGetPlatformIDs(0, NULL, &np) != CL_SUCCESS || np == 0) return -1;
    cl_platform_id ps[16];
    if (np > 16) np = 16;
    if (clGetPlatformIDs(np, ps, NULL) != CL_SUCCESS) return -1;
    int total = 0;
    for (cl_uint i = 0; i < np; i++) {
        cl_uint nd = 0;
        if (clGetDeviceIDs(ps[i], CL_DEVICE_TYPE_ALL, 0, NULL, &nd) != CL_SUCCESS || nd == 0) continue;
        cl_device_id ds[64];
        if (nd > 64) nd = 64;
        if (clGetDeviceIDs(ps[i], CL_DEVICE_TYPE_ALL, nd, ds, NULL) != CL_SUCCESS) continue;
        for (cl_uint j = 0; j < nd; j++, total++)
            if (total == want) {
                *plat = ps[i];
                *dev = ds[j];
            }
    }
    return total;
}

int el_backend_opencl_count(void) {
    cl_platform_id p;
    cl_device_id d;
    const int n = enum_devices(-1, &p, &d);
    return n < 0 ? 0 : n;
}

/* ---- buffers --------------------------------------------------------------- */

static void *ocl_buf_alloc(el_backend *be, size_t bytes, el_error *err) { return el_ocl_alloc(ctx_of(be), bytes, err); }

static void ocl_buf_free(el_backend *be, void *buf) {
    (void)be;
    if (buf) clReleaseMemObject((cl_mem)buf);
}

static int ocl_buf_write(el_backend *be, void *buf, size_t off, const void *src, size_t n, el_error *err) {
    if (n == 0) return 0;
    if (!buf || !src) return el_set_error(err, EL_ERR_INVALID_ARG, "OpenCL: buf_write to a NULL buffer");
    const cl_int e = clEnqueueWriteBuffer(ctx_of(be)->q, (cl_mem)buf, CL_TRUE, off, n, src, 0, NULL, NULL);
    return e == CL_SUCCESS ? 0 : el_ocl_fail(err, "clEnqueueWriteBuffer", e);
}

static int ocl_buf_read(el_backend *be, void *buf, size_t off, void *dst, size_t n, el_error *err) {
    if (n == 0) return 0;
    if (!buf || !dst) return el_set_error(err, EL_ERR_INVALID_ARG, "OpenCL: buf_read from a NULL buffer");
    const cl_int e = clEnqueueReadBuffer(ctx_of(be)->q, (cl_mem)buf, CL_TRUE, off, n, dst, 0, NULL, NULL);
    return e == CL_SUCCESS ? 0 : el_ocl_fail(err, "clEnqueueReadBuffer", e);
}

static int ocl_upload_const(el_backend *be, const void *host, size_t bytes, bool async, el_error *err) {
    ocl *c = ctx_of(be);
    if (!host || bytes == 0) return el_set_error(err, EL_ERR_INVALID_ARG, "OpenCL: upload_const of nothing");
    pthread_mutex_lock(&c->mu);
    int rc = 0;
    const_entry *ce = el_ocl_consts_find(&c->consts, host);
    if (ce) {
        if (bytes > ce->bytes)
            rc = el_set_error(err, EL_ERR_INVALID_ARG, "OpenCL: constant at %p uploaded with %zu bytes, now %zu",
                              host, ce->bytes, bytes);
        goto out;
    }
    if ((cl_ulong)bytes > c->max_alloc) {
        rc = el_set_error(err, EL_ERR_NOMEM,
                          "OpenCL: upload_const: %zu bytes exceed the device's CL_DEVICE_MAX_MEM_ALLOC_SIZE (%llu)",
                          bytes, (unsigned long long)c->max_alloc);
        goto out;
    }
    cl_int e;
    cl_mem m;
    if (c->host_ptr) {
        m = clCreateBuffer(c->ctx, CL_MEM_READ_ONLY | CL_MEM_USE_HOST_PTR, bytes, (void *)host, &e);
        if (e != CL_SUCCESS) {
            rc = el_set_error(err, el_ocl_status(e), "OpenCL: clCreateBuffer(USE_HOST_PTR, %zu bytes) failed: %s", bytes,
                              el_ocl_err_name(e));
            goto out;
        }
    } else {
        m = clCreateBuffer(c->ctx, CL_MEM_READ_ONLY, bytes, NULL, &e);
        if (e != CL_SUCCESS) {
            rc = el_set_error(err, el_ocl_status(e), "OpenCL: clCreateBuffer(%zu bytes) for a constant failed: %s", bytes,
                              el_ocl_err_name(e));
            goto out;
        }
        e = clEnqueueWriteBuffer(c->q, m, async ? CL_FALSE : CL_TRUE, 0, bytes, host, 0, NULL, NULL);
        if (e != CL_SUCCESS) {
            clReleaseMemObject(m);
            rc = el_ocl_fail(err, "clEnqueueWriteBuffer (constant upload)", e);
            goto out;
        }
    }
    if (el_ocl_consts_insert(&c->consts, host, bytes, m) != 0) {
        if (!c->host_ptr) clFinish(c->q); /* the async copy must end before the buffer goes */
        clReleaseMemObject(m);
        rc = el_set_error(err, EL_ERR_NOMEM, "OpenCL: out of host memory for the constant registry");
    }
out:
    pthread_mutex_unlock(&c->mu);
    return rc;
}

/* ---- supports / run ---------------------------------------------------------- */

static bool f16_cache(int type) { return type == 0 || type == EL_TYPE_F16; }

static bool ocl_supports(el_backend *be, const el_op *op) {
    ocl *c = ctx_of(be);
    if (!op) return false;
    switch (op->kind) {
    case EL_OPK_MATMUL:
        if (op->n_w < 1 || op->n_w > 3 || op->n < 1) return false;
        for (int i = 0; i < op->n_w; i++) {
            const el_mat *w = op->w[i];
            if (!w || el_ocl_mm_index(w->type) < 0 || w->ne0 % 32 != 0 || w->ne0 != op->w[0]->ne0 || w->ne1 < 1 ||
                ((w->type == EL_TYPE_Q4_K || w->type == EL_TYPE_Q6_K) && w->ne0 % 256 != 0) ||
                w->ne0 > INT32_MAX || w->ne1 > INT32_MAX)
                return false;
            if ((int64_t)op->n * w->ne0 > INT32_MAX || (int64_t)op->n * w->ne1 > INT32_MAX) return false;
        }
        return true;
    case EL_OPK_RMSNORM: return op->n >= 1 && op->d >= 1;
    case EL_OPK_ROPE: {
        const el_rope *r = &op->p.rope.rope;
        /* no magnitude scale (mscale, Phi-3 long RoPE): the kernel's tables hold plain cos/sin */
        return (r->mode == EL_ROPE_NORM || r->mode == EL_ROPE_NEOX) && r->n_rot > 0 && r->n_rot % 2 == 0 &&
               r->n_rot <= op->p.rope.head_dim && op->p.rope.n_heads > 0 && (r->mscale == 0.0f || r->mscale == 1.0f) &&
               r->ext_factor == 0.0f; /* nor YaRN (gpt-oss) */
    }
    case EL_OPK_KV_STORE: return f16_cache(op->p.kv_store.type) && op->p.kv_store.row_len > 0;
    case EL_OPK_ATTENTION: {
        const el_attn_args *a = &op->p.attn.a;
        return f16_cache(a->type_k) && f16_cache(a->type_v) && a->head_dim > 0 && a->head_dim % 8 == 0 &&
               (size_t)a->head_dim <= ATT_DPI * c->att_ls && a->n_head > 0 && a->n_head_kv > 0 &&
               a->n_head % a->n_head_kv == 0 && a->n >= 1 && a->softcap == 0.0f && /* no soft-capping kernel */
               !a->sinks; /* nor sinks (gpt-oss): the CPU runs those */
    }
    case EL_OPK_SCALE: return op->p.scale.cap == 0.0f; /* soft-capping (tanh) runs on the CPU */
    case EL_OPK_SILU_MUL:
    case EL_OPK_GELU_MUL:
    case EL_OPK_ADD:
    case EL_OPK_COPY: return true;
    default: return false; /* GET_ROWS, FWHT, HOST */
    }
}

/* The operand's buffer and its offset in elements of `elem` bytes. */
static int operand(el_backend *be, const el_tref *r, size_t elem, const char *what, cl_mem *m, int *off,
                   el_error *err) {
    if (!r->t || !r->t->dev[be->index])
        return el_set_error(err, EL_ERR_INVALID_ARG, "OpenCL: operand %s has no buffer on this device", what);
    if (r->off % elem != 0 || r->off / elem > INT32_MAX)
        return el_set_error(err, EL_ERR_INVALID_ARG, "OpenCL: operand %s at byte offset %zu (not a multiple of %zu)",
                            what, r->off, elem);
    *m = (cl_mem)r->t->dev[be->index];
    *off = (int)(r->off / elem);
    return 0;
}

/* The registered buffer of a constant (NULL host: *m = NULL, fine). */
static int constant(ocl *c, const void *host, const char *what, cl_mem *m, el_error *err) {
    *m = NULL;
    if (!host) return 0;
    const const_entry *ce = el_ocl_consts_find(&c->consts, host);
    if (!ce) return el_set_error(err, EL_ERR_INVALID_ARG, "OpenCL: constant %s (%p) was not uploaded", what, host);
    *m = ce->mem;
    return 0;
}

#define TRY(x)                     \
    do {                           \
        const int try_rc_ = (x);   \
        if (try_rc_) return try_rc_; \
    } while (0)

static int elementwise(ocl *c, cl_kernel k, cl_mem y, int y0, cl_mem x, int x0, int count, const char *what,
                       el_error *err) {
    ARG(k, 0, cl_mem, y);
    ARG(k, 1, cl_int, y0);
    ARG(k, 2, cl_mem, x);
    ARG(k, 3, cl_int, x0);
    ARG(k, 4, cl_int, count);
    const size_t gws[1] = {(size_t)(count > 0 ? count : 0)};
    return el_ocl_enqueue(c, k, 1, gws, NULL, what, err);
}

static int run_locked(el_backend *be, const el_op *op, el_error *err) {
    ocl *c = ctx_of(be);
    cl_mem a = NULL, b = NULL, y = NULL;
    int a0 = 0, b0 = 0, y0 = 0;
    switch (op->kind) {
    case EL_OPK_MATMUL: {
        TRY(operand(be, &op->src[0], 4, "src0", &a, &a0, err));
        int ready = -1; /* the activation mode c->act holds for this op */
        /* the CPU's row order, set on this (the calling) thread: each row as a one-row product */
        const bool row1 = el_op_matmul_row_order_on();
        for (int i = 0; i < op->n_w; i++) {
            const el_mat *w = op->w[i];
            cl_mem wm, bm;
            TRY(operand(be, &op->dst[i], 4, "dst", &y, &y0, err));
            TRY(constant(c, w->data, "weight", &wm, err));
            if (!wm) return el_set_error(err, EL_ERR_INVALID_ARG, "OpenCL: matmul weight %d has no data", i);
            TRY(constant(c, op->vec[i], "bias", &bm, err));
            /* the activations in the CPU's format for this weight type (its bytes), then the
             * CPU's dot product on them */
            const int mode = el_ocl_act_mode(w->type);
            cl_mem xa = a;
            size_t xoff = 4 * (size_t)a0;
            if (mode) {
                if (mode != ready) TRY(el_ocl_launch_act_quant(c, a, a0, (int)w->ne0, op->n, mode, err));
                ready = mode;
                xa = c->act, xoff = 0;
            }
            TRY(el_ocl_launch_matmul(c, el_ocl_mm_index(w->type), wm, w->row_bytes, (int)w->ne0, (int)w->ne1, xa, xoff,
                              el_ocl_act_row_bytes(mode, (int)w->ne0), op->n, y, y0, bm, row1, err));
        }
        return 0;
    }
    case EL_OPK_RMSNORM: {
        cl_mem wm;
        TRY(operand(be, &op->src[0], 4, "src0", &a, &a0, err));
        TRY(operand(be, &op->dst[0], 4, "dst0", &y, &y0, err));
        TRY(constant(c, op->vec[0], "norm weight", &wm, err));
        cl_kernel k = c->k_rmsnorm;
        ARG(k, 0, cl_mem, a);
        ARG(k, 1, cl_int, a0);
        ARG(k, 2, cl_mem, y);
        ARG(k, 3, cl_int, y0);
        ARG(k, 4, cl_int, op->d);
        ARG(k, 5, cl_float, op->p.rmsnorm.eps);
        ARG(k, 6, cl_mem, wm ? wm : c->dummy);
        ARG(k, 7, cl_int, wm ? 1 : 0);
        LOCAL(k, 8, sizeof(float) * c->norm_ls);
        const size_t gws[1] = {c->norm_ls * (size_t)op->n}, lws[1] = {c->norm_ls};
        return el_ocl_enqueue(c, k, 1, gws, lws, "rmsnorm", err);
    }
    case EL_OPK_ROPE: {
        const el_rope *r = &op->p.rope.rope;
        TRY(operand(be, &op->dst[0], 4, "dst0", &y, &y0, err));
        if ((int64_t)op->p.rope.pos0 + op->n > INT32_MAX / 2 || op->p.rope.pos0 < 0)
            return el_set_error(err, EL_ERR_INVALID_ARG, "OpenCL: rope position %d out of range", op->p.rope.pos0);
        cl_mem cs = el_ocl_rope_table(c, r, op->p.rope.pos0 + op->n, err);
        if (!cs) return err && err->code ? (int)err->code : EL_ERR_INTERNAL;
        cl_kernel k = c->k_rope;
        ARG(k, 0, cl_mem, y);
        ARG(k, 1, cl_int, y0);
        ARG(k, 2, cl_int, op->p.rope.n_heads);
        ARG(k, 3, cl_int, op->p.rope.head_dim);
        ARG(k, 4, cl_int, r->n_rot);
        ARG(k, 5, cl_int, op->p.rope.pos0);
        ARG(k, 6, cl_int, r->mode == EL_ROPE_NEOX ? 1 : 0);
        ARG(k, 7, cl_mem, cs);
        const size_t gws[3] = {(size_t)(r->n_rot / 2), (size_t)op->p.rope.n_heads, (size_t)op->n};
        return el_ocl_enqueue(c, k, 3, gws, NULL, "rope", err);
    }
    case EL_OPK_SCALE: {
        TRY(operand(be, &op->dst[0], 4, "dst0", &y, &y0, err));
        cl_kernel k = c->k_scale;
        ARG(k, 0, cl_mem, y);
        ARG(k, 1, cl_int, y0);
        ARG(k, 2, cl_float, op->p.scale.s);
        ARG(k, 3, cl_int, op->p.scale.count);
        const size_t gws[1] = {(size_t)(op->p.scale.count > 0 ? op->p.scale.count : 0)};
        return el_ocl_enqueue(c, k, 1, gws, NULL, "scale", err);
    }
    case EL_OPK_ADD:
        TRY(operand(be, &op->dst[0], 4, "dst0", &y, &y0, err));
        TRY(operand(be, &op->src[1], 4, "src1", &b, &b0, err));
        return elementwise(c, c->k_add, y, y0, b, b0, op->p.elt.count, "add", err);
    case EL_OPK_SILU_MUL:
        TRY(operand(be, &op->dst[0], 4, "dst0", &y, &y0, err));
        TRY(operand(be, &op->src[1], 4, "src1", &b, &b0, err));
        if ((int64_t)op->n * op->d > INT32_MAX || op->d < 1)
            return el_set_error(err, EL_ERR_INVALID_ARG, "OpenCL: silu_mul of %d x %d", op->n, op->d);
        ARG(c->k_silu, 5, cl_int, op->d); /* the row length: the CPU's expf variant depends on the column */
        return elementwise(c, c->k_silu, y, y0, b, b0, op->n * op->d, "silu_mul", err);
    case EL_OPK_GELU_MUL:
        TRY(operand(be, &op->dst[0], 4, "dst0", &y, &y0, err));
        TRY(operand(be, &op->src[1], 4, "src1", &b, &b0, err));
        {
            cl_mem tab = el_ocl_gelu_table(c, err);
            if (!tab) return err && err->code ? (int)err->code : EL_ERR_INTERNAL;
            ARG(c->k_gelu, 5, cl_mem, tab);
        }
        return elementwise(c, c->k_gelu, y, y0, b, b0, op->p.elt.count, "gelu_mul", err);
    case EL_OPK_KV_STORE: {
        TRY(operand(be, &op->src[0], 4, "src0", &a, &a0, err));
        TRY(operand(be, &op->dst[0], 2, "dst0 (cache)", &y, &y0, err));
        cl_kernel k = c->k_kv_store;
        ARG(k, 0, cl_mem, y);
        ARG(k, 1, cl_int, y0);
        ARG(k, 2, cl_mem, a);
        ARG(k, 3, cl_int, a0);
        ARG(k, 4, cl_int, op->p.kv_store.row_len);
        ARG(k, 5, cl_int, op->p.kv_store.pos0);
        ARG(k, 6, cl_int, op->p.kv_store.ring);
        const size_t gws[2] = {(size_t)op->p.kv_store.row_len, (size_t)(op->n > 0 ? op->n : 0)};
        return el_ocl_enqueue(c, k, 2, gws, NULL, "kv_store", err);
    }
    case EL_OPK_ATTENTION: {
        cl_mem kc = NULL, vc = NULL;
        int k0 = 0, v0 = 0;
        TRY(operand(be, &op->src[0], 4, "src0 (q)", &a, &a0, err));
        TRY(operand(be, &op->dst[0], 4, "dst0", &y, &y0, err));
        TRY(operand(be, &op->src[1], 2, "src1 (k cache)", &kc, &k0, err));
        TRY(operand(be, &op->src[2], 2, "src2 (v cache)", &vc, &v0, err));
        return el_ocl_launch_attention(c, a, a0, y, y0, kc, k0, vc, v0, &op->p.attn.a, err);
    }
    case EL_OPK_COPY: {
        TRY(operand(be, &op->src[0], 1, "src0", &a, &a0, err));
        TRY(operand(be, &op->dst[0], 1, "dst0", &y, &y0, err));
        const size_t n = op->src[0].len, so = op->src[0].off, d = op->dst[0].off;
        if (n == 0 || (a == y && so == d)) return 0;
        if (a != y || so + n <= d || d + n <= so) {
            const cl_int e = clEnqueueCopyBuffer(c->q, a, y, so, d, n, 0, NULL, NULL);
            return e == CL_SUCCESS ? 0 : el_ocl_fail(err, "clEnqueueCopyBuffer", e);
        }
        /* overlapping ranges of one buffer (memmove): chunks of the distance,
         * in the order that reads each byte before it is overwritten */
        const size_t dist = so > d ? so - d : d - so;
        for (size_t done = 0; done < n;) {
            const size_t cn = n - done < dist ? n - done : dist;
            const size_t at = so > d ? done : n - done - cn;
            const cl_int e = clEnqueueCopyBuffer(c->q, a, y, so + at, d + at, cn, 0, NULL, NULL);
            if (e != CL_SUCCESS) return el_ocl_fail(err, "clEnqueueCopyBuffer", e);
            done += cn;
        }
        return 0;
    }
    default:
        return el_set_error(err, EL_ERR_UNSUPPORTED, "OpenCL: op %d is not supported", (int)op->kind);
    }
}

static int ocl_run(el_backend *be, const el_op *op, el_error *err) {
    if (!op) return el_set_error(err, EL_ERR_INVALID_ARG, "OpenCL: run(NULL)");
    if (!ocl_supports(be, op))
        return el_set_error(err, EL_ERR_UNSUPPORTED, "OpenCL: this op (kind %d) is not supported here", (int)op->kind);
    ocl *c = ctx_of(be);
    pthread_mutex_lock(&c->mu);
    const int rc = run_locked(be, op, err);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

static int ocl_sync(el_backend *be, el_error *err) {
    const cl_int e = clFinish(ctx_of(be)->q);
    return e == CL_SUCCESS ? 0 : el_ocl_fail(err, "clFinish", e);
}

/* ---- measure (measure.c) ------------------------------------------------------ */

static int ocl_measure(el_backend *be, el_device_caps *caps, el_error *err) {
    ocl *c = ctx_of(be);
    if (!caps) return el_set_error(err, EL_ERR_INVALID_ARG, "OpenCL: measure(NULL)");
    pthread_mutex_lock(&c->mu);
    const int rc = el_ocl_measure_locked(c, caps, err);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

/* ---- lifetime ------------------------------------------------------------------ */

static void ocl_destroy(ocl *c) {
    if (!c) return;
    if (c->q) clFinish(c->q);
    el_ocl_consts_free(&c->consts);
    el_ocl_free_kernels(c);
    if (c->dummy) clReleaseMemObject(c->dummy);
    if (c->act) clReleaseMemObject(c->act);
    if (c->gelu_tab) clReleaseMemObject(c->gelu_tab);
    for (int i = 0; i < ROPE_TABS; i++)
        if (c->rope[i].mem) clReleaseMemObject(c->rope[i].mem);
    if (c->prog) clReleaseProgram(c->prog);
    if (c->q) clReleaseCommandQueue(c->q);
    if (c->ctx) clReleaseContext(c->ctx);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

static void ocl_free(el_backend *be) {
    if (!be) return;
    ocl_destroy(be->ctx);
    free(be);
}

static const el_backend_i k_ocl_i = {
    .free = ocl_free,
    .buf_alloc = ocl_buf_alloc,
    .buf_free = ocl_buf_free,
    .buf_write = ocl_buf_write,
    .buf_read = ocl_buf_read,
    .upload_const = ocl_upload_const,
    .supports = ocl_supports,
    .run = ocl_run,
    .sync = ocl_sync,
    .measure = ocl_measure,
};

static size_t env_size(const char *name, size_t def) {
    const char *e = getenv(name);
    if (!e || !*e) return def;
    char *end;
    const unsigned long v = strtoul(e, &end, 10);
    return *end == 0 && v > 0 && v <= 1024 ? (size_t)v : def;
}

static size_t pow2_floor(size_t v) {
    size_t p = 1;
    while (p * 2 <= v) p *= 2;
    return p;
}

el_backend *el_backend_opencl_new(int device, el_error *err) {
    cl_platform_id plat = NULL;
    cl_device_id dev = NULL;
    const int n = enum_devices(device, &plat, &dev);
    if (n < 0) {
        el_set_error(err, EL_ERR_UNSUPPORTED, "OpenCL: no OpenCL platform (the ICD loader lists none)");
        return NULL;
    }
    if (device < 0 || device >= n) {
        el_set_error(err, EL_ERR_UNSUPPORTED, "OpenCL: no OpenCL device %d (%d found)", device, n);
        return NULL;
    }
    ocl *c = calloc(1, sizeof *c);
    el_backend *be = calloc(1, sizeof *be);
    if (!c || !be) {
        free(c);
        free(be);
        el_set_error(err, EL_ERR_NOMEM, "OpenCL: out of host memory");
        return NULL;
    }
    pthread_mutex_init(&c->mu, NULL);
    c->plat = plat;
    c->dev = dev;
    cl_int e;
    const cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)plat, 0};
    c->ctx = clCreateContext(props, 1, &dev, NULL, NULL, &e);
    if (e != CL_SUCCESS) {
        el_ocl_fail(err, "clCreateContext", e);
        goto fail;
    }
    c->q = clCreateCommandQueue(c->ctx, dev, 0, &e);
    if (e != CL_SUCCESS) {
        el_ocl_fail(err, "clCreateCommandQueue", e);
        goto fail;
    }
    cl_device_type type = 0;
    cl_ulong gmem = 0;
    cl_bool unified = CL_FALSE;
    if ((e = clGetDeviceInfo(dev, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof c->max_alloc, &c->max_alloc, NULL)) ||
        (e = clGetDeviceInfo(dev, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof c->max_wg, &c->max_wg, NULL)) ||
        (e = clGetDeviceInfo(dev, CL_DEVICE_TYPE, sizeof type, &type, NULL)) ||
        (e = clGetDeviceInfo(dev, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof gmem, &gmem, NULL)) ||
        (e = clGetDeviceInfo(dev, CL_DEVICE_HOST_UNIFIED_MEMORY, sizeof unified, &unified, NULL))) {
        el_ocl_fail(err, "clGetDeviceInfo", e);
        goto fail;
    }
    const char *cc = getenv("EL_OPENCL_COPY_CONST");
    c->host_ptr = unified == CL_TRUE && !(cc && strcmp(cc, "1") == 0);
    /* work-group sizes (EL_OPENCL_MM_LS overrides the matmul's, for tuning) */
    const bool is_cpu = (type & CL_DEVICE_TYPE_CPU) != 0;
    const size_t wg = pow2_floor(c->max_wg);
    c->mm_ls = pow2_floor(env_size("EL_OPENCL_MM_LS", is_cpu ? 16 : 64));
    if (c->mm_ls > wg) c->mm_ls = wg;
    {
        char ext[4096];
        el_ocl_dev_str(dev, CL_DEVICE_EXTENSIONS, ext, sizeof ext);
        const char *bo = getenv("EL_OPENCL_BUILD_OPTIONS");
        c->info.exact = strstr(ext, "cl_khr_fp64") != NULL && !(bo && strstr(bo, "EL_NO_FP64"));
    }
    c->norm_ls = is_cpu ? 64 : 256;
    if (c->norm_ls > wg) c->norm_ls = wg;
    c->att_ls = 64;
    if (c->att_ls > wg) c->att_ls = wg;
    c->info.mm_ls = (int)c->mm_ls;
    c->info.host_ptr = c->host_ptr;
    c->dummy = clCreateBuffer(c->ctx, CL_MEM_READ_WRITE, 16, NULL, &e);
    if (e != CL_SUCCESS) {
        el_ocl_fail(err, "clCreateBuffer", e);
        goto fail;
    }
    if (el_ocl_build_program(c, err) != 0) goto fail;
    /* the kernels' own limits may be below the device's */
    {
        size_t kwg = 0;
        if (clGetKernelWorkGroupInfo(c->k_attn, dev, CL_KERNEL_WORK_GROUP_SIZE, sizeof kwg, &kwg, NULL) == CL_SUCCESS &&
            kwg > 0 && c->att_ls > pow2_floor(kwg))
            c->att_ls = pow2_floor(kwg);
        if (clGetKernelWorkGroupInfo(c->k_attn_tiled, dev, CL_KERNEL_WORK_GROUP_SIZE, sizeof kwg, &kwg, NULL) == CL_SUCCESS &&
            kwg > 0 && c->att_ls > pow2_floor(kwg))
            c->att_ls = pow2_floor(kwg);
        if (clGetKernelWorkGroupInfo(c->k_rmsnorm, dev, CL_KERNEL_WORK_GROUP_SIZE, sizeof kwg, &kwg, NULL) == CL_SUCCESS &&
            kwg > 0 && c->norm_ls > pow2_floor(kwg))
            c->norm_ls = pow2_floor(kwg);
        for (int t = 0; t < MM_NTYPES; t++)
            if (clGetKernelWorkGroupInfo(c->mm[t], dev, CL_KERNEL_WORK_GROUP_SIZE, sizeof kwg, &kwg, NULL) == CL_SUCCESS &&
                kwg > 0 && c->mm_ls > pow2_floor(kwg))
                c->mm_ls = pow2_floor(kwg);
        c->info.mm_ls = (int)c->mm_ls;
    }

    be->i = &k_ocl_i;
    be->ctx = c;
    be->index = 1; /* the executor sets its own index */
    el_device_caps *caps = &be->caps;
    snprintf(caps->name, sizeof caps->name, "opencl%d", device);
    char dname[128], vendor[64], dver[64], pname[64];
    el_ocl_dev_str(dev, CL_DEVICE_NAME, dname, sizeof dname);
    el_ocl_dev_str(dev, CL_DEVICE_VENDOR, vendor, sizeof vendor);
    el_ocl_dev_str(dev, CL_DRIVER_VERSION, dver, sizeof dver);
    if (clGetPlatformInfo(plat, CL_PLATFORM_NAME, sizeof pname - 1, pname, NULL) != CL_SUCCESS) pname[0] = 0;
    pname[sizeof pname - 1] = 0;
    snprintf(caps->desc, sizeof caps->desc, "%s (%s), %s %s", dname, vendor, pname, dver);
    caps->kind = (type & CL_DEVICE_TYPE_GPU)           ? EL_DEV_GPU
                 : (type & CL_DEVICE_TYPE_CPU)         ? EL_DEV_CPU
                 : (type & CL_DEVICE_TYPE_ACCELERATOR) ? EL_DEV_NPU
                                                       : EL_DEV_OTHER;
    caps->ops = (1u << EL_OPK_MATMUL) | (1u << EL_OPK_RMSNORM) | (1u << EL_OPK_ROPE) | (1u << EL_OPK_SCALE) |
                (1u << EL_OPK_KV_STORE) | (1u << EL_OPK_ATTENTION) | (1u << EL_OPK_SILU_MUL) |
                (1u << EL_OPK_GELU_MUL) | (1u << EL_OPK_ADD) | (1u << EL_OPK_COPY);
    caps->matmul_types = 0;
    for (int t = 0; t < MM_NTYPES; t++) caps->matmul_types |= 1ull << el_ocl_mm_types[t];
    caps->kv_types = 1u << EL_TYPE_F16;
    caps->mem_bytes = gmem;
    snprintf(be->cache_key, sizeof be->cache_key, "%.100s|%.60s|%016llx", dname, dver,
             (unsigned long long)el_fnv1a(EL_FNV_INIT, el_opencl_kernels_src, el_opencl_kernels_src_len));
    return be;
fail:
    ocl_destroy(c);
    free(be);
    return NULL;
}

int el_backend_opencl_info(const el_backend *be, el_opencl_info *info) {
    if (!be || !info || be->i != &k_ocl_i) return -1;
    *info = ((const ocl *)be->ctx)->info;
    return 0;
}

