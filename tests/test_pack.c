/*
 * test_pack.c — `edgellm pack` end to end: each Hugging Face fixture in
 * tests/data/pack/<arch>/ (random-weight llama, qwen2, qwen3 — sharded —
 * gemma3 models made by transformers, tests/tools/gen_pack_fixtures.py;
 * and llama3 — Llama 3's byte-level tokenizer, tied output, llama3 rope scaling)
 * is packed, loaded by the runtime and run on a fixed token sequence, and the
 * logits at every position are compared with the float32 logits transformers
 * computed for the same weights (expected.json).
 *
 * Tolerances (max |Δlogit| over all positions and the whole vocabulary; the
 * fixtures' logits span about ±5..±15):
 *   F32   0.05  the weights are exact; what differs is the runtime's
 *               llama.cpp arithmetic: F16 K/V cache and F16 attention
 *               accumulation (~1e-3 relative) through 2-6 layers
 *   F16   0.08  plus weights rounded to F16 and activations converted to F16
 *               for the F16 dot products
 *   BF16  0.3   plus BF16-rounded activations (8-bit mantissa)
 *   Q8_0  1.0   8-bit weights and 8-bit activation blocks: each matmul's
 *               output moves by ~0.5% and the random, un-normalized weights
 *               amplify that through the layers (measured 0.28-0.67)
 * and for F32/F16 the most likely token must agree at every position.
 * The measured figures are printed.
 *
 * Metadata: tokenization of a few strings equals the HF tokenizer's ids
 * (expected.json), BOS/EOS/EOT, the chat template is tokenizer_config's.
 * Errors: a corrupt or missing input fails with a message and leaves no file.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "convert/hf_tokenizer.h"
#include "convert/pack.h"
#include "convert/safetensors.h"
#include "edgellm.h"
#include "package/gguf.h"
#include "package/layout.h"
#include "package/types.h"
#include "testutil.h"
#include "util/fp16.h"

static char g_tmp[] = "/tmp/el_test_pack_XXXXXX";

static cJSON *load_json(const char *path) {
    char *t = el_test_read_file(path, NULL);
    if (!t) return NULL;
    cJSON *j = cJSON_Parse(t);
    free(t);
    return j;
}

typedef struct result { double max_abs; int argmax_agree, n_pos; } result;

/* runs the model on expected.tokens one at a time; compares logits per position */
static int run_logits(const char *gguf, const cJSON *ex, result *r) {
    el_error err = {0};
    el_model_params mp = el_model_default_params();
    mp.n_threads = 2;
    el_model *m = el_model_load(gguf, &mp, &err);
    CHECKF(m != NULL, "%s: %s", gguf, err.msg);
    if (!m) return -1;
    el_session_params sp = el_session_default_params();
    sp.n_ctx = 64;
    el_session *s = el_session_new(m, &sp, &err);
    CHECKF(s != NULL, "%s", err.msg);
    if (!s) { el_model_free(m); return -1; }
    const cJSON *toks = cJSON_GetObjectItem(ex, "tokens"), *logits = cJSON_GetObjectItem(ex, "logits");
    int n = cJSON_GetArraySize(toks), nv = el_model_n_vocab(m);
    memset(r, 0, sizeof *r);
    const cJSON *t = toks->child, *row = logits->child;
    for (int i = 0; i < n && t && row; i++, t = t->next, row = row->next) {
        int32_t id = (int32_t)t->valuedouble;
        if (el_session_eval(s, &id, 1, &err) != 0) {
            CHECKF(0, "eval: %s", err.msg);
            break;
        }
        const float *lg = el_session_logits(s);
        CHECK(cJSON_GetArraySize(row) == nv);
        int am_e = 0, am_x = 0, k = 0;
        double best_e = -1e30, best_x = -1e30;
        for (const cJSON *v = row->child; v && k < nv; v = v->next, k++) {
            double d = fabs((double)lg[k] - v->valuedouble);
            if (d > r->max_abs || isnan(d)) r->max_abs = isnan(d) ? INFINITY : d;
            if (v->valuedouble > best_x) { best_x = v->valuedouble; am_x = k; }
            if (lg[k] > best_e) { best_e = lg[k]; am_e = k; }
        }
        r->argmax_agree += am_e == am_x;
        r->n_pos++;
    }
    el_session_free(s);
    el_model_free(m);
    return 0;
}

static void check_metadata(const char *gguf, const char *dir, const cJSON *ex) {
    el_error err = {0};
    el_model_params mp = el_model_default_params();
    mp.vocab_only = true;
    el_model *m = el_model_load(gguf, &mp, &err);
    CHECKF(m != NULL, "%s", err.msg);
    if (!m) return;
    const cJSON *bos = cJSON_GetObjectItem(ex, "bos"), *eos = cJSON_GetObjectItem(ex, "eos");
    if (cJSON_IsNumber(bos)) CHECK(el_token_bos(m) == (int32_t)bos->valuedouble);
    CHECKF(el_token_eos(m) == (int32_t)eos->valuedouble, "eos %d vs %d", el_token_eos(m), (int)eos->valuedouble);
    CHECK(el_token_is_eog(m, (int32_t)eos->valuedouble));
    /* tokenization equals the HF tokenizer's */
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(ex, "tokenize")) {
        const char *text = cJSON_GetObjectItem(c, "text")->valuestring;
        const cJSON *ids = cJSON_GetObjectItem(c, "ids");
        int32_t out[256];
        int n = el_tokenize(m, text, strlen(text), out, 256, EL_TOK_ADD_SPECIAL);
        bool same = n == cJSON_GetArraySize(ids);
        int k = 0;
        for (const cJSON *v = ids->child; same && v; v = v->next, k++) same = out[k] == (int32_t)v->valuedouble;
        CHECKF(same, "%s: tokenizing '%s' gave %d tokens, HF %d", dir, text, n, cJSON_GetArraySize(ids));
        /* and the pieces give the text back (after BOS; SPM's prefix space dropped) */
        char buf[1024];
        size_t len = 0;
        for (int i = 0; i < n && i < 256; i++) {
            int l = el_token_to_piece(m, out[i], buf + len, (int)(sizeof buf - len), false);
            if (l > 0 && len + (size_t)l < sizeof buf) len += (size_t)l;
        }
        buf[len] = 0;
        const char *got = buf;
        const char *model = el_model_meta_str(m, "tokenizer.ggml.model");
        if (model && !strcmp(model, "llama") && strstr(dir, "llama") && got[0] == ' ') got++;
        CHECKF(strcmp(got, text) == 0, "%s: '%s' detokenized to '%s'", dir, text, got);
    }
    /* the chat template is tokenizer_config's */
    char path[1024];
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    cJSON *tc = load_json(path);
    const cJSON *ct = cJSON_GetObjectItem(tc, "chat_template");
    const char *tmpl = el_model_chat_template(m);
    CHECK(cJSON_IsString(ct) && tmpl && strcmp(tmpl, ct->valuestring) == 0);
    cJSON_Delete(tc);
    el_model_free(m);
}

typedef struct tcase { const char *type; double tol; bool argmax; } tcase;

static void one_arch(const char *arch) {
    char dir[512], exp_path[600], out[600];
    snprintf(dir, sizeof dir, "%s/tests/data/pack/%s", EL_SOURCE_DIR, arch);
    snprintf(exp_path, sizeof exp_path, "%s/expected.json", dir);
    cJSON *ex = load_json(exp_path);
    CHECKF(ex != NULL, "cannot read %s", exp_path);
    if (!ex) return;
    const tcase cases[] = {{"F32", 0.05, true}, {"F16", 0.08, true}, {"BF16", 0.3, false}, {"Q8_0", 1.0, false}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        el_pack_params p = el_pack_default_params();
        CHECK(el_ftype_parse(cases[i].type, &p.ftype) == 0);
        snprintf(out, sizeof out, "%s/%s-%s.gguf", g_tmp, arch, cases[i].type);
        el_pack_info info;
        el_error err = {0};
        int rc = el_pack(dir, out, &p, &info, &err);
        CHECKF(rc == 0, "pack %s %s: %s", arch, cases[i].type, err.msg);
        if (rc) continue;
        CHECK(!strcmp(info.arch, arch) || (!strcmp(arch, "llama3") && !strcmp(info.arch, "llama")));
        result r;
        if (run_logits(out, ex, &r) == 0) {
            printf("%-6s %-5s max|dlogit| %.5f  argmax agrees %d/%d  (tolerance %.2f)\n", arch, cases[i].type, r.max_abs,
                   r.argmax_agree, r.n_pos, cases[i].tol);
            CHECKF(r.max_abs <= cases[i].tol, "%s %s: max |dlogit| %.5f > %.2f", arch, cases[i].type, r.max_abs, cases[i].tol);
            CHECK(r.n_pos == cJSON_GetArraySize(cJSON_GetObjectItem(ex, "tokens")));
            if (cases[i].argmax) CHECK(r.argmax_agree == r.n_pos);
        }
        if (i == 0) check_metadata(out, dir, ex);
        if (i == 0 && !strcmp(arch, "llama3")) {
            /* llama3 rope scaling became per-frequency divisors: 1 for short wavelengths, the factor for long ones */
            el_gguf *g = el_gguf_open(out, &err);
            const el_gguf_tensor *t = g ? el_gguf_find_tensor(g, "rope_freqs.weight") : NULL;
            CHECK(t && t->type == 0 && t->ne[0] == 8);
            if (t) {
                const float *f = t->data;
                CHECKF(f[0] == 1.0f && f[7] == 8.0f && f[6] > 1.0f && f[6] < 8.0f, "rope_freqs %g %g %g", f[0], f[6], f[7]);
            }
            el_gguf_close(g);
        }
        unlink(out);
    }
    cJSON_Delete(ex);
}

/* Quantized packs against the F32 pack, tensor by tensor: same names, shapes and
 * order; 1-D tensors F32; each dequantized matrix within the format's error of
 * the F32 one (relative RMS; bounds well above what round-to-nearest gives for
 * Gaussian-like rows, well below what a wrong row order or transform gives: ~1.4).
 * (Byte equality with llama.cpp's quantizer: tests/pack/test_pack_llamacpp.py.) */
static double rel_bound(int type) {
    switch (type) {
    case 1: case 30: return 0.01;            /* F16, BF16 */
    case 8: return 0.02;                     /* Q8_0 */
    case 14: return 0.04;                    /* Q6_K */
    case 6: case 7: case 13: return 0.08;    /* Q5_0, Q5_1, Q5_K */
    default: return 0.16;                    /* Q4_0, Q4_1, Q4_K */
    }
}

static void quantized_vs_f32(const char *arch, const char *type) {
    char dir[512], f32[600], q[600];
    snprintf(dir, sizeof dir, "%s/tests/data/pack/%s", EL_SOURCE_DIR, arch);
    snprintf(f32, sizeof f32, "%s/%s-qref.gguf", g_tmp, arch);
    snprintf(q, sizeof q, "%s/%s-q.gguf", g_tmp, arch);
    el_pack_params p = el_pack_default_params();
    p.ftype = EL_FTYPE_F32;
    el_error err = {0};
    CHECKF(el_pack(dir, f32, &p, NULL, &err) == 0, "%s", err.msg);
    CHECK(el_ftype_parse(type, &p.ftype) == 0);
    CHECKF(el_pack(dir, q, &p, NULL, &err) == 0, "%s %s: %s", arch, type, err.msg);
    el_gguf *a = el_gguf_open(f32, &err), *b = el_gguf_open(q, &err);
    CHECK(a && b);
    if (a && b) {
        CHECK(el_gguf_n_tensors(a) == el_gguf_n_tensors(b));
        double worst = 0;
        int n_quant = 0;
        for (int64_t i = 0; i < el_gguf_n_tensors(a) && i < el_gguf_n_tensors(b); i++) {
            const el_gguf_tensor *ta = el_gguf_tensor_at(a, i), *tb = el_gguf_tensor_at(b, i);
            CHECK(ta->name.len == tb->name.len && memcmp(ta->name.ptr, tb->name.ptr, ta->name.len) == 0);
            CHECK(ta->ne[0] == tb->ne[0] && ta->ne[1] == tb->ne[1] && ta->type == 0);
            if (tb->n_dims == 1) { CHECK(tb->type == 0); continue; }
            int64_t n = ta->ne[0] * ta->ne[1];
            float *deq = malloc(sizeof(float) * (size_t)n);
            const el_type_info *ti = el_type_get(tb->type);
            CHECK(ti && ti->to_float);
            if (!ti || !ti->to_float || !deq) { free(deq); continue; }
            ti->to_float(tb->data, deq, n);
            const float *ref = ta->data;
            double se = 0, sr = 0;
            for (int64_t k = 0; k < n; k++) {
                double d = (double)deq[k] - ref[k];
                se += d * d;
                sr += (double)ref[k] * ref[k];
            }
            double rel = sqrt(se / (sr > 0 ? sr : 1));
            n_quant += tb->type != 0;
            if (rel > worst) worst = rel;
            CHECKF(rel <= rel_bound(tb->type), "%s %s: %.*s (%s) relative RMS error %.4f > %.3f", arch, type, (int)tb->name.len,
                   tb->name.ptr, el_type_name(tb->type), rel, rel_bound(tb->type));
            free(deq);
        }
        CHECK(n_quant > 0);
        printf("%-6s %-6s %d matrices quantized, worst relative RMS error vs F32 %.4f\n", arch, type, n_quant, worst);
    }
    el_gguf_close(a);
    el_gguf_close(b);
    unlink(f32);
    unlink(q);
}

/* --layout r16: the flat pack's tensors, the eligible Q4_0 / Q8_0 / Q4_K matrices as their R16 layout (the
 * same bytes permuted: unpacked, the flat tensor); returns the tensors laid out */
static int layout_pack(const char *arch, const char *type) {
    char dir[512], flat[600], laid[600];
    snprintf(dir, sizeof dir, "%s/tests/data/pack/%s", EL_SOURCE_DIR, arch);
    snprintf(flat, sizeof flat, "%s/%s-flat.gguf", g_tmp, arch);
    snprintf(laid, sizeof laid, "%s/%s-laid.gguf", g_tmp, arch);
    el_pack_params p = el_pack_default_params();
    CHECK(el_ftype_parse(type, &p.ftype) == 0);
    el_error err = {0};
    el_pack_info info = {0};
    CHECKF(el_pack(dir, flat, &p, NULL, &err) == 0, "%s", err.msg);
    p.layout_r16 = true;
    CHECKF(el_pack(dir, laid, &p, &info, &err) == 0, "%s %s --layout r16: %s", arch, type, err.msg);
    el_gguf *a = el_gguf_open(flat, &err), *b = el_gguf_open(laid, &err);
    CHECK(a && b);
    int n_laid = 0;
    for (int64_t i = 0; a && b && i < el_gguf_n_tensors(a) && i < el_gguf_n_tensors(b); i++) {
        const el_gguf_tensor *ta = el_gguf_tensor_at(a, i), *tb = el_gguf_tensor_at(b, i);
        const el_layout l = el_layout_of_type(tb->type);
        CHECKF(l ? el_layout_base(l) == ta->type && ta->ne[1] % 16 == 0 : tb->type == ta->type, "%s %s: %.*s %s -> %s", arch,
               type, (int)ta->name.len, ta->name.ptr, el_type_name(ta->type), el_type_name(tb->type));
        if (ta->nbytes != tb->nbytes) { CHECK(ta->nbytes == tb->nbytes); continue; }
        uint8_t *u = malloc(ta->nbytes);
        if (l) el_layout_unpack(l, tb->data, tb->ne[0], tb->ne[1], u, el_row_size((el_type)ta->type, ta->ne[0]));
        else memcpy(u, tb->data, tb->nbytes);
        CHECKF(!memcmp(u, ta->data, ta->nbytes), "%s %s: %.*s bytes", arch, type, (int)ta->name.len, ta->name.ptr);
        free(u);
        n_laid += l != EL_LAYOUT_FLAT;
    }
    CHECKF(n_laid == info.n_layout, "%s %s: %d laid out, info says %d", arch, type, n_laid, info.n_layout);
    el_gguf_close(a);
    el_gguf_close(b);
    unlink(flat);
    unlink(laid);
    return n_laid;
}

/* the thread count does not change a byte */
static void threads_same_bytes(void) {
    char dir[512], a[600], b[600];
    snprintf(dir, sizeof dir, "%s/tests/data/pack/gemma3", EL_SOURCE_DIR);
    snprintf(a, sizeof a, "%s/t1.gguf", g_tmp);
    snprintf(b, sizeof b, "%s/t3.gguf", g_tmp);
    el_pack_params p = el_pack_default_params();
    CHECK(el_ftype_parse("Q4_K_M", &p.ftype) == 0);
    el_error err = {0};
    p.n_threads = 1;
    CHECKF(el_pack(dir, a, &p, NULL, &err) == 0, "%s", err.msg);
    p.n_threads = 3;
    CHECKF(el_pack(dir, b, &p, NULL, &err) == 0, "%s", err.msg);
    size_t na = 0, nb = 0;
    char *x = el_test_read_file(a, &na), *y = el_test_read_file(b, &nb);
    CHECK(x && y && na == nb && na > 0 && memcmp(x, y, na) == 0);
    free(x);
    free(y);
    unlink(a);
    unlink(b);
}

/* ---- failures ------------------------------------------------------------ */

static void copy_file(const char *from, const char *to) {
    size_t n;
    char *b = el_test_read_file(from, &n);
    FILE *f = fopen(to, "wb");
    if (b && f) fwrite(b, 1, n, f);
    if (f) fclose(f);
    free(b);
}

static void write_text(const char *path, const char *s) {
    FILE *f = fopen(path, "wb");
    if (f) { fputs(s, f); fclose(f); }
}

static void expect_fail(const char *dir, const char *what, const char *needle) {
    char out[600];
    snprintf(out, sizeof out, "%s/bad.gguf", g_tmp);
    el_error err = {0};
    el_pack_params p = el_pack_default_params();
    int rc = el_pack(dir, out, &p, NULL, &err);
    CHECKF(rc != 0, "%s: packing succeeded", what);
    CHECKF(err.msg[0] && (!needle || strstr(err.msg, needle)), "%s: message '%s' lacks '%s'", what, err.msg, needle ? needle : "");
    CHECKF(access(out, F_OK) != 0, "%s: a file was left behind", what);
    printf("refused (%s): %s\n", what, err.msg);
}

static void failures(void) {
    char src[512], dir[600], a[700], b[700];
    snprintf(src, sizeof src, "%s/tests/data/pack/llama", EL_SOURCE_DIR);
    snprintf(dir, sizeof dir, "%s/bad", g_tmp);
    mkdir(dir, 0755);
    const char *files[] = {"config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json", "model.safetensors"};
    for (int i = 0; i < 5; i++) {
        snprintf(a, sizeof a, "%s/%s", src, files[i]);
        snprintf(b, sizeof b, "%s/%s", dir, files[i]);
        copy_file(a, b);
    }
    snprintf(b, sizeof b, "%s/model.safetensors", dir);
    size_t n;
    char *st = el_test_read_file(b, &n);
    /* truncated weights */
    FILE *f = fopen(b, "wb");
    fwrite(st, 1, n - 100, f);
    fclose(f);
    expect_fail(dir, "truncated safetensors", "past the data section");
    /* a header length beyond the file */
    f = fopen(b, "wb");
    uint64_t big = (uint64_t)n;
    fwrite(&big, 8, 1, f);
    fwrite(st + 8, 1, n - 8, f);
    fclose(f);
    expect_fail(dir, "header length", "header length");
    f = fopen(b, "wb");
    fwrite(st, 1, n, f);
    fclose(f);
    free(st);
    /* an unsupported rope scaling */
    snprintf(a, sizeof a, "%s/config.json", src);
    snprintf(b, sizeof b, "%s/config.json", dir);
    cJSON *cfg = load_json(a);
    cJSON_ReplaceItemInObject(cfg, "rope_parameters", cJSON_Parse("{\"rope_type\":\"yarn\",\"factor\":4.0,\"rope_theta\":10000.0}"));
    char *txt = cJSON_Print(cfg);
    write_text(b, txt);
    free(txt);
    expect_fail(dir, "yarn rope", "yarn");
    /* an architecture edgellm does not run */
    cJSON_ReplaceItemInObject(cfg, "rope_parameters", cJSON_Parse("{\"rope_type\":\"default\",\"rope_theta\":10000.0}"));
    cJSON_ReplaceItemInObject(cfg, "architectures", cJSON_Parse("[\"PhiForCausalLM\"]"));
    txt = cJSON_Print(cfg);
    write_text(b, txt);
    free(txt);
    expect_fail(dir, "architecture", "PhiForCausalLM");
    /* a vocab_size the embedding does not have */
    cJSON_ReplaceItemInObject(cfg, "architectures", cJSON_Parse("[\"LlamaForCausalLM\"]"));
    cJSON_ReplaceItemInObject(cfg, "vocab_size", cJSON_CreateNumber(400));
    txt = cJSON_Print(cfg);
    write_text(b, txt);
    free(txt);
    expect_fail(dir, "vocab size", "rows");
    copy_file(a, b);
    cJSON_Delete(cfg);
    /* no tokenizer */
    snprintf(b, sizeof b, "%s/tokenizer.json", dir);
    unlink(b);
    expect_fail(dir, "no tokenizer.json", "tokenizer.json");
    /* a shard index naming a file outside the directory */
    snprintf(b, sizeof b, "%s/model.safetensors", dir);
    unlink(b);
    snprintf(a, sizeof a, "%s/tokenizer.json", src);
    snprintf(b, sizeof b, "%s/tokenizer.json", dir);
    copy_file(a, b);
    snprintf(b, sizeof b, "%s/model.safetensors.index.json", dir);
    write_text(b, "{\"weight_map\": {\"model.norm.weight\": \"../x.safetensors\"}}");
    expect_fail(dir, "shard path", "plain file name");
    const char *all[] = {"config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json",
                         "model.safetensors.index.json"};
    for (int i = 0; i < 5; i++) {
        snprintf(b, sizeof b, "%s/%s", dir, all[i]);
        unlink(b);
    }
    rmdir(dir);
}

/* the safetensors reader on hand-made headers */
static void st_headers(void) {
    struct { const char *hdr; size_t data; bool ok; } cases[] = {
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}", 16, true},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,12]}}", 16, false},              /* size mismatch */
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[2,6]}}", 8, false}, /* overlap */
        {"{\"a\":{\"dtype\":\"Q4\",\"shape\":[1],\"data_offsets\":[0,1]}}", 4, false},                  /* dtype */
        {"{\"a\":{\"dtype\":\"BF16\",\"shape\":[-1],\"data_offsets\":[0,2]}}", 4, false},               /* negative dim */
        {"{\"a\":{\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":[0,6]}}", 4, false},                 /* past the end */
        {"{\"a\":{\"dtype\":\"F16\",\"shape\":[0],\"data_offsets\":[0,0]},\"__metadata__\":{\"format\":\"pt\"}}", 0, true},
        {"{\"__metadata__\":{\"format\":1}}", 0, false},                                                /* metadata value */
        {"[1,2]", 0, false},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 4, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t hl = strlen(cases[i].hdr);
        size_t total = 8 + hl + cases[i].data;
        uint8_t *buf = calloc(1, total);
        uint64_t h = hl;
        memcpy(buf, &h, 8);
        memcpy(buf + 8, cases[i].hdr, hl);
        el_error err = {0};
        el_st_set *s = el_st_open_buffer(buf, total, &err);
        CHECKF((s != NULL) == cases[i].ok, "case %zu: %s", i, s ? "accepted" : err.msg);
        if (!s) CHECK(err.code != EL_OK && err.msg[0]);
        if (s && i == 0) {
            const el_st_tensor *t = el_st_find(s, "a");
            CHECK(t && t->n_dims == 2 && t->n_elements == 4 && t->nbytes == 16 && t->dtype == EL_ST_F32);
        }
        el_st_close(s);
        free(buf);
    }
}

/* config.json in the classic spelling (rope_theta, rope_local_base_freq; transformers 4) means the
 * same as transformers 5's rope_parameters: the gemma3 fixture rewritten that way gives the same logits.
 * Linear rope scaling lands in the metadata. */
static void config_variants(void) {
    char src[512], dir[600], a[700], b[700], out[700];
    snprintf(src, sizeof src, "%s/tests/data/pack/gemma3", EL_SOURCE_DIR);
    snprintf(dir, sizeof dir, "%s/classic", g_tmp);
    mkdir(dir, 0755);
    const char *files[] = {"tokenizer.json", "tokenizer_config.json", "generation_config.json", "model.safetensors"};
    for (int i = 0; i < 4; i++) {
        snprintf(a, sizeof a, "%s/%s", src, files[i]);
        snprintf(b, sizeof b, "%s/%s", dir, files[i]);
        copy_file(a, b);
    }
    snprintf(a, sizeof a, "%s/config.json", src);
    snprintf(b, sizeof b, "%s/config.json", dir);
    cJSON *cfg = load_json(a);
    cJSON_DeleteItemFromObject(cfg, "rope_parameters");
    cJSON_DeleteItemFromObject(cfg, "layer_types");
    cJSON_AddNumberToObject(cfg, "rope_theta", 1000000.0);
    cJSON_AddNumberToObject(cfg, "rope_local_base_freq", 10000.0);
    cJSON_AddNullToObject(cfg, "rope_scaling");
    char *txt = cJSON_Print(cfg);
    write_text(b, txt);
    free(txt);
    snprintf(out, sizeof out, "%s/classic.gguf", g_tmp);
    el_pack_params p = el_pack_default_params();
    p.ftype = EL_FTYPE_F32;
    el_error err = {0};
    CHECKF(el_pack(dir, out, &p, NULL, &err) == 0, "classic config: %s", err.msg);
    snprintf(a, sizeof a, "%s/expected.json", src);
    cJSON *ex = load_json(a);
    result r;
    if (ex && run_logits(out, ex, &r) == 0) {
        printf("gemma3 classic config.json: max|dlogit| %.5f\n", r.max_abs);
        CHECK(r.max_abs <= 0.05 && r.argmax_agree == r.n_pos);
    }
    cJSON_Delete(ex);
    /* linear rope scaling on the global layers */
    cJSON_ReplaceItemInObject(cfg, "rope_scaling", cJSON_Parse("{\"rope_type\":\"linear\",\"factor\":8.0}"));
    txt = cJSON_Print(cfg);
    write_text(b, txt);
    free(txt);
    CHECKF(el_pack(dir, out, &p, NULL, &err) == 0, "linear: %s", err.msg);
    el_gguf *g = el_gguf_open(out, &err);
    el_str st;
    float f = 0, base = 0, swa = 0;
    CHECK(g && el_gguf_get_str(g, "gemma3.rope.scaling.type", &st) && el_str_eq(st, "linear"));
    CHECK(g && el_gguf_get_f32(g, "gemma3.rope.scaling.factor", &f) && f == 8.0f);
    CHECK(g && el_gguf_get_f32(g, "gemma3.rope.freq_base", &base) && base == 1e6f);
    CHECK(g && el_gguf_get_f32(g, "gemma3.rope.freq_base_swa", &swa) && swa == 1e4f);
    uint32_t sw = 0;
    CHECK(g && el_gguf_get_u32(g, "gemma3.attention.sliding_window", &sw) && sw == 4);
    el_gguf_close(g);
    /* a layer pattern the runtime does not follow, a softcap it does not apply */
    cJSON_AddItemToObject(cfg, "layer_types", cJSON_Parse("[\"full_attention\",\"sliding_attention\"]"));
    txt = cJSON_Print(cfg);
    write_text(b, txt);
    free(txt);
    expect_fail(dir, "gemma3 layer types", "layer 0");
    cJSON_DeleteItemFromObject(cfg, "layer_types");
    cJSON_ReplaceItemInObject(cfg, "final_logit_softcapping", cJSON_CreateNumber(30.0));
    txt = cJSON_Print(cfg);
    write_text(b, txt);
    free(txt);
    expect_fail(dir, "softcapping", "final_logit_softcapping");
    cJSON_Delete(cfg);
    unlink(out);
    const char *all[] = {"config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json", "model.safetensors"};
    for (int i = 0; i < 5; i++) {
        snprintf(b, sizeof b, "%s/%s", dir, all[i]);
        unlink(b);
    }
    rmdir(dir);
}

/* Writes st's tensors to path as F16 (f16) or F32, names with prefix `from` changed to `to`
 * (when given), plus one F32 "model.vision_tower.probe.weight" tensor when renaming; tensor `skip` left out. */
static void rewrite_safetensors(const el_st_set *st, const char *path, bool f16, const char *from, const char *to,
                                const char *skip) {
    size_t es = f16 ? 2 : 4;
    cJSON *h = cJSON_CreateObject();
    size_t off = 0;
    char name[512];
    for (int i = 0; i < el_st_count(st); i++) {
        const el_st_tensor *t = el_st_at(st, i);
        if (skip && !strcmp(t->name, skip)) continue;
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "dtype", f16 ? "F16" : "F32");
        cJSON *shape = cJSON_AddArrayToObject(e, "shape");
        for (int d = 0; d < t->n_dims; d++) cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->shape[d]));
        cJSON *offs = cJSON_AddArrayToObject(e, "data_offsets");
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)off));
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)(off + (size_t)t->n_elements * es)));
        off += (size_t)t->n_elements * es;
        if (from && strncmp(t->name, from, strlen(from)) == 0) snprintf(name, sizeof name, "%s%s", to, t->name + strlen(from));
        else snprintf(name, sizeof name, "%s", t->name);
        cJSON_AddItemToObject(h, name, e);
    }
    if (from) {
        cJSON *e = cJSON_Parse("{\"dtype\":\"F32\",\"shape\":[4]}");
        cJSON *offs = cJSON_AddArrayToObject(e, "data_offsets");
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)off));
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)(off + 16)));
        cJSON_AddItemToObject(h, "model.vision_tower.probe.weight", e);
    }
    char *ht = cJSON_PrintUnformatted(h);
    cJSON_Delete(h);
    FILE *f = fopen(path, "wb");
    uint64_t hl = strlen(ht);
    fwrite(&hl, 8, 1, f);
    fwrite(ht, 1, hl, f);
    free(ht);
    el_error err = {0};
    for (int i = 0; i < el_st_count(st); i++) {
        const el_st_tensor *t = el_st_at(st, i);
        if (skip && !strcmp(t->name, skip)) continue;
        float *v = malloc(sizeof(float) * (size_t)t->n_elements);
        CHECK(el_st_to_f32(t, v, &err) == 0);
        for (int64_t k = 0; k < t->n_elements; k++) {
            if (f16) {
                uint16_t hv = el_fp32_to_fp16(v[k]); /* exact but for a few values near F16's underflow */
                fwrite(&hv, 2, 1, f);
            } else {
                fwrite(&v[k], 4, 1, f);
            }
        }
        free(v);
    }
    if (from) {
        float probe[4] = {1, 2, 3, 4};
        fwrite(probe, 4, 4, f);
    }
    fclose(f);
}

/* Gemma3ForConditionalGeneration: the text model inside a multimodal checkpoint (text_config,
 * model.language_model.* names, vision tensors beside) packs to the same logits as Gemma3ForCausalLM. */
static void gemma3_multimodal(void) {
    char src[512], dir[600], a[700], b[700], out[700];
    snprintf(src, sizeof src, "%s/tests/data/pack/gemma3", EL_SOURCE_DIR);
    snprintf(dir, sizeof dir, "%s/mm", g_tmp);
    mkdir(dir, 0755);
    const char *files[] = {"tokenizer.json", "tokenizer_config.json", "generation_config.json"};
    for (int i = 0; i < 3; i++) {
        snprintf(a, sizeof a, "%s/%s", src, files[i]);
        snprintf(b, sizeof b, "%s/%s", dir, files[i]);
        copy_file(a, b);
    }
    snprintf(a, sizeof a, "%s/config.json", src);
    cJSON *text = load_json(a);
    cJSON *cfg = cJSON_CreateObject();
    cJSON_AddItemToObject(cfg, "architectures", cJSON_Parse("[\"Gemma3ForConditionalGeneration\"]"));
    cJSON_AddStringToObject(cfg, "model_type", "gemma3");
    cJSON_AddItemToObject(cfg, "vision_config", cJSON_Parse("{\"hidden_size\": 4}"));
    cJSON_DeleteItemFromObject(text, "architectures");
    cJSON_AddItemToObject(cfg, "text_config", text);
    char *txt = cJSON_Print(cfg);
    snprintf(b, sizeof b, "%s/config.json", dir);
    write_text(b, txt);
    free(txt);
    cJSON_Delete(cfg);
    snprintf(a, sizeof a, "%s/model.safetensors", src);
    el_error err = {0};
    el_st_set *st = el_st_open_file(a, &err);
    CHECKF(st != NULL, "%s", err.msg);
    if (st) {
        snprintf(b, sizeof b, "%s/model.safetensors", dir);
        rewrite_safetensors(st, b, false, "model.", "model.language_model.", NULL);
        el_st_close(st);
        snprintf(out, sizeof out, "%s/mm.gguf", g_tmp);
        el_pack_params p = el_pack_default_params();
        p.ftype = EL_FTYPE_F32;
        CHECKF(el_pack(dir, out, &p, NULL, &err) == 0, "multimodal gemma3: %s", err.msg);
        snprintf(a, sizeof a, "%s/expected.json", src);
        cJSON *ex = load_json(a);
        result r;
        if (ex && run_logits(out, ex, &r) == 0) {
            printf("gemma3 from Gemma3ForConditionalGeneration: max|dlogit| %.5f\n", r.max_abs);
            CHECK(r.max_abs <= 0.05 && r.argmax_agree == r.n_pos);
        }
        cJSON_Delete(ex);
        el_gguf *g = el_gguf_open(out, &err);
        CHECK(g && !el_gguf_find_tensor(g, "model.vision_tower.probe.weight") && el_gguf_n_tensors(g) == 80);
        el_gguf_close(g);
        unlink(out);
    }
    const char *all[] = {"config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json", "model.safetensors"};
    for (int i = 0; i < 5; i++) {
        snprintf(b, sizeof b, "%s/%s", dir, all[i]);
        unlink(b);
    }
    rmdir(dir);
}

/* Inputs in other spellings that mean the same model: F16 and F32 safetensors instead of BF16
 * (the fixture's values are exact in F32, and in F16 but for a couple of tiny ones), the chat template in chat_template.jinja; and sharded
 * checkpoints whose index and shards disagree are refused. */
static void input_variants(void) {
    char src[512], dir[600], a[700], b[700], out[700];
    snprintf(src, sizeof src, "%s/tests/data/pack/llama", EL_SOURCE_DIR);
    snprintf(dir, sizeof dir, "%s/variants", g_tmp);
    mkdir(dir, 0755);
    const char *files[] = {"config.json", "tokenizer.json", "generation_config.json"};
    for (int i = 0; i < 3; i++) {
        snprintf(a, sizeof a, "%s/%s", src, files[i]);
        snprintf(b, sizeof b, "%s/%s", dir, files[i]);
        copy_file(a, b);
    }
    /* tokenizer_config without the template; the template beside it */
    snprintf(a, sizeof a, "%s/tokenizer_config.json", src);
    cJSON *tc = load_json(a);
    const char *tmpl = "{{ bos_token }}{% for m in messages %}{{ m['content'] }}{% endfor %}";
    cJSON_DeleteItemFromObject(tc, "chat_template");
    char *txt = cJSON_Print(tc);
    snprintf(b, sizeof b, "%s/tokenizer_config.json", dir);
    write_text(b, txt);
    free(txt);
    cJSON_Delete(tc);
    snprintf(b, sizeof b, "%s/chat_template.jinja", dir);
    write_text(b, tmpl);
    snprintf(a, sizeof a, "%s/expected.json", src);
    cJSON *ex = load_json(a);
    snprintf(a, sizeof a, "%s/model.safetensors", src);
    el_error err = {0};
    el_st_set *st = el_st_open_file(a, &err);
    CHECKF(st != NULL, "%s", err.msg);
    for (int variant = 0; st && variant < 2; variant++) {
        snprintf(b, sizeof b, "%s/model.safetensors", dir);
        rewrite_safetensors(st, b, variant == 0, NULL, NULL, NULL);
        snprintf(out, sizeof out, "%s/variant.gguf", g_tmp);
        el_pack_params p = el_pack_default_params();
        p.ftype = EL_FTYPE_F32;
        CHECKF(el_pack(dir, out, &p, NULL, &err) == 0, "variant %d: %s", variant, err.msg);
        result r;
        if (ex && run_logits(out, ex, &r) == 0) {
            printf("llama from %s safetensors: max|dlogit| %.5f\n", variant == 0 ? "F16" : "F32", r.max_abs);
            CHECK(r.max_abs <= 0.05 && r.argmax_agree == r.n_pos);
        }
        el_model *m = el_model_load(out, &(el_model_params){.vocab_only = true}, &err);
        CHECK(m && el_model_chat_template(m) && strcmp(el_model_chat_template(m), tmpl) == 0);
        el_model_free(m);
        unlink(out);
    }
    /* a checkpoint without a tensor the runtime needs is refused, naming it */
    if (st) {
        snprintf(b, sizeof b, "%s/model.safetensors", dir);
        rewrite_safetensors(st, b, false, NULL, NULL, "model.layers.1.mlp.up_proj.weight");
        expect_fail(dir, "missing tensor", "blk.1.ffn_up.weight");
    }
    el_st_close(st);
    cJSON_Delete(ex);
    const char *all[] = {"config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json",
                         "model.safetensors", "chat_template.jinja"};
    for (int i = 0; i < 6; i++) {
        snprintf(b, sizeof b, "%s/%s", dir, all[i]);
        unlink(b);
    }
    rmdir(dir);

    /* qwen3's shards with an index that disagrees with them */
    snprintf(src, sizeof src, "%s/tests/data/pack/qwen3", EL_SOURCE_DIR);
    snprintf(dir, sizeof dir, "%s/shards", g_tmp);
    mkdir(dir, 0755);
    const char *qf[] = {"config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json",
                        "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"};
    for (int i = 0; i < 6; i++) {
        snprintf(a, sizeof a, "%s/%s", src, qf[i]);
        snprintf(b, sizeof b, "%s/%s", dir, qf[i]);
        copy_file(a, b);
    }
    snprintf(a, sizeof a, "%s/model.safetensors.index.json", src);
    snprintf(b, sizeof b, "%s/model.safetensors.index.json", dir);
    cJSON *idx = load_json(a);
    cJSON *wm = cJSON_GetObjectItem(idx, "weight_map");
    /* one tensor indexed in the other shard */
    cJSON *first = wm->child;
    const char *was = first->valuestring;
    char *moved = strdup(strstr(was, "00001") ? "model-00002-of-00002.safetensors" : "model-00001-of-00002.safetensors");
    cJSON_ReplaceItemInObject(wm, first->string, cJSON_CreateString(moved));
    free(moved);
    txt = cJSON_Print(idx);
    write_text(b, txt);
    free(txt);
    expect_fail(dir, "index names the wrong shard", "indexed in");
    /* one tensor missing from the index */
    cJSON_DeleteItemFromObject(wm, wm->child->string);
    txt = cJSON_Print(idx);
    write_text(b, txt);
    free(txt);
    expect_fail(dir, "tensor not in the index", "not in the index");
    /* one tensor indexed that no shard has */
    cJSON_AddItemToObject(wm, "model.layers.0.mlp.extra.weight", cJSON_CreateString("model-00001-of-00002.safetensors"));
    txt = cJSON_Print(idx);
    write_text(b, txt);
    free(txt);
    cJSON_Delete(idx);
    expect_fail(dir, "indexed tensor in no shard", NULL);
    for (int i = 0; i < 6; i++) {
        snprintf(b, sizeof b, "%s/%s", dir, qf[i]);
        unlink(b);
    }
    snprintf(b, sizeof b, "%s/model.safetensors.index.json", dir);
    unlink(b);
    rmdir(dir);
}

/* tokenizer.json shapes beyond the fixtures, through el_hf_vocab_from_json */
static void vocab_shapes(void) {
    const char *bpe_vocab = "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2,\"\\u0120\":3},\"merges\":[\"a b\"]}";
    struct { const char *pre; const char *want; } pres[] = {
        {"{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true}", "gpt-2"},
        {"{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Digits\",\"individual_digits\":true},"
         "{\"type\":\"ByteLevel\",\"use_regex\":true}]}", "smollm"},
        {"{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(?i:'s|'t|'re|'ve|'m|'ll|'d)|"
         "[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}{1,3}| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|"
         "\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"},\"behavior\":\"Isolated\"},"
         "{\"type\":\"ByteLevel\",\"use_regex\":false}]}", "llama-bpe"},
        {"{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Whitespace\"},{\"type\":\"ByteLevel\",\"use_regex\":true}]}", NULL},
        {"{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\w+\"}},"
         "{\"type\":\"ByteLevel\",\"use_regex\":false}]}", NULL},
    };
    for (size_t i = 0; i < sizeof pres / sizeof pres[0]; i++) {
        char j[2048];
        snprintf(j, sizeof j, "{\"added_tokens\":[{\"id\":4,\"content\":\"<|end|>\",\"special\":true}],\"pre_tokenizer\":%s,%s}",
                 pres[i].pre, bpe_vocab);
        el_hf_vocab v;
        el_error err = {0};
        int rc = el_hf_vocab_from_json(j, "{\"eos_token\":\"<|end|>\"}", NULL, 6, -1, -1, &v, &err);
        if (pres[i].want) {
            CHECKF(rc == 0, "pre %zu: %s", i, err.msg);
            if (rc) continue;
            CHECKF(!strcmp(v.pre, pres[i].want), "pre %zu: '%s', want '%s'", i, v.pre, pres[i].want);
            CHECK(!strcmp(v.model, "gpt2") && v.n == 6 && v.eos == 4 && v.types[4] == EL_TT_CONTROL && v.n_merges == 1);
            CHECK(!strcmp(v.tok[5], "[PAD5]") && v.types[5] == EL_TT_USER_DEFINED && !strcmp(v.merges[0], "a b"));
            el_hf_vocab_free(&v);
        } else {
            CHECKF(rc == EL_ERR_UNSUPPORTED, "pre %zu: accepted as '%s'", i, rc ? "" : v.pre);
            if (!rc) el_hf_vocab_free(&v);
        }
    }
    /* Unigram (SentencePiece) with Metaspace: scores kept, prefix space on, byte tokens typed BYTE */
    const char *uni = "{\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":\"\\u2581\",\"prepend_scheme\":\"first\"},"
                      "\"model\":{\"type\":\"Unigram\",\"unk_id\":0,\"byte_fallback\":true,\"vocab\":[[\"<unk>\",0.0],[\"<s>\",0.0],"
                      "[\"<0x41>\",0.0],[\"\\u2581a\",-1.5],[\"b\",-2.25]]},"
                      "\"added_tokens\":[{\"id\":1,\"content\":\"<s>\",\"special\":true}]}";
    el_hf_vocab v;
    el_error err = {0};
    int rc = el_hf_vocab_from_json(uni, "{\"bos_token\":{\"content\":\"<s>\"},\"chat_template\":[{\"name\":\"default\",\"template\":\"T\"}]}",
                                   "{\"eos_token_id\":[1]}", 0, -1, -1, &v, &err);
    CHECKF(rc == 0, "unigram: %s", err.msg);
    if (rc == 0) {
        CHECK(!strcmp(v.model, "llama") && v.n == 5 && v.add_space_prefix && v.bos == 1 && v.add_bos);
        CHECK(v.scores[3] == -1.5f && v.scores[4] == -2.25f && v.types[2] == EL_TT_BYTE && v.types[1] == EL_TT_CONTROL);
        CHECK(v.chat_template && !strcmp(v.chat_template, "T"));
        CHECK(v.unk == 0 && v.types[0] == EL_TT_UNKNOWN);
        el_hf_vocab_free(&v);
    }
    /* added tokens that are not marked special: special-looking ones become CONTROL, others USER_DEFINED
     * (SentencePiece: with the word marker turned back into a space) */
    const char *added = "{\"model\":{\"type\":\"BPE\",\"byte_fallback\":true,\"vocab\":{\"<unk>\":0,\"a\":1}},"
                        "\"added_tokens\":[{\"id\":2,\"content\":\"<|tool|>\",\"special\":false},"
                        "{\"id\":3,\"content\":\"<tool_call>\",\"special\":false},"
                        "{\"id\":4,\"content\":\"\\u2581hi\\u2581there\",\"special\":false},"
                        "{\"id\":5,\"content\":\"<unused7>\",\"special\":false}]}";
    rc = el_hf_vocab_from_json(added, NULL, NULL, 0, -1, -1, &v, &err);
    CHECKF(rc == 0, "added: %s", err.msg);
    if (rc == 0) {
        CHECK(v.types[2] == EL_TT_CONTROL && v.types[3] == EL_TT_USER_DEFINED && v.types[5] == EL_TT_CONTROL);
        CHECK(v.types[4] == EL_TT_USER_DEFINED && !strcmp(v.tok[4], " hi there") && v.len[4] == 9);
        el_hf_vocab_free(&v);
    }
    /* broken inputs */
    CHECK(el_hf_vocab_from_json("{", NULL, NULL, 0, -1, -1, &v, &err) != 0);
    CHECK(el_hf_vocab_from_json("{\"model\":{\"type\":\"WordPiece\",\"vocab\":{}}}", NULL, NULL, 0, -1, -1, &v, &err) == EL_ERR_UNSUPPORTED);
    CHECK(el_hf_vocab_from_json("{\"model\":{\"type\":\"BPE\",\"byte_fallback\":true,\"vocab\":{\"a\":7}}}", NULL, NULL, 4, -1, -1, &v,
                                &err) != 0); /* id past vocab_size */
}

/* the command line: progress is not drawn when stderr is not a terminal; the summary is */
static void cli(void) {
    char dir[512], out[600], cmd[2048];
    snprintf(dir, sizeof dir, "%s/tests/data/pack/qwen3", EL_SOURCE_DIR);
    snprintf(out, sizeof out, "%s/cli.gguf", g_tmp);
    snprintf(cmd, sizeof cmd, "'%s' pack '%s' -o '%s' --type bf16 2>'%s/cli.err'", EL_CLI_PATH, dir, out, g_tmp);
    int rc = system(cmd);
    CHECKF(rc == 0, "%s -> %d", cmd, rc);
    char ep[600];
    snprintf(ep, sizeof ep, "%s/cli.err", g_tmp);
    char *e = el_test_read_file(ep, NULL);
    CHECKF(e && strstr(e, "qwen3") && strstr(e, "BF16") && !strchr(e, '\r'), "stderr: %s", e ? e : "(none)");
    free(e);
    el_error err = {0};
    el_gguf *g = el_gguf_open(out, &err);
    CHECKF(g != NULL, "%s", err.msg);
    if (g) {
        const el_gguf_tensor *t = el_gguf_find_tensor(g, "blk.0.attn_q.weight");
        CHECK(t && t->type == 30); /* BF16 */
        t = el_gguf_find_tensor(g, "blk.0.attn_q_norm.weight");
        CHECK(t && t->type == 0); /* norms stay F32 */
        el_gguf_close(g);
    }
    unlink(out);
    unlink(ep);
    snprintf(cmd, sizeof cmd, "'%s' pack '%s' --type Q9 -o '%s' 2>/dev/null", EL_CLI_PATH, dir, out);
    rc = system(cmd);
    CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 2);
    snprintf(cmd, sizeof cmd, "'%s' pack '%s' 2>/dev/null", EL_CLI_PATH, dir);
    rc = system(cmd);
    CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 2);
    snprintf(cmd, sizeof cmd, "'%s' pack '%s' -o '%s' --layout r8 2>/dev/null", EL_CLI_PATH, dir, out);
    rc = system(cmd);
    CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 2);
    snprintf(cmd, sizeof cmd, "'%s' pack '%s' -o '%s' --type q8_0 --layout r16 2>'%s/cli.err'", EL_CLI_PATH, dir, out, g_tmp);
    rc = system(cmd);
    e = el_test_read_file(ep, NULL);
    CHECKF(rc == 0 && e && strstr(e, " in layout r16"), "pack --layout r16: %d, %s", rc, e ? e : "(none)");
    free(e);
    unlink(out);
    unlink(ep);
}

int main(void) {
    if (!mkdtemp(g_tmp)) {
        perror("mkdtemp");
        return 1;
    }
    st_headers();
    vocab_shapes();
    const char *archs[] = {"llama", "qwen2", "qwen3", "gemma3", "llama3"};
    for (int i = 0; i < 5; i++) one_arch(archs[i]);
    const char *qtypes[] = {"Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K", "Q4_K_M", "Q5_K_M"};
    for (int i = 0; i < 4; i++)
        for (size_t k = 0; k < sizeof qtypes / sizeof qtypes[0]; k++) quantized_vs_f32(archs[i], qtypes[k]);
    int n_laid = 0, n_k = 0;
    for (int i = 0; i < 4; i++) n_laid += layout_pack(archs[i], "Q4_0") + layout_pack(archs[i], "Q8_0");
    for (int i = 0; i < 4; i++) n_k += layout_pack(archs[i], "Q4_K_M");
    CHECKF(n_laid > 0 && n_k > 0, "--layout r16 laid out no tensor of the four architectures (Q4_K_M: %d)", n_k);
    printf("--layout r16: %d tensors laid out over 4 architectures x Q4_0, Q8_0, %d x Q4_K_M; unpacked, the flat pack's "
           "bytes\n", n_laid, n_k);
    threads_same_bytes();
    failures();
    config_variants();
    input_variants();
    gemma3_multimodal();
    cli();
    rmdir(g_tmp);
    return el_test_finish("test_pack");
}
