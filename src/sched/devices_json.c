/*
 * devices_json.c — the --devices table parser (devices_json.h): strict
 * cJSON walk of a versioned device table into el_device_caps, every refusal
 * naming the device and the field. Nothing is written to devs unless the
 * whole table is accepted.
 */
#include "sched/devices_json.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sched/placement.h"
#include "util/error.h"
#include "util/file.h"

static int fail(el_error *err, el_status code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(el_error *err, el_status code, const char *fmt, ...) {
    if (err) {
        err->code = code;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static const char *const k_fields[] = {"name",     "kind",     "desc",     "ops",       "matmul_types",
                                       "kv_types", "matmul_gflops", "matmul_gflops_type", "gflops", "mem_gbps",
                                       "h2d_gbps", "d2h_gbps", "launch_us", "matmul1_gbps", "sync_us", "mem_bytes"};

static int type_parse(const char *s) {
    for (int t = 0; t < EL_TYPE_COUNT; t++)
        if (el_type_get(t) && strcasecmp(el_type_name(t), s) == 0) return t;
    return -1;
}

static bool name_ok(const char *s) {
    const size_t n = strlen(s);
    if (n == 0 || n >= sizeof(((el_device_caps *)0)->name)) return false;
    for (size_t i = 0; i < n; i++) {
        const char ch = s[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' ||
              ch == '-' || ch == '.' || ch == ':'))
            return false;
    }
    return true;
}

/* A rate field: absent -> 0 (*present false); else a finite number >= 0. */
static int get_rate(const cJSON *dev, const char *field, double *out, bool *present, const char *who,
                    el_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(dev, field);
    *out = 0;
    if (present) *present = v != NULL;
    if (!v) return 0;
    if (!cJSON_IsNumber(v)) return fail(err, EL_ERR_BAD_VALUE, "%s: %s must be a number", who, field);
    if (!isfinite(v->valuedouble) || v->valuedouble < 0)
        return fail(err, EL_ERR_BAD_VALUE, "%s: %s = %g (must be a finite number >= 0)", who, field, v->valuedouble);
    if (v->valuedouble != 0 && !(v->valuedouble >= EL_RATE_MIN && v->valuedouble <= EL_RATE_MAX))
        return fail(err, EL_ERR_BAD_VALUE, "%s: %s = %g (out of range: 0 or %g .. %g)", who, field, v->valuedouble,
                    EL_RATE_MIN, EL_RATE_MAX);
    *out = v->valuedouble;
    return 0;
}

/* An array of names into a bit mask via parse(); limit: ids must be below it. */
static int get_names(const cJSON *dev, const char *field, int (*parse)(const char *), int limit, uint64_t *mask,
                     bool *present, const char *what, const char *who, el_error *err) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(dev, field);
    *mask = 0;
    *present = a != NULL;
    if (!a) return 0;
    if (!cJSON_IsArray(a)) return fail(err, EL_ERR_BAD_VALUE, "%s: %s must be an array of %s names", who, field, what);
    const cJSON *e;
    cJSON_ArrayForEach(e, a) {
        if (!cJSON_IsString(e) || !e->valuestring)
            return fail(err, EL_ERR_BAD_VALUE, "%s: %s must hold %s names (strings)", who, field, what);
        const int id = parse(e->valuestring);
        if (id < 0) return fail(err, EL_ERR_BAD_VALUE, "%s: %s: unknown %s \"%.40s\"", who, field, what, e->valuestring);
        if (id >= limit)
            return fail(err, EL_ERR_BAD_VALUE, "%s: %s: %s \"%.40s\" cannot be used here", who, field, what,
                        e->valuestring);
        if (*mask >> id & 1u)
            return fail(err, EL_ERR_BAD_VALUE, "%s: %s: \"%.40s\" listed twice", who, field, e->valuestring);
        *mask |= 1ull << id;
    }
    return 0;
}

static int op_parse(const char *s) { return el_op_kind_parse(s); }

static int parse_device(const cJSON *dev, int index, el_device_caps *c, el_error *err) {
    char who[96];
    snprintf(who, sizeof who, "devices[%d]", index);
    if (!cJSON_IsObject(dev)) return fail(err, EL_ERR_BAD_VALUE, "%s: must be an object", who);
    /* every field known, none twice */
    for (const cJSON *f = dev->child; f; f = f->next) {
        bool known = false;
        for (size_t k = 0; k < sizeof k_fields / sizeof *k_fields; k++)
            if (f->string && strcmp(f->string, k_fields[k]) == 0) known = true;
        if (!known) return fail(err, EL_ERR_BAD_VALUE, "%s: unknown field \"%.40s\"", who, f->string ? f->string : "");
        for (const cJSON *g = dev->child; g != f; g = g->next)
            if (strcmp(g->string, f->string) == 0)
                return fail(err, EL_ERR_BAD_VALUE, "%s: field \"%s\" given twice", who, f->string);
    }
    memset(c, 0, sizeof *c);
    c->simulated = true;
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(dev, "name");
    if (!cJSON_IsString(name) || !name->valuestring)
        return fail(err, EL_ERR_BAD_VALUE, "%s: name missing (a string)", who);
    if (!name_ok(name->valuestring))
        return fail(err, EL_ERR_BAD_VALUE, "%s: name \"%.60s\" (1..47 of letters, digits, _ - . :)", who,
                    name->valuestring);
    snprintf(c->name, sizeof c->name, "%s", name->valuestring);
    snprintf(who, sizeof who, "devices[%d] \"%s\"", index, c->name);
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(dev, "kind");
    if (!cJSON_IsString(kind) || !kind->valuestring)
        return fail(err, EL_ERR_BAD_VALUE, "%s: kind missing (\"cpu\", \"gpu\", \"npu\" or \"other\")", who);
    const char *kn = kind->valuestring;
    if (strcmp(kn, "cpu") == 0) c->kind = EL_DEV_CPU;
    else if (strcmp(kn, "gpu") == 0) c->kind = EL_DEV_GPU;
    else if (strcmp(kn, "npu") == 0) c->kind = EL_DEV_NPU;
    else if (strcmp(kn, "other") == 0) c->kind = EL_DEV_OTHER;
    else return fail(err, EL_ERR_BAD_VALUE, "%s: kind \"%.40s\" (\"cpu\", \"gpu\", \"npu\" or \"other\")", who, kn);
    const cJSON *desc = cJSON_GetObjectItemCaseSensitive(dev, "desc");
    if (desc) {
        if (!cJSON_IsString(desc) || !desc->valuestring) return fail(err, EL_ERR_BAD_VALUE, "%s: desc must be a string", who);
        const size_t n = strlen(desc->valuestring);
        if (n >= sizeof c->desc) return fail(err, EL_ERR_BAD_VALUE, "%s: desc is %zu bytes (at most %zu)", who, n, sizeof c->desc - 1);
        for (size_t i = 0; i < n; i++)
            if ((unsigned char)desc->valuestring[i] < 0x20 || desc->valuestring[i] == 0x7f)
                return fail(err, EL_ERR_BAD_VALUE, "%s: desc holds a control character", who);
        snprintf(c->desc, sizeof c->desc, "%s", desc->valuestring);
    } else {
        snprintf(c->desc, sizeof c->desc, "simulated %s", kn);
    }

    uint64_t ops, mtypes, kvtypes;
    bool has_ops, has_mt, has_kv;
    if (get_names(dev, "ops", op_parse, EL_OPK_COUNT, &ops, &has_ops, "op", who, err) ||
        get_names(dev, "matmul_types", type_parse, EL_TYPE_COUNT < 64 ? EL_TYPE_COUNT : 64, &mtypes, &has_mt, "type",
                  who, err) ||
        get_names(dev, "kv_types", type_parse, 32, &kvtypes, &has_kv, "type", who, err))
        return -1;
    bool has[8];
    double *rates[8] = {&c->matmul_gflops, &c->gflops, &c->mem_gbps, &c->h2d_gbps, &c->d2h_gbps, &c->launch_us,
                        &c->matmul1_gbps, &c->sync_us};
    const char *rnames[8] = {"matmul_gflops", "gflops", "mem_gbps", "h2d_gbps", "d2h_gbps", "launch_us", "matmul1_gbps", "sync_us"};
    for (int k = 0; k < 8; k++)
        if (get_rate(dev, rnames[k], rates[k], &has[k], who, err)) return -1;
    const cJSON *mb = cJSON_GetObjectItemCaseSensitive(dev, "mem_bytes");
    if (mb) {
        if (!cJSON_IsNumber(mb) || !isfinite(mb->valuedouble) || mb->valuedouble < 0 ||
            mb->valuedouble > 9007199254740992.0 || mb->valuedouble != floor(mb->valuedouble))
            return fail(err, EL_ERR_BAD_VALUE, "%s: mem_bytes must be a whole number of bytes (0 .. 2^53)", who);
        c->mem_bytes = (uint64_t)mb->valuedouble;
    }
    const cJSON *mgt = cJSON_GetObjectItemCaseSensitive(dev, "matmul_gflops_type");
    if (mgt) {
        if (!cJSON_IsObject(mgt))
            return fail(err, EL_ERR_BAD_VALUE, "%s: matmul_gflops_type must be an object (type name: GFLOP/s)", who);
        for (const cJSON *e = mgt->child; e; e = e->next) {
            const int t = type_parse(e->string ? e->string : "");
            if (t < 0)
                return fail(err, EL_ERR_BAD_VALUE, "%s: matmul_gflops_type: unknown type \"%.40s\"", who,
                            e->string ? e->string : "");
            if (!cJSON_IsNumber(e) || !(e->valuedouble >= EL_RATE_MIN && e->valuedouble <= EL_RATE_MAX))
                return fail(err, EL_ERR_BAD_VALUE, "%s: matmul_gflops_type.%s must be a number in %g .. %g", who,
                            e->string, EL_RATE_MIN, EL_RATE_MAX);
            if (c->matmul_gflops_type[t] > 0)
                return fail(err, EL_ERR_BAD_VALUE, "%s: matmul_gflops_type.%s given twice", who, e->string);
            c->matmul_gflops_type[t] = e->valuedouble;
        }
    }

    if (c->kind == EL_DEV_CPU) {
        if (has_ops || has_mt || has_kv)
            return fail(err, EL_ERR_BAD_VALUE,
                        "%s: the cpu runs every op and type; remove ops/matmul_types/kv_types", who);
        c->ops = (1u << EL_OPK_COUNT) - 1;
        for (int t = 0; t < EL_TYPE_COUNT && t < 64; t++)
            if (el_type_get(t)) {
                c->matmul_types |= 1ull << t;
                if (t < 32) c->kv_types |= 1u << t;
            }
        const int need[3] = {0, 1, 2};
        for (int k = 0; k < 3; k++)
            if (!(*rates[need[k]] > 0))
                return fail(err, EL_ERR_BAD_VALUE, "%s: %s must be > 0", who, rnames[need[k]]);
        return 0;
    }

    if (!has_ops || !ops) return fail(err, EL_ERR_BAD_VALUE, "%s: ops missing or empty (which op kinds it runs)", who);
    if (ops >> EL_OPK_HOST & 1u)
        return fail(err, EL_ERR_BAD_VALUE, "%s: ops: \"host\" runs only on the cpu", who);
    const bool mm = (ops >> EL_OPK_MATMUL & 1u) || (ops >> EL_OPK_GET_ROWS & 1u);
    const bool kv = (ops >> EL_OPK_KV_STORE & 1u) || (ops >> EL_OPK_ATTENTION & 1u);
    const uint64_t other = ops & ~((1ull << EL_OPK_MATMUL) | (1ull << EL_OPK_GET_ROWS));
    if (mm && !mtypes)
        return fail(err, EL_ERR_BAD_VALUE, "%s: ops lists matmul/get_rows but matmul_types is missing or empty", who);
    if (!mm && mtypes)
        return fail(err, EL_ERR_BAD_VALUE, "%s: matmul_types given but ops lists neither matmul nor get_rows", who);
    if (kv && !kvtypes)
        return fail(err, EL_ERR_BAD_VALUE, "%s: ops lists kv_store/attention but kv_types is missing or empty", who);
    if (!kv && kvtypes)
        return fail(err, EL_ERR_BAD_VALUE, "%s: kv_types given but ops lists neither kv_store nor attention", who);
    for (int t = 0; t < EL_TYPE_COUNT; t++)
        if (c->matmul_gflops_type[t] > 0 && !(mtypes >> t & 1u))
            return fail(err, EL_ERR_BAD_VALUE, "%s: matmul_gflops_type.%s: the type is not in matmul_types", who,
                        el_type_name(t));
    if (mm && !(c->matmul_gflops > 0))
        return fail(err, EL_ERR_BAD_VALUE, "%s: matmul_gflops must be > 0 (ops lists matmul/get_rows)", who);
    if (other && !(c->gflops > 0))
        return fail(err, EL_ERR_BAD_VALUE, "%s: gflops must be > 0 (ops lists %s)", who,
                    el_op_kind_name((el_op_kind)__builtin_ctzll(other)));
    for (int k = 2; k < 5; k++)
        if (!(*rates[k] > 0)) return fail(err, EL_ERR_BAD_VALUE, "%s: %s must be > 0", who, rnames[k]);
    c->ops = (uint32_t)ops;
    c->matmul_types = mtypes;
    c->kv_types = (uint32_t)kvtypes;
    return 0;
}

int el_devices_parse(const char *text, size_t len, const el_device_caps *host, el_device_caps devs[EL_MAX_BACKENDS],
                     el_error *err) {
    if (!text || !devs) return fail(err, EL_ERR_INVALID_ARG, "devices table: no input");
    if (len > EL_DEVICES_MAX_BYTES)
        return fail(err, EL_ERR_BAD_VALUE, "devices table: %zu bytes (at most %d)", len, EL_DEVICES_MAX_BYTES);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, false);
    if (!root) {
        const size_t at = end && end >= text && end <= text + len ? (size_t)(end - text) : 0;
        return fail(err, EL_ERR_BAD_VALUE, "devices table: not valid JSON (near byte %zu)", at);
    }
    for (const char *p = end; p && p < text + len; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
            cJSON_Delete(root);
            return fail(err, EL_ERR_BAD_VALUE, "devices table: bytes after the JSON value (at byte %zu)",
                        (size_t)(p - text));
        }
    int rc = -1;
    el_device_caps tab[EL_MAX_BACKENDS];
    if (!cJSON_IsObject(root)) {
        fail(err, EL_ERR_BAD_VALUE, "devices table: must be a JSON object {\"version\": 1, \"devices\": [...]}");
        goto out;
    }
    for (const cJSON *f = root->child; f; f = f->next) {
        if (!f->string || (strcmp(f->string, "version") && strcmp(f->string, "devices"))) {
            fail(err, EL_ERR_BAD_VALUE, "devices table: unknown field \"%.40s\" (version, devices)",
                 f->string ? f->string : "");
            goto out;
        }
        for (const cJSON *g = root->child; g != f; g = g->next)
            if (strcmp(g->string, f->string) == 0) {
                fail(err, EL_ERR_BAD_VALUE, "devices table: field \"%s\" given twice", f->string);
                goto out;
            }
    }
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(root, "version");
    if (!cJSON_IsNumber(ver)) {
        fail(err, EL_ERR_BAD_VERSION, "devices table: version missing (this build reads version %d)", EL_DEVICES_VERSION);
        goto out;
    }
    if (ver->valuedouble != EL_DEVICES_VERSION) {
        fail(err, EL_ERR_BAD_VERSION, "devices table: version %g (this build reads version %d)", ver->valuedouble,
             EL_DEVICES_VERSION);
        goto out;
    }
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, "devices");
    if (!cJSON_IsArray(arr) || !arr->child) {
        fail(err, EL_ERR_BAD_VALUE, "devices table: devices must be a non-empty array");
        goto out;
    }
    const int n_tab = cJSON_GetArraySize(arr);
    const cJSON *first = arr->child;
    const cJSON *fk = cJSON_IsObject(first) ? cJSON_GetObjectItemCaseSensitive(first, "kind") : NULL;
    const bool has_cpu_first = cJSON_IsString(fk) && fk->valuestring && strcmp(fk->valuestring, "cpu") == 0;
    const int base = has_cpu_first ? 0 : 1;
    if (!has_cpu_first && !host) {
        /* say which: a cpu elsewhere, or none */
        fail(err, EL_ERR_BAD_VALUE,
             "devices table: devices[0] is not the cpu and no measured host was supplied (list the cpu first)");
        int i = 0;
        for (const cJSON *d = arr->child; d; d = d->next, i++) {
            const cJSON *k = cJSON_IsObject(d) ? cJSON_GetObjectItemCaseSensitive(d, "kind") : NULL;
            if (cJSON_IsString(k) && k->valuestring && strcmp(k->valuestring, "cpu") == 0) {
                fail(err, EL_ERR_BAD_VALUE, "devices table: devices[%d] is the cpu; it must be first", i);
                break;
            }
        }
        goto out;
    }
    if (n_tab + base > EL_MAX_BACKENDS) {
        fail(err, EL_ERR_BAD_VALUE, "devices table: %d devices%s (at most %d, the cpu included)", n_tab + base,
             base ? " with the host" : "", EL_MAX_BACKENDS);
        goto out;
    }
    if (base) {
        if (host->kind != EL_DEV_CPU) {
            fail(err, EL_ERR_INVALID_ARG, "devices table: the host caps given (%s) are not a cpu", host->name);
            goto out;
        }
        tab[0] = *host;
    }
    int i = 0;
    for (const cJSON *d = arr->child; d && base + i < EL_MAX_BACKENDS; d = d->next, i++) {
        el_device_caps *c = &tab[base + i];
        if (parse_device(d, i, c, err)) goto out;
        if (c->kind == EL_DEV_CPU && base + i != 0) {
            fail(err, EL_ERR_BAD_VALUE, "devices[%d] \"%s\": a second cpu (%s)", i, c->name,
                 base ? "the host is the cpu" : "only one, listed first");
            goto out;
        }
        for (int j = 0; j < base + i; j++)
            if (strcmp(tab[j].name, c->name) == 0) {
                fail(err, EL_ERR_BAD_VALUE, "devices[%d] \"%s\": name used twice", i, c->name);
                goto out;
            }
    }
    memcpy(devs, tab, (size_t)(n_tab + base) * sizeof *tab);
    rc = n_tab + base;
out:
    cJSON_Delete(root);
    return rc;
}

int el_devices_load(const char *path, const el_device_caps *host, el_device_caps devs[EL_MAX_BACKENDS],
                    el_error *err) {
    if (!path) return fail(err, EL_ERR_INVALID_ARG, "devices table: no path");
    char msg[300];
    struct stat st;
    const int fd = el_open_regular(path, &st, msg, sizeof msg);
    if (fd < 0) return fail(err, EL_ERR_IO, "devices table %s", msg);
    if (st.st_size > EL_DEVICES_MAX_BYTES) {
        close(fd);
        return fail(err, EL_ERR_BAD_VALUE, "devices table %.200s: %lld bytes (at most %d)", path,
                    (long long)st.st_size, EL_DEVICES_MAX_BYTES);
    }
    char *buf = malloc(EL_DEVICES_MAX_BYTES + 1);
    size_t len = 0;
    if (!buf) {
        close(fd);
        return fail(err, EL_ERR_NOMEM, "devices table: out of memory");
    }
    for (;;) {
        const ssize_t r = read(fd, buf + len, EL_DEVICES_MAX_BYTES + 1 - len);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            const int e = errno;
            close(fd);
            free(buf);
            return fail(err, EL_ERR_IO, "devices table %.200s: %s", path, strerror(e));
        }
        if (r == 0 || (len += (size_t)r) > EL_DEVICES_MAX_BYTES) break;
    }
    close(fd);
    int rc;
    if (len > EL_DEVICES_MAX_BYTES) {
        rc = fail(err, EL_ERR_BAD_VALUE, "devices table %.200s: over %d bytes", path, EL_DEVICES_MAX_BYTES);
    } else {
        rc = el_devices_parse(buf, len, host, devs, err);
        if (rc < 0 && err) {
            char m[sizeof err->msg];
            snprintf(m, sizeof m, "%s", err->msg);
            snprintf(err->msg, sizeof err->msg, "%.120s: %.250s", path, m);
        }
    }
    free(buf);
    return rc;
}
