/*
 * fuzz_audit.c — libFuzzer target for the routing audit log's readers
 * (src/route/audit.c): el_audit_parse (one audit line, as `edgellm route
 * explain --audit-log` reads it) and el_audit_parse_device (a device-state
 * file, `--state`).
 *
 * Invariants: a refused input has a message; an accepted line gives inputs
 * el_route_decide can take (a class that is well-formed or flagged
 * malformed, counts >= 0, a deadline in range, a thermal level and factor in
 * range, a battery of -1..100), and deciding on them, writing the audit line
 * again and parsing that back gives the same inputs and the same decision
 * (the replay is a fixed point). An accepted device state is in range too.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "route/audit.h"
#include "route/policy.h"
#include "route/router.h"

#define REQUIRE(c) do { if (!(c)) { fprintf(stderr, "invariant failed: %s\n", #c); abort(); } } while (0)

static void check_device(const el_route_device *s) {
    REQUIRE(s->thermal >= EL_THERMAL_NORMAL && s->thermal <= EL_THERMAL_HOT);
    REQUIRE(s->thermal_factor >= 0 && s->thermal_factor <= 1);
    REQUIRE(s->battery_pct >= -1 && s->battery_pct <= 100);
    REQUIRE(s->local_pp_tps >= 0 && s->local_tg_tps >= 0 && isfinite(s->local_tg_tps));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    el_policy p;
    el_policy_builtin(&p);
    el_audit_rec rec;
    char err[300];
    err[0] = 0;
    if (el_audit_parse((const char *)data, size, &rec, err, sizeof err)) {
        REQUIRE(err[0]);
    } else if (!rec.refusal) {
        REQUIRE(rec.x.n_prompt >= 0 && rec.x.max_tokens >= 0);
        REQUIRE(rec.x.deadline_ms >= 0 && rec.x.deadline_ms <= 86400000.0);
        REQUIRE(!rec.x.data_class[0] || !rec.x.class_ok || el_policy_name_ok(rec.x.data_class));
        check_device(&rec.s);
        el_route r;
        el_route_decide(&p, &rec.x, &rec.s, &r);
        char *line = el_audit_line(&p, "fuzz", &rec.x, &rec.s, &r, 0);
        REQUIRE(line);
        el_audit_rec again;
        REQUIRE(el_audit_parse(line, strlen(line), &again, err, sizeof err) == 0);
        el_route r2;
        el_route_decide(&p, &again.x, &again.s, &r2);
        REQUIRE(r2.source == r.source && !strcmp(r2.reason, r.reason));
        free(line);
    }
    el_route_device s;
    err[0] = 0;
    if (el_audit_parse_device((const char *)data, size, &s, err, sizeof err)) REQUIRE(err[0]);
    else check_device(&s);
    return 0;
}
