/*
 * cmd_route.c — `edgellm route explain`: why a request goes local, to the
 * cloud, or is declined (issue 18 item 4).
 *
 *   edgellm route explain REQUEST.json --policy POLICY.json [--state STATE.json]
 *           [--header 'X-Data-Class: NAME'] [--endpoint chat|completions|completion]
 *           [--prompt-tokens N] [--json]
 *   edgellm route explain --audit-log FILE --line N --policy POLICY.json [--json]
 *
 * The first form replays a request — REQUEST.json is the body a client
 * would POST, or {"body": BODY, "headers": {"X-Data-Class": NAME}}; its
 * "edgellm" member and the X-Data-Class header (from the file or --header)
 * are read by serve's own parser (el_route_parse_meta) — against the policy and a
 * device state (STATE.json, the shape of an audit line's "device" object;
 * without it a healthy device: model verified, cool, no battery, cloud
 * configured and reachable, no measured speed), and prints each input, the
 * decision-table row that matched, the decision and its reason. The
 * second form reads line N (1-based) of an audit log (serve --audit-log),
 * decides again from the inputs it recorded and says "same" or what
 * differs. Both decide with el_route_decide, the function serve's router
 * calls: there is no second implementation.
 *
 * Without --prompt-tokens the prompt length is serve's estimate when it has
 * no tokenizer (body bytes / 4 + 1); without max_tokens (max_tokens,
 * max_completion_tokens or n_predict in the body) 256 is assumed.
 *
 * Exit status: 0 explained (--line: the same decision), 3 the replayed
 * decision differs from the recorded one, 1 an error (unreadable or
 * malformed file, line out of range), 2 a usage error.
 *
 * Also here: `run`/`chat --route` (cli_route_decide, cli_route_cloud; cli.h).
 * The device state of a one-shot command: the model file is there and its
 * package checks passed, one thermal sample (--thermal-source or sysfs,
 * with the policy's thresholds), memory pressure (PSI), the battery, a cloud
 * configured (--cloud-url; reachable until a call fails: a one-shot command
 * has no history), no measured speed. The request: --data-class,
 * --consent, the prompt's bytes / 4 + 1 tokens (the model is not loaded
 * before the decision), -n (or 256). Then el_route_decide, as serve. Cloud:
 * the request goes to the cloud streamed, through the same checked relay
 * serve uses (el_cloud_relay_*), and its text is read out of the SSE
 * (sse_text.h); a cloud failure is a typed error, and nothing runs locally.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cjson/cJSON.h>

#include <sys/stat.h>

#include "cli/cli.h"
#include "memory/capacity.h"
#include "route/audit.h"
#include "route/cloud.h"
#include "route/policy.h"
#include "route/router.h"
#include "server/sse_text.h"
#include "route/thermal.h"
#include "util/file.h"

#define ROUTE_EXIT_DIFFERS 3
#define ROUTE_MAX_FILE (8u << 20)

static void route_usage(FILE *f) {
    fputs("usage: edgellm route explain REQUEST.json --policy POLICY.json [--state STATE.json]\n"
          "                             [--header 'X-Data-Class: NAME'] [--endpoint chat|completions|completion]\n"
          "                             [--prompt-tokens N] [--json]\n"
          "       edgellm route explain --audit-log FILE --line N --policy POLICY.json [--json]\n"
          "exit: 0 explained (--line: same decision), 3 the replay differs, 1 error, 2 usage\n",
          f);
}

/* The decision-table row (docs/ROUTING.md) a decision came from. */
static const char *table_row(const el_route *r) {
    if (!strcmp(r->reason, "unknown_data_class")) return "row 1: the data class is not in the policy -> declined";
    if (!strcmp(r->reason, "policy_prefers_cloud")) return "row 4: the policy prefers the cloud and the cloud may take it -> cloud";
    if (!strcmp(r->reason, "deadline")) return "row 5: the deadline is below the local estimate and the cloud may take it -> cloud";
    if (!strcmp(r->reason, "local_only_class") || !strcmp(r->reason, "local_preferred"))
        return "row 6: otherwise -> local";
    return r->source == EL_ROUTE_CLOUD ? "row 2: local cannot run it and the cloud may take it -> cloud"
                                       : "row 3: local cannot run it and the cloud may not -> declined";
}

static const char *yes_no(bool b) { return b ? "yes" : "no"; }

static void print_inputs(const el_policy *p, const el_route_req *x, const el_route_device *s, const char *len_note) {
    printf("policy: %s\n", p->version);
    printf("request:\n");
    if (!x->data_class[0]) {
        const el_policy_class *k = el_policy_strictest(p);
        printf("  data class: none sent -> the strictest, '%s' (cloud: %s)\n", k->name, el_cloud_rule_name(k->cloud));
    } else {
        const el_policy_class *k = x->class_ok ? el_policy_find(p, x->data_class) : NULL;
        if (k)
            printf("  data class: '%s' (from the %s; cloud: %s%s%s)\n", k->name, x->class_from_header ? "X-Data-Class header" : "body",
                   el_cloud_rule_name(k->cloud), k->legal_basis[0] ? ", legal basis: " : "", k->legal_basis);
        else
            printf("  data class: a name the policy does not have (from the %s)\n",
                   x->class_from_header ? "X-Data-Class header" : "body");
    }
    printf("  consent: %s\n", yes_no(x->consent));
    printf("  prompt tokens: %d%s\n", x->n_prompt, len_note ? len_note : "");
    printf("  max tokens: %d\n", x->max_tokens);
    if (x->deadline_ms > 0) printf("  deadline: %g ms\n", x->deadline_ms);
    else printf("  deadline: none\n");
    printf("  endpoint has a cloud counterpart: %s\n", yes_no(x->cloud_capable));
    printf("device:\n");
    printf("  model verified: %s\n", yes_no(s->local_ready));
    printf("  memory pressure: %s\n", yes_no(s->mem_pressure));
    printf("  thermal: %s (factor %.2f)\n", el_thermal_level_name(s->thermal), s->thermal_factor);
    if (s->battery_pct >= 0) printf("  battery: %d%%%s\n", s->battery_pct, s->discharging ? ", discharging" : "");
    else printf("  battery: none\n");
    printf("  cloud: %s, %s\n", s->cloud_configured ? "configured" : "not configured",
           s->cloud_up ? "reachable" : "unreachable");
    if (s->local_tg_tps > 0) printf("  measured local speed: %.1f t/s prefill, %.1f t/s decode\n", s->local_pp_tps, s->local_tg_tps);
    else printf("  measured local speed: none yet (no time estimate)\n");
}

static void print_decision(const el_route *r) {
    printf("decision: %s (reason %s)\n", el_route_source_name(r->source), r->reason);
    printf("  rule: %s\n", table_row(r));
    printf("  detail: %s\n", r->detail);
    if (r->source == EL_ROUTE_DECLINED) printf("  status: %d; what the user can do: %s\n", r->status, r->advice);
    if (r->source == EL_ROUTE_CLOUD && r->legal_basis[0]) printf("  legal basis: %s\n", r->legal_basis);
    if (r->est_local_ms > 0) printf("  local estimate: %.0f ms\n", r->est_local_ms);
}

static int print_json(const el_policy *p, const el_route_req *x, const el_route_device *s, const el_route *r,
                      const char *replay) {
    char *inputs = el_audit_line(p, "explain", x, s, r, 0);
    char *rj = el_route_json(r);
    cJSON *o = cJSON_CreateObject();
    cJSON *in = inputs ? cJSON_Parse(inputs) : NULL;
    cJSON *rt = rj ? cJSON_Parse(rj) : NULL;
    free(inputs);
    free(rj);
    if (!o || !in || !rt) {
        cJSON_Delete(o);
        cJSON_Delete(in);
        cJSON_Delete(rt);
        return cli_failf("out of memory");
    }
    cJSON_AddStringToObject(o, "decision", el_route_source_name(r->source));
    cJSON_AddStringToObject(o, "reason", r->reason);
    cJSON_AddStringToObject(o, "rule", table_row(r));
    if (replay) cJSON_AddStringToObject(o, "replay", replay);
    cJSON_AddItemToObject(o, "route", rt);
    cJSON_AddItemToObject(o, "request", cJSON_DetachItemFromObject(in, "request"));
    cJSON_AddItemToObject(o, "device", cJSON_DetachItemFromObject(in, "device"));
    cJSON_Delete(in);
    char *txt = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!txt) return cli_failf("out of memory");
    printf("%s\n", txt);
    free(txt);
    return CLI_EXIT_OK;
}

static char *read_file(const char *path, size_t *len, const char *what) {
    char msg[300];
    FILE *f = el_fopen_regular(path, msg, sizeof msg);
    if (!f) {
        fprintf(stderr, "error: %s: %s\n", what, msg);
        return NULL;
    }
    char *b = malloc(ROUTE_MAX_FILE + 1);
    size_t n = b ? fread(b, 1, ROUTE_MAX_FILE + 1, f) : 0;
    const bool bad = ferror(f);
    fclose(f);
    if (!b || bad || n > ROUTE_MAX_FILE) {
        fprintf(stderr, "error: %s: %s\n", what, !b ? "out of memory" : bad ? "read failed" : "larger than 8 MiB");
        free(b);
        return NULL;
    }
    b[n] = 0;
    *len = n;
    return b;
}

/* max_tokens from the body (max_tokens, max_completion_tokens, n_predict): > 0, or 0 when absent. -1: malformed. */
static int body_max_tokens(const char *body, size_t len) {
    cJSON *root = cJSON_ParseWithLength(body, len);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return -1;
    }
    int mt = 0;
    static const char *const K[] = {"max_tokens", "max_completion_tokens", "n_predict"};
    for (int i = 0; i < 3 && !mt; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, K[i]);
        if (v && cJSON_IsNumber(v) && v->valuedouble >= 1 && v->valuedouble <= 1e9 && v->valuedouble == floor(v->valuedouble))
            mt = (int)v->valuedouble;
    }
    cJSON_Delete(root);
    return mt;
}

static int explain_line(const el_policy *p, const char *log, long line_no, bool json) {
    size_t len = 0;
    char *txt = read_file(log, &len, "--audit-log");
    if (!txt) return CLI_EXIT_ERROR;
    const char *ln = txt;
    for (long i = 1; i < line_no && ln; i++) {
        ln = memchr(ln, '\n', len - (size_t)(ln - txt));
        if (ln) ln++;
        if (ln && ln >= txt + len) ln = NULL;
    }
    if (!ln || ln >= txt + len) {
        free(txt);
        return cli_failf("--line %ld: %s has fewer lines", line_no, log);
    }
    const char *end = memchr(ln, '\n', len - (size_t)(ln - txt));
    const size_t ll = end ? (size_t)(end - ln) : len - (size_t)(ln - txt);
    el_audit_rec rec;
    char err[200];
    if (el_audit_parse(ln, ll, &rec, err, sizeof err)) {
        free(txt);
        return cli_failf("%s line %ld: %s", log, line_no, err);
    }
    free(txt);
    if (rec.refusal) {
        printf("line %ld: a refusal before any decision (%s, status %d): nothing to replay\n", line_no, rec.reason,
               rec.status);
        return CLI_EXIT_OK;
    }
    el_route r;
    el_route_decide(p, &rec.x, &rec.s, &r);
    const bool same_policy = !strcmp(rec.policy_version, p->version);
    const bool same = r.source == rec.source && !strcmp(r.reason, rec.reason) &&
                      (r.source != EL_ROUTE_DECLINED || r.status == rec.status);
    char verdict[800];
    if (same)
        snprintf(verdict, sizeof verdict, "same: %s (%s)%s", el_route_source_name(r.source), r.reason,
                 same_policy ? "" : " (recorded under another policy version)");
    else
        snprintf(verdict, sizeof verdict, "differs: recorded %s (%.47s, status %d) under policy %.127s; replayed %s (%s, status %d) under policy %s",
                 el_route_source_name(rec.source), rec.reason, rec.status, rec.policy_version,
                 el_route_source_name(r.source), r.reason, r.source == EL_ROUTE_DECLINED ? r.status : 200, p->version);
    if (json) {
        int rc = print_json(p, &rec.x, &rec.s, &r, verdict);
        return rc ? rc : same ? CLI_EXIT_OK : ROUTE_EXIT_DIFFERS;
    }
    printf("audit line %ld (recorded: %s, %s, policy %s%s)\n", line_no, el_route_source_name(rec.source), rec.reason,
           rec.policy_version, rec.cached ? ", from the decision cache" : "");
    print_inputs(p, &rec.x, &rec.s, NULL);
    print_decision(&r);
    printf("replay: %s\n", verdict);
    return same ? CLI_EXIT_OK : ROUTE_EXIT_DIFFERS;
}

int cli_cmd_route(int argc, char **argv) {
    if (argc < 3 || !strcmp(argv[2], "help") || !strcmp(argv[2], "--help") || !strcmp(argv[2], "-h")) {
        route_usage(argc < 3 ? stderr : stdout);
        return argc < 3 ? CLI_EXIT_USAGE : CLI_EXIT_OK;
    }
    if (strcmp(argv[2], "explain")) return cli_usage_error("route", "unknown sub-command '%s' (expected explain)", argv[2]);
    const char *req = NULL, *policy = NULL, *state = NULL, *hdr = NULL, *endpoint = "chat", *log = NULL;
    long line_no = 0, n_prompt = -1;
    bool json = false;
    for (int i = 3; i < argc; i++) {
        const char *a = argv[i];
        const bool has_val = i + 1 < argc;
#define VAL() (has_val ? argv[++i] : NULL)
        if (!strcmp(a, "--policy")) policy = VAL();
        else if (!strcmp(a, "--state")) state = VAL();
        else if (!strcmp(a, "--header")) hdr = VAL();
        else if (!strcmp(a, "--endpoint")) endpoint = VAL();
        else if (!strcmp(a, "--audit-log")) log = VAL();
        else if (!strcmp(a, "--line") || !strcmp(a, "--prompt-tokens")) {
            const char *v = VAL();
            char *e = NULL;
            long n = v ? strtol(v, &e, 10) : -1;
            if (!v || !*v || *e || n < (a[2] == 'l' ? 1 : 0) || n > 1000000000L)
                return cli_usage_error("route", "%s: expected a %s integer", a, a[2] == 'l' ? "positive" : "non-negative");
            if (a[2] == 'l') line_no = n;
            else n_prompt = n;
            continue;
        } else if (!strcmp(a, "--json")) {
            json = true;
            continue;
        } else if (a[0] == '-') return cli_usage_error("route", "unknown option '%s'", a);
        else if (!req) {
            req = a;
            continue;
        } else return cli_usage_error("route", "unexpected argument '%s'", a);
        if (!argv[i] || argv[i] == a) return cli_usage_error("route", "option '%s' needs a value", a);
#undef VAL
    }
    if (!policy) return cli_usage_error("route", "missing --policy POLICY.json");
    if (!!log != !!line_no) return cli_usage_error("route", "--audit-log and --line go together");
    if (log && (req || state || hdr)) return cli_usage_error("route", "--audit-log replays a recorded line: no REQUEST.json, --state or --header");
    if (!log && !req) return cli_usage_error("route", "missing REQUEST.json (or --audit-log FILE --line N)");
    if (strcmp(endpoint, "chat") && strcmp(endpoint, "completions") && strcmp(endpoint, "completion"))
        return cli_usage_error("route", "--endpoint: expected chat, completions or completion");
    el_policy p;
    char msg[400];
    if (el_policy_load(policy, &p, msg, sizeof msg)) return cli_failf("--policy: %s", msg);
    if (log) return explain_line(&p, log, line_no, json);

    /* a request */
    char hv[EL_POLICY_NAME_MAX + 64] = "";
    const char *hdr_class = NULL;
    if (hdr) {
        const char *colon = strchr(hdr, ':');
        if (!colon || (size_t)(colon - hdr) != strlen("X-Data-Class") || strncasecmp(hdr, "X-Data-Class", 12))
            return cli_usage_error("route", "--header: expected 'X-Data-Class: NAME' (the one header routing reads)");
        const char *v = colon + 1;
        while (*v == ' ' || *v == '\t') v++;
        snprintf(hv, sizeof hv, "%s", v);
        size_t hl = strlen(hv);
        while (hl && (hv[hl - 1] == ' ' || hv[hl - 1] == '\t')) hv[--hl] = 0;
        hdr_class = hv;
    }
    size_t len = 0;
    char *body = read_file(req, &len, "REQUEST.json");
    if (!body) return CLI_EXIT_ERROR;
    { /* {"body": {...}, "headers": {"X-Data-Class": "..."}}: a request with its headers */
        cJSON *w = cJSON_ParseWithLength(body, len);
        const cJSON *wb = cJSON_GetObjectItemCaseSensitive(w, "body");
        const cJSON *wh = cJSON_GetObjectItemCaseSensitive(w, "headers");
        if (cJSON_IsObject(w) && cJSON_IsObject(wb) && (!wh || cJSON_IsObject(wh)) &&
            cJSON_GetArraySize(w) == 1 + (wh != NULL)) {
            for (const cJSON *h = wh ? wh->child : NULL; h; h = h->next) {
                if (strcasecmp(h->string, "X-Data-Class")) continue; /* the one header routing reads */
                if (!cJSON_IsString(h) || hdr_class) {
                    cJSON_Delete(w);
                    free(body);
                    return cli_failf("REQUEST.json: headers.X-Data-Class must be one string (and not also --header)");
                }
                snprintf(hv, sizeof hv, "%s", h->valuestring);
                hdr_class = hv;
            }
            char *inner = cJSON_PrintUnformatted(wb);
            if (!inner) {
                cJSON_Delete(w);
                free(body);
                return cli_failf("out of memory");
            }
            free(body);
            body = inner;
            len = strlen(inner);
        }
        cJSON_Delete(w);
    }
    const int mt = body_max_tokens(body, len);
    if (mt < 0) {
        free(body);
        return cli_failf("REQUEST.json: not a JSON object (the body a client would POST)");
    }
    el_route_req x;
    if (el_route_parse_meta(body, len, hdr_class, &x, msg, sizeof msg)) {
        free(body);
        if (json) printf("{\"decision\":\"refused\",\"reason\":\"bad_route_metadata\",\"status\":400}\n");
        else printf("refused before any decision (status 400, as serve): %s\n", msg);
        return CLI_EXIT_OK;
    }
    free(body);
    char note[80] = "";
    if (n_prompt >= 0) x.n_prompt = (int)n_prompt;
    else {
        x.n_prompt = (int)(len / 4) + 1;
        snprintf(note, sizeof note, " (estimate: body bytes / 4 + 1; --prompt-tokens N to give it)");
    }
    x.max_tokens = mt > 0 ? mt : 256;
    x.cloud_capable = strcmp(endpoint, "completion") != 0; /* llama-server's /completion has no cloud counterpart */
    x.canary_capable = false;
    el_route_device s;
    el_audit_default_device(&s);
    if (state) {
        size_t sl = 0;
        char *st = read_file(state, &sl, "--state");
        if (!st) return CLI_EXIT_ERROR;
        int rc = el_audit_parse_device(st, sl, &s, msg, sizeof msg);
        free(st);
        if (rc) return cli_failf("--state %s: %s", state, msg);
    }
    el_route r;
    el_route_decide(&p, &x, &s, &r);
    if (json) return print_json(&p, &x, &s, &r, NULL);
    print_inputs(&p, &x, &s, note[0] ? note : NULL);
    if (mt == 0) printf("  (max tokens not in the body: 256 assumed)\n");
    print_decision(&r);
    return CLI_EXIT_OK;
}

/* ---- run / chat --route ------------------------------------------------------- */

int cli_route_decide(cli_opts *o, bool verified, size_t text_len, cli_route *cr) {
    memset(cr, 0, sizeof *cr);
    el_policy p;
    char msg[400];
    if (o->policy) {
        if (el_policy_load(o->policy, &p, msg, sizeof msg)) return cli_failf("--policy: %s", msg);
    } else {
        el_policy_builtin(&p);
    }
    el_route_req x;
    memset(&x, 0, sizeof x);
    x.class_ok = true;
    if (o->data_class) {
        x.class_ok = el_policy_name_ok(o->data_class);
        snprintf(x.data_class, sizeof x.data_class, "%s", x.class_ok ? o->data_class : "?");
    }
    x.consent = o->consent;
    x.n_prompt = (int)(text_len / 4) + 1;
    x.max_tokens = o->n_predict > 0 ? o->n_predict : 256;
    x.cloud_capable = true;

    el_route_device s;
    memset(&s, 0, sizeof s);
    struct stat st;
    if (!o->model || stat(o->model, &st) || !S_ISREG(st.st_mode))
        snprintf(s.local_why, sizeof s.local_why, "no model file at %.150s", o->model ? o->model : "(none)");
    else if (!verified)
        snprintf(s.local_why, sizeof s.local_why, "the model package did not pass its checks");
    else
        s.local_ready = true;
    char why[160];
    if (el_mem_pressure(0, why, sizeof why)) {
        s.mem_pressure = true;
        snprintf(s.mem_why, sizeof s.mem_why, "%s", why);
    }
    el_thermal_cfg tc = {o->thermal_source, NULL, p.derate_c, p.hot_c, p.hysteresis_c, 60000, NULL, NULL};
    el_thermal *th = el_thermal_start(&tc, msg, sizeof msg);
    if (!th) return cli_failf("thermal monitor: %s", msg);
    const el_thermal_state ts = el_thermal_get(th);
    el_thermal_stop(th);
    s.thermal = ts.level;
    s.thermal_factor = ts.factor;
    s.battery_pct = -1;
    el_battery_read(NULL, &s.battery_pct, &s.discharging);
    s.cloud_configured = s.cloud_up = o->cloud_url != NULL;

    el_route r;
    el_route_decide(&p, &x, &s, &r);
    cr->source = (int)r.source;
    snprintf(cr->reason, sizeof cr->reason, "%s", r.reason);
    char *rj = el_route_json(&r);
    if (rj) snprintf(cr->route_json, sizeof cr->route_json, "%s", rj);
    free(rj);
    char hv[400];
    el_route_header(&r, hv, sizeof hv);
    fprintf(stderr, "edgellm %s: route %s\n", o->cmd, hv);
    if (r.source == EL_ROUTE_DECLINED) {
        fprintf(stderr, "edgellm %s: declined (%s): %s. What you can do: %s\n", o->cmd, r.reason, r.detail, r.advice);
        return CLI_EXIT_DECLINED;
    }
    if (r.source == EL_ROUTE_LOCAL) return -1;

    /* the cloud: its key as serve reads it */
    char key[512] = "";
    if (o->cloud_key_file) {
        FILE *kf = el_fopen_regular(o->cloud_key_file, msg, sizeof msg);
        if (!kf) return cli_failf("--cloud-key-file: %s", msg);
        size_t kn = fread(key, 1, sizeof key - 1, kf);
        fclose(kf);
        key[kn] = 0;
        while (kn > 0 && (key[kn - 1] == '\n' || key[kn - 1] == '\r' || key[kn - 1] == ' ')) key[--kn] = 0;
        if (!kn) return cli_failf("--cloud-key-file: %s is empty", o->cloud_key_file);
    } else if (getenv("EDGELLM_CLOUD_KEY")) {
        snprintf(key, sizeof key, "%s", getenv("EDGELLM_CLOUD_KEY"));
    }
    el_cloud_cfg cc = {o->cloud_url, key[0] ? key : NULL, o->cloud_model, p.cloud_timeout_s};
    cr->cloud = el_cloud_new(&cc, msg, sizeof msg);
    memset(key, 0, sizeof key);
    if (!cr->cloud) return cli_failf("--cloud-url: %s", msg);
    return -1;
}

typedef struct cloud_out {
    bool json;
    bool out_error;
    el_buf *reply;
    bool oom;
} cloud_out;

static void cloud_emit(void *user, const char *t, size_t n) {
    cloud_out *co = user;
    if (co->json) {
        fputs("{\"cloud\":true,\"piece\":", stdout);
        cli_json_str(stdout, t, n);
        fputs(",\"bytes\":", stdout);
        cli_json_bytes(stdout, t, n);
        fputs("}\n", stdout);
    } else {
        fwrite(t, 1, n, stdout);
    }
    if (fflush(stdout) != 0 || ferror(stdout)) co->out_error = true;
    if (co->reply && !el_buf_append(co->reply, t, n)) co->oom = true;
}

int cli_route_cloud(cli_route *cr, const char *path, const char *body, bool json, el_buf *reply, char *finish,
                    size_t finish_cap) {
    if (finish && finish_cap) finish[0] = 0;
    char *req = el_cloud_request_body(cr->cloud, body, strlen(body), true); /* body says "stream": true */
    if (!req) return cli_failf("out of memory");
    el_route rt; /* the relay injects a route member in the first event; the text reader ignores it */
    memset(&rt, 0, sizeof rt);
    rt.source = EL_ROUTE_CLOUD;
    snprintf(rt.reason, sizeof rt.reason, "%s", cr->reason);
    el_cloud_reply rep;
    el_cloud_relay *relay = el_cloud_relay_open(cr->cloud, path, req, strlen(req), &rt, &rep);
    free(req);
    if (!relay) {
        const char *code = rep.kind == EL_CLOUD_ERR_HTTP           ? "cloud_http_error"
                           : rep.kind == EL_CLOUD_ERR_BAD_RESPONSE ? "cloud_bad_response"
                           : (strstr(rep.error, "imeout") || strstr(rep.error, "timed out")) ? "cloud_timeout"
                                                                                              : "cloud_unreachable";
        fprintf(stderr, "error: cloud_error (%s): %s; routed to the cloud (%s): nothing ran locally\n", code, rep.error,
                cr->reason);
        el_cloud_reply_free(&rep);
        return CLI_EXIT_ERROR;
    }
    el_sse_text sse;
    el_sse_text_init(&sse, strstr(path, "chat") != NULL);
    cloud_out co = {.json = json, .reply = reply};
    char buf[4096];
    size_t n;
    while (!co.out_error && !co.oom && (n = el_cloud_relay_read(relay, buf, sizeof buf)) > 0)
        if (!el_sse_text_feed(&sse, buf, n, cloud_emit, &co)) break;
    const bool broken = el_cloud_relay_broken(relay);
    el_cloud_relay_close(relay);
    int code = CLI_EXIT_OK;
    if (!json) fflush(stdout);
    if (co.out_error) code = cli_failf("writing to stdout failed");
    else if (co.oom) code = cli_failf("out of memory");
    else if (sse.failed || broken || !sse.done) {
        if (!json) fputc('\n', stderr);
        fprintf(stderr, "error: cloud_error (%s): the cloud's stream failed; nothing ran locally, nothing was spliced\n",
                sse.failed ? sse.code : "cloud_stream_broken");
        code = CLI_EXIT_ERROR;
    }
    if (finish && finish_cap) snprintf(finish, finish_cap, "%s", sse.finish[0] ? sse.finish : "stop");
    el_sse_text_free(&sse);
    return code;
}

void cli_route_free(cli_route *cr) {
    if (!cr) return;
    el_cloud_free(cr->cloud);
    cr->cloud = NULL;
}
