/*
 * test_gguf_write.c — the GGUF writer round-trips through the validating
 * reader: every metadata value type (and string/scalar arrays), tensor infos
 * of several types and shapes, data bytes, default and custom alignment;
 * misuse is refused and an unfinished file never appears at the target path.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "package/gguf.h"
#include "package/gguf_write.h"
#include "package/types.h"
#include "testutil.h"

static char g_dir[] = "/tmp/el_test_gguf_write_XXXXXX";

static void fill(uint8_t *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)((i * 131u + seed * 7u + (i >> 8)) & 0xff);
}

static void roundtrip(uint32_t alignment) {
    char path[256];
    snprintf(path, sizeof path, "%s/rt%u.gguf", g_dir, alignment);
    el_gguf_writer *w = el_gguf_writer_new();
    CHECK(w);
    if (alignment) CHECK(el_gguf_w_u32(w, "general.alignment", alignment) == 0);
    CHECK(el_gguf_w_str(w, "general.architecture", "llama") == 0);
    CHECK(el_gguf_w_u8(w, "t.u8", 200) == 0);
    CHECK(el_gguf_w_i8(w, "t.i8", -5) == 0);
    CHECK(el_gguf_w_u16(w, "t.u16", 60000) == 0);
    CHECK(el_gguf_w_i16(w, "t.i16", -30000) == 0);
    CHECK(el_gguf_w_u32(w, "t.u32", 4000000000u) == 0);
    CHECK(el_gguf_w_i32(w, "t.i32", -2000000000) == 0);
    CHECK(el_gguf_w_u64(w, "t.u64", UINT64_C(1) << 40) == 0);
    CHECK(el_gguf_w_i64(w, "t.i64", -(INT64_C(1) << 40)) == 0);
    CHECK(el_gguf_w_f32(w, "t.f32", 0.125f) == 0);
    CHECK(el_gguf_w_f64(w, "t.f64", 1e300) == 0);
    CHECK(el_gguf_w_bool(w, "t.bool", true) == 0);
    CHECK(el_gguf_w_strn(w, "t.str", "a\0b", 3) == 0);
    const char *strs[] = {"hello", "", "\xe2\x96\x81world", "<0x0A>"};
    CHECK(el_gguf_w_arr_str(w, "t.strs", strs, NULL, 4) == 0);
    float fa[5] = {1.5f, -2.0f, 0.0f, 1e-9f, -1000.0f};
    CHECK(el_gguf_w_arr(w, "t.f32s", EL_GGUF_FLOAT32, fa, 5) == 0);
    int32_t ia[3] = {1, 3, 6};
    CHECK(el_gguf_w_arr(w, "t.i32s", EL_GGUF_INT32, ia, 3) == 0);
    uint8_t ba[2] = {1, 0};
    CHECK(el_gguf_w_arr(w, "t.bools", EL_GGUF_BOOL, ba, 2) == 0);
    CHECK(el_gguf_w_arr(w, "t.empty", EL_GGUF_UINT32, NULL, 0) == 0);
    /* misuse: duplicate key is refused but leaves the writer usable only for reporting */
    el_gguf_writer *w2 = el_gguf_writer_new();
    CHECK(el_gguf_w_u32(w2, "k", 1) == 0);
    CHECK(el_gguf_w_u32(w2, "k", 2) != 0);
    CHECK(strstr(el_gguf_w_error(w2), "duplicate") != NULL);
    CHECK(el_gguf_w_add_tensor(w2, "x", EL_TYPE_Q8_0, 1, (int64_t[]){33}) != 0); /* sticky error */
    el_gguf_writer_free(w2);

    int64_t ne_a[2] = {7, 3}, ne_b[1] = {5}, ne_c[3] = {64, 2, 2}, ne_d[2] = {32, 4};
    CHECK(el_gguf_w_add_tensor(w, "a", EL_TYPE_F32, 2, ne_a) == 0);
    CHECK(el_gguf_w_add_tensor(w, "b", EL_TYPE_F16, 1, ne_b) == 0);
    CHECK(el_gguf_w_add_tensor(w, "c", EL_TYPE_Q8_0, 3, ne_c) == 0);
    CHECK(el_gguf_w_add_tensor(w, "d", EL_TYPE_BF16, 2, ne_d) == 0);
    CHECK(el_gguf_w_n_tensors(w) == 4);
    size_t nb[4] = {7 * 3 * 4, 5 * 2, 2 * 34 * 4, 32 * 4 * 2};
    for (int i = 0; i < 4; i++) CHECK(el_gguf_w_tensor_nbytes(w, i) == nb[i]);
    uint64_t expect_size = el_gguf_w_file_size(w);
    el_error err = {0};
    CHECK(el_gguf_w_begin(w, path, &err) == 0);
    uint8_t *bufs[4];
    for (int i = 0; i < 4; i++) {
        bufs[i] = malloc(nb[i]);
        fill(bufs[i], nb[i], (unsigned)i + 1);
    }
    /* the data of "a" in two pieces; "b" and "c" in one call together */
    CHECK(el_gguf_w_tensor_data(w, bufs[0], 10, &err) == 0);
    CHECK(el_gguf_w_tensor_data(w, bufs[0] + 10, nb[0] - 10, &err) == 0);
    uint8_t *bc = malloc(nb[1] + nb[2]);
    memcpy(bc, bufs[1], nb[1]);
    memcpy(bc + nb[1], bufs[2], nb[2]);
    CHECK(el_gguf_w_tensor_data(w, bc, nb[1] + nb[2], &err) == 0);
    free(bc);
    CHECK(access(path, F_OK) != 0); /* not there until finished */
    CHECK(el_gguf_w_tensor_data(w, bufs[3], nb[3], &err) == 0);
    CHECK(el_gguf_w_tensor_data(w, bufs[3], 1, &err) != 0); /* past the end */
    el_gguf_writer_free(w);
    CHECK(access(path, F_OK) != 0); /* the failed writer left nothing */

    /* again, cleanly */
    w = el_gguf_writer_new();
    if (alignment) el_gguf_w_u32(w, "general.alignment", alignment);
    el_gguf_w_str(w, "general.architecture", "llama");
    el_gguf_w_u8(w, "t.u8", 200);
    el_gguf_w_i8(w, "t.i8", -5);
    el_gguf_w_u16(w, "t.u16", 60000);
    el_gguf_w_i16(w, "t.i16", -30000);
    el_gguf_w_u32(w, "t.u32", 4000000000u);
    el_gguf_w_i32(w, "t.i32", -2000000000);
    el_gguf_w_u64(w, "t.u64", UINT64_C(1) << 40);
    el_gguf_w_i64(w, "t.i64", -(INT64_C(1) << 40));
    el_gguf_w_f32(w, "t.f32", 0.125f);
    el_gguf_w_f64(w, "t.f64", 1e300);
    el_gguf_w_bool(w, "t.bool", true);
    el_gguf_w_strn(w, "t.str", "a\0b", 3);
    el_gguf_w_arr_str(w, "t.strs", strs, NULL, 4);
    el_gguf_w_arr(w, "t.f32s", EL_GGUF_FLOAT32, fa, 5);
    el_gguf_w_arr(w, "t.i32s", EL_GGUF_INT32, ia, 3);
    el_gguf_w_arr(w, "t.bools", EL_GGUF_BOOL, ba, 2);
    el_gguf_w_arr(w, "t.empty", EL_GGUF_UINT32, NULL, 0);
    el_gguf_w_add_tensor(w, "a", EL_TYPE_F32, 2, ne_a);
    el_gguf_w_add_tensor(w, "b", EL_TYPE_F16, 1, ne_b);
    el_gguf_w_add_tensor(w, "c", EL_TYPE_Q8_0, 3, ne_c);
    el_gguf_w_add_tensor(w, "d", EL_TYPE_BF16, 2, ne_d);
    CHECK(el_gguf_w_begin(w, path, &err) == 0);
    for (int i = 0; i < 4; i++) CHECK(el_gguf_w_tensor_data(w, bufs[i], nb[i], &err) == 0);
    CHECKF(el_gguf_w_finish(w, &err) == 0, "%s", err.msg);
    el_gguf_writer_free(w);

    struct stat st;
    CHECK(stat(path, &st) == 0 && (uint64_t)st.st_size == expect_size);
    el_gguf *g = el_gguf_open(path, &err);
    CHECKF(g != NULL, "%s", err.msg);
    if (!g) return;
    CHECK(el_gguf_version(g) == 3);
    CHECK(el_gguf_alignment(g) == (alignment ? alignment : 32));
    CHECK(el_gguf_n_kv(g) == 18 + (alignment ? 1 : 0));
    el_str s;
    CHECK(el_gguf_get_str(g, "general.architecture", &s) && el_str_eq(s, "llama"));
    const el_gguf_kv *kv;
#define SCALAR(key, T, vt, expect) do { kv = el_gguf_find(g, key); CHECK(kv && kv->type == vt); \
        if (kv) { T v_; memcpy(&v_, kv->data, sizeof v_); CHECK(v_ == (expect)); } } while (0)
    SCALAR("t.u8", uint8_t, EL_GGUF_UINT8, 200);
    SCALAR("t.i8", int8_t, EL_GGUF_INT8, -5);
    SCALAR("t.u16", uint16_t, EL_GGUF_UINT16, 60000);
    SCALAR("t.i16", int16_t, EL_GGUF_INT16, -30000);
    SCALAR("t.u32", uint32_t, EL_GGUF_UINT32, 4000000000u);
    SCALAR("t.i32", int32_t, EL_GGUF_INT32, -2000000000);
    SCALAR("t.u64", uint64_t, EL_GGUF_UINT64, UINT64_C(1) << 40);
    SCALAR("t.i64", int64_t, EL_GGUF_INT64, -(INT64_C(1) << 40));
    SCALAR("t.f32", float, EL_GGUF_FLOAT32, 0.125f);
    SCALAR("t.f64", double, EL_GGUF_FLOAT64, 1e300);
    SCALAR("t.bool", uint8_t, EL_GGUF_BOOL, 1);
#undef SCALAR
    CHECK(el_gguf_get_str(g, "t.str", &s) && s.len == 3 && memcmp(s.ptr, "a\0b", 3) == 0);
    el_gguf_vtype at;
    uint64_t an;
    const uint8_t *ap;
    CHECK(el_gguf_get_arr(g, "t.strs", &at, &an, &ap) && at == EL_GGUF_STRING && an == 4);
    if (at == EL_GGUF_STRING && an == 4)
        for (int i = 0; i < 4; i++) {
            el_str e = el_gguf_str_next(&ap);
            CHECK(e.len == strlen(strs[i]) && memcmp(e.ptr, strs[i], e.len) == 0);
        }
    kv = el_gguf_find(g, "t.f32s");
    CHECK(kv && kv->arr_type == EL_GGUF_FLOAT32 && kv->arr_n == 5);
    for (int i = 0; kv && i < 5; i++) {
        float f;
        CHECK(el_gguf_arr_f32(kv, (uint64_t)i, &f) && f == fa[i]);
    }
    kv = el_gguf_find(g, "t.i32s");
    CHECK(kv && kv->arr_type == EL_GGUF_INT32 && kv->arr_n == 3);
    for (int i = 0; kv && i < 3; i++) {
        int64_t v;
        CHECK(el_gguf_arr_i64(kv, (uint64_t)i, &v) && v == ia[i]);
    }
    kv = el_gguf_find(g, "t.bools");
    CHECK(kv && kv->arr_type == EL_GGUF_BOOL && kv->arr_n == 2 && kv->data[0] == 1 && kv->data[1] == 0);
    kv = el_gguf_find(g, "t.empty");
    CHECK(kv && kv->arr_type == EL_GGUF_UINT32 && kv->arr_n == 0);
    /* key order is the order of insertion */
    kv = el_gguf_kv_at(g, alignment ? 1 : 0);
    CHECK(kv && el_str_eq(kv->key, "general.architecture"));

    CHECK(el_gguf_n_tensors(g) == 4);
    const char *names[4] = {"a", "b", "c", "d"};
    const int types[4] = {EL_TYPE_F32, EL_TYPE_F16, EL_TYPE_Q8_0, EL_TYPE_BF16};
    const int64_t *nes[4] = {ne_a, ne_b, ne_c, ne_d};
    const int nds[4] = {2, 1, 3, 2};
    for (int i = 0; i < 4; i++) {
        const el_gguf_tensor *t = el_gguf_tensor_at(g, i);
        CHECK(t && el_str_eq(t->name, names[i]) && t->type == types[i] && t->n_dims == nds[i]);
        if (!t) continue;
        for (int j = 0; j < nds[i]; j++) CHECK(t->ne[j] == nes[i][j]);
        CHECK(t->nbytes == nb[i]);
        CHECK(t->offset % el_gguf_alignment(g) == 0);
        CHECK(memcmp(t->data, bufs[i], nb[i]) == 0);
    }
    el_gguf_close(g);
    for (int i = 0; i < 4; i++) free(bufs[i]);
    unlink(path);
}

static void errors(void) {
    el_gguf_writer *w = el_gguf_writer_new();
    CHECK(el_gguf_w_u32(w, "general.alignment", 48) != 0); /* not a power of two */
    el_gguf_writer_free(w);

    w = el_gguf_writer_new();
    CHECK(el_gguf_w_add_tensor(w, "q", EL_TYPE_Q4_0, 2, (int64_t[]){33, 2}) != 0); /* row not a block multiple */
    el_gguf_writer_free(w);

    w = el_gguf_writer_new();
    CHECK(el_gguf_w_add_tensor(w, "x", 99, 1, (int64_t[]){4}) != 0); /* unknown type */
    el_gguf_writer_free(w);

    w = el_gguf_writer_new();
    CHECK(el_gguf_w_add_tensor(w, "x", EL_TYPE_F32, 1, (int64_t[]){4}) == 0);
    CHECK(el_gguf_w_add_tensor(w, "x", EL_TYPE_F32, 1, (int64_t[]){4}) != 0); /* duplicate */
    el_gguf_writer_free(w);

    /* finish with missing data: error, nothing at the target */
    char path[256];
    snprintf(path, sizeof path, "%s/short.gguf", g_dir);
    w = el_gguf_writer_new();
    el_gguf_w_add_tensor(w, "x", EL_TYPE_F32, 1, (int64_t[]){4});
    el_error err = {0};
    CHECK(el_gguf_w_begin(w, path, &err) == 0);
    float f[3] = {0};
    CHECK(el_gguf_w_tensor_data(w, f, sizeof f, &err) == 0);
    CHECK(el_gguf_w_finish(w, &err) != 0 && strstr(err.msg, "'x'") != NULL);
    el_gguf_writer_free(w);
    CHECK(access(path, F_OK) != 0);

    /* a directory that does not exist */
    w = el_gguf_writer_new();
    CHECK(el_gguf_w_begin(w, "/nonexistent-dir-el/x.gguf", &err) == EL_ERR_IO);
    el_gguf_writer_free(w);

    /* an empty file (no kv, no tensors) is still a valid GGUF */
    snprintf(path, sizeof path, "%s/empty.gguf", g_dir);
    w = el_gguf_writer_new();
    CHECK(el_gguf_w_begin(w, path, &err) == 0 && el_gguf_w_finish(w, &err) == 0);
    el_gguf_writer_free(w);
    el_gguf *g = el_gguf_open(path, &err);
    CHECKF(g && el_gguf_n_kv(g) == 0 && el_gguf_n_tensors(g) == 0, "%s", err.msg);
    el_gguf_close(g);
    unlink(path);
}

int main(void) {
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    roundtrip(0);
    roundtrip(64);
    roundtrip(4096);
    errors();
    rmdir(g_dir);
    return el_test_finish("test_gguf_write");
}
