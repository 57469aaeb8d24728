/*
 * fleet_run.c — the staged rollout over a simulated fleet (fleet.h states
 * the contract): set up the devices on the base version, roll the new
 * version out stage by stage, measure, gate, halt and roll back, and write
 * every step to the rollout log before it takes effect.
 */
#include "fleet/fleet.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "deploy/manifest_format.h"
#include "deploy/store.h"
#include "fleet/fleet_device.h"

/* ---- the kill switch: the config's file, or a signal to the fleet ---- */
static volatile sig_atomic_t g_signal;
static void on_signal(int sig) { g_signal = sig; }

typedef struct fleet {
    const el_fleet_run_opts *o;
    fleet_dev dev[EL_FLEET_MAX_DEVICES];
    int n;
    FILE *log;
    int seq;
    int64_t base_version, new_version;
    char new_sha[65];
    bool killed;              /* the kill switch fired */
    char kill_source[16];
} fleet;

static void progress(const fleet *f, const char *fmt, ...) {
    if (!f->o->progress) return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(f->o->progress, "fleet: ");
    vfprintf(f->o->progress, fmt, ap);
    fputc('\n', f->o->progress);
    fflush(f->o->progress);
    va_end(ap);
}

/* Appends one event (consumed) to the log, fsynced: -1 when it cannot. */
static int log_event(fleet *f, cJSON *ev) {
    cJSON *line = cJSON_CreateObject();
    cJSON_AddNumberToObject(line, "seq", ++f->seq);
    cJSON_AddNumberToObject(line, "t", (double)time(NULL));
    for (cJSON *it = ev->child; it;) { /* move ev's members after seq and t */
        cJSON *next = it->next;
        cJSON_AddItemToObject(line, it->string, cJSON_DetachItemViaPointer(ev, it));
        it = next;
    }
    cJSON_Delete(ev);
    char *s = cJSON_PrintUnformatted(line);
    cJSON_Delete(line);
    if (!s) return -1;
    int rc = fprintf(f->log, "%s\n", s) < 0 || fflush(f->log) || fsync(fileno(f->log)) ? -1 : 0;
    free(s);
    return rc;
}

static cJSON *event(const char *kind) {
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "event", kind);
    return e;
}

static bool kill_switch(fleet *f) {
    if (f->killed) return true;
    if (g_signal) {
        f->killed = true;
        snprintf(f->kill_source, sizeof f->kill_source, "signal");
    } else if (f->o->cfg.kill_switch[0] && access(f->o->cfg.kill_switch, F_OK) == 0) {
        f->killed = true;
        snprintf(f->kill_source, sizeof f->kill_source, "file");
    }
    return f->killed;
}

static int64_t store_version(const fleet_dev *d) {
    el_store_state st;
    el_pkg_error e;
    if (el_store_read_state(d->store, &st, &e) || !st.active.present) return -1;
    return st.active.version;
}

static int read_pkg(const char *path, int64_t *version, char sha[65], char *msg, size_t cap) {
    char mp[4096];
    el_manifest m;
    el_pkg_error e;
    if (!el_pkg_manifest_path(path, mp, sizeof mp) || el_manifest_read(mp, &m, &e)) {
        snprintf(msg, cap, "%s: %s", path, e.msg);
        return -1;
    }
    *version = m.version;
    if (sha) {
        for (int i = 0; i < 32; i++) sprintf(sha + 2 * i, "%02x", m.artifacts[0].sha256[i]);
    }
    el_manifest_free(&m);
    return 0;
}

/* ---- device lifecycle steps ---- */

/* `edgellm install PKG --store S [--pub KEY]`; kill_ms >= 0 SIGKILLs it. */
static int run_install(fleet *f, fleet_dev *d, const char *pkg, bool first, int kill_ms) {
    char log_path[700];
    snprintf(log_path, sizeof log_path, "%s/store.log", d->dir);
    char *argv[] = {"edgellm", "install", (char *)pkg, "--store", d->store, first ? "--pub" : NULL,
                    (char *)f->o->pub, NULL};
    return dev_exec_wait(f->o->self_exe, argv, log_path, kill_ms);
}

static int run_rollback(fleet *f, fleet_dev *d) {
    char log_path[700];
    snprintf(log_path, sizeof log_path, "%s/store.log", d->dir);
    char *argv[] = {"edgellm", "rollback", "--store", d->store, NULL};
    return dev_exec_wait(f->o->self_exe, argv, log_path, -1);
}

static const char *status_text(int st, char *buf, size_t cap) {
    if (st < 0) snprintf(buf, cap, "not started");
    else if (WIFSIGNALED(st)) snprintf(buf, cap, "signal %d", WTERMSIG(st));
    else snprintf(buf, cap, "exit %d", WEXITSTATUS(st));
    return buf;
}

/* Canary prompts on device d: outputs into out (or compared with d's
 * previous outputs when out is NULL: the number agreeing). -1 when a request fails. */
static int canary(fleet *f, fleet_dev *d, bool record) {
    const el_fleet_config *c = &f->o->cfg;
    int agree = 0;
    for (int i = 0; i < c->n_canary; i++) {
        el_buf out = {0};
        int st = dev_complete(d, c->canary[i], c->canary_n_predict, &out);
        if (st != 200) {
            el_buf_free(&out);
            if (record) return -1;
            continue; /* a failed canary request disagrees */
        }
        const char *text = out.p ? out.p : "";
        if (record) snprintf(d->canary_prev[i], sizeof d->canary_prev[i], "%s", text);
        else if (!strncmp(d->canary_prev[i], text, sizeof d->canary_prev[i] - 1)) agree++;
        el_buf_free(&out);
    }
    return agree;
}

/* Traffic to every running device: requests_per_device each, round robin;
 * the kill switch is checked between rounds. */
static void traffic(fleet *f) {
    const el_fleet_config *c = &f->o->cfg;
    for (int r = 0; r < c->requests_per_device && !kill_switch(f); r++)
        for (int i = 0; i < f->n; i++) {
            if (!dev_alive(&f->dev[i])) continue;
            dev_complete(&f->dev[i], c->prompts[(r + i) % c->n_prompts], c->n_predict, NULL);
        }
}

/* The p95 of merged cumulative histograms: the smallest bound holding 95 %. */
static double p95_ms(const dev_metrics *sum) {
    const double total = sum->n_le ? sum->cum[sum->n_le - 1] : 0;
    if (total <= 0) return 0;
    for (int i = 0; i < sum->n_le; i++)
        if (sum->cum[i] >= 0.95 * total) return isinf(sum->le[i]) ? 3.6e6 : sum->le[i] * 1e3;
    return 3.6e6;
}

/* Stops, rolls back and restarts every device that took the package. */
static int roll_back(fleet *f, const char *why, char *msg, size_t cap) {
    progress(f, "halting (%s): rolling back every device that took v%" PRId64, why, f->new_version);
    for (int i = 0; i < f->n; i++) {
        fleet_dev *d = &f->dev[i];
        if (!d->took) continue;
        dev_stop(d);
        char sb[32];
        int st = run_rollback(f, d);
        d->version = store_version(d);
        cJSON *e = event("rollback");
        cJSON_AddNumberToObject(e, "device", i);
        cJSON_AddStringToObject(e, "result", status_text(st, sb, sizeof sb));
        cJSON_AddNumberToObject(e, "version_after", (double)d->version);
        if (log_event(f, e)) return snprintf(msg, cap, "cannot write the rollout log"), -1;
        if (st != 0 || d->version != f->base_version)
            return snprintf(msg, cap, "device %d: rollback failed (%s, active v%" PRId64 ")", i, sb, d->version), -1;
        d->took = false;
        if (dev_start(d, f->o->self_exe, f->o->cfg.ctx, msg, cap)) return -1;
        progress(f, "device %d back on v%" PRId64, i, d->version);
    }
    return 0;
}

/* Installs the new package on device d (serve stopped around it). Returns
 * 0 (installed and serving), 1 (refused: d stays on its version), -1 error. */
static int update_device(fleet *f, int stage, fleet_dev *d, char *msg, size_t cap) {
    if (canary(f, d, true) < 0) return snprintf(msg, cap, "device %d: canary on v%" PRId64 " failed", d->index,
                                                d->version), -1;
    dev_stop(d);
    const int kill_ms = f->o->kill_device == d->index ? f->o->kill_ms : -1;
    for (int attempt = 0; attempt < 2; attempt++) {
        int st = run_install(f, d, f->o->new_pkg, false, attempt == 0 ? kill_ms : -1);
        char sb[32];
        status_text(st, sb, sizeof sb);
        int64_t v = store_version(d);
        cJSON *e = event("install");
        cJSON_AddNumberToObject(e, "stage", stage);
        cJSON_AddNumberToObject(e, "device", d->index);
        cJSON_AddNumberToObject(e, "attempt", attempt);
        cJSON_AddStringToObject(e, "result", sb);
        cJSON_AddNumberToObject(e, "version_after", (double)v);
        const bool killed = st >= 0 && WIFSIGNALED(st);
        if (killed) { /* the device "rebooted": its store must hold one complete version */
            char path[4096], by[17];
            el_pkg_error pe;
            const bool ok = el_store_check_active(d->store, false, path, sizeof path, NULL, by, &pe) == EL_PKG_OK;
            cJSON_AddBoolToObject(e, "store_verified", ok);
            if (!ok || (v != f->base_version && v != f->new_version)) {
                log_event(f, e);
                return snprintf(msg, cap, "device %d: store broken after a kill mid-install: %s", d->index,
                                ok ? "unexpected version" : pe.msg), -1;
            }
        }
        if (log_event(f, e)) return snprintf(msg, cap, "cannot write the rollout log"), -1;
        d->version = v;
        progress(f, "device %d install v%" PRId64 ": %s, active v%" PRId64, d->index, f->new_version, sb, v);
        if (v == f->new_version) {
            d->took = true;
            break;
        }
        if (!killed) break; /* refused: stays on the previous version */
    }
    if (dev_start(d, f->o->self_exe, f->o->cfg.ctx, msg, cap)) {
        if (d->took) return 0; /* a package that does not start counts as a crash of this stage */
        return -1;
    }
    return d->took ? 0 : 1;
}

static int setup(fleet *f, char *msg, size_t cap) {
    const el_fleet_run_opts *o = f->o;
    for (int i = 0; i < f->n; i++) {
        fleet_dev *d = &f->dev[i];
        d->index = i;
        d->cls = el_fleet_device_class(&o->cfg, i);
        snprintf(d->dir, sizeof d->dir, "%s/dev-%02d", o->out_dir, i);
        snprintf(d->store, sizeof d->store, "%s/store", d->dir);
        snprintf(d->thermal, sizeof d->thermal, "%s/thermal", d->dir);
        snprintf(d->telemetry, sizeof d->telemetry, "%s/telemetry", d->dir);
        if (mkdir(d->dir, 0755) && errno != EEXIST) return snprintf(msg, cap, "%s: %s", d->dir, strerror(errno)), -1;
        if (mkdir(d->telemetry, 0755) && errno != EEXIST)
            return snprintf(msg, cap, "%s: %s", d->telemetry, strerror(errno)), -1;
        FILE *t = fopen(d->thermal, "w");
        if (!t) return snprintf(msg, cap, "%s: %s", d->thermal, strerror(errno)), -1;
        fprintf(t, "%d\n", d->cls->temp_mc);
        fclose(t);
        char sb[32];
        int st = run_install(f, d, o->base_pkg, true, -1);
        if (st != 0)
            return snprintf(msg, cap, "device %d: installing the base package failed (%s; see %s/store.log)", i,
                            status_text(st, sb, sizeof sb), d->dir), -1;
        d->version = store_version(d);
        if (dev_start(d, o->self_exe, o->cfg.ctx, msg, cap)) return -1;
        cJSON *e = event("device");
        cJSON_AddNumberToObject(e, "device", i);
        cJSON_AddStringToObject(e, "class", d->cls->name);
        cJSON_AddNumberToObject(e, "threads", d->cls->threads);
        cJSON_AddNumberToObject(e, "mem_budget_mib", (double)(d->cls->mem_budget >> 20));
        cJSON_AddNumberToObject(e, "temp_mc", d->cls->temp_mc);
        cJSON_AddNumberToObject(e, "port", d->port);
        cJSON_AddNumberToObject(e, "version", (double)d->version);
        if (log_event(f, e)) return snprintf(msg, cap, "cannot write the rollout log"), -1;
        progress(f, "device %d (%s) serving v%" PRId64 " on port %d", i, d->cls->name, d->version, d->port);
    }
    return 0;
}

/* One stage: update its devices, drive traffic, measure, gate. 1 = advance,
 * 0 = halt, -1 = error. */
static int stage(fleet *f, int k, int *from, char *msg, size_t cap) {
    const el_fleet_config *c = &f->o->cfg;
    const int to = el_fleet_stage_target(c->stages, k, f->n);
    cJSON *e = event("stage");
    cJSON_AddNumberToObject(e, "stage", k);
    cJSON_AddNumberToObject(e, "pct", c->stages[k]);
    cJSON_AddNumberToObject(e, "devices_from", *from);
    cJSON_AddNumberToObject(e, "devices_to", to);
    if (log_event(f, e)) return snprintf(msg, cap, "cannot write the rollout log"), -1;
    progress(f, "stage %d: %d%% -> devices %d..%d", k, c->stages[k], *from, to - 1);
    el_fleet_obs ob = {0};
    int canary_total = 0, canary_agree = 0;
    for (int i = *from; i < to; i++) {
        if (kill_switch(f)) return 0;
        int r = update_device(f, k, &f->dev[i], msg, cap);
        if (r < 0) return -1;
        if (r == 1) ob.install_failures++;
    }
    *from = to;
    if (kill_switch(f)) return 0;
    traffic(f);
    if (kill_switch(f)) return 0;
    const int prev = k ? el_fleet_stage_target(c->stages, k - 1, f->n) : 0;
    for (int i = prev; i < to; i++) { /* the canary on this stage's updated devices; a dead one cannot agree */
        fleet_dev *d = &f->dev[i];
        if (!d->took) continue;
        canary_total += c->n_canary;
        if (dev_alive(d)) canary_agree += canary(f, d, false);
    }
    int cohort = 0, alive = 0, with_metrics = 0;
    dev_metrics sum = {0};
    double requests = 0, refused = 0;
    cJSON *crashes = cJSON_CreateArray();
    for (int i = 0; i < f->n; i++) {
        fleet_dev *d = &f->dev[i];
        if (!d->took) continue;
        cohort++;
        if (!dev_alive(d)) {
            char sb[32];
            cJSON *x = cJSON_CreateObject();
            cJSON_AddNumberToObject(x, "device", i);
            cJSON_AddStringToObject(x, "ended", d->ended ? status_text(d->end_status, sb, sizeof sb) : "not started");
            cJSON_AddItemToArray(crashes, x);
            continue;
        }
        alive++;
        dev_metrics m;
        if (dev_metrics_read(d, &m)) continue;
        with_metrics++;
        requests += m.done + m.cancelled + m.failed + m.rejected;
        refused += m.failed + m.rejected;
        if (!sum.n_le) {
            sum.n_le = m.n_le;
            memcpy(sum.le, m.le, sizeof m.le);
        }
        for (int b = 0; b < m.n_le && b < sum.n_le; b++) sum.cum[b] += m.cum[b];
    }
    ob.crash_free_rate = cohort ? (double)alive / cohort : 1.0;
    ob.p95_ttft_ms = p95_ms(&sum);
    ob.refusal_rate = requests > 0 ? refused / requests : 0.0;
    ob.canary_agreement = canary_total ? (double)canary_agree / canary_total : 1.0;
    bool pass[EL_GATE__N];
    const bool advance = el_fleet_gates_eval(&f->o->gates, &ob, pass);
    e = event("gate");
    cJSON_AddNumberToObject(e, "stage", k);
    cJSON_AddNumberToObject(e, "pct", c->stages[k]);
    cJSON_AddNumberToObject(e, "devices", to);
    cJSON_AddNumberToObject(e, "cohort", cohort);
    cJSON *obs = cJSON_AddObjectToObject(e, "observed");
    cJSON_AddNumberToObject(obs, "crash_free_rate", ob.crash_free_rate);
    cJSON_AddNumberToObject(obs, "p95_ttft_ms", ob.p95_ttft_ms);
    cJSON_AddNumberToObject(obs, "refusal_rate", ob.refusal_rate);
    cJSON_AddNumberToObject(obs, "canary_agreement", ob.canary_agreement);
    cJSON_AddNumberToObject(obs, "install_failures", ob.install_failures);
    cJSON_AddNumberToObject(e, "metrics_from", with_metrics); /* cohort devices whose /metrics answered */
    cJSON_AddNumberToObject(e, "requests", requests);
    cJSON_AddNumberToObject(e, "canary_prompts", canary_total);
    cJSON_AddItemToObject(e, "crashes", crashes);
    cJSON *pj = cJSON_AddObjectToObject(e, "pass");
    cJSON *failed = cJSON_CreateArray();
    for (int g = 0; g < EL_GATE__N; g++) {
        cJSON_AddBoolToObject(pj, el_fleet_gate_name(g), pass[g]);
        if (!pass[g]) cJSON_AddItemToArray(failed, cJSON_CreateString(el_fleet_gate_name(g)));
    }
    cJSON_AddItemToObject(e, "failed", failed);
    cJSON_AddStringToObject(e, "decision", advance ? "advance" : "halt");
    if (log_event(f, e)) return snprintf(msg, cap, "cannot write the rollout log"), -1;
    progress(f, "stage %d gate: crash-free %.3f, p95 TTFT %.1f ms, refusals %.3f, canary %.3f, install failures %d: %s",
             k, ob.crash_free_rate, ob.p95_ttft_ms, ob.refusal_rate, ob.canary_agreement, ob.install_failures,
             advance ? "advance" : "HALT");
    return advance ? 1 : 0;
}

int el_fleet_run(const el_fleet_run_opts *o, char *msg, size_t cap) {
    fleet *f = calloc(1, sizeof *f);
    if (!f) return snprintf(msg, cap, "out of memory"), -1;
    f->o = o;
    f->n = o->cfg.n_devices;
    int rc = -1;
    if (read_pkg(o->base_pkg, &f->base_version, NULL, msg, cap) ||
        read_pkg(o->new_pkg, &f->new_version, f->new_sha, msg, cap))
        goto out;
    if (mkdir(o->out_dir, 0755) && errno != EEXIST) {
        snprintf(msg, cap, "%s: %s", o->out_dir, strerror(errno));
        goto out;
    }
    char log_path[4096];
    snprintf(log_path, sizeof log_path, "%s/rollout.jsonl", o->out_dir);
    f->log = fopen(log_path, "wx");
    if (!f->log) {
        snprintf(msg, cap, "%s: %s (a rollout log is never overwritten)", log_path, strerror(errno));
        goto out;
    }
    g_signal = 0;
    struct sigaction sa = {0}, old_int, old_term, old_usr1;
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    sigaction(SIGUSR1, &sa, &old_usr1);

    cJSON *e = event("start");
    cJSON_AddStringToObject(e, "format", "edgellm-rollout/1");
    cJSON_AddNumberToObject(e, "n_devices", f->n);
    cJSON *st = cJSON_AddArrayToObject(e, "stages");
    for (int k = 0; k < o->cfg.n_stages; k++) cJSON_AddItemToArray(st, cJSON_CreateNumber(o->cfg.stages[k]));
    char *gj = el_fleet_gates_json(&o->gates);
    cJSON_AddItemToObject(e, "gates", gj ? cJSON_Parse(gj) : cJSON_CreateNull());
    free(gj);
    cJSON_AddNumberToObject(e, "base_version", (double)f->base_version);
    cJSON_AddNumberToObject(e, "new_version", (double)f->new_version);
    cJSON_AddStringToObject(e, "new_sha256", f->new_sha);
    cJSON_AddStringToObject(e, "kill_switch", o->cfg.kill_switch);
    if (log_event(f, e)) {
        snprintf(msg, cap, "cannot write the rollout log");
        goto restore;
    }
    progress(f, "%d devices, v%" PRId64 " -> v%" PRId64 ", log %s", f->n, f->base_version, f->new_version, log_path);
    if (setup(f, msg, cap)) goto restore;
    int from = 0, k = 0, r = 1;
    for (; k < o->cfg.n_stages && r == 1; k++) {
        r = stage(f, k, &from, msg, cap);
        if (r < 0) goto restore;
        if (r == 1 && kill_switch(f)) r = 0;
    }
    const char *outcome = "complete", *reason = "every stage passed its gates";
    if (r == 0) {
        k--;
        if (f->killed) {
            e = event("kill_switch");
            cJSON_AddNumberToObject(e, "stage", k);
            cJSON_AddStringToObject(e, "source", f->kill_source);
            if (log_event(f, e)) goto restore;
            reason = "kill switch";
        } else {
            reason = "a gate failed";
        }
        outcome = "halted";
        if (roll_back(f, reason, msg, cap)) goto restore;
    }
    e = event("end");
    cJSON_AddStringToObject(e, "outcome", outcome);
    cJSON_AddNumberToObject(e, "stage", r == 0 ? k : o->cfg.n_stages - 1);
    cJSON_AddStringToObject(e, "reason", reason);
    cJSON *vs = cJSON_AddArrayToObject(e, "versions");
    for (int i = 0; i < f->n; i++) cJSON_AddItemToArray(vs, cJSON_CreateNumber((double)store_version(&f->dev[i])));
    if (log_event(f, e)) {
        snprintf(msg, cap, "cannot write the rollout log");
        goto restore;
    }
    progress(f, "%s: %s", outcome, reason);
    rc = r == 0 ? 1 : 0;
restore:
    for (int i = 0; i < f->n; i++) dev_stop(&f->dev[i]);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    sigaction(SIGUSR1, &old_usr1, NULL);
out:
    if (f->log) fclose(f->log);
    free(f);
    return rc;
}
