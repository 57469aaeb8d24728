/*
 * exec.h — a session's executor (runtime): runs the ops the forward passes
 * describe on the backends the placement chose, and keeps every tensor's
 * copies coherent across them.
 *
 * el_exec_forward(s, toks, n) is the one way a forward pass runs. With the
 * CPU backend alone (the default) each op goes straight to it: no
 * bookkeeping beyond building the op. With more backends, the first forward
 * of a given shape (n rows, rows kept, embedding or not) is run once in
 * *describe* mode — the architecture's forward builds its ops, nothing
 * executes — and the op list goes to the scheduler (sched/placement.h);
 * the placement is cached per shape. Then each op runs on its device:
 *
 *   - an operand whose current copy is elsewhere is moved first (device →
 *     host → device), only the bytes written this step (el_tensor.extent);
 *     bytes moved are counted per boundary;
 *   - model constants (weights, norms, biases) are uploaded to a device once,
 *     the next op's while the current one computes (upload_const async);
 *   - a KV cache lives where its layer's attention runs (the scheduler
 *     groups the store and the attention) and moves only if a later plan
 *     puts that attention elsewhere;
 *   - a device that refuses an op or fails (out of memory, a kernel error)
 *     is recorded as a fallback with its reason and the op runs on the CPU;
 *     after a run-time failure the device takes no more ops in this session.
 *
 * After the pass the logits (and embeddings) are current on the host. With
 * el_backend_params.measure each partition is synchronised and timed, for
 * the placement report (estimated vs measured).
 */
#ifndef EL_RUNTIME_EXEC_H
#define EL_RUNTIME_EXEC_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "backend/backend.h"
#include "edgellm.h"
#include "sched/placement.h"

typedef struct el_session el_session;
typedef struct el_model el_model;
typedef struct el_exec el_exec;

/* The session tensors: fixed activations, then K and V of each layer. */
enum {
    EL_T_X = 0, EL_T_XB, EL_T_Q, EL_T_K, EL_T_V, EL_T_ATT, EL_T_GATE, EL_T_UP, EL_T_TMP, EL_T_LOGITS,
    EL_T_N_FIXED
};
static inline int el_t_kc(int il) { return EL_T_N_FIXED + 2 * il; }
static inline int el_t_vc(int il) { return EL_T_N_FIXED + 2 * il + 1; }


/* The executor of session s (its buffers must be set). NULL on allocation failure. */
el_exec *el_exec_new(el_session *s, el_error *err);
void el_exec_free(el_exec *x);

el_tensor *el_exec_tensor(el_exec *x, int id);
/* A float range of tensor id: elements [off, off + n). */
el_tref el_exec_ref(el_exec *x, int id, size_t off, size_t n);

/* Runs toks[0..n) at positions s->n_past.. through the architecture's forward
 * pass. 0, or an el_status with err set (a backend failed and the CPU could not
 * take over; the session's cache is then unusable past n_past). */
int el_exec_forward(el_session *s, const int32_t *toks, int n, el_error *err);

/* Forgets the cached placements: the ops of a pass changed (LoRA adapters set
 * or cleared, runtime/lora.c); the next forward of each shape is described again. */
void el_exec_forget_plans(el_exec *x);

/* Called by the forward passes (runtime/blocks.c) for each op. */
void el_exec_op(el_session *s, el_op *op);

/* Describes a pass of n rows (nothing runs): the op list the scheduler
 * places, valid until the next call (edgellm plan --devices). 0 or an el_status. */
int el_exec_describe(el_session *s, int n, const el_place_op **ops, int *n_ops, el_error *err);

/* Every tensor's host copy current (before reading KV caches on the host: slot save). */
int el_exec_sync_host(const el_session *s, el_error *err);
/* The host copy of tensor id was written outside an op (slot restore): it alone is current. */
void el_exec_host_wrote(el_session *s, int id);

/* The session's buffers, bound once (session.c): tensor id, name, layer (-1 for activations). */
void el_exec_bind(el_exec *x, int id, const char *name, int layer, void *host, size_t bytes);

/* The placement of the last forward of n rows (NULL if none was planned:
 * CPU alone without measuring) and its op list. */
const el_placement *el_exec_placement(const el_exec *x, int n, const el_place_op **ops);

/* Counters since the session began. */
typedef struct el_exec_stats {
    uint64_t ops[EL_MAX_BACKENDS];       /* ops run on each backend */
    uint64_t bytes_moved;                /* operand bytes copied between backends */
    uint64_t fallbacks;                  /* ops a device refused or failed at run time */
    char last_fallback[160];             /* the last run-time fallback's reason */
} el_exec_stats;
const el_exec_stats *el_exec_get_stats(const el_exec *x);

/* Writes the placement report of the session's last planned forward (text or
 * JSON) — every op's device, partitions, bytes, estimated and measured times,
 * fallbacks — plus the run-time counters. Returns bytes written. */
void el_exec_report(const el_session *s, FILE *f, bool json);

/* ---- process side: the model's backend set (runtime/model.c calls these) ---- */


#endif
