/*
 * test_slot_file.c — a server slot's state: the prompt cache's roll-back
 * (el_session_truncate, el_generate_cached) and the slot file
 * (src/server/slot_file.c).
 *
 * - Roll-back: on tiny llama (full-context layers) and tiny Gemma 3 (window
 *   16, batch 8: a ring of 24 rows that wraps), for every prefix k of a
 *   session's 70+ positions: el_session_can_truncate follows the rule
 *   (full layers: any k; ring: max(0, k - window + 1) >= n_past - ring), a
 *   refused el_session_truncate says so and leaves n_past; an allowed one,
 *   continued with el_generate_cached on a prompt sharing k tokens, gives the
 *   greedy tokens of a fresh session on the whole prompt. The boundary is
 *   tight: one position more than the rule allows (forced), the next logits
 *   differ from the fresh ones, where at the boundary they agree.
 * - Save/restore: a session saved after a prompt (ring wrapped), restored
 *   into a fresh session, holds the same tokens and KV rows byte for byte and
 *   continues with the same tokens as the original.
 * - Hostile files: every truncation (sampled), bit flips, trailing bytes,
 *   another model (sha256), another context, another KV type (forged with a
 *   valid checksum: named in the message), out-of-vocab tokens, absurd
 *   counts: all refused with a message; a refused restore leaves the
 *   session's n_past and KV bytes untouched; a symlink is not followed; file
 *   names with a path, "..", a leading dot, NUL, over 128 bytes refused; save
 *   leaves only the named file in the directory.
 */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "edgellm.h"
#include "runtime/model.h"
#include "server/slot_file.h"
#include "testutil.h"

#define MAXT 512

typedef struct { int32_t ids[MAXT]; int n; } toks;

static bool collect(const el_token_info *t, void *user) {
    toks *o = user;
    if (t->id >= 0 && o->n < MAXT) o->ids[o->n++] = t->id;
    return true;
}

static el_generate_params greedy(int n) {
    el_generate_params gp;
    memset(&gp, 0, sizeof gp);
    gp.sampling = el_sampling_default();
    gp.sampling.temp = 0;
    gp.max_tokens = n;
    gp.ignore_eos = true;
    return gp;
}

static el_session *session_kv(el_model *m, int n_ctx, int n_batch, int cache_type) {
    el_session_params sp = el_session_default_params();
    sp.n_ctx = n_ctx;
    sp.n_batch = n_batch;
    sp.type_k = sp.type_v = cache_type;
    el_error err;
    el_session *s = el_session_new(m, &sp, &err);
    CHECKF(s != NULL, "session: %s", err.msg);
    return s;
}

static el_session *session(el_model *m, int n_ctx, int n_batch) { return session_kv(m, n_ctx, n_batch, 0); }

/* Tokens of a fresh session generating n after prompt p. */
static toks fresh(el_model *m, int n_ctx, int n_batch, const int32_t *p, int np, int n) {
    toks out = {.n = 0};
    el_session *s = session(m, n_ctx, n_batch);
    if (!s) return out;
    el_generate_params gp = greedy(n);
    el_error err;
    el_finish f = el_generate(s, p, np, &gp, collect, &out, NULL, &err);
    CHECKF(f != EL_DONE_FAILED, "fresh generate: %s", err.msg);
    el_session_free(s);
    return out;
}

static int tokenize(el_model *m, const char *text, int32_t *out, int cap) {
    int n = el_tokenize(m, text, strlen(text), out, cap, EL_TOK_ADD_SPECIAL);
    CHECKF(n > 0 && n <= cap, "tokenize: %d", n);
    return n;
}

static const char *TEXT =
    "The lighthouse keeper climbed the stairs every evening, counting each step, and lit the lamp "
    "before the ships came round the point where the rocks lay hidden under the grey water";

/* ---- roll-back ------------------------------------------------------------- */

static void rollback_case(const char *path, const char *name, int n_ctx, int n_batch) {
    el_error err;
    el_model *m = el_model_load(path, NULL, &err);
    CHECKF(m != NULL, "%s: %s", name, err.msg);
    if (!m) return;
    int32_t p[MAXT];
    const int np = tokenize(m, TEXT, p, MAXT);
    el_session *s = session(m, n_ctx, n_batch);
    if (!s) { el_model_free(m); return; }
    /* the cache: the prompt and 20 generated tokens (the last not evaluated) */
    toks gen = {.n = 0};
    el_generate_params gp = greedy(20);
    CHECK(el_generate(s, p, np, &gp, collect, &gen, NULL, &err) == EL_DONE_LENGTH);
    int32_t cache[MAXT];
    memcpy(cache, p, sizeof *p * (size_t)np);
    memcpy(cache + np, gen.ids, sizeof *gen.ids * (size_t)gen.n);
    const int N = el_session_n_past(s);
    CHECKF(N == np + gen.n, "%s: n_past %d after %d + %d", name, N, np, gen.n); /* a length stop evaluates the last */
    const int ring = s->kv_ring, window = m->hp.n_swa;
    if (strstr(name, "gemma")) CHECKF(ring > 0 && N > ring, "%s: the ring (%d rows) should have wrapped (%d)", name, ring, N);
    int allowed = 0, refused = 0, checked = 0;
    const int tail_ids[3] = {p[1], p[2], p[3]};
    for (int k = 0; k <= N; k++) {
        const int lo = window > 0 && k - window + 1 > 0 ? k - window + 1 : 0;
        const bool rule = ring <= 0 || k == 0 || k == N || lo >= N - ring;
        CHECKF(el_session_can_truncate(s, k) == (int)rule, "%s: can_truncate(%d) of %d: %d, rule %d", name, k, N,
               el_session_can_truncate(s, k), rule);
        if (!rule) {
            refused++;
            CHECK(el_session_truncate(s, k, &err) == EL_ERR_CONTEXT && strstr(err.msg, "sliding-window"));
            CHECK(el_session_n_past(s) == N);
            continue;
        }
        allowed++;
        /* every 7th k (and the edges) is run end to end: that costs a fresh session each */
        if (k % 7 && k != N && k != N - 1 && !(ring > 0 && lo == N - ring)) continue;
        /* a new prompt: the first k cached tokens, then 3 others */
        int32_t q[MAXT];
        memcpy(q, cache, sizeof *q * (size_t)k);
        memcpy(q + k, tail_ids, sizeof tail_ids);
        const int nq = k + 3;
        const toks want = fresh(m, n_ctx, n_batch, q, nq, 12);
        /* roll back a copy of the state: a session in the same state as s */
        el_session *c = session(m, n_ctx, n_batch);
        if (!c) break;
        toks g2 = {.n = 0};
        CHECK(el_generate(c, p, np, &gp, collect, &g2, NULL, &err) == EL_DONE_LENGTH);
        CHECK(el_session_truncate(c, k, &err) == 0 && el_session_n_past(c) == k);
        toks got = {.n = 0};
        el_generate_params g12 = greedy(12);
        el_finish f = el_generate_cached(c, q, nq, k, &g12, collect, &got, NULL, &err);
        CHECKF(f == EL_DONE_LENGTH, "%s: cached generate: %s", name, err.msg);
        CHECKF(got.n == want.n && !memcmp(got.ids, want.ids, sizeof *got.ids * (size_t)got.n),
               "%s: keeping %d of %d positions: tokens differ from a fresh computation", name, k, N);
        checked++;
        el_session_free(c);
    }
    CHECKF(checked >= 5, "%s: only %d prefixes run end to end", name, checked);
    if (ring > 0) {
        CHECKF(refused > 0 && allowed > 0, "%s: %d allowed, %d refused", name, allowed, refused);
        /* tight: at the boundary the logits are bit for bit a fresh session's;
         * one position further they are not. Every position is evaluated on
         * its own here (batch shapes change the arithmetic in the last bits). */
        int kb = -1;
        for (int k = 1; k < N; k++)
            if (el_session_can_truncate(s, k)) { kb = k; break; }
        CHECKF(kb > 1, "%s: boundary %d", name, kb);
        float diff[2] = {0, 0};
        for (int t = 0; t < 2 && kb > 1; t++) {
            const int k = kb - t;
            el_session *c = session(m, n_ctx, n_batch), *f = session(m, n_ctx, n_batch);
            for (int i = 0; i < N; i++) el_session_eval(c, &cache[i], 1, &err);
            c->n_past = k; /* forced: t = 1 is one position beyond what the ring allows */
            CHECK(el_session_eval(c, &cache[k], 1, &err) == 0);
            for (int i = 0; i <= k; i++) CHECK(el_session_eval(f, &cache[i], 1, &err) == 0);
            for (int i = 0; i < m->hp.n_vocab; i++) {
                float d = fabsf(el_session_logits(c)[i] - el_session_logits(f)[i]);
                if (d > diff[t]) diff[t] = d;
            }
            el_session_free(c);
            el_session_free(f);
        }
        CHECKF(diff[0] == 0.0f, "%s: at the boundary (keep %d) logits differ by %g", name, kb, diff[0]);
        CHECKF(diff[1] > 1e-2f, "%s: one beyond the boundary the logits differ only by %g", name, diff[1]);
        printf("%s: ring %d, window %d, %d positions: %d prefixes allowed, %d refused; logits |diff| %.2g at the "
               "boundary, %.2g one beyond\n", name, ring, window, N, allowed, refused, diff[0], diff[1]);
    } else {
        CHECKF(refused == 0, "%s: a full-context session refused %d roll-backs", name, refused);
        printf("%s: full context, %d positions: every prefix allowed\n", name, N);
    }
    /* refusals of bad arguments, state kept */
    CHECK(el_session_truncate(s, N + 1, &err) == EL_ERR_INVALID_ARG && el_session_n_past(s) == N);
    CHECK(el_session_truncate(s, -1, &err) == EL_ERR_INVALID_ARG && el_session_n_past(s) == N);
    CHECK(el_session_truncate(NULL, 0, &err) == EL_ERR_INVALID_ARG);
    int32_t one = p[0];
    CHECK(el_generate_cached(s, &one, 1, 1, &gp, NULL, NULL, NULL, &err) == EL_DONE_FAILED &&
          err.code == EL_ERR_INVALID_ARG); /* nothing left to evaluate */
    el_session_free(s);
    el_model_free(m);
}

/* ---- the slot file ------------------------------------------------------- */

static char DIR_[256];

static char *path_in(const char *name) {
    static char buf[512];
    snprintf(buf, sizeof buf, "%s/%s", DIR_, name);
    return buf;
}

static int count_dir(void) {
    DIR *d = opendir(DIR_);
    int n = 0;
    if (!d) return -1;
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

static void write_file(const char *name, const uint8_t *b, size_t n) {
    FILE *f = fopen(path_in(name), "wb");
    CHECK(f && fwrite(b, 1, n, f) == n);
    if (f) fclose(f);
}

static void rehash(uint8_t *b, size_t n) { crypto_hash_sha256(b + n - 32, b, (unsigned long long)(n - 32)); }

static void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void slot_file_case(const char *path) {
    el_error err;
    el_model *m = el_model_load(path, NULL, &err);
    CHECKF(m != NULL, "%s", err.msg);
    if (!m) return;
    uint8_t sha[32], other[32];
    for (int i = 0; i < 32; i++) { sha[i] = (uint8_t)(i * 7 + 1); other[i] = (uint8_t)(i * 7 + 2); }
    int32_t p[MAXT];
    const int np = tokenize(m, TEXT, p, MAXT);
    const int n_ctx = 256, n_batch = 8;
    el_session *s = session(m, n_ctx, n_batch);
    toks gen = {.n = 0};
    el_generate_params gp = greedy(10);
    CHECK(el_generate(s, p, np, &gp, collect, &gen, NULL, &err) == EL_DONE_LENGTH);
    int32_t cache[MAXT];
    memcpy(cache, p, sizeof *p * (size_t)np);
    memcpy(cache + np, gen.ids, sizeof *gen.ids * (size_t)gen.n);
    const int N = el_session_n_past(s);
    CHECK(s->kv_ring > 0 && N > s->kv_ring); /* the ring wrapped: its rows are saved as they lie */

    /* names */
    static const char *bad_names[] = {"", "../x", "/etc/passwd", "a/b", "..", ".", ".hidden", "a\\b", "x y", "a:b", "\xc3\xa9"};
    for (size_t i = 0; i < sizeof bad_names / sizeof *bad_names; i++) {
        CHECKF(el_slot_name_check(bad_names[i], strlen(bad_names[i]), &err) == EL_ERR_INVALID_ARG && err.msg[0],
               "name '%s' accepted", bad_names[i]);
        CHECK(el_slot_save(s, sha, cache, N, DIR_, bad_names[i], NULL, NULL, &err) == EL_ERR_INVALID_ARG);
    }
    CHECK(el_slot_name_check("a\0b", 3, &err) == EL_ERR_INVALID_ARG);
    char longname[200];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    CHECK(el_slot_name_check(longname, strlen(longname), &err) == EL_ERR_INVALID_ARG);
    CHECK(el_slot_name_check("slot-0_a.bin", 12, &err) == 0);
    CHECK(count_dir() == 0);

    /* save, then restore into a fresh session */
    size_t bytes = 0;
    CHECK(el_slot_save(s, sha, cache, N - 1, DIR_, "s.bin", &bytes, NULL, &err) == EL_ERR_INVALID_ARG); /* not what it holds */
    CHECKF(el_slot_save(s, sha, cache, N, DIR_, "s.bin", &bytes, NULL, &err) == 0, "save: %s", err.msg);
    CHECKF(count_dir() == 1, "the directory holds %d entries (a temporary file left?)", count_dir());
    size_t len = 0;
    uint8_t *file = (uint8_t *)el_test_read_file(path_in("s.bin"), &len);
    CHECK(file && len == bytes);
    el_slot_geom *g = malloc(sizeof *g);
    el_slot_view *v = malloc(sizeof *v);
    CHECK(el_slot_geom_of(s, sha, g, &err) == 0);
    CHECK(len == el_slot_file_bytes(g, (uint32_t)N));
    CHECKF(el_slot_parse(file, len, g, v, &err) == 0, "parse: %s", err.msg);
    CHECK(v->n_tokens == (uint32_t)N);

    el_session *r = session(m, n_ctx, n_batch);
    int32_t rt[MAXT];
    int got = el_slot_restore(r, sha, DIR_, "s.bin", rt, &bytes, &err);
    CHECKF(got == N, "restore: %d: %s", got, err.msg);
    CHECK(el_session_n_past(r) == N && !memcmp(rt, cache, sizeof *rt * (size_t)N));
    for (int il = 0; il < m->hp.n_layer; il++) {
        const size_t rows = el_slot_rows_stored(&g->layers[il], (uint32_t)N);
        CHECK(!memcmp(s->kc[il], r->kc[il], rows * g->layers[il].k_row_bytes));
        CHECK(!memcmp(s->vc[il], r->vc[il], rows * g->layers[il].v_row_bytes));
    }
    /* both continue alike: the cache and 4 more prompt tokens */
    int32_t q[MAXT];
    memcpy(q, cache, sizeof *q * (size_t)N);
    q[N] = p[1], q[N + 1] = p[2], q[N + 2] = p[3], q[N + 3] = p[4];
    toks a = {.n = 0}, b = {.n = 0};
    el_generate_params g12 = greedy(12);
    CHECK(el_generate_cached(s, q, N + 4, N, &g12, collect, &a, NULL, &err) == EL_DONE_LENGTH);
    CHECK(el_generate_cached(r, q, N + 4, N, &g12, collect, &b, NULL, &err) == EL_DONE_LENGTH);
    CHECKF(a.n == 12 && b.n == 12 && !memcmp(a.ids, b.ids, sizeof a.ids[0] * 12), "restored session continues differently");
    const toks want = fresh(m, n_ctx, n_batch, q, N + 4, 12);
    CHECK(!memcmp(a.ids, want.ids, sizeof a.ids[0] * 12));

    /* hostile files: every refused, the session untouched */
    el_session *t = session(m, n_ctx, n_batch);
    toks g3 = {.n = 0};
    el_generate_params g5 = greedy(5);
    el_generate(t, p, 9, &g5, collect, &g3, NULL, &err);
    const int t_past = el_session_n_past(t);
    uint8_t *snap = malloc(t->block_bytes);
    memcpy(snap, t->block, t->block_bytes);
    int32_t scratch[MAXT];
#define REFUSED(name_, what_)                                                                                          \
    do {                                                                                                               \
        int rc_ = el_slot_restore(t, sha, DIR_, name_, scratch, NULL, &err);                                           \
        CHECKF(rc_ < 0 && err.msg[0], "%s: restore gave %d", what_, rc_);                                              \
        CHECKF(el_session_n_past(t) == t_past && !memcmp(snap, t->block, t->block_bytes), "%s: session changed", what_); \
    } while (0)
    uint8_t *w = malloc(len + 64);
    int n_trunc = 0;
    for (size_t cut = 0; cut < len; cut += cut < 300 ? 1 : 997) {
        CHECKF(el_slot_parse(file, cut, g, v, &err) != 0 && err.msg[0], "a file cut at %zu of %zu accepted", cut, len);
        n_trunc++;
    }
    CHECK(el_slot_parse(file, len - 1, g, v, &err) == EL_ERR_TRUNCATED);
    write_file("cut.bin", file, len / 2);
    REFUSED("cut.bin", "truncated file");
    memcpy(w, file, len);
    memset(w + len, 0, 8);
    CHECK(el_slot_parse(w, len + 8, g, v, &err) != 0); /* trailing bytes */
    int n_flip = 0;
    for (size_t off = 0; off < len; off += off < 400 ? 3 : 1009) {
        memcpy(w, file, len);
        w[off] ^= 0x10;
        CHECKF(el_slot_parse(w, len, g, v, &err) != 0 && err.msg[0], "a bit flipped at %zu accepted", off);
        n_flip++;
    }
    memcpy(w, file, len);
    w[len - 100] ^= 1;
    CHECK(el_slot_parse(w, len, g, v, &err) == EL_ERR_BAD_VALUE && strstr(err.msg, "checksum"));
    write_file("flip.bin", w, len);
    REFUSED("flip.bin", "corrupt file");
    /* another model */
    CHECK(el_slot_restore(t, other, DIR_, "s.bin", scratch, NULL, &err) < 0 && strstr(err.msg, "another model"));
    CHECK(el_session_n_past(t) == t_past);
    /* another context size */
    el_session *c128 = session(m, 128, n_batch);
    CHECK(el_slot_restore(c128, sha, DIR_, "s.bin", scratch, NULL, &err) < 0 && strstr(err.msg, "context"));
    CHECK(el_session_n_past(c128) == 0);
    el_session_free(c128);
    /* another batch (ring size) */
    el_session *b16 = session(m, n_ctx, 16);
    CHECK(el_slot_restore(b16, sha, DIR_, "s.bin", scratch, NULL, &err) < 0 && strstr(err.msg, "ring"));
    el_session_free(b16);
    /* another KV cache type (Q8_0 = 8), with a valid checksum */
    memcpy(w, file, len);
    const size_t hdr = 80;
    put32(w + hdr, 8);
    rehash(w, len);
    CHECK(el_slot_parse(w, len, g, v, &err) == EL_ERR_UNSUPPORTED && strstr(err.msg, "types") && strstr(err.msg, "8"));
    printf("another cache type: %s\n", err.msg);
    write_file("q8.bin", w, len);
    REFUSED("q8.bin", "another cache type");
    /* a token outside the vocab, with a valid checksum */
    memcpy(w, file, len);
    const size_t tok0 = hdr + 24 * (size_t)m->hp.n_layer;
    put32(w + tok0 + 4 * 3, (uint32_t)m->hp.n_vocab);
    rehash(w, len);
    CHECK(el_slot_parse(w, len, g, v, &err) == EL_ERR_BAD_VALUE && strstr(err.msg, "vocab"));
    /* absurd counts (valid checksum): layers, tokens beyond n_ctx, header size */
    memcpy(w, file, len);
    put32(w + 52, 0xffffffffu);
    rehash(w, len);
    CHECK(el_slot_parse(w, len, g, v, &err) == EL_ERR_BAD_COUNT);
    memcpy(w, file, len);
    put32(w + 68, 100000);
    rehash(w, len);
    CHECK(el_slot_parse(w, len, g, v, &err) == EL_ERR_BAD_COUNT);
    memcpy(w, file, len);
    put32(w + 8, 2);
    CHECK(el_slot_parse(w, len, g, v, &err) == EL_ERR_BAD_VERSION);
    memcpy(w, file, len);
    w[0] = 'X';
    CHECK(el_slot_parse(w, len, g, v, &err) == EL_ERR_BAD_MAGIC);
    /* a file larger than any this slot could have is not read */
    FILE *big = fopen(path_in("big.bin"), "wb");
    if (big) {
        fseek(big, (long)el_slot_file_bytes(g, (uint32_t)n_ctx) + 1, SEEK_SET);
        fputc(0, big);
        fclose(big);
    }
    REFUSED("big.bin", "oversized file");
    /* a symlink in the directory is not followed; a missing file; a name with a path */
    char target[512];
    snprintf(target, sizeof target, "%s", path_in("s.bin"));
    CHECK(symlink(target, path_in("link.bin")) == 0);
    REFUSED("link.bin", "symlink");
    CHECK(strstr(err.msg, "symbolic link") != NULL);
    REFUSED("missing.bin", "missing file");
    REFUSED("../s.bin", "path traversal");
    printf("hostile slot files refused: %d truncations, %d bit flips, foreign model/context/ring/type, bad tokens and "
           "counts, symlink, traversal\n", n_trunc, n_flip);
    free(snap);
    free(w);
    free(file);
    free(g);
    free(v);
    el_session_free(t);
    el_session_free(r);
    el_session_free(s);
    el_model_free(m);
}

/* A Q8_0 / Q4_0 cache saves and restores as it lies (its rows in their type),
 * continues as the original, and is refused by a session of another type. */
static void typed_case(const char *path, int type, const char *label) {
    el_error err;
    el_model *m = el_model_load(path, NULL, &err);
    CHECKF(m != NULL, "%s", err.msg);
    if (!m) return;
    uint8_t sha[32];
    for (int i = 0; i < 32; i++) sha[i] = (uint8_t)(i * 5 + 3);
    int32_t p[MAXT];
    const int np = tokenize(m, TEXT, p, MAXT);
    el_session *s = session_kv(m, 256, 8, type), *r = session_kv(m, 256, 8, type), *f16 = session(m, 256, 8);
    toks gen = {.n = 0};
    el_generate_params gp = greedy(6);
    CHECK(el_generate(s, p, np, &gp, collect, &gen, NULL, &err) == EL_DONE_LENGTH);
    int32_t cache[MAXT];
    memcpy(cache, p, sizeof *p * (size_t)np);
    memcpy(cache + np, gen.ids, sizeof *gen.ids * (size_t)gen.n);
    const int N = el_session_n_past(s);
    size_t bytes = 0;
    CHECKF(el_slot_save(s, sha, cache, N, DIR_, "typed.bin", &bytes, NULL, &err) == 0, "%s save: %s", label, err.msg);
    int32_t rt[MAXT];
    CHECKF(el_slot_restore(r, sha, DIR_, "typed.bin", rt, NULL, &err) == N, "%s restore: %s", label, err.msg);
    CHECKF(el_slot_restore(f16, sha, DIR_, "typed.bin", rt, NULL, &err) < 0 && el_session_n_past(f16) == 0,
           "%s: an F16 session took a %s file", label, label);
    int32_t q[MAXT];
    memcpy(q, cache, sizeof *q * (size_t)N);
    q[N] = p[1], q[N + 1] = p[2];
    toks a = {.n = 0}, b = {.n = 0};
    el_generate_params g8 = greedy(8);
    CHECK(el_generate_cached(s, q, N + 2, N, &g8, collect, &a, NULL, &err) == EL_DONE_LENGTH);
    CHECK(el_generate_cached(r, q, N + 2, N, &g8, collect, &b, NULL, &err) == EL_DONE_LENGTH);
    CHECKF(a.n == 8 && b.n == 8 && !memcmp(a.ids, b.ids, sizeof a.ids[0] * 8), "%s: restored session continues differently",
           label);
    unlink(path_in("typed.bin"));
    el_session_free(s);
    el_session_free(r);
    el_session_free(f16);
    el_model_free(m);
}

static void rm_dir(void) {
    DIR *d = opendir(DIR_);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) unlink(path_in(e->d_name));
    closedir(d);
    rmdir(DIR_);
}

int main(void) {
    if (sodium_init() < 0) return 1;
    if (!el_test_have_ref()) el_test_skip("fixtures absent (make fixtures)");
    rollback_case(el_test_ref_path("models/tiny-llama-Q4_K_M.gguf"), "tiny-llama-Q4_K_M", 256, 8);
    rollback_case(el_test_ref_path("models/tiny-gemma3-Q4_K_M.gguf"), "tiny-gemma3-Q4_K_M", 256, 8);
    snprintf(DIR_, sizeof DIR_, "/tmp/el_slot_test.XXXXXX");
    CHECK(mkdtemp(DIR_) != NULL);
    slot_file_case(el_test_ref_path("models/tiny-gemma3-Q4_K_M.gguf"));
    typed_case(el_test_ref_path("models/tiny-qwen3-F16.gguf"), EL_CACHE_Q8_0, "q8_0");
    typed_case(el_test_ref_path("models/tiny-gemma3-Q4_K_M.gguf"), EL_CACHE_Q4_0, "q4_0");
    rm_dir();
    return el_test_finish("test_slot_file");
}
