/*
 * metrics.h — the server's Prometheus counters and histograms (layer L6).
 *
 * Counters and histograms live here behind one mutex; gauges (slots busy,
 * queue depth) belong to the server's scheduler state and are passed in when
 * the text is rendered, so /metrics reads them under the scheduler's lock.
 */
#ifndef EL_SERVICE_METRICS_H
#define EL_SERVICE_METRICS_H
#include <pthread.h>
#include <stdint.h>

#define EL_HIST_MAX_BUCKETS 16

typedef struct el_hist {
    int n_le;                              /* finite bucket bounds */
    double le[EL_HIST_MAX_BUCKETS];        /* upper bounds, ascending */
    uint64_t bucket[EL_HIST_MAX_BUCKETS];  /* non-cumulative counts per bound */
    uint64_t count;                        /* all observations (the +Inf bucket) */
    double sum;
} el_hist;

typedef enum { EL_REQ_DONE = 0, EL_REQ_CANCELLED, EL_REQ_FAILED, EL_REQ_REJECTED, EL_REQ_N_OUTCOMES } el_req_outcome;

typedef struct el_metrics {
    pthread_mutex_t mu;
    uint64_t requests[EL_REQ_N_OUTCOMES];
    uint64_t prompt_tokens, generated_tokens;
    uint64_t spec_drafted, spec_accepted, spec_rounds, spec_plain; /* speculative decoding (serve --spec) */
    el_hist ttft, itl;
} el_metrics;

void el_metrics_init(el_metrics *m);
void el_metrics_destroy(el_metrics *m);
void el_metrics_request(el_metrics *m, el_req_outcome o);
void el_metrics_tokens(el_metrics *m, int n_prompt, int n_generated);
void el_metrics_ttft(el_metrics *m, double seconds);
/* One generation's speculative-decoding counts (el_generate_stats). */
void el_metrics_spec(el_metrics *m, int drafted, int accepted, int rounds, int plain_steps);
void el_metrics_itl(el_metrics *m, double seconds);
/* Prometheus text exposition format 0.0.4, malloc'd (NULL when out of memory). */
char *el_metrics_render(el_metrics *m, int slots_busy, int slots_total, int queue_depth);

#endif
