/*
 * placement.h — the scheduler (L4): which device runs each op of a forward
 * pass, and the evidence of why (seed 000 §5.3, seed 002).
 *
 * Input: the ops of one forward pass as the executor described them
 * (el_place_op, in execution order, with the tensors each reads and writes)
 * and a device table (el_device_caps; device 0 is the CPU, the host). For
 * each op and each device that runs it, t(op, d) = max(flops / rate,
 * bytes / bandwidth) + launch overhead. The preferred device wins when
 * within `tolerance` (1.5x) of the fastest, else the fastest; an op no
 * other device runs stays on the CPU and the fallback is recorded with its
 * reason. Every boundary — an op reading a tensor whose current copy is on
 * another device — costs bytes / fabric bandwidth (the transfer tax);
 * consecutive ops on one device share their tensors (a run of fallback ops
 * costs one transfer in and one out, not one per op). Ops of one group (a
 * layer's KV store and attention: the cache lives with them) go to one
 * device. Decisions are cached per shape key (same-shape layers are decided
 * once). If Σtax / total exceeds the budget the placement carries an alarm
 * naming the costliest boundaries; a plan whose estimate (compute + tax) is
 * worse than the CPU alone is replaced by the CPU-only plan, recorded.
 *
 * The passes of el_sched_place, in order (placement.c has the details):
 *  1. estimates t(op, d) for every device that runs the op (runs_on or
 *     el_caps_runs; a device other than the CPU also needs copy bandwidths
 *     both ways and the op's rates > 0; the CPU runs everything);
 *  2. choice per op, or per group (Σ over the group, devices running all of
 *     it), cached per shape key: force, else preferred within tolerance,
 *     else fastest (ties: the lower index, so the CPU);
 *  3. memory: walking in order, a unit whose new weights overflow its
 *     device's mem_bytes goes to the CPU (EL_WHY_MEMORY) — "the placed plan";
 *  4. the tax pass (not with force): runs of ops off the CPU whose removal
 *     improves the pass's total (compute + copies) go back to the CPU
 *     (EL_WHY_TAX) — all of them in a round when together they improve it,
 *     else the best one — until none does; a run on the preferred device
 *     stays while it costs at most (tolerance - 1) x its CPU time;
 *  5. the CPU-only comparison (not with force): the plan is replaced by the
 *     CPU alone (EL_WHY_PLAN on every op the placed plan had put elsewhere)
 *     when it is still slower than the CPU alone (x tolerance if it uses the
 *     preferred device), or when the placed plan was and the tax pass took
 *     everything back;
 *  6. the evidence: partitions, copies, tax share and alarm (about the placed
 *     plan when it broke the budget, else the final one).
 *
 * Everything here is arithmetic over the tables: no device is touched, so the
 * same code plans for simulated devices (edgellm plan --devices) and real ones.
 */
#ifndef EL_SCHED_PLACEMENT_H
#define EL_SCHED_PLACEMENT_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "backend/backend.h"

/* One op as the scheduler sees it (the executor fills these from el_op). */
typedef struct el_place_op {
    el_op_kind kind;
    int layer;                      /* -1 outside the layers */
    const char *site;               /* "attn_qkv", ... (not owned) */
    int wtype;                      /* weight el_type (matmul, get_rows); -1 none */
    int kv_type;                    /* kv_store / attention: cache el_type; -1 none */
    double flops, bytes_w, bytes_in, bytes_out;
    int rows;                       /* rows of the pass the op computes (matmul: tokens); 0: unknown */
    int src[3];                     /* tensor ids read; -1 none */
    size_t src_bytes[3];
    int dst[3];                     /* tensor ids written; -1 none */
    size_t dst_bytes[3];
    int group;                      /* > 0: every op with this group id goes to one device */
    uint64_t shape_key;             /* equal keys: equal kind, shapes, types and costs */
    uint32_t runs_on;               /* bit d: device d runs it (0: derive from the caps, el_caps_runs);
                                     * device 0 (the CPU) runs every op whatever the bits say */
    uint64_t weight_id;             /* ops with equal nonzero ids read the same weight (tied
                                     * embeddings): a device holds it once. 0: the weight is
                                     * identified by (layer, site, wtype, bytes_w) */
} el_place_op;

/* Transfers the scheduler simulates (see el_sched_place): before an op runs
 * on device d, every tensor it reads — src[i] (src_bytes[i] bytes) and, for
 * the in-place kinds (rope, scale, fwht, silu_mul, gelu_mul, add), dst[0]
 * (dst_bytes[0]) — whose current copy is not on d is copied there
 * (device -> host at the source's d2h_gbps, host -> device at d's h2d_gbps,
 * device -> device through the host: both). A tensor an op writes is then
 * current on that device only. Tensors first seen as a read are the pass's
 * inputs and start on the host; a tensor first seen as a write starts where
 * it is written (so a layer's KV cache, written by kv_store before attention
 * reads it, stays with its group). At the end of the pass the last op's
 * outputs (the logits) are read back to the host. */

/* "matmul", ... — the names el_op_kind_name gives; -1 for an unknown name. */
int el_op_kind_parse(const char *name);

/* Every rate of an el_device_caps from outside (a --devices table, the
 * capability cache) is 0 (none) or within these bounds (GFLOP/s, GB/s,
 * microseconds): estimates stay finite. */
#define EL_RATE_MIN 1e-6
#define EL_RATE_MAX 1e9

/* Whether a device with these caps runs the op (kinds, weight types, cache types). */
bool el_caps_runs(const el_device_caps *c, const el_place_op *op);

typedef struct el_sched_params {
    int prefer;          /* preferred device index; -1: none (the fastest wins) */
    double tolerance;    /* the preferred device wins within this factor of the fastest (1.5) */
    double tax_budget;   /* alarm when Σtax / total exceeds it (0.15) */
    int force;           /* >= 0: every op this device runs goes there, regardless of speed (--backend NAME) */
} el_sched_params;

el_sched_params el_sched_default_params(void);

typedef enum el_place_why {
    EL_WHY_ONLY = 0,    /* one device runs it */
    EL_WHY_PREFERRED,   /* the preferred device, within tolerance of the fastest */
    EL_WHY_FASTEST,     /* the fastest (no preference, or the preferred one too slow) */
    EL_WHY_FORCED,      /* params.force */
    EL_WHY_UNSUPPORTED, /* fallback: the wanted device does not run it */
    EL_WHY_SLOWER,      /* fallback: the preferred device beyond tolerance */
    EL_WHY_TAX,         /* moved back: its transfers cost more than it saves */
    EL_WHY_MEMORY,      /* fallback: the device's memory is full */
    EL_WHY_GROUP,       /* follows its group */
    EL_WHY_PLAN,        /* the whole partitioned plan lost to the CPU alone */
    EL_WHY_ERROR        /* fallback at run time: the device failed (set by the executor) */
} el_place_why;

const char *el_place_why_name(el_place_why w); /* "preferred", "fallback:unsupported", ... */

typedef struct el_place_decision {
    int dev;                        /* where it runs */
    int wanted;                     /* where it would have run (== dev unless a fallback) */
    el_place_why why;
    double t_est[EL_MAX_BACKENDS];  /* seconds on each device; < 0: does not run it */
} el_place_decision;

/* A maximal run of consecutive ops on one device. */
typedef struct el_partition {
    int dev, op_begin, op_end;      /* ops [op_begin, op_end) */
    double t_est;                   /* Σ op estimates */
    double t_meas;                  /* measured by the executor (0: not measured) */
    size_t bytes_in;                /* bytes moved onto dev at its start (the boundary before it) */
    double tax_est;                 /* their estimated copy time */
} el_partition;

/* One copy the plan makes: tensor `tensor` (bytes) from device `from` to
 * device `to` (device -> device goes through the host), before op `op` runs
 * (op == n_ops: the read-back of the pass's outputs). */
typedef struct el_boundary {
    int op, tensor, from, to;
    size_t bytes;
    double t;                       /* seconds */
} el_boundary;

typedef struct el_placement {
    int n_dev, n_ops;
    el_sched_params params;         /* as used (defaults filled in) */
    el_place_decision *d;           /* [n_ops] */
    int n_parts;
    el_partition *parts;            /* [n_parts] */
    double t_compute, t_tax, t_total; /* estimated seconds for the whole pass */
    double t_cpu_only;              /* the same pass all on device 0 */
    int n_fallbacks;                /* ops with dev != wanted */
    int n_shapes, n_cache_hits;     /* distinct shape keys decided; ops that reused a decision */
    int n_bounds;
    el_boundary *bounds;            /* [n_bounds] every copy of the final plan, in order */
    /* the plan as first placed (choice + memory), before the tax pass and
     * the CPU-only comparison; equal to the final figures when neither changed it */
    double placed_compute, placed_tax, placed_total;
    bool tax_alarm;                 /* the placed plan's or the final plan's Σtax / total > tax_budget */
    char alarm[512];                /* when tax_alarm: the share and the costliest boundaries */
    int n_top;                      /* when tax_alarm: the costliest boundaries (copies summed per op) */
    el_boundary top[3];             /*   of the plan the alarm is about; tensor -1 when several */
    size_t dev_weight_bytes[EL_MAX_BACKENDS]; /* weight bytes each device holds under this plan */
} el_placement;

/* Places ops[0..n_ops) on devs[0..n_dev) (devs[0]: the CPU). Returns 0, or
 * -1 with err (a table without a CPU at 0, n_dev out of range, allocation). */
int el_sched_place(const el_device_caps *devs, int n_dev, const el_sched_params *sp, const el_place_op *ops,
                   int n_ops, el_placement *out, el_error *err);
void el_placement_free(el_placement *p);

/* A device's name in a report: devs[d].name; "several" for d = -1 (copies
 * summed from several devices), "?" past n_dev. */
const char *el_place_dev_name(const el_device_caps *devs, int n_dev, int d);

/* The report (seed 002's evidence, placement_report.c): per layer where each op ran, the
 * partitions with bytes crossing each boundary and estimated vs measured
 * time, every fallback with its reason, the tax and its alarm. */
void el_placement_print(FILE *f, const el_placement *p, const el_place_op *ops, const el_device_caps *devs);
/* The same as one JSON object (no trailing newline). */
void el_placement_print_json(FILE *f, const el_placement *p, const el_place_op *ops, const el_device_caps *devs);

#endif
