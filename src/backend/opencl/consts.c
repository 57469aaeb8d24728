/*
 * consts.c — the OpenCL backend's constant registry (consts.h): host
 * address -> cl_mem, an open-addressing hash map.
 */
#include <stdint.h>
#include <stdlib.h>

#include "backend/opencl/consts.h"

static size_t ptr_hash(const void *p) {
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (size_t)x;
}

const_entry *el_ocl_consts_find(const const_map *m, const void *host) {
    if (!m->cap || !host) return NULL;
    for (size_t i = ptr_hash(host) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (m->e[i].host == host) return &m->e[i];
        if (!m->e[i].host) return NULL;
    }
}

int el_ocl_consts_insert(const_map *m, const void *host, size_t bytes, cl_mem mem) {
    if ((m->used + 1) * 2 > m->cap) { /* load factor <= 1/2 */
        const size_t ncap = m->cap ? m->cap * 2 : 64;
        const_entry *ne = calloc(ncap, sizeof *ne);
        if (!ne) return -1;
        for (size_t i = 0; i < m->cap; i++) {
            if (!m->e[i].host) continue;
            size_t j = ptr_hash(m->e[i].host) & (ncap - 1);
            while (ne[j].host) j = (j + 1) & (ncap - 1);
            ne[j] = m->e[i];
        }
        free(m->e);
        m->e = ne;
        m->cap = ncap;
    }
    size_t j = ptr_hash(host) & (m->cap - 1);
    while (m->e[j].host) j = (j + 1) & (m->cap - 1);
    m->e[j] = (const_entry){host, bytes, mem};
    m->used++;
    return 0;
}

void el_ocl_consts_free(const_map *m) {
    for (size_t i = 0; i < m->cap; i++)
        if (m->e[i].host) clReleaseMemObject(m->e[i].mem);
    free(m->e);
    m->e = NULL;
    m->cap = m->used = 0;
}
