/*
 * cmd_accept.c — `edgellm accept MATRIX.json -m MODEL --out DIR [--key K.sec]
 * [--pub K.pub] [--device-class C]` and `edgellm accept verify RECORD
 * [--pub K.pub] [--package MODEL] [--device-class C] [--no-evidence]`.
 *
 * The run: the matrix (deploy/accept_matrix.h) gives the cells, the
 * reference cell first. Each request of a cell is a real child process —
 * this executable (/proc/self/exe) as `edgellm run --json --temp 0
 * --ignore-eos --top-logprobs 2 --route` with the cell's --backend, -ctk/-ctv,
 * --load, -t, --mem-budget and a --thermal-source file holding the cell's
 * temperature (nominal 45 °C, derated 85 °C, hot 97 °C against the built-in
 * policy's 80/95 °C) — up to `concurrency` at once. The parent timestamps
 * every token line as it arrives on the pipe (TTFT = from fork to the first
 * token line: process start, load, prefill and the first pick; inter-token
 * = the gaps between token lines, each stamped by the child with the
 * system-wide monotonic clock ("t_ms") as it is emitted), and takes peak RSS (ru_maxrss) and CPU
 * time (user + system) from wait4's rusage. Cold start: before each request
 * the model file's cached pages are dropped (posix_fadvise DONTNEED, which
 * drops clean pages no process maps; pages mapped elsewhere or dirty stay,
 * so the fraction still cached is measured with mincore and reported). RAPL
 * energy (/sys/class/powercap/intel-rapl:0/energy_uj, the whole package,
 * every process on it) when readable, else "not exposed". Exit status 4 of
 * a child (the router declined) is a refusal — unless the reason is
 * model_unavailable (the model failed its checks or its load): that, and
 * any other failure, is an error of the cell.
 * Fidelity: each request against the reference cell's request of the same
 * prompt — greedy agreement (shared prefix / length) and the mean |Δ log p|
 * of the chosen token over that prefix.
 *
 * Writes DIR/report.json, DIR/report.md, DIR/latency.png, DIR/memory.png,
 * DIR/logs/ (each child's stderr) and, with --key, DIR/record.json: the
 * signed decision record (deploy/accept_record.h) over report.json and the
 * plots. Progress on stderr. Exit 0 when every cell passed, 3 when some
 * failed (the report and record are written either way), 1/2 on errors.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli/accept_plot.h"
#include "cli/cli.h"
#include "deploy/accept_matrix.h"
#include "deploy/accept_record.h"
#include "deploy/fingerprint.h"
#include "deploy/fsutil.h"
#include "deploy/hex.h"
#include "deploy/manifest.h"
#include "memory/load.h"
#include "util/file.h"

#define MAX_TOK 512

typedef struct req {
    int prompt;
    pid_t pid;
    int fd;                  /* stdout pipe, -1 once closed */
    double t0;               /* fork time, ms */
    el_buf line;             /* the line being read (a done line with a placement report is long) */
    int n_tok;
    int32_t tok[MAX_TOK];
    double lp[MAX_TOK], t[MAX_TOK];
    double margin[MAX_TOK];  /* top1 - top2 log-probability at each step (NAN if unknown) */
    double child_ttft_ms;
    int fallbacks;
    bool done_line;
    int exit_code;           /* -1: signal */
    bool refused;
    double cpu_s; double rss_mib;
    char why[200];           /* the last stderr line of a refused or failed child */
    char reason[48];         /* the route's reason (stderr "route: ... reason=X;") */
} req;

typedef struct cell_res {
    int n_req, n_ran, n_refused, n_failed;
    double ttft_p50, ttft_p95, itl_p50, itl_p95, tps, rss_mib, cpu_s_tok, agree, dlogp, energy_j;
    double child_ttft_p50, cold_cached;
    int fallbacks;
    int n_unavailable;
    int ties;                /* requests whose first difference from the reference was a near-tie */       /* refusals because the model did not pass its checks or load */
    bool pass;
    bool th_pass[EL_TH_COUNT];
    double th_val[EL_TH_COUNT];
    char refusal_why[200];
} cell_res;

typedef struct accept_ctx {
    const el_accept_matrix *mx;
    const char *exe, *model, *pub, *out;
    bool unsigned_model;     /* a plain GGUF: the children get --allow-unsigned */
    req *ref;                /* the reference cell's requests (kept for fidelity) */
    int n_ref;
} accept_ctx;

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of v[0..n) (sorted in place); NAN when empty. */
static double pct(double *v, int n, double p) {
    if (n <= 0) return NAN;
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    int k = (int)ceil(p / 100.0 * n) - 1;
    return v[k < 0 ? 0 : k >= n ? n - 1 : k];
}

static double rapl_uj(void) {
    char b[64];
    if (el_read_small("/sys/class/powercap/intel-rapl:0/energy_uj", b, sizeof b) <= 0) return NAN;
    return strtod(b, NULL);
}

static const char *thermal_temp(const char *level) {
    return !strcmp(level, "hot") ? "97000\n" : !strcmp(level, "derated") ? "85000\n" : "45000\n";
}

/* The child's argv for request r of cell c. */
static int child_argv(const accept_ctx *x, int c, int prompt, const char *thermal_file, char **av, char *nbuf,
                      char *tbuf) {
    const el_accept_matrix *m = x->mx;
    int n = 0;
    av[n++] = (char *)x->exe;
    av[n++] = "run";
    av[n++] = "-m"; av[n++] = (char *)x->model;
    if (x->pub) { av[n++] = "--pub"; av[n++] = (char *)x->pub; }
    if (x->unsigned_model) av[n++] = "--allow-unsigned";
    av[n++] = "-p"; av[n++] = m->prompts[prompt];
    snprintf(nbuf, 16, "%d", m->n_predict);
    av[n++] = "-n"; av[n++] = nbuf;
    av[n++] = "--temp"; av[n++] = "0";
    av[n++] = "--ignore-eos";
    av[n++] = "--json";
    av[n++] = "--top-logprobs"; av[n++] = "2";
    av[n++] = "--backend"; av[n++] = (char *)m->val[EL_AX_BACKEND][m->cell[c][EL_AX_BACKEND]];
    av[n++] = "-ctk"; av[n++] = (char *)m->val[EL_AX_KV][m->cell[c][EL_AX_KV]];
    av[n++] = "-ctv"; av[n++] = (char *)m->val[EL_AX_KV][m->cell[c][EL_AX_KV]];
    av[n++] = "--load"; av[n++] = (char *)m->val[EL_AX_LOAD][m->cell[c][EL_AX_LOAD]];
    const char *th = m->val[EL_AX_THREADS][m->cell[c][EL_AX_THREADS]];
    if (strcmp(th, "0")) { snprintf(tbuf, 16, "%s", th); av[n++] = "-t"; av[n++] = tbuf; }
    const char *mb = m->val[EL_AX_MEM][m->cell[c][EL_AX_MEM]];
    if (strcmp(mb, "0")) { av[n++] = "--mem-budget"; av[n++] = (char *)mb; }
    av[n++] = "--route";
    av[n++] = "--thermal-source"; av[n++] = (char *)thermal_file;
    if (strcmp(m->val[EL_AX_BACKEND][m->cell[c][EL_AX_BACKEND]], "cpu")) av[n++] = "--placement-report";
    av[n] = NULL;
    return n;
}

static bool spawn(const accept_ctx *x, int c, int ri, req *r, const char *thermal_file) {
    char *av[64], nbuf[16], tbuf[16], logp[4096];
    child_argv(x, c, r->prompt, thermal_file, av, nbuf, tbuf);
    snprintf(logp, sizeof logp, "%s/logs/cell%02d-req%02d.stderr", x->out, c + 1, ri + 1);
    int efd = open(logp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int p[2];
    if (efd < 0 || pipe2(p, O_CLOEXEC) != 0) {
        if (efd >= 0) close(efd);
        return false;
    }
    r->t0 = cli_now_ms();
    pid_t pid = fork();
    if (pid < 0) { close(p[0]); close(p[1]); close(efd); return false; }
    if (pid == 0) {
        dup2(p[1], 1);
        dup2(efd, 2);
        execv(x->exe, av);
        _exit(127);
    }
    close(p[1]);
    close(efd);
    r->pid = pid;
    r->fd = p[0];
    return true;
}

static void on_line(req *r, double now) {
    cJSON *j = r->line.p ? cJSON_ParseWithLength(r->line.p, r->line.len) : NULL;
    if (!j) return;
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "id");
    if (cJSON_IsNumber(id) && r->n_tok < MAX_TOK) {
        const cJSON *lp = cJSON_GetObjectItemCaseSensitive(j, "logprob");
        r->tok[r->n_tok] = (int32_t)id->valuedouble;
        r->lp[r->n_tok] = cJSON_IsNumber(lp) ? lp->valuedouble : NAN;
        const cJSON *top = cJSON_GetObjectItemCaseSensitive(j, "top");
        const cJSON *t0 = cJSON_GetArrayItem(top, 0), *t1 = cJSON_GetArrayItem(top, 1);
        const cJSON *l0 = cJSON_GetArrayItem(t0, 1), *l1 = cJSON_GetArrayItem(t1, 1);
        r->margin[r->n_tok] = cJSON_IsNumber(l0) && cJSON_IsNumber(l1) ? l0->valuedouble - l1->valuedouble : NAN;
        /* the child's emission time (the same monotonic clock) when it gives one: several
         * lines can arrive in one read, so the arrival time alone would merge them */
        const cJSON *tm = cJSON_GetObjectItemCaseSensitive(j, "t_ms");
        r->t[r->n_tok++] = (cJSON_IsNumber(tm) && tm->valuedouble >= r->t0 && tm->valuedouble <= now ? tm->valuedouble : now) - r->t0;
    } else if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "done"))) {
        r->done_line = true;
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "ttft_ms");
        r->child_ttft_ms = cJSON_IsNumber(t) ? t->valuedouble : NAN;
        const cJSON *pl = cJSON_GetObjectItemCaseSensitive(j, "placement");
        const cJSON *fb = pl ? cJSON_GetObjectItemCaseSensitive(pl, "fallbacks") : NULL;
        if (cJSON_IsNumber(fb)) r->fallbacks = (int)fb->valuedouble;
    }
    cJSON_Delete(j);
}

/* The first n bytes of src (a line) into out, cut to cap - 1 bytes: a reason shown in the report is as
 * long as its field allows. */
static void copy_cut(char *out, size_t cap, const char *src, size_t n) {
    if (n >= cap) n = cap - 1;
    memcpy(out, src, n);
    out[n] = 0;
}

static void last_stderr_line(const accept_ctx *x, int c, int ri, char *out, size_t cap, char reason[48]) {
    char p[4096], buf[4096];
    snprintf(p, sizeof p, "%s/logs/cell%02d-req%02d.stderr", x->out, c + 1, ri + 1);
    out[0] = 0;
    FILE *f = fopen(p, "re");
    if (!f) return;
    while (fgets(buf, sizeof buf, f)) {
        size_t n = strlen(buf);
        while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r')) buf[--n] = 0;
        const char *rs = strstr(buf, "route source=");
        const char *rr = rs ? strstr(rs, "reason=") : NULL;
        if (rr) {
            size_t k = strcspn(rr + 7, "; ");
            snprintf(reason, 48, "%.*s", (int)(k < 47 ? k : 47), rr + 7);
        }
        if (n && (!rs || !out[0])) copy_cut(out, cap, buf, n);
    }
    fclose(f);
}

/* Runs requests [0, n) of cell c, `conc` at a time. */
static bool run_requests(const accept_ctx *x, int c, req *rq, int n, int conc, const char *thermal_file,
                         bool cold, double *cached_after_drop) {
    *cached_after_drop = NAN;
    int next = 0, live = 0;
    while (next < n || live > 0) {
        if (next < n && live < conc) {
            if (cold && live == 0) { /* a wave starts cold */
                el_error e = {0};
                if (el_load_evict(x->model, &e) == EL_OK) {
                    double f = NAN;
                    if (el_load_resident(x->model, &f, &e) == EL_OK)
                        *cached_after_drop = isfinite(*cached_after_drop) && *cached_after_drop > f ? *cached_after_drop : f;
                }
            }
            while (next < n && live < conc) {
                if (!spawn(x, c, next, &rq[next], thermal_file)) {
                    fprintf(stderr, "error: accept: cannot start a child: %s\n", strerror(errno));
                    return false;
                }
                next++;
                live++;
            }
        }
        struct pollfd pf[8];
        int idx[8], np = 0;
        for (int i = 0; i < next && np < 8; i++)
            if (rq[i].fd >= 0) { pf[np].fd = rq[i].fd; pf[np].events = POLLIN; idx[np++] = i; }
        if (poll(pf, (nfds_t)np, 1000) < 0 && errno != EINTR) return false;
        for (int k = 0; k < np; k++) {
            if (!(pf[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            req *r = &rq[idx[k]];
            char buf[4096];
            ssize_t got = read(r->fd, buf, sizeof buf);
            double now = cli_now_ms();
            if (got > 0) {
                for (ssize_t i = 0; i < got; i++) {
                    if (buf[i] == '\n') { on_line(r, now); r->line.len = 0; }
                    else if (r->line.len < (4u << 20)) el_buf_append(&r->line, &buf[i], 1);
                }
                continue;
            }
            if (got < 0 && errno == EINTR) continue;
            close(r->fd);
            r->fd = -1;
            int st = 0;
            struct rusage ru;
            memset(&ru, 0, sizeof ru);
            while (wait4(r->pid, &st, 0, &ru) < 0 && errno == EINTR) {}
            el_buf_free(&r->line);
            r->exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
            r->refused = r->exit_code == CLI_EXIT_DECLINED;
            r->cpu_s = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
                       ru.ru_stime.tv_usec / 1e6;
            r->rss_mib = (double)ru.ru_maxrss / 1024.0;
            if (r->exit_code != 0) last_stderr_line(x, c, idx[k], r->why, sizeof r->why, r->reason);
            live--;
        }
    }
    return true;
}

/* Fidelity against the reference cell's request of the same prompt, by the
 * project's parity rule (docs/FIDELITY.md): tokens are compared up to the
 * first difference; a difference where the reference's top1/top2 margin is
 * under 0.05 is a near-tie, not a disagreement — the comparison ends there
 * with every compared token counted as agreeing (the continuations differ
 * from then on, so nothing after it is comparable); any other difference
 * counts every remaining position as disagreeing. agree = agreeing /
 * compared; |Δ log p| of the chosen token over the shared prefix. */
static void fidelity(const accept_ctx *x, const req *r, double *agree, double *dlogp, int *n_lp, int *ties) {
    const req *ref = NULL;
    for (int i = 0; i < x->n_ref; i++)
        if (x->ref[i].prompt == r->prompt && x->ref[i].exit_code == 0) { ref = &x->ref[i]; break; }
    *agree = NAN;
    if (!ref || ref->n_tok == 0) return;
    int n = r->n_tok < ref->n_tok ? r->n_tok : ref->n_tok, k = 0;
    while (k < n && r->tok[k] == ref->tok[k]) {
        if (isfinite(r->lp[k]) && isfinite(ref->lp[k])) { *dlogp += fabs(r->lp[k] - ref->lp[k]); (*n_lp)++; }
        k++;
    }
    int len = r->n_tok > ref->n_tok ? r->n_tok : ref->n_tok;
    if (k < n && isfinite(ref->margin[k]) && ref->margin[k] < 0.05) {
        (*ties)++;
        *agree = 1.0;
        return;
    }
    *agree = len ? (double)k / len : NAN;
}

static void judge(const el_accept_matrix *m, int c, cell_res *cr) {
    const double v[EL_TH_COUNT] = {cr->ttft_p50, cr->ttft_p95, cr->itl_p50, cr->itl_p95, cr->tps, cr->rss_mib,
                                   cr->cpu_s_tok, cr->agree, cr->dlogp, (double)cr->fallbacks, (double)cr->n_refused};
    bool expect_ref = el_accept_cell_expects_refusal(m, c);
    cr->pass = cr->n_failed == 0;
    for (int t = 0; t < EL_TH_COUNT; t++) {
        cr->th_val[t] = v[t];
        cr->th_pass[t] = true;
        if (!isfinite(m->th[t]) || expect_ref) continue;
        if (!isfinite(v[t])) cr->th_pass[t] = false; /* not measured: cannot pass */
        else if (el_accept_th_is_min((el_accept_th)t)) cr->th_pass[t] = v[t] >= m->th[t];
        else cr->th_pass[t] = v[t] <= m->th[t];
        if (!cr->th_pass[t]) cr->pass = false;
    }
    /* an expected refusal is the policy refusing a model that works: a model that could not
     * load (model_unavailable) or any error is not it */
    if (expect_ref && (cr->n_refused != cr->n_req || cr->n_unavailable > 0)) cr->pass = false;
}

static bool run_cell(accept_ctx *x, int c, cell_res *cr) {
    const el_accept_matrix *m = x->mx;
    memset(cr, 0, sizeof *cr);
    int conc = atoi(m->val[EL_AX_CONC][m->cell[c][EL_AX_CONC]]);
    int n = m->n_prompts > conc ? m->n_prompts : conc;
    req *rq = calloc((size_t)n, sizeof *rq);
    if (!rq) return false;
    for (int i = 0; i < n; i++) { rq[i].prompt = i % m->n_prompts; rq[i].fd = -1; rq[i].child_ttft_ms = NAN; }
    char tf[4096];
    const char *level = m->val[EL_AX_THERMAL][m->cell[c][EL_AX_THERMAL]];
    snprintf(tf, sizeof tf, "%s/logs/thermal-%s", x->out, level);
    FILE *f = fopen(tf, "we");
    if (!f || fputs(thermal_temp(level), f) < 0 || fclose(f) != 0) { free(rq); return false; }
    bool cold = !strcmp(m->val[EL_AX_START][m->cell[c][EL_AX_START]], "cold");
    double e0 = rapl_uj();
    if (!run_requests(x, c, rq, n, conc, tf, cold, &cr->cold_cached)) { free(rq); return false; }
    double e1 = rapl_uj();
    if (c == 0) { x->ref = rq; x->n_ref = n; } /* the reference: kept for every cell's fidelity */
    cr->energy_j = isfinite(e0) && isfinite(e1) && e1 >= e0 ? (e1 - e0) / 1e6 : NAN;
    double *ttft = calloc((size_t)n, sizeof *ttft), *cttft = calloc((size_t)n, sizeof *cttft);
    double *itl = calloc((size_t)n * MAX_TOK, sizeof *itl);
    int nt = 0, ni = 0;
    double cpu = 0, toks = 0, span_ms = 0, span_tok = 0, agree_sum = 0, dl = 0;
    int n_agree = 0, n_lp = 0;
    cr->n_req = n;
    for (int i = 0; i < n; i++) {
        req *r = &rq[i];
        if (r->refused && !strcmp(r->reason, "model_unavailable")) {
            /* the router declined because the model failed its checks or its load:
             * an error of the cell, not a policy's refusal */
            cr->n_unavailable++;
            cr->n_failed++;
            if (!cr->refusal_why[0]) snprintf(cr->refusal_why, sizeof cr->refusal_why, "%s", r->why);
            continue;
        }
        if (r->refused) {
            cr->n_refused++;
            if (!cr->refusal_why[0]) snprintf(cr->refusal_why, sizeof cr->refusal_why, "%s", r->why);
            continue;
        }
        if (r->exit_code != 0 || !r->done_line || r->n_tok == 0) {
            cr->n_failed++;
            if (!cr->refusal_why[0])
                if (snprintf(cr->refusal_why, sizeof cr->refusal_why, "exit %d%s: %s", r->exit_code,
                             r->exit_code == 0 ? " without a final line" : "", r->why) < 0)
                    cr->refusal_why[0] = 0; /* a long reason is cut to fit: said, not an error */
            continue;
        }
        cr->n_ran++;
        ttft[nt] = r->t[0];
        cttft[nt++] = r->child_ttft_ms;
        for (int k = 1; k < r->n_tok; k++) itl[ni++] = r->t[k] - r->t[k - 1];
        cpu += r->cpu_s;
        toks += r->n_tok;
        if (r->n_tok > 1) { span_ms += r->t[r->n_tok - 1] - r->t[0]; span_tok += r->n_tok - 1; }
        if (r->rss_mib > cr->rss_mib) cr->rss_mib = r->rss_mib;
        if (r->fallbacks > cr->fallbacks) cr->fallbacks = r->fallbacks;
        double a = NAN;
        fidelity(x, r, &a, &dl, &n_lp, &cr->ties);
        if (isfinite(a)) { agree_sum += a; n_agree++; }
    }
    cr->ttft_p50 = pct(ttft, nt, 50);
    cr->ttft_p95 = pct(ttft, nt, 95);
    cr->child_ttft_p50 = pct(cttft, nt, 50);
    cr->itl_p50 = pct(itl, ni, 50);
    cr->itl_p95 = pct(itl, ni, 95);
    cr->tps = span_ms > 0 ? span_tok * 1e3 / span_ms : NAN;
    cr->cpu_s_tok = toks > 0 ? cpu / toks : NAN;
    if (cr->n_ran == 0) cr->rss_mib = NAN;
    cr->agree = n_agree ? agree_sum / n_agree : NAN;
    cr->dlogp = n_lp ? dl / n_lp : NAN;
    free(ttft);
    free(cttft);
    free(itl);
    judge(m, c, cr);
    if (c != 0) free(rq);
    return true;
}

/* ---- the report ---- */

static void num(cJSON *o, const char *k, double v) {
    if (isfinite(v)) cJSON_AddNumberToObject(o, k, v);
    else cJSON_AddNullToObject(o, k);
}

static bool write_text(const char *dir, const char *name, const char *text, char *why, size_t cap) {
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "we");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
        snprintf(why, cap, "%.300s: %s", p, strerror(errno));
        return false;
    }
    return true;
}

static char *report_json(const accept_ctx *x, const cell_res *cr, const char *model_sha, const char *matrix_sha,
                         const char *dev_class, bool energy, bool all_pass) {
    const el_accept_matrix *m = x->mx;
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "format", "edgellm-accept-report/1");
    cJSON_AddStringToObject(root, "matrix", m->name);
    cJSON_AddStringToObject(root, "matrix_sha256", matrix_sha);
    cJSON_AddStringToObject(root, "model", el_fs_base_name(x->model));
    cJSON_AddStringToObject(root, "model_sha256", model_sha);
    cJSON_AddStringToObject(root, "device_class", dev_class);
    cJSON_AddStringToObject(root, "runtime", el_version());
    cJSON_AddStringToObject(root, "cover", m->pairwise ? "pairwise" : "all");
    cJSON_AddNumberToObject(root, "n_predict", m->n_predict);
    cJSON_AddNumberToObject(root, "n_prompts", m->n_prompts);
    cJSON_AddStringToObject(root, "energy", energy ? "rapl: /sys/class/powercap/intel-rapl:0 (whole package)" : "not exposed");
    cJSON *th = cJSON_AddObjectToObject(root, "thresholds");
    for (int t = 0; t < EL_TH_COUNT; t++)
        if (isfinite(m->th[t])) cJSON_AddNumberToObject(th, el_accept_th_name((el_accept_th)t), m->th[t]);
    cJSON *cells = cJSON_AddArrayToObject(root, "cells");
    int passed = 0;
    for (int c = 0; c < m->n_cells; c++) {
        const cell_res *r = &cr[c];
        cJSON *o = cJSON_CreateObject();
        char name[256];
        el_accept_cell_name(m, c, name, sizeof name);
        cJSON_AddNumberToObject(o, "cell", c + 1);
        cJSON_AddStringToObject(o, "name", name);
        cJSON_AddBoolToObject(o, "reference", c == 0);
        cJSON *ax = cJSON_AddObjectToObject(o, "axes");
        for (int a = 0; a < EL_AX_COUNT; a++)
            cJSON_AddStringToObject(ax, el_accept_axis_name((el_accept_axis)a), m->val[a][m->cell[c][a]]);
        cJSON_AddBoolToObject(o, "expect_refused", el_accept_cell_expects_refusal(m, c));
        cJSON_AddNumberToObject(o, "requests", r->n_req);
        cJSON_AddNumberToObject(o, "ran", r->n_ran);
        cJSON_AddNumberToObject(o, "refusals", r->n_refused);
        cJSON_AddNumberToObject(o, "errors", r->n_failed);
        if (r->refusal_why[0]) cJSON_AddStringToObject(o, "refusal_or_error", r->refusal_why);
        cJSON *me = cJSON_AddObjectToObject(o, "measurements");
        num(me, "ttft_p50_ms", r->ttft_p50);
        num(me, "ttft_p95_ms", r->ttft_p95);
        num(me, "prefill_ttft_p50_ms", r->child_ttft_p50);
        num(me, "itl_p50_ms", r->itl_p50);
        num(me, "itl_p95_ms", r->itl_p95);
        num(me, "tokens_per_s", r->tps);
        num(me, "peak_rss_mib", r->rss_mib);
        num(me, "cpu_s_per_token", r->cpu_s_tok);
        num(me, "energy_j", r->energy_j);
        num(me, "greedy_agreement", r->agree);
        num(me, "mean_abs_dlogp", r->dlogp);
        cJSON_AddNumberToObject(me, "near_tie_divergences", r->ties);
        cJSON_AddNumberToObject(me, "fallbacks", r->fallbacks);
        num(me, "cold_cached_fraction", r->cold_cached);
        cJSON *ck = cJSON_AddObjectToObject(o, "checks");
        for (int t = 0; t < EL_TH_COUNT; t++) {
            if (!isfinite(m->th[t])) continue;
            cJSON *k = cJSON_AddObjectToObject(ck, el_accept_th_name((el_accept_th)t));
            num(k, "value", r->th_val[t]);
            cJSON_AddNumberToObject(k, "limit", m->th[t]);
            cJSON_AddStringToObject(k, "result", el_accept_cell_expects_refusal(m, c) ? "n/a (expected refusal)"
                                                 : r->th_pass[t] ? "pass" : "fail");
        }
        if (el_accept_cell_expects_refusal(m, c)) {
            cJSON *k = cJSON_AddObjectToObject(ck, "expected_refusal");
            cJSON_AddNumberToObject(k, "value", r->n_refused);
            cJSON_AddNumberToObject(k, "limit", r->n_req);
            cJSON_AddStringToObject(k, "result", r->n_refused == r->n_req ? "pass" : "fail");
        }
        cJSON_AddStringToObject(o, "result", r->pass ? "pass" : "fail");
        passed += r->pass;
        cJSON_AddItemToArray(cells, o);
    }
    cJSON *v = cJSON_AddObjectToObject(root, "verdict");
    cJSON_AddStringToObject(v, "device_class", dev_class);
    cJSON_AddStringToObject(v, "verdict", all_pass ? "pass" : "fail");
    cJSON_AddNumberToObject(v, "cells", m->n_cells);
    cJSON_AddNumberToObject(v, "passed", passed);
    char *s = cJSON_Print(root);
    cJSON_Delete(root);
    return s;
}

static void md_num(el_buf *b, double v, const char *fmt) {
    char t[64];
    if (isfinite(v)) snprintf(t, sizeof t, fmt, v);
    else snprintf(t, sizeof t, "—");
    el_buf_str(b, t);
}

static char *report_md(const accept_ctx *x, const cell_res *cr, const char *model_sha, const char *dev_class,
                       bool energy, bool all_pass) {
    const el_accept_matrix *m = x->mx;
    el_buf b = {0};
    char t[2048];
    int passed = 0;
    for (int c = 0; c < m->n_cells; c++) passed += cr[c].pass;
    snprintf(t, sizeof t, "# Acceptance: %.64s\n\nModel `%.200s` (SHA-256 %.16s…), device class `%.64s`, runtime %.32s; %d cells "
             "(%s), %d prompts × %d tokens each, greedy.\n\n**Verdict: %s** (%d of %d cells passed).\n\n"
             "Energy: %s. TTFT is from process start to the first token (package check, load, prefill); "
             "inter-token is the gap between tokens as the child emits them.\n\n",
             m->name, el_fs_base_name(x->model), model_sha, dev_class, el_version(), m->n_cells,
             m->pairwise ? "pairwise cover" : "all combinations", m->n_prompts, m->n_predict, all_pass ? "PASS" : "FAIL",
             passed, m->n_cells, energy ? "RAPL package energy per cell (energy_j in report.json)" : "not exposed on this machine (no readable /sys/class/powercap); CPU-seconds per token is the proxy");
    el_buf_str(&b, t);
    el_buf_str(&b, "| # | cell | TTFT p50/p95 ms | ITL p50/p95 ms | tok/s | peak RSS MiB | CPU s/tok | agree | mean |Δlogp| | fallbacks | refused | result |\n"
                   "|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int c = 0; c < m->n_cells; c++) {
        const cell_res *r = &cr[c];
        char name[256];
        el_accept_cell_name(m, c, name, sizeof name);
        snprintf(t, sizeof t, "| %d | %s%s | ", c + 1, name, c == 0 ? " (reference)" : "");
        el_buf_str(&b, t);
        md_num(&b, r->ttft_p50, "%.0f"); el_buf_str(&b, " / "); md_num(&b, r->ttft_p95, "%.0f"); el_buf_str(&b, " | ");
        md_num(&b, r->itl_p50, "%.1f"); el_buf_str(&b, " / "); md_num(&b, r->itl_p95, "%.1f"); el_buf_str(&b, " | ");
        md_num(&b, r->tps, "%.1f"); el_buf_str(&b, " | ");
        md_num(&b, r->rss_mib, "%.0f"); el_buf_str(&b, " | ");
        md_num(&b, r->cpu_s_tok, "%.3f"); el_buf_str(&b, " | ");
        md_num(&b, r->agree, "%.2f");
        if (r->ties) { snprintf(t, sizeof t, " (%d near-tie)", r->ties); el_buf_str(&b, t); }
        el_buf_str(&b, " | ");
        md_num(&b, r->dlogp, "%.4f"); el_buf_str(&b, " | ");
        snprintf(t, sizeof t, "%d | %d/%d%s | %s", r->fallbacks, r->n_refused, r->n_req,
                 el_accept_cell_expects_refusal(m, c) ? " (expected)" : "", r->pass ? "pass" : "**fail**");
        el_buf_str(&b, t);
        bool first = true;
        for (int k = 0; k < EL_TH_COUNT; k++)
            if (isfinite(m->th[k]) && !r->th_pass[k]) {
                snprintf(t, sizeof t, "%s%s", first ? ": " : ", ", el_accept_th_name((el_accept_th)k));
                el_buf_str(&b, t);
                first = false;
            }
        if (r->n_failed) { snprintf(t, sizeof t, "%s%d errors", first ? ": " : ", ", r->n_failed); el_buf_str(&b, t); }
        el_buf_str(&b, " |\n");
    }
    el_buf_str(&b, "\nThresholds:");
    bool any = false;
    for (int k = 0; k < EL_TH_COUNT; k++)
        if (isfinite(m->th[k])) {
            snprintf(t, sizeof t, " %s %s %g;", el_accept_th_name((el_accept_th)k),
                     el_accept_th_is_min((el_accept_th)k) ? ">=" : "<=", m->th[k]);
            el_buf_str(&b, t);
            any = true;
        }
    el_buf_str(&b, any ? "\n" : " none\n");
    bool hdr = false;
    for (int c = 0; c < m->n_cells; c++)
        if (cr[c].refusal_why[0]) {
            if (!hdr) { el_buf_str(&b, "\nRefusals and errors (the child's last stderr line):\n\n"); hdr = true; }
            snprintf(t, sizeof t, "- cell %d: %.300s\n", c + 1, cr[c].refusal_why);
            el_buf_str(&b, t);
        }
    el_buf_str(&b, "\n![latency](latency.png)\n\n![memory](memory.png)\n");
    return b.p;
}

static bool write_plots(const accept_ctx *x, const cell_res *cr, char *why, size_t cap) {
    const el_accept_matrix *m = x->mx;
    int n = m->n_cells;
    double *a = calloc((size_t)n * 4, sizeof *a);
    if (!a) { snprintf(why, cap, "out of memory"); return false; }
    double *b = a + n, *c2 = a + 2 * n, *d = a + 3 * n;
    for (int i = 0; i < n; i++) { a[i] = cr[i].ttft_p50; b[i] = cr[i].ttft_p95; c2[i] = cr[i].itl_p50 * 10; d[i] = cr[i].rss_mib; }
    char p[4096];
    accept_series s[3] = {{"TTFT P50", a, 0x3366CC}, {"TTFT P95", b, 0x99BBEE}, {"ITL P50 X10", c2, 0xEE8833}};
    snprintf(p, sizeof p, "%s/latency.png", x->out);
    bool ok = accept_plot_bars(p, "LATENCY PER CELL", "MS", n, s, 3, m->th[EL_TH_TTFT_P95], why, cap);
    accept_series r[1] = {{"PEAK RSS", d, 0x339955}};
    snprintf(p, sizeof p, "%s/memory.png", x->out);
    ok = ok && accept_plot_bars(p, "PEAK RSS PER CELL", "MIB", n, r, 1, m->th[EL_TH_RSS], why, cap);
    free(a);
    return ok;
}

/* ---- the commands ---- */

static int accept_verify(int argc, char **argv) {
    const char *rec = NULL, *pub = NULL, *pkg = NULL, *dc = NULL;
    bool evidence = true;
    for (int i = 3; i < argc; i++) {
        const char *a = argv[i];
        if ((!strcmp(a, "--pub") || !strcmp(a, "--package") || !strcmp(a, "--device-class")) && i + 1 < argc) {
            const char **dst = !strcmp(a, "--pub") ? &pub : !strcmp(a, "--package") ? &pkg : &dc;
            *dst = argv[++i];
        } else if (!strcmp(a, "--no-evidence")) evidence = false;
        else if (a[0] == '-') return cli_usage_error("accept verify", "unknown option '%s'", a);
        else if (!rec) rec = a;
        else return cli_usage_error("accept verify", "one RECORD only ('%s')", a);
    }
    if (!rec) return cli_usage_error("accept verify", "missing RECORD");
    if (!pub) pub = getenv("EL_TRUSTED_KEY");
    if (!pub || !*pub) return cli_usage_error("accept verify", "missing --pub KEY.pub (the package key)");
    el_pkg_error e;
    el_pubkey key;
    if (el_pkg_read_pub(pub, &key, &e)) return cli_pkg_fail(&e);
    el_accept_record r;
    if (el_accept_record_read(rec, &r, &e)) return cli_pkg_fail(&e);
    char *dir = evidence ? el_fs_dir_of(rec) : NULL;
    el_accept_check_opts o = {.trusted = &key, .n_trusted = 1, .model_path = pkg, .device_class = dc, .evidence_dir = dir};
    el_pkg_check rc = el_accept_record_check(&r, &o, &e);
    if (rc == EL_PKG_OK) {
        char h[17];
        el_hex_encode(r.model_sha256, 8, h);
        printf("record OK: signed by %s; model %s…", key.keyid, h);
        for (int i = 0; i < r.n_verdicts; i++)
            printf("; %s: %s (%" PRId64 "/%" PRId64 " cells)", r.verdicts[i].device_class,
                   r.verdicts[i].pass ? "pass" : "fail", r.verdicts[i].passed, r.verdicts[i].cells);
        printf("%s%s%s\n", pkg ? "; fingerprint matches " : "", pkg ? pkg : "",
               dir ? "; evidence matches" : "; evidence not checked");
    }
    free(dir);
    el_accept_record_free(&r);
    return rc == EL_PKG_OK ? 0 : cli_pkg_fail(&e);
}

int cli_cmd_accept(int argc, char **argv) {
    if (argc >= 3 && !strcmp(argv[2], "verify")) return accept_verify(argc, argv);
    const char *mpath = NULL, *model = NULL, *out = NULL, *keyp = NULL, *pub = NULL, *dc = NULL;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        const char **dst = !strcmp(a, "-m") || !strcmp(a, "--model") ? &model : !strcmp(a, "--out") ? &out
                         : !strcmp(a, "--key") ? &keyp : !strcmp(a, "--pub") ? &pub
                         : !strcmp(a, "--device-class") ? &dc : NULL;
        if (dst) {
            if (i + 1 >= argc) return cli_usage_error("accept", "%s needs a value", a);
            *dst = argv[++i];
        } else if (a[0] == '-') return cli_usage_error("accept", "unknown option '%s'", a);
        else if (!mpath) mpath = a;
        else return cli_usage_error("accept", "one MATRIX only ('%s')", a);
    }
    if (!mpath) return cli_usage_error("accept", "missing MATRIX.json");
    if (!model) return cli_usage_error("accept", "missing -m MODEL");
    if (!out) return cli_usage_error("accept", "missing --out DIR");
    if (!dc) dc = el_pkg_device_class();
    size_t dcl = strlen(dc);
    if (dcl == 0 || dcl > 63 || strspn(dc, "abcdefghijklmnopqrstuvwxyz0123456789_.-") != dcl)
        return cli_usage_error("accept", "--device-class: 1..63 characters of a-z 0-9 _ . -");
    static el_accept_matrix mx; /* large: cells and values */
    uint8_t msha[32];
    char why[512];
    if (!el_accept_matrix_read(mpath, &mx, msha, why, sizeof why)) {
        el_accept_matrix_free(&mx);
        return cli_failf("accept: %s", why);
    }
    int code = CLI_EXIT_ERROR;
    cell_res *cr = NULL;
    el_pkg_error pe;
    el_manifest man;
    memset(&man, 0, sizeof man);
    accept_ctx x = {.mx = &mx, .model = model, .pub = pub, .out = out};
    char exe[4096], logs[4096];
    ssize_t el = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (el <= 0) { code = cli_failf("accept: cannot find this executable (/proc/self/exe)"); goto done; }
    exe[el] = 0;
    x.exe = exe;
    /* a package: its manifest verified now (the children verify it again at each load) */
    char manp[4096];
    struct stat st;
    bool is_pkg = el_pkg_manifest_path(model, manp, sizeof manp) && stat(manp, &st) == 0;
    x.unsigned_model = !is_pkg;
    if (is_pkg) {
        if (!pub) { code = cli_usage_error("accept", "%s is a signed package: give --pub KEY.pub", model); goto done; }
        el_pubkey k;
        if (el_pkg_read_pub(pub, &k, &pe)) { code = cli_pkg_fail(&pe); goto done; }
        el_pkg_verify_opts vo = {.trusted = &k, .n_trusted = 1, .device_class = "cpu"};
        if (el_pkg_verify(model, &vo, &man, NULL, &pe)) { code = cli_pkg_fail(&pe); goto done; }
    }
    uint8_t sk[EL_PKG_SEC_BYTES];
    el_pubkey kpub;
    if (keyp && el_pkg_read_sec(keyp, sk, &kpub, &pe)) { code = cli_pkg_fail(&pe); goto done; }
    uint8_t model_sha[32];
    if (el_pkg_hash_file(model, model_sha, NULL, &pe)) { code = cli_pkg_fail(&pe); goto done; }
    char model_hex[65], matrix_hex[65];
    el_hex_encode(model_sha, 32, model_hex);
    el_hex_encode(msha, 32, matrix_hex);
    snprintf(logs, sizeof logs, "%s/logs", out);
    if ((mkdir(out, 0755) != 0 && errno != EEXIST) || (mkdir(logs, 0755) != 0 && errno != EEXIST)) {
        code = cli_failf("accept: %s: %s", out, strerror(errno));
        goto done;
    }
    cr = calloc((size_t)mx.n_cells, sizeof *cr);
    if (!cr) { code = cli_failf("out of memory"); goto done; }
    bool energy = isfinite(rapl_uj()), all_pass = true;
    fprintf(stderr, "accept: %s: %d cells (%s), %d prompts, %s on %s\n", mx.name, mx.n_cells,
            mx.pairwise ? "pairwise" : "all", mx.n_prompts, el_fs_base_name(model), dc);
    double t_start = cli_now_ms();
    for (int c = 0; c < mx.n_cells; c++) {
        char name[256];
        el_accept_cell_name(&mx, c, name, sizeof name);
        fprintf(stderr, "accept: [%d/%d] %s ... ", c + 1, mx.n_cells, name);
        if (!run_cell(&x, c, &cr[c])) { code = cli_failf("accept: cell %d could not run: %s", c + 1, strerror(errno)); goto done; }
        all_pass = all_pass && cr[c].pass;
        fprintf(stderr, "%s (TTFT p50 %.0f ms, %.1f tok/s, RSS %.0f MiB, %d/%d refused)\n", cr[c].pass ? "pass" : "FAIL",
                cr[c].ttft_p50, cr[c].tps, cr[c].rss_mib, cr[c].n_refused, cr[c].n_req);
    }
    char *rj = report_json(&x, cr, model_hex, matrix_hex, dc, energy, all_pass);
    char *rm = report_md(&x, cr, model_hex, dc, energy, all_pass);
    bool ok = rj && rm && write_text(out, "report.json", rj, why, sizeof why) && write_text(out, "report.md", rm, why, sizeof why);
    free(rj);
    free(rm);
    if (!ok || !write_plots(&x, cr, why, sizeof why)) { code = cli_failf("accept: %s", why[0] ? why : "out of memory"); goto done; }
    fprintf(stderr, "accept: %s in %.1f s: %s/report.json, report.md, latency.png, memory.png\n", all_pass ? "PASS" : "FAIL",
            (cli_now_ms() - t_start) / 1e3, out);
    if (keyp) {
        int passed = 0;
        for (int c = 0; c < mx.n_cells; c++) passed += cr[c].pass;
        el_accept_verdict v = {.pass = all_pass, .cells = mx.n_cells, .passed = passed};
        snprintf(v.device_class, sizeof v.device_class, "%s", dc);
        static const char *const ev[] = {"report.json", "report.md", "latency.png", "memory.png"};
        el_accept_record_in in = {.model_path = model, .package_name = is_pkg ? man.name : NULL,
                                  .package_version = man.version, .matrix_name = mx.name, .matrix_sha256 = msha,
                                  .routing_policy = "builtin-1", .verdicts = &v, .n_verdicts = 1, .evidence_dir = out,
                                  .evidence = ev, .n_evidence = 4};
        char rp[4096];
        snprintf(rp, sizeof rp, "%s/record.json", out);
        if (el_accept_record_write(rp, &in, sk, &pe)) { code = cli_pkg_fail(&pe); goto done; }
        fprintf(stderr, "accept: decision record %s signed by %s\n", rp, kpub.keyid);
    }
    code = all_pass ? CLI_EXIT_OK : 3;
done:
    if (x.ref) free(x.ref);
    free(cr);
    el_manifest_free(&man);
    el_accept_matrix_free(&mx);
    return code;
}
