/*
 * server_generate.c — the generation endpoints (/v1/chat/completions,
 * /v1/completions, llama-server's /completion, with and without /v1) and
 * the embeddings endpoints.
 *
 * A generation request is answered or queued by its connection's thread
 * (h_generate): the body is parsed by its route's parser (api.h), the
 * server's defaults fill what it left out (--temp, --seed, --n-predict:
 * srv_apply_defaults), the prompt is tokenized (a chat through the chat
 * template, tools rendered with the family's convention; a /completion
 * prompt of text pieces and token ids: parts_tokens), the request is routed
 * (server_routing.c), checked against the context (--ctx-overflow truncate
 * drops the oldest whole turns first: truncate_chat) and given its
 * generation parameters: OpenAI's sampler on the OpenAI routes,
 * llama-server's on /completion; tool_choice "required" / a named function
 * hands the composed call grammar to generation (gp->grammar, with
 * EL_GRAMMAR_END_EARLY: a complete call ends the reply unless the model
 * itself opens another; a named function gets exactly one call), "auto" a
 * lazy one (free text until the family's trigger, then the call is
 * constrained; the reply is parsed at the end, server_stream.c), "none"
 * renders the tools but never parses (llama.cpp's common/chat.cpp does the
 * same). When a Jinja template renders the chat and its tool format is
 * known (s->tf), that format picks the grammar (el_tool_format_grammar_family:
 * hermes → chatml's, llama3 → llama3's); a format without one answers
 * required / named with a 400 and leaves "auto" unconstrained (parsed
 * only). reply_mode fixes how the reply is split: reasoning_format (the
 * request's, else --reasoning-format), whether special tokens' text is kept
 * for the parser, whether a stream is held back or split live, and whether
 * the prompt opened a <think>. Then it is queued (server_slots.c) and answered: a stream by MHD's
 * content reader, a non-streamed reply here once the request is done.
 * Errors before the queue are answered at once and counted "rejected"
 * (srv_reject). Without a local model (loading, or none) a generation
 * request is routed only: to the cloud, or declined (srv_h_generate_unready).
 *
 * Embeddings (llama-server's handle_embeddings): 501 without --embeddings;
 * /v1/embeddings answers OpenAI's shape (and refuses pooling none, which has
 * no single vector), /embeddings and /embedding llama-server's native array —
 * as does /v1/embeddings for a body with "content" instead of "input". Each
 * input is tokenized like a /completion prompt (BOS before leading text,
 * control tokens parsed), must fit a slot's context (400 with the numbers
 * otherwise), and runs through el_embed on a slot (queued like any request);
 * pooled vectors are normalised by embd_normalize (default 2, euclidean),
 * per-token ones not.
 */
#include "server/server_internal.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "structured/toolcall.h"

/* malloc'd tokens (exactly n of them, one tokenizer pass when the first
 * guess of one token per byte holds, which it does for SPM and BPE
 * vocabularies); count, or -1 (tokenizer refused the text) / -2 (no memory). */
int srv_tokenize_alloc(const el_model *m, const char *text, size_t len, int flags, int32_t **out) {
    *out = NULL;
    if (len > (size_t)INT_MAX / 2 - 16) return -1;
    int cap = (int)len + 16;
    for (int attempt = 0; attempt < 3; attempt++) {
        int32_t *t = malloc((size_t)cap * sizeof *t);
        if (!t) return -2;
        int n = el_tokenize(m, text, len, t, cap, flags);
        if (n < 0) {
            free(t);
            return -1;
        }
        if (n <= cap) {
            /* the first guess is sized by bytes: give back what the tokens do not use */
            int32_t *fit = n > 0 && n < cap ? realloc(t, (size_t)n * sizeof *t) : NULL;
            *out = fit ? fit : t;
            return n;
        }
        free(t);
        cap = n;
    }
    return -1;
}

enum MHD_Result srv_reject(el_server *s, struct MHD_Connection *c, el_req *r, const el_api_error *e,
                           const char *h1, const char *v1) {
    el_metrics_request(&s->metrics, EL_REQ_REJECTED);
    srv_req_unref(r);
    return srv_send_api_error_h(c, e, h1, v1);
}

/* Does a prompt of n tokens fit the context with max_tokens (<= 0: at least one token) to generate? */
static bool prompt_fits(const el_server *s, int n, int max_tokens) {
    return max_tokens > 0 ? (long long)n + max_tokens <= s->n_ctx : n < s->n_ctx;
}

/* --ctx-overflow truncate, chat requests: while the prompt does not fit, drop
 * the oldest whole turn after the leading system messages (a turn: from a
 * message up to the next user message; the last user message and what
 * follows it always stay) and tokenize again. r->prompt / the return value
 * are the last tokenization; r->n_dropped counts the messages dropped. If
 * nothing more can be dropped the prompt may still not fit: the context check
 * after this refuses it with the numbers. */
static int truncate_chat(el_server *s, el_req *r, int n, int max_tokens) {
    const el_api_request *a = &r->api;
    int keep = 0;
    while (keep < a->n_msgs && !strcmp(a->msgs[keep].role, "system")) keep++;
    int last_user = -1;
    for (int i = a->n_msgs - 1; i >= keep; i--)
        if (!strcmp(a->msgs[i].role, "user")) { last_user = i; break; }
    if (last_user <= keep) return n;
    el_chat_msg *v = malloc((size_t)a->n_msgs * sizeof *v);
    if (!v) return n;
    const int flags = EL_TOK_ADD_SPECIAL | (s->p.trust_chat_special ? EL_CHAT_TRUST_CONTENT : 0);
    int from = keep;
    while (!prompt_fits(s, n, max_tokens) && from < last_user) {
        int end = from + 1;
        while (end < last_user && strcmp(a->msgs[end].role, "user") != 0) end++;
        from = end;
        memcpy(v, a->msgs, (size_t)keep * sizeof *v);
        memcpy(v + keep, a->msgs + from, (size_t)(a->n_msgs - from) * sizeof *v);
        int32_t *toks = NULL;
        char why[400];
        int n2 = srv_chat_tokenize(s, v, keep + a->n_msgs - from, a->chat_tools, a->n_tools, a->chat_template_kwargs, flags,
                                   &toks, why, sizeof why);
        if (n2 <= 0) { free(toks); break; } /* rendered once already: only out of memory gets here */
        free(r->prompt);
        r->prompt = toks;
        n = n2;
        r->n_dropped = from - keep;
    }
    free(v);
    return n;
}

/* logit_bias's text keys into token entries, as llama-server does: each text
 * tokenized without special tokens, its bias added to every token of it (a
 * token met again, by id or by text, gets the sum: llama.cpp's bias sampler
 * adds each entry). 0, or -1 with e filled (400: no tokens; 500: memory). */
static int bias_texts(el_server *s, el_api_request *a, el_api_error *e) {
    for (int i = 0; i < a->n_logit_bias_text; i++) {
        const char *t = a->logit_bias_text[i];
        int32_t *toks = NULL;
        int n = srv_tokenize_alloc(s->model, t, strlen(t), 0, &toks);
        if (n <= 0) {
            free(toks);
            if (n == -2) el_api_set_error(e, 500, "server_error", NULL, NULL, "out of memory");
            else el_api_set_error(e, 400, "invalid_request_error", "logit_bias", "invalid_value",
                                  "logit_bias: text key %d has no tokens", i);
            return -1;
        }
        for (int j = 0; j < n; j++) {
            int k = 0;
            while (k < a->n_logit_bias && a->logit_bias_id[k] != toks[j]) k++;
            if (k == a->n_logit_bias) {
                int32_t *ids = realloc(a->logit_bias_id, (size_t)(k + 1) * sizeof *ids);
                if (ids) a->logit_bias_id = ids;
                float *b = realloc(a->logit_bias, (size_t)(k + 1) * sizeof *b);
                if (b) a->logit_bias = b;
                if (!ids || !b) {
                    free(toks);
                    el_api_set_error(e, 500, "server_error", NULL, NULL, "out of memory");
                    return -1;
                }
                a->logit_bias_id[k] = toks[j];
                a->logit_bias[k] = 0;
                a->n_logit_bias++;
            }
            a->logit_bias[k] += a->logit_bias_text_bias[i];
        }
        free(toks);
    }
    return 0;
}

/* The prompt is tokenized: the body, the message texts and the prompt (unless
 * echo needs it) are dropped and the body's bytes go back to the
 * budget, so a queued request holds only its tokens. logit_bias's text keys
 * become token ids, and its ids are checked against the vocabulary. 0, or -1
 * with e filled. */
static int prompt_done(el_server *s, conn_ctx *cc, el_req *r, el_api_error *e) {
    srv_budget_release(s, cc);
    el_api_request *a = &r->api;
    for (int i = 0; a->msgs && i < a->n_msgs; i++) {
        free((char *)a->msgs[i].content);
        a->msgs[i].content = NULL;
    }
    if (bias_texts(s, a, e)) return -1;
    const int nv = el_model_n_vocab(s->model);
    for (int i = 0; i < a->n_logit_bias; i++)
        if (a->logit_bias_id[i] >= nv) {
            el_api_set_error(e, 400, "invalid_request_error", "logit_bias", "invalid_value",
                             "logit_bias: token id %d is not in the vocabulary [0, %d)", (int)a->logit_bias_id[i], nv);
            return -1;
        }
    if (!a->echo) {
        free(a->prompt);
        a->prompt = NULL;
    }
    return 0;
}

/* The sampler a request asks for (el_sampling_default for what it cannot say). */
el_sampling srv_sampling_of(const el_api_request *a) {
    el_sampling sp = el_sampling_default();
    sp.temp = a->temperature;
    sp.top_k = a->top_k;
    sp.top_p = a->top_p;
    sp.min_p = a->min_p;
    sp.repeat_penalty = a->repeat_penalty;
    sp.presence_penalty = a->presence_penalty;
    sp.freq_penalty = a->frequency_penalty;
    sp.penalty_last_n = a->repeat_last_n;
    return sp;
}

/* The server-wide defaults (--temp, --seed, --n-predict) for what a request left out. */
void srv_apply_defaults(const el_server *s, el_api_request *a) {
    if (!a->has_temperature && s->p.has_temp) a->temperature = s->p.temp > 0 ? (s->p.temp > 2 ? 2 : s->p.temp) : 0;
    if (!a->has_seed && s->p.has_seed) {
        a->has_seed = true;
        a->seed = s->p.seed;
    }
    if (!a->has_max_tokens && s->p.n_predict != 0) a->max_tokens = s->p.n_predict;
    if (!a->has_cache_prompt && s->p.cache_prompt) a->cache_prompt = s->p.cache_prompt > 0;
}

/* A prompt of text pieces and token ids (/completion, embeddings inputs) as
 * tokens: text tokenized with control-token parsing (a BOS only before a
 * leading text piece), ids checked against the vocabulary. The texts are
 * freed as they are used. The count, or -1 with e filled (param names the
 * field in errors). */
static int parts_tokens(el_server *s, el_api_prompt_part *parts, int n_parts, const char *param, int32_t **out,
                        el_api_error *e) {
    const int nv = el_model_n_vocab(s->model);
    int32_t *toks = NULL;
    size_t n = 0, cap = 0;
    for (int i = 0; i < n_parts; i++) {
        int32_t *piece = NULL;
        int k = 1;
        if (parts[i].text) {
            const char *t = parts[i].text;
            k = srv_tokenize_alloc(s->model, t, strlen(t), (i == 0 ? EL_TOK_ADD_SPECIAL : 0) | EL_TOK_PARSE_SPECIAL, &piece);
            if (k < 0) {
                free(toks);
                if (k == -2) el_api_set_error(e, 500, "server_error", NULL, NULL, "out of memory tokenizing the prompt");
                else el_api_set_error(e, 400, "invalid_request_error", param, NULL, "%s[%d] could not be tokenized", param, i);
                return -1;
            }
        } else if (parts[i].tok >= nv) {
            free(toks);
            el_api_set_error(e, 400, "invalid_request_error", param, "invalid_value",
                             "%s: token id %d is not in the vocabulary [0, %d)", param, (int)parts[i].tok, nv);
            return -1;
        }
        if (n + (size_t)k > (size_t)INT_MAX / 2) {
            free(piece);
            free(toks);
            el_api_set_error(e, 400, "invalid_request_error", param, NULL, "the %s is too long", param);
            return -1;
        }
        if (n + (size_t)k > cap) {
            size_t nc = (n + (size_t)k) * 2;
            int32_t *g = realloc(toks, nc * sizeof *g);
            if (!g) {
                free(piece);
                free(toks);
                el_api_set_error(e, 500, "server_error", NULL, NULL, "out of memory");
                return -1;
            }
            toks = g;
            cap = nc;
        }
        if (parts[i].text) {
            if (k > 0) memcpy(toks + n, piece, (size_t)k * sizeof *piece);
        } else {
            toks[n] = parts[i].tok;
        }
        n += (size_t)k;
        free(piece);
        free(parts[i].text);
        parts[i].text = NULL;
    }
    *out = toks;
    return (int)n;
}

static int native_tokens(el_server *s, el_api_request *a, int32_t **out, el_api_error *e) {
    return parts_tokens(s, a->parts, a->n_parts, "prompt", out, e);
}

/* ignore_eos as llama-server means it: end-of-generation tokens are never
 * sampled (a logit bias of -1e30 each, over any bias the request gave them),
 * rather than sampled and passed over. 0, or -1 when out of memory. */
static int ban_eog(el_server *s, el_api_request *a) {
    const int nv = el_model_n_vocab(s->model);
    for (int32_t t = 0; t < nv; t++) {
        if (!el_token_is_eog(s->model, t)) continue;
        int k = 0;
        while (k < a->n_logit_bias && a->logit_bias_id[k] != t) k++;
        if (k == a->n_logit_bias) {
            int32_t *ids = realloc(a->logit_bias_id, (size_t)(k + 1) * sizeof *ids);
            if (ids) a->logit_bias_id = ids;
            float *b = realloc(a->logit_bias, (size_t)(k + 1) * sizeof *b);
            if (b) a->logit_bias = b;
            if (!ids || !b) return -1;
            a->logit_bias_id[k] = t;
            a->n_logit_bias++;
        }
        a->logit_bias[k] = -1e30f;
    }
    return 0;
}

/* Queues r (bound to its connection: client_gone watches it); 0, or -1 with *ret the answer (503, r released). */
static int queue(el_server *s, struct MHD_Connection *c, el_req *r, el_api_error *e, enum MHD_Result *ret) {
    srv_req_bind_conn(r, c);
    const char *rh = NULL, *rv = NULL;
    if (!srv_enqueue(s, r, e, &rh, &rv)) return 0;
    *ret = srv_reject(s, c, r, e, rh, rv);
    return -1;
}

/* Waits for queued non-streamed r on its connection's thread, watching the client. RS_DONE or RS_FAILED: the
 * caller answers from r; RS_CANCELLED: *ret is the answer already (MHD_NO: the client went away; 503). */
static req_state await(el_server *s, struct MHD_Connection *c, el_req *r, enum MHD_Result *ret) {
    bool gone = false;
    const req_state st = srv_wait_done(s, r, &gone);
    if (gone) {
        *ret = MHD_NO;
        return RS_CANCELLED;
    }
    if (st == RS_CANCELLED)
        *ret = srv_send_error(c, 503, "server_error", NULL, "cancelled", "the request was cancelled (the server is stopping)");
    return st;
}

/* A new request with its body parsed by its route's parser (api.h); NULL with *ret the answer (500 out of
 * memory, or the parser's error, counted rejected). */
/* Whether the prompt's last tokens (their text, special tokens' included) end in "<think>" and
 * whitespace: the template opened the reasoning (DeepSeek R1, Qwen3 thinking templates). */
static bool prompt_opens_think(const el_server *s, const el_req *r) {
    char tail[96], piece[64];
    size_t n = 0;
    for (int i = r->n_prompt > 4 ? r->n_prompt - 4 : 0; i < r->n_prompt; i++) {
        int l = el_token_to_piece(s->model, r->prompt[i], piece, (int)sizeof piece, true);
        if (l <= 0 || l > (int)sizeof piece) continue;
        if (n + (size_t)l > sizeof tail) n = 0; /* only the last pieces matter */
        memcpy(tail + n, piece, (size_t)l);
        n += (size_t)l;
    }
    while (n && (tail[n - 1] == ' ' || tail[n - 1] == '\n' || tail[n - 1] == '\r' || tail[n - 1] == '\t')) n--;
    return n >= 7 && !memcmp(tail + n - 7, "<think>", 7);
}

/* How a chat reply is split (server_stream.c "Tool calls and reasoning"): the reasoning format, the
 * special tokens' text kept for the parser, a stream held back whole or split on the fly. */
static void reply_mode(const el_server *s, el_req *r) {
    r->tf = s->tf;
    r->rf = r->api.reasoning_format >= 0 ? (el_reasoning_format)r->api.reasoning_format : s->rf;
    const bool reasons = r->rf != EL_REASONING_NONE;
    const bool channels = r->tf == EL_TF_GPT_OSS || r->tf == EL_TF_COMMAND_R; /* reasoning in the format's markers */
    r->keep_special = r->tf != EL_TF_NONE && (r->tools_parse || (reasons && channels));
    r->hold_all = r->api.stream && (r->tools_parse || (reasons && channels));
    r->think_live = r->api.stream && !r->hold_all && reasons;
    r->think_open = reasons && prompt_opens_think(s, r);
    el_think_stream_init(&r->ts, r->think_open);
}

static el_req *parsed_request(el_server *s, struct MHD_Connection *c, conn_ctx *cc, el_api_kind kind,
                              enum MHD_Result *ret) {
    el_api_error e;
    memset(&e, 0, sizeof e);
    el_req *r = srv_req_new(s);
    if (!r) {
        *ret = srv_send_error(c, 500, "server_error", NULL, NULL, "out of memory");
        return NULL;
    }
    const char *body = cc->body.p ? cc->body.p : "";
    if (kind == EL_API_NATIVE ? el_api_parse_native(body, cc->body.len, &r->api, &e)
                              : el_api_parse(kind, body, cc->body.len, &r->api, &e)) {
        *ret = srv_reject(s, c, r, &e, NULL, NULL);
        return NULL;
    }
    r->api_parsed = true;
    return r;
}

/* A generation request while there is no local model (still loading, or
 * el_server_set_local_unavailable): validated, then routed with the local
 * route unavailable — to the cloud where the policy allows, else declined. */
enum MHD_Result srv_h_generate_unready(el_server *s, struct MHD_Connection *c, conn_ctx *cc, el_api_kind kind) {
    enum MHD_Result ret;
    el_req *r = parsed_request(s, c, cc, kind, &ret);
    if (!r) return ret;
    /* no tokenizer here: about 4 bytes of text per token */
    if (srv_route_request(s, c, cc, r, kind, (int)(cc->body.len / 4) + 1, &ret)) return ret;
    srv_req_unref(r); /* unreachable: without a local model the router never says local */
    return srv_send_error(c, 503, "server_error", NULL, "loading", "the model is still loading");
}

/* A generation request of route kind with a local model (the file comment says how it goes). */
static enum MHD_Result h_generate(el_server *s, struct MHD_Connection *c, conn_ctx *cc, el_api_kind kind) {
    enum MHD_Result ret = MHD_NO;
    el_req *r = parsed_request(s, c, cc, kind, &ret);
    if (!r) return ret;
    el_api_error e;
    memset(&e, 0, sizeof e);
    srv_apply_defaults(s, &r->api);
    if (kind == EL_API_NATIVE) {
        const int nv = el_model_n_vocab(s->model);
        if (r->api.id_slot >= s->n_slots) {
            el_api_set_error(&e, 400, "invalid_request_error", "id_slot", "invalid_value",
                             "id_slot %d does not exist (the server has slots 0..%d)", r->api.id_slot, s->n_slots - 1);
            return srv_reject(s, c, r, &e, NULL, NULL);
        }
        if (r->api.n_probs > nv || r->api.n_probs > EL_API_MAX_N_PROBS) {
            el_api_set_error(&e, 400, "invalid_request_error", "n_probs", "invalid_value",
                             "n_probs %d is beyond %s (%d)", r->api.n_probs,
                             r->api.n_probs > nv ? "the vocabulary" : "what edgellm reports per token",
                             r->api.n_probs > nv ? nv : EL_API_MAX_N_PROBS);
            return srv_reject(s, c, r, &e, NULL, NULL);
        }
        r->api.logprobs = r->api.n_probs > 0;
        r->api.top_logprobs = r->api.n_probs;
    }

    /* prompt tokens */
    int n = 0;
    if (kind == EL_API_CHAT) {
        if (!srv_has_chat(s)) {
            el_api_set_error(&e, 500, "server_error", NULL, "no_chat_template",
                             "the model has no chat template edgellm recognises; restart the server with "
                             "--chat-template NAME, or use /v1/completions");
            return srv_reject(s, c, r, &e, NULL, NULL);
        }
        if (r->api.n_tools > 0 && s->tf == EL_TF_NONE && !el_chat_family_has_tools(s->fam)) {
            el_api_set_error(&e, 400, "invalid_request_error", "tools", "unsupported_value",
                             "the %s chat template has no tool-call convention (tools work with a Jinja template "
                             "of a known tool-call format, or the built-in chatml, llama3 and gemma)",
                             el_chat_family_name(s->fam));
            return srv_reject(s, c, r, &e, NULL, NULL);
        }
        /* only the template's markers become special tokens; message content (tool definitions,
         * calls and results included) is plain text */
        char why[400] = "";
        n = srv_chat_tokenize(s, r->api.msgs, r->api.n_msgs, r->api.chat_tools, r->api.n_tools,
                              r->api.chat_template_kwargs, EL_TOK_ADD_SPECIAL | (s->p.trust_chat_special ? EL_CHAT_TRUST_CONTENT : 0), &r->prompt,
                              why, sizeof why);
        if (n == -1) {
            el_api_set_error(&e, 400, "invalid_request_error", "messages", NULL, "%s", why);
            return srv_reject(s, c, r, &e, NULL, NULL);
        }
        if (n == -3) n = -1;
        if (n > 0 && s->p.ctx_overflow_truncate && !prompt_fits(s, n, r->api.max_tokens))
            n = truncate_chat(s, r, n, r->api.max_tokens);
    } else if (kind == EL_API_NATIVE) {
        n = native_tokens(s, &r->api, &r->prompt, &e);
        if (n < 0) return srv_reject(s, c, r, &e, NULL, NULL);
    } else {
        const char *p = r->api.prompt ? r->api.prompt : "";
        n = srv_tokenize_alloc(s->model, p, strlen(p), EL_TOK_ADD_SPECIAL, &r->prompt);
    }
    if (n < 0) {
        if (n == -2) el_api_set_error(&e, 500, "server_error", NULL, NULL, "out of memory tokenizing the prompt");
        else el_api_set_error(&e, 400, "invalid_request_error", kind == EL_API_CHAT ? "messages" : "prompt", NULL,
                              "the prompt could not be tokenized");
        return srv_reject(s, c, r, &e, NULL, NULL);
    }
    if (n == 0) {
        el_api_set_error(&e, 400, "invalid_request_error", kind == EL_API_CHAT ? "messages" : "prompt", NULL,
                         "the prompt is empty");
        return srv_reject(s, c, r, &e, NULL, NULL);
    }
    if (srv_route_request(s, c, cc, r, kind, n, &ret)) return ret; /* declined or cloud: answered */
    if (r->api.local_unsupported) { /* a constraint local generation would silently not honour */
        el_api_set_error(&e, 400, "invalid_request_error", r->api.local_unsupported, "unsupported_value",
                         "'%s' is not supported by edgellm (no tool calls); "
                         "the reply would not follow it", r->api.local_unsupported);
        return srv_reject(s, c, r, &e, NULL, NULL);
    }
    {   /* LoRA: the request's adapters (or the defaults now), checked against the registry */
        char lmsg[200];
        if (el_lora_reg_scales(s->lora, r->api.has_lora, r->api.lora_id, r->api.lora_scale, r->api.n_lora,
                               r->lora_scale, lmsg, sizeof lmsg)) {
            el_api_set_error(&e, 400, "invalid_request_error", "lora", "invalid_value", "%s", lmsg);
            return srv_reject(s, c, r, &e, NULL, NULL);
        }
        const uint64_t need = el_lora_reg_need(s->lora, r->lora_scale), budget = s->lora ? el_lora_reg_budget(s->lora) : 0;
        if (need > budget) { /* never servable: not a failure of the server's (was a 500 from the slot) */
            el_api_set_error(&e, 400, "invalid_request_error", "lora", "invalid_value",
                             "the request's LoRA adapters need %llu bytes together, more than --lora-budget %llu",
                             (unsigned long long)need, (unsigned long long)budget);
            return srv_reject(s, c, r, &e, NULL, NULL);
        }
        char lfp[32];
        el_lora_reg_fingerprint(s->lora, r->lora_scale, lfp, sizeof lfp);
        if (lfp[0]) snprintf(r->fp, sizeof r->fp, "%s%s", s->fingerprint, lfp);
    }
    /* a final assistant message is continued (the prefill); otherwise the generation prompt is always
     * rendered, so what would ask for something else is refused rather than ignored */
    if ((r->api.continue_final || r->api.no_generation_prompt) && !srv_chat_is_prefill(r->api.msgs, r->api.n_msgs)) {
        el_api_set_error(&e, 400, "invalid_request_error",
                         r->api.continue_final ? "continue_final_message" : "add_generation_prompt", "unsupported_value",
                         r->api.continue_final
                             ? "continue_final_message needs an assistant message without tool calls last"
                             : "add_generation_prompt false is supported only to continue a final assistant message "
                               "(see /apply-template)");
        return srv_reject(s, c, r, &e, NULL, NULL);
    }
    r->n_prompt = n;
    if (prompt_done(s, cc, r, &e)) return srv_reject(s, c, r, &e, NULL, NULL);
    if (r->api.ignore_eos && ban_eog(s, &r->api)) {
        el_api_set_error(&e, 500, "server_error", NULL, NULL, "out of memory");
        return srv_reject(s, c, r, &e, NULL, NULL);
    }

    /* context */
    int max_tokens = r->api.max_tokens;
    if (max_tokens > 0 && (long long)n + max_tokens > s->n_ctx) {
        /* type: llama-server's exceed_context_size_error; code: OpenAI's context_length_exceeded */
        el_api_set_error(&e, 400, "exceed_context_size_error", kind == EL_API_NATIVE ? "n_predict" : "max_tokens",
                         "context_length_exceeded",
                         "prompt (%d tokens%s) + max_tokens (%d) = %lld exceeds the available context size of %d tokens", n,
                         r->n_dropped ? ", the system messages and the last user turn alone" : "", max_tokens,
                         (long long)n + max_tokens, s->n_ctx);
        e.n_prompt_tokens = n;
        e.n_ctx = s->n_ctx;
        return srv_reject(s, c, r, &e, NULL, NULL);
    }
    if (max_tokens <= 0) {
        if (n >= s->n_ctx) {
            el_api_set_error(&e, 400, "exceed_context_size_error", kind == EL_API_CHAT ? "messages" : "prompt",
                             "context_length_exceeded",
                             "prompt (%d tokens%s) leaves no room to generate in the context of %d tokens", n,
                             r->n_dropped ? ", the system messages and the last user turn alone" : "", s->n_ctx);
            e.n_prompt_tokens = n;
            e.n_ctx = s->n_ctx;
            return srv_reject(s, c, r, &e, NULL, NULL);
        }
        max_tokens = s->n_ctx - n;
    }
    if (s->thermal && el_thermal_get(s->thermal).level == EL_THERMAL_DERATED) { /* derated: shorter answers */
        const int cap = el_router_policy(s->router)->max_tokens_derated;
        if (max_tokens > cap) {
            max_tokens = cap;
            size_t dl = strlen(r->route.detail);
            snprintf(r->route.detail + dl, sizeof r->route.detail - dl, "; thermal derating caps the output at %d tokens", cap);
        }
    }

    /* generation parameters: OpenAI semantics (no top-k / min-p) for the
     * OpenAI routes, llama-server's sampler fields for /completion */
    el_generate_params *gp = &r->gp;
    gp->max_tokens = max_tokens;
    gp->ignore_eos = r->api.ignore_eos;
    gp->stop = r->api.n_stop > 0 ? (const char *const *)r->api.stop : NULL;
    gp->n_top_logprobs = r->api.logprobs ? r->api.top_logprobs : 0;
    gp->sampling = srv_sampling_of(&r->api);
    /* -1 is the context size (el_generate does the same; set here so generation_settings shows it) */
    if (kind == EL_API_NATIVE && r->api.repeat_last_n < 0) gp->sampling.penalty_last_n = s->n_ctx;
    gp->sampling.n_logit_bias = r->api.n_logit_bias;
    gp->sampling.logit_bias_id = r->api.logit_bias_id;
    gp->sampling.logit_bias = r->api.logit_bias;
    if (r->api.has_seed) gp->sampling.seed = r->api.seed;
    else randombytes_buf(&gp->sampling.seed, sizeof gp->sampling.seed);
    gp->spec = s->p.spec.mode ? &s->p.spec : NULL; /* same output, fewer forward passes where drafts hold */
    if (kind == EL_API_CHAT && r->api.tool_choice != EL_TOOL_CHOICE_NONE) { /* tools: api.c left grammar NULL */
        r->tools_parse = true;
        el_error ge = {0};
        /* the template's format drives the call syntax when it has one; its grammar is the built-in
         * family's that writes the same syntax (hermes: chatml's, llama3: llama3's) */
        el_chat_family gf = s->tf != EL_TF_NONE ? el_tool_format_grammar_family(s->tf) : s->fam;
        if (gf == EL_CHAT_UNKNOWN && r->api.tool_choice != EL_TOOL_CHOICE_AUTO) {
            el_api_set_error(&e, 400, "invalid_request_error", "tool_choice", "unsupported_value",
                             "tool_choice \"required\" or a named function needs a grammar for the template's "
                             "tool-call format (%s), which edgellm does not have (only hermes and llama3); "
                             "use \"auto\"", el_tool_format_name(s->tf));
            return srv_reject(s, c, r, &e, NULL, NULL);
        }
        if (gf == EL_CHAT_UNKNOWN) /* auto: the template asks for the format; the reply is parsed, not constrained */
            ;
        else if (r->api.tool_choice == EL_TOOL_CHOICE_AUTO) /* free text until the family's trigger, then the call */
            r->api.grammar = el_toolcall_grammar_lazy(gf, r->api.tools, r->api.n_tools, r->api.parallel_tool_calls,
                                                      &gp->grammar_triggers, &ge);
        else /* required / named: the call is grammar-constrained from the first token */
            r->api.grammar = el_toolcall_grammar(gf, r->api.tools, r->api.n_tools,
                                                 r->api.tool_choice == EL_TOOL_CHOICE_NAMED ? r->api.tool_named : -1,
                                                 /* a named function: one call of it, as OpenAI answers */
                                                 r->api.parallel_tool_calls && r->api.tool_choice != EL_TOOL_CHOICE_NAMED,
                                                 &ge);
        if (!r->api.grammar && gf != EL_CHAT_UNKNOWN) {
            if (ge.code == EL_ERR_NOMEM) el_api_set_error(&e, 500, "server_error", NULL, NULL, "out of memory");
            else el_api_set_error(&e, 400, "invalid_request_error", "tools", "invalid_value", "tools: %s", ge.msg);
            return srv_reject(s, c, r, &e, NULL, NULL);
        }
        if (r->api.grammar) gp->grammar_flags |= EL_GRAMMAR_END_EARLY; /* a complete call ends the reply */
    }
    if (kind == EL_API_CHAT) reply_mode(s, r);
    gp->grammar = r->api.grammar; /* response_format / grammar / json_schema / tool calls (api.c compiled it) */

    srv_rand_id(r->id, sizeof r->id, kind == EL_API_CHAT ? "chatcmpl-" : "cmpl-");
    if (srv_reply_begin(r, &e)) return srv_reject(s, c, r, &e, NULL, NULL);

    if (queue(s, c, r, &e, &ret)) return ret;
    if (r->api.stream) return srv_stream_respond(c, r);

    /* non-stream: wait here (this connection's own thread), watching the client */
    const req_state st = await(s, c, r, &ret);
    if (st == RS_DONE) {
        el_cloud_canary_local(r->canary, true, r->text.p, r->text.len, (now_s() - r->t_arrival) * 1000.0);
        r->canary = NULL;
        char *json = srv_reply_json(r);
        ret = json ? srv_send_routed(c, MHD_HTTP_OK, json, &r->route, NULL, NULL)
                   : srv_send_error(c, 500, "server_error", NULL, NULL, "out of memory");
    } else if (st == RS_FAILED) { /* a typed local failure, with its route: never retried in the cloud */
        el_api_error fe;
        memset(&fe, 0, sizeof fe);
        if (r->lora_busy) /* nothing ran: running requests hold the LoRA budget; a retry after them fits */
            el_api_set_error(&fe, 503, "server_error", "lora", "lora_budget_busy", "%s", r->err.msg);
        else
            el_api_set_error(&fe, 500, "server_error", NULL, "generation_failed", "generation failed: %s: %s",
                             el_status_name(r->err.code), r->oom ? "out of memory" : r->err.msg);
        ret = srv_send_routed(c, fe.status, el_route_inject(el_api_error_json(&fe), &r->route), &r->route,
                              r->lora_busy ? MHD_HTTP_HEADER_RETRY_AFTER : NULL, r->lora_busy ? "1" : NULL);
    }
    srv_req_unref(r);
    return ret;
}

/* POST /v1/chat/completions, /v1/completions, /completion (each with its other paths). */
enum MHD_Result srv_h_chat(el_server *s, struct MHD_Connection *c, conn_ctx *cc) {
    return h_generate(s, c, cc, EL_API_CHAT);
}

enum MHD_Result srv_h_completions(el_server *s, struct MHD_Connection *c, conn_ctx *cc) {
    return h_generate(s, c, cc, EL_API_COMPLETION);
}

enum MHD_Result srv_h_native(el_server *s, struct MHD_Connection *c, conn_ctx *cc) {
    return h_generate(s, c, cc, EL_API_NATIVE);
}

/* ---- embeddings --------------------------------------------------------- */

#define SRV_EMBD_MAX_FLOATS (16u << 20) /* floats one request's vectors may take (64 MiB) */

/* POST /v1/embeddings, /embeddings, /embedding (the file comment says how). */
enum MHD_Result srv_h_embeddings(el_server *s, struct MHD_Connection *c, conn_ctx *cc) {
    if (!s->p.embeddings)
        return srv_send_error(c, 501, "not_supported_error", NULL, "not_supported",
                              "This server does not support embeddings. Start it with `--embeddings`");
    const bool v1 = !strcmp(cc->rt->path, "/v1/embeddings");
    if (v1 && s->pooling == EL_POOLING_NONE)
        return srv_send_error(c, 400, "invalid_request_error", NULL, "invalid_value",
                              "Pooling type 'none' is not OAI compatible. Please use a different pooling type "
                              "(restart with --pooling mean|cls|last, or use /embeddings)");
    el_api_error e;
    memset(&e, 0, sizeof e);
    el_api_embd_request q;
    if (el_api_parse_embeddings(cc->body.p ? cc->body.p : "", cc->body.len, &q, &e)) {
        srv_budget_release(s, cc);
        el_metrics_request(&s->metrics, EL_REQ_REJECTED);
        return srv_send_api_error(c, &e);
    }
    el_req *r = srv_req_new(s);
    if (!r) {
        el_api_embd_request_free(&q);
        srv_budget_release(s, cc);
        return srv_send_error(c, 500, "server_error", NULL, NULL, "out of memory");
    }
    r->api.id_slot = -1; /* any slot */
    r->embd_norm = q.normalize;
    r->embd = true;
    const bool oai = v1 && q.oai;
    const int k = q.n_inputs, E = s->n_embd;
    r->embd_toks = calloc((size_t)k, sizeof *r->embd_toks);
    r->embd_vec = calloc((size_t)k, sizeof *r->embd_vec);
    r->embd_n = calloc((size_t)k, sizeof *r->embd_n);
    r->embd_rows = calloc((size_t)k, sizeof *r->embd_rows);
    r->embd_k = k;
    if (!r->embd_toks || !r->embd_vec || !r->embd_n || !r->embd_rows) {
        el_api_set_error(&e, 500, "server_error", NULL, NULL, "out of memory");
        goto bad;
    }
    if (q.dimensions && q.dimensions != E) {
        el_api_set_error(&e, 400, "invalid_request_error", "dimensions", "invalid_value",
                         "dimensions %d: this model's embeddings have %d (they cannot be shortened)", q.dimensions, E);
        goto bad;
    }
    const char *param = q.oai ? "input" : "content";
    size_t floats = 0;
    int total = 0;
    for (int i = 0; i < k; i++) {
        int n = parts_tokens(s, q.inputs[i].parts, q.inputs[i].n_parts, param, &r->embd_toks[i], &e);
        if (n < 0) goto bad;
        if (n == 0) {
            el_api_set_error(&e, 400, "invalid_request_error", param, "invalid_value", "%s[%d] is empty (no tokens)",
                             param, i);
            goto bad;
        }
        if (n > s->n_ctx) {
            el_api_set_error(&e, 400, "invalid_request_error", param, "context_length_exceeded",
                             "%s[%d] (%d tokens) is too large to process: the context is %d tokens", param, i, n,
                             s->n_ctx);
            e.n_prompt_tokens = n;
            e.n_ctx = s->n_ctx;
            goto bad;
        }
        r->embd_n[i] = n;
        r->embd_rows[i] = s->pooling == EL_POOLING_NONE ? n : 1;
        floats += (size_t)r->embd_rows[i] * (size_t)E;
        total += n;
        if (floats > SRV_EMBD_MAX_FLOATS) {
            el_api_set_error(&e, 400, "invalid_request_error", param, "invalid_value",
                             "the embeddings of this request would take more than %u floats; send fewer tokens "
                             "(or use a pooling other than none)", (unsigned)SRV_EMBD_MAX_FLOATS);
            goto bad;
        }
    }
    for (int i = 0; i < k; i++)
        if (!(r->embd_vec[i] = malloc(sizeof(float) * (size_t)r->embd_rows[i] * (size_t)E))) {
            el_api_set_error(&e, 500, "server_error", NULL, NULL, "out of memory");
            goto bad;
        }
    srv_budget_release(s, cc);
    srv_rand_id(r->id, sizeof r->id, "embd-");
    enum MHD_Result ret = MHD_NO;
    if (queue(s, c, r, &e, &ret)) {
        el_api_embd_request_free(&q);
        return ret;
    }
    const req_state st = await(s, c, r, &ret);
    if (st == RS_DONE) {
        char *json = oai ? el_api_embeddings_response(q.model ? q.model : s->model_id, (const float *const *)r->embd_vec,
                                                      k, E, q.base64, total)
                         : el_api_embeddings_native((const float *const *)r->embd_vec, r->embd_rows, k, E);
        ret = json ? srv_send_json(c, MHD_HTTP_OK, json) : srv_send_error(c, 500, "server_error", NULL, NULL, "out of memory");
    } else if (st == RS_FAILED) {
        ret = srv_send_error(c, 500, "server_error", NULL, "embedding_failed", "embedding failed: %s: %s",
                             el_status_name(r->err.code), r->err.msg);
    }
    el_api_embd_request_free(&q);
    srv_req_unref(r);
    return ret;
bad:
    el_api_embd_request_free(&q);
    srv_budget_release(s, cc);
    return srv_reject(s, c, r, &e, NULL, NULL);
}
