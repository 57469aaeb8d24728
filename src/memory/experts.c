/*
 * experts.c — expert residency under a budget (experts.h): an LRU list over
 * (layer, expert) slots, released by madvise on their page-aligned ranges.
 *
 * Invariant: resident == the sum of slot_bytes over slots flagged resident
 * (res 1; 2 only inside el_experts_touch, for the slots it faulted in);
 * the list holds exactly the resident slots, most recently used first.
 * Allocation only in el_experts_new.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "memory/experts.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* how far from a faulting address the kernel may map pages: a PMD-sized page-cache folio */
#define EL_EXPERTS_FAULT_SPAN ((uintptr_t)2 << 20)


struct el_experts {
    pthread_mutex_t mu;
    int n_layer, n_expert, n_used;
    el_experts_layer *layers;
    uint64_t *slot_bytes;  /* per layer: one slot's bytes */
    int32_t *prev, *next;  /* LRU list over slot ids (il * n_expert + e); -1 ends */
    uint8_t *res;
    int32_t head, tail;
    /* every slice by address (slice id = slot * 3 + k), and each slice's place in that order */
    int32_t *by_addr, *pos;
    int32_t *iv; /* 2 × 3 × n_expert: the sweep's position intervals */
    el_experts_stats st;
};

static size_t page_size(void) {
    const long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
}

size_t el_experts_unreleasable(const void *p, size_t len) {
    const size_t pg = page_size();
    const uintptr_t a = (uintptr_t)p, b = a + len;
    const uintptr_t lo = (a + pg - 1) & ~(uintptr_t)(pg - 1), hi = b & ~(uintptr_t)(pg - 1);
    return hi > lo ? len - (size_t)(hi - lo) : len;
}

/* slice id -> its first byte */
static const uint8_t *slice_at(const el_experts *x, int32_t id, size_t *len) {
    const int32_t slot = id / 3, k = id % 3;
    const el_experts_layer *L = &x->layers[slot / x->n_expert];
    *len = L->stride[k];
    return L->base[k] + L->stride[k] * (size_t)(slot % x->n_expert);
}

static _Thread_local el_experts *g_sort_x; /* qsort has no context argument in C17 */
static int by_addr_cmp(const void *a, const void *b) {
    size_t la, lb;
    const uintptr_t pa = (uintptr_t)slice_at(g_sort_x, *(const int32_t *)a, &la);
    const uintptr_t pb = (uintptr_t)slice_at(g_sort_x, *(const int32_t *)b, &lb);
    return pa < pb ? -1 : pa > pb;
}

el_experts *el_experts_new(const el_experts_layer *layers, int n_layer, int n_expert, int n_used, uint64_t budget) {
    if (!layers || n_layer <= 0 || n_expert <= 0 || n_used <= 0 || n_used > n_expert || n_layer > (1 << 16) ||
        n_expert > (1 << 14))
        return NULL;
    el_experts *x = calloc(1, sizeof *x);
    if (!x) return NULL;
    const size_t ns = (size_t)n_layer * (size_t)n_expert;
    x->layers = malloc(sizeof *x->layers * (size_t)n_layer);
    x->slot_bytes = calloc((size_t)n_layer, sizeof *x->slot_bytes);
    x->prev = malloc(sizeof(int32_t) * ns);
    x->next = malloc(sizeof(int32_t) * ns);
    x->res = calloc(ns, 1);
    x->by_addr = malloc(sizeof(int32_t) * ns * 3);
    x->pos = malloc(sizeof(int32_t) * ns * 3);
    x->iv = malloc(sizeof(int32_t) * 6 * (size_t)n_expert);
    if (!x->layers || !x->slot_bytes || !x->prev || !x->next || !x->res || !x->by_addr || !x->pos || !x->iv ||
        pthread_mutex_init(&x->mu, NULL)) {
        free(x->layers), free(x->slot_bytes), free(x->prev), free(x->next), free(x->res), free(x->by_addr), free(x->pos);
        free(x->iv), free(x);
        return NULL;
    }
    memcpy(x->layers, layers, sizeof *x->layers * (size_t)n_layer);
    x->n_layer = n_layer, x->n_expert = n_expert, x->n_used = n_used;
    x->head = x->tail = -1;
    uint64_t total = 0, fixed = 0, per_token = 0;
    for (int il = 0; il < n_layer; il++) {
        uint64_t sb = 0;
        for (int k = 0; k < 3; k++) {
            const size_t s = layers[il].stride[k];
            if (!layers[il].base[k] || s == 0 || s > (SIZE_MAX >> 1) / (size_t)n_expert) goto bad;
            sb += s;
            for (int e = 0; e < n_expert; e++) fixed += el_experts_unreleasable(layers[il].base[k] + s * (size_t)e, s);
        }
        if (sb > (UINT64_MAX >> 20) / (uint64_t)n_expert) goto bad;
        x->slot_bytes[il] = sb;
        total += sb * (uint64_t)n_expert;
        per_token += sb * (uint64_t)n_used;
    }
    x->st.total = total, x->st.fixed = fixed, x->st.per_token = per_token;
    for (size_t i = 0; i < ns * 3; i++) x->by_addr[i] = (int32_t)i;
    g_sort_x = x;
    qsort(x->by_addr, ns * 3, sizeof(int32_t), by_addr_cmp);
    g_sort_x = NULL;
    for (size_t i = 0; i < ns * 3; i++) x->pos[x->by_addr[i]] = (int32_t)i;
    x->st.budget = budget < per_token ? per_token : budget;
    return x;
bad:
    el_experts_free(x);
    return NULL;
}

void el_experts_free(el_experts *x) {
    if (!x) return;
    pthread_mutex_destroy(&x->mu);
    free(x->layers), free(x->slot_bytes), free(x->prev), free(x->next), free(x->res), free(x->by_addr), free(x->pos);
    free(x->iv), free(x);
}

static void unlink_slot(el_experts *x, int32_t s) {
    const int32_t p = x->prev[s], n = x->next[s];
    if (p >= 0) x->next[p] = n; else x->head = n;
    if (n >= 0) x->prev[n] = p; else x->tail = p;
}

static void push_front(el_experts *x, int32_t s) {
    x->prev[s] = -1;
    x->next[s] = x->head;
    if (x->head >= 0) x->prev[x->head] = s; else x->tail = s;
    x->head = s;
}

/* madvise the page-aligned interior of [p, p + len) */
static void release_range(el_experts *x, const uint8_t *p, size_t len) {
    const size_t pg = page_size();
    const uintptr_t a = (uintptr_t)p, b = a + len;
    const uintptr_t lo = (a + pg - 1) & ~(uintptr_t)(pg - 1), hi = b & ~(uintptr_t)(pg - 1);
    if (hi <= lo) return;
    if (madvise((void *)lo, (size_t)(hi - lo), MADV_DONTNEED)) x->st.madvise_errors++;
    else x->st.bytes_released += (uint64_t)(hi - lo);
}

static void release_slot(el_experts *x, int32_t s) {
    const el_experts_layer *L = &x->layers[s / x->n_expert];
    const int e = s % x->n_expert;
    for (int k = 0; k < 3; k++) release_range(x, L->base[k] + L->stride[k] * (size_t)e, L->stride[k]);
}

/* A read fault maps more than its page: the kernel's fault-around maps the cached pages near it
 * (64 KiB by default) and, since Linux 6.18, a whole large page-cache folio (up to 2 MiB) when it
 * fits the mapping. So after an op faulted slots in, the slices within EL_EXPERTS_FAULT_SPAN of
 * theirs that belong to slots not resident are released again, as maximal runs of contiguous
 * such slices (one madvise per run), so no page stays mapped uncounted. */
static void sweep_after_misses(el_experts *x, int n_iv) {
    const int32_t n = x->n_layer * x->n_expert * 3;
    int32_t *iv = x->iv;
    /* the position intervals, in order (at most 3 × n_expert of them; insertion sort: they come near sorted) */
    for (int i = 1; i < n_iv; i++) {
        const int32_t lo = iv[2 * i], hi = iv[2 * i + 1];
        int j = i - 1;
        while (j >= 0 && iv[2 * j] > lo) iv[2 * j + 2] = iv[2 * j], iv[2 * j + 3] = iv[2 * j + 1], j--;
        iv[2 * j + 2] = lo, iv[2 * j + 3] = hi;
    }
    int32_t next = 0; /* the first position not yet walked */
    for (int i = 0; i < n_iv; i++) {
        int32_t p = iv[2 * i] > next ? iv[2 * i] : next;
        const int32_t end = iv[2 * i + 1] + 1 < n ? iv[2 * i + 1] + 1 : n;
        uintptr_t run_a = 0, run_b = 0; /* the current run of non-resident slices */
        for (; p < end; p++) {
            size_t l;
            const int32_t id = x->by_addr[p];
            const uintptr_t a = (uintptr_t)slice_at(x, id, &l);
            if (x->res[id / 3] || (run_b && a != run_b)) { /* a resident slice or a gap ends the run */
                if (run_b) release_range(x, (const uint8_t *)run_a, run_b - run_a);
                run_b = 0;
            }
            if (!x->res[id / 3]) {
                if (!run_b) run_a = a;
                run_b = a + l;
            }
        }
        if (run_b) release_range(x, (const uint8_t *)run_a, run_b - run_a);
        if (end > next) next = end;
    }
}

/* the positions (by address) of the slices within EL_EXPERTS_FAULT_SPAN of slot s's slice k */
static void span_of(const el_experts *x, int32_t s, int k, int32_t *lo, int32_t *hi) {
    const int32_t n = x->n_layer * x->n_expert * 3, at = x->pos[s * 3 + k];
    size_t len;
    const uintptr_t a = (uintptr_t)slice_at(x, s * 3 + k, &len), b = a + len;
    int32_t i = at;
    while (i > 0) {
        size_t l;
        const uintptr_t p = (uintptr_t)slice_at(x, x->by_addr[i - 1], &l);
        if (p + l + EL_EXPERTS_FAULT_SPAN <= a) break;
        i--;
    }
    *lo = i;
    i = at;
    while (i + 1 < n) {
        size_t l;
        const uintptr_t p = (uintptr_t)slice_at(x, x->by_addr[i + 1], &l);
        if (p >= b + EL_EXPERTS_FAULT_SPAN) break;
        i++;
    }
    *hi = i;
}

static void evict_to_budget(el_experts *x) {
    while (x->st.resident > x->st.budget && x->tail >= 0) {
        const int32_t s = x->tail;
        const int il = s / x->n_expert, e = s % x->n_expert;
        unlink_slot(x, s);
        x->res[s] = 0;
        x->st.resident -= x->slot_bytes[il];
        x->st.releases++;
        (void)e;
        release_slot(x, s);
    }
}

int el_experts_set_budget(el_experts *x, uint64_t budget) {
    if (!x) return -1;
    pthread_mutex_lock(&x->mu);
    const int ok = budget >= x->st.per_token;
    if (ok) {
        const bool limited = budget < x->st.total;
        x->st.budget = budget;
        evict_to_budget(x);
        /* the slots never counted resident may still have pages mapped (faulted around, or read before
         * the budget was set): released once, so the resident set starts at most at the budget */
        if (limited)
            for (int32_t s = 0; s < x->n_layer * x->n_expert; s++)
                if (!x->res[s]) release_slot(x, s);
    }
    pthread_mutex_unlock(&x->mu);
    return ok ? 0 : -1;
}

void el_experts_touch(el_experts *x, int il, const int32_t *offsets) {
    if (!x || !offsets || il < 0 || il >= x->n_layer) return;
    pthread_mutex_lock(&x->mu);
    int missed = 0;
    for (int e = 0; e < x->n_expert; e++) {
        if (offsets[e + 1] <= offsets[e]) continue;
        const int32_t s = il * x->n_expert + e;
        if (x->res[s]) {
            x->st.hits++;
            unlink_slot(x, s);
        } else {
            x->st.misses++, missed++;
            x->st.bytes_faulted += x->slot_bytes[il];
            x->st.resident += x->slot_bytes[il];
            x->res[s] = 2; /* faulted in by this op: its neighbours are swept below */
        }
        push_front(x, s);
    }
    evict_to_budget(x);
    int n_iv = 0;
    for (int e = 0; missed && e < x->n_expert; e++) {
        const int32_t s = il * x->n_expert + e;
        /* faulted in by this op, or used by it and already released (an op using more than the budget) */
        if (x->res[s] == 1 || (x->res[s] == 0 && offsets[e + 1] <= offsets[e])) continue;
        if (x->res[s] == 2) x->res[s] = 1;
        if (x->st.budget < x->st.total)
            for (int k = 0; k < 3; k++, n_iv++) span_of(x, s, k, &x->iv[2 * n_iv], &x->iv[2 * n_iv + 1]);
    }
    if (n_iv) sweep_after_misses(x, n_iv);
    pthread_mutex_unlock(&x->mu);
}

void el_experts_get_stats(el_experts *x, el_experts_stats *out) {
    memset(out, 0, sizeof *out);
    if (!x) return;
    pthread_mutex_lock(&x->mu);
    *out = x->st;
    pthread_mutex_unlock(&x->mu);
}

int el_experts_is_resident(el_experts *x, int il, int e) {
    if (!x || il < 0 || il >= x->n_layer || e < 0 || e >= x->n_expert) return -1;
    pthread_mutex_lock(&x->mu);
    const int r = x->res[il * x->n_expert + e];
    pthread_mutex_unlock(&x->mu);
    return r;
}

long el_experts_pages_present(const void *p, size_t len) {
    const size_t pg = page_size();
    const uintptr_t a = (uintptr_t)p & ~(uintptr_t)(pg - 1), b = (uintptr_t)p + len;
    const int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    long n = 0;
    uint64_t buf[512];
    for (uintptr_t v = a; v < b;) {
        size_t cnt = (size_t)((b - v + pg - 1) / pg);
        if (cnt > 512) cnt = 512;
        const off_t off = (off_t)(v / pg) * 8;
        const ssize_t r = pread(fd, buf, cnt * 8, off);
        if (r != (ssize_t)(cnt * 8)) { close(fd); return -1; }
        for (size_t i = 0; i < cnt; i++) n += (long)((buf[i] >> 63) & 1);
        v += cnt * pg;
    }
    close(fd);
    return n;
}
