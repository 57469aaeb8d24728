/*
 * gguf.c — a validating reader of GGUF v2/v3 files (see gguf.h).
 *
 * Contract
 *   el_gguf_open() maps a file read-only (MAP_PRIVATE, PROT_READ) and owns
 *   the mapping until el_gguf_close() — only a regular file, opened without
 *   blocking (util/file.h: a FIFO, device or directory is refused by name); el_gguf_open_buffer() parses memory
 *   the caller owns and never copies it. Either way, parsing either succeeds
 *   completely or fails with a typed el_status whose message names the field
 *   (kv[i] 'key', tensor 'name', header field) and the offending value. A
 *   failure never crashes and never reads outside [base, base + size).
 *
 * Invariants after a successful open (so that no accessor re-checks):
 *   - every kv's key, and every string value (including each element of a
 *     string array), lies wholly inside the buffer;
 *   - every scalar value and every scalar-array payload (arr_n elements of
 *     el_gguf_vtype_size(arr_type) bytes) lies wholly inside the buffer;
 *     arrays never nest; keys are unique;
 *   - alignment is general.alignment (an integer, non-zero power of two,
 *     <= 2^31) or 32;
 *   - every tensor has 1 <= n_dims <= 4, 1 <= ne[j] (unused dims are 1),
 *     ne[0]*ne[1]*ne[2]*ne[3] fits int64, a known el_type, ne[0] a multiple
 *     of the type's block size, nbytes = el_row_size(type, ne[0]) * ne[1] *
 *     ne[2] * ne[3] without overflow, offset a multiple of the alignment,
 *     data = base + data_offset + offset with [data, data + nbytes) inside
 *     the buffer, no two tensors' data overlapping, and names are unique.
 *
 * Layout (all little-endian; the host must be little-endian too):
 *   "GGUF" u32 version | u64 n_tensors | u64 n_kv
 *   n_kv  x { str key | u32 vtype | value }     value of ARRAY: u32 type, u64 n, n values
 *   n_tensors x { str name | u32 n_dims | i64 ne[n_dims] | u32 type | u64 offset }
 *   padding to the alignment | tensor data (offsets relative to here)
 *   where str = u64 length + bytes (no NUL).
 *
 * Every multi-byte read from the buffer goes through memcpy, since nothing
 * in the file is aligned to its natural boundary. Counts are bounded by the
 * file size before anything is allocated for them, so memory use is linear
 * in the file size. Lookups by key / tensor name use open-addressing hash
 * tables built while parsing (they also catch duplicates).
 */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif
#include "package/gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <inttypes.h>
#include <math.h> /* isfinite (a macro: no libm needed) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "package/layout.h"
#include "package/quants.h"
#include "package/quants_blocks.h"
#include "package/types.h"
#include "util/error.h"
#include "util/file.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "gguf.c reads little-endian fields with memcpy; a big-endian host needs byte swapping"
#endif

#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_ALIGNMENT (UINT64_C(1) << 31)
/* Smallest possible encodings, used to reject absurd counts up front. */
#define GGUF_MIN_KV_BYTES 13     /* u64 key length + u32 type + 1-byte value */
#define GGUF_MIN_TENSOR_BYTES 32 /* u64 name length + u32 n_dims + i64 ne + u32 type + u64 offset */
#define GGUF_MAX_ITEMS UINT32_MAX /* hash slots hold index + 1 in a uint32_t */

/* Open-addressing hash table of item indices (slot = index + 1, 0 = empty).
 * Items are el_gguf_kv or el_gguf_tensor, both of which begin with their
 * el_str name, so one implementation serves both via a stride. */
typedef struct strmap {
    uint32_t *slot;
    size_t mask;
} strmap;

struct el_gguf {
    const uint8_t *base;
    size_t size;
    bool owns_map;
    uint32_t version;
    size_t alignment;
    uint64_t data_offset; /* start of the tensor data section */
    int64_t n_kv;
    el_gguf_kv *kv;
    int64_t n_tensors;
    el_gguf_tensor *tensors;
    strmap kv_map, tensor_map;
};

/* ---- small helpers ------------------------------------------------------ */

static const char *const k_vtype_names[EL_GGUF_TYPE_COUNT] = {
    "uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
    "bool", "string", "array", "uint64", "int64", "float64",
};
static const uint8_t k_vtype_sizes[EL_GGUF_TYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

size_t el_gguf_vtype_size(el_gguf_vtype t) {
    return (unsigned)t < EL_GGUF_TYPE_COUNT ? k_vtype_sizes[t] : 0;
}

const char *el_gguf_vtype_name(el_gguf_vtype t) {
    return (unsigned)t < EL_GGUF_TYPE_COUNT ? k_vtype_names[t] : "?";
}

bool el_str_eq(el_str s, const char *c) {
    if (!c) return false;
    size_t n = strlen(c);
    return s.len == n && (n == 0 || memcmp(s.ptr, c, n) == 0);
}

char *el_str_dup(el_str s) {
    if (s.len >= SIZE_MAX) return NULL;
    char *p = malloc((size_t)s.len + 1);
    if (!p) return NULL;
    if (s.len) memcpy(p, s.ptr, (size_t)s.len);
    p[s.len] = '\0';
    return p;
}

el_str el_gguf_str_next(const uint8_t **p) {
    el_str s;
    memcpy(&s.len, *p, sizeof s.len);
    s.ptr = (const char *)*p + sizeof s.len;
    *p += sizeof s.len + s.len;
    return s;
}

/* A printable, bounded copy of a name from the file for error messages:
 * non-ASCII and control bytes become '?', long names end in "...". */
static const char *printable(char *dst, size_t cap, el_str s) {
    size_t n = 0, max = cap - 4;
    for (uint64_t i = 0; i < s.len && n < max; i++) {
        unsigned char c = (unsigned char)s.ptr[i];
        dst[n++] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
    }
    if (s.len > max) { memcpy(dst + n, "...", 3); n += 3; }
    dst[n] = '\0';
    return dst;
}

static uint64_t hash_bytes(const char *p, uint64_t n) {
    uint64_t h = UINT64_C(14695981039346656037); /* FNV-1a */
    for (uint64_t i = 0; i < n; i++) h = (h ^ (unsigned char)p[i]) * UINT64_C(1099511628211);
    return h;
}

static bool map_init(strmap *m, uint64_t n) {
    size_t cap = 8;
    while (cap < 2 * n) cap *= 2; /* n <= UINT32_MAX, so no overflow on 64-bit */
    m->slot = calloc(cap, sizeof *m->slot);
    m->mask = cap - 1;
    return m->slot != NULL;
}

/* Index of the item named (p, n), or -1. */
static int64_t map_find(const strmap *m, const void *items, size_t stride, const char *p, uint64_t n) {
    if (!m->slot) return -1;
    for (size_t i = (size_t)hash_bytes(p, n) & m->mask;; i = (i + 1) & m->mask) {
        uint32_t v = m->slot[i];
        if (!v) return -1;
        const el_str *name = (const el_str *)((const char *)items + (size_t)(v - 1) * stride);
        if (name->len == n && (n == 0 || memcmp(name->ptr, p, (size_t)n) == 0)) return v - 1;
    }
}

/* Inserts item idx; returns -1, or the index of an item with the same name. */
static int64_t map_insert(strmap *m, const void *items, size_t stride, uint32_t idx) {
    const el_str *name = (const el_str *)((const char *)items + (size_t)idx * stride);
    int64_t prev = map_find(m, items, stride, name->ptr, name->len);
    if (prev >= 0) return prev;
    size_t i = (size_t)hash_bytes(name->ptr, name->len) & m->mask;
    while (m->slot[i]) i = (i + 1) & m->mask;
    m->slot[i] = idx + 1;
    return -1;
}

/* ---- bounded reads ------------------------------------------------------ */

typedef struct reader {
    const uint8_t *base;
    size_t size;
    size_t pos; /* always <= size */
    el_error *err;
} reader;

/* Ensures n more bytes exist at r->pos; `what` names the field. */
static el_status need(reader *r, uint64_t n, const char *what) {
    if (n > r->size - r->pos)
        return el_set_error(r->err, EL_ERR_TRUNCATED,
                            "%s: %" PRIu64 " bytes at offset %zu run past end of file (size %zu)",
                            what, n, r->pos, r->size);
    return EL_OK;
}

static el_status rd_u32(reader *r, uint32_t *v, const char *what) {
    el_status s = need(r, 4, what);
    if (s) return s;
    memcpy(v, r->base + r->pos, 4);
    r->pos += 4;
    return EL_OK;
}

static el_status rd_u64(reader *r, uint64_t *v, const char *what) {
    el_status s = need(r, 8, what);
    if (s) return s;
    memcpy(v, r->base + r->pos, 8);
    r->pos += 8;
    return EL_OK;
}

/* A length-prefixed string. A length beyond the whole file is absurd
 * (BAD_COUNT); one beyond what is left is truncation. */
static el_status rd_str(reader *r, el_str *out, const char *what) {
    uint64_t len;
    el_status s = rd_u64(r, &len, what);
    if (s) return s;
    if (len > r->size)
        return el_set_error(r->err, EL_ERR_BAD_COUNT,
                            "%s: string length %" PRIu64 " at offset %zu exceeds the file size (%zu)",
                            what, len, r->pos - 8, r->size);
    if ((s = need(r, len, what))) return s;
    if (out) {
        out->ptr = (const char *)r->base + r->pos;
        out->len = len;
    }
    r->pos += (size_t)len;
    return EL_OK;
}

/* ---- metadata ----------------------------------------------------------- */

/* Skips over an array value after its element type; fills kv->arr_*. */
static el_status rd_array(reader *r, el_gguf_kv *kv, const char *what) {
    char w[192];
    uint32_t at;
    uint64_t n;
    snprintf(w, sizeof w, "%s array element type", what);
    el_status s = rd_u32(r, &at, w);
    if (s) return s;
    if (at == EL_GGUF_ARRAY)
        return el_set_error(r->err, EL_ERR_BAD_VALUE, "%s: nested arrays are not supported", what);
    if (at >= EL_GGUF_TYPE_COUNT)
        return el_set_error(r->err, EL_ERR_BAD_VALUE, "%s: array element type %" PRIu32 " is not a GGUF type",
                            what, at);
    snprintf(w, sizeof w, "%s array length", what);
    if ((s = rd_u64(r, &n, w))) return s;
    kv->arr_type = (el_gguf_vtype)at;
    kv->arr_n = n;
    kv->data = r->base + r->pos;

    size_t esz = el_gguf_vtype_size(kv->arr_type);
    if (esz) {
        if (n > r->size / esz)
            return el_set_error(r->err, EL_ERR_BAD_COUNT,
                                "%s: array of %" PRIu64 " %s values is larger than the file (size %zu)",
                                what, n, el_gguf_vtype_name(kv->arr_type), r->size);
        snprintf(w, sizeof w, "%s array data", what);
        if ((s = need(r, n * esz, w))) return s;
        r->pos += (size_t)(n * esz);
        return EL_OK;
    }
    /* strings: each needs at least its 8-byte length */
    if (n > r->size / 8)
        return el_set_error(r->err, EL_ERR_BAD_COUNT,
                            "%s: array of %" PRIu64 " strings is larger than the file (size %zu)",
                            what, n, r->size);
    for (uint64_t j = 0; j < n; j++) {
        uint64_t len = 0;
        size_t left = r->size - r->pos;
        if (left >= 8) memcpy(&len, r->base + r->pos, 8);
        if (left < 8 || len > left - 8) { /* slow path: let rd_str word the error */
            snprintf(w, sizeof w, "%s[%" PRIu64 "]", what, j);
            s = rd_str(r, NULL, w);
            return s ? s : el_set_error(r->err, EL_ERR_INTERNAL, "%s: string check disagrees", w);
        }
        r->pos += 8 + (size_t)len;
    }
    return EL_OK;
}

static el_status rd_kv(reader *r, el_gguf_kv *kv, int64_t i) {
    char what[160], name[96];
    snprintf(what, sizeof what, "kv[%" PRId64 "] key", i);
    el_status s = rd_str(r, &kv->key, what);
    if (s) return s;
    snprintf(what, sizeof what, "kv[%" PRId64 "] '%s'", i, printable(name, sizeof name, kv->key));

    uint32_t t;
    char w[192];
    snprintf(w, sizeof w, "%s value type", what);
    if ((s = rd_u32(r, &t, w))) return s;
    if (t >= EL_GGUF_TYPE_COUNT)
        return el_set_error(r->err, EL_ERR_BAD_VALUE, "%s: value type %" PRIu32 " is not a GGUF type", what, t);
    kv->type = (el_gguf_vtype)t;
    kv->arr_type = 0;
    kv->arr_n = 0;
    kv->data = r->base + r->pos;
    if (kv->type == EL_GGUF_ARRAY) return rd_array(r, kv, what);
    if (kv->type == EL_GGUF_STRING) return rd_str(r, NULL, what);
    if ((s = need(r, el_gguf_vtype_size(kv->type), what))) return s;
    r->pos += el_gguf_vtype_size(kv->type);
    return EL_OK;
}

/* Any integer scalar as int64 / uint64; false for other types or out of range. */
static bool elem_int(const uint8_t *p, el_gguf_vtype t, int64_t *i, uint64_t *u, bool *is_signed) {
    union { uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32; uint64_t u64; int64_t i64; } v;
    size_t n = el_gguf_vtype_size(t);
    if (n) memcpy(&v, p, n);
    switch (t) {
    case EL_GGUF_UINT8: *u = v.u8; *is_signed = false; return true;
    case EL_GGUF_UINT16: *u = v.u16; *is_signed = false; return true;
    case EL_GGUF_UINT32: *u = v.u32; *is_signed = false; return true;
    case EL_GGUF_UINT64: *u = v.u64; *is_signed = false; return true;
    case EL_GGUF_INT8: *i = v.i8; *is_signed = true; return true;
    case EL_GGUF_INT16: *i = v.i16; *is_signed = true; return true;
    case EL_GGUF_INT32: *i = v.i32; *is_signed = true; return true;
    case EL_GGUF_INT64: *i = v.i64; *is_signed = true; return true;
    default: return false;
    }
}

/* A scalar element at p of integer type t, as int64 (false if it does not fit). */
static bool elem_i64(const uint8_t *p, el_gguf_vtype t, int64_t *out) {
    int64_t i = 0;
    uint64_t u = 0;
    bool sgn;
    if (!elem_int(p, t, &i, &u, &sgn)) return false;
    if (!sgn) {
        if (u > INT64_MAX) return false;
        i = (int64_t)u;
    }
    *out = i;
    return true;
}

static bool elem_f64(const uint8_t *p, el_gguf_vtype t, double *out) {
    if (t == EL_GGUF_FLOAT32) {
        float f;
        memcpy(&f, p, 4);
        *out = f;
        return true;
    }
    if (t == EL_GGUF_FLOAT64) {
        memcpy(out, p, 8);
        return true;
    }
    return false;
}

/* double -> float without the undefined behaviour of an out-of-range cast. */
static bool f64_to_f32(double d, float *out) {
    if (isfinite(d) && (d > FLT_MAX || d < -FLT_MAX)) return false;
    *out = (float)d;
    return true;
}

static el_status parse_alignment(el_gguf *g, el_error *err) {
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    const el_gguf_kv *kv = el_gguf_find(g, "general.alignment");
    if (!kv) return EL_OK;
    int64_t a;
    if (!elem_i64(kv->data, kv->type, &a))
        return el_set_error(err, EL_ERR_BAD_VALUE, "general.alignment: must be an integer (uint32), not %s",
                            el_gguf_vtype_name(kv->type));
    if (a <= 0 || (uint64_t)a > GGUF_MAX_ALIGNMENT || (a & (a - 1)) != 0)
        return el_set_error(err, EL_ERR_BAD_VALUE,
                            "general.alignment: %" PRId64 " is not a power of two in 1..2^31", a);
    g->alignment = (size_t)a;
    return EL_OK;
}

/* ---- tensors ------------------------------------------------------------ */

/* Reads one tensor info and checks everything that does not depend on where
 * the data section starts: dims, shape, type, block multiple, byte size. */
static el_status rd_tensor(reader *r, el_gguf_tensor *t, int64_t i) {
    char what[160], name[96];
    snprintf(what, sizeof what, "tensor[%" PRId64 "] name", i);
    el_status s = rd_str(r, &t->name, what);
    if (s) return s;
    printable(name, sizeof name, t->name);
    snprintf(what, sizeof what, "tensor '%s'", name);

    char w[192];
    uint32_t nd;
    snprintf(w, sizeof w, "%s n_dims", what);
    if ((s = rd_u32(r, &nd, w))) return s;
    if (nd < 1 || nd > 4)
        return el_set_error(r->err, EL_ERR_BAD_TENSOR, "%s: n_dims %" PRIu32 " is not in 1..4", what, nd);
    t->n_dims = (int)nd;
    int64_t nel = 1;
    for (int j = 0; j < 4; j++) {
        t->ne[j] = 1;
        if (j >= t->n_dims) continue;
        snprintf(w, sizeof w, "%s ne[%d]", what, j);
        uint64_t ne;
        if ((s = rd_u64(r, &ne, w))) return s;
        t->ne[j] = (int64_t)ne;
        if (t->ne[j] <= 0)
            return el_set_error(r->err, EL_ERR_BAD_TENSOR, "%s: ne[%d] = %" PRId64 " is not positive", what, j,
                                t->ne[j]);
        if (nel > INT64_MAX / t->ne[j])
            return el_set_error(r->err, EL_ERR_BAD_TENSOR, "%s: element count overflows int64 at ne[%d] = %" PRId64,
                                what, j, t->ne[j]);
        nel *= t->ne[j];
    }

    uint32_t type;
    uint64_t off;
    snprintf(w, sizeof w, "%s type", what);
    if ((s = rd_u32(r, &type, w))) return s;
    snprintf(w, sizeof w, "%s offset", what);
    if ((s = rd_u64(r, &off, w))) return s;
    t->offset = off;
    t->data = NULL;

    const el_type_info *ti = type <= INT32_MAX ? el_type_get((int)type) : NULL;
    if (!ti) return el_set_error(r->err, EL_ERR_BAD_TYPE, "%s: unknown ggml type id %" PRIu32, what, type);
    t->type = (int)type;
    /* a weight layout (layout.h) holds whole groups of 16 rows of a matrix */
    if (el_layout_of_type(t->type) != EL_LAYOUT_FLAT &&
        (t->n_dims != 2 || t->ne[1] % EL_LAYOUT_R16_ROWS || t->ne[1] <= 0))
        return el_set_error(r->err, EL_ERR_BAD_TENSOR,
                            "%s: type %s needs a matrix of whole groups of %d rows, not %d dims of ne[1] = %" PRId64,
                            what, ti->name, EL_LAYOUT_R16_ROWS, t->n_dims, t->ne[1]);
    if (t->ne[0] % ti->blck_size)
        return el_set_error(r->err, EL_ERR_BAD_TENSOR,
                            "%s: row length ne[0] = %" PRId64 " is not a multiple of %s's block size %d", what,
                            t->ne[0], ti->name, ti->blck_size);
    uint64_t blocks = (uint64_t)(t->ne[0] / ti->blck_size);
    if (blocks > SIZE_MAX / ti->type_size)
        return el_set_error(r->err, EL_ERR_BAD_TENSOR, "%s: row size overflows", what);
    size_t nbytes = el_row_size((el_type)type, t->ne[0]);
    for (int j = 1; j < 4; j++) {
        if ((uint64_t)t->ne[j] > SIZE_MAX / nbytes)
            return el_set_error(r->err, EL_ERR_BAD_TENSOR, "%s: byte size overflows at ne[%d] = %" PRId64, what, j,
                                t->ne[j]);
        nbytes *= (size_t)t->ne[j];
    }
    t->nbytes = nbytes;
    return EL_OK;
}

el_status el_gguf_check_values(const el_gguf_tensor *t, el_error *err) {
    if (t->type != EL_TYPE_MXFP4) return EL_OK;
    const int64_t nb = (int64_t)(t->nbytes / sizeof(block_mxfp4));
    const int64_t bad = el_mxfp4_find_bad_exponent(t->data, nb);
    if (bad < 0) return EL_OK;
    const int64_t per_row = t->ne[0] / EL_QK_MXFP4;
    return el_set_error(err, EL_ERR_BAD_TENSOR,
                        "tensor '%.*s': MXFP4 block %" PRId64 " (row %" PRId64 ") has exponent 0xFF (NaN in E8M0)",
                        (int)(t->name.len > 200 ? 200 : t->name.len), t->name.ptr, bad, bad / per_row);
}

static int cmp_by_offset(const void *a, const void *b) {
    const el_gguf_tensor *x = *(const el_gguf_tensor *const *)a, *y = *(const el_gguf_tensor *const *)b;
    return (x->offset > y->offset) - (x->offset < y->offset);
}

/* Places tensor data: alignment, bounds, then overlap (on offset order). */
static el_status place_tensors(el_gguf *g, el_error *err) {
    char name[96], other[96];
    for (int64_t i = 0; i < g->n_tensors; i++) {
        el_gguf_tensor *t = &g->tensors[i];
        printable(name, sizeof name, t->name);
        if (t->offset % g->alignment)
            return el_set_error(err, EL_ERR_BAD_TENSOR,
                                "tensor '%s': offset %" PRIu64 " is not a multiple of the alignment %zu", name,
                                t->offset, g->alignment);
        /* data_offset <= size is not guaranteed (padding may be missing) */
        uint64_t room = g->data_offset <= g->size ? g->size - g->data_offset : 0;
        if (t->offset > room || t->nbytes > room - t->offset)
            return el_set_error(err, EL_ERR_BAD_TENSOR,
                                "tensor '%s': data [offset %" PRIu64 ", %zu bytes] runs past end of file (size "
                                "%zu, data section at %" PRIu64 ")",
                                name, t->offset, t->nbytes, g->size, g->data_offset);
        t->data = g->base + g->data_offset + t->offset;
    }
    if (g->n_tensors < 2) return EL_OK;
    el_gguf_tensor **order = malloc((size_t)g->n_tensors * sizeof *order);
    if (!order) return el_set_error(err, EL_ERR_NOMEM, "tensor index: out of memory");
    for (int64_t i = 0; i < g->n_tensors; i++) order[i] = &g->tensors[i];
    qsort(order, (size_t)g->n_tensors, sizeof *order, cmp_by_offset);
    el_status s = EL_OK;
    for (int64_t i = 1; i < g->n_tensors && !s; i++) {
        const el_gguf_tensor *a = order[i - 1], *b = order[i];
        if (a->offset + a->nbytes > b->offset) /* both in file: no overflow */
            s = el_set_error(err, EL_ERR_BAD_TENSOR,
                             "tensor '%s': data [offset %" PRIu64 ", %zu bytes] overlaps tensor '%s' [offset %" PRIu64
                             ", %zu bytes]",
                             printable(name, sizeof name, b->name), b->offset, b->nbytes,
                             printable(other, sizeof other, a->name), a->offset, a->nbytes);
    }
    free(order);
    return s;
}

/* ---- open / close ------------------------------------------------------- */

static el_status check_count(uint64_t n, uint64_t min_bytes, size_t size, const char *field, el_error *err) {
    if (n > size / min_bytes || n > GGUF_MAX_ITEMS)
        return el_set_error(err, EL_ERR_BAD_COUNT,
                            "header %s = %" PRIu64 " is absurd: that many need at least %" PRIu64
                            " bytes each and the file has %zu",
                            field, n, min_bytes, size);
    return EL_OK;
}

static el_status parse(el_gguf *g, el_error *err) {
    reader r = {g->base, g->size, 0, err};
    static const char magic[4] = {'G', 'G', 'U', 'F'};
    size_t head = g->size < 4 ? g->size : 4;
    if (memcmp(g->base, magic, head) != 0)
        return el_set_error(err, EL_ERR_BAD_MAGIC, "magic: not a GGUF file (first bytes %02x %02x %02x %02x)",
                            g->base[0], head > 1 ? g->base[1] : 0, head > 2 ? g->base[2] : 0,
                            head > 3 ? g->base[3] : 0);
    el_status s = need(&r, 4, "magic");
    if (s) return s;
    r.pos = 4;

    uint32_t v;
    if ((s = rd_u32(&r, &v, "header version"))) return s;
    g->version = v;
    if (v == 1)
        return el_set_error(err, EL_ERR_BAD_VERSION, "header version: GGUF v1 is not supported (need v2 or v3)");
    if (v == 0x02000000u || v == 0x03000000u)
        return el_set_error(err, EL_ERR_BAD_VERSION,
                            "header version: 0x%08" PRIx32 " looks like a big-endian GGUF, which is not supported", v);
    if (v != 2 && v != 3)
        return el_set_error(err, EL_ERR_BAD_VERSION, "header version: %" PRIu32 " is not 2 or 3", v);

    uint64_t n_tensors, n_kv;
    if ((s = rd_u64(&r, &n_tensors, "header n_tensors"))) return s;
    if ((s = rd_u64(&r, &n_kv, "header n_kv"))) return s;
    if ((s = check_count(n_tensors, GGUF_MIN_TENSOR_BYTES, g->size, "n_tensors", err))) return s;
    if ((s = check_count(n_kv, GGUF_MIN_KV_BYTES, g->size, "n_kv", err))) return s;

    g->kv = calloc(n_kv ? n_kv : 1, sizeof *g->kv);
    g->tensors = calloc(n_tensors ? n_tensors : 1, sizeof *g->tensors);
    if (!g->kv || !g->tensors || !map_init(&g->kv_map, n_kv) || !map_init(&g->tensor_map, n_tensors))
        return el_set_error(err, EL_ERR_NOMEM, "metadata tables for %" PRIu64 " kvs and %" PRIu64 " tensors: out of memory",
                            n_kv, n_tensors);

    char name[96];
    for (uint64_t i = 0; i < n_kv; i++) {
        if ((s = rd_kv(&r, &g->kv[i], (int64_t)i))) return s;
        g->n_kv = (int64_t)i + 1;
        int64_t prev = map_insert(&g->kv_map, g->kv, sizeof *g->kv, (uint32_t)i);
        if (prev >= 0)
            return el_set_error(err, EL_ERR_BAD_VALUE, "kv[%" PRIu64 "] '%s': duplicate key (first at kv[%" PRId64 "])",
                                i, printable(name, sizeof name, g->kv[i].key), prev);
    }
    if ((s = parse_alignment(g, err))) return s;

    for (uint64_t i = 0; i < n_tensors; i++) {
        if ((s = rd_tensor(&r, &g->tensors[i], (int64_t)i))) return s;
        g->n_tensors = (int64_t)i + 1;
        int64_t prev = map_insert(&g->tensor_map, g->tensors, sizeof *g->tensors, (uint32_t)i);
        if (prev >= 0)
            return el_set_error(err, EL_ERR_BAD_TENSOR, "tensor '%s': duplicate tensor name (tensor[%" PRIu64
                                "] and tensor[%" PRId64 "])",
                                printable(name, sizeof name, g->tensors[i].name), i, prev);
    }
    /* r.pos <= size, alignment <= 2^31: no overflow in 64 bits */
    g->data_offset = ((uint64_t)r.pos + g->alignment - 1) / g->alignment * g->alignment;
    return place_tensors(g, err);
}

void el_gguf_close(el_gguf *g) {
    if (!g) return;
    if (g->owns_map && g->base) munmap((void *)g->base, g->size);
    free(g->kv);
    free(g->tensors);
    free(g->kv_map.slot);
    free(g->tensor_map.slot);
    free(g);
}

/* Takes ownership of the mapping (if owns_map) whether or not parsing succeeds. */
static el_gguf *open_mem(const void *buf, size_t size, bool owns_map, el_error *err) {
    el_gguf *g = calloc(1, sizeof *g);
    if (!g) {
        if (owns_map) munmap((void *)buf, size);
        el_set_error(err, EL_ERR_NOMEM, "gguf handle: out of memory");
        return NULL;
    }
    g->base = buf;
    g->size = size;
    g->owns_map = owns_map;
    if (parse(g, err) != EL_OK) {
        el_gguf_close(g);
        return NULL;
    }
    if (err) {
        err->code = EL_OK;
        err->msg[0] = '\0';
    }
    return g;
}

el_gguf *el_gguf_open_buffer(const void *buf, size_t size, el_error *err) {
    if (size == 0) {
        el_set_error(err, EL_ERR_TRUNCATED, "magic: empty buffer");
        return NULL;
    }
    if (!buf) {
        el_set_error(err, EL_ERR_INVALID_ARG, "el_gguf_open_buffer: NULL buffer of %zu bytes", size);
        return NULL;
    }
    return open_mem(buf, size, false, err);
}

el_gguf *el_gguf_open(const char *path, el_error *err) {
    if (!path) {
        el_set_error(err, EL_ERR_INVALID_ARG, "el_gguf_open: NULL path");
        return NULL;
    }
    struct stat st;
    char why[sizeof err->msg];
    int fd = el_open_regular(path, &st, why, sizeof why); /* regular files only; a FIFO cannot block */
    if (fd < 0) {
        el_set_error(err, EL_ERR_IO, "%s", why);
        return NULL;
    }
    if (st.st_size == 0) {
        el_set_error(err, EL_ERR_TRUNCATED, "%s: empty file", path);
        close(fd);
        return NULL;
    }
    if ((uint64_t)st.st_size > SIZE_MAX) {
        el_set_error(err, EL_ERR_IO, "%s: file of %lld bytes does not fit the address space", path,
                     (long long)st.st_size);
        close(fd);
        return NULL;
    }
    size_t size = (size_t)st.st_size;
    void *p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) {
        el_set_error(err, EL_ERR_IO, "%s: mmap of %zu bytes: %s", path, size, strerror(e));
        return NULL;
    }
    return open_mem(p, size, true, err);
}

/* ---- accessors ---------------------------------------------------------- */

uint32_t el_gguf_version(const el_gguf *g) { return g ? g->version : 0; }
size_t el_gguf_alignment(const el_gguf *g) { return g ? g->alignment : 0; }
size_t el_gguf_file_size(const el_gguf *g) { return g ? g->size : 0; }
const uint8_t *el_gguf_base(const el_gguf *g) { return g ? g->base : NULL; }

int64_t el_gguf_n_kv(const el_gguf *g) { return g ? g->n_kv : 0; }

const el_gguf_kv *el_gguf_kv_at(const el_gguf *g, int64_t i) {
    return g && i >= 0 && i < g->n_kv ? &g->kv[i] : NULL;
}

const el_gguf_kv *el_gguf_find(const el_gguf *g, const char *key) {
    if (!g || !key) return NULL;
    int64_t i = map_find(&g->kv_map, g->kv, sizeof *g->kv, key, strlen(key));
    return i >= 0 ? &g->kv[i] : NULL;
}

int64_t el_gguf_n_tensors(const el_gguf *g) { return g ? g->n_tensors : 0; }

const el_gguf_tensor *el_gguf_tensor_at(const el_gguf *g, int64_t i) {
    return g && i >= 0 && i < g->n_tensors ? &g->tensors[i] : NULL;
}

const el_gguf_tensor *el_gguf_find_tensor(const el_gguf *g, const char *name) {
    if (!g || !name) return NULL;
    int64_t i = map_find(&g->tensor_map, g->tensors, sizeof *g->tensors, name, strlen(name));
    return i >= 0 ? &g->tensors[i] : NULL;
}

/* ---- typed getters ------------------------------------------------------ */

bool el_gguf_get_i64(const el_gguf *g, const char *key, int64_t *out) {
    const el_gguf_kv *kv = el_gguf_find(g, key);
    int64_t v;
    if (!kv || !elem_i64(kv->data, kv->type, &v)) return false;
    if (out) *out = v;
    return true;
}

bool el_gguf_get_u32(const el_gguf *g, const char *key, uint32_t *out) {
    const el_gguf_kv *kv = el_gguf_find(g, key);
    int64_t i = 0;
    uint64_t u = 0;
    bool sgn;
    if (!kv || !elem_int(kv->data, kv->type, &i, &u, &sgn)) return false;
    if (sgn) {
        if (i < 0) return false;
        u = (uint64_t)i;
    }
    if (u > UINT32_MAX) return false;
    if (out) *out = (uint32_t)u;
    return true;
}

bool el_gguf_get_f32(const el_gguf *g, const char *key, float *out) {
    const el_gguf_kv *kv = el_gguf_find(g, key);
    double d;
    float f;
    if (!kv || !elem_f64(kv->data, kv->type, &d) || !f64_to_f32(d, &f)) return false;
    if (out) *out = f;
    return true;
}

bool el_gguf_get_bool(const el_gguf *g, const char *key, bool *out) {
    const el_gguf_kv *kv = el_gguf_find(g, key);
    if (!kv || kv->type != EL_GGUF_BOOL) return false;
    if (out) *out = kv->data[0] != 0;
    return true;
}

bool el_gguf_get_str(const el_gguf *g, const char *key, el_str *out) {
    const el_gguf_kv *kv = el_gguf_find(g, key);
    if (!kv || kv->type != EL_GGUF_STRING) return false;
    const uint8_t *p = kv->data;
    el_str s = el_gguf_str_next(&p);
    if (out) *out = s;
    return true;
}

bool el_gguf_get_arr(const el_gguf *g, const char *key, el_gguf_vtype *type, uint64_t *n, const uint8_t **data) {
    const el_gguf_kv *kv = el_gguf_find(g, key);
    if (!kv || kv->type != EL_GGUF_ARRAY) return false;
    if (type) *type = kv->arr_type;
    if (n) *n = kv->arr_n;
    if (data) *data = kv->data;
    return true;
}

/* Element i of a scalar array, or NULL. */
static const uint8_t *arr_elem(const el_gguf_kv *kv, uint64_t i) {
    if (!kv || kv->type != EL_GGUF_ARRAY || i >= kv->arr_n) return NULL;
    size_t esz = el_gguf_vtype_size(kv->arr_type);
    return esz ? kv->data + i * esz : NULL;
}

bool el_gguf_arr_f32(const el_gguf_kv *kv, uint64_t i, float *out) {
    const uint8_t *p = arr_elem(kv, i);
    if (!p) return false;
    double d;
    int64_t si = 0;
    uint64_t u = 0;
    bool sgn;
    float f;
    if (elem_f64(p, kv->arr_type, &d)) {
        if (!f64_to_f32(d, &f)) return false;
    } else if (elem_int(p, kv->arr_type, &si, &u, &sgn)) {
        f = sgn ? (float)si : (float)u;
    } else {
        return false; /* bool */
    }
    if (out) *out = f;
    return true;
}

bool el_gguf_arr_i64(const el_gguf_kv *kv, uint64_t i, int64_t *out) {
    const uint8_t *p = arr_elem(kv, i);
    if (!p) return false;
    double d;
    int64_t v;
    if (elem_f64(p, kv->arr_type, &d)) {
        /* integral floats in range only; -2^63 <= d < 2^63 */
        if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0)) return false;
        v = (int64_t)d;
        if ((double)v != d) return false; /* not integral */
    } else if (!elem_i64(p, kv->arr_type, &v)) {
        return false;
    }
    if (out) *out = v;
    return true;
}
