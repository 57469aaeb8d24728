/*
 * fsutil.h — durable file operations for packages and the model store:
 * whole writes, atomic replacement (temp file + fsync + rename + fsync of the
 * folder), copies that end on disk, recursive removal.
 *
 * Contract: after el_fs_write_atomic returns true, a crash at any later
 * moment leaves `path` with the new bytes; a crash before leaves the old file
 * (or none) plus at most a "<path>.tmp.*" file that gc may remove.
 */
#ifndef EL_SERVICE_FSUTIL_H
#define EL_SERVICE_FSUTIL_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "deploy/pkg_error.h"

/* write() until done (EINTR retried); false on error (errno set). */
bool el_fs_write_all(int fd, const void *buf, size_t n);
/* fsync of a folder, so a rename or unlink in it is on disk. */
bool el_fs_fsync_dir(const char *dir);
/* Replaces path with data atomically (see above). err->check = IO or NOSPACE. */
bool el_fs_write_atomic(const char *path, const void *data, size_t n, unsigned mode, el_pkg_error *err);
/* Copies src to dst (created exclusively, mode 0644) and fsyncs it.
 * ENOSPC/EDQUOT give EL_PKG_ERR_NOSPACE; a partial dst is removed on error. */
bool el_fs_copy(const char *src, const char *dst, el_pkg_error *err);
/* rm -r of path (no symlinks followed); true if it is gone. */
bool el_fs_remove_tree(const char *path);
/* Bytes of the regular files under path (0 if none). */
uint64_t el_fs_tree_bytes(const char *path);

/* What follows the last '/' of p (p itself without one). */
const char *el_fs_base_name(const char *p);
/* The folder of p, malloc'd: "." without a '/', "/" for "/NAME"; NULL when
 * out of memory. */
char *el_fs_dir_of(const char *p);

#endif
