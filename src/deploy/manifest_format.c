/*
 * manifest_format.c — the manifest format: canonical JSON, dates, the strict
 * parser and schema of a manifest file, and the builder of the "signed"
 * object (contract in manifest_format.h, the format in manifest.h).
 *
 * Invariant: nothing read from a manifest is used before the schema check
 * accepts it.
 */
#include "deploy/manifest_format.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "deploy/hex.h"
#include "util/buf.h"
#include "util/file.h"

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
        if (!(d >= -EL_MANIFEST_MAX_INT && d <= EL_MANIFEST_MAX_INT) || d != (double)(int64_t)d) {
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

void el_pkg_format_date(int64_t t, char out[21]) {
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
    if (!cJSON_IsString(v) || !el_hex_decode(v->valuestring, out, 32))
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

bool el_pkg_plain_name(const char *p) {
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
    if (!get_int(s, sg, "version", 1, (int64_t)EL_MANIFEST_MAX_INT, &m->version)) return false;
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
        if (!el_pkg_plain_name(ar->path)) return bad(s, "manifest: artifact path \"%.200s\" is not a plain file name", ar->path);
        for (int k = 0; k + 1 < m->n_artifacts; k++)
            if (!strcmp(m->artifacts[k].path, ar->path)) return bad(s, "manifest: artifact \"%.200s\" listed twice", ar->path);
        int64_t size;
        if (!get_int(s, a, "size", 0, (int64_t)EL_MANIFEST_MAX_INT, &size)) return false;
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
    if (!el_buf_str(&canon_buf, EL_MANIFEST_SIGN_PREFIX) || !el_manifest_canonical(sg, &canon_buf, why)) {
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
        if (!cJSON_IsObject(c) || !cJSON_IsString(kid) || !el_hex_decode(kid->valuestring, kb, 8) ||
            !cJSON_IsString(sig) || !el_hex_decode(sig->valuestring, m->sigs[m->n_sigs], EL_PKG_SIG_BYTES)) {
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
    el_hex_encode(b, n, h);
    return cJSON_CreateString(h);
}

static cJSON *tokens_json(const int32_t *t, int n) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(t[i]));
    return a;
}

cJSON *el_manifest_build_signed(const el_manifest *m) {
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
