/*
 * sse_text.h — the text of an OpenAI-compatible SSE stream (layer L6), for
 * `edgellm run/chat --route` when the router sends a request to the cloud:
 * the bytes el_cloud_relay_read passes on go in, the completion's text
 * comes out.
 *
 * Contract:
 *   - Input is fed in any pieces (a line may be split anywhere). Lines that
 *     are not "data:" lines (comments, event names, blank lines) are
 *     skipped. A data line is "[DONE]" (the end) or a JSON object:
 *       - with "error": the stream failed; its "code" (when it is 1..47
 *         bytes of [a-z0-9_]) is kept, else "cloud_error";
 *       - else "choices"[0]: "delta"."content" (chat) or "text"
 *         (completions), when a string, is emitted; "finish_reason", when
 *         a string, is kept (1..15 bytes of [a-z_], else "other").
 *     Anything else in a data line (not JSON, not an object, a "choices"
 *     that is not an array of objects) is a failure with code
 *     "cloud_bad_response". Nothing after the end or a failure is read.
 *   - A data line longer than EL_SSE_LINE_MAX bytes is a failure
 *     ("cloud_bad_response"); memory is bounded by that.
 *   - The parser is pure (no I/O) and fuzzed (fuzz/fuzz_sse_text.c).
 */
#ifndef EL_SERVICE_SSE_TEXT_H
#define EL_SERVICE_SSE_TEXT_H
#include <stdbool.h>
#include <stddef.h>

#define EL_SSE_LINE_MAX (1u << 20)

typedef void (*el_sse_emit)(void *user, const char *text, size_t len);

typedef struct el_sse_text {
    bool chat;           /* delta.content (chat) or text (completions) */
    bool done;           /* [DONE] seen */
    bool failed;         /* an error event or a malformed line */
    char code[48];       /* failed: why */
    char finish[16];     /* the last finish_reason ("" when none) */
    long n_events;       /* JSON events read */
    char *line;          /* the current line (malloc'd, grows to EL_SSE_LINE_MAX) */
    size_t len, cap;
} el_sse_text;

void el_sse_text_init(el_sse_text *p, bool chat);
/* Feeds bytes; emit gets each text piece. Returns false once the stream
 * ended or failed (further input is ignored). */
bool el_sse_text_feed(el_sse_text *p, const char *bytes, size_t n, el_sse_emit emit, void *user);
void el_sse_text_free(el_sse_text *p);

#endif
