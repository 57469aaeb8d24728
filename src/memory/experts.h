/*
 * experts.h — expert residency under a budget (layer L5): which routed
 * experts of a mixture-of-experts model stay in this process's memory.
 *
 * A MoE model's experts are slices of 3-D tensors mapped read-only from its
 * GGUF file (MAP_PRIVATE, PROT_READ: package/gguf.h): slot (layer, e) is
 * expert e's gate, up and down matrices of that layer. The set keeps the most
 * recently used slots resident within `budget` bytes: after each MoE op the
 * runtime reports which experts the op used (el_experts_touch); a used slot
 * that was resident is a hit, one that was not is a miss (its pages fault in
 * from the page cache or the file while the op reads them), and then least
 * recently used slots are released until the resident slots' bytes are at
 * most the budget. Releasing is madvise(MADV_DONTNEED) on the page-aligned
 * interior of each of the slot's three slices: on a private read-only file
 * mapping that drops the pages from this process's resident set (the kernel
 * keeps them in its page cache while memory allows) and the next read maps
 * the file's bytes again, so residency never changes a number the model
 * computes. (MADV_PAGEOUT, which also reclaims the page-cache copy, is not
 * used: measured on Linux 6.18 it skips pages other processes map and pages
 * of a large folio only partly inside the range.)
 * Bytes of a slice outside its page-aligned interior (shared with the
 * neighbouring expert's pages) cannot be released: `fixed` counts them. A
 * read fault also maps cached pages around it (the kernel's fault-around,
 * 64 KiB by default, and since Linux 6.18 the whole large page-cache folio,
 * up to 2 MiB: measured here, MADV_RANDOM does not stop it), so after a miss
 * the slices within 2 MiB of the missed one that belong to slots not
 * resident are released again (contiguous ones as one range), and lowering
 * the budget releases every slot not resident once: the resident expert
 * pages stay within budget + fixed.
 *
 * Contract: the set only ever releases pages of the ranges it was given
 * (which must be file-backed, never anonymous memory: there DONTNEED would
 * zero them). el_experts_new validates its arguments (counts > 0, strides
 * >= the matrices, no overflow) and returns NULL otherwise; touch and stats
 * are thread-safe (one mutex), allocate nothing and never fail (madvise is
 * advice: a failure is counted, not fatal).
 */
#ifndef EL_MEMORY_EXPERTS_H
#define EL_MEMORY_EXPERTS_H
#include <stddef.h>
#include <stdint.h>

/* One layer's three expert tensors: expert 0 at base[k], expert e at
 * base[k] + e * stride[k], each slice stride[k] bytes (gate, up, down). */
typedef struct el_experts_layer {
    const uint8_t *base[3];
    size_t stride[3];
} el_experts_layer;

typedef struct el_experts_stats {
    uint64_t total;          /* every slot's bytes (all experts of all layers) */
    uint64_t fixed;          /* of those, bytes no release can drop (slices' partial pages) */
    uint64_t budget;         /* resident slots' bytes are kept at most this (>= total: nothing released) */
    uint64_t resident;       /* bytes of the slots now counted resident */
    uint64_t per_token;      /* the largest bytes one token's experts can take (n_used slots per layer) */
    uint64_t hits, misses;   /* expert uses (one per expert an op used) found resident / not */
    uint64_t bytes_faulted;  /* slot bytes of the misses (what came back into memory) */
    uint64_t releases;       /* slots released */
    uint64_t bytes_released; /* page-aligned bytes madvised away */
    uint64_t madvise_errors; /* madvise calls that failed (advice ignored) */
} el_experts_stats;

typedef struct el_experts el_experts;

/* A set over n_layer layers of n_expert experts each, n_used chosen per
 * token; budget in bytes (UINT64_MAX: everything stays). NULL on a bad
 * argument or out of memory. */
el_experts *el_experts_new(const el_experts_layer *layers, int n_layer, int n_expert, int n_used, uint64_t budget);
void el_experts_free(el_experts *x);

/* Sets the budget; releases slots at once when it shrank. -1 when budget is
 * below per_token (one token could not run within it), 0 otherwise. */
int el_experts_set_budget(el_experts *x, uint64_t budget);

/* After layer il's MoE op: offsets[e] .. offsets[e+1] is the count of rows
 * that chose expert e (n_expert + 1 prefix sums, as el_op_moe's scratch holds
 * them). Ignores a layer out of range. */
void el_experts_touch(el_experts *x, int il, const int32_t *offsets);

void el_experts_get_stats(el_experts *x, el_experts_stats *out);
/* 1 if slot (il, e) is counted resident, 0 if not, -1 out of range. */
int el_experts_is_resident(el_experts *x, int il, int e);

/* Bytes of [p, p + len) that a page-aligned release cannot drop (the
 * partial pages at either end; all of it when no whole page lies inside). */
size_t el_experts_unreleasable(const void *p, size_t len);

/* Pages of [p, p + len) present in this process's page tables now
 * (/proc/self/pagemap; its "present" bit, which reads without privilege), or
 * -1 when pagemap cannot be read. For tests and measurements. */
long el_experts_pages_present(const void *p, size_t len);

#endif
