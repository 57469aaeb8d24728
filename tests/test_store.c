/*
 * test_store.c — the A/B model store (src/deploy/store.c): install into the
 * inactive slot, atomic activation, rollback, downgrade refusal, key pinning,
 * smoke-test and hash failures that leave the active version untouched, gc of
 * interrupted installs and strays, the lock, and the CLI commands (install,
 * rollback, gc, status, run --store).
 * Packages are copies of reference/models/tiny-llama-{Q8_0,Q4_0}.gguf.
 */
#include <inttypes.h>
#include <limits.h>
#include <dirent.h>
#include <sys/file.h>

#include "pkgtest.h"
#include "deploy/store.h"

static char g_dir[512], g_store[600], g_key[600], g_key2[600], g_pub[620];
static uint8_t g_sk[64], g_sk2[64];
static el_pubkey g_pk, g_pk2;

/* pkg/<name>/model.gguf from src, signed with sk as version v. */
static void make_pkg(const char *name, const char *src, const uint8_t *sk, int64_t version, char *out, size_t cap) {
    char d[700];
    snprintf(d, sizeof d, "%s/pkg-%s", g_dir, name);
    mkdir(d, 0755);
    snprintf(out, cap, "%s/model.gguf", d);
    CHECK(copy_file(src, out));
    el_pkg_sign_params sp = {.version = version, .smoke = true, .source_checkpoint = "test/tiny-llama"};
    el_pkg_error e;
    CHECKF(el_pkg_sign(out, sk, &sp, &e) == EL_PKG_OK, "sign %s: %s", name, e.msg);
}

static el_store_state state(void) {
    el_store_state st;
    el_pkg_error e;
    CHECKF(el_store_read_state(g_store, &st, &e) == EL_PKG_OK, "state: %s", e.msg);
    return st;
}

static bool same_state(el_store_state a, el_store_state b) {
    return a.active.present == b.active.present && a.active.slot == b.active.slot && a.active.version == b.active.version &&
           a.previous.present == b.previous.present && a.previous.slot == b.previous.slot &&
           a.previous.version == b.previous.version;
}

static void active_ok(int64_t want_version, const char *want_src) {
    el_pkg_error e;
    el_manifest m;
    char path[PATH_MAX];
    CHECKF(el_store_check_active(g_store, true, path, sizeof path, &m, NULL, &e) == EL_PKG_OK, "active: %s", e.msg);
    CHECKF(m.version == want_version, "active v%" PRId64 ", want v%" PRId64, m.version, want_version);
    if (want_src) {
        uint8_t h[32];
        CHECK(el_pkg_hash_file(want_src, h, NULL, &e) == EL_PKG_OK && !memcmp(h, m.artifacts[0].sha256, 32));
    }
    el_manifest_free(&m);
}

static size_t slot_entries(char slot) {
    char d[700];
    snprintf(d, sizeof d, "%s/slots/%c", g_store, slot);
    size_t n = 0;
    DIR *dd = opendir(d);
    if (!dd) return 0;
    struct dirent *de;
    while ((de = readdir(dd))) if (de->d_name[0] != '.') n++;
    closedir(dd);
    return n;
}

static void edit_smoke(cJSON *sg, void *u) {
    (void)u;
    cJSON *toks = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(sg, "smoke"), "tokens");
    cJSON *t = cJSON_GetArrayItem(toks, 3);
    cJSON_SetNumberValue(t, t->valuedouble + 1);
}

static void edit_expired(cJSON *sg, void *u) {
    (void)u;
    cJSON_ReplaceItemInObjectCaseSensitive(sg, "expires", cJSON_CreateString("2021-06-01T00:00:00Z"));
}

int main(void) {
    if (!el_test_have_ref()) el_test_skip("fixtures absent (make fixtures)");
    CHECK(el_pkg_init());
    CHECK(make_tmpdir(g_dir, sizeof g_dir, "store"));
    snprintf(g_store, sizeof g_store, "%s/store", g_dir);
    snprintf(g_key, sizeof g_key, "%s/k", g_dir);
    snprintf(g_key2, sizeof g_key2, "%s/k2", g_dir);
    snprintf(g_pub, sizeof g_pub, "%s.pub", g_key);
    el_pkg_error e;
    CHECK(el_pkg_keygen(g_key, false, &g_pk, &e) == EL_PKG_OK);
    CHECK(el_pkg_keygen(g_key2, false, &g_pk2, &e) == EL_PKG_OK);
    char sec[700];
    snprintf(sec, sizeof sec, "%s.sec", g_key);
    CHECK(el_pkg_read_sec(sec, g_sk, NULL, &e) == EL_PKG_OK);
    snprintf(sec, sizeof sec, "%s.sec", g_key2);
    CHECK(el_pkg_read_sec(sec, g_sk2, NULL, &e) == EL_PKG_OK);

    const char *q8 = pkg_ref_model();
    char q4[PATH_MAX];
    snprintf(q4, sizeof q4, "%s", el_test_ref_path("models/tiny-llama-Q4_0.gguf"));
    char v1[800], v2[800], v3[800], bad_smoke[800], other_key[800], expired[800];
    make_pkg("v1", q8, g_sk, 1, v1, sizeof v1);
    make_pkg("v2", q8, g_sk, 2, v2, sizeof v2);
    make_pkg("v3", q4, g_sk, 3, v3, sizeof v3);
    make_pkg("bad-smoke", q8, g_sk, 4, bad_smoke, sizeof bad_smoke);
    make_pkg("other-key", q8, g_sk2, 5, other_key, sizeof other_key);
    make_pkg("expired", q8, g_sk, 6, expired, sizeof expired);
    char mp[900];
    snprintf(mp, sizeof mp, "%s%s", bad_smoke, EL_MANIFEST_SUFFIX);
    CHECK(resign_manifest(mp, g_sk, edit_smoke, NULL, NULL));
    snprintf(mp, sizeof mp, "%s%s", expired, EL_MANIFEST_SUFFIX);
    CHECK(resign_manifest(mp, g_sk, edit_expired, NULL, NULL));

    /* the first install needs a key; without one nothing is created but the folder */
    el_store_state st;
    CHECK(el_store_install(g_store, v1, NULL, &st, &e) == EL_PKG_ERR_KEY);
    CHECK(!state().active.present);

    el_store_install_opts with_key = {.pub_path = g_pub};
    CHECKF(el_store_install(g_store, v1, &with_key, &st, &e) == EL_PKG_OK, "install v1: %s", e.msg);
    CHECK(st.active.present && st.active.slot == 'a' && st.active.version == 1 && !st.previous.present);
    active_ok(1, q8);
    el_pubkey tk;
    CHECK(el_store_trusted_key(g_store, &tk, &e) == EL_PKG_OK && !strcmp(tk.keyid, g_pk.keyid));

    /* gc of an interrupted install: partial files in the unreferenced slot */
    char junk[700];
    snprintf(junk, sizeof junk, "%s/slots/b", g_store);
    mkdir(junk, 0755);
    snprintf(junk, sizeof junk, "%s/slots/b/model.gguf", g_store);
    FILE *f = fopen(junk, "w");
    fputs("partial", f);
    fclose(f);
    snprintf(junk, sizeof junk, "%s/state.json.tmp.AbC123", g_store);
    f = fopen(junk, "w");
    fputs("{", f);
    fclose(f);
    uint64_t freed;
    int removed;
    CHECKF(el_store_gc(g_store, &freed, &removed, &e) == EL_PKG_OK, "gc: %s", e.msg);
    CHECKF(removed == 2 && freed == 8 && slot_entries('b') == 0 && access(junk, F_OK) != 0, "gc removed %d, %" PRIu64 " bytes",
           removed, freed);
    active_ok(1, q8);

    /* v2: into slot b; v1 stays as the previous version */
    CHECKF(el_store_install(g_store, v2, NULL, &st, &e) == EL_PKG_OK, "install v2: %s", e.msg);
    CHECK(st.active.slot == 'b' && st.active.version == 2 && st.previous.present && st.previous.slot == 'a' &&
          st.previous.version == 1);
    active_ok(2, q8);

    /* downgrade and re-install refused; nothing changes */
    el_store_state before = state();
    CHECKF(el_store_install(g_store, v1, NULL, NULL, &e) == EL_PKG_ERR_VERSION && strstr(e.msg, "rollback"),
           "downgrade: %s", e.msg);
    CHECKF(el_store_install(g_store, v2, NULL, NULL, &e) == EL_PKG_ERR_VERSION && strstr(e.msg, "already"),
           "same version: %s", e.msg);
    /* another key: given, or signed by */
    char pub2[700];
    snprintf(pub2, sizeof pub2, "%s.pub", g_key2);
    el_store_install_opts k2 = {.pub_path = pub2};
    CHECKF(el_store_install(g_store, v3, &k2, NULL, &e) == EL_PKG_ERR_KEY && strstr(e.msg, "keeps its key"), "key: %s", e.msg);
    CHECKF(el_store_install(g_store, other_key, NULL, NULL, &e) == EL_PKG_ERR_KEY, "other signer: %s", e.msg);
    CHECKF(el_store_install(g_store, expired, NULL, NULL, &e) == EL_PKG_ERR_EXPIRED, "expired: %s", e.msg);
    CHECK(same_state(before, state()));
    CHECK(slot_entries('a') == 2); /* the previous version was not touched by refused installs */

    /* a smoke-test mismatch: found after the copy; the copy is removed, the
     * active version untouched (the target slot held the previous version,
     * which A/B gives up for the new one) */
    CHECKF(el_store_install(g_store, bad_smoke, NULL, NULL, &e) == EL_PKG_ERR_SMOKE && strstr(e.msg, "token 3"),
           "smoke: %s", e.msg);
    st = state();
    CHECK(st.active.slot == 'b' && st.active.version == 2 && !st.previous.present && slot_entries('a') == 0);
    active_ok(2, q8);
    /* a corrupt source: refused before anything is copied */
    {
        int fd = open(v3, O_RDWR);
        unsigned char c;
        CHECK(pread(fd, &c, 1, 4000) == 1);
        c ^= 0x10;
        CHECK(pwrite(fd, &c, 1, 4000) == 1);
        CHECK(el_store_install(g_store, v3, NULL, NULL, &e) == EL_PKG_ERR_HASH);
        c ^= 0x10;
        CHECK(pwrite(fd, &c, 1, 4000) == 1);
        close(fd);
        active_ok(2, q8);
    }
    /* the lock: a second writer is turned away */
    {
        char lp[700];
        snprintf(lp, sizeof lp, "%s/lock", g_store);
        int fd = open(lp, O_RDWR);
        CHECK(fd >= 0 && flock(fd, LOCK_EX) == 0);
        pid_t pid = fork();
        if (pid == 0) _exit(el_store_install(g_store, v3, NULL, NULL, NULL) == EL_PKG_ERR_STORE ? 0 : 1);
        int ws = 0;
        waitpid(pid, &ws, 0);
        CHECKF(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "install under a held lock");
        close(fd);
    }

    /* v3 (another model file) into slot a */
    CHECKF(el_store_install(g_store, v3, NULL, &st, &e) == EL_PKG_OK, "install v3: %s", e.msg);
    CHECK(st.active.slot == 'a' && st.active.version == 3 && st.previous.slot == 'b' && st.previous.version == 2);
    active_ok(3, q4);

    /* rollback: back to v2 (a lower version, allowed because asked for) */
    CHECKF(el_store_rollback(g_store, &st, &e) == EL_PKG_OK, "rollback: %s", e.msg);
    CHECK(st.active.slot == 'b' && st.active.version == 2 && st.previous.slot == 'a' && st.previous.version == 3);
    active_ok(2, q8);
    /* gc keeps both versions, removes a stray in a referenced slot */
    snprintf(junk, sizeof junk, "%s/slots/a/stray.bin", g_store);
    f = fopen(junk, "w");
    fputs("xx", f);
    fclose(f);
    CHECK(el_store_gc(g_store, &freed, &removed, &e) == EL_PKG_OK && removed == 1 && freed == 2);
    CHECK(slot_entries('a') == 2 && slot_entries('b') == 2);
    active_ok(2, q8);
    /* a rollback target that no longer verifies is refused */
    {
        char pp[700];
        snprintf(pp, sizeof pp, "%s/slots/a/model.gguf", g_store);
        CHECK(truncate(pp, 1000) == 0);
        CHECKF(el_store_rollback(g_store, NULL, &e) == EL_PKG_ERR_SIZE, "rollback to a damaged slot: %s", e.msg);
        active_ok(2, q8);
        CHECK(copy_file(v3, pp));
    }

    /* CLI */
    el_test_proc r;
    const char *status[] = {"status", "--store", g_store, NULL};
    CHECK(el_test_run_cli(status, &r));
    CHECKF(r.status == 0 && strstr(r.out, "active:   v2") && strstr(r.out, "previous: v3") && strstr(r.out, "active verifies"),
           "status: %d %s %s", r.status, r.out, r.err);
    el_test_proc_free(&r);
    const char *rb[] = {"rollback", "--store", g_store, NULL};
    CHECK(el_test_run_cli(rb, &r));
    CHECKF(r.status == 0 && strstr(r.out, "rolled back to v3"), "cli rollback: %d %s %s", r.status, r.out, r.err);
    el_test_proc_free(&r);
    const char *down[] = {"install", v2, "--store", g_store, NULL};
    CHECK(el_test_run_cli(down, &r));
    CHECKF(r.status == el_pkg_exit_code(EL_PKG_ERR_VERSION) && strstr(r.err, "version check failed"), "cli downgrade: %d %s",
           r.status, r.err);
    el_test_proc_free(&r);
    const char *run[] = {"run", "--store", g_store, "-p", "Once upon a time", "-n", "4", "--temp", "0", NULL};
    CHECK(el_test_run_cli(run, &r));
    CHECKF(r.status == 0 && strstr(r.err, "v3") && strstr(r.err, "signature verified") && strstr(r.err, "quant Q4_0"),
           "run --store: %d %s", r.status, r.err);
    el_test_proc_free(&r);
    const char *both[] = {"run", "--store", g_store, "-m", v1, "-p", "x", NULL};
    CHECK(el_test_run_cli(both, &r));
    CHECK(r.status == 2);
    el_test_proc_free(&r);
    const char *gc[] = {"gc", "--store", g_store, NULL};
    CHECK(el_test_run_cli(gc, &r));
    CHECKF(r.status == 0 && strstr(r.out, "removed 0"), "cli gc: %d %s", r.status, r.out);
    el_test_proc_free(&r);
    /* a damaged state file: every command says so, gc removes nothing */
    char sp[700];
    snprintf(sp, sizeof sp, "%s/state.json", g_store);
    size_t slen;
    char *saved = el_test_read_file(sp, &slen);
    f = fopen(sp, "w");
    fputs("{\"format\":\"edgellm-store/1\",\"active\":{\"slot\":\"c\"}}", f);
    fclose(f);
    CHECK(el_store_gc(g_store, &freed, &removed, &e) == EL_PKG_ERR_STORE && removed == 0);
    CHECK(slot_entries('a') == 2 && slot_entries('b') == 2);
    CHECK(el_test_run_cli(run, &r));
    CHECKF(r.status == el_pkg_exit_code(EL_PKG_ERR_STORE), "run on a damaged store: %d %s", r.status, r.err);
    el_test_proc_free(&r);
    f = fopen(sp, "w");
    fwrite(saved, 1, slen, f);
    fclose(f);
    free(saved);
    active_ok(3, q4);

    if (!el_test_failures) el_fs_remove_tree(g_dir);
    else fprintf(stderr, "files kept in %s\n", g_dir);
    return el_test_finish("test_store");
}
