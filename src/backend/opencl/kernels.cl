/*
 * kernels.cl — the OpenCL backend's kernels (OpenCL C 1.2, no extension).
 *
 * Contract (backend_opencl.c launches them; backend.h's el_op_kind comments
 * and backend/cpu/ops.h state each op's meaning):
 *   - every buffer argument is a whole cl_mem; the operand's place in it is
 *     an element offset argument (x0, y0, ...), never a sub-buffer;
 *   - weights are read as the GGUF file holds them (ggml block layouts of
 *     src/package/quants_blocks.h) and dequantised in registers, 32 elements
 *     (one "unit") at a time; sums are in float;
 *   - F16 data (weights, the KV cache) is read and written with
 *     vload_half / vstore_half_rte, core OpenCL: no cl_khr_fp16 needed;
 *   - work-group size comes from the host (get_local_size); the __local
 *     scratch arguments are sized by the host to match.
 * Compile-time constants from the host's build options: NR and NR1 (output
 * rows per batched / one-token matmul work-group), NT (tokens per batched matmul work-group), ATT_DPI
 * (head dims per attention work-item: head_dim <= ATT_DPI * local size).
 */
#pragma OPENCL FP_CONTRACT OFF

#ifndef NR
#define NR 4
#endif
#ifndef NT
#define NT 4
#endif
#ifndef NR1
#define NR1 8
#endif
#ifndef ATT_DPI
#define ATT_DPI 8
#endif

/* ---- F16 helpers ---------------------------------------------------------- */

inline float ldh(__global const uchar *p) { return vload_half(0, (__global const half *)p); }

/* x rounded to the nearest F16 value (ties to even), as a float. */
inline float round_half(float x) {
    ushort h;
    vstore_half_rte(x, 0, (__private half *)&h);
    return vload_half(0, (__private const half *)&h);
}

inline float4 round_half4(float4 x) {
    ushort4 h;
    vstore_half4_rte(x, 0, (__private half *)&h);
    return vload_half4(0, (__private const half *)&h);
}

inline float sum16(float16 v) {
    float8 a = v.lo + v.hi;
    float4 b = a.lo + a.hi;
    float2 c = b.lo + b.hi;
    return c.x + c.y;
}

/* the 16 lanes folded to 4 (lane i: lanes i, i+4, i+8, i+12) */
inline float4 fold4(float16 v) {
    float8 a = v.lo + v.hi;
    return a.lo + a.hi;
}

inline float sum4(float4 v) { return (v.x + v.y) + (v.z + v.w); }

/* ---- dequantising one unit (32 elements) of a weight row -------------------
 * deq_T(row, u, &a, &b): elements 32u..32u+15 in a, 32u+16..32u+31 in b. */

inline void deq_f32(__global const uchar *row, int u, float16 *a, float16 *b) {
    __global const float *p = (__global const float *)row + 32 * u;
    *a = vload16(0, p);
    *b = vload16(1, p);
}

inline void deq_f16(__global const uchar *row, int u, float16 *a, float16 *b) {
    __global const half *p = (__global const half *)row + 32 * u;
    *a = vload_half16(0, p);
    *b = vload_half16(1, p);
}

/* Q8_0: 34 bytes: d (F16), 32 int8. */
inline void deq_q8_0(__global const uchar *row, int u, float16 *a, float16 *b) {
    __global const uchar *blk = row + 34 * u;
    const float d = ldh(blk);
    __global const char *q = (__global const char *)(blk + 2);
    *a = convert_float16(vload16(0, q)) * d;
    *b = convert_float16(vload16(1, q)) * d;
}

/* Q4_0: 18 bytes: d, 16 bytes of nibbles (element j low, j+16 high), value (q-8)*d. */
inline void deq_q4_0(__global const uchar *row, int u, float16 *a, float16 *b) {
    __global const uchar *blk = row + 18 * u;
    const float d = ldh(blk);
    const uchar16 q = vload16(0, blk + 2);
    *a = (convert_float16(q & (uchar)0xF) - 8.0f) * d;
    *b = (convert_float16(q >> (uchar)4) - 8.0f) * d;
}

/* Q5_0: 22 bytes: d, qh (bit j: 5th bit of element j), nibbles as Q4_0; value (q-16)*d. */
inline void deq_q5_0(__global const uchar *row, int u, float16 *a, float16 *b) {
    __global const uchar *blk = row + 22 * u;
    const float d = ldh(blk);
    const uint qh = (uint)blk[2] | ((uint)blk[3] << 8) | ((uint)blk[4] << 16) | ((uint)blk[5] << 24);
    const uchar16 q = vload16(0, blk + 6);
    const uint16 sh = (uint16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const uint16 hlo = (((uint16)(qh) >> sh) & 1u) << 4;
    const uint16 hhi = (((uint16)(qh >> 16) >> sh) & 1u) << 4;
    *a = (convert_float16(convert_uint16(q & (uchar)0xF) | hlo) - 16.0f) * d;
    *b = (convert_float16(convert_uint16(q >> (uchar)4) | hhi) - 16.0f) * d;
}

/* Q4_K: 144-byte super-blocks of 256: d, dmin, 12 bytes of packed 6-bit
 * scales/mins, 128 bytes of nibbles. Unit s (0..7) of a super-block: the low
 * (s even) or high (s odd) nibbles of qs[32*(s/2) ..], value d*sc*q - dmin*m. */
inline void deq_q4_k(__global const uchar *row, int u, float16 *a, float16 *b) {
    __global const uchar *blk = row + 144 * (u >> 3);
    const int s = u & 7;
    const float d = ldh(blk), dmin = ldh(blk + 2);
    __global const uchar *sc = blk + 4;
    uint scv, mv;
    if (s < 4) {
        scv = sc[s] & 63;
        mv = sc[s + 4] & 63;
    } else {
        scv = (sc[s + 4] & 0xF) | ((sc[s - 4] >> 6) << 4);
        mv = (sc[s + 4] >> 4) | ((sc[s] >> 6) << 4);
    }
    const float d1 = d * (float)scv, m1 = dmin * (float)mv;
    __global const uchar *qs = blk + 16 + 32 * (s >> 1);
    uchar16 q0 = vload16(0, qs), q1 = vload16(1, qs);
    if (s & 1) {
        q0 = q0 >> (uchar)4;
        q1 = q1 >> (uchar)4;
    } else {
        q0 = q0 & (uchar)0xF;
        q1 = q1 & (uchar)0xF;
    }
    *a = d1 * convert_float16(q0) - m1;
    *b = d1 * convert_float16(q1) - m1;
}

/* Q6_K: 210-byte super-blocks: ql[128] (low 4 bits), qh[64] (high 2 bits),
 * 16 int8 scales, d. Unit s = 4n + k covers elements 128n + 32k + l (l < 32):
 * low bits from ql[64n + 32(k&1) + l] (>> 4 when k >= 2), high bits
 * (qh[32n + l] >> 2k) & 3; scale scales[2s] for l < 16, scales[2s+1] after. */
inline void deq_q6_k(__global const uchar *row, int u, float16 *a, float16 *b) {
    __global const uchar *blk = row + 210 * (u >> 3);
    const int s = u & 7, n = s >> 2, k = s & 3;
    __global const uchar *ql = blk + 64 * n + 32 * (k & 1);
    __global const uchar *qh = blk + 128 + 32 * n;
    __global const char *scales = (__global const char *)(blk + 192);
    const float d = ldh(blk + 208);
    const uchar lsh = (uchar)(k >= 2 ? 4 : 0), hsh = (uchar)(2 * k);
    const uchar16 l0 = (vload16(0, ql) >> lsh) & (uchar)0xF, l1 = (vload16(1, ql) >> lsh) & (uchar)0xF;
    const uchar16 h0 = (vload16(0, qh) >> hsh) & (uchar)3, h1 = (vload16(1, qh) >> hsh) & (uchar)3;
    const float16 v0 = convert_float16(convert_int16(l0 | (h0 << (uchar)4)) - 32);
    const float16 v1 = convert_float16(convert_int16(l1 | (h1 << (uchar)4)) - 32);
    *a = (d * (float)scales[2 * s]) * v0;
    *b = (d * (float)scales[2 * s + 1]) * v1;
}

/* ---- matmul ----------------------------------------------------------------
 * Y[y0 + t*M + o] = sum_k X[x0 + t*K + k] * W[o][k] (+ bias[o]) for t < n,
 * o < M. Work-group (group 0) = NR output rows × (group 1) NTK tokens; its
 * work-items split the row's units (u = lid, lid + ls, ...), each unit's 32
 * products folded into 4-lane accumulators, and their partial sums meet in
 * local memory (red: NTK*NR*ls floats). */
#define MM_KERNEL(NAME, DEQ, NTK)                                                                          \
    __kernel void NAME(__global const uchar *W, ulong row_bytes, int K, int M, __global const float *X,    \
                       int x0, int n, __global float *Y, int y0, __global const float *bias, int has_bias, \
                       __local float *red) {                                                               \
        const int lid = get_local_id(0), ls = get_local_size(0);                                           \
        const int o0 = get_group_id(0) * NR, t0 = get_group_id(1) * NTK;                                   \
        const int nu = K / 32;                                                                             \
        float4 acc[NTK][NR];                                                                               \
        for (int t = 0; t < NTK; t++)                                                                      \
            for (int r = 0; r < NR; r++) acc[t][r] = (float4)(0.0f);                                       \
        for (int u = lid; u < nu; u += ls) {                                                               \
            float16 xa[NTK], xb[NTK];                                                                      \
            for (int t = 0; t < NTK; t++) {                                                                \
                if (t0 + t < n) {                                                                          \
                    __global const float *xp = X + x0 + (size_t)(t0 + t) * K + 32 * u;                     \
                    xa[t] = vload16(0, xp);                                                                \
                    xb[t] = vload16(1, xp);                                                                \
                } else {                                                                                   \
                    xa[t] = (float16)(0.0f);                                                               \
                    xb[t] = (float16)(0.0f);                                                               \
                }                                                                                          \
            }                                                                                              \
            for (int r = 0; r < NR; r++) {                                                                 \
                if (o0 + r < M) {                                                                          \
                    float16 wa, wb;                                                                        \
                    DEQ(W + (size_t)(o0 + r) * row_bytes, u, &wa, &wb);                                    \
                    for (int t = 0; t < NTK; t++) acc[t][r] += fold4(wa * xa[t] + wb * xb[t]);             \
                }                                                                                          \
            }                                                                                              \
        }                                                                                                  \
        for (int t = 0; t < NTK; t++)                                                                      \
            for (int r = 0; r < NR; r++) red[(t * NR + r) * ls + lid] = sum4(acc[t][r]);                   \
        barrier(CLK_LOCAL_MEM_FENCE);                                                                      \
        for (int i = lid; i < NTK * NR; i += ls) {                                                         \
            const int t = i / NR, r = i % NR;                                                              \
            if (t0 + t < n && o0 + r < M) {                                                                \
                float s = 0.0f;                                                                            \
                for (int j = 0; j < ls; j++) s += red[i * ls + j];                                         \
                if (has_bias) s += bias[o0 + r];                                                           \
                Y[y0 + (size_t)(t0 + t) * M + o0 + r] = s;                                                 \
            }                                                                                              \
        }                                                                                                  \
    }

/* One token (decode): the same split, with vector accumulators reduced once
 * at the end instead of a horizontal sum per unit. */
#define MM1_KERNEL(NAME, DEQ)                                                                              \
    __kernel void NAME(__global const uchar *W, ulong row_bytes, int K, int M, __global const float *X,    \
                       int x0, int n, __global float *Y, int y0, __global const float *bias, int has_bias, \
                       __local float *red) {                                                               \
        const int lid = get_local_id(0), ls = get_local_size(0);                                           \
        const int o0 = get_group_id(0) * NR1;                                                              \
        const int nu = K / 32;                                                                             \
        const int nr = min(NR1, M - o0);                                                                   \
        float16 acc[NR1];                                                                                  \
        for (int r = 0; r < NR1; r++) acc[r] = (float16)(0.0f);                                            \
        __global const float *xr = X + x0;                                                                 \
        for (int u = lid; u < nu; u += ls) {                                                               \
            const float16 xa = vload16(0, xr + 32 * u), xb = vload16(1, xr + 32 * u);                      \
            for (int r = 0; r < nr; r++) {                                                                 \
                float16 wa, wb;                                                                            \
                DEQ(W + (size_t)(o0 + r) * row_bytes, u, &wa, &wb);                                        \
                acc[r] += wa * xa + wb * xb;                                                               \
            }                                                                                              \
        }                                                                                                  \
        for (int r = 0; r < NR1; r++) red[r * ls + lid] = sum16(acc[r]);                                   \
        barrier(CLK_LOCAL_MEM_FENCE);                                                                      \
        for (int r = lid; r < nr; r += ls) {                                                               \
            float s = 0.0f;                                                                                \
            for (int j = 0; j < ls; j++) s += red[r * ls + j];                                             \
            if (has_bias) s += bias[o0 + r];                                                               \
            Y[y0 + o0 + r] = s;                                                                            \
        }                                                                                                  \
    }

MM1_KERNEL(mm1_f32, deq_f32)
MM_KERNEL(mmb_f32, deq_f32, NT)
MM1_KERNEL(mm1_f16, deq_f16)
MM_KERNEL(mmb_f16, deq_f16, NT)
MM1_KERNEL(mm1_q8_0, deq_q8_0)
MM_KERNEL(mmb_q8_0, deq_q8_0, NT)
MM1_KERNEL(mm1_q4_0, deq_q4_0)
MM_KERNEL(mmb_q4_0, deq_q4_0, NT)
MM1_KERNEL(mm1_q5_0, deq_q5_0)
MM_KERNEL(mmb_q5_0, deq_q5_0, NT)
MM1_KERNEL(mm1_q4_k, deq_q4_k)
MM_KERNEL(mmb_q4_k, deq_q4_k, NT)
MM1_KERNEL(mm1_q6_k, deq_q6_k)
MM_KERNEL(mmb_q6_k, deq_q6_k, NT)

/* ---- activations in the CPU's arithmetic -------------------------------------
 * Xq[t*K + k] = X[x0 + t*K + k] rounded as the CPU backend quantizes a matmul's
 * activations for the weight type (its vec_dot_type) and read back as float:
 * mode 1 F16 (round to nearest even); mode 2 Q8_0 blocks of 32 (d = amax/127
 * stored as F16, q = rint(x * 127/amax): llama.cpp's x86 quantizer); mode 3
 * Q8_K blocks of 256 (iscale = -127/max over the signed value of largest
 * magnitude, q = min(127, rint(iscale * x)), d = 1/iscale in float). The
 * float kernels then form the CPU's products (q_w d_w)(q_x d_x) up to the
 * order of the sums. One work-item per block (mode 1: per 32 values). */
__kernel void act_quant(__global const float *X, int x0, int K, int n, int mode, __global float *Xq) {
    const int blk = mode == 3 ? 256 : 32;
    const int nb = K / blk;
    const int i = get_global_id(0);
    if (i >= nb * n) return;
    const int t = i / nb, b = i % nb;
    __global const float *x = X + x0 + (size_t)t * K + (size_t)b * blk;
    __global float *y = Xq + (size_t)t * K + (size_t)b * blk;
    if (mode == 1) {
        for (int j = 0; j < 32; j++) y[j] = round_half(x[j]);
    } else if (mode == 2) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) amax = fmax(amax, fabs(x[j]));
        const float d = round_half(amax / 127.0f);
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        for (int j = 0; j < 32; j++) y[j] = rint(x[j] * id) * d;
    } else {
        float mx = 0.0f, amax = 0.0f;
        for (int j = 0; j < 256; j++) {
            const float ax = fabs(x[j]);
            if (ax > amax) {
                amax = ax;
                mx = x[j];
            }
        }
        if (amax == 0.0f) {
            for (int j = 0; j < 256; j++) y[j] = 0.0f;
            return;
        }
        const float iscale = -127.0f / mx;
        const float d = 1.0f / iscale;
        for (int j = 0; j < 256; j++) y[j] = fmin(rint(iscale * x[j]), 127.0f) * d;
    }
}

/* ---- RMS norm: one work-group per row; out may be in (same buffer, same offset) ---- */
__kernel void rmsnorm(__global const float *X, int x0, __global float *Y, int y0, int d, float eps,
                      __global const float *w, int has_w, __local float *red) {
    const int row = get_group_id(0), lid = get_local_id(0), ls = get_local_size(0);
    __global const float *xr = X + x0 + (size_t)row * d;
    __global float *yr = Y + y0 + (size_t)row * d;
    float s = 0.0f;
    for (int i = lid; i < d; i += ls) s += xr[i] * xr[i];
    red[lid] = s;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int h = ls / 2; h > 0; h >>= 1) { /* ls is a power of two */
        if (lid < h) red[lid] += red[lid + h];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float scale = 1.0f / sqrt(red[0] / (float)d + eps);
    for (int i = lid; i < d; i += ls) {
        const float v = xr[i] * scale;
        yr[i] = has_w ? v * w[i] : v;
    }
}

/* ---- RoPE: item (i, h, t) rotates pair i of head h of token t, in place.
 * theta = pos * theta_scale^i by repeated multiplication in float (the CPU's
 * order; the host computes theta_scale = powf(freq_base, -2/n_rot)). */
__kernel void rope(__global float *X, int x0, int n_heads, int head_dim, int n_rot, int pos0, int neox,
                   float theta_scale, float freq_scale, __global const float *ff, int has_ff) {
    const int i = get_global_id(0), h = get_global_id(1), t = get_global_id(2);
    if (2 * i >= n_rot) return;
    float theta = (float)(pos0 + t);
    for (int k = 0; k < i; k++) theta *= theta_scale;
    const float f = has_ff ? ff[i] : 1.0f;
    const float th = freq_scale * (theta / f);
    const float c = cos(th), s = sin(th);
    __global float *v = X + x0 + ((size_t)t * n_heads + h) * head_dim;
    const int ia = neox ? i : 2 * i, ib = neox ? i + n_rot / 2 : 2 * i + 1;
    const float a = v[ia], b = v[ib];
    v[ia] = fma(a, c, -(b * s));
    v[ib] = fma(a, s, b * c);
}

/* ---- element-wise ---- */
__kernel void scale_f32(__global float *Y, int y0, float s, int count) {
    const int i = get_global_id(0);
    if (i < count) Y[y0 + i] *= s;
}

__kernel void add_f32(__global float *Y, int y0, __global const float *X, int x0, int count) {
    const int i = get_global_id(0);
    if (i < count) Y[y0 + i] += X[x0 + i];
}

__kernel void silu_mul(__global float *G, int g0, __global const float *U, int u0, int count) {
    const int i = get_global_id(0);
    if (i >= count) return;
    const float g = G[g0 + i];
    G[g0 + i] = (g / (1.0f + exp(-g))) * U[u0 + i];
}

inline float gelu_tanh(float x) {
    const float A = 0.044715f, S = 0.79788456080286535587989211986876f;
    return 0.5f * x * (1.0f + tanh(S * x * fma(A * x, x, 1.0f)));
}

/* ggml's table semantics (ops.c): x rounded to F16, gelu of that, rounded to
 * F16; x <= -10 gives 0 and x >= 10 gives x. */
__kernel void gelu_mul(__global float *G, int g0, __global const float *U, int u0, int count) {
    const int i = get_global_id(0);
    if (i >= count) return;
    const float x = G[g0 + i];
    float g;
    if (x <= -10.0f) g = 0.0f;
    else if (x >= 10.0f) g = x;
    else g = round_half(gelu_tanh(round_half(x)));
    G[g0 + i] = g * U[u0 + i];
}

/* ---- KV cache store: row t of X (row_len floats) -> F16 cache row (pos0+t) [% ring] ---- */
__kernel void kv_store(__global half *C, int c0, __global const float *X, int x0, int row_len, int pos0,
                       int ring) {
    const int i = get_global_id(0), t = get_global_id(1);
    if (i >= row_len) return;
    const int pos = pos0 + t, r = ring > 0 ? pos % ring : pos;
    vstore_half_rte(X[x0 + (size_t)t * row_len + i], 0, C + c0 + (size_t)r * row_len + i);
}

/* ---- attention over the F16 cache: one work-group per (head h, token t) ----
 * Query at position p = pos0 + t sees positions j in [lo, p] (lo from the
 * window), stored at row j (ring = 0) or j % ring. Q is rounded to F16 (as
 * the CPU kernel does); the softmax runs online over chunks of ls positions:
 * each item scores one position (8 dims at a time), the chunk's
 * probabilities go through local memory, and each item accumulates the head
 * dims 4*lid.., 4*(lid + ls).. as float4 (ATT_DPI / 4 of them). Needs
 * head_dim % 8 == 0 and head_dim <= ATT_DPI * ls. lq: head_dim floats;
 * lp, lw: ls floats each. */
__kernel void attention(__global const float *Q, int q0, __global float *O, int o0, __global const half *Kc,
                        int k0, __global const half *Vc, int v0, int n_head, int n_head_kv, int hd, int pos0,
                        int window, int ring, float scale, __local float *lq, __local float *lp,
                        __local float *lw) {
    const int h = get_group_id(0), t = get_group_id(1), lid = get_local_id(0), ls = get_local_size(0);
    const int kvh = h / (n_head / n_head_kv);
    const int kv_row = n_head_kv * hd;
    const int p = pos0 + t;
    const int lo = window > 0 ? max(0, p - window + 1) : 0;
    __global const float *q = Q + q0 + ((size_t)t * n_head + h) * hd;
    for (int d = lid; d < hd; d += ls) lq[d] = round_half(q[d]);
    barrier(CLK_LOCAL_MEM_FENCE);
    float4 acc[ATT_DPI / 4];
    for (int k = 0; k < ATT_DPI / 4; k++) acc[k] = (float4)(0.0f);
    float M = -INFINITY, S = 0.0f;
    __global const half *kbase = Kc + k0 + (size_t)kvh * hd;
    __global const half *vbase = Vc + v0 + (size_t)kvh * hd;
    for (int j0 = lo; j0 <= p; j0 += ls) {
        const int j = j0 + lid;
        const int cnt = min(ls, p - j0 + 1);
        float s = -INFINITY;
        if (j <= p) {
            __global const half *kr = kbase + (size_t)(ring > 0 ? j % ring : j) * kv_row;
            /* the CPU's Q·K in its order (backend/cpu/attention.c att_dot, ggml's F16 dot
             * on x86): 4 accumulators of 16 lanes, fma per element, 64 elements a step,
             * then its reduction tree; a tail below a multiple of 64 summed after */
            const int np = hd & ~63;
            float sum = 0.0f;
            if (np > 0) {
                float16 a0 = (float16)(0.0f), a1 = a0, a2 = a0, a3 = a0;
                for (int i = 0; i < np; i += 64) {
                    a0 = fma(vload_half16(0, kr + i), vload16(0, lq + i), a0);
                    a1 = fma(vload_half16(0, kr + i + 16), vload16(0, lq + i + 16), a1);
                    a2 = fma(vload_half16(0, kr + i + 32), vload16(0, lq + i + 32), a2);
                    a3 = fma(vload_half16(0, kr + i + 48), vload16(0, lq + i + 48), a3);
                }
                a0 += a2;
                a1 += a3;
                a0 += a1;
                const float8 t3 = a0.hi + a0.lo;
                const float4 t6 = t3.hi + t3.lo;
                sum = (t6.x + t6.z) + (t6.y + t6.w);
            }
            for (int i = np; i < hd; i++) sum += vload_half(0, kr + i) * lq[i];
            s = sum * scale;
        }
        lp[lid] = s;
        barrier(CLK_LOCAL_MEM_FENCE);
        /* the CPU's sequence (backend/cpu/attention_impl.h), position by position in
         * ascending order: the online-softmax update, then the accumulator in F16 —
         * acc = fp16(acc * m) when the maximum moved, acc = fp16(fma(v, w, acc)) —
         * each work-item for its own dims (the scalar softmax state is the same in all) */
        for (int jj = 0; jj < cnt; jj++) {
            const float sj = lp[jj];
            float m = 1.0f, w = 1.0f;
            if (sj > M) {
                const float Mold = M;
                M = sj;
                m = exp(Mold - M);
            } else {
                w = exp(sj - M);
            }
            S = fma(S, m, w);
            const int jp = j0 + jj;
            __global const half *vr = vbase + (size_t)(ring > 0 ? jp % ring : jp) * kv_row;
            for (int k = 0; k < ATT_DPI / 4; k++) {
                const int d = 4 * (lid + k * ls);
                if (d >= hd) break;
                float4 a = acc[k];
                if (m != 1.0f) a = round_half4(a * m);
                acc[k] = round_half4(fma(vload_half4(0, vr + d), (float4)(w), a));
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float inv = S == 0.0f ? 0.0f : 1.0f / S;
    __global float *o = O + o0 + ((size_t)t * n_head + h) * hd;
    for (int k = 0; k < ATT_DPI / 4; k++) {
        const int d = 4 * (lid + k * ls);
        if (d >= hd) break;
        vstore4(acc[k] * inv, 0, o + d);
    }
}

/* ---- measure(): device read bandwidth. Work-group g sums its contiguous
 * chunk of `chunk` float4s (items strided by the local size). ---- */
__kernel void read_bw(__global const float4 *A, int n4, int chunk, __global float *out) {
    const int g = get_group_id(0), lid = get_local_id(0), ls = get_local_size(0);
    float4 s = (float4)(0.0f);
    const int end = min(n4, (g + 1) * chunk);
    for (int i = g * chunk + lid; i < end; i += ls) s += A[i];
    out[get_global_id(0)] = s.x + s.y + s.z + s.w;
}
