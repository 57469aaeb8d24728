/*
 * test_store_fs.c — the store on a tiny filesystem: a 10 MiB tmpfs mounted in
 * a private mount namespace (unshare(CLONE_NEWNS); needs root or
 * CAP_SYS_ADMIN, else the test skips and says why).
 *
 * v1 (tiny-llama Q8_0, 5.4 MiB) fits. Then:
 *   - v2 (Q8_0) does not fit beside it: the free-space check refuses it before
 *     anything is written;
 *   - the same install with the check bypassed (--no-space-check, testing
 *     only) runs out of space in the middle of the copy: a clean "space"
 *     error, the partial copy removed, the free space back where it was;
 *   - in both cases the active version is untouched (verifies, smoke test);
 *   - v3 (Q4_0, 3.2 MiB) fits; v4 (Q8_0) then fits only by reclaiming the
 *     slot of the previous version, which the space check counts.
 */
#include <inttypes.h>
#include <limits.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/statvfs.h>

#include "pkgtest.h"
#include "deploy/store.h"

static char g_dir[400], g_mnt[500], g_store[600];
static uint8_t g_sk[64];

static void make_pkg(const char *name, const char *src, int64_t v, char *out, size_t cap) {
    char d[600];
    snprintf(d, sizeof d, "%s/pkg-%s", g_dir, name);
    mkdir(d, 0755);
    snprintf(out, cap, "%s/model.gguf", d);
    CHECK(copy_file(src, out));
    el_pkg_sign_params sp = {.version = v, .smoke = true};
    el_pkg_error e;
    CHECKF(el_pkg_sign(out, g_sk, &sp, &e) == EL_PKG_OK, "sign: %s", e.msg);
}

static uint64_t free_bytes(void) {
    struct statvfs v;
    return statvfs(g_mnt, &v) == 0 ? (uint64_t)v.f_bavail * v.f_frsize : 0;
}

static void active_ok(int64_t want) {
    el_manifest m;
    el_pkg_error e;
    CHECKF(el_store_check_active(g_store, true, NULL, 0, &m, NULL, &e) == EL_PKG_OK, "active: %s", e.msg);
    CHECK(m.version == want);
    el_manifest_free(&m);
}

int main(void) {
    if (!el_test_have_ref()) el_test_skip("fixtures absent (make fixtures)");
    if (unshare(CLONE_NEWNS) != 0) {
        char why[200];
        snprintf(why, sizeof why, "cannot make a private mount namespace (unshare: %s); needs root or CAP_SYS_ADMIN",
                 strerror(errno));
        el_test_skip(why);
    }
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) el_test_skip("cannot make / private in the namespace");
    CHECK(el_pkg_init());
    CHECK(make_tmpdir(g_dir, sizeof g_dir, "storefs"));
    snprintf(g_mnt, sizeof g_mnt, "%s/mnt", g_dir);
    mkdir(g_mnt, 0755);
    if (mount("tmpfs", g_mnt, "tmpfs", 0, "size=10m") != 0) {
        char why[200];
        snprintf(why, sizeof why, "cannot mount a size-limited tmpfs: %s", strerror(errno));
        el_fs_remove_tree(g_dir);
        el_test_skip(why);
    }
    snprintf(g_store, sizeof g_store, "%s/store", g_mnt);
    char key[500], sec[520], pub[520];
    snprintf(key, sizeof key, "%s/k", g_dir);
    snprintf(sec, sizeof sec, "%s.sec", key);
    snprintf(pub, sizeof pub, "%s.pub", key);
    el_pkg_error e;
    CHECK(el_pkg_keygen(key, false, NULL, &e) == EL_PKG_OK && el_pkg_read_sec(sec, g_sk, NULL, &e) == EL_PKG_OK);
    char q4[PATH_MAX];
    snprintf(q4, sizeof q4, "%s", el_test_ref_path("models/tiny-llama-Q4_0.gguf"));
    char v1[700], v2[700], v3[700], v4[700];
    make_pkg("v1", pkg_ref_model(), 1, v1, sizeof v1);
    make_pkg("v2", pkg_ref_model(), 2, v2, sizeof v2);
    make_pkg("v3", q4, 3, v3, sizeof v3);
    make_pkg("v4", pkg_ref_model(), 4, v4, sizeof v4);

    printf("tmpfs of 10 MiB: %" PRIu64 " bytes free\n", free_bytes());
    el_store_install_opts o = {.pub_path = pub};
    CHECKF(el_store_install(g_store, v1, &o, NULL, &e) == EL_PKG_OK, "v1: %s", e.msg);
    active_ok(1);
    uint64_t after_v1 = free_bytes();
    printf("after v1: %" PRIu64 " bytes free\n", after_v1);

    /* refused by the check: nothing written */
    CHECKF(el_store_install(g_store, v2, NULL, NULL, &e) == EL_PKG_ERR_NOSPACE && strstr(e.msg, "nothing was changed"),
           "pre-check: %s", e.msg);
    printf("v2, space check: %s\n", e.msg);
    CHECK(free_bytes() == after_v1);
    active_ok(1);

    /* the copy itself runs out of space (the CLI, with the check bypassed) */
    const char *args[] = {"install", v2, "--store", g_store, "--no-space-check", NULL};
    el_test_proc r;
    CHECK(el_test_run_cli(args, &r));
    CHECKF(r.status == el_pkg_exit_code(EL_PKG_ERR_NOSPACE) && strstr(r.err, "space check failed") &&
           strstr(r.err, "No space left") && strstr(r.err, "active version is untouched"),
           "mid-install ENOSPC: %d %s", r.status, r.err);
    printf("v2, copy ran out of space: exit %d: %s", r.status, r.err);
    el_test_proc_free(&r);
    CHECKF(free_bytes() == after_v1, "free after the failed copy: %" PRIu64 " vs %" PRIu64, free_bytes(), after_v1);
    active_ok(1);
    el_store_state st;
    CHECK(el_store_read_state(g_store, &st, &e) == EL_PKG_OK && st.active.version == 1 && !st.previous.present);
    uint64_t freed;
    int removed;
    CHECK(el_store_gc(g_store, &freed, &removed, &e) == EL_PKG_OK && removed == 0);

    /* a smaller model fits; then a big one fits by reclaiming the previous slot */
    CHECKF(el_store_install(g_store, v3, NULL, NULL, &e) == EL_PKG_OK, "v3: %s", e.msg);
    active_ok(3);
    printf("after v3 (Q4_0): %" PRIu64 " bytes free\n", free_bytes());
    CHECKF(el_store_install(g_store, v4, NULL, &st, &e) == EL_PKG_OK, "v4: %s", e.msg);
    CHECK(st.active.version == 4 && st.previous.version == 3);
    active_ok(4);
    printf("after v4 (Q8_0, reclaiming v1's slot): %" PRIu64 " bytes free\n", free_bytes());

    umount2(g_mnt, MNT_DETACH);
    if (!el_test_failures) el_fs_remove_tree(g_dir);
    else fprintf(stderr, "files kept in %s\n", g_dir);
    return el_test_finish("test_store_fs");
}
