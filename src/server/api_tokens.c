/*
 * api_tokens.c — the endpoints around tokens and vectors: /tokenize and
 * /detokenize (bodies and replies) and the embeddings routes (/v1/embeddings,
 * /embeddings, /embedding: bodies, normalisation, OpenAI's and llama-server's
 * replies).
 *
 * Their bodies go through api.c's pipeline (api_parse_root) and the same
 * error shapes; a top-level field may appear at most once and JSON null is
 * "not given" (tok_field). Token ids are checked to be integers in
 * [0, 2^31) here and against the vocabulary by the server. Embedding floats
 * are written with 9 significant digits (they read back exactly), or as
 * base64 of little-endian float32 bytes.
 */
#include "server/api_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/utf8.h"

/* ---- /tokenize, /detokenize ------------------------------------------------ */

/* Looks up an optional top-level field that may appear at most once; JSON null is "not given". */
static int tok_field(const cJSON *root, const char *key, const cJSON **out, el_api_error *err) {
    if (api_get_unique(root, key, key, out, err)) {
        BAD(err, key, "duplicate_key", "duplicate key '%s' in request body", key);
        return -1;
    }
    if (*out && cJSON_IsNull(*out)) *out = NULL;
    return 0;
}

int el_api_parse_tokenize(const char *body, size_t len, el_api_tok_request *out, el_api_error *err) {
    if (!out) return api_no_output(err, "el_api_parse_tokenize");
    memset(out, 0, sizeof *out);
    out->parse_special = true;
    cJSON *root = api_parse_root(body, len, err);
    if (!root) return -1;
    const cJSON *content, *add, *parse;
    int rc = -1;
    const cJSON *pieces;
    if (tok_field(root, "content", &content, err) || tok_field(root, "add_special", &add, err) ||
        tok_field(root, "parse_special", &parse, err) || tok_field(root, "with_pieces", &pieces, err))
        goto done;
    if (!content) {
        BAD(err, "content", "missing_required_parameter", "missing required parameter: 'content'");
        goto done;
    }
    if (!cJSON_IsString(content)) { api_type_error(err, "content", "a string", content); goto done; }
    if (add && !cJSON_IsBool(add)) { api_type_error(err, "add_special", "a boolean", add); goto done; }
    if (parse && !cJSON_IsBool(parse)) { api_type_error(err, "parse_special", "a boolean", parse); goto done; }
    if (pieces && !cJSON_IsBool(pieces)) { api_type_error(err, "with_pieces", "a boolean", pieces); goto done; }
    out->with_pieces = cJSON_IsTrue(pieces);
    out->add_special = cJSON_IsTrue(add);
    out->parse_special = !cJSON_IsFalse(parse);
    /* the cJSON tree is freed below: the content moves out instead of being copied */
    out->content_len = strlen(content->valuestring);
    out->content = content->valuestring;
    ((cJSON *)content)->valuestring = NULL;
    rc = 0;
done:
    cJSON_Delete(root);
    if (rc) el_api_tok_request_free(out);
    return rc;
}

int el_api_parse_detokenize(const char *body, size_t len, el_api_tok_request *out, el_api_error *err) {
    if (!out) return api_no_output(err, "el_api_parse_detokenize");
    memset(out, 0, sizeof *out);
    cJSON *root = api_parse_root(body, len, err);
    if (!root) return -1;
    const cJSON *toks, *t;
    int rc = -1;
    if (tok_field(root, "tokens", &toks, err)) goto done;
    if (!toks) {
        BAD(err, "tokens", "missing_required_parameter", "missing required parameter: 'tokens'");
        goto done;
    }
    if (!cJSON_IsArray(toks)) { api_type_error(err, "tokens", "an array of token ids", toks); goto done; }
    int n = cJSON_GetArraySize(toks), i = 0;
    out->tokens = malloc((size_t)(n > 0 ? n : 1) * sizeof *out->tokens);
    if (!out->tokens) { api_oom(err); goto done; }
    cJSON_ArrayForEach(t, toks) {
        if (!api_token_id(t, &out->tokens[i])) {
            BAD(err, "tokens", "invalid_value", "tokens[%d] is not a token id (an integer >= 0)", i);
            goto done;
        }
        i++;
    }
    out->n_tokens = i;
    rc = 0;
done:
    cJSON_Delete(root);
    if (rc) el_api_tok_request_free(out);
    return rc;
}

void el_api_tok_request_free(el_api_tok_request *r) {
    if (!r) return;
    cJSON_free(r->content);
    free(r->tokens);
    memset(r, 0, sizeof *r);
    r->parse_special = true;
}

char *el_api_tokenize_response(const int32_t *toks, int n) {
    /* built by hand: a cJSON node per token would cost ~64 bytes each */
    el_buf b = {0};
    bool ok = el_buf_str(&b, "{\"tokens\":[");
    for (int i = 0; ok && i < n; i++) {
        char num[16];
        int k = snprintf(num, sizeof num, i ? ",%d" : "%d", (int)toks[i]);
        ok = el_buf_append(&b, num, (size_t)k);
    }
    if (ok) ok = el_buf_str(&b, "]}");
    if (!ok) { el_buf_free(&b); return NULL; }
    return b.p;
}

char *el_api_tokenize_pieces_response(const int32_t *toks, int n, const char *pieces, const size_t *off) {
    el_buf b = {0};
    bool ok = el_buf_str(&b, "{\"tokens\":[");
    for (int i = 0; ok && i < n; i++) {
        char num[40];
        int k = snprintf(num, sizeof num, "%s{\"id\":%d,\"piece\":", i ? "," : "", (int)toks[i]);
        ok = el_buf_append(&b, num, (size_t)k);
        const unsigned char *p = (const unsigned char *)pieces + off[i];
        const size_t len = off[i + 1] - off[i];
        if (ok && el_utf8_check(p, len) == len) {
            ok = el_api_json_string(&b, (const char *)p, len);
        } else {
            ok = ok && el_buf_str(&b, "[");
            for (size_t j = 0; ok && j < len; j++) {
                k = snprintf(num, sizeof num, j ? ",%u" : "%u", (unsigned)p[j]);
                ok = el_buf_append(&b, num, (size_t)k);
            }
            ok = ok && el_buf_str(&b, "]");
        }
        ok = ok && el_buf_str(&b, "}");
    }
    if (ok) ok = el_buf_str(&b, "]}");
    if (!ok) { el_buf_free(&b); return NULL; }
    return b.p;
}

char *el_api_detokenize_response(const char *text, size_t len) {
    el_buf b = {0};
    bool ok = el_buf_str(&b, "{\"content\":") && el_api_json_string(&b, text, len) && el_buf_str(&b, "}");
    if (!ok) { el_buf_free(&b); return NULL; }
    return b.p;
}

/* ---- embeddings ------------------------------------------------------------ */

void el_api_embd_request_free(el_api_embd_request *r) {
    if (!r) return;
    for (int i = 0; r->inputs && i < r->n_inputs; i++) {
        for (int k = 0; r->inputs[i].parts && k < r->inputs[i].n_parts; k++) free(r->inputs[i].parts[k].text);
        free(r->inputs[i].parts);
    }
    free(r->inputs);
    free(r->model);
    memset(r, 0, sizeof *r);
    r->normalize = 2;
}

/* One input's parts from a string or an array of ids and strings. *budget:
 * parts left for the whole request. */
static int embd_input(const cJSON *it, int idx, const char *param, el_api_embd_input *dst, int *budget,
                      el_api_error *err) {
    if (cJSON_IsString(it)) {
        if (!it->valuestring[0]) {
            BAD(err, param, "invalid_value", "%s[%d] is empty", param, idx);
            return -1;
        }
        if (*budget < 1) goto too_many;
        dst->parts = calloc(1, sizeof *dst->parts);
        if (!dst->parts) return api_oom(err);
        dst->n_parts = 1;
        (*budget)--;
        return (dst->parts[0].text = api_dupstr(it->valuestring, err)) ? 0 : -1;
    }
    if (cJSON_IsObject(it)) {
        BAD(err, param, "unsupported_value", "%s[%d]: object entries (multimodal content, prompt_string) are not "
            "supported; give a string or an array of token ids", param, idx);
        return -1;
    }
    if (!cJSON_IsArray(it)) {
        BAD(err, param, "invalid_type", "%s[%d]: expected a string or an array of token ids, got %s", param, idx,
            api_jtype(it));
        return -1;
    }
    int n = cJSON_GetArraySize(it);
    if (n == 0) {
        BAD(err, param, "invalid_value", "%s[%d] is empty", param, idx);
        return -1;
    }
    if (n > *budget) goto too_many;
    dst->parts = calloc((size_t)n, sizeof *dst->parts);
    if (!dst->parts) return api_oom(err);
    dst->n_parts = n;
    *budget -= n;
    int k = 0;
    bool any = false;
    const cJSON *e;
    cJSON_ArrayForEach(e, it) {
        if (cJSON_IsString(e)) {
            if (!(dst->parts[k].text = api_dupstr(e->valuestring, err))) return -1;
            any = any || e->valuestring[0];
        } else if (cJSON_IsNumber(e)) {
            if (!api_token_id(e, &dst->parts[k].tok)) {
                BAD(err, param, "invalid_value", "%s[%d][%d] is not a token id (an integer >= 0)", param, idx, k);
                return -1;
            }
            any = true;
        } else {
            BAD(err, param, "invalid_type", "%s[%d][%d]: expected a token id or a string, got %s", param, idx, k,
                api_jtype(e));
            return -1;
        }
        k++;
    }
    if (!any) {
        BAD(err, param, "invalid_value", "%s[%d] is empty", param, idx);
        return -1;
    }
    return 0;
too_many:
    BAD(err, param, "invalid_value", "'%s' has more than %d parts in all", param, EL_API_MAX_PROMPT_PARTS);
    return -1;
}

static int embd_fields(const cJSON *root, el_api_embd_request *out, el_api_error *err) {
    const cJSON *input, *content, *fmt, *norm, *dims, *model, *user;
    if (tok_field(root, "input", &input, err) || tok_field(root, "content", &content, err) ||
        tok_field(root, "encoding_format", &fmt, err) || tok_field(root, "embd_normalize", &norm, err) ||
        tok_field(root, "dimensions", &dims, err) || tok_field(root, "model", &model, err) ||
        tok_field(root, "user", &user, err))
        return -1;
    const char *param = input ? "input" : "content";
    const cJSON *p = input ? input : content;
    out->oai = input != NULL;
    if (!p) {
        BAD(err, "input", "missing_required_parameter", "\"input\" or \"content\" must be provided");
        return -1;
    }
    if (fmt) {
        if (!cJSON_IsString(fmt)) return api_type_error(err, "encoding_format", "a string", fmt);
        if (!strcmp(fmt->valuestring, "base64")) out->base64 = true;
        else if (strcmp(fmt->valuestring, "float")) {
            BAD(err, "encoding_format", "invalid_value", "'encoding_format' must be \"float\" or \"base64\"");
            return -1;
        }
    }
    if (api_opt_int(norm, "embd_normalize", -1, EL_API_MAX_EMBD_NORMALIZE, &out->normalize, NULL, err) ||
        api_opt_int(dims, "dimensions", 1, 1 << 20, &out->dimensions, NULL, err) ||
        api_opt_str(model, "model", &out->model, err))
        return -1;
    if (user && !cJSON_IsString(user)) return api_type_error(err, "user", "a string", user);

    int budget = EL_API_MAX_PROMPT_PARTS;
    bool one = cJSON_IsString(p) || cJSON_IsObject(p);
    if (cJSON_IsArray(p)) { /* an array holding a token id is one input of ids and strings (llama-server) */
        const cJSON *e;
        cJSON_ArrayForEach(e, p) one = one || cJSON_IsNumber(e);
        if (cJSON_GetArraySize(p) == 0) {
            BAD(err, param, "invalid_value", "\"%s\" must not be empty", param);
            return -1;
        }
    } else if (!one) {
        return api_type_error(err, param, "a string, an array of token ids, or an array of those", p);
    }
    int n = one ? 1 : cJSON_GetArraySize(p);
    if (n > EL_API_MAX_EMBD_INPUTS) {
        BAD(err, param, "invalid_value", "'%s' has %d inputs; at most %d are allowed", param, n,
            EL_API_MAX_EMBD_INPUTS);
        return -1;
    }
    out->inputs = calloc((size_t)n, sizeof *out->inputs);
    if (!out->inputs) return api_oom(err);
    out->n_inputs = n;
    if (one) return embd_input(p, 0, param, &out->inputs[0], &budget, err);
    int i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, p) {
        if (embd_input(e, i, param, &out->inputs[i], &budget, err)) return -1;
        i++;
    }
    return 0;
}

int el_api_parse_embeddings(const char *body, size_t len, el_api_embd_request *out, el_api_error *err) {
    if (!out) return api_no_output(err, "el_api_parse_embeddings");
    memset(out, 0, sizeof *out);
    out->normalize = 2;
    cJSON *root = api_parse_root(body, len, err);
    if (!root) return -1;
    int rc = embd_fields(root, out, err);
    cJSON_Delete(root);
    if (rc) el_api_embd_request_free(out);
    return rc;
}

void el_api_embd_normalize(float *v, int n, int mode) {
    double sum = 0.0;
    if (mode < 0) return;
    if (mode == 0) {
        for (int i = 0; i < n; i++) sum = fabs(v[i]) > sum ? fabs(v[i]) : sum;
        sum /= 32760.0;
    } else if (mode == 2) {
        for (int i = 0; i < n; i++) sum += (double)v[i] * v[i];
        sum = sqrt(sum);
    } else {
        for (int i = 0; i < n; i++) sum += pow(fabs(v[i]), mode);
        sum = pow(sum, 1.0 / mode);
    }
    const float k = sum > 0.0 && isfinite(sum) ? (float)(1.0 / sum) : 0.0f;
    for (int i = 0; i < n; i++) v[i] *= k;
}

static bool put_floats(el_buf *b, const float *v, int n) {
    bool ok = el_buf_str(b, "[");
    for (int i = 0; ok && i < n; i++) {
        char num[32];
        /* JSON has no NaN or infinity; el_embed refuses those, so this is only a guard */
        int k = isfinite(v[i]) ? snprintf(num, sizeof num, i ? ",%.9g" : "%.9g", (double)v[i])
                               : snprintf(num, sizeof num, i ? ",0" : "0");
        ok = el_buf_append(b, num, (size_t)k);
    }
    return ok && el_buf_str(b, "]");
}

static bool put_base64(el_buf *b, const float *v, int n) {
    static const char T[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const size_t len = (size_t)n * 4;
    bool ok = el_buf_str(b, "\"");
    for (size_t i = 0; ok && i < len; i += 3) {
        uint8_t in[3] = {0, 0, 0};
        size_t k = len - i < 3 ? len - i : 3;
        for (size_t j = 0; j < k; j++) { /* float32 little-endian, byte by byte */
            uint32_t bits;
            memcpy(&bits, &v[(i + j) / 4], 4);
            in[j] = (uint8_t)(bits >> (8 * ((i + j) % 4)));
        }
        char o[4] = {T[in[0] >> 2], T[(in[0] & 3) << 4 | in[1] >> 4], k > 1 ? T[(in[1] & 15) << 2 | in[2] >> 6] : '=',
                     k > 2 ? T[in[2] & 63] : '='};
        ok = el_buf_append(b, o, 4);
    }
    return ok && el_buf_str(b, "\"");
}

char *el_api_embeddings_response(const char *model, const float *const *vecs, int n_vecs, int dim, bool base64,
                                 int prompt_tokens) {
    el_buf b = {0};
    char num[96];
    bool ok = el_buf_str(&b, "{\"model\":") && el_api_json_string(&b, model ? model : "", model ? strlen(model) : 0);
    snprintf(num, sizeof num, ",\"object\":\"list\",\"usage\":{\"prompt_tokens\":%d,\"total_tokens\":%d},\"data\":[",
             prompt_tokens, prompt_tokens);
    ok = ok && el_buf_str(&b, num);
    for (int i = 0; ok && i < n_vecs; i++) {
        ok = el_buf_str(&b, i ? ",{\"embedding\":" : "{\"embedding\":") &&
             (base64 ? put_base64(&b, vecs[i], dim) : put_floats(&b, vecs[i], dim));
        snprintf(num, sizeof num, ",\"index\":%d,\"object\":\"embedding\"%s}", i,
                 base64 ? ",\"encoding_format\":\"base64\"" : "");
        ok = ok && el_buf_str(&b, num);
    }
    ok = ok && el_buf_str(&b, "]}");
    if (!ok) { el_buf_free(&b); return NULL; }
    return b.p;
}

char *el_api_embeddings_native(const float *const *vecs, const int *rows, int n_inputs, int dim) {
    el_buf b = {0};
    bool ok = el_buf_str(&b, "[");
    for (int i = 0; ok && i < n_inputs; i++) {
        char num[48];
        snprintf(num, sizeof num, "%s{\"index\":%d,\"embedding\":[", i ? "," : "", i);
        ok = el_buf_str(&b, num);
        for (int r = 0; ok && r < rows[i]; r++)
            ok = (!r || el_buf_str(&b, ",")) && put_floats(&b, vecs[i] + (size_t)r * (size_t)dim, dim);
        ok = ok && el_buf_str(&b, "]}");
    }
    ok = ok && el_buf_str(&b, "]");
    if (!ok) { el_buf_free(&b); return NULL; }
    return b.p;
}
