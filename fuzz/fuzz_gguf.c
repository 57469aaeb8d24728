/*
 * fuzz_gguf.c — libFuzzer target for the GGUF reader (src/package/gguf.c).
 *
 * Parses the input with el_gguf_open_buffer(); on success walks every kv
 * (typed getters by key, array elements, every string of string arrays) and
 * every tensor (lookup by name, every data byte, el_gguf_check_values — it
 * refuses only MXFP4 tensors, with a message — then the type's
 * dequantization of up to 4096 elements), and aborts if any invariant
 * promised by gguf.h does not hold. libFuzzer hands us an exactly-sized heap
 * copy, so ASan catches any read past the end. On failure, the error must
 * carry a code and a message. A file that parses is also cut into the load
 * strategies' segments (memory/load.c reads the tensor names: "blk.N.") for
 * a few layer counts: every range lies inside the (page-rounded) buffer,
 * segments are in order, every tensor byte is in one, and the per-layer
 * prefetch hook accepts any layer number.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "memory/load.h"
#include "package/gguf.h"
#include "package/quants_blocks.h"
#include "package/types.h"

#define REQUIRE(c) do { if (!(c)) { fprintf(stderr, "invariant failed: %s\n", #c); abort(); } } while (0)

static volatile unsigned g_sink;

static void walk_kv(const el_gguf *g, const el_gguf_kv *kv, const uint8_t *end) {
    unsigned sum = 0;
    REQUIRE((const uint8_t *)kv->key.ptr + kv->key.len <= end);
    float f;
    int64_t i64;
    if (kv->type == EL_GGUF_ARRAY) {
        el_gguf_vtype at = kv->arr_type;
        uint64_t n = kv->arr_n;
        REQUIRE(at != EL_GGUF_ARRAY && (unsigned)at < EL_GGUF_TYPE_COUNT);
        if (at == EL_GGUF_STRING) {
            const uint8_t *p = kv->data;
            for (uint64_t i = 0; i < n; i++) {
                el_str e = el_gguf_str_next(&p);
                REQUIRE(p <= end);
                char *d = el_str_dup(e);
                if (d) { sum += (unsigned)strlen(d); free(d); }
            }
            REQUIRE(!el_gguf_arr_f32(kv, 0, &f) && !el_gguf_arr_i64(kv, 0, &i64));
        } else {
            REQUIRE(kv->data + n * el_gguf_vtype_size(at) <= end);
            for (uint64_t i = 0; i <= n; i++) { /* i == n: out of range, must be false */
                bool okf = el_gguf_arr_f32(kv, i, &f), oki = el_gguf_arr_i64(kv, i, &i64);
                if (i == n) REQUIRE(!okf && !oki);
                sum += okf + oki;
            }
        }
    } else {
        REQUIRE(!el_gguf_arr_f32(kv, 0, &f) && !el_gguf_arr_i64(kv, 0, &i64));
        if (kv->type != EL_GGUF_STRING) REQUIRE(kv->data + el_gguf_vtype_size(kv->type) <= end);
    }

    /* The typed getters, by key. A key with an embedded NUL cannot be looked
     * up by C string (it may even find a different kv), so skip those. */
    char *key = el_str_dup(kv->key);
    if (!key || strlen(key) != kv->key.len) { free(key); g_sink += sum; return; }
    REQUIRE(el_gguf_find(g, key) == kv);
    uint32_t u32;
    bool b;
    el_str s;
    el_gguf_vtype at;
    uint64_t n;
    const uint8_t *data;
    sum += el_gguf_get_u32(g, key, &u32) ? u32 : 0;
    sum += el_gguf_get_i64(g, key, &i64) ? (unsigned)i64 : 0;
    sum += el_gguf_get_f32(g, key, &f) ? (f > 0) : 0;
    sum += el_gguf_get_bool(g, key, &b) ? b : 0;
    if (el_gguf_get_str(g, key, &s)) {
        REQUIRE(kv->type == EL_GGUF_STRING);
        REQUIRE((const uint8_t *)s.ptr >= kv->data && (const uint8_t *)s.ptr + s.len <= end);
        sum += el_str_eq(s, key);
        for (uint64_t i = 0; i < s.len; i++) sum += (unsigned char)s.ptr[i];
    } else {
        REQUIRE(kv->type != EL_GGUF_STRING);
    }
    if (el_gguf_get_arr(g, key, &at, &n, &data))
        REQUIRE(kv->type == EL_GGUF_ARRAY && at == kv->arr_type && n == kv->arr_n && data == kv->data);
    else
        REQUIRE(kv->type != EL_GGUF_ARRAY);
    free(key);
    sum += (unsigned)el_gguf_vtype_size(kv->type) + (unsigned)strlen(el_gguf_vtype_name(kv->type));
    g_sink += sum;
}

static void walk_tensor(const el_gguf *g, const el_gguf_tensor *t, const uint8_t *base, const uint8_t *end) {
    char *name = el_str_dup(t->name);
    if (name && strlen(name) == t->name.len) REQUIRE(el_gguf_find_tensor(g, name) == t);
    free(name);
    REQUIRE(t->n_dims >= 1 && t->n_dims <= 4);
    REQUIRE(el_type_get(t->type) != NULL);
    for (int j = 0; j < 4; j++) REQUIRE(t->ne[j] >= 1 && (j < t->n_dims || t->ne[j] == 1));
    size_t row = el_row_size((el_type)t->type, t->ne[0]);
    REQUIRE(row > 0 && t->nbytes == row * (size_t)t->ne[1] * (size_t)t->ne[2] * (size_t)t->ne[3]);
    REQUIRE(t->offset % el_gguf_alignment(g) == 0);
    const uint8_t *d = t->data;
    REQUIRE(d >= base && d <= end && t->nbytes <= (size_t)(end - d));
    unsigned sum = 0;
    for (size_t i = 0; i < t->nbytes; i++) sum += d[i];
    /* the values check (MXFP4: a NaN exponent) and, where it passes, the
     * type's dequantization of the first rows (any bits: no crash, no UB) */
    el_error err = {0};
    const el_status vs = el_gguf_check_values(t, &err);
    REQUIRE(vs == EL_OK || (vs == EL_ERR_BAD_TENSOR && t->type == EL_TYPE_MXFP4 && err.msg[0] != '\0'));
    const el_type_info *ti = el_type_get(t->type);
    /* (a block with an fp16 field, or F32, read in place wants its alignment:
     * a file's general.alignment may be 1; MXFP4 blocks are plain bytes) */
    if (vs == EL_OK && ti->to_float && (t->type == EL_TYPE_MXFP4 || (uintptr_t)d % 4 == 0)) {
        int64_t n = t->ne[0] * (t->ne[1] < 4 ? t->ne[1] : 4);
        if (n > 4096) n = 4096 / ti->blck_size * ti->blck_size;
        float *f = n > 0 ? malloc(sizeof(float) * (size_t)n) : NULL;
        if (f) {
            ti->to_float(d, f, n);
            for (int64_t i = 0; i < n; i++) sum += (f[i] != f[i]);
            free(f);
        }
    }
    g_sink += sum;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    el_error err = {0};
    el_gguf *g = el_gguf_open_buffer(data, size, &err);
    if (!g) {
        REQUIRE(err.code != EL_OK && err.msg[0] != '\0');
        return 0;
    }
    REQUIRE(err.code == EL_OK);
    REQUIRE(el_gguf_base(g) == data && el_gguf_file_size(g) == size);
    REQUIRE(el_gguf_version(g) == 2 || el_gguf_version(g) == 3);
    size_t a = el_gguf_alignment(g);
    REQUIRE(a > 0 && (a & (a - 1)) == 0);
    const uint8_t *end = data + size;

    int64_t nkv = el_gguf_n_kv(g), nt = el_gguf_n_tensors(g);
    REQUIRE(nkv >= 0 && nt >= 0);
    REQUIRE(el_gguf_kv_at(g, -1) == NULL && el_gguf_kv_at(g, nkv) == NULL);
    REQUIRE(el_gguf_tensor_at(g, -1) == NULL && el_gguf_tensor_at(g, nt) == NULL);
    for (int64_t i = 0; i < nkv; i++) walk_kv(g, el_gguf_kv_at(g, i), end);
    for (int64_t i = 0; i < nt; i++) walk_tensor(g, el_gguf_tensor_at(g, i), data, end);

    /* tensors must not overlap (O(n^2) is fine for fuzz-sized inputs) */
    if (nt <= 256) {
        for (int64_t i = 0; i < nt; i++)
            for (int64_t j = i + 1; j < nt; j++) {
                const el_gguf_tensor *x = el_gguf_tensor_at(g, i), *y = el_gguf_tensor_at(g, j);
                REQUIRE(x->offset + x->nbytes <= y->offset || y->offset + y->nbytes <= x->offset);
            }
    }
    /* load-strategy segments */
    static const int n_layers[] = {0, 1, 3, 64};
    for (size_t k = 0; k < sizeof n_layers / sizeof n_layers[0]; k++) {
        el_load_state ls;
        REQUIRE(el_load_prepare(&ls, g, n_layers[k], EL_LOAD_PREFETCH, &err) == 0);
        const int ns = n_layers[k] + 2, nr = ls.first[ns];
        REQUIRE(ls.first[0] == 0);
        for (int s = 0; s < ns; s++) REQUIRE(ls.first[s] <= ls.first[s + 1]);
        const size_t pg = (size_t)sysconf(_SC_PAGESIZE), lim = (size + pg - 1) / pg * pg;
        for (int i = 0; i < nr; i++) REQUIRE(ls.r[i].len > 0 && ls.r[i].off + ls.r[i].len <= lim);
        for (int64_t i = 0; i < nt; i++) {
            const el_gguf_tensor *t = el_gguf_tensor_at(g, i);
            if (!t->nbytes) continue;
            size_t a0 = (size_t)((const uint8_t *)t->data - data), b0 = a0 + t->nbytes;
            bool in = false;
            for (int j = 0; j < nr && !in; j++) in = ls.r[j].off <= a0 && b0 <= ls.r[j].off + ls.r[j].len;
            REQUIRE(in);
        }
        REQUIRE(el_load_lock_bytes(&ls, 0) <= el_load_lock_bytes(&ls, 1));
        for (int l = -2; l <= n_layers[k] + 2; l++) el_load_on_layer(&ls, l); /* unaligned buffer: advice only */
        el_load_release(&ls);
    }

    /* lookups of absent names */
    REQUIRE(el_gguf_find(g, "\x01no such key\x02") == NULL);
    REQUIRE(el_gguf_find_tensor(g, "\x01no such tensor\x02") == NULL);
    el_gguf_close(g);
    return 0;
}
