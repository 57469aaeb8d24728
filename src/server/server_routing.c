/*
 * server_routing.c — where a generation request runs, and what the server
 * tells telemetry and the audit log about it.
 *
 * Routing (route/router.h, cloud.h). Every generation request is routed
 * before anything runs (srv_route_request): local (queued by the caller),
 * cloud (forwarded by this connection's thread, streamed through) or
 * declined (answered at once with why and what to do). The decision is
 * final: a local failure is a local failure, a cloud failure a cloud
 * failure; nothing falls back or splices. Every answer carries the route
 * (X-Edgellm-Route header; "edgellm": {"route": ...} in the body, on a
 * stream's first event).
 *
 * Telemetry and audit (route/telemetry.h, audit.h; off unless configured):
 * every routing decision and refusal goes to the audit log and a
 * route_decision / route_refused event (srv_route_request); every local
 * request end or cancellation is an event (srv_tel_request_end, from
 * srv_finish_locked: its one terminal transition), a cloud request's end
 * from route_cloud / cloud_stream_free; el_server_load's failure and
 * el_server_set_local_unavailable a load_error (server.c); the thermal
 * monitor's level changes (srv_on_thermal_change) an event, and they cap the
 * model's thread pool (derated: half, hot: a quarter). Events are filled from
 * codes and numbers only (el_tev has no string); the data class goes in as
 * its index in the policy, so a class a client sent that the policy lacks is
 * never written.
 */
#include "server/server_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/threadpool.h"
#include "memory/capacity.h"
#include "route/audit.h"
#include "route/policy.h"

/* ---- telemetry hooks and thermal derating ------------------------------ */

/* The event's operation for a route kind. */
static el_tev_op tev_op(el_api_kind k) {
    return k == EL_API_CHAT ? EL_TOP_CHAT : k == EL_API_COMPLETION ? EL_TOP_COMPLETION : EL_TOP_NATIVE;
}

/* The route's codes in an event; the data class as its index in the policy (-1: not one of it). */
static void tev_route(const el_server *s, el_tev *e, const el_route *rt) {
    const el_policy *p = el_router_policy(s->router);
    e->route_source = (int)rt->source;
    e->reason = el_route_reason_code(rt->reason);
    e->class_given = rt->class_source && strcmp(rt->class_source, "default") != 0;
    e->data_class = -1;
    for (int i = 0; i < p->n_classes; i++)
        if (!strcmp(p->classes[i].name, rt->data_class)) e->data_class = i;
    e->canary = rt->canary;
}

/* Threads that generate at thermal level l: all, half (derated), a quarter (hot); at least one. */
static int threads_for(const el_server *s, el_thermal_level l) {
    const int n = el_pool_size(s->model->pool);
    const int k = l == EL_THERMAL_HOT ? n / 4 : l == EL_THERMAL_DERATED ? n / 2 : n;
    return k < 1 ? 1 : k;
}

/* The thread cap for level l (after load; any thread). */
void srv_derate_threads(el_server *s, el_thermal_level l) {
    if (!atomic_load(&s->ready) || !s->model) return;
    el_pool_set_active(s->model->pool, threads_for(s, l));
}

int srv_threads_active(const el_server *s) {
    return atomic_load(&s->ready) && s->model ? el_pool_active(s->model->pool) : 0;
}

void srv_on_thermal_change(void *user, el_thermal_level from, el_thermal_level to) {
    el_server *s = user;
    srv_derate_threads(s, to);
    el_tev e = el_tev_init(EL_TEV_THERMAL);
    e.thermal_from = from;
    e.thermal = to;
    e.threads_active = srv_threads_active(s);
    el_telemetry_emit(s->tel, &e);
}

/* A local request's end or cancellation (st: its terminal state), from srv_finish_locked: codes and numbers only. */
void srv_tel_request_end(const el_server *s, const el_req *r, req_state st) {
    el_tev e = el_tev_init(st == RS_CANCELLED ? EL_TEV_CANCELLED : EL_TEV_REQUEST_END);
    e.op = r->embd ? EL_TOP_EMBEDDINGS : tev_op(r->api.kind);
    if (!r->embd) tev_route(s, &e, &r->route);
    if (r->fp[0]) e.lora = (uint32_t)strtoul(r->fp + strlen(s->fingerprint) + strlen("+lora-"), NULL, 16);
    e.streamed = r->api.stream;
    e.thermal = el_thermal_get(s->thermal).level;
    const el_finish f = r->stats.finish;
    e.finish = st == RS_CANCELLED ? EL_TFIN_CANCELLED : st == RS_FAILED ? EL_TFIN_ERROR
             : f == EL_DONE_LENGTH ? EL_TFIN_LENGTH : EL_TFIN_STOP;
    e.error = st == RS_FAILED ? (int)(r->err.code ? r->err.code : EL_ERR_INTERNAL) : 0;
    e.n_prompt = r->embd ? -1 : r->stats.n_prompt;
    e.n_gen = r->embd ? -1 : r->stats.n_generated;
    if (r->stats.ttft_ms > 0) e.ttft_ms = r->stats.ttft_ms;
    if (r->stats.n_generated > 1) e.itl_ms = r->stats.decode_ms / (r->stats.n_generated - 1);
    e.total_ms = (now_s() - r->t_arrival) * 1000.0;
    e.peak_mem_bytes = el_tev_peak_rss();
    e.spec_drafted = r->stats.n_drafted;
    e.spec_accepted = r->stats.n_accepted;
    e.threads_active = srv_threads_active(s);
    el_telemetry_emit(s->tel, &e);
}

/* ---- routing ------------------------------------------------------------ */

/* The device state the router reads (s), now. */
static void route_device(el_server *s, el_route_device *d) {
    memset(d, 0, sizeof *d);
    d->local_ready = atomic_load(&s->ready);
    if (!d->local_ready) {
        pthread_mutex_lock(&s->mu);
        snprintf(d->local_why, sizeof d->local_why, "%s", s->local_why[0] ? s->local_why : "the model is still loading");
        pthread_mutex_unlock(&s->mu);
    }
    char why[160];
    if (el_mem_pressure(s->p.mem_floor, why, sizeof why)) {
        d->mem_pressure = true;
        snprintf(d->mem_why, sizeof d->mem_why, "%s", why);
    }
    el_thermal_state ts = el_thermal_get(s->thermal);
    d->thermal = ts.level;
    d->thermal_factor = ts.factor;
    if (s->audit) d->mem_avail_mib = (double)el_mem_device_available(NULL) / 1048576.0;
    d->battery_pct = -1;
    el_battery_read(NULL, &d->battery_pct, &d->discharging);
    el_router_device(s->router, d);
}

enum MHD_Result srv_send_routed(struct MHD_Connection *c, unsigned status, char *json, const el_route *rt,
                                const char *h2, const char *v2) {
    if (!json) return srv_send_error(c, 500, "server_error", NULL, NULL, "out of memory");
    struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(json), json, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(json);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    if (h2) MHD_add_response_header(resp, h2, v2);
    return srv_queue_routed(c, status, resp, rt);
}

static enum MHD_Result send_declined(el_server *s, struct MHD_Connection *c, const el_route *rt) {
    el_metrics_request(&s->metrics, EL_REQ_REJECTED);
    char ra[16];
    snprintf(ra, sizeof ra, "%d", rt->retry_after_s);
    return srv_send_routed(c, (unsigned)rt->status, el_route_decline_json(rt), rt,
                           rt->retry_after_s > 0 ? MHD_HTTP_HEADER_RETRY_AFTER : NULL, ra);
}

/* A cloud failure: a typed error with the route (never a local retry). */
static enum MHD_Result send_cloud_failure(el_server *s, struct MHD_Connection *c, const el_route *rt,
                                          const el_cloud_reply *rep) {
    el_metrics_request(&s->metrics, EL_REQ_FAILED);
    el_api_error e;
    memset(&e, 0, sizeof e);
    int status = 502;
    const char *code = "cloud_unreachable";
    if (rep->kind == EL_CLOUD_ERR_HTTP) {
        code = "cloud_http_error";
        if (rep->http_status >= 400 && rep->http_status < 500) status = rep->http_status;
    } else if (rep->kind == EL_CLOUD_ERR_BAD_RESPONSE) {
        code = "cloud_bad_response";
    } else if (strstr(rep->error, "imeout") || strstr(rep->error, "timed out")) {
        status = 504;
        code = "cloud_timeout";
    }
    el_api_set_error(&e, status, "cloud_error", NULL, code, "%s (routed to the cloud: %s); nothing ran locally",
                     rep->error, rt->reason);
    return srv_send_routed(c, (unsigned)status, el_route_inject(el_api_error_json(&e), rt), rt, NULL, NULL);
}

typedef struct cloud_stream {
    el_server *srv;
    el_cloud_relay *relay;
    el_tev ev;                  /* the request_end event, completed when the stream ends */
    double t0;
} cloud_stream;

/* The end of a request routed to the cloud (telemetry). */
static el_tev cloud_event(const el_server *s, const el_route *rt, el_api_kind kind, bool stream) {
    el_tev e = el_tev_init(EL_TEV_REQUEST_END);
    e.op = tev_op(kind);
    tev_route(s, &e, rt);
    e.streamed = stream;
    e.thermal = el_thermal_get(s->thermal).level;
    return e;
}

static el_tev_cloud_err cloud_err_code(const el_cloud_reply *rep) {
    if (rep->kind == EL_CLOUD_ERR_HTTP) return EL_TCLOUD_HTTP_ERROR;
    if (rep->kind == EL_CLOUD_ERR_BAD_RESPONSE) return EL_TCLOUD_BAD_RESPONSE;
    if (strstr(rep->error, "imeout") || strstr(rep->error, "timed out")) return EL_TCLOUD_TIMEOUT;
    return EL_TCLOUD_UNREACHABLE;
}

static ssize_t cloud_stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    cloud_stream *cs = cls;
    size_t n = el_cloud_relay_read(cs->relay, buf, max);
    return n ? (ssize_t)n : MHD_CONTENT_READER_END_OF_STREAM;
}

static void cloud_stream_free(void *cls) {
    cloud_stream *cs = cls;
    const bool ok = el_cloud_relay_ok(cs->relay), broken = el_cloud_relay_broken(cs->relay);
    /* neither: the client left mid-stream (the transfer is dropped here) */
    el_metrics_request(&cs->srv->metrics, ok ? EL_REQ_DONE : broken ? EL_REQ_FAILED : EL_REQ_CANCELLED);
    if (broken) el_router_cloud_result(cs->srv->router, false, 0); /* a broken stream marks the cloud down */
    if (!ok && !broken) cs->ev.kind = EL_TEV_CANCELLED;
    cs->ev.finish = ok ? EL_TFIN_STOP : broken ? EL_TFIN_ERROR : EL_TFIN_CANCELLED;
    if (broken) cs->ev.cloud_error = EL_TCLOUD_STREAM_BROKEN;
    cs->ev.total_ms = (now_s() - cs->t0) * 1000.0;
    el_telemetry_emit(cs->srv->tel, &cs->ev);
    el_cloud_relay_close(cs->relay);
    free(cs);
}

/* Forwards the request (cc->body, less its "edgellm" member) to the cloud and
 * relays the answer. */
static enum MHD_Result route_cloud(el_server *s, struct MHD_Connection *c, conn_ctx *cc, el_api_kind kind, bool stream,
                                   const el_route *rt) {
    const char *path = kind == EL_API_CHAT ? "/chat/completions" : "/completions";
    char *body = el_cloud_request_body(s->cloud, cc->body.p ? cc->body.p : "", cc->body.len, stream);
    if (!body) return srv_send_error(c, 500, "server_error", NULL, NULL, "out of memory");
    el_cloud_reply rep;
    el_tev ev = cloud_event(s, rt, kind, stream);
    const double t0 = now_s();
    if (!stream) {
        el_cloud_call(s->cloud, path, body, strlen(body), &rep);
        free(body);
        el_router_cloud_result(s->router, rep.kind == EL_CLOUD_OK || (rep.kind == EL_CLOUD_ERR_HTTP && rep.http_status < 500),
                               rep.ttfb_ms);
        ev.finish = rep.kind == EL_CLOUD_OK ? EL_TFIN_STOP : EL_TFIN_ERROR;
        ev.cloud_error = rep.kind == EL_CLOUD_OK ? EL_TCLOUD_NONE : cloud_err_code(&rep);
        ev.http_status = rep.http_status;
        if (rep.ttfb_ms > 0) ev.ttft_ms = rep.ttfb_ms;
        ev.total_ms = (now_s() - t0) * 1000.0;
        if (s->tel && rep.kind == EL_CLOUD_OK && rep.body) { /* the cloud's usage: two numbers */
            cJSON *cj = cJSON_ParseWithLength(rep.body, rep.len);
            const cJSON *u = cJSON_GetObjectItemCaseSensitive(cj, "usage");
            const cJSON *pt = cJSON_GetObjectItemCaseSensitive(u, "prompt_tokens");
            const cJSON *ct = cJSON_GetObjectItemCaseSensitive(u, "completion_tokens");
            if (cJSON_IsNumber(pt) && pt->valuedouble >= 0 && pt->valuedouble < 1e9) ev.n_prompt = (int)pt->valuedouble;
            if (cJSON_IsNumber(ct) && ct->valuedouble >= 0 && ct->valuedouble < 1e9) ev.n_gen = (int)ct->valuedouble;
            cJSON_Delete(cj);
        }
        el_telemetry_emit(s->tel, &ev);
        if (rep.kind != EL_CLOUD_OK) {
            enum MHD_Result ret = send_cloud_failure(s, c, rt, &rep);
            el_cloud_reply_free(&rep);
            return ret;
        }
        el_metrics_request(&s->metrics, EL_REQ_DONE);
        char *json = el_route_inject(rep.body, rt);
        rep.body = NULL;
        return srv_send_routed(c, MHD_HTTP_OK, json, rt, NULL, NULL);
    }
    el_cloud_relay *relay = el_cloud_relay_open(s->cloud, path, body, strlen(body), rt, &rep);
    free(body);
    el_router_cloud_result(s->router, relay || (rep.kind == EL_CLOUD_ERR_HTTP && rep.http_status < 500), rep.ttfb_ms);
    ev.http_status = rep.http_status;
    if (rep.ttfb_ms > 0) ev.ttft_ms = rep.ttfb_ms;
    if (!relay) {
        ev.finish = EL_TFIN_ERROR;
        ev.cloud_error = cloud_err_code(&rep);
        ev.total_ms = (now_s() - t0) * 1000.0;
        el_telemetry_emit(s->tel, &ev);
        enum MHD_Result ret = send_cloud_failure(s, c, rt, &rep);
        el_cloud_reply_free(&rep);
        return ret;
    }
    cloud_stream *cs = calloc(1, sizeof *cs);
    struct MHD_Response *resp =
        cs ? MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, SRV_STREAM_BLOCK, cloud_stream_read, cs, cloud_stream_free)
           : NULL;
    if (!resp) {
        free(cs);
        el_cloud_relay_close(relay);
        return MHD_NO;
    }
    cs->srv = s;
    cs->relay = relay;
    cs->ev = ev;
    cs->t0 = t0;
    return srv_send_sse(c, resp, rt);
}

/* Routes r (parsed; n_prompt tokens, or an estimate when there is no local
 * model). Returns true when the request was answered here (declined, sent
 * to the cloud, or its routing metadata refused), with *ret set; false: run
 * it locally (r->route holds the decision). */
bool srv_route_request(el_server *s, struct MHD_Connection *c, conn_ctx *cc, el_req *r, el_api_kind kind, int n_prompt,
                       enum MHD_Result *ret) {
    el_route_req x;
    char err[300];
    const char *hdr = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Data-Class");
    if (el_route_parse_meta(cc->body.p, cc->body.len, hdr, &x, err, sizeof err)) {
        el_audit_refusal(s->audit, el_router_policy(s->router), "bad_route_metadata", 400);
        el_tev te = el_tev_init(EL_TEV_REFUSED);
        te.op = tev_op(kind);
        te.reason = EL_RR_BAD_ROUTE_METADATA;
        te.http_status = 400;
        te.streamed = r->api.stream;
        te.thermal = el_thermal_get(s->thermal).level;
        el_telemetry_emit(s->tel, &te);
        el_api_error e;
        memset(&e, 0, sizeof e);
        el_api_set_error(&e, 400, "invalid_request_error", "edgellm", "invalid_value", "%s", err);
        *ret = srv_reject(s, c, r, &e, NULL, NULL);
        return true;
    }
    x.n_prompt = n_prompt;
    int mt = r->api.max_tokens;
    x.max_tokens = mt > 0 ? mt : (s->n_ctx > n_prompt ? s->n_ctx - n_prompt : 256);
    x.cloud_capable = kind != EL_API_NATIVE;
    x.canary_capable = x.cloud_capable && !r->api.stream;
    el_route_device d;
    route_device(s, &d);
    el_router_decide(s->router, &x, &d, &r->route);
    if (r->route.canary) { /* the policy's canary: the same body to the cloud too, to compare */
        char *cb = el_cloud_request_body(s->cloud, cc->body.p ? cc->body.p : "", cc->body.len, false);
        r->canary = el_cloud_canary_start(s->cloud, s->router, kind == EL_API_CHAT ? "/chat/completions" : "/completions",
                                          cb, kind == EL_API_CHAT);
        r->route.canary = r->canary != NULL;
    }
    el_audit_decision(s->audit, el_router_policy(s->router), &x, &d, &r->route);
    if (s->tel) {
        el_tev te = el_tev_init(EL_TEV_ROUTE);
        te.op = tev_op(kind);
        tev_route(s, &te, &r->route);
        te.consent = x.consent;
        te.streamed = r->api.stream;
        te.thermal = d.thermal;
        te.n_prompt = n_prompt;
        te.http_status = r->route.source == EL_ROUTE_DECLINED ? r->route.status : 0;
        el_telemetry_emit(s->tel, &te);
    }
    if (s->p.verbose)
        fprintf(stderr, "edgellm serve: route %s (%s, class %s, policy %s)\n", el_route_source_name(r->route.source),
                r->route.reason, r->route.data_class, r->route.policy_version);
    if (r->route.source == EL_ROUTE_LOCAL) return false;
    el_route rt = r->route;
    const bool stream = r->api.stream;
    srv_req_unref(r);
    *ret = rt.source == EL_ROUTE_DECLINED ? send_declined(s, c, &rt) : route_cloud(s, c, cc, kind, stream, &rt);
    return true;
}
