/*
 * fingerprint.c — the deployment fingerprint of a GGUF file and the
 * streamed SHA-256 of a file (contract in fingerprint.h).
 */
#include "deploy/fingerprint.h"

#include <errno.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "deploy/keys.h"
#include "package/gguf.h"
#include "package/types.h"
#include "util/file.h"

/* ---- fingerprint of a GGUF file ---------------------------------------- */

static void hash_u64(crypto_hash_sha256_state *st, uint64_t v) {
    uint8_t b[8];
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
    crypto_hash_sha256_update(st, b, 8);
}

/* Hashes a kv's value bytes (type tag, then the payload as stored). */
static void hash_kv_value(crypto_hash_sha256_state *st, const el_gguf_kv *kv) {
    hash_u64(st, (uint64_t)kv->type);
    if (kv->type == EL_GGUF_STRING) {
        const uint8_t *p = kv->data;
        el_str s = el_gguf_str_next(&p);
        hash_u64(st, s.len);
        crypto_hash_sha256_update(st, (const uint8_t *)s.ptr, s.len);
    } else if (kv->type == EL_GGUF_ARRAY) {
        hash_u64(st, (uint64_t)kv->arr_type);
        hash_u64(st, kv->arr_n);
        size_t esz = el_gguf_vtype_size(kv->arr_type);
        if (esz) {
            crypto_hash_sha256_update(st, kv->data, kv->arr_n * esz);
        } else {
            const uint8_t *p = kv->data;
            for (uint64_t i = 0; i < kv->arr_n; i++) {
                el_str s = el_gguf_str_next(&p);
                hash_u64(st, s.len);
                crypto_hash_sha256_update(st, (const uint8_t *)s.ptr, s.len);
            }
        }
    } else {
        crypto_hash_sha256_update(st, kv->data, el_gguf_vtype_size(kv->type));
    }
}

static bool is_template_key(el_str k) {
    static const char T[] = "tokenizer.chat_template";
    return k.len >= sizeof T - 1 && memcmp(k.ptr, T, sizeof T - 1) == 0 &&
           (k.len == sizeof T - 1 || k.ptr[sizeof T - 1] == '.');
}

static int cmp_kv_key(const void *a, const void *b) {
    const el_gguf_kv *x = *(const el_gguf_kv *const *)a, *y = *(const el_gguf_kv *const *)b;
    size_t n = x->key.len < y->key.len ? x->key.len : y->key.len;
    int c = memcmp(x->key.ptr, y->key.ptr, n);
    return c ? c : (x->key.len < y->key.len ? -1 : x->key.len > y->key.len);
}

el_pkg_check el_pkg_fingerprint(const char *path, el_manifest *m, char **general_name, el_pkg_error *err) {
    el_error e = {0};
    el_gguf *g = el_gguf_open(path, &e);
    if (!g) return el_pkg_fail(err, EL_PKG_ERR_IO, "%s: not a valid GGUF file: %s", path, e.msg);
    el_pkg_check rc = EL_PKG_OK;
    el_str s;
    m->arch = el_gguf_get_str(g, "general.architecture", &s) ? el_str_dup(s) : strdup("unknown");
    if (general_name) {
        *general_name = NULL;
        if (el_gguf_get_str(g, "general.name", &s) && s.len) *general_name = el_str_dup(s);
    }
    uint32_t ft;
    m->quant_file_type = el_gguf_get_u32(g, "general.file_type", &ft) ? (int64_t)ft : -1;

    /* tensor types: count and bytes per type; the quant type holds most bytes */
    int64_t count[256] = {0};
    uint64_t bytes[256] = {0};
    for (int64_t i = 0; i < el_gguf_n_tensors(g); i++) {
        const el_gguf_tensor *t = el_gguf_tensor_at(g, i);
        if (t->type >= 0 && t->type < 256) { count[t->type]++; bytes[t->type] += t->nbytes; }
    }
    int best = -1;
    m->tensor_types = calloc(256, sizeof *m->tensor_types);
    for (int t = 0; m->tensor_types && t < 256; t++) {
        if (!count[t]) continue;
        if (best < 0 || bytes[t] > bytes[best]) best = t;
        el_pkg_typecount *tc = &m->tensor_types[m->n_tensor_types++];
        tc->type = strdup(el_type_name(t));
        tc->count = count[t];
    }
    /* the quant type: llama.cpp's file-type name when the file says it (a
     * Q4_K_M file keeps some tensors in Q6_K/Q8_0), else the dominant type */
    const char *ftn = NULL;
    static const struct { int id; const char *name; } FT[] = {
        {0, "F32"}, {1, "F16"}, {2, "Q4_0"}, {3, "Q4_1"}, {7, "Q8_0"}, {8, "Q5_0"}, {9, "Q5_1"}, {10, "Q2_K"},
        {11, "Q3_K_S"}, {12, "Q3_K_M"}, {13, "Q3_K_L"}, {14, "Q4_K_S"}, {15, "Q4_K_M"}, {16, "Q5_K_S"},
        {17, "Q5_K_M"}, {18, "Q6_K"}, {19, "IQ2_XXS"}, {20, "IQ2_XS"}, {21, "Q2_K_S"}, {22, "IQ3_XS"},
        {23, "IQ3_XXS"}, {24, "IQ1_S"}, {25, "IQ4_NL"}, {26, "IQ3_S"}, {27, "IQ3_M"}, {28, "IQ2_S"},
        {29, "IQ2_M"}, {30, "IQ4_XS"}, {31, "IQ1_M"}, {32, "BF16"}, {36, "TQ1_0"}, {37, "TQ2_0"}};
    for (size_t i = 0; i < sizeof FT / sizeof FT[0] && m->quant_file_type >= 0; i++)
        if (FT[i].id == m->quant_file_type) ftn = FT[i].name;
    m->quant_type = strdup(ftn ? ftn : best >= 0 ? el_type_name(best) : "none");

    /* tokenizer: every tokenizer.* key except the chat templates, sorted by key */
    int64_t nkv = el_gguf_n_kv(g);
    const el_gguf_kv **kvs = malloc((size_t)(nkv > 0 ? nkv : 1) * sizeof *kvs);
    if (!kvs || !m->tensor_types || !m->arch || !m->quant_type) {
        rc = el_pkg_fail(err, EL_PKG_ERR_IO, "out of memory describing %s", path);
        goto out;
    }
    int64_t nt = 0;
    for (int64_t i = 0; i < nkv; i++) {
        const el_gguf_kv *kv = el_gguf_kv_at(g, i);
        if (kv->key.len > 10 && memcmp(kv->key.ptr, "tokenizer.", 10) == 0 && !is_template_key(kv->key))
            kvs[nt++] = kv;
    }
    qsort(kvs, (size_t)nt, sizeof *kvs, cmp_kv_key);
    crypto_hash_sha256_state st;
    crypto_hash_sha256_init(&st);
    for (int64_t i = 0; i < nt; i++) {
        hash_u64(&st, kvs[i]->key.len);
        crypto_hash_sha256_update(&st, (const uint8_t *)kvs[i]->key.ptr, kvs[i]->key.len);
        hash_kv_value(&st, kvs[i]);
    }
    crypto_hash_sha256_final(&st, m->tokenizer_sha256);
    if (el_gguf_get_str(g, "tokenizer.chat_template", &s)) {
        m->has_chat_template = true;
        crypto_hash_sha256(m->chat_template_sha256, (const uint8_t *)s.ptr, s.len);
    }
out:
    free(kvs);
    el_gguf_close(g);
    return rc;
}

/* ---- hashing ----------------------------------------------------------- */

el_pkg_check el_pkg_hash_file(const char *path, uint8_t out[32], uint64_t *size, el_pkg_error *err) {
    char why[256];
    int fd = el_open_regular(path, NULL, why, sizeof why); /* a device would hash forever, a FIFO block */
    if (fd < 0) return el_pkg_fail(err, EL_PKG_ERR_IO, "cannot open: %s", why);
    crypto_hash_sha256_state st;
    crypto_hash_sha256_init(&st);
    size_t cap = 1u << 20;
    uint8_t *buf = malloc(cap);
    if (!buf) { close(fd); return el_pkg_fail(err, EL_PKG_ERR_IO, "out of memory"); }
    uint64_t total = 0;
    el_pkg_check rc = EL_PKG_OK;
    for (;;) {
        ssize_t n = read(fd, buf, cap);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) { rc = el_pkg_fail(err, EL_PKG_ERR_IO, "%s: read error: %s", path, strerror(errno)); break; }
        if (n == 0) break;
        crypto_hash_sha256_update(&st, buf, (unsigned long long)n);
        total += (uint64_t)n;
    }
    free(buf);
    close(fd);
    if (rc == EL_PKG_OK) {
        if (out) crypto_hash_sha256_final(&st, out);
        if (size) *size = total;
    }
    return rc;
}

/* ---- the tokenizer alone ---------------------------------------------- */

el_pkg_check el_pkg_tokenizer_sha256(const char *model_path, uint8_t out[32], el_pkg_error *err) {
    if (!el_pkg_init()) return el_pkg_fail(err, EL_PKG_ERR_IO, "libsodium failed to initialise");
    el_manifest m;
    memset(&m, 0, sizeof m);
    el_pkg_check c = el_pkg_fingerprint(model_path, &m, NULL, err);
    if (c == EL_PKG_OK) memcpy(out, m.tokenizer_sha256, 32);
    el_manifest_free(&m);
    return c;
}
