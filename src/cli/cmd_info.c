/*
 * cmd_info.c — `edgellm info`: a GGUF file's metadata and tensor table
 * (read with the GGUF reader directly), totals by type, and what a session
 * of -c CTX tokens would need.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/kernels.h"
#include "backend/cpu/layout.h"
#include "runtime/model.h"
#include "cli/cli.h"
#include "package/gguf.h"
#include "package/types.h"

#define STR_SHOW 80   /* bytes of a string shown without --verbose */
#define ARR_SHOW 5    /* array items shown */

static double mib(double b) { return b / (1024.0 * 1024.0); }

/* Prints s escaped (control characters as \n, \xHH), at most max bytes
 * (cut on a UTF-8 boundary) followed by an ellipsis and the full length. */
static void print_str(el_str s, size_t max) {
    size_t n = s.len;
    bool cut = false;
    if (max && n > max) {
        n = max;
        while (n > 0 && ((unsigned char)s.ptr[n] & 0xC0) == 0x80) n--;
        cut = true;
    }
    putchar('"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s.ptr[i];
        if (c == '\n') fputs("\\n", stdout);
        else if (c == '\t') fputs("\\t", stdout);
        else if (c == '\r') fputs("\\r", stdout);
        else if (c == '"') fputs("\\\"", stdout);
        else if (c == '\\') fputs("\\\\", stdout);
        else if (c < 0x20 || c == 0x7f) printf("\\x%02x", c);
        else putchar(c);
    }
    putchar('"');
    if (cut) printf("... (%" PRIu64 " bytes)", s.len);
}

static void print_scalar(el_gguf_vtype t, const uint8_t *d) {
    switch (t) {
    case EL_GGUF_UINT8: printf("%u", (unsigned)d[0]); break;
    case EL_GGUF_INT8: printf("%d", (int)(int8_t)d[0]); break;
    case EL_GGUF_UINT16: { uint16_t v; memcpy(&v, d, 2); printf("%u", (unsigned)v); break; }
    case EL_GGUF_INT16: { int16_t v; memcpy(&v, d, 2); printf("%d", (int)v); break; }
    case EL_GGUF_UINT32: { uint32_t v; memcpy(&v, d, 4); printf("%" PRIu32, v); break; }
    case EL_GGUF_INT32: { int32_t v; memcpy(&v, d, 4); printf("%" PRId32, v); break; }
    case EL_GGUF_UINT64: { uint64_t v; memcpy(&v, d, 8); printf("%" PRIu64, v); break; }
    case EL_GGUF_INT64: { int64_t v; memcpy(&v, d, 8); printf("%" PRId64, v); break; }
    case EL_GGUF_FLOAT32: { float v; memcpy(&v, d, 4); printf("%g", (double)v); break; }
    case EL_GGUF_FLOAT64: { double v; memcpy(&v, d, 8); printf("%g", v); break; }
    case EL_GGUF_BOOL: fputs(d[0] ? "true" : "false", stdout); break;
    default: printf("<%s>", el_gguf_vtype_name(t)); break;
    }
}

static void print_kv(const el_gguf *g, const el_gguf_kv *kv, bool verbose) {
    char *key = el_str_dup(kv->key);
    if (!key) return;
    printf("  %s = ", key);
    if (kv->type == EL_GGUF_STRING) {
        el_str s;
        if (el_gguf_get_str(g, key, &s)) {
            if (verbose && strcmp(key, "tokenizer.chat_template") == 0)
                printf("<<<\n%.*s\n>>>", (int)(s.len > (uint64_t)INT32_MAX ? INT32_MAX : s.len), s.ptr);
            else
                print_str(s, verbose ? 0 : STR_SHOW);
        } else {
            fputs("<string?>", stdout);
        }
    } else if (kv->type == EL_GGUF_ARRAY) {
        printf("[%s \xc3\x97 %" PRIu64 "]", el_gguf_vtype_name(kv->arr_type), kv->arr_n);
        uint64_t show = kv->arr_n < ARR_SHOW ? kv->arr_n : ARR_SHOW;
        if (show && kv->arr_type != EL_GGUF_ARRAY) {
            putchar(' ');
            const uint8_t *p = kv->data;
            for (uint64_t i = 0; i < show; i++) {
                if (i) fputs(", ", stdout);
                if (kv->arr_type == EL_GGUF_STRING) {
                    print_str(el_gguf_str_next(&p), 40);
                } else {
                    print_scalar(kv->arr_type, kv->data + i * el_gguf_vtype_size(kv->arr_type));
                }
            }
            if (kv->arr_n > show) fputs(", ...", stdout);
        }
    } else {
        print_scalar(kv->type, kv->data);
    }
    putchar('\n');
    free(key);
}

static void fmt_count(char *buf, size_t cap, double v) {
    if (v >= 1e9) snprintf(buf, cap, "%.2f B", v / 1e9);
    else if (v >= 1e6) snprintf(buf, cap, "%.2f M", v / 1e6);
    else if (v >= 1e3) snprintf(buf, cap, "%.2f K", v / 1e3);
    else snprintf(buf, cap, "%.0f", v);
}

int cli_cmd_info(cli_opts *o) {
    el_error err = {0};
    el_gguf *g = el_gguf_open(o->model, &err);
    if (!g) return cli_fail(&err);

    size_t fsize = el_gguf_file_size(g);
    printf("file: %s\n", o->model);
    printf("gguf version %" PRIu32 ", alignment %zu, %zu bytes (%.2f MiB)\n",
           el_gguf_version(g), el_gguf_alignment(g), fsize, mib((double)fsize));

    int64_t nkv = el_gguf_n_kv(g);
    printf("\nmetadata (%" PRId64 " keys):\n", nkv);
    for (int64_t i = 0; i < nkv; i++) print_kv(g, el_gguf_kv_at(g, i), o->verbose);

    int64_t nt = el_gguf_n_tensors(g);
    size_t name_w = 4;
    for (int64_t i = 0; i < nt; i++) {
        const el_gguf_tensor *t = el_gguf_tensor_at(g, i);
        if (t->name.len > name_w && t->name.len < 96) name_w = (size_t)t->name.len;
    }
    printf("\ntensors (%" PRId64 "):\n", nt);
    if (nt) printf("  %-*s  %-7s  %-26s  %12s\n", (int)name_w, "name", "type", "shape", "bytes");

    uint64_t n_params = 0, n_bytes = 0;
    uint64_t by_type_bytes[EL_TYPE_COUNT + EL_LAYOUT_COUNT] = {0}, by_type_params[EL_TYPE_COUNT + EL_LAYOUT_COUNT] = {0};
    int by_type_n[EL_TYPE_COUNT + EL_LAYOUT_COUNT] = {0};
    for (int64_t i = 0; i < nt; i++) {
        const el_gguf_tensor *t = el_gguf_tensor_at(g, i);
        char shape[96];
        size_t off = 0;
        uint64_t elems = 1;
        off += (size_t)snprintf(shape + off, sizeof shape - off, "[");
        for (int d = 0; d < t->n_dims && off < sizeof shape; d++) {
            off += (size_t)snprintf(shape + off, sizeof shape - off, d ? ", %" PRId64 : "%" PRId64, t->ne[d]);
        }
        if (off < sizeof shape) snprintf(shape + off, sizeof shape - off, "]");
        for (int d = 0; d < 4; d++) elems *= (uint64_t)(t->ne[d] > 0 ? t->ne[d] : 1);
        printf("  %-*.*s  %-7s  %-26s  %12zu\n", (int)name_w, (int)(t->name.len < 4096 ? t->name.len : 4096),
               t->name.ptr, el_type_name(t->type), shape, t->nbytes);
        n_params += elems;
        n_bytes += t->nbytes;
        const int fl = el_layout_of_type(t->type); /* the layout types after the table's */
        int ti = (t->type >= 0 && t->type < EL_TYPE_COUNT) ? t->type : fl ? EL_TYPE_COUNT + fl : EL_TYPE_COUNT;
        by_type_bytes[ti] += t->nbytes;
        by_type_params[ti] += elems;
        by_type_n[ti]++;
    }

    char cnt[32];
    fmt_count(cnt, sizeof cnt, (double)n_params);
    printf("\ntotals:\n");
    printf("  parameters: %" PRIu64 " (%s)\n", n_params, cnt);
    printf("  tensor bytes: %" PRIu64 " (%.2f MiB, %.2f bits per weight)\n", n_bytes, mib((double)n_bytes),
           n_params ? 8.0 * (double)n_bytes / (double)n_params : 0.0);
    for (int ti = 0; ti < EL_TYPE_COUNT + EL_LAYOUT_COUNT; ti++) {
        if (!by_type_n[ti]) continue;
        printf("  %-7s %4d tensors, %12" PRIu64 " params, %12" PRIu64 " bytes (%.2f MiB)\n",
               ti < EL_TYPE_COUNT ? el_type_name(ti)
               : ti > EL_TYPE_COUNT ? el_type_name(el_layout_type((el_layout)(ti - EL_TYPE_COUNT)))
                                    : "?",
               by_type_n[ti], by_type_params[ti], by_type_bytes[ti],
               mib((double)by_type_bytes[ti]));
    }
    el_gguf_close(g);
    /* the CPU kernels this process computes them with (backend/cpu/kernels.h) */
    printf("  cpu kernels: %s, Q8_0/Q5_0/Q6_K in %s order (EL_KERNEL_ORDER=llama|block)\n",
           el_cpu_level_name(el_cpu_kernels_level()), el_cpu_order_name(el_cpu_kernels_order()));

    /* Memory of a session: needs the model itself. */
    printf("\nmemory:\n");
    printf("  model mapped: %zu bytes (%.2f MiB)\n", fsize, mib((double)fsize));
    el_model *m = cli_load_model(o, false, &err);
    if (!m) {
        printf("  session: unavailable (%s: %s)\n", el_status_name(err.code), err.msg);
        return fflush(stdout) == 0 ? CLI_EXIT_OK : CLI_EXIT_ERROR;
    }
    int n_ctx = cli_ctx_for(o, m);
    int n_batch = o->n_batch > 0 ? o->n_batch : el_session_default_params().n_batch;
    if (n_batch <= 0 || n_batch > n_ctx) n_batch = n_ctx;
    size_t sb = el_session_bytes(m, n_ctx, n_batch);
    printf("  architecture: %s, vocab %d, train context %d\n", el_model_arch(m), el_model_n_vocab(m),
           el_model_n_ctx_train(m));
    /* matrices in a kernel's layout (backend/cpu/layout.h): as the file stores them (quantize --layout), or
     * repacked at load (EL_WEIGHT_LAYOUT=r16); a file's layout the CPU does not run is unpacked to flat rows */
    printf("  weight layout: %s", el_layout_set_name(m->layout_set));
    if (m->layout_file_mats) printf(", %d matrices as the file stores them (mapped, no copy)", m->layout_file_mats);
    if (m->layout_unpacked)
        printf(", %d unpacked to flat rows, %zu bytes (%.2f MiB)", m->layout_unpacked, m->layout_unpacked_bytes,
               mib((double)m->layout_unpacked_bytes));
    if (m->layout_mats) printf(", %d matrices repacked, %zu bytes (%.2f MiB) beside the mapped file", m->layout_mats,
                               m->layout_bytes, mib((double)m->layout_bytes));
    putchar('\n');
    printf("  session (context %d, batch %d): %zu bytes (%.2f MiB)\n", n_ctx, n_batch, sb, mib((double)sb));
    printf("  total: %.2f MiB\n", mib((double)fsize + (double)m->owned_bytes + (double)sb));
    el_model_free(m);
    return fflush(stdout) == 0 ? CLI_EXIT_OK : CLI_EXIT_ERROR;
}
