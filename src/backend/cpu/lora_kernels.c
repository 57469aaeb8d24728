/*
 * lora_kernels.c — el_op_lora (contract in lora_kernels.h).
 *
 * Invariants: every product goes through the kernel table's gemm, or its
 * select / vec_dot per output, with the activation-row count of the whole
 * job (n; 1 under row order) and the row's index in it, exactly as
 * ops.c's matmul_rows calls them — so each dot product has el_op_matmul's
 * bits. The output pass computes ab = dot · s then y = y + ab in two
 * rounded float operations (no contraction: ISO C mode for GCC, the pragma
 * for clang), llama.cpp's ggml_scale then ggml_add.
 */
#include "backend/cpu/lora_kernels.h"

#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "backend/cpu/kernels.h"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#define B_ROWS 256 /* output rows per block of the B pass (el_lora_bn_avx512 groups up to 256 rows) */
#define B_SUB 64   /* output rows per block of the table kernels' products (buf) */
#define B_TOKS 64  /* activation rows per block of the B pass */
#define B_ALIGN 16 /* output rows per unit of work (threads stay off each other's lines of y) */
#define A_INLINE_MACS (1 << 12) /* A products this small run on the calling thread (no pool job) */
#define A_SPLIT_ROWS 8          /* fewer activation rows: A's rows split among threads, A and B in one job (ab_task) */

/* One activation row of an F32/F16 B with rows of k < 64, output pass included (vec_dot's bits). */
typedef void (*lora_b1_fn)(int type, int k, const void *w, size_t ldw, int nr, const void *x, float s, float *y);
/* The same for nt rows in the tinyBLAS order (n >= 2, k % 16 == 0, k <= 64), rows nr16 a multiple of 16. */
typedef void (*lora_bn_fn)(int type, int k, const void *w, size_t ldw, int nr16, const void *x, size_t ldx, int nt,
                           float s, float *y, size_t ldy);
#if defined(__x86_64__)
/* x86/lora_avx512.c (16 output rows a vector) and x86/lora_avx2.c (8), for the table of their level */
void el_lora_b1_avx512(int type, int k, const void *w, size_t ldw, int nr, const void *x, float s, float *y);
void el_lora_bn_avx512(int type, int k, const void *w, size_t ldw, int nr16, const void *x, size_t ldx, int nt,
                       float s, float *y, size_t ldy);
void el_lora_b1_avx2(int type, int k, const void *w, size_t ldw, int nr, const void *x, float s, float *y);
void el_lora_bn_avx2(int type, int k, const void *w, size_t ldw, int nr16, const void *x, size_t ldx, int nt,
                     float s, float *y, size_t ldy);
#endif

static size_t al64(size_t n) { return (n + 63) & ~(size_t)63; }

size_t el_lora_xq_row(el_type t, int64_t in) {
    const el_cpu_type_kernels *kk = el_cpu_kernels(t);
    if (!kk || kk->vec_dot_type == EL_TYPE_F32) return 0;
    return el_row_size(kk->vec_dot_type, in);
}

size_t el_lora_scratch_bytes(int chunk, int64_t tcols, size_t xq_row) {
    const size_t t = al64(sizeof(float) * (size_t)chunk * (size_t)tcols);
    return 2 * t + al64((size_t)chunk * xq_row);
}

typedef struct lora_ctx {
    const el_lora_job *j;
    const el_cpu_type_kernels *ka[EL_LORA_MAX_TERMS], *kb[EL_LORA_MAX_TERMS];
    int64_t off[EL_LORA_MAX_TERMS];    /* term k's columns in t */
    size_t tq_off[EL_LORA_MAX_TERMS];  /* term k's region in tq (bytes) */
    size_t tq_row[EL_LORA_MAX_TERMS];  /* bytes per row there; 0: B takes F32, reads t */
    size_t xq_row[EL_LORA_MAX_TERMS];  /* bytes per row of x in A's vec_dot type; 0: F32 */
    lora_b1_fn b1[EL_LORA_MAX_TERMS];  /* B's one-row products by el_lora_b1_* (vec_dot's bits, 16/8 rows a vector), or NULL */
    lora_bn_fn bn[EL_LORA_MAX_TERMS];  /* B's tinyBLAS-order products by el_lora_bn_*, or NULL */
    size_t xq_stride;                  /* the largest: row t of xq starts at t × xq_stride whatever its type
                                        * (threads own rows; a smaller type's rows must not reach another's) */
    int64_t tcols;
    int64_t out[EL_LORA_MAX_DST];
    int64_t units[EL_LORA_MAX_DST + 1];
    int c0, m;  /* this chunk: rows c0 .. c0 + m of the job */
    int n_sel;  /* the activation-row count the kernels are chosen for */
    bool ro;    /* row order: every row as a one-row product */
    int a_units;             /* ab_task: A units of the chunk, the next one to claim, those done */
    alignas(64) _Atomic int a_next; /* each counter on a line of its own: every piece writes them */
    alignas(64) _Atomic int a_done;
} lora_ctx;

/* y[t * ldy + r] = dot(weight row r, activation row t) for r < nr, t < nt, with the kernels
 * el_op_matmul picks for rows t0 .. t0 + nt of an n_sel-row product (matmul_rows). */
static void dots(const el_cpu_type_kernels *kk, bool ro, int n_sel, int k, const uint8_t *w, size_t ldw, int nr,
                 const uint8_t *x, size_t ldx, int t0, int nt, float *y, size_t ldy) {
    if (kk->gemm) {
        kk->gemm(k, w, ldw, nr, x, ldx, ro ? 0 : t0, nt, n_sel, y, ldy);
        return;
    }
    for (int t = 0; t < nt; t++) {
        el_vec_dot_fn dot = kk->select ? kk->select(n_sel, ro ? 0 : t0 + t, k) : NULL;
        if (!dot) dot = kk->vec_dot;
        for (int r = 0; r < nr; r++) dot(k, &y[ldy * (size_t)t + (size_t)r], w + ldw * (size_t)r, x + ldx * (size_t)t);
    }
}

/* The A products of rows a .. b of the chunk (all terms), then t in B's vec_dot type. */
static void a_rows(const lora_ctx *c, int a, int b) {
    const el_lora_job *j = c->j;
    const int k = (int)j->in;
    int have = -1; /* the vec_dot type rows a .. b of xq hold */
    for (int q = 0; q < j->n_term; q++) {
        const el_mat *A = j->term[q].a;
        const el_cpu_type_kernels *kk = c->ka[q];
        const uint8_t *xs;
        size_t ldx;
        if (!c->xq_row[q]) {
            xs = (const uint8_t *)(j->x + (size_t)(c->c0 + a) * (size_t)j->in);
            ldx = sizeof(float) * (size_t)j->in;
        } else {
            ldx = c->xq_stride;
            if (have != (int)kk->vec_dot_type) {
                for (int t = a; t < b; t++)
                    kk->quantize(j->x + (size_t)(c->c0 + t) * (size_t)j->in, (uint8_t *)j->xq + ldx * (size_t)t, j->in);
                have = (int)kk->vec_dot_type;
            }
            xs = (const uint8_t *)j->xq + ldx * (size_t)a;
        }
        dots(kk, c->ro, c->n_sel, k, A->data, A->row_bytes, (int)A->ne1, xs, ldx, c->c0 + a, b - a,
             j->t + (size_t)a * (size_t)c->tcols + (size_t)c->off[q], (size_t)c->tcols);
    }
    for (int q = 0; q < j->n_term; q++) {
        if (!c->tq_row[q]) continue;
        const int r = (int)j->term[q].a->ne1;
        for (int t = a; t < b; t++)
            c->kb[q]->quantize(j->t + (size_t)t * (size_t)c->tcols + (size_t)c->off[q],
                               (uint8_t *)j->tq + c->tq_off[q] + c->tq_row[q] * (size_t)t, r);
    }
}

static void a_task(void *vctx, int ith, int nth) {
    const lora_ctx *c = vctx;
    int lo, hi;
    el_split_range(c->m, ith, nth, &lo, &hi);
    if (lo < hi) a_rows(c, lo, hi);
}

/*
 * Few activation rows (decode): one pool job does both passes. Its pieces
 * first claim units of A's rows (A_UNIT rows of one term, every row of the
 * chunk) from a counter until none is left, so every thread streams a share
 * of A; a unit also converts its columns of t to B's vec_dot type (only
 * used when that conversion is per element: F32, F16, BF16). A piece then
 * waits until every claimed unit is done — the units are claimed by running
 * pieces, so the wait ends — and does its share of the B pass. One pool job
 * per op instead of two; x was converted to the terms' one vec_dot type by
 * the caller (ab_fused). One piece per active thread (el_pool_run_n): each
 * piece costs a claim, a completion and the context's lines moving between
 * cores, which at 4 pieces a thread was a tenth of a decode step's LoRA time
 * (Gemma 3 270M, rank 16, 2 threads: 49 -> 44 us a layer). Units of 8 rows
 * (32 bytes of t each, where 4 put four units of two threads on one line)
 * and the two counters on lines of their own (a rank-16 Q/K/V op ran 5-8 %
 * faster cold). None of it changes the bits.
 */
#define A_UNIT 8

static void a_unit(const lora_ctx *c, int u) {
    const el_lora_job *j = c->j;
    int q = 0;
    for (;; q++) { /* the term of unit u */
        const int nu = (int)((j->term[q].a->ne1 + A_UNIT - 1) / A_UNIT);
        if (u < nu) break;
        u -= nu;
    }
    const el_mat *A = j->term[q].a;
    const int64_t r0 = (int64_t)u * A_UNIT, r1 = r0 + A_UNIT < A->ne1 ? r0 + A_UNIT : A->ne1;
    const uint8_t *xs;
    size_t ldx;
    if (!c->xq_row[q]) {
        xs = (const uint8_t *)(j->x + (size_t)c->c0 * (size_t)j->in);
        ldx = sizeof(float) * (size_t)j->in;
    } else {
        xs = (const uint8_t *)j->xq;
        ldx = c->xq_stride;
    }
    float *t = j->t + (size_t)(c->off[q] + r0);
    dots(c->ka[q], c->ro, c->n_sel, (int)j->in, (const uint8_t *)A->data + A->row_bytes * (size_t)r0, A->row_bytes,
         (int)(r1 - r0), xs, ldx, c->c0, c->m, t, (size_t)c->tcols);
    if (!c->tq_row[q]) return;
    const size_t esz = el_row_size(c->kb[q]->vec_dot_type, 1); /* per element (ab_fused checked) */
    for (int tt = 0; tt < c->m; tt++)
        c->kb[q]->quantize(t + (size_t)tt * (size_t)c->tcols,
                           (uint8_t *)j->tq + c->tq_off[q] + c->tq_row[q] * (size_t)tt + esz * (size_t)r0, r1 - r0);
}

static void b_task(void *vctx, int ith, int nth);

static void ab_task(void *vctx, int ith, int nth) {
    lora_ctx *c = vctx;
    for (;;) {
        const int u = atomic_fetch_add_explicit(&c->a_next, 1, memory_order_relaxed);
        if (u >= c->a_units) break;
        a_unit(c, u);
        atomic_fetch_add_explicit(&c->a_done, 1, memory_order_release);
    }
    for (int spins = 0; atomic_load_explicit(&c->a_done, memory_order_acquire) < c->a_units;)
        if (++spins > 4000) sched_yield(); /* a unit's thread was descheduled */
    b_task(vctx, ith, nth);
}

/* Whether ab_task can take the chunk: one vec_dot type for x, per-element conversions of t. */
static bool ab_fusable(const lora_ctx *c) {
    const el_lora_job *j = c->j;
    int ty = -1;
    for (int q = 0; q < j->n_term; q++) {
        if (c->xq_row[q]) {
            if (ty >= 0 && ty != (int)c->ka[q]->vec_dot_type) return false;
            ty = (int)c->ka[q]->vec_dot_type;
        }
        const el_type tb = c->kb[q]->vec_dot_type;
        if (tb != EL_TYPE_F32 && tb != EL_TYPE_F16 && tb != EL_TYPE_BF16) return false;
    }
    return true;
}

static void ab_fused(el_pool *pool, lora_ctx *c) {
    const el_lora_job *j = c->j;
    for (int q = 0; q < j->n_term; q++)
        if (c->xq_row[q]) {
            for (int t = 0; t < c->m; t++)
                c->ka[q]->quantize(j->x + (size_t)(c->c0 + t) * (size_t)j->in, (uint8_t *)j->xq + c->xq_stride * (size_t)t,
                                   j->in);
            break;
        }
    c->a_units = 0;
    for (int q = 0; q < j->n_term; q++) c->a_units += (int)((j->term[q].a->ne1 + A_UNIT - 1) / A_UNIT);
    atomic_store_explicit(&c->a_next, 0, memory_order_relaxed);
    atomic_store_explicit(&c->a_done, 0, memory_order_relaxed);
    el_pool_run_n(pool, ab_task, c, el_pool_active(pool));
}

/* Output rows r0 .. r1 of output i, every row of the chunk: y += s · (B · t) per term, in term order. */
static void b_rows(const lora_ctx *c, int i, int64_t r0, int64_t r1) {
    const el_lora_job *j = c->j;
    float buf[B_SUB * B_TOKS];
    const int64_t out = c->out[i];
    for (int64_t rb = r0; rb < r1; rb += B_ROWS) {
        const int nr = (int)(r1 - rb < B_ROWS ? r1 - rb : B_ROWS);
        for (int tb = 0; tb < c->m; tb += B_TOKS) {
            const int nt = c->m - tb < B_TOKS ? c->m - tb : B_TOKS;
            for (int q = 0; q < j->n_term; q++) {
                const el_lora_term *tm = &j->term[q];
                if (tm->dst != i) continue;
                const el_mat *B = tm->b;
                const uint8_t *xs;
                size_t ldx;
                if (c->tq_row[q]) {
                    ldx = c->tq_row[q];
                    xs = (const uint8_t *)j->tq + c->tq_off[q] + ldx * (size_t)tb;
                } else {
                    ldx = sizeof(float) * (size_t)c->tcols;
                    xs = (const uint8_t *)(j->t + (size_t)tb * (size_t)c->tcols + (size_t)c->off[q]);
                }
                if (c->b1[q]) {
                    for (int t = 0; t < nt; t++)
                        c->b1[q]((int)B->type, (int)B->ne0, (const uint8_t *)B->data + B->row_bytes * (size_t)rb,
                                 B->row_bytes, nr, xs + ldx * (size_t)t, tm->s,
                                 j->y[i] + (size_t)(c->c0 + tb + t) * (size_t)out + (size_t)rb);
                    continue;
                }
                const int nr16 = c->bn[q] ? nr & ~15 : 0;
                if (nr16)
                    c->bn[q]((int)B->type, (int)B->ne0, (const uint8_t *)B->data + B->row_bytes * (size_t)rb,
                             B->row_bytes, nr16, xs, ldx, nt, tm->s,
                             j->y[i] + (size_t)(c->c0 + tb) * (size_t)out + (size_t)rb, (size_t)out);
                if (nr16 == nr) continue;
                for (int sb = nr16; sb < nr; sb += B_SUB) { /* rows left to the table's kernels */
                    const int nrr = nr - sb < B_SUB ? nr - sb : B_SUB;
                    dots(c->kb[q], c->ro, c->n_sel, (int)B->ne0,
                         (const uint8_t *)B->data + B->row_bytes * (size_t)(rb + sb), B->row_bytes, nrr, xs, ldx,
                         c->c0 + tb, nt, buf, (size_t)nrr);
                    const float s = tm->s;
                    for (int t = 0; t < nt; t++) {
                        float *y = j->y[i] + (size_t)(c->c0 + tb + t) * (size_t)out + (size_t)(rb + sb);
                        const float *d = buf + (size_t)t * (size_t)nrr;
                        for (int r = 0; r < nrr; r++) {
                            const float ab = d[r] * s;
                            y[r] = y[r] + ab;
                        }
                    }
                }
            }
        }
    }
}

static void b_task(void *vctx, int ith, int nth) {
    const lora_ctx *c = vctx;
    const int64_t total = c->units[c->j->n_dst];
    const int64_t u0 = total * ith / nth, u1 = total * (ith + 1) / nth;
    for (int i = 0; i < c->j->n_dst; i++) {
        const int64_t a = u0 > c->units[i] ? u0 : c->units[i];
        const int64_t b = u1 < c->units[i + 1] ? u1 : c->units[i + 1];
        if (a >= b) continue;
        const int64_t r0 = (a - c->units[i]) * B_ALIGN;
        const int64_t r1 = (b - c->units[i]) * B_ALIGN < c->out[i] ? (b - c->units[i]) * B_ALIGN : c->out[i];
        b_rows(c, i, r0, r1);
    }
}

void el_op_lora(el_pool *pool, const el_lora_job *j) {
    if (j->n < 1 || j->n_term < 1) return;
    lora_ctx c = {.j = j};
    c.ro = el_op_matmul_row_order_on();
    c.n_sel = c.ro ? 1 : j->n;
    const int chunk = j->chunk > 0 ? j->chunk : 1;
    lora_b1_fn b1_fn = NULL; /* the B kernels of the table's level (none for portable and NEON) */
    lora_bn_fn bn_fn = NULL;
#if defined(__x86_64__)
    if (el_cpu_kernels_level() == EL_CPU_AVX512) b1_fn = el_lora_b1_avx512, bn_fn = el_lora_bn_avx512;
    else if (el_cpu_kernels_level() == EL_CPU_AVX2) b1_fn = el_lora_b1_avx2, bn_fn = el_lora_bn_avx2;
#endif
    int64_t tcols = 0;
    for (int q = 0; q < j->n_term; q++) {
        const el_lora_term *tm = &j->term[q];
        c.ka[q] = el_cpu_kernels(tm->a->type);
        c.kb[q] = el_cpu_kernels(tm->b->type);
        c.off[q] = tcols;
        c.xq_row[q] = c.ka[q]->vec_dot_type == EL_TYPE_F32 ? 0 : el_row_size(c.ka[q]->vec_dot_type, j->in);
        if (c.xq_row[q] > c.xq_stride) c.xq_stride = c.xq_row[q];
        c.tq_row[q] = c.kb[q]->vec_dot_type == EL_TYPE_F32 ? 0 : el_row_size(c.kb[q]->vec_dot_type, tm->a->ne1);
        c.tq_off[q] = sizeof(float) * (size_t)chunk * (size_t)tcols; /* tq_row <= 4 r bytes: regions do not overlap */
        tcols += tm->a->ne1;
        c.out[tm->dst] = tm->b->ne1;
        const bool fb = tm->b->type == EL_TYPE_F32 || tm->b->type == EL_TYPE_F16;
        /* one activation row at a time (n = 1 or row order): vec_dot, which for rows of k < 64 is its scalar tail */
        if (fb && c.n_sel == 1 && tm->b->ne0 < 64) c.b1[q] = b1_fn;
        /* several rows: the tinyBLAS order select/gemm take for F32/F16 rows of a multiple of 16 */
        if (fb && c.n_sel >= 2 && tm->b->ne0 % 16 == 0 && tm->b->ne0 <= 64) c.bn[q] = bn_fn;
    }
    c.tcols = tcols;
    const bool fusable = ab_fusable(&c);
    for (int i = 0; i < j->n_dst; i++) c.units[i + 1] = c.units[i] + (c.out[i] + B_ALIGN - 1) / B_ALIGN;
    for (int c0 = 0; c0 < j->n; c0 += chunk) {
        c.c0 = c0;
        c.m = j->n - c0 < chunk ? j->n - c0 : chunk;
        if (c.m < A_SPLIT_ROWS && fusable && el_pool_active(pool) >= 2 && (int64_t)c.m * tcols * j->in > A_INLINE_MACS) {
            ab_fused(pool, &c); /* A and B in one job */
            continue;
        }
        if (c.m < 2 || (int64_t)c.m * tcols * j->in <= A_INLINE_MACS || el_pool_active(pool) < 2) a_rows(&c, 0, c.m);
        else el_pool_run(pool, a_task, &c);
        el_pool_run(pool, b_task, &c);
    }
}
