/*
 * fuzz_proposal.c — libFuzzer target for the proposal gate's frame parser
 * and checks (src/gate/gate.c), on a gate made from a fixed policy
 * (tests/data/gate/actions.json's shape, keys inline).
 *
 * Each input goes in three ways:
 *   1. as a frame, raw: the reason is a known code with a detail; an
 *      accepted one (only a frame signed with a device key passes: the
 *      seeds) has a typed event and is refused when sent again.
 *   2. re-signed: the input split at its first NUL into an action name and a
 *      params text, stamped by the host encoder (el_gate_frame_write) with
 *      the right key, so mutations reach the version, window, ordering,
 *      freshness, whitelist, parameter and state checks. An accepted one has
 *      the action it was sent with and every parameter typed as the policy
 *      says and inside its range or enum; submitted again it is refused
 *      (duplicate) — no frame is accepted twice.
 *   3. the re-signed frame cut at every length the input's length selects
 *      (and its last byte dropped): never accepted.
 * A fresh gate per input (the state is the policy's, online, variables set).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gate/gate.h"

#define REQUIRE(c) do { if (!(c)) { fprintf(stderr, "invariant failed: %s\n", #c); abort(); } } while (0)

static const char POLICY[] =
    "{\"format\":\"edgellm-actions/1\",\"version\":\"fuzz\",\"window\":8,\"max_deadline_ms\":60000,"
    "\"devices\":[{\"id\":\"greenhouse-1\",\"key_hex\":\"10f523c06f4d5c9682092023d81bd61a9a9b393b19f7d7ee867c5b4517d08b80\"},"
    "{\"id\":\"pump-2\",\"key_hex\":\"dca64a5162ac0401b20f7234bec4da4800b64e8feaa6e560aa7e348d4edf513d\"}],"
    "\"variables\":{\"door_open\":{\"type\":\"boolean\"},\"temp_c\":{\"type\":\"number\",\"min\":-40,\"max\":80},"
    "\"mode\":{\"type\":\"enum\",\"values\":[\"auto\",\"manual\"]}},"
    "\"actions\":{"
    "\"set_heater\":{\"states\":[\"online\",\"host_slow\"],\"params\":{\"celsius\":{\"type\":\"integer\",\"min\":5,\"max\":30}},"
    "\"preconditions\":[{\"var\":\"door_open\",\"op\":\"==\",\"value\":false},{\"var\":\"mode\",\"op\":\"==\",\"value\":\"auto\"}]},"
    "\"open_vent\":{\"states\":[\"online\"],\"params\":{\"percent\":{\"type\":\"integer\",\"min\":0,\"max\":100}},"
    "\"preconditions\":[{\"var\":\"temp_c\",\"op\":\">\",\"value\":5}]},"
    "\"set_light\":{\"states\":[\"online\"],\"params\":{\"on\":{\"type\":\"boolean\"},\"color\":{\"type\":\"enum\",\"values\":[\"white\",\"red\",\"blue\"]}}},"
    "\"water\":{\"states\":[\"online\"],\"params\":{\"litres\":{\"type\":\"number\",\"min\":0.5,\"max\":20}}},"
    "\"all_off\":{\"safe\":true,\"states\":[\"online\",\"safe_degraded\"]}}}";

static el_gate_policy pol;
static el_gate g;
static uint64_t now_ms = 100000;
static uint64_t clk(void *u) {
    (void)u;
    return now_ms;
}

static void check_event(const el_gate_result *r, const char *action) {
    REQUIRE(r->event.action >= 0 && r->event.action < pol.n_actions);
    const el_gate_action *a = &pol.actions[r->event.action];
    REQUIRE(!strcmp(a->name, action));
    for (int j = 0; j < a->n_params; j++) {
        const el_gate_typedef *t = &a->params[j];
        const el_gate_value *v = &r->event.params[j];
        REQUIRE(v->type == t->type);
        if (t->type == EL_GT_INTEGER) REQUIRE((double)v->i >= t->min && (double)v->i <= t->max);
        if (t->type == EL_GT_NUMBER) REQUIRE(v->n >= t->min && v->n <= t->max);
        if (t->type == EL_GT_ENUM) REQUIRE(v->e >= 0 && v->e < t->n_values);
    }
}

/* A fresh gate: online, greenhouse-1 handshaken, the variables set. */
static void setup(void) {
    char err[200];
    REQUIRE(el_gate_init(&g, &pol, clk, NULL, NULL, NULL, err, sizeof err) == 0);
    uint8_t nonce[16] = {0};
    REQUIRE(el_gate_handshake(&g, "greenhouse-1", nonce, NULL) == 0);
    el_gate_value v = {.type = EL_GT_BOOLEAN, .b = false};
    REQUIRE(el_gate_set_var(&g, "door_open", &v) == 0);
    v = (el_gate_value){.type = EL_GT_ENUM, .e = 0};
    REQUIRE(el_gate_set_var(&g, "mode", &v) == 0);
    v = (el_gate_value){.type = EL_GT_NUMBER, .n = 20};
    REQUIRE(el_gate_set_var(&g, "temp_c", &v) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!pol.n_actions) {
        char err[300];
        REQUIRE(el_gate_policy_parse(POLICY, strlen(POLICY), NULL, &pol, err, sizeof err) == 0);
    }
    setup();
    /* 1. raw: only a frame really signed with a device key (a seed) can pass */
    el_gate_result r;
    el_gate_reason e = el_gate_submit(&g, (const char *)data, size, &r);
    REQUIRE((unsigned)e < EL_GATE_N_REASONS && e == r.reason);
    REQUIRE(r.detail[0]);
    if (e == EL_GATE_OK) {
        check_event(&r, pol.actions[r.event.action].name);
        REQUIRE(el_gate_submit(&g, (const char *)data, size, &r) == EL_GATE_DUPLICATE);
    }
    setup();

    /* 2. re-signed: action NUL params */
    const uint8_t *nul = memchr(data, 0, size);
    if (!nul) return 0;
    char action[64];
    const size_t an = (size_t)(nul - data);
    if (an >= sizeof action) return 0;
    memcpy(action, data, an);
    action[an] = 0;
    const size_t pn = size - an - 1;
    char *params = malloc(pn + 1);
    if (!params) return 0;
    memcpy(params, nul + 1, pn);
    params[pn] = 0;
    if (strlen(params) != pn) { /* a NUL inside params: the encoder takes C strings */
        free(params);
        return 0;
    }
    static char frame[EL_GATE_MAX_FRAME * 2];
    const int n = el_gate_frame_write(frame, sizeof frame, pol.devices[0].key, 1, "greenhouse-1", "fz-1", 1,
                                      now_ms + 1000, action, params);
    free(params);
    if (n < 0) return 0;
    /* 3. cut copies first (they are refused, consuming nothing: a cut frame cannot pass the tag) */
    for (size_t cut = 0; cut < (size_t)n; cut += 1 + (size_t)n / 7) {
        char *c = malloc(cut ? cut : 1);
        REQUIRE(c);
        memcpy(c, frame, cut);
        REQUIRE(el_gate_submit(&g, c, cut, &r) != EL_GATE_OK);
        free(c);
    }
    REQUIRE(el_gate_submit(&g, frame, (size_t)n - 1, &r) != EL_GATE_OK);
    e = el_gate_submit(&g, frame, (size_t)n, &r);
    REQUIRE((unsigned)e < EL_GATE_N_REASONS);
    if (e == EL_GATE_OK) {
        check_event(&r, action);
        REQUIRE(!strcmp(r.event.request_id, "fz-1") && r.event.sequence == 1 && r.event.device == 0);
        REQUIRE(el_gate_submit(&g, frame, (size_t)n, &r) == EL_GATE_DUPLICATE);
    } else {
        REQUIRE(r.detail[0]);
        /* the device and version are the encoder's own (a params text that is not exactly one
         * JSON value may still make the parsed params differ from the signed bytes: bad_tag) */
        REQUIRE(e != EL_GATE_UNKNOWN_DEVICE && e != EL_GATE_BAD_VERSION);
    }
    return 0;
}
