/*
 * lora_registry.c — registered LoRA adapters with LRU residency under a
 * byte budget (contract in lora_registry.h).
 *
 * Invariants (under g->mu): resident == sum of bytes of entries whose
 * adapter is loaded, and resident <= budget after every acquire; an entry
 * with refs > 0 is loaded; refs count the leases holding it. Loading happens
 * under the lock (one load at a time; running requests never take it, only
 * requests starting or ending), so the accounting cannot race.
 */
#include <math.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "server/lora_registry.h"
#include "util/buf.h"
#include "util/error.h"
#include "util/file.h"

typedef struct entry {
    char name[65];
    char *path;
    uint8_t sha[32];
    char sha_hex[65];
    size_t bytes;       /* el_lora_bytes (the file) */
    int rank_max;       /* el_lora_rank_max */
    float def_scale;
    el_lora *a;         /* NULL: not resident */
    int refs;
    uint64_t last_use;  /* g->seq at its last acquire */
    uint64_t loads, evictions;
} entry;

struct el_lora_reg {
    pthread_mutex_t mu;
    el_model *m;
    uint64_t budget, resident, seq;
    uint64_t loads, evictions;
    int n;
    entry e[EL_LORA_REG_MAX];
};

el_lora_reg *el_lora_reg_new(el_model *m, uint64_t budget, el_error *err) {
    if (!m || budget == 0) {
        el_set_error(err, EL_ERR_INVALID_ARG, "LoRA registry: a model and a budget > 0 are required");
        return NULL;
    }
    if (sodium_init() < 0) {
        el_set_error(err, EL_ERR_INTERNAL, "libsodium failed to initialise");
        return NULL;
    }
    el_lora_reg *g = calloc(1, sizeof *g);
    if (!g) { el_set_error(err, EL_ERR_NOMEM, "LoRA registry: out of memory"); return NULL; }
    pthread_mutex_init(&g->mu, NULL);
    g->m = m;
    g->budget = budget;
    return g;
}

void el_lora_reg_free(el_lora_reg *g) {
    if (!g) return;
    for (int i = 0; i < g->n; i++) {
        el_lora_free(g->e[i].a);
        free(g->e[i].path);
    }
    pthread_mutex_destroy(&g->mu);
    free(g);
}

static int sha256_file(const char *path, uint8_t out[32], el_error *err) {
    char msg[300];
    FILE *f = el_fopen_regular(path, msg, sizeof msg);
    if (!f) return el_set_error(err, EL_ERR_IO, "%s", msg);
    crypto_hash_sha256_state st;
    crypto_hash_sha256_init(&st);
    unsigned char buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) crypto_hash_sha256_update(&st, buf, n);
    const int bad = ferror(f);
    fclose(f);
    if (bad) return el_set_error(err, EL_ERR_IO, "%s: read failed", path);
    crypto_hash_sha256_final(&st, out);
    return 0;
}

static bool name_ok(const char *s) {
    size_t n = strlen(s);
    if (n < 1 || n > 64) return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
              s[i] == '.' || s[i] == '_' || s[i] == '-'))
            return false;
    return true;
}

int el_lora_reg_add(el_lora_reg *g, const char *name, const char *path, el_error *err) {
    if (!g || !name || !path) return el_set_error(err, EL_ERR_INVALID_ARG, "LoRA registry: name and path are required");
    if (!name_ok(name))
        return el_set_error(err, EL_ERR_INVALID_ARG, "--lora %s=%s: the name must be 1-64 of [A-Za-z0-9._-]", name, path);
    pthread_mutex_lock(&g->mu);
    int rc = 0;
    if (g->n == EL_LORA_REG_MAX) {
        rc = el_set_error(err, EL_ERR_INVALID_ARG, "at most %d LoRA adapters", EL_LORA_REG_MAX);
        goto out;
    }
    for (int i = 0; i < g->n; i++)
        if (!strcmp(g->e[i].name, name)) {
            rc = el_set_error(err, EL_ERR_INVALID_ARG, "--lora %s: the name is registered twice", name);
            goto out;
        }
    el_error e2;
    el_lora *a = el_lora_load(g->m, path, &e2); /* validated now; resident only when a request uses it */
    if (!a) { rc = el_set_error(err, e2.code, "--lora %s: %s", name, e2.msg); goto out; }
    const size_t bytes = el_lora_bytes(a);
    const int rank_max = el_lora_rank_max(a);
    el_lora_free(a);
    if (bytes > g->budget) {
        rc = el_set_error(err, EL_ERR_NOMEM, "--lora %s: the adapter needs %zu bytes, more than --lora-budget %llu",
                          name, bytes, (unsigned long long)g->budget);
        goto out;
    }
    entry *e = &g->e[g->n];
    memset(e, 0, sizeof *e);
    if ((rc = sha256_file(path, e->sha, err))) goto out;
    snprintf(e->name, sizeof e->name, "%s", name);
    if (!(e->path = strdup(path))) { rc = el_set_error(err, EL_ERR_NOMEM, "out of memory"); goto out; }
    for (int i = 0; i < 32; i++) snprintf(e->sha_hex + 2 * i, 3, "%02x", e->sha[i]);
    e->bytes = bytes;
    e->rank_max = rank_max;
    e->def_scale = 1.0f;
    g->n++;
out:
    pthread_mutex_unlock(&g->mu);
    return rc;
}

int el_lora_reg_count(const el_lora_reg *g) { return g ? g->n : 0; }
uint64_t el_lora_reg_budget(const el_lora_reg *g) { return g ? g->budget : 0; }

int el_lora_reg_rank_plan(el_lora_reg *g) {
    if (!g) return 0;
    pthread_mutex_lock(&g->mu);
    int r[EL_LORA_REG_MAX], n = g->n, sum = 0;
    for (int i = 0; i < n; i++) r[i] = g->e[i].rank_max;
    pthread_mutex_unlock(&g->mu);
    for (int k = 0; k < n && k < EL_LORA_MAX_ACTIVE_SESSION; k++) { /* the largest ones a session can hold at once */
        int best = k;
        for (int i = k + 1; i < n; i++)
            if (r[i] > r[best]) best = i;
        const int t = r[k];
        r[k] = r[best], r[best] = t;
        sum += r[k];
    }
    return sum;
}

int el_lora_reg_scales(el_lora_reg *g, bool has_list, const int *ids, const float *scales, int n, float *out,
                       char *msg, size_t cap) {
    const int cnt = g ? g->n : 0;
    if (!has_list) {
        if (g) pthread_mutex_lock(&g->mu);
        for (int i = 0; i < cnt; i++) out[i] = g->e[i].def_scale;
        if (g) pthread_mutex_unlock(&g->mu);
        return 0;
    }
    for (int i = 0; i < cnt; i++) out[i] = 0.0f;
    for (int k = 0; k < n; k++) {
        if (ids[k] < 0 || ids[k] >= cnt) {
            snprintf(msg, cap, "invalid adapter id %d: the server has %d LoRA adapter%s (GET /lora-adapters)", ids[k], cnt,
                     cnt == 1 ? "" : "s");
            return -1;
        }
        if (!isfinite(scales[k]) || scales[k] < 0) {
            snprintf(msg, cap, "adapter %d: scale must be a finite number >= 0", ids[k]);
            return -1;
        }
        out[ids[k]] = scales[k];
    }
    return 0;
}

int el_lora_reg_set_defaults(el_lora_reg *g, const int *ids, const float *scales, int n, char *msg, size_t cap) {
    float s[EL_LORA_REG_MAX];
    if (el_lora_reg_scales(g, true, ids, scales, n, s, msg, cap)) return -1;
    pthread_mutex_lock(&g->mu);
    for (int i = 0; i < g->n; i++) g->e[i].def_scale = s[i];
    pthread_mutex_unlock(&g->mu);
    return 0;
}

/* Frees least recently used unreferenced adapters until need more bytes fit (g->mu held). */
static bool make_room(el_lora_reg *g, size_t need, const bool *keep) {
    while (g->resident + need > g->budget) {
        int v = -1;
        for (int i = 0; i < g->n; i++)
            if (g->e[i].a && g->e[i].refs == 0 && !keep[i] && (v < 0 || g->e[i].last_use < g->e[v].last_use)) v = i;
        if (v < 0) return false;
        el_lora_free(g->e[v].a);
        g->e[v].a = NULL;
        g->resident -= g->e[v].bytes;
        g->e[v].evictions++;
        g->evictions++;
    }
    return true;
}

uint64_t el_lora_reg_need(el_lora_reg *g, const float *scales) {
    uint64_t total = 0;
    if (!g) return 0;
    pthread_mutex_lock(&g->mu);
    for (int i = 0; i < g->n; i++)
        if (scales[i] > 0) total += g->e[i].bytes;
    pthread_mutex_unlock(&g->mu);
    return total;
}

int el_lora_reg_acquire(el_lora_reg *g, const float *scales, el_lora_lease *out, bool *busy, el_error *err) {
    memset(out, 0, sizeof *out);
    if (busy) *busy = false;
    if (!g) return 0;
    bool want[EL_LORA_REG_MAX] = {0};
    pthread_mutex_lock(&g->mu);
    size_t total = 0;
    for (int i = 0; i < g->n; i++)
        if (scales[i] > 0) want[i] = true, total += g->e[i].bytes;
    int rc = 0;
    if (total > g->budget) {
        rc = el_set_error(err, EL_ERR_NOMEM, "the request's LoRA adapters need %zu bytes together, more than "
                          "--lora-budget %llu", total, (unsigned long long)g->budget);
        goto out;
    }
    g->seq++;
    for (int i = 0; i < g->n; i++) {
        if (!want[i]) continue;
        entry *e = &g->e[i];
        if (!e->a) {
            if (!make_room(g, e->bytes, want)) {
                uint64_t held = 0;
                for (int j = 0; j < g->n; j++)
                    if (g->e[j].a && g->e[j].refs) held += g->e[j].bytes;
                rc = el_set_error(err, EL_ERR_NOMEM, "LoRA adapter '%s' (%zu bytes) does not fit --lora-budget %llu: "
                                  "%llu bytes are held by running requests; retry when they finish", e->name, e->bytes,
                                  (unsigned long long)g->budget, (unsigned long long)held);
                if (busy) *busy = true;
                goto undo;
            }
            el_error e2;
            e->a = el_lora_load(g->m, e->path, &e2);
            if (!e->a) { rc = el_set_error(err, e2.code, "LoRA adapter '%s': %s", e->name, e2.msg); goto undo; }
            g->resident += e->bytes;
            e->loads++;
            g->loads++;
            out->loaded[out->n] = true;
        }
        e->refs++;
        e->last_use = g->seq;
        out->id[out->n] = i;
        out->scale[out->n] = scales[i];
        out->a[out->n] = e->a;
        out->n++;
    }
    goto out;
undo:
    for (int k = 0; k < out->n; k++) g->e[out->id[k]].refs--;
    memset(out, 0, sizeof *out);
out:
    pthread_mutex_unlock(&g->mu);
    return rc;
}

void el_lora_reg_release(el_lora_reg *g, el_lora_lease *l) {
    if (!g || !l) return;
    pthread_mutex_lock(&g->mu);
    for (int k = 0; k < l->n; k++) {
        entry *e = &g->e[l->id[k]];
        if (e->refs > 0) e->refs--;
    }
    pthread_mutex_unlock(&g->mu);
    l->n = 0;
}

void el_lora_reg_fingerprint(el_lora_reg *g, const float *scales, char *out, size_t cap) {
    if (cap) out[0] = 0;
    if (!g) return;
    crypto_hash_sha256_state st;
    crypto_hash_sha256_init(&st);
    int any = 0;
    for (int i = 0; i < g->n; i++) {
        if (!(scales[i] > 0)) continue;
        uint32_t bits;
        memcpy(&bits, &scales[i], 4);
        unsigned char b[4] = {(unsigned char)bits, (unsigned char)(bits >> 8), (unsigned char)(bits >> 16),
                              (unsigned char)(bits >> 24)};
        crypto_hash_sha256_update(&st, g->e[i].sha, 32);
        crypto_hash_sha256_update(&st, b, 4);
        any = 1;
    }
    if (!any) return;
    uint8_t h[32];
    crypto_hash_sha256_final(&st, h);
    snprintf(out, cap, "+lora-%02x%02x%02x%02x", h[0], h[1], h[2], h[3]);
}

void el_lora_reg_describe(el_lora_reg *g, const float *scales, char *out, size_t cap) {
    if (cap) out[0] = 0;
    if (!g) return;
    size_t off = 0;
    for (int i = 0; i < g->n && off < cap; i++) {
        if (!(scales[i] > 0)) continue;
        int w = snprintf(out + off, cap - off, "%s%s@%.8s*%g", off ? "," : "", g->e[i].name, g->e[i].sha_hex,
                         (double)scales[i]);
        if (w < 0) break;
        off += (size_t)w;
    }
}

char *el_lora_reg_json(el_lora_reg *g) {
    cJSON *arr = cJSON_CreateArray();
    if (!arr) return NULL;
    if (g) pthread_mutex_lock(&g->mu);
    for (int i = 0; g && i < g->n; i++) {
        const entry *e = &g->e[i];
        cJSON *o = cJSON_CreateObject();
        if (!o) break;
        cJSON_AddItemToArray(arr, o);
        cJSON_AddNumberToObject(o, "id", i);
        cJSON_AddStringToObject(o, "path", e->path);
        cJSON_AddNumberToObject(o, "scale", e->def_scale);
        cJSON_AddStringToObject(o, "task_name", "");
        cJSON_AddStringToObject(o, "prompt_prefix", "");
        cJSON_AddStringToObject(o, "name", e->name);
        cJSON_AddStringToObject(o, "sha256", e->sha_hex);
        cJSON_AddNumberToObject(o, "bytes", (double)e->bytes);
        cJSON_AddBoolToObject(o, "resident", e->a != NULL);
        cJSON_AddNumberToObject(o, "refs", e->refs);
        cJSON_AddNumberToObject(o, "loads", (double)e->loads);
        cJSON_AddNumberToObject(o, "evictions", (double)e->evictions);
        cJSON_AddNumberToObject(o, "last_used_seq", (double)e->last_use);
    }
    if (g) pthread_mutex_unlock(&g->mu);
    char *s = cJSON_PrintUnformatted(arr);
    cJSON_Delete(arr);
    return s;
}

char *el_lora_reg_metrics(el_lora_reg *g) {
    char *buf = malloc(2048);
    if (!buf) return NULL;
    int resident_n = 0;
    uint64_t resident = 0, loads = 0, ev = 0, budget = 0;
    int n = 0;
    if (g) {
        pthread_mutex_lock(&g->mu);
        for (int i = 0; i < g->n; i++) resident_n += g->e[i].a != NULL;
        resident = g->resident, loads = g->loads, ev = g->evictions, budget = g->budget, n = g->n;
        pthread_mutex_unlock(&g->mu);
    }
    snprintf(buf, 2048,
             "# HELP edgellm_lora_adapters Registered LoRA adapters (serve --lora).\n"
             "# TYPE edgellm_lora_adapters gauge\nedgellm_lora_adapters %d\n"
             "# HELP edgellm_lora_resident Adapters loaded now.\n"
             "# TYPE edgellm_lora_resident gauge\nedgellm_lora_resident %d\n"
             "# HELP edgellm_lora_resident_bytes Bytes of the adapters loaded now.\n"
             "# TYPE edgellm_lora_resident_bytes gauge\nedgellm_lora_resident_bytes %llu\n"
             "# HELP edgellm_lora_budget_bytes --lora-budget.\n"
             "# TYPE edgellm_lora_budget_bytes gauge\nedgellm_lora_budget_bytes %llu\n"
             "# HELP edgellm_lora_loads_total Adapter loads (first use and after an eviction).\n"
             "# TYPE edgellm_lora_loads_total counter\nedgellm_lora_loads_total %llu\n"
             "# HELP edgellm_lora_evictions_total Adapters evicted (least recently used, not in use) to fit the budget.\n"
             "# TYPE edgellm_lora_evictions_total counter\nedgellm_lora_evictions_total %llu\n",
             n, resident_n, (unsigned long long)resident, (unsigned long long)budget, (unsigned long long)loads,
             (unsigned long long)ev);
    return buf;
}
