/*
 * json_schema_number.c — "integer" and "number" with bounds as exact GBNF
 * (contract in json_schema_internal.h).
 *
 * minimum / maximum / exclusiveMinimum / exclusiveMaximum (a number, or the
 * draft-4 boolean form) give an integer range [lo, hi] (either side may be
 * open; |bound| <= 1e15); its decimal strings are split by length, then by
 * leading digit, into digit-class rules that accept exactly the integers in
 * range, without leading zeros, "-" for the negative part. A "number" with
 * bounds is held to the integers in its range, which always validate.
 * Without bounds the plain building block applies.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "structured/json_schema_internal.h"

/* decimal strings lo..hi of equal length (no sign, leading zeros only as the strings have them) */
static void same_len(sbuf *b, const char *lo, const char *hi) {
    size_t n = strlen(lo);
    if (n == 0) return;
    if (lo[0] == hi[0]) {
        el_js_sb_printf(b, "\"%c\"", lo[0]);
        if (n > 1) { sb_puts(b, " "); same_len(b, lo + 1, hi + 1); }
        return;
    }
    bool lo_zeros = strspn(lo + 1, "0") == n - 1, hi_nines = strspn(hi + 1, "9") == n - 1;
    sb_puts(b, "(");
    int first = lo[0] - '0', last = hi[0] - '0';
    bool alt = false;
    if (!lo_zeros) {
        char nines[32];
        memset(nines, '9', n - 1);
        nines[n - 1] = 0;
        el_js_sb_printf(b, "\"%c\" (", lo[0]);
        same_len(b, lo + 1, nines);
        sb_puts(b, ")");
        first++;
        alt = true;
    }
    int mid_hi = hi_nines ? last : last - 1;
    if (first <= mid_hi) {
        if (alt) sb_puts(b, " | ");
        el_js_sb_printf(b, "[%d-%d]", first, mid_hi);
        if (n > 1) el_js_sb_printf(b, " [0-9]{%zu}", n - 1);
        alt = true;
    }
    if (!hi_nines) {
        char zeros[32];
        memset(zeros, '0', n - 1);
        zeros[n - 1] = 0;
        if (alt) sb_puts(b, " | ");
        el_js_sb_printf(b, "\"%c\" (", hi[0]);
        same_len(b, zeros, hi + 1);
        sb_puts(b, ")");
    }
    sb_puts(b, ")");
}

static int ndigits(uint64_t v) {
    int d = 1;
    while (v >= 10) { v /= 10; d++; }
    return d;
}

/* non-negative integers in [a, b] (has_b false: no upper bound), no leading zeros */
static void uint_range(sbuf *b, uint64_t a, bool has_b, uint64_t bb) {
    static const uint64_t P10[] = {1ull, 10ull, 100ull, 1000ull, 10000ull, 100000ull, 1000000ull, 10000000ull,
                                   100000000ull, 1000000000ull, 10000000000ull, 100000000000ull, 1000000000000ull,
                                   10000000000000ull, 100000000000000ull, 1000000000000000ull, 10000000000000000ull};
    int la = ndigits(a), lb = has_b ? ndigits(bb) : 16;
    bool first = true;
    sb_puts(b, "(");
    for (int L = la; L <= lb; L++) {
        uint64_t lo = L == 1 ? 0 : P10[L - 1], hi = P10[L] - 1;
        if (lo < a) lo = a;
        if (has_b && hi > bb) hi = bb;
        if (lo > hi) continue;
        char ls[32], hs[32];
        snprintf(ls, sizeof ls, "%llu", (unsigned long long)lo);
        snprintf(hs, sizeof hs, "%llu", (unsigned long long)hi);
        if (!first) sb_puts(b, " | ");
        first = false;
        sb_puts(b, "(");
        same_len(b, ls, hs);
        sb_puts(b, ")");
    }
    if (first) sb_puts(b, "[0]"); /* not reached: callers pass a <= b */
    sb_puts(b, ")");
}

/* integers in [lo, hi] (has_* false: unbounded on that side) as a GBNF expression */
static void int_range(sbuf *b, bool has_lo, int64_t lo, bool has_hi, int64_t hi) {
    bool neg = !has_lo || lo < 0, pos = !has_hi || hi >= 0;
    sb_puts(b, "(");
    if (neg) { /* -v for v in [max(1, -hi), -lo] */
        uint64_t va = has_hi && hi < 0 ? (uint64_t)(-hi) : 1;
        sb_puts(b, "\"-\" ");
        uint_range(b, va, has_lo, has_lo ? (uint64_t)(-lo) : 0);
    }
    if (pos) {
        if (neg) sb_puts(b, " | ");
        uint_range(b, has_lo && lo > 0 ? (uint64_t)lo : 0, has_hi, has_hi ? (uint64_t)hi : 0);
    }
    sb_puts(b, ")");
}

#define INT_LIMIT 1e15

/* reads minimum/maximum/exclusive* into an integer range; false on error */
static bool bounds(gen *g, const cJSON *s, const char *path, bool *has_lo, int64_t *lo, bool *has_hi, int64_t *hi) {
    const cJSON *mn = cJSON_GetObjectItemCaseSensitive(s, "minimum"), *mx = cJSON_GetObjectItemCaseSensitive(s, "maximum");
    const cJSON *emn = cJSON_GetObjectItemCaseSensitive(s, "exclusiveMinimum"),
                *emx = cJSON_GetObjectItemCaseSensitive(s, "exclusiveMaximum");
    *has_lo = *has_hi = false;
    double l = -INFINITY, h = INFINITY;
    bool l_ex = false, h_ex = false;
    if (mn) { if (!cJSON_IsNumber(mn)) { el_js_fail(g, path, "minimum: expected a number"); return false; } l = mn->valuedouble; }
    if (mx) { if (!cJSON_IsNumber(mx)) { el_js_fail(g, path, "maximum: expected a number"); return false; } h = mx->valuedouble; }
    if (emn) {
        if (cJSON_IsBool(emn)) l_ex = cJSON_IsTrue(emn);
        else if (cJSON_IsNumber(emn)) { if (emn->valuedouble >= l) { l = emn->valuedouble; l_ex = true; } }
        else { el_js_fail(g, path, "exclusiveMinimum: expected a number"); return false; }
    }
    if (emx) {
        if (cJSON_IsBool(emx)) h_ex = cJSON_IsTrue(emx);
        else if (cJSON_IsNumber(emx)) { if (emx->valuedouble <= h) { h = emx->valuedouble; h_ex = true; } }
        else { el_js_fail(g, path, "exclusiveMaximum: expected a number"); return false; }
    }
    if (isfinite(l)) {
        double c = l_ex ? floor(l) + 1 : ceil(l);
        if (fabs(c) > INT_LIMIT) { el_js_fail(g, path, "minimum %g beyond ±1e15", l); return false; }
        *has_lo = true;
        *lo = (int64_t)c;
    }
    if (isfinite(h)) {
        double c = h_ex ? ceil(h) - 1 : floor(h);
        if (fabs(c) > INT_LIMIT) { el_js_fail(g, path, "maximum %g beyond ±1e15", h); return false; }
        *has_hi = true;
        *hi = (int64_t)c;
    }
    if (*has_lo && *has_hi && *lo > *hi) { el_js_fail(g, path, "no integer lies in the range [%g, %g]", l, h); return false; }
    return true;
}

const char *el_js_visit_number(gen *g, const cJSON *s, const char *type, const char *name, const char *path) {
    bool hl, hh;
    int64_t lo = 0, hi = 0;
    if (!bounds(g, s, path, &hl, &lo, &hh, &hi)) return NULL;
    if (!hl && !hh) return el_js_prim(g, type);
    el_js_prim(g, "space");
    sbuf b = {0};
    int_range(&b, hl, lo, hh, hi);
    sb_puts(&b, " space");
    const char *r = b.oom ? NULL : el_js_add_rule(g, name, b.p);
    free(b.p);
    return r;
}
