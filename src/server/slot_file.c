/*
 * slot_file.c — a server slot's saved state: the file format of slot_file.h,
 * its strict parser, and the save/restore that move a session's tokens and
 * KV rows through it.
 *
 * Contract: el_slot_parse reads only inside buf[0..len) and accepts only a
 * file whose every size, the checksum, the geometry and every token id have
 * been checked (slot_file.h gives the order); el_slot_restore changes the
 * session only after el_slot_parse accepted the whole file; el_slot_save
 * writes only inside its directory, through a temporary file renamed over
 * the name. The session's cache is read through its internal layout
 * (runtime/model.h: kc/vc per layer, rows of n_head_kv x head_dim in the cache's type
 * elements, a ring of kv_ring rows for sliding-window layers).
 */
#include "server/slot_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "package/types.h"
#include "runtime/model.h"
#include "runtime/exec.h"
#include "util/error.h"

#define SLOT_MAGIC "ELSLOT\r\n"
#define SLOT_HDR_FIXED 80u
#define SLOT_LAYER_REC 24u

static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void wr32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

/* a + b and a * b, false on size_t overflow */
static bool add_ok(size_t *acc, size_t b) {
    if (*acc > SIZE_MAX - b) return false;
    *acc += b;
    return true;
}
static bool mul_ok(size_t a, size_t b, size_t *out) {
    if (a && b > SIZE_MAX / a) return false;
    *out = a * b;
    return true;
}

int el_slot_geom_of(const el_session *s, const uint8_t sha256[32], el_slot_geom *g, el_error *err) {
    const el_hparams *hp = &s->m->hp;
    if (hp->n_layer < 1 || hp->n_layer > EL_SLOT_MAX_LAYERS)
        return el_set_error(err, EL_ERR_UNSUPPORTED, "a model of %d layers (slot files hold 1..%d)", hp->n_layer,
                            EL_SLOT_MAX_LAYERS);
    /* LFM2: the short-convolution state is not in the format; saving the KV
     * alone would restore a session that continues with a wrong state */
    if (hp->n_conv > 0)
        return el_set_error(err, EL_ERR_UNSUPPORTED, "slot files do not hold a %s model's short-convolution state (%d conv layers)",
                            s->m->arch_name, hp->n_conv);
    memset(g, 0, sizeof *g);
    memcpy(g->model_sha256, sha256, 32);
    g->n_ctx = (uint32_t)s->n_ctx;
    g->n_layer = (uint32_t)hp->n_layer;
    g->n_vocab = (uint32_t)hp->n_vocab;
    g->kv_ring = (uint32_t)(s->kv_ring > 0 ? s->kv_ring : 0);
    g->n_swa = (uint32_t)(hp->n_swa > 0 ? hp->n_swa : 0);
    /* as memory/plan.c lays a row out: n_head_kv x the larger head size, in the cache's type */
    const int64_t n = (int64_t)hp->n_head_kv * (hp->head_dim_k > hp->head_dim_v ? hp->head_dim_k : hp->head_dim_v);
    const size_t krow = el_row_size((el_type)s->type_k, n), vrow = el_row_size((el_type)s->type_v, n);
    if (krow == 0 || vrow == 0 || krow > UINT32_MAX || vrow > UINT32_MAX)
        return el_set_error(err, EL_ERR_UNSUPPORTED, "KV rows of %lld values in %s/%s", (long long)n,
                            el_type_name(s->type_k), el_type_name(s->type_v));
    for (int il = 0; il < hp->n_layer; il++) {
        el_slot_layer *L = &g->layers[il];
        const bool ring = s->kv_ring > 0 && s->m->layers[il].swa;
        L->k_type = (uint32_t)s->type_k;
        L->v_type = (uint32_t)s->type_v;
        L->k_row_bytes = (uint32_t)krow;
        L->v_row_bytes = (uint32_t)vrow;
        L->ring = ring ? 1u : 0u;
        L->n_rows = ring ? (uint32_t)s->kv_ring : (uint32_t)s->n_ctx;
    }
    return 0;
}

uint32_t el_slot_rows_stored(const el_slot_layer *L, uint32_t n_tokens) {
    return L->ring && n_tokens > L->n_rows ? L->n_rows : n_tokens;
}

/* Bytes of the header, tokens and data of a file whose header says n_layer
 * layers (records at rec) and n_tokens; 0 on overflow. */
static size_t body_bytes(uint32_t n_layer, const uint8_t *rec, const el_slot_geom *g, uint32_t n_tokens) {
    size_t total = SLOT_HDR_FIXED + (size_t)SLOT_LAYER_REC * n_layer, t;
    if (!mul_ok(n_tokens, 4, &t) || !add_ok(&total, t)) return 0;
    for (uint32_t il = 0; il < n_layer; il++) {
        el_slot_layer L;
        if (rec) {
            const uint8_t *p = rec + (size_t)il * SLOT_LAYER_REC;
            L = (el_slot_layer){rd32(p), rd32(p + 4), rd32(p + 8), rd32(p + 12), rd32(p + 16), 0};
            const uint32_t stored = rd32(p + 20);
            size_t kb, vb;
            if (!mul_ok(stored, L.k_row_bytes, &kb) || !mul_ok(stored, L.v_row_bytes, &vb) || !add_ok(&total, kb) ||
                !add_ok(&total, vb))
                return 0;
        } else {
            L = g->layers[il];
            const uint32_t stored = el_slot_rows_stored(&L, n_tokens);
            size_t kb, vb;
            if (!mul_ok(stored, L.k_row_bytes, &kb) || !mul_ok(stored, L.v_row_bytes, &vb) || !add_ok(&total, kb) ||
                !add_ok(&total, vb))
                return 0;
        }
    }
    return total;
}

size_t el_slot_file_bytes(const el_slot_geom *g, uint32_t n_tokens) {
    size_t b = body_bytes(g->n_layer, NULL, g, n_tokens);
    return b && add_ok(&b, 32) ? b : 0;
}

static void hex8(const uint8_t *h, char *out) {
    for (int i = 0; i < 8; i++) snprintf(out + 2 * i, 3, "%02x", h[i]);
}

int el_slot_parse(const uint8_t *buf, size_t len, const el_slot_geom *want, el_slot_view *out, el_error *err) {
    if (!buf || len < SLOT_HDR_FIXED + 32)
        return el_set_error(err, EL_ERR_TRUNCATED, "slot file of %zu bytes: shorter than its header (%u) and checksum", len,
                            SLOT_HDR_FIXED);
    if (memcmp(buf, SLOT_MAGIC, 8)) return el_set_error(err, EL_ERR_BAD_MAGIC, "not an edgellm slot file (bad magic)");
    const uint32_t version = rd32(buf + 8);
    if (version != EL_SLOT_VERSION)
        return el_set_error(err, EL_ERR_BAD_VERSION, "slot file version %u (this build reads %u)", version, EL_SLOT_VERSION);
    const uint32_t hdr = rd32(buf + 12), n_ctx = rd32(buf + 48), n_layer = rd32(buf + 52), n_vocab = rd32(buf + 56),
                   kv_ring = rd32(buf + 60), n_swa = rd32(buf + 64), n_tokens = rd32(buf + 68);
    if (n_layer < 1 || n_layer > EL_SLOT_MAX_LAYERS)
        return el_set_error(err, EL_ERR_BAD_COUNT, "slot file header: %u layers (1..%d)", n_layer, EL_SLOT_MAX_LAYERS);
    if (hdr != SLOT_HDR_FIXED + SLOT_LAYER_REC * n_layer)
        return el_set_error(err, EL_ERR_BAD_COUNT, "slot file header: %u bytes for %u layers (expected %u)", hdr, n_layer,
                            SLOT_HDR_FIXED + SLOT_LAYER_REC * n_layer);
    if (rd32(buf + 72) || rd32(buf + 76)) return el_set_error(err, EL_ERR_BAD_VALUE, "slot file header: reserved fields are not 0");
    if (len < (size_t)hdr + 32)
        return el_set_error(err, EL_ERR_TRUNCATED, "slot file of %zu bytes: its header alone needs %u", len, hdr + 32);
    if (n_tokens > n_ctx)
        return el_set_error(err, EL_ERR_BAD_COUNT, "slot file: %u tokens in a context of %u", n_tokens, n_ctx);
    const uint8_t *rec = buf + SLOT_HDR_FIXED;
    for (uint32_t il = 0; il < n_layer; il++) { /* stored rows within the cache's rows, as the tokens imply */
        const uint8_t *p = rec + (size_t)il * SLOT_LAYER_REC;
        const uint32_t rows = rd32(p + 16), stored = rd32(p + 20);
        if (stored > rows || (stored != n_tokens && stored != rows))
            return el_set_error(err, EL_ERR_BAD_COUNT, "slot file: layer %u stores %u rows of %u for %u tokens", il, stored,
                                rows, n_tokens);
    }
    const size_t body = body_bytes(n_layer, rec, NULL, n_tokens);
    if (!body) return el_set_error(err, EL_ERR_BAD_COUNT, "slot file: its sizes overflow");
    if (len != body + 32)
        return el_set_error(err, len < body + 32 ? EL_ERR_TRUNCATED : EL_ERR_BAD_COUNT,
                            "slot file of %zu bytes: its header describes %zu (%s)", len, body + 32,
                            len < body + 32 ? "truncated" : "trailing bytes");
    uint8_t h[crypto_hash_sha256_BYTES];
    crypto_hash_sha256(h, buf, (unsigned long long)body);
    if (memcmp(h, buf + body, 32))
        return el_set_error(err, EL_ERR_BAD_VALUE, "slot file is corrupt: its checksum does not match its contents");
    /* a whole, intact file: does it belong to this model and session? */
    if (memcmp(buf + 16, want->model_sha256, 32)) {
        char a[17], b[17];
        hex8(buf + 16, a);
        hex8(want->model_sha256, b);
        return el_set_error(err, EL_ERR_UNSUPPORTED, "slot file was saved from another model (sha256 %s..., this one %s...)",
                            a, b);
    }
    if (n_ctx != want->n_ctx)
        return el_set_error(err, EL_ERR_UNSUPPORTED, "slot file was saved with a context of %u tokens, this slot has %u", n_ctx,
                            want->n_ctx);
    if (n_layer != want->n_layer || n_vocab != want->n_vocab)
        return el_set_error(err, EL_ERR_UNSUPPORTED, "slot file: %u layers and %u tokens of vocab, the model has %u and %u",
                            n_layer, n_vocab, want->n_layer, want->n_vocab);
    if (kv_ring != want->kv_ring || n_swa != want->n_swa)
        return el_set_error(err, EL_ERR_UNSUPPORTED,
                            "slot file: sliding-window ring of %u rows (window %u), this slot's is %u (window %u): "
                            "another batch size or --swa-full", kv_ring, n_swa, want->kv_ring, want->n_swa);
    const uint8_t *data = buf + hdr + (size_t)n_tokens * 4;
    for (uint32_t il = 0; il < n_layer; il++) {
        const uint8_t *p = rec + (size_t)il * SLOT_LAYER_REC;
        const el_slot_layer *L = &want->layers[il];
        const uint32_t kt = rd32(p), vt = rd32(p + 4), kr = rd32(p + 8), vr = rd32(p + 12), rows = rd32(p + 16),
                       stored = rd32(p + 20);
        if (kt != L->k_type || vt != L->v_type)
            return el_set_error(err, EL_ERR_UNSUPPORTED,
                                "slot file: layer %u's KV cache is of types %s/%s (ids %u/%u), this slot's is %s/%s", il,
                                el_type_name((int)kt), el_type_name((int)vt), kt, vt, el_type_name((int)L->k_type),
                                el_type_name((int)L->v_type));
        if (kr != L->k_row_bytes || vr != L->v_row_bytes || rows != L->n_rows || stored != el_slot_rows_stored(L, n_tokens))
            return el_set_error(err, EL_ERR_UNSUPPORTED,
                                "slot file: layer %u's cache is %u rows of %u/%u bytes (%u stored), this slot's %u rows of "
                                "%u/%u bytes", il, rows, kr, vr, stored, L->n_rows, L->k_row_bytes, L->v_row_bytes);
        out->k[il] = data;
        data += (size_t)stored * kr;
        out->v[il] = data;
        data += (size_t)stored * vr;
        out->n_stored[il] = stored;
    }
    const uint8_t *tp = buf + hdr;
    for (uint32_t i = 0; i < n_tokens; i++) {
        const int32_t t = (int32_t)rd32(tp + 4 * (size_t)i);
        if (t < 0 || (uint32_t)t >= n_vocab)
            return el_set_error(err, EL_ERR_BAD_VALUE, "slot file: token %d at position %u is outside the vocab (%u)", t, i,
                                n_vocab);
    }
    out->n_tokens = n_tokens;
    out->tokens = tp;
    return 0;
}

int el_slot_name_check(const char *name, size_t len, el_error *err) {
    if (!name || len == 0) return el_set_error(err, EL_ERR_INVALID_ARG, "the file name is empty");
    if (len > EL_SLOT_NAME_MAX)
        return el_set_error(err, EL_ERR_INVALID_ARG, "the file name is %zu bytes long (at most %d)", len, EL_SLOT_NAME_MAX);
    if (name[0] == '.')
        return el_set_error(err, EL_ERR_INVALID_ARG, "the file name may not start with '.' (no '..', no hidden files)");
    for (size_t i = 0; i < len; i++) {
        const unsigned char c = (unsigned char)name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
              c == '-'))
            return el_set_error(err, EL_ERR_INVALID_ARG,
                                "the file name has byte 0x%02x at %zu: a file name is letters, digits, '.', '_' and '-' "
                                "only (no path)", c, i);
    }
    return 0;
}

static int write_all(int fd, const void *p, size_t n) {
    const uint8_t *b = p;
    while (n) {
        ssize_t w = write(fd, b, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Writes p[0..n) to the file and the running hash. */
static int put(int fd, crypto_hash_sha256_state *st, const void *p, size_t n) {
    crypto_hash_sha256_update(st, p, (unsigned long long)n);
    return write_all(fd, p, n);
}

int el_slot_save(const el_session *s, const uint8_t sha256[32], const int32_t *toks, int n_tokens, const char *dir,
                 const char *name, size_t *bytes, int *os_errno, el_error *err) {
    if (os_errno) *os_errno = 0;
    if (el_slot_name_check(name, name ? strlen(name) : 0, err)) return EL_ERR_INVALID_ARG;
    if (n_tokens < 0 || n_tokens != s->n_past)
        return el_set_error(err, EL_ERR_INVALID_ARG, "%d tokens to save, the session holds %d", n_tokens, s->n_past);
    el_slot_geom *g = malloc(sizeof *g);
    if (!g) return el_set_error(err, EL_ERR_NOMEM, "out of memory");
    int rc = el_slot_geom_of(s, sha256, g, err);
    if (rc) { free(g); return rc; }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        if (os_errno) *os_errno = errno;
        rc = el_set_error(err, EL_ERR_IO, "slot save directory %s: %s", dir, strerror(errno));
        free(g);
        return rc;
    }
    char tmp[EL_SLOT_NAME_MAX + 40];
    int fd = -1;
    for (int attempt = 0; attempt < 16 && fd < 0; attempt++) {
        snprintf(tmp, sizeof tmp, ".%s.%08x.tmp", name, randombytes_random());
        fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        if (os_errno) *os_errno = errno;
        rc = el_set_error(err, EL_ERR_IO, "cannot create a temporary file in %s: %s", dir, strerror(errno));
        close(dfd);
        free(g);
        return rc;
    }
    crypto_hash_sha256_state st;
    crypto_hash_sha256_init(&st);
    const uint32_t nl = g->n_layer, nt = (uint32_t)n_tokens;
    uint8_t fixed[SLOT_HDR_FIXED] = {0};
    memcpy(fixed, SLOT_MAGIC, 8);
    wr32(fixed + 8, EL_SLOT_VERSION);
    wr32(fixed + 12, SLOT_HDR_FIXED + SLOT_LAYER_REC * nl);
    memcpy(fixed + 16, sha256, 32);
    wr32(fixed + 48, g->n_ctx);
    wr32(fixed + 52, nl);
    wr32(fixed + 56, g->n_vocab);
    wr32(fixed + 60, g->kv_ring);
    wr32(fixed + 64, g->n_swa);
    wr32(fixed + 68, nt);
    bool ok = put(fd, &st, fixed, sizeof fixed) == 0;
    if (ok && el_exec_sync_host(s, err)) { /* the caches' current rows may be on a device */
        ok = false;
        rc = err && err->code ? err->code : EL_ERR_INTERNAL;
    }
    for (uint32_t il = 0; ok && il < nl; il++) {
        const el_slot_layer *L = &g->layers[il];
        uint8_t r[SLOT_LAYER_REC];
        wr32(r, L->k_type);
        wr32(r + 4, L->v_type);
        wr32(r + 8, L->k_row_bytes);
        wr32(r + 12, L->v_row_bytes);
        wr32(r + 16, L->n_rows);
        wr32(r + 20, el_slot_rows_stored(L, nt));
        ok = put(fd, &st, r, sizeof r) == 0;
    }
    for (uint32_t i = 0; ok && i < nt; i++) {
        uint8_t b[4];
        wr32(b, (uint32_t)toks[i]);
        ok = put(fd, &st, b, 4) == 0;
    }
    for (uint32_t il = 0; ok && il < nl; il++) {
        const el_slot_layer *L = &g->layers[il];
        const size_t stored = el_slot_rows_stored(L, nt);
        ok = put(fd, &st, s->kc[il], stored * L->k_row_bytes) == 0 && put(fd, &st, s->vc[il], stored * L->v_row_bytes) == 0;
    }
    uint8_t h[crypto_hash_sha256_BYTES];
    crypto_hash_sha256_final(&st, h);
    if (ok) ok = write_all(fd, h, sizeof h) == 0;
    if (ok) ok = fsync(fd) == 0;
    const int werr = errno;
    if (close(fd)) ok = false;
    if (ok && renameat(dfd, tmp, dfd, name)) {
        if (os_errno) *os_errno = errno;
        rc = el_set_error(err, EL_ERR_IO, "cannot rename the slot file into %s/%s: %s", dir, name, strerror(errno));
        ok = false;
    } else if (!ok && !rc) {
        if (os_errno) *os_errno = werr;
        rc = el_set_error(err, EL_ERR_IO, "writing the slot file in %s failed: %s", dir, strerror(werr));
    }
    if (!ok) unlinkat(dfd, tmp, 0);
    if (ok) {
        (void)fsync(dfd);
        if (bytes) *bytes = el_slot_file_bytes(g, nt);
    }
    close(dfd);
    free(g);
    return ok ? 0 : (rc ? rc : EL_ERR_IO);
}

int el_slot_restore(el_session *s, const uint8_t sha256[32], const char *dir, const char *name, int32_t *toks,
                    size_t *bytes, el_error *err) {
    if (el_slot_name_check(name, name ? strlen(name) : 0, err)) return -EL_ERR_INVALID_ARG;
    el_slot_geom *g = malloc(sizeof *g);
    el_slot_view *v = malloc(sizeof *v);
    uint8_t *buf = NULL;
    int rc = 0, dfd = -1, fd = -1;
    if (!g || !v) { rc = el_set_error(err, EL_ERR_NOMEM, "out of memory"); goto out; }
    if ((rc = el_slot_geom_of(s, sha256, g, err))) goto out;
    const size_t max = el_slot_file_bytes(g, g->n_ctx);
    dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) { rc = el_set_error(err, EL_ERR_IO, "slot save directory %s: %s", dir, strerror(errno)); goto out; }
    fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        rc = el_set_error(err, EL_ERR_IO, "slot file %s: %s", name,
                          errno == ELOOP ? "a symbolic link (not followed)" : strerror(errno));
        goto out;
    }
    struct stat sb;
    if (fstat(fd, &sb) || !S_ISREG(sb.st_mode)) { rc = el_set_error(err, EL_ERR_IO, "slot file %s is not a regular file", name); goto out; }
    if ((uint64_t)sb.st_size > (uint64_t)max) {
        rc = el_set_error(err, EL_ERR_BAD_COUNT, "slot file %s is %lld bytes; a file for this slot is at most %zu", name,
                          (long long)sb.st_size, max);
        goto out;
    }
    const size_t len = (size_t)sb.st_size;
    buf = malloc(len ? len : 1);
    if (!buf) { rc = el_set_error(err, EL_ERR_NOMEM, "out of memory for a slot file of %zu bytes", len); goto out; }
    size_t got = 0;
    while (got < len) {
        ssize_t n = read(fd, buf + got, len - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += (size_t)n;
    }
    if (got != len) { rc = el_set_error(err, EL_ERR_IO, "slot file %s: short read (%zu of %zu bytes)", name, got, len); goto out; }
    if ((rc = el_slot_parse(buf, len, g, v, err))) goto out;
    bool expected = false;
    if (!atomic_compare_exchange_strong(&s->busy, &expected, true)) {
        rc = el_set_error(err, EL_ERR_INVALID_ARG, "the session is busy");
        goto out;
    }
    for (uint32_t il = 0; il < g->n_layer; il++) {
        memcpy(s->kc[il], v->k[il], (size_t)v->n_stored[il] * g->layers[il].k_row_bytes);
        memcpy(s->vc[il], v->v[il], (size_t)v->n_stored[il] * g->layers[il].v_row_bytes);
        el_exec_host_wrote(s, el_t_kc((int)il)); /* the host copies alone are current now */
        el_exec_host_wrote(s, el_t_vc((int)il));
    }
    for (uint32_t i = 0; i < v->n_tokens; i++) toks[i] = (int32_t)rd32(v->tokens + 4 * (size_t)i);
    s->n_past = (int)v->n_tokens;
    atomic_store(&s->busy, false);
    if (bytes) *bytes = len;
    rc = (int)v->n_tokens;
    goto done;
out:
    rc = rc > 0 ? -rc : rc ? rc : -EL_ERR_INTERNAL;
done:
    if (fd >= 0) close(fd);
    if (dfd >= 0) close(dfd);
    free(buf);
    free(g);
    free(v);
    return rc;
}
