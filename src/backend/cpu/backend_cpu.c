/*
 * backend_cpu.c — the CPU backend behind backend.h: the kernels of
 * backend/cpu/ (ops.h) on host memory, split across the model's thread pool.
 *
 * Every op kind runs here (it is the fallback of every other backend), with
 * the arithmetic the CPU kernels always had: an op is exactly the el_op_*
 * call the forward passes used to make. Operands: the backend at index 0 (the
 * session's CPU backend) reads tensors' host copies; another instance (index
 * > 0, used to test the executor's moves between backends with the same
 * arithmetic) has buffers of its own, allocated here. Constants are read where
 * they are mapped (no upload). run() is synchronous; sync() has nothing to wait for.
 *
 * Also: el_op_cost (flops and bytes per kind), el_op_weights_in.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "backend/cpu/lora_kernels.h"
#include "backend/cpu/membw.h"
#include "util/error.h"

bool el_op_weights_in(const el_op *op, uint64_t type_mask) {
    for (int i = 0; i < op->n_w; i++)
        if (!op->w[i] || (unsigned)op->w[i]->type >= 64 || !(type_mask >> op->w[i]->type & 1)) return false;
    return true;
}

static double tref_bytes(const el_tref *r) { return r->t ? (double)r->len : 0.0; }

void el_op_cost(el_op *op) {
    double in = 0, out = 0, w = 0, fl = 0;
    for (int i = 0; i < 3; i++) in += tref_bytes(&op->src[i]), out += tref_bytes(&op->dst[i]);
    const double n = op->n, d = op->d;
    switch (op->kind) {
    case EL_OPK_MATMUL:
        for (int i = 0; i < op->n_w; i++) {
            w += (double)op->w[i]->ne1 * (double)op->w[i]->row_bytes;
            fl += 2.0 * n * (double)op->w[i]->ne0 * (double)op->w[i]->ne1;
        }
        break;
    case EL_OPK_GET_ROWS:
        w = n * (double)op->w[0]->row_bytes; /* the rows read, not the table */
        fl = n * d;
        break;
    case EL_OPK_RMSNORM: fl = 4.0 * n * d; break;
    case EL_OPK_ROPE: fl = 6.0 * (double)op->p.rope.n_heads * op->p.rope.head_dim * n; in = 0; break; /* in place */
    case EL_OPK_SCALE: fl = (op->p.scale.cap > 0.0f ? 20.0 : 1.0) * op->p.scale.count; break;
    case EL_OPK_FWHT: fl = n * d * log2(d > 1 ? d : 2); break;
    case EL_OPK_KV_STORE: fl = n * d; break;
    case EL_OPK_ATTENTION: {
        /* each query row at position p reads the visible cache rows: Q·K and P·V per head */
        const el_attn_args *a = &op->p.attn.a;
        double rows = 0;
        for (int t = 0; t < a->n; t++) {
            const int p = a->pos0 + t;
            const int lo = a->window > 0 && p - a->window + 1 > 0 ? p - a->window + 1 : 0;
            rows += p - lo + 1;
        }
        fl = 4.0 * rows * a->n_head * a->head_dim;
        /* the cache bytes read: every visible row once per KV head group (a row is read by all its heads' queries
         * in one pass), counted against the last query's span */
        const int p_last = a->pos0 + a->n - 1;
        const int lo = a->window > 0 && p_last - a->window + 1 > 0 ? p_last - a->window + 1 : 0;
        const double span = p_last - lo + 1;
        in = tref_bytes(&op->src[0]) + span * (double)(op->src[1].t ? el_row_size((el_type)a->type_k, (int64_t)a->n_head_kv * a->head_dim) : 0) +
             span * (double)(op->src[2].t ? el_row_size((el_type)a->type_v, (int64_t)a->n_head_kv * a->head_dim) : 0);
        break;
    }
    case EL_OPK_SILU_MUL: fl = 5.0 * n * d; break;
    case EL_OPK_GELU_MUL: case EL_OPK_ADD: fl = 2.0 * op->p.elt.count; break;
    case EL_OPK_LORA: /* per term: A·x then B·(A·x), the scale and the add */
        for (int k = 0; k < op->p.lora.n_term; k++) {
            const el_mat *A = op->p.lora.term[k].a, *B = op->p.lora.term[k].b;
            w += (double)A->ne1 * (double)A->row_bytes + (double)B->ne1 * (double)B->row_bytes;
            fl += 2.0 * n * (double)A->ne1 * ((double)A->ne0 + (double)B->ne1) + 2.0 * n * (double)B->ne1;
        }
        break;
    case EL_OPK_MOE: { /* the chosen experts' weights, read once (each row picks n_used of n_expert) */
        const el_moe *m = op->p.moe.moe;
        const double per = (double)m->gate.ne1 * (double)m->gate.row_bytes + (double)m->up.ne1 * (double)m->up.row_bytes +
                           (double)m->down.ne1 * (double)m->down.row_bytes;
        const double chosen = n * m->n_used < m->n_expert ? n * m->n_used : m->n_expert;
        w = (double)m->router.ne1 * (double)m->router.row_bytes + chosen * per;
        fl = 2.0 * n * d * (double)m->router.ne1 + 2.0 * n * m->n_used * 3.0 * d * (double)m->gate.ne1;
        if (m->has_shared) {
            w += (double)m->sh_gate.ne1 * m->sh_gate.row_bytes * 2.0 + (double)m->sh_down.ne1 * m->sh_down.row_bytes +
                 (double)m->sh_inp.row_bytes;
            fl += 2.0 * n * d * (3.0 * (double)m->sh_gate.ne1 + 1.0);
        }
        break;
    }
    case EL_OPK_COPY: case EL_OPK_HOST: case EL_OPK_COUNT: break;
    }
    /* in-place ops read what they write */
    if (op->kind == EL_OPK_ROPE || op->kind == EL_OPK_SCALE || op->kind == EL_OPK_FWHT || op->kind == EL_OPK_SILU_MUL ||
        op->kind == EL_OPK_GELU_MUL || op->kind == EL_OPK_ADD || op->kind == EL_OPK_LORA)
        in += tref_bytes(&op->dst[0]);
    op->flops = fl, op->bytes_w = w, op->bytes_in = in, op->bytes_out = out;
}

/* ---- the backend ------------------------------------------------------- */

typedef struct cpu_ctx {
    el_pool *pool;
    uint32_t ops; /* op kinds it takes (an instance at index > 0 may be limited: EL_CPU1_OPS) */
    long fail_after; /* > 0: run() fails once this many ops have run (a device failing mid-pass, for tests) */
    long ran;
} cpu_ctx;

static void *base_of(const el_backend *be, const el_tensor *t) { return be->index == 0 ? t->host : t->dev[be->index]; }
static float *F(const el_backend *be, const el_tref *r) { return (float *)((char *)base_of(be, r->t) + r->off); }

static void cpu_free(el_backend *be) {
    if (!be) return;
    free(be->ctx);
    free(be);
}

static void *cpu_buf_alloc(el_backend *be, size_t bytes, el_error *err) {
    (void)be;
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes ? bytes : 64)) {
        el_set_error(err, EL_ERR_NOMEM, "cpu buffer of %zu bytes: out of memory", bytes);
        return NULL;
    }
    return p;
}
static void cpu_buf_free(el_backend *be, void *buf) { (void)be, free(buf); }
static int cpu_buf_write(el_backend *be, void *buf, size_t off, const void *src, size_t n, el_error *err) {
    (void)be, (void)err;
    memcpy((char *)buf + off, src, n);
    return 0;
}
static int cpu_buf_read(el_backend *be, void *buf, size_t off, void *dst, size_t n, el_error *err) {
    (void)be, (void)err;
    memcpy(dst, (const char *)buf + off, n);
    return 0;
}
static bool cpu_supports(el_backend *be, const el_op *op) {
    if (op->kind == EL_OPK_HOST) return be->index == 0;
    if (be->index > 0 && !(((cpu_ctx *)be->ctx)->ops >> op->kind & 1)) return false;
    return (unsigned)op->kind < EL_OPK_COUNT;
}

static int cpu_run_op(el_backend *be, const el_op *op, el_error *err) {
    cpu_ctx *cc = be->ctx;
    el_pool *pool = cc->pool;
    if (cc->fail_after > 0 && ++cc->ran > cc->fail_after)
        return el_set_error(err, EL_ERR_INTERNAL, "%s: injected failure after %ld ops", be->caps.name, cc->fail_after);
    switch (op->kind) {
    case EL_OPK_GET_ROWS: {
        float *out = F(be, &op->dst[0]);
        for (int t = 0; t < op->n; t++) {
            el_op_get_row(op->w[0], op->p.get_rows.toks[t], out + (size_t)t * op->d);
            if (op->p.get_rows.scale != 1.0f) el_op_scale(out + (size_t)t * op->d, op->p.get_rows.scale, op->d);
        }
        return 0;
    }
    case EL_OPK_RMSNORM:
        el_op_rmsnorm(F(be, &op->src[0]), op->vec[0], F(be, &op->dst[0]), op->n, op->d, op->p.rmsnorm.eps);
        return 0;
    case EL_OPK_MATMUL:
        if (op->n_w == 1) {
            el_op_matmul(pool, op->w[0], F(be, &op->src[0]), op->n, F(be, &op->dst[0]), op->vec[0], op->cpu_scratch);
        } else {
            float *y[3] = {0};
            for (int i = 0; i < op->n_w; i++) y[i] = F(be, &op->dst[i]);
            el_op_matmul_n(pool, op->n_w, op->w, F(be, &op->src[0]), op->n, y, op->vec, op->cpu_scratch);
        }
        return 0;
    case EL_OPK_ROPE: {
        float cs[EL_ROPE_CS_MAX];
        if (op->p.rope.rope.n_rot > EL_ROPE_CS_MAX) return el_set_error(err, EL_ERR_INTERNAL, "rope: n_rot %d", op->p.rope.rope.n_rot);
        const int row = op->p.rope.n_heads * op->p.rope.head_dim;
        float *x = F(be, &op->dst[0]);
        for (int t = 0; t < op->n; t++)
            el_op_rope(x + (size_t)t * row, op->p.rope.n_heads, op->p.rope.head_dim, op->p.rope.pos0 + t, &op->p.rope.rope, cs);
        return 0;
    }
    case EL_OPK_SCALE: {
        float *y = F(be, &op->dst[0]);
        el_op_scale(y, op->p.scale.s, op->p.scale.count);
        if (op->p.scale.cap > 0.0f) /* ggml: tanh, then a scale by the cap (Gemma 2's final soft-capping) */
            for (int i = 0; i < op->p.scale.count; i++) y[i] = op->p.scale.cap * tanhf(y[i]);
        return 0;
    }
    case EL_OPK_FWHT: el_op_fwht(F(be, &op->dst[0]), op->n, op->p.fwht.nrot); return 0;
    case EL_OPK_KV_STORE:
        el_op_kv_store_typed(op->p.kv_store.type, base_of(be, op->dst[0].t), F(be, &op->src[0]), op->n,
                             op->p.kv_store.pos0, op->p.kv_store.row_len, op->p.kv_store.ring);
        return 0;
    case EL_OPK_ATTENTION: {
        el_attn_args a = op->p.attn.a;
        a.q = F(be, &op->src[0]);
        a.kcache = base_of(be, op->src[1].t);
        a.vcache = base_of(be, op->src[2].t);
        a.out = F(be, &op->dst[0]);
        el_op_attention(pool, &a);
        return 0;
    }
    case EL_OPK_SILU_MUL: el_op_silu_mul(F(be, &op->dst[0]), F(be, &op->src[1]), op->n, op->d); return 0;
    case EL_OPK_GELU_MUL: el_op_gelu_mul(F(be, &op->dst[0]), F(be, &op->src[1]), op->p.elt.count); return 0;
    case EL_OPK_ADD: el_op_add(F(be, &op->dst[0]), F(be, &op->src[1]), op->p.elt.count); return 0;
    case EL_OPK_COPY: memmove(F(be, &op->dst[0]), F(be, &op->src[0]), op->dst[0].len); return 0;
    case EL_OPK_HOST: op->p.host.fn(op->p.host.ctx); return 0;
    case EL_OPK_LORA: {
        /* llama.cpp's order per element (build_lora_mm): ab = B·(A·x), ab *= s, y += ab; adapters in order */
        el_lora_job j = {.x = F(be, &op->src[0]), .n = op->n, .in = op->d, .n_dst = op->p.lora.n_dst,
                         .term = op->p.lora.term, .n_term = op->p.lora.n_term, .t = op->p.lora.t,
                         .tq = op->p.lora.tq, .xq = op->p.lora.xq, .chunk = op->p.lora.chunk};
        for (int i = 0; i < j.n_dst; i++) j.y[i] = F(be, &op->dst[i]);
        el_op_lora(pool, &j);
        return 0;
    }
    case EL_OPK_MOE:
        el_op_moe(pool, op->p.moe.moe, F(be, &op->src[0]), op->n, F(be, &op->dst[0]), op->p.moe.scratch, op->cpu_scratch);
        return 0;
    case EL_OPK_COUNT: break;
    }
    return el_set_error(err, EL_ERR_INTERNAL, "cpu backend: op kind %d", (int)op->kind);
}

#ifdef EL_OP_TIMES
/*
 * Profiling aid (built with -DCMAKE_C_FLAGS=-DEL_OP_TIMES, never by default):
 * the wall time of every op this backend runs, summed per kind and site
 * ("matmul attn_qkv", "lora ffn_down"), printed to stderr at exit — how a
 * decode step's LoRA ops were timed against the products they follow
 * (docs/ADAPTERS.md). Single-threaded callers only (a bench, a run).
 */
#define OPT_MAX 64
static struct { const char *site; int kind; long n; double s; } g_opt[OPT_MAX];
static int g_n_opt;
static void opt_print(void) {
    for (int i = 0; i < g_n_opt; i++)
        fprintf(stderr, "op-time %-9s %-14s %9ld calls %10.3f ms %9.2f us each\n", el_op_kind_name((el_op_kind)g_opt[i].kind),
                g_opt[i].site, g_opt[i].n, g_opt[i].s * 1e3, g_opt[i].s * 1e6 / (double)g_opt[i].n);
}
static void opt_add(const el_op *op, double s) {
    const char *site = op->site ? op->site : "-";
    int i = 0;
    while (i < g_n_opt && !(g_opt[i].kind == (int)op->kind && !strcmp(g_opt[i].site, site))) i++;
    if (i == g_n_opt) {
        if (g_n_opt == OPT_MAX) return;
        if (!g_n_opt) atexit(opt_print);
        g_opt[g_n_opt].site = site, g_opt[g_n_opt].kind = (int)op->kind, g_n_opt++;
    }
    g_opt[i].n++, g_opt[i].s += s;
}
static int cpu_run(el_backend *be, const el_op *op, el_error *err) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    const int rc = cpu_run_op(be, op, err);
    clock_gettime(CLOCK_MONOTONIC, &b);
    opt_add(op, (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) * 1e-9);
    return rc;
}
#else
static int cpu_run(el_backend *be, const el_op *op, el_error *err) { return cpu_run_op(be, op, err); }
#endif

static int cpu_sync(el_backend *be, el_error *err) { (void)be, (void)err; return 0; }

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The CPU's capability table: matmul rate per weight type on a 64-row product
 * (prefill-shaped; the kernels' compute rate), host read bandwidth. */
static int cpu_measure(el_backend *be, el_device_caps *caps, el_error *err) {
    el_pool *pool = ((cpu_ctx *)be->ctx)->pool;
    const int K = 1024, M = 256, N = 64;
    static const el_type types[] = {EL_TYPE_F32, EL_TYPE_F16, EL_TYPE_Q8_0, EL_TYPE_Q4_0, EL_TYPE_Q4_K, EL_TYPE_Q6_K};
    float *x = malloc(sizeof(float) * (size_t)N * K), *y = malloc(sizeof(float) * (size_t)N * M);
    float *wf = malloc(sizeof(float) * (size_t)K * M);
    void *scratch = NULL, *wq = NULL;
    int rc = 0;
    if (!x || !y || !wf) { rc = el_set_error(err, EL_ERR_NOMEM, "cpu measure: out of memory"); goto done; }
    for (size_t i = 0; i < (size_t)N * K; i++) x[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    for (size_t i = 0; i < (size_t)K * M; i++) wf[i] = (float)((i * 40503u) % 1000) / 2000.0f - 0.25f;
    double best_any = 0;
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const el_type t = types[ti];
        const el_type_info *ti_ = el_type_get(t);
        if (!ti_ || !ti_->from_float) {
            /* formats without a quantizer here (K-quants): dequantize-time is what matters; use Q8_0's rate below */
            continue;
        }
        const size_t rb = el_row_size(t, K);
        free(wq), wq = malloc(rb * M);
        free(scratch), scratch = malloc(el_op_matmul_wsize(t, K, N));
        if (!wq || !scratch) { rc = el_set_error(err, EL_ERR_NOMEM, "cpu measure: out of memory"); goto done; }
        for (int r = 0; r < M; r++) ti_->from_float(wf + (size_t)r * K, (char *)wq + rb * r, K);
        el_mat W = {.type = t, .ne0 = K, .ne1 = M, .data = wq, .row_bytes = rb};
        el_op_matmul(pool, &W, x, N, y, NULL, scratch); /* warm */
        double best = 1e30;
        for (int rep = 0; rep < 5; rep++) {
            const double t0 = now_s();
            el_op_matmul(pool, &W, x, N, y, NULL, scratch);
            const double dt = now_s() - t0;
            if (dt < best) best = dt;
        }
        caps->matmul_gflops_type[t] = 2.0 * N * K * M / best / 1e9;
        if (caps->matmul_gflops_type[t] > best_any) best_any = caps->matmul_gflops_type[t];
    }
    /* K-quants: no from_float in the type table; their kernels run at about Q8_0's rate per flop */
    caps->matmul_gflops_type[EL_TYPE_Q4_K] = caps->matmul_gflops_type[EL_TYPE_Q8_0];
    caps->matmul_gflops_type[EL_TYPE_Q6_K] = caps->matmul_gflops_type[EL_TYPE_Q8_0];
    caps->matmul_gflops = best_any;
    /* elementwise ops: bandwidth-bound on the CPU; a flop rate of a few per cycle per thread */
    {
        const int n = 1 << 20;
        const double t0 = now_s();
        for (int rep = 0; rep < 8; rep++) el_op_scale(x, 1.0f, N * K < n ? N * K : n);
        const double dt = now_s() - t0;
        caps->gflops = 8.0 * (N * K) / (dt > 0 ? dt : 1e-9) / 1e9;
    }
    caps->mem_gbps = el_membw_read_gbs((size_t)64 << 20, el_pool_size(pool), 3);
    if (caps->mem_gbps <= 0) caps->mem_gbps = 10.0;
    caps->h2d_gbps = caps->d2h_gbps = caps->mem_gbps; /* host memory: a copy is a read and a write */
    /* a one-row product (a decode step): 8192 rows of 1024 Q8_0 weights (8.9 MB), the weight bytes per second */
    {
        const int K1 = 1024, M1 = 8192;
        const size_t rb = el_row_size(EL_TYPE_Q8_0, K1);
        float *src = malloc(sizeof(float) * (size_t)K1);
        void *w1 = malloc(rb * M1), *sc1 = malloc(el_op_matmul_wsize(EL_TYPE_Q8_0, K1, 1));
        float *y1 = malloc(sizeof(float) * (size_t)M1);
        if (src && w1 && sc1 && y1) {
            for (int k = 0; k < K1; k++) src[k] = (float)((k * 7919) % 200) / 400.0f - 0.25f;
            for (int r = 0; r < M1; r++) el_type_get(EL_TYPE_Q8_0)->from_float(src, (char *)w1 + rb * r, K1);
            el_mat W1 = {.type = EL_TYPE_Q8_0, .ne0 = K1, .ne1 = M1, .data = w1, .row_bytes = rb};
            double best = 1e30;
            for (int rep = 0; rep < 4; rep++) {
                const double t0 = now_s();
                el_op_matmul(pool, &W1, src, 1, y1, NULL, sc1);
                const double dt = now_s() - t0;
                if (rep > 0 && dt < best) best = dt;
            }
            caps->matmul1_gbps = (double)rb * M1 / best / 1e9;
        }
        free(src), free(w1), free(sc1), free(y1);
    }
    caps->sync_us = 0; /* results are in host memory when run() returns */
    caps->launch_us = 2.0; /* a job handed to the pool and waited for */
done:
    free(x), free(y), free(wf), free(wq), free(scratch);
    return rc;
}

static const el_backend_i k_cpu_i = {
    .free = cpu_free,
    .buf_alloc = cpu_buf_alloc,
    .buf_free = cpu_buf_free,
    .buf_write = cpu_buf_write,
    .buf_read = cpu_buf_read,
    .upload_const = NULL,
    .supports = cpu_supports,
    .run = cpu_run,
    .sync = cpu_sync,
    .measure = cpu_measure,
};

el_backend *el_backend_cpu_new(el_pool *pool, el_error *err) {
    el_backend *be = calloc(1, sizeof *be);
    cpu_ctx *c = calloc(1, sizeof *c);
    if (!be || !c) {
        free(be), free(c);
        el_set_error(err, EL_ERR_NOMEM, "cpu backend: out of memory");
        return NULL;
    }
    c->pool = pool;
    c->ops = (1u << EL_OPK_COUNT) - 1;
    be->caps.ops = c->ops;
    be->i = &k_cpu_i;
    be->ctx = c;
    snprintf(be->caps.name, sizeof be->caps.name, "cpu");
    snprintf(be->caps.desc, sizeof be->caps.desc, "host CPU, %d threads", el_pool_size(pool));
    be->caps.kind = EL_DEV_CPU;
    for (int t = 0; t < EL_TYPE_COUNT; t++) {
        const el_type_info *ti = el_type_get(t);
        if (ti && ti->weights_supported) be->caps.matmul_types |= 1ull << t;
    }
    be->caps.kv_types = 1u << EL_TYPE_F16 | 1u << EL_TYPE_BF16 | 1u << EL_TYPE_Q8_0 | 1u << EL_TYPE_Q4_0;
    snprintf(be->cache_key, sizeof be->cache_key, "cpu|%s|threads=%d", be->caps.desc, el_pool_size(pool));
    return be;
}

void el_backend_cpu_fail_after(el_backend *be, long n) {
    ((cpu_ctx *)be->ctx)->fail_after = n;
    ((cpu_ctx *)be->ctx)->ran = 0;
}

void el_backend_cpu_limit(el_backend *be, uint32_t ops) {
    ((cpu_ctx *)be->ctx)->ops = ops;
    be->caps.ops = ops;
}
