/*
 * program.h — the OpenCL backend's program: kernels.cl (embedded in the
 * library) built for the backend's device, and its kernel objects.
 *
 * Contract: el_ocl_build_program sets c->prog and every kernel of c (the
 * matmul kernels c->mm[], then the others) from a cached program binary when
 * one exists for this device + driver + kernel source + build options
 * (bincache.h; $EL_OPENCL_CACHE_DIR, else $XDG_CACHE_HOME/edgellm/opencl),
 * else from source, writing the cache; $EL_OPENCL_BUILD_OPTIONS is appended
 * to the build options. It fills c->info's build_ms, from_cache,
 * cache_written and cache_path. 0, or -1 with the CL call and error (and the
 * start of the build log) in err. el_ocl_free_kernels releases the kernels
 * (not the program).
 */
#ifndef EL_BACKEND_OPENCL_PROGRAM_H
#define EL_BACKEND_OPENCL_PROGRAM_H

#include "backend/opencl/state.h"
#include "util/error.h"

int el_ocl_build_program(ocl *c, el_error *err);
void el_ocl_free_kernels(ocl *c);

#endif
