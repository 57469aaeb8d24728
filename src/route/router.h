/*
 * router.h — the edge–cloud router (layer L6): r(x, d, s, p) ∈ {local,
 * cloud, declined}, decided for every generation request before anything
 * runs, with a reason and the policy's version.
 *
 *   x  the request: prompt tokens, max tokens, optional deadline
 *      (el_route_req, from el_route_parse_meta + the server's tokenizer);
 *   d  its data class: the body's "edgellm": {"data_class", "consent"} or
 *      the X-Data-Class header; none → the policy's strictest class;
 *   s  the device (el_route_device): local model loaded and verified,
 *      memory pressure, thermal level and derating, battery, cloud
 *      configured and reachable (a failed call marks it down for the
 *      policy's cloud.down_for_s), measured local tokens/s;
 *   p  the policy (policy.h).
 *
 * Contract (el_route_decide, a pure function):
 *   - an unknown or malformed data class is declined (400), never sent to
 *     the cloud;
 *   - a class whose rule is "never" never goes to the cloud, whatever the
 *     device state: if local cannot run it (model missing, overheated,
 *     memory pressure, battery low) it is declined with why and what the
 *     user can do;
 *   - "with_consent" goes to the cloud only with "consent": true;
 *   - the cloud is chosen only when the class allows it, a cloud is
 *     configured and not marked down, and either local cannot run it, the
 *     policy prefers the cloud, or the request's deadline is beyond the
 *     local estimate (prompt / prefill t/s + max_tokens / (decode t/s ×
 *     thermal factor), from measured speeds; no estimate without a
 *     measurement);
 *   - the decision is final: the server never falls back or splices once
 *     it is made (no silent fallback).
 * The router object (el_router) adds the shared state: cloud reachability
 * and RTT, the measured local speed (EWMA), a decision cache keyed by
 * (capability, data class + consent, prompt-length bucket, network state)
 * for requests without a deadline, the canary (a policy share of the
 * cloud-eligible requests routed local also runs in the cloud; latency and
 * agreement are recorded, never text) and counters for /metrics. Thread-safe.
 */
#ifndef EL_SERVICE_ROUTER_H
#define EL_SERVICE_ROUTER_H
#include <stdbool.h>
#include <stddef.h>

#include "route/policy.h"
#include "route/thermal.h"

typedef enum { EL_ROUTE_LOCAL = 0, EL_ROUTE_CLOUD = 1, EL_ROUTE_DECLINED = 2 } el_route_source;

typedef struct el_route_req {
    char data_class[EL_POLICY_NAME_MAX + 1]; /* "" when none was sent */
    bool class_ok;           /* the sent name is well-formed (a malformed one is declined as unknown) */
    bool class_from_header;
    bool consent;
    double deadline_ms;      /* 0: none */
    int n_prompt;            /* tokens (or an estimate when the model is not loaded) */
    int max_tokens;
    bool cloud_capable;      /* the route has an OpenAI-compatible counterpart (not /completion) */
    bool canary_capable;     /* a local answer could be compared with a cloud one (not streamed) */
} el_route_req;

typedef struct el_route_device {
    bool local_ready;
    char local_why[200];     /* why not, when !local_ready */
    bool mem_pressure;
    char mem_why[160];
    el_thermal_level thermal;
    double thermal_factor;
    int battery_pct;         /* -1: no battery */
    bool discharging;
    bool cloud_configured;
    bool cloud_up;
    double local_pp_tps, local_tg_tps; /* measured; 0: none yet */
    double cloud_rtt_ms;     /* the last cloud answer's time to first byte (0: none); audit only */
    double mem_avail_mib;    /* the device's available memory (0: unknown); audit only */
} el_route_device;

typedef struct el_route {
    el_route_source source;
    char reason[48];         /* a stable code: local_preferred, local_only_class, model_unavailable, ... */
    char detail[300];        /* the reason in words */
    char advice[200];        /* declined: what the user can do */
    int status;              /* declined: the HTTP status */
    int retry_after_s;       /* declined: Retry-After (0: none) */
    char data_class[EL_POLICY_NAME_MAX + 1];
    const char *class_source; /* "body", "header" or "default" */
    char legal_basis[EL_POLICY_TEXT_MAX];
    char policy_version[EL_POLICY_TEXT_MAX];
    double est_local_ms;     /* the local estimate used (0: none) */
    bool cached;
    bool cloud_eligible;     /* the cloud may take this request (class, consent, cloud up) */
    bool canary;             /* local, and also sent to the cloud to compare (el_router_decide) */
} el_route;

/* Parses the request's routing metadata: the body's optional "edgellm"
 * object ({"data_class": string, "consent": bool, "deadline_ms": number >
 * 0}, nothing else) and the X-Data-Class header (hdr_class, may be NULL).
 * Both given and different is an error. 0, or -1 with err (a 400). Only the
 * "edgellm" member is looked at; the rest of the body is the API parser's. */
int el_route_parse_meta(const char *body, size_t len, const char *hdr_class, el_route_req *out, char *err, size_t cap);

/* The decision (pure; see the contract above). */
void el_route_decide(const el_policy *p, const el_route_req *x, const el_route_device *s, el_route *out);

const char *el_route_source_name(el_route_source s);
/* {"source":..,"reason":..,"detail":..,"policy_version":..,"data_class":..,
 * "class_source":..,"cached":..[,"legal_basis"][,"advice"][,"estimate_ms"]}; malloc'd. */
char *el_route_json(const el_route *r);
/* The X-Edgellm-Route header value: "source=S; reason=R; policy=V; class=C". */
void el_route_header(const el_route *r, char *out, size_t cap);
/* json (a JSON object text, malloc'd, consumed) with "edgellm":{"route":...}
 * as its first member; NULL on OOM (json freed). */
char *el_route_inject(char *json, const el_route *r);
/* The declined answer's body: an OpenAI-shaped error (type
 * "route_declined", code = reason, message = detail + advice) with the
 * route field; malloc'd. */
char *el_route_decline_json(const el_route *r);

/* Battery: the first /sys/class/power_supply/<x> of type Battery under root
 * (NULL: "/sys"); false when there is none. */
bool el_battery_read(const char *root, int *pct, bool *discharging);

/* ---- the shared router state ---- */
typedef struct el_router el_router;
el_router *el_router_new(const el_policy *p, bool cloud_configured);
void el_router_free(el_router *r);
const el_policy *el_router_policy(const el_router *r);
/* Fills the router-held parts of s (cloud_configured, cloud_up, speeds). */
void el_router_device(el_router *r, el_route_device *s);
/* Decides (through the cache when x has no deadline) and counts; marks a
 * local, cloud-eligible, canary-capable decision as a canary with the
 * policy's canary ratio. */
void el_router_decide(el_router *r, const el_route_req *x, const el_route_device *s, el_route *out);
/* A cloud call ended: ok (reachable; rtt_ms = time to the first byte) or
 * failed (marked down for the policy's cloud.down_for_s). */
void el_router_cloud_result(el_router *r, bool ok, double rtt_ms);
/* A local generation ended: its prompt/prefill and generated/decode figures. */
void el_router_local_speed(el_router *r, int n_prompt, double prefill_ms, int n_gen, double decode_ms);
/* The canary's bookkeeping: begin (false once draining: no new canary),
 * end, the comparison (content-free: whether the texts were equal, and the
 * two latencies; cloud_ok false when the cloud call failed), and drain
 * (waits until every canary ended; el_server_free). */
bool el_router_canary_begin(el_router *r);
void el_router_canary_end(el_router *r);
void el_router_canary_record(el_router *r, bool cloud_ok, bool agree, double local_ms, double cloud_ms);
void el_router_canary_drain(el_router *r);
/* "route":{...} members for /health (policy version, cloud state, speeds, cache); malloc'd JSON object. */
char *el_router_health_json(el_router *r);
/* Prometheus lines (decisions by source and reason, cache hits, cloud up, RTT); malloc'd. */
char *el_router_metrics(el_router *r);

#endif
