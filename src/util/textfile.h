/*
 * textfile.h — a small text document named from outside (a policy, a
 * configuration): read whole with a size bound, an error placed by line and
 * column, and the checks its JSON text needs around a parser that is not
 * here (util knows no JSON library: callers parse, these see only bytes).
 *
 * Contract: every function that can fail writes a message into the
 * caller's (err, cap) buffer (err may be NULL, cap 0) and returns -1 (or
 * NULL); messages name the path or the 1-based "line L, column C" of the
 * byte at fault, as the policy parsers have always said them.
 */
#ifndef EL_UTIL_TEXTFILE_H
#define EL_UTIL_TEXTFILE_H
#include <stdbool.h>
#include <stddef.h>

/* The regular file at path (util/file.h: el_fopen_regular), whole, if it
 * holds at most max bytes: malloc'd, NUL-terminated after its *len bytes.
 * NULL with err: the open error ("PATH: <strerror>", "PATH: is a FIFO …"),
 * "PATH: out of memory", "PATH: read error" or "PATH: larger than MAX bytes". */
char *el_text_read_file(const char *path, size_t max, size_t *len, char *err, size_t cap);

/* 1-based line and column of byte off of text[0, len). */
void el_text_line_col(const char *text, size_t len, size_t off, int *line, int *col);
/* "line L, column C: <what>" for byte off into err; returns -1. */
int el_text_fail_at(const char *text, size_t len, size_t off, const char *what, char *err, size_t cap);

/* A document member's name against the names its place allows (a
 * NULL-terminated list): 0, or -1 with "PATH: unknown key "NAME" (expected
 * one of: a, b, …)" (NAME cut at 64 bytes, the list at 255). */
int el_text_key_check(const char *path, const char *name, const char *const *allowed, char *err, size_t cap);

/* Before a JSON parse: no NUL byte and no \u0000 escape (cJSON ends a
 * string at an escaped NUL, which would hide what follows it). 0, or -1
 * with "line L, column C: a NUL byte" / "…: \u0000 (a NUL character) in a
 * string". */
int el_json_text_check(const char *text, size_t len, char *err, size_t cap);
/* After a JSON parse of text[0, len) that stopped at end (NULL: unknown):
 * when it failed (ok false), -1 with "line L, column C: not valid JSON" at
 * end (the start if end is not inside the text); when it succeeded, only
 * JSON whitespace may follow end, else -1 with "line L, column C: text
 * after the JSON document". 0 otherwise. */
int el_json_text_parsed(const char *text, size_t len, bool ok, const char *end, char *err, size_t cap);

#endif
