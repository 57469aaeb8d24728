/*
 * safetensors.c — validating safetensors reader (see safetensors.h).
 *
 * Each file is mapped read-only. Its JSON header is copied into a private
 * NUL-terminated buffer (cJSON needs the terminator; a header with a NUL
 * byte inside is refused) and parsed with cJSON. JSON numbers are doubles,
 * so offsets and dims must be integral and below 2^53 — far beyond any real
 * checkpoint. Overlap is checked per file by sorting the tensors by offset.
 */
#include "convert/safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/error.h"
#include "util/file.h"
#include "util/fp16.h"

#define ST_MAX_HEADER (UINT64_C(100) << 20) /* the format's own limit is 100 MB */
#define ST_MAX_EXACT 9007199254740992.0     /* 2^53 */

typedef struct st_file {
    char *path;
    const uint8_t *base; /* whole file */
    size_t size;
    bool mapped;         /* munmap on close (else caller-owned buffer) */
} st_file;

struct el_st_set {
    st_file *files;
    int n_files;
    el_st_tensor *t;
    int n, cap;
};

static const struct { const char *name; size_t size; } k_dtypes[EL_ST_DTYPE_COUNT] = {
    [EL_ST_F64] = {"F64", 8}, [EL_ST_F32] = {"F32", 4}, [EL_ST_F16] = {"F16", 2}, [EL_ST_BF16] = {"BF16", 2},
    [EL_ST_I64] = {"I64", 8}, [EL_ST_I32] = {"I32", 4}, [EL_ST_I16] = {"I16", 2}, [EL_ST_I8] = {"I8", 1},
    [EL_ST_U8] = {"U8", 1},   [EL_ST_BOOL] = {"BOOL", 1}, [EL_ST_F8_E4M3] = {"F8_E4M3", 1},
    [EL_ST_F8_E5M2] = {"F8_E5M2", 1},
};

const char *el_st_dtype_name(el_st_dtype t) { return (unsigned)t < EL_ST_DTYPE_COUNT ? k_dtypes[t].name : "?"; }
size_t el_st_dtype_size(el_st_dtype t) { return (unsigned)t < EL_ST_DTYPE_COUNT ? k_dtypes[t].size : 0; }
int el_st_dtype_is_float(el_st_dtype t) { return t == EL_ST_F32 || t == EL_ST_F16 || t == EL_ST_BF16; }

int el_st_count(const el_st_set *s) { return s->n; }
const el_st_tensor *el_st_at(const el_st_set *s, int i) { return (i >= 0 && i < s->n) ? &s->t[i] : NULL; }
int el_st_n_shards(const el_st_set *s) { return s->n_files; }

const el_st_tensor *el_st_find(const el_st_set *s, const char *name) {
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->t[i].name, name) == 0) return &s->t[i];
    return NULL;
}

void el_st_close(el_st_set *s) {
    if (!s) return;
    for (int i = 0; i < s->n_files; i++) {
        if (s->files[i].mapped && s->files[i].base) munmap((void *)s->files[i].base, s->files[i].size);
        free(s->files[i].path);
    }
    free(s->files);
    for (int i = 0; i < s->n; i++) free((char *)s->t[i].name);
    free(s->t);
    free(s);
}

/* an integral JSON number in [0, 2^53) */
static bool json_u53(const cJSON *j, int64_t *out) {
    if (!cJSON_IsNumber(j)) return false;
    double v = j->valuedouble;
    if (!(v >= 0.0) || v >= ST_MAX_EXACT || floor(v) != v) return false;
    *out = (int64_t)v;
    return true;
}

typedef struct span { int64_t b, e; int idx; } span;
static int cmp_span(const void *a, const void *b) {
    const span *x = a, *y = b;
    return (x->b > y->b) - (x->b < y->b);
}

/* Parses file f (index fi) and appends its tensors. */
static int parse_file(el_st_set *s, int fi, el_error *err) {
    const st_file *f = &s->files[fi];
    const char *fname = f->path ? f->path : "<buffer>";
    if (f->size < 8) return el_set_error(err, EL_ERR_TRUNCATED, "%s: %zu bytes, shorter than the 8-byte header length", fname, f->size);
    uint64_t hn;
    memcpy(&hn, f->base, 8);
    if (hn < 2 || hn > ST_MAX_HEADER || hn > f->size - 8)
        return el_set_error(err, EL_ERR_BAD_COUNT, "%s: header length %llu does not fit the file (%zu bytes)", fname,
                            (unsigned long long)hn, f->size);
    const char *h = (const char *)f->base + 8;
    if (memchr(h, 0, (size_t)hn)) return el_set_error(err, EL_ERR_BAD_VALUE, "%s: header contains a NUL byte", fname);
    char *copy = malloc((size_t)hn + 1);
    if (!copy) return el_set_error(err, EL_ERR_NOMEM, "%s: out of memory for the header", fname);
    memcpy(copy, h, (size_t)hn);
    copy[hn] = 0;
    cJSON *root = cJSON_Parse(copy);
    free(copy);
    if (!root) return el_set_error(err, EL_ERR_BAD_VALUE, "%s: header is not valid JSON", fname);
    int rc = 0;
    span *spans = NULL;
    if (!cJSON_IsObject(root)) { rc = el_set_error(err, EL_ERR_BAD_VALUE, "%s: header is not a JSON object", fname); goto done; }
    const uint64_t data_size = f->size - 8 - hn;
    const uint8_t *data = f->base + 8 + hn;
    int count = 0;
    for (const cJSON *e = root->child; e; e = e->next) count++;
    spans = malloc(sizeof(span) * (size_t)(count ? count : 1));
    if (!spans) { rc = el_set_error(err, EL_ERR_NOMEM, "out of memory"); goto done; }
    int ns = 0;
    for (const cJSON *e = root->child; e; e = e->next) {
        const char *name = e->string;
        if (!name) { rc = el_set_error(err, EL_ERR_BAD_VALUE, "%s: header entry without a name", fname); goto done; }
        if (strcmp(name, "__metadata__") == 0) {
            if (!cJSON_IsObject(e)) { rc = el_set_error(err, EL_ERR_BAD_VALUE, "%s: __metadata__ is not an object", fname); goto done; }
            for (const cJSON *m = e->child; m; m = m->next)
                if (!cJSON_IsString(m)) { rc = el_set_error(err, EL_ERR_BAD_VALUE, "%s: __metadata__ value '%.64s' is not a string", fname, m->string ? m->string : ""); goto done; }
            continue;
        }
        if (!*name) { rc = el_set_error(err, EL_ERR_BAD_VALUE, "%s: tensor with an empty name", fname); goto done; }
        if (!cJSON_IsObject(e)) { rc = el_set_error(err, EL_ERR_BAD_VALUE, "%s: tensor '%.128s' is not an object", fname, name); goto done; }
        const cJSON *jd = cJSON_GetObjectItemCaseSensitive(e, "dtype");
        const cJSON *js = cJSON_GetObjectItemCaseSensitive(e, "shape");
        const cJSON *jo = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
        if (!cJSON_IsString(jd) || !cJSON_IsArray(js) || !cJSON_IsArray(jo)) {
            rc = el_set_error(err, EL_ERR_BAD_VALUE, "%s: tensor '%.128s' lacks dtype/shape/data_offsets", fname, name);
            goto done;
        }
        el_st_tensor t;
        memset(&t, 0, sizeof t);
        t.dtype = EL_ST_DTYPE_COUNT;
        for (int k = 0; k < EL_ST_DTYPE_COUNT; k++)
            if (strcmp(jd->valuestring, k_dtypes[k].name) == 0) t.dtype = (el_st_dtype)k;
        if (t.dtype == EL_ST_DTYPE_COUNT) {
            rc = el_set_error(err, EL_ERR_BAD_TYPE, "%s: tensor '%.128s' has unknown dtype '%.16s'", fname, name, jd->valuestring);
            goto done;
        }
        int nd = cJSON_GetArraySize(js);
        if (nd > EL_ST_MAX_DIMS) { rc = el_set_error(err, EL_ERR_BAD_COUNT, "%s: tensor '%.128s' has %d dims", fname, name, nd); goto done; }
        t.n_dims = nd;
        uint64_t nel = 1;
        int k = 0;
        for (const cJSON *d = js->child; d; d = d->next, k++) {
            int64_t v;
            if (!json_u53(d, &v)) { rc = el_set_error(err, EL_ERR_BAD_VALUE, "%s: tensor '%.128s' dim %d is not a non-negative integer", fname, name, k); goto done; }
            t.shape[k] = v;
            if (v != 0 && nel > (UINT64_C(1) << 53) / (uint64_t)v) { rc = el_set_error(err, EL_ERR_BAD_COUNT, "%s: tensor '%.128s' is too large", fname, name); goto done; }
            nel *= (uint64_t)v;
        }
        if (cJSON_GetArraySize(jo) != 2) { rc = el_set_error(err, EL_ERR_BAD_VALUE, "%s: tensor '%.128s' data_offsets is not [begin, end]", fname, name); goto done; }
        int64_t b, en;
        if (!json_u53(jo->child, &b) || !json_u53(jo->child->next, &en) || en < b) {
            rc = el_set_error(err, EL_ERR_BAD_VALUE, "%s: tensor '%.128s' data_offsets are not integers with begin <= end", fname, name);
            goto done;
        }
        if ((uint64_t)en > data_size) {
            rc = el_set_error(err, EL_ERR_BAD_TENSOR, "%s: tensor '%.128s' data [%lld, %lld) runs past the data section (%llu bytes)", fname, name,
                              (long long)b, (long long)en, (unsigned long long)data_size);
            goto done;
        }
        size_t es = k_dtypes[t.dtype].size;
        if (nel > UINT64_MAX / es || nel * es != (uint64_t)(en - b)) {
            rc = el_set_error(err, EL_ERR_BAD_TENSOR, "%s: tensor '%.128s' has %llu elements of %s (%llu bytes) but %lld data bytes", fname, name,
                              (unsigned long long)nel, k_dtypes[t.dtype].name, (unsigned long long)(nel * es), (long long)(en - b));
            goto done;
        }
        for (int i = 0; i < s->n; i++)
            if (strcmp(s->t[i].name, name) == 0) { rc = el_set_error(err, EL_ERR_BAD_TENSOR, "%s: tensor '%.128s' appears twice", fname, name); goto done; }
        t.n_elements = (int64_t)nel;
        t.data = data + b;
        t.nbytes = (size_t)(en - b);
        t.shard = fi;
        t.name = strdup(name);
        if (!t.name) { rc = el_set_error(err, EL_ERR_NOMEM, "out of memory"); goto done; }
        if (s->n == s->cap) {
            int cap = s->cap ? s->cap * 2 : 64;
            el_st_tensor *nt = realloc(s->t, sizeof(el_st_tensor) * (size_t)cap);
            if (!nt) { free((char *)t.name); rc = el_set_error(err, EL_ERR_NOMEM, "out of memory"); goto done; }
            s->t = nt;
            s->cap = cap;
        }
        spans[ns].b = b;
        spans[ns].e = en;
        spans[ns].idx = s->n;
        ns++;
        s->t[s->n++] = t;
    }
    qsort(spans, (size_t)ns, sizeof *spans, cmp_span);
    /* empty tensors occupy nothing; every other one must start at or after the furthest end so far */
    int last = -1;
    for (int i = 0; i < ns; i++) {
        if (spans[i].e == spans[i].b) continue;
        if (last >= 0 && spans[i].b < spans[last].e) {
            rc = el_set_error(err, EL_ERR_BAD_TENSOR, "%s: tensors '%.100s' and '%.100s' overlap", fname, s->t[spans[last].idx].name,
                              s->t[spans[i].idx].name);
            goto done;
        }
        if (last < 0 || spans[i].e > spans[last].e) last = i;
    }
done:
    free(spans);
    cJSON_Delete(root);
    return rc;
}

static el_st_set *new_set(int n_files) {
    el_st_set *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->files = calloc((size_t)n_files, sizeof(st_file));
    if (!s->files) { free(s); return NULL; }
    s->n_files = n_files;
    return s;
}

static int map_file(st_file *f, const char *path, el_error *err) {
    f->path = strdup(path);
    if (!f->path) return el_set_error(err, EL_ERR_NOMEM, "out of memory");
    struct stat st;
    char why[256];
    int fd = el_open_regular(path, &st, why, sizeof why);
    if (fd < 0) return el_set_error(err, EL_ERR_IO, "cannot open: %s", why);
    f->size = (size_t)st.st_size;
    if (f->size == 0) {
        close(fd);
        return el_set_error(err, EL_ERR_TRUNCATED, "%s: empty file", path);
    }
    void *p = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) return el_set_error(err, EL_ERR_IO, "%s: mmap failed: %s", path, strerror(e));
    f->base = p;
    f->mapped = true;
    return 0;
}

el_st_set *el_st_open_buffer(const void *buf, size_t size, el_error *err) {
    el_st_set *s = new_set(1);
    if (!s) { el_set_error(err, EL_ERR_NOMEM, "out of memory"); return NULL; }
    s->files[0].base = buf;
    s->files[0].size = size;
    if (parse_file(s, 0, err)) { el_st_close(s); return NULL; }
    return s;
}

el_st_set *el_st_open_file(const char *path, el_error *err) {
    el_st_set *s = new_set(1);
    if (!s) { el_set_error(err, EL_ERR_NOMEM, "out of memory"); return NULL; }
    if (map_file(&s->files[0], path, err) || parse_file(s, 0, err)) { el_st_close(s); return NULL; }
    return s;
}

static char *read_text(const char *path, el_error *err) {
    char why[256];
    FILE *f = el_fopen_regular(path, why, sizeof why);
    if (!f) { el_set_error(err, EL_ERR_IO, "cannot open: %s", why); return NULL; }
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    for (;;) {
        if (!b) { fclose(f); el_set_error(err, EL_ERR_NOMEM, "out of memory reading %s", path); return NULL; }
        n += fread(b + n, 1, cap - n - 1, f);
        if (n < cap - 1) break;
        if (cap > ((size_t)64 << 20)) { free(b); fclose(f); el_set_error(err, EL_ERR_BAD_COUNT, "%s: larger than 64 MB", path); return NULL; }
        char *nb = realloc(b, cap * 2);
        if (!nb) free(b);
        b = nb;
        cap *= 2;
    }
    bool bad = ferror(f);
    fclose(f);
    if (bad) { free(b); el_set_error(err, EL_ERR_IO, "%s: read error", path); return NULL; }
    b[n] = 0;
    return b;
}

el_st_set *el_st_open_dir(const char *dir, el_error *err) {
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (access(path, F_OK) == 0) return el_st_open_file(path, err);
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    if (access(path, F_OK) != 0) {
        el_set_error(err, EL_ERR_MISSING, "%s: neither model.safetensors nor model.safetensors.index.json", dir);
        return NULL;
    }
    char *text = read_text(path, err);
    if (!text) return NULL;
    cJSON *root = cJSON_Parse(text);
    free(text);
    el_st_set *s = NULL;
    char **names = NULL;
    int nn = 0;
    const cJSON *wm = root ? cJSON_GetObjectItemCaseSensitive(root, "weight_map") : NULL;
    if (!cJSON_IsObject(wm)) {
        el_set_error(err, EL_ERR_BAD_VALUE, "%s: not JSON with a \"weight_map\" object", path);
        goto fail;
    }
    int cnt = cJSON_GetArraySize(wm);
    names = calloc((size_t)(cnt ? cnt : 1), sizeof(char *));
    if (!names) { el_set_error(err, EL_ERR_NOMEM, "out of memory"); goto fail; }
    for (const cJSON *e = wm->child; e; e = e->next) {
        if (!cJSON_IsString(e) || !e->string) { el_set_error(err, EL_ERR_BAD_VALUE, "%s: weight_map value is not a file name", path); goto fail; }
        const char *fn = e->valuestring;
        if (!*fn || strchr(fn, '/') || strcmp(fn, ".") == 0 || strcmp(fn, "..") == 0) {
            el_set_error(err, EL_ERR_BAD_VALUE, "%s: shard name '%.128s' is not a plain file name", path, fn);
            goto fail;
        }
        bool seen = false;
        for (int i = 0; i < nn; i++) seen |= strcmp(names[i], fn) == 0;
        if (!seen) names[nn++] = (char *)fn;
    }
    if (nn == 0) { el_set_error(err, EL_ERR_BAD_VALUE, "%s: weight_map is empty", path); goto fail; }
    s = new_set(nn);
    if (!s) { el_set_error(err, EL_ERR_NOMEM, "out of memory"); goto fail; }
    for (int i = 0; i < nn; i++) {
        char sp[4096];
        snprintf(sp, sizeof sp, "%s/%s", dir, names[i]);
        if (map_file(&s->files[i], sp, err) || parse_file(s, i, err)) goto fail;
    }
    /* the index and the shards must agree exactly */
    for (const cJSON *e = wm->child; e; e = e->next) {
        const el_st_tensor *t = el_st_find(s, e->string);
        if (!t) { el_set_error(err, EL_ERR_MISSING, "%s: tensor '%.128s' is in the index but in no shard", path, e->string); goto fail; }
        if (strcmp(names[t->shard], e->valuestring) != 0) {
            el_set_error(err, EL_ERR_BAD_VALUE, "%s: tensor '%.128s' is indexed in %s but found in %s", path, e->string, e->valuestring, names[t->shard]);
            goto fail;
        }
    }
    for (int i = 0; i < s->n; i++)
        if (!cJSON_GetObjectItemCaseSensitive(wm, s->t[i].name)) {
            el_set_error(err, EL_ERR_BAD_VALUE, "%s: tensor '%.128s' of %s is not in the index", path, s->t[i].name, names[s->t[i].shard]);
            goto fail;
        }
    free(names);
    cJSON_Delete(root);
    return s;
fail:
    free(names);
    cJSON_Delete(root);
    el_st_close(s);
    return NULL;
}

int el_st_to_f32(const el_st_tensor *t, float *dst, el_error *err) {
    const uint8_t *p = t->data;
    int64_t n = t->n_elements;
    switch (t->dtype) {
    case EL_ST_F32: memcpy(dst, p, (size_t)n * 4); return 0;
    case EL_ST_F16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            dst[i] = el_fp16_to_fp32(h);
        }
        return 0;
    case EL_ST_BF16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            dst[i] = el_bf16_to_fp32(h);
        }
        return 0;
    default:
        return el_set_error(err, EL_ERR_UNSUPPORTED, "tensor '%.128s' has dtype %s; only F32, F16 and BF16 weights are converted", t->name,
                            el_st_dtype_name(t->dtype));
    }
}
