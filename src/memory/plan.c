/*
 * plan.c — see plan.h. Offsets are 64-byte aligned.
 */
#include "memory/plan.h"

#include <stdint.h>

#include "backend/cpu/lora_kernels.h"
#include "backend/cpu/ops.h"
#include "sched/spec.h"

static size_t align64(size_t x) { return (x + 63) & ~(size_t)63; }

static size_t take(size_t *cur, size_t bytes) {
    size_t off = *cur;
    *cur = align64(*cur + bytes);
    return off;
}

static size_t max_sz(size_t a, size_t b) { return a > b ? a : b; }

/* a * b, or SIZE_MAX if it overflows (then the sum checks below fail too) */
static size_t mul_sz(size_t a, size_t b) { return b && a > SIZE_MAX / b ? SIZE_MAX : a * b; }

int el_plan_add_lora(const el_mem_model *m, int n_batch, int lora_rank, el_session_plan *p) {
    p->off_lora = 0, p->lora_bytes = 0, p->lora_rank = 0;
    if (lora_rank < 0 || n_batch <= 0) return -1;
    if (lora_rank == 0) return 0;
    const el_mem_model *hp = m;
    const size_t q_row = (size_t)hp->n_head * (size_t)hp->head_dim_k, att_row = (size_t)hp->n_head * (size_t)hp->head_dim_v;
    const size_t in_max = max_sz(max_sz((size_t)hp->n_embd, q_row), max_sz(att_row, (size_t)hp->n_ff));
    const int chunk = n_batch < EL_LORA_CHUNK ? n_batch : EL_LORA_CHUNK;
    const size_t bytes = el_lora_scratch_bytes(chunk, 3 * (int64_t)lora_rank, mul_sz(2, in_max));
    size_t cur = p->scratch_bytes;
    p->off_lora = take(&cur, bytes);
    p->lora_bytes = bytes;
    p->lora_rank = lora_rank;
    p->scratch_bytes = cur;
    p->total = p->kv_bytes + p->scratch_bytes;
    return p->total < p->kv_bytes ? -1 : 0;
}

size_t el_plan_kv_offset(const el_mem_model *m, const el_session_plan *p, int il) {
    size_t off = 0;
    for (int i = 0; i < il; i++)
        off += p->kv_ring > 0 && m->layer_swa[i] ? p->kv_layer_swa + p->kv_layer_v_swa : p->kv_layer + p->kv_layer_v;
    return off;
}

int el_plan_session(const el_mem_model *m, int n_ctx, int n_batch, int swa_full, el_session_plan *p) {
    return el_plan_session_kv(m, n_ctx, n_batch, swa_full, EL_TYPE_F16, EL_TYPE_F16, p);
}

/* Bytes of rows rows of a cache row of n values in type t (SIZE_MAX on overflow). */
static size_t cache_bytes(int t, size_t rows, size_t n) {
    const size_t b = mul_sz(rows, el_row_size((el_type)t, (int64_t)n));
    return b > SIZE_MAX - 63 ? SIZE_MAX : align64(b);
}

int el_plan_session_kv(const el_mem_model *m, int n_ctx, int n_batch, int swa_full, int type_k, int type_v,
                       el_session_plan *p) {
    return el_plan_session_full(m, n_ctx, n_batch, swa_full, type_k, type_v, 1, p);
}

int el_plan_session_full(const el_mem_model *m, int n_ctx, int n_batch, int swa_full, int type_k, int type_v,
                         int n_logit_rows, el_session_plan *p) {
    const el_mem_model *hp = m;
    if (n_ctx <= 0 || n_batch <= 0 || n_logit_rows < 1 || n_logit_rows > n_batch) return -1;
    const int hd = hp->head_dim_k > hp->head_dim_v ? hp->head_dim_k : hp->head_dim_v;
    if (type_k == 0) type_k = EL_TYPE_F16;
    if (type_v == 0) type_v = EL_TYPE_F16;
    if (!el_kv_type_ok(type_k, hp->head_dim_k) || !el_kv_type_ok(type_k, hd) || !el_kv_type_ok(type_v, hp->head_dim_v) ||
        !el_kv_type_ok(type_v, hd))
        return -1;
    p->type_k = type_k;
    p->type_v = type_v;
    const size_t B = (size_t)n_batch;
    const size_t kv_row = (size_t)hp->n_head_kv * (size_t)hd;
    if (kv_row > (size_t)INT64_MAX / 64) return -1;
    p->kv_layer = cache_bytes(type_k, (size_t)n_ctx, kv_row);
    p->kv_layer_v = cache_bytes(type_v, (size_t)n_ctx, kv_row);
    p->n_layer_swa = 0;
    p->kv_ring = 0;
    if (!swa_full && hp->n_swa > 0 && (long long)hp->n_swa + n_batch < n_ctx) {
        p->kv_ring = hp->n_swa + n_batch;
        for (int il = 0; il < hp->n_layer; il++) p->n_layer_swa += m->layer_swa[il] ? 1 : 0;
        if (p->n_layer_swa == 0) p->kv_ring = 0;
    }
    p->kv_layer_swa = p->kv_ring > 0 ? cache_bytes(type_k, (size_t)p->kv_ring, kv_row) : p->kv_layer;
    p->kv_layer_v_swa = p->kv_ring > 0 ? cache_bytes(type_v, (size_t)p->kv_ring, kv_row) : p->kv_layer_v;
    if (p->kv_layer > SIZE_MAX / 4 || p->kv_layer_v > SIZE_MAX / 4) return -1;
    const size_t n_full = (size_t)(hp->n_layer - p->n_layer_swa);
    p->kv_bytes = mul_sz(p->kv_layer + p->kv_layer_v, n_full);
    const size_t swa_bytes = mul_sz(p->kv_layer_swa + p->kv_layer_v_swa, (size_t)p->n_layer_swa);
    if (p->kv_bytes > SIZE_MAX / 2 || swa_bytes > SIZE_MAX / 2) return -1;
    p->kv_bytes += swa_bytes;
    const size_t q_row = (size_t)hp->n_head * (size_t)hp->head_dim_k;
    const size_t att_row = (size_t)hp->n_head * (size_t)hp->head_dim_v;
    const size_t wide = max_sz(max_sz((size_t)hp->n_embd, q_row), max_sz(att_row, (size_t)hp->n_ff));
    /* Quantized activations: the largest row of any matmul input, n_batch rows. */
    size_t wq8 = 0;
    for (int i = 0; i < m->n_mats; i++)
        wq8 = max_sz(wq8, el_op_matmul_wsize((el_type)m->mats[i].type, m->mats[i].ne0, n_batch));
    wq8 = max_sz(wq8, el_op_matmul_wsize((el_type)m->output.type, m->output.ne0, n_logit_rows));
    size_t cur = 0;
    p->off_x = take(&cur, B * hp->n_embd * sizeof(float));
    p->off_xb = take(&cur, B * wide * sizeof(float));
    p->off_q = take(&cur, B * q_row * sizeof(float));
    p->off_k = take(&cur, B * kv_row * sizeof(float));
    p->off_v = take(&cur, B * kv_row * sizeof(float));
    p->off_att = take(&cur, B * att_row * sizeof(float));
    p->off_gate = take(&cur, B * (size_t)hp->n_ff * sizeof(float));
    p->off_up = take(&cur, B * (size_t)hp->n_ff * sizeof(float));
    p->off_tmp = take(&cur, B * wide * sizeof(float));
    p->n_logit_rows = n_logit_rows;
    p->off_logits = take(&cur, mul_sz((size_t)n_logit_rows, (size_t)hp->n_vocab * sizeof(float)));
    p->off_wq8 = take(&cur, wq8);
    p->off_rope = take(&cur, EL_MAX_HEAD_DIM * sizeof(float));
    p->off_top_ids = take(&cur, 64 * sizeof(int32_t));
    p->off_top_lps = take(&cur, 64 * sizeof(float));
    p->off_moe = p->moe_bytes = 0;
    if (hp->n_expert > 0) {
        p->moe_bytes = el_moe_scratch_bytes(n_batch, hp->n_embd, hp->n_expert, hp->n_expert_used, hp->n_ff_moe);
        if (p->moe_bytes == SIZE_MAX || p->moe_bytes > SIZE_MAX / 2 - cur) return -1;
        p->off_moe = take(&cur, p->moe_bytes);
    }
    p->conv_ring = 0, p->conv_bytes = 0, p->off_conv = 0;
    if (hp->n_conv_layers > 0) {
        if (hp->conv_width < 2) return -1;
        const long long want = (long long)hp->conv_width - 1 + n_batch;
        p->conv_ring = want < n_ctx ? (int)want : n_ctx;
        p->conv_bytes = mul_sz(mul_sz((size_t)hp->n_conv_layers, (size_t)p->conv_ring), (size_t)hp->n_embd * sizeof(float));
        if (p->conv_bytes > SIZE_MAX / 4) return -1;
        p->off_conv = take(&cur, p->conv_bytes);
    }
    p->scratch_bytes = cur;
    p->total = p->kv_bytes + p->scratch_bytes;
    if (p->total < p->kv_bytes) return -1;
    return 0;
}

size_t el_plan_session_bytes(const el_mem_model *m, int n_ctx, int n_batch, int swa_full, int type_k, int type_v,
                             int n_draft, int lora_rank) {
    if (n_draft < 0 || n_draft > EL_SPEC_MAX_DRAFT) return 0;
    if (n_batch > n_ctx) n_batch = n_ctx;
    el_session_plan plan;
    if (el_plan_session_full(m, n_ctx, n_batch, swa_full, type_k, type_v, 1 + n_draft, &plan) ||
        el_plan_add_lora(m, n_batch, lora_rank, &plan))
        return 0;
    return plan.total > SIZE_MAX - m->session_fixed ? 0 : plan.total + m->session_fixed;
}
