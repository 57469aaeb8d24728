/*
 * router.c — the edge–cloud router (contract in router.h).
 *
 * el_route_decide is a pure function of (request, device, policy): the one
 * place the decision table lives (README "Routing" prints it). The router
 * object wraps it with the state that several requests share, under one
 * mutex: cloud reachability (down until a time after a failure), the
 * cloud's last time to first byte, the local speeds as exponentially
 * weighted means of what generations measured, the decision cache (a small
 * direct-mapped table; an entry holds the decision for its key, and the key
 * includes every input the decision reads when there is no deadline, so a
 * hit gives exactly what a fresh decision would) and the counters.
 */
#include "route/router.h"

#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "util/file.h"

const char *el_route_source_name(el_route_source s) {
    return s == EL_ROUTE_CLOUD ? "cloud" : s == EL_ROUTE_DECLINED ? "declined" : "local";
}

/* ---- request metadata ---------------------------------------------------- */

static int meta_fail(char *err, size_t cap, const char *msg) {
    if (err && cap) snprintf(err, cap, "%s", msg);
    return -1;
}

static void set_class(el_route_req *o, const char *name) {
    o->class_ok = el_policy_name_ok(name);
    snprintf(o->data_class, sizeof o->data_class, "%s", o->class_ok ? name : "");
    if (!o->class_ok) snprintf(o->data_class, sizeof o->data_class, "?");
}

int el_route_parse_meta(const char *body, size_t len, const char *hdr_class, el_route_req *out, char *err, size_t cap) {
    el_route_req o;
    memset(&o, 0, sizeof o);
    o.class_ok = true;
    char body_class[EL_POLICY_NAME_MAX + 1] = "";
    bool have_body_class = false, body_class_ok = true;
    cJSON *root = body && len ? cJSON_ParseWithLength(body, len) : NULL;
    const cJSON *m = root ? cJSON_GetObjectItemCaseSensitive(root, "edgellm") : NULL;
    if (m && !cJSON_IsNull(m)) {
        if (!cJSON_IsObject(m)) {
            cJSON_Delete(root);
            return meta_fail(err, cap, "\"edgellm\" must be an object: {\"data_class\": ..., \"consent\": ..., \"deadline_ms\": ...}");
        }
        for (const cJSON *c = m->child; c; c = c->next) {
            if (strcmp(c->string, "data_class") && strcmp(c->string, "consent") && strcmp(c->string, "deadline_ms")) {
                cJSON_Delete(root);
                return meta_fail(err, cap, "\"edgellm\": unknown key (expected data_class, consent, deadline_ms)");
            }
            for (const cJSON *d = c->next; d; d = d->next)
                if (!strcmp(c->string, d->string)) {
                    cJSON_Delete(root);
                    return meta_fail(err, cap, "\"edgellm\": duplicate key");
                }
        }
        const cJSON *dc = cJSON_GetObjectItemCaseSensitive(m, "data_class");
        if (dc && !cJSON_IsNull(dc)) {
            if (!cJSON_IsString(dc) || !dc->valuestring) {
                cJSON_Delete(root);
                return meta_fail(err, cap, "\"edgellm.data_class\" must be a string");
            }
            have_body_class = true;
            body_class_ok = el_policy_name_ok(dc->valuestring);
            snprintf(body_class, sizeof body_class, "%s", body_class_ok ? dc->valuestring : "?");
        }
        const cJSON *cs = cJSON_GetObjectItemCaseSensitive(m, "consent");
        if (cs && !cJSON_IsNull(cs)) {
            if (!cJSON_IsBool(cs)) {
                cJSON_Delete(root);
                return meta_fail(err, cap, "\"edgellm.consent\" must be true or false");
            }
            o.consent = cJSON_IsTrue(cs);
        }
        const cJSON *dl = cJSON_GetObjectItemCaseSensitive(m, "deadline_ms");
        if (dl && !cJSON_IsNull(dl)) {
            if (!cJSON_IsNumber(dl) || !isfinite(dl->valuedouble) || dl->valuedouble <= 0 || dl->valuedouble > 86400000.0) {
                cJSON_Delete(root);
                return meta_fail(err, cap, "\"edgellm.deadline_ms\" must be a number of milliseconds in (0, 86400000]");
            }
            o.deadline_ms = dl->valuedouble;
        }
    }
    cJSON_Delete(root);
    if (hdr_class) {
        if (have_body_class && (!body_class_ok || !el_policy_name_ok(hdr_class) || strcmp(hdr_class, body_class)))
            return meta_fail(err, cap, "the X-Data-Class header and \"edgellm.data_class\" name different classes");
        set_class(&o, hdr_class);
        o.class_from_header = true;
    } else if (have_body_class) {
        o.class_ok = body_class_ok;
        snprintf(o.data_class, sizeof o.data_class, "%s", body_class);
    }
    *out = o;
    return 0;
}

/* ---- the decision ---------------------------------------------------------- */

static void route_init(el_route *r, const el_policy *p) {
    memset(r, 0, sizeof *r);
    snprintf(r->policy_version, sizeof r->policy_version, "%s", p->version);
    r->class_source = "default";
}

static void declined(el_route *r, const char *reason, int status, int retry, const char *advice) {
    r->source = EL_ROUTE_DECLINED;
    snprintf(r->reason, sizeof r->reason, "%s", reason);
    r->status = status;
    r->retry_after_s = retry;
    snprintf(r->advice, sizeof r->advice, "%s", advice);
}

static void go(el_route *r, el_route_source src, const char *reason) {
    r->source = src;
    snprintf(r->reason, sizeof r->reason, "%s", reason);
}

/* The local estimate in ms, or 0 when no speed has been measured. */
static double estimate_ms(const el_route_req *x, const el_route_device *s) {
    if (s->local_tg_tps <= 0) return 0;
    double f = s->thermal_factor > 0 ? s->thermal_factor : 0.01;
    double pp = s->local_pp_tps > 0 ? (double)x->n_prompt / s->local_pp_tps : 0;
    return 1000.0 * (pp + (double)(x->max_tokens > 0 ? x->max_tokens : 1) / (s->local_tg_tps * f));
}

void el_route_decide(const el_policy *p, const el_route_req *x, const el_route_device *s, el_route *r) {
    route_init(r, p);
    const el_policy_class *k = NULL;
    if (x->data_class[0]) {
        r->class_source = x->class_from_header ? "header" : "body";
        snprintf(r->data_class, sizeof r->data_class, "%s", x->data_class);
        k = x->class_ok ? el_policy_find(p, x->data_class) : NULL;
        if (!k) {
            char names[400] = "";
            for (int i = 0; i < p->n_classes; i++) {
                strncat(names, i ? ", " : "", sizeof names - strlen(names) - 1);
                strncat(names, p->classes[i].name, sizeof names - strlen(names) - 1);
            }
            snprintf(r->detail, sizeof r->detail, "data class '%s' is not in policy %s: the request stays unrun",
                     x->class_ok ? x->data_class : "(malformed)", p->version);
            char adv[200];
            snprintf(adv, sizeof adv, "send one of the policy's classes: %.150s", names);
            declined(r, "unknown_data_class", 400, 0, adv);
            return;
        }
    } else {
        k = el_policy_strictest(p);
        snprintf(r->data_class, sizeof r->data_class, "%s", k->name);
    }

    /* what may go to the cloud, and why not */
    bool allowed = k->cloud == EL_CLOUD_ALLOWED || (k->cloud == EL_CLOUD_WITH_CONSENT && x->consent);
    const char *why_not_cloud = NULL;
    char wn[160];
    if (k->cloud == EL_CLOUD_NEVER) {
        snprintf(wn, sizeof wn, "data class '%s' is local-only", k->name);
        why_not_cloud = wn;
    } else if (!allowed) {
        snprintf(wn, sizeof wn, "data class '%s' goes to the cloud only with consent", k->name);
        why_not_cloud = wn;
    } else if (!x->cloud_capable) {
        snprintf(wn, sizeof wn, "this endpoint has no cloud counterpart");
        why_not_cloud = wn;
    } else if (!s->cloud_configured) {
        snprintf(wn, sizeof wn, "no cloud is configured");
        why_not_cloud = wn;
    } else if (!s->cloud_up) {
        snprintf(wn, sizeof wn, "the cloud is unreachable (a recent call failed)");
        why_not_cloud = wn;
    }
    const bool cloud_ok = why_not_cloud == NULL;
    r->cloud_eligible = cloud_ok;
    if (cloud_ok) snprintf(r->legal_basis, sizeof r->legal_basis, "%s", k->legal_basis);

    /* can local run it? */
    const char *block = NULL, *advice = NULL;
    char bd[200];
    int status = 503, retry = 0;
    if (!s->local_ready) {
        block = "model_unavailable";
        snprintf(bd, sizeof bd, "the local model is not available (%.150s)", s->local_why[0] ? s->local_why : "not loaded");
        advice = "install or repair the model (edgellm install), or send a data class the policy lets go to the cloud";
    } else if (s->thermal == EL_THERMAL_HOT) {
        block = "thermal_hot";
        snprintf(bd, sizeof bd, "the device is too hot to generate locally");
        advice = "retry later, when the device has cooled down";
        retry = 30;
    } else if (s->mem_pressure) {
        block = "memory_pressure";
        snprintf(bd, sizeof bd, "memory pressure (%.180s)", s->mem_why);
        advice = "retry later, or close other apps to free memory";
        retry = 5;
    } else if (p->battery_min_percent > 0 && s->battery_pct >= 0 && s->discharging &&
               s->battery_pct < p->battery_min_percent) {
        block = "battery_low";
        snprintf(bd, sizeof bd, "battery at %d%% (policy minimum %d%%) and discharging", s->battery_pct,
                 p->battery_min_percent);
        advice = "connect the charger and retry, or change the battery setting in the policy";
        retry = 60;
    }
    if (block) {
        if (cloud_ok) {
            go(r, EL_ROUTE_CLOUD, block);
            snprintf(r->detail, sizeof r->detail, "%.180s; data class '%.40s' may use the cloud (%.40s)", bd, k->name,
                     k->legal_basis);
            return;
        }
        snprintf(r->detail, sizeof r->detail, "%.150s, and %.140s", bd, why_not_cloud);
        char adv[200];
        if (k->cloud == EL_CLOUD_WITH_CONSENT && !x->consent)
            snprintf(adv, sizeof adv, "%.100s; or send \"edgellm\": {\"consent\": true} to allow the cloud", advice);
        else snprintf(adv, sizeof adv, "%s", advice);
        declined(r, block, status, retry, adv);
        return;
    }

    /* both can run it: prefer, then deadline */
    r->est_local_ms = estimate_ms(x, s);
    if (cloud_ok && p->prefer_cloud) {
        go(r, EL_ROUTE_CLOUD, "policy_prefers_cloud");
        snprintf(r->detail, sizeof r->detail, "policy %.80s prefers the cloud for data class '%.63s' (%.80s)", p->version,
                 k->name, k->legal_basis);
        return;
    }
    if (cloud_ok && x->deadline_ms > 0 && r->est_local_ms > x->deadline_ms) {
        go(r, EL_ROUTE_CLOUD, "deadline");
        snprintf(r->detail, sizeof r->detail,
                 "local estimate %.0f ms (%.1f t/s decode x thermal factor %.2f) exceeds the deadline of %g ms",
                 r->est_local_ms, s->local_tg_tps, s->thermal_factor, x->deadline_ms);
        return;
    }
    if (k->cloud == EL_CLOUD_NEVER) {
        go(r, EL_ROUTE_LOCAL, "local_only_class");
        snprintf(r->detail, sizeof r->detail, "data class '%.63s' is local-only", k->name);
    } else {
        go(r, EL_ROUTE_LOCAL, "local_preferred");
        snprintf(r->detail, sizeof r->detail, "the local model can run it");
    }
    if (x->deadline_ms > 0 && r->est_local_ms > x->deadline_ms)
        snprintf(r->detail, sizeof r->detail, "local estimate %.0f ms exceeds the deadline of %g ms, but %.150s",
                 r->est_local_ms, x->deadline_ms, why_not_cloud ? why_not_cloud : "the cloud may not take it");
    else if (x->deadline_ms > 0 && r->est_local_ms > 0)
        snprintf(r->detail, sizeof r->detail, "local estimate %.0f ms is within the deadline of %g ms",
                 r->est_local_ms, x->deadline_ms);
}

/* ---- JSON and header ------------------------------------------------------- */

static cJSON *route_cjson(const el_route *r) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddStringToObject(o, "source", el_route_source_name(r->source));
    cJSON_AddStringToObject(o, "reason", r->reason);
    cJSON_AddStringToObject(o, "detail", r->detail);
    cJSON_AddStringToObject(o, "policy_version", r->policy_version);
    cJSON_AddStringToObject(o, "data_class", r->data_class);
    cJSON_AddStringToObject(o, "class_source", r->class_source ? r->class_source : "default");
    if (r->legal_basis[0] && r->source == EL_ROUTE_CLOUD) cJSON_AddStringToObject(o, "legal_basis", r->legal_basis);
    if (r->source == EL_ROUTE_DECLINED) cJSON_AddStringToObject(o, "advice", r->advice);
    if (r->est_local_ms > 0) cJSON_AddNumberToObject(o, "estimate_ms", round(r->est_local_ms));
    cJSON_AddBoolToObject(o, "cached", r->cached);
    if (r->canary) { /* the request also went to the cloud, to compare: the client is told */
        cJSON_AddBoolToObject(o, "canary", true);
        cJSON_AddStringToObject(o, "legal_basis", r->legal_basis);
    }
    return o;
}

char *el_route_json(const el_route *r) {
    cJSON *o = route_cjson(r);
    char *s = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return s;
}

void el_route_header(const el_route *r, char *out, size_t cap) {
    snprintf(out, cap, "source=%s; reason=%s; policy=%s; class=%s", el_route_source_name(r->source), r->reason,
             r->policy_version, r->data_class);
}

char *el_route_inject(char *json, const el_route *r) {
    if (!json) return NULL;
    char *rj = el_route_json(r);
    const char *brace = strchr(json, '{');
    if (!rj || !brace) {
        free(rj);
        return json; /* not an object: left as it is */
    }
    const char *after = brace + 1;
    while (*after == ' ' || *after == '\n' || *after == '\t' || *after == '\r') after++;
    const bool empty = *after == '}';
    size_t pre = (size_t)(brace + 1 - json), rl = strlen(rj), tl = strlen(brace + 1);
    size_t n = pre + 20 + rl + 2 + tl + 1;
    char *out = malloc(n);
    if (out) snprintf(out, n, "%.*s\"edgellm\":{\"route\":%s}%s%s", (int)pre, json, rj, empty ? "" : ",", brace + 1);
    free(rj);
    free(json);
    return out;
}

char *el_route_decline_json(const el_route *r) {
    cJSON *o = cJSON_CreateObject(), *e = cJSON_CreateObject(), *ed = cJSON_CreateObject();
    cJSON *rt = route_cjson(r);
    if (!o || !e || !ed || !rt) {
        cJSON_Delete(o);
        cJSON_Delete(e);
        cJSON_Delete(ed);
        cJSON_Delete(rt);
        return NULL;
    }
    char msg[600];
    snprintf(msg, sizeof msg, "declined: %s. What you can do: %s", r->detail, r->advice);
    cJSON_AddStringToObject(e, "message", msg);
    cJSON_AddStringToObject(e, "type", "route_declined");
    cJSON_AddStringToObject(e, "code", r->reason);
    cJSON_AddNullToObject(e, "param");
    cJSON_AddItemToObject(o, "error", e);
    cJSON_AddItemToObject(ed, "route", rt);
    cJSON_AddItemToObject(o, "edgellm", ed);
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

/* ---- battery ----------------------------------------------------------------- */

/* A small sysfs file's text without its trailing newline / spaces. */
static int read_line(const char *path, char *buf, size_t cap) {
    int n = el_read_small(path, buf, cap);
    if (n < 0) return -1;
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' ')) buf[--n] = 0;
    return (int)n;
}

bool el_battery_read(const char *root, int *pct, bool *discharging) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/class/power_supply", root ? root : "/sys");
    DIR *d = opendir(dir);
    if (!d) return false;
    bool found = false;
    struct dirent *e;
    while (!found && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[800], buf[64];
        snprintf(path, sizeof path, "%s/%s/type", dir, e->d_name);
        if (read_line(path, buf, sizeof buf) < 0 || strcmp(buf, "Battery")) continue;
        snprintf(path, sizeof path, "%s/%s/capacity", dir, e->d_name);
        if (read_line(path, buf, sizeof buf) <= 0) continue;
        char *end;
        long v = strtol(buf, &end, 10);
        if (*end || v < 0 || v > 100) continue;
        *pct = (int)v;
        snprintf(path, sizeof path, "%s/%s/status", dir, e->d_name);
        *discharging = read_line(path, buf, sizeof buf) > 0 && !strcmp(buf, "Discharging");
        found = true;
    }
    closedir(d);
    return found;
}

/* ---- the shared router ------------------------------------------------------- */

#define CACHE_N 64
#define N_REASONS 16

typedef struct cache_ent {
    bool used;
    unsigned key;
    el_route r;
} cache_ent;

struct el_router {
    el_policy p;
    bool cloud_configured;
    pthread_mutex_t mu;
    double cloud_down_until; /* monotonic seconds */
    double cloud_rtt_ms;
    long cloud_ok, cloud_fail;
    double pp_tps, tg_tps;   /* EWMA of measured speeds (0: none) */
    long n_speed;
    cache_ent cache[CACHE_N];
    long cache_hits, cache_misses;
    char reasons[N_REASONS][48];
    el_route_source reason_src[N_REASONS];
    long reason_n[N_REASONS];
    int n_reasons;
    /* canary */
    pthread_cond_t canary_cv;
    int canary_active;
    bool canary_draining;
    unsigned long long rng;
    long canary_started, canary_compared, canary_agreed, canary_cloud_failed;
    double canary_local_ms, canary_cloud_ms; /* sums over the compared ones */
};

static double mono_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

el_router *el_router_new(const el_policy *p, bool cloud_configured) {
    el_router *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->p = *p;
    r->cloud_configured = cloud_configured;
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->canary_cv, NULL);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    r->rng = ((unsigned long long)ts.tv_nsec << 20) ^ (unsigned long long)ts.tv_sec ^ (unsigned long long)(uintptr_t)r;
    if (!r->rng) r->rng = 88172645463325252ull;
    return r;
}

void el_router_free(el_router *r) {
    if (!r) return;
    el_router_canary_drain(r);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->canary_cv);
    free(r);
}

const el_policy *el_router_policy(const el_router *r) { return &r->p; }

void el_router_device(el_router *r, el_route_device *s) {
    pthread_mutex_lock(&r->mu);
    s->cloud_configured = r->cloud_configured;
    s->cloud_up = r->cloud_configured && mono_s() >= r->cloud_down_until;
    s->local_pp_tps = r->pp_tps;
    s->local_tg_tps = r->tg_tps;
    s->cloud_rtt_ms = r->cloud_rtt_ms;
    pthread_mutex_unlock(&r->mu);
}

static int len_bucket(int n) {
    int b = 0;
    while (n > 64 && b < 7) {
        n >>= 2;
        b++;
    }
    return b;
}

/* FNV-1a over the key's parts. */
static unsigned cache_key(const el_route_req *x, const el_route_device *s) {
    char k[256];
    int n = snprintf(k, sizeof k, "%d|%d|%d|%d|%d|%d|%d|%s|%d|%d|%d|%d|%d", s->local_ready, (int)s->thermal,
                     s->mem_pressure, s->battery_pct, s->discharging, x->cloud_capable, x->class_ok, x->data_class,
                     x->class_from_header, x->consent, len_bucket(x->n_prompt), s->cloud_configured, s->cloud_up);
    unsigned h = 2166136261u;
    for (int i = 0; i < n && i < (int)sizeof k; i++) h = (h ^ (unsigned char)k[i]) * 16777619u;
    return h;
}

static void count_locked(el_router *r, const el_route *d) {
    for (int i = 0; i < r->n_reasons; i++)
        if (r->reason_src[i] == d->source && !strcmp(r->reasons[i], d->reason)) {
            r->reason_n[i]++;
            return;
        }
    if (r->n_reasons < N_REASONS) {
        int i = r->n_reasons++;
        snprintf(r->reasons[i], sizeof r->reasons[i], "%s", d->reason);
        r->reason_src[i] = d->source;
        r->reason_n[i] = 1;
    }
}

/* The canary draw (after the decision: a cached decision is drawn afresh). */
static void maybe_canary(el_router *r, const el_route_req *x, el_route *out) {
    out->canary = false;
    if (out->source != EL_ROUTE_LOCAL || !out->cloud_eligible || !x->canary_capable || r->p.canary_ratio <= 0) return;
    pthread_mutex_lock(&r->mu);
    r->rng ^= r->rng << 13; /* xorshift64 */
    r->rng ^= r->rng >> 7;
    r->rng ^= r->rng << 17;
    const double u = (double)(r->rng >> 11) / 9007199254740992.0;
    pthread_mutex_unlock(&r->mu);
    out->canary = u < r->p.canary_ratio;
}

bool el_router_canary_begin(el_router *r) {
    pthread_mutex_lock(&r->mu);
    bool ok = !r->canary_draining;
    if (ok) {
        r->canary_active++;
        r->canary_started++;
    }
    pthread_mutex_unlock(&r->mu);
    return ok;
}

void el_router_canary_end(el_router *r) {
    pthread_mutex_lock(&r->mu);
    r->canary_active--;
    pthread_cond_broadcast(&r->canary_cv);
    pthread_mutex_unlock(&r->mu);
}

void el_router_canary_record(el_router *r, bool cloud_ok, bool agree, double local_ms, double cloud_ms) {
    pthread_mutex_lock(&r->mu);
    if (!cloud_ok) {
        r->canary_cloud_failed++;
    } else {
        r->canary_compared++;
        if (agree) r->canary_agreed++;
        r->canary_local_ms += local_ms;
        r->canary_cloud_ms += cloud_ms;
    }
    pthread_mutex_unlock(&r->mu);
}

void el_router_canary_drain(el_router *r) {
    pthread_mutex_lock(&r->mu);
    r->canary_draining = true;
    while (r->canary_active > 0) pthread_cond_wait(&r->canary_cv, &r->mu);
    pthread_mutex_unlock(&r->mu);
}

void el_router_decide(el_router *r, const el_route_req *x, const el_route_device *s, el_route *out) {
    /* without a deadline the decision reads only what the key holds (the
     * local estimate is reported, not used): a cached one is exact */
    const bool cacheable = x->deadline_ms <= 0 && !s->local_why[0] && !s->mem_why[0];
    unsigned key = cacheable ? cache_key(x, s) : 0;
    pthread_mutex_lock(&r->mu);
    cache_ent *e = &r->cache[key % CACHE_N];
    if (cacheable && e->used && e->key == key) {
        *out = e->r;
        out->cached = true;
        r->cache_hits++;
        count_locked(r, out);
        pthread_mutex_unlock(&r->mu);
        maybe_canary(r, x, out);
        return;
    }
    pthread_mutex_unlock(&r->mu);
    el_route_decide(&r->p, x, s, out);
    out->est_local_ms = cacheable ? 0 : out->est_local_ms;
    pthread_mutex_lock(&r->mu);
    if (cacheable) {
        r->cache_misses++;
        e->used = true;
        e->key = key;
        e->r = *out;
    }
    count_locked(r, out);
    pthread_mutex_unlock(&r->mu);
    maybe_canary(r, x, out);
}

void el_router_cloud_result(el_router *r, bool ok, double rtt_ms) {
    pthread_mutex_lock(&r->mu);
    if (ok) {
        r->cloud_ok++;
        r->cloud_rtt_ms = rtt_ms;
        r->cloud_down_until = 0;
    } else {
        r->cloud_fail++;
        r->cloud_down_until = mono_s() + r->p.cloud_down_s;
    }
    pthread_mutex_unlock(&r->mu);
}

void el_router_local_speed(el_router *r, int n_prompt, double prefill_ms, int n_gen, double decode_ms) {
    pthread_mutex_lock(&r->mu);
    const double a = 0.3;
    if (n_prompt > 0 && prefill_ms > 0) {
        double v = n_prompt / (prefill_ms / 1000.0);
        r->pp_tps = r->pp_tps > 0 ? (1 - a) * r->pp_tps + a * v : v;
    }
    if (n_gen > 1 && decode_ms > 0) {
        double v = (n_gen - 1) / (decode_ms / 1000.0);
        r->tg_tps = r->tg_tps > 0 ? (1 - a) * r->tg_tps + a * v : v;
        r->n_speed++;
    }
    pthread_mutex_unlock(&r->mu);
}

char *el_router_health_json(el_router *r) {
    pthread_mutex_lock(&r->mu);
    cJSON *o = cJSON_CreateObject();
    if (o) {
        cJSON_AddStringToObject(o, "policy_version", r->p.version);
        cJSON *c = cJSON_AddObjectToObject(o, "cloud");
        if (c) {
            cJSON_AddBoolToObject(c, "configured", r->cloud_configured);
            cJSON_AddBoolToObject(c, "up", r->cloud_configured && mono_s() >= r->cloud_down_until);
            cJSON_AddNumberToObject(c, "rtt_ms", round(r->cloud_rtt_ms * 10) / 10);
            cJSON_AddNumberToObject(c, "calls_ok", (double)r->cloud_ok);
            cJSON_AddNumberToObject(c, "calls_failed", (double)r->cloud_fail);
        }
        cJSON *l = cJSON_AddObjectToObject(o, "local_speed");
        if (l) {
            cJSON_AddNumberToObject(l, "prefill_tps", round(r->pp_tps * 10) / 10);
            cJSON_AddNumberToObject(l, "decode_tps", round(r->tg_tps * 10) / 10);
        }
        cJSON *k = cJSON_AddObjectToObject(o, "cache");
        if (k) {
            cJSON_AddNumberToObject(k, "hits", (double)r->cache_hits);
            cJSON_AddNumberToObject(k, "misses", (double)r->cache_misses);
        }
        cJSON *cn = cJSON_AddObjectToObject(o, "canary");
        if (cn) {
            cJSON_AddNumberToObject(cn, "ratio", r->p.canary_ratio);
            cJSON_AddNumberToObject(cn, "started", (double)r->canary_started);
            cJSON_AddNumberToObject(cn, "compared", (double)r->canary_compared);
            cJSON_AddNumberToObject(cn, "agreed", (double)r->canary_agreed);
            cJSON_AddNumberToObject(cn, "cloud_failed", (double)r->canary_cloud_failed);
            const double n = r->canary_compared ? (double)r->canary_compared : 1;
            cJSON_AddNumberToObject(cn, "mean_local_ms", round(r->canary_local_ms / n * 10) / 10);
            cJSON_AddNumberToObject(cn, "mean_cloud_ms", round(r->canary_cloud_ms / n * 10) / 10);
        }
    }
    pthread_mutex_unlock(&r->mu);
    char *s = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return s;
}

char *el_router_metrics(el_router *r) {
    size_t cap = 8192;
    char *b = malloc(cap);
    if (!b) return NULL;
    pthread_mutex_lock(&r->mu);
    size_t n = 0;
    n += (size_t)snprintf(b + n, cap - n,
                          "# HELP edgellm_route_decisions_total Routing decisions by source and reason.\n"
                          "# TYPE edgellm_route_decisions_total counter\n");
    for (int i = 0; i < r->n_reasons && n < cap; i++)
        n += (size_t)snprintf(b + n, cap - n, "edgellm_route_decisions_total{source=\"%s\",reason=\"%s\"} %ld\n",
                              el_route_source_name(r->reason_src[i]), r->reasons[i], r->reason_n[i]);
    if (n < cap)
        n += (size_t)snprintf(b + n, cap - n,
                              "# HELP edgellm_route_cache_hits_total Decisions answered from the decision cache.\n"
                              "# TYPE edgellm_route_cache_hits_total counter\nedgellm_route_cache_hits_total %ld\n"
                              "# HELP edgellm_route_cloud_up Whether the cloud is configured and not marked down.\n"
                              "# TYPE edgellm_route_cloud_up gauge\nedgellm_route_cloud_up %d\n"
                              "# HELP edgellm_route_cloud_rtt_ms Time to the first byte of the last cloud answer.\n"
                              "# TYPE edgellm_route_cloud_rtt_ms gauge\nedgellm_route_cloud_rtt_ms %.1f\n"
                              "# HELP edgellm_route_local_decode_tps Measured local decode speed (EWMA).\n"
                              "# TYPE edgellm_route_local_decode_tps gauge\nedgellm_route_local_decode_tps %.2f\n"
                              "# HELP edgellm_route_canary_total Canary requests (local, also run in the cloud) by outcome.\n"
                              "# TYPE edgellm_route_canary_total counter\n"
                              "edgellm_route_canary_total{outcome=\"agreed\"} %ld\n"
                              "edgellm_route_canary_total{outcome=\"differed\"} %ld\n"
                              "edgellm_route_canary_total{outcome=\"cloud_failed\"} %ld\n"
                              "# HELP edgellm_route_canary_latency_ms_sum Summed latency of compared canaries, per side.\n"
                              "# TYPE edgellm_route_canary_latency_ms_sum counter\n"
                              "edgellm_route_canary_latency_ms_sum{side=\"local\"} %.1f\n"
                              "edgellm_route_canary_latency_ms_sum{side=\"cloud\"} %.1f\n",
                              r->cache_hits, r->cloud_configured && mono_s() >= r->cloud_down_until,
                              r->cloud_rtt_ms, r->tg_tps, r->canary_agreed, r->canary_compared - r->canary_agreed,
                              r->canary_cloud_failed, r->canary_local_ms, r->canary_cloud_ms);
    pthread_mutex_unlock(&r->mu);
    if (n >= cap) b[cap - 1] = 0;
    return b;
}
