/*
 * sampler.h — token sampling in llama.cpp's order: penalties (repeat,
 * frequency, presence over the last N tokens) → top-k → top-p → min-p →
 * temperature → draw from a seeded RNG. temp <= 0 is greedy (argmax after
 * penalties). All buffers are allocated once in el_sampler_new; sampling
 * allocates nothing.
 */
#ifndef EL_RUNTIME_SAMPLER_H
#define EL_RUNTIME_SAMPLER_H
#include <stdbool.h>
#include <stdint.h>

#include "edgellm.h"

typedef struct el_sampler el_sampler;

el_sampler *el_sampler_new(const el_sampling *sp, int n_vocab);
void el_sampler_free(el_sampler *s);
void el_sampler_reset(el_sampler *s); /* clears penalty history, reseeds RNG */
/* Picks a token from logits[n_vocab] (not modified). A NaN logit never wins
 * (it counts as -inf), +inf counts as FLT_MAX. */
int32_t el_sampler_sample(el_sampler *s, const float *logits);
/* Speculative sampling against a one-token draft (an n-gram or any
 * deterministic proposal): greedy → the argmax, *accepted = (it is draft);
 * otherwise after the same penalties/top-k/top-p/min-p/temperature, draft is
 * accepted with probability p(draft), else the token is drawn from p with
 * draft removed (renormalised) — so the token is distributed exactly as
 * el_sampler_sample's, though the RNG stream differs. */
int32_t el_sampler_sample_draft(el_sampler *s, const float *logits, int32_t draft, bool *accepted);
/* A constraint on which tokens may be drawn (a grammar: runtime/grammar.h).
 * allowed(user, id): 1 the token may follow, 0 not, < 0 an error.
 * mask(user, flags): flags[id] = 1 / 0 for every id of the vocabulary; the
 * number allowed, or < 0 on error. */
typedef struct el_sampler_filter {
    int (*allowed)(void *user, int32_t id);
    int (*mask)(void *user, uint8_t *flags);
    void *user;
} el_sampler_filter;
#define EL_SAMPLER_NO_TOKEN (-2)     /* the filter allows no token */
#define EL_SAMPLER_FILTER_ERROR (-3) /* the filter failed (a limit) */
/* el_sampler_sample_draft (draft < 0: el_sampler_sample) under a filter f
 * (NULL: none). The token is distributed exactly as the unfiltered chain's
 * would be on logits where every token f rejects is -inf (greedy: the best
 * allowed token, ties → lowest id), but f->mask runs only when needed: the
 * best token (greedy) or the top_k + 64 best (top-k) are checked one by one
 * first; only without top-k and with top-p / min-p, or when those checks find
 * too few allowed tokens, is the whole mask computed. Returns
 * EL_SAMPLER_NO_TOKEN / EL_SAMPLER_FILTER_ERROR instead of a token. */
int32_t el_sampler_sample_filtered(el_sampler *s, const float *logits, const el_sampler_filter *f, int32_t draft,
                                   bool *accepted);
/* How many times the filtered sampler computed a whole mask / checked single tokens. */
void el_sampler_filter_counts(const el_sampler *s, int *n_masks, int *n_checks);
/* How many logits of the row the last el_sampler_sample read were NaN or
 * ±inf (counted in the pass that copies the row: costs nothing extra). */
int el_sampler_nonfinite(const el_sampler *s);
/* Records a token in the penalty history (prompt tokens and generated ones). */
void el_sampler_accept(el_sampler *s, int32_t tok);

/* log-softmax helpers for reporting: logprob of `id`, and the k best. */
float el_logprob_of(const float *logits, int n_vocab, int32_t id);
/* Writes up to k (id, logprob) pairs sorted by descending logprob; returns k written. */
int el_top_logprobs(const float *logits, int n_vocab, int k, int32_t *ids, float *lps);

#endif
