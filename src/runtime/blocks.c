/*
 * blocks.c — the building blocks the architecture files compose: token
 * embedding, the attention block (projections, Q/K norm, RoPE, KV store,
 * attention, output projection) and the gated FFN, norms, residual adds, and
 * the output head.
 *
 * Each block reads its input from session scratch (s->x / s->xb) and writes
 * its result to s->tmp, so an architecture's forward() reads like the paper:
 * norm → block → (post-norm) → residual add.
 *
 * No block calls a kernel: each describes its ops (el_op: kind, shapes,
 * operands as ranges of the session's tensors, constants) and hands them to
 * the executor (runtime/exec.h), which runs them on the backend the placement
 * chose — or, while the executor describes a pass, only records them.
 */
#include <math.h>
#include <string.h>

#include "runtime/lora.h"
#include "runtime/model.h"
#include "runtime/exec.h"

/*
 * Parity debugging: built with -DEL_DEBUG_DUMP, every block writes its
 * intermediate activations to $EL_DUMP_DIR/<name>-<layer>.bin (raw float32,
 * all rows of the batch), to compare op by op with llama.cpp's tensors
 * (tests/tools/llama_dump.py, tests/tools/cmp_dump.py). A file that exists is
 * not overwritten: an empty directory ends up with the first batch of the
 * prompt, not the decode steps after it.
 */
#ifdef EL_DEBUG_DUMP
#include <stdio.h>
#include <stdlib.h>
static el_session *g_dump_session; /* the session whose pass is dumped (CPU backend alone: host copies) */
static void dbg_dump(const char *name, int il, const float *x, size_t n) {
    const char *d = getenv("EL_DUMP_DIR");
    if (!d || (g_dump_session && g_dump_session->describing)) return;
    char p[512];
    snprintf(p, sizeof p, "%s/%s-%d.bin", d, name, il);
    FILE *f = fopen(p, "wbx");
    if (!f) return;
    fwrite(x, sizeof(float), n, f);
    fclose(f);
}
#else
#define dbg_dump(name, il, x, n) ((void)0)
#endif

void el_fwd_dump(const char *name, int il, const float *x, size_t n) {
    dbg_dump(name, il, x, n);
    (void)name, (void)il, (void)x, (void)n;
}

/* ---- building ops ---- */

static el_op op_new(el_op_kind k, int il, const char *site) {
    el_op o;
    memset(&o, 0, sizeof o);
    o.kind = k;
    o.layer = il;
    o.site = site;
    return o;
}

static el_tref R(el_session *s, int id, size_t off, size_t n) { return el_exec_ref(s->exec, id, off, n); }

static void run(el_session *s, el_op *o) {
#ifdef EL_DEBUG_DUMP
    g_dump_session = s;
#endif
    el_exec_op(s, o);
}

void el_fwd_norm(el_session *s, int il, const char *site, int src, const float *w, int dst, int n, int d, float eps) {
    el_op o = op_new(EL_OPK_RMSNORM, il, site);
    o.src[0] = R(s, src, 0, (size_t)n * d);
    o.dst[0] = R(s, dst, 0, (size_t)n * d);
    o.vec[0] = w;
    o.n = n, o.d = d;
    o.p.rmsnorm.eps = eps;
    run(s, &o);
}

void el_fwd_add(el_session *s, int il, const char *site, int y, int x, int count) {
    el_op o = op_new(EL_OPK_ADD, il, site);
    o.dst[0] = R(s, y, 0, (size_t)count);
    o.src[1] = R(s, x, 0, (size_t)count);
    o.p.elt.count = count;
    o.n = 1, o.d = count;
    run(s, &o);
}

static void op_scale(el_session *s, int il, const char *site, int id, size_t off, float sc, float cap, int count) {
    el_op o = op_new(EL_OPK_SCALE, il, site);
    o.dst[0] = R(s, id, off, (size_t)count);
    o.p.scale.s = sc, o.p.scale.count = count, o.p.scale.cap = cap;
    o.n = 1, o.d = count;
    run(s, &o);
}

void el_fwd_scale(el_session *s, int il, const char *site, int id, float sc, int count) {
    if (sc == 1.0f) return; /* x·1 = x: no op */
    op_scale(s, il, site, id, 0, sc, 0.0f, count);
}

void el_fwd_copy(el_session *s, int il, const char *site, int src, int dst, int count) {
    el_op o = op_new(EL_OPK_COPY, il, site);
    o.src[0] = R(s, src, 0, (size_t)count);
    o.dst[0] = R(s, dst, 0, (size_t)count);
    o.n = 1, o.d = count;
    run(s, &o);
}

static void op_fwht(el_session *s, int il, const char *site, int id, int rows, int nrot) {
    el_op o = op_new(EL_OPK_FWHT, il, site);
    o.dst[0] = R(s, id, 0, (size_t)rows * nrot);
    o.n = rows, o.d = nrot;
    o.p.fwht.nrot = nrot;
    run(s, &o);
}

/* rows r0..r0+n of tensor id at positions pos0.. */
static void op_rope(el_session *s, int il, const char *site, int id, int r0, int n, int pos0, int n_heads, int hd,
                    const el_rope *rope) {
    el_op o = op_new(EL_OPK_ROPE, il, site);
    o.dst[0] = R(s, id, (size_t)r0 * n_heads * hd, (size_t)n * n_heads * hd);
    o.n = n, o.d = n_heads * hd;
    o.p.rope.rope = *rope;
    o.p.rope.n_heads = n_heads, o.p.rope.head_dim = hd, o.p.rope.pos0 = pos0;
    run(s, &o);
}

/* The rows' owners: group g of a pass is rows r0..r0+n of session *own at
 * positions pos.. — the whole pass on s itself, or in a batched decode step
 * (s->brow) one row per group, each its own session's (runtime/model.h). */
static int row_groups(const el_session *s) { return s->brow ? s->n_brows : 1; }
static el_session *row_group(el_session *s, int g, int n, int *r0, int *nr, int *pos) {
    if (!s->brow) { *r0 = 0, *nr = n, *pos = s->n_past; return s; }
    *r0 = g, *nr = 1, *pos = s->brow[g].pos;
    return s->brow[g].s;
}

/* One EL_OPK_LORA op: terms term[0..nt) on the group's outputs (lora_kernels.h). */
static void op_lora_terms(el_session *s, int il, const char *site, int count, const el_mat *const W[], int src, int n,
                          const int dst[], const el_lora_term *term, int nt) {
    const el_lora_set *ls = s->lora;
    el_op o = op_new(EL_OPK_LORA, il, site);
    o.src[0] = R(s, src, 0, (size_t)n * (size_t)W[0]->ne0);
    for (int i = 0; i < count; i++) {
        o.dst[i] = R(s, dst[i], 0, (size_t)n * (size_t)W[i]->ne1);
        if (i) o.src[i] = o.dst[i]; /* read too: the executor brings them home */
    }
    o.n = n, o.d = (int)W[0]->ne0;
    o.p.lora.term = term, o.p.lora.n_term = nt, o.p.lora.n_dst = count;
    o.p.lora.t = ls->t, o.p.lora.tq = ls->tq, o.p.lora.xq = ls->xq, o.p.lora.chunk = ls->chunk;
    run(s, &o);
}

/* dst_i += s · B·(A·src) for each active adapter with a pair for W_i (runtime/lora.h): one op for the
 * group and every adapter, terms adapter by adapter (the order llama.cpp sums them in) */
static void op_lora(el_session *s, int il, const char *site, int count, const el_mat *const W[], int src, int n,
                    const int dst[]) {
    const el_lora_set *ls = s->lora;
    el_lora_term term[EL_LORA_MAX_TERMS];
    int nt = 0;
    int64_t cols = 0;
    for (int j = 0; j < ls->n; j++) {
        if (ls->scale[j] == 0.0f) continue; /* scale 0: the base product, bit for bit */
        for (int i = 0; i < count; i++) {
            const el_lora_w *lw = el_lora_find(ls->a[j], s->m, il, W[i]);
            if (!lw) continue;
            if (nt && (nt == EL_LORA_MAX_TERMS || cols + lw->rank > ls->tcols)) { /* the scratch's bound (never for blocks.c's groups) */
                op_lora_terms(s, il, site, count, W, src, n, dst, term, nt);
                nt = 0, cols = 0;
            }
            term[nt++] = (el_lora_term){&lw->a, &lw->b, el_lora_eff_scale(ls->a[j], lw, ls->scale[j]), i};
            cols += lw->rank;
        }
    }
    if (nt) op_lora_terms(s, il, site, count, W, src, n, dst, term, nt);
}

/* dst_i = src · W_iᵀ (+ bias_i) for i < count; then the active LoRA adapters' terms */
static void op_matmul(el_session *s, int il, const char *site, int count, const el_mat *const W[], int src, int n,
                      const int dst[], const float *const bias[]) {
    el_op o = op_new(EL_OPK_MATMUL, il, site);
    o.src[0] = R(s, src, 0, (size_t)n * (size_t)W[0]->ne0);
    for (int i = 0; i < count; i++) {
        o.w[i] = W[i];
        o.dst[i] = R(s, dst[i], 0, (size_t)n * (size_t)W[i]->ne1);
        o.vec[i] = bias ? bias[i] : NULL;
    }
    o.n_w = count;
    o.n = n, o.d = (int)W[0]->ne0;
    run(s, &o);
    if (s->lora) op_lora(s, il, site, count, W, src, n, dst);
}

/* ---- blocks ---- */

void el_fwd_embed(el_session *s, const int32_t *toks, int n, float scale) {
    const el_model *m = s->m;
    const int E = m->hp.n_embd;
    el_op o = op_new(EL_OPK_GET_ROWS, -1, "token_embd");
    o.dst[0] = R(s, EL_T_X, 0, (size_t)n * E);
    o.w[0] = &m->tok_embd;
    o.n_w = 1;
    o.n = n, o.d = E;
    o.p.get_rows.toks = toks;
    o.p.get_rows.scale = scale;
    run(s, &o);
}

void el_fwd_attention(el_session *s, int il, int n, const el_rope *rope, int window) {
    const el_model *m = s->m;
    const el_hparams *hp = &m->hp;
    const el_layer *L = &m->layers[il];
    const int hd = hp->head_dim_k;
    const int q_row = hp->n_head * hd, kv_row = hp->n_head_kv * hd;

    const el_mat *qkv[3] = {&L->wq, &L->wk, &L->wv};
    static const int qkv_out[3] = {EL_T_Q, EL_T_K, EL_T_V};
    const float *const qkv_bias[3] = {L->bq, L->bk, L->bv};
    dbg_dump("attn_norm", il, s->xb, (size_t)n * hp->n_embd);
    op_matmul(s, il, "attn_qkv", 3, qkv, EL_T_XB, n, qkv_out, qkv_bias);
    dbg_dump("Q", il, s->q, (size_t)n * q_row);
    dbg_dump("K", il, s->k, (size_t)n * kv_row);
    /* per head (Qwen3, Gemma 3), or over the whole projection (OLMo 2) */
    const int qn_rows = hp->qk_norm_full ? n : n * hp->n_head, qn_d = hp->qk_norm_full ? q_row : hd;
    const int kn_rows = hp->qk_norm_full ? n : n * hp->n_head_kv, kn_d = hp->qk_norm_full ? kv_row : hd;
    if (L->q_norm) el_fwd_norm(s, il, "attn_q_norm", EL_T_Q, L->q_norm, EL_T_Q, qn_rows, qn_d, hp->norm_eps);
    if (L->k_norm) el_fwd_norm(s, il, "attn_k_norm", EL_T_K, L->k_norm, EL_T_K, kn_rows, kn_d, hp->norm_eps);
    if (L->q_norm) dbg_dump("Qnorm", il, s->q, (size_t)n * q_row);
    if (L->k_norm) dbg_dump("Knorm", il, s->k, (size_t)n * kv_row);
    for (int g = 0; rope && g < row_groups(s); g++) { /* rope NULL: a layer without RoPE (SmolLM3) */
        int r0, nr, pos;
        row_group(s, g, n, &r0, &nr, &pos);
        op_rope(s, il, "rope_q", EL_T_Q, r0, nr, pos, hp->n_head, hd, rope);
        op_rope(s, il, "rope_k", EL_T_K, r0, nr, pos, hp->n_head_kv, hd, rope);
    }
    dbg_dump("Qrope", il, s->q, (size_t)n * q_row);
    dbg_dump("Krope", il, s->k, (size_t)n * kv_row);
    dbg_dump("V", il, s->v, (size_t)n * kv_row);
    if (hp->q_prescale) op_scale(s, il, "q_scale", EL_T_Q, 0, hp->attn_scale, 0.0f, n * q_row);
    /* a Q8_0/Q4_0 cache: Q, K, V rotated as llama.cpp does before the store (ops.h, el_kv_rot_k) */
    const int rot_k = el_kv_rot_k(s->type_k, hd), rot_v = el_kv_rot_v(s->type_v, hp->head_dim_v);
    if (rot_k) {
        op_fwht(s, il, "rot_q", EL_T_Q, n * q_row / rot_k, rot_k);
        op_fwht(s, il, "rot_k", EL_T_K, n * kv_row / rot_k, rot_k);
    }
    if (rot_v) op_fwht(s, il, "rot_v", EL_T_V, n * kv_row / rot_v, rot_v);
    for (int g = 0; g < row_groups(s); g++) {
        int r0, nr, pos;
        el_session *own = row_group(s, g, n, &r0, &nr, &pos); /* whose cache: this session's, or a batched row's */
        const int ring = window > 0 && L->swa ? own->kv_ring : 0; /* this layer's cache is a ring (memory/plan.h) */
        for (int kv = 0; kv < 2; kv++) {
            const int type = kv ? own->type_v : own->type_k;
            el_tensor *c = el_exec_tensor(own->exec, kv ? el_t_vc(il) : el_t_kc(il));
            const size_t rb = el_row_size((el_type)type, kv_row);
            const size_t rows_end = ring > 0 ? (size_t)ring : (size_t)(pos + nr);
            el_op o = op_new(EL_OPK_KV_STORE, il, kv ? "kv_store_v" : "kv_store_k");
            o.src[0] = R(s, kv ? EL_T_V : EL_T_K, (size_t)r0 * kv_row, (size_t)nr * kv_row);
            o.dst[0] = (el_tref){c, 0, rows_end * rb < c->bytes ? rows_end * rb : c->bytes};
            o.n = nr, o.d = kv_row;
            o.p.kv_store.type = type, o.p.kv_store.pos0 = pos, o.p.kv_store.row_len = kv_row, o.p.kv_store.ring = ring;
            run(s, &o);
        }

        el_op o = op_new(EL_OPK_ATTENTION, il, "attention");
        o.src[0] = R(s, EL_T_Q, (size_t)r0 * q_row, (size_t)nr * q_row);
        el_tensor *kc = el_exec_tensor(own->exec, el_t_kc(il)), *vc = el_exec_tensor(own->exec, el_t_vc(il));
        o.src[1] = (el_tref){kc, 0, kc->bytes};
        o.src[2] = (el_tref){vc, 0, vc->bytes};
        o.dst[0] = R(s, EL_T_ATT, (size_t)r0 * q_row, (size_t)nr * q_row);
        o.n = nr, o.d = q_row;
        o.p.attn.a = (el_attn_args){
            .n = nr, .pos0 = pos, .n_head = hp->n_head, .n_head_kv = hp->n_head_kv,
            .head_dim = hd, .window = window, .ring = ring, .scale = hp->q_prescale ? 1.0f : hp->attn_scale,
            .softcap = hp->attn_softcap, .sinks = L->sinks,
            .type_k = own->type_k, .type_v = own->type_v,
        };
        run(s, &o);
    }
    dbg_dump("kqv", il, s->att, (size_t)n * q_row);
    if (rot_v) op_fwht(s, il, "rot_out", EL_T_ATT, n * q_row / rot_v, rot_v); /* back: H·H = I */
    const el_mat *wo[1] = {&L->wo};
    static const int tmp[1] = {EL_T_TMP};
    const float *const bo[1] = {L->bo};
    op_matmul(s, il, "attn_out", 1, wo, EL_T_ATT, n, tmp, L->bo ? bo : NULL);
    dbg_dump("attn_out", il, s->tmp, (size_t)n * hp->n_embd);
}

void el_fwd_ffn(el_session *s, int il, int n, bool gelu) {
    const el_model *m = s->m;
    const el_layer *L = &m->layers[il];
    const int F = m->hp.n_ff;
    const el_mat *gate_up[2] = {&L->w_gate, &L->w_up};
    static const int gate_up_out[2] = {EL_T_GATE, EL_T_UP};
    op_matmul(s, il, "ffn_gate_up", 2, gate_up, EL_T_XB, n, gate_up_out, NULL);
    dbg_dump("ffn_norm", il, s->xb, (size_t)n * m->hp.n_embd);
    dbg_dump("gate", il, s->gate, (size_t)n * F);
    dbg_dump("up", il, s->up, (size_t)n * F);
    el_op o = op_new(gelu ? EL_OPK_GELU_MUL : EL_OPK_SILU_MUL, il, gelu ? "ffn_gelu" : "ffn_silu");
    o.dst[0] = R(s, EL_T_GATE, 0, (size_t)n * F);
    o.src[1] = R(s, EL_T_UP, 0, (size_t)n * F);
    o.n = n, o.d = F;
    o.p.elt.count = n * F;
    run(s, &o);
    dbg_dump("swiglu", il, s->gate, (size_t)n * F);
    const el_mat *down[1] = {&L->w_down};
    static const int tmp[1] = {EL_T_TMP};
    op_matmul(s, il, "ffn_down", 1, down, EL_T_GATE, n, tmp, NULL);
    dbg_dump("ffn_out", il, s->tmp, (size_t)n * m->hp.n_embd);
}

void el_fwd_moe(el_session *s, int il, int n) {
    const el_model *m = s->m;
    const int E = m->hp.n_embd;
    el_op o = op_new(EL_OPK_MOE, il, "ffn_moe");
    o.src[0] = R(s, EL_T_XB, 0, (size_t)n * E);
    o.dst[0] = R(s, EL_T_TMP, 0, (size_t)n * E);
    o.n = n, o.d = E;
    o.p.moe.moe = &m->layers[il].moe;
    o.p.moe.scratch = s->moe_scratch;
    dbg_dump("ffn_norm", il, s->xb, (size_t)n * E);
    run(s, &o);
    /* the experts this op used: hits, misses, and the release of what is beyond the budget (memory/experts.h) */
    if (m->experts && !s->describing) el_experts_touch(m->experts, il, el_moe_expert_offsets(o.p.moe.moe, n, s->moe_scratch));
    dbg_dump("ffn_moe_out", il, s->tmp, (size_t)n * E);
}

/* The short convolution of rows 0..n of a pass (LFM2), on host memory: per
 * row t of group g (the pass, or a batched step's row of session own at
 * position p): bx = B·x into own's ring row p % conv_ring; conv[e] = sum over
 * k < W of w[e][k] · bx(p - W + 1 + k)[e] (positions < 0 read 0, ggml_ssm_conv's
 * order, fused multiply-adds as its gnu++17 build compiles it); y = C·conv into the x row (x is read first). B: s->q, C: s->tmp,
 * x and y: s->att. */
typedef struct conv_ctx {
    el_session *s;
    int il, n;
} conv_ctx;

static void shortconv_rows(void *ctx) {
    const conv_ctx *c = ctx;
    el_session *s = c->s;
    const el_model *m = s->m;
    const el_layer *L = &m->layers[c->il];
    const int E = m->hp.n_embd, W = m->hp.conv_width;
    for (int g = 0; g < row_groups(s); g++) {
        int r0, nr, pos;
        el_session *own = row_group(s, g, c->n, &r0, &nr, &pos);
        const int ring = own->conv_ring;
        float *st = own->conv_state + (size_t)L->conv_idx * (size_t)ring * (size_t)E;
        for (int t = r0; t < r0 + nr; t++) {
            const int p = pos + (t - r0);
            const float *b = s->q + (size_t)t * E, *cg = s->tmp + (size_t)t * E;
            float *x = s->att + (size_t)t * E;
            float *row = st + (size_t)(p % ring) * E;
            for (int e = 0; e < E; e++) row[e] = b[e] * x[e];
            for (int e = 0; e < E; e++) {
                const float *w = L->conv_w + (size_t)e * W;
                float sum = 0.0f;
                for (int k = 0; k < W; k++) {
                    const int q = p - W + 1 + k;
                    const float v = q >= 0 ? st[(size_t)(q % ring) * E + e] : 0.0f;
                    sum = fmaf(v, w[k], sum); /* ggml's loop, which its C++ build contracts to an FMA */
                }
                x[e] = cg[e] * sum;
            }
        }
    }
}

void el_fwd_shortconv(el_session *s, int il, int n) {
    const el_model *m = s->m;
    const el_layer *L = &m->layers[il];
    const int E = m->hp.n_embd;
    /* in_proj's rows: B, then C, then x (three views of one tensor: the same dot products as one product) */
    const el_mat bcx[3] = {el_mat_rows(&L->conv_in, 0, E), el_mat_rows(&L->conv_in, E, E), el_mat_rows(&L->conv_in, 2 * (int64_t)E, E)};
    const el_mat *in[3] = {&bcx[0], &bcx[1], &bcx[2]};
    static const int in_out[3] = {EL_T_Q, EL_T_TMP, EL_T_ATT};
    op_matmul(s, il, "shortconv_in_proj", 3, in, EL_T_XB, n, in_out, NULL);
    conv_ctx c = {s, il, n};
    el_op o = op_new(EL_OPK_HOST, il, "shortconv");
    o.src[0] = R(s, EL_T_Q, 0, (size_t)n * E);
    o.src[1] = R(s, EL_T_TMP, 0, (size_t)n * E);
    o.src[2] = R(s, EL_T_ATT, 0, (size_t)n * E);
    o.dst[0] = R(s, EL_T_ATT, 0, (size_t)n * E);
    o.n = n, o.d = E;
    o.p.host.fn = shortconv_rows;
    o.p.host.ctx = &c;
    run(s, &o);
    dbg_dump("shortconv", il, s->att, (size_t)n * E);
    const el_mat *out[1] = {&L->conv_out};
    static const int tmp[1] = {EL_T_TMP};
    op_matmul(s, il, "shortconv_out_proj", 1, out, EL_T_ATT, n, tmp, NULL);
}

void el_fwd_keep_last_row(el_session *s, int *n) {
    if (s->out_rows > 1) return; /* every row's logits are wanted */
    if (s->embd_pool) return; /* an embedding pass needs every row (llama.cpp outputs all of them then) */
    const int E = s->m->hp.n_embd;
    if (*n > 1) {
        el_op o = op_new(EL_OPK_COPY, s->m->hp.n_layer - 1, "keep_last_row");
        o.src[0] = R(s, EL_T_X, (size_t)(*n - 1) * E, (size_t)E);
        o.dst[0] = R(s, EL_T_X, 0, (size_t)E);
        o.n = 1, o.d = E;
        run(s, &o);
    }
    *n = 1;
}

/* el_embed's output: rows r0..r0+n of the input, output-normed (in s->xb), pooled. */
typedef struct pool_ctx {
    el_session *s;
    int n;
} pool_ctx;

static void embd_pool_rows(void *ctx) {
    const pool_ctx *c = ctx;
    el_session *s = c->s;
    const int n = c->n;
    const int E = s->m->hp.n_embd;
    el_fwd_dump("result_norm", -1, s->xb, (size_t)n * E);
    const int r0 = s->embd_row0;
    float *out = s->embd_out;
    switch (s->embd_pool - 1) {
    case EL_POOLING_NONE:
        memcpy(out + (size_t)r0 * E, s->xb, sizeof(float) * (size_t)n * E);
        break;
    case EL_POOLING_MEAN: /* sum here; session.c divides once at the end */
        for (int t = 0; t < n; t++)
            for (int j = 0; j < E; j++) out[j] += s->xb[(size_t)t * E + j];
        break;
    case EL_POOLING_CLS:
        if (r0 == 0) memcpy(out, s->xb, sizeof(float) * (size_t)E);
        break;
    case EL_POOLING_LAST:
        if (r0 + n == s->embd_n) memcpy(out, s->xb + (size_t)(n - 1) * E, sizeof(float) * (size_t)E);
        break;
    }
}

static void embd_output(el_session *s, int n) {
    const el_model *m = s->m;
    const int E = m->hp.n_embd;
    el_fwd_norm(s, -1, "output_norm", EL_T_X, m->output_norm, EL_T_XB, n, E, m->hp.norm_eps);
    pool_ctx c = {s, n};
    el_op o = op_new(EL_OPK_HOST, -1, "embd_pool");
    o.src[0] = R(s, EL_T_XB, 0, (size_t)n * E);
    o.n = n, o.d = E;
    o.p.host.fn = embd_pool_rows;
    o.p.host.ctx = &c;
    run(s, &o);
}

void el_fwd_output(el_session *s, int n) {
    if (s->embd_pool) { embd_output(s, n); return; }
    const el_model *m = s->m;
    const int E = m->hp.n_embd;
    const int r = s->out_rows > 1 ? n : 1;
    el_op o = op_new(EL_OPK_RMSNORM, -1, "output_norm");
    o.src[0] = R(s, EL_T_X, (size_t)(n - r) * E, (size_t)r * E);
    o.dst[0] = R(s, EL_T_XB, 0, (size_t)r * E);
    o.vec[0] = m->output_norm;
    o.n = r, o.d = E;
    o.p.rmsnorm.eps = m->hp.norm_eps;
    run(s, &o);
    const el_mat *out[1] = {&m->output};
    static const int logits[1] = {EL_T_LOGITS};
    op_matmul(s, -1, "output", 1, out, EL_T_XB, r, logits, NULL);
    const size_t nl = (size_t)r * (size_t)m->hp.n_vocab;
    /* Granite: logits / logit_scale (ggml_scale by the reciprocal) */
    if (m->hp.logit_mul != 0.0f && m->hp.logit_mul != 1.0f)
        op_scale(s, -1, "logit_scale", EL_T_LOGITS, 0, m->hp.logit_mul, 0.0f, (int)nl);
    /* Gemma 2: cap·tanh(logits/cap) */
    if (m->hp.final_softcap > 0.0f)
        op_scale(s, -1, "final_softcap", EL_T_LOGITS, 0, 1.0f / m->hp.final_softcap, m->hp.final_softcap, (int)nl);
}
