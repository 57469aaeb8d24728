/*
 * accept_record.c — the signed deployment decision record (contract in
 * accept_record.h): build and sign, strict parse, and the checks in order
 * signature → fingerprint → device class → evidence.
 */
#include "deploy/accept_record.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <sodium.h>

#include "deploy/fingerprint.h"
#include "deploy/fsutil.h"
#include "deploy/hex.h"
#include "deploy/manifest_format.h"
#include "edgellm.h"
#include "util/buf.h"
#include "util/file.h"

#define MAL(...) el_pkg_fail(err, EL_PKG_ERR_MALFORMED, __VA_ARGS__)

static cJSON *add_hex(cJSON *o, const char *k, const uint8_t *b, size_t n) {
    char h[129];
    el_hex_encode(b, n, h);
    return cJSON_AddStringToObject(o, k, h);
}

/* The model's part of the fingerprint: what el_accept_record_check recomputes. */
static const char *const k_model_keys[] = {"model_sha256", "model_size", "arch", "quant_type", "quant_file_type",
                                           "tensor_types", "tokenizer_sha256", "chat_template_sha256", NULL};

static cJSON *model_fingerprint(const char *model_path, el_pkg_error *err) {
    uint8_t sha[32];
    uint64_t size = 0;
    if (el_pkg_hash_file(model_path, sha, &size, err)) return NULL;
    el_manifest m;
    memset(&m, 0, sizeof m);
    if (el_pkg_fingerprint(model_path, &m, NULL, err)) { el_manifest_free(&m); return NULL; }
    cJSON *f = cJSON_CreateObject();
    add_hex(f, "model_sha256", sha, 32);
    cJSON_AddNumberToObject(f, "model_size", (double)size);
    cJSON_AddStringToObject(f, "arch", m.arch ? m.arch : "");
    cJSON_AddStringToObject(f, "quant_type", m.quant_type ? m.quant_type : "");
    cJSON_AddNumberToObject(f, "quant_file_type", (double)m.quant_file_type);
    cJSON *tt = cJSON_AddObjectToObject(f, "tensor_types");
    for (int i = 0; i < m.n_tensor_types; i++) cJSON_AddNumberToObject(tt, m.tensor_types[i].type, (double)m.tensor_types[i].count);
    add_hex(f, "tokenizer_sha256", m.tokenizer_sha256, 32);
    if (m.has_chat_template) add_hex(f, "chat_template_sha256", m.chat_template_sha256, 32);
    else cJSON_AddNullToObject(f, "chat_template_sha256");
    el_manifest_free(&m);
    return f;
}

static void build_string(char *out, size_t cap) {
#if defined(__clang__)
    const char *cc = "clang " __clang_version__;
#elif defined(__GNUC__)
    const char *cc = "gcc " __VERSION__;
#else
    const char *cc = "cc";
#endif
#ifdef NDEBUG
    const char *kind = "release";
#else
    const char *kind = "debug";
#endif
#if defined(__SANITIZE_ADDRESS__)
    const char *san = "+asan";
#else
    const char *san = "";
#endif
    snprintf(out, cap, "%s; %s%s", cc, kind, san);
}

el_pkg_check el_accept_record_write(const char *out_path, const el_accept_record_in *in,
                                    const uint8_t sk[EL_PKG_SEC_BYTES], el_pkg_error *err) {
    if (in->n_verdicts < 1 || in->n_verdicts > EL_ACCEPT_MAX_CLASSES || in->n_evidence > EL_ACCEPT_MAX_EVIDENCE)
        return el_pkg_fail(err, EL_PKG_ERR_USAGE, "record: 1..%d verdicts, at most %d evidence files",
                           EL_ACCEPT_MAX_CLASSES, EL_ACCEPT_MAX_EVIDENCE);
    if (sodium_init() < 0) return el_pkg_fail(err, EL_PKG_ERR_IO, "libsodium failed to initialise");
    cJSON *root = cJSON_CreateObject(), *sg = cJSON_AddObjectToObject(root, "signed");
    el_pkg_check rc = EL_PKG_OK;
    el_buf msg = {0};
    char *text = NULL;
    cJSON_AddStringToObject(sg, "format", EL_ACCEPT_RECORD_FORMAT);
    char date[21];
    el_pkg_format_date(in->now ? in->now : (int64_t)time(NULL), date);
    cJSON_AddStringToObject(sg, "created", date);
    cJSON *fp = model_fingerprint(in->model_path, err);
    if (!fp) { rc = err ? err->check : EL_PKG_ERR_IO; goto out; }
    cJSON_AddItemToObject(sg, "fingerprint", fp);
    cJSON_AddStringToObject(fp, "runtime", el_version());
    char build[200];
    build_string(build, sizeof build);
    cJSON_AddStringToObject(fp, "build", build);
    if (in->package_name) {
        cJSON *p = cJSON_AddObjectToObject(fp, "package");
        cJSON_AddStringToObject(p, "name", in->package_name);
        cJSON_AddNumberToObject(p, "version", (double)in->package_version);
    } else cJSON_AddNullToObject(fp, "package");
    cJSON *pol = cJSON_AddObjectToObject(fp, "policies");
    cJSON_AddStringToObject(pol, "routing", in->routing_policy ? in->routing_policy : "builtin-1");
    cJSON_AddStringToObject(pol, "matrix_format", "edgellm-accept/1");
    cJSON_AddStringToObject(fp, "matrix_name", in->matrix_name);
    add_hex(fp, "matrix_sha256", in->matrix_sha256, 32);
    cJSON *vd = cJSON_AddObjectToObject(sg, "verdicts");
    for (int i = 0; i < in->n_verdicts; i++) {
        cJSON *v = cJSON_AddObjectToObject(vd, in->verdicts[i].device_class);
        cJSON_AddStringToObject(v, "verdict", in->verdicts[i].pass ? "pass" : "fail");
        cJSON_AddNumberToObject(v, "cells", (double)in->verdicts[i].cells);
        cJSON_AddNumberToObject(v, "passed", (double)in->verdicts[i].passed);
    }
    cJSON *ev = cJSON_AddArrayToObject(sg, "evidence");
    for (int i = 0; i < in->n_evidence; i++) {
        if (!el_pkg_plain_name(in->evidence[i])) {
            rc = el_pkg_fail(err, EL_PKG_ERR_USAGE, "evidence \"%s\": not a plain file name", in->evidence[i]);
            goto out;
        }
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", in->evidence_dir, in->evidence[i]);
        uint8_t h[32];
        if ((rc = el_pkg_hash_file(p, h, NULL, err))) goto out;
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "path", in->evidence[i]);
        add_hex(e, "sha256", h, 32);
        cJSON_AddItemToArray(ev, e);
    }
    char why[256];
    if (!el_buf_str(&msg, EL_ACCEPT_RECORD_PREFIX) || !el_manifest_canonical(sg, &msg, why)) {
        rc = el_pkg_fail(err, EL_PKG_ERR_MALFORMED, "record: %s", why);
        goto out;
    }
    uint8_t sig[EL_PKG_SIG_BYTES], pk[EL_PKG_PUB_BYTES];
    crypto_sign_detached(sig, NULL, (const uint8_t *)msg.p, msg.len, sk);
    crypto_sign_ed25519_sk_to_pk(pk, sk);
    char kid[17];
    el_pkg_keyid(pk, kid);
    cJSON *sigs = cJSON_AddArrayToObject(root, "signatures"), *s1 = cJSON_CreateObject();
    cJSON_AddStringToObject(s1, "keyid", kid);
    add_hex(s1, "sig", sig, EL_PKG_SIG_BYTES);
    cJSON_AddItemToArray(sigs, s1);
    text = cJSON_Print(root);
    if (!text) { rc = el_pkg_fail(err, EL_PKG_ERR_IO, "out of memory"); goto out; }
    /* what is written must verify as written */
    el_accept_record back;
    if ((rc = el_accept_record_parse(text, strlen(text), &back, err))) goto out;
    bool same = back.message_len == msg.len && !memcmp(back.message, msg.p, msg.len);
    el_accept_record_free(&back);
    if (!same) { rc = el_pkg_fail(err, EL_PKG_ERR_MALFORMED, "record: does not read back as signed"); goto out; }
    size_t tl = strlen(text);
    text[tl] = '\n';
    if (!el_fs_write_atomic(out_path, text, tl + 1, 0644, err)) rc = err ? err->check : EL_PKG_ERR_IO;
out:
    free(text);
    el_buf_free(&msg);
    cJSON_Delete(root);
    return rc;
}

/* ---- parsing ---- */

static bool dup_key(const cJSON *o, const char **which) {
    for (const cJSON *a = o->child; a; a = a->next)
        for (const cJSON *b = a->next; b; b = b->next)
            if (!strcmp(a->string, b->string)) { *which = a->string; return true; }
    return false;
}

static bool only_keys(const cJSON *o, const char *const *keys, const char **bad) {
    for (const cJSON *a = o->child; a; a = a->next) {
        int i = 0;
        while (keys[i] && strcmp(keys[i], a->string)) i++;
        if (!keys[i]) { *bad = a->string; return false; }
    }
    return true;
}

static bool hex_field(const cJSON *o, const char *k, uint8_t *out, size_t n) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) && strlen(v->valuestring) == 2 * n && el_hex_decode(v->valuestring, out, n);
}

static int depth(const cJSON *v) {
    int d = 0;
    for (const cJSON *c = v->child; c; c = c->next) {
        int x = depth(c);
        if (x > d) d = x;
    }
    return d + (cJSON_IsArray(v) || cJSON_IsObject(v));
}

el_pkg_check el_accept_record_parse(const char *json, size_t len, el_accept_record *r, el_pkg_error *err) {
    memset(r, 0, sizeof *r);
    if (len > EL_ACCEPT_RECORD_MAX_BYTES) return MAL("record: %zu bytes, more than %u", len, EL_ACCEPT_RECORD_MAX_BYTES);
    /* nesting: the format needs 5 levels; refuse deep input before cJSON recurses into it */
    int d = 0;
    bool str = false;
    for (size_t i = 0; i < len; i++) {
        char c = json[i];
        if (str) { if (c == '\\') i++; else if (c == '"') str = false; }
        else if (c == '"') str = true;
        else if (c == '{' || c == '[') { if (++d > 6) return MAL("record: nested deeper than the format"); }
        else if (c == '}' || c == ']') d--;
    }
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root) return MAL("record: not JSON");
    el_pkg_check rc = EL_PKG_OK;
    const char *bad = NULL;
    static const char *const top[] = {"signed", "signatures", NULL};
    static const char *const sk[] = {"format", "created", "fingerprint", "verdicts", "evidence", NULL};
    if (!cJSON_IsObject(root) || depth(root) > 6) { rc = MAL("record: expected an object"); goto out; }
    if (dup_key(root, &bad) || !only_keys(root, top, &bad)) { rc = MAL("record: key \"%.60s\": duplicate or unknown", bad); goto out; }
    cJSON *sg = cJSON_GetObjectItemCaseSensitive(root, "signed");
    if (!cJSON_IsObject(sg)) { rc = MAL("signed: required, an object"); goto out; }
    if (dup_key(sg, &bad) || !only_keys(sg, sk, &bad)) { rc = MAL("signed.%.60s: duplicate or unknown key", bad); goto out; }
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(sg, "format");
    if (!cJSON_IsString(f) || strcmp(f->valuestring, EL_ACCEPT_RECORD_FORMAT)) {
        rc = MAL("signed.format: expected \"%s\"", EL_ACCEPT_RECORD_FORMAT);
        goto out;
    }
    const cJSON *cr = cJSON_GetObjectItemCaseSensitive(sg, "created");
    int64_t t;
    if (!cJSON_IsString(cr) || !el_pkg_parse_date(cr->valuestring, &t)) { rc = MAL("signed.created: a UTC date"); goto out; }
    const cJSON *fp = cJSON_GetObjectItemCaseSensitive(sg, "fingerprint");
    if (!cJSON_IsObject(fp)) { rc = MAL("signed.fingerprint: required, an object"); goto out; }
    if (dup_key(fp, &bad)) { rc = MAL("signed.fingerprint.%.60s: duplicate key", bad); goto out; }
    if (!hex_field(fp, "model_sha256", r->model_sha256, 32)) { rc = MAL("signed.fingerprint.model_sha256: 64 hex digits"); goto out; }
    const cJSON *ms = cJSON_GetObjectItemCaseSensitive(fp, "model_size");
    if (!cJSON_IsNumber(ms) || ms->valuedouble < 0 || ms->valuedouble > EL_MANIFEST_MAX_INT ||
        ms->valuedouble != floor(ms->valuedouble)) {
        rc = MAL("signed.fingerprint.model_size: an integer >= 0");
        goto out;
    }
    r->model_size = (int64_t)ms->valuedouble;
    uint8_t tmp[32];
    if (!hex_field(fp, "matrix_sha256", tmp, 32)) { rc = MAL("signed.fingerprint.matrix_sha256: 64 hex digits"); goto out; }
    const cJSON *vd = cJSON_GetObjectItemCaseSensitive(sg, "verdicts");
    if (!cJSON_IsObject(vd) || !vd->child) { rc = MAL("signed.verdicts: required, a non-empty object"); goto out; }
    if (dup_key(vd, &bad)) { rc = MAL("signed.verdicts.%.60s: duplicate key", bad); goto out; }
    for (const cJSON *v = vd->child; v; v = v->next) {
        if (r->n_verdicts >= EL_ACCEPT_MAX_CLASSES) { rc = MAL("signed.verdicts: more than %d classes", EL_ACCEPT_MAX_CLASSES); goto out; }
        el_accept_verdict *o = &r->verdicts[r->n_verdicts++];
        if (!v->string[0] || strlen(v->string) >= sizeof o->device_class) { rc = MAL("signed.verdicts: a device class of 1..63 bytes"); goto out; }
        snprintf(o->device_class, sizeof o->device_class, "%s", v->string);
        const cJSON *vv = cJSON_GetObjectItemCaseSensitive(v, "verdict"), *c = cJSON_GetObjectItemCaseSensitive(v, "cells"),
                    *p = cJSON_GetObjectItemCaseSensitive(v, "passed");
        if (!cJSON_IsObject(v) || !cJSON_IsString(vv) || (strcmp(vv->valuestring, "pass") && strcmp(vv->valuestring, "fail")) ||
            !cJSON_IsNumber(c) || !cJSON_IsNumber(p) || c->valuedouble < 0 || p->valuedouble < 0 ||
            p->valuedouble > c->valuedouble || c->valuedouble > 1e6) {
            rc = MAL("signed.verdicts.%.60s: {\"verdict\": \"pass\"|\"fail\", \"cells\": N, \"passed\": N <= cells}", v->string);
            goto out;
        }
        o->pass = !strcmp(vv->valuestring, "pass");
        o->cells = (int64_t)c->valuedouble;
        o->passed = (int64_t)p->valuedouble;
        if (o->pass && o->passed != o->cells) { rc = MAL("signed.verdicts.%.60s: \"pass\" with failed cells", v->string); goto out; }
    }
    const cJSON *ev = cJSON_GetObjectItemCaseSensitive(sg, "evidence");
    if (!cJSON_IsArray(ev)) { rc = MAL("signed.evidence: required, an array"); goto out; }
    int i = 0;
    for (const cJSON *e = ev->child; e; e = e->next, i++) {
        if (r->n_evidence >= EL_ACCEPT_MAX_EVIDENCE) { rc = MAL("signed.evidence: more than %d files", EL_ACCEPT_MAX_EVIDENCE); goto out; }
        el_accept_evidence *o = &r->evidence[r->n_evidence++];
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(e, "path");
        if (!cJSON_IsObject(e) || !cJSON_IsString(p) || !el_pkg_plain_name(p->valuestring) ||
            strlen(p->valuestring) >= sizeof o->path || !hex_field(e, "sha256", o->sha256, 32)) {
            rc = MAL("signed.evidence[%d]: {\"path\": a plain file name, \"sha256\": 64 hex digits}", i);
            goto out;
        }
        snprintf(o->path, sizeof o->path, "%s", p->valuestring);
    }
    const cJSON *sigs = cJSON_GetObjectItemCaseSensitive(root, "signatures");
    if (!cJSON_IsArray(sigs) || !sigs->child) { rc = MAL("signatures: required, a non-empty array"); goto out; }
    i = 0;
    for (const cJSON *s = sigs->child; s; s = s->next, i++) {
        if (r->n_sigs >= 4) { rc = MAL("signatures: more than 4"); goto out; }
        const cJSON *k = cJSON_GetObjectItemCaseSensitive(s, "keyid");
        uint8_t kid[8];
        if (!cJSON_IsObject(s) || !cJSON_IsString(k) || strlen(k->valuestring) != 16 || !el_hex_decode(k->valuestring, kid, 8) ||
            !hex_field(s, "sig", r->sigs[r->n_sigs], EL_PKG_SIG_BYTES)) {
            rc = MAL("signatures[%d]: {\"keyid\": 16 hex digits, \"sig\": 128 hex digits}", i);
            goto out;
        }
        snprintf(r->sig_keyids[r->n_sigs++], 17, "%s", k->valuestring);
    }
    el_buf msg = {0};
    char why[256];
    if (!el_buf_str(&msg, EL_ACCEPT_RECORD_PREFIX) || !el_manifest_canonical(sg, &msg, why)) {
        el_buf_free(&msg);
        rc = MAL("signed: %s", why);
        goto out;
    }
    r->message = msg.p;
    r->message_len = msg.len;
    r->signed_obj = cJSON_DetachItemFromObjectCaseSensitive(root, "signed");
out:
    cJSON_Delete(root);
    if (rc) el_accept_record_free(r);
    return rc;
}

el_pkg_check el_accept_record_read(const char *path, el_accept_record *r, el_pkg_error *err) {
    memset(r, 0, sizeof *r);
    struct stat st;
    char msg[300];
    int fd = el_open_regular(path, &st, msg, sizeof msg);
    if (fd < 0) return el_pkg_fail(err, EL_PKG_ERR_IO, "%s", msg);
    if ((uint64_t)st.st_size > EL_ACCEPT_RECORD_MAX_BYTES) {
        close(fd);
        return MAL("%s: %lld bytes, more than %u", path, (long long)st.st_size, EL_ACCEPT_RECORD_MAX_BYTES);
    }
    char *buf = malloc((size_t)st.st_size + 1);
    if (!buf) { close(fd); return el_pkg_fail(err, EL_PKG_ERR_IO, "out of memory"); }
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += (size_t)n;
    }
    close(fd);
    el_pkg_check rc = got == (size_t)st.st_size ? el_accept_record_parse(buf, got, r, err)
                                                : el_pkg_fail(err, EL_PKG_ERR_IO, "%s: short read", path);
    free(buf);
    return rc;
}

void el_accept_record_free(el_accept_record *r) {
    cJSON_Delete(r->signed_obj);
    free(r->message);
    memset(r, 0, sizeof *r);
}

/* ---- the checks ---- */

static bool same_json(const cJSON *a, const cJSON *b) {
    if (!a || !b) return a == b;
    el_buf x = {0}, y = {0};
    char why[256];
    bool ok = el_manifest_canonical(a, &x, why) && el_manifest_canonical(b, &y, why) && x.len == y.len &&
              !memcmp(x.p, y.p, x.len);
    el_buf_free(&x);
    el_buf_free(&y);
    return ok;
}

el_pkg_check el_accept_record_check(const el_accept_record *r, const el_accept_check_opts *o, el_pkg_error *err) {
    if (sodium_init() < 0) return el_pkg_fail(err, EL_PKG_ERR_IO, "libsodium failed to initialise");
    /* 1. signature */
    if (o->n_trusted < 1) return el_pkg_fail(err, EL_PKG_ERR_KEY, "record: no trusted key to check it against");
    bool any_trusted = false;
    for (int s = 0; s < r->n_sigs; s++)
        for (int k = 0; k < o->n_trusted; k++) {
            if (strcmp(r->sig_keyids[s], o->trusted[k].keyid)) continue;
            any_trusted = true;
            if (crypto_sign_verify_detached(r->sigs[s], (const uint8_t *)r->message, r->message_len, o->trusted[k].pk) == 0)
                goto signed_ok;
        }
    if (any_trusted) return el_pkg_fail(err, EL_PKG_ERR_SIGNATURE, "record: the signature does not verify (altered or forged)");
    return el_pkg_fail(err, EL_PKG_ERR_KEY, "record: signed by key %s, which is not trusted here", r->sig_keyids[0]);
signed_ok:
    /* 2. fingerprint */
    if (o->model_path) {
        cJSON *now = model_fingerprint(o->model_path, err);
        if (!now) return err ? err->check : EL_PKG_ERR_IO;
        const cJSON *fp = cJSON_GetObjectItemCaseSensitive(r->signed_obj, "fingerprint");
        for (int i = 0; k_model_keys[i]; i++)
            if (!same_json(cJSON_GetObjectItemCaseSensitive(fp, k_model_keys[i]),
                           cJSON_GetObjectItemCaseSensitive(now, k_model_keys[i]))) {
                cJSON_Delete(now);
                return el_pkg_fail(err, EL_PKG_ERR_HASH, "record: fingerprint.%s differs from %s's: the record is "
                                   "for another model", k_model_keys[i], o->model_path);
            }
        cJSON_Delete(now);
    }
    /* 3. device class */
    if (o->device_class) {
        const el_accept_verdict *v = NULL;
        for (int i = 0; i < r->n_verdicts; i++)
            if (!strcmp(r->verdicts[i].device_class, o->device_class)) v = &r->verdicts[i];
        if (!v) return el_pkg_fail(err, EL_PKG_ERR_DEVICE, "record: no verdict for device class \"%s\"", o->device_class);
        if (!v->pass)
            return el_pkg_fail(err, EL_PKG_ERR_DEVICE, "record: device class \"%s\" failed acceptance (%" PRId64
                               " of %" PRId64 " cells passed)", o->device_class, v->passed, v->cells);
    }
    /* 4. evidence */
    if (o->evidence_dir)
        for (int i = 0; i < r->n_evidence; i++) {
            char p[4096];
            snprintf(p, sizeof p, "%s/%s", o->evidence_dir, r->evidence[i].path);
            uint8_t h[32];
            el_pkg_error e2;
            if (el_pkg_hash_file(p, h, NULL, &e2))
                return el_pkg_fail(err, EL_PKG_ERR_IO, "record: evidence %s: %s", r->evidence[i].path, e2.msg);
            if (memcmp(h, r->evidence[i].sha256, 32))
                return el_pkg_fail(err, EL_PKG_ERR_HASH, "record: evidence %s: SHA-256 differs from the record's",
                                   r->evidence[i].path);
        }
    return EL_PKG_OK;
}

/* ---- the store's gate ---- */

el_pkg_check el_accept_store_gate(const char *store_dir, const char *model_path, const el_pubkey *store_key,
                                  el_pkg_error *err) {
    char pp[4096], text[4096];
    snprintf(pp, sizeof pp, "%s/device-policy.json", store_dir);
    struct stat st;
    if (lstat(pp, &st) != 0) return EL_PKG_OK; /* no policy: the gate is open */
    int n = el_read_small(pp, text, sizeof text);
    if (n < 0) return el_pkg_fail(err, EL_PKG_ERR_STORE, "%s: not a readable regular file", pp);
    if ((size_t)n >= sizeof text - 1) return el_pkg_fail(err, EL_PKG_ERR_STORE, "%s: larger than %zu bytes", pp, sizeof text - 2);
    cJSON *p = cJSON_ParseWithLength(text, (size_t)n);
    el_pkg_check rc = EL_PKG_OK;
    const char *bad = NULL;
    static const char *const keys[] = {"device_class", "require_acceptance", NULL};
    const cJSON *dc = cJSON_GetObjectItemCaseSensitive(p, "device_class");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(p, "require_acceptance");
    if (!cJSON_IsObject(p)) rc = el_pkg_fail(err, EL_PKG_ERR_STORE, "%s: not a JSON object", pp);
    else if (dup_key(p, &bad) || !only_keys(p, keys, &bad))
        rc = el_pkg_fail(err, EL_PKG_ERR_STORE, "%s: key \"%.60s\": duplicate or unknown", pp, bad);
    else if (!cJSON_IsString(dc) || !dc->valuestring[0] || strlen(dc->valuestring) > 63)
        rc = el_pkg_fail(err, EL_PKG_ERR_STORE, "%s: device_class: required, a string of 1..63 bytes", pp);
    else if (!cJSON_IsBool(req))
        rc = el_pkg_fail(err, EL_PKG_ERR_STORE, "%s: require_acceptance: required, true or false", pp);
    if (rc || cJSON_IsFalse(req)) { cJSON_Delete(p); return rc; }
    char rp[4096];
    snprintf(rp, sizeof rp, "%s%s", model_path, EL_ACCEPT_RECORD_SUFFIX);
    el_accept_record r;
    el_pkg_error e2;
    if (el_accept_record_read(rp, &r, &e2)) {
        rc = el_pkg_fail(err, EL_PKG_ERR_DEVICE, "acceptance: the device policy requires a passing record for \"%s\": "
                         "%.300s", dc->valuestring, e2.msg);
        cJSON_Delete(p);
        return rc;
    }
    el_accept_check_opts o = {.trusted = store_key, .n_trusted = 1, .model_path = model_path,
                              .device_class = dc->valuestring};
    if (el_accept_record_check(&r, &o, &e2))
        rc = el_pkg_fail(err, e2.check, "acceptance: %s: %.400s", rp, e2.msg);
    el_accept_record_free(&r);
    cJSON_Delete(p);
    return rc;
}
