/*
 * test_think_stream.c — structured/think_stream.c: the live reasoning /
 * content split of a streamed reply. Every reply is fed whole and cut into
 * pieces at every position (and one byte at a time): the reasoning and the
 * content are the same however it is cut, no piece handed out holds part
 * of a marker, the split agrees with toolformat.c's parser (reasoning
 * deepseek), and a huge reasoning goes through with the held bytes bounded.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "structured/think_stream.h"
#include "structured/toolformat.h"
#include "testutil.h"

typedef struct { char r[4096], c[4096]; size_t rl, cl; int bad; size_t huge; } sinkbuf;

static bool sink(void *user, bool reasoning, const char *p, size_t n) {
    sinkbuf *b = user;
    if (n == 0) b->bad++; /* empty runs are never handed out */
    if (reasoning && b->huge) { b->rl += n; return true; }
    char *dst = reasoning ? b->r : b->c;
    size_t *l = reasoning ? &b->rl : &b->cl;
    if (*l + n >= sizeof b->r) { b->bad++; return true; }
    memcpy(dst + *l, p, n);
    *l += n;
    dst[*l] = 0;
    return true;
}

static void run(const char *text, bool opened, size_t cut, sinkbuf *b) {
    memset(b, 0, sizeof *b);
    el_think_stream ts;
    el_think_stream_init(&ts, opened);
    size_t n = strlen(text);
    if (cut == 0) {
        CHECK(el_think_stream_feed(&ts, text, n, sink, b));
    } else {
        for (size_t i = 0; i < n; i += cut) CHECK(el_think_stream_feed(&ts, text + i, n - i < cut ? n - i : cut, sink, b));
    }
    CHECK(ts.hold_len <= EL_THINK_HOLD);
    CHECK(el_think_stream_finish(&ts, sink, b));
}

static void test_cases(void) {
    static const struct { const char *text; bool opened; const char *reasoning, *content; } cases[] = {
        {"<think>I should check.</think>\n\nParis is sunny.", false, "I should check.", "Paris is sunny."},
        {"\n <think>a<b</thin</think>Hi", false, "a<b</thin", "Hi"},
        {"Hello <think>x</think>", false, "", "Hello <think>x</think>"},
        {"<thinking>no</thinking>", false, "", "<thinking>no</thinking>"},
        {"<think>cut short <", false, "cut short <", ""},
        {"<thi", false, "", "<thi"},
        {"opened by the template</think>\nAnswer", true, "opened by the template", "Answer"},
        {"still thinking", true, "still thinking", ""},
        {"", false, "", ""},
        {"  plain reply", false, "", "  plain reply"},
        {"<think></think>", false, "", ""},
        {"<think><<</</th</think>x", false, "<<</</th", "x"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        size_t n = strlen(cases[i].text);
        for (size_t cut = 0; cut <= n + 1; cut++) {
            sinkbuf b;
            run(cases[i].text, cases[i].opened, cut, &b);
            CHECKF(b.bad == 0 && !strcmp(b.r, cases[i].reasoning) && !strcmp(b.c, cases[i].content),
                   "case %zu cut %zu: reasoning '%s' content '%s' bad %d", i, cut, b.r, b.c, b.bad);
        }
        /* the parser's split (reasoning deepseek) agrees wherever it trims nothing the stream keeps */
        el_tool_parsed p;
        char buf[512];
        snprintf(buf, sizeof buf, "%s%s", cases[i].opened ? "<think>" : "", cases[i].text);
        CHECK(el_tool_format_parse(EL_TF_NONE, EL_REASONING_DEEPSEEK, buf, strlen(buf), &p) == 0);
        if (cases[i].reasoning[0])
            CHECKF(p.reasoning && !strcmp(p.reasoning, cases[i].reasoning), "case %zu: parser reasoning '%s'", i,
                   p.reasoning ? p.reasoning : "(null)");
        el_tool_parsed_free(&p);
    }
}

/* 4 MiB of reasoning fed in 1000-byte pieces: all of it comes out as reasoning, held bytes stay bounded. */
static void test_huge(void) {
    const size_t n = 4u << 20;
    char *t = malloc(n + 32);
    CHECK(t != NULL);
    if (!t) return;
    memcpy(t, "<think>", 7);
    for (size_t i = 7; i < n; i++) t[i] = "ab<c/ "[i % 6];
    memcpy(t + n, "</think>ok", 11);
    sinkbuf *b = calloc(1, sizeof *b);
    b->huge = 1;
    el_think_stream ts;
    el_think_stream_init(&ts, false);
    size_t len = n + 10;
    for (size_t i = 0; i < len; i += 1000) {
        CHECK(el_think_stream_feed(&ts, t + i, len - i < 1000 ? len - i : 1000, sink, b));
        CHECK(ts.hold_len <= EL_THINK_HOLD);
    }
    CHECK(el_think_stream_finish(&ts, sink, b));
    CHECKF(b->rl == n - 7 && !strcmp(b->c, "ok") && b->bad == 0, "huge: %zu reasoning bytes, content '%s'", b->rl, b->c);
    /* leading whitespace past the bound is content, as it came */
    memset(t, '\n', 200);
    memcpy(t + 200, "<think>x</think>", 17);
    sinkbuf *c = calloc(1, sizeof *c);
    run(t, false, 7, c);
    CHECK(c->rl == 0 && c->cl == 216);
    free(c);
    free(b);
    free(t);
}

static bool stop_sink(void *user, bool reasoning, const char *p, size_t n) {
    (void)user, (void)reasoning, (void)p, (void)n;
    return false;
}

static void test_stop(void) {
    el_think_stream ts;
    el_think_stream_init(&ts, false);
    CHECK(!el_think_stream_feed(&ts, "hello", 5, stop_sink, NULL)); /* the sink's stop is the feed's */
    el_think_stream_init(&ts, true);
    CHECK(!el_think_stream_feed(&ts, "abc", 3, stop_sink, NULL));
}

int main(void) {
    test_cases();
    test_huge();
    test_stop();
    return el_test_finish("test_think_stream");
}
