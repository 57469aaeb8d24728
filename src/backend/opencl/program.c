/*
 * program.c — the OpenCL backend's program and kernels (program.h): kernels.cl
 * built from source or loaded from the binary cache.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/opencl/bincache.h"
#include "backend/opencl/clutil.h"
#include "backend/opencl/program.h"

extern const char el_opencl_kernels_src[];
extern const size_t el_opencl_kernels_src_len;

static const char *k_kernel_names[] = {"rmsnorm",  "rope",      "scale_f32",       "add_f32", "silu_mul", "gelu_mul",
                                       "kv_store", "attention", "attention_tiled", "read_bw", "act_quant"};

static int make_kernels(ocl *c, el_error *err) {
    cl_int e;
    char name[32];
    for (int t = 0; t < MM_NTYPES; t++) {
        snprintf(name, sizeof name, "mm_%s", el_ocl_mm_names[t]);
        c->mm[t] = clCreateKernel(c->prog, name, &e);
        if (e != CL_SUCCESS) return el_set_error(err, EL_ERR_INTERNAL, "OpenCL: clCreateKernel(%s) failed: %s", name, el_ocl_err_name(e));
    }
    cl_kernel *ks[] = {&c->k_rmsnorm, &c->k_rope,       &c->k_scale,   &c->k_add, &c->k_silu, &c->k_gelu,
                       &c->k_kv_store, &c->k_attn, &c->k_attn_tiled, &c->k_read_bw, &c->k_act};
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
        *ks[i] = clCreateKernel(c->prog, k_kernel_names[i], &e);
        if (e != CL_SUCCESS)
            return el_set_error(err, EL_ERR_INTERNAL, "OpenCL: clCreateKernel(%s) failed: %s", k_kernel_names[i], el_ocl_err_name(e));
    }
    return 0;
}

void el_ocl_free_kernels(ocl *c) {
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
    if (e != CL_SUCCESS) return el_ocl_fail(err, "clCreateProgramWithSource", e);
    e = clBuildProgram(c->prog, 1, &c->dev, opts, NULL, NULL);
    if (e != CL_SUCCESS) {
        char log[300];
        build_log(c, log, sizeof log);
        return el_set_error(err, EL_ERR_UNSUPPORTED, "OpenCL: clBuildProgram failed: %s (%d) with options \"%s\"%s%s",
                            el_ocl_err_name(e), (int)e, opts, log[0] ? ": " : "", log);
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

int el_ocl_build_program(ocl *c, el_error *err) {
    char opts[1024];
    const char *extra = getenv("EL_OPENCL_BUILD_OPTIONS");
    /* correctly rounded division and sqrt: the CPU's (RMSNorm's scale, the softmax's 1/S) */
    snprintf(opts, sizeof opts, "-cl-std=CL1.2 -cl-fp32-correctly-rounded-divide-sqrt -DNT=%d -DATT_DPI=%d%s%s", MM_NT,
             ATT_DPI, extra && *extra ? " " : "", extra && *extra ? extra : "");

    char dname[256], dver[256], pver[256];
    el_ocl_dev_str(c->dev, CL_DEVICE_NAME, dname, sizeof dname);
    el_ocl_dev_str(c->dev, CL_DRIVER_VERSION, dver, sizeof dver);
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

    const double t0 = el_ocl_now_ms();
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
                c->info.build_ms = el_ocl_now_ms() - t0;
                return 0;
            }
            /* a binary the driver refuses: build from source and replace it */
            el_ocl_free_kernels(c);
            if (c->prog) clReleaseProgram(c->prog);
            c->prog = NULL;
        }
    }
    if (build_from_source(c, opts, err) != 0) return -1;
    if (make_kernels(c, err) != 0) return -1;
    c->info.build_ms = el_ocl_now_ms() - t0;
    if (c->info.cache_path[0]) {
        size_t blen = 0;
        uint8_t *bin = program_binary(c, &blen);
        if (bin && el_clbin_store(c->info.cache_path, key, bin, blen) == 0) c->info.cache_written = true;
        free(bin);
    }
    return 0;
}
