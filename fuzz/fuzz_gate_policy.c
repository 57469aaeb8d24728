/*
 * fuzz_gate_policy.c — libFuzzer target for the action policy parser of the
 * proposal gate (el_gate_policy_parse, src/gate/gate_policy.c: the
 * `edgellm act --policy` file) and the schema generated from it.
 *
 * A refused policy has a message. An accepted one keeps every promise of
 * gate.h: 1..8 devices with well-formed distinct ids, 1..16 actions with
 * well-formed distinct names, no action allowed in link_down or
 * model_failed, a non-safe action only in online / host_slow, parameters
 * and variables typed with min <= max or 1..8 distinct enum values,
 * preconditions naming a variable with an operator its type allows; a gate
 * initialises from it, and its proposal JSON Schema compiles to a grammar
 * (json_schema.c).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gate/gate.h"
#include "structured/json_schema.h"

#define REQUIRE(c) do { if (!(c)) { fprintf(stderr, "invariant failed: %s\n", #c); abort(); } } while (0)

static uint64_t clk(void *u) {
    (void)u;
    return 0;
}

static void check_type(const el_gate_typedef *t) {
    REQUIRE(el_gate_name_ok(t->name));
    if (t->type == EL_GT_INTEGER || t->type == EL_GT_NUMBER) REQUIRE(t->min <= t->max);
    if (t->type == EL_GT_ENUM) {
        REQUIRE(t->n_values >= 1 && t->n_values <= EL_GATE_MAX_ENUM);
        for (int i = 0; i < t->n_values; i++)
            for (int j = i + 1; j < t->n_values; j++) REQUIRE(strcmp(t->values[i], t->values[j]));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static el_gate_policy p;
    static el_gate g;
    char err[400];
    err[0] = 0;
    if (el_gate_policy_parse((const char *)data, size, NULL, &p, err, sizeof err)) {
        REQUIRE(err[0]);
        return 0;
    }
    REQUIRE(p.n_devices >= 1 && p.n_devices <= EL_GATE_MAX_DEVICES);
    for (int i = 0; i < p.n_devices; i++) {
        REQUIRE(el_gate_id_ok(p.devices[i].id));
        REQUIRE(el_gate_policy_device(&p, p.devices[i].id) == i);
    }
    REQUIRE(p.n_actions >= 1 && p.n_actions <= EL_GATE_MAX_ACTIONS);
    REQUIRE(p.n_vars >= 0 && p.n_vars <= EL_GATE_MAX_VARS);
    for (int i = 0; i < p.n_vars; i++) check_type(&p.vars[i]);
    for (int i = 0; i < p.n_actions; i++) {
        const el_gate_action *a = &p.actions[i];
        REQUIRE(el_gate_name_ok(a->name) && el_gate_policy_action(&p, a->name) == i);
        REQUIRE(a->states && !(a->states & ((1u << EL_GS_LINK_DOWN) | (1u << EL_GS_MODEL_FAILED))));
        if (!a->safe) REQUIRE(!(a->states & ~((1u << EL_GS_ONLINE) | (1u << EL_GS_HOST_SLOW))));
        for (int j = 0; j < a->n_params; j++) check_type(&a->params[j]);
        for (int k = 0; k < a->n_pre; k++) {
            REQUIRE(a->pre[k].var >= 0 && a->pre[k].var < p.n_vars);
            const el_gate_type t = p.vars[a->pre[k].var].type;
            if (t == EL_GT_BOOLEAN || t == EL_GT_ENUM) REQUIRE(a->pre[k].op == EL_GOP_EQ || a->pre[k].op == EL_GOP_NE);
        }
    }
    REQUIRE(p.window >= 1 && p.window <= EL_GATE_WINDOW_MAX);
    REQUIRE(el_gate_init(&g, &p, clk, NULL, NULL, NULL, err, sizeof err) == 0);
    char *schema = el_gate_policy_schema(&p);
    REQUIRE(schema);
    el_error e = {0};
    char *gbnf = el_json_schema_text_to_gbnf(schema, strlen(schema), &e);
    if (!gbnf) fprintf(stderr, "schema %s: %s\n", schema, e.msg);
    REQUIRE(gbnf);
    free(gbnf);
    free(schema);
    return 0;
}
