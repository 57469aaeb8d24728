/*
 * think_stream.h — the streamed split of a reply into reasoning and content
 * (layer L6): <think>…</think> at the reply's start (after any whitespace) is
 * reasoning, the rest content, the same split as toolformat.h's
 * el_tool_format_parse under reasoning_format deepseek / auto, done on the
 * fly. A marker cut across pieces ("<thi" + "nk>") is held back until it is
 * known, so no partial marker ever reaches either side; at most
 * EL_THINK_HOLD bytes are held (bounded memory, any input length). A reply
 * whose template opened the <think> in the prompt starts inside it. An
 * unterminated <think> makes the rest reasoning (as the parser does). The
 * whitespace right after </think> is dropped (the parser trims it).
 * Pure: no I/O, no allocation; pieces go to the caller's sink in order.
 */
#ifndef EL_STRUCTURED_THINK_STREAM_H
#define EL_STRUCTURED_THINK_STREAM_H
#include <stdbool.h>
#include <stddef.h>

#define EL_THINK_HOLD 64 /* leading whitespace held before a possible "<think>" (longer: it is content) */

typedef enum { EL_THINK_START = 0, EL_THINK_IN, EL_THINK_AFTER, EL_THINK_CONTENT } el_think_state;

typedef struct el_think_stream {
    el_think_state st;
    char hold[EL_THINK_HOLD];
    size_t hold_len;
} el_think_stream;

/* reasoning: the bytes are reasoning (true) or content; returns false to stop (the feed returns false). */
typedef bool (*el_think_sink)(void *user, bool reasoning, const char *p, size_t n);

void el_think_stream_init(el_think_stream *ts, bool opened);
/* Feeds p[0..n) (any bytes); complete runs go to sink. false when the sink said stop. */
bool el_think_stream_feed(el_think_stream *ts, const char *p, size_t n, el_think_sink sink, void *user);
/* The end of the reply: what is held goes out (inside an unterminated think: as reasoning). */
bool el_think_stream_finish(el_think_stream *ts, el_think_sink sink, void *user);

#endif
