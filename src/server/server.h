/*
 * server.h — the local OpenAI-compatible HTTP server (layer L6).
 *
 * Process state: one model (weights, vocab, the thread pool) and, per slot,
 * one el_session whose KV cache is allocated at startup. Request state: one
 * object per HTTP request, QUEUED → PREFILL → DECODE → DONE | CANCELLED |
 * FAILED, shared (refcounted) by the HTTP side and the slot that runs it.
 *
 *   srv = el_server_start(&p, &err);   binds and serves; /health says "loading"
 *   el_server_load(srv, &err);         model, SHA-256, sessions, slot threads
 *   ... el_server_port(srv) ...
 *   el_server_free(srv);               graceful: stop accepting, cancel, join, free
 */
#ifndef EL_SERVICE_SERVER_H
#define EL_SERVICE_SERVER_H
#include <stdbool.h>
#include <stdint.h>

#include "edgellm.h"

typedef struct el_server_params {
    const char *model_path;
    const char *host;          /* NULL: "127.0.0.1" (loopback unless told otherwise) */
    int port;                  /* 0: any free port (el_server_port tells which) */
    int n_parallel;            /* slots (sessions, worker threads); <= 0: 1 */
    int n_ctx;                 /* tokens per slot; < 0: min(2048, train ctx); 0: train ctx */
    int n_batch;               /* prefill batch; 0: library default */
    int n_threads;             /* model thread pool; 0: all CPUs */
    int queue_cap;             /* requests that may wait for a slot; < 0: 16 */
    const char *api_key;       /* NULL or "": no authentication */
    const char *chat_template; /* family name, or NULL: the model's own Jinja template, else detect / fall back by architecture */
    bool trust_chat_special;   /* chat message content may contain control tokens (<end_of_turn>, ...): off =
                                  content is tokenized as plain text, only the template's markers are special */
    bool verbose;              /* one log line per request on stderr */
    const char *chat_template_file; /* a Jinja chat template file (--chat-template-file), or NULL */
    const char *chat_template_kwargs; /* a JSON object of Jinja template variables for every chat request
                                         (llama-server's --chat-template-kwargs; a request's own
                                         chat_template_kwargs override its members), or NULL */
    const char *reasoning_format;   /* --reasoning-format: "none" | "deepseek" | "auto" (NULL: auto), the
                                       default of a request's reasoning_format; another value fails el_server_new */
    /* Host/CORS policy (server_http.c, "the request prelude"): requests whose Host
     * is not localhost, 127.0.0.1, [::1], `host` or one of allow_hosts are
     * refused (403); "*" in allow_hosts accepts any Host. CORS: a page from a
     * localhost origin (http or https, host localhost / 127.0.0.1 / [::1],
     * any port) may always call the server, as may the server's own origin;
     * cors_origin (--cors: one more origin, "http://app.example:3000") and
     * cors_origins (--cors-origins: a comma-separated list; "*" = any origin)
     * widen it. Other Origin headers are refused (403). */
    const char *const *allow_hosts;
    int n_allow_hosts;
    const char *cors_origin;
    const char *cors_origins;
    uint64_t mem_budget;       /* bytes the model + slots may use; 0: the device's available memory
                                  (memory/capacity.h). The slots that would not fit are refused by
                                  el_server_load before any is allocated. */
    uint64_t expert_budget;    /* MoE: resident experts' bytes (--expert-budget); 0: all when they fit
                                  mem_budget, else what fits (memory/experts.h) */
    double expert_budget_pct;  /* the same as a percentage of the experts' bytes (0: not given) */
    uint64_t mem_runtime;      /* M_runtime measured before the load (el_mem_runtime_bytes); 0: none */
    uint64_t mem_floor;        /* memory pressure: while MemAvailable is below this (0: not checked), or
                                  the PSI "full avg10" of /proc/pressure/memory is >= 10 %, new
                                  requests get 503 + Retry-After (el_mem_pressure) */
    /* llama-server compatibility */
    const char *alias;         /* the model id in replies, /v1/models and /props; NULL: the file name */
    bool no_slots;             /* GET /slots answers 501 */
    bool no_ui;                /* GET / (the chat page) answers 404 (llama-server's --no-ui) */
    int cache_prompt;          /* the cache_prompt of requests that do not give it: 0, the route's default
                                  (true on /completion as llama-server, false on the OpenAI routes, whose
                                  replies then reproduce exactly: README "Prompt cache"); 1 true
                                  everywhere (--cache-prompt); -1 false everywhere (--no-cache-prompt) */
    const char *slot_save_path; /* POST /slots/N?action=save|restore files live here (created if absent);
                                  NULL: those actions answer 501 (slot_file.h) */
    bool has_temp;             /* temp: the temperature of requests that give none */
    float temp;
    bool has_seed;             /* seed: the seed of requests that give none (else random per request) */
    uint64_t seed;
    int n_predict;             /* 0: unset; -1 or N: max_tokens / n_predict of requests that give none */
    bool embeddings;           /* --embeddings: /v1/embeddings, /embeddings, /embedding answer (else 501) */
    int pooling;               /* el_pooling, when pooling_set (--pooling); else the model's
                                  (el_model_pooling: GGUF <arch>.pooling_type, else none, as llama-server) */
    bool pooling_set;
    /* routing (route/router.h): every generation request is routed local / cloud / declined first */
    const struct el_policy *policy; /* NULL: the built-in policy (policy.h) */
    const char *cloud_url;     /* OpenAI-compatible base URL (".../v1"), or NULL: no cloud route */
    const char *cloud_key;     /* bearer key for the cloud, or NULL */
    const char *cloud_model;   /* replaces "model" in requests sent to the cloud, or NULL */
    const char *thermal_source; /* sensor file (millidegrees C) instead of /sys/class/thermal, or NULL */
    /* telemetry and audit (route/telemetry.h, audit.h): content-free, off unless given */
    const char *telemetry_dir;  /* spool DIR/telemetry.jsonl (--telemetry-dir), or NULL */
    long telemetry_max_bytes;   /* per spool / audit file before rotation (0: 1 MiB) */
    int telemetry_keep;         /* rotated files kept (0: 3) */
    const char *otlp_url;       /* OTLP/HTTP JSON logs endpoint (--otlp-url), or NULL */
    const char *audit_log;      /* routing decisions and refusals, one JSON line each (--audit-log), or NULL */
    /* memory */
    el_load_mode load;         /* how the weights come into memory (memory/load.h); 0: mmap */
    const el_backend_params *backend; /* where the ops run (runtime/exec.h); NULL: the CPU alone */
    bool ctx_overflow_truncate; /* a chat that does not fit: false (default) 400 context_length_exceeded with
                                  n_prompt_tokens and n_ctx; true: the oldest whole turns after the leading
                                  system messages are dropped until it fits (the reply then says
                                  "truncated": true, "n_messages_dropped": K); still 400 when the system
                                  messages + the last user turn alone do not fit */
    int type_k, type_v;        /* the slots' KV cache types (el_cache_type; 0 = F16), -ctk / -ctv */
    el_spec_params spec;       /* speculative decoding of every request (mode 0: off), --spec / --draft-* */
    const char *draft_model;   /* spec.mode EL_SPEC_DRAFT (--draft-model): the draft GGUF; each slot gets a draft
                                  session of the slots' context (admission counts the draft and its sessions) */
    /* batched decoding (runtime/batch.h): with n_parallel > 1 the slots' decode steps run together, one
     * forward for every slot decoding, and prompts are prefilled in chunks between those rounds */
    bool no_batch;             /* --no-batch: every slot decodes alone */
    int batch_chunk;           /* --batch-chunk: prefill chunk in tokens (0: EL_BATCH_CHUNK, 64) */
    int batch_wait_us;         /* --batch-wait-us: a round's wait for slots still sampling (0: EL_BATCH_WAIT_US; < 0: none) */
    /* LoRA adapters (server/lora_registry.h): serve --lora NAME=FILE (ids in this order), --lora-budget BYTES
     * (0: the sum of the adapters' sizes, all may be resident). Validated by el_server_load. */
    const char *const *lora_names, *const *lora_paths;
    const float *lora_scales;  /* each adapter's default scale (NULL: 1) */
    int n_lora;
    uint64_t lora_budget;
    /* fault injection for tests (serve sets it from $EL_FAULT_SERVE_CRASH only, never from a file or a
     * request): > 0 aborts the process when that many requests have completed (docs/FLEET.md) */
    int fault_crash_after;
    /* connection limits (server_http.c, "connection guard"; docs/SERVER.md "Connections") */
    int conn_limit;            /* open connections in all, 16..4096 (0: 256); from 7/8 of it on a new
                                  connection evicts the longest-waiting incomplete one */
    int conn_per_addr;         /* open connections per client address, 1..conn_limit (0: 64, or conn_limit
                                  if smaller); beyond it a new connection evicts that address's
                                  longest-waiting incomplete one, or is refused when none is incomplete */
} el_server_params;

typedef struct el_server el_server;

/* Binds host:port and starts answering (everything but /health, /v1/health,
 * /metrics and / is 503 until el_server_load succeeds). NULL with err filled on failure. */
el_server *el_server_start(const el_server_params *p, el_error *err);
/* Loads the model, hashes its file, creates the slots' sessions and threads.
 * Returns 0, or -1 with err filled. Call once, from any one thread. */
int el_server_load(el_server *s, el_error *err);
int el_server_port(const el_server *s);
/* A description of the template family the chat endpoint uses (after load). */
const char *el_server_chat_family(const el_server *s);
/* After a failed el_server_load or package check: keep serving with no
 * local model; generation requests are routed to the cloud where the policy
 * allows, else declined with `why` (and what to do). */
void el_server_set_local_unavailable(el_server *s, const char *why);
/* Stops accepting, cancels queued and running requests, waits for every
 * connection and slot thread, frees everything. NULL is fine. */
void el_server_free(el_server *s);

#endif
