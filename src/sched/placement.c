/*
 * placement.c — the placement scheduler (placement.h): which device runs
 * each op of a forward pass, with the evidence of why.
 *
 * Contract: pure arithmetic over the device table and the op list; no device
 * is touched, nothing global, the same inputs give the same placement. All
 * memory the result holds is owned by it (el_placement_free). Estimates are
 * seconds.
 *
 * Passes, in order:
 *  1. estimates: t(op, d) = max(flops / rate, bytes / mem_gbps) + launch for
 *     every device that runs the op (rate: matmul_gflops_type[wtype], else
 *     matmul_gflops, for matmul / get_rows; gflops for the rest; bytes =
 *     bytes_w + bytes_in + bytes_out). A device other than the CPU runs an op
 *     only when its caps (or runs_on) say so, it has copy bandwidths both
 *     ways and the rates the op needs are > 0.
 *  2. choice, per op or per group (a group's time on d is the sum over its
 *     ops; only devices running all of them count), cached per shape key:
 *     force > prefer within tolerance of the fastest > the fastest.
 *  3. memory: walking the ops in order, the weights a device would hold
 *     (each weight once) must fit its mem_bytes; a unit (op or group) that
 *     does not fit goes to the CPU (EL_WHY_MEMORY). This is "the placed plan".
 *  4. the tax pass (not when forced): a run of ops on a device other than the
 *     CPU whose removal makes the whole pass faster — its transfers cost more
 *     than it saves — goes back to the CPU (EL_WHY_TAX). Each round measures
 *     every run against the current plan and moves back all that gain when
 *     together they improve the total (else the one that gains most), until
 *     none gains. A run on the preferred device may cost up to
 *     (tolerance - 1) x its CPU time before it goes back.
 *  5. the CPU-only comparison (not when forced): a plan still slower than
 *     the whole pass on the CPU (times the tolerance when it uses the
 *     preferred device), or a placed plan that lost to the CPU and that the
 *     tax pass emptied, is replaced by the CPU-only plan (EL_WHY_PLAN).
 *  6. evidence: partitions, every copy, the tax share and its alarm (about
 *     the placed plan if it broke the budget, else the final one).
 * The report of a placement, as text or JSON, is placement_report.c's.
 */
#include "sched/placement.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "package/layout.h"
#include "util/error.h"

#define MAX_TENSOR_ID (1 << 24)

el_sched_params el_sched_default_params(void) {
    el_sched_params p = {.prefer = -1, .tolerance = 1.5, .tax_budget = 0.15, .force = -1};
    return p;
}

const char *el_place_why_name(el_place_why w) {
    switch (w) {
    case EL_WHY_ONLY: return "only";
    case EL_WHY_PREFERRED: return "preferred";
    case EL_WHY_FASTEST: return "fastest";
    case EL_WHY_FORCED: return "forced";
    case EL_WHY_UNSUPPORTED: return "fallback:unsupported";
    case EL_WHY_SLOWER: return "fallback:slower";
    case EL_WHY_TAX: return "fallback:tax";
    case EL_WHY_MEMORY: return "fallback:memory";
    case EL_WHY_GROUP: return "group";
    case EL_WHY_PLAN: return "fallback:plan";
    case EL_WHY_ERROR: return "fallback:error";
    }
    return "?";
}

static bool is_matmul_like(el_op_kind k) { return k == EL_OPK_MATMUL || k == EL_OPK_GET_ROWS; }
static bool uses_cache(el_op_kind k) { return k == EL_OPK_KV_STORE || k == EL_OPK_ATTENTION; }
static bool reads_dst0(el_op_kind k) {
    return k == EL_OPK_ROPE || k == EL_OPK_SCALE || k == EL_OPK_FWHT || k == EL_OPK_SILU_MUL ||
           k == EL_OPK_GELU_MUL || k == EL_OPK_ADD || k == EL_OPK_LORA;
}

bool el_caps_runs(const el_device_caps *c, const el_place_op *op) {
    if (!c || !op || (int)op->kind < 0 || op->kind >= EL_OPK_COUNT) return false;
    if (op->kind == EL_OPK_HOST && c->kind != EL_DEV_CPU) return false;
    if (!(c->ops >> op->kind & 1u)) return false;
    if (is_matmul_like(op->kind) && op->wtype >= 0) {
        /* a file's weight layout with no flat rows (package/layout.h): the CPU's layout kernels only */
        if (el_layout_of_type(op->wtype) != EL_LAYOUT_FLAT) return c->kind == EL_DEV_CPU;
        if (op->wtype >= EL_TYPE_COUNT || op->wtype >= 64 || !(c->matmul_types >> op->wtype & 1u)) return false;
    }
    if (uses_cache(op->kind) && op->kv_type >= 0) {
        if (op->kv_type >= 32 || !(c->kv_types >> op->kv_type & 1u)) return false;
    }
    return true;
}

/* ---- estimates ---------------------------------------------------------- */

static double op_rate(const el_device_caps *c, const el_place_op *op) {
    if (is_matmul_like(op->kind)) {
        if (op->wtype >= 0 && op->wtype < EL_TYPE_COUNT && c->matmul_gflops_type[op->wtype] > 0)
            return c->matmul_gflops_type[op->wtype];
        return c->matmul_gflops;
    }
    return c->gflops;
}

/* Roofline time of op on c (seconds), or -1 when a rate it needs is not > 0. */
static double op_time(const el_device_caps *c, const el_place_op *op) {
    const double rate = op_rate(c, op);
    const double bytes = op->bytes_w + op->bytes_in + op->bytes_out;
    double tc = 0, tm = 0;
    if (op->flops > 0) {
        if (!(rate > 0) || !isfinite(rate)) return -1;
        tc = op->flops / (rate * 1e9);
    }
    if (bytes > 0) {
        if (!(c->mem_gbps > 0) || !isfinite(c->mem_gbps)) return -1;
        tm = bytes / (c->mem_gbps * 1e9);
    }
    /* a decode-shaped product (a few rows) streams its weights at the device's one-row rate,
     * which on devices that dequantise without reuse is well below its memory bandwidth */
    if (is_matmul_like(op->kind) && op->rows > 0 && op->rows <= 4 && op->bytes_w > 0 && c->matmul1_gbps > 0 &&
        isfinite(c->matmul1_gbps)) {
        const double tw = op->bytes_w / (c->matmul1_gbps * 1e9);
        if (tw > tm) tm = tw;
    }
    const double launch = c->launch_us > 0 && isfinite(c->launch_us) ? c->launch_us * 1e-6 : 0;
    const double t = (tc > tm ? tc : tm) + launch;
    return isfinite(t) ? t : -1;
}

/* ---- working state ------------------------------------------------------ */

typedef struct {
    const el_device_caps *devs;
    int n_dev, n;
    const el_place_op *ops;
    el_sched_params sp;
    double *t;          /* [n][EL_MAX_BACKENDS] */
    int n_tensors;
    unsigned *valid;    /* [n_tensors] bit d: current on d; 0: not seen yet */
    int *gidx;          /* [n] the op's group index or -1 */
    int n_groups;
    int *gstart, *gcount, *gmem; /* group g: ops gmem[gstart[g] .. + gcount[g]) in order */
    int *trial;         /* [n] scratch plan */
    /* recording */
    el_boundary *bounds;
    int n_bounds, cap_bounds;
    bool record, oom;
} ctx;

#define T(c, i, d) ((c)->t[(size_t)(i) * EL_MAX_BACKENDS + (d)])

static double copy_time(const el_device_caps *devs, int from, int to, size_t bytes) {
    double t = 0;
    /* reading a result back waits for the device's queue: a round trip */
    if (from != 0 && devs[from].sync_us > 0 && isfinite(devs[from].sync_us)) t += devs[from].sync_us * 1e-6;
    if (from != 0) t += (double)bytes / (devs[from].d2h_gbps * 1e9);
    if (to != 0) t += (double)bytes / (devs[to].h2d_gbps * 1e9);
    return t;
}

static void record(ctx *c, int op, int tensor, int from, int to, size_t bytes, double t) {
    if (!c->record) return;
    if (c->n_bounds == c->cap_bounds) {
        const int cap = c->cap_bounds ? c->cap_bounds * 2 : 64;
        el_boundary *nb = realloc(c->bounds, (size_t)cap * sizeof *nb);
        if (!nb) {
            c->oom = true;
            return;
        }
        c->bounds = nb;
        c->cap_bounds = cap;
    }
    c->bounds[c->n_bounds++] = (el_boundary){.op = op, .tensor = tensor, .from = from, .to = to, .bytes = bytes, .t = t};
}

/* Makes tensor id current on device d before op `op`; returns the copy time. */
static double need(ctx *c, int op, int id, size_t bytes, int d) {
    if (id < 0 || id >= c->n_tensors) return 0;
    unsigned v = c->valid[id];
    if (!v) v = 1u; /* an input of the pass: on the host */
    if (v >> d & 1u) {
        c->valid[id] = v;
        return 0;
    }
    int from = 0;
    if (!(v & 1u))
        while (from < c->n_dev && !(v >> from & 1u)) from++;
    const double t = bytes ? copy_time(c->devs, from, d, bytes) : 0;
    if (bytes) record(c, op, id, from, d, bytes, t);
    c->valid[id] = v | 1u << d | 1u; /* through the host */
    return t;
}

/* Compute and tax of plan dev[] (and, when c->record, its copies). */
static void simulate(ctx *c, const int *dev, double *compute, double *tax) {
    double tc = 0, tt = 0;
    if (c->n_tensors) memset(c->valid, 0, (size_t)c->n_tensors * sizeof *c->valid);
    for (int i = 0; i < c->n; i++) {
        const el_place_op *o = &c->ops[i];
        const int d = dev[i];
        tc += T(c, i, d);
        for (int k = 0; k < 3; k++) tt += need(c, i, o->src[k], o->src_bytes[k], d);
        if (reads_dst0(o->kind)) tt += need(c, i, o->dst[0], o->dst_bytes[0], d);
        for (int k = 0; k < 3; k++)
            if (o->dst[k] >= 0 && o->dst[k] < c->n_tensors) c->valid[o->dst[k]] = 1u << d;
    }
    if (c->n > 0) { /* the pass's outputs go back to the host */
        const el_place_op *o = &c->ops[c->n - 1];
        for (int k = 0; k < 3; k++) tt += need(c, c->n, o->dst[k], o->dst_bytes[k], 0);
    }
    *compute = tc;
    *tax = tt;
}

static double sim_total(ctx *c, const int *dev) {
    double a, b;
    simulate(c, dev, &a, &b);
    return a + b;
}

/* ---- choice ------------------------------------------------------------- */

static void choose(const ctx *c, const double *t, int *dev, int *wanted, el_place_why *why) {
    int f = 0, nrun = 0;
    for (int d = 0; d < c->n_dev; d++) {
        if (t[d] < 0) continue;
        nrun++;
        if (t[d] < t[f]) f = d;
    }
    const int force = c->sp.force, p = c->sp.prefer;
    if (force >= 0) {
        if (t[force] >= 0) {
            *dev = *wanted = force;
            *why = EL_WHY_FORCED;
        } else {
            *dev = 0;
            *wanted = force;
            *why = EL_WHY_UNSUPPORTED;
        }
        return;
    }
    if (p >= 0) {
        if (t[p] < 0) {
            *dev = f;
            *wanted = p;
            *why = EL_WHY_UNSUPPORTED;
        } else if (t[p] <= c->sp.tolerance * t[f]) {
            *dev = *wanted = p;
            *why = nrun == 1 ? EL_WHY_ONLY : EL_WHY_PREFERRED;
        } else {
            *dev = f;
            *wanted = p;
            *why = EL_WHY_SLOWER;
        }
        return;
    }
    *dev = *wanted = f;
    *why = nrun == 1 ? EL_WHY_ONLY : EL_WHY_FASTEST;
}

static bool same_shape(const el_place_op *a, const el_place_op *b) {
    return a->kind == b->kind && a->wtype == b->wtype && a->kv_type == b->kv_type && a->runs_on == b->runs_on &&
           a->flops == b->flops && a->bytes_w == b->bytes_w && a->bytes_in == b->bytes_in &&
           a->bytes_out == b->bytes_out;
}

static uint64_t mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

typedef struct {
    uint64_t key;
    int rep; /* op index (single) or group index; -1: empty */
    bool group;
} cache_ent;

typedef struct {
    int group, idx;
} gpair;

static int gpair_cmp(const void *a, const void *b) {
    const gpair *x = a, *y = b;
    if (x->group != y->group) return x->group < y->group ? -1 : 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

static bool same_weight(const el_place_op *a, const el_place_op *b) {
    if (a->weight_id || b->weight_id) return a->weight_id == b->weight_id;
    if (a->layer != b->layer || a->wtype != b->wtype || a->bytes_w != b->bytes_w) return false;
    if (!a->site || !b->site) return a->site == b->site;
    return strcmp(a->site, b->site) == 0;
}

/* Weight bytes each device holds under plan dev[] (each weight once). */
static void weight_bytes(const ctx *c, const int *dev, size_t out[EL_MAX_BACKENDS]) {
    for (int d = 0; d < EL_MAX_BACKENDS; d++) out[d] = 0;
    for (int i = 0; i < c->n; i++) {
        const el_place_op *o = &c->ops[i];
        if (!(o->bytes_w > 0)) continue;
        bool seen = false;
        for (int j = 0; j < i && !seen; j++)
            if (dev[j] == dev[i] && c->ops[j].bytes_w > 0 && same_weight(&c->ops[j], o)) seen = true;
        if (!seen) out[dev[i]] += (size_t)o->bytes_w;
    }
}

/* Members of op i's unit (its group, or itself): *first and count via pointers. */
static const int *unit_of(const ctx *c, const int *self, int i, int *count) {
    const int g = c->gidx[i];
    if (g < 0) {
        *count = 1;
        return self;
    }
    *count = c->gcount[g];
    return c->gmem + c->gstart[g];
}

/* Pass 3: memory. */
static void memory_pass(ctx *c, int *dev, int *wanted, el_place_why *why) {
    char *done = calloc((size_t)c->n + 1, 1);
    int *held = malloc(((size_t)c->n + 1) * sizeof *held); /* ops whose weight some device holds */
    int n_held = 0;
    double used[EL_MAX_BACKENDS] = {0};
    if (!done || !held) {
        free(done);
        free(held);
        c->oom = true;
        return;
    }
    for (int i = 0; i < c->n; i++) {
        if (done[i]) continue;
        int cnt;
        const int self = i;
        const int *u = unit_of(c, &self, i, &cnt);
        for (int k = 0; k < cnt; k++) done[u[k]] = 1;
        const int d = dev[i];
        if (d == 0 || c->devs[d].mem_bytes == 0) continue;
        double add = 0;
        for (int k = 0; k < cnt; k++) {
            const el_place_op *o = &c->ops[u[k]];
            if (!(o->bytes_w > 0)) continue;
            bool seen = false;
            for (int h = 0; h < n_held && !seen; h++)
                if (dev[held[h]] == d && same_weight(&c->ops[held[h]], o)) seen = true;
            for (int k2 = 0; k2 < k && !seen; k2++)
                if (c->ops[u[k2]].bytes_w > 0 && same_weight(&c->ops[u[k2]], o)) seen = true;
            if (!seen) add += o->bytes_w;
        }
        if (used[d] + add > (double)c->devs[d].mem_bytes) {
            for (int k = 0; k < cnt; k++) {
                dev[u[k]] = 0;
                wanted[u[k]] = d;
                why[u[k]] = EL_WHY_MEMORY;
            }
        } else {
            used[d] += add;
            for (int k = 0; k < cnt; k++)
                if (c->ops[u[k]].bytes_w > 0) held[n_held++] = u[k];
        }
    }
    free(done);
    free(held);
}

/* Moves every op of run [b, e) (and of the groups they belong to) in plan[]
 * to the CPU; returns the ops' CPU time. With why != NULL records the move. */
static double move_back(const ctx *c, int *plan, int b, int e, int *wanted, el_place_why *why) {
    double cpu = 0;
    for (int i = b; i < e; i++) {
        int cnt;
        const int *u = unit_of(c, &i, i, &cnt);
        for (int k = 0; k < cnt; k++)
            if (plan[u[k]] != 0) {
                if (why) {
                    wanted[u[k]] = plan[u[k]];
                    why[u[k]] = EL_WHY_TAX;
                }
                plan[u[k]] = 0;
                cpu += T(c, u[k], 0);
            }
    }
    return cpu;
}

/* Pass 4: the tax pass. Each round measures, against the current plan, what
 * taking each run off-CPU back would gain; the runs that gain are moved back
 * together when that improves the total, else only the one that gains most.
 * Every round lowers the total, so it ends (at most one round per run). */
static void tax_pass(ctx *c, int *dev, int *wanted, el_place_why *why, int *gain_b, int *gain_e, double *gain) {
    for (;;) {
        const double base = sim_total(c, dev);
        int n_gain = 0, best = -1;
        for (int b = 0; b < c->n;) {
            int e = b + 1;
            while (e < c->n && dev[e] == dev[b]) e++;
            if (dev[b] != 0) {
                memcpy(c->trial, dev, (size_t)c->n * sizeof *dev);
                const double cpu = move_back(c, c->trial, b, e, NULL, NULL);
                const double without = sim_total(c, c->trial);
                const double allowance = dev[b] == c->sp.prefer ? (c->sp.tolerance - 1) * cpu : 0;
                const double excess = base - without - allowance;
                if (excess > 1e-9 * base) {
                    gain_b[n_gain] = b;
                    gain_e[n_gain] = e;
                    gain[n_gain] = excess;
                    if (best < 0 || excess > gain[best]) best = n_gain;
                    n_gain++;
                }
            }
            b = e;
        }
        if (n_gain == 0) return;
        bool all = false;
        if (n_gain > 1) {
            memcpy(c->trial, dev, (size_t)c->n * sizeof *dev);
            for (int k = 0; k < n_gain; k++) move_back(c, c->trial, gain_b[k], gain_e[k], NULL, NULL);
            all = sim_total(c, c->trial) < base - gain[best];
        }
        for (int k = 0; k < n_gain; k++)
            if (all || k == best) move_back(c, dev, gain_b[k], gain_e[k], wanted, why);
    }
}

/* The costliest boundaries of c->bounds (copies summed per op), at most 3. */
static int top_bounds(const ctx *c, el_boundary top[3]) {
    int n_top = 0;
    for (int a = 0; a < c->n_bounds;) {
        el_boundary s = c->bounds[a];
        int b = a + 1;
        for (; b < c->n_bounds && c->bounds[b].op == s.op; b++) {
            s.bytes += c->bounds[b].bytes;
            s.t += c->bounds[b].t;
            if (c->bounds[b].tensor != s.tensor) s.tensor = -1;
            if (c->bounds[b].from != s.from) s.from = -1;
        }
        a = b;
        int pos = n_top < 3 ? n_top : 3;
        while (pos > 0 && top[pos - 1].t < s.t) pos--;
        if (pos < 3) {
            for (int k = (n_top < 3 ? n_top : 2); k > pos; k--) top[k] = top[k - 1];
            top[pos] = s;
            if (n_top < 3) n_top++;
        }
    }
    return n_top;
}

const char *el_place_dev_name(const el_device_caps *devs, int n_dev, int d) {
    if (d < 0) return "several";
    return d < n_dev ? devs[d].name : "?";
}

static void describe_bound(char *buf, size_t cap, const el_boundary *b, const el_place_op *ops, int n_ops,
                           const el_device_caps *devs, int n_dev) {
    char where[96];
    if (b->op >= n_ops) snprintf(where, sizeof where, "end of pass (outputs)");
    else {
        const el_place_op *o = &ops[b->op];
        snprintf(where, sizeof where, "L%d %s (%s)", o->layer, o->site ? o->site : "-", el_op_kind_name(o->kind));
        for (char *q = where; *q; q++)
            if ((unsigned char)*q < 0x20 || *q == 0x7f) *q = '?';
    }
    snprintf(buf, cap, "%s %s->%s %zu B %.3f ms", where, el_place_dev_name(devs, n_dev, b->from),
             el_place_dev_name(devs, n_dev, b->to), b->bytes, b->t * 1e3);
}

static void free_ctx(ctx *c) {
    free(c->t);
    free(c->valid);
    free(c->gidx);
    free(c->gstart);
    free(c->gcount);
    free(c->gmem);
    free(c->trial);
    free(c->bounds);
}

void el_placement_free(el_placement *p) {
    if (!p) return;
    free(p->d);
    free(p->parts);
    free(p->bounds);
    memset(p, 0, sizeof *p);
}

int el_sched_place(const el_device_caps *devs, int n_dev, const el_sched_params *spp, const el_place_op *ops,
                   int n_ops, el_placement *out, el_error *err) {
    if (!out) return el_set_error(err, EL_ERR_INVALID_ARG, "placement: no output"), -1;
    memset(out, 0, sizeof *out);
    if (!devs || n_dev < 1 || n_dev > EL_MAX_BACKENDS)
        return el_set_error(err, EL_ERR_INVALID_ARG, "placement: %d devices (1..%d, the CPU first)", n_dev,
                            EL_MAX_BACKENDS), -1;
    if (devs[0].kind != EL_DEV_CPU)
        return el_set_error(err, EL_ERR_INVALID_ARG, "placement: device 0 (%s) is not the CPU", devs[0].name), -1;
    /* a second device of kind CPU is a backend of its own (an OpenCL CPU device
     * such as PoCL, with buffers of its own): planned like any other device */
    if (n_ops < 0 || (n_ops > 0 && !ops))
        return el_set_error(err, EL_ERR_INVALID_ARG, "placement: %d ops", n_ops), -1;
    el_sched_params sp = spp ? *spp : el_sched_default_params();
    if (sp.prefer < -1 || sp.prefer >= n_dev || sp.force < -1 || sp.force >= n_dev)
        return el_set_error(err, EL_ERR_INVALID_ARG, "placement: prefer %d / force %d: no such device (0..%d)",
                            sp.prefer, sp.force, n_dev - 1), -1;
    if (!(sp.tolerance >= 1) || !isfinite(sp.tolerance))
        return el_set_error(err, EL_ERR_INVALID_ARG, "placement: tolerance %g (must be >= 1)", sp.tolerance), -1;
    if (!(sp.tax_budget >= 0) || !isfinite(sp.tax_budget))
        return el_set_error(err, EL_ERR_INVALID_ARG, "placement: tax budget %g (must be >= 0)", sp.tax_budget), -1;

    ctx c = {.devs = devs, .n_dev = n_dev, .n = n_ops, .ops = ops, .sp = sp};
    out->n_dev = n_dev;
    out->n_ops = n_ops;
    out->params = sp;
    const size_t n1 = (size_t)n_ops + 1;
    int *dev = malloc(n1 * sizeof *dev), *wanted = malloc(n1 * sizeof *wanted);
    int *dev0 = malloc(n1 * sizeof *dev0);
    el_place_why *why = malloc(n1 * sizeof *why);
    cache_ent *cache = NULL;
    size_t cache_cap = 16;
    while (cache_cap < 2 * n1) cache_cap *= 2;
    cache = malloc(cache_cap * sizeof *cache);
    c.t = malloc(n1 * EL_MAX_BACKENDS * sizeof *c.t);
    c.gidx = malloc(n1 * sizeof *c.gidx);
    c.trial = malloc(n1 * sizeof *c.trial);
    out->d = calloc(n1, sizeof *out->d);
    gpair *gp = malloc(n1 * sizeof *gp);
    int rc = -1;
    if (!dev || !wanted || !dev0 || !why || !cache || !c.t || !c.gidx || !c.trial || !out->d || !gp) {
        el_set_error(err, EL_ERR_NOMEM, "placement: out of memory for %d ops", n_ops);
        goto done;
    }

    /* validate the ops; tensor ids; groups */
    int max_id = -1, n_gp = 0;
    for (int i = 0; i < n_ops; i++) {
        const el_place_op *o = &ops[i];
        const double v[4] = {o->flops, o->bytes_w, o->bytes_in, o->bytes_out};
        for (int k = 0; k < 4; k++)
            if (!(v[k] >= 0) || !isfinite(v[k])) {
                el_set_error(err, EL_ERR_INVALID_ARG, "placement: op %d (L%d %s): cost %g is not a finite number >= 0",
                             i, o->layer, o->site ? o->site : "-", v[k]);
                goto done;
            }
        if ((int)o->kind < 0 || o->kind >= EL_OPK_COUNT) {
            el_set_error(err, EL_ERR_INVALID_ARG, "placement: op %d: kind %d", i, (int)o->kind);
            goto done;
        }
        for (int k = 0; k < 3; k++) {
            const int ids[2] = {o->src[k], o->dst[k]};
            for (int h = 0; h < 2; h++) {
                if (ids[h] >= MAX_TENSOR_ID) {
                    el_set_error(err, EL_ERR_INVALID_ARG, "placement: op %d: tensor id %d (max %d)", i, ids[h],
                                 MAX_TENSOR_ID - 1);
                    goto done;
                }
                if (ids[h] > max_id) max_id = ids[h];
            }
        }
        c.gidx[i] = -1;
        if (o->group > 0) gp[n_gp++] = (gpair){o->group, i};
    }
    c.n_tensors = max_id + 1;
    c.valid = calloc((size_t)c.n_tensors + 1, sizeof *c.valid);
    qsort(gp, (size_t)n_gp, sizeof *gp, gpair_cmp);
    c.gstart = malloc(n1 * sizeof *c.gstart);
    c.gcount = malloc(n1 * sizeof *c.gcount);
    c.gmem = malloc(n1 * sizeof *c.gmem);
    if (!c.valid || !c.gstart || !c.gcount || !c.gmem) {
        el_set_error(err, EL_ERR_NOMEM, "placement: out of memory for %d tensors", c.n_tensors);
        goto done;
    }
    for (int k = 0; k < n_gp; k++) {
        if (k == 0 || gp[k].group != gp[k - 1].group) {
            c.gstart[c.n_groups] = k;
            c.gcount[c.n_groups] = 0;
            c.n_groups++;
        }
        c.gmem[k] = gp[k].idx;
        c.gcount[c.n_groups - 1]++;
        c.gidx[gp[k].idx] = c.n_groups - 1;
    }

    /* pass 1: estimates */
    for (int i = 0; i < n_ops; i++) {
        const el_place_op *o = &ops[i];
        for (int d = 0; d < EL_MAX_BACKENDS; d++) {
            double t = -1;
            if (d < n_dev) {
                const el_device_caps *cd = &devs[d];
                const bool runs = d == 0 || (o->kind != EL_OPK_HOST && /* host memory only */
                                                (o->runs_on ? (o->runs_on >> d & 1u) != 0 : el_caps_runs(cd, o)));
                const bool copies = d == 0 || (cd->h2d_gbps > 0 && isfinite(cd->h2d_gbps) && cd->d2h_gbps > 0 &&
                                               isfinite(cd->d2h_gbps));
                if (runs && copies) t = op_time(cd, o);
                if (d == 0 && t < 0) {
                    el_set_error(err, EL_ERR_INVALID_ARG,
                                 "placement: the CPU (%s) has no rate for op %d (L%d %s, %s): its %s and mem_gbps "
                                 "must be > 0",
                                 cd->name, i, o->layer, o->site ? o->site : "-", el_op_kind_name(o->kind),
                                 is_matmul_like(o->kind) ? "matmul_gflops" : "gflops");
                    goto done;
                }
            }
            T(&c, i, d) = t;
            out->d[i].t_est[d] = t;
        }
    }

    /* pass 2: choice, cached per shape key */
    for (size_t k = 0; k < cache_cap; k++) cache[k].rep = -1;
    char *decided = calloc(n1, 1);
    if (!decided) {
        el_set_error(err, EL_ERR_NOMEM, "placement: out of memory");
        goto done;
    }
    for (int i = 0; i < n_ops; i++) {
        if (decided[i]) continue;
        int cnt;
        const int *u = unit_of(&c, &i, i, &cnt);
        const bool grp = c.gidx[i] >= 0;
        uint64_t key = grp ? 0x6772ull : 0;
        bool keyed = true;
        for (int k = 0; k < cnt; k++) {
            if (!ops[u[k]].shape_key) keyed = false;
            key = grp ? mix(key, ops[u[k]].shape_key) : ops[u[k]].shape_key;
        }
        if (grp) key = mix(key, (uint64_t)cnt);
        int rep = -1;
        size_t slot = 0;
        if (keyed) {
            slot = (size_t)(key * 0x9e3779b97f4a7c15ull >> 20) & (cache_cap - 1);
            while (cache[slot].rep >= 0 && !(cache[slot].key == key && cache[slot].group == grp))
                slot = (slot + 1) & (cache_cap - 1);
            if (cache[slot].rep >= 0) {
                rep = cache[slot].rep;
                /* equal keys promise equal shapes; a key that lies is decided afresh */
                if (grp) {
                    const int g = rep;
                    if (c.gcount[g] != cnt) rep = -2;
                    for (int k = 0; rep >= 0 && k < cnt; k++)
                        if (!same_shape(&ops[c.gmem[c.gstart[g] + k]], &ops[u[k]])) rep = -2;
                } else if (!same_shape(&ops[rep], &ops[i])) {
                    rep = -2;
                }
            }
        }
        if (rep >= 0) {
            for (int k = 0; k < cnt; k++) {
                const int src = grp ? c.gmem[c.gstart[rep] + k] : rep;
                dev[u[k]] = dev[src];
                wanted[u[k]] = wanted[src];
                why[u[k]] = why[src];
                decided[u[k]] = 1;
            }
            out->n_cache_hits += cnt;
            continue;
        }
        out->n_shapes++;
        if (keyed && rep == -1) {
            cache[slot].key = key;
            cache[slot].group = grp;
            cache[slot].rep = grp ? c.gidx[i] : i;
        }
        double tg[EL_MAX_BACKENDS];
        for (int d = 0; d < EL_MAX_BACKENDS; d++) {
            tg[d] = 0;
            for (int k = 0; k < cnt; k++) {
                const double t = T(&c, u[k], d);
                if (t < 0 || tg[d] < 0) tg[d] = -1;
                else tg[d] += t;
            }
        }
        int gd, gw;
        el_place_why gy;
        choose(&c, tg, &gd, &gw, &gy);
        for (int k = 0; k < cnt; k++) {
            dev[u[k]] = gd;
            wanted[u[k]] = gw;
            why[u[k]] = gy;
            decided[u[k]] = 1;
            if (grp && gd == gw) { /* an op the group carries where it would not have gone alone */
                int od, ow;
                el_place_why oy;
                choose(&c, &T(&c, u[k], 0), &od, &ow, &oy);
                if (od != gd) why[u[k]] = EL_WHY_GROUP;
            }
        }
    }
    free(decided);

    /* pass 3: memory (the placed plan) */
    memory_pass(&c, dev, wanted, why);
    if (c.oom) {
        el_set_error(err, EL_ERR_NOMEM, "placement: out of memory");
        goto done;
    }
    memcpy(dev0, dev, (size_t)n_ops * sizeof *dev);
    simulate(&c, dev0, &out->placed_compute, &out->placed_tax);
    out->placed_total = out->placed_compute + out->placed_tax;
    for (int i = 0; i < n_ops; i++) c.trial[i] = 0;
    out->t_cpu_only = sim_total(&c, c.trial);

    bool replaced = false;
    if (sp.force < 0) {
        /* pass 4: the tax pass */
        int *gb = malloc(n1 * sizeof *gb), *ge = malloc(n1 * sizeof *ge);
        double *gg = malloc(n1 * sizeof *gg);
        if (!gb || !ge || !gg) {
            free(gb);
            free(ge);
            free(gg);
            el_set_error(err, EL_ERR_NOMEM, "placement: out of memory");
            goto done;
        }
        tax_pass(&c, dev, wanted, why, gb, ge, gg);
        free(gb);
        free(ge);
        free(gg);
        /* pass 5: the CPU-only comparison */
        bool p0_off = false, p1_off = false, p0_pref = false, p1_pref = false;
        for (int i = 0; i < n_ops; i++) {
            p0_off |= dev0[i] != 0;
            p1_off |= dev[i] != 0;
            p0_pref |= sp.prefer > 0 && dev0[i] == sp.prefer;
            p1_pref |= sp.prefer > 0 && dev[i] == sp.prefer;
        }
        const double eps = 1e-12 * out->t_cpu_only;
        const double lim1 = out->t_cpu_only * (p1_pref ? sp.tolerance : 1) + eps;
        const double lim0 = out->t_cpu_only * (p0_pref ? sp.tolerance : 1) + eps;
        const double t1 = sim_total(&c, dev);
        if ((p1_off && t1 > lim1) || (!p1_off && p0_off && out->placed_total > lim0)) {
            replaced = true;
            for (int i = 0; i < n_ops; i++) {
                if (dev0[i] != 0 || dev[i] != 0) {
                    wanted[i] = dev0[i] != 0 ? dev0[i] : dev[i];
                    why[i] = EL_WHY_PLAN;
                }
                dev[i] = 0;
            }
        }
    }

    /* pass 6: evidence */
    for (int i = 0; i < n_ops; i++) {
        out->d[i].dev = dev[i];
        out->d[i].wanted = wanted[i];
        out->d[i].why = why[i];
        if (dev[i] != wanted[i]) out->n_fallbacks++;
    }
    weight_bytes(&c, dev, out->dev_weight_bytes);
    const double share0 = out->placed_total > 0 ? out->placed_tax / out->placed_total : 0;
    c.record = true;
    simulate(&c, dev0, &(double){0}, &(double){0});
    el_boundary top0[3];
    const int n_top0 = top_bounds(&c, top0);
    c.n_bounds = 0;
    simulate(&c, dev, &out->t_compute, &out->t_tax);
    if (c.oom) {
        el_set_error(err, EL_ERR_NOMEM, "placement: out of memory");
        goto done;
    }
    out->t_total = out->t_compute + out->t_tax;
    const double share = out->t_total > 0 ? out->t_tax / out->t_total : 0;
    out->bounds = c.bounds;
    out->n_bounds = c.n_bounds;
    c.bounds = NULL;
    if (share0 > sp.tax_budget || share > sp.tax_budget) {
        const bool about_placed = share0 > sp.tax_budget;
        out->tax_alarm = true;
        if (about_placed) {
            out->n_top = n_top0;
            memcpy(out->top, top0, sizeof top0);
        } else {
            c.bounds = out->bounds;
            c.n_bounds = out->n_bounds;
            out->n_top = top_bounds(&c, out->top);
            c.bounds = NULL;
        }
        size_t len = (size_t)snprintf(out->alarm, sizeof out->alarm,
                                      "transfer tax %.1f%% of the %s plan's %.3f ms (budget %.0f%%)%s; costliest:",
                                      100 * (about_placed ? share0 : share), about_placed ? "placed" : "final",
                                      1e3 * (about_placed ? out->placed_total : out->t_total), 100 * sp.tax_budget,
                                      !about_placed       ? ""
                                      : replaced          ? ", replaced by the CPU-only plan"
                                      : share0 != share   ? ", reduced by the tax pass"
                                                          : "");
        for (int k = 0; k < out->n_top && len < sizeof out->alarm; k++) {
            char b[640];
            describe_bound(b, sizeof b, &out->top[k], ops, n_ops, devs, n_dev);
            len += (size_t)snprintf(out->alarm + len, sizeof out->alarm - len, "%s %s", k ? ";" : "", b);
        }
    }

    /* partitions */
    int np = 0;
    for (int i = 0; i < n_ops; i++)
        if (i == 0 || dev[i] != dev[i - 1]) np++;
    out->parts = calloc((size_t)np + 1, sizeof *out->parts);
    if (!out->parts) {
        el_set_error(err, EL_ERR_NOMEM, "placement: out of memory");
        goto done;
    }
    for (int i = 0; i < n_ops; i++) {
        if (i == 0 || dev[i] != dev[i - 1]) {
            out->parts[out->n_parts++] = (el_partition){.dev = dev[i], .op_begin = i, .op_end = i};
        }
        el_partition *p = &out->parts[out->n_parts - 1];
        p->op_end = i + 1;
        p->t_est += T(&c, i, dev[i]);
    }
    for (int b = 0, p = 0; b < out->n_bounds; b++) {
        while (p < out->n_parts && out->parts[p].op_end <= out->bounds[b].op) p++;
        if (p == out->n_parts) break;
        out->parts[p].bytes_in += out->bounds[b].bytes;
        out->parts[p].tax_est += out->bounds[b].t;
    }
    rc = 0;

done:
    free(dev);
    free(wanted);
    free(dev0);
    free(why);
    free(cache);
    free(gp);
    free_ctx(&c);
    if (rc) el_placement_free(out);
    return rc;
}
