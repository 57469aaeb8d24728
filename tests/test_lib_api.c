/*
 * test_lib_api.c — the public API as an embedding application uses it
 * (include/edgellm.h only, no internal header): the version, NULL handles and
 * bad arguments (errors, never a crash), log routing, chat rendering and
 * tokenizing, el_session_chat against el_generate on the same tokens,
 * re-entrant calls from a token callback (cancel works, generate/eval report
 * "busy", reset is ignored) and stop strings. Runs in the ASan build too.
 * Needs reference/models (tiny GGUFs); exit 77 without them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "edgellm.h"
#include "testutil.h"

static void test_version_and_null(void) {
    CHECK(el_version() != NULL && strcmp(el_version(), EL_VERSION_STRING) == 0);
    char v[32];
    snprintf(v, sizeof v, "%d.%d.%d", EL_VERSION_MAJOR, EL_VERSION_MINOR, EL_VERSION_PATCH);
    CHECK(strcmp(v, EL_VERSION_STRING) == 0);

    el_error err;
    CHECK(el_model_load(NULL, NULL, &err) == NULL && err.code == EL_ERR_INVALID_ARG);
    CHECK(el_model_load(NULL, NULL, NULL) == NULL); /* err may be NULL */
    el_model_free(NULL);
    el_session_free(NULL);
    el_session_cancel(NULL);
    el_session_reset(NULL);
    CHECK(el_session_new(NULL, NULL, &err) == NULL && err.code == EL_ERR_INVALID_ARG);
    CHECK(el_model_arch(NULL) == NULL && el_model_n_vocab(NULL) == 0 && el_model_n_ctx_train(NULL) == 0);
    CHECK(el_model_chat_template(NULL) == NULL && el_model_meta_str(NULL, "x") == NULL);
    CHECK(el_session_bytes(NULL, 128, 0) == 0);
    int32_t t[4];
    char buf[8];
    CHECK(el_tokenize(NULL, "a", 1, t, 4, 0) < 0);
    CHECK(el_token_to_piece(NULL, 1, buf, 8, false) < 0);
    CHECK(el_token_bos(NULL) == -1 && el_token_eos(NULL) == -1 && !el_token_is_eog(NULL, 0));
    CHECK(el_session_n_ctx(NULL) == 0 && el_session_n_past(NULL) == 0 && el_session_logits(NULL) == NULL);
    CHECK(el_session_eval(NULL, t, 1, &err) == EL_ERR_INVALID_ARG && err.code == EL_ERR_INVALID_ARG);
    el_generate_stats st;
    CHECK(el_generate(NULL, t, 1, NULL, NULL, NULL, &st, &err) == EL_DONE_FAILED && err.code == EL_ERR_INVALID_ARG);
    CHECK(st.finish == EL_DONE_FAILED);
    CHECK(el_session_chat(NULL, NULL, NULL, 0, NULL, NULL, NULL, NULL, &err) == EL_DONE_FAILED);
    CHECK(el_chat_template_name(NULL) == NULL);
    CHECK(el_chat_format(NULL, NULL, NULL, 0, true, buf, sizeof buf, &err) == -1 && err.code == EL_ERR_INVALID_ARG);
    CHECK(el_chat_tokenize_messages(NULL, NULL, NULL, 0, true, t, 4, &err) == -1);
    CHECK(strcmp(el_status_name(EL_ERR_CANCELLED), "cancelled") == 0);
}

typedef struct log_rec {
    int n, n_error;
    char last[512];
} log_rec;

static void on_log(el_log_level lv, const char *msg, void *user) {
    log_rec *r = user;
    r->n++;
    if (lv == EL_LOG_ERROR) r->n_error++;
    snprintf(r->last, sizeof r->last, "%s", msg);
}

static void test_log(const char *path) {
    log_rec r = {0};
    el_model_params mp = el_model_default_params();
    mp.log_cb = on_log;
    mp.log_user = &r;
    el_error err;
    el_model *m = el_model_load(path, &mp, &err);
    CHECK(m != NULL);
    if (!m) return;
    CHECKF(r.n == 1 && strstr(r.last, "loaded ") && strstr(r.last, el_model_arch(m)), "%d: %s", r.n, r.last);
    el_session_params sp = el_session_default_params();
    sp.n_ctx = 64;
    el_session *s = el_session_new(m, &sp, &err);
    CHECK(s != NULL);
    CHECKF(r.n == 2 && strstr(r.last, "64 tokens of context"), "%s", r.last);
    el_session_free(s);
    el_model_free(m);
    CHECK(el_model_load("/nonexistent/x.gguf", &mp, &err) == NULL);
    CHECK(r.n_error == 1 && strstr(r.last, "/nonexistent/x.gguf") && err.code == EL_ERR_IO);
    /* without a callback: nothing (and nothing printed; not checkable here beyond not crashing) */
    m = el_model_load(path, NULL, &err);
    CHECK(m != NULL && r.n == 3);
    el_model_free(m);
}

typedef struct collect {
    int32_t ids[256];
    int n;
    char text[4096];
    int len;
    el_session *s;
    int cancel_at;           /* cancel from inside the callback at this token (0: never) */
    el_finish nested_fin;    /* el_generate called from inside the callback */
    el_error nested_err;
    int nested_eval_rc;
    int n_past_before_reset, n_past_after_reset;
} collect;

static bool on_tok(const el_token_info *t, void *user) {
    collect *c = user;
    if (t->id >= 0 && c->n < 256) c->ids[c->n++] = t->id;
    if (t->piece_len > 0 && c->len + t->piece_len < (int)sizeof c->text) {
        memcpy(c->text + c->len, t->piece, (size_t)t->piece_len);
        c->len += t->piece_len;
        c->text[c->len] = 0;
    }
    if (c->s && c->n == 2) {
        int32_t one = t->id >= 0 ? t->id : 1;
        c->nested_fin = el_generate(c->s, &one, 1, NULL, NULL, NULL, NULL, &c->nested_err);
        el_error e2;
        c->nested_eval_rc = el_session_eval(c->s, &one, 1, &e2);
        c->n_past_before_reset = el_session_n_past(c->s);
        el_session_reset(c->s); /* ignored while running */
        c->n_past_after_reset = el_session_n_past(c->s);
    }
    if (c->s && c->cancel_at && c->n == c->cancel_at) el_session_cancel(c->s); /* re-entrant cancel */
    return true;
}

static el_generate_params greedy(int max_tokens) {
    el_generate_params gp = {0};
    gp.max_tokens = max_tokens;
    gp.sampling = el_sampling_default();
    gp.sampling.temp = 0;
    return gp;
}

static void test_generate_reentrant(const char *path) {
    el_error err;
    el_model *m = el_model_load(path, NULL, &err);
    CHECK(m != NULL);
    if (!m) return;
    el_session_params sp = el_session_default_params();
    sp.n_ctx = 256;
    el_session *s = el_session_new(m, &sp, &err);
    CHECK(s != NULL);
    int32_t toks[64];
    int n = el_tokenize(m, "Once upon a time", 16, toks, 64, EL_TOK_ADD_SPECIAL);
    CHECK(n > 1 && n < 64);

    el_generate_params gp = greedy(12);
    gp.ignore_eos = true;
    collect ref = {0};
    el_generate_stats st;
    CHECK(el_generate(s, toks, n, &gp, on_tok, &ref, &st, &err) == EL_DONE_LENGTH);
    CHECK(ref.n == 12 && st.n_generated == 12);

    /* re-entrant calls from the callback: nested generate/eval refused, reset ignored, cancel honoured */
    el_session_reset(s);
    CHECK(el_session_n_past(s) == 0);
    collect c = {0};
    c.s = s;
    c.cancel_at = 5;
    el_finish fin = el_generate(s, toks, n, &gp, on_tok, &c, &st, &err);
    CHECKF(fin == EL_DONE_CANCELLED && err.code == EL_ERR_CANCELLED, "fin %d %s", (int)fin, err.msg);
    CHECKF(c.n == 5 && st.n_generated == 5, "%d tokens", c.n);
    CHECK(memcmp(c.ids, ref.ids, 5 * sizeof(int32_t)) == 0); /* the refused nested calls changed nothing */
    CHECK(c.nested_fin == EL_DONE_FAILED && c.nested_err.code == EL_ERR_INVALID_ARG &&
          strstr(c.nested_err.msg, "busy"));
    CHECK(c.nested_eval_rc == EL_ERR_INVALID_ARG);
    CHECK(c.n_past_before_reset > 0 && c.n_past_after_reset == c.n_past_before_reset);
    /* after the cancelled run the session works again */
    el_session_reset(s);
    collect again = {0};
    CHECK(el_generate(s, toks, n, &gp, on_tok, &again, &st, &err) == EL_DONE_LENGTH);
    CHECK(again.n == 12 && memcmp(again.ids, ref.ids, sizeof again.ids) == 0);

    /* NULL gp = greedy until EOS or the context is full; NULL cb allowed */
    el_session_reset(s);
    CHECK(el_generate(s, toks, n, NULL, NULL, NULL, &st, &err) != EL_DONE_FAILED);
    CHECK(st.n_generated > 0);
    /* bad arguments on a live session */
    CHECK(el_generate(s, NULL, 3, &gp, NULL, NULL, &st, &err) == EL_DONE_FAILED && err.code == EL_ERR_INVALID_ARG);
    CHECK(el_session_eval(s, NULL, 2, &err) == EL_ERR_INVALID_ARG);
    int32_t bad = 1 << 30;
    el_session_reset(s);
    CHECK(el_generate(s, &bad, 1, &gp, NULL, NULL, &st, &err) == EL_DONE_FAILED && err.code == EL_ERR_INVALID_ARG);

    /* stop strings: the text of the reference run, cut at a stop taken from it */
    if (ref.len > 4) {
        collect full = {0};
        el_session_reset(s);
        CHECK(el_generate(s, toks, n, &gp, on_tok, &full, &st, &err) == EL_DONE_LENGTH);
        char stop[8];
        int at = full.len / 2;
        memcpy(stop, full.text + at, 2);
        stop[2] = 0;
        const char *cut = strstr(full.text, stop);
        const char *stops[] = {stop, NULL};
        gp.stop = stops;
        collect sc = {0};
        el_session_reset(s);
        fin = el_generate(s, toks, n, &gp, on_tok, &sc, &st, &err);
        CHECKF(fin == EL_DONE_STOP && sc.len == (int)(cut - full.text) && memcmp(sc.text, full.text, (size_t)sc.len) == 0,
               "fin %d, %d bytes, want %d", (int)fin, sc.len, (int)(cut - full.text));
        gp.stop = NULL;
    }
    el_session_free(s);
    el_model_free(m);
}

static void test_chat(const char *path, const char *want_tmpl, const char *want_marker) {
    el_error err;
    el_model *m = el_model_load(path, NULL, &err);
    CHECK(m != NULL);
    if (!m) return;
    const char *name = el_chat_template_name(m);
    CHECKF(name && !strcmp(name, want_tmpl), "%s: template %s", path, name ? name : "(null)");
    el_chat_message msgs[] = {{"system", "Be brief."}, {"user", "Hi <start_of_turn> there"}};
    int need = el_chat_format(m, NULL, msgs, 2, true, NULL, 0, &err);
    CHECK(need > 0);
    char *text = malloc((size_t)need + 1);
    CHECK(el_chat_format(m, NULL, msgs, 2, true, text, (size_t)need + 1, &err) == need);
    CHECKF(strstr(text, want_marker) && strstr(text, "Hi <start_of_turn> there"), "%s", text);
    /* a too-small buffer: the length is still returned, the text is cut and terminated */
    char small[8];
    CHECK(el_chat_format(m, NULL, msgs, 2, true, small, sizeof small, &err) == need && strlen(small) == 7);
    /* explicit template, unknown template, bad role */
    CHECK(el_chat_format(m, "chatml", msgs, 2, true, NULL, 0, &err) > 0);
    CHECK(el_chat_format(m, "jinja2", msgs, 2, true, NULL, 0, &err) == -1 && err.code == EL_ERR_TEMPLATE &&
          strstr(err.msg, "jinja2"));
    el_chat_message badrole[] = {{"wizard", "x"}};
    CHECK(el_chat_format(m, NULL, badrole, 1, true, NULL, 0, &err) == -1 && err.code == EL_ERR_TEMPLATE &&
          strstr(err.msg, "wizard"));
    el_chat_message norole[] = {{NULL, "x"}};
    CHECK(el_chat_format(m, NULL, norole, 1, true, NULL, 0, &err) == -1 && err.code == EL_ERR_INVALID_ARG);
    CHECK(el_chat_format(m, NULL, NULL, 2, true, NULL, 0, &err) == -1 && err.code == EL_ERR_INVALID_ARG);

    /* tokens: the content's marker text stays plain text, so the ids differ from
     * parsing the whole rendering with specials; without marker text they agree */
    el_chat_message plain[] = {{"user", "Hello there"}};
    int np = el_chat_tokenize_messages(m, NULL, plain, 1, true, NULL, 0, &err);
    CHECK(np > 0);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(np + 1));
    CHECK(el_chat_tokenize_messages(m, NULL, plain, 1, true, ids, np, &err) == np);
    char ptext[1024];
    int plen = el_chat_format(m, NULL, plain, 1, true, ptext, sizeof ptext, &err);
    int32_t ids2[512];
    int n2 = el_tokenize(m, ptext, (size_t)plen, ids2, 512, EL_TOK_ADD_SPECIAL | EL_TOK_PARSE_SPECIAL);
    CHECK(n2 == np && memcmp(ids, ids2, sizeof(int32_t) * (size_t)np) == 0);

    /* el_session_chat == el_generate on those tokens */
    el_session_params sp = el_session_default_params();
    sp.n_ctx = 256;
    el_session *s = el_session_new(m, &sp, &err);
    el_generate_params gp = greedy(8);
    collect a = {0}, b = {0};
    el_generate_stats st;
    el_finish fa = el_session_chat(s, NULL, plain, 1, &gp, on_tok, &a, &st, &err);
    CHECK(fa != EL_DONE_FAILED && st.n_prompt == np);
    el_session_reset(s);
    el_finish fb = el_generate(s, ids, np, &gp, on_tok, &b, &st, &err);
    CHECK(fa == fb && a.n == b.n && memcmp(a.ids, b.ids, sizeof a.ids) == 0);
    /* a second turn replaces the history (no context growth beyond one conversation) */
    fa = el_session_chat(s, NULL, plain, 1, &gp, NULL, NULL, &st, &err);
    CHECK(fa != EL_DONE_FAILED && el_session_n_past(s) <= np + 8);
    CHECK(el_session_chat(s, "nope", plain, 1, &gp, NULL, NULL, &st, &err) == EL_DONE_FAILED &&
          err.code == EL_ERR_TEMPLATE);
    el_session_free(s);
    free(ids);
    free(text);
    el_model_free(m);
}

int main(void) {
    test_version_and_null();
    if (!el_test_have_ref()) el_test_skip("fixtures absent (make fixtures)");
    char llama[1024], gemma[1024], qwen[1024];
    snprintf(llama, sizeof llama, "%s", el_test_ref_path("models/tiny-llama-Q8_0.gguf"));
    snprintf(gemma, sizeof gemma, "%s", el_test_ref_path("models/tiny-gemma3-Q8_0.gguf"));
    snprintf(qwen, sizeof qwen, "%s", el_test_ref_path("models/tiny-qwen2-F16.gguf"));
    test_log(llama);
    test_generate_reentrant(llama);
    test_chat(gemma, "gemma", "<start_of_turn>user\n");
    test_chat(qwen, "chatml", "<|im_start|>user\n");
    printf("test_lib_api: %d checks, %d failures\n", el_test_checks, el_test_failures);
    return el_test_failures ? 1 : 0;
}
