/*
 * test_layout_file.c — weight layouts written into the file (`edgellm
 * quantize --layout r16`, package/layout.h) and read from it.
 *
 * On the tiny reference models:
 *   - el_requantize with layout_r16 writes the matrix weights that are Q4_0
 *     (tiny-llama-Q4_0), Q8_0 (tiny-gemma3-Q8_0), Q4_K (tiny-llama-Q4_K_M)
 *     or Q5_0 (tiny-llama-Q5_0) as Q4_0_R16 / Q8_0_R16 / Q4_K_R16 / Q5_0_R16,
 *     (token_embd too where it is the tied output: tiny-gemma3) and leaves
 *     the other tensors as they were, and converting
 *     that file back to flat rows gives the source file byte for byte;
 *   - converting the laid-out file to another type (Q8_0, Q4_0) gives the
 *     bytes the flat source gives (a layout source is read through its
 *     flat rows);
 *   - loaded, the laid-out file runs its matrices as mapped (no copy: the
 *     weights the plan counts equal the flat file's) where the CPU runs the
 *     layout (AVX-512 VNNI, EL_WEIGHT_LAYOUT not "flat"), else unpacks
 *     them; a prompt of 70 tokens in batches of 32 and 4 decode steps give
 *     the flat file's logits bit for bit wherever the layout's arithmetic
 *     is the flat kernels' (Q4_0 always; Q5_0 always: its layout computes
 *     the process's order; Q8_0 in the block order, or unpacked); where a Q8_0 layout runs the block order beside
 *     llama-order flat kernels, the logits of the flat file with the same
 *     matrices packed at load, bit for bit (the difference from the flat
 *     file is the two orders' own: printed); Q4_K's layout takes the flat
 *     kernels' two orders where their selector does (its 4-row order for
 *     a prompt's rows below n - n % 4), so it gives the flat file's bits in
 *     a batched prompt and with the prompt one token an eval;
 *   - an untied token_embd stored in a layout too (tiny-llama Q4_0 and
 *     Q4_K_M, patched in)
 *     loads with the same logits: the embedding reads its rows from the
 *     groups;
 *   - hostile: a layout type on a vector, or on a matrix whose rows are not
 *     whole groups of 16, is refused by the GGUF reader with the reason.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/cpu/kernels.h"
#include "backend/cpu/layout.h"
#include "edgellm.h"
#include "package/gguf.h"
#include "package/layout.h"
#include "package/requantize.h"
#include "runtime/model.h"
#include "testutil.h"

#define N_PROMPT 70
#define N_DECODE 4

static char g_dir[64];

static const char *tmp_path(const char *name) {
    static char buf[8][160];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, 160, "%s/%s", g_dir, name);
    return p;
}

static int requant(const char *in, const char *out, el_ftype ft, bool r16, el_requant_info *info) {
    el_requant_params p = el_requant_default_params();
    p.ftype = ft;
    p.allow_requantize = true;
    p.layout_r16 = r16;
    p.n_threads = 2;
    el_error err = {0};
    const int rc = el_requantize(in, out, &p, info, &err);
    CHECKF(rc == 0, "requantize %s -> %s: %s", in, out, err.msg);
    return rc;
}

static bool same_file(const char *a, const char *b) {
    size_t na = 0, nb = 0;
    char *x = el_test_read_file(a, &na), *y = el_test_read_file(b, &nb);
    const bool same = x && y && na == nb && !memcmp(x, y, na);
    free(x), free(y);
    return same;
}

/* Logits of the last prompt position and of N_DECODE greedy steps (N_DECODE + 1 rows of n_vocab). */
typedef struct run_out {
    float *logits;
    int n_vocab;
    int32_t toks[N_DECODE];
    int file_mats, unpacked;
    uint64_t weights;
} run_out;

/* repack: the layer matrices of type `repack` packed here, as a load-time layout (the runtime grants
 * Q8_0's only in the block order): what the file's layout must compute in any order. */
/* one_by_one: the prompt one token an eval (every product a one-row product). */
static bool run_model(const char *path, run_out *o, int repack, bool one_by_one) {
    memset(o, 0, sizeof *o);
    el_error err = {0};
    el_model_params mp = el_model_default_params();
    mp.n_threads = 2;
    el_model *m = el_model_load(path, &mp, &err);
    CHECKF(m != NULL, "load %s: %s", path, err.msg);
    if (!m) return false;
    void *packs[512];
    int n_packs = 0;
    for (int il = -1; repack && il < m->hp.n_layer; il++) { /* -1: the output (tied: token_embd's rows) */
        el_layer *L = &m->layers[il < 0 ? 0 : il];
        el_mat *lm[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
        if (il < 0) lm[0] = &m->output, lm[1] = lm[2] = lm[3] = lm[4] = lm[5] = lm[6] = &m->output;
        for (size_t i = 0; i < sizeof lm / sizeof lm[0] && n_packs < 512; i++) {
            el_mat *w = lm[i];
            if ((int)w->type != repack || !w->data || w->packed || w->ne1 % 16) continue;
            const el_layout lay = el_layout_r16_of(w->type);
            void *p = malloc(el_layout_bytes(lay, w->ne0, w->ne1));
            el_layout_pack(lay, w->data, w->row_bytes, w->ne0, w->ne1, p);
            w->packed = packs[n_packs++] = p;
            w->layout = lay;
        }
    }
    o->file_mats = m->layout_file_mats;
    o->unpacked = m->layout_unpacked;
    o->weights = el_model_weights_bytes(m);
    o->n_vocab = el_model_n_vocab(m);
    el_session_params sp = el_session_default_params();
    sp.n_ctx = 128;
    sp.n_batch = 32;
    el_session *s = el_session_new(m, &sp, &err);
    CHECKF(s != NULL, "session %s: %s", path, err.msg);
    bool ok = s != NULL;
    o->logits = calloc((size_t)(N_DECODE + 1) * (size_t)o->n_vocab, sizeof(float));
    int32_t prompt[N_PROMPT];
    for (int i = 0; i < N_PROMPT; i++) prompt[i] = (int32_t)((i * 7919 + 13) % (o->n_vocab - 2) + 1);
    for (int i = 0; ok && i < N_PROMPT; i += one_by_one ? 1 : 32) {
        const int n = one_by_one ? 1 : N_PROMPT - i < 32 ? N_PROMPT - i : 32;
        ok = el_session_eval(s, prompt + i, n, &err) == 0;
    }
    for (int step = 0; ok && step <= N_DECODE; step++) {
        const float *l = el_session_logits(s);
        memcpy(o->logits + (size_t)step * (size_t)o->n_vocab, l, sizeof(float) * (size_t)o->n_vocab);
        if (step == N_DECODE) break;
        int32_t best = 0;
        for (int v = 1; v < o->n_vocab; v++)
            if (l[v] > l[best]) best = v;
        o->toks[step] = best;
        ok = el_session_eval(s, &best, 1, &err) == 0;
    }
    CHECKF(ok, "eval %s: %s", path, err.msg);
    el_session_free(s);
    el_model_free(m);
    for (int i = 0; i < n_packs; i++) free(packs[i]);
    return ok;
}

static double max_diff(const run_out *a, const run_out *b) {
    double d = 0;
    for (size_t i = 0; i < (size_t)(N_DECODE + 1) * (size_t)a->n_vocab; i++) {
        const double x = fabs((double)a->logits[i] - (double)b->logits[i]);
        if (!(x <= d)) d = x;
    }
    return d;
}

/* Offset of a tensor info's type field (after its name, n_dims and dims) in a GGUF buffer; 0 if absent. */
static size_t type_field_at(const char *buf, size_t len, const char *name) {
    const size_t at = el_test_gguf_str_at(buf, len, name);
    if (!at) return 0;
    size_t p = at + strlen(name); /* at: the name's bytes */
    uint32_t nd;
    if (p + 4 > len) return 0;
    memcpy(&nd, buf + p, 4);
    p += 4 + 8 * (size_t)nd;
    return p + 4 <= len ? p : 0;
}

static void one_model(const char *rel, el_ftype ft, el_type base, const char *other_name, el_ftype other) {
    const char *src = el_test_ref_path(rel);
    const el_layout lay = el_layout_r16_of(base);
    const char *laid = tmp_path("laid.gguf"), *back = tmp_path("back.gguf");
    el_requant_info info;
    if (requant(src, laid, ft, true, &info)) return;
    CHECKF(info.n_layout > 0, "%s: %d tensors in a layout", rel, info.n_layout);
    /* which tensors: the Q4_0 / Q8_0 matrices of whole groups that the forward pass multiplies by */
    el_error err = {0};
    el_gguf *gs = el_gguf_open(src, &err), *gl = el_gguf_open(laid, &err);
    CHECK(gs && gl);
    int n_laid = 0;
    for (int64_t i = 0; gs && gl && i < el_gguf_n_tensors(gs); i++) {
        const el_gguf_tensor *a = el_gguf_tensor_at(gs, i);
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)a->name.len, a->name.ptr);
        const el_gguf_tensor *b = el_gguf_find_tensor(gl, name);
        CHECKF(b != NULL, "%s: %s missing", rel, name);
        if (!b) continue;
        const bool tied = !el_gguf_find_tensor(gs, "output.weight");
        const bool matmul = strncmp(name, "blk.", 4) == 0 ? strstr(name, ".attn_") || strstr(name, ".ffn_")
                                                         : !strcmp(name, "output.weight") ||
                                                               (tied && !strcmp(name, "token_embd.weight"));
        const bool want = a->type == (int)base && a->n_dims == 2 && a->ne[1] % 16 == 0 && matmul &&
                          !strstr(name, "norm");
        CHECKF(b->type == (want ? el_layout_type(lay) : a->type), "%s: %s type %s -> %s", rel, name,
               el_type_name(a->type), el_type_name(b->type));
        CHECKF(b->nbytes == a->nbytes, "%s: %s bytes", rel, name);
        n_laid += want;
    }
    CHECKF(n_laid == info.n_layout && n_laid > 0, "%s: %d laid out, %d expected", rel, info.n_layout, n_laid);
    el_gguf_close(gs);
    el_gguf_close(gl);
    /* back to flat rows: the source, byte for byte */
    if (!requant(laid, back, ft, false, &info)) CHECKF(same_file(src, back), "%s: flat -> r16 -> flat is not the source", rel);
    /* to another type: what the flat source gives */
    const char *o1 = tmp_path("other1.gguf"), *o2 = tmp_path("other2.gguf");
    if (!requant(src, o1, other, false, &info) && !requant(laid, o2, other, false, &info))
        CHECKF(same_file(o1, o2), "%s: %s from the laid-out file differs from the flat one's", rel, other_name);

    /* run */
    run_out f, l;
    if (!run_model(src, &f, 0, false) || !run_model(laid, &l, 0, false)) { free(f.logits), free(l.logits); return; }
    const bool runs = el_cpu_layout_runs(lay);
    CHECKF(runs ? l.file_mats == n_laid && l.unpacked == 0 : l.file_mats == 0 && l.unpacked == n_laid,
           "%s: %d mapped, %d unpacked of %d (the CPU runs the layout: %d)", rel, l.file_mats, l.unpacked, n_laid, runs);
    if (runs) CHECKF(l.weights == f.weights, "%s: weights %" PRIu64 " vs flat %" PRIu64 ": a hidden copy", rel, l.weights, f.weights);
    /* exact against the flat file: Q4_0, Q4_K and Q5_0 always (Q4_K's layout takes the flat selector's two
     * orders, Q5_0's the process's order); Q8_0 in the block order; anything unpacked */
    const bool exact = base != EL_TYPE_Q8_0 || !runs || el_cpu_kernels_order() == EL_ORDER_BLOCK;
    const double d = max_diff(&f, &l);
    run_out r = {0}; /* the flat file with the same matrices packed at load: the file layout's arithmetic */
    if (exact) {
        CHECKF(d == 0.0, "%s: logits differ from the flat file's by %g", rel, d);
    } else if (run_model(src, &r, base, false)) {
        CHECKF(max_diff(&r, &l) == 0.0, "%s: file layout vs packed at load: %g", rel, max_diff(&r, &l));
    }
    printf("  %s: %d of %d tensors in %s (%s), logits %s (max |diff| from the flat file's %g)\n", rel, n_laid,
           (int)info.n_tensors, el_layout_name(lay), runs ? "mapped" : "unpacked",
           exact ? "bit-identical to the flat file's" : "bit-identical to the flat file's packed at load", d);
    if (base == EL_TYPE_Q4_K) { /* one-row products everywhere (the one-row order only): the flat file's bits */
        run_out f1, l1;
        if (run_model(src, &f1, 0, true) && run_model(laid, &l1, 0, true))
            CHECKF(max_diff(&f1, &l1) == 0.0, "%s: prompt one token an eval: logits differ from the flat file's by %g", rel,
                   max_diff(&f1, &l1));
        printf("  %s: prompt one token an eval: logits bit-identical to the flat file's\n", rel);
        free(f1.logits), free(l1.logits);
    }
    const run_out *ref = exact ? &f : &r;

    /* token_embd in the layout too (a file quantize does not write, but may meet) */
    if (base == EL_TYPE_Q4_0 || base == EL_TYPE_Q4_K) {
        size_t len = 0;
        char *buf = el_test_read_file(laid, &len);
        el_gguf *g = el_gguf_open(laid, &err);
        const el_gguf_tensor *te = g ? el_gguf_find_tensor(g, "token_embd.weight") : NULL;
        const size_t tf = buf ? type_field_at(buf, len, "token_embd.weight") : 0;
        CHECK(buf && te && tf);
        if (buf && te && tf && te->type == (int)base && te->ne[1] % 16 == 0) {
            const uint32_t ty = (uint32_t)el_layout_type(lay);
            memcpy(buf + tf, &ty, 4);
            const size_t off = (size_t)((const uint8_t *)te->data - el_gguf_base(g));
            el_layout_pack(lay, te->data, el_row_size(base, te->ne[0]), te->ne[0], te->ne[1], buf + off);
            const char *emb = tmp_path("emb.gguf");
            CHECK(el_test_write_file(emb, buf, len));
            run_out e;
            if (run_model(emb, &e, 0, false)) {
                CHECKF(max_diff(ref, &e) == 0.0, "%s: token_embd in a layout: logits differ by %g", rel, max_diff(ref, &e));
                CHECKF(runs ? e.file_mats == n_laid + 1 && e.unpacked == 0 : e.unpacked == n_laid + 1,
                       "%s: token_embd in the layout: %d mapped, %d unpacked", rel, e.file_mats, e.unpacked);
                printf("  %s: token_embd in %s too (its rows read from the groups): same logits\n", rel,
                       el_layout_name(lay));
            }
            free(e.logits);
        } else {
            CHECKF(0, "%s: token_embd is not a %s matrix of whole groups", rel, el_type_name(base));
        }
        el_gguf_close(g);
        free(buf);
    }
    free(f.logits), free(l.logits), free(r.logits);
}

/* A layout type where the layout cannot be: the reader refuses the file and says why. */
static void hostile(void) {
    size_t len = 0;
    char *buf = el_test_read_file(tmp_path("laid.gguf"), &len);
    CHECK(buf != NULL);
    if (!buf) return;
    const char *names[] = {"output_norm.weight", "blk.0.attn_q.weight"};
    for (int i = 0; i < 2; i++) {
        char *b = malloc(len);
        memcpy(b, buf, len);
        const size_t tf = type_field_at(b, len, names[i]);
        CHECK(tf != 0);
        if (i == 0) { /* a vector */
            const uint32_t ty = EL_TYPE_Q8_0_R16;
            memcpy(b + tf, &ty, 4);
        } else { /* 17 rows is not whole groups: ne[1] patched (the type field stays Q4_0_R16) */
            CHECK(el_test_gguf_patch(b, len, EL_TEST_PATCH_NE, names[i], (1ull << 32) | 17u));
        }
        const el_error e = el_test_load_bytes(tmp_path("hostile.gguf"), b, len);
        CHECKF(e.code != EL_OK && strstr(e.msg, "whole groups of 16 rows"), "%s: %s", names[i], e.msg);
        printf("  hostile %s: %s\n", names[i], e.msg);
        free(b);
    }
    free(buf);
}

int main(void) {
    if (!el_test_have_ref()) el_test_skip("reference fixtures absent");
    snprintf(g_dir, sizeof g_dir, "/tmp/el-layout-file-XXXXXX");
    if (!mkdtemp(g_dir)) { perror("mkdtemp"); return 1; }
    one_model("models/tiny-llama-Q4_0.gguf", EL_FTYPE_Q4_0, EL_TYPE_Q4_0, "Q8_0", EL_FTYPE_Q8_0);
    hostile();
    one_model("models/tiny-gemma3-Q8_0.gguf", EL_FTYPE_Q8_0, EL_TYPE_Q8_0, "Q4_0", EL_FTYPE_Q4_0);
    one_model("models/tiny-llama-Q4_K_M.gguf", EL_FTYPE_Q4_K_M, EL_TYPE_Q4_K, "Q8_0", EL_FTYPE_Q8_0);
    one_model("models/tiny-llama-Q5_0.gguf", EL_FTYPE_Q5_0, EL_TYPE_Q5_0, "Q8_0", EL_FTYPE_Q8_0);
    const char *files[] = {"laid.gguf", "back.gguf", "other1.gguf", "other2.gguf", "emb.gguf", "hostile.gguf"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) unlink(tmp_path(files[i]));
    rmdir(g_dir);
    printf("test_layout_file: layouts %s on this CPU, order %s\n", el_cpu_layout_runs(EL_LAYOUT_Q4_0_R16) ? "run" : "unpacked",
           el_cpu_order_name(el_cpu_kernels_order()));
    return el_test_finish("test_layout_file");
}
