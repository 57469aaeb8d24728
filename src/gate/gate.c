/*
 * gate.c — the proposal gate (contract, wire format, check order and state
 * machine in gate.h).
 *
 * Invariants: nothing here allocates (no malloc, no cJSON; the frame parser
 * is a strict recursive-descent reader over the caller's bytes that never
 * reads past len and keeps what it found in a fixed-size struct on the
 * stack); the only outside dependency is libsodium's HMAC-SHA256 and
 * constant-time compare; time comes only from the injected clock. A check
 * that refuses returns at once with one reason code and a detail naming the
 * field; every decision goes to the audit callback.
 */
#include "gate/gate.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "util/error.h"

/* ---- names ------------------------------------------------------------------------- */

static const char *const REASONS[EL_GATE_N_REASONS] = {
    "ok", "too_large", "truncated", "malformed", "unknown_field", "duplicate_field", "missing_field", "bad_field",
    "unknown_device", "bad_tag", "bad_version", "duplicate", "late_reply", "not_synced", "out_of_order", "expired",
    "deadline_too_far", "unknown_action", "unknown_param", "missing_param", "wrong_type", "out_of_range",
    "not_in_enum", "state_forbids", "precondition_failed",
};
static const char *const STATES[EL_GS_N] = {"online",       "host_slow",      "link_down",    "model_failed",
                                            "sensor_fault", "actuator_fault", "safe_degraded"};
static const char *const EVENTS[EL_GE_N] = {"host_slow",    "host_ok",      "timeout",        "link_lost",
                                            "handshake",    "model_failed", "model_ok",       "sensor_fault",
                                            "actuator_fault", "fault_cleared"};

const char *el_gate_reason_name(el_gate_reason r) {
    return (unsigned)r < EL_GATE_N_REASONS ? REASONS[r] : "unknown";
}
const char *el_gate_state_name(el_gate_state s) { return (unsigned)s < EL_GS_N ? STATES[s] : "unknown"; }
const char *el_gate_ev_name(el_gate_ev e) { return (unsigned)e < EL_GE_N ? EVENTS[e] : "unknown"; }
const char *el_gate_type_name(el_gate_type t) {
    switch (t) {
    case EL_GT_INTEGER: return "integer";
    case EL_GT_NUMBER: return "number";
    case EL_GT_BOOLEAN: return "boolean";
    case EL_GT_ENUM: return "enum";
    }
    return "unknown";
}
int el_gate_state_parse(const char *s) {
    for (int i = 0; s && i < EL_GS_N; i++)
        if (!strcmp(s, STATES[i])) return i;
    return -1;
}
int el_gate_ev_parse(const char *s) {
    for (int i = 0; s && i < EL_GE_N; i++)
        if (!strcmp(s, EVENTS[i])) return i;
    return -1;
}

bool el_gate_name_ok(const char *s) {
    size_t n = s ? strlen(s) : 0;
    if (n < 1 || n >= EL_GATE_NAME_MAX) return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_')) return false;
    return true;
}

static bool id_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == ':' || c == '-';
}
bool el_gate_id_ok(const char *s) {
    size_t n = s ? strlen(s) : 0;
    if (n < 1 || n >= EL_GATE_ID_MAX) return false;
    for (size_t i = 0; i < n; i++)
        if (!id_char(s[i])) return false;
    return true;
}

int el_gate_policy_var(const el_gate_policy *p, const char *s) {
    for (int i = 0; p && s && i < p->n_vars; i++)
        if (!strcmp(p->vars[i].name, s)) return i;
    return -1;
}
int el_gate_policy_action(const el_gate_policy *p, const char *s) {
    for (int i = 0; p && s && i < p->n_actions; i++)
        if (!strcmp(p->actions[i].name, s)) return i;
    return -1;
}
int el_gate_policy_device(const el_gate_policy *p, const char *s) {
    for (int i = 0; p && s && i < p->n_devices; i++)
        if (!strcmp(p->devices[i].id, s)) return i;
    return -1;
}

/* ---- the state machine --------------------------------------------------------------- */

#define X (-1)
/* NEXT[state][event]; columns in el_gate_ev order: host_slow host_ok timeout
 * link_lost handshake model_failed model_ok sensor_fault actuator_fault fault_cleared */
static const signed char NEXT[EL_GS_N][EL_GE_N] = {
    /* online */ {EL_GS_HOST_SLOW, X, EL_GS_SAFE_DEGRADED, EL_GS_LINK_DOWN, EL_GS_ONLINE, EL_GS_MODEL_FAILED, X,
                  EL_GS_SENSOR_FAULT, EL_GS_ACTUATOR_FAULT, X},
    /* host_slow */ {X, EL_GS_ONLINE, EL_GS_SAFE_DEGRADED, EL_GS_LINK_DOWN, EL_GS_HOST_SLOW, EL_GS_MODEL_FAILED, X,
                     EL_GS_SENSOR_FAULT, EL_GS_ACTUATOR_FAULT, X},
    /* link_down */ {X, X, X, EL_GS_LINK_DOWN, EL_GS_ONLINE, X, X, EL_GS_SENSOR_FAULT, EL_GS_ACTUATOR_FAULT, X},
    /* model_failed */ {X, X, X, EL_GS_LINK_DOWN, EL_GS_MODEL_FAILED, X, EL_GS_ONLINE, EL_GS_SENSOR_FAULT,
                        EL_GS_ACTUATOR_FAULT, X},
    /* sensor_fault */ {X, X, X, EL_GS_SENSOR_FAULT, EL_GS_SENSOR_FAULT, X, X, X, EL_GS_ACTUATOR_FAULT,
                        EL_GS_SAFE_DEGRADED},
    /* actuator_fault */ {X, X, X, EL_GS_ACTUATOR_FAULT, EL_GS_ACTUATOR_FAULT, X, X, X, X, EL_GS_SAFE_DEGRADED},
    /* safe_degraded */ {X, X, X, EL_GS_LINK_DOWN, EL_GS_ONLINE, X, X, EL_GS_SENSOR_FAULT, EL_GS_ACTUATOR_FAULT, X},
};
#undef X

int el_gate_next_state(el_gate_state s, el_gate_ev ev) {
    if ((unsigned)s >= EL_GS_N || (unsigned)ev >= EL_GE_N) return -1;
    return NEXT[s][ev];
}

static void audit(el_gate *g, const el_gate_audit_rec *r) {
    if (g->audit) g->audit(g->audit_user, r);
}

static void window_add(el_gate *g, int dev, const char *req, bool cancelled) {
    el_gate_window_entry *e = &g->window[g->window_next];
    e->device = (int8_t)dev;
    e->cancelled = cancelled;
    snprintf(e->request_id, sizeof e->request_id, "%s", req);
    g->window_next = (g->window_next + 1) % g->pol.window;
}

static const el_gate_window_entry *window_find(const el_gate *g, int dev, const char *req) {
    for (int i = 0; i < g->pol.window; i++)
        if (g->window[i].device == dev && !strcmp(g->window[i].request_id, req)) return &g->window[i];
    return NULL;
}

/* Cancels the pending request: its reply, when it comes, is late. */
static void cancel_pending(el_gate *g) {
    if (!g->pending) return;
    window_add(g, g->pending_device, g->pending_id, true);
    g->pending = false;
}

static int apply_event(el_gate *g, el_gate_ev ev) {
    const int next = el_gate_next_state(g->state, ev);
    if (next < 0) return -1;
    const el_gate_state from = g->state;
    if (ev == EL_GE_TIMEOUT || ev == EL_GE_LINK_LOST || ev == EL_GE_MODEL_FAILED || ev == EL_GE_SENSOR_FAULT ||
        ev == EL_GE_ACTUATOR_FAULT)
        cancel_pending(g);
    if (ev == EL_GE_LINK_LOST)
        for (int i = 0; i < EL_GATE_MAX_DEVICES; i++) g->synced[i] = false;
    g->state = (el_gate_state)next;
    el_gate_audit_rec r = {.kind = EL_GA_TRANSITION, .now_ms = g->clock(g->clock_user), .reason = EL_GATE_OK,
                           .detail = "", .device_id = "", .request_id = "", .action = "", .from = from,
                           .to = g->state, .ev = ev};
    audit(g, &r);
    return 0;
}

int el_gate_event_apply(el_gate *g, el_gate_ev ev) {
    if (ev == EL_GE_HANDSHAKE) return -1; /* only el_gate_handshake, which also syncs the device */
    return apply_event(g, ev);
}

el_gate_state el_gate_get_state(const el_gate *g) { return g->state; }

/* ---- tags ---------------------------------------------------------------------------- */

static void put_u64(crypto_auth_hmacsha256_state *st, uint64_t v) {
    uint8_t b[8];
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (56 - 8 * i));
    crypto_auth_hmacsha256_update(st, b, 8);
}
static void put_str(crypto_auth_hmacsha256_state *st, const char *s, size_t n) {
    uint8_t b[4] = {(uint8_t)(n >> 24), (uint8_t)(n >> 16), (uint8_t)(n >> 8), (uint8_t)n};
    crypto_auth_hmacsha256_update(st, b, 4);
    crypto_auth_hmacsha256_update(st, (const uint8_t *)s, n);
}

void el_gate_tag(const uint8_t key[EL_GATE_KEY_BYTES], uint64_t schema_version, const char *device_id,
                 const char *request_id, uint64_t sequence, uint64_t deadline_ms, const char *action,
                 const char *params, size_t params_len, uint8_t out[EL_GATE_TAG_BYTES]) {
    static const char DOMAIN[] = "edgellm-proposal/1"; /* + its NUL */
    crypto_auth_hmacsha256_state st;
    crypto_auth_hmacsha256_init(&st, key, EL_GATE_KEY_BYTES);
    crypto_auth_hmacsha256_update(&st, (const uint8_t *)DOMAIN, sizeof DOMAIN);
    put_u64(&st, schema_version);
    put_str(&st, device_id, strlen(device_id));
    put_str(&st, request_id, strlen(request_id));
    put_u64(&st, sequence);
    put_u64(&st, deadline_ms);
    put_str(&st, action, strlen(action));
    put_str(&st, params, params_len);
    crypto_auth_hmacsha256_final(&st, out);
    sodium_memzero(&st, sizeof st);
}

static void sync_tag(const uint8_t key[EL_GATE_KEY_BYTES], const uint8_t nonce[16], uint64_t now, uint64_t next,
                     uint8_t out[EL_GATE_TAG_BYTES]) {
    static const char DOMAIN[] = "edgellm-gate-sync/1";
    crypto_auth_hmacsha256_state st;
    crypto_auth_hmacsha256_init(&st, key, EL_GATE_KEY_BYTES);
    crypto_auth_hmacsha256_update(&st, (const uint8_t *)DOMAIN, sizeof DOMAIN);
    crypto_auth_hmacsha256_update(&st, nonce, 16);
    put_u64(&st, now);
    put_u64(&st, next);
    crypto_auth_hmacsha256_final(&st, out);
    sodium_memzero(&st, sizeof st);
}

int el_gate_sync_verify(const uint8_t key[EL_GATE_KEY_BYTES], const uint8_t nonce[16], const el_gate_sync *s) {
    uint8_t t[EL_GATE_TAG_BYTES];
    sync_tag(key, nonce, s->now_ms, s->next_sequence, t);
    return sodium_memcmp(t, s->tag, sizeof t) == 0 ? 0 : -1;
}

int el_gate_frame_write(char *buf, size_t cap, const uint8_t key[EL_GATE_KEY_BYTES], uint64_t schema_version,
                        const char *device_id, const char *request_id, uint64_t sequence, uint64_t deadline_ms,
                        const char *action, const char *params_json) {
    if (!buf || !cap || !el_gate_id_ok(device_id) || !el_gate_id_ok(request_id) || !params_json) return -1;
    for (const char *c = action; *c; c++) /* action goes between quotes unescaped */
        if (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20) return -1;
    uint8_t tag[EL_GATE_TAG_BYTES];
    el_gate_tag(key, schema_version, device_id, request_id, sequence, deadline_ms, action, params_json,
                strlen(params_json), tag);
    char hex[2 * EL_GATE_TAG_BYTES + 1];
    sodium_bin2hex(hex, sizeof hex, tag, sizeof tag);
    int n = snprintf(buf, cap,
                     "{\"schema_version\":%llu,\"device_id\":\"%s\",\"request_id\":\"%s\",\"sequence\":%llu,"
                     "\"deadline_ms\":%llu,\"action\":\"%s\",\"params\":%s,\"tag\":\"%s\"}",
                     (unsigned long long)schema_version, device_id, request_id, (unsigned long long)sequence,
                     (unsigned long long)deadline_ms, action, params_json, hex);
    if (n < 0 || (size_t)n >= cap) return -1;
    return n;
}

/* ---- the frame parser ------------------------------------------------------------------ */

enum { PK_NUMBER, PK_STRING, PK_BOOL };
typedef struct raw_param {
    char name[EL_GATE_NAME_MAX];
    int kind;
    bool is_int;  /* a number spelled without fraction or exponent that fits int64 */
    int64_t i;
    double n;
    char s[EL_GATE_NAME_MAX];
    bool b;
} raw_param;

enum { F_VER, F_DEV, F_REQ, F_SEQ, F_DL, F_ACT, F_PARAMS, F_TAG, F_N };
static const char *const FIELDS[F_N] = {"schema_version", "device_id", "request_id", "sequence",
                                       "deadline_ms",    "action",    "params",     "tag"};

typedef struct proposal {
    uint64_t ver, seq, deadline;
    char dev[EL_GATE_ID_MAX], req[EL_GATE_ID_MAX], action[EL_GATE_NAME_MAX];
    const char *params;
    size_t params_len;
    uint8_t tag[EL_GATE_TAG_BYTES];
    raw_param p[EL_GATE_MAX_PARAMS];
    int np;
} proposal;

typedef struct cur {
    const char *p, *end, *start;
    el_gate_result *r;
} cur;

static el_gate_reason failr(el_gate_result *r, el_gate_reason why, const char *fmt, ...) {
    r->reason = why;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->detail, sizeof r->detail, fmt, ap);
    va_end(ap);
    return why;
}

static void ws(cur *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')) c->p++;
}

/* Expects byte ch (after whitespace). */
static el_gate_reason expect(cur *c, char ch, const char *where) {
    ws(c);
    if (c->p >= c->end) return failr(c->r, EL_GATE_TRUNCATED, "the frame ends before %s", where);
    if (*c->p != ch)
        return failr(c->r, EL_GATE_MALFORMED, "byte %ld: expected '%c' %s", (long)(c->p - c->start), ch, where);
    c->p++;
    return EL_GATE_OK;
}

/* A string without escapes: *s, *n (the bytes between the quotes). */
static el_gate_reason read_string(cur *c, const char **s, size_t *n, const char *where) {
    el_gate_reason e = expect(c, '"', where);
    if (e) return e;
    const char *b = c->p;
    while (c->p < c->end && *c->p != '"') {
        const unsigned char ch = (unsigned char)*c->p;
        if (ch == '\\')
            return failr(c->r, EL_GATE_MALFORMED, "byte %ld: escapes are not accepted in %s", (long)(c->p - c->start),
                         where);
        if (ch < 0x20 || ch > 0x7e)
            return failr(c->r, EL_GATE_MALFORMED, "byte %ld: a control or non-ASCII byte in %s",
                         (long)(c->p - c->start), where);
        c->p++;
    }
    if (c->p >= c->end) return failr(c->r, EL_GATE_TRUNCATED, "the frame ends inside %s", where);
    *s = b;
    *n = (size_t)(c->p - b);
    c->p++;
    return EL_GATE_OK;
}

static bool is_digit(char ch) { return ch >= '0' && ch <= '9'; }

/* A JSON number: its text in [*s, *s + *n), whether it has fraction/exponent. */
static el_gate_reason read_number(cur *c, const char **s, size_t *n, bool *plain, const char *where) {
    ws(c);
    const char *b = c->p;
    *plain = true;
    if (c->p < c->end && *c->p == '-') c->p++;
    if (c->p >= c->end) return failr(c->r, EL_GATE_TRUNCATED, "the frame ends inside %s", where);
    if (*c->p == '0') c->p++;
    else if (is_digit(*c->p))
        while (c->p < c->end && is_digit(*c->p)) c->p++;
    else
        return failr(c->r, EL_GATE_MALFORMED, "byte %ld: %s is not a number", (long)(c->p - c->start), where);
    if (c->p < c->end && *c->p == '.') {
        *plain = false;
        c->p++;
        if (c->p >= c->end) return failr(c->r, EL_GATE_TRUNCATED, "the frame ends inside %s", where);
        if (!is_digit(*c->p)) return failr(c->r, EL_GATE_MALFORMED, "byte %ld: a digit after '.' in %s", (long)(c->p - c->start), where);
        while (c->p < c->end && is_digit(*c->p)) c->p++;
    }
    if (c->p < c->end && (*c->p == 'e' || *c->p == 'E')) {
        *plain = false;
        c->p++;
        if (c->p < c->end && (*c->p == '+' || *c->p == '-')) c->p++;
        if (c->p >= c->end) return failr(c->r, EL_GATE_TRUNCATED, "the frame ends inside %s", where);
        if (!is_digit(*c->p)) return failr(c->r, EL_GATE_MALFORMED, "byte %ld: a digit in the exponent of %s", (long)(c->p - c->start), where);
        while (c->p < c->end && is_digit(*c->p)) c->p++;
    }
    *s = b;
    *n = (size_t)(c->p - b);
    return EL_GATE_OK;
}

/* An unsigned header integer 0..2^53. */
static el_gate_reason read_uint(cur *c, uint64_t *out, const char *where) {
    const char *s;
    size_t n;
    bool plain;
    el_gate_reason e = read_number(c, &s, &n, &plain, where);
    if (e) return e;
    if (!plain || s[0] == '-' || n > 16) return failr(c->r, EL_GATE_BAD_FIELD, "%s: expected an integer 0..2^53", where);
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) v = v * 10 + (uint64_t)(s[i] - '0');
    if ((double)v > EL_GATE_INT_MAX) return failr(c->r, EL_GATE_BAD_FIELD, "%s: expected an integer 0..2^53", where);
    *out = v;
    return EL_GATE_OK;
}

/* true / false (or the start of null, an object, an array: a bad type here). */
static el_gate_reason read_literal(cur *c, const char *lit, const char *where) {
    size_t n = strlen(lit);
    for (size_t i = 0; i < n; i++) {
        if (c->p + i >= c->end) return failr(c->r, EL_GATE_TRUNCATED, "the frame ends inside %s", where);
        if (c->p[i] != lit[i]) return failr(c->r, EL_GATE_MALFORMED, "byte %ld: not a JSON value in %s", (long)(c->p + i - c->start), where);
    }
    c->p += n;
    return EL_GATE_OK;
}

static el_gate_reason read_params(cur *c, proposal *pp) {
    ws(c);
    const char *b = c->p;
    el_gate_reason e = expect(c, '{', "the params object");
    if (e) return e;
    ws(c);
    if (c->p < c->end && *c->p == '}') {
        c->p++;
    } else {
        for (;;) {
            const char *k;
            size_t kn;
            if ((e = read_string(c, &k, &kn, "a parameter name"))) return e;
            if (kn < 1 || kn >= EL_GATE_NAME_MAX)
                return failr(c->r, EL_GATE_BAD_FIELD, "params: a name of %zu bytes (1..%d)", kn, EL_GATE_NAME_MAX - 1);
            char name[EL_GATE_NAME_MAX];
            memcpy(name, k, kn);
            name[kn] = 0;
            if (!el_gate_name_ok(name)) return failr(c->r, EL_GATE_BAD_FIELD, "params.%s: a name is [a-z0-9_]", name);
            for (int i = 0; i < pp->np; i++)
                if (!strcmp(pp->p[i].name, name)) return failr(c->r, EL_GATE_DUPLICATE_FIELD, "params.%s twice", name);
            if (pp->np >= EL_GATE_MAX_PARAMS)
                return failr(c->r, EL_GATE_BAD_FIELD, "params: more than %d parameters", EL_GATE_MAX_PARAMS);
            if ((e = expect(c, ':', "':' after a parameter name"))) return e;
            raw_param *rp = &pp->p[pp->np];
            memset(rp, 0, sizeof *rp);
            memcpy(rp->name, name, kn + 1);
            ws(c);
            if (c->p >= c->end) return failr(c->r, EL_GATE_TRUNCATED, "the frame ends before params.%s's value", name);
            const char ch = *c->p;
            if (ch == '"') {
                const char *s;
                size_t n;
                if ((e = read_string(c, &s, &n, "a parameter value"))) return e;
                if (n < 1 || n >= EL_GATE_NAME_MAX)
                    return failr(c->r, EL_GATE_BAD_FIELD, "params.%s: a string of %zu bytes (1..%d)", name, n, EL_GATE_NAME_MAX - 1);
                rp->kind = PK_STRING;
                memcpy(rp->s, s, n);
                rp->s[n] = 0;
            } else if (ch == 't' || ch == 'f') {
                if ((e = read_literal(c, ch == 't' ? "true" : "false", "a parameter value"))) return e;
                rp->kind = PK_BOOL;
                rp->b = ch == 't';
            } else if (ch == '-' || is_digit(ch)) {
                const char *s;
                size_t n;
                bool plain;
                if ((e = read_number(c, &s, &n, &plain, "a parameter value"))) return e;
                if (n > 40) return failr(c->r, EL_GATE_BAD_FIELD, "params.%s: a number of more than 40 characters", name);
                char tmp[48];
                memcpy(tmp, s, n);
                tmp[n] = 0;
                rp->kind = PK_NUMBER;
                rp->n = strtod(tmp, NULL);
                if (plain) {
                    /* exact int64, or not an integer */
                    const bool neg = tmp[0] == '-';
                    uint64_t v = 0;
                    bool fits = true;
                    for (size_t i = neg; i < n && fits; i++) {
                        const uint64_t d = (uint64_t)(tmp[i] - '0');
                        if (v > (UINT64_MAX - d) / 10) fits = false;
                        else v = v * 10 + d;
                    }
                    if (fits && v <= (neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX)) {
                        rp->is_int = true;
                        rp->i = neg ? (int64_t)(0 - v) : (int64_t)v;
                    }
                }
            } else if (ch == 'n' || ch == '{' || ch == '[') {
                return failr(c->r, EL_GATE_BAD_FIELD, "params.%s: values are numbers, strings or booleans", name);
            } else {
                return failr(c->r, EL_GATE_MALFORMED, "byte %ld: not a JSON value in params.%s", (long)(c->p - c->start), name);
            }
            pp->np++;
            ws(c);
            if (c->p >= c->end) return failr(c->r, EL_GATE_TRUNCATED, "the frame ends inside params");
            if (*c->p == ',') { c->p++; continue; }
            if (*c->p == '}') { c->p++; break; }
            return failr(c->r, EL_GATE_MALFORMED, "byte %ld: expected ',' or '}' in params", (long)(c->p - c->start));
        }
    }
    pp->params = b;
    pp->params_len = (size_t)(c->p - b);
    return EL_GATE_OK;
}

static int hexval(char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    return -1;
}

/* Copies an id-like string field (checked by ok) into dst. */
static el_gate_reason take(cur *c, char *dst, size_t dcap, bool (*ok)(const char *), const char *field) {
    const char *s;
    size_t n;
    el_gate_reason e = read_string(c, &s, &n, field);
    if (e) return e;
    if (n < 1 || n >= dcap) return failr(c->r, EL_GATE_BAD_FIELD, "%s: %zu bytes (1..%zu)", field, n, dcap - 1);
    memcpy(dst, s, n);
    dst[n] = 0;
    if (!ok(dst)) return failr(c->r, EL_GATE_BAD_FIELD, "%s: a character outside its set", field);
    return EL_GATE_OK;
}

static el_gate_reason parse_frame(const char *frame, size_t len, proposal *pp, el_gate_result *r) {
    cur c = {.p = frame, .end = frame + len, .start = frame, .r = r};
    memset(pp, 0, sizeof *pp);
    el_gate_reason e = expect(&c, '{', "the frame (a JSON object)");
    if (e) return e;
    unsigned seen = 0;
    ws(&c);
    if (c.p < c.end && *c.p == '}') return failr(r, EL_GATE_MISSING_FIELD, "schema_version");
    for (;;) {
        const char *k;
        size_t kn;
        if ((e = read_string(&c, &k, &kn, "a member name"))) return e;
        int f = -1;
        for (int i = 0; i < F_N; i++)
            if (strlen(FIELDS[i]) == kn && !memcmp(FIELDS[i], k, kn)) f = i;
        if (f < 0) return failr(r, EL_GATE_UNKNOWN_FIELD, "\"%.*s\"", (int)(kn > 40 ? 40 : kn), k);
        if (seen & (1u << f)) return failr(r, EL_GATE_DUPLICATE_FIELD, "%s twice", FIELDS[f]);
        seen |= 1u << f;
        if ((e = expect(&c, ':', "':' after a member name"))) return e;
        ws(&c);
        if (c.p >= c.end) return failr(r, EL_GATE_TRUNCATED, "the frame ends before %s's value", FIELDS[f]);
        const bool str = *c.p == '"', num = *c.p == '-' || is_digit(*c.p), obj = *c.p == '{';
        const bool want_str = f == F_DEV || f == F_REQ || f == F_ACT || f == F_TAG;
        const bool want_num = f == F_VER || f == F_SEQ || f == F_DL;
        if ((want_str && !str) || (want_num && !num) || (f == F_PARAMS && !obj))
            return failr(r, EL_GATE_BAD_FIELD, "%s: expected %s", FIELDS[f],
                         want_str ? "a string" : want_num ? "an integer" : "an object");
        switch (f) {
        case F_VER: e = read_uint(&c, &pp->ver, "schema_version"); break;
        case F_SEQ: e = read_uint(&c, &pp->seq, "sequence"); break;
        case F_DL: e = read_uint(&c, &pp->deadline, "deadline_ms"); break;
        case F_DEV: e = take(&c, pp->dev, sizeof pp->dev, el_gate_id_ok, "device_id"); break;
        case F_REQ: e = take(&c, pp->req, sizeof pp->req, el_gate_id_ok, "request_id"); break;
        case F_ACT: e = take(&c, pp->action, sizeof pp->action, el_gate_name_ok, "action"); break;
        case F_PARAMS: e = read_params(&c, pp); break;
        case F_TAG: {
            const char *s;
            size_t n;
            if ((e = read_string(&c, &s, &n, "tag"))) break;
            if (n != 2 * EL_GATE_TAG_BYTES) { e = failr(r, EL_GATE_BAD_FIELD, "tag: expected 64 lowercase hex digits"); break; }
            for (size_t i = 0; i < EL_GATE_TAG_BYTES && !e; i++) {
                const int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);
                if (hi < 0 || lo < 0) e = failr(r, EL_GATE_BAD_FIELD, "tag: expected 64 lowercase hex digits");
                else pp->tag[i] = (uint8_t)(hi * 16 + lo);
            }
            break;
        }
        }
        if (e) return e;
        ws(&c);
        if (c.p >= c.end) return failr(r, EL_GATE_TRUNCATED, "the frame ends before its closing '}'");
        if (*c.p == ',') { c.p++; continue; }
        if (*c.p == '}') { c.p++; break; }
        return failr(r, EL_GATE_MALFORMED, "byte %ld: expected ',' or '}'", (long)(c.p - c.start));
    }
    ws(&c);
    if (c.p != c.end) return failr(r, EL_GATE_MALFORMED, "byte %ld: text after the frame", (long)(c.p - c.start));
    for (int i = 0; i < F_N; i++)
        if (!(seen & (1u << i))) return failr(r, EL_GATE_MISSING_FIELD, "%s", FIELDS[i]);
    return EL_GATE_OK;
}

/* ---- the checks ------------------------------------------------------------------------- */

static void fmt_value(char *buf, size_t cap, const el_gate_typedef *t, const el_gate_value *v) {
    switch (v->type) {
    case EL_GT_INTEGER: snprintf(buf, cap, "%lld", (long long)v->i); break;
    case EL_GT_NUMBER: snprintf(buf, cap, "%g", v->n); break;
    case EL_GT_BOOLEAN: snprintf(buf, cap, "%s", v->b ? "true" : "false"); break;
    case EL_GT_ENUM: snprintf(buf, cap, "%s", v->e >= 0 && v->e < t->n_values ? t->values[v->e] : "?"); break;
    }
}

/* raw parameter -> typed value of t; a reason on mismatch. */
static el_gate_reason type_param(const el_gate_typedef *t, const raw_param *rp, el_gate_value *v, el_gate_result *r) {
    memset(v, 0, sizeof *v);
    v->type = t->type;
    switch (t->type) {
    case EL_GT_INTEGER:
        if (rp->kind != PK_NUMBER || !rp->is_int)
            return failr(r, EL_GATE_WRONG_TYPE, "params.%s: expected an integer", t->name);
        if ((double)rp->i < t->min || (double)rp->i > t->max)
            return failr(r, EL_GATE_OUT_OF_RANGE, "params.%s: %lld is outside %g..%g", t->name, (long long)rp->i,
                         t->min, t->max);
        v->i = rp->i;
        v->n = (double)rp->i;
        return EL_GATE_OK;
    case EL_GT_NUMBER:
        if (rp->kind != PK_NUMBER) return failr(r, EL_GATE_WRONG_TYPE, "params.%s: expected a number", t->name);
        if (!(rp->n >= t->min && rp->n <= t->max))
            return failr(r, EL_GATE_OUT_OF_RANGE, "params.%s: %g is outside %g..%g", t->name, rp->n, t->min, t->max);
        v->n = rp->n;
        return EL_GATE_OK;
    case EL_GT_BOOLEAN:
        if (rp->kind != PK_BOOL) return failr(r, EL_GATE_WRONG_TYPE, "params.%s: expected true or false", t->name);
        v->b = rp->b;
        return EL_GATE_OK;
    case EL_GT_ENUM:
        if (rp->kind != PK_STRING) return failr(r, EL_GATE_WRONG_TYPE, "params.%s: expected a string", t->name);
        for (int i = 0; i < t->n_values; i++)
            if (!strcmp(t->values[i], rp->s)) {
                v->e = i;
                return EL_GATE_OK;
            }
        return failr(r, EL_GATE_NOT_IN_ENUM, "params.%s: \"%s\" is not one of its values", t->name, rp->s);
    }
    return failr(r, EL_GATE_WRONG_TYPE, "params.%s", t->name);
}

static const char *const OPS[] = {"==", "!=", "<", "<=", ">", ">="};

static bool holds(const el_gate_value *cur, const el_gate_precond *p) {
    double a, b;
    switch (cur->type) {
    case EL_GT_BOOLEAN: return p->op == EL_GOP_EQ ? cur->b == p->value.b : cur->b != p->value.b;
    case EL_GT_ENUM: return p->op == EL_GOP_EQ ? cur->e == p->value.e : cur->e != p->value.e;
    case EL_GT_INTEGER: a = (double)cur->i; b = p->value.type == EL_GT_INTEGER ? (double)p->value.i : p->value.n; break;
    default: a = cur->n; b = p->value.type == EL_GT_INTEGER ? (double)p->value.i : p->value.n; break;
    }
    switch (p->op) {
    case EL_GOP_EQ: return a == b;
    case EL_GOP_NE: return a != b;
    case EL_GOP_LT: return a < b;
    case EL_GOP_LE: return a <= b;
    case EL_GOP_GT: return a > b;
    case EL_GOP_GE: return a >= b;
    }
    return false;
}

static el_gate_reason check(el_gate *g, const char *frame, size_t len, uint64_t now, el_gate_result *r,
                            el_gate_audit_rec *ar) {
    if (len > EL_GATE_MAX_FRAME)
        return failr(r, EL_GATE_TOO_LARGE, "%zu bytes (at most %d)", len, EL_GATE_MAX_FRAME);
    proposal pp;
    el_gate_reason e = parse_frame(frame, len, &pp, r);
    if (e) return e;
    /* 1. source */
    const int dev = el_gate_policy_device(&g->pol, pp.dev);
    if (dev < 0) return failr(r, EL_GATE_UNKNOWN_DEVICE, "device_id \"%s\" is not in the policy", pp.dev);
    uint8_t want[EL_GATE_TAG_BYTES];
    el_gate_tag(g->pol.devices[dev].key, pp.ver, pp.dev, pp.req, pp.seq, pp.deadline, pp.action, pp.params,
                pp.params_len, want);
    if (sodium_memcmp(want, pp.tag, sizeof want) != 0)
        return failr(r, EL_GATE_BAD_TAG, "the tag does not match %s's key", pp.dev);
    /* authenticated: the record may name it */
    ar->device_id = g->pol.devices[dev].id;
    snprintf(r->event.request_id, sizeof r->event.request_id, "%s", pp.req);
    ar->request_id = r->event.request_id;
    ar->sequence = pp.seq;
    /* 2. version */
    if (pp.ver != EL_GATE_SCHEMA_VERSION)
        return failr(r, EL_GATE_BAD_VERSION, "schema_version %llu (this gate speaks %d)", (unsigned long long)pp.ver,
                     EL_GATE_SCHEMA_VERSION);
    /* 3. duplicate */
    const el_gate_window_entry *w = window_find(g, dev, pp.req);
    if (w && w->cancelled)
        return failr(r, EL_GATE_LATE_REPLY, "request %s was cancelled by its timeout", pp.req);
    if (w) return failr(r, EL_GATE_DUPLICATE, "request %s was already received", pp.req);
    /* the reply to the pending request has come (whatever follows) */
    if (g->pending && g->pending_device == dev && !strcmp(g->pending_id, pp.req)) {
        g->pending = false;
        if (g->state == EL_GS_HOST_SLOW) apply_event(g, EL_GE_HOST_OK);
    }
    /* 4. ordering */
    if (!g->synced[dev]) return failr(r, EL_GATE_NOT_SYNCED, "%s has not handshaken since the link came up", pp.dev);
    if (pp.seq <= g->last_seq[dev])
        return failr(r, EL_GATE_OUT_OF_ORDER, "sequence %llu after %llu", (unsigned long long)pp.seq,
                     (unsigned long long)g->last_seq[dev]);
    window_add(g, dev, pp.req, false);
    g->last_seq[dev] = pp.seq;
    /* 5. freshness */
    if (pp.deadline < now)
        return failr(r, EL_GATE_EXPIRED, "deadline %llu ms is %llu ms past", (unsigned long long)pp.deadline,
                     (unsigned long long)(now - pp.deadline));
    if (pp.deadline - now > g->pol.max_deadline_ms)
        return failr(r, EL_GATE_DEADLINE_TOO_FAR, "deadline %llu ms ahead (at most %llu)",
                     (unsigned long long)(pp.deadline - now), (unsigned long long)g->pol.max_deadline_ms);
    /* 6. action whitelist */
    const int ai = el_gate_policy_action(&g->pol, pp.action);
    if (ai < 0) return failr(r, EL_GATE_UNKNOWN_ACTION, "\"%s\" is not in the policy", pp.action);
    const el_gate_action *a = &g->pol.actions[ai];
    ar->action = a->name;
    /* 7. parameters */
    for (int i = 0; i < pp.np; i++) {
        bool known = false;
        for (int j = 0; j < a->n_params; j++) known = known || !strcmp(a->params[j].name, pp.p[i].name);
        if (!known) return failr(r, EL_GATE_UNKNOWN_PARAM, "params.%s: %s has no such parameter", pp.p[i].name, a->name);
    }
    for (int j = 0; j < a->n_params; j++) {
        const raw_param *rp = NULL;
        for (int i = 0; i < pp.np; i++)
            if (!strcmp(a->params[j].name, pp.p[i].name)) rp = &pp.p[i];
        if (!rp) return failr(r, EL_GATE_MISSING_PARAM, "params.%s", a->params[j].name);
        if ((e = type_param(&a->params[j], rp, &r->event.params[j], r))) return e;
    }
    /* 8. state and preconditions */
    if (!(a->states & (1u << g->state)))
        return failr(r, EL_GATE_STATE_FORBIDS, "%s is not allowed in state %s", a->name, el_gate_state_name(g->state));
    for (int k = 0; k < a->n_pre; k++) {
        const el_gate_precond *p = &a->pre[k];
        const el_gate_typedef *t = &g->pol.vars[p->var];
        char want_s[48], have_s[48];
        fmt_value(want_s, sizeof want_s, t, &p->value);
        if (!g->var_set[p->var])
            return failr(r, EL_GATE_PRECONDITION_FAILED, "%s %s %s: %s is unknown", t->name, OPS[p->op], want_s, t->name);
        if (!holds(&g->vars[p->var], p)) {
            fmt_value(have_s, sizeof have_s, t, &g->vars[p->var]);
            return failr(r, EL_GATE_PRECONDITION_FAILED, "%s %s %s does not hold (%s is %s)", t->name, OPS[p->op],
                         want_s, t->name, have_s);
        }
    }
    r->event.device = dev;
    r->event.sequence = pp.seq;
    r->event.deadline_ms = pp.deadline;
    r->event.action = ai;
    r->reason = EL_GATE_OK;
    snprintf(r->detail, sizeof r->detail, "accepted");
    return EL_GATE_OK;
}

el_gate_reason el_gate_submit(el_gate *g, const char *frame, size_t len, el_gate_result *r) {
    memset(r, 0, sizeof *r);
    const uint64_t now = g->clock(g->clock_user);
    el_gate_audit_rec ar = {.kind = EL_GA_PROPOSAL, .now_ms = now, .device_id = "", .request_id = "", .action = ""};
    ar.from = g->state;
    const el_gate_reason e = frame ? check(g, frame, len, now, r, &ar) : failr(r, EL_GATE_TRUNCATED, "no frame");
    r->reason = e;
    if (e != EL_GATE_OK) memset(r->event.params, 0, sizeof r->event.params);
    ar.reason = e;
    ar.detail = r->detail;
    ar.to = g->state;
    audit(g, &ar);
    return e;
}

/* ---- set-up, handshake, time ----------------------------------------------------------- */

int el_gate_init(el_gate *g, const el_gate_policy *pol, el_gate_clock_fn clock, void *clock_user,
                 el_gate_audit_fn audit_fn, void *audit_user, char *err, size_t cap) {
    if (!g || !pol || !clock) return el_errf(err, cap, "no gate, policy or clock");
    if (sodium_init() < 0) return el_errf(err, cap, "libsodium failed to initialise");
    if (pol->n_devices < 1 || pol->n_devices > EL_GATE_MAX_DEVICES) return el_errf(err, cap, "1..%d devices", EL_GATE_MAX_DEVICES);
    if (pol->n_actions < 1 || pol->n_actions > EL_GATE_MAX_ACTIONS) return el_errf(err, cap, "1..%d actions", EL_GATE_MAX_ACTIONS);
    if (pol->n_vars < 0 || pol->n_vars > EL_GATE_MAX_VARS) return el_errf(err, cap, "0..%d variables", EL_GATE_MAX_VARS);
    if (pol->window < 1 || pol->window > EL_GATE_WINDOW_MAX) return el_errf(err, cap, "window 1..%d", EL_GATE_WINDOW_MAX);
    for (int i = 0; i < pol->n_actions; i++) {
        const el_gate_action *a = &pol->actions[i];
        if (a->n_params < 0 || a->n_params > EL_GATE_MAX_PARAMS || a->n_pre < 0 || a->n_pre > EL_GATE_MAX_PRECOND)
            return el_errf(err, cap, "action %d: too many parameters or preconditions", i);
        if (a->states & ((1u << EL_GS_LINK_DOWN) | (1u << EL_GS_MODEL_FAILED)))
            return el_errf(err, cap, "action %s: no action is allowed in link_down or model_failed", a->name);
        if (!a->safe && (a->states & ~((1u << EL_GS_ONLINE) | (1u << EL_GS_HOST_SLOW))))
            return el_errf(err, cap, "action %s: only a safe action may be allowed outside online and host_slow", a->name);
        for (int k = 0; k < a->n_pre; k++)
            if (a->pre[k].var < 0 || a->pre[k].var >= pol->n_vars) return el_errf(err, cap, "action %s: bad variable", a->name);
    }
    memset(g, 0, sizeof *g);
    g->pol = *pol;
    g->state = EL_GS_LINK_DOWN;
    g->clock = clock;
    g->clock_user = clock_user;
    g->audit = audit_fn;
    g->audit_user = audit_user;
    for (int i = 0; i < EL_GATE_WINDOW_MAX; i++) g->window[i].device = -1;
    return 0;
}

int el_gate_handshake(el_gate *g, const char *device_id, const uint8_t nonce[16], el_gate_sync *out) {
    const int dev = el_gate_policy_device(&g->pol, device_id);
    if (dev < 0) return -1;
    g->synced[dev] = true;
    const uint64_t now = g->clock(g->clock_user);
    el_gate_audit_rec ar = {.kind = EL_GA_HANDSHAKE, .now_ms = now, .detail = "", .device_id = g->pol.devices[dev].id,
                            .request_id = "", .sequence = g->last_seq[dev] + 1, .action = "", .from = g->state,
                            .to = g->state, .ev = EL_GE_HANDSHAKE};
    audit(g, &ar);
    apply_event(g, EL_GE_HANDSHAKE); /* always in the table */
    if (out) {
        out->now_ms = now;
        out->next_sequence = g->last_seq[dev] + 1;
        sync_tag(g->pol.devices[dev].key, nonce, out->now_ms, out->next_sequence, out->tag);
    }
    return 0;
}

int el_gate_expect(el_gate *g, const char *device_id, const char *request_id, uint64_t deadline_ms) {
    const int dev = el_gate_policy_device(&g->pol, device_id);
    if (dev < 0 || g->pending || !el_gate_id_ok(request_id)) return -1;
    g->pending = true;
    g->pending_device = dev;
    snprintf(g->pending_id, sizeof g->pending_id, "%s", request_id);
    g->pending_start = g->clock(g->clock_user);
    g->pending_deadline = deadline_ms;
    return 0;
}

int el_gate_tick(el_gate *g) {
    if (!g->pending) return 0;
    const uint64_t now = g->clock(g->clock_user);
    if (now > g->pending_deadline) {
        el_gate_audit_rec ar = {.kind = EL_GA_TIMEOUT, .now_ms = now, .detail = "the pending request timed out",
                                .device_id = g->pol.devices[g->pending_device].id, .request_id = g->pending_id,
                                .action = "", .from = g->state, .to = g->state, .ev = EL_GE_TIMEOUT};
        audit(g, &ar);
        cancel_pending(g);
        apply_event(g, EL_GE_TIMEOUT); /* -1 outside online / host_slow: the state already says why */
        return 1;
    }
    if (g->state == EL_GS_ONLINE && now - g->pending_start >= g->pol.slow_ms) apply_event(g, EL_GE_HOST_SLOW);
    return 0;
}

int el_gate_set_var(el_gate *g, const char *name, const el_gate_value *v) {
    const int i = el_gate_policy_var(&g->pol, name);
    if (i < 0 || !v) return -1;
    const el_gate_typedef *t = &g->pol.vars[i];
    if (v->type != t->type) return -1;
    if (t->type == EL_GT_INTEGER && ((double)v->i < t->min || (double)v->i > t->max)) return -1;
    if (t->type == EL_GT_NUMBER && !(v->n >= t->min && v->n <= t->max)) return -1;
    if (t->type == EL_GT_ENUM && (v->e < 0 || v->e >= t->n_values)) return -1;
    g->vars[i] = *v;
    g->var_set[i] = true;
    return 0;
}
