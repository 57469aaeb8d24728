/*
 * common.c — what every command of the `edgellm` tool shares for its output:
 * error and usage messages with their exit codes, JSON values, the monotonic
 * clock, the timing line, finish reasons, and Ctrl-C (SIGINT) handling
 * (declared in cli.h).
 *
 * Contract: errors go to stderr as "error: ..." (CLI_EXIT_ERROR) or
 * "edgellm <cmd>: ..." plus the usage hint (CLI_EXIT_USAGE); cli_json_str
 * always writes valid JSON (ill-formed UTF-8 as U+FFFD); a Ctrl-C during a
 * generation cancels the session set by cli_sigint_set_session, a second
 * one while nothing generates exits at once with CLI_EXIT_CANCELLED.
 */
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "util/utf8.h"

/* ---- errors ------------------------------------------------------------ */

int cli_fail(const el_error *err) {
    fprintf(stderr, "error: %s: %s\n", el_status_name(err->code), err->msg);
    return CLI_EXIT_ERROR;
}

int cli_failf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return CLI_EXIT_ERROR;
}

int cli_usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "edgellm%s%s: ", cmd ? " " : "", cmd ? cmd : "");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    fputs("run 'edgellm help' for usage\n", stderr);
    return CLI_EXIT_USAGE;
}

/* ---- small helpers ----------------------------------------------------- */

double cli_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

void cli_json_str(FILE *f, const char *s, size_t len) {
    const unsigned char *u = (const unsigned char *)s;
    fputc('"', f);
    for (size_t i = 0; i < len;) {
        unsigned char c = u[i];
        if (c >= 0x80) { /* a well-formed sequence as is, a maximal ill-formed subpart as one U+FFFD */
            size_t want, L = el_utf8_prefix(u + i, len - i, &want);
            if (L == want) fwrite(u + i, 1, L, f);
            else fputs("\xEF\xBF\xBD", f);
            i += L;
            continue;
        }
        switch (c) {
        case '"':  fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        case '\b': fputs("\\b", f); break;
        case '\f': fputs("\\f", f); break;
        default:
            if (c < 0x20 || c == 0x7f) fprintf(f, "\\u%04x", c);
            else fputc((int)c, f);
        }
        i++;
    }
    fputc('"', f);
}

void cli_json_bytes(FILE *f, const char *s, size_t len) {
    fputc('[', f);
    for (size_t i = 0; i < len; i++) fprintf(f, i ? ",%u" : "%u", (unsigned)(unsigned char)s[i]);
    fputc(']', f);
}

void cli_json_num(FILE *f, double v) {
    if (isfinite(v)) fprintf(f, "%.6f", v);
    else fputs("null", f);
}

const char *cli_finish_name(el_finish f) {
    switch (f) {
    case EL_DONE_EOS: return "eos";
    case EL_DONE_STOP: return "stop";
    case EL_DONE_LENGTH: return "length";
    case EL_DONE_CANCELLED: return "cancelled";
    case EL_DONE_FAILED: return "failed";
    }
    return "?";
}

void cli_print_perf(const el_generate_stats *st) {
    double ptps = st->prefill_ms > 0 ? st->n_prompt * 1e3 / st->prefill_ms : 0;
    double dtps = st->decode_ms > 0 ? st->n_generated * 1e3 / st->decode_ms : 0;
    fprintf(stderr, "\n");
    fprintf(stderr, "edgellm: prompt eval: %10.2f ms / %5d tokens (%8.2f ms per token, %8.2f tokens per second)\n",
            st->prefill_ms, st->n_prompt, st->n_prompt ? st->prefill_ms / st->n_prompt : 0.0, ptps);
    fprintf(stderr, "edgellm:        eval: %10.2f ms / %5d tokens (%8.2f ms per token, %8.2f tokens per second)\n",
            st->decode_ms, st->n_generated, st->n_generated ? st->decode_ms / st->n_generated : 0.0, dtps);
    fprintf(stderr, "edgellm: time to first token %.2f ms, finish: %s\n", st->ttft_ms, cli_finish_name(st->finish));
    if (st->n_drafted || st->n_spec_rounds)
        fprintf(stderr, "edgellm: speculative: %d drafted, %d accepted (alpha %.2f), %d verifications + %d plain steps "
                        "= %.2f tokens per forward\n",
                st->n_drafted, st->n_accepted, st->n_drafted ? (double)st->n_accepted / st->n_drafted : 0.0,
                st->n_spec_rounds, st->n_plain_steps,
                st->n_spec_rounds + st->n_plain_steps ? (double)st->n_generated / (st->n_spec_rounds + st->n_plain_steps) : 0.0);
}

/* ---- SIGINT ------------------------------------------------------------ */

static el_session *_Atomic g_sig_session;
static atomic_int g_sig_seen;

static void on_sigint(int sig) {
    (void)sig;
    el_session *s = atomic_load(&g_sig_session);
    if (s) {
        el_session_cancel(s);
    } else {
        /* A second Ctrl-C while nothing is generating: exit at once. */
        if (atomic_exchange(&g_sig_seen, 1)) _exit(CLI_EXIT_CANCELLED);
    }
}

void cli_sigint_install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; /* no SA_RESTART: a blocked read of stdin returns EINTR */
    sigaction(SIGINT, &sa, NULL);
}

void cli_sigint_set_session(el_session *s) { atomic_store(&g_sig_session, s); }
bool cli_sigint_seen(void) { return atomic_load(&g_sig_seen) != 0; }
void cli_sigint_clear(void) { atomic_store(&g_sig_seen, 0); }
