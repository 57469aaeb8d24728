/*
 * test_moe.c — the mixture-of-experts FFN (backend/cpu/moe.c) and the MoE
 * architectures' loaders (runtime/arch/qwen3moe.c, qwen2moe.c).
 *
 * 1. el_op_moe against a plain double-precision reference on random F32
 *    weights (softmax, top-k with renormalisation or not, SiLU-gated experts,
 *    the sigmoid-gated shared expert), within float rounding; and with row
 *    order on, every row of a batch has exactly the bits it has alone (rows
 *    grouped by expert change nothing). Scratch size arithmetic refuses
 *    nonsense and overflow.
 * 2. Hostile files: copies of tiny-qwen3moe-F16 / tiny-qwen2moe-F16 with one
 *    metadata value or tensor patched in place — expert_count 0 and 2^20,
 *    expert_used_count above expert_count or 0, expert_feed_forward_length 0,
 *    a missing key, a missing expert tensor or router, an expert tensor with
 *    the wrong expert count, a misshaped shared expert — are refused at load
 *    with the code and a message naming the key or the tensor.
 * 3. The memory plan counts expert bytes: all of them, and what one token reads.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/cpu/ops.h"
#include "backend/cpu/threadpool.h"
#include "edgellm.h"
#include "runtime/model.h"
#include "testutil.h"

/* ---- 1. the kernel ---------------------------------------------------------- */

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static float frand(void) { /* uniform in [-1, 1) */
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return (float)((double)(g_rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static float *rand_mat(size_t n, float scale) {
    float *a = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) a[i] = frand() * scale;
    return a;
}

static el_mat f32_mat(const float *w, int64_t ne0, int64_t ne1) {
    return (el_mat){.type = EL_TYPE_F32, .ne0 = ne0, .ne1 = ne1, .data = w, .row_bytes = sizeof(float) * (size_t)ne0};
}

/* y = W x in double, W rows of k */
static void mv(const float *W, const float *x, int rows, int k, double *y) {
    for (int r = 0; r < rows; r++) {
        double s = 0;
        for (int i = 0; i < k; i++) s += (double)W[(size_t)r * k + i] * x[i];
        y[r] = s;
    }
}

static void ref_expert(const float *g, const float *u, const float *dn, const float *x, int d, int F, double *out) {
    double *gg = malloc(sizeof(double) * F), *uu = malloc(sizeof(double) * F);
    float *hf = malloc(sizeof(float) * F);
    mv(g, x, F, d, gg);
    mv(u, x, F, d, uu);
    for (int i = 0; i < F; i++) hf[i] = (float)(gg[i] / (1.0 + exp(-gg[i])) * uu[i]);
    mv(dn, hf, d, F, out);
    free(gg), free(uu), free(hf);
}

static void kernel_case(int NE, int K, bool norm_w, bool shared, int n) {
    enum { D = 64, F = 48, FS = 80 };
    float *router = rand_mat((size_t)NE * D, 0.6f);
    float *G = rand_mat((size_t)NE * F * D, 0.15f), *U = rand_mat((size_t)NE * F * D, 0.15f);
    float *Dn = rand_mat((size_t)NE * D * F, 0.15f);
    float *si = rand_mat(D, 0.2f), *sg = rand_mat((size_t)FS * D, 0.15f), *su = rand_mat((size_t)FS * D, 0.15f);
    float *sd = rand_mat((size_t)D * FS, 0.15f);
    float *x = rand_mat((size_t)n * D, 1.0f);
    el_moe moe = {.router = f32_mat(router, D, NE), .gate = f32_mat(G, D, F), .up = f32_mat(U, D, F),
                  .down = f32_mat(Dn, F, D), .n_expert = NE, .n_used = K, .norm_w = norm_w, .w_scale = 0.0f,
                  .has_shared = shared};
    moe.stride_gate = moe.stride_up = sizeof(float) * (size_t)F * D;
    moe.stride_down = sizeof(float) * (size_t)D * F;
    if (shared) {
        moe.sh_inp = f32_mat(si, D, 1);
        moe.sh_gate = f32_mat(sg, D, FS), moe.sh_up = f32_mat(su, D, FS), moe.sh_down = f32_mat(sd, FS, D);
    }
    const size_t sb = el_moe_scratch_bytes(n, D, NE, K, shared ? FS : F);
    CHECK(sb != SIZE_MAX && sb > 0);
    void *scratch = NULL, *ws = NULL;
    CHECK(posix_memalign(&scratch, 64, sb) == 0 && posix_memalign(&ws, 64, 1 << 16) == 0);
    float *y = malloc(sizeof(float) * (size_t)n * D), *y1 = malloc(sizeof(float) * D);
    el_pool *pool = el_pool_new(2);
    el_op_moe(pool, &moe, x, n, y, scratch, ws);

    /* the reference, row by row */
    double maxd = 0, maxv = 0;
    for (int t = 0; t < n; t++) {
        const float *xt = x + (size_t)t * D;
        double l[64], p[64], s = 0, mx = -INFINITY, out[D], e_out[D];
        mv(router, xt, NE, D, l);
        for (int e = 0; e < NE; e++) mx = l[e] > mx ? l[e] : mx;
        for (int e = 0; e < NE; e++) s += p[e] = exp(l[e] - mx);
        for (int e = 0; e < NE; e++) p[e] /= s;
        int id[64];
        bool used[64] = {0};
        double wsum = 0;
        for (int j = 0; j < K; j++) {
            int b = -1;
            for (int e = 0; e < NE; e++)
                if (!used[e] && (b < 0 || p[e] > p[b])) b = e;
            used[b] = true, id[j] = b, wsum += p[b];
        }
        memset(out, 0, sizeof out);
        for (int j = 0; j < K; j++) {
            const int e = id[j];
            ref_expert(G + (size_t)e * F * D, U + (size_t)e * F * D, Dn + (size_t)e * D * F, xt, D, F, e_out);
            const double w = norm_w ? p[e] / wsum : p[e];
            for (int c = 0; c < D; c++) out[c] += w * e_out[c];
        }
        if (shared) {
            double v;
            mv(si, xt, 1, D, &v);
            ref_expert(sg, su, sd, xt, D, FS, e_out);
            for (int c = 0; c < D; c++) out[c] += e_out[c] / (1.0 + exp(-v));
        }
        for (int c = 0; c < D; c++) {
            maxd = fmax(maxd, fabs(out[c] - y[(size_t)t * D + c]));
            maxv = fmax(maxv, fabs(out[c]));
        }
    }
    printf("  moe %d experts, %d used%s%s, %d rows: max |y - ref| %.2e (max |y| %.2f)\n", NE, K,
           norm_w ? ", renormalised" : "", shared ? ", shared expert" : "", n, maxd, maxv);
    CHECKF(maxd < 1e-4 * (maxv > 1 ? maxv : 1), "moe %d/%d: max difference %g from the reference", NE, K, maxd);

    /* row order on: each row alone has the bits it has in the batch */
    el_op_matmul_row_order(true);
    el_op_moe(pool, &moe, x, n, y, scratch, ws);
    int same = 0;
    for (int t = 0; t < n; t++) {
        el_op_moe(pool, &moe, x + (size_t)t * D, 1, y1, scratch, ws);
        same += memcmp(y1, y + (size_t)t * D, sizeof(float) * D) == 0;
    }
    el_op_matmul_row_order(false);
    CHECKF(same == n, "moe %d/%d: %d of %d rows differ between the batch and one row alone (row order)", NE, K, n - same, n);

    el_pool_free(pool);
    free(router), free(G), free(U), free(Dn), free(si), free(sg), free(su), free(sd), free(x), free(y), free(y1);
    free(scratch), free(ws);
}

static void test_kernel(void) {
    printf("[1] el_op_moe\n");
    kernel_case(16, 4, true, false, 13);
    kernel_case(8, 2, false, true, 9);
    kernel_case(4, 4, true, false, 5); /* every expert chosen */
    kernel_case(8, 1, false, false, 1);
    CHECK(el_moe_scratch_bytes(0, 64, 8, 2, 64) == SIZE_MAX);
    CHECK(el_moe_scratch_bytes(4, 64, 8, 9, 64) == SIZE_MAX);
    CHECK(el_moe_scratch_bytes(1 << 30, 1 << 30, 1024, 1024, 1 << 30) == SIZE_MAX);
}

/* ---- 2. hostile files ------------------------------------------------------- */

#define P_U32 EL_TEST_PATCH_U32
#define P_KEY_NAME EL_TEST_PATCH_NAME
#define P_TENSOR_NAME EL_TEST_PATCH_NAME
#define P_TENSOR_NE EL_TEST_PATCH_NE

typedef struct {
    const char *model;
    el_test_patch_kind kind;
    const char *name; /* key or tensor */
    uint64_t v;       /* P_U32: the value; P_TENSOR_NE: (dim << 32) | value */
    el_status code;
    const char *says; /* the message names this */
} hostile;

static bool write_hostile(const hostile *h, const char *path) {
    size_t len = 0;
    char *buf = el_test_read_file(el_test_ref_path(h->model), &len);
    if (!buf) return false;
    const bool ok = el_test_gguf_patch(buf, len, h->kind, h->name, h->v) && el_test_write_file(path, buf, len);
    free(buf);
    return ok;
}

/* ffn_down_shexp [512, 256] given as [256, 512]: same bytes, wrong shape */
static bool write_swapped(const char *model, const char *tensor, const char *path) {
    size_t len = 0;
    char *buf = el_test_read_file(el_test_ref_path(model), &len);
    if (!buf) return false;
    const size_t at = el_test_gguf_str_at(buf, len, tensor);
    bool ok = at != 0;
    if (ok) {
        char *ne = buf + at + strlen(tensor) + 4;
        int64_t a, b;
        memcpy(&a, ne, 8), memcpy(&b, ne + 8, 8);
        memcpy(ne, &b, 8), memcpy(ne + 8, &a, 8);
        ok = a != b;
    }
    FILE *f = ok ? fopen(path, "wb") : NULL;
    ok = f && fwrite(buf, 1, len, f) == len;
    if (f) fclose(f);
    free(buf);
    return ok;
}

static void expect_refused(const char *path, const char *what, el_status code, const char *says) {
    el_model_params mp = el_model_default_params();
    mp.n_threads = 1;
    el_error err = {EL_OK, ""};
    el_model *m = el_model_load(path, &mp, &err);
    printf("  %s: %s \"%s\"\n", what, el_status_name(err.code), err.msg);
    CHECKF(m == NULL && err.code == code && strstr(err.msg, says), "%s: %s (%s), expected %s naming '%s'", what,
           m ? "loaded" : el_status_name(err.code), err.msg, el_status_name(code), says);
    el_model_free(m);
}

static void test_hostile(void) {
    printf("[2] hostile MoE files\n");
    char path[] = "/tmp/el_test_moe_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return;
    close(fd);
    const char *q3 = "models/tiny-qwen3moe-F16.gguf", *q2 = "models/tiny-qwen2moe-F16.gguf";
    const hostile cases[] = {
        {q3, P_U32, "qwen3moe.expert_count", 0, EL_ERR_BAD_VALUE, "qwen3moe.expert_count"},
        {q3, P_U32, "qwen3moe.expert_count", 1u << 20, EL_ERR_BAD_VALUE, "qwen3moe.expert_count"},
        {q3, P_U32, "qwen3moe.expert_count", 8, EL_ERR_BAD_TENSOR, "blk.0.ffn_gate_inp.weight"},
        {q3, P_U32, "qwen3moe.expert_used_count", 17, EL_ERR_BAD_VALUE, "qwen3moe.expert_used_count"},
        {q3, P_U32, "qwen3moe.expert_used_count", 0, EL_ERR_BAD_VALUE, "qwen3moe.expert_used_count"},
        {q3, P_U32, "qwen3moe.expert_feed_forward_length", 0, EL_ERR_BAD_VALUE, "qwen3moe.expert_feed_forward_length"},
        {q3, P_U32, "qwen3moe.expert_feed_forward_length", 128, EL_ERR_BAD_TENSOR, "blk.0.ffn_gate_exps.weight"},
        {q3, P_KEY_NAME, "qwen3moe.expert_used_count", 0, EL_ERR_MISSING, "qwen3moe.expert_used_count"},
        {q3, P_KEY_NAME, "qwen3moe.expert_count", 0, EL_ERR_MISSING, "qwen3moe.expert_count"},
        {q3, P_TENSOR_NAME, "blk.2.ffn_up_exps.weight", 0, EL_ERR_MISSING, "blk.2.ffn_up_exps.weight"},
        {q3, P_TENSOR_NAME, "blk.1.ffn_gate_inp.weight", 0, EL_ERR_MISSING, "blk.1.ffn_gate_inp.weight"},
        {q3, P_TENSOR_NE, "blk.3.ffn_down_exps.weight", (2ull << 32) | 8, EL_ERR_BAD_TENSOR, "blk.3.ffn_down_exps.weight"},
        {q2, P_U32, "qwen2moe.expert_used_count", 9, EL_ERR_BAD_VALUE, "qwen2moe.expert_used_count"},
        {q2, P_U32, "qwen2moe.expert_shared_feed_forward_length", 0, EL_ERR_BAD_VALUE,
         "qwen2moe.expert_shared_feed_forward_length"},
        {q2, P_U32, "qwen2moe.expert_shared_feed_forward_length", 256, EL_ERR_BAD_TENSOR, "blk.0.ffn_gate_shexp.weight"},
        {q2, P_TENSOR_NAME, "blk.0.ffn_gate_inp_shexp.weight", 0, EL_ERR_MISSING, "blk.0.ffn_gate_inp_shexp.weight"},
        {q2, P_TENSOR_NAME, "blk.3.ffn_down_shexp.weight", 0, EL_ERR_MISSING, "blk.3.ffn_down_shexp.weight"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const hostile *h = &cases[i];
        if (!write_hostile(h, path)) continue;
        char what[160];
        if (h->kind == P_U32)
            snprintf(what, sizeof what, "%s: %s = %llu", h->model + 7, h->name, (unsigned long long)h->v);
        else if (h->kind == P_TENSOR_NE)
            snprintf(what, sizeof what, "%s: %s ne[%u] = %u", h->model + 7, h->name, (unsigned)(h->v >> 32), (unsigned)h->v);
        else
            snprintf(what, sizeof what, "%s: no %s", h->model + 7, h->name);
        expect_refused(path, what, h->code, h->says);
    }
    if (write_swapped(q2, "blk.1.ffn_down_shexp.weight", path))
        expect_refused(path, "tiny-qwen2moe ffn_down_shexp transposed", EL_ERR_BAD_TENSOR, "blk.1.ffn_down_shexp.weight");
    else
        CHECKF(0, "cannot swap the shape of blk.1.ffn_down_shexp.weight");
    unlink(path);
}

/* ---- 3. the plan's expert figures ------------------------------------------------ */

static void test_plan(void) {
    printf("[3] the memory plan counts experts\n");
    const struct { const char *model; int ne, used; } ms[] = {
        {"models/tiny-qwen3moe-F16.gguf", 16, 4},
        {"models/tiny-qwen2moe-Q4_K_M.gguf", 8, 2},
    };
    for (size_t i = 0; i < sizeof ms / sizeof *ms; i++) {
        el_model_params mp = el_model_default_params();
        mp.n_threads = 1;
        el_error err;
        el_model *m = el_model_load(el_test_ref_path(ms[i].model), &mp, &err);
        CHECKF(m != NULL, "%s: %s", ms[i].model, err.msg);
        if (!m) continue;
        const el_mem_model *mm = &m->mem;
        uint64_t want = 0;
        for (int il = 0; il < m->hp.n_layer; il++) {
            const el_moe *mo = &m->layers[il].moe;
            want += (uint64_t)(mo->stride_gate + mo->stride_up + mo->stride_down) * (uint64_t)mo->n_expert;
        }
        printf("  %s: %d of %d experts, expert bytes %llu, per token %llu, router+shared %llu\n", ms[i].model + 7,
               mm->n_expert_used, mm->n_expert, (unsigned long long)mm->expert_bytes,
               (unsigned long long)mm->expert_bytes_token, (unsigned long long)mm->moe_other_bytes);
        CHECK(mm->n_expert == ms[i].ne && mm->n_expert_used == ms[i].used);
        CHECK(mm->expert_bytes == want && want > 0);
        CHECK(mm->expert_bytes_token * (uint64_t)ms[i].ne == mm->expert_bytes * (uint64_t)ms[i].used);
        CHECK(mm->expert_bytes < el_model_weights_bytes(m));
        /* edgellm plan reports them */
        char want_json[160];
        snprintf(want_json, sizeof want_json, "\"experts\":{\"count\":%d,\"used\":%d,\"bytes\":%llu,\"bytes_per_token\":%llu",
                 ms[i].ne, ms[i].used, (unsigned long long)mm->expert_bytes, (unsigned long long)mm->expert_bytes_token);
        const char *args[] = {"plan", "-m", el_test_ref_path(ms[i].model), "--json", NULL};
        el_test_proc r;
        CHECK(el_test_run_cli(args, &r));
        CHECKF(r.status == 0 && r.out && strstr(r.out, want_json), "edgellm plan --json on %s: exit %d, no %s in %s",
               ms[i].model, r.status, want_json, r.out ? r.out : "");
        el_test_proc_free(&r);
        el_model_free(m);
    }
}

int main(void) {
    test_kernel();
    if (!el_test_have_ref()) el_test_skip("fixtures absent (make fixtures): model tests skipped");
    test_hostile();
    test_plan();
    return el_test_finish("test_moe");
}
