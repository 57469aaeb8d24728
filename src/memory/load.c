/*
 * load.c — load strategies: see load.h for the contract. Segments are built
 * once from the validated tensor table; preload/hot lock page-aligned ranges
 * of the read-only mapping (mlock reads each page it locks), prefetch issues
 * madvise(MADV_WILLNEED) from the forward pass.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "memory/load.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/error.h"
#include "util/file.h"

static const char *const k_names[] = {"mmap", "preload", "prefetch", "hot"};

int el_load_mode_parse(const char *s, el_load_mode *out) {
    if (!s) return -1;
    for (int i = 0; i < 4; i++)
        if (strcmp(s, k_names[i]) == 0) {
            *out = (el_load_mode)i;
            return 0;
        }
    return -1;
}

const char *el_load_mode_name(el_load_mode m) {
    return (int)m >= 0 && (int)m < 4 ? k_names[m] : "?";
}

static size_t page_size(void) {
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
}

/* Layer number of "blk.N.<rest>", or -1. N: 1..9 decimal digits, no sign, no leading zero but "0". */
static int layer_of(el_str name) {
    const char *p = name.ptr;
    uint64_t n = name.len;
    if (n < 6 || memcmp(p, "blk.", 4) != 0) return -1;
    uint64_t i = 4;
    int v = 0, digits = 0;
    while (i < n && p[i] >= '0' && p[i] <= '9') {
        if (digits == 9) return -1;
        v = v * 10 + (p[i] - '0');
        digits++;
        i++;
    }
    if (!digits || (digits > 1 && p[4] == '0') || i >= n || p[i] != '.') return -1;
    return v;
}

static int is_token_embd(el_str name) {
    static const char k[] = "token_embd.";
    return name.len >= sizeof k - 1 && memcmp(name.ptr, k, sizeof k - 1) == 0;
}

typedef struct seg_range { int seg; size_t off, len; } seg_range;

static int cmp_range(const void *a, const void *b) {
    const seg_range *x = a, *y = b;
    if (x->seg != y->seg) return x->seg < y->seg ? -1 : 1;
    if (x->off != y->off) return x->off < y->off ? -1 : 1;
    return 0;
}

int el_load_prepare(el_load_state *ls, const el_gguf *g, int n_layer, el_load_mode mode, el_error *err) {
    memset(ls, 0, sizeof *ls);
    if ((int)mode < 0 || (int)mode > 3)
        return el_set_error(err, EL_ERR_INVALID_ARG, "load mode %d is not one of mmap, preload, prefetch, hot", (int)mode);
    if (!g || n_layer < 0 || n_layer > (1 << 20))
        return el_set_error(err, EL_ERR_INVALID_ARG, "el_load_prepare: no model or %d layers", n_layer);
    ls->mode = mode;
    ls->base = el_gguf_base(g);
    ls->size = el_gguf_file_size(g);
    ls->n_layer = n_layer;
    const int n_seg = n_layer + 2;
    const int64_t nt = el_gguf_n_tensors(g);
    const size_t pg = page_size();
    seg_range *tmp = nt > 0 ? malloc((size_t)nt * sizeof *tmp) : NULL;
    ls->first = calloc((size_t)n_seg + 1, sizeof *ls->first);
    if ((nt > 0 && !tmp) || !ls->first) {
        free(tmp);
        el_load_release(ls);
        return el_set_error(err, EL_ERR_NOMEM, "load plan for %" PRId64 " tensors: out of memory", nt);
    }
    int64_t k = 0;
    for (int64_t i = 0; i < nt; i++) {
        const el_gguf_tensor *t = el_gguf_tensor_at(g, i);
        if (!t->nbytes) continue;
        /* the reader guarantees data .. data+nbytes lies inside the mapping */
        size_t a = (size_t)((const uint8_t *)t->data - ls->base), b = a + t->nbytes;
        a = a / pg * pg;
        b = (b + pg - 1) / pg * pg; /* <= the mapping's length rounded up to a page */
        int l = layer_of(t->name);
        int seg = l >= 0 && l < n_layer ? l : is_token_embd(t->name) ? n_layer + 1 : n_layer;
        tmp[k++] = (seg_range){seg, a, b - a};
    }
    if (k > 1) qsort(tmp, (size_t)k, sizeof *tmp, cmp_range);
    /* merge overlapping or touching ranges of one segment */
    int64_t m = 0;
    for (int64_t i = 0; i < k; i++) {
        if (m > 0 && tmp[m - 1].seg == tmp[i].seg && tmp[i].off <= tmp[m - 1].off + tmp[m - 1].len) {
            size_t end = tmp[i].off + tmp[i].len;
            if (end > tmp[m - 1].off + tmp[m - 1].len) tmp[m - 1].len = end - tmp[m - 1].off;
        } else {
            tmp[m++] = tmp[i];
        }
    }
    ls->r = m > 0 ? malloc((size_t)m * sizeof *ls->r) : NULL;
    ls->hot = m > 0 ? malloc((size_t)m * sizeof *ls->hot) : NULL;
    if (m > 0 && (!ls->r || !ls->hot)) {
        free(tmp);
        el_load_release(ls);
        return el_set_error(err, EL_ERR_NOMEM, "load plan: out of memory");
    }
    for (int64_t i = 0; i < m; i++) {
        ls->r[i] = (el_load_range){tmp[i].off, tmp[i].len};
        ls->first[tmp[i].seg + 1]++;
    }
    for (int s = 0; s < n_seg; s++) ls->first[s + 1] += ls->first[s];
    /* the hot set: all but the embedding segment, sorted by offset and merged across segments */
    int64_t h = 0;
    for (int64_t i = 0; i < m; i++)
        if (tmp[i].seg != n_layer + 1) tmp[h++] = (seg_range){0, tmp[i].off, tmp[i].len};
    if (h > 1) qsort(tmp, (size_t)h, sizeof *tmp, cmp_range);
    for (int64_t i = 0; i < h; i++) {
        el_load_range *last = ls->n_hot ? &ls->hot[ls->n_hot - 1] : NULL;
        if (last && tmp[i].off <= last->off + last->len) {
            size_t end = tmp[i].off + tmp[i].len;
            if (end > last->off + last->len) last->len = end - last->off;
        } else {
            ls->hot[ls->n_hot++] = (el_load_range){tmp[i].off, tmp[i].len};
        }
    }
    free(tmp);
    return 0;
}

static size_t map_bytes(const el_load_state *ls) {
    const size_t pg = page_size();
    return (ls->size + pg - 1) / pg * pg;
}

size_t el_load_lock_bytes(const el_load_state *ls, int all) {
    if (all) return ls->base ? map_bytes(ls) : 0;
    size_t sum = 0;
    for (int i = 0; i < ls->n_hot; i++) sum += ls->hot[i].len;
    return sum;
}

/* CAP_IPC_LOCK in the effective set (it lifts RLIMIT_MEMLOCK), and VmLck, from /proc/self/status. */
static void proc_status(int *cap_ipc_lock, uint64_t *vmlck) {
    *cap_ipc_lock = 0;
    *vmlck = 0;
    FILE *f = fopen("/proc/self/status", "re");
    if (!f) return;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        unsigned long long v;
        if (sscanf(line, "CapEff: %llx", &v) == 1) *cap_ipc_lock = (v >> 14) & 1; /* CAP_IPC_LOCK = 14 */
        else if (sscanf(line, "VmLck: %llu kB", &v) == 1) *vmlck = (uint64_t)v * 1024;
    }
    fclose(f);
}

static void fmt_bytes(char *buf, size_t cap, uint64_t b) {
    if (b >= (1ull << 30)) snprintf(buf, cap, "%.2f GiB", (double)b / (1ull << 30));
    else if (b >= (1ull << 20)) snprintf(buf, cap, "%.1f MiB", (double)b / (1ull << 20));
    else snprintf(buf, cap, "%.0f KiB", (double)b / 1024);
}

static void unlock_all(el_load_state *ls) {
    if (!ls->locked) return;
    munlock(ls->base, map_bytes(ls)); /* unlocking pages that were not locked is harmless */
    ls->locked = 0;
}

int el_load_apply(el_load_state *ls, el_error *err) {
    if (!ls->base) return 0;
    if ((uintptr_t)ls->base % page_size() != 0 && (ls->mode == EL_LOAD_PRELOAD || ls->mode == EL_LOAD_HOT))
        return el_set_error(err, EL_ERR_INVALID_ARG, "load %s: the weights are not in a page-aligned mapping",
                            el_load_mode_name(ls->mode));
    switch (ls->mode) {
    case EL_LOAD_MMAP:
        return 0;
    case EL_LOAD_PREFETCH: /* the first window now; the forward pass asks for the rest */
        for (int s = 0; s < EL_LOAD_PREFETCH_WINDOW && s <= ls->n_layer; s++)
            for (int i = ls->first[s]; i < ls->first[s + 1]; i++)
                madvise((void *)(ls->base + ls->r[i].off), ls->r[i].len, MADV_WILLNEED);
        return 0;
    case EL_LOAD_PRELOAD:
    case EL_LOAD_HOT: {
        const int all = ls->mode == EL_LOAD_PRELOAD;
        const char *name = el_load_mode_name(ls->mode);
        const uint64_t need = el_load_lock_bytes(ls, all);
        struct rlimit rl;
        int cap = 0;
        uint64_t held = 0;
        proc_status(&cap, &held);
        char nb[32], lb[32], hb[32];
        if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && !cap &&
            held + need > (uint64_t)rl.rlim_cur) {
            fmt_bytes(nb, sizeof nb, need);
            fmt_bytes(lb, sizeof lb, rl.rlim_cur);
            fmt_bytes(hb, sizeof hb, held);
            return el_set_error(err, EL_ERR_NOMEM,
                                "load %s: locking the weights needs %" PRIu64 " bytes (%s) of locked memory%s%s%s, but "
                                "RLIMIT_MEMLOCK is %" PRIu64 " bytes (%s); raise it (ulimit -l, LimitMEMLOCK=) "
                                "or use --load mmap",
                                name, need, nb, held ? " on top of the " : "", held ? hb : "",
                                held ? " already locked" : "", (uint64_t)rl.rlim_cur, lb);
        }
        int rc = 0;
        if (all) {
            rc = mlock(ls->base, map_bytes(ls));
            if (rc == 0) ls->locked = map_bytes(ls);
        } else {
            for (int i = 0; i < ls->n_hot && rc == 0; i++) {
                rc = mlock(ls->base + ls->hot[i].off, ls->hot[i].len);
                if (rc == 0) ls->locked += ls->hot[i].len;
            }
        }
        if (rc != 0) {
            int e = errno;
            munlock(ls->base, map_bytes(ls)); /* whatever part was locked: nothing half-loaded */
            ls->locked = 0;
            fmt_bytes(nb, sizeof nb, need);
            if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
                fmt_bytes(lb, sizeof lb, rl.rlim_cur);
                return el_set_error(err, EL_ERR_NOMEM,
                                    "load %s: mlock of %" PRIu64 " bytes (%s) failed: %s (RLIMIT_MEMLOCK is %" PRIu64
                                    " bytes, %s)",
                                    name, need, nb, strerror(e), (uint64_t)rl.rlim_cur, lb);
            }
            return el_set_error(err, EL_ERR_NOMEM, "load %s: mlock of %" PRIu64 " bytes (%s) failed: %s (RLIMIT_MEMLOCK unlimited)",
                                name, need, nb, strerror(e));
        }
        return 0;
    }
    }
    return el_set_error(err, EL_ERR_INVALID_ARG, "load mode %d is not one of mmap, preload, prefetch, hot", (int)ls->mode);
}

void el_load_on_layer(el_load_state *ls, int il) {
    if (ls->mode != EL_LOAD_PREFETCH || !ls->first || il < 0 || il >= ls->n_layer) return;
    if ((uintptr_t)ls->base % page_size() != 0) return; /* a caller's buffer, not a mapping: no advice */
    const int ring = ls->n_layer + 1; /* layers, then the head; then layer 0 of the next token */
    for (int w = 1; w <= EL_LOAD_PREFETCH_WINDOW && w < ring; w++) {
        const int s = (il + w) % ring;
        for (int i = ls->first[s]; i < ls->first[s + 1]; i++)
            madvise((void *)(ls->base + ls->r[i].off), ls->r[i].len, MADV_WILLNEED);
    }
}

void el_load_release(el_load_state *ls) {
    if (!ls) return;
    unlock_all(ls);
    free(ls->r);
    free(ls->first);
    free(ls->hot);
    ls->r = NULL;
    ls->first = NULL;
    ls->hot = NULL;
    ls->n_hot = 0;
}

/* ---- page cache of a file ----------------------------------------------- */

int el_load_evict(const char *path, el_error *err) {
    struct stat st;
    char why[sizeof err->msg];
    int fd = el_open_regular(path, &st, why, sizeof why);
    if (fd < 0) return el_set_error(err, EL_ERR_IO, "%s", why);
    int rc = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
    if (rc != 0) return el_set_error(err, EL_ERR_IO, "%s: posix_fadvise(DONTNEED): %s", path, strerror(rc));
    return 0;
}

int el_load_resident(const char *path, double *fraction, el_error *err) {
    struct stat st;
    char why[sizeof err->msg];
    *fraction = 0;
    int fd = el_open_regular(path, &st, why, sizeof why);
    if (fd < 0) return el_set_error(err, EL_ERR_IO, "%s", why);
    if (st.st_size == 0) { close(fd); return 0; }
    /* Linux answers mincore truthfully only to the file's owner, a caller with
     * CAP_FOWNER or one that may write it; anyone else is told every page is
     * resident (mm/mincore.c, can_do_mincore) */
    if (st.st_uid != geteuid() && geteuid() != 0 && access(path, W_OK) != 0) {
        close(fd);
        return el_set_error(err, EL_ERR_UNSUPPORTED,
                            "%s: the page-cache residency of a file this user neither owns nor may write is not "
                            "reported by the kernel (mincore says every page is resident)", path);
    }
    const size_t size = (size_t)st.st_size, pg = page_size(), n = (size + pg - 1) / pg;
    void *p = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) return el_set_error(err, EL_ERR_IO, "%s: mmap: %s", path, strerror(e));
    unsigned char *vec = malloc(n);
    if (!vec) { munmap(p, size); return el_set_error(err, EL_ERR_NOMEM, "mincore vector of %zu pages", n); }
    int rc = mincore(p, size, vec);
    e = errno;
    size_t in = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) in += vec[i] & 1;
    free(vec);
    munmap(p, size);
    if (rc != 0) return el_set_error(err, EL_ERR_IO, "%s: mincore: %s", path, strerror(e));
    *fraction = (double)in / (double)n;
    return 0;
}
