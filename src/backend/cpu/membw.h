/*
 * membw.h — a built-in memory READ bandwidth probe (used by `edgellm bench`
 * for the decode roofline: decode is bound by streaming the weights).
 *
 * el_membw_read_gbs() allocates `bytes` (rounded down to whole 64-bit words
 * per thread), touches every page (so no first-touch faults are timed),
 * then times `passes` passes of a multi-threaded sum over the buffer's
 * 64-bit words on an el_pool of n_threads and returns the best pass in
 * GB/s (1e9 bytes/s). Pick bytes well above the last-level cache (e.g.
 * 256 MiB, or 4x LLC) or the figure is a cache bandwidth.
 */
#ifndef EL_BACKEND_CPU_MEMBW_H
#define EL_BACKEND_CPU_MEMBW_H
#include <stddef.h>

#define EL_MEMBW_DEFAULT_BYTES ((size_t)256 << 20)

/* n_threads <= 0: online CPUs; passes <= 0: 5. Returns GB/s, or a negative
 * value if the buffer or the thread pool could not be created. */
double el_membw_read_gbs(size_t bytes, int n_threads, int passes);

#endif
