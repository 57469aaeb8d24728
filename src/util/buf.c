#include "util/buf.h"

#include <stdint.h>
#include <stdlib.h>

bool el_buf_append(el_buf *b, const char *s, size_t n) {
    if (n > SIZE_MAX - 1 - b->len) return false;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) {
            if (cap > SIZE_MAX / 2) return false;
            cap *= 2;
        }
        char *p = realloc(b->p, cap);
        if (!p) return false;
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
    return true;
}

void el_buf_free(el_buf *b) {
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

size_t el_buf_read(el_buf *b, size_t *off, char *dst, size_t max) {
    if (*off >= b->len) return 0;
    size_t n = b->len - *off;
    if (n > max) n = max;
    memcpy(dst, b->p + *off, n);
    *off += n;
    if (*off == b->len) *off = b->len = 0;
    return n;
}
