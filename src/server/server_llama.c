/*
 * server_llama.c — llama-server's endpoints beside generation: /props,
 * /slots and the slot actions, /lora-adapters, /apply-template, the chat
 * token count (/v1/chat/completions/input_tokens), /tokenize and
 * /detokenize.
 *
 * /props and /slots are read under srv->mu: a slot's `cur` is set when it
 * pops a request and cleared with the terminal transition, so a running
 * request's fields stay alive while they are read. Their sampler fields
 * (generation_settings, params) are srv_settings_cjson's, which /completion's
 * final reply carries too (server_stream.c).
 *
 * Slot actions (POST /slots/N?action=save|restore|erase, h_slot_action, file
 * format in slot_file.h; 501 without --slot-save-path) hold an idle slot
 * (sl->held: its thread takes no request) and work on its session from the
 * connection's thread.
 *
 * Chats are rendered here for every route (srv_chat_render_gen,
 * srv_chat_tokenize): a final assistant message is llama-server's prefill,
 * continued rather than closed.
 */
#include "server/server_internal.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "server/slot_file.h"
#include "structured/chat_jinja.h"

/* llama-server's sampler fields of a request as a cJSON object (its
 * "generation_settings"; /props and /slots "params"). NULL on OOM. */
cJSON *srv_settings_cjson(const el_server *s, const el_api_request *a, const el_generate_params *gp) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    const el_sampling *sp = &gp->sampling;
    cJSON_AddNumberToObject(o, "n_ctx", s->n_ctx);
    cJSON_AddNumberToObject(o, "n_predict", a->has_max_tokens || a->kind != EL_API_CHAT ? a->max_tokens : -1);
    cJSON_AddStringToObject(o, "model", s->model_id);
    cJSON_AddNumberToObject(o, "seed", a->has_seed ? (double)a->seed : 4294967295.0);
    cJSON_AddNumberToObject(o, "temperature", sp->temp);
    cJSON_AddNumberToObject(o, "dynatemp_range", 0);
    cJSON_AddNumberToObject(o, "dynatemp_exponent", 1);
    cJSON_AddNumberToObject(o, "top_k", sp->top_k);
    cJSON_AddNumberToObject(o, "top_p", sp->top_p);
    cJSON_AddNumberToObject(o, "min_p", sp->min_p);
    cJSON_AddNumberToObject(o, "xtc_probability", 0);
    cJSON_AddNumberToObject(o, "xtc_threshold", 0.1);
    cJSON_AddNumberToObject(o, "typical_p", 1);
    cJSON_AddNumberToObject(o, "repeat_last_n", sp->penalty_last_n);
    cJSON_AddNumberToObject(o, "repeat_penalty", sp->repeat_penalty);
    cJSON_AddNumberToObject(o, "presence_penalty", sp->presence_penalty);
    cJSON_AddNumberToObject(o, "frequency_penalty", sp->freq_penalty);
    cJSON_AddNumberToObject(o, "dry_multiplier", 0);
    cJSON_AddNumberToObject(o, "mirostat", 0);
    cJSON *stop = cJSON_AddArrayToObject(o, "stop");
    for (int i = 0; stop && i < a->n_stop; i++) cJSON_AddItemToArray(stop, cJSON_CreateString(a->stop[i]));
    cJSON_AddNumberToObject(o, "max_tokens", a->has_max_tokens || a->kind != EL_API_CHAT ? a->max_tokens : -1);
    cJSON_AddNumberToObject(o, "n_keep", 0);
    cJSON_AddNumberToObject(o, "n_discard", 0);
    cJSON_AddBoolToObject(o, "ignore_eos", gp->ignore_eos);
    cJSON_AddBoolToObject(o, "stream", a->stream);
    cJSON_AddNumberToObject(o, "n_probs", a->kind == EL_API_NATIVE ? a->n_probs : 0);
    cJSON_AddNumberToObject(o, "min_keep", 0);
    cJSON_AddBoolToObject(o, "cache_prompt", a->cache_prompt);
    /* llama-server's shape: [{"bias", "token"}], a banned token's bias (-inf there, -1e30 here) as null */
    cJSON *lb = cJSON_AddArrayToObject(o, "logit_bias");
    for (int i = 0; lb && i < a->n_logit_bias; i++) {
        cJSON *e = cJSON_CreateObject();
        if (!e) break;
        if (a->logit_bias[i] <= -1e30f) cJSON_AddNullToObject(e, "bias");
        else cJSON_AddNumberToObject(e, "bias", a->logit_bias[i]);
        cJSON_AddNumberToObject(e, "token", a->logit_bias_id[i]);
        cJSON_AddItemToArray(lb, e);
    }
    static const char *const samplers[] = {"penalties", "top_k", "top_p", "min_p", "temperature"};
    cJSON *sm = cJSON_CreateStringArray(samplers, 5);
    if (sm) cJSON_AddItemToObject(o, "samplers", sm);
    return o;
}

/* The defaults /completion applies (llama-server's, then --temp/--seed/--n-predict) as a
 * slot-shaped object: {id, id_task, n_ctx, speculative, is_processing, params, next_token}. */
static cJSON *slot_cjson(el_server *s, int id, long id_task, bool busy, const el_api_request *a, int n_decoded) {
    el_api_request def;
    el_api_error e;
    bool own = !a;
    if (own) {
        static const char body[] = "{\"prompt\":\"\"}";
        if (el_api_parse_native(body, sizeof body - 1, &def, &e)) return NULL;
        srv_apply_defaults(s, &def);
        a = &def;
    }
    el_generate_params gp;
    memset(&gp, 0, sizeof gp);
    gp.ignore_eos = a->ignore_eos;
    gp.sampling = srv_sampling_of(a);
    cJSON *o = cJSON_CreateObject(), *params = srv_settings_cjson(s, a, &gp), *nt = cJSON_CreateObject();
    if (own) el_api_request_free(&def);
    if (!o || !params || !nt) {
        cJSON_Delete(o);
        cJSON_Delete(params);
        cJSON_Delete(nt);
        return NULL;
    }
    cJSON_AddNumberToObject(o, "id", id);
    cJSON_AddNumberToObject(o, "id_task", (double)id_task);
    cJSON_AddNumberToObject(o, "n_ctx", s->n_ctx);
    cJSON_AddBoolToObject(o, "speculative", false);
    cJSON_AddBoolToObject(o, "is_processing", busy);
    cJSON_AddItemToObject(o, "params", params);
    cJSON_AddBoolToObject(nt, "has_next_token", busy);
    cJSON_AddNumberToObject(nt, "n_remain", busy && a->max_tokens > 0 ? a->max_tokens - n_decoded : -1);
    cJSON_AddNumberToObject(nt, "n_decoded", n_decoded);
    cJSON_AddItemToObject(o, "next_token", nt);
    return o;
}

/* GET /props: llama-server's server properties. */
enum MHD_Result srv_h_props(el_server *s, struct MHD_Connection *c, conn_ctx *cc) {
    (void)cc;
    cJSON *root = cJSON_CreateObject(), *def = slot_cjson(s, 0, -1, false, NULL, 0);
    if (!root || !def) {
        cJSON_Delete(root);
        cJSON_Delete(def);
        return srv_send_error(c, 500, "server_error", NULL, NULL, "out of memory");
    }
    const char *tmpl = el_model_chat_template(s->model);
    cJSON_AddItemToObject(root, "default_generation_settings", def);
    cJSON_AddNumberToObject(root, "total_slots", s->n_slots);
    cJSON_AddStringToObject(root, "model_path", s->model_path);
    cJSON_AddStringToObject(root, "model_alias", s->model_id);
    cJSON_AddNumberToObject(root, "n_ctx", s->n_ctx);
    /* the model's own template; chat_template_engine says what renders chats: "jinja" (that
     * template, or --chat-template-file) or "builtin" (the family), chat_template_source why */
    el_buf t = {0};
    if (tmpl && el_api_json_string(&t, tmpl, strlen(tmpl))) cJSON_AddRawToObject(root, "chat_template", t.p);
    else cJSON_AddStringToObject(root, "chat_template", "");
    el_buf_free(&t);
    cJSON_AddStringToObject(root, "chat_template_family", el_chat_family_name(s->fam));
    cJSON_AddStringToObject(root, "chat_template_engine", s->cj ? "jinja" : "builtin");
    cJSON_AddStringToObject(root, "tool_call_format", s->tf != EL_TF_NONE ? el_tool_format_name(s->tf) : el_chat_family_name(s->fam));
    cJSON_AddStringToObject(root, "chat_template_source", s->fam_desc);
    cJSON *mod = cJSON_AddObjectToObject(root, "modalities");
    if (mod) {
        cJSON_AddBoolToObject(mod, "vision", false);
        cJSON_AddBoolToObject(mod, "audio", false);
    }
    cJSON_AddStringToObject(root, "build_info", "edgellm " EL_VERSION_STRING);
    cJSON_AddStringToObject(root, "system_fingerprint", s->fingerprint);
    cJSON_AddBoolToObject(root, "is_sleeping", false);
    return srv_send_cjson(c, MHD_HTTP_OK, root);
}

/* GET /slots: each slot's state (501 with --no-slots). */
enum MHD_Result srv_h_slots(el_server *s, struct MHD_Connection *c, conn_ctx *cc) {
    (void)cc;
    if (s->p.no_slots)
        return srv_send_error(c, 501, "not_supported_error", NULL, "not_supported",
                              "this server has the slots endpoint disabled (--no-slots)");
    cJSON *arr = cJSON_CreateArray();
    if (!arr) return srv_send_error(c, 500, "server_error", NULL, NULL, "out of memory");
    /* under the lock: a running request and its fields stay alive while read */
    pthread_mutex_lock(&s->mu);
    bool ok = true;
    for (int i = 0; ok && i < s->n_slots; i++) {
        const slot *sl = &s->slots[i];
        el_req *r = sl->cur;
        cJSON *o = slot_cjson(s, i, r ? sl->n_tasks : -1, r != NULL, r ? &r->api : NULL,
                              r ? atomic_load(&r->n_decoded) : 0);
        /* "params" are a running request's (llama-server lists none for a slot without a task) */
        if (o && !r) cJSON_DeleteItemFromObjectCaseSensitive(o, "params");
        /* the prompt cache: tokens the slot holds, and the last prompt's reused / evaluated split */
        if (o && (!cJSON_AddNumberToObject(o, "n_prompt_tokens", sl->n_cache) ||
                  !cJSON_AddNumberToObject(o, "n_prompt_tokens_cache", sl->last_reused) ||
                  !cJSON_AddNumberToObject(o, "n_prompt_tokens_processed", sl->last_processed) ||
                  !cJSON_AddNumberToObject(o, "n_cache_tokens", sl->n_cache))) {
            cJSON_Delete(o);
            o = NULL;
        }
        if (o) cJSON_AddItemToArray(arr, o);
        else ok = false;
    }
    pthread_mutex_unlock(&s->mu);
    if (!ok) {
        cJSON_Delete(arr);
        return srv_send_error(c, 500, "server_error", NULL, NULL, "out of memory");
    }
    return srv_send_cjson(c, MHD_HTTP_OK, arr);
}

/* ---- slot actions ------------------------------------------------------- */

/* The "filename" of a slot action's body: 0 with name filled, or -1 with e
 * filled (400: not JSON, no string, a NUL escape, not a plain file name). */
static int slot_filename(const conn_ctx *cc, char *name, size_t cap, el_api_error *e) {
    const char *body = cc->body.p ? cc->body.p : "";
    cJSON *root = cc->body.len ? cJSON_ParseWithLength(body, cc->body.len) : NULL;
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(root, "filename");
    int rc = -1;
    el_error ne;
    if (!cJSON_IsString(f) || !f->valuestring) {
        el_api_set_error(e, 400, "invalid_request_error", "filename", "invalid_value",
                         "the body must be a JSON object with a string \"filename\"");
    } else if (memmem(body, cc->body.len, "\\u0000", 6) || memchr(body, 0, cc->body.len)) {
        el_api_set_error(e, 400, "invalid_request_error", "filename", "invalid_value", "the file name holds a NUL byte");
    } else if (el_slot_name_check(f->valuestring, strlen(f->valuestring), &ne)) {
        el_api_set_error(e, 400, "invalid_request_error", "filename", "invalid_value", "%s", ne.msg);
    } else {
        snprintf(name, cap, "%s", f->valuestring);
        rc = 0;
    }
    cJSON_Delete(root);
    return rc;
}

/* POST /slots/{id}?action=save|restore|erase (llama-server's slot actions).
 * 501 without --slot-save-path (as llama-server, for every action); 400 for
 * another action or a bad file name; 409 while the slot runs a request or
 * another action. The action holds the slot (sl->held: its thread takes no
 * request meanwhile) and works on its session from this thread; restore
 * validates the whole file before changing the slot (400 with why). */
enum MHD_Result srv_h_slot_action(el_server *s, struct MHD_Connection *c, conn_ctx *cc) {
    if (!s->slot_dir)
        return srv_send_error(c, 501, "not_supported_error", NULL, "not_supported",
                              "this server does not support slot actions; start it with --slot-save-path DIR");
    const char *action = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "action");
    const int save = action && !strcmp(action, "save"), restore = action && !strcmp(action, "restore"),
              erase = action && !strcmp(action, "erase");
    if (!save && !restore && !erase)
        return srv_send_error(c, 400, "invalid_request_error", "action", "invalid_value",
                              "action must be save, restore or erase (got '%.40s')", action ? action : "");
    el_api_error e;
    memset(&e, 0, sizeof e);
    char name[EL_SLOT_NAME_MAX + 1] = "";
    if (!erase && slot_filename(cc, name, sizeof name, &e)) return srv_send_api_error(c, &e);
    slot *sl = &s->slots[cc->slot_id];
    pthread_mutex_lock(&s->mu);
    const bool busy = sl->cur || sl->held;
    if (!busy) sl->held = true;
    pthread_mutex_unlock(&s->mu);
    if (busy)
        return srv_send_error(c, 409, "invalid_request_error", "id_slot", "slot_busy",
                              "slot %d is busy (running a request or another slot action); retry when it is idle", sl->idx);
    const double t0 = now_s();
    el_error err;
    memset(&err, 0, sizeof err);
    int n = sl->n_cache, rc = 0, os_err = 0;
    size_t bytes = 0;
    if (save) {
        rc = el_slot_save(sl->sess, s->model_sha256, sl->ctoks, n, s->slot_dir, name, &bytes, &os_err, &err);
    } else if (restore) {
        int got = el_slot_restore(sl->sess, s->model_sha256, s->slot_dir, name, sl->ctoks, &bytes, &err);
        if (got >= 0) n = got;
        else rc = -got;
    } else {
        el_session_reset(sl->sess); /* n: the tokens erased */
    }
    const double ms = (now_s() - t0) * 1e3;
    pthread_mutex_lock(&s->mu);
    if (restore && rc == 0) sl->n_cache = n;
    if (erase) sl->n_cache = 0;
    sl->held = false;
    pthread_cond_broadcast(&s->queue_cv); /* requests for this slot may be waiting */
    pthread_mutex_unlock(&s->mu);
    if (rc) {
        const bool io = rc == EL_ERR_IO || rc == EL_ERR_NOMEM;
        /* a full disk (or quota) is 507 Insufficient Storage: the client's retry waits for space, not for a fix */
        const bool full = os_err == ENOSPC || os_err == EDQUOT;
        const int status = save && full ? 507 : save && io ? 500 : 400;
        if (s->p.verbose) fprintf(stderr, "edgellm serve: slot %d: %s %s refused: %s\n", sl->idx, action, name, err.msg);
        return srv_send_error(c, status, status >= 500 ? "server_error" : "invalid_request_error", "filename",
                              save ? "save_failed" : "restore_failed", "slot %d: %s of '%s' failed: %s", sl->idx, action, name,
                              err.msg);
    }
    cJSON *root = cJSON_CreateObject(), *t = NULL;
    bool ok = root && cJSON_AddNumberToObject(root, "id_slot", sl->idx);
    if (ok && erase) {
        ok = cJSON_AddNumberToObject(root, "n_erased", n) != NULL;
    }
    if (ok && !erase) {
        ok = cJSON_AddStringToObject(root, "filename", name) &&
             cJSON_AddNumberToObject(root, save ? "n_saved" : "n_restored", n) &&
             cJSON_AddNumberToObject(root, save ? "n_written" : "n_read", (double)bytes) &&
             (t = cJSON_AddObjectToObject(root, "timings")) && cJSON_AddNumberToObject(t, save ? "save_ms" : "restore_ms", ms);
    }
    if (!ok) {
        cJSON_Delete(root);
        return srv_send_error(c, 500, "server_error", NULL, NULL, "out of memory");
    }
    if (s->p.verbose) fprintf(stderr, "edgellm serve: slot %d: %s %s: %d tokens, %zu bytes\n", sl->idx, action, name, n, bytes);
    return srv_send_cjson(c, MHD_HTTP_OK, root);
}

/* ---- LoRA adapters ------------------------------------------------------ */

/* GET /lora-adapters: llama-server's list (id, path, scale = the default) plus edgellm's residency fields. */
enum MHD_Result srv_h_lora_list(el_server *s, struct MHD_Connection *c, conn_ctx *cc) {
    (void)cc;
    char *json = el_lora_reg_json(s->lora);
    if (!json) return srv_send_error(c, 500, "server_error", NULL, NULL, "out of memory");
    return srv_send_json(c, MHD_HTTP_OK, json);
}

/* POST /lora-adapters [{"id": N, "scale": S}, ...]: the defaults of requests that name no adapters (ids not
 * listed: 0, as llama-server). Running requests keep the set they started with. */
enum MHD_Result srv_h_lora_set(el_server *s, struct MHD_Connection *c, conn_ctx *cc) {
    cJSON *root = cJSON_ParseWithLength(cc->body.p ? cc->body.p : "", cc->body.len);
    int ids[EL_LORA_REG_MAX];
    float sc[EL_LORA_REG_MAX];
    int n = 0;
    char msg[200] = "";
    if (!root || !cJSON_IsArray(root)) snprintf(msg, sizeof msg, "expected a JSON array of {\"id\", \"scale\"} objects");
    const cJSON *e;
    if (!msg[0]) cJSON_ArrayForEach(e, root) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id"), *v = cJSON_GetObjectItemCaseSensitive(e, "scale");
        if (!cJSON_IsObject(e) || !cJSON_IsNumber(id) || id->valuedouble != (double)(int)id->valuedouble ||
            (v && !cJSON_IsNumber(v))) {
            snprintf(msg, sizeof msg, "each entry must be {\"id\": integer, \"scale\": number}");
            break;
        }
        if (n == EL_LORA_REG_MAX) { snprintf(msg, sizeof msg, "more than %d entries", EL_LORA_REG_MAX); break; }
        ids[n] = (int)id->valuedouble;
        sc[n++] = v ? (float)v->valuedouble : 0.0f;
    }
    cJSON_Delete(root);
    if (!msg[0] && (s->lora || n > 0) && el_lora_reg_set_defaults(s->lora, ids, sc, n, msg, sizeof msg) && !msg[0])
        snprintf(msg, sizeof msg, "invalid adapters");
    if (msg[0]) return srv_send_error(c, 400, "invalid_request_error", "lora", "invalid_value", "%s", msg);
    char *ok = strdup("{\"success\":true}");
    if (!ok) return srv_send_error(c, 500, "server_error", NULL, NULL, "out of memory");
    return srv_send_json(c, MHD_HTTP_OK, ok);
}

/* ---- chat templates and tokens ------------------------------------------ */

bool srv_has_chat(const el_server *s) { return s->cj != NULL || s->fam != EL_CHAT_UNKNOWN; }

/* The template variables of one request: --chat-template-kwargs with the request's chat_template_kwargs
 * laid over it (the request's members win). Returns kwargs itself, the server's, or a new string the
 * caller frees (*owned); NULL with *owned set to (char *)-1 when out of memory. */
static const char *merged_kwargs(const el_server *s, const char *kwargs, char **owned) {
    *owned = NULL;
    if (!s->tmpl_kwargs) return kwargs;
    if (!kwargs || !*kwargs) return s->tmpl_kwargs;
    cJSON *base = cJSON_Parse(s->tmpl_kwargs), *req = cJSON_Parse(kwargs);
    if (!cJSON_IsObject(base) || !cJSON_IsObject(req)) { /* the request's error is reported by the renderer */
        cJSON_Delete(base);
        cJSON_Delete(req);
        return kwargs;
    }
    cJSON *it = req->child;
    while (it) {
        cJSON *next = it->next;
        cJSON_DeleteItemFromObjectCaseSensitive(base, it->string);
        cJSON_AddItemToObject(base, it->string, cJSON_DetachItemViaPointer(req, it));
        it = next;
    }
    *owned = cJSON_PrintUnformatted(base);
    cJSON_Delete(base);
    cJSON_Delete(req);
    if (!*owned) *owned = (char *)-1;
    return *owned == (char *)-1 ? NULL : *owned;
}

int srv_chat_render(el_server *s, const el_chat_msg *msgs, int n_msgs, const el_chat_tool *tools, int n_tools,
                    const char *kwargs, el_chat_text *t, char *msg, size_t cap) {
    return srv_chat_render_gen(s, msgs, n_msgs, tools, n_tools, kwargs, true, t, msg, cap);
}

bool srv_chat_is_prefill(const el_chat_msg *msgs, int n_msgs) {
    const el_chat_msg *m = n_msgs >= 2 ? &msgs[n_msgs - 1] : NULL;
    return m && m->role && !strcmp(m->role, "assistant") && m->n_tool_calls == 0;
}

/* The messages rendered as they are (no prefill). */
static int render_plain(el_server *s, const el_chat_msg *msgs, int n_msgs, const el_chat_tool *tools, int n_tools,
                        const char *kwargs, bool add_generation_prompt, el_chat_text *t, char *msg, size_t cap) {
    if (s->cj) {
        el_error err = {0};
        char *owned;
        const char *kw = merged_kwargs(s, kwargs, &owned);
        if (owned == (char *)-1) return -2;
        int rc = el_chat_jinja_render(s->cj, msgs, n_msgs, tools, n_tools, add_generation_prompt, kw, t, &err);
        free(owned);
        if (rc == 0) return 0;
        snprintf(msg, cap, "the messages cannot be rendered with the model's chat template: %s", err.msg);
        return rc == EL_ERR_NOMEM ? -2 : -1;
    }
    int rc = el_chat_render_tools(s->fam, msgs, n_msgs, tools, n_tools, add_generation_prompt, t);
    if (rc == -1) snprintf(msg, cap, "the messages cannot be rendered with the %s chat template", el_chat_family_name(s->fam));
    return rc;
}

/* llama-server's prefill: a final assistant message (after another message, without tool calls) is
 * continued, not closed — the messages before it rendered with the generation prompt, then its text
 * as message content (never parsed for special tokens), whatever add_generation_prompt says (as
 * llama-server, which continues it then). */
int srv_chat_render_gen(el_server *s, const el_chat_msg *msgs, int n_msgs, const el_chat_tool *tools, int n_tools,
                        const char *kwargs, bool add_generation_prompt, el_chat_text *t, char *msg, size_t cap) {
    if (!srv_chat_is_prefill(msgs, n_msgs))
        return render_plain(s, msgs, n_msgs, tools, n_tools, kwargs, add_generation_prompt, t, msg, cap);
    int rc = render_plain(s, msgs, n_msgs - 1, tools, n_tools, kwargs, true, t, msg, cap);
    if (rc) return rc;
    const char *c = msgs[n_msgs - 1].content ? msgs[n_msgs - 1].content : "";
    const size_t cl = strlen(c);
    char *nt = realloc(t->text, t->len + cl + 1);
    if (!nt) {
        el_chat_text_free(t);
        return -2;
    }
    memcpy(nt + t->len, c, cl);
    t->len += cl;
    nt[t->len] = '\0';
    t->text = nt;
    return 0;
}

int srv_chat_tokenize(el_server *s, const el_chat_msg *msgs, int n_msgs, const el_chat_tool *tools, int n_tools,
                      const char *kwargs, int flags, int32_t **out, char *msg, size_t cap) {
    *out = NULL;
    if (srv_chat_is_prefill(msgs, n_msgs)) { /* rendered as srv_chat_render_gen, then tokenized */
        el_chat_text t;
        int rc = srv_chat_render_gen(s, msgs, n_msgs, tools, n_tools, kwargs, true, &t, msg, cap);
        if (rc) return rc;
        if (t.len > (size_t)INT32_MAX / 2 - 16) {
            el_chat_text_free(&t);
            return -3;
        }
        int cap_ids = (int)t.len + 16, n = -1;
        int32_t *ids = NULL;
        for (int attempt = 0; attempt < 2; attempt++) {
            free(ids);
            ids = malloc((size_t)cap_ids * sizeof *ids);
            n = ids ? el_chat_tokenize_text(s->model, &t, 0, flags, ids, cap_ids) : -2;
            if (n <= cap_ids) break;
            cap_ids = n;
        }
        el_chat_text_free(&t);
        if (n < 0 || n > cap_ids) {
            free(ids);
            return n == -2 ? -2 : -3;
        }
        *out = ids;
        return n;
    }
    if (s->cj) {
        el_error err = {0};
        char *owned;
        const char *kw = merged_kwargs(s, kwargs, &owned);
        if (owned == (char *)-1) return -2;
        int n = el_chat_jinja_tokenize(s->model, s->cj, msgs, n_msgs, tools, n_tools, true, kw, flags, out, &err);
        free(owned);
        if (n == -1) snprintf(msg, cap, "the messages cannot be rendered with the model's chat template: %s", err.msg);
        return n;
    }
    int n = el_chat_tokenize_tools(s->model, s->fam, msgs, n_msgs, tools, n_tools, true, flags, out);
    if (n == -1) snprintf(msg, cap, "the messages cannot be rendered with the %s chat template", el_chat_family_name(s->fam));
    return n;
}

/* A chat body (its body dropped once parsed) for a server that has a chat template; 0, or -1 with e filled. */
static int parse_chat(el_server *s, conn_ctx *cc, el_api_request *a, el_api_error *e) {
    if (el_api_parse(EL_API_CHAT, cc->body.p ? cc->body.p : "", cc->body.len, a, e)) return -1;
    el_buf_free(&cc->body);
    if (!srv_has_chat(s)) {
        el_api_request_free(a);
        el_api_set_error(e, 500, "server_error", NULL, "no_chat_template",
                         "the model has no chat template edgellm recognises; restart the server with --chat-template NAME");
        return -1;
    }
    return 0;
}

/* Messages of a chat body rendered with the server's template (with the generation prompt if agp);
 * 0 or -1 with e filled. */
static int render_chat(el_server *s, conn_ctx *cc, bool agp, el_api_request *a, el_chat_text *t, el_api_error *e) {
    if (parse_chat(s, cc, a, e)) return -1;
    char why[400] = "";
    int rc = srv_chat_render_gen(s, a->msgs, a->n_msgs, a->chat_tools, a->n_tools, a->chat_template_kwargs, agp, t, why,
                                 sizeof why);
    if (rc) {
        el_api_request_free(a);
        if (rc == -2) el_api_set_error(e, 500, "server_error", NULL, NULL, "out of memory");
        else el_api_set_error(e, 400, "invalid_request_error", "messages", NULL, "%s", why);
        return -1;
    }
    return 0;
}

/* POST /apply-template: {"prompt": the rendered chat prompt}; "add_generation_prompt": false leaves
 * the assistant's opening out (llama-server's; default true). */
enum MHD_Result srv_h_apply_template(el_server *s, struct MHD_Connection *c, conn_ctx *cc) {
    el_api_request a;
    el_api_error e;
    el_chat_text t;
    memset(&e, 0, sizeof e);
    memset(&t, 0, sizeof t);
    bool agp = true;
    cJSON *root = cJSON_ParseWithLength(cc->body.p ? cc->body.p : "", cc->body.len);
    const cJSON *g = root ? cJSON_GetObjectItemCaseSensitive(root, "add_generation_prompt") : NULL;
    bool bad = g && !cJSON_IsBool(g) && !cJSON_IsNull(g);
    if (cJSON_IsBool(g)) agp = cJSON_IsTrue(g);
    cJSON_Delete(root);
    if (bad)
        return srv_send_error(c, 400, "invalid_request_error", "add_generation_prompt", "invalid_type",
                              "invalid type for 'add_generation_prompt': expected a boolean");
    if (render_chat(s, cc, agp, &a, &t, &e)) return srv_send_api_error(c, &e);
    el_buf b = {0};
    bool ok = el_buf_str(&b, "{\"prompt\":") && el_api_json_string(&b, t.text, t.len) && el_buf_str(&b, "}");
    el_chat_text_free(&t);
    el_api_request_free(&a);
    if (!ok) {
        el_buf_free(&b);
        return srv_send_error(c, 500, "server_error", NULL, NULL, "out of memory");
    }
    return srv_send_json(c, MHD_HTTP_OK, b.p);
}

/* POST /v1/chat/completions/input_tokens: the prompt tokens a chat request would take. */
enum MHD_Result srv_h_input_tokens(el_server *s, struct MHD_Connection *c, conn_ctx *cc) {
    el_api_request a;
    el_api_error e;
    memset(&e, 0, sizeof e);
    if (parse_chat(s, cc, &a, &e)) return srv_send_api_error(c, &e);
    int32_t *toks = NULL;
    char why[400] = "the text cannot be tokenized";
    int n = srv_chat_tokenize(s, a.msgs, a.n_msgs, a.chat_tools, a.n_tools, a.chat_template_kwargs,
                              EL_TOK_ADD_SPECIAL | (s->p.trust_chat_special ? EL_CHAT_TRUST_CONTENT : 0), &toks, why,
                              sizeof why);
    el_api_request_free(&a);
    free(toks);
    if (n < 0)
        return n == -2 ? srv_send_error(c, 500, "server_error", NULL, NULL, "out of memory")
                       : srv_send_error(c, 400, "invalid_request_error", "messages", NULL, "%s", why);
    char buf[96];
    snprintf(buf, sizeof buf, "{\"object\":\"response.input_tokens\",\"input_tokens\":%d}", n);
    return srv_send_json(c, MHD_HTTP_OK, strdup(buf));
}

/* Appends token tok's text (control tokens' too, as llama-server's common_token_to_piece) to raw. */
static bool piece_append(const el_model *m, int32_t tok, el_buf *raw) {
    char piece[256];
    int len = el_token_to_piece(m, tok, piece, (int)sizeof piece, true);
    if (len > (int)sizeof piece) { /* a long piece: the size it told */
        char *big = malloc((size_t)len);
        bool ok = big && el_token_to_piece(m, tok, big, len, true) == len && el_buf_append(raw, big, (size_t)len);
        free(big);
        return ok;
    }
    return len <= 0 || el_buf_append(raw, piece, (size_t)len);
}

enum MHD_Result srv_h_tokenize(el_server *s, struct MHD_Connection *c, conn_ctx *cc) {
    el_api_tok_request q;
    el_api_error e;
    memset(&e, 0, sizeof e);
    if (el_api_parse_tokenize(cc->body.p ? cc->body.p : "", cc->body.len, &q, &e)) return srv_send_api_error(c, &e);
    el_buf_free(&cc->body); /* its bytes stay reserved until the reply is built */
    int flags = (q.add_special ? EL_TOK_ADD_SPECIAL : 0) | (q.parse_special ? EL_TOK_PARSE_SPECIAL : 0);
    int32_t *toks = NULL;
    int n = srv_tokenize_alloc(s->model, q.content, q.content_len, flags, &toks);
    const bool with_pieces = q.with_pieces;
    el_api_tok_request_free(&q);
    if (n < 0)
        return n == -2 ? srv_send_error(c, 500, "server_error", NULL, NULL, "out of memory")
                       : srv_send_error(c, 400, "invalid_request_error", "content", NULL, "the content could not be tokenized");
    char *json = NULL;
    if (with_pieces) { /* each token's text */
        el_buf raw = {0};
        size_t *off = malloc(((size_t)n + 1) * sizeof *off);
        bool ok = off != NULL;
        for (int i = 0; ok && i < n; i++) {
            off[i] = raw.len;
            ok = piece_append(s->model, toks[i], &raw);
        }
        if (ok) off[n] = raw.len;
        json = ok ? el_api_tokenize_pieces_response(toks, n, raw.p ? raw.p : "", off) : NULL;
        free(off);
        el_buf_free(&raw);
    } else {
        json = el_api_tokenize_response(toks, n);
    }
    free(toks);
    return json ? srv_send_json(c, MHD_HTTP_OK, json) : srv_send_error(c, 500, "server_error", NULL, NULL, "out of memory");
}

enum MHD_Result srv_h_detokenize(el_server *s, struct MHD_Connection *c, conn_ctx *cc) {
    el_api_tok_request q;
    el_api_error e;
    memset(&e, 0, sizeof e);
    if (el_api_parse_detokenize(cc->body.p ? cc->body.p : "", cc->body.len, &q, &e)) return srv_send_api_error(c, &e);
    el_buf_free(&cc->body);
    const int nv = el_model_n_vocab(s->model);
    el_buf raw = {0};
    bool ok = true;
    for (int i = 0; ok && i < q.n_tokens; i++) {
        if (q.tokens[i] >= nv) {
            el_buf_free(&raw);
            el_api_tok_request_free(&q);
            return srv_send_error(c, 400, "invalid_request_error", "tokens", "invalid_value",
                                  "tokens[%d] is not a token id in [0, %d)", i, nv);
        }
        ok = piece_append(s->model, q.tokens[i], &raw);
    }
    el_api_tok_request_free(&q);
    /* the pieces go by length: a <0x00> byte token is a NUL byte, sent as \u0000 */
    char *json = ok ? el_api_detokenize_response(raw.p ? raw.p : "", raw.len) : NULL;
    el_buf_free(&raw);
    return json ? srv_send_json(c, MHD_HTTP_OK, json) : srv_send_error(c, 500, "server_error", NULL, NULL, "out of memory");
}
