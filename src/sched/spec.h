/*
 * spec.h — speculative decoding's control (layer L4): the n-gram drafter
 * (prompt lookup) and the controller that chooses how many tokens to draft.
 *
 * Drafter: the continuation, in the token history, of the most recent earlier
 * occurrence of the history's last n tokens, for n from ngram_max down to
 * ngram_min (the longest match wins); at most max tokens. No model involved:
 * strong where the output copies its context (code edits, summaries).
 *
 * Controller (seed 000 §5.6): per generation, α = the acceptance rate of
 * drafted tokens over the last EL_SPEC_WINDOW observations, and c = the
 * measured cost of verifying one more position relative to a plain decode
 * step. Each round it picks γ in [γmin, γmax] maximising the expected tokens
 * per unit of time, (1 − α^(γ+1)) / (1 − α) / (1 + γ·c); if the best of those
 * is under EL_SPEC_MIN_GAIN, speculation is off for the round (γ = 0) — and
 * because an n-gram draft costs nothing, α keeps being measured on plain
 * steps (was the draft's first token the one decoded?), so speculation comes
 * back when α recovers. Pure C, no allocation after el_spec_ctl_init.
 *
 * With a draft model (EL_SPEC_DRAFT) drafting costs time: the draft's
 * measured time per drafted token, relative to a plain target step, is added
 * to c (c = (t_row + t_draft) / t_plain), so γ shrinks and speculation turns
 * off as the draft gets dearer. While off, α is re-measured by an occasional
 * one-token probe of the draft (EL_SPEC_PROBE_EVERY plain steps), so it
 * comes back on when α recovers.
 */
#ifndef EL_SCHED_SPEC_H
#define EL_SCHED_SPEC_H
#include <stdbool.h>
#include <stdint.h>

#define EL_SPEC_WINDOW 64     /* draft-token outcomes α is estimated over */
#define EL_SPEC_MIN_GAIN 1.05 /* expected speedup below which a round runs plain */
#define EL_SPEC_MAX_DRAFT 32
#define EL_SPEC_PROBE_EVERY 8 /* draft model, speculation off: plain steps between one-token probes */

/* Up to max tokens proposed after hist[0..n) (see above); returns the count. */
int el_spec_ngram_draft(const int32_t *hist, int n, int ngram_min, int ngram_max, int max, int32_t *out);

typedef struct el_spec_ctl {
    int gamma_min, gamma_max;
    bool fixed;                        /* always gamma_max (no control) */
    uint8_t outcome[EL_SPEC_WINDOW];   /* 1 accepted, 0 rejected, ring */
    int n_outcome, head;
    double t_plain_ms, t_row_ms;       /* EMA: a plain decode step; each verified position beyond the first */
    int n_plain, n_verify;             /* measurements so far */
    double t_draft_ms;                 /* EMA: a draft model's time per drafted token (0: free drafts) */
    int n_draft_timed;
    /* totals for the report */
    long drafted, accepted, rounds, plain_steps;
    double last_gain;                  /* expected speedup of the last choice */
    int last_gamma;
} el_spec_ctl;

void el_spec_ctl_init(el_spec_ctl *c, int gamma_min, int gamma_max, bool fixed);
/* α over the window; 0.5 (a neutral prior) before any observation. */
double el_spec_alpha(const el_spec_ctl *c);
/* c: the relative cost of one more drafted and verified position (the
 * verification row: 0.1 before measurements; plus the draft model's time). */
double el_spec_row_cost(const el_spec_ctl *c);
/* γ for the next round (0: run a plain step); at most `available` (the draft's length). */
int el_spec_choose(el_spec_ctl *c, int available);
/* Outcome of a draft token (true: the target produced it too). */
void el_spec_observe(el_spec_ctl *c, bool accepted);
/* Timing: a plain step of t ms; a verification of rows positions in t ms. */
void el_spec_time_plain(el_spec_ctl *c, double t_ms);
void el_spec_time_verify(el_spec_ctl *c, int rows, double t_ms);
/* A draft model proposed n tokens in t ms (its cost joins c). */
void el_spec_time_draft(el_spec_ctl *c, int n, double t_ms);
/* Expected tokens per plain-step time for γ at acceptance α and row cost c. */
double el_spec_expected_gain(double alpha, double row_cost, int gamma);

#endif
