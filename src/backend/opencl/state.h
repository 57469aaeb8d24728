/*
 * state.h — the OpenCL backend's state (struct ocl), shared by its files:
 * backend_opencl.c (the el_backend_i vtable, the lifetime), program.c (the
 * kernels), launch.c (buffers and kernel launches), tables.c (the CPU's
 * tables on the device) and measure.c (the benchmarks).
 *
 * Contract: one ocl per el_backend (its ctx), made and freed by
 * backend_opencl.c; every field is written under its mutex `mu` once the
 * constructor has returned (run and measure take it). Compile-time sizes
 * here must match kernels.cl's build options (NT, ATT_DPI).
 */
#ifndef EL_BACKEND_OPENCL_STATE_H
#define EL_BACKEND_OPENCL_STATE_H
#include <CL/cl.h>
#include <pthread.h>
#include <stdbool.h>

#include "backend/backend.h"
#include "backend/opencl/consts.h"
#include "backend/opencl/opencl.h"
#include "package/types.h"

/* The matmul kernels, one per weight type. */
enum { MM_F32, MM_F16, MM_Q8_0, MM_Q4_0, MM_Q5_0, MM_Q4_K, MM_Q6_K, MM_NTYPES };
/* The weight type and the name of each matmul kernel (kernels.cl mm_<name>),
 * in MM_* order (launch.c). */
extern const el_type el_ocl_mm_types[MM_NTYPES];
extern const char *const el_ocl_mm_names[MM_NTYPES];

#define MM_NT 4   /* tokens per matmul work-item (kernels.cl NT) */
#define ATT_DPI 8 /* head dims per attention work-item (ATT_DPI) */
#define ROPE_TABS 8 /* cos/sin tables kept (one per RoPE configuration: Gemma 3 has two) */

/* The CPU's cos/sin of one RoPE configuration for positions 0..cap-1 (n_rot
 * floats each), on the device. */
typedef struct rope_tab {
    float freq_base, freq_scale;
    int n_rot, cap;
    const float *ff;
    cl_mem mem;
} rope_tab;

typedef struct ocl {
    cl_platform_id plat;
    cl_device_id dev;
    cl_context ctx;
    cl_command_queue q;
    cl_program prog;
    cl_kernel mm[MM_NTYPES];
    cl_kernel k_rmsnorm, k_rope, k_scale, k_add, k_silu, k_gelu, k_kv_store, k_attn, k_attn_tiled, k_read_bw, k_act;
    cl_mem dummy; /* bound where an optional buffer argument is absent */
    cl_mem act;   /* a matmul's activations in the CPU's vec_dot_type bytes (act_quant) */
    size_t act_cap;
    cl_mem gelu_tab; /* the CPU's GELU table (65536 floats), made on first use */
    rope_tab rope[ROPE_TABS];
    int rope_next; /* the slot replaced next when all are taken */
    cl_ulong max_alloc;
    size_t max_wg;
    size_t mm_ls, norm_ls, att_ls;
    bool host_ptr;
    const_map consts;
    pthread_mutex_t mu;
    el_opencl_info info;
} ocl;

#endif
