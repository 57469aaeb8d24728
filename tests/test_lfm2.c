/*
 * test_lfm2.c — LFM2 (src/runtime/arch/lfm2.c): its short-convolution state
 * beside the KV cache, and what its loader refuses.
 *
 *   1. the plan: the tiny model's 4 conv layers of width 3 give each session
 *      a ring of min(n_ctx, 2 + n_batch) rows of n_embd floats per conv
 *      layer; el_session_bytes grows by exactly those bytes (64-aligned)
 *      over the same model planned without conv layers, el_session_new
 *      places it (conv_ring), el_plan_session_bytes (the capacity planner's
 *      figure) equals el_session_bytes;
 *   2. roll-back: generate N tokens greedily, truncate to k (inside the
 *      output, inside the prompt), regenerate: the continuation equals the
 *      first run's from k on, and a fresh session fed the first k+1 tokens
 *      continues the same way; a conv-state row the next position reads,
 *      overwritten, changes the logits (so the check can fail); a roll-back
 *      further than the ring holds is refused (EL_ERR_CONTEXT naming the
 *      short-convolution state) and changes nothing, el_session_can_truncate
 *      agrees, truncating to 0 always works;
 *   3. speculative decoding (EL_SPEC_PREDICT with a prediction that is
 *      wrong every 5th token, so verification rejects and rolls back) gives
 *      plain greedy decoding's tokens, with rejections counted;
 *   4. bad input, each at load naming the key or tensor: shortconv.l_cache
 *      0, 1 and huge; a head_count_kv array of another length than
 *      block_count, with two different non-zero values, or all zeros; a
 *      missing or misshaped conv kernel, in_proj, out_proj;
 *   5. slot files refuse an LFM2 session (their format has no conv state).
 * Batched = solo is test_batch's (tiny-lfm2 Q8_0 and Q4_K_M), parity with
 * llama.cpp test_parity's. Skips (77) without the reference fixtures; under
 * CI=true a missing fixture fails.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "edgellm.h"
#include "memory/plan.h"
#include "package/gguf.h"
#include "runtime/model.h"
#include "server/slot_file.h"
#include "testutil.h"
#include "spec_util.h"

#define F16_MODEL "models/tiny-lfm2-F16.gguf"
#define Q8_MODEL "models/tiny-lfm2-Q8_0.gguf"

static el_model *load(const char *rel) {
    el_error err = {0};
    el_model_params mp = el_model_default_params();
    mp.n_threads = 2;
    el_model *m = el_model_load(el_test_ref_path(rel), &mp, &err);
    CHECKF(m != NULL, "%s: %s", rel, err.msg);
    return m;
}

static el_session *session(el_model *m, int n_ctx, int n_batch, int n_draft) {
    el_error err = {0};
    el_session_params sp = el_session_default_params();
    sp.n_ctx = n_ctx, sp.n_batch = n_batch, sp.n_draft_max = n_draft;
    el_session *s = el_session_new(m, &sp, &err);
    CHECKF(s != NULL, "session: %s", err.msg);
    return s;
}

/* ---- 1. the plan ---- */

static void test_plan(void) {
    printf("[1] the conv state in the session plan\n");
    el_model *m = load(F16_MODEL);
    if (!m) return;
    const int E = m->hp.n_embd;
    CHECKF(m->mem.n_conv_layers == 4 && m->mem.conv_width == 3, "conv layers %d width %d (want 4, 3)", m->mem.n_conv_layers,
           m->mem.conv_width);
    el_mem_model plain = m->mem;
    plain.n_conv_layers = 0;
    static const int shapes[][2] = {{256, 32}, {1024, 512}, {16, 64}, {8, 8}};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        const int n_ctx = shapes[i][0], n_batch = shapes[i][1];
        const int nb = n_batch < n_ctx ? n_batch : n_ctx;
        const int ring = 2 + nb < n_ctx ? 2 + nb : n_ctx;
        el_session_plan p;
        CHECKF(el_plan_session_full(&m->mem, n_ctx, nb, 0, 0, 0, 1, &p) == 0, "plan %d/%d", n_ctx, nb);
        const size_t want = (size_t)4 * (size_t)ring * (size_t)E * sizeof(float);
        CHECKF(p.conv_ring == ring && p.conv_bytes == want, "n_ctx %d n_batch %d: ring %d bytes %zu (want %d, %zu)", n_ctx, nb,
               p.conv_ring, p.conv_bytes, ring, want);
        const size_t with = el_session_bytes(m, n_ctx, n_batch);
        const size_t without = el_plan_session_bytes(&plain, n_ctx, nb, 0, 0, 0, 0, 0);
        const size_t aligned = (want + 63) & ~(size_t)63;
        printf("  n_ctx %4d n_batch %3d: ring %3d rows, conv state %7zu bytes, session %zu (without conv %zu)\n", n_ctx, nb,
               ring, want, with, without);
        CHECKF(with == without + aligned, "session bytes %zu != %zu + %zu", with, without, aligned);
        CHECKF(with == el_plan_session_bytes(&m->mem, n_ctx, nb, 0, 0, 0, 0, 0), "capacity figure differs");
        el_session *s = session(m, n_ctx, n_batch, 0);
        if (s) {
            CHECKF(s->conv_ring == ring && s->conv_state != NULL, "session ring %d", s->conv_ring);
            CHECKF(s->block_bytes + m->mem.session_fixed == with, "session block %zu + fixed != %zu", s->block_bytes, with);
        }
        el_session_free(s);
    }
    /* a model without conv layers plans none */
    el_session_plan p;
    CHECKF(el_plan_session_full(&plain, 256, 32, 0, 0, 0, 1, &p) == 0 && p.conv_bytes == 0 && p.conv_ring == 0, "plain plan");
    el_model_free(m);
}

/* ---- 2. roll-back ---- */

static void test_rollback(void) {
    printf("[2] truncate and regenerate\n");
    el_model *m = load(Q8_MODEL);
    if (!m) return;
    /* n_batch 64: a ring of 66 rows holds every position of this test (the refusal is below) */
    el_session *s = session(m, 256, 64, 0), *f = session(m, 256, 64, 0);
    if (!s || !f) { el_session_free(s); el_session_free(f); el_model_free(m); return; }
    int32_t seq[300];
    const char *text = "The history of the lighthouse begins with";
    const int np = el_tokenize(m, text, strlen(text), seq, 64, EL_TOK_ADD_SPECIAL);
    CHECKF(np > 4, "tokenize: %d", np);
    enum { N = 24 };
    gen_out a = {0}, b = {0};
    el_generate_stats st;
    spec_generate(s, seq, np, NULL, N, 0.0f, 1, true, &a, &st, NULL);
    CHECKF(a.n == N, "first run: %d tokens", a.n);
    memcpy(seq + np, a.ids, sizeof(int32_t) * (size_t)a.n);
    const int total = np + a.n;
    CHECKF(el_session_n_past(s) == total, "n_past %d, want %d", el_session_n_past(s), total);
    const int keeps[] = {np + 12, np + 5, np + 1, np - 3, 2};
    for (size_t i = 0; i < sizeof keeps / sizeof *keeps; i++) {
        const int k = keeps[i];
        el_error err = {0};
        CHECKF(el_session_truncate(s, k, &err) == 0, "truncate to %d: %s", k, err.msg);
        /* feed the tokens from k to the end of the prompt (at least one) and continue: the first
         * run's tokens from there on */
        const int from = k + 1 > np ? k + 1 : np, want_n = total - from;
        spec_generate(s, seq + k, from - k, NULL, want_n, 0.0f, 1, true, &b, &st, NULL);
        const bool same = b.n == want_n && !memcmp(b.ids, seq + from, sizeof(int32_t) * (size_t)want_n);
        /* a fresh session fed the first `from` tokens */
        gen_out c = {0};
        el_session_reset(f);
        spec_generate(f, seq, from, NULL, want_n, 0.0f, 1, true, &c, &st, NULL);
        const bool fresh = c.n == want_n && !memcmp(c.ids, seq + from, sizeof(int32_t) * (size_t)want_n);
        printf("  keep %2d of %d: regenerated %d tokens %s the first run; fresh run %s\n", k, total, b.n,
               same ? "equal to" : "DIFFERENT from", fresh ? "equal" : "DIFFERENT");
        CHECKF(same, "truncate to %d: the continuation differs from the first run", k);
        CHECKF(fresh, "keep %d: a fresh run differs", k);
    }
    /* sensitivity: the ring row of position k - 1 (read by position k) overwritten changes the next logits */
    {
        const int k = np + 6;
        el_error err = {0};
        el_session_reset(s);
        spec_generate(s, seq, np, NULL, N, 0.0f, 1, true, &a, &st, NULL);
        CHECKF(el_session_truncate(s, k, &err) == 0, "truncate: %s", err.msg);
        CHECKF(el_session_eval(s, seq + k, 1, &err) == 0, "eval: %s", err.msg);
        float *ref = malloc(sizeof(float) * (size_t)m->hp.n_vocab);
        memcpy(ref, el_session_logits(s), sizeof(float) * (size_t)m->hp.n_vocab);
        CHECKF(el_session_truncate(s, k, &err) == 0, "truncate: %s", err.msg);
        float *row = s->conv_state + (size_t)((k - 1) % s->conv_ring) * (size_t)m->hp.n_embd; /* layer 0's ring */
        for (int e = 0; e < m->hp.n_embd; e++) row[e] += 1.0f;
        CHECKF(el_session_eval(s, seq + k, 1, &err) == 0, "eval: %s", err.msg);
        CHECKF(memcmp(ref, el_session_logits(s), sizeof(float) * (size_t)m->hp.n_vocab) != 0,
               "a changed conv-state row did not change the logits");
        free(ref);
    }
    el_session_free(s);
    el_session_free(f);

    /* refusal: a ring of 2 + 4 rows holds back to n_past - 4 */
    s = session(m, 256, 4, 0);
    if (s) {
        el_session_reset(s);
        spec_generate(s, seq, np, NULL, 16, 0.0f, 1, true, &a, &st, NULL);
        const int past = el_session_n_past(s);
        CHECKF(s->conv_ring == 6, "ring %d", s->conv_ring);
        el_error err = {0};
        CHECKF(el_session_can_truncate(s, past - 5) == 0, "can_truncate past-5");
        const int rc = el_session_truncate(s, past - 5, &err);
        printf("  ring of %d rows: keep %d of %d -> %s \"%s\"\n", s->conv_ring, past - 5, past, el_status_name(rc), err.msg);
        CHECKF(rc == EL_ERR_CONTEXT && strstr(err.msg, "short-convolution"), "refusal: %s", err.msg);
        CHECKF(el_session_n_past(s) == past, "a refused truncate changed n_past");
        CHECKF(el_session_can_truncate(s, past - 4) == 1, "can_truncate past-4");
        CHECKF(el_session_truncate(s, past - 4, &err) == 0, "truncate past-4: %s", err.msg);
        CHECKF(el_session_truncate(s, 0, &err) == 0 && el_session_n_past(s) == 0, "truncate to 0: %s", err.msg);
    }
    el_session_free(s);
    el_model_free(m);
}

/* ---- 3. speculative decoding ---- */

static void test_spec(void) {
    printf("[3] speculative decoding = plain\n");
    el_model *m = load(Q8_MODEL);
    if (!m) return;
    el_session *s = session(m, 512, 64, 8);
    if (!s) { el_model_free(m); return; }
    int32_t toks[256];
    const int n = el_tokenize(m, COPY_PROMPT, strlen(COPY_PROMPT), toks, 256, EL_TOK_ADD_SPECIAL);
    gen_out plain = {0}, spec = {0};
    el_generate_stats st = {0};
    el_session_reset(s);
    spec_generate(s, toks, n, NULL, 64, 0.0f, 1, true, &plain, &st, NULL);
    int32_t pred[64];
    for (int i = 0; i < plain.n; i++) pred[i] = i % 5 == 4 ? (plain.ids[i] + 1) % m->hp.n_vocab : plain.ids[i];
    el_spec_params sp = {0};
    sp.mode = EL_SPEC_PREDICT, sp.n_draft_max = 8, sp.fixed = 1, sp.prediction = pred, sp.n_prediction = plain.n;
    el_session_reset(s);
    spec_generate(s, toks, n, &sp, 64, 0.0f, 1, true, &spec, &st, NULL);
    printf("  %d tokens: drafted %d, accepted %d, %s\n", spec.n, st.n_drafted, st.n_accepted,
           same_ids(&spec, &plain) ? "equal to plain" : "DIFFERENT from plain");
    CHECKF(same_ids(&spec, &plain), "speculative tokens differ from plain decoding");
    CHECKF(st.n_drafted > 0 && st.n_accepted < st.n_drafted, "no rejection happened (drafted %d accepted %d)", st.n_drafted,
           st.n_accepted);
    el_session_free(s);
    el_model_free(m);
}

/* ---- 4. bad input ---- */

static char g_tmp[] = "/tmp/el_test_lfm2_XXXXXX";

/* The F16 model's bytes and the offset of key's value (its first array element for arrays). */
static char *with_key(const char *key, size_t *len, size_t *at) {
    char *buf = el_test_read_file(el_test_ref_path(F16_MODEL), len);
    el_error err;
    el_gguf *g = el_gguf_open(el_test_ref_path(F16_MODEL), &err);
    const el_gguf_kv *kv = g ? el_gguf_find(g, key) : NULL;
    CHECKF(buf && kv, "no key %s", key);
    if (kv) *at = (size_t)(kv->data - el_gguf_base(g));
    el_gguf_close(g);
    if (!kv) { free(buf); return NULL; }
    return buf;
}

static void expect(const char *what, el_error err, el_status code, const char *needle) {
    printf("  %-44s %s \"%s\"\n", what, el_status_name(err.code), err.msg);
    CHECKF(err.code == code && strstr(err.msg, needle), "%s: want %s naming '%s', got %s: %s", what, el_status_name(code),
           needle, el_status_name(err.code), err.msg);
}

static size_t tensor_info_at(const char *buf, size_t len, const char *name) {
    const size_t nl = strlen(name);
    for (size_t i = 8; i + nl + 4 <= len; i++) {
        uint64_t l;
        memcpy(&l, buf + i - 8, 8);
        if (l == nl && memcmp(buf + i, name, nl) == 0) return i + nl;
    }
    return 0;
}

static void test_bad_input(void) {
    printf("[4] bad metadata and tensors\n");
    size_t len, at;
    static const uint32_t widths[] = {0, 1, 65, 1u << 30};
    for (size_t i = 0; i < sizeof widths / sizeof *widths; i++) {
        char *buf = with_key("lfm2.shortconv.l_cache", &len, &at);
        if (!buf) return;
        memcpy(buf + at, &widths[i], 4);
        char what[64];
        snprintf(what, sizeof what, "shortconv.l_cache = %u", widths[i]);
        expect(what, el_test_load_bytes(g_tmp, buf, len), EL_ERR_BAD_VALUE, "lfm2.shortconv.l_cache");
        free(buf);
    }
    /* head_count_kv: 6 entries; block_count patched to 5 makes it the wrong length */
    char *buf = with_key("lfm2.block_count", &len, &at);
    if (buf) {
        const uint32_t five = 5;
        memcpy(buf + at, &five, 4);
        expect("block_count 5, head_count_kv of 6", el_test_load_bytes(g_tmp, buf, len), EL_ERR_BAD_VALUE, "lfm2.attention.head_count_kv");
        free(buf);
    }
    /* the array's elements (array data: u32 type, u64 count, then the values) */
    buf = with_key("lfm2.attention.head_count_kv", &len, &at);
    if (buf) {
        uint32_t v[6];
        memcpy(v, buf + at, sizeof v);
        CHECKF(v[0] == 0 && v[2] == 4 && v[4] == 4, "head_count_kv array %u %u %u", v[0], v[2], v[4]);
        const uint32_t two = 2, zero = 0;
        memcpy(buf + at + 4 * 4, &two, 4);
        expect("head_count_kv with 4 and 2", el_test_load_bytes(g_tmp, buf, len), EL_ERR_UNSUPPORTED, "lfm2.attention.head_count_kv");
        memcpy(buf + at + 4 * 4, &zero, 4);
        memcpy(buf + at + 2 * 4, &zero, 4);
        expect("head_count_kv all 0", el_test_load_bytes(g_tmp, buf, len), EL_ERR_UNSUPPORTED, "lfm2.attention.head_count_kv");
        free(buf);
    }
    static const struct { const char *tensor; int dim; int64_t ne; el_status want; } tc[] = {
        {"blk.1.shortconv.conv.weight", -1, 0, EL_ERR_MISSING},
        {"blk.1.shortconv.conv.weight", 0, 2, EL_ERR_BAD_TENSOR},
        {"blk.3.shortconv.conv.weight", 1, 128, EL_ERR_BAD_TENSOR},
        {"blk.0.shortconv.in_proj.weight", -1, 0, EL_ERR_MISSING},
        {"blk.0.shortconv.in_proj.weight", 1, 512, EL_ERR_BAD_TENSOR},
        {"blk.5.shortconv.out_proj.weight", 1, 128, EL_ERR_BAD_TENSOR},
        {"blk.2.attn_q_norm.weight", -1, 0, EL_ERR_MISSING},
        {"token_embd_norm.weight", -1, 0, EL_ERR_MISSING},
    };
    for (size_t i = 0; i < sizeof tc / sizeof *tc; i++) {
        buf = el_test_read_file(el_test_ref_path(F16_MODEL), &len);
        const size_t t = buf ? tensor_info_at(buf, len, tc[i].tensor) : 0;
        CHECKF(t > 0, "no tensor %s", tc[i].tensor);
        if (!t) { free(buf); continue; }
        if (tc[i].dim < 0) buf[t - 2] = '~';
        else memcpy(buf + t + 4 + 8 * (size_t)tc[i].dim, &tc[i].ne, 8);
        char what[96];
        snprintf(what, sizeof what, "%s %s", tc[i].tensor, tc[i].dim < 0 ? "missing" : "misshaped");
        expect(what, el_test_load_bytes(g_tmp, buf, len), tc[i].want, tc[i].tensor);
        free(buf);
    }
}

/* ---- 5. slot files ---- */

static void test_slot_refused(void) {
    printf("[5] slot files refuse the conv state they cannot hold\n");
    el_model *m = load(F16_MODEL);
    if (!m) return;
    el_session *s = session(m, 64, 16, 0);
    el_slot_geom *g = calloc(1, sizeof *g);
    if (s && g) {
        const uint8_t sha[32] = {0};
        el_error err = {0};
        const int rc = el_slot_geom_of(s, sha, g, &err);
        printf("  %s \"%s\"\n", el_status_name(rc), err.msg);
        CHECKF(rc == EL_ERR_UNSUPPORTED && strstr(err.msg, "short-convolution"), "slot geometry: %s", err.msg);
    }
    free(g);
    el_session_free(s);
    el_model_free(m);
}

int main(void) {
    if (!el_test_have_ref()) el_test_skip("fixtures absent (make fixtures)");
    int fd = mkstemp(g_tmp);
    if (fd >= 0) close(fd);
    test_plan();
    test_rollback();
    test_spec();
    test_bad_input();
    test_slot_refused();
    unlink(g_tmp);
    return el_test_finish("test_lfm2");
}
