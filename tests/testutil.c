#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>

int el_test_failures = 0;
int el_test_checks = 0;

const char *el_test_ref_path(const char *rel) {
    static char buf[4096];
    const char *base = getenv("EL_FIXTURE_DIR");
    if (!base || !*base) base = EL_FIXTURE_DIR;
    snprintf(buf, sizeof buf, "%s/reference/%s", base, rel);
    return buf;
}

static bool under_ci(void) {
    const char *ci = getenv("CI");
    return ci && (!strcmp(ci, "true") || !strcmp(ci, "1") || !strcmp(ci, "yes"));
}

int el_test_have_ref(void) {
    struct stat st;
    if (stat(el_test_ref_path("README.md"), &st) == 0) return 1;
    if (under_ci()) {
        printf("FAIL: fixtures missing under CI=true: %s (run `make fixtures`)\n", el_test_ref_path("README.md"));
        printf("0 passed, 1 failed\n");
        exit(1);
    }
    return 0;
}

bool el_test_vocab_refused(const char *name) {
    static const char *const refused[] = {"ggml-vocab-bert-bge.gguf", "ggml-vocab-gemma-4.gguf",
                                          "ggml-vocab-nomic-bert-moe.gguf", "ggml-vocab-qwen35.gguf"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        if (!strcmp(name, refused[i])) return true;
    return false;
}

void el_test_skip_hw(const char *why) {
    printf("SKIPPED (needs hardware this machine lacks): %s\n", why);
    exit(77);
}

void el_test_skip(const char *why) {
    printf("SKIPPED: %s\n", why);
    exit(77);
}

static char *read_fd_until(int fd, size_t *len, double deadline, bool *expired);

char *el_test_read_fd(int fd, size_t *len) { return read_fd_until(fd, len, 0, NULL); }

char *el_test_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (!b) { fclose(f); return NULL; }
    size_t r = fread(b, 1, (size_t)n, f);
    fclose(f);
    b[r] = 0;
    if (len) *len = r;
    return b;
}

static int cmp_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int el_test_list_json(const char *dir, const char *filter, char **names, int cap) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < cap) {
        size_t L = strlen(de->d_name);
        if (L > 5 && strcmp(de->d_name + L - 5, ".json") == 0 && (!filter || strstr(de->d_name, filter)))
            names[n++] = strdup(de->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof names[0], cmp_name);
    return n;
}

int el_test_finish(const char *name) {
    printf("%s: %d checks, %d failed\n", name, el_test_checks, el_test_failures);
    return el_test_failures ? 1 : 0;
}

bool el_test_run(const char *exe, const char *const *args, el_test_proc *r) {
    return el_test_run_timeout(exe, args, 0, r);
}

/* Reads fd to EOF into a NUL-terminated malloc'd buffer; with a deadline > 0
 * it gives up there (*expired set, what was read so far returned). */
static char *read_fd_until(int fd, size_t *len, double deadline, bool *expired) {
    size_t cap = 4096, n = 0;
    char *b = malloc(cap);
    if (!b) return NULL;
    for (;;) {
        if (n + 1 >= cap) {
            char *p = realloc(b, cap *= 2);
            if (!p) { free(b); return NULL; }
            b = p;
        }
        if (deadline > 0) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            double left = deadline - ((double)ts.tv_sec + ts.tv_nsec / 1e9);
            struct pollfd pfd = {.fd = fd, .events = POLLIN};
            int pr = left > 0 ? poll(&pfd, 1, (int)(left * 1000) + 1) : 0;
            if (pr < 0 && errno == EINTR) continue;
            if (pr == 0) { *expired = true; break; }
        }
        ssize_t r = read(fd, b + n, cap - n - 1);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        n += (size_t)r;
    }
    b[n] = 0;
    if (len) *len = n;
    return b;
}

bool el_test_run_timeout(const char *exe, const char *const *args, double timeout_s, el_test_proc *r) {
    return el_test_run_input(exe, args, NULL, timeout_s, r);
}

bool el_test_run_input(const char *exe, const char *const *args, const char *input, double timeout_s,
                       el_test_proc *r) {
    memset(r, 0, sizeof *r);
    FILE *inf = NULL;
    if (input) {
        inf = tmpfile();
        if (!inf || fputs(input, inf) < 0 || fflush(inf) != 0) { if (inf) fclose(inf); return false; }
        rewind(inf);
    }
    const char *argv[64];
    int n = 0;
    argv[n++] = exe;
    for (int i = 0; args[i] && n < 63; i++) argv[n++] = args[i];
    argv[n] = NULL;
    FILE *errf = tmpfile();
    int pfd[2];
    if (!errf || pipe(pfd) != 0) { if (inf) fclose(inf); if (errf) fclose(errf); return false; }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) { if (inf) fclose(inf); fclose(errf); return false; }
    if (pid == 0) {
        if (inf) dup2(fileno(inf), 0);
        dup2(pfd[1], 1);
        dup2(fileno(errf), 2);
        close(pfd[0]);
        close(pfd[1]);
        execv(exe, (char *const *)argv);
        _exit(127);
    }
    close(pfd[1]);
    if (inf) fclose(inf);
    double deadline = 0;
    if (timeout_s > 0) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        deadline = (double)ts.tv_sec + ts.tv_nsec / 1e9 + timeout_s;
    }
    r->out = read_fd_until(pfd[0], &r->out_len, deadline, &r->timed_out);
    close(pfd[0]);
    int st = 0;
    while (deadline > 0 && !r->timed_out) { /* stdout closed: the process may still run */
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid) goto reaped;
        if (w < 0 && errno != EINTR) break;
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        if ((double)ts.tv_sec + ts.tv_nsec / 1e9 > deadline) r->timed_out = true;
        else nanosleep(&(struct timespec){.tv_nsec = 10000000}, NULL);
    }
    if (r->timed_out) kill(pid, SIGKILL);
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
reaped:
    r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    rewind(errf);
    r->err = el_test_read_fd(fileno(errf), NULL);
    fclose(errf);
    return r->out && r->err;
}

void el_test_proc_free(el_test_proc *r) {
    free(r->out);
    free(r->err);
    memset(r, 0, sizeof *r);
}

size_t el_test_gguf_str_at(const char *buf, size_t len, const char *s) {
    const size_t n = strlen(s);
    for (size_t i = 8; i + n <= len; i++) {
        if (memcmp(buf + i, s, n) != 0) continue;
        uint64_t l;
        memcpy(&l, buf + i - 8, 8);
        if (l == n) return i;
    }
    return 0;
}

bool el_test_gguf_patch(char *buf, size_t len, el_test_patch_kind kind, const char *name, uint64_t v) {
    const size_t at = el_test_gguf_str_at(buf, len, name);
    const size_t n = strlen(name);
    bool ok = at != 0;
    if (ok) {
        uint32_t u;
        switch (kind) {
        case EL_TEST_PATCH_U32:
            ok = at + n + 8 <= len;
            if (ok) memcpy(&u, buf + at + n, 4);
            ok = ok && u == 4; /* GGUF_TYPE_UINT32 */
            u = (uint32_t)v;
            if (ok) memcpy(buf + at + n + 4, &u, 4);
            break;
        case EL_TEST_PATCH_NAME: buf[at + n - 1] = 'X'; break;
        case EL_TEST_PATCH_NE: {
            uint32_t nd = 0;
            const uint32_t dim = (uint32_t)(v >> 32);
            const int64_t val = (int64_t)(uint32_t)v;
            if (at + n + 4 <= len) memcpy(&nd, buf + at + n, 4);
            ok = dim < nd && at + n + 4 + 8 * (size_t)(dim + 1) <= len;
            if (ok) memcpy(buf + at + n + 4 + 8 * dim, &val, 8);
            break;
        }
        }
    }
    CHECKF(ok, "cannot patch '%s'", name);
    return ok;
}

bool el_test_write_file(const char *path, const void *buf, size_t len) {
    FILE *f = fopen(path, "wb");
    bool ok = f && fwrite(buf, 1, len, f) == len;
    if (f && fclose(f) != 0) ok = false;
    return ok;
}
