/*
 * accept_matrix.c — the acceptance matrix's strict parser and its cells
 * (contract in accept_matrix.h): every refusal names the JSON path of the
 * bad value; nothing is allocated before the bytes passed the depth check.
 */
#include "deploy/accept_matrix.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <sodium.h>

#include "edgellm.h"
#include "util/file.h"

static const char *const k_axis[EL_AX_COUNT] = {"backend", "kv_type", "load", "start",
                                                "mem_budget", "threads", "thermal", "concurrency"};
static const char *const k_th[EL_TH_COUNT] = {
    "ttft_p50_ms", "ttft_p95_ms", "itl_p50_ms", "itl_p95_ms", "min_tokens_per_s", "max_peak_rss_mib",
    "max_cpu_s_per_token", "min_greedy_agreement", "max_mean_abs_dlogp", "max_fallbacks", "max_refusals"};

const char *el_accept_axis_name(el_accept_axis a) { return (unsigned)a < EL_AX_COUNT ? k_axis[a] : "?"; }
const char *el_accept_th_name(el_accept_th t) { return (unsigned)t < EL_TH_COUNT ? k_th[t] : "?"; }
bool el_accept_th_is_min(el_accept_th t) { return t == EL_TH_TPS || t == EL_TH_AGREE; }

static bool failf(char *why, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (why && cap) vsnprintf(why, cap, fmt, ap);
    va_end(ap);
    return false;
}

/* Nesting depth of the bytes ([ and { outside strings); the format needs 4. */
static int max_depth(const char *s, size_t n) {
    int d = 0, mx = 0;
    bool str = false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (str) {
            if (c == '\\') i++;
            else if (c == '"') str = false;
        } else if (c == '"') str = true;
        else if (c == '[' || c == '{') { if (++d > mx) mx = d; if (mx > 64) return mx; }
        else if (c == ']' || c == '}') d--;
    }
    return mx;
}

static bool dup_keys(const cJSON *o, char *dup, size_t cap) {
    for (const cJSON *a = o ? o->child : NULL; a; a = a->next)
        for (const cJSON *b = a->next; b; b = b->next)
            if (a->string && b->string && !strcmp(a->string, b->string)) {
                snprintf(dup, cap, "%s", a->string);
                return true;
            }
    return false;
}

/* "512MiB", "2GiB", "1048576", "0" -> bytes; false for anything else. */
static bool parse_size(const char *s, uint64_t *out) {
    char *end;
    errno = 0;
    if (!*s || *s == '-' || *s == '+') return false;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s) return false;
    uint64_t mul = 1;
    if (!strcmp(end, "KiB")) mul = 1ull << 10;
    else if (!strcmp(end, "MiB")) mul = 1ull << 20;
    else if (!strcmp(end, "GiB")) mul = 1ull << 30;
    else if (*end) return false;
    if (v > (1ull << 50) / mul) return false;
    *out = v * mul;
    return true;
}

static bool check_value(int ax, const cJSON *v, char *norm, const char *path, char *why, size_t cap) {
    if (ax == EL_AX_THREADS || ax == EL_AX_CONC) {
        if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble))
            return failf(why, cap, "%s: expected an integer", path);
        double lo = ax == EL_AX_THREADS ? 0 : 1, hi = ax == EL_AX_THREADS ? 256 : 8;
        if (v->valuedouble < lo || v->valuedouble > hi)
            return failf(why, cap, "%s: %s must be %g..%g (got %g)", path, k_axis[ax], lo, hi, v->valuedouble);
        snprintf(norm, 24, "%d", (int)v->valuedouble);
        return true;
    }
    if (!cJSON_IsString(v)) return failf(why, cap, "%s: expected a string", path);
    const char *s = v->valuestring;
    if (strlen(s) >= 24) return failf(why, cap, "%s: value too long (max 23 bytes)", path);
    static const char *const backends[] = {"cpu", "opencl", "auto", NULL};
    static const char *const loads[] = {"mmap", "preload", "prefetch", "hot", NULL};
    static const char *const starts[] = {"cold", "warm", NULL};
    static const char *const thermals[] = {"nominal", "derated", "hot", NULL};
    const char *const *set = NULL;
    const char *what = "";
    switch (ax) {
    case EL_AX_BACKEND: set = backends; what = "backend (cpu, opencl, auto)"; break;
    case EL_AX_LOAD: set = loads; what = "load strategy (mmap, preload, prefetch, hot)"; break;
    case EL_AX_START: set = starts; what = "start (cold, warm)"; break;
    case EL_AX_THERMAL: set = thermals; what = "thermal state (nominal, derated, hot)"; break;
    case EL_AX_KV:
        if (el_cache_type_parse(s) < 0)
            return failf(why, cap, "%s: unknown KV type \"%s\" (f16, bf16, q8_0, q4_0)", path, s);
        break;
    case EL_AX_MEM: {
        uint64_t b;
        if (!parse_size(s, &b))
            return failf(why, cap, "%s: \"%s\" is not a memory budget (\"0\" = none, N, NKiB, NMiB, NGiB)", path, s);
        break;
    }
    default: break;
    }
    if (set) {
        int i = 0;
        while (set[i] && strcmp(set[i], s)) i++;
        if (!set[i]) return failf(why, cap, "%s: unknown %s \"%s\"", path, what, s);
    }
    snprintf(norm, 24, "%s", s);
    return true;
}

static int axis_index(const char *k) {
    for (int a = 0; a < EL_AX_COUNT; a++)
        if (!strcmp(k_axis[a], k)) return a;
    return -1;
}

static int value_index(const el_accept_matrix *m, int ax, const char *norm) {
    for (int i = 0; i < m->n_val[ax]; i++)
        if (!strcmp(m->val[ax][i], norm)) return i;
    return -1;
}

static bool parse_axes(const cJSON *axes, el_accept_matrix *m, char *why, size_t cap) {
    char path[96], dup[64];
    if (!cJSON_IsObject(axes)) return failf(why, cap, "axes: expected an object");
    if (dup_keys(axes, dup, sizeof dup)) return failf(why, cap, "axes.%.60s: duplicate key", dup);
    for (const cJSON *a = axes->child; a; a = a->next) {
        int ax = axis_index(a->string);
        if (ax < 0) {
            if (!strcmp(a->string, "network"))
                return failf(why, cap, "axes.network: not supported (routed requests need a cloud endpoint; "
                             "see docs/ACCEPTANCE.md)");
            return failf(why, cap, "axes.%.60s: unknown axis (backend, kv_type, load, start, mem_budget, threads, "
                         "thermal, concurrency)", a->string);
        }
        if (!cJSON_IsArray(a)) return failf(why, cap, "axes.%s: expected an array", k_axis[ax]);
        int n = cJSON_GetArraySize(a);
        if (n < 1 || n > EL_ACCEPT_MAX_VALUES)
            return failf(why, cap, "axes.%s: 1..%d values (got %d)", k_axis[ax], EL_ACCEPT_MAX_VALUES, n);
        int i = 0;
        for (const cJSON *v = a->child; v; v = v->next, i++) {
            snprintf(path, sizeof path, "axes.%s[%d]", k_axis[ax], i);
            char norm[24];
            if (!check_value(ax, v, norm, path, why, cap)) return false;
            if (value_index(m, ax, norm) >= 0) return failf(why, cap, "%s: \"%s\" listed twice", path, norm);
            snprintf(m->val[ax][m->n_val[ax]++], 24, "%s", norm);
        }
    }
    /* defaults for axes not given: one value each */
    static const char *const dflt[EL_AX_COUNT] = {"cpu", "f16", "mmap", "warm", "0", "0", "nominal", "1"};
    for (int ax = 0; ax < EL_AX_COUNT; ax++)
        if (!m->n_val[ax]) snprintf(m->val[ax][m->n_val[ax]++], 24, "%s", dflt[ax]);
    return true;
}

static bool parse_selection(const cJSON *o, const char *key, el_accept_matrix *m, bool one_value, int *ref,
                            bool (*flag)[EL_ACCEPT_MAX_VALUES], char *why, size_t cap) {
    char path[96], dup[64];
    if (!cJSON_IsObject(o)) return failf(why, cap, "%s: expected an object", key);
    if (dup_keys(o, dup, sizeof dup)) return failf(why, cap, "%s.%.60s: duplicate key", key, dup);
    for (const cJSON *a = o->child; a; a = a->next) {
        int ax = axis_index(a->string);
        if (ax < 0) return failf(why, cap, "%s.%.60s: unknown axis", key, a->string);
        const cJSON *first = one_value ? a : a->child;
        if (!one_value && !cJSON_IsArray(a)) return failf(why, cap, "%s.%s: expected an array", key, k_axis[ax]);
        int i = 0;
        for (const cJSON *v = first; v; v = one_value ? NULL : v->next, i++) {
            if (one_value) snprintf(path, sizeof path, "%s.%s", key, k_axis[ax]);
            else snprintf(path, sizeof path, "%s.%s[%d]", key, k_axis[ax], i);
            char norm[24];
            if (!check_value(ax, v, norm, path, why, cap)) return false;
            int vi = value_index(m, ax, norm);
            if (vi < 0) return failf(why, cap, "%s: \"%s\" is not a value of axes.%s", path, norm, k_axis[ax]);
            if (one_value) ref[ax] = vi;
            else flag[ax][vi] = true;
        }
    }
    return true;
}

/* ---- cells ---- */

static void add_cell(el_accept_matrix *m, const int *v) {
    for (int c = 0; c < m->n_cells; c++)
        if (!memcmp(m->cell[c], (uint8_t[EL_AX_COUNT]){(uint8_t)v[0], (uint8_t)v[1], (uint8_t)v[2], (uint8_t)v[3],
                                                       (uint8_t)v[4], (uint8_t)v[5], (uint8_t)v[6], (uint8_t)v[7]},
                    EL_AX_COUNT))
            return;
    for (int a = 0; a < EL_AX_COUNT; a++) m->cell[m->n_cells][a] = (uint8_t)v[a];
    m->n_cells++;
}

static bool build_cells(el_accept_matrix *m, char *why, size_t cap) {
    m->n_cells = 0;
    add_cell(m, m->ref);
    if (!m->pairwise) {
        uint64_t total = 1;
        for (int a = 0; a < EL_AX_COUNT; a++) total *= (uint64_t)m->n_val[a];
        if (total > EL_ACCEPT_MAX_CELLS)
            return failf(why, cap, "axes: %llu cells, more than %d (use \"cover\": \"pairwise\")",
                         (unsigned long long)total, EL_ACCEPT_MAX_CELLS);
        int v[EL_AX_COUNT] = {0};
        for (;;) {
            add_cell(m, v);
            int a = EL_AX_COUNT - 1;
            while (a >= 0 && ++v[a] == m->n_val[a]) v[a--] = 0;
            if (a < 0) break;
        }
        return true;
    }
    /* pairwise: greedily add the cell covering the most uncovered pairs, starting from
     * each uncovered pair and filling the other axes one at a time */
    bool covered[EL_AX_COUNT][EL_ACCEPT_MAX_VALUES][EL_AX_COUNT][EL_ACCEPT_MAX_VALUES]; /* on the stack: parse is reentrant */
    memset(covered, 0, sizeof covered);
#define COVER(cv)                                                                   \
    for (int a = 0; a < EL_AX_COUNT; a++)                                           \
        for (int b = 0; b < EL_AX_COUNT; b++) covered[a][(cv)[a]][b][(cv)[b]] = true;
    {
        int r[EL_AX_COUNT];
        for (int a = 0; a < EL_AX_COUNT; a++) r[a] = m->ref[a];
        COVER(r);
    }
    for (;;) {
        int pa = -1, pv = 0, pb = 0, pw = 0;
        for (int a = 0; a < EL_AX_COUNT && pa < 0; a++)
            for (int b = a + 1; b < EL_AX_COUNT && pa < 0; b++)
                for (int i = 0; i < m->n_val[a] && pa < 0; i++)
                    for (int j = 0; j < m->n_val[b]; j++)
                        if (!covered[a][i][b][j]) { pa = a; pv = i; pb = b; pw = j; break; }
        if (pa < 0) break;
        if (m->n_cells >= EL_ACCEPT_MAX_CELLS) return failf(why, cap, "axes: too many cells");
        int v[EL_AX_COUNT];
        bool set[EL_AX_COUNT] = {0};
        v[pa] = pv; v[pb] = pw; set[pa] = set[pb] = true;
        for (int a = 0; a < EL_AX_COUNT; a++) {
            if (set[a]) continue;
            int best = 0, bestn = -1;
            for (int i = 0; i < m->n_val[a]; i++) {
                int n = 0;
                for (int b = 0; b < EL_AX_COUNT; b++)
                    if (set[b] && !covered[a][i][b][v[b]]) n++;
                if (n > bestn) { bestn = n; best = i; }
            }
            v[a] = best;
            set[a] = true;
        }
        add_cell(m, v);
        COVER(v);
    }
#undef COVER
    return true;
}

int el_accept_matrix_pairs_missing(const el_accept_matrix *m) {
    int missing = 0;
    for (int a = 0; a < EL_AX_COUNT; a++)
        for (int b = a + 1; b < EL_AX_COUNT; b++)
            for (int i = 0; i < m->n_val[a]; i++)
                for (int j = 0; j < m->n_val[b]; j++) {
                    bool found = false;
                    for (int c = 0; c < m->n_cells && !found; c++) found = m->cell[c][a] == i && m->cell[c][b] == j;
                    missing += !found;
                }
    return missing;
}

/* ---- the document ---- */

bool el_accept_matrix_parse(const char *json, size_t len, el_accept_matrix *m, char *why, size_t cap) {
    memset(m, 0, sizeof *m);
    for (int t = 0; t < EL_TH_COUNT; t++) m->th[t] = NAN;
    m->n_predict = 16;
    if (len > EL_ACCEPT_MATRIX_MAX_BYTES)
        return failf(why, cap, "matrix: %zu bytes, more than %u", len, EL_ACCEPT_MATRIX_MAX_BYTES);
    if (max_depth(json, len) > 4) return failf(why, cap, "matrix: nested deeper than the format (4 levels)");
    const char *endp = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(json, len, &endp, false);
    if (!root) {
        size_t off = endp && endp >= json ? (size_t)(endp - json) : 0;
        return failf(why, cap, "matrix: not JSON (syntax error at byte %zu)", off);
    }
    bool ok = false;
    char dup[64];
    if (!cJSON_IsObject(root)) { failf(why, cap, "(root): expected an object"); goto out; }
    if (dup_keys(root, dup, sizeof dup)) { failf(why, cap, "%.60s: duplicate key", dup); goto out; }
    static const char *const known[] = {"format", "name", "axes", "cover", "reference", "prompts",
                                        "n_predict", "expect_refused", "thresholds", NULL};
    for (const cJSON *k = root->child; k; k = k->next) {
        int i = 0;
        while (known[i] && strcmp(known[i], k->string)) i++;
        if (!known[i]) { failf(why, cap, "%.60s: unknown key", k->string); goto out; }
    }
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(root, "format");
    if (!cJSON_IsString(f)) { failf(why, cap, "format: required, a string (\"%s\")", EL_ACCEPT_FORMAT); goto out; }
    if (strcmp(f->valuestring, EL_ACCEPT_FORMAT)) {
        failf(why, cap, "format: unknown format \"%.40s\" (expected \"%s\")", f->valuestring, EL_ACCEPT_FORMAT);
        goto out;
    }
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(root, "name");
    if (n) {
        if (!cJSON_IsString(n) || !n->valuestring[0] || strlen(n->valuestring) >= sizeof m->name) {
            failf(why, cap, "name: a string of 1..%zu bytes", sizeof m->name - 1);
            goto out;
        }
        for (const char *p = n->valuestring; *p; p++)
            if ((unsigned char)*p < 0x20 || *p == '"' || *p == '\\' || *p == '/') {
                failf(why, cap, "name: control characters, quotes, '\\' and '/' are not allowed");
                goto out;
            }
        snprintf(m->name, sizeof m->name, "%s", n->valuestring);
    } else snprintf(m->name, sizeof m->name, "acceptance");
    const cJSON *axes = cJSON_GetObjectItemCaseSensitive(root, "axes");
    if (!axes) { failf(why, cap, "axes: required"); goto out; }
    if (!parse_axes(axes, m, why, cap)) goto out;
    const cJSON *cov = cJSON_GetObjectItemCaseSensitive(root, "cover");
    if (cov) {
        if (!cJSON_IsString(cov) || (strcmp(cov->valuestring, "all") && strcmp(cov->valuestring, "pairwise"))) {
            failf(why, cap, "cover: \"all\" or \"pairwise\"");
            goto out;
        }
        m->pairwise = !strcmp(cov->valuestring, "pairwise");
    }
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(root, "reference");
    if (ref && !parse_selection(ref, "reference", m, true, m->ref, NULL, why, cap)) goto out;
    const cJSON *er = cJSON_GetObjectItemCaseSensitive(root, "expect_refused");
    if (er && !parse_selection(er, "expect_refused", m, false, NULL, m->refuse, why, cap)) goto out;
    for (int a = 0; a < EL_AX_COUNT; a++)
        if (m->refuse[a][m->ref[a]]) {
            failf(why, cap, "expect_refused.%s: the reference cell (\"%s\") cannot be expected to refuse", k_axis[a],
                  m->val[a][m->ref[a]]);
            goto out;
        }
    const cJSON *pr = cJSON_GetObjectItemCaseSensitive(root, "prompts");
    if (!cJSON_IsArray(pr)) { failf(why, cap, "prompts: required, an array of strings"); goto out; }
    int np = cJSON_GetArraySize(pr);
    if (np < 1 || np > EL_ACCEPT_MAX_PROMPTS) { failf(why, cap, "prompts: 1..%d prompts (got %d)", EL_ACCEPT_MAX_PROMPTS, np); goto out; }
    int i = 0;
    for (const cJSON *p = pr->child; p; p = p->next, i++) {
        if (!cJSON_IsString(p)) { failf(why, cap, "prompts[%d]: expected a string", i); goto out; }
        size_t pl = strlen(p->valuestring);
        if (pl == 0 || pl > EL_ACCEPT_MAX_PROMPT_BYTES) {
            failf(why, cap, "prompts[%d]: 1..%d bytes (got %zu)", i, EL_ACCEPT_MAX_PROMPT_BYTES, pl);
            goto out;
        }
        if (!(m->prompts[m->n_prompts++] = strdup(p->valuestring))) { failf(why, cap, "out of memory"); goto out; }
    }
    const cJSON *np2 = cJSON_GetObjectItemCaseSensitive(root, "n_predict");
    if (np2) {
        if (!cJSON_IsNumber(np2) || np2->valuedouble != floor(np2->valuedouble) || np2->valuedouble < 2 ||
            np2->valuedouble > 512) {
            failf(why, cap, "n_predict: an integer 2..512");
            goto out;
        }
        m->n_predict = (int)np2->valuedouble;
    }
    const cJSON *th = cJSON_GetObjectItemCaseSensitive(root, "thresholds");
    if (th) {
        if (!cJSON_IsObject(th)) { failf(why, cap, "thresholds: expected an object"); goto out; }
        if (dup_keys(th, dup, sizeof dup)) { failf(why, cap, "thresholds.%.60s: duplicate key", dup); goto out; }
        for (const cJSON *t = th->child; t; t = t->next) {
            int k = 0;
            while (k < EL_TH_COUNT && strcmp(k_th[k], t->string)) k++;
            if (k == EL_TH_COUNT) { failf(why, cap, "thresholds.%.60s: unknown threshold", t->string); goto out; }
            if (!cJSON_IsNumber(t) || !isfinite(t->valuedouble) || t->valuedouble < 0) {
                failf(why, cap, "thresholds.%s: expected a finite number >= 0", k_th[k]);
                goto out;
            }
            if (k == EL_TH_AGREE && t->valuedouble > 1) {
                failf(why, cap, "thresholds.%s: a fraction 0..1", k_th[k]);
                goto out;
            }
            m->th[k] = t->valuedouble;
        }
    }
    ok = build_cells(m, why, cap);
out:
    cJSON_Delete(root);
    return ok;
}

bool el_accept_matrix_read(const char *path, el_accept_matrix *m, uint8_t sha256[32], char *why, size_t cap) {
    memset(m, 0, sizeof *m);
    struct stat st;
    char msg[300];
    int fd = el_open_regular(path, &st, msg, sizeof msg);
    if (fd < 0) return failf(why, cap, "%s", msg);
    if ((uint64_t)st.st_size > EL_ACCEPT_MATRIX_MAX_BYTES) {
        close(fd);
        return failf(why, cap, "%s: %lld bytes, more than %u", path, (long long)st.st_size, EL_ACCEPT_MATRIX_MAX_BYTES);
    }
    char *buf = malloc((size_t)st.st_size + 1);
    if (!buf) { close(fd); return failf(why, cap, "out of memory"); }
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t r = read(fd, buf + got, (size_t)st.st_size - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    if (got != (size_t)st.st_size) { free(buf); return failf(why, cap, "%s: short read", path); }
    buf[got] = 0;
    if (sha256) crypto_hash_sha256(sha256, (const unsigned char *)buf, got);
    bool ok = el_accept_matrix_parse(buf, got, m, why, cap);
    free(buf);
    return ok;
}

void el_accept_matrix_free(el_accept_matrix *m) {
    for (int i = 0; i < m->n_prompts; i++) free(m->prompts[i]);
    m->n_prompts = 0;
}

void el_accept_cell_name(const el_accept_matrix *m, int cell, char *out, size_t cap) {
    size_t n = 0;
    out[0] = 0;
    for (int a = 0; a < EL_AX_COUNT && n < cap; a++) {
        if (m->n_val[a] < 2) continue;
        int w = snprintf(out + n, cap - n, "%s%s=%s", n ? "," : "", k_axis[a], m->val[a][m->cell[cell][a]]);
        if (w < 0) break;
        n += (size_t)w;
    }
    if (!out[0]) snprintf(out, cap, "reference");
}

bool el_accept_cell_expects_refusal(const el_accept_matrix *m, int cell) {
    for (int a = 0; a < EL_AX_COUNT; a++)
        if (m->refuse[a][m->cell[cell][a]]) return true;
    return false;
}
