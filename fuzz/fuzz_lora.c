/*
 * fuzz_lora.c — libFuzzer target for the LoRA adapter validator
 * (src/runtime/lora.c, el_lora_parse: what el_lora_load runs on a file's bytes).
 *
 * The base is tiny-llama-F16's shapes (4 layers; q/o 256x256, k/v 256->128,
 * gate/up 256->768, down 768->256, output 256->4096; architecture "llama"),
 * given as el_mat shapes without weights. The input is parsed with
 * el_gguf_open_buffer, then validated. A refusal must carry a code and a
 * message. An accepted adapter keeps every promise of lora.h: each adapted
 * weight has rank 1..EL_LORA_MAX_RANK, lora_a [in, r] and lora_b [r, out]
 * matching the base weight, a type the CPU kernels take, and its bytes inside
 * the input (every byte is read, so ASan catches a range past the end);
 * n_pairs counts them; rank_max / in_max / out_max are their maxima; the
 * effective scale of a finite scale is finite. Seeds: adapters
 * tests/tools/gen_lora.py writes for tiny-llama-F16 (`gen_lora.py adapter
 * --base reference/models/tiny-llama-F16.gguf --out seed.gguf
 * --rank 4 --targets q,down`), and the small ones test_lora writes.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "package/gguf.h"
#include "package/types.h"
#include "runtime/lora.h"

#define REQUIRE(c) do { if (!(c)) { fprintf(stderr, "invariant failed: %s\n", #c); abort(); } } while (0)

static const int64_t k_in[EL_LORA_PER_LAYER] = {256, 256, 256, 256, 256, 256, 768};
static const int64_t k_out[EL_LORA_PER_LAYER] = {256, 128, 128, 256, 768, 768, 256};
static el_mat g_base[4][EL_LORA_PER_LAYER], g_out;
static volatile unsigned g_sink;

static const el_mat *base_weight(void *ctx, int il, int slot) {
    (void)ctx;
    if (il < 0) return &g_out;
    if (il >= 4 || slot < 0 || slot >= EL_LORA_PER_LAYER) abort(); /* the validator asked outside the model */
    return &g_base[il][slot];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!g_out.ne0) {
        for (int il = 0; il < 4; il++)
            for (int k = 0; k < EL_LORA_PER_LAYER; k++)
                g_base[il][k] = (el_mat){.type = EL_TYPE_F16, .ne0 = k_in[k], .ne1 = k_out[k], .data = k_in,
                                         .row_bytes = (size_t)k_in[k] * 2};
        g_out = (el_mat){.type = EL_TYPE_F16, .ne0 = 256, .ne1 = 4096, .data = k_out, .row_bytes = 512};
    }
    el_error err = {0};
    el_gguf *g = el_gguf_open_buffer(data, size, &err);
    if (!g) {
        REQUIRE(err.code != EL_OK && err.msg[0]);
        return 0;
    }
    el_lora a;
    memset(&a, 0, sizeof a);
    const int rc = el_lora_parse(g, "llama", 4, base_weight, NULL, &a, &err);
    if (rc) {
        REQUIRE(rc == (int)err.code && err.code != EL_OK && err.msg[0]);
    } else {
        const uint8_t *end = data + size;
        int pairs = 0, rmax = 0;
        int64_t imax = 0, omax = 0;
        for (int i = 0; i < 4 * EL_LORA_PER_LAYER + 1; i++) {
            const el_lora_w *w = &a.w[i];
            if (!w->rank) continue;
            const el_mat *W = i < 4 * EL_LORA_PER_LAYER ? &g_base[i / EL_LORA_PER_LAYER][i % EL_LORA_PER_LAYER] : &g_out;
            REQUIRE(w->rank >= 1 && w->rank <= EL_LORA_MAX_RANK);
            REQUIRE(w->a.ne0 == W->ne0 && w->a.ne1 == w->rank && w->b.ne0 == w->rank && w->b.ne1 == W->ne1);
            const el_mat *m2[2] = {&w->a, &w->b};
            for (int h = 0; h < 2; h++) {
                const el_mat *m = m2[h];
                REQUIRE(m->row_bytes == el_row_size(m->type, m->ne0));
                const uint8_t *p = m->data;
                REQUIRE(p >= data && p + (size_t)m->ne1 * m->row_bytes <= end);
                unsigned s = 0;
                for (size_t b = 0; b < (size_t)m->ne1 * m->row_bytes; b++) s += p[b];
                g_sink += s;
            }
            REQUIRE(isfinite(el_lora_eff_scale(&a, w, 1.0f)));
            pairs++;
            if (w->rank > rmax) rmax = w->rank;
            if (w->a.ne0 > imax) imax = w->a.ne0;
            if (w->b.ne1 > omax) omax = w->b.ne1;
        }
        REQUIRE(pairs == a.n_pairs && pairs > 0 && rmax == a.rank_max && imax == a.in_max && omax == a.out_max);
        REQUIRE(isfinite(a.alpha) && a.alpha >= 0 && !strcmp(a.arch, "llama"));
    }
    el_lora_release(&a);
    el_gguf_close(g);
    return 0;
}
