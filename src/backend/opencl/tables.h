/*
 * tables.h — the tables the OpenCL kernels read that the CPU backend's own
 * code makes, so the device gets the CPU's values bit for bit: RoPE's
 * cos/sin per configuration (el_op_rope) and the GELU table (el_op_gelu_mul).
 *
 * Contract: made on first need and kept in c (c->rope[], c->gelu_tab; freed
 * with the backend), written blocking once; a RoPE table grows by doubling
 * positions, and ROPE_TABS configurations are kept, the oldest replaced
 * (after the queue finishes with it). The caller holds the backend's mutex.
 * NULL with err on failure.
 */
#ifndef EL_BACKEND_OPENCL_TABLES_H
#define EL_BACKEND_OPENCL_TABLES_H

#include "backend/cpu/ops.h"
#include "backend/opencl/state.h"
#include "util/error.h"

/* The CPU's cos/sin for r at positions 0..need-1 (n_rot floats each). */
cl_mem el_ocl_rope_table(ocl *c, const el_rope *r, int need, el_error *err);
/* T[h] for every F16 bit pattern h (65536 floats). */
cl_mem el_ocl_gelu_table(ocl *c, el_error *err);

#endif
