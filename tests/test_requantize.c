/*
 * test_requantize.c — `edgellm quantize` / el_requantize (src/package/requantize.h).
 *
 * - llama.cpp's bytes: every reference model that llama-quantize made from an
 *   F16 file (reference/models: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q6_K,
 *   Q4_K_M, Q5_K_M of the llama, gemma3, qwen2, qwen3 tiny models) is
 *   re-made from that F16 file and must equal it byte for byte, whole file;
 * - the bytes do not depend on the thread count;
 * - F16 → F32 → F16 gives back every tensor's bytes; Q4_K_M → F16 (allowed
 *   requantization) gives each tensor's exact dequantization, rounded to F16;
 * - a quantized IN already labelled with the target file type keeps every
 *   tensor's type and bytes (a Q4_K_S file relabelled Q4_K_M, where the plan
 *   would make some tensors Q6_K): only the layout may change;
 * - refusals leave no output: a quantized source without --allow-requantize,
 *   a tensor with a NaN (named in the message), input that is not GGUF,
 *   an unknown type, IN == OUT; the CLI's exit codes and messages;
 * - a requantized model loads and generates.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "edgellm.h"
#include "package/gguf.h"
#include "package/requantize.h"
#include "package/types.h"
#include "testutil.h"
#include "util/fp16.h"

static char tmpdir[256];

static bool exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

static bool same_file(const char *a, const char *b) {
    size_t na = 0, nb = 0;
    char *x = el_test_read_file(a, &na), *y = el_test_read_file(b, &nb);
    bool same = x && y && na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return same;
}

static int requant(const char *in, const char *out, el_ftype ft, int threads, bool allow, el_error *err) {
    el_requant_params p = el_requant_default_params();
    p.ftype = ft;
    p.n_threads = threads;
    p.allow_requantize = allow;
    memset(err, 0, sizeof *err);
    return el_requantize(in, out, &p, NULL, err);
}

static void check_llama_bytes(void) {
    static const char *models[] = {"tiny-llama", "tiny-gemma3", "tiny-qwen2", "tiny-qwen3"};
    static const char *types[] = {"Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q6_K", "Q4_K_M", "Q5_K_M"};
    int n = 0;
    char out[512], rel[128], f16[512];
    snprintf(out, sizeof out, "%s/out.gguf", tmpdir);
    for (size_t m = 0; m < sizeof models / sizeof *models; m++) {
        snprintf(rel, sizeof rel, "models/%s-F16.gguf", models[m]);
        snprintf(f16, sizeof f16, "%s", el_test_ref_path(rel));
        for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
            snprintf(rel, sizeof rel, "models/%s-%s.gguf", models[m], types[t]);
            const char *ref = el_test_ref_path(rel);
            if (!exists(ref)) continue;
            el_ftype ft;
            CHECK(el_ftype_parse(types[t], &ft) == 0);
            el_error err;
            int rc = requant(f16, out, ft, 2, false, &err);
            CHECKF(rc == 0, "%s %s: %s", models[m], types[t], err.msg);
            CHECKF(rc == 0 && same_file(out, ref), "%s -> %s: not llama-quantize's bytes", models[m], types[t]);
            n++;
        }
    }
    CHECKF(n >= 15, "only %d reference files compared", n);
    printf("llama-quantize's bytes: %d reference files re-made from F16, compared whole\n", n);
}

static void check_threads(void) {
    char a[512], b[512], f16[512];
    snprintf(f16, sizeof f16, "%s", el_test_ref_path("models/tiny-gemma3-F16.gguf"));
    snprintf(a, sizeof a, "%s/t1.gguf", tmpdir);
    snprintf(b, sizeof b, "%s/t3.gguf", tmpdir);
    el_error err;
    CHECK(requant(f16, a, EL_FTYPE_Q4_K_M, 1, false, &err) == 0);
    CHECK(requant(f16, b, EL_FTYPE_Q4_K_M, 3, false, &err) == 0);
    CHECKF(same_file(a, b), "Q4_K_M with 1 and 3 threads differ");
}

/* Every tensor of a equal, in type and bytes, to b's tensor of the same name. */
static bool same_tensors(const char *pa, const char *pb) {
    el_error err = {0};
    el_gguf *a = el_gguf_open(pa, &err), *b = el_gguf_open(pb, &err);
    bool ok = a && b && el_gguf_n_tensors(a) == el_gguf_n_tensors(b);
    for (int64_t i = 0; ok && i < el_gguf_n_tensors(a); i++) {
        const el_gguf_tensor *x = el_gguf_tensor_at(a, i);
        char *name = el_str_dup(x->name);
        const el_gguf_tensor *y = name ? el_gguf_find_tensor(b, name) : NULL;
        ok = y && x->type == y->type && x->nbytes == y->nbytes && memcmp(x->data, y->data, x->nbytes) == 0;
        if (!ok) fprintf(stderr, "  tensor %s differs\n", name ? name : "?");
        free(name);
    }
    if (a) el_gguf_close(a);
    if (b) el_gguf_close(b);
    return ok;
}

static void check_float_round_trip(void) {
    char f32[512], back[512], f16[512];
    snprintf(f16, sizeof f16, "%s", el_test_ref_path("models/tiny-qwen3-F16.gguf"));
    snprintf(f32, sizeof f32, "%s/f32.gguf", tmpdir);
    snprintf(back, sizeof back, "%s/back.gguf", tmpdir);
    el_error err;
    CHECKF(requant(f16, f32, EL_FTYPE_F32, 2, false, &err) == 0, "F16 -> F32: %s", err.msg);
    CHECKF(requant(f32, back, EL_FTYPE_F16, 2, false, &err) == 0, "F32 -> F16: %s", err.msg);
    CHECKF(same_tensors(f16, back), "F16 -> F32 -> F16 changed tensors");
    /* the F32 file's weights are F32, its 1-D norms keep their type */
    el_gguf *g = el_gguf_open(f32, &err);
    CHECK(g != NULL);
    if (g) {
        const el_gguf_tensor *t = el_gguf_find_tensor(g, "blk.0.attn_q.weight");
        CHECK(t && t->type == EL_TYPE_F32);
        el_gguf_close(g);
    }
}

/* IN of the target's file type: each tensor keeps its type, whatever the plan would choose. */
static void check_same_type(void) {
    char s[512], rel[512], out[512], planned[512];
    snprintf(s, sizeof s, "%s/s.gguf", tmpdir);
    snprintf(rel, sizeof rel, "%s/relabelled.gguf", tmpdir);
    snprintf(out, sizeof out, "%s/same.gguf", tmpdir);
    snprintf(planned, sizeof planned, "%s/planned.gguf", tmpdir);
    const char *f16 = el_test_ref_path("models/tiny-llama-F16.gguf");
    el_error err;
    CHECKF(requant(f16, s, EL_FTYPE_Q4_K, 2, false, &err) == 0, "F16 -> Q4_K_S: %s", err.msg);
    CHECKF(requant(f16, planned, EL_FTYPE_Q4_K_M, 2, false, &err) == 0, "F16 -> Q4_K_M: %s", err.msg);
    size_t len = 0;
    char *buf = el_test_read_file(s, &len);
    CHECK(buf && el_test_gguf_patch(buf, len, EL_TEST_PATCH_U32, "general.file_type",
                                    (uint64_t)el_ftype_gguf_id(EL_FTYPE_Q4_K_M)));
    CHECK(buf && el_test_write_file(rel, buf, len));
    free(buf);
    CHECKF(!same_tensors(s, planned), "the Q4_K_M plan makes the same tensors as Q4_K_S: the case proves nothing");
    CHECKF(requant(rel, out, EL_FTYPE_Q4_K_M, 2, true, &err) == 0, "relabelled -> Q4_K_M: %s", err.msg);
    CHECKF(same_tensors(rel, out), "a Q4_K_M-labelled file requantized to Q4_K_M changed tensors");
    printf("a file of the target's type keeps every tensor's type and bytes\n");
}

static void check_dequantize(void) {
    char out[512], q[512];
    snprintf(q, sizeof q, "%s", el_test_ref_path("models/tiny-llama-Q4_K_M.gguf"));
    snprintf(out, sizeof out, "%s/deq.gguf", tmpdir);
    el_error err;
    /* refused without --allow-requantize, and nothing written */
    CHECK(requant(q, out, EL_FTYPE_Q8_0, 1, false, &err) == EL_ERR_UNSUPPORTED);
    CHECKF(strstr(err.msg, "allow-requantize") != NULL, "message: %s", err.msg);
    CHECK(!exists(out));
    CHECKF(requant(q, out, EL_FTYPE_F16, 2, true, &err) == 0, "Q4_K_M -> F16: %s", err.msg);
    el_gguf *a = el_gguf_open(q, &err), *b = el_gguf_open(out, &err);
    CHECK(a && b);
    if (a && b) {
        int checked = 0;
        for (int64_t i = 0; i < el_gguf_n_tensors(a); i++) {
            const el_gguf_tensor *x = el_gguf_tensor_at(a, i);
            if (x->type == EL_TYPE_F32) continue;
            char *name = el_str_dup(x->name);
            const el_gguf_tensor *y = el_gguf_find_tensor(b, name);
            const int64_t n = x->ne[0] * x->ne[1] * x->ne[2] * x->ne[3];
            float *f = malloc(sizeof(float) * (size_t)n);
            el_type_get(x->type)->to_float(x->data, f, n);
            bool ok = y && y->type == EL_TYPE_F16;
            for (int64_t k = 0; ok && k < n; k++) ok = ((const el_fp16 *)y->data)[k] == el_fp32_to_fp16(f[k]);
            CHECKF(ok, "%s: not the F16 rounding of its dequantized values", name);
            checked++;
            free(f);
            free(name);
        }
        CHECK(checked > 0);
    }
    if (a) el_gguf_close(a);
    if (b) el_gguf_close(b);
    /* and it runs: same prompt, a few greedy tokens, no failure */
    const char *args[] = {"run", "-m", out, "-p", "Hello there", "-n", "4", "--temp", "0", "--allow-unsigned", NULL};
    el_test_proc r;
    CHECK(el_test_run_cli(args, &r));
    CHECKF(r.status == 0, "run on the dequantized model: %s", r.err ? r.err : "");
    el_test_proc_free(&r);
}

static void check_refusals(void) {
    char out[512], bad[512], nan_in[512];
    snprintf(out, sizeof out, "%s/refused.gguf", tmpdir);
    snprintf(bad, sizeof bad, "%s/not.gguf", tmpdir);
    FILE *f = fopen(bad, "wb");
    CHECK(f != NULL);
    if (f) {
        fputs("this is not a GGUF file at all, just text", f);
        fclose(f);
    }
    el_error err;
    CHECK(requant(bad, out, EL_FTYPE_Q8_0, 1, false, &err) == EL_ERR_BAD_MAGIC);
    CHECK(!exists(out));

    /* a NaN in an F16 weight: the tensor is named, no output is left */
    const char *src = el_test_ref_path("models/tiny-llama-F16.gguf");
    size_t n = 0;
    char *bytes = el_test_read_file(src, &n);
    CHECK(bytes != NULL);
    el_gguf *g = el_gguf_open(src, &err);
    CHECK(g != NULL);
    if (bytes && g) {
        const el_gguf_tensor *t = el_gguf_find_tensor(g, "blk.1.ffn_up.weight");
        CHECK(t && t->type == EL_TYPE_F16);
        if (t) {
            const size_t off = (size_t)((const uint8_t *)t->data - el_gguf_base(g)) + 2 * 77;
            bytes[off] = 0x00;
            bytes[off + 1] = 0x7e; /* F16 NaN */
        }
        snprintf(nan_in, sizeof nan_in, "%s/nan.gguf", tmpdir);
        f = fopen(nan_in, "wb");
        CHECK(f && fwrite(bytes, 1, n, f) == n);
        if (f) fclose(f);
        CHECK(requant(nan_in, out, EL_FTYPE_Q4_0, 2, false, &err) == EL_ERR_BAD_VALUE);
        CHECKF(strstr(err.msg, "blk.1.ffn_up.weight") != NULL, "message: %s", err.msg);
        CHECK(!exists(out));
        /* the temporary file beside the target is gone too */
        char cmd[640];
        snprintf(cmd, sizeof cmd, "ls -A '%s' | grep -c refused > /dev/null", tmpdir);
        CHECK(system(cmd) != 0);
    }
    if (g) el_gguf_close(g);
    free(bytes);

    /* the CLI */
    struct { const char *args[8]; int status; const char *msg; } cli[] = {
        {{"quantize", src, out, "Q3_K_XL", NULL}, 2, "unknown TYPE"},
        {{"quantize", src, src, "Q8_0", NULL}, 2, "must differ"},
        {{"quantize", src, out, NULL}, 2, "expected IN.gguf OUT.gguf TYPE"},
        {{"quantize", src, out, "Q8_0", "-t", "-1", NULL}, 2, "--threads"},
        {{"quantize", bad, out, "Q8_0", NULL}, 1, "GGUF"},
        {{"quantize", src, out, "Q8_0", "--layout", "r32", NULL}, 2, "--layout: expected flat or r16"},
        {{"quantize", src, out, "Q8_0", "--layout", NULL}, 2, "needs a value"},
    };
    for (size_t i = 0; i < sizeof cli / sizeof *cli; i++) {
        el_test_proc r;
        CHECK(el_test_run_cli(cli[i].args, &r));
        CHECKF(r.status == cli[i].status && r.err && strstr(r.err, cli[i].msg),
               "case %zu: status %d, stderr: %s", i, r.status, r.err ? r.err : "");
        CHECK(!exists(out));
        el_test_proc_free(&r);
    }
    /* and one that works, through the CLI */
    const char *ok[] = {"quantize", src, out, "q8_0", "-q", NULL};
    el_test_proc r;
    CHECK(el_test_run_cli(ok, &r));
    CHECKF(r.status == 0 && same_file(out, el_test_ref_path("models/tiny-llama-Q8_0.gguf")), "CLI q8_0: %s",
           r.err ? r.err : "");
    el_test_proc_free(&r);
    /* --layout r16: the summary counts the matrices laid out (test_layout_file checks the file) */
    unlink(out);
    char f16[4096]; /* el_test_ref_path's buffer is shared: src may name the last path asked for */
    snprintf(f16, sizeof f16, "%s", el_test_ref_path("models/tiny-llama-F16.gguf"));
    const char *lay[] = {"quantize", f16, out, "Q8_0", "--layout", "r16", NULL};
    CHECK(el_test_run_cli(lay, &r));
    CHECKF(r.status == 0 && r.err && strstr(r.err, " in layout r16") && !same_file(out, el_test_ref_path("models/tiny-llama-Q8_0.gguf")),
           "CLI --layout r16: %s", r.err ? r.err : "");
    el_test_proc_free(&r);
}

int main(void) {
    if (!el_test_have_ref()) {
        el_test_skip("fixtures absent (make fixtures)");
        return 77;
    }
    snprintf(tmpdir, sizeof tmpdir, "/tmp/el_requant_XXXXXX");
    if (!mkdtemp(tmpdir)) return 1;
    check_llama_bytes();
    check_threads();
    check_float_round_trip();
    check_dequantize();
    check_same_type();
    check_refusals();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return el_test_finish("test_requantize");
}
