/*
 * test_router.c — the routing policy parser, the router's decision table,
 * the request metadata parser and the thermal monitor's pure pieces and
 * sampler (src/route/policy.c, router.c, thermal.c).
 *
 * Asserts: a valid policy parses to what it says; every hostile policy
 * (syntax, unknown/duplicate keys, wrong types, ranges, unknown format,
 * missing legal basis, NUL bytes, trailing text, too many classes) is
 * refused with a message naming where; the decision for every row of the
 * table in README "Routing" (local-only never leaves the device whatever the
 * state, consent, unknown class, model missing, hot, memory pressure,
 * battery, cloud down, deadline vs. the measured-speed estimate, prefer
 * cloud); the cache answers exactly what a fresh decision would; the
 * thermal levels step with hysteresis and fail safe; a sensor file drives
 * the sampler thread through every transition; the battery reader finds a
 * Battery-type supply and its state in a sysfs-shaped directory.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "route/cloud.h"
#include "route/policy.h"
#include "route/router.h"
#include "route/thermal.h"
#include "testutil.h"

static const char GOOD[] =
    "{\n"
    "  \"format\": \"edgellm-policy/1\",\n"
    "  \"version\": \"acme-2026-12-01\",\n"
    "  \"classes\": {\n"
    "    \"health\": {\"cloud\": \"never\"},\n"
    "    \"chat\": {\"cloud\": \"with_consent\", \"legal_basis\": \"consent\"},\n"
    "    \"public\": {\"cloud\": \"allowed\", \"legal_basis\": \"contract\"}\n"
    "  },\n"
    "  \"prefer\": \"local\",\n"
    "  \"thermal\": {\"derate_c\": 70, \"hot_c\": 85, \"hysteresis_c\": 5, \"max_tokens_derated\": 32,\n"
    "              \"slots_derated\": 1, \"sample_ms\": 100},\n"
    "  \"battery\": {\"min_percent\": 20},\n"
    "  \"cloud\": {\"down_for_s\": 10, \"timeout_s\": 30}\n"
    "}\n";

static int parse(const char *t, el_policy *p, char *err, size_t cap) { return el_policy_parse(t, strlen(t), p, err, cap); }

static void t_policy_good(void) {
    el_policy p;
    char err[400];
    CHECKF(parse(GOOD, &p, err, sizeof err) == 0, "%s", err);
    CHECK(!strcmp(p.version, "acme-2026-12-01"));
    CHECK(p.n_classes == 3);
    CHECK(el_policy_find(&p, "health") && el_policy_find(&p, "health")->cloud == EL_CLOUD_NEVER);
    CHECK(el_policy_find(&p, "chat") && el_policy_find(&p, "chat")->cloud == EL_CLOUD_WITH_CONSENT);
    CHECK(el_policy_find(&p, "public") && !strcmp(el_policy_find(&p, "public")->legal_basis, "contract"));
    CHECK(!strcmp(el_policy_strictest(&p)->name, "health"));
    CHECK(p.derate_c == 70 && p.hot_c == 85 && p.hysteresis_c == 5 && p.max_tokens_derated == 32);
    CHECK(p.slots_derated == 1 && p.sample_ms == 100 && p.battery_min_percent == 20);
    CHECK(p.cloud_down_s == 10 && p.cloud_timeout_s == 30 && !p.prefer_cloud && p.canary_ratio == 0);
    CHECK(parse("{\"format\":\"edgellm-policy/1\",\"version\":\"v\",\"classes\":{\"a\":{\"cloud\":\"never\"}},"
                "\"canary\":{\"ratio\":0.25}}", &p, err, sizeof err) == 0 && p.canary_ratio == 0.25);
    /* strictest is by rule, not by position */
    CHECK(parse("{\"format\":\"edgellm-policy/1\",\"version\":\"v\",\"classes\":{\"a\":{\"cloud\":\"allowed\","
                "\"legal_basis\":\"x\"},\"b\":{\"cloud\":\"with_consent\",\"legal_basis\":\"y\"}}}",
                &p, err, sizeof err) == 0);
    CHECK(!strcmp(el_policy_strictest(&p)->name, "b"));
    el_policy_builtin(&p);
    CHECK(!strcmp(el_policy_strictest(&p)->name, "local_only") && !strcmp(p.version, "builtin-1"));
}

/* A hostile document: refused, the message holds `where`, *out untouched. */
static void refused(const char *doc, const char *where) {
    el_policy p;
    memset(&p, 0x5a, sizeof p);
    char err[400] = "";
    int rc = parse(doc, &p, err, sizeof err);
    CHECKF(rc == -1, "accepted: %s", doc);
    CHECKF(strstr(err, where) != NULL, "message '%s' lacks '%s' for %s", err, where, doc);
    CHECK(((unsigned char *)&p)[0] == 0x5a && ((unsigned char *)&p)[sizeof p - 1] == 0x5a);
}

#define HEAD "{\"format\":\"edgellm-policy/1\",\"version\":\"v1\","
#define CLS "\"classes\":{\"a\":{\"cloud\":\"never\"}}"

static void t_policy_hostile(void) {
    refused("", "line 1, column 1");
    refused("{\n  \"format\": \"edgellm-policy/1\",\n  \"version\": \"x\"\n  \"classes\": {}\n}", "line 4");
    refused(HEAD CLS "} trailing", "text after the JSON");
    refused("[1,2]", "policy: expected an object");
    refused("{\"format\":\"edgellm-policy/2\",\"version\":\"v\"," CLS "}", "unsupported policy format");
    refused("{\"version\":\"v\"," CLS "}", "missing \"format\"");
    refused("{\"format\":\"edgellm-policy/1\"," CLS "}", "missing \"version\"");
    refused(HEAD "\"version\":\"v2\"," CLS "}", "duplicate key \"version\"");
    refused(HEAD CLS ",\"colour\":1}", "unknown key \"colour\"");
    refused(HEAD "\"classes\":{}}", "at least one class");
    refused(HEAD "\"classes\":[]}", "classes: expected an object");
    refused(HEAD "\"classes\":{\"a\":{\"cloud\":\"never\"},\"a\":{\"cloud\":\"never\"}}}", "duplicate");
    refused(HEAD "\"classes\":{\"A B\":{\"cloud\":\"never\"}}}", "classes.A B");
    refused(HEAD "\"classes\":{\"a\":{\"cloud\":\"sometimes\"}}}", "classes.a.cloud: unknown rule");
    refused(HEAD "\"classes\":{\"a\":{}}}", "classes.a.cloud: missing");
    refused(HEAD "\"classes\":{\"a\":{\"cloud\":\"allowed\"}}}", "classes.a.legal_basis: missing");
    refused(HEAD "\"classes\":{\"a\":{\"cloud\":\"allowed\",\"legal_basis\":\"\"}}}", "classes.a.legal_basis");
    refused(HEAD "\"classes\":{\"a\":{\"cloud\":\"allowed\",\"legal_basis\":\"x\\u0000y\"}}}", "a NUL character");
    refused(HEAD "\"classes\":{\"a\":{\"cloud\":\"never\",\"extra\":true}}}", "classes.a: unknown key");
    refused(HEAD "\"classes\":{\"a\":{\"cloud\":1}}}", "classes.a.cloud: expected a string");
    refused(HEAD CLS ",\"prefer\":\"edge\"}", "prefer: expected");
    refused(HEAD CLS ",\"thermal\":{\"derate_c\":90,\"hot_c\":80}}", "derate_c (90) must be below hot_c");
    refused(HEAD CLS ",\"thermal\":{\"hot_c\":1e400}}", "thermal.hot_c: inf is out of range"); /* cJSON: inf */
    refused(HEAD CLS ",\"thermal\":{\"hot_c\":\"hot\"}}", "thermal.hot_c: expected a number");
    refused(HEAD CLS ",\"thermal\":{\"max_tokens_derated\":1.5}}", "expected an integer");
    refused(HEAD CLS ",\"thermal\":{\"sample_ms\":1}}", "thermal.sample_ms: 1 is out of range");
    refused(HEAD CLS ",\"thermal\":{\"slots_derated\":0}}", "thermal.slots_derated");
    refused(HEAD CLS ",\"battery\":{\"min_percent\":101}}", "battery.min_percent");
    refused(HEAD CLS ",\"cloud\":{\"timeout_s\":0}}", "cloud.timeout_s");
    refused(HEAD CLS ",\"cloud\":{\"down_for_s\":-1}}", "cloud.down_for_s");
    refused(HEAD CLS ",\"cloud\":{\"url\":\"http://x\"}}", "cloud: unknown key \"url\"");
    refused(HEAD CLS ",\"canary\":{\"ratio\":1.5}}", "canary.ratio: 1.5 is out of range");
    refused(HEAD CLS ",\"canary\":{\"share\":0.1}}", "canary: unknown key");
    refused(HEAD CLS ",\"canary\":0.1}", "canary: expected an object");
    {   /* a NUL byte inside the text */
        char doc[] = HEAD CLS "}";
        doc[20] = 0;
        el_policy p;
        char err[200];
        CHECK(el_policy_parse(doc, sizeof doc - 1, &p, err, sizeof err) == -1 && strstr(err, "NUL"));
    }
    {   /* 33 classes */
        char doc[4096];
        int n = snprintf(doc, sizeof doc, HEAD "\"classes\":{");
        for (int i = 0; i < 33; i++) n += snprintf(doc + n, sizeof doc - (size_t)n, "%s\"c%d\":{\"cloud\":\"never\"}", i ? "," : "", i);
        snprintf(doc + n, sizeof doc - (size_t)n, "}}");
        refused(doc, "more than 32 classes");
    }
    {   /* over the size cap */
        size_t big = EL_POLICY_MAX_BYTES + 10;
        char *doc = malloc(big + 1);
        memset(doc, ' ', big);
        doc[big] = 0;
        el_policy p;
        char err[200];
        CHECK(el_policy_parse(doc, big, &p, err, sizeof err) == -1 && strstr(err, "at most"));
        free(doc);
    }
    {   /* a file that is not regular, and one that does not exist */
        el_policy p;
        char err[400];
        CHECK(el_policy_load("/dev/zero", &p, err, sizeof err) == -1 && strstr(err, "/dev/zero"));
        CHECK(el_policy_load("/nonexistent/policy.json", &p, err, sizeof err) == -1 && strstr(err, "nonexistent"));
    }
}

/* ---- the decision table ---- */

static el_policy P;

static el_route_req req(const char *cls, bool consent) {
    el_route_req x;
    memset(&x, 0, sizeof x);
    if (cls) snprintf(x.data_class, sizeof x.data_class, "%s", cls);
    x.class_ok = !cls || el_policy_name_ok(cls);
    x.consent = consent;
    x.n_prompt = 100;
    x.max_tokens = 100;
    x.cloud_capable = true;
    return x;
}

static el_route_device healthy(void) {
    el_route_device d;
    memset(&d, 0, sizeof d);
    d.local_ready = true;
    d.thermal = EL_THERMAL_NORMAL;
    d.thermal_factor = 1;
    d.battery_pct = -1;
    d.cloud_configured = d.cloud_up = true;
    return d;
}

static void expect(const el_route_req *x, const el_route_device *d, el_route_source src, const char *reason) {
    el_route r;
    el_route_decide(&P, x, d, &r);
    CHECKF(r.source == src && !strcmp(r.reason, reason), "class '%s': got %s/%s (%s), want %s/%s", x->data_class,
           el_route_source_name(r.source), r.reason, r.detail, el_route_source_name(src), reason);
    CHECK(!strcmp(r.policy_version, "acme-2026-12-01"));
    CHECK(r.detail[0]);
    if (src == EL_ROUTE_DECLINED) CHECK(r.advice[0] && r.status >= 400);
    if (src == EL_ROUTE_CLOUD) CHECK(r.legal_basis[0]);
}

static void t_decide(void) {
    char err[400];
    CHECKF(parse(GOOD, &P, err, sizeof err) == 0, "%s", err);
    el_route_device d = healthy();
    el_route_req x;

    /* healthy device: everything runs locally (prefer local) */
    x = req("health", false); expect(&x, &d, EL_ROUTE_LOCAL, "local_only_class");
    x = req("public", false); expect(&x, &d, EL_ROUTE_LOCAL, "local_preferred");
    x = req(NULL, false); expect(&x, &d, EL_ROUTE_LOCAL, "local_only_class"); /* default = strictest */
    {
        el_route r;
        el_route_decide(&P, &x, &d, &r);
        CHECK(!strcmp(r.data_class, "health") && !strcmp(r.class_source, "default"));
    }
    /* unknown and malformed classes: declined, never cloud — even if local is down */
    x = req("secret", false); expect(&x, &d, EL_ROUTE_DECLINED, "unknown_data_class");
    x = req("Bad Name\r\n", true); expect(&x, &d, EL_ROUTE_DECLINED, "unknown_data_class");
    el_route_device down = d;
    down.local_ready = false;
    snprintf(down.local_why, sizeof down.local_why, "no such file");
    x = req("secret", true); expect(&x, &down, EL_ROUTE_DECLINED, "unknown_data_class");

    /* each local blocker: cloud for a cloud class, declined for a local-only one */
    el_route_device hot = d, mem = d, bat = d;
    hot.thermal = EL_THERMAL_HOT;
    hot.thermal_factor = 0;
    mem.mem_pressure = true;
    snprintf(mem.mem_why, sizeof mem.mem_why, "MemAvailable below the floor");
    bat.battery_pct = 10;
    bat.discharging = true;
    const el_route_device *blk[] = {&down, &hot, &mem, &bat};
    const char *why[] = {"model_unavailable", "thermal_hot", "memory_pressure", "battery_low"};
    for (int i = 0; i < 4; i++) {
        x = req("public", false); expect(&x, blk[i], EL_ROUTE_CLOUD, why[i]);
        x = req("health", true); expect(&x, blk[i], EL_ROUTE_DECLINED, why[i]);
        x = req(NULL, true); expect(&x, blk[i], EL_ROUTE_DECLINED, why[i]); /* no class: strictest, never leaves */
        x = req("chat", false); expect(&x, blk[i], EL_ROUTE_DECLINED, why[i]); /* consent missing */
        x = req("chat", true); expect(&x, blk[i], EL_ROUTE_CLOUD, why[i]);
        /* cloud not configured / down: declined, with why */
        el_route_device nc = *blk[i];
        nc.cloud_configured = nc.cloud_up = false;
        x = req("public", false); expect(&x, &nc, EL_ROUTE_DECLINED, why[i]);
        el_route_device cd = *blk[i];
        cd.cloud_up = false;
        x = req("public", false); expect(&x, &cd, EL_ROUTE_DECLINED, why[i]);
        /* an endpoint without a cloud counterpart (/completion) */
        x = req("public", false);
        x.cloud_capable = false;
        expect(&x, blk[i], EL_ROUTE_DECLINED, why[i]);
    }
    {   /* the consent advice, and retry-after for the hot decline */
        el_route r;
        x = req("chat", false);
        el_route_decide(&P, &x, &hot, &r);
        CHECK(strstr(r.advice, "consent") != NULL && r.retry_after_s > 0 && r.status == 503);
        x = req("health", false);
        el_route_decide(&P, &x, &down, &r);
        CHECK(strstr(r.advice, "install") != NULL && strstr(r.detail, "no such file") != NULL);
    }
    /* battery: charging is fine; no battery is fine */
    el_route_device chg = bat;
    chg.discharging = false;
    x = req("public", false); expect(&x, &chg, EL_ROUTE_LOCAL, "local_preferred");

    /* deadline: the estimate from measured speed (none measured: no estimate, local) */
    x = req("public", false);
    x.deadline_ms = 500;
    expect(&x, &d, EL_ROUTE_LOCAL, "local_preferred");
    el_route_device slow = d;
    slow.local_pp_tps = 1000;
    slow.local_tg_tps = 50; /* 100 prompt / 1000 + 100 / 50 = 2.1 s */
    expect(&x, &slow, EL_ROUTE_CLOUD, "deadline");
    {
        el_route r;
        el_route_decide(&P, &x, &slow, &r);
        CHECK(fabs(r.est_local_ms - 2100) < 1);
    }
    x.deadline_ms = 3000;
    expect(&x, &slow, EL_ROUTE_LOCAL, "local_preferred");
    el_route_device warm = slow; /* derating halves the decode speed: 0.1 + 4 s */
    warm.thermal = EL_THERMAL_DERATED;
    warm.thermal_factor = 0.5;
    expect(&x, &warm, EL_ROUTE_CLOUD, "deadline");
    x = req("health", false); /* a local-only class stays local even past its deadline */
    x.deadline_ms = 10;
    expect(&x, &slow, EL_ROUTE_LOCAL, "local_only_class");

    /* prefer cloud */
    el_policy pc = P;
    pc.prefer_cloud = true;
    el_route r;
    x = req("public", false);
    el_route_decide(&pc, &x, &d, &r);
    CHECK(r.source == EL_ROUTE_CLOUD && !strcmp(r.reason, "policy_prefers_cloud"));
    x = req("health", false);
    el_route_decide(&pc, &x, &d, &r);
    CHECK(r.source == EL_ROUTE_LOCAL);
}

static void t_router_cache(void) {
    el_router *rt = el_router_new(&P, true);
    el_route_device d = healthy();
    el_route_req x = req("public", false);
    el_route a, b;
    el_router_device(rt, &d);
    el_router_decide(rt, &x, &d, &a);
    el_router_decide(rt, &x, &d, &b);
    CHECK(!a.cached && b.cached && a.source == b.source && !strcmp(a.reason, b.reason));
    /* a failed cloud call marks the cloud down: a new key, a new decision */
    el_route_device hot = healthy();
    hot.thermal = EL_THERMAL_HOT;
    el_router_device(rt, &hot);
    el_router_decide(rt, &x, &hot, &a);
    CHECK(a.source == EL_ROUTE_CLOUD);
    el_router_cloud_result(rt, false, 0);
    el_router_device(rt, &hot);
    CHECK(!hot.cloud_up);
    el_router_decide(rt, &x, &hot, &a);
    CHECK(a.source == EL_ROUTE_DECLINED && !a.cached);
    el_router_cloud_result(rt, true, 12.5);
    el_router_device(rt, &hot);
    CHECK(hot.cloud_up);
    /* with a deadline the estimate runs every time */
    el_router_local_speed(rt, 100, 100, 101, 1000); /* 1000 t/s prefill, 100 t/s decode */
    el_route_device s = healthy();
    el_router_device(rt, &s);
    CHECK(fabs(s.local_pp_tps - 1000) < 1e-6 && fabs(s.local_tg_tps - 100) < 1e-6);
    x.deadline_ms = 500; /* 0.1 + 1.0 s > 0.5 s */
    el_router_decide(rt, &x, &s, &a);
    CHECK(a.source == EL_ROUTE_CLOUD && !strcmp(a.reason, "deadline") && !a.cached);
    /* canary: ratio 1 marks every local, cloud-eligible, non-streamed decision; never a local-only class */
    el_policy pc = P;
    pc.canary_ratio = 1.0;
    el_router *cr = el_router_new(&pc, true);
    el_route_device h2 = healthy();
    el_router_device(cr, &h2);
    el_route_req cx = req("public", false);
    cx.canary_capable = true;
    el_router_decide(cr, &cx, &h2, &a);
    el_router_decide(cr, &cx, &h2, &b); /* cached decision: drawn afresh */
    CHECK(a.source == EL_ROUTE_LOCAL && a.canary && b.cached && b.canary);
    char *cj = el_route_json(&a);
    CHECK(cj && strstr(cj, "\"canary\":true") && strstr(cj, "\"legal_basis\":\"contract\""));
    free(cj);
    cx = req("health", false);
    cx.canary_capable = true;
    el_router_decide(cr, &cx, &h2, &a);
    CHECK(a.source == EL_ROUTE_LOCAL && !a.canary);
    cx = req("chat", false); /* with_consent, no consent: not eligible */
    cx.canary_capable = true;
    el_router_decide(cr, &cx, &h2, &a);
    CHECK(!a.canary);
    cx = req("public", false);
    cx.canary_capable = false; /* a stream */
    el_router_decide(cr, &cx, &h2, &a);
    CHECK(!a.canary);
    CHECK(el_router_canary_begin(cr));
    el_router_canary_record(cr, true, true, 10, 20);
    el_router_canary_record(cr, true, false, 10, 20);
    el_router_canary_record(cr, false, false, 10, 0);
    el_router_canary_end(cr);
    char *cm = el_router_metrics(cr);
    CHECK(cm && strstr(cm, "edgellm_route_canary_total{outcome=\"agreed\"} 1\n") &&
          strstr(cm, "edgellm_route_canary_total{outcome=\"differed\"} 1\n") &&
          strstr(cm, "edgellm_route_canary_total{outcome=\"cloud_failed\"} 1\n") &&
          strstr(cm, "edgellm_route_canary_latency_ms_sum{side=\"cloud\"} 40.0"));
    free(cm);
    el_router_canary_drain(cr);
    CHECK(!el_router_canary_begin(cr)); /* draining: no new canary */
    el_router_free(cr);
    char *m = el_router_metrics(rt);
    CHECK(m && strstr(m, "edgellm_route_decisions_total{source=\"cloud\",reason=\"deadline\"} 1"));
    CHECK(m && strstr(m, "edgellm_route_cache_hits_total 1"));
    free(m);
    el_router_free(rt);
}

static void t_meta(void) {
    el_route_req x;
    char err[300];
    const char *b1 = "{\"messages\":[],\"edgellm\":{\"data_class\":\"chat\",\"consent\":true,\"deadline_ms\":250}}";
    CHECK(el_route_parse_meta(b1, strlen(b1), NULL, &x, err, sizeof err) == 0);
    CHECK(!strcmp(x.data_class, "chat") && x.consent && x.deadline_ms == 250 && x.class_ok && !x.class_from_header);
    CHECK(el_route_parse_meta("{}", 2, "public", &x, err, sizeof err) == 0);
    CHECK(!strcmp(x.data_class, "public") && x.class_from_header && !x.consent);
    CHECK(el_route_parse_meta(b1, strlen(b1), "chat", &x, err, sizeof err) == 0);
    CHECK(el_route_parse_meta(b1, strlen(b1), "public", &x, err, sizeof err) == -1 && strstr(err, "different"));
    CHECK(el_route_parse_meta("{}", 2, NULL, &x, err, sizeof err) == 0 && x.data_class[0] == 0);
    CHECK(el_route_parse_meta("not json", 8, NULL, &x, err, sizeof err) == 0 && x.data_class[0] == 0);
    /* a malformed name is carried as malformed (declined later as unknown) */
    const char *b2 = "{\"edgellm\":{\"data_class\":\"a\\r\\nX-Evil: 1\"}}";
    CHECK(el_route_parse_meta(b2, strlen(b2), NULL, &x, err, sizeof err) == 0 && !x.class_ok && !strchr(x.data_class, '\n'));
    CHECK(el_route_parse_meta("{}", 2, "bad name", &x, err, sizeof err) == 0 && !x.class_ok);
    const char *bad[] = {
        "{\"edgellm\":1}", "{\"edgellm\":{\"data_class\":5}}", "{\"edgellm\":{\"consent\":\"yes\"}}",
        "{\"edgellm\":{\"deadline_ms\":-1}}", "{\"edgellm\":{\"deadline_ms\":\"1\"}}", "{\"edgellm\":{\"route\":\"cloud\"}}",
        "{\"edgellm\":{\"consent\":true,\"consent\":false}}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECKF(el_route_parse_meta(bad[i], strlen(bad[i]), NULL, &x, err, sizeof err) == -1 && err[0], "%s", bad[i]);
}

static void t_json(void) {
    el_route r;
    memset(&r, 0, sizeof r);
    r.source = EL_ROUTE_CLOUD;
    snprintf(r.reason, sizeof r.reason, "thermal_hot");
    snprintf(r.detail, sizeof r.detail, "quote \" backslash \\ newline \n");
    snprintf(r.policy_version, sizeof r.policy_version, "v1");
    snprintf(r.data_class, sizeof r.data_class, "public");
    char *j = el_route_inject(strdup("{\"id\":1}"), &r);
    CHECK(j && !strncmp(j, "{\"edgellm\":{\"route\":{\"source\":\"cloud\",\"reason\":\"thermal_hot\"", 60));
    CHECK(j && strstr(j, "\\\"") && strstr(j, "\\n") && strstr(j, "},\"id\":1}"));
    free(j);
    j = el_route_inject(strdup("{ }"), &r);
    CHECK(j && strstr(j, "}} }") != NULL);
    free(j);
    char h[300];
    el_route_header(&r, h, sizeof h);
    CHECK(!strcmp(h, "source=cloud; reason=thermal_hot; policy=v1; class=public"));
    r.source = EL_ROUTE_DECLINED;
    snprintf(r.advice, sizeof r.advice, "retry later");
    j = el_route_decline_json(&r);
    CHECK(j && strstr(j, "\"type\":\"route_declined\"") && strstr(j, "\"code\":\"thermal_hot\"") && strstr(j, "retry later"));
    free(j);
}

/* ---- the cloud stream relay (its checks, on bytes already received) ---- */

static char *relay_all(const char *in) {
    el_route r;
    memset(&r, 0, sizeof r);
    r.source = EL_ROUTE_CLOUD;
    snprintf(r.reason, sizeof r.reason, "thermal_hot");
    snprintf(r.policy_version, sizeof r.policy_version, "v1");
    el_cloud_relay *rl = el_cloud_relay_detached(&r, in, strlen(in));
    char *out = calloc(1, 65536);
    size_t n = 0, k;
    while ((k = el_cloud_relay_read(rl, out + n, 7)) > 0) n += k; /* small reads: frames cross read boundaries */
    out[n] = 0;
    el_cloud_relay_close(rl);
    return out;
}

static void t_relay(void) {
    /* a clean stream: passed on, the route on the first event, a spoofed route dropped */
    char *o = relay_all("data: {\"id\":1,\"edgellm\":{\"route\":{\"source\":\"local\"}}}\r\n\r\n: comment\n\n"
                        "data: {\"id\":2}\n\ndata: [DONE]\n\n");
    CHECKF(!strcmp(o, "data: {\"edgellm\":{\"route\":{\"source\":\"cloud\",\"reason\":\"thermal_hot\",\"detail\":\"\","
                      "\"policy_version\":\"v1\",\"data_class\":\"\",\"class_source\":\"default\",\"cached\":false}},\"id\":1}\n\n"
                      "data: {\"id\":2}\n\ndata: [DONE]\n\n"), "%s", o);
    free(o);
    /* stops mid-way (no [DONE]): typed error event, then [DONE]; nothing else added */
    o = relay_all("data: {\"id\":1}\n\ndata: {\"id\":");
    CHECKF(strstr(o, "\"code\":\"cloud_stream_broken\"") && strstr(o, "data: [DONE]\n\n") &&
           !strstr(o, "\"id\":2") && strstr(o, "\"type\":\"cloud_error\""), "%s", o);
    free(o);
    /* garbage event: typed error, the rest is not relayed */
    o = relay_all("data: {\"id\":1}\n\ndata: <html>oops</html>\n\ndata: {\"id\":3}\n\ndata: [DONE]\n\n");
    CHECKF(strstr(o, "\"code\":\"cloud_bad_response\"") && !strstr(o, "\"id\":3") && !strstr(o, "<html>"), "%s", o);
    free(o);
    /* nothing at all */
    o = relay_all("");
    CHECK(strstr(o, "cloud_stream_broken") != NULL);
    free(o);
}

/* ---- thermal ---- */

static void t_thermal_pure(void) {
    double c;
    CHECK(el_thermal_parse_millideg("45000\n", 6, &c) && c == 45.0);
    CHECK(el_thermal_parse_millideg("-5500", 5, &c) && c == -5.5);
    CHECK(el_thermal_parse_millideg(" 71234 \n", 8, &c) && fabs(c - 71.234) < 1e-9);
    const char *bad[] = {"", "\n", "hot", "45.5", "45000x", "4500000", "-200000", "1e5", "0x10", "--1", "45000\n45000"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECKF(!el_thermal_parse_millideg(bad[i], strlen(bad[i]), &c), "accepted '%s'", bad[i]);
    el_thermal_cfg cfg = {NULL, NULL, 70, 85, 5, 100, NULL, NULL};
    el_thermal_level L = EL_THERMAL_NORMAL;
    struct { double t; el_thermal_level want; } seq[] = {
        {60, EL_THERMAL_NORMAL}, {69.9, EL_THERMAL_NORMAL}, {70, EL_THERMAL_DERATED}, {66, EL_THERMAL_DERATED},
        {65.1, EL_THERMAL_DERATED}, {64.9, EL_THERMAL_NORMAL}, {85, EL_THERMAL_HOT}, {81, EL_THERMAL_HOT},
        {80.1, EL_THERMAL_HOT}, {79.9, EL_THERMAL_DERATED}, {67, EL_THERMAL_DERATED}, {90, EL_THERMAL_HOT},
        {50, EL_THERMAL_NORMAL}, {100, EL_THERMAL_HOT},
    };
    for (size_t i = 0; i < sizeof seq / sizeof seq[0]; i++) {
        L = el_thermal_step(L, true, seq[i].t, &cfg);
        CHECKF(L == seq[i].want, "step %zu (%.1f C): %s, want %s", i, seq[i].t, el_thermal_level_name(L),
               el_thermal_level_name(seq[i].want));
    }
    CHECK(el_thermal_step(EL_THERMAL_NORMAL, false, 20, &cfg) == EL_THERMAL_HOT); /* unreadable: fail safe */
}

static void write_temp(const char *path, const char *text) {
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    fputs(text, f);
    fclose(f);
    rename(tmp, path);
}

static el_thermal_state wait_level(el_thermal *t, el_thermal_level want, long after_samples) {
    el_thermal_state s = el_thermal_get(t);
    for (int i = 0; i < 400 && (s.level != want || s.samples <= after_samples); i++) {
        usleep(10000);
        s = el_thermal_get(t);
    }
    return s;
}

static void t_thermal_sampler(void) {
    char path[512];
    snprintf(path, sizeof path, "/tmp/el_test_thermal_%d", (int)getpid());
    write_temp(path, "40000\n");
    el_thermal_cfg cfg = {path, "/nonexistent-sysfs", 70, 85, 5, 20, NULL, NULL};
    char msg[200];
    el_thermal *t = el_thermal_start(&cfg, msg, sizeof msg);
    CHECK(t != NULL);
    if (!t) return;
    el_thermal_state s = el_thermal_get(t);
    CHECK(s.has_sensor && s.sensor_ok && s.level == EL_THERMAL_NORMAL && s.temp_c == 40 && s.factor == 1.0);
    struct { const char *text; el_thermal_level want; double factor; } seq[] = {
        {"72000\n", EL_THERMAL_DERATED, 0.5}, {"67000\n", EL_THERMAL_DERATED, 0.5}, {"64000\n", EL_THERMAL_NORMAL, 1.0},
        {"86000\n", EL_THERMAL_HOT, 0.0},     {"81000\n", EL_THERMAL_HOT, 0.0},      {"79000\n", EL_THERMAL_DERATED, 0.5},
        {"garbage", EL_THERMAL_HOT, 0.0},     {"50000\n", EL_THERMAL_NORMAL, 1.0},
    };
    long transitions = s.transitions;
    for (size_t i = 0; i < sizeof seq / sizeof seq[0]; i++) {
        long n0 = el_thermal_get(t).samples;
        write_temp(path, seq[i].text);
        s = wait_level(t, seq[i].want, n0 + 1);
        CHECKF(s.level == seq[i].want && s.factor == seq[i].factor, "after '%s': %s (factor %.2f), want %s", seq[i].text,
               el_thermal_level_name(s.level), s.factor, el_thermal_level_name(seq[i].want));
    }
    CHECK(s.transitions - transitions == 6); /* the hysteresis steps (67, 81 C) changed nothing */
    unlink(path); /* the sensor vanishes: hot */
    s = wait_level(t, EL_THERMAL_HOT, s.samples + 1);
    CHECK(s.level == EL_THERMAL_HOT && !s.sensor_ok && strstr(s.why, "cannot be read"));
    el_thermal_stop(t);
    /* no sensor at all (an empty sysfs): normal, "no sensor" */
    el_thermal_cfg none = {NULL, "/nonexistent-sysfs", 70, 85, 5, 20, NULL, NULL};
    t = el_thermal_start(&none, msg, sizeof msg);
    s = el_thermal_get(t);
    CHECK(t && !s.has_sensor && s.level == EL_THERMAL_NORMAL);
    el_thermal_stop(t);
}

static void put(const char *dir, const char *name, const char *text) {
    char p[700];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    if (f) { fputs(text, f); fclose(f); }
}

static void t_battery(void) {
    char root[100], d[300], cmd[800];
    snprintf(root, sizeof root, "/tmp/el_test_battery_%d", (int)getpid());
    snprintf(d, sizeof d, "%s/class/power_supply/AC", root);
    snprintf(cmd, sizeof cmd, "mkdir -p %s %s/class/power_supply/BAT0", d, root);
    CHECK(system(cmd) == 0);
    int pct = -1;
    bool dis = false;
    put(d, "type", "Mains\n");
    CHECK(!el_battery_read(root, &pct, &dis)); /* mains only: no battery */
    snprintf(d, sizeof d, "%s/class/power_supply/BAT0", root);
    put(d, "type", "Battery\n");
    put(d, "capacity", "17\n");
    put(d, "status", "Discharging\n");
    CHECK(el_battery_read(root, &pct, &dis) && pct == 17 && dis);
    put(d, "status", "Charging\n");
    CHECK(el_battery_read(root, &pct, &dis) && pct == 17 && !dis);
    put(d, "capacity", "250\n"); /* nonsense: not a battery reading */
    CHECK(!el_battery_read(root, &pct, &dis));
    CHECK(!el_battery_read("/nonexistent-sysfs", &pct, &dis));
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    CHECK(system(cmd) == 0);
}

int main(void) {
    t_policy_good();
    t_policy_hostile();
    t_decide();
    t_router_cache();
    t_meta();
    t_json();
    t_relay();
    t_thermal_pure();
    t_thermal_sampler();
    t_battery();
    printf("%d checks, %d failures\n", el_test_checks, el_test_failures);
    return el_test_failures ? 1 : 0;
}
