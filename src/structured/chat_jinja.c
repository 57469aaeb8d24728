/*
 * chat_jinja.c — chat messages rendered by a model's own Jinja template
 * (see chat_jinja.h): el_chat_msg / el_chat_tool into Jinja values, the
 * content mask of the rendering into el_chat_text's template ranges.
 */
#include "structured/chat_jinja.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "runtime/jinja.h"
#include "runtime/jinja_json.h"
#include "runtime/model.h"
#include "util/error.h"
#include "util/textfile.h"

struct el_chat_jinja {
    el_jinja *t;
    char *bos, *eos;
    el_tool_format tf; /* the tool-call format its text writes (toolformat.h el_tool_format_detect) */
};

static char *dup0(const char *s) {
    size_t n = strlen(s ? s : "");
    char *p = malloc(n + 1);
    if (p) memcpy(p, s ? s : "", n + 1);
    return p;
}

el_chat_jinja *el_chat_jinja_new(const char *tmpl, size_t len, const char *bos, const char *eos, el_error *err) {
    el_chat_jinja *cj = calloc(1, sizeof *cj);
    if (!cj || !(cj->bos = dup0(bos)) || !(cj->eos = dup0(eos))) {
        el_chat_jinja_free(cj);
        el_set_error(err, EL_ERR_NOMEM, "out of memory");
        return NULL;
    }
    cj->t = el_jinja_parse(tmpl, len, err);
    if (!cj->t) {
        el_chat_jinja_free(cj);
        return NULL;
    }
    char *z = malloc(len + 1); /* the detector reads a C string */
    if (!z) {
        el_chat_jinja_free(cj);
        el_set_error(err, EL_ERR_NOMEM, "out of memory");
        return NULL;
    }
    memcpy(z, tmpl, len);
    z[len] = 0;
    cj->tf = el_tool_format_detect(z);
    free(z);
    return cj;
}

/* the text of special token id (its piece with special rendering); "" if none */
static void token_text(const el_model *m, int32_t id, char *buf, int cap) {
    buf[0] = 0;
    if (!m || id < 0) return;
    int n = el_token_to_piece(m, id, buf, cap - 1, true);
    buf[n > 0 && n < cap ? n : 0] = 0;
}

static el_chat_jinja *with_model_tokens(const char *tmpl, size_t len, const el_model *m, el_error *err) {
    char bos[128], eos[128];
    token_text(m, m ? el_token_bos(m) : -1, bos, sizeof bos);
    token_text(m, m ? el_token_eos(m) : -1, eos, sizeof eos);
    return el_chat_jinja_new(tmpl, len, bos, eos, err);
}

el_chat_jinja *el_chat_jinja_for_model(const el_model *m, el_error *err) {
    const char *tmpl = el_model_chat_template(m);
    if (!tmpl) {
        el_set_error(err, EL_ERR_MISSING, "the model has no tokenizer.chat_template");
        return NULL;
    }
    return with_model_tokens(tmpl, strlen(tmpl), m, err);
}

el_chat_jinja *el_chat_jinja_from_file(const char *path, const el_model *m, el_error *err) {
    char msg[300];
    size_t len;
    char *text = el_text_read_file(path, EL_JINJA_MAX_SOURCE, &len, msg, sizeof msg);
    if (!text) {
        el_set_error(err, EL_ERR_IO, "%s", msg);
        return NULL;
    }
    el_chat_jinja *cj = with_model_tokens(text, len, m, err);
    if (!cj) {
        char m2[sizeof err->msg];
        snprintf(m2, sizeof m2, "%.120s: %.250s", path, err->msg);
        el_set_error(err, err->code, "%s", m2);
    }
    free(text);
    return cj;
}

el_tool_format el_chat_jinja_tool_format(const el_chat_jinja *cj) { return cj ? cj->tf : EL_TF_NONE; }

void el_chat_jinja_free(el_chat_jinja *cj) {
    if (!cj) return;
    el_jinja_free(cj->t);
    free(cj->bos);
    free(cj->eos);
    free(cj);
}

/* a JSON text as a content value (the text itself when it does not parse) */
static jv *json_content(el_jctx *c, const char *text) {
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    jv *v = j ? el_jinja_from_json_content(c, j) : el_jv_str_content(c, text ? text : "", text ? strlen(text) : 0);
    cJSON_Delete(j);
    return v;
}

static int set(el_jctx *c, jv *d, const char *k, jv *v) { return v ? el_jv_dict_set(c, d, k, strlen(k), v) : -1; }
static jv *content_str(el_jctx *c, const char *s) { return el_jv_str_content(c, s ? s : "", s ? strlen(s) : 0); }

static int build_vars(el_jctx *c, const el_chat_jinja *cj, const el_chat_msg *msgs, int n_msgs,
                      const el_chat_tool *tools, int n_tools, bool agp) {
    jv *list = el_jv_list(c);
    if (!list) return -1;
    for (int i = 0; i < n_msgs; i++) {
        jv *d = el_jv_dict(c);
        if (!d || set(c, d, "role", content_str(c, msgs[i].role)) || set(c, d, "content", content_str(c, msgs[i].content)))
            return -1;
        if (msgs[i].n_tool_calls > 0) {
            jv *calls = el_jv_list(c);
            if (!calls) return -1;
            for (int k = 0; k < msgs[i].n_tool_calls; k++) {
                const el_chat_tool_call *tc = &msgs[i].tool_calls[k];
                jv *call = el_jv_dict(c), *fn = el_jv_dict(c);
                if (!call || !fn) return -1;
                if (tc->id && set(c, call, "id", content_str(c, tc->id))) return -1;
                if (set(c, call, "type", el_jv_str(c, "function", 8)) || set(c, fn, "name", content_str(c, tc->name)) ||
                    set(c, fn, "arguments", json_content(c, tc->arguments)) || set(c, call, "function", fn) ||
                    el_jv_list_push(c, calls, call))
                    return -1;
            }
            if (set(c, d, "tool_calls", calls)) return -1;
        }
        if (msgs[i].tool_call_id && set(c, d, "tool_call_id", content_str(c, msgs[i].tool_call_id))) return -1;
        if (el_jv_list_push(c, list, d)) return -1;
    }
    if (el_jctx_set(c, "messages", list)) return -1;
    if (n_tools > 0) {
        jv *tl = el_jv_list(c);
        if (!tl) return -1;
        for (int i = 0; i < n_tools; i++)
            if (el_jv_list_push(c, tl, json_content(c, tools[i].json))) return -1;
        if (el_jctx_set(c, "tools", tl)) return -1;
    }
    /* today's date, as llama.cpp gives the templates that print it (Llama 3.x: date_string,
     * "26 Jul 2024"; firefunction v2: datetime); the request's chat_template_kwargs override them */
    time_t now = time(NULL);
    struct tm tm;
    char ds[64], dt[96];
    if (!localtime_r(&now, &tm)) memset(&tm, 0, sizeof tm);
    size_t nds = strftime(ds, sizeof ds, "%d %b %Y", &tm), ndt = strftime(dt, sizeof dt, "%b %d %Y %H:%M:%S GMT", &tm);
    if (el_jctx_set(c, "date_string", el_jv_str(c, ds, nds)) || el_jctx_set(c, "datetime", el_jv_str(c, dt, ndt)))
        return -1;
    if (el_jctx_set(c, "add_generation_prompt", el_jv_bool(c, agp)) ||
        el_jctx_set(c, "bos_token", el_jv_str(c, cj->bos, strlen(cj->bos))) ||
        el_jctx_set(c, "eos_token", el_jv_str(c, cj->eos, strlen(cj->eos))))
        return -1;
    return 0;
}

int el_chat_jinja_render(const el_chat_jinja *cj, const el_chat_msg *msgs, int n_msgs, const el_chat_tool *tools,
                         int n_tools, bool add_generation_prompt, const char *kwargs_json, el_chat_text *out,
                         el_error *err) {
    memset(out, 0, sizeof *out);
    el_jctx *c = el_jctx_new(NULL);
    if (!c) return el_set_error(err, EL_ERR_NOMEM, "out of memory");
    int rc = 0;
    if (build_vars(c, cj, msgs, n_msgs, tools, n_tools, add_generation_prompt) != 0) {
        rc = el_set_error(err, EL_ERR_NOMEM, "chat template variables: out of memory");
        goto done;
    }
    if (kwargs_json && *kwargs_json) {
        cJSON *kw = cJSON_Parse(kwargs_json);
        int bad = !cJSON_IsObject(kw) || el_jctx_set_json(c, kw) != 0;
        cJSON_Delete(kw);
        if (bad) {
            rc = el_set_error(err, EL_ERR_TEMPLATE, "chat_template_kwargs must be a JSON object");
            goto done;
        }
    }
    char *text;
    size_t len;
    uint8_t *mask;
    rc = el_jinja_render_mask(cj->t, c, &text, &len, &mask, err);
    if (rc) goto done;
    size_t skip = 0, bl = strlen(cj->bos);
    if (bl && len >= bl && memcmp(text, cj->bos, bl) == 0 && (!mask || !memchr(mask, 1, bl))) skip = bl;
    /* template ranges: the runs of bytes not from content, after the dropped BOS */
    size_t n_rg = 0;
    for (size_t i = skip; i < len; i++)
        if ((!mask || !mask[i]) && (i == skip || (mask && mask[i - 1]))) n_rg++;
    out->tmpl = n_rg ? malloc(n_rg * sizeof *out->tmpl) : NULL;
    if (n_rg && !out->tmpl) {
        free(text);
        free(mask);
        rc = el_set_error(err, EL_ERR_NOMEM, "out of memory");
        goto done;
    }
    int k = -1;
    for (size_t i = skip; i < len; i++) {
        if (mask && mask[i]) continue;
        if (i == skip || (mask && mask[i - 1])) out->tmpl[++k][0] = i - skip;
        out->tmpl[k][1] = i + 1 - skip;
    }
    out->n_tmpl = (int)n_rg;
    if (skip) memmove(text, text + skip, len - skip + 1);
    out->text = text;
    out->len = len - skip;
    free(mask);
done:
    el_jctx_free(c);
    return rc;
}

int el_chat_jinja_tokenize(const el_model *m, const el_chat_jinja *cj, const el_chat_msg *msgs, int n_msgs,
                           const el_chat_tool *tools, int n_tools, bool add_generation_prompt, const char *kwargs_json,
                           int flags, int32_t **out, el_error *err) {
    *out = NULL;
    el_chat_text t;
    int rc = el_chat_jinja_render(cj, msgs, n_msgs, tools, n_tools, add_generation_prompt, kwargs_json, &t, err);
    if (rc) return rc == EL_ERR_NOMEM ? -2 : -1;
    if (t.len > (size_t)INT32_MAX / 2 - 16) { el_chat_text_free(&t); return -3; }
    int cap = (int)t.len + 16, n = -1;
    int32_t *ids = NULL;
    for (int attempt = 0; attempt < 2; attempt++) {
        free(ids);
        ids = malloc((size_t)cap * sizeof *ids);
        n = ids ? el_chat_tokenize_text(m, &t, 0, flags, ids, cap) : -2;
        if (n <= cap) break;
        cap = n;
    }
    el_chat_text_free(&t);
    if (n < 0 || n > cap) {
        free(ids);
        return n == -2 ? -2 : -3;
    }
    *out = ids;
    return n;
}
