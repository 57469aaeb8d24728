/*
 * capacity.h — the capacity planner (layer L5): does a model, its KV cache,
 * its workspace and the runtime fit a device's memory, and how far.
 *
 *   M_total = M_weights + M_runtime + N · (M_KV(S) + M_workspace(S))  <=  budget
 *
 * M_weights: the model file as mapped (tensor bytes + metadata + alignment
 * padding = the file's size) plus buffers converted at load. M_KV: per
 * layer 2 · S_layer · row_bytes(n_kv · d_h), S_layer = S for a full layer,
 * min(S, window + n_batch) for a sliding-window layer (the ring of
 * memory/plan.h), each layer's K and V rounded up to 64 bytes as the session
 * block lays them out. M_workspace: the rest of el_plan_session (scratch,
 * logits) and the session struct. M_runtime: measured (el_mem_runtime_bytes).
 * For F16, BF16, Q8_0 and Q4_0 (the runtime's cache types, --cache-type-k/-v)
 * the KV figure equals el_plan_session_kv's byte for byte, with their ggml
 * block sizes (F16/BF16 2 B per value, Q8_0 34 B and Q4_0 18 B per 32
 * values, scales included); the seed's ideal 8- and 4-bit rows (planned
 * only) have no scales.
 *
 * Everything here is arithmetic on validated numbers: every product and sum
 * saturates (UINT64_MAX means "does not fit") instead of wrapping. The
 * parsers (sizes, shapes) take outside input and reject anything that is not
 * exactly what they document, naming the offending text.
 */
#ifndef EL_MEMORY_CAPACITY_H
#define EL_MEMORY_CAPACITY_H
#include <stddef.h>
#include <stdint.h>

#include "memory/plan.h"

typedef enum el_kv_type {
    EL_KV_F16, EL_KV_BF16, EL_KV_Q8_0, EL_KV_Q4_0, /* ggml cache types (the runtime's) */
    EL_KV_INT8, EL_KV_INT4,                        /* the seed's ideal 8/4 bits per value, no scales */
    EL_KV_TYPE_COUNT
} el_kv_type;

const char *el_kv_type_name(el_kv_type t);
/* 1 if the runtime's session cache can be this type (F16, BF16, Q8_0, Q4_0). */
int el_kv_type_implemented(el_kv_type t);
/* The el_cache_type (edgellm.h) of an implemented type, else -1; and back
 * (EL_KV_TYPE_COUNT for a value that is not a cache type; 0 is F16). */
int el_kv_type_cache(el_kv_type t);
el_kv_type el_kv_type_of_cache(int cache_type);
/* Bytes of one row of n values (n a multiple of the block size for Q8_0/Q4_0:
 * a partial block counts whole). Saturates. */
uint64_t el_kv_row_bytes(el_kv_type t, uint64_t n);

/* What the KV formula needs about a model. */
typedef struct el_mem_shape {
    int n_layer;       /* all layers */
    int n_layer_swa;   /* of which sliding-window layers (0..n_layer) */
    int n_swa;         /* their window in tokens (0: none) */
    int n_head_kv;
    int head_dim;      /* per-head size of K and V (the larger of the two) */
    int n_ctx_max;     /* the model's context (0: unknown, no limit) */
} el_mem_shape;

/* The shape of a loaded model. */
void el_mem_shape_of(const el_mem_model *m, el_mem_shape *s);

/* KV bytes of one session of n_ctx tokens prefilling n_batch at a time
 * (n_batch is clamped to n_ctx), laid out as memory/plan.h does. */
uint64_t el_kv_bytes(const el_mem_shape *s, el_kv_type t, int n_ctx, int n_batch);

/* A planning problem. Either model != NULL (a loaded model: workspace from
 * el_plan_session) or model == NULL (a shape: workspace = 0). */
typedef struct el_mem_request {
    const el_mem_model *model;  /* a loaded model's el_model.mem, or NULL */
    el_mem_shape shape;
    uint64_t weights;   /* M_weights */
    uint64_t runtime;   /* M_runtime (plus any fixed overhead) */
    uint64_t budget;    /* device memory minus reserve */
    int n_batch;        /* 0: 512 */
    int n_draft_max;    /* speculative decoding: 1 + n_draft_max rows of logits (el_session_params) */
    int type_k, type_v; /* el_mem_admit: the sessions' cache types (el_cache_type; 0 = F16) */
    int lora_rank;      /* LoRA: the summed adapter rank each session plans scratch for (el_session_params) */
} el_mem_request;

/* Bytes one session of n_ctx tokens needs with cache type t: for a model,
 * exactly el_session_bytes when t is F16; for a shape, M_KV only. */
uint64_t el_mem_session_bytes(const el_mem_request *r, el_kv_type t, int n_ctx);
/* Largest context (1..n_ctx_max, or ..2^24 without one) one session fits;
 * 0 if not even one token fits. */
int el_mem_max_ctx(const el_mem_request *r, el_kv_type t);
/* The same two with a K cache of type tk and a V cache of type tv. */
uint64_t el_mem_session_bytes_kv(const el_mem_request *r, el_kv_type tk, el_kv_type tv, int n_ctx);
int el_mem_max_ctx_kv(const el_mem_request *r, el_kv_type tk, el_kv_type tv);
/* How many sessions of n_ctx tokens fit (0 if none). */
uint64_t el_mem_max_sessions(const el_mem_request *r, el_kv_type t, int n_ctx);

/* Admission: 0 if M_weights + M_runtime + n_sessions sessions of n_ctx
 * tokens (caches of r->type_k / r->type_v) fit r->budget; else -1 with the numbers in msg
 * (needed, available, the largest context one session of the n_sessions
 * could have). */
int el_mem_admit(const el_mem_request *r, int n_ctx, int n_sessions, char *msg, size_t cap);

/* M_weights of a loaded model: el_model_weights_bytes (runtime/model.h). */

/* M_runtime, measured once in this process: resident memory before any
 * model is loaded (binary, libraries, libc heap: VmRSS of /proc/self/status)
 * plus what starting a pool of n_threads threads and running one task on it
 * adds (their stacks as touched: VmRSS after − before). 0 if /proc is
 * unreadable. */
uint64_t el_mem_runtime_bytes(int n_threads);

/* The device's memory for planning: MemAvailable of /proc/meminfo, or the
 * cgroup v2 limit of this process minus its usage (memory.max −
 * memory.current), whichever is lower. *src names which ("MemAvailable" or
 * "cgroup memory.max"). Returns 0 if neither could be read. */
uint64_t el_mem_device_available(const char **src);
/* Memory pressure: 1 if MemAvailable is below floor (floor > 0), or the
 * kernel's PSI for memory (/proc/pressure/memory) reports "full avg10" >=
 * 10 % (all non-idle tasks stalled on memory a tenth of the last 10 s);
 * why (if not NULL) says which, with the figures. 0 otherwise, and where
 * neither file can be read. */
int el_mem_pressure(uint64_t floor, char *why, size_t cap);

/* Peak and current resident set of this process (VmHWM, VmRSS), bytes; 0 if unknown. */
uint64_t el_mem_peak_rss(void);
uint64_t el_mem_current_rss(void);

/* Parses a size: a decimal number with an optional fraction and an optional
 * unit: B, K/KiB, M/MiB, G/GiB, T/TiB (powers of 1024), KB/MB/GB/TB (powers
 * of 1000); case-insensitive, no spaces. The result is rounded to the
 * nearest byte. Returns 0, or -1 with a message naming the text in err. */
int el_parse_size(const char *text, uint64_t *out, char *err, size_t err_cap);

/* Parses a shape: comma-separated key=value with keys layers, kv_heads,
 * head_dim (required), swa_layers, window, ctx (optional); each value a
 * positive decimal integer (swa_layers, window may be 0) within bounds
 * (layers, kv_heads <= 65536; head_dim <= 65536; window, ctx <= 2^31-1;
 * swa_layers <= layers, and window > 0 iff swa_layers > 0). No key twice. */
int el_parse_shape(const char *text, el_mem_shape *out, char *err, size_t err_cap);

#endif
