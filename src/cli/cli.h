/*
 * cli.h — internals shared by the files of the `edgellm` command-line tool
 * (the .c files of src/cli). Nothing here is part of the library.
 *
 * The arrows point one way: main.c (dispatch, help, option parsing) calls
 * the commands (cmd_*.c); the commands and main.c use the helpers below
 * (common.c, prompt.c, session_setup.c, load_check.c, cli_lora.c); a helper
 * calls no command and nothing of main.c.
 */
#ifndef EL_CLI_H
#define EL_CLI_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "edgellm.h"
#include "util/buf.h"

/* Exit codes. CLI_EXIT_DECLINED: run/chat --route declined the request (nothing ran). */
enum { CLI_EXIT_OK = 0, CLI_EXIT_ERROR = 1, CLI_EXIT_USAGE = 2, CLI_EXIT_DECLINED = 4, CLI_EXIT_CANCELLED = 130 };

#define CLI_MAX_STOPS 16
#define CLI_MAX_HOSTS 16
#define CLI_MAX_LORA 32 /* serve registers up to 32 (lora_registry.h); run/chat apply up to 8 (EL_LORA_MAX_ACTIVE) */

/* Every option of every sub-command; each command states which it accepts. */
typedef struct cli_opts {
    const char *cmd;          /* "run", "tokenize", "chat", "info", "serve", "bench" */
    const char *model;        /* -m */
    const char *prompt;       /* -p (escapes processed unless --no-escape) */
    const char *prompt_file;  /* -f */
    int n_predict;            /* -n; -1 = until EOS or context full */
    el_sampling sampling;
    bool seed_set;
    bool temp_set;            /* --temp given (serve: the default for requests without one) */
    bool n_predict_set;       /* -n given */
    int n_threads;            /* -t; 0 = all CPUs */
    int n_ctx;                /* -c; -1 = not given (min(train, 4096)), 0 = train ctx */
    int n_batch;              /* -b; 0 = library default */
    int cache_type_k;         /* -ctk, --cache-type-k: el_cache_type (0 = F16) */
    int cache_type_v;         /* -ctv, --cache-type-v */
    bool ignore_eos;
    bool json;
    int top_logprobs;
    const char *stops[CLI_MAX_STOPS + 1];
    int n_stops;
    bool no_bos;
    bool no_parse_special;
    bool no_escape;
    const char *chat_template; /* --chat-template NAME */
    const char *chat_template_file; /* --chat-template-file FILE (Jinja) */
    const char *chat_template_kwargs; /* --chat-template-kwargs JSON (serve) */
    const char *reasoning_format;   /* --reasoning-format none|deepseek|auto (serve), NULL: auto */
    const char *system;        /* -sys */
    bool trust_chat_special;   /* --trust-chat-special (chat, serve): message content parsed for control tokens */
    bool verbose;
    /* serve */
    const char *host;          /* --host (default 127.0.0.1) */
    int port;                  /* --port (default 8080; 0 = any free port) */
    int n_parallel;            /* -np, --parallel: slots (default 1) */
    int queue_cap;             /* --queue: waiting requests (default 16) */
    const char *api_key;       /* --api-key */
    const char *allow_hosts[CLI_MAX_HOSTS]; /* --allow-host NAME (repeatable) */
    int n_allow_hosts;
    const char *cors;          /* --cors ORIGIN */
    const char *cors_origins;  /* --cors-origins LIST */
    const char *alias;         /* --alias NAME[,NAME...]: the model id (the first) and its aliases */
    bool no_slots;             /* --no-slots: /slots answers 501 */
    bool no_ui;                /* --no-ui: no chat page at / */
    bool no_batch;             /* --no-batch: slots decode one by one (no batched rounds) */
    int batch_chunk;           /* --batch-chunk N: prefill chunk between decode rounds (0: 64) */
    int batch_wait_us;         /* --batch-wait-us N: a round's wait for slots still sampling (-1: unset) */
    int max_conns;             /* --max-conns N: open connections in all (0: the server's default, 256) */
    int max_conns_per_addr;    /* --max-conns-per-addr N: open connections per client address (0: 64) */
    int cache_prompt;          /* --cache-prompt 1 / --no-cache-prompt -1 / 0: each route's default */
    const char *slot_save_path; /* --slot-save-path DIR: slot save/restore files live there */
    bool embeddings;           /* --embeddings: the embedding routes answer (else 501) */
    int pooling;               /* --pooling none|mean|cls|last (el_pooling); -1: the model's */
    /* bench */
    int bench_n_prompt;        /* -p, --n-prompt (default 512) */
    int bench_n_gen;           /* -n, --n-gen (default 128) */
    int bench_reps;            /* -r, --repetitions (default 5) */
    int bench_depth;           /* -d, --n-depth: tokens in the cache before pp/tg (default 0) */
    /* packages (run, chat, serve): checked before the model is loaded */
    bool allow_unsigned;       /* --allow-unsigned: a plain GGUF without a manifest loads */
    const char *pub;           /* --pub KEY.pub (else $EL_TRUSTED_KEY) */
    const char *store;         /* --store DIR: load the store's active version */
    long long min_version;     /* --min-version N: refuse lower package versions */
    /* memory (run, chat, serve) */
    uint64_t mem_budget;       /* --mem-budget SIZE; 0 = the planner's default (device memory) */
    uint64_t expert_budget;    /* --expert-budget SIZE (MoE: resident experts' bytes); 0 = not given */
    double expert_budget_pct;  /* --expert-budget PCT% (of the experts' bytes); 0 = not given */
    uint64_t mem_runtime;      /* M_runtime, measured before the model is loaded (cli_measure_runtime) */
    uint64_t mem_floor;        /* serve --mem-floor SIZE: 503 while MemAvailable is below it; 0 = off */
    /* speculative decoding (run, chat, serve) */
    int spec_mode;             /* --spec ngram|off (el_spec_mode) */
    int draft_max, draft_min;  /* --draft-max N (default 8), --draft-min N (default 1) */
    int spec_ngram;            /* --spec-ngram N: longest n-gram looked up (default 4) */
    bool spec_fixed;           /* --spec-fixed: always draft-max tokens, no controller */
    /* constrained output (run, chat): at most one of the three */
    const char *grammar_arg;   /* --grammar GBNF */
    const char *grammar_file;  /* --grammar-file FILE */
    const char *json_schema;   /* --json-schema TEXT or @FILE */
    char *grammar;             /* the resolved GBNF (cli_grammar_setup), or NULL */
    const char *draft_model;   /* --draft-model FILE, -md: a draft model (implies --spec draft) */
    /* routing (serve): src/route/router.h */
    const char *policy;        /* --policy FILE */
    const char *cloud_url;     /* --cloud-url URL */
    const char *cloud_key_file; /* --cloud-key-file FILE (else $EDGELLM_CLOUD_KEY) */
    const char *cloud_model;   /* --cloud-model NAME */
    const char *thermal_source; /* --thermal-source FILE */
    /* telemetry and audit (serve): src/route/telemetry.h, audit.h */
    const char *telemetry_dir; /* --telemetry-dir DIR */
    long telemetry_max_bytes;  /* --telemetry-max-bytes N (0: 1 MiB) */
    int telemetry_keep;        /* --telemetry-keep N (0: 3) */
    const char *otlp_url;      /* --otlp-url URL */
    const char *audit_log;     /* --audit-log FILE */
    /* run/chat --route (cmd_route.c); --policy, --cloud-*, --thermal-source apply too */
    bool route;                /* --route */
    const char *data_class;    /* --data-class NAME */
    bool consent;              /* --consent */
    /* load strategy (run, chat, serve, bench) and context overflow (chat, serve) */
    el_load_mode load;         /* --load preload|mmap|prefetch|hot (default mmap) */
    bool bench_cold;           /* bench --cold: evict the file's pages (posix_fadvise DONTNEED) before loading */
    int ctx_overflow;          /* --ctx-overflow: -1 = the command's default (chat truncate, serve error),
                                  0 = error, 1 = truncate (drop the oldest whole turns after the system prompt) */
    /* backends and placement (run, chat, serve, bench): runtime/exec.h */
    el_backend_params backend; /* --backend cpu|opencl[:N]|auto, --prefer DEV, --tax-budget F */
    bool placement_report;     /* --placement-report: time every partition, print the report at the end */
    /* LoRA adapters (run, chat, bench, perplexity): --lora FILE[:SCALE], --lora-scaled FILE SCALE (cli_lora.c) */
    const char *lora_path[CLI_MAX_LORA];
    float lora_scale[CLI_MAX_LORA];
    int n_lora;
    char lora_buf[CLI_MAX_LORA][1024];
    char lora_name[CLI_MAX_LORA][65]; /* serve --lora NAME=FILE */
    uint64_t lora_budget;             /* serve --lora-budget SIZE (0: all adapters fit) */
} cli_opts;

/* ---- the commands (main.c dispatches to them) --------------------------- */

/* Commands: each returns the process exit code. */
int cli_cmd_run(cli_opts *o);
int cli_cmd_chat(cli_opts *o);
int cli_cmd_info(cli_opts *o);
int cli_cmd_tokenize(cli_opts *o);
int cli_cmd_serve(cli_opts *o);
int cli_cmd_bench(cli_opts *o);
/* Package and store commands parse their own argv (cmd_package.c, cmd_store.c). */
int cli_cmd_keygen(int argc, char **argv);
int cli_cmd_sign(int argc, char **argv);
int cli_cmd_verify(int argc, char **argv);
int cli_cmd_install(int argc, char **argv);
int cli_cmd_rollback(int argc, char **argv);
int cli_cmd_gc(int argc, char **argv);
int cli_cmd_status(int argc, char **argv);
/* `pack` parses its own arguments (HF_DIR -o OUT --type T): no -m MODEL. */
int cli_cmd_pack(int argc, char **argv);
int cli_cmd_quantize(int argc, char **argv);
/* `plan` parses its own arguments (cmd_plan.c): the capacity plan. */
int cli_cmd_plan(int argc, char **argv);
int cli_cmd_perplexity(int argc, char **argv); /* cmd_perplexity.c: parses its own argv */
int cli_cmd_route(int argc, char **argv);      /* cmd_route.c: `route explain`, parses its own argv */
int cli_cmd_accept(int argc, char **argv);     /* cmd_accept.c: acceptance matrix and decision records */
int cli_cmd_act(int argc, char **argv);        /* cmd_act.c: the proposal gate, parses its own argv */
int cli_cmd_fleet(int argc, char **argv);      /* cmd_fleet.c: staged rollout and its replay, parses its own argv */

/* run/chat --route (cmd_route.c): the decision before anything runs, with
 * serve's decision function. cli_route_decide reads the device (model file
 * present and its package checks passed, thermal sensor, memory pressure,
 * battery, cloud configured) and decides for a prompt of text_len bytes;
 * prints the route on stderr. Returns -1 to go on (cr->route.source local
 * or cloud; for cloud, cr->cloud is ready), else the exit code (declined:
 * why and what to do on stderr, CLI_EXIT_DECLINED). verified: the package
 * checks' result (cli_verify_before_load returned -1). */
struct el_cloud;
typedef struct cli_route {
    char route_json[2048];     /* el_route_json of the decision ("" before) */
    int source;                /* el_route_source */
    struct el_cloud *cloud;    /* the cloud client, when routed there */
    char reason[48];
} cli_route;
int cli_route_decide(cli_opts *o, bool verified, size_t text_len, cli_route *cr);
/* Sends body (an OpenAI request JSON with "stream": true; the caller's, not consumed)
 * to path ("/completions" or "/chat/completions") streamed; writes the text
 * to stdout (json: {"cloud":true,"piece":...,"bytes":...} lines) and, when
 * reply is not NULL, appends it there. Returns CLI_EXIT_OK or, after a typed
 * "cloud_error (<code>)" message (nothing runs locally), CLI_EXIT_ERROR.
 * *finish: the finish reason ("" when none). */
int cli_route_cloud(cli_route *cr, const char *path, const char *body, bool json, el_buf *reply, char *finish,
                    size_t finish_cap);
void cli_route_free(cli_route *cr);

/* ---- common.c: messages and exit codes, JSON, time, SIGINT --------------- */

/* "error: <status>: <msg>" on stderr; returns CLI_EXIT_ERROR. */
int cli_fail(const el_error *err);
/* "error: <printf>" on stderr; returns CLI_EXIT_ERROR. */
#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
int cli_failf(const char *fmt, ...);
/* "edgellm <cmd>: <printf>" plus a usage hint on stderr; returns CLI_EXIT_USAGE. */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
int cli_usage_error(const char *cmd, const char *fmt, ...);

/* JSON string literal (with the quotes) of s[0..len), always valid UTF-8:
 * ", \ and control characters escaped (\uXXXX, or \n \t ... short forms),
 * well-formed UTF-8 as-is, each ill-formed part (a stray or incomplete
 * sequence) as one U+FFFD (Unicode's "maximal subpart" rule, as Python's
 * errors="replace"). */
void cli_json_str(FILE *f, const char *s, size_t len);
/* The raw bytes s[0..len) as a JSON array of numbers 0..255 ("bytes" of
 * OpenAI's logprobs): exact where the string above had to replace. */
void cli_json_bytes(FILE *f, const char *s, size_t len);
/* A float as a JSON number, or null if not finite. */
void cli_json_num(FILE *f, double v);

/* Milliseconds since an arbitrary start (monotonic). */
double cli_now_ms(void);

/* SIGINT → el_session_cancel on the current session. */
void cli_sigint_install(void);
void cli_sigint_set_session(el_session *s); /* NULL while no generation runs */
bool cli_sigint_seen(void);                 /* SIGINT arrived outside generation */
void cli_sigint_clear(void);

/* Timing/perf line on stderr (llama.cpp-like). */
void cli_print_perf(const el_generate_stats *st);

const char *cli_finish_name(el_finish f);

/* Growable byte buffers: el_buf (util/buf.h). */

/* ---- prompt.c: the prompt text and its tokens --------------------------- */

/* The prompt text from -p (escapes processed) or -f (raw bytes; for `run`
 * one trailing newline is dropped like llama.cpp's -f). malloc'd; *len set.
 * NULL with an error printed on failure. */
char *cli_read_prompt(const cli_opts *o, bool strip_trailing_newline, size_t *len);

/* Tokenizes text into a malloc'd array; returns count or -1 (error printed). */
int cli_tokenize(const el_model *m, const char *text, size_t len, int flags, int32_t **out);
/* The retry loop behind cli_tokenize for any tokenizer: fn(ctx, out, cap)
 * returns the token count (possibly > cap: then it is called again with that
 * capacity) or < 0; len (bytes of input) sizes the first try. */
typedef int (*cli_tokenize_fn)(const void *ctx, int32_t *out, int cap);
int cli_tokenize_with(cli_tokenize_fn fn, const void *ctx, size_t len, int32_t **out);

/* ---- session_setup.c: model, context, memory, speculation --------------- */

/* Loads the model named by -m (error printed, NULL on failure). */
el_model *cli_load_model(const cli_opts *o, bool vocab_only, el_error *err);

/* n_ctx to use for a session of model m given -c. */
int cli_ctx_for(const cli_opts *o, const el_model *m);

/* Measures M_runtime (memory/capacity.h) into o->mem_runtime; call before
 * the model is loaded. */
void cli_measure_runtime(cli_opts *o);
/* Admission before any session is allocated: n_sessions sessions of n_ctx
 * tokens (batch n_batch, 0 = default) of model m must fit --mem-budget
 * (default: the device's available memory), and n_ctx must not exceed the
 * model's context. Returns -1 to go on, else the exit code (the numbers
 * printed). *budget_out (if not NULL) gets the budget used. */
/* --expert-budget resolved to bytes for this model (a percentage of its
 * experts' bytes); 0 when not given or the model has no experts. */
uint64_t cli_expert_budget_bytes(const cli_opts *o, const el_model *m);
/* Applies an explicit --expert-budget (bench; run/chat/serve go through
 * admission): -1 to go on, else the exit code with the reason printed. */
int cli_apply_expert_budget(const cli_opts *o, el_model *m);
int cli_admit(const cli_opts *o, el_model *m, int n_ctx, int n_batch, int n_sessions, uint64_t *budget_out);
/* -1 if -ctk/-ctv suit the model's head size, else a usage error's exit code
 * (the message names the flag and the type). Allocates nothing. */
int cli_check_cache_types(const cli_opts *o, const el_model *m);

/* --spec/--draft-*: the session's n_draft_max and the generation's el_spec_params (mode 0: off). */
void cli_spec_setup(const cli_opts *o, el_session_params *sp, el_spec_params *spec);

/* --draft-model: the draft's tokenizer fingerprint (the package manifest's)
 * equals the target's? -1 to go on (also without --draft-model), else the
 * exit code, the two fingerprints on stderr. */
int cli_draft_check_tokenizer(const cli_opts *o);
/* --draft-model: checks the draft's tokenizer fingerprint against the
 * target's (and its size), loads it, admits its memory and opens its session
 * (the target's n_ctx, n_batch, cache types); spec->draft points at it.
 * Returns -1 to go on (nothing opened when there is no --draft-model), else
 * the exit code (nothing left open). */
int cli_draft_open(cli_opts *o, el_model *target, const el_session_params *sp, el_spec_params *spec,
                   el_model **dm, el_session **ds);

/* The session's placement report (el_session_placement_report) to f, text or JSON. */
void cli_print_placement(el_session *s, FILE *f, bool json);

/* ---- load_check.c: the package check before a load ---------------------- */

/* The package check before run/chat/serve/act load o->model (or the active
 * version of --store, which it sets o->model to); prints the fingerprint on
 * stderr. Returns -1 to go on, else the exit code. */
int cli_verify_before_load(cli_opts *o);
/* "error: <check> check failed: <msg>" on stderr; returns the check's exit
 * code (10 + check, el_pkg_exit_code). */
struct el_pkg_error;
int cli_pkg_fail(const struct el_pkg_error *e);

/* ---- cli_lora.c: LoRA adapters (--lora, --lora-scaled) ------------------ */

/* One --lora FILE[:SCALE] (scale_text NULL) or --lora-scaled FILE SCALE into o;
 * -1 to go on, else the exit code (usage error: a NaN, infinite or negative
 * scale, too many adapters). */
int cli_lora_parse(cli_opts *o, const char *cmd, const char *spec, const char *scale_text);
/* Loads o's adapters for m into out[CLI_MAX_LORA] (free with cli_lora_free
 * after the session) and sets *rank to the sum of their largest ranks: the
 * session's el_session_params.lora_rank, so its memory plan holds the
 * adapters' scratch. -1 to go on, else the exit code (nothing left loaded). */
int cli_lora_load(const cli_opts *o, el_model *m, el_lora **out, int *rank);
/* Sets the adapters cli_lora_load loaded on s (none: nothing to do). -1 to go
 * on, else the exit code (out freed). */
int cli_lora_set(const cli_opts *o, el_session *s, el_lora **out);
void cli_lora_free(el_lora **a);

/* ---- main.c: option resolution ------------------------------------------ */

/* --grammar / --grammar-file / --json-schema → o->grammar (GBNF, checked by
 * compiling it). -1 on success (or none given), else the exit code. */
int cli_grammar_setup(cli_opts *o);

#endif
