/*
 * lora_registry.h — the server's LoRA adapters: registered by name, loaded
 * lazily, kept resident within a byte budget, evicted least recently used.
 *
 * Contract:
 *   - el_lora_reg_add validates each adapter once at startup (read, checked
 *     against the model, SHA-256 taken, then dropped: nothing is resident
 *     until a request uses it) and refuses one larger than the budget, so a
 *     budget smaller than an adapter fails before the server serves.
 *   - Ids are the registration order (llama-server's ids). Each has a
 *     default scale (1 at registration; POST /lora-adapters sets them, the
 *     ones it does not name become 0, as llama-server).
 *   - el_lora_reg_acquire takes the adapters a request needs (scale > 0):
 *     each resident one gains a reference; a missing one is loaded, first
 *     evicting resident adapters with no reference, least recently used first,
 *     until it fits the budget. An adapter in use by a running request is never
 *     evicted, so a request never sees its adapter swapped under it. When the
 *     budget cannot be met without evicting one in use the call fails
 *     (EL_ERR_NOMEM, with the numbers; *busy set: a retry once those requests
 *     end may succeed, the server answers 503 + Retry-After) and nothing is held.
 *   - el_lora_reg_need is the bytes a scale vector's adapters take together:
 *     more than the budget can never be served (the server answers 400 before
 *     queueing, and el_lora_reg_acquire fails with *busy false).
 *   - el_lora_reg_release drops the references. All calls are thread-safe.
 *   - The registry never touches the base model's weights: a swap is a load
 *     of the adapter's file alone.
 */
#ifndef EL_SERVICE_LORA_REGISTRY_H
#define EL_SERVICE_LORA_REGISTRY_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "edgellm.h"

#define EL_LORA_REG_MAX 32 /* registered adapters (ids 0..31, api.h EL_API_MAX_LORA_ID) */

typedef struct el_lora_reg el_lora_reg;

/* Adapters held for one request: n of them (scale > 0), in id order. */
typedef struct el_lora_lease {
    int n;
    int id[EL_LORA_REG_MAX];
    float scale[EL_LORA_REG_MAX];
    el_lora *a[EL_LORA_REG_MAX];
    bool loaded[EL_LORA_REG_MAX]; /* this acquire loaded it (it was not resident) */
} el_lora_lease;

el_lora_reg *el_lora_reg_new(el_model *m, uint64_t budget, el_error *err);
void el_lora_reg_free(el_lora_reg *g);
/* name: [A-Za-z0-9._-]{1,64}, unique. 0 or an el_status (the file's error, or its size over the budget). */
int el_lora_reg_add(el_lora_reg *g, const char *name, const char *path, el_error *err);
int el_lora_reg_count(const el_lora_reg *g);
uint64_t el_lora_reg_budget(const el_lora_reg *g);
/* The summed rank of the 8 (a session's most) largest registered adapters: the
 * el_session_params.lora_rank / el_mem_request.lora_rank each slot plans for. */
#define EL_LORA_MAX_ACTIVE_SESSION 8
int el_lora_reg_rank_plan(el_lora_reg *g);

/* The scales a request runs with (count() entries): its own list (ids not
 * named: 0), or the defaults when it gives none. -1 with msg for an id
 * outside the registry. */
int el_lora_reg_scales(el_lora_reg *g, bool has_list, const int *ids, const float *scales, int n, float *out,
                       char *msg, size_t cap);
/* POST /lora-adapters: ids not named become 0. -1 with msg for an unknown id or a bad scale. */
int el_lora_reg_set_defaults(el_lora_reg *g, const int *ids, const float *scales, int n, char *msg, size_t cap);

/* busy (may be NULL): set true when the failure is only the budget held by running requests. */
int el_lora_reg_acquire(el_lora_reg *g, const float *scales, el_lora_lease *out, bool *busy, el_error *err);
uint64_t el_lora_reg_need(el_lora_reg *g, const float *scales);
void el_lora_reg_release(el_lora_reg *g, el_lora_lease *l);

/* The active set of a scale vector as a short fingerprint suffix: "" when no
 * scale > 0, else "+lora-" and 8 hex digits of SHA-256 over each active
 * adapter's file SHA-256 and scale (bits), in id order. */
void el_lora_reg_fingerprint(el_lora_reg *g, const float *scales, char *out, size_t cap);
/* The same set, readable: "name@sha8*scale,..." ("" when none). */
void el_lora_reg_describe(el_lora_reg *g, const float *scales, char *out, size_t cap);

/* GET /lora-adapters: [{"id","path","scale", and edgellm's "name","sha256","bytes","resident","refs",
 * "loads","evictions","last_used_seq"}]. Malloc'd JSON. */
char *el_lora_reg_json(el_lora_reg *g);
/* Prometheus lines (edgellm_lora_*): registered, resident bytes and count, budget, loads, evictions. Malloc'd. */
char *el_lora_reg_metrics(el_lora_reg *g);

#endif
