/*
 * server_slots.c — the request lifecycle, the queue and the slots that run
 * requests.
 *
 * Slots. Each slot is a worker thread (srv_slot_main) owning one el_session
 * whose KV cache and scratch are allocated at load (server.c). A slot's
 * session keeps its positions between requests as a prompt cache
 * (cache_prompt): the slot records the ids of the positions it holds
 * (ctoks[0..n_cache), always the session's n_past while idle); a request
 * keeps the longest prefix its prompt shares with them that the session can
 * roll back to (el_session_truncate; a sliding-window ring only so far) and
 * prefills the rest (el_generate_cached: the sampler still sees the whole
 * prompt), so no request sees another's text, only reuses the arithmetic of
 * a prefix equal to its own. A request that names no slot is left to the
 * idle slot whose cache shares the longest prefix with it (slot_prefers); a
 * request may name its slot (id_slot): slots skip queued requests meant for
 * another slot, and enqueueing wakes every slot. Slot actions (server_llama.c
 * srv_h_slot_action) hold an idle slot (sl->held: its thread takes no
 * request). Embeddings requests are queued like any other and run through
 * el_embed (run_embd); LoRA adapters are taken from the registry for the
 * request's run (slot_lora_begin / slot_lora_end).
 *
 * Request lifecycle. QUEUED → PREFILL → DECODE → DONE | CANCELLED | FAILED.
 * All transitions happen under srv->mu and have one owner each:
 *   - the HTTP thread validates, tokenizes and checks the context before
 *     enqueueing (errors are answered synchronously, counted "rejected");
 *     a full queue answers 503 + Retry-After (srv_enqueue);
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
 * Clients that go away. A client is gone when its socket shows a reset
 * (POLLHUP/POLLERR: srv_peer_check); a FIN alone is not enough, because a
 * client that half-closes (`nc -N`) still waits for its answer and, before
 * the server writes, looks exactly like one that closed. So a FIN is answered
 * with one probe write that a half-closed client accepts and a closed one
 * answers with a reset: an SSE comment on a stream (server_stream.c), an
 * interim "100 Continue" on a non-streamed HTTP/1.1 request (client_gone).
 * The streaming reader and the non-streamed handler check in 50/100 ms steps
 * while they wait; a full queue first drops the requests whose clients are
 * gone (queue_drop_gone_locked), and a slot skips such a request when it
 * pops it, so hit-and-run clients do not hold queue places.
 *
 * Thermal derating: while the monitor says derated only the policy's
 * slots_derated slots take work (srv_admitted_slots).
 */
#include "server/server_internal.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "memory/capacity.h"
#include "route/policy.h"

/* ---- requests ----------------------------------------------------------- */

el_req *srv_req_new(el_server *s) {
    el_req *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    atomic_init(&r->refs, 1);
    atomic_init(&r->cancel, false);
    atomic_init(&r->n_decoded, 0);
    r->slot_idx = -1;
    r->srv = s;
    r->conn_fd = -1;
    r->t_arrival = now_s();
    r->created = (long)time(NULL);
    pthread_cond_init(&r->cv, NULL);
    return r;
}

static void req_ref(el_req *r) { atomic_fetch_add(&r->refs, 1); }

void srv_req_unref(el_req *r) {
    if (!r || atomic_fetch_sub(&r->refs, 1) != 1) return;
    el_cloud_canary_local(r->canary, false, NULL, 0, 0); /* not answered locally: nothing to compare */
    if (r->api_parsed) el_api_request_free(&r->api);
    free(r->prompt);
    free(r->lps);
    free(r->ids);
    for (int i = 0; i < r->embd_k; i++) {
        if (r->embd_toks) free(r->embd_toks[i]);
        if (r->embd_vec) free(r->embd_vec[i]);
    }
    free(r->embd_toks);
    free(r->embd_vec);
    free(r->embd_n);
    free(r->embd_rows);
    el_buf_free(&r->out);
    el_buf_free(&r->text);
    pthread_cond_destroy(&r->cv);
    free(r);
}

/* The one terminal transition (srv->mu held). */
void srv_finish_locked(el_server *s, el_req *r, req_state st) {
    if (rs_terminal(r->state)) {
        fprintf(stderr, "edgellm serve: internal error: request %s finished twice\n", r->id);
        abort();
    }
    r->state = st;
    el_metrics_request(&s->metrics, st == RS_DONE ? EL_REQ_DONE : st == RS_CANCELLED ? EL_REQ_CANCELLED : EL_REQ_FAILED);
    if (s->p.fault_crash_after > 0 && st == RS_DONE && ++s->fault_done >= s->p.fault_crash_after) {
        fprintf(stderr, "edgellm serve: EL_FAULT_SERVE_CRASH: aborting after %d requests (fault injection)\n",
                s->fault_done);
        abort(); /* a real crash under load: the process dies with SIGABRT, its reply unsent */
    }
    pthread_cond_broadcast(&r->cv);
    if (s->tel) srv_tel_request_end(s, r, st);
}

void srv_queue_unlink_locked(el_server *s, el_req *r) {
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
void srv_req_cancel(el_req *r) {
    el_server *s = r->srv;
    bool drop_queue_ref = false;
    pthread_mutex_lock(&s->mu);
    if (!rs_terminal(r->state)) {
        atomic_store(&r->cancel, true);
        if (r->state == RS_QUEUED) {
            srv_queue_unlink_locked(s, r);
            srv_finish_locked(s, r, RS_CANCELLED);
            drop_queue_ref = true;
        } else if (r->session) {
            el_session_cancel(r->session);
        }
    }
    pthread_mutex_unlock(&s->mu);
    if (drop_queue_ref) srv_req_unref(r);
}

/* ---- clients that went away ------------------------------------------- */

/* What the client's end of socket fd shows, without reading from it (peer_state, server_internal.h). */
peer_state srv_peer_check(int fd) {
    if (fd < 0) return PEER_OPEN;
    struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP, .revents = 0};
    if (poll(&p, 1, 0) <= 0) return PEER_OPEN;
    if (p.revents & (POLLERR | POLLHUP | POLLNVAL)) return PEER_GONE;
    return (p.revents & POLLRDHUP) ? PEER_HALF : PEER_OPEN;
}

static const char SRV_PROBE_100[] = "HTTP/1.1 100 Continue\r\n\r\n";

/* Whether r's client is gone (reset, or closed: see srv_peer_check). A FIN
 * alone may be a half-close, whose client still waits for its answer; when
 * may_probe, a non-streamed HTTP/1.1 request is probed once with an interim
 * "100 Continue" (HTTP/1.1 clients must accept an unexpected 1xx before the
 * final response): a closed client's kernel resets the connection, which is
 * seen at once on loopback and within a round trip elsewhere (by the next
 * check). The caller must know the connection is still open: r is queued,
 * or the caller is the connection's own thread. */
static bool client_gone(el_req *r, bool may_probe) {
    peer_state ps = srv_peer_check(r->conn_fd);
    if (ps == PEER_HALF && may_probe && !r->api.stream && r->http11 && !atomic_exchange(&r->probed, true)) {
        (void)!send(r->conn_fd, SRV_PROBE_100, sizeof SRV_PROBE_100 - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        ps = srv_peer_check(r->conn_fd);
    }
    return ps == PEER_GONE;
}

/* Drops the queued requests whose clients are gone (srv->mu held); they go
 * onto *dropped, whose queue references the caller releases after
 * unlocking (srv_req_unref_list). Returns how many. Only the queue is scanned,
 * and only when it is full, so the cost is a poll per queued request. */
static int queue_drop_gone_locked(el_server *s, el_req **dropped) {
    int n = 0;
    for (el_req *r = s->q_head, *next; r; r = next) {
        next = r->next;
        if (!client_gone(r, true)) continue;
        srv_queue_unlink_locked(s, r);
        atomic_store(&r->cancel, true);
        srv_finish_locked(s, r, RS_CANCELLED);
        r->next = *dropped;
        *dropped = r;
        n++;
    }
    return n;
}

void srv_req_unref_list(el_req *r) {
    while (r) {
        el_req *next = r->next;
        r->next = NULL;
        srv_req_unref(r);
        r = next;
    }
}

/* ---- the queue ---------------------------------------------------------- */

/* Puts r at the queue's tail (taking the queue's reference). -1 with e
 * filled (503; h1, v1: a Retry-After header) under memory pressure (no new
 * session is admitted: memory/capacity.h el_mem_pressure), when the server is
 * stopping, or when the queue is full (after dropping requests whose clients
 * are gone). */
int srv_enqueue(el_server *s, el_req *r, el_api_error *e, const char **h1, const char **v1) {
    char why[160];
    if (el_mem_pressure(s->p.mem_floor, why, sizeof why)) {
        el_api_set_error(e, 503, "server_error", NULL, "memory_pressure", "memory pressure (%s); retry later", why);
        *h1 = MHD_HTTP_HEADER_RETRY_AFTER;
        *v1 = "5";
        return -1;
    }
    pthread_mutex_lock(&s->mu);
    /* requests an idle slot is about to take are not waiting: only the rest count against --queue */
    bool stopping = s->stopping, full = s->q_len >= s->p.queue_cap + (s->n_slots - s->busy);
    el_req *dropped = NULL; /* full: first make room by dropping requests whose clients are gone */
    if (!stopping && full && queue_drop_gone_locked(s, &dropped))
        full = s->q_len >= s->p.queue_cap + (s->n_slots - s->busy);
    if (!stopping && !full) {
        r->state = RS_QUEUED;
        req_ref(r); /* the queue's reference */
        if (s->q_tail) s->q_tail->next = r;
        else s->q_head = r;
        s->q_tail = r;
        s->q_len++;
        pthread_cond_broadcast(&s->queue_cv); /* every slot: it may be for one in particular (id_slot) */
    }
    pthread_mutex_unlock(&s->mu);
    srv_req_unref_list(dropped);
    if (stopping) {
        el_api_set_error(e, 503, "server_error", NULL, "shutting_down", "the server is shutting down");
        return -1;
    }
    if (full) {
        el_api_set_error(e, 503, "server_error", NULL, "queue_full",
                         "all %d slots are busy and %d requests are waiting; retry later", s->n_slots, s->p.queue_cap);
        *h1 = MHD_HTTP_HEADER_RETRY_AFTER;
        *v1 = "1";
        return -1;
    }
    return 0;
}

/* Waits (on the connection's own thread) until r is terminal, cancelling it
 * if its client resets or closes (*gone); a half-closed client still gets
 * its answer. Returns the terminal state. */
req_state srv_wait_done(el_server *s, el_req *r, bool *gone) {
    pthread_mutex_lock(&s->mu);
    while (!rs_terminal(r->state)) {
        struct timespec dl;
        deadline_in_ms(&dl, SRV_POLL_MS * 2);
        if (pthread_cond_timedwait(&r->cv, &s->mu, &dl) == ETIMEDOUT && !*gone && !rs_terminal(r->state)) {
            pthread_mutex_unlock(&s->mu);
            if (client_gone(r, true)) { /* reset or closed; a half-closed client still gets its answer */
                *gone = true;
                srv_req_cancel(r);
            }
            pthread_mutex_lock(&s->mu);
        }
    }
    req_state st = r->state;
    pthread_mutex_unlock(&s->mu);
    if (st == RS_CANCELLED && !*gone && srv_peer_check(r->conn_fd) == PEER_GONE) *gone = true; /* dropped from the queue */
    return st;
}

/* ---- slots -------------------------------------------------------------- */

/* An embeddings request: el_embed for each input on the slot's session. */
static req_state run_embd(slot *sl, el_req *r) {
    el_server *s = sl->srv;
    for (int i = 0; i < r->embd_k; i++) {
        if (atomic_load(&r->cancel)) return RS_CANCELLED;
        const size_t cap = (size_t)r->embd_rows[i] * (size_t)s->n_embd;
        int got = el_embed(sl->sess, r->embd_toks[i], r->embd_n[i], (el_pooling)s->pooling, r->embd_vec[i], cap, &r->err);
        if (got == -EL_ERR_CANCELLED) return RS_CANCELLED;
        if (got < 0) return RS_FAILED;
        el_metrics_tokens(&s->metrics, r->embd_n[i], 0);
        if (s->pooling != EL_POOLING_NONE) el_api_embd_normalize(r->embd_vec[i], s->n_embd, r->embd_norm);
    }
    return atomic_load(&r->cancel) ? RS_CANCELLED : RS_DONE;
}

/* Length of the common prefix of a[0..na) and b[0..nb). */
static int common_prefix(const int32_t *a, int na, const int32_t *b, int nb) {
    int n = na < nb ? na : nb, i = 0;
    while (i < n && a[i] == b[i]) i++;
    return i;
}

/* The prompt cache (cache_prompt): how many of r's prompt tokens the slot's
 * session can keep. At most n_prompt - 1 (the last prompt token is always
 * evaluated: its logits give the first token), and 0 when a sliding-window
 * ring can no longer roll back that far (el_session_truncate): recompute. */
static int cache_reuse(const slot *sl, const el_req *r) {
    if (!r->api.cache_prompt || r->embd) return 0;
    int n = common_prefix(sl->ctoks, sl->n_cache, r->prompt, r->n_prompt - 1);
    return n > 0 && el_session_can_truncate(sl->sess, n) ? n : 0;
}

/* LoRA: takes the request's adapters from the registry (resident, referenced until slot_lora_end) and sets them
 * on the slot's session; a slot whose adapter set changes forgets its prompt cache (positions computed under
 * other adapters). 0, or -1 with r->err set (the budget is held by running requests: r->lora_busy, answered 503 +
 * Retry-After; a load failed). */
static int slot_lora_begin(slot *sl, el_req *r) {
    el_server *s = sl->srv;
    if (!s->lora) return 0;
    if (el_lora_reg_acquire(s->lora, r->lora_scale, &sl->lease, &r->lora_busy, &r->err)) return -1;
    if (el_session_set_adapters(sl->sess, sl->lease.a, sl->lease.scale, sl->lease.n, &r->err)) {
        el_lora_reg_release(s->lora, &sl->lease);
        return -1;
    }
    if (memcmp(sl->lora_scale, r->lora_scale, sizeof sl->lora_scale)) {
        el_session_truncate(sl->sess, 0, NULL);
        pthread_mutex_lock(&s->mu);
        sl->n_cache = 0;
        pthread_mutex_unlock(&s->mu);
        memcpy(sl->lora_scale, r->lora_scale, sizeof sl->lora_scale);
    }
    return 0;
}

static void slot_lora_end(slot *sl) {
    if (sl->srv->lora) el_lora_reg_release(sl->srv->lora, &sl->lease);
}

/* The slot lets go of r, which ends in st: the slot's cache now holds n_cache positions (< 0: unchanged), a
 * stream gets its last frames (tail), and /slots never shows a slot busy with an answered request. */
static void slot_finish(slot *sl, el_req *r, req_state st, int n_cache, const el_buf *tail) {
    el_server *s = sl->srv;
    pthread_mutex_lock(&s->mu);
    if (n_cache >= 0) sl->n_cache = n_cache;
    r->session = NULL;
    sl->cur = NULL;
    if (tail && tail->len) el_buf_append(&r->out, tail->p, tail->len);
    srv_finish_locked(s, r, st);
    s->busy--;
    pthread_mutex_unlock(&s->mu);
}

static void run_request(slot *sl, el_req *r) {
    el_server *s = sl->srv;
    if (slot_lora_begin(sl, r)) { /* nothing ran: the request fails with the registry's reason */
        el_buf tail = {0};
        if (r->api.stream) srv_stream_tail(r, RS_FAILED, &tail);
        slot_finish(sl, r, RS_FAILED, -1, &tail);
        el_buf_free(&tail);
        return;
    }
    if (r->embd) {
        req_state st = run_embd(sl, r);
        el_session_reset(sl->sess); /* el_embed leaves no positions: the cache is empty */
        slot_finish(sl, r, st, 0, NULL);
        if (s->p.verbose)
            fprintf(stderr, "edgellm serve: slot %d: embeddings %s: %d inputs\n", sl->idx,
                    st == RS_DONE ? "done" : st == RS_CANCELLED ? "cancelled" : "failed", r->embd_k);
        return;
    }
    /* keep the longest prefix the slot's cache shares with the prompt; the
     * record then holds the prompt, and srv_on_token appends what is generated */
    const int reuse = cache_reuse(sl, r);
    if (el_session_truncate(sl->sess, reuse, NULL)) el_session_truncate(sl->sess, 0, NULL);
    const int kept = el_session_n_past(sl->sess);
    const int n_rec = r->n_prompt < s->n_ctx ? r->n_prompt : s->n_ctx; /* the HTTP side refused longer ones */
    if (n_rec > kept) memcpy(sl->ctoks + kept, r->prompt + kept, sizeof *r->prompt * (size_t)(n_rec - kept));
    r->n_cache_reused = kept;
    r->ctoks = sl->ctoks;
    r->n_ctoks = n_rec;
    r->cap_ctoks = s->n_ctx;
    pthread_mutex_lock(&s->mu);
    sl->n_cache = kept;
    sl->last_reused = kept;
    sl->last_processed = r->n_prompt - kept;
    pthread_mutex_unlock(&s->mu);
    el_metrics_tokens(&s->metrics, r->n_prompt - kept, 0);
    memset(&r->err, 0, sizeof r->err);
    double t_gen = now_s();
    if (sl->dsess && r->gp.spec) r->gp.spec = &sl->spec; /* --draft-model: this slot's draft session */
    el_finish fin = el_generate_cached(sl->sess, r->prompt, r->n_prompt, kept, &r->gp, srv_on_token, r, &r->stats, &r->err);
    el_metrics_spec(&s->metrics, r->stats.n_drafted, r->stats.n_accepted, r->stats.n_spec_rounds, r->stats.n_plain_steps);
    /* the first sampled token was end-of-generation: no callback, but a first token all the same */
    if (!r->got_first && r->stats.ttft_ms > 0) el_metrics_ttft(&s->metrics, t_gen - r->t_arrival + r->stats.ttft_ms / 1e3);
    req_state st = atomic_load(&r->cancel) ? RS_CANCELLED
                 : (r->oom || fin == EL_DONE_FAILED) ? RS_FAILED
                 : fin == EL_DONE_CANCELLED ? RS_CANCELLED : RS_DONE;
    if (r->oom && r->err.code == EL_OK) r->err.code = EL_ERR_NOMEM;
    /* what the cache holds now: every position the session kept, whose ids
     * are the prompt and the generated tokens recorded (a failed request
     * leaves nothing to trust) */
    int after = fin == EL_DONE_FAILED || r->oom ? 0 : el_session_n_past(sl->sess);
    if (after > r->n_ctoks) after = 0;
    if (after != el_session_n_past(sl->sess)) el_session_truncate(sl->sess, after, NULL);
    r->n_cache_after = after;
    r->ctoks = NULL;
    if (st == RS_DONE && s->router) /* the router's time estimate follows measured speed */
        el_router_local_speed(s->router, r->stats.n_prompt, r->stats.prefill_ms, r->stats.n_generated, r->stats.decode_ms);
    el_buf tail = {0};
    if (r->api.stream) srv_stream_tail(r, st, &tail);
    else if (st == RS_DONE && !el_buf_append(&r->text, "", 0)) st = RS_FAILED;
    slot_finish(sl, r, st, after, &tail);
    el_buf_free(&tail);
    if (s->p.verbose)
        fprintf(stderr, "edgellm serve: slot %d: %s %s: %d prompt + %d generated tokens, ttft %.1f ms\n", sl->idx, r->id,
                st == RS_DONE ? "done" : st == RS_CANCELLED ? "cancelled" : "failed", r->stats.n_prompt,
                r->stats.n_generated, r->stats.ttft_ms);
}

/* Slots that may take work now: all, or the policy's slots_derated while the
 * thermal monitor says derated (hot: local requests are not routed here). */
int srv_admitted_slots(const el_server *s) {
    if (!s->thermal) return s->n_slots;
    el_thermal_state ts = el_thermal_get(s->thermal);
    if (ts.level == EL_THERMAL_NORMAL) return s->n_slots;
    int n = el_router_policy(s->router)->slots_derated;
    return n < s->n_slots ? n : s->n_slots;
}

/* Whether slot sl should take queued request r (srv->mu held): r names sl
 * (id_slot), or names none and no other idle slot's cache shares a longer
 * prefix with r's prompt (llama-server's prompt-similarity slot choice; an
 * idle slot is woken with every srv_enqueue, so the better one takes it). */
static bool slot_prefers(const el_server *s, const slot *sl, const el_req *r, int admitted) {
    if (r->api.id_slot >= 0) return r->api.id_slot == sl->idx;
    if (r->embd || !r->api.cache_prompt) return true;
    const int mine = common_prefix(sl->ctoks, sl->n_cache, r->prompt, r->n_prompt - 1);
    for (int i = 0; i < admitted; i++) {
        const slot *o = &s->slots[i];
        if (o == sl || o->cur || o->held) continue;
        if (common_prefix(o->ctoks, o->n_cache, r->prompt, r->n_prompt - 1) > mine) return false;
    }
    return true;
}

void *srv_slot_main(void *arg) {
    slot *sl = arg;
    el_server *s = sl->srv;
    for (;;) {
        el_session_uncancel(sl->sess); /* idle and detached: a late cancel meant the request that ended */
        pthread_mutex_lock(&s->mu);
        while (!s->stopping && (!s->q_head || sl->held)) pthread_cond_wait(&s->queue_cv, &s->mu);
        if (!s->stopping && sl->idx >= srv_admitted_slots(s)) { /* thermal derating: fewer slots take work */
            struct timespec dl;
            deadline_in_ms(&dl, 200);
            pthread_cond_timedwait(&s->queue_cv, &s->mu, &dl);
            pthread_mutex_unlock(&s->mu);
            continue;
        }
        el_req *r = s->q_head;
        const int admitted = srv_admitted_slots(s);
        while (r && !slot_prefers(s, sl, r, admitted)) r = r->next; /* another's (id_slot, or a better cache) */
        if (!r && !s->stopping) { /* only requests for other slots: wait for a change */
            pthread_cond_wait(&s->queue_cv, &s->mu);
            pthread_mutex_unlock(&s->mu);
            continue;
        }
        if (!r) { /* stopping and nothing queued (for this slot) */
            pthread_mutex_unlock(&s->mu);
            break;
        }
        srv_queue_unlink_locked(s, r);
        if (client_gone(r, true)) { /* its client reset or closed while it waited */
            atomic_store(&r->cancel, true);
            srv_finish_locked(s, r, RS_CANCELLED);
            pthread_mutex_unlock(&s->mu);
            srv_req_unref(r);
            continue;
        }
        r->state = RS_PREFILL;
        r->session = sl->sess;
        r->slot_idx = sl->idx;
        sl->cur = r;
        sl->n_tasks++;
        s->busy++;
        pthread_mutex_unlock(&s->mu);
        run_request(sl, r);
        slot_lora_end(sl); /* its adapters may be evicted now */
        pthread_mutex_lock(&s->mu);
        pthread_cond_broadcast(&s->queue_cv); /* a request for this slot may be waiting behind others */
        pthread_mutex_unlock(&s->mu);
        srv_req_unref(r); /* the queue's reference */
    }
    return NULL;
}
