/*
 * opencl.h — what the OpenCL backend tells its tests and tools beyond the
 * el_backend vtable (backend.h): how its program was obtained and whether
 * its arithmetic is the CPU backend's to the bit. Not used by the runtime.
 */
#ifndef EL_BACKEND_OPENCL_OPENCL_H
#define EL_BACKEND_OPENCL_OPENCL_H
#include <stdbool.h>

#include "backend/backend.h"

typedef struct el_opencl_info {
    double build_ms;     /* time to get a built program (cache load or compile) in the constructor */
    bool from_cache;     /* the program came from a cached binary */
    bool cache_written;  /* the constructor wrote (or rewrote) the cache file */
    bool host_ptr;       /* constants are used in place (CL_MEM_USE_HOST_PTR), not copied */
    char cache_path[512]; /* the cache file for this device + driver + source + options ("" if none) */
    int mm_ls;           /* work-items per matmul work-group */
    bool exact;          /* the device has cl_khr_fp64: the kernels give the CPU backend's bits (kernels.cl);
                            without it the CPU's double sums run in float and results are close, not equal */
} el_opencl_info;

/* Fills *info for an OpenCL backend; -1 if be is not one (or built without OpenCL). */
int el_backend_opencl_info(const el_backend *be, el_opencl_info *info);

#endif
