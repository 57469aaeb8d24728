/*
 * kernels.cl — the OpenCL backend's kernels (OpenCL C 1.2; cl_khr_fp64 used
 * where the device has it).
 *
 * Contract (backend_opencl.c launches them; backend.h's el_op_kind comments
 * and backend/cpu/ops.h state each op's meaning):
 *   - every buffer argument is a whole cl_mem; the operand's place in it is
 *     an element (or byte, where named so) offset argument, never a sub-buffer;
 *   - weights are read as the GGUF file holds them (ggml block layouts of
 *     src/package/quants_blocks.h), never a dequantised copy;
 *   - F16 data (weights, the KV cache) is read and written with
 *     vload_half / vstore_half_rte, core OpenCL: no cl_khr_fp16 needed;
 *   - the arithmetic is the CPU backend's, operation for operation, so that
 *     the results are its bits (test_opencl_ops checks them bit for bit):
 *     no contraction (FP_CONTRACT OFF; fma() exactly where the CPU fuses),
 *     the CPU's accumulation orders and rounding points, its expf variants
 *     (expf_poly below: backend/cpu/expf_poly.h; expf_libm: glibc's
 *     correctly-rounded-in-practice expf, as the correctly rounded exp of
 *     the double), double sums where the CPU sums in double. The host builds
 *     with -cl-fp32-correctly-rounded-divide-sqrt. On a device without
 *     cl_khr_fp64 the double steps run in float: close, not the same bits
 *     (the capability info says so: el_opencl_info.exact);
 *   - work-group size comes from the host (get_local_size); the __local
 *     scratch arguments are sized by the host to match.
 * Compile-time constants from the host's build options: NT (tokens per
 * matmul work-item), ATT_DPI (head dims per attention work-item: head_dim <=
 * ATT_DPI * local size).
 */
#pragma OPENCL FP_CONTRACT OFF

/* EL_NO_FP64 (a build option) takes the float path on a device with fp64 too (tests) */
#if defined(cl_khr_fp64) && !defined(EL_NO_FP64)
#define EL_FP64 1
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
typedef double dbl;
#else
typedef float dbl;
#endif

#ifndef NT
#define NT 4
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

/* ---- exp ---------------------------------------------------------------------
 * expf_poly: llama.cpp's vector expf as backend/cpu/expf_poly.h evaluates it,
 * step for step: n = round(x log2 e) by the 1.5*2^23 trick, b = x - n ln2 in
 * two fused steps, a degree-5 polynomial in fused steps, j * 2^n (ldexp,
 * exact); |n| > 192: 0 or +inf; NaN stays NaN. */
inline float expf_poly(float x) {
    const float r = 0x1.8p23f;
    const float z = fma(x, 0x1.715476p+0f, r);
    const float n = z - r;
    const float b = fma(-n, 0x1.7f7d1cp-20f, fma(-n, 0x1.62e4p-1f, x));
    const float u = b * b;
    const float j = fma(fma(fma(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, fma(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)), u,
                        fma(0x1.ffffecp-1f, b, 1.0f));
    if (fabs(n) > 192.0f) return n <= 0.0f ? 0.0f : INFINITY;
    if (isnan(n)) return j;
    return ldexp(j, (int)n);
}

/* libm's expf (glibc: within 0.502 ulp, so its result is the correctly
 * rounded one except within ~0.002 ulp of a rounding boundary): exp of the
 * double, rounded once to float. Without fp64: the device's exp. */
inline float expf_libm(float x) {
#if defined(EL_FP64)
    return (float)exp((double)x);
#else
    return exp(x);
#endif
}

/* ---- matmul in the CPU backend's arithmetic ----------------------------------
 * Y[y0 + t*M + o] = dot(W[o], A[t]) (+ bias[o]) for t < n, o < M, where A[t]
 * is activation row t in the CPU's vec_dot_type (act_quant's bytes: F16, Q8_0
 * or Q8_K blocks; F32 weights read the float row), at byte offset xoff,
 * xrow bytes apart. Each output is one work-item's sequential computation of
 * the CPU's portable kernel for the weight type (backend/cpu/kernels_portable.c,
 * kernels_kquants.c — the specification every CPU path gives the bits of):
 * integer block sums are exact in any order; the float operations — which
 * products are fused, the lanes and the order of their horizontal sum — are
 * the CPU's, one for one. Work-item (o, g) computes row o for the NTK tokens
 * g*NTK.. (the weight row stays in cache across them). The variant the CPU
 * picks for an n-row product (F32/F16: tinyBLAS order when n >= 2 and K % 16
 * == 0; Q4_K: the repacked gemm order for rows t < n - n % 4) is chosen the
 * same way from n and t; row1 != 0 (the CPU's row order, ops.h
 * el_op_matmul_row_order: speculative verification) computes every row as
 * a one-row product. */

/* x86 horizontal sum of 8 lanes: (hi128 + lo128), then (r0 + r2) + (r1 + r3). */
inline float hsum8(float8 a) {
    const float4 r = a.hi + a.lo;
    return (r.x + r.z) + (r.y + r.w);
}

/* _mm512_reduce_add_ps: lanes i+8 onto i, i+4 onto i, then (0+2)+(1+3). */
inline float reduce16(float16 v) {
    const float8 a = v.hi + v.lo;
    const float4 b = a.hi + a.lo;
    return (b.x + b.z) + (b.y + b.w);
}

/* The 8 lanes of a 32-element integer dot: lane l = sum of elements 4l..4l+3. */
inline int8 lanes32(char16 a0, char16 a1, char16 b0, char16 b1) {
    /* products in 16 bits, pairs summed in 16 bits (|a·b| <= 128·127: a pair fits), then in 32 */
    const short16 p0 = convert_short16(a0) * convert_short16(b0), p1 = convert_short16(a1) * convert_short16(b1);
    const short8 q0 = p0.even + p0.odd, q1 = p1.even + p1.odd;
    return (int8)(convert_int4(q0.even) + convert_int4(q0.odd), convert_int4(q1.even) + convert_int4(q1.odd));
}

inline int hsum_int8(int8 v) {
    const int4 a = v.lo + v.hi;
    return a.x + a.y + a.z + a.w;
}

/* F32 / F16 weights: one body, the element type its varying part (T, and
 * LD16 / LD1: 16 elements / one element at p as float). One-row order: 4
 * accumulators of 16 lanes over steps of 64, (a0+a2)+(a1+a3), reduce16; the
 * tail summed in TAIL: F32 a float sum, F16 a double sum. tinyBLAS order:
 * one 16-lane fma chain, reduce16. */
#define DOT_FLOAT(NAME, T, LD16, LD1, TAIL)                                                 \
    inline float NAME(__global const uchar *w, __global const uchar *x, int K, int n) {     \
        __global const T *a = (__global const T *)w, *b = (__global const T *)x;           \
        if (n >= 2 && K % 16 == 0) {                                                        \
            float16 c = (float16)(0.0f);                                                    \
            for (int i = 0; i < K; i += 16) c = fma(LD16(a + i), LD16(b + i), c);           \
            return reduce16(c);                                                             \
        }                                                                                   \
        const int np = K & ~63;                                                             \
        float16 c0 = (float16)(0.0f), c1 = c0, c2 = c0, c3 = c0;                            \
        for (int i = 0; i < np; i += 64) {                                                  \
            c0 = fma(LD16(a + i), LD16(b + i), c0);                                         \
            c1 = fma(LD16(a + i + 16), LD16(b + i + 16), c1);                               \
            c2 = fma(LD16(a + i + 32), LD16(b + i + 32), c2);                               \
            c3 = fma(LD16(a + i + 48), LD16(b + i + 48), c3);                               \
        }                                                                                   \
        TAIL s = (TAIL)reduce16((c0 + c2) + (c1 + c3));                                     \
        for (int i = np; i < K; i++) s += (TAIL)(LD1(a + i) * LD1(b + i));                  \
        return (float)s;                                                                    \
    }
#define LD16_F32(p) vload16(0, p)
#define LD1_F32(p) (*(p))
#define LD16_F16(p) vload_half16(0, p)
#define LD1_F16(p) vload_half(0, p)
DOT_FLOAT(dot_f32, float, LD16_F32, LD1_F32, float)
DOT_FLOAT(dot_f16, half, LD16_F16, LD1_F16, dbl)

/* The quantized types' products, in the NT-token form: each weight block is
 * unpacked once for the tokens (x: the first token's activation row, xrow
 * bytes apart; nt <= NT tokens; out: their results), and every output gets
 * the per-output operations stated above its type (dotn_<type>). */

/* ---- the 32-element types against Q8_0 activations (34-byte blocks: F16 d,
 * 32 int8). A weight block unpacks to 32 int8 values (a0: elements 0..15,
 * a1: 16..31) and its F16 scale d_w: the type's dequantization, the only
 * part that varies (unpack_q32); the dot products are one code (dotn_q32):
 *   Q8_0 (34 bytes: d, 32 int8): 8 lanes, acc[l] = fma(d_w * d_x,
 *     (float)lane_l, acc[l]), hsum8;
 *   Q4_0 (18 bytes: d, 16 bytes of nibbles, element j low, j+16 high;
 *     value q-8): one chain, acc = fma((float)sumi, d_w * d_x, acc);
 *   Q5_0 (22 bytes: d, qh — bit j the 5th bit of element j —, nibbles as
 *     Q4_0; value q-16): lanes as Q8_0. */
#define Q32_Q8_0 0
#define Q32_Q4_0 1
#define Q32_Q5_0 2

inline int q32_bytes(int type) { return type == Q32_Q8_0 ? 34 : type == Q32_Q4_0 ? 18 : 22; }

inline void unpack_q32(int type, __global const uchar *wb, char16 *a0, char16 *a1) {
    if (type == Q32_Q8_0) {
        __global const char *qw = (__global const char *)(wb + 2);
        *a0 = vload16(0, qw);
        *a1 = vload16(1, qw);
    } else if (type == Q32_Q4_0) {
        const uchar16 q = vload16(0, wb + 2);
        *a0 = as_char16(q & (uchar)0xF) - (char)8;
        *a1 = as_char16(q >> (uchar)4) - (char)8;
    } else {
        const uint16 sh = (uint16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
        const uint qh = (uint)wb[2] | ((uint)wb[3] << 8) | ((uint)wb[4] << 16) | ((uint)wb[5] << 24);
        const uchar16 q = vload16(0, wb + 6);
        const uchar16 hlo = convert_uchar16((((uint16)(qh) >> sh) & 1u) << 4);
        const uchar16 hhi = convert_uchar16((((uint16)(qh >> 16) >> sh) & 1u) << 4);
        *a0 = as_char16((q & (uchar)0xF) | hlo) - (char)16;
        *a1 = as_char16((q >> (uchar)4) | hhi) - (char)16;
    }
}

/* type: a constant at every call, so each instance is one type's code. */
inline void dotn_q32(int type, __global const uchar *w, __global const uchar *x, ulong xrow, int K, int nt,
                     float *out) {
    const bool chain = type == Q32_Q4_0;
    const int bytes = q32_bytes(type);
    float8 acc[NT];  /* the 8 lanes (Q8_0, Q5_0) */
    float acc1[NT];  /* the one chain (Q4_0) */
    for (int t = 0; t < NT; t++) acc[t] = (float8)(0.0f), acc1[t] = 0.0f;
    for (int ib = 0; ib < K / 32; ib++) {
        __global const uchar *wb = w + bytes * ib;
        const float dw = ldh(wb);
        char16 a0, a1;
        unpack_q32(type, wb, &a0, &a1);
        for (int t = 0; t < NT; t++) {
            if (t >= nt) break;
            __global const uchar *xb = x + t * xrow + 34 * ib;
            __global const char *qx = (__global const char *)(xb + 2);
            const int8 l = lanes32(a0, a1, vload16(0, qx), vload16(1, qx));
            if (chain) acc1[t] = fma((float)hsum_int8(l), dw * ldh(xb), acc1[t]);
            else acc[t] = fma((float8)(dw * ldh(xb)), convert_float8(l), acc[t]);
        }
    }
    for (int t = 0; t < nt; t++) out[t] = chain ? acc1[t] : hsum8(acc[t]);
}

/* n and t0: the signature of dotn_q4_k, whose variant depends on them. */
#define DOTN_Q32(NAME, TYPE)                                                                                   \
    inline void NAME(__global const uchar *w, __global const uchar *x, ulong xrow, int K, int n, int t0, int nt, \
                     float *out) {                                                                             \
        (void)n, (void)t0;                                                                                     \
        dotn_q32(TYPE, w, x, xrow, K, nt, out);                                                                \
    }
DOTN_Q32(dotn_q8_0, Q32_Q8_0)
DOTN_Q32(dotn_q4_0, Q32_Q4_0)
DOTN_Q32(dotn_q5_0, Q32_Q5_0)

/* Q8_K activation blocks (292 bytes): float d, int8 qs[256], int16 bsums[16]. */
#define Q8K_BYTES 292
inline float q8k_d(__global const uchar *b) { return *(__global const float *)b; }
inline int q8k_bsum(__global const uchar *b, int g) { return (int)((__global const short *)(b + 260))[g]; }

/* Q4_K (144 bytes: d, dmin, 12 bytes of 6-bit scales/mins, 128 bytes of
 * nibbles; sub-block j: the low (j even) / high (j odd) nibbles of
 * qs[32*(j/2)..]): isum = sum_j sc_j * (sub-block j's dot), summ = sum_j m_j *
 * (bsums[2j] + bsums[2j+1]); acc = fma((float)isum, d_w d_x, acc), accm =
 * fma((float)summ, dmin_w d_x, accm) per super-block (gemv) or per pair of
 * sub-blocks (gemm, rows t < n - n % 4); the result acc - accm. */
inline void q4k_sm(__global const uchar *sc, int j, int *s, int *m) {
    if (j < 4) {
        *s = sc[j] & 63;
        *m = sc[j + 4] & 63;
    } else {
        *s = (sc[j + 4] & 0xF) | ((sc[j - 4] >> 6) << 4);
        *m = (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4);
    }
}

inline void dotn_q4_k(__global const uchar *w, __global const uchar *x, ulong xrow, int K, int n, int t0, int nt,
                      float *out) {
    float acc[NT], accm[NT];
    for (int t = 0; t < NT; t++) acc[t] = accm[t] = 0.0f;
    for (int ib = 0; ib < K / 256; ib++) {
        __global const uchar *wb = w + 144 * ib;
        const float dw = ldh(wb), dminw = ldh(wb + 2);
        char16 a[16];
        int sc[8], mn[8];
        for (int j = 0; j < 8; j++) {
            q4k_sm(wb + 4, j, &sc[j], &mn[j]);
            const uchar16 q0 = vload16(0, wb + 16 + 32 * (j >> 1)), q1 = vload16(1, wb + 16 + 32 * (j >> 1));
            a[2 * j] = as_char16((j & 1) ? q0 >> (uchar)4 : q0 & (uchar)0xF);
            a[2 * j + 1] = as_char16((j & 1) ? q1 >> (uchar)4 : q1 & (uchar)0xF);
        }
        for (int t = 0; t < NT; t++) {
            if (t >= nt) break;
            const bool x4 = t0 + t < n - n % 4;
            __global const uchar *xb = x + t * xrow + Q8K_BYTES * ib;
            const float dx = q8k_d(xb);
            const float d = dw * dx, dmin = dminw * dx;
            __global const char *qx = (__global const char *)(xb + 4);
            int isum = 0, summ = 0;
            for (int j = 0; j < 8; j++) {
                const int p = hsum_int8(lanes32(a[2 * j], a[2 * j + 1], vload16(0, qx + 32 * j), vload16(1, qx + 32 * j)));
                isum += sc[j] * p;
                summ += mn[j] * (q8k_bsum(xb, 2 * j) + q8k_bsum(xb, 2 * j + 1));
                if (x4 && (j & 1)) {
                    acc[t] = fma((float)isum, d, acc[t]);
                    accm[t] = fma((float)summ, dmin, accm[t]);
                    isum = summ = 0;
                }
            }
            if (!x4) {
                acc[t] = fma((float)isum, d, acc[t]);
                accm[t] = fma((float)summ, dmin, accm[t]);
            }
        }
    }
    for (int t = 0; t < nt; t++) out[t] = acc[t] - accm[t];
}

/* Q6_K (210 bytes: ql[128], qh[64], int8 scales[16], d): the quants unsigned
 * (0..63); chunk c (elements 32c..32c+31, c = 4n + k: low bits ql[64n +
 * 32(k&1) + l] >> (k >= 2 ? 4 : 0), high (qh[32n + l] >> 2k) & 3) adds
 * sc[2c + l/4] * (its lane l dot) to lane l; lane l -= 32 * (bsums[2l] sc[2l]
 * + bsums[2l+1] sc[2l+1]); acc[l] = fma(d_x d_w, (float)lane_l, acc[l]); hsum8. */
inline void dotn_q6_k(__global const uchar *w, __global const uchar *x, ulong xrow, int K, int n, int t0, int nt,
                      float *out) {
    (void)n, (void)t0; /* the same signature as dotn_q4_k, whose variant depends on them */
    float8 acc[NT];
    for (int t = 0; t < NT; t++) acc[t] = (float8)(0.0f);
    for (int ib = 0; ib < K / 256; ib++) {
        __global const uchar *wb = w + 210 * ib;
        __global const char *scales = (__global const char *)(wb + 192);
        const float dw = ldh(wb + 208);
        char16 a[16];
        for (int c = 0; c < 8; c++) {
            const int nn = c >> 2, k = c & 3;
            __global const uchar *ql = wb + 64 * nn + 32 * (k & 1);
            __global const uchar *qh = wb + 128 + 32 * nn;
            const uchar lsh = (uchar)(k >= 2 ? 4 : 0), hsh = (uchar)(2 * k);
            a[2 * c] = as_char16(((vload16(0, ql) >> lsh) & (uchar)0xF) | (((vload16(0, qh) >> hsh) & (uchar)3) << (uchar)4));
            a[2 * c + 1] = as_char16(((vload16(1, ql) >> lsh) & (uchar)0xF) | (((vload16(1, qh) >> hsh) & (uchar)3) << (uchar)4));
        }
        for (int t = 0; t < NT; t++) {
            if (t >= nt) break;
            __global const uchar *xb = x + t * xrow + Q8K_BYTES * ib;
            __global const char *qx = (__global const char *)(xb + 4);
            int8 lanes = (int8)(0);
            for (int c = 0; c < 8; c++) {
                const int8 l = lanes32(a[2 * c], a[2 * c + 1], vload16(0, qx + 32 * c), vload16(1, qx + 32 * c));
                const int s0 = scales[2 * c], s1 = scales[2 * c + 1];
                lanes += l * (int8)(s0, s0, s0, s0, s1, s1, s1, s1);
            }
            int8 corr;
            corr.s0 = q8k_bsum(xb, 0) * scales[0] + q8k_bsum(xb, 1) * scales[1];
            corr.s1 = q8k_bsum(xb, 2) * scales[2] + q8k_bsum(xb, 3) * scales[3];
            corr.s2 = q8k_bsum(xb, 4) * scales[4] + q8k_bsum(xb, 5) * scales[5];
            corr.s3 = q8k_bsum(xb, 6) * scales[6] + q8k_bsum(xb, 7) * scales[7];
            corr.s4 = q8k_bsum(xb, 8) * scales[8] + q8k_bsum(xb, 9) * scales[9];
            corr.s5 = q8k_bsum(xb, 10) * scales[10] + q8k_bsum(xb, 11) * scales[11];
            corr.s6 = q8k_bsum(xb, 12) * scales[12] + q8k_bsum(xb, 13) * scales[13];
            corr.s7 = q8k_bsum(xb, 14) * scales[14] + q8k_bsum(xb, 15) * scales[15];
            lanes -= 32 * corr;
            acc[t] = fma((float8)(q8k_d(xb) * dw), convert_float8(lanes), acc[t]);
        }
    }
    for (int t = 0; t < nt; t++) out[t] = hsum8(acc[t]);
}

/* F32 / F16 in the NT-token form: no weight block to unpack once, so each
 * token is the one-token product above (n and t0 as dotn_q4_k's). */
#define DOTN_EACH(NAME, DOT)                                                                                   \
    inline void NAME(__global const uchar *w, __global const uchar *x, ulong xrow, int K, int n, int t0, int nt, \
                     float *out) {                                                                             \
        (void)t0;                                                                                              \
        for (int t = 0; t < nt; t++) out[t] = DOT(w, x + (size_t)t * xrow, K, n);                              \
    }
DOTN_EACH(dotn_f32, dot_f32)
DOTN_EACH(dotn_f16, dot_f16)

/* Work-item (o, g): weight row o for the tokens g*NT .. (at most NT), with
 * the weight type's NT-token product DOTN. */
#define MM_KERNEL(NAME, DOTN)                                                                                   \
    __kernel void NAME(__global const uchar *W, ulong row_bytes, int K, int M, __global const uchar *X,          \
                       ulong xoff, ulong xrow, int n, __global float *Y, int y0, __global const float *bias,     \
                       int has_bias, int row1) {                                                                 \
        const int o = get_global_id(0), t0 = get_global_id(1) * NT;                                             \
        if (o >= M) return;                                                                                     \
        const int nt = min(NT, n - t0);                                                                         \
        float r[NT];                                                                                            \
        DOTN(W + (size_t)o * row_bytes, X + xoff + (size_t)t0 * xrow, xrow, K, row1 ? 1 : n, row1 ? 0 : t0, nt, r); \
        for (int t = 0; t < nt; t++) {                                                                          \
            float s = r[t];                                                                                     \
            if (has_bias) s += bias[o];                                                                         \
            Y[y0 + (size_t)(t0 + t) * M + o] = s;                                                               \
        }                                                                                                       \
    }

MM_KERNEL(mm_f32, dotn_f32)
MM_KERNEL(mm_f16, dotn_f16)
MM_KERNEL(mm_q8_0, dotn_q8_0)
MM_KERNEL(mm_q4_0, dotn_q4_0)
MM_KERNEL(mm_q5_0, dotn_q5_0)
MM_KERNEL(mm_q4_k, dotn_q4_k)
MM_KERNEL(mm_q6_k, dotn_q6_k)

/* ---- activations in the CPU's formats ------------------------------------------
 * Row t of X (K floats at x0 + t*K) written to Xq + t*xrow bytes as the CPU
 * backend quantizes a matmul's activations for the weight type (its
 * vec_dot_type), byte for byte: mode 1 F16 (round to nearest even); mode 2
 * Q8_0 blocks (d = fp16(amax/127), q = rint(x * (127/amax)): the CPU's
 * el_cpu_quantize_q8_0); mode 3 Q8_K blocks (iscale = -127/max over the
 * signed value of largest magnitude, q = min(127, rint(iscale * x)),
 * d = 1/iscale, bsums: sums of 16; all zero for an all-zero block:
 * el_quant_q8_k). One work-item per block (mode 1: per 32 values). */
__kernel void act_quant(__global const float *X, int x0, int K, int n, int mode, __global uchar *Xq, ulong xrow) {
    const int blk = mode == 3 ? 256 : 32;
    const int nb = K / blk;
    const int i = get_global_id(0);
    if (i >= nb * n) return;
    const int t = i / nb, b = i % nb;
    __global const float *x = X + x0 + (size_t)t * K + (size_t)b * blk;
    __global uchar *row = Xq + (size_t)t * xrow;
    if (mode == 1) {
        __global half *y = (__global half *)row + 32 * b;
        for (int j = 0; j < 32; j++) vstore_half_rte(x[j], j, y);
    } else if (mode == 2) {
        __global uchar *y = row + 34 * b;
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) amax = fmax(amax, fabs(x[j]));
        vstore_half_rte(amax / 127.0f, 0, (__global half *)y);
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        for (int j = 0; j < 32; j++) ((__global char *)(y + 2))[j] = (char)(int)rint(x[j] * id);
    } else {
        __global uchar *y = row + Q8K_BYTES * b;
        __global char *qs = (__global char *)(y + 4);
        __global short *bs = (__global short *)(y + 260);
        float mx = 0.0f, amax = 0.0f;
        for (int j = 0; j < 256; j++) {
            const float ax = fabs(x[j]);
            if (ax > amax) {
                amax = ax;
                mx = x[j];
            }
        }
        if (amax == 0.0f) {
            *(__global float *)y = 0.0f;
            for (int j = 0; j < 256; j++) qs[j] = 0;
            for (int g = 0; g < 16; g++) bs[g] = 0;
            return;
        }
        const float iscale = -127.0f / mx;
        for (int j = 0; j < 256; j++) qs[j] = (char)(int)fmin(rint(iscale * x[j]), 127.0f);
        for (int g = 0; g < 16; g++) {
            int s = 0;
            for (int l = 0; l < 16; l++) s += qs[16 * g + l];
            bs[g] = (short)s;
        }
        *(__global float *)y = 1.0f / iscale;
    }
}

/* ---- RMS norm: one work-group per row; out may be in (same buffer, same offset).
 * The CPU's arithmetic (ops.c el_op_rmsnorm): the float squares summed in
 * order in double, mean = (float)(sum / d), scale = 1 / sqrt(mean + eps)
 * (correctly rounded: the host builds with -cl-fp32-correctly-rounded-divide-sqrt),
 * out = (x * scale) * w. Without fp64 the sum is a float one (approximate). */
__kernel void rmsnorm(__global const float *X, int x0, __global float *Y, int y0, int d, float eps,
                      __global const float *w, int has_w, __local float *red) {
    const int row = get_group_id(0), lid = get_local_id(0), ls = get_local_size(0);
    __global const float *xr = X + x0 + (size_t)row * d;
    __global float *yr = Y + y0 + (size_t)row * d;
    if (lid == 0) {
        dbl sum = 0;
        for (int i = 0; i < d; i++) sum += (dbl)(xr[i] * xr[i]);
        const float mean = (float)(sum / (dbl)d);
        red[0] = 1.0f / sqrt(mean + eps);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    const float scale = red[0];
    for (int i = lid; i < d; i += ls) {
        const float v = xr[i] * scale;
        yr[i] = has_w ? v * w[i] : v;
    }
}

/* ---- RoPE: item (i, h, t) rotates pair i of head h of token t, in place,
 * with the cos/sin the CPU computes for position pos0 + t (the host fills
 * CS — n_rot floats per position, cos then sin of each pair — with
 * el_op_rope's own code) and the CPU's fused products. */
__kernel void rope(__global float *X, int x0, int n_heads, int head_dim, int n_rot, int pos0, int neox,
                   __global const float *CS) {
    const int i = get_global_id(0), h = get_global_id(1), t = get_global_id(2);
    if (2 * i >= n_rot) return;
    __global const float *cs = CS + (size_t)(pos0 + t) * n_rot;
    const float c = cs[2 * i], s = cs[2 * i + 1];
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

/* SiLU as the CPU computes it (ops.c): g / (1 + exp(-g)) with llama.cpp's
 * vector expf (expf_poly) on the whole groups of 16 of each row of d, libm's
 * expf on the rest. */
__kernel void silu_mul(__global float *G, int g0, __global const float *U, int u0, int count, int d) {
    const int i = get_global_id(0);
    if (i >= count) return;
    const float g = G[g0 + i];
    const float e = i % d < (d & ~15) ? expf_poly(0.0f - g) : expf_libm(-g);
    G[g0 + i] = (g / (1.0f + e)) * U[u0 + i];
}

/* GELU as the CPU computes it (ops.c): ggml's table — T[h] = fp16(gelu_tanh(h))
 * for every F16 value h, the CPU's own table uploaded by the host — indexed
 * by fp16(x); x <= -10 gives 0 and x >= 10 gives x. */
__kernel void gelu_mul(__global float *G, int g0, __global const float *U, int u0, int count,
                       __global const float *T) {
    const int i = get_global_id(0);
    if (i >= count) return;
    const float x = G[g0 + i];
    float g;
    if (x <= -10.0f) g = 0.0f;
    else if (x >= 10.0f) g = x;
    else {
        ushort h;
        vstore_half_rte(x, 0, (__private half *)&h);
        g = T[h];
    }
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
 * For fewer than 64 query rows (the CPU's one-row kernel,
 * backend/cpu/attention_impl.h; 64 or more: attention_tiled below).
 * Query at position p = pos0 + t sees positions j in [lo, p] (lo from the
 * window), stored at row j (ring = 0) or j % ring. Q is rounded to F16 (as
 * the CPU kernel does); the softmax runs online over chunks of ls positions:
 * each item scores one position (8 dims at a time), the chunk's
 * probabilities go through local memory, and each item accumulates the head
 * dims 4*lid.., 4*(lid + ls).. as float4 (ATT_DPI / 4 of them). Needs
 * head_dim % 8 == 0 and head_dim <= ATT_DPI * ls. lq: head_dim floats;
 * lp, lw, lm: ls floats each. */
__kernel void attention(__global const float *Q, int q0, __global float *O, int o0, __global const half *Kc,
                        int k0, __global const half *Vc, int v0, int n_head, int n_head_kv, int hd, int pos0,
                        int window, int ring, float scale, __local float *lq, __local float *lp,
                        __local float *lw, __local float *lm) {
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
             * then its reduction tree; a tail below a multiple of 64 summed after in double */
            const int np = hd & ~63;
            dbl sum = 0;
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
                sum = (dbl)((t6.x + t6.z) + (t6.y + t6.w));
            }
            for (int i = np; i < hd; i++) sum += (dbl)(vload_half(0, kr + i) * lq[i]);
            s = (float)sum * scale;
        }
        lp[lid] = s;
        barrier(CLK_LOCAL_MEM_FENCE);
        /* the softmax factors of the chunk, item jj for position jj: the running maximum
         * before it (M, then the chunk's earlier scores: the CPU's "if s > M: M = s"),
         * m = exp(Mold - s) where s raises it, else w = exp(s - M) */
        if (lid < cnt) {
            float Mb = M;
            for (int i = 0; i < lid; i++)
                if (lp[i] > Mb) Mb = lp[i];
            float m = 1.0f, w = 1.0f;
            if (s > Mb) m = expf_libm(Mb - s);
            else w = expf_libm(s - Mb);
            lm[lid] = m;
            lw[lid] = w;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        /* the CPU's sequence (backend/cpu/attention_impl.h), position by position in
         * ascending order: the online-softmax update, then the accumulator in F16 —
         * acc = fp16(acc * m) when the maximum moved, acc = fp16(fma(v, w, acc)) —
         * each work-item for its own dims (the scalar softmax state is the same in all) */
        for (int jj = 0; jj < cnt; jj++) {
            const float m = lm[jj], w = lw[jj];
            if (lp[jj] > M) M = lp[jj];
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

/* ---- attention for 64 or more query rows: the CPU's tiled kernel ------------
 * (backend/cpu/attention_tiled_impl.h, ggml's tiled flash attention), one
 * work-group per (head h, token t). Q stays float. The positions are walked
 * in tiles of 64 aligned to multiples of 64 from the tile of lo; for a tile:
 * s[k] = (fma chain over d ascending from 0 of q[d] K[k][d]) * scale for the
 * visible positions (items score positions lid, lid + ls, ...; through local
 * memory), -inf elsewhere; Mnew = max(M, max s); if it grew, acc and S are
 * multiplied by expf(M - Mnew) (libm's); e[k] = expf_poly(s[k] - Mnew);
 * S = (float)((double)S + the double sum of the four 16-lane reductions of
 * e); acc[d] = fma(e[k], V[k][d], acc[d]) over the visible k ascending, in
 * float (each item its own dims; the softmax state, computed by every item
 * alike, is the same in all). out = acc * (1/S). ls: >= 64 floats. */
__kernel void attention_tiled(__global const float *Q, int q0, __global float *O, int o0, __global const half *Kc,
                              int k0, __global const half *Vc, int v0, int n_head, int n_head_kv, int hd, int pos0,
                              int window, int ring, float scale, __local float *lq, __local float *lsc) {
    const int h = get_group_id(0), t = get_group_id(1), lid = get_local_id(0), ls = get_local_size(0);
    const int kvh = h / (n_head / n_head_kv);
    const int kv_row = n_head_kv * hd;
    const int p = pos0 + t;
    const int lo = window > 0 ? max(0, p - window + 1) : 0;
    __global const float *q = Q + q0 + ((size_t)t * n_head + h) * hd;
    for (int d = lid; d < hd; d += ls) lq[d] = q[d];
    barrier(CLK_LOCAL_MEM_FENCE);
    float4 acc[ATT_DPI / 4];
    for (int k = 0; k < ATT_DPI / 4; k++) acc[k] = (float4)(0.0f);
    float M = -INFINITY, S = 0.0f;
    __global const half *kbase = Kc + k0 + (size_t)kvh * hd;
    __global const half *vbase = Vc + v0 + (size_t)kvh * hd;
    for (int j0 = lo & ~63; j0 <= p; j0 += 64) {
        const int va = max(j0, lo), vz = min(j0 + 63, p); /* visible positions of the tile */
        for (int k = lid; k < 64; k += ls) {
            const int j = j0 + k;
            float s = -INFINITY;
            if (j >= va && j <= vz) {
                __global const half *kr = kbase + (size_t)(ring > 0 ? j % ring : j) * kv_row;
                float a = 0.0f;
                for (int d = 0; d < hd; d++) a = fma(lq[d], vload_half(d, kr), a);
                s = a * scale;
            }
            lsc[k] = s;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        float e[64];
        float tmax = -INFINITY;
        for (int k = 0; k < 64; k++) {
            e[k] = lsc[k];
            tmax = e[k] > tmax ? e[k] : tmax;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        if (tmax == -INFINITY) continue;
        const float Mold = M, Mnew = fmax(Mold, tmax);
        float ms = 1.0f;
        if (Mnew > Mold) {
            ms = expf_libm(Mold - Mnew);
            S *= ms;
        }
        M = Mnew;
        dbl sum = 0;
        for (int g = 0; g < 64; g += 16) {
            float16 v;
            v.s0 = expf_poly(e[g + 0] - M), v.s1 = expf_poly(e[g + 1] - M), v.s2 = expf_poly(e[g + 2] - M);
            v.s3 = expf_poly(e[g + 3] - M), v.s4 = expf_poly(e[g + 4] - M), v.s5 = expf_poly(e[g + 5] - M);
            v.s6 = expf_poly(e[g + 6] - M), v.s7 = expf_poly(e[g + 7] - M), v.s8 = expf_poly(e[g + 8] - M);
            v.s9 = expf_poly(e[g + 9] - M), v.sa = expf_poly(e[g + 10] - M), v.sb = expf_poly(e[g + 11] - M);
            v.sc = expf_poly(e[g + 12] - M), v.sd = expf_poly(e[g + 13] - M), v.se = expf_poly(e[g + 14] - M);
            v.sf = expf_poly(e[g + 15] - M);
            vstore16(v, 0, e + g);
            const float8 r8 = v.hi + v.lo;
            const float4 r4 = r8.hi + r8.lo;
            sum += (dbl)((r4.x + r4.z) + (r4.y + r4.w));
        }
        S = (float)((dbl)S + sum);
        for (int k = 0; k < ATT_DPI / 4; k++) {
            const int d = 4 * (lid + k * ls);
            if (d >= hd) break;
            float4 a = acc[k];
            if (Mnew > Mold) a *= ms;
            for (int j = va; j <= vz; j++) {
                const float w = e[j - j0];
                if (w == 0.0f) continue;
                __global const half *vr = vbase + (size_t)(ring > 0 ? j % ring : j) * kv_row;
                a = fma((float4)(w), vload_half4(0, vr + d), a);
            }
            acc[k] = a;
        }
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
