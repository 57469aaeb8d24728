/*
 * server_stream.c — what a request's generation produces: its text, its
 * log-probabilities and tool calls, as the SSE frames of a stream or the
 * whole reply of a non-streamed request.
 *
 * Text. Generated text travels with its length, never as a C string: a
 * <0x00> byte token is a NUL byte in the text and \u0000 in the JSON.
 * el_generate already holds back a UTF-8 tail that can still complete (its
 * detokenizer, util/utf8.h), so a piece ends on a character boundary except
 * for bytes that can never form one and the last call's leftover; each piece
 * is sanitised once (el_utf8_sanitize: one U+FFFD per maximal ill-formed
 * subpart, so a reply cut mid-character ends in one U+FFFD) and then either
 * framed (stream) or appended to the reply (non-stream), so the non-streamed
 * text is the concatenation of the stream's deltas. With logprobs each
 * token's log-probabilities (the model's log-softmax, el_token_info) are
 * recorded (lp_record) and rendered in OpenAI's chat or legacy-completions
 * shape, per chunk when streaming; /completion (EL_API_NATIVE) has its own
 * reply shape, built by native_json.
 *
 * Stream shape. A chat stream opens with the role alone (content null, put
 * in r->out before the request is queued: srv_reply_begin); after it every
 * chunk carries text (a token whose text is still held back waits, its
 * logprobs with it; what remains rides on the finish chunk). Errors inside a
 * stream take llama-server's shape ({"error":{"code": status, "message",
 * "type"}}); /v1 streams end in [DONE], /completion streams with their final
 * object. The slot appends frames to r->out under srv->mu (push_frame); the
 * connection's thread hands them to MHD (stream_read), blocking on the
 * request's condition variable in SRV_POLL_MS steps, probing a half-closed
 * client with an SSE comment and keeping an idle stream alive with one every
 * SRV_KEEPALIVE_MS; a failed write makes MHD destroy the response, whose
 * free callback (stream_free) cancels the request.
 *
 * Tool calls and reasoning. A chat request with tools (its prompt rendered
 * by server_generate.c) whose tool_choice is not "none" has its finished
 * reply parsed (parse_reply): in the Jinja template's tool format when it
 * has one (r->tf, structured/toolformat.h el_tool_format_parse), else the
 * <think> split and the built-in family's calls (structured/toolcall.h);
 * calls naming a tool not offered go back into the content. Then
 * message.tool_calls (content null when nothing else was said) with
 * finish_reason "tool_calls" ("length" when cut short), and
 * message.reasoning_content under reasoning_format deepseek / auto. With
 * r->keep_special a special token's text (a format's marker, which the
 * token's piece leaves out) joins the parser's text in srv_on_token; the
 * content sent is what the parser leaves. A stream with tools (or with
 * gpt-oss / Command R reasoning channels: r->hold_all) holds the reply back
 * (emit) until the end (srv_stream_tail → tool_frames), then sends the
 * reasoning, the content, and per call one delta with index, id, type and
 * name (arguments "") and the arguments in fragments — OpenAI's shape. Any
 * other chat stream under deepseek / auto splits <think> live
 * (r->think_live: structured/think_stream.h, bounded; chunks of
 * delta.reasoning_content and delta.content, the logprobs of the tokens
 * since the last chunk on the first one out). A non-streamed reply without
 * tools is split only when it holds a think marker (or the prompt opened
 * one); otherwise its text goes out as it came.
 */
#include "server/server_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "structured/toolcall.h"
#include "util/utf8.h"

#define SRV_KEEPALIVE_MS 10000           /* an idle stream gets an SSE comment this often */
#define SRV_KEEPALIVE ": keep-alive\n\n" /* the comment (also the probe of a half-closed client) */

/* ---- frames and text ---------------------------------------------------- */

/* OpenAI's finish_reason of a generation that ended in f. */
static const char *finish_name(el_finish f) { return f == EL_DONE_LENGTH ? "length" : "stop"; }

static char *make_chunk(const el_req *r, const char *delta, size_t len, bool first, const char *finish,
                        const el_api_usage *usage, const char *logprobs) {
    const el_server *s = r->srv;
    if (r->api.kind == EL_API_CHAT)
        return el_api_chat_chunk(r->id, s->model_id, r->created, req_fp(s, r), delta, len, first, finish, usage,
                                 logprobs);
    return el_api_completion_chunk(r->id, s->model_id, r->created, req_fp(s, r), delta, len, finish, usage, logprobs);
}

static bool frame_json(el_buf *b, char *json) {
    if (!json) return false;
    bool ok = el_buf_str(b, "data: ") && el_buf_str(b, json) && el_buf_str(b, "\n\n");
    free(json);
    return ok;
}

/* The "logprobs" JSON of records [from, to) (token texts from the vocabulary),
 * advancing r->lp_offset; malloc'd, NULL on OOM. */
static char *lps_json(el_req *r, int from, int to) {
    const el_model *m = r->srv->model;
    const int n = to - from, w = r->api.top_logprobs + 1; /* slots per token: itself + its top */
    const size_t cells = (size_t)(n > 0 ? n : 1) * (size_t)w;
    el_api_token_lp *t = calloc((size_t)(n > 0 ? n : 1), sizeof *t);
    el_api_top_lp *top = calloc(cells, sizeof *top);
    size_t *off = calloc(cells, sizeof *off), *len = calloc(cells, sizeof *len);
    el_buf txt = {0};
    char *json = NULL;
    bool ok = t && top && off && len;
    /* pass 1: every piece into one buffer (offsets); pass 2: pointers into it */
    for (int i = 0; ok && i < n; i++) {
        const lp_rec *rec = &r->lps[from + i];
        int nt = rec->n_top < w - 1 ? rec->n_top : w - 1;
        for (int k = -1; ok && k < nt; k++) {
            char piece[256];
            int l = el_token_to_piece(m, k < 0 ? rec->id : rec->top_id[k], piece, (int)sizeof piece, false);
            if (l < 0 || l > (int)sizeof piece) l = 0;
            size_t c = (size_t)i * (size_t)w + (size_t)(k + 1);
            off[c] = txt.len;
            len[c] = (size_t)l;
            ok = el_buf_append(&txt, piece, (size_t)l);
        }
    }
    if (ok) ok = el_buf_append(&txt, "", 0);
    for (int i = 0; ok && i < n; i++) {
        const lp_rec *rec = &r->lps[from + i];
        int nt = rec->n_top < w - 1 ? rec->n_top : w - 1;
        size_t c = (size_t)i * (size_t)w;
        t[i].text = txt.p + off[c];
        t[i].len = len[c];
        t[i].logprob = rec->lp;
        t[i].n_top = nt;
        t[i].top = top + c;
        t[i].id = rec->id;
        for (int k = 0; k < nt; k++) {
            top[c + (size_t)k].id = rec->top_id[k];
            top[c + (size_t)k].text = txt.p + off[c + 1 + (size_t)k];
            top[c + (size_t)k].len = len[c + 1 + (size_t)k];
            top[c + (size_t)k].logprob = rec->top_lp[k];
        }
    }
    if (ok) json = r->api.kind == EL_API_NATIVE ? el_api_native_probs_json(t, n)
                                                : el_api_logprobs_json(r->api.kind, t, n, &r->lp_offset);
    free(t);
    free(top);
    free(off);
    free(len);
    el_buf_free(&txt);
    return json;
}

/* Records the token's log-probabilities (logprobs requested). */
static bool lp_record(el_req *r, const el_token_info *t) {
    if (r->n_lps == r->cap_lps) {
        int cap = r->cap_lps ? r->cap_lps * 2 : 32;
        lp_rec *p = realloc(r->lps, (size_t)cap * sizeof *p);
        if (!p) return false;
        r->lps = p;
        r->cap_lps = cap;
    }
    lp_rec *rec = &r->lps[r->n_lps++];
    rec->id = t->id;
    rec->lp = t->logprob;
    rec->n_top = t->n_top < EL_API_MAX_N_PROBS ? t->n_top : EL_API_MAX_N_PROBS;
    for (int k = 0; k < rec->n_top; k++) {
        rec->top_id[k] = t->top_id[k];
        rec->top_lp[k] = t->top_logprob[k];
    }
    return true;
}

/* The stop string that ended generation: the earliest one in the generated
 * pieces ("" when none is found). */
static void stopping_word(const el_req *r, char *out, size_t cap) {
    out[0] = 0;
    if (r->stats.finish != EL_DONE_STOP || r->api.n_stop == 0) return;
    el_buf raw = {0};
    char piece[256];
    for (int i = 0; i < r->n_ids; i++) {
        int l = el_token_to_piece(r->srv->model, r->ids[i], piece, (int)sizeof piece, false);
        if (l > 0 && l <= (int)sizeof piece && !el_buf_append(&raw, piece, (size_t)l)) break;
    }
    if (!el_buf_append(&raw, "", 0)) { el_buf_free(&raw); return; }
    const char *best = NULL, *at = NULL;
    for (int k = 0; k < r->api.n_stop; k++) {
        const char *p = strstr(raw.p, r->api.stop[k]);
        if (p && (!at || p < at)) { at = p; best = r->api.stop[k]; }
    }
    if (best) snprintf(out, cap, "%s", best);
    el_buf_free(&raw);
}

/* One /completion JSON: a stream chunk (text, the ids and probabilities since
 * the last chunk) or, final, the whole result (non-stream: all the text, ids
 * when return_tokens, every probability). malloc'd, NULL on OOM. */
static char *native_json(el_req *r, const char *text, size_t len, bool final) {
    el_server *s = r->srv;
    const el_api_request *a = &r->api;
    el_api_native_result res;
    memset(&res, 0, sizeof res);
    res.content = text;
    res.len = len;
    res.stop = final;
    res.model = s->model_id;
    res.id_slot = r->slot_idx;
    res.n_prompt = r->n_prompt;
    res.n_predicted = final ? r->stats.n_generated : r->n_ids;
    int from = a->stream ? r->ids_sent : 0;
    if (a->stream || a->return_tokens) {
        res.tokens = r->ids + from;
        res.n_tokens = r->n_ids - from;
    }
    r->ids_sent = r->n_ids;
    char *probs = NULL, *settings = NULL, word[300];
    el_buf prompt = {0};
    bool ok = true;
    if (a->n_probs > 0) {
        int lf = a->stream ? r->lps_sent : 0;
        ok = (probs = lps_json(r, lf, r->n_lps)) != NULL;
        r->lps_sent = r->n_lps;
        res.probs = probs;
    }
    if (ok && final) {
        el_finish f = r->stats.finish;
        res.stop_type = f == EL_DONE_EOS ? "eos" : f == EL_DONE_LENGTH ? "limit" : f == EL_DONE_STOP ? "word" : "none";
        stopping_word(r, word, sizeof word);
        res.stopping_word = word;
        res.truncated = f == EL_DONE_LENGTH && r->stats.n_prompt + r->stats.n_generated >= s->n_ctx;
        res.prompt_ms = r->stats.prefill_ms;
        res.predicted_ms = r->stats.decode_ms;
        res.n_prompt = r->stats.n_prompt ? r->stats.n_prompt : r->n_prompt;
        res.n_cache_reused = r->n_cache_reused;
        res.n_cached = r->n_cache_after;
        cJSON *sj = srv_settings_cjson(s, a, &r->gp);
        settings = sj ? cJSON_PrintUnformatted(sj) : NULL;
        cJSON_Delete(sj);
        ok = settings != NULL;
        res.settings = settings;
        char piece[256];
        for (int i = 0; ok && i < r->n_prompt; i++) {
            int l = el_token_to_piece(s->model, r->prompt[i], piece, (int)sizeof piece, true);
            if (l > 0 && l <= (int)sizeof piece) ok = el_buf_append(&prompt, piece, (size_t)l);
        }
        res.prompt = prompt.p ? prompt.p : "";
        res.prompt_len = prompt.len;
    }
    char *json = ok ? el_api_native_response(&res, a->resp_fields, a->n_resp_fields) : NULL;
    free(probs);
    free(settings);
    el_buf_free(&prompt);
    return json;
}

/* json with llama-server's "timings" member when the request asked timings_per_token (the final
 * chunks and whole replies carry it: the figures are whole-request ones, known at the end). json is
 * taken; NULL on OOM. */
static char *with_timings(const el_req *r, char *json) {
    if (!json || !r->api.timings_per_token) return json;
    el_api_native_result res;
    memset(&res, 0, sizeof res);
    res.n_prompt = r->stats.n_prompt ? r->stats.n_prompt : r->n_prompt;
    res.n_cache_reused = r->n_cache_reused;
    res.n_predicted = r->stats.n_generated;
    res.prompt_ms = r->stats.prefill_ms;
    res.predicted_ms = r->stats.decode_ms;
    char *t = el_api_timings_json(&res);
    if (!t) {
        free(json);
        return NULL;
    }
    return el_api_with_member(json, "timings", t);
}

/* A whole OpenAI reply with llama-server's "__verbose" debug member (its /completion object: the
 * prompt as text, the content, the counts, the stop, generation_settings), when the request said
 * "verbose": true or the server runs with --verbose (as llama-server). json is taken; NULL on OOM. */
static char *with_verbose(el_req *r, char *json) {
    if (!json || !(r->api.verbose || r->srv->p.verbose)) return json;
    char *v = native_json(r, r->text.p ? r->text.p : "", r->text.len, true);
    if (!v) {
        free(json);
        return NULL;
    }
    return el_api_with_member(json, "__verbose", v);
}

/* Whether r's answers carry the route member: all but a /completion that
 * asked for only some fields (response_fields; its header still has it). */
static bool route_in_body(const el_req *r) { return !(r->api.kind == EL_API_NATIVE && r->api.n_resp_fields > 0); }

/* The route member on a stream's first frame (json consumed; NULL on OOM). */
static char *route_first(el_req *r, char *json) {
    if (!json || r->route_sent || !route_in_body(r)) return json;
    r->route_sent = true;
    return el_route_inject(json, &r->route);
}

/* Appends one stream frame (srv->mu taken here). */
static bool push_frame(el_req *r, const el_buf *frame) {
    el_server *s = r->srv;
    pthread_mutex_lock(&s->mu);
    bool ok = el_buf_append(&r->out, frame->p, frame->len);
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&s->mu);
    return ok;
}

/* The live reasoning split's sink: runs of one kind are gathered (acc) and each kind's run becomes
 * one chunk (delta.reasoning_content or delta.content) in frame when the kind changes or the piece
 * ends (think_flush); the first chunk carries the logprobs json lj. */
typedef struct think_out {
    el_req *r;
    el_buf *frame;
    const char *lj;
    bool lj_used, acc_reasoning;
    el_buf acc;
} think_out;

static bool think_flush(think_out *o) {
    if (o->acc.len == 0) return true;
    el_req *r = o->r;
    const el_server *s = r->srv;
    const char *lj = o->lj_used ? NULL : o->lj;
    char *json = o->acc_reasoning ? el_api_chat_reasoning_chunk(r->id, s->model_id, r->created, req_fp(s, r),
                                                                o->acc.p, o->acc.len, !r->sent_first, lj)
                                  : make_chunk(r, o->acc.p, o->acc.len, !r->sent_first, NULL, NULL, lj);
    o->lj_used = true;
    r->sent_first = true;
    o->acc.len = 0;
    return frame_json(o->frame, route_first(r, json));
}

static bool think_sink(void *user, bool reasoning, const char *p, size_t n) {
    think_out *o = user;
    if (o->acc.len && o->acc_reasoning != reasoning && !think_flush(o)) return false;
    o->acc_reasoning = reasoning;
    return el_buf_append(&o->acc, p, n);
}

/* A stream's text through the live <think> split (think_live): chunks for what is known. */
static bool emit_think(el_req *r, const el_buf *text, bool lp) {
    el_buf frame = {0};
    char *lj = lp ? lps_json(r, r->lps_sent, r->n_lps) : NULL;
    think_out o = {r, &frame, lj, false, false, {0}};
    bool ok = (!lp || lj) && el_think_stream_feed(&r->ts, text->p ? text->p : "", text->len, think_sink, &o) &&
              think_flush(&o);
    if (ok && o.lj_used && lp) r->lps_sent = r->n_lps; /* else they wait for the next chunk */
    if (ok && frame.len) ok = push_frame(r, &frame);
    free(lj);
    el_buf_free(&o.acc);
    el_buf_free(&frame);
    return ok;
}

/* A piece of text (and, streaming with logprobs, the tokens since the last
 * frame) goes to the client or to the non-stream text. */
static bool emit(el_req *r, const char *piece, size_t len, bool token) {
    el_buf text = {0}, frame = {0};
    bool ok = el_utf8_sanitize(piece ? piece : "", len, &text);
    if (ok && r->think_live) {
        ok = text.len == 0 || emit_think(r, &text, r->api.logprobs && token && r->lps_sent < r->n_lps);
    } else if (ok && r->api.stream && !r->hold_all) {
        bool lp = r->api.logprobs && token && r->lps_sent < r->n_lps;
        /* chat and /completion: no chunk without text (their tokens' logprobs
         * wait for the next text, or the last chunk); legacy completions keep
         * OpenAI's chunk per token with logprobs */
        bool send = text.len > 0 || (lp && r->api.kind == EL_API_COMPLETION);
        if (send && r->api.kind == EL_API_NATIVE) {
            ok = frame_json(&frame, route_first(r, native_json(r, text.p ? text.p : "", text.len, false)));
            if (ok) ok = push_frame(r, &frame);
        } else if (send) {
            char *lj = lp ? lps_json(r, r->lps_sent, r->n_lps) : NULL;
            ok = (!lp || lj) &&
                 frame_json(&frame, route_first(r, make_chunk(r, text.p ? text.p : "", text.len, !r->sent_first, NULL, NULL, lj)));
            free(lj);
            if (lp) r->lps_sent = r->n_lps;
            r->sent_first = true;
            if (ok) ok = push_frame(r, &frame);
        }
    } else if (ok && text.len) {
        ok = el_buf_append(&r->text, text.p, text.len);
    }
    el_buf_free(&text);
    el_buf_free(&frame);
    return ok;
}

bool srv_on_token(const el_token_info *t, void *user) {
    el_req *r = user;
    el_server *s = r->srv;
    if (t->id >= 0) {
        double now = now_s();
        if (!r->got_first) {
            r->got_first = true;
            el_metrics_ttft(&s->metrics, now - r->t_arrival);
            pthread_mutex_lock(&s->mu);
            if (r->state == RS_PREFILL) r->state = RS_DECODE;
            pthread_mutex_unlock(&s->mu);
        } else {
            el_metrics_itl(&s->metrics, now - r->t_last);
        }
        r->t_last = now;
        el_metrics_tokens(&s->metrics, 0, 1);
        atomic_fetch_add(&r->n_decoded, 1);
        if (r->ctoks && r->n_ctoks < r->cap_ctoks) r->ctoks[r->n_ctoks++] = t->id;
        if (r->api.logprobs && !lp_record(r, t)) { r->oom = true; return false; }
        if (r->api.kind == EL_API_NATIVE) {
            if (r->n_ids == r->cap_ids) {
                int cap = r->cap_ids ? r->cap_ids * 2 : 64;
                int32_t *p = realloc(r->ids, (size_t)cap * sizeof *p);
                if (!p) { r->oom = true; return false; }
                r->ids = p;
                r->cap_ids = cap;
            }
            r->ids[r->n_ids++] = t->id;
        }
    }
    if ((t->piece && t->piece_len > 0) || (t->id >= 0 && r->api.logprobs)) {
        if (!emit(r, t->piece, t->piece && t->piece_len > 0 ? (size_t)t->piece_len : 0, t->id >= 0)) {
            r->oom = true;
            return false;
        }
    }
    /* a special token's text (a format's marker: [TOOL_CALLS], <|channel|>, …), which the piece
     * leaves out, joins the text the parser sees (never a stream's live text: keep_special holds it) */
    if (r->keep_special && t->id >= 0 && !el_token_is_eog(s->model, t->id)) {
        char sp[256], plain[256];
        int ls = el_token_to_piece(s->model, t->id, sp, (int)sizeof sp, true);
        int lp = el_token_to_piece(s->model, t->id, plain, (int)sizeof plain, false);
        if (ls > 0 && ls <= (int)sizeof sp && lp == 0 && !el_buf_append(&r->text, sp, (size_t)ls)) {
            r->oom = true;
            return false;
        }
    }
    return !atomic_load(&r->cancel);
}

/* ---- tool calls --------------------------------------------------------- */

/* prefix + 24 random hex digits (request ids "chatcmpl-…", "cmpl-…", "embd-…", tool call ids "call_…"). */
void srv_rand_id(char *out, size_t cap, const char *prefix) {
    unsigned char rnd[12];
    randombytes_buf(rnd, sizeof rnd);
    int off = snprintf(out, cap, "%s", prefix);
    for (size_t i = 0; i < sizeof rnd; i++) off += snprintf(out + off, cap - (size_t)off, "%02x", rnd[i]);
}

static bool has(const char *t, size_t n, const char *needle) {
    size_t k = strlen(needle);
    for (size_t i = 0; i + k <= n; i++)
        if (t[i] == needle[0] && !memcmp(t + i, needle, k)) return true;
    return false;
}

/* Moves the built-in family's parse (toolcall.h) into out (its content replaces out's). */
static int family_calls(const el_req *r, el_tool_parsed *out) {
    el_toolcall_result res;
    const char *t = out->content ? out->content : "";
    if (el_toolcall_parse(r->srv->fam, t, out->content ? out->content_len : 0, r->api.tools, r->api.n_tools, &res))
        return -1;
    free(out->content);
    out->content = res.content;
    out->content_len = res.content_len;
    out->calls = res.calls;
    out->n_calls = res.n_calls;
    return 0;
}

/* Calls that do not name an offered tool (or any call, without tools) go back into the content as
 * the JSON they were: {"name": N, "arguments": A}. */
static int keep_offered(const el_req *r, el_tool_parsed *out) {
    el_buf extra = {0};
    int k = 0;
    bool ok = true;
    for (int i = 0; i < out->n_calls; i++) {
        el_tool_call_out *c = &out->calls[i];
        bool offered = false;
        for (int j = 0; r->tools_parse && j < r->api.n_tools; j++)
            if (!strcmp(r->api.tools[j].name, c->name)) offered = true;
        if (offered) { out->calls[k++] = *c; continue; }
        ok = ok && (extra.len ? el_buf_str(&extra, "\n") : true) && el_buf_str(&extra, "{\"name\": \"") &&
             el_buf_str(&extra, c->name) && el_buf_str(&extra, "\", \"arguments\": ") &&
             el_buf_str(&extra, c->arguments) && el_buf_str(&extra, "}");
        free(c->name);
        free(c->arguments);
    }
    out->n_calls = k;
    if (ok && extra.len) {
        el_buf b = {0};
        ok = (!out->content || (el_buf_append(&b, out->content, out->content_len) && el_buf_str(&b, "\n"))) &&
             el_buf_append(&b, extra.p, extra.len) && el_buf_append(&b, "", 0);
        if (ok) {
            free(out->content);
            out->content = b.p;
            out->content_len = b.len - 1;
        } else {
            el_buf_free(&b);
        }
    }
    el_buf_free(&extra);
    return ok ? 0 : -1;
}

/* Whether r's finished chat reply is split (reasoning, calls) rather than sent as it came. */
static bool reply_split(const el_req *r) {
    if (r->tools_parse) return true;
    if (r->rf == EL_REASONING_NONE) return false;
    const char *t = r->text.p ? r->text.p : "";
    return r->think_open || r->keep_special || has(t, r->text.len, "<think>") || has(t, r->text.len, "</think>");
}

/* The reply (r->text) split into reasoning, content and tool calls with a fresh id per call (ids[i]
 * holds 32 bytes each, up to EL_TOOL_MAX_CALLS): the template's format (toolformat.h) when it has
 * one, else the <think> split and the built-in family's calls (toolcall.h). 0, or -1 out of memory. */
static int parse_reply(const el_req *r, el_tool_parsed *out, char ids[][32]) {
    el_buf pre = {0};
    const char *t = r->text.p ? r->text.p : "";
    size_t n = r->text.len;
    memset(out, 0, sizeof *out);
    if (r->think_open && r->rf != EL_REASONING_NONE) { /* the prompt opened it: the reply starts inside */
        if (!el_buf_str(&pre, "<think>") || !el_buf_append(&pre, t, n)) { el_buf_free(&pre); return -1; }
        t = pre.p;
        n = pre.len;
    }
    el_tool_format f = r->tf;
    if (!r->tools_parse && f != EL_TF_GPT_OSS && f != EL_TF_COMMAND_R) f = EL_TF_NONE; /* no calls to find */
    int rc = el_tool_format_parse(f, r->rf, t, n, out);
    el_buf_free(&pre);
    if (rc == 0 && r->tools_parse && r->tf == EL_TF_NONE) rc = family_calls(r, out);
    if (rc == 0) rc = keep_offered(r, out);
    if (rc) { el_tool_parsed_free(out); return -1; }
    for (int i = 0; i < out->n_calls; i++) srv_rand_id(ids[i], 32, "call_");
    return 0;
}

/* A stream's held-back reply as OpenAI streams it: the reasoning (one chunk), the content (one
 * chunk), then per call a chunk with index, id, type and name (arguments "") and the arguments in
 * fragments. Returns the number of calls, or -1 out of memory. */
static int tool_frames(el_req *r, el_buf *tail) {
    const el_server *s = r->srv;
    el_tool_parsed res;
    char (*idv)[32] = malloc((size_t)EL_TOOL_MAX_CALLS * sizeof *idv);
    if (!idv || parse_reply(r, &res, idv)) { free(idv); return -1; }
    bool ok = true;
    if (res.reasoning) {
        ok = frame_json(tail, route_first(r, el_api_chat_reasoning_chunk(r->id, s->model_id, r->created, req_fp(s, r),
                                                                         res.reasoning, res.reasoning_len,
                                                                         !r->sent_first, NULL)));
        r->sent_first = true;
    }
    if (ok && res.content) {
        ok = frame_json(tail, route_first(r, make_chunk(r, res.content, res.content_len, !r->sent_first, NULL, NULL, NULL)));
        r->sent_first = true;
    }
    for (int i = 0; ok && i < res.n_calls; i++) {
        ok = frame_json(tail, route_first(r, el_api_chat_tool_chunk(r->id, s->model_id, r->created, req_fp(s, r), i,
                                                                      idv[i], res.calls[i].name, NULL, 0)));
        const char *a = res.calls[i].arguments;
        size_t n = strlen(a), at = 0;
        while (ok && at < n) { /* fragments of about 16 bytes, cut between characters */
            size_t e = at + 16 < n ? at + 16 : n;
            while (e < n && ((unsigned char)a[e] & 0xc0) == 0x80) e++;
            ok = frame_json(tail, el_api_chat_tool_chunk(r->id, s->model_id, r->created, req_fp(s, r), i, NULL,
                                                         NULL, a + at, e - at));
            at = e;
        }
        r->sent_first = true;
    }
    int nc = res.n_calls;
    el_tool_parsed_free(&res);
    free(idv);
    return ok ? nc : -1;
}

/* ---- the reply: its start, its end, the whole of a non-streamed one ------ */

/* The start of r's reply, once r->id is set and before r is enqueued (no one
 * else sees r yet). echo: the prompt (the first stream frame, or the head of
 * the text); a chat stream: the first chunk, which carries the role only.
 * 0, or -1 with e filled (out of memory). */
int srv_reply_begin(el_req *r, el_api_error *e) {
    el_api_request *a = &r->api;
    bool ok = true;
    if (a->echo && a->prompt) {
        size_t len = strlen(a->prompt);
        if (a->stream) { /* no one else sees r yet */
            el_buf frame = {0};
            ok = frame_json(&frame, make_chunk(r, a->prompt, len, true, NULL, NULL, NULL)) &&
                 el_buf_append(&r->out, frame.p, frame.len);
            el_buf_free(&frame);
            r->sent_first = true;
        } else {
            ok = el_buf_append(&r->text, a->prompt, len);
        }
    }
    free(a->prompt);
    a->prompt = NULL;
    if (ok && a->kind == EL_API_CHAT && a->stream) {
        const el_server *s = r->srv;
        el_buf frame = {0};
        ok = frame_json(&frame, route_first(r, el_api_chat_role_chunk(r->id, s->model_id, r->created, req_fp(s, r)))) &&
             el_buf_append(&r->out, frame.p, frame.len);
        el_buf_free(&frame);
        r->sent_first = true;
    }
    if (!ok) el_api_set_error(e, 500, "server_error", NULL, NULL, "out of memory");
    return ok ? 0 : -1;
}

/* The frames that end a stream (built outside the lock). */
void srv_stream_tail(el_req *r, req_state st, el_buf *tail) {
    bool ok = true;
    const bool native = r->api.kind == EL_API_NATIVE;
    if (st == RS_DONE && native) {
        ok = frame_json(tail, route_first(r, native_json(r, "", 0, true)));
    } else if (st == RS_DONE) {
        const char *finish = finish_name(r->stats.finish);
        if (r->hold_all) { /* the held-back reply: its reasoning, its content, then its calls */
            int nc = tool_frames(r, tail);
            ok = nc >= 0;
            if (nc > 0 && r->stats.finish != EL_DONE_LENGTH) finish = "tool_calls"; /* cut short: "length" */
        } else if (r->think_live) { /* what the live split still holds */
            think_out o = {r, tail, NULL, true, false, {0}};
            ok = el_think_stream_finish(&r->ts, think_sink, &o) && think_flush(&o);
            el_buf_free(&o.acc);
        }
        bool lp = r->api.logprobs && r->lps_sent < r->n_lps; /* chat: tokens whose text never came */
        char *lj = lp ? lps_json(r, r->lps_sent, r->n_lps) : NULL;
        char *fin = ok && (!lp || lj) ? make_chunk(r, NULL, 0, !r->sent_first, finish, NULL, lj) : NULL;
        if (fin && r->n_dropped) fin = el_api_with_truncation(fin, r->n_dropped); /* the finish chunk says so */
        ok = fin && frame_json(tail, route_first(r, with_timings(r, fin)));
        free(lj);
        if (ok && r->api.include_usage) {
            el_api_usage u = {r->stats.n_prompt, r->stats.n_generated, r->n_cache_reused};
            ok = frame_json(tail, with_timings(r, make_chunk(r, NULL, 0, false, NULL, &u, NULL)));
        }
    } else {
        el_api_error e;
        memset(&e, 0, sizeof e);
        if (st == RS_CANCELLED)
            el_api_set_error(&e, 503, "server_error", NULL, "cancelled", "the request was cancelled (the server is stopping)");
        else if (r->lora_busy) /* nothing ran: running requests hold the LoRA budget (the non-streamed reply's 503) */
            el_api_set_error(&e, 503, "server_error", "lora", "lora_budget_busy", "%s", r->err.msg);
        else
            el_api_set_error(&e, 500, "server_error", NULL, "generation_failed", "generation failed: %s: %s",
                             el_status_name(r->err.code), r->oom ? "out of memory" : r->err.msg);
        ok = frame_json(tail, route_first(r, el_api_stream_error_json(&e))); /* llama-server's shape */
    }
    if (ok && !native) el_buf_str(tail, "data: [DONE]\n\n"); /* /completion streams end without it */
}

/* The whole reply of a non-streamed request that is done (its text, logprobs, tool calls, usage,
 * --ctx-overflow's note, the route), malloc'd; NULL out of memory. */
char *srv_reply_json(el_req *r) {
    const el_server *s = r->srv;
    const el_api_kind kind = r->api.kind;
    el_api_usage u = {r->stats.n_prompt, r->stats.n_generated, r->n_cache_reused};
    const char *fin = finish_name(r->stats.finish);
    char *lj = r->api.logprobs && kind != EL_API_NATIVE ? lps_json(r, 0, r->n_lps) : NULL;
    char *json = NULL;
    /* r->text is sanitised already; it may hold NUL bytes, so it goes by length */
    if (kind == EL_API_NATIVE)
        json = native_json(r, r->text.p ? r->text.p : "", r->text.len, true);
    else if ((!r->api.logprobs || lj) && kind == EL_API_CHAT && reply_split(r)) {
        el_tool_parsed res;
        char (*ids)[32] = malloc((size_t)EL_TOOL_MAX_CALLS * sizeof *ids);
        if (ids && !parse_reply(r, &res, ids)) {
            char *idp[EL_TOOL_MAX_CALLS];
            for (int i = 0; i < res.n_calls; i++) idp[i] = ids[i];
            el_api_tool_calls tc = {res.calls, idp, res.n_calls};
            /* without tools, content stays a string ("" when all was reasoning) */
            const char *content = res.content ? res.content : r->tools_parse ? NULL : "";
            json = el_api_chat_response_tools(r->id, s->model_id, r->created, req_fp(s, r), content,
                                              res.content_len, res.reasoning, res.reasoning_len, &tc,
                                              res.n_calls > 0 && r->stats.finish != EL_DONE_LENGTH ? "tool_calls" : fin,
                                              u, lj);
            el_tool_parsed_free(&res);
        }
        free(ids);
    } else if (!r->api.logprobs || lj)
        json = kind == EL_API_CHAT ? el_api_chat_response(r->id, s->model_id, r->created, req_fp(s, r), r->text.p,
                                                          r->text.len, fin, u, lj)
                                   : el_api_completion_response(r->id, s->model_id, r->created, req_fp(s, r),
                                                                r->text.p, r->text.len, fin, u, lj);
    if (json && r->n_dropped) json = el_api_with_truncation(json, r->n_dropped);
    free(lj);
    if (kind != EL_API_NATIVE) json = with_timings(r, with_verbose(r, json));
    return json && route_in_body(r) ? el_route_inject(json, &r->route) : json;
}

/* ---- the stream as MHD reads it ---------------------------------------- */

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    el_req *r = cls;
    el_server *s = r->srv;
    int idle_ms = 0;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        if (r->out_off < r->out.len) {
            const size_t n = el_buf_read(&r->out, &r->out_off, buf, max);
            pthread_mutex_unlock(&s->mu);
            return (ssize_t)n;
        }
        if (rs_terminal(r->state)) {
            pthread_mutex_unlock(&s->mu);
            return MHD_CONTENT_READER_END_OF_STREAM;
        }
        struct timespec dl;
        deadline_in_ms(&dl, SRV_POLL_MS);
        if (pthread_cond_timedwait(&r->cv, &s->mu, &dl) == ETIMEDOUT && r->out_off == r->out.len &&
            !rs_terminal(r->state)) {
            pthread_mutex_unlock(&s->mu);
            peer_state ps = srv_peer_check(r->conn_fd);
            if (ps == PEER_GONE) {
                srv_req_cancel(r);
                return MHD_CONTENT_READER_END_WITH_ERROR;
            }
            /* FIN: half-closed (the client still reads) or closed. An SSE
             * comment tells which: a closed client answers it with a reset,
             * which the next step sees as PEER_GONE. */
            if (ps == PEER_HALF && !atomic_exchange(&r->probed, true) && max >= sizeof SRV_KEEPALIVE - 1) {
                memcpy(buf, SRV_KEEPALIVE, sizeof SRV_KEEPALIVE - 1);
                return (ssize_t)(sizeof SRV_KEEPALIVE - 1);
            }
            /* Nothing to send for a while (queued behind other requests, or a
             * long prefill): an SSE comment keeps the connection active, so
             * neither libmicrohttpd's idle timeout nor a proxy drops it. */
            idle_ms += SRV_POLL_MS;
            if (idle_ms >= SRV_KEEPALIVE_MS && max >= sizeof SRV_KEEPALIVE - 1) {
                memcpy(buf, SRV_KEEPALIVE, sizeof SRV_KEEPALIVE - 1);
                return (ssize_t)(sizeof SRV_KEEPALIVE - 1);
            }
            pthread_mutex_lock(&s->mu);
        }
    }
}

/* The response is gone (sent, or the connection failed): drop the HTTP side's reference. */
static void stream_free(void *cls) {
    el_req *r = cls;
    srv_req_cancel(r); /* no effect if it already ended */
    srv_req_unref(r);
}

/* Answers with r's stream (r queued): the HTTP side's reference moves to the
 * response, and stream_free runs when MHD lets go of it. */
enum MHD_Result srv_stream_respond(struct MHD_Connection *c, el_req *r) {
    struct MHD_Response *resp =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, SRV_STREAM_BLOCK, stream_read, r, stream_free);
    if (!resp) {
        srv_req_cancel(r);
        srv_req_unref(r);
        return MHD_NO;
    }
    return srv_send_sse(c, resp, &r->route);
}
