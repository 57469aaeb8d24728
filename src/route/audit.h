/*
 * audit.h — the routing audit log (layer L6, issue 18 item 4): one JSON
 * line per routing decision and refusal (`serve --audit-log FILE`), rotated
 * through the telemetry spool (FILE -> FILE.1 ... with a size cap), and its
 * reader for `edgellm route explain`.
 *
 * Contract:
 *   - Content-free, as telemetry (telemetry.h): a line holds the decision
 *     inputs as codes, numbers and buckets — data class (the policy's name,
 *     or null when the client sent a name the policy lacks: never the name
 *     as sent), where the class came from, consent, prompt length (tokens
 *     and bucket), max tokens (and bucket), deadline (ms and bucket), the
 *     endpoint's capabilities; the device: model verified, memory pressure
 *     and headroom bucket, thermal level and factor, battery percent and
 *     bucket, discharging, cloud configured / reachable and RTT bucket, the
 *     measured local speeds — plus the policy version, the deployment
 *     fingerprint, the decision (source, reason, HTTP status) and whether
 *     it came from the decision cache or was a canary. No prompt, no
 *     header value, no free text.
 *   - Replayable: el_audit_parse gives back the (request, device) that
 *     el_route_decide reads, so `route explain --audit-log F --line N`
 *     decides again with the serve's own function and compares. The
 *     numbers el_route_decide uses (tokens, max tokens, deadline, speeds,
 *     thermal factor, battery) are recorded exactly for that reason; the
 *     buckets are for reading.
 *   - el_audit_parse is a parser of outside bytes: strict (types, ranges),
 *     fuzzed (fuzz/fuzz_audit.c).
 */
#ifndef EL_SERVICE_AUDIT_H
#define EL_SERVICE_AUDIT_H
#include <stdbool.h>
#include <stddef.h>

#include "gate/gate.h"
#include "route/policy.h"
#include "route/router.h"

typedef struct el_audit el_audit;

/* NULL with err when the file cannot be opened. max_bytes <= 0: 1 MiB; keep <= 0: 3. */
el_audit *el_audit_open(const char *path, long max_bytes, int keep, char *err, size_t cap);
void el_audit_close(el_audit *a); /* NULL is fine */
/* Lines that could not be written (disk full, I/O error) since open; 0 for NULL. */
long el_audit_failed(el_audit *a);
/* The deployment fingerprint for the lines that follow (checked as telemetry's). */
void el_audit_set_fingerprint(el_audit *a, const char *fp);
/* Appends a decision (x and s: what el_route_decide read; r: its result). NULL a: no-op. */
void el_audit_decision(el_audit *a, const el_policy *p, const el_route_req *x, const el_route_device *s,
                       const el_route *r);
/* Appends a refusal before any decision (malformed routing metadata: reason
 * "bad_route_metadata", status 400). */
void el_audit_refusal(el_audit *a, const el_policy *p, const char *reason, int status);

/* Appends a proposal-gate record (`edgellm act --audit-log FILE`): one line
 * {"ts_ms", "fingerprint", "source": "gate", "kind": proposal | transition |
 * handshake | timeout, "decision": accepted | refused (proposals), "reason"
 * (the gate's stable code), "device_id", "request_id", "sequence", "action"
 * (authenticated fields only: "" for a frame that failed the source check),
 * "state", "state_after", "event" (transitions), "gate_ms" (the gate's
 * clock)}. No parameter value and no detail text. NULL a: no-op. These
 * lines are not routing decisions: el_audit_parse refuses them. */
void el_audit_gate(el_audit *a, const el_gate_audit_rec *r);

/* The line for a decision (malloc'd JSON object text; NULL on OOM). ts_ms: its time. */
char *el_audit_line(const el_policy *p, const char *fingerprint, const el_route_req *x, const el_route_device *s,
                    const el_route *r, long long ts_ms);

/* A recorded line, read back. */
typedef struct el_audit_rec {
    bool refusal;            /* a refusal line: no inputs to replay */
    el_route_req x;
    el_route_device s;
    el_route_source source;  /* the decision recorded */
    char reason[48];
    int status;
    char policy_version[EL_POLICY_TEXT_MAX];
    bool cached;
} el_audit_rec;

/* Parses one line. 0, or -1 with err naming the field. */
int el_audit_parse(const char *line, size_t len, el_audit_rec *out, char *err, size_t cap);
/* Parses a device-state document (the "device" object's shape; every key
 * optional, defaults: model verified, no pressure, normal, factor 1, no
 * battery, cloud configured and up, no measured speed). 0, or -1 with err. */
int el_audit_parse_device(const char *text, size_t len, el_route_device *out, char *err, size_t cap);
/* The healthy default device state described above. */
void el_audit_default_device(el_route_device *s);

#endif
