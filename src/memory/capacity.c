/*
 * capacity.c — see capacity.h. All arithmetic saturates at UINT64_MAX.
 */
#include "memory/capacity.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/threadpool.h"
#include "edgellm.h"
#include "memory/plan.h"

#define SAT UINT64_MAX

static uint64_t mul_u64(uint64_t a, uint64_t b) { return b && a > SAT / b ? SAT : a * b; }
static uint64_t add_u64(uint64_t a, uint64_t b) { return a > SAT - b ? SAT : a + b; }
static uint64_t align64_u64(uint64_t x) { return x > SAT - 63 ? SAT : (x + 63) & ~(uint64_t)63; }

static const char *const kv_names[EL_KV_TYPE_COUNT] = {"F16", "BF16", "Q8_0", "Q4_0", "INT8", "INT4"};

const char *el_kv_type_name(el_kv_type t) { return t >= 0 && t < EL_KV_TYPE_COUNT ? kv_names[t] : "?"; }
int el_kv_type_implemented(el_kv_type t) { return el_kv_type_cache(t) > 0; }

int el_kv_type_cache(el_kv_type t) {
    switch (t) {
    case EL_KV_F16: return EL_CACHE_F16;
    case EL_KV_BF16: return EL_CACHE_BF16;
    case EL_KV_Q8_0: return EL_CACHE_Q8_0;
    case EL_KV_Q4_0: return EL_CACHE_Q4_0;
    default: return -1;
    }
}

el_kv_type el_kv_type_of_cache(int cache_type) {
    switch (cache_type) {
    case EL_CACHE_DEFAULT:
    case EL_CACHE_F16: return EL_KV_F16;
    case EL_CACHE_BF16: return EL_KV_BF16;
    case EL_CACHE_Q8_0: return EL_KV_Q8_0;
    case EL_CACHE_Q4_0: return EL_KV_Q4_0;
    default: return EL_KV_TYPE_COUNT;
    }
}

uint64_t el_kv_row_bytes(el_kv_type t, uint64_t n) {
    switch (t) {
    case EL_KV_F16:
    case EL_KV_BF16: return mul_u64(n, 2);
    case EL_KV_Q8_0: return mul_u64(n / 32 + (n % 32 != 0), 34); /* 32 int8 + one F16 scale */
    case EL_KV_Q4_0: return mul_u64(n / 32 + (n % 32 != 0), 18); /* 32 nibbles + one F16 scale */
    case EL_KV_INT8: return n;
    case EL_KV_INT4: return n / 2 + (n % 2);
    default: return SAT;
    }
}

void el_mem_shape_of(const el_mem_model *m, el_mem_shape *s) {
    const el_mem_model *hp = m;
    memset(s, 0, sizeof *s);
    s->n_layer = hp->n_layer;
    for (int il = 0; il < hp->n_layer; il++) s->n_layer_swa += m->layer_swa[il] ? 1 : 0;
    s->n_swa = s->n_layer_swa > 0 ? hp->n_swa : 0;
    if (s->n_swa <= 0) s->n_layer_swa = 0;
    s->n_head_kv = hp->n_head_kv;
    s->head_dim = hp->head_dim_k > hp->head_dim_v ? hp->head_dim_k : hp->head_dim_v;
    s->n_ctx_max = hp->n_ctx_train;
}

uint64_t el_kv_bytes(const el_mem_shape *s, el_kv_type t, int n_ctx, int n_batch) {
    if (n_ctx <= 0 || s->n_layer <= 0 || s->n_head_kv <= 0 || s->head_dim <= 0) return SAT;
    if (n_batch <= 0) n_batch = 512;
    if (n_batch > n_ctx) n_batch = n_ctx;
    const uint64_t row = el_kv_row_bytes(t, mul_u64((uint64_t)s->n_head_kv, (uint64_t)s->head_dim));
    uint64_t ring = 0;
    if (s->n_layer_swa > 0 && s->n_swa > 0 && (int64_t)s->n_swa + n_batch < n_ctx) ring = (uint64_t)s->n_swa + (uint64_t)n_batch;
    const uint64_t full_layer = align64_u64(mul_u64((uint64_t)n_ctx, row));
    const uint64_t n_swa_layers = ring ? (uint64_t)s->n_layer_swa : 0;
    const uint64_t swa_layer = ring ? align64_u64(mul_u64(ring, row)) : full_layer;
    return add_u64(mul_u64(2, mul_u64(full_layer, (uint64_t)s->n_layer - n_swa_layers)),
                   mul_u64(2, mul_u64(swa_layer, n_swa_layers)));
}

/* Session bytes with K cache type tk and V cache type tv. For a model and
 * types the runtime has, exactly el_session_bytes_for (the session plan);
 * for the seed's ideal types, the F16 plan with the F16 KV swapped out. */
uint64_t el_mem_session_bytes_kv(const el_mem_request *r, el_kv_type tk, el_kv_type tv, int n_ctx) {
    if (n_ctx <= 0) return SAT;
    const int nb = r->n_batch > 0 ? r->n_batch : 512;
    const uint64_t kk = el_kv_bytes(&r->shape, tk, n_ctx, nb), kvv = el_kv_bytes(&r->shape, tv, n_ctx, nb);
    if (kk == SAT || kvv == SAT) return SAT;
    const uint64_t kv = kk / 2 + kvv / 2; /* each is 2 x (K or V) */
    if (!r->model) return kv;
    if (el_kv_type_cache(tk) > 0 && el_kv_type_cache(tv) > 0) {
        const size_t all = el_plan_session_bytes(r->model, n_ctx, nb, 0, el_kv_type_cache(tk), el_kv_type_cache(tv),
                                                 r->n_draft_max, r->lora_rank);
        return all ? (uint64_t)all : SAT; /* 0: a type the model's head size cannot use */
    }
    const size_t all = el_plan_session_bytes(r->model, n_ctx, nb, 0, 0, 0, r->n_draft_max, r->lora_rank);
    if (all == 0) return SAT;
    const uint64_t kv_f16 = el_kv_bytes(&r->shape, EL_KV_F16, n_ctx, nb);
    if (kv_f16 == SAT || kv_f16 > all) return SAT;
    return add_u64((uint64_t)all - kv_f16, kv);
}

uint64_t el_mem_session_bytes(const el_mem_request *r, el_kv_type t, int n_ctx) {
    return el_mem_session_bytes_kv(r, t, t, n_ctx);
}

static uint64_t fixed_bytes(const el_mem_request *r) { return add_u64(r->weights, r->runtime); }

static int fits(const el_mem_request *r, el_kv_type tk, el_kv_type tv, int n_ctx) {
    const uint64_t need = add_u64(fixed_bytes(r), el_mem_session_bytes_kv(r, tk, tv, n_ctx));
    return need != SAT && need <= r->budget;
}

int el_mem_max_ctx_kv(const el_mem_request *r, el_kv_type tk, el_kv_type tv) {
    int hi = r->shape.n_ctx_max > 0 ? r->shape.n_ctx_max : (1 << 24);
    if (hi > (1 << 24)) hi = 1 << 24; /* el_session_new's limit */
    if (!fits(r, tk, tv, 1)) return 0;
    if (fits(r, tk, tv, hi)) return hi;
    int lo = 1; /* fits(lo) && !fits(hi); the need grows with n_ctx */
    while (hi - lo > 1) {
        const int mid = lo + (hi - lo) / 2;
        if (fits(r, tk, tv, mid)) lo = mid;
        else hi = mid;
    }
    return lo;
}

int el_mem_max_ctx(const el_mem_request *r, el_kv_type t) { return el_mem_max_ctx_kv(r, t, t); }

uint64_t el_mem_max_sessions(const el_mem_request *r, el_kv_type t, int n_ctx) {
    const uint64_t fixed = fixed_bytes(r), one = el_mem_session_bytes(r, t, n_ctx);
    if (fixed == SAT || one == SAT || one == 0 || fixed > r->budget) return 0;
    return (r->budget - fixed) / one;
}

int el_mem_admit(const el_mem_request *r, int n_ctx, int n_sessions, char *msg, size_t cap) {
    const el_kv_type tk = el_kv_type_of_cache(r->type_k), tv = el_kv_type_of_cache(r->type_v);
    const uint64_t one = tk == EL_KV_TYPE_COUNT || tv == EL_KV_TYPE_COUNT ? SAT : el_mem_session_bytes_kv(r, tk, tv, n_ctx);
    const uint64_t need = add_u64(fixed_bytes(r), mul_u64(one, (uint64_t)(n_sessions > 0 ? n_sessions : 1)));
    if (one != SAT && need != SAT && need <= r->budget) return 0;
    /* the largest context at which n_sessions sessions fit */
    el_mem_request q = *r;
    const uint64_t fixed = fixed_bytes(r);
    int best = 0;
    if (fixed < r->budget) {
        q.weights = 0;
        q.runtime = 0;
        q.budget = (r->budget - fixed) / (uint64_t)(n_sessions > 0 ? n_sessions : 1);
        best = tk == EL_KV_TYPE_COUNT || tv == EL_KV_TYPE_COUNT ? 0 : el_mem_max_ctx_kv(&q, tk, tv);
    }
    const double M = 1024.0 * 1024.0;
    if (msg && cap) {
        char tail[96];
        if (best > 0) snprintf(tail, sizeof tail, "the largest context that fits is %d tokens", best);
        else snprintf(tail, sizeof tail, "not even a context of 1 token fits");
        snprintf(msg, cap,
                 "%d session%s of %d tokens need %.1f MiB (weights %.1f + runtime %.1f + %d x %.1f MiB per session) "
                 "but the memory budget is %.1f MiB; %s",
                 n_sessions, n_sessions == 1 ? "" : "s", n_ctx, need == SAT ? INFINITY : need / M, r->weights / M,
                 r->runtime / M, n_sessions, one == SAT ? INFINITY : one / M, r->budget / M, tail);
    }
    return -1;
}

/* ---- /proc ------------------------------------------------------------------ */

/* "Key:   123 kB" in a /proc file → bytes; 0 if absent. */
static uint64_t proc_kb(const char *path, const char *key) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[256];
    uint64_t v = 0;
    const size_t kl = strlen(key);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, kl) == 0 && line[kl] == ':') {
            unsigned long long kb = strtoull(line + kl + 1, NULL, 10);
            v = mul_u64(kb, 1024);
            break;
        }
    fclose(f);
    return v;
}

uint64_t el_mem_peak_rss(void) { return proc_kb("/proc/self/status", "VmHWM"); }
uint64_t el_mem_current_rss(void) { return proc_kb("/proc/self/status", "VmRSS"); }

int el_mem_pressure(uint64_t floor, char *why, size_t cap) {
    if (floor > 0) {
        const uint64_t avail = proc_kb("/proc/meminfo", "MemAvailable");
        if (avail > 0 && avail < floor) {
            if (why && cap)
                snprintf(why, cap, "MemAvailable %.1f MiB is below the floor of %.1f MiB", avail / 1048576.0, floor / 1048576.0);
            return 1;
        }
    }
    FILE *f = fopen("/proc/pressure/memory", "r");
    if (!f) return 0;
    char line[256];
    int hit = 0;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "full ", 5) == 0) {
            const char *a = strstr(line, "avg10=");
            const double v = a ? strtod(a + 6, NULL) : 0.0;
            if (v >= 10.0) {
                hit = 1;
                if (why && cap) snprintf(why, cap, "PSI memory full avg10 = %.2f %%", v);
            }
        }
    fclose(f);
    return hit;
}

static void touch_task(void *ctx, int ith, int nth) {
    (void)ctx; (void)ith; (void)nth;
}

uint64_t el_mem_runtime_bytes(int n_threads) {
    const uint64_t before = el_mem_current_rss();
    if (before == 0) return 0;
    uint64_t threads = 0;
    el_pool *p = n_threads > 1 ? el_pool_new(n_threads) : NULL;
    if (p) {
        el_pool_run(p, touch_task, NULL);
        const uint64_t after = el_mem_current_rss();
        threads = after > before ? after - before : 0;
        el_pool_free(p);
    }
    return before + threads;
}

/* The cgroup v2 directory of this process ("0::/path" in /proc/self/cgroup). */
static uint64_t cgroup_room(void) {
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f) return 0;
    char line[1024], rel[1024] = "";
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "0::", 3) == 0) {
            snprintf(rel, sizeof rel, "%s", line + 3);
            rel[strcspn(rel, "\n")] = 0;
            break;
        }
    fclose(f);
    char path[1200];
    uint64_t best = 0;
    /* the limit that binds is the lowest room of this cgroup and its ancestors */
    for (;;) {
        char buf[64];
        snprintf(path, sizeof path, "/sys/fs/cgroup%s/memory.max", strcmp(rel, "/") == 0 ? "" : rel);
        FILE *fm = fopen(path, "r");
        if (fm) {
            if (fgets(buf, sizeof buf, fm) && strncmp(buf, "max", 3) != 0) {
                const uint64_t max = strtoull(buf, NULL, 10);
                uint64_t cur = 0;
                snprintf(path, sizeof path, "/sys/fs/cgroup%s/memory.current", strcmp(rel, "/") == 0 ? "" : rel);
                FILE *fc = fopen(path, "r");
                if (fc) {
                    if (fgets(buf, sizeof buf, fc)) cur = strtoull(buf, NULL, 10);
                    fclose(fc);
                }
                const uint64_t room = max > cur ? max - cur : 1;
                if (best == 0 || room < best) best = room;
            }
            fclose(fm);
        }
        char *slash = strrchr(rel, '/');
        if (!slash || rel[0] == 0 || strcmp(rel, "/") == 0) break;
        if (slash == rel) rel[1] = 0;
        else *slash = 0;
    }
    return best;
}

uint64_t el_mem_device_available(const char **src) {
    const uint64_t avail = proc_kb("/proc/meminfo", "MemAvailable");
    const uint64_t cg = cgroup_room();
    if (cg && (!avail || cg < avail)) {
        if (src) *src = "cgroup memory.max";
        return cg;
    }
    if (src) *src = "MemAvailable";
    return avail;
}

/* ---- parsers ---------------------------------------------------------------- */

static int seterr(char *err, size_t cap, const char *fmt, const char *text) {
    if (err && cap) snprintf(err, cap, fmt, text);
    return -1;
}

int el_parse_size(const char *text, uint64_t *out, char *err, size_t err_cap) {
    if (!text || !*text) return seterr(err, err_cap, "size '%s' is empty", text ? text : "");
    if (strlen(text) > 64) return seterr(err, err_cap, "size '%.64s...' is too long", text);
    const char *p = text;
    uint64_t whole = 0;
    int nd = 0;
    while (isdigit((unsigned char)*p)) {
        const uint64_t d = (uint64_t)(*p - '0');
        if (whole > (SAT - d) / 10) return seterr(err, err_cap, "size '%s' is too large", text);
        whole = whole * 10 + d;
        p++, nd++;
    }
    double frac = 0.0;
    int nf = 0;
    if (*p == '.') {
        p++;
        double scale = 0.1;
        while (isdigit((unsigned char)*p)) {
            if (nf < 18) frac += scale * (*p - '0');
            scale /= 10;
            p++, nf++;
        }
        if (nf == 0) return seterr(err, err_cap, "size '%s': a digit must follow the decimal point", text);
    }
    if (nd == 0) return seterr(err, err_cap, "size '%s' does not start with a number", text);
    static const struct { const char *u; uint64_t mul; } units[] = {
        {"", 1}, {"b", 1},
        {"k", 1ull << 10}, {"kib", 1ull << 10}, {"kb", 1000ull},
        {"m", 1ull << 20}, {"mib", 1ull << 20}, {"mb", 1000000ull},
        {"g", 1ull << 30}, {"gib", 1ull << 30}, {"gb", 1000000000ull},
        {"t", 1ull << 40}, {"tib", 1ull << 40}, {"tb", 1000000000000ull},
    };
    char u[8] = {0};
    const size_t ul = strlen(p);
    if (ul >= sizeof u) return seterr(err, err_cap, "size '%s' has an unknown unit (B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)", text);
    for (size_t i = 0; i < ul && i < sizeof u - 1; i++) u[i] = (char)tolower((unsigned char)p[i]);
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (strcmp(u, units[i].u) == 0) {
            if (units[i].mul == 1 && nf > 0) return seterr(err, err_cap, "size '%s': a byte count has no fraction", text);
            const uint64_t w = mul_u64(whole, units[i].mul);
            const double fb = floor(frac * (double)units[i].mul + 0.5); /* < mul, exact to the byte below 2^53 */
            if (w == SAT || fb >= 18446744073709549568.0) return seterr(err, err_cap, "size '%s' is too large", text);
            const uint64_t v = add_u64(w, (uint64_t)fb);
            if (v == SAT) return seterr(err, err_cap, "size '%s' is too large", text);
            *out = v;
            return 0;
        }
    return seterr(err, err_cap, "size '%s' has an unknown unit (B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)", text);
}

int el_parse_shape(const char *text, el_mem_shape *out, char *err, size_t err_cap) {
    static const struct { const char *key; long long min, max; } keys[] = {
        {"layers", 1, 65536}, {"kv_heads", 1, 65536}, {"head_dim", 1, 65536},
        {"swa_layers", 0, 65536}, {"window", 0, 2147483647LL}, {"ctx", 1, 2147483647LL},
    };
    enum { NK = sizeof keys / sizeof keys[0] };
    long long val[NK];
    int seen[NK] = {0};
    if (!text || !*text) return seterr(err, err_cap, "shape '%s' is empty", text ? text : "");
    if (strlen(text) > 512) return seterr(err, err_cap, "shape '%.64s...' is too long", text);
    const char *p = text;
    for (;;) {
        const char *eq = strchr(p, '=');
        const char *end = strchr(p, ',');
        if (!end) end = p + strlen(p);
        if (!eq || eq > end) {
            char item[80];
            snprintf(item, sizeof item, "%.*s", (int)(end - p > 64 ? 64 : end - p), p);
            return seterr(err, err_cap, "shape item '%s' is not key=value", item);
        }
        int k = -1;
        for (int i = 0; i < NK; i++)
            if ((size_t)(eq - p) == strlen(keys[i].key) && strncmp(p, keys[i].key, (size_t)(eq - p)) == 0) k = i;
        char item[80];
        snprintf(item, sizeof item, "%.*s", (int)(end - p > 64 ? 64 : end - p), p);
        if (k < 0) return seterr(err, err_cap, "shape item '%s': unknown key (layers, kv_heads, head_dim, swa_layers, window, ctx)", item);
        if (seen[k]) return seterr(err, err_cap, "shape item '%s': key given twice", item);
        const char *v = eq + 1;
        if (v == end) return seterr(err, err_cap, "shape item '%s' has no value", item);
        long long x = 0;
        for (const char *q = v; q < end; q++) {
            if (!isdigit((unsigned char)*q)) return seterr(err, err_cap, "shape item '%s': the value is not a decimal integer", item);
            x = x * 10 + (*q - '0');
            if (x > keys[k].max) return seterr(err, err_cap, "shape item '%s': the value is out of range", item);
        }
        if (x < keys[k].min) return seterr(err, err_cap, "shape item '%s': the value is out of range", item);
        val[k] = x;
        seen[k] = 1;
        if (!*end) break;
        p = end + 1;
        if (!*p) return seterr(err, err_cap, "shape '%s' ends with a comma", text);
    }
    for (int i = 0; i < 3; i++)
        if (!seen[i]) return seterr(err, err_cap, "shape lacks %s= (layers, kv_heads, head_dim are required)", keys[i].key);
    el_mem_shape s = {0};
    s.n_layer = (int)val[0];
    s.n_head_kv = (int)val[1];
    s.head_dim = (int)val[2];
    s.n_layer_swa = seen[3] ? (int)val[3] : 0;
    s.n_swa = seen[4] ? (int)val[4] : 0;
    s.n_ctx_max = seen[5] ? (int)val[5] : 0;
    if (s.n_layer_swa > s.n_layer) return seterr(err, err_cap, "shape '%s': swa_layers exceeds layers", text);
    if ((s.n_layer_swa > 0) != (s.n_swa > 0)) return seterr(err, err_cap, "shape '%s': swa_layers and window go together", text);
    *out = s;
    return 0;
}
