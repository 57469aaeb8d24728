/*
 * cmd_quantize.c — `edgellm quantize IN.gguf OUT.gguf TYPE [-t N]
 * [--allow-requantize] [--layout flat|r16] [-q]`: llama-quantize's job with edgellm's own
 * quantizer (src/package/requantize.h): the same tensor types and bytes as
 * llama.cpp for the same input and type. TYPE: F32, F16, BF16, Q8_0, Q4_0,
 * Q4_1, Q5_0, Q5_1, Q4_K (= Q4_K_S), Q5_K (= Q5_K_S), Q6_K, Q4_K_M, Q5_K_M,
 * MXFP4_MOE (experts MXFP4, the rest Q8_0) and MXFP4 (= llama-quantize --pure
 * MXFP4_MOE: every quantized tensor MXFP4).
 * --layout r16 writes the matrix weights that come out Q4_0 / Q8_0 / Q4_K / Q5_0 in their
 * R16 weight layout (package/layout.h), which edgellm maps and runs with no
 * copy; --layout flat (the default) writes flat rows, unpacking a laid-out IN.
 * A summary line (tensors per type, sizes, time) ends on stderr; -q drops it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "package/requantize.h"
#include "package/types.h"

static void quantize_usage(FILE *f) {
    fputs("usage: edgellm quantize IN.gguf OUT.gguf TYPE [-t N] [--allow-requantize] [--layout flat|r16] [-q]\n"
          "  TYPE    F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K (Q4_K_S), Q5_K (Q5_K_S), Q6_K,\n"
          "          Q4_K_M, Q5_K_M, MXFP4_MOE: tensor types chosen as llama-quantize does, the same bytes;\n"
          "          MXFP4: every 2-D weight MXFP4, as llama-quantize --pure MXFP4_MOE\n"
          "  -t, --threads N     threads (default 0: all CPUs; the bytes do not depend on it)\n"
          "  --allow-requantize  accept an already quantized IN (its error compounds); to F32/F16/BF16\n"
          "                      this is an exact dequantization\n"
          "  --layout L          flat (default) or r16: Q4_0 / Q8_0 / Q4_K / Q5_0 matrix weights of 16k\n"
          "                      rows stored as 16-row groups in the order edgellm's AVX-512 kernels read\n"
          "                      them (types Q4_0_R16 / Q8_0_R16 / Q4_K_R16 / Q5_0_R16, edgellm's own:\n"
          "                      llama.cpp cannot read such a file); the same bytes permuted. With\n"
          "                      --allow-requantize and IN's own TYPE, every tensor keeps its type: the\n"
          "                      layout changes, exactly\n"
          "  -q, --quiet         no summary\n",
          f);
}

static void on_progress(void *ud, uint64_t done, uint64_t total, const char *tensor) {
    const bool *tty = ud;
    if (!*tty) return;
    fprintf(stderr, "\r%3d%% %8.1f/%.1f MiB  %-40.40s", total ? (int)(done * 100 / total) : 100, done / 1048576.0,
            total / 1048576.0, tensor);
    if (done == total) fputc('\n', stderr);
    fflush(stderr);
}

int cli_cmd_quantize(int argc, char **argv) {
    const char *pos[3] = {NULL, NULL, NULL};
    int npos = 0, threads = 0;
    bool quiet = false, allow = false, layout_r16 = false;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            if (i + 1 >= argc) return cli_usage_error("quantize", "option '%s' needs a value", a);
            const char *val = argv[++i];
            char *end;
            long n = strtol(val, &end, 10);
            if (end == val || *end || n < 0 || n > 1024)
                return cli_usage_error("quantize", "--threads: expected 0..1024, got '%s'", val);
            threads = (int)n;
        } else if (!strcmp(a, "--layout")) {
            if (i + 1 >= argc) return cli_usage_error("quantize", "option '%s' needs a value", a);
            const char *val = argv[++i];
            if (!strcmp(val, "r16")) layout_r16 = true;
            else if (!strcmp(val, "flat")) layout_r16 = false;
            else return cli_usage_error("quantize", "--layout: expected flat or r16, got '%s'", val);
        } else if (!strcmp(a, "--allow-requantize")) allow = true;
        else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) quiet = true;
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) { quantize_usage(stdout); return CLI_EXIT_OK; }
        else if (a[0] == '-' && a[1]) return cli_usage_error("quantize", "unknown option '%s'", a);
        else if (npos < 3) pos[npos++] = a;
        else return cli_usage_error("quantize", "unexpected argument '%s' (IN.gguf OUT.gguf TYPE)", a);
    }
    if (npos < 3) return cli_usage_error("quantize", "expected IN.gguf OUT.gguf TYPE");
    el_requant_params p = el_requant_default_params();
    if (el_ftype_parse(pos[2], &p.ftype) != 0) return cli_usage_error("quantize", "unknown TYPE '%s'", pos[2]);
    if (!strcmp(pos[0], pos[1])) return cli_usage_error("quantize", "OUT.gguf must differ from IN.gguf");
    p.n_threads = threads;
    p.allow_requantize = allow;
    p.layout_r16 = layout_r16;
    bool tty = !quiet && isatty(STDERR_FILENO);
    p.progress = on_progress;
    p.progress_ud = &tty;
    el_requant_info info;
    el_error err = {0};
    double t0 = cli_now_ms();
    if (el_requantize(pos[0], pos[1], &p, &info, &err) != 0) {
        if (tty) fputc('\n', stderr);
        return cli_fail(&err);
    }
    if (!quiet) {
        fprintf(stderr, "edgellm quantize: %s -> %s: %s, %s, %d tensors (", pos[0], pos[1], info.arch,
                el_ftype_name(p.ftype), info.n_tensors);
        bool first = true;
        for (int t = 0; t < 64; t++)
            if (info.n_by_type[t]) {
                fprintf(stderr, "%s%d %s", first ? "" : ", ", info.n_by_type[t], el_type_name(t));
                first = false;
            }
        if (info.n_layout) fprintf(stderr, "; %d in layout r16", info.n_layout);
        fprintf(stderr, "), %d converted, %.2f -> %.2f MiB, %.1f s\n", info.n_requantized, info.in_bytes / 1048576.0,
                info.out_bytes / 1048576.0, (cli_now_ms() - t0) / 1e3);
    }
    return CLI_EXIT_OK;
}
