/*
 * devcache.c — the device capability cache file (devcache.h): one text file
 * per device key, read strictly (every line in its place, every value in
 * range, `end` last) and written atomically (temporary file + rename).
 * Reading uses el_open_regular, so a directory, FIFO or device in the file's
 * place is refused without blocking; nothing is read past 64 KiB.
 */
#include "sched/devcache.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sched/placement.h"
#include "util/file.h"

static uint64_t fnv1a(const char *s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ull;
    }
    return h;
}

static bool key_ok(const char *key) {
    if (!key || !*key) return false;
    for (const unsigned char *p = (const unsigned char *)key; *p; p++)
        if (*p < 0x20 || *p == 0x7f) return false;
    return strlen(key) < 1024;
}

static int cache_dir(char *buf, size_t cap) {
    const char *d = getenv("EL_DEVCACHE_DIR");
    int n;
    if (d && *d) n = snprintf(buf, cap, "%s", d);
    else if ((d = getenv("XDG_CACHE_HOME")) && d[0] == '/') n = snprintf(buf, cap, "%s/edgellm/devices", d);
    else if ((d = getenv("HOME")) && d[0] == '/') n = snprintf(buf, cap, "%s/.cache/edgellm/devices", d);
    else return -1;
    return n > 0 && (size_t)n < cap ? 0 : -1;
}

int el_devcache_path(const char *key, char *buf, size_t cap) {
    if (!key_ok(key) || !buf) return -1;
    char dir[4096];
    if (cache_dir(dir, sizeof dir)) return -1;
    const int n = snprintf(buf, cap, "%s/%016llx.caps", dir, (unsigned long long)fnv1a(key));
    return n > 0 && (size_t)n < cap ? 0 : -1;
}

/* ---- reading ------------------------------------------------------------ */

typedef struct {
    char *p, *end;
} lines;

/* The next line (NUL-terminated in place) split at its first space: *name,
 * *value (value: "" when no space). false at the end of the text. */
static bool next_line(lines *l, char **name, char **value) {
    if (l->p >= l->end) return false;
    char *s = l->p, *nl = memchr(s, '\n', (size_t)(l->end - s));
    if (!nl) return false; /* every line ends with a newline: a file cut mid-line is truncated */
    *nl = 0;
    l->p = nl + 1;
    *name = s;
    char *sp = strchr(s, ' ');
    if (sp) {
        *sp = 0;
        *value = sp + 1;
    } else {
        *value = s + strlen(s);
    }
    return true;
}

static bool text_ok(const char *v, size_t cap) {
    const size_t n = strlen(v);
    if (n >= cap) return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)v[i] < 0x20 || v[i] == 0x7f) return false;
    return true;
}

static bool parse_hex(const char *v, uint64_t *out) {
    if (v[0] != '0' || v[1] != 'x' || !v[2]) return false;
    uint64_t x = 0;
    for (const char *p = v + 2; *p; p++) {
        int dgt;
        if (*p >= '0' && *p <= '9') dgt = *p - '0';
        else if (*p >= 'a' && *p <= 'f') dgt = *p - 'a' + 10;
        else return false;
        if (x >> 60) return false;
        x = x << 4 | (uint64_t)dgt;
    }
    *out = x;
    return true;
}

static bool parse_u64(const char *v, uint64_t *out) {
    if (!*v) return false;
    uint64_t x = 0;
    for (const char *p = v; *p; p++) {
        if (*p < '0' || *p > '9') return false;
        const uint64_t dgt = (uint64_t)(*p - '0');
        if (x > (UINT64_MAX - dgt) / 10) return false;
        x = x * 10 + dgt;
    }
    *out = x;
    return true;
}

static bool parse_rate(const char *v, double *out) {
    if (!*v || *v == ' ') return false;
    char *e = NULL;
    errno = 0;
    const double x = strtod(v, &e);
    if (errno || !e || *e || !isfinite(x) || x < 0) return false;
    if (x != 0 && !(x >= EL_RATE_MIN && x <= EL_RATE_MAX)) return false;
    *out = x;
    return true;
}

static bool expect(lines *l, const char *want, char **value) {
    char *name;
    return next_line(l, &name, value) && strcmp(name, want) == 0;
}

static bool parse_caps(char *text, size_t len, const char *key, el_device_caps *c) {
    lines l = {text, text + len};
    char *name, *v;
    char ver[16];
    snprintf(ver, sizeof ver, "%d", EL_DEVCACHE_VERSION);
    if (!expect(&l, "edgellm-devcache", &v) || strcmp(v, ver) != 0) return false;
    if (!expect(&l, "key", &v) || strcmp(v, key) != 0) return false;
    if (!expect(&l, "name", &v) || !text_ok(v, sizeof c->name)) return false;
    snprintf(c->name, sizeof c->name, "%s", v);
    if (!expect(&l, "desc", &v) || !text_ok(v, sizeof c->desc)) return false;
    snprintf(c->desc, sizeof c->desc, "%s", v);
    uint64_t x;
    if (!expect(&l, "kind", &v) || !parse_u64(v, &x) || x > EL_DEV_OTHER) return false;
    c->kind = (el_dev_kind)x;
    if (!expect(&l, "ops", &v) || !parse_hex(v, &x) || (x >> EL_OPK_COUNT)) return false;
    c->ops = (uint32_t)x;
    if (!expect(&l, "matmul_types", &v) || !parse_hex(v, &x) || (EL_TYPE_COUNT < 64 && (x >> EL_TYPE_COUNT)))
        return false;
    c->matmul_types = x;
    if (!expect(&l, "kv_types", &v) || !parse_hex(v, &x) || (x >> 32)) return false;
    c->kv_types = (uint32_t)x;
    if (!expect(&l, "matmul_gflops", &v) || !parse_rate(v, &c->matmul_gflops)) return false;
    for (int t = 0; t < EL_TYPE_COUNT; t++) c->matmul_gflops_type[t] = 0;
    int last_t = -1;
    for (;;) {
        if (!next_line(&l, &name, &v)) return false;
        if (strcmp(name, "matmul_gflops_type") != 0) break;
        char *sp = strchr(v, ' ');
        if (!sp) return false;
        *sp = 0;
        uint64_t t;
        double r;
        if (!parse_u64(v, &t) || t >= EL_TYPE_COUNT || (int)t <= last_t || !parse_rate(sp + 1, &r) || !(r > 0))
            return false;
        c->matmul_gflops_type[t] = r;
        last_t = (int)t;
    }
    if (strcmp(name, "gflops") != 0 || !parse_rate(v, &c->gflops)) return false;
    if (!expect(&l, "mem_gbps", &v) || !parse_rate(v, &c->mem_gbps)) return false;
    if (!expect(&l, "h2d_gbps", &v) || !parse_rate(v, &c->h2d_gbps)) return false;
    if (!expect(&l, "d2h_gbps", &v) || !parse_rate(v, &c->d2h_gbps)) return false;
    if (!expect(&l, "launch_us", &v) || !parse_rate(v, &c->launch_us)) return false;
    if (!expect(&l, "matmul1_gbps", &v) || !parse_rate(v, &c->matmul1_gbps)) return false;
    if (!expect(&l, "sync_us", &v) || !parse_rate(v, &c->sync_us)) return false;
    if (!expect(&l, "mem_bytes", &v) || !parse_u64(v, &x)) return false;
    c->mem_bytes = x;
    if (!expect(&l, "end", &v) || *v) return false;
    return l.p == l.end; /* nothing after `end` */
}

int el_devcache_load(const char *key, el_device_caps *caps) {
    char path[4200];
    if (!caps || el_devcache_path(key, path, sizeof path)) return 0;
    struct stat st;
    const int fd = el_open_regular(path, &st, NULL, 0);
    if (fd < 0) return 0;
    if (st.st_size > EL_DEVCACHE_MAX_BYTES) {
        close(fd);
        return 0;
    }
    char *buf = malloc(EL_DEVCACHE_MAX_BYTES + 2);
    size_t len = 0;
    bool ok = buf != NULL;
    while (ok && len <= EL_DEVCACHE_MAX_BYTES) {
        const ssize_t r = read(fd, buf + len, EL_DEVCACHE_MAX_BYTES + 1 - len);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) ok = false;
        if (r <= 0) break;
        len += (size_t)r;
    }
    close(fd);
    const int hit = ok && len <= EL_DEVCACHE_MAX_BYTES ? el_devcache_parse(buf, len, key, caps) : 0;
    free(buf);
    return hit;
}

int el_devcache_parse(const char *text, size_t len, const char *key, el_device_caps *caps) {
    if (!text || !caps || !key_ok(key) || len > EL_DEVCACHE_MAX_BYTES || memchr(text, 0, len)) return 0;
    char *buf = malloc(len + 1);
    if (!buf) return 0;
    memcpy(buf, text, len);
    buf[len] = 0;
    el_device_caps c = *caps;
    int hit = 0;
    if (parse_caps(buf, len, key, &c)) {
        c.simulated = false;
        *caps = c;
        hit = 1;
    }
    free(buf);
    return hit;
}

/* ---- writing ------------------------------------------------------------ */

static int mkdirs(const char *dir) {
    char p[4096];
    const int n = snprintf(p, sizeof p, "%s", dir);
    if (n <= 0 || (size_t)n >= sizeof p) return -1;
    for (char *s = p + 1; *s; s++) {
        if (*s != '/') continue;
        *s = 0;
        if (mkdir(p, 0700) && errno != EEXIST) return -1;
        *s = '/';
    }
    if (mkdir(p, 0700) && errno != EEXIST) return -1;
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode) ? 0 : -1;
}

/* A driver's string with control bytes as spaces, cut to fit. */
static void put_text(FILE *f, const char *name, const char *s, size_t cap) {
    fprintf(f, "%s ", name);
    for (size_t i = 0; i < cap && s[i]; i++) {
        const unsigned char ch = (unsigned char)s[i];
        fputc(ch < 0x20 || ch == 0x7f ? ' ' : ch, f);
    }
    fputc('\n', f);
}

static bool rate_ok(double x) { return x == 0 || (x >= EL_RATE_MIN && x <= EL_RATE_MAX); }

int el_devcache_store(const char *key, const el_device_caps *c) {
    char path[4200], dir[4096];
    if (!c || el_devcache_path(key, path, sizeof path) || cache_dir(dir, sizeof dir)) return -1;
    if ((int)c->kind < 0 || c->kind > EL_DEV_OTHER || (c->ops >> EL_OPK_COUNT) ||
        (EL_TYPE_COUNT < 64 && (c->matmul_types >> EL_TYPE_COUNT)))
        return -1;
    const double r[8] = {c->matmul_gflops, c->gflops, c->mem_gbps, c->h2d_gbps, c->d2h_gbps, c->launch_us,
                         c->matmul1_gbps, c->sync_us};
    for (int k = 0; k < 8; k++)
        if (!rate_ok(r[k])) return -1;
    for (int t = 0; t < EL_TYPE_COUNT; t++)
        if (!rate_ok(c->matmul_gflops_type[t])) return -1;
    if (mkdirs(dir)) return -1;
    char tmp[4300];
    snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", path);
    const int fd = mkstemp(tmp);
    if (fd < 0) return -1;
    FILE *f = fdopen(fd, "w");
    if (!f) {
        close(fd);
        unlink(tmp);
        return -1;
    }
    fprintf(f, "edgellm-devcache %d\nkey %s\n", EL_DEVCACHE_VERSION, key);
    put_text(f, "name", c->name, sizeof c->name - 1);
    put_text(f, "desc", c->desc, sizeof c->desc - 1);
    fprintf(f, "kind %d\nops 0x%llx\nmatmul_types 0x%llx\nkv_types 0x%llx\nmatmul_gflops %.17g\n", (int)c->kind,
            (unsigned long long)c->ops, (unsigned long long)c->matmul_types, (unsigned long long)c->kv_types,
            c->matmul_gflops);
    for (int t = 0; t < EL_TYPE_COUNT; t++)
        if (c->matmul_gflops_type[t] > 0) fprintf(f, "matmul_gflops_type %d %.17g\n", t, c->matmul_gflops_type[t]);
    fprintf(f,
            "gflops %.17g\nmem_gbps %.17g\nh2d_gbps %.17g\nd2h_gbps %.17g\nlaunch_us %.17g\nmatmul1_gbps %.17g\n"
            "sync_us %.17g\nmem_bytes %llu\nend\n",
            c->gflops, c->mem_gbps, c->h2d_gbps, c->d2h_gbps, c->launch_us, c->matmul1_gbps, c->sync_us,
            (unsigned long long)c->mem_bytes);
    bool ok = fflush(f) == 0 && !ferror(f) && fsync(fileno(f)) == 0;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}
