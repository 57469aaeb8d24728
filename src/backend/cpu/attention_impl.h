/*
 * attention_impl.h — the blocked attention driver, included once per
 * instruction set (attention.c for the portable C, x86/attention_avx2.c,
 * x86/attention_avx512.c). Not a public header.
 *
 * The including file defines, before including this one:
 *   ATT_TASK                 name of the el_pool_fn to define
 *   att_round_q(q, qf, hd)   qf[i] = (float)(fp16)q[i]
 *   att_scores(k, kstride, cnt, qf, hd, scale, sc)
 *                            sc[jj] = dot(row jj, qf) * scale for cnt cache rows
 *                            k + jj*kstride, each dot in the order of att_dot
 *                            (attention.c: ggml's F16 dot)
 *   att_vpass(acc, v, vstride, cnt, ms, vs, hd)
 *                            for each of cnt cache rows v + jj*vstride, in order:
 *                            if ms[jj] != 1: acc = fp16(acc * ms[jj]);
 *                            acc = fp16(fma(v, vs[jj], acc))
 *   att_vpass2(acc0, acc1, v, vstride, cnt, ms0, vs0, ms1, vs1, hd)
 *                            att_vpass for two queries over the same rows
 *   att_out(acc, inv, o, hd) o[i] = (float)acc[i] * inv
 * and may define ATT_HAVE_SOFTMAX with
 *   att_softmax(sc, cnt, pM, pS, ms, vs)
 *                            the online-softmax factors of cnt scores, the
 *                            values of the scalar loop below (libm expf)
 * and ATT_HAVE_SOFTMAX_G with
 *   att_softmax_g(sc, cnt, nq, pM, pS, ms, vs)
 *                            att_softmax for nq <= EL_ATT_GROUP heads, scores
 *                            and factors at + e*EL_ATT_MAX_KVB, state pM[e],
 *                            pS[e]: each head's values exactly (the heads'
 *                            serial chains may be interleaved)
 * and ATT_HAVE_GROUP with
 *   att_scores_g(k, kstride, cnt, qf, nq, hd, scale, sc)
 *                            att_scores for nq <= EL_ATT_GROUP queries at
 *                            qf + e*hd into sc + e*EL_ATT_MAX_KVB (each K row
 *                            read and converted once for all of them)
 *   att_vpass_g(acc, v, vstride, cnt, ms, vs, nq, hd)
 *                            att_vpass for nq <= EL_ATT_GROUP accumulators at
 *                            acc + e*hd with factors ms/vs + e*EL_ATT_MAX_KVB
 *                            (each V row converted once for all of them)
 * (otherwise they are made below of att_scores and att_vpass2).
 * and the driver below gives every (query, head) pair exactly the arithmetic
 * sequence of the reference kernel (attention.c): Q rounded to F16, for each
 * visible cache row in ascending order the score, the online-softmax update
 * (M, S = fmaf(S, ms, vs)) and the F16 accumulator update, then the division.
 *
 * What the blocking changes is only the order in which different pairs are
 * advanced: a work unit holds several query tokens × the query heads sharing
 * one KV head, and walks the cache in blocks of rows, advancing every query
 * of the unit over the block before moving to the next, so each block of K/V
 * is read from memory once per unit instead of once per query. Softmax
 * factors of a block are computed first (they do not depend on the
 * accumulator), then the accumulator is updated in registers across the
 * block's rows.
 *
 * A ring cache (a->ring > 0, sliding-window layers) holds position j in row
 * j % ring. The positions of a block are still visited in ascending order;
 * where they wrap past the last row the block is handed to att_scores and
 * att_vpass in two pieces, which changes no arithmetic (both work row by
 * row, in order).
 */
#include <math.h>
#include <string.h>

#include "backend/cpu/attention_internal.h"

/* Query heads per group in att_span (ATT_GROUP <= EL_ATT_GROUP): the
 * including file's choice; 4 unless it says otherwise (the AVX-512 kernel
 * takes 8: its group kernels convert each K/V row once for 8 heads of dim
 * 64; the loops below gain nothing from a larger group). */
#if !defined(ATT_GROUP)
#define ATT_GROUP 4
#endif

#if !defined(ATT_HAVE_GROUP)
static inline void att_scores_g(const el_fp16 *k, size_t kstride, int cnt, const float *qf, int nq, int hd,
                                float scale, float *sc) {
    for (int e = 0; e < nq; e++) att_scores(k, kstride, cnt, qf + (size_t)e * hd, hd, scale, sc + e * EL_ATT_MAX_KVB);
}
static inline void att_vpass_g(el_fp16 *acc, const el_fp16 *v, size_t vstride, int cnt, const float *ms,
                               const float *vs, int nq, int hd) {
    int e = 0;
    for (; e + 2 <= nq; e += 2)
        att_vpass2(acc + (size_t)e * hd, acc + (size_t)(e + 1) * hd, v, vstride, cnt, ms + e * EL_ATT_MAX_KVB,
                   vs + e * EL_ATT_MAX_KVB, ms + (e + 1) * EL_ATT_MAX_KVB, vs + (e + 1) * EL_ATT_MAX_KVB, hd);
    if (e < nq) att_vpass(acc + (size_t)e * hd, v, vstride, cnt, ms + e * EL_ATT_MAX_KVB, vs + e * EL_ATT_MAX_KVB, hd);
}
#endif

#if !defined(ATT_HAVE_SOFTMAX)
/* The online softmax over cnt scores in order (attention_internal.h). */
static inline void att_softmax(const float *sc, int cnt, float *pM, float *pS, float *ms, float *vs) {
    el_att_softmax_scalar(sc, cnt, pM, pS, ms, vs);
}
#endif

#if !defined(ATT_HAVE_SOFTMAX_G)
/* att_softmax for nq heads (scores, factors at + e*EL_ATT_MAX_KVB; state at pM[e], pS[e]). */
static inline void att_softmax_g(const float *sc, int cnt, int nq, float *pM, float *pS, float *ms, float *vs) {
    for (int e = 0; e < nq; e++)
        att_softmax(sc + e * EL_ATT_MAX_KVB, cnt, pM + e, pS + e, ms + e * EL_ATT_MAX_KVB, vs + e * EL_ATT_MAX_KVB);
}
#endif

/*
 * One query token's heads (state at qi0 .. qi0 + nh - 1) advanced over the
 * visible positions ja..jz (ascending, at most one block), in groups of up to
 * ATT_GROUP heads that share each K and V row: scores, the online-softmax
 * factors, then the F16 accumulators row by row. Both drivers below call it;
 * it is the whole per-position arithmetic. sc, ms, vs: EL_ATT_GROUP rows of
 * EL_ATT_MAX_KVB.
 */
static inline void att_span(const el_attn_args *a, const el_fp16 *kbase, const el_fp16 *vbase, int ja, int jz,
                            int nh, int qi0, const float *qf, el_fp16 *acc, float *M, float *S, float *sc,
                            float *ms, float *vs) {
    const int hd = a->head_dim;
    const int kv_row = a->n_head_kv * hd;
    const int cnt = jz - ja + 1;
    const int r0 = a->ring > 0 ? ja % a->ring : ja;                 /* row of position ja */
    const int c1 = a->ring > 0 && r0 + cnt > a->ring ? a->ring - r0 : cnt; /* rows before the wrap */
    for (int hh = 0; hh < nh; hh += ATT_GROUP) {
        const int nq = nh - hh < ATT_GROUP ? nh - hh : ATT_GROUP;
        const int qi = qi0 + hh;
        const float *q = qf + (size_t)qi * hd;
        const float cap = a->softcap, scale = cap > 0.0f ? a->scale / cap : a->scale;
        att_scores_g(kbase + (size_t)r0 * kv_row, (size_t)kv_row, c1, q, nq, hd, scale, sc);
        if (c1 < cnt) att_scores_g(kbase, (size_t)kv_row, cnt - c1, q, nq, hd, scale, sc + c1);
        if (cap > 0.0f) el_att_softcap_g(sc, cnt, nq, cap);
        att_softmax_g(sc, cnt, nq, M + qi, S + qi, ms, vs);
        for (int seg = 0; seg < 2; seg++) {
            const int off = seg ? c1 : 0, c = seg ? cnt - c1 : c1;
            if (c == 0) break;
            const el_fp16 *v = vbase + (size_t)(seg ? 0 : r0) * kv_row;
            att_vpass_g(acc + (size_t)qi * hd, v, (size_t)kv_row, c, ms + off, vs + off, nq, hd);
        }
    }
}

EL_ATT_ATTR void ATT_TASK(void *vctx, int ith, int nth) {
    const el_attn_args *a = vctx;
    const int hd = a->head_dim;
    el_attn_plan pl;
    el_attn_plan_make(a, nth, &pl);
    const int jb = el_attn_kv_block(hd);

    float qf[EL_ATT_MAX_QHD];
    el_fp16 acc[EL_ATT_MAX_QHD];
    float M[EL_ATT_MAX_Q], S[EL_ATT_MAX_Q];
    float sc[EL_ATT_GROUP * EL_ATT_MAX_KVB], ms[EL_ATT_GROUP * EL_ATT_MAX_KVB], vs[EL_ATT_GROUP * EL_ATT_MAX_KVB];

    for (int u = ith; u < pl.n_units; u += nth) {
        const el_attn_unit w = el_attn_unit_of(a, &pl, u);
        const int t0 = w.t0, t1 = w.t1, h0 = w.h0, h1 = w.h1, kvh = w.kvh;
        const int nh = h1 - h0;

        for (int t = t0; t < t1; t++)
            for (int h = h0; h < h1; h++) {
                const int qi = (t - t0) * nh + (h - h0);
                att_round_q(a->q + (size_t)t * a->n_head * hd + (size_t)h * hd, qf + (size_t)qi * hd, hd);
                memset(acc + (size_t)qi * hd, 0, sizeof(el_fp16) * (size_t)hd);
                M[qi] = -INFINITY;
                S[qi] = 0.0f;
            }

        const int p_first = a->pos0 + t0, p_last = a->pos0 + t1 - 1;
        const int jlo = el_attn_lo(p_first, a->window);
        const el_fp16 *kbase = (const el_fp16 *)a->kcache + (size_t)kvh * hd;
        const el_fp16 *vbase = (const el_fp16 *)a->vcache + (size_t)kvh * hd;
        for (int j0 = jlo; j0 <= p_last; j0 += jb) {
            const int j1 = j0 + jb - 1 < p_last ? j0 + jb - 1 : p_last; /* inclusive */
            for (int t = t0; t < t1; t++) {
                const int p = a->pos0 + t;
                const int lo = el_attn_lo(p, a->window);
                const int ja = j0 > lo ? j0 : lo, jz = j1 < p ? j1 : p;
                if (ja > jz) continue;
                att_span(a, kbase, vbase, ja, jz, nh, (t - t0) * nh, qf, acc, M, S, sc, ms, vs);
            }
        }

        for (int t = t0; t < t1; t++)
            for (int h = h0; h < h1; h++) {
                const int qi = (t - t0) * nh + (h - h0);
                float *o = a->out + (size_t)t * a->n_head * hd + (size_t)h * hd;
                if (a->sinks) { /* the accumulator as float, the sink, then 1/S (ggml's order) */
                    att_out(acc + (size_t)qi * hd, 1.0f, o, hd);
                    el_att_sink(a, h, &M[qi], &S[qi], o, hd);
                    const float inv = S[qi] == 0.0f ? 0.0f : 1.0f / S[qi];
                    for (int i = 0; i < hd; i++) o[i] *= inv;
                    continue;
                }
                const float inv = S[qi] == 0.0f ? 0.0f : 1.0f / S[qi];
                att_out(acc + (size_t)qi * hd, inv, o, hd);
            }
    }
}

/*
 * The split decode (attention_internal.h: el_attn_split_chunks decides when,
 * el_attn_split_range gives the ranges): one query token; a work unit is one
 * range × all the query heads of as many KV heads as the state holds (all
 * of them for the usual shapes), walked block by block, so the cache — its
 * rows hold the KV heads side by side — is read once per step. Each unit
 * runs the arithmetic above over its range from a fresh state and leaves M,
 * S and the F16 accumulator (as float) in sp->part (an empty range leaves
 * S = 0); el_op_attention combines the ranges.
 */
#define ATT_CAT2(x, y) x##y
#define ATT_CAT(x, y) ATT_CAT2(x, y)
EL_ATT_ATTR void ATT_CAT(ATT_TASK, _split)(void *vctx, int ith, int nth) {
    const el_attn_split *sp = vctx;
    const el_attn_args *a = sp->a;
    const int hd = a->head_dim;
    const int group = a->n_head / a->n_head_kv;
    const int jb = el_attn_kv_block(hd);

    float qf[EL_ATT_MAX_QHD];
    el_fp16 acc[EL_ATT_MAX_QHD];
    float M[EL_ATT_MAX_Q], S[EL_ATT_MAX_Q];
    float sc[EL_ATT_GROUP * EL_ATT_MAX_KVB], ms[EL_ATT_GROUP * EL_ATT_MAX_KVB], vs[EL_ATT_GROUP * EL_ATT_MAX_KVB];

    /* KV heads per unit: as many as the state holds, so each row of the
     * cache (all KV heads side by side) is walked once per range */
    int kvb = EL_ATT_MAX_QHD / (group * hd);
    if (kvb > EL_ATT_MAX_Q / group) kvb = EL_ATT_MAX_Q / group;
    if (kvb > a->n_head_kv) kvb = a->n_head_kv;
    if (kvb < 1) kvb = 1; /* el_attn_split_chunks: one KV head's state fits */
    const int n_kvb = (a->n_head_kv + kvb - 1) / kvb;
    for (int u = ith; u < n_kvb * sp->n_chunk; u += nth) {
        const int kv0 = u / sp->n_chunk * kvb, c = u % sp->n_chunk;
        const int kv1 = kv0 + kvb < a->n_head_kv ? kv0 + kvb : a->n_head_kv;
        const int h0 = kv0 * group, nh = (kv1 - kv0) * group;
        int c0, c1;
        el_attn_split_range(a, sp->n_chunk, c, &c0, &c1);
        for (int e = 0; e < nh; e++) {
            att_round_q(a->q + (size_t)(h0 + e) * hd, qf + (size_t)e * hd, hd);
            memset(acc + (size_t)e * hd, 0, sizeof(el_fp16) * (size_t)hd);
            M[e] = -INFINITY;
            S[e] = 0.0f;
        }
        for (int j0 = c0; j0 < c1; j0 += jb) {
            const int jz = j0 + jb - 1 < c1 - 1 ? j0 + jb - 1 : c1 - 1;
            for (int kvh = kv0; kvh < kv1; kvh++)
                att_span(a, (const el_fp16 *)a->kcache + (size_t)kvh * hd, (const el_fp16 *)a->vcache + (size_t)kvh * hd,
                         j0, jz, group, (kvh - kv0) * group, qf, acc, M, S, sc, ms, vs);
        }
        for (int e = 0; e < nh; e++) {
            float *part = sp->part + ((size_t)(h0 + e) * sp->n_chunk + c) * (size_t)(hd + 2);
            part[0] = M[e];
            part[1] = S[e];
            att_out(acc + (size_t)e * hd, 1.0f, part + 2, hd);
            if (a->sinks && c == 0) el_att_sink(a, h0 + e, &part[0], &part[1], part + 2, hd); /* the first range only */
        }
    }
}
