/*
 * fleet_replay.c — `edgellm fleet replay LOG`: re-derives a rollout's
 * decisions from its log (fleet.h states the contract). The log is outside
 * bytes: every line is checked (strict JSON object, "seq" counting from 1,
 * a known "event" with its members typed) and a malformed one is refused
 * with its line number and member, before it is used.
 *
 * What is re-derived, not trusted: each stage's size from the logged stage
 * list and device count; each gate's verdicts and decision from its logged
 * observation and the logged gates (fleet_config.c's el_fleet_gates_eval);
 * which devices took the package (an install whose version_after is the new
 * version); after a halt, that exactly those devices were rolled back, each
 * to the base version; the outcome and every device's final version.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "fleet/fleet.h"
#include "util/textfile.h"

typedef struct rp {
    const char *label;
    int line;
    char *msg;
    size_t cap;
} rp;

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static int bad(rp *r, int code, const char *fmt, ...) {
    int n = snprintf(r->msg, r->cap, "%s:%d: ", r->label, r->line);
    if (n < 0 || (size_t)n >= r->cap) n = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->msg + n, r->cap - (size_t)n, fmt, ap);
    va_end(ap);
    return code;
}

static bool num(const cJSON *o, const char *k, double lo, double hi, double *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < lo || v->valuedouble > hi) return false;
    *out = v->valuedouble;
    return true;
}

static bool integer(const cJSON *o, const char *k, double lo, double hi, int64_t *out) {
    double d;
    if (!num(o, k, lo, hi, &d) || d != floor(d)) return false;
    *out = (int64_t)d;
    return true;
}

#define NEED_INT(obj, key, lo, hi, dst)                                                                      \
    do {                                                                                                     \
        if (!integer(obj, key, lo, hi, &(dst))) return bad(r, -1, "%s: expected an integer %g..%g", key,     \
                                                           (double)(lo), (double)(hi));                      \
    } while (0)

typedef struct replay_state {
    bool started, ended, halted;
    int64_t n, base, newv;
    int stages[EL_FLEET_MAX_STAGES], n_stages;
    el_fleet_gates gates;
    int64_t cur_stage;   /* the stage last announced, -1 before any */
    bool gated;          /* its gate line seen */
    bool took[EL_FLEET_MAX_DEVICES], rolled[EL_FLEET_MAX_DEVICES];
    int decisions;
} replay_state;

static int on_start(rp *r, replay_state *s, const cJSON *o) {
    if (s->started) return bad(r, -1, "a second start line");
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, "format");
    if (!cJSON_IsString(f) || strcmp(f->valuestring, "edgellm-rollout/1"))
        return bad(r, -1, "format: expected \"edgellm-rollout/1\"");
    NEED_INT(o, "n_devices", 1, EL_FLEET_MAX_DEVICES, s->n);
    NEED_INT(o, "base_version", 0, 9007199254740992.0, s->base);
    NEED_INT(o, "new_version", 0, 9007199254740992.0, s->newv);
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(o, "stages");
    if (!cJSON_IsArray(st) || cJSON_GetArraySize(st) < 1 || cJSON_GetArraySize(st) > EL_FLEET_MAX_STAGES)
        return bad(r, -1, "stages: expected 1..%d percentages", EL_FLEET_MAX_STAGES);
    for (const cJSON *it = st->child; it; it = it->next) {
        const int i = s->n_stages;
        if (!cJSON_IsNumber(it) || it->valuedouble != floor(it->valuedouble) || it->valuedouble < 1 ||
            it->valuedouble > 100 || (i && it->valuedouble <= s->stages[i - 1]))
            return bad(r, -1, "stages[%d]: expected an increasing integer percentage 1..100", i);
        s->stages[s->n_stages++] = (int)it->valuedouble;
    }
    if (s->stages[s->n_stages - 1] != 100) return bad(r, -1, "stages: the last stage must be 100");
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(o, "gates");
    char *gt = cJSON_IsObject(g) ? cJSON_PrintUnformatted(g) : NULL;
    if (!gt) return bad(r, -1, "gates: expected an object");
    char label[96], gm[400];
    snprintf(label, sizeof label, "%s:%d: gates", r->label, r->line);
    const int rc = el_fleet_gates_parse(gt, strlen(gt), label, &s->gates, gm, sizeof gm);
    free(gt);
    if (rc) {
        snprintf(r->msg, r->cap, "%s", gm);
        return -1;
    }
    s->started = true;
    s->cur_stage = -1;
    s->gated = true;
    return 0;
}

static int on_device_index(rp *r, const replay_state *s, const cJSON *o, int64_t *d) {
    NEED_INT(o, "device", 0, (double)(s->n - 1), *d);
    return 0;
}

static int on_gate(rp *r, replay_state *s, const cJSON *o, FILE *out) {
    int64_t stage, devices;
    NEED_INT(o, "stage", 0, EL_FLEET_MAX_STAGES - 1, stage);
    if (stage != s->cur_stage || s->gated) return bad(r, -1, "stage: a gate for stage %lld without its stage line",
                                                      (long long)stage);
    NEED_INT(o, "devices", 1, EL_FLEET_MAX_DEVICES, devices);
    const int want = el_fleet_stage_target(s->stages, (int)stage, (int)s->n);
    if (devices != want)
        return bad(r, 1, "stage %lld covers %lld devices; %d of %lld at %d%% is %d", (long long)stage,
                   (long long)devices, s->stages[stage], (long long)s->n, s->stages[stage], want);
    const cJSON *ob = cJSON_GetObjectItemCaseSensitive(o, "observed");
    if (!cJSON_IsObject(ob)) return bad(r, -1, "observed: expected an object");
    el_fleet_obs x;
    int64_t inst;
    if (!num(ob, "crash_free_rate", 0, 1, &x.crash_free_rate)) return bad(r, -1, "observed.crash_free_rate: expected 0..1");
    if (!num(ob, "p95_ttft_ms", 0, 1e9, &x.p95_ttft_ms)) return bad(r, -1, "observed.p95_ttft_ms: expected a number >= 0");
    if (!num(ob, "refusal_rate", 0, 1, &x.refusal_rate)) return bad(r, -1, "observed.refusal_rate: expected 0..1");
    if (!num(ob, "canary_agreement", 0, 1, &x.canary_agreement))
        return bad(r, -1, "observed.canary_agreement: expected 0..1");
    if (!integer(ob, "install_failures", 0, EL_FLEET_MAX_DEVICES, &inst))
        return bad(r, -1, "observed.install_failures: expected an integer 0..%d", EL_FLEET_MAX_DEVICES);
    x.install_failures = (int)inst;
    bool pass[EL_GATE__N];
    const bool advance = el_fleet_gates_eval(&s->gates, &x, pass);
    const cJSON *pj = cJSON_GetObjectItemCaseSensitive(o, "pass");
    if (!cJSON_IsObject(pj)) return bad(r, -1, "pass: expected an object");
    for (int g = 0; g < EL_GATE__N; g++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(pj, el_fleet_gate_name(g));
        if (!cJSON_IsBool(v)) return bad(r, -1, "pass.%s: expected true or false", el_fleet_gate_name(g));
        if (cJSON_IsTrue(v) != pass[g])
            return bad(r, 1, "stage %lld: gate %s logged %s, the observation gives %s", (long long)stage,
                       el_fleet_gate_name(g), cJSON_IsTrue(v) ? "pass" : "fail", pass[g] ? "pass" : "fail");
    }
    const cJSON *dec = cJSON_GetObjectItemCaseSensitive(o, "decision");
    if (!cJSON_IsString(dec) || (strcmp(dec->valuestring, "advance") && strcmp(dec->valuestring, "halt")))
        return bad(r, -1, "decision: expected \"advance\" or \"halt\"");
    if (!strcmp(dec->valuestring, "advance") != advance)
        return bad(r, 1, "stage %lld: logged %s, the gates give %s", (long long)stage, dec->valuestring,
                   advance ? "advance" : "halt");
    fprintf(out, "stage %lld (%d%%, %lld of %lld devices): crash-free %.3f, p95 TTFT %.1f ms, refusals %.3f, canary "
            "%.3f, install failures %d -> %s (reproduced)\n", (long long)stage, s->stages[stage], (long long)devices,
            (long long)s->n, x.crash_free_rate, x.p95_ttft_ms, x.refusal_rate, x.canary_agreement, x.install_failures,
            advance ? "advance" : "halt");
    s->decisions++;
    s->gated = true;
    if (!advance) s->halted = true;
    return 0;
}

static int on_end(rp *r, replay_state *s, const cJSON *o, FILE *out) {
    const cJSON *oc = cJSON_GetObjectItemCaseSensitive(o, "outcome");
    if (!cJSON_IsString(oc) || (strcmp(oc->valuestring, "complete") && strcmp(oc->valuestring, "halted")))
        return bad(r, -1, "outcome: expected \"complete\" or \"halted\"");
    const bool complete = !s->halted && s->gated && s->cur_stage == s->n_stages - 1;
    if (!complete && !s->halted) return bad(r, 1, "the rollout ends before its last stage without a halt");
    if (!strcmp(oc->valuestring, "complete") != complete)
        return bad(r, 1, "logged outcome %s, the decisions give %s", oc->valuestring, complete ? "complete" : "halted");
    const cJSON *vs = cJSON_GetObjectItemCaseSensitive(o, "versions");
    if (!cJSON_IsArray(vs) || cJSON_GetArraySize(vs) != s->n)
        return bad(r, -1, "versions: expected %lld numbers", (long long)s->n);
    int i = 0;
    for (const cJSON *it = vs->child; it; it = it->next, i++) {
        if (s->halted && s->took[i]) return bad(r, 1, "device %d took the package and was not rolled back", i);
        const int64_t want = s->took[i] ? s->newv : s->base;
        if (!cJSON_IsNumber(it) || it->valuedouble != (double)want)
            return bad(r, 1, "versions[%d]: the log's installs and rollbacks leave v%lld", i, (long long)want);
    }
    fprintf(out, "end: %s (reproduced); every device on the version its installs and rollbacks give\n",
            complete ? "complete" : "halted, every device that took the package rolled back");
    s->decisions++;
    s->ended = true;
    return 0;
}

static int on_line(rp *r, replay_state *s, const cJSON *o, FILE *out) {
    if (!cJSON_IsObject(o)) return bad(r, -1, "expected a JSON object");
    int64_t seq;
    NEED_INT(o, "seq", 1, 1e9, seq);
    if (seq != r->line) return bad(r, 1, "seq: %lld on line %d (a line was removed or added)", (long long)seq, r->line);
    const cJSON *ev = cJSON_GetObjectItemCaseSensitive(o, "event");
    if (!cJSON_IsString(ev)) return bad(r, -1, "event: expected a string");
    const char *e = ev->valuestring;
    if (s->ended) return bad(r, -1, "a line after the end line");
    if (!s->started && strcmp(e, "start")) return bad(r, -1, "the first line must be the start line");
    int64_t d;
    if (!strcmp(e, "start")) return on_start(r, s, o);
    if (!strcmp(e, "device")) return on_device_index(r, s, o, &d);
    if (!strcmp(e, "stage")) {
        int64_t k, to;
        NEED_INT(o, "stage", 0, EL_FLEET_MAX_STAGES - 1, k);
        if (!s->gated || s->halted || k != s->cur_stage + 1 || k >= s->n_stages)
            return bad(r, 1, "stage %lld out of order", (long long)k);
        NEED_INT(o, "devices_to", 1, EL_FLEET_MAX_DEVICES, to);
        if (to != el_fleet_stage_target(s->stages, (int)k, (int)s->n))
            return bad(r, 1, "stage %lld: devices_to %lld, the stage list gives %d", (long long)k, (long long)to,
                       el_fleet_stage_target(s->stages, (int)k, (int)s->n));
        s->cur_stage = k;
        s->gated = false;
        return 0;
    }
    if (!strcmp(e, "install")) {
        int64_t v;
        if (on_device_index(r, s, o, &d)) return -1;
        NEED_INT(o, "version_after", -1, 9007199254740992.0, v);
        if (s->cur_stage < 0 || s->gated) return bad(r, 1, "an install outside a stage");
        if (d >= el_fleet_stage_target(s->stages, (int)s->cur_stage, (int)s->n))
            return bad(r, 1, "device %lld installed beyond its stage's size", (long long)d);
        if (v == s->newv) s->took[d] = true;
        return 0;
    }
    if (!strcmp(e, "kill_switch")) {
        if (s->halted) return bad(r, 1, "a kill switch after a halt");
        s->halted = true;
        s->gated = true;
        fprintf(out, "stage %lld: kill switch -> halt (reproduced)\n", (long long)s->cur_stage);
        s->decisions++;
        return 0;
    }
    if (!strcmp(e, "rollback")) {
        int64_t v;
        if (on_device_index(r, s, o, &d)) return -1;
        NEED_INT(o, "version_after", -1, 9007199254740992.0, v);
        if (!s->halted) return bad(r, 1, "device %lld rolled back without a halt", (long long)d);
        if (!s->took[d]) return bad(r, 1, "device %lld rolled back but never took the package", (long long)d);
        if (v != s->base) return bad(r, 1, "device %lld rolled back to v%lld, not v%lld", (long long)d, (long long)v,
                                     (long long)s->base);
        s->took[d] = false;
        s->rolled[d] = true;
        return 0;
    }
    if (!strcmp(e, "gate")) return on_gate(r, s, o, out);
    if (!strcmp(e, "end")) return on_end(r, s, o, out);
    return bad(r, -1, "event: unknown '%.40s'", e);
}

int el_fleet_replay_text(const char *text, size_t len, const char *label, FILE *out, char *msg, size_t cap) {
    rp r = {.label = label, .msg = msg, .cap = cap};
    replay_state *s = calloc(1, sizeof *s);
    if (!s) return snprintf(msg, cap, "out of memory"), -1;
    int rc = 0;
    size_t pos = 0;
    while (pos < len && rc == 0) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        const size_t n = nl ? (size_t)(nl - (text + pos)) : len - pos;
        r.line++;
        const char *end = NULL;
        cJSON *o = n ? cJSON_ParseWithLengthOpts(text + pos, n, &end, false) : NULL;
        bool tail_ok = o != NULL;
        for (const char *p = end; tail_ok && p < text + pos + n; p++)
            if (*p != ' ' && *p != '\t' && *p != '\r') tail_ok = false;
        if (!tail_ok) rc = bad(&r, -1, "not one JSON object");
        else rc = on_line(&r, s, o, out);
        cJSON_Delete(o);
        pos += n + (nl ? 1 : 0);
    }
    if (rc == 0 && !s->ended) {
        r.line++;
        rc = bad(&r, -1, "the log has no end line (the rollout was interrupted or the log cut)");
    }
    if (rc == 0) fprintf(out, "replay: %d decisions reproduced\n", s->decisions);
    free(s);
    return rc;
}

int el_fleet_replay(const char *log_path, FILE *out, char *msg, size_t cap) {
    size_t n;
    char *buf = el_text_read_file(log_path, 16u << 20, &n, msg, cap); /* a regular file, at most 16 MiB */
    if (!buf) return -1;
    int rc = el_fleet_replay_text(buf, n, log_path, out, msg, cap);
    free(buf);
    return rc;
}
