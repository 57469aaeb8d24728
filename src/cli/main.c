/*
 * main.c — the `edgellm` command-line tool: sub-command dispatch, the help
 * text, option parsing for run, tokenize, chat, info, serve and bench (flags
 * follow llama.cpp's where the concept is the same) and the resolution of
 * --grammar / --grammar-file / --json-schema. The commands live in cmd_*.c;
 * the helpers they share in common.c (messages, JSON, SIGINT), prompt.c
 * (prompt text, tokens), session_setup.c (model, memory, speculation),
 * load_check.c (the package check before a load) and cli_lora.c.
 *
 *   edgellm run       -m MODEL (-p TEXT | -f FILE) [options]   generate text
 *   edgellm chat      -m MODEL [options]                       interactive chat
 *   edgellm tokenize  -m MODEL (-p TEXT | -f FILE) [options]   print token ids
 *   edgellm info      -m MODEL [-c CTX] [--verbose]            describe a GGUF file
 *   edgellm serve     -m MODEL [--host H] [--port P] [options]  OpenAI-compatible HTTP server
 *   edgellm bench     -m MODEL [-p N] [-n N] [-r N] [-d N] [-t N] [--json] [--load S] [--cold]  speed benchmark
 *   edgellm keygen | sign | verify                               signed packages (cmd_package.c)
 *   edgellm install | rollback | gc | status --store DIR         the model store (cmd_store.c)
 *   edgellm pack      HF_DIR -o OUT.gguf [--type T]             Hugging Face model -> GGUF
 *   edgellm quantize  IN.gguf OUT.gguf TYPE                     GGUF -> GGUF at another type (cmd_quantize.c)
 *   edgellm plan      (-m MODEL | --shape S --weights SIZE) [...]  capacity plan (cmd_plan.c)
 *   edgellm perplexity -m MODEL -f TEXT [...]                    perplexity (cmd_perplexity.c)
 *   edgellm route explain REQUEST.json --policy P [...]          replay a routing decision (cmd_route.c)
 *   edgellm act --policy ACTIONS.json (-m MODEL -p TEXT | --proposal F)  the proposal gate (cmd_act.c)
 *   edgellm fleet --config F --gates G --base OLD --package NEW ...  staged rollout (cmd_fleet.c)
 *   edgellm accept MATRIX.json -m MODEL --out DIR | accept verify RECORD  acceptance matrix, signed record (cmd_accept.c)
 *   edgellm --version | help
 *
 * Exit status: 0 ok, 1 error (library errors print "error: <status>: <msg>"),
 * 2 usage error, 130 generation cancelled by Ctrl-C.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "memory/capacity.h"
#include "memory/load.h"
#include "runtime/grammar.h"
#include "structured/json_schema.h"
#include "util/error.h"

/* ---- usage ------------------------------------------------------------- */

static void print_usage(FILE *f) {
    fputs(
"usage: edgellm <command> [options]\n"
"\n"
"commands:\n"
"  run       -m MODEL (-p TEXT | -f FILE)  generate a continuation of the prompt\n"
"  chat      -m MODEL                      interactive chat on stdin/stdout\n"
"  tokenize  -m MODEL (-p TEXT | -f FILE)  print the prompt's token ids as a JSON array\n"
"  info      -m MODEL                      metadata, tensors, totals and memory needs\n"
"  serve     -m MODEL                      OpenAI-compatible HTTP server (SIGINT/SIGTERM stop it)\n"
"  bench     -m MODEL                      prompt/decode speed, load time, TTFT, peak RSS and\n"
"                                          the decode roofline (like llama-bench)\n"
"  keygen    --out NAME                    Ed25519 key pair NAME.sec / NAME.pub\n"
"  sign      --key NAME.sec MODEL          write MODEL.manifest.json (see docs/PACKAGES.md)\n"
"  verify    --pub NAME.pub MODEL          check a package; exit 0 or the failing check\n"
"  install   MODEL --store DIR             install a package into a store's inactive slot\n"
"  rollback  --store DIR                   make the previous version active again\n"
"  gc        --store DIR                   remove interrupted installs\n"
"  status    --store DIR                   the store's active and previous versions\n"
"  accept    MATRIX.json -m MODEL --out DIR [--key K.sec] [--pub K.pub] [--device-class C]\n"
"                                          run the acceptance matrix, each cell in child processes:\n"
"                                          report.json, report.md, latency/memory plots and, with\n"
"                                          --key, a signed decision record (docs/ACCEPTANCE.md)\n"
"  accept verify RECORD --pub K.pub [--package MODEL] [--device-class C] [--no-evidence]\n"
"                                          check a record's signature, fingerprint, verdict, evidence\n"
"  route explain REQUEST.json --policy P   why a request goes local, cloud or declined\n"
"                                          ('edgellm route help'; docs/ROUTING.md)\n"
"  act       --policy ACTIONS.json -m MODEL -p TEXT | --proposal FILE|-\n"
"                                          the model proposes an action under the policy's schema,\n"
"                                          the proposal gate accepts or refuses it with a reason\n"
"                                          code ('edgellm act --help'; docs/STRUCTURED.md)\n"
"  fleet     --config FLEET.json --gates GATES.json --base OLD --package NEW --pub K --out DIR\n"
"                                          staged rollout on a simulated fleet of serve processes,\n"
"                                          halted and rolled back on a failing health gate; `fleet\n"
"                                          replay LOG` re-derives its decisions ('edgellm fleet\n"
"                                          --help'; docs/FLEET.md)\n"
"  pack      HF_DIR -o OUT.gguf [--type T] a Hugging Face model directory -> GGUF ('edgellm pack\n"
"                                          --help' for its options)\n"
"  quantize  IN.gguf OUT.gguf TYPE       a GGUF at another type, as llama-quantize ('edgellm\n"
"                                          quantize --help' for its options)\n"
"  plan      -m MODEL | --shape SHAPE --weights SIZE\n"
"                                          capacity plan: largest context and number of sessions\n"
"                                          per KV type for a memory budget (--device-mem SIZE,\n"
"                                          --reserve SIZE, -c CTX, -b N, --overhead SIZE, --json;\n"
"                                          MoE: --expert-budget SIZE|PCT%);\n"
"                                          SHAPE: layers=L,kv_heads=H,head_dim=D[,swa_layers=N,\n"
"                                          window=W,ctx=C]\n"
"            -m MODEL --devices TABLE.json  placement plan on simulated devices: where each op of a\n"
"                                          decode step and a prefill batch (-b N) would run, the\n"
"                                          partitions, transfer tax and fallbacks (--prefer NAME,\n"
"                                          --tax-budget F, --json; docs/HETEROGENEOUS.md)\n"
"  perplexity -m MODEL -f TEXT            perplexity by llama-perplexity's definition (-c N per\n"
"                                          chunk, --chunks N, -ctk/-ctv T, --vs-f16: the cost of a\n"
"                                          KV cache type against F16, --json)\n"
"  help                                    this text\n"
"  --version                               print the version\n"
"\n"
"common options:\n"
"  -m, --model PATH            GGUF model file\n"
"  -p, --prompt TEXT           prompt text (escapes like \\n \\t \\\" \\\\ \\xHH are processed)\n"
"  -f, --file FILE             read the prompt from FILE (raw bytes; `run` drops one\n"
"                              trailing newline, as llama.cpp does)\n"
"      --no-escape             do not process escapes in -p\n"
"      --no-bos                do not add BOS/EOS even if the vocab asks for it\n"
"      --no-parse-special      treat control-token text (e.g. <start_of_turn>) as plain\n"
"                              text; by default it is parsed, as llama-cli and\n"
"                              llama-tokenize do\n"
"  -t, --threads N             threads (default: all CPUs)\n"
"  -c, --ctx-size N            context length (default: min(4096, model's train ctx);\n"
"                              0 = model's train ctx)\n"
"  -b, --batch-size N          prompt tokens per prefill batch (default: library's)\n"
"  -ctk, --cache-type-k T      (run, chat, serve, bench, plan) KV cache type of K: f16\n"
"                              (default), bf16, q8_0, q4_0 (q8_0/q4_0/bf16 need a head\n"
"                              size that is a multiple of 32)\n"
"  -ctv, --cache-type-v T      the same for V\n"
"\n"
"generation (run, chat):\n"
"  -n, --n-predict N           tokens to generate (default -1: until EOS or context full)\n"
"      --temp T                temperature (default 0.8; <= 0: greedy)\n"
"      --top-k K               top-k (default 40; <= 0: off)\n"
"      --top-p P               top-p (default 0.95; 1: off)\n"
"      --min-p P               min-p (default 0.05; 0: off)\n"
"      --repeat-penalty R      repetition penalty (default 1.0: off)\n"
"      --repeat-last-n N       tokens the penalties look at (default 64; -1: context)\n"
"      --presence-penalty P    presence penalty (default 0: off)\n"
"      --frequency-penalty P   frequency penalty (default 0: off)\n"
"      --seed S                sampling seed (default -1: random)\n"
"      --stop STR              stop generating at STR (repeatable)\n"
"      --ignore-eos            keep generating past end-of-generation tokens\n"
"      --spec ngram|draft|off  speculative decoding by n-gram prompt lookup (run, chat,\n"
"                              serve, bench; default off) or by a draft model:\n"
"                              the same output, faster where it copies its context\n"
"  -md, --draft-model FILE     a smaller model with the target's tokenizer drafts\n"
"                              (implies --spec draft; same context as the target)\n"
"      --draft-max N           most tokens drafted per step (1..32, default 8)\n"
"      --draft-min N           fewest tokens drafted when speculating (default 1)\n"
"      --spec-ngram N          longest n-gram looked up (1..64, default 4)\n"
"      --spec-fixed            always --draft-max tokens (no controller)\n"
"      --lora FILE[:SCALE]     apply a LoRA adapter (llama.cpp GGUF LoRA; run, chat,\n"
"                              bench, perplexity; repeatable; SCALE default 1)\n"
"      --lora-scaled FILE S    the same with scale S (llama.cpp's spelling)\n"
"      --lora [NAME=]FILE[:S]  serve: register an adapter (id = order; default scale S,\n"
"                              1 if absent), loaded when a request uses it\n"
"      --lora-budget SIZE      serve: bytes of adapters resident at once (least\n"
"                              recently used evicted; default: all of them)\n"
"      --grammar GBNF          constrain the output to a GBNF grammar (run, chat)\n"
"      --grammar-file FILE     the grammar from a file\n"
"      --json-schema S|@FILE   constrain the output to JSON valid under a JSON Schema\n"
"\n"
"packages (run, chat, serve): the model must be a signed package whose manifest\n"
"  (MODEL.manifest.json) verifies, unless --allow-unsigned and it has none\n"
"      --pub KEY.pub           trusted public key (default: $EL_TRUSTED_KEY)\n"
"      --allow-unsigned        load a plain GGUF without a manifest\n"
"      --store DIR             load the active version of a model store (instead of -m)\n"
"      --min-version N         refuse a package with a lower version\n"
"\n"
"memory (run, chat, serve): sessions that would not fit are refused before\n"
"  anything is allocated, with the numbers ('edgellm plan' shows the plan)\n"
"      --mem-budget SIZE       e.g. 2GiB, 512MiB (default: the device's available memory:\n"
"                              MemAvailable or the cgroup's room, whichever is lower)\n"
"      --expert-budget SIZE|PCT%  (run, chat, serve, bench) mixture of experts: the routed\n"
"                              experts kept resident (most recently used; the rest released\n"
"                              after each MoE op and faulted back on use), bytes or percent of\n"
"                              the experts (default: all when the budget holds them, else what fits)\n"
"      --mem-floor SIZE        serve: answer new requests 503 + Retry-After while MemAvailable\n"
"                              is below SIZE (also while PSI memory 'full avg10' >= 10 %)\n"
"      --load STRATEGY         (run, chat, serve, bench) how the weights come into memory:\n"
"                              mmap (default: pages read on first touch), preload (read and\n"
"                              mlock everything before the first token; needs RLIMIT_MEMLOCK\n"
"                              >= the file), prefetch (mmap; while a layer computes the next\n"
"                              layers' weights are requested), hot (preload all but the\n"
"                              token-embedding table, which stays on demand)\n"
"      --ctx-overflow POLICY   (chat, serve) when a conversation no longer fits the context:\n"
"                              error, or truncate (drop the oldest whole turns after the\n"
"                              system prompt, and say so); default: chat truncate, serve error\n"
"      --backend B             (run, chat, serve, bench) where the ops run: cpu (default),\n"
"                              opencl[:N] (every op OpenCL device N runs, the rest on the\n"
"                              cpu), auto (the scheduler places each op by the devices'\n"
"                              measured rates); a device that cannot be had falls back to\n"
"                              the cpu and the report says so (docs/HETEROGENEOUS.md)\n"
"      --prefer DEV            (auto) the device that wins within 1.5x of the fastest\n"
"      --tax-budget F          warn when copies between devices exceed this share of a\n"
"                              pass (default 0.15)\n"
"      --placement-report      time every partition and print where each op ran, the\n"
"                              partitions, bytes across boundaries, estimated vs measured\n"
"                              time and every fallback (run --json: in the final object)\n"
"\n"
"run only:\n"
"      --json                  one JSON object per generated token per line, then a\n"
"                              final {\"done\":true,...} line with the statistics (text\n"
"                              held back to the very end comes as {\"flush\":true,...})\n"
"      --top-logprobs K        with --json: the K most likely tokens per step (0..64)\n"
"\n"
"chat only:\n"
"      --chat-template NAME    a built-in family: gemma, llama3, llama2, chatml,\n"
"                              mistral, phi3 (default: the model's own Jinja\n"
"                              template; a built-in family when it has none or\n"
"                              it does not parse)\n"
"      --chat-template-file F  (chat, serve) render with the Jinja template in F\n"
"      --chat-template-kwargs J (serve) a JSON object of template variables for every\n"
"                              chat request, e.g. '{\"enable_thinking\": false}' (a\n"
"                              request's chat_template_kwargs override its members)\n"
"  -sys, --system-prompt TEXT  system message\n"
"      --trust-chat-special    (chat, serve) message text may hold control tokens: a\n"
"                              typed \"<end_of_turn>\" becomes that token (default: only\n"
"                              the template's own markers are special, text stays text)\n"
"  in chat, a line \"/reset\" forgets the conversation and \"/exit\" (or EOF) quits\n"
"\n"
"serve only (also -c: context per slot, default min(2048, train ctx); -t; -b;\n"
"  --chat-template, --chat-template-file, --chat-template-kwargs, --trust-chat-special):\n"
"      --host HOST             address to bind (default 127.0.0.1)\n"
"      --port PORT             port (default 8080; 0: any free port)\n"
"      --reasoning-format F    none | deepseek | auto (default): <think>...</think> (and a\n"
"                              format's reasoning channel) go to reasoning_content\n"
"  -np, --parallel N           slots: requests generated at once (default 1)\n"
"      --queue Q               requests that may wait for a slot (default 16; more: 503)\n"
"      --api-key KEY           require 'Authorization: Bearer KEY' (or 'X-Api-Key: KEY')\n"
"      --allow-host NAME       also answer requests whose Host is NAME (repeatable; the\n"
"                              default is localhost, 127.0.0.1, [::1] and --host;\n"
"                              '*' answers any Host, which allows DNS rebinding)\n"
"      --cors ORIGIN           also let pages from ORIGIN (e.g. https://app.example) call\n"
"                              the API; default: the server's own origin and localhost\n"
"                              pages (http(s)://localhost, 127.0.0.1, [::1], any port);\n"
"                              other Origins get 403\n"
"      --cors-origins LIST     as --cors, a comma-separated list of origins ('*': any)\n"
"  -a, --alias NAME[,NAME...]  the model id in replies and /v1/models (the first name;\n"
"                              all are listed as its aliases; default: file name)\n"
"      --no-slots              GET /slots answers 501\n"
"      --no-ui                 no chat page: GET / answers 404 (the API only)\n"
"  -v, --verbose               a log line per request on stderr, and llama-server's\n"
"                              \"__verbose\" object in every whole reply\n"
"      --no-batch              slots decode one by one (default: the slots decoding\n"
"                              advance together, one forward per step for all)\n"
"      --batch-chunk N         prompts are prefilled in chunks of N tokens between\n"
"                              batched decode steps (default 64)\n"
"      --batch-wait-us N       a batched step waits at most N us for slots still\n"
"                              sampling (default 1000; 0: none)\n"
"      --max-conns N           open connections in all, 16..4096 (default 256); from 7/8\n"
"                              of it on, a new one closes the longest-waiting incomplete\n"
"                              one (docs/SERVER.md: Connections)\n"
"      --max-conns-per-addr N  open connections from one address, 1..--max-conns (default\n"
"                              64); beyond it a new one closes that address's longest-\n"
"                              waiting incomplete one, or is refused if all are answering\n"
"      --slot-save-path DIR    POST /slots/N?action=save|restore write and read slot\n"
"                              files (tokens + KV cache) in DIR only (else 501)\n"
"      --cache-prompt, --no-cache-prompt\n"
"                              whether requests that do not say reuse the prefix their\n"
"                              prompt shares with a slot's cache, on every route (default:\n"
"                              /completion yes, as llama-server; /v1 routes no, so their\n"
"                              replies reproduce exactly; docs/SERVER.md: Prompt cache)\n"
"      --embeddings            answer /v1/embeddings, /embeddings, /embedding (else 501)\n"
"      --pooling TYPE          none|mean|cls|last (default: the model's, else none, as\n"
"                              llama-server; /v1/embeddings needs one other than none)\n"
"  routing (docs/ROUTING.md): every generation request is routed local, cloud or\n"
"  declined before it runs; the route is in X-Edgellm-Route and \"edgellm\".\"route\"\n"
"      --policy FILE           versioned routing policy (JSON; refused at startup if\n"
"                              malformed); with it, a model that fails to verify or\n"
"                              load leaves the server up with no local route\n"
"      --cloud-url URL         OpenAI-compatible endpoint (base URL ending in /v1)\n"
"      --cloud-key-file FILE   its bearer key (else $EDGELLM_CLOUD_KEY)\n"
"      --cloud-model NAME      the model name sent to the cloud\n"
"      --thermal-source FILE   read the temperature (millidegrees C) from FILE instead\n"
"                              of /sys/class/thermal\n"
"      --telemetry-dir DIR     content-free telemetry events, DIR/telemetry.jsonl (off\n"
"                              unless given; docs/ROUTING.md: Telemetry)\n"
"      --otlp-url URL          also export them as OTLP/HTTP JSON logs (off unless given)\n"
"      --audit-log FILE        every routing decision and refusal, one JSON line each\n"
"      --telemetry-max-bytes N rotate the spool / audit file at N bytes (default 1048576)\n"
"      --telemetry-keep N      rotated files kept (default 3)\n"
"  run/chat --route: decide local / cloud / declined before running, as serve\n"
"  (with --policy, --cloud-url, --cloud-key-file, --cloud-model, --thermal-source):\n"
"      --data-class NAME       the request's data class (default: the strictest)\n"
"      --consent               the user consents to the cloud (with_consent classes)\n"
"                              cloud: the cloud's completion streamed to stdout;\n"
"                              declined: why on stderr, exit status 4\n"
"      --temp T, -s/--seed S, -n/--n-predict N: defaults for requests that omit\n"
"                              temperature / seed / max_tokens (n_predict)\n"
"  limits: 256 connections, 64 per client address; request headers within 10 s, the\n"
"  body within 20 s more; bodies up to 1 MiB; POST bodies need Content-Type:\n"
"  application/json (docs/SERVER.md)\n"
"\n"
"info only:\n"
"  -v, --verbose               print long strings (the chat template) in full\n"
"\n"
"bench only (also -t):\n"
"  -p, --n-prompt N            prompt tokens per prefill test (default 512; 0: skip)\n"
"  -n, --n-gen N               tokens per decode test (default 128; 0: skip)\n"
"  -r, --repetitions N         repetitions of each test (default 5)\n"
"  -d, --n-depth N             N tokens in the cache before each test (as llama-bench -d;\n"
"                              evaluated once, untimed; default 0)\n"
"      --load STRATEGY         as above; the first prompt and the first decode token after\n"
"                              the load are timed on their own (first_token_ms, first_decode_ms)\n"
"      --cold                  evict the model file's pages from the page cache first\n"
"                              (posix_fadvise DONTNEED; no privilege needed; pages another\n"
"                              process maps stay: the fraction still cached is printed)\n"
"      --spec ngram|draft, -md FILE (and --draft-max ...): also decode -n tokens greedily\n"
"                              from a copy-heavy prompt, plain and speculative, -r times:\n"
"                              tokens/s of both, the speedup, α, γ (JSON: \"spec\")\n"
"      --json                  print one JSON object with all the results\n",
        f);
}

/* ---- option parsing ---------------------------------------------------- */

enum { C_RUN = 1, C_TOK = 2, C_CHAT = 4, C_INFO = 8, C_SERVE = 16, C_BENCH = 32, C_ALL = 63,
       C_GEN = C_RUN | C_CHAT };

enum {
    F_MODEL, F_PROMPT, F_FILE, F_NPRED, F_TEMP, F_TOPK, F_TOPP, F_MINP, F_REPPEN, F_REPLAST,
    F_PRESPEN, F_FREQPEN, F_SEED, F_THREADS, F_CTX, F_BATCH, F_IGNEOS, F_JSON, F_TOPLP,
    F_STOP, F_NOBOS, F_NOPARSE, F_NOESC, F_TMPL, F_TMPLFILE, F_TMPLKW, F_REASONFMT, F_SYS, F_VERBOSE, F_HELP,
    F_HOST, F_PORT, F_PARALLEL, F_QUEUE, F_APIKEY, F_NPROMPT, F_NGEN, F_REPS, F_DEPTH,
    F_ALLOW_UNSIGNED, F_PUB, F_STORE, F_MINVER, F_ALLOWHOST, F_CORS, F_CORSORIGINS, F_TRUST_CHAT, F_MEMBUDGET, F_MEMFLOOR, F_EXPBUDGET,
    F_ALIAS, F_NOSLOTS, F_NOUI, F_NOBATCH, F_BATCHCHUNK, F_BATCHWAIT, F_MAXCONNS, F_MAXCONNSADDR, F_SLOTPATH, F_CACHEPROMPT, F_NOCACHEPROMPT, F_EMBD, F_POOLING,
    F_SPEC, F_DRAFTMODEL, F_DRAFTMAX, F_DRAFTMIN, F_SPECNGRAM, F_SPECFIXED,
    F_POLICY, F_CLOUDURL, F_CLOUDKEY, F_CLOUDMODEL, F_THERMALSRC,
    F_TELDIR, F_TELMAX, F_TELKEEP, F_OTLP, F_AUDIT, F_ROUTE, F_DATACLASS, F_CONSENT,
    F_LOAD, F_COLD, F_CTXOVER,
    F_CTK, F_CTV,
    F_BACKEND, F_PREFER, F_TAXBUDGET, F_PLACEREPORT, F_GRAMMAR, F_GRAMMARFILE, F_JSONSCHEMA, F_LORA, F_LORASCALED, F_LORABUDGET
};

typedef struct flag_def {
    const char *s, *l; /* short / long spelling (either may be NULL) */
    int id;
    bool arg;
    unsigned cmds;
} flag_def;

static const flag_def FLAGS[] = {
    {"-m", "--model", F_MODEL, true, C_ALL},
    {"-p", "--prompt", F_PROMPT, true, C_RUN | C_TOK},
    {"-f", "--file", F_FILE, true, C_RUN | C_TOK},
    {"-n", "--n-predict", F_NPRED, true, C_GEN | C_SERVE},
    {NULL, "--temp", F_TEMP, true, C_GEN | C_SERVE},
    {NULL, "--top-k", F_TOPK, true, C_GEN},
    {NULL, "--top-p", F_TOPP, true, C_GEN},
    {NULL, "--min-p", F_MINP, true, C_GEN},
    {NULL, "--repeat-penalty", F_REPPEN, true, C_GEN},
    {NULL, "--repeat-last-n", F_REPLAST, true, C_GEN},
    {NULL, "--presence-penalty", F_PRESPEN, true, C_GEN},
    {NULL, "--frequency-penalty", F_FREQPEN, true, C_GEN},
    {"-s", "--seed", F_SEED, true, C_GEN | C_SERVE},
    {"-t", "--threads", F_THREADS, true, C_GEN | C_INFO | C_SERVE | C_BENCH},
    {"-c", "--ctx-size", F_CTX, true, C_GEN | C_INFO | C_SERVE},
    {"-b", "--batch-size", F_BATCH, true, C_GEN | C_INFO | C_SERVE},
    {"-ctk", "--cache-type-k", F_CTK, true, C_GEN | C_SERVE | C_BENCH},
    {"-ctv", "--cache-type-v", F_CTV, true, C_GEN | C_SERVE | C_BENCH},
    {NULL, "--ignore-eos", F_IGNEOS, false, C_GEN},
    {NULL, "--json", F_JSON, false, C_RUN | C_BENCH},
    {NULL, "--top-logprobs", F_TOPLP, true, C_RUN},
    {NULL, "--stop", F_STOP, true, C_GEN},
    {NULL, "--no-bos", F_NOBOS, false, C_RUN | C_TOK},
    {NULL, "--no-parse-special", F_NOPARSE, false, C_RUN | C_TOK},
    {NULL, "--no-escape", F_NOESC, false, C_RUN | C_TOK | C_CHAT},
    {NULL, "--chat-template", F_TMPL, true, C_CHAT | C_SERVE},
    {NULL, "--chat-template-file", F_TMPLFILE, true, C_CHAT | C_SERVE},
    {NULL, "--chat-template-kwargs", F_TMPLKW, true, C_SERVE},
    {NULL, "--reasoning-format", F_REASONFMT, true, C_SERVE},
    {"-sys", "--system-prompt", F_SYS, true, C_CHAT},
    {NULL, "--trust-chat-special", F_TRUST_CHAT, false, C_CHAT | C_SERVE},
    {"-v", "--verbose", F_VERBOSE, false, C_ALL},
    {"-h", "--help", F_HELP, false, C_ALL},
    {NULL, "--host", F_HOST, true, C_SERVE},
    {NULL, "--port", F_PORT, true, C_SERVE},
    {"-np", "--parallel", F_PARALLEL, true, C_SERVE},
    {NULL, "--queue", F_QUEUE, true, C_SERVE},
    {NULL, "--api-key", F_APIKEY, true, C_SERVE},
    {NULL, "--allow-host", F_ALLOWHOST, true, C_SERVE},
    {NULL, "--cors", F_CORS, true, C_SERVE},
    {NULL, "--cors-origins", F_CORSORIGINS, true, C_SERVE},
    {"-a", "--alias", F_ALIAS, true, C_SERVE},
    {NULL, "--no-slots", F_NOSLOTS, false, C_SERVE},
    {NULL, "--no-ui", F_NOUI, false, C_SERVE},
    {NULL, "--no-batch", F_NOBATCH, false, C_SERVE},
    {NULL, "--batch-chunk", F_BATCHCHUNK, true, C_SERVE},
    {NULL, "--batch-wait-us", F_BATCHWAIT, true, C_SERVE},
    {NULL, "--max-conns", F_MAXCONNS, true, C_SERVE},
    {NULL, "--max-conns-per-addr", F_MAXCONNSADDR, true, C_SERVE},
    {NULL, "--slot-save-path", F_SLOTPATH, true, C_SERVE},
    {NULL, "--cache-prompt", F_CACHEPROMPT, false, C_SERVE},
    {NULL, "--no-cache-prompt", F_NOCACHEPROMPT, false, C_SERVE},
    {NULL, "--embeddings", F_EMBD, false, C_SERVE},
    {NULL, "--embedding", F_EMBD, false, C_SERVE},
    {NULL, "--pooling", F_POOLING, true, C_SERVE},
    /* bench: -p and -n are counts here (the lookup prefers the entry that
     * applies to the command when a spelling is shared) */
    {"-p", "--n-prompt", F_NPROMPT, true, C_BENCH},
    {"-n", "--n-gen", F_NGEN, true, C_BENCH},
    {"-r", "--repetitions", F_REPS, true, C_BENCH},
    {"-d", "--n-depth", F_DEPTH, true, C_BENCH},
    /* packages: checked before run/chat/serve load the model */
    {NULL, "--allow-unsigned", F_ALLOW_UNSIGNED, false, C_GEN | C_SERVE},
    {NULL, "--pub", F_PUB, true, C_GEN | C_SERVE},
    {NULL, "--store", F_STORE, true, C_GEN | C_SERVE},
    {NULL, "--min-version", F_MINVER, true, C_GEN | C_SERVE},
    /* memory: admission against a budget (memory/capacity.h) */
    {NULL, "--mem-budget", F_MEMBUDGET, true, C_GEN | C_SERVE},
    {NULL, "--mem-floor", F_MEMFLOOR, true, C_SERVE},
    {NULL, "--expert-budget", F_EXPBUDGET, true, C_GEN | C_SERVE | C_BENCH},
    /* speculative decoding */
    {NULL, "--spec", F_SPEC, true, C_GEN | C_SERVE | C_BENCH},
    {"-md", "--draft-model", F_DRAFTMODEL, true, C_GEN | C_SERVE | C_BENCH},
    {NULL, "--model-draft", F_DRAFTMODEL, true, C_GEN | C_SERVE | C_BENCH}, /* llama.cpp's long name */
    {NULL, "--draft-max", F_DRAFTMAX, true, C_GEN | C_SERVE | C_BENCH},
    {NULL, "--draft-min", F_DRAFTMIN, true, C_GEN | C_SERVE | C_BENCH},
    {NULL, "--spec-ngram", F_SPECNGRAM, true, C_GEN | C_SERVE | C_BENCH},
    {NULL, "--spec-fixed", F_SPECFIXED, false, C_GEN | C_SERVE | C_BENCH},
    /* constrained output (docs/STRUCTURED.md) */
    {NULL, "--grammar", F_GRAMMAR, true, C_GEN},
    {NULL, "--grammar-file", F_GRAMMARFILE, true, C_GEN},
    {NULL, "--json-schema", F_JSONSCHEMA, true, C_GEN},
    /* routing (serve): src/route/router.h */
    {NULL, "--policy", F_POLICY, true, C_SERVE | C_GEN},
    {NULL, "--cloud-url", F_CLOUDURL, true, C_SERVE | C_GEN},
    {NULL, "--cloud-key-file", F_CLOUDKEY, true, C_SERVE | C_GEN},
    {NULL, "--cloud-model", F_CLOUDMODEL, true, C_SERVE | C_GEN},
    {NULL, "--thermal-source", F_THERMALSRC, true, C_SERVE | C_GEN},
    /* run/chat --route: decided before anything runs, as serve (cmd_route.c) */
    {NULL, "--route", F_ROUTE, false, C_GEN},
    {NULL, "--data-class", F_DATACLASS, true, C_GEN},
    {NULL, "--consent", F_CONSENT, false, C_GEN},
    /* telemetry and audit (serve): src/route/telemetry.h, audit.h */
    {NULL, "--telemetry-dir", F_TELDIR, true, C_SERVE},
    {NULL, "--telemetry-max-bytes", F_TELMAX, true, C_SERVE},
    {NULL, "--telemetry-keep", F_TELKEEP, true, C_SERVE},
    {NULL, "--otlp-url", F_OTLP, true, C_SERVE},
    {NULL, "--audit-log", F_AUDIT, true, C_SERVE},
    /* load strategy (memory/load.h) and context overflow policy */
    {NULL, "--load", F_LOAD, true, C_GEN | C_SERVE | C_BENCH},
    {NULL, "--cold", F_COLD, false, C_BENCH},
    {NULL, "--ctx-overflow", F_CTXOVER, true, C_CHAT | C_SERVE},
    /* backends and placement (runtime/exec.h) */
    {NULL, "--backend", F_BACKEND, true, C_GEN | C_SERVE | C_BENCH},
    {NULL, "--prefer", F_PREFER, true, C_GEN | C_SERVE | C_BENCH},
    {NULL, "--tax-budget", F_TAXBUDGET, true, C_GEN | C_SERVE | C_BENCH},
    {NULL, "--placement-report", F_PLACEREPORT, false, C_GEN | C_SERVE | C_BENCH},
    /* LoRA adapters (cli_lora.c; serve: NAME=FILE, src/server/lora_registry.h) */
    {NULL, "--lora", F_LORA, true, C_GEN | C_BENCH | C_SERVE},
    {NULL, "--lora-scaled", F_LORASCALED, true, C_GEN | C_BENCH | C_SERVE},
    {NULL, "--lora-budget", F_LORABUDGET, true, C_SERVE},
};

/* One backend name, or (bench) several joined by '/'. */
static bool cli_backend_list_ok(const char *v, bool many) {
    if (!*v || strlen(v) > 200) return false;
    const char *p = v;
    for (;;) {
        const char *e = strchr(p, '/');
        const size_t l = e ? (size_t)(e - p) : strlen(p);
        if (e && !many) return false;
        bool ok = (l == 3 && !strncmp(p, "cpu", 3)) || (l == 4 && !strncmp(p, "auto", 4)) ||
                  (l == 7 && !strncmp(p, "cpu,cpu", 7)) || (l == 6 && !strncmp(p, "opencl", 6));
        if (!ok && l > 7 && !strncmp(p, "opencl:", 7)) {
            ok = true;
            for (size_t i = 7; i < l; i++) ok = ok && p[i] >= '0' && p[i] <= '9';
            ok = ok && l <= 9;
        }
        if (!ok) return false;
        if (!e) return true;
        p = e + 1;
    }
}

static bool parse_int(const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

static bool parse_float(const char *s, float *out) {
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (errno || end == s || *end || !isfinite(v)) return false;
    *out = v;
    return true;
}

static uint64_t random_seed(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = (uint64_t)ts.tv_sec * 1000000007ull ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32);
    /* splitmix64 finaliser */
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Returns -1 on success, else the exit code to return. */
static int parse_args(int argc, char **argv, unsigned cmd_bit, cli_opts *o) {
    const char *cmd = o->cmd;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        const char *val = NULL;
        size_t alen = strlen(a);
        const char *eq = NULL;
        if (a[0] == '-' && a[1] == '-' && (eq = strchr(a, '='))) alen = (size_t)(eq - a);
        const flag_def *fd = NULL;
        for (size_t k = 0; k < sizeof FLAGS / sizeof FLAGS[0]; k++) {
            const flag_def *d = &FLAGS[k];
            if ((d->s && !eq && strcmp(a, d->s) == 0) ||
                (d->l && strlen(d->l) == alen && strncmp(a, d->l, alen) == 0)) {
                if (!fd) fd = d;
                if (d->cmds & cmd_bit) { fd = d; break; }
            }
        }
        if (!fd) return cli_usage_error(cmd, "unknown option '%s'", a);
        if (!(fd->cmds & cmd_bit)) return cli_usage_error(cmd, "option '%s' does not apply to this command", a);
        if (fd->arg) {
            if (eq) val = eq + 1;
            else if (i + 1 < argc) val = argv[++i];
            else return cli_usage_error(cmd, "option '%s' needs a value", a);
        } else if (eq) {
            return cli_usage_error(cmd, "option '%.*s' takes no value", (int)alen, a);
        }
        long lv = 0;
        float fv = 0;
#define NEED_INT(lo, hi) do { if (!parse_int(val, (lo), (hi), &lv)) \
        return cli_usage_error(cmd, "%s: expected an integer in [%ld, %ld], got '%s'", fd->l, (long)(lo), (long)(hi), val); } while (0)
#define NEED_FLOAT() do { if (!parse_float(val, &fv)) \
        return cli_usage_error(cmd, "%s: expected a number, got '%s'", fd->l, val); } while (0)
        switch (fd->id) {
        case F_MODEL: o->model = val; break;
        case F_PROMPT: o->prompt = val; break;
        case F_FILE: o->prompt_file = val; break;
        case F_NPRED: NEED_INT(-1, INT_MAX); o->n_predict = (int)lv; o->n_predict_set = true; break;
        case F_TEMP: NEED_FLOAT(); o->sampling.temp = fv; o->temp_set = true; break;
        case F_TOPK: NEED_INT(INT_MIN, INT_MAX); o->sampling.top_k = (int)lv; break;
        case F_TOPP: NEED_FLOAT(); o->sampling.top_p = fv; break;
        case F_MINP: NEED_FLOAT(); o->sampling.min_p = fv; break;
        case F_REPPEN: NEED_FLOAT(); o->sampling.repeat_penalty = fv; break;
        case F_REPLAST: NEED_INT(-1, INT_MAX); o->sampling.penalty_last_n = (int)lv; break;
        case F_PRESPEN: NEED_FLOAT(); o->sampling.presence_penalty = fv; break;
        case F_FREQPEN: NEED_FLOAT(); o->sampling.freq_penalty = fv; break;
        case F_SEED: {
            if (strcmp(val, "-1") == 0) { o->seed_set = false; break; }
            char *end;
            errno = 0;
            unsigned long long s = strtoull(val, &end, 10);
            if (errno || end == val || *end || val[0] == '-')
                return cli_usage_error(cmd, "--seed: expected a non-negative integer or -1, got '%s'", val);
            o->sampling.seed = (uint64_t)s;
            o->seed_set = true;
            break;
        }
        case F_THREADS: NEED_INT(0, 4096); o->n_threads = (int)lv; break;
        case F_CTX: NEED_INT(0, INT_MAX); o->n_ctx = (int)lv; break;
        case F_BATCH: NEED_INT(1, INT_MAX); o->n_batch = (int)lv; break;
        case F_CTK:
        case F_CTV: {
            const int t = el_cache_type_parse(val);
            if (t < 0) return cli_usage_error(cmd, "%s: '%s' is not a KV cache type (f16, bf16, q8_0, q4_0)", fd->l, val);
            *(fd->id == F_CTK ? &o->cache_type_k : &o->cache_type_v) = t;
            break;
        }
        case F_IGNEOS: o->ignore_eos = true; break;
        case F_JSON: o->json = true; break;
        case F_TOPLP: NEED_INT(0, 64); o->top_logprobs = (int)lv; break;
        case F_STOP:
            if (!*val) return cli_usage_error(cmd, "--stop: empty stop string");
            if (o->n_stops >= CLI_MAX_STOPS) return cli_usage_error(cmd, "--stop: at most %d stop strings", CLI_MAX_STOPS);
            o->stops[o->n_stops++] = val;
            o->stops[o->n_stops] = NULL;
            break;
        case F_NOBOS: o->no_bos = true; break;
        case F_NOPARSE: o->no_parse_special = true; break;
        case F_NOESC: o->no_escape = true; break;
        case F_TMPL: o->chat_template = val; break;
        case F_TMPLFILE: o->chat_template_file = val; break;
        case F_TMPLKW: o->chat_template_kwargs = val; break;
        case F_REASONFMT: o->reasoning_format = val; break;
        case F_TRUST_CHAT: o->trust_chat_special = true; break;
        case F_SYS: o->system = val; break;
        case F_VERBOSE: o->verbose = true; break;
        case F_HELP: print_usage(stdout); return CLI_EXIT_OK;
        case F_HOST: o->host = val; break;
        case F_PORT: NEED_INT(0, 65535); o->port = (int)lv; break;
        case F_PARALLEL: NEED_INT(1, 256); o->n_parallel = (int)lv; break;
        case F_QUEUE: NEED_INT(0, 4096); o->queue_cap = (int)lv; break;
        case F_APIKEY: o->api_key = val; break;
        case F_ALIAS:
            if (!*val || strlen(val) > 200 || strspn(val, ", \t") == strlen(val))
                return cli_usage_error(cmd, "--alias: expected 1..200 bytes naming at least one alias");
            o->alias = val;
            break;
        case F_NOSLOTS: o->no_slots = true; break;
        case F_NOUI: o->no_ui = true; break;
        case F_NOBATCH: o->no_batch = true; break;
        case F_BATCHCHUNK: NEED_INT(1, 65536); o->batch_chunk = (int)lv; break;
        case F_BATCHWAIT: NEED_INT(0, 1000000); o->batch_wait_us = (int)lv; break;
        case F_MAXCONNS: NEED_INT(16, 4096); o->max_conns = (int)lv; break;
        case F_MAXCONNSADDR: NEED_INT(1, 4096); o->max_conns_per_addr = (int)lv; break;
        case F_CACHEPROMPT: o->cache_prompt = 1; break;
        case F_NOCACHEPROMPT: o->cache_prompt = -1; break;
        case F_SLOTPATH:
            if (!*val || strlen(val) > 4000) return cli_usage_error(cmd, "--slot-save-path: expected a directory");
            o->slot_save_path = val;
            break;
        case F_EMBD: o->embeddings = true; break;
        case F_POOLING:
            if (!strcmp(val, "none")) o->pooling = EL_POOLING_NONE;
            else if (!strcmp(val, "mean")) o->pooling = EL_POOLING_MEAN;
            else if (!strcmp(val, "cls")) o->pooling = EL_POOLING_CLS;
            else if (!strcmp(val, "last")) o->pooling = EL_POOLING_LAST;
            else return cli_usage_error(cmd, "--pooling: expected none, mean, cls or last, got '%s'%s", val,
                                        !strcmp(val, "rank") ? " (rank, for rerankers, is not supported)" : "");
            break;
        case F_ALLOWHOST:
            if (!*val) return cli_usage_error(cmd, "--allow-host: empty name");
            if (o->n_allow_hosts >= CLI_MAX_HOSTS)
                return cli_usage_error(cmd, "--allow-host: at most %d names", CLI_MAX_HOSTS);
            o->allow_hosts[o->n_allow_hosts++] = val;
            break;
        case F_CORS:
            if (strncmp(val, "http://", 7) && strncmp(val, "https://", 8))
                return cli_usage_error(cmd, "--cors: expected an origin like http://host:port, got '%s'", val);
            o->cors = val;
            break;
        case F_CORSORIGINS: {
            /* each entry '*' or an origin: http(s)://host[:port], no path, no blanks inside, <= 255 bytes */
            size_t l0 = strlen(val);
            if (!l0 || l0 > 4096) return cli_usage_error(cmd, "--cors-origins: expected 1..4096 bytes");
            for (const char *q = val; *q;) {
                size_t l = strcspn(q, ",");
                const char *a = q, *next = q[l] ? q + l + 1 : q + l;
                while (l && *a == ' ') a++, l--;
                while (l && a[l - 1] == ' ') l--;
                bool ok = l == 1 && *a == '*';
                if (!ok && l && l <= 255) {
                    size_t sch = !strncmp(a, "http://", 7) ? 7 : !strncmp(a, "https://", 8) ? 8 : 0;
                    ok = sch && l > sch;
                    for (size_t i = sch; ok && i < l; i++)
                        ok = a[i] > ' ' && a[i] < 0x7f && a[i] != '/' && a[i] != '@' && a[i] != '*';
                }
                if (!ok)
                    return cli_usage_error(cmd, "--cors-origins: '%.*s' is not '*' or an origin like http://host:port",
                                           (int)(l > 200 ? 200 : l), a);
                q = next;
            }
            o->cors_origins = val;
            break;
        }
        case F_NPROMPT: NEED_INT(0, 1 << 20); o->bench_n_prompt = (int)lv; break;
        case F_NGEN: NEED_INT(0, 1 << 20); o->bench_n_gen = (int)lv; break;
        case F_REPS: NEED_INT(1, 10000); o->bench_reps = (int)lv; break;
        case F_DEPTH: NEED_INT(0, 1 << 20); o->bench_depth = (int)lv; break;
        case F_ALLOW_UNSIGNED: o->allow_unsigned = true; break;
        case F_PUB: o->pub = val; break;
        case F_STORE: o->store = val; break;
        case F_MINVER: NEED_INT(0, LONG_MAX); o->min_version = lv; break;
        case F_MEMBUDGET: {
            char e[256];
            if (el_parse_size(val, &o->mem_budget, e, sizeof e)) return cli_usage_error(cmd, "--mem-budget: %s", e);
            if (o->mem_budget == 0) return cli_usage_error(cmd, "--mem-budget: '%s' is zero", val);
            break;
        }
        case F_EXPBUDGET: {
            const size_t L = strlen(val);
            if (L > 1 && val[L - 1] == '%') {
                char *end = NULL;
                const double pc = strtod(val, &end);
                if (end != val + L - 1 || !(pc > 0.0 && pc <= 100.0))
                    return cli_usage_error(cmd, "--expert-budget: '%s' is not a percentage in (0, 100]", val);
                o->expert_budget_pct = pc;
                break;
            }
            char e[256];
            if (el_parse_size(val, &o->expert_budget, e, sizeof e)) return cli_usage_error(cmd, "--expert-budget: %s", e);
            if (o->expert_budget == 0) return cli_usage_error(cmd, "--expert-budget: '%s' is zero", val);
            break;
        }
        case F_MEMFLOOR: {
            char e[256];
            if (el_parse_size(val, &o->mem_floor, e, sizeof e)) return cli_usage_error(cmd, "--mem-floor: %s", e);
            break;
        }
        case F_SPEC:
            if (!strcmp(val, "ngram")) o->spec_mode = EL_SPEC_NGRAM;
            else if (!strcmp(val, "draft")) o->spec_mode = EL_SPEC_DRAFT;
            else if (!strcmp(val, "off")) o->spec_mode = EL_SPEC_OFF;
            else return cli_usage_error(cmd, "--spec: expected ngram, draft or off, got '%s'", val);
            break;
        case F_DRAFTMAX: NEED_INT(1, 32); o->draft_max = (int)lv; break;
        case F_DRAFTMIN: NEED_INT(1, 32); o->draft_min = (int)lv; break;
        case F_SPECNGRAM: NEED_INT(1, 64); o->spec_ngram = (int)lv; break;
        case F_SPECFIXED: o->spec_fixed = true; break;
        case F_GRAMMAR: o->grammar_arg = val; break;
        case F_GRAMMARFILE: o->grammar_file = val; break;
        case F_JSONSCHEMA: o->json_schema = val; break;
        case F_DRAFTMODEL: o->draft_model = val; break;
        case F_POLICY: o->policy = val; break;
        case F_CLOUDURL:
            if (strncmp(val, "http://", 7) && strncmp(val, "https://", 8))
                return cli_usage_error(cmd, "--cloud-url: expected http://... or https://..., got '%s'", val);
            o->cloud_url = val;
            break;
        case F_CLOUDKEY: o->cloud_key_file = val; break;
        case F_CLOUDMODEL:
            if (!*val || strlen(val) > 200) return cli_usage_error(cmd, "--cloud-model: expected 1..200 bytes");
            o->cloud_model = val;
            break;
        case F_THERMALSRC: o->thermal_source = val; break;
        case F_TELDIR: o->telemetry_dir = val; break;
        case F_TELMAX: NEED_INT(256, 1L << 30); o->telemetry_max_bytes = lv; break;
        case F_TELKEEP: NEED_INT(1, 99); o->telemetry_keep = (int)lv; break;
        case F_OTLP:
            if (strncmp(val, "http://", 7) && strncmp(val, "https://", 8))
                return cli_usage_error(cmd, "--otlp-url: expected http://... or https://..., got '%s'", val);
            o->otlp_url = val;
            break;
        case F_AUDIT: o->audit_log = val; break;
        case F_ROUTE: o->route = true; break;
        case F_DATACLASS: o->data_class = val; break;
        case F_CONSENT: o->consent = true; break;
        case F_LOAD:
            if (el_load_mode_parse(val, &o->load))
                return cli_usage_error(cmd, "--load: expected preload, mmap, prefetch or hot, got '%s'", val);
            break;
        case F_COLD: o->bench_cold = true; break;
        case F_BACKEND:
            if (!cli_backend_list_ok(val, cmd_bit == C_BENCH))
                return cli_usage_error(cmd, "--backend: expected cpu, opencl, opencl:N or auto%s, got '%s'",
                                       cmd_bit == C_BENCH ? " (bench: several joined by '/')" : "", val);
            o->backend.backend = val;
            break;
        case F_PREFER: o->backend.prefer = val; break;
        case F_TAXBUDGET: {
            char *end;
            const double v = strtod(val, &end);
            if (end == val || *end || !(v > 0 && v <= 1))
                return cli_usage_error(cmd, "--tax-budget: expected a share in (0, 1], got '%s'", val);
            o->backend.tax_budget = (float)v;
            break;
        }
        case F_LORA: { /* serve: [NAME=]FILE[:SCALE] (NAME: the file's base name) */
            const char *eqs = cmd_bit == C_SERVE ? strchr(val, '=') : NULL;
            const int r = cli_lora_parse(o, cmd, eqs ? eqs + 1 : val, NULL);
            if (r >= 0) return r;
            if (cmd_bit == C_SERVE) {
                const char *base = eqs ? val : strrchr(o->lora_path[o->n_lora - 1], '/');
                base = eqs ? val : base ? base + 1 : o->lora_path[o->n_lora - 1];
                size_t nl = eqs ? (size_t)(eqs - val) : strcspn(base, ".");
                if (nl == 0 || nl >= sizeof o->lora_name[0]) return cli_usage_error(cmd, "--lora %s: bad adapter name", val);
                memcpy(o->lora_name[o->n_lora - 1], base, nl);
                o->lora_name[o->n_lora - 1][nl] = 0;
            }
            break;
        }
        case F_LORABUDGET: {
            char e[256];
            if (el_parse_size(val, &o->lora_budget, e, sizeof e)) return cli_usage_error(cmd, "--lora-budget: %s", e);
            if (o->lora_budget == 0) return cli_usage_error(cmd, "--lora-budget: '%s' is zero", val);
            break;
        }
        case F_LORASCALED: {
            if (i + 1 >= argc) return cli_usage_error(cmd, "--lora-scaled needs FILE SCALE");
            const int r = cli_lora_parse(o, cmd, val, argv[++i]);
            if (r >= 0) return r;
            if (cmd_bit == C_SERVE) { /* the file's base name */
                const char *b = strrchr(val, '/');
                b = b ? b + 1 : val;
                size_t nl = strcspn(b, ".");
                if (nl == 0 || nl >= sizeof o->lora_name[0]) return cli_usage_error(cmd, "--lora-scaled %s: bad adapter name", val);
                memcpy(o->lora_name[o->n_lora - 1], b, nl);
                o->lora_name[o->n_lora - 1][nl] = 0;
            }
            break;
        }
        case F_PLACEREPORT:
            o->placement_report = true;
            o->backend.measure = true;
            break;
        case F_CTXOVER:
            if (!strcmp(val, "error")) o->ctx_overflow = 0;
            else if (!strcmp(val, "truncate")) o->ctx_overflow = 1;
            else return cli_usage_error(cmd, "--ctx-overflow: expected error or truncate, got '%s'", val);
            break;
        }
#undef NEED_INT
#undef NEED_FLOAT
    }
    if (!o->model && !(o->store && (cmd_bit & (C_GEN | C_SERVE)))) return cli_usage_error(cmd, "missing -m MODEL");
    if (cmd_bit & (C_RUN | C_TOK)) {
        if (!o->prompt && !o->prompt_file) return cli_usage_error(cmd, "missing -p TEXT or -f FILE");
        if (o->prompt && o->prompt_file) return cli_usage_error(cmd, "give only one of -p and -f");
    }
    if (o->top_logprobs && !o->json) return cli_usage_error(cmd, "--top-logprobs needs --json");
    if ((cmd_bit & C_GEN) && !o->route && (o->policy || o->cloud_url || o->cloud_key_file || o->cloud_model ||
                                           o->thermal_source || o->data_class || o->consent))
        return cli_usage_error(cmd, "--policy, --cloud-*, --thermal-source, --data-class and --consent need --route");
    if (o->draft_min > o->draft_max) return cli_usage_error(cmd, "--draft-min %d is above --draft-max %d", o->draft_min, o->draft_max);
    if (!!o->grammar_arg + !!o->grammar_file + !!o->json_schema > 1)
        return cli_usage_error(cmd, "give only one of --grammar, --grammar-file and --json-schema");
    if (o->draft_model && o->spec_mode == EL_SPEC_NGRAM)
        return cli_usage_error(cmd, "--draft-model drafts with a model; --spec ngram drafts by prompt lookup: pick one");
    if (o->draft_model) o->spec_mode = EL_SPEC_DRAFT;
    if (o->spec_mode == EL_SPEC_DRAFT && !o->draft_model)
        return cli_usage_error(cmd, "--spec draft needs --draft-model FILE (-md)");
    if (!o->seed_set) o->sampling.seed = random_seed();
    return -1;
}

static char *read_text_file(const char *path, const char *flag, el_error *err) {
    FILE *f = fopen(path, "rb");
    if (!f) { el_set_error(err, EL_ERR_IO, "%s: cannot open '%s': %s", flag, path, strerror(errno)); return NULL; }
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 8192;
            if (cap > EL_GRAMMAR_MAX_TEXT + 8192) { el_set_error(err, EL_ERR_GRAMMAR, "%s: '%s' is larger than %u bytes", flag, path, EL_GRAMMAR_MAX_TEXT); break; }
            char *q = realloc(buf, cap);
            if (!q) { el_set_error(err, EL_ERR_NOMEM, "%s: out of memory", flag); break; }
            buf = q;
        }
        size_t r = fread(buf + n, 1, 4096, f);
        n += r;
        if (r < 4096) {
            fclose(f);
            buf[n] = 0;
            return buf;
        }
    }
    fclose(f);
    free(buf);
    return NULL;
}

int cli_grammar_setup(cli_opts *o) {
    el_error err = {0};
    if (o->grammar_arg) o->grammar = strdup(o->grammar_arg);
    else if (o->grammar_file) {
        if (!(o->grammar = read_text_file(o->grammar_file, "--grammar-file", &err))) return cli_fail(&err);
    } else if (o->json_schema) {
        char *text = o->json_schema[0] == '@' ? read_text_file(o->json_schema + 1, "--json-schema", &err) : strdup(o->json_schema);
        if (!text) return err.code ? cli_fail(&err) : cli_failf("out of memory");
        o->grammar = el_json_schema_text_to_gbnf(text, strlen(text), &err);
        free(text);
        if (!o->grammar) return cli_fail(&err);
    } else return -1;
    if (!o->grammar) return cli_failf("out of memory");
    el_grammar *g = el_grammar_parse(o->grammar, strlen(o->grammar), &err);
    if (!g) {
        free(o->grammar);
        o->grammar = NULL;
        return cli_fail(&err);
    }
    el_grammar_free(g);
    return -1;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        print_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "help") || !strcmp(cmd, "-h") || !strcmp(cmd, "--help")) {
        print_usage(stdout);
        return CLI_EXIT_OK;
    }
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
        printf("edgellm %s\n", el_version());
        return CLI_EXIT_OK;
    }
    if (!strcmp(cmd, "pack")) return cli_cmd_pack(argc, argv);
    if (!strcmp(cmd, "quantize")) return cli_cmd_quantize(argc, argv);
    if (!strcmp(cmd, "plan")) return cli_cmd_plan(argc, argv);
    if (!strcmp(cmd, "perplexity")) return cli_cmd_perplexity(argc, argv);
    if (!strcmp(cmd, "route")) return cli_cmd_route(argc, argv);
    if (!strcmp(cmd, "act")) return cli_cmd_act(argc, argv);
    if (!strcmp(cmd, "fleet")) return cli_cmd_fleet(argc, argv);
    if (!strcmp(cmd, "accept")) return cli_cmd_accept(argc, argv);
    unsigned bit = 0;
    int (*fn)(cli_opts *) = NULL;
    if (!strcmp(cmd, "run")) { bit = C_RUN; fn = cli_cmd_run; }
    else if (!strcmp(cmd, "tokenize")) { bit = C_TOK; fn = cli_cmd_tokenize; }
    else if (!strcmp(cmd, "chat")) { bit = C_CHAT; fn = cli_cmd_chat; }
    else if (!strcmp(cmd, "info")) { bit = C_INFO; fn = cli_cmd_info; }
    else if (!strcmp(cmd, "serve")) { bit = C_SERVE; fn = cli_cmd_serve; }
    else if (!strcmp(cmd, "bench")) { bit = C_BENCH; fn = cli_cmd_bench; }
    else if (!strcmp(cmd, "keygen")) return cli_cmd_keygen(argc, argv);
    else if (!strcmp(cmd, "sign")) return cli_cmd_sign(argc, argv);
    else if (!strcmp(cmd, "verify")) return cli_cmd_verify(argc, argv);
    else if (!strcmp(cmd, "install")) return cli_cmd_install(argc, argv);
    else if (!strcmp(cmd, "rollback")) return cli_cmd_rollback(argc, argv);
    else if (!strcmp(cmd, "gc")) return cli_cmd_gc(argc, argv);
    else if (!strcmp(cmd, "status")) return cli_cmd_status(argc, argv);
    else return cli_usage_error(NULL, "unknown command '%s'", cmd);

    cli_opts o;
    memset(&o, 0, sizeof o);
    o.cmd = cmd;
    o.n_predict = -1;
    o.n_ctx = -1;
    o.sampling = el_sampling_default();
    o.port = 8080;
    o.n_parallel = 1;
    o.queue_cap = 16;
    o.batch_wait_us = -1;
    o.pooling = -1;
    o.bench_n_prompt = 512;
    o.bench_n_gen = 128;
    o.bench_reps = 5;
    o.draft_max = 8;
    o.draft_min = 1;
    o.spec_ngram = 4;
    o.load = EL_LOAD_MMAP;
    o.ctx_overflow = -1;
    int rc = parse_args(argc, argv, bit, &o);
    if (rc >= 0) return rc;
    if ((rc = cli_grammar_setup(&o)) >= 0) return rc;
    rc = fn(&o);
    free(o.grammar);
    return rc;
}
