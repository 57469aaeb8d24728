/*
 * cmd_chat.c — `edgellm chat`: an interactive conversation on stdin/stdout.
 *
 * One session is kept for the whole conversation. Each turn the conversation
 * is rendered in full with the chat template; if the rendering extends the
 * text already in the KV cache (the previous rendering plus the reply), only
 * the new suffix is tokenized (no BOS) and fed; otherwise the session is reset
 * and everything is fed again. Only the template's markers are tokenized as
 * special tokens: a typed "<end_of_turn>" stays text (--trust-chat-special:
 * it becomes the token, the old behaviour). Tokens the library has not evaluated yet (the
 * last generated one, say) are tracked by count (el_session_n_past) and fed
 * again in front of the suffix.
 *
 * Context overflow (--ctx-overflow, default truncate): before a turn is
 * generated, the tokens in the cache plus the new ones plus the room to
 * generate (-n, or 1 token when -n is -1) must fit the context. If not,
 * "error" refuses the turn (the numbers on stderr, the message forgotten,
 * the conversation kept); "truncate" drops the oldest whole turns after the
 * system prompt — a turn is a user message and everything up to the next
 * user message, never part of one — re-renders, feeds the conversation
 * again from the start and says on stderr how many messages (and tokens) it
 * dropped. When even the system prompt and the last user message do not
 * fit, the turn is refused as with "error".
 *
 * --route (cmd_route.c): the conversation is routed once, before anything
 * is loaded, as serve routes a request (the prompt length it sees is the
 * system prompt's): local chats as above; cloud sends every turn, with the
 * whole history, to the cloud's /chat/completions streamed (the replies
 * stream to stdout; a failed turn is a typed error and is forgotten,
 * nothing runs locally); declined prints why on stderr and exits with
 * CLI_EXIT_DECLINED (4).
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli/cli.h"
#include "runtime/chat.h"
#include "structured/chat_jinja.h"
#include "route/router.h"

typedef struct chat_hist {
    el_chat_msg *msgs;
    int n, cap;
} chat_hist;

static bool hist_push(chat_hist *h, const char *role, const char *content, size_t len) {
    if (h->n == h->cap) {
        int cap = h->cap ? h->cap * 2 : 16;
        el_chat_msg *p = realloc(h->msgs, (size_t)cap * sizeof *p);
        if (!p) return false;
        h->msgs = p;
        h->cap = cap;
    }
    char *c = malloc(len + 1);
    if (!c) return false;
    memcpy(c, content, len);
    c[len] = 0;
    h->msgs[h->n] = (el_chat_msg){.role = role, .content = c};
    h->n++;
    return true;
}

static void hist_truncate(chat_hist *h, int n) {
    while (h->n > n) free((char *)h->msgs[--h->n].content);
}

/* Removes the oldest whole turn after the first `keep` messages: from msgs[keep]
 * up to (not including) the next user message. The last user message and what
 * follows it is never removed. Returns the number of messages removed (0: none
 * can be). */
static int hist_drop_turn(chat_hist *h, int keep) {
    int last_user = -1;
    for (int i = h->n - 1; i >= keep; i--)
        if (!strcmp(h->msgs[i].role, "user")) { last_user = i; break; }
    if (last_user <= keep) return 0;
    int end = keep + 1;
    while (end < last_user && strcmp(h->msgs[end].role, "user") != 0) end++;
    for (int i = keep; i < end; i++) free((char *)h->msgs[i].content);
    memmove(h->msgs + keep, h->msgs + end, (size_t)(h->n - end) * sizeof *h->msgs);
    h->n -= end - keep;
    return end - keep;
}

/* Growable token list. */
typedef struct tok_list { int32_t *p; int n, cap; } tok_list;

static bool toks_append(tok_list *t, const int32_t *v, int n) {
    if (t->n + n > t->cap) {
        int cap = t->cap ? t->cap : 256;
        while (cap < t->n + n) cap *= 2;
        int32_t *p = realloc(t->p, (size_t)cap * sizeof *p);
        if (!p) return false;
        t->p = p;
        t->cap = cap;
    }
    if (n) memcpy(t->p + t->n, v, (size_t)n * sizeof *v);
    t->n += n;
    return true;
}

static void list_families(FILE *f) {
    for (int i = 1; i < EL_CHAT_COUNT; i++)
        fprintf(f, "%s%s", i > 1 ? ", " : "", el_chat_family_name((el_chat_family)i));
    fputc('\n', f);
}

/* Returns the family, or UNKNOWN with an error printed. With *cj set (the
 * model's own Jinja template, or --chat-template-file) that renders instead,
 * and the family may be UNKNOWN. */
static el_chat_family pick_family(const cli_opts *o, const el_model *m, el_chat_jinja **cj, int *exit_code) {
    *cj = NULL;
    el_error jerr = {0};
    if (o->chat_template && o->chat_template_file) {
        fprintf(stderr, "edgellm chat: --chat-template and --chat-template-file exclude each other\n");
        *exit_code = CLI_EXIT_USAGE;
        return EL_CHAT_UNKNOWN;
    }
    if (o->chat_template_file) {
        *cj = el_chat_jinja_from_file(o->chat_template_file, m, &jerr);
        if (!*cj) {
            fprintf(stderr, "error: %s: --chat-template-file %s\n", el_status_name(jerr.code), jerr.msg);
            *exit_code = CLI_EXIT_ERROR;
            return EL_CHAT_UNKNOWN;
        }
        fprintf(stderr, "chat template: %s (Jinja, from --chat-template-file)\n", o->chat_template_file);
        return el_chat_family_for_model(m, NULL);
    }
    if (!o->chat_template && el_model_chat_template(m)) {
        *cj = el_chat_jinja_for_model(m, &jerr);
        if (*cj) {
            fprintf(stderr, "chat template: the model's own (Jinja)\n");
            return el_chat_family_for_model(m, NULL);
        }
        fprintf(stderr, "chat template: the model's template does not parse (%s); a built-in family instead\n", jerr.msg);
    }
    if (o->chat_template) {
        el_chat_family f = el_chat_family_from_name(o->chat_template);
        if (f == EL_CHAT_UNKNOWN) {
            fprintf(stderr, "edgellm chat: unknown chat template '%s'; known: ", o->chat_template);
            list_families(stderr);
            *exit_code = CLI_EXIT_USAGE;
            return EL_CHAT_UNKNOWN;
        }
        fprintf(stderr, "chat template: %s (from --chat-template)\n", el_chat_family_name(f));
        return f;
    }
    const char *tmpl = el_model_chat_template(m);
    const char *arch = el_model_arch(m);
    el_chat_source how;
    el_chat_family f = el_chat_family_for_model(m, &how);
    if (how == EL_CHAT_BY_TEMPLATE) {
        fprintf(stderr, "chat template: %s (detected from the model's template)\n", el_chat_family_name(f));
        return f;
    }
    if (how == EL_CHAT_BY_ARCH) {
        fprintf(stderr, "chat template: %s (%s; fallback for architecture '%s')\n",
                el_chat_family_name(f), tmpl ? "model's template not recognised" : "model has no template", arch);
        return f;
    }
    fprintf(stderr, "error: %s: %s chat template and no fallback for architecture '%s'; "
            "choose one with --chat-template NAME, one of: ",
            el_status_name(EL_ERR_TEMPLATE), tmpl ? "unrecognised" : "no", arch);
    list_families(stderr);
    *exit_code = CLI_EXIT_ERROR;
    return EL_CHAT_UNKNOWN;
}

/* Renders the conversation into *out (template text told apart from content):
 * with the Jinja template when there is one (its error printed), else the family. */
static bool render(el_chat_family fam, const el_chat_jinja *cj, const chat_hist *h, el_chat_text *out) {
    el_chat_text_free(out);
    if (cj) {
        el_error err = {0};
        if (el_chat_jinja_render(cj, h->msgs, h->n, NULL, 0, true, NULL, out, &err) == 0) return true;
        fprintf(stderr, "error: %s\n", err.msg);
        return false;
    }
    return el_chat_render(fam, h->msgs, h->n, true, out) == 0;
}

typedef struct chat_tok { const el_model *m; const el_chat_text *t; size_t from; int flags; } chat_tok;

static int chat_tokenize_fn(const void *ctx, int32_t *out, int cap) {
    const chat_tok *c = ctx;
    return el_chat_tokenize_text(c->m, c->t, c->from, c->flags, out, cap);
}

/* Tokens of t->text[from..) (el_chat_tokenize_text) in a malloc'd array; count or -1 (error printed). */
static int chat_tokenize(const el_model *m, const el_chat_text *t, size_t from, int flags, int32_t **out) {
    chat_tok c = {m, t, from, flags};
    return cli_tokenize_with(chat_tokenize_fn, &c, t->len - from, out);
}

typedef struct chat_ctx {
    el_buf reply;
    tok_list gen;
    bool alloc_failed, out_error;
} chat_ctx;

static bool on_token(const el_token_info *t, void *user) {
    chat_ctx *c = user;
    /* id < 0: held-back text released at the end, not a token */
    if (t->id >= 0 && !toks_append(&c->gen, &t->id, 1)) { c->alloc_failed = true; return false; }
    if (t->piece && t->piece_len > 0) {
        if (!el_buf_append(&c->reply, t->piece, (size_t)t->piece_len)) { c->alloc_failed = true; return false; }
        fwrite(t->piece, 1, (size_t)t->piece_len, stdout);
    }
    if (fflush(stdout) != 0) { c->out_error = true; return false; }
    return true;
}

/* --route sent the conversation to the cloud: each turn with the whole history. */
static int chat_cloud(cli_opts *o, cli_route *cr) {
    chat_hist hist = {0};
    int n_keep = 0, code = CLI_EXIT_OK;
    char *line = NULL;
    size_t line_cap = 0;
    el_buf reply = {0};
    const bool tty = isatty(STDIN_FILENO);
    if (o->system) {
        if (!hist_push(&hist, "system", o->system, strlen(o->system))) return cli_failf("out of memory");
        n_keep = 1;
    }
    for (;;) {
        if (tty) { fputs("> ", stderr); fflush(stderr); }
        ssize_t r = getline(&line, &line_cap, stdin);
        if (r < 0) break;
        while (r > 0 && (line[r - 1] == '\n' || line[r - 1] == '\r')) line[--r] = 0;
        if (!strcmp(line, "/exit")) break;
        if (!strcmp(line, "/reset")) {
            hist_truncate(&hist, n_keep);
            fputs("(conversation cleared)\n", stderr);
            continue;
        }
        if (r == 0) continue;
        if ((size_t)r != strlen(line)) { fputs("error: a NUL byte in the message: not sent\n", stderr); continue; }
        if (!hist_push(&hist, "user", line, (size_t)r)) { code = cli_failf("out of memory"); break; }
        cJSON *b = cJSON_CreateObject(), *msgs = b ? cJSON_AddArrayToObject(b, "messages") : NULL;
        for (int i = 0; msgs && i < hist.n; i++) {
            cJSON *m = cJSON_CreateObject();
            if (!m) break;
            cJSON_AddStringToObject(m, "role", hist.msgs[i].role);
            cJSON_AddStringToObject(m, "content", hist.msgs[i].content);
            cJSON_AddItemToArray(msgs, m);
        }
        if (b) cJSON_AddBoolToObject(b, "stream", true);
        if (b && o->n_predict > 0) cJSON_AddNumberToObject(b, "max_tokens", o->n_predict);
        if (b && o->temp_set) cJSON_AddNumberToObject(b, "temperature", o->sampling.temp);
        if (b && o->seed_set) cJSON_AddNumberToObject(b, "seed", (double)o->sampling.seed);
        if (b && o->n_stops) cJSON_AddItemToObject(b, "stop", cJSON_CreateStringArray(o->stops, o->n_stops));
        char *body = b ? cJSON_PrintUnformatted(b) : NULL;
        cJSON_Delete(b);
        if (!body) { code = cli_failf("out of memory"); break; }
        reply.len = 0;
        int rc = cli_route_cloud(cr, "/chat/completions", body, false, &reply, NULL, 0);
        free(body);
        fputc('\n', stdout);
        fflush(stdout);
        if (rc != CLI_EXIT_OK) { /* a typed failure: this turn is forgotten, nothing ran locally */
            hist_truncate(&hist, hist.n - 1);
            code = rc;
            continue;
        }
        if (!hist_push(&hist, "assistant", reply.p ? reply.p : "", reply.len)) { code = cli_failf("out of memory"); break; }
        code = CLI_EXIT_OK;
    }
    free(line);
    el_buf_free(&reply);
    hist_truncate(&hist, 0);
    free(hist.msgs);
    return code;
}

int cli_cmd_chat(cli_opts *o) {
    cli_measure_runtime(o); /* M_runtime: the process as it starts, measured as plan measures it */
    int vr = cli_verify_before_load(o); /* package checks before any byte is loaded */
    if (o->route) { /* decided once, before anything is loaded */
        cli_route cr;
        int rr = cli_route_decide(o, vr < 0, o->system ? strlen(o->system) : 0, &cr);
        if (rr >= 0 || cr.source == EL_ROUTE_CLOUD) {
            int code = rr >= 0 ? rr : chat_cloud(o, &cr);
            cli_route_free(&cr);
            return code;
        }
    }
    if (vr >= 0) return vr;
    el_error err = {0};
    el_model *m = cli_load_model(o, false, &err);
    if (!m) return cli_fail(&err);

    int code = CLI_EXIT_OK;
    el_chat_jinja *cj = NULL;
    el_chat_family fam = pick_family(o, m, &cj, &code);
    if (fam == EL_CHAT_UNKNOWN && !cj) { el_model_free(m); return code; }

    el_session_params sp = el_session_default_params();
    sp.n_ctx = cli_ctx_for(o, m);
    if (o->n_batch > 0) sp.n_batch = o->n_batch;
    sp.type_k = o->cache_type_k;
    sp.type_v = o->cache_type_v;
    el_spec_params spec;
    cli_spec_setup(o, &sp, &spec);
    int ar = cli_admit(o, m, sp.n_ctx, sp.n_batch, 1, NULL); /* before the session allocates anything */
    if (ar >= 0) { el_chat_jinja_free(cj); el_model_free(m); return ar; }
    el_lora *lora[CLI_MAX_LORA]; /* --lora: loaded first, so the session's plan holds their scratch */
    const int ll = cli_lora_load(o, m, lora, &sp.lora_rank);
    if (ll >= 0) { el_chat_jinja_free(cj); el_model_free(m); return ll; }
    el_session *s = el_session_new(m, &sp, &err);
    if (!s) { cli_lora_free(lora); el_chat_jinja_free(cj); el_model_free(m); return cli_fail(&err); }
    const int lr = cli_lora_set(o, s, lora);
    if (lr >= 0) { el_session_free(s); el_chat_jinja_free(cj); el_model_free(m); return lr; }
    el_model *dm = NULL; /* --draft-model: its session follows the chat's KV inside el_generate */
    el_session *dsess = NULL;
    const int dr = cli_draft_open(o, m, &sp, &spec, &dm, &dsess);
    if (dr >= 0) { el_session_free(s); cli_lora_free(lora); el_chat_jinja_free(cj); el_model_free(m); return dr; }

    el_generate_params gp;
    memset(&gp, 0, sizeof gp);
    gp.max_tokens = o->n_predict;
    gp.ignore_eos = o->ignore_eos;
    gp.stop = o->n_stops ? o->stops : NULL;
    gp.sampling = o->sampling;
    gp.spec = spec.mode ? &spec : NULL;
    gp.grammar = o->grammar;

    chat_hist hist = {0};
    int n_keep = 0; /* messages kept by /reset (the system prompt) */
    el_buf fed = {0};       /* text whose tokens are in `kv` */
    tok_list kv = {0};       /* tokens fed or generated so far, in order */
    el_chat_text rendered = {0};
    chat_ctx cc = {0};
    tok_list feed = {0};
    char *line = NULL;
    size_t line_cap = 0;
    bool tty = isatty(STDIN_FILENO);
    bool force_reset = false; /* the KV's tokens and `fed` may disagree */

    if (o->system) {
        if (!hist_push(&hist, "system", o->system, strlen(o->system))) { code = cli_failf("out of memory"); goto done; }
        n_keep = 1;
    }
    cli_sigint_install();

    for (;;) {
        if (tty) { fputs("> ", stderr); fflush(stderr); }
        errno = 0;
        ssize_t r = getline(&line, &line_cap, stdin);
        if (r < 0) {
            if (tty) fputc('\n', stderr);
            break; /* EOF, or Ctrl-C at the prompt (EINTR) */
        }
        while (r > 0 && (line[r - 1] == '\n' || line[r - 1] == '\r')) line[--r] = 0;
        if (!strcmp(line, "/exit")) break;
        if (!strcmp(line, "/reset")) {
            hist_truncate(&hist, n_keep);
            el_session_reset(s);
            fed.len = 0;
            kv.n = 0;
            fputs("(conversation cleared)\n", stderr);
            continue;
        }
        if (r == 0) continue;

        if (!hist_push(&hist, "user", line, (size_t)r)) { code = cli_failf("out of memory"); break; }
        if (!render(fam, cj, &hist, &rendered)) {
            code = cli_failf("%s: rendering the conversation with the %s template failed",
                             el_status_name(EL_ERR_TEMPLATE), cj ? "Jinja" : el_chat_family_name(fam));
            break;
        }

        /* What to feed: the un-evaluated tail of kv plus the new text, or everything. */
        int n_past = el_session_n_past(s);
        bool extend = !force_reset && n_past > 0 && n_past <= kv.n && fed.len <= rendered.len &&
                      memcmp(fed.p ? fed.p : "", rendered.text, fed.len) == 0;
        size_t from;
        /* template markers are special tokens; what was typed is text (unless --trust-chat-special) */
        int flags = o->trust_chat_special ? EL_CHAT_TRUST_CONTENT : 0;
        feed.n = 0;
        if (extend) {
            if (!toks_append(&feed, kv.p + n_past, kv.n - n_past)) { code = cli_failf("out of memory"); break; }
            kv.n = n_past;
            from = fed.len;
        } else {
            el_session_reset(s);
            kv.n = 0;
            fed.len = 0;
            from = 0;
            flags |= EL_TOK_ADD_SPECIAL;
        }
        int32_t *nt = NULL;
        int nn = chat_tokenize(m, &rendered, from, flags, &nt);
        if (nn < 0) { code = CLI_EXIT_ERROR; break; }
        bool ok = toks_append(&feed, nt, nn);
        free(nt);
        if (!ok) { code = cli_failf("out of memory"); break; }

        /* Context overflow: the cache + the new tokens + room to generate must fit. */
        const int n_ctx = el_session_n_ctx(s);
        const int room = o->n_predict > 0 ? o->n_predict : 1;
        int need = (extend ? n_past : 0) + feed.n;
        if ((long long)need + room > n_ctx) {
            const int need0 = need;
            int dropped = 0, d;
            bool fail = false;
            while (o->ctx_overflow != 0 && (long long)need + room > n_ctx && (d = hist_drop_turn(&hist, n_keep)) > 0) {
                dropped += d;
                if (!render(fam, cj, &hist, &rendered)) { fail = true; break; }
                nt = NULL;
                nn = chat_tokenize(m, &rendered, 0, flags | EL_TOK_ADD_SPECIAL, &nt);
                if (nn < 0) { fail = true; break; }
                feed.n = 0;
                ok = toks_append(&feed, nt, nn);
                free(nt);
                if (!ok) { fail = true; break; }
                need = feed.n;
                extend = false;
            }
            if (fail) { code = cli_failf("out of memory or template failure while truncating the conversation"); break; }
            if ((long long)need + room > n_ctx) {
                if (o->ctx_overflow == 0)
                    fprintf(stderr, "error: %s: the conversation (%d tokens) + %d to generate exceeds the context of %d "
                            "tokens (--ctx-overflow error; /reset starts over)\n",
                            el_status_name(EL_ERR_CONTEXT), need, room, n_ctx);
                else
                    fprintf(stderr, "error: %s: the system prompt and the last message alone (%d tokens) + %d to "
                            "generate exceed the context of %d tokens\n",
                            el_status_name(EL_ERR_CONTEXT), need, room, n_ctx);
                hist_truncate(&hist, hist.n - 1); /* forget this message; the (possibly truncated) rest stays */
                el_session_reset(s);
                kv.n = 0;
                fed.len = 0;
                continue;
            }
            fprintf(stderr, "(context full: dropped the %d oldest message%s after the system prompt, %d tokens -> %d of %d)\n",
                    dropped, dropped == 1 ? "" : "s", need0, need, n_ctx);
            el_session_reset(s);
            kv.n = 0;
            fed.len = 0;
        }

        if (o->verbose)
            fprintf(stderr, "(%s: %d tokens kept in the KV cache, %d fed)\n", extend ? "extending" : "re-feeding",
                    extend ? n_past : 0, feed.n);
        cc.reply.len = 0;
        cc.gen.n = 0;
        el_generate_stats st;
        memset(&st, 0, sizeof st);
        cli_sigint_clear();
        cli_sigint_set_session(s);
        el_finish fin = el_generate(s, feed.p, feed.n, &gp, on_token, &cc, &st, &err);
        cli_sigint_set_session(NULL);
        fputc('\n', stdout);
        fflush(stdout);

        if (cc.out_error) { code = cli_failf("writing to stdout failed"); break; }
        if (cc.alloc_failed) { code = cli_failf("out of memory"); break; }
        if (fin == EL_DONE_FAILED) {
            cli_fail(&err);
            if (err.code == EL_ERR_CONTEXT) fputs("(the context is full: /reset to start over)\n", stderr);
            /* Forget this turn; the next one starts from a clean session. */
            hist_truncate(&hist, hist.n - 1);
            el_session_reset(s);
            kv.n = 0;
            fed.len = 0;
            continue;
        }
        if (fin == EL_DONE_CANCELLED) fputs("(cancelled)\n", stderr);
        /* A stop string cuts the reply text inside a token: re-feed next turn. */
        force_reset = fin == EL_DONE_STOP && o->n_stops > 0;

        /* The KV now holds (up to n_past) feed + generated tokens. */
        if (!el_buf_append(&fed, "", 0) || !toks_append(&kv, feed.p, feed.n) || !toks_append(&kv, cc.gen.p, cc.gen.n)) {
            code = cli_failf("out of memory");
            break;
        }
        fed.len = 0;
        if (!el_buf_append(&fed, rendered.text, rendered.len) || !el_buf_append(&fed, cc.reply.p ? cc.reply.p : "", cc.reply.len) ||
            !hist_push(&hist, "assistant", cc.reply.p ? cc.reply.p : "", cc.reply.len)) {
            code = cli_failf("out of memory");
            break;
        }
        if (o->verbose) cli_print_perf(&st);
    }

done:
    free(line);
    hist_truncate(&hist, 0);
    free(hist.msgs);
    el_buf_free(&fed);
    el_chat_text_free(&rendered);
    el_buf_free(&cc.reply);
    free(cc.gen.p);
    free(kv.p);
    free(feed.p);
    el_session_free(dsess);
    el_model_free(dm);
    el_session_free(s);
    cli_lora_free(lora);
    el_chat_jinja_free(cj);
    el_model_free(m);
    return code;
}
