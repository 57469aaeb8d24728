/*
 * cmd_plan.c — `edgellm plan`: the capacity plan (memory/capacity.h) of a
 * model file (-m) or of a model shape that is not on disk (--shape,
 * --weights) against a device budget (--device-mem, --reserve; default this
 * machine's MemAvailable or cgroup room, whichever is lower): for each KV
 * cache type the largest context one session can have and how many
 * sessions of -c tokens fit, as a table or with --json one JSON object.
 * A mixture-of-experts model's line "experts" says how much of the weights
 * are routed experts and how much of that one token reads (n_used of
 * n_expert per layer), besides the routers and shared experts every token reads;
 * the line "resident" how much of the experts stay resident (--expert-budget
 * SIZE|PCT%, else all when the budget holds them, else what fits beside one
 * session of -c tokens: memory/experts.h), and the weights then counted.
 * Every size and shape is parsed strictly; a bad value, a budget below the
 * weights, or -c 0 / beyond the model's context is a usage error naming
 * the value, printed before the model is loaded or anything allocated.
 */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "memory/capacity.h"
#include "package/gguf.h"
#include "runtime/model.h"
#include "sched/devices_json.h"
#include "runtime/exec.h"
#include "sched/placement.h"

static double mib(uint64_t b) { return (double)b / (1024.0 * 1024.0); }

static int parse_int(const char *val, int lo, int hi, int *out) {
    if (!val || !*val) return -1;
    char *end;
    long long v = strtoll(val, &end, 10);
    if (*end || v < lo || v > hi) return -1;
    *out = (int)v;
    return 0;
}

typedef struct plan_args {
    const char *model, *shape;
    uint64_t weights, device, reserve, overhead;
    bool have_weights, have_device, have_reserve, have_overhead, json;
    int n_ctx, n_batch, n_threads;
    int type_k, type_v; /* -ctk / -ctv (el_cache_type); sel: one was given */
    bool sel;
    const char *devices;  /* --devices TABLE: the placement plan on simulated devices */
    const char *prefer;   /* --prefer NAME */
    double tax_budget;    /* --tax-budget F (0: the default) */
    uint64_t expert_budget; /* --expert-budget SIZE (MoE; 0: not given) */
    double expert_pct;      /* --expert-budget PCT% */
} plan_args;

static int parse_plan_args(int argc, char **argv, plan_args *a) {
    char e[256];
    for (int i = 2; i < argc; i++) {
        const char *o = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED_VAL() do { if (!v) return cli_usage_error("plan", "option '%s' needs a value", o); i++; } while (0)
#define SIZE_OPT(field, have) do { NEED_VAL(); if (el_parse_size(v, &a->field, e, sizeof e)) return cli_usage_error("plan", "%s: %s", o, e); a->have = true; } while (0)
        if (!strcmp(o, "-m") || !strcmp(o, "--model")) { NEED_VAL(); a->model = v; }
        else if (!strcmp(o, "--shape")) { NEED_VAL(); a->shape = v; }
        else if (!strcmp(o, "--weights")) SIZE_OPT(weights, have_weights);
        else if (!strcmp(o, "--device-mem")) SIZE_OPT(device, have_device);
        else if (!strcmp(o, "--reserve")) SIZE_OPT(reserve, have_reserve);
        else if (!strcmp(o, "--overhead")) SIZE_OPT(overhead, have_overhead);
        else if (!strcmp(o, "-c") || !strcmp(o, "--ctx-size")) {
            NEED_VAL();
            if (parse_int(v, 1, 1 << 24, &a->n_ctx)) return cli_usage_error("plan", "%s: expected a context in [1, 16777216], got '%s'", o, v);
        } else if (!strcmp(o, "-b") || !strcmp(o, "--batch-size")) {
            NEED_VAL();
            if (parse_int(v, 1, 1 << 24, &a->n_batch)) return cli_usage_error("plan", "%s: expected a batch in [1, 16777216], got '%s'", o, v);
        } else if (!strcmp(o, "-t") || !strcmp(o, "--threads")) {
            NEED_VAL();
            if (parse_int(v, 1, 1024, &a->n_threads)) return cli_usage_error("plan", "%s: expected threads in [1, 1024], got '%s'", o, v);
        } else if (!strcmp(o, "-ctk") || !strcmp(o, "--cache-type-k") || !strcmp(o, "-ctv") || !strcmp(o, "--cache-type-v")) {
            NEED_VAL();
            const int t = el_cache_type_parse(v);
            if (t < 0) return cli_usage_error("plan", "%s: '%s' is not a KV cache type (f16, bf16, q8_0, q4_0)", o, v);
            *(!strcmp(o, "-ctk") || !strcmp(o, "--cache-type-k") ? &a->type_k : &a->type_v) = t;
            a->sel = true;
        } else if (!strcmp(o, "--json")) a->json = true;
        else if (!strcmp(o, "--expert-budget")) {
            NEED_VAL();
            const size_t L = strlen(v);
            if (L > 1 && v[L - 1] == '%') {
                char *end;
                a->expert_pct = strtod(v, &end);
                if (end != v + L - 1 || !(a->expert_pct > 0 && a->expert_pct <= 100))
                    return cli_usage_error("plan", "--expert-budget: '%s' is not a percentage in (0, 100]", v);
            } else {
                if (el_parse_size(v, &a->expert_budget, e, sizeof e)) return cli_usage_error("plan", "%s: %s", o, e);
                if (!a->expert_budget) return cli_usage_error("plan", "--expert-budget: '%s' is zero", v);
            }
        }
        else if (!strcmp(o, "--devices")) { NEED_VAL(); a->devices = v; }
        else if (!strcmp(o, "--prefer")) { NEED_VAL(); a->prefer = v; }
        else if (!strcmp(o, "--tax-budget")) {
            NEED_VAL();
            char *end;
            a->tax_budget = strtod(v, &end);
            if (end == v || *end || !(a->tax_budget > 0 && a->tax_budget <= 1))
                return cli_usage_error("plan", "--tax-budget: expected a share in (0, 1], got '%s'", v);
        }
        else return cli_usage_error("plan", "unknown option '%s'", o);
#undef NEED_VAL
#undef SIZE_OPT
    }
    if (!a->model == !a->shape) return cli_usage_error("plan", "give -m MODEL or --shape SHAPE --weights SIZE");
    if (a->shape && !a->have_weights) return cli_usage_error("plan", "--shape needs --weights SIZE");
    if (a->model && a->have_weights) return cli_usage_error("plan", "--weights is for --shape (a model file's weights are read from it)");
    if (a->devices && !a->model) return cli_usage_error("plan", "--devices plans a model's ops: give -m MODEL");
    if ((a->prefer || a->tax_budget > 0) && !a->devices) return cli_usage_error("plan", "--prefer and --tax-budget go with --devices");
    return -1;
}

/*
 * plan --devices TABLE: the model's passes (a decode step of 1 row and a
 * prefill batch of -b rows) described by the executor and placed by the
 * scheduler on the table's devices (the host: the table's cpu, else this
 * machine's measured CPU). Simulation: plans and reports, never a speed.
 */
static int plan_devices(const plan_args *a) {
    el_error err = {0};
    el_backend_params bp = {.backend = "cpu", .measure = true}; /* the host's rates: measured or from the cache */
    el_model_params mp = el_model_default_params();
    mp.n_threads = a->n_threads;
    mp.backend = &bp;
    el_model *m = el_model_load(a->model, &mp, &err);
    if (!m) return cli_fail(&err);
    el_device_caps devs[EL_MAX_BACKENDS];
    const int n_dev = el_devices_load(a->devices, &m->be[0]->caps, devs, &err);
    if (n_dev < 0) {
        el_model_free(m);
        return cli_fail(&err);
    }
    el_sched_params sp = el_sched_default_params();
    if (a->tax_budget > 0) sp.tax_budget = a->tax_budget;
    if (a->prefer) {
        for (int d = 0; d < n_dev; d++)
            if (!strcmp(devs[d].name, a->prefer)) sp.prefer = d;
        if (sp.prefer < 0) {
            el_model_free(m);
            return cli_usage_error("plan", "--prefer %s: the table has no such device", a->prefer);
        }
    }
    el_session_params ssp = el_session_default_params();
    ssp.n_ctx = a->n_ctx > 0 ? a->n_ctx : 512;
    ssp.n_batch = a->n_batch;
    ssp.type_k = a->type_k, ssp.type_v = a->type_v;
    el_session *s = el_session_new(m, &ssp, &err);
    if (!s) {
        el_model_free(m);
        return cli_fail(&err);
    }
    int code = CLI_EXIT_OK;
    const int rows[2] = {1, ssp.n_batch < ssp.n_ctx ? ssp.n_batch : ssp.n_ctx};
    const char *what[2] = {"decode (1 row)", "prefill"};
    if (a->json) printf("{\"simulated\":true,\"devices\":\"%s\",\"passes\":[", a->devices);
    for (int k = 0; k < 2; k++) {
        const el_place_op *dops;
        int n_ops;
        if (el_exec_describe(s, rows[k], &dops, &n_ops, &err)) { code = cli_fail(&err); break; }
        el_place_op *ops = malloc(sizeof *ops * (size_t)(n_ops ? n_ops : 1));
        if (!ops) { code = cli_failf("out of memory"); break; }
        memcpy(ops, dops, sizeof *ops * (size_t)n_ops);
        for (int i = 0; i < n_ops; i++) ops[i].runs_on = 0; /* from the table's caps, not this machine's backends */
        el_placement pl;
        if (el_sched_place(devs, n_dev, &sp, ops, n_ops, &pl, &err)) {
            free(ops);
            code = cli_fail(&err);
            break;
        }
        if (a->json) {
            printf("%s{\"pass\":\"%s\",\"rows\":%d,\"placement\":", k ? "," : "", k ? "prefill" : "decode", rows[k]);
            el_placement_print_json(stdout, &pl, ops, devs);
            printf("}");
        } else {
            printf("%s== %s, %d row%s: SIMULATED placement on %s (the table's rates; no speed is measured) ==\n", k ? "\n" : "",
                   what[k], rows[k], rows[k] == 1 ? "" : "s", a->devices);
            el_placement_print(stdout, &pl, ops, devs);
        }
        el_placement_free(&pl);
        free(ops);
    }
    if (a->json && code == CLI_EXIT_OK) printf("]}\n");
    el_session_free(s);
    el_model_free(m);
    return code;
}

static const el_kv_type file_types[] = {EL_KV_F16, EL_KV_BF16, EL_KV_Q8_0, EL_KV_Q4_0};
static const el_kv_type shape_types[] = {EL_KV_F16, EL_KV_INT8, EL_KV_INT4, EL_KV_BF16, EL_KV_Q8_0, EL_KV_Q4_0};

static const char *status_of(el_kv_type t, const el_mem_shape *sh) {
    if (el_kv_type_implemented(t))
        return el_kv_type_cache(t) == EL_CACHE_F16 || sh->head_dim % 32 == 0 ? "runtime" : "head size % 32 != 0";
    if (t == EL_KV_INT8 || t == EL_KV_INT4) return "seed ideal (no scales)";
    return "planned only";
}

int cli_cmd_plan(int argc, char **argv) {
    plan_args a = {.n_batch = 512};
    int rc = parse_plan_args(argc, argv, &a);
    if (rc >= 0) return rc;
    if (a.devices) return plan_devices(&a);

    /* the budget, before anything is loaded */
    const char *src = "--device-mem";
    uint64_t device = a.device;
    if (!a.have_device) {
        device = el_mem_device_available(&src);
        if (!device) return cli_failf("cannot read the device memory (/proc/meminfo, cgroup); give --device-mem SIZE");
    }
    if (a.reserve >= device)
        return cli_usage_error("plan", "--reserve %.1f MiB is not below the device memory %.1f MiB", mib(a.reserve), mib(device));
    el_mem_request r = {.budget = device - a.reserve, .n_batch = a.n_batch};
    const uint64_t runtime_rss = a.model ? el_mem_runtime_bytes(1) : 0;
    uint64_t runtime_threads = 0;

    el_model *m = NULL;
    uint64_t tensor_bytes = 0, meta_bytes = 0, pad_bytes = 0, owned = 0;
    if (a.shape) {
        char e[256];
        if (el_parse_shape(a.shape, &r.shape, e, sizeof e)) return cli_usage_error("plan", "--shape: %s", e);
        r.weights = a.weights;
        r.runtime = a.overhead;
        if (a.n_ctx == 0) a.n_ctx = r.shape.n_ctx_max > 0 && r.shape.n_ctx_max < 4096 ? r.shape.n_ctx_max : 4096;
    } else {
        const long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        const int nt = a.n_threads > 0 ? a.n_threads : ncpu > 0 ? (int)ncpu : 1;
        const uint64_t with_threads = el_mem_runtime_bytes(nt);
        runtime_threads = with_threads > runtime_rss ? with_threads - runtime_rss : 0;
        el_error err = {0};
        el_model_params mp = el_model_default_params();
        mp.n_threads = 1; /* planning runs nothing */
        m = el_model_load(a.model, &mp, &err);
        if (!m) return cli_fail(&err);
        r.model = &m->mem;
        el_mem_shape_of(&m->mem, &r.shape);
        r.weights = el_model_weights_bytes(m);
        r.runtime = runtime_rss + runtime_threads + a.overhead;
        const int64_t nt_t = el_gguf_n_tensors(m->gguf);
        const uint8_t *base = el_gguf_base(m->gguf), *first = NULL;
        for (int64_t i = 0; i < nt_t; i++) {
            const el_gguf_tensor *t = el_gguf_tensor_at(m->gguf, i);
            tensor_bytes += t->nbytes;
            if (!first || (const uint8_t *)t->data < first) first = t->data;
        }
        meta_bytes = first ? (uint64_t)(first - base) : el_gguf_file_size(m->gguf);
        pad_bytes = el_gguf_file_size(m->gguf) - meta_bytes - tensor_bytes;
        owned = m->owned_bytes;
        const int def = r.shape.n_ctx_max > 0 && r.shape.n_ctx_max < 4096 ? r.shape.n_ctx_max : 4096;
        if (a.n_ctx == 0) a.n_ctx = def;
        if (r.shape.n_ctx_max > 0 && a.n_ctx > r.shape.n_ctx_max) {
            el_model_free(m);
            return cli_usage_error("plan", "-c %d is beyond the model's context of %d tokens", a.n_ctx, r.shape.n_ctx_max);
        }
    }
    if (r.shape.n_ctx_max > 0 && a.n_ctx > r.shape.n_ctx_max) {
        el_model_free(m);
        return cli_usage_error("plan", "-c %d is beyond the model's context of %d tokens", a.n_ctx, r.shape.n_ctx_max);
    }
    for (int i = 0; a.sel && i < 2; i++) { /* -ctk/-ctv: a type the head size cannot use is a usage error */
        const int t = i ? a.type_v : a.type_k;
        if (t != 0 && t != EL_CACHE_F16 && r.shape.head_dim % 32 != 0) {
            el_model_free(m);
            return cli_usage_error("plan", "%s %s: the head size %d is not a multiple of 32 (q8_0, q4_0 and bf16 caches "
                                   "need whole 32-value blocks per head)", i ? "--cache-type-v" : "--cache-type-k",
                                   el_cache_type_name(t), r.shape.head_dim);
        }
    }
    if (m && m->experts) { /* MoE: an expert budget given, or what fits beside one session of -c tokens */
        el_expert_stats st;
        el_model_expert_stats(m, &st);
        const uint64_t want = a.expert_pct > 0 ? (uint64_t)((double)st.total_bytes * a.expert_pct / 100.0) : a.expert_budget;
        const uint64_t sess = el_mem_session_bytes(&r, EL_KV_F16, a.n_ctx), used = r.runtime + sess;
        el_error err = {0};
        if (el_model_fit_experts(m, want, r.budget > used ? r.budget - used : 0, &err)) {
            el_model_free(m);
            return cli_failf("%s%s", want ? "--expert-budget: " : "", err.msg);
        }
        r.weights = el_model_weights_resident_bytes(m);
    }
    if (r.weights >= r.budget) {
        el_model_free(m);
        return cli_failf("the weights (%.1f MiB) do not fit the budget of %.1f MiB (device %.1f MiB - reserve %.1f MiB)",
                         mib(r.weights), mib(r.budget), mib(device), mib(a.reserve));
    }

    const el_kv_type *types = a.shape ? shape_types : file_types;
    const int n_types = a.shape ? (int)(sizeof shape_types / sizeof shape_types[0]) : (int)(sizeof file_types / sizeof file_types[0]);
    const uint64_t kv_row_f16 = el_kv_row_bytes(EL_KV_F16, (uint64_t)r.shape.n_head_kv * (uint64_t)r.shape.head_dim);
    if (a.json) {
        printf("{\"source\":");
        cli_json_str(stdout, a.model ? a.model : a.shape, strlen(a.model ? a.model : a.shape));
        printf(",\"shape\":{\"layers\":%d,\"swa_layers\":%d,\"window\":%d,\"kv_heads\":%d,\"head_dim\":%d,\"ctx_max\":%d}",
               r.shape.n_layer, r.shape.n_layer_swa, r.shape.n_swa, r.shape.n_head_kv, r.shape.head_dim, r.shape.n_ctx_max);
        printf(",\"weights_bytes\":%" PRIu64, r.weights); /* as admission counts them (MoE: experts resident) */
        if (m) printf(",\"weights_file_bytes\":%" PRIu64, el_model_weights_bytes(m));
        if (m)
            printf(",\"weights\":{\"tensors\":%" PRIu64 ",\"metadata\":%" PRIu64 ",\"alignment\":%" PRIu64 ",\"converted\":%" PRIu64 "}",
                   tensor_bytes, meta_bytes, pad_bytes, owned);
        if (m && m->mem.n_expert > 0)
            printf(",\"experts\":{\"count\":%d,\"used\":%d,\"bytes\":%" PRIu64 ",\"bytes_per_token\":%" PRIu64
                   ",\"router_shared_bytes\":%" PRIu64 ",\"resident_bytes\":%" PRIu64 ",\"unreleasable_bytes\":%" PRIu64 "}",
                   m->mem.n_expert, m->mem.n_expert_used, m->mem.expert_bytes, m->mem.expert_bytes_token,
                   m->mem.moe_other_bytes, m->mem.expert_resident, m->mem.expert_fixed);
        printf(",\"runtime_bytes\":%" PRIu64 ",\"runtime\":{\"rss_at_start\":%" PRIu64 ",\"threads\":%" PRIu64 ",\"overhead\":%" PRIu64 "}",
               r.runtime, runtime_rss, runtime_threads, a.overhead);
        printf(",\"device_bytes\":%" PRIu64 ",\"device_source\":", device);
        cli_json_str(stdout, src, strlen(src));
        printf(",\"reserve_bytes\":%" PRIu64 ",\"budget_bytes\":%" PRIu64 ",\"n_batch\":%d,\"ctx\":%d", a.reserve, r.budget, a.n_batch,
               a.n_ctx);
        printf(",\"rows\":[");
        for (int i = 0; i < n_types; i++) {
            const el_kv_type t = types[i];
            const uint64_t kv_tok = el_kv_row_bytes(t, (uint64_t)r.shape.n_head_kv * (uint64_t)r.shape.head_dim) * 2 * (uint64_t)r.shape.n_layer;
            const int mc = el_mem_max_ctx(&r, t);
            printf("%s{\"kv_type\":\"%s\",\"status\":\"%s\",\"kv_bytes_per_token\":%" PRIu64 ",\"max_ctx\":%d,\"kv_bytes_at_max_ctx\":%" PRIu64
                   ",\"session_bytes_at_ctx\":%" PRIu64 ",\"max_sessions_at_ctx\":%" PRIu64 "}",
                   i ? "," : "", el_kv_type_name(t), status_of(t, &r.shape), kv_tok, mc, mc > 0 ? el_kv_bytes(&r.shape, t, mc, a.n_batch) : 0,
                   el_mem_session_bytes(&r, t, a.n_ctx), el_mem_max_sessions(&r, t, a.n_ctx));
        }
        printf("]");
        if (a.sel) {
            const el_kv_type tk = el_kv_type_of_cache(a.type_k), tv = el_kv_type_of_cache(a.type_v);
            const int mc = el_mem_max_ctx_kv(&r, tk, tv);
            const uint64_t one = el_mem_session_bytes_kv(&r, tk, tv, a.n_ctx);
            const uint64_t fixed = r.weights + r.runtime;
            printf(",\"selected\":{\"type_k\":\"%s\",\"type_v\":\"%s\",\"max_ctx\":%d,\"session_bytes_at_ctx\":%" PRIu64
                   ",\"max_sessions_at_ctx\":%" PRIu64 "}",
                   el_cache_type_name(a.type_k), el_cache_type_name(a.type_v), mc, one,
                   one != UINT64_MAX && one && fixed < r.budget ? (r.budget - fixed) / one : 0);
        }
        printf("}\n");
    } else {
        printf("plan for %s\n", a.model ? a.model : a.shape);
        printf("  shape      %d layers (%d sliding-window, window %d), %d KV heads x %d, context %d\n", r.shape.n_layer,
               r.shape.n_layer_swa, r.shape.n_swa, r.shape.n_head_kv, r.shape.head_dim, r.shape.n_ctx_max);
        if (m)
            printf("  weights    %10.1f MiB  (tensors %.1f + metadata %.3f + alignment %.3f, converted at load %.3f)\n",
                   mib(el_model_weights_bytes(m)),
                   mib(tensor_bytes), mib(meta_bytes), mib(pad_bytes), mib(owned));
        else
            printf("  weights    %10.1f MiB  (--weights, %" PRIu64 " bytes)\n", mib(r.weights), r.weights);
        if (m && m->mem.n_expert > 0) /* all experts are mapped; a token reads n_used of them per layer */
            printf("  experts    %10.1f MiB  of the weights (%d experts, %d used: a token reads %.1f MiB of them, "
                   "+ %.2f MiB of routers and shared experts)\n",
                   mib(m->mem.expert_bytes), m->mem.n_expert, m->mem.n_expert_used, mib(m->mem.expert_bytes_token),
                   mib(m->mem.moe_other_bytes));
        if (m && m->mem.n_expert > 0)
            printf("  resident   %10.1f MiB  of the experts' %.1f MiB kept resident (%s; + %.1f MiB of partial pages "
                   "no release drops): weights resident %.1f MiB\n",
                   mib(m->mem.expert_resident), mib(m->mem.expert_bytes),
                   m->mem.expert_resident < m->mem.expert_bytes ? "the rest released after use, faulted back on use"
                                                                : "all of them",
                   mib(m->mem.expert_fixed), mib(r.weights));
        printf("  runtime    %10.1f MiB  (RSS at start %.1f + thread stacks %.2f + --overhead %.1f)\n", mib(r.runtime), mib(runtime_rss),
               mib(runtime_threads), mib(a.overhead));
        printf("  budget     %10.1f MiB  (device %.1f MiB [%s] - reserve %.1f MiB)\n", mib(r.budget), mib(device), src, mib(a.reserve));
        printf("  KV F16     %" PRIu64 " bytes per token of a full layer set (2 x %d layers x %" PRIu64 ")\n",
               kv_row_f16 * 2 * (uint64_t)r.shape.n_layer, r.shape.n_layer, kv_row_f16);
        printf("\n  %-6s %-22s %12s %14s %16s %14s\n", "KV", "status", "max context", "KV at max MiB", "session@ctx MiB", "sessions@ctx");
        for (int i = 0; i < n_types; i++) {
            const el_kv_type t = types[i];
            const int mc = el_mem_max_ctx(&r, t);
            printf("  %-6s %-22s %12d %14.1f %16.2f %14" PRIu64 "\n", el_kv_type_name(t), status_of(t, &r.shape), mc,
                   mc > 0 ? mib(el_kv_bytes(&r.shape, t, mc, a.n_batch)) : 0.0, mib(el_mem_session_bytes(&r, t, a.n_ctx)),
                   el_mem_max_sessions(&r, t, a.n_ctx));
        }
        if (a.sel) {
            const el_kv_type tk = el_kv_type_of_cache(a.type_k), tv = el_kv_type_of_cache(a.type_v);
            const int mc = el_mem_max_ctx_kv(&r, tk, tv);
            const uint64_t one = el_mem_session_bytes_kv(&r, tk, tv, a.n_ctx);
            const uint64_t fixed = r.weights + r.runtime;
            char name[32];
            snprintf(name, sizeof name, "K %s V %s", el_cache_type_name(a.type_k), el_cache_type_name(a.type_v));
            printf("  %-29s %12d %14s %16.2f %14" PRIu64 "\n", name, mc, "", one == UINT64_MAX ? INFINITY : mib(one),
                   one != UINT64_MAX && one && fixed < r.budget ? (r.budget - fixed) / one : 0);
        }
        printf("  (ctx = %d tokens, prefill batch %d; max context is capped at the model's)\n", a.n_ctx, a.n_batch);
    }
    el_model_free(m);
    return fflush(stdout) == 0 ? CLI_EXIT_OK : cli_failf("writing to stdout failed");
}
