/*
 * none.c — the OpenCL backend's entry points in a build without OpenCL
 * (CMake found no ICD loader or CL headers, or EL_OPENCL=OFF).
 *
 * Contract: el_backend_opencl_count() is 0 and el_backend_opencl_new()
 * returns NULL with "built without OpenCL" in err, so callers (the executor,
 * `--backend opencl`) report the reason and stay on the CPU backend.
 */
#include "backend/backend.h"

el_backend *el_backend_opencl_new(int device, el_error *err) {
    (void)device;
    el_set_error(err, EL_ERR_UNSUPPORTED, "OpenCL backend: built without OpenCL (no ICD loader or CL headers found)");
    return NULL;
}

int el_backend_opencl_count(void) { return 0; }

#include "backend/opencl/opencl.h"

int el_backend_opencl_info(const el_backend *be, el_opencl_info *info) {
    (void)be;
    (void)info;
    return -1;
}
