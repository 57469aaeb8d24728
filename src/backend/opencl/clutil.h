/*
 * clutil.h — the small OpenCL helpers every file of the OpenCL backend uses:
 * a CL error's name and its el_status, the error message of a failed CL
 * call, a device's info string and a monotonic clock.
 *
 * Contract: no state; each function only reads its arguments (and the
 * device, for el_ocl_dev_str). The clock and the device string are static
 * inline (they were file-local before the backend was split). Errors name the CL call and the CL error
 * (CL_OUT_OF_RESOURCES, ...); out of device memory is EL_ERR_NOMEM.
 */
#ifndef EL_BACKEND_OPENCL_CLUTIL_H
#define EL_BACKEND_OPENCL_CLUTIL_H
#include <CL/cl.h>
#include <stddef.h>
#include <time.h>

#include "util/error.h"

/* "CL_OUT_OF_RESOURCES", ... ("CL error (unknown code)" for others). */
const char *el_ocl_err_name(cl_int e);
/* EL_ERR_NOMEM for the out-of-memory errors, else EL_ERR_INTERNAL. */
el_status el_ocl_status(cl_int e);
/* Sets err to "OpenCL: <what> failed: <name> (<code>)"; returns its status. */
int el_ocl_fail(el_error *err, const char *what, cl_int e);
/* Milliseconds of CLOCK_MONOTONIC. */
static inline double el_ocl_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* The device's string info `what` into out[cap] ("" when the call fails). */
static inline void el_ocl_dev_str(cl_device_id d, cl_device_info what, char *out, size_t cap) {
    out[0] = 0;
    if (clGetDeviceInfo(d, what, cap - 1, out, NULL) != CL_SUCCESS) out[0] = 0;
    out[cap - 1] = 0;
}

#endif
