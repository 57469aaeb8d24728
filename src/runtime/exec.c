/*
 * exec.c — the session's executor (contract in exec.h) and the model's
 * backend set.
 *
 * Invariants kept for every session tensor t:
 *   - t->valid != 0: some copy is current; bit 0 is the host's;
 *   - t->extent: the bytes from 0 that matter — reset to 0 for activations
 *     at the start of each pass (a pass rewrites what it reads), never for KV
 *     caches (positions persist) — so a move copies only what this pass wrote;
 *   - an op on device d sees every operand it reads valid on d, and leaves
 *     what it wrote valid on d alone.
 * The CPU-only, unmeasured session (fast) skips all of it: each op goes
 * straight to the CPU backend, which reads host memory.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "package/layout.h"
#include "memory/plan.h"
#include "runtime/model.h"
#include "sched/devcache.h"
#include "runtime/exec.h"
#include "sched/placement.h"
#include "util/error.h"

#define EXEC_PLANS 8 /* placements cached per pass shape */
#define EXEC_MAX_CONST 7 /* 3 weights, 3 biases (Q/K/V), or a norm vector, or rope factors */

typedef struct exec_const {
    const void *p;
    size_t bytes;
} exec_const;

typedef struct exec_plan {
    bool used, planned;
    int n, out_rows, embd;   /* the key */
    uint64_t last_used;
    el_place_op *ops;
    exec_const (*consts)[EXEC_MAX_CONST];
    int n_ops;
    el_placement pl;
    uint64_t runs;           /* passes run (the measured times are sums over them) */
    bool consts_ready;       /* every constant of an offloaded op is uploaded */
} exec_plan;

struct el_exec {
    el_session *s;
    el_model *m;
    int n_t;
    el_tensor *t;
    bool fast;
    bool describing;
    /* the describe pass */
    el_place_op *dops;
    exec_const (*dconsts)[EXEC_MAX_CONST];
    int n_dops, cap_dops;
    /* placements */
    exec_plan plans[EXEC_PLANS];
    uint64_t tick;
    exec_plan *cur, *last;
    int op_i;
    double part_t0;
    bool dead[EL_MAX_BACKENDS];
    int err_code;
    el_error err;
    el_exec_stats st;
    el_exec_stats flushed; /* what has been added to the model's counters */
};

size_t el_exec_bytes(int n_layer) { return sizeof(el_exec) + (size_t)(EL_T_N_FIXED + 2 * n_layer) * sizeof(el_tensor); }

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

el_exec *el_exec_new(el_session *s, el_error *err) {
    el_model *m = s->m;
    const int L = m->hp.n_layer;
    el_exec *x = malloc(el_exec_bytes(L));
    if (!x) {
        el_set_error(err, EL_ERR_NOMEM, "executor: out of memory");
        return NULL;
    }
    memset(x, 0, sizeof *x);
    x->s = s;
    x->m = m;
    x->n_t = EL_T_N_FIXED + 2 * L;
    x->t = (el_tensor *)(x + 1);
    memset(x->t, 0, sizeof(el_tensor) * (size_t)x->n_t);
    x->fast = m->n_be <= 1 && !m->measure;
    return x;
}

/* Called by session.c once the buffers are placed: host copies and capacities. */
void el_exec_bind(el_exec *x, int id, const char *name, int layer, void *host, size_t bytes) {
    el_tensor *t = &x->t[id];
    t->name = name;
    t->id = id;
    t->layer = layer;
    t->host = host;
    t->bytes = bytes;
    t->valid = 1;
    t->extent = layer >= 0 ? bytes : 0;
    t->home = layer >= 0 ? 0 : -1;
}

static void plan_clear(exec_plan *p) {
    free(p->ops);
    free(p->consts);
    if (p->planned) el_placement_free(&p->pl);
    memset(p, 0, sizeof *p);
}

void el_exec_forget_plans(el_exec *x) {
    if (!x) return;
    for (int i = 0; i < EXEC_PLANS; i++) plan_clear(&x->plans[i]);
    x->cur = x->last = NULL;
}

void el_exec_free(el_exec *x) {
    if (!x) return;
    for (int i = 0; i < x->n_t; i++)
        for (int b = 1; b < x->m->n_be; b++)
            if (x->t[i].dev[b]) x->m->be[b]->i->buf_free(x->m->be[b], x->t[i].dev[b]);
    for (int i = 0; i < EXEC_PLANS; i++) plan_clear(&x->plans[i]);
    free(x->dops);
    free(x->dconsts);
    free(x);
}

el_tensor *el_exec_tensor(el_exec *x, int id) { return id >= 0 && id < x->n_t ? &x->t[id] : NULL; }

el_tref el_exec_ref(el_exec *x, int id, size_t off, size_t n) {
    el_tref r = {&x->t[id], off * sizeof(float), n * sizeof(float)};
    return r;
}

const el_exec_stats *el_exec_get_stats(const el_exec *x) { return &x->st; }

/* ---- describing ---------------------------------------------------------- */

static uint64_t mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h;
}
static uint64_t mix_str(uint64_t h, const char *s) {
    for (; s && *s; s++) h = mix(h, (unsigned char)*s);
    return h;
}

static bool in_place(el_op_kind k) {
    return k == EL_OPK_ROPE || k == EL_OPK_SCALE || k == EL_OPK_FWHT || k == EL_OPK_SILU_MUL || k == EL_OPK_GELU_MUL ||
           k == EL_OPK_ADD || k == EL_OPK_KV_STORE || k == EL_OPK_LORA;
}

/* The model constants an op reads on a device (weights, norm vectors, biases, rope factors). */
static int op_consts(const el_op *op, exec_const out[EXEC_MAX_CONST]) {
    int n = 0;
    if (op->kind == EL_OPK_MATMUL || op->kind == EL_OPK_GET_ROWS)
        for (int i = 0; i < op->n_w && n < EXEC_MAX_CONST; i++)
            out[n++] = (exec_const){op->w[i]->data, (size_t)op->w[i]->ne1 * op->w[i]->row_bytes};
    if (op->kind == EL_OPK_RMSNORM && op->vec[0]) out[n++] = (exec_const){op->vec[0], sizeof(float) * (size_t)op->d};
    if (op->kind == EL_OPK_MATMUL)
        for (int i = 0; i < op->n_w && n < EXEC_MAX_CONST; i++)
            if (op->vec[i]) out[n++] = (exec_const){op->vec[i], sizeof(float) * (size_t)op->w[i]->ne1};
    if (op->kind == EL_OPK_ROPE && op->p.rope.rope.freq_factors && n < EXEC_MAX_CONST)
        out[n++] = (exec_const){op->p.rope.rope.freq_factors, sizeof(float) * (size_t)(op->p.rope.rope.n_rot / 2)};
    return n;
}

static void describe(el_exec *x, el_op *op) {
    if (x->n_dops == x->cap_dops) {
        const int cap = x->cap_dops ? 2 * x->cap_dops : 256;
        el_place_op *o = realloc(x->dops, sizeof *o * (size_t)cap);
        if (o) x->dops = o;
        exec_const(*c)[EXEC_MAX_CONST] = realloc(x->dconsts, sizeof *c * (size_t)cap);
        if (c) x->dconsts = c;
        if (!o || !c) {
            if (!x->err_code) x->err_code = el_set_error(&x->err, EL_ERR_NOMEM, "describing the pass: out of memory");
            return;
        }
        x->cap_dops = cap;
    }
    el_op_cost(op);
    el_place_op *p = &x->dops[x->n_dops];
    memset(p, 0, sizeof *p);
    p->kind = op->kind;
    p->layer = op->layer;
    p->site = op->site;
    p->wtype = op->n_w > 0 && op->w[0] ? (int)op->w[0]->type : -1;
    for (int i = 0; i < op->n_w; i++) /* packed rows with no flat copy: only the CPU's layout kernels read them */
        if (op->w[i] && !op->w[i]->data && op->w[i]->packed) p->wtype = el_layout_type((el_layout)op->w[i]->layout);
    p->kv_type = op->kind == EL_OPK_KV_STORE ? op->p.kv_store.type
               : op->kind == EL_OPK_ATTENTION ? op->p.attn.a.type_k : -1;
    p->flops = op->flops, p->bytes_w = op->bytes_w, p->bytes_in = op->bytes_in, p->bytes_out = op->bytes_out;
    p->rows = op->n;
    for (int i = 0; i < 3; i++) {
        p->src[i] = op->src[i].t ? op->src[i].t->id : -1;
        p->src_bytes[i] = op->src[i].t ? op->src[i].len : 0;
        p->dst[i] = op->dst[i].t ? op->dst[i].t->id : -1;
        p->dst_bytes[i] = op->dst[i].t ? op->dst[i].len : 0;
    }
    if (in_place(op->kind) && op->src[0].t == NULL) {
        /* in-place ops read what they write */
        p->src[0] = p->dst[0];
        p->src_bytes[0] = p->dst_bytes[0];
    }
    p->group = op->kind == EL_OPK_KV_STORE || op->kind == EL_OPK_ATTENTION ? 1 + op->layer : 0;
    uint64_t h = mix(0, (uint64_t)op->kind);
    h = mix_str(h, op->site);
    h = mix(h, (uint64_t)op->n), h = mix(h, (uint64_t)op->d);
    for (int i = 0; i < op->n_w; i++) {
        h = mix(h, (uint64_t)op->w[i]->type), h = mix(h, (uint64_t)op->w[i]->ne0), h = mix(h, (uint64_t)op->w[i]->ne1);
    }
    if (op->kind == EL_OPK_ATTENTION) {
        const el_attn_args *a = &op->p.attn.a;
        h = mix(h, (uint64_t)a->window), h = mix(h, (uint64_t)a->ring), h = mix(h, (uint64_t)a->type_k);
        h = mix(h, (uint64_t)a->type_v), h = mix(h, (uint64_t)a->n_head), h = mix(h, (uint64_t)a->head_dim);
    }
    if (op->kind == EL_OPK_KV_STORE) h = mix(h, (uint64_t)op->p.kv_store.type), h = mix(h, (uint64_t)op->p.kv_store.ring);
    for (int i = 0; i < 3; i++) h = mix(h, p->src_bytes[i]), h = mix(h, p->dst_bytes[i]);
    p->shape_key = h;
    const el_model *m = x->m;
    for (int b = 0; b < m->n_be; b++)
        if (!x->dead[b] && m->be[b]->i->supports(m->be[b], op)) p->runs_on |= 1u << b;
    memset(x->dconsts[x->n_dops], 0, sizeof x->dconsts[0]);
    op_consts(op, x->dconsts[x->n_dops]);
    x->n_dops++;
}

/* ---- moving operands ----------------------------------------------------- */

static void note_fallback(el_exec *x, const char *what, const el_op *op, int dev, const el_error *e) {
    x->st.fallbacks++;
    snprintf(x->st.last_fallback, sizeof x->st.last_fallback, "%s %.24s (layer %d) on %.16s: %.96s",
             el_op_kind_name(op->kind), op->site ? op->site : "", op->layer, x->m->be[dev]->caps.name,
             e && e->msg[0] ? e->msg : what);
    el_logf(x->m, EL_LOG_WARN, "fallback to cpu: %s", x->st.last_fallback);
}

/* t's buffer on device d > 0, allocated at first use. 0, or an el_status with err. */
static int dev_buf(el_exec *x, el_tensor *t, int d, el_error *err) {
    if (d == 0 || t->dev[d]) return 0;
    t->dev[d] = x->m->be[d]->i->buf_alloc(x->m->be[d], t->bytes, err);
    return t->dev[d] ? 0 : err && err->code ? (int)err->code : EL_ERR_NOMEM;
}

/* Makes t's copy on device d current. 0, or an el_status with err. */
static int need(el_exec *x, el_tensor *t, int d, el_error *err) {
    if (t->valid >> d & 1) return 0;
    el_model *m = x->m;
    const int rc = dev_buf(x, t, d, err);
    if (rc) return rc;
    const size_t n = t->extent;
    if (!(t->valid & 1)) {
        int b = 1;
        while (b < m->n_be && !(t->valid >> b & 1)) b++;
        if (b == m->n_be) return el_set_error(err, EL_ERR_INTERNAL, "tensor %s has no current copy", t->name);
        if (n && m->be[b]->i->buf_read(m->be[b], t->dev[b], 0, t->host, n, err)) return err && err->code ? err->code : EL_ERR_INTERNAL;
        x->st.bytes_moved += n;
        t->valid |= 1;
    }
    if (d != 0) {
        if (n && m->be[d]->i->buf_write(m->be[d], t->dev[d], 0, t->host, n, err)) return err && err->code ? err->code : EL_ERR_INTERNAL;
        x->st.bytes_moved += n;
        t->valid |= 1u << d;
    }
    return 0;
}

/* Every operand of op current on d (written ones allocated there; a partial
 * write first brings the rest of the tensor along). */
static int gather(el_exec *x, const el_op *op, int d, el_error *err) {
    for (int i = 0; i < 3; i++)
        if (op->src[i].t && need(x, op->src[i].t, d, err)) return -1;
    for (int i = 0; i < 3; i++) {
        el_tensor *t = op->dst[i].t;
        if (!t) continue;
        const bool covers = op->dst[i].off == 0 && op->dst[i].len >= t->extent;
        if ((i == 0 && in_place(op->kind)) || !covers) {
            if (need(x, t, d, err)) return -1;
        } else if (dev_buf(x, t, d, err)) {
            return -1;
        }
    }
    return 0;
}

static void written(const el_op *op, int d) {
    for (int i = 0; i < 3; i++) {
        el_tensor *t = op->dst[i].t;
        if (!t) continue;
        t->valid = 1u << d;
        if (op->dst[i].off + op->dst[i].len > t->extent) t->extent = op->dst[i].off + op->dst[i].len;
    }
}

static int upload(el_exec *x, int d, const exec_const *c, int n, bool async, el_error *err) {
    el_backend *be = x->m->be[d];
    if (!be->i->upload_const) return 0;
    for (int i = 0; i < n && c[i].p; i++) {
        if (be->i->upload_const(be, c[i].p, c[i].bytes, async, err)) return -1;
    }
    return 0;
}

/* Runs op on the CPU after device d could not: its operands come home first. */
static void run_on_cpu(el_exec *x, el_op *op) {
    el_error e = {0};
    el_backend *cpu = x->m->be[0];
    if (gather(x, op, 0, &e) || cpu->i->run(cpu, op, &e)) {
        if (!x->err_code) {
            x->err = e;
            x->err_code = e.code ? e.code : EL_ERR_INTERNAL;
        }
        return;
    }
    written(op, 0);
    x->st.ops[0]++;
}

void el_exec_op(el_session *s, el_op *op) {
    el_exec *x = s->exec;
    op->cpu_scratch = s->wq8;
    if (x->describing) {
        describe(x, op);
        return;
    }
    if (x->fast) {
        el_backend *cpu = x->m->be[0];
        cpu->i->run(cpu, op, NULL);
        x->st.ops[0]++;
        return;
    }
    if (x->err_code) return; /* the pass has failed: the rest is skipped */
    exec_plan *P = x->cur;
    const int i = x->op_i++;
    int d = 0;
    if (P && P->planned && i < P->n_ops && P->ops[i].kind == op->kind) d = P->pl.d[i].dev;
    el_model *m = x->m;
    const bool measure = m->measure && P && P->planned;
    int part = -1;
    if (measure) {
        for (int k = 0; k < P->pl.n_parts; k++)
            if (i >= P->pl.parts[k].op_begin && i < P->pl.parts[k].op_end) { part = k; break; }
        if (part >= 0 && i == P->pl.parts[part].op_begin) x->part_t0 = now_s();
    }
    if (d != 0 && x->dead[d]) d = 0;
    if (d != 0) {
        el_backend *be = m->be[d];
        el_error e = {0};
        const char *what = NULL;
        /* the next op's constants go up while this one computes (once per plan) */
        if (!P->consts_ready && i + 1 < P->n_ops && P->pl.d[i + 1].dev == d) upload(x, d, P->consts[i + 1], EXEC_MAX_CONST, true, &e);
        e.code = 0, e.msg[0] = 0;
        if (!be->i->supports(be, op)) what = "the device does not run it";
        else if (upload(x, d, P->consts[i], EXEC_MAX_CONST, false, &e)) what = "uploading its weights failed";
        else if (gather(x, op, d, &e)) what = "moving its operands failed";
        else if (be->i->run(be, op, &e)) {
            what = "the kernel failed";
            x->dead[d] = true; /* a device that failed mid-pass takes no more ops */
        }
        if (!what) {
            written(op, d);
            x->st.ops[d]++;
        } else {
            note_fallback(x, what, op, d, &e);
            P->pl.d[i].dev = 0;
            P->pl.d[i].why = EL_WHY_ERROR;
            P->pl.n_fallbacks++;
            run_on_cpu(x, op);
        }
    } else {
        run_on_cpu(x, op);
    }
    if (measure && part >= 0 && i == P->pl.parts[part].op_end - 1) {
        el_error e = {0};
        m->be[P->pl.parts[part].dev]->i->sync(m->be[P->pl.parts[part].dev], &e);
        P->pl.parts[part].t_meas += now_s() - x->part_t0;
    }
}

/* ---- passes ------------------------------------------------------------- */

static exec_plan *plan_for(el_exec *x, int n, el_error *err) {
    el_session *s = x->s;
    const int out_rows = s->out_rows, embd = s->embd_pool != 0;
    exec_plan *slot = NULL;
    for (int i = 0; i < EXEC_PLANS; i++) {
        exec_plan *p = &x->plans[i];
        if (p->used && p->n == n && p->out_rows == out_rows && p->embd == embd) {
            p->last_used = ++x->tick;
            return p;
        }
        if (!slot || !p->used || (slot->used && p->last_used < slot->last_used)) slot = p;
    }
    plan_clear(slot);
    /* describe the pass: the forward builds its ops, nothing runs */
    x->n_dops = 0;
    x->describing = s->describing = true;
    x->m->arch->forward(s, NULL, n);
    x->describing = s->describing = false;
    if (x->err_code) return NULL;
    slot->ops = malloc(sizeof *slot->ops * (size_t)(x->n_dops ? x->n_dops : 1));
    slot->consts = malloc(sizeof *slot->consts * (size_t)(x->n_dops ? x->n_dops : 1));
    if (!slot->ops || !slot->consts) {
        plan_clear(slot);
        el_set_error(err, EL_ERR_NOMEM, "placement: out of memory");
        return NULL;
    }
    memcpy(slot->ops, x->dops, sizeof *slot->ops * (size_t)x->n_dops);
    memcpy(slot->consts, x->dconsts, sizeof *slot->consts * (size_t)x->n_dops);
    slot->n_ops = x->n_dops;
    el_device_caps caps[EL_MAX_BACKENDS];
    for (int b = 0; b < x->m->n_be; b++) caps[b] = x->m->be[b]->caps;
    if (el_sched_place(caps, x->m->n_be, &x->m->sched, slot->ops, slot->n_ops, &slot->pl, err)) {
        plan_clear(slot);
        return NULL;
    }
    slot->planned = slot->used = true;
    slot->n = n, slot->out_rows = out_rows, slot->embd = embd;
    slot->last_used = ++x->tick;
    return slot;
}

/* The pass's counts into the model's (read by /health from any thread). */
static void flush_counts(el_exec *x) {
    el_model *m = x->m;
    for (int b = 0; b < m->n_be; b++) {
        atomic_fetch_add_explicit(&m->ops_run[b], x->st.ops[b] - x->flushed.ops[b], memory_order_relaxed);
        x->flushed.ops[b] = x->st.ops[b];
    }
    atomic_fetch_add_explicit(&m->bytes_moved, x->st.bytes_moved - x->flushed.bytes_moved, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->fallbacks, x->st.fallbacks - x->flushed.fallbacks, memory_order_relaxed);
    x->flushed.bytes_moved = x->st.bytes_moved;
    x->flushed.fallbacks = x->st.fallbacks;
}

int el_exec_forward(el_session *s, const int32_t *toks, int n, el_error *err) {
    el_exec *x = s->exec;
    if (x->fast) {
        s->m->arch->forward(s, toks, n);
        flush_counts(x);
        return 0;
    }
    x->err_code = 0;
    x->err.code = EL_OK, x->err.msg[0] = 0;
    for (int i = 0; i < EL_T_N_FIXED; i++) x->t[i].extent = 0;
    exec_plan *P = plan_for(x, n, err);
    if (!P) return err && err->code ? (int)err->code : x->err_code ? x->err_code : (int)EL_ERR_INTERNAL;
    x->cur = x->last = P;
    x->op_i = 0;
    s->m->arch->forward(s, toks, n);
    if (!x->err_code && x->op_i != P->n_ops)
        x->err_code = el_set_error(&x->err, EL_ERR_INTERNAL, "the pass ran %d ops, its description had %d", x->op_i, P->n_ops);
    if (!x->err_code) {
        P->consts_ready = true;
        P->runs++;
        el_error e = {0};
        if (need(x, &x->t[EL_T_LOGITS], 0, &e)) x->err = e, x->err_code = e.code ? e.code : EL_ERR_INTERNAL;
    }
    x->cur = NULL;
    flush_counts(x);
    if (x->err_code) {
        if (err) *err = x->err;
        return x->err_code;
    }
    return 0;
}

int el_exec_sync_host(const el_session *s, el_error *err) {
    el_exec *x = s->exec;
    if (x->fast) return 0;
    for (int i = 0; i < x->n_t; i++)
        if (x->t[i].host && need(x, &x->t[i], 0, err)) return err && err->code ? err->code : EL_ERR_INTERNAL;
    return 0;
}

void el_exec_host_wrote(el_session *s, int id) {
    el_exec *x = s->exec;
    if (id >= 0 && id < x->n_t) x->t[id].valid = 1;
}

const el_placement *el_exec_placement(const el_exec *x, int n, const el_place_op **ops) {
    const exec_plan *best = NULL;
    for (int i = 0; i < EXEC_PLANS; i++) {
        const exec_plan *p = &x->plans[i];
        if (!p->planned) continue;
        if (n > 0 ? p->n == n : p == x->last) best = p;
    }
    if (!best) return NULL;
    if (ops) *ops = best->ops;
    return &best->pl;
}

int el_exec_describe(el_session *s, int n, const el_place_op **ops, int *n_ops, el_error *err) {
    el_exec *x = s->exec;
    x->err_code = 0;
    x->n_dops = 0;
    x->describing = s->describing = true;
    x->m->arch->forward(s, NULL, n);
    x->describing = s->describing = false;
    if (x->err_code) {
        if (err) *err = x->err;
        return x->err_code;
    }
    *ops = x->dops;
    *n_ops = x->n_dops;
    return 0;
}

static void el_json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; s && *s; s++) {
        const unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

/* One plan's placement with its measured partition times as means per pass. */
static void print_plan(FILE *f, const exec_plan *P, const el_device_caps *caps, bool json) {
    el_placement pl = P->pl;
    el_partition *avg = malloc(sizeof *avg * (size_t)(pl.n_parts ? pl.n_parts : 1));
    if (avg) {
        for (int k = 0; k < pl.n_parts; k++) {
            avg[k] = pl.parts[k];
            if (P->runs) avg[k].t_meas /= (double)P->runs;
        }
        pl.parts = avg;
    }
    if (json) {
        fprintf(f, "{\"rows\":%d,\"runs\":%llu,\"placement\":", P->n, (unsigned long long)P->runs);
        el_placement_print_json(f, &pl, P->ops, caps);
        fputc('}', f);
    } else {
        fprintf(f, "\n-- pass of %d row%s%s (%llu run%s; measured times are means per pass)\n", P->n, P->n == 1 ? "" : "s",
                P->embd ? ", embedding" : P->out_rows > 1 ? ", all rows' logits" : "", (unsigned long long)P->runs,
                P->runs == 1 ? "" : "s");
        el_placement_print(f, &pl, P->ops, caps);
    }
    free(avg);
}

/* The plans that ran, largest pass first (a prefill batch, then the decode step). */
static int plans_in_order(const el_exec *x, const exec_plan *out[EXEC_PLANS]) {
    int n = 0;
    for (int i = 0; i < EXEC_PLANS; i++)
        if (x->plans[i].planned && x->plans[i].runs) out[n++] = &x->plans[i];
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && out[j]->n > out[j - 1]->n; j--) {
            const exec_plan *t = out[j];
            out[j] = out[j - 1], out[j - 1] = t;
        }
    return n;
}

void el_exec_report(const el_session *s, FILE *f, bool json) {
    const el_exec *x = s->exec;
    const el_model *m = s->m;
    const exec_plan *plans[EXEC_PLANS];
    const int np = plans_in_order(x, plans);
    el_device_caps caps[EL_MAX_BACKENDS];
    for (int b = 0; b < m->n_be; b++) caps[b] = m->be[b]->caps;
    if (!json) {
        fprintf(f, "backend: %s (%d device%s:", m->backend_req, m->n_be, m->n_be == 1 ? "" : "s");
        for (int b = 0; b < m->n_be; b++) fprintf(f, " %s [%s]", caps[b].name, caps[b].desc);
        fprintf(f, ")\n");
        if (m->backend_note[0]) fprintf(f, "note: %s\n", m->backend_note);
        if (!np) fprintf(f, "every op ran on the cpu (no placement was planned: --placement-report measures and plans)\n");
        for (int i = 0; i < np; i++) print_plan(f, plans[i], caps, false);
        fprintf(f, "\nops run:");
        for (int b = 0; b < m->n_be; b++) fprintf(f, " %s %llu", caps[b].name, (unsigned long long)x->st.ops[b]);
        fprintf(f, "; bytes moved between devices %llu; run-time fallbacks %llu%s%s%s\n",
                (unsigned long long)x->st.bytes_moved, (unsigned long long)x->st.fallbacks,
                x->st.fallbacks ? " (last: " : "", x->st.fallbacks ? x->st.last_fallback : "", x->st.fallbacks ? ")" : "");
        return;
    }
    fprintf(f, "{\"backend\":");
    el_json_str(f, m->backend_req);
    fprintf(f, ",\"devices\":[");
    for (int b = 0; b < m->n_be; b++) {
        fprintf(f, "%s", b ? "," : "");
        el_json_str(f, caps[b].name);
    }
    fprintf(f, "],\"note\":");
    el_json_str(f, m->backend_note);
    fprintf(f, ",\"ops_run\":{");
    for (int b = 0; b < m->n_be; b++) {
        fprintf(f, "%s", b ? "," : "");
        el_json_str(f, caps[b].name);
        fprintf(f, ":%llu", (unsigned long long)x->st.ops[b]);
    }
    fprintf(f, "},\"bytes_moved\":%llu,\"fallbacks\":%llu,\"last_fallback\":", (unsigned long long)x->st.bytes_moved,
            (unsigned long long)x->st.fallbacks);
    el_json_str(f, x->st.last_fallback);
    if (np) {
        /* the decode step's placement (the smallest pass) as "placement"; every pass under "passes" */
        fprintf(f, ",\"placement\":");
        el_placement pl = plans[np - 1]->pl;
        el_placement_print_json(f, &pl, plans[np - 1]->ops, caps);
        fprintf(f, ",\"passes\":[");
        for (int i = 0; i < np; i++) {
            if (i) fputc(',', f);
            print_plan(f, plans[i], caps, true);
        }
        fputc(']', f);
    }
    fprintf(f, "}");
}

void el_backends_json(const el_model *m, FILE *f) {
    fprintf(f, "{\"backend\":");
    el_json_str(f, m->backend_req);
    fprintf(f, ",\"devices\":[");
    for (int b = 0; b < m->n_be; b++) {
        const el_device_caps *c = &m->be[b]->caps;
        static const char *const kinds[] = {"cpu", "gpu", "npu", "other"};
        fprintf(f, "%s{\"name\":", b ? "," : "");
        el_json_str(f, c->name);
        fprintf(f, ",\"desc\":");
        el_json_str(f, c->desc);
        fprintf(f, ",\"kind\":\"%s\",\"ops_run\":%llu}", kinds[c->kind <= EL_DEV_OTHER ? c->kind : EL_DEV_OTHER],
                (unsigned long long)atomic_load_explicit(&((el_model *)m)->ops_run[b], memory_order_relaxed));
    }
    fprintf(f, "],\"note\":");
    el_json_str(f, m->backend_note);
    fprintf(f, ",\"bytes_moved\":%llu,\"fallbacks\":%llu}",
            (unsigned long long)atomic_load_explicit(&((el_model *)m)->bytes_moved, memory_order_relaxed),
            (unsigned long long)atomic_load_explicit(&((el_model *)m)->fallbacks, memory_order_relaxed));
}
