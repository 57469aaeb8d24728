/*
 * fuzz_policy.c — libFuzzer target for the router's parsers of outside
 * bytes (src/route/policy.c, router.c, cloud.c, thermal.c): the policy
 * file, a request's routing metadata ("edgellm" member + X-Data-Class
 * header), the cloud's SSE stream as the relay checks it, and a thermal
 * sensor's text (an accepted reading is within -100..250 C).
 *
 * Every input goes to all three. A refused policy has a message; an
 * accepted one keeps every promise of policy.h (1..32 classes with
 * well-formed, distinct names, a legal basis for every class that may reach
 * the cloud, printable version, derate_c < hot_c, ranges) and its strictest
 * class is the minimum rule. Metadata: refused with a message, or a class
 * that is well-formed or flagged malformed (never a control byte, which
 * would reach a header), a deadline in range; routed against the built-in
 * policy on a device with nothing local, an unknown or malformed class is
 * never sent to the cloud. The relay's output is SSE whose every data line is
 * [DONE] or a JSON object, ending in exactly one [DONE], with the route
 * member on the first object and no "edgellm" member from the input.
 */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "route/cloud.h"
#include "route/policy.h"
#include "route/router.h"
#include "route/thermal.h"
#include "util/buf.h"

#define REQUIRE(c) do { if (!(c)) { fprintf(stderr, "invariant failed: %s\n", #c); abort(); } } while (0)

static void check_policy(const uint8_t *data, size_t size) {
    el_policy p;
    char err[400];
    err[0] = 0;
    if (el_policy_parse((const char *)data, size, &p, err, sizeof err)) {
        REQUIRE(err[0]);
        return;
    }
    REQUIRE(p.n_classes >= 1 && p.n_classes <= EL_POLICY_MAX_CLASSES);
    REQUIRE(p.version[0]);
    for (const char *v = p.version; *v; v++) REQUIRE(*v >= 0x20 && *v < 0x7f);
    const el_policy_class *st = el_policy_strictest(&p);
    REQUIRE(st);
    for (int i = 0; i < p.n_classes; i++) {
        REQUIRE(el_policy_name_ok(p.classes[i].name));
        REQUIRE(p.classes[i].cloud >= EL_CLOUD_NEVER && p.classes[i].cloud <= EL_CLOUD_ALLOWED);
        if (p.classes[i].cloud != EL_CLOUD_NEVER) REQUIRE(p.classes[i].legal_basis[0]);
        REQUIRE(st->cloud <= p.classes[i].cloud);
        for (int j = i + 1; j < p.n_classes; j++) REQUIRE(strcmp(p.classes[i].name, p.classes[j].name));
        REQUIRE(el_policy_find(&p, p.classes[i].name) == &p.classes[i]);
    }
    REQUIRE(p.derate_c < p.hot_c && p.hysteresis_c >= 0);
    REQUIRE(p.max_tokens_derated >= 1 && p.slots_derated >= 1 && p.sample_ms >= 50 && p.sample_ms <= 60000);
    REQUIRE(p.battery_min_percent >= 0 && p.battery_min_percent <= 100);
    REQUIRE(p.cloud_timeout_s >= 1 && p.cloud_down_s >= 0);
    REQUIRE(p.canary_ratio >= 0 && p.canary_ratio <= 1);
}

static void check_meta(const uint8_t *data, size_t size) {
    /* the header: the input up to its first NUL, when there is one */
    const void *nul = memchr(data, 0, size);
    const char *hdr = nul ? (const char *)data : NULL;
    el_route_req x;
    char err[300];
    err[0] = 0;
    if (el_route_parse_meta((const char *)data, size, hdr, &x, err, sizeof err)) {
        REQUIRE(err[0]);
        return;
    }
    for (const char *c = x.data_class; *c; c++) REQUIRE((unsigned char)*c >= 0x20 && (unsigned char)*c < 0x7f);
    REQUIRE(!x.class_ok || !x.data_class[0] || el_policy_name_ok(x.data_class));
    REQUIRE(x.deadline_ms >= 0 && x.deadline_ms <= 86400000.0);
    el_policy p;
    el_policy_builtin(&p);
    el_route_device d;
    memset(&d, 0, sizeof d);
    d.battery_pct = -1;
    d.cloud_configured = d.cloud_up = true;
    x.n_prompt = 10;
    x.max_tokens = 10;
    x.cloud_capable = true;
    el_route r;
    el_route_decide(&p, &x, &d, &r);
    const el_policy_class *k = x.data_class[0] ? (x.class_ok ? el_policy_find(&p, x.data_class) : NULL)
                                               : el_policy_strictest(&p);
    if (!k) REQUIRE(r.source == EL_ROUTE_DECLINED && !strcmp(r.reason, "unknown_data_class"));
    if (r.source == EL_ROUTE_CLOUD) REQUIRE(k && (k->cloud == EL_CLOUD_ALLOWED || (k->cloud == EL_CLOUD_WITH_CONSENT && x.consent)));
    REQUIRE(r.source != EL_ROUTE_LOCAL); /* nothing local on this device */
    char h[400];
    el_route_header(&r, h, sizeof h);
    for (const char *c = h; *c; c++) REQUIRE(*c != '\r' && *c != '\n');
    char *j = el_route_json(&r);
    cJSON *o = j ? cJSON_Parse(j) : NULL;
    REQUIRE(o);
    cJSON_Delete(o);
    free(j);
}

static void check_relay(const uint8_t *data, size_t size) {
    el_route rt;
    memset(&rt, 0, sizeof rt);
    rt.source = EL_ROUTE_CLOUD;
    snprintf(rt.reason, sizeof rt.reason, "fuzz");
    snprintf(rt.policy_version, sizeof rt.policy_version, "v");
    el_cloud_relay *r = el_cloud_relay_detached(&rt, (const char *)data, size);
    if (!r) return;
    el_buf out = {0};
    char buf[97];
    size_t n;
    while ((n = el_cloud_relay_read(r, buf, sizeof buf)) > 0) REQUIRE(el_buf_append(&out, buf, n));
    el_cloud_relay_close(r);
    REQUIRE(el_buf_append(&out, "", 1));
    /* events: "data: X\n\n" only */
    int n_done = 0, n_json = 0;
    char *p = out.p;
    while (*p) {
        REQUIRE(!strncmp(p, "data: ", 6));
        char *e = strstr(p, "\n\n");
        REQUIRE(e);
        *e = 0;
        const char *d = p + 6;
        REQUIRE(!strchr(d, '\n'));
        if (!strcmp(d, "[DONE]")) {
            n_done++;
        } else {
            REQUIRE(n_done == 0);
            cJSON *o = cJSON_Parse(d);
            REQUIRE(cJSON_IsObject(o));
            cJSON *em = cJSON_GetObjectItemCaseSensitive(o, "edgellm");
            if (n_json == 0 && !cJSON_GetObjectItemCaseSensitive(o, "error")) {
                REQUIRE(em && cJSON_GetObjectItemCaseSensitive(em, "route"));
            } else if (n_json > 0) {
                REQUIRE(!em);
            }
            cJSON_Delete(o);
            n_json++;
        }
        p = e + 2;
    }
    REQUIRE(n_done == 1);
    el_buf_free(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    double c;
    if (el_thermal_parse_millideg((const char *)data, size, &c)) REQUIRE(c >= -100.0 && c <= 250.0);
    check_policy(data, size);
    check_meta(data, size);
    check_relay(data, size);
    return 0;
}
