/*
 * fuzz_sse_text.c — libFuzzer target for the SSE text extractor
 * (src/server/sse_text.c) that `run/chat --route` reads a cloud stream
 * with. The input is fed whole and again in pieces of every size from a
 * byte of the input: both give the same text, the same end state and the
 * same codes; a failure always has a code of [a-z0-9_]; the text emitted is
 * never longer than the input.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/sse_text.h"
#include "util/buf.h"

#define REQUIRE(c) do { if (!(c)) { fprintf(stderr, "invariant failed: %s\n", #c); abort(); } } while (0)

static void emit(void *user, const char *t, size_t n) { REQUIRE(el_buf_append(user, t, n)); }

static void run(const uint8_t *data, size_t size, size_t piece, bool chat, el_buf *out, el_sse_text *p) {
    el_sse_text_init(p, chat);
    for (size_t off = 0; off < size; off += piece)
        el_sse_text_feed(p, (const char *)data + off, size - off < piece ? size - off : piece, emit, out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    for (int chat = 0; chat < 2; chat++) {
        el_buf a = {0}, b = {0};
        el_sse_text pa, pb;
        run(data, size, size ? size : 1, chat, &a, &pa);
        run(data, size, size ? (size_t)data[0] % 17 + 1 : 1, chat, &b, &pb);
        REQUIRE(a.len == b.len && (!a.len || !memcmp(a.p, b.p, a.len)));
        REQUIRE(pa.done == pb.done && pa.failed == pb.failed && !strcmp(pa.code, pb.code) && !strcmp(pa.finish, pb.finish));
        REQUIRE(a.len <= size);
        if (pa.failed) {
            REQUIRE(pa.code[0]);
            for (const char *c = pa.code; *c; c++) REQUIRE((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_');
        }
        el_sse_text_free(&pa);
        el_sse_text_free(&pb);
        el_buf_free(&a);
        el_buf_free(&b);
    }
    return 0;
}
