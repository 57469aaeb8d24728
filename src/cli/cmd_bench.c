/*
 * cmd_bench.c — `edgellm bench`: llama-bench-like speed measurement.
 *
 *   pp  prefill of -p tokens (fixed pseudo-random ids in the vocab, as
 *       llama-bench uses) on a reset session, per repetition, tokens/s
 *   tg  -n single-token decode steps (el_session_eval one token at a time)
 *       after a 1-token warm prompt, per repetition, tokens/s
 *   -d N (depth, as llama-bench's -d): N tokens are evaluated first, untimed,
 *       and pp / tg are measured from position N (the cache holds N tokens
 *       the attention reads). The depth prefill runs once; each repetition
 *       rolls the cache back to N with el_session_truncate (recomputing the
 *       depth only when a sliding-window ring cannot roll back that far).
 *   mean ± sample standard deviation over -r repetitions; also load time
 *   (el_model_load), TTFT (p-token prefill + greedy pick of the first
 *   token), peak RSS, and the decode roofline: bytes of weights one decode
 *   token reads (from the GGUF) against the measured read bandwidth.
 *
 * Load strategies (--load, memory/load.h) and cold starts (--cold: the
 * file's page-cache pages evicted with posix_fadvise DONTNEED before the
 * load; the fraction still cached after that is reported, since pages some
 * process maps are not dropped): the first prompt after the load is timed on
 * its own — first_token_ms = load + that prefill + the greedy pick, the time
 * a user waits from a cold start — then one decode step (first_decode_ms),
 * with the resident set after the load and after that first decode token.
 * The repeated pp/tg tests come after (they see warm pages).
 *
 * Speculative decoding (--spec ngram | --spec draft -md FILE, --draft-max
 * ...): after tg, -r repetitions of -n greedy tokens (ignore_eos) from a
 * fixed copy-heavy prompt (SPEC_PROMPT), plain and speculative alternated on
 * the reset session: decode tokens/s of both, the measured speedup, α
 * (accepted / drafted), the mean and last γ, the controller's cost c and the
 * speedup it predicts (as `run --json`), and whether both gave the same
 * tokens (they must: greedy speculation is exact).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "backend/cpu/kernels.h"
#include "backend/cpu/layout.h"
#include "backend/cpu/membw.h"
#include "cli/cli.h"
#include "memory/load.h"
#include "runtime/model.h"
#include "package/gguf.h"

/* VmRSS of this process in bytes (0 if unknown). */
static uint64_t rss_now(void) {
    FILE *f = fopen("/proc/self/status", "re");
    if (!f) return 0;
    char line[256];
    unsigned long long kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %llu kB", &kb) == 1) break;
    fclose(f);
    return (uint64_t)kb * 1024u;
}

typedef struct bench_stat { double mean, sd; } bench_stat;

static bench_stat stat_of(const double *v, int n) {
    bench_stat r = {NAN, NAN};
    if (n <= 0) return r;
    double s = 0;
    for (int i = 0; i < n; i++) s += v[i];
    r.mean = s / n;
    double q = 0;
    for (int i = 0; i < n; i++) q += (v[i] - r.mean) * (v[i] - r.mean);
    r.sd = n > 1 ? sqrt(q / (n - 1)) : 0.0;
    return r;
}

static bool ends_with(el_str s, const char *suf) {
    size_t n = strlen(suf);
    return s.len >= n && memcmp(s.ptr + s.len - n, suf, n) == 0;
}

/* Bytes of weights one decode token reads: every 2-D ".weight" matrix, one
 * row of token_embd — or all of it when the output projection is tied to it
 * (no output.weight). Also the file size and parameter count. */
static bool weight_bytes(const char *path, uint64_t *per_token, uint64_t *file_size,
                         uint64_t *n_params, el_error *err) {
    el_gguf *g = el_gguf_open(path, err);
    if (!g) return false;
    uint64_t sum = 0, params = 0;
    const el_gguf_tensor *embd = NULL;
    bool has_output = false;
    for (int64_t i = 0; i < el_gguf_n_tensors(g); i++) {
        const el_gguf_tensor *t = el_gguf_tensor_at(g, i);
        uint64_t ne = 1;
        for (int d = 0; d < t->n_dims; d++) ne *= (uint64_t)t->ne[d];
        params += ne;
        if (el_str_eq(t->name, "token_embd.weight")) { embd = t; continue; }
        if (el_str_eq(t->name, "output.weight")) has_output = true;
        if (t->n_dims == 2 && ends_with(t->name, ".weight")) sum += t->nbytes;
    }
    if (embd) {
        if (!has_output) sum += embd->nbytes;                       /* tied output matrix */
        else if (embd->ne[1] > 0) sum += embd->nbytes / (uint64_t)embd->ne[1]; /* one row */
    }
    *per_token = sum;
    *file_size = el_gguf_file_size(g);
    *n_params = params;
    el_gguf_close(g);
    return true;
}

static int32_t argmax(const float *v, int n) {
    int32_t best = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[best]) best = i;
    return best;
}

static const char *base_name(const char *p) {
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static void fmt_size(char *buf, size_t cap, double bytes) {
    if (bytes >= (double)(1u << 30)) snprintf(buf, cap, "%.2f GiB", bytes / (double)(1u << 30));
    else snprintf(buf, cap, "%.2f MiB", bytes / (double)(1u << 20));
}

/* The cache rolled back to `depth` tokens of toks[0..depth) (untimed): truncate
 * when the session holds at least that prefix, else reset and evaluate it. */
static int bench_to_depth(el_session *s, const int32_t *toks, int depth, el_error *err) {
    if (el_session_n_past(s) >= depth && el_session_truncate(s, depth, err) == EL_OK) return EL_OK;
    memset(err, 0, sizeof *err);
    el_session_reset(s);
    return el_session_eval(s, toks, depth, err);
}

/* A prompt that copies itself (n-gram drafts are accepted on it). */
static const char SPEC_PROMPT[] =
    "Rename the variables to snake_case and keep the code otherwise the same.\n\n"
    "def computeTotal(itemList, taxRate):\n    subTotal = 0\n    for itemEntry in itemList:\n"
    "        subTotal += itemEntry.unitPrice * itemEntry.quantity\n    return subTotal * (1 + taxRate)\n\n"
    "Renamed:\n\ndef compute_total(item_list, tax_rate):\n";

typedef struct spec_bench {
    bool ran, same_tokens;
    double plain_tps, spec_tps;     /* means over the repetitions */
    int drafted, accepted, rounds, plain_steps, generated, last_gamma;
    double cost;                    /* the controller's c (last repetition) */
} spec_bench;

typedef struct tok_rec { int32_t *ids; int n, cap; } tok_rec;
static bool rec_tok(const el_token_info *t, void *user) {
    tok_rec *r = user;
    if (t->id >= 0 && r->n < r->cap) r->ids[r->n++] = t->id;
    return true;
}

/* The speculative decode test (see the header comment). 0, or an exit code. */
static int bench_spec(cli_opts *o, el_model *m, el_session *s, el_session *ds, const el_spec_params *spec, int ng, int reps,
                      spec_bench *out) {
    memset(out, 0, sizeof *out);
    int32_t prompt[512];
    const int np = el_tokenize(m, SPEC_PROMPT, sizeof SPEC_PROMPT - 1, prompt, 512, EL_TOK_ADD_SPECIAL);
    if (np <= 0) return cli_failf("bench --spec: the prompt does not tokenize");
    if (np + ng + 40 > el_session_n_ctx(s)) return cli_failf("bench --spec: -n %d does not fit the context", ng);
    int32_t *ta = malloc(sizeof *ta * (size_t)ng), *tb = malloc(sizeof *tb * (size_t)ng);
    if (!ta || !tb) { free(ta); free(tb); return cli_failf("out of memory"); }
    out->same_tokens = true;
    double sum_plain = 0, sum_spec = 0;
    for (int r = 0; r < reps; r++) {
        for (int mode = 0; mode < 2; mode++) {
            el_generate_params gp;
            memset(&gp, 0, sizeof gp);
            gp.sampling = el_sampling_default();
            gp.sampling.temp = 0.0f;
            gp.max_tokens = ng;
            gp.ignore_eos = true;
            gp.spec = mode ? spec : NULL;
            el_session_reset(s);
            if (ds) el_session_reset(ds);
            tok_rec rec = {mode ? tb : ta, 0, ng};
            el_generate_stats st;
            el_error err = {0};
            if (el_generate(s, prompt, np, &gp, rec_tok, &rec, &st, &err) == EL_DONE_FAILED) {
                free(ta); free(tb);
                return cli_fail(&err);
            }
            const double tps = st.decode_ms > 0 ? st.n_generated * 1e3 / st.decode_ms : 0.0;
            if (!mode) {
                sum_plain += tps;
                continue;
            }
            sum_spec += tps;
            if (rec.n != ng || memcmp(ta, tb, sizeof *ta * (size_t)ng)) out->same_tokens = false;
            out->drafted += st.n_drafted, out->accepted += st.n_accepted, out->rounds += st.n_spec_rounds;
            out->plain_steps += st.n_plain_steps, out->generated += st.n_generated;
            out->last_gamma = st.spec_last_gamma;
            out->cost = st.spec_cost_ppm / 1e6;
        }
    }
    (void)o;
    free(ta);
    free(tb);
    out->ran = true;
    out->plain_tps = sum_plain / reps;
    out->spec_tps = sum_spec / reps;
    return 0;
}

static void spec_json(const spec_bench *sb) {
    fputs(",\"spec\":{\"plain_tps\":", stdout);
    cli_json_num(stdout, sb->plain_tps);
    fputs(",\"spec_tps\":", stdout);
    cli_json_num(stdout, sb->spec_tps);
    fputs(",\"speedup\":", stdout);
    cli_json_num(stdout, sb->plain_tps > 0 ? sb->spec_tps / sb->plain_tps : NAN);
    printf(",\"drafted\":%d,\"accepted\":%d,\"rounds\":%d,\"plain_steps\":%d,\"alpha\":", sb->drafted, sb->accepted,
           sb->rounds, sb->plain_steps);
    cli_json_num(stdout, sb->drafted ? (double)sb->accepted / sb->drafted : 0.0);
    fputs(",\"mean_gamma\":", stdout);
    cli_json_num(stdout, sb->rounds ? (double)sb->drafted / sb->rounds : 0.0);
    printf(",\"last_gamma\":%d,\"cost\":", sb->last_gamma);
    cli_json_num(stdout, sb->cost);
    fputs(",\"predicted_speedup\":", stdout);
    const int passes = sb->rounds + sb->plain_steps;
    cli_json_num(stdout, passes ? sb->generated / (passes + sb->drafted * sb->cost) : 0.0);
    printf(",\"same_tokens\":%s}", sb->same_tokens ? "true" : "false");
}

static int bench_one(cli_opts *o, double *pp_out, double *tg_out) {
    const int np = o->bench_n_prompt, ng = o->bench_n_gen, reps = o->bench_reps;
    const int depth = o->bench_depth;
    int n_threads = o->n_threads;
    if (n_threads <= 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = c > 0 ? (int)c : 1;
    }

    el_error err = {0};
    uint64_t wbytes = 0, fsize = 0, nparams = 0;
    if (!weight_bytes(o->model, &wbytes, &fsize, &nparams, &err)) return cli_fail(&err);

    /* --cold: drop the file's cached pages (the mapping above is gone) */
    if (o->bench_cold && el_load_evict(o->model, &err)) return cli_fail(&err);
    double resident = NAN; /* unknown when the kernel does not tell this user (memory/load.h) */
    if (el_load_resident(o->model, &resident, &err)) {
        if (err.code != EL_ERR_UNSUPPORTED) return cli_fail(&err);
        resident = NAN;
    }

    double t0 = cli_now_ms();
    el_model *m = cli_load_model(o, false, &err);
    double load_ms = cli_now_ms() - t0;
    if (!m) return cli_fail(&err);
    uint64_t rss_loaded = rss_now();
    double first_prefill_ms = NAN, first_token_ms = NAN, first_decode_ms = NAN;
    uint64_t rss_first = 0;

    int n_vocab = el_model_n_vocab(m);
    int n_tok = depth + (np > ng ? np : ng);
    if (n_tok < 1) n_tok = 1;
    el_session_params sp = el_session_default_params();
    sp.n_ctx = depth + (np > ng + 1 ? np : ng + 1) + 8;
    if (o->n_batch > 0) sp.n_batch = o->n_batch;
    sp.type_k = o->cache_type_k;
    sp.type_v = o->cache_type_v;

    int32_t *toks = malloc((size_t)n_tok * sizeof *toks);
    double *pp = calloc((size_t)reps, sizeof *pp);
    double *tg = calloc((size_t)reps, sizeof *tg);
    double *tt = calloc((size_t)reps, sizeof *tt);
    el_session *s = NULL;
    el_model *dm = NULL;    /* --draft-model */
    el_session *ds = NULL;
    el_spec_params spec;
    spec_bench sb = {0};
    el_lora *lora[CLI_MAX_LORA] = {0}; /* --lora: the adapters' products are part of what is timed */
    int code = CLI_EXIT_OK;
    if (!toks || !pp || !tg || !tt) { code = cli_failf("out of memory"); goto done; }
    if (n_vocab <= 0) { code = cli_failf("the model has no vocabulary"); goto done; }
    if ((code = cli_apply_expert_budget(o, m)) >= 0) goto done; /* --expert-budget (MoE) */
    code = CLI_EXIT_OK;
    el_expert_stats ex0 = {0}, ex1 = {0}; /* the experts' counters around the decode runs */
    const bool moe = el_model_expert_stats(m, &ex0) == 0;

    /* Fixed pseudo-random ids (xorshift64, constant seed); BOS first if any. */
    uint64_t x = 0x2545f4914f6cdd1dull;
    for (int i = 0; i < n_tok; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        toks[i] = (int32_t)(x % (uint64_t)n_vocab);
    }
    int32_t bos = el_token_bos(m);
    if (bos >= 0 && bos < n_vocab) toks[0] = bos;

    if ((code = cli_check_cache_types(o, m)) >= 0) goto done; /* before the session allocates anything */
    code = CLI_EXIT_OK;
    cli_spec_setup(o, &sp, &spec); /* --spec: the session verifies up to --draft-max drafts */
    if (spec.mode && sp.n_ctx < ng + 512) sp.n_ctx = ng + 512; /* the speculative test's prompt and output */
    if ((code = cli_lora_load(o, m, lora, &sp.lora_rank)) >= 0) goto done; /* first: the session plans their scratch */
    s = el_session_new(m, &sp, &err);
    if (!s) { code = cli_fail(&err); goto done; }
    if (spec.mode == EL_SPEC_DRAFT && (code = cli_draft_open(o, m, &sp, &spec, &dm, &ds)) >= 0) goto done;
    if ((code = cli_lora_set(o, s, lora)) >= 0) goto done;
    code = CLI_EXIT_OK;

    /* The first prompt after the load (np tokens, at least 1), then one decode
     * step: what a user waits for after a (cold) start. Also the warm-up. */
    {
        const int n1 = np > 0 ? np : 1;
        double a = cli_now_ms();
        if (el_session_eval(s, toks, n1, &err) != EL_OK) { code = cli_fail(&err); goto done; }
        int32_t next = argmax(el_session_logits(s), n_vocab);
        double b = cli_now_ms();
        if (el_session_eval(s, &next, 1, &err) != EL_OK) { code = cli_fail(&err); goto done; }
        double c = cli_now_ms();
        first_prefill_ms = b - a;
        first_token_ms = load_ms + first_prefill_ms;
        first_decode_ms = c - b;
        rss_first = rss_now();
    }

    for (int r = 0; r < reps && np > 0; r++) {
        if (depth > 0) {
            if (bench_to_depth(s, toks, depth, &err) != EL_OK) { code = cli_fail(&err); goto done; }
        } else {
            el_session_reset(s);
        }
        double a = cli_now_ms();
        if (el_session_eval(s, toks + depth, np, &err) != EL_OK) { code = cli_fail(&err); goto done; }
        double b = cli_now_ms();
        volatile int32_t first = argmax(el_session_logits(s), n_vocab);
        (void)first;
        double c = cli_now_ms();
        pp[r] = np * 1e3 / (b - a > 0 ? b - a : 1e-6);
        tt[r] = c - a;
    }
    if (moe) el_model_expert_stats(m, &ex0);
    for (int r = 0; r < reps && ng > 0; r++) {
        if (depth > 0) {
            if (bench_to_depth(s, toks, depth, &err) != EL_OK) { code = cli_fail(&err); goto done; }
        } else {
            el_session_reset(s);
            if (el_session_eval(s, toks, 1, &err) != EL_OK) { code = cli_fail(&err); goto done; }
        }
        double a = cli_now_ms();
        for (int i = 0; i < ng; i++)
            if (el_session_eval(s, &toks[depth + i], 1, &err) != EL_OK) { code = cli_fail(&err); goto done; }
        double b = cli_now_ms();
        tg[r] = ng * 1e3 / (b - a > 0 ? b - a : 1e-6);
    }

    if (moe) el_model_expert_stats(m, &ex1);
    const uint64_t dec_tokens = (uint64_t)reps * (uint64_t)(ng > 0 ? ng : 0);
    const uint64_t dh = ex1.hits - ex0.hits, dm_ = ex1.misses - ex0.misses;
    const double ex_rate = dh + dm_ ? (double)dh / (double)(dh + dm_) : NAN;
    const double ex_fault = dec_tokens ? (double)(ex1.bytes_faulted - ex0.bytes_faulted) / (double)dec_tokens : NAN;
    if (spec.mode && ng > 0 && (code = bench_spec(o, m, s, ds, &spec, ng, reps, &sb)) != 0) goto done;

    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    getrusage(RUSAGE_SELF, &ru);
    uint64_t peak_rss = (uint64_t)ru.ru_maxrss * 1024u; /* Linux: KiB */

    /* Read bandwidth: 256 MiB or 4x the last-level cache, whichever is larger.
     * Measured after the runs so the probe's buffer is not in peak RSS. */
    size_t probe = EL_MEMBW_DEFAULT_BYTES;
#ifdef _SC_LEVEL3_CACHE_SIZE
    long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (llc > 0 && (size_t)llc * 4 > probe) probe = (size_t)llc * 4;
#endif
    double bw = el_membw_read_gbs(probe, n_threads, 5);

    bench_stat spp = np > 0 ? stat_of(pp, reps) : (bench_stat){NAN, NAN};
    bench_stat stg = ng > 0 ? stat_of(tg, reps) : (bench_stat){NAN, NAN};
    bench_stat stt = np > 0 ? stat_of(tt, reps) : (bench_stat){NAN, NAN};
    double limit = (bw > 0 && wbytes > 0) ? bw * 1e9 / (double)wbytes : NAN;
    double pct = 100.0 * stg.mean / limit;

    if (o->json) {
        fputs("{\"model\":", stdout);
        const char *bn = base_name(o->model);
        cli_json_str(stdout, bn, strlen(bn));
        printf(",\"threads\":%d,\"type_k\":\"%s\",\"type_v\":\"%s\",\"depth\":%d,\"pp_tokens\":%d,\"pp_tps\":",
               n_threads, el_cache_type_name(o->cache_type_k), el_cache_type_name(o->cache_type_v), depth, np);
        cli_json_num(stdout, spp.mean);
        fputs(",\"pp_tps_sd\":", stdout);
        cli_json_num(stdout, spp.sd);
        printf(",\"tg_tokens\":%d,\"tg_tps\":", ng);
        cli_json_num(stdout, stg.mean);
        fputs(",\"tg_tps_sd\":", stdout);
        cli_json_num(stdout, stg.sd);
        fputs(",\"ttft_ms\":", stdout);
        cli_json_num(stdout, stt.mean);
        fputs(",\"load_ms\":", stdout);
        cli_json_num(stdout, load_ms);
        printf(",\"peak_rss_bytes\":%llu,\"bandwidth_gbs\":", (unsigned long long)peak_rss);
        cli_json_num(stdout, bw > 0 ? bw : NAN);
        printf(",\"weights_bytes_per_token\":%llu,\"roofline_pct\":", (unsigned long long)wbytes);
        cli_json_num(stdout, pct);
        printf(",\"load\":\"%s\",\"cold\":%s,\"resident_before_load\":", el_load_mode_name(o->load),
               o->bench_cold ? "true" : "false");
        cli_json_num(stdout, resident);
        printf(",\"first_prompt_tokens\":%d,\"first_prefill_ms\":", np > 0 ? np : 1);
        cli_json_num(stdout, first_prefill_ms);
        fputs(",\"first_token_ms\":", stdout);
        cli_json_num(stdout, first_token_ms);
        fputs(",\"first_decode_ms\":", stdout);
        cli_json_num(stdout, first_decode_ms);
        printf(",\"rss_loaded_bytes\":%llu,\"rss_first_token_bytes\":%llu", (unsigned long long)rss_loaded,
               (unsigned long long)rss_first);
        fputs(",\"backend\":", stdout);
        const char *bk = o->backend.backend ? o->backend.backend : "cpu";
        cli_json_str(stdout, bk, strlen(bk));
        /* which CPU kernels ran: the ISA level and the Q8_0/Q5_0/Q6_K arithmetic order (backend/cpu/kernels.h) */
        printf(",\"cpu_isa\":\"%s\",\"kernel_order\":\"%s\"", el_cpu_level_name(el_cpu_kernels_level()),
               el_cpu_order_name(el_cpu_kernels_order()));
        /* the weight layout that ran (backend/cpu/layout.h): flat, or the file's and the repacked ones; the
         * matrices repacked at load (and their bytes), and those run as the file stores them */
        printf(",\"weight_layout\":\"%s\",\"layout_matrices\":%d,\"layout_bytes\":%zu,\"layout_file_matrices\":%d",
               el_layout_set_name(m->layout_set), m->layout_mats, m->layout_bytes, m->layout_file_mats);
        if (sb.ran) spec_json(&sb);
        if (moe) { /* expert residency (memory/experts.h): the decode runs' hits and faults */
            printf(",\"experts\":{\"total_bytes\":%llu,\"budget_bytes\":%llu,\"resident_bytes\":%llu,"
                   "\"per_token_bytes\":%llu,\"hits\":%llu,\"misses\":%llu,\"decode_hits\":%llu,"
                   "\"decode_misses\":%llu,\"decode_hit_rate\":",
                   (unsigned long long)ex1.total_bytes, (unsigned long long)ex1.budget_bytes,
                   (unsigned long long)ex1.resident_bytes, (unsigned long long)ex1.per_token_bytes,
                   (unsigned long long)ex1.hits, (unsigned long long)ex1.misses, (unsigned long long)dh,
                   (unsigned long long)dm_);
            cli_json_num(stdout, ex_rate);
            fputs(",\"decode_bytes_faulted_per_token\":", stdout);
            cli_json_num(stdout, ex_fault);
            printf(",\"releases\":%llu,\"bytes_released\":%llu}", (unsigned long long)ex1.releases,
                   (unsigned long long)ex1.bytes_released);
        }
        fputs(",\"lora\":[", stdout);
        for (int i = 0; i < o->n_lora; i++) {
            printf("%s{\"file\":", i ? "," : "");
            cli_json_str(stdout, o->lora_path[i], strlen(o->lora_path[i]));
            printf(",\"scale\":%g,\"rank_max\":%d,\"bytes\":%zu}", (double)o->lora_scale[i], el_lora_rank_max(lora[i]),
                   el_lora_bytes(lora[i]));
        }
        printf("],\"lora_rank_planned\":%d", sp.lora_rank); /* the adapters' scratch in the session's plan */
        if (o->placement_report) {
            fputs(",\"placement\":", stdout);
            cli_print_placement(s, stdout, true);
        }
        fputs("}\n", stdout);
    } else {
        char size[32], model[160];
        fmt_size(size, sizeof size, (double)fsize);
        snprintf(model, sizeof model, "%s %s", el_model_arch(m), base_name(o->model));
        printf("| %-40s | %11s | %9s | %7s | %14s | %18s |\n", "model", "size", "params", "threads", "test", "t/s");
        printf("| %.40s | %.10s: | %.8s: | %.6s: | %.13s: | %.17s: |\n",
               "----------------------------------------", "-----------", "---------",
               "-------", "--------------", "------------------");
        char params[32], test[32], tps[48];
        snprintf(params, sizeof params, "%.2f M", (double)nparams / 1e6);
        if (np > 0) {
            if (depth > 0) snprintf(test, sizeof test, "pp%d @ d%d", np, depth);
            else snprintf(test, sizeof test, "pp%d", np);
            snprintf(tps, sizeof tps, "%.2f ± %.2f", spp.mean, spp.sd);
            printf("| %-40s | %11s | %9s | %7d | %14s | %19s |\n", model, size, params, n_threads, test, tps);
        }
        if (ng > 0) {
            if (depth > 0) snprintf(test, sizeof test, "tg%d @ d%d", ng, depth);
            else snprintf(test, sizeof test, "tg%d", ng);
            snprintf(tps, sizeof tps, "%.2f ± %.2f", stg.mean, stg.sd);
            printf("| %-40s | %11s | %9s | %7d | %14s | %19s |\n", model, size, params, n_threads, test, tps);
        }
        char res[64];
        if (isnan(resident)) snprintf(res, sizeof res, "the pages cached before it unknown to this user");
        else snprintf(res, sizeof res, "%.1f %% of the file's pages cached before it", 100.0 * resident);
        printf("\nload:     %.1f ms (--load %s%s; %s)\n", load_ms, el_load_mode_name(o->load),
               o->bench_cold ? ", --cold" : "", res);
        printf("first:    token %.1f ms (load + %d-token prefill %.1f ms + pick), first decode token %.1f ms\n",
               first_token_ms, np > 0 ? np : 1, first_prefill_ms, first_decode_ms);
        printf("RSS:      %.1f MiB after the load, %.1f MiB after the first decode token\n",
               (double)rss_loaded / (double)(1u << 20), (double)rss_first / (double)(1u << 20));
        printf("KV cache: K %s, V %s\n", el_cache_type_name(o->cache_type_k), el_cache_type_name(o->cache_type_v));
        if (np > 0) printf("TTFT:     %.1f ± %.1f ms (%d-token prompt, prefill + first token)\n", stt.mean, stt.sd, np);
        printf("peak RSS: %.1f MiB\n", (double)peak_rss / (double)(1u << 20));
        if (moe)
            printf("experts:  %.1f of %.1f MiB resident at most; decode hit rate %.1f %%, %.2f MiB faulted per token\n",
                   (double)ex1.budget_bytes / (double)(1u << 20), (double)ex1.total_bytes / (double)(1u << 20),
                   100.0 * ex_rate, ex_fault / (double)(1u << 20));
        printf("roofline: weights read per token %.1f MiB, read bandwidth %.1f GB/s → limit %.1f t/s",
               (double)wbytes / (double)(1u << 20), bw, limit);
        if (ng > 0) printf("; tg = %.1f %% of it", pct);
        putchar('\n');
        printf("kernels:  %s, Q8_0/Q5_0/Q6_K in %s order, weight layout %s", el_cpu_level_name(el_cpu_kernels_level()),
               el_cpu_order_name(el_cpu_kernels_order()), el_layout_set_name(m->layout_set));
        if (m->layout_file_mats) printf(" (%d matrices as the file stores them)", m->layout_file_mats);
        if (m->layout_mats) printf(" (%d matrices repacked at load, %.1f MiB)", m->layout_mats, (double)m->layout_bytes / (double)(1u << 20));
        putchar('\n');
        if (sb.ran) {
            const int passes = sb.rounds + sb.plain_steps;
            printf("spec:     --spec %s, %d tokens from a copy-heavy prompt: plain %.2f t/s, speculative %.2f t/s "
                   "(%.2fx; the controller predicted %.2fx), alpha %.3f, mean gamma %.2f, last gamma %d%s\n",
                   spec.mode == EL_SPEC_DRAFT ? "draft" : "ngram", ng, sb.plain_tps, sb.spec_tps,
                   sb.plain_tps > 0 ? sb.spec_tps / sb.plain_tps : 0.0,
                   passes ? sb.generated / (passes + sb.drafted * sb.cost) : 0.0,
                   sb.drafted ? (double)sb.accepted / sb.drafted : 0.0, sb.rounds ? (double)sb.drafted / sb.rounds : 0.0,
                   sb.last_gamma, sb.same_tokens ? "" : " — TOKENS DIFFER from plain decoding");
        }
        if (o->placement_report) {
            printf("\nplacement (--backend %s):\n", o->backend.backend ? o->backend.backend : "cpu");
            cli_print_placement(s, stdout, false);
        }
    }
    *pp_out = spp.mean, *tg_out = stg.mean;
    if (fflush(stdout) != 0) code = cli_failf("writing to stdout failed");

done:
    el_session_free(ds);
    el_model_free(dm);
    el_session_free(s);
    cli_lora_free(lora);
    el_model_free(m);
    free(toks);
    free(pp);
    free(tg);
    free(tt);
    return code;
}

/* --backend A/B/...: the whole benchmark once per backend, then the figures
 * side by side (the "delegate forced off" comparison in one command). */
int cli_cmd_bench(cli_opts *o) {
    const char *list = o->backend.backend;
    if (!list || !strchr(list, '/')) {
        double pp, tg;
        return bench_one(o, &pp, &tg);
    }
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    const char *names[8];
    double pp[8], tg[8];
    int n = 0;
    for (char *save = NULL, *t = strtok_r(buf, "/", &save); t && n < 8; t = strtok_r(NULL, "/", &save)) names[n++] = t;
    for (int i = 0; i < n; i++) {
        o->backend.backend = names[i];
        if (!o->json) printf("%s== --backend %s ==\n", i ? "\n" : "", names[i]);
        const int rc = bench_one(o, &pp[i], &tg[i]);
        if (rc != CLI_EXIT_OK) return rc;
    }
    o->backend.backend = list;
    if (!o->json) {
        printf("\nside by side (ratios against --backend %s):\n", names[n - 1]);
        printf("| %-14s | %12s | %7s | %12s | %7s |\n", "backend", "pp t/s", "ratio", "tg t/s", "ratio");
        printf("| %.14s | %.11s: | %.6s: | %.11s: | %.6s: |\n", "--------------", "------------", "-------",
               "------------", "-------");
        for (int i = 0; i < n; i++)
            printf("| %-14s | %12.2f | %7.3f | %12.2f | %7.3f |\n", names[i], pp[i], pp[i] / pp[n - 1], tg[i],
                   tg[i] / tg[n - 1]);
    }
    return CLI_EXIT_OK;
}
