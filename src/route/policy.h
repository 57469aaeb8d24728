/*
 * policy.h — the routing policy (layer L6): which data classes may leave the
 * device, on what legal basis, and the device thresholds the router and the
 * thermal monitor apply. Read from a versioned JSON file (`serve --policy
 * FILE`) by a strict parser; a built-in policy applies without one.
 *
 * Contract:
 *   - el_policy_parse accepts exactly the format documented in README
 *     ("Routing"): a JSON object with "format": "edgellm-policy/1", a
 *     "version" string (recorded with every decision), "classes" (1..32
 *     named classes, each {"cloud": "never"|"with_consent"|"allowed",
 *     "legal_basis": string, required unless "never"}) and optional
 *     "prefer", "thermal", "battery", "cloud", "canary" objects. Any other key, a
 *     duplicate key, a wrong type, a value out of range or an unknown format
 *     is refused with a message naming the JSON path (and, for a syntax
 *     error, the line and column). Nothing is half-filled on failure: *out
 *     is written only on success.
 *   - A request without a data class gets the strictest class (the one whose
 *     cloud rule is the most restrictive; the first such in file order):
 *     el_policy_strictest.
 *   - The parser is pure (no I/O, no globals) and fuzzed (fuzz/fuzz_policy.c).
 */
#ifndef EL_SERVICE_POLICY_H
#define EL_SERVICE_POLICY_H
#include <stdbool.h>
#include <stddef.h>

#define EL_POLICY_FORMAT "edgellm-policy/1"
#define EL_POLICY_MAX_CLASSES 32
#define EL_POLICY_NAME_MAX 64      /* class names: 1..63 bytes of [a-z0-9_.-] */
#define EL_POLICY_TEXT_MAX 128     /* version, legal_basis: 1..127 printable ASCII bytes */
#define EL_POLICY_MAX_BYTES (64u * 1024u)

/* Ordered from strictest to most permissive. */
typedef enum { EL_CLOUD_NEVER = 0, EL_CLOUD_WITH_CONSENT = 1, EL_CLOUD_ALLOWED = 2 } el_cloud_rule;

typedef struct el_policy_class {
    char name[EL_POLICY_NAME_MAX];
    el_cloud_rule cloud;
    char legal_basis[EL_POLICY_TEXT_MAX]; /* "" when cloud == never */
} el_policy_class;

typedef struct el_policy {
    char version[EL_POLICY_TEXT_MAX];
    el_policy_class classes[EL_POLICY_MAX_CLASSES];
    int n_classes;
    bool prefer_cloud;          /* "prefer": "local" (default) | "cloud" — when both may run it */
    /* thermal (degrees Celsius): derated at >= derate_c, hot at >= hot_c; a
     * level is left only below its threshold minus hysteresis_c */
    double derate_c, hot_c, hysteresis_c;
    int max_tokens_derated;     /* output cap while derated (>= 1) */
    int slots_derated;          /* slots admitted while derated (>= 1) */
    int sample_ms;              /* thermal sampling period (50..60000) */
    int battery_min_percent;    /* below this and discharging, local generation is avoided (0: off) */
    int cloud_down_s;           /* a failed cloud call marks the cloud down this long (0..3600) */
    int cloud_timeout_s;        /* whole cloud request (1..3600) */
    double canary_ratio;        /* "canary": {"ratio": 0..1}: the share of cloud-eligible requests routed
                                   local (not streamed) that also run in the cloud, to compare (0: off) */
} el_policy;

/* The built-in policy (version "builtin-1"): local_only (never),
 * cloud_with_consent (with_consent, basis "consent"), cloud_allowed
 * (allowed, basis "contract"); prefer local; thermal 80/95/5 °C, 64 tokens
 * and 1 slot while derated, sampled every 2000 ms; battery off; cloud down
 * 30 s after a failure, 120 s timeout. */
void el_policy_builtin(el_policy *out);

/* Parses a policy document. 0, or -1 with err (NUL-terminated, at most
 * cap bytes) saying what is wrong and where. */
int el_policy_parse(const char *text, size_t len, el_policy *out, char *err, size_t cap);
/* Reads and parses a policy file (a regular file of at most
 * EL_POLICY_MAX_BYTES). 0, or -1 with err (prefixed by the path). */
int el_policy_load(const char *path, el_policy *out, char *err, size_t cap);

/* The class named name, or NULL. */
const el_policy_class *el_policy_find(const el_policy *p, const char *name);
/* The strictest class (never NULL for a parsed or built-in policy). */
const el_policy_class *el_policy_strictest(const el_policy *p);
const char *el_cloud_rule_name(el_cloud_rule r);
/* Whether s is a well-formed class name (1..63 bytes of a-z 0-9 _ - .). */
bool el_policy_name_ok(const char *s);

#endif
