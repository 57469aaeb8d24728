/*
 * cmd_fleet.c — `edgellm fleet`: a staged rollout with automatic rollback on
 * a simulated fleet of real `edgellm serve` processes (src/fleet/fleet.h,
 * docs/FLEET.md), and its replay:
 *
 *   edgellm fleet --config FLEET.json --gates GATES.json --base OLD.gguf
 *                 --package NEW.gguf --pub KEY.pub --out DIR
 *   edgellm fleet check --config FLEET.json --gates GATES.json
 *   edgellm fleet replay DIR/rollout.jsonl
 *
 * Exit status: 0 rolled out to 100 % / files valid / every decision
 * reproduced; 3 halted and rolled back / a decision not reproduced; 1 an
 * error (a malformed file: its path and member named); 2 a usage error.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "fleet/fleet.h"

enum { FLEET_EXIT_HALTED = 3 };

static void fleet_help(FILE *f) {
    fputs(
"usage: edgellm fleet --config FLEET.json --gates GATES.json --base OLD.gguf --package NEW.gguf\n"
"                     --pub KEY.pub --out DIR\n"
"       edgellm fleet check --config FLEET.json --gates GATES.json\n"
"       edgellm fleet replay DIR/rollout.jsonl\n"
"\n"
"Runs a simulated fleet on this machine: one `edgellm serve` process per device on a\n"
"loopback port, each with its own store (DIR/dev-NN/store), its class's threads, memory\n"
"budget and thermal source file, all on the signed package OLD.gguf; then rolls the\n"
"signed package NEW.gguf out in the config's stages (e.g. 1, 10, 50, 100 %; at least one\n"
"device a stage), driving traffic and gating each stage on the devices' own health:\n"
"crash-free rate, p95 TTFT and refusal rate from their /metrics, and a canary (greedy\n"
"output on fixed prompts against the previous version's). A failing gate or the kill\n"
"switch (the config's kill_switch file appearing, or SIGINT/SIGTERM/SIGUSR1) halts the\n"
"rollout and rolls every device that took NEW back to its previous slot. Every step goes\n"
"to DIR/rollout.jsonl (JSON lines); `fleet replay` re-derives each decision from it.\n"
"\n"
"options:\n"
"  --config FILE        the fleet: device classes, stages, traffic, canary (docs/FLEET.md)\n"
"  --gates FILE         the health thresholds (docs/FLEET.md)\n"
"  --base FILE          the signed package every device starts on\n"
"  --package FILE       the signed package rolled out (a higher version)\n"
"  --pub FILE           the key both are signed with (each device's store pins it)\n"
"  --out DIR            the devices' folders and the rollout log (a log is never overwritten)\n"
"  --quiet              no progress lines on stderr\n"
"  --fault-kill-install DEV:MS  (testing) SIGKILL device DEV's installer MS ms after it starts\n"
"\n"
"exit: 0 rolled out to 100% (check: the files are valid; replay: every decision reproduced),\n"
"      3 halted and rolled back (replay: a decision not reproduced), 1 error, 2 usage\n",
        f);
}

static int load_both(const char *config, const char *gates, el_fleet_config *c, el_fleet_gates *g) {
    char msg[600];
    if (el_fleet_config_load(config, c, msg, sizeof msg)) return cli_failf("%s", msg);
    if (el_fleet_gates_load(gates, g, msg, sizeof msg)) return cli_failf("%s", msg);
    return -1;
}

int cli_cmd_fleet(int argc, char **argv) {
    if (argc >= 3 && (!strcmp(argv[2], "--help") || !strcmp(argv[2], "-h") || !strcmp(argv[2], "help"))) {
        fleet_help(stdout);
        return CLI_EXIT_OK;
    }
    if (argc >= 3 && !strcmp(argv[2], "replay")) {
        if (argc != 4) return cli_usage_error("fleet", "replay takes one argument: the rollout log");
        char msg[700];
        const int rc = el_fleet_replay(argv[3], stdout, msg, sizeof msg);
        if (rc < 0) return cli_failf("%s", msg);
        if (rc > 0) {
            fprintf(stderr, "error: not reproduced: %s\n", msg);
            return FLEET_EXIT_HALTED;
        }
        return CLI_EXIT_OK;
    }
    const bool check = argc >= 3 && !strcmp(argv[2], "check");
    el_fleet_run_opts o;
    memset(&o, 0, sizeof o);
    o.kill_device = -1;
    o.progress = stderr;
    const char *config = NULL, *gates = NULL;
    for (int i = check ? 3 : 2; i < argc; i++) {
        const char *s = argv[i];
        const bool has = i + 1 < argc;
        if (!strcmp(s, "--config") && has) config = argv[++i];
        else if (!strcmp(s, "--gates") && has) gates = argv[++i];
        else if (!check && !strcmp(s, "--base") && has) o.base_pkg = argv[++i];
        else if (!check && !strcmp(s, "--package") && has) o.new_pkg = argv[++i];
        else if (!check && !strcmp(s, "--pub") && has) o.pub = argv[++i];
        else if (!check && !strcmp(s, "--out") && has) o.out_dir = argv[++i];
        else if (!check && !strcmp(s, "--quiet")) o.progress = NULL;
        else if (!check && !strcmp(s, "--fault-kill-install") && has) {
            const char *v = argv[++i];
            char *end;
            long dv = strtol(v, &end, 10), ms = -1;
            if (*end == ':') ms = strtol(end + 1, &end, 10);
            if (*end || dv < 0 || dv >= EL_FLEET_MAX_DEVICES || ms < 0 || ms > 600000)
                return cli_usage_error("fleet", "--fault-kill-install: expected DEVICE:MS, got '%s'", v);
            o.kill_device = (int)dv;
            o.kill_ms = (int)ms;
        } else return cli_usage_error("fleet", "unknown or incomplete option '%s'", s);
    }
    if (!config || !gates) return cli_usage_error("fleet", "missing --config FILE or --gates FILE");
    const int lr = load_both(config, gates, &o.cfg, &o.gates);
    if (lr >= 0) return lr;
    if (check) {
        printf("%s: %d devices in %d classes, %d stages; %s: valid\n", config, o.cfg.n_devices, o.cfg.n_classes,
               o.cfg.n_stages, gates);
        return CLI_EXIT_OK;
    }
    if (!o.base_pkg || !o.new_pkg || !o.pub || !o.out_dir)
        return cli_usage_error("fleet", "missing --base, --package, --pub or --out");
    if (o.kill_device >= o.cfg.n_devices)
        return cli_usage_error("fleet", "--fault-kill-install: device %d, the fleet has %d", o.kill_device,
                               o.cfg.n_devices);
    static char self[PATH_MAX];
    const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return cli_failf("cannot find the edgellm binary (/proc/self/exe)");
    self[n] = 0;
    o.self_exe = self;
    char msg[700];
    const int rc = el_fleet_run(&o, msg, sizeof msg);
    if (rc < 0) return cli_failf("%s", msg);
    return rc == 0 ? CLI_EXIT_OK : FLEET_EXIT_HALTED;
}
