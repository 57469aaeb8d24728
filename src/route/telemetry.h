/*
 * telemetry.h — content-free telemetry (layer L6, issue 18 item 3) and the
 * rotating JSONL spool that it and the audit log (audit.h) write through.
 *
 * Contract — content-free by construction:
 *   - An event (el_tev) holds only enum codes, numbers and booleans: it has
 *     no pointer and no character array, so no prompt, message, stop word,
 *     tool name, header value, URL or model output can enter one. Every
 *     string written for an event comes from a constant table in
 *     telemetry.c (event kinds, route reasons, outcomes, finish reasons,
 *     error codes, thermal levels, bucket labels) or from the sink's fixed
 *     identifiers, set by the operator at startup and checked to be
 *     [A-Za-z0-9._-] (the deployment fingerprint, the model id, the device
 *     class) or taken from the policy file (its version and class names;
 *     a data class a client sent that the policy does not name is written
 *     as "unknown", never as sent).
 *   - Times (TTFT, inter-token latency, total) and the process's peak
 *     memory are written as bucket labels, not values.
 *   - Spooled locally (el_telemetry_cfg.dir: DIR/telemetry.jsonl, one JSON
 *     object per line), off unless a directory is given; the file is
 *     rotated when the next line would take it over max_bytes
 *     (telemetry.jsonl -> telemetry.1.jsonl -> ... -> telemetry.K.jsonl,
 *     the oldest dropped), so the spool holds at most (keep + 1) x
 *     max_bytes.
 *   - Optional OTLP/HTTP JSON export of the same events as log records
 *     (otlp_url, e.g. http://collector:4318/v1/logs; off unless given),
 *     with OpenTelemetry's gen_ai.* attribute names where they apply, from
 *     a background thread with a bounded queue (full: the event is counted
 *     as dropped, never blocks a request). el_telemetry_close sends what is
 *     queued (each post has a 5 s timeout; once one fails while stopping,
 *     the rest is dropped, so stopping stays bounded).
 *   - Thread-safe; el_telemetry_emit never blocks on the network.
 */
#ifndef EL_SERVICE_TELEMETRY_H
#define EL_SERVICE_TELEMETRY_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "edgellm.h"
#include "route/policy.h"
#include "route/router.h"
#include "route/thermal.h"

/* ---- the rotating JSONL spool ---- */
typedef struct el_spool el_spool;
/* Opens (appends to) path, creating it 0600. max_bytes >= 256; keep 1..99
 * rotated files. NULL with err. */
el_spool *el_spool_open(const char *path, long max_bytes, int keep, char *err, size_t cap);
/* Appends line (no newline in it) and '\n', rotating first when needed.
 * 0, or -1 (the write failed; counted). A short write (a disk that filled
 * mid-line) is cut back to the previous end, so the file never holds half a
 * line; when that cut fails too the spool stops writing (every later line
 * counts as failed) rather than glue a line onto half of another. */
int el_spool_write(el_spool *s, const char *line, size_t len);
/* Lines that failed to be written (el_spool_write returned -1) since open. */
long el_spool_failed(el_spool *s);
/* The path of rotated file i (1..keep): "a/b.jsonl" -> "a/b.i.jsonl",
 * "a/b" -> "a/b.i". */
void el_spool_rotated_name(const char *path, int i, char *out, size_t cap);
void el_spool_close(el_spool *s); /* NULL is fine */

/* ---- events ---- */
typedef enum {
    EL_TEV_REQUEST_END = 0, /* a request ran (local or cloud) to its end: done or failed */
    EL_TEV_CANCELLED,       /* a request cancelled (client gone, stop, shutdown) */
    EL_TEV_ROUTE,           /* a routing decision (local / cloud / declined) */
    EL_TEV_REFUSED,         /* refused before a decision (malformed routing metadata) */
    EL_TEV_LOAD_ERROR,      /* the local model could not be loaded or verified */
    EL_TEV_THERMAL,         /* a thermal level transition */
    EL_TEV__N
} el_tev_kind;

typedef enum { EL_TOP_NONE = 0, EL_TOP_CHAT, EL_TOP_COMPLETION, EL_TOP_NATIVE, EL_TOP_EMBEDDINGS, EL_TOP__N } el_tev_op;

/* Route reasons (router.c's codes and the cloud failures), as codes. */
typedef enum {
    EL_RR_NONE = 0,
    EL_RR_LOCAL_PREFERRED,
    EL_RR_LOCAL_ONLY_CLASS,
    EL_RR_POLICY_PREFERS_CLOUD,
    EL_RR_DEADLINE,
    EL_RR_UNKNOWN_DATA_CLASS,
    EL_RR_MODEL_UNAVAILABLE,
    EL_RR_THERMAL_HOT,
    EL_RR_MEMORY_PRESSURE,
    EL_RR_BATTERY_LOW,
    EL_RR_BAD_ROUTE_METADATA,
    EL_RR_OTHER, /* a reason this table does not know (written as "other") */
    EL_RR__N
} el_route_reason;

typedef enum {
    EL_TFIN_NONE = 0, EL_TFIN_STOP, EL_TFIN_LENGTH, EL_TFIN_CANCELLED, EL_TFIN_ERROR, EL_TFIN__N
} el_tev_finish;

typedef enum {
    EL_TCLOUD_NONE = 0, EL_TCLOUD_UNREACHABLE, EL_TCLOUD_TIMEOUT, EL_TCLOUD_HTTP_ERROR, EL_TCLOUD_BAD_RESPONSE,
    EL_TCLOUD_STREAM_BROKEN, EL_TCLOUD__N
} el_tev_cloud_err;

/* A load error that is not an el_error_code: the model package failed its checks. */
#define EL_TEV_ERR_PACKAGE 100

/* One event. Only codes and numbers: see the contract. */
typedef struct el_tev {
    el_tev_kind kind;
    el_tev_op op;
    int route_source;           /* el_route_source, or -1: none */
    el_route_reason reason;
    int data_class;             /* index into the policy's classes; -1: none given or not in the policy */
    bool class_given;           /* the client sent a class (else the strictest applied) */
    bool consent;
    bool streamed;
    bool canary;
    el_thermal_level thermal;   /* the level now (EL_TEV_THERMAL: the new level) */
    el_thermal_level thermal_from; /* EL_TEV_THERMAL: the level left */
    el_tev_finish finish;
    int error;                  /* el_error_code (0: none), or EL_TEV_ERR_PACKAGE */
    el_tev_cloud_err cloud_error;
    int http_status;            /* the answer's status (0: none) */
    double ttft_ms, itl_ms, total_ms; /* < 0: not measured (written as buckets) */
    uint64_t peak_mem_bytes;    /* 0: not measured (written as a bucket) */
    int n_prompt, n_gen;        /* tokens (-1: unknown) */
    int spec_drafted, spec_accepted; /* speculative decoding (drafted 0: none) */
    int threads_active;         /* generation threads in use (0: unknown) */
    uint32_t lora;              /* the request's LoRA set: the 8 hex digits of its fingerprint suffix
                                   ("+lora-1a2b3c4d" → 0x1a2b3c4d), a hash of adapter hashes and scales; 0: none */
} el_tev;

/* A zeroed event of kind k with the "none" values set. */
el_tev el_tev_init(el_tev_kind k);
/* The code of a router reason string (EL_RR_OTHER when unknown). */
el_route_reason el_route_reason_code(const char *reason);
const char *el_route_reason_name(el_route_reason r);
/* Bucket labels ("<=100ms", ">60s"; "<=512MiB", ">64GiB"); constant strings. */
const char *el_tev_time_bucket(double ms);
const char *el_tev_mem_bucket(uint64_t bytes);
/* The process's peak resident memory (getrusage), bytes; 0 when unknown. */
uint64_t el_tev_peak_rss(void);

/* ---- the sink ---- */
typedef struct el_telemetry_cfg {
    const char *dir;            /* spool directory (created 0700 if absent), or NULL: no spool */
    long max_bytes;             /* per file; <= 0: 1 MiB */
    int keep;                   /* rotated files kept; <= 0: 3 */
    const char *otlp_url;       /* OTLP/HTTP JSON logs endpoint, or NULL: no export */
    const char *model_id;       /* gen_ai.request.model (checked/normalised to [A-Za-z0-9._-]) */
    const el_policy *policy;    /* class names and version (copied) */
} el_telemetry_cfg;

typedef struct el_telemetry el_telemetry;

/* NULL with err when the directory cannot be made or the URL is not
 * http(s)://. A cfg with neither dir nor otlp_url gives NULL and no error
 * (telemetry off); every function takes NULL as "off". */
el_telemetry *el_telemetry_open(const el_telemetry_cfg *cfg, char *err, size_t cap);
/* The deployment fingerprint (known after the model is hashed): kept only
 * when it is 1..63 bytes of [A-Za-z0-9._-], else "invalid". */
void el_telemetry_set_fingerprint(el_telemetry *t, const char *fp);
void el_telemetry_emit(el_telemetry *t, const el_tev *e);
/* Counters: events written to the spool, sent over OTLP, dropped (queue
 * full or a failed post). */
void el_telemetry_counts(el_telemetry *t, long *spooled, long *exported, long *dropped);
/* The JSONL line of e (malloc'd; NULL on OOM). */
char *el_telemetry_line(el_telemetry *t, const el_tev *e);
void el_telemetry_close(el_telemetry *t);

/* An identifier as telemetry keeps it: [A-Za-z0-9._-] kept, anything else
 * '_', at most cap-1 bytes ("" -> "unknown"). */
void el_tev_ident(const char *in, char *out, size_t cap);

#endif
