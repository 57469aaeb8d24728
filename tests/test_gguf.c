/*
 * test_gguf.c — the GGUF reader (src/package/gguf.c).
 *
 *  1. A small valid GGUF written in memory (every value type, string arrays,
 *     three tensors) parses and every value reads back; then mutations of it
 *     (bad magic/version, every truncation, absurd counts, bad shapes, types,
 *     offsets, alignment, duplicates) each give the expected el_status and a
 *     message naming the field or tensor.
 *  2. Opening by path: missing file, directory, empty file, a real file.
 *  3. Every reference model and vocab GGUF opens (skipped without the data).
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "package/gguf.h"
#include "package/types.h"
#include "testutil.h"

/* ---- a tiny GGUF writer --------------------------------------------------- */

typedef struct buf { uint8_t *p; size_t n, cap; } buf;

static void put(buf *b, const void *d, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        if (!b->p) abort();
    }
    if (n) memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void put_u8(buf *b, uint8_t v) { put(b, &v, 1); }
static void put_u16(buf *b, uint16_t v) { put(b, &v, 2); }
static void put_u32(buf *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(buf *b, uint64_t v) { put(b, &v, 8); }
static void put_f32(buf *b, float v) { put(b, &v, 4); }
static void put_f64(buf *b, double v) { put(b, &v, 8); }
static void put_str(buf *b, const char *s) { put_u64(b, strlen(s)); put(b, s, strlen(s)); }
static void patch_u32(buf *b, size_t pos, uint32_t v) { memcpy(b->p + pos, &v, 4); }
static void patch_u64(buf *b, size_t pos, uint64_t v) { memcpy(b->p + pos, &v, 8); }

enum { T_U8 = 0, T_I8, T_U16, T_I16, T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR, T_U64, T_I64, T_F64 };

/* The kvs of the valid file, in order. */
enum {
    K_ARCH, K_ALIGN, K_U8, K_I8, K_U16, K_I16, K_U32, K_I32, K_F32, K_BOOL, K_STR, K_U64, K_I64, K_F64,
    K_F64_BIG, K_ARR_I32, K_ARR_F32, K_ARR_STR, K_ARR_EMPTY, K_EMPTY_STR, K_ARR_U64, K_ARR_F64, K_COUNT
};

#define N_TENSORS 3
static const char *const k_tnames[N_TENSORS] = {"blk.0.attn_q.weight", "blk.0.attn_k.weight", "output_norm.weight"};
static const int k_tndims[N_TENSORS] = {2, 1, 3};
static const int64_t k_tne[N_TENSORS][4] = {{32, 2, 1, 1}, {8, 1, 1, 1}, {4, 2, 2, 1}};
static const int k_ttype[N_TENSORS] = {EL_TYPE_Q8_0, EL_TYPE_F32, EL_TYPE_F16};
static const size_t k_tbytes[N_TENSORS] = {2 * 34, 8 * 4, 16 * 2};

typedef struct opts {
    uint32_t version;  /* 0: 3 */
    uint32_t align;    /* 0: no general.alignment kv (default 32) */
    bool dup_key;      /* add a second general.architecture */
    bool nested_array; /* add an array of arrays */
} opts;

/* Positions of fields in the written file, for patching. */
typedef struct layout {
    size_t kv_key[K_COUNT + 2], kv_type[K_COUNT + 2], kv_val[K_COUNT + 2];
    size_t t_name[N_TENSORS], t_ndims[N_TENSORS], t_ne[N_TENSORS], t_type[N_TENSORS], t_off[N_TENSORS];
    size_t data, t_data[N_TENSORS];
} layout;

static void kv_head(buf *b, layout *L, int i, const char *key, uint32_t type) {
    L->kv_key[i] = b->n;
    put_str(b, key);
    L->kv_type[i] = b->n;
    put_u32(b, type);
    L->kv_val[i] = b->n;
}

/* Writes the valid test file; the data of tensor t is bytes (t*50 + j) & 0xff,
 * and the file ends exactly at the end of the last tensor (no padding), so any
 * truncation is detectable. */
static void make_file(buf *b, layout *L, const opts *o) {
    memset(L, 0, sizeof *L);
    b->n = 0;
    uint32_t align = o->align ? o->align : 32;
    int n_kv = K_COUNT - (o->align ? 0 : 1) + (o->dup_key ? 1 : 0) + (o->nested_array ? 1 : 0);
    put(b, "GGUF", 4);
    put_u32(b, o->version ? o->version : 3);
    put_u64(b, N_TENSORS);
    put_u64(b, (uint64_t)n_kv);

    kv_head(b, L, K_ARCH, "general.architecture", T_STR); put_str(b, "llama");
    if (o->align) { kv_head(b, L, K_ALIGN, "general.alignment", T_U32); put_u32(b, align); }
    kv_head(b, L, K_U8, "t.u8", T_U8); put_u8(b, 200);
    kv_head(b, L, K_I8, "t.i8", T_I8); put_u8(b, (uint8_t)-100);
    kv_head(b, L, K_U16, "t.u16", T_U16); put_u16(b, 60000);
    kv_head(b, L, K_I16, "t.i16", T_I16); put_u16(b, (uint16_t)-30000);
    kv_head(b, L, K_U32, "t.u32", T_U32); put_u32(b, 4000000000u);
    kv_head(b, L, K_I32, "t.i32", T_I32); put_u32(b, (uint32_t)-2000000000);
    kv_head(b, L, K_F32, "t.f32", T_F32); put_f32(b, 1.5f);
    kv_head(b, L, K_BOOL, "t.bool", T_BOOL); put_u8(b, 1);
    kv_head(b, L, K_STR, "t.str", T_STR); put_str(b, "hello");
    kv_head(b, L, K_U64, "t.u64", T_U64); put_u64(b, (UINT64_C(1) << 63) + 5);
    kv_head(b, L, K_I64, "t.i64", T_I64); put_u64(b, (uint64_t)INT64_C(-5000000000000000));
    kv_head(b, L, K_F64, "t.f64", T_F64); put_f64(b, 3.25);
    kv_head(b, L, K_F64_BIG, "t.f64_big", T_F64); put_f64(b, 1e300);
    kv_head(b, L, K_ARR_I32, "t.arr_i32", T_ARR); put_u32(b, T_I32); put_u64(b, 3);
    put_u32(b, 1); put_u32(b, (uint32_t)-2); put_u32(b, 3);
    kv_head(b, L, K_ARR_F32, "t.arr_f32", T_ARR); put_u32(b, T_F32); put_u64(b, 2);
    put_f32(b, 0.5f); put_f32(b, -1.25f);
    kv_head(b, L, K_ARR_STR, "tokenizer.ggml.tokens", T_ARR); put_u32(b, T_STR); put_u64(b, 3);
    put_str(b, "a"); put_str(b, ""); put_str(b, "\xe2\x96\x81x");
    kv_head(b, L, K_ARR_EMPTY, "t.arr_empty", T_ARR); put_u32(b, T_U8); put_u64(b, 0);
    kv_head(b, L, K_EMPTY_STR, "t.empty_str", T_STR); put_str(b, "");
    kv_head(b, L, K_ARR_U64, "t.arr_u64", T_ARR); put_u32(b, T_U64); put_u64(b, 2);
    put_u64(b, (UINT64_C(1) << 63) + 1); put_u64(b, 7);
    kv_head(b, L, K_ARR_F64, "t.arr_f64", T_ARR); put_u32(b, T_F64); put_u64(b, 2);
    put_f64(b, 2.0); put_f64(b, 2.5);
    if (o->dup_key) { kv_head(b, L, K_COUNT, "general.architecture", T_STR); put_str(b, "qwen2"); }
    if (o->nested_array) {
        kv_head(b, L, K_COUNT + 1, "t.nested", T_ARR); put_u32(b, T_ARR); put_u64(b, 1);
        put_u32(b, T_U8); put_u64(b, 1); put_u8(b, 1);
    }

    uint64_t off = 0;
    for (int t = 0; t < N_TENSORS; t++) {
        L->t_name[t] = b->n;
        put_str(b, k_tnames[t]);
        L->t_ndims[t] = b->n;
        put_u32(b, (uint32_t)k_tndims[t]);
        L->t_ne[t] = b->n;
        for (int j = 0; j < k_tndims[t]; j++) put_u64(b, (uint64_t)k_tne[t][j]);
        L->t_type[t] = b->n;
        put_u32(b, (uint32_t)k_ttype[t]);
        L->t_off[t] = b->n;
        put_u64(b, off);
        L->t_data[t] = off;
        off = (off + k_tbytes[t] + align - 1) / align * align;
    }
    while (b->n % align) put_u8(b, 0);
    L->data = b->n;
    for (int t = 0; t < N_TENSORS; t++) {
        while (b->n < L->data + L->t_data[t]) put_u8(b, 0);
        for (size_t j = 0; j < k_tbytes[t]; j++) put_u8(b, (uint8_t)((size_t)t * 50 + j));
    }
}

/* ---- helpers ------------------------------------------------------------- */

/* Opens a private, exactly-sized copy so ASan sees any read past the end. */
static el_gguf *open_copy(const uint8_t *p, size_t n, el_error *err, uint8_t **copy) {
    *copy = malloc(n ? n : 1);
    if (n) memcpy(*copy, p, n);
    return el_gguf_open_buffer(*copy, n, err);
}

static void expect_err(const buf *b, el_status code, const char *needle, const char *label) {
    el_error err = {0};
    uint8_t *copy;
    el_gguf *g = open_copy(b->p, b->n, &err, &copy);
    CHECKF(g == NULL, "%s: opened a bad file", label);
    CHECKF(err.code == code, "%s: got %s (%s), want %s", label, el_status_name(err.code), err.msg,
           el_status_name(code));
    CHECKF(needle == NULL || strstr(err.msg, needle) != NULL, "%s: message '%s' lacks '%s'", label, err.msg, needle);
    if (getenv("EL_TEST_VERBOSE")) printf("  %-26s %-12s %s\n", label, el_status_name(err.code), err.msg);
    el_gguf_close(g);
    free(copy);
}

/* Touches every value and tensor byte of an opened file; checks the invariants
 * gguf.h promises. Returns a checksum so nothing is optimised away. */
static unsigned walk_all(const el_gguf *g) {
    unsigned sum = 0;
    const uint8_t *base = el_gguf_base(g), *end = base + el_gguf_file_size(g);
    for (int64_t i = 0; i < el_gguf_n_kv(g); i++) {
        const el_gguf_kv *kv = el_gguf_kv_at(g, i);
        CHECK((const uint8_t *)kv->key.ptr >= base && (const uint8_t *)kv->key.ptr + kv->key.len <= end);
        if (kv->type == EL_GGUF_ARRAY && kv->arr_type == EL_GGUF_STRING) {
            const uint8_t *p = kv->data;
            for (uint64_t j = 0; j < kv->arr_n; j++) {
                el_str s = el_gguf_str_next(&p);
                for (uint64_t k = 0; k < s.len; k++) sum += (unsigned char)s.ptr[k];
            }
            CHECK(p <= end);
        } else if (kv->type == EL_GGUF_ARRAY) {
            CHECK(kv->data + kv->arr_n * el_gguf_vtype_size(kv->arr_type) <= end);
            for (uint64_t j = 0; j < kv->arr_n; j++) {
                float f;
                int64_t v;
                if (el_gguf_arr_f32(kv, j, &f)) sum += (unsigned)(f != 0);
                if (el_gguf_arr_i64(kv, j, &v)) sum += (unsigned)v;
            }
        } else if (kv->type == EL_GGUF_STRING) {
            const uint8_t *p = kv->data;
            el_str s = el_gguf_str_next(&p);
            CHECK(p <= end && s.len <= el_gguf_file_size(g));
        } else {
            CHECK(kv->data + el_gguf_vtype_size(kv->type) <= end);
        }
    }
    for (int64_t i = 0; i < el_gguf_n_tensors(g); i++) {
        const el_gguf_tensor *t = el_gguf_tensor_at(g, i);
        const uint8_t *d = t->data;
        CHECK(d >= base && t->nbytes > 0 && t->nbytes <= (size_t)(end - d));
        CHECK(t->offset % el_gguf_alignment(g) == 0);
        CHECK(t->n_dims >= 1 && t->n_dims <= 4);
        CHECK(t->nbytes == el_row_size((el_type)t->type, t->ne[0]) * (size_t)(t->ne[1] * t->ne[2] * t->ne[3]));
        sum += d[0] + d[t->nbytes - 1];
    }
    return sum;
}

/* ---- 1. the valid crafted file reads back -------------------------------- */

static void check_valid(const buf *b, const layout *L, uint32_t version, uint32_t align) {
    el_error err = {0};
    uint8_t *copy;
    el_gguf *g = open_copy(b->p, b->n, &err, &copy);
    CHECKF(g != NULL, "valid file: %s: %s", el_status_name(err.code), err.msg);
    if (!g) { free(copy); return; }
    CHECK(err.code == EL_OK);
    CHECK(el_gguf_version(g) == version);
    CHECK(el_gguf_alignment(g) == (align ? align : 32));
    CHECK(el_gguf_file_size(g) == b->n);
    CHECK(el_gguf_base(g) == copy);
    CHECK(el_gguf_n_kv(g) == K_COUNT - (align ? 0 : 1));
    CHECK(el_gguf_n_tensors(g) == N_TENSORS);
    CHECK(el_gguf_kv_at(g, -1) == NULL && el_gguf_kv_at(g, el_gguf_n_kv(g)) == NULL);
    CHECK(el_gguf_tensor_at(g, N_TENSORS) == NULL);
    CHECK(el_gguf_find(g, "nope") == NULL && el_gguf_find(g, "t.u") == NULL && el_gguf_find(g, "") == NULL);

    el_str s;
    uint32_t u32;
    int64_t i64;
    float f;
    bool bo;
    CHECK(el_gguf_get_str(g, "general.architecture", &s) && el_str_eq(s, "llama") && !el_str_eq(s, "llam"));
    CHECK(el_gguf_get_str(g, "t.str", &s) && el_str_eq(s, "hello"));
    CHECK(el_gguf_get_str(g, "t.empty_str", &s) && s.len == 0 && el_str_eq(s, ""));
    char *dup = el_str_dup(s);
    CHECK(dup && dup[0] == 0);
    free(dup);
    CHECK(el_gguf_get_str(g, "t.str", &s) && (dup = el_str_dup(s)) && strcmp(dup, "hello") == 0);
    free(dup);
    CHECK(!el_gguf_get_str(g, "t.u8", &s));

    CHECK(el_gguf_get_u32(g, "t.u8", &u32) && u32 == 200);
    CHECK(el_gguf_get_u32(g, "t.u16", &u32) && u32 == 60000);
    CHECK(el_gguf_get_u32(g, "t.u32", &u32) && u32 == 4000000000u);
    CHECK(!el_gguf_get_u32(g, "t.i8", &u32));  /* negative */
    CHECK(!el_gguf_get_u32(g, "t.u64", &u32)); /* too big */
    CHECK(!el_gguf_get_u32(g, "t.f32", &u32));
    CHECK(!el_gguf_get_u32(g, "missing", &u32));
    CHECK(el_gguf_get_i64(g, "t.i8", &i64) && i64 == -100);
    CHECK(el_gguf_get_i64(g, "t.i16", &i64) && i64 == -30000);
    CHECK(el_gguf_get_i64(g, "t.i32", &i64) && i64 == -2000000000);
    CHECK(el_gguf_get_i64(g, "t.i64", &i64) && i64 == INT64_C(-5000000000000000));
    CHECK(el_gguf_get_i64(g, "t.u32", &i64) && i64 == 4000000000);
    CHECK(!el_gguf_get_i64(g, "t.u64", &i64)); /* > INT64_MAX */
    CHECK(!el_gguf_get_i64(g, "t.bool", &i64));
    CHECK(el_gguf_get_f32(g, "t.f32", &f) && f == 1.5f);
    CHECK(el_gguf_get_f32(g, "t.f64", &f) && f == 3.25f);
    CHECK(!el_gguf_get_f32(g, "t.f64_big", &f)); /* out of float range */
    CHECK(!el_gguf_get_f32(g, "t.str", &f));
    CHECK(el_gguf_get_bool(g, "t.bool", &bo) && bo);
    CHECK(!el_gguf_get_bool(g, "t.u8", &bo));

    el_gguf_vtype at;
    uint64_t n;
    const uint8_t *data;
    CHECK(el_gguf_get_arr(g, "t.arr_i32", &at, &n, &data) && at == EL_GGUF_INT32 && n == 3);
    CHECK(!el_gguf_get_arr(g, "t.i32", &at, &n, &data));
    const el_gguf_kv *kv = el_gguf_find(g, "t.arr_i32");
    CHECK(kv && kv->type == EL_GGUF_ARRAY && kv->data == data);
    CHECK(el_gguf_arr_i64(kv, 1, &i64) && i64 == -2);
    CHECK(el_gguf_arr_f32(kv, 2, &f) && f == 3.0f);
    CHECK(!el_gguf_arr_i64(kv, 3, &i64)); /* out of range */
    kv = el_gguf_find(g, "t.arr_f32");
    CHECK(kv && el_gguf_arr_f32(kv, 1, &f) && f == -1.25f);
    CHECK(!el_gguf_arr_i64(kv, 0, &i64)); /* 0.5: not integral */
    kv = el_gguf_find(g, "t.arr_u64");
    CHECK(kv && !el_gguf_arr_i64(kv, 0, &i64) && el_gguf_arr_i64(kv, 1, &i64) && i64 == 7);
    CHECK(el_gguf_arr_f32(kv, 0, &f) && f == 9223372036854775808.0f);
    kv = el_gguf_find(g, "t.arr_f64");
    CHECK(kv && el_gguf_arr_i64(kv, 0, &i64) && i64 == 2 && !el_gguf_arr_i64(kv, 1, &i64));
    kv = el_gguf_find(g, "t.arr_empty");
    CHECK(kv && kv->arr_type == EL_GGUF_UINT8 && kv->arr_n == 0 && !el_gguf_arr_i64(kv, 0, &i64));
    kv = el_gguf_find(g, "tokenizer.ggml.tokens");
    CHECK(kv && kv->type == EL_GGUF_ARRAY && kv->arr_type == EL_GGUF_STRING && kv->arr_n == 3);
    if (kv) {
        CHECK(!el_gguf_arr_f32(kv, 0, &f) && !el_gguf_arr_i64(kv, 0, &i64));
        const uint8_t *p = kv->data;
        CHECK(el_str_eq(el_gguf_str_next(&p), "a"));
        CHECK(el_str_eq(el_gguf_str_next(&p), ""));
        CHECK(el_str_eq(el_gguf_str_next(&p), "\xe2\x96\x81x"));
        CHECK(p == copy + L->kv_key[K_ARR_EMPTY]);
    }
    CHECK(el_gguf_kv_at(g, 0) == el_gguf_find(g, "general.architecture"));

    for (int t = 0; t < N_TENSORS; t++) {
        const el_gguf_tensor *ti = el_gguf_find_tensor(g, k_tnames[t]);
        CHECKF(ti != NULL, "tensor %s", k_tnames[t]);
        if (!ti) continue;
        CHECK(ti == el_gguf_tensor_at(g, t));
        CHECK(el_str_eq(ti->name, k_tnames[t]));
        CHECK(ti->n_dims == k_tndims[t] && ti->type == k_ttype[t]);
        for (int j = 0; j < 4; j++) CHECK(ti->ne[j] == k_tne[t][j]);
        CHECK(ti->offset == L->t_data[t]);
        CHECK(ti->nbytes == k_tbytes[t]);
        CHECK((const uint8_t *)ti->data == copy + L->data + L->t_data[t]);
        const uint8_t *d = ti->data;
        CHECK(d[0] == (uint8_t)(t * 50) && d[ti->nbytes - 1] == (uint8_t)((size_t)t * 50 + ti->nbytes - 1));
    }
    CHECK(el_gguf_find_tensor(g, "blk.0.attn_v.weight") == NULL);
    walk_all(g);
    el_gguf_close(g);
    free(copy);
}

static void test_valid(void) {
    buf b = {0};
    layout L;
    make_file(&b, &L, &(opts){.align = 32});
    check_valid(&b, &L, 3, 32);
    make_file(&b, &L, &(opts){.version = 2, .align = 32});
    check_valid(&b, &L, 2, 32);
    make_file(&b, &L, &(opts){0}); /* no general.alignment: default 32 */
    check_valid(&b, &L, 3, 0);
    make_file(&b, &L, &(opts){.align = 64});
    check_valid(&b, &L, 3, 64);
    make_file(&b, &L, &(opts){.align = 1});
    check_valid(&b, &L, 3, 1);
    free(b.p);

    /* minimal files: header only */
    buf h = {0};
    put(&h, "GGUF", 4); put_u32(&h, 3); put_u64(&h, 0); put_u64(&h, 0);
    el_error err;
    el_gguf *g = el_gguf_open_buffer(h.p, h.n, &err);
    CHECKF(g && el_gguf_n_kv(g) == 0 && el_gguf_n_tensors(g) == 0, "header-only file: %s", err.msg);
    CHECK(el_gguf_find(g, "x") == NULL && el_gguf_find_tensor(g, "x") == NULL);
    el_gguf_close(g);
    free(h.p);
    el_gguf_close(NULL);
    CHECK(el_gguf_open_buffer(NULL, 10, &err) == NULL && err.code == EL_ERR_INVALID_ARG);

    CHECK(el_gguf_vtype_size(EL_GGUF_UINT16) == 2 && el_gguf_vtype_size(EL_GGUF_FLOAT64) == 8);
    CHECK(el_gguf_vtype_size(EL_GGUF_STRING) == 0 && el_gguf_vtype_size(EL_GGUF_ARRAY) == 0);
    CHECK(el_gguf_vtype_size((el_gguf_vtype)13) == 0);
    CHECK(strcmp(el_gguf_vtype_name(EL_GGUF_STRING), "string") == 0);
    CHECK(strcmp(el_gguf_vtype_name((el_gguf_vtype)99), "?") == 0);
    CHECK(!el_str_eq((el_str){"ab", 2}, NULL) && el_str_eq((el_str){NULL, 0}, ""));
}

/* ---- 2. bad files -------------------------------------------------------- */

static void test_truncation(void) {
    buf b = {0};
    layout L;
    make_file(&b, &L, &(opts){.align = 32});
    int bad = 0;
    for (size_t n = 0; n < b.n; n++) {
        el_error err = {0};
        uint8_t *copy;
        el_gguf *g = open_copy(b.p, n, &err, &copy);
        bool ok = g == NULL && (err.code == EL_ERR_TRUNCATED || err.code == EL_ERR_BAD_COUNT ||
                                err.code == EL_ERR_BAD_TENSOR);
        if (!ok && bad++ < 5)
            fprintf(stderr, "truncation at %zu/%zu: %s %s\n", n, b.n, el_status_name(err.code), err.msg);
        el_test_checks++;
        el_test_failures += !ok;
        el_gguf_close(g);
        free(copy);
    }
    /* a few truncations name the field they cut */
    buf t = {0};
    put(&t, b.p, L.kv_val[K_ARR_STR] + 12 + 3); /* inside the first token's length */
    expect_err(&t, EL_ERR_TRUNCATED, "'tokenizer.ggml.tokens'[0]", "truncated in a token");
    t.n = 0;
    put(&t, b.p, 100); /* 22 kvs cannot fit in 100 bytes */
    expect_err(&t, EL_ERR_BAD_COUNT, "n_kv", "truncated: n_kv > file holds");
    t.n = 0;
    put(&t, b.p, L.t_ne[1] + 3);
    expect_err(&t, EL_ERR_TRUNCATED, "tensor 'blk.0.attn_k.weight' ne[0]", "truncated in ne");
    t.n = 0;
    put(&t, b.p, b.n - 1);
    expect_err(&t, EL_ERR_BAD_TENSOR, "tensor 'output_norm.weight'", "truncated in data");
    t.n = 0;
    put(&t, b.p, 2);
    expect_err(&t, EL_ERR_TRUNCATED, "magic", "2-byte file");
    t.n = 0;
    put(&t, "GG", 2);
    expect_err(&t, EL_ERR_TRUNCATED, "magic", "empty buffer"); /* size 0 below */
    t.n = 0;
    {
        el_error err;
        CHECK(el_gguf_open_buffer(b.p, 0, &err) == NULL && err.code == EL_ERR_TRUNCATED);
    }
    free(t.p);
    free(b.p);
}

/* Builds the valid file, applies fn, expects code + needle. */
#define MUTATE(label, code, needle, ...) do { \
        make_file(&b, &L, &(opts){.align = 32}); \
        __VA_ARGS__; \
        expect_err(&b, code, needle, label); \
    } while (0)

static void test_mutations(void) {
    buf b = {0};
    layout L;

    MUTATE("bad magic", EL_ERR_BAD_MAGIC, "magic", memcpy(b.p, "GGML", 4));
    MUTATE("bad magic 1 byte", EL_ERR_BAD_MAGIC, "not a GGUF", b.n = 1; b.p[0] = 'X');
    MUTATE("version 1", EL_ERR_BAD_VERSION, "version", patch_u32(&b, 4, 1));
    MUTATE("version 4", EL_ERR_BAD_VERSION, "version", patch_u32(&b, 4, 4));
    MUTATE("version 0", EL_ERR_BAD_VERSION, "version", patch_u32(&b, 4, 0));
    MUTATE("big-endian v3", EL_ERR_BAD_VERSION, "big-endian", patch_u32(&b, 4, 0x03000000u));

    MUTATE("n_kv 2^40", EL_ERR_BAD_COUNT, "n_kv", patch_u64(&b, 16, UINT64_C(1) << 40));
    MUTATE("n_kv 2^64-1", EL_ERR_BAD_COUNT, "n_kv", patch_u64(&b, 16, UINT64_MAX));
    MUTATE("n_tensors 2^40", EL_ERR_BAD_COUNT, "n_tensors", patch_u64(&b, 8, UINT64_C(1) << 40));
    /* one more than written: the parser reads on into the following bytes */
    MUTATE("n_kv too many", EL_ERR_BAD_COUNT, "tensor[0] name", patch_u64(&b, 16, K_COUNT + 1));
    MUTATE("n_tensors too many", EL_ERR_BAD_COUNT, "tensor[3] name", patch_u64(&b, 8, N_TENSORS + 1));

    MUTATE("key len huge", EL_ERR_BAD_COUNT, "kv[0] key", patch_u64(&b, L.kv_key[K_ARCH], UINT64_C(1) << 62));
    MUTATE("key len past end", EL_ERR_TRUNCATED, "kv[3] key", patch_u64(&b, L.kv_key[K_I8], b.n - L.kv_key[K_I8]));
    MUTATE("string len huge", EL_ERR_BAD_COUNT, "'t.str'", patch_u64(&b, L.kv_val[K_STR], UINT64_MAX));
    MUTATE("string len past end", EL_ERR_TRUNCATED, "'t.str'", patch_u64(&b, L.kv_val[K_STR], b.n));
    MUTATE("array len huge", EL_ERR_BAD_COUNT, "'t.arr_i32'", patch_u64(&b, L.kv_val[K_ARR_I32] + 4, UINT64_C(1) << 61));
    MUTATE("array len 2^64-1", EL_ERR_BAD_COUNT, "'t.arr_f64'", patch_u64(&b, L.kv_val[K_ARR_F64] + 4, UINT64_MAX));
    MUTATE("array len past end", EL_ERR_TRUNCATED, "'t.arr_f32'", patch_u64(&b, L.kv_val[K_ARR_F32] + 4, b.n / 4));
    MUTATE("str array len huge", EL_ERR_BAD_COUNT, "'tokenizer.ggml.tokens'",
           patch_u64(&b, L.kv_val[K_ARR_STR] + 4, UINT64_C(1) << 40));
    MUTATE("str array len past end", EL_ERR_BAD_COUNT, "'tokenizer.ggml.tokens'[",
           patch_u64(&b, L.kv_val[K_ARR_STR] + 4, b.n / 8));
    MUTATE("str array elem huge", EL_ERR_BAD_COUNT, "'tokenizer.ggml.tokens'[1]",
           patch_u64(&b, L.kv_val[K_ARR_STR] + 12 + 9, UINT64_C(1) << 50));
    MUTATE("str array elem past end", EL_ERR_TRUNCATED, "'tokenizer.ggml.tokens'[2]",
           patch_u64(&b, L.kv_val[K_ARR_STR] + 12 + 9 + 8, b.n - 100));

    MUTATE("value type 13", EL_ERR_BAD_VALUE, "'t.u16'", patch_u32(&b, L.kv_type[K_U16], 13));
    MUTATE("value type 2^32-1", EL_ERR_BAD_VALUE, "'t.bool'", patch_u32(&b, L.kv_type[K_BOOL], UINT32_MAX));
    MUTATE("array elem type 13", EL_ERR_BAD_VALUE, "'t.arr_i32'", patch_u32(&b, L.kv_val[K_ARR_I32], 13));
    MUTATE("array elem type array", EL_ERR_BAD_VALUE, "'t.arr_i32'", patch_u32(&b, L.kv_val[K_ARR_I32], T_ARR));
    make_file(&b, &L, &(opts){.align = 32, .nested_array = true});
    expect_err(&b, EL_ERR_BAD_VALUE, "'t.nested'", "nested array");
    make_file(&b, &L, &(opts){.align = 32, .dup_key = true});
    expect_err(&b, EL_ERR_BAD_VALUE, "'general.architecture'", "duplicate key");

    MUTATE("alignment 0", EL_ERR_BAD_VALUE, "general.alignment", patch_u32(&b, L.kv_val[K_ALIGN], 0));
    MUTATE("alignment 3", EL_ERR_BAD_VALUE, "general.alignment", patch_u32(&b, L.kv_val[K_ALIGN], 3));
    MUTATE("alignment 2^32-1", EL_ERR_BAD_VALUE, "general.alignment", patch_u32(&b, L.kv_val[K_ALIGN], UINT32_MAX));
    MUTATE("alignment as float", EL_ERR_BAD_VALUE, "general.alignment", patch_u32(&b, L.kv_type[K_ALIGN], T_F32));
    MUTATE("alignment 2^31", EL_ERR_BAD_TENSOR, "past end of file",
           patch_u32(&b, L.kv_val[K_ALIGN], UINT32_C(1) << 31));
    MUTATE("alignment 64", EL_ERR_BAD_TENSOR, "'blk.0.attn_k.weight': offset 96 is not a multiple",
           patch_u32(&b, L.kv_val[K_ALIGN], 64));

    MUTATE("n_dims 5", EL_ERR_BAD_TENSOR, "tensor 'blk.0.attn_q.weight': n_dims 5", patch_u32(&b, L.t_ndims[0], 5));
    MUTATE("n_dims 0", EL_ERR_BAD_TENSOR, "tensor 'output_norm.weight': n_dims 0", patch_u32(&b, L.t_ndims[2], 0));
    MUTATE("n_dims huge", EL_ERR_BAD_TENSOR, "n_dims", patch_u32(&b, L.t_ndims[1], UINT32_MAX));
    MUTATE("ne 0", EL_ERR_BAD_TENSOR, "'blk.0.attn_q.weight': ne[1] = 0", patch_u64(&b, L.t_ne[0] + 8, 0));
    MUTATE("ne negative", EL_ERR_BAD_TENSOR, "'output_norm.weight': ne[2] = -4",
           patch_u64(&b, L.t_ne[2] + 16, (uint64_t)-4));
    MUTATE("ne0 negative", EL_ERR_BAD_TENSOR, "'blk.0.attn_k.weight': ne[0]",
           patch_u64(&b, L.t_ne[1], (uint64_t)INT64_MIN));
    MUTATE("ne overflow", EL_ERR_BAD_TENSOR, "'output_norm.weight': element count overflows",
           patch_u64(&b, L.t_ne[2], UINT64_C(1) << 62); patch_u64(&b, L.t_ne[2] + 8, 4));
    MUTATE("bytes overflow", EL_ERR_BAD_TENSOR, "'output_norm.weight': byte size overflows at ne[1]",
           patch_u32(&b, L.t_type[2], EL_TYPE_F32); patch_u64(&b, L.t_ne[2], UINT64_C(1) << 31);
           patch_u64(&b, L.t_ne[2] + 8, UINT64_C(1) << 31); patch_u64(&b, L.t_ne[2] + 16, 1));
    MUTATE("row bytes overflow", EL_ERR_BAD_TENSOR, "'blk.0.attn_k.weight'",
           patch_u64(&b, L.t_ne[1], UINT64_C(1) << 62));
    MUTATE("huge but representable", EL_ERR_BAD_TENSOR, "'blk.0.attn_k.weight': data",
           patch_u64(&b, L.t_ne[1], UINT64_C(1) << 40));

    MUTATE("type 99", EL_ERR_BAD_TYPE, "'blk.0.attn_k.weight': unknown ggml type id 99", patch_u32(&b, L.t_type[1], 99));
    MUTATE("type 4 (removed)", EL_ERR_BAD_TYPE, "'blk.0.attn_k.weight'", patch_u32(&b, L.t_type[1], 4));
    MUTATE("type 31 (removed)", EL_ERR_BAD_TYPE, "'output_norm.weight'", patch_u32(&b, L.t_type[2], 31));
    MUTATE("type 2^32-1", EL_ERR_BAD_TYPE, "'output_norm.weight'", patch_u32(&b, L.t_type[2], UINT32_MAX));
    MUTATE("Q4_0 ne0 33", EL_ERR_BAD_TENSOR, "'blk.0.attn_q.weight': row length ne[0] = 33",
           patch_u64(&b, L.t_ne[0], 33); patch_u32(&b, L.t_type[0], EL_TYPE_Q4_0));
    MUTATE("Q4_K ne0 128", EL_ERR_BAD_TENSOR, "'blk.0.attn_q.weight'",
           patch_u64(&b, L.t_ne[0], 128); patch_u32(&b, L.t_type[0], EL_TYPE_Q4_K));

    MUTATE("offset past end", EL_ERR_BAD_TENSOR, "'output_norm.weight': data [offset 4096, 32 bytes] runs past end",
           patch_u64(&b, L.t_off[2], 4096));
    MUTATE("offset 2^64-32", EL_ERR_BAD_TENSOR, "'output_norm.weight': data",
           patch_u64(&b, L.t_off[2], UINT64_MAX - 31));
    MUTATE("offset misaligned", EL_ERR_BAD_TENSOR, "'blk.0.attn_k.weight': offset 97 is not a multiple",
           patch_u64(&b, L.t_off[1], 97));
    MUTATE("overlap equal", EL_ERR_BAD_TENSOR, "overlaps", patch_u64(&b, L.t_off[1], 0));
    MUTATE("overlap partial", EL_ERR_BAD_TENSOR, "'blk.0.attn_k.weight': data [offset 64, 32 bytes] overlaps tensor "
           "'blk.0.attn_q.weight'", patch_u64(&b, L.t_off[1], 64));
    MUTATE("overlap later tensor", EL_ERR_BAD_TENSOR, "'output_norm.weight': data [offset 64, 32 bytes] overlaps",
           patch_u64(&b, L.t_off[2], 64));
    MUTATE("duplicate tensor", EL_ERR_BAD_TENSOR, "'blk.0.attn_q.weight': duplicate tensor name",
           b.p[L.t_name[1] + 8 + strlen("blk.0.attn_")] = 'q');

    /* nonsense names stay printable and bounded in messages */
    MUTATE("binary key", EL_ERR_BAD_VALUE, "kv[4] '\?\?\?", memset(b.p + L.kv_key[K_U16] + 8, 0x01, 3);
           patch_u32(&b, L.kv_type[K_U16], 77));
    free(b.p);
}

/* Every single-byte change of the valid file either opens (and then every
 * accessor is safe) or fails with an error — a cheap, deterministic fuzz. */
static void test_byte_flips(void) {
    buf b = {0};
    layout L;
    make_file(&b, &L, &(opts){.align = 32});
    static const uint8_t vals[] = {0x00, 0x01, 0x04, 0x0d, 0x20, 0x7f, 0x80, 0xff};
    int opened = 0, failed = 0, bad = 0;
    for (size_t i = 0; i < b.n; i++) {
        for (size_t v = 0; v < sizeof vals; v++) {
            uint8_t *copy = malloc(b.n);
            memcpy(copy, b.p, b.n);
            copy[i] = vals[v];
            el_error err = {0};
            el_gguf *g = el_gguf_open_buffer(copy, b.n, &err);
            if (g) {
                opened++;
                walk_all(g);
            } else {
                failed++;
                if (err.code == EL_OK || err.msg[0] == 0) bad++;
            }
            el_gguf_close(g);
            free(copy);
        }
    }
    CHECKF(bad == 0, "%d failures without a code/message", bad);
    CHECK(opened > 0 && failed > 0);
    free(b.p);
}

/* ---- 3. opening by path -------------------------------------------------- */

static void test_paths(void) {
    el_error err = {0};
    const char *missing = "/nonexistent/dir/model.gguf";
    CHECK(el_gguf_open(missing, &err) == NULL);
    CHECKF(err.code == EL_ERR_IO && strstr(err.msg, missing) && strstr(err.msg, "No such file"), "%s", err.msg);
    CHECK(el_gguf_open("/tmp", &err) == NULL);
    CHECKF(err.code == EL_ERR_IO && strstr(err.msg, "/tmp") && strstr(err.msg, "directory"), "%s", err.msg);

    char path[] = "/tmp/test_gguf_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return;
    CHECK(el_gguf_open(path, &err) == NULL);
    CHECKF(err.code == EL_ERR_TRUNCATED && strstr(err.msg, path), "empty file: %s", err.msg);

    buf b = {0};
    layout L;
    make_file(&b, &L, &(opts){.align = 32});
    CHECK(write(fd, b.p, b.n) == (ssize_t)b.n);
    el_gguf *g = el_gguf_open(path, &err);
    CHECKF(g != NULL, "%s", err.msg);
    if (g) {
        CHECK(el_gguf_file_size(g) == b.n && memcmp(el_gguf_base(g), b.p, b.n) == 0);
        el_str s;
        CHECK(el_gguf_get_str(g, "general.architecture", &s) && el_str_eq(s, "llama"));
        const el_gguf_tensor *t = el_gguf_find_tensor(g, "output_norm.weight");
        CHECK(t && (const uint8_t *)t->data == el_gguf_base(g) + L.data + L.t_data[2]);
        walk_all(g);
        el_gguf_close(g);
    }
    /* truncated on disk */
    CHECK(ftruncate(fd, (off_t)(b.n - 5)) == 0);
    CHECK(el_gguf_open(path, &err) == NULL && err.code == EL_ERR_BAD_TENSOR);
    close(fd);
    unlink(path);
    free(b.p);
}

/* ---- 4. the reference files ---------------------------------------------- */

static int open_dir_all(const char *rel) {
    char dirpath[4096];
    snprintf(dirpath, sizeof dirpath, "%s", el_test_ref_path(rel));
    DIR *d = opendir(dirpath);
    CHECKF(d != NULL, "opendir %s", dirpath);
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 5, ".gguf") != 0) continue;
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", dirpath, e->d_name);
        el_error err = {0};
        el_gguf *g = el_gguf_open(path, &err);
        CHECKF(g != NULL, "%s: %s %s", e->d_name, el_status_name(err.code), err.msg);
        if (g) {
            CHECKF(el_gguf_version(g) == 3 || el_gguf_version(g) == 2, "%s", e->d_name);
            CHECK(el_gguf_find(g, "general.architecture") != NULL);
            CHECK(el_gguf_get_arr(g, "tokenizer.ggml.tokens", NULL, NULL, NULL));
            walk_all(g);
            el_gguf_close(g);
            n++;
        }
    }
    closedir(d);
    return n;
}

static void test_reference(void) {
    int nm = open_dir_all("models"), nt = open_dir_all("tokenizer");
    CHECKF(nm >= 24, "models opened: %d", nm);
    CHECKF(nt >= 11, "vocab files opened: %d", nt);

    el_error err = {0};
    el_gguf *g = el_gguf_open(el_test_ref_path("models/tiny-llama-Q4_K_M.gguf"), &err);
    CHECKF(g != NULL, "%s", err.msg);
    if (!g) return;
    el_str s;
    uint32_t u;
    float f;
    CHECK(el_gguf_get_str(g, "general.architecture", &s) && el_str_eq(s, "llama"));
    CHECK(el_gguf_get_u32(g, "llama.block_count", &u) && u == 4);
    CHECK(el_gguf_get_u32(g, "llama.embedding_length", &u) && u == 256);
    CHECK(el_gguf_get_u32(g, "llama.attention.head_count", &u) && u == 8);
    CHECK(el_gguf_get_u32(g, "llama.attention.head_count_kv", &u) && u == 4);
    CHECK(el_gguf_get_f32(g, "llama.attention.layer_norm_rms_epsilon", &f) && f > 0 && f < 1e-3f);
    CHECK(el_gguf_n_tensors(g) == 39);
    CHECK(el_gguf_alignment(g) == 32);
    const el_gguf_tensor *t = el_gguf_find_tensor(g, "token_embd.weight");
    CHECK(t && t->type == EL_TYPE_Q4_K && t->n_dims == 2 && t->ne[0] == 256 && t->ne[1] == 4096);
    CHECK(t && t->nbytes == (size_t)4096 * 144);
    el_gguf_vtype at;
    uint64_t n;
    const uint8_t *p;
    CHECK(el_gguf_get_arr(g, "tokenizer.ggml.tokens", &at, &n, &p) && at == EL_GGUF_STRING && n == 4096);
    if (at == EL_GGUF_STRING && n == 4096) {
        el_str first = el_gguf_str_next(&p);
        CHECKF(el_str_eq(first, "<unk>"), "first token '%.*s'", (int)first.len, first.ptr);
    }
    const el_gguf_kv *scores = el_gguf_find(g, "tokenizer.ggml.scores");
    CHECK(scores && scores->arr_type == EL_GGUF_FLOAT32 && scores->arr_n == 4096);
    CHECK(scores && el_gguf_arr_f32(scores, 100, &f));
    el_gguf_close(g);
}

int main(void) {
    test_valid();
    test_truncation();
    test_mutations();
    test_byte_flips();
    test_paths();
    if (el_test_have_ref())
        test_reference();
    else
        printf("reference data absent: skipping the reference-file checks\n");
    int rc = el_test_finish("test_gguf");
    if (!el_test_have_ref() && rc == 0) el_test_skip("fixtures absent (make fixtures)");
    return rc;
}
