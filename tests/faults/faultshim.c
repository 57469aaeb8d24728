/*
 * faultshim.c — an LD_PRELOAD disk-fault injector for tests (never linked
 * into edgellm). It wraps the libc calls edgellm's writers make (open /
 * openat for writing, write, pwrite, fsync, fdatasync, rename, renameat,
 * fread) and, on the calls that touch a file whose path contains
 * EL_FAULT_PATH (regular files only, and folders for fsync; sockets, pipes
 * and terminals are never touched), injects one fault:
 *
 *   EL_FAULT=OP:FAULT[:nth=N]     OP    write | fsync | rename | open | read
 *                                        (write covers write and pwrite; fsync
 *                                        covers fdatasync; rename renameat;
 *                                        open: opens that create or write;
 *                                        read: read, pread, fread)
 *                                 FAULT ENOSPC | EIO | short | kill
 *                                 N     the first matching call that faults (1)
 *
 *   ENOSPC, EIO  the Nth matching call and every later one fail with that errno
 *                (a full or failing disk stays so), doing nothing;
 *   short        (write/read) the Nth call moves half its bytes and returns
 *                that count; later ones fail with ENOSPC (write) or EIO (read);
 *   kill         the process SIGKILLs itself at the Nth matching call, before
 *                the call runs (kill -9 at that write).
 *
 * EL_FAULT_LOG=FILE appends one line "OP PATH" per matching call (any mode,
 * EL_FAULT unset included): a driver counts a writer's calls with it, then
 * kills at each of them. Counting is process-wide and thread-safe.
 *
 * Why a preload shim and not a hook in fsutil.c: the writers under test do
 * their own I/O (slot_file.c and the telemetry / audit spool call write() and
 * fsync() themselves, the LoRA registry reads through stdio), so only the libc
 * boundary sees all of them; the shim exercises the unmodified release (and
 * ASan) binaries, and adds no code path to the product.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

enum { OP_WRITE, OP_FSYNC, OP_RENAME, OP_OPEN, OP_READ, OP__N };
static const char *const OP_NAME[OP__N] = {"write", "fsync", "rename", "open", "read"};
enum { F_NONE, F_ENOSPC, F_EIO, F_SHORT, F_KILL };

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_op = -1, g_fault = F_NONE;
static long g_nth = 1;
static const char *g_path;  /* EL_FAULT_PATH: substring a file's path must contain ("" or unset: any regular file) */
static int g_log = -1;
static atomic_long g_count[OP__N];

static ssize_t (*r_write)(int, const void *, size_t);
static ssize_t (*r_pwrite)(int, const void *, size_t, off_t);
static int (*r_fsync)(int);
static int (*r_fdatasync)(int);
static int (*r_rename)(const char *, const char *);
static int (*r_renameat)(int, const char *, int, const char *);
static int (*r_open)(const char *, int, ...);
static int (*r_openat)(int, const char *, int, ...);
static size_t (*r_fread)(void *, size_t, size_t, FILE *);
static ssize_t (*r_read)(int, void *, size_t);
static ssize_t (*r_pread)(int, void *, size_t, off_t);

static void init(void) {
    r_write = (ssize_t (*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
    r_pwrite = (ssize_t (*)(int, const void *, size_t, off_t))dlsym(RTLD_NEXT, "pwrite");
    r_fsync = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    r_fdatasync = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    r_rename = (int (*)(const char *, const char *))dlsym(RTLD_NEXT, "rename");
    r_renameat = (int (*)(int, const char *, int, const char *))dlsym(RTLD_NEXT, "renameat");
    r_open = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, "open");
    r_openat = (int (*)(int, const char *, int, ...))dlsym(RTLD_NEXT, "openat");
    r_fread = (size_t (*)(void *, size_t, size_t, FILE *))dlsym(RTLD_NEXT, "fread");
    r_read = (ssize_t (*)(int, void *, size_t))dlsym(RTLD_NEXT, "read");
    r_pread = (ssize_t (*)(int, void *, size_t, off_t))dlsym(RTLD_NEXT, "pread");
    g_path = getenv("EL_FAULT_PATH");
    const char *lp = getenv("EL_FAULT_LOG");
    if (lp && *lp) g_log = r_open(lp, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    const char *f = getenv("EL_FAULT");
    if (!f || !*f) return;
    char buf[128];
    snprintf(buf, sizeof buf, "%s", f);
    char *save = NULL, *op = strtok_r(buf, ":", &save), *kind = strtok_r(NULL, ":", &save);
    for (int i = 0; op && i < OP__N; i++)
        if (!strcmp(op, OP_NAME[i])) g_op = i;
    if (kind && !strcmp(kind, "ENOSPC")) g_fault = F_ENOSPC;
    else if (kind && !strcmp(kind, "EIO")) g_fault = F_EIO;
    else if (kind && !strcmp(kind, "short")) g_fault = F_SHORT;
    else if (kind && !strcmp(kind, "kill")) g_fault = F_KILL;
    for (char *t; (t = strtok_r(NULL, ":", &save));)
        if (!strncmp(t, "nth=", 4)) g_nth = strtol(t + 4, NULL, 10);
    if (g_op < 0 || g_fault == F_NONE || g_nth < 1) {
        static const char msg[] = "faultshim: bad EL_FAULT (OP:ENOSPC|EIO|short|kill[:nth=N])\n";
        r_write(2, msg, sizeof msg - 1);
        _exit(99);
    }
}

/* p as an absolute path (relative to the folder open as dfd, or the working directory) into out. */
static int abs_path(int dfd, const char *p, char *out, size_t cap) {
    if (p[0] == '/') return snprintf(out, cap, "%s", p) < (int)cap ? 0 : -1;
    ssize_t n;
    if (dfd == AT_FDCWD) {
        if (!getcwd(out, cap)) return -1;
        n = (ssize_t)strlen(out);
    } else {
        char link[64];
        snprintf(link, sizeof link, "/proc/self/fd/%d", dfd);
        if ((n = readlink(link, out, cap - 1)) < 0) return -1;
    }
    return snprintf(out + n, cap - (size_t)n, "/%s", p) < (int)(cap - (size_t)n) ? 0 : -1;
}

/* Does `path` (a regular file, or one about to be created) match EL_FAULT_PATH? */
static int path_matches(const char *path) {
    return path && (!g_path || !*g_path || strstr(path, g_path));
}

static int fd_matches(int fd, char *path, size_t cap, int dirs_too) {
    struct stat st;
    if (fd < 0 || fstat(fd, &st) || !(S_ISREG(st.st_mode) || (dirs_too && S_ISDIR(st.st_mode)))) return 0;
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, cap - 1);
    if (n < 0) return 0;
    path[n] = 0;
    return path_matches(path);
}

static void log_call(int op, const char *path) {
    if (g_log < 0) return;
    char line[PATH_MAX + 32];
    int n = snprintf(line, sizeof line, "%s %s\n", OP_NAME[op], path);
    if (n > 0) r_write(g_log, line, (size_t)(n < (int)sizeof line ? n : (int)sizeof line - 1));
}

/* The fault for this matching call: F_NONE, or what to do (kill never returns). */
static int fault_for(int op, const char *path) {
    log_call(op, path);
    const long k = atomic_fetch_add(&g_count[op], 1) + 1;
    if (op != g_op || k < g_nth) return F_NONE;
    if (g_fault == F_KILL) {
        if (k == g_nth) raise(SIGKILL);
        return F_NONE;
    }
    if (g_fault == F_SHORT && k > g_nth) return op == OP_READ ? F_EIO : F_ENOSPC;
    return g_fault;
}

static int fault_errno(int f) { return f == F_EIO ? EIO : ENOSPC; }

ssize_t write(int fd, const void *buf, size_t n) {
    pthread_once(&g_once, init);
    char path[PATH_MAX];
    if (!fd_matches(fd, path, sizeof path, 0)) return r_write(fd, buf, n);
    int f = fault_for(OP_WRITE, path);
    if (f == F_NONE) return r_write(fd, buf, n);
    if (f == F_SHORT && n > 1) return r_write(fd, buf, n / 2);
    errno = fault_errno(f);
    return -1;
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off) {
    pthread_once(&g_once, init);
    char path[PATH_MAX];
    if (!fd_matches(fd, path, sizeof path, 0)) return r_pwrite(fd, buf, n, off);
    int f = fault_for(OP_WRITE, path);
    if (f == F_NONE) return r_pwrite(fd, buf, n, off);
    if (f == F_SHORT && n > 1) return r_pwrite(fd, buf, n / 2, off);
    errno = fault_errno(f);
    return -1;
}

static int sync_common(int fd, int (*real)(int)) {
    pthread_once(&g_once, init);
    char path[PATH_MAX];
    if (!fd_matches(fd, path, sizeof path, 1)) return real(fd); /* a folder's fsync too (after a rename) */
    int f = fault_for(OP_FSYNC, path);
    if (f == F_NONE || f == F_SHORT) return real(fd);
    errno = fault_errno(f);
    return -1;
}

int fsync(int fd) {
    pthread_once(&g_once, init);
    return sync_common(fd, r_fsync);
}

int fdatasync(int fd) {
    pthread_once(&g_once, init);
    return sync_common(fd, r_fdatasync);
}

int rename(const char *from, const char *to) {
    pthread_once(&g_once, init);
    char path[PATH_MAX];
    if (abs_path(AT_FDCWD, to, path, sizeof path) || !path_matches(path)) return r_rename(from, to);
    int f = fault_for(OP_RENAME, path);
    if (f == F_NONE || f == F_SHORT) return r_rename(from, to);
    errno = fault_errno(f);
    return -1;
}

int renameat(int dfrom, const char *from, int dto, const char *to) {
    pthread_once(&g_once, init);
    char path[PATH_MAX];
    if (abs_path(dto, to, path, sizeof path) || !path_matches(path)) return r_renameat(dfrom, from, dto, to);
    int f = fault_for(OP_RENAME, path);
    if (f == F_NONE || f == F_SHORT) return r_renameat(dfrom, from, dto, to);
    errno = fault_errno(f);
    return -1;
}

static int open_faults(int dfd, const char *p, int flags) {
    if (!(flags & (O_CREAT | O_WRONLY | O_RDWR)) || (flags & O_DIRECTORY)) return F_NONE;
    char path[PATH_MAX];
    if (abs_path(dfd, p, path, sizeof path) || !path_matches(path)) return F_NONE;
    struct stat st;
    if (!stat(path, &st) && !S_ISREG(st.st_mode)) return F_NONE;
    int f = fault_for(OP_OPEN, path);
    return f == F_SHORT ? F_NONE : f;
}

/* The mode argument of open/openat, present only with O_CREAT or O_TMPFILE (va_start needs the caller's frame). */
#define OPEN_MODE(flags, mode)                      \
    mode_t mode = 0;                                \
    if ((flags) & (O_CREAT | O_TMPFILE)) {          \
        va_list ap;                                 \
        va_start(ap, flags);                        \
        mode = (mode_t)va_arg(ap, int);             \
        va_end(ap);                                 \
    }

/* open and openat share it; at says which real call the caller made. */
static int shim_open(bool at, int dfd, const char *p, int flags, mode_t mode) {
    pthread_once(&g_once, init);
    int f = open_faults(dfd, p, flags);
    if (f != F_NONE) {
        errno = fault_errno(f);
        return -1;
    }
    return at ? r_openat(dfd, p, flags, mode) : r_open(p, flags, mode);
}

int open(const char *p, int flags, ...) {
    OPEN_MODE(flags, mode);
    return shim_open(false, AT_FDCWD, p, flags, mode);
}

int open64(const char *p, int flags, ...) __attribute__((alias("open")));

int openat(int dfd, const char *p, int flags, ...) {
    OPEN_MODE(flags, mode);
    return shim_open(true, dfd, p, flags, mode);
}

int openat64(int dfd, const char *p, int flags, ...) __attribute__((alias("openat")));

size_t fread(void *buf, size_t size, size_t n, FILE *fp) {
    pthread_once(&g_once, init);
    char path[PATH_MAX];
    if (!size || !n || !fd_matches(fileno(fp), path, sizeof path, 0)) return r_fread(buf, size, n, fp);
    int f = fault_for(OP_READ, path);
    if (f == F_NONE) return r_fread(buf, size, n, fp);
    if (f == F_SHORT && n > 1) return r_fread(buf, size, n / 2, fp);
    errno = fault_errno(f);
#ifdef _IO_ERR_SEEN
    fp->_flags |= _IO_ERR_SEEN; /* as a failed read would: ferror(fp) is true */
#endif
    return 0;
}

ssize_t read(int fd, void *buf, size_t n) {
    pthread_once(&g_once, init);
    char path[PATH_MAX];
    if (!n || !fd_matches(fd, path, sizeof path, 0)) return r_read(fd, buf, n);
    int f = fault_for(OP_READ, path);
    if (f == F_NONE) return r_read(fd, buf, n);
    if (f == F_SHORT && n > 1) return r_read(fd, buf, n / 2);
    errno = fault_errno(f);
    return -1;
}

ssize_t pread(int fd, void *buf, size_t n, off_t off) {
    pthread_once(&g_once, init);
    char path[PATH_MAX];
    if (!n || !fd_matches(fd, path, sizeof path, 0)) return r_pread(fd, buf, n, off);
    int f = fault_for(OP_READ, path);
    if (f == F_NONE) return r_pread(fd, buf, n, off);
    if (f == F_SHORT && n > 1) return r_pread(fd, buf, n / 2, off);
    errno = fault_errno(f);
    return -1;
}
