/*
 * model_backends.c — the backends of a loaded model (runtime/model.h,
 * el_backends_open / el_backends_close): the CPU always at index 0, then what
 * el_backend_params asks for (opencl, opencl:N, auto, or the test-only
 * cpu,cpu pair), each with its capability table from the device cache or
 * measured. A device that cannot be had is a clean fallback to the CPU,
 * logged and noted in m->backend_note. The executor (runtime/exec.c) places
 * ops on these; this file knows nothing of it.
 */
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "runtime/model.h"
#include "sched/devcache.h"
#include "sched/placement.h"
#include "util/error.h"

/* The rates of a capability table: from the cache file, else measured and stored. */
static void caps_rates(el_model *m, el_backend *be) {
    el_device_caps c;
    if (el_devcache_load(be->cache_key, &c) == 1) {
        el_logf(m, EL_LOG_INFO, "%s: capability table from the cache", be->caps.name);
    } else {
        memset(&c, 0, sizeof c);
        el_error e = {0};
        if (!be->i->measure || be->i->measure(be, &c, &e)) {
            el_logf(m, EL_LOG_WARN, "%s: measuring its capabilities failed (%s); planning with nominal rates",
                    be->caps.name, e.msg[0] ? e.msg : "no microbenchmark");
            c.matmul_gflops = c.gflops = 1.0, c.mem_gbps = c.h2d_gbps = c.d2h_gbps = 1.0, c.launch_us = 10.0;
        } else {
            el_devcache_store(be->cache_key, &c);
            el_logf(m, EL_LOG_INFO, "%s: measured %.1f GFLOP/s matmul, %.1f GB/s memory, %.1f/%.1f GB/s copies, %.1f us per op",
                    be->caps.name, c.matmul_gflops, c.mem_gbps, c.h2d_gbps, c.d2h_gbps, c.launch_us);
        }
    }
    el_device_caps *k = &be->caps;
    k->matmul_gflops = c.matmul_gflops;
    memcpy(k->matmul_gflops_type, c.matmul_gflops_type, sizeof k->matmul_gflops_type);
    k->gflops = c.gflops, k->mem_gbps = c.mem_gbps, k->h2d_gbps = c.h2d_gbps, k->d2h_gbps = c.d2h_gbps;
    k->launch_us = c.launch_us;
    k->matmul1_gbps = c.matmul1_gbps;
    k->sync_us = c.sync_us;
}

static void add_backend(el_model *m, el_backend *be) {
    be->index = m->n_be;
    m->be[m->n_be++] = be;
}

static void add_opencl(el_model *m, int dev) {
    el_error e = {0};
    el_backend *be = el_backend_opencl_new(dev, &e);
    if (!be) {
        const size_t l = strlen(m->backend_note);
        snprintf(m->backend_note + l, sizeof m->backend_note - l, "%sopencl%d unavailable (%s): its ops run on the cpu",
                 l ? "; " : "", dev, e.msg);
        el_logf(m, EL_LOG_WARN, "opencl device %d unavailable: %s; running on the cpu", dev, e.msg);
        return;
    }
    add_backend(m, be);
}

int el_backends_open(el_model *m, const el_backend_params *bp, el_error *err) {
    el_backend *cpu = el_backend_cpu_new(m->pool, err);
    if (!cpu) return err && err->code ? err->code : EL_ERR_NOMEM;
    add_backend(m, cpu);
    m->sched = el_sched_default_params();
    const char *req = bp && bp->backend && bp->backend[0] ? bp->backend : "cpu";
    snprintf(m->backend_req, sizeof m->backend_req, "%s", req);
    m->measure = bp && bp->measure;
    if (bp && bp->tax_budget > 0) m->sched.tax_budget = bp->tax_budget;
    if (bp && bp->tolerance > 0) m->sched.tolerance = bp->tolerance;
    if (strcmp(req, "cpu") == 0) {
    } else if (strncmp(req, "opencl", 6) == 0 && (req[6] == 0 || req[6] == ':')) {
        char *end = NULL;
        const long dev = req[6] ? strtol(req + 7, &end, 10) : 0;
        if (req[6] && (end == req + 7 || *end || dev < 0 || dev > 64))
            return el_set_error(err, EL_ERR_INVALID_ARG, "backend '%s': expected opencl or opencl:N", req);
        add_opencl(m, (int)dev);
        if (m->n_be > 1) m->sched.force = 1;
    } else if (strcmp(req, "auto") == 0) {
        const int n = el_backend_opencl_count();
        for (int k = 0; k < n && m->n_be < EL_MAX_BACKENDS; k++) add_opencl(m, k);
        if (n == 0) snprintf(m->backend_note, sizeof m->backend_note, "auto: no OpenCL device found: every op runs on the cpu");
    } else if (strcmp(req, "cpu,cpu") == 0) {
        /* a second CPU backend with buffers of its own: the executor's moves with
         * the CPU's arithmetic (tests compare the bits with the CPU alone) */
        el_backend *b = el_backend_cpu_new(m->pool, err);
        if (!b) return err && err->code ? err->code : EL_ERR_NOMEM;
        snprintf(b->caps.name, sizeof b->caps.name, "cpu1");
        /* EL_CPU1_OPS="matmul,attention,...": the op kinds it takes (default all) */
        const char *lim = getenv("EL_CPU1_OPS");
        if (lim && *lim) {
            uint32_t ops = 0;
            char list[256];
            snprintf(list, sizeof list, "%s", lim);
            for (char *save = NULL, *nm = strtok_r(list, ",", &save); nm; nm = strtok_r(NULL, ",", &save)) {
                const int k = el_op_kind_parse(nm); /* the names of the --devices tables */
                if (k >= 0) ops |= 1u << k;
            }
            el_backend_cpu_limit(b, ops);
        }
        /* EL_CPU1_FAIL_AFTER=N: it fails at its N+1th op (the run-time fallback's test) */
        const char *fa = getenv("EL_CPU1_FAIL_AFTER");
        if (fa && *fa) el_backend_cpu_fail_after(b, strtol(fa, NULL, 10));
        add_backend(m, b);
        m->sched.force = 1;
    } else {
        return el_set_error(err, EL_ERR_INVALID_ARG, "backend '%s': expected cpu, opencl, opencl:N or auto", req);
    }
    if (bp && bp->prefer && bp->prefer[0]) {
        int k = -1;
        for (int b = 0; b < m->n_be; b++)
            if (strcmp(m->be[b]->caps.name, bp->prefer) == 0) k = b;
        if (k < 0) {
            char have[160] = "";
            for (int b = 0; b < m->n_be; b++) {
                const size_t l = strlen(have);
                snprintf(have + l, sizeof have - l, "%s%s", b ? ", " : "", m->be[b]->caps.name);
            }
            return el_set_error(err, EL_ERR_INVALID_ARG, "prefer '%s': no such device (have: %s)", bp->prefer, have);
        }
        m->sched.prefer = k;
    }
    if (m->n_be > 1 || m->measure)
        for (int b = 0; b < m->n_be; b++) caps_rates(m, m->be[b]);
    return 0;
}

void el_backends_close(el_model *m) {
    for (int b = m->n_be - 1; b >= 0; b--) el_backend_free(m->be[b]);
    m->n_be = 0;
}

