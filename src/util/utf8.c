/* utf8.c — strict UTF-8 checks and repair; contract in utf8.h. */
#include "util/utf8.h"

/* The lead byte c: sequence length (1..4) and the allowed range of the second
 * byte (Unicode Table 3-7); 0 for a byte that cannot start a sequence. */
static size_t utf8_lead(unsigned c, unsigned *lo, unsigned *hi) {
    *lo = 0x80;
    *hi = 0xBF;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) return 2;
    if (c == 0xE0) { *lo = 0xA0; return 3; }
    if (c >= 0xE1 && c <= 0xEC) return 3;
    if (c == 0xED) { *hi = 0x9F; return 3; }            /* no surrogates */
    if (c >= 0xEE && c <= 0xEF) return 3;
    if (c == 0xF0) { *lo = 0x90; return 4; }
    if (c >= 0xF1 && c <= 0xF3) return 4;
    if (c == 0xF4) { *hi = 0x8F; return 4; }            /* <= U+10FFFF */
    return 0;                                           /* 80..C1, F5..FF */
}

/* Bytes at p that match the start of a well-formed sequence (at least 1):
 * the whole sequence when it is well-formed, else its maximal subpart. */
size_t el_utf8_prefix(const unsigned char *p, size_t n, size_t *want) {
    unsigned lo, hi;
    size_t len = utf8_lead(p[0], &lo, &hi);
    *want = len;
    if (len <= 1) return 1;
    size_t k = 1;
    if (k < n && p[1] >= lo && p[1] <= hi) k++;
    else return 1;
    while (k < len && k < n && (p[k] & 0xC0) == 0x80) k++;
    return k;
}

/* Length (1..4) of the well-formed UTF-8 sequence at p, 0 if ill-formed or
 * truncated. */
size_t el_utf8_seq(const unsigned char *p, size_t n) {
    size_t want, k = el_utf8_prefix(p, n, &want);
    return want >= 1 && k == want ? k : 0;
}

/* Offset of the first ill-formed byte, or n if all of s[0..n) is valid. */
size_t el_utf8_check(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        if (s[i] < 0x80) { i++; continue; }
        size_t l = el_utf8_seq(s + i, n - i);
        if (!l) return i;
        i += l;
    }
    return n;
}

bool el_utf8_sanitize(const char *s, size_t n, el_buf *out) {
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        size_t run = i; /* copy well-formed runs in one append */
        while (run < n) {
            if (p[run] < 0x80) { run++; continue; }
            size_t l = el_utf8_seq(p + run, n - run);
            if (!l) break;
            run += l;
        }
        if (run > i && !el_buf_append(out, s + i, run - i)) return false;
        i = run;
        if (i < n) {
            size_t want;
            i += el_utf8_prefix(p + i, n - i, &want);
            if (!el_buf_append(out, "\xEF\xBF\xBD", 3)) return false;
        }
    }
    return el_buf_append(out, "", 0);
}

size_t el_utf8_incomplete_tail(const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    for (size_t k = 1; k <= 3 && k <= n; k++) {
        size_t want, got = el_utf8_prefix(p + n - k, k, &want);
        if (want > 1 && got == k && k < want) return k;  /* a proper prefix of a character */
        if ((p[n - k] & 0xC0) != 0x80) break;              /* a lead (or ASCII): look no further */
    }
    return 0;
}
