/*
 * measure.h — the OpenCL backend's measurement (backend.h's measure): the
 * rates the scheduler plans with, from short benchmarks on the device.
 *
 * Contract: fills caps->matmul_gflops_type[] per matmul weight type and
 * matmul_gflops (the best), matmul1_gbps (a one-row product's weight bytes
 * per second), mem_gbps (the read_bw kernel), h2d_gbps / d2h_gbps (32 MiB
 * blocking copies), gflops (attention), launch_us and sync_us; each timing
 * is the best of two runs after a warm-up. The caller holds the backend's
 * mutex. Allocates its own buffers and frees them; 0, or an el_status with
 * err.
 */
#ifndef EL_BACKEND_OPENCL_MEASURE_H
#define EL_BACKEND_OPENCL_MEASURE_H

#include "backend/backend.h"
#include "backend/opencl/state.h"
#include "util/error.h"

int el_ocl_measure_locked(ocl *c, el_device_caps *caps, el_error *err);

#endif
