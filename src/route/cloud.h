/*
 * cloud.h — the cloud route's client (layer L6): forwards an OpenAI request
 * to any OpenAI-compatible endpoint (`serve --cloud-url URL`, key from
 * `--cloud-key-file FILE` or $EDGELLM_CLOUD_KEY) over HTTP(S) with libcurl,
 * and relays its answer, streamed or not, checked.
 *
 * Contract:
 *   - Only the router sends anything here, and only for a request it routed
 *     to the cloud; this file never decides. The body sent is the client's
 *     with the "edgellm" member removed (and "model" replaced by
 *     --cloud-model when given).
 *   - Non-streamed (el_cloud_call): the answer must be HTTP 2xx with a JSON
 *     object holding a "choices" array; anything else is a typed failure
 *     (el_cloud_reply.kind: transport, http, bad_response), never passed on
 *     as if it were a completion.
 *   - Streamed (el_cloud_relay_*): opened only once the cloud answered
 *     2xx (else the same typed failure, before any byte reaches the client);
 *     then every SSE event is checked (its data a JSON object, or [DONE]) and
 *     passed on; the first JSON event gets the route member. An "edgellm"
 *     member in the cloud's answers is dropped: the route member is this
 *     device's (a cloud cannot claim a request ran locally). A stream that
 *     stops before [DONE], breaks, or sends garbage ends with an error event
 *     (type "cloud_error", code "cloud_stream_broken" or
 *     "cloud_bad_response") and [DONE]: a typed failure, nothing spliced.
 *   - el_cloud_abort_all makes every call in progress fail at once (server
 *     shutdown).
 */
#ifndef EL_SERVICE_CLOUD_H
#define EL_SERVICE_CLOUD_H
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "route/router.h"

typedef struct el_cloud_cfg {
    const char *url;     /* base URL: http(s)://host[:port]/v1 (the paths /chat/completions, /completions follow) */
    const char *key;     /* bearer key or NULL */
    const char *model;   /* replaces the request's "model", or NULL */
    int timeout_s;       /* whole request */
} el_cloud_cfg;

typedef struct el_cloud el_cloud;

typedef enum { EL_CLOUD_OK = 0, EL_CLOUD_ERR_TRANSPORT, EL_CLOUD_ERR_HTTP, EL_CLOUD_ERR_BAD_RESPONSE } el_cloud_err;

typedef struct el_cloud_reply {
    el_cloud_err kind;
    int http_status;     /* 0: no answer */
    char *body;          /* the answer (malloc'd; NULL on transport failure) */
    size_t len;
    double ttfb_ms, total_ms;
    char error[300];     /* the failure in words */
} el_cloud_reply;

/* NULL with msg when the URL is not http(s):// or libcurl fails to start. */
el_cloud *el_cloud_new(const el_cloud_cfg *cfg, char *msg, size_t cap);
void el_cloud_free(el_cloud *c);
void el_cloud_abort_all(el_cloud *c);
/* The body to send (malloc'd; NULL when body is not a JSON object). */
char *el_cloud_request_body(const el_cloud *c, const char *body, size_t len, bool stream);

/* path: "/chat/completions" or "/completions". Blocking; fills *out (free
 * with el_cloud_reply_free). Returns out->kind. */
el_cloud_err el_cloud_call(el_cloud *c, const char *path, const char *body, size_t len, el_cloud_reply *out);
void el_cloud_reply_free(el_cloud_reply *r);

typedef struct el_cloud_relay el_cloud_relay;
/* Starts a streamed call and waits for the answer's status. On 2xx returns
 * the relay (out->kind OK, ttfb set); else NULL with out filled as for
 * el_cloud_call. route: injected into the first event (copied). */
el_cloud_relay *el_cloud_relay_open(el_cloud *c, const char *path, const char *body, size_t len, const el_route *route,
                                    el_cloud_reply *out);
/* Up to max bytes of checked SSE for the client: > 0 bytes, 0 at the end
 * (after [DONE] or the error event). Blocks until there is something. */
size_t el_cloud_relay_read(el_cloud_relay *r, char *buf, size_t max);
/* A relay over bytes already received (no transfer): reading it checks and
 * relays them exactly as a live stream's, then ends as a stream whose
 * connection closed there. For tests and fuzz/fuzz_policy.c. */
el_cloud_relay *el_cloud_relay_detached(const el_route *route, const char *bytes, size_t n);
/* Whether the stream ended cleanly ([DONE] seen, no error). */
bool el_cloud_relay_ok(const el_cloud_relay *r);
/* Whether it ended in a failure (cut, garbage, an error event); false while
 * it runs (a client that left mid-stream is not the cloud's failure). */
bool el_cloud_relay_broken(const el_cloud_relay *r);
void el_cloud_relay_close(el_cloud_relay *r);

/* The canary (router.h): the same request also sent to the cloud, in a
 * thread of its own, while it runs locally; when both ended the router
 * records whether the texts were equal and the two latencies — never the
 * text. start takes body (malloc'd); NULL when none could start (the
 * router is draining, or no memory): then nothing was sent. local reports
 * the local side once (text of the answer, ok false when it did not
 * complete) and gives up the caller's reference. */
typedef struct el_cloud_canary el_cloud_canary;
el_cloud_canary *el_cloud_canary_start(el_cloud *c, el_router *rt, const char *path, char *body, bool chat);
void el_cloud_canary_local(el_cloud_canary *k, bool ok, const char *text, size_t len, double local_ms);

#endif
