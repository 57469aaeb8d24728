/*
 * cloud.c — the cloud route's client (contract in cloud.h), over libcurl.
 *
 * el_cloud_call uses one easy handle per call (blocking, in the calling
 * connection's thread). A relay drives its easy handle through a multi
 * handle from el_cloud_relay_read, so the connection thread that streams to
 * the client also pulls from the cloud: no extra thread, no queue between
 * them. Raw bytes from the cloud go into `in`; complete SSE events are cut
 * from it, checked (the data of an event is [DONE] or one JSON object) and
 * written to `out`, which the reader hands to the client. Bodies are capped
 * (CLOUD_MAX_BODY for a whole answer, for one event) so a hostile endpoint
 * cannot grow memory without bound.
 */
#include "route/cloud.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>

#include "util/buf.h"

#define CLOUD_MAX_BODY (8u << 20)
#define CLOUD_KEEPALIVE_MS 10000

struct el_cloud {
    char *url, *key, *model, *auth;
    int timeout_s;
    atomic_bool abort;
};

static double ms_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

el_cloud *el_cloud_new(const el_cloud_cfg *cfg, char *msg, size_t cap) {
    if (!cfg->url || (strncmp(cfg->url, "http://", 7) && strncmp(cfg->url, "https://", 8))) {
        snprintf(msg, cap, "--cloud-url: expected http://... or https://..., got '%.200s'", cfg->url ? cfg->url : "");
        return NULL;
    }
    for (const char *p = cfg->url; *p; p++)
        if ((unsigned char)*p <= 0x20 || *p == 0x7f) {
            snprintf(msg, cap, "--cloud-url: control character or space in the URL");
            return NULL;
        }
    if (cfg->key)
        for (const char *p = cfg->key; *p; p++)
            if ((unsigned char)*p < 0x20 || *p == 0x7f) {
                snprintf(msg, cap, "cloud key: control character in the key");
                return NULL;
            }
    static atomic_int inited;
    if (!atomic_exchange(&inited, 1) && curl_global_init(CURL_GLOBAL_DEFAULT)) {
        snprintf(msg, cap, "libcurl failed to initialise");
        return NULL;
    }
    el_cloud *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(msg, cap, "out of memory");
        return NULL;
    }
    size_t n = strlen(cfg->url);
    c->url = strdup(cfg->url);
    if (c->url && n > 0 && c->url[n - 1] == '/') c->url[n - 1] = 0;
    c->key = cfg->key ? strdup(cfg->key) : NULL;
    c->model = cfg->model ? strdup(cfg->model) : NULL;
    c->timeout_s = cfg->timeout_s > 0 ? cfg->timeout_s : 120;
    if (c->key) {
        size_t al = strlen(c->key) + 32;
        c->auth = malloc(al);
        if (c->auth) snprintf(c->auth, al, "Authorization: Bearer %s", c->key);
    }
    atomic_init(&c->abort, false);
    if (!c->url || (cfg->key && (!c->key || !c->auth)) || (cfg->model && !c->model)) {
        el_cloud_free(c);
        snprintf(msg, cap, "out of memory");
        return NULL;
    }
    return c;
}

void el_cloud_free(el_cloud *c) {
    if (!c) return;
    free(c->url);
    free(c->key);
    free(c->auth);
    free(c->model);
    free(c);
}

void el_cloud_abort_all(el_cloud *c) {
    if (c) atomic_store(&c->abort, true);
}

char *el_cloud_request_body(const el_cloud *c, const char *body, size_t len, bool stream) {
    cJSON *root = cJSON_ParseWithLength(body, len);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return NULL;
    }
    cJSON_DeleteItemFromObjectCaseSensitive(root, "edgellm");
    if (c->model) {
        cJSON_DeleteItemFromObjectCaseSensitive(root, "model");
        cJSON_AddStringToObject(root, "model", c->model);
    }
    (void)stream;
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}

/* ---- one transfer ---------------------------------------------------------- */

typedef struct xfer {
    el_cloud *c;
    CURL *h;
    struct curl_slist *hdrs;
    el_buf in;
    bool headers_done, too_big;
    int status;
    double t0, ttfb;
} xfer;

static size_t on_body(char *p, size_t sz, size_t n, void *u) {
    xfer *x = u;
    size_t b = sz * n;
    if (x->ttfb <= 0) x->ttfb = ms_now() - x->t0;
    if (x->in.len + b > CLOUD_MAX_BODY) {
        x->too_big = true;
        return 0;
    }
    return el_buf_append(&x->in, p, b) ? b : 0;
}

static size_t on_header(char *p, size_t sz, size_t n, void *u) {
    xfer *x = u;
    size_t b = sz * n;
    if (b <= 2 && (p[0] == '\r' || p[0] == '\n')) { /* end of a header block */
        long code = 0;
        curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &code);
        if (code >= 200) {
            x->status = (int)code;
            x->headers_done = true;
            if (x->ttfb <= 0) x->ttfb = ms_now() - x->t0;
        }
    }
    return b;
}

static int on_progress(void *u, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d) {
    (void)a; (void)b; (void)c; (void)d;
    xfer *x = u;
    return atomic_load(&x->c->abort) ? 1 : 0;
}

static bool xfer_init(xfer *x, el_cloud *c, const char *path, const char *body, size_t len, bool stream) {
    memset(x, 0, sizeof *x);
    x->c = c;
    x->t0 = ms_now();
    x->h = curl_easy_init();
    if (!x->h) return false;
    size_t ul = strlen(c->url) + strlen(path) + 1;
    char *url = malloc(ul);
    if (!url) return false;
    snprintf(url, ul, "%s%s", c->url, path);
    curl_easy_setopt(x->h, CURLOPT_URL, url);
    free(url); /* curl copies it */
    x->hdrs = curl_slist_append(x->hdrs, "Content-Type: application/json");
    x->hdrs = curl_slist_append(x->hdrs, stream ? "Accept: text/event-stream" : "Accept: application/json");
    x->hdrs = curl_slist_append(x->hdrs, "Expect:");
    if (c->auth) x->hdrs = curl_slist_append(x->hdrs, c->auth);
    if (!x->hdrs) return false;
    curl_easy_setopt(x->h, CURLOPT_HTTPHEADER, x->hdrs);
    curl_easy_setopt(x->h, CURLOPT_POST, 1L);
    curl_easy_setopt(x->h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(x->h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    curl_easy_setopt(x->h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(x->h, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(x->h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(x->h, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(x->h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(x->h, CURLOPT_XFERINFODATA, x);
    curl_easy_setopt(x->h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(x->h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(x->h, CURLOPT_TIMEOUT, (long)c->timeout_s);
    curl_easy_setopt(x->h, CURLOPT_CONNECTTIMEOUT, 10L);
    curl_easy_setopt(x->h, CURLOPT_FOLLOWLOCATION, 0L); /* a redirect could take the data elsewhere */
    curl_easy_setopt(x->h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(x->h, CURLOPT_NOPROXY, "*");
    return true;
}

static void xfer_free(xfer *x) {
    if (x->h) curl_easy_cleanup(x->h);
    curl_slist_free_all(x->hdrs);
    el_buf_free(&x->in);
    memset(x, 0, sizeof *x);
}

/* Fills out from a finished (or failed) transfer that did not give 2xx. */
static void reply_failure(xfer *x, CURLcode rc, el_cloud_reply *out) {
    if (x->too_big) {
        out->kind = EL_CLOUD_ERR_BAD_RESPONSE;
        snprintf(out->error, sizeof out->error, "the cloud's answer exceeds %u bytes", CLOUD_MAX_BODY);
    } else if (rc != CURLE_OK && !x->headers_done) {
        out->kind = EL_CLOUD_ERR_TRANSPORT;
        snprintf(out->error, sizeof out->error, "the cloud is unreachable: %s",
                 atomic_load(&x->c->abort) ? "the server is stopping" : curl_easy_strerror(rc));
    } else {
        out->kind = EL_CLOUD_ERR_HTTP;
        char snippet[160] = "";
        size_t k = 0;
        for (size_t i = 0; i < x->in.len && k + 1 < sizeof snippet; i++) {
            unsigned char ch = (unsigned char)x->in.p[i];
            snippet[k++] = (ch >= 0x20 && ch < 0x7f) ? (char)ch : ' ';
        }
        snippet[k] = 0;
        snprintf(out->error, sizeof out->error, "the cloud answered HTTP %d%s%s", x->status, k ? ": " : "", snippet);
    }
}

el_cloud_err el_cloud_call(el_cloud *c, const char *path, const char *body, size_t len, el_cloud_reply *out) {
    memset(out, 0, sizeof *out);
    xfer x;
    if (!xfer_init(&x, c, path, body, len, false)) {
        xfer_free(&x);
        out->kind = EL_CLOUD_ERR_TRANSPORT;
        snprintf(out->error, sizeof out->error, "out of memory");
        return out->kind;
    }
    CURLcode rc = curl_easy_perform(x.h);
    long code = 0;
    curl_easy_getinfo(x.h, CURLINFO_RESPONSE_CODE, &code);
    x.status = (int)code;
    out->http_status = x.status;
    out->ttfb_ms = x.ttfb;
    out->total_ms = ms_now() - x.t0;
    if (rc != CURLE_OK || x.status < 200 || x.status > 299) {
        if (rc != CURLE_OK && x.status >= 200 && x.status <= 299) {
            out->kind = EL_CLOUD_ERR_BAD_RESPONSE;
            snprintf(out->error, sizeof out->error, "the cloud's answer broke off: %s", curl_easy_strerror(rc));
        } else {
            reply_failure(&x, rc, out);
        }
        xfer_free(&x);
        return out->kind;
    }
    cJSON *root = cJSON_ParseWithLength(x.in.p ? x.in.p : "", x.in.len);
    const cJSON *ch = root ? cJSON_GetObjectItemCaseSensitive(root, "choices") : NULL;
    if (!cJSON_IsObject(root) || !cJSON_IsArray(ch)) {
        out->kind = EL_CLOUD_ERR_BAD_RESPONSE;
        snprintf(out->error, sizeof out->error, "the cloud's answer is not an OpenAI completion (%zu bytes)", x.in.len);
    } else {
        out->kind = EL_CLOUD_OK;
        /* the cloud's own "edgellm" member (another edgellm upstream, or a
         * spoofed route) is dropped: the route member is this device's */
        cJSON_DeleteItemFromObjectCaseSensitive(root, "edgellm");
        out->body = cJSON_PrintUnformatted(root); /* one line, NUL-terminated */
        if (!out->body) {
            out->kind = EL_CLOUD_ERR_BAD_RESPONSE;
            snprintf(out->error, sizeof out->error, "out of memory");
        } else {
            out->len = strlen(out->body);
        }
    }
    cJSON_Delete(root);
    xfer_free(&x);
    return out->kind;
}

void el_cloud_reply_free(el_cloud_reply *r) {
    if (!r) return;
    free(r->body);
    r->body = NULL;
    r->len = 0;
}

/* ---- the streamed relay ---------------------------------------------------- */

struct el_cloud_relay {
    xfer x;
    CURLM *m;
    bool running;      /* the transfer has not finished */
    CURLcode result;
    el_buf out;
    size_t out_off;
    size_t scan;       /* bytes of x.in already searched for an event end */
    bool first_json, ended, ok, failed;
    el_route route;
    double last_out;
};

/* Drives the transfer for up to wait_ms. */
static void relay_pump(el_cloud_relay *r, int wait_ms) {
    if (!r->running) return;
    int still = 0;
    curl_multi_perform(r->m, &still);
    if (still) {
        curl_multi_poll(r->m, NULL, 0, wait_ms, NULL);
        curl_multi_perform(r->m, &still);
    }
    if (!still) {
        r->running = false;
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(r->m, &left)))
            if (msg->msg == CURLMSG_DONE) r->result = msg->data.result;
    }
}

static void relay_error(el_cloud_relay *r, const char *code, const char *msg) {
    cJSON *o = cJSON_CreateObject(), *e = cJSON_CreateObject();
    if (o && e) {
        cJSON_AddStringToObject(e, "message", msg);
        cJSON_AddStringToObject(e, "type", "cloud_error");
        cJSON_AddStringToObject(e, "code", code);
        cJSON_AddNumberToObject(e, "status", 502);
        cJSON_AddItemToObject(o, "error", e);
        e = NULL;
        char *j = cJSON_PrintUnformatted(o);
        if (j) {
            el_buf_str(&r->out, "data: ");
            el_buf_str(&r->out, j);
            el_buf_str(&r->out, "\n\n");
            free(j);
        }
    }
    cJSON_Delete(e);
    cJSON_Delete(o);
    el_buf_str(&r->out, "data: [DONE]\n\n");
    r->ended = true;
    r->failed = true;
}

/* One event's text (without its terminating blank line). */
static void relay_event(el_cloud_relay *r, const char *ev, size_t n) {
    el_buf data = {0};
    bool any = false;
    size_t i = 0;
    while (i < n) {
        size_t j = i;
        while (j < n && ev[j] != '\n') j++;
        size_t l = j;
        if (l > i && ev[l - 1] == '\r') l--;
        if (l - i >= 5 && !memcmp(ev + i, "data:", 5)) {
            size_t s = i + 5;
            if (s < l && ev[s] == ' ') s++;
            if (any) el_buf_append(&data, "\n", 1);
            el_buf_append(&data, ev + s, l - s);
            any = true;
        }
        i = j + 1;
    }
    if (!any) {
        el_buf_free(&data);
        return; /* a comment or keep-alive */
    }
    el_buf_append(&data, "", 1);
    if (!data.p) {
        relay_error(r, "cloud_stream_broken", "out of memory relaying the cloud's stream");
        return;
    }
    if (!strcmp(data.p, "[DONE]")) {
        el_buf_str(&r->out, "data: [DONE]\n\n");
        r->ended = true;
        r->ok = !r->failed;
        el_buf_free(&data);
        return;
    }
    cJSON *o = cJSON_Parse(data.p);
    el_buf_free(&data);
    if (!cJSON_IsObject(o)) {
        cJSON_Delete(o);
        relay_error(r, "cloud_bad_response", "the cloud's stream sent an event that is not a JSON object; the answer stops here");
        return;
    }
    if (cJSON_GetObjectItemCaseSensitive(o, "error")) r->failed = true; /* passed on as the cloud sent it */
    cJSON_DeleteItemFromObjectCaseSensitive(o, "edgellm"); /* the route member is this device's (as el_cloud_call) */
    char *j = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (j && !r->first_json) {
        r->first_json = true;
        j = el_route_inject(j, &r->route);
    }
    if (!j) {
        relay_error(r, "cloud_stream_broken", "out of memory relaying the cloud's stream");
        return;
    }
    el_buf_str(&r->out, "data: ");
    el_buf_str(&r->out, j);
    el_buf_str(&r->out, "\n\n");
    free(j);
}

/* Cuts complete events out of x.in. */
static void relay_parse(el_cloud_relay *r) {
    el_buf *in = &r->x.in;
    size_t start = 0;
    while (!r->ended) {
        const char *p = in->p;
        size_t end = 0, term = 0;
        for (size_t i = r->scan > start ? r->scan : start; i + 1 < in->len; i++) {
            if (p[i] == '\n' && p[i + 1] == '\n') { end = i; term = 2; break; }
            if (i + 3 < in->len && p[i] == '\r' && p[i + 1] == '\n' && p[i + 2] == '\r' && p[i + 3] == '\n') {
                end = i; term = 4; break;
            }
        }
        if (!term) break;
        relay_event(r, p + start, end - start);
        start = end + term;
        r->scan = start;
    }
    if (start > 0) { /* drop what was consumed */
        memmove(in->p, in->p + start, in->len - start);
        in->len -= start;
        r->scan = r->scan > start ? r->scan - start : 0;
    }
    if (!r->ended && in->len > (1u << 20))
        relay_error(r, "cloud_bad_response", "the cloud's stream sent an event over 1 MiB; the answer stops here");
}

el_cloud_relay *el_cloud_relay_open(el_cloud *c, const char *path, const char *body, size_t len, const el_route *route,
                                    el_cloud_reply *out) {
    memset(out, 0, sizeof *out);
    el_cloud_relay *r = calloc(1, sizeof *r);
    if (!r || !xfer_init(&r->x, c, path, body, len, true) || !(r->m = curl_multi_init())) {
        if (r) { xfer_free(&r->x); free(r); }
        out->kind = EL_CLOUD_ERR_TRANSPORT;
        snprintf(out->error, sizeof out->error, "out of memory");
        return NULL;
    }
    r->route = *route;
    curl_multi_add_handle(r->m, r->x.h);
    r->running = true;
    while (r->running && !r->x.headers_done) relay_pump(r, 100);
    out->http_status = r->x.status;
    out->ttfb_ms = r->x.ttfb;
    if (!r->x.headers_done || r->x.status < 200 || r->x.status > 299) {
        while (r->running) relay_pump(r, 100); /* the error body, bounded by the timeout and CLOUD_MAX_BODY */
        reply_failure(&r->x, r->result, out);
        out->total_ms = ms_now() - r->x.t0;
        el_cloud_relay_close(r);
        return NULL;
    }
    out->kind = EL_CLOUD_OK;
    r->last_out = ms_now();
    return r;
}

size_t el_cloud_relay_read(el_cloud_relay *r, char *buf, size_t max) {
    for (;;) {
        if (r->out_off < r->out.len) {
            const size_t n = el_buf_read(&r->out, &r->out_off, buf, max);
            r->last_out = ms_now();
            return n;
        }
        if (r->ended) return 0;
        relay_parse(r);
        if (r->out.len || r->ended) continue;
        if (!r->running) {
            char msg[200];
            snprintf(msg, sizeof msg, "the cloud's stream stopped before its end (%s); the answer is incomplete",
                     r->result != CURLE_OK ? curl_easy_strerror(r->result) : "no [DONE]");
            relay_error(r, "cloud_stream_broken", msg);
            continue;
        }
        relay_pump(r, 100);
        if (!r->out.len && !r->ended && ms_now() - r->last_out >= CLOUD_KEEPALIVE_MS && max >= 15) {
            memcpy(buf, ": keep-alive\n\n", 14);
            r->last_out = ms_now();
            return 14;
        }
    }
}

el_cloud_relay *el_cloud_relay_detached(const el_route *route, const char *bytes, size_t n) {
    el_cloud_relay *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->route = *route;
    r->last_out = ms_now();
    if (n && !el_buf_append(&r->x.in, bytes, n)) {
        el_cloud_relay_close(r);
        return NULL;
    }
    return r;
}

bool el_cloud_relay_ok(const el_cloud_relay *r) { return r && r->ended && r->ok && !r->failed; }

bool el_cloud_relay_broken(const el_cloud_relay *r) { return r && r->ended && r->failed; }

void el_cloud_relay_close(el_cloud_relay *r) {
    if (!r) return;
    if (r->m) {
        if (r->x.h) curl_multi_remove_handle(r->m, r->x.h);
        curl_multi_cleanup(r->m);
    }
    xfer_free(&r->x);
    el_buf_free(&r->out);
    free(r);
}

/* ---- the canary ----------------------------------------------------------- */

struct el_cloud_canary {
    pthread_mutex_t mu;
    int refs;                 /* the local side's and the thread's */
    el_cloud *c;
    el_router *rt;
    char path[32];
    char *body;
    bool chat;
    bool local_done, local_ok, cloud_done, cloud_ok;
    char *local_text, *cloud_text;
    size_t local_len, cloud_len;
    double local_ms, cloud_ms;
};

/* Both sides done (k->mu held): the comparison, once. */
static void canary_compare_locked(el_cloud_canary *k) {
    if (!k->local_done || !k->cloud_done || !k->local_ok) return; /* a local side that failed compares nothing */
    const bool agree = k->cloud_ok && k->cloud_len == k->local_len &&
                       (k->local_len == 0 || !memcmp(k->cloud_text, k->local_text, k->local_len));
    el_router_canary_record(k->rt, k->cloud_ok, agree, k->local_ms, k->cloud_ms);
}

static void canary_unref(el_cloud_canary *k) {
    pthread_mutex_lock(&k->mu);
    const bool last = --k->refs == 0;
    pthread_mutex_unlock(&k->mu);
    if (!last) return;
    el_router *rt = k->rt;
    pthread_mutex_destroy(&k->mu);
    free(k->body);
    free(k->local_text);
    free(k->cloud_text);
    free(k);
    el_router_canary_end(rt);
}

/* The answer's text: choices[0].message.content (chat) or choices[0].text. */
static char *canary_text(const char *json, bool chat, size_t *len) {
    cJSON *o = cJSON_Parse(json);
    const cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(o, "choices"), 0);
    const cJSON *t = chat ? cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(c0, "message"), "content")
                          : cJSON_GetObjectItemCaseSensitive(c0, "text");
    char *out = cJSON_IsString(t) && t->valuestring ? strdup(t->valuestring) : NULL;
    *len = out ? strlen(out) : 0;
    cJSON_Delete(o);
    return out;
}

static void *canary_main(void *arg) {
    el_cloud_canary *k = arg;
    el_cloud_reply rep;
    const double t0 = ms_now();
    el_cloud_call(k->c, k->path, k->body, strlen(k->body), &rep);
    size_t len = 0;
    char *text = rep.kind == EL_CLOUD_OK ? canary_text(rep.body, k->chat, &len) : NULL;
    el_cloud_reply_free(&rep);
    pthread_mutex_lock(&k->mu);
    k->cloud_done = true;
    k->cloud_ok = text != NULL;
    k->cloud_text = text;
    k->cloud_len = len;
    k->cloud_ms = ms_now() - t0;
    canary_compare_locked(k);
    pthread_mutex_unlock(&k->mu);
    canary_unref(k);
    return NULL;
}

el_cloud_canary *el_cloud_canary_start(el_cloud *c, el_router *rt, const char *path, char *body, bool chat) {
    if (!c || !rt || !body || !el_router_canary_begin(rt)) {
        free(body);
        return NULL;
    }
    el_cloud_canary *k = calloc(1, sizeof *k);
    if (!k) {
        free(body);
        el_router_canary_end(rt);
        return NULL;
    }
    pthread_mutex_init(&k->mu, NULL);
    k->refs = 2;
    k->c = c;
    k->rt = rt;
    snprintf(k->path, sizeof k->path, "%s", path);
    k->body = body;
    k->chat = chat;
    pthread_t th;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    const int rc = pthread_create(&th, &at, canary_main, k);
    pthread_attr_destroy(&at);
    if (rc) {
        k->refs = 1; /* no thread: only the caller's; nothing was sent */
        el_cloud_canary_local(k, false, NULL, 0, 0);
        return NULL;
    }
    return k;
}

void el_cloud_canary_local(el_cloud_canary *k, bool ok, const char *text, size_t len, double local_ms) {
    if (!k) return;
    pthread_mutex_lock(&k->mu);
    k->local_done = true;
    k->local_ok = ok && (text || len == 0);
    if (k->local_ok && len) {
        k->local_text = malloc(len);
        if (k->local_text) memcpy(k->local_text, text, len);
        else k->local_ok = false;
    }
    k->local_len = k->local_ok ? len : 0;
    k->local_ms = local_ms;
    canary_compare_locked(k);
    pthread_mutex_unlock(&k->mu);
    canary_unref(k);
}
