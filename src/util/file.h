/*
 * file.h — opening a file named from outside (a model, package artifact,
 * manifest, key, HF checkpoint or store file) for reading.
 *
 * Contract: el_open_regular() returns a blocking, read-only, close-on-exec
 * descriptor only for a regular file (a symlink is followed: what counts is
 * the file it names). Nothing else is ever read, and opening never blocks:
 * the open uses O_NONBLOCK, so a FIFO without a writer or a device cannot
 * hang it; the kind is checked with fstat on that same descriptor (no window
 * between the check and the use); only then is O_NONBLOCK cleared. A
 * directory, FIFO, socket, character or block device (/dev/zero, an endless
 * file) is refused with a message naming the path and what it is.
 */
#ifndef EL_UTIL_FILE_H
#define EL_UTIL_FILE_H
#include <stddef.h>
#include <stdio.h>
#include <sys/stat.h>

/* "a directory", "a FIFO (named pipe)", "a socket", "a character device",
 * "a block device", "a regular file", or "not a regular file". */
const char *el_file_kind(mode_t mode);

/* Opens path as described above. Returns the descriptor (st, if not NULL,
 * filled from its fstat), or -1 with errno set (open's errno, or EINVAL for a
 * file that is not regular, EISDIR for a directory) and msg (if not NULL)
 * holding "PATH: <strerror>" or "PATH: is a FIFO (named pipe), not a regular
 * file". */
int el_open_regular(const char *path, struct stat *st, char *msg, size_t msg_cap);

/* The first cap - 1 bytes (at most) of a small regular file (sysfs, a
 * sensor file), NUL-terminated in buf; the byte count, or -1 if it cannot
 * be opened as a regular file or read. */
int el_read_small(const char *path, char *buf, size_t cap);

/* el_open_regular as a stdio stream ("rb"); NULL with errno and msg set. */
FILE *el_fopen_regular(const char *path, char *msg, size_t msg_cap);

#endif
