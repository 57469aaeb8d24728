/*
 * server.c — the local OpenAI-compatible server: HTTP (libmicrohttpd),
 * slots, the request queue and the request state machine.
 *
 * State. Process state is built once: the model (weights, vocab, thread
 * pool), its SHA-256 fingerprint, the chat template family, and N slots,
 * each a worker thread owning one el_session whose KV cache and scratch are
 * allocated at startup (el_session_new). Request state is one el_req per HTTP
 * request. A slot's session keeps its positions between requests as a
 * prompt cache (cache_prompt): the slot records the ids of the positions it
 * holds (ctoks[0..n_cache), always the session's n_past while idle); a
 * request keeps the longest prefix its prompt shares with them that the
 * session can roll back to (el_session_truncate; a sliding-window ring only
 * so far) and prefills the rest (el_generate_cached: the sampler still sees
 * the whole prompt), so no request sees another's text, only reuses the
 * arithmetic of a prefix equal to its own. A request that names no slot is
 * left to the idle slot whose cache shares the longest prefix with it
 * (slot_prefers). Slot actions (POST /slots/N?action=save|restore|erase,
 * srv_h_slot_action, file format in slot_file.h) hold an idle slot (sl->held:
 * its thread takes no request) and work on its session from the HTTP thread.
 *
 * Request lifecycle. QUEUED → PREFILL → DECODE → DONE | CANCELLED | FAILED.
 * All transitions happen under srv->mu and have one owner each:
 *   - the HTTP thread validates, tokenizes and checks the context before
 *     enqueueing (errors are answered synchronously, counted "rejected");
 *     a full queue answers 503 + Retry-After;
 *   - QUEUED → PREFILL: the slot that pops it (attaching its session);
 *   - QUEUED → CANCELLED: whoever cancels it while queued (it is unlinked
 *     from the queue in the same critical section, so no slot can see it);
 *   - PREFILL → DECODE: the slot, at the first generated token;
 *   - PREFILL/DECODE → DONE/CANCELLED/FAILED: the slot, after el_generate
 *     returns (cancellation of a running request only sets the request's
 *     flag and calls el_session_cancel on the attached session, under the
 *     lock, so a late cancel can never hit the session's next request).
 * srv_finish_locked() is the one place a request enters a terminal state; it
 * asserts the state was not terminal already, so metrics count exactly once.
 *
 * Ownership. el_req is refcounted: one reference for the HTTP side (the
 * handler while it waits for a non-streamed result, or the streaming
 * response's free callback), one for the queue/slot (dropped by the slot at
 * its terminal transition, or by the canceller of a queued request). The last
 * unref frees the request; nothing else frees it.
 *
 * Threading: MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION.
 * Each connection has its own thread, so a handler may block until a
 * non-streamed result is ready, and the streaming content-reader callback may
 * block on the request's condition variable until the slot produced the next
 * SSE frame. This keeps streaming and cancellation on one control path
 * without suspend/resume bookkeeping.
 *
 * Clients that go away. A client is gone when its socket shows a reset
 * (POLLHUP/POLLERR: srv_peer_check); a FIN alone is not enough, because a client
 * that half-closes (`nc -N`) still waits for its answer and, before the
 * server writes, looks exactly like one that closed. So a FIN is answered
 * with one probe write that a half-closed client accepts and a closed one
 * answers with a reset: an SSE comment on a stream, an interim "100
 * Continue" on a non-streamed HTTP/1.1 request (client_gone). The streaming
 * reader and the non-streamed handler check in 50/100 ms steps while they
 * wait; a full queue first drops the requests whose clients are gone
 * (queue_drop_gone_locked), and a slot skips such a request when it pops
 * it, so hit-and-run clients do not hold queue places; a failed write makes
 * MHD destroy a stream's response, whose free callback cancels as well.
 *
 * Connections (the "connection guard" section). Every TCP connection is
 * tracked with the phase of its request (headers, body, answering) from
 * MHD's connection notifications. MHD refuses connections beyond
 * SRV_CONN_LIMIT in total or SRV_CONN_PER_IP per address; near the limit a
 * new connection evicts an incomplete one (of the address holding the most);
 * a reaper thread closes connections whose headers or body take longer than
 * their deadline, which MHD's idle timeout cannot do against a client that
 * sends a byte a second. The request prelude (on_request, before srv_on_access)
 * refuses control bytes in the URL, conflicting Content-Length /
 * Transfer-Encoding, a Host outside the allow-list, an Origin other than the
 * server's own or --cors, and POST bodies not declared application/json; it
 * answers CORS preflights for the --cors origin. The work itself is bounded
 * by the slots and the bounded queue, so threads stay few on a device.
 *
 * Memory. Request bodies are capped at EL_API_MAX_BODY (1 MiB) each and, all
 * connections together, at SRV_INFLIGHT_BYTES (4 MiB) of bodies being
 * received, parsed or tokenized (srv_body_chunk/budget_take): a body that does not
 * fit is drained unstored and answered 503 + Retry-After. A generation
 * request gives its bytes back once its prompt is tokenized (prompt_done drops
 * the body and the message texts, so a queued request holds only its tokens),
 * /tokenize and /detokenize when the connection completes. Per body byte the
 * tokenizer's scratch dominates (~32 bytes), so the HTTP side's peak is about
 * 32 x 4 MiB above the model and sessions.
 *
 * Text. Generated text travels with its length, never as a C string: a
 * <0x00> byte token is a NUL byte in the text and \u0000 in the JSON.
 * el_generate already holds back a UTF-8 tail that can still complete (its
 * detokenizer, util/utf8.h), so a piece ends on a character boundary except
 * for bytes that can never form one and the last call's leftover; each piece
 * is sanitised once (el_utf8_sanitize: one U+FFFD per maximal ill-formed
 * subpart, so a reply cut mid-character ends in one U+FFFD) and then either
 * framed (stream) or appended to the
 * reply (non-stream), so the non-streamed text is the concatenation of the
 * stream's deltas. With logprobs each token's log-probabilities (the model's
 * log-softmax, el_token_info) are recorded (lp_rec) and rendered in OpenAI's
 * chat or legacy-completions shape, per chunk when streaming.
 *
 * Routes (ROUTES). The OpenAI routes answer with and without /v1, as
 * llama-server's do; llama-server's own routes sit beside them: /completion
 * (EL_API_NATIVE: the same request lifecycle, its own parser, sampler fields
 * and reply shape, built by native_json), /props and /slots (read under
 * srv->mu: a slot's `cur` is set when it pops a request and cleared with the
 * terminal transition), /apply-template, the chat token count, the slot
 * actions (501 without --slot-save-path), and the embeddings routes (srv_h_embeddings: 501 without
 * --embeddings; else each input runs through el_embed on a slot, queued like
 * any request, in run_request's embedding branch). A request may name its slot (id_slot): slots
 * skip queued requests meant for another slot, and enqueueing wakes every
 * slot. The API key may come as "Authorization: Bearer" or "X-Api-Key".
 * --temp/--seed/--n-predict fill what a request leaves out (srv_apply_defaults).
 *
 * Stream shape. A chat stream opens with the role alone (content null, put
 * in r->out before the request is queued); after it every chunk carries
 * text (a token whose text is still held back waits, its logprobs with it;
 * what remains rides on the finish chunk). Errors inside a stream take
 * llama-server's shape ({"error":{"code": status, "message", "type"}});
 * /v1 streams end in [DONE], /completion streams with their final object.
 *
 * Tool calls (structured/toolcall.h). A chat request with tools renders them
 * with the family's convention (el_chat_tokenize_tools; a family without one
 * is a 400); tool_choice "required" / a named function hands the composed call
 * grammar to generation (gp->grammar), "auto" leaves generation free and
 * parses the finished reply, "none" renders the tools but never parses
 * (llama.cpp's common/chat.cpp does the same). A parsed reply answers
 * message.tool_calls (content null when nothing else was said) with
 * finish_reason "tool_calls" ("length" when cut short). Streaming holds the
 * reply back (emit) until the end (srv_stream_tail → tool_frames), then sends the
 * content, and per call one delta with index, id, type and name (arguments
 * "") and the arguments in fragments — OpenAI's shape.
 *
 * Shutdown (el_server_free): MHD_quiesce_daemon stops accepting; queued
 * requests are cancelled (a queued stream gets its error event and [DONE],
 * as a running one does) and running ones told to cancel (they stop at the
 * next decode step); slot threads are joined; the server waits (bounded)
 * until every connection has sent its answer; the reaper is stopped;
 * MHD_stop_daemon joins the connection threads; then sessions and the model
 * are freed.
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
 * Telemetry and audit (route/telemetry.h, audit.h; off unless configured):
 * every routing decision and refusal goes to the audit log and a
 * route_decision / route_refused event (srv_route_request); every local request
 * end or cancellation is an event from srv_finish_locked (its one terminal
 * transition), a cloud request's end from route_cloud / cloud_stream_free;
 * el_server_load's failure and el_server_set_local_unavailable a load_error;
 * the thermal monitor's level changes (srv_on_thermal_change) an event, and they
 * cap the model's thread pool (derated: half, hot: a quarter).
 */
#include "server/server.h"
#include "server/server_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <microhttpd.h>
#include <sodium.h>

#include "backend/cpu/threadpool.h"
#include "memory/capacity.h"
#include "runtime/chat.h"
#include "runtime/model.h"
#include "runtime/batch.h"
#include "server/api.h"
#include "route/audit.h"
#include "route/cloud.h"
#include "structured/toolcall.h"
#include "server/lora_registry.h"
#include "deploy/manifest.h"
#include "server/metrics.h"
#include "route/policy.h"
#include "route/router.h"
#include "server/slot_file.h"
#include "route/telemetry.h"
#include "route/thermal.h"
#include "util/buf.h"
#include "util/utf8.h"
#include "util/file.h"

extern const char el_ui_page_html[];
extern const size_t el_ui_page_html_len;

#define SRV_DRAIN_WAIT_MS 3000     /* shutdown: how long responses may take to finish sending */
/* ---- connection guard -------------------------------------------------- */
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

/* ---- routing (route/router.h, cloud.h) ---------------------------------
 * Every generation request is routed before anything runs: local (queued
 * here), cloud (forwarded by this connection's thread, streamed through) or
 * declined (answered at once with why and what to do). The decision is
 * final: a local failure is a local failure, a cloud failure a cloud
 * failure; nothing falls back or splices. Every answer carries the route
 * (X-Edgellm-Route header; "edgellm": {"route": ...} in the body, on a
 * stream's first event). */

static enum MHD_Result h_models(el_server *s, struct MHD_Connection *c, conn_ctx *cc) {
    (void)cc;
    cJSON *root = cJSON_CreateObject(), *data = cJSON_CreateArray(), *m = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "object", "list");
    cJSON_AddStringToObject(m, "id", s->model_id);
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

static enum MHD_Result h_metrics(el_server *s, struct MHD_Connection *c, conn_ctx *cc) {
    (void)cc;
    pthread_mutex_lock(&s->mu);
    int busy = s->busy, depth = s->q_len;
    pthread_mutex_unlock(&s->mu);
    int total = atomic_load(&s->ready) ? s->n_slots : 0; /* n_slots is written by the loader before `ready` */
    char conn[512];
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
    if (txt && s->lora) { /* LoRA residency (lora_registry.h) */
        char *lm = el_lora_reg_metrics(s->lora);
        txt = cat(txt, lm);
        free(lm);
    }
    if (!txt) return srv_send_error(c, 500, "server_error", NULL, NULL, "out of memory");
    return srv_send_buf(c, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", txt, strlen(txt), true, NULL, NULL);
}

static enum MHD_Result h_page(el_server *s, struct MHD_Connection *c, conn_ctx *cc) {
    (void)s;
    (void)cc;
    return srv_send_buf(c, MHD_HTTP_OK, "text/html; charset=utf-8", (char *)el_ui_page_html, el_ui_page_html_len, false,
                        NULL, NULL);
}

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
/* /slots/{id}?action=...: 404 for a slot that does not exist, else 501 (not implemented yet) */
static const route SLOT_ACTION = {"/slots/{id}", "POST", true, true, srv_h_slot_action};

/* ---- the MHD access handler --------------------------------------------- */

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

/* ---- lifecycle --------------------------------------------------------- */

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
    s->alias = p->alias && *p->alias ? strdup(p->alias) : NULL;
    if (p->alias && *p->alias && !s->alias) FAIL(EL_ERR_NOMEM, "out of memory");
    if (p->slot_save_path && *p->slot_save_path) { /* as llama-server: created if absent; must be a directory */
        struct stat st;
        if (mkdir(p->slot_save_path, 0755) && errno != EEXIST)
            FAIL(EL_ERR_IO, "--slot-save-path %s: cannot create it: %s", p->slot_save_path, strerror(errno));
        if (stat(p->slot_save_path, &st) || !S_ISDIR(st.st_mode))
            FAIL(EL_ERR_IO, "--slot-save-path %s is not a directory", p->slot_save_path);
        if (!(s->slot_dir = strdup(p->slot_save_path))) FAIL(EL_ERR_NOMEM, "out of memory");
    }
    s->p.slot_save_path = s->slot_dir;
    if (!s->model_path || !s->host || (p->api_key && *p->api_key && !s->api_key) || (p->chat_template && !s->chat_template))
        FAIL(EL_ERR_NOMEM, "out of memory");
    s->p.model_path = s->model_path;
    s->p.host = s->host;
    s->p.api_key = s->api_key;
    s->p.chat_template = s->chat_template;
    s->p.alias = s->alias;
    if (s->p.n_parallel <= 0) s->p.n_parallel = 1;
    if (s->p.queue_cap < 0) s->p.queue_cap = 16;
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

/* Chat family: --chat-template, else the model's template, else by architecture (as `edgellm chat`). */
static int pick_family(el_server *s, el_error *err) {
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
        snprintf(s->fam_desc, sizeof s->fam_desc, "%s (detected from the model's template)", el_chat_family_name(s->fam));
        return 0;
    }
    if (s->fam != EL_CHAT_UNKNOWN)
        snprintf(s->fam_desc, sizeof s->fam_desc, "%s (%s; fallback for architecture '%s')", el_chat_family_name(s->fam),
                 tmpl ? "model's template not recognised" : "model has no template", arch);
    else
        snprintf(s->fam_desc, sizeof s->fam_desc, "none (%s template, no fallback for architecture '%s'): "
                 "/v1/chat/completions answers 500", tmpl ? "unrecognised" : "no", arch);
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
        mr.weights = el_model_weights_bytes(m);
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
    free(s->cors_origin);
    free(s->model_path);
    free(s->host);
    free(s->api_key);
    free(s->chat_template);
    free(s->alias);
    free(s);
}
