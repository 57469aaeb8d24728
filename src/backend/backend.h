/*
 * backend.h — the hardware abstraction (L3): what a backend is, and the ops
 * the forward passes hand to one.
 *
 * A backend is a struct of function pointers in the spirit of ggml's
 * ggml_backend_i and ExecuTorch's delegate: buffers (alloc, write, read),
 * model constants uploaded once (weights, norm vectors, biases, keyed by
 * their host address), whether it runs an op, running it, and
 * synchronisation. The CPU backend (backend/cpu/backend_cpu.c) runs the
 * kernels of backend/cpu/ on host memory; the OpenCL backend
 * (backend/opencl/) runs OpenCL C kernels on any OpenCL device.
 *
 * The forward passes (runtime/blocks.c, runtime/arch/) never call a kernel
 * directly: they build an el_op — kind, shapes, types, operands, and the
 * flops and bytes it costs (seed 000 §5.7, the runtime → scheduler contract)
 * — and hand it to the session's executor (runtime/exec.h), which runs it on
 * the backend the placement chose and moves the operands across the
 * boundary when they live elsewhere.
 *
 * Operands are byte ranges of session tensors (el_tensor): every tensor has
 * a host copy (the session's scratch, sized by the memory plan) and, on each
 * other backend that touches it, a buffer of that backend. `valid` says
 * which copies hold the current bytes; the executor keeps it true. A
 * backend's run() sees only operands already valid on it.
 *
 * Contract of every backend function: no allocation in run() beyond what
 * buf_alloc/upload_const set up; errors are returned (never abort) with the
 * reason in err, so the executor can fall back to the CPU and record it.
 */
#ifndef EL_BACKEND_BACKEND_H
#define EL_BACKEND_BACKEND_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/cpu/ops.h"
#include "package/types.h"
#include "util/error.h"

#define EL_MAX_BACKENDS 4 /* index 0 is always the CPU backend */
#define EL_ROPE_CS_MAX 512 /* the most rotated dims per head an op may ask for */

/* ---- ops ---------------------------------------------------------------- */

typedef enum el_op_kind {
    EL_OPK_GET_ROWS = 0, /* dst0[t] = row toks[t] of w0 (dequantized) * scale; n rows of d */
    EL_OPK_RMSNORM,      /* dst0 = rmsnorm(src0) * vec0 (vec0 may be NULL); n rows of d, eps */
    EL_OPK_MATMUL,       /* dst_i = src0 · w_iᵀ (+ vec_i bias), i < n_w; n rows of d = w0->ne0 */
    EL_OPK_ROPE,         /* in place on dst0: n tokens at pos0.., n_heads heads of head_dim */
    EL_OPK_SCALE,        /* in place on dst0: count floats times s; then, when cap > 0, cap·tanh(each) (soft-capping) */
    EL_OPK_FWHT,         /* in place on dst0: n rows of nrot (el_op_fwht) */
    EL_OPK_KV_STORE,     /* src0 (n rows of row_len floats) into cache dst0 at pos0 (el_op_kv_store_typed) */
    EL_OPK_ATTENTION,    /* dst0 = attention(q = src0, kcache = src1, vcache = src2) (el_op_attention) */
    EL_OPK_SILU_MUL,     /* dst0 = silu(dst0) * src1; n rows of d */
    EL_OPK_GELU_MUL,     /* dst0 = gelu_tanh(dst0) * src1; count floats */
    EL_OPK_ADD,          /* dst0 += src1; count floats */
    EL_OPK_COPY,         /* dst0 = src0 (byte copy, may overlap: memmove) */
    EL_OPK_HOST,         /* host.fn(host.ctx) on host memory (embedding pooling): CPU only */
    EL_OPK_LORA,         /* dst_i += s_k · B_k·(A_k·src0) for every term k of lora.term with dst k = i
                          * (el_op_lora, backend/cpu/lora_kernels.h): the LoRA terms of one group of
                          * projections sharing src0 (Q/K/V, gate/up, or one), all adapters; n rows of d;
                          * src1/src2 name dst1/dst2 again (they are read too); lora.t/tq/xq: host
                          * scratch of lora.chunk rows (runtime/lora.h); no w (n_w = 0) */
    EL_OPK_MOE,          /* dst0 = the mixture-of-experts FFN of src0 (el_op_moe, backend/cpu/ops.h): n rows of
                          * d; moe.moe: router, experts, shared expert; moe.scratch: host memory of
                          * el_moe_scratch_bytes; no w (n_w = 0). A backend without it refuses it (CPU runs it) */
    EL_OPK_COUNT
} el_op_kind;

const char *el_op_kind_name(el_op_kind k); /* "matmul"; "?" when out of range */

/* A session tensor: an activation buffer, the logits, one layer's K or V cache. */
typedef struct el_tensor {
    const char *name;              /* "x", "q", "kc" ... (with `layer` for caches) */
    int id;                        /* index in the session's tensor table */
    int layer;                     /* caches: their layer; else -1 */
    void *host;                    /* host copy (always present) */
    size_t bytes;                  /* capacity of every copy */
    void *dev[EL_MAX_BACKENDS];    /* backend b's buffer (NULL: none yet); dev[0] unused */
    unsigned valid;                /* bit b: backend b's copy is current (bit 0: the host's) */
    size_t extent;                 /* bytes from 0 written since the step began (what a move copies) */
    int home;                      /* persistent state (KV cache): the backend it lives on; else -1 */
} el_tensor;

/* A byte range of a tensor. */
typedef struct el_tref {
    el_tensor *t; /* NULL: absent */
    size_t off, len;
} el_tref;

typedef struct el_op {
    el_op_kind kind;
    int layer;          /* -1 outside the layers */
    const char *site;   /* where in the forward pass: "attn_qkv", "ffn_down", "output" ... */
    el_tref src[3];     /* read */
    el_tref dst[3];     /* written (in-place ops: dst0 is also read) */
    const el_mat *w[3]; /* weights (matmul, get_rows) */
    int n_w;
    const float *vec[3]; /* constants: rmsnorm weight (vec0); matmul biases (vec_i, may be NULL) */
    int n, d;            /* rows and row length (elements) where the kind has them */
    union {
        struct { const int32_t *toks; float scale; } get_rows; /* toks: host memory */
        struct { float eps; } rmsnorm;
        struct { el_rope rope; int n_heads, head_dim, pos0; } rope; /* rope.freq_factors: a constant */
        struct { float s; int count; float cap; } scale; /* cap 0: a plain scale */
        struct { int nrot; } fwht;
        struct { int type, pos0, row_len, ring; } kv_store;
        struct { el_attn_args a; } attn; /* a.q/out/kcache/vcache are ignored: src0/dst0/src1/src2 hold them */
        struct { int count; } elt;        /* gelu_mul, add */
        struct { void (*fn)(void *ctx); void *ctx; } host;
        struct {
            const struct el_lora_term *term; /* n_term terms, adapter-major (the sums' order) */
            int n_term, n_dst, chunk;
            float *t;
            void *tq, *xq;
        } lora;
        struct { const el_moe *moe; void *scratch; } moe;
    } p;
    void *cpu_scratch;   /* matmul on the CPU backend: el_op_matmul_wsize bytes (the session's) */
    /* what it costs (the scheduler's inputs): arithmetic, weight bytes read
     * once, activation bytes read and written */
    double flops, bytes_w, bytes_in, bytes_out;
} el_op;

/* Fills op->flops / bytes_* from its kind and shapes (the executor calls it). */
void el_op_cost(el_op *op);

/* Whether the op's weights (if any) are of a type in the mask (bit t: el_type t). */
bool el_op_weights_in(const el_op *op, uint64_t type_mask);

/* ---- devices ------------------------------------------------------------ */

typedef enum { EL_DEV_CPU = 0, EL_DEV_GPU, EL_DEV_NPU, EL_DEV_OTHER } el_dev_kind;

/*
 * What a device can do and how fast: the capability table the scheduler
 * places with. A backend fills it from a microbenchmark (cached per device,
 * sched/devcache.h); `edgellm plan --devices FILE` reads it from a table for
 * devices this machine lacks (simulation: plans and reports, never a
 * measured speed).
 */
typedef struct el_device_caps {
    char name[48];            /* "cpu", "opencl0", or the table's name */
    char desc[160];           /* device and driver, as the backend reports them */
    el_dev_kind kind;
    uint32_t ops;             /* bit k: runs el_op_kind k */
    uint64_t matmul_types;    /* bit t: matmul / get_rows with weights of el_type t */
    uint32_t kv_types;        /* bit t (el_type < 32): KV cache types its kv_store/attention take */
    double matmul_gflops;     /* sustained matmul rate (n >= 32 rows), GFLOP/s */
    double matmul_gflops_type[EL_TYPE_COUNT]; /* per weight type; 0: matmul_gflops */
    double gflops;            /* every other op, GFLOP/s */
    double mem_gbps;          /* device memory read bandwidth, GB/s */
    double h2d_gbps, d2h_gbps; /* host -> device, device -> host copies, GB/s (CPU: unused) */
    double launch_us;         /* per-op overhead, microseconds */
    double matmul1_gbps;      /* weight bytes a one-row matmul (a decode step) streams per second: dequantising
                               * without reuse across rows; 0: mem_gbps */
    double sync_us;           /* a boundary's fixed cost: an op's result waited for and read back (a round trip),
                               * microseconds (CPU: 0) */
    uint64_t mem_bytes;       /* device memory for weights + tensors (0: unbounded / host memory) */
    bool simulated;           /* from a --devices table, not measured */
} el_device_caps;

/* ---- the backend vtable ------------------------------------------------- */

typedef struct el_backend el_backend;

typedef struct el_backend_i {
    /* Releases everything the backend holds (buffers, constants, its context). */
    void (*free)(el_backend *be);

    /* Device buffers for session tensors. buf_alloc: NULL with err set when
     * the device is out of memory. write/read: blocking byte copies between
     * host memory and [off, off+n) of buf. */
    void *(*buf_alloc)(el_backend *be, size_t bytes, el_error *err);
    void (*buf_free)(el_backend *be, void *buf);
    int (*buf_write)(el_backend *be, void *buf, size_t off, const void *src, size_t n, el_error *err);
    int (*buf_read)(el_backend *be, void *buf, size_t off, void *dst, size_t n, el_error *err);

    /* Model constants (weight data, norm vectors, biases, rope factors)
     * keyed by host address: the first call uploads `bytes` from `host`
     * (async: may return before the copy ends; run() orders after it), later
     * calls return 0 at once. Never a converted or dequantised copy: the
     * backend computes on the bytes as the file holds them. Optional (NULL:
     * the backend reads host memory). */
    int (*upload_const)(el_backend *be, const void *host, size_t bytes, bool async, el_error *err);

    /* Whether run() takes this op (kind, weight type, cache type, shapes). */
    bool (*supports)(el_backend *be, const el_op *op);

    /* Runs the op; its operands are valid on this backend (tensors: t->dev[index],
     * or t->host on the CPU backend; constants: uploaded). May return before
     * the work ends; sync() waits. */
    int (*run)(el_backend *be, const el_op *op, el_error *err);

    /* Waits until every run() and async upload issued so far has finished. */
    int (*sync)(el_backend *be, el_error *err);

    /* Optional: measures the capability table (a few hundred ms). */
    int (*measure)(el_backend *be, el_device_caps *caps, el_error *err);
} el_backend_i;

struct el_backend {
    const el_backend_i *i;
    el_device_caps caps; /* name, desc, kind, ops, types: set by the constructor; rates by measure() or the cache */
    char cache_key[192]; /* device + driver + build: what the capability cache is keyed by */
    int index;           /* its index in the executor's set (0: CPU) */
    void *ctx;
};

/* The CPU backend over a thread pool (not owned). Never fails short of memory. */
el_backend *el_backend_cpu_new(el_pool *pool, el_error *err);
/* Limits the op kinds (bit k: el_op_kind k) a CPU backend at index > 0
 * takes: a second CPU backend tests the executor's moves between devices
 * with the CPU's own arithmetic, cut into as many partitions as wanted. */
void el_backend_cpu_limit(el_backend *be, uint32_t ops);
/* Makes a CPU backend's run() fail once n ops have run (n > 0): a device
 * failing mid-pass, to test the executor's run-time fallback. */
void el_backend_cpu_fail_after(el_backend *be, long n);

/* The OpenCL backend on device `device` (0-based over every platform's devices,
 * in ICD order), or NULL with the reason (no platform, no device, context
 * failed). Kernels are built at the first call (program binaries cached
 * under $XDG_CACHE_HOME/edgellm/opencl, keyed by device + driver + source
 * hash). Built only where the project found the ICD loader (EL_HAVE_OPENCL). */
el_backend *el_backend_opencl_new(int device, el_error *err);
/* Number of OpenCL devices the ICD loader lists (0 without a platform or loader). */
int el_backend_opencl_count(void);

static inline void el_backend_free(el_backend *be) {
    if (be) be->i->free(be);
}

#endif
