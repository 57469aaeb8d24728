/*
 * test_placement.c — the placement scheduler (src/sched/placement.h) on
 * hand-worked device tables; every expected decision is worked out in the
 * comment above its checks.
 *
 * - choice: the fastest wins with no preference; the preferred device wins at
 *   1.4x the fastest and loses at 1.6x (EL_WHY_SLOWER, wanted recorded), also
 *   against the CPU; an op the preferred device does not run falls back
 *   (EL_WHY_UNSUPPORTED); a lone CPU op is EL_WHY_ONLY.
 * - transfers: a run of 3 fallback ops between two device ops costs one copy
 *   in and one copy out (bytes and partitions checked).
 * - seed 000's case: one unsupported op in every layer of a 16-layer graph
 *   chops it (an NPU 10x faster at Q8_0/Q4_0 matmuls, a slow copy path): the
 *   alarm fires naming the costliest boundaries and the plan is replaced by
 *   the CPU alone (EL_WHY_PLAN), with and without a preference; the NPU that
 *   runs the whole layer wins instead. Same 16 layers: the shape cache
 *   decides each distinct layer op once (n_shapes, n_cache_hits).
 * - a GPU with a slow copy path: an island that does not pay goes back
 *   (EL_WHY_TAX) while the run that pays stays.
 * - device memory: later ops fall back (EL_WHY_MEMORY), a weight shared by
 *   weight_id or by (layer, site, type, bytes) is held once.
 * - groups: kv_store + attention on one device (EL_WHY_GROUP).
 * - force; a shape key that lies; refusals (no CPU first, bad params, NaN cost).
 * - the report: text and JSON (parsed back with cJSON, fields checked).
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/placement.h"
#include "testutil.h"

#define ALL_OPS ((1u << EL_OPK_COUNT) - 1)
#define TBIT(t) (1ull << (t))

static bool near(double a, double b) { return fabs(a - b) <= 1e-9 * (fabs(a) + fabs(b)) + 1e-15; }

static el_device_caps cpu_caps(double mm_gflops, double gflops, double mem_gbps) {
    el_device_caps c;
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "cpu");
    c.kind = EL_DEV_CPU;
    c.ops = ALL_OPS;
    c.matmul_types = ~0ull;
    c.kv_types = ~0u;
    c.matmul_gflops = mm_gflops;
    c.gflops = gflops;
    c.mem_gbps = mem_gbps;
    return c;
}

static el_device_caps acc_caps(const char *name, el_dev_kind kind, uint32_t ops, uint64_t mtypes, uint32_t kvtypes,
                               double mm_gflops, double gflops, double mem_gbps, double copy_gbps) {
    el_device_caps c;
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "%s", name);
    c.kind = kind;
    c.ops = ops;
    c.matmul_types = mtypes;
    c.kv_types = kvtypes;
    c.matmul_gflops = mm_gflops;
    c.gflops = gflops;
    c.mem_gbps = mem_gbps;
    c.h2d_gbps = c.d2h_gbps = copy_gbps;
    c.simulated = true;
    return c;
}

/* An op reading tensor src (src_bytes) and writing dst (dst_bytes); -1: none. */
static el_place_op mkop(el_op_kind kind, int layer, const char *site, int wtype, double flops, int src, int dst,
                        size_t bytes) {
    el_place_op o;
    memset(&o, 0, sizeof o);
    o.kind = kind;
    o.layer = layer;
    o.site = site;
    o.wtype = wtype;
    o.kv_type = -1;
    o.flops = flops;
    for (int k = 0; k < 3; k++) o.src[k] = o.dst[k] = -1;
    o.src[0] = src;
    o.dst[0] = dst;
    o.src_bytes[0] = src >= 0 ? bytes : 0;
    o.dst_bytes[0] = dst >= 0 ? bytes : 0;
    return o;
}

static int place(const el_device_caps *d, int nd, const el_sched_params *sp, const el_place_op *ops, int n,
                 el_placement *p) {
    el_error err = {0};
    const int rc = el_sched_place(d, nd, sp, ops, n, p, &err);
    if (rc) fprintf(stderr, "el_sched_place: %s\n", err.msg);
    return rc;
}

/* ---- choice ------------------------------------------------------------- */

static void test_fastest_and_tolerance(void) {
    /* One matmul (Q8_0, 1 GFLOP, no weight bytes, no tensors: no transfers).
     * cpu  10 GFLOP/s: 1e9 / 10e9  = 0.100 s
     * npu 100 GFLOP/s: 1e9 / 100e9 = 0.010 s   <- fastest, no preference: FASTEST */
    el_device_caps d[3] = {cpu_caps(10, 10, 100),
                           acc_caps("npu0", EL_DEV_NPU, 1u << EL_OPK_MATMUL, TBIT(EL_TYPE_Q8_0), 0, 100, 0, 100, 10),
                           acc_caps("gpu0", EL_DEV_GPU, ALL_OPS & ~(1u << EL_OPK_HOST), ~0ull, ~0u, 0, 0, 100, 10)};
    el_place_op op = mkop(EL_OPK_MATMUL, 0, "attn_q", EL_TYPE_Q8_0, 1e9, -1, -1, 0);
    el_sched_params sp = el_sched_default_params();
    CHECK(sp.prefer == -1 && sp.force == -1 && sp.tolerance == 1.5 && sp.tax_budget == 0.15);
    el_placement p;
    /* gpu0 with matmul_gflops 0 cannot estimate a matmul: it does not run it */
    CHECK(place(d, 2, &sp, &op, 1, &p) == 0);
    CHECK(p.d[0].dev == 1 && p.d[0].wanted == 1 && p.d[0].why == EL_WHY_FASTEST);
    CHECK(near(p.d[0].t_est[0], 0.1) && near(p.d[0].t_est[1], 0.01));
    CHECK(p.n_fallbacks == 0 && p.n_parts == 1 && p.parts[0].dev == 1);
    CHECK(near(p.t_total, 0.01) && near(p.t_cpu_only, 0.1) && p.t_tax == 0 && !p.tax_alarm);
    el_placement_free(&p);

    /* The 1.5x rule among accelerators, gpu0 preferred.
     * gpu0 at 100/1.4 GFLOP/s: 1e9 / (100e9 / 1.4) = 0.014 s = 1.4 x 0.010 <= 1.5 x 0.010 -> gpu0 PREFERRED */
    d[2].matmul_gflops = 100 / 1.4;
    sp.prefer = 2;
    CHECK(place(d, 3, &sp, &op, 1, &p) == 0);
    CHECK(p.d[0].dev == 2 && p.d[0].wanted == 2 && p.d[0].why == EL_WHY_PREFERRED);
    CHECK(near(p.d[0].t_est[2], 0.014) && p.n_fallbacks == 0);
    el_placement_free(&p);
    /* gpu0 at 62.5 GFLOP/s: 1e9 / 62.5e9 = 0.016 s = 1.6 x 0.010 > 0.015 -> npu0, wanted gpu0, SLOWER */
    d[2].matmul_gflops = 62.5;
    CHECK(place(d, 3, &sp, &op, 1, &p) == 0);
    CHECK(p.d[0].dev == 1 && p.d[0].wanted == 2 && p.d[0].why == EL_WHY_SLOWER);
    CHECK(near(p.d[0].t_est[2], 0.016) && p.n_fallbacks == 1);
    el_placement_free(&p);

    /* Preferred vs the CPU: npu0 at 1e9 / (10e9 / 1.4) = 0.14 s = 1.4 x the CPU's 0.1 s: npu0 PREFERRED; the
     * tax pass keeps it (no copies; 0.14 - 0.10 = 0.04 <= (1.5 - 1) x 0.10 = 0.05) and so does the CPU-only
     * comparison (0.14 <= 1.5 x 0.10). At 1.6x (6.25 GFLOP/s: 0.16 s > 0.15 s): the CPU, SLOWER. */
    d[1].matmul_gflops = 10 / 1.4;
    sp.prefer = 1;
    CHECK(place(d, 2, &sp, &op, 1, &p) == 0);
    CHECK(p.d[0].dev == 1 && p.d[0].why == EL_WHY_PREFERRED && near(p.t_total, 0.14));
    el_placement_free(&p);
    d[1].matmul_gflops = 6.25;
    CHECK(place(d, 2, &sp, &op, 1, &p) == 0);
    CHECK(p.d[0].dev == 0 && p.d[0].wanted == 1 && p.d[0].why == EL_WHY_SLOWER && p.n_fallbacks == 1);
    el_placement_free(&p);

    /* An op npu0 does not run (rmsnorm): preferred -> fallback UNSUPPORTED, wanted npu0; no preference -> ONLY */
    el_place_op rn = mkop(EL_OPK_RMSNORM, 0, "attn_norm", -1, 1e6, -1, -1, 0);
    CHECK(place(d, 2, &sp, &rn, 1, &p) == 0);
    CHECK(p.d[0].dev == 0 && p.d[0].wanted == 1 && p.d[0].why == EL_WHY_UNSUPPORTED && p.n_fallbacks == 1);
    CHECK(p.d[0].t_est[1] < 0 && near(p.d[0].t_est[0], 1e6 / 10e9));
    el_placement_free(&p);
    sp.prefer = -1;
    CHECK(place(d, 2, &sp, &rn, 1, &p) == 0);
    CHECK(p.d[0].dev == 0 && p.d[0].wanted == 0 && p.d[0].why == EL_WHY_ONLY && p.n_fallbacks == 0);
    el_placement_free(&p);
    /* a weight type npu0 does not take (Q4_K): it does not run the matmul */
    el_place_op qk = mkop(EL_OPK_MATMUL, 0, "ffn_down", EL_TYPE_Q4_K, 1e9, -1, -1, 0);
    CHECK(!el_caps_runs(&d[1], &qk) && el_caps_runs(&d[1], &op));
    CHECK(place(d, 2, &sp, &qk, 1, &p) == 0);
    CHECK(p.d[0].dev == 0 && p.d[0].why == EL_WHY_ONLY);
    el_placement_free(&p);
    /* runs_on overrides the caps (the executor's backend->supports()): npu0 back at 100 GFLOP/s runs it */
    d[1].matmul_gflops = 100;
    qk.runs_on = 0x3;
    CHECK(place(d, 2, &sp, &qk, 1, &p) == 0);
    CHECK(p.d[0].dev == 1 && p.d[0].why == EL_WHY_FASTEST);
    el_placement_free(&p);
    /* ... but a host op (a function on host memory) stays on the cpu whatever runs_on says */
    el_place_op ho = mkop(EL_OPK_HOST, -1, "pool", -1, 1e9, -1, -1, 0);
    ho.runs_on = 0x3;
    CHECK(place(d, 2, &sp, &ho, 1, &p) == 0);
    CHECK(p.d[0].dev == 0 && p.d[0].why == EL_WHY_ONLY && p.d[0].t_est[1] < 0);
    el_placement_free(&p);
}

/* ---- fallback runs fused ------------------------------------------------ */

static void test_fused_fallback(void) {
    /* ops: 0 matmul x->t1 (npu), 1 rmsnorm t1->t2, 2 rope t2 in place, 3 add t2 += t1 (cpu: npu runs only
     * matmul), 4 matmul t2->t3 (npu). Tensors 4000 bytes; copies 10 GB/s (4000 / 10e9 = 0.4 us each).
     * Copies: op 0 x h2d (input on the host); op 1 t1 d2h; ops 2, 3: t2 and t1 already on the cpu;
     * op 4 t2 h2d; end: t3 d2h. The 3-op CPU run costs one copy in (t1) and one out (t2). */
    el_device_caps d[2] = {cpu_caps(10, 10, 100),
                           acc_caps("npu0", EL_DEV_NPU, 1u << EL_OPK_MATMUL, TBIT(EL_TYPE_Q8_0), 0, 100, 0, 100, 10)};
    el_place_op ops[5] = {
        mkop(EL_OPK_MATMUL, 0, "attn_q", EL_TYPE_Q8_0, 1e9, 0, 1, 4000),
        mkop(EL_OPK_RMSNORM, 0, "q_norm", -1, 1e5, 1, 2, 4000),
        mkop(EL_OPK_ROPE, 0, "rope", -1, 1e5, -1, 2, 4000),
        mkop(EL_OPK_ADD, 0, "add", -1, 1e5, 1, 2, 4000),
        mkop(EL_OPK_MATMUL, 0, "attn_out", EL_TYPE_Q8_0, 1e9, 2, 3, 4000),
    };
    el_placement p;
    CHECK(place(d, 2, NULL, ops, 5, &p) == 0);
    CHECK(p.d[0].dev == 1 && p.d[1].dev == 0 && p.d[2].dev == 0 && p.d[3].dev == 0 && p.d[4].dev == 1);
    CHECK(p.n_parts == 3);
    if (p.n_parts == 3) {
        CHECK(p.parts[0].dev == 1 && p.parts[0].op_begin == 0 && p.parts[0].op_end == 1 && p.parts[0].bytes_in == 4000);
        CHECK(p.parts[1].dev == 0 && p.parts[1].op_begin == 1 && p.parts[1].op_end == 4 && p.parts[1].bytes_in == 4000);
        CHECK(p.parts[2].dev == 1 && p.parts[2].op_begin == 4 && p.parts[2].bytes_in == 4000);
        CHECK(near(p.parts[1].tax_est, 4000 / 10e9));
        /* partition estimates: 3 x 1e5 / 10e9 = 30 us on the cpu */
        CHECK(near(p.parts[1].t_est, 3e5 / 10e9));
    }
    CHECK(p.n_bounds == 4);
    if (p.n_bounds == 4) {
        CHECK(p.bounds[0].op == 0 && p.bounds[0].tensor == 0 && p.bounds[0].from == 0 && p.bounds[0].to == 1);
        CHECK(p.bounds[1].op == 1 && p.bounds[1].tensor == 1 && p.bounds[1].from == 1 && p.bounds[1].to == 0);
        CHECK(p.bounds[2].op == 4 && p.bounds[2].tensor == 2 && p.bounds[2].to == 1);
        CHECK(p.bounds[3].op == 5 && p.bounds[3].tensor == 3 && p.bounds[3].to == 0);
    }
    /* tax 4 x 0.4 us = 1.6 us; compute 2 x 10 ms + 30 us */
    CHECK(near(p.t_tax, 4 * 4000 / 10e9) && near(p.t_compute, 2 * 0.01 + 3e5 / 10e9));
    el_placement_free(&p);
}

/* ---- seed 000: the chopped graph --------------------------------------- */

enum { NL = 16, PER_LAYER = 12, N_SEED = NL * PER_LAYER + 2 };

/* A decode step of a toy 16-layer model. Costs: each matmul 1 MFLOP (Q8_0 attention, Q4_0 FFN), every other
 * op 0.1 MFLOP; activations 5000 bytes. Tensors: 0 x (residual), 1 h, 2 q, 3 a, 4 o, 5 u, 6 f, 7 logits,
 * 8 + L: layer L's K cache. Shape keys by site (equal layers, equal keys). */
static int seed_graph(el_place_op *ops) {
    const size_t B = 5000;
    int n = 0;
    for (int L = 0; L < NL; L++) {
        ops[n++] = mkop(EL_OPK_RMSNORM, L, "attn_norm", -1, 1e5, 0, 1, B);
        ops[n++] = mkop(EL_OPK_MATMUL, L, "attn_qkv", EL_TYPE_Q8_0, 1e6, 1, 2, B);
        ops[n++] = mkop(EL_OPK_ROPE, L, "rope", -1, 1e5, -1, 2, B);
        ops[n] = mkop(EL_OPK_KV_STORE, L, "kv_store", -1, 1e5, 2, 8 + L, B);
        ops[n].kv_type = EL_TYPE_F16;
        ops[n++].group = L + 1;
        ops[n] = mkop(EL_OPK_ATTENTION, L, "attention", -1, 1e5, 2, 3, B);
        ops[n].src[1] = 8 + L;
        ops[n].src_bytes[1] = B;
        ops[n].kv_type = EL_TYPE_F16;
        ops[n++].group = L + 1;
        ops[n++] = mkop(EL_OPK_MATMUL, L, "attn_out", EL_TYPE_Q8_0, 1e6, 3, 4, B);
        ops[n] = mkop(EL_OPK_ADD, L, "attn_add", -1, 1e5, 4, 0, B);
        ops[n++].src_bytes[0] = B;
        ops[n++] = mkop(EL_OPK_RMSNORM, L, "ffn_norm", -1, 1e5, 0, 1, B);
        ops[n++] = mkop(EL_OPK_MATMUL, L, "ffn_up", EL_TYPE_Q4_0, 1e6, 1, 5, B);
        ops[n++] = mkop(EL_OPK_GELU_MUL, L, "ffn_act", -1, 1e5, -1, 5, B);
        ops[n++] = mkop(EL_OPK_MATMUL, L, "ffn_down", EL_TYPE_Q4_0, 1e6, 5, 6, B);
        ops[n++] = mkop(EL_OPK_ADD, L, "ffn_add", -1, 1e5, 6, 0, B);
    }
    ops[n++] = mkop(EL_OPK_RMSNORM, -1, "output_norm", -1, 1e5, 0, 1, B);
    ops[n++] = mkop(EL_OPK_MATMUL, -1, "output", EL_TYPE_Q8_0, 1e6, 1, 7, B);
    for (int i = 0; i < n; i++) {
        uint64_t h = 1469598103934665603ull;
        for (const char *s = ops[i].site; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
        ops[i].shape_key = h;
    }
    return n;
}

static void test_seed_chopped(void) {
    el_place_op ops[N_SEED];
    CHECK(seed_graph(ops) == N_SEED);
    /* cpu: 10 GFLOP/s -> matmul 1e6 / 10e9 = 100 us, other ops 1e5 / 10e9 = 10 us (mem_gbps 1e6: the byte
     *   term is 0). CPU alone: 16 x (4 x 100 + 8 x 10) + 10 + 100 = 7790 us.
     * npu0: Q8_0/Q4_0 matmuls at 100 GFLOP/s (10 us, 10x) and nothing else; copies 0.05 GB/s:
     *   5000 / 5e7 = 100 us each way.
     * Placed (no preference: npu0 fastest for the matmuls): each of the 65 matmuls is an island between CPU
     *   ops, reading its input from the cpu (100 us) and read back by the next CPU op (100 us): per layer
     *   compute 4 x 10 + 8 x 10 = 120 us, tax 4 x 200 = 800 us; head: 10 + 10 compute, 100 in + 100 for the
     *   logits read back at the end. Placed total = 16 x 920 + 220 = 14940 us, tax 13000 us = 87.0% > 15%:
     *   the alarm. Each island costs 200 us of copies to save 90 us: the tax pass moves every one back,
     *   and since the placed plan lost to the CPU alone (14940 > 7790) the result is the CPU plan with
     *   EL_WHY_PLAN on the 65 matmuls (wanted npu0). The costliest boundaries (100 us each, first ones
     *   first): op 1 (L0 attn_qkv, h cpu->npu0), op 2 (L0 rope, q npu0->cpu), op 5 (L0 attn_out). */
    el_device_caps d[2] = {
        cpu_caps(10, 10, 1e6),
        acc_caps("npu0", EL_DEV_NPU, 1u << EL_OPK_MATMUL, TBIT(EL_TYPE_Q8_0) | TBIT(EL_TYPE_Q4_0), 0, 100, 0, 1e6,
                 0.05)};
    for (int pref = -1; pref <= 1; pref += 2) {
        el_sched_params sp = el_sched_default_params();
        sp.prefer = pref;
        el_placement p;
        CHECK(place(d, 2, &sp, ops, N_SEED, &p) == 0);
        CHECK(near(p.t_cpu_only, 7790e-6));
        CHECK(near(p.placed_total, 14940e-6) && near(p.placed_tax, 13000e-6) && near(p.placed_compute, 1940e-6));
        CHECK(near(p.t_total, 7790e-6) && p.t_tax == 0 && p.n_parts == 1 && p.parts[0].dev == 0);
        int n_plan = 0, n_unsup = 0;
        for (int i = 0; i < N_SEED; i++) {
            CHECK(p.d[i].dev == 0);
            if (ops[i].kind == EL_OPK_MATMUL) {
                CHECKF(p.d[i].why == EL_WHY_PLAN && p.d[i].wanted == 1, "op %d why %s", i,
                       el_place_why_name(p.d[i].why));
                n_plan += p.d[i].why == EL_WHY_PLAN;
            } else {
                /* with a preference the others are recorded fallbacks (unsupported), else the CPU is the only one */
                CHECK(p.d[i].why == (pref == 1 ? EL_WHY_UNSUPPORTED : EL_WHY_ONLY));
                n_unsup += p.d[i].why == EL_WHY_UNSUPPORTED;
            }
        }
        CHECK(n_plan == 65);
        CHECK(p.n_fallbacks == 65 + n_unsup && n_unsup == (pref == 1 ? N_SEED - 65 : 0));
        CHECK(p.tax_alarm);
        CHECKF(strstr(p.alarm, "87.0%") && strstr(p.alarm, "placed") && strstr(p.alarm, "CPU-only") &&
                   strstr(p.alarm, "L0 attn_qkv (matmul) cpu->npu0 5000 B") && strstr(p.alarm, "L0 rope (rope) npu0->cpu"),
               "alarm: %s", p.alarm);
        CHECK(p.n_top == 3);
        CHECK(p.top[0].op == 1 && p.top[0].bytes == 5000 && near(p.top[0].t, 100e-6));
        CHECK(p.top[1].op == 2 && p.top[1].from == 1 && p.top[1].to == 0);
        CHECK(p.top[2].op == 5);
        /* the shape cache: 11 decision units per layer (the kv_store + attention group is one) and 2 in the
         * head, decided once: 13 shapes; the other 15 layers reuse them: 15 x 12 = 180 hits */
        CHECK(p.n_shapes == 13 && p.n_cache_hits == 180);
        if (pref == -1 && getenv("EL_PLACEMENT_SHOW")) /* the worked example of docs/HETEROGENEOUS.md */
            el_placement_print(stdout, &p, ops, d);
        el_placement_free(&p);
    }

    /* The contrast: npu0 runs the whole layer (every op kind but host, F16 cache) at the CPU's speed for
     * non-matmul ops and 10x for matmuls; preferred. Every op: npu0 (matmuls 10 us < 100 us; others equal:
     * 10 us <= 1.5 x 10 us). One partition; copies only x in (op 0: 100 us) and the logits out (100 us).
     * Compute 16 x (4 x 10 + 8 x 10) + 10 + 10 = 1940 us, total 2140 us < 7790 us; tax 200 / 2140 = 9.3%:
     * no alarm. */
    d[1] = acc_caps("npu0", EL_DEV_NPU, ALL_OPS & ~(1u << EL_OPK_HOST), TBIT(EL_TYPE_Q8_0) | TBIT(EL_TYPE_Q4_0),
                    1u << EL_TYPE_F16, 100, 10, 1e6, 0.05);
    el_sched_params sp = el_sched_default_params();
    sp.prefer = 1;
    el_placement p;
    CHECK(place(d, 2, &sp, ops, N_SEED, &p) == 0);
    CHECK(p.n_parts == 1 && p.parts[0].dev == 1 && p.parts[0].bytes_in == 5000);
    CHECK(near(p.t_compute, 1940e-6) && near(p.t_tax, 200e-6) && near(p.t_total, 2140e-6));
    CHECK(!p.tax_alarm && p.n_fallbacks == 0);
    for (int i = 0; i < N_SEED; i++) CHECK(p.d[i].dev == 1 && p.d[i].why == EL_WHY_PREFERRED);
    if (getenv("EL_PLACEMENT_SHOW")) el_placement_print(stdout, &p, ops, d);
    el_placement_free(&p);
}

/* ---- a GPU with a slow copy path --------------------------------------- */

static void test_gpu_slow_copy(void) {
    /* ops: 0 matmul x->y (cpu 1e9/10e9 = 100 ms, gpu 1e9/100e9 = 10 ms), 1 rmsnorm y->z (cpu only, 1 ms),
     * 2 matmul z->w (cpu 1e7/10e9 = 1 ms, gpu 1e7/100e9 = 0.1 ms), 3 rmsnorm w->out
     * (cpu only, 1 ms). Tensors 1e6 bytes; gpu copies 1 GB/s: 1 ms each way.
     * Placed: 0 gpu, 1 cpu, 2 gpu, 3 cpu. Copies: x in, y out, z in, w out = 4 ms; compute 10 + 1 + 0.1 + 1 =
     *   12.1 ms; total 16.1 ms; tax share 4 / 16.1 = 24.8% > 15%: alarm (about the placed plan).
     * Tax pass: without run [0]: compute 100 + 1 + 0.1 + 1 = 102.1, copies z, w = 2 -> 104.1 (worse: keep);
     *   without run [2]: compute 10 + 1 + 1 + 1 = 13, copies x, y = 2 -> 15 < 16.1: back to the cpu (TAX).
     * Final: 15 ms (< CPU alone 100 + 1 + 1 + 1 = 103 ms), tax 2 / 15 = 13.3%. */
    el_device_caps d[2] = {cpu_caps(10, 10, 1e6),
                           acc_caps("gpu0", EL_DEV_GPU, 1u << EL_OPK_MATMUL, ~0ull, 0, 100, 0, 1e6, 1)};
    el_place_op ops[4] = {
        mkop(EL_OPK_MATMUL, 0, "big", EL_TYPE_F16, 1e9, 0, 1, 1000000),
        mkop(EL_OPK_RMSNORM, 0, "norm1", -1, 1e7, 1, 2, 1000000),
        mkop(EL_OPK_MATMUL, 0, "small", EL_TYPE_F16, 1e7, 2, 3, 1000000),
        mkop(EL_OPK_RMSNORM, 0, "norm2", -1, 1e7, 3, 4, 1000000),
    };
    el_placement p;
    CHECK(place(d, 2, NULL, ops, 4, &p) == 0);
    CHECK(p.d[0].dev == 1 && p.d[0].why == EL_WHY_FASTEST);
    CHECK(p.d[2].dev == 0 && p.d[2].wanted == 1 && p.d[2].why == EL_WHY_TAX);
    CHECK(p.n_fallbacks == 1);
    CHECK(near(p.placed_total, 16.1e-3) && near(p.placed_tax, 4e-3));
    CHECK(near(p.t_total, 15e-3) && near(p.t_tax, 2e-3) && near(p.t_cpu_only, 103e-3));
    CHECK(p.tax_alarm && strstr(p.alarm, "24.8%") && strstr(p.alarm, "reduced by the tax pass"));
    CHECK(p.n_parts == 2 && p.parts[1].bytes_in == 1000000 && near(p.parts[1].tax_est, 1e-3));
    el_placement_free(&p);

    /* force onto gpu0: every op it runs goes there whatever it costs (no tax pass, no CPU-only
     * comparison); the rmsnorms fall back (unsupported, wanted gpu0) */
    el_sched_params sp = el_sched_default_params();
    sp.force = 1;
    CHECK(place(d, 2, &sp, ops, 4, &p) == 0);
    CHECK(p.d[0].dev == 1 && p.d[0].why == EL_WHY_FORCED && p.d[2].dev == 1 && p.d[2].why == EL_WHY_FORCED);
    CHECK(p.d[1].dev == 0 && p.d[1].wanted == 1 && p.d[1].why == EL_WHY_UNSUPPORTED);
    CHECK(near(p.t_total, 16.1e-3) && p.n_fallbacks == 2);
    el_placement_free(&p);
}

/* ---- memory ------------------------------------------------------------- */

static void test_memory(void) {
    /* 6 matmuls, weights 1e6 bytes each, npu0 holds 2.5e6 bytes. No tensors (no copies).
     * op 0 (w id 7): 1e6 held; op 1 (layer 0 "b"): 2e6; op 2: 3e6 > 2.5e6 -> cpu (MEMORY); op 3: same;
     * op 4 reads weight id 7 again (tied): nothing new -> npu0; op 5 is layer 0 "b" Q8_0 1e6 again
     * (no id: the same weight by (layer, site, type, bytes)) -> npu0. Held: npu0 2e6, cpu 2e6. */
    el_device_caps d[2] = {cpu_caps(10, 10, 100),
                           acc_caps("npu0", EL_DEV_NPU, 1u << EL_OPK_MATMUL, TBIT(EL_TYPE_Q8_0), 0, 100, 0, 100, 10)};
    d[1].mem_bytes = 2500000;
    const char *sites[6] = {"a", "b", "c", "d", "e", "b"};
    el_place_op ops[6];
    for (int i = 0; i < 6; i++) {
        ops[i] = mkop(EL_OPK_MATMUL, 0, sites[i], EL_TYPE_Q8_0, 1e9, -1, -1, 0);
        ops[i].bytes_w = 1e6;
    }
    ops[0].weight_id = ops[4].weight_id = 7;
    el_placement p;
    CHECK(place(d, 2, NULL, ops, 6, &p) == 0);
    const int want_dev[6] = {1, 1, 0, 0, 1, 1};
    for (int i = 0; i < 6; i++) CHECKF(p.d[i].dev == want_dev[i], "op %d on %d", i, p.d[i].dev);
    CHECK(p.d[2].why == EL_WHY_MEMORY && p.d[2].wanted == 1 && p.d[3].why == EL_WHY_MEMORY);
    CHECK(p.dev_weight_bytes[1] == 2000000 && p.dev_weight_bytes[0] == 2000000);
    CHECK(p.n_fallbacks == 2);
    el_placement_free(&p);
    /* unbounded (mem_bytes 0): all on npu0, each weight once: ids 7, b, c, d = 4e6 */
    d[1].mem_bytes = 0;
    CHECK(place(d, 2, NULL, ops, 6, &p) == 0);
    CHECK(p.dev_weight_bytes[1] == 4000000 && p.dev_weight_bytes[0] == 0 && p.n_fallbacks == 0);
    el_placement_free(&p);
}

/* ---- groups ------------------------------------------------------------- */

static void test_groups(void) {
    /* kv_store (cpu 1e7/10e9 = 1 ms) and attention (cpu 1e8/10e9 = 10 ms), one group.
     * npu0 runs attention only (1e8/100e9 = 1 ms): the group's devices are those running both: the cpu
     * alone -> both on the cpu (ONLY); attention, which alone would go to npu0, follows its group (GROUP). */
    el_device_caps d[2] = {cpu_caps(10, 10, 1e6), acc_caps("npu0", EL_DEV_NPU, 1u << EL_OPK_ATTENTION, 0,
                                                           1u << EL_TYPE_F16, 0, 100, 1e6, 10)};
    el_place_op ops[2] = {mkop(EL_OPK_KV_STORE, 0, "kv_store", -1, 1e7, -1, -1, 0),
                          mkop(EL_OPK_ATTENTION, 0, "attention", -1, 1e8, -1, -1, 0)};
    ops[0].group = ops[1].group = 5;
    ops[0].kv_type = ops[1].kv_type = EL_TYPE_F16;
    el_placement p;
    CHECK(place(d, 2, NULL, ops, 2, &p) == 0);
    CHECK(p.d[0].dev == 0 && p.d[1].dev == 0 && p.d[0].why == EL_WHY_ONLY && p.d[1].why == EL_WHY_GROUP);
    CHECK(p.d[1].t_est[1] > 0 && p.n_fallbacks == 0);
    el_placement_free(&p);
    /* npu0 runs both at 50 GFLOP/s, but reads memory at 1 GB/s; kv_store moves 1e7 bytes.
     * kv_store: cpu max(1e7 / 10e9, 1e7 / 1e15) = 1 ms, npu0 max(1e7 / 50e9, 1e7 / 1e9) = 10 ms;
     * attention: cpu 1e8 / 10e9 = 10 ms, npu0 1e8 / 50e9 = 2 ms.
     * Group: cpu 11 ms, npu0 12 ms -> the cpu; attention alone would go to npu0: GROUP. */
    d[1].ops |= 1u << EL_OPK_KV_STORE;
    d[1].gflops = 50;
    d[1].mem_gbps = 1;
    ops[0].bytes_in = 1e7;
    CHECK(place(d, 2, NULL, ops, 2, &p) == 0);
    CHECK(p.d[0].dev == 0 && p.d[1].dev == 0 && p.d[1].why == EL_WHY_GROUP && p.d[0].why == EL_WHY_FASTEST);
    el_placement_free(&p);
    /* attention 4x heavier (4e8): group cpu 1 + 40 = 41 ms, npu0 10 + 8 = 18 ms -> npu0; kv_store alone
     * would stay on the cpu: GROUP */
    ops[1].flops = 4e8;
    CHECK(place(d, 2, NULL, ops, 2, &p) == 0);
    CHECK(p.d[0].dev == 1 && p.d[1].dev == 1 && p.d[0].why == EL_WHY_GROUP && p.d[1].why == EL_WHY_FASTEST);
    CHECK(near(p.d[0].t_est[1], 10e-3) && near(p.d[1].t_est[1], 8e-3));
    el_placement_free(&p);
}

/* ---- the shape cache when a key lies; refusals ------------------------- */

static void test_cache_and_refusals(void) {
    el_device_caps d[2] = {cpu_caps(10, 10, 100),
                           acc_caps("npu0", EL_DEV_NPU, 1u << EL_OPK_MATMUL, TBIT(EL_TYPE_Q8_0), 0, 100, 0, 100, 10)};
    /* same key, different kinds: decided separately (2 shapes, 0 hits) and correctly */
    el_place_op ops[3] = {mkop(EL_OPK_MATMUL, 0, "a", EL_TYPE_Q8_0, 1e9, -1, -1, 0),
                          mkop(EL_OPK_RMSNORM, 0, "b", -1, 1e6, -1, -1, 0),
                          mkop(EL_OPK_MATMUL, 1, "a", EL_TYPE_Q8_0, 1e9, -1, -1, 0)};
    ops[0].shape_key = ops[1].shape_key = ops[2].shape_key = 42;
    el_placement p;
    CHECK(place(d, 2, NULL, ops, 3, &p) == 0);
    CHECK(p.d[0].dev == 1 && p.d[1].dev == 0 && p.d[2].dev == 1);
    CHECK(p.n_shapes == 2 && p.n_cache_hits == 1);
    el_placement_free(&p);
    /* key 0: never cached */
    for (int i = 0; i < 3; i++) ops[i].shape_key = 0;
    CHECK(place(d, 2, NULL, ops, 3, &p) == 0);
    CHECK(p.n_shapes == 3 && p.n_cache_hits == 0);
    el_placement_free(&p);

    el_error err = {0};
    el_sched_params sp = el_sched_default_params();
    CHECK(el_sched_place(d, 0, &sp, ops, 3, &p, &err) == -1 && err.msg[0]);
    CHECK(el_sched_place(d + 1, 1, &sp, ops, 3, &p, &err) == -1 && strstr(err.msg, "not the CPU"));
    /* a second device of kind CPU (an OpenCL CPU device: buffers of its own) is planned like any other */
    el_device_caps two_cpus[2] = {d[0], d[0]};
    two_cpus[1].h2d_gbps = two_cpus[1].d2h_gbps = 10.0;
    CHECK(el_sched_place(two_cpus, 2, &sp, ops, 3, &p, &err) == 0);
    el_placement_free(&p);
    sp.prefer = 2;
    CHECK(el_sched_place(d, 2, &sp, ops, 3, &p, &err) == -1 && strstr(err.msg, "no such device"));
    sp = el_sched_default_params();
    sp.tolerance = 0.5;
    CHECK(el_sched_place(d, 2, &sp, ops, 3, &p, &err) == -1 && strstr(err.msg, "tolerance"));
    sp = el_sched_default_params();
    sp.tax_budget = NAN;
    CHECK(el_sched_place(d, 2, &sp, ops, 3, &p, &err) == -1 && strstr(err.msg, "tax budget"));
    ops[1].flops = NAN;
    CHECK(el_sched_place(d, 2, NULL, ops, 3, &p, &err) == -1 && strstr(err.msg, "op 1"));
    ops[1].flops = 1e6;
    ops[1].src[0] = 1 << 24;
    CHECK(el_sched_place(d, 2, NULL, ops, 3, &p, &err) == -1 && strstr(err.msg, "tensor id"));
    ops[1].src[0] = -1;
    el_device_caps cpu0 = d[0];
    d[0].gflops = 0;
    CHECK(el_sched_place(d, 2, NULL, ops, 3, &p, &err) == -1 && strstr(err.msg, "gflops"));
    d[0] = cpu0;
    /* no ops: an empty plan */
    CHECK(el_sched_place(d, 2, NULL, NULL, 0, &p, &err) == 0 && p.n_parts == 0 && p.t_total == 0);
    el_placement_free(&p);
    CHECK(strcmp(el_place_why_name(EL_WHY_PLAN), "fallback:plan") == 0);
    CHECK(strcmp(el_place_why_name((el_place_why)99), "?") == 0);
    CHECK(el_op_kind_parse("attention") == EL_OPK_ATTENTION && el_op_kind_parse("Attention") == -1);
    for (int k = 0; k < EL_OPK_COUNT; k++) CHECK(el_op_kind_parse(el_op_kind_name((el_op_kind)k)) == k);
    CHECK(strcmp(el_op_kind_name(EL_OPK_COUNT), "?") == 0);
}

/* ---- the report --------------------------------------------------------- */

static char *capture(const el_placement *p, const el_place_op *ops, const el_device_caps *d, bool json) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return NULL;
    if (json) el_placement_print_json(f, p, ops, d);
    else el_placement_print(f, p, ops, d);
    fclose(f);
    return buf;
}

static void test_report(void) {
    el_place_op ops[N_SEED];
    seed_graph(ops);
    ops[0].site = "attn\"norm\\\n"; /* a site that needs escaping */
    el_device_caps d[2] = {
        cpu_caps(10, 10, 1e6),
        acc_caps("npu0", EL_DEV_NPU, 1u << EL_OPK_MATMUL, TBIT(EL_TYPE_Q8_0) | TBIT(EL_TYPE_Q4_0), 0, 100, 0, 1e6,
                 0.05)};
    el_placement p;
    CHECK(place(d, 2, NULL, ops, N_SEED, &p) == 0);
    p.parts[0].t_meas = 0.0081; /* as the executor would fill it */
    char *txt = capture(&p, ops, d, false);
    CHECK(txt != NULL);
    if (txt) {
        CHECKF(strstr(txt, "TAX ALARM: transfer tax 87.0%") && strstr(txt, "fallback:plan") &&
                   strstr(txt, "L15") && strstr(txt, "attn_qkv:matmul->cpu*") && strstr(txt, "CPU alone 7.790 ms") &&
                   strstr(txt, "8.100") && strstr(txt, "npu0 (npu, simulated)"),
               "%s", txt);
        free(txt);
    }
    char *js = capture(&p, ops, d, true);
    CHECK(js != NULL);
    cJSON *j = js ? cJSON_Parse(js) : NULL;
    CHECKF(j != NULL, "JSON does not parse: %.300s", js ? js : "");
    if (j) {
        CHECK(cJSON_GetObjectItem(j, "n_ops")->valueint == N_SEED);
        CHECK(cJSON_GetObjectItem(j, "n_shapes")->valueint == 13);
        CHECK(cJSON_GetObjectItem(j, "n_fallbacks")->valueint == 65);
        const cJSON *devs = cJSON_GetObjectItem(j, "devices");
        CHECK(cJSON_GetArraySize(devs) == 2);
        CHECK(strcmp(cJSON_GetObjectItem(cJSON_GetArrayItem(devs, 1), "name")->valuestring, "npu0") == 0);
        CHECK(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetArrayItem(devs, 1), "simulated")));
        const cJSON *est = cJSON_GetObjectItem(j, "estimate");
        CHECK(near(cJSON_GetObjectItem(est, "cpu_only_ms")->valuedouble, 7.79));
        CHECK(near(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "placed"), "total_ms")->valuedouble, 14.94));
        const cJSON *jops = cJSON_GetObjectItem(j, "ops");
        CHECK(cJSON_GetArraySize(jops) == N_SEED);
        const cJSON *o0 = cJSON_GetArrayItem(jops, 0), *o1 = cJSON_GetArrayItem(jops, 1);
        CHECK(strcmp(cJSON_GetObjectItem(o0, "site")->valuestring, "attn\"norm\\\n") == 0);
        CHECK(strcmp(cJSON_GetObjectItem(o1, "why")->valuestring, "fallback:plan") == 0);
        CHECK(strcmp(cJSON_GetObjectItem(o1, "wanted")->valuestring, "npu0") == 0);
        CHECK(strcmp(cJSON_GetObjectItem(o1, "device")->valuestring, "cpu") == 0);
        const cJSON *e1 = cJSON_GetObjectItem(o1, "est_ms");
        CHECK(near(cJSON_GetArrayItem(e1, 0)->valuedouble, 0.1) && near(cJSON_GetArrayItem(e1, 1)->valuedouble, 0.01));
        CHECK(cJSON_IsNull(cJSON_GetArrayItem(cJSON_GetObjectItem(o0, "est_ms"), 1)));
        const cJSON *parts = cJSON_GetObjectItem(j, "partitions");
        CHECK(cJSON_GetArraySize(parts) == 1);
        CHECK(near(cJSON_GetObjectItem(cJSON_GetArrayItem(parts, 0), "meas_ms")->valuedouble, 8.1));
        CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(j, "fallbacks")) == 65);
        const cJSON *al = cJSON_GetObjectItem(j, "alarm");
        CHECK(cJSON_IsTrue(cJSON_GetObjectItem(al, "fired")));
        const cJSON *top = cJSON_GetObjectItem(al, "costliest");
        CHECK(cJSON_GetArraySize(top) == 3);
        const cJSON *t0 = cJSON_GetArrayItem(top, 0);
        CHECK(strcmp(cJSON_GetObjectItem(t0, "site")->valuestring, "attn_qkv") == 0);
        CHECK(cJSON_GetObjectItem(t0, "layer")->valueint == 0 && cJSON_GetObjectItem(t0, "bytes")->valueint == 5000);
        CHECK(strcmp(cJSON_GetObjectItem(t0, "from")->valuestring, "cpu") == 0);
        CHECK(strcmp(cJSON_GetObjectItem(t0, "to")->valuestring, "npu0") == 0);
        CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(j, "boundaries")) == 0); /* the final plan copies nothing */
        cJSON_Delete(j);
    }
    free(js);
    el_placement_free(&p);

    /* a plan with copies: boundaries listed, the end read-back as "(outputs)" */
    d[1] = acc_caps("npu0", EL_DEV_NPU, ALL_OPS & ~(1u << EL_OPK_HOST), TBIT(EL_TYPE_Q8_0) | TBIT(EL_TYPE_Q4_0),
                    1u << EL_TYPE_F16, 100, 10, 1e6, 0.05);
    el_sched_params sp = el_sched_default_params();
    sp.prefer = 1;
    CHECK(place(d, 2, &sp, ops, N_SEED, &p) == 0);
    js = capture(&p, ops, d, true);
    j = js ? cJSON_Parse(js) : NULL;
    CHECK(j != NULL);
    if (j) {
        const cJSON *b = cJSON_GetObjectItem(j, "boundaries");
        CHECK(cJSON_GetArraySize(b) == 2);
        CHECK(strcmp(cJSON_GetObjectItem(cJSON_GetArrayItem(b, 1), "site")->valuestring, "(outputs)") == 0);
        CHECK(cJSON_IsFalse(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "alarm"), "fired")));
        CHECK(strcmp(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "params"), "prefer")->valuestring, "npu0") == 0);
        cJSON_Delete(j);
    }
    free(js);
    txt = capture(&p, ops, d, false);
    CHECK(txt && strstr(txt, "within the 15% budget") && strstr(txt, "outputs read back to the host"));
    free(txt);
    el_placement_free(&p);
}

/* ---- decode-shaped products and the read-back round trip ----------------- */

static void test_decode_shape_and_sync(void) {
    /* One Q8_0 matmul, 2e7 flops, 1e7 weight bytes. cpu: 100 GFLOP/s, 20 GB/s, matmul1 20 GB/s; gpu0: 1000 GFLOP/s,
     * 100 GB/s, but streams a one-row product's weights at only 2 GB/s (dequantising without reuse).
     * rows 64 (prefill): cpu max(2e7/100e9, 1e7/20e9) = 0.5 ms; gpu0 max(2e7/1000e9, 1e7/100e9) = 0.1 ms -> gpu0.
     * rows 1 (decode):  cpu 0.5 ms (matmul1 20 GB/s = mem); gpu0 max(0.02 ms, 0.1 ms, 1e7/2e9 = 5 ms) -> cpu. */
    el_device_caps d[2] = {cpu_caps(100, 10, 20),
                           acc_caps("gpu0", EL_DEV_GPU, ALL_OPS & ~(1u << EL_OPK_HOST), ~0ull, ~0u, 1000, 100, 100, 10)};
    d[0].matmul1_gbps = 20;
    d[1].matmul1_gbps = 2;
    el_place_op op = mkop(EL_OPK_MATMUL, 0, "ffn_down", EL_TYPE_Q8_0, 2e7, -1, -1, 0);
    op.bytes_w = 1e7;
    el_sched_params sp = el_sched_default_params();
    el_placement p;
    op.rows = 64;
    CHECK(place(d, 2, &sp, &op, 1, &p) == 0);
    CHECK(p.d[0].dev == 1 && near(p.d[0].t_est[1], 1e-4) && near(p.d[0].t_est[0], 5e-4));
    el_placement_free(&p);
    op.rows = 1;
    CHECK(place(d, 2, &sp, &op, 1, &p) == 0);
    CHECK(p.d[0].dev == 0 && near(p.d[0].t_est[1], 5e-3) && near(p.d[0].t_est[0], 5e-4));
    el_placement_free(&p);
    /* the read-back round trip: op 0 matmul (rows 64) x -> y on gpu0 (0.1 ms), op 1 rmsnorm y -> z on the cpu
     * only (1e6 / 10e9 = 0.1 ms): y (4000 bytes) comes back: 4000 / 10e9 = 0.4 us + sync 250 us = 250.4 us of tax;
     * total 0.1 + 0.1 + 0.2504 ms = 0.4504 ms, still below the cpu alone (0.5 + 0.1 = 0.6 ms): gpu0 keeps the matmul */
    d[1].sync_us = 250;
    d[1].ops &= ~(1u << EL_OPK_RMSNORM);
    el_place_op ops[2] = {mkop(EL_OPK_MATMUL, 0, "ffn_down", EL_TYPE_Q8_0, 2e7, 0, 1, 4000),
                          mkop(EL_OPK_RMSNORM, 0, "norm", -1, 1e6, 1, 2, 4000)};
    ops[0].bytes_w = 1e7;
    ops[0].rows = 64;
    CHECK(place(d, 2, &sp, ops, 2, &p) == 0);
    CHECK(p.d[0].dev == 1 && p.d[1].dev == 0);
    CHECKF(near(p.t_tax, 250.4e-6 + 0.4e-6), "tax %.9g", p.t_tax); /* and the input x going up: 4000 / 10e9 */
    el_placement_free(&p);
    /* at 600 us per round trip the copy costs more than the matmul saves (0.1 + 0.1 + 0.6008 > 0.6): the cpu */
    d[1].sync_us = 600;
    CHECK(place(d, 2, &sp, ops, 2, &p) == 0);
    CHECK(p.d[0].dev == 0 && p.d[1].dev == 0);
    el_placement_free(&p);
}

int main(void) {
    test_decode_shape_and_sync();
    test_fastest_and_tolerance();
    test_fused_fallback();
    test_seed_chopped();
    test_gpu_slow_copy();
    test_memory();
    test_groups();
    test_cache_and_refusals();
    test_report();
    return el_test_finish("test_placement");
}
