/*
 * test_attention_split.c — the split decode (flash-decoding) of a one-token
 * step over a long F16 cache (attention_internal.h: el_attn_split_chunks,
 * el_attn_split_combine; attention_impl.h: el_attn_task_*_split).
 *
 * Asserts:
 *   - when it applies: one query token; on nth >= 2 threads a cache view of
 *     512+ cells (positions rounded up to 256, as llama.cpp pads it) or a
 *     sliding window of 512+ visible positions, cut into nth ranges; on one
 *     thread one range from 256 visible positions; never for batches;
 *   - its bits: every kernel level this CPU has, on 1, 2 and 3 threads, gives
 *     exactly the reference written out below — llama.cpp's split of a
 *     one-token step: ranges of ceil(n_kv / nth) cells, each from a fresh
 *     state in the one-row arithmetic (Q rounded to F16, ggml's F16 dot
 *     order, online softmax, F16 accumulator of V), combined in order as
 *     ggml's split-KV reduce does; one thread is the unsplit step, the same
 *     bits as the blocked kernel;
 *   - its accuracy: against exact attention (double precision), its largest
 *     error is no more than the unsplit F16 kernel's (the shorter F16
 *     accumulation chains make it smaller), within a small slack.
 *   - hostile scores (ties of the maximum, zeros, ±inf, NaN from K): the
 *     same bits at every level (the vector softmax's prefix-scan maximum);
 *   - row order (el_op_matmul_row_order, speculative verification): a few
 *     query rows in one call give each row the bits of its own one-token
 *     step, split or not, so verified drafts are what plain decoding picks.
 * Shapes: Gemma 3 270M (head_dim 256, 4 query heads on 1 KV head) global and
 * sliding (window 512, ring cache wrapping mid-range), TinyLlama (64, 32 on
 * 4), a head dim with a tail (80), and one query head per KV head.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/attention_internal.h"
#include "backend/cpu/ops.h"
#include "backend/cpu/threadpool.h"
#include "testutil.h"
#include "util/fp16.h"

static uint64_t rs = 0x1234567887654321ull;
static float urand(void) {
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (float)((double)(rs >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static int bits_equal(float a, float b) { return (isnan(a) && isnan(b)) || memcmp(&a, &b, sizeof a) == 0; }

/* ggml's F16 dot as the kernels run it: 4 × 16-lane FMA accumulators per 64
 * elements, the fixed reduction tree, the tail summed in double. */
static float dot16(const el_fp16 *k, const float *q, int n) {
    const int body = n / 64 * 64;
    double tail = 0.0;
    float lane[4][16];
    memset(lane, 0, sizeof lane);
    for (int b = 0; b < body; b += 64)
        for (int j = 0; j < 64; j++)
            lane[j / 16][j % 16] = fmaf(el_fp16_to_fp32(k[b + j]), q[b + j], lane[j / 16][j % 16]);
    if (body > 0) {
        float r[16], h8[8], h4[4];
        for (int l = 0; l < 16; l++) r[l] = (lane[0][l] + lane[2][l]) + (lane[1][l] + lane[3][l]);
        for (int l = 0; l < 8; l++) h8[l] = r[l + 8] + r[l];
        for (int l = 0; l < 4; l++) h4[l] = h8[l + 4] + h8[l];
        tail = (double)((h4[0] + h4[2]) + (h4[1] + h4[3]));
    }
    for (int j = body; j < n; j++) tail += (double)(el_fp16_to_fp32(k[j]) * q[j]);
    return (float)tail;
}

typedef struct { int hd, nh, nkv, window, ring, pos; float qs; } shape;

/* Row of position j in the cache. */
static int row_of(const shape *c, int j) { return c->ring > 0 ? j % c->ring : j; }

/* Positions [*j0, *j1) of range ch of nc: cells of ceil(n_kv / nc), n_kv the
 * positions rounded up to 256; a sliding layer's visible positions (ring or
 * flat cache alike) in near-equal parts. */
static void range_of(const shape *c, int nc, int ch, int *j0, int *j1) {
    const int lo = el_attn_lo(c->pos, c->window), len = c->pos - lo + 1;
    if (c->ring > 0 || c->window > 0) {
        el_split_range(len, ch, nc, j0, j1);
        *j0 += lo, *j1 += lo;
        return;
    }
    const int n_kv = (c->pos / 256 + 1) * 256, cs = (n_kv + nc - 1) / nc;
    *j0 = ch * cs < lo ? lo : ch * cs;
    *j1 = (ch + 1) * cs > c->pos + 1 ? c->pos + 1 : (ch + 1) * cs;
}

/* The reference of the split decode on nc ranges: out[n_head][hd]. */
static void ref_split(const shape *c, const float *q, const el_fp16 *kc, const el_fp16 *vc, int nc, float *out) {
    const int hd = c->hd, kv_row = c->nkv * hd, grp = c->nh / c->nkv;
    const float scale = 1.0f / sqrtf((float)hd);
    float *qf = malloc(sizeof(float) * hd), *o = malloc(sizeof(float) * hd);
    el_fp16 *acc = malloc(sizeof(el_fp16) * hd);
    for (int h = 0; h < c->nh; h++) {
        for (int i = 0; i < hd; i++) qf[i] = el_fp16_to_fp32(el_fp32_to_fp16(q[(size_t)h * hd + i]));
        const size_t koff = (size_t)(h / grp) * hd;
        float Mf = -INFINITY, Sf = 0.0f;
        memset(o, 0, sizeof(float) * hd);
        for (int ch = 0; ch < nc; ch++) {
            int a0, a1;
            range_of(c, nc, ch, &a0, &a1);
            float M = -INFINITY, S = 0.0f;
            memset(acc, 0, sizeof(el_fp16) * hd);
            for (int j = a0; j < a1; j++) {
                const el_fp16 *kr = kc + (size_t)row_of(c, j) * kv_row + koff;
                const el_fp16 *vr = vc + (size_t)row_of(c, j) * kv_row + koff;
                const float s = dot16(kr, qf, hd) * scale;
                float ms = 1.0f, vs = 1.0f;
                if (s > M) {
                    ms = expf(M - s);
                    M = s;
                    for (int i = 0; i < hd; i++) acc[i] = el_fp32_to_fp16(el_fp16_to_fp32(acc[i]) * ms);
                } else {
                    vs = expf(s - M);
                }
                for (int i = 0; i < hd; i++)
                    acc[i] = el_fp32_to_fp16(fmaf(el_fp16_to_fp32(vr[i]), vs, el_fp16_to_fp32(acc[i])));
                S = fmaf(S, ms, vs);
            }
            if (nc == 1) { /* the unsplit step */
                const float inv = S == 0.0f ? 0.0f : 1.0f / S;
                for (int i = 0; i < hd; i++) out[(size_t)h * hd + i] = el_fp16_to_fp32(acc[i]) * inv;
                break;
            }
            if (S == 0.0f) continue;
            const float Mn = M > Mf ? M : Mf; /* fmaxf: Mf may be -inf, M is not */
            const float a = expf(Mf - Mn), b = expf(M - Mn);
            for (int i = 0; i < hd; i++) {
                const float x = o[i] * a, y = el_fp16_to_fp32(acc[i]) * b;
                o[i] = x + y;
            }
            const float sa = Sf * a, sb = S * b;
            Sf = sa + sb;
            Mf = Mn;
        }
        if (nc == 1) continue;
        const float inv = Sf == 0.0f ? 0.0f : 1.0f / Sf;
        for (int i = 0; i < hd; i++) out[(size_t)h * hd + i] = o[i] * inv;
    }
    free(qf);
    free(o);
    free(acc);
}

/* Exact attention in double; returns max |out| over the step. */
static double ref_exact(const shape *c, const float *q, const el_fp16 *kc, const el_fp16 *vc, double *out) {
    const int hd = c->hd, kv_row = c->nkv * hd, grp = c->nh / c->nkv;
    const int lo = el_attn_lo(c->pos, c->window), len = c->pos - lo + 1;
    double *sc = malloc(sizeof(double) * len), mx = 0;
    for (int h = 0; h < c->nh; h++) {
        const size_t koff = (size_t)(h / grp) * hd;
        double M = -INFINITY, S = 0;
        for (int j = 0; j < len; j++) {
            const el_fp16 *kr = kc + (size_t)row_of(c, lo + j) * kv_row + koff;
            double s = 0;
            for (int i = 0; i < hd; i++) s += (double)el_fp16_to_fp32(kr[i]) * q[(size_t)h * hd + i];
            sc[j] = s / sqrt((double)hd);
            if (sc[j] > M) M = sc[j];
        }
        for (int i = 0; i < hd; i++) out[(size_t)h * hd + i] = 0;
        for (int j = 0; j < len; j++) {
            const double w = exp(sc[j] - M);
            S += w;
            const el_fp16 *vr = vc + (size_t)row_of(c, lo + j) * kv_row + koff;
            for (int i = 0; i < hd; i++) out[(size_t)h * hd + i] += w * el_fp16_to_fp32(vr[i]);
        }
        for (int i = 0; i < hd; i++) {
            out[(size_t)h * hd + i] /= S;
            if (fabs(out[(size_t)h * hd + i]) > mx) mx = fabs(out[(size_t)h * hd + i]);
        }
    }
    free(sc);
    return mx;
}

static el_pool *pools[4];

static void check_shape(const shape *c) {
    const int hd = c->hd, kv_row = c->nkv * hd, qn = c->nh * hd;
    const int rows = c->ring > 0 ? c->ring : c->pos + 1;
    el_fp16 *kc = malloc(sizeof(el_fp16) * (size_t)rows * kv_row), *vc = malloc(sizeof(el_fp16) * (size_t)rows * kv_row);
    float *q = malloc(sizeof(float) * qn), *want = malloc(sizeof(float) * qn), *got = malloc(sizeof(float) * qn);
    float *blocked = malloc(sizeof(float) * qn);
    double *exact = malloc(sizeof(double) * qn);
    for (size_t i = 0; i < (size_t)rows * kv_row; i++) {
        kc[i] = el_fp32_to_fp16(urand());
        vc[i] = el_fp32_to_fp16(urand() * (i % 37 == 0 ? 20.0f : 1.0f));
    }
    for (int i = 0; i < qn; i++) q[i] = urand() * c->qs;
    el_attn_args a = {.q = q, .out = got, .kcache = kc, .vcache = vc, .n = 1, .pos0 = c->pos, .n_head = c->nh,
                      .n_head_kv = c->nkv, .head_dim = hd, .window = c->window, .ring = c->ring,
                      .scale = 1.0f / sqrtf((float)hd)};
    for (int th = 1; th <= 3; th++)
        CHECKF(el_attn_split_chunks(&a, th) == th, "hd=%d heads=%d/%d pos=%d window=%d: %d ranges on %d threads", hd,
               c->nh, c->nkv, c->pos, c->window, el_attn_split_chunks(&a, th), th);
    el_cpu_level prev = (el_cpu_level)-1;
    for (int lv = EL_CPU_PORTABLE; lv <= EL_CPU_AVX512; lv++)
        for (int th = 1; th <= 3; th++) {
            ref_split(c, q, kc, vc, th, want);
            for (int i = 0; i < qn; i++) got[i] = -777.0f;
            a.out = got;
            const el_cpu_level ran = el_op_attention_at(pools[th], &a, (el_cpu_level)lv);
            if (ran == prev && th == 1) break; /* a level this CPU lacks: already run */
            if (th == 1) prev = ran;
            int bad = -1;
            for (int i = 0; i < qn && bad < 0; i++)
                if (!bits_equal(got[i], want[i])) bad = i;
            CHECKF(bad < 0, "%s threads=%d hd=%d heads=%d/%d pos=%d window=%d ring=%d: out[%d] %.9g vs reference %.9g",
                   el_cpu_level_name(ran), th, hd, c->nh, c->nkv, c->pos, c->window, c->ring, bad,
                   bad >= 0 ? got[bad] : 0.0, bad >= 0 ? want[bad] : 0.0);
        }
    /* one thread: the blocked kernel's bits */
    a.out = blocked;
    el_pool_run(pools[1], el_attn_task_portable, &a);
    ref_split(c, q, kc, vc, 1, want);
    int bad = -1;
    for (int i = 0; i < qn && bad < 0; i++)
        if (!bits_equal(blocked[i], want[i])) bad = i;
    CHECKF(bad < 0, "one range differs from the blocked kernel at %d", bad);
    /* accuracy against exact attention (2 threads), next to the unsplit kernel's */
    const int nc = 2;
    ref_split(c, q, kc, vc, nc, want);
    const double mx = ref_exact(c, q, kc, vc, exact);
    double e_split = 0, e_blocked = 0;
    for (int i = 0; i < qn; i++) {
        e_split = fmax(e_split, fabs(want[i] - exact[i]));
        e_blocked = fmax(e_blocked, fabs(blocked[i] - exact[i]));
    }
    e_split /= mx, e_blocked /= mx;
    printf("hd %3d heads %2d/%d pos %5d window %3d: %2d ranges, max error / max|out|: split %.2e, unsplit %.2e\n", hd,
           c->nh, c->nkv, c->pos, c->window, nc, e_split, e_blocked);
    CHECKF(e_split <= e_blocked * 1.25 + 2e-4, "split error %.3g above the unsplit kernel's %.3g", e_split, e_blocked);
    CHECKF(e_split < 1e-2, "split error %.3g", e_split); /* F16 accumulators: ~1e-3 a step */
    free(kc), free(vc), free(q), free(want), free(got), free(blocked), free(exact);
}

/*
 * Hostile scores: equal rows (exact ties of the running maximum), zero rows
 * (scores of 0), F16 infinities in K (scores of ±inf, inf - inf = NaN in the
 * softmax's arguments) and, with `nan_rows`, NaN in K (NaN scores). The
 * vector kernels' softmax finds the running maximum by a prefix scan, which
 * is exact only without NaN scores (they take the per-head loop); every
 * level on 1-3 threads must still give the reference's bits (NaN for NaN).
 */
static int th_print;
static void check_hostile(int hd, int nh, int nkv, int pos, int nan_rows) {
    const shape c = {hd, nh, nkv, 0, 0, pos, 1.0f};
    const int kv_row = nkv * hd, qn = nh * hd, rows = pos + 1;
    el_fp16 *kc = malloc(sizeof(el_fp16) * (size_t)rows * kv_row), *vc = malloc(sizeof(el_fp16) * (size_t)rows * kv_row);
    float *q = malloc(sizeof(float) * qn), *want = malloc(sizeof(float) * qn), *got = malloc(sizeof(float) * qn);
    for (size_t i = 0; i < (size_t)rows * kv_row; i++) {
        kc[i] = el_fp32_to_fp16(urand());
        vc[i] = el_fp32_to_fp16(urand());
    }
    for (int j = 1; j < rows; j++) {
        el_fp16 *r = kc + (size_t)j * kv_row;
        if (j % 5 == 0) memcpy(r, kc, sizeof(el_fp16) * kv_row); /* ties with row 0 */
        if (j % 7 == 0) memset(r, 0, sizeof(el_fp16) * kv_row);  /* scores of 0 */
        if (j == pos - 300) r[0] = 0x7C00;                        /* +inf × q: a score of +inf (KV head 0) */
        if (j % 89 == 5) r[(j / 89) % nkv * hd + 1] = 0xFC00;    /* -inf × q: a score of -inf */
        if (nan_rows && j % 151 == 7) r[0] = 0x7C00, r[1] = 0xFC00;   /* inf - inf: a NaN score (KV head 0) */
        if (nan_rows && j % 211 == 11) r[(j / 211) % hd] = 0x7E00; /* NaN (KV head 0) */
    }
    for (int i = 0; i < qn; i++) q[i] = i % hd < 2 ? fabsf(urand()) + 0.125f : urand(); /* q[0], q[1] > 0 */
    el_attn_args a = {.q = q, .out = got, .kcache = kc, .vcache = vc, .n = 1, .pos0 = pos, .n_head = nh,
                      .n_head_kv = nkv, .head_dim = hd, .scale = 1.0f / sqrtf((float)hd)};
    el_cpu_level prev = (el_cpu_level)-1;
    int finite = 0, nonfinite = 0;
    for (int lv = EL_CPU_PORTABLE; lv <= EL_CPU_AVX512; lv++)
        for (int th = 1; th <= 3; th++) {
            ref_split(&c, q, kc, vc, th, want);
            for (int i = 0; i < qn; i++) got[i] = -777.0f;
            const el_cpu_level ran = el_op_attention_at(pools[th], &a, (el_cpu_level)lv);
            if (ran == prev && th == 1) break;
            if (th == 1) prev = ran;
            int bad = -1;
            for (int i = 0; i < qn && bad < 0; i++)
                if (!bits_equal(got[i], want[i])) bad = i;
            for (int i = 0; i < qn; i++) finite += isfinite(want[i]) != 0, nonfinite += !isfinite(want[i]);
            CHECKF(bad < 0, "hostile%s %s threads=%d hd=%d heads=%d/%d: out[%d] %.9g vs reference %.9g",
                   nan_rows ? " (NaN)" : "", el_cpu_level_name(ran), th, hd, nh, nkv, bad, bad >= 0 ? got[bad] : 0.0,
                   bad >= 0 ? want[bad] : 0.0);
        }
    CHECKF(finite > 0 || (nan_rows && nkv == 1), "hostile case with no finite output: it checks nothing");
    if (th_print++ < 6) printf("hostile hd %3d heads %2d/%d%s: %d finite, %d not finite outputs, all levels equal\n", hd, nh,
                               nkv, nan_rows ? " NaN rows" : "", finite, nonfinite);
    free(kc), free(vc), free(q), free(want), free(got);
}

static void check_when(void) {
    el_attn_args a = {.n = 1, .pos0 = 255, .n_head = 4, .n_head_kv = 1, .head_dim = 256};
    CHECKF(el_attn_split_chunks(&a, 2) == 0, "position 255: a view of 256 cells, no split");
    CHECKF(el_attn_split_chunks(&a, 1) == 1, "one thread, 256 visible positions: one range");
    a.pos0 = 254;
    CHECKF(el_attn_split_chunks(&a, 1) == 0, "one thread, 255 visible positions: the blocked kernel");
    a.pos0 = 256;
    CHECKF(el_attn_split_chunks(&a, 2) == 2, "position 256: a view of 512 cells, 2 ranges on 2 threads");
    CHECKF(el_attn_split_chunks(&a, 4) == 4, "4 ranges on 4 threads");
    CHECKF(el_attn_split_chunks(&a, EL_ATT_SPLIT_MAX_CHUNKS + 1) == 0, "more threads than ranges allowed");
    a.pos0 = 100000;
    a.window = 512, a.ring = 1024;
    CHECKF(el_attn_split_chunks(&a, 2) == 2, "a sliding layer of 512 visible positions: split");
    a.window = 256, a.ring = 512;
    CHECKF(el_attn_split_chunks(&a, 2) == 0, "a window below 512: no split");
    a.window = 0, a.ring = 0;
    a.n = 2;
    CHECKF(el_attn_split_chunks(&a, 2) == 0, "two query tokens: no split");
    a.n = 1;
    a.n_head = 64, a.n_head_kv = 1, a.head_dim = 256; /* a group whose state does not fit a unit */
    CHECKF(el_attn_split_chunks(&a, 2) == 0, "64 × 256 query state: no split");
}

/* n rows at pos0.. in row order = n one-token steps, on 1-3 threads (rows at 512+ cells split on 2-3). */
static void check_row_order(int hd, int nh, int nkv, int pos0, int n) {
    const int kv_row = nkv * hd, qn = nh * hd, rows = pos0 + n;
    el_fp16 *kc = malloc(sizeof(el_fp16) * (size_t)rows * kv_row), *vc = malloc(sizeof(el_fp16) * (size_t)rows * kv_row);
    float *q = malloc(sizeof(float) * (size_t)qn * n), *rows_out = malloc(sizeof(float) * (size_t)qn * n);
    float *step = malloc(sizeof(float) * qn);
    for (size_t i = 0; i < (size_t)rows * kv_row; i++) kc[i] = el_fp32_to_fp16(urand()), vc[i] = el_fp32_to_fp16(urand());
    for (int i = 0; i < qn * n; i++) q[i] = urand() * 2.0f;
    for (int th = 1; th <= 3; th++) {
        el_attn_args a = {.q = q, .out = rows_out, .kcache = kc, .vcache = vc, .n = n, .pos0 = pos0, .n_head = nh,
                          .n_head_kv = nkv, .head_dim = hd, .scale = 1.0f / sqrtf((float)hd)};
        el_op_matmul_row_order(true);
        el_op_attention(pools[th], &a);
        el_op_matmul_row_order(false);
        int bad = -1, bad_row = -1;
        for (int r = 0; r < n && bad < 0; r++) {
            el_attn_args a1 = a;
            a1.n = 1, a1.pos0 = pos0 + r, a1.q = q + (size_t)r * qn, a1.out = step;
            el_op_attention(pools[th], &a1);
            for (int i = 0; i < qn && bad < 0; i++)
                if (!bits_equal(rows_out[(size_t)r * qn + i], step[i])) bad = i, bad_row = r;
        }
        CHECKF(bad < 0, "row order, %d threads, hd %d pos %d..%d: row %d out[%d] differs from its one-token step", th,
               hd, pos0, pos0 + n - 1, bad_row, bad);
    }
    free(kc), free(vc), free(q), free(rows_out), free(step);
}

int main(void) {
    for (int th = 1; th <= 3; th++) {
        pools[th] = el_pool_new(th);
        CHECK(pools[th] != NULL);
        if (!pools[th]) return el_test_finish("test_attention_split");
    }
    check_when();
    static const shape shapes[] = {
        {256, 4, 1, 0, 0, 300, 1.0f},     /* Gemma global, the shortest split: a view of 512 cells */
        {256, 4, 1, 0, 0, 511, 1.0f},     /* Gemma global, 512 positions */
        {256, 4, 1, 0, 0, 2100, 4.0f},    /* Gemma global, peaked scores */
        {256, 4, 1, 0, 0, 4500, 1.0f},    /* Gemma global, a long cache */
        {256, 4, 1, 512, 1024, 3500, 2.0f}, /* Gemma sliding layer, ring wrapping inside a range */
        {256, 4, 1, 512, 0, 3500, 2.0f},  /* the same sliding layer on a flat cache: the same ranges */
        {64, 32, 4, 0, 0, 700, 1.0f},     /* TinyLlama */
        {64, 32, 4, 0, 0, 2047, 8.0f},    /* TinyLlama, peaked */
        {80, 6, 2, 0, 0, 900, 2.0f},      /* head dim with a tail */
        {64, 4, 4, 600, 700, 1500, 1.0f}, /* one query head per KV head, odd ring */
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) check_shape(&shapes[i]);
    for (int nan_rows = 0; nan_rows <= 1; nan_rows++) {
        check_hostile(64, 32, 4, 1500, nan_rows);  /* TinyLlama: 8 heads of dim 64 per K/V row */
        check_hostile(256, 4, 1, 1500, nan_rows);  /* Gemma global: 4 heads */
        check_hostile(64, 12, 3, 1300, nan_rows);  /* 4 heads of dim 64 */
    }
    check_row_order(256, 4, 1, 250, 9); /* Gemma global: rows from a 256- to a 512-cell view */
    check_row_order(64, 32, 4, 900, 5); /* TinyLlama, every row split on 2-3 threads */
    check_row_order(64, 32, 4, 100, 5); /* no row splits: the one-row kernel as it was */
    for (int th = 1; th <= 3; th++) el_pool_free(pools[th]);
    return el_test_finish("test_attention_split");
}
