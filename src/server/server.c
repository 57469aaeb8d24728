/*
 * server.c — the local OpenAI-compatible server's lifecycle: el_server_start
 * (bind and answer; the model comes later), el_server_load (the model, its
 * fingerprint, the memory admission, the slots and their threads, the
 * batcher), el_server_free (graceful shutdown). server_internal.h lists the
 * other files, one concern each.
 *
 * State. Process state is built once: the model (weights, vocab, thread
 * pool), its SHA-256 fingerprint, the chat template family, and N slots,
 * each a worker thread owning one el_session whose KV cache and scratch are
 * allocated here (el_session_new), with a draft session beside it under
 * --draft-model. Every slot's session must fit the memory budget, checked
 * (memory/capacity.h el_mem_admit) before any is allocated; the slots that
 * would not fit are refused with why. Request state is one el_req per HTTP
 * request (server_slots.c).
 *
 * Batched decoding (runtime/batch.h): with more than one slot every slot's
 * session is attached to one batcher at load (unless --no-batch, or the model
 * is not on the CPU fast path), so el_generate's decode steps of the slots
 * decoding run as rounds of one forward for all of them, and prompts prefill
 * in --batch-chunk chunks between rounds; the slot loop itself is unchanged.
 * Speculative requests and embeddings run alone. /metrics edgellm_batch_*.
 * The batcher's scratch (el_batcher_bytes: a round's activations and logits)
 * is admitted after the slots: with rows for every slot, or fewer (down to 2)
 * when the memory budget's rest cannot hold that, or none (slot by slot), said
 * on stderr either way.
 *
 * Shutdown (el_server_free): MHD_quiesce_daemon stops accepting; queued
 * requests are cancelled (a queued stream gets its error event and [DONE],
 * as a running one does) and running ones told to cancel (they stop at the
 * next decode step); slot threads are joined; the server waits (bounded)
 * until every connection has sent its answer; the reaper is stopped;
 * MHD_stop_daemon joins the connection threads; then sessions and the model
 * are freed.
 *
 * Telemetry: el_server_load's failure and el_server_set_local_unavailable
 * send a load_error event (tel_load_error); the thermal level at load caps
 * the model's thread pool (srv_derate_threads).
 */
#include "server/server.h"
#include "server/server_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <sodium.h>

#include "deploy/manifest.h"
#include "memory/capacity.h"
#include "route/policy.h"
#include "structured/chat_jinja.h"

#define SRV_DRAIN_WAIT_MS 3000 /* shutdown: how long responses may take to finish sending */

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

el_server *el_server_start(const el_server_params *p, el_error *err) {
    if (err) { err->code = EL_OK; err->msg[0] = 0; }
#define FAIL(code_, ...) do { if (err) { err->code = (code_); snprintf(err->msg, sizeof err->msg, __VA_ARGS__); } \
                              el_server_free(s); return NULL; } while (0)
    el_server *s = NULL;
    if (!p || !p->model_path) FAIL(EL_ERR_INVALID_ARG, "no model path");
    if (sodium_init() < 0) FAIL(EL_ERR_INTERNAL, "libsodium failed to initialise");
    s = calloc(1, sizeof *s);
    if (!s) FAIL(EL_ERR_NOMEM, "out of memory");
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->queue_cv, NULL);
    pthread_mutex_init(&s->conn_mu, NULL);
    pthread_cond_init(&s->conn_cv, NULL);
    el_metrics_init(&s->metrics);
    atomic_init(&s->ready, false);
    s->p = *p;
    s->model_path = strdup(p->model_path);
    s->host = strdup(p->host && *p->host ? p->host : "127.0.0.1");
    s->api_key = p->api_key && *p->api_key ? strdup(p->api_key) : NULL;
    s->chat_template = dup_or_null(p->chat_template);
    s->chat_template_file = dup_or_null(p->chat_template_file);
    if (p->chat_template_kwargs && *p->chat_template_kwargs) {
        cJSON *kw = cJSON_Parse(p->chat_template_kwargs);
        bool obj = cJSON_IsObject(kw);
        cJSON_Delete(kw);
        if (!obj) FAIL(EL_ERR_BAD_VALUE, "--chat-template-kwargs: expected a JSON object, e.g. {\"enable_thinking\": false}");
        if (!(s->tmpl_kwargs = strdup(p->chat_template_kwargs))) FAIL(EL_ERR_NOMEM, "out of memory");
    }
    /* --alias A[,B...] (llama-server's comma-separated aliases): the first is the model id, all are listed
     * in /v1/models "aliases"; entries are trimmed, empty ones skipped */
    s->aliases = p->alias && *p->alias ? strdup(p->alias) : NULL;
    if (p->alias && *p->alias && !s->aliases) FAIL(EL_ERR_NOMEM, "out of memory");
    for (const char *q = s->aliases; q && *q && !s->alias;) {
        size_t l = strcspn(q, ",");
        const char *a = q, *next = q[l] ? q + l + 1 : q + l;
        while (l && (*a == ' ' || *a == '\t')) a++, l--;
        while (l && (a[l - 1] == ' ' || a[l - 1] == '\t')) l--;
        if (l && !(s->alias = strndup(a, l))) FAIL(EL_ERR_NOMEM, "out of memory");
        q = next;
    }
    if (p->slot_save_path && *p->slot_save_path) { /* as llama-server: created if absent; must be a directory */
        struct stat st;
        if (mkdir(p->slot_save_path, 0755) && errno != EEXIST)
            FAIL(EL_ERR_IO, "--slot-save-path %s: cannot create it: %s", p->slot_save_path, strerror(errno));
        if (stat(p->slot_save_path, &st) || !S_ISDIR(st.st_mode))
            FAIL(EL_ERR_IO, "--slot-save-path %s is not a directory", p->slot_save_path);
        if (!(s->slot_dir = strdup(p->slot_save_path))) FAIL(EL_ERR_NOMEM, "out of memory");
    }
    s->p.slot_save_path = s->slot_dir;
    /* connection limits (server_http.c, "connection guard") */
    if (p->conn_limit && (p->conn_limit < 16 || p->conn_limit > 4096))
        FAIL(EL_ERR_INVALID_ARG, "conn_limit (--max-conns) %d: expected 16..4096", p->conn_limit);
    s->conn_limit = p->conn_limit ? p->conn_limit : 256;
    if (p->conn_per_addr && (p->conn_per_addr < 1 || p->conn_per_addr > s->conn_limit))
        FAIL(EL_ERR_INVALID_ARG, "conn_per_addr (--max-conns-per-addr) %d: expected 1..%d (the connection limit)",
             p->conn_per_addr, s->conn_limit);
    s->conn_per_addr = p->conn_per_addr ? p->conn_per_addr : (s->conn_limit < 64 ? s->conn_limit : 64);
    s->conn_soft = s->conn_limit - s->conn_limit / 8;
    if (!(s->conn_cand = calloc((size_t)s->conn_limit * 2, sizeof *s->conn_cand))) FAIL(EL_ERR_NOMEM, "out of memory");
    if (!s->model_path || !s->host || (p->api_key && *p->api_key && !s->api_key) || (p->chat_template && !s->chat_template) ||
        (p->chat_template_file && !s->chat_template_file))
        FAIL(EL_ERR_NOMEM, "out of memory");
    s->p.model_path = s->model_path;
    s->p.host = s->host;
    s->p.api_key = s->api_key;
    s->p.chat_template = s->chat_template;
    s->p.chat_template_file = s->chat_template_file;
    s->p.chat_template_kwargs = s->tmpl_kwargs;
    s->p.alias = s->alias;
    if (s->p.n_parallel <= 0) s->p.n_parallel = 1;
    if (s->p.queue_cap < 0) s->p.queue_cap = 16;
    s->rf = EL_REASONING_AUTO;
    if (p->reasoning_format) {
        int rf = el_reasoning_format_parse(p->reasoning_format);
        if (rf < 0) FAIL(EL_ERR_INVALID_ARG, "--reasoning-format: expected none, deepseek or auto, got '%.40s'", p->reasoning_format);
        s->rf = (el_reasoning_format)rf;
    }
    s->p.reasoning_format = NULL; /* the caller's string is not kept: s->rf holds it */
    if (p->port < 0 || p->port > 65535) FAIL(EL_ERR_INVALID_ARG, "port %d is out of range", p->port);
    s->t_start = (long)time(NULL);
    if (srv_host_policy_init(s, p)) FAIL(EL_ERR_NOMEM, "out of memory");
    {   /* routing: policy, cloud client, thermal monitor */
        el_policy builtin;
        el_policy_builtin(&builtin);
        const el_policy *pol = p->policy ? p->policy : &builtin;
        char msg[300];
        if (p->cloud_url) {
            el_cloud_cfg cc = {p->cloud_url, p->cloud_key, p->cloud_model, pol->cloud_timeout_s};
            s->cloud = el_cloud_new(&cc, msg, sizeof msg);
            if (!s->cloud) FAIL(EL_ERR_INVALID_ARG, "%s", msg);
        }
        s->router = el_router_new(pol, s->cloud != NULL);
        if (!s->router) FAIL(EL_ERR_NOMEM, "out of memory");
        if (p->telemetry_dir || p->otlp_url) {
            const char *base = strrchr(s->model_path, '/');
            el_telemetry_cfg tcfg = {p->telemetry_dir, p->telemetry_max_bytes, p->telemetry_keep, p->otlp_url,
                                     s->alias ? s->alias : base ? base + 1 : s->model_path, pol};
            s->tel = el_telemetry_open(&tcfg, msg, sizeof msg);
            if (!s->tel) FAIL(EL_ERR_INVALID_ARG, "telemetry: %s", msg);
        }
        if (p->audit_log) {
            s->audit = el_audit_open(p->audit_log, p->telemetry_max_bytes, p->telemetry_keep, msg, sizeof msg);
            if (!s->audit) FAIL(EL_ERR_IO, "--audit-log: %s", msg);
        }
        el_thermal_cfg tc = {p->thermal_source, NULL, pol->derate_c, pol->hot_c, pol->hysteresis_c, pol->sample_ms,
                             srv_on_thermal_change, s};
        s->thermal = el_thermal_start(&tc, msg, sizeof msg);
        if (!s->thermal) FAIL(EL_ERR_INTERNAL, "thermal monitor: %s", msg);
    }
    s->p.policy = NULL; /* the router holds its own copy */
    s->p.cloud_key = NULL;
    if (srv_reaper_start(s)) FAIL(EL_ERR_INTERNAL, "cannot start the connection reaper thread");
    char msg[300];
    const int rc = srv_http_listen(s, msg, sizeof msg);
    if (rc) FAIL(rc, "%s", msg);
    return s;
#undef FAIL
}

/* Chat renderer (as `edgellm chat`): --chat-template-file (Jinja), --chat-template
 * NAME (a built-in family), else the model's own Jinja template, else the
 * family detected from it or by architecture. The family also parses tool calls. */
static int pick_family(el_server *s, el_error *err) {
    char jinja_fail[300] = "";
    if (s->chat_template_file) {
        s->cj = el_chat_jinja_from_file(s->chat_template_file, s->model, err);
        if (!s->cj) return -1;
        s->fam = el_chat_family_for_model(s->model, NULL);
        s->tf = el_chat_jinja_tool_format(s->cj);
        snprintf(s->fam_desc, sizeof s->fam_desc, "jinja: %.200s (from --chat-template-file)", s->chat_template_file);
        return 0;
    }
    if (!s->chat_template && el_model_chat_template(s->model)) {
        el_error je = {0};
        s->cj = el_chat_jinja_for_model(s->model, &je);
        if (s->cj) {
            s->fam = el_chat_family_for_model(s->model, NULL);
            s->tf = el_chat_jinja_tool_format(s->cj);
            snprintf(s->fam_desc, sizeof s->fam_desc, "jinja: the model's own template");
            return 0;
        }
        snprintf(jinja_fail, sizeof jinja_fail, "the model's template does not parse (%.240s); ", je.msg);
        fprintf(stderr, "chat template: %s\n", jinja_fail);
    }
    if (s->chat_template) {
        s->fam = el_chat_family_from_name(s->chat_template);
        if (s->fam == EL_CHAT_UNKNOWN) {
            err->code = EL_ERR_TEMPLATE;
            snprintf(err->msg, sizeof err->msg, "unknown chat template '%s'", s->chat_template);
            return -1;
        }
        snprintf(s->fam_desc, sizeof s->fam_desc, "%s (from --chat-template)", el_chat_family_name(s->fam));
        return 0;
    }
    const char *tmpl = el_model_chat_template(s->model);
    const char *arch = el_model_arch(s->model);
    el_chat_source how;
    s->fam = el_chat_family_for_model(s->model, &how);
    if (how == EL_CHAT_BY_TEMPLATE) {
        snprintf(s->fam_desc, sizeof s->fam_desc, "%s%s (detected from the model's template)", jinja_fail,
                 el_chat_family_name(s->fam));
        return 0;
    }
    if (s->fam != EL_CHAT_UNKNOWN)
        snprintf(s->fam_desc, sizeof s->fam_desc, "%s%s (%s; fallback for architecture '%s')", jinja_fail,
                 el_chat_family_name(s->fam),
                 tmpl ? "model's template not recognised" : "model has no template", arch);
    else
        snprintf(s->fam_desc, sizeof s->fam_desc, "%snone (%s template, no fallback for architecture '%s'): "
                 "/v1/chat/completions answers 500", jinja_fail, tmpl ? "unrecognised" : "no", arch);
    return 0;
}

/* SHA-256 of the model file (the package code's hasher: a regular file only, 1 MiB blocks). */
static int hash_file(const char *path, unsigned char out[crypto_hash_sha256_BYTES], el_error *err) {
    el_pkg_error pe;
    if (el_pkg_hash_file(path, out, NULL, &pe) == EL_PKG_OK) return 0;
    err->code = EL_ERR_IO;
    snprintf(err->msg, sizeof err->msg, "hashing the model: %.360s", pe.msg);
    return -1;
}

static int server_load(el_server *s, el_error *err);

/* The load_error event: a failed el_server_load (its code), or no local model after the package checks. */
static void tel_load_error(const el_server *s, int code) {
    el_tev e = el_tev_init(EL_TEV_LOAD_ERROR);
    e.error = code;
    e.thermal = el_thermal_get(s->thermal).level;
    el_telemetry_emit(s->tel, &e);
}

int el_server_load(el_server *s, el_error *err) {
    el_error tmp;
    if (!err) err = &tmp;
    const int rc = server_load(s, err);
    if (rc) { /* the load_error event goes out with el_server_set_local_unavailable or here */
        atomic_store(&s->load_err, err->code ? (int)err->code : (int)EL_ERR_INTERNAL);
        tel_load_error(s, atomic_load(&s->load_err));
        return rc;
    }
    el_telemetry_set_fingerprint(s->tel, s->fingerprint);
    el_audit_set_fingerprint(s->audit, s->fingerprint);
    srv_derate_threads(s, el_thermal_get(s->thermal).level); /* the level at load; changes follow srv_on_thermal_change */
    return 0;
}

static int server_load(el_server *s, el_error *err) {
    err->code = EL_OK;
    err->msg[0] = 0;
    el_model_params mp = el_model_default_params();
    mp.n_threads = s->p.n_threads;
    mp.load = s->p.load;
    mp.backend = s->p.backend;
    el_model *m = el_model_load(s->model_path, &mp, err);
    if (!m) return -1;
    s->model = m;

    unsigned char h[crypto_hash_sha256_BYTES];
    if (hash_file(s->model_path, h, err)) return -1;
    memcpy(s->model_sha256, h, sizeof s->model_sha256);
    int off = snprintf(s->fingerprint, sizeof s->fingerprint, "edgellm-%s-", EL_VERSION_STRING);
    for (int i = 0; i < 8; i++) off += snprintf(s->fingerprint + off, sizeof s->fingerprint - (size_t)off, "%02x", h[i]);
    const char *base = strrchr(s->model_path, '/');
    snprintf(s->model_id, sizeof s->model_id, "%s", s->alias ? s->alias : base ? base + 1 : s->model_path);
    if (pick_family(s, err)) return -1;
    if (s->p.n_lora > 0) { /* serve --lora: each validated against the model now, loaded when a request uses it */
        uint64_t budget = s->p.lora_budget;
        if (!budget) /* no --lora-budget: room for all of them */
            for (int i = 0; i < s->p.n_lora; i++) {
                struct stat st;
                if (stat(s->p.lora_paths[i], &st) == 0) budget += (uint64_t)st.st_size;
            }
        if (!(s->lora = el_lora_reg_new(m, budget ? budget : 1, err))) return -1;
        for (int i = 0; i < s->p.n_lora; i++)
            if (el_lora_reg_add(s->lora, s->p.lora_names[i], s->p.lora_paths[i], err)) return -1;
        if (s->p.lora_scales) {
            int ids[EL_LORA_REG_MAX];
            char msg[200];
            for (int i = 0; i < s->p.n_lora; i++) ids[i] = i;
            if (el_lora_reg_set_defaults(s->lora, ids, s->p.lora_scales, s->p.n_lora, msg, sizeof msg)) {
                err->code = EL_ERR_INVALID_ARG;
                snprintf(err->msg, sizeof err->msg, "--lora: %s", msg);
                return -1;
            }
        }
    }
    s->n_embd = el_model_n_embd(m);
    s->pooling = s->p.pooling_set ? s->p.pooling : el_model_pooling(m);
    if (s->p.embeddings && (s->pooling < EL_POOLING_NONE || s->pooling > EL_POOLING_LAST)) {
        err->code = EL_ERR_UNSUPPORTED;
        snprintf(err->msg, sizeof err->msg, "the model asks for pooling type %d, which edgellm cannot compute; "
                 "give --pooling none|mean|cls|last", s->pooling);
        return -1;
    }

    int train = el_model_n_ctx_train(m);
    if (s->p.n_ctx > 0) s->n_ctx = s->p.n_ctx;
    else if (s->p.n_ctx == 0) s->n_ctx = train > 0 ? train : 2048;
    else s->n_ctx = (train > 0 && train < 2048) ? train : 2048;

    /* admission: every slot's session must fit the memory budget, checked before any is allocated */
    if (train > 0 && s->n_ctx > train) {
        err->code = EL_ERR_INVALID_ARG;
        snprintf(err->msg, sizeof err->msg, "-c %d is beyond the model's context of %d tokens", s->n_ctx, train);
        return -1;
    }
    {
        const char *src = "--mem-budget";
        el_mem_request mr = {.model = &m->mem, .runtime = s->p.mem_runtime, .n_batch = s->p.n_batch,
                             .type_k = s->p.type_k, .type_v = s->p.type_v};
        mr.runtime += el_lora_reg_budget(s->lora); /* serve --lora: the adapters resident at most (0 without) */
        mr.lora_rank = el_lora_reg_rank_plan(s->lora); /* and each slot's scratch for their products (0 without) */
        el_session_params tp = {.n_ctx = 1, .n_batch = 1, .type_k = s->p.type_k, .type_v = s->p.type_v};
        if (el_session_bytes_for(m, &tp) == 0) { /* before any slot is allocated */
            err->code = EL_ERR_INVALID_ARG;
            snprintf(err->msg, sizeof err->msg,
                     "--cache-type-k %s / --cache-type-v %s: a type this model cannot use (q8_0, q4_0 and bf16 need a "
                     "head size that is a multiple of 32)",
                     el_cache_type_name(s->p.type_k) ? el_cache_type_name(s->p.type_k) : "?",
                     el_cache_type_name(s->p.type_v) ? el_cache_type_name(s->p.type_v) : "?");
            return -1;
        }
        mr.budget = s->p.mem_budget ? s->p.mem_budget : el_mem_device_available(&src);
        el_mem_shape_of(&m->mem, &mr.shape);
        { /* MoE: --expert-budget, or what of the experts fits beside the slots (memory/experts.h) */
            el_expert_stats es;
            const bool moe = el_model_expert_stats(m, &es) == 0;
            const uint64_t want = !moe ? 0 : s->p.expert_budget_pct > 0 ? (uint64_t)((double)es.total_bytes * s->p.expert_budget_pct / 100.0)
                                                                       : s->p.expert_budget;
            if (!moe && (s->p.expert_budget || s->p.expert_budget_pct > 0)) {
                err->code = EL_ERR_INVALID_ARG;
                snprintf(err->msg, sizeof err->msg, "--expert-budget: this model has no routed experts");
                return -1;
            }
            const uint64_t used = mr.runtime + el_mem_session_bytes_kv(&mr, el_kv_type_of_cache(s->p.type_k),
                                                                      el_kv_type_of_cache(s->p.type_v), s->n_ctx) *
                                                   (uint64_t)s->p.n_parallel;
            if (moe && el_model_fit_experts(m, want, !mr.budget ? UINT64_MAX : mr.budget > used ? mr.budget - used : 0, err))
                return -1;
        }
        mr.weights = el_model_weights_resident_bytes(m);
        s->mem_budget = mr.budget;
        s->mem_planned = mr.weights + mr.runtime +
                         el_mem_session_bytes_kv(&mr, el_kv_type_of_cache(s->p.type_k), el_kv_type_of_cache(s->p.type_v),
                                                 s->n_ctx) * (uint64_t)s->p.n_parallel;
        char msg[400];
        if (mr.budget && el_mem_admit(&mr, s->n_ctx, s->p.n_parallel, msg, sizeof msg)) {
            err->code = EL_ERR_NOMEM;
            snprintf(err->msg, sizeof err->msg, "--parallel %d refused: %.300s (%.30s)", s->p.n_parallel, msg, src);
            return -1;
        }
        /* batched decoding's scratch (activations and logits for a round's rows) beside the slots: at
         * most one row per slot; fewer rows when the budget cannot hold that many, none when not two */
        s->batch_rows = 1;
        if (s->p.n_parallel > 1 && !s->p.no_batch) {
            el_batcher_params bp = {.max_rows = s->p.n_parallel < EL_BATCH_MAX_ROWS ? s->p.n_parallel : EL_BATCH_MAX_ROWS,
                                    .type_k = s->p.type_k, .type_v = s->p.type_v};
            const uint64_t spare = !mr.budget ? UINT64_MAX : mr.budget > s->mem_planned ? mr.budget - s->mem_planned : 0;
            s->batch_rows = el_batcher_rows_fitting(m, &bp, spare);
            if (s->batch_rows < bp.max_rows) {
                const double M = 1024.0 * 1024.0;
                const uint64_t want = el_batcher_bytes(m, &bp);
                if (s->batch_rows > 1)
                    fprintf(stderr, "edgellm serve: batched decoding's scratch for %d rows (%.2f MiB) does not fit the "
                            "%.2f MiB left of %s after the slots: rounds of at most %d rows\n", bp.max_rows, want / M,
                            spare / M, src, s->batch_rows);
                else {
                    const el_batcher_params b2 = {.max_rows = 2, .type_k = s->p.type_k, .type_v = s->p.type_v};
                    fprintf(stderr, "edgellm serve: batched decoding off: its scratch (%.2f MiB for %d rows, %.2f for 2) "
                            "does not fit the %.2f MiB left of %s after the slots\n", want / M, bp.max_rows,
                            el_batcher_bytes(m, &b2) / M, spare / M, src);
                }
            }
            if (s->batch_rows > 1) {
                bp.max_rows = s->batch_rows;
                s->mem_planned += el_batcher_bytes(m, &bp);
            }
        }
        if (s->p.spec.mode == EL_SPEC_DRAFT) { /* the draft model, and a draft session per slot, in what is left */
            s->draft = el_model_load(s->p.draft_model ? s->p.draft_model : "", &mp, err);
            if (!s->draft) return -1;
            if (el_model_weights_bytes(s->draft) > mr.weights) {
                err->code = EL_ERR_INVALID_ARG;
                snprintf(err->msg, sizeof err->msg, "--draft-model: the draft (%llu weight bytes) is larger than the "
                         "target (%llu): drafting would cost more than it saves",
                         (unsigned long long)el_model_weights_bytes(s->draft), (unsigned long long)mr.weights);
                return -1;
            }
            el_mem_request dr = mr;
            dr.model = &s->draft->mem;
            dr.lora_rank = 0; /* adapters run on the target only */
            dr.runtime = 0;
            dr.weights = el_model_weights_bytes(s->draft);
            el_mem_shape_of(&s->draft->mem, &dr.shape);
            dr.budget = mr.budget > s->mem_planned ? mr.budget - s->mem_planned : 1;
            s->mem_planned += dr.weights + el_mem_session_bytes_kv(&dr, el_kv_type_of_cache(s->p.type_k),
                                                                   el_kv_type_of_cache(s->p.type_v), s->n_ctx) *
                                               (uint64_t)s->p.n_parallel;
            if (mr.budget && el_mem_admit(&dr, s->n_ctx, s->p.n_parallel, msg, sizeof msg)) {
                err->code = EL_ERR_NOMEM;
                snprintf(err->msg, sizeof err->msg, "--parallel %d with --draft-model refused (the draft's memory, after "
                         "the target's): %.260s (%.30s)", s->p.n_parallel, msg, src);
                return -1;
            }
        }
    }
    s->slots = calloc((size_t)s->p.n_parallel, sizeof *s->slots);
    if (!s->slots) {
        err->code = EL_ERR_NOMEM;
        snprintf(err->msg, sizeof err->msg, "out of memory");
        return -1;
    }
    for (int i = 0; i < s->p.n_parallel; i++) {
        slot *sl = &s->slots[i];
        sl->srv = s;
        sl->idx = i;
        el_session_params sp = el_session_default_params();
        sp.n_ctx = s->n_ctx;
        if (s->p.n_batch > 0) sp.n_batch = s->p.n_batch;
        sp.type_k = s->p.type_k;
        sp.type_v = s->p.type_v;
        sp.n_draft_max = s->p.spec.mode ? s->p.spec.n_draft_max : 0;
        sp.lora_rank = el_lora_reg_rank_plan(s->lora); /* the adapters' scratch in the slot's plan (admitted above) */
        sl->sess = el_session_new(m, &sp, err);
        if (!sl->sess) return -1;
        if (s->draft) {
            el_session_params dsp = sp;
            dsp.n_draft_max = 0;
            dsp.lora_rank = 0;
            sl->dsess = el_session_new(s->draft, &dsp, err);
            if (!sl->dsess) {
                el_session_free(sl->sess);
                sl->sess = NULL;
                return -1;
            }
            sl->spec = s->p.spec;
            sl->spec.draft = sl->dsess;
        }
        sl->ctoks = calloc((size_t)s->n_ctx, sizeof *sl->ctoks);
        if (!sl->ctoks) {
            err->code = EL_ERR_NOMEM;
            snprintf(err->msg, sizeof err->msg, "out of memory");
            el_session_free(sl->sess);
            el_session_free(sl->dsess);
            sl->sess = sl->dsess = NULL;
            return -1;
        }
        s->n_slots = i + 1;
    }
    /* batched decoding: every slot's session joins one batcher (el_generate
     * routes its decode steps and prefill chunks through it; speculative
     * requests and embeddings run alone). A model not on the CPU fast path
     * (another backend) simply decodes slot by slot. */
    if (s->n_slots > 1 && !s->p.no_batch && s->batch_rows > 1) {
        el_batcher_params bp = {.max_rows = s->batch_rows,
                                .chunk = s->p.batch_chunk, .wait_us = s->p.batch_wait_us,
                                .type_k = s->p.type_k, .type_v = s->p.type_v};
        el_error be = {0};
        s->batcher = el_batcher_new(m, &bp, &be);
        for (int i = 0; s->batcher && i < s->n_slots; i++)
            if (el_batcher_attach(s->batcher, s->slots[i].sess, &be)) {
                for (int j = 0; j < i; j++) el_batcher_detach(s->batcher, s->slots[j].sess);
                el_batcher_free(s->batcher);
                s->batcher = NULL;
            }
        if (!s->batcher) { /* its scratch is not allocated after all */
            fprintf(stderr, "edgellm serve: batched decoding off: %s\n", be.msg);
            s->mem_planned -= el_batcher_bytes(m, &bp);
            s->batch_rows = 1;
        }
    }
    for (int i = 0; i < s->n_slots; i++) {
        if (pthread_create(&s->slots[i].th, NULL, srv_slot_main, &s->slots[i])) {
            err->code = EL_ERR_INTERNAL;
            snprintf(err->msg, sizeof err->msg, "cannot start slot thread %d", i);
            return -1;
        }
        s->slots[i].started = true;
    }
    atomic_store(&s->ready, true);
    return 0;
}

void el_server_set_local_unavailable(el_server *s, const char *why) {
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    snprintf(s->local_why, sizeof s->local_why, "%s", why && *why ? why : "no local model");
    pthread_mutex_unlock(&s->mu);
    /* not a failed el_server_load (it sent its event): the package checks */
    if (!atomic_load(&s->load_err)) tel_load_error(s, EL_TEV_ERR_PACKAGE);
}

int el_server_port(const el_server *s) { return s ? s->port : -1; }

const char *el_server_chat_family(const el_server *s) { return s ? s->fam_desc : ""; }

void el_server_free(el_server *s) {
    if (!s) return;
    MHD_socket lsock = MHD_INVALID_SOCKET;
    if (s->mhd) lsock = MHD_quiesce_daemon(s->mhd); /* stop accepting */
    el_cloud_abort_all(s->cloud); /* cloud calls in progress fail now */

    /* cancel: queued requests end here, running ones at their next step */
    el_req *dropped = NULL;
    pthread_mutex_lock(&s->mu);
    s->stopping = true;
    while (s->q_head) {
        el_req *r = s->q_head;
        srv_queue_unlink_locked(s, r);
        atomic_store(&r->cancel, true);
        if (r->api.stream) { /* a queued stream ends like a running one: an error event, then [DONE] */
            el_buf tail = {0};
            srv_stream_tail(r, RS_CANCELLED, &tail);
            if (tail.len) el_buf_append(&r->out, tail.p, tail.len);
            el_buf_free(&tail);
        }
        srv_finish_locked(s, r, RS_CANCELLED);
        r->next = dropped;
        dropped = r;
    }
    for (int i = 0; i < s->n_slots; i++) el_session_cancel(s->slots[i].sess);
    pthread_cond_broadcast(&s->queue_cv);
    pthread_mutex_unlock(&s->mu);
    srv_req_unref_list(dropped);
    for (int i = 0; i < s->n_slots; i++)
        if (s->slots[i].started) pthread_join(s->slots[i].th, NULL);
    /* every request is terminal now: let their last bytes go out before
     * MHD_stop_daemon shuts the sockets */
    if (s->mhd) srv_conn_wait_idle(s, SRV_DRAIN_WAIT_MS);
    srv_reaper_stop(s);
    if (s->mhd) MHD_stop_daemon(s->mhd); /* joins the connection threads */
    if (lsock != MHD_INVALID_SOCKET) close(lsock);
    el_batcher_free(s->batcher); /* the slot threads are joined: no generation runs */
    for (int i = 0; i < s->n_slots; i++) {
        el_session_free(s->slots[i].sess);
        el_session_free(s->slots[i].dsess);
        free(s->slots[i].ctoks);
    }
    free(s->slots);
    free(s->slot_dir);
    free(s->conn_cand);
    el_thermal_stop(s->thermal); /* before the model: its callback derates the model's pool */
    el_lora_reg_free(s->lora);  /* after the sessions that used its adapters, before the model */
    el_model_free(s->model);
    el_model_free(s->draft);
    el_router_free(s->router);
    el_audit_close(s->audit);
    el_telemetry_close(s->tel); /* sends what the OTLP queue holds */
    el_cloud_free(s->cloud);
    el_metrics_destroy(&s->metrics);
    pthread_cond_destroy(&s->queue_cv);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->conn_cv);
    pthread_mutex_destroy(&s->conn_mu);
    for (int i = 0; i < s->n_hosts; i++) free(s->hosts[i]);
    free(s->hosts);
    for (int i = 0; i < s->n_cors; i++) free(s->cors[i]);
    free(s->cors);
    free(s->model_path);
    free(s->host);
    free(s->api_key);
    free(s->chat_template);
    free(s->chat_template_file);
    free(s->tmpl_kwargs);
    el_chat_jinja_free(s->cj);
    free(s->alias);
    free(s->aliases);
    free(s);
}
