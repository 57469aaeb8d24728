/*
 * test_telemetry.c — content-free telemetry, the rotating spool and the
 * routing audit log (src/route/telemetry.c, audit.c).
 *
 * Asserts:
 *   - el_tev holds no pointer or character array (its size equals the sum
 *     of its code/number members: a char* added later breaks this test);
 *   - an event's JSONL line has only the schema's keys; route reasons,
 *     finish reasons, error codes and buckets come out as their constant
 *     names; a data class index outside the policy is written "unknown";
 *     the fingerprint is kept only when it is an identifier (else
 *     "invalid"), the model id is normalised to [A-Za-z0-9._-];
 *   - time and memory buckets at their edges;
 *   - the spool rotates when the next line would pass the cap (file.jsonl
 *     -> file.1.jsonl -> file.2.jsonl, the oldest dropped, no file over the
 *     cap, every line whole, nothing lost that the keep count holds);
 *   - rotated names with and without an extension;
 *   - the audit line of every decision-table row parses back (el_audit_parse)
 *     into inputs that el_route_decide turns into the same decision; the
 *     line of an unknown class holds no trace of the name sent;
 *   - hostile audit lines and device states are refused with the field named;
 *   - the SSE text reader (sse_text.c, run/chat --route's cloud stream):
 *     chat and completion text, split anywhere, [DONE], finish reasons, an
 *     error event's code, and hostile events (not JSON, not an object, a
 *     bad "choices", an over-long line, a code that is not a word) failing
 *     typed; nothing is read after the end.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "route/audit.h"
#include "route/policy.h"
#include "route/router.h"
#include "server/sse_text.h"
#include "route/telemetry.h"
#include "util/buf.h"
#include "testutil.h"

static const char POLICY[] =
    "{\"format\": \"edgellm-policy/1\", \"version\": \"tel-1\", \"classes\": {"
    "\"health\": {\"cloud\": \"never\"},"
    "\"chat\": {\"cloud\": \"with_consent\", \"legal_basis\": \"consent\"},"
    "\"public\": {\"cloud\": \"allowed\", \"legal_basis\": \"contract\"}},"
    "\"battery\": {\"min_percent\": 20}}";

static el_policy P;

static void t_schema(void) {
    /* the event type carries codes and numbers only */
    const size_t members = sizeof(el_tev_kind) + sizeof(el_tev_op) + sizeof(int) + sizeof(el_route_reason) +
                           sizeof(int) + 4 * sizeof(bool) + 2 * sizeof(el_thermal_level) + sizeof(el_tev_finish) +
                           sizeof(int) + sizeof(el_tev_cloud_err) + sizeof(int) + 3 * sizeof(double) +
                           sizeof(uint64_t) + 5 * sizeof(int) + sizeof(uint32_t) /* lora: a hash */;
    CHECKF(sizeof(el_tev) <= members + 16, "el_tev is %zu bytes, its code/number members %zu: a new member?",
           sizeof(el_tev), members);

    char dir[] = "/tmp/el_tel_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char sub[300];
    snprintf(sub, sizeof sub, "%s/spool", dir);
    el_telemetry_cfg cfg = {sub, 0, 0, NULL, "my model (v2).gguf", &P};
    char err[300];
    el_telemetry *t = el_telemetry_open(&cfg, err, sizeof err);
    CHECKF(t != NULL, "%s", err);
    if (!t) return;
    el_telemetry_set_fingerprint(t, "edgellm-0.1.0-0011223344556677");
    el_tev e = el_tev_init(EL_TEV_REQUEST_END);
    e.op = EL_TOP_CHAT;
    e.route_source = EL_ROUTE_LOCAL;
    e.reason = el_route_reason_code("local_preferred");
    e.data_class = 2;
    e.class_given = true;
    e.finish = EL_TFIN_LENGTH;
    e.n_prompt = 17;
    e.n_gen = 4;
    e.ttft_ms = 150;
    e.itl_ms = 0.5;
    e.total_ms = 61000;
    e.peak_mem_bytes = 100ull << 20;
    e.spec_drafted = 10;
    e.spec_accepted = 7;
    e.threads_active = 2;
    char *line = el_telemetry_line(t, &e);
    CHECK(line != NULL);
    cJSON *j = line ? cJSON_Parse(line) : NULL;
    CHECK(j != NULL);
    static const char *const KEYS[] = {
        "ts_ms", "event", "edgellm.fingerprint", "edgellm.device_class", "edgellm.policy_version", "edgellm.thermal",
        "edgellm.thermal_from", "edgellm.threads_active", "error.type", "gen_ai.request.model", "gen_ai.operation.name",
        "edgellm.route.source", "gen_ai.system", "edgellm.route.reason", "edgellm.data_class", "edgellm.consent",
        "edgellm.streamed", "edgellm.canary", "http.response.status_code", "gen_ai.usage.input_tokens",
        "gen_ai.response.finish_reasons", "edgellm.cloud_error", "gen_ai.usage.output_tokens", "edgellm.ttft_bucket",
        "edgellm.itl_bucket", "edgellm.total_time_bucket", "edgellm.peak_memory_bucket", "edgellm.spec.drafted",
        "edgellm.spec.accepted"};
    for (const cJSON *c = j ? j->child : NULL; c; c = c->next) {
        bool known = false;
        for (size_t k = 0; k < sizeof KEYS / sizeof *KEYS; k++) known |= !strcmp(c->string, KEYS[k]);
        CHECKF(known, "key %s is not in the schema", c->string);
    }
#define STR(k) (cJSON_GetObjectItem(j, k) && cJSON_IsString(cJSON_GetObjectItem(j, k)) ? cJSON_GetObjectItem(j, k)->valuestring : "")
    CHECK(!strcmp(STR("event"), "request_end"));
    CHECK(!strcmp(STR("edgellm.fingerprint"), "edgellm-0.1.0-0011223344556677"));
    CHECK(!strcmp(STR("gen_ai.request.model"), "my_model__v2_.gguf"));
    CHECK(!strcmp(STR("edgellm.data_class"), "public"));
    CHECK(!strcmp(STR("edgellm.route.reason"), "local_preferred"));
    CHECK(!strcmp(STR("edgellm.route.source"), "local") && !strcmp(STR("gen_ai.system"), "edgellm"));
    CHECK(!strcmp(STR("edgellm.ttft_bucket"), "<=200ms"));
    CHECK(!strcmp(STR("edgellm.itl_bucket"), "<=1ms"));
    CHECK(!strcmp(STR("edgellm.total_time_bucket"), ">60s"));
    CHECK(!strcmp(STR("edgellm.peak_memory_bucket"), "<=128MiB"));
    CHECK(!strcmp(STR("edgellm.policy_version"), "tel-1"));
    const cJSON *fr = cJSON_GetObjectItem(j, "gen_ai.response.finish_reasons");
    CHECK(cJSON_IsArray(fr) && cJSON_GetArraySize(fr) == 1 && !strcmp(cJSON_GetArrayItem(fr, 0)->valuestring, "length"));
    CHECK(cJSON_GetObjectItem(j, "gen_ai.usage.output_tokens") && cJSON_GetObjectItem(j, "gen_ai.usage.output_tokens")->valueint == 4);
    CHECK(cJSON_GetObjectItem(j, "edgellm.spec.accepted") && cJSON_GetObjectItem(j, "edgellm.spec.accepted")->valueint == 7);
    cJSON_Delete(j);
    free(line);

    /* a class outside the policy, an unknown reason, a declined route, an error */
    e = el_tev_init(EL_TEV_ROUTE);
    e.route_source = EL_ROUTE_DECLINED;
    e.reason = el_route_reason_code("some_reason_from_the_future");
    e.data_class = -1;
    e.class_given = true;
    line = el_telemetry_line(t, &e);
    j = line ? cJSON_Parse(line) : NULL;
    CHECK(j && !strcmp(STR("edgellm.data_class"), "unknown") && !strcmp(STR("edgellm.route.reason"), "other"));
    CHECK(j && !cJSON_GetObjectItem(j, "gen_ai.system")); /* declined: nothing ran */
    cJSON_Delete(j);
    free(line);
    e = el_tev_init(EL_TEV_LOAD_ERROR);
    e.error = EL_ERR_BAD_MAGIC;
    line = el_telemetry_line(t, &e);
    j = line ? cJSON_Parse(line) : NULL;
    CHECK(j && !strcmp(STR("event"), "load_error") && !strcmp(STR("error.type"), "bad_magic"));
    cJSON_Delete(j);
    free(line);
    e.error = EL_TEV_ERR_PACKAGE;
    line = el_telemetry_line(t, &e);
    CHECK(line && strstr(line, "\"error.type\":\"package_check\""));
    free(line);

    /* a fingerprint that is not an identifier is not kept */
    el_telemetry_set_fingerprint(t, "edgellm \"x\"\n");
    e = el_tev_init(EL_TEV_THERMAL);
    e.thermal_from = EL_THERMAL_NORMAL;
    e.thermal = EL_THERMAL_HOT;
    line = el_telemetry_line(t, &e);
    j = line ? cJSON_Parse(line) : NULL;
    CHECK(j && !strcmp(STR("edgellm.fingerprint"), "invalid") && !strcmp(STR("edgellm.thermal"), "hot") &&
          !strcmp(STR("edgellm.thermal_from"), "normal"));
#undef STR
    cJSON_Delete(j);
    free(line);
    el_telemetry_emit(t, &e);
    long sp = 0, ex = 0, dr = 0;
    el_telemetry_counts(t, &sp, &ex, &dr);
    CHECK(sp == 1 && ex == 0 && dr == 0);
    el_telemetry_close(t);
    char path[400];
    snprintf(path, sizeof path, "%s/telemetry.jsonl", sub);
    size_t n = 0;
    char *txt = el_test_read_file(path, &n);
    CHECK(txt && n > 10 && txt[n - 1] == '\n' && strstr(txt, "thermal_transition"));
    struct stat st;
    CHECK(stat(path, &st) == 0 && (st.st_mode & 0077) == 0); /* 0600 */
    free(txt);
    unlink(path);
    rmdir(sub);
    rmdir(dir);

    /* OTLP to a collector that is not there: the events are counted as dropped, close returns */
    el_telemetry_cfg dead = {NULL, 0, 0, "http://127.0.0.1:1/v1/logs", "m", &P};
    el_telemetry *td = el_telemetry_open(&dead, err, sizeof err);
    CHECKF(td != NULL, "%s", err);
    if (td) {
        for (int i = 0; i < 3; i++) el_telemetry_emit(td, &e);
        long ex2 = -1, dr2 = 0;
        for (int i = 0; i < 200 && dr2 < 3; i++) {
            el_telemetry_counts(td, NULL, &ex2, &dr2);
            if (dr2 < 3) usleep(50 * 1000);
        }
        CHECKF(dr2 == 3 && ex2 == 0, "dropped %ld exported %ld", dr2, ex2);
        el_telemetry_close(td);
    }

    /* off: neither dir nor url; a bad URL refused */
    el_telemetry_cfg off = {NULL, 0, 0, NULL, "m", &P};
    CHECK(el_telemetry_open(&off, err, sizeof err) == NULL && err[0] == 0);
    el_telemetry_cfg bad = {NULL, 0, 0, "ftp://x", "m", &P};
    CHECK(el_telemetry_open(&bad, err, sizeof err) == NULL && strstr(err, "otlp"));
    el_telemetry_emit(NULL, &e); /* off: a no-op */
}

static void t_buckets(void) {
    CHECK(!strcmp(el_tev_time_bucket(0), "<=1ms") && !strcmp(el_tev_time_bucket(1), "<=1ms"));
    CHECK(!strcmp(el_tev_time_bucket(1.01), "<=2ms") && !strcmp(el_tev_time_bucket(1000), "<=1s"));
    CHECK(!strcmp(el_tev_time_bucket(60000), "<=60s") && !strcmp(el_tev_time_bucket(60001), ">60s"));
    CHECK(!strcmp(el_tev_mem_bucket(1), "<=64MiB") && !strcmp(el_tev_mem_bucket(64ull << 20), "<=64MiB"));
    CHECK(!strcmp(el_tev_mem_bucket((64ull << 20) + 1), "<=128MiB") && !strcmp(el_tev_mem_bucket(1ull << 30), "<=1GiB"));
    CHECK(!strcmp(el_tev_mem_bucket(1ull << 40), ">64GiB"));
    char id[16];
    el_tev_ident("", id, sizeof id);
    CHECK(!strcmp(id, "unknown"));
    el_tev_ident("abcdefghijklmnopqrstuvwxyz", id, sizeof id);
    CHECK(strlen(id) == 15);
    for (int r = 1; r < (int)EL_RR__N; r++) CHECK((int)el_route_reason_code(el_route_reason_name((el_route_reason)r)) == r);
    CHECK(el_route_reason_code("") == EL_RR_NONE && el_route_reason_code(NULL) == EL_RR_NONE);
}

static void t_spool(void) {
    char dir[] = "/tmp/el_spool_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[300], r1[320], r2[320], r3[320];
    snprintf(path, sizeof path, "%s/a.jsonl", dir);
    el_spool_rotated_name(path, 1, r1, sizeof r1);
    el_spool_rotated_name(path, 2, r2, sizeof r2);
    el_spool_rotated_name(path, 3, r3, sizeof r3);
    char want[320];
    snprintf(want, sizeof want, "%s/a.1.jsonl", dir);
    CHECK(!strcmp(r1, want));
    char noext[64];
    el_spool_rotated_name("/x.d/log", 2, noext, sizeof noext);
    CHECK(!strcmp(noext, "/x.d/log.2"));
    el_spool_rotated_name(".hidden", 1, noext, sizeof noext);
    CHECK(!strcmp(noext, ".hidden.1"));

    char err[200];
    el_spool *s = el_spool_open(path, 1000, 2, err, sizeof err);
    CHECKF(s != NULL, "%s", err);
    if (!s) return;
    /* 50 lines of 99 bytes + newline: 10 per file */
    for (int i = 0; i < 50; i++) {
        char line[100];
        snprintf(line, sizeof line, "{\"n\":%04d,\"pad\":\"%0*d\"}", i, 99 - 19, 0);
        CHECK(strlen(line) == 99);
        CHECK(el_spool_write(s, line, strlen(line)) == 0);
    }
    el_spool_close(s);
    const char *files[] = {path, r1, r2};
    int first[3] = {40, 30, 20};
    for (int f = 0; f < 3; f++) {
        size_t n = 0;
        char *t = el_test_read_file(files[f], &n);
        CHECKF(t != NULL, "%s missing", files[f]);
        if (!t) continue;
        CHECKF(n <= 1000 && n == 1000, "%s: %zu bytes", files[f], n);
        int lines = 0, prev = -1;
        bool ordered = true;
        for (char *p = t; p && *p; lines++) {
            int v = -1;
            if (sscanf(p, "{\"n\":%d", &v) != 1) ordered = false;
            if (lines == 0) CHECKF(v == first[f], "%s starts with %d, want %d", files[f], v, first[f]);
            if (prev >= 0 && v != prev + 1) ordered = false;
            prev = v;
            p = strchr(p, '\n');
            if (p) p++;
        }
        CHECK(lines == 10 && ordered);
        free(t);
    }
    struct stat st;
    CHECK(stat(r3, &st) != 0); /* keep 2: no third */
    unlink(path);
    unlink(r1);
    unlink(r2);
    rmdir(dir);
    CHECK(el_spool_open("/nonexistent-dir/x.jsonl", 1000, 2, err, sizeof err) == NULL && strstr(err, "nonexistent"));
}

static el_route_device healthy(void) {
    el_route_device d;
    el_audit_default_device(&d);
    return d;
}

static el_route_req req(const char *cls, bool consent) {
    el_route_req x;
    memset(&x, 0, sizeof x);
    x.class_ok = true;
    if (cls) {
        x.class_ok = el_policy_name_ok(cls);
        snprintf(x.data_class, sizeof x.data_class, "%s", x.class_ok ? cls : "?");
    }
    x.consent = consent;
    x.n_prompt = 40;
    x.max_tokens = 16;
    x.cloud_capable = true;
    return x;
}

/* The audit line of (x, s) parses back into inputs that decide the same. */
static void roundtrip(const el_route_req *x, const el_route_device *s, const char *what) {
    el_route r;
    el_route_decide(&P, x, s, &r);
    char *line = el_audit_line(&P, "fp-1", x, s, &r, 1234);
    CHECK(line != NULL);
    if (!line) return;
    el_audit_rec rec;
    char err[200];
    CHECKF(el_audit_parse(line, strlen(line), &rec, err, sizeof err) == 0, "%s: %s: %s", what, err, line);
    el_route r2;
    el_route_decide(&P, &rec.x, &rec.s, &r2);
    CHECKF(r2.source == r.source && !strcmp(r2.reason, r.reason) && r2.status == r.status && rec.source == r.source &&
               !strcmp(rec.reason, r.reason) && !strcmp(rec.policy_version, "tel-1"),
           "%s: recorded %s/%s, replayed %s/%s", what, el_route_source_name(r.source), r.reason,
           el_route_source_name(r2.source), r2.reason);
    free(line);
}

static void t_audit_roundtrip(void) {
    el_route_device d = healthy(), hot = d, down = d, mem = d, bat = d, cloudless = d, slow = d;
    hot.thermal = EL_THERMAL_HOT;
    hot.thermal_factor = 0;
    down.local_ready = false;
    mem.mem_pressure = true;
    bat.battery_pct = 10;
    bat.discharging = true;
    cloudless.cloud_configured = cloudless.cloud_up = false;
    slow.local_pp_tps = 1234.5678901234;
    slow.local_tg_tps = 3.3333333333333;
    slow.thermal = EL_THERMAL_DERATED;
    slow.thermal_factor = 0.4321;
    const el_route_device *devs[] = {&d, &hot, &down, &mem, &bat, &cloudless, &slow};
    const char *classes[] = {NULL, "health", "chat", "public", "secret", "Bad Name"};
    for (size_t i = 0; i < sizeof devs / sizeof *devs; i++)
        for (size_t k = 0; k < sizeof classes / sizeof *classes; k++)
            for (int c = 0; c < 2; c++)
                for (int dl = 0; dl < 3; dl++) {
                    el_route_req x = req(classes[k], c);
                    x.deadline_ms = dl == 0 ? 0 : dl == 1 ? 100.25 : 1e6;
                    x.class_from_header = (k + (size_t)dl) % 2;
                    char what[120];
                    snprintf(what, sizeof what, "device %zu class %s consent %d deadline %d", i,
                             classes[k] ? classes[k] : "(none)", c, dl);
                    roundtrip(&x, devs[i], what);
                }
    /* the endpoint without a cloud counterpart, prefer cloud */
    el_route_req x = req("public", false);
    x.cloud_capable = false;
    roundtrip(&x, &hot, "completion endpoint, hot");
    el_policy saved = P;
    P.prefer_cloud = true;
    x = req("public", false);
    roundtrip(&x, &d, "prefer cloud");
    P = saved;

    /* an unknown class: the line holds no trace of the name sent */
    x = req("zebracorn-private-name", false);
    el_route r;
    el_route_decide(&P, &x, &d, &r);
    CHECK(r.source == EL_ROUTE_DECLINED);
    char *line = el_audit_line(&P, "fp", &x, &d, &r, 1);
    CHECK(line && !strstr(line, "zebracorn") && !strstr(line, "zebr") && strstr(line, "\"class_known\":false"));
    free(line);
}

static void t_audit_hostile(void) {
    el_route_req x = req("public", false);
    el_route_device d = healthy();
    el_route r;
    el_route_decide(&P, &x, &d, &r);
    char *good = el_audit_line(&P, "fp", &x, &d, &r, 1);
    CHECK(good != NULL);
    if (!good) return;
    el_audit_rec rec;
    char err[200];
    CHECK(el_audit_parse(good, strlen(good), &rec, err, sizeof err) == 0);
    struct { const char *from, *to, *field; } cases[] = {
        {"\"decision\":\"local\"", "\"decision\":\"elsewhere\"", "decision"},
        {"\"decision\":\"local\"", "\"decision\":1", "decision"},
        {"\"status\":200", "\"status\":99", "status"},
        {"\"status\":200", "\"status\":\"200\"", "status"},
        {"\"prompt_tokens\":40", "\"prompt_tokens\":-1", "prompt_tokens"},
        {"\"prompt_tokens\":40", "\"prompt_tokens\":1.5", "prompt_tokens"},
        {"\"max_tokens\":16", "\"max_tokens\":1e300", "max_tokens"},
        {"\"deadline_ms\":0", "\"deadline_ms\":-5", "deadline_ms"},
        {"\"data_class\":\"public\"", "\"data_class\":\"Not A Name\"", "data_class"},
        {"\"data_class\":\"public\"", "\"data_class\":7", "data_class"},
        {"\"class_source\":\"body\"", "\"class_source\":\"url\"", "class_source"},
        {"\"consent\":false", "\"consent\":0", "consent"},
        {"\"thermal\":\"normal\"", "\"thermal\":\"warm\"", "thermal"},
        {"\"thermal_factor\":1", "\"thermal_factor\":2", "thermal_factor"},
        {"\"battery_percent\":-1", "\"battery_percent\":101", "battery_percent"},
        {"\"battery_percent\":-1", "\"battery_percent\":50.5", "battery_percent"},
        {"\"model_verified\":true", "\"model_verified\":null", "model_verified"},
        {"\"model_verified\":true,", "", "model_verified"},
        {"\"local_decode_tps\":0", "\"local_decode_tps\":-1", "local_decode_tps"},
        {"\"policy_version\":\"tel-1\"", "\"policy_version\":[]", "policy_version"},
        {"\"request\":{", "\"request\":[],\"x\":{", "request"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *at = strstr(good, cases[i].from);
        CHECKF(at != NULL, "case %zu: '%s' not in the line", i, cases[i].from);
        if (!at) continue;
        char bad[4096];
        snprintf(bad, sizeof bad, "%.*s%s%s", (int)(at - good), good, cases[i].to, at + strlen(cases[i].from));
        err[0] = 0;
        CHECKF(el_audit_parse(bad, strlen(bad), &rec, err, sizeof err) == -1 && strstr(err, cases[i].field),
               "case %zu (%s): err '%s'", i, cases[i].field, err);
    }
    const char *junk[] = {"", "{", "[]", "null", "\"x\"", "{\"decision\":\"local\"}", "{}\n{}"};
    for (size_t i = 0; i < sizeof junk / sizeof *junk; i++)
        CHECKF(el_audit_parse(junk[i], strlen(junk[i]), &rec, err, sizeof err) == -1, "junk %zu accepted", i);
    /* a NUL inside the line: cut there, so not a whole object */
    char withnul[64] = "{\"decision\":\"refused\"\0,\"reason\":\"x\",\"status\":400}";
    CHECK(el_audit_parse(withnul, 52, &rec, err, sizeof err) == -1);
    free(good);

    /* refusals parse as such */
    const char *ref = "{\"ts_ms\":1,\"fingerprint\":\"f\",\"policy_version\":\"tel-1\",\"decision\":\"refused\","
                      "\"reason\":\"bad_route_metadata\",\"status\":400}";
    CHECK(el_audit_parse(ref, strlen(ref), &rec, err, sizeof err) == 0 && rec.refusal && rec.status == 400);

    /* device states: partial is fine (defaults), wrong types are not */
    el_route_device s;
    const char *st = "{\"thermal\":\"hot\",\"thermal_factor\":0,\"cloud_reachable\":false}";
    CHECK(el_audit_parse_device(st, strlen(st), &s, err, sizeof err) == 0 && s.thermal == EL_THERMAL_HOT && !s.cloud_up &&
          s.cloud_configured && s.local_ready && s.battery_pct == -1);
    const char *wrapped = "{\"device\":{\"battery_percent\":15,\"discharging\":true}}";
    CHECK(el_audit_parse_device(wrapped, strlen(wrapped), &s, err, sizeof err) == 0 && s.battery_pct == 15 && s.discharging);
    const char *bads[] = {"{\"thermal\":3}", "{\"battery_percent\":\"x\"}", "[1]", "nope", "{\"model_verified\":1}"};
    for (size_t i = 0; i < sizeof bads / sizeof *bads; i++)
        CHECKF(el_audit_parse_device(bads[i], strlen(bads[i]), &s, err, sizeof err) == -1, "state %zu accepted", i);
}

static void t_audit_file(void) {
    char dir[] = "/tmp/el_audit_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[300];
    snprintf(path, sizeof path, "%s/audit.jsonl", dir);
    char err[200];
    el_audit *a = el_audit_open(path, 0, 0, err, sizeof err);
    CHECKF(a != NULL, "%s", err);
    if (!a) return;
    el_audit_set_fingerprint(a, "edgellm-0.1.0-aabb");
    el_route_req x = req("public", false);
    el_route_device d = healthy();
    el_route r;
    el_route_decide(&P, &x, &d, &r);
    el_audit_decision(a, &P, &x, &d, &r);
    el_audit_refusal(a, &P, "bad_route_metadata", 400);
    el_audit_close(a);
    size_t n = 0;
    char *t = el_test_read_file(path, &n);
    CHECK(t && strstr(t, "\"fingerprint\":\"edgellm-0.1.0-aabb\"") && strstr(t, "\"decision\":\"refused\""));
    int lines = 0;
    for (size_t i = 0; t && i < n; i++) lines += t[i] == '\n';
    CHECK(lines == 2);
    free(t);
    unlink(path);
    rmdir(dir);
    el_audit_decision(NULL, &P, &x, &d, &r); /* off */
}

static void sse_emit(void *user, const char *t, size_t n) { el_buf_append(user, t, n); }

static el_buf sse_run(const char *in, bool chat, size_t piece, el_sse_text *p) {
    el_buf out = {0};
    el_sse_text_init(p, chat);
    const size_t n = strlen(in);
    for (size_t off = 0; off < n; off += piece)
        el_sse_text_feed(p, in + off, n - off < piece ? n - off : piece, sse_emit, &out);
    return out;
}

static void t_sse_text(void) {
    const char *chat =
        ": keep-alive\n\n"
        "data: {\"edgellm\":{\"route\":{}},\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\n"
        "data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\r\n\r\n"
        "event: x\ndata:{\"choices\":[{\"delta\":{\"content\":\"lo \\u00e9\"},\"finish_reason\":null}]}\n\n"
        "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"length\"}]}\n\n"
        "data: [DONE]\n\n"
        "data: {\"choices\":[{\"delta\":{\"content\":\"AFTER\"}}]}\n\n";
    for (size_t piece = 1; piece <= 64; piece = piece * 2 + 1) {
        el_sse_text p;
        el_buf out = sse_run(chat, true, piece, &p);
        CHECKF(out.len == 8 && !memcmp(out.p, "Hello \xc3\xa9", 8), "piece %zu: '%s'", piece, out.p ? out.p : "");
        CHECK(p.done && !p.failed && !strcmp(p.finish, "length") && p.n_events == 4);
        el_sse_text_free(&p);
        el_buf_free(&out);
    }
    el_sse_text p;
    el_buf out = sse_run("data: {\"choices\":[{\"text\":\"a\"},{\"text\":\"IGNORED\"}]}\n"
                         "data: {\"choices\":[{\"text\":\"b\",\"finish_reason\":\"Stop Now!\"}]}\n"
                         "data: {\"choices\":[]}\ndata: [DONE]\n", false, 7, &p);
    CHECK(out.len == 2 && !memcmp(out.p, "ab", 2) && p.done && !strcmp(p.finish, "other"));
    el_sse_text_free(&p);
    el_buf_free(&out);
    struct { const char *in, *code, *text; } bad[] = {
        {"data: {\"choices\":[{\"delta\":{\"content\":\"part\"}}]}\n\ndata: {\"error\":{\"code\":\"cloud_stream_broken\"}}\n\n",
         "cloud_stream_broken", "part"},
        {"data: {\"error\":{\"code\":\"Bad Code\\n\"}}\n", "cloud_error", ""},
        {"data: {\"error\":\"boom\"}\n", "cloud_error", ""},
        {"data: not json\n", "cloud_bad_response", ""},
        {"data: [1,2]\n", "cloud_bad_response", ""},
        {"data: {\"choices\":{}}\n", "cloud_bad_response", ""},
        {"data: {\"choices\":[7]}\n", "cloud_bad_response", ""},
        {"data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\ndata: {}}\ndata: [DONE]\n", "cloud_bad_response", "x"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        out = sse_run(bad[i].in, true, 3, &p);
        CHECKF(p.failed && !p.done && !strcmp(p.code, bad[i].code) && out.len == strlen(bad[i].text) &&
                   (!out.len || !memcmp(out.p, bad[i].text, out.len)),
               "bad %zu: failed %d code '%s' text '%s'", i, p.failed, p.code, out.p ? out.p : "");
        el_sse_text_free(&p);
        el_buf_free(&out);
    }
    /* an endless line: failed at the cap, memory bounded */
    el_sse_text_init(&p, true);
    char chunk[4096];
    memset(chunk, 'a', sizeof chunk);
    memcpy(chunk, "data: ", 6);
    size_t fed = 0;
    while (el_sse_text_feed(&p, chunk, sizeof chunk, sse_emit, NULL) && fed < 4u * EL_SSE_LINE_MAX) fed += sizeof chunk;
    CHECK(p.failed && !strcmp(p.code, "cloud_bad_response") && p.cap <= EL_SSE_LINE_MAX);
    el_sse_text_free(&p);
    /* a stream without [DONE]: neither done nor failed (the caller calls it broken) */
    out = sse_run("data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n", true, 5, &p);
    CHECK(!p.done && !p.failed && out.len == 1);
    el_sse_text_free(&p);
    el_buf_free(&out);
}

int main(void) {
    char err[300];
    CHECKF(el_policy_parse(POLICY, strlen(POLICY), &P, err, sizeof err) == 0, "%s", err);
    t_schema();
    t_buckets();
    t_spool();
    t_audit_roundtrip();
    t_audit_hostile();
    t_audit_file();
    t_sse_text();
    printf("%d checks, %d failures\n", el_test_checks, el_test_failures);
    return el_test_failures ? 1 : 0;
}
