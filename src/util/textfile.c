/*
 * textfile.c — bounded reads of small text files and placed errors
 * (contract in textfile.h).
 */
#include "util/textfile.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/file.h"

char *el_text_read_file(const char *path, size_t max, size_t *len, char *err, size_t cap) {
    FILE *f = el_fopen_regular(path, err, cap);
    if (!f) return NULL;
    char *buf = malloc(max + 1);
    if (!buf) {
        fclose(f);
        el_errf(err, cap, "%s: out of memory", path);
        return NULL;
    }
    const size_t n = fread(buf, 1, max + 1, f);
    const bool rerr = ferror(f);
    fclose(f);
    if (rerr || n > max) {
        free(buf);
        if (rerr) el_errf(err, cap, "%s: read error", path);
        else el_errf(err, cap, "%s: larger than %zu bytes", path, max);
        return NULL;
    }
    buf[n] = 0;
    *len = n;
    return buf;
}

void el_text_line_col(const char *text, size_t len, size_t off, int *line, int *col) {
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < off && i < len; i++) {
        if (text[i] == '\n') { (*line)++; *col = 1; }
        else (*col)++;
    }
}

int el_text_fail_at(const char *text, size_t len, size_t off, const char *what, char *err, size_t cap) {
    int line, col;
    el_text_line_col(text, len, off, &line, &col);
    return el_errf(err, cap, "line %d, column %d: %s", line, col, what);
}

int el_text_key_check(const char *path, const char *name, const char *const *allowed, char *err, size_t cap) {
    for (int i = 0; allowed[i]; i++)
        if (!strcmp(name, allowed[i])) return 0;
    char list[256] = "";
    for (int i = 0; allowed[i]; i++) {
        strncat(list, i ? ", " : "", sizeof list - strlen(list) - 1);
        strncat(list, allowed[i], sizeof list - strlen(list) - 1);
    }
    return el_errf(err, cap, "%s: unknown key \"%.64s\" (expected one of: %s)", path, name, list);
}

int el_json_text_check(const char *text, size_t len, char *err, size_t cap) {
    const char *nul = memchr(text, 0, len);
    if (nul) return el_text_fail_at(text, len, (size_t)(nul - text), "a NUL byte", err, cap);
    for (size_t i = 0; i + 6 <= len; i++)
        if (!memcmp(text + i, "\\u0000", 6))
            return el_text_fail_at(text, len, i, "\\u0000 (a NUL character) in a string", err, cap);
    return 0;
}

int el_json_text_parsed(const char *text, size_t len, bool ok, const char *end, char *err, size_t cap) {
    if (!ok) {
        const size_t off = end && end >= text && end <= text + len ? (size_t)(end - text) : 0;
        return el_text_fail_at(text, len, off, "not valid JSON", err, cap);
    }
    for (size_t i = end ? (size_t)(end - text) : len; i < len; i++)
        if (text[i] != ' ' && text[i] != '\t' && text[i] != '\n' && text[i] != '\r')
            return el_text_fail_at(text, len, i, "text after the JSON document", err, cap);
    return 0;
}
