/*
 * spec.c — the n-gram drafter and the speculation controller (see spec.h).
 */
#include "sched/spec.h"

#include <math.h>
#include <string.h>

int el_spec_ngram_draft(const int32_t *hist, int n, int ngram_min, int ngram_max, int max, int32_t *out) {
    if (!hist || n < 2 || max <= 0 || ngram_min < 1) return 0;
    if (ngram_max > n - 1) ngram_max = n - 1;
    for (int g = ngram_max; g >= ngram_min; g--) {
        const int32_t *tail = hist + n - g;
        /* the most recent earlier occurrence: start positions n-g-1 down to 0 */
        for (int st = n - g - 1; st >= 0; st--) {
            if (hist[st] != tail[0] || memcmp(hist + st, tail, sizeof *tail * (size_t)g) != 0) continue;
            int k = 0;
            for (int j = st + g; j < n && k < max; j++) out[k++] = hist[j];
            if (k > 0) return k;
        }
    }
    return 0;
}

static double ema(double old, double x, int n) { return n == 0 ? x : old + (x - old) * (n < 8 ? 1.0 / (n + 1) : 0.125); }

void el_spec_ctl_init(el_spec_ctl *c, int gamma_min, int gamma_max, bool fixed) {
    memset(c, 0, sizeof *c);
    if (gamma_max > EL_SPEC_MAX_DRAFT) gamma_max = EL_SPEC_MAX_DRAFT;
    if (gamma_max < 1) gamma_max = 1;
    if (gamma_min < 1) gamma_min = 1;
    if (gamma_min > gamma_max) gamma_min = gamma_max;
    c->gamma_min = gamma_min;
    c->gamma_max = gamma_max;
    c->fixed = fixed;
}

double el_spec_alpha(const el_spec_ctl *c) {
    if (c->n_outcome == 0) return 0.5;
    int a = 0;
    for (int i = 0; i < c->n_outcome; i++) a += c->outcome[i];
    return (double)a / c->n_outcome;
}

double el_spec_row_cost(const el_spec_ctl *c) {
    double r = 0.1;
    if (c->n_plain > 0 && c->n_verify > 0 && c->t_plain_ms > 0) r = c->t_row_ms / c->t_plain_ms;
    if (r < 0.0) r = 0.0;
    if (c->n_plain > 0 && c->n_draft_timed > 0 && c->t_plain_ms > 0) r += c->t_draft_ms / c->t_plain_ms;
    return r;
}

void el_spec_time_draft(el_spec_ctl *c, int n, double t_ms) {
    if (n < 1) return;
    c->t_draft_ms = ema(c->t_draft_ms, t_ms / n, c->n_draft_timed);
    c->n_draft_timed++;
}

double el_spec_expected_gain(double alpha, double row_cost, int gamma) {
    if (gamma <= 0) return 1.0;
    double tokens = alpha >= 1.0 ? gamma + 1.0 : (1.0 - pow(alpha, gamma + 1)) / (1.0 - alpha);
    return tokens / (1.0 + gamma * row_cost);
}

int el_spec_choose(el_spec_ctl *c, int available) {
    int gmax = available < c->gamma_max ? available : c->gamma_max;
    c->last_gamma = 0;
    c->last_gain = 1.0;
    if (gmax < c->gamma_min) return 0;
    if (c->fixed) {
        c->last_gamma = gmax;
        c->last_gain = el_spec_expected_gain(el_spec_alpha(c), el_spec_row_cost(c), gmax);
        return gmax;
    }
    if (c->n_plain == 0) return 0; /* measure a plain step first: c needs its time */
    const double a = el_spec_alpha(c), rc = el_spec_row_cost(c);
    int best = 0;
    double best_gain = 1.0;
    for (int g = c->gamma_min; g <= gmax; g++) {
        const double gain = el_spec_expected_gain(a, rc, g);
        if (gain > best_gain) { best_gain = gain; best = g; }
    }
    if (best_gain < EL_SPEC_MIN_GAIN) return 0;
    c->last_gamma = best;
    c->last_gain = best_gain;
    return best;
}

void el_spec_observe(el_spec_ctl *c, bool accepted) {
    c->outcome[c->head] = accepted ? 1 : 0;
    c->head = (c->head + 1) % EL_SPEC_WINDOW;
    if (c->n_outcome < EL_SPEC_WINDOW) c->n_outcome++;
}

void el_spec_time_plain(el_spec_ctl *c, double t_ms) {
    c->t_plain_ms = ema(c->t_plain_ms, t_ms, c->n_plain);
    c->n_plain++;
}

void el_spec_time_verify(el_spec_ctl *c, int rows, double t_ms) {
    if (rows < 2 || c->n_plain == 0) return;
    const double per_row = (t_ms - c->t_plain_ms) / (rows - 1);
    c->t_row_ms = ema(c->t_row_ms, per_row, c->n_verify);
    c->n_verify++;
}
