/*
 * fuzz_safetensors.c — libFuzzer target for the safetensors header parser
 * (src/convert/safetensors.c).
 *
 * Parses the input with el_st_open_buffer(); on success checks every promise
 * of safetensors.h — known dtype, dims, element count × dtype size = bytes,
 * data inside the input, no two non-empty tensors overlapping, unique names
 * found by lookup — and converts every float tensor to float32 (touching
 * every data byte). On failure the error must carry a code and a message.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert/safetensors.h"

#define REQUIRE(c) do { if (!(c)) { fprintf(stderr, "invariant failed: %s\n", #c); abort(); } } while (0)

static volatile float g_sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    el_error err = {0};
    el_st_set *s = el_st_open_buffer(data, size, &err);
    if (!s) {
        REQUIRE(err.code != EL_OK && err.msg[0]);
        return 0;
    }
    int n = el_st_count(s);
    for (int i = 0; i < n; i++) {
        const el_st_tensor *t = el_st_at(s, i);
        REQUIRE(t && t->name && t->name[0]);
        REQUIRE((unsigned)t->dtype < EL_ST_DTYPE_COUNT);
        REQUIRE(t->n_dims >= 0 && t->n_dims <= EL_ST_MAX_DIMS);
        int64_t nel = 1;
        for (int d = 0; d < t->n_dims; d++) {
            REQUIRE(t->shape[d] >= 0);
            nel *= t->shape[d];
        }
        REQUIRE(nel == t->n_elements);
        REQUIRE((size_t)nel * el_st_dtype_size(t->dtype) == t->nbytes);
        REQUIRE(t->data >= data && t->data + t->nbytes <= data + size);
        REQUIRE(el_st_find(s, t->name) == t);
        for (int j = 0; j < i; j++) {
            const el_st_tensor *u = el_st_at(s, j);
            REQUIRE(strcmp(u->name, t->name) != 0);
            if (t->nbytes && u->nbytes) REQUIRE(t->data + t->nbytes <= u->data || u->data + u->nbytes <= t->data);
        }
        if (el_st_dtype_is_float(t->dtype) && t->n_elements <= (1 << 20)) {
            float *f = malloc(sizeof(float) * (size_t)(t->n_elements ? t->n_elements : 1));
            if (f) {
                REQUIRE(el_st_to_f32(t, f, &err) == 0);
                float acc = 0;
                for (int64_t k = 0; k < t->n_elements; k++) acc += f[k];
                g_sink = acc;
                free(f);
            }
        } else if (!el_st_dtype_is_float(t->dtype)) {
            REQUIRE(el_st_to_f32(t, NULL, &err) != 0 && err.msg[0]);
        }
    }
    el_st_close(s);
    return 0;
}
