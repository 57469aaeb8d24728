/*
 * cmd_act.c — `edgellm act`: a request becomes a proposal, and only the
 * proposal gate (src/gate/gate.h) turns a proposal into an event.
 *
 *   edgellm act --policy actions.json -m MODEL -p "TEXT" [options]
 *   edgellm act --policy actions.json --proposal FILE|-   [options]
 *
 * With a model: the prompt (the policy's actions, described, then the
 * request) goes through the model with the proposal schema generated from
 * the policy as a grammar constraint, so the model's output is always a
 * JSON object {"action", "params"} of the policy's shape. The model fills in
 * only action and params: this process, as the host, then stamps
 * device_id, request_id (random), sequence (from the handshake), deadline
 * (the gate's clock + --deadline-ms) and the HMAC tag with the device key.
 * The key never enters the prompt, and the model never sees it. The frame
 * then goes through the gate (its clock: CLOCK_MONOTONIC milliseconds), which
 * was brought up in this process: policy loaded, the host's handshake done
 * (next sequence checked against the sync tag), --event and --var applied.
 * The request is registered as pending (el_gate_expect) before the model
 * runs; if generating takes longer than its deadline the request is
 * cancelled and the reply is refused as late_reply.
 *
 * With --proposal: each non-empty line of FILE (or stdin) is one frame,
 * submitted in order to the same gate — duplicates, ordering and replays
 * across the lines are seen.
 *
 * Prints, per frame, "accepted: ..." with the event or "refused: CODE: detail"
 * (--json: one object per frame). Exit 0 when every frame was accepted,
 * CLI_EXIT_DECLINED (4) when one was refused, 1 on an error, 2 on usage.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>
#include <sodium.h>

#include "cli/cli.h"
#include "route/audit.h"
#include "gate/gate.h"
#include "structured/json_schema.h"
#include "util/buf.h"

#define ACT_MAX_VARS 16
#define ACT_MAX_EVENTS 16

typedef struct act_opts {
    const char *policy, *proposal, *device, *audit_log;
    bool json, print_schema;
    const char *vars[ACT_MAX_VARS];
    int n_vars;
    const char *events[ACT_MAX_EVENTS];
    int n_events;
    long deadline_ms;
} act_opts;

static uint64_t mono_ms(void *user) {
    (void)user;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void on_audit(void *user, const el_gate_audit_rec *r) { el_audit_gate(user, r); }

static const char USAGE[] =
    "usage: edgellm act --policy actions.json (-m MODEL -p TEXT | -f FILE | --proposal FILE|-) [options]\n"
    "  --device ID          the device the proposal is for (default: the policy's first)\n"
    "  --var NAME=VALUE     set a state variable of the policy (repeatable)\n"
    "  --event NAME         apply a state-machine event after the handshake (repeatable):\n"
    "                       host_slow host_ok timeout link_lost handshake model_failed model_ok\n"
    "                       sensor_fault actuator_fault fault_cleared\n"
    "  --deadline-ms N      the proposal's deadline after the request starts (default 10000)\n"
    "  --audit-log FILE     append every gate decision and transition (JSON lines)\n"
    "  --json               one JSON object per frame\n"
    "  --print-schema       print the proposal JSON Schema made from the policy and exit\n"
    "  model: -m MODEL, -p TEXT, -f FILE, -n N (default 128), --temp T (default 0), --seed S,\n"
    "         -t N, -c N, --allow-unsigned, --pub KEY.pub\n";

static void print_value(FILE *f, const el_gate_typedef *t, const el_gate_value *v) {
    switch (t->type) {
    case EL_GT_INTEGER: fprintf(f, "%lld", (long long)v->i); break;
    case EL_GT_NUMBER: cli_json_num(f, v->n); break;
    case EL_GT_BOOLEAN: fputs(v->b ? "true" : "false", f); break;
    case EL_GT_ENUM: cli_json_str(f, t->values[v->e], strlen(t->values[v->e])); break;
    }
}

/* Prints one decision. */
static void report(const act_opts *a, const el_gate *g, const el_gate_result *r, const char *frame, size_t flen,
                   const char *model_out) {
    const el_gate_policy *p = &g->pol;
    if (a->json) {
        printf("{\"decision\":\"%s\",\"reason\":\"%s\",\"detail\":", r->reason ? "refused" : "accepted",
               el_gate_reason_name(r->reason));
        cli_json_str(stdout, r->detail, strlen(r->detail));
        printf(",\"state\":\"%s\"", el_gate_state_name(el_gate_get_state(g)));
        if (model_out) {
            fputs(",\"model_output\":", stdout);
            cli_json_str(stdout, model_out, strlen(model_out));
        }
        fputs(",\"frame\":", stdout);
        cli_json_str(stdout, frame, flen);
        if (r->reason == EL_GATE_OK) {
            const el_gate_action *ac = &p->actions[r->event.action];
            printf(",\"event\":{\"device_id\":\"%s\",\"request_id\":\"%s\",\"sequence\":%llu,\"action\":\"%s\",\"params\":{",
                   p->devices[r->event.device].id, r->event.request_id, (unsigned long long)r->event.sequence, ac->name);
            for (int j = 0; j < ac->n_params; j++) {
                printf(j ? ",\"%s\":" : "\"%s\":", ac->params[j].name);
                print_value(stdout, &ac->params[j], &r->event.params[j]);
            }
            fputs("}}", stdout);
        }
        fputs("}\n", stdout);
    } else if (r->reason == EL_GATE_OK) {
        const el_gate_action *ac = &p->actions[r->event.action];
        printf("accepted: %s", ac->name);
        for (int j = 0; j < ac->n_params; j++) {
            printf(" %s=", ac->params[j].name);
            print_value(stdout, &ac->params[j], &r->event.params[j]);
        }
        printf(" (device %s, request %s, sequence %llu, state %s)\n", p->devices[r->event.device].id,
               r->event.request_id, (unsigned long long)r->event.sequence, el_gate_state_name(el_gate_get_state(g)));
    } else {
        printf("refused: %s: %s (state %s)\n", el_gate_reason_name(r->reason), r->detail,
               el_gate_state_name(el_gate_get_state(g)));
    }
    fflush(stdout);
}

/* --proposal: every non-empty line a frame. */
static int run_frames(const act_opts *a, el_gate *g) {
    FILE *f = strcmp(a->proposal, "-") ? fopen(a->proposal, "rb") : stdin;
    if (!f) return cli_failf("--proposal: cannot open '%s': %s", a->proposal, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int code = CLI_EXIT_OK, frames = 0;
    while ((n = getline(&line, &cap, f)) >= 0) {
        size_t len = (size_t)n;
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r')) len--;
        if (!len) continue;
        frames++;
        el_gate_tick(g);
        el_gate_result r;
        el_gate_submit(g, line, len, &r);
        report(a, g, &r, line, len, NULL);
        if (r.reason) code = CLI_EXIT_DECLINED;
    }
    free(line);
    if (f != stdin) fclose(f);
    if (!frames) return cli_failf("--proposal: no frame in '%s'", a->proposal);
    return code;
}

typedef struct gen_ctx {
    el_buf out;
    bool oom;
} gen_ctx;

static bool on_token(const el_token_info *t, void *user) {
    gen_ctx *c = user;
    if (t->piece && t->piece_len > 0 && !el_buf_append(&c->out, t->piece, (size_t)t->piece_len)) c->oom = true;
    return !c->oom;
}

static void type_text(el_buf *b, const el_gate_typedef *t) {
    char tmp[160];
    switch (t->type) {
    case EL_GT_INTEGER:
    case EL_GT_NUMBER:
        snprintf(tmp, sizeof tmp, "%s %s %g..%g", t->name, el_gate_type_name(t->type), t->min, t->max);
        el_buf_str(b, tmp);
        break;
    case EL_GT_BOOLEAN:
        snprintf(tmp, sizeof tmp, "%s true|false", t->name);
        el_buf_str(b, tmp);
        break;
    case EL_GT_ENUM:
        el_buf_str(b, t->name);
        el_buf_str(b, " ");
        for (int i = 0; i < t->n_values; i++) {
            el_buf_str(b, i ? "|" : "");
            el_buf_str(b, t->values[i]);
        }
        break;
    }
}

/* The model's prompt: the actions (names, descriptions, parameter types) and the request. Never a key. */
static char *build_prompt(const el_gate_policy *p, const char *device, const char *request, size_t len) {
    el_buf b = {0};
    el_buf_str(&b, "You control the device \"");
    el_buf_str(&b, device);
    el_buf_str(&b, "\". Answer the request with exactly one action as JSON {\"action\": ..., \"params\": {...}}.\nActions:\n");
    for (int i = 0; i < p->n_actions; i++) {
        const el_gate_action *a = &p->actions[i];
        el_buf_str(&b, "- ");
        el_buf_str(&b, a->name);
        if (a->description[0]) {
            el_buf_str(&b, ": ");
            el_buf_str(&b, a->description);
        }
        el_buf_str(&b, " (params:");
        for (int j = 0; j < a->n_params; j++) {
            el_buf_str(&b, j ? ", " : " ");
            type_text(&b, &a->params[j]);
        }
        el_buf_str(&b, a->n_params ? ")\n" : " none)\n");
    }
    el_buf_str(&b, "Request: ");
    el_buf_append(&b, request, len);
    el_buf_str(&b, "\nJSON: ");
    if (!el_buf_append(&b, "", 1)) {
        el_buf_free(&b);
        return NULL;
    }
    return b.p;
}

/* The model path: generate under the schema, stamp, submit. */
static int run_model(const act_opts *a, cli_opts *o, el_gate *g, int dev, const el_gate_sync *sync) {
    const el_gate_policy *p = &g->pol;
    el_error err = {0};
    char *schema = el_gate_policy_schema(p);
    char *gbnf = schema ? el_json_schema_text_to_gbnf(schema, strlen(schema), &err) : NULL;
    free(schema);
    if (!gbnf) return err.code ? cli_fail(&err) : cli_failf("out of memory");
    size_t tlen = 0;
    char *text = cli_read_prompt(o, true, &tlen);
    if (!text) {
        free(gbnf);
        return CLI_EXIT_ERROR;
    }
    char *prompt = build_prompt(p, p->devices[dev].id, text, tlen);
    free(text);
    cli_measure_runtime(o); /* M_runtime: the process as it starts, measured as plan measures it */
    int vr = cli_verify_before_load(o);
    if (!prompt || vr >= 0) {
        free(gbnf);
        free(prompt);
        return prompt ? vr : cli_failf("out of memory");
    }
    /* the request starts: it is pending at the gate until its deadline */
    uint8_t rnd[8];
    randombytes_buf(rnd, sizeof rnd);
    char req[EL_GATE_ID_MAX];
    char hex[17];
    sodium_bin2hex(hex, sizeof hex, rnd, sizeof rnd);
    snprintf(req, sizeof req, "act-%s", hex);
    const uint64_t deadline = mono_ms(NULL) + (uint64_t)a->deadline_ms;
    el_gate_expect(g, p->devices[dev].id, req, deadline);

    el_model *m = cli_load_model(o, false, &err);
    int code = CLI_EXIT_ERROR;
    el_session *s = NULL;
    int32_t *toks = NULL;
    gen_ctx gc = {0};
    if (!m) {
        code = cli_fail(&err);
        goto done;
    }
    const int n = cli_tokenize(m, prompt, strlen(prompt), EL_TOK_ADD_SPECIAL, &toks);
    if (n <= 0) goto done;
    el_session_params sp = el_session_default_params();
    sp.n_ctx = cli_ctx_for(o, m);
    if (sp.n_ctx < n + o->n_predict + 8) sp.n_ctx = n + o->n_predict + 8;
    const int ar = cli_admit(o, m, sp.n_ctx, sp.n_batch, 1, NULL);
    if (ar >= 0) {
        code = ar;
        goto done;
    }
    if (!(s = el_session_new(m, &sp, &err))) {
        code = cli_fail(&err);
        goto done;
    }
    el_generate_params gp;
    memset(&gp, 0, sizeof gp);
    gp.max_tokens = o->n_predict;
    gp.sampling = o->sampling;
    gp.grammar = gbnf;
    el_generate_stats st;
    memset(&st, 0, sizeof st);
    cli_sigint_install();
    cli_sigint_set_session(s);
    const el_finish fin = el_generate(s, toks, n, &gp, on_token, &gc, &st, &err);
    cli_sigint_set_session(NULL);
    if (fin == EL_DONE_FAILED) {
        code = cli_fail(&err);
        goto done;
    }
    if (fin == EL_DONE_CANCELLED) {
        code = CLI_EXIT_CANCELLED;
        goto done;
    }
    if (gc.oom || !el_buf_append(&gc.out, "", 1)) {
        code = cli_failf("out of memory");
        goto done;
    }
    /* the model's answer: {"action", "params"} by construction */
    cJSON *ans = cJSON_Parse(gc.out.p);
    const cJSON *act = ans ? cJSON_GetObjectItemCaseSensitive(ans, "action") : NULL;
    const cJSON *par = ans ? cJSON_GetObjectItemCaseSensitive(ans, "params") : NULL;
    if (!cJSON_IsString(act) || !cJSON_IsObject(par)) {
        cJSON_Delete(ans);
        code = cli_failf("the model's output is not a complete proposal (%s after %d tokens): %s",
                         cli_finish_name(fin), st.n_generated, gc.out.p);
        goto done;
    }
    char *params = cJSON_PrintUnformatted(par);
    char frame[EL_GATE_MAX_FRAME + 1];
    /* the host stamps the frame: the only place the key is used */
    const int flen = params ? el_gate_frame_write(frame, sizeof frame, p->devices[dev].key, EL_GATE_SCHEMA_VERSION,
                                                  p->devices[dev].id, req, sync->next_sequence, deadline,
                                                  act->valuestring, params)
                            : -1;
    free(params);
    cJSON_Delete(ans);
    if (flen < 0) {
        code = cli_failf("the proposal does not fit in a frame of %d bytes", EL_GATE_MAX_FRAME);
        goto done;
    }
    if (!a->json) fprintf(stderr, "model output: %s\nframe: %s\n", gc.out.p, frame);
    el_gate_tick(g); /* the deadline may have passed while the model ran: then the reply is late */
    el_gate_result r;
    el_gate_submit(g, frame, (size_t)flen, &r);
    report(a, g, &r, frame, (size_t)flen, gc.out.p);
    code = r.reason ? CLI_EXIT_DECLINED : CLI_EXIT_OK;
done:
    el_buf_free(&gc.out);
    free(toks);
    el_session_free(s);
    el_model_free(m);
    free(gbnf);
    free(prompt);
    return code;
}

static bool parse_long(const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    const long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

int cli_cmd_act(int argc, char **argv) {
    act_opts a;
    memset(&a, 0, sizeof a);
    a.deadline_ms = 10000;
    cli_opts o;
    memset(&o, 0, sizeof o);
    o.cmd = "act";
    o.n_predict = 128;
    o.n_ctx = -1;
    o.sampling = el_sampling_default();
    o.sampling.temp = 0;
    o.load = EL_LOAD_MMAP;
    o.ctx_overflow = -1;
    for (int i = 2; i < argc; i++) {
        const char *f = argv[i];
        const bool has = i + 1 < argc;
#define VAL() (has ? argv[++i] : NULL)
        long v;
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) {
            fputs(USAGE, stdout);
            return CLI_EXIT_OK;
        } else if (!strcmp(f, "--json")) a.json = true;
        else if (!strcmp(f, "--print-schema")) a.print_schema = true;
        else if (!strcmp(f, "--allow-unsigned")) o.allow_unsigned = true;
        else if (!has) return cli_usage_error("act", "option '%s' needs a value (or is unknown)", f);
        else if (!strcmp(f, "--policy")) a.policy = VAL();
        else if (!strcmp(f, "--proposal")) a.proposal = VAL();
        else if (!strcmp(f, "--device")) a.device = VAL();
        else if (!strcmp(f, "--audit-log")) a.audit_log = VAL();
        else if (!strcmp(f, "--var")) {
            if (a.n_vars >= ACT_MAX_VARS) return cli_usage_error("act", "at most %d --var", ACT_MAX_VARS);
            a.vars[a.n_vars++] = VAL();
        } else if (!strcmp(f, "--event")) {
            if (a.n_events >= ACT_MAX_EVENTS) return cli_usage_error("act", "at most %d --event", ACT_MAX_EVENTS);
            a.events[a.n_events++] = VAL();
        } else if (!strcmp(f, "--deadline-ms")) {
            if (!parse_long(VAL(), 1, 86400000, &a.deadline_ms))
                return cli_usage_error("act", "--deadline-ms: expected 1..86400000 milliseconds");
        } else if (!strcmp(f, "-m") || !strcmp(f, "--model")) o.model = VAL();
        else if (!strcmp(f, "-p") || !strcmp(f, "--prompt")) o.prompt = VAL();
        else if (!strcmp(f, "-f") || !strcmp(f, "--file")) o.prompt_file = VAL();
        else if (!strcmp(f, "--pub")) o.pub = VAL();
        else if (!strcmp(f, "-n") || !strcmp(f, "--n-predict")) {
            if (!parse_long(VAL(), 1, 4096, &v)) return cli_usage_error("act", "-n: expected 1..4096");
            o.n_predict = (int)v;
        } else if (!strcmp(f, "-t") || !strcmp(f, "--threads")) {
            if (!parse_long(VAL(), 0, 1024, &v)) return cli_usage_error("act", "-t: expected 0..1024");
            o.n_threads = (int)v;
        } else if (!strcmp(f, "-c") || !strcmp(f, "--ctx-size")) {
            if (!parse_long(VAL(), 0, 1 << 20, &v)) return cli_usage_error("act", "-c: expected 0..1048576");
            o.n_ctx = (int)v;
        } else if (!strcmp(f, "-s") || !strcmp(f, "--seed")) {
            if (!parse_long(VAL(), 0, 0x7fffffffL, &v)) return cli_usage_error("act", "--seed: expected 0..2^31-1");
            o.sampling.seed = (uint64_t)v;
            o.seed_set = true;
        } else if (!strcmp(f, "--temp")) {
            char *end;
            const char *s = VAL();
            const double t = strtod(s, &end);
            if (end == s || *end || !(t >= 0 && t <= 100)) return cli_usage_error("act", "--temp: expected 0..100");
            o.sampling.temp = (float)t;
            o.temp_set = true;
        } else return cli_usage_error("act", "unknown option '%s'", f);
#undef VAL
    }
    if (!a.policy) return cli_usage_error("act", "missing --policy actions.json");
    if (!a.print_schema) {
        const int modes = !!a.proposal + !!(o.model || o.prompt || o.prompt_file);
        if (modes != 1) return cli_usage_error("act", "give either --proposal FILE|- or -m MODEL with -p TEXT / -f FILE");
        if (!a.proposal && (!o.model || !!o.prompt + !!o.prompt_file != 1))
            return cli_usage_error("act", "the model path needs -m MODEL and one of -p TEXT and -f FILE");
    }

    static el_gate_policy pol; /* ~100 KB: not on the stack */
    static el_gate gate;
    char err[512];
    if (el_gate_policy_load(a.policy, &pol, err, sizeof err)) return cli_failf("--policy: %s", err);
    if (a.print_schema) {
        char *s = el_gate_policy_schema(&pol);
        if (!s) return cli_failf("out of memory");
        puts(s);
        free(s);
        return CLI_EXIT_OK;
    }
    const int dev = a.device ? el_gate_policy_device(&pol, a.device) : 0;
    if (dev < 0) return cli_usage_error("act", "--device: '%s' is not in the policy", a.device);
    el_audit *au = NULL;
    if (a.audit_log && !(au = el_audit_open(a.audit_log, 0, 0, err, sizeof err)))
        return cli_failf("--audit-log: %s", err);
    int code = CLI_EXIT_OK;
    if (el_gate_init(&gate, &pol, mono_ms, NULL, au ? on_audit : NULL, au, err, sizeof err)) {
        code = cli_failf("--policy: %s", err);
        goto out;
    }
    for (int i = 0; i < a.n_vars; i++) {
        const char *eq = strchr(a.vars[i], '=');
        char name[EL_GATE_NAME_MAX];
        const size_t nl = eq ? (size_t)(eq - a.vars[i]) : 0;
        if (!eq || nl == 0 || nl >= sizeof name) {
            code = cli_usage_error("act", "--var: expected NAME=VALUE, got '%s'", a.vars[i]);
            goto out;
        }
        memcpy(name, a.vars[i], nl);
        name[nl] = 0;
        const int vi = el_gate_policy_var(&pol, name);
        el_gate_value val;
        if (vi < 0) {
            code = cli_usage_error("act", "--var: the policy has no variable '%s'", name);
            goto out;
        }
        if (el_gate_value_parse(&pol, vi, eq + 1, &val, err, sizeof err) || el_gate_set_var(&gate, name, &val)) {
            code = cli_usage_error("act", "--var: %s", err);
            goto out;
        }
    }
    /* the host's handshake: the gate's clock and the next sequence, checked with the key */
    uint8_t nonce[16];
    randombytes_buf(nonce, sizeof nonce);
    el_gate_sync sync;
    memset(&sync, 0, sizeof sync);
    for (int d = 0; d < pol.n_devices; d++) {
        el_gate_sync s;
        el_gate_handshake(&gate, pol.devices[d].id, nonce, &s);
        if (el_gate_sync_verify(pol.devices[d].key, nonce, &s)) {
            code = cli_failf("handshake with %s: the sync tag does not verify", pol.devices[d].id);
            goto out;
        }
        if (d == dev) sync = s;
    }
    for (int i = 0; i < a.n_events; i++) {
        const int ev = el_gate_ev_parse(a.events[i]);
        if (ev < 0) {
            code = cli_usage_error("act", "--event: '%s' is not an event name", a.events[i]);
            goto out;
        }
        const el_gate_state from = el_gate_get_state(&gate);
        if (ev == EL_GE_HANDSHAKE) { /* a real one: every device re-synced */
            for (int d = 0; d < pol.n_devices; d++) {
                el_gate_sync s;
                el_gate_handshake(&gate, pol.devices[d].id, nonce, &s);
                if (d == dev) sync = s;
            }
        } else if (el_gate_event_apply(&gate, (el_gate_ev)ev)) {
            code = cli_failf("--event %s: no transition from state %s", a.events[i], el_gate_state_name(from));
            goto out;
        }
        if (!a.json) fprintf(stderr, "event %s: %s -> %s\n", a.events[i], el_gate_state_name(from),
                             el_gate_state_name(el_gate_get_state(&gate)));
    }
    code = a.proposal ? run_frames(&a, &gate) : run_model(&a, &o, &gate, dev, &sync);
out:
    el_audit_close(au);
    sodium_memzero(&pol, sizeof pol);
    sodium_memzero(&gate, sizeof gate);
    return code;
}
