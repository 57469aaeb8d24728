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
 *     NEOX), SCALE, KV_STORE and ATTENTION on F16 caches, SILU_MUL,
 *     GELU_MUL, ADD, COPY. Float operands need 4-byte aligned offsets.
 *   - Every CL call is checked; errors name the call and the CL error
 *     (CL_OUT_OF_RESOURCES, ...). Out of device memory is EL_ERR_NOMEM.
 */
#include <CL/cl.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "backend/cpu/ops.h"
#include "backend/opencl/bincache.h"
#include "backend/opencl/opencl.h"
#include "package/quantize.h"
#include "util/error.h"
#include "util/fp16.h"

extern const char el_opencl_kernels_src[];
extern const size_t el_opencl_kernels_src_len;

/* ---- CL error names ------------------------------------------------------ */

static const char *cl_err_name(cl_int e) {
    switch (e) {
#define N(x) case x: return #x;
    N(CL_SUCCESS) N(CL_DEVICE_NOT_FOUND) N(CL_DEVICE_NOT_AVAILABLE) N(CL_COMPILER_NOT_AVAILABLE)
    N(CL_MEM_OBJECT_ALLOCATION_FAILURE) N(CL_OUT_OF_RESOURCES) N(CL_OUT_OF_HOST_MEMORY)
    N(CL_PROFILING_INFO_NOT_AVAILABLE) N(CL_MEM_COPY_OVERLAP) N(CL_IMAGE_FORMAT_MISMATCH)
    N(CL_IMAGE_FORMAT_NOT_SUPPORTED) N(CL_BUILD_PROGRAM_FAILURE) N(CL_MAP_FAILURE)
    N(CL_MISALIGNED_SUB_BUFFER_OFFSET) N(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
    N(CL_COMPILE_PROGRAM_FAILURE) N(CL_LINKER_NOT_AVAILABLE) N(CL_LINK_PROGRAM_FAILURE)
    N(CL_DEVICE_PARTITION_FAILED) N(CL_KERNEL_ARG_INFO_NOT_AVAILABLE) N(CL_INVALID_VALUE)
    N(CL_INVALID_DEVICE_TYPE) N(CL_INVALID_PLATFORM) N(CL_INVALID_DEVICE) N(CL_INVALID_CONTEXT)
    N(CL_INVALID_QUEUE_PROPERTIES) N(CL_INVALID_COMMAND_QUEUE) N(CL_INVALID_HOST_PTR)
    N(CL_INVALID_MEM_OBJECT) N(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR) N(CL_INVALID_IMAGE_SIZE)
    N(CL_INVALID_SAMPLER) N(CL_INVALID_BINARY) N(CL_INVALID_BUILD_OPTIONS) N(CL_INVALID_PROGRAM)
    N(CL_INVALID_PROGRAM_EXECUTABLE) N(CL_INVALID_KERNEL_NAME) N(CL_INVALID_KERNEL_DEFINITION)
    N(CL_INVALID_KERNEL) N(CL_INVALID_ARG_INDEX) N(CL_INVALID_ARG_VALUE) N(CL_INVALID_ARG_SIZE)
    N(CL_INVALID_KERNEL_ARGS) N(CL_INVALID_WORK_DIMENSION) N(CL_INVALID_WORK_GROUP_SIZE)
    N(CL_INVALID_WORK_ITEM_SIZE) N(CL_INVALID_GLOBAL_OFFSET) N(CL_INVALID_EVENT_WAIT_LIST)
    N(CL_INVALID_EVENT) N(CL_INVALID_OPERATION) N(CL_INVALID_GL_OBJECT) N(CL_INVALID_BUFFER_SIZE)
    N(CL_INVALID_MIP_LEVEL) N(CL_INVALID_GLOBAL_WORK_SIZE) N(CL_INVALID_PROPERTY)
    N(CL_INVALID_IMAGE_DESCRIPTOR) N(CL_INVALID_COMPILER_OPTIONS) N(CL_INVALID_LINKER_OPTIONS)
    N(CL_INVALID_DEVICE_PARTITION_COUNT)
#undef N
    case -1001: return "CL_PLATFORM_NOT_FOUND_KHR";
    default: return "CL error (unknown code)";
    }
}

static el_status cl_status(cl_int e) {
    return (e == CL_MEM_OBJECT_ALLOCATION_FAILURE || e == CL_OUT_OF_RESOURCES || e == CL_OUT_OF_HOST_MEMORY ||
            e == CL_INVALID_BUFFER_SIZE)
               ? EL_ERR_NOMEM
               : EL_ERR_INTERNAL;
}

static int cl_fail(el_error *err, const char *what, cl_int e) {
    return el_set_error(err, cl_status(e), "OpenCL: %s failed: %s (%d)", what, cl_err_name(e), (int)e);
}

/* ---- the constant registry: host address -> cl_mem ------------------------ */

typedef struct const_entry {
    const void *host; /* NULL: empty slot */
    size_t bytes;
    cl_mem mem;
} const_entry;

typedef struct const_map {
    const_entry *e;
    size_t cap, used; /* cap: a power of two (0 before the first insert) */
} const_map;

static size_t ptr_hash(const void *p) {
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (size_t)x;
}

static const_entry *cmap_find(const const_map *m, const void *host) {
    if (!m->cap || !host) return NULL;
    for (size_t i = ptr_hash(host) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (m->e[i].host == host) return &m->e[i];
        if (!m->e[i].host) return NULL;
    }
}

/* Inserts (host is not present); 0, or -1 out of memory. */
static int cmap_insert(const_map *m, const void *host, size_t bytes, cl_mem mem) {
    if ((m->used + 1) * 2 > m->cap) { /* load factor <= 1/2 */
        const size_t ncap = m->cap ? m->cap * 2 : 64;
        const_entry *ne = calloc(ncap, sizeof *ne);
        if (!ne) return -1;
        for (size_t i = 0; i < m->cap; i++) {
            if (!m->e[i].host) continue;
            size_t j = ptr_hash(m->e[i].host) & (ncap - 1);
            while (ne[j].host) j = (j + 1) & (ncap - 1);
            ne[j] = m->e[i];
        }
        free(m->e);
        m->e = ne;
        m->cap = ncap;
    }
    size_t j = ptr_hash(host) & (m->cap - 1);
    while (m->e[j].host) j = (j + 1) & (m->cap - 1);
    m->e[j] = (const_entry){host, bytes, mem};
    m->used++;
    return 0;
}

/* ---- the backend state ------------------------------------------------------ */

enum { MM_F32, MM_F16, MM_Q8_0, MM_Q4_0, MM_Q5_0, MM_Q4_K, MM_Q6_K, MM_NTYPES };
static const el_type k_mm_types[MM_NTYPES] = {EL_TYPE_F32,  EL_TYPE_F16,  EL_TYPE_Q8_0, EL_TYPE_Q4_0,
                                              EL_TYPE_Q5_0, EL_TYPE_Q4_K, EL_TYPE_Q6_K};
static const char *const k_mm_names[MM_NTYPES] = {"f32", "f16", "q8_0", "q4_0", "q5_0", "q4_k", "q6_k"};

#define MM_NT 4   /* tokens per matmul work-item (kernels.cl NT) */
#define ATT_DPI 8 /* head dims per attention work-item (ATT_DPI) */
#define ROPE_TABS 8 /* cos/sin tables kept (one per RoPE configuration: Gemma 3 has two) */

/* The CPU's cos/sin of one RoPE configuration for positions 0..cap-1 (n_rot
 * floats each), on the device. */
typedef struct rope_tab {
    float freq_base, freq_scale;
    int n_rot, cap;
    const float *ff;
    cl_mem mem;
} rope_tab;

typedef struct ocl {
    cl_platform_id plat;
    cl_device_id dev;
    cl_context ctx;
    cl_command_queue q;
    cl_program prog;
    cl_kernel mm[MM_NTYPES];
    cl_kernel k_rmsnorm, k_rope, k_scale, k_add, k_silu, k_gelu, k_kv_store, k_attn, k_attn_tiled, k_read_bw, k_act;
    cl_mem dummy; /* bound where an optional buffer argument is absent */
    cl_mem act;   /* a matmul's activations in the CPU's vec_dot_type bytes (act_quant) */
    size_t act_cap;
    cl_mem gelu_tab; /* the CPU's GELU table (65536 floats), made on first use */
    rope_tab rope[ROPE_TABS];
    int rope_next; /* the slot replaced next when all are taken */
    cl_ulong max_alloc;
    size_t max_wg;
    size_t mm_ls, norm_ls, att_ls;
    bool host_ptr;
    const_map consts;
    pthread_mutex_t mu;
    el_opencl_info info;
} ocl;

static ocl *ctx_of(el_backend *be) { return be->ctx; }

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

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

static void dev_str(cl_device_id d, cl_device_info what, char *out, size_t cap) {
    out[0] = 0;
    if (clGetDeviceInfo(d, what, cap - 1, out, NULL) != CL_SUCCESS) out[0] = 0;
    out[cap - 1] = 0;
}

/* ---- program build + binary cache ---------------------------------------- */

static const char *k_kernel_names[] = {"rmsnorm",  "rope",      "scale_f32",       "add_f32", "silu_mul", "gelu_mul",
                                       "kv_store", "attention", "attention_tiled", "read_bw", "act_quant"};

static int make_kernels(ocl *c, el_error *err) {
    cl_int e;
    char name[32];
    for (int t = 0; t < MM_NTYPES; t++) {
        snprintf(name, sizeof name, "mm_%s", k_mm_names[t]);
        c->mm[t] = clCreateKernel(c->prog, name, &e);
        if (e != CL_SUCCESS) return el_set_error(err, EL_ERR_INTERNAL, "OpenCL: clCreateKernel(%s) failed: %s", name, cl_err_name(e));
    }
    cl_kernel *ks[] = {&c->k_rmsnorm, &c->k_rope,       &c->k_scale,   &c->k_add, &c->k_silu, &c->k_gelu,
                       &c->k_kv_store, &c->k_attn, &c->k_attn_tiled, &c->k_read_bw, &c->k_act};
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
        *ks[i] = clCreateKernel(c->prog, k_kernel_names[i], &e);
        if (e != CL_SUCCESS)
            return el_set_error(err, EL_ERR_INTERNAL, "OpenCL: clCreateKernel(%s) failed: %s", k_kernel_names[i], cl_err_name(e));
    }
    return 0;
}

static void free_kernels(ocl *c) {
    for (int t = 0; t < MM_NTYPES; t++) {
        if (c->mm[t]) clReleaseKernel(c->mm[t]);
        c->mm[t] = NULL;
    }
    cl_kernel *ks[] = {&c->k_rmsnorm, &c->k_rope,       &c->k_scale,   &c->k_add, &c->k_silu, &c->k_gelu,
                       &c->k_kv_store, &c->k_attn, &c->k_attn_tiled, &c->k_read_bw, &c->k_act};
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
        if (*ks[i]) clReleaseKernel(*ks[i]);
        *ks[i] = NULL;
    }
}

/* The first lines of the build log into msg. */
static void build_log(ocl *c, char *msg, size_t cap) {
    msg[0] = 0;
    size_t n = 0;
    if (clGetProgramBuildInfo(c->prog, c->dev, CL_PROGRAM_BUILD_LOG, 0, NULL, &n) != CL_SUCCESS || n == 0) return;
    char *log = malloc(n + 1);
    if (!log) return;
    if (clGetProgramBuildInfo(c->prog, c->dev, CL_PROGRAM_BUILD_LOG, n, log, NULL) == CL_SUCCESS) {
        log[n] = 0;
        size_t k = 0;
        for (size_t i = 0; log[i] && k + 1 < cap; i++) msg[k++] = log[i] == '\n' ? ' ' : log[i];
        while (k > 0 && msg[k - 1] == ' ') k--;
        msg[k] = 0;
    }
    free(log);
}

static int build_from_source(ocl *c, const char *opts, el_error *err) {
    cl_int e;
    const char *src = el_opencl_kernels_src;
    const size_t len = el_opencl_kernels_src_len;
    c->prog = clCreateProgramWithSource(c->ctx, 1, &src, &len, &e);
    if (e != CL_SUCCESS) return cl_fail(err, "clCreateProgramWithSource", e);
    e = clBuildProgram(c->prog, 1, &c->dev, opts, NULL, NULL);
    if (e != CL_SUCCESS) {
        char log[300];
        build_log(c, log, sizeof log);
        return el_set_error(err, EL_ERR_UNSUPPORTED, "OpenCL: clBuildProgram failed: %s (%d) with options \"%s\"%s%s",
                            cl_err_name(e), (int)e, opts, log[0] ? ": " : "", log);
    }
    return 0;
}

/* The built program's binary (malloc'd) or NULL. */
static uint8_t *program_binary(ocl *c, size_t *len) {
    size_t sz = 0;
    if (clGetProgramInfo(c->prog, CL_PROGRAM_BINARY_SIZES, sizeof sz, &sz, NULL) != CL_SUCCESS || sz == 0) return NULL;
    uint8_t *bin = malloc(sz);
    if (!bin) return NULL;
    unsigned char *ptrs[1] = {bin};
    if (clGetProgramInfo(c->prog, CL_PROGRAM_BINARIES, sizeof ptrs, ptrs, NULL) != CL_SUCCESS) {
        free(bin);
        return NULL;
    }
    *len = sz;
    return bin;
}

static int build_program(ocl *c, el_error *err) {
    char opts[1024];
    const char *extra = getenv("EL_OPENCL_BUILD_OPTIONS");
    /* correctly rounded division and sqrt: the CPU's (RMSNorm's scale, the softmax's 1/S) */
    snprintf(opts, sizeof opts, "-cl-std=CL1.2 -cl-fp32-correctly-rounded-divide-sqrt -DNT=%d -DATT_DPI=%d%s%s", MM_NT,
             ATT_DPI, extra && *extra ? " " : "", extra && *extra ? extra : "");

    char dname[256], dver[256], pver[256];
    dev_str(c->dev, CL_DEVICE_NAME, dname, sizeof dname);
    dev_str(c->dev, CL_DRIVER_VERSION, dver, sizeof dver);
    if (clGetPlatformInfo(c->plat, CL_PLATFORM_VERSION, sizeof pver - 1, pver, NULL) != CL_SUCCESS) pver[0] = 0;
    pver[sizeof pver - 1] = 0;
    uint64_t key = EL_FNV_INIT;
    key = el_fnv1a(key, dname, strlen(dname) + 1);
    key = el_fnv1a(key, dver, strlen(dver) + 1);
    key = el_fnv1a(key, pver, strlen(pver) + 1);
    key = el_fnv1a(key, el_opencl_kernels_src, el_opencl_kernels_src_len);
    key = el_fnv1a(key, opts, strlen(opts) + 1);

    char dir[400];
    c->info.cache_path[0] = 0;
    if (el_clbin_dir(dir, sizeof dir) == 0)
        snprintf(c->info.cache_path, sizeof c->info.cache_path, "%s/%016llx.bin", dir, (unsigned long long)key);

    const double t0 = now_ms();
    if (c->info.cache_path[0]) {
        size_t blen = 0;
        uint8_t *bin = el_clbin_load(c->info.cache_path, key, &blen);
        if (bin) {
            cl_int e, st;
            const unsigned char *bp = bin;
            c->prog = clCreateProgramWithBinary(c->ctx, 1, &c->dev, &blen, &bp, &st, &e);
            free(bin);
            if (e == CL_SUCCESS && st == CL_SUCCESS && clBuildProgram(c->prog, 1, &c->dev, opts, NULL, NULL) == CL_SUCCESS &&
                make_kernels(c, NULL) == 0) {
                c->info.from_cache = true;
                c->info.build_ms = now_ms() - t0;
                return 0;
            }
            /* a binary the driver refuses: build from source and replace it */
            free_kernels(c);
            if (c->prog) clReleaseProgram(c->prog);
            c->prog = NULL;
        }
    }
    if (build_from_source(c, opts, err) != 0) return -1;
    if (make_kernels(c, err) != 0) return -1;
    c->info.build_ms = now_ms() - t0;
    if (c->info.cache_path[0]) {
        size_t blen = 0;
        uint8_t *bin = program_binary(c, &blen);
        if (bin && el_clbin_store(c->info.cache_path, key, bin, blen) == 0) c->info.cache_written = true;
        free(bin);
    }
    return 0;
}

/* ---- buffers --------------------------------------------------------------- */

/* A device buffer of `bytes` (within the device's largest allocation); NULL with err. */
static cl_mem alloc_mem(ocl *c, size_t bytes, el_error *err) {
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
        el_set_error(err, cl_status(e), "OpenCL: clCreateBuffer(%zu bytes) failed: %s", bytes, cl_err_name(e));
        return NULL;
    }
    return m;
}

static void *ocl_buf_alloc(el_backend *be, size_t bytes, el_error *err) { return alloc_mem(ctx_of(be), bytes, err); }

static void ocl_buf_free(el_backend *be, void *buf) {
    (void)be;
    if (buf) clReleaseMemObject((cl_mem)buf);
}

static int ocl_buf_write(el_backend *be, void *buf, size_t off, const void *src, size_t n, el_error *err) {
    if (n == 0) return 0;
    if (!buf || !src) return el_set_error(err, EL_ERR_INVALID_ARG, "OpenCL: buf_write to a NULL buffer");
    const cl_int e = clEnqueueWriteBuffer(ctx_of(be)->q, (cl_mem)buf, CL_TRUE, off, n, src, 0, NULL, NULL);
    return e == CL_SUCCESS ? 0 : cl_fail(err, "clEnqueueWriteBuffer", e);
}

static int ocl_buf_read(el_backend *be, void *buf, size_t off, void *dst, size_t n, el_error *err) {
    if (n == 0) return 0;
    if (!buf || !dst) return el_set_error(err, EL_ERR_INVALID_ARG, "OpenCL: buf_read from a NULL buffer");
    const cl_int e = clEnqueueReadBuffer(ctx_of(be)->q, (cl_mem)buf, CL_TRUE, off, n, dst, 0, NULL, NULL);
    return e == CL_SUCCESS ? 0 : cl_fail(err, "clEnqueueReadBuffer", e);
}

static int ocl_upload_const(el_backend *be, const void *host, size_t bytes, bool async, el_error *err) {
    ocl *c = ctx_of(be);
    if (!host || bytes == 0) return el_set_error(err, EL_ERR_INVALID_ARG, "OpenCL: upload_const of nothing");
    pthread_mutex_lock(&c->mu);
    int rc = 0;
    const_entry *ce = cmap_find(&c->consts, host);
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
            rc = el_set_error(err, cl_status(e), "OpenCL: clCreateBuffer(USE_HOST_PTR, %zu bytes) failed: %s", bytes,
                              cl_err_name(e));
            goto out;
        }
    } else {
        m = clCreateBuffer(c->ctx, CL_MEM_READ_ONLY, bytes, NULL, &e);
        if (e != CL_SUCCESS) {
            rc = el_set_error(err, cl_status(e), "OpenCL: clCreateBuffer(%zu bytes) for a constant failed: %s", bytes,
                              cl_err_name(e));
            goto out;
        }
        e = clEnqueueWriteBuffer(c->q, m, async ? CL_FALSE : CL_TRUE, 0, bytes, host, 0, NULL, NULL);
        if (e != CL_SUCCESS) {
            clReleaseMemObject(m);
            rc = cl_fail(err, "clEnqueueWriteBuffer (constant upload)", e);
            goto out;
        }
    }
    if (cmap_insert(&c->consts, host, bytes, m) != 0) {
        if (!c->host_ptr) clFinish(c->q); /* the async copy must end before the buffer goes */
        clReleaseMemObject(m);
        rc = el_set_error(err, EL_ERR_NOMEM, "OpenCL: out of host memory for the constant registry");
    }
out:
    pthread_mutex_unlock(&c->mu);
    return rc;
}

/* ---- launching ------------------------------------------------------------- */

#define ARG(k, i, T, v)                                                          \
    do {                                                                         \
        T arg_v_ = (v);                                                          \
        const cl_int arg_e_ = clSetKernelArg((k), (i), sizeof(T), &arg_v_);      \
        if (arg_e_ != CL_SUCCESS) return cl_fail(err, "clSetKernelArg", arg_e_); \
    } while (0)
#define LOCAL(k, i, bytes)                                                       \
    do {                                                                         \
        const cl_int arg_e_ = clSetKernelArg((k), (i), (bytes), NULL);           \
        if (arg_e_ != CL_SUCCESS) return cl_fail(err, "clSetKernelArg", arg_e_); \
    } while (0)

static int enqueue(ocl *c, cl_kernel k, cl_uint dims, const size_t *gws, const size_t *lws, const char *what,
                   el_error *err) {
    for (cl_uint i = 0; i < dims; i++)
        if (gws[i] == 0) return 0; /* nothing to do */
    const cl_int e = clEnqueueNDRangeKernel(c->q, k, dims, NULL, gws, lws, 0, NULL, NULL);
    if (e != CL_SUCCESS) {
        char msg[96];
        snprintf(msg, sizeof msg, "clEnqueueNDRangeKernel(%s)", what);
        return cl_fail(err, msg, e);
    }
    return 0;
}

static int mm_index(el_type t) {
    for (int i = 0; i < MM_NTYPES; i++)
        if (k_mm_types[i] == t) return i;
    return -1;
}

/* y[y0 + t*M + o] = W[o] · activation row t (+ bias), t < n: the rows at
 * byte offset xoff of x, xrow bytes apart, in the weight type's activation
 * format (act_quant's bytes; F32 weights: floats). One work-item per weight
 * row and NT tokens (kernels.cl MM_KERNEL). row1: every row in the
 * arithmetic of a one-row product (the CPU's row order). */
static int launch_matmul(ocl *c, int ti, cl_mem w, size_t row_bytes, int K, int M, cl_mem x, size_t xoff,
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
    return enqueue(c, k, 2, gws, lws, n == 1 ? "matmul n=1" : "matmul", err);
}

/* How the CPU backend converts a matmul's activations for weights of type t
 * (its vec_dot_type; kernels.cl act_quant's mode): 0 none (F32), 1 F16,
 * 2 Q8_0, 3 Q8_K. */
static int act_mode(el_type t) {
    switch (t) {
    case EL_TYPE_F16: return 1;
    case EL_TYPE_Q8_0: case EL_TYPE_Q4_0: case EL_TYPE_Q5_0: return 2;
    case EL_TYPE_Q4_K: case EL_TYPE_Q6_K: return 3;
    default: return 0;
    }
}

/* Bytes of one activation row of K values in mode's format. */
static size_t act_row_bytes(int mode, int K) {
    switch (mode) {
    case 1: return 2 * (size_t)K;
    case 2: return (size_t)(K / 32) * 34;
    case 3: return (size_t)(K / 256) * 292;
    default: return 4 * (size_t)K;
    }
}

/* x (n rows of K floats at x0) converted for mode into c->act (grown as needed). */
static int launch_act_quant(ocl *c, cl_mem x, int x0, int K, int n, int mode, el_error *err) {
    const size_t xrow = act_row_bytes(mode, K);
    const size_t need = xrow * (size_t)n;
    if (need > c->act_cap) {
        if (c->act) clReleaseMemObject(c->act);
        c->act_cap = 0;
        if (!(c->act = alloc_mem(c, need, err))) return err && err->code ? (int)err->code : EL_ERR_NOMEM;
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
    return enqueue(c, k, 1, gws, NULL, "act_quant", err);
}

/* The CPU's RoPE cos/sin for r at positions 0..need-1 (el_op_rope's own code
 * fills them: it is called with no heads to rotate), on the device; NULL
 * with err on failure. Tables grow by doubling; ROPE_TABS configurations are
 * kept, the oldest replaced. */
static cl_mem rope_table(ocl *c, const el_rope *r, int need, el_error *err) {
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
    cl_mem m = alloc_mem(c, bytes, err);
    if (m) {
        const cl_int e = clEnqueueWriteBuffer(c->q, m, CL_TRUE, 0, bytes, host, 0, NULL, NULL);
        if (e != CL_SUCCESS) {
            clReleaseMemObject(m);
            m = NULL;
            cl_fail(err, "clEnqueueWriteBuffer (RoPE table)", e);
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
static cl_mem gelu_table(ocl *c, el_error *err) {
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
    cl_mem m = alloc_mem(c, sizeof(float) << 16, err);
    if (m) {
        const cl_int e = clEnqueueWriteBuffer(c->q, m, CL_TRUE, 0, sizeof(float) << 16, g, 0, NULL, NULL);
        if (e != CL_SUCCESS) {
            clReleaseMemObject(m);
            m = NULL;
            cl_fail(err, "clEnqueueWriteBuffer (GELU table)", e);
        }
    }
    free(g), free(one);
    c->gelu_tab = m;
    return m;
}

/* Attention in the CPU's arithmetic: its one-row kernel's below 64 query
 * rows, its tiled kernel's from 64 (backend/cpu/attention.c's switch). */
static int launch_attention(ocl *c, cl_mem q, int q0, cl_mem o, int o0, cl_mem kc, int k0, cl_mem vc, int v0,
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
    return enqueue(c, k, 2, gws, lws, "attention", err);
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
            if (!w || mm_index(w->type) < 0 || w->ne0 % 32 != 0 || w->ne0 != op->w[0]->ne0 || w->ne1 < 1 ||
                ((w->type == EL_TYPE_Q4_K || w->type == EL_TYPE_Q6_K) && w->ne0 % 256 != 0) ||
                w->ne0 > INT32_MAX || w->ne1 > INT32_MAX)
                return false;
            if ((int64_t)op->n * w->ne0 > INT32_MAX || (int64_t)op->n * w->ne1 > INT32_MAX) return false;
        }
        return true;
    case EL_OPK_RMSNORM: return op->n >= 1 && op->d >= 1;
    case EL_OPK_ROPE: {
        const el_rope *r = &op->p.rope.rope;
        return (r->mode == EL_ROPE_NORM || r->mode == EL_ROPE_NEOX) && r->n_rot > 0 && r->n_rot % 2 == 0 &&
               r->n_rot <= op->p.rope.head_dim && op->p.rope.n_heads > 0;
    }
    case EL_OPK_KV_STORE: return f16_cache(op->p.kv_store.type) && op->p.kv_store.row_len > 0;
    case EL_OPK_ATTENTION: {
        const el_attn_args *a = &op->p.attn.a;
        return f16_cache(a->type_k) && f16_cache(a->type_v) && a->head_dim > 0 && a->head_dim % 8 == 0 &&
               (size_t)a->head_dim <= ATT_DPI * c->att_ls && a->n_head > 0 && a->n_head_kv > 0 &&
               a->n_head % a->n_head_kv == 0 && a->n >= 1;
    }
    case EL_OPK_SCALE:
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
    const const_entry *ce = cmap_find(&c->consts, host);
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
    return enqueue(c, k, 1, gws, NULL, what, err);
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
            const int mode = act_mode(w->type);
            cl_mem xa = a;
            size_t xoff = 4 * (size_t)a0;
            if (mode) {
                if (mode != ready) TRY(launch_act_quant(c, a, a0, (int)w->ne0, op->n, mode, err));
                ready = mode;
                xa = c->act, xoff = 0;
            }
            TRY(launch_matmul(c, mm_index(w->type), wm, w->row_bytes, (int)w->ne0, (int)w->ne1, xa, xoff,
                              act_row_bytes(mode, (int)w->ne0), op->n, y, y0, bm, row1, err));
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
        return enqueue(c, k, 1, gws, lws, "rmsnorm", err);
    }
    case EL_OPK_ROPE: {
        const el_rope *r = &op->p.rope.rope;
        TRY(operand(be, &op->dst[0], 4, "dst0", &y, &y0, err));
        if ((int64_t)op->p.rope.pos0 + op->n > INT32_MAX / 2 || op->p.rope.pos0 < 0)
            return el_set_error(err, EL_ERR_INVALID_ARG, "OpenCL: rope position %d out of range", op->p.rope.pos0);
        cl_mem cs = rope_table(c, r, op->p.rope.pos0 + op->n, err);
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
        return enqueue(c, k, 3, gws, NULL, "rope", err);
    }
    case EL_OPK_SCALE: {
        TRY(operand(be, &op->dst[0], 4, "dst0", &y, &y0, err));
        cl_kernel k = c->k_scale;
        ARG(k, 0, cl_mem, y);
        ARG(k, 1, cl_int, y0);
        ARG(k, 2, cl_float, op->p.scale.s);
        ARG(k, 3, cl_int, op->p.scale.count);
        const size_t gws[1] = {(size_t)(op->p.scale.count > 0 ? op->p.scale.count : 0)};
        return enqueue(c, k, 1, gws, NULL, "scale", err);
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
            cl_mem tab = gelu_table(c, err);
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
        return enqueue(c, k, 2, gws, NULL, "kv_store", err);
    }
    case EL_OPK_ATTENTION: {
        cl_mem kc = NULL, vc = NULL;
        int k0 = 0, v0 = 0;
        TRY(operand(be, &op->src[0], 4, "src0 (q)", &a, &a0, err));
        TRY(operand(be, &op->dst[0], 4, "dst0", &y, &y0, err));
        TRY(operand(be, &op->src[1], 2, "src1 (k cache)", &kc, &k0, err));
        TRY(operand(be, &op->src[2], 2, "src2 (v cache)", &vc, &v0, err));
        return launch_attention(c, a, a0, y, y0, kc, k0, vc, v0, &op->p.attn.a, err);
    }
    case EL_OPK_COPY: {
        TRY(operand(be, &op->src[0], 1, "src0", &a, &a0, err));
        TRY(operand(be, &op->dst[0], 1, "dst0", &y, &y0, err));
        const size_t n = op->src[0].len, so = op->src[0].off, d = op->dst[0].off;
        if (n == 0 || (a == y && so == d)) return 0;
        if (a != y || so + n <= d || d + n <= so) {
            const cl_int e = clEnqueueCopyBuffer(c->q, a, y, so, d, n, 0, NULL, NULL);
            return e == CL_SUCCESS ? 0 : cl_fail(err, "clEnqueueCopyBuffer", e);
        }
        /* overlapping ranges of one buffer (memmove): chunks of the distance,
         * in the order that reads each byte before it is overwritten */
        const size_t dist = so > d ? so - d : d - so;
        for (size_t done = 0; done < n;) {
            const size_t cn = n - done < dist ? n - done : dist;
            const size_t at = so > d ? done : n - done - cn;
            const cl_int e = clEnqueueCopyBuffer(c->q, a, y, so + at, d + at, cn, 0, NULL, NULL);
            if (e != CL_SUCCESS) return cl_fail(err, "clEnqueueCopyBuffer", e);
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
    return e == CL_SUCCESS ? 0 : cl_fail(err, "clFinish", e);
}

/* ---- measure ------------------------------------------------------------------ */

typedef struct bench_bufs {
    cl_mem x, y, w, big;
} bench_bufs;

static cl_mem bench_buf(ocl *c, size_t bytes, const void *init, el_error *err) {
    cl_int e;
    cl_mem m = clCreateBuffer(c->ctx, CL_MEM_READ_WRITE | (init ? CL_MEM_COPY_HOST_PTR : 0), bytes, (void *)init, &e);
    if (e != CL_SUCCESS) {
        cl_fail(err, "clCreateBuffer (measure)", e);
        return NULL;
    }
    return m;
}

static uint32_t bench_rnd(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (uint32_t)(*s >> 16);
}

static int measure_locked(ocl *c, el_device_caps *caps, el_error *err) {
    int rc = 0;
    bench_bufs b = {0};
    float *host = NULL;
    void *wq = NULL;
    /* matmul: n = 32 tokens x K = 1024 against M = 256 rows, per weight type */
    enum { N = 32, K = 1024, M = 256, YF = 16384 /* floats of y: N*M, the attention's 16x8x128, read_bw's groups*ls */ };
    const size_t big_bytes = 32u << 20; /* 32 MiB: read bandwidth and copies */
    host = malloc(big_bytes);
    wq = malloc((size_t)M * K * 4);
    if (!host || !wq) {
        rc = el_set_error(err, EL_ERR_NOMEM, "OpenCL: measure: out of host memory");
        goto done;
    }
    uint64_t s = 0x243F6A8885A308D3ull;
    const size_t nf = big_bytes / 4;
    for (size_t i = 0; i < nf; i++) host[i] = (float)bench_rnd(&s) / 4294967296.0f - 0.5f;
    if (!(b.x = bench_buf(c, (size_t)N * K * 4, host, err)) || !(b.y = bench_buf(c, (size_t)YF * 4, NULL, err)) ||
        !(b.big = bench_buf(c, big_bytes, NULL, err))) {
        rc = err ? err->code : EL_ERR_INTERNAL;
        goto done;
    }
    double best_mm = 0;
    for (int ti = 0; ti < MM_NTYPES; ti++) {
        const el_type t = k_mm_types[ti];
        const size_t rb = el_row_size(t, K);
        if (el_quantize_rows(t, host, wq, M, K) == 0) continue;
        if (b.w) clReleaseMemObject(b.w);
        if (!(b.w = bench_buf(c, rb * M, wq, err))) {
            rc = err ? err->code : EL_ERR_INTERNAL;
            goto done;
        }
        double best = 1e30;
        for (int it = 0; it < 3; it++) { /* the first run warms up */
            const double t0 = now_ms();
            if ((rc = launch_matmul(c, ti, b.w, rb, K, M, b.x, 0, act_row_bytes(act_mode(t), K), N, b.y, 0, NULL, false, err)) != 0)
                goto done;
            cl_int e = clFinish(c->q);
            if (e != CL_SUCCESS) {
                rc = cl_fail(err, "clFinish", e);
                goto done;
            }
            const double dt = now_ms() - t0;
            if (it > 0 && dt < best) best = dt;
        }
        caps->matmul_gflops_type[t] = 2.0 * N * K * M / (best * 1e6);
        if (caps->matmul_gflops_type[t] > best_mm) best_mm = caps->matmul_gflops_type[t];
    }
    caps->matmul_gflops = best_mm;

    /* host -> device and back: 32 MiB blocking copies */
    {
        cl_int e;
        double t0 = now_ms();
        if ((e = clEnqueueWriteBuffer(c->q, b.big, CL_TRUE, 0, big_bytes, host, 0, NULL, NULL)) != CL_SUCCESS) {
            rc = cl_fail(err, "clEnqueueWriteBuffer (measure)", e);
            goto done;
        }
        caps->h2d_gbps = big_bytes / ((now_ms() - t0) * 1e6);
        t0 = now_ms();
        if ((e = clEnqueueReadBuffer(c->q, b.big, CL_TRUE, 0, big_bytes, host, 0, NULL, NULL)) != CL_SUCCESS) {
            rc = cl_fail(err, "clEnqueueReadBuffer (measure)", e);
            goto done;
        }
        caps->d2h_gbps = big_bytes / ((now_ms() - t0) * 1e6);
    }
    /* a one-row product (a decode step): 8192 rows of 1024 Q8_0 weights (8.9 MB of `big`, whatever its
     * bytes mean as blocks) streamed for one token; the weight bytes per second */
    {
        const size_t rb = el_row_size(EL_TYPE_Q8_0, 1024);
        const int m1 = 8192;
        double best = 1e30;
        for (int it = 0; it < 3; it++) {
            const double t0 = now_ms();
            if ((rc = launch_matmul(c, MM_Q8_0, b.big, rb, 1024, m1, b.x, 0, rb, 1, b.y, 0, NULL, false, err)) != 0) goto done;
            cl_int e = clFinish(c->q);
            if (e != CL_SUCCESS) {
                rc = cl_fail(err, "clFinish", e);
                goto done;
            }
            const double dt = now_ms() - t0;
            if (it > 0 && dt < best) best = dt;
        }
        caps->matmul1_gbps = (double)rb * m1 / (best * 1e6);
    }
    /* device read bandwidth: the read_bw kernel over the 32 MiB */
    {
        cl_kernel k = c->k_read_bw;
        const int n4 = (int)(big_bytes / 16), groups = 64, chunk = (n4 + groups - 1) / groups;
        const size_t ls = c->mm_ls > 64 ? 64 : c->mm_ls;
        double best = 1e30;
        for (int it = 0; it < 3; it++) {
            ARG(k, 0, cl_mem, b.big);
            ARG(k, 1, cl_int, n4);
            ARG(k, 2, cl_int, chunk);
            ARG(k, 3, cl_mem, b.y); /* YF floats >= groups*ls (ls <= 64) */
            const size_t gws[1] = {ls * groups}, lws[1] = {ls};
            const double t0 = now_ms();
            if ((rc = enqueue(c, k, 1, gws, lws, "read_bw", err)) != 0) goto done;
            cl_int e = clFinish(c->q);
            if (e != CL_SUCCESS) {
                rc = cl_fail(err, "clFinish", e);
                goto done;
            }
            const double dt = now_ms() - t0;
            if (it > 0 && dt < best) best = dt;
        }
        caps->mem_gbps = big_bytes / (best * 1e6);
    }
    /* other ops: attention of 16 queries x 8 heads (hd 128) over 256 cached rows */
    {
        el_attn_args a = {.n = 16, .pos0 = 240, .n_head = 8, .n_head_kv = 8, .head_dim = 128, .scale = 0.088f};
        /* the K and V caches are the first 256 rows of `big` read as F16 (random floats' bit patterns are
         * not all finite halves, so write F16 ones first) */
        const size_t rows = 256, row = (size_t)a.n_head_kv * a.head_dim;
        uint16_t *hk = (uint16_t *)wq;
        for (size_t i = 0; i < rows * row * 2; i++) hk[i] = (uint16_t)(0x3000 + (bench_rnd(&s) & 0x7ff)); /* 0.125..0.25 */
        cl_int e = clEnqueueWriteBuffer(c->q, b.big, CL_TRUE, 0, rows * row * 4, hk, 0, NULL, NULL);
        if (e != CL_SUCCESS) {
            rc = cl_fail(err, "clEnqueueWriteBuffer (measure)", e);
            goto done;
        }
        double best = 1e30;
        for (int it = 0; it < 3; it++) {
            const double t0 = now_ms();
            if ((rc = launch_attention(c, b.x, 0, b.y, 0, b.big, 0, b.big, (int)(rows * row), &a, err)) != 0)
                goto done;
            if ((e = clFinish(c->q)) != CL_SUCCESS) {
                rc = cl_fail(err, "clFinish", e);
                goto done;
            }
            const double dt = now_ms() - t0;
            if (it > 0 && dt < best) best = dt;
        }
        double fl = 0;
        for (int t = 0; t < a.n; t++) fl += 4.0 * a.n_head * a.head_dim * (a.pos0 + t + 1);
        caps->gflops = fl / (best * 1e6);
    }
    /* per-launch overhead: 200 tiny launches */
    {
        cl_kernel k = c->k_scale;
        ARG(k, 0, cl_mem, b.y);
        ARG(k, 1, cl_int, 0);
        ARG(k, 2, cl_float, 1.0f);
        ARG(k, 3, cl_int, 1);
        const size_t gws[1] = {1};
        if ((rc = enqueue(c, k, 1, gws, NULL, "scale", err)) != 0) goto done;
        clFinish(c->q);
        const double t0 = now_ms();
        for (int i = 0; i < 200; i++)
            if ((rc = enqueue(c, k, 1, gws, NULL, "scale", err)) != 0) goto done;
        cl_int e = clFinish(c->q);
        if (e != CL_SUCCESS) {
            rc = cl_fail(err, "clFinish", e);
            goto done;
        }
        caps->launch_us = (now_ms() - t0) * 1e3 / 200;
        /* a boundary's round trip: a tiny op, then its result read back (blocking) */
        float back = 0;
        const double t1 = now_ms();
        for (int i = 0; i < 20; i++) {
            if ((rc = enqueue(c, k, 1, gws, NULL, "scale", err)) != 0) goto done;
            if ((e = clEnqueueReadBuffer(c->q, b.y, CL_TRUE, 0, sizeof back, &back, 0, NULL, NULL)) != CL_SUCCESS) {
                rc = cl_fail(err, "clEnqueueReadBuffer (measure)", e);
                goto done;
            }
        }
        caps->sync_us = (now_ms() - t1) * 1e3 / 20;
    }
done:
    if (b.x) clReleaseMemObject(b.x);
    if (b.y) clReleaseMemObject(b.y);
    if (b.w) clReleaseMemObject(b.w);
    if (b.big) clReleaseMemObject(b.big);
    free(host);
    free(wq);
    return rc;
}

static int ocl_measure(el_backend *be, el_device_caps *caps, el_error *err) {
    ocl *c = ctx_of(be);
    if (!caps) return el_set_error(err, EL_ERR_INVALID_ARG, "OpenCL: measure(NULL)");
    pthread_mutex_lock(&c->mu);
    const int rc = measure_locked(c, caps, err);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

/* ---- lifetime ------------------------------------------------------------------ */

static void ocl_destroy(ocl *c) {
    if (!c) return;
    if (c->q) clFinish(c->q);
    for (size_t i = 0; i < c->consts.cap; i++)
        if (c->consts.e[i].host) clReleaseMemObject(c->consts.e[i].mem);
    free(c->consts.e);
    free_kernels(c);
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
        cl_fail(err, "clCreateContext", e);
        goto fail;
    }
    c->q = clCreateCommandQueue(c->ctx, dev, 0, &e);
    if (e != CL_SUCCESS) {
        cl_fail(err, "clCreateCommandQueue", e);
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
        cl_fail(err, "clGetDeviceInfo", e);
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
        dev_str(dev, CL_DEVICE_EXTENSIONS, ext, sizeof ext);
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
        cl_fail(err, "clCreateBuffer", e);
        goto fail;
    }
    if (build_program(c, err) != 0) goto fail;
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
    dev_str(dev, CL_DEVICE_NAME, dname, sizeof dname);
    dev_str(dev, CL_DEVICE_VENDOR, vendor, sizeof vendor);
    dev_str(dev, CL_DRIVER_VERSION, dver, sizeof dver);
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
    for (int t = 0; t < MM_NTYPES; t++) caps->matmul_types |= 1ull << k_mm_types[t];
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
