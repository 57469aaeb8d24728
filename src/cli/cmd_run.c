/*
 * cmd_run.c — `edgellm run`: tokenize a prompt, generate, stream the text
 * (or, with --json, one JSON object per token and a final statistics line).
 * Every --json line is valid JSON in valid UTF-8: "piece" is the text with
 * U+FFFD where bytes are not (yet) a whole character, "bytes" the exact bytes;
 * the "bytes" of all lines, concatenated, are the plain run's output. Each
 * token line carries "t_ms", when it was emitted (CLOCK_MONOTONIC in ms, the
 * same clock in every process of the machine).
 *
 * --route (cmd_route.c): decided before anything is loaded, as serve
 * decides: local runs as above (the final --json object carries "route");
 * cloud streams the cloud's completion of the prompt to stdout (--json:
 * {"cloud":true,"piece","bytes"} lines, then the final object with
 * "source":"cloud" and "route"); declined prints why on stderr and exits
 * with CLI_EXIT_DECLINED (4). The route is printed on stderr.
 */
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli/cli.h"
#include "route/router.h"

typedef struct run_ctx {
    bool json;
    bool out_error; /* writing stdout failed (e.g. closed pipe): stop */
} run_ctx;

static bool on_token(const el_token_info *t, void *user) {
    run_ctx *rc = user;
    /* A piece may hold part of a character (the library releases bytes that
     * can never complete one, and an incomplete tail at the end): JSON gets
     * "piece" as valid UTF-8 (U+FFFD for such parts) and the exact bytes. */
    const char *p = t->piece ? t->piece : "";
    size_t plen = t->piece && t->piece_len > 0 ? (size_t)t->piece_len : 0;
    if (rc->json && t->id < 0) {
        /* Text the library held back (an incomplete UTF-8 sequence or a
         * possible stop-string prefix), released at the end: not a token. */
        fputs("{\"flush\":true,\"piece\":", stdout);
        cli_json_str(stdout, p, plen);
        fputs(",\"bytes\":", stdout);
        cli_json_bytes(stdout, p, plen);
        fputs("}\n", stdout);
    } else if (rc->json) {
        printf("{\"id\":%d,\"piece\":", (int)t->id);
        cli_json_str(stdout, p, plen);
        fputs(",\"bytes\":", stdout);
        cli_json_bytes(stdout, p, plen);
        fputs(",\"logprob\":", stdout);
        cli_json_num(stdout, t->logprob);
        fputs(",\"top\":[", stdout);
        for (int i = 0; i < t->n_top; i++) {
            printf(i ? ",[%d," : "[%d,", (int)t->top_id[i]);
            cli_json_num(stdout, t->top_logprob[i]);
            putchar(']');
        }
        /* when the token was emitted: CLOCK_MONOTONIC ms, comparable across processes
         * (edgellm accept times inter-token gaps with it) */
        fputs("],\"t_ms\":", stdout);
        cli_json_num(stdout, cli_now_ms());
        fputs("}\n", stdout);
    } else if (t->piece && t->piece_len > 0) {
        fwrite(t->piece, 1, (size_t)t->piece_len, stdout);
    }
    if (fflush(stdout) != 0 || ferror(stdout)) {
        rc->out_error = true;
        return false;
    }
    return true;
}

static void print_json_done(const el_generate_stats *st, const char *route_json, el_session *s, bool report) {
    double ptps = st->prefill_ms > 0 ? st->n_prompt * 1e3 / st->prefill_ms : 0;
    double dtps = st->decode_ms > 0 ? st->n_generated * 1e3 / st->decode_ms : 0;
    printf("{\"done\":true,\"finish\":\"%s\",\"n_prompt\":%d,\"n_generated\":%d,\"prefill_ms\":",
           cli_finish_name(st->finish), st->n_prompt, st->n_generated);
    cli_json_num(stdout, st->prefill_ms);
    fputs(",\"decode_ms\":", stdout);
    cli_json_num(stdout, st->decode_ms);
    fputs(",\"ttft_ms\":", stdout);
    cli_json_num(stdout, st->ttft_ms);
    fputs(",\"prompt_tps\":", stdout);
    cli_json_num(stdout, ptps);
    fputs(",\"decode_tps\":", stdout);
    cli_json_num(stdout, dtps);
    if (st->n_spec_rounds || st->n_drafted) {
        printf(",\"spec\":{\"drafted\":%d,\"accepted\":%d,\"rounds\":%d,\"plain_steps\":%d,\"alpha\":", st->n_drafted,
               st->n_accepted, st->n_spec_rounds, st->n_plain_steps);
        cli_json_num(stdout, st->n_drafted ? (double)st->n_accepted / st->n_drafted : 0.0);
        fputs(",\"mean_gamma\":", stdout);
        cli_json_num(stdout, st->n_spec_rounds ? (double)st->n_drafted / st->n_spec_rounds : 0.0);
        fputs(",\"tokens_per_forward\":", stdout);
        const int passes = st->n_spec_rounds + st->n_plain_steps;
        cli_json_num(stdout, passes ? (double)st->n_generated / passes : 0.0);
        /* the controller's cost model: c per drafted position (relative to a plain step) and
         * the speedup it predicts for these rounds: tokens / (passes + drafted * c) plain steps */
        const double c = st->spec_cost_ppm / 1e6;
        fputs(",\"cost\":", stdout);
        cli_json_num(stdout, c);
        printf(",\"last_gamma\":%d,\"predicted_speedup\":", st->spec_last_gamma);
        cli_json_num(stdout, passes ? st->n_generated / (passes + st->n_drafted * c) : 0.0);
        fputc('}', stdout);
    }
    if (route_json && route_json[0]) printf(",\"route\":%s", route_json);
    if (report && s) {
        fputs(",\"placement\":", stdout);
        cli_print_placement(s, stdout, true);
    }
    fputs("}\n", stdout);
    fflush(stdout);
}

/* --route sent the prompt to the cloud: its completion, streamed. */
static int run_cloud(cli_opts *o, cli_route *cr, const char *text, size_t len) {
    cJSON *b = cJSON_CreateObject();
    char *body = NULL;
    if (b) {
        if (strlen(text) != len) { /* a NUL byte: JSON could carry it, but the cloud would get another prompt */
            cJSON_Delete(b);
            return cli_failf("the prompt holds a NUL byte: it cannot be sent to the cloud as text");
        }
        cJSON_AddStringToObject(b, "prompt", text);
        cJSON_AddBoolToObject(b, "stream", true);
        if (o->n_predict > 0) cJSON_AddNumberToObject(b, "max_tokens", o->n_predict);
        if (o->temp_set) cJSON_AddNumberToObject(b, "temperature", o->sampling.temp);
        if (o->seed_set) cJSON_AddNumberToObject(b, "seed", (double)o->sampling.seed);
        if (o->n_stops) cJSON_AddItemToObject(b, "stop", cJSON_CreateStringArray(o->stops, o->n_stops));
        body = cJSON_PrintUnformatted(b);
        cJSON_Delete(b);
    }
    if (!body) return cli_failf("out of memory");
    char finish[16];
    int code = cli_route_cloud(cr, "/completions", body, o->json, NULL, finish, sizeof finish);
    free(body);
    if (code == CLI_EXIT_OK) {
        if (o->json) printf("{\"done\":true,\"finish\":\"%s\",\"source\":\"cloud\",\"route\":%s}\n", finish, cr->route_json);
        else putchar('\n');
        fflush(stdout);
    }
    return code;
}

int cli_cmd_run(cli_opts *o) {
    cli_measure_runtime(o); /* M_runtime: the process as it starts, measured as plan measures it */
    int vr = cli_verify_before_load(o); /* package checks before any byte is loaded */
    cli_route cr;
    memset(&cr, 0, sizeof cr);
    if (vr >= 0 && !o->route) return vr;
    size_t len = 0;
    char *text = cli_read_prompt(o, true, &len);
    if (!text) return CLI_EXIT_ERROR;
    if (o->route) { /* decided before anything runs */
        int rr = cli_route_decide(o, vr < 0, len, &cr);
        if (rr >= 0 || cr.source == EL_ROUTE_CLOUD) {
            int code = rr >= 0 ? rr : run_cloud(o, &cr, text, len);
            cli_route_free(&cr);
            free(text);
            return code;
        }
        if (vr >= 0) { /* unreachable: local needs the checks passed */
            free(text);
            return vr;
        }
    }

    el_error err = {0};
    el_model *m = cli_load_model(o, false, &err);
    if (!m) { free(text); return cli_fail(&err); }

    int flags = (o->no_bos ? 0 : EL_TOK_ADD_SPECIAL) | (o->no_parse_special ? 0 : EL_TOK_PARSE_SPECIAL);
    int32_t *toks = NULL;
    int n = cli_tokenize(m, text, len, flags, &toks);
    free(text);
    if (n < 0) { el_model_free(m); return CLI_EXIT_ERROR; }
    if (n == 0) {
        free(toks);
        el_model_free(m);
        return cli_failf("the prompt is empty (no tokens)");
    }

    el_session_params sp = el_session_default_params();
    sp.n_ctx = cli_ctx_for(o, m);
    if (o->n_batch > 0) sp.n_batch = o->n_batch;
    sp.type_k = o->cache_type_k;
    sp.type_v = o->cache_type_v;
    el_spec_params spec;
    cli_spec_setup(o, &sp, &spec);
    int ar = cli_admit(o, m, sp.n_ctx, sp.n_batch, 1, NULL); /* before the session allocates anything */
    if (ar >= 0) {
        free(toks);
        el_model_free(m);
        return ar;
    }
    el_lora *lora[CLI_MAX_LORA]; /* --lora: loaded first, so the session's plan holds their scratch */
    const int ll = cli_lora_load(o, m, lora, &sp.lora_rank);
    if (ll >= 0) {
        free(toks);
        el_model_free(m);
        return ll;
    }
    el_session *s = el_session_new(m, &sp, &err);
    if (!s) {
        cli_lora_free(lora);
        free(toks);
        el_model_free(m);
        return cli_fail(&err);
    }
    const int lr = cli_lora_set(o, s, lora);
    if (lr >= 0) {
        el_session_free(s);
        free(toks);
        el_model_free(m);
        return lr;
    }
    el_model *dm = NULL; /* --draft-model */
    el_session *dsess = NULL;
    const int dr = cli_draft_open(o, m, &sp, &spec, &dm, &dsess);
    if (dr >= 0) {
        el_session_free(s);
        cli_lora_free(lora);
        free(toks);
        el_model_free(m);
        return dr;
    }

    el_generate_params gp;
    memset(&gp, 0, sizeof gp);
    gp.max_tokens = o->n_predict;
    gp.ignore_eos = o->ignore_eos;
    gp.stop = o->n_stops ? o->stops : NULL;
    gp.n_top_logprobs = o->json ? o->top_logprobs : 0;
    gp.sampling = o->sampling;
    gp.spec = spec.mode ? &spec : NULL;
    gp.grammar = o->grammar;

    run_ctx rc = {.json = o->json};
    el_generate_stats st;
    memset(&st, 0, sizeof st);

    cli_sigint_install();
    cli_sigint_set_session(s);
    el_finish fin = el_generate(s, toks, n, &gp, on_token, &rc, &st, &err);
    cli_sigint_set_session(NULL);
    free(toks);

    int code = CLI_EXIT_OK;
    if (fin == EL_DONE_FAILED) {
        fflush(stdout);
        if (!o->json) fputc('\n', stderr);
        code = cli_fail(&err);
    } else if (rc.out_error) {
        code = cli_failf("writing to stdout failed");
    } else {
        st.finish = fin;
        if (o->json) {
            print_json_done(&st, cr.route_json, s, o->placement_report);
        } else {
            fflush(stdout);
            cli_print_perf(&st);
            if (o->placement_report) cli_print_placement(s, stderr, false);
        }
        if (fin == EL_DONE_CANCELLED) code = CLI_EXIT_CANCELLED;
    }
    el_session_free(dsess);
    el_model_free(dm);
    el_session_free(s);
    cli_lora_free(lora);
    el_model_free(m);
    return code;
}
