/*
 * session_setup.c — what run, chat, serve, bench and act do between the
 * command line and the first token: loading the model, the context size,
 * memory admission (before any session is allocated), the cache types,
 * speculative decoding and the draft model, and the placement report
 * (declared in cli.h).
 *
 * Contract: a function that may refuse returns -1 to go on, else the exit
 * code with the reason printed, and then leaves nothing loaded or open;
 * admission (cli_admit) allocates nothing: it runs before any session, with
 * the budget of --mem-budget or else the device's available memory.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "deploy/fingerprint.h"
#include "memory/capacity.h"
#include "runtime/model.h"

void cli_print_placement(el_session *s, FILE *f, bool json) {
    const size_t need = el_session_placement_report(s, json, NULL, 0);
    char *buf = malloc(need + 1);
    if (!buf) return;
    el_session_placement_report(s, json, buf, need + 1);
    fputs(buf, f);
    free(buf);
}

el_model *cli_load_model(const cli_opts *o, bool vocab_only, el_error *err) {
    el_model_params mp = el_model_default_params();
    mp.n_threads = o->n_threads;
    mp.vocab_only = vocab_only;
    mp.load = vocab_only ? EL_LOAD_MMAP : o->load;
    mp.backend = &o->backend;
    return el_model_load(o->model, &mp, err);
}

int cli_ctx_for(const cli_opts *o, const el_model *m) {
    int train = el_model_n_ctx_train(m);
    if (o->n_ctx > 0) return o->n_ctx;
    if (o->n_ctx == 0) return train > 0 ? train : 4096;
    return (train > 0 && train < 4096) ? train : 4096;
}

void cli_measure_runtime(cli_opts *o) {
    const long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    o->mem_runtime = el_mem_runtime_bytes(o->n_threads > 0 ? o->n_threads : ncpu > 0 ? (int)ncpu : 1);
}

int cli_check_cache_types(const cli_opts *o, const el_model *m) {
    el_session_params sp = el_session_default_params();
    sp.n_ctx = 1;
    sp.n_batch = 1;
    for (int i = 0; i < 2; i++) {
        sp.type_k = i ? 0 : o->cache_type_k;
        sp.type_v = i ? o->cache_type_v : 0;
        if (el_session_bytes_for(m, &sp) == 0)
            return cli_usage_error(o->cmd, "%s %s: this model's head size is not a multiple of 32 (q8_0, q4_0 and bf16 "
                                   "caches need whole 32-value blocks per head)", i ? "--cache-type-v" : "--cache-type-k",
                                   el_cache_type_name(i ? o->cache_type_v : o->cache_type_k));
    }
    return -1;
}

uint64_t cli_expert_budget_bytes(const cli_opts *o, const el_model *m) {
    el_expert_stats st;
    if (el_model_expert_stats(m, &st)) return 0;
    if (o->expert_budget_pct > 0) {
        const double b = (double)st.total_bytes * o->expert_budget_pct / 100.0;
        return b < 1.0 ? 1 : (uint64_t)b;
    }
    return o->expert_budget;
}

int cli_apply_expert_budget(const cli_opts *o, el_model *m) {
    if (!o->expert_budget && o->expert_budget_pct <= 0) return -1;
    el_error err = {0};
    el_expert_stats st;
    if (el_model_expert_stats(m, &st)) return cli_usage_error(o->cmd, "--expert-budget: this model has no routed experts");
    if (el_model_set_expert_budget(m, cli_expert_budget_bytes(o, m), &err)) return cli_failf("--expert-budget: %s", err.msg);
    return -1;
}

int cli_admit(const cli_opts *o, el_model *m, int n_ctx, int n_batch, int n_sessions, uint64_t *budget_out) {
    const int train = el_model_n_ctx_train(m);
    if (train > 0 && n_ctx > train)
        return cli_usage_error(o->cmd, "-c %d is beyond the model's context of %d tokens", n_ctx, train);
    const int ct = cli_check_cache_types(o, m);
    if (ct >= 0) return ct;
    const double M = 1024.0 * 1024.0;
    const char *src = "--mem-budget";
    uint64_t budget = o->mem_budget;
    const int eb = cli_apply_expert_budget(o, m);
    if (eb >= 0) return eb;
    if (!budget) {
        budget = el_mem_device_available(&src);
        if (!budget) return -1; /* no /proc: nothing to check against */
    }
    if (budget_out) *budget_out = budget;
    el_mem_request r = {.model = &m->mem, .runtime = o->mem_runtime, .budget = budget, .n_batch = n_batch,
                        .n_draft_max = o->spec_mode ? o->draft_max : 0,
                        .type_k = o->cache_type_k, .type_v = o->cache_type_v};
    el_mem_shape_of(&m->mem, &r.shape);
    /* a MoE model whose weights do not fit keeps what fits of its experts resident (memory/experts.h) */
    if (!o->expert_budget && o->expert_budget_pct <= 0) {
        const uint64_t sess = el_mem_session_bytes_kv(&r, el_kv_type_of_cache(o->cache_type_k),
                                                      el_kv_type_of_cache(o->cache_type_v), n_ctx) * (uint64_t)n_sessions;
        const uint64_t used = sess + r.runtime;
        el_error ee = {0};
        if (el_model_fit_experts(m, 0, budget > used ? budget - used : 0, &ee))
            return cli_failf("refused: %s (%s)", ee.msg, src);
    }
    r.weights = el_model_weights_resident_bytes(m);
    if (o->verbose && m->experts) {
        el_expert_stats st;
        el_model_expert_stats(m, &st);
        fprintf(stderr, "memory: experts resident %.1f of %.1f MiB (one token's: %.1f MiB)\n", st.budget_bytes / M,
                st.total_bytes / M, st.per_token_bytes / M);
    }
    if (r.weights >= budget)
        return cli_failf("the memory budget of %.1f MiB (%s) is smaller than the model's weights (%.1f MiB)", budget / M, src,
                         r.weights / M);
    char msg[512];
    if (el_mem_admit(&r, n_ctx, n_sessions, msg, sizeof msg)) return cli_failf("refused: %s (%s)", msg, src);
    if (o->verbose)
        fprintf(stderr, "memory: %d x %d-token session%s fit the budget of %.1f MiB (%s)\n", n_sessions, n_ctx,
                n_sessions == 1 ? "" : "s", budget / M, src);
    return -1;
}

void cli_spec_setup(const cli_opts *o, el_session_params *sp, el_spec_params *spec) {
    memset(spec, 0, sizeof *spec);
    if (!o->spec_mode) return;
    if (o->spec_mode == EL_SPEC_DRAFT && !o->draft_model) return; /* refused in parsing */
    sp->n_draft_max = o->draft_max;
    spec->mode = o->spec_mode;
    spec->n_draft_max = o->draft_max;
    spec->n_draft_min = o->draft_min;
    spec->ngram_min = 1;
    spec->ngram_max = o->spec_ngram;
    spec->fixed = o->spec_fixed;
}

int cli_draft_check_tokenizer(const cli_opts *o) {
    if (!o->draft_model) return -1;
    /* the tokenizer fingerprint the package manifest records, of both files */
    uint8_t ht[32], hd[32];
    el_pkg_error pe = {0};
    if (el_pkg_tokenizer_sha256(o->model, ht, &pe) != EL_PKG_OK) return cli_failf("%s", pe.msg);
    if (el_pkg_tokenizer_sha256(o->draft_model, hd, &pe) != EL_PKG_OK)
        return cli_failf("--draft-model %s: %s", o->draft_model, pe.msg);
    if (memcmp(ht, hd, 32) != 0) {
        char a[17], b[17];
        for (int i = 0; i < 8; i++) {
            snprintf(a + 2 * i, 3, "%02x", ht[i]);
            snprintf(b + 2 * i, 3, "%02x", hd[i]);
        }
        return cli_failf("--draft-model %s: its tokenizer (fingerprint %s) differs from the target's (%s): a draft must "
                         "use the target's tokenizer", o->draft_model, b, a);
    }
    return -1;
}

int cli_draft_open(cli_opts *o, el_model *target, const el_session_params *sp, el_spec_params *spec,
                   el_model **dm, el_session **ds) {
    *dm = NULL;
    *ds = NULL;
    if (!o->draft_model || spec->mode != EL_SPEC_DRAFT) return -1;
    const int tc = cli_draft_check_tokenizer(o);
    if (tc >= 0) return tc;
    el_model_params mp = el_model_default_params();
    mp.n_threads = o->n_threads;
    mp.load = o->load;
    mp.backend = &o->backend;
    el_error err = {0};
    el_model *d = el_model_load(o->draft_model, &mp, &err);
    if (!d) return cli_failf("--draft-model %s: %s", o->draft_model, err.msg);
    const uint64_t wd = el_model_weights_bytes(d), wt = el_model_weights_bytes(target);
    if (wd > wt) {
        el_model_free(d);
        return cli_failf("--draft-model %s: the draft (%.1f MiB of weights) is larger than the target (%.1f MiB): "
                         "drafting would cost more than it saves", o->draft_model, wd / 1048576.0, wt / 1048576.0);
    }
    el_session_params dsp = *sp;
    dsp.n_draft_max = 0; /* the draft decodes one token at a time */
    /* its memory: admitted against what the budget leaves after the target and its session */
    cli_opts od = *o;
    uint64_t budget = 0;
    const int code = cli_admit(o, target, sp->n_ctx, sp->n_batch, 1, &budget);
    if (code >= 0) { el_model_free(d); return code; }
    if (budget) {
        const uint64_t used = el_model_weights_resident_bytes(target) + el_session_bytes_for(target, sp);
        od.mem_budget = budget > used ? budget - used : 1;
        od.spec_mode = 0;
        const int dc = cli_admit(&od, d, dsp.n_ctx, dsp.n_batch, 1, NULL);
        if (dc >= 0) {
            fprintf(stderr, "edgellm: (the draft model's memory, after the target's)\n");
            el_model_free(d);
            return dc;
        }
    }
    el_session *s = el_session_new(d, &dsp, &err);
    if (!s) {
        el_model_free(d);
        return cli_failf("--draft-model %s: %s", o->draft_model, err.msg);
    }
    *dm = d;
    *ds = s;
    spec->draft = s;
    return -1;
}
