/*
 * server.c — the local OpenAI-compatible server: HTTP (libmicrohttpd),
 * slots, the request queue and the request state machine.
 *
 * State. Process state is built once: the model (weights, vocab, thread
 * pool), its SHA-256 fingerprint, the chat template family, and N slots,
 * each a worker thread owning one el_session whose KV cache and scratch are
 * allocated at startup (el_session_new). Request state is one el_req per HTTP
 * request; a slot resets its session before each request, so no history
 * crosses requests.
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
 * finish_locked() is the one place a request enters a terminal state; it
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
 * without suspend/resume bookkeeping: the reader waits in 50 ms steps and,
 * between steps, peeks at the socket (recv MSG_PEEK|MSG_DONTWAIT == 0 means
 * the client closed it), so a client that goes away while its request is
 * queued, prefilling or decoding is cancelled within a step; a failed write
 * makes MHD destroy the response, whose free callback cancels as well. The
 * handler of a non-streamed request polls the same way while it waits.
 * Connections are bounded (MHD_OPTION_CONNECTION_LIMIT), and the work itself
 * by the slots and the bounded queue, so threads stay few on a device.
 *
 * Shutdown (el_server_free): MHD_quiesce_daemon stops accepting; queued
 * requests are cancelled and running ones told to cancel (they stop at the
 * next decode step); slot threads are joined; MHD_stop_daemon joins the
 * connection threads (their waits end because every request is terminal);
 * then sessions and the model are freed.
 */
#include "service/server.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <microhttpd.h>
#include <sodium.h>

#include "memory/capacity.h"
#include "runtime/chat.h"
#include "service/api.h"
#include "service/metrics.h"
#include "util/buf.h"

extern const char el_ui_page_html[];
extern const size_t el_ui_page_html_len;

#define SRV_CONN_LIMIT 256u
#define SRV_CONN_TIMEOUT_S 60u
#define SRV_POLL_MS 50
#define SRV_KEEPALIVE_MS 10000
#define SRV_KEEPALIVE ": keep-alive\n\n"
#define SRV_STREAM_BLOCK (16u * 1024u)
#define SRV_DRAIN_MAX (16u * EL_API_MAX_BODY) /* an oversized body is drained unstored up to this */

/* ---- small helpers ----------------------------------------------------- */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void deadline_in_ms(struct timespec *ts, int ms) {
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_nsec += (long)ms * 1000000L;
    while (ts->tv_nsec >= 1000000000L) {
        ts->tv_nsec -= 1000000000L;
        ts->tv_sec++;
    }
}

/* The client closed its end (or the socket failed): a peek reads EOF. */
static bool peer_closed(int fd) {
    if (fd < 0) return false;
    char b;
    ssize_t n = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0) return false;
    if (n == 0) return true;
    return !(errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR);
}

/* Copy of s with invalid UTF-8 replaced by U+FFFD (JSON must be UTF-8). */
static bool utf8_sanitize(const char *s, size_t n, el_buf *out) {
    size_t i = 0;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        bool ok = len > 0 && i + len <= n;
        for (size_t k = 1; ok && k < len; k++) ok = ((unsigned char)s[i + k] & 0xC0) == 0x80;
        if (ok && len > 1) {
            uint32_t cp = len == 2 ? (c & 0x1Fu) : len == 3 ? (c & 0x0Fu) : (c & 0x07u);
            for (size_t k = 1; k < len; k++) cp = (cp << 6) | ((unsigned char)s[i + k] & 0x3Fu);
            static const uint32_t MIN[5] = {0, 0, 0x80, 0x800, 0x10000};
            ok = cp >= MIN[len] && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
        }
        if (ok) {
            if (!el_buf_append(out, s + i, len)) return false;
            i += len;
        } else {
            if (!el_buf_append(out, "\xEF\xBF\xBD", 3)) return false;
            i++;
        }
    }
    return el_buf_append(out, "", 0);
}

/* ---- server and request state ------------------------------------------ */

typedef enum { RS_QUEUED, RS_PREFILL, RS_DECODE, RS_DONE, RS_CANCELLED, RS_FAILED } req_state;

static bool rs_terminal(req_state s) { return s >= RS_DONE; }

typedef struct el_req el_req;
typedef struct el_server el_server;

struct el_req {
    atomic_int refs;
    el_server *srv;
    /* guarded by srv->mu */
    req_state state;
    el_session *session;      /* the slot's session while it runs this request */
    el_req *next;             /* queue link */
    pthread_cond_t cv;        /* output appended / terminal state reached */
    el_buf out;                 /* stream: SSE bytes not yet handed to MHD */
    size_t out_off;
    atomic_bool cancel;
    /* set by the HTTP side before enqueueing, read-only afterwards */
    el_api_request api;
    bool api_parsed;
    int32_t *prompt;
    int n_prompt;
    el_generate_params gp;
    char id[48];
    long created;
    double t_arrival;
    int conn_fd;
    /* owned by the slot while it runs; read by others after the terminal state */
    bool got_first, sent_first, oom;
    double t_last;
    el_buf text;                /* non-stream: the whole completion */
    el_generate_stats stats;
    el_error err;
};

typedef struct slot {
    el_server *srv;
    int idx;
    el_session *sess;
    pthread_t th;
    bool started;
} slot;

struct el_server {
    el_server_params p;
    char *model_path, *host, *api_key, *chat_template;
    struct MHD_Daemon *mhd;
    int port;
    atomic_bool ready;
    /* process state, written by el_server_load before `ready` */
    el_model *model;
    char model_id[256];
    char fingerprint[64];
    el_chat_family fam;
    char fam_desc[200];
    int n_ctx;
    long t_start;
    slot *slots;
    int n_slots;
    uint64_t mem_budget, mem_planned; /* admission (memory/capacity.h): budget, and weights + runtime + slots */
    /* scheduler state */
    pthread_mutex_t mu;
    pthread_cond_t queue_cv;
    el_req *q_head, *q_tail;
    int q_len;
    int busy;
    bool stopping;
    el_metrics metrics;
};

static el_req *req_new(el_server *s) {
    el_req *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    atomic_init(&r->refs, 1);
    atomic_init(&r->cancel, false);
    r->srv = s;
    r->conn_fd = -1;
    r->t_arrival = now_s();
    r->created = (long)time(NULL);
    pthread_cond_init(&r->cv, NULL);
    return r;
}

static void req_ref(el_req *r) { atomic_fetch_add(&r->refs, 1); }

static void req_unref(el_req *r) {
    if (!r || atomic_fetch_sub(&r->refs, 1) != 1) return;
    if (r->api_parsed) el_api_request_free(&r->api);
    free(r->prompt);
    el_buf_free(&r->out);
    el_buf_free(&r->text);
    pthread_cond_destroy(&r->cv);
    free(r);
}

/* The one terminal transition (srv->mu held). */
static void finish_locked(el_server *s, el_req *r, req_state st) {
    if (rs_terminal(r->state)) {
        fprintf(stderr, "edgellm serve: internal error: request %s finished twice\n", r->id);
        abort();
    }
    r->state = st;
    el_metrics_request(&s->metrics, st == RS_DONE ? EL_REQ_DONE : st == RS_CANCELLED ? EL_REQ_CANCELLED : EL_REQ_FAILED);
    pthread_cond_broadcast(&r->cv);
}

static void queue_unlink_locked(el_server *s, el_req *r) {
    el_req **pp = &s->q_head, *prev = NULL;
    while (*pp && *pp != r) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    if (!*pp) return;
    *pp = r->next;
    if (s->q_tail == r) s->q_tail = prev;
    r->next = NULL;
    s->q_len--;
}

/* Cancels r from any thread: a queued request ends here, a running one at
 * its slot's next decode step. No effect once terminal. */
static void req_cancel(el_req *r) {
    el_server *s = r->srv;
    bool drop_queue_ref = false;
    pthread_mutex_lock(&s->mu);
    if (!rs_terminal(r->state)) {
        atomic_store(&r->cancel, true);
        if (r->state == RS_QUEUED) {
            queue_unlink_locked(s, r);
            finish_locked(s, r, RS_CANCELLED);
            drop_queue_ref = true;
        } else if (r->session) {
            el_session_cancel(r->session);
        }
    }
    pthread_mutex_unlock(&s->mu);
    if (drop_queue_ref) req_unref(r);
}

/* ---- slots ------------------------------------------------------------- */

static const char *finish_name(el_finish f) { return f == EL_DONE_LENGTH ? "length" : "stop"; }

static char *make_chunk(const el_req *r, const char *delta, bool first, const char *finish, const el_api_usage *usage) {
    const el_server *s = r->srv;
    if (r->api.kind == EL_API_CHAT)
        return el_api_chat_chunk(r->id, s->model_id, r->created, s->fingerprint, delta, first, finish, usage);
    return el_api_completion_chunk(r->id, s->model_id, r->created, s->fingerprint, delta, finish, usage);
}

static bool frame_json(el_buf *b, char *json) {
    if (!json) return false;
    bool ok = el_buf_str(b, "data: ") && el_buf_str(b, json) && el_buf_str(b, "\n\n");
    free(json);
    return ok;
}

static bool on_token(const el_token_info *t, void *user) {
    el_req *r = user;
    el_server *s = r->srv;
    if (t->id >= 0) {
        double now = now_s();
        if (!r->got_first) {
            r->got_first = true;
            el_metrics_ttft(&s->metrics, now - r->t_arrival);
            pthread_mutex_lock(&s->mu);
            if (r->state == RS_PREFILL) r->state = RS_DECODE;
            pthread_mutex_unlock(&s->mu);
        } else {
            el_metrics_itl(&s->metrics, now - r->t_last);
        }
        r->t_last = now;
        el_metrics_tokens(&s->metrics, 0, 1);
    }
    if (t->piece && t->piece_len > 0) {
        if (r->api.stream) {
            el_buf piece = {0}, frame = {0};
            bool ok = utf8_sanitize(t->piece, (size_t)t->piece_len, &piece) &&
                      frame_json(&frame, make_chunk(r, piece.p, !r->sent_first, NULL, NULL));
            el_buf_free(&piece);
            r->sent_first = true;
            if (ok) {
                pthread_mutex_lock(&s->mu);
                ok = el_buf_append(&r->out, frame.p, frame.len);
                pthread_cond_broadcast(&r->cv);
                pthread_mutex_unlock(&s->mu);
            }
            el_buf_free(&frame);
            if (!ok) { r->oom = true; return false; }
        } else if (!el_buf_append(&r->text, t->piece, (size_t)t->piece_len)) {
            r->oom = true;
            return false;
        }
    }
    return !atomic_load(&r->cancel);
}

/* The frames that end a stream (built outside the lock). */
static void stream_tail(el_req *r, req_state st, el_buf *tail) {
    bool ok = true;
    if (st == RS_DONE) {
        ok = frame_json(tail, make_chunk(r, NULL, !r->sent_first, finish_name(r->stats.finish), NULL));
        if (ok && r->api.include_usage) {
            el_api_usage u = {r->stats.n_prompt, r->stats.n_generated};
            ok = frame_json(tail, make_chunk(r, NULL, false, NULL, &u));
        }
    } else {
        el_api_error e;
        memset(&e, 0, sizeof e);
        if (st == RS_CANCELLED)
            el_api_set_error(&e, 503, "server_error", NULL, "cancelled", "the request was cancelled (the server is stopping)");
        else
            el_api_set_error(&e, 500, "server_error", NULL, "generation_failed", "generation failed: %s: %s",
                             el_status_name(r->err.code), r->oom ? "out of memory" : r->err.msg);
        ok = frame_json(tail, el_api_error_json(&e));
    }
    if (ok) el_buf_str(tail, "data: [DONE]\n\n");
}

static void run_request(slot *sl, el_req *r) {
    el_server *s = sl->srv;
    el_metrics_tokens(&s->metrics, r->n_prompt, 0);
    memset(&r->err, 0, sizeof r->err);
    double t_gen = now_s();
    el_finish fin = el_generate(sl->sess, r->prompt, r->n_prompt, &r->gp, on_token, r, &r->stats, &r->err);
    /* the first sampled token was end-of-generation: no callback, but a first token all the same */
    if (!r->got_first && r->stats.ttft_ms > 0) el_metrics_ttft(&s->metrics, t_gen - r->t_arrival + r->stats.ttft_ms / 1e3);
    req_state st = atomic_load(&r->cancel) ? RS_CANCELLED
                 : (r->oom || fin == EL_DONE_FAILED) ? RS_FAILED
                 : fin == EL_DONE_CANCELLED ? RS_CANCELLED : RS_DONE;
    if (r->oom && r->err.code == EL_OK) r->err.code = EL_ERR_NOMEM;
    el_buf tail = {0};
    if (r->api.stream) stream_tail(r, st, &tail);
    else if (st == RS_DONE && !el_buf_append(&r->text, "", 0)) st = RS_FAILED;
    pthread_mutex_lock(&s->mu);
    r->session = NULL;
    if (tail.len) el_buf_append(&r->out, tail.p, tail.len);
    finish_locked(s, r, st);
    s->busy--;
    pthread_mutex_unlock(&s->mu);
    el_buf_free(&tail);
    if (s->p.verbose)
        fprintf(stderr, "edgellm serve: slot %d: %s %s: %d prompt + %d generated tokens, ttft %.1f ms\n", sl->idx, r->id,
                st == RS_DONE ? "done" : st == RS_CANCELLED ? "cancelled" : "failed", r->stats.n_prompt,
                r->stats.n_generated, r->stats.ttft_ms);
}

static void *slot_main(void *arg) {
    slot *sl = arg;
    el_server *s = sl->srv;
    for (;;) {
        el_session_reset(sl->sess); /* idle and detached: no one else can touch it now */
        pthread_mutex_lock(&s->mu);
        while (!s->stopping && !s->q_head) pthread_cond_wait(&s->queue_cv, &s->mu);
        el_req *r = s->q_head;
        if (!r) { /* stopping and nothing queued */
            pthread_mutex_unlock(&s->mu);
            break;
        }
        queue_unlink_locked(s, r);
        r->state = RS_PREFILL;
        r->session = sl->sess;
        s->busy++;
        pthread_mutex_unlock(&s->mu);
        run_request(sl, r);
        req_unref(r); /* the queue's reference */
    }
    return NULL;
}

/* ---- HTTP responses ---------------------------------------------------- */

typedef struct route route;

typedef struct conn_ctx {
    const route *rt;
    el_buf body;
    bool too_big;
    size_t discarded;
} conn_ctx;

typedef enum MHD_Result (*route_fn)(el_server *s, struct MHD_Connection *c, conn_ctx *cc);

struct route {
    const char *path;
    const char *method; /* "GET" (HEAD too) or "POST" */
    bool auth;          /* needs the API key when one is set */
    bool needs_model;   /* 503 while loading */
    route_fn fn;
};

static enum MHD_Result send_buf(struct MHD_Connection *c, unsigned status, const char *ctype, char *body, size_t len,
                                bool must_free, const char *h1, const char *v1) {
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(len, body, must_free ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!resp) {
        if (must_free) free(body);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    if (h1) MHD_add_response_header(resp, h1, v1);
    enum MHD_Result ret = MHD_queue_response(c, status, resp);
    MHD_destroy_response(resp);
    return ret;
}

static enum MHD_Result send_json(struct MHD_Connection *c, unsigned status, char *json) {
    if (!json) return MHD_NO;
    return send_buf(c, status, "application/json", json, strlen(json), true, NULL, NULL);
}

static enum MHD_Result send_api_error_h(struct MHD_Connection *c, const el_api_error *e, const char *h1,
                                        const char *v1) {
    char *json = el_api_error_json(e);
    if (!json) return MHD_NO;
    return send_buf(c, (unsigned)e->status, "application/json", json, strlen(json), true, h1, v1);
}

static enum MHD_Result send_api_error(struct MHD_Connection *c, const el_api_error *e) {
    return send_api_error_h(c, e, NULL, NULL);
}

#if defined(__GNUC__)
__attribute__((format(printf, 6, 7)))
#endif
static enum MHD_Result send_error(struct MHD_Connection *c, int status, const char *type, const char *param,
                                  const char *code, const char *fmt, ...) {
    el_api_error e;
    memset(&e, 0, sizeof e);
    char msg[sizeof e.message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    el_api_set_error(&e, status, type, param, code, "%s", msg);
    return send_api_error(c, &e);
}

/* Bearer token check in constant time for a given key length: one pass over
 * max(len) bytes, XOR-accumulated, no early exit. */
static bool auth_ok(struct MHD_Connection *c, const char *key) {
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    const char *tok = "";
    if (h && strncasecmp(h, "Bearer ", 7) == 0) {
        tok = h + 7;
        while (*tok == ' ') tok++;
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

/* ---- tokens ------------------------------------------------------------ */

/* malloc'd tokens; count, or -1 (tokenizer refused the text) / -2 (no memory). */
static int tokenize_alloc(const el_model *m, const char *text, size_t len, int flags, int32_t **out) {
    *out = NULL;
    if (len > (size_t)INT_MAX / 2 - 16) return -1;
    int cap = (int)len + 16;
    for (int attempt = 0; attempt < 3; attempt++) {
        int32_t *t = malloc((size_t)cap * sizeof *t);
        if (!t) return -2;
        int n = el_tokenize(m, text, len, t, cap, flags);
        if (n < 0) {
            free(t);
            return -1;
        }
        if (n <= cap) {
            *out = t;
            return n;
        }
        free(t);
        cap = n;
    }
    return -1;
}

/* ---- endpoints --------------------------------------------------------- */

static enum MHD_Result reject(el_server *s, struct MHD_Connection *c, el_req *r, const el_api_error *e,
                              const char *h1, const char *v1) {
    el_metrics_request(&s->metrics, EL_REQ_REJECTED);
    req_unref(r);
    return send_api_error_h(c, e, h1, v1);
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    el_req *r = cls;
    el_server *s = r->srv;
    int idle_ms = 0;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        if (r->out_off < r->out.len) {
            size_t n = r->out.len - r->out_off;
            if (n > max) n = max;
            memcpy(buf, r->out.p + r->out_off, n);
            r->out_off += n;
            if (r->out_off == r->out.len) r->out_off = r->out.len = 0;
            pthread_mutex_unlock(&s->mu);
            return (ssize_t)n;
        }
        if (rs_terminal(r->state)) {
            pthread_mutex_unlock(&s->mu);
            return MHD_CONTENT_READER_END_OF_STREAM;
        }
        struct timespec dl;
        deadline_in_ms(&dl, SRV_POLL_MS);
        if (pthread_cond_timedwait(&r->cv, &s->mu, &dl) == ETIMEDOUT && r->out_off == r->out.len &&
            !rs_terminal(r->state)) {
            pthread_mutex_unlock(&s->mu);
            if (peer_closed(r->conn_fd)) {
                req_cancel(r);
                return MHD_CONTENT_READER_END_WITH_ERROR;
            }
            /* Nothing to send for a while (queued behind other requests, or a
             * long prefill): an SSE comment keeps the connection active, so
             * neither libmicrohttpd's idle timeout nor a proxy drops it. */
            idle_ms += SRV_POLL_MS;
            if (idle_ms >= SRV_KEEPALIVE_MS && max >= sizeof SRV_KEEPALIVE - 1) {
                memcpy(buf, SRV_KEEPALIVE, sizeof SRV_KEEPALIVE - 1);
                return (ssize_t)(sizeof SRV_KEEPALIVE - 1);
            }
            pthread_mutex_lock(&s->mu);
        }
    }
}

/* The response is gone (sent, or the connection failed): drop the HTTP side's reference. */
static void stream_free(void *cls) {
    el_req *r = cls;
    req_cancel(r); /* no effect if it already ended */
    req_unref(r);
}

static enum MHD_Result h_generate(el_server *s, struct MHD_Connection *c, conn_ctx *cc, el_api_kind kind) {
    el_api_error e;
    memset(&e, 0, sizeof e);
    el_req *r = req_new(s);
    if (!r) return send_error(c, 500, "server_error", NULL, NULL, "out of memory");
    if (el_api_parse(kind, cc->body.p ? cc->body.p : "", cc->body.len, &r->api, &e)) {
        r->api_parsed = false;
        return reject(s, c, r, &e, NULL, NULL);
    }
    r->api_parsed = true;

    /* prompt tokens */
    int n = 0;
    if (kind == EL_API_CHAT) {
        if (s->fam == EL_CHAT_UNKNOWN) {
            el_api_set_error(&e, 500, "server_error", NULL, "no_chat_template",
                             "the model has no chat template edgellm recognises; restart the server with "
                             "--chat-template NAME, or use /v1/completions");
            return reject(s, c, r, &e, NULL, NULL);
        }
        el_buf txt = {0};
        size_t need = el_chat_apply(s->fam, r->api.msgs, r->api.n_msgs, true, NULL, 0);
        if (need == (size_t)-1) {
            el_api_set_error(&e, 400, "invalid_request_error", "messages", NULL,
                             "the messages cannot be rendered with the %s chat template", el_chat_family_name(s->fam));
            return reject(s, c, r, &e, NULL, NULL);
        }
        txt.p = malloc(need + 1);
        if (!txt.p) {
            el_api_set_error(&e, 500, "server_error", NULL, NULL, "out of memory");
            return reject(s, c, r, &e, NULL, NULL);
        }
        txt.cap = need + 1;
        txt.len = el_chat_apply(s->fam, r->api.msgs, r->api.n_msgs, true, txt.p, txt.cap);
        n = txt.len <= need ? tokenize_alloc(s->model, txt.p, txt.len, EL_TOK_ADD_SPECIAL | EL_TOK_PARSE_SPECIAL, &r->prompt)
                            : -1;
        el_buf_free(&txt);
    } else {
        const char *p = r->api.prompt ? r->api.prompt : "";
        n = tokenize_alloc(s->model, p, strlen(p), EL_TOK_ADD_SPECIAL, &r->prompt);
    }
    if (n < 0) {
        if (n == -2) el_api_set_error(&e, 500, "server_error", NULL, NULL, "out of memory tokenizing the prompt");
        else el_api_set_error(&e, 400, "invalid_request_error", kind == EL_API_CHAT ? "messages" : "prompt", NULL,
                              "the prompt could not be tokenized");
        return reject(s, c, r, &e, NULL, NULL);
    }
    if (n == 0) {
        el_api_set_error(&e, 400, "invalid_request_error", kind == EL_API_CHAT ? "messages" : "prompt", NULL,
                         "the prompt is empty");
        return reject(s, c, r, &e, NULL, NULL);
    }
    r->n_prompt = n;

    /* context */
    int max_tokens = r->api.max_tokens;
    if (max_tokens > 0 && (long long)n + max_tokens > s->n_ctx) {
        el_api_set_error(&e, 400, "invalid_request_error", "max_tokens", "context_length_exceeded",
                         "prompt (%d tokens) + max_tokens (%d) = %lld exceeds the context of %d tokens", n, max_tokens,
                         (long long)n + max_tokens, s->n_ctx);
        return reject(s, c, r, &e, NULL, NULL);
    }
    if (max_tokens <= 0) {
        if (n >= s->n_ctx) {
            el_api_set_error(&e, 400, "invalid_request_error", kind == EL_API_CHAT ? "messages" : "prompt",
                             "context_length_exceeded",
                             "prompt (%d tokens) leaves no room to generate in the context of %d tokens", n, s->n_ctx);
            return reject(s, c, r, &e, NULL, NULL);
        }
        max_tokens = s->n_ctx - n;
    }

    /* generation parameters: OpenAI semantics (no top-k / min-p) */
    el_generate_params *gp = &r->gp;
    gp->max_tokens = max_tokens;
    gp->ignore_eos = false;
    gp->stop = r->api.n_stop > 0 ? (const char *const *)r->api.stop : NULL;
    gp->n_top_logprobs = 0;
    gp->sampling = el_sampling_default();
    gp->sampling.temp = r->api.temperature;
    gp->sampling.top_k = 0;
    gp->sampling.top_p = r->api.top_p;
    gp->sampling.min_p = 0.0f;
    gp->sampling.repeat_penalty = 1.0f;
    gp->sampling.presence_penalty = r->api.presence_penalty;
    gp->sampling.freq_penalty = r->api.frequency_penalty;
    gp->sampling.penalty_last_n = -1;
    if (r->api.has_seed) gp->sampling.seed = r->api.seed;
    else randombytes_buf(&gp->sampling.seed, sizeof gp->sampling.seed);

    unsigned char rnd[12];
    randombytes_buf(rnd, sizeof rnd);
    int off = snprintf(r->id, sizeof r->id, "%s", kind == EL_API_CHAT ? "chatcmpl-" : "cmpl-");
    for (size_t i = 0; i < sizeof rnd; i++) off += snprintf(r->id + off, sizeof r->id - (size_t)off, "%02x", rnd[i]);

    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    r->conn_fd = ci ? (int)ci->connect_fd : -1;

    /* memory pressure: admit no new session (memory/capacity.h el_mem_pressure) */
    char why[160];
    if (el_mem_pressure(s->p.mem_floor, why, sizeof why)) {
        el_api_set_error(&e, 503, "server_error", NULL, "memory_pressure", "memory pressure (%s); retry later", why);
        return reject(s, c, r, &e, MHD_HTTP_HEADER_RETRY_AFTER, "5");
    }

    /* enqueue */
    pthread_mutex_lock(&s->mu);
    /* requests an idle slot is about to take are not waiting: only the rest count against --queue */
    bool stopping = s->stopping, full = s->q_len >= s->p.queue_cap + (s->n_slots - s->busy);
    if (!stopping && !full) {
        r->state = RS_QUEUED;
        req_ref(r); /* the queue's reference */
        if (s->q_tail) s->q_tail->next = r;
        else s->q_head = r;
        s->q_tail = r;
        s->q_len++;
        pthread_cond_signal(&s->queue_cv);
    }
    pthread_mutex_unlock(&s->mu);
    if (stopping) {
        el_api_set_error(&e, 503, "server_error", NULL, "shutting_down", "the server is shutting down");
        return reject(s, c, r, &e, NULL, NULL);
    }
    if (full) {
        el_api_set_error(&e, 503, "server_error", NULL, "queue_full",
                         "all %d slots are busy and %d requests are waiting; retry later", s->n_slots, s->p.queue_cap);
        return reject(s, c, r, &e, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    }

    if (r->api.stream) {
        /* the HTTP side's reference moves to the response (stream_free) */
        struct MHD_Response *resp =
            MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, SRV_STREAM_BLOCK, stream_read, r, stream_free);
        if (!resp) {
            req_cancel(r);
            req_unref(r);
            return MHD_NO;
        }
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
        MHD_add_response_header(resp, "X-Accel-Buffering", "no");
        enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, resp);
        MHD_destroy_response(resp); /* stream_free runs when MHD lets go of it */
        return ret;
    }

    /* non-stream: wait here (this connection's own thread), watching the client */
    bool gone = false;
    pthread_mutex_lock(&s->mu);
    while (!rs_terminal(r->state)) {
        struct timespec dl;
        deadline_in_ms(&dl, SRV_POLL_MS * 2);
        if (pthread_cond_timedwait(&r->cv, &s->mu, &dl) == ETIMEDOUT && !gone && !rs_terminal(r->state)) {
            pthread_mutex_unlock(&s->mu);
            if (peer_closed(r->conn_fd)) {
                gone = true;
                req_cancel(r);
            }
            pthread_mutex_lock(&s->mu);
        }
    }
    req_state st = r->state;
    pthread_mutex_unlock(&s->mu);

    enum MHD_Result ret;
    if (gone) {
        ret = MHD_NO;
    } else if (st == RS_DONE) {
        el_api_usage u = {r->stats.n_prompt, r->stats.n_generated};
        el_buf clean = {0};
        char *json = NULL;
        if (utf8_sanitize(r->text.p ? r->text.p : "", r->text.len, &clean)) {
            const char *fin = finish_name(r->stats.finish);
            json = kind == EL_API_CHAT
                       ? el_api_chat_response(r->id, s->model_id, r->created, s->fingerprint, clean.p, fin, u)
                       : el_api_completion_response(r->id, s->model_id, r->created, s->fingerprint, clean.p, fin, u);
        }
        el_buf_free(&clean);
        ret = json ? send_json(c, MHD_HTTP_OK, json) : send_error(c, 500, "server_error", NULL, NULL, "out of memory");
    } else if (st == RS_CANCELLED) {
        ret = send_error(c, 503, "server_error", NULL, "cancelled", "the request was cancelled (the server is stopping)");
    } else {
        ret = send_error(c, 500, "server_error", NULL, "generation_failed", "generation failed: %s: %s",
                         el_status_name(r->err.code), r->oom ? "out of memory" : r->err.msg);
    }
    req_unref(r);
    return ret;
}

static enum MHD_Result h_chat(el_server *s, struct MHD_Connection *c, conn_ctx *cc) {
    return h_generate(s, c, cc, EL_API_CHAT);
}

static enum MHD_Result h_completions(el_server *s, struct MHD_Connection *c, conn_ctx *cc) {
    return h_generate(s, c, cc, EL_API_COMPLETION);
}

static enum MHD_Result send_cjson(struct MHD_Connection *c, unsigned status, cJSON *j) {
    char *txt = j ? cJSON_PrintUnformatted(j) : NULL;
    cJSON_Delete(j);
    if (!txt) return send_error(c, 500, "server_error", NULL, NULL, "out of memory");
    return send_json(c, status, txt);
}

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
    return send_cjson(c, MHD_HTTP_OK, root);
}

/* Parses the body as a JSON object (cJSON); NULL with a 400 sent. */
static cJSON *parse_object(struct MHD_Connection *c, conn_ctx *cc, enum MHD_Result *ret) {
    cJSON *j = cc->body.len ? cJSON_ParseWithLength(cc->body.p, cc->body.len) : NULL;
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        *ret = send_error(c, 400, "invalid_request_error", NULL, "invalid_json", "the body must be a JSON object");
        return NULL;
    }
    return j;
}

static enum MHD_Result h_tokenize(el_server *s, struct MHD_Connection *c, conn_ctx *cc) {
    enum MHD_Result ret = MHD_NO;
    cJSON *j = parse_object(c, cc, &ret);
    if (!j) return ret;
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(j, "content");
    const cJSON *add = cJSON_GetObjectItemCaseSensitive(j, "add_special");
    const cJSON *parse = cJSON_GetObjectItemCaseSensitive(j, "parse_special");
    if (!cJSON_IsString(content)) {
        cJSON_Delete(j);
        return send_error(c, 400, "invalid_request_error", "content", NULL, "'content' must be a string");
    }
    if ((add && !cJSON_IsBool(add)) || (parse && !cJSON_IsBool(parse))) {
        cJSON_Delete(j);
        return send_error(c, 400, "invalid_request_error", add && !cJSON_IsBool(add) ? "add_special" : "parse_special",
                          NULL, "'%s' must be a boolean", add && !cJSON_IsBool(add) ? "add_special" : "parse_special");
    }
    int flags = (cJSON_IsTrue(add) ? EL_TOK_ADD_SPECIAL : 0) | (parse && cJSON_IsFalse(parse) ? 0 : EL_TOK_PARSE_SPECIAL);
    int32_t *toks = NULL;
    int n = tokenize_alloc(s->model, content->valuestring, strlen(content->valuestring), flags, &toks);
    cJSON_Delete(j);
    if (n < 0)
        return n == -2 ? send_error(c, 500, "server_error", NULL, NULL, "out of memory")
                       : send_error(c, 400, "invalid_request_error", "content", NULL, "the content could not be tokenized");
    cJSON *root = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(root, "tokens");
    for (int i = 0; arr && i < n; i++) cJSON_AddItemToArray(arr, cJSON_CreateNumber(toks[i]));
    free(toks);
    return send_cjson(c, MHD_HTTP_OK, root);
}

static enum MHD_Result h_detokenize(el_server *s, struct MHD_Connection *c, conn_ctx *cc) {
    enum MHD_Result ret = MHD_NO;
    cJSON *j = parse_object(c, cc, &ret);
    if (!j) return ret;
    const cJSON *toks = cJSON_GetObjectItemCaseSensitive(j, "tokens");
    if (!cJSON_IsArray(toks)) {
        cJSON_Delete(j);
        return send_error(c, 400, "invalid_request_error", "tokens", NULL, "'tokens' must be an array of token ids");
    }
    const int nv = el_model_n_vocab(s->model);
    el_buf raw = {0};
    char piece[256];
    int i = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, toks) {
        double v = cJSON_IsNumber(t) ? t->valuedouble : -1;
        if (!cJSON_IsNumber(t) || v != (double)(int32_t)v || v < 0 || v >= nv) {
            cJSON_Delete(j);
            el_buf_free(&raw);
            return send_error(c, 400, "invalid_request_error", "tokens", NULL,
                              "tokens[%d] is not a token id in [0, %d)", i, nv);
        }
        int len = el_token_to_piece(s->model, (int32_t)v, piece, (int)sizeof piece, true);
        bool ok = true;
        if (len > (int)sizeof piece) {
            char *big = malloc((size_t)len);
            ok = big && el_token_to_piece(s->model, (int32_t)v, big, len, true) == len && el_buf_append(&raw, big, (size_t)len);
            free(big);
        } else if (len > 0) {
            ok = el_buf_append(&raw, piece, (size_t)len);
        }
        if (!ok) {
            cJSON_Delete(j);
            el_buf_free(&raw);
            return send_error(c, 500, "server_error", NULL, NULL, "out of memory");
        }
        i++;
    }
    cJSON_Delete(j);
    el_buf clean = {0};
    bool ok = utf8_sanitize(raw.p ? raw.p : "", raw.len, &clean);
    el_buf_free(&raw);
    cJSON *root = ok ? cJSON_CreateObject() : NULL;
    if (root) cJSON_AddStringToObject(root, "content", clean.p);
    el_buf_free(&clean);
    return send_cjson(c, MHD_HTTP_OK, root);
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
    static const char LOADING[] = "{\"status\":\"loading\"}";
    if (!atomic_load(&s->ready))
        return send_buf(c, MHD_HTTP_SERVICE_UNAVAILABLE, "application/json", (char *)LOADING, sizeof LOADING - 1, false,
                        NULL, NULL);
    const mem_view mv = mem_now(s);
    char body[400];
    const bool pressure = el_mem_pressure(s->p.mem_floor, NULL, 0);
    int n = snprintf(body, sizeof body,
                     "{\"status\":\"ok\",\"memory\":{\"budget_bytes\":%llu,\"planned_bytes\":%llu,\"kv_headroom_bytes\":%lld,"
                     "\"peak_rss_bytes\":%llu,\"rss_bytes\":%llu,\"pressure\":%s}}",
                     mv.budget, mv.planned, mv.headroom, mv.peak, mv.rss, pressure ? "true" : "false");
    char *copy = strdup(body); /* send_buf frees it */
    if (!copy) return send_error(c, 500, "server_error", NULL, NULL, "out of memory");
    return send_buf(c, MHD_HTTP_OK, "application/json", copy, (size_t)n, true, NULL, NULL);
}

static enum MHD_Result h_metrics(el_server *s, struct MHD_Connection *c, conn_ctx *cc) {
    (void)cc;
    pthread_mutex_lock(&s->mu);
    int busy = s->busy, depth = s->q_len;
    pthread_mutex_unlock(&s->mu);
    int total = atomic_load(&s->ready) ? s->n_slots : 0; /* n_slots is written by the loader before `ready` */
    char *txt = el_metrics_render(&s->metrics, busy, total, depth);
    if (!txt) return send_error(c, 500, "server_error", NULL, NULL, "out of memory");
    if (atomic_load(&s->ready)) { /* memory gauges (h_health's figures) */
        const mem_view mv = mem_now(s);
        char extra[1024];
        const int n = snprintf(extra, sizeof extra,
                               "# HELP edgellm_memory_budget_bytes Memory budget of the model and its slots.\n"
                               "# TYPE edgellm_memory_budget_bytes gauge\nedgellm_memory_budget_bytes %llu\n"
                               "# HELP edgellm_memory_planned_bytes Planned memory: weights + runtime + every slot's session.\n"
                               "# TYPE edgellm_memory_planned_bytes gauge\nedgellm_memory_planned_bytes %llu\n"
                               "# HELP edgellm_kv_headroom_bytes Budget left over the plan (room for more KV).\n"
                               "# TYPE edgellm_kv_headroom_bytes gauge\nedgellm_kv_headroom_bytes %lld\n"
                               "# HELP edgellm_memory_peak_rss_bytes Resident set watermark (VmHWM).\n"
                               "# TYPE edgellm_memory_peak_rss_bytes gauge\nedgellm_memory_peak_rss_bytes %llu\n"
                               "# HELP edgellm_memory_rss_bytes Resident set now (VmRSS).\n"
                               "# TYPE edgellm_memory_rss_bytes gauge\nedgellm_memory_rss_bytes %llu\n",
                               mv.budget, mv.planned, mv.headroom, mv.peak, mv.rss);
        const size_t tl = strlen(txt);
        char *both = realloc(txt, tl + (size_t)n + 1);
        if (!both) { free(txt); return send_error(c, 500, "server_error", NULL, NULL, "out of memory"); }
        memcpy(both + tl, extra, (size_t)n + 1);
        txt = both;
    }
    return send_buf(c, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", txt, strlen(txt), true, NULL, NULL);
}

static enum MHD_Result h_page(el_server *s, struct MHD_Connection *c, conn_ctx *cc) {
    (void)s;
    (void)cc;
    return send_buf(c, MHD_HTTP_OK, "text/html; charset=utf-8", (char *)el_ui_page_html, el_ui_page_html_len, false,
                    NULL, NULL);
}

static const route ROUTES[] = {
    {"/v1/chat/completions", "POST", true, true, h_chat},
    {"/v1/completions", "POST", true, true, h_completions},
    {"/v1/models", "GET", true, true, h_models},
    {"/tokenize", "POST", true, true, h_tokenize},
    {"/detokenize", "POST", true, true, h_detokenize},
    {"/health", "GET", false, false, h_health},
    {"/metrics", "GET", true, false, h_metrics},
    {"/", "GET", false, false, h_page},
};

/* ---- the MHD access handler --------------------------------------------- */

static enum MHD_Result on_access(void *cls, struct MHD_Connection *c, const char *url, const char *method,
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
            if (!strcmp(url, ROUTES[i].path)) cc->rt = &ROUTES[i];
        if (!cc->rt) return send_error(c, 404, "invalid_request_error", NULL, "not_found", "no such endpoint: %s", url);
        bool get = !strcmp(cc->rt->method, "GET");
        if (strcmp(method, cc->rt->method) && !(get && !strcmp(method, "HEAD"))) {
            el_api_error e;
            memset(&e, 0, sizeof e);
            el_api_set_error(&e, 405, "invalid_request_error", NULL, "method_not_allowed", "%s does not accept %s; use %s",
                             cc->rt->path, method, cc->rt->method);
            return send_api_error_h(c, &e, MHD_HTTP_HEADER_ALLOW, get ? "GET, HEAD" : "POST");
        }
        if (cc->rt->auth && s->api_key && !auth_ok(c, s->api_key)) {
            el_api_error e;
            memset(&e, 0, sizeof e);
            el_api_set_error(&e, 401, "authentication_error", NULL, "invalid_api_key",
                             "missing or invalid API key (send 'Authorization: Bearer KEY')");
            return send_api_error_h(c, &e, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
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
                    return send_error(c, 413, "invalid_request_error", NULL, "request_too_large",
                                      "the request body exceeds %u bytes", (unsigned)EL_API_MAX_BODY);
                cc->too_big = true;
            }
        }
        return MHD_YES;
    }
    if (*upload_data_size) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (!cc->too_big && cc->body.len + n > EL_API_MAX_BODY) {
            cc->too_big = true;
            el_buf_free(&cc->body);
        }
        if (cc->too_big) {
            /* over the limit: drop the rest, answer 413 at its end, or give
             * up on a client that will not stop */
            cc->discarded += n;
            return cc->discarded > SRV_DRAIN_MAX ? MHD_NO : MHD_YES;
        }
        return el_buf_append(&cc->body, upload_data, n) ? MHD_YES : MHD_NO;
    }
    if (cc->too_big)
        return send_error(c, 413, "invalid_request_error", NULL, "request_too_large", "the request body exceeds %u bytes",
                          (unsigned)EL_API_MAX_BODY);
    if (cc->rt->needs_model && !atomic_load(&s->ready))
        return send_error(c, 503, "server_error", NULL, "loading", "the model is still loading");
    return cc->rt->fn(s, c, cc);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    (void)cls;
    (void)c;
    (void)toe;
    conn_ctx *cc = *con_cls;
    if (!cc) return;
    el_buf_free(&cc->body);
    free(cc);
    *con_cls = NULL;
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
    el_metrics_init(&s->metrics);
    atomic_init(&s->ready, false);
    s->p = *p;
    s->model_path = strdup(p->model_path);
    s->host = strdup(p->host && *p->host ? p->host : "127.0.0.1");
    s->api_key = p->api_key && *p->api_key ? strdup(p->api_key) : NULL;
    s->chat_template = dup_or_null(p->chat_template);
    if (!s->model_path || !s->host || (p->api_key && *p->api_key && !s->api_key) || (p->chat_template && !s->chat_template))
        FAIL(EL_ERR_NOMEM, "out of memory");
    s->p.model_path = s->model_path;
    s->p.host = s->host;
    s->p.api_key = s->api_key;
    s->p.chat_template = s->chat_template;
    if (s->p.n_parallel <= 0) s->p.n_parallel = 1;
    if (s->p.queue_cap < 0) s->p.queue_cap = 16;
    if (p->port < 0 || p->port > 65535) FAIL(EL_ERR_INVALID_ARG, "port %d is out of range", p->port);
    s->t_start = (long)time(NULL);

    struct addrinfo hints, *ai = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    char port_s[16];
    snprintf(port_s, sizeof port_s, "%d", p->port);
    int gr = getaddrinfo(s->host, port_s, &hints, &ai);
    if (gr != 0 || !ai) FAIL(EL_ERR_INVALID_ARG, "cannot resolve host '%s': %s", s->host, gai_strerror(gr));
    struct sockaddr_storage addr;
    memset(&addr, 0, sizeof addr);
    memcpy(&addr, ai->ai_addr, ai->ai_addrlen < sizeof addr ? ai->ai_addrlen : sizeof addr);
    bool v6 = ai->ai_family == AF_INET6;
    freeaddrinfo(ai);

    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ITC | MHD_USE_POLL;
    if (v6) flags |= MHD_USE_IPv6;
    s->mhd = MHD_start_daemon(flags, (uint16_t)p->port, NULL, NULL, on_access, s,
                              MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
                              MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                              MHD_OPTION_CONNECTION_LIMIT, SRV_CONN_LIMIT,
                              MHD_OPTION_CONNECTION_TIMEOUT, SRV_CONN_TIMEOUT_S,
                              MHD_OPTION_END);
    if (!s->mhd) FAIL(EL_ERR_IO, "cannot listen on %s:%d (address in use, or not allowed?)", s->host, p->port);
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? (int)di->port : p->port;
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

/* SHA-256 of the model file, read in 1 MiB blocks. */
static int hash_file(const char *path, unsigned char out[crypto_hash_sha256_BYTES], el_error *err) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        err->code = EL_ERR_IO;
        snprintf(err->msg, sizeof err->msg, "%s: cannot open for hashing: %s", path, strerror(errno));
        return -1;
    }
    crypto_hash_sha256_state st;
    crypto_hash_sha256_init(&st);
    size_t cap = 1u << 20;
    unsigned char *buf = malloc(cap);
    int rc = buf ? 0 : -1;
    if (!buf) { err->code = EL_ERR_NOMEM; snprintf(err->msg, sizeof err->msg, "out of memory"); }
    while (rc == 0) {
        ssize_t n = read(fd, buf, cap);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            err->code = EL_ERR_IO;
            snprintf(err->msg, sizeof err->msg, "%s: read error while hashing: %s", path, strerror(errno));
            rc = -1;
        }
        if (n <= 0) break;
        crypto_hash_sha256_update(&st, buf, (unsigned long long)n);
    }
    free(buf);
    close(fd);
    if (rc == 0) crypto_hash_sha256_final(&st, out);
    return rc;
}

int el_server_load(el_server *s, el_error *err) {
    el_error tmp;
    if (!err) err = &tmp;
    err->code = EL_OK;
    err->msg[0] = 0;
    el_model_params mp = el_model_default_params();
    mp.n_threads = s->p.n_threads;
    el_model *m = el_model_load(s->model_path, &mp, err);
    if (!m) return -1;
    s->model = m;

    unsigned char h[crypto_hash_sha256_BYTES];
    if (hash_file(s->model_path, h, err)) return -1;
    int off = snprintf(s->fingerprint, sizeof s->fingerprint, "edgellm-%s-", EL_VERSION_STRING);
    for (int i = 0; i < 8; i++) off += snprintf(s->fingerprint + off, sizeof s->fingerprint - (size_t)off, "%02x", h[i]);
    const char *base = strrchr(s->model_path, '/');
    snprintf(s->model_id, sizeof s->model_id, "%s", base ? base + 1 : s->model_path);
    if (pick_family(s, err)) return -1;

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
        el_mem_request mr = {.model = m, .runtime = s->p.mem_runtime, .n_batch = s->p.n_batch};
        mr.budget = s->p.mem_budget ? s->p.mem_budget : el_mem_device_available(&src);
        el_mem_shape_of(m, &mr.shape);
        mr.weights = el_mem_weights_bytes(m);
        s->mem_budget = mr.budget;
        s->mem_planned = mr.weights + mr.runtime + el_mem_session_bytes(&mr, EL_KV_F16, s->n_ctx) * (uint64_t)s->p.n_parallel;
        char msg[400];
        if (mr.budget && el_mem_admit(&mr, s->n_ctx, s->p.n_parallel, msg, sizeof msg)) {
            err->code = EL_ERR_NOMEM;
            snprintf(err->msg, sizeof err->msg, "--parallel %d refused: %.300s (%.30s)", s->p.n_parallel, msg, src);
            return -1;
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
        sl->sess = el_session_new(m, &sp, err);
        if (!sl->sess) return -1;
        s->n_slots = i + 1;
    }
    for (int i = 0; i < s->n_slots; i++) {
        if (pthread_create(&s->slots[i].th, NULL, slot_main, &s->slots[i])) {
            err->code = EL_ERR_INTERNAL;
            snprintf(err->msg, sizeof err->msg, "cannot start slot thread %d", i);
            return -1;
        }
        s->slots[i].started = true;
    }
    atomic_store(&s->ready, true);
    return 0;
}

int el_server_port(const el_server *s) { return s ? s->port : -1; }

const char *el_server_chat_family(const el_server *s) { return s ? s->fam_desc : ""; }

void el_server_free(el_server *s) {
    if (!s) return;
    MHD_socket lsock = MHD_INVALID_SOCKET;
    if (s->mhd) lsock = MHD_quiesce_daemon(s->mhd); /* stop accepting */

    /* cancel: queued requests end here, running ones at their next step */
    el_req *dropped = NULL;
    pthread_mutex_lock(&s->mu);
    s->stopping = true;
    while (s->q_head) {
        el_req *r = s->q_head;
        queue_unlink_locked(s, r);
        atomic_store(&r->cancel, true);
        finish_locked(s, r, RS_CANCELLED);
        r->next = dropped;
        dropped = r;
    }
    for (int i = 0; i < s->n_slots; i++) el_session_cancel(s->slots[i].sess);
    pthread_cond_broadcast(&s->queue_cv);
    pthread_mutex_unlock(&s->mu);
    while (dropped) {
        el_req *r = dropped;
        dropped = r->next;
        r->next = NULL;
        req_unref(r);
    }
    for (int i = 0; i < s->n_slots; i++)
        if (s->slots[i].started) pthread_join(s->slots[i].th, NULL);
    if (s->mhd) MHD_stop_daemon(s->mhd); /* joins the connection threads */
    if (lsock != MHD_INVALID_SOCKET) close(lsock);
    for (int i = 0; i < s->n_slots; i++) el_session_free(s->slots[i].sess);
    free(s->slots);
    el_model_free(s->model);
    el_metrics_destroy(&s->metrics);
    pthread_cond_destroy(&s->queue_cv);
    pthread_mutex_destroy(&s->mu);
    free(s->model_path);
    free(s->host);
    free(s->api_key);
    free(s->chat_template);
    free(s);
}
