/*
 * cmd_perplexity.c — `edgellm perplexity -m MODEL -f TEXT [options]`: the
 * perplexity of a model on a text, by llama-perplexity's definition, and
 * the cost of a KV cache type against F16.
 *
 *   The text is tokenized with BOS (as the vocab says) and control-token
 *   parsing off; it is cut into n_chunk = n_tokens / n_ctx chunks of n_ctx
 *   tokens (-c, default 512; --chunks N takes the first N); each chunk is
 *   evaluated from an empty cache with its first token replaced by BOS
 *   (when the vocab adds one), and the tokens of its second half are scored:
 *   for j in [n_ctx/2, n_ctx - 1), -log p(token[j+1] | token[0..j]).
 *   PPL = exp(mean of those). llama-perplexity evaluates the whole chunk in
 *   one batch; here the first half is one prefill and each scored position
 *   is one decode step (edgellm's sessions keep the last row's logits), so
 *   every position sees exactly the same context.
 *
 *   -ctk / -ctv T: the session's cache types. --vs T (--vs-f16 = --vs f16):
 *   a second session with K and V caches of type T is fed the same tokens
 *   in step, and the mean and maximum |logprob difference| of the scored
 *   tokens, the share of positions whose argmax agrees, and T's perplexity
 *   are reported too.
 *
 * Output: one line per chunk (running PPL) on stderr, a summary on stdout,
 * or with --json one JSON object. Options are parsed strictly (a bad value
 * is a usage error naming it), and a text shorter than one chunk is an
 * error with the counts, before any session is allocated.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

typedef struct ppl_args {
    const char *model, *file;
    int n_ctx, n_batch, n_threads, n_chunks, type_k, type_v;
    int vs; /* --vs T / --vs-f16: the reference session's cache type (K and V), -1: none */
    bool json;
    cli_opts lora; /* --lora / --lora-scaled: its lora_* fields (cli_lora.c) */
} ppl_args;

static int parse_pos(const char *v, int lo, int hi, int *out) {
    if (!v || !*v) return -1;
    char *end;
    long long x = strtoll(v, &end, 10);
    if (*end || x < lo || x > hi) return -1;
    *out = (int)x;
    return 0;
}

static int parse_ppl_args(int argc, char **argv, ppl_args *a) {
    for (int i = 2; i < argc; i++) {
        const char *o = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED_VAL() do { if (!v) return cli_usage_error("perplexity", "option '%s' needs a value", o); i++; } while (0)
#define INT_OPT(field, lo, hi) do { NEED_VAL(); if (parse_pos(v, lo, hi, &a->field)) \
        return cli_usage_error("perplexity", "%s: expected an integer in [%d, %d], got '%s'", o, lo, hi, v); } while (0)
        if (!strcmp(o, "-m") || !strcmp(o, "--model")) { NEED_VAL(); a->model = v; }
        else if (!strcmp(o, "-f") || !strcmp(o, "--file")) { NEED_VAL(); a->file = v; }
        else if (!strcmp(o, "-c") || !strcmp(o, "--ctx-size")) INT_OPT(n_ctx, 4, 1 << 20);
        else if (!strcmp(o, "-b") || !strcmp(o, "--batch-size")) INT_OPT(n_batch, 1, 1 << 20);
        else if (!strcmp(o, "-t") || !strcmp(o, "--threads")) INT_OPT(n_threads, 1, 4096);
        else if (!strcmp(o, "--chunks")) INT_OPT(n_chunks, 1, 1 << 20);
        else if (!strcmp(o, "-ctk") || !strcmp(o, "--cache-type-k") || !strcmp(o, "-ctv") || !strcmp(o, "--cache-type-v")) {
            NEED_VAL();
            const int t = el_cache_type_parse(v);
            if (t < 0) return cli_usage_error("perplexity", "%s: '%s' is not a KV cache type (f16, bf16, q8_0, q4_0)", o, v);
            *(!strcmp(o, "-ctk") || !strcmp(o, "--cache-type-k") ? &a->type_k : &a->type_v) = t;
        } else if (!strcmp(o, "--vs-f16")) a->vs = EL_CACHE_F16;
        else if (!strcmp(o, "--vs")) {
            NEED_VAL();
            if ((a->vs = el_cache_type_parse(v)) < 0)
                return cli_usage_error("perplexity", "%s: '%s' is not a KV cache type (f16, bf16, q8_0, q4_0)", o, v);
        }
        else if (!strcmp(o, "--json")) a->json = true;
        else if (!strcmp(o, "--lora") || !strcmp(o, "--lora-scaled")) {
            NEED_VAL();
            const char *sc = NULL;
            if (!strcmp(o, "--lora-scaled")) {
                if (i + 1 >= argc) return cli_usage_error("perplexity", "--lora-scaled needs FILE SCALE");
                sc = argv[++i];
            }
            const int r = cli_lora_parse(&a->lora, "perplexity", v, sc);
            if (r >= 0) return r;
        }
        else if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            puts("usage: edgellm perplexity -m MODEL -f TEXT [-c N] [-b N] [-t N] [--chunks N] [-ctk T] [-ctv T] "
                 "[--vs T | --vs-f16] [--lora FILE[:SCALE]]... [--lora-scaled FILE SCALE]... [--json]");
            return CLI_EXIT_OK;
        } else return cli_usage_error("perplexity", "unknown option '%s'", o);
#undef NEED_VAL
#undef INT_OPT
    }
    if (!a->model) return cli_usage_error("perplexity", "missing -m MODEL");
    if (!a->file) return cli_usage_error("perplexity", "missing -f TEXT");
    return -1;
}

/* log p(id) under the logits row x[n]: log-sum-exp in double. */
static double logprob(const float *x, int n, int32_t id, int32_t *top) {
    int32_t b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    double sum = 0;
    for (int i = 0; i < n; i++) sum += exp((double)x[i] - x[b]);
    if (top) *top = b;
    return (double)x[id] - x[b] - log(sum);
}

int cli_cmd_perplexity(int argc, char **argv) {
    ppl_args a = {.n_ctx = 512, .vs = -1};
    int rc = parse_ppl_args(argc, argv, &a);
    if (rc >= 0) return rc;

    size_t len = 0;
    cli_opts ro = {.cmd = "perplexity", .prompt_file = a.file};
    char *text = cli_read_prompt(&ro, false, &len);
    if (!text) return CLI_EXIT_ERROR;
    el_error err = {0};
    el_model_params mp = el_model_default_params();
    mp.n_threads = a.n_threads;
    el_model *m = el_model_load(a.model, &mp, &err);
    if (!m) { free(text); return cli_fail(&err); }
    int32_t *toks = NULL;
    int n_tok = cli_tokenize(m, text, len, EL_TOK_ADD_SPECIAL, &toks);
    free(text);
    el_session *s = NULL, *ref = NULL;
    el_lora *lora[CLI_MAX_LORA] = {0};
    int code = CLI_EXIT_OK;
    if (n_tok < 0) { code = CLI_EXIT_ERROR; goto done; }
    const int train = el_model_n_ctx_train(m);
    if (train > 0 && a.n_ctx > train) {
        code = cli_usage_error("perplexity", "-c %d is beyond the model's context of %d tokens", a.n_ctx, train);
        goto done;
    }
    int n_chunk = n_tok / a.n_ctx;
    if (n_chunk < 1) {
        code = cli_failf("%s: %d tokens, fewer than one chunk of -c %d", a.file, n_tok, a.n_ctx);
        goto done;
    }
    if (a.n_chunks > 0 && a.n_chunks < n_chunk) n_chunk = a.n_chunks;

    el_session_params sp = el_session_default_params();
    sp.n_ctx = a.n_ctx;
    if (a.n_batch > 0) sp.n_batch = a.n_batch;
    sp.type_k = a.type_k;
    sp.type_v = a.type_v;
    if ((code = cli_lora_load(&a.lora, m, lora, &sp.lora_rank)) >= 0) goto done; /* first: the sessions plan their scratch */
    if (!(s = el_session_new(m, &sp, &err))) { code = cli_fail(&err); goto done; }
    if ((code = cli_lora_set(&a.lora, s, lora)) >= 0) goto done;
    code = CLI_EXIT_OK;
    if (a.vs > 0) {
        sp.type_k = sp.type_v = a.vs;
        if (!(ref = el_session_new(m, &sp, &err))) { code = cli_fail(&err); goto done; }
        /* the reference session runs the same adapters (only the cache type differs) */
        if (a.lora.n_lora && el_session_set_adapters(ref, lora, a.lora.lora_scale, a.lora.n_lora, &err)) {
            code = cli_fail(&err);
            goto done;
        }
    }

    const int nv = el_model_n_vocab(m), first = a.n_ctx / 2;
    const int32_t bos = el_token_bos(m);
    const bool add_bos = n_tok > 0 && bos >= 0 && toks[0] == bos;
    double nll = 0, nll_vs = 0, sum_d = 0, max_d = 0;
    long count = 0, same_top = 0;
    const double t0 = cli_now_ms();
    for (int c = 0; c < n_chunk; c++) {
        const int32_t *ct = toks + (size_t)c * a.n_ctx;
        int32_t head[1] = {add_bos ? bos : ct[0]};
        el_session *ss[2] = {s, ref};
        for (int k = 0; k < (ref ? 2 : 1); k++) {
            el_session_reset(ss[k]);
            /* the chunk's first half (token 0 = BOS), then one position at a time */
            if (el_session_eval(ss[k], head, 1, &err) || (first > 1 && el_session_eval(ss[k], ct + 1, first - 1, &err))) {
                code = cli_fail(&err);
                goto done;
            }
        }
        /* position j's logits predict token j + 1; llama-perplexity scores j in [first, n_ctx - 1) */
        for (int j = first; j < a.n_ctx - 1; j++) {
            for (int k = 0; k < (ref ? 2 : 1); k++)
                if (el_session_eval(ss[k], ct + j, 1, &err)) { code = cli_fail(&err); goto done; }
            int32_t top = -1, top_f16 = -1;
            const double lp = logprob(el_session_logits(s), nv, ct[j + 1], &top);
            nll -= lp;
            if (ref) {
                const double lpf = logprob(el_session_logits(ref), nv, ct[j + 1], &top_f16);
                nll_vs -= lpf;
                const double d = fabs(lp - lpf);
                sum_d += d;
                if (d > max_d) max_d = d;
                same_top += top == top_f16;
            }
            count++;
        }
        fprintf(stderr, "[%d/%d] PPL %.4f%s", c + 1, n_chunk, exp(nll / (double)count), c + 1 == n_chunk ? "\n" : "\r");
    }
    const double secs = (cli_now_ms() - t0) / 1000.0;
    const char *tk = el_cache_type_name(a.type_k), *tv = el_cache_type_name(a.type_v);
    if (a.json) {
        printf("{\"model\":");
        cli_json_str(stdout, a.model, strlen(a.model));
        printf(",\"file\":");
        cli_json_str(stdout, a.file, strlen(a.file));
        printf(",\"n_tokens\":%d,\"n_ctx\":%d,\"n_chunks\":%d,\"scored\":%ld,\"type_k\":\"%s\",\"type_v\":\"%s\","
               "\"ppl\":%.6f,\"nll\":%.6f,\"seconds\":%.2f",
               n_tok, a.n_ctx, n_chunk, count, tk, tv, exp(nll / (double)count), nll / (double)count, secs);
        if (ref)
            printf(",\"vs\":\"%s\",\"ppl_vs\":%.6f,\"mean_abs_dlogprob\":%.6f,\"max_abs_dlogprob\":%.6f,\"same_top\":%.6f",
                   el_cache_type_name(a.vs), exp(nll_vs / (double)count), sum_d / (double)count, max_d,
                   (double)same_top / (double)count);
        printf("}\n");
    } else {
        printf("perplexity of %s on %s: %d tokens, %d chunks of %d, %ld scored, K %s V %s\n", a.model, a.file, n_tok,
               n_chunk, a.n_ctx, count, tk, tv);
        printf("  PPL %.4f (mean NLL %.6f), %.1f s\n", exp(nll / (double)count), nll / (double)count, secs);
        if (ref)
            printf("  vs a %s cache: PPL %.4f, mean |dlogprob| %.6f, max %.6f, same argmax %.2f %%\n",
                   el_cache_type_name(a.vs), exp(nll_vs / (double)count), sum_d / (double)count, max_d,
                   100.0 * (double)same_top / (double)count);
    }
    if (fflush(stdout) != 0) code = cli_failf("writing to stdout failed");
done:
    el_session_free(s);
    el_session_free(ref);
    cli_lora_free(lora);
    free(toks);
    el_model_free(m);
    return code;
}
