/*
 * audit.c — the routing audit log (contract in audit.h).
 *
 * A line is built with cJSON from codes, numbers, the policy's own names and
 * constant bucket labels; the request's class is written only when the
 * policy names it. The reader is strict: every member has one type and
 * range, unknown members are ignored only at the top level (the buckets,
 * which the reader does not need, may change), and a line that does not
 * give what el_route_decide reads is refused with the field named.
 */
#include "route/audit.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "route/telemetry.h"

struct el_audit {
    el_spool *spool;
    pthread_mutex_t mu;
    char fingerprint[64];
};

el_audit *el_audit_open(const char *path, long max_bytes, int keep, char *err, size_t cap) {
    el_audit *a = calloc(1, sizeof *a);
    if (!a) {
        if (err && cap) snprintf(err, cap, "out of memory");
        return NULL;
    }
    a->spool = el_spool_open(path, max_bytes > 0 ? max_bytes : 1L << 20, keep > 0 ? keep : 3, err, cap);
    if (!a->spool) {
        free(a);
        return NULL;
    }
    pthread_mutex_init(&a->mu, NULL);
    snprintf(a->fingerprint, sizeof a->fingerprint, "unknown");
    return a;
}

void el_audit_close(el_audit *a) {
    if (!a) return;
    el_spool_close(a->spool);
    pthread_mutex_destroy(&a->mu);
    free(a);
}

long el_audit_failed(el_audit *a) { return a ? el_spool_failed(a->spool) : 0; }

void el_audit_set_fingerprint(el_audit *a, const char *fp) {
    if (!a) return;
    char tmp[64];
    el_tev_ident(fp, tmp, sizeof tmp);
    pthread_mutex_lock(&a->mu);
    snprintf(a->fingerprint, sizeof a->fingerprint, "%s", fp && !strcmp(tmp, fp) ? fp : "invalid");
    pthread_mutex_unlock(&a->mu);
}

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Token-count buckets: powers of 4 from 64. */
static const char *tok_bucket(int n) {
    static const char *const L[] = {"<=64", "<=256", "<=1024", "<=4096", "<=16384", "<=65536", ">65536"};
    long ub = 64;
    for (int i = 0; i < 6; i++, ub *= 4)
        if (n <= ub) return L[i];
    return L[6];
}

static const char *battery_bucket(int pct) {
    static const char *const L[] = {"<=10%", "<=20%", "<=50%", "<=80%", "<=100%"};
    if (pct < 0) return "none";
    return pct <= 10 ? L[0] : pct <= 20 ? L[1] : pct <= 50 ? L[2] : pct <= 80 ? L[3] : L[4];
}

char *el_audit_line(const el_policy *p, const char *fingerprint, const el_route_req *x, const el_route_device *s,
                    const el_route *r, long long ts_ms) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddNumberToObject(o, "ts_ms", (double)ts_ms);
    cJSON_AddStringToObject(o, "fingerprint", fingerprint ? fingerprint : "unknown");
    cJSON_AddStringToObject(o, "policy_version", p->version);
    cJSON_AddStringToObject(o, "decision", el_route_source_name(r->source));
    const el_route_reason rc = el_route_reason_code(r->reason);
    cJSON_AddStringToObject(o, "reason", el_route_reason_name(rc));
    cJSON_AddNumberToObject(o, "status", r->source == EL_ROUTE_DECLINED ? r->status : 200);
    cJSON_AddBoolToObject(o, "cached", r->cached);
    cJSON_AddBoolToObject(o, "canary", r->canary);
    cJSON *q = cJSON_AddObjectToObject(o, "request");
    if (q) {
        const el_policy_class *k = x->data_class[0] && x->class_ok ? el_policy_find(p, x->data_class) : NULL;
        if (k) cJSON_AddStringToObject(q, "data_class", k->name);
        else cJSON_AddNullToObject(q, "data_class");
        cJSON_AddBoolToObject(q, "class_given", x->data_class[0] != 0);
        cJSON_AddBoolToObject(q, "class_known", k != NULL || !x->data_class[0]);
        cJSON_AddStringToObject(q, "class_source", !x->data_class[0] ? "default" : x->class_from_header ? "header" : "body");
        cJSON_AddBoolToObject(q, "consent", x->consent);
        cJSON_AddNumberToObject(q, "prompt_tokens", x->n_prompt);
        cJSON_AddStringToObject(q, "length_bucket", tok_bucket(x->n_prompt));
        cJSON_AddNumberToObject(q, "max_tokens", x->max_tokens);
        cJSON_AddStringToObject(q, "max_tokens_bucket", tok_bucket(x->max_tokens));
        cJSON_AddNumberToObject(q, "deadline_ms", x->deadline_ms);
        cJSON_AddStringToObject(q, "deadline_bucket", x->deadline_ms > 0 ? el_tev_time_bucket(x->deadline_ms) : "none");
        cJSON_AddBoolToObject(q, "cloud_capable", x->cloud_capable);
        cJSON_AddBoolToObject(q, "canary_capable", x->canary_capable);
    }
    cJSON *d = cJSON_AddObjectToObject(o, "device");
    if (d) {
        cJSON_AddBoolToObject(d, "model_verified", s->local_ready);
        cJSON_AddBoolToObject(d, "memory_pressure", s->mem_pressure);
        cJSON_AddStringToObject(d, "memory_headroom_bucket",
                                s->mem_avail_mib > 0 ? el_tev_mem_bucket((uint64_t)(s->mem_avail_mib * 1048576.0)) : "unknown");
        cJSON_AddStringToObject(d, "thermal", el_thermal_level_name(s->thermal));
        cJSON_AddNumberToObject(d, "thermal_factor", s->thermal_factor);
        cJSON_AddNumberToObject(d, "battery_percent", s->battery_pct);
        cJSON_AddStringToObject(d, "battery_bucket", battery_bucket(s->battery_pct));
        cJSON_AddBoolToObject(d, "discharging", s->discharging);
        cJSON_AddBoolToObject(d, "cloud_configured", s->cloud_configured);
        cJSON_AddBoolToObject(d, "cloud_reachable", s->cloud_up);
        cJSON_AddStringToObject(d, "cloud_rtt_bucket", s->cloud_rtt_ms > 0 ? el_tev_time_bucket(s->cloud_rtt_ms) : "none");
        cJSON_AddNumberToObject(d, "local_prefill_tps", s->local_pp_tps);
        cJSON_AddNumberToObject(d, "local_decode_tps", s->local_tg_tps);
    }
    char *line = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return line;
}

void el_audit_decision(el_audit *a, const el_policy *p, const el_route_req *x, const el_route_device *s,
                       const el_route *r) {
    if (!a) return;
    pthread_mutex_lock(&a->mu);
    char *line = el_audit_line(p, a->fingerprint, x, s, r, now_ms());
    if (line) el_spool_write(a->spool, line, strlen(line));
    pthread_mutex_unlock(&a->mu);
    free(line);
}

void el_audit_refusal(el_audit *a, const el_policy *p, const char *reason, int status) {
    if (!a) return;
    char line[512];
    pthread_mutex_lock(&a->mu);
    cJSON *o = cJSON_CreateObject();
    char *txt = NULL;
    if (o) {
        cJSON_AddNumberToObject(o, "ts_ms", (double)now_ms());
        cJSON_AddStringToObject(o, "fingerprint", a->fingerprint);
        cJSON_AddStringToObject(o, "policy_version", p->version);
        cJSON_AddStringToObject(o, "decision", "refused");
        cJSON_AddStringToObject(o, "reason", el_route_reason_name(el_route_reason_code(reason)));
        cJSON_AddNumberToObject(o, "status", status);
        txt = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
    }
    if (txt) {
        snprintf(line, sizeof line, "%s", txt);
        el_spool_write(a->spool, line, strlen(line));
    }
    pthread_mutex_unlock(&a->mu);
    free(txt);
}

void el_audit_gate(el_audit *a, const el_gate_audit_rec *r) {
    if (!a || !r) return;
    static const char *const KINDS[] = {"proposal", "transition", "handshake", "timeout"};
    pthread_mutex_lock(&a->mu);
    cJSON *o = cJSON_CreateObject();
    char *txt = NULL;
    if (o) {
        cJSON_AddNumberToObject(o, "ts_ms", (double)now_ms());
        cJSON_AddStringToObject(o, "fingerprint", a->fingerprint);
        cJSON_AddStringToObject(o, "source", "gate");
        cJSON_AddStringToObject(o, "kind", (unsigned)r->kind < 4 ? KINDS[r->kind] : "unknown");
        if (r->kind == EL_GA_PROPOSAL) {
            cJSON_AddStringToObject(o, "decision", r->reason == EL_GATE_OK ? "accepted" : "refused");
            cJSON_AddStringToObject(o, "reason", el_gate_reason_name(r->reason));
        }
        if (r->kind == EL_GA_TRANSITION) cJSON_AddStringToObject(o, "event", el_gate_ev_name(r->ev));
        cJSON_AddStringToObject(o, "device_id", r->device_id ? r->device_id : "");
        cJSON_AddStringToObject(o, "request_id", r->request_id ? r->request_id : "");
        cJSON_AddNumberToObject(o, "sequence", (double)r->sequence);
        cJSON_AddStringToObject(o, "action", r->action ? r->action : "");
        cJSON_AddStringToObject(o, "state", el_gate_state_name(r->from));
        cJSON_AddStringToObject(o, "state_after", el_gate_state_name(r->to));
        cJSON_AddNumberToObject(o, "gate_ms", (double)r->now_ms);
        txt = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
    }
    if (txt) el_spool_write(a->spool, txt, strlen(txt));
    pthread_mutex_unlock(&a->mu);
    free(txt);
}

/* ---- the reader ------------------------------------------------------------------ */

static int rfail(char *err, size_t cap, const char *what) {
    if (err && cap) snprintf(err, cap, "%s", what);
    return -1;
}

/* A member of o: absent -> 1 (kept default), right type -> 0, wrong -> -1. */
static int get_bool(const cJSON *o, const char *k, bool *v) {
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!m) return 1;
    if (!cJSON_IsBool(m)) return -1;
    *v = cJSON_IsTrue(m);
    return 0;
}

static int get_num(const cJSON *o, const char *k, double lo, double hi, double *v) {
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!m) return 1;
    if (!cJSON_IsNumber(m) || !isfinite(m->valuedouble) || m->valuedouble < lo || m->valuedouble > hi) return -1;
    *v = m->valuedouble;
    return 0;
}

static int parse_device_obj(const cJSON *d, el_route_device *s, bool all_required, char *err, size_t cap) {
    if (!cJSON_IsObject(d)) return rfail(err, cap, "\"device\" must be an object");
    static const char *const BOOLS[] = {"model_verified", "memory_pressure", "discharging", "cloud_configured",
                                        "cloud_reachable"};
    bool *bv[] = {&s->local_ready, &s->mem_pressure, &s->discharging, &s->cloud_configured, &s->cloud_up};
    char msg[120];
    for (int i = 0; i < 5; i++) {
        int rc = get_bool(d, BOOLS[i], bv[i]);
        if (rc < 0 || (rc > 0 && all_required)) {
            snprintf(msg, sizeof msg, "device.%s: %s", BOOLS[i], rc < 0 ? "must be true or false" : "missing");
            return rfail(err, cap, msg);
        }
    }
    const cJSON *th = cJSON_GetObjectItemCaseSensitive(d, "thermal");
    if (th) {
        if (!cJSON_IsString(th)) return rfail(err, cap, "device.thermal: must be \"normal\", \"derated\" or \"hot\"");
        if (!strcmp(th->valuestring, "normal")) s->thermal = EL_THERMAL_NORMAL;
        else if (!strcmp(th->valuestring, "derated")) s->thermal = EL_THERMAL_DERATED;
        else if (!strcmp(th->valuestring, "hot")) s->thermal = EL_THERMAL_HOT;
        else return rfail(err, cap, "device.thermal: must be \"normal\", \"derated\" or \"hot\"");
    } else if (all_required) return rfail(err, cap, "device.thermal: missing");
    static const char *const NUMS[] = {"thermal_factor", "battery_percent", "local_prefill_tps", "local_decode_tps"};
    static const double LO[] = {0, -1, 0, 0}, HI[] = {1, 100, 1e9, 1e9};
    double v[4] = {s->thermal_factor, s->battery_pct, s->local_pp_tps, s->local_tg_tps};
    for (int i = 0; i < 4; i++) {
        int rc = get_num(d, NUMS[i], LO[i], HI[i], &v[i]);
        if (rc < 0 || (rc > 0 && all_required)) {
            snprintf(msg, sizeof msg, "device.%s: %s", NUMS[i], rc < 0 ? "out of range or not a number" : "missing");
            return rfail(err, cap, msg);
        }
    }
    if (v[1] != floor(v[1])) return rfail(err, cap, "device.battery_percent: must be an integer (-1: no battery)");
    s->thermal_factor = v[0];
    s->battery_pct = (int)v[1];
    s->local_pp_tps = v[2];
    s->local_tg_tps = v[3];
    return 0;
}

void el_audit_default_device(el_route_device *s) {
    memset(s, 0, sizeof s[0]);
    s->local_ready = true;
    s->thermal = EL_THERMAL_NORMAL;
    s->thermal_factor = 1.0;
    s->battery_pct = -1;
    s->cloud_configured = true;
    s->cloud_up = true;
}

int el_audit_parse_device(const char *text, size_t len, el_route_device *out, char *err, size_t cap) {
    cJSON *root = cJSON_ParseWithLength(text, len);
    if (!root) return rfail(err, cap, "not JSON");
    el_route_device s;
    el_audit_default_device(&s);
    /* either the device object itself or an audit line / object holding "device" */
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(root, "device");
    int rc = parse_device_obj(d ? d : root, &s, false, err, cap);
    cJSON_Delete(root);
    if (!rc) *out = s;
    return rc;
}

int el_audit_parse(const char *line, size_t len, el_audit_rec *out, char *err, size_t cap) {
    cJSON *root = cJSON_ParseWithLength(line, len);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return rfail(err, cap, "not a JSON object");
    }
    const cJSON *src = cJSON_GetObjectItemCaseSensitive(root, "source");
    if (cJSON_IsString(src) && !strcmp(src->valuestring, "gate")) {
        cJSON_Delete(root);
        return rfail(err, cap, "a proposal-gate line (source \"gate\"), not a routing decision");
    }
    el_audit_rec r;
    memset(&r, 0, sizeof r);
    int rc = -1;
    char msg[160];
    const cJSON *pv = cJSON_GetObjectItemCaseSensitive(root, "policy_version");
    const cJSON *dec = cJSON_GetObjectItemCaseSensitive(root, "decision");
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(root, "reason");
    double status = 0;
    if (!cJSON_IsString(pv) || strlen(pv->valuestring) >= sizeof r.policy_version) {
        rfail(err, cap, "policy_version: missing or not a string of at most 127 bytes");
        goto out;
    }
    snprintf(r.policy_version, sizeof r.policy_version, "%s", pv->valuestring);
    if (!cJSON_IsString(dec)) {
        rfail(err, cap, "decision: missing or not a string");
        goto out;
    }
    if (!cJSON_IsString(rs) || strlen(rs->valuestring) >= sizeof r.reason) {
        rfail(err, cap, "reason: missing or not a short string");
        goto out;
    }
    snprintf(r.reason, sizeof r.reason, "%s", rs->valuestring);
    if (get_num(root, "status", 100, 599, &status) != 0) {
        rfail(err, cap, "status: missing or not an HTTP status");
        goto out;
    }
    r.status = (int)status;
    if (!strcmp(dec->valuestring, "refused")) {
        r.refusal = true;
        rc = 0;
        goto out;
    }
    if (!strcmp(dec->valuestring, "local")) r.source = EL_ROUTE_LOCAL;
    else if (!strcmp(dec->valuestring, "cloud")) r.source = EL_ROUTE_CLOUD;
    else if (!strcmp(dec->valuestring, "declined")) r.source = EL_ROUTE_DECLINED;
    else {
        rfail(err, cap, "decision: must be local, cloud, declined or refused");
        goto out;
    }
    if (get_bool(root, "cached", &r.cached) < 0) {
        rfail(err, cap, "cached: must be true or false");
        goto out;
    }
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(root, "request");
    if (!cJSON_IsObject(q)) {
        rfail(err, cap, "request: missing or not an object");
        goto out;
    }
    el_route_req *x = &r.x;
    const cJSON *dc = cJSON_GetObjectItemCaseSensitive(q, "data_class");
    bool given = false, known = false;
    if (get_bool(q, "class_given", &given) || get_bool(q, "class_known", &known)) {
        rfail(err, cap, "request.class_given / class_known: missing or not true/false");
        goto out;
    }
    x->class_ok = true;
    if (given) {
        if (known) {
            if (!cJSON_IsString(dc) || !el_policy_name_ok(dc->valuestring)) {
                rfail(err, cap, "request.data_class: must be a class name when class_known is true");
                goto out;
            }
            snprintf(x->data_class, sizeof x->data_class, "%s", dc->valuestring);
        } else { /* a name the policy lacked: replayed as one that no policy can hold */
            snprintf(x->data_class, sizeof x->data_class, "?");
            x->class_ok = false;
        }
    } else if (dc && !cJSON_IsNull(dc)) {
        rfail(err, cap, "request.data_class: must be null when class_given is false");
        goto out;
    }
    const cJSON *cs = cJSON_GetObjectItemCaseSensitive(q, "class_source");
    if (!cJSON_IsString(cs) || (strcmp(cs->valuestring, "body") && strcmp(cs->valuestring, "header") &&
                                strcmp(cs->valuestring, "default"))) {
        rfail(err, cap, "request.class_source: must be body, header or default");
        goto out;
    }
    x->class_from_header = !strcmp(cs->valuestring, "header");
    static const char *const QB[] = {"consent", "cloud_capable", "canary_capable"};
    bool *qb[] = {&x->consent, &x->cloud_capable, &x->canary_capable};
    for (int i = 0; i < 3; i++)
        if (get_bool(q, QB[i], qb[i])) {
            snprintf(msg, sizeof msg, "request.%s: missing or not true/false", QB[i]);
            rfail(err, cap, msg);
            goto out;
        }
    double np = 0, mt = 0, dl = 0;
    if (get_num(q, "prompt_tokens", 0, 1e9, &np) || np != floor(np) || get_num(q, "max_tokens", 0, 1e9, &mt) ||
        mt != floor(mt) || get_num(q, "deadline_ms", 0, 86400000.0, &dl)) {
        rfail(err, cap, "request.prompt_tokens / max_tokens / deadline_ms: missing or out of range");
        goto out;
    }
    x->n_prompt = (int)np;
    x->max_tokens = (int)mt;
    x->deadline_ms = dl;
    el_audit_default_device(&r.s);
    if (parse_device_obj(cJSON_GetObjectItemCaseSensitive(root, "device"), &r.s, true, err, cap)) goto out;
    rc = 0;
out:
    cJSON_Delete(root);
    if (!rc) *out = r;
    return rc;
}
