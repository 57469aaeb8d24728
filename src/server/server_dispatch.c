/*
 * server_dispatch.c — the route table and the access handler every request
 * passes (after the transport's prelude, server_http.c), and the service
 * endpoints: /health, /metrics, /v1/models, the chat page.
 *
 * Routes (ROUTES). The OpenAI routes answer with and without /v1, as
 * llama-server's do; llama-server's own routes sit beside them (/completion,
 * /props, /slots, /apply-template, the chat token count, /lora-adapters,
 * /tokenize, /detokenize, the embeddings routes) and /slots/{id} takes the
 * slot actions (server_llama.c). The first call for a request (headers only)
 * answers the route, the method, the API key ("Authorization: Bearer" or
 * "X-Api-Key") and a declared body size before any of the body is read;
 * everything but /health, /v1/health, /metrics and / is 503 until the model
 * is loaded, except generation requests, which are routed without a local
 * model (cloud or declined).
 */
#include "server/server_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "backend/cpu/threadpool.h"
#include "memory/capacity.h"

/* the chat page (src/server/ui/index.html), embedded by the build (cmake/embed_file.cmake) */
extern const char el_ui_page_html[];
extern const size_t el_ui_page_html_len;

/* ---- the service endpoints ------------------------------------------------ */

/* GET /v1/models: the one model, by its id (the first --alias, else the file name), with "aliases"
 * (every --alias name, as llama-server lists them; [] without). */
static enum MHD_Result h_models(el_server *s, struct MHD_Connection *c, conn_ctx *cc) {
    (void)cc;
    cJSON *root = cJSON_CreateObject(), *data = cJSON_CreateArray(), *m = cJSON_CreateObject();
    cJSON *al = cJSON_CreateArray();
    if (!root || !data || !m || !al) {
        cJSON_Delete(root);
        cJSON_Delete(data);
        cJSON_Delete(m);
        cJSON_Delete(al);
        return srv_send_error(c, 500, "server_error", NULL, NULL, "out of memory");
    }
    for (const char *q = s->aliases; q && *q;) {
        size_t l = strcspn(q, ",");
        const char *a = q, *next = q[l] ? q + l + 1 : q + l;
        while (l && (*a == ' ' || *a == '\t')) a++, l--;
        while (l && (a[l - 1] == ' ' || a[l - 1] == '\t')) l--;
        char name[256];
        if (l && l < sizeof name) {
            memcpy(name, a, l);
            name[l] = 0;
            cJSON_AddItemToArray(al, cJSON_CreateString(name));
        }
        q = next;
    }
    cJSON_AddStringToObject(root, "object", "list");
    cJSON_AddStringToObject(m, "id", s->model_id);
    cJSON_AddItemToObject(m, "aliases", al);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", (double)s->t_start);
    cJSON_AddStringToObject(m, "owned_by", "edgellm");
    cJSON_AddItemToArray(data, m);
    cJSON_AddItemToObject(root, "data", data);
    return srv_send_cjson(c, MHD_HTTP_OK, root);
}

/* Memory figures for /health and /metrics (memory/capacity.h): the budget, the
 * plan (weights + runtime + every slot's session), the resident watermark and
 * now, and the headroom = budget - plan (room for more KV). */
typedef struct mem_view { unsigned long long budget, planned, peak, rss; long long headroom; } mem_view;

static mem_view mem_now(const el_server *s) {
    mem_view v = {s->mem_budget, s->mem_planned, el_mem_peak_rss(), el_mem_current_rss(), 0};
    v.headroom = (long long)v.budget - (long long)v.planned;
    return v;
}

/* GET /health, /v1/health: 503 "loading" (or "no_local_model") until the model is loaded, then "ok" with the
 * memory figures; always the route, thermal state and, once loaded, where the ops run. */
static enum MHD_Result h_health(el_server *s, struct MHD_Connection *c, conn_ctx *cc) {
    (void)cc;
    const bool ready = atomic_load(&s->ready);
    char body[400];
    int n;
    if (!ready) {
        pthread_mutex_lock(&s->mu);
        const bool unavailable = s->local_why[0] != 0;
        pthread_mutex_unlock(&s->mu);
        n = snprintf(body, sizeof body, "{\"status\":\"%s\"}", unavailable ? "no_local_model" : "loading");
    } else {
        const mem_view mv = mem_now(s);
        const bool pressure = el_mem_pressure(s->p.mem_floor, NULL, 0);
        n = snprintf(body, sizeof body,
                     "{\"status\":\"ok\",\"memory\":{\"budget_bytes\":%llu,\"planned_bytes\":%llu,\"kv_headroom_bytes\":%lld,"
                     "\"peak_rss_bytes\":%llu,\"rss_bytes\":%llu,\"pressure\":%s}}",
                     mv.budget, mv.planned, mv.headroom, mv.peak, mv.rss, pressure ? "true" : "false");
    }
    /* routing and thermal state */
    char *rj = el_router_health_json(s->router);
    const el_thermal_state ts = el_thermal_get(s->thermal);
    cJSON *tj = cJSON_CreateObject();
    if (tj) {
        cJSON_AddStringToObject(tj, "level", el_thermal_level_name(ts.level));
        cJSON_AddBoolToObject(tj, "sensor", ts.has_sensor);
        cJSON_AddBoolToObject(tj, "sensor_ok", ts.sensor_ok);
        cJSON_AddNumberToObject(tj, "temp_c", ts.temp_c);
        cJSON_AddNumberToObject(tj, "freq_ratio", ts.freq_ratio);
        cJSON_AddNumberToObject(tj, "factor", ts.factor);
        cJSON_AddNumberToObject(tj, "transitions", (double)ts.transitions);
        cJSON_AddNumberToObject(tj, "samples", (double)ts.samples);
        cJSON_AddStringToObject(tj, "detail", ts.why);
        cJSON_AddNumberToObject(tj, "admitted_slots", ready ? srv_admitted_slots(s) : 0);
        cJSON_AddNumberToObject(tj, "threads_active", srv_threads_active(s)); /* derated: fewer generate */
        cJSON_AddNumberToObject(tj, "threads_total", ready ? el_pool_size(s->model->pool) : 0);
    }
    char *tjs = tj ? cJSON_PrintUnformatted(tj) : NULL;
    cJSON_Delete(tj);
    /* where the ops run (runtime/exec.h): the backends, ops each ran, fallbacks */
    char *pj = NULL;
    size_t pj_len = 0;
    if (ready) {
        FILE *pf = open_memstream(&pj, &pj_len);
        if (pf) {
            el_backends_json(s->model, pf);
            fclose(pf);
        }
    }
    size_t cap = (size_t)n + (rj ? strlen(rj) : 0) + (tjs ? strlen(tjs) : 0) + pj_len + 48;
    char *copy = malloc(cap); /* srv_send_buf frees it */
    if (copy && rj && tjs)
        n = snprintf(copy, cap, "%.*s,\"route\":%s,\"thermal\":%s%s%s}", n - 1, body, rj, tjs, pj ? ",\"placement\":" : "",
                     pj ? pj : "");
    free(rj);
    free(tjs);
    free(pj);
    if (!copy || n < 0 || (size_t)n >= cap) {
        free(copy);
        return srv_send_error(c, 500, "server_error", NULL, NULL, "out of memory");
    }
    return srv_send_buf(c, ready ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE, "application/json", copy, (size_t)n, true,
                        NULL, NULL);
}

/* txt (malloc'd) with more appended, or NULL when either is NULL or memory runs out (txt is freed then). */
static char *cat(char *txt, const char *more) {
    const size_t tl = txt ? strlen(txt) : 0, ml = more ? strlen(more) : 0;
    char *both = txt && more ? realloc(txt, tl + ml + 1) : NULL;
    if (!both) {
        free(txt);
        return NULL;
    }
    memcpy(both + tl, more, ml + 1);
    return both;
}

/* GET /metrics (Prometheus text): requests and latencies (metrics.h), connections, memory, batched decoding,
 * routing and thermal state, telemetry's counters, LoRA residency. */
static enum MHD_Result h_metrics(el_server *s, struct MHD_Connection *c, conn_ctx *cc) {
    (void)cc;
    pthread_mutex_lock(&s->mu);
    int busy = s->busy, depth = s->q_len;
    pthread_mutex_unlock(&s->mu);
    int total = atomic_load(&s->ready) ? s->n_slots : 0; /* n_slots is written by the loader before `ready` */
    char conn[1024];
    srv_conn_metrics(s, conn, sizeof conn);
    char *txt = cat(el_metrics_render(&s->metrics, busy, total, depth), conn);
    if (txt && atomic_load(&s->ready)) { /* memory gauges (h_health's figures) */
        const mem_view mv = mem_now(s);
        char extra[1024];
        snprintf(extra, sizeof extra,
                 "# HELP edgellm_memory_budget_bytes Memory budget of the model and its slots.\n"
                 "# TYPE edgellm_memory_budget_bytes gauge\nedgellm_memory_budget_bytes %llu\n"
                 "# HELP edgellm_memory_planned_bytes Planned memory: weights + runtime + every slot's session + the batcher's scratch.\n"
                 "# TYPE edgellm_memory_planned_bytes gauge\nedgellm_memory_planned_bytes %llu\n"
                 "# HELP edgellm_kv_headroom_bytes Budget left over the plan (room for more KV).\n"
                 "# TYPE edgellm_kv_headroom_bytes gauge\nedgellm_kv_headroom_bytes %lld\n"
                 "# HELP edgellm_memory_peak_rss_bytes Resident set watermark (VmHWM).\n"
                 "# TYPE edgellm_memory_peak_rss_bytes gauge\nedgellm_memory_peak_rss_bytes %llu\n"
                 "# HELP edgellm_memory_rss_bytes Resident set now (VmRSS).\n"
                 "# TYPE edgellm_memory_rss_bytes gauge\nedgellm_memory_rss_bytes %llu\n",
                 mv.budget, mv.planned, mv.headroom, mv.peak, mv.rss);
        txt = cat(txt, extra);
    }
    if (txt && atomic_load(&s->ready) && s->batcher) { /* batched decoding (runtime/batch.h); set before `ready` */
        const el_batcher_stats bs = el_batcher_get_stats(s->batcher);
        char extra[2100];
        snprintf(extra, sizeof extra,
                 "# HELP edgellm_batch_rounds_total Batched decode rounds (one forward for the slots decoding).\n"
                 "# TYPE edgellm_batch_rounds_total counter\nedgellm_batch_rounds_total %llu\n"
                 "# HELP edgellm_batch_streams_total Decode steps run in rounds (streams per round summed).\n"
                 "# TYPE edgellm_batch_streams_total counter\nedgellm_batch_streams_total %llu\n"
                 "# HELP edgellm_batch_multi_rounds_total Rounds of more than one stream.\n"
                 "# TYPE edgellm_batch_multi_rounds_total counter\nedgellm_batch_multi_rounds_total %llu\n"
                 "# HELP edgellm_batch_timed_rounds_total Rounds started by the wait bound, not a full set.\n"
                 "# TYPE edgellm_batch_timed_rounds_total counter\nedgellm_batch_timed_rounds_total %llu\n"
                 "# HELP edgellm_batch_prefill_chunks_total Prompt chunks prefilled between rounds.\n"
                 "# TYPE edgellm_batch_prefill_chunks_total counter\nedgellm_batch_prefill_chunks_total %llu\n"
                 "# HELP edgellm_batch_admitted_chunks_total Prompt chunks run ahead of a round of streams not yet decoding (requests arriving together).\n"
                 "# TYPE edgellm_batch_admitted_chunks_total counter\nedgellm_batch_admitted_chunks_total %llu\n"
                 "# HELP edgellm_batch_max_streams The largest round so far.\n"
                 "# TYPE edgellm_batch_max_streams gauge\nedgellm_batch_max_streams %d\n"
                 "# HELP edgellm_batch_rows_limit Streams one round may take (the slots, or fewer when the memory budget holds less scratch).\n"
                 "# TYPE edgellm_batch_rows_limit gauge\nedgellm_batch_rows_limit %d\n",
                 (unsigned long long)bs.rounds, (unsigned long long)bs.streams,
                 (unsigned long long)bs.multi_rounds, (unsigned long long)bs.timed_rounds,
                 (unsigned long long)bs.prefill_chunks, (unsigned long long)bs.admitted_chunks,
                 bs.max_rows_seen, s->batch_rows);
        txt = cat(txt, extra);
    }
    if (txt) { /* routing and thermal */
        char *rm = el_router_metrics(s->router);
        const el_thermal_state ts = el_thermal_get(s->thermal);
        char th[1400];
        snprintf(th, sizeof th,
                 "# HELP edgellm_thermal_level Thermal level: 0 normal, 1 derated, 2 hot.\n"
                 "# TYPE edgellm_thermal_level gauge\nedgellm_thermal_level %d\n"
                 "# HELP edgellm_thermal_temp_celsius Last sane sensor reading (hottest zone).\n"
                 "# TYPE edgellm_thermal_temp_celsius gauge\nedgellm_thermal_temp_celsius %.1f\n"
                 "# HELP edgellm_thermal_derate_factor Share of the measured local speed counted on.\n"
                 "# TYPE edgellm_thermal_derate_factor gauge\nedgellm_thermal_derate_factor %.3f\n"
                 "# HELP edgellm_thermal_transitions_total Thermal level changes.\n"
                 "# TYPE edgellm_thermal_transitions_total counter\nedgellm_thermal_transitions_total %ld\n"
                 "# HELP edgellm_threads_active Threads generating (fewer while thermally derated).\n"
                 "# TYPE edgellm_threads_active gauge\nedgellm_threads_active %d\n",
                 (int)ts.level, ts.temp_c, ts.factor, ts.transitions, srv_threads_active(s));
        txt = cat(cat(txt, rm), th);
        free(rm);
    }
    if (txt && s->tel) { /* telemetry's own counters */
        long sp = 0, ex = 0, dr = 0;
        el_telemetry_counts(s->tel, &sp, &ex, &dr);
        char tm[512];
        snprintf(tm, sizeof tm,
                 "# HELP edgellm_telemetry_events_total Telemetry events spooled, exported over OTLP, dropped.\n"
                 "# TYPE edgellm_telemetry_events_total counter\n"
                 "edgellm_telemetry_events_total{outcome=\"spooled\"} %ld\n"
                 "edgellm_telemetry_events_total{outcome=\"exported\"} %ld\n"
                 "edgellm_telemetry_events_total{outcome=\"dropped\"} %ld\n",
                 sp, ex, dr);
        txt = cat(txt, tm);
    }
    if (txt && s->audit) { /* the audit log's write failures (disk full, I/O errors): its lines are not dropped silently */
        char am[256];
        snprintf(am, sizeof am,
                 "# HELP edgellm_audit_write_failures_total Audit log lines that could not be written.\n"
                 "# TYPE edgellm_audit_write_failures_total counter\nedgellm_audit_write_failures_total %ld\n",
                 el_audit_failed(s->audit));
        txt = cat(txt, am);
    }
    el_expert_stats es;
    if (txt && atomic_load(&s->ready) && el_model_expert_stats(s->model, &es) == 0) { /* MoE expert residency */
        pthread_mutex_lock(&s->metrics.mu);
        const uint64_t toks = s->metrics.prompt_tokens + s->metrics.generated_tokens;
        pthread_mutex_unlock(&s->metrics.mu);
        char em[2048];
        snprintf(em, sizeof em,
                 "# HELP edgellm_expert_hits_total Expert uses (each expert a MoE op used) found resident.\n"
                 "# TYPE edgellm_expert_hits_total counter\nedgellm_expert_hits_total %llu\n"
                 "# HELP edgellm_expert_misses_total Expert uses not resident (faulted back in).\n"
                 "# TYPE edgellm_expert_misses_total counter\nedgellm_expert_misses_total %llu\n"
                 "# HELP edgellm_expert_hit_rate Hits / expert uses since start (0 before any).\n"
                 "# TYPE edgellm_expert_hit_rate gauge\nedgellm_expert_hit_rate %.6f\n"
                 "# HELP edgellm_expert_faulted_bytes_total Expert bytes brought back by misses.\n"
                 "# TYPE edgellm_expert_faulted_bytes_total counter\nedgellm_expert_faulted_bytes_total %llu\n"
                 "# HELP edgellm_expert_faulted_bytes_per_token Faulted expert bytes per token evaluated (prompt + generated) since start.\n"
                 "# TYPE edgellm_expert_faulted_bytes_per_token gauge\nedgellm_expert_faulted_bytes_per_token %.1f\n"
                 "# HELP edgellm_expert_releases_total Experts released (madvise) beyond the budget.\n"
                 "# TYPE edgellm_expert_releases_total counter\nedgellm_expert_releases_total %llu\n"
                 "# HELP edgellm_expert_resident_bytes Routed experts' bytes now resident.\n"
                 "# TYPE edgellm_expert_resident_bytes gauge\nedgellm_expert_resident_bytes %llu\n"
                 "# HELP edgellm_expert_budget_bytes The expert residency budget.\n"
                 "# TYPE edgellm_expert_budget_bytes gauge\nedgellm_expert_budget_bytes %llu\n"
                 "# HELP edgellm_expert_total_bytes Every routed expert's bytes.\n"
                 "# TYPE edgellm_expert_total_bytes gauge\nedgellm_expert_total_bytes %llu\n",
                 (unsigned long long)es.hits, (unsigned long long)es.misses,
                 es.hits + es.misses ? (double)es.hits / (double)(es.hits + es.misses) : 0.0,
                 (unsigned long long)es.bytes_faulted, toks ? (double)es.bytes_faulted / (double)toks : 0.0,
                 (unsigned long long)es.releases, (unsigned long long)es.resident_bytes,
                 (unsigned long long)es.budget_bytes, (unsigned long long)es.total_bytes);
        txt = cat(txt, em);
    }
    if (txt && s->lora) { /* LoRA residency (lora_registry.h) */
        char *lm = el_lora_reg_metrics(s->lora);
        txt = cat(txt, lm);
        free(lm);
    }
    if (!txt) return srv_send_error(c, 500, "server_error", NULL, NULL, "out of memory");
    return srv_send_buf(c, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", txt, strlen(txt), true, NULL, NULL);
}

/* GET /: the chat page (404 with --no-ui). */
static enum MHD_Result h_page(el_server *s, struct MHD_Connection *c, conn_ctx *cc) {
    (void)cc;
    if (s->p.no_ui) return srv_send_error(c, 404, "invalid_request_error", NULL, "not_found", "the chat page is off (--no-ui)");
    return srv_send_buf(c, MHD_HTTP_OK, "text/html; charset=utf-8", (char *)el_ui_page_html, el_ui_page_html_len, false,
                        NULL, NULL);
}

/* ---- the route table and the access handler ---------------------------- */

/* llama-server answers its OpenAI routes with and without the /v1 prefix; so does this table
 * (except /completions: llama-server's is its native /completion, not /v1/completions). */
static const route ROUTES[] = {
    {"/v1/chat/completions", "POST", true, true, srv_h_chat},
    {"/chat/completions", "POST", true, true, srv_h_chat},
    {"/v1/completions", "POST", true, true, srv_h_completions},
    {"/completions", "POST", true, true, srv_h_native},
    {"/completion", "POST", true, true, srv_h_native},
    {"/v1/models", "GET", true, true, h_models},
    {"/models", "GET", true, true, h_models},
    {"/v1/embeddings", "POST", true, true, srv_h_embeddings},
    {"/embeddings", "POST", true, true, srv_h_embeddings},
    {"/embedding", "POST", true, true, srv_h_embeddings},
    {"/v1/chat/completions/input_tokens", "POST", true, true, srv_h_input_tokens},
    {"/chat/completions/input_tokens", "POST", true, true, srv_h_input_tokens},
    {"/apply-template", "POST", true, true, srv_h_apply_template},
    {"/props", "GET", true, true, srv_h_props},
    {"/lora-adapters", "GET", true, true, srv_h_lora_list},
    {"/lora-adapters", "POST", true, true, srv_h_lora_set},
    {"/slots", "GET", true, true, srv_h_slots},
    {"/tokenize", "POST", true, true, srv_h_tokenize},
    {"/detokenize", "POST", true, true, srv_h_detokenize},
    {"/health", "GET", false, false, h_health},
    {"/v1/health", "GET", false, false, h_health},
    {"/metrics", "GET", true, false, h_metrics},
    {"/", "GET", false, false, h_page},
};

/* POST /slots/{id}?action=...: the slot actions (404 for a slot that does not exist) */
static const route SLOT_ACTION = {"/slots/{id}", "POST", true, true, srv_h_slot_action};

/* API key check ('Authorization: Bearer KEY', or 'X-Api-Key: KEY' as
 * llama-server accepts) in constant time for a given key length: one pass
 * over max(len) bytes, XOR-accumulated, no early exit. */
static bool auth_ok(struct MHD_Connection *c, const char *key) {
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    const char *tok = "";
    if (h && strncasecmp(h, "Bearer ", 7) == 0) {
        tok = h + 7;
        while (*tok == ' ') tok++;
    } else if (!h && (h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Api-Key"))) {
        tok = h;
    }
    size_t a = strlen(tok), b = strlen(key), n = a > b ? a : b;
    volatile unsigned char acc = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char x = (unsigned char)(i < a ? tok[i] : 0);
        unsigned char y = (unsigned char)(i < b ? key[i] : 0);
        acc |= (unsigned char)(x ^ y);
    }
    return (acc | (unsigned char)(a != b)) == 0;
}

enum MHD_Result srv_on_access(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *upload_data, size_t *upload_data_size,
                              void **con_cls) {
    (void)version;
    el_server *s = cls;
    conn_ctx *cc = *con_cls;
    if (!cc) {
        /* first call: headers only — route, method, key and size are answered
         * before any of the body is read */
        cc = calloc(1, sizeof *cc);
        if (!cc) return MHD_NO;
        *con_cls = cc;
        for (size_t i = 0; i < sizeof ROUTES / sizeof ROUTES[0]; i++)
            if (!strcmp(url, ROUTES[i].path) && (!cc->rt || !strcmp(method, ROUTES[i].method))) cc->rt = &ROUTES[i];
        if (!cc->rt && !strncmp(url, "/slots/", 7)) {
            const char *d = url + 7;
            char *end = NULL;
            long id = (*d >= '0' && *d <= '9' && strlen(d) <= 9) ? strtol(d, &end, 10) : -1;
            int n_slots = atomic_load(&s->ready) ? s->n_slots : 0;
            if (id < 0 || !end || *end || id >= n_slots)
                return srv_send_error(c, 404, "invalid_request_error", "id_slot", "not_found",
                                      "no such slot: '%.40s' (the server has slots 0..%d)", d, n_slots - 1);
            cc->rt = &SLOT_ACTION;
            cc->slot_id = (int)id;
        }
        if (!cc->rt) return srv_send_error(c, 404, "invalid_request_error", NULL, "not_found", "no such endpoint: %s", url);
        bool get = !strcmp(cc->rt->method, "GET");
        if (strcmp(method, cc->rt->method) && !(get && !strcmp(method, "HEAD"))) {
            el_api_error e;
            memset(&e, 0, sizeof e);
            el_api_set_error(&e, 405, "invalid_request_error", NULL, "method_not_allowed", "%s does not accept %s; use %s",
                             cc->rt->path, method, cc->rt->method);
            return srv_send_api_error_h(c, &e, MHD_HTTP_HEADER_ALLOW, get ? "GET, HEAD" : "POST");
        }
        if (cc->rt->auth && s->api_key && !auth_ok(c, s->api_key)) {
            el_api_error e;
            memset(&e, 0, sizeof e);
            el_api_set_error(&e, 401, "authentication_error", NULL, "invalid_api_key",
                             "missing or invalid API key (send 'Authorization: Bearer KEY' or 'X-Api-Key: KEY')");
            return srv_send_api_error_h(c, &e, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
        }
        /* A declared body over the limit is never stored. If the client waits
         * for "100 Continue", or the body is beyond all reason, answer now and
         * read none of it. Otherwise drain it unstored (up to SRV_DRAIN_MAX)
         * and answer at its end: closing a socket with unread data makes the
         * kernel reset the connection, and the client would lose the 413. */
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl) {
            errno = 0;
            char *end;
            unsigned long long v = strtoull(cl, &end, 10);
            if (errno || v > EL_API_MAX_BODY) {
                const char *ex = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_EXPECT);
                if ((ex && !strcasecmp(ex, "100-continue")) || errno || v > SRV_DRAIN_MAX)
                    return srv_send_error(c, 413, "invalid_request_error", NULL, "request_too_large",
                                          "the request body exceeds %u bytes", (unsigned)EL_API_MAX_BODY);
                cc->too_big = true;
            }
        }
        return MHD_YES;
    }
    if (*upload_data_size) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        return srv_body_chunk(s, c, cc, upload_data, n);
    }
    if (cc->over_budget) {
        el_metrics_request(&s->metrics, EL_REQ_REJECTED);
        el_api_error e;
        memset(&e, 0, sizeof e);
        el_api_set_error(&e, 503, "server_error", NULL, "server_busy",
                         "the server is holding %u bytes of request bodies already; retry later",
                         (unsigned)SRV_INFLIGHT_BYTES);
        return srv_send_api_error_h(c, &e, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    }
    if (cc->too_big)
        return srv_send_error(c, 413, "invalid_request_error", NULL, "request_too_large", "the request body exceeds %u bytes",
                              (unsigned)EL_API_MAX_BODY);
    if (cc->rt->needs_model && !atomic_load(&s->ready)) {
        /* no local model (yet): generation requests are routed (cloud or declined) */
        if (cc->rt->fn == srv_h_chat) return srv_h_generate_unready(s, c, cc, EL_API_CHAT);
        if (cc->rt->fn == srv_h_completions) return srv_h_generate_unready(s, c, cc, EL_API_COMPLETION);
        if (cc->rt->fn == srv_h_native) return srv_h_generate_unready(s, c, cc, EL_API_NATIVE);
        return srv_send_error(c, 503, "server_error", NULL, "loading", "the model is still loading");
    }
    return cc->rt->fn(s, c, cc);
}
