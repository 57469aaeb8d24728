/*
 * think_stream.c — the streamed reasoning / content split (contract:
 * think_stream.h). One byte at a time through four states: START (only
 * whitespace so far, held, then a prefix of "<think>", held), IN (reasoning;
 * a suffix that may open "</think>" is held), AFTER (whitespace after
 * </think>, dropped), CONTENT (passed through). Runs of bytes that need no
 * holding are handed to the sink in one call.
 */
#include "structured/think_stream.h"

#include <string.h>

static const char OPEN[] = "<think>", CLOSE[] = "</think>";

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

void el_think_stream_init(el_think_stream *ts, bool opened) {
    memset(ts, 0, sizeof *ts);
    ts->st = opened ? EL_THINK_IN : EL_THINK_START;
}

static bool out(el_think_sink sink, void *user, bool reasoning, const char *p, size_t n) {
    return n == 0 || sink(user, reasoning, p, n);
}

/* START: leading whitespace, then "<think>" byte by byte. */
static bool start_byte(el_think_stream *ts, char c, el_think_sink sink, void *user) {
    size_t ws = 0;
    while (ws < ts->hold_len && is_ws(ts->hold[ws])) ws++;
    size_t k = ts->hold_len - ws; /* bytes of "<think>" matched */
    if (k == 0 && is_ws(c) && ts->hold_len < EL_THINK_HOLD) {
        ts->hold[ts->hold_len++] = c;
        return true;
    }
    if (k < sizeof OPEN - 1 && c == OPEN[k] && ts->hold_len < EL_THINK_HOLD) {
        ts->hold[ts->hold_len++] = c;
        if (k + 1 == sizeof OPEN - 1) { ts->st = EL_THINK_IN; ts->hold_len = 0; }
        return true;
    }
    /* not a think block: what was held and c are content */
    ts->st = EL_THINK_CONTENT;
    bool ok = out(sink, user, false, ts->hold, ts->hold_len) && out(sink, user, false, &c, 1);
    ts->hold_len = 0;
    return ok;
}

bool el_think_stream_feed(el_think_stream *ts, const char *p, size_t n, el_think_sink sink, void *user) {
    size_t i = 0;
    while (i < n) {
        switch (ts->st) {
        case EL_THINK_START:
            if (!start_byte(ts, p[i++], sink, user)) return false;
            break;
        case EL_THINK_CONTENT:
            if (!out(sink, user, false, p + i, n - i)) return false;
            i = n;
            break;
        case EL_THINK_AFTER:
            while (i < n && is_ws(p[i])) i++;
            if (i < n) ts->st = EL_THINK_CONTENT;
            break;
        case EL_THINK_IN: {
            /* a held partial "</think>" goes on or falls back into the reasoning */
            if (ts->hold_len > 0) {
                char c = p[i];
                if (c == CLOSE[ts->hold_len]) {
                    i++;
                    ts->hold[ts->hold_len] = c;
                    if (++ts->hold_len == sizeof CLOSE - 1) { ts->hold_len = 0; ts->st = EL_THINK_AFTER; }
                    break;
                }
                /* mismatch: the held bytes are reasoning ("<" may restart a marker: held bytes never
                 * contain another '<' after the first, so only c itself can) */
                if (!out(sink, user, true, ts->hold, ts->hold_len)) return false;
                ts->hold_len = 0;
                break;
            }
            const char *lt = memchr(p + i, '<', n - i);
            size_t run = lt ? (size_t)(lt - (p + i)) : n - i;
            if (!out(sink, user, true, p + i, run)) return false;
            i += run;
            if (lt) { ts->hold[0] = '<'; ts->hold_len = 1; i++; }
            break;
        }
        }
    }
    return true;
}

bool el_think_stream_finish(el_think_stream *ts, el_think_sink sink, void *user) {
    bool ok = true;
    if (ts->st == EL_THINK_START) {
        ok = out(sink, user, false, ts->hold, ts->hold_len); /* no think block: the text as it came */
    } else if (ts->st == EL_THINK_IN) {
        ok = out(sink, user, true, ts->hold, ts->hold_len);
    }
    ts->hold_len = 0;
    ts->st = EL_THINK_CONTENT;
    return ok;
}
