/*
 * test_manifest.c — signed packages (src/deploy/: manifest_format.c, sign.c, verify.c) and the check
 * `run`, `chat`, `serve` make before loading:
 *   - canonical JSON: order- and whitespace-independent, duplicates and
 *     fractions refused;
 *   - keygen / sign / verify round trip; a re-ordered manifest still verifies;
 *   - every byte-flip position class is refused before load: GGUF header,
 *     metadata, tensor infos, tensor data (hash), every byte of the manifest
 *     (two flip patterns), every hex digit of the signature (signature), and
 *     truncation / extension (size);
 *   - forged signature, wrong key, expired manifest, downgrade, newer
 *     runtime, other device, manifest of another file: each its own error
 *     and its own CLI exit status;
 *   - the CLI: run/chat/serve refuse what fails and name the check; plain
 *     GGUF loads only with --allow-unsigned; the fingerprint is reported.
 * Works on a copy of reference/models/tiny-llama-Q8_0.gguf.
 */
#include <inttypes.h>
#include <limits.h>
#include <time.h>

#include "package/gguf.h"
#include "pkgtest.h"

static char g_dir[512], g_model[PATH_MAX], g_manifest[PATH_MAX], g_key[PATH_MAX], g_key2[PATH_MAX];
static el_pubkey g_pub, g_pub2;
static uint8_t g_sk[64], g_sk2[64];

/* Plain rewrite (no fsync: the tests rewrite the manifest thousands of times). */
static void write_plain(const char *path, const char *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(data, 1, n, f);
        fclose(f);
    }
}

static el_pkg_check verify_with(const el_pubkey *k, int64_t min_version, int64_t now, el_pkg_error *e) {
    el_pkg_verify_opts vo = {.trusted = k, .n_trusted = 1, .min_version = min_version, .now = now};
    return el_pkg_verify(g_model, &vo, NULL, NULL, e);
}

static el_pkg_check verify_now(el_pkg_error *e) { return verify_with(&g_pub, 0, 0, e); }

/* ---- canonical JSON ---------------------------------------------------- */

static bool canon_of(const char *json, char *out, size_t cap) {
    cJSON *v = cJSON_Parse(json);
    if (!v) return false;
    el_buf b = {0};
    char why[256];
    bool ok = el_manifest_canonical(v, &b, why);
    if (ok) snprintf(out, cap, "%s", b.p);
    el_buf_free(&b);
    cJSON_Delete(v);
    return ok;
}

static void test_canonical(void) {
    char a[256], b[256];
    CHECK(canon_of("{\"b\": 1, \"a\": [true, null, \"x\\\"y\\\\z\\n\"], \"A\": {\"z\":-3,\"y\":0}}", a, sizeof a));
    CHECKF(!strcmp(a, "{\"A\":{\"y\":0,\"z\":-3},\"a\":[true,null,\"x\\\"y\\\\z\\u000a\"],\"b\":1}"), "got %s", a);
    CHECK(canon_of("{ \"A\":{\"z\" : -3 ,\"y\":0},\n\t\"a\":[true ,null,\"x\\\"y\\\\z\\u000A\"] , \"b\":1.0e0}", b, sizeof b));
    CHECKF(!strcmp(a, b), "reordered/reformatted: %s vs %s", a, b);
    CHECK(!canon_of("{\"a\":1,\"a\":2}", a, sizeof a));           /* duplicate key */
    CHECK(!canon_of("{\"a\":1.5}", a, sizeof a));                  /* fraction */
    CHECK(!canon_of("{\"a\":1e300}", a, sizeof a));                /* out of range */
    CHECK(canon_of("{\"\\u00e9\":\"\\u00e9\"}", a, sizeof a));     /* non-ASCII verbatim */
    CHECKF(!strcmp(a, "{\"\xc3\xa9\":\"\xc3\xa9\"}"), "got %s", a);
}

/* ---- keys, sign, verify ------------------------------------------------ */

static void test_keys(void) {
    el_pkg_error e;
    el_pubkey p;
    CHECK(el_pkg_keygen(g_key, false, &g_pub, &e) == EL_PKG_OK);
    CHECK(el_pkg_keygen(g_key2, false, &g_pub2, &e) == EL_PKG_OK);
    CHECKF(el_pkg_keygen(g_key, false, &p, &e) == EL_PKG_ERR_IO && strstr(e.msg, "--force"), "overwrite: %s", e.msg);
    char path[PATH_MAX + 8];
    snprintf(path, sizeof path, "%s.sec", g_key);
    struct stat st;
    CHECK(stat(path, &st) == 0 && (st.st_mode & 077) == 0);
    el_pubkey sp;
    CHECK(el_pkg_read_sec(path, g_sk, &sp, &e) == EL_PKG_OK && !memcmp(sp.pk, g_pub.pk, 32));
    snprintf(path, sizeof path, "%s.sec", g_key2);
    CHECK(el_pkg_read_sec(path, g_sk2, NULL, &e) == EL_PKG_OK);
    snprintf(path, sizeof path, "%s.pub", g_key);
    CHECK(el_pkg_read_pub(path, &p, &e) == EL_PKG_OK && !strcmp(p.keyid, g_pub.keyid));
    CHECK(strcmp(g_pub.keyid, g_pub2.keyid) != 0);
    /* a damaged public key file is refused */
    char bad[PATH_MAX];
    snprintf(bad, sizeof bad, "%s/bad.pub", g_dir);
    FILE *f = fopen(bad, "w");
    fputs("edgellm-ed25519-public 00zz\n", f);
    fclose(f);
    CHECK(el_pkg_read_pub(bad, &p, &e) == EL_PKG_ERR_KEY);
}

static void sign_v5(void) {
    el_pkg_sign_params sp = {.version = 5, .source_checkpoint = "test/tiny-llama", .source_revision = "r1",
                             .converter = "llama.cpp", .quant_config = "Q8_0 everywhere", .smoke = true};
    el_pkg_error e;
    CHECKF(el_pkg_sign(g_model, g_sk, &sp, &e) == EL_PKG_OK, "sign: %s", e.msg);
}

static void test_sign_verify(void) {
    sign_v5();
    el_pkg_error e;
    el_manifest m;
    char by[17];
    el_pkg_verify_opts vo = {.trusted = &g_pub, .n_trusted = 1};
    CHECKF(el_pkg_verify(g_model, &vo, &m, by, &e) == EL_PKG_OK, "verify: %s", e.msg);
    struct stat st;
    stat(g_model, &st);
    CHECK(!strcmp(by, g_pub.keyid));
    CHECK(m.version == 5 && m.n_artifacts == 1 && m.artifacts[0].size == (uint64_t)st.st_size);
    CHECK(!strcmp(m.artifacts[0].path, "model.gguf"));
    CHECKF(!strcmp(m.quant_type, "Q8_0") && !strcmp(m.arch, "llama"), "quant %s arch %s", m.quant_type, m.arch);
    CHECK(!strcmp(m.source_checkpoint, "test/tiny-llama") && !strcmp(m.source_revision, "r1"));
    CHECK(!strcmp(m.runtime_min, EL_VERSION_STRING) && m.n_device_classes == 1);
    CHECK(m.has_smoke && m.smoke_n_predict == 8 && m.n_smoke_tokens == 8 && m.n_smoke_prompt_tokens > 0);
    int64_t now = (int64_t)time(NULL);
    CHECK(m.expires_t > now + 364 * 86400 && m.expires_t < now + 366 * 86400);
    /* the smoke expectation reproduces */
    CHECKF(el_pkg_smoke_check(g_model, &m, &e) == EL_PKG_OK, "smoke: %s", e.msg);
    el_manifest_free(&m);

    /* the verifier does not depend on the file's field order or layout:
     * members reversed at every level, printed unformatted, still verifies */
    size_t len;
    char *text = el_test_read_file(g_manifest, &len);
    cJSON *root = cJSON_Parse(text);
    free(text);
    cJSON *sg = cJSON_GetObjectItemCaseSensitive(root, "signed");
    cJSON *rev = cJSON_CreateObject();
    cJSON *kids[64];
    int n = 0;
    for (cJSON *c = sg->child; c && n < 64; c = c->next) kids[n++] = c;
    while (n--) cJSON_AddItemToObject(rev, kids[n]->string, cJSON_Duplicate(kids[n], 1));
    cJSON_ReplaceItemInObjectCaseSensitive(root, "signed", rev);
    char *flat = cJSON_PrintUnformatted(root);
    char *orig = el_test_read_file(g_manifest, &len);
    write_plain(g_manifest, flat, strlen(flat));
    CHECKF(verify_now(&e) == EL_PKG_OK, "re-ordered manifest: %s", e.msg);
    write_plain(g_manifest, orig, len);
    free(flat);
    free(orig);
    cJSON_Delete(root);
}

/* ---- byte flips and truncation ----------------------------------------- */

static bool flip_at(const char *path, long off, unsigned char mask) {
    int fd = open(path, O_RDWR);
    if (fd < 0) return false;
    unsigned char c;
    bool ok = pread(fd, &c, 1, off) == 1;
    c ^= mask;
    ok = ok && pwrite(fd, &c, 1, off) == 1;
    close(fd);
    return ok;
}

typedef struct flip_class { const char *name; long off[64]; int n; } flip_class;

static void add_off(flip_class *c, long off) { if (c->n < 64 && off >= 0) c->off[c->n++] = off; }

static long find_bytes(const uint8_t *base, size_t size, const char *needle, size_t from) {
    size_t nl = strlen(needle);
    for (size_t i = from; i + nl <= size; i++)
        if (!memcmp(base + i, needle, nl)) return (long)i;
    return -1;
}

static void test_gguf_flips(void) {
    el_error ge;
    el_gguf *g = el_gguf_open(g_model, &ge);
    CHECKF(g != NULL, "open: %s", ge.msg);
    if (!g) return;
    const uint8_t *base = el_gguf_base(g);
    size_t size = el_gguf_file_size(g);
    flip_class cls[4] = {{.name = "header"}, {.name = "metadata"}, {.name = "tensor info"}, {.name = "tensor data"}};
    for (long i = 0; i < 24; i++) add_off(&cls[0], i); /* magic, version, tensor and kv counts */
    long arch = find_bytes(base, size, "general.architecture", 24);
    long tok = find_bytes(base, size, "tokenizer.ggml.tokens", 24);
    add_off(&cls[1], arch);                             /* a key */
    add_off(&cls[1], arch + 20);                        /* its value type */
    add_off(&cls[1], arch + 20 + 4 + 8);                /* its value "llama" */
    for (int k = 0; k < 8; k++) add_off(&cls[1], tok + 21 + 12 + 200 * k); /* vocab strings */
    const el_gguf_tensor *t0 = el_gguf_tensor_at(g, 0);
    char name[128];
    snprintf(name, sizeof name, "%.*s", (int)t0->name.len, t0->name.ptr);
    long info = find_bytes(base, size, name, (size_t)(tok > 0 ? tok : 24));
    add_off(&cls[2], info);                              /* the name */
    add_off(&cls[2], info + (long)t0->name.len + 4);     /* a dimension */
    add_off(&cls[2], info + (long)t0->name.len + 4 + 8 * t0->n_dims + 4); /* the offset */
    for (int64_t i = 0; i < el_gguf_n_tensors(g) && cls[3].n < 40; i += 3) {
        const el_gguf_tensor *t = el_gguf_tensor_at(g, i);
        long off = (long)((const uint8_t *)t->data - base);
        add_off(&cls[3], off);
        add_off(&cls[3], off + (long)t->nbytes / 2);
    }
    add_off(&cls[3], (long)size - 1);
    el_gguf_close(g);

    for (int c = 0; c < 4; c++) {
        int refused = 0, hash = 0;
        for (int i = 0; i < cls[c].n; i++) {
            el_pkg_error e;
            CHECK(flip_at(g_model, cls[c].off[i], 0x01));
            el_pkg_check r = verify_now(&e);
            CHECK(flip_at(g_model, cls[c].off[i], 0x01));
            refused += r != EL_PKG_OK;
            hash += r == EL_PKG_ERR_HASH;
        }
        CHECKF(cls[c].n > 0 && refused == cls[c].n && hash == cls[c].n, "%s: %d positions, %d refused, %d by hash",
               cls[c].name, cls[c].n, refused, hash);
        printf("byte flips, %-12s %2d positions: %d refused (hash)\n", cls[c].name, cls[c].n, refused);
    }
    el_pkg_error e;
    CHECKF(verify_now(&e) == EL_PKG_OK, "restored: %s", e.msg);

    /* the CLI refuses before loading: a flipped magic is reported as a hash
     * failure, not as the loader's "bad magic", and nothing is generated */
    CHECK(flip_at(g_model, 0, 0x01));
    char pub[PATH_MAX + 8];
    snprintf(pub, sizeof pub, "%s.pub", g_key);
    const char *run[] = {"run", "-m", g_model, "--pub", pub, "-p", "hi", "-n", "2", "--temp", "0", NULL};
    el_test_proc r;
    CHECK(el_test_run_cli(run, &r));
    CHECKF(r.status == el_pkg_exit_code(EL_PKG_ERR_HASH) && strstr(r.err, "hash check failed") && !strstr(r.err, "magic") &&
           r.out[0] == 0, "run on flipped header: %d %s", r.status, r.err);
    el_test_proc_free(&r);
    const char *chat[] = {"chat", "-m", g_model, "--pub", pub, NULL};
    CHECK(el_test_run_cli(chat, &r));
    CHECKF(r.status == el_pkg_exit_code(EL_PKG_ERR_HASH) && strstr(r.err, "hash check failed"), "chat: %d %s", r.status, r.err);
    el_test_proc_free(&r);
    const char *serve[] = {"serve", "-m", g_model, "--pub", pub, "--port", "0", NULL};
    CHECK(el_test_run_cli(serve, &r));
    CHECKF(r.status == el_pkg_exit_code(EL_PKG_ERR_HASH) && strstr(r.err, "hash check failed") && !strstr(r.err, "listening"),
           "serve: %d %s", r.status, r.err);
    el_test_proc_free(&r);
    CHECK(flip_at(g_model, 0, 0x01));
}

static void test_truncation(void) {
    struct stat st;
    stat(g_model, &st);
    off_t full = st.st_size;
    char saved[PATH_MAX + 8];
    snprintf(saved, sizeof saved, "%s.orig", g_model);
    CHECK(copy_file(g_model, saved));
    off_t sizes[] = {full - 1, full / 2, 4096, 24, 0};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        CHECK(truncate(g_model, sizes[i]) == 0);
        el_pkg_error e;
        el_pkg_check r = verify_now(&e);
        CHECKF(r == EL_PKG_ERR_SIZE && strstr(e.msg, "truncated"), "truncated to %lld: %s (%s)", (long long)sizes[i],
               el_pkg_check_name(r), e.msg);
        CHECK(copy_file(saved, g_model));
    }
    FILE *f = fopen(g_model, "ab");
    fputc(0, f);
    fclose(f);
    el_pkg_error e;
    CHECK(verify_now(&e) == EL_PKG_ERR_SIZE);
    /* CLI: run on a truncated package */
    CHECK(truncate(g_model, full - 1) == 0);
    char pub[PATH_MAX + 8];
    snprintf(pub, sizeof pub, "%s.pub", g_key);
    const char *run[] = {"run", "-m", g_model, "--pub", pub, "-p", "hi", "-n", "2", NULL};
    el_test_proc r;
    CHECK(el_test_run_cli(run, &r));
    CHECKF(r.status == el_pkg_exit_code(EL_PKG_ERR_SIZE) && strstr(r.err, "size check failed"), "run truncated: %d %s",
           r.status, r.err);
    el_test_proc_free(&r);
    CHECK(copy_file(saved, g_model));
    unlink(saved);
    CHECK(verify_now(&e) == EL_PKG_OK);
    printf("truncation to 5 sizes and a 1-byte extension: refused (size)\n");
}

static void test_manifest_flips(void) {
    size_t len;
    char *orig = el_test_read_file(g_manifest, &len);
    CHECK(orig && len > 100);
    if (!orig) return;
    int counts[EL_PKG_CHECK_COUNT] = {0};
    int accepted = 0;
    long first_accepted = -1;
    static const unsigned char masks[2] = {0x01, 0x80};
    for (int mi = 0; mi < 2; mi++)
        for (size_t i = 0; i < len; i++) {
            char *buf = malloc(len);
            memcpy(buf, orig, len);
            buf[i] ^= (char)masks[mi];
            el_pkg_error e;
            write_plain(g_manifest, buf, len);
            free(buf);
            el_pkg_check r = verify_now(&e);
            counts[r]++;
            if (r == EL_PKG_OK) {
                accepted++;
                if (first_accepted < 0) first_accepted = (long)i;
            }
        }
    el_pkg_error e;
    write_plain(g_manifest, orig, len);
    CHECKF(accepted == 0, "%d manifest flips accepted (first at offset %ld)", accepted, first_accepted);
    printf("manifest byte flips (%zu bytes x 2 masks): %d malformed, %d signature, %d key, %d accepted\n", len,
           counts[EL_PKG_ERR_MALFORMED], counts[EL_PKG_ERR_SIGNATURE], counts[EL_PKG_ERR_KEY], accepted);
    CHECK(counts[EL_PKG_ERR_SIGNATURE] > 0 && counts[EL_PKG_ERR_MALFORMED] > 0);

    /* every hex digit of the signature, changed to another hex digit */
    char *sig = strstr(orig, "\"sig\"");
    CHECK(sig != NULL);
    if (sig) {
        char *q = strchr(sig + 5, '"') + 1;
        int n = 0, sigfail = 0;
        for (int i = 0; i < 128; i++) {
            char *buf = malloc(len);
            memcpy(buf, orig, len);
            char *d = buf + (q - orig) + i;
            *d = *d == '0' ? '1' : '0';
            write_plain(g_manifest, buf, len);
            free(buf);
            n++;
            sigfail += verify_now(&e) == EL_PKG_ERR_SIGNATURE;
        }
        CHECKF(sigfail == n, "signature digit changes: %d of %d refused as signature", sigfail, n);
        printf("signature hex digits changed: %d of %d refused (signature)\n", sigfail, n);
    }
    write_plain(g_manifest, orig, len);
    free(orig);
    CHECK(verify_now(&e) == EL_PKG_OK);
}

/* ---- each refusal its own error ---------------------------------------- */

static void set_str(cJSON *o, const char *k, const char *v) {
    cJSON_ReplaceItemInObjectCaseSensitive(o, k, cJSON_CreateString(v));
}
static void edit_expired(cJSON *sg, void *u) { (void)u; set_str(sg, "expires", "2020-01-01T00:00:00Z"); }
static void edit_runtime(cJSON *sg, void *u) {
    (void)u;
    set_str(cJSON_GetObjectItemCaseSensitive(sg, "fingerprint"), "runtime_min", "99.0.0");
}
static void edit_device(cJSON *sg, void *u) {
    (void)u;
    cJSON *a = cJSON_CreateArray();
    cJSON_AddItemToArray(a, cJSON_CreateString("npu-acme"));
    cJSON_ReplaceItemInObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(sg, "fingerprint"), "device_classes", a);
}
static void edit_other_file(cJSON *sg, void *u) {
    (void)u;
    set_str(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(sg, "artifacts"), 0), "path", "other.gguf");
}

static int cli_verify_status(const char *pubkey, const char *extra, char **err_out) {
    char pub[PATH_MAX + 8];
    snprintf(pub, sizeof pub, "%s.pub", pubkey);
    const char *args[] = {"verify", "--pub", pub, g_model, extra ? "--min-version" : NULL, extra, NULL};
    el_test_proc r;
    if (!el_test_run_cli(args, &r)) return -1;
    int s = r.status;
    if (err_out) *err_out = strdup(r.err);
    el_test_proc_free(&r);
    return s;
}

static void test_refusals(void) {
    size_t len;
    char *orig = el_test_read_file(g_manifest, &len);
    el_pkg_error e;
    typedef struct { const char *what; el_pkg_check want; int status; } row;
    row rows[8];
    int nr = 0;
    char *msg = NULL;

    /* wrong key: the package is fine, the verifier trusts another key */
    CHECKF(verify_with(&g_pub2, 0, 0, &e) == EL_PKG_ERR_KEY && strstr(e.msg, g_pub.keyid), "wrong key: %s", e.msg);
    rows[nr++] = (row){"wrong key", EL_PKG_ERR_KEY, cli_verify_status(g_key2, NULL, &msg)};
    CHECK(msg && strstr(msg, "key check failed")); free(msg); msg = NULL;

    /* forged: signed by key 2 but claiming key 1's id */
    CHECK(resign_manifest(g_manifest, g_sk2, NULL, NULL, g_pub.keyid));
    CHECKF(verify_now(&e) == EL_PKG_ERR_SIGNATURE, "forged: %s", e.msg);
    rows[nr++] = (row){"forged signature", EL_PKG_ERR_SIGNATURE, cli_verify_status(g_key, NULL, &msg)};
    CHECK(msg && strstr(msg, "signature check failed")); free(msg); msg = NULL;
    write_plain(g_manifest, orig, len);

    /* altered content under the old signature: version 5 -> 6 */
    {
        char *alt = strdup(orig);
        char *v = strstr(alt, "\"version\":");
        CHECK(v != NULL);
        if (v) { char *d = strchr(v, '5'); if (d) *d = '6'; }
        write_plain(g_manifest, alt, len);
        free(alt);
        CHECKF(verify_now(&e) == EL_PKG_ERR_SIGNATURE, "altered version: %s", e.msg);
        write_plain(g_manifest, orig, len);
    }

    /* expired, validly signed */
    CHECK(resign_manifest(g_manifest, g_sk, edit_expired, NULL, NULL));
    CHECKF(verify_now(&e) == EL_PKG_ERR_EXPIRED && strstr(e.msg, "2020-01-01"), "expired: %s", e.msg);
    rows[nr++] = (row){"expired", EL_PKG_ERR_EXPIRED, cli_verify_status(g_key, NULL, &msg)};
    CHECK(msg && strstr(msg, "expiry check failed")); free(msg); msg = NULL;
    write_plain(g_manifest, orig, len);
    /* ... and the valid one, a day after its expiry */
    el_manifest m;
    el_pkg_verify_opts vo = {.trusted = &g_pub, .n_trusted = 1};
    CHECK(el_pkg_verify(g_model, &vo, &m, NULL, &e) == EL_PKG_OK);
    CHECK(verify_with(&g_pub, 0, m.expires_t + 86400, &e) == EL_PKG_ERR_EXPIRED);
    CHECK(verify_with(&g_pub, 0, m.expires_t - 1, &e) == EL_PKG_OK);
    el_manifest_free(&m);

    /* downgrade: v5 where v6 is the floor */
    CHECKF(verify_with(&g_pub, 6, 0, &e) == EL_PKG_ERR_VERSION && strstr(e.msg, "rollback"), "downgrade: %s", e.msg);
    CHECK(verify_with(&g_pub, 5, 0, &e) == EL_PKG_OK);
    rows[nr++] = (row){"downgrade", EL_PKG_ERR_VERSION, cli_verify_status(g_key, "6", &msg)};
    CHECK(msg && strstr(msg, "version check failed")); free(msg); msg = NULL;

    CHECK(resign_manifest(g_manifest, g_sk, edit_runtime, NULL, NULL));
    CHECKF(verify_now(&e) == EL_PKG_ERR_RUNTIME, "runtime: %s", e.msg);
    rows[nr++] = (row){"newer runtime", EL_PKG_ERR_RUNTIME, cli_verify_status(g_key, NULL, NULL)};
    write_plain(g_manifest, orig, len);
    CHECK(resign_manifest(g_manifest, g_sk, edit_device, NULL, NULL));
    CHECKF(verify_now(&e) == EL_PKG_ERR_DEVICE, "device: %s", e.msg);
    rows[nr++] = (row){"other device", EL_PKG_ERR_DEVICE, cli_verify_status(g_key, NULL, NULL)};
    write_plain(g_manifest, orig, len);
    CHECK(resign_manifest(g_manifest, g_sk, edit_other_file, NULL, NULL));
    CHECKF(verify_now(&e) == EL_PKG_ERR_MALFORMED && strstr(e.msg, "other.gguf"), "other file: %s", e.msg);
    write_plain(g_manifest, orig, len);

    /* no manifest at all */
    unlink(g_manifest);
    CHECK(verify_now(&e) == EL_PKG_ERR_NO_MANIFEST);
    rows[nr++] = (row){"no manifest", EL_PKG_ERR_NO_MANIFEST, cli_verify_status(g_key, NULL, NULL)};
    write_plain(g_manifest, orig, len);
    CHECK(verify_now(&e) == EL_PKG_OK);
    CHECK(cli_verify_status(g_key, NULL, NULL) == 0);
    free(orig);

    for (int i = 0; i < nr; i++) {
        CHECKF(rows[i].status == el_pkg_exit_code(rows[i].want), "%s: CLI exit %d, want %d", rows[i].what, rows[i].status,
               el_pkg_exit_code(rows[i].want));
        for (int k = 0; k < i; k++) CHECK(rows[k].status != rows[i].status);
        printf("refused: %-16s check %-9s exit %d\n", rows[i].what, el_pkg_check_name(rows[i].want), rows[i].status);
    }
}

/* ---- the CLI's load path ----------------------------------------------- */

static void test_cli_load(void) {
    char pub[PATH_MAX + 8], plain[PATH_MAX];
    snprintf(pub, sizeof pub, "%s.pub", g_key);
    snprintf(plain, sizeof plain, "%s/plain.gguf", g_dir);
    CHECK(copy_file(pkg_ref_model(), plain));
    el_test_proc r;

    const char *refuse[] = {"run", "-m", plain, "-p", "hi", "-n", "2", "--temp", "0", NULL};
    CHECK(el_test_run_cli(refuse, &r));
    CHECKF(r.status == el_pkg_exit_code(EL_PKG_ERR_NO_MANIFEST) && strstr(r.err, "--allow-unsigned") && r.out[0] == 0,
           "unsigned without the flag: %d %s", r.status, r.err);
    el_test_proc_free(&r);
    const char *allow[] = {"run", "-m", plain, "-p", "hi", "-n", "2", "--temp", "0", "--allow-unsigned", NULL};
    CHECK(el_test_run_cli(allow, &r));
    CHECKF(r.status == 0 && strstr(r.err, "UNSIGNED") && strstr(r.err, "quant Q8_0") && strstr(r.err, "sha256 "),
           "unsigned with the flag: %d %s", r.status, r.err);
    char *unsigned_out = strdup(r.out);
    el_test_proc_free(&r);

    const char *signed_run[] = {"run", "-m", g_model, "--pub", pub, "-p", "hi", "-n", "2", "--temp", "0", NULL};
    CHECK(el_test_run_cli(signed_run, &r));
    CHECKF(r.status == 0 && strstr(r.err, "signature verified") && strstr(r.err, "v5") && strstr(r.err, g_pub.keyid),
           "signed: %d %s", r.status, r.err);
    CHECKF(!strcmp(r.out, unsigned_out), "same model, same greedy text: '%s' vs '%s'", r.out, unsigned_out);
    el_test_proc_free(&r);
    free(unsigned_out);

    /* the key from the environment */
    setenv("EL_TRUSTED_KEY", pub, 1);
    const char *env_run[] = {"run", "-m", g_model, "-p", "hi", "-n", "1", "--temp", "0", NULL};
    CHECK(el_test_run_cli(env_run, &r));
    CHECKF(r.status == 0 && strstr(r.err, "signature verified"), "EL_TRUSTED_KEY: %d %s", r.status, r.err);
    el_test_proc_free(&r);
    unsetenv("EL_TRUSTED_KEY");
    /* signed, but no key given: refused, unless --allow-unsigned (then said so) */
    CHECK(el_test_run_cli(env_run, &r));
    CHECKF(r.status == el_pkg_exit_code(EL_PKG_ERR_KEY) && strstr(r.err, "--pub"), "no key: %d %s", r.status, r.err);
    el_test_proc_free(&r);
    const char *nokey_allow[] = {"run", "-m", g_model, "-p", "hi", "-n", "1", "--temp", "0", "--allow-unsigned", NULL};
    CHECK(el_test_run_cli(nokey_allow, &r));
    CHECKF(r.status == 0 && strstr(r.err, "SIGNATURE NOT CHECKED"), "no key, allowed: %d %s", r.status, r.err);
    el_test_proc_free(&r);
    /* --allow-unsigned never excuses a failing check */
    CHECK(flip_at(g_model, 100, 0x01));
    CHECK(el_test_run_cli(nokey_allow, &r));
    CHECKF(r.status == el_pkg_exit_code(EL_PKG_ERR_HASH), "allow-unsigned + corrupt: %d %s", r.status, r.err);
    el_test_proc_free(&r);
    CHECK(flip_at(g_model, 100, 0x01));
    /* --min-version on run */
    const char *minv[] = {"run", "-m", g_model, "--pub", pub, "--min-version", "6", "-p", "hi", "-n", "1", NULL};
    CHECK(el_test_run_cli(minv, &r));
    CHECKF(r.status == el_pkg_exit_code(EL_PKG_ERR_VERSION), "run --min-version: %d %s", r.status, r.err);
    el_test_proc_free(&r);
    unlink(plain);
}

/* ---- CLI keygen/sign --------------------------------------------------- */

static void test_cli_sign(void) {
    char base[PATH_MAX], sec[PATH_MAX + 8], pub[PATH_MAX + 8], model[PATH_MAX];
    snprintf(base, sizeof base, "%s/clikey", g_dir);
    snprintf(sec, sizeof sec, "%s.sec", base);
    snprintf(pub, sizeof pub, "%s.pub", base);
    snprintf(model, sizeof model, "%s/cli.gguf", g_dir);
    CHECK(copy_file(pkg_ref_model(), model));
    el_test_proc r;
    const char *kg[] = {"keygen", "--out", base, NULL};
    CHECK(el_test_run_cli(kg, &r));
    CHECKF(r.status == 0 && strstr(r.out, "key id"), "keygen: %d %s", r.status, r.err);
    el_test_proc_free(&r);
    const char *sg[] = {"sign", "--key", sec, model, "--version", "7", "--expires", "2099-12-31", "--source", "hf/x",
                        "--revision", "deadbeef", "--device-class", "cpu-x86_64", "--device-class", "cpu-aarch64", NULL};
    CHECK(el_test_run_cli(sg, &r));
    CHECKF(r.status == 0 && strstr(r.out, "v7") && strstr(r.out, "smoke expectation"), "sign: %d %s %s", r.status, r.out, r.err);
    el_test_proc_free(&r);
    const char *vf[] = {"verify", "--pub", pub, model, "--smoke", NULL};
    CHECK(el_test_run_cli(vf, &r));
    CHECKF(r.status == 0 && strstr(r.out, "ok:") && strstr(r.out, "expires 2099-12-31T00:00:00Z") &&
           strstr(r.out, "hf/x@deadbeef") && strstr(r.out, "smoke test passed"), "verify: %d %s %s", r.status, r.out, r.err);
    el_test_proc_free(&r);
    /* a second artifact beside the model: listed, sized, hashed */
    char notes[PATH_MAX];
    snprintf(notes, sizeof notes, "%s/notes.txt", g_dir);
    FILE *f = fopen(notes, "w");
    fputs("release notes\n", f);
    fclose(f);
    const char *sg2[] = {"sign", "--key", sec, model, "--version", "8", "--no-smoke", "--artifact", "notes.txt", NULL};
    CHECK(el_test_run_cli(sg2, &r));
    CHECKF(r.status == 0, "sign --artifact: %d %s", r.status, r.err);
    el_test_proc_free(&r);
    const char *vf2[] = {"verify", "--pub", pub, model, NULL};
    CHECK(el_test_run_cli(vf2, &r));
    CHECKF(r.status == 0, "verify with two artifacts: %d %s", r.status, r.err);
    el_test_proc_free(&r);
    f = fopen(notes, "w");
    fputs("release notez\n", f);
    fclose(f);
    CHECK(el_test_run_cli(vf2, &r));
    CHECKF(r.status == el_pkg_exit_code(EL_PKG_ERR_HASH) && strstr(r.err, "notes.txt"), "changed artifact: %d %s", r.status,
           r.err);
    el_test_proc_free(&r);
    unlink(notes);
    CHECK(el_test_run_cli(vf2, &r));
    CHECKF(r.status == el_pkg_exit_code(EL_PKG_ERR_SIZE) && strstr(r.err, "missing"), "missing artifact: %d %s", r.status,
           r.err);
    el_test_proc_free(&r);
    const char *bad[] = {"sign", "--key", sec, model, "--expires", "tomorrow", NULL};
    CHECK(el_test_run_cli(bad, &r));
    CHECK(r.status == 2);
    el_test_proc_free(&r);
}

int main(void) {
    if (!el_test_have_ref()) el_test_skip("fixtures absent (make fixtures)");
    CHECK(el_pkg_init());
    CHECK(make_tmpdir(g_dir, sizeof g_dir, "manifest"));
    snprintf(g_model, sizeof g_model, "%s/model.gguf", g_dir);
    snprintf(g_manifest, sizeof g_manifest, "%s/model.gguf.manifest.json", g_dir);
    snprintf(g_key, sizeof g_key, "%s/key", g_dir);
    snprintf(g_key2, sizeof g_key2, "%s/key2", g_dir);
    if (!copy_file(pkg_ref_model(), g_model)) el_test_skip("cannot copy the reference model");

    test_canonical();
    test_keys();
    test_sign_verify();
    test_gguf_flips();
    test_truncation();
    test_manifest_flips();
    test_refusals();
    test_cli_load();
    test_cli_sign();

    if (!el_test_failures) el_fs_remove_tree(g_dir);
    else fprintf(stderr, "files kept in %s\n", g_dir);
    return el_test_finish("test_manifest");
}
