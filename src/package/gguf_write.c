/*
 * gguf_write.c — GGUF v3 writer (see gguf_write.h).
 *
 * Metadata is serialized into memory as it is added (it is small next to
 * the tensors: a 150k-token vocabulary is a few MB); tensor infos are kept
 * as a list and their offsets laid out when the file is begun. Tensor data
 * goes straight from the caller to the file through stdio, so the writer
 * holds at most one stdio buffer of it.
 *
 * Layout written (little-endian, as the reader in gguf.c expects):
 *   "GGUF" u32 3 | u64 n_tensors | u64 n_kv | kvs | tensor infos |
 *   zero padding to the alignment | each tensor's data, zero-padded to the alignment
 */
#include "package/gguf_write.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "package/types.h"
#include "util/error.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "gguf_write.c writes host-order fields; a big-endian host needs byte swapping"
#endif

#define GGUF_W_DEFAULT_ALIGNMENT 32

typedef struct wtensor {
    char *name;
    int type, n_dims;
    int64_t ne[4];
    size_t nbytes;
    uint64_t offset; /* relative to the data section; set by layout() */
} wtensor;

struct el_gguf_writer {
    /* metadata */
    uint8_t *kv;
    size_t kv_len, kv_cap;
    char **keys;
    int64_t n_kv, cap_keys;
    uint32_t alignment;
    /* tensors */
    wtensor *t;
    int64_t n_t, cap_t;
    /* output */
    FILE *f;
    char *path, *tmp_path;
    int64_t cur;         /* tensor being written */
    size_t cur_written;  /* bytes of it so far */
    uint64_t data_start; /* file offset of the data section */
    bool finished;
    el_status status;
    char msg[256];
};

static int fail(el_gguf_writer *w, el_status code, const char *fmt, ...) {
    if (w->status == EL_OK) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(w->msg, sizeof w->msg, fmt, ap);
        va_end(ap);
        w->status = code;
    }
    return code;
}

el_gguf_writer *el_gguf_writer_new(void) {
    el_gguf_writer *w = calloc(1, sizeof *w);
    if (w) w->alignment = GGUF_W_DEFAULT_ALIGNMENT;
    return w;
}

void el_gguf_writer_free(el_gguf_writer *w) {
    if (!w) return;
    if (w->f) fclose(w->f);
    if (w->tmp_path && !w->finished) unlink(w->tmp_path);
    free(w->tmp_path);
    free(w->path);
    for (int64_t i = 0; i < w->n_kv; i++) free(w->keys[i]);
    free(w->keys);
    free(w->kv);
    for (int64_t i = 0; i < w->n_t; i++) free(w->t[i].name);
    free(w->t);
    free(w);
}

const char *el_gguf_w_error(const el_gguf_writer *w) { return w->msg; }

/* ---- metadata serialization -------------------------------------------- */

static bool put(el_gguf_writer *w, const void *p, size_t n) {
    if (w->status) return false;
    if (n > SIZE_MAX - w->kv_len) { fail(w, EL_ERR_NOMEM, "metadata too large"); return false; }
    if (w->kv_len + n > w->kv_cap) {
        size_t cap = w->kv_cap ? w->kv_cap : 4096;
        while (cap < w->kv_len + n) {
            if (cap > SIZE_MAX / 2) { fail(w, EL_ERR_NOMEM, "metadata too large"); return false; }
            cap *= 2;
        }
        uint8_t *nb = realloc(w->kv, cap);
        if (!nb) { fail(w, EL_ERR_NOMEM, "out of memory for metadata"); return false; }
        w->kv = nb;
        w->kv_cap = cap;
    }
    if (n) memcpy(w->kv + w->kv_len, p, n);
    w->kv_len += n;
    return true;
}
static bool put_u32(el_gguf_writer *w, uint32_t v) { return put(w, &v, 4); }
static bool put_u64(el_gguf_writer *w, uint64_t v) { return put(w, &v, 8); }
static bool put_str(el_gguf_writer *w, const char *s, size_t n) { return put_u64(w, n) && put(w, s, n); }

bool el_gguf_w_has(const el_gguf_writer *w, const char *key) {
    for (int64_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->keys[i], key) == 0) return true;
    return false;
}

/* Starts a kv: checks the key and writes key + value type. */
static bool begin_kv(el_gguf_writer *w, const char *key, el_gguf_vtype t) {
    if (w->status) return false;
    if (!key || !*key) { fail(w, EL_ERR_INVALID_ARG, "empty metadata key"); return false; }
    if (el_gguf_w_has(w, key)) { fail(w, EL_ERR_INVALID_ARG, "duplicate metadata key '%s'", key); return false; }
    if (w->f) { fail(w, EL_ERR_INVALID_ARG, "metadata '%s' added after the file was begun", key); return false; }
    if (w->n_kv == w->cap_keys) {
        int64_t cap = w->cap_keys ? w->cap_keys * 2 : 64;
        char **nk = realloc(w->keys, sizeof(char *) * (size_t)cap);
        if (!nk) { fail(w, EL_ERR_NOMEM, "out of memory"); return false; }
        w->keys = nk;
        w->cap_keys = cap;
    }
    char *k = strdup(key);
    if (!k) { fail(w, EL_ERR_NOMEM, "out of memory"); return false; }
    w->keys[w->n_kv++] = k;
    return put_str(w, key, strlen(key)) && put_u32(w, (uint32_t)t);
}

static int scalar(el_gguf_writer *w, const char *key, el_gguf_vtype t, const void *v) {
    if (begin_kv(w, key, t)) put(w, v, el_gguf_vtype_size(t));
    return w->status;
}

int el_gguf_w_u8(el_gguf_writer *w, const char *key, uint8_t v) { return scalar(w, key, EL_GGUF_UINT8, &v); }
int el_gguf_w_i8(el_gguf_writer *w, const char *key, int8_t v) { return scalar(w, key, EL_GGUF_INT8, &v); }
int el_gguf_w_u16(el_gguf_writer *w, const char *key, uint16_t v) { return scalar(w, key, EL_GGUF_UINT16, &v); }
int el_gguf_w_i16(el_gguf_writer *w, const char *key, int16_t v) { return scalar(w, key, EL_GGUF_INT16, &v); }
int el_gguf_w_u32(el_gguf_writer *w, const char *key, uint32_t v) {
    if (strcmp(key, "general.alignment") == 0) {
        if (v == 0 || (v & (v - 1)) || v > (1u << 30))
            return fail(w, EL_ERR_INVALID_ARG, "general.alignment %u is not a power of two", v);
        if (w->n_t) return fail(w, EL_ERR_INVALID_ARG, "general.alignment set after tensors were added");
        w->alignment = v;
    }
    return scalar(w, key, EL_GGUF_UINT32, &v);
}
int el_gguf_w_i32(el_gguf_writer *w, const char *key, int32_t v) { return scalar(w, key, EL_GGUF_INT32, &v); }
int el_gguf_w_u64(el_gguf_writer *w, const char *key, uint64_t v) { return scalar(w, key, EL_GGUF_UINT64, &v); }
int el_gguf_w_i64(el_gguf_writer *w, const char *key, int64_t v) { return scalar(w, key, EL_GGUF_INT64, &v); }
int el_gguf_w_f32(el_gguf_writer *w, const char *key, float v) { return scalar(w, key, EL_GGUF_FLOAT32, &v); }
int el_gguf_w_f64(el_gguf_writer *w, const char *key, double v) { return scalar(w, key, EL_GGUF_FLOAT64, &v); }
int el_gguf_w_bool(el_gguf_writer *w, const char *key, bool v) {
    uint8_t b = v ? 1 : 0;
    return scalar(w, key, EL_GGUF_BOOL, &b);
}
int el_gguf_w_strn(el_gguf_writer *w, const char *key, const char *s, size_t len) {
    if (begin_kv(w, key, EL_GGUF_STRING)) put_str(w, s, len);
    return w->status;
}
int el_gguf_w_str(el_gguf_writer *w, const char *key, const char *s) { return el_gguf_w_strn(w, key, s, strlen(s)); }

int el_gguf_w_arr(el_gguf_writer *w, const char *key, el_gguf_vtype t, const void *data, uint64_t n) {
    size_t es = (t < EL_GGUF_TYPE_COUNT) ? el_gguf_vtype_size(t) : 0;
    if (es == 0) return fail(w, EL_ERR_INVALID_ARG, "'%s': array element type %d is not a scalar", key, (int)t);
    if (n > SIZE_MAX / es) return fail(w, EL_ERR_NOMEM, "'%s': array too large", key);
    if (t == EL_GGUF_BOOL)
        for (uint64_t i = 0; i < n; i++)
            if (((const uint8_t *)data)[i] > 1) return fail(w, EL_ERR_INVALID_ARG, "'%s': bool element %llu is not 0/1", key, (unsigned long long)i);
    if (begin_kv(w, key, EL_GGUF_ARRAY) && put_u32(w, (uint32_t)t) && put_u64(w, n)) put(w, data, (size_t)n * es);
    return w->status;
}

int el_gguf_w_arr_str(el_gguf_writer *w, const char *key, const char *const *strs, const size_t *lens, uint64_t n) {
    if (begin_kv(w, key, EL_GGUF_ARRAY) && put_u32(w, EL_GGUF_STRING) && put_u64(w, n)) {
        for (uint64_t i = 0; i < n; i++) {
            const char *s = strs[i] ? strs[i] : "";
            if (!put_str(w, s, lens ? lens[i] : strlen(s))) break;
        }
    }
    return w->status;
}

/* ---- tensors ----------------------------------------------------------- */

int el_gguf_w_add_tensor(el_gguf_writer *w, const char *name, int type, int n_dims, const int64_t *ne) {
    if (w->status) return w->status;
    if (w->f) return fail(w, EL_ERR_INVALID_ARG, "tensor '%s' added after the file was begun", name);
    if (!name || !*name) return fail(w, EL_ERR_INVALID_ARG, "empty tensor name");
    const el_type_info *ti = el_type_get(type);
    if (!ti) return fail(w, EL_ERR_BAD_TYPE, "tensor '%s': unknown type %d", name, type);
    if (n_dims < 1 || n_dims > 4) return fail(w, EL_ERR_BAD_COUNT, "tensor '%s': %d dims", name, n_dims);
    int64_t d[4] = {1, 1, 1, 1};
    uint64_t rows = 1;
    for (int j = 0; j < n_dims; j++) {
        if (ne[j] < 1 || ne[j] > (INT64_C(1) << 40))
            return fail(w, EL_ERR_BAD_COUNT, "tensor '%s': dimension %d is %lld", name, j, (long long)ne[j]);
        d[j] = ne[j];
        if (j > 0) {
            if (rows > (UINT64_C(1) << 62) / (uint64_t)ne[j]) return fail(w, EL_ERR_BAD_COUNT, "tensor '%s' too large", name);
            rows *= (uint64_t)ne[j];
        }
    }
    size_t row = el_row_size((el_type)type, d[0]);
    if (row == 0)
        return fail(w, EL_ERR_BAD_TENSOR, "tensor '%s': row of %lld is not a multiple of %s's block of %d", name,
                    (long long)d[0], ti->name, ti->blck_size);
    if (rows > SIZE_MAX / row) return fail(w, EL_ERR_BAD_COUNT, "tensor '%s' too large", name);
    for (int64_t i = 0; i < w->n_t; i++)
        if (strcmp(w->t[i].name, name) == 0) return fail(w, EL_ERR_INVALID_ARG, "duplicate tensor '%s'", name);
    if (w->n_t == w->cap_t) {
        int64_t cap = w->cap_t ? w->cap_t * 2 : 64;
        wtensor *nt = realloc(w->t, sizeof(wtensor) * (size_t)cap);
        if (!nt) return fail(w, EL_ERR_NOMEM, "out of memory");
        w->t = nt;
        w->cap_t = cap;
    }
    wtensor *t = &w->t[w->n_t];
    memset(t, 0, sizeof *t);
    t->name = strdup(name);
    if (!t->name) return fail(w, EL_ERR_NOMEM, "out of memory");
    t->type = type;
    t->n_dims = n_dims;
    memcpy(t->ne, d, sizeof d);
    t->nbytes = row * (size_t)rows;
    w->n_t++;
    return 0;
}

int64_t el_gguf_w_n_tensors(const el_gguf_writer *w) { return w->n_t; }
size_t el_gguf_w_tensor_nbytes(const el_gguf_writer *w, int64_t i) {
    return (i >= 0 && i < w->n_t) ? w->t[i].nbytes : 0;
}

static uint64_t pad_to(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

static uint64_t infos_size(const el_gguf_writer *w) {
    uint64_t s = 0;
    for (int64_t i = 0; i < w->n_t; i++) s += 8 + strlen(w->t[i].name) + 4 + 8 * (uint64_t)w->t[i].n_dims + 4 + 8;
    return s;
}

/* Lays out offsets; returns the size of the data section. */
static uint64_t layout(el_gguf_writer *w) {
    uint64_t off = 0;
    for (int64_t i = 0; i < w->n_t; i++) {
        w->t[i].offset = off;
        off = pad_to(off + w->t[i].nbytes, w->alignment);
    }
    return off;
}

uint64_t el_gguf_w_file_size(const el_gguf_writer *w) {
    uint64_t head = 4 + 4 + 8 + 8 + w->kv_len + infos_size(w);
    uint64_t data = 0;
    for (int64_t i = 0; i < w->n_t; i++) data = pad_to(data + w->t[i].nbytes, w->alignment);
    return pad_to(head, w->alignment) + data;
}

/* ---- output ------------------------------------------------------------ */

static int io_fail(el_gguf_writer *w, el_error *err, const char *what) {
    int e = errno;
    fail(w, EL_ERR_IO, "%s: %s: %s", w->tmp_path ? w->tmp_path : "?", what, e ? strerror(e) : "error");
    return el_set_error(err, EL_ERR_IO, "%s", w->msg);
}

static bool fwrite_all(FILE *f, const void *p, size_t n) { return n == 0 || fwrite(p, 1, n, f) == n; }

static bool write_zeros(FILE *f, uint64_t n) {
    static const uint8_t z[64];
    while (n) {
        size_t k = n < sizeof z ? (size_t)n : sizeof z;
        if (fwrite(z, 1, k, f) != k) return false;
        n -= k;
    }
    return true;
}

int el_gguf_w_begin(el_gguf_writer *w, const char *path, el_error *err) {
    if (w->status) return el_set_error(err, w->status, "%s", w->msg);
    if (w->f || w->finished) return el_set_error(err, EL_ERR_INVALID_ARG, "gguf writer: already begun");
    size_t pl = strlen(path);
    w->path = strdup(path);
    w->tmp_path = malloc(pl + 16);
    if (!w->path || !w->tmp_path) return el_set_error(err, EL_ERR_NOMEM, "out of memory");
    snprintf(w->tmp_path, pl + 16, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(w->tmp_path);
    if (fd < 0) {
        int e = errno;
        free(w->tmp_path);
        w->tmp_path = NULL;
        return el_set_error(err, EL_ERR_IO, "%s: cannot create a temporary file beside it: %s", path, strerror(e));
    }
    /* mkstemp makes the file 0600; a model file is readable like any other (umask applies) */
    mode_t um = umask(0);
    umask(um);
    (void)fchmod(fd, 0666 & ~um);
    w->f = fdopen(fd, "wb");
    if (!w->f) {
        close(fd);
        return io_fail(w, err, "fdopen");
    }
    setvbuf(w->f, NULL, _IOFBF, 1 << 20);
    layout(w);
    uint32_t version = 3;
    uint64_t nt = (uint64_t)w->n_t, nkv = (uint64_t)w->n_kv;
    bool ok = fwrite_all(w->f, "GGUF", 4) && fwrite_all(w->f, &version, 4) && fwrite_all(w->f, &nt, 8) &&
              fwrite_all(w->f, &nkv, 8) && fwrite_all(w->f, w->kv, w->kv_len);
    for (int64_t i = 0; ok && i < w->n_t; i++) {
        const wtensor *t = &w->t[i];
        uint64_t nl = strlen(t->name);
        uint32_t nd = (uint32_t)t->n_dims, ty = (uint32_t)t->type;
        ok = fwrite_all(w->f, &nl, 8) && fwrite_all(w->f, t->name, nl) && fwrite_all(w->f, &nd, 4) &&
             fwrite_all(w->f, t->ne, 8 * (size_t)t->n_dims) && fwrite_all(w->f, &ty, 4) && fwrite_all(w->f, &t->offset, 8);
    }
    uint64_t head = 24 + w->kv_len + infos_size(w);
    w->data_start = pad_to(head, w->alignment);
    if (ok) ok = write_zeros(w->f, w->data_start - head);
    if (!ok) return io_fail(w, err, "write");
    /* metadata is on disk now: drop the in-memory copy */
    free(w->kv);
    w->kv = NULL;
    w->kv_cap = 0;
    w->cur = 0;
    w->cur_written = 0;
    return 0;
}

/* Pads after a completed tensor and moves to the next (skipping empty ones cannot happen: nbytes > 0). */
static bool close_tensor(el_gguf_writer *w) {
    const wtensor *t = &w->t[w->cur];
    uint64_t end = t->offset + t->nbytes;
    if (!write_zeros(w->f, pad_to(end, w->alignment) - end)) return false;
    w->cur++;
    w->cur_written = 0;
    return true;
}

int el_gguf_w_tensor_data(el_gguf_writer *w, const void *data, size_t n, el_error *err) {
    if (w->status) return el_set_error(err, w->status, "%s", w->msg);
    if (!w->f) return el_set_error(err, EL_ERR_INVALID_ARG, "gguf writer: tensor data before el_gguf_w_begin");
    const uint8_t *p = data;
    while (n) {
        if (w->cur >= w->n_t) {
            fail(w, EL_ERR_INVALID_ARG, "gguf writer: %zu bytes of tensor data past the last tensor", n);
            return el_set_error(err, w->status, "%s", w->msg);
        }
        const wtensor *t = &w->t[w->cur];
        size_t k = t->nbytes - w->cur_written;
        if (k > n) k = n;
        if (!fwrite_all(w->f, p, k)) return io_fail(w, err, "write");
        w->cur_written += k;
        p += k;
        n -= k;
        if (w->cur_written == t->nbytes && !close_tensor(w)) return io_fail(w, err, "write");
    }
    return 0;
}

int el_gguf_w_finish(el_gguf_writer *w, el_error *err) {
    if (w->status) return el_set_error(err, w->status, "%s", w->msg);
    if (!w->f) return el_set_error(err, EL_ERR_INVALID_ARG, "gguf writer: finish before el_gguf_w_begin");
    if (w->cur < w->n_t) {
        fail(w, EL_ERR_INVALID_ARG, "gguf writer: tensor '%s' got %zu of %zu bytes", w->t[w->cur].name, w->cur_written,
             w->t[w->cur].nbytes);
        return el_set_error(err, w->status, "%s", w->msg);
    }
    if (fflush(w->f) != 0) return io_fail(w, err, "flush");
    if (fsync(fileno(w->f)) != 0) return io_fail(w, err, "fsync");
    FILE *f = w->f;
    w->f = NULL;
    if (fclose(f) != 0) return io_fail(w, err, "close");
    if (rename(w->tmp_path, w->path) != 0) {
        int e = errno;
        fail(w, EL_ERR_IO, "cannot rename %s to %s: %s", w->tmp_path, w->path, strerror(e));
        return el_set_error(err, EL_ERR_IO, "%s", w->msg);
    }
    w->finished = true;
    return 0;
}
