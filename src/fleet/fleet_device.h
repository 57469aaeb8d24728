/*
 * fleet_device.h — one simulated device of a fleet (internal to src/fleet):
 * its folder, its serve process, its installer and rollback processes, and
 * the loopback HTTP calls the fleet makes to it.
 *
 * Contract:
 *   - Every process is the real edgellm binary (fork + execv), in its own
 *     process group (a ^C to the fleet reaches the fleet alone), its output
 *     appended to DIR/serve.log or DIR/store.log.
 *   - dev_start waits (bounded) for serve's "listening on" line and reads
 *     the port from it; dev_alive reaps a dead serve process and keeps how it
 *     ended (exit code or signal) in the struct.
 *   - HTTP calls: loopback only, libcurl with a timeout; a transport failure
 *     is status 0.
 */
#ifndef EL_FLEET_DEVICE_H
#define EL_FLEET_DEVICE_H
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "fleet/fleet_config.h"
#include "util/buf.h"

typedef struct fleet_dev {
    int index;
    const el_fleet_class *cls;
    char dir[512], store[600], thermal[600], telemetry[600];
    pid_t pid;          /* serve; 0 when not running */
    int port;
    int end_status;     /* how serve last ended (waitpid status), valid when ended */
    bool ended;
    int64_t version;    /* the store's active version, as last read */
    bool took;          /* the new package became active here during this rollout */
    char canary_prev[EL_FLEET_MAX_PROMPTS][512];   /* the previous version's canary outputs */
} fleet_dev;

/* Runs `edgellm ARGS...` (argv[0] = self) to its end, output appended to
 * log_path. kill_ms >= 0: SIGKILL it that many ms after the start. Returns
 * the waitpid status, or -1 when it could not start. */
int dev_exec_wait(const char *self, char *const argv[], const char *log_path, int kill_ms);
/* Starts serve on the device's store; 0 once it listens, -1 (msg) else. */
int dev_start(fleet_dev *d, const char *self, int ctx, char *msg, size_t cap);
/* SIGTERM, then SIGKILL after 15 s; a no-op when not running. */
void dev_stop(fleet_dev *d);
/* Is serve still running? Reaps it (ended, end_status) when not. */
bool dev_alive(fleet_dev *d);
/* POST /completion {prompt, n_predict, temperature 0}: HTTP status (0:
 * transport failure); content (if given) receives the generated text. */
int dev_complete(const fleet_dev *d, const char *prompt, int n_predict, el_buf *content);
/* GET /metrics: requests by outcome and the TTFT histogram. 0 or -1. */
typedef struct dev_metrics {
    double done, cancelled, failed, rejected;
    int n_le;
    double le[32], cum[32];   /* cumulative counts per upper bound (+Inf last, le = INFINITY) */
} dev_metrics;
int dev_metrics_read(const fleet_dev *d, dev_metrics *m);

#endif
