/*
 * measure.c — the OpenCL backend's benchmarks (measure.h): matmul per weight
 * type, a one-row product, read bandwidth, copies both ways, attention, the
 * launch and round-trip overheads.
 */
#include <stdint.h>
#include <stdlib.h>

#include "backend/opencl/launch.h"
#include "backend/opencl/measure.h"
#include "package/quantize.h"

typedef struct bench_bufs {
    cl_mem x, y, w, big;
} bench_bufs;

static cl_mem bench_buf(ocl *c, size_t bytes, const void *init, el_error *err) {
    cl_int e;
    cl_mem m = clCreateBuffer(c->ctx, CL_MEM_READ_WRITE | (init ? CL_MEM_COPY_HOST_PTR : 0), bytes, (void *)init, &e);
    if (e != CL_SUCCESS) {
        el_ocl_fail(err, "clCreateBuffer (measure)", e);
        return NULL;
    }
    return m;
}

/* Waits for run `it` of a timed loop begun at t0; from the second run on
 * (the first warms up) its time counts toward the best, *best. 0, or the
 * clFinish error. */
static int timed_finish(ocl *c, int it, double t0, double *best, el_error *err) {
    const cl_int e = clFinish(c->q);
    if (e != CL_SUCCESS) return el_ocl_fail(err, "clFinish", e);
    const double dt = el_ocl_now_ms() - t0;
    if (it > 0 && dt < *best) *best = dt;
    return 0;
}

static uint32_t bench_rnd(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (uint32_t)(*s >> 16);
}

int el_ocl_measure_locked(ocl *c, el_device_caps *caps, el_error *err) {
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
        const el_type t = el_ocl_mm_types[ti];
        const size_t rb = el_row_size(t, K);
        if (el_quantize_rows(t, host, wq, M, K) == 0) continue;
        if (b.w) clReleaseMemObject(b.w);
        if (!(b.w = bench_buf(c, rb * M, wq, err))) {
            rc = err ? err->code : EL_ERR_INTERNAL;
            goto done;
        }
        double best = 1e30;
        for (int it = 0; it < 3; it++) { /* the first run warms up */
            const size_t xrow = el_ocl_act_row_bytes(el_ocl_act_mode(t), K);
            const double t0 = el_ocl_now_ms();
            if ((rc = el_ocl_launch_matmul(c, ti, b.w, rb, K, M, b.x, 0, xrow, N, b.y, 0, NULL, false, err)) != 0)
                goto done;
            if ((rc = timed_finish(c, it, t0, &best, err)) != 0) goto done;
        }
        caps->matmul_gflops_type[t] = 2.0 * N * K * M / (best * 1e6);
        if (caps->matmul_gflops_type[t] > best_mm) best_mm = caps->matmul_gflops_type[t];
    }
    caps->matmul_gflops = best_mm;

    /* host -> device and back: 32 MiB blocking copies */
    {
        cl_int e;
        double t0 = el_ocl_now_ms();
        if ((e = clEnqueueWriteBuffer(c->q, b.big, CL_TRUE, 0, big_bytes, host, 0, NULL, NULL)) != CL_SUCCESS) {
            rc = el_ocl_fail(err, "clEnqueueWriteBuffer (measure)", e);
            goto done;
        }
        caps->h2d_gbps = big_bytes / ((el_ocl_now_ms() - t0) * 1e6);
        t0 = el_ocl_now_ms();
        if ((e = clEnqueueReadBuffer(c->q, b.big, CL_TRUE, 0, big_bytes, host, 0, NULL, NULL)) != CL_SUCCESS) {
            rc = el_ocl_fail(err, "clEnqueueReadBuffer (measure)", e);
            goto done;
        }
        caps->d2h_gbps = big_bytes / ((el_ocl_now_ms() - t0) * 1e6);
    }
    /* a one-row product (a decode step): 8192 rows of 1024 Q8_0 weights (8.9 MB of `big`, whatever its
     * bytes mean as blocks) streamed for one token; the weight bytes per second */
    {
        const size_t rb = el_row_size(EL_TYPE_Q8_0, 1024);
        const int m1 = 8192;
        double best = 1e30;
        for (int it = 0; it < 3; it++) {
            const double t0 = el_ocl_now_ms();
            if ((rc = el_ocl_launch_matmul(c, MM_Q8_0, b.big, rb, 1024, m1, b.x, 0, rb, 1, b.y, 0, NULL, false, err)) != 0)
                goto done;
            if ((rc = timed_finish(c, it, t0, &best, err)) != 0) goto done;
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
            const double t0 = el_ocl_now_ms();
            if ((rc = el_ocl_enqueue(c, k, 1, gws, lws, "read_bw", err)) != 0) goto done;
            if ((rc = timed_finish(c, it, t0, &best, err)) != 0) goto done;
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
            rc = el_ocl_fail(err, "clEnqueueWriteBuffer (measure)", e);
            goto done;
        }
        double best = 1e30;
        for (int it = 0; it < 3; it++) {
            const double t0 = el_ocl_now_ms();
            if ((rc = el_ocl_launch_attention(c, b.x, 0, b.y, 0, b.big, 0, b.big, (int)(rows * row), &a, err)) != 0)
                goto done;
            if ((rc = timed_finish(c, it, t0, &best, err)) != 0) goto done;
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
        if ((rc = el_ocl_enqueue(c, k, 1, gws, NULL, "scale", err)) != 0) goto done;
        clFinish(c->q);
        const double t0 = el_ocl_now_ms();
        for (int i = 0; i < 200; i++)
            if ((rc = el_ocl_enqueue(c, k, 1, gws, NULL, "scale", err)) != 0) goto done;
        cl_int e = clFinish(c->q);
        if (e != CL_SUCCESS) {
            rc = el_ocl_fail(err, "clFinish", e);
            goto done;
        }
        caps->launch_us = (el_ocl_now_ms() - t0) * 1e3 / 200;
        /* a boundary's round trip: a tiny op, then its result read back (blocking) */
        float back = 0;
        const double t1 = el_ocl_now_ms();
        for (int i = 0; i < 20; i++) {
            if ((rc = el_ocl_enqueue(c, k, 1, gws, NULL, "scale", err)) != 0) goto done;
            if ((e = clEnqueueReadBuffer(c->q, b.y, CL_TRUE, 0, sizeof back, &back, 0, NULL, NULL)) != CL_SUCCESS) {
                rc = el_ocl_fail(err, "clEnqueueReadBuffer (measure)", e);
                goto done;
            }
        }
        caps->sync_us = (el_ocl_now_ms() - t1) * 1e3 / 20;
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
