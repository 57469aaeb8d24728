/*
 * plan.h — the memory plan of a session (layer L5).
 *
 * Everything a session needs — the F16 KV cache of every layer, activation
 * scratch for n_batch tokens, quantized-activation scratch, logits — is laid
 * out in one block whose size is known before any work starts. el_session_new allocates exactly this block (and nothing
 * later); el_session_bytes reports it so a caller can refuse a request that
 * does not fit its budget.
 */
#ifndef EL_MEMORY_PLAN_H
#define EL_MEMORY_PLAN_H
#include <stddef.h>

struct el_model;

typedef struct el_session_plan {
    size_t kv_bytes;      /* K + V for all layers */
    size_t kv_layer;      /* bytes of K (= of V) per layer */
    size_t off_x, off_xb, off_q, off_k, off_v, off_att, off_gate, off_up, off_tmp;
    size_t off_logits, off_wq8, off_rope, off_top_ids, off_top_lps;
    size_t scratch_bytes;
    size_t total;         /* kv_bytes + scratch_bytes */
} el_session_plan;

/* Fills the plan; returns 0, or -1 if the sizes overflow. */
int el_plan_session(const struct el_model *m, int n_ctx, int n_batch, el_session_plan *p);

#endif
