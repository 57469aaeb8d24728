/*
 * cancel.c — cancelling a generation from another thread. The main thread
 * generates; a watcher thread waits until K tokens have streamed, then calls
 * el_session_cancel(). The generation ends as EL_DONE_CANCELLED at its next
 * decode step; the session stays usable (a second, short generation follows).
 * Usage: cancel MODEL.gguf PROMPT K   (0 < K < 400)
 * Prints "cancelled after N tokens" (N == K: the decode loop checks the flag
 * before each token) and "then generated M more".
 */
#include <edgellm.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct watch {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int seen, k;
    el_session *s;
} watch;

static bool on_token(const el_token_info *t, void *user) {
    watch *w = user;
    if (t->id < 0) return true;
    pthread_mutex_lock(&w->mu);
    w->seen++;
    pthread_cond_signal(&w->cv);
    /* wait until the watcher has cancelled, so the count is exact */
    while (w->seen >= w->k && w->k > 0) pthread_cond_wait(&w->cv, &w->mu);
    pthread_mutex_unlock(&w->mu);
    return true;
}

static void *watcher(void *arg) {
    watch *w = arg;
    pthread_mutex_lock(&w->mu);
    while (w->seen < w->k) pthread_cond_wait(&w->cv, &w->mu);
    el_session_cancel(w->s); /* any thread, any time */
    w->k = 0;                /* release the generating thread */
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: %s MODEL.gguf PROMPT K\n", argv[0]); return 2; }
    el_error err;
    el_model *m = el_model_load(argv[1], NULL, &err);
    if (!m) { fprintf(stderr, "error: %s\n", err.msg); return 1; }
    int32_t toks[512];
    int n = el_tokenize(m, argv[2], strlen(argv[2]), toks, 512, EL_TOK_ADD_SPECIAL);
    el_session_params sp = el_session_default_params();
    sp.n_ctx = 512;
    el_session *s = n > 0 && n <= 512 ? el_session_new(m, &sp, &err) : NULL;
    if (!s) { fprintf(stderr, "error: %s\n", n > 0 ? err.msg : "bad prompt"); el_model_free(m); return 1; }

    watch w = {.seen = 0, .k = atoi(argv[3]), .s = s};
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    pthread_t th;
    pthread_create(&th, NULL, watcher, &w);

    el_generate_params gp = {0};
    gp.max_tokens = 400;
    gp.ignore_eos = true;
    gp.sampling = el_sampling_default();
    gp.sampling.temp = 0;
    el_generate_stats st;
    el_finish fin = el_generate(s, toks, n, &gp, on_token, &w, &st, &err);
    pthread_mutex_lock(&w.mu); /* ended before K tokens (an error): release the watcher */
    if (w.k > 0) w.seen = w.k;
    pthread_cond_broadcast(&w.cv);
    pthread_mutex_unlock(&w.mu);
    pthread_join(th, NULL);
    int rc = 0;
    if (fin != EL_DONE_CANCELLED) { fprintf(stderr, "error: finish %d: %s\n", (int)fin, err.msg); rc = 1; }
    else printf("cancelled after %d tokens (%s)\n", st.n_generated, err.msg);

    /* the session is still usable: reset it and generate 3 tokens */
    el_session_reset(s);
    gp.max_tokens = 3;
    fin = el_generate(s, toks, n, &gp, NULL, NULL, &st, &err);
    printf("then generated %d more (finish=%d)\n", st.n_generated, (int)fin);
    if (fin != EL_DONE_LENGTH) rc = 1;
    el_session_free(s);
    el_model_free(m);
    return rc;
}
