/*
 * fuzz_model.c — libFuzzer target for the architecture loaders
 * (src/runtime/model.c and the files of src/runtime/arch/: el_model_load on a file's
 * bytes — the hyperparameter readers, the per-architecture checks of expert
 * counts, windows, scales, convolution widths, sinks, and the tensor binding).
 *
 * The input is written to a memfd and loaded by path (/proc/self/fd/N) with
 * one thread and the default (mmap) load strategy. A refusal must carry a
 * code and a message; an accepted model must report an architecture, a
 * vocabulary of at least one token and an embedding width > 0, and must free
 * cleanly (ASan: no leak, no read past the mapping). Seeds: the tiny
 * reference models of the fixture dir (`make fixtures`), e.g. tiny-qwen3moe-Q8_0,
 * tiny-gpt-oss-MXFP4_MOE, tiny-lfm2-Q8_0, tiny-gemma2-Q8_0, tiny-phi3-Q8_0 —
 * libFuzzer's max_len then defaults to the largest seed.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "edgellm.h"

#define REQUIRE(c) do { if (!(c)) { fprintf(stderr, "invariant failed: %s\n", #c); abort(); } } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int fd = memfd_create("fuzz-model", 0);
    if (fd < 0) return 0;
    size_t off = 0;
    while (off < size) {
        ssize_t w = write(fd, data + off, size - off);
        if (w <= 0) { close(fd); return 0; }
        off += (size_t)w;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    el_model_params mp = el_model_default_params();
    mp.n_threads = 1;
    el_error err;
    memset(&err, 0, sizeof err);
    el_model *m = el_model_load(path, &mp, &err);
    if (m) {
        REQUIRE(el_model_arch(m) && *el_model_arch(m));
        REQUIRE(el_model_n_vocab(m) > 0);
        REQUIRE(el_model_n_embd(m) > 0);
        el_model_free(m);
    } else {
        REQUIRE(err.code != 0 && err.msg[0] != '\0');
    }
    close(fd);
    return 0;
}
