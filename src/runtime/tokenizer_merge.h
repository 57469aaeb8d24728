/*
 * tokenizer_merge.h — the symbol-merge engine SPM and BPE share (private to
 * tokenizer_spm.c and tokenizer_bpe.c).
 *
 * Contract: a piece of text is split into one symbol per UTF-8 sequence (a
 * truncated tail is one symbol), kept as a doubly linked list; every adjacent
 * pair that may merge goes on a max-heap; the best pair is merged (the left
 * symbol absorbs the right), its neighbours' pairs are queued, until no pair
 * is left. A popped pair whose symbols changed since it was queued is stale
 * and skipped. "Best" is llama.cpp's order:
 *   SPM (by_rank false): the pair's text is a token; highest score first;
 *   BPE (by_rank true):  the pair is a merge;       lowest rank first;
 * ties: the leftmost pair. Afterwards the live symbols are those reached from
 * symbol 0 through next (merged-away ones have n == 0).
 *
 * Everything is static inline with by_rank a constant at each call site, so
 * each file gets its own specialised copy of the loop (no per-pair branch).
 */
#ifndef EL_RUNTIME_TOKENIZER_MERGE_H
#define EL_RUNTIME_TOKENIZER_MERGE_H
#include "runtime/tokenizer_internal.h"

/* 16 bytes each: SPM needs one symbol per character and up to one heap entry
 * per adjacent pair, so these set the tokenizer's scratch per prompt byte. */
typedef struct { int32_t prev, next; uint32_t off, n; } sym;
typedef struct {
    int32_t left, right;
    union { float score; int32_t rank; } k; /* SPM: the token's score; BPE: the merge's rank */
    uint32_t size;                          /* bytes of the merged text */
} bigram;

typedef struct { bigram *d; size_t n, cap; bool oom; } bigram_heap;

static inline bool bigram_less(const bigram *a, const bigram *b, bool by_rank) { /* a has lower priority than b */
    if (by_rank) return a->k.rank > b->k.rank || (a->k.rank == b->k.rank && a->left > b->left);
    return a->k.score < b->k.score || (a->k.score == b->k.score && a->left > b->left);
}

static inline void heap_push(bigram_heap *h, bigram x, bool by_rank) {
    if (h->oom) return;
    h->d = vec_room(h->d, h->n, &h->cap, sizeof *h->d, 64, &h->oom);
    if (h->oom) return;
    size_t i = h->n++;
    h->d[i] = x;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!bigram_less(&h->d[p], &h->d[i], by_rank)) break;
        bigram t = h->d[p]; h->d[p] = h->d[i]; h->d[i] = t;
        i = p;
    }
}

static inline bigram heap_pop(bigram_heap *h, bool by_rank) {
    bigram top = h->d[0];
    h->d[0] = h->d[--h->n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, best = i;
        if (l < h->n && bigram_less(&h->d[best], &h->d[l], by_rank)) best = l;
        if (r < h->n && bigram_less(&h->d[best], &h->d[r], by_rank)) best = r;
        if (best == i) break;
        bigram t = h->d[best]; h->d[best] = h->d[i]; h->d[i] = t;
        i = best;
    }
    return top;
}

/* One symbol per UTF-8 sequence of text[0, n) (n <= INT32_MAX, s holds n);
 * returns the number of symbols. */
static inline int sym_split(const char *text, size_t n, sym *s) {
    int cnt = 0;
    size_t off = 0;
    while (off < n) {
        size_t l = utf8_len((uint8_t)text[off]);
        if (l > n - off) l = n - off;
        s[cnt].off = (uint32_t)off;
        s[cnt].n = (uint32_t)l;
        off += l;
        s[cnt].prev = cnt - 1;
        s[cnt].next = off == n ? -1 : cnt + 1;
        cnt++;
    }
    return cnt;
}

/* Queues the pair (left, right) if it may merge. */
static inline void pair_try_add(const el_vocab *v, const char *text, const sym *s, int left, int right,
                                bigram_heap *h, bool by_rank) {
    if (left == -1 || right == -1) return;
    bigram bg = { .left = left, .right = right, .size = s[left].n + s[right].n };
    if (by_rank) {
        int32_t r = find_merge(v, text + s[left].off, s[left].n, text + s[right].off, s[right].n);
        if (r < 0) return;
        bg.k.rank = r;
    } else {
        int32_t id = find_token(v, text + s[left].off, bg.size);
        if (id < 0) return;
        bg.k.score = v->score[id];
    }
    heap_push(h, bg, by_rank);
}

/* Merges the ns symbols of text to the end (h is emptied first and may be
 * reused); false if the heap ran out of memory. */
static inline bool sym_merge(const el_vocab *v, const char *text, sym *s, int ns, bigram_heap *h, bool by_rank) {
    h->n = 0;
    for (int i = 1; i < ns; i++) pair_try_add(v, text, s, i - 1, i, h, by_rank);
    while (h->n > 0 && !h->oom) {
        bigram bg = heap_pop(h, by_rank);
        sym *L = &s[bg.left], *R = &s[bg.right];
        if (L->n == 0 || R->n == 0 || L->n + R->n != bg.size) continue;
        L->n += R->n;
        R->n = 0;
        L->next = R->next;
        if (R->next >= 0) s[R->next].prev = bg.left;
        pair_try_add(v, text, s, L->prev, bg.left, h, by_rank);
        pair_try_add(v, text, s, bg.left, L->next, h, by_rank);
    }
    return !h->oom;
}

#endif
