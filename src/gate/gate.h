/*
 * gate.h — the proposal gate (layer L6, issue 17 items 3–4; seed 003): what
 * a model produces is a *proposal*, a versioned, authenticated, structured
 * message; only a proposal that passes every check of the gate becomes an
 * internal event, and natural language never reaches an actuator.
 *
 * Two halves:
 *   - gate.c, the gate itself: plain C, libc + libsodium's HMAC-SHA256 only,
 *     no allocation at all (every table is a fixed-size array inside
 *     el_gate, which the caller places — static storage on a
 *     microcontroller), no clock of its own (the caller injects a monotonic
 *     millisecond clock), no I/O (decisions go to an audit callback).
 *   - gate_policy.c, the host side: the action policy file (actions.json,
 *     read with cJSON at start-up, refused with the JSON path of what is
 *     wrong) and the JSON Schema of what the model may fill in, generated
 *     from the policy (compiled to a grammar by json_schema.c).
 *
 * The wire format (one frame = one JSON object, at most EL_GATE_MAX_FRAME
 * bytes, exactly these members, in any order, each once):
 *     {"schema_version": 1, "device_id": "greenhouse-1", "request_id": "r-17",
 *      "sequence": 42, "deadline_ms": 81234, "action": "set_heater",
 *      "params": {"celsius": 21}, "tag": "<64 lowercase hex digits>"}
 *   - device_id, request_id: 1..63 bytes of [A-Za-z0-9._:-];
 *     action, param names: 1..31 bytes of [a-z0-9_]; string values: 1..31
 *     printable ASCII bytes without '"' or '\\' (no escapes on this wire).
 *   - sequence, deadline_ms, schema_version: integers 0..2^53.
 *   - deadline_ms is ABSOLUTE, in milliseconds of the gate's monotonic
 *     clock; the host learns that clock from the handshake (el_gate_sync)
 *     and adds its own elapsed time. A deadline further than the policy's
 *     max_deadline_ms ahead of the gate's clock is refused.
 *   - params: an object whose values are numbers, strings or booleans.
 *   - tag = HMAC-SHA256(key of device_id, canonical bytes), where the
 *     canonical bytes are, in this order (u64 = 8 bytes big-endian, str =
 *     4-byte big-endian length then the bytes):
 *         "edgellm-proposal/1" and one 0x00 byte,
 *         u64 schema_version, str device_id, str request_id, u64 sequence,
 *         u64 deadline_ms, str action, str params
 *     where "params" is the params value's exact bytes in the frame, from its
 *     '{' to its matching '}' (so whitespace and number spelling are
 *     covered; the host signs what it sends). el_gate_tag computes it.
 *
 * Check order (seed 003), each refusal one reason code (el_gate_reason):
 *   0. framing: too_large, truncated, malformed, unknown_field,
 *      duplicate_field, missing_field, bad_field
 *   1. source: unknown_device, bad_tag
 *   2. version: bad_version (schema_version != EL_GATE_SCHEMA_VERSION)
 *   3. duplicate: duplicate (request_id seen in the window), late_reply (the
 *      request_id of a request cancelled by a timeout)
 *   4. ordering: not_synced (no handshake since start or since the link was
 *      lost), out_of_order (sequence <= the last accepted for the device)
 *   5. freshness: expired (deadline_ms < now), deadline_too_far
 *   6. action whitelist: unknown_action
 *   7. parameters: unknown_param, missing_param, wrong_type, out_of_range,
 *      not_in_enum
 *   8. state: state_forbids (the gate's state does not allow the action),
 *      precondition_failed (a state variable fails a precondition, or is
 *      unset)
 *   A frame that passed steps 1–4 records its request_id in the window and
 *   its sequence as the device's last, even if a later check refuses it:
 *   the host must send a new request, never retry one. Forged frames change
 *   nothing. The window holds the last `window` ids per gate (a ring): a
 *   replay older than that is stopped by its sequence (step 4).
 *
 * Not thread-safe: one caller at a time per el_gate (a device's main loop,
 * or the caller's lock). Memory: sizeof(el_gate) with the limits below is
 * about 60 KB; shrink the EL_GATE_MAX_* limits for a smaller target.
 *
 * The state machine (el_gate_event_apply; table in docs/STRUCTURED.md):
 *   online --host_slow--> host_slow --host_ok--> online
 *   online | host_slow --timeout--> safe_degraded   (pending request cancelled)
 *   online | host_slow | safe_degraded | model_failed --link_lost--> link_down
 *        (pending cancelled, every device unsynced: proposals need a handshake)
 *   link_down | safe_degraded --handshake--> online
 *   online | host_slow --model_failed--> model_failed --model_ok--> online
 *   any but actuator_fault --sensor_fault--> sensor_fault
 *   any --actuator_fault--> actuator_fault
 *   sensor_fault | actuator_fault --fault_cleared--> safe_degraded
 *   Every other (state, event) pair is refused (-1, state unchanged).
 *   The gate starts in link_down: the host's first handshake brings it online.
 *   Actions: the policy lists the states each action is allowed in; an action
 *   that is not "safe" may only list online and host_slow; no action may
 *   list link_down or model_failed (no host proposal is acted on then).
 *
 * Timeouts: el_gate_expect registers the request the host is working on
 * (id, deadline); el_gate_tick moves online to host_slow once it has been
 * pending slow_ms, and at its deadline cancels it (the request_id is
 * remembered: its reply, when it comes, is refused late_reply) and fires
 * timeout. A reply to the pending request (any authenticated frame with
 * its request_id) ends it and, in host_slow, fires host_ok.
 */
#ifndef EL_SERVICE_GATE_H
#define EL_SERVICE_GATE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define EL_GATE_SCHEMA_VERSION 1
#define EL_GATE_MAX_FRAME 4096
#define EL_GATE_ID_MAX 64     /* device_id, request_id: 1..63 bytes + NUL */
#define EL_GATE_NAME_MAX 32   /* action / param / variable names, string values: 1..31 bytes + NUL */
#define EL_GATE_MAX_DEVICES 8
#define EL_GATE_MAX_ACTIONS 16
#define EL_GATE_MAX_PARAMS 8
#define EL_GATE_MAX_ENUM 8
#define EL_GATE_MAX_VARS 16
#define EL_GATE_MAX_PRECOND 4
#define EL_GATE_WINDOW_MAX 128
#define EL_GATE_KEY_BYTES 32
#define EL_GATE_TAG_BYTES 32
#define EL_GATE_DESC_MAX 96
#define EL_GATE_INT_MAX 9007199254740992.0 /* 2^53 */

typedef enum {
    EL_GATE_OK = 0,
    EL_GATE_TOO_LARGE, EL_GATE_TRUNCATED, EL_GATE_MALFORMED, EL_GATE_UNKNOWN_FIELD, EL_GATE_DUPLICATE_FIELD,
    EL_GATE_MISSING_FIELD, EL_GATE_BAD_FIELD,
    EL_GATE_UNKNOWN_DEVICE, EL_GATE_BAD_TAG,
    EL_GATE_BAD_VERSION,
    EL_GATE_DUPLICATE, EL_GATE_LATE_REPLY,
    EL_GATE_NOT_SYNCED, EL_GATE_OUT_OF_ORDER,
    EL_GATE_EXPIRED, EL_GATE_DEADLINE_TOO_FAR,
    EL_GATE_UNKNOWN_ACTION,
    EL_GATE_UNKNOWN_PARAM, EL_GATE_MISSING_PARAM, EL_GATE_WRONG_TYPE, EL_GATE_OUT_OF_RANGE, EL_GATE_NOT_IN_ENUM,
    EL_GATE_STATE_FORBIDS, EL_GATE_PRECONDITION_FAILED,
    EL_GATE_N_REASONS
} el_gate_reason;

typedef enum {
    EL_GS_ONLINE = 0, EL_GS_HOST_SLOW, EL_GS_LINK_DOWN, EL_GS_MODEL_FAILED, EL_GS_SENSOR_FAULT,
    EL_GS_ACTUATOR_FAULT, EL_GS_SAFE_DEGRADED,
    EL_GS_N
} el_gate_state;

typedef enum {
    EL_GE_HOST_SLOW = 0, EL_GE_HOST_OK, EL_GE_TIMEOUT, EL_GE_LINK_LOST, EL_GE_HANDSHAKE, EL_GE_MODEL_FAILED,
    EL_GE_MODEL_OK, EL_GE_SENSOR_FAULT, EL_GE_ACTUATOR_FAULT, EL_GE_FAULT_CLEARED,
    EL_GE_N
} el_gate_ev;

typedef enum { EL_GT_INTEGER = 0, EL_GT_NUMBER, EL_GT_BOOLEAN, EL_GT_ENUM } el_gate_type;
typedef enum { EL_GOP_EQ = 0, EL_GOP_NE, EL_GOP_LT, EL_GOP_LE, EL_GOP_GT, EL_GOP_GE } el_gate_op;

/* A typed value: i (integer), n (number), b (boolean), e (index into the enum's values). */
typedef struct el_gate_value {
    el_gate_type type;
    int64_t i;
    double n;
    bool b;
    int e;
} el_gate_value;

/* A parameter or a state variable: its type and what it may hold. */
typedef struct el_gate_typedef {
    char name[EL_GATE_NAME_MAX];
    el_gate_type type;
    double min, max;                             /* integer, number (inclusive) */
    char values[EL_GATE_MAX_ENUM][EL_GATE_NAME_MAX]; /* enum */
    int n_values;
} el_gate_typedef;

typedef struct el_gate_precond {
    int var;           /* index into the policy's vars */
    el_gate_op op;     /* boolean and enum variables: eq / ne only */
    el_gate_value value;
} el_gate_precond;

typedef struct el_gate_action {
    char name[EL_GATE_NAME_MAX];
    char description[EL_GATE_DESC_MAX];
    bool safe;
    unsigned states;   /* bit (1u << el_gate_state) per state that allows it */
    el_gate_typedef params[EL_GATE_MAX_PARAMS];
    int n_params;
    el_gate_precond pre[EL_GATE_MAX_PRECOND];
    int n_pre;
} el_gate_action;

typedef struct el_gate_device {
    char id[EL_GATE_ID_MAX];
    uint8_t key[EL_GATE_KEY_BYTES];
} el_gate_device;

/* The action policy, as gate_policy.c reads it (or as firmware fills it in). */
typedef struct el_gate_policy {
    char version[EL_GATE_DESC_MAX];
    el_gate_device devices[EL_GATE_MAX_DEVICES];
    int n_devices;
    el_gate_typedef vars[EL_GATE_MAX_VARS];
    int n_vars;
    el_gate_action actions[EL_GATE_MAX_ACTIONS];
    int n_actions;
    int window;                 /* request ids remembered (1..EL_GATE_WINDOW_MAX) */
    uint64_t max_deadline_ms;   /* a deadline at most this far ahead of the gate's clock */
    uint64_t slow_ms;           /* pending this long: host_slow */
} el_gate_policy;

/* An internal event: a proposal that passed every check. */
typedef struct el_gate_event {
    int device;                              /* index into policy.devices */
    char request_id[EL_GATE_ID_MAX];
    uint64_t sequence;
    uint64_t deadline_ms;
    int action;                              /* index into policy.actions */
    el_gate_value params[EL_GATE_MAX_PARAMS]; /* in the action's parameter order */
} el_gate_event;

/* What el_gate_submit decided. */
typedef struct el_gate_result {
    el_gate_reason reason;      /* EL_GATE_OK: event is filled in */
    char detail[160];           /* which field / value / limit (never the tag or a key) */
    el_gate_event event;
} el_gate_result;

/* One audit record: every submit (accepted or refused), state transition,
 * handshake and timeout. Holds no parameter values. */
typedef enum { EL_GA_PROPOSAL = 0, EL_GA_TRANSITION, EL_GA_HANDSHAKE, EL_GA_TIMEOUT } el_gate_audit_kind;
typedef struct el_gate_audit_rec {
    el_gate_audit_kind kind;
    uint64_t now_ms;
    el_gate_reason reason;      /* proposals */
    const char *detail;
    const char *device_id;      /* "" when unknown (not authenticated ones are not named) */
    const char *request_id;     /* "" when not authenticated */
    uint64_t sequence;
    const char *action;         /* "" when not known */
    el_gate_state from, to;     /* the state before and after */
    el_gate_ev ev;              /* transitions */
} el_gate_audit_rec;
typedef void (*el_gate_audit_fn)(void *user, const el_gate_audit_rec *r);
typedef uint64_t (*el_gate_clock_fn)(void *user); /* monotonic milliseconds */

/* The handshake's answer: the gate's clock, the next sequence it accepts for
 * the device, and an HMAC of both with the device key so the host can trust
 * them: tag = HMAC-SHA256(key, "edgellm-gate-sync/1" 0x00, nonce[16],
 * u64 now_ms, u64 next_sequence). */
typedef struct el_gate_sync {
    uint64_t now_ms;
    uint64_t next_sequence;
    uint8_t tag[EL_GATE_TAG_BYTES];
} el_gate_sync;

typedef struct el_gate_window_entry {
    int8_t device;          /* -1: empty */
    bool cancelled;         /* a timed-out request: its reply is late */
    char request_id[EL_GATE_ID_MAX];
} el_gate_window_entry;

/* The gate: everything it will ever use. Treat as opaque. */
typedef struct el_gate {
    el_gate_policy pol;
    el_gate_state state;
    el_gate_clock_fn clock;
    void *clock_user;
    el_gate_audit_fn audit;
    void *audit_user;
    uint64_t last_seq[EL_GATE_MAX_DEVICES];
    bool synced[EL_GATE_MAX_DEVICES];
    el_gate_value vars[EL_GATE_MAX_VARS];
    bool var_set[EL_GATE_MAX_VARS];
    el_gate_window_entry window[EL_GATE_WINDOW_MAX];
    int window_next;
    bool pending;
    int pending_device;
    char pending_id[EL_GATE_ID_MAX];
    uint64_t pending_start, pending_deadline;
} el_gate;

/* Copies the policy in, starts in link_down with no device synced. audit may
 * be NULL; clock may not. 0, or -1 when the policy breaks its own limits
 * (err says which). Allocates nothing; calls sodium_init. */
int el_gate_init(el_gate *g, const el_gate_policy *pol, el_gate_clock_fn clock, void *clock_user,
                 el_gate_audit_fn audit, void *audit_user, char *err, size_t cap);

/* Checks one frame (len bytes, need not be NUL-terminated) in the order
 * above. Returns the reason (also in r->reason); every call is audited. */
el_gate_reason el_gate_submit(el_gate *g, const char *frame, size_t len, el_gate_result *r);

/* Applies a state-machine event. 0, or -1 if the table has no transition for
 * (state, ev) (state unchanged). timeout / link_lost / model_failed /
 * sensor_fault / actuator_fault cancel the pending request. The handshake
 * event is refused here (-1): it happens only through el_gate_handshake,
 * which also syncs the device. */
int el_gate_event_apply(el_gate *g, el_gate_ev ev);
/* A (re)connection: the device is synced (its next sequence is the last
 * accepted + 1, kept across reconnects), link_down and safe_degraded go
 * online. -1 for an unknown device. */
int el_gate_handshake(el_gate *g, const char *device_id, const uint8_t nonce[16], el_gate_sync *out);
/* The host is working on request_id for device_id until deadline_ms. -1 if
 * another request is pending, the device is unknown or the id malformed. */
int el_gate_expect(el_gate *g, const char *device_id, const char *request_id, uint64_t deadline_ms);
/* Moves time on: host_slow after slow_ms pending, timeout at the pending
 * deadline. Returns 1 when a pending request was cancelled now, else 0. */
int el_gate_tick(el_gate *g);
/* Sets a state variable (by name; the value's type must match and be in
 * range). 0 or -1. */
int el_gate_set_var(el_gate *g, const char *name, const el_gate_value *v);
el_gate_state el_gate_get_state(const el_gate *g);

/* The tag over a frame's canonical bytes (see above). params: the params
 * value's exact bytes. */
void el_gate_tag(const uint8_t key[EL_GATE_KEY_BYTES], uint64_t schema_version, const char *device_id,
                 const char *request_id, uint64_t sequence, uint64_t deadline_ms, const char *action,
                 const char *params, size_t params_len, uint8_t out[EL_GATE_TAG_BYTES]);
/* The host's encoder: a whole tagged frame into buf (NUL-terminated).
 * params_json: the params object's text (signed as written). Returns the
 * length, or -1 if it does not fit or a field is malformed. */
int el_gate_frame_write(char *buf, size_t cap, const uint8_t key[EL_GATE_KEY_BYTES], uint64_t schema_version,
                        const char *device_id, const char *request_id, uint64_t sequence, uint64_t deadline_ms,
                        const char *action, const char *params_json);
/* Checks a handshake answer with the device key: 0 when its tag is right. */
int el_gate_sync_verify(const uint8_t key[EL_GATE_KEY_BYTES], const uint8_t nonce[16], const el_gate_sync *s);

/* Stable names (the audit log's and the CLI's codes). */
const char *el_gate_reason_name(el_gate_reason r);
const char *el_gate_state_name(el_gate_state s);
const char *el_gate_ev_name(el_gate_ev e);
const char *el_gate_type_name(el_gate_type t);
/* Name -> value; -1 when unknown. */
int el_gate_state_parse(const char *s);
int el_gate_ev_parse(const char *s);
/* The transition table: the state after ev in s, or -1 (no transition). */
int el_gate_next_state(el_gate_state s, el_gate_ev ev);
/* Whether s is a well-formed name ([a-z0-9_], 1..31) or id ([A-Za-z0-9._:-], 1..63). */
bool el_gate_name_ok(const char *s);
bool el_gate_id_ok(const char *s);

/* ---- host side (gate_policy.c, cJSON) ---- */

#define EL_GATE_POLICY_FORMAT "edgellm-actions/1"
#define EL_GATE_POLICY_MAX_BYTES (64u * 1024u)
/* Parses an action policy (format in README "Proposal gate"). base_dir: where
 * relative "key_file" paths are (NULL: keys must be inline "key_hex"). 0, or
 * -1 with err naming the JSON path (a syntax error: line and column). *out
 * is written only on success. */
int el_gate_policy_parse(const char *text, size_t len, const char *base_dir, el_gate_policy *out, char *err,
                         size_t cap);
/* Reads and parses a policy file (key files relative to its directory). */
int el_gate_policy_load(const char *path, el_gate_policy *out, char *err, size_t cap);
/* The JSON Schema (malloc'd text) of what the model fills in:
 * {"action": one of the actions, "params": that action's typed params}.
 * NULL on OOM. */
char *el_gate_policy_schema(const el_gate_policy *p);
/* Parses a state-variable value given as text ("true", "21.5", "auto") for
 * var: 0, or -1 with err. */
int el_gate_value_parse(const el_gate_policy *p, int var, const char *text, el_gate_value *out, char *err,
                        size_t cap);
/* The index of the variable / action / device named s, or -1. */
int el_gate_policy_var(const el_gate_policy *p, const char *s);
int el_gate_policy_action(const el_gate_policy *p, const char *s);
int el_gate_policy_device(const el_gate_policy *p, const char *s);

#endif
