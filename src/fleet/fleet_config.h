/*
 * fleet_config.h — the two JSON files a rollout reads (layer L6, issue 35
 * part 3): the fleet config (the simulated devices, the stages, the traffic
 * and the canary) and the gate file (the health thresholds), plus the pure
 * rules a rollout and its replay share: stage sizes and gate verdicts.
 *
 * Contract:
 *   - Parsers of outside bytes: strict JSON (cJSON), every member checked
 *     for type and range, unknown members refused, before anything is
 *     allocated beyond the parse itself. A refusal returns -1 with a message
 *     that starts with the file's path (or "<label>") and names the member
 *     ("fleet.json: devices[1].threads: expected an integer 1..64").
 *   - The parsed structs hold no pointers: fixed-size arrays and strings,
 *     so a config is copied and freed by value.
 *   - Stage sizes: stage k updates devices [0, n_k) in index order, n_k =
 *     ceil(N * pct_k / 100), at least 1 and at least the previous stage's;
 *     the last stage must be 100 %.
 *   - Gate verdicts are a pure function of (gates, observation): the same
 *     numbers give the same decision, which is what `fleet replay` checks.
 */
#ifndef EL_FLEET_CONFIG_H
#define EL_FLEET_CONFIG_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define EL_FLEET_MAX_DEVICES 64
#define EL_FLEET_MAX_CLASSES 8
#define EL_FLEET_MAX_STAGES 8
#define EL_FLEET_MAX_PROMPTS 8
#define EL_FLEET_PROMPT_CAP 256

typedef struct el_fleet_class {
    char name[32];        /* [A-Za-z0-9._-], 1..31 bytes */
    int count;            /* devices of this class, 1..64 (all classes: <= 64) */
    uint64_t mem_budget;  /* serve --mem-budget, bytes; 0: the device's memory */
    int threads;          /* serve -t, 1..64 */
    int temp_mc;          /* the thermal source file's reading, millidegrees C (-100000..250000) */
} el_fleet_class;

typedef struct el_fleet_config {
    el_fleet_class classes[EL_FLEET_MAX_CLASSES];
    int n_classes, n_devices;
    int stages[EL_FLEET_MAX_STAGES];       /* percentages, strictly increasing, 1..100, the last 100 */
    int n_stages;
    int requests_per_device;               /* traffic per device per stage, 1..1000 */
    int n_predict;                         /* tokens per traffic request, 1..256 */
    char prompts[EL_FLEET_MAX_PROMPTS][EL_FLEET_PROMPT_CAP];   /* traffic prompts */
    int n_prompts;
    char canary[EL_FLEET_MAX_PROMPTS][EL_FLEET_PROMPT_CAP];    /* fixed canary prompts (greedy) */
    int n_canary;
    int canary_n_predict;                  /* 1..256 */
    int ctx;                               /* serve -c, 64..8192 */
    char kill_switch[512];                 /* a file whose existence halts and rolls back ("" none) */
} el_fleet_config;

typedef struct el_fleet_gates {
    double min_crash_free_rate;    /* 0..1: devices of the stage still running / devices of the stage */
    double max_p95_ttft_ms;        /* > 0: p95 time to first token over the stage's devices (their /metrics) */
    double max_refusal_rate;       /* 0..1: (rejected + failed) / requests, from the stage's devices' /metrics */
    double min_canary_agreement;   /* 0..1: canary prompts whose greedy output equals the previous version's */
    int max_install_failures;      /* >= 0: installs in the stage that did not activate the package */
} el_fleet_gates;

/* What a stage measured (logged; replay recomputes the verdict from it). */
typedef struct el_fleet_obs {
    double crash_free_rate, p95_ttft_ms, refusal_rate, canary_agreement;
    int install_failures;
} el_fleet_obs;

enum { EL_GATE_CRASH_FREE, EL_GATE_P95_TTFT, EL_GATE_REFUSAL, EL_GATE_CANARY, EL_GATE_INSTALL, EL_GATE__N };
/* The observation's member names ("crash_free_rate", ...), in the enum's order. */
const char *el_fleet_gate_name(int g);

/* Parsers: 0, or -1 with msg "<label>: <member>: <what>". */
int el_fleet_config_parse(const char *text, size_t len, const char *label, el_fleet_config *c, char *msg, size_t cap);
int el_fleet_gates_parse(const char *text, size_t len, const char *label, el_fleet_gates *g, char *msg, size_t cap);
/* Reads path (a regular file, at most 1 MiB) and parses it, label = path. */
int el_fleet_config_load(const char *path, el_fleet_config *c, char *msg, size_t cap);
int el_fleet_gates_load(const char *path, el_fleet_gates *g, char *msg, size_t cap);

/* Devices updated once stage k (0-based) is done: ceil(N * pct / 100), >= 1,
 * >= the previous stage's. */
int el_fleet_stage_target(const int *stages, int k, int n_devices);
/* The verdict of each gate (pass[g]) and the decision: true = advance. */
bool el_fleet_gates_eval(const el_fleet_gates *g, const el_fleet_obs *o, bool pass[EL_GATE__N]);
/* The class of device i (classes in order, each count devices). */
const el_fleet_class *el_fleet_device_class(const el_fleet_config *c, int i);

/* The gates / config as canonical JSON objects (the rollout log's "start"
 * line); malloc'd, NULL when out of memory. */
char *el_fleet_gates_json(const el_fleet_gates *g);

#endif
