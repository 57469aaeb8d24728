/*
 * store.c — the A/B model store (contract and invariants in store.h).
 *
 * Every mutation holds DIR/lock (flock, released by the kernel when the
 * process dies, so a SIGKILLed install never wedges the store). The order of
 * durable steps in an install is what keeps the invariants:
 *   1. verify the source package; check free space;
 *   2. if the target slot holds the previous version: write a state without
 *      it (atomic) — from here the slot is unreferenced;
 *   3. empty the slot, copy the files (each fsynced), fsync the slot folder;
 *   4. verify the copy, run the smoke test;
 *   5. write trusted.pub if this is the first install (atomic);
 *   6. write the state naming the slot active (atomic): the switch.
 */
#include "deploy/store.h"
#include "deploy/accept_record.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "deploy/fsutil.h"
#include "util/file.h"

#define STORE_FORMAT "edgellm-store/1"
#define SPACE_MARGIN (256u * 1024u) /* bytes kept free beyond the package */

/* ---- paths, lock ------------------------------------------------------- */

static bool path_join(char *out, size_t cap, const char *a, const char *b) {
    int n = snprintf(out, cap, "%s/%s", a, b);
    return n > 0 && (size_t)n < cap;
}

static bool slot_dir(const char *dir, char slot, char *out, size_t cap) {
    int n = snprintf(out, cap, "%s/slots/%c", dir, slot);
    return n > 0 && (size_t)n < cap;
}

bool el_store_slot_model_path(const char *dir, const el_store_slot *s, char *out, size_t cap) {
    int n = snprintf(out, cap, "%s/slots/%c/%s", dir, s->slot, s->model);
    return n > 0 && (size_t)n < cap;
}

static el_pkg_check mkdir_p(const char *dir, el_pkg_error *err) {
    char p[PATH_MAX];
    if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p) return el_pkg_fail(err, EL_PKG_ERR_USAGE, "%s: path too long", dir);
    for (char *s = p + 1; ; s++) {
        if (*s == '/' || *s == 0) {
            char c = *s;
            *s = 0;
            if (mkdir(p, 0755) != 0 && errno != EEXIST) {
                int e = errno;
                return el_pkg_fail(err, e == ENOSPC ? EL_PKG_ERR_NOSPACE : EL_PKG_ERR_IO, "%s: cannot create: %s", p,
                                   strerror(e));
            }
            *s = c;
            if (!c) break;
        }
    }
    return EL_PKG_OK;
}

/* Opens and flocks DIR/lock; returns the fd or -1 (err set). */
static int store_lock(const char *dir, bool create, el_pkg_error *err) {
    char p[PATH_MAX];
    if (create && mkdir_p(dir, err)) return -1;
    if (!path_join(p, sizeof p, dir, "lock")) { el_pkg_fail(err, EL_PKG_ERR_USAGE, "%s: path too long", dir); return -1; }
    int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        el_pkg_fail(err, errno == ENOENT ? EL_PKG_ERR_STORE : EL_PKG_ERR_IO, "%s: %s%s", p, strerror(errno),
                    errno == ENOENT ? " (not a model store)" : "");
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        el_pkg_fail(err, EL_PKG_ERR_STORE, "%s: another install, rollback or gc holds the store", dir);
        close(fd);
        return -1;
    }
    return fd;
}

static void store_unlock(int fd) {
    if (fd >= 0) close(fd); /* closing releases the flock */
}

/* ---- state ------------------------------------------------------------- */

static bool parse_slot(const cJSON *o, el_store_slot *s) {
    memset(s, 0, sizeof *s);
    if (cJSON_IsNull(o)) return true;
    const cJSON *sl = cJSON_GetObjectItemCaseSensitive(o, "slot");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "version");
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, "model");
    if (!cJSON_IsObject(o) || !cJSON_IsString(sl) || !cJSON_IsNumber(v) || !cJSON_IsString(m)) return false;
    if (strcmp(sl->valuestring, "a") && strcmp(sl->valuestring, "b")) return false;
    if (!(v->valuedouble >= 1 && v->valuedouble <= 9007199254740992.0) || v->valuedouble != (double)(int64_t)v->valuedouble)
        return false;
    size_t ml = strlen(m->valuestring);
    if (ml == 0 || ml >= sizeof s->model || m->valuestring[0] == '.' || strchr(m->valuestring, '/')) return false;
    s->present = true;
    s->slot = sl->valuestring[0];
    s->version = (int64_t)v->valuedouble;
    memcpy(s->model, m->valuestring, ml + 1);
    return true;
}

el_pkg_check el_store_parse_state(const char *text, size_t len, el_store_state *st, el_pkg_error *err) {
    memset(st, 0, sizeof *st);
    cJSON *root = len < 8192 ? cJSON_ParseWithLength(text, len) : NULL;
    el_pkg_check rc = EL_PKG_OK;
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
    if (!root || !cJSON_IsString(fmt) || strcmp(fmt->valuestring, STORE_FORMAT) ||
        !parse_slot(cJSON_GetObjectItemCaseSensitive(root, "active"), &st->active) ||
        !parse_slot(cJSON_GetObjectItemCaseSensitive(root, "previous"), &st->previous) ||
        (st->previous.present && (!st->active.present || st->previous.slot == st->active.slot))) {
        memset(st, 0, sizeof *st);
        rc = el_pkg_fail(err, EL_PKG_ERR_STORE, "unreadable or inconsistent store state");
    }
    cJSON_Delete(root);
    return rc;
}

el_pkg_check el_store_read_state(const char *dir, el_store_state *st, el_pkg_error *err) {
    memset(st, 0, sizeof *st);
    char p[PATH_MAX];
    if (!path_join(p, sizeof p, dir, "state.json")) return el_pkg_fail(err, EL_PKG_ERR_USAGE, "%s: path too long", dir);
    char why[256];
    FILE *f = el_fopen_regular(p, why, sizeof why);
    if (!f) {
        if (errno == ENOENT) return EL_PKG_OK;
        return el_pkg_fail(err, EL_PKG_ERR_IO, "%s", why);
    }
    char buf[8192];
    size_t len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    el_pkg_check rc = el_store_parse_state(buf, len, st, err);
    if (rc) el_pkg_fail(err, rc, "%s: unreadable or inconsistent store state", p);
    return rc;
}

static cJSON *slot_json(const el_store_slot *s) {
    if (!s->present) return cJSON_CreateNull();
    cJSON *o = cJSON_CreateObject();
    char sl[2] = {s->slot, 0};
    cJSON_AddStringToObject(o, "slot", sl);
    cJSON_AddNumberToObject(o, "version", (double)s->version);
    cJSON_AddStringToObject(o, "model", s->model);
    return o;
}

static el_pkg_check write_state(const char *dir, const el_store_state *st, el_pkg_error *err) {
    cJSON *root = cJSON_CreateObject();
    if (!root) return el_pkg_fail(err, EL_PKG_ERR_IO, "out of memory");
    cJSON_AddStringToObject(root, "format", STORE_FORMAT);
    cJSON_AddItemToObject(root, "active", slot_json(&st->active));
    cJSON_AddItemToObject(root, "previous", slot_json(&st->previous));
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text) return el_pkg_fail(err, EL_PKG_ERR_IO, "out of memory");
    char p[PATH_MAX];
    el_pkg_check rc = EL_PKG_OK;
    if (!path_join(p, sizeof p, dir, "state.json")) rc = el_pkg_fail(err, EL_PKG_ERR_USAGE, "%s: path too long", dir);
    else if (!el_fs_write_atomic(p, text, strlen(text), 0644, err)) rc = err ? err->check : EL_PKG_ERR_IO;
    free(text);
    return rc;
}

el_pkg_check el_store_trusted_key(const char *dir, el_pubkey *out, el_pkg_error *err) {
    char p[PATH_MAX];
    if (!path_join(p, sizeof p, dir, "trusted.pub")) return el_pkg_fail(err, EL_PKG_ERR_USAGE, "%s: path too long", dir);
    if (access(p, F_OK) != 0)
        return el_pkg_fail(err, EL_PKG_ERR_KEY, "%s: the store has no trusted key yet (the first install sets it "
                           "with --pub KEY.pub)", dir);
    return el_pkg_read_pub(p, out, err);
}

/* ---- install ----------------------------------------------------------- */

el_pkg_check el_store_install(const char *dir, const char *model_path, const el_store_install_opts *o,
                              el_store_state *after, el_pkg_error *err) {
    el_pkg_error local_err;
    if (!err) err = &local_err;
    el_store_install_opts dflt = {0};
    if (!o) o = &dflt;
    int lk = store_lock(dir, true, err);
    if (lk < 0) return err ? err->check : EL_PKG_ERR_IO;
    el_pkg_check rc;
    el_manifest m, mc;
    memset(&m, 0, sizeof m);
    memset(&mc, 0, sizeof mc);
    char *src_dir = NULL;
    char sdir[PATH_MAX] = "";
    bool slot_dirty = false;

    /* trust: the store's key; the first install brings it with --pub */
    el_pubkey store_key, given_key;
    bool have_store_key = el_store_trusted_key(dir, &store_key, NULL) == EL_PKG_OK;
    if (o->pub_path) {
        if ((rc = el_pkg_read_pub(o->pub_path, &given_key, err))) goto out;
        if (have_store_key && memcmp(store_key.pk, given_key.pk, sizeof given_key.pk) != 0) {
            rc = el_pkg_fail(err, EL_PKG_ERR_KEY, "%s: the store trusts key %s, not %s (%s); a store keeps its key",
                             dir, store_key.keyid, given_key.keyid, o->pub_path);
            goto out;
        }
        if (!have_store_key) store_key = given_key;
    } else if (!have_store_key) {
        rc = el_store_trusted_key(dir, &store_key, err);
        goto out;
    }

    el_store_state st;
    if ((rc = el_store_read_state(dir, &st, err))) goto out;

    /* 1. the source package */
    el_pkg_verify_opts vo = {.trusted = &store_key, .n_trusted = 1, .now = o->now,
                             .min_version = st.active.present ? st.active.version : 0};
    char signed_by[17];
    if ((rc = el_pkg_verify(model_path, &vo, &m, signed_by, err))) goto out;
    if (st.active.present && m.version == st.active.version) {
        rc = el_pkg_fail(err, EL_PKG_ERR_VERSION, "%s: version %" PRId64 " is already the active version", model_path,
                         m.version);
        goto out;
    }
    /* the device policy's acceptance gate (deploy/accept_record.h) */
    if ((rc = el_accept_store_gate(dir, model_path, &store_key, err))) goto out;
    if (!m.has_smoke && !o->skip_smoke) {
        rc = el_pkg_fail(err, EL_PKG_ERR_SMOKE, "%s: the manifest records no smoke-test expectation (sign it without "
                         "--no-smoke, or install with --skip-smoke)", model_path);
        goto out;
    }
    char target = (st.active.present && st.active.slot == 'a') ? 'b' : 'a';
    if (!slot_dir(dir, target, sdir, sizeof sdir)) { rc = el_pkg_fail(err, EL_PKG_ERR_USAGE, "path too long"); goto out; }

    /* free space: the package plus a margin, counting the slot we will empty */
    uint64_t need = SPACE_MARGIN;
    for (int i = 0; i < m.n_artifacts; i++) need += m.artifacts[i].size;
    char mpath[PATH_MAX];
    el_pkg_manifest_path(model_path, mpath, sizeof mpath);
    struct stat ms;
    if (stat(mpath, &ms) == 0) need += (uint64_t)ms.st_size;
    struct statvfs vfs;
    if (statvfs(dir, &vfs) != 0) { rc = el_pkg_fail(err, EL_PKG_ERR_IO, "%s: statvfs: %s", dir, strerror(errno)); goto out; }
    uint64_t avail = (uint64_t)vfs.f_bavail * (uint64_t)vfs.f_frsize;
    uint64_t reclaim = el_fs_tree_bytes(sdir);
    if (!o->skip_space_check && avail + reclaim < need) {
        rc = el_pkg_fail(err, EL_PKG_ERR_NOSPACE, "%s: not enough free space: the package needs %" PRIu64 " bytes, "
                         "%" PRIu64 " are free (+%" PRIu64 " in the inactive slot); nothing was changed", dir, need, avail,
                         reclaim);
        goto out;
    }

    /* 2. the target slot stops being the previous version */
    if (st.previous.present && st.previous.slot == target) {
        el_store_state s2 = st;
        memset(&s2.previous, 0, sizeof s2.previous);
        if ((rc = write_state(dir, &s2, err))) goto out;
        st = s2;
    }
    /* 3. empty the slot, copy */
    char slots[PATH_MAX];
    if (!path_join(slots, sizeof slots, dir, "slots")) { rc = el_pkg_fail(err, EL_PKG_ERR_USAGE, "path too long"); goto out; }
    if ((rc = mkdir_p(slots, err))) goto out;
    slot_dirty = true;
    if (!el_fs_remove_tree(sdir)) { rc = el_pkg_fail(err, EL_PKG_ERR_IO, "%s: cannot empty the slot", sdir); goto out; }
    if (mkdir(sdir, 0755) != 0) {
        int e = errno;
        rc = el_pkg_fail(err, e == ENOSPC ? EL_PKG_ERR_NOSPACE : EL_PKG_ERR_IO, "%s: %s", sdir, strerror(e));
        goto out;
    }
    src_dir = el_fs_dir_of(model_path);
    if (!src_dir) { rc = el_pkg_fail(err, EL_PKG_ERR_IO, "out of memory"); goto out; }
    for (int i = 0; i <= m.n_artifacts; i++) { /* the artifacts, then the manifest */
        char from[PATH_MAX], to[PATH_MAX];
        const char *name = i < m.n_artifacts ? m.artifacts[i].path : NULL;
        int fl, tl;
        if (name) {
            fl = snprintf(from, sizeof from, "%s/%s", src_dir, name);
            tl = snprintf(to, sizeof to, "%s/%s", sdir, name);
        } else {
            fl = snprintf(from, sizeof from, "%s", mpath);
            tl = snprintf(to, sizeof to, "%s/%s%s", sdir, m.artifacts[0].path, EL_MANIFEST_SUFFIX);
        }
        if (fl < 0 || (size_t)fl >= sizeof from || tl < 0 || (size_t)tl >= sizeof to) {
            rc = el_pkg_fail(err, EL_PKG_ERR_STORE, "%s: path too long", name ? name : mpath);
            goto out;
        }
        if (!el_fs_copy(from, to, err)) {
            rc = err ? err->check : EL_PKG_ERR_IO;
            if (err && rc == EL_PKG_ERR_NOSPACE) {
                char tmp[sizeof err->msg];
                snprintf(tmp, sizeof tmp, "%.300s (the store ran out of space mid-install; the active version is "
                         "untouched)", err->msg);
                memcpy(err->msg, tmp, sizeof tmp);
            }
            goto out;
        }
    }
    if (!el_fs_fsync_dir(sdir) || !el_fs_fsync_dir(slots)) {
        rc = el_pkg_fail(err, EL_PKG_ERR_IO, "%s: fsync failed: %s", sdir, strerror(errno));
        goto out;
    }

    /* 4. verify the copy, smoke test it */
    char copy[PATH_MAX];
    const int cl = snprintf(copy, sizeof copy, "%s/%s", sdir, m.artifacts[0].path);
    if (cl < 0 || (size_t)cl >= sizeof copy) {
        rc = el_pkg_fail(err, EL_PKG_ERR_STORE, "%s: path too long", m.artifacts[0].path);
        goto out;
    }
    if ((rc = el_pkg_verify(copy, &vo, &mc, signed_by, err))) goto out;
    if (mc.version != m.version) {
        rc = el_pkg_fail(err, EL_PKG_ERR_STORE, "%s: the copy's manifest changed during the install", copy);
        goto out;
    }
    if (!o->skip_smoke && (rc = el_pkg_smoke_check(copy, &mc, err))) goto out;

    /* 5. the trust anchor, on the first install */
    if (!have_store_key) {
        char kp[PATH_MAX], line[160];
        static const char H[] = "0123456789abcdef";
        int n = snprintf(line, sizeof line, "edgellm-ed25519-public ");
        for (int i = 0; i < EL_PKG_PUB_BYTES; i++) {
            line[n++] = H[store_key.pk[i] >> 4];
            line[n++] = H[store_key.pk[i] & 15];
        }
        line[n++] = '\n';
        path_join(kp, sizeof kp, dir, "trusted.pub");
        if (!el_fs_write_atomic(kp, line, (size_t)n, 0644, err)) { rc = err ? err->check : EL_PKG_ERR_IO; goto out; }
    }

    /* 6. the switch */
    el_store_state ns;
    memset(&ns, 0, sizeof ns);
    ns.active.present = true;
    ns.active.slot = target;
    ns.active.version = mc.version;
    snprintf(ns.active.model, sizeof ns.active.model, "%s", mc.artifacts[0].path);
    ns.previous = st.active;
    if ((rc = write_state(dir, &ns, err))) goto out;
    slot_dirty = false;
    if (after) *after = ns;
out:
    if (rc != EL_PKG_OK && slot_dirty && sdir[0]) {
        /* leave the unreferenced slot empty; the active version was never touched */
        el_fs_remove_tree(sdir);
        char slots2[PATH_MAX];
        if (path_join(slots2, sizeof slots2, dir, "slots")) el_fs_fsync_dir(slots2);
    }
    free(src_dir);
    el_manifest_free(&m);
    el_manifest_free(&mc);
    store_unlock(lk);
    return rc;
}

/* ---- rollback ---------------------------------------------------------- */

el_pkg_check el_store_rollback(const char *dir, el_store_state *after, el_pkg_error *err) {
    el_pkg_error local_err;
    if (!err) err = &local_err;
    int lk = store_lock(dir, false, err);
    if (lk < 0) return err ? err->check : EL_PKG_ERR_IO;
    el_pkg_check rc;
    el_store_state st;
    el_pubkey key;
    if ((rc = el_store_read_state(dir, &st, err)) || (rc = el_store_trusted_key(dir, &key, err))) goto out;
    if (!st.previous.present) {
        rc = el_pkg_fail(err, EL_PKG_ERR_STORE, "%s: no previous version to roll back to%s", dir,
                         st.active.present ? "" : " (nothing is installed)");
        goto out;
    }
    char p[PATH_MAX];
    if (!el_store_slot_model_path(dir, &st.previous, p, sizeof p)) { rc = el_pkg_fail(err, EL_PKG_ERR_USAGE, "path too long"); goto out; }
    el_pkg_verify_opts vo = {.trusted = &key, .n_trusted = 1};
    el_manifest m;
    if ((rc = el_pkg_verify(p, &vo, &m, NULL, err))) goto out;
    bool same = m.version == st.previous.version;
    el_manifest_free(&m);
    if (!same) {
        rc = el_pkg_fail(err, EL_PKG_ERR_STORE, "%s: the previous slot holds another version than the state says", p);
        goto out;
    }
    el_store_state ns = {.active = st.previous, .previous = st.active};
    if ((rc = write_state(dir, &ns, err))) goto out;
    if (after) *after = ns;
out:
    store_unlock(lk);
    return rc;
}

/* ---- gc ---------------------------------------------------------------- */

static bool is_tmp_name(const char *n) { return strstr(n, ".tmp.") != NULL; }

static void gc_remove(const char *path, uint64_t *freed, int *removed) {
    uint64_t b = el_fs_tree_bytes(path);
    if (el_fs_remove_tree(path)) {
        *freed += b;
        (*removed)++;
    }
}

/* In a referenced slot: keep its model's manifest and the artifacts it lists. */
static void gc_slot(const char *sdir, const el_store_slot *s, uint64_t *freed, int *removed) {
    char mp[PATH_MAX];
    if (snprintf(mp, sizeof mp, "%s/%s%s", sdir, s->model, EL_MANIFEST_SUFFIX) >= (int)sizeof mp) return;
    el_manifest m;
    if (el_manifest_read(mp, &m, NULL) != EL_PKG_OK) return; /* cannot tell what belongs: touch nothing */
    DIR *d = opendir(sdir);
    if (d) {
        struct dirent *de;
        while ((de = readdir(d))) {
            if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
            char keep_name[PATH_MAX];
            snprintf(keep_name, sizeof keep_name, "%s%s", s->model, EL_MANIFEST_SUFFIX);
            bool keep = !strcmp(de->d_name, keep_name);
            for (int i = 0; i < m.n_artifacts && !keep; i++) keep = !strcmp(de->d_name, m.artifacts[i].path);
            if (keep) continue;
            char p[PATH_MAX];
            if (snprintf(p, sizeof p, "%s/%s", sdir, de->d_name) < (int)sizeof p) gc_remove(p, freed, removed);
        }
        closedir(d);
    }
    el_manifest_free(&m);
}

el_pkg_check el_store_gc(const char *dir, uint64_t *bytes_freed, int *entries_removed, el_pkg_error *err) {
    el_pkg_error local_err;
    if (!err) err = &local_err;
    uint64_t freed = 0;
    int removed = 0;
    int lk = store_lock(dir, false, err);
    if (lk < 0) return err ? err->check : EL_PKG_ERR_IO;
    el_store_state st;
    el_pkg_check rc = el_store_read_state(dir, &st, err);
    if (rc) goto out; /* an unreadable state: remove nothing */
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *de;
        while ((de = readdir(d))) {
            if (!is_tmp_name(de->d_name)) continue;
            char p[PATH_MAX];
            if (path_join(p, sizeof p, dir, de->d_name)) gc_remove(p, &freed, &removed);
        }
        closedir(d);
    }
    char slots[PATH_MAX];
    path_join(slots, sizeof slots, dir, "slots");
    d = opendir(slots);
    if (d) {
        struct dirent *de;
        while ((de = readdir(d))) {
            if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
            char p[PATH_MAX];
            if (!path_join(p, sizeof p, slots, de->d_name)) continue;
            const el_store_slot *ref = NULL;
            if (st.active.present && de->d_name[0] == st.active.slot && !de->d_name[1]) ref = &st.active;
            if (st.previous.present && de->d_name[0] == st.previous.slot && !de->d_name[1]) ref = &st.previous;
            if (ref) {
                gc_slot(p, ref, &freed, &removed);
                continue;
            }
            /* an interrupted install's slot, or anything that is not a slot;
             * an empty unreferenced slot folder is left in place */
            struct stat sb;
            bool slot_name = !strcmp(de->d_name, "a") || !strcmp(de->d_name, "b");
            if (slot_name && lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode) && rmdir(p) != 0 && errno == ENOTEMPTY) {
                gc_remove(p, &freed, &removed);
            } else if (!slot_name) {
                gc_remove(p, &freed, &removed);
            }
        }
        closedir(d);
        el_fs_fsync_dir(slots);
    }
    el_fs_fsync_dir(dir);
out:
    store_unlock(lk);
    if (bytes_freed) *bytes_freed = freed;
    if (entries_removed) *entries_removed = removed;
    return rc;
}

/* ---- checking the active version --------------------------------------- */

el_pkg_check el_store_check_active(const char *dir, bool smoke, char *path, size_t cap, el_manifest *out,
                                   char signed_by[17], el_pkg_error *err) {
    el_store_state st;
    el_pubkey key;
    el_pkg_check rc;
    if (out) memset(out, 0, sizeof *out);
    if ((rc = el_store_read_state(dir, &st, err))) return rc;
    if (!st.active.present) return el_pkg_fail(err, EL_PKG_ERR_STORE, "%s: no active version (install one first)", dir);
    if ((rc = el_store_trusted_key(dir, &key, err))) return rc;
    char p[PATH_MAX];
    if (!el_store_slot_model_path(dir, &st.active, p, sizeof p)) return el_pkg_fail(err, EL_PKG_ERR_USAGE, "path too long");
    el_pkg_verify_opts vo = {.trusted = &key, .n_trusted = 1, .min_version = st.active.version};
    el_manifest m;
    if ((rc = el_pkg_verify(p, &vo, &m, signed_by, err))) return rc;
    if (m.version != st.active.version)
        rc = el_pkg_fail(err, EL_PKG_ERR_STORE, "%s: holds version %" PRId64 ", the state says %" PRId64, p, m.version,
                         st.active.version);
    if (rc == EL_PKG_OK && smoke) rc = el_pkg_smoke_check(p, &m, err);
    if (rc == EL_PKG_OK && path && snprintf(path, cap, "%s", p) >= (int)cap)
        rc = el_pkg_fail(err, EL_PKG_ERR_USAGE, "path too long");
    if (rc == EL_PKG_OK && out) *out = m;
    else el_manifest_free(&m);
    return rc;
}
