/*
 * metrics.c — Prometheus counters and histograms for the server.
 */
#include "server/metrics.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const double TTFT_LE[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
static const double ITL_LE[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5};

static void hist_init(el_hist *h, const double *le, int n) {
    memset(h, 0, sizeof *h);
    h->n_le = n;
    memcpy(h->le, le, (size_t)n * sizeof *le);
}

static void hist_observe(el_hist *h, double v) {
    if (!(v >= 0)) v = 0; /* NaN or a clock step backwards */
    for (int i = 0; i < h->n_le; i++)
        if (v <= h->le[i]) { h->bucket[i]++; break; }
    h->count++;
    h->sum += v;
}

void el_metrics_init(el_metrics *m) {
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->mu, NULL);
    hist_init(&m->ttft, TTFT_LE, (int)(sizeof TTFT_LE / sizeof TTFT_LE[0]));
    hist_init(&m->itl, ITL_LE, (int)(sizeof ITL_LE / sizeof ITL_LE[0]));
}

void el_metrics_destroy(el_metrics *m) { pthread_mutex_destroy(&m->mu); }

void el_metrics_request(el_metrics *m, el_req_outcome o) {
    if ((unsigned)o >= EL_REQ_N_OUTCOMES) return;
    pthread_mutex_lock(&m->mu);
    m->requests[o]++;
    pthread_mutex_unlock(&m->mu);
}

void el_metrics_tokens(el_metrics *m, int n_prompt, int n_generated) {
    pthread_mutex_lock(&m->mu);
    if (n_prompt > 0) m->prompt_tokens += (uint64_t)n_prompt;
    if (n_generated > 0) m->generated_tokens += (uint64_t)n_generated;
    pthread_mutex_unlock(&m->mu);
}

void el_metrics_spec(el_metrics *m, int drafted, int accepted, int rounds, int plain_steps) {
    pthread_mutex_lock(&m->mu);
    if (drafted > 0) m->spec_drafted += (uint64_t)drafted;
    if (accepted > 0) m->spec_accepted += (uint64_t)accepted;
    if (rounds > 0) m->spec_rounds += (uint64_t)rounds;
    if (plain_steps > 0) m->spec_plain += (uint64_t)plain_steps;
    pthread_mutex_unlock(&m->mu);
}

void el_metrics_ttft(el_metrics *m, double s) {
    pthread_mutex_lock(&m->mu);
    hist_observe(&m->ttft, s);
    pthread_mutex_unlock(&m->mu);
}

void el_metrics_itl(el_metrics *m, double s) {
    pthread_mutex_lock(&m->mu);
    hist_observe(&m->itl, s);
    pthread_mutex_unlock(&m->mu);
}

typedef struct tbuf { char *p; size_t len, cap; bool oom; } tbuf;

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void tb_printf(tbuf *b, const char *fmt, ...) {
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) { b->oom = true; return; }
        if ((size_t)n < b->cap - b->len) { b->len += (size_t)n; return; }
        size_t cap = b->cap * 2 + (size_t)n + 1;
        char *p = realloc(b->p, cap);
        if (!p) { b->oom = true; return; }
        b->p = p;
        b->cap = cap;
    }
}

static void hist_render(tbuf *b, const char *name, const char *help, const el_hist *h) {
    tb_printf(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    uint64_t cum = 0;
    for (int i = 0; i < h->n_le; i++) {
        cum += h->bucket[i];
        tb_printf(b, "%s_bucket{le=\"%g\"} %llu\n", name, h->le[i], (unsigned long long)cum);
    }
    tb_printf(b, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)h->count);
    tb_printf(b, "%s_sum %.9g\n%s_count %llu\n", name, h->sum, name, (unsigned long long)h->count);
}

char *el_metrics_render(el_metrics *m, int slots_busy, int slots_total, int queue_depth) {
    static const char *const STATE[EL_REQ_N_OUTCOMES] = {"done", "cancelled", "failed", "rejected"};
    tbuf b = {.cap = 4096};
    b.p = malloc(b.cap);
    if (!b.p) return NULL;
    b.p[0] = 0;
    pthread_mutex_lock(&m->mu);
    tb_printf(&b, "# HELP edgellm_requests_total Completion requests by how they ended "
                  "(rejected: answered with an error before they were queued).\n"
                  "# TYPE edgellm_requests_total counter\n");
    for (int i = 0; i < EL_REQ_N_OUTCOMES; i++)
        tb_printf(&b, "edgellm_requests_total{state=\"%s\"} %llu\n", STATE[i], (unsigned long long)m->requests[i]);
    tb_printf(&b, "# HELP edgellm_prompt_tokens_total Prompt tokens evaluated.\n"
                  "# TYPE edgellm_prompt_tokens_total counter\n"
                  "edgellm_prompt_tokens_total %llu\n", (unsigned long long)m->prompt_tokens);
    tb_printf(&b, "# HELP edgellm_generated_tokens_total Tokens generated.\n"
                  "# TYPE edgellm_generated_tokens_total counter\n"
                  "edgellm_generated_tokens_total %llu\n", (unsigned long long)m->generated_tokens);
    tb_printf(&b, "# HELP edgellm_spec_drafted_tokens_total Draft tokens verified (speculative decoding).\n"
                  "# TYPE edgellm_spec_drafted_tokens_total counter\n"
                  "edgellm_spec_drafted_tokens_total %llu\n"
                  "# HELP edgellm_spec_accepted_tokens_total Draft tokens accepted.\n"
                  "# TYPE edgellm_spec_accepted_tokens_total counter\n"
                  "edgellm_spec_accepted_tokens_total %llu\n"
                  "# HELP edgellm_spec_verifications_total Forward passes that verified a draft.\n"
                  "# TYPE edgellm_spec_verifications_total counter\n"
                  "edgellm_spec_verifications_total %llu\n"
                  "# HELP edgellm_spec_plain_steps_total Decode steps without a draft (speculation off or nothing to draft).\n"
                  "# TYPE edgellm_spec_plain_steps_total counter\n"
                  "edgellm_spec_plain_steps_total %llu\n"
                  "# HELP edgellm_spec_acceptance_rate Accepted / drafted tokens since start (0 before any).\n"
                  "# TYPE edgellm_spec_acceptance_rate gauge\n"
                  "edgellm_spec_acceptance_rate %.6f\n",
              (unsigned long long)m->spec_drafted, (unsigned long long)m->spec_accepted,
              (unsigned long long)m->spec_rounds, (unsigned long long)m->spec_plain,
              m->spec_drafted ? (double)m->spec_accepted / (double)m->spec_drafted : 0.0);
    hist_render(&b, "edgellm_ttft_seconds", "Time from request arrival to the first generated token.", &m->ttft);
    hist_render(&b, "edgellm_itl_seconds", "Time between consecutive generated tokens.", &m->itl);
    pthread_mutex_unlock(&m->mu);
    tb_printf(&b, "# HELP edgellm_slots_busy Slots running a request.\n# TYPE edgellm_slots_busy gauge\n"
                  "edgellm_slots_busy %d\n", slots_busy);
    tb_printf(&b, "# HELP edgellm_slots_total Slots (sessions) the server has.\n# TYPE edgellm_slots_total gauge\n"
                  "edgellm_slots_total %d\n", slots_total);
    tb_printf(&b, "# HELP edgellm_queue_depth Requests waiting for a slot.\n# TYPE edgellm_queue_depth gauge\n"
                  "edgellm_queue_depth %d\n", queue_depth);
    if (b.oom) { free(b.p); return NULL; }
    return b.p;
}
