/*
 * telemetry.c — content-free telemetry and the rotating JSONL spool
 * (contract in telemetry.h).
 *
 * An event becomes a list of attributes (tattr): a constant key, and a
 * value that is a number, a boolean, or a string that is one of this file's
 * constant tables or one of the sink's fixed identifiers. The JSONL line and
 * the OTLP log record are both written from that list, so they say the same
 * thing; neither writer has a way to reach request text. The OTLP exporter
 * is one thread draining a ring of events (copied by value) and posting
 * them in batches with libcurl.
 */
#include "route/telemetry.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

/* ---- the spool ---------------------------------------------------------- */

struct el_spool {
    pthread_mutex_t mu;
    char *path;
    long max_bytes;
    int keep;
    int fd;
    long size;
    long failed;
};

void el_spool_rotated_name(const char *path, int i, char *out, size_t cap) {
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    const char *dot = strrchr(base, '.');
    if (dot && dot != base)
        snprintf(out, cap, "%.*s.%d%s", (int)(dot - path), path, i, dot);
    else
        snprintf(out, cap, "%s.%d", path, i);
}

static int spool_reopen(el_spool *s) {
    s->fd = open(s->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (s->fd < 0) return -1;
    struct stat st;
    s->size = fstat(s->fd, &st) == 0 ? (long)st.st_size : 0;
    return 0;
}

el_spool *el_spool_open(const char *path, long max_bytes, int keep, char *err, size_t cap) {
    el_spool *s = calloc(1, sizeof *s);
    if (!s || !(s->path = strdup(path))) {
        free(s);
        if (err && cap) snprintf(err, cap, "out of memory");
        return NULL;
    }
    s->max_bytes = max_bytes < 256 ? 256 : max_bytes;
    s->keep = keep < 1 ? 1 : keep > 99 ? 99 : keep;
    if (spool_reopen(s)) {
        if (err && cap) snprintf(err, cap, "%s: %s", path, strerror(errno));
        free(s->path);
        free(s);
        return NULL;
    }
    pthread_mutex_init(&s->mu, NULL);
    return s;
}

static void spool_rotate(el_spool *s) {
    char from[4200], to[4200];
    close(s->fd);
    s->fd = -1;
    for (int i = s->keep - 1; i >= 1; i--) {
        el_spool_rotated_name(s->path, i, from, sizeof from);
        el_spool_rotated_name(s->path, i + 1, to, sizeof to);
        rename(from, to); /* absent: nothing to move */
    }
    el_spool_rotated_name(s->path, 1, to, sizeof to);
    rename(s->path, to);
    spool_reopen(s);
}

int el_spool_write(el_spool *s, const char *line, size_t len) {
    if (!s) return -1;
    pthread_mutex_lock(&s->mu);
    if (s->size > 0 && s->size + (long)len + 1 > s->max_bytes) spool_rotate(s);
    int rc = -1;
    if (s->fd >= 0) {
        /* one write of line + '\n' (O_APPEND): lines never interleave */
        char stackbuf[2048];
        char *b = len + 1 <= sizeof stackbuf ? stackbuf : malloc(len + 1);
        if (b) {
            memcpy(b, line, len);
            b[len] = '\n';
            ssize_t w = write(s->fd, b, len + 1);
            if (w == (ssize_t)(len + 1)) {
                s->size += (long)w;
                rc = 0;
            } else if (w > 0 && ftruncate(s->fd, (off_t)s->size) != 0) { /* half a line: cut it back */
                close(s->fd);
                s->fd = -1; /* cannot cut it: stop rather than append after half a line */
            }
            if (b != stackbuf) free(b);
        }
    }
    if (rc) s->failed++;
    pthread_mutex_unlock(&s->mu);
    return rc;
}

long el_spool_failed(el_spool *s) {
    if (!s) return 0;
    pthread_mutex_lock(&s->mu);
    long n = s->failed;
    pthread_mutex_unlock(&s->mu);
    return n;
}

void el_spool_close(el_spool *s) {
    if (!s) return;
    if (s->fd >= 0) close(s->fd);
    pthread_mutex_destroy(&s->mu);
    free(s->path);
    free(s);
}

/* ---- constant tables ------------------------------------------------------ */

static const char *const KIND[EL_TEV__N] = {"request_end", "request_cancelled", "route_decision", "route_refused",
                                            "load_error", "thermal_transition"};
static const char *const OP[EL_TOP__N] = {"none", "chat", "text_completion", "completion", "embeddings"};
static const char *const REASON[EL_RR__N] = {"none", "local_preferred", "local_only_class", "policy_prefers_cloud",
                                             "deadline", "unknown_data_class", "model_unavailable", "thermal_hot",
                                             "memory_pressure", "battery_low", "bad_route_metadata", "other"};
static const char *const FINISH[EL_TFIN__N] = {"none", "stop", "length", "cancelled", "error"};
static const char *const CLOUDERR[EL_TCLOUD__N] = {"none", "cloud_unreachable", "cloud_timeout", "cloud_http_error",
                                                   "cloud_bad_response", "cloud_stream_broken"};
static const char *const ERRNAME[] = {"none", "io", "bad_magic", "bad_version", "truncated", "bad_count",
                                      "bad_value", "bad_tensor", "bad_type", "unsupported", "missing", "nomem",
                                      "invalid_arg", "context", "template", "cancelled", "internal", "numeric"};
static const char *const THERMAL[3] = {"normal", "derated", "hot"};

static const char *err_name(int code) {
    if (code == EL_TEV_ERR_PACKAGE) return "package_check";
    return ERRNAME[(unsigned)code < sizeof ERRNAME / sizeof *ERRNAME ? code : EL_ERR_INTERNAL];
}

static const double TIME_UB[] = {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 30000, 60000};
static const char *const TIME_LABEL[] = {"<=1ms",  "<=2ms",  "<=5ms",  "<=10ms", "<=20ms", "<=50ms",
                                         "<=100ms", "<=200ms", "<=500ms", "<=1s",  "<=2s",   "<=5s",
                                         "<=10s",  "<=30s",  "<=60s",  ">60s"};
static const char *const MEM_LABEL[] = {"<=64MiB", "<=128MiB", "<=256MiB", "<=512MiB", "<=1GiB", "<=2GiB",
                                        "<=4GiB",  "<=8GiB",   "<=16GiB",  "<=32GiB",  "<=64GiB", ">64GiB"};

el_route_reason el_route_reason_code(const char *reason) {
    if (!reason || !reason[0]) return EL_RR_NONE;
    for (int i = 1; i < EL_RR_OTHER; i++)
        if (!strcmp(reason, REASON[i])) return (el_route_reason)i;
    return EL_RR_OTHER;
}

const char *el_route_reason_name(el_route_reason r) { return (unsigned)r < EL_RR__N ? REASON[r] : "other"; }

const char *el_tev_time_bucket(double ms) {
    const int n = (int)(sizeof TIME_UB / sizeof TIME_UB[0]);
    for (int i = 0; i < n; i++)
        if (ms <= TIME_UB[i]) return TIME_LABEL[i];
    return TIME_LABEL[n];
}

const char *el_tev_mem_bucket(uint64_t bytes) {
    uint64_t ub = 64ull << 20;
    const int n = (int)(sizeof MEM_LABEL / sizeof MEM_LABEL[0]) - 1;
    for (int i = 0; i < n; i++, ub <<= 1)
        if (bytes <= ub) return MEM_LABEL[i];
    return MEM_LABEL[n];
}

uint64_t el_tev_peak_rss(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru)) return 0;
    return (uint64_t)ru.ru_maxrss * 1024u; /* Linux: KiB */
}

el_tev el_tev_init(el_tev_kind k) {
    el_tev e;
    memset(&e, 0, sizeof e);
    e.kind = k;
    e.route_source = -1;
    e.data_class = -1;
    e.ttft_ms = e.itl_ms = e.total_ms = -1;
    e.n_prompt = e.n_gen = -1;
    return e;
}

void el_tev_ident(const char *in, char *out, size_t cap) {
    if (!cap) return;
    size_t n = 0;
    for (const char *p = in ? in : ""; *p && n + 1 < cap; p++) {
        const char c = *p;
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                        c == '_' || c == '-';
        out[n++] = ok ? c : '_';
    }
    out[n] = 0;
    if (!n) snprintf(out, cap, "unknown");
}

/* ---- attributes ------------------------------------------------------------ */

typedef enum { TA_STR, TA_INT, TA_BOOL, TA_STRARR1 } tattr_type;
typedef struct tattr {
    const char *key;  /* constant */
    tattr_type type;
    const char *s;    /* TA_STR / TA_STRARR1: a constant table entry or a sink identifier */
    long long i;
} tattr;

#define EL_TEV_MAX_OTLP 512 /* the exporter's queue */

struct el_telemetry {
    pthread_mutex_t mu;
    el_spool *spool;
    char model_id[64];
    char fingerprint[64];
    char device_class[64];
    el_policy policy;
    long spooled, exported, dropped;
    /* OTLP */
    char *otlp_url;
    pthread_t th;
    bool th_started, stop;
    pthread_cond_t cv, idle_cv;
    el_tev q[EL_TEV_MAX_OTLP];
    int q_head, q_len;
    bool posting;
};

static const char *class_name(const el_telemetry *t, const el_tev *e) {
    if (e->data_class >= 0 && e->data_class < t->policy.n_classes) return t->policy.classes[e->data_class].name;
    return e->class_given ? "unknown" : "none";
}

/* The attributes of e (t->mu held: fingerprint). Returns the count. */
static int tev_attrs(const el_telemetry *t, const el_tev *e, tattr *a, int cap) {
    int n = 0;
#define S(k, v) do { if (n < cap) a[n++] = (tattr){k, TA_STR, v, 0}; } while (0)
#define I(k, v) do { if (n < cap) a[n++] = (tattr){k, TA_INT, NULL, (long long)(v)}; } while (0)
#define B(k, v) do { if (n < cap) a[n++] = (tattr){k, TA_BOOL, NULL, (v) ? 1 : 0}; } while (0)
    const unsigned kind = (unsigned)e->kind < EL_TEV__N ? (unsigned)e->kind : 0;
    S("event", KIND[kind]);
    S("edgellm.fingerprint", t->fingerprint);
    S("edgellm.device_class", t->device_class);
    S("edgellm.policy_version", t->policy.version);
    S("edgellm.thermal", THERMAL[(unsigned)e->thermal < 3 ? e->thermal : 2]);
    if (e->kind == EL_TEV_THERMAL) {
        S("edgellm.thermal_from", THERMAL[(unsigned)e->thermal_from < 3 ? e->thermal_from : 2]);
        if (e->threads_active > 0) I("edgellm.threads_active", e->threads_active);
        return n;
    }
    if (e->kind == EL_TEV_LOAD_ERROR) {
        S("error.type", err_name(e->error));
        S("gen_ai.request.model", t->model_id);
        return n;
    }
    const unsigned op = (unsigned)e->op < EL_TOP__N ? (unsigned)e->op : 0;
    if (op) S("gen_ai.operation.name", OP[op]);
    if (e->route_source >= 0) {
        S("edgellm.route.source", el_route_source_name((el_route_source)e->route_source));
        if (e->route_source != EL_ROUTE_DECLINED) S("gen_ai.system", e->route_source == EL_ROUTE_CLOUD ? "openai" : "edgellm");
    }
    S("edgellm.route.reason", el_route_reason_name(e->reason));
    S("edgellm.data_class", class_name(t, e));
    B("edgellm.consent", e->consent);
    B("edgellm.streamed", e->streamed);
    if (e->canary) B("edgellm.canary", true);
    S("gen_ai.request.model", t->model_id);
    if (e->kind == EL_TEV_ROUTE || e->kind == EL_TEV_REFUSED) {
        if (e->http_status) I("http.response.status_code", e->http_status);
        if (e->n_prompt >= 0) I("gen_ai.usage.input_tokens", e->n_prompt);
        return n;
    }
    /* request end / cancelled */
    const unsigned fin = (unsigned)e->finish < EL_TFIN__N ? (unsigned)e->finish : 0;
    if (fin) if (n < cap) a[n++] = (tattr){"gen_ai.response.finish_reasons", TA_STRARR1, FINISH[fin], 0};
    if (e->error) S("error.type", err_name(e->error));
    if (e->cloud_error) S("edgellm.cloud_error", CLOUDERR[(unsigned)e->cloud_error < EL_TCLOUD__N ? e->cloud_error : 0]);
    if (e->http_status) I("http.response.status_code", e->http_status);
    if (e->n_prompt >= 0) I("gen_ai.usage.input_tokens", e->n_prompt);
    if (e->n_gen >= 0) I("gen_ai.usage.output_tokens", e->n_gen);
    if (e->ttft_ms >= 0) S("edgellm.ttft_bucket", el_tev_time_bucket(e->ttft_ms));
    if (e->itl_ms >= 0) S("edgellm.itl_bucket", el_tev_time_bucket(e->itl_ms));
    if (e->total_ms >= 0) S("edgellm.total_time_bucket", el_tev_time_bucket(e->total_ms));
    if (e->peak_mem_bytes) S("edgellm.peak_memory_bucket", el_tev_mem_bucket(e->peak_mem_bytes));
    if (e->spec_drafted > 0) {
        I("edgellm.spec.drafted", e->spec_drafted);
        I("edgellm.spec.accepted", e->spec_accepted);
    }
    if (e->threads_active > 0) I("edgellm.threads_active", e->threads_active);
    if (e->lora) I("edgellm.lora", e->lora);
#undef S
#undef I
#undef B
    return n;
}

/* JSON string escaping of a constant or identifier (they hold no control
 * bytes, but the policy version may hold quotes or backslashes). */
static size_t put_str(char *b, size_t cap, size_t n, const char *s) {
    if (n < cap) b[n] = '"';
    n++;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char esc[8];
        int k;
        if (*p == '"' || *p == '\\') k = snprintf(esc, sizeof esc, "\\%c", *p);
        else if (*p < 0x20 || *p >= 0x7f) k = snprintf(esc, sizeof esc, "\\u%04x", *p);
        else k = snprintf(esc, sizeof esc, "%c", *p);
        for (int j = 0; j < k; j++, n++)
            if (n < cap) b[n] = esc[j];
    }
    if (n < cap) b[n] = '"';
    return n + 1;
}

static size_t put_raw(char *b, size_t cap, size_t n, const char *s) {
    for (; *s; s++, n++)
        if (n < cap) b[n] = *s;
    return n;
}

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The JSONL line (t->mu held). */
static char *line_locked(el_telemetry *t, const el_tev *e, long long ts) {
    tattr a[40];
    const int na = tev_attrs(t, e, a, 40);
    const size_t cap = 4096;
    char *b = malloc(cap);
    if (!b) return NULL;
    char num[48];
    snprintf(num, sizeof num, "{\"ts_ms\":%lld", ts);
    size_t n = put_raw(b, cap, 0, num);
    for (int i = 0; i < na; i++) {
        n = put_raw(b, cap, n, ",");
        n = put_str(b, cap, n, a[i].key);
        n = put_raw(b, cap, n, ":");
        switch (a[i].type) {
        case TA_STR: n = put_str(b, cap, n, a[i].s); break;
        case TA_STRARR1:
            n = put_raw(b, cap, n, "[");
            n = put_str(b, cap, n, a[i].s);
            n = put_raw(b, cap, n, "]");
            break;
        case TA_INT: snprintf(num, sizeof num, "%lld", a[i].i); n = put_raw(b, cap, n, num); break;
        case TA_BOOL: n = put_raw(b, cap, n, a[i].i ? "true" : "false"); break;
        }
    }
    n = put_raw(b, cap, n, "}");
    if (n >= cap) { /* cannot happen with this schema (a few hundred bytes); refuse rather than cut */
        free(b);
        return NULL;
    }
    b[n] = 0;
    return b;
}

char *el_telemetry_line(el_telemetry *t, const el_tev *e) {
    if (!t) return NULL;
    pthread_mutex_lock(&t->mu);
    char *s = line_locked(t, e, now_ms());
    pthread_mutex_unlock(&t->mu);
    return s;
}

/* ---- OTLP/HTTP JSON export ------------------------------------------------------ */

/* One logRecord (t->mu held). */
static size_t otlp_record(el_telemetry *t, const el_tev *e, long long ts, char *b, size_t cap, size_t n) {
    tattr a[40];
    const int na = tev_attrs(t, e, a, 40);
    char num[128];
    snprintf(num, sizeof num, "{\"timeUnixNano\":\"%lld000000\",\"severityNumber\":9,\"severityText\":\"INFO\",", ts);
    n = put_raw(b, cap, n, num);
    n = put_raw(b, cap, n, "\"eventName\":");
    n = put_str(b, cap, n, a[0].s);
    n = put_raw(b, cap, n, ",\"body\":{\"stringValue\":");
    n = put_str(b, cap, n, a[0].s);
    n = put_raw(b, cap, n, "},\"attributes\":[");
    for (int i = 1; i < na; i++) {
        n = put_raw(b, cap, n, i > 1 ? ",{\"key\":" : "{\"key\":");
        n = put_str(b, cap, n, a[i].key);
        n = put_raw(b, cap, n, ",\"value\":{");
        switch (a[i].type) {
        case TA_STR:
            n = put_raw(b, cap, n, "\"stringValue\":");
            n = put_str(b, cap, n, a[i].s);
            break;
        case TA_STRARR1:
            n = put_raw(b, cap, n, "\"arrayValue\":{\"values\":[{\"stringValue\":");
            n = put_str(b, cap, n, a[i].s);
            n = put_raw(b, cap, n, "}]}");
            break;
        case TA_INT:
            snprintf(num, sizeof num, "\"intValue\":\"%lld\"", a[i].i); /* OTLP JSON: int64 as a string */
            n = put_raw(b, cap, n, num);
            break;
        case TA_BOOL: n = put_raw(b, cap, n, a[i].i ? "\"boolValue\":true" : "\"boolValue\":false"); break;
        }
        n = put_raw(b, cap, n, "}}");
    }
    return put_raw(b, cap, n, "]}");
}

static size_t discard_cb(char *p, size_t sz, size_t nm, void *u) {
    (void)p;
    (void)u;
    return sz * nm;
}

static void *otlp_main(void *arg) {
    el_telemetry *t = arg;
    CURL *curl = curl_easy_init();
    pthread_mutex_lock(&t->mu);
    for (;;) {
        while (!t->stop && t->q_len == 0) pthread_cond_wait(&t->cv, &t->mu);
        if (t->q_len == 0 && t->stop) break;
        /* a batch: up to 64 events */
        el_tev batch[64];
        long long ts = now_ms();
        int nb = 0;
        while (t->q_len > 0 && nb < 64) {
            batch[nb++] = t->q[t->q_head];
            t->q_head = (t->q_head + 1) % EL_TEV_MAX_OTLP;
            t->q_len--;
        }
        t->posting = true;
        const size_t cap = 64 * 3000 + 1024;
        char *b = malloc(cap);
        size_t n = 0;
        if (b) {
            n = put_raw(b, cap, n, "{\"resourceLogs\":[{\"resource\":{\"attributes\":["
                                   "{\"key\":\"service.name\",\"value\":{\"stringValue\":\"edgellm\"}},"
                                   "{\"key\":\"edgellm.fingerprint\",\"value\":{\"stringValue\":");
            n = put_str(b, cap, n, t->fingerprint);
            n = put_raw(b, cap, n, "}}]},\"scopeLogs\":[{\"scope\":{\"name\":\"edgellm.telemetry\",\"version\":\"1\"},"
                                   "\"logRecords\":[");
            for (int i = 0; i < nb; i++) {
                if (i) n = put_raw(b, cap, n, ",");
                n = otlp_record(t, &batch[i], ts, b, cap, n);
            }
            n = put_raw(b, cap, n, "]}]}]}");
        }
        pthread_mutex_unlock(&t->mu);
        bool ok = false;
        if (b && n < cap && curl) {
            b[n] = 0;
            struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
            curl_easy_reset(curl);
            curl_easy_setopt(curl, CURLOPT_URL, t->otlp_url);
            curl_easy_setopt(curl, CURLOPT_POSTFIELDS, b);
            curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, (long)n);
            curl_easy_setopt(curl, CURLOPT_HTTPHEADER, h);
            curl_easy_setopt(curl, CURLOPT_TIMEOUT, 5L);
            curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
            curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
            curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, discard_cb);
            long code = 0;
            if (curl_easy_perform(curl) == CURLE_OK) curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
            ok = code >= 200 && code < 300;
            curl_slist_free_all(h);
        }
        free(b);
        pthread_mutex_lock(&t->mu);
        t->posting = false;
        if (ok) t->exported += nb;
        else t->dropped += nb;
        if (!ok && t->stop) { /* stopping and the collector fails: the rest is dropped, shutdown stays bounded */
            t->dropped += t->q_len;
            t->q_len = 0;
        }
        pthread_cond_broadcast(&t->idle_cv);
    }
    pthread_mutex_unlock(&t->mu);
    if (curl) curl_easy_cleanup(curl);
    return NULL;
}

/* ---- the sink ------------------------------------------------------------------- */

static void device_class(char *out, size_t cap) {
    struct utsname u;
    char arch[32] = "unknown";
    if (!uname(&u)) el_tev_ident(u.machine, arch, sizeof arch);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGE_SIZE);
    double gib = pages > 0 && psz > 0 ? (double)pages * (double)psz / (1024.0 * 1024.0 * 1024.0) : 0;
    int g = 1;
    while (g < gib && g < 4096) g *= 2; /* a power-of-two bucket */
    snprintf(out, cap, "%s-%ldc-%dg", arch, cpus > 0 ? cpus : 0, g);
}

el_telemetry *el_telemetry_open(const el_telemetry_cfg *cfg, char *err, size_t cap) {
    if (err && cap) err[0] = 0;
    if (!cfg || (!cfg->dir && !cfg->otlp_url)) return NULL;
    if (cfg->otlp_url && strncmp(cfg->otlp_url, "http://", 7) && strncmp(cfg->otlp_url, "https://", 8)) {
        if (err && cap) snprintf(err, cap, "--otlp-url: expected http://... or https://...");
        return NULL;
    }
    el_telemetry *t = calloc(1, sizeof *t);
    if (!t) {
        if (err && cap) snprintf(err, cap, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    pthread_cond_init(&t->idle_cv, NULL);
    el_tev_ident(cfg->model_id, t->model_id, sizeof t->model_id);
    snprintf(t->fingerprint, sizeof t->fingerprint, "unknown");
    device_class(t->device_class, sizeof t->device_class);
    if (cfg->policy) t->policy = *cfg->policy;
    else el_policy_builtin(&t->policy);
    if (cfg->dir) {
        if (mkdir(cfg->dir, 0700) && errno != EEXIST) {
            if (err && cap) snprintf(err, cap, "--telemetry-dir %s: %s", cfg->dir, strerror(errno));
            el_telemetry_close(t);
            return NULL;
        }
        char path[4096];
        snprintf(path, sizeof path, "%s/telemetry.jsonl", cfg->dir);
        char e2[300];
        t->spool = el_spool_open(path, cfg->max_bytes > 0 ? cfg->max_bytes : 1L << 20, cfg->keep > 0 ? cfg->keep : 3,
                                 e2, sizeof e2);
        if (!t->spool) {
            if (err && cap) snprintf(err, cap, "--telemetry-dir: %s", e2);
            el_telemetry_close(t);
            return NULL;
        }
    }
    if (cfg->otlp_url) {
        t->otlp_url = strdup(cfg->otlp_url);
        if (!t->otlp_url || pthread_create(&t->th, NULL, otlp_main, t)) {
            if (err && cap) snprintf(err, cap, "cannot start the OTLP exporter");
            el_telemetry_close(t);
            return NULL;
        }
        t->th_started = true;
    }
    return t;
}

void el_telemetry_set_fingerprint(el_telemetry *t, const char *fp) {
    if (!t) return;
    pthread_mutex_lock(&t->mu);
    char tmp[64];
    el_tev_ident(fp, tmp, sizeof tmp);
    snprintf(t->fingerprint, sizeof t->fingerprint, "%s", fp && !strcmp(tmp, fp) ? fp : "invalid");
    pthread_mutex_unlock(&t->mu);
}

void el_telemetry_emit(el_telemetry *t, const el_tev *e) {
    if (!t || !e) return;
    pthread_mutex_lock(&t->mu);
    if (t->spool) {
        char *line = line_locked(t, e, now_ms());
        if (line && !el_spool_write(t->spool, line, strlen(line))) t->spooled++;
        else t->dropped++;
        free(line);
    }
    if (t->th_started) {
        if (t->q_len < EL_TEV_MAX_OTLP) {
            t->q[(t->q_head + t->q_len) % EL_TEV_MAX_OTLP] = *e;
            t->q_len++;
            pthread_cond_signal(&t->cv);
        } else {
            t->dropped++;
        }
    }
    pthread_mutex_unlock(&t->mu);
}

void el_telemetry_counts(el_telemetry *t, long *spooled, long *exported, long *dropped) {
    long a = 0, b = 0, c = 0;
    if (t) {
        pthread_mutex_lock(&t->mu);
        a = t->spooled;
        b = t->exported;
        c = t->dropped;
        pthread_mutex_unlock(&t->mu);
    }
    if (spooled) *spooled = a;
    if (exported) *exported = b;
    if (dropped) *dropped = c;
}

void el_telemetry_close(el_telemetry *t) {
    if (!t) return;
    if (t->th_started) { /* the exporter drains the queue, then stops */
        pthread_mutex_lock(&t->mu);
        t->stop = true;
        pthread_cond_broadcast(&t->cv);
        pthread_mutex_unlock(&t->mu);
        pthread_join(t->th, NULL);
    }
    el_spool_close(t->spool);
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->cv);
    pthread_cond_destroy(&t->idle_cv);
    free(t->otlp_url);
    free(t);
}
