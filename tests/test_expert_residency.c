/*
 * test_expert_residency.c — MoE expert residency under a budget
 * (memory/experts.c, el_model_set_expert_budget, runtime/blocks.c's touch).
 *
 * 1. The set alone, over a file mapped as the GGUF reader maps it (private,
 *    read-only): hits and misses against an independent LRU model of the same
 *    use sequence (hits + misses = uses), released slots' page-aligned
 *    interiors absent from this process's page tables right after the release
 *    (/proc/self/pagemap's present bit; mincore would report the page cache,
 *    which keeps them), resident ones present, the bytes read back after a
 *    release equal the file's; a budget below one token's experts refused;
 *    bad arguments refused; the unreleasable-bytes arithmetic.
 * 2. The tiny MoE fixtures (qwen3moe Q8_0, qwen2moe F16): a budget of one
 *    token's experts (n_used per layer, the smallest allowed) gives logits
 *    bit-identical to full residency over a prefill and greedy decode steps;
 *    each decode step adds exactly n_layer × n_used expert uses; releases
 *    happen (and never at full residency); shrinking a full model's budget
 *    drops the present pages of its expert tensors to at most the budget
 *    plus the unreleasable partial pages; a budget below one token's experts
 *    and a dense model are refused with a message naming the figures; the
 *    CLI refuses --expert-budget below one token's experts and admits a
 *    --mem-budget below the weights by keeping fewer experts.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "edgellm.h"
#include "memory/experts.h"
#include "runtime/model.h"
#include "testutil.h"

/* ---- 1. the set over a mapped file -------------------------------------------- */

enum { NL = 3, NE = 8, NU = 2 };

/* an independent LRU of slot ids: order[0] most recent */
typedef struct ref_lru {
    int order[NL * NE];
    int n;
    uint64_t hits, misses;
} ref_lru;

static void ref_touch(ref_lru *r, int il, const int32_t *off, int cap_slots) {
    for (int e = 0; e < NE; e++) {
        if (off[e + 1] <= off[e]) continue;
        const int s = il * NE + e;
        int at = -1;
        for (int i = 0; i < r->n; i++)
            if (r->order[i] == s) at = i;
        if (at >= 0) {
            r->hits++;
            memmove(r->order + 1, r->order, sizeof(int) * (size_t)at);
        } else {
            r->misses++;
            memmove(r->order + 1, r->order, sizeof(int) * (size_t)r->n);
            r->n++;
        }
        r->order[0] = s;
    }
    if (r->n > cap_slots) r->n = cap_slots; /* every slot has the same bytes here */
}

static void test_set(void) {
    const size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    /* slices of 3 pages + 100 bytes, starting 200 bytes into the file: no slice is page-aligned */
    const size_t slice = 3 * pg + 100, lead = 200;
    const size_t size = lead + (size_t)NL * 3 * NE * slice + pg;
    char path[] = "/tmp/el_experts_XXXXXX";
    const int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return;
    uint8_t *buf = malloc(size);
    for (size_t i = 0; i < size; i++) buf[i] = (uint8_t)(i * 2654435761u >> 13);
    CHECK(write(fd, buf, size) == (ssize_t)size);
    uint8_t *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    unlink(path);
    CHECK(map != MAP_FAILED);
    if (map == MAP_FAILED) { free(buf); return; }
    el_experts_layer ls[NL];
    for (int il = 0; il < NL; il++)
        for (int k = 0; k < 3; k++)
            ls[il].base[k] = map + lead + ((size_t)il * 3 + (size_t)k) * NE * slice, ls[il].stride[k] = slice;

    /* bad arguments */
    CHECK(el_experts_new(NULL, NL, NE, NU, UINT64_MAX) == NULL);
    CHECK(el_experts_new(ls, 0, NE, NU, UINT64_MAX) == NULL);
    CHECK(el_experts_new(ls, NL, NE, NE + 1, UINT64_MAX) == NULL);
    CHECK(el_experts_new(ls, NL, NE, 0, UINT64_MAX) == NULL);
    el_experts_layer bad[NL];
    memcpy(bad, ls, sizeof bad);
    bad[1].stride[2] = 0;
    CHECK(el_experts_new(bad, NL, NE, NU, UINT64_MAX) == NULL);
    bad[1].stride[2] = SIZE_MAX / 4;
    CHECK(el_experts_new(bad, NL, NE, NU, UINT64_MAX) == NULL);

    /* unreleasable: the partial pages at either end */
    CHECK(el_experts_unreleasable((void *)(uintptr_t)(pg * 10), 3 * pg) == 0);
    CHECK(el_experts_unreleasable((void *)(uintptr_t)(pg * 10 + 1), 3 * pg) == pg); /* [11pg, 13pg) inside */
    CHECK(el_experts_unreleasable((void *)(uintptr_t)(pg * 10 + 1), pg) == pg);

    const uint64_t sb = 3 * (uint64_t)slice;
    const int cap = NL * NU + 1; /* slots: one token's plus one */
    el_experts *x = el_experts_new(ls, NL, NE, NU, sb * (uint64_t)cap);
    CHECK(x != NULL);
    if (!x) { munmap(map, size); free(buf); return; }
    el_experts_stats st;
    el_experts_get_stats(x, &st);
    CHECK(st.total == sb * NL * NE);
    CHECK(st.per_token == sb * NL * NU);
    CHECK(st.fixed > 0 && st.fixed < st.total);
    CHECK(el_experts_set_budget(x, st.per_token - 1) == -1); /* below one token's experts */
    CHECK(el_experts_set_budget(x, sb * (uint64_t)cap) == 0);

    ref_lru ref = {0};
    uint64_t g = 0x1234567;
    uint64_t uses = 0;
    int bad_present = 0, bad_absent = 0, bad_bytes = 0;
    for (int step = 0; step < 300; step++) {
        const int il = step % NL;
        int32_t off[NE + 1] = {0};
        const int n_rows = 1 + step % 3; /* 1..3 rows: NU..3·NU distinct experts */
        for (int r = 0; r < n_rows * NU; r++) {
            g ^= g << 13, g ^= g >> 7, g ^= g << 17;
            off[(g >> 20) % NE + 1]++;
        }
        for (int e = 0; e < NE; e++) off[e + 1] += off[e];
        /* the op reads its experts' bytes (faulting them in) */
        for (int e = 0; e < NE; e++) {
            if (off[e + 1] <= off[e]) continue;
            uses++;
            for (int k = 0; k < 3; k++) {
                const uint8_t *p = ls[il].base[k] + slice * (size_t)e;
                if (memcmp(p, buf + (p - map), slice) != 0) bad_bytes++;
            }
        }
        el_experts_touch(x, il, off);
        ref_touch(&ref, il, off, cap);
        /* right after the touch: every slot not resident has no page present inside it; resident ones used now do */
        for (int l = 0; l < NL; l++)
            for (int e = 0; e < NE; e++) {
                const int res = el_experts_is_resident(x, l, e);
                for (int k = 0; k < 3; k++) {
                    const uintptr_t a = (uintptr_t)(ls[l].base[k] + slice * (size_t)e);
                    const uintptr_t lo = (a + pg - 1) & ~(uintptr_t)(pg - 1), hi = (a + slice) & ~(uintptr_t)(pg - 1);
                    const long pres = el_experts_pages_present((void *)lo, hi - lo);
                    if (!res && pres != 0 && bad_absent++ < 5) fprintf(stderr, "step %d slot %d/%d k %d pres %ld of %zu (op layer %d)\n", step, l, e, k, pres, (size_t)(hi - lo) / pg, il);
                    if (res && l == il && off[e + 1] > off[e] && pres != (long)((hi - lo) / pg)) bad_present++;
                }
            }
    }
    el_experts_get_stats(x, &st);
    CHECKF(st.hits == ref.hits && st.misses == ref.misses, "hits %llu misses %llu, the reference LRU %llu / %llu",
           (unsigned long long)st.hits, (unsigned long long)st.misses, (unsigned long long)ref.hits,
           (unsigned long long)ref.misses);
    CHECK(st.hits + st.misses == uses);
    CHECK(st.bytes_faulted == st.misses * sb);
    CHECK(st.releases > 0 && st.madvise_errors == 0);
    CHECK(st.resident <= st.budget);
    CHECKF(bad_absent == 0, "%d released slices still had pages present", bad_absent);
    CHECKF(bad_present == 0, "%d resident slices in use had pages missing", bad_present);
    CHECKF(bad_bytes == 0, "%d slices read back different bytes after a release", bad_bytes);
    /* a layer out of range and NULL offsets are ignored */
    el_experts_touch(x, NL, (const int32_t[NE + 1]){0, 1, 1, 1, 1, 1, 1, 1, 1});
    el_experts_touch(x, 0, NULL);
    el_experts_stats st2;
    el_experts_get_stats(x, &st2);
    CHECK(st2.hits == st.hits && st2.misses == st.misses);
    CHECK(el_experts_is_resident(x, NL, 0) == -1);
    el_experts_free(x);
    munmap(map, size);
    free(buf);
}

/* ---- 2. the tiny MoE models ----------------------------------------------------- */

enum { N_PROMPT = 12, N_DECODE = 8 };

/* prefill then greedy decode; every step's logits into out[(1 + N_DECODE) * n_vocab] */
static bool run_model(el_model *m, float *out, int n_vocab) {
    el_session_params sp = el_session_default_params();
    sp.n_ctx = 64;
    el_error err = {0};
    el_session *s = el_session_new(m, &sp, &err);
    CHECKF(s != NULL, "session: %s", err.msg);
    if (!s) return false;
    int32_t toks[N_PROMPT];
    for (int i = 0; i < N_PROMPT; i++) toks[i] = (int32_t)((i * 37 + 11) % n_vocab);
    bool ok = el_session_eval(s, toks, N_PROMPT, &err) == EL_OK;
    for (int step = 0; ok && step <= N_DECODE; step++) {
        const float *l = el_session_logits(s);
        memcpy(out + (size_t)step * n_vocab, l, sizeof(float) * (size_t)n_vocab);
        if (step == N_DECODE) break;
        int32_t best = 0;
        for (int v = 1; v < n_vocab; v++)
            if (l[v] > l[best]) best = v;
        ok = el_session_eval(s, &best, 1, &err) == EL_OK;
    }
    CHECKF(ok, "eval: %s", err.msg);
    el_session_free(s);
    return ok;
}

/* present bytes of every layer's expert tensors (whole 3-D tensors) */
static uint64_t expert_present_bytes(const el_model *m) {
    const size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    uint64_t n = 0;
    for (int il = 0; il < m->hp.n_layer; il++) {
        const el_moe *mo = &m->layers[il].moe;
        const void *b[3] = {mo->gate.data, mo->up.data, mo->down.data};
        const size_t st[3] = {mo->stride_gate, mo->stride_up, mo->stride_down};
        for (int k = 0; k < 3; k++) {
            const long p = el_experts_pages_present(b[k], st[k] * (size_t)mo->n_expert);
            if (p > 0) n += (uint64_t)p * pg;
        }
    }
    return n;
}

static void model_case(const char *rel) {
    const char *path = el_test_ref_path(rel);
    el_model_params mp = el_model_default_params();
    mp.n_threads = 2;
    el_error err = {0};
    el_model *full = el_model_load(path, &mp, &err);
    CHECKF(full != NULL, "%s: %s", rel, err.msg);
    el_model *small = el_model_load(path, &mp, &err);
    CHECKF(small != NULL, "%s: %s", rel, err.msg);
    if (!full || !small) { el_model_free(full), el_model_free(small); return; }
    const int nv = el_model_n_vocab(full), NLy = full->hp.n_layer, NU_ = full->hp.n_expert_used;
    el_expert_stats st;
    CHECK(el_model_expert_stats(small, &st) == 0);
    CHECK(st.total_bytes == small->mem.expert_bytes && st.per_token_bytes == small->mem.expert_bytes_token);

    /* refused: below one token's experts, with the figures */
    CHECK(el_model_set_expert_budget(small, st.per_token_bytes - 1, &err) != 0);
    CHECKF(err.code == EL_ERR_INVALID_ARG && strstr(err.msg, "below one token's experts"), "%s", err.msg);
    CHECK(el_model_set_expert_budget(small, st.per_token_bytes, &err) == 0);
    CHECK(el_model_weights_resident_bytes(small) < el_model_weights_bytes(small));
    CHECK(el_model_weights_resident_bytes(full) == el_model_weights_bytes(full));

    float *a = malloc(sizeof(float) * (size_t)nv * (N_DECODE + 1));
    float *b = malloc(sizeof(float) * (size_t)nv * (N_DECODE + 1));
    el_expert_stats f0, s0, f1, s1;
    el_model_expert_stats(full, &f0);
    el_model_expert_stats(small, &s0);
    const bool ok = run_model(full, a, nv) && run_model(small, b, nv);
    el_model_expert_stats(full, &f1);
    el_model_expert_stats(small, &s1);
    CHECKF(ok && memcmp(a, b, sizeof(float) * (size_t)nv * (N_DECODE + 1)) == 0,
           "%s: logits under a budget of one token's experts differ from full residency", rel);
    /* uses: each decode step exactly n_used per layer; the prefill between n_used and n_expert per layer */
    const uint64_t uf = (f1.hits + f1.misses) - (f0.hits + f0.misses), us = (s1.hits + s1.misses) - (s0.hits + s0.misses);
    CHECKF(uf == us, "%s: %llu vs %llu expert uses", rel, (unsigned long long)uf, (unsigned long long)us);
    const uint64_t dec = (uint64_t)N_DECODE * NLy * NU_;
    CHECKF(uf >= dec + (uint64_t)NLy * NU_ && uf <= dec + (uint64_t)NLy * full->hp.n_expert, "%s: %llu uses", rel,
           (unsigned long long)uf);
    CHECK(f1.releases == 0 && f1.misses <= (uint64_t)NLy * full->hp.n_expert);
    CHECKF(s1.releases > 0 && s1.misses > f1.misses, "%s: releases %llu, misses %llu vs %llu", rel,
           (unsigned long long)s1.releases, (unsigned long long)s1.misses, (unsigned long long)f1.misses);
    CHECK(s1.bytes_faulted > f1.bytes_faulted && s1.resident_bytes <= s1.budget_bytes);

    /* shrinking the full model's budget releases at once: its expert pages drop to the budget + partial pages */
    const uint64_t before = expert_present_bytes(full);
    CHECK(el_model_set_expert_budget(full, f1.per_token_bytes, &err) == 0);
    const uint64_t after = expert_present_bytes(full);
    const uint64_t bound = f1.per_token_bytes + full->mem.expert_fixed;
    CHECKF(after <= bound && after < before, "%s: expert pages present %llu -> %llu bytes (bound %llu)", rel,
           (unsigned long long)before, (unsigned long long)after, (unsigned long long)bound);
    free(a), free(b);
    el_model_free(full), el_model_free(small);
}

static void test_dense_refused(void) {
    el_model_params mp = el_model_default_params();
    el_error err = {0};
    el_model *m = el_model_load(el_test_ref_path("models/tiny-llama-Q8_0.gguf"), &mp, &err);
    CHECKF(m != NULL, "%s", err.msg);
    if (!m) return;
    el_expert_stats st;
    CHECK(el_model_expert_stats(m, &st) == -1 && st.total_bytes == 0);
    CHECK(el_model_set_expert_budget(m, 1 << 30, &err) != 0 && strstr(err.msg, "no routed experts"));
    el_model_free(m);
}

static void test_cli(void) {
    const char *model = el_test_ref_path("models/tiny-qwen3moe-Q8_0.gguf");
    char mpath[1024];
    snprintf(mpath, sizeof mpath, "%s", model);
    el_test_proc r;
    const char *low[] = {"run", "-m", mpath, "--allow-unsigned", "-p", "hi", "-n", "2", "--expert-budget", "1MiB", NULL};
    CHECK(el_test_run_cli(low, &r));
    CHECKF(r.status != 0 && r.err && strstr(r.err, "below one token's experts"), "exit %d: %s", r.status,
           r.err ? r.err : "");
    el_test_proc_free(&r);
    const char *pct[] = {"run", "-m", mpath, "--allow-unsigned", "-p", "hi", "-n", "2", "--expert-budget", "150%", NULL};
    CHECK(el_test_run_cli(pct, &r));
    CHECKF(r.status == 2 && r.err && strstr(r.err, "--expert-budget"), "exit %d: %s", r.status, r.err ? r.err : "");
    el_test_proc_free(&r);
    /* a --mem-budget below the weights: the experts beyond it are not kept, and the run goes on */
    el_model_params mp = el_model_default_params();
    el_error err = {0};
    el_model *m = el_model_load(model, &mp, &err);
    if (!m) return;
    const uint64_t w = el_model_weights_bytes(m), ex = m->mem.expert_bytes;
    el_model_free(m);
    char mb[32];
    snprintf(mb, sizeof mb, "%llu", (unsigned long long)(w - ex / 2 + (64u << 20))); /* runtime + session room */
    const char *fit[] = {"run", "-m", mpath, "--allow-unsigned", "-p", "hi", "-n", "4", "--mem-budget", mb, "-v", NULL};
    CHECK(el_test_run_cli(fit, &r));
    CHECKF(r.status == 0 && r.err && strstr(r.err, "experts resident"), "--mem-budget %s: exit %d: %s", mb, r.status,
           r.err ? r.err : "");
    el_test_proc_free(&r);
}

int main(void) {
    test_set();
    if (!el_test_have_ref()) el_test_skip("fixtures absent (make fixtures): model tests skipped");
    model_case("models/tiny-qwen3moe-Q8_0.gguf");
    model_case("models/tiny-qwen2moe-F16.gguf");
    model_case("models/tiny-qwen3moe-Q4_K_M.gguf");
    test_dense_refused();
    test_cli();
    return el_test_finish("test_expert_residency");
}
