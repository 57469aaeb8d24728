/*
 * lora.c — LoRA adapters: read, validate against the base, activate per
 * session (contract in lora.h and edgellm.h's el_lora_* section).
 *
 * Invariants: an el_lora returned to a caller passed el_lora_parse, so every
 * el_lora_w with rank > 0 has a [in, r] and b [r, out] matching its base
 * weight, of a type the CPU kernels multiply with. A session's el_lora_set
 * holds scratch for a chunk of rows: in the session's block when the session
 * planned it (el_session_params.lora_rank, memory/plan.h el_plan_add_lora;
 * a set that needs more is refused before any work), else allocated by
 * el_session_set_adapters; the forward's EL_OPK_LORA ops only use it.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/cpu/kernels.h"
#include "package/types.h"
#include "runtime/lora.h"
#include "runtime/model.h"
#include "runtime/exec.h"
#include "util/error.h"
#include "util/file.h"

static const char *const k_slot[EL_LORA_PER_LAYER] = {"attn_q", "attn_k", "attn_v", "attn_output",
                                                      "ffn_gate", "ffn_up", "ffn_down"};

const char *el_lora_slot_name(int slot) { return slot >= 0 && slot < EL_LORA_PER_LAYER ? k_slot[slot] : "output"; }

static int str_ends(el_str s, const char *suf, size_t *stem) {
    const size_t n = strlen(suf);
    if (s.len < n || memcmp(s.ptr + s.len - n, suf, n) != 0) return 0;
    *stem = (size_t)s.len - n;
    return 1;
}

/* "blk.N.<slot>.weight" → (N, slot); "output.weight" → (-1, 0). 0 if it names none of them. */
static int parse_target(const char *name, int *il, int *slot) {
    if (strcmp(name, "output.weight") == 0) { *il = -1, *slot = 0; return 1; }
    if (strncmp(name, "blk.", 4) != 0) return 0;
    const char *p = name + 4;
    if (*p < '0' || *p > '9') return 0;
    long v = 0;
    while (*p >= '0' && *p <= '9') {
        v = v * 10 + (*p++ - '0');
        if (v > 1000000) return 0;
    }
    if (*p++ != '.') return 0;
    for (int k = 0; k < EL_LORA_PER_LAYER; k++) {
        const size_t n = strlen(k_slot[k]);
        if (strncmp(p, k_slot[k], n) == 0 && strcmp(p + n, ".weight") == 0) {
            *il = (int)v, *slot = k;
            return 1;
        }
    }
    return 0;
}

/* A 2-D tensor as an el_mat the CPU kernels multiply with. */
static int bind(const el_gguf_tensor *t, const char *what, el_mat *out, el_error *err) {
    char nm[200];
    snprintf(nm, sizeof nm, "%.*s", (int)(t->name.len < 190 ? t->name.len : 190), t->name.ptr);
    if (t->n_dims != 2 || t->ne[0] < 1 || t->ne[1] < 1)
        return el_set_error(err, EL_ERR_BAD_TENSOR, "%s tensor '%s' has %d dims, expected a 2-D matrix", what, nm,
                            t->n_dims);
    const el_type_info *ti = el_type_get(t->type);
    const el_cpu_type_kernels *k = el_cpu_kernels((el_type)t->type);
    if (!ti || !ti->weights_supported || !ti->to_float || !k || !k->vec_dot)
        return el_set_error(err, EL_ERR_UNSUPPORTED, "tensor '%s' has type %s, which edgellm cannot compute with", nm,
                            el_type_name(t->type));
    if (ti->blck_size <= 0 || t->ne[0] % ti->blck_size)
        return el_set_error(err, EL_ERR_BAD_TENSOR, "tensor '%s': rows of %lld are not a whole number of %s blocks", nm,
                            (long long)t->ne[0], el_type_name(t->type));
    out->type = (el_type)t->type;
    out->ne0 = t->ne[0];
    out->ne1 = t->ne[1];
    out->data = t->data;
    out->row_bytes = el_row_size(out->type, t->ne[0]);
    return 0;
}

static int get_str(const el_gguf *g, const char *key, char *buf, size_t cap) {
    el_str s;
    if (!el_gguf_get_str(g, key, &s)) return 0;
    snprintf(buf, cap, "%.*s", (int)(s.len < cap - 1 ? s.len : cap - 1), s.ptr);
    return 1;
}

int el_lora_parse(el_gguf *g, const char *arch, int n_layer, el_lora_base_fn weight, void *ctx, el_lora *out,
                  el_error *err) {
    char v[64];
    if (!el_gguf_find(g, "general.type"))
        return el_set_error(err, EL_ERR_MISSING, "not a LoRA adapter: metadata 'general.type' is missing (expected 'adapter')");
    if (!get_str(g, "general.type", v, sizeof v))
        return el_set_error(err, EL_ERR_BAD_VALUE, "metadata 'general.type' is not a string");
    if (strcmp(v, "adapter") != 0)
        return el_set_error(err, EL_ERR_BAD_VALUE, "not a LoRA adapter: general.type is '%s', expected 'adapter'", v);
    if (!get_str(g, "adapter.type", v, sizeof v))
        return el_set_error(err, EL_ERR_MISSING, "metadata 'adapter.type' is missing or not a string (expected 'lora')");
    if (strcmp(v, "lora") != 0)
        return el_set_error(err, EL_ERR_UNSUPPORTED, "adapter.type is '%s'; only 'lora' adapters are supported", v);
    if (!get_str(g, "general.architecture", out->arch, sizeof out->arch))
        return el_set_error(err, EL_ERR_MISSING, "metadata 'general.architecture' is missing or not a string");
    if (strcmp(out->arch, arch) != 0)
        return el_set_error(err, EL_ERR_BAD_VALUE, "adapter is for architecture '%s', the model is '%s'", out->arch, arch);
    out->alpha = 0.0f;
    if (el_gguf_find(g, "adapter.lora.alpha")) {
        if (!el_gguf_get_f32(g, "adapter.lora.alpha", &out->alpha))
            return el_set_error(err, EL_ERR_BAD_VALUE, "metadata 'adapter.lora.alpha' is not a float32");
        if (!isfinite(out->alpha) || out->alpha < 0)
            return el_set_error(err, EL_ERR_BAD_VALUE, "adapter.lora.alpha = %g: expected a finite value >= 0",
                                (double)out->alpha);
    }
    if (n_layer < 1 || n_layer > 100000) return el_set_error(err, EL_ERR_INVALID_ARG, "base has %d layers", n_layer);
    out->n_layer = n_layer;
    const size_t nw = (size_t)n_layer * EL_LORA_PER_LAYER + 1;
    out->w = calloc(nw, sizeof *out->w);
    if (!out->w) return el_set_error(err, EL_ERR_NOMEM, "adapter tables: out of memory");
    const int64_t nt = el_gguf_n_tensors(g);
    for (int64_t i = 0; i < nt; i++) {
        const el_gguf_tensor *t = el_gguf_tensor_at(g, i);
        size_t stem;
        int is_a = str_ends(t->name, ".lora_a", &stem), is_b = !is_a && str_ends(t->name, ".lora_b", &stem);
        char nm[256];
        snprintf(nm, sizeof nm, "%.*s", (int)(t->name.len < 250 ? t->name.len : 250), t->name.ptr);
        if (!is_a && !is_b)
            return el_set_error(err, EL_ERR_BAD_TENSOR, "tensor '%s' is not a LoRA tensor (expected a .lora_a or .lora_b suffix)", nm);
        if (!is_a) continue; /* pairs are found from their A half; a lone B is caught below */
        char base[256];
        snprintf(base, sizeof base, "%.*s", (int)(stem < 250 ? stem : 250), t->name.ptr);
        int il, slot;
        if (!parse_target(base, &il, &slot)) {
            if (strcmp(base, "token_embd.weight") == 0)
                return el_set_error(err, EL_ERR_UNSUPPORTED, "adapter targets 'token_embd.weight'; edgellm adapts the "
                                    "attention and FFN projections and the output head only");
            return el_set_error(err, EL_ERR_MISSING, "adapter tensor '%s' targets '%s', which is not a weight of the "
                                "base model edgellm adapts (wrong base model?)", nm, base);
        }
        if (il >= n_layer)
            return el_set_error(err, EL_ERR_MISSING, "adapter tensor '%s' targets layer %d; the base model has %d layers",
                                nm, il, n_layer);
        const el_mat *W = weight(ctx, il, slot);
        if (!W || !W->ne0)
            return el_set_error(err, EL_ERR_MISSING, "adapter tensor '%s' targets '%s', which the base model does not "
                                "have (wrong base model?)", nm, base);
        char bn[272];
        snprintf(bn, sizeof bn, "%s.lora_b", base);
        const el_gguf_tensor *tb = el_gguf_find_tensor(g, bn);
        if (!tb) return el_set_error(err, EL_ERR_MISSING, "LoRA pair for '%s' is missing '%s'", base, bn);
        el_lora_w *lw = &out->w[il < 0 ? (size_t)n_layer * EL_LORA_PER_LAYER : (size_t)il * EL_LORA_PER_LAYER + slot];
        if (lw->rank) return el_set_error(err, EL_ERR_BAD_TENSOR, "two LoRA pairs for '%s'", base);
        int rc = bind(t, "lora_a", &lw->a, err);
        if (!rc) rc = bind(tb, "lora_b", &lw->b, err);
        if (rc) return rc;
        if (lw->a.ne0 != W->ne0 || lw->b.ne1 != W->ne1)
            return el_set_error(err, EL_ERR_BAD_TENSOR, "LoRA pair for '%s': lora_a [%lld, %lld] and lora_b [%lld, %lld] "
                                "do not fit the base weight [%lld, %lld] (expected lora_a [%lld, r], lora_b [r, %lld]; wrong base model?)",
                                base, (long long)lw->a.ne0, (long long)lw->a.ne1, (long long)lw->b.ne0, (long long)lw->b.ne1,
                                (long long)W->ne0, (long long)W->ne1, (long long)W->ne0, (long long)W->ne1);
        if (lw->a.ne1 != lw->b.ne0)
            return el_set_error(err, EL_ERR_BAD_TENSOR, "LoRA pair for '%s': lora_a has rank %lld, lora_b %lld (lora_a "
                                "must be [in, r] and lora_b [r, out])", base, (long long)lw->a.ne1, (long long)lw->b.ne0);
        if (lw->a.ne1 > EL_LORA_MAX_RANK)
            return el_set_error(err, EL_ERR_BAD_COUNT, "LoRA pair for '%s': rank %lld exceeds %d", base,
                                (long long)lw->a.ne1, EL_LORA_MAX_RANK);
        lw->rank = (int)lw->a.ne1;
        out->n_pairs++;
        if (lw->rank > out->rank_max) out->rank_max = lw->rank;
        if (lw->a.ne0 > out->in_max) out->in_max = lw->a.ne0;
        if (lw->b.ne1 > out->out_max) out->out_max = lw->b.ne1;
    }
    /* every B has its A */
    for (int64_t i = 0; i < nt; i++) {
        const el_gguf_tensor *t = el_gguf_tensor_at(g, i);
        size_t stem;
        if (!str_ends(t->name, ".lora_b", &stem)) continue;
        char an[272];
        snprintf(an, sizeof an, "%.*s.lora_a", (int)(stem < 250 ? stem : 250), t->name.ptr);
        if (!el_gguf_find_tensor(g, an))
            return el_set_error(err, EL_ERR_MISSING, "LoRA pair for '%.*s' is missing '%s'", (int)(stem < 250 ? stem : 250),
                                t->name.ptr, an);
    }
    if (out->n_pairs == 0) return el_set_error(err, EL_ERR_MISSING, "adapter has no LoRA tensor pairs");
    return 0;
}

void el_lora_release(el_lora *a) {
    if (!a) return;
    free(a->w);
    a->w = NULL;
}

/* ---- against a loaded model ---- */

static const el_mat *model_weight(void *ctx, int il, int slot) {
    const el_model *m = ctx;
    if (il < 0) {
        /* a tied head (no output.weight) is token_embd: not adapted through "output.weight" */
        if (!el_gguf_find_tensor(m->gguf, "output.weight")) return NULL;
        return &m->output;
    }
    const el_layer *L = &m->layers[il];
    const el_mat *k[EL_LORA_PER_LAYER] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
    return k[slot]->data || k[slot]->packed ? k[slot] : NULL; /* packed: a file's weight layout */
}

const el_lora_w *el_lora_find(const el_lora *a, const void *model, int il, const void *W) {
    const el_model *m = model;
    if (il < 0) {
        const el_lora_w *w = &a->w[(size_t)a->n_layer * EL_LORA_PER_LAYER];
        return W == &m->output && w->rank ? w : NULL;
    }
    if (il >= a->n_layer) return NULL;
    const el_layer *L = &m->layers[il];
    const el_lora_w *row = &a->w[(size_t)il * EL_LORA_PER_LAYER];
    int slot = W == &L->wq ? EL_LORA_Q : W == &L->wk ? EL_LORA_K : W == &L->wv ? EL_LORA_V : W == &L->wo ? EL_LORA_O
             : W == &L->w_gate ? EL_LORA_GATE : W == &L->w_up ? EL_LORA_UP : W == &L->w_down ? EL_LORA_DOWN : -1;
    return slot >= 0 && row[slot].rank ? &row[slot] : NULL;
}

float el_lora_eff_scale(const el_lora *a, const el_lora_w *w, float s) {
    const float rank = (float)w->rank;
    return a->alpha != 0.0f ? s * a->alpha / rank : s;
}

static void *read_file(const char *path, size_t *size, el_error *err) {
    char msg[300];
    struct stat st;
    int fd = el_open_regular(path, &st, msg, sizeof msg);
    if (fd < 0) { el_set_error(err, EL_ERR_IO, "%s", msg); return NULL; }
    const size_t n = (size_t)st.st_size;
    /* its own anonymous mapping (page-aligned), not the heap: an adapter the server evicts gives its pages back to
     * the system at once. From the heap, glibc's dynamic mmap threshold put adapter-sized blocks in the arenas after
     * the first free, where they stayed: the soak (issue 36) saw RSS grow in adapter-sized steps over 51 evictions. */
    void *buf = mmap(NULL, n ? n : 64, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED) {
        close(fd);
        el_set_error(err, EL_ERR_NOMEM, "%s: %zu bytes: out of memory", path, n);
        return NULL;
    }
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, (char *)buf + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            el_set_error(err, EL_ERR_IO, "%s: read failed after %zu of %zu bytes: %s", path, got, n,
                         r < 0 ? strerror(errno) : "file shrank");
            munmap(buf, n ? n : 64), close(fd);
            return NULL;
        }
        got += (size_t)r;
    }
    close(fd);
    *size = n;
    return buf;
}

el_lora *el_lora_load(el_model *m, const char *path, el_error *err) {
    if (err) err->code = EL_OK, err->msg[0] = 0;
    if (!m || !m->arch || !path) { el_set_error(err, EL_ERR_INVALID_ARG, "el_lora_load: model (loaded with weights) and path are required"); return NULL; }
    el_lora *a = calloc(1, sizeof *a);
    if (!a) { el_set_error(err, EL_ERR_NOMEM, "adapter: out of memory"); return NULL; }
    a->base = m;
    a->buf = read_file(path, &a->bytes, err);
    if (!a->buf) { free(a); return NULL; }  /* read_file maps it: el_lora_free unmaps a->bytes (64 when empty) */
    el_error e2;
    a->g = el_gguf_open_buffer(a->buf, a->bytes, &e2);
    int rc = a->g ? el_lora_parse(a->g, m->arch_name, m->hp.n_layer, model_weight, m, a, &e2) : (int)e2.code;
    if (rc) {
        el_set_error(err, e2.code, "adapter %s: %s", path, e2.msg);
        el_lora_free(a);
        return NULL;
    }
    return a;
}

void el_lora_free(el_lora *a) {
    if (!a) return;
    el_lora_release(a);
    el_gguf_close(a->g);
    if (a->buf) munmap(a->buf, a->bytes ? a->bytes : 64);
    free(a);
}

size_t el_lora_bytes(const el_lora *a) { return a ? a->bytes : 0; }
float el_lora_alpha(const el_lora *a) { return a ? a->alpha : 0.0f; }
int el_lora_rank_max(const el_lora *a) { return a ? a->rank_max : 0; }
int el_lora_n_pairs(const el_lora *a) { return a ? a->n_pairs : 0; }

/* ---- per session ---- */

void el_lora_set_free(el_lora_set *set) {
    if (!set) return;
    free(set->block);
    free(set);
}

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

/* The groups of projections one op takes (they share an input): Q/K/V, O, gate/up, down (blocks.c op_matmul). */
static const int k_group[EL_LORA_PER_LAYER] = {0, 0, 0, 1, 2, 2, 3};

size_t el_lora_set_scratch(el_lora *const *adapters, int n, int rows, int64_t *tcols, size_t *xq_row, int *chunk) {
    int64_t tc = 1;
    size_t xr = 0;
    const int n_layer = n > 0 ? adapters[0]->n_layer : 0;
    for (int il = -1; il < n_layer; il++) {
        int64_t g[4] = {0, 0, 0, 0};
        for (int i = 0; i < n; i++) {
            const el_lora *a = adapters[i];
            for (int k = 0; k < (il < 0 ? 1 : EL_LORA_PER_LAYER); k++) {
                const el_lora_w *w = &a->w[il < 0 ? (size_t)a->n_layer * EL_LORA_PER_LAYER : (size_t)il * EL_LORA_PER_LAYER + k];
                if (!w->rank) continue;
                g[il < 0 ? 0 : k_group[k]] += w->rank;
                const size_t r = el_lora_xq_row(w->a.type, w->a.ne0);
                if (r > xr) xr = r;
            }
        }
        for (int k = 0; k < 4; k++)
            if (g[k] > tc) tc = g[k];
    }
    const int ch = rows < EL_LORA_CHUNK ? (rows > 0 ? rows : 1) : EL_LORA_CHUNK;
    if (tcols) *tcols = tc;
    if (xq_row) *xq_row = xr;
    if (chunk) *chunk = ch;
    return el_lora_scratch_bytes(ch, tc, xr);
}

int el_session_set_adapters(el_session *s, el_lora *const *adapters, const float *scales, int n, el_error *err) {
    if (err) err->code = EL_OK, err->msg[0] = 0;
    if (!s) return el_set_error(err, EL_ERR_INVALID_ARG, "session is NULL");
    if (n < 0 || n > EL_LORA_MAX_ACTIVE)
        return el_set_error(err, EL_ERR_INVALID_ARG, "%d adapters: expected 0..%d", n, EL_LORA_MAX_ACTIVE);
    if (n > 0 && (!adapters || !scales)) return el_set_error(err, EL_ERR_INVALID_ARG, "adapters and scales are required");
    for (int i = 0; i < n; i++) {
        if (!adapters[i]) return el_set_error(err, EL_ERR_INVALID_ARG, "adapter %d is NULL", i);
        if (adapters[i]->base != s->m)
            return el_set_error(err, EL_ERR_INVALID_ARG, "adapter %d was loaded for another model", i);
        if (!isfinite(scales[i]) || scales[i] < 0)
            return el_set_error(err, EL_ERR_INVALID_ARG, "adapter %d: scale %g is not a finite number >= 0", i,
                                (double)scales[i]);
        for (int j = 0; j < i; j++)
            if (adapters[j] == adapters[i]) return el_set_error(err, EL_ERR_INVALID_ARG, "adapter %d is set twice", i);
    }
    bool expected = false;
    if (!atomic_compare_exchange_strong(&s->busy, &expected, true))
        return el_set_error(err, EL_ERR_INVALID_ARG, "session is busy (a generation on it is running)");
    el_lora_set *set = NULL;
    if (n > 0) {
        const int rows = s->n_batch > s->n_logit_rows ? s->n_batch : s->n_logit_rows;
        int64_t tcols;
        size_t xq_row;
        int chunk;
        const size_t need = el_lora_set_scratch(adapters, n, rows, &tcols, &xq_row, &chunk);
        const size_t b_t = align64(sizeof(float) * (size_t)chunk * (size_t)tcols);
        int rank = 0;
        for (int i = 0; i < n; i++) rank += adapters[i]->rank_max;
        /* planned, and this set is beyond the plan (its bytes fit whenever its summed rank does: memory/plan.h) */
        if (s->lora_scratch_bytes && (rank > s->lora_rank || need > s->lora_scratch_bytes)) {
            atomic_store(&s->busy, false);
            return el_set_error(err, EL_ERR_NOMEM, "the adapters' scratch needs %zu bytes (ranks summing to %d) but the "
                                "session's memory plan holds %zu (lora_rank %d): create the session with "
                                "el_session_params.lora_rank >= %d", need, rank, s->lora_scratch_bytes, s->lora_rank, rank);
        }
        set = calloc(1, sizeof *set);
        void *block = s->lora_scratch_bytes ? s->lora_scratch : NULL;
        if (!set || (!block && posix_memalign(&block, 64, need))) {
            free(set);
            atomic_store(&s->busy, false);
            return el_set_error(err, EL_ERR_NOMEM, "adapter scratch of %zu bytes: out of memory", need);
        }
        set->block = s->lora_scratch_bytes ? NULL : block; /* owned only when allocated here */
        set->bytes = need;
        set->t = block;
        set->tq = (char *)block + b_t;
        set->xq = (char *)block + 2 * b_t;
        set->chunk = chunk;
        set->tcols = tcols;
        set->xq_row = xq_row;
        set->n = n;
        for (int i = 0; i < n; i++) set->a[i] = adapters[i], set->scale[i] = scales[i];
    }
    el_lora_set *old = s->lora;
    s->lora = set;
    el_lora_set_free(old);
    el_exec_forget_plans(s->exec); /* the passes' op lists changed (the CPU-alone fast path keeps none) */
    atomic_store(&s->busy, false);
    return 0;
}
