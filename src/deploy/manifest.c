/*
 * manifest.c — signed model packages: keys, canonical JSON, the manifest
 * schema, the deployment fingerprint of a GGUF file, signing, verification
 * and the smoke test. The contract (formats, canonical form, check order) is
 * in manifest.h.
 *
 * Invariants: nothing read from a manifest is used before the schema check
 * accepts it; after el_pkg_verify succeeds every field of the returned
 * manifest came from the signed object that a trusted key signed (unless the
 * caller asked to skip the signature); the model file is never mapped by this
 * file's verification path (sizes are stat'ed, hashes streamed with read()).
 */
#include "deploy/manifest.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "package/gguf.h"
#include "package/types.h"
#include "deploy/fsutil.h"
#include "util/buf.h"
#include "util/file.h"

#define SIGN_PREFIX "edgellm-manifest-v1\n"
#define MAX_INT_JSON 9007199254740992.0 /* 2^53 */

bool el_pkg_init(void) { return sodium_init() >= 0; }

/* ---- hex --------------------------------------------------------------- */

static void to_hex(const uint8_t *b, size_t n, char *out) {
    static const char H[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = H[b[i] >> 4];
        out[2 * i + 1] = H[b[i] & 15];
    }
    out[2 * n] = 0;
}

static int hexv(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1; /* uppercase is not canonical: refused */
}

/* Exactly 2n lowercase hex digits. */
static bool from_hex(const char *s, uint8_t *out, size_t n) {
    if (!s || strlen(s) != 2 * n) return false;
    for (size_t i = 0; i < n; i++) {
        int a = hexv((unsigned char)s[2 * i]), b = hexv((unsigned char)s[2 * i + 1]);
        if (a < 0 || b < 0) return false;
        out[i] = (uint8_t)(a << 4 | b);
    }
    return true;
}

/* ---- keys -------------------------------------------------------------- */

#define PUB_TAG "edgellm-ed25519-public "
#define SEC_TAG "edgellm-ed25519-secret "

void el_pkg_keyid(const uint8_t pk[EL_PKG_PUB_BYTES], char out[17]) {
    uint8_t h[crypto_hash_sha256_BYTES];
    crypto_hash_sha256(h, pk, EL_PKG_PUB_BYTES);
    to_hex(h, 8, out);
}

el_pkg_check el_pkg_keygen(const char *base, bool force, el_pubkey *out, el_pkg_error *err) {
    if (!el_pkg_init()) return el_pkg_fail(err, EL_PKG_ERR_IO, "libsodium failed to initialise");
    char sec_path[PATH_MAX], pub_path[PATH_MAX];
    if (snprintf(sec_path, sizeof sec_path, "%s.sec", base) >= (int)sizeof sec_path ||
        snprintf(pub_path, sizeof pub_path, "%s.pub", base) >= (int)sizeof pub_path)
        return el_pkg_fail(err, EL_PKG_ERR_USAGE, "%s: path too long", base);
    uint8_t pk[crypto_sign_PUBLICKEYBYTES], sk[crypto_sign_SECRETKEYBYTES];
    crypto_sign_keypair(pk, sk);
    char line[sizeof SEC_TAG + 2 * crypto_sign_SECRETKEYBYTES + 2];
    char hex[2 * crypto_sign_SECRETKEYBYTES + 1];

    int fd = open(sec_path, O_WRONLY | O_CREAT | O_CLOEXEC | (force ? O_TRUNC : O_EXCL), 0600);
    if (fd < 0) {
        sodium_memzero(sk, sizeof sk);
        return el_pkg_fail(err, EL_PKG_ERR_IO, "%s: cannot create: %s%s", sec_path, strerror(errno),
                           errno == EEXIST ? " (use --force to overwrite)" : "");
    }
    fchmod(fd, 0600);
    to_hex(sk, sizeof sk, hex);
    int n = snprintf(line, sizeof line, SEC_TAG "%s\n", hex);
    sodium_memzero(sk, sizeof sk);
    sodium_memzero(hex, sizeof hex);
    bool ok = el_fs_write_all(fd, line, (size_t)n) && fsync(fd) == 0;
    sodium_memzero(line, sizeof line);
    if (close(fd) != 0) ok = false;
    if (!ok) {
        unlink(sec_path);
        return el_pkg_fail(err, EL_PKG_ERR_IO, "%s: write failed: %s", sec_path, strerror(errno));
    }
    to_hex(pk, sizeof pk, hex);
    n = snprintf(line, sizeof line, PUB_TAG "%s\n", hex);
    if (!el_fs_write_atomic(pub_path, line, (size_t)n, 0644, err)) {
        unlink(sec_path);
        return err ? err->check : EL_PKG_ERR_IO;
    }
    if (out) {
        memcpy(out->pk, pk, sizeof pk);
        el_pkg_keyid(pk, out->keyid);
    }
    return EL_PKG_OK;
}

/* Reads a one-line key file "TAG<hex>\n" of nbytes bytes into out. */
static el_pkg_check read_key_file(const char *path, const char *tag, uint8_t *out, size_t nbytes,
                                  el_pkg_error *err) {
    char why[256];
    FILE *f = el_fopen_regular(path, why, sizeof why);
    if (!f) return el_pkg_fail(err, EL_PKG_ERR_IO, "cannot open key: %s", why);
    char line[512];
    size_t r = fread(line, 1, sizeof line - 1, f);
    fclose(f);
    line[r] = 0;
    size_t tl = strlen(tag);
    if (r < tl || memcmp(line, tag, tl) != 0) {
        sodium_memzero(line, sizeof line);
        return el_pkg_fail(err, EL_PKG_ERR_KEY, "%s: not an edgellm %s key file", path,
                           strstr(tag, "public") ? "public" : "secret");
    }
    char *hex = line + tl;
    size_t hl = strcspn(hex, "\r\n");
    bool trailing_ok = hex[hl] == 0 || (hex[hl] == '\n' && hex[hl + 1] == 0) ||
                       (hex[hl] == '\r' && hex[hl + 1] == '\n' && hex[hl + 2] == 0);
    hex[hl] = 0;
    bool ok = trailing_ok && from_hex(hex, out, nbytes);
    sodium_memzero(line, sizeof line);
    if (!ok) return el_pkg_fail(err, EL_PKG_ERR_KEY, "%s: malformed key (expected %zu hex digits)", path, 2 * nbytes);
    return EL_PKG_OK;
}

el_pkg_check el_pkg_read_pub(const char *path, el_pubkey *out, el_pkg_error *err) {
    if (!el_pkg_init()) return el_pkg_fail(err, EL_PKG_ERR_IO, "libsodium failed to initialise");
    el_pkg_check c = read_key_file(path, PUB_TAG, out->pk, EL_PKG_PUB_BYTES, err);
    if (c == EL_PKG_OK) el_pkg_keyid(out->pk, out->keyid);
    return c;
}

el_pkg_check el_pkg_read_sec(const char *path, uint8_t sk[EL_PKG_SEC_BYTES], el_pubkey *pub, el_pkg_error *err) {
    if (!el_pkg_init()) return el_pkg_fail(err, EL_PKG_ERR_IO, "libsodium failed to initialise");
    el_pkg_check c = read_key_file(path, SEC_TAG, sk, EL_PKG_SEC_BYTES, err);
    if (c) return c;
    uint8_t pk[EL_PKG_PUB_BYTES];
    crypto_sign_ed25519_sk_to_pk(pk, sk);
    /* libsodium's secret key is seed || public key: they must agree */
    if (memcmp(pk, sk + 32, 32) != 0) {
        sodium_memzero(sk, EL_PKG_SEC_BYTES);
        return el_pkg_fail(err, EL_PKG_ERR_KEY, "%s: secret key is inconsistent", path);
    }
    if (pub) {
        memcpy(pub->pk, pk, sizeof pk);
        el_pkg_keyid(pk, pub->keyid);
    }
    return EL_PKG_OK;
}

/* ---- canonical JSON ---------------------------------------------------- */

static int cmp_keys(const void *a, const void *b) {
    const cJSON *x = *(const cJSON *const *)a, *y = *(const cJSON *const *)b;
    return strcmp(x->string, y->string); /* strcmp compares as unsigned char */
}

static bool canon_str(el_buf *b, const char *s) {
    if (!el_buf_append(b, "\"", 1)) return false;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char esc[8];
        if (*p == '"') { if (!el_buf_append(b, "\\\"", 2)) return false; }
        else if (*p == '\\') { if (!el_buf_append(b, "\\\\", 2)) return false; }
        else if (*p < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", *p);
            if (!el_buf_append(b, esc, 6)) return false;
        } else if (!el_buf_append(b, (const char *)p, 1)) return false;
    }
    return el_buf_append(b, "\"", 1);
}

static bool canon(const cJSON *v, el_buf *b, int depth, char why[256]) {
    if (depth > 32) { snprintf(why, 256, "nested deeper than 32 levels"); return false; }
    if (!v) { snprintf(why, 256, "missing value"); return false; }
    switch (v->type & 0xFF) {
    case cJSON_NULL: return el_buf_str(b, "null") || (snprintf(why, 256, "out of memory"), false);
    case cJSON_True: return el_buf_str(b, "true") || (snprintf(why, 256, "out of memory"), false);
    case cJSON_False: return el_buf_str(b, "false") || (snprintf(why, 256, "out of memory"), false);
    case cJSON_Number: {
        double d = v->valuedouble;
        if (!(d >= -MAX_INT_JSON && d <= MAX_INT_JSON) || d != (double)(int64_t)d) {
            snprintf(why, 256, "number %g is not an integer in [-2^53, 2^53]", d);
            return false;
        }
        char t[32];
        snprintf(t, sizeof t, "%" PRId64, (int64_t)d);
        return el_buf_str(b, t) || (snprintf(why, 256, "out of memory"), false);
    }
    case cJSON_String:
        if (!v->valuestring) { snprintf(why, 256, "string without value"); return false; }
        return canon_str(b, v->valuestring) || (snprintf(why, 256, "out of memory"), false);
    case cJSON_Array: {
        if (!el_buf_append(b, "[", 1)) { snprintf(why, 256, "out of memory"); return false; }
        bool first = true;
        for (const cJSON *c = v->child; c; c = c->next) {
            if (!first && !el_buf_append(b, ",", 1)) { snprintf(why, 256, "out of memory"); return false; }
            first = false;
            if (!canon(c, b, depth + 1, why)) return false;
        }
        return el_buf_append(b, "]", 1) || (snprintf(why, 256, "out of memory"), false);
    }
    case cJSON_Object: {
        size_t n = 0;
        for (const cJSON *c = v->child; c; c = c->next) n++;
        const cJSON **kids = malloc((n ? n : 1) * sizeof *kids);
        if (!kids) { snprintf(why, 256, "out of memory"); return false; }
        n = 0;
        for (const cJSON *c = v->child; c; c = c->next) {
            if (!c->string) { free(kids); snprintf(why, 256, "object member without a key"); return false; }
            kids[n++] = c;
        }
        qsort(kids, n, sizeof *kids, cmp_keys);
        bool ok = el_buf_append(b, "{", 1);
        for (size_t i = 0; ok && i < n; i++) {
            if (i && strcmp(kids[i - 1]->string, kids[i]->string) == 0) {
                snprintf(why, 256, "duplicate key \"%.64s\"", kids[i]->string);
                free(kids);
                return false;
            }
            if (i) ok = el_buf_append(b, ",", 1);
            ok = ok && canon_str(b, kids[i]->string) && el_buf_append(b, ":", 1);
            if (ok && !canon(kids[i], b, depth + 1, why)) { free(kids); return false; }
        }
        free(kids);
        return (ok && el_buf_append(b, "}", 1)) || (snprintf(why, 256, "out of memory"), false);
    }
    default:
        snprintf(why, 256, "unsupported JSON value");
        return false;
    }
}

bool el_manifest_canonical(const cJSON *v, el_buf *out, char why[256]) {
    why[0] = 0;
    return canon(v, out, 0, why);
}

/* ---- time -------------------------------------------------------------- */

static bool parse_utc(const char *s, int64_t *out) {
    int Y, M, D, h, m, sec;
    char z;
    int n = 0;
    if (!s || strlen(s) != 20) return false;
    if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%c%n", &Y, &M, &D, &h, &m, &sec, &z, &n) != 7 || n != 20 || z != 'Z')
        return false;
    for (int i = 0; i < 20; i++) {
        char c = s[i];
        bool digit_pos = !(i == 4 || i == 7 || i == 10 || i == 13 || i == 16 || i == 19);
        if (digit_pos && (c < '0' || c > '9')) return false;
    }
    if (Y < 1970 || Y > 9999 || M < 1 || M > 12 || D < 1 || D > 31 || h > 23 || m > 59 || sec > 60) return false;
    struct tm tm = {.tm_year = Y - 1900, .tm_mon = M - 1, .tm_mday = D, .tm_hour = h, .tm_min = m, .tm_sec = sec};
    time_t t = timegm(&tm);
    if (t == (time_t)-1) return false;
    *out = (int64_t)t;
    return true;
}

static void format_utc(int64_t t, char out[21]) {
    time_t tt = (time_t)t;
    struct tm tm;
    gmtime_r(&tt, &tm);
    strftime(out, 21, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

bool el_pkg_parse_date(const char *s, int64_t *out) {
    if (parse_utc(s, out)) return true;
    char full[32];
    if (s && strlen(s) == 10 && snprintf(full, sizeof full, "%sT00:00:00Z", s) == 20) return parse_utc(full, out);
    return false;
}

/* ---- the manifest schema ----------------------------------------------- */

void el_manifest_free(el_manifest *m) {
    if (!m) return;
    free(m->name); free(m->created); free(m->expires);
    for (int i = 0; i < m->n_artifacts; i++) free(m->artifacts[i].path);
    free(m->artifacts);
    free(m->source_checkpoint); free(m->source_revision); free(m->converter);
    free(m->quant_type); free(m->quant_config);
    for (int i = 0; i < m->n_tensor_types; i++) free(m->tensor_types[i].type);
    free(m->tensor_types);
    free(m->arch); free(m->runtime_min);
    for (int i = 0; i < m->n_device_classes; i++) free(m->device_classes[i]);
    free(m->device_classes);
    free(m->smoke_prompt); free(m->smoke_prompt_tokens); free(m->smoke_tokens);
    free(m->sig_keyids); free(m->sigs);
    free(m->message);
    memset(m, 0, sizeof *m);
}

typedef struct schema { el_pkg_error *err; el_pkg_check rc; } schema;

static bool bad(schema *s, const char *fmt, const char *field) {
    if (s->rc == EL_PKG_OK) {
        s->rc = EL_PKG_ERR_MALFORMED;
        if (s->err) {
            s->err->check = EL_PKG_ERR_MALFORMED;
            snprintf(s->err->msg, sizeof s->err->msg, fmt, field);
        }
    }
    return false;
}

/* Printable, no control bytes, 0 < len <= max. */
static bool ok_text(const char *v, size_t max, bool allow_empty) {
    size_t n = strlen(v);
    if ((!allow_empty && n == 0) || n > max) return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)v[i] < 0x20 || v[i] == 0x7f) return false;
    return true;
}

static bool get_str(schema *s, const cJSON *o, const char *key, size_t max, bool allow_empty, char **out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsString(v) || !v->valuestring) return bad(s, "manifest: \"%s\" must be a string", key);
    if (!ok_text(v->valuestring, max, allow_empty))
        return bad(s, "manifest: \"%s\" is empty, too long or has control characters", key);
    if (!(*out = strdup(v->valuestring))) return bad(s, "manifest: out of memory at \"%s\"", key);
    return true;
}

static bool get_int(schema *s, const cJSON *o, const char *key, int64_t lo, int64_t hi, int64_t *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v)) return bad(s, "manifest: \"%s\" must be an integer", key);
    double d = v->valuedouble;
    if (!(d >= (double)lo && d <= (double)hi) || d != (double)(int64_t)d)
        return bad(s, "manifest: \"%s\" is out of range", key);
    *out = (int64_t)d;
    return true;
}

static bool get_hash(schema *s, const cJSON *o, const char *key, uint8_t out[32]) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsString(v) || !from_hex(v->valuestring, out, 32))
        return bad(s, "manifest: \"%s\" must be 64 lowercase hex digits", key);
    return true;
}

static bool get_tokens(schema *s, const cJSON *o, const char *key, int32_t **out, int *n) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsArray(a)) return bad(s, "manifest: \"%s\" must be an array of token ids", key);
    int cnt = cJSON_GetArraySize(a);
    if (cnt < 0 || cnt > 4096) return bad(s, "manifest: \"%s\" has too many tokens", key);
    *out = malloc((size_t)(cnt ? cnt : 1) * sizeof **out);
    if (!*out) return bad(s, "manifest: out of memory at \"%s\"", key);
    int i = 0;
    for (const cJSON *c = a->child; c; c = c->next, i++) {
        if (!cJSON_IsNumber(c) || !(c->valuedouble >= 0 && c->valuedouble <= INT32_MAX) ||
            c->valuedouble != (double)(int32_t)c->valuedouble)
            return bad(s, "manifest: \"%s\" holds something that is not a token id", key);
        (*out)[i] = (int32_t)c->valuedouble;
    }
    *n = cnt;
    return true;
}

/* A plain file name: no '/', not starting with '.', printable. */
static bool ok_basename(const char *p) {
    if (!ok_text(p, 255, false) || p[0] == '.' || strchr(p, '/') || strchr(p, '\\')) return false;
    return true;
}

static bool parse_signed(schema *s, const cJSON *sg, el_manifest *m) {
    if (!cJSON_IsObject(sg)) return bad(s, "manifest: \"%s\" must be an object", "signed");
    char *fmt = NULL;
    if (!get_str(s, sg, "format", 64, false, &fmt)) return false;
    bool fmt_ok = strcmp(fmt, EL_MANIFEST_FORMAT) == 0;
    free(fmt);
    if (!fmt_ok) return bad(s, "manifest: unknown format (expected \"%s\")", EL_MANIFEST_FORMAT);
    if (!get_str(s, sg, "name", 128, false, &m->name)) return false;
    if (!get_int(s, sg, "version", 1, (int64_t)MAX_INT_JSON, &m->version)) return false;
    int64_t created_t;
    if (!get_str(s, sg, "created", 20, false, &m->created)) return false;
    if (!parse_utc(m->created, &created_t)) return bad(s, "manifest: \"%s\" is not YYYY-MM-DDTHH:MM:SSZ", "created");
    if (!get_str(s, sg, "expires", 20, false, &m->expires)) return false;
    if (!parse_utc(m->expires, &m->expires_t)) return bad(s, "manifest: \"%s\" is not YYYY-MM-DDTHH:MM:SSZ", "expires");

    const cJSON *arts = cJSON_GetObjectItemCaseSensitive(sg, "artifacts");
    int na = cJSON_IsArray(arts) ? cJSON_GetArraySize(arts) : 0;
    if (na < 1 || na > 64) return bad(s, "manifest: \"%s\" must list 1..64 files, the model first", "artifacts");
    m->artifacts = calloc((size_t)na, sizeof *m->artifacts);
    if (!m->artifacts) return bad(s, "manifest: out of memory at \"%s\"", "artifacts");
    for (const cJSON *a = arts->child; a; a = a->next) {
        el_pkg_artifact *ar = &m->artifacts[m->n_artifacts++];
        if (!cJSON_IsObject(a)) return bad(s, "manifest: each of \"%s\" must be an object", "artifacts");
        if (!get_str(s, a, "path", 255, false, &ar->path)) return false;
        if (!ok_basename(ar->path)) return bad(s, "manifest: artifact path \"%.200s\" is not a plain file name", ar->path);
        for (int k = 0; k + 1 < m->n_artifacts; k++)
            if (!strcmp(m->artifacts[k].path, ar->path)) return bad(s, "manifest: artifact \"%.200s\" listed twice", ar->path);
        int64_t size;
        if (!get_int(s, a, "size", 0, (int64_t)MAX_INT_JSON, &size)) return false;
        ar->size = (uint64_t)size;
        if (!get_hash(s, a, "sha256", ar->sha256)) return false;
    }

    const cJSON *fp = cJSON_GetObjectItemCaseSensitive(sg, "fingerprint");
    if (!cJSON_IsObject(fp)) return bad(s, "manifest: \"%s\" must be an object", "fingerprint");
    if (!get_str(s, fp, "source_checkpoint", 512, false, &m->source_checkpoint) ||
        !get_str(s, fp, "source_revision", 256, false, &m->source_revision) ||
        !get_str(s, fp, "converter", 256, false, &m->converter) ||
        !get_str(s, fp, "arch", 64, false, &m->arch) ||
        !get_hash(s, fp, "tokenizer_sha256", m->tokenizer_sha256) ||
        !get_str(s, fp, "runtime_min", 32, false, &m->runtime_min))
        return false;
    const cJSON *ct = cJSON_GetObjectItemCaseSensitive(fp, "chat_template_sha256");
    if (cJSON_IsNull(ct)) m->has_chat_template = false;
    else if (get_hash(s, fp, "chat_template_sha256", m->chat_template_sha256)) m->has_chat_template = true;
    else return false;
    unsigned rmaj, rmin, rpat;
    char tail;
    if (sscanf(m->runtime_min, "%u.%u.%u%c", &rmaj, &rmin, &rpat, &tail) != 3)
        return bad(s, "manifest: \"%s\" must be X.Y.Z", "runtime_min");
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(fp, "quant");
    if (!cJSON_IsObject(q)) return bad(s, "manifest: \"%s\" must be an object", "quant");
    if (!get_str(s, q, "type", 32, false, &m->quant_type) ||
        !get_int(s, q, "file_type", -1, 1 << 20, &m->quant_file_type) ||
        !get_str(s, q, "config", 1024, true, &m->quant_config))
        return false;
    const cJSON *tt = cJSON_GetObjectItemCaseSensitive(q, "tensor_types");
    if (!cJSON_IsObject(tt)) return bad(s, "manifest: \"%s\" must be an object", "tensor_types");
    int ntt = cJSON_GetArraySize(tt);
    if (ntt > 64) return bad(s, "manifest: \"%s\" has too many entries", "tensor_types");
    m->tensor_types = calloc((size_t)(ntt ? ntt : 1), sizeof *m->tensor_types);
    if (!m->tensor_types) return bad(s, "manifest: out of memory at \"%s\"", "tensor_types");
    for (const cJSON *c = tt->child; c; c = c->next) {
        el_pkg_typecount *tc = &m->tensor_types[m->n_tensor_types++];
        if (!c->string || !ok_text(c->string, 32, false) || !(tc->type = strdup(c->string)))
            return bad(s, "manifest: a key of \"%s\" is not a type name", "tensor_types");
        if (!get_int(s, tt, c->string, 0, 1 << 30, &tc->count)) return false;
    }
    const cJSON *dc = cJSON_GetObjectItemCaseSensitive(fp, "device_classes");
    int ndc = cJSON_IsArray(dc) ? cJSON_GetArraySize(dc) : 0;
    if (ndc < 1 || ndc > 64) return bad(s, "manifest: \"%s\" must list 1..64 classes", "device_classes");
    m->device_classes = calloc((size_t)ndc, sizeof *m->device_classes);
    if (!m->device_classes) return bad(s, "manifest: out of memory at \"%s\"", "device_classes");
    for (const cJSON *c = dc->child; c; c = c->next) {
        if (!cJSON_IsString(c) || !ok_text(c->valuestring, 64, false))
            return bad(s, "manifest: each of \"%s\" must be a short string", "device_classes");
        if (!(m->device_classes[m->n_device_classes++] = strdup(c->valuestring)))
            return bad(s, "manifest: out of memory at \"%s\"", "device_classes");
    }

    const cJSON *sm = cJSON_GetObjectItemCaseSensitive(sg, "smoke");
    if (!sm) return bad(s, "manifest: \"%s\" is missing (null when there is none)", "smoke");
    if (cJSON_IsNull(sm)) return true;
    if (!cJSON_IsObject(sm)) return bad(s, "manifest: \"%s\" must be an object or null", "smoke");
    m->has_smoke = true;
    int64_t np;
    if (!get_str(s, sm, "prompt", 4096, false, &m->smoke_prompt) ||
        !get_int(s, sm, "n_predict", 1, 256, &np) ||
        !get_tokens(s, sm, "prompt_tokens", &m->smoke_prompt_tokens, &m->n_smoke_prompt_tokens) ||
        !get_tokens(s, sm, "tokens", &m->smoke_tokens, &m->n_smoke_tokens))
        return false;
    m->smoke_n_predict = (int)np;
    if (m->n_smoke_prompt_tokens < 1) return bad(s, "manifest: \"%s\" is empty", "prompt_tokens");
    if (m->n_smoke_tokens > m->smoke_n_predict) return bad(s, "manifest: \"%s\" longer than n_predict", "tokens");
    return true;
}

el_pkg_check el_manifest_parse(const char *json, size_t len, el_manifest *m, el_pkg_error *err) {
    memset(m, 0, sizeof *m);
    schema s = {.err = err, .rc = EL_PKG_OK};
    if (len > EL_MANIFEST_MAX_BYTES)
        return el_pkg_fail(err, EL_PKG_ERR_MALFORMED, "manifest: %zu bytes, more than the %u allowed", len,
                           EL_MANIFEST_MAX_BYTES);
    /* Strict JSON bytes: no NUL, no control bytes but \t \n \r (cJSON would
     * skip any byte <= 0x20 as white space), nothing after the value. */
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)json[i];
        if (c < 0x20 && c != '\t' && c != '\n' && c != '\r')
            return el_pkg_fail(err, EL_PKG_ERR_MALFORMED, "manifest: control byte 0x%02x at offset %zu", c, i);
    }
    char *copy = malloc(len + 1);
    if (!copy) return el_pkg_fail(err, EL_PKG_ERR_IO, "out of memory");
    memcpy(copy, json, len);
    copy[len] = 0;
    cJSON *root = cJSON_ParseWithLengthOpts(copy, len + 1, NULL, 1);
    free(copy);
    if (!root) return el_pkg_fail(err, EL_PKG_ERR_MALFORMED, "manifest: not valid JSON");
    el_buf canon_buf = {0};
    char why[256];
    const cJSON *sg = cJSON_GetObjectItemCaseSensitive(root, "signed");
    const cJSON *sigs = cJSON_GetObjectItemCaseSensitive(root, "signatures");
    if (!cJSON_IsObject(root) || !cJSON_IsObject(sg)) {
        bad(&s, "manifest: the top level must be an object with a \"%s\" object", "signed");
        goto done;
    }
    if (!el_buf_str(&canon_buf, SIGN_PREFIX) || !el_manifest_canonical(sg, &canon_buf, why)) {
        if (s.rc == EL_PKG_OK) {
            s.rc = el_pkg_fail(err, EL_PKG_ERR_MALFORMED, "manifest: \"signed\" has no canonical form: %s", why);
        }
        goto done;
    }
    if (!parse_signed(&s, sg, m)) goto done;
    int ns = cJSON_IsArray(sigs) ? cJSON_GetArraySize(sigs) : -1;
    if (ns < 0 || ns > 16) { bad(&s, "manifest: \"%s\" must be an array of at most 16 signatures", "signatures"); goto done; }
    m->sig_keyids = calloc((size_t)(ns ? ns : 1), sizeof *m->sig_keyids);
    m->sigs = calloc((size_t)(ns ? ns : 1), sizeof *m->sigs);
    if (!m->sig_keyids || !m->sigs) { bad(&s, "manifest: out of memory at \"%s\"", "signatures"); goto done; }
    for (const cJSON *c = sigs->child; c; c = c->next) {
        const cJSON *kid = cJSON_GetObjectItemCaseSensitive(c, "keyid");
        const cJSON *sig = cJSON_GetObjectItemCaseSensitive(c, "sig");
        uint8_t kb[8];
        if (!cJSON_IsObject(c) || !cJSON_IsString(kid) || !from_hex(kid->valuestring, kb, 8) ||
            !cJSON_IsString(sig) || !from_hex(sig->valuestring, m->sigs[m->n_sigs], EL_PKG_SIG_BYTES)) {
            bad(&s, "manifest: a signature must be {\"keyid\": 16 hex, \"sig\": 128 hex}%s", "");
            goto done;
        }
        memcpy(m->sig_keyids[m->n_sigs], kid->valuestring, 17);
        m->n_sigs++;
    }
    m->message = canon_buf.p;
    m->message_len = canon_buf.len;
    canon_buf.p = NULL;
done:
    el_buf_free(&canon_buf);
    cJSON_Delete(root);
    if (s.rc != EL_PKG_OK) el_manifest_free(m);
    return s.rc;
}

el_pkg_check el_manifest_read(const char *path, el_manifest *m, el_pkg_error *err) {
    memset(m, 0, sizeof *m);
    struct stat st;
    char why[256];
    int fd = el_open_regular(path, &st, why, sizeof why);
    if (fd < 0) {
        if (errno == ENOENT)
            return el_pkg_fail(err, EL_PKG_ERR_NO_MANIFEST, "%s: no manifest (the model is not a signed package)", path);
        if (errno == EINVAL || errno == EISDIR) return el_pkg_fail(err, EL_PKG_ERR_MALFORMED, "%s", why);
        return el_pkg_fail(err, EL_PKG_ERR_IO, "cannot open: %s", why);
    }
    if ((uint64_t)st.st_size > EL_MANIFEST_MAX_BYTES) {
        close(fd);
        return el_pkg_fail(err, EL_PKG_ERR_MALFORMED, "%s: %lld bytes, more than the %u a manifest may have", path,
                           (long long)st.st_size, EL_MANIFEST_MAX_BYTES);
    }
    size_t n = (size_t)st.st_size;
    char *buf = malloc(n + 1);
    if (!buf) { close(fd); return el_pkg_fail(err, EL_PKG_ERR_IO, "out of memory"); }
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    if (got != n) { free(buf); return el_pkg_fail(err, EL_PKG_ERR_IO, "%s: short read", path); }
    buf[n] = 0;
    el_pkg_check c = el_manifest_parse(buf, n, m, err);
    free(buf);
    if (c != EL_PKG_OK && err) {
        char tmp[sizeof err->msg + PATH_MAX + 4];
        int n = snprintf(tmp, sizeof tmp, "%s: %s", path, err->msg);
        size_t k = n < 0 ? 0 : (size_t)n < sizeof err->msg ? (size_t)n : sizeof err->msg - 1;
        memcpy(err->msg, tmp, k);
        err->msg[k] = 0;
    }
    return c;
}

bool el_pkg_manifest_path(const char *model, char *out, size_t cap) {
    int n = snprintf(out, cap, "%s%s", model, EL_MANIFEST_SUFFIX);
    return n > 0 && (size_t)n < cap;
}

/* ---- building the signed object ---------------------------------------- */

static cJSON *hex_str(const uint8_t *b, size_t n) {
    char h[2 * 64 + 1];
    to_hex(b, n, h);
    return cJSON_CreateString(h);
}

static cJSON *tokens_json(const int32_t *t, int n) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(t[i]));
    return a;
}

static cJSON *build_signed(const el_manifest *m) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddStringToObject(o, "format", EL_MANIFEST_FORMAT);
    cJSON_AddStringToObject(o, "name", m->name);
    cJSON_AddNumberToObject(o, "version", (double)m->version);
    cJSON_AddStringToObject(o, "created", m->created);
    cJSON_AddStringToObject(o, "expires", m->expires);
    cJSON *arts = cJSON_AddArrayToObject(o, "artifacts");
    for (int i = 0; arts && i < m->n_artifacts; i++) {
        cJSON *a = cJSON_CreateObject();
        cJSON_AddStringToObject(a, "path", m->artifacts[i].path);
        cJSON_AddNumberToObject(a, "size", (double)m->artifacts[i].size);
        cJSON_AddItemToObject(a, "sha256", hex_str(m->artifacts[i].sha256, 32));
        cJSON_AddItemToArray(arts, a);
    }
    cJSON *fp = cJSON_AddObjectToObject(o, "fingerprint");
    cJSON_AddStringToObject(fp, "source_checkpoint", m->source_checkpoint);
    cJSON_AddStringToObject(fp, "source_revision", m->source_revision);
    cJSON_AddStringToObject(fp, "converter", m->converter);
    cJSON_AddStringToObject(fp, "arch", m->arch);
    cJSON_AddItemToObject(fp, "tokenizer_sha256", hex_str(m->tokenizer_sha256, 32));
    if (m->has_chat_template) cJSON_AddItemToObject(fp, "chat_template_sha256", hex_str(m->chat_template_sha256, 32));
    else cJSON_AddNullToObject(fp, "chat_template_sha256");
    cJSON_AddStringToObject(fp, "runtime_min", m->runtime_min);
    cJSON *q = cJSON_AddObjectToObject(fp, "quant");
    cJSON_AddStringToObject(q, "type", m->quant_type);
    cJSON_AddNumberToObject(q, "file_type", (double)m->quant_file_type);
    cJSON_AddStringToObject(q, "config", m->quant_config);
    cJSON *tt = cJSON_AddObjectToObject(q, "tensor_types");
    for (int i = 0; tt && i < m->n_tensor_types; i++)
        cJSON_AddNumberToObject(tt, m->tensor_types[i].type, (double)m->tensor_types[i].count);
    cJSON *dc = cJSON_AddArrayToObject(fp, "device_classes");
    for (int i = 0; dc && i < m->n_device_classes; i++) cJSON_AddItemToArray(dc, cJSON_CreateString(m->device_classes[i]));
    if (m->has_smoke) {
        cJSON *sm = cJSON_AddObjectToObject(o, "smoke");
        cJSON_AddStringToObject(sm, "prompt", m->smoke_prompt);
        cJSON_AddNumberToObject(sm, "n_predict", m->smoke_n_predict);
        cJSON_AddItemToObject(sm, "prompt_tokens", tokens_json(m->smoke_prompt_tokens, m->n_smoke_prompt_tokens));
        cJSON_AddItemToObject(sm, "tokens", tokens_json(m->smoke_tokens, m->n_smoke_tokens));
    } else {
        cJSON_AddNullToObject(o, "smoke");
    }
    return o;
}

/* ---- fingerprint of a GGUF file ---------------------------------------- */

static void hash_u64(crypto_hash_sha256_state *st, uint64_t v) {
    uint8_t b[8];
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
    crypto_hash_sha256_update(st, b, 8);
}

/* Hashes a kv's value bytes (type tag, then the payload as stored). */
static void hash_kv_value(crypto_hash_sha256_state *st, const el_gguf_kv *kv) {
    hash_u64(st, (uint64_t)kv->type);
    if (kv->type == EL_GGUF_STRING) {
        const uint8_t *p = kv->data;
        el_str s = el_gguf_str_next(&p);
        hash_u64(st, s.len);
        crypto_hash_sha256_update(st, (const uint8_t *)s.ptr, s.len);
    } else if (kv->type == EL_GGUF_ARRAY) {
        hash_u64(st, (uint64_t)kv->arr_type);
        hash_u64(st, kv->arr_n);
        size_t esz = el_gguf_vtype_size(kv->arr_type);
        if (esz) {
            crypto_hash_sha256_update(st, kv->data, kv->arr_n * esz);
        } else {
            const uint8_t *p = kv->data;
            for (uint64_t i = 0; i < kv->arr_n; i++) {
                el_str s = el_gguf_str_next(&p);
                hash_u64(st, s.len);
                crypto_hash_sha256_update(st, (const uint8_t *)s.ptr, s.len);
            }
        }
    } else {
        crypto_hash_sha256_update(st, kv->data, el_gguf_vtype_size(kv->type));
    }
}

static bool is_template_key(el_str k) {
    static const char T[] = "tokenizer.chat_template";
    return k.len >= sizeof T - 1 && memcmp(k.ptr, T, sizeof T - 1) == 0 &&
           (k.len == sizeof T - 1 || k.ptr[sizeof T - 1] == '.');
}

static int cmp_kv_key(const void *a, const void *b) {
    const el_gguf_kv *x = *(const el_gguf_kv *const *)a, *y = *(const el_gguf_kv *const *)b;
    size_t n = x->key.len < y->key.len ? x->key.len : y->key.len;
    int c = memcmp(x->key.ptr, y->key.ptr, n);
    return c ? c : (x->key.len < y->key.len ? -1 : x->key.len > y->key.len);
}

/* Fills arch, quant and tokenizer/template hashes of m from the GGUF file. */
static el_pkg_check describe_gguf(const char *path, el_manifest *m, char **general_name, el_pkg_error *err) {
    el_error e = {0};
    el_gguf *g = el_gguf_open(path, &e);
    if (!g) return el_pkg_fail(err, EL_PKG_ERR_IO, "%s: not a valid GGUF file: %s", path, e.msg);
    el_pkg_check rc = EL_PKG_OK;
    el_str s;
    m->arch = el_gguf_get_str(g, "general.architecture", &s) ? el_str_dup(s) : strdup("unknown");
    if (general_name) {
        *general_name = NULL;
        if (el_gguf_get_str(g, "general.name", &s) && s.len) *general_name = el_str_dup(s);
    }
    uint32_t ft;
    m->quant_file_type = el_gguf_get_u32(g, "general.file_type", &ft) ? (int64_t)ft : -1;

    /* tensor types: count and bytes per type; the quant type holds most bytes */
    int64_t count[256] = {0};
    uint64_t bytes[256] = {0};
    for (int64_t i = 0; i < el_gguf_n_tensors(g); i++) {
        const el_gguf_tensor *t = el_gguf_tensor_at(g, i);
        if (t->type >= 0 && t->type < 256) { count[t->type]++; bytes[t->type] += t->nbytes; }
    }
    int best = -1;
    m->tensor_types = calloc(256, sizeof *m->tensor_types);
    for (int t = 0; m->tensor_types && t < 256; t++) {
        if (!count[t]) continue;
        if (best < 0 || bytes[t] > bytes[best]) best = t;
        el_pkg_typecount *tc = &m->tensor_types[m->n_tensor_types++];
        tc->type = strdup(el_type_name(t));
        tc->count = count[t];
    }
    /* the quant type: llama.cpp's file-type name when the file says it (a
     * Q4_K_M file keeps some tensors in Q6_K/Q8_0), else the dominant type */
    const char *ftn = NULL;
    static const struct { int id; const char *name; } FT[] = {
        {0, "F32"}, {1, "F16"}, {2, "Q4_0"}, {3, "Q4_1"}, {7, "Q8_0"}, {8, "Q5_0"}, {9, "Q5_1"}, {10, "Q2_K"},
        {11, "Q3_K_S"}, {12, "Q3_K_M"}, {13, "Q3_K_L"}, {14, "Q4_K_S"}, {15, "Q4_K_M"}, {16, "Q5_K_S"},
        {17, "Q5_K_M"}, {18, "Q6_K"}, {19, "IQ2_XXS"}, {20, "IQ2_XS"}, {21, "Q2_K_S"}, {22, "IQ3_XS"},
        {23, "IQ3_XXS"}, {24, "IQ1_S"}, {25, "IQ4_NL"}, {26, "IQ3_S"}, {27, "IQ3_M"}, {28, "IQ2_S"},
        {29, "IQ2_M"}, {30, "IQ4_XS"}, {31, "IQ1_M"}, {32, "BF16"}, {36, "TQ1_0"}, {37, "TQ2_0"}};
    for (size_t i = 0; i < sizeof FT / sizeof FT[0] && m->quant_file_type >= 0; i++)
        if (FT[i].id == m->quant_file_type) ftn = FT[i].name;
    m->quant_type = strdup(ftn ? ftn : best >= 0 ? el_type_name(best) : "none");

    /* tokenizer: every tokenizer.* key except the chat templates, sorted by key */
    int64_t nkv = el_gguf_n_kv(g);
    const el_gguf_kv **kvs = malloc((size_t)(nkv > 0 ? nkv : 1) * sizeof *kvs);
    if (!kvs || !m->tensor_types || !m->arch || !m->quant_type) {
        rc = el_pkg_fail(err, EL_PKG_ERR_IO, "out of memory describing %s", path);
        goto out;
    }
    int64_t nt = 0;
    for (int64_t i = 0; i < nkv; i++) {
        const el_gguf_kv *kv = el_gguf_kv_at(g, i);
        if (kv->key.len > 10 && memcmp(kv->key.ptr, "tokenizer.", 10) == 0 && !is_template_key(kv->key))
            kvs[nt++] = kv;
    }
    qsort(kvs, (size_t)nt, sizeof *kvs, cmp_kv_key);
    crypto_hash_sha256_state st;
    crypto_hash_sha256_init(&st);
    for (int64_t i = 0; i < nt; i++) {
        hash_u64(&st, kvs[i]->key.len);
        crypto_hash_sha256_update(&st, (const uint8_t *)kvs[i]->key.ptr, kvs[i]->key.len);
        hash_kv_value(&st, kvs[i]);
    }
    crypto_hash_sha256_final(&st, m->tokenizer_sha256);
    if (el_gguf_get_str(g, "tokenizer.chat_template", &s)) {
        m->has_chat_template = true;
        crypto_hash_sha256(m->chat_template_sha256, (const uint8_t *)s.ptr, s.len);
    }
out:
    free(kvs);
    el_gguf_close(g);
    return rc;
}

/* ---- hashing ----------------------------------------------------------- */

el_pkg_check el_pkg_hash_file(const char *path, uint8_t out[32], uint64_t *size, el_pkg_error *err) {
    char why[256];
    int fd = el_open_regular(path, NULL, why, sizeof why); /* a device would hash forever, a FIFO block */
    if (fd < 0) return el_pkg_fail(err, EL_PKG_ERR_IO, "cannot open: %s", why);
    crypto_hash_sha256_state st;
    crypto_hash_sha256_init(&st);
    size_t cap = 1u << 20;
    uint8_t *buf = malloc(cap);
    if (!buf) { close(fd); return el_pkg_fail(err, EL_PKG_ERR_IO, "out of memory"); }
    uint64_t total = 0;
    el_pkg_check rc = EL_PKG_OK;
    for (;;) {
        ssize_t n = read(fd, buf, cap);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) { rc = el_pkg_fail(err, EL_PKG_ERR_IO, "%s: read error: %s", path, strerror(errno)); break; }
        if (n == 0) break;
        crypto_hash_sha256_update(&st, buf, (unsigned long long)n);
        total += (uint64_t)n;
    }
    free(buf);
    close(fd);
    if (rc == EL_PKG_OK) {
        if (out) crypto_hash_sha256_final(&st, out);
        if (size) *size = total;
    }
    return rc;
}

/* ---- device class, versions -------------------------------------------- */

const char *el_pkg_device_class(void) {
    static char cls[80];
    if (!cls[0]) {
        struct utsname u;
        if (uname(&u) == 0) snprintf(cls, sizeof cls, "cpu-%.64s", u.machine);
        else snprintf(cls, sizeof cls, "cpu");
    }
    return cls;
}

/* -1, 0, 1 as a < b, ==, > (X.Y.Z, numeric). */
static int cmp_version(const char *a, const char *b) {
    unsigned x[3] = {0}, y[3] = {0};
    sscanf(a, "%u.%u.%u", &x[0], &x[1], &x[2]);
    sscanf(b, "%u.%u.%u", &y[0], &y[1], &y[2]);
    for (int i = 0; i < 3; i++)
        if (x[i] != y[i]) return x[i] < y[i] ? -1 : 1;
    return 0;
}

/* ---- smoke test -------------------------------------------------------- */

typedef struct smoke_out { int32_t *t; int n, cap; } smoke_out;

static bool smoke_cb(const el_token_info *t, void *user) {
    smoke_out *o = user;
    if (t->id >= 0 && o->n < o->cap) o->t[o->n++] = t->id;
    return true;
}

/* Runs the smoke prompt greedily: prompt tokens and output tokens, malloc'd. */
static el_pkg_check smoke_run(const char *model_path, const char *prompt, int n_predict, int32_t **ptoks, int *np,
                              int32_t **otoks, int *no, el_pkg_error *err) {
    el_error e = {0};
    *ptoks = *otoks = NULL;
    el_model *mdl = el_model_load(model_path, NULL, &e);
    if (!mdl) return el_pkg_fail(err, EL_PKG_ERR_SMOKE, "smoke test: load failed: %s: %s", el_status_name(e.code), e.msg);
    el_pkg_check rc = EL_PKG_OK;
    el_session *s = NULL;
    size_t plen = strlen(prompt);
    int cap = (int)plen + 16;
    int32_t *pt = malloc((size_t)cap * sizeof *pt);
    int32_t *ot = malloc((size_t)(n_predict > 0 ? n_predict : 1) * sizeof *ot);
    if (!pt || !ot) { rc = el_pkg_fail(err, EL_PKG_ERR_SMOKE, "smoke test: out of memory"); goto out; }
    int n = el_tokenize(mdl, prompt, plen, pt, cap, EL_TOK_ADD_SPECIAL | EL_TOK_PARSE_SPECIAL);
    if (n <= 0 || n > cap || n > 4096) { rc = el_pkg_fail(err, EL_PKG_ERR_SMOKE, "smoke test: tokenizing the prompt failed (%d)", n); goto out; }
    el_session_params sp = el_session_default_params();
    sp.n_ctx = n + n_predict + 8;
    int train = el_model_n_ctx_train(mdl);
    if (train > 0 && sp.n_ctx > train) sp.n_ctx = train;
    if (!(s = el_session_new(mdl, &sp, &e))) {
        rc = el_pkg_fail(err, EL_PKG_ERR_SMOKE, "smoke test: session: %s: %s", el_status_name(e.code), e.msg);
        goto out;
    }
    el_generate_params gp;
    memset(&gp, 0, sizeof gp);
    gp.max_tokens = n_predict;
    gp.ignore_eos = true;
    gp.sampling = el_sampling_default();
    gp.sampling.temp = 0.0f;
    smoke_out so = {.t = ot, .n = 0, .cap = n_predict};
    el_generate_stats st;
    if (el_generate(s, pt, n, &gp, smoke_cb, &so, &st, &e) == EL_DONE_FAILED) {
        rc = el_pkg_fail(err, EL_PKG_ERR_SMOKE, "smoke test: generation failed: %s: %s", el_status_name(e.code), e.msg);
        goto out;
    }
    *ptoks = pt; *np = n; pt = NULL;
    *otoks = ot; *no = so.n; ot = NULL;
out:
    free(pt);
    free(ot);
    el_session_free(s);
    el_model_free(mdl);
    return rc;
}

el_pkg_check el_pkg_smoke_check(const char *model_path, const el_manifest *m, el_pkg_error *err) {
    if (!m->has_smoke) return el_pkg_fail(err, EL_PKG_ERR_SMOKE, "smoke test: the manifest records no expectation "
                                                                 "(sign without --no-smoke)");
    int32_t *pt, *ot;
    int np, no;
    el_pkg_check rc = smoke_run(model_path, m->smoke_prompt, m->smoke_n_predict, &pt, &np, &ot, &no, err);
    if (rc) return rc;
    if (np != m->n_smoke_prompt_tokens || memcmp(pt, m->smoke_prompt_tokens, (size_t)np * sizeof *pt) != 0) {
        rc = el_pkg_fail(err, EL_PKG_ERR_SMOKE, "smoke test: the prompt tokenizes to %d tokens, differently from the "
                         "%d recorded", np, m->n_smoke_prompt_tokens);
    } else {
        int k = 0;
        while (k < no && k < m->n_smoke_tokens && ot[k] == m->smoke_tokens[k]) k++;
        if (k < no || k < m->n_smoke_tokens)
            rc = el_pkg_fail(err, EL_PKG_ERR_SMOKE, "smoke test: generated token %d is %d, the manifest expects %d "
                             "(%d of %d tokens matched)", k, k < no ? ot[k] : -1,
                             k < m->n_smoke_tokens ? m->smoke_tokens[k] : -1, k, m->n_smoke_tokens);
    }
    free(pt);
    free(ot);
    return rc;
}

/* ---- signing ----------------------------------------------------------- */

static const char *base_name(const char *p) {
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static char *dir_of(const char *p) {
    const char *s = strrchr(p, '/');
    if (!s) return strdup(".");
    if (s == p) return strdup("/");
    return strndup(p, (size_t)(s - p));
}

static el_pkg_check add_artifact(el_manifest *m, const char *path, el_pkg_error *err) {
    el_pkg_artifact *a = &m->artifacts[m->n_artifacts];
    if (!ok_basename(base_name(path)))
        return el_pkg_fail(err, EL_PKG_ERR_USAGE, "%s: artifact names must be plain file names", path);
    el_pkg_check c = el_pkg_hash_file(path, a->sha256, &a->size, err);
    if (c) return c;
    if (!(a->path = strdup(base_name(path)))) return el_pkg_fail(err, EL_PKG_ERR_IO, "out of memory");
    m->n_artifacts++;
    return EL_PKG_OK;
}

el_pkg_check el_pkg_sign(const char *model_path, const uint8_t sk[EL_PKG_SEC_BYTES], const el_pkg_sign_params *p,
                         el_pkg_error *err) {
    if (!el_pkg_init()) return el_pkg_fail(err, EL_PKG_ERR_IO, "libsodium failed to initialise");
    if (p->version < 1 || (double)p->version > MAX_INT_JSON)
        return el_pkg_fail(err, EL_PKG_ERR_USAGE, "version must be an integer >= 1");
    el_manifest m;
    memset(&m, 0, sizeof m);
    el_pkg_check rc;
    char *gname = NULL, *text = NULL;
    cJSON *root = NULL;
    el_buf msg = {0};

    int64_t now = p->now ? p->now : (int64_t)time(NULL);
    int64_t expires = p->expires_t ? p->expires_t : now + 365 * 86400;
    char created_s[21], expires_s[21];
    format_utc(now, created_s);
    format_utc(expires, expires_s);

    m.version = p->version;
    m.created = strdup(created_s);
    m.expires = strdup(expires_s);
    m.expires_t = expires;
    m.artifacts = calloc((size_t)p->n_extra + 1, sizeof *m.artifacts);
    if (!m.created || !m.expires || !m.artifacts) { rc = el_pkg_fail(err, EL_PKG_ERR_IO, "out of memory"); goto out; }
    if ((rc = describe_gguf(model_path, &m, &gname, err))) goto out;
    if ((rc = add_artifact(&m, model_path, err))) goto out;
    char *dir = dir_of(model_path);
    for (int i = 0; i < p->n_extra && rc == EL_PKG_OK; i++) {
        char full[PATH_MAX];
        const char *x = p->extra_artifacts[i];
        if (strchr(x, '/')) {
            char *xd = dir_of(x);
            bool same = xd && dir && strcmp(xd, dir) == 0;
            free(xd);
            if (!same) rc = el_pkg_fail(err, EL_PKG_ERR_USAGE, "%s: extra artifacts must lie beside the model", x);
            else snprintf(full, sizeof full, "%s", x);
        } else {
            snprintf(full, sizeof full, "%s/%s", dir ? dir : ".", x);
        }
        if (rc == EL_PKG_OK) rc = add_artifact(&m, full, err);
        for (int k = 0; rc == EL_PKG_OK && k + 1 < m.n_artifacts; k++)
            if (!strcmp(m.artifacts[k].path, m.artifacts[m.n_artifacts - 1].path))
                rc = el_pkg_fail(err, EL_PKG_ERR_USAGE, "%s: listed twice", x);
    }
    free(dir);
    if (rc) goto out;

    if (p->name) m.name = strdup(p->name);
    else {
        const char *b = base_name(model_path);
        size_t l = strlen(b);
        m.name = (l > 5 && !strcmp(b + l - 5, ".gguf")) ? strndup(b, l - 5) : strdup(b);
    }
    m.source_checkpoint = strdup(p->source_checkpoint ? p->source_checkpoint : gname ? gname : "unknown");
    m.source_revision = strdup(p->source_revision ? p->source_revision : "unknown");
    m.converter = strdup(p->converter ? p->converter : "unknown");
    m.quant_config = strdup(p->quant_config ? p->quant_config : "");
    m.runtime_min = strdup(p->runtime_min ? p->runtime_min : EL_VERSION_STRING);
    int ndc = p->n_device_classes > 0 ? p->n_device_classes : 1;
    m.device_classes = calloc((size_t)ndc, sizeof *m.device_classes);
    if (!m.name || !m.source_checkpoint || !m.source_revision || !m.converter || !m.quant_config || !m.runtime_min ||
        !m.device_classes) {
        rc = el_pkg_fail(err, EL_PKG_ERR_IO, "out of memory");
        goto out;
    }
    for (int i = 0; i < ndc; i++) {
        m.device_classes[i] = strdup(p->n_device_classes > 0 ? p->device_classes[i] : "cpu");
        if (!m.device_classes[i]) { rc = el_pkg_fail(err, EL_PKG_ERR_IO, "out of memory"); goto out; }
        m.n_device_classes++;
    }
    if (p->smoke) {
        m.has_smoke = true;
        m.smoke_prompt = strdup(p->smoke_prompt ? p->smoke_prompt : "Once upon a time");
        m.smoke_n_predict = p->smoke_n_predict > 0 ? p->smoke_n_predict : 8;
        if (!m.smoke_prompt) { rc = el_pkg_fail(err, EL_PKG_ERR_IO, "out of memory"); goto out; }
        if ((rc = smoke_run(model_path, m.smoke_prompt, m.smoke_n_predict, &m.smoke_prompt_tokens,
                            &m.n_smoke_prompt_tokens, &m.smoke_tokens, &m.n_smoke_tokens, err)))
            goto out;
    }

    /* Serialize, then parse back through the verifier's own schema: what is
     * signed is exactly what a verifier will canonicalize. */
    cJSON *sg = build_signed(&m);
    if (!sg) { rc = el_pkg_fail(err, EL_PKG_ERR_IO, "out of memory"); goto out; }
    root = cJSON_CreateObject();
    if (!root) { cJSON_Delete(sg); rc = el_pkg_fail(err, EL_PKG_ERR_IO, "out of memory"); goto out; }
    cJSON_AddItemToObject(root, "signed", sg);
    char why[256];
    if (!el_buf_str(&msg, SIGN_PREFIX) || !el_manifest_canonical(sg, &msg, why)) {
        rc = el_pkg_fail(err, EL_PKG_ERR_MALFORMED, "cannot canonicalize the manifest: %s", why);
        goto out;
    }
    uint8_t sig[EL_PKG_SIG_BYTES];
    crypto_sign_detached(sig, NULL, (const uint8_t *)msg.p, msg.len, sk);
    char keyid[17];
    el_pkg_keyid(sk + 32, keyid);
    cJSON *sigs = cJSON_AddArrayToObject(root, "signatures");
    cJSON *so = cJSON_CreateObject();
    cJSON_AddStringToObject(so, "keyid", keyid);
    cJSON_AddItemToObject(so, "sig", hex_str(sig, sizeof sig));
    cJSON_AddItemToArray(sigs, so);
    text = cJSON_Print(root);
    if (!text) { rc = el_pkg_fail(err, EL_PKG_ERR_IO, "out of memory"); goto out; }
    {
        el_manifest back;
        el_pkg_error e2;
        if (el_manifest_parse(text, strlen(text), &back, &e2) != EL_PKG_OK ||
            back.message_len != msg.len || memcmp(back.message, msg.p, msg.len) != 0) {
            el_manifest_free(&back);
            rc = el_pkg_fail(err, EL_PKG_ERR_MALFORMED, "the manifest does not read back as written: %s", e2.msg);
            goto out;
        }
        el_manifest_free(&back);
    }
    char mpath[PATH_MAX];
    if (!el_pkg_manifest_path(model_path, mpath, sizeof mpath)) {
        rc = el_pkg_fail(err, EL_PKG_ERR_USAGE, "%s: path too long", model_path);
        goto out;
    }
    size_t tl = strlen(text);
    char *withnl = realloc(text, tl + 2);
    if (!withnl) { rc = el_pkg_fail(err, EL_PKG_ERR_IO, "out of memory"); goto out; }
    text = withnl;
    text[tl] = '\n';
    text[tl + 1] = 0;
    if (!el_fs_write_atomic(mpath, text, tl + 1, 0644, err)) rc = err ? err->check : EL_PKG_ERR_IO;
out:
    free(text);
    free(gname);
    el_buf_free(&msg);
    cJSON_Delete(root);
    el_manifest_free(&m);
    return rc;
}

/* ---- verification ------------------------------------------------------ */

el_pkg_check el_pkg_verify(const char *model_path, const el_pkg_verify_opts *o, el_manifest *out,
                           char signed_by[17], el_pkg_error *err) {
    if (out) memset(out, 0, sizeof *out);
    if (signed_by) signed_by[0] = 0;
    if (!el_pkg_init()) return el_pkg_fail(err, EL_PKG_ERR_IO, "libsodium failed to initialise");
    el_pkg_verify_opts dflt = {0};
    if (!o) o = &dflt;
    char mpath[PATH_MAX];
    if (o->manifest_path ? snprintf(mpath, sizeof mpath, "%s", o->manifest_path) >= (int)sizeof mpath
                         : !el_pkg_manifest_path(model_path, mpath, sizeof mpath))
        return el_pkg_fail(err, EL_PKG_ERR_USAGE, "%s: path too long", o->manifest_path ? o->manifest_path : model_path);
    el_manifest m;
    el_pkg_check rc = el_manifest_read(mpath, &m, err);
    if (rc) return rc;

    /* signature */
    if (o->n_trusted == 0 && !o->skip_signature) {
        rc = el_pkg_fail(err, EL_PKG_ERR_KEY, "%s: no trusted public key to check the signature with "
                         "(give --pub KEY.pub or set EL_TRUSTED_KEY)", mpath);
        goto fail;
    }
    if (o->n_trusted > 0) {
        bool matched = false, ok = false;
        for (int i = 0; i < m.n_sigs && !ok; i++)
            for (int k = 0; k < o->n_trusted && !ok; k++) {
                if (strcmp(m.sig_keyids[i], o->trusted[k].keyid) != 0) continue;
                matched = true;
                if (crypto_sign_verify_detached(m.sigs[i], (const uint8_t *)m.message, m.message_len,
                                                o->trusted[k].pk) == 0) {
                    ok = true;
                    if (signed_by) memcpy(signed_by, o->trusted[k].keyid, 17);
                }
            }
        if (!matched) {
            rc = el_pkg_fail(err, EL_PKG_ERR_KEY, "%s: signed by %s%s, which is not a trusted key (trusted: %s%s)", mpath,
                             m.n_sigs ? "key " : "no key", m.n_sigs ? m.sig_keyids[0] : "", o->trusted[0].keyid,
                             o->n_trusted > 1 ? ", ..." : "");
            goto fail;
        }
        if (!ok) {
            rc = el_pkg_fail(err, EL_PKG_ERR_SIGNATURE, "%s: the signature of key %s does not verify: the manifest "
                             "was altered or the signature forged", mpath, o->trusted[0].keyid);
            goto fail;
        }
    }
    /* expiry */
    int64_t now = o->now ? o->now : (int64_t)time(NULL);
    if (now >= m.expires_t) {
        rc = el_pkg_fail(err, EL_PKG_ERR_EXPIRED, "%s: the package expired at %s", mpath, m.expires);
        goto fail;
    }
    /* version floor */
    if (o->min_version > 0 && m.version < o->min_version) {
        rc = el_pkg_fail(err, EL_PKG_ERR_VERSION, "%s: version %" PRId64 " is lower than %" PRId64
                         " (a downgrade: refused as a rollback attack)", mpath, m.version, o->min_version);
        goto fail;
    }
    /* runtime */
    if (cmp_version(m.runtime_min, EL_VERSION_STRING) > 0) {
        rc = el_pkg_fail(err, EL_PKG_ERR_RUNTIME, "%s: needs runtime %s or newer; this is %s", mpath, m.runtime_min,
                         EL_VERSION_STRING);
        goto fail;
    }
    /* device class */
    {
        const char *cls = o->device_class ? o->device_class : el_pkg_device_class();
        bool ok = false;
        for (int i = 0; i < m.n_device_classes && !ok; i++)
            ok = !strcmp(m.device_classes[i], "cpu") || !strcmp(m.device_classes[i], cls);
        if (!ok) {
            rc = el_pkg_fail(err, EL_PKG_ERR_DEVICE, "%s: device class %s is not among the package's (%s%s)", mpath, cls,
                             m.device_classes[0], m.n_device_classes > 1 ? ", ..." : "");
            goto fail;
        }
    }
    /* the manifest must describe this model file */
    if (strcmp(m.artifacts[0].path, base_name(model_path)) != 0) {
        rc = el_pkg_fail(err, EL_PKG_ERR_MALFORMED, "%s: the manifest is for \"%s\", not \"%s\"", mpath,
                         m.artifacts[0].path, base_name(model_path));
        goto fail;
    }
    /* sizes first (cheap, and catches truncation), then hashes */
    char *dir = dir_of(model_path);
    if (!dir) { rc = el_pkg_fail(err, EL_PKG_ERR_IO, "out of memory"); goto fail; }
    for (int pass = 0; pass < 2 && rc == EL_PKG_OK; pass++)
        for (int i = 0; i < m.n_artifacts && rc == EL_PKG_OK; i++) {
            char ap[PATH_MAX];
            snprintf(ap, sizeof ap, "%s/%s", dir, m.artifacts[i].path);
            if (pass == 0) {
                struct stat st;
                if (stat(ap, &st) != 0)
                    rc = el_pkg_fail(err, errno == ENOENT ? EL_PKG_ERR_SIZE : EL_PKG_ERR_IO, "%s: %s", ap,
                                     errno == ENOENT ? "missing" : strerror(errno));
                else if (!S_ISREG(st.st_mode))
                    rc = el_pkg_fail(err, EL_PKG_ERR_SIZE, "%s: not a regular file", ap);
                else if ((uint64_t)st.st_size != m.artifacts[i].size)
                    rc = el_pkg_fail(err, EL_PKG_ERR_SIZE, "%s: %lld bytes, the manifest says %" PRIu64 "%s", ap,
                                     (long long)st.st_size, m.artifacts[i].size,
                                     (uint64_t)st.st_size < m.artifacts[i].size ? " (truncated)" : "");
            } else {
                uint8_t h[32];
                uint64_t sz = 0;
                rc = el_pkg_hash_file(ap, h, &sz, err);
                if (rc == EL_PKG_OK && sz != m.artifacts[i].size)
                    rc = el_pkg_fail(err, EL_PKG_ERR_SIZE, "%s: changed size while hashing", ap);
                else if (rc == EL_PKG_OK && sodium_memcmp(h, m.artifacts[i].sha256, 32) != 0) {
                    char got[65], want[65];
                    to_hex(h, 32, got);
                    to_hex(m.artifacts[i].sha256, 32, want);
                    rc = el_pkg_fail(err, EL_PKG_ERR_HASH, "%s: SHA-256 %.16s... differs from the manifest's %.16s...",
                                     ap, got, want);
                }
            }
        }
    free(dir);
    if (rc) goto fail;
    if (out) *out = m;
    else el_manifest_free(&m);
    return EL_PKG_OK;
fail:
    el_manifest_free(&m);
    if (signed_by) signed_by[0] = 0;
    return rc;
}

/* ---- description ------------------------------------------------------- */

void el_pkg_describe(const el_manifest *m, const char *signed_by, char *out, size_t cap) {
    char h[65];
    to_hex(m->artifacts[0].sha256, 32, h);
    bool v = signed_by && signed_by[0];
    snprintf(out, cap, "package %s v%" PRId64 ", %s%s%s, sha256 %.16s, quant %s, arch %s, expires %s, from %s@%s",
             m->name, m->version, v ? "signature verified (key " : "SIGNATURE NOT CHECKED (no trusted key)",
             v ? signed_by : "", v ? ")" : "", h, m->quant_type, m->arch, m->expires, m->source_checkpoint,
             m->source_revision);
}

el_pkg_check el_pkg_describe_unsigned(const char *model_path, char *out, size_t cap, el_pkg_error *err) {
    if (!el_pkg_init()) return el_pkg_fail(err, EL_PKG_ERR_IO, "libsodium failed to initialise");
    uint8_t h[32];
    el_pkg_check c = el_pkg_hash_file(model_path, h, NULL, err);
    if (c) return c;
    el_manifest m;
    memset(&m, 0, sizeof m);
    char hex[65];
    to_hex(h, 32, hex);
    if (describe_gguf(model_path, &m, NULL, NULL) == EL_PKG_OK)
        snprintf(out, cap, "UNSIGNED model (no manifest), sha256 %.16s, quant %s, arch %s", hex, m.quant_type, m.arch);
    else
        snprintf(out, cap, "UNSIGNED model (no manifest), sha256 %.16s (not a readable GGUF file)", hex);
    el_manifest_free(&m);
    return EL_PKG_OK;
}

el_pkg_check el_pkg_tokenizer_sha256(const char *model_path, uint8_t out[32], el_pkg_error *err) {
    if (!el_pkg_init()) return el_pkg_fail(err, EL_PKG_ERR_IO, "libsodium failed to initialise");
    el_manifest m;
    memset(&m, 0, sizeof m);
    el_pkg_check c = describe_gguf(model_path, &m, NULL, err);
    if (c == EL_PKG_OK) memcpy(out, m.tokenizer_sha256, 32);
    el_manifest_free(&m);
    return c;
}
