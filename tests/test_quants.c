/*
 * test_quants.c — dequantization, activation quantizers and CPU dot kernels.
 *
 * 1. Goldens (tests/data/quant_goldens.txt, from tests/tools/gen_quant_goldens.py
 *    with the gguf package): rows of real tensors of every weight type in the
 *    reference models, read raw at their recorded file offset, dequantized
 *    here and compared bit for bit (hash of all float bits, sampled values).
 *    Also gguf's Q8_0 quantization and numpy's float16 conversion.
 * 2. Properties of Q8_1, Q8_K, BF16 quantization.
 * 3. vec_dot for every weight type, portable and dispatched table, on real
 *    rows and on random blocks: vec_dot(x, quant(y)) against a double dot of
 *    dequant(x) and dequant(quant(y)), relative to sum |products|.
 * Without the reference models the self-contained checks still run, and the
 * test then exits 77 (skipped) if they passed.
 */
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/kernels.h"
#include "package/quants.h"
#include "package/quants_blocks.h"
#include "package/types.h"
#include "testutil.h"
#include "util/fp16.h"

#ifndef EL_SOURCE_DIR
#define EL_SOURCE_DIR "."
#endif

#define VD_TOL 1e-4 /* vec_dot error bound, relative to sum |x_i y_i| */

/* ------------------------------------------------------------ helpers */

static uint32_t lcg_next(uint32_t *s) { return *s = 1664525u * *s + 1013904223u; }
/* (s >> 8) / 2^23 - 1 in [-1, 1), exact in float (matches the generator). */
static float lcg_val(uint32_t *s) { return (float)((double)(lcg_next(s) >> 8) / 8388608.0 - 1.0); }

static uint64_t fnv64_floats(const float *v, int64_t n) {
    uint64_t h = 0xCBF29CE484222325ull;
    for (int64_t i = 0; i < n; ++i) {
        h ^= el_f32_to_bits(v[i]);
        h *= 0x100000001B3ull;
    }
    return h;
}

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Decodes hex into a malloc'd buffer; *len = bytes.  NULL on bad input. */
static uint8_t *hex_decode(const char *h, size_t *len) {
    size_t n = strlen(h);
    while (n && (h[n - 1] == '\n' || h[n - 1] == '\r' || h[n - 1] == ' ')) n--;
    if (n % 2) return NULL;
    uint8_t *b = malloc(n / 2 + 1);
    for (size_t i = 0; i < n / 2; ++i) {
        int hi = hexval(h[2 * i]), lo = hexval(h[2 * i + 1]);
        if (hi < 0 || lo < 0) { free(b); return NULL; }
        b[i] = (uint8_t)(hi << 4 | lo);
    }
    *len = n / 2;
    return b;
}

static const char *type_name(int t) { return el_type_name(t); }

/* strtok_r that yields "" (parsed as 0) instead of NULL on a short line. */
static char *tok(char *str, char **save) {
    char *t = strtok_r(str, " \n", save);
    return t ? t : (char *)"";
}

/* Dequantizes an activation row (any vec_dot_type) to double. */
static void deq_act(el_type t, const void *q, double *out, int n) {
    switch (t) {
    case EL_TYPE_F32:
        for (int i = 0; i < n; ++i) out[i] = ((const float *)q)[i];
        break;
    case EL_TYPE_F16:
        for (int i = 0; i < n; ++i) out[i] = el_fp16_to_fp32(((const el_fp16 *)q)[i]);
        break;
    case EL_TYPE_BF16:
        for (int i = 0; i < n; ++i) out[i] = el_bf16_to_fp32(((const el_bf16 *)q)[i]);
        break;
    case EL_TYPE_Q8_0: {
        const block_q8_0 *b = q;
        for (int i = 0; i < n; ++i) out[i] = (double)el_fp16_to_fp32(b[i / 32].d) * b[i / 32].qs[i % 32];
        break;
    }
    case EL_TYPE_Q8_1: {
        const block_q8_1 *b = q;
        for (int i = 0; i < n; ++i) out[i] = (double)el_fp16_to_fp32(b[i / 32].d) * b[i / 32].qs[i % 32];
        break;
    }
    case EL_TYPE_Q8_K: {
        const block_q8_K *b = q;
        for (int i = 0; i < n; ++i) out[i] = (double)b[i / 256].d * b[i / 256].qs[i % 256];
        break;
    }
    default:
        fprintf(stderr, "deq_act: unexpected type %d\n", t);
        abort();
    }
}

/* ------------------------------------------------------------ vec_dot checks */

typedef struct {
    int count;
    double max_rel;      /* max |vd - ref| / sum|x y| */
    double max_rel_plain; /* Q8_1 types: against the plain dequant dot (no s) */
} vd_stats;
static vd_stats g_vd[EL_TYPE_COUNT];

/*
 * Checks every kernel table's vec_dot for weight type wt on x (n elements)
 * with activations yf.  For Q4_1/Q5_1 the Q8_1 block's s = fp16(d * sum q)
 * replaces d16 * sum q in the min term (that is the format's definition);
 * the plain dequant dot is recorded separately for the report.
 */
static void check_vec_dot(el_type wt, const void *x, const float *yf, int n, const char *what) {
    const el_type_info *ti = el_type_get(wt);
    const el_cpu_type_kernels *tabs[2] = {el_cpu_kernels_portable(wt), el_cpu_kernels(wt)};
    CHECKF(tabs[0] && tabs[1], "%s: no kernels for %s", what, type_name(wt));
    if (!tabs[0] || !tabs[1] || !ti || !ti->to_float) return;
    CHECKF(tabs[0]->vec_dot_type == tabs[1]->vec_dot_type, "%s: vec_dot_type differs", what);
    const el_type vt = tabs[0]->vec_dot_type;
    const el_type_info *vi = el_type_get(vt);
    CHECKF(vi && vi->from_float, "%s: vec_dot_type %s has no from_float", what, type_name(vt));
    if (!vi || !vi->from_float) return;

    float *xd = malloc((size_t)n * sizeof(float));
    double *yd = malloc((size_t)n * sizeof(double));
    void *yq = aligned_alloc(64, (el_row_size(vt, n) + 63) / 64 * 64);
    ti->to_float(x, xd, n);
    vi->from_float(yf, yq, n);
    deq_act(vt, yq, yd, n);

    double ref = 0, abssum = 0;
    for (int i = 0; i < n; ++i) {
        ref += (double)xd[i] * yd[i];
        abssum += fabs((double)xd[i] * yd[i]);
    }
    double ref_s = ref; /* Q8_1: min term from s */
    if (vt == EL_TYPE_Q8_1) {
        const block_q8_1 *yb = yq;
        ref_s = 0;
        for (int b = 0; b < n / 32; ++b) {
            const float m = wt == EL_TYPE_Q4_1 ? el_fp16_to_fp32(((const block_q4_1 *)x)[b].m)
                                               : el_fp16_to_fp32(((const block_q5_1 *)x)[b].m);
            for (int i = 32 * b; i < 32 * b + 32; ++i) ref_s += ((double)xd[i] - m) * yd[i];
            ref_s += (double)m * el_fp16_to_fp32(yb[b].s);
        }
    }
    for (int k = 0; k < 2; ++k) {
        if (k == 1 && tabs[1]->vec_dot == tabs[0]->vec_dot) break;
        float s = NAN;
        tabs[k]->vec_dot(n, &s, x, yq);
        const double denom = abssum > 0 ? abssum : 1e-30;
        const double rel = fabs((double)s - ref_s) / denom;
        CHECKF(isfinite(s) && rel < VD_TOL, "%s: %s vec_dot (%s) = %.9g, ref %.9g (rel %.3g of sum|xy| %.6g)",
               what, type_name(wt), k ? "dispatched" : "portable", s, ref_s, rel, abssum);
        vd_stats *st = &g_vd[wt];
        st->count++;
        if (rel > st->max_rel) st->max_rel = rel;
        const double relp = fabs((double)s - ref) / denom;
        if (relp > st->max_rel_plain) st->max_rel_plain = relp;
    }
    free(xd);
    free(yd);
    free(yq);
}

/* Random activations: smooth values, with a few outliers when `spiky`. */
static void make_acts(float *y, int n, uint32_t seed, float scale, int spiky) {
    uint32_t s = seed;
    for (int i = 0; i < n; ++i) {
        y[i] = lcg_val(&s) * scale;
        if (spiky && (lcg_next(&s) % 61) == 0) y[i] *= 40.0f;
    }
}

/* ------------------------------------------------------------ 1. goldens */

typedef struct {
    char path[256], name[128];
    int type;
    int64_t ne0, nrows, off;
    uint8_t *rows; /* up to 4 consecutive rows from row 0 (for vec_dot) */
    int64_t nvd;   /* elements in rows */
} golden_tensor;

static int read_at(const char *path, int64_t off, void *buf, size_t len) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    int ok = fseeko(f, (off_t)off, SEEK_SET) == 0 && fread(buf, 1, len, f) == len;
    fclose(f);
    return ok ? 0 : -1;
}

static int g_rows_checked, g_tensors_checked, g_quant_vecs;
static int g_types_seen[EL_TYPE_COUNT];

static void check_row(const golden_tensor *t, char *line) {
    /* R <row> <hash> <sum> <sumsq> <k> (<idx> <val>)* */
    char *save = NULL;
    tok(line, &save); /* "R" */
    int64_t row = strtoll(tok(NULL, &save), NULL, 10);
    uint64_t hash = strtoull(tok(NULL, &save), NULL, 16);
    double sum = strtod(tok(NULL, &save), NULL);
    double sumsq = strtod(tok(NULL, &save), NULL);
    int k = atoi(tok(NULL, &save));

    const el_type_info *ti = el_type_get(t->type);
    CHECKF(ti && ti->to_float, "%s: type %d has no to_float", t->name, t->type);
    if (!ti || !ti->to_float) return;
    const size_t rb = el_row_size((el_type)t->type, t->ne0);
    uint8_t *raw = malloc(rb);
    float *v = malloc((size_t)t->ne0 * sizeof(float));
    if (read_at(t->path, t->off + row * (int64_t)rb, raw, rb)) {
        CHECKF(0, "cannot read %s row %" PRId64, t->path, row);
        goto out;
    }
    ti->to_float(raw, v, t->ne0);
    const uint64_t h = fnv64_floats(v, t->ne0);
    CHECKF(h == hash, "%s %s (%s) row %" PRId64 ": hash %016" PRIx64 " != %016" PRIx64,
           t->path, t->name, type_name(t->type), row, h, hash);
    double s = 0, s2 = 0, sa = 0;
    for (int64_t i = 0; i < t->ne0; ++i) {
        s += v[i];
        s2 += (double)v[i] * v[i];
        sa += fabs(v[i]);
    }
    CHECKF(fabs(s - sum) <= 1e-12 * sa + 1e-300, "%s row %" PRId64 ": sum %.17g != %.17g", t->name, row, s, sum);
    CHECKF(fabs(s2 - sumsq) <= 1e-12 * sumsq + 1e-300, "%s row %" PRId64 ": sumsq %.17g != %.17g", t->name, row, s2,
           sumsq);
    int bad = 0;
    for (int j = 0; j < k; ++j) {
        int64_t idx = strtoll(tok(NULL, &save), NULL, 10);
        float want = strtof(tok(NULL, &save), NULL);
        if (idx < 0 || idx >= t->ne0 || el_f32_to_bits(v[idx]) != el_f32_to_bits(want)) {
            if (bad++ < 3)
                fprintf(stderr, "  %s %s row %" PRId64 " [%" PRId64 "]: %.9g != %.9g\n", t->path, t->name, row, idx,
                        idx >= 0 && idx < t->ne0 ? v[idx] : NAN, want);
        }
    }
    CHECKF(bad == 0, "%s (%s) row %" PRId64 ": %d sampled values differ", t->name, type_name(t->type), row, bad);
    g_rows_checked++;
out:
    free(raw);
    free(v);
}

/* Builds the activation vector described by "L seed scale n" or "X n v...". */
static float *parse_vec(char **save, int *n) {
    const char *kind = tok(NULL, save);
    if (!strcmp(kind, "L")) {
        uint32_t seed = (uint32_t)strtoul(tok(NULL, save), NULL, 10);
        float scale = strtof(tok(NULL, save), NULL);
        *n = atoi(tok(NULL, save));
        float *x = malloc((size_t)*n * sizeof(float));
        for (int i = 0; i < *n; ++i) x[i] = lcg_val(&seed) * scale;
        return x;
    }
    if (!strcmp(kind, "X")) {
        *n = atoi(tok(NULL, save));
        float *x = malloc((size_t)*n * sizeof(float));
        for (int i = 0; i < *n; ++i) x[i] = strtof(tok(NULL, save), NULL);
        return x;
    }
    return NULL;
}

static void check_quant_line(char *line) {
    char *save = NULL;
    const char *what = tok(line, &save);
    int n = 0;
    float *x = parse_vec(&save, &n);
    const char *hex = tok(NULL, &save);
    size_t len = 0;
    uint8_t *want = *hex ? hex_decode(hex, &len) : NULL;
    CHECKF(x && want, "bad golden line for %s", what);
    if (!x || !want) goto out;
    const el_type t = !strcmp(what, "Q8_0") ? EL_TYPE_Q8_0 : EL_TYPE_F16;
    const size_t rb = el_row_size(t, n);
    CHECKF(rb == len, "%s: %zu bytes expected, golden has %zu", what, rb, len);
    if (rb != len) goto out;
    uint8_t *got = malloc(rb);
    if (t == EL_TYPE_Q8_0) el_quant_q8_0(x, got, n);
    else el_quant_f16(x, got, n);
    size_t first = rb;
    for (size_t i = 0; i < rb; ++i)
        if (got[i] != want[i]) { first = i; break; }
    CHECKF(first == rb, "%s of %d values: byte %zu is %02x, gguf says %02x", what, n, first,
           first < rb ? got[first] : 0, first < rb ? want[first] : 0);
    g_quant_vecs++;
    free(got);
out:
    free(x);
    free(want);
}

static int run_goldens(int have_ref) {
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/quant_goldens.txt", EL_SOURCE_DIR);
    FILE *f = fopen(path, "r");
    if (!f) f = fopen("tests/data/quant_goldens.txt", "r");
    CHECKF(f != NULL, "cannot open %s", path);
    if (!f) return 0;
    static char line[1 << 16];
    golden_tensor cur = {0};
    int have_cur = 0;
    golden_tensor *vd = NULL;
    int nvd = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n') continue;
        if (!strncmp(line, "T ", 2)) {
            if (!have_ref) { have_cur = 0; continue; }
            memset(&cur, 0, sizeof cur);
            char rel[256];
            if (sscanf(line, "T %255s %127s %d %" SCNd64 " %" SCNd64 " %" SCNd64, rel, cur.name, &cur.type, &cur.ne0,
                       &cur.nrows, &cur.off) != 6) {
                CHECKF(0, "bad T line: %s", line);
                have_cur = 0;
                continue;
            }
            snprintf(cur.path, sizeof cur.path, "%s", el_test_ref_path(rel));
            have_cur = 1;
            g_tensors_checked++;
            if (cur.type >= 0 && cur.type < EL_TYPE_COUNT) g_types_seen[cur.type] = 1;
            /* keep up to 4 rows (from row 0) of one tensor per (type, file) for vec_dot */
            const int64_t nr = cur.nrows < 4 ? cur.nrows : 4;
            const size_t rb = el_row_size((el_type)cur.type, cur.ne0);
            if (rb) {
                cur.rows = malloc(rb * (size_t)nr);
                cur.nvd = nr * cur.ne0;
                if (read_at(cur.path, cur.off, cur.rows, rb * (size_t)nr)) {
                    CHECKF(0, "cannot read %s", cur.path);
                    free(cur.rows);
                    cur.rows = NULL;
                } else {
                    vd = realloc(vd, sizeof *vd * (size_t)(nvd + 1));
                    vd[nvd++] = cur;
                }
            }
        } else if (!strncmp(line, "R ", 2)) {
            if (have_cur) check_row(&cur, line);
        } else if (!strncmp(line, "Q8_0 ", 5) || !strncmp(line, "F16 ", 4)) {
            check_quant_line(line);
        } else {
            CHECKF(0, "unknown golden line: %.40s", line);
        }
    }
    fclose(f);

    /* vec_dot on real rows: one row, and up to 4 rows as one long vector */
    for (int i = 0; i < nvd; ++i) {
        golden_tensor *t = &vd[i];
        const el_type_info *ti = el_type_get(t->type);
        if (ti && ti->weights_supported) {
            float *y = malloc((size_t)t->nvd * sizeof(float));
            char what[512];
            for (int spiky = 0; spiky < 2; ++spiky) {
                make_acts(y, (int)t->nvd, 1000u + (uint32_t)i * 7u + (uint32_t)spiky, spiky ? 0.5f : 2.0f, spiky);
                snprintf(what, sizeof what, "%s:%s[row 0]", t->path, t->name);
                check_vec_dot((el_type)t->type, t->rows, y, (int)t->ne0, what);
                if (t->nvd > t->ne0) {
                    snprintf(what, sizeof what, "%s:%s[rows 0..%" PRId64 "]", t->path, t->name,
                             t->nvd / t->ne0 - 1);
                    check_vec_dot((el_type)t->type, t->rows, y, (int)t->nvd, what);
                }
            }
            free(y);
        }
        free(t->rows);
    }
    free(vd);
    return g_rows_checked;
}

/* ------------------------------------------------------------ 2. quantizer properties */

static void fill_test_vector(float *x, int n, int variant) {
    uint32_t s = 77u + (uint32_t)variant;
    const float scales[] = {1.0f, 1e-4f, 300.0f, 1e-20f, 5e3f};
    for (int i = 0; i < n; ++i) x[i] = lcg_val(&s) * scales[variant % 5];
    if (variant == 1) /* an all-zero first block and an outlier */
        for (int i = 0; i < 256 && i < n; ++i) x[i] = 0.0f;
    if (variant >= 2 && n > 300) x[300] = -scales[variant % 5] * 9.0f;
}

static void test_q8_1_props(void) {
    enum { N = 1024 };
    float x[N];
    block_q8_1 q[N / 32];
    for (int v = 0; v < 5; ++v) {
        fill_test_vector(x, N, v);
        el_quant_q8_1(x, q, N);
        int bad = 0;
        for (int b = 0; b < N / 32; ++b) {
            float amax = 0;
            for (int j = 0; j < 32; ++j) amax = fmaxf(amax, fabsf(x[32 * b + j]));
            const float d = amax / 127.0f;
            int sum = 0;
            for (int j = 0; j < 32; ++j) {
                sum += q[b].qs[j];
                const double want = d ? (double)x[32 * b + j] / d : 0.0;
                if (fabs(q[b].qs[j] - want) > 0.5 + 1e-5) bad++;
            }
            if (q[b].d != el_fp32_to_fp16(d)) bad++;
            if (q[b].s != el_fp32_to_fp16((float)sum * d)) bad++;
        }
        CHECKF(bad == 0, "Q8_1 variant %d: %d property violations", v, bad);
    }
    /* ties round half away from zero (roundf), as ggml's q8_1_ref */
    float t[32] = {127.0f, 0.5f, -0.5f, 2.5f, -2.5f};
    el_quant_q8_1(t, q, 32);
    CHECK(q[0].qs[1] == 1 && q[0].qs[2] == -1 && q[0].qs[3] == 3 && q[0].qs[4] == -3 && q[0].qs[0] == 127);
    CHECK(el_fp16_to_fp32(q[0].d) == 1.0f && el_fp16_to_fp32(q[0].s) == 127.0f);
}

static void test_q8_k_props(void) {
    enum { N = 1024 };
    float x[N];
    block_q8_K q[N / 256];
    for (int v = 0; v < 5; ++v) {
        fill_test_vector(x, N, v);
        memset(q, 0x5a, sizeof q);
        el_quant_q8_k(x, q, N);
        int bad = 0;
        for (int b = 0; b < N / 256; ++b) {
            float amax = 0, max = 0;
            for (int j = 0; j < 256; ++j) {
                const float a = fabsf(x[256 * b + j]);
                if (a > amax) { amax = a; max = x[256 * b + j]; }
            }
            if (amax == 0) {
                if (q[b].d != 0.0f) bad++;
                for (int j = 0; j < 256; ++j) bad += q[b].qs[j] != 0;
                for (int g = 0; g < 16; ++g) bad += q[b].bsums[g] != 0;
                continue;
            }
            const float iscale = -127.0f / max;
            if (q[b].d != 1.0f / iscale) bad++;
            for (int j = 0; j < 256; ++j) {
                const double want = (double)x[256 * b + j] / q[b].d;
                if (fabs(q[b].qs[j] - want) > 0.5 + 1e-4) bad++;
                if (x[256 * b + j] == max && q[b].qs[j] != -127) bad++;
            }
            for (int g = 0; g < 16; ++g) {
                int s = 0;
                for (int l = 0; l < 16; ++l) s += q[b].qs[16 * g + l];
                if (q[b].bsums[g] != s) bad++;
            }
        }
        CHECKF(bad == 0, "Q8_K variant %d: %d property violations", v, bad);
    }
    /* ggml's nearest_int rounds half to even: max = -127 gives iscale = 1 */
    float t[256] = {-127.0f, 0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 126.5f};
    el_quant_q8_k(t, q, 256);
    CHECK(q[0].d == 1.0f);
    CHECK(q[0].qs[0] == -127 && q[0].qs[1] == 0 && q[0].qs[2] == 2 && q[0].qs[3] == 2);
    CHECK(q[0].qs[4] == 0 && q[0].qs[5] == -2 && q[0].qs[6] == -2 && q[0].qs[7] == 126);
    CHECK(q[0].bsums[0] == -127 + 0 + 2 + 2 + 0 - 2 - 2 + 126);
}

static void test_bf16_f32(void) {
    enum { N = 512 };
    float x[N], back[N];
    el_bf16 h[N];
    uint32_t s = 99;
    for (int i = 0; i < N; ++i) x[i] = lcg_val(&s) * (i % 3 == 0 ? 1e-30f : i % 3 == 1 ? 1.0f : 1e30f);
    x[0] = 1.0f + 0x1p-8f;            /* tie, even below: 1.0 */
    x[1] = 1.0f + 3 * 0x1p-8f;        /* tie, even above: 1 + 2^-6 */
    x[2] = -0.0f;
    el_quant_bf16(x, h, N);
    el_dequant_bf16(h, back, N);
    int bad = 0;
    for (int i = 0; i < N; ++i) {
        const uint32_t u = el_f32_to_bits(x[i]);
        const float lo = el_bits_to_f32(u & 0xFFFF0000u), hi = el_bits_to_f32((u & 0xFFFF0000u) + 0x10000u);
        const double dl = fabs((double)x[i] - lo), dh = fabs((double)x[i] - hi);
        const float want = dl < dh ? lo : dh < dl ? hi : (((u >> 16) & 1) ? hi : lo);
        if (el_f32_to_bits(back[i]) != el_f32_to_bits(want)) bad++;
    }
    CHECKF(bad == 0, "BF16 rounding: %d values not nearest-even", bad);
    CHECK(back[0] == 1.0f && back[1] == 1.0f + 0x1p-6f && el_f32_to_bits(back[2]) == 0x80000000u);
    /* F32 "quantization" is a copy */
    float c[N];
    el_quant_f32(x, c, N);
    CHECK(memcmp(c, x, sizeof c) == 0);
    el_dequant_f32(x, c, N);
    CHECK(memcmp(c, x, sizeof c) == 0);
}

/* ------------------------------------------------------------ 3b. random blocks */

/* Random bytes for n elements of type t with sane scale fields. */
static void *random_weights(el_type t, int n, uint32_t seed) {
    const size_t rb = el_row_size(t, n);
    uint8_t *p = aligned_alloc(64, (rb + 63) / 64 * 64);
    uint32_t s = seed;
    for (size_t i = 0; i < rb; ++i) p[i] = (uint8_t)(lcg_next(&s) >> 24);
#define HALF(scale) el_fp32_to_fp16(lcg_val(&s) * (scale))
    const int nb = n / el_type_get(t)->blck_size;
    for (int b = 0; b < nb; ++b) {
        switch (t) {
        case EL_TYPE_F32:
            for (int i = 0; i < n; ++i) ((float *)p)[i] = lcg_val(&s);
            return p;
        case EL_TYPE_F16:
            for (int i = 0; i < n; ++i) ((el_fp16 *)p)[i] = HALF(1.0f);
            return p;
        case EL_TYPE_BF16:
            for (int i = 0; i < n; ++i) ((el_bf16 *)p)[i] = el_fp32_to_bf16(lcg_val(&s));
            return p;
        case EL_TYPE_Q4_0: ((block_q4_0 *)p)[b].d = HALF(0.1f); break;
        case EL_TYPE_Q4_1: ((block_q4_1 *)p)[b].d = HALF(0.1f); ((block_q4_1 *)p)[b].m = HALF(1.0f); break;
        case EL_TYPE_Q5_0: ((block_q5_0 *)p)[b].d = HALF(0.1f); break;
        case EL_TYPE_Q5_1: ((block_q5_1 *)p)[b].d = HALF(0.1f); ((block_q5_1 *)p)[b].m = HALF(1.0f); break;
        case EL_TYPE_Q8_0: ((block_q8_0 *)p)[b].d = HALF(0.01f); break;
        case EL_TYPE_Q2_K: ((block_q2_K *)p)[b].d = HALF(0.1f); ((block_q2_K *)p)[b].dmin = HALF(0.1f); break;
        case EL_TYPE_Q3_K: ((block_q3_K *)p)[b].d = HALF(0.1f); break;
        case EL_TYPE_Q4_K: ((block_q4_K *)p)[b].d = HALF(0.01f); ((block_q4_K *)p)[b].dmin = HALF(0.01f); break;
        case EL_TYPE_Q5_K: ((block_q5_K *)p)[b].d = HALF(0.01f); ((block_q5_K *)p)[b].dmin = HALF(0.01f); break;
        case EL_TYPE_Q6_K: ((block_q6_K *)p)[b].d = HALF(0.01f); break;
        case EL_TYPE_IQ4_NL: ((block_iq4_nl *)p)[b].d = HALF(0.01f); break;
        case EL_TYPE_IQ4_XS: ((block_iq4_xs *)p)[b].d = HALF(0.01f); break;
        case EL_TYPE_MXFP4: ((block_mxfp4 *)p)[b].e = (uint8_t)(110 + lcg_next(&s) % 30); break; /* 2^-18 .. 2^11 */
        default: break;
        }
    }
#undef HALF
    return p;
}

static const el_type k_weight_types[] = {
    EL_TYPE_F32, EL_TYPE_F16, EL_TYPE_BF16, EL_TYPE_Q4_0, EL_TYPE_Q4_1, EL_TYPE_Q5_0, EL_TYPE_Q5_1,
    EL_TYPE_Q8_0, EL_TYPE_Q2_K, EL_TYPE_Q3_K, EL_TYPE_Q4_K, EL_TYPE_Q5_K, EL_TYPE_Q6_K, EL_TYPE_IQ4_NL,
    EL_TYPE_IQ4_XS, EL_TYPE_MXFP4,
};
#define N_WEIGHT_TYPES (int)(sizeof k_weight_types / sizeof k_weight_types[0])

static void test_random_blocks(void) {
    const int sizes[] = {256, 2048, 4096 + 256};
    for (int w = 0; w < N_WEIGHT_TYPES; ++w) {
        const el_type t = k_weight_types[w];
        for (int si = 0; si < 3; ++si) {
            const int n = sizes[si];
            for (int rep = 0; rep < 3; ++rep) {
                void *x = random_weights(t, n, 5u + 131u * (uint32_t)w + 17u * (uint32_t)si + (uint32_t)rep);
                float *y = malloc((size_t)n * sizeof(float));
                make_acts(y, n, 900u + (uint32_t)rep, rep == 2 ? 1e-3f : 3.0f, rep == 1);
                char what[96];
                snprintf(what, sizeof what, "random %s n=%d rep %d", type_name(t), n, rep);
                check_vec_dot(t, x, y, n, what);
                free(x);
                free(y);
            }
        }
    }
}

/* Dequantization of hand-made blocks whose values are known. */
static void test_known_blocks(void) {
    float out[256];
    block_q4_0 b40 = {.d = el_fp32_to_fp16(0.5f)};
    for (int j = 0; j < 16; ++j) b40.qs[j] = (uint8_t)(j | (15 - j) << 4);
    el_dequant_q4_0(&b40, out, 32);
    int bad = 0;
    for (int j = 0; j < 16; ++j) bad += out[j] != 0.5f * (j - 8) || out[j + 16] != 0.5f * (7 - j);
    CHECKF(bad == 0, "Q4_0 known block");

    block_q5_0 b50 = {.d = el_fp32_to_fp16(1.0f), .qh = {0x01, 0x00, 0x00, 0x80}};
    memset(b50.qs, 0, sizeof b50.qs);
    el_dequant_q5_0(&b50, out, 32);
    CHECK(out[0] == 0.0f && out[1] == -16.0f && out[31] == 0.0f && out[16] == -16.0f);

    block_iq4_xs bx = {.d = el_fp32_to_fp16(1.0f), .scales_h = 0xFFFF, .scales_l = {0xFF, 0xFF, 0x10, 0x20}};
    memset(bx.qs, 0xF0, sizeof bx.qs); /* low nibble 0 -> -127, high 15 -> 113 */
    el_dequant_iq4_xs(&bx, out, 256);
    CHECK(out[0] == 31.0f * -127.0f && out[16] == 31.0f * 113.0f);     /* ls = 63 */
    CHECK(out[128] == 16.0f * -127.0f && out[160] == 17.0f * -127.0f); /* ls = 48 | 0, 48 | 1 */

    block_q3_K b3;
    memset(&b3, 0, sizeof b3);
    b3.d = el_fp32_to_fp16(1.0f);
    memset(b3.hmask, 0xFF, sizeof b3.hmask); /* no -4 */
    b3.scales[0] = 0x21;  /* sub-block 0: low 1, sub-block 8: low 2 */
    b3.scales[8] = 0x92;  /* sub-block 0: hi 2 (=33 -> +1), 4: hi 0, 8: hi 1 (=18 -> -14), 12: hi 2 */
    b3.qs[0] = 0x03;      /* element 0: 3 */
    el_dequant_q3_k(&b3, out, 256);
    CHECK(out[0] == 3.0f && out[1] == 0.0f);
    CHECK(el_q3k_scale(0, b3.scales) == 33 && el_q3k_scale(8, b3.scales) == 18 && el_q3k_scale(4, b3.scales) == 0 &&
          el_q3k_scale(12, b3.scales) == 32);
}

/* ------------------------------------------------------------ dispatch */

static void test_dispatch(void) {
    for (int t = 0; t < EL_TYPE_COUNT; ++t) {
        const el_type_info *ti = el_type_get(t);
        const el_cpu_type_kernels *p = el_cpu_kernels_portable((el_type)t);
        const el_cpu_type_kernels *k = el_cpu_kernels((el_type)t);
        const int want = ti && ti->weights_supported;
        CHECKF(!!p == want && !!k == want, "type %s: kernels %p/%p, weights_supported %d", type_name(t), (void *)p,
               (void *)k, want);
        if (p && k) {
            CHECK(p->vec_dot_type == k->vec_dot_type);
            const el_type_info *vi = el_type_get(p->vec_dot_type);
            CHECKF(vi && vi->from_float, "%s: vec_dot_type %s not quantizable", type_name(t), type_name(p->vec_dot_type));
            CHECKF(ti->to_float != NULL, "%s: weights supported but no to_float", type_name(t));
        }
    }
    CHECK(el_cpu_kernels((el_type)-1) == NULL && el_cpu_kernels(EL_TYPE_COUNT) == NULL);
    CHECK(el_cpu_kernels_portable(EL_TYPE_COUNT) == NULL);
}

int main(void) {
    const int have_ref = el_test_have_ref();
    test_dispatch();
    test_known_blocks();
    test_q8_1_props();
    test_q8_k_props();
    test_bf16_f32();
    test_random_blocks();
    run_goldens(have_ref);
    if (have_ref) {
        const el_type must[] = {EL_TYPE_F32, EL_TYPE_F16, EL_TYPE_BF16, EL_TYPE_Q4_0, EL_TYPE_Q4_1,
                                EL_TYPE_Q5_0, EL_TYPE_Q5_1, EL_TYPE_Q8_0, EL_TYPE_Q2_K, EL_TYPE_Q3_K,
                                EL_TYPE_Q4_K, EL_TYPE_Q5_K, EL_TYPE_Q6_K, EL_TYPE_IQ4_NL, EL_TYPE_IQ4_XS};
        for (size_t i = 0; i < sizeof must / sizeof must[0]; ++i)
            CHECKF(g_types_seen[must[i]], "no golden rows of type %s", type_name(must[i]));
    }
    printf("goldens: %d tensors, %d rows dequantized bit-exactly checked, %d quantizer vectors%s\n",
           g_tensors_checked, g_rows_checked, g_quant_vecs, have_ref ? "" : " (reference models absent)");
    printf("vec_dot max |err| / sum|x*y| per type (Q4_1/Q5_1: vs s-term ref; plain dequant dot in brackets):\n");
    for (int t = 0; t < EL_TYPE_COUNT; ++t)
        if (g_vd[t].count)
            printf("  %-7s %4d checks  max %.3g  [plain %.3g]\n", type_name(t), g_vd[t].count, g_vd[t].max_rel,
                   g_vd[t].max_rel_plain);
    if (!have_ref && el_test_failures == 0) {
        el_test_finish("test_quants");
        el_test_skip("reference models absent (self-contained checks passed)");
    }
    return el_test_finish("test_quants");
}
