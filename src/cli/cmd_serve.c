/*
 * cmd_serve.c — `edgellm serve`: the local OpenAI-compatible HTTP server.
 *
 * The server binds first (so /health can answer "loading"), loads the model
 * on a loader thread, then prints "listening on http://HOST:PORT" to stderr.
 * SIGINT and SIGTERM are blocked in every thread and taken here with
 * sigtimedwait, so no handler runs inside the server's threads; either one
 * stops the server gracefully (el_server_free): stop accepting, cancel
 * queued and running requests, join every thread, free everything.
 */
#include <errno.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <string.h>

#include "structured/toolformat.h"
#include <time.h>

#include "cli/cli.h"
#include "deploy/fingerprint.h"
#include "runtime/chat.h"
#include "route/policy.h"
#include "server/server.h"
#include "util/file.h"

typedef struct loader {
    el_server *srv;
    el_error err;
    int rc;
    atomic_int done;
} loader;

static void *load_main(void *arg) {
    loader *l = arg;
    l->rc = el_server_load(l->srv, &l->err);
    atomic_store(&l->done, 1);
    return NULL;
}

/* $EL_FAULT_SERVE_CRASH=SHA256:N (tests only, docs/FLEET.md): when the model
 * about to be served is the file with that SHA-256, the server aborts after
 * its Nth completed request, so a test can roll out "a package that crashes
 * under load" as a real crash. Keyed by the file's bytes, which a package's
 * manifest cannot change without changing which package it is; the variable
 * comes from the environment of the process alone. 0 when not set or not
 * this file; -1 when the variable is malformed. */
static int fault_crash_after(const char *model) {
    const char *v = getenv("EL_FAULT_SERVE_CRASH");
    if (!v || !*v) return 0;
    const char *colon = strchr(v, ':');
    int n = colon ? atoi(colon + 1) : 0;
    if (!colon || colon - v != 64 || n <= 0) return -1;
    uint8_t h[32];
    el_pkg_error e;
    if (!model || el_pkg_hash_file(model, h, NULL, &e)) return 0;
    char hex[65];
    for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", h[i]);
    return strncmp(hex, v, 64) == 0 ? n : 0;
}

/* A server runs for days: glibc's malloc is told to give large blocks back.
 * By default its mmap threshold is dynamic: once one large mmap'd block is
 * freed, blocks up to that size come from the per-thread arenas, where a
 * freed block keeps its pages (the vocabulary-sized sampler buffers of every
 * request, 0.25-2 MiB each on a 262k vocabulary, across up to 8 arenas per core).
 * The soak (docs/SOAK.md) measured 40 MB free but resident in 16 arenas
 * after five minutes and RSS growing in such steps over 30. A fixed
 * threshold (which also fixes the trim threshold) maps every block of
 * 128 KiB or more on its own and unmaps it at free. */
static void serve_malloc_policy(void) {
#if defined(__GLIBC__)
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
    mallopt(M_TRIM_THRESHOLD, 1024 * 1024);
#endif
}

int cli_cmd_serve(cli_opts *o) {
    serve_malloc_policy();
    if (o->chat_template && o->chat_template_file)
        return cli_usage_error("serve", "--chat-template and --chat-template-file exclude each other");
    if (o->chat_template && el_chat_family_from_name(o->chat_template) == EL_CHAT_UNKNOWN)
        return cli_usage_error("serve", "unknown chat template '%s' (gemma, llama3, llama2, chatml, mistral, phi3)",
                               o->chat_template);
    if (o->reasoning_format && el_reasoning_format_parse(o->reasoning_format) < 0)
        return cli_usage_error("serve", "--reasoning-format: expected none, deepseek or auto, got '%.40s'",
                               o->reasoning_format);
    if (o->max_conns_per_addr > (o->max_conns ? o->max_conns : 256))
        return cli_usage_error("serve", "--max-conns-per-addr %d: more than --max-conns (%d); at most that many",
                               o->max_conns_per_addr, o->max_conns ? o->max_conns : 256);
    /* routing: the policy is checked before anything else starts */
    el_policy policy;
    if (o->policy) {
        char msg[600];
        if (el_policy_load(o->policy, &policy, msg, sizeof msg)) return cli_failf("--policy: %s", msg);
    }
    char cloud_key[512] = "";
    if (o->cloud_key_file) {
        char msg[300];
        FILE *kf = el_fopen_regular(o->cloud_key_file, msg, sizeof msg);
        if (!kf) return cli_failf("--cloud-key-file: %s", msg);
        size_t kn = fread(cloud_key, 1, sizeof cloud_key - 1, kf);
        fclose(kf);
        cloud_key[kn] = 0;
        while (kn > 0 && (cloud_key[kn - 1] == '\n' || cloud_key[kn - 1] == '\r' || cloud_key[kn - 1] == ' '))
            cloud_key[--kn] = 0;
        if (!kn) return cli_failf("--cloud-key-file: %s is empty", o->cloud_key_file);
    } else if (getenv("EDGELLM_CLOUD_KEY")) {
        snprintf(cloud_key, sizeof cloud_key, "%s", getenv("EDGELLM_CLOUD_KEY"));
    }
    /* package checks before the server starts; with a policy, a model that
     * fails them leaves the server up without a local route */
    cli_measure_runtime(o); /* M_runtime: the process as it starts, measured as plan measures it */
    int vr = cli_verify_before_load(o);
    bool local_ok = vr < 0;
    if (!local_ok && !o->policy) return vr;
    if (local_ok) { /* --draft-model: refused before the server starts when its tokenizer is not the target's */
        const int dc = cli_draft_check_tokenizer(o);
        if (dc >= 0) return dc;
    }

    const int crash_after = local_ok ? fault_crash_after(o->model) : 0;
    if (crash_after < 0) return cli_failf("EL_FAULT_SERVE_CRASH: expected SHA256:N (64 hex digits, N >= 1)");
    if (crash_after > 0)
        fprintf(stderr, "edgellm serve: EL_FAULT_SERVE_CRASH matches this model: it aborts after %d requests\n",
                crash_after);

    /* Block the stop signals before any thread starts, so all inherit the mask. */
    sigset_t stop_set;
    sigemptyset(&stop_set);
    sigaddset(&stop_set, SIGINT);
    sigaddset(&stop_set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_set, NULL);
    signal(SIGPIPE, SIG_IGN);

    el_server_params p;
    memset(&p, 0, sizeof p);
    p.model_path = o->model ? o->model : "(no model)"; /* --store whose check failed, with --policy */
    p.host = o->host ? o->host : "127.0.0.1";
    p.port = o->port;
    p.n_parallel = o->n_parallel;
    p.n_ctx = o->n_ctx;
    p.n_batch = o->n_batch;
    el_session_params spec_sp = el_session_default_params(); /* the slots get n_draft_max in the server */
    cli_spec_setup(o, &spec_sp, &p.spec);
    p.draft_model = o->draft_model;
    p.type_k = o->cache_type_k;
    p.type_v = o->cache_type_v;
    p.n_threads = o->n_threads;
    p.queue_cap = o->queue_cap;
    p.api_key = o->api_key;
    p.chat_template = o->chat_template;
    p.chat_template_file = o->chat_template_file;
    p.chat_template_kwargs = o->chat_template_kwargs;
    p.reasoning_format = o->reasoning_format;
    p.trust_chat_special = o->trust_chat_special;
    p.verbose = o->verbose;
    p.allow_hosts = o->allow_hosts;
    p.n_allow_hosts = o->n_allow_hosts;
    p.cors_origin = o->cors;
    p.cors_origins = o->cors_origins;
    p.mem_budget = o->mem_budget;
    p.mem_floor = o->mem_floor;
    p.expert_budget = o->expert_budget;
    p.expert_budget_pct = o->expert_budget_pct;
    p.mem_runtime = o->mem_runtime;
    p.alias = o->alias;
    p.no_slots = o->no_slots;
    p.no_ui = o->no_ui;
    p.no_batch = o->no_batch;
    p.batch_chunk = o->batch_chunk;
    p.batch_wait_us = o->batch_wait_us < 0 ? 0 : o->batch_wait_us == 0 ? -1 : o->batch_wait_us;
    p.conn_limit = o->max_conns;
    p.conn_per_addr = o->max_conns_per_addr;
    p.cache_prompt = o->cache_prompt;
    p.slot_save_path = o->slot_save_path;
    p.embeddings = o->embeddings;
    p.pooling = o->pooling;
    p.pooling_set = o->pooling >= 0;
    p.has_temp = o->temp_set;
    p.temp = o->sampling.temp;
    p.has_seed = o->seed_set;
    p.seed = o->sampling.seed;
    p.n_predict = o->n_predict_set ? o->n_predict : 0;
    p.policy = o->policy ? &policy : NULL;
    p.cloud_url = o->cloud_url;
    p.cloud_key = cloud_key[0] ? cloud_key : NULL;
    p.cloud_model = o->cloud_model;
    p.thermal_source = o->thermal_source;
    p.telemetry_dir = o->telemetry_dir;
    p.telemetry_max_bytes = o->telemetry_max_bytes;
    p.telemetry_keep = o->telemetry_keep;
    p.otlp_url = o->otlp_url;
    p.audit_log = o->audit_log;
    p.load = o->load;
    p.backend = &o->backend;
    p.ctx_overflow_truncate = o->ctx_overflow == 1; /* serve's default: error */
    const char *lora_names[CLI_MAX_LORA];
    for (int i = 0; i < o->n_lora; i++) lora_names[i] = o->lora_name[i];
    p.lora_names = lora_names;
    p.lora_paths = o->lora_path;
    p.lora_scales = o->lora_scale;
    p.n_lora = o->n_lora;
    p.lora_budget = o->lora_budget;
    p.fault_crash_after = crash_after;

    el_error err = {0};
    el_server *srv = el_server_start(&p, &err);
    if (!srv) return cli_fail(&err);

    loader l = {.srv = srv, .rc = -1};
    atomic_init(&l.done, 0);
    pthread_t lt;
    if (!local_ok) { /* no loader: the model did not pass its checks */
        el_server_set_local_unavailable(srv, "the model package did not pass its checks (see the log)");
        l.rc = -1;
        snprintf(l.err.msg, sizeof l.err.msg, "the model package did not pass its checks");
        atomic_store(&l.done, 1);
    } else if (pthread_create(&lt, NULL, load_main, &l)) {
        el_server_free(srv);
        return cli_failf("cannot start the loader thread");
    }
    bool loaded = false, stop = false;
    int sig = 0;
    while (!stop) {
        if (loaded) { /* ready: nothing left to poll for */
            if (sigwait(&stop_set, &sig) == 0) stop = true;
            continue;
        }
        struct timespec ts = {0, 50 * 1000 * 1000};
        sig = sigtimedwait(&stop_set, NULL, &ts);
        if (sig == SIGINT || sig == SIGTERM) stop = true;
        if (atomic_load(&l.done)) {
            if (local_ok) pthread_join(lt, NULL);
            loaded = true;
            if (l.rc != 0 && !o->policy) {
                el_server_free(srv);
                return cli_fail(&l.err);
            }
            const char *h = p.host;
            bool v6 = strchr(h, ':') != NULL;
            if (l.rc != 0) { /* with a policy: serve on, routing around the missing model */
                char why[200];
                snprintf(why, sizeof why, "%.190s", l.err.msg[0] ? l.err.msg : "the model failed to load");
                el_server_set_local_unavailable(srv, why);
                fprintf(stderr, "edgellm serve: no local model (%s); routing to the cloud where the policy allows\n", why);
            } else {
                fprintf(stderr, "chat template: %s\n", el_server_chat_family(srv));
            }
            fprintf(stderr, "listening on http://%s%s%s:%d\n", v6 ? "[" : "", h, v6 ? "]" : "", el_server_port(srv));
            fflush(stderr);
        }
    }
    fprintf(stderr, "edgellm serve: %s: stopping\n", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    if (!loaded && local_ok) pthread_join(lt, NULL); /* a model load cannot be interrupted */
    el_server_free(srv);
    return CLI_EXIT_OK;
}
