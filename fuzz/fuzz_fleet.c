/*
 * fuzz_fleet.c — libFuzzer target for `edgellm fleet`'s readers of outside
 * bytes (src/fleet/fleet_config.c, fleet_replay.c): the fleet config, the
 * gate file and a rollout log as `fleet replay` reads it.
 *
 * Every input goes to all three. A refused config or gate file has a message
 * that starts with the label (the path a user would see) and leaves the
 * struct zeroed for the config; an accepted config keeps every promise of
 * fleet_config.h (1..8 classes with plain distinct names, counts summing to
 * 1..64, threads 1..64, strictly increasing stages 1..100 ending at 100,
 * 1..8 non-empty prompts without control bytes, ranges), and its stage sizes
 * are >= 1, non-decreasing and end at every device; accepted gates are in
 * range and their JSON parses back to the same gates. A replay returns 0
 * (and prints), 1 or -1 with a message naming the label and a line.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet/fleet.h"
#include "fleet/fleet_config.h"

#define REQUIRE(c) do { if (!(c)) { fprintf(stderr, "invariant failed: %s\n", #c); abort(); } } while (0)

static void check_config(const char *t, size_t n) {
    el_fleet_config c;
    char msg[600] = "";
    if (el_fleet_config_parse(t, n, "fleet.json", &c, msg, sizeof msg)) {
        REQUIRE(!strncmp(msg, "fleet.json: ", 12) && msg[12]);
        REQUIRE(c.n_devices == 0 && c.n_classes == 0);
        return;
    }
    REQUIRE(c.n_classes >= 1 && c.n_classes <= EL_FLEET_MAX_CLASSES);
    int sum = 0;
    for (int i = 0; i < c.n_classes; i++) {
        const el_fleet_class *k = &c.classes[i];
        REQUIRE(k->name[0] && strlen(k->name) < sizeof k->name);
        for (const char *p = k->name; *p; p++) REQUIRE(*p > 0x20 && *p < 0x7f && *p != ' ');
        for (int j = 0; j < i; j++) REQUIRE(strcmp(k->name, c.classes[j].name));
        REQUIRE(k->count >= 1 && k->threads >= 1 && k->threads <= 64);
        REQUIRE(k->temp_mc >= -100000 && k->temp_mc <= 250000);
        sum += k->count;
    }
    REQUIRE(sum == c.n_devices && sum >= 1 && sum <= EL_FLEET_MAX_DEVICES);
    REQUIRE(c.n_stages >= 1 && c.n_stages <= EL_FLEET_MAX_STAGES && c.stages[c.n_stages - 1] == 100);
    int prev = 0;
    for (int k = 0; k < c.n_stages; k++) {
        REQUIRE(c.stages[k] >= 1 && c.stages[k] <= 100 && (k == 0 || c.stages[k] > c.stages[k - 1]));
        const int n = el_fleet_stage_target(c.stages, k, c.n_devices);
        REQUIRE(n >= 1 && n >= prev && n <= c.n_devices);
        prev = n;
    }
    REQUIRE(prev == c.n_devices);
    for (int i = 0; i < c.n_devices; i++) REQUIRE(el_fleet_device_class(&c, i) != NULL);
    REQUIRE(el_fleet_device_class(&c, c.n_devices) == NULL);
    REQUIRE(c.n_prompts >= 1 && c.n_prompts <= EL_FLEET_MAX_PROMPTS);
    REQUIRE(c.n_canary >= 1 && c.n_canary <= EL_FLEET_MAX_PROMPTS);
    for (int i = 0; i < c.n_prompts; i++) {
        REQUIRE(c.prompts[i][0]);
        for (const char *p = c.prompts[i]; *p; p++) REQUIRE((unsigned char)*p >= 0x20);
    }
    REQUIRE(c.requests_per_device >= 1 && c.n_predict >= 1 && c.canary_n_predict >= 1);
    REQUIRE(c.ctx >= 64 && c.ctx <= 8192);
}

static void check_gates(const char *t, size_t n) {
    el_fleet_gates g;
    char msg[600] = "";
    if (el_fleet_gates_parse(t, n, "gates.json", &g, msg, sizeof msg)) {
        REQUIRE(!strncmp(msg, "gates.json: ", 12) && msg[12]);
        return;
    }
    REQUIRE(g.min_crash_free_rate >= 0 && g.min_crash_free_rate <= 1);
    REQUIRE(g.max_refusal_rate >= 0 && g.max_refusal_rate <= 1);
    REQUIRE(g.min_canary_agreement >= 0 && g.min_canary_agreement <= 1);
    REQUIRE(g.max_p95_ttft_ms > 0 && isfinite(g.max_p95_ttft_ms) && g.max_install_failures >= 0);
    char *j = el_fleet_gates_json(&g);
    REQUIRE(j);
    el_fleet_gates back;
    REQUIRE(el_fleet_gates_parse(j, strlen(j), "again", &back, msg, sizeof msg) == 0);
    REQUIRE(!memcmp(&back, &g, sizeof g));
    free(j);
    el_fleet_obs o = {1, 0, 0, 1, 0};
    bool pass[EL_GATE__N];
    REQUIRE(el_fleet_gates_eval(&g, &o, pass)); /* a perfect stage passes any valid gates */
}

static void check_replay(const char *t, size_t n) {
    static FILE *devnull;
    if (!devnull) devnull = fopen("/dev/null", "w");
    char msg[800] = "";
    const int rc = el_fleet_replay_text(t, n, "rollout.jsonl", devnull, msg, sizeof msg);
    REQUIRE(rc == 0 || rc == 1 || rc == -1);
    if (rc) REQUIRE(!strncmp(msg, "rollout.jsonl:", 14) || !strncmp(msg, "out of memory", 13));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *t = (const char *)data;
    check_config(t, size);
    check_gates(t, size);
    check_replay(t, size);
    return 0;
}
