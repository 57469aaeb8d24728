/*
 * fsutil.c — durable file operations (contract in fsutil.h).
 */
#include "deploy/fsutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/file.h"

bool el_fs_write_all(int fd, const void *buf, size_t n) {
    const char *p = buf;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) { if (w == 0) errno = EIO; return false; }
        p += w;
        n -= (size_t)w;
    }
    return true;
}

bool el_fs_fsync_dir(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return false;
    bool ok = fsync(fd) == 0;
    close(fd);
    return ok;
}

static el_pkg_check io_check(int e) { return (e == ENOSPC || e == EDQUOT) ? EL_PKG_ERR_NOSPACE : EL_PKG_ERR_IO; }

static void parent_of(const char *path, char *out, size_t cap) {
    const char *s = strrchr(path, '/');
    if (!s) snprintf(out, cap, ".");
    else if (s == path) snprintf(out, cap, "/");
    else snprintf(out, cap, "%.*s", (int)(s - path), path);
}

bool el_fs_write_atomic(const char *path, const void *data, size_t n, unsigned mode, el_pkg_error *err) {
    char tmp[PATH_MAX], dir[PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", path) >= (int)sizeof tmp) {
        el_pkg_fail(err, EL_PKG_ERR_USAGE, "%s: path too long", path);
        return false;
    }
    int fd = mkstemp(tmp);
    if (fd < 0) {
        int e = errno;
        el_pkg_fail(err, io_check(e), "%s: cannot create a temporary file: %s", path, strerror(e));
        return false;
    }
    fchmod(fd, (mode_t)mode);
    if (!el_fs_write_all(fd, data, n) || fsync(fd) != 0) {
        int e = errno;
        close(fd);
        unlink(tmp);
        el_pkg_fail(err, io_check(e), "%s: write failed: %s", tmp, strerror(e));
        return false;
    }
    if (close(fd) != 0 || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        el_pkg_fail(err, io_check(e), "%s: cannot replace: %s", path, strerror(e));
        return false;
    }
    parent_of(path, dir, sizeof dir);
    if (!el_fs_fsync_dir(dir)) {
        el_pkg_fail(err, EL_PKG_ERR_IO, "%s: fsync of the folder failed: %s", dir, strerror(errno));
        return false;
    }
    return true;
}

bool el_fs_copy(const char *src, const char *dst, el_pkg_error *err) {
    char why[256];
    int in = el_open_regular(src, NULL, why, sizeof why);
    if (in < 0) {
        el_pkg_fail(err, EL_PKG_ERR_IO, "cannot open: %s", why);
        return false;
    }
    int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (out < 0) {
        int e = errno;
        close(in);
        el_pkg_fail(err, io_check(e), "%s: cannot create: %s", dst, strerror(e));
        return false;
    }
    size_t cap = 1u << 20;
    char *buf = malloc(cap);
    bool ok = buf != NULL;
    int e = ok ? 0 : ENOMEM;
    while (ok) {
        ssize_t r = read(in, buf, cap);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) { e = errno; ok = false; break; }
        if (r == 0) break;
        if (!el_fs_write_all(out, buf, (size_t)r)) { e = errno; ok = false; }
    }
    free(buf);
    if (ok && fsync(out) != 0) { e = errno; ok = false; }
    if (close(out) != 0 && ok) { e = errno; ok = false; }
    close(in);
    if (!ok) {
        unlink(dst);
        el_pkg_fail(err, io_check(e), "copying %s to %s: %s", src, dst, strerror(e));
    }
    return ok;
}

bool el_fs_remove_tree(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0) return errno == ENOENT;
    if (!S_ISDIR(st.st_mode)) return unlink(path) == 0 || errno == ENOENT;
    DIR *d = opendir(path);
    if (!d) return false;
    struct dirent *de;
    bool ok = true;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        char sub[PATH_MAX];
        if (snprintf(sub, sizeof sub, "%s/%s", path, de->d_name) >= (int)sizeof sub) { ok = false; continue; }
        if (!el_fs_remove_tree(sub)) ok = false;
    }
    closedir(d);
    return (rmdir(path) == 0 || errno == ENOENT) && ok;
}

uint64_t el_fs_tree_bytes(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0) return 0;
    if (S_ISREG(st.st_mode)) return (uint64_t)st.st_size;
    if (!S_ISDIR(st.st_mode)) return 0;
    DIR *d = opendir(path);
    if (!d) return 0;
    uint64_t total = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        char sub[PATH_MAX];
        if (snprintf(sub, sizeof sub, "%s/%s", path, de->d_name) < (int)sizeof sub) total += el_fs_tree_bytes(sub);
    }
    closedir(d);
    return total;
}

const char *el_fs_base_name(const char *p) {
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

char *el_fs_dir_of(const char *p) {
    const char *s = strrchr(p, '/');
    if (!s) return strdup(".");
    if (s == p) return strdup("/");
    return strndup(p, (size_t)(s - p));
}
