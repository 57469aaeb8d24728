/*
 * server_internal.h — what the server's files share (not part of the public
 * face: the CLI sees server.h only).
 *
 * The server is one el_server (process state, built once by el_server_start
 * and el_server_load) and one el_req per HTTP request, refcounted between
 * the HTTP side and the slot that runs it. Its files, by concern:
 *
 *   server.c           lifecycle: el_server_start, el_server_load (model, memory admission, slots,
 *                      batcher), el_server_free (graceful shutdown)
 *   server_http.c      transport: libmicrohttpd setup, the connection guard (limits, deadlines,
 *                      eviction), the request prelude (URL, framing, Host, Origin, CORS, body type),
 *                      body limits and the in-flight byte budget, response helpers
 *   server_dispatch.c  the route table, the API key, the access handler; /health, /metrics, /models, /
 *   server_slots.c     the request lifecycle, the queue, the slot threads (prompt cache, LoRA,
 *                      embeddings), clients that go away
 *   server_stream.c    what generation produces: tokens to text, SSE frames, logprobs, tool calls,
 *                      the end of a stream, the whole reply of a non-streamed request
 *   server_generate.c  the generation endpoints (chat, completions, /completion) and embeddings:
 *                      parse, tokenize, check the context, route, enqueue, answer
 *   server_llama.c     llama-server's other endpoints: /props, /slots and slot actions, LoRA
 *                      adapters, /apply-template, input tokens, /tokenize, /detokenize
 *   server_routing.c   routing (local / cloud / declined, the cloud relay), telemetry and audit
 *                      hooks, thermal derating
 *
 * Locks: srv->mu guards the scheduler state (queue, slots' cur / held /
 * n_cache, every request's state, out and cv, the in-flight budget);
 * srv->conn_mu the connection guard's list. Nothing takes conn_mu while
 * holding mu, nor the other way round.
 */
#ifndef EL_SERVER_SERVER_INTERNAL_H
#define EL_SERVER_SERVER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "runtime/chat.h"
#include <microhttpd.h>

#include "edgellm.h"
#include "route/audit.h"
#include "route/cloud.h"
#include "route/router.h"
#include "route/telemetry.h"
#include "route/thermal.h"
#include "runtime/batch.h"
#include "runtime/chat.h"
#include "runtime/model.h"
#include "server/api.h"
#include "server/lora_registry.h"
#include "server/metrics.h"
#include "server/server.h"
#include "structured/think_stream.h"
#include "structured/toolformat.h"
#include "util/buf.h"

#define SRV_POLL_MS 50                 /* a waiting connection checks its client this often (ms) */
#define SRV_STREAM_BLOCK (16u * 1024u) /* MHD's block for a stream's content reader */
#define SRV_DRAIN_MAX (16u * EL_API_MAX_BODY) /* an oversized body is drained unstored up to this */
/* In-flight byte budget: request bodies being received, parsed and tokenized,
 * all connections together. Tokenizing costs a few tens of bytes of scratch
 * per body byte (SPM symbols and bigram heap), so this bounds the memory the
 * HTTP side can take at once; a body that does not fit is drained unstored and
 * answered 503 + Retry-After. A request's bytes are released once its prompt
 * is tokenized (queued requests hold only their tokens) or its reply is built. */
#define SRV_INFLIGHT_BYTES (4u * EL_API_MAX_BODY)

static inline double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* An absolute CLOCK_REALTIME deadline ms from now (pthread_cond_timedwait). */
static inline void deadline_in_ms(struct timespec *ts, int ms) {
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_nsec += (long)ms * 1000000L;
    while (ts->tv_nsec >= 1000000000L) {
        ts->tv_nsec -= 1000000000L;
        ts->tv_sec++;
    }
}

/* ---- server and request state ------------------------------------------ */

/* QUEUED → PREFILL → DECODE → DONE | CANCELLED | FAILED (server_slots.c). */
typedef enum { RS_QUEUED, RS_PREFILL, RS_DECODE, RS_DONE, RS_CANCELLED, RS_FAILED } req_state;

static inline bool rs_terminal(req_state s) { return s >= RS_DONE; }

typedef struct el_req el_req;
typedef struct el_server el_server;

/* One generated token's log-probabilities (the model's log-softmax). */
typedef struct lp_rec {
    int32_t id;
    float lp;
    int n_top;
    int32_t top_id[EL_API_MAX_N_PROBS];
    float top_lp[EL_API_MAX_N_PROBS];
} lp_rec;

/* One request (generation or embeddings): parsed and tokenized by its connection's thread, run by a slot,
 * answered by the connection (non-stream) or MHD's content reader (stream). Refcounted (server_slots.c). */
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
    bool http11;              /* the request was HTTP/1.1: an interim 100 may be sent as a probe */
    atomic_bool probed;       /* a probe write went to a half-closed client (once per request) */
    /* owned by the slot while it runs; read by others after the terminal state */
    bool got_first, sent_first, oom;
    bool lora_busy;             /* failed before running: the LoRA budget was held by running requests (503) */
    double t_last;
    el_buf text;                /* non-stream: the whole completion (sanitised pieces) */
    struct lp_rec *lps;         /* logprobs: one record per generated token */
    int n_lps, cap_lps, lps_sent;
    int32_t *ids;               /* native /completion: every generated id ("tokens", stopping_word) */
    int n_ids, cap_ids, ids_sent;
    int slot_idx;               /* the slot that runs it (set when popped) */
    /* prompt cache (run_request): prompt tokens reused from the slot's cache,
     * tokens the slot caches after it; ctoks: the slot's token record, where
     * srv_on_token appends each generated id (n_ctoks of cap_ctoks) */
    int n_cache_reused, n_cache_after;
    int32_t *ctoks;
    int n_ctoks, cap_ctoks;
    atomic_int n_decoded;       /* tokens generated so far (/slots) */
    size_t lp_offset;           /* completions: text_offset of the next token */
    el_generate_stats stats;
    el_error err;
    /* embeddings (srv_h_embeddings): inputs set before enqueueing; the slot writes
     * each input's vectors (embd_rows[i] rows of n_embd floats) into embd_vec */
    bool embd;
    int embd_k;
    int32_t **embd_toks;
    int *embd_n, *embd_rows;
    float **embd_vec;
    int embd_norm;              /* embd_normalize of pooled vectors (el_api_embd_normalize) */
    /* routing (route/router.h): decided by the HTTP side before enqueueing */
    el_route route;
    bool route_sent;            /* a stream's first frame carried the route member */
    el_cloud_canary *canary;    /* a canary: the same request runs in the cloud too (route.canary) */
    int n_dropped;              /* --ctx-overflow truncate: oldest messages dropped to fit (0: none) */
    bool tools_parse;           /* chat with tools, tool_choice not "none": the reply is parsed for tool
                                   calls (toolcall.h, or toolformat.h when tf is set) */
    /* reasoning and the template's format (server_stream.c "Tool calls and reasoning") */
    el_tool_format tf;          /* the server's tf (EL_TF_NONE: built-in family parsing) */
    el_reasoning_format rf;     /* the request's reasoning_format, else the server's */
    bool keep_special;          /* the text handed to the parser keeps special tokens' text (format markers) */
    bool hold_all;              /* a stream holds its text back until the end (then parsed) */
    bool think_live;            /* a stream splits <think> on the fly (ts) */
    bool think_open;            /* the prompt ends inside a <think> the template opened */
    el_think_stream ts;
    /* LoRA (lora_registry.h): the scale of every registered adapter this request runs with (its "lora" list
     * or the defaults when it was queued; all 0: none), and the fingerprint its replies carry */
    float lora_scale[EL_LORA_REG_MAX];
    char fp[96];
};

/* A slot: a worker thread and its session, whose positions are the slot's prompt cache (server_slots.c). */
typedef struct slot {
    el_server *srv;
    int idx;
    el_req *cur;                /* the request it runs (srv->mu), for /slots */
    long n_tasks;               /* requests it has taken (srv->mu) */
    el_session *sess;
    pthread_t th;
    bool started;
    /* prompt cache: ctoks[0..n_cache) are the ids of the session's n_cache
     * positions (n_cache == el_session_n_past while idle). The slot's thread
     * writes ctoks only while it runs a request (cur set), a slot action only
     * while it holds the slot (held); n_cache and held change under srv->mu. */
    int32_t *ctoks;
    int n_cache;
    int last_reused, last_processed; /* the last request's prompt: from the cache / evaluated (/slots) */
    bool held;                  /* a slot action (save/restore/erase) owns the session: take no request */
    el_session *dsess;          /* --draft-model: the draft's session (el_generate keeps it in step with sess) */
    el_spec_params spec;        /* the server's, with this slot's draft session */
    float lora_scale[EL_LORA_REG_MAX]; /* the adapter set its session has (its cache was computed with) */
    el_lora_lease lease;        /* the adapters the running request holds */
} slot;

/* The server: parameters, the model and its slots (written by el_server_load before `ready`), the
 * scheduler state (srv->mu), the connection guard (conn_mu), the Host/CORS policy, routing and telemetry. */
struct el_server {
    el_server_params p;
    int fault_done;  /* requests completed, counted only while p.fault_crash_after > 0 (srv->mu) */
    char *model_path, *host, *api_key, *chat_template, *chat_template_file;
    char *tmpl_kwargs; /* --chat-template-kwargs: a JSON object (checked at start), or NULL */
    char *alias;   /* the first of --alias's list (the id) */
    char *aliases; /* --alias as given: "A[,B...]" */
    struct MHD_Daemon *mhd;
    int port;
    atomic_bool ready;
    /* process state, written by el_server_load before `ready` */
    el_model *model;
    el_model *draft;            /* --draft-model, or NULL */
    el_lora_reg *lora;          /* serve --lora, or NULL */
    char model_id[256];
    char fingerprint[64];
    uint8_t model_sha256[32];   /* the GGUF file's (slot files name it) */
    char *slot_dir;             /* --slot-save-path, or NULL */
    el_chat_family fam;         /* the built-in family: renders when cj is NULL; parses tool calls either way */
    struct el_chat_jinja *cj;   /* the Jinja template that renders chats (the model's own or --chat-template-file), or NULL */
    el_tool_format tf;          /* cj's tool-call format (el_chat_jinja_tool_format): when not EL_TF_NONE it
                                   drives tool calls (grammar, parsing) instead of fam; EL_TF_NONE without cj */
    el_reasoning_format rf;     /* --reasoning-format: a request's default */
    char fam_desc[400];
    int n_ctx;
    long t_start;
    slot *slots;
    int n_slots;
    el_batcher *batcher;        /* the slots' decode rounds (runtime/batch.h), or NULL: each slot alone */
    int batch_rows;             /* rows per round the memory admission allowed (1: none fit, slot by slot) */
    uint64_t mem_budget, mem_planned; /* admission (memory/capacity.h): budget, and weights + runtime + slots */
    int pooling;                /* --embeddings: the el_pooling every embedding request uses */
    int n_embd;
    /* scheduler state */
    pthread_mutex_t mu;
    pthread_cond_t queue_cv;
    el_req *q_head, *q_tail;
    int q_len;
    int busy;
    bool stopping;
    size_t inflight;            /* body bytes held against SRV_INFLIGHT_BYTES */
    el_metrics metrics;
    /* connection guard (see its section): every open TCP connection */
    pthread_mutex_t conn_mu;
    pthread_cond_t conn_cv;          /* wakes the reaper (stop) */
    struct conn_track *conns;        /* newest first */
    int n_live;                      /* tracked and not evicted */
    long n_evicted;                  /* connections closed by eviction or a deadline */
    long n_refused;                  /* connections refused: their address at its limit, none incomplete */
    int conn_limit;                  /* open connections in all (p.conn_limit or 256; MHD refuses beyond) */
    int conn_soft;                   /* from here on a new connection evicts an incomplete one (7/8 of it) */
    int conn_per_addr;               /* open connections per client address (p.conn_per_addr or 64) */
    struct conn_track **conn_cand;   /* conn_limit * 2 entries: the victim search's scratch (conn_mu) */
    pthread_t reaper;
    bool reaper_started, reaper_stop;
    /* Host/CORS policy */
    char **hosts;                    /* allowed Host names (lower case as given; IPv6 in brackets) */
    int n_hosts;
    bool any_host;                   /* --allow-host '*' */
    char **cors;                     /* origins beyond localhost's (--cors, --cors-origins) */
    int n_cors;
    bool cors_any;                   /* --cors-origins '*' */
    /* routing: the router, the cloud client (NULL: no --cloud-url), the thermal monitor */
    el_router *router;
    el_cloud *cloud;
    el_thermal *thermal;
    char local_why[200];             /* el_server_set_local_unavailable: why there is no local model */
    /* content-free telemetry and the routing audit log (NULL: off); see "telemetry hooks" */
    el_telemetry *tel;
    el_audit *audit;
    atomic_int load_err;             /* el_server_load's error code, for the load_error event */
};

/* The system_fingerprint of r's replies: the server's, plus its adapter set's when it has one. */
static inline const char *req_fp(const el_server *s, const el_req *r) { return r->fp[0] ? r->fp : s->fingerprint; }

/* ---- one HTTP request's connection state and the route table ---------- */

typedef struct route route;

/* One HTTP request's state on its connection (MHD's con_cls): its route and its body. */
typedef struct conn_ctx {
    const route *rt;
    el_buf body;
    bool too_big;
    bool over_budget;           /* the in-flight budget refused the body: 503 at its end */
    size_t held;                /* bytes of the in-flight budget this connection holds */
    size_t discarded;
    int slot_id;                /* /slots/{id}: the slot (checked to exist) */
} conn_ctx;

typedef enum MHD_Result (*route_fn)(el_server *s, struct MHD_Connection *c, conn_ctx *cc);

/* A row of the route table (server_dispatch.c ROUTES). */
struct route {
    const char *path;
    const char *method; /* "GET" (HEAD too) or "POST" */
    bool auth;          /* needs the API key when one is set */
    bool needs_model;   /* 503 while loading */
    route_fn fn;
};

/* ---- server_slots.c: requests, the queue, the slots --------------------- */

/* What the client's end of a socket looks like, without reading from it.
 * Measured on Linux (loopback and otherwise): a client that half-closes
 * (shutdown(SHUT_WR), `nc -N`) and one that close()s with nothing unread
 * both send just a FIN, so until the server writes they look the same:
 * POLLIN|POLLRDHUP, TCP state CLOSE_WAIT. Once the server writes, a closed
 * client's kernel answers with a reset (POLLHUP|POLLERR, state CLOSE); a
 * half-closed one takes the bytes. A client that resets (SO_LINGER 0, or
 * closes with unread data) shows POLLHUP|POLLERR at once. So: HUP/ERR means
 * gone; RDHUP alone means "half-closed, or closed: write to find out". */
typedef enum { PEER_OPEN, PEER_HALF, PEER_GONE } peer_state;

peer_state srv_peer_check(int fd);
/* A new request (one reference: the HTTP side's), NULL out of memory; the last unref frees it. */
el_req *srv_req_new(el_server *s);
void srv_req_unref(el_req *r);
/* Unrefs each request of a list linked by `next` (the queue's references of dropped requests). */
void srv_req_unref_list(el_req *r);
/* Cancels r from any thread: a queued request ends here, a running one at its slot's next decode step. */
void srv_req_cancel(el_req *r);
/* The one terminal transition (srv->mu held); a second one for the same request aborts. */
void srv_finish_locked(el_server *s, el_req *r, req_state st);
void srv_queue_unlink_locked(el_server *s, el_req *r);
/* Queues r (the queue takes its own reference); -1 with e (and a Retry-After h1: v1) filled: 503. */
int srv_enqueue(el_server *s, el_req *r, el_api_error *e, const char **h1, const char **v1);
/* Chats with the server's renderer (s->cj, the Jinja template, else the
 * family s->fam; server_llama.c; kwargs: the request's chat_template_kwargs
 * JSON or NULL, for the Jinja template only, laid over --chat-template-kwargs).
 * srv_chat_render (with the generation prompt; srv_chat_render_gen: as
 * add_generation_prompt says): 0, -1 (msg says why the
 * messages cannot be rendered), -2 out of memory. srv_chat_tokenize: the
 * token count, or -1 / -2 as render, -3 text the tokenizer refuses. */
bool srv_has_chat(const el_server *s);
/* Whether the chat ends in llama-server's prefill: an assistant message without tool calls after
 * another message; the render and tokenize below then continue it (the messages before it with the
 * generation prompt, then its text). */
bool srv_chat_is_prefill(const el_chat_msg *msgs, int n_msgs);
int srv_chat_render(el_server *s, const el_chat_msg *msgs, int n_msgs, const el_chat_tool *tools, int n_tools,
                    const char *kwargs, el_chat_text *t, char *msg, size_t cap);
int srv_chat_render_gen(el_server *s, const el_chat_msg *msgs, int n_msgs, const el_chat_tool *tools, int n_tools,
                        const char *kwargs, bool add_generation_prompt, el_chat_text *t, char *msg, size_t cap);
int srv_chat_tokenize(el_server *s, const el_chat_msg *msgs, int n_msgs, const el_chat_tool *tools, int n_tools,
                      const char *kwargs, int flags, int32_t **out, char *msg, size_t cap);
/* On the connection's thread: waits until r is terminal, cancelling it if its client goes (*gone). */
req_state srv_wait_done(el_server *s, el_req *r, bool *gone);
/* A slot's thread (arg: its slot). */
void *srv_slot_main(void *arg);
/* Slots that may take work now (fewer while thermally derated). */
int srv_admitted_slots(const el_server *s);

/* ---- server_stream.c: what generation produces ---------------------------- */

/* el_generate's token callback (user: the el_req): metrics, logprobs, ids, text to the client or the reply. */
bool srv_on_token(const el_token_info *t, void *user);
/* Before r is queued: echo's prompt, a chat stream's role chunk. 0, or -1 with e filled (out of memory). */
int srv_reply_begin(el_req *r, el_api_error *e);
/* The frames that end r's stream in state st (the finish chunk, usage, an error; [DONE]). */
void srv_stream_tail(el_req *r, req_state st, el_buf *tail);
/* A finished non-streamed request's whole reply with its route, malloc'd; NULL out of memory. */
char *srv_reply_json(el_req *r);
/* Answers with r's SSE stream (r queued; the HTTP side's reference moves to the response). */
enum MHD_Result srv_stream_respond(struct MHD_Connection *c, el_req *r);
/* prefix + 24 random hex digits. */
void srv_rand_id(char *out, size_t cap, const char *prefix);

/* ---- server_http.c: transport --------------------------------------------- */

/* The Host allow-list and the CORS origins (el_server_start); -1 out of memory. */
int srv_host_policy_init(el_server *s, const el_server_params *p);
/* A localhost Origin (http/https, localhost / 127.0.0.1 / [::1], any port): CORS allows it by default. */
bool srv_origin_is_localhost(const char *origin);
/* Binds and starts answering; 0, or an el_error code with msg filled. */
int srv_http_listen(el_server *s, char *msg, size_t cap);
/* The thread that closes connections past their header or body deadline; stop joins it. */
int srv_reaper_start(el_server *s);
void srv_reaper_stop(el_server *s);
/* Shutdown: waits (at most max_ms) until no connection is still answering a request. */
void srv_conn_wait_idle(el_server *s, int max_ms);
/* The connection gauges of /metrics (1024 bytes hold them). */
void srv_conn_metrics(el_server *s, char *out, size_t cap);
/* r's client socket and HTTP version (client_gone watches and probes it). */
void srv_req_bind_conn(el_req *r, struct MHD_Connection *c);
/* Responses: body (freed when must_free, even on failure) with its type, one extra header h1: v1 (or none)
 * and the CORS headers. */
enum MHD_Result srv_send_buf(struct MHD_Connection *c, unsigned status, const char *ctype, char *body, size_t len,
                             bool must_free, const char *h1, const char *v1);
enum MHD_Result srv_send_json(struct MHD_Connection *c, unsigned status, char *json);
enum MHD_Result srv_send_cjson(struct MHD_Connection *c, unsigned status, cJSON *j);
enum MHD_Result srv_send_api_error_h(struct MHD_Connection *c, const el_api_error *e, const char *h1,
                                     const char *v1);
enum MHD_Result srv_send_api_error(struct MHD_Connection *c, const el_api_error *e);
#if defined(__GNUC__)
__attribute__((format(printf, 6, 7)))
#endif
enum MHD_Result srv_send_error(struct MHD_Connection *c, int status, const char *type, const char *param,
                               const char *code, const char *fmt, ...);
/* Queues resp with its route header (X-Edgellm-Route) and the CORS headers. */
enum MHD_Result srv_queue_routed(struct MHD_Connection *c, unsigned status, struct MHD_Response *resp,
                                 const el_route *rt);
/* 200 with the SSE headers and the route. */
enum MHD_Result srv_send_sse(struct MHD_Connection *c, struct MHD_Response *resp, const el_route *rt);
/* Stores a piece of a request body within EL_API_MAX_BODY and the in-flight budget (beyond: drained). */
enum MHD_Result srv_body_chunk(el_server *s, struct MHD_Connection *c, conn_ctx *cc, const char *data, size_t n);
/* Gives cc's in-flight bytes back and drops its body (idempotent). */
void srv_budget_release(el_server *s, conn_ctx *cc);

/* ---- server_dispatch.c: the access handler -------------------------------- */

/* The access handler after the prelude: route, method, key, body; then the route's handler. */
enum MHD_Result srv_on_access(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *upload_data, size_t *upload_data_size,
                              void **con_cls);

/* ---- server_generate.c: generation and embeddings endpoints --------------- */

/* malloc'd tokens of text: the count, or -1 (the tokenizer refused it) / -2 (out of memory). */
int srv_tokenize_alloc(const el_model *m, const char *text, size_t len, int flags, int32_t **out);
/* Answers a request refused before the queue (e, optional header h1: v1), counted "rejected"; unrefs r. */
enum MHD_Result srv_reject(el_server *s, struct MHD_Connection *c, el_req *r, const el_api_error *e,
                           const char *h1, const char *v1);
/* The sampler a request asks for. */
el_sampling srv_sampling_of(const el_api_request *a);
/* --temp, --seed, --n-predict, --cache-prompt for what a request left out. */
void srv_apply_defaults(const el_server *s, el_api_request *a);
/* Route handlers (route_fn); generation without a local model: routed to the cloud or declined. */
enum MHD_Result srv_h_generate_unready(el_server *s, struct MHD_Connection *c, conn_ctx *cc, el_api_kind kind);
enum MHD_Result srv_h_chat(el_server *s, struct MHD_Connection *c, conn_ctx *cc);
enum MHD_Result srv_h_completions(el_server *s, struct MHD_Connection *c, conn_ctx *cc);
enum MHD_Result srv_h_native(el_server *s, struct MHD_Connection *c, conn_ctx *cc);
enum MHD_Result srv_h_embeddings(el_server *s, struct MHD_Connection *c, conn_ctx *cc);

/* ---- server_llama.c: llama-server's other endpoints ----------------------- */

/* llama-server's sampler fields of a request ("generation_settings"; /props and /slots "params"). */
cJSON *srv_settings_cjson(const el_server *s, const el_api_request *a, const el_generate_params *gp);
/* Route handlers (route_fn). */
enum MHD_Result srv_h_lora_list(el_server *s, struct MHD_Connection *c, conn_ctx *cc);
enum MHD_Result srv_h_lora_set(el_server *s, struct MHD_Connection *c, conn_ctx *cc);
enum MHD_Result srv_h_props(el_server *s, struct MHD_Connection *c, conn_ctx *cc);
enum MHD_Result srv_h_slots(el_server *s, struct MHD_Connection *c, conn_ctx *cc);
enum MHD_Result srv_h_slot_action(el_server *s, struct MHD_Connection *c, conn_ctx *cc);
enum MHD_Result srv_h_apply_template(el_server *s, struct MHD_Connection *c, conn_ctx *cc);
enum MHD_Result srv_h_input_tokens(el_server *s, struct MHD_Connection *c, conn_ctx *cc);
enum MHD_Result srv_h_tokenize(el_server *s, struct MHD_Connection *c, conn_ctx *cc);
enum MHD_Result srv_h_detokenize(el_server *s, struct MHD_Connection *c, conn_ctx *cc);

/* ---- server_routing.c: routing, telemetry, thermal ------------------------ */

/* The thermal monitor's callback (user: the server): an event, and the thread cap of the new level. */
void srv_on_thermal_change(void *user, el_thermal_level from, el_thermal_level to);
/* The model's thread cap for level l (after load). */
void srv_derate_threads(el_server *s, el_thermal_level l);
/* Threads generating now (0 before load). */
int srv_threads_active(const el_server *s);
/* The telemetry event of a local request's end or cancellation (st: its terminal state). */
void srv_tel_request_end(const el_server *s, const el_req *r, req_state st);
/* Routes r: true when it was answered here (declined, sent to the cloud, bad metadata; r released) with
 * *ret set, false: run it locally (r->route holds the decision). */
bool srv_route_request(el_server *s, struct MHD_Connection *c, conn_ctx *cc, el_req *r, el_api_kind kind, int n_prompt,
                       enum MHD_Result *ret);
/* json (malloc'd, taken; NULL: 500 out of memory) with its route header. */
enum MHD_Result srv_send_routed(struct MHD_Connection *c, unsigned status, char *json, const el_route *rt,
                                const char *h2, const char *v2);

#endif
