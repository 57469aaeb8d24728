/*
 * consts.h — the OpenCL backend's constant registry: host address -> the
 * cl_mem holding those bytes on the device (weights, norm vectors, biases,
 * rope factors: backend.h's upload_const).
 *
 * Contract: an open-addressing hash map keyed by the host pointer (load
 * factor <= 1/2, linear probing); an entry owns its cl_mem, released by
 * el_ocl_consts_free. Not thread-safe: the backend's mutex guards it.
 */
#ifndef EL_BACKEND_OPENCL_CONSTS_H
#define EL_BACKEND_OPENCL_CONSTS_H
#include <CL/cl.h>
#include <stddef.h>

typedef struct const_entry {
    const void *host; /* NULL: empty slot */
    size_t bytes;
    cl_mem mem;
} const_entry;

typedef struct const_map {
    const_entry *e;
    size_t cap, used; /* cap: a power of two (0 before the first insert) */
} const_map;

/* The entry of host, or NULL (also for host NULL or an empty map). */
const_entry *el_ocl_consts_find(const const_map *m, const void *host);
/* Inserts (host is not present); 0, or -1 out of memory. */
int el_ocl_consts_insert(const_map *m, const void *host, size_t bytes, cl_mem mem);
/* Releases every entry's cl_mem and the table; the map is then empty. */
void el_ocl_consts_free(const_map *m);

#endif
