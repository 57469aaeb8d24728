/*
 * attention_tiled_impl.h — the tiled attention driver for batches of
 * EL_ATT_TILE_Q (64) or more query tokens, included once per instruction set
 * (attention_tiled.c for the portable C, x86/attention_tiled_avx2.c,
 * x86/attention_tiled_avx512.c). Not a public header.
 *
 * It computes, for every (query, head) pair, the arithmetic of ggml's tiled
 * CPU flash-attention kernel (ggml-cpu ops.cpp,
 * ggml_compute_forward_flash_attn_ext_tiled), which llama.cpp runs for an
 * F16 cache when a micro-batch has 64 or more query rows (fewer rows take the
 * one-row kernel of attention_impl.h):
 *
 *   Q stays float (no F16 rounding). The cache is walked in tiles of 64
 *   positions aligned to multiples of 64; a tile none of whose positions the
 *   query sees is skipped. For a tile:
 *     s[k]   = (fma chain over d of q[d]·K[k][d], from 0, d ascending) · scale,
 *              or −∞ where the query does not see position k;
 *     Mnew   = max(M, max_k s[k]); if Mnew > M: acc *= expf(M − Mnew),
 *              S *= expf(M − Mnew) (libm expf); M = Mnew;
 *     e[k]   = ggml's vector expf (AVX-512 form) of s[k] − M;
 *     S      = (float)((double)S + Σ_{4 groups of 16} (double)reduce16(e));
 *              reduce16 = lanes i+8 onto i, i+4 onto i, (0+2)+(1+3)
 *     acc[d] = fma(e[k], V[k][d], acc[d]) for k ascending (float accumulator).
 *   Finally out = acc · (1/S).
 *
 * Which query rows share a unit changes no result: each row's arithmetic is
 * the sequence above. Masked positions contribute e = 0, which the V pass
 * skips (fma(0, v, acc) = acc for finite v).
 *
 * The including file defines, before including this one:
 *   TL_TASK                        name of the el_pool_fn to define
 *   tl_cvt(h, f, n)                f[i] = (float)h[i], F16 → F32, n values
 *   tl_scores(qt, R, kf, cnt, hd, sc)
 *                                  sc[k*R + r] = fma chain over d of
 *                                  qt[d*R + r] · kf[k*hd + d] from 0, for
 *                                  k < cnt, r < R (R a multiple of 16)
 *   tl_expsum(s, M)                s[k] = vexpf(s[k] − M) for k < 64; returns
 *                                  Σ of the four reduce16 (double)
 *   tl_vacc(acc, e, vf, cnt, hd)   for k < cnt with e[k] != 0, ascending:
 *                                  acc[d] = fma(e[k], vf[k*hd + d], acc[d])
 *   tl_scale(acc, s, hd)           acc[d] *= s
 * and may define TL_HAVE_VACC4 with
 *   tl_vacc4(acc, e, vf, cnt, hd)  tl_vacc for four queries: accumulators
 *                                  acc + i*hd, weights e + i*EL_ATT_TILE_KV
 *                                  (i < 4), each V vector loaded once for
 *                                  the four (otherwise made of tl_vacc).
 *
 * Per tile, the softmax of every query of the unit comes first (rescaling
 * its accumulator, leaving its weights), then the V pass four queries at a
 * time: each query still sees its rescale, then its weights in order.
 *
 * A ring cache (a->ring > 0, sliding-window layers) holds position j in row
 * j % ring; tiles are still aligned in position space and visited in order.
 */
#include <math.h>
#include <string.h>

#include "backend/cpu/attention_internal.h"

#if !defined(TL_HAVE_VACC4)
static inline void tl_vacc4(float *acc, const float *e, const float *vf, int cnt, int hd) {
    for (int i = 0; i < 4; i++) tl_vacc(acc + (size_t)i * hd, e + i * EL_ATT_TILE_KV, vf, cnt, hd);
}
#endif

EL_ATT_ATTR void TL_TASK(void *vctx, int ith, int nth) {
    const el_attn_args *a = vctx;
    const int hd = a->head_dim;
    const int kv_row = a->n_head_kv * hd;
    el_attn_plan pl;
    el_attn_plan_make(a, nth, &pl);

    /* per thread: K and V of one tile as float (2 × 64 × head_dim), Q of the
     * unit transposed (head_dim × R), the scores (64 × R), the accumulators */
    float kf[EL_ATT_TILE_KV * EL_ATT_MAX_HD], vf[EL_ATT_TILE_KV * EL_ATT_MAX_HD];
    float qt[EL_ATT_MAX_QHD + 16 * EL_ATT_MAX_HD];
    float sct[EL_ATT_TILE_KV * EL_ATT_MAX_Q];
    float ew[EL_ATT_TILE_KV * EL_ATT_MAX_Q]; /* each query's weights of the tile (its columns from ka) */
    float acc[EL_ATT_MAX_QHD];
    float M[EL_ATT_MAX_Q], S[EL_ATT_MAX_Q];

    for (int u = ith; u < pl.n_units; u += nth) {
        const el_attn_unit w = el_attn_unit_of(a, &pl, u);
        const int t0 = w.t0, t1 = w.t1, h0 = w.h0, h1 = w.h1, kvh = w.kvh;
        const int nh = h1 - h0;
        const int nq = (t1 - t0) * nh;
        const int R = (nq + 15) & ~15;

        /* Q transposed: qt[d*R + qi], rows past nq zero */
        for (int d = 0; d < hd; d++) memset(qt + (size_t)d * R + nq, 0, sizeof(float) * (size_t)(R - nq));
        for (int t = t0; t < t1; t++)
            for (int h = h0; h < h1; h++) {
                const int qi = (t - t0) * nh + (h - h0);
                const float *q = a->q + (size_t)t * a->n_head * hd + (size_t)h * hd;
                for (int d = 0; d < hd; d++) qt[(size_t)d * R + qi] = q[d];
                M[qi] = -INFINITY;
                S[qi] = 0.0f;
            }
        memset(acc, 0, sizeof(float) * (size_t)nq * hd);

        const int p_first = a->pos0 + t0, p_last = a->pos0 + t1 - 1;
        const int jlo = el_attn_lo(p_first, a->window);
        const el_fp16 *kbase = (const el_fp16 *)a->kcache + (size_t)kvh * hd;
        const el_fp16 *vbase = (const el_fp16 *)a->vcache + (size_t)kvh * hd;
        for (int j0 = jlo & ~(EL_ATT_TILE_KV - 1); j0 <= p_last; j0 += EL_ATT_TILE_KV) {
            /* the positions of this tile some query of the unit sees */
            const int ka = j0 > jlo ? j0 : jlo;
            const int kz = j0 + EL_ATT_TILE_KV - 1 < p_last ? j0 + EL_ATT_TILE_KV - 1 : p_last;
            const int cnt = kz - ka + 1; /* packed rows ka..kz as tile columns ka-j0.. */
            for (int j = ka; j <= kz; j++) {
                const size_t row = (size_t)(a->ring > 0 ? j % a->ring : j) * kv_row;
                tl_cvt(kbase + row, kf + (size_t)(j - ka) * hd, hd);
                tl_cvt(vbase + row, vf + (size_t)(j - ka) * hd, hd);
            }
            tl_scores(qt, R, kf, cnt, hd, sct);

            for (int t = t0; t < t1; t++) {
                const int p = a->pos0 + t;
                const int lo = el_attn_lo(p, a->window);
                const int va = j0 > lo ? j0 : lo, vz = kz < p ? kz : p; /* visible positions */
                for (int h = h0; h < h1; h++) {
                    const int qi = (t - t0) * nh + (h - h0);
                    float *s = ew + (size_t)qi * EL_ATT_TILE_KV;
                    if (va > vz) { /* nothing visible: weights 0, which the V pass skips */
                        memset(s, 0, sizeof(float) * EL_ATT_TILE_KV);
                        continue;
                    }
                    /* visible columns k0..k1 take their scores, the others -inf; the
                     * maximum over them in 8 independent chains (one chain of 64
                     * dependent compares was a tenth of the kernel). max is exact:
                     * only which of +0 / -0 it returns can depend on the order,
                     * and every later use of M (s - M, M - M', compares) gives the
                     * same values for either. */
                    const int k0 = va - j0, k1 = vz - j0;
                    const float *col = sct + (size_t)(va - ka) * R + qi;
                    for (int k = 0; k < k0; k++) s[k] = -INFINITY;
                    if (a->softcap > 0.0f) { /* ggml: scale/softcap, then softcap·tanhf */
                        const float cap = a->softcap, sc1 = a->scale / cap;
                        for (int k = k0; k <= k1; k++, col += R) s[k] = cap * tanhf(*col * sc1);
                    } else {
                        for (int k = k0; k <= k1; k++, col += R) s[k] = *col * a->scale;
                    }
                    for (int k = k1 + 1; k < EL_ATT_TILE_KV; k++) s[k] = -INFINITY;
                    float tm[8];
                    for (int i = 0; i < 8; i++) tm[i] = -INFINITY;
                    for (int k = 0; k < EL_ATT_TILE_KV; k += 8)
                        for (int i = 0; i < 8; i++) tm[i] = s[k + i] > tm[i] ? s[k + i] : tm[i];
                    float tmax = tm[0];
                    for (int i = 1; i < 8; i++) tmax = tm[i] > tmax ? tm[i] : tmax;
                    if (tmax == -INFINITY) {
                        memset(s, 0, sizeof(float) * EL_ATT_TILE_KV);
                        continue;
                    }
                    float *ac = acc + (size_t)qi * hd;
                    const float Mold = M[qi], Mnew = fmaxf(Mold, tmax);
                    if (Mnew > Mold) {
                        const float ms = expf(Mold - Mnew);
                        tl_scale(ac, ms, hd);
                        S[qi] *= ms;
                    }
                    M[qi] = Mnew;
                    S[qi] = (float)((double)S[qi] + tl_expsum(s, Mnew));
                    if (ka > j0) memmove(s, s + (ka - j0), sizeof(float) * (size_t)cnt); /* columns from ka */
                }
            }
            int qi = 0;
            for (; qi + 4 <= nq; qi += 4)
                tl_vacc4(acc + (size_t)qi * hd, ew + (size_t)qi * EL_ATT_TILE_KV, vf, cnt, hd);
            for (; qi < nq; qi++) tl_vacc(acc + (size_t)qi * hd, ew + (size_t)qi * EL_ATT_TILE_KV, vf, cnt, hd);
        }

        for (int t = t0; t < t1; t++)
            for (int h = h0; h < h1; h++) {
                const int qi = (t - t0) * nh + (h - h0);
                if (a->sinks) el_att_sink(a, h, &M[qi], &S[qi], acc + (size_t)qi * hd, hd);
                const float inv = S[qi] == 0.0f ? 0.0f : 1.0f / S[qi];
                float *o = a->out + (size_t)t * a->n_head * hd + (size_t)h * hd;
                const float *ac = acc + (size_t)qi * hd;
                for (int d = 0; d < hd; d++) o[d] = ac[d] * inv;
            }
    }
}
