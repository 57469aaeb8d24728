/*
 * load.h — load strategies (layer L5, seed 000 §5.4): how a model's weights,
 * already mapped read-only from its GGUF file (package/gguf.h), come into
 * memory.
 *
 *   mmap      nothing extra: a page is read when the forward pass first
 *             touches it (the behaviour before this file existed).
 *   preload   every page of the file read and mlock'd before the model is
 *             returned: the first token touches no disk and the weights can
 *             never be paged out.
 *   prefetch  mmap, plus a window: when layer i starts, the weights of the
 *             next EL_LOAD_PREFETCH_WINDOW segments (layers, then the output
 *             head, then layer 0 again for the next token) are requested with
 *             madvise(MADV_WILLNEED), so the kernel reads them while layer i
 *             computes.
 *   hot       preload of every segment except the token-embedding table,
 *             which is read a few rows per token (sparse access) and stays on
 *             demand. When the output head is tied to the embedding table
 *             (Gemma) the whole table is read by the first token's logits:
 *             hot then saves memory only until then, and saves nothing after.
 *
 * Segments: the file's tensors grouped by their GGUF names — "blk.N.*" is
 * layer N, "token_embd.*" the embedding table, everything else the head
 * (output norm, output matrix, rope factors). Each segment is a sorted list of
 * page-aligned byte ranges of the mapping (neighbouring tensors merged).
 *
 * Locking: preload and hot compute the bytes they will lock first and, when
 * RLIMIT_MEMLOCK is smaller than the bytes already locked plus these and the
 * process lacks CAP_IPC_LOCK (which lifts the limit), fail before touching a
 * page with EL_ERR_NOMEM naming RLIMIT_MEMLOCK, the bytes needed and the
 * limit. An mlock that still fails unlocks everything this file locked and
 * fails the same way: a model is either fully loaded as asked or not at all.
 *
 * Contract: el_load_prepare reads only validated tensor records (names,
 * offsets and sizes inside the mapping, checked by the GGUF reader); layer
 * numbers in names that do not parse or are >= n_layer go to the head
 * segment. el_load_on_layer is called from the forward pass (any layer index;
 * out-of-range ones are ignored), allocates nothing and never fails (madvise
 * is advice).
 */
#ifndef EL_MEMORY_LOAD_H
#define EL_MEMORY_LOAD_H
#include <stddef.h>
#include <stdint.h>

#include "edgellm.h"
#include "package/gguf.h"

#define EL_LOAD_PREFETCH_WINDOW 2 /* segments requested ahead of the one computing */

typedef struct el_load_range { size_t off, len; } el_load_range; /* bytes of the mapping, page-aligned */

typedef struct el_load_state {
    el_load_mode mode;
    const uint8_t *base;  /* the mapping (page-aligned) */
    size_t size;
    int n_layer;
    /* segments 0..n_layer-1 = layers, n_layer = head, n_layer+1 = token embeddings;
     * segment s holds ranges r[first[s] .. first[s+1]) */
    el_load_range *r;
    int *first;
    el_load_range *hot;   /* sorted, merged union of every segment but the embeddings */
    int n_hot;
    size_t locked;        /* bytes mlock'd (released by el_load_release) */
} el_load_state;

/* "mmap", "preload", "prefetch", "hot" <-> mode. parse: 0, or -1 for any other text. */
int el_load_mode_parse(const char *s, el_load_mode *out);
const char *el_load_mode_name(el_load_mode m); /* "?" for values outside the enum */

/* Builds the segments of a mapped GGUF for a model of n_layer layers. 0 or an el_status. */
int el_load_prepare(el_load_state *ls, const el_gguf *g, int n_layer, el_load_mode mode, el_error *err);
/* Brings the weights in as the mode says (see above). 0 or an el_status; on
 * failure nothing stays locked. */
int el_load_apply(el_load_state *ls, el_error *err);
/* Forward-pass hook at the start of layer il (prefetch: request the next window). */
void el_load_on_layer(el_load_state *ls, int il);
/* Unlocks what was locked and frees the segments (the state can be zero). */
void el_load_release(el_load_state *ls);

/* Bytes preload (all = 1) or hot (all = 0) would lock: page-rounded. */
size_t el_load_lock_bytes(const el_load_state *ls, int all);

/* Page cache of a file (benchmarks: cold starts). el_load_evict asks the
 * kernel to drop the file's cached pages (posix_fadvise POSIX_FADV_DONTNEED;
 * no privilege needed; pages that some process has mapped or locked stay).
 * el_load_resident reports the fraction of the file's pages in the page
 * cache (mincore on a temporary mapping); EL_ERR_UNSUPPORTED when this user
 * neither owns nor may write the file and is not root (the kernel then
 * answers "all resident" whatever is cached). Both: 0 or an el_status. */
int el_load_evict(const char *path, el_error *err);
int el_load_resident(const char *path, double *fraction, el_error *err);

#endif
