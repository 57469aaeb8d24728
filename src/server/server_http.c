/*
 * server_http.c — the server's HTTP transport: libmicrohttpd setup, the
 * connection guard, the request prelude, body limits and the response
 * helpers every endpoint answers with.
 *
 * Threading: MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION
 * (srv_http_listen). Each connection has its own thread, so a handler may
 * block until a non-streamed result is ready, and the streaming
 * content-reader callback may block on the request's condition variable
 * until the slot produced the next SSE frame (server_stream.c).
 *
 * Connections (the "connection guard" section). Every TCP connection is
 * tracked with the phase of its request (headers, body, answering) from
 * MHD's connection notifications. MHD refuses connections beyond
 * s->conn_limit in total (--max-conns); near it a new connection evicts an
 * incomplete one (of the address holding the most); at s->conn_per_addr
 * from one address (--max-conns-per-addr) a new one evicts that address's
 * longest-waiting incomplete one (MHD's accept policy callback);
 * a reaper thread closes connections whose headers or body take longer than
 * their deadline, which MHD's idle timeout cannot do against a client that
 * sends a byte a second. The request prelude (on_request, before
 * srv_on_access) refuses control bytes in the URL, conflicting
 * Content-Length / Transfer-Encoding, a Host outside the allow-list, an
 * Origin other than the server's own, a localhost one or one of --cors /
 * --cors-origins (the "CORS" section), and POST bodies not declared
 * application/json; it answers CORS preflights from the allowed origins. The work itself is bounded by the slots and the bounded queue, so
 * threads stay few on a device.
 *
 * Memory. Request bodies are capped at EL_API_MAX_BODY (1 MiB) each and, all
 * connections together, at SRV_INFLIGHT_BYTES (4 MiB) of bodies being
 * received, parsed or tokenized (srv_body_chunk / budget_take): a body that
 * does not fit is drained unstored and answered 503 + Retry-After. A
 * generation request gives its bytes back once its prompt is tokenized
 * (server_generate.c prompt_done drops the body and the message texts, so a
 * queued request holds only its tokens), /tokenize and /detokenize when the
 * connection completes. Per body byte the tokenizer's scratch dominates (~32
 * bytes), so the HTTP side's peak is about 32 x 4 MiB above the model and
 * sessions.
 *
 * Responses: every answer goes out through srv_send_buf (CORS headers added
 * for an allowed origin); generation answers carry their route
 * (srv_queue_routed: X-Edgellm-Route), streams the SSE headers (srv_send_sse).
 */
#include "server/server_internal.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#define SRV_HEADER_DEADLINE_S 10.0 /* connection open / kept alive -> request headers complete */
#define SRV_BODY_DEADLINE_S 20.0   /* headers complete -> body complete */
#define SRV_REAP_MS 200            /* how often the reaper looks for connections past a deadline */
#define SRV_CONN_TIMEOUT_S 60u     /* MHD's idle timeout of a connection */
#define SRV_ROUTE_HEADER "X-Edgellm-Route" /* every generation answer says where it ran */

/* ---- connection guard -------------------------------------------------- */

/*
 * Every TCP connection is tracked from MHD's "started" to its "closed"
 * notification (MHD_OPTION_NOTIFY_CONNECTION) in a conn_track: its socket,
 * the phase of its current request and when that phase began.
 *
 *   HEADERS  open or kept alive, the request's headers not complete yet
 *   BODY     headers complete (on_request's first call), body not complete
 *   ACTIVE   the request is complete and being answered (not limited here)
 *
 * Limits (docs/SERVER.md "Connections"): MHD refuses a connection beyond
 * s->conn_limit in total. From s->conn_soft (7/8 of it) live connections on,
 * each new connection evicts one still in HEADERS or BODY: the one waiting
 * longest among those of the address that holds the most such connections.
 * Per address (accept_policy, MHD's MHD_AcceptPolicyCallback, which runs on
 * the listening thread before MHD's "started" notification): a new
 * connection from an address that already holds s->conn_per_addr live ones
 * evicts that address's longest-waiting connection in HEADERS or BODY; only
 * when all of them are ACTIVE is it refused. On a device every client is
 * 127.0.0.1, so a refusal there would let one app's stuck connections lock
 * out every other app; eviction lets a client that has a request to make in,
 * and costs the stuck ones their place. So connections that send nothing or
 * dribble cannot keep out clients that have a request to make, and an
 * attacker who reconnects at once only displaces its own. The reaper thread
 * evicts a connection whose headers took longer than SRV_HEADER_DEADLINE_S
 * (counted from the accept, or from the end of the previous request on a
 * kept-alive connection) or whose body took longer than SRV_BODY_DEADLINE_S.
 * MHD's own timeout only measures idleness: a client sending one byte a
 * second resets it forever.
 *
 * Eviction is shutdown(fd, SHUT_RDWR): the connection's own thread then sees
 * EOF and MHD closes and frees it as usual. It is done under conn_mu, on a
 * tracked entry only; MHD calls the "closed" notification (which unlinks the
 * entry under conn_mu) before it close()s the socket, so an evicted fd can
 * never be a reused number belonging to a newer connection.
 */
typedef enum { CP_HEADERS, CP_BODY, CP_ACTIVE } conn_phase;

typedef struct conn_track {
    el_server *srv;
    int fd;
    conn_phase phase;   /* guarded by srv->conn_mu */
    double t_phase;
    bool evicted;
    bool bad_escape;    /* the URL had a %-escape of a control byte (set by unescape_url) */
    bool http11;        /* the current request is HTTP/1.1 */
    unsigned char addr[17]; /* the client's address: family byte + up to 16 address bytes */
    struct conn_track *prev, *next;
} conn_track;

static conn_track *conn_of(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? (conn_track *)ci->socket_context : NULL;
}

static void conn_set_phase(struct MHD_Connection *c, conn_phase ph) {
    conn_track *ct = conn_of(c);
    if (!ct) return;
    el_server *s = ct->srv;
    pthread_mutex_lock(&s->conn_mu);
    ct->phase = ph;
    ct->t_phase = now_s();
    pthread_mutex_unlock(&s->conn_mu);
}

static void conn_evict_locked(el_server *s, conn_track *ct, const char *why) {
    shutdown(ct->fd, SHUT_RDWR);
    ct->evicted = true;
    s->n_live--;
    s->n_evicted++;
    if (s->p.verbose) fprintf(stderr, "edgellm serve: connection closed: %s\n", why);
}

static int conn_cmp_addr_age(const void *a, const void *b) {
    const conn_track *x = *(const conn_track *const *)a, *y = *(const conn_track *const *)b;
    int c = memcmp(x->addr, y->addr, sizeof x->addr);
    if (c) return c;
    return x->t_phase < y->t_phase ? -1 : x->t_phase > y->t_phase;
}

/* The connection to evict to admit a new one (conn_mu held), or NULL. */
static conn_track *conn_victim_locked(el_server *s) {
    conn_track **cand = s->conn_cand;
    const size_t cap = (size_t)s->conn_limit * 2;
    size_t n = 0;
    for (conn_track *o = s->conns; o && n < cap; o = o->next)
        if (!o->evicted && o->phase != CP_ACTIVE && o->fd >= 0) cand[n++] = o;
    if (!n) return NULL;
    qsort(cand, n, sizeof cand[0], conn_cmp_addr_age); /* by address, then longest waiting first */
    conn_track *best = NULL;
    size_t best_n = 0;
    for (size_t i = 0, j; i < n; i = j) {
        for (j = i + 1; j < n && !memcmp(cand[j]->addr, cand[i]->addr, sizeof cand[i]->addr); j++) {}
        if (j - i > best_n || (j - i == best_n && cand[i]->t_phase < best->t_phase)) {
            best = cand[i];
            best_n = j - i;
        }
    }
    return best;
}

/* A client address as a conn_track key: family byte + address bytes (zeros: unknown). */
static void addr_key(const struct sockaddr *sa, unsigned char key[17]) {
    memset(key, 0, 17);
    if (sa && sa->sa_family == AF_INET) {
        key[0] = 4;
        memcpy(key + 1, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
    } else if (sa && sa->sa_family == AF_INET6) {
        key[0] = 6;
        memcpy(key + 1, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, 16);
    }
}

/* MHD's accept policy (runs on the listening thread, before the "started"
 * notification of the same connection): at the per-address limit, evict that
 * address's longest-waiting incomplete connection; refuse (MHD_NO) only when
 * every connection of the address is answering a complete request. */
static enum MHD_Result accept_policy(void *cls, const struct sockaddr *addr, socklen_t addrlen) {
    el_server *s = cls;
    (void)addrlen;
    unsigned char key[17];
    addr_key(addr, key);
    enum MHD_Result ok = MHD_YES;
    pthread_mutex_lock(&s->conn_mu);
    int n = 0;
    conn_track *victim = NULL;
    for (conn_track *o = s->conns; o; o = o->next) {
        if (o->evicted || memcmp(o->addr, key, sizeof key)) continue;
        n++;
        if (o->phase != CP_ACTIVE && o->fd >= 0 && (!victim || o->t_phase < victim->t_phase)) victim = o;
    }
    if (n >= s->conn_per_addr) {
        if (victim) {
            conn_evict_locked(s, victim, "per-address limit: this address's longest-waiting incomplete request makes room");
        } else {
            s->n_refused++;
            ok = MHD_NO;
            if (s->p.verbose)
                fprintf(stderr, "edgellm serve: connection refused: %d from one address, all answering\n", n);
        }
    }
    pthread_mutex_unlock(&s->conn_mu);
    return ok;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe) {
    el_server *s = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        conn_track *ct = calloc(1, sizeof *ct);
        *socket_context = ct;
        if (!ct) return; /* untracked: still served, just not guarded */
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        ct->srv = s;
        ct->fd = ci ? (int)ci->connect_fd : -1;
        ct->phase = CP_HEADERS;
        ct->t_phase = now_s();
        const union MHD_ConnectionInfo *ai = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        addr_key(ai ? ai->client_addr : NULL, ct->addr);
        pthread_mutex_lock(&s->conn_mu);
        if (ct->fd >= 0 && s->n_live >= s->conn_soft) {
            conn_track *victim = conn_victim_locked(s);
            if (victim) conn_evict_locked(s, victim, "connection limit near: an incomplete request makes room");
        }
        ct->next = s->conns;
        if (s->conns) s->conns->prev = ct;
        s->conns = ct;
        s->n_live++;
        pthread_mutex_unlock(&s->conn_mu);
    } else if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
        conn_track *ct = *socket_context;
        *socket_context = NULL;
        if (!ct) return;
        pthread_mutex_lock(&s->conn_mu);
        if (ct->prev) ct->prev->next = ct->next;
        else s->conns = ct->next;
        if (ct->next) ct->next->prev = ct->prev;
        if (!ct->evicted) s->n_live--;
        pthread_mutex_unlock(&s->conn_mu);
        free(ct);
    }
}

/* Evicts connections past their header or body deadline, every SRV_REAP_MS. */
static void *reaper_main(void *arg) {
    el_server *s = arg;
    pthread_mutex_lock(&s->conn_mu);
    while (!s->reaper_stop) {
        double now = now_s();
        for (conn_track *ct = s->conns; ct; ct = ct->next) {
            if (ct->evicted || ct->fd < 0) continue;
            if (ct->phase == CP_HEADERS && now - ct->t_phase > SRV_HEADER_DEADLINE_S)
                conn_evict_locked(s, ct, "request headers not complete within the deadline");
            else if (ct->phase == CP_BODY && now - ct->t_phase > SRV_BODY_DEADLINE_S)
                conn_evict_locked(s, ct, "request body not complete within the deadline");
        }
        struct timespec dl;
        deadline_in_ms(&dl, SRV_REAP_MS);
        pthread_cond_timedwait(&s->conn_cv, &s->conn_mu, &dl);
    }
    pthread_mutex_unlock(&s->conn_mu);
    return NULL;
}

/* The reaper thread: started before the server listens, stopped (joined) at shutdown; stopping one
 * that never started does nothing. */
int srv_reaper_start(el_server *s) {
    if (pthread_create(&s->reaper, NULL, reaper_main, s)) return -1;
    s->reaper_started = true;
    return 0;
}

void srv_reaper_stop(el_server *s) {
    if (!s->reaper_started) return;
    pthread_mutex_lock(&s->conn_mu);
    s->reaper_stop = true;
    pthread_cond_broadcast(&s->conn_cv);
    pthread_mutex_unlock(&s->conn_mu);
    pthread_join(s->reaper, NULL);
    s->reaper_started = false;
}

/* Shutdown: waits (bounded) until no connection is answering a request, so
 * the last frames of cancelled streams reach their clients before
 * MHD_stop_daemon shuts every socket. */
void srv_conn_wait_idle(el_server *s, int max_ms) {
    for (int waited = 0; waited < max_ms; waited += 20) {
        int active = 0;
        pthread_mutex_lock(&s->conn_mu);
        for (conn_track *ct = s->conns; ct; ct = ct->next) active += !ct->evicted && ct->phase == CP_ACTIVE;
        pthread_mutex_unlock(&s->conn_mu);
        if (!active) return;
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* The connection gauges of /metrics, into out (cap bytes: 1024 hold them). */
void srv_conn_metrics(el_server *s, char *out, size_t cap) {
    pthread_mutex_lock(&s->conn_mu);
    int open = s->n_live;
    long evicted = s->n_evicted, refused = s->n_refused;
    pthread_mutex_unlock(&s->conn_mu);
    snprintf(out, cap,
             "# HELP edgellm_connections_open TCP connections open (not counting those being closed).\n"
             "# TYPE edgellm_connections_open gauge\nedgellm_connections_open %d\n"
             "# HELP edgellm_connections_evicted_total Connections closed before their request was complete "
             "(header/body deadline, or to admit another near the limit).\n"
             "# TYPE edgellm_connections_evicted_total counter\nedgellm_connections_evicted_total %ld\n"
             "# HELP edgellm_connections_refused_total Connections refused: their address held its limit "
             "(--max-conns-per-addr) and none of them was incomplete.\n"
             "# TYPE edgellm_connections_refused_total counter\nedgellm_connections_refused_total %ld\n",
             open, evicted, refused);
}

/* r's client connection: its socket (client_gone watches it) and whether it spoke HTTP/1.1 (a probe may be sent). */
void srv_req_bind_conn(el_req *r, struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    r->conn_fd = ci ? (int)ci->connect_fd : -1;
    conn_track *ct = conn_of(c);
    r->http11 = ct && ct->http11;
}

/* ---- responses --------------------------------------------------------- */

/* ---- CORS ----------------------------------------------------------------- */

/* An Origin header a browser writes for a page on this machine: "http://" or
 * "https://", then exactly localhost, 127.0.0.1 or [::1] (any case), then
 * nothing or ":" and a port 1..65535 (1-5 digits), then nothing. So
 * "http://localhost.evil.com", "http://127.0.0.1.nip.io", "http://localhost@x",
 * "http://[::1]x" and anything longer than SRV_ORIGIN_MAX bytes are not. */
#define SRV_ORIGIN_MAX 255
bool srv_origin_is_localhost(const char *o) {
    if (!o || strlen(o) > SRV_ORIGIN_MAX) return false;
    if (!strncasecmp(o, "http://", 7)) o += 7;
    else if (!strncasecmp(o, "https://", 8)) o += 8;
    else return false;
    static const char *const hosts[] = {"localhost", "127.0.0.1", "[::1]"};
    size_t hl = 0;
    for (int i = 0; i < 3 && !hl; i++)
        if (!strncasecmp(o, hosts[i], strlen(hosts[i]))) hl = strlen(hosts[i]);
    if (!hl) return false;
    o += hl;
    if (!*o) return true;
    if (*o++ != ':') return false;
    unsigned long port = 0;
    int nd = 0;
    for (; *o >= '0' && *o <= '9' && nd < 6; o++, nd++) port = port * 10 + (unsigned long)(*o - '0');
    return !*o && nd >= 1 && nd <= 5 && port >= 1 && port <= 65535;
}

/* A cross-origin page this server lets call it: a localhost origin, or one
 * named by --cors / --cors-origins (exact, case-sensitive as browsers
 * serialise origins in lower case), or any with --cors-origins '*'. */
static bool cors_allowed(const el_server *s, const char *origin) {
    if (!origin || !*origin || strlen(origin) > SRV_ORIGIN_MAX) return false;
    if (s->cors_any || srv_origin_is_localhost(origin)) return true;
    for (int i = 0; i < s->n_cors; i++)
        if (!strcmp(origin, s->cors[i])) return true;
    return false;
}

/* Adds the CORS headers to a response: Vary: Origin always (the answer
 * depends on it), Access-Control-Allow-Origin echoing an allowed Origin. */
static void cors_decorate(struct MHD_Connection *c, struct MHD_Response *resp) {
    conn_track *ct = conn_of(c);
    const el_server *s = ct ? ct->srv : NULL;
    if (!s) return;
    MHD_add_response_header(resp, "Vary", "Origin");
    const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
    if (cors_allowed(s, origin)) MHD_add_response_header(resp, "Access-Control-Allow-Origin", origin);
}

enum MHD_Result srv_send_buf(struct MHD_Connection *c, unsigned status, const char *ctype, char *body, size_t len,
                             bool must_free, const char *h1, const char *v1) {
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(len, body, must_free ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!resp) {
        if (must_free) free(body);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    if (h1) MHD_add_response_header(resp, h1, v1);
    cors_decorate(c, resp);
    enum MHD_Result ret = MHD_queue_response(c, status, resp);
    MHD_destroy_response(resp);
    return ret;
}

enum MHD_Result srv_send_json(struct MHD_Connection *c, unsigned status, char *json) {
    if (!json) return MHD_NO;
    return srv_send_buf(c, status, "application/json", json, strlen(json), true, NULL, NULL);
}

enum MHD_Result srv_send_cjson(struct MHD_Connection *c, unsigned status, cJSON *j) {
    char *txt = j ? cJSON_PrintUnformatted(j) : NULL;
    cJSON_Delete(j);
    if (!txt) return srv_send_error(c, 500, "server_error", NULL, NULL, "out of memory");
    return srv_send_json(c, status, txt);
}

enum MHD_Result srv_send_api_error_h(struct MHD_Connection *c, const el_api_error *e, const char *h1,
                                     const char *v1) {
    char *json = el_api_error_json(e);
    if (!json) return MHD_NO;
    return srv_send_buf(c, (unsigned)e->status, "application/json", json, strlen(json), true, h1, v1);
}

enum MHD_Result srv_send_api_error(struct MHD_Connection *c, const el_api_error *e) {
    return srv_send_api_error_h(c, e, NULL, NULL);
}

enum MHD_Result srv_send_error(struct MHD_Connection *c, int status, const char *type, const char *param,
                               const char *code, const char *fmt, ...) {
    el_api_error e;
    memset(&e, 0, sizeof e);
    char msg[sizeof e.message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    el_api_set_error(&e, status, type, param, code, "%s", msg);
    return srv_send_api_error(c, &e);
}

/* Queues resp with the route it took (X-Edgellm-Route: route/router.h el_route_header) and the CORS
 * headers; the caller's handle is released (MHD keeps the response until it is sent). */
enum MHD_Result srv_queue_routed(struct MHD_Connection *c, unsigned status, struct MHD_Response *resp,
                                 const el_route *rt) {
    char hv[400];
    el_route_header(rt, hv, sizeof hv);
    MHD_add_response_header(resp, SRV_ROUTE_HEADER, hv);
    cors_decorate(c, resp);
    enum MHD_Result ret = MHD_queue_response(c, status, resp);
    MHD_destroy_response(resp);
    return ret;
}

/* A server-sent-event stream (a local request's, or one relayed from the cloud): 200 with the SSE
 * headers (no caching, no proxy buffering) and the route. */
enum MHD_Result srv_send_sse(struct MHD_Connection *c, struct MHD_Response *resp, const el_route *rt) {
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    MHD_add_response_header(resp, "X-Accel-Buffering", "no");
    return srv_queue_routed(c, MHD_HTTP_OK, resp, rt);
}

/* ---- body limits: the in-flight byte budget --------------------------- */

/* Reserves body bytes for cc: at its first body bytes the whole declared
 * Content-Length (so a request is admitted or refused at once, never half),
 * then whatever arrives beyond what was reserved. false: over budget. */
static bool budget_take(el_server *s, struct MHD_Connection *c, conn_ctx *cc, size_t n) {
    size_t want = cc->body.len + n;
    if (cc->held == 0) {
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        unsigned long long v = cl ? strtoull(cl, NULL, 10) : 0;
        if (v > want && v <= EL_API_MAX_BODY) want = (size_t)v;
    }
    if (want <= cc->held) return true;
    size_t extra = want - cc->held;
    pthread_mutex_lock(&s->mu);
    bool ok = s->inflight + extra <= SRV_INFLIGHT_BYTES;
    if (ok) s->inflight += extra;
    pthread_mutex_unlock(&s->mu);
    if (!ok) return false;
    cc->held = want;
    if (cc->body.cap < want + 1) { /* one allocation of the declared size, not doubling */
        char *p = realloc(cc->body.p, want + 1);
        if (p) {
            cc->body.p = p;
            cc->body.cap = want + 1;
        }
    }
    return true;
}

/* Gives cc's bytes back (idempotent) and drops its body. */
void srv_budget_release(el_server *s, conn_ctx *cc) {
    el_buf_free(&cc->body);
    if (!cc->held) return;
    pthread_mutex_lock(&s->mu);
    s->inflight -= cc->held;
    pthread_mutex_unlock(&s->mu);
    cc->held = 0;
}

/* Stores one piece of a request body, within EL_API_MAX_BODY and the budget;
 * beyond either, the rest is drained unstored (answered 413 / 503 at its end).
 * MHD_NO gives up on a client that will not stop. */
enum MHD_Result srv_body_chunk(el_server *s, struct MHD_Connection *c, conn_ctx *cc, const char *data, size_t n) {
    if (!cc->too_big && !cc->over_budget && cc->body.len + n > EL_API_MAX_BODY) {
        cc->too_big = true;
        srv_budget_release(s, cc);
    }
    if (!cc->too_big && !cc->over_budget && !budget_take(s, c, cc, n)) {
        cc->over_budget = true;
        srv_budget_release(s, cc);
    }
    if (cc->too_big || cc->over_budget) {
        cc->discarded += n;
        return cc->discarded > SRV_DRAIN_MAX ? MHD_NO : MHD_YES;
    }
    return el_buf_append(&cc->body, data, n) ? MHD_YES : MHD_NO;
}

/* A request is over (answered, or its connection failed): its bytes go back to the budget, its context is freed. */
static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    (void)c;
    (void)toe;
    conn_ctx *cc = *con_cls;
    if (!cc) return;
    srv_budget_release(cls, cc);
    free(cc);
    *con_cls = NULL;
}

/* ---- the request prelude ------------------------------------------------ */

static bool is_ctl(unsigned char ch) { return ch < 0x20 || ch == 0x7f; }

static int hexval(char ch) {
    return ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
}

/* MHD_OPTION_UNESCAPE_CALLBACK (path and query): MHD's own %-decoding,
 * except that a string with an escaped control byte (%00, %0A, %7F, ...) is
 * left undecoded and marked, so "/health%00" can neither be cut short at the
 * NUL nor route anywhere; on_request answers it 400. */
static size_t unescape_url(void *cls, struct MHD_Connection *c, char *str) {
    (void)cls;
    for (const char *p = str; *p; p++) {
        if (p[0] != '%') continue;
        int hi = hexval(p[1]), lo = hi < 0 ? -1 : hexval(p[2]);
        if (hi >= 0 && lo >= 0 && is_ctl((unsigned char)(hi * 16 + lo))) {
            conn_track *ct = conn_of(c);
            if (ct) ct->bad_escape = true; /* this connection's own thread: no lock needed */
            return strlen(str);
        }
    }
    return MHD_http_unescape(str);
}

/* Host: a name (or [IPv6]) from the allow-list, with or without a port. */
static bool host_allowed(const el_server *s, const char *h) {
    if (s->any_host) return true;
    size_t n;
    if (h[0] == '[') {
        const char *e = strchr(h, ']');
        if (!e) return false;
        n = (size_t)(e - h) + 1;
    } else {
        n = strcspn(h, ":");
    }
    if (n == 0) return false;
    const char *port = h + n;
    if (*port == ':')
        for (port++; *port; port++)
            if (*port < '0' || *port > '9') return false;
    if (*port) return false;
    for (int i = 0; i < s->n_hosts; i++)
        if (strlen(s->hosts[i]) == n && !strncasecmp(s->hosts[i], h, n)) return true;
    return false;
}

/* Origin: a CORS origin (cors_allowed), or the server's own origin as the client
 * addressed it ("http://" + the Host header, as a same-origin page sends). */
static bool origin_allowed(const el_server *s, const char *origin, const char *host) {
    if (cors_allowed(s, origin)) return true;
    return host && !strncasecmp(origin, "http://", 7) && !strcasecmp(origin + 7, host);
}

/* application/json, any case, with or without parameters (charset=...). */
static bool is_json_type(const char *ct) {
    if (!ct) return false;
    while (*ct == ' ' || *ct == '\t') ct++;
    if (strncasecmp(ct, "application/json", 16)) return false;
    ct += 16;
    while (*ct == ' ' || *ct == '\t') ct++;
    return *ct == 0 || *ct == ';';
}

typedef struct framing {
    int n_cl;            /* Content-Length headers */
    bool cl_conflict;    /* two that differ, or one that is not a plain number */
    bool te;             /* a Transfer-Encoding header */
    const char *cl;
} framing;

static enum MHD_Result framing_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
    (void)kind;
    framing *f = cls;
    if (!strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH)) {
        const char *v = value ? value : "";
        bool digits = *v != 0;
        for (const char *p = v; *p; p++) digits = digits && *p >= '0' && *p <= '9';
        if (!digits || (f->cl && strcmp(f->cl, v))) f->cl_conflict = true;
        f->cl = v;
        f->n_cl++;
    } else if (!strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING)) {
        f->te = true;
    }
    return MHD_YES;
}

/* Checks every request's headers before srv_on_access sees them: URL bytes,
 * message framing, Host, Origin, a CORS preflight, the POST body's type.
 * Returns true with *ret set when it answered the request itself. */
static bool prelude_answered(el_server *s, struct MHD_Connection *c, const char *url, const char *method,
                             const char *version, enum MHD_Result *ret) {
    conn_track *ct = conn_of(c);
    bool bad_url = ct && ct->bad_escape;
    if (ct) {
        ct->bad_escape = false;
        ct->http11 = version && !strcmp(version, MHD_HTTP_VERSION_1_1);
    }
    for (const char *p = url; *p && !bad_url; p++) bad_url = is_ctl((unsigned char)*p);
    if (bad_url) {
        el_api_error e;
        memset(&e, 0, sizeof e);
        el_api_set_error(&e, 400, "invalid_request_error", NULL, "bad_url", "the URL contains a control character");
        *ret = srv_send_api_error_h(c, &e, MHD_HTTP_HEADER_CONNECTION, "close");
        return true;
    }
    /* Request smuggling: two Content-Lengths that differ (MHD takes the
     * first, and the rest of the body would run as a second request), or
     * Content-Length with Transfer-Encoding. 400, and the connection closes. */
    framing f;
    memset(&f, 0, sizeof f);
    MHD_get_connection_values(c, MHD_HEADER_KIND, framing_header, &f);
    if (f.cl_conflict || (f.te && f.n_cl)) {
        el_api_error e;
        memset(&e, 0, sizeof e);
        el_api_set_error(&e, 400, "invalid_request_error", NULL, "bad_framing", "%s",
                         f.cl_conflict ? "conflicting or malformed Content-Length headers"
                                       : "both Content-Length and Transfer-Encoding are set");
        *ret = srv_send_api_error_h(c, &e, MHD_HTTP_HEADER_CONNECTION, "close");
        return true;
    }
    /* DNS rebinding: a page from another site that resolves its own name to
     * this address still sends its own name as Host. */
    const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
    if (!host && version && !strcmp(version, MHD_HTTP_VERSION_1_1)) {
        *ret = srv_send_error(c, 400, "invalid_request_error", NULL, "missing_host", "an HTTP/1.1 request needs a Host header");
        return true;
    }
    if (host && !host_allowed(s, host)) {
        *ret = srv_send_error(c, 403, "invalid_request_error", NULL, "host_not_allowed",
                              "Host '%.200s' is not allowed (the server answers to localhost, 127.0.0.1, [::1], its --host "
                              "and each --allow-host)", host);
        return true;
    }
    /* Cross-origin pages: a browser names the page's origin in Origin. */
    const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
    if (origin && !origin_allowed(s, origin, host)) {
        *ret = srv_send_error(c, 403, "invalid_request_error", NULL, "origin_not_allowed",
                              "Origin '%.200s' is not allowed (same-origin and localhost pages only%s)", origin,
                              s->n_cors ? ", and the --cors / --cors-origins origins" : "; see --cors-origins");
        return true;
    }
    if (!strcmp(method, MHD_HTTP_METHOD_OPTIONS) && cors_allowed(s, origin)) {
        struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
        if (!resp) {
            *ret = MHD_NO;
            return true;
        }
        MHD_add_response_header(resp, "Access-Control-Allow-Origin", origin);
        MHD_add_response_header(resp, "Access-Control-Allow-Methods", "GET, HEAD, POST, OPTIONS");
        MHD_add_response_header(resp, "Access-Control-Allow-Headers", "Authorization, Content-Type, X-Api-Key");
        MHD_add_response_header(resp, "Access-Control-Max-Age", "600");
        MHD_add_response_header(resp, "Vary", "Origin");
        *ret = MHD_queue_response(c, MHD_HTTP_NO_CONTENT, resp);
        MHD_destroy_response(resp);
        return true;
    }
    /* A POST must say its body is JSON: a form or text/plain POST is what a
     * page can send cross-site without a preflight. */
    if (!strcmp(method, MHD_HTTP_METHOD_POST) &&
        !is_json_type(MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE))) {
        *ret = srv_send_error(c, 415, "invalid_request_error", NULL, "unsupported_media_type",
                              "POST bodies must be sent as 'Content-Type: application/json'");
        return true;
    }
    return false;
}

/* MHD's access handler: the prelude and the connection's phase around srv_on_access. */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **con_cls) {
    el_server *s = cls;
    if (!*con_cls) {
        enum MHD_Result ret;
        if (prelude_answered(s, c, url, method, version, &ret)) {
            conn_set_phase(c, CP_ACTIVE);
            return ret;
        }
        conn_set_phase(c, CP_BODY);
    } else if (*upload_data_size == 0) {
        conn_set_phase(c, CP_ACTIVE);
    }
    return srv_on_access(cls, c, url, method, version, upload_data, upload_data_size, con_cls);
}

static void on_request_done(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    on_completed(cls, c, con_cls, toe);
    conn_set_phase(c, CP_HEADERS); /* kept alive: the next request's header deadline starts now */
}

/* The Host allow-list: loopback names, the bound host (unless a wildcard),
 * each allow_hosts entry ("*": any). IPv6 literals are kept in brackets, as
 * a Host header carries them. Returns -1 when out of memory. */
int srv_host_policy_init(el_server *s, const el_server_params *p) {
    int cap = 4 + (p->n_allow_hosts > 0 ? p->n_allow_hosts : 0);
    s->hosts = calloc((size_t)cap, sizeof *s->hosts);
    if (!s->hosts) return -1;
    const char *names[4] = {"localhost", "127.0.0.1", "[::1]", NULL};
    const char *h = s->host;
    if (strcmp(h, "0.0.0.0") && strcmp(h, "::") && strcmp(h, "[::]")) names[3] = h;
    for (int i = 0; i < cap; i++) {
        const char *n = i < 4 ? names[i] : p->allow_hosts[i - 4];
        if (!n || !*n) continue;
        if (!strcmp(n, "*")) {
            s->any_host = true;
            continue;
        }
        bool v6 = strchr(n, ':') && n[0] != '[';
        size_t len = strlen(n) + (v6 ? 3 : 1);
        char *copy = malloc(len);
        if (!copy) return -1;
        snprintf(copy, len, v6 ? "[%s]" : "%s", n);
        s->hosts[s->n_hosts++] = copy;
    }
    /* CORS origins: --cors, then each entry of --cors-origins (trimmed; empty entries skipped) */
    size_t nc = 1 + (p->cors_origins ? strlen(p->cors_origins) + 1 : 0); /* entries <= commas + 1 */
    if (!(s->cors = calloc(nc, sizeof *s->cors))) return -1;
    if (p->cors_origin && *p->cors_origin && !(s->cors[s->n_cors++] = strdup(p->cors_origin))) return -1;
    for (const char *q = p->cors_origins; q && *q;) {
        const char *e = strchr(q, ',');
        size_t l = e ? (size_t)(e - q) : strlen(q);
        const char *a = q;
        while (l && (*a == ' ' || *a == '\t')) a++, l--;
        while (l && (a[l - 1] == ' ' || a[l - 1] == '\t')) l--;
        if (l == 1 && *a == '*') s->cors_any = true;
        else if (l && !(s->cors[s->n_cors++] = strndup(a, l))) return -1;
        q = e ? e + 1 : q + strlen(q);
    }
    return 0;
}

/* ---- listening ---------------------------------------------------------- */

/* Binds host:port (s->host, s->p.port: 0 any free port) and starts answering
 * with the transport's callbacks (one thread per connection); s->port is the
 * port bound. 0, or an el_error code with msg filled. */
int srv_http_listen(el_server *s, char *msg, size_t cap) {
    const int port = s->p.port;
    struct addrinfo hints, *ai = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    char port_s[16];
    snprintf(port_s, sizeof port_s, "%d", port);
    int gr = getaddrinfo(s->host, port_s, &hints, &ai);
    if (gr != 0 || !ai) {
        snprintf(msg, cap, "cannot resolve host '%s': %s", s->host, gai_strerror(gr));
        return EL_ERR_INVALID_ARG;
    }
    struct sockaddr_storage addr;
    memset(&addr, 0, sizeof addr);
    memcpy(&addr, ai->ai_addr, ai->ai_addrlen < sizeof addr ? ai->ai_addrlen : sizeof addr);
    bool v6 = ai->ai_family == AF_INET6;
    freeaddrinfo(ai);

    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ITC | MHD_USE_POLL;
    if (v6) flags |= MHD_USE_IPv6;
    s->mhd = MHD_start_daemon(flags, (uint16_t)port, accept_policy, s, on_request, s,
                              MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
                              MHD_OPTION_NOTIFY_COMPLETED, on_request_done, s,
                              MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
                              MHD_OPTION_UNESCAPE_CALLBACK, unescape_url, s,
                              MHD_OPTION_CONNECTION_LIMIT, (unsigned)s->conn_limit,
                              MHD_OPTION_CONNECTION_TIMEOUT, SRV_CONN_TIMEOUT_S,
                              MHD_OPTION_END);
    if (!s->mhd) {
        snprintf(msg, cap, "cannot listen on %s:%d (address in use, or not allowed?)", s->host, port);
        return EL_ERR_IO;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? (int)di->port : port;
    return 0;
}
