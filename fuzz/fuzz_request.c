/*
 * fuzz_request.c — libFuzzer target for the OpenAI request parser and the
 * response builders (src/server/api*.c).
 *
 * Every input is parsed as both a chat and a completion body. On failure the
 * error must be a 400/413 with a type and a message, and its JSON must parse.
 * On success the request must satisfy every promise of api.h (ranges, roles,
 * tools: unique valid names, compiled parameters, definitions within the
 * limit, tool_choice consistent with them, calls only on assistant messages
 * with JSON arguments,
 * stop list, valid UTF-8 strings), and responses and chunks built from the
 * parsed strings must parse back as JSON with the same strings. Finally the
 * raw input (possibly invalid UTF-8, possibly with NUL bytes) is fed to the
 * builders as generated text, by length: their output must still be valid
 * UTF-8 JSON, one line, and keep every NUL as \u0000.
 *
 * The same input is parsed as /tokenize and /detokenize bodies (the same
 * pipeline): on success the content is valid UTF-8 without NUL and its length
 * is right, token ids are >= 0, and the response bodies built from them parse
 * back; on failure the error is a 400/413 and nothing is left allocated.
 *
 * And as a llama-server /completion body (el_api_parse_native): on success
 * every promise of api.h holds (prompt parts: text valid UTF-8 or an id >= 0,
 * ranges of n_predict, temperature, top_k, top_p, min_p, repeat_*, n_probs,
 * id_slot, response_fields), and a /completion response built from the
 * request (its prompt text as content, its response_fields, its ids as
 * tokens) parses back with the content intact when not filtered away; on
 * failure a 400/413 whose error JSON (OpenAI's and the stream's llama-server
 * shape) parses, and nothing is left allocated. The raw bytes also go
 * through the /completion builders as content, prompt and token texts.
 *
 * And as an embeddings body (el_api_parse_embeddings): on success 1..max
 * inputs, each of >= 1 parts (text valid UTF-8 or an id >= 0) and not all
 * empty, embd_normalize and dimensions in range, and both reply builders
 * (OpenAI's, float and base64, and llama-server's native array) on vectors
 * made of the input's raw bytes (NaN and infinities included) give JSON that
 * parses with one entry per input and base64 of the right length; every
 * normalisation mode runs on those vectors (UBSan: no overflow). On failure
 * a 400/413 whose error JSON parses, and nothing is left allocated.
 */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/api.h"

#define REQUIRE(c) do { if (!(c)) { fprintf(stderr, "invariant failed: %s\n", #c); abort(); } } while (0)

/* Independent strict UTF-8 check (the oracle; not api.c's). */
static int utf8_ok(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        uint32_t cp;
        size_t l;
        if (c < 0x80) { i++; continue; }
        if ((c & 0xE0) == 0xC0) { l = 2; cp = c & 0x1F; }
        else if ((c & 0xF0) == 0xE0) { l = 3; cp = c & 0x0F; }
        else if ((c & 0xF8) == 0xF0) { l = 4; cp = c & 0x07; }
        else return 0;
        if (i + l > n) return 0;
        for (size_t k = 1; k < l; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return 0;
            cp = cp << 6 | (s[i + k] & 0x3F);
        }
        static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < min[l] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
        i += l;
    }
    return 1;
}
static int str_ok(const char *s) { return s && utf8_ok((const unsigned char *)s, strlen(s)); }

/* s must be valid UTF-8 JSON; returns the parsed tree (caller deletes). */
static cJSON *reparse(char *s) {
    REQUIRE(s != NULL);
    REQUIRE(str_ok(s));
    REQUIRE(!strchr(s, '\n') && !strchr(s, '\r')); /* SSE-safe: one line */
    cJSON *p = cJSON_Parse(s);
    REQUIRE(p != NULL);
    free(s);
    return p;
}

static const char *first_text(const cJSON *p, const char *inner, const char *key) {
    const cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(p, "choices"), 0);
    if (inner) c = cJSON_GetObjectItemCaseSensitive(c, inner);
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(c, key);
    REQUIRE(cJSON_IsString(t));
    return t->valuestring;
}

static void check_request(const el_api_request *r, el_api_kind kind) {
    REQUIRE(r->kind == kind);
    if (kind == EL_API_CHAT) {
        REQUIRE(r->n_msgs > 0 && r->msgs && !r->prompt);
        for (int i = 0; i < r->n_msgs; i++) {
            const char *role = r->msgs[i].role;
            REQUIRE(role && (!strcmp(role, "system") || !strcmp(role, "user") || !strcmp(role, "assistant") ||
                             !strcmp(role, "tool")));
            REQUIRE(str_ok(r->msgs[i].content));
            /* tool calls only on assistant messages, each with a valid name and JSON arguments text */
            REQUIRE(r->msgs[i].n_tool_calls >= 0 && r->msgs[i].n_tool_calls <= EL_TOOL_MAX_CALLS);
            REQUIRE(r->msgs[i].n_tool_calls == 0 || (!strcmp(role, "assistant") && r->msgs[i].tool_calls));
            for (int k = 0; k < r->msgs[i].n_tool_calls; k++) {
                const el_chat_tool_call *c = &r->msgs[i].tool_calls[k];
                REQUIRE(str_ok(c->name) && strlen(c->name) >= 1 && strlen(c->name) <= EL_TOOL_MAX_NAME);
                REQUIRE(str_ok(c->arguments));
                cJSON *a = cJSON_Parse(c->arguments);
                REQUIRE(a != NULL);
                cJSON_Delete(a);
            }
            REQUIRE(!r->msgs[i].tool_call_id || (!strcmp(role, "tool") && str_ok(r->msgs[i].tool_call_id)));
        }
        /* tools: unique valid names, compiled schemas, serialised definitions within the limit */
        REQUIRE(r->n_tools >= 0 && r->n_tools <= EL_TOOL_MAX_TOOLS);
        for (int i = 0; i < r->n_tools; i++) {
            REQUIRE(str_ok(r->tools[i].name) && strlen(r->tools[i].name) <= EL_TOOL_MAX_NAME);
            for (int k = 0; k < i; k++) REQUIRE(strcmp(r->tools[i].name, r->tools[k].name) != 0);
            cJSON *pj = cJSON_Parse(r->tools[i].parameters);
            REQUIRE(cJSON_IsObject(pj));
            cJSON_Delete(pj);
            REQUIRE(str_ok(r->chat_tools[i].json) && str_ok(r->chat_tools[i].json_indent4));
            REQUIRE(strlen(r->chat_tools[i].json_indent4) <= EL_TOOL_MAX_DEF_BYTES);
        }
        REQUIRE(r->n_tools > 0 || r->tool_choice == EL_TOOL_CHOICE_NONE);
        REQUIRE(r->tool_choice != EL_TOOL_CHOICE_NAMED || (r->tool_named >= 0 && r->tool_named < r->n_tools));
        REQUIRE(r->tool_choice == EL_TOOL_CHOICE_NONE || !r->grammar);
    } else {
        REQUIRE(r->n_msgs == 0 && !r->msgs && str_ok(r->prompt));
        REQUIRE(r->n_tools == 0);
    }
    REQUIRE(!r->model || str_ok(r->model));
    REQUIRE(r->max_tokens == -1 || (r->max_tokens >= 1 && r->max_tokens <= (1 << 20)));
    REQUIRE(r->temperature >= 0 && r->temperature <= 2);
    REQUIRE(r->top_p > 0 && r->top_p <= 1);
    REQUIRE(r->presence_penalty >= -2 && r->presence_penalty <= 2);
    REQUIRE(r->frequency_penalty >= -2 && r->frequency_penalty <= 2);
    REQUIRE(r->n_stop >= 0 && r->n_stop <= EL_API_MAX_STOP && r->stop[r->n_stop] == NULL);
    for (int i = 0; i < r->n_stop; i++) {
        size_t l = r->stop[i] ? strlen(r->stop[i]) : 0;
        REQUIRE(l >= 1 && l <= 256 && str_ok(r->stop[i]));
    }
}

static void round_trip(const el_api_request *r) {
    const char *model = r->model ? r->model : "";
    const char *text = r->kind == EL_API_CHAT ? r->msgs[r->n_msgs - 1].content : r->prompt;
    const char *fp = r->n_stop ? r->stop[0] : NULL;
    el_api_usage u = {r->max_tokens, r->n_msgs, r->n_msgs};
    cJSON *p;

    p = reparse(el_api_chat_response(model, model, (long)r->seed, fp, text, strlen(text), "stop", u, NULL));
    REQUIRE(!strcmp(first_text(p, "message", "content"), text));
    REQUIRE(!strcmp(cJSON_GetObjectItemCaseSensitive(p, "model")->valuestring, model));
    cJSON_Delete(p);
    p = reparse(el_api_completion_response("cmpl-x", model, 0, fp, text, strlen(text), "length", u, NULL));
    REQUIRE(!strcmp(first_text(p, NULL, "text"), text));
    cJSON_Delete(p);
    p = reparse(el_api_chat_chunk("chatcmpl-x", model, 1, fp, text, strlen(text), r->stream, NULL, NULL, NULL));
    REQUIRE(!strcmp(first_text(p, "delta", "content"), text));
    cJSON_Delete(p);
    p = reparse(el_api_chat_chunk("chatcmpl-x", model, 1, fp, NULL, 0, false, "length", NULL, NULL));
    cJSON_Delete(p);
    p = reparse(el_api_chat_chunk("chatcmpl-x", model, 1, fp, NULL, 0, false, NULL, &u, NULL));
    REQUIRE(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(p, "choices")) == 0);
    cJSON_Delete(p);
    p = reparse(el_api_completion_chunk("cmpl-x", model, 1, fp, text, strlen(text), NULL, NULL, NULL));
    REQUIRE(!strcmp(first_text(p, NULL, "text"), text));
    cJSON_Delete(p);
    p = reparse(el_api_completion_chunk("cmpl-x", model, 1, fp, NULL, 0, NULL, &u, NULL));
    cJSON_Delete(p);
}

/* The /completion body: the parser's promises and the builders on what it parsed. */
static void check_native(const uint8_t *data, size_t size) {
    el_api_request r;
    el_api_error e;
    memset(&e, 0, sizeof e);
    if (el_api_parse_native((const char *)data, size, &r, &e) == 0) {
        REQUIRE(r.kind == EL_API_NATIVE && r.n_parts >= 1 && r.n_parts <= EL_API_MAX_PROMPT_PARTS && r.parts);
        REQUIRE(!r.msgs && !r.prompt);
        for (int i = 0; i < r.n_parts; i++) REQUIRE(r.parts[i].text ? str_ok(r.parts[i].text) : r.parts[i].tok >= 0);
        REQUIRE(r.max_tokens == -1 || (r.max_tokens >= 1 && r.max_tokens <= (1 << 20)));
        REQUIRE(r.temperature >= 0 && r.temperature <= 2 && r.top_k >= 0);
        REQUIRE(r.top_p > 0 && r.top_p <= 1 && r.min_p >= 0 && r.min_p <= 1);
        REQUIRE(r.repeat_penalty > 0 && r.repeat_penalty <= 10 && r.repeat_last_n >= -1);
        REQUIRE(r.presence_penalty >= -2 && r.presence_penalty <= 2);
        REQUIRE(r.frequency_penalty >= -2 && r.frequency_penalty <= 2);
        REQUIRE(r.n_probs >= 0 && r.id_slot >= -1);
        REQUIRE(r.n_stop >= 0 && r.n_stop <= EL_API_MAX_STOP && r.stop[r.n_stop] == NULL);
        REQUIRE(r.n_logit_bias >= 0 && r.n_logit_bias <= EL_API_MAX_LOGIT_BIAS);
        for (int i = 0; i < r.n_logit_bias; i++) REQUIRE(r.logit_bias_id[i] >= 0);
        REQUIRE(r.n_resp_fields >= 0 && r.n_resp_fields <= EL_API_MAX_RESP_FIELDS);
        for (int i = 0; i < r.n_resp_fields; i++) REQUIRE(str_ok(r.resp_fields[i]));
        const char *text = r.parts[0].text ? r.parts[0].text : "";
        int32_t ids[4] = {0};
        int nid = 0;
        for (int i = 0; i < r.n_parts && nid < 4; i++)
            if (!r.parts[i].text) ids[nid++] = r.parts[i].tok;
        el_api_native_result res;
        memset(&res, 0, sizeof res);
        res.content = text;
        res.len = strlen(text);
        res.tokens = ids;
        res.n_tokens = nid;
        res.stop = r.stream;
        res.model = r.model;
        res.stop_type = "word";
        res.stopping_word = r.n_stop ? r.stop[0] : "";
        res.prompt = text;
        res.prompt_len = strlen(text);
        res.settings = "{\"n_predict\":3}";
        res.predicted_ms = r.temperature;
        res.n_predicted = r.max_tokens;
        cJSON *p = reparse(el_api_native_response(&res, r.resp_fields, r.n_resp_fields));
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(p, "content");
        bool kept = r.n_resp_fields == 0;
        for (int i = 0; i < r.n_resp_fields; i++) kept = kept || !strcmp(r.resp_fields[i], "content");
        if (kept) REQUIRE(cJSON_IsString(c) && !strcmp(c->valuestring, text));
        else REQUIRE(c == NULL);
        REQUIRE(cJSON_GetArraySize(p) <= (r.n_resp_fields ? r.n_resp_fields : 64));
        cJSON_Delete(p);
    } else {
        REQUIRE(e.status == 400 || e.status == 413);
        REQUIRE(e.type && e.message[0]);
        REQUIRE(r.parts == NULL && r.n_parts == 0 && r.model == NULL && r.stop[0] == NULL && r.resp_fields[0] == NULL);
        cJSON_Delete(reparse(el_api_error_json(&e)));
        cJSON_Delete(reparse(el_api_stream_error_json(&e)));
    }
    el_api_request_free(&r);
    el_api_request_free(&r);
}

static size_t count_sub(const char *s, const char *sub) {
    size_t n = 0, l = strlen(sub);
    for (const char *p = strstr(s, sub); p; p = strstr(p + l, sub)) n++;
    return n;
}

/* /tokenize and /detokenize bodies through the shared pipeline. */
static void check_tok_bodies(const uint8_t *data, size_t size) {
    el_api_tok_request q;
    el_api_error e;
    memset(&e, 0, sizeof e);
    if (el_api_parse_tokenize((const char *)data, size, &q, &e) == 0) {
        REQUIRE(q.content && strlen(q.content) == q.content_len && utf8_ok((const unsigned char *)q.content, q.content_len));
        char *s = el_api_detokenize_response(q.content, q.content_len);
        cJSON *p = reparse(s);
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(p, "content");
        REQUIRE(cJSON_IsString(c) && !strcmp(c->valuestring, q.content));
        cJSON_Delete(p);
        /* with_pieces: the content cut into 1..3-byte pieces (cutting characters); each piece
         * comes back as its string or its bytes, in order */
        size_t np = 0, off[66];
        off[0] = 0;
        while (np < 64 && off[np] < q.content_len) {
            size_t step = 1 + (off[np] + np) % 3;
            off[np + 1] = off[np] + step < q.content_len ? off[np] + step : q.content_len;
            np++;
        }
        int32_t ids[64];
        for (size_t i = 0; i < np; i++) ids[i] = (int32_t)i;
        p = reparse(el_api_tokenize_pieces_response(ids, (int)np, q.content, off));
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(p, "tokens");
        REQUIRE(cJSON_GetArraySize(arr) == (int)np);
        for (size_t i = 0; i < np; i++) {
            const cJSON *t = cJSON_GetArrayItem(arr, (int)i), *pc = cJSON_GetObjectItemCaseSensitive(t, "piece");
            const size_t len = off[i + 1] - off[i];
            REQUIRE(cJSON_GetObjectItemCaseSensitive(t, "id")->valuedouble == (double)i);
            if (cJSON_IsString(pc)) {
                REQUIRE(strlen(pc->valuestring) == len && !memcmp(pc->valuestring, q.content + off[i], len));
            } else {
                REQUIRE(cJSON_IsArray(pc) && cJSON_GetArraySize(pc) == (int)len);
                for (size_t j = 0; j < len; j++)
                    REQUIRE(cJSON_GetArrayItem(pc, (int)j)->valuedouble == (double)(unsigned char)q.content[off[i] + j]);
            }
        }
        cJSON_Delete(p);
    } else {
        REQUIRE((e.status == 400 || e.status == 413) && e.type && e.message[0]);
        REQUIRE(q.content == NULL && q.tokens == NULL);
        cJSON_Delete(reparse(el_api_error_json(&e)));
    }
    el_api_tok_request_free(&q);
    memset(&e, 0, sizeof e);
    if (el_api_parse_detokenize((const char *)data, size, &q, &e) == 0) {
        REQUIRE(q.n_tokens >= 0 && (q.n_tokens == 0 || q.tokens));
        for (int i = 0; i < q.n_tokens; i++) REQUIRE(q.tokens[i] >= 0);
        cJSON *p = reparse(el_api_tokenize_response(q.tokens, q.n_tokens));
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(p, "tokens");
        REQUIRE(cJSON_GetArraySize(a) == q.n_tokens);
        for (int i = 0; i < q.n_tokens; i++) REQUIRE(cJSON_GetArrayItem(a, i)->valuedouble == (double)q.tokens[i]);
        cJSON_Delete(p);
    } else {
        REQUIRE((e.status == 400 || e.status == 413) && e.type && e.message[0]);
        REQUIRE(q.content == NULL && q.tokens == NULL);
    }
    el_api_tok_request_free(&q);
}

/* The embeddings body: the parser's promises and both reply builders. */
static void check_embd(const uint8_t *data, size_t size) {
    el_api_embd_request q;
    el_api_error e;
    memset(&e, 0, sizeof e);
    if (el_api_parse_embeddings((const char *)data, size, &q, &e) == 0) {
        REQUIRE(q.n_inputs >= 1 && q.n_inputs <= EL_API_MAX_EMBD_INPUTS && q.inputs);
        int parts = 0;
        for (int i = 0; i < q.n_inputs; i++) {
            const el_api_embd_input *in = &q.inputs[i];
            REQUIRE(in->n_parts >= 1 && in->parts);
            bool any = false;
            for (int k = 0; k < in->n_parts; k++) {
                if (in->parts[k].text) {
                    REQUIRE(str_ok(in->parts[k].text));
                    any = any || in->parts[k].text[0];
                } else {
                    REQUIRE(in->parts[k].tok >= 0);
                    any = true;
                }
            }
            REQUIRE(any);
            parts += in->n_parts;
        }
        REQUIRE(parts <= EL_API_MAX_PROMPT_PARTS);
        REQUIRE(q.normalize >= -1 && q.normalize <= EL_API_MAX_EMBD_NORMALIZE);
        REQUIRE(q.dimensions >= 0 && q.dimensions <= (1 << 20));
        REQUIRE(!q.model || str_ok(q.model));
        /* vectors of dim 5 from the raw bytes (any bit pattern), one per input (at most 4) */
        enum { DIM = 5 };
        const int nv = q.n_inputs < 4 ? q.n_inputs : 4;
        float v[4][DIM];
        memset(v, 0, sizeof v);
        memcpy(v, data, size < sizeof v ? size : sizeof v);
        const float *vp[4] = {v[0], v[1], v[2], v[3]};
        int rows[4] = {1, 1, 1, 1};
        for (int b = 0; b < 2; b++) {
            cJSON *p = reparse(el_api_embeddings_response(q.model, vp, nv, DIM, b, parts));
            const cJSON *d = cJSON_GetObjectItemCaseSensitive(p, "data");
            REQUIRE(cJSON_GetArraySize(d) == nv);
            const cJSON *emb = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(d, 0), "embedding");
            if (b) REQUIRE(cJSON_IsString(emb) && strlen(emb->valuestring) == 4 * ((DIM * 4 + 2) / 3));
            else REQUIRE(cJSON_GetArraySize(emb) == DIM);
            cJSON_Delete(p);
        }
        cJSON *p = reparse(el_api_embeddings_native(vp, rows, nv, DIM));
        REQUIRE(cJSON_GetArraySize(p) == nv);
        cJSON_Delete(p);
        el_api_embd_normalize(v[0], DIM, q.normalize);
    } else {
        REQUIRE((e.status == 400 || e.status == 413) && e.type && e.message[0]);
        REQUIRE(q.inputs == NULL && q.n_inputs == 0 && q.model == NULL);
        cJSON_Delete(reparse(el_api_error_json(&e)));
    }
    el_api_embd_request_free(&q);
    el_api_embd_request_free(&q);
    /* every normalisation mode on raw bytes as floats */
    float w[8];
    for (int mode = -1; mode <= 4; mode++) {
        memset(w, 0, sizeof w);
        memcpy(w, data, size < sizeof w ? size : sizeof w);
        el_api_embd_normalize(w, 8, mode == 4 ? EL_API_MAX_EMBD_NORMALIZE : mode);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    for (int k = 0; k < 2; k++) {
        el_api_kind kind = k ? EL_API_COMPLETION : EL_API_CHAT;
        el_api_request r;
        el_api_error e;
        memset(&e, 0, sizeof e);
        if (el_api_parse(kind, (const char *)data, size, &r, &e) == 0) {
            check_request(&r, kind);
            round_trip(&r);
        } else {
            REQUIRE(e.status == 400 || e.status == 413);
            REQUIRE(e.type && e.message[0]);
            REQUIRE(r.msgs == NULL && r.prompt == NULL && r.model == NULL && r.stop[0] == NULL);
            cJSON *p = reparse(el_api_error_json(&e));
            cJSON_Delete(p);
        }
        el_api_request_free(&r);
        el_api_request_free(&r);
    }
    check_tok_bodies(data, size);
    check_native(data, size);
    check_embd(data, size);
    /* raw bytes as generated text, by length: output must still be valid UTF-8 JSON */
    char *raw = malloc(size + 1);
    if (!raw) return 0;
    memcpy(raw, data, size);
    raw[size] = 0;
    size_t nuls = 0;
    for (size_t i = 0; i < size; i++) nuls += data[i] == 0;
    el_api_usage u = {1, 2, 0};
    cJSON_Delete(reparse(el_api_chat_chunk(raw, raw, 1, raw, raw, size, true, NULL, NULL, NULL)));
    char *s = el_api_completion_response(raw, raw, 1, raw, raw, size, raw, u, NULL);
    REQUIRE(s && count_sub(s, "\\u0000") >= nuls); /* every NUL of the text is there, escaped */
    cJSON_Delete(reparse(s));
    s = el_api_detokenize_response(raw, size);
    REQUIRE(s && count_sub(s, "\\u0000") >= nuls);
    cJSON_Delete(reparse(s));
    /* the raw bytes as token texts in both logprobs shapes */
    size_t half = size / 2, off = 0;
    el_api_top_lp top = {raw + half, size - half, -1.0f, 7};
    el_api_token_lp t[2] = {{raw, half, -0.5f, 1, &top, 3}, {raw + half, size - half, -2.0f, 0, NULL, 4}};
    s = el_api_logprobs_json(EL_API_CHAT, t, 2, NULL);
    cJSON_Delete(reparse(s));
    s = el_api_logprobs_json(EL_API_COMPLETION, t, 2, &off);
    cJSON_Delete(reparse(s));
    REQUIRE(off <= size + 2);
    /* the raw bytes through the /completion builders */
    s = el_api_native_probs_json(t, 2);
    cJSON_Delete(reparse(s));
    int32_t tk[2] = {1, 2};
    el_api_native_result res = {.content = raw, .len = size, .tokens = tk, .n_tokens = 2, .stop = true,
                                .model = raw, .stop_type = "eos", .stopping_word = raw, .prompt = raw,
                                .prompt_len = half};
    s = el_api_native_response(&res, NULL, 0);
    REQUIRE(s && count_sub(s, "\\u0000") >= nuls);
    cJSON_Delete(reparse(s));
    cJSON_Delete(reparse(el_api_chat_role_chunk(raw, raw, 1, raw)));
    free(raw);
    return 0;
}
