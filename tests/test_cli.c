/*
 * test_cli.c — runs the built `edgellm` binary (EL_CLI_PATH) and checks its
 * observable behaviour: tokenize against llama.cpp's vectors, run --json
 * against llama.cpp's greedy goldens, run --json lines valid UTF-8 when
 * tokens split characters, info, exit codes of bad usage and library
 * errors, special files (device, FIFO, directory, socket) refused at once,
 * chat: typed control-token text stays text.
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "edgellm.h"

#include "testutil.h"

#ifndef EL_CLI_PATH
#error "EL_CLI_PATH must name the built edgellm binary"
#endif

static char g_tmp_path[64];

/* Writes text to a temporary file; returns its path (valid until the next call). */
static const char *write_tmp(const char *text, size_t len) {
    if (g_tmp_path[0]) unlink(g_tmp_path);
    strcpy(g_tmp_path, "/tmp/el_test_cli_XXXXXX");
    int fd = mkstemp(g_tmp_path);
    if (fd < 0) return NULL;
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(fd, text + off, len - off);
        if (w <= 0) break;
        off += (size_t)w;
    }
    close(fd);
    return g_tmp_path;
}

/* Parses "[1, 2, 3]" (the tokenize output) into ids; returns count or -1. */
static int parse_id_array(const char *s, int32_t *ids, int cap) {
    cJSON *j = cJSON_Parse(s);
    if (!j || !cJSON_IsArray(j)) { cJSON_Delete(j); return -1; }
    int n = 0;
    cJSON *e;
    cJSON_ArrayForEach(e, j) {
        if (!cJSON_IsNumber(e) || n >= cap) { cJSON_Delete(j); return -1; }
        ids[n++] = (int32_t)e->valuedouble;
    }
    cJSON_Delete(j);
    return n;
}

/* Parses a line of space-separated ids. */
static int parse_id_line(const char *s, size_t len, int32_t *ids, int cap) {
    int n = 0;
    size_t i = 0;
    while (i < len) {
        while (i < len && s[i] == ' ') i++;
        if (i >= len) break;
        long v = 0;
        while (i < len && s[i] >= '0' && s[i] <= '9') v = v * 10 + (s[i++] - '0');
        if (n < cap) ids[n] = (int32_t)v;
        n++;
        while (i < len && s[i] != ' ') i++;
    }
    return n;
}

static bool same_ids(const int32_t *a, int na, const int32_t *b, int nb) {
    return na == nb && (na == 0 || memcmp(a, b, (size_t)na * sizeof *a) == 0);
}

/* ---- tokenize: llama.cpp's GPT-2 vectors ---- */
static void test_tokenize_gpt2(void) {
    char vocab[4096], inp_path[4200], out_path[4200];
    snprintf(vocab, sizeof vocab, "%s", el_test_ref_path("tokenizer/ggml-vocab-gpt-2.gguf"));
    snprintf(inp_path, sizeof inp_path, "%s.inp", vocab);
    snprintf(out_path, sizeof out_path, "%s.out", vocab);
    char *inp = el_test_read_file(inp_path, NULL);
    char *out = el_test_read_file(out_path, NULL);
    CHECK(inp && out);
    if (!inp || !out) { free(inp); free(out); return; }

    static const char SEP[] = "\n__ggml_vocab_test__\n";
    const char *p = inp, *o = out;
    int n_cases = 0, n_ok = 0;
    for (;;) {
        const char *end = strstr(p, SEP);
        if (!end) break; /* the text after the last separator is not a case */
        const char *oe = strchr(o, '\n');
        if (!oe) oe = o + strlen(o);
        int32_t want[512], got[512];
        int nw = parse_id_line(o, (size_t)(oe - o), want, 512);

        const char *path = write_tmp(p, (size_t)(end - p));
        const char *args[] = {"tokenize", "-m", vocab, "-f", path, "--no-bos", "--no-parse-special", NULL};
        el_test_proc r;
        CHECK(path && el_test_run_cli(args, &r));
        n_cases++;
        int ng = r.out ? parse_id_array(r.out, got, 512) : -1;
        CHECKF(r.status == 0 && same_ids(got, ng, want, nw),
               "gpt-2 case %d (%.*s): exit %d, got %s%s", n_cases, (int)(end - p > 40 ? 40 : end - p), p,
               r.status, r.out ? r.out : "(null)", r.err ? r.err : "");
        if (r.status == 0 && same_ids(got, ng, want, nw)) n_ok++;
        el_test_proc_free(&r);
        p = end + strlen(SEP);
        o = *oe ? oe + 1 : oe;
    }
    printf("tokenize gpt-2: %d/%d cases match llama.cpp\n", n_ok, n_cases);
    CHECK(n_cases > 40);
    free(inp);
    free(out);
}

/* ---- golden of tiny-llama-F16 ---- */
typedef struct golden {
    cJSON *root;
    const char *prompt;
    int32_t ptoks[512];
    int n_ptoks;
    cJSON *steps;
} golden;

static bool load_golden(golden *g) {
    memset(g, 0, sizeof *g);
    char *txt = el_test_read_file(el_test_ref_path("goldens/tiny-llama-F16.json"), NULL);
    if (!txt) return false;
    g->root = cJSON_Parse(txt);
    free(txt);
    cJSON *cases = cJSON_GetObjectItem(g->root, "cases");
    cJSON *c0 = cJSON_GetArrayItem(cases, 0);
    cJSON *pr = cJSON_GetObjectItem(c0, "prompt");
    cJSON *pt = cJSON_GetObjectItem(c0, "prompt_tokens");
    g->steps = cJSON_GetObjectItem(c0, "steps");
    if (!cJSON_IsString(pr) || !cJSON_IsArray(pt) || !cJSON_IsArray(g->steps)) return false;
    g->prompt = pr->valuestring;
    cJSON *e;
    cJSON_ArrayForEach(e, pt) {
        if (g->n_ptoks < 512) g->ptoks[g->n_ptoks++] = (int32_t)e->valuedouble;
    }
    return g->n_ptoks > 0;
}

static void test_tokenize_llama(const golden *g, const char *model) {
    int32_t got[512];
    /* -f, special-token parsing off: exactly how the golden was made. */
    const char *path = write_tmp(g->prompt, strlen(g->prompt));
    const char *a1[] = {"tokenize", "-m", model, "-f", path, "--no-parse-special", NULL};
    el_test_proc r;
    CHECK(el_test_run_cli(a1, &r));
    int n = parse_id_array(r.out ? r.out : "", got, 512);
    CHECKF(r.status == 0 && same_ids(got, n, g->ptoks, g->n_ptoks), "tiny-llama -f: exit %d, out %s err %s",
           r.status, r.out, r.err);
    el_test_proc_free(&r);
    /* -p with the defaults (escapes and special parsing on: the prompt has neither). */
    const char *a2[] = {"tokenize", "-m", model, "-p", g->prompt, NULL};
    CHECK(el_test_run_cli(a2, &r));
    n = parse_id_array(r.out ? r.out : "", got, 512);
    CHECKF(r.status == 0 && same_ids(got, n, g->ptoks, g->n_ptoks), "tiny-llama -p: exit %d, out %s err %s",
           r.status, r.out, r.err);
    el_test_proc_free(&r);
    /* --no-bos drops the leading BOS. */
    const char *a3[] = {"tokenize", "-m", model, "-p", g->prompt, "--no-bos", NULL};
    CHECK(el_test_run_cli(a3, &r));
    n = parse_id_array(r.out ? r.out : "", got, 512);
    CHECKF(r.status == 0 && g->n_ptoks > 1 && same_ids(got, n, g->ptoks + 1, g->n_ptoks - 1),
           "tiny-llama --no-bos: exit %d, out %s", r.status, r.out);
    el_test_proc_free(&r);
}

static double margin_at(cJSON *step) {
    cJSON *top = cJSON_GetObjectItem(step, "top");
    cJSON *t0 = cJSON_GetArrayItem(top, 0), *t1 = cJSON_GetArrayItem(top, 1);
    if (!t0 || !t1) return INFINITY;
    return cJSON_GetArrayItem(t0, 1)->valuedouble - cJSON_GetArrayItem(t1, 1)->valuedouble;
}

static void test_run_json(const golden *g, const char *model) {
    const char *path = write_tmp(g->prompt, strlen(g->prompt));
    const char *args[] = {"run", "-m", model, "--allow-unsigned", "-f", path, "--json", "--temp", "0", "-n", "8",
                          "--top-logprobs", "3", "--no-parse-special", "--seed", "1", NULL};
    el_test_proc r;
    CHECK(el_test_run_cli(args, &r));
    CHECKF(r.status == 0, "run --json exit %d: %s", r.status, r.err ? r.err : "");
    if (!r.out) return;

    char text[4096] = {0};
    size_t tlen = 0;
    int n_lines = 0, n_tok = 0;
    bool compare = true, saw_done = false;
    char *save = NULL;
    for (char *line = strtok_r(r.out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        n_lines++;
        cJSON *j = cJSON_Parse(line);
        CHECKF(j != NULL, "line %d is not JSON: %s", n_lines, line);
        if (!j) continue;
        cJSON *done = cJSON_GetObjectItem(j, "done");
        if (done) {
            saw_done = true;
            CHECK(cJSON_IsTrue(done));
            cJSON *fin = cJSON_GetObjectItem(j, "finish");
            CHECKF(cJSON_IsString(fin) && !strcmp(fin->valuestring, "length"), "finish: %s", line);
            cJSON *np = cJSON_GetObjectItem(j, "n_prompt"), *ng = cJSON_GetObjectItem(j, "n_generated");
            CHECKF(cJSON_IsNumber(np) && (int)np->valuedouble == g->n_ptoks, "n_prompt: %s", line);
            CHECKF(cJSON_IsNumber(ng) && (int)ng->valuedouble == 8, "n_generated: %s", line);
            static const char *nums[] = {"prefill_ms", "decode_ms", "ttft_ms", "prompt_tps", "decode_tps"};
            for (int k = 0; k < 5; k++) CHECKF(cJSON_IsNumber(cJSON_GetObjectItem(j, nums[k])), "%s missing", nums[k]);
            cJSON_Delete(j);
            continue;
        }
        CHECKF(!saw_done, "token line after the final line");
        if (cJSON_IsTrue(cJSON_GetObjectItem(j, "flush"))) { /* held-back text, not a token */
            cJSON *fp = cJSON_GetObjectItem(j, "piece");
            CHECK(cJSON_IsString(fp));
            size_t pl = cJSON_IsString(fp) ? strlen(fp->valuestring) : 0;
            if (pl && tlen + pl < sizeof text) { memcpy(text + tlen, fp->valuestring, pl); tlen += pl; }
            n_lines--;
            cJSON_Delete(j);
            continue;
        }
        cJSON *id = cJSON_GetObjectItem(j, "id"), *piece = cJSON_GetObjectItem(j, "piece");
        cJSON *lp = cJSON_GetObjectItem(j, "logprob"), *top = cJSON_GetObjectItem(j, "top");
        CHECKF(cJSON_IsNumber(id) && cJSON_IsString(piece) && cJSON_IsNumber(lp) && cJSON_IsArray(top),
               "token line fields: %s", line);
        if (cJSON_IsString(piece)) {
            size_t pl = strlen(piece->valuestring);
            if (tlen + pl < sizeof text) { memcpy(text + tlen, piece->valuestring, pl); tlen += pl; }
        }
        CHECKF(cJSON_GetArraySize(top) == 3, "top size: %s", line);
        cJSON *t0 = cJSON_GetArrayItem(top, 0);
        if (cJSON_IsNumber(id) && cJSON_IsArray(t0))
            CHECKF((int)cJSON_GetArrayItem(t0, 0)->valuedouble == (int)id->valuedouble, "greedy id is not top-1: %s", line);
        cJSON *step = cJSON_GetArrayItem(g->steps, n_tok);
        if (compare && step && cJSON_IsNumber(id) && cJSON_IsNumber(lp)) {
            int want = (int)cJSON_GetObjectItem(step, "id")->valuedouble;
            double want_lp = cJSON_GetObjectItem(step, "logprob")->valuedouble;
            if ((int)id->valuedouble != want) {
                double mg = margin_at(step);
                CHECKF(mg < 0.05, "step %d: id %d, llama.cpp %d (margin %.4f)", n_tok, (int)id->valuedouble, want, mg);
                compare = false; /* an equally valid choice: the rest may differ */
            } else {
                CHECKF(fabs(lp->valuedouble - want_lp) < 0.05, "step %d: logprob %.5f, llama.cpp %.5f", n_tok,
                       lp->valuedouble, want_lp);
            }
        }
        n_tok++;
        cJSON_Delete(j);
    }
    CHECKF(n_tok == 8 && saw_done && n_lines == 9, "lines: %d tokens, done %d, %d lines", n_tok, saw_done, n_lines);
    el_test_proc_free(&r);

    /* Plain run: the streamed text equals the concatenated pieces. */
    const char *a2[] = {"run", "-m", model, "--allow-unsigned", "-f", path, "--temp", "0", "-n", "8",
                          "--no-parse-special", NULL};
    CHECK(el_test_run_cli(a2, &r));
    CHECKF(r.status == 0 && r.out && r.out_len == tlen && memcmp(r.out, text, tlen) == 0,
           "plain run: exit %d, text '%s' vs json pieces '%s'", r.status, r.out ? r.out : "", text);
    CHECKF(r.err && strstr(r.err, "eval"), "no timings on stderr: %s", r.err ? r.err : "");
    el_test_proc_free(&r);
}

/* Strict UTF-8 (RFC 3629: no overlongs, no surrogates, nothing above
 * U+10FFFF), written apart from the CLI's own check. */
static bool utf8_valid(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i], len, cp;
        if (c < 0x80) { i++; continue; }
        if ((c & 0xE0) == 0xC0) { len = 2; cp = c & 0x1F; }
        else if ((c & 0xF0) == 0xE0) { len = 3; cp = c & 0x0F; }
        else if ((c & 0xF8) == 0xF0) { len = 4; cp = c & 0x07; }
        else return false;
        if (i + len > n) return false;
        for (unsigned k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        static const unsigned min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < min_cp[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
        i += len;
    }
    return true;
}

/* run --json at a high temperature with a fixed seed, where the tiny llama
 * samples byte tokens that split or break characters (seed 21: a stray
 * continuation byte 0x91 as a token; seed 9: the run ends on the lead byte
 * 0xEF, released by the final flush line). Every line must be valid JSON in
 * valid UTF-8 (json.loads strictness: the bytes are checked before cJSON,
 * which does not check UTF-8), "bytes" must hold each piece's exact bytes,
 * their concatenation must equal the plain run's output, and "piece" must be
 * the bytes themselves when they are valid UTF-8. */
static int run_json_utf8_case(const char *model, const char *seed) {
    const char *args[] = {"run", "-m", model, "--allow-unsigned", "-p", "你好世界", "--json", "--temp", "1.5",
                          "--top-k", "0", "--top-p", "1", "--min-p", "0", "--seed", seed, "-n", "17", NULL};
    el_test_proc r;
    CHECK(el_test_run_cli(args, &r));
    CHECKF(r.status == 0, "seed %s: run --json exit %d: %s", seed, r.status, r.err ? r.err : "");
    if (!r.out) return 0;
    unsigned char *cat = malloc(r.out_len + 1);
    size_t ncat = 0;
    int n_broken = 0, n_lines = 0;
    char *save = NULL;
    for (char *line = strtok_r(r.out, "\n", &save); line && cat; line = strtok_r(NULL, "\n", &save)) {
        n_lines++;
        CHECKF(utf8_valid((const unsigned char *)line, strlen(line)), "seed %s line %d is not valid UTF-8: %s", seed,
               n_lines, line);
        cJSON *j = cJSON_Parse(line);
        CHECKF(j != NULL, "seed %s line %d is not JSON: %s", seed, n_lines, line);
        if (!j) continue;
        if (!cJSON_GetObjectItem(j, "done")) {
            cJSON *piece = cJSON_GetObjectItem(j, "piece"), *bytes = cJSON_GetObjectItem(j, "bytes");
            CHECKF(cJSON_IsString(piece) && cJSON_IsArray(bytes), "seed %s: piece/bytes missing: %s", seed, line);
            unsigned char b[512];
            size_t nb = 0;
            cJSON *e;
            cJSON_ArrayForEach(e, bytes) {
                CHECKF(cJSON_IsNumber(e) && e->valuedouble >= 0 && e->valuedouble <= 255 && nb < sizeof b,
                       "seed %s: bad bytes: %s", seed, line);
                if (nb < sizeof b) b[nb++] = (unsigned char)e->valuedouble;
            }
            memcpy(cat + ncat, b, nb);
            ncat += nb;
            if (utf8_valid(b, nb)) {
                CHECKF(cJSON_IsString(piece) && strlen(piece->valuestring) == nb && !memcmp(piece->valuestring, b, nb),
                       "seed %s: piece differs from its valid bytes: %s", seed, line);
            } else {
                n_broken++;
                CHECKF(cJSON_IsString(piece) && strstr(piece->valuestring, "\xEF\xBF\xBD"),
                       "seed %s: no U+FFFD for broken bytes: %s", seed, line);
            }
        }
        cJSON_Delete(j);
    }
    el_test_proc_free(&r);

    const char *plain[] = {"run", "-m", model, "--allow-unsigned", "-p", "你好世界", "--temp", "1.5", "--top-k", "0",
                           "--top-p", "1", "--min-p", "0", "--seed", seed, "-n", "17", NULL};
    CHECK(el_test_run_cli(plain, &r));
    CHECKF(r.status == 0 && cat && r.out && r.out_len == ncat && !memcmp(r.out, cat, ncat),
           "seed %s: plain output (%zu bytes) differs from the concatenated bytes (%zu)", seed, r.out_len, ncat);
    el_test_proc_free(&r);
    free(cat);
    return n_broken;
}

static void test_run_json_utf8(const char *model) {
    int b21 = run_json_utf8_case(model, "21"), b9 = run_json_utf8_case(model, "9");
    /* both cases must still break a character, or they test nothing */
    CHECKF(b21 >= 1 && b9 >= 1, "no line with broken UTF-8 bytes (seed 21: %d, seed 9: %d)", b21, b9);
}

/* Runs the CLI with a 10 s limit and checks it refused promptly: exit status
 * `want` (or any failure if want < 0), stderr naming `path` and `kind`. */
static void expect_refused(const char *const *args, int want, const char *path, const char *kind) {
    el_test_proc r;
    CHECK(el_test_run_cli_timeout(args, 10.0, &r));
    char cmd[512] = "";
    for (int i = 0; args[i] && strlen(cmd) < 400; i++) { strcat(cmd, args[i]); strcat(cmd, " "); }
    CHECKF(!r.timed_out, "'%s' hung (killed after 10 s)", cmd);
    CHECKF(!r.timed_out && (want < 0 ? r.status != 0 : r.status == want), "'%s': exit %d, want %d", cmd, r.status, want);
    CHECKF(r.err && strstr(r.err, path) && strstr(r.err, kind), "'%s': stderr does not name %s as %s: %s", cmd, path,
           kind, r.err ? r.err : "");
    el_test_proc_free(&r);
}

/* Special files in place of a model, manifest, key or HF checkpoint file:
 * /dev/zero (endless: hashing it never ended), a FIFO (open() blocked), a
 * symlink to /dev/zero, a directory, a socket. Each is refused at once with
 * the path and what it is; a hang is killed after 10 s and fails. */
static void test_special_files(const char *model) {
    char dir[] = "/tmp/el_test_special_XXXXXX";
    if (!mkdtemp(dir)) { CHECK(0); return; }
    char fifo[128], zlink[128], sub[128], sock[128], mlink[128], mfest[128], hf[128], hfcfg[128], out[128];
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    snprintf(zlink, sizeof zlink, "%s/zero-link", dir);
    snprintf(sub, sizeof sub, "%s/dir", dir);
    snprintf(sock, sizeof sock, "%s/sock", dir);
    snprintf(mlink, sizeof mlink, "%s/m.gguf", dir);
    snprintf(mfest, sizeof mfest, "%s/m.gguf.manifest.json", dir);
    snprintf(hf, sizeof hf, "%s/hf", dir);
    snprintf(hfcfg, sizeof hfcfg, "%s/hf/config.json", dir);
    snprintf(out, sizeof out, "%s/out.gguf", dir);
    CHECK(mkfifo(fifo, 0600) == 0);
    CHECK(symlink("/dev/zero", zlink) == 0);
    CHECK(mkdir(sub, 0700) == 0);
    int sfd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(sock) < sizeof sa.sun_path) memcpy(sa.sun_path, sock, strlen(sock) + 1);
    CHECK(sfd >= 0 && bind(sfd, (struct sockaddr *)&sa, sizeof sa) == 0);

    const struct { const char *path, *kind; } cases[] = {
        {"/dev/zero", "character device"}, {fifo, "FIFO"}, {zlink, "character device"},
        {sub, "directory"}, {sock, "socket"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *p = cases[i].path, *k = cases[i].kind;
        const char *info[] = {"info", "-m", p, NULL};
        const char *run[] = {"run", "-m", p, "--allow-unsigned", "-p", "hi", "-n", "1", NULL};
        const char *serve[] = {"serve", "-m", p, "--allow-unsigned", "--port", "0", NULL};
        const char *tok[] = {"tokenize", "-m", p, "-p", "hi", NULL};
        expect_refused(info, 1, p, k);
        expect_refused(run, 1, p, k);
        expect_refused(serve, 1, p, k);
        expect_refused(tok, 1, p, k);
    }

    /* a FIFO as the manifest beside a model, and as the public key */
    CHECK(symlink(model, mlink) == 0);
    CHECK(mkfifo(mfest, 0600) == 0);
    const char *run_m[] = {"run", "-m", mlink, "--allow-unsigned", "-p", "hi", "-n", "1", NULL};
    expect_refused(run_m, -1, mfest, "FIFO");
    const char *verify_k[] = {"verify", "--pub", fifo, model, NULL};
    expect_refused(verify_k, -1, fifo, "FIFO");
    /* a FIFO as an HF checkpoint's config.json */
    CHECK(mkdir(hf, 0700) == 0 && mkfifo(hfcfg, 0600) == 0);
    const char *pack[] = {"pack", hf, "-o", out, "-q", NULL};
    expect_refused(pack, -1, hfcfg, "FIFO");

    if (sfd >= 0) close(sfd);
    const char *rm[] = {fifo, zlink, sock, mlink, mfest, hfcfg, out};
    for (size_t i = 0; i < sizeof rm / sizeof rm[0]; i++) unlink(rm[i]);
    rmdir(hf);
    rmdir(sub);
    rmdir(dir);
}

/* Number of ids in `tokenize` output "[1, 2, 3]", or -1. */
static int count_ids(const char *out) {
    int32_t ids[256];
    return out ? parse_id_array(out, ids, 256) : -1;
}

/* Tokens `chat -v` says it fed for the first turn, or -1. */
static int chat_fed(const char *err) {
    const char *p = err ? strstr(err, "tokens kept in the KV cache, ") : NULL;
    return p ? atoi(p + strlen("tokens kept in the KV cache, ")) : -1;
}

/* `edgellm chat`: a typed "</s>" (the tiny llama's EOS, a control token, in
 * the llama2 template the model falls back to) is text — the turn is fed as
 * the tokens of "[INST] x</s>y [/INST]" without special parsing — and with
 * --trust-chat-special it becomes the EOS token (the old behaviour). */
static void test_chat_plain_content(const char *model) {
    const char *rendered = "[INST] x</s>y [/INST]";
    el_test_proc r;
    const char *tp[] = {"tokenize", "-m", model, "-p", rendered, "--no-parse-special", NULL};
    const char *ts[] = {"tokenize", "-m", model, "-p", rendered, NULL};
    CHECK(el_test_run_cli(tp, &r));
    int n_plain = count_ids(r.out);
    el_test_proc_free(&r);
    CHECK(el_test_run_cli(ts, &r));
    int n_special = count_ids(r.out);
    el_test_proc_free(&r);
    CHECKF(n_plain > n_special && n_special > 0, "tokenize: %d plain, %d special", n_plain, n_special);

    const char *chat[] = {"chat", "-m", model, "--allow-unsigned", "-v", "-n", "1", "--temp", "0", NULL};
    CHECK(el_test_run_cli_input(chat, "x</s>y\n", &r));
    CHECKF(r.status == 0 && r.err && strstr(r.err, "chat template: llama2"), "chat: exit %d: %s", r.status,
           r.err ? r.err : "");
    CHECKF(chat_fed(r.err) == n_plain, "chat fed %d tokens, want %d (content as text)", chat_fed(r.err), n_plain);
    el_test_proc_free(&r);
    const char *trusted[] = {"chat", "-m", model, "--allow-unsigned", "-v", "-n", "1", "--temp", "0",
                             "--trust-chat-special", NULL};
    CHECK(el_test_run_cli_input(trusted, "x</s>y\n", &r));
    CHECKF(r.status == 0 && chat_fed(r.err) == n_special, "chat --trust-chat-special: exit %d, fed %d tokens, want %d",
           r.status, chat_fed(r.err), n_special);
    el_test_proc_free(&r);

    /* --chat-template-file: a Jinja template renders the chat (message content still text); one that does
     * not parse is refused naming line and column; it excludes --chat-template */
    char tpath[] = "/tmp/el_test_cli_tmpl_XXXXXX";
    int tfd = mkstemp(tpath);
    const char *tsrc = "{% for m in messages %}[INST] {{ m.content | trim }} [/INST]{% endfor %}";
    CHECK(tfd >= 0 && write(tfd, tsrc, strlen(tsrc)) == (ssize_t)strlen(tsrc));
    if (tfd >= 0) close(tfd);
    const char *jchat[] = {"chat", "-m", model, "--allow-unsigned", "-v", "-n", "1", "--temp", "0",
                           "--chat-template-file", tpath, NULL};
    CHECK(el_test_run_cli_input(jchat, "x</s>y\n", &r));
    CHECKF(r.status == 0 && r.err && strstr(r.err, "(Jinja, from --chat-template-file)") && chat_fed(r.err) > 0,
           "chat --chat-template-file: exit %d: %s", r.status, r.err ? r.err : "");
    el_test_proc_free(&r);
    FILE *tf = fopen(tpath, "w");
    if (tf) { fputs("ok\n{% if x %}", tf); fclose(tf); }
    CHECK(el_test_run_cli_input(jchat, "x\n", &r));
    CHECKF(r.status != 0 && r.err && strstr(r.err, "line 2, column"), "bad template file: exit %d: %s", r.status,
           r.err ? r.err : "");
    el_test_proc_free(&r);
    const char *both[] = {"chat", "-m", model, "--allow-unsigned", "--chat-template", "chatml",
                          "--chat-template-file", tpath, NULL};
    CHECK(el_test_run_cli_input(both, "x\n", &r));
    CHECKF(r.status == 2, "--chat-template with --chat-template-file: exit %d", r.status);
    el_test_proc_free(&r);
    /* special files and a huge file: refused at once, naming the path (no hang on a FIFO with no
     * writer, no endless read of /dev/zero, no 5 MB template read) */
    char fifo[] = "/tmp/el_test_cli_fifo_XXXXXX";
    int ffd = mkstemp(fifo);
    if (ffd >= 0) close(ffd), unlink(fifo);
    CHECK(mkfifo(fifo, 0600) == 0);
    FILE *big = fopen(tpath, "w");
    for (int i = 0; big && i < (5 << 20) / 64; i++) fputs("{# a comment line padding the template past its limit #}\n", big);
    if (big) fclose(big);
    const char *specials[][2] = {{fifo, fifo}, {"/dev/zero", "/dev/zero"}, {"/tmp", "/tmp"}, {tpath, "larger than"}};
    for (int i = 0; i < 4; i++) {
        const char *sp[] = {"chat", "-m", model, "--allow-unsigned", "-n", "1", "--chat-template-file", specials[i][0], NULL};
        CHECK(el_test_run_cli_timeout(sp, 20, &r));
        CHECKF(r.status != 0 && !r.timed_out && r.err && strstr(r.err, specials[i][1]),
               "--chat-template-file %s: exit %d%s: %s", specials[i][0], r.status, r.timed_out ? " (timed out)" : "",
               r.err ? r.err : "");
        el_test_proc_free(&r);
    }
    unlink(fifo);
    unlink(tpath);
}

static void test_info(const char *model) {
    const char *args[] = {"info", "-m", model, NULL};
    el_test_proc r;
    CHECK(el_test_run_cli(args, &r));
    CHECKF(r.status == 0, "info exit %d: %s", r.status, r.err ? r.err : "");
    CHECKF(r.out && strstr(r.out, "token_embd.weight"), "info lacks token_embd.weight");
    CHECK(r.out && strstr(r.out, "general.architecture = \"llama\""));
    CHECK(r.out && strstr(r.out, "parameters:"));
    el_test_proc_free(&r);
}

static void test_errors(const char *model) {
    el_test_proc r;
    const char *bad_flag[] = {"run", "-m", model, "-p", "hi", "--no-such-flag", NULL};
    CHECK(el_test_run_cli(bad_flag, &r));
    CHECKF(r.status == 2, "bad flag: exit %d", r.status);
    CHECK(r.err && strstr(r.err, "--no-such-flag"));
    el_test_proc_free(&r);

    const char *bad_num[] = {"run", "-m", model, "-p", "hi", "-n", "lots", NULL};
    CHECK(el_test_run_cli(bad_num, &r));
    CHECKF(r.status == 2, "bad number: exit %d", r.status);
    el_test_proc_free(&r);

    const char *no_prompt[] = {"run", "-m", model, NULL};
    CHECK(el_test_run_cli(no_prompt, &r));
    CHECKF(r.status == 2, "no prompt: exit %d", r.status);
    el_test_proc_free(&r);

    const char *bad_cmd[] = {"frobnicate", NULL};
    CHECK(el_test_run_cli(bad_cmd, &r));
    CHECKF(r.status == 2, "bad command: exit %d", r.status);
    el_test_proc_free(&r);

    const char *none[] = {NULL};
    CHECK(el_test_run_cli(none, &r));
    CHECKF(r.status == 2 && r.err && strstr(r.err, "usage"), "no args: exit %d", r.status);
    el_test_proc_free(&r);

    const char *missing[] = {"tokenize", "-m", "/nonexistent/dir/model.gguf", "-p", "hi", NULL};
    CHECK(el_test_run_cli(missing, &r));
    CHECKF(r.status == 1 && r.err && strstr(r.err, "error:"), "missing model: exit %d, stderr %s", r.status,
           r.err ? r.err : "");
    el_test_proc_free(&r);

    const char *missing_run[] = {"run", "-m", "/nonexistent/dir/model.gguf", "--allow-unsigned", "-p", "hi", NULL};
    CHECK(el_test_run_cli(missing_run, &r));
    CHECKF(r.status == 1 && r.err && strstr(r.err, "error:"), "missing model (run): exit %d", r.status);
    el_test_proc_free(&r);

    const char *version[] = {"--version", NULL};
    CHECK(el_test_run_cli(version, &r));
    CHECK(r.status == 0 && r.out && strstr(r.out, EL_VERSION_STRING));
    el_test_proc_free(&r);

    const char *help[] = {"help", NULL};
    CHECK(el_test_run_cli(help, &r));
    CHECK(r.status == 0 && r.out && strstr(r.out, "tokenize"));
    el_test_proc_free(&r);
}

int main(void) {
    if (!el_test_have_ref()) el_test_skip("fixtures absent (make fixtures)");
    if (access(EL_CLI_PATH, X_OK) != 0) {
        fprintf(stderr, "the CLI binary %s is missing\n", EL_CLI_PATH);
        return 1;
    }
    char model[4096];
    snprintf(model, sizeof model, "%s", el_test_ref_path("models/tiny-llama-F16.gguf"));

    test_errors(model);
    test_special_files(model);
    test_tokenize_gpt2();
    golden g;
    CHECK(load_golden(&g));
    if (g.root && g.prompt) {
        test_tokenize_llama(&g, model);
        test_run_json(&g, model);
    }
    test_run_json_utf8(model);
    test_chat_plain_content(model);
    cJSON_Delete(g.root);
    test_info(model);
    if (g_tmp_path[0]) unlink(g_tmp_path);
    return el_test_finish("test_cli");
}
