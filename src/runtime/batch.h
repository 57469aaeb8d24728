/*
 * batch.h — batched decoding across sessions of one model (runtime): the
 * coordinator that lets several sessions' decode steps share one forward pass.
 *
 * Decode is bound by memory bandwidth: a one-token step reads every weight
 * once. A *round* runs one token from each of k decoding sessions in one
 * forward over k rows — matmuls, norms and FFN over k rows, so each weight is
 * read once for all k streams — while RoPE, the KV store and attention run per
 * row with that row's session, position and cache (runtime/blocks.c,
 * el_session.brow), and row i's logits land in session i's logits. Each row's
 * result is bit-identical to the session decoding alone: every op is
 * row-independent, and the products run in the one-row kernel order
 * (el_op_matmul_row_order, as speculative verification does).
 *
 * Contract:
 *   - Sessions are attached once (el_batcher_attach, same model, CPU backend
 *     alone and unmeasured — the executor's fast path — and the batcher's KV
 *     types); el_generate then routes that session's work through the batcher.
 *     Speculative decoding (a spec mode set), a session with LoRA adapters set
 *     (runtime/lora.h) and el_embed bypass it: they run
 *     their forwards alone, as before.
 *   - A generation joins at its start (phase PREFILL), becomes DECODING after
 *     its prefill and leaves when it ends however it ends (done, stopped,
 *     cancelled, failed): a round never waits for a session that left.
 *   - Decode step (el_batcher_decode): the caller submits (session, token at
 *     s->n_past) and blocks. A round starts when every DECODING session has
 *     submitted (and every PREFILL one whose chunk has just run has come back:
 *     the last chunk of a prompt is followed by its first decode step), or
 *     when the oldest submission has waited the bound, or
 *     max_rows are waiting. The bound is wait_us (default EL_BATCH_WAIT_US),
 *     stretched to 1.5x the measured mean gap between a session's round and
 *     its next submission (its sampling and callback), and to at least a
 *     quarter of the mean round time (a late session would otherwise lose a
 *     whole round), but to at most half of it (batch.c, adapt_bound). One of the waiting threads
 *     (the leader) runs the forward; every waiter of the round wakes with its
 *     logits in s->logits. The caller advances s->n_past, as after a solo step.
 *     A round of one row runs on the session itself (no copy).
 *   - Chunked prefill (el_batcher_prefill): a joining session's prompt is
 *     evaluated in chunks of at most `chunk` tokens (default
 *     EL_BATCH_CHUNK), each taking the model for one forward between decode
 *     rounds: after a round, one waiting chunk goes before the next round, so
 *     a running decode stalls for at most one chunk, never a whole prompt.
 *     The chunk is the prefill batch (el_session.n_batch) for the numerics:
 *     a prompt's logits equal a solo session's whose n_batch is the chunk.
 *   - Admission window: requests that arrive together are prefilled
 *     together. A round whose rows are all *fresh* (sessions that have not
 *     had a round yet in this generation: they just finished their prompts)
 *     yields to prompt chunks already waiting, for at most admit_us
 *     (default EL_BATCH_ADMIT_US) after its oldest submission, so the
 *     streams start decoding in one round instead of each stream's first
 *     steps each absorbing one later stream's chunk (and the rounds of 1, 2,
 *     3 rows that interleaving makes at the start and the end of a group).
 *     A round with a row that has decoded before never waits for this (the
 *     one-chunk-per-round rule above holds for running streams), and a lone
 *     request is not delayed at all (no chunk waits). Which forward runs
 *     first never changes a result: chunks and rounds compute the same bits
 *     in any order.
 *   - Forwards through one batcher never overlap (one runs at a time), so
 *     the model's thread pool serves one pass at a time.
 *   - Cancellation is checked where el_generate always checks it (before a
 *     step is submitted): a session cancelled while its row is in a round
 *     keeps that round's token, exactly as a solo step that had started, and
 *     stops at its next safe point; its KV then ends at the last token whose
 *     forward completed, with n_past counting it.
 * Memory: el_batcher_new allocates the scratch session once (activations and
 * logits for max_rows rows, a context of max_rows positions it never uses);
 * nothing is allocated per round. el_batcher_bytes says how much, before.
 * Trace: with EL_BATCH_TRACE=FILE in the environment at el_batcher_new, one
 * line per round (start, end, rows, ended by the bound, each row's session
 * and submission time) and per prefill chunk goes to FILE
 * (bench/server-batch/trace.py summarises it); without it, nothing.
 */
#ifndef EL_RUNTIME_BATCH_H
#define EL_RUNTIME_BATCH_H
#include <stdint.h>

#include "edgellm.h"

typedef struct el_batcher el_batcher;

#define EL_BATCH_MAX_ROWS 33   /* rows of one round: the scratch session's logit rows (1 + EL_SPEC_MAX_DRAFT) */
#define EL_BATCH_WAIT_US 1000  /* default bound on waiting for the other decoding sessions */
#define EL_BATCH_CHUNK 64      /* default prefill chunk (tokens) */
#define EL_BATCH_ADMIT_US 250000 /* default bound on a fresh round's yielding to prompt chunks (admission window) */
#define EL_BATCH_MAX_ATTACHED 256 /* sessions one batcher serves */

typedef struct el_batcher_params {
    int max_rows;   /* rows per round, 1..EL_BATCH_MAX_ROWS (0: 8) */
    int wait_us;    /* bound on a round's wait for missing submissions (0: EL_BATCH_WAIT_US; < 0: none) */
    int chunk;      /* prefill chunk in tokens (0: EL_BATCH_CHUNK) */
    int admit_us;   /* admission window: how long a round of fresh sessions yields to waiting prompt
                     * chunks (0: EL_BATCH_ADMIT_US; < 0: never) */
    int type_k, type_v; /* KV cache types of the sessions attached (el_session_params; 0: default) */
} el_batcher_params;

typedef struct el_batcher_stats {
    uint64_t rounds;         /* decode rounds run */
    uint64_t streams;        /* rows over all rounds (streams / rounds: mean batch) */
    uint64_t multi_rounds;   /* rounds of more than one row */
    uint64_t timed_rounds;   /* rounds started by the wait bound, not a full set */
    uint64_t prefill_chunks; /* prefill chunks run */
    uint64_t admitted_chunks; /* of them, run ahead of a due round of fresh sessions (the admission window) */
    int max_rows_seen;       /* the largest round */
    /* a session's gap between its round's end and its next submission (its
     * sampling and streaming callback): what the wait bound must cover */
    uint64_t gaps, gap_ns_sum, gap_ns_max;
    uint64_t bound_ns;       /* the wait bound in force after the last round */
} el_batcher_stats;

/* A batcher for sessions of model m. NULL with err set: a bad parameter, no
 * memory, or a model whose passes are not on the CPU fast path (another
 * backend, or measuring). */
el_batcher *el_batcher_new(el_model *m, const el_batcher_params *p, el_error *err);
/* Bytes el_batcher_new(m, p) allocates: the batcher and, for more than one
 * row, its scratch session (activations and logits for max_rows rows:
 * el_session_bytes_for of that session, exactly). 0 for a bad row count or
 * KV types the model cannot use. What a server's memory admission counts
 * beside its slots' sessions (server/server.c). */
uint64_t el_batcher_bytes(const el_model *m, const el_batcher_params *p);
/* The most rows per round, from p->max_rows (0: 8) down to 2, whose
 * el_batcher_bytes fit in `spare` bytes; 1 when not even two rows' do
 * (decode slot by slot). */
int el_batcher_rows_fitting(const el_model *m, const el_batcher_params *p, uint64_t spare);
/* Frees it; no session may be generating through it (detach first, or free the sessions after). */
void el_batcher_free(el_batcher *b);
/* s's generations go through b from now on. 0, or an el_status: another
 * model, other KV types than b's, already attached elsewhere, a generation
 * running, or EL_BATCH_MAX_ATTACHED sessions attached already. */
int el_batcher_attach(el_batcher *b, el_session *s, el_error *err);
/* s's generations run alone again (not while one runs). */
void el_batcher_detach(el_batcher *b, el_session *s);
el_batcher_stats el_batcher_get_stats(el_batcher *b);
/* The prefill chunk (tokens). */
int el_batcher_chunk(const el_batcher *b);

/* ---- called by el_generate (runtime/session.c) ---- */
void el_batcher_join(el_batcher *b, el_session *s);     /* → PREFILL */
void el_batcher_decoding(el_batcher *b, el_session *s); /* PREFILL → DECODING */
void el_batcher_leave(el_batcher *b, el_session *s);    /* → out, from either */
/* One prefill chunk: toks[0..n) at s->n_past.. (n <= the chunk), run on s
 * alone in its turn. 0 or an el_status (err set). The caller advances n_past. */
int el_batcher_prefill(el_batcher *b, el_session *s, const int32_t *toks, int n, el_error *err);
/* One decode step of s (DECODING): tok at s->n_past, in a round; its logits
 * in s->logits on return. 0 or an el_status (err set). The caller advances n_past. */
int el_batcher_decode(el_batcher *b, el_session *s, int32_t tok, el_error *err);

#endif
