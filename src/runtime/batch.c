/*
 * batch.c — the batched-decoding coordinator (contract in batch.h).
 *
 * State, all under b->mu:
 *   - n_decoding: attached sessions in phase DECODING (batch_phase 2) — the
 *     submissions a round waits for — and n_between: sessions in PREFILL
 *     whose chunk has run and that have not come back yet (with another
 *     chunk, or as DECODING: el_batcher_decoding comes after the last chunk
 *     returns); a round waits for them too, up to the bound, or the stream
 *     that just finished its prompt would miss the first round and wait a
 *     whole one;
 *   - pend[0..n_pend): submitted decode steps, oldest first (each lives on
 *     its submitter's stack until `done`);
 *   - busy: a forward (a round or a prefill chunk) runs; its runner holds no
 *     lock while it computes;
 *   - prefill_turn: set after a round when a chunk waits: the next forward is
 *     a chunk, so prefill progresses one chunk per round;
 *   - t_done[i]: when attached session i's last round ended, zero until its
 *     first round in a generation — a pending row of such a session is
 *     *fresh*, and a round of fresh rows only yields to waiting chunks for
 *     up to admit_ns after its oldest submission (admit_hold: the admission
 *     window of batch.h).
 * Leader rule: a waiting submitter whose step is not done, seeing !busy and
 * round_ready(), takes up to max_rows submissions, runs them, marks them done
 * and wakes everyone. Every thread waits with a deadline (the oldest
 * submission's time + wait_us) so a round never waits for a session that has
 * not submitted for longer than the bound, and a session leaving wakes the
 * waiters (the set they wait for has shrunk). Nothing can wait on a thread
 * that is not itself waiting in here or computing: no deadlock.
 */
#include "runtime/batch.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/model.h"
#include "runtime/exec.h"
#include "util/error.h"

typedef struct pend {
    el_session *s;
    int32_t tok;
    struct timespec t_sub; /* when it was submitted (the trace) */
    bool done;
    int rc;
    el_error err;
} pend;

struct el_batcher {
    el_model *m;
    el_session *scratch; /* activations and logits for max_rows rows */
    int max_rows, chunk;
    long wait_ns;      /* the configured bound (0: none) */
    long bound_ns;     /* the bound in force: wait_ns, stretched toward the sessions' measured gap (adapt_bound) */
    long admit_ns;     /* the admission window (0: off) */
    double ewma_gap_ns, ewma_round_ns;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int n_attached, n_decoding, n_prefill_waiting, n_between;
    pend *pend[EL_BATCH_MAX_ROWS * 4];
    int n_pend;
    struct timespec t_first; /* when pend[0] was submitted */
    bool busy, prefill_turn;
    el_batcher_stats st;
    /* the attached sessions, and when each one's last round ended (0: none yet in this generation) */
    el_session *att[EL_BATCH_MAX_ATTACHED];
    struct timespec t_done[EL_BATCH_MAX_ATTACHED];
    bool between[EL_BATCH_MAX_ATTACHED]; /* PREFILL, a chunk run, not back yet (n_between) */
    /* EL_BATCH_TRACE=FILE: one line per round and per prefill chunk (batch.h); NULL: off */
    FILE *trace;
    struct timespec t0; /* the trace's time origin: el_batcher_new */
    /* round scratch (used by the leader only, while busy) */
    int32_t toks[EL_BATCH_MAX_ROWS];
    el_batch_row rows[EL_BATCH_MAX_ROWS];
};

static void ts_now(struct timespec *t) { clock_gettime(CLOCK_MONOTONIC, t); }
static void ts_add_ns(struct timespec *t, long ns) {
    t->tv_nsec += ns;
    while (t->tv_nsec >= 1000000000L) t->tv_nsec -= 1000000000L, t->tv_sec++;
}
static long long ts_us(const struct timespec *t, const struct timespec *t0) {
    return (long long)(t->tv_sec - t0->tv_sec) * 1000000LL + (t->tv_nsec - t0->tv_nsec) / 1000;
}
static bool ts_reached(const struct timespec *now, const struct timespec *dl) {
    return now->tv_sec > dl->tv_sec || (now->tv_sec == dl->tv_sec && now->tv_nsec >= dl->tv_nsec);
}

/* The scratch session of a batcher of `rows` rows: activations and logits for
 * every row; a context of `rows` positions (its own cache is never used). */
static el_session_params scratch_params(const el_batcher_params *p, int rows) {
    el_session_params sp = el_session_default_params();
    sp.n_ctx = rows < 2 ? 2 : rows;
    sp.n_batch = rows;
    sp.n_draft_max = rows - 1; /* logits for every row */
    sp.type_k = p ? p->type_k : 0;
    sp.type_v = p ? p->type_v : 0;
    return sp;
}

uint64_t el_batcher_bytes(const el_model *m, const el_batcher_params *p) {
    const int rows = p && p->max_rows ? p->max_rows : 8;
    if (!m || rows < 1 || rows > EL_BATCH_MAX_ROWS) return 0;
    if (rows == 1) return sizeof(el_batcher);
    const el_session_params sp = scratch_params(p, rows);
    const size_t ses = el_session_bytes_for(m, &sp);
    return ses ? (uint64_t)ses + sizeof(el_batcher) : 0;
}

int el_batcher_rows_fitting(const el_model *m, const el_batcher_params *p, uint64_t spare) {
    el_batcher_params q = p ? *p : (el_batcher_params){0};
    for (int rows = q.max_rows ? q.max_rows : 8; rows >= 2; rows--) {
        q.max_rows = rows;
        const uint64_t need = el_batcher_bytes(m, &q);
        if (need && need <= spare) return rows;
    }
    return 1;
}

el_batcher *el_batcher_new(el_model *m, const el_batcher_params *p, el_error *err) {
    if (err) err->code = EL_OK, err->msg[0] = 0;
    if (!m || !m->arch) { el_set_error(err, EL_ERR_INVALID_ARG, "batcher: no model"); return NULL; }
    const int rows = p && p->max_rows ? p->max_rows : 8;
    if (rows < 1 || rows > EL_BATCH_MAX_ROWS) {
        el_set_error(err, EL_ERR_INVALID_ARG, "batcher: %d rows per round: expected 1..%d", rows, EL_BATCH_MAX_ROWS);
        return NULL;
    }
    const int chunk = p && p->chunk ? p->chunk : EL_BATCH_CHUNK;
    if (chunk < 1 || chunk > 1 << 16) {
        el_set_error(err, EL_ERR_INVALID_ARG, "batcher: prefill chunk of %d tokens: expected 1..65536", chunk);
        return NULL;
    }
    const int wait_us = p && p->wait_us ? p->wait_us : EL_BATCH_WAIT_US;
    if (wait_us > 1000000) {
        el_set_error(err, EL_ERR_INVALID_ARG, "batcher: wait bound of %d us: expected at most 1 s", wait_us);
        return NULL;
    }
    const int admit_us = p && p->admit_us ? p->admit_us : EL_BATCH_ADMIT_US;
    if (admit_us > 10000000) {
        el_set_error(err, EL_ERR_INVALID_ARG, "batcher: admission window of %d us: expected at most 10 s", admit_us);
        return NULL;
    }
    if (m->n_be > 1 || m->measure) {
        el_set_error(err, EL_ERR_UNSUPPORTED, "batcher: the model runs on more than the CPU backend (or measures): "
                                              "batched decoding needs the CPU fast path");
        return NULL;
    }
    el_batcher *b = calloc(1, sizeof *b);
    if (!b) { el_set_error(err, EL_ERR_NOMEM, "batcher: out of memory"); return NULL; }
    b->m = m;
    b->max_rows = rows;
    b->chunk = chunk;
    b->wait_ns = wait_us < 0 ? 0 : (long)wait_us * 1000L;
    b->bound_ns = b->wait_ns;
    b->admit_ns = admit_us < 0 ? 0 : (long)admit_us * 1000L;
    if (rows > 1) {
        const el_session_params sp = scratch_params(p, rows);
        b->scratch = el_session_new(m, &sp, err);
        if (!b->scratch) { free(b); return NULL; }
    }
    pthread_mutex_init(&b->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&b->cv, &ca);
    pthread_condattr_destroy(&ca);
    ts_now(&b->t0);
    const char *tp = getenv("EL_BATCH_TRACE");
    if (tp && *tp) {
        b->trace = fopen(tp, "w");
        if (b->trace) fprintf(b->trace, "# edgellm batch trace: times in us since the batcher started; "
                                        "R round start end rows timed bound_us decoding [session submit_us]...; "
                                        "P chunk start end tokens session admitted; D/L time session: a session starts/ends decoding\n");
    }
    return b;
}

void el_batcher_free(el_batcher *b) {
    if (!b) return;
    if (b->trace) fclose(b->trace);
    el_session_free(b->scratch);
    pthread_cond_destroy(&b->cv);
    pthread_mutex_destroy(&b->mu);
    free(b);
}

int el_batcher_attach(el_batcher *b, el_session *s, el_error *err) {
    if (!b || !s) return el_set_error(err, EL_ERR_INVALID_ARG, "batcher: attach of a NULL session");
    if (s->m != b->m) return el_set_error(err, EL_ERR_INVALID_ARG, "batcher: the session belongs to another model");
    if (s->batcher) return el_set_error(err, EL_ERR_INVALID_ARG, "batcher: the session is attached already");
    if (b->scratch && (s->type_k != b->scratch->type_k || s->type_v != b->scratch->type_v))
        return el_set_error(err, EL_ERR_INVALID_ARG, "batcher: the session's KV types (K %s, V %s) are not the batcher's (K %s, V %s)",
                            el_cache_type_name(s->type_k), el_cache_type_name(s->type_v),
                            el_cache_type_name(b->scratch->type_k), el_cache_type_name(b->scratch->type_v));
    if (atomic_load(&s->busy)) return el_set_error(err, EL_ERR_INVALID_ARG, "batcher: the session is generating");
    pthread_mutex_lock(&b->mu);
    if (b->n_attached >= EL_BATCH_MAX_ATTACHED) {
        pthread_mutex_unlock(&b->mu);
        return el_set_error(err, EL_ERR_INVALID_ARG, "batcher: %d sessions attached already", EL_BATCH_MAX_ATTACHED);
    }
    s->batcher = b;
    s->batch_phase = 0;
    b->att[b->n_attached] = s;
    b->t_done[b->n_attached] = (struct timespec){0, 0};
    b->between[b->n_attached] = false;
    b->n_attached++;
    pthread_mutex_unlock(&b->mu);
    return 0;
}

void el_batcher_detach(el_batcher *b, el_session *s) {
    if (!b || !s || s->batcher != b || atomic_load(&s->busy)) return;
    pthread_mutex_lock(&b->mu);
    s->batcher = NULL;
    for (int i = 0; i < b->n_attached; i++)
        if (b->att[i] == s) {
            b->att[i] = b->att[b->n_attached - 1];
            b->t_done[i] = b->t_done[b->n_attached - 1];
            b->between[i] = b->between[b->n_attached - 1];
            b->n_attached--;
            break;
        }
    pthread_mutex_unlock(&b->mu);
}

el_batcher_stats el_batcher_get_stats(el_batcher *b) {
    el_batcher_stats st = {0};
    if (!b) return st;
    pthread_mutex_lock(&b->mu);
    st = b->st;
    pthread_mutex_unlock(&b->mu);
    return st;
}

int el_batcher_chunk(const el_batcher *b) { return b ? b->chunk : 0; }

void el_batcher_join(el_batcher *b, el_session *s) {
    pthread_mutex_lock(&b->mu);
    s->batch_phase = 1;
    pthread_mutex_unlock(&b->mu);
}

/* A trace line for a session starting (D) or ending (L) its decode phase (b->mu held). */
static void trace_phase(el_batcher *b, char what, const el_session *s);
static bool clear_between(el_batcher *b, const el_session *s);

void el_batcher_decoding(el_batcher *b, el_session *s) {
    pthread_mutex_lock(&b->mu);
    clear_between(b, s);
    if (s->batch_phase == 1) {
        s->batch_phase = 2;
        b->n_decoding++;
        if (b->trace) trace_phase(b, 'D', s);
    }
    pthread_mutex_unlock(&b->mu);
}

static int att_index(const el_batcher *b, const el_session *s) {
    for (int i = 0; i < b->n_attached; i++)
        if (b->att[i] == s) return i;
    return -1;
}

/* s is back from between two forwards of its prefill (b->mu held): true if it was counted in n_between. */
static bool clear_between(el_batcher *b, const el_session *s) {
    const int ai = att_index(b, s);
    if (ai < 0 || !b->between[ai]) return false;
    b->between[ai] = false;
    b->n_between--;
    return true;
}

static void trace_phase(el_batcher *b, char what, const el_session *s) {
    struct timespec t;
    ts_now(&t);
    fprintf(b->trace, "%c %lld %d\n", what, ts_us(&t, &b->t0), att_index(b, s));
}

void el_batcher_leave(el_batcher *b, el_session *s) {
    pthread_mutex_lock(&b->mu);
    if (b->trace && s->batch_phase == 2) trace_phase(b, 'L', s);
    const int ai = att_index(b, s);
    if (ai >= 0) b->t_done[ai] = (struct timespec){0, 0}; /* the next generation's first step has no gap */
    clear_between(b, s); /* a prefill that failed or was cancelled */
    if (s->batch_phase == 2) b->n_decoding--;
    s->batch_phase = 0;
    pthread_cond_broadcast(&b->cv); /* a round waiting for this session need not */
    pthread_mutex_unlock(&b->mu);
}

/* The wait bound (b->mu held): at least wait_ns; 1.5x the sessions' mean
 * submission gap (a model whose sampling takes longer than the bound —
 * Gemma's 262k-entry vocabulary — would otherwise split every round in two),
 * but at least a quarter and at most half of a round's mean duration (past
 * that, a second round costs less than the wait). Means: exponential,
 * weight 1/8. */
static void adapt_bound(el_batcher *b) {
    if (b->wait_ns == 0) return; /* no waiting asked for */
    double want = 1.5 * b->ewma_gap_ns;
    /* a session that misses a round waits a whole one more, so the others wait for a late one up to a
     * quarter of a round whatever the mean gap: the gaps' tail (a slot thread descheduled on a busy
     * machine) is far longer than their mean */
    if (want < 0.25 * b->ewma_round_ns) want = 0.25 * b->ewma_round_ns;
    if (want > 0.5 * b->ewma_round_ns) want = 0.5 * b->ewma_round_ns;
    b->bound_ns = want > (double)b->wait_ns ? (long)want : b->wait_ns;
}
static void ewma(double *m, double v) { *m = *m > 0 ? *m + (v - *m) / 8.0 : v; }

/* The admission window (b->mu held): a prompt chunk waits, and the round due
 * would take only fresh rows (sessions with no round yet in this generation:
 * t_done zero), the oldest submitted less than admit_ns ago — the chunk goes
 * first. *dl: when the window closes. */
static bool admit_hold(const el_batcher *b, const struct timespec *now, struct timespec *dl) {
    if (b->admit_ns == 0 || b->n_prefill_waiting == 0 || b->n_pend == 0) return false;
    const int k = b->n_pend < b->max_rows ? b->n_pend : b->max_rows;
    for (int i = 0; i < k; i++) {
        const int ai = att_index(b, b->pend[i]->s);
        if (ai < 0 || b->t_done[ai].tv_sec || b->t_done[ai].tv_nsec) return false; /* it has decoded before */
    }
    *dl = b->pend[0]->t_sub;
    ts_add_ns(dl, b->admit_ns);
    return !ts_reached(now, dl);
}

/* Whether a round is due (b->mu held, !busy): submissions wait, it is not
 * prefill's turn, and the set is complete or the bound has passed. */
static bool round_due(const el_batcher *b, const struct timespec *now, bool *timed) {
    *timed = false;
    if (b->n_pend == 0) return false;
    if (b->prefill_turn && b->n_prefill_waiting > 0) return false; /* a chunk goes first */
    if (b->n_pend >= b->n_decoding + b->n_between || b->n_pend >= b->max_rows) return true;
    struct timespec dl = b->t_first;
    ts_add_ns(&dl, b->bound_ns);
    return *timed = ts_reached(now, &dl);
}

/* Whether a round should start now (b->mu held, !busy): due, and not held
 * back by the admission window (the chunks of a fresh round's peers go first). */
static bool round_ready(const el_batcher *b, const struct timespec *now, bool *timed) {
    struct timespec adl;
    return round_due(b, now, timed) && !admit_hold(b, now, &adl);
}

/* Wait on b->cv until woken or the oldest submission's bound expires (or,
 * while the admission window holds a round back, the window closes) (b->mu held). */
static void wait_turn(el_batcher *b) {
    if (b->n_pend > 0 && !b->busy) {
        struct timespec dl = b->t_first, now, adl;
        ts_add_ns(&dl, b->bound_ns);
        ts_now(&now);
        if (admit_hold(b, &now, &adl)) dl = adl; /* no round before: a chunk runs, or the window closes */
        pthread_cond_timedwait(&b->cv, &b->mu, &dl);
    } else {
        pthread_cond_wait(&b->cv, &b->mu);
    }
}

/* The leader's round: rows pend[0..k) (taken off the queue, b->mu not held). */
static void run_round(el_batcher *b, pend *const *ps, int k) {
    if (k == 1) { /* one stream: the solo step on its own session */
        pend *p = ps[0];
        p->rc = el_exec_forward(p->s, &p->tok, 1, &p->err);
        return;
    }
    el_session *x = b->scratch;
    for (int i = 0; i < k; i++) {
        b->toks[i] = ps[i]->tok;
        b->rows[i] = (el_batch_row){ps[i]->s, ps[i]->s->n_past};
    }
    x->brow = b->rows;
    x->n_brows = k;
    x->out_rows = k;
    el_op_matmul_row_order(true); /* each row in a one-row product's arithmetic: the solo step's bits */
    el_error e = {0};
    const int rc = el_exec_forward(x, b->toks, k, &e);
    el_op_matmul_row_order(false);
    x->out_rows = 1;
    x->brow = NULL;
    x->n_brows = 0;
    const size_t nv = (size_t)b->m->hp.n_vocab;
    for (int i = 0; i < k; i++) {
        ps[i]->rc = rc;
        if (rc) ps[i]->err = e;
        else memcpy(ps[i]->s->logits, x->logits + (size_t)i * nv, sizeof(float) * nv);
    }
}

int el_batcher_decode(el_batcher *b, el_session *s, int32_t tok, el_error *err) {
    pend p = {.s = s, .tok = tok};
    pthread_mutex_lock(&b->mu);
    while (b->n_pend >= (int)(sizeof b->pend / sizeof b->pend[0])) pthread_cond_wait(&b->cv, &b->mu);
    struct timespec t_sub;
    ts_now(&t_sub);
    const int ai = att_index(b, s);
    if (ai >= 0 && (b->t_done[ai].tv_sec || b->t_done[ai].tv_nsec)) { /* since this session's last round */
        const long long gap = (long long)(t_sub.tv_sec - b->t_done[ai].tv_sec) * 1000000000LL + (t_sub.tv_nsec - b->t_done[ai].tv_nsec);
        if (gap >= 0) {
            b->st.gaps++;
            b->st.gap_ns_sum += (uint64_t)gap;
            ewma(&b->ewma_gap_ns, (double)gap);
            adapt_bound(b);
            if ((uint64_t)gap > b->st.gap_ns_max) b->st.gap_ns_max = (uint64_t)gap;
        }
    }
    p.t_sub = t_sub;
    if (b->n_pend == 0) b->t_first = t_sub;
    b->pend[b->n_pend++] = &p;
    pthread_cond_broadcast(&b->cv); /* the set may be complete now */
    while (!p.done) {
        struct timespec now;
        ts_now(&now);
        bool timed;
        if (!b->busy && round_ready(b, &now, &timed)) {
            const int k = b->n_pend < b->max_rows ? b->n_pend : b->max_rows;
            pend *ps[EL_BATCH_MAX_ROWS];
            memcpy(ps, b->pend, sizeof *ps * (size_t)k);
            memmove(b->pend, b->pend + k, sizeof *b->pend * (size_t)(b->n_pend - k));
            b->n_pend -= k;
            b->busy = true;
            pthread_mutex_unlock(&b->mu);
            run_round(b, ps, k);
            pthread_mutex_lock(&b->mu);
            struct timespec t_end;
            ts_now(&t_end);
            /* submissions that came in during the round wait their bound from its end, when a
             * round could first take them — not from their arrival, or the sessions of this round
             * (sampling now) would miss the next one and the streams split into alternating halves */
            if (b->n_pend > 0) b->t_first = t_end;
            ewma(&b->ewma_round_ns, (double)(t_end.tv_sec - now.tv_sec) * 1e9 + (double)(t_end.tv_nsec - now.tv_nsec));
            adapt_bound(b);
            b->st.bound_ns = (uint64_t)b->bound_ns;
            for (int i = 0; i < k; i++) {
                ps[i]->done = true;
                const int j = att_index(b, ps[i]->s);
                if (j >= 0) b->t_done[j] = t_end;
            }
            b->busy = false;
            b->prefill_turn = b->n_prefill_waiting > 0;
            b->st.rounds++;
            b->st.streams += (uint64_t)k;
            if (k > 1) b->st.multi_rounds++;
            if (timed) b->st.timed_rounds++;
            if (k > b->st.max_rows_seen) b->st.max_rows_seen = k;
            if (b->trace) {
                fprintf(b->trace, "R %llu %lld %lld %d %d %ld %d", (unsigned long long)b->st.rounds, ts_us(&now, &b->t0),
                        ts_us(&t_end, &b->t0), k, timed, b->bound_ns / 1000, b->n_decoding);
                for (int i = 0; i < k; i++) fprintf(b->trace, " %d %lld", att_index(b, ps[i]->s), ts_us(&ps[i]->t_sub, &b->t0));
                fputc('\n', b->trace);
            }
            pthread_cond_broadcast(&b->cv);
            continue;
        }
        wait_turn(b);
    }
    pthread_mutex_unlock(&b->mu);
    if (p.rc && err) *err = p.err;
    return p.rc;
}

int el_batcher_prefill(el_batcher *b, el_session *s, const int32_t *toks, int n, el_error *err) {
    pthread_mutex_lock(&b->mu);
    if (clear_between(b, s)) pthread_cond_broadcast(&b->cv); /* a round waiting for it need not */
    b->n_prefill_waiting++;
    bool admitted = false;
    for (;;) {
        if (!b->busy) {
            struct timespec now, adl;
            ts_now(&now);
            bool timed;
            /* a chunk goes when it is prefill's turn, or when no round is due (or the one due
             * is a fresh round inside the admission window) */
            if (b->prefill_turn || !round_due(b, &now, &timed)) break;
            if (admit_hold(b, &now, &adl)) {
                admitted = true;
                break;
            }
        }
        wait_turn(b);
    }
    b->n_prefill_waiting--;
    if (admitted) b->st.admitted_chunks++;
    b->prefill_turn = false;
    b->busy = true;
    pthread_mutex_unlock(&b->mu);
    struct timespec t_start, t_end;
    ts_now(&t_start);
    const int rc = el_exec_forward(s, toks, n, err);
    ts_now(&t_end);
    pthread_mutex_lock(&b->mu);
    b->busy = false;
    b->st.prefill_chunks++;
    const int ai = att_index(b, s);
    if (ai >= 0 && s->batch_phase == 1 && !b->between[ai]) { /* until it comes back: a round waits for it */
        b->between[ai] = true;
        b->n_between++;
    }
    if (b->trace)
        fprintf(b->trace, "P %llu %lld %lld %d %d %d\n", (unsigned long long)b->st.prefill_chunks, ts_us(&t_start, &b->t0),
                ts_us(&t_end, &b->t0), n, att_index(b, s), admitted);
    if (b->n_pend > 0) ts_now(&b->t_first); /* as after a round: the bound counts from when a round can run */
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
    return rc;
}
