/*
 * session.c — sessions and the generation loop (one request lifecycle).
 *
 * A session owns one block of memory sized by the memory plan (KV cache +
 * scratch + logits) allocated in el_session_new; el_session_eval and the
 * decode loop in el_generate allocate nothing. el_generate runs
 * PREFILL (prompt in n_batch chunks) → DECODE (one token per step) → a
 * terminal state (EOS / stop / length / cancelled / failed). The decode loop
 * checks the cancel flag once per step (the safe point) and between prefill
 * batches. A logits row with a NaN or infinity fails the request with
 * EL_ERR_NUMERIC naming the step (counted in the sampler's pass over the
 * row, so it costs nothing); el_session_eval checks its last row the same way. The per-request sampler is created before prefill and released
 * exactly once on the single exit path.
 *
 * Roll-back (a prompt cache): el_session_truncate keeps the first n
 * positions when every row the next position reads is still there (any
 * prefix of a full-context layer; a sliding-window ring only the rule at
 * el_session_can_truncate), else refuses and changes nothing;
 * el_generate_cached then evaluates only the prompt after the positions kept,
 * its sampler seeing the whole prompt as el_generate's does.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <time.h>

#include "memory/capacity.h"
#include "memory/plan.h"
#include "runtime/constrain.h"
#include "runtime/lora.h"
#include "runtime/model.h"
#include "runtime/exec.h"
#include "runtime/sampler.h"
#include "runtime/batch.h"
#include "sched/spec.h"
#include "util/error.h"

el_session_params el_session_default_params(void) {
    el_session_params p = {.n_ctx = 0, .n_batch = 512};
    return p;
}

_Static_assert(sizeof(el_session_params) == 3 * sizeof(int) + sizeof(void *) * 6 + (sizeof(void *) == 8 ? 4 : 0),
               "el_session_params keeps its 0.1.0 size (n_draft_max, type_k, type_v, lora_rank came from the reserved space)");
_Static_assert(sizeof(el_generate_params) == offsetof(el_generate_params, grammar) + sizeof(void *) * 7,
               "el_generate_params keeps its 0.1.0 size (spec and grammar came from the reserved space)");

_Static_assert(sizeof(el_spec_params) == (sizeof(void *) == 8 ? 64 : 60),
               "el_spec_params keeps its size (draft came from the reserved space)");

int el_cache_type_parse(const char *name) {
    static const struct { const char *name; int type; } k[] = {
        {"f16", EL_CACHE_F16}, {"bf16", EL_CACHE_BF16}, {"q8_0", EL_CACHE_Q8_0}, {"q4_0", EL_CACHE_Q4_0}};
    if (!name) return -1;
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        const char *a = name, *b = k[i].name;
        while (*a && *b && (*a >= 'A' && *a <= 'Z' ? *a + ('a' - 'A') : *a) == *b) a++, b++;
        if (!*a && !*b) return k[i].type;
    }
    return -1;
}

const char *el_cache_type_name(int type) {
    switch (type) {
    case EL_CACHE_DEFAULT:
    case EL_CACHE_F16: return "f16";
    case EL_CACHE_BF16: return "bf16";
    case EL_CACHE_Q8_0: return "q8_0";
    case EL_CACHE_Q4_0: return "q4_0";
    default: return NULL;
    }
}

/* 0 if the cache types of p suit m, else -1 with the reason in err (when err != NULL). */
static int check_cache_types(const el_model *m, const el_session_params *p, el_error *err) {
    const int hd = m->hp.head_dim_k > m->hp.head_dim_v ? m->hp.head_dim_k : m->hp.head_dim_v;
    for (int i = 0; i < 2; i++) {
        const int t = p ? (i ? p->type_v : p->type_k) : 0;
        const char *which = i ? "--cache-type-v" : "--cache-type-k";
        if (!el_cache_type_name(t)) {
            el_set_error(err, EL_ERR_INVALID_ARG, "%s: %d is not a KV cache type (f16, bf16, q8_0, q4_0)", which, t);
            return -1;
        }
        if (!el_kv_type_ok(t, m->hp.head_dim_k) || !el_kv_type_ok(t, m->hp.head_dim_v) || !el_kv_type_ok(t, hd)) {
            el_set_error(err, EL_ERR_INVALID_ARG,
                         "%s %s needs a head size that is a multiple of 32; this model's is %d (K) / %d (V)", which,
                         el_cache_type_name(t), m->hp.head_dim_k, m->hp.head_dim_v);
            return -1;
        }
    }
    return 0;
}

static void resolve_params(const el_model *m, const el_session_params *p, int *n_ctx, int *n_batch) {
    *n_ctx = p && p->n_ctx > 0 ? p->n_ctx : (m->hp.n_ctx_train < 4096 ? m->hp.n_ctx_train : 4096);
    *n_batch = p && p->n_batch > 0 ? p->n_batch : 512; /* llama.cpp's n_ubatch: same batches, same kernel order */
    if (*n_batch > *n_ctx) *n_batch = *n_ctx;
}

size_t el_session_bytes(const el_model *m, int n_ctx, int n_batch) {
    el_session_params p = {.n_ctx = n_ctx, .n_batch = n_batch};
    return el_session_bytes_for(m, &p);
}

size_t el_session_bytes_for(const el_model *m, const el_session_params *p) {
    if (!m || !m->arch || check_cache_types(m, p, NULL)) return 0;
    int c, b;
    resolve_params(m, p, &c, &b);
    return el_plan_session_bytes(&m->mem, c, b, p ? p->swa_full : 0, p ? p->type_k : 0, p ? p->type_v : 0,
                                 p ? p->n_draft_max : 0, p ? p->lora_rank : 0);
}

el_session *el_session_new(el_model *m, const el_session_params *p, el_error *err) {
    if (err) { err->code = EL_OK; err->msg[0] = 0; }
    if (!m || !m->arch) { el_set_error(err, EL_ERR_INVALID_ARG, "model is NULL or loaded vocab-only"); return NULL; }
    int n_ctx, n_batch;
    resolve_params(m, p, &n_ctx, &n_batch);
    if (n_ctx > (1 << 24)) { el_set_error(err, EL_ERR_INVALID_ARG, "context of %d tokens is absurd", n_ctx); return NULL; }
    const int n_draft = p ? p->n_draft_max : 0;
    if (n_draft < 0 || n_draft > EL_SPEC_MAX_DRAFT || n_draft + 1 > n_batch) {
        el_set_error(err, EL_ERR_INVALID_ARG, "n_draft_max %d: expected 0..%d (and below the batch of %d)", n_draft,
                     EL_SPEC_MAX_DRAFT, n_batch);
        return NULL;
    }
    if (check_cache_types(m, p, err)) return NULL;
    el_session_plan plan;
    if (p && (p->lora_rank < 0 || p->lora_rank > EL_LORA_MAX_ACTIVE * EL_LORA_MAX_RANK)) {
        el_set_error(err, EL_ERR_INVALID_ARG, "lora_rank %d: expected 0..%d", p->lora_rank,
                     EL_LORA_MAX_ACTIVE * EL_LORA_MAX_RANK);
        return NULL;
    }
    if (el_plan_session_full(&m->mem, n_ctx, n_batch, p ? p->swa_full : 0, p ? p->type_k : 0, p ? p->type_v : 0,
                             1 + n_draft, &plan) ||
        el_plan_add_lora(&m->mem, n_batch, p ? p->lora_rank : 0, &plan)) {
        el_set_error(err, EL_ERR_NOMEM, "session of %d tokens: size overflows", n_ctx);
        return NULL;
    }
    el_session *s = calloc(1, sizeof *s);
    if (!s) { el_set_error(err, EL_ERR_NOMEM, "out of memory"); return NULL; }
    s->m = m;
    s->n_ctx = n_ctx;
    s->n_batch = n_batch;
    s->kc = calloc((size_t)m->hp.n_layer, sizeof(void *));
    s->vc = calloc((size_t)m->hp.n_layer, sizeof(void *));
    s->block_bytes = plan.total;
    s->kv_ring = plan.kv_ring;
    s->type_k = plan.type_k;
    s->type_v = plan.type_v;
    if (!s->kc || !s->vc || posix_memalign(&s->block, 64, plan.total)) {
        s->block = NULL;
        el_set_error(err, EL_ERR_NOMEM, "session needs %zu bytes (KV %zu + scratch %zu) for %d tokens: allocation failed",
                     plan.total, plan.kv_bytes, plan.scratch_bytes, n_ctx);
        el_session_free(s);
        return NULL;
    }
    uint8_t *b = s->block;
    for (int il = 0; il < m->hp.n_layer; il++) {
        const size_t off = el_plan_kv_offset(&m->mem, &plan, il);
        const size_t kl = plan.kv_ring > 0 && m->layers[il].swa ? plan.kv_layer_swa : plan.kv_layer;
        s->kc[il] = b + off;
        s->vc[il] = b + off + kl;
    }
    uint8_t *sc = b + plan.kv_bytes;
    s->x = (float *)(sc + plan.off_x);
    s->xb = (float *)(sc + plan.off_xb);
    s->q = (float *)(sc + plan.off_q);
    s->k = (float *)(sc + plan.off_k);
    s->v = (float *)(sc + plan.off_v);
    s->att = (float *)(sc + plan.off_att);
    s->gate = (float *)(sc + plan.off_gate);
    s->up = (float *)(sc + plan.off_up);
    s->tmp = (float *)(sc + plan.off_tmp);
    s->logits = (float *)(sc + plan.off_logits);
    s->n_logit_rows = plan.n_logit_rows;
    s->out_rows = 1;
    s->wq8 = sc + plan.off_wq8;
    s->moe_scratch = plan.moe_bytes ? sc + plan.off_moe : NULL;
    s->rope_cs = (float *)(sc + plan.off_rope);
    s->top_ids = (int32_t *)(sc + plan.off_top_ids);
    s->top_lps = (float *)(sc + plan.off_top_lps);
    s->lora_scratch = plan.lora_bytes ? sc + plan.off_lora : NULL; /* runtime/lora.h: the planned adapters' scratch */
    s->lora_scratch_bytes = plan.lora_bytes;
    s->lora_rank = plan.lora_rank;
    s->conv_state = plan.conv_bytes ? (float *)(sc + plan.off_conv) : NULL; /* LFM2: the conv layers' rings */
    s->conv_ring = plan.conv_ring;
    s->exec = el_exec_new(s, err);
    if (!s->exec) {
        el_session_free(s);
        return NULL;
    }
    {
        static const char *const names[EL_T_N_FIXED] = {"x", "xb", "q", "k", "v", "att", "gate", "up", "tmp", "logits"};
        const size_t offs[EL_T_N_FIXED + 1] = {plan.off_x, plan.off_xb, plan.off_q, plan.off_k, plan.off_v, plan.off_att,
                                               plan.off_gate, plan.off_up, plan.off_tmp, plan.off_logits, plan.off_wq8};
        for (int i = 0; i < EL_T_N_FIXED; i++) el_exec_bind(s->exec, i, names[i], -1, sc + offs[i], offs[i + 1] - offs[i]);
        for (int il = 0; il < m->hp.n_layer; il++) {
            const bool ring = plan.kv_ring > 0 && m->layers[il].swa;
            el_exec_bind(s->exec, el_t_kc(il), "kc", il, s->kc[il], ring ? plan.kv_layer_swa : plan.kv_layer);
            el_exec_bind(s->exec, el_t_vc(il), "vc", il, s->vc[il], ring ? plan.kv_layer_v_swa : plan.kv_layer_v);
        }
    }
    /* touch every page now, so the memory is really there before work starts */
    memset(s->block, 0, plan.total);
    atomic_init(&s->cancel, false);
    atomic_init(&s->busy, false);
    el_logf(m, EL_LOG_INFO, "session: %d tokens of context, batch %d, %zu bytes (KV %zu, K %s V %s + scratch %zu)",
            n_ctx, n_batch, plan.total, plan.kv_bytes, el_cache_type_name(plan.type_k), el_cache_type_name(plan.type_v),
            plan.scratch_bytes);
    return s;
}

void el_session_free(el_session *s) {
    if (!s) return;
    el_exec_free(s->exec);
    el_lora_set_free(s->lora);
    free(s->block);
    free(s->kc);
    free(s->vc);
    free(s);
}

void el_session_reset(el_session *s) {
    if (!s || atomic_load(&s->busy)) return; /* ignored while a generation runs (its callback, another thread) */
    s->n_past = 0;
    atomic_store(&s->cancel, false);
}
size_t el_session_placement_report(el_session *s, int json, char *buf, size_t cap) {
    if (cap) buf[0] = 0;
    if (!s) return 0;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return 0;
    el_exec_report(s, f, json != 0);
    fclose(f);
    if (cap) {
        const size_t k = len < cap - 1 ? len : cap - 1;
        memcpy(buf, text, k);
        buf[k] = 0;
    }
    free(text);
    return len;
}

int el_session_n_ctx(const el_session *s) { return s ? s->n_ctx : 0; }
int el_session_n_past(const el_session *s) { return s ? s->n_past : 0; }
const float *el_session_logits(const el_session *s) { return s ? s->logits : NULL; }
void el_session_cancel(el_session *s) { if (s) atomic_store(&s->cancel, true); }
void el_session_uncancel(el_session *s) { if (s) atomic_store(&s->cancel, false); }

static bool session_claim(el_session *s, el_error *err);

/* Rolling back. A full-context layer keeps position j in row j, so any
 * prefix is intact. A sliding-window ring (kv_ring rows, position j in row
 * j % kv_ring) holds only positions n_past - kv_ring .. n_past - 1; the next
 * token at position n attends to positions n - window + 1 .. n (blocks.c,
 * el_attn_lo), so keeping n positions works only while all of those are
 * still in the ring: max(0, n - window + 1) >= n_past - kv_ring. With
 * kv_ring = window + n_batch that is a roll-back of at most n_batch + 1
 * positions (or any, while n_past <= kv_ring). LFM2's convolution rings
 * (conv_ring rows of B·x) are the same: the next position n reads the rows
 * of n - (conv_width - 1) .. n - 1, so max(0, n - conv_width + 1) >=
 * n_past - conv_ring; the state at n is then rebuilt from those rows, not
 * carried over. */
static bool ring_holds(int n_past, int n_keep, int window, int ring) {
    const int lo = window > 0 && n_keep - window + 1 > 0 ? n_keep - window + 1 : 0;
    return lo >= n_past - ring;
}

int el_session_can_truncate(const el_session *s, int n_keep) {
    if (!s || n_keep < 0 || n_keep > s->n_past) return 0;
    if (n_keep == 0 || n_keep == s->n_past) return 1;
    if (s->kv_ring > 0 && !ring_holds(s->n_past, n_keep, s->m->hp.n_swa, s->kv_ring)) return 0;
    if (s->conv_ring > 0 && !ring_holds(s->n_past, n_keep, s->m->hp.conv_width, s->conv_ring)) return 0;
    return 1;
}

int el_session_truncate(el_session *s, int n_keep, el_error *err) {
    if (err) { err->code = EL_OK; err->msg[0] = 0; }
    if (!session_claim(s, err)) return EL_ERR_INVALID_ARG;
    int rc = 0;
    if (n_keep < 0 || n_keep > s->n_past)
        rc = el_set_error(err, EL_ERR_INVALID_ARG, "cannot keep %d positions: the session holds %d", n_keep, s->n_past);
    else if (!el_session_can_truncate(s, n_keep) && s->kv_ring > 0 &&
             !ring_holds(s->n_past, n_keep, s->m->hp.n_swa, s->kv_ring))
        rc = el_set_error(err, EL_ERR_CONTEXT,
                          "cannot roll back from %d to %d positions: the sliding-window cache (%d rows, window %d) "
                          "no longer holds the positions %d needs; start over from 0",
                          s->n_past, n_keep, s->kv_ring, s->m->hp.n_swa, n_keep);
    else if (!el_session_can_truncate(s, n_keep))
        rc = el_set_error(err, EL_ERR_CONTEXT,
                          "cannot roll back from %d to %d positions: the short-convolution state (%d rows, width %d) "
                          "no longer holds the inputs position %d reads; start over from 0",
                          s->n_past, n_keep, s->conv_ring, s->m->hp.conv_width, n_keep);
    else
        s->n_past = n_keep;
    atomic_store(&s->busy, false);
    return rc;
}

/* Claims the session for one eval/generation; false (err filled) if NULL or already claimed. */
static bool session_claim(el_session *s, el_error *err) {
    if (!s) { el_set_error(err, EL_ERR_INVALID_ARG, "session is NULL"); return false; }
    bool expected = false;
    if (!atomic_compare_exchange_strong(&s->busy, &expected, true)) {
        el_set_error(err, EL_ERR_INVALID_ARG,
                     "session is busy (a generation on it is running: called from its own callback or another thread)");
        return false;
    }
    return true;
}

/* NaN / ±inf values in a logits row (exponent bits all ones). */
static int count_nonfinite(const float *v, int n) {
    int bad = 0;
    for (int i = 0; i < n; i++) {
        uint32_t b;
        memcpy(&b, &v[i], sizeof b);
        bad += (b & 0x7f800000u) == 0x7f800000u;
    }
    return bad;
}

/* The typed error for a logits row with n_bad NaN / inf values. */
static int numeric_error(const el_session *s, const float *row, int n_bad, const char *step, el_error *err) {
    const int nv = s->m->hp.n_vocab;
    int first = 0;
    while (first < nv && isfinite(row[first])) first++;
    return el_set_error(err, EL_ERR_NUMERIC,
                        "%s (position %d): %d of %d logits are NaN or infinite (first: token %d = %g); the model's "
                        "weights or metadata produce non-finite numbers", step, s->n_past, n_bad, nv, first,
                        first < nv ? (double)row[first] : 0.0);
}

static int check_tokens(const el_session *s, const int32_t *toks, int n, el_error *err) {
    const int nv = s->m->hp.n_vocab;
    for (int i = 0; i < n; i++)
        if (toks[i] < 0 || toks[i] >= nv)
            return el_set_error(err, EL_ERR_INVALID_ARG, "token %d at index %d is outside the vocab (%d)", toks[i], i, nv);
    return 0;
}

/* Runs n tokens through the model in n_batch chunks; logits of the last.
 * A generation prefilling through a batcher (runtime/batch.h) runs chunks of at
 * most its chunk, each in its turn between decode rounds. */
static int eval_tokens(el_session *s, const int32_t *toks, int n, bool check_cancel, el_error *err) {
    const bool batched = s->batcher && s->batch_phase == 1;
    const int chunk = batched && el_batcher_chunk(s->batcher) < s->n_batch ? el_batcher_chunk(s->batcher) : s->n_batch;
    for (int i = 0; i < n; i += chunk) {
        if (check_cancel && atomic_load(&s->cancel)) return el_set_error(err, EL_ERR_CANCELLED, "cancelled");
        int nb = n - i < chunk ? n - i : chunk;
        const int rc = batched ? el_batcher_prefill(s->batcher, s, toks + i, nb, err) : el_exec_forward(s, toks + i, nb, err);
        if (rc) return rc;
        s->n_past += nb;
    }
    return 0;
}

static int eval_claimed(el_session *s, const int32_t *toks, int n, el_error *err) {
    if (n <= 0) return el_set_error(err, EL_ERR_INVALID_ARG, "nothing to evaluate");
    if (check_tokens(s, toks, n, err)) return err ? err->code : EL_ERR_INVALID_ARG;
    if (s->n_past + n > s->n_ctx)
        return el_set_error(err, EL_ERR_CONTEXT, "%d tokens + %d already in context exceed the context of %d", n, s->n_past, s->n_ctx);
    if (eval_tokens(s, toks, n, false, err)) return err ? err->code : EL_ERR_INTERNAL;
    int bad = count_nonfinite(s->logits, s->m->hp.n_vocab); /* one pass over the row the caller will read */
    if (bad) return numeric_error(s, s->logits, bad, "el_session_eval", err);
    return 0;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* ---- text output: UTF-8 completeness and stop strings ---------------------- */

#define EL_TEXT_CAP 4096
typedef struct text_state {
    el_detok detok;
    char held[EL_TEXT_CAP]; /* complete UTF-8 text not yet released (could start a stop string) */
    int n_held;
    const char *const *stop;
    size_t max_stop;
} text_state;

/* Longest suffix of buf[0..n) that is a proper prefix of some stop string. */
static int stop_prefix_len(const text_state *ts, const char *buf, int n) {
    int best = 0;
    for (const char *const *st = ts->stop; st && *st; st++) {
        int L = (int)strlen(*st);
        for (int k = L - 1 < n ? L - 1 : n; k > best; k--)
            if (memcmp(buf + n - k, *st, (size_t)k) == 0) { best = k; break; }
    }
    return best;
}

/* Adds a piece; writes releasable text to out. Returns bytes released, or -1 if a stop string matched
 * (text before it is released). */
static int text_push(text_state *ts, const char *piece, int len, char *out, int *out_len) {
    char tmp[EL_TEXT_CAP];
    if (len > EL_TEXT_CAP - 16) len = EL_TEXT_CAP - 16;
    int n = el_detok_push(&ts->detok, piece, len, tmp);
    if (ts->n_held + n > EL_TEXT_CAP) { /* cannot be a stop prefix that long: release held text */
        memcpy(out, ts->held, (size_t)ts->n_held);
        *out_len = ts->n_held;
        ts->n_held = 0;
        memcpy(ts->held, tmp, (size_t)n);
        ts->n_held = n;
        return 0;
    }
    memcpy(ts->held + ts->n_held, tmp, (size_t)n);
    ts->n_held += n;
    *out_len = 0;
    for (const char *const *st = ts->stop; st && *st; st++) {
        size_t L = strlen(*st);
        if (!L) continue;
        const char *hit = memmem(ts->held, (size_t)ts->n_held, *st, L);
        if (hit) {
            int keep = (int)(hit - ts->held);
            memcpy(out, ts->held, (size_t)keep);
            *out_len = keep;
            ts->n_held = 0;
            return -1;
        }
    }
    int hold = stop_prefix_len(ts, ts->held, ts->n_held);
    int rel = ts->n_held - hold;
    memcpy(out, ts->held, (size_t)rel);
    memmove(ts->held, ts->held + rel, (size_t)hold);
    ts->n_held = hold;
    *out_len = rel;
    return 0;
}

int el_session_eval(el_session *s, const int32_t *toks, int n, el_error *err) {
    if (err) { err->code = EL_OK; err->msg[0] = 0; }
    if (!session_claim(s, err)) return EL_ERR_INVALID_ARG;
    int rc = !toks && n > 0 ? (int)el_set_error(err, EL_ERR_INVALID_ARG, "tokens are NULL") : eval_claimed(s, toks, n, err);
    atomic_store(&s->busy, false);
    return rc;
}

/* ---- embeddings ----------------------------------------------------------- */

static int embed_claimed(el_session *s, const int32_t *toks, int n, el_pooling pooling, float *out, size_t cap,
                         el_error *err) {
    const int E = s->m->hp.n_embd;
    if (!toks || !out) return -el_set_error(err, EL_ERR_INVALID_ARG, "tokens or output buffer is NULL");
    if (n < 1) return -el_set_error(err, EL_ERR_INVALID_ARG, "nothing to embed (%d tokens)", n);
    if ((unsigned)pooling > EL_POOLING_LAST)
        return -el_set_error(err, EL_ERR_INVALID_ARG, "pooling %d is not one of none (0), mean (1), cls (2), last (3)",
                             (int)pooling);
    if (n > s->n_ctx)
        return -el_set_error(err, EL_ERR_CONTEXT, "%d tokens exceed the context of %d", n, s->n_ctx);
    const size_t need = pooling == EL_POOLING_NONE ? (size_t)n * (size_t)E : (size_t)E;
    if (cap < need)
        return -el_set_error(err, EL_ERR_INVALID_ARG, "output buffer of %zu floats, %zu needed", cap, need);
    if (check_tokens(s, toks, n, err)) return -(err ? (int)err->code : EL_ERR_INVALID_ARG);
    memset(out, 0, sizeof(float) * need);
    s->n_past = 0;
    s->embd_pool = (int)pooling + 1;
    s->embd_out = out;
    s->embd_n = n;
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i += s->n_batch) {
        if (atomic_load(&s->cancel)) { rc = el_set_error(err, EL_ERR_CANCELLED, "cancelled"); break; }
        const int nb = n - i < s->n_batch ? n - i : s->n_batch;
        s->embd_row0 = i;
        rc = el_exec_forward(s, toks + i, nb, err);
        if (rc) break;
        s->n_past += nb;
    }
    s->embd_pool = 0;
    s->embd_out = NULL;
    s->n_past = 0; /* left reset: the embedded tokens are no history for a later generation */
    if (rc) return -rc;
    if (pooling == EL_POOLING_MEAN) {
        const float inv = 1.0f / (float)n;
        for (int j = 0; j < E; j++) out[j] *= inv;
    }
    int bad = count_nonfinite(out, (int)need);
    if (bad)
        return -el_set_error(err, EL_ERR_NUMERIC, "el_embed: %d of %zu values are NaN or infinite; the model's weights "
                             "or metadata produce non-finite numbers", bad, need);
    return (int)need;
}

int el_embed(el_session *s, const int32_t *toks, int n, el_pooling pooling, float *out, size_t cap, el_error *err) {
    if (err) { err->code = EL_OK; err->msg[0] = 0; }
    if (!session_claim(s, err)) return -EL_ERR_INVALID_ARG;
    if ((size_t)n * (size_t)s->m->hp.n_embd > (size_t)INT32_MAX) {
        atomic_store(&s->busy, false);
        return -el_set_error(err, EL_ERR_INVALID_ARG, "%d tokens x %d floats is too large a result", n, s->m->hp.n_embd);
    }
    int rc = embed_claimed(s, toks, n, pooling, out, cap, err);
    atomic_store(&s->cancel, false);
    atomic_store(&s->busy, false);
    return rc;
}

static el_finish generate_claimed(el_session *s, const int32_t *prompt, int n_prompt, int n_cached,
                                  const el_generate_params *gp, el_token_cb cb, void *user, el_generate_stats *stats,
                                  el_error *err);

/* ---- speculative decoding with a draft model (EL_SPEC_DRAFT) ---------------
 * The draft session's cache holds hist[0..n_cached) of this call's token
 * sequence (prompt + output) at positions base.., where seq records what was
 * fed (drafted tokens may differ from what the target then chose; n_good of
 * them are known to match). Each round it is rolled back to the longest
 * prefix it shares with hist, catches up, and decodes γ tokens greedily. */
typedef struct draft_state {
    el_session *d;
    int base, n_cached, n_good;
    int32_t *seq;
    int since_probe; /* plain steps since the last probe while speculation is off */
    bool claimed;
} draft_state;

/* Refusals before generation: the draft must share the target's vocabulary and be smaller. */
static int draft_check(const el_session *s, const el_session *d, el_error *err) {
    if (!d) return el_set_error(err, EL_ERR_INVALID_ARG, "speculative decoding with a draft model: no draft session given");
    if (d == s) return el_set_error(err, EL_ERR_INVALID_ARG, "the draft session is the target session itself");
    const el_model *tm = s->m, *dm = d->m;
    if (dm->hp.n_vocab != tm->hp.n_vocab || el_vocab_n_tokens(dm->vocab) != el_vocab_n_tokens(tm->vocab))
        return el_set_error(err, EL_ERR_INVALID_ARG,
                            "the draft model's vocabulary (%d tokens) differs from the target's (%d tokens): a draft "
                            "must use the target's tokenizer", dm->hp.n_vocab, tm->hp.n_vocab);
    char a[256], b[256];
    for (int i = 0; i < tm->hp.n_vocab; i++) {
        const int la = el_vocab_token_to_piece(tm->vocab, i, a, (int)sizeof a, true);
        const int lb = el_vocab_token_to_piece(dm->vocab, i, b, (int)sizeof b, true);
        if (la != lb || (la > 0 && la <= (int)sizeof a && memcmp(a, b, (size_t)la) != 0))
            return el_set_error(err, EL_ERR_INVALID_ARG,
                                "the draft model's vocabulary differs from the target's at token %d: a draft must use "
                                "the target's tokenizer", i);
    }
    if (el_token_bos(dm) != el_token_bos(tm) || el_token_eos(dm) != el_token_eos(tm))
        return el_set_error(err, EL_ERR_INVALID_ARG, "the draft model's BOS/EOS tokens (%d/%d) differ from the target's (%d/%d)",
                            el_token_bos(dm), el_token_eos(dm), el_token_bos(tm), el_token_eos(tm));
    const uint64_t wd = el_model_weights_bytes(dm), wt = el_model_weights_bytes(tm);
    if (wd > wt)
        return el_set_error(err, EL_ERR_INVALID_ARG,
                            "the draft model (%llu weight bytes) is larger than the target (%llu): drafting would cost "
                            "more than it saves", (unsigned long long)wd, (unsigned long long)wt);
    return 0;
}

/* Makes the draft's cache hold exactly hist[0..n_upto): rolls back to the
 * shared prefix (or, where its sliding-window ring cannot roll back that far,
 * starts over at position 0) and feeds the rest. 1: it does not fit the
 * draft's context (no draft this round); <0: error. */
static int draft_sync(draft_state *ds, const int32_t *hist, int n_upto, el_error *err) {
    el_session *d = ds->d;
    int keep = ds->n_good;
    while (keep < ds->n_cached && keep < n_upto && ds->seq[keep] == hist[keep]) keep++;
    if (keep > n_upto) keep = n_upto;
    if (ds->base + n_upto > d->n_ctx || !el_session_can_truncate(d, ds->base + keep)) {
        if (n_upto > d->n_ctx) return 1;
        ds->base = 0; /* start over: the draft loses older history, which changes α only */
        keep = 0;
    }
    d->n_past = ds->base + keep;
    ds->n_cached = ds->n_good = keep;
    if (n_upto > keep) {
        const int rc = eval_tokens(d, hist + keep, n_upto - keep, false, err);
        const int fed = d->n_past - ds->base; /* eval_tokens advances n_past batch by batch */
        memcpy(ds->seq + keep, hist + keep, sizeof *hist * (size_t)(fed - keep));
        ds->n_cached = ds->n_good = fed;
        if (rc) return -1;
    }
    return 0;
}

/* Up to g tokens drafted greedily after hist[0..n_hist) (hist[n_hist-1] is the
 * token the target is about to take): the count (0 where the draft's
 * context has no room), or -1 on error. */
static int draft_propose(draft_state *ds, const int32_t *hist, int n_hist, int g, int32_t *out, double *t_fwd_ms,
                         el_error *err) {
    el_session *d = ds->d;
    const int nv = d->m->hp.n_vocab;
    int rc = draft_sync(ds, hist, n_hist - 1, err);
    if (rc) return rc < 0 ? -1 : 0;
    if (g > d->n_ctx - d->n_past) g = d->n_ctx - d->n_past; /* tok and g - 1 drafts are fed */
    if (g < 1) return 0;
    int32_t t = hist[n_hist - 1];
    const double t0 = now_ms();
    for (int i = 0; i < g; i++) { /* feeds tok and the first g - 1 drafts: g draft forwards */
        if (el_exec_forward(d, &t, 1, err)) return -1;
        d->n_past++;
        ds->seq[ds->n_cached++] = t;
        if (i == 0) ds->n_good++;
        const float *row = d->logits;
        int best = 0;
        for (int j = 1; j < nv; j++)
            if (row[j] > row[best]) best = j;
        out[i] = t = best;
    }
    *t_fwd_ms = now_ms() - t0;
    return g;
}

static el_finish generate_entry(el_session *s, const int32_t *prompt, int n_prompt, int n_cached,
                                const el_generate_params *gp, el_token_cb cb, void *user, el_generate_stats *stats,
                                el_error *err) {
    if (err) { err->code = EL_OK; err->msg[0] = 0; }
    if (stats) memset(stats, 0, sizeof *stats);
    if (stats) stats->finish = EL_DONE_FAILED;
    if (!session_claim(s, err)) return EL_DONE_FAILED;
    el_generate_params greedy;
    if (!gp) {
        memset(&greedy, 0, sizeof greedy);
        greedy.sampling.repeat_penalty = 1.0f;
        greedy.sampling.top_p = 1.0f;
        gp = &greedy;
    }
    el_finish fin = !prompt && n_prompt > 0
                        ? (el_set_error(err, EL_ERR_INVALID_ARG, "prompt tokens are NULL"), EL_DONE_FAILED)
                        : generate_claimed(s, prompt, n_prompt, n_cached, gp, cb, user, stats, err);
    atomic_store(&s->busy, false);
    return fin;
}

el_finish el_generate(el_session *s, const int32_t *prompt, int n_prompt, const el_generate_params *gp,
                      el_token_cb cb, void *user, el_generate_stats *stats, el_error *err) {
    return generate_entry(s, prompt, n_prompt, 0, gp, cb, user, stats, err);
}

el_finish el_generate_cached(el_session *s, const int32_t *prompt, int n_prompt, int n_cached,
                             const el_generate_params *gp, el_token_cb cb, void *user, el_generate_stats *stats,
                             el_error *err) {
    return generate_entry(s, prompt, n_prompt, n_cached, gp, cb, user, stats, err);
}

static el_finish generate_claimed(el_session *s, const int32_t *prompt, int n_prompt, int n_cached,
                                  const el_generate_params *gp, el_token_cb cb, void *user, el_generate_stats *stats,
                                  el_error *err) {
    el_generate_stats st = {0};
    el_finish fin = EL_DONE_FAILED;
    el_sampler *smp = NULL;
    el_constraint *con = NULL; /* gp->grammar, compiled */
    int32_t *hist = NULL; /* speculation: the drafter's history */
    int n_hist = 0;
    draft_state ds = {0}; /* EL_SPEC_DRAFT: the draft model's session and what its cache holds */
    int n_past0 = s->n_past, t_base = 0; /* the target's positions at entry, and of prompt[0] */
    const el_model *m = s->m;
    const int nv = m->hp.n_vocab;
    if (err) { err->code = EL_OK; err->msg[0] = 0; }
    const double t0 = now_ms();
    st.n_prompt = n_prompt;

    if (n_prompt <= 0) { el_set_error(err, EL_ERR_INVALID_ARG, "empty prompt"); goto done; }
    if (check_tokens(s, prompt, n_prompt, err)) goto done;
    if (n_cached < 0 || n_cached >= n_prompt || n_cached > s->n_past) {
        el_set_error(err, EL_ERR_INVALID_ARG, "%d cached prompt tokens: expected 0..%d (a prompt of %d, %d in the cache)",
                     n_cached, n_prompt - 1 < s->n_past ? n_prompt - 1 : s->n_past, n_prompt, s->n_past);
        goto done;
    }
    if (s->n_past - n_cached + n_prompt > s->n_ctx) {
        el_set_error(err, EL_ERR_CONTEXT, "prompt of %d tokens (+ %d already in context) does not fit the context of %d tokens",
                     n_prompt - n_cached, s->n_past, s->n_ctx);
        goto done;
    }
    t_base = s->n_past - n_cached;
    if (gp->spec && gp->spec->mode == EL_SPEC_DRAFT) { /* refused before any work */
        if (draft_check(s, gp->spec->draft, err)) goto done;
        if (!session_claim(gp->spec->draft, err)) goto done;
        ds.d = gp->spec->draft;
        ds.claimed = true;
    }
    const int n_top = gp->n_top_logprobs < 0 ? 0 : gp->n_top_logprobs > 64 ? 64 : gp->n_top_logprobs;
    el_sampling sp = gp->sampling;
    if (sp.penalty_last_n < 0) sp.penalty_last_n = s->n_ctx; /* -1 = the context (edgellm.h, as llama.cpp) */
    smp = el_sampler_new(&sp, nv);
    if (!smp) { el_set_error(err, EL_ERR_NOMEM, "out of memory for the sampler"); goto done; }
    for (int i = 0; i < n_prompt; i++) el_sampler_accept(smp, prompt[i]);
    if (gp->grammar && !(con = el_constraint_new(s->m, gp->grammar, gp->grammar_triggers, err))) goto done;

    /* PREFILL (the first n_cached prompt tokens are in the cache already); a
     * session attached to a batcher goes through it unless it speculates or
     * runs LoRA adapters (a round's shared pass computes the base model's
     * products only: an adapted session runs its forwards alone) */
    if (s->batcher && !(gp->spec && gp->spec->mode != EL_SPEC_OFF) && !(s->lora && s->lora->n > 0))
        el_batcher_join(s->batcher, s);
    if (eval_tokens(s, prompt + n_cached, n_prompt - n_cached, true, err)) {
        fin = err && err->code == EL_ERR_CANCELLED ? EL_DONE_CANCELLED : EL_DONE_FAILED;
        goto done;
    }
    st.prefill_ms = now_ms() - t0;
    double t1 = now_ms();
    if (s->batch_phase) el_batcher_decoding(s->batcher, s);

    /* DECODE (with speculation: see el_spec_params in edgellm.h, src/sched/spec.h) */
    const el_spec_params *spp = gp->spec && gp->spec->mode != EL_SPEC_OFF ? gp->spec : NULL;
    if (spp && spp->mode != EL_SPEC_NGRAM && spp->mode != EL_SPEC_PREDICT && spp->mode != EL_SPEC_DRAFT) {
        el_set_error(err, EL_ERR_INVALID_ARG, "speculative decoding mode %d is unknown", spp->mode);
        goto done;
    }
    if (spp && spp->mode == EL_SPEC_PREDICT) {
        if (spp->n_prediction < 0 || (spp->n_prediction > 0 && !spp->prediction)) {
            el_set_error(err, EL_ERR_INVALID_ARG, "prediction: %d tokens at %p", spp->n_prediction,
                         (const void *)spp->prediction);
            goto done;
        }
        if (check_tokens(s, spp->prediction, spp->n_prediction, err)) goto done;
    }
    el_spec_ctl ctl;
    int ng_min = 1, ng_max = 4;
    if (spp) {
        const int cap = s->n_logit_rows - 1;
        const int gmax = spp->n_draft_max > 0 ? spp->n_draft_max : cap;
        if (cap < 1 || gmax > cap || gmax < 1) {
            el_set_error(err, EL_ERR_INVALID_ARG,
                         "drafts of up to %d tokens, but the session verifies at most %d (el_session_params.n_draft_max)",
                         gmax, cap);
            goto done;
        }
        if (spp->n_draft_min < 0 || spp->n_draft_min > gmax) {
            el_set_error(err, EL_ERR_INVALID_ARG, "draft minimum %d: expected 0..%d (the draft maximum)", spp->n_draft_min, gmax);
            goto done;
        }
        if (s->n_ctx < gmax + 2) {
            el_set_error(err, EL_ERR_CONTEXT,
                         "a context of %d tokens cannot hold a token and %d verification positions (drafts of up to %d)",
                         s->n_ctx, gmax + 1, gmax);
            goto done;
        }
        ng_min = spp->ngram_min > 0 ? spp->ngram_min : 1;
        ng_max = spp->ngram_max > 0 ? spp->ngram_max : 4;
        if (ng_min > ng_max || ng_max > 64) {
            el_set_error(err, EL_ERR_INVALID_ARG, "n-gram sizes %d..%d: expected 1 <= min <= max <= 64", ng_min, ng_max);
            goto done;
        }
        el_spec_ctl_init(&ctl, spp->n_draft_min, gmax, spp->fixed != 0);
        /* the drafter's history: this call's prompt and output */
        const size_t n_alloc = (size_t)n_prompt + (size_t)(s->n_ctx - s->n_past) + EL_SPEC_MAX_DRAFT + 2;
        hist = malloc(sizeof *hist * n_alloc);
        if (ds.d) ds.seq = malloc(sizeof *hist * n_alloc);
        if (!hist || (ds.d && !ds.seq)) { el_set_error(err, EL_ERR_NOMEM, "out of memory for the draft history"); goto done; }
        memcpy(hist, prompt, sizeof *hist * (size_t)n_prompt);
        n_hist = n_prompt;
        if (ds.d) { /* the draft's cache: the target's history if it mirrors it, else this prompt alone; then prefill */
            el_session *d = ds.d;
            ds.base = t_base;
            if (d->n_past >= n_past0 && el_session_can_truncate(d, n_past0)) {
                d->n_past = n_past0;
                memcpy(ds.seq, prompt, sizeof *hist * (size_t)n_cached);
                ds.n_cached = ds.n_good = n_cached;
            } else if (d->n_past >= t_base && el_session_can_truncate(d, t_base)) {
                d->n_past = t_base;
            } else {
                d->n_past = ds.base = 0;
            }
            if (draft_sync(&ds, hist, n_prompt, err) < 0) goto done;
            st.prefill_ms = now_ms() - t0;
            t1 = now_ms();
        }
    }
    text_state ts = {.n_held = 0, .stop = gp->stop};
    el_detok_init(&ts.detok);
    char piece[512], out[EL_TEXT_CAP + 16];
    const float *row = s->logits;     /* the logits the next token is drawn from */
    int32_t draft[EL_SPEC_MAX_DRAFT]; /* drafts whose positions are in the KV cache, being checked */
    int n_draft = 0, i_draft = 0, pos0 = 0; /* ... and row i_draft of the verification at pos0 */
    int32_t shadow = -1;              /* a draft not verified (plain step): its first token, to measure α */
    bool just_accepted = false;       /* the last token delivered was a draft already in the cache */
    for (;;) {
        if (atomic_load(&s->cancel)) { fin = EL_DONE_CANCELLED; break; }
        if (gp->max_tokens > 0 && st.n_generated >= gp->max_tokens) { fin = EL_DONE_LENGTH; break; }
        just_accepted = false;
        if (con && (gp->grammar_flags & EL_GRAMMAR_END_EARLY) && el_constraint_should_end(con, row, nv)) {
            fin = EL_DONE_EOS; /* the grammar is satisfied and the model would leave it (constrain.h) */
            break;
        }
        const int32_t dtok = i_draft < n_draft ? draft[i_draft] : -1;
        bool acc = false;
        const el_sampler_filter *flt = el_constraint_filter(con); /* NULL: none, or a lazy grammar still off */
        int32_t tok = flt ? el_sampler_sample_filtered(smp, row, flt, dtok, &acc)
                      : dtok >= 0 ? el_sampler_sample_draft(smp, row, dtok, &acc) : el_sampler_sample(smp, row);
        int bad = el_sampler_nonfinite(smp); /* counted in the sampler's copy of the row */
        if (!bad && tok < 0) {
            el_set_error(err, EL_ERR_GRAMMAR, tok == EL_SAMPLER_NO_TOKEN ? "grammar: no token can follow at step %d"
                                                                          : "grammar: matcher limit hit at step %d", st.n_generated);
            fin = EL_DONE_FAILED;
            break;
        }
        if (bad) {
            char step[64];
            if (st.n_generated == 0) snprintf(step, sizeof step, "the logits after the prompt (%d tokens)", n_prompt);
            else snprintf(step, sizeof step, "decode step %d", st.n_generated);
            numeric_error(s, row, bad, step, err);
            fin = EL_DONE_FAILED;
            break;
        }
        if (dtok >= 0) {
            el_spec_observe(&ctl, acc);
            st.n_drafted++;
            st.n_accepted += acc;
        } else if (shadow >= 0) {
            el_spec_observe(&ctl, tok == shadow);
        }
        shadow = -1;
        el_token_info ti = {.id = tok};
        ti.logprob = el_logprob_of(row, nv, tok);
        if (n_top > 0) {
            ti.n_top = el_top_logprobs(row, nv, n_top, s->top_ids, s->top_lps);
            ti.top_id = s->top_ids;
            ti.top_logprob = s->top_lps;
        }
        if (st.ttft_ms == 0.0) st.ttft_ms = now_ms() - t0;
        if ((!gp->ignore_eos || con) && el_vocab_is_eog(m->vocab, tok)) {
            fin = EL_DONE_EOS;
            break;
        }
        if (con && el_constraint_accept(con, tok, err)) { fin = EL_DONE_FAILED; break; }
        st.n_generated++;
        int plen = el_vocab_token_to_piece(m->vocab, tok, piece, (int)sizeof piece, false);
        if (plen < 0 || plen > (int)sizeof piece) plen = 0;
        int olen = 0;
        int sr = text_push(&ts, piece, plen, out, &olen);
        ti.piece = out;
        ti.piece_len = olen;
        el_sampler_accept(smp, tok);
        if (hist) hist[n_hist++] = tok;
        if (cb && !cb(&ti, user)) { fin = EL_DONE_STOP; break; }
        if (sr < 0) { fin = EL_DONE_STOP; break; }
        if (acc) { /* tok is the draft, already in the cache: its logits are the next row */
            i_draft++;
            just_accepted = true;
            row = s->logits + (size_t)i_draft * (size_t)nv;
            continue;
        }
        if (n_draft > 0) { /* a draft token was rejected (or none left): keep the cache up to row i_draft */
            s->n_past = pos0 + i_draft + 1;
            n_draft = i_draft = 0;
        }
        if (s->n_past >= s->n_ctx) { fin = EL_DONE_LENGTH; break; }
        if (atomic_load(&s->cancel)) { fin = EL_DONE_CANCELLED; break; }
        int g = 0;
        if (spp) {
            int room = s->n_ctx - s->n_past - 1; /* positions after tok */
            if (gp->max_tokens > 0 && gp->max_tokens - st.n_generated - 1 < room) room = gp->max_tokens - st.n_generated - 1;
            if (room > ctl.gamma_max) room = ctl.gamma_max;
            int avail = 0;
            /* HOOK(grammar): drafted tokens must pass the same constraint as sampled ones — a constrained
             * generation cuts each draft below at its first token the grammar rejects (after any drafter). */
            if (spp->mode == EL_SPEC_DRAFT) { /* γ first (drafting costs time), then the draft model runs */
                const int want = el_spec_choose(&ctl, room);
                const bool probe = want == 0 && room > 0 && ++ds.since_probe >= EL_SPEC_PROBE_EVERY;
                if (want > 0 || probe) {
                    const double td = now_ms();
                    double t_fwd = 0.0;
                    avail = draft_propose(&ds, hist, n_hist, want > 0 ? want : 1, draft, &t_fwd, err);
                    if (avail < 0) { fin = EL_DONE_FAILED; break; }
                    if (want > 0) { /* a round: its whole drafting time (catching up included) per token */
                        if (avail > 0) el_spec_time_draft(&ctl, avail, now_ms() - td);
                        g = avail;
                    } else { /* a probe: α and the draft's one-token cost keep being measured while off */
                        ds.since_probe = 0;
                        if (avail > 0) {
                            shadow = draft[0];
                            el_spec_time_draft(&ctl, 1, t_fwd);
                        }
                    }
                }
            } else {
                if (room > 0 && spp->mode == EL_SPEC_NGRAM) avail = el_spec_ngram_draft(hist, n_hist, ng_min, ng_max, room, draft);
                if (room > 0 && spp->mode == EL_SPEC_PREDICT && st.n_generated < spp->n_prediction) {
                    avail = spp->n_prediction - st.n_generated < room ? spp->n_prediction - st.n_generated : room;
                    memcpy(draft, spp->prediction + st.n_generated, sizeof *draft * (size_t)avail);
                }
                g = el_spec_choose(&ctl, avail);
                if (g == 0 && avail > 0) shadow = draft[0];
            }
        }
        const double tf = now_ms();
        if (g > 0) {
            int32_t batch[EL_SPEC_MAX_DRAFT + 1];
            batch[0] = tok;
            memcpy(batch + 1, draft, sizeof *draft * (size_t)g);
            pos0 = s->n_past;
            s->out_rows = g + 1;
            el_op_matmul_row_order(true); /* each row as a decode step computes it */
            const int rc = el_exec_forward(s, batch, g + 1, err);
            el_op_matmul_row_order(false);
            s->out_rows = 1;
            if (rc) { fin = EL_DONE_FAILED; break; }
            s->n_past += g + 1;
            n_draft = g;
            i_draft = 0;
            st.n_spec_rounds++;
            st.spec_last_gamma = g;
            el_spec_time_verify(&ctl, g + 1, now_ms() - tf);
        } else {
            if (s->batch_phase ? el_batcher_decode(s->batcher, s, tok, err) : el_exec_forward(s, &tok, 1, err)) {
                fin = EL_DONE_FAILED;
                break;
            }
            s->n_past++;
            st.n_plain_steps++;
            if (spp) el_spec_time_plain(&ctl, now_ms() - tf);
        }
        row = s->logits;
    }
    /* Positions verified past the last token delivered leave the cache; as
     * after a plain step, the last token delivered is not in it either. */
    if (n_draft > 0) s->n_past = pos0 + i_draft + (just_accepted ? 0 : 1);
    if (spp) {
        st.spec_cost_ppm = (int)(el_spec_row_cost(&ctl) * 1e6 + 0.5);
    }
    /* release text still held back (not when a stop string cut it) */
    if (fin != EL_DONE_STOP && fin != EL_DONE_FAILED && cb) {
        int n = 0;
        memcpy(out, ts.held, (size_t)ts.n_held);
        n = ts.n_held;
        n += el_detok_flush(&ts.detok, out + n);
        if (n > 0) {
            el_token_info ti = {.id = -1, .piece = out, .piece_len = n, .logprob = 0.0f};
            cb(&ti, user);
        }
    }
    st.decode_ms = now_ms() - t1;
done:
    if (s->batch_phase) el_batcher_leave(s->batcher, s); /* a round never waits for it again */
    if (fin == EL_DONE_CANCELLED) el_set_error(err, EL_ERR_CANCELLED, "cancelled after %d generated tokens", st.n_generated);
    atomic_store(&s->cancel, false);
    if (con) {
        int nm, nc;
        el_sampler_filter_counts(smp, &nm, &nc);
        el_logf(m, EL_LOG_DEBUG, "grammar: %d whole masks, %d single-token checks for %d tokens", nm, nc, st.n_generated);
    }
    if (ds.d && ds.seq && s->n_past - t_base >= 0) {
        /* the draft's cache ends as the target's: hist[0..what the target holds), so the next call finds it in step */
        el_error derr = {0};
        int n_t = s->n_past - t_base;
        if (n_t > n_hist) n_t = n_hist;
        if (draft_sync(&ds, hist, n_t, &derr) != 0 || ds.d->n_past != s->n_past) ds.d->n_past = 0;
    }
    if (ds.claimed) atomic_store(&ds.d->busy, false);
    free(ds.seq);
    el_sampler_free(smp); /* the one release point of per-request state */
    el_constraint_free(con);
    free(hist);
    st.finish = fin;
    if (stats) *stats = st;
    return fin;
}
