/*
 * fleet_device.c — the processes and loopback HTTP calls of one simulated
 * device (fleet_device.h states the contract).
 */
#include "fleet/fleet_device.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* fork + execv with output to log_path; the child has its own process group
 * and the default signal dispositions and mask. */
static pid_t spawn(const char *self, char *const argv[], const char *log_path) {
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        setpgid(0, 0);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGUSR1, SIG_DFL);
        signal(SIGPIPE, SIG_DFL);
        int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        if (nul >= 0) dup2(nul, 0);
        execv(self, argv);
        _exit(127);
    }
    return pid;
}

int dev_exec_wait(const char *self, char *const argv[], const char *log_path, int kill_ms) {
    pid_t pid = spawn(self, argv, log_path);
    if (pid < 0) return -1;
    int st = 0;
    if (kill_ms >= 0) {
        const double t0 = now_ms();
        for (;;) {
            pid_t r = waitpid(pid, &st, WNOHANG);
            if (r == pid) return st;
            if (now_ms() - t0 >= kill_ms) {
                kill(pid, SIGKILL);
                break;
            }
            sleep_ms(1);
        }
    }
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    return st;
}

int dev_start(fleet_dev *d, const char *self, int ctx, char *msg, size_t cap) {
    char log_path[700], threads[16], ctx_s[16], budget[32];
    snprintf(log_path, sizeof log_path, "%s/serve.log", d->dir);
    snprintf(threads, sizeof threads, "%d", d->cls->threads);
    snprintf(ctx_s, sizeof ctx_s, "%d", ctx);
    snprintf(budget, sizeof budget, "%lluMiB", (unsigned long long)(d->cls->mem_budget >> 20));
    /* where serve.log is now: only lines after it count for this start */
    FILE *lf = fopen(log_path, "a");
    long start_off = 0;
    if (lf) {
        fseek(lf, 0, SEEK_END);
        start_off = ftell(lf);
        fclose(lf);
    }
    char *argv[24];
    int n = 0;
    argv[n++] = "edgellm";
    argv[n++] = "serve";
    argv[n++] = "--store";
    argv[n++] = d->store;
    argv[n++] = "--port";
    argv[n++] = "0";
    argv[n++] = "-t";
    argv[n++] = threads;
    argv[n++] = "-c";
    argv[n++] = ctx_s;
    if (d->cls->mem_budget) {
        argv[n++] = "--mem-budget";
        argv[n++] = budget;
    }
    argv[n++] = "--thermal-source";
    argv[n++] = d->thermal;
    argv[n++] = "--telemetry-dir";
    argv[n++] = d->telemetry;
    argv[n++] = "--no-ui";
    argv[n] = NULL;
    d->ended = false;
    d->port = 0;
    d->pid = spawn(self, argv, log_path);
    if (d->pid < 0) {
        d->pid = 0;
        snprintf(msg, cap, "device %d: cannot start serve: %s", d->index, strerror(errno));
        return -1;
    }
    const double t0 = now_ms();
    while (now_ms() - t0 < 120000) {
        if (!dev_alive(d)) {
            snprintf(msg, cap, "device %d: serve exited before listening (status %d; see %s)", d->index,
                     d->end_status, log_path);
            return -1;
        }
        FILE *f = fopen(log_path, "r");
        if (f) {
            char line[1024];
            fseek(f, start_off, SEEK_SET);
            while (fgets(line, sizeof line, f)) {
                const char *p = strstr(line, "listening on http://127.0.0.1:");
                if (p) d->port = atoi(p + strlen("listening on http://127.0.0.1:"));
            }
            fclose(f);
        }
        if (d->port > 0) return 0;
        sleep_ms(20);
    }
    dev_stop(d);
    snprintf(msg, cap, "device %d: serve did not listen within 120 s (see %s)", d->index, log_path);
    return -1;
}

bool dev_alive(fleet_dev *d) {
    if (!d->pid) return false;
    int st;
    pid_t r = waitpid(d->pid, &st, WNOHANG);
    if (r == d->pid) {
        d->pid = 0;
        d->ended = true;
        d->end_status = st;
        return false;
    }
    return true;
}

void dev_stop(fleet_dev *d) {
    if (!dev_alive(d)) return;
    kill(d->pid, SIGTERM);
    const double t0 = now_ms();
    while (dev_alive(d)) {
        if (now_ms() - t0 > 15000) {
            kill(d->pid, SIGKILL);
            int st;
            waitpid(d->pid, &st, 0);
            d->pid = 0;
            d->ended = true;
            d->end_status = st;
            break;
        }
        sleep_ms(5);
    }
}

static size_t on_body(char *p, size_t sz, size_t n, void *user) {
    return el_buf_append(user, p, sz * n) ? sz * n : 0;
}

/* One loopback request; body NULL: GET. Returns the HTTP status, 0 on a transport failure. */
static long http(int port, const char *path, const char *body, el_buf *reply) {
    CURL *h = curl_easy_init();
    if (!h) return 0;
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    struct curl_slist *hdrs = NULL;
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 120L);
    curl_easy_setopt(h, CURLOPT_PROXY, "");
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, reply);
    if (body) {
        hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
    }
    long status = 0;
    if (curl_easy_perform(h) == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(h);
    return status;
}

int dev_complete(const fleet_dev *d, const char *prompt, int n_predict, el_buf *content) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return 0;
    cJSON_AddStringToObject(o, "prompt", prompt);
    cJSON_AddNumberToObject(o, "n_predict", n_predict);
    cJSON_AddNumberToObject(o, "temperature", 0);
    cJSON_AddBoolToObject(o, "cache_prompt", false);
    char *body = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!body) return 0;
    el_buf reply = {0};
    long st = http(d->port, "/completion", body, &reply);
    free(body);
    if (st == 200 && content) {
        cJSON *r = cJSON_ParseWithLength(reply.p ? reply.p : "", reply.len);
        const cJSON *c = r ? cJSON_GetObjectItemCaseSensitive(r, "content") : NULL;
        if (cJSON_IsString(c)) el_buf_str(content, c->valuestring);
        cJSON_Delete(r);
    }
    el_buf_free(&reply);
    return (int)st;
}

int dev_metrics_read(const fleet_dev *d, dev_metrics *m) {
    memset(m, 0, sizeof *m);
    el_buf reply = {0};
    long st = http(d->port, "/metrics", NULL, &reply);
    if (st != 200 || !reply.p) {
        el_buf_free(&reply);
        return -1;
    }
    for (char *line = reply.p; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        char state[32];
        double v;
        char le[32];
        if (sscanf(line, "edgellm_requests_total{state=\"%31[a-z]\"} %lf", state, &v) == 2) {
            if (!strcmp(state, "done")) m->done = v;
            else if (!strcmp(state, "cancelled")) m->cancelled = v;
            else if (!strcmp(state, "failed")) m->failed = v;
            else if (!strcmp(state, "rejected")) m->rejected = v;
        } else if (sscanf(line, "edgellm_ttft_seconds_bucket{le=\"%31[^\"]\"} %lf", le, &v) == 2 && m->n_le < 32) {
            m->le[m->n_le] = !strcmp(le, "+Inf") ? INFINITY : strtod(le, NULL);
            m->cum[m->n_le++] = v;
        }
        line = nl ? nl + 1 : NULL;
    }
    el_buf_free(&reply);
    return 0;
}
