/*
 * requantize.c — GGUF → GGUF at another file type (see requantize.h).
 *
 * The output's layout is llama-quantize's, so for the same input and type the
 * file is byte for byte what llama.cpp writes: metadata copied in order with
 * split.* keys dropped and general.quantization_version, general.file_type
 * moved to the end (gguf_set_val removes and appends), tensors in the order
 * of llama.cpp's map of weights (by layer number, tensors outside the layers
 * first, then by name), data aligned to 32 bytes unless
 * the file says otherwise.
 */
#include "package/requantize.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "package/gguf.h"
#include "package/gguf_write.h"
#include "package/layout.h"
#include "package/quants.h"
#include "package/types.h"
#include "util/error.h"

#define RQ_MAX_THREADS 16
#define RQ_CHUNK_ELEMS (1 << 22) /* floats converted per chunk (16 MiB) */

el_requant_params el_requant_default_params(void) {
    el_requant_params p;
    memset(&p, 0, sizeof p);
    p.ftype = EL_FTYPE_Q4_K_M;
    return p;
}

static bool key_is(el_str k, const char *s) { return el_str_eq(k, s); }

static bool is_float_type(int t) { return t == EL_TYPE_F32 || t == EL_TYPE_F16 || t == EL_TYPE_BF16; }

/* The block format of a tensor's rows: a layout's base type, else its own. */
static int flat_type(int t) {
    const el_layout l = el_layout_of_type(t);
    return l ? el_layout_base(l) : t;
}

/* One metadata pair → the writer (same key, type and value). */
static int copy_kv(el_gguf_writer *w, const el_gguf_kv *kv, el_error *err) {
    char *key = el_str_dup(kv->key);
    if (!key) return el_set_error(err, EL_ERR_NOMEM, "out of memory");
    int rc = 0;
    const uint8_t *d = kv->data;
    switch (kv->type) {
    case EL_GGUF_UINT8: rc = el_gguf_w_u8(w, key, d[0]); break;
    case EL_GGUF_INT8: rc = el_gguf_w_i8(w, key, (int8_t)d[0]); break;
    case EL_GGUF_UINT16: { uint16_t v; memcpy(&v, d, 2); rc = el_gguf_w_u16(w, key, v); break; }
    case EL_GGUF_INT16: { int16_t v; memcpy(&v, d, 2); rc = el_gguf_w_i16(w, key, v); break; }
    case EL_GGUF_UINT32: { uint32_t v; memcpy(&v, d, 4); rc = el_gguf_w_u32(w, key, v); break; }
    case EL_GGUF_INT32: { int32_t v; memcpy(&v, d, 4); rc = el_gguf_w_i32(w, key, v); break; }
    case EL_GGUF_FLOAT32: { float v; memcpy(&v, d, 4); rc = el_gguf_w_f32(w, key, v); break; }
    case EL_GGUF_BOOL: rc = el_gguf_w_bool(w, key, d[0] != 0); break;
    case EL_GGUF_UINT64: { uint64_t v; memcpy(&v, d, 8); rc = el_gguf_w_u64(w, key, v); break; }
    case EL_GGUF_INT64: { int64_t v; memcpy(&v, d, 8); rc = el_gguf_w_i64(w, key, v); break; }
    case EL_GGUF_FLOAT64: { double v; memcpy(&v, d, 8); rc = el_gguf_w_f64(w, key, v); break; }
    case EL_GGUF_STRING: {
        const uint8_t *p = d;
        el_str s = el_gguf_str_next(&p);
        rc = el_gguf_w_strn(w, key, s.ptr, (size_t)s.len);
        break;
    }
    case EL_GGUF_ARRAY:
        if (kv->arr_type == EL_GGUF_STRING) {
            const char **strs = malloc(sizeof(char *) * (kv->arr_n ? kv->arr_n : 1));
            size_t *lens = malloc(sizeof(size_t) * (kv->arr_n ? kv->arr_n : 1));
            if (!strs || !lens) {
                free(strs);
                free(lens);
                rc = el_set_error(err, EL_ERR_NOMEM, "out of memory");
                break;
            }
            const uint8_t *p = d;
            for (uint64_t i = 0; i < kv->arr_n; i++) {
                el_str s = el_gguf_str_next(&p);
                strs[i] = s.ptr;
                lens[i] = (size_t)s.len;
            }
            rc = el_gguf_w_arr_str(w, key, strs, lens, kv->arr_n);
            free(strs);
            free(lens);
        } else if (el_gguf_vtype_size(kv->arr_type) > 0) {
            rc = el_gguf_w_arr(w, key, kv->arr_type, d, kv->arr_n);
        } else {
            rc = el_set_error(err, EL_ERR_UNSUPPORTED, "metadata %s: an array of %s is not supported", key,
                              el_gguf_vtype_name(kv->arr_type));
        }
        break;
    default: rc = el_set_error(err, EL_ERR_BAD_VALUE, "metadata %s: unknown value type %d", key, (int)kv->type);
    }
    if (rc && !err->code) el_set_error(err, rc, "metadata %s: %s", key, el_gguf_w_error(w));
    free(key);
    return rc ? (int)(err->code ? err->code : (el_status)rc) : 0;
}

/* The model facts el_quant_plan needs, from the metadata. */
static int read_qmodel(const el_gguf *g, el_qmodel *qm, char *arch, size_t cap, el_error *err) {
    el_str a;
    if (!el_gguf_get_str(g, "general.architecture", &a))
        return el_set_error(err, EL_ERR_MISSING, "general.architecture is missing");
    if (a.len + 1 > cap) return el_set_error(err, EL_ERR_BAD_VALUE, "general.architecture is too long");
    memcpy(arch, a.ptr, (size_t)a.len);
    arch[a.len] = 0;
    char key[160];
    uint32_t v;
    memset(qm, 0, sizeof *qm);
    qm->arch = arch;
    snprintf(key, sizeof key, "%s.block_count", arch);
    if (!el_gguf_get_u32(g, key, &v) || v > 100000) return el_set_error(err, EL_ERR_MISSING, "%s is missing or absurd", key);
    qm->n_layer = (int)v;
    snprintf(key, sizeof key, "%s.attention.head_count", arch);
    qm->n_head = el_gguf_get_u32(g, key, &v) && v <= 100000 ? (int)v : 0;
    snprintf(key, sizeof key, "%s.attention.head_count_kv", arch);
    qm->n_head_kv = el_gguf_get_u32(g, key, &v) && v <= 100000 ? (int)v : qm->n_head;
    snprintf(key, sizeof key, "%s.expert_count", arch);
    qm->n_expert = el_gguf_get_u32(g, key, &v) && v <= 100000 ? (int)v : 0;
    return 0;
}

/* ---- converting one tensor's rows, split across threads ------------------- */

typedef struct rq_job {
    const el_gguf_tensor *t;
    el_type to;
    int64_t r0, nr; /* rows of the tensor this job converts */
    float *fbuf;    /* nr rows of floats */
    uint8_t *out;   /* nr rows of the target type */
    size_t rc;
} rq_job;

static void *rq_worker(void *arg) {
    rq_job *j = arg;
    const el_gguf_tensor *t = j->t;
    const int64_t ne0 = t->ne[0];
    const el_type_info *ti = el_type_get(t->type);
    const size_t in_row = el_row_size((el_type)t->type, ne0);
    const uint8_t *src = (const uint8_t *)t->data + (size_t)j->r0 * in_row;
    ti->to_float(src, j->fbuf, j->nr * ne0);
    j->rc = 1;
    switch (j->to) {
    case EL_TYPE_F32: memcpy(j->out, j->fbuf, sizeof(float) * (size_t)(j->nr * ne0)); break;
    case EL_TYPE_F16: el_quant_f16(j->fbuf, j->out, j->nr * ne0); break;
    case EL_TYPE_BF16: el_quant_bf16(j->fbuf, j->out, j->nr * ne0); break;
    default: j->rc = el_quantize_rows(j->to, j->fbuf, j->out, j->nr, ne0);
    }
    return NULL;
}

static int convert_rows(const el_gguf_tensor *t, el_type to, int64_t r0, int64_t nr, float *fbuf, uint8_t *out,
                        int n_threads, el_error *err) {
    rq_job jobs[RQ_MAX_THREADS];
    pthread_t th[RQ_MAX_THREADS];
    bool started[RQ_MAX_THREADS] = {false};
    int nt = n_threads < nr ? n_threads : (int)nr;
    if (nt < 1) nt = 1;
    const int64_t ne0 = t->ne[0];
    const size_t out_row = el_row_size(to, ne0);
    for (int k = 0; k < nt; k++) {
        const int64_t a = nr * k / nt, b = nr * (k + 1) / nt;
        jobs[k] = (rq_job){.t = t, .to = to, .r0 = r0 + a, .nr = b - a, .fbuf = fbuf + a * ne0,
                           .out = out + (size_t)a * out_row, .rc = 1};
    }
    for (int k = 1; k < nt; k++) started[k] = pthread_create(&th[k], NULL, rq_worker, &jobs[k]) == 0;
    rq_worker(&jobs[0]);
    for (int k = 1; k < nt; k++) {
        if (started[k]) pthread_join(th[k], NULL);
        else rq_worker(&jobs[k]);
    }
    for (int k = 0; k < nt; k++)
        if (jobs[k].rc == 0)
            return el_set_error(err, EL_ERR_BAD_VALUE,
                                "%.*s: cannot be represented as %s (a NaN or infinity, or a value or block scale "
                                "beyond half precision)",
                                (int)t->name.len, t->name.ptr, el_type_name(to));
    return 0;
}

/* ---- the file ------------------------------------------------------------- */

static const el_gguf *g_sort_src; /* qsort has no context argument; el_requantize is not reentrant for this */
static pthread_mutex_t g_sort_lock = PTHREAD_MUTEX_INITIALIZER;

/* Layer number of "blk.N.…", -1 for other names (sscanf("blk.%d.") as llama.cpp's comparer). */
static long name_layer(el_str n) {
    if (n.len < 5 || memcmp(n.ptr, "blk.", 4) != 0) return -1;
    uint64_t i = 4;
    bool neg = false;
    if (i < n.len && (n.ptr[i] == '-' || n.ptr[i] == '+')) neg = n.ptr[i++] == '-';
    if (i >= n.len || n.ptr[i] < '0' || n.ptr[i] > '9') return -1;
    long v = 0;
    for (; i < n.len && n.ptr[i] >= '0' && n.ptr[i] <= '9'; i++) v = v < 100000000 ? v * 10 + (n.ptr[i] - '0') : v;
    return neg ? -v : v;
}

/* llama.cpp's weight_name_comparer: by layer number (non-layer tensors first), then by name. */
static int cmp_name(const void *a, const void *b) {
    const el_gguf_tensor *x = el_gguf_tensor_at(g_sort_src, *(const int64_t *)a);
    const el_gguf_tensor *y = el_gguf_tensor_at(g_sort_src, *(const int64_t *)b);
    const long lx = name_layer(x->name), ly = name_layer(y->name);
    if (lx != ly) return lx < ly ? -1 : 1;
    const uint64_t n = x->name.len < y->name.len ? x->name.len : y->name.len;
    const int c = memcmp(x->name.ptr, y->name.ptr, (size_t)n);
    if (c) return c;
    return x->name.len < y->name.len ? -1 : x->name.len > y->name.len;
}

int el_requantize(const char *in_path, const char *out_path, const el_requant_params *p, el_requant_info *info,
                  el_error *err) {
    static char arch[64];
    if (!in_path || !out_path || !p) return el_set_error(err, EL_ERR_INVALID_ARG, "el_requantize: NULL argument");
    if (el_ftype_gguf_id(p->ftype) < 0) return el_set_error(err, EL_ERR_INVALID_ARG, "unknown target type %d", (int)p->ftype);
    int rc = 0;
    el_gguf *g = el_gguf_open(in_path, err);
    if (!g) return err->code ? err->code : EL_ERR_IO;
    el_gguf_writer *w = NULL;
    int64_t *order = NULL;
    el_qtensor *qt = NULL;
    el_type *types = NULL;
    el_layout *lays = NULL;
    char **names = NULL;
    float *fbuf = NULL;
    uint8_t *obuf = NULL, *pbuf = NULL, *flat_src = NULL;
    const int64_t nt = el_gguf_n_tensors(g);
    el_qmodel qm;
    if ((rc = read_qmodel(g, &qm, arch, sizeof arch, err))) goto done;
    if (nt <= 0 || nt > (1 << 20)) { rc = el_set_error(err, EL_ERR_BAD_COUNT, "%lld tensors", (long long)nt); goto done; }

    /* tensors in llama-quantize's order */
    order = malloc(sizeof *order * (size_t)nt);
    qt = calloc((size_t)nt, sizeof *qt);
    types = calloc((size_t)nt, sizeof *types);
    lays = calloc((size_t)nt, sizeof *lays);
    names = calloc((size_t)nt, sizeof *names);
    if (!order || !qt || !types || !lays || !names) { rc = el_set_error(err, EL_ERR_NOMEM, "out of memory"); goto done; }
    for (int64_t i = 0; i < nt; i++) order[i] = i;
    pthread_mutex_lock(&g_sort_lock);
    g_sort_src = g;
    qsort(order, (size_t)nt, sizeof *order, cmp_name);
    pthread_mutex_unlock(&g_sort_lock);
    int64_t max_row = 1;
    for (int64_t i = 0; i < nt; i++) {
        const el_gguf_tensor *t = el_gguf_tensor_at(g, order[i]);
        const el_type_info *ti = el_type_get(flat_type(t->type));
        if (!(names[i] = el_str_dup(t->name))) { rc = el_set_error(err, EL_ERR_NOMEM, "out of memory"); goto done; }
        if (!ti || !ti->to_float) {
            rc = el_set_error(err, EL_ERR_UNSUPPORTED, "%s: tensors of type %s cannot be read", names[i], el_type_name(t->type));
            goto done;
        }
        if (!is_float_type(t->type) && !p->allow_requantize) {
            rc = el_set_error(err, EL_ERR_UNSUPPORTED,
                              "%s is %s: requantizing an already quantized model compounds its error; start from "
                              "F32/F16/BF16, or pass --allow-requantize",
                              names[i], el_type_name(t->type));
            goto done;
        }
        if ((rc = el_gguf_check_values(t, err))) goto done; /* an MXFP4 NaN exponent */
        qt[i].name = names[i];
        qt[i].n_dims = t->n_dims;
        memcpy(qt[i].ne, t->ne, sizeof qt[i].ne);
        if (t->ne[0] > max_row) max_row = t->ne[0];
    }
    char perr[256] = {0};
    if (el_quant_plan(p->ftype, &qm, qt, (int)nt, types, perr, sizeof perr) != 0) {
        rc = el_set_error(err, EL_ERR_UNSUPPORTED, "%s: %s", el_ftype_name(p->ftype), perr);
        goto done;
    }
    /* Tensors llama.cpp never quantizes (the plan's "F32": norms, 1-D) keep
     * their own type. For an F32 target the plan says F32 for everything, so
     * which tensors those are is asked of a quantizing plan. */
    el_type *keep = types;
    if (p->ftype == EL_FTYPE_F32) {
        keep = calloc((size_t)nt, sizeof *keep);
        if (!keep) { rc = el_set_error(err, EL_ERR_NOMEM, "out of memory"); goto done; }
        if (el_quant_plan(EL_FTYPE_F16, &qm, qt, (int)nt, keep, perr, sizeof perr) != 0) {
            free(keep);
            rc = el_set_error(err, EL_ERR_UNSUPPORTED, "%s: %s", el_ftype_name(p->ftype), perr);
            goto done;
        }
    }
    for (int64_t i = 0; i < nt; i++)
        if (keep[i] == EL_TYPE_F32) types[i] = (el_type)flat_type(el_gguf_tensor_at(g, order[i])->type);
    if (keep != types) free(keep);
    /* IN already of the target file type: every tensor keeps its type (another llama-quantize version may
     * have mixed Q4_K_M differently), so only the layout changes */
    uint32_t in_ftype;
    if (p->allow_requantize && el_gguf_get_u32(g, "general.file_type", &in_ftype) &&
        (int64_t)in_ftype == el_ftype_gguf_id(p->ftype))
        for (int64_t i = 0; i < nt; i++) types[i] = (el_type)flat_type(el_gguf_tensor_at(g, order[i])->type);

    /* metadata */
    w = el_gguf_writer_new();
    if (!w) { rc = el_set_error(err, EL_ERR_NOMEM, "out of memory"); goto done; }
    for (int64_t i = 0; i < el_gguf_n_kv(g); i++) {
        const el_gguf_kv *kv = el_gguf_kv_at(g, i);
        if (key_is(kv->key, "general.quantization_version") || key_is(kv->key, "general.file_type") ||
            key_is(kv->key, "split.no") || key_is(kv->key, "split.count") || key_is(kv->key, "split.tensors.count"))
            continue;
        if ((rc = copy_kv(w, kv, err))) goto done;
    }
    el_gguf_w_u32(w, "general.quantization_version", 2);
    el_gguf_w_u32(w, "general.file_type", (uint32_t)el_ftype_gguf_id(p->ftype));
    /* the layout each tensor is written in (package/layout.h, el_layout_r16_for) */
    const bool tied = el_gguf_find_tensor(g, "output.weight") == NULL;
    for (int64_t i = 0; i < nt; i++) {
        const el_gguf_tensor *t = el_gguf_tensor_at(g, order[i]);
        lays[i] = p->layout_r16 ? el_layout_r16_for(names[i], t->n_dims, t->ne, types[i], tied) : EL_LAYOUT_FLAT;
        el_gguf_w_add_tensor(w, names[i], lays[i] ? el_layout_type(lays[i]) : (int)types[i], t->n_dims, t->ne);
    }
    if (el_gguf_w_error(w)[0]) { rc = el_set_error(err, EL_ERR_INVALID_ARG, "%s", el_gguf_w_error(w)); goto done; }

    uint64_t total = 0, done_bytes = 0;
    for (int64_t i = 0; i < nt; i++) total += el_gguf_w_tensor_nbytes(w, i);
    int64_t chunk_rows = RQ_CHUNK_ELEMS / max_row;
    if (chunk_rows < 1) chunk_rows = 1;
    if (chunk_rows < EL_LAYOUT_R16_ROWS) chunk_rows = EL_LAYOUT_R16_ROWS; /* a layout packs whole groups */
    chunk_rows -= chunk_rows % EL_LAYOUT_R16_ROWS;
    fbuf = malloc(sizeof(float) * (size_t)(chunk_rows * max_row));
    obuf = malloc(sizeof(float) * (size_t)(chunk_rows * max_row)); /* every target is <= 4 bytes per element */
    if (p->layout_r16) pbuf = malloc(sizeof(float) * (size_t)(chunk_rows * max_row)); /* obuf in a layout */
    if (!fbuf || !obuf || (p->layout_r16 && !pbuf)) { rc = el_set_error(err, EL_ERR_NOMEM, "out of memory"); goto done; }
    int n_threads = p->n_threads;
    if (n_threads <= 0) {
        long nc = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = nc > 0 ? (int)nc : 1;
    }
    if (n_threads > RQ_MAX_THREADS) n_threads = RQ_MAX_THREADS;
    if ((rc = el_gguf_w_begin(w, out_path, err))) goto done;
    if (p->progress) p->progress(p->progress_ud, 0, total, "");
    int n_changed = 0;
    int n_layout = 0;
    for (int64_t i = 0; i < nt; i++) {
        const el_gguf_tensor *t = el_gguf_tensor_at(g, order[i]);
        const el_layout il = el_layout_of_type(t->type), ol = lays[i];
        n_layout += ol != EL_LAYOUT_FLAT;
        el_gguf_tensor tf = *t; /* the source's flat rows */
        free(flat_src);
        flat_src = NULL;
        if (il) {
            tf.type = el_layout_base(il);
            if (!(flat_src = malloc(t->nbytes))) { rc = el_set_error(err, EL_ERR_NOMEM, "out of memory"); goto done; }
            el_layout_unpack(il, t->data, t->ne[0], t->ne[1], flat_src, el_row_size((el_type)tf.type, t->ne[0]));
            tf.data = flat_src;
        }
        const int64_t ne0 = t->ne[0], rows = t->ne[1] * t->ne[2] * t->ne[3];
        const size_t out_row = el_row_size(types[i], ne0);
        if ((int)types[i] != tf.type) n_changed++;
        for (int64_t r0 = 0; r0 < rows; r0 += chunk_rows) {
            const int64_t nr = rows - r0 < chunk_rows ? rows - r0 : chunk_rows;
            const uint8_t *out = (const uint8_t *)tf.data + out_row * (size_t)r0; /* the type kept: its bytes */
            if ((int)types[i] != tf.type) {
                if ((rc = convert_rows(&tf, types[i], r0, nr, fbuf, obuf, n_threads, err))) goto done;
                out = obuf;
            }
            if (ol) { /* whole groups: chunks start at multiples of 16 rows and the tensor holds 16k */
                el_layout_pack(ol, out, out_row, ne0, nr, pbuf);
                out = pbuf;
            }
            if ((rc = el_gguf_w_tensor_data(w, out, out_row * (size_t)nr, err))) goto done;
            done_bytes += out_row * (size_t)nr;
        }
        if (p->progress) p->progress(p->progress_ud, done_bytes, total, names[i]);
    }
    if ((rc = el_gguf_w_finish(w, err))) goto done;
    /* read it back through the validating reader */
    el_gguf *o = el_gguf_open(out_path, err);
    if (!o) { rc = err->code ? err->code : EL_ERR_IO; goto done; }
    if (info) {
        memset(info, 0, sizeof *info);
        info->arch = arch;
        info->n_tensors = (int)nt;
        info->n_requantized = n_changed;
        for (int64_t i = 0; i < nt; i++)
            if ((unsigned)types[i] < 64) info->n_by_type[types[i]]++;
        info->n_layout = n_layout;
        info->in_bytes = el_gguf_file_size(g);
        info->out_bytes = el_gguf_file_size(o);
    }
    el_gguf_close(o);
done:
    el_gguf_writer_free(w);
    if (names)
        for (int64_t i = 0; i < nt; i++) free(names[i]);
    free(names);
    free(order);
    free(qt);
    free(types);
    free(lays);
    free(fbuf);
    free(obuf);
    free(pbuf);
    free(flat_src);
    el_gguf_close(g);
    return rc;
}
