/*
 * file.c — regular files only, opened without blocking (contract in file.h).
 */
#include "util/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

const char *el_file_kind(mode_t mode) {
    if (S_ISREG(mode)) return "a regular file";
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
    if (S_ISSOCK(mode)) return "a socket";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    return "not a regular file";
}

static void set_msg(char *msg, size_t cap, const char *path, const char *what, bool kind) {
    if (!msg || !cap) return;
    if (kind) snprintf(msg, cap, "%s: is %s, not a regular file", path, what);
    else snprintf(msg, cap, "%s: %s", path, what);
}

int el_open_regular(const char *path, struct stat *st_out, char *msg, size_t msg_cap) {
    if (!path) {
        set_msg(msg, msg_cap, "(null)", strerror(EINVAL), false);
        errno = EINVAL;
        return -1;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        int e = errno;
        struct stat st;
        /* a socket cannot be opened (ENXIO) — say what it is rather than "No such device" */
        if (e == ENXIO && stat(path, &st) == 0 && !S_ISREG(st.st_mode)) set_msg(msg, msg_cap, path, el_file_kind(st.st_mode), true);
        else set_msg(msg, msg_cap, path, strerror(e), false);
        errno = e;
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        set_msg(msg, msg_cap, path, strerror(e), false);
        errno = e;
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        set_msg(msg, msg_cap, path, el_file_kind(st.st_mode), true);
        errno = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        int e = errno;
        close(fd);
        set_msg(msg, msg_cap, path, strerror(e), false);
        errno = e;
        return -1;
    }
    if (st_out) *st_out = st;
    return fd;
}

FILE *el_fopen_regular(const char *path, char *msg, size_t msg_cap) {
    int fd = el_open_regular(path, NULL, msg, msg_cap);
    if (fd < 0) return NULL;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        int e = errno;
        close(fd);
        set_msg(msg, msg_cap, path, strerror(e), false);
        errno = e;
    }
    return f;
}

int el_read_small(const char *path, char *buf, size_t cap) {
    if (!buf || cap == 0) return -1;
    buf[0] = 0;
    int fd = el_open_regular(path, NULL, NULL, 0);
    if (fd < 0) return -1;
    ssize_t n = read(fd, buf, cap - 1);
    close(fd);
    if (n < 0) return -1;
    buf[n] = 0;
    return (int)n;
}
