/*
 * utf8.h — strict UTF-8 (RFC 3629, Unicode Table 3-7: no overlongs, no
 * surrogates, nothing above U+10FFFF) for text that leaves the runtime:
 * JSON bodies, streamed pieces, the CLI's JSON lines. An ill-formed run is
 * replaced by one U+FFFD per maximal subpart (Unicode §3.9, as Python's
 * errors="replace" and WHATWG). No allocation except into the caller's el_buf.
 */
#ifndef EL_UTIL_UTF8_H
#define EL_UTIL_UTF8_H
#include <stdbool.h>
#include <stddef.h>

#include "util/buf.h"

/* Bytes at p[0..n) (n >= 1) that match the start of a well-formed sequence,
 * at least 1: the whole sequence when it is well-formed, else its maximal
 * subpart. *want: the length the lead byte announces (1..4; 0 if p[0] cannot
 * start a sequence). */
size_t el_utf8_prefix(const unsigned char *p, size_t n, size_t *want);
/* Length (1..4) of the well-formed sequence at p[0..n), 0 if ill-formed or truncated. */
size_t el_utf8_seq(const unsigned char *p, size_t n);
/* Offset of the first ill-formed byte, or n if all of s[0..n) is valid. */
size_t el_utf8_check(const unsigned char *s, size_t n);
/* Appends s[0..n) to out with each maximal ill-formed subpart as one U+FFFD
 * (NUL bytes kept); false if out of memory. */
bool el_utf8_sanitize(const char *s, size_t n, el_buf *out);
/* Bytes at the end of s[0..n) that are a proper prefix of a well-formed
 * sequence (0..3): what to hold back until the next piece completes it. */
size_t el_utf8_incomplete_tail(const char *s, size_t n);

#endif
