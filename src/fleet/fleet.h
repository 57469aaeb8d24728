/*
 * fleet.h — a simulated fleet and a staged rollout on it (layer L6, issue 35
 * part 3; `edgellm fleet`, docs/FLEET.md).
 *
 * Contract:
 *   - el_fleet_run starts N real device processes on this machine: each an
 *     `edgellm serve --store DIR/dev-I/store` on a loopback port, with its
 *     class's threads, memory budget and a thermal source file holding its
 *     class's temperature, and a telemetry spool. Every store first gets the
 *     base package (`edgellm install`), then the new package goes out in
 *     stages (fleet_config.h: stage sizes), each install a real `edgellm
 *     install` process of that device, its serve process stopped before and
 *     restarted after.
 *   - After each stage the fleet drives traffic to every device and reads
 *     the gates' inputs from the devices: a device process that died is a
 *     crash, p95 TTFT and refusals come from each device's own /metrics, the
 *     canary compares each newly updated device's greedy output on the fixed
 *     prompts with what the same device answered on its previous version.
 *   - A failing gate, the kill switch (the config's file appearing, or
 *     SIGINT / SIGTERM / SIGUSR1 to the fleet) halts the rollout and returns
 *     every device that took the package to its previous slot (`edgellm
 *     rollback`), restarting it; the log then shows each device's version.
 *   - A device killed mid-install (the test fault kill_device/kill_ms: the
 *     fleet SIGKILLs that device's installer kill_ms after it started) is
 *     "rebooted": its store must hold one complete version, the previous or
 *     the new (verified in full); on the previous one the install is retried
 *     once. Anything else is an error (exit 1).
 *   - The rollout log (OUT/rollout.jsonl) has one JSON object a line, each
 *     written and fsynced before the step it records has effects beyond it;
 *     el_fleet_replay recomputes every decision from it.
 */
#ifndef EL_FLEET_H
#define EL_FLEET_H
#include <stdio.h>

#include "fleet/fleet_config.h"

typedef struct el_fleet_run_opts {
    const char *self_exe;     /* the edgellm binary the devices run */
    const char *base_pkg;     /* the version every device starts on (a signed MODEL.gguf) */
    const char *new_pkg;      /* the version rolled out */
    const char *pub;          /* the key both are signed with (each store pins it) */
    const char *out_dir;      /* created; the devices' folders and rollout.jsonl */
    el_fleet_config cfg;
    el_fleet_gates gates;
    int kill_device;          /* test fault: -1 none, else the device whose first install is SIGKILLed */
    int kill_ms;              /* ... this many ms after the installer started */
    FILE *progress;           /* progress lines (stderr), or NULL */
} el_fleet_run_opts;

/* 0: rolled out to 100 %; 1: halted (a gate or the kill switch) and rolled
 * back; -1: an error (msg), the devices stopped. */
int el_fleet_run(const el_fleet_run_opts *o, char *msg, size_t cap);

/* Replays a rollout log: re-derives each gate's verdicts and decision from
 * its logged observation with the logged gates, each stage's size, the
 * rollback set after a halt and the outcome; prints one line per decision to
 * out. 0: every decision reproduced; 1: one differs (msg names the line);
 * -1: the log is unreadable or malformed (msg names the line and member). */
int el_fleet_replay(const char *log_path, FILE *out, char *msg, size_t cap);
/* The same over the log's bytes (the fuzz target's entry). */
int el_fleet_replay_text(const char *text, size_t len, const char *label, FILE *out, char *msg, size_t cap);

#endif
