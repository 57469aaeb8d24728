/*
 * test_runtime.c — behavioural tests of the runtime API (sessions, the
 * generation loop, cancellation, memory plan, bad model files) on the tiny
 * reference models. Skips (exit 77) when the fixtures are absent.
 *
 *  1. cancellation from another thread (+ reuse, cancel-before-generate,
 *     50 cancel cycles — run under the ASan build for leaks / double frees);
 *  2. no allocation in the decode loop (malloc & co. interposed below;
 *     skipped under ASan, which owns malloc);
 *  3. context limits and invalid tokens;
 *  4. streaming text: stop strings, UTF-8 validity of pieces, max_tokens;
 *  5. determinism: seeded sampling across sessions and thread counts,
 *     greedy == argmax over el_session_logits;
 *  6. session memory plan and isolation of two sessions on one model;
 *  7. bad model files (truncated, missing, vocab-only);
 *  8. non-finite numbers: NaN / inf / out-of-range metadata refused at load
 *     naming key and value; NaN weights give EL_ERR_NUMERIC naming the step
 *     from el_generate, el_session_eval and `edgellm run`, never a token.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "edgellm.h"
#include "runtime/model.h" /* hparams, for the KV-size formula */
#include "testutil.h"

/* ---- allocation counting (interposes the C allocator of the whole binary) ---- */

#if defined(__SANITIZE_ADDRESS__)
#define EL_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EL_TEST_ASAN 1
#endif
#endif

#ifndef EL_TEST_ASAN
static atomic_bool g_count_allocs;
static atomic_int g_n_allocs, g_n_frees;

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

static inline void note_alloc(void) {
    if (atomic_load_explicit(&g_count_allocs, memory_order_relaxed)) atomic_fetch_add(&g_n_allocs, 1);
}
void *malloc(size_t n) { note_alloc(); return __libc_malloc(n); }
void *calloc(size_t a, size_t b) { note_alloc(); return __libc_calloc(a, b); }
void *realloc(void *p, size_t n) { note_alloc(); return __libc_realloc(p, n); }
void free(void *p) {
    if (p && atomic_load_explicit(&g_count_allocs, memory_order_relaxed)) atomic_fetch_add(&g_n_frees, 1);
    __libc_free(p);
}
int posix_memalign(void **out, size_t align, size_t n) {
    note_alloc();
    if (align < sizeof(void *) || (align & (align - 1))) return EINVAL;
    void *p = __libc_memalign(align, n);
    if (!p && n) return ENOMEM;
    *out = p;
    return 0;
}
void *aligned_alloc(size_t align, size_t n) { note_alloc(); return __libc_memalign(align, n); }
void *memalign(size_t align, size_t n) { note_alloc(); return __libc_memalign(align, n); }
#endif

/* ---- helpers ------------------------------------------------------------------ */

#ifndef EL_TEST_THREADS
#define EL_TEST_THREADS 2 /* the shared models use the thread pool; [5] compares with 1 */
#endif
static el_model *g_llama, *g_gemma;

static el_model *load_model(const char *name, int n_threads) {
    char rel[256];
    snprintf(rel, sizeof rel, "models/%s", name);
    el_model_params mp = el_model_default_params();
    mp.n_threads = n_threads;
    el_error err;
    el_model *m = el_model_load(el_test_ref_path(rel), &mp, &err);
    CHECKF(m != NULL, "load %s: %s: %s", name, el_status_name(err.code), err.msg);
    return m;
}

static el_session *new_session(el_model *m, int n_ctx, int n_batch) {
    el_session_params sp = {.n_ctx = n_ctx, .n_batch = n_batch};
    el_error err;
    el_session *s = el_session_new(m, &sp, &err);
    CHECKF(s != NULL, "session n_ctx=%d: %s", n_ctx, err.msg);
    return s;
}

static int tokenize(const el_model *m, const char *text, int32_t *out, int cap) {
    int n = el_tokenize(m, text, strlen(text), out, cap, EL_TOK_ADD_SPECIAL);
    CHECKF(n > 0 && n <= cap, "tokenize \"%s\" -> %d", text, n);
    return n > cap ? cap : n;
}

static el_generate_params greedy_params(int max_tokens) {
    el_generate_params gp = {0};
    gp.max_tokens = max_tokens;
    gp.ignore_eos = true;
    gp.sampling = el_sampling_default();
    gp.sampling.temp = 0.0f;
    return gp;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Collects delivered tokens (id >= 0) and the concatenated text. */
#define MAX_COLLECT 512
typedef struct collect {
    int32_t ids[MAX_COLLECT];
    int n_ids;
    char text[16384];
    int n_text;
    int n_calls, n_final;
    int bounds[MAX_COLLECT + 2]; /* text offset after each piece */
    int n_bounds;
    bool bad_utf8;
    bool piece_after_final;
} collect;

/* Strict UTF-8 validation (no overlongs, surrogates or > U+10FFFF). */
static bool utf8_valid(const char *p, int n) {
    const unsigned char *s = (const unsigned char *)p;
    int i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c < 0x80) { i++; continue; }
        int len;
        unsigned cp;
        if (c >= 0xc2 && c <= 0xdf) { len = 2; cp = c & 0x1f; }
        else if (c >= 0xe0 && c <= 0xef) { len = 3; cp = c & 0x0f; }
        else if (c >= 0xf0 && c <= 0xf4) { len = 4; cp = c & 0x07; }
        else return false;
        if (i + len > n) return false;
        for (int k = 1; k < len; k++) {
            if ((s[i + k] & 0xc0) != 0x80) return false;
            cp = (cp << 6) | (s[i + k] & 0x3f);
        }
        if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
            (cp >= 0xd800 && cp <= 0xdfff))
            return false;
        i += len;
    }
    return true;
}

/* Length of the valid UTF-8 character at s[0..n), 0 if the bytes there are not one. */
static int utf8_char_len(const char *s, int n) {
    unsigned c = (unsigned char)s[0];
    int len = c < 0x80 ? 1 : c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    return len && len <= n && utf8_valid(s, len) ? len : 0;
}

/* The streaming guarantee that holds whatever bytes the model emits: no valid
 * UTF-8 character of the concatenated text is split across two pieces. Also
 * counts the bytes of the text that are not part of any valid character (byte
 * tokens a tiny model emits in an invalid order). */
static bool pieces_split_free(const collect *c, int *n_invalid) {
    int b = 0, bad = 0;
    bool ok = true;
    for (int i = 0; i < c->n_text;) {
        int L = utf8_char_len(c->text + i, c->n_text - i);
        if (!L) { bad++; i++; continue; }
        while (b < c->n_bounds && c->bounds[b] <= i) b++;
        if (b < c->n_bounds && c->bounds[b] < i + L) ok = false; /* a boundary inside the character */
        i += L;
    }
    *n_invalid = bad;
    return ok;
}

static bool collect_cb(const el_token_info *t, void *user) {
    collect *c = user;
    c->n_calls++;
    if (c->n_final) c->piece_after_final = true;
    if (t->id < 0) c->n_final++;
    else if (c->n_ids < MAX_COLLECT) c->ids[c->n_ids++] = t->id;
    if (t->piece_len < 0 || (t->piece_len > 0 && !t->piece)) { c->bad_utf8 = true; return true; }
    if (!utf8_valid(t->piece, t->piece_len)) c->bad_utf8 = true;
    if (c->n_text + t->piece_len < (int)sizeof c->text) {
        memcpy(c->text + c->n_text, t->piece, (size_t)t->piece_len);
        c->n_text += t->piece_len;
    }
    if (c->n_bounds < MAX_COLLECT + 2) c->bounds[c->n_bounds++] = c->n_text;
    c->text[c->n_text] = 0;
    return true;
}

static el_finish run_collect(el_session *s, const int32_t *p, int np, const el_generate_params *gp, collect *c,
                             el_generate_stats *st, el_error *err) {
    memset(c, 0, sizeof *c);
    return el_generate(s, p, np, gp, collect_cb, c, st, err);
}

static int argmax_f(const float *v, int n) {
    int b = 0;
    for (int i = 1; i < n; i++) if (v[i] > v[b]) b = i;
    return b;
}

/* ---- 1. cancellation -------------------------------------------------------- */

typedef struct cancel_ctx {
    el_session *s;
    const int32_t *prompt;
    int n_prompt;
    el_generate_params gp;
    atomic_int n_tok;        /* tokens delivered (id >= 0) */
    atomic_int n_final;      /* id = -1 calls */
    int n_at_cancel;         /* n_tok right after el_session_cancel returned */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool signalled;
    el_finish fin;
    el_generate_stats st;
    el_error err;
} cancel_ctx;

static bool cancel_cb(const el_token_info *t, void *user) {
    cancel_ctx *c = user;
    if (t->id < 0) { atomic_fetch_add(&c->n_final, 1); return true; }
    int n = atomic_fetch_add(&c->n_tok, 1) + 1;
    if (n == 5) {
        pthread_mutex_lock(&c->mu);
        c->signalled = true;
        pthread_cond_signal(&c->cv);
        pthread_mutex_unlock(&c->mu);
    }
    /* a slow consumer: keeps the 200-token run from finishing before thread B
     * is scheduled on a loaded 2-core box (does not change the semantics) */
    if (n >= 5) usleep(2000);
    return true;
}

static void *generate_thread(void *arg) {
    cancel_ctx *c = arg;
    c->fin = el_generate(c->s, c->prompt, c->n_prompt, &c->gp, cancel_cb, c, &c->st, &c->err);
    return NULL;
}

/* Runs one cancel cycle: generation in thread A, this thread is B. */
static bool cancel_cycle(el_session *s, const int32_t *prompt, int np, bool verbose) {
    cancel_ctx c;
    memset(&c, 0, sizeof c);
    c.s = s;
    c.prompt = prompt;
    c.n_prompt = np;
    c.gp = greedy_params(200);
    atomic_init(&c.n_tok, 0);
    atomic_init(&c.n_final, 0);
    pthread_mutex_init(&c.mu, NULL);
    pthread_cond_init(&c.cv, NULL);
    pthread_t th;
    if (pthread_create(&th, NULL, generate_thread, &c) != 0) { CHECK(0); return false; }
    pthread_mutex_lock(&c.mu);
    while (!c.signalled) pthread_cond_wait(&c.cv, &c.mu);
    pthread_mutex_unlock(&c.mu);
    el_session_cancel(s);
    c.n_at_cancel = atomic_load(&c.n_tok);
    pthread_join(th, NULL);
    pthread_mutex_destroy(&c.mu);
    pthread_cond_destroy(&c.cv);
    int n_total = atomic_load(&c.n_tok);
    bool ok = c.fin == EL_DONE_CANCELLED && c.err.code == EL_ERR_CANCELLED && c.st.finish == EL_DONE_CANCELLED &&
              n_total - c.n_at_cancel <= 1 && n_total >= 5 && n_total < 200 && c.st.n_generated == n_total;
    if (verbose || !ok)
        printf("  cancel: fin=%d err=%s \"%s\" tokens=%d (at cancel %d, after %d) n_generated=%d\n", c.fin,
               el_status_name(c.err.code), c.err.msg, n_total, c.n_at_cancel, n_total - c.n_at_cancel,
               c.st.n_generated);
    CHECKF(c.fin == EL_DONE_CANCELLED, "finish %d", c.fin);
    CHECKF(c.err.code == EL_ERR_CANCELLED, "err %s", el_status_name(c.err.code));
    CHECK(c.st.finish == EL_DONE_CANCELLED);
    CHECKF(n_total - c.n_at_cancel <= 1, "%d tokens delivered after the cancel call", n_total - c.n_at_cancel);
    CHECKF(n_total >= 5 && n_total < 200, "n_total %d", n_total);
    CHECKF(c.st.n_generated == n_total, "stats %d vs delivered %d", c.st.n_generated, n_total);
    return ok;
}

static void test_cancel(void) {
    printf("[1] cancellation\n");
    el_model *m = g_llama;
    int32_t prompt[64];
    int np = tokenize(m, "Once upon a time, in a small village", prompt, 64);
    el_session *s = new_session(m, 256, 16);
    if (!s) return;

    cancel_cycle(s, prompt, np, true);

    /* reusable after cancel: reset + greedy == a fresh session */
    el_session_reset(s);
    CHECK(el_session_n_past(s) == 0);
    el_generate_params gp = greedy_params(20);
    static collect a, b;
    el_error err;
    el_generate_stats st;
    el_finish f1 = run_collect(s, prompt, np, &gp, &a, &st, &err);
    CHECKF(f1 == EL_DONE_LENGTH && a.n_ids == 20, "after cancel: fin %d, %d tokens (%s)", f1, a.n_ids, err.msg);
    el_session *fresh = new_session(m, 256, 16);
    if (fresh) {
        el_finish f2 = run_collect(fresh, prompt, np, &gp, &b, &st, &err);
        CHECK(f2 == EL_DONE_LENGTH);
        CHECK(a.n_ids == b.n_ids && memcmp(a.ids, b.ids, sizeof(int32_t) * (size_t)a.n_ids) == 0);
        el_session_free(fresh);
    }

    /* cancel before generate: the flag is sticky until el_generate consumes it,
     * so the next request ends CANCELLED in prefill (before any forward pass)
     * with 0 tokens and no callback; the one after runs normally. */
    el_session_reset(s);
    el_session_cancel(s);
    memset(&a, 0, sizeof a);
    f1 = run_collect(s, prompt, np, &gp, &a, &st, &err);
    CHECKF(f1 == EL_DONE_CANCELLED, "pre-cancel: fin %d", f1);
    CHECKF(err.code == EL_ERR_CANCELLED, "pre-cancel: err %s", el_status_name(err.code));
    CHECKF(a.n_calls == 0 && st.n_generated == 0, "pre-cancel: %d callbacks, %d generated", a.n_calls, st.n_generated);
    CHECKF(el_session_n_past(s) == 0, "pre-cancel: n_past %d (prefill ran?)", el_session_n_past(s));
    f1 = run_collect(s, prompt, np, &gp, &a, &st, &err);
    CHECKF(f1 == EL_DONE_LENGTH && a.n_ids == 20, "after a consumed pre-cancel: fin %d, %d tokens", f1, a.n_ids);
    CHECK(a.n_ids == b.n_ids && memcmp(a.ids, b.ids, sizeof(int32_t) * (size_t)a.n_ids) == 0);
    /* el_session_reset clears a pending cancel */
    el_session_reset(s);
    el_session_cancel(s);
    el_session_reset(s);
    f1 = run_collect(s, prompt, np, &gp, &a, &st, &err);
    CHECKF(f1 == EL_DONE_LENGTH, "cancel then reset: fin %d", f1);

    /* 50 cycles (new sessions every 10) — meaningful under ASan/LSan */
    double t0 = now_ms();
    int ok = 0;
    for (int i = 0; i < 50; i++) {
        if (i % 10 == 0) { el_session_free(s); s = new_session(m, 256, 16); if (!s) return; }
        el_session_reset(s);
        ok += cancel_cycle(s, prompt, np, false);
    }
    printf("  50 cancel cycles: %d ok (%.0f ms)\n", ok, now_ms() - t0);
    CHECK(ok == 50);
    el_session_free(s);
}

/* ---- 2. no allocation in the decode loop -------------------------------------- */

#ifndef EL_TEST_ASAN
typedef struct alloc_ctx { int n; int max; } alloc_ctx;

static bool alloc_cb(const el_token_info *t, void *user) {
    alloc_ctx *c = user;
    if (t->id < 0) { atomic_store(&g_count_allocs, false); return true; }
    c->n++;
    if (c->n == 1) atomic_store(&g_count_allocs, true);   /* decode steps 2.. are watched */
    if (c->n == c->max) atomic_store(&g_count_allocs, false); /* before the exit path frees the sampler */
    return true;
}
#endif

static void test_no_alloc(void) {
    printf("[2] no allocation in the decode loop\n");
#ifdef EL_TEST_ASAN
    printf("  skipped: AddressSanitizer build (ASan owns malloc; run the release build for this check)\n");
#else
    /* self-check: the interposer sees allocations */
    atomic_store(&g_n_allocs, 0);
    atomic_store(&g_count_allocs, true);
    void *volatile probe = malloc(16);
    atomic_store(&g_count_allocs, false);
    free(probe);
    CHECKF(atomic_load(&g_n_allocs) == 1, "malloc interposer not active (%d)", atomic_load(&g_n_allocs));

    el_model *models[2] = {g_llama, g_gemma};
    const char *names[2] = {"llama", "gemma3"};
    for (int mi = 0; mi < 2; mi++) {
        el_model *m = models[mi];
        if (!m) continue;
        int32_t prompt[64];
        int np = tokenize(m, "The quick brown fox jumps over", prompt, 64);
        el_session *s = new_session(m, 256, 16);
        if (!s) continue;
        static const char *const stops[] = {"zqxj", "\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac", "###!!!", NULL};
        el_generate_params gp = greedy_params(30);
        gp.n_top_logprobs = 5;
        gp.stop = stops;
        alloc_ctx c = {0, 30};
        el_error err;
        el_generate_stats st;
        atomic_store(&g_n_allocs, 0);
        atomic_store(&g_n_frees, 0);
        el_finish f = el_generate(s, prompt, np, &gp, alloc_cb, &c, &st, &err);
        atomic_store(&g_count_allocs, false);
        int na = atomic_load(&g_n_allocs), nf = atomic_load(&g_n_frees);
        printf("  %s: fin=%d tokens=%d allocations=%d frees=%d during decode\n", names[mi], f, c.n, na, nf);
        CHECKF(f == EL_DONE_LENGTH && c.n == 30, "%s: fin %d, %d tokens", names[mi], f, c.n);
        CHECKF(na == 0 && nf == 0, "%s: %d allocations / %d frees in the decode loop", names[mi], na, nf);
        /* seeded sampling path too */
        gp.sampling = el_sampling_default();
        gp.sampling.seed = 7;
        gp.sampling.repeat_penalty = 1.1f;
        el_session_reset(s);
        c.n = 0;
        atomic_store(&g_n_allocs, 0);
        atomic_store(&g_n_frees, 0);
        f = el_generate(s, prompt, np, &gp, alloc_cb, &c, &st, &err);
        atomic_store(&g_count_allocs, false);
        na = atomic_load(&g_n_allocs);
        nf = atomic_load(&g_n_frees);
        CHECKF(f == EL_DONE_LENGTH && na == 0 && nf == 0, "%s sampled: fin %d, %d allocations / %d frees", names[mi],
               f, na, nf);
        el_session_free(s);
    }
#endif
}

/* ---- 3. context limits ----------------------------------------------------------- */

static void test_context(void) {
    printf("[3] context limits\n");
    el_model *m = g_llama;
    const int nv = el_model_n_vocab(m);
    int32_t prompt[64];
    int np = tokenize(m, "In the beginning there was", prompt, 64);
    el_error err;
    el_generate_stats st;
    static collect c;

    /* prompt longer than n_ctx */
    el_session *s = new_session(m, 32, 8);
    if (!s) return;
    int32_t longp[40];
    for (int i = 0; i < 40; i++) longp[i] = prompt[i % np];
    el_generate_params gp = greedy_params(10);
    el_finish f = run_collect(s, longp, 40, &gp, &c, &st, &err);
    CHECKF(f == EL_DONE_FAILED && err.code == EL_ERR_CONTEXT, "long prompt: fin %d err %s", f, el_status_name(err.code));
    CHECKF(strstr(err.msg, "40") && strstr(err.msg, "32"), "message lacks the numbers: \"%s\"", err.msg);
    CHECK(c.n_calls == 0 && el_session_n_past(s) == 0 && st.finish == EL_DONE_FAILED);
    printf("  long prompt: \"%s\"\n", err.msg);

    /* prompt that fits, history that does not */
    CHECK(el_session_eval(s, prompt, np, &err) == 0);
    int32_t p30[30];
    for (int i = 0; i < 30; i++) p30[i] = prompt[i % np];
    f = run_collect(s, p30, 30, &gp, &c, &st, &err);
    CHECKF(f == EL_DONE_FAILED && err.code == EL_ERR_CONTEXT, "history + prompt: fin %d err %s", f,
           el_status_name(err.code));
    CHECK(el_session_n_past(s) == np);

    /* generation runs into the end of the context → LENGTH */
    el_session_reset(s);
    gp = greedy_params(0); /* until the context is full */
    f = run_collect(s, prompt, np, &gp, &c, &st, &err);
    CHECKF(f == EL_DONE_LENGTH, "ctx end: fin %d (%s)", f, err.msg);
    CHECKF(el_session_n_past(s) == 32, "ctx end: n_past %d", el_session_n_past(s));
    /* the last token is sampled from the last position's logits but not evaluated */
    CHECKF(c.n_ids == 32 - np + 1 && st.n_generated == c.n_ids, "ctx end: %d tokens for %d free positions", c.n_ids,
           32 - np);
    el_session_reset(s);
    gp = greedy_params(1000);
    f = run_collect(s, prompt, np, &gp, &c, &st, &err);
    CHECKF(f == EL_DONE_LENGTH && c.n_ids == 32 - np + 1, "max_tokens past ctx: fin %d, %d tokens", f, c.n_ids);
    /* a full session refuses more */
    f = run_collect(s, prompt, 1, &gp, &c, &st, &err);
    CHECKF(f == EL_DONE_FAILED && err.code == EL_ERR_CONTEXT, "full: fin %d err %s", f, el_status_name(err.code));

    /* el_session_eval past n_ctx */
    el_session_reset(s);
    CHECK(el_session_eval(s, p30, 30, &err) == 0);
    int rc = el_session_eval(s, prompt, 3, &err);
    CHECKF(rc == EL_ERR_CONTEXT && err.code == EL_ERR_CONTEXT, "eval past ctx: rc %d err %s", rc,
           el_status_name(err.code));
    CHECK(el_session_n_past(s) == 30);
    CHECK(el_session_eval(s, prompt, 2, &err) == 0 && el_session_n_past(s) == 32);
    CHECK(el_session_eval(s, prompt, 1, &err) == EL_ERR_CONTEXT);

    /* invalid token ids */
    el_session_reset(s);
    int32_t bad[3] = {prompt[0], nv, prompt[1]};
    rc = el_session_eval(s, bad, 3, &err);
    CHECKF(rc == EL_ERR_INVALID_ARG && err.code == EL_ERR_INVALID_ARG, "eval id=n_vocab: rc %d", rc);
    bad[1] = -1;
    rc = el_session_eval(s, bad, 3, &err);
    CHECKF(rc == EL_ERR_INVALID_ARG, "eval id=-1: rc %d", rc);
    CHECK(el_session_n_past(s) == 0);
    f = run_collect(s, bad, 3, &gp, &c, &st, &err);
    CHECKF(f == EL_DONE_FAILED && err.code == EL_ERR_INVALID_ARG, "generate id=-1: fin %d err %s", f,
           el_status_name(err.code));
    f = run_collect(s, prompt, 0, &gp, &c, &st, &err);
    CHECKF(f == EL_DONE_FAILED && err.code == EL_ERR_INVALID_ARG, "generate empty: fin %d", f);
    CHECK(el_session_eval(s, prompt, 0, &err) == EL_ERR_INVALID_ARG);
    CHECK(el_session_n_past(s) == 0);
    el_session_free(s);
}

/* ---- 4. streaming text --------------------------------------------------------------- */

static void test_streaming(el_model *m, const char *name, const char *text) {
    printf("[4] streaming text (%s)\n", name);
    int32_t prompt[64];
    int np = tokenize(m, text, prompt, 64);
    el_session *s = new_session(m, 256, 16);
    if (!s) return;
    el_error err;
    el_generate_stats st;
    static collect a, b;
    el_generate_params gp = greedy_params(48);
    el_finish f = run_collect(s, prompt, np, &gp, &a, &st, &err);
    CHECKF(f == EL_DONE_LENGTH && a.n_ids == 48, "fin %d, %d tokens", f, a.n_ids);
    int n_inv = 0;
    CHECKF(pieces_split_free(&a, &n_inv), "%s: a UTF-8 character is split across pieces", name);
    /* every piece is valid UTF-8 whenever the generated bytes are */
    CHECKF(n_inv > 0 || !a.bad_utf8, "%s: invalid UTF-8 piece from a valid UTF-8 stream", name);
    if (n_inv) printf("  note: greedy output has %d byte(s) that are not valid UTF-8 (model emitted them)\n", n_inv);
    CHECK(a.n_final <= 1 && !a.piece_after_final);

    int32_t greedy7[7];
    memcpy(greedy7, a.ids, sizeof greedy7);

    /* a stop string from the middle of the text: 6 bytes at a character boundary
     * whose first occurrence is where it was taken. A degenerate greedy text (the
     * tiny gemma repeats one token) has none: then the reference is a seeded run. */
    int L = a.n_text, start = 0, end = 0;
    for (int attempt = 0; attempt < 2; attempt++) {
        if (attempt == 1) {
            gp.sampling = el_sampling_default();
            gp.sampling.seed = 42;
            el_session_reset(s);
            f = run_collect(s, prompt, np, &gp, &a, &st, &err);
            L = a.n_text;
            printf("  greedy text is repetitive; stop string from a seeded run instead\n");
        }
        for (start = L / 2; start + 6 <= L; start++) {
            if (((unsigned char)a.text[start] & 0xc0) == 0x80) continue;
            end = start + 6;
            while (end < L && ((unsigned char)a.text[end] & 0xc0) == 0x80) end++;
            char w[32];
            memcpy(w, a.text + start, (size_t)(end - start));
            w[end - start] = 0;
            if (!memchr(w, 0, (size_t)(end - start)) && strstr(a.text, w) == a.text + start) break;
        }
        if (start + 6 <= L) break;
    }
    if (L < 16 || start + 6 > L) {
        CHECKF(0, "%s: no usable stop string in the reference text (%d bytes)", name, L);
    } else {
        char stop[32];
        memcpy(stop, a.text + start, (size_t)(end - start));
        stop[end - start] = 0;
        const int want = start;
        const char *const stops[] = {"\x01never", stop, NULL};
        gp.stop = stops;
        el_session_reset(s);
        f = run_collect(s, prompt, np, &gp, &b, &st, &err);
        printf("  stop \"%s\" (first at byte %d of %d): fin=%d, %d bytes, %d tokens\n", stop, want, L, f, b.n_text,
               b.n_ids);
        CHECKF(f == EL_DONE_STOP && st.finish == EL_DONE_STOP, "stop: fin %d", f);
        CHECKF(b.n_text == want && memcmp(b.text, a.text, (size_t)want) == 0,
               "text before the stop string differs: got %d bytes \"%s\", want %d bytes", b.n_text, b.text, want);
        CHECK(b.n_final == 0); /* nothing released after a stop string */
        CHECK(b.n_ids <= a.n_ids && memcmp(a.ids, b.ids, sizeof(int32_t) * (size_t)b.n_ids) == 0);
        CHECK(pieces_split_free(&b, &n_inv));
        /* a stop string at the very start of the output */
        char stop0[8];
        int e0 = 3;
        while (e0 < L && ((unsigned char)a.text[e0] & 0xc0) == 0x80) e0++;
        memcpy(stop0, a.text, (size_t)e0);
        stop0[e0] = 0;
        const char *const stops0[] = {stop0, NULL};
        gp.stop = stops0;
        el_session_reset(s);
        f = run_collect(s, prompt, np, &gp, &b, &st, &err);
        CHECKF(f == EL_DONE_STOP && b.n_text == 0, "stop at start: fin %d, %d bytes", f, b.n_text);
    }

    /* max_tokens = 7 */
    gp = greedy_params(7);
    el_session_reset(s);
    f = run_collect(s, prompt, np, &gp, &b, &st, &err);
    CHECKF(f == EL_DONE_LENGTH && b.n_ids == 7 && st.n_generated == 7, "max_tokens 7: fin %d, %d tokens", f,
           b.n_ids);
    CHECK(memcmp(greedy7, b.ids, sizeof greedy7) == 0);
    CHECK(pieces_split_free(&b, &n_inv));

    /* sampled runs at high temperature: more byte tokens; no character may be split,
     * and a run whose bytes are valid UTF-8 must deliver only valid pieces */
    gp = greedy_params(48);
    gp.sampling = el_sampling_default();
    gp.sampling.temp = 1.5f;
    gp.sampling.top_k = 0;
    gp.sampling.top_p = 1.0f;
    gp.sampling.min_p = 0.0f;
    int split = 0, bad = 0, multibyte = 0, inv_runs = 0;
    for (int r = 0; r < 4; r++) {
        gp.sampling.seed = 100 + r;
        el_session_reset(s);
        run_collect(s, prompt, np, &gp, &b, &st, &err);
        split += !pieces_split_free(&b, &n_inv);
        inv_runs += n_inv > 0;
        bad += n_inv == 0 && b.bad_utf8;
        for (int i = 0; i < b.n_text; i++) multibyte += ((unsigned char)b.text[i] & 0xc0) == 0xc0;
    }
    printf("  sampled: %d multi-byte characters, %d of 4 runs with invalid bytes\n", multibyte, inv_runs);
    CHECKF(split == 0, "%s: %d sampled runs split a UTF-8 character across pieces", name, split);
    CHECKF(bad == 0, "%s: %d sampled runs with valid bytes delivered an invalid piece", name, bad);
    el_session_free(s);
}

/* ---- 5. determinism ------------------------------------------------------------------- */

static void sampled_run(el_model *m, const int32_t *prompt, int np, collect *c) {
    el_session *s = new_session(m, 256, 16);
    if (!s) return;
    el_generate_params gp = greedy_params(40);
    gp.sampling = el_sampling_default();
    gp.sampling.temp = 0.8f;
    gp.sampling.seed = 42;
    el_error err;
    el_generate_stats st;
    el_finish f = run_collect(s, prompt, np, &gp, c, &st, &err);
    CHECKF(f == EL_DONE_LENGTH && c->n_ids == 40, "sampled: fin %d, %d tokens", f, c->n_ids);
    el_session_free(s);
}

static void test_determinism(el_model *m, const char *file, const char *name) {
    printf("[5] determinism (%s)\n", name);
    int32_t prompt[64];
    int np = tokenize(m, "The weather today is", prompt, 64);
    static collect a, b, c;
    sampled_run(m, prompt, np, &a);
    sampled_run(m, prompt, np, &b);
    CHECKF(a.n_ids == b.n_ids && memcmp(a.ids, b.ids, sizeof(int32_t) * (size_t)a.n_ids) == 0,
           "%s: seeded sampling differs across sessions", name);
    el_model *m1 = load_model(file, 1);
    if (m1) {
        sampled_run(m1, prompt, np, &c);
        int diverge = -1;
        for (int i = 0; i < a.n_ids && diverge < 0; i++) if (i >= c.n_ids || a.ids[i] != c.ids[i]) diverge = i;
        CHECKF(diverge < 0 && a.n_ids == c.n_ids, "%s: n_threads 1 vs 2 diverge at token %d", name, diverge);
        /* logits bit-identical across thread counts */
        el_session *s1 = new_session(m1, 64, 16), *s2 = new_session(m, 64, 16);
        if (s1 && s2) {
            el_error err;
            el_session_eval(s1, prompt, np, &err);
            el_session_eval(s2, prompt, np, &err);
            const int nv = el_model_n_vocab(m);
            bool same = memcmp(el_session_logits(s1), el_session_logits(s2), sizeof(float) * (size_t)nv) == 0;
            float md = 0;
            for (int i = 0; i < nv; i++) md = fmaxf(md, fabsf(el_session_logits(s1)[i] - el_session_logits(s2)[i]));
            CHECKF(same, "%s: prefill logits differ between 1 and 2 threads (max |d| %g)", name, md);
        }
        el_session_free(s1);
        el_session_free(s2);
        el_model_free(m1);
    }

    /* greedy via el_generate == argmax over el_session_logits, step by step */
    el_session *s = new_session(m, 256, 16);
    if (!s) return;
    el_generate_params gp = greedy_params(32);
    el_error err;
    el_generate_stats st;
    run_collect(s, prompt, np, &gp, &a, &st, &err);
    CHECK(a.n_ids == 32);
    el_session_reset(s);
    CHECK(el_session_eval(s, prompt, np, &err) == 0);
    const int nv = el_model_n_vocab(m);
    int mism = -1;
    for (int i = 0; i < a.n_ids; i++) {
        int32_t t = argmax_f(el_session_logits(s), nv);
        if (t != a.ids[i]) { mism = i; break; }
        if (el_session_eval(s, &t, 1, &err)) { CHECKF(0, "eval: %s", err.msg); break; }
    }
    CHECKF(mism < 0, "%s: greedy token %d differs from argmax of el_session_logits", name, mism);
    el_session_free(s);
}

/* ---- 6. session memory plan + isolation ----------------------------------------------------- */

static void test_sessions(el_model *m, const char *name) {
    printf("[6] session memory plan + isolation (%s)\n", name);
    const el_hparams *hp = &m->hp;
    /* sliding-window layers keep window + n_batch rows (memory/plan.h) */
    size_t kv = 0;
    for (int il = 0; il < hp->n_layer; il++) {
        const size_t rows = m->layers[il].swa && hp->n_swa + 16 < 256 ? (size_t)hp->n_swa + 16 : 256;
        kv += rows * (size_t)hp->n_head_kv * (size_t)(hp->head_dim_k + hp->head_dim_v) * 2;
    }
    size_t need = el_session_bytes(m, 256, 16);
    printf("  el_session_bytes(256,16) = %zu, KV = %zu\n", need, kv);
    CHECKF(need > kv, "%s: session bytes %zu <= KV bytes %zu", name, need, kv);
    el_session *s1 = new_session(m, 256, 16), *s2 = new_session(m, 256, 16);
    el_session *r = new_session(m, 256, 16);
    if (!s1 || !s2 || !r) { el_session_free(s1); el_session_free(s2); el_session_free(r); return; }
    CHECK(el_session_n_ctx(s1) == 256);

    int32_t pa[64], pb[64];
    int na = tokenize(m, "Alice went to the market to buy apples and pears", pa, 64);
    int nb = tokenize(m, "def fibonacci(n): return n if n < 2 else", pb, 64);
    const int nv = el_model_n_vocab(m);
    enum { STEPS = 10 };
    /* chunks: prompt in 3 pieces, then STEPS single tokens (greedy) */
    float *ref_a[3 + STEPS], *ref_b[3 + STEPS];
    int32_t ta[STEPS], tb[STEPS];
    el_error err;
    for (int w = 0; w < 2; w++) {
        const int32_t *p = w ? pb : pa;
        int n = w ? nb : na;
        float **ref = w ? ref_b : ref_a;
        int32_t *tt = w ? tb : ta;
        el_session_reset(r);
        int cut1 = n / 3, cut2 = 2 * n / 3;
        int bounds[4] = {0, cut1, cut2, n};
        for (int k = 0; k < 3; k++) {
            CHECK(el_session_eval(r, p + bounds[k], bounds[k + 1] - bounds[k], &err) == 0);
            ref[k] = malloc(sizeof(float) * (size_t)nv);
            memcpy(ref[k], el_session_logits(r), sizeof(float) * (size_t)nv);
        }
        for (int i = 0; i < STEPS; i++) {
            tt[i] = argmax_f(el_session_logits(r), nv);
            CHECK(el_session_eval(r, &tt[i], 1, &err) == 0);
            ref[3 + i] = malloc(sizeof(float) * (size_t)nv);
            memcpy(ref[3 + i], el_session_logits(r), sizeof(float) * (size_t)nv);
        }
    }
    /* interleaved */
    int ba[4] = {0, na / 3, 2 * na / 3, na}, bb[4] = {0, nb / 3, 2 * nb / 3, nb};
    int diff_a = 0, diff_b = 0;
    for (int k = 0; k < 3 + STEPS; k++) {
        if (k < 3) {
            el_session_eval(s1, pa + ba[k], ba[k + 1] - ba[k], &err);
            el_session_eval(s2, pb + bb[k], bb[k + 1] - bb[k], &err);
        } else {
            el_session_eval(s2, &tb[k - 3], 1, &err);
            el_session_eval(s1, &ta[k - 3], 1, &err);
        }
        diff_a += memcmp(el_session_logits(s1), ref_a[k], sizeof(float) * (size_t)nv) != 0;
        diff_b += memcmp(el_session_logits(s2), ref_b[k], sizeof(float) * (size_t)nv) != 0;
    }
    CHECKF(diff_a == 0 && diff_b == 0, "%s: interleaved sessions differ from single-session runs (%d, %d steps)", name,
           diff_a, diff_b);
    CHECK(el_session_n_past(s1) == na + STEPS && el_session_n_past(s2) == nb + STEPS);
    for (int k = 0; k < 3 + STEPS; k++) { free(ref_a[k]); free(ref_b[k]); }
    el_session_free(s1);
    el_session_free(s2);
    el_session_free(r);
}

/* ---- 7. bad model files ----------------------------------------------------------------------- */

static void test_bad_files(void) {
    printf("[7] bad model files\n");
    size_t len = 0;
    char *buf = el_test_read_file(el_test_ref_path("models/tiny-llama-F16.gguf"), &len);
    CHECK(buf != NULL && len > 4096);
    if (buf) {
        char path[] = "/tmp/el_test_runtime_XXXXXX";
        int fd = mkstemp(path);
        CHECK(fd >= 0);
        if (fd >= 0) {
            close(fd);
            /* cuts inside the header / metadata (a count or length then runs past the end:
             * the reader's plausibility check may report it as BAD_COUNT first) and inside
             * the tensor data (a tensor runs past the end) */
            struct { size_t n; bool data; } cuts[] = {{12, false}, {100, false}, {4096, false}, {40000, false},
                                                      {len / 2, true}, {len - 4096, true}, {len - 1, true}};
            for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
                FILE *f = fopen(path, "wb");
                if (!f) { CHECK(0); break; }
                fwrite(buf, 1, cuts[i].n, f);
                fclose(f);
                el_model_params mp = el_model_default_params();
                mp.n_threads = 1;
                el_error err = {EL_OK, ""};
                el_model *m = el_model_load(path, &mp, &err);
                printf("  truncated to %zu bytes: %s \"%s\"\n", cuts[i].n, el_status_name(err.code), err.msg);
                CHECKF(m == NULL, "truncated model (%zu bytes) loaded", cuts[i].n);
                bool code_ok = err.code == EL_ERR_TRUNCATED || err.code == EL_ERR_BAD_TENSOR ||
                               (!cuts[i].data && err.code == EL_ERR_BAD_COUNT);
                CHECKF(code_ok, "truncated (%zu): %s", cuts[i].n, el_status_name(err.code));
                CHECK(err.msg[0] != 0);
                el_model_free(m);
            }
            unlink(path);
        }
        free(buf);
    }
    el_error err = {EL_OK, ""};
    el_model_params mp = el_model_default_params();
    el_model *m = el_model_load("/nonexistent/dir/model.gguf", &mp, &err);
    CHECKF(m == NULL && err.code == EL_ERR_IO && err.msg[0], "missing file: %s", el_status_name(err.code));

    const char *vocab = el_test_ref_path("tokenizer/ggml-vocab-llama-spm.gguf");
    char vpath[4096];
    snprintf(vpath, sizeof vpath, "%s", vocab);
    mp.vocab_only = false;
    m = el_model_load(vpath, &mp, &err);
    printf("  vocab-only file as a model: %s \"%s\"\n", el_status_name(err.code), err.msg);
    CHECKF(m == NULL && (err.code == EL_ERR_MISSING || err.code == EL_ERR_UNSUPPORTED) && err.msg[0],
           "vocab-only file: %s", el_status_name(err.code));
    el_model_free(m);
    mp.vocab_only = true;
    m = el_model_load(vpath, &mp, &err);
    CHECKF(m != NULL, "vocab_only load: %s", err.msg);
    if (m) {
        el_session *s = el_session_new(m, NULL, &err);
        CHECKF(s == NULL && err.code == EL_ERR_INVALID_ARG, "session on a vocab-only model: %s",
               el_status_name(err.code));
        el_session_free(s);
        el_model_free(m);
    }
}

/* ---- 8. non-finite numbers: metadata refused at load, NaN logits a typed error ---- */

/* A copy of a reference model with `nbytes` bytes at the value of metadata
 * key `key` (or, if tensor, at element `elem` of that tensor) replaced by
 * `val`; written to path. */
static bool write_patched(const char *model, const char *path, const char *key, bool tensor, size_t elem,
                          const void *val, size_t nbytes) {
    size_t len = 0;
    char *buf = el_test_read_file(el_test_ref_path(model), &len);
    el_error err;
    el_gguf *g = el_gguf_open(el_test_ref_path(model), &err);
    bool ok = buf && g;
    size_t off = 0;
    if (ok && tensor) {
        const el_gguf_tensor *t = el_gguf_find_tensor(g, key);
        ok = t && (elem + 1) * nbytes <= t->nbytes;
        if (ok) off = (size_t)((const uint8_t *)t->data - el_gguf_base(g)) + elem * nbytes;
    } else if (ok) {
        const el_gguf_kv *kv = el_gguf_find(g, key);
        ok = kv && kv->type == EL_GGUF_FLOAT32 && nbytes == 4;
        if (ok) off = (size_t)(kv->data - el_gguf_base(g));
    }
    CHECKF(ok, "cannot patch %s in %s", key, model);
    if (ok) {
        memcpy(buf + off, val, nbytes);
        FILE *f = fopen(path, "wb");
        ok = f && fwrite(buf, 1, len, f) == len;
        if (f) fclose(f);
    }
    el_gguf_close(g);
    free(buf);
    return ok;
}

static void test_nonfinite(void) {
    printf("[8] non-finite metadata and weights\n");
    char path[] = "/tmp/el_test_nan_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return;
    close(fd);
    el_model_params mp = el_model_default_params();
    mp.n_threads = 1;
    el_error err;

    /* metadata: each bad value is refused at load, naming the key and the value */
    const struct { const char *model, *key; float v; const char *shown; } meta[] = {
        {"models/tiny-llama-F16.gguf", "llama.attention.layer_norm_rms_epsilon", NAN, "nan"},
        {"models/tiny-llama-F16.gguf", "llama.attention.layer_norm_rms_epsilon", INFINITY, "inf"},
        {"models/tiny-llama-F16.gguf", "llama.attention.layer_norm_rms_epsilon", 0.0f, "= 0 "},
        {"models/tiny-llama-F16.gguf", "llama.attention.layer_norm_rms_epsilon", -1e-5f, "-1e-05"},
        {"models/tiny-llama-F16.gguf", "llama.attention.layer_norm_rms_epsilon", 0.5f, "0.5"},
        {"models/tiny-llama-F16.gguf", "llama.rope.freq_base", NAN, "nan"},
        {"models/tiny-llama-F16.gguf", "llama.rope.freq_base", 0.0f, "= 0 "},
        {"models/tiny-gemma3-F16.gguf", "gemma3.attention.layer_norm_rms_epsilon", NAN, "nan"},
        {"models/tiny-gemma3-F16.gguf", "gemma3.rope.freq_base_swa", -INFINITY, "-inf"},
        {"models/tiny-qwen2-F16.gguf", "qwen2.attention.layer_norm_rms_epsilon", NAN, "nan"},
        {"models/tiny-qwen3-F16.gguf", "qwen3.rope.freq_base", NAN, "nan"},
    };
    for (size_t i = 0; i < sizeof meta / sizeof *meta; i++) {
        if (!write_patched(meta[i].model, path, meta[i].key, false, 0, &meta[i].v, 4)) continue;
        err = (el_error){EL_OK, ""};
        el_model *m = el_model_load(path, &mp, &err);
        printf("  %s = %g: %s \"%s\"\n", meta[i].key, meta[i].v, el_status_name(err.code), err.msg);
        CHECKF(m == NULL && err.code == EL_ERR_BAD_VALUE && strstr(err.msg, meta[i].key) && strstr(err.msg, meta[i].shown),
               "%s = %g: loaded or wrong error: %s", meta[i].key, meta[i].v, err.msg);
        el_model_free(m);
    }

    /* weights: one NaN in an F32 norm vector, one in an F16 matrix — loads, then every
     * run is a typed error naming the step, never a token */
    const float fnan = NAN;
    const uint16_t hnan = 0x7e00; /* F16 quiet NaN */
    const struct { const char *tensor; const void *val; size_t nb; } w[] = {
        {"blk.1.attn_norm.weight", &fnan, 4}, {"blk.0.attn_q.weight", &hnan, 2}};
    for (size_t i = 0; i < sizeof w / sizeof *w; i++) {
        if (!write_patched("models/tiny-llama-F16.gguf", path, w[i].tensor, true, 7, w[i].val, w[i].nb)) continue;
        el_model *m = el_model_load(path, &mp, &err);
        CHECKF(m != NULL, "NaN weight in %s: load failed: %s", w[i].tensor, err.msg);
        if (!m) continue;
        el_session *s = new_session(m, 64, 0);
        int32_t p[16];
        int np = tokenize(m, "Once upon a time", p, 16);
        static collect c;
        memset(&c, 0, sizeof c);
        el_generate_params gp = greedy_params(4);
        err = (el_error){EL_OK, ""};
        el_generate_stats st;
        el_finish fin = el_generate(s, p, np, &gp, collect_cb, &c, &st, &err);
        printf("  NaN in %s: finish %d, %s \"%s\"\n", w[i].tensor, (int)fin, el_status_name(err.code), err.msg);
        CHECKF(fin == EL_DONE_FAILED && err.code == EL_ERR_NUMERIC && strstr(err.msg, "after the prompt") &&
                   strstr(err.msg, "NaN"),
               "NaN in %s: finish %d, %s: %s", w[i].tensor, (int)fin, el_status_name(err.code), err.msg);
        CHECKF(c.n_ids == 0 && c.n_calls == 0 && st.n_generated == 0, "NaN in %s: %d tokens delivered", w[i].tensor,
               c.n_ids);
        el_session_reset(s);
        err = (el_error){EL_OK, ""};
        int rc = el_session_eval(s, p, np, &err);
        CHECKF(rc == EL_ERR_NUMERIC && err.code == EL_ERR_NUMERIC && strstr(err.msg, "el_session_eval"),
               "el_session_eval on NaN weights: %d %s", rc, err.msg);
        el_session_free(s);
        el_model_free(m);
    }
    /* what the CLI prints: the typed error, exit 1, no token */
    if (write_patched("models/tiny-llama-F16.gguf", path, "blk.1.attn_norm.weight", true, 7, &fnan, 4)) {
        const char *args[] = {"run", "-m", path, "--allow-unsigned", "-p", "Once upon a time", "-n", "4", "--temp", "0", NULL};
        el_test_proc r;
        CHECK(el_test_run_cli(args, &r));
        CHECKF(r.status == 1 && r.err && strstr(r.err, "error: numeric:") && r.out && r.out_len == 0,
               "run on NaN weights: exit %d, stdout '%s', stderr %s", r.status, r.out ? r.out : "", r.err ? r.err : "");
        el_test_proc_free(&r);
    }
    unlink(path);
}

/* penalty_last_n = -1 means the whole context (edgellm.h), not the sampler's
 * own default window of 64: greedy with a presence penalty over 300 tokens
 * gives the same ids as passing the context size, and other ids than a
 * 64-token window (a token last seen > 64 tokens back is penalised only
 * with the whole context). */
static void test_penalty_window(el_model *m) {
    el_session *s = new_session(m, 512, 64);
    if (!s) return;
    int32_t p[64];
    int np = tokenize(m, "Here is a short story about a cat named", p, 64);
    static collect c[3];
    const int last_n[3] = {-1, 512, 64};
    for (int k = 0; k < 3; k++) {
        el_generate_params gp = greedy_params(300);
        gp.sampling.presence_penalty = 1.5f;
        gp.sampling.penalty_last_n = last_n[k];
        el_generate_stats st;
        el_error err = {0};
        el_session_reset(s);
        el_finish f = run_collect(s, p, np, &gp, &c[k], &st, &err);
        CHECKF(f == EL_DONE_LENGTH && c[k].n_ids == 300, "last_n %d: finish %d, %d ids (%s)", last_n[k], (int)f,
               c[k].n_ids, err.msg);
    }
    CHECKF(memcmp(c[0].ids, c[1].ids, sizeof c[0].ids) == 0, "penalty_last_n -1 differs from the context size");
    CHECKF(memcmp(c[0].ids, c[2].ids, sizeof c[0].ids) != 0, "penalty_last_n -1 acts like a 64-token window");
    el_session_free(s);
}

int main(void) {
    if (!el_test_have_ref()) el_test_skip("fixtures absent (make fixtures)");
    const double t0 = now_ms();
    g_llama = load_model("tiny-llama-F16.gguf", EL_TEST_THREADS);
    g_gemma = load_model("tiny-gemma3-Q8_0.gguf", EL_TEST_THREADS);
    if (!g_llama || !g_gemma) return el_test_finish("test_runtime");

    double t = now_ms();
#define STEP(call) do { call; printf("  (%.0f ms)\n", now_ms() - t); t = now_ms(); } while (0)
    STEP(test_cancel());
    STEP(test_no_alloc());
    STEP(test_context());
    STEP(test_streaming(g_llama, "llama-F16", "Here is a short story about a cat named"));
    /* the tiny gemma mostly repeats one token; this prompt gives a text that changes */
    STEP(test_streaming(g_gemma, "gemma3-Q8_0", "1, 2, 3, 4,"));
    STEP(test_determinism(g_llama, "tiny-llama-F16.gguf", "llama-F16"));
    STEP(test_determinism(g_gemma, "tiny-gemma3-Q8_0.gguf", "gemma3-Q8_0"));
    STEP(test_sessions(g_llama, "llama-F16"));
    STEP(test_sessions(g_gemma, "gemma3-Q8_0"));
    STEP(test_bad_files());
    STEP(test_nonfinite());
    STEP(test_penalty_window(g_llama));

    el_model_free(g_llama);
    el_model_free(g_gemma);
    printf("total %.1f s\n", (now_ms() - t0) / 1e3);
    return el_test_finish("test_runtime");
}
