/*
 * sampler.c — llama.cpp-style token sampling.
 *
 * Order (llama.cpp common sampler chain, minus DRY/XTC/typical):
 *   logit bias → penalties → top-k → top-p → min-p → temperature → softmax → draw.
 *
 * Logit bias: el_sampling's (id, bias) pairs are copied at el_sampler_new
 * (ids outside [0, n_vocab) dropped, a repeated id's biases add up) and each
 * bias is added to its token's logit first, as llama.cpp's logit-bias
 * sampler; greedy sampling sees it too.
 *
 * Penalties (llama.cpp's llama_sampler_penalties), for every distinct token t
 * among the last penalty_last_n accepted tokens, with c = its count there:
 *   logit = logit <= 0 ? logit * repeat_penalty : logit / repeat_penalty
 *   logit -= c * freq_penalty + (c > 0) * presence_penalty
 * They are skipped when repeat_penalty == 1, freq == 0 and presence == 0.
 * penalty_last_n: 0 disables the history; < 0 ("context") means
 * EL_SAMPLER_DEFAULT_LAST_N (64) here, since the sampler does not know the
 * context size — el_generate passes the session's context for < 0.
 * The history is capped at EL_SAMPLER_MAX_LAST_N tokens.
 *
 * temp <= 0: greedy — argmax of the penalised logits, ties → lowest id (the
 * truncation samplers cannot change the argmax, so they are not run).
 * top_k <= 0 or >= n_vocab: off. top-k keeps the k best (ties → lower id).
 * top_p in (0,1): the smallest prefix (by descending probability, softmax of
 * the current candidates at temperature 1) whose cumulative probability is
 * >= top_p; at least one token (min_keep = 1). Off when >= 1 or <= 0.
 * min_p > 0: keeps tokens with p >= min_p * p_max, i.e. logit >= max_logit +
 * log(min_p), over the current candidates (before temperature, as llama.cpp).
 * Then logits are divided by temp, softmaxed (double accumulation) and one
 * token is drawn.
 *
 * RNG: xoshiro256** seeded through splitmix64 from el_sampling.seed; one
 * 64-bit draw per non-greedy sample, u = (x >> 11) * 2^-53 in [0,1); the token
 * is the first candidate whose cumulative (unnormalised) weight exceeds
 * u * total, candidates in descending-logit order when a truncation sorted
 * them, otherwise in id order. Same seed + same inputs → same tokens on every
 * platform with IEEE floats and a correctly rounded exp(). The stream does
 * not reproduce llama.cpp's std::mt19937 draws. Every seed value, including
 * llama.cpp's "random" 0xFFFFFFFF, is deterministic here; callers wanting
 * randomness pass a random seed. el_sampler_reset reseeds.
 *
 * Allocation: el_sampler_new allocates every buffer (candidate ids, working
 * logits, weights, counts, marks — n_vocab each — and the history ring).
 * Non-finite logits: el_sampler_sample counts them (el_sampler_nonfinite) in
 * the pass that copies the row, for the caller to fail the step.
 *
 * el_sampler_sample / el_sampler_accept / el_logprob_of / el_top_logprobs
 * never allocate: top-k is a size-k heap built in the candidate array,
 * top-p without top-k heapifies the candidates in place and pops only as many
 * as it keeps, el_top_logprobs builds its heap in the caller's ids[] array.
 */
#include "runtime/sampler.h"

#include "backend/cpu/ops.h"

#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define EL_SAMPLER_DEFAULT_LAST_N 64
#define EL_SAMPLER_MAX_LAST_N (1 << 20)

struct el_sampler {
    el_sampling p;
    int n_vocab;
    int32_t *cand;  /* candidate token ids */
    float *work;    /* penalised logits, by token id */
    double *w;      /* per candidate position: softmax weights */
    int32_t *count; /* occurrences of each id in the history window */
    uint8_t *mark;  /* scratch: id already penalised in this call */
    int32_t *hist;  /* ring buffer of the last hist_cap accepted tokens */
    int32_t *bias_id; /* logit bias, owned copies (the caller's arrays may go) */
    float *bias;
    int n_bias;
    int hist_cap, hist_len, hist_head;
    uint64_t rng[4];
    int n_nonfinite; /* NaN / inf logits in the row of the last sample */
    uint8_t *allow;  /* filter: the whole mask, by token id */
    int32_t *kept;   /* filter: allowed candidates found one by one */
    int n_masks, n_checks;
};

int el_sampler_nonfinite(const el_sampler *s) { return s ? s->n_nonfinite : 0; }

/* Weak so that a public-API translation unit may define it instead. */
el_sampling el_sampling_default(void) {
    el_sampling s = {
        .temp = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f,
        .repeat_penalty = 1.0f, .freq_penalty = 0.0f, .presence_penalty = 0.0f,
        .penalty_last_n = 64, .seed = 0xFFFFFFFFu, /* LLAMA_DEFAULT_SEED; deterministic here */
    };
    return s;
}

/* ---- RNG ------------------------------------------------------------------ */

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void rng_seed(uint64_t s[4], uint64_t seed) {
    for (int i = 0; i < 4; i++) s[i] = splitmix64(&seed);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t rng_next(uint64_t s[4]) { /* xoshiro256** */
    uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
}

static double rng_unit(uint64_t s[4]) { return (double)(rng_next(s) >> 11) * 0x1.0p-53; }

/* ---- ordering helpers ------------------------------------------------------ */

/* NaN → -inf, +inf → FLT_MAX, so every comparison is a total order. */
static inline float san(float x) {
    return x == x ? (x < FLT_MAX ? x : FLT_MAX) : -INFINITY; /* branch-free, vectorises */
}

/* a ranks above b: larger value, ties → lower id. v must be sanitised. */
static inline bool better(const float *v, int32_t a, int32_t b) {
    return v[a] > v[b] || (v[a] == v[b] && a < b);
}

/* Heap over ids h[0..n); best_root: max-heap (root = best) else min-heap
 * (root = worst). */
static inline bool above(const float *v, int32_t a, int32_t b, bool best_root) {
    return best_root ? better(v, a, b) : better(v, b, a);
}

static void sift_down(const float *v, int32_t *h, int n, int i, bool best_root) {
    for (;;) {
        int l = 2 * i + 1, r = l + 1, top = i;
        if (l < n && above(v, h[l], h[top], best_root)) top = l;
        if (r < n && above(v, h[r], h[top], best_root)) top = r;
        if (top == i) return;
        int32_t t = h[i];
        h[i] = h[top];
        h[top] = t;
        i = top;
    }
}

static void heapify(const float *v, int32_t *h, int n, bool best_root) {
    for (int i = n / 2 - 1; i >= 0; i--) sift_down(v, h, n, i, best_root);
}

/* Puts the k best of ids[0..n) (ids NULL: 0..n-1) by v into out[0..k), best
 * first. out must not alias ids. */
static void select_top_of(const float *v, const int32_t *ids, int n, int k, int32_t *out) {
    for (int i = 0; i < k; i++) out[i] = ids ? ids[i] : i;
    heapify(v, out, k, false); /* root = worst of the kept */
    for (int32_t j = k; j < n; j++) {
        int32_t id = ids ? ids[j] : j;
        if (better(v, id, out[0])) {
            out[0] = id;
            sift_down(v, out, k, 0, false);
        }
    }
    /* heap sort: moving the worst to the end leaves out[] best-first */
    for (int end = k - 1; end > 0; end--) {
        int32_t t = out[0];
        out[0] = out[end];
        out[end] = t;
        sift_down(v, out, end, 0, false);
    }
}

static void select_top(const float *v, int n, int k, int32_t *out) { select_top_of(v, NULL, n, k, out); }

/* ---- lifecycle --------------------------------------------------------------- */

el_sampler *el_sampler_new(const el_sampling *sp, int n_vocab) {
    if (n_vocab <= 0) return NULL;
    el_sampler *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->p = sp ? *sp : el_sampling_default();
    s->n_vocab = n_vocab;
    int last_n = s->p.penalty_last_n;
    if (last_n < 0) last_n = EL_SAMPLER_DEFAULT_LAST_N;
    if (last_n > EL_SAMPLER_MAX_LAST_N) last_n = EL_SAMPLER_MAX_LAST_N;
    s->hist_cap = last_n;
    size_t n = (size_t)n_vocab;
    s->cand = malloc(n * sizeof *s->cand);
    s->work = malloc(n * sizeof *s->work);
    s->w = malloc(n * sizeof *s->w);
    s->count = calloc(n, sizeof *s->count);
    s->mark = calloc(n, sizeof *s->mark);
    s->hist = last_n > 0 ? malloc((size_t)last_n * sizeof *s->hist) : NULL;
    int nb = s->p.n_logit_bias > 0 && s->p.logit_bias_id && s->p.logit_bias ? s->p.n_logit_bias : 0;
    s->bias_id = nb ? malloc((size_t)nb * sizeof *s->bias_id) : NULL;
    s->bias = nb ? malloc((size_t)nb * sizeof *s->bias) : NULL;
    s->allow = malloc(n);
    s->kept = malloc(n * sizeof *s->kept);
    if (!s->allow || !s->kept || !s->cand || !s->work || !s->w || !s->count || !s->mark || (last_n > 0 && !s->hist) ||
        (nb && (!s->bias_id || !s->bias))) {
        el_sampler_free(s);
        return NULL;
    }
    for (int i = 0; i < nb; i++) {
        int32_t id = s->p.logit_bias_id[i];
        float b = s->p.logit_bias[i];
        if (id < 0 || id >= n_vocab || !isfinite(b)) continue;
        s->bias_id[s->n_bias] = id;
        s->bias[s->n_bias++] = b;
    }
    s->p.n_logit_bias = 0; /* the copies above are the sampler's own */
    s->p.logit_bias_id = NULL;
    s->p.logit_bias = NULL;
    rng_seed(s->rng, s->p.seed);
    return s;
}

void el_sampler_free(el_sampler *s) {
    if (!s) return;
    free(s->cand);
    free(s->work);
    free(s->w);
    free(s->count);
    free(s->mark);
    free(s->hist);
    free(s->bias_id);
    free(s->bias);
    free(s->allow);
    free(s->kept);
    free(s);
}

void el_sampler_reset(el_sampler *s) {
    if (!s) return;
    memset(s->count, 0, (size_t)s->n_vocab * sizeof *s->count);
    s->hist_len = s->hist_head = 0;
    rng_seed(s->rng, s->p.seed);
}

void el_sampler_accept(el_sampler *s, int32_t tok) {
    if (!s || tok < 0 || tok >= s->n_vocab || s->hist_cap == 0) return;
    if (s->hist_len < s->hist_cap) {
        s->hist[(s->hist_head + s->hist_len) % s->hist_cap] = tok;
        s->hist_len++;
    } else {
        s->count[s->hist[s->hist_head]]--;
        s->hist[s->hist_head] = tok;
        s->hist_head = (s->hist_head + 1) % s->hist_cap;
    }
    s->count[tok]++;
}

/* ---- sampling ----------------------------------------------------------------- */

static void apply_penalties(el_sampler *s) {
    const el_sampling *p = &s->p;
    if (s->hist_len == 0 ||
        (p->repeat_penalty == 1.0f && p->freq_penalty == 0.0f && p->presence_penalty == 0.0f))
        return;
    for (int i = 0; i < s->hist_len; i++) {
        int32_t t = s->hist[i]; /* ring order does not matter here */
        if (s->mark[t]) continue;
        s->mark[t] = 1;
        float l = s->work[t];
        int c = s->count[t];
        if (p->repeat_penalty != 1.0f && p->repeat_penalty > 0.0f)
            l = l <= 0.0f ? l * p->repeat_penalty : l / p->repeat_penalty;
        l -= (float)c * p->freq_penalty + (float)(c > 0) * p->presence_penalty;
        s->work[t] = san(l);
    }
    for (int i = 0; i < s->hist_len; i++) s->mark[s->hist[i]] = 0;
}

static int32_t argmax(const float *v, int n) {
    int32_t best = 0;
    float bv = v[0];
    for (int32_t i = 1; i < n; i++)
        if (v[i] > bv) { bv = v[i]; best = i; } /* strict: ties keep the lowest id */
    return best;
}

/* draft >= 0: the speculative-sampling rule for a one-token draft (see sampler.h). */
static int32_t sample_impl(el_sampler *s, const float *logits, int32_t draft, bool *accepted, const el_sampler_filter *f);

int32_t el_sampler_sample(el_sampler *s, const float *logits) { return sample_impl(s, logits, -1, NULL, NULL); }

int32_t el_sampler_sample_draft(el_sampler *s, const float *logits, int32_t draft, bool *accepted) {
    bool acc = false;
    int32_t t = sample_impl(s, logits, draft, &acc, NULL);
    if (accepted) *accepted = acc;
    return t;
}

int32_t el_sampler_sample_filtered(el_sampler *s, const float *logits, const el_sampler_filter *f, int32_t draft,
                                   bool *accepted) {
    bool acc = false;
    int32_t t = sample_impl(s, logits, draft, &acc, f && f->allowed && f->mask ? f : NULL);
    if (accepted) *accepted = acc;
    return t;
}

void el_sampler_filter_counts(const el_sampler *s, int *n_masks, int *n_checks) {
    if (n_masks) *n_masks = s ? s->n_masks : 0;
    if (n_checks) *n_checks = s ? s->n_checks : 0;
}

/* The whole mask: c[0..*n) = the allowed ids in id order. */
static int full_mask(el_sampler *s, const el_sampler_filter *f, int *n) {
    s->n_masks++;
    int cnt = f->mask(f->user, s->allow);
    if (cnt < 0) return EL_SAMPLER_FILTER_ERROR;
    int m = 0;
    for (int i = 0; i < s->n_vocab; i++)
        if (s->allow[i]) s->cand[m++] = i;
    *n = m;
    return m ? 0 : EL_SAMPLER_NO_TOKEN;
}

static int check_one(el_sampler *s, const el_sampler_filter *f, int32_t id) {
    s->n_checks++;
    return f->allowed(f->user, id);
}

#define EL_FILTER_LOOKAHEAD 64 /* tokens checked one by one before the whole mask */
#define EL_FILTER_REDRAWS 8     /* rejection sampling: draws before the whole mask */

/* The candidates under a filter, in c[0..*n); *sorted when best-first.
 * greedy: c[0] = the best allowed token. top_k in (0, nv): the top_k best
 * allowed tokens, best first. Otherwise every allowed token (id order).
 * 0, or EL_SAMPLER_NO_TOKEN / EL_SAMPLER_FILTER_ERROR. */
static int filter_candidates(el_sampler *s, const el_sampler_filter *f, bool greedy, bool reject, int *n, bool *sorted) {
    const el_sampling *p = &s->p;
    const int nv = s->n_vocab;
    const float *v = s->work;
    int32_t *c = s->cand;
    *sorted = true;
    if (greedy) {
        int32_t t = argmax(v, nv);
        int r = check_one(s, f, t);
        if (r < 0) return EL_SAMPLER_FILTER_ERROR;
        if (r == 1) { c[0] = t; *n = 1; return 0; }
        int look = EL_FILTER_LOOKAHEAD < nv ? EL_FILTER_LOOKAHEAD : nv;
        select_top(v, nv, look, s->kept);
        for (int i = 1; i < look; i++) { /* kept[0] is t */
            r = check_one(s, f, s->kept[i]);
            if (r < 0) return EL_SAMPLER_FILTER_ERROR;
            if (r == 1) { c[0] = s->kept[i]; *n = 1; return 0; }
        }
        if (look == nv) return EL_SAMPLER_NO_TOKEN;
        int m, e = full_mask(s, f, &m);
        if (e) return e;
        int32_t best = c[0];
        for (int i = 1; i < m; i++) if (better(v, c[i], best)) best = c[i];
        c[0] = best;
        *n = 1;
        return 0;
    }
    if (p->top_k > 0 && p->top_k < nv) {
        const int k = p->top_k;
        int look = k + EL_FILTER_LOOKAHEAD < nv ? k + EL_FILTER_LOOKAHEAD : nv;
        select_top(v, nv, look, s->kept);
        int m = 0;
        for (int i = 0; i < look && m < k; i++) {
            int r = check_one(s, f, s->kept[i]);
            if (r < 0) return EL_SAMPLER_FILTER_ERROR;
            if (r == 1) c[m++] = s->kept[i];
        }
        if (m == k || look == nv) {
            *n = m;
            return m ? 0 : EL_SAMPLER_NO_TOKEN;
        }
        int e = full_mask(s, f, &m);
        if (e) return e;
        int kk = k < m ? k : m;
        select_top_of(v, c, m, kk, s->kept);
        memcpy(c, s->kept, sizeof *c * (size_t)kk);
        *n = kk;
        return 0;
    }
    *sorted = false;
    if (reject) { /* every token: the draw rejects what the filter refuses (sample_impl) */
        for (int i = 0; i < nv; i++) c[i] = i;
        *n = nv;
        return 0;
    }
    return full_mask(s, f, n);
}

static int32_t greedy_pick(el_sampler *s, const float *v, int nv, int32_t draft, bool *accepted) {
    int32_t t = argmax(v, nv);
    if (accepted) *accepted = draft >= 0 && t == draft;
    (void)s;
    return t;
}

static int32_t sample_impl(el_sampler *s, const float *logits, int32_t draft, bool *accepted, const el_sampler_filter *f) {
    if (accepted) *accepted = false;
    if (!s || !logits) return -1;
    const el_sampling *p = &s->p;
    const int nv = s->n_vocab;
    float *v = s->work;
    int32_t *c = s->cand;

    int bad = 0; /* NaN / ±inf in the row, counted in the copy pass (vectorises: no branch) */
    for (int i = 0; i < nv; i++) {
        uint32_t b;
        memcpy(&b, &logits[i], sizeof b);
        bad += (b & 0x7f800000u) == 0x7f800000u;
        v[i] = san(logits[i]);
    }
    s->n_nonfinite = bad;
    for (int i = 0; i < s->n_bias; i++) v[s->bias_id[i]] = san(v[s->bias_id[i]] + s->bias[i]);
    apply_penalties(s);

    const bool greedy = !(p->temp > 0.0f) || p->top_k == 1;
    int n;
    bool sorted = false;
    /* No truncation at all (no top-k / top-p / min-p) and no draft: p restricted
     * to the allowed set A is p(t) / p(A), which rejection sampling draws
     * exactly — draw from p, redraw while the token is refused; after
     * EL_FILTER_REDRAWS refusals the whole mask decides (still exact: the
     * result is A-distributed given either branch). */
    const bool reject = f && !greedy && draft < 0 && !(p->top_k > 0 && p->top_k < nv) &&
                        !(p->top_p > 0.0f && p->top_p < 1.0f) && !(p->min_p > 0.0f);
    if (f) { /* the grammar's candidates: top-k is applied there */
        int e = filter_candidates(s, f, greedy, reject, &n, &sorted);
        if (e) return e;
        if (greedy) {
            if (accepted) *accepted = draft >= 0 && c[0] == draft;
            return c[0];
        }
    } else if (greedy) {
        return greedy_pick(s, v, nv, draft, accepted);
    } else if (p->top_k > 0 && p->top_k < nv) { /* top-k */
        n = p->top_k;
        select_top(v, nv, n, c);
        sorted = true;
    } else {
        n = nv;
        for (int i = 0; i < nv; i++) c[i] = i;
    }

    /* top-p */
    if (p->top_p > 0.0f && p->top_p < 1.0f && n > 1) {
        float mx = v[c[0]];
        if (!sorted)
            for (int i = 1; i < n; i++) mx = v[c[i]] > mx ? v[c[i]] : mx;
        double sum = 0.0;
        for (int i = 0; i < n; i++) sum += exp((double)v[c[i]] - mx);
        const double target = (double)p->top_p * sum;
        double cum = 0.0;
        if (sorted) {
            for (int i = 0; i < n; i++) {
                cum += exp((double)v[c[i]] - mx);
                if (cum >= target) { n = i + 1; break; }
            }
        } else {
            /* lazy sort: pop the best from a max-heap until the mass is reached */
            heapify(v, c, n, true);
            int end = n;
            while (end > 0) {
                int32_t best = c[0];
                c[0] = c[end - 1];
                c[end - 1] = best;
                end--;
                sift_down(v, c, end, 0, true);
                cum += exp((double)v[best] - mx);
                if (cum >= target) break;
            }
            /* kept tokens are c[end..n), best at c[n-1]: move them to the front, best first */
            int m = n - end;
            for (int i = 0, j = n - 1; i < j && end + i < j; i++, j--) {
                int32_t t = c[end + i];
                c[end + i] = c[j];
                c[j] = t;
            }
            memmove(c, c + end, (size_t)m * sizeof *c);
            n = m;
            sorted = true;
        }
    }

    /* min-p */
    float mx = v[c[0]];
    if (!sorted)
        for (int i = 1; i < n; i++) mx = v[c[i]] > mx ? v[c[i]] : mx;
    if (p->min_p > 0.0f && n > 1 && mx > -INFINITY) {
        const float thr = mx + logf(p->min_p);
        int m = 0;
        for (int i = 0; i < n; i++)
            if (v[c[i]] >= thr) c[m++] = c[i];
        n = m;
    }

    /* temperature, softmax, draw */
    double u = rng_unit(s->rng);
    if (mx == -INFINITY && reject) { /* nothing finite: the best allowed token */
        int e = full_mask(s, f, &n);
        if (e) return e;
        sorted = false;
    }
    if (mx == -INFINITY) { /* nothing finite */
        int32_t t = c[0];
        if (!sorted)
            for (int i = 1; i < n; i++) t = better(v, c[i], t) ? c[i] : t;
        if (accepted) *accepted = t == draft;
        return t;
    }
    const double inv_t = 1.0 / (double)p->temp;
    double sum = 0.0;
    int di = -1; /* the draft's candidate position, if it is a candidate */
    for (int i = 0; i < n; i++) {
        s->w[i] = exp(((double)v[c[i]] - mx) * inv_t);
        sum += s->w[i];
        if (c[i] == draft) di = i;
    }
    if (draft >= 0) {
        /* Speculative sampling with a draft q that is all on `draft`: accept it
         * with probability min(1, p/q) = p(draft); else draw from
         * max(0, p − q) normalised, i.e. p without `draft`. The result is
         * distributed as p. */
        const double pd = di >= 0 ? s->w[di] / sum : 0.0;
        if (u < pd) {
            if (accepted) *accepted = true;
            return draft;
        }
        if (di >= 0) {
            sum -= s->w[di];
            s->w[di] = 0.0;
        }
        if (!(sum > 0.0)) return c[di == 0 && n > 1 ? 1 : 0];
        const double target2 = rng_unit(s->rng) * sum;
        double cum2 = 0.0;
        for (int i = 0; i < n; i++) {
            cum2 += s->w[i];
            if (cum2 > target2) return c[i];
        }
        for (int i = n - 1; i >= 0; i--)
            if (s->w[i] > 0.0) return c[i];
        return c[0];
    }
    if (reject) {
        double uu = u;
        for (int k = 0; k < EL_FILTER_REDRAWS; k++) {
            const double tg = uu * sum;
            double cm = 0.0;
            int32_t t = c[n - 1];
            for (int i = 0; i < n; i++) {
                cm += s->w[i];
                if (cm > tg) { t = c[i]; break; }
            }
            int r = check_one(s, f, t);
            if (r < 0) return EL_SAMPLER_FILTER_ERROR;
            if (r == 1 && s->w[t] > 0.0) return t; /* c is the identity here: w[t] is t's weight */
            uu = rng_unit(s->rng);
        }
        int e = full_mask(s, f, &n);
        if (e) return e;
        sum = 0.0;
        for (int i = 0; i < n; i++) sum += (s->w[i] = exp(((double)v[c[i]] - mx) * inv_t));
        if (!(sum > 0.0)) return c[0];
        u = uu;
    }
    const double target = u * sum;
    double cum = 0.0;
    for (int i = 0; i < n; i++) {
        cum += s->w[i];
        if (cum > target) return c[i];
    }
    /* rounding: fall back to the last candidate with non-zero weight */
    for (int i = n - 1; i > 0; i--)
        if (s->w[i] > 0.0) return c[i];
    return c[0];
}

/* ---- log-probabilities --------------------------------------------------------- */

/* max and log(sum exp(l - max)) over sanitised logits, in double */
/* max and log Σ exp over san(logits): the vector kernel of backend/cpu/ops.h
 * (float exp terms, double lane sums; a whole vocabulary per token, so the
 * scalar double exp it replaces cost ~1.3 ms a token on a 262k vocabulary) */
static void log_norm(const float *logits, int n, double *mx_out, double *lse_out) {
    float mx;
    double sum;
    el_op_log_norm(logits, n, &mx, &sum);
    *mx_out = mx;
    *lse_out = log(sum);
}

float el_logprob_of(const float *logits, int n_vocab, int32_t id) {
    if (!logits || n_vocab <= 0 || id < 0 || id >= n_vocab) return -INFINITY;
    double mx, lse;
    log_norm(logits, n_vocab, &mx, &lse);
    float l = san(logits[id]);
    if (l == -INFINITY || mx == -INFINITY) return -INFINITY;
    return (float)(((double)l - mx) - lse);
}

/* Order on raw logits through san(); the heap lives in the caller's ids[]. */
static inline bool better_raw(const float *v, int32_t a, int32_t b) {
    float x = san(v[a]), y = san(v[b]);
    return x > y || (x == y && a < b);
}

static void sift_down_raw_min(const float *v, int32_t *h, int n, int i) {
    for (;;) {
        int l = 2 * i + 1, r = l + 1, top = i;
        if (l < n && better_raw(v, h[top], h[l])) top = l;
        if (r < n && better_raw(v, h[top], h[r])) top = r;
        if (top == i) return;
        int32_t t = h[i];
        h[i] = h[top];
        h[top] = t;
        i = top;
    }
}

int el_top_logprobs(const float *logits, int n_vocab, int k, int32_t *ids, float *lps) {
    if (!logits || n_vocab <= 0 || k <= 0 || !ids || !lps) return 0;
    if (k > n_vocab) k = n_vocab;
    for (int i = 0; i < k; i++) ids[i] = i;
    for (int i = k / 2 - 1; i >= 0; i--) sift_down_raw_min(logits, ids, k, i);
    for (int32_t id = k; id < n_vocab; id++) {
        if (better_raw(logits, id, ids[0])) {
            ids[0] = id;
            sift_down_raw_min(logits, ids, k, 0);
        }
    }
    for (int end = k - 1; end > 0; end--) {
        int32_t t = ids[0];
        ids[0] = ids[end];
        ids[end] = t;
        sift_down_raw_min(logits, ids, end, 0);
    }
    double mx, lse;
    log_norm(logits, n_vocab, &mx, &lse);
    for (int i = 0; i < k; i++) {
        float l = san(logits[ids[i]]);
        lps[i] = (l == -INFINITY || mx == -INFINITY) ? -INFINITY
                                                      : (float)(((double)l - mx) - lse);
    }
    return k;
}
