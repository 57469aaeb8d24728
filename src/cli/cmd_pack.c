/*
 * cmd_pack.c — `edgellm pack HF_DIR -o OUT.gguf [--type T] [--name NAME]
 * [--layout flat|r16] [-q]`: a Hugging Face model directory → one GGUF
 * (src/convert/pack.h); --layout r16 writes the Q4_0 / Q8_0 / Q4_K / Q5_0 matrix weights
 * in their R16 weight layout (package/layout.h), as quantize --layout does.
 *
 * Progress: when stderr is a terminal, a bar redrawn in place (at most ~10
 * times a second) with bytes written, percent and the tensor being
 * converted; otherwise nothing until the end, so logs stay clean. Either way
 * a summary line (tensors per type, file size) ends on stderr; -q drops it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "convert/pack.h"
#include "package/types.h"

typedef struct bar {
    bool tty;
    double last_ms;
    int last_pct;
} bar;

static void on_progress(void *ud, uint64_t done, uint64_t total, const char *tensor) {
    bar *b = ud;
    if (!b->tty) return;
    double now = cli_now_ms();
    int pct = total ? (int)(done * 100 / total) : 100;
    if (done != total && pct == b->last_pct && now - b->last_ms < 100) return;
    b->last_ms = now;
    b->last_pct = pct;
    const int width = 30;
    int fill = pct * width / 100;
    char line[width + 1];
    for (int i = 0; i < width; i++) line[i] = i < fill ? '#' : '.';
    line[width] = 0;
    fprintf(stderr, "\r[%s] %3d%% %8.1f/%.1f MiB  %-32.32s", line, pct, done / 1048576.0, total / 1048576.0, tensor);
    if (done == total) fputc('\n', stderr);
    fflush(stderr);
}

static void pack_usage(FILE *f) {
    fputs("usage: edgellm pack HF_DIR -o OUT.gguf [--type T] [--name NAME] [--layout flat|r16] [-t N] [-q]\n"
          "  HF_DIR       config.json, model.safetensors (or shards + index), tokenizer.json,\n"
          "               tokenizer_config.json, generation_config.json\n"
          "  -o, --output OUT.gguf\n"
          "  --type T     F32, F16 (default), BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K,\n"
          "               Q4_K_M, Q5_K_M (tensor types chosen as llama.cpp's quantizer does)\n"
          "  --name NAME  general.name (default: the directory's name)\n"
          "  --layout L   flat (default) or r16: Q4_0 / Q8_0 / Q4_K / Q5_0 matrix weights of 16k rows as\n"
          "               16-row groups in the order edgellm's AVX-512 kernels read them (as quantize --layout)\n"
          "  -t, --threads N  conversion threads (default 0: all CPUs; the bytes do not depend on it)\n"
          "  -q, --quiet  no progress bar, no summary\n"
          "   or: edgellm pack --lora PEFT_DIR --base HF_DIR -o OUT.gguf [--type F32|F16|BF16]\n"
          "  a PEFT LoRA adapter (adapter_config.json + adapter_model.safetensors) for the HF model\n"
          "  in HF_DIR -> llama.cpp's GGUF LoRA format (run/chat/serve --lora)\n",
          f);
}

/* edgellm pack --lora PEFT_DIR --base HF_DIR -o OUT.gguf [--type F32|F16|BF16] (convert/pack.h el_pack_lora) */
static int pack_lora(const char *peft, const char *base, const char *out, const char *type, bool quiet) {
    if (!base) return cli_usage_error("pack", "--lora needs --base HF_DIR (the model the adapter was trained on)");
    if (!out) return cli_usage_error("pack", "missing -o OUT.gguf");
    el_type t;
    if (!strcmp(type, "F32") || !strcmp(type, "f32")) t = EL_TYPE_F32;
    else if (!strcmp(type, "F16") || !strcmp(type, "f16")) t = EL_TYPE_F16;
    else if (!strcmp(type, "BF16") || !strcmp(type, "bf16")) t = EL_TYPE_BF16;
    else return cli_usage_error("pack", "--lora: --type is F32, F16 or BF16, not '%s'", type);
    el_pack_info info;
    el_error err = {0};
    if (el_pack_lora(peft, base, out, t, &info, &err)) return cli_fail(&err);
    if (!quiet)
        fprintf(stderr, "edgellm pack: LoRA %s -> %s: %s, %d tensors %s, %.2f MiB\n", peft, out, info.arch, info.n_tensors,
                el_type_name(t), info.file_bytes / 1048576.0);
    return CLI_EXIT_OK;
}

int cli_cmd_pack(int argc, char **argv) {
    const char *dir = NULL, *out = NULL, *type = "F16", *name = NULL, *lora = NULL, *base = NULL;
    bool quiet = false, layout_r16 = false;
    int threads = 0;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        const char *val = NULL;
        bool takes = !strcmp(a, "-o") || !strcmp(a, "--output") || !strcmp(a, "--type") || !strcmp(a, "--name") ||
                     !strcmp(a, "-t") || !strcmp(a, "--threads") || !strcmp(a, "--lora") || !strcmp(a, "--base") ||
                     !strcmp(a, "--layout");
        if (takes) {
            if (i + 1 >= argc) return cli_usage_error("pack", "option '%s' needs a value", a);
            val = argv[++i];
        }
        if (!strcmp(a, "-o") || !strcmp(a, "--output")) out = val;
        else if (!strcmp(a, "--type")) type = val;
        else if (!strcmp(a, "--name")) name = val;
        else if (!strcmp(a, "--lora")) lora = val;
        else if (!strcmp(a, "--base")) base = val;
        else if (!strcmp(a, "--layout")) {
            if (strcmp(val, "r16") && strcmp(val, "flat"))
                return cli_usage_error("pack", "--layout: expected flat or r16, got '%s'", val);
            layout_r16 = !strcmp(val, "r16");
        }
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            char *end;
            long n = strtol(val, &end, 10);
            if (end == val || *end || n < 0 || n > 1024) return cli_usage_error("pack", "--threads: expected 0..1024, got '%s'", val);
            threads = (int)n;
        }
        else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) quiet = true;
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) { pack_usage(stdout); return CLI_EXIT_OK; }
        else if (a[0] == '-' && a[1]) return cli_usage_error("pack", "unknown option '%s'", a);
        else if (!dir) dir = a;
        else return cli_usage_error("pack", "unexpected argument '%s' (one HF_DIR)", a);
    }
    if (lora) {
        if (dir) return cli_usage_error("pack", "--lora PEFT_DIR converts an adapter: no HF_DIR as well");
        return pack_lora(lora, base, out, type, quiet);
    }
    if (base) return cli_usage_error("pack", "--base goes with --lora");
    if (!dir) return cli_usage_error("pack", "missing HF_DIR");
    if (!out) return cli_usage_error("pack", "missing -o OUT.gguf");
    el_pack_params p = el_pack_default_params();
    if (el_ftype_parse(type, &p.ftype) != 0) return cli_usage_error("pack", "--type: unknown type '%s'", type);
    p.name = name;
    p.n_threads = threads;
    p.layout_r16 = layout_r16;
    bar b = {.tty = !quiet && isatty(STDERR_FILENO), .last_ms = 0, .last_pct = -1};
    p.progress = on_progress;
    p.progress_ud = &b;
    el_pack_info info;
    el_error err = {0};
    double t0 = cli_now_ms();
    if (el_pack(dir, out, &p, &info, &err) != 0) {
        if (b.tty) fputc('\n', stderr);
        return cli_fail(&err);
    }
    if (!quiet) {
        fprintf(stderr, "edgellm pack: %s -> %s: %s, %d tensors (", dir, out, info.arch, info.n_tensors);
        bool first = true;
        for (int t = 0; t < 64; t++)
            if (info.n_by_type[t]) {
                fprintf(stderr, "%s%d %s", first ? "" : ", ", info.n_by_type[t], el_type_name(t));
                first = false;
            }
        if (info.n_layout) fprintf(stderr, "; %d in layout r16", info.n_layout);
        fprintf(stderr, "), vocab %d, %.2f MiB, %s, %.1f s\n", info.n_vocab, info.file_bytes / 1048576.0, el_ftype_name(p.ftype),
                (cli_now_ms() - t0) / 1e3);
    }
    return CLI_EXIT_OK;
}
