/* buf.h — a growable NUL-terminated byte buffer (text assembled piece by piece). */
#ifndef EL_UTIL_BUF_H
#define EL_UTIL_BUF_H
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

typedef struct el_buf {
    char *p;        /* NULL until the first append; always NUL-terminated after */
    size_t len, cap;
} el_buf;

/* Appends n bytes (doubling the capacity as needed); false if out of memory. */
bool el_buf_append(el_buf *b, const char *s, size_t n);
static inline bool el_buf_str(el_buf *b, const char *s) { return el_buf_append(b, s, strlen(s)); }
void el_buf_free(el_buf *b);
/* A buffer read as a queue, from *off: copies up to max of the bytes not yet
 * read into dst and advances *off; once all are read the buffer is emptied
 * (len and *off back to 0, the capacity kept). Returns the bytes copied, 0
 * when nothing is left. */
size_t el_buf_read(el_buf *b, size_t *off, char *dst, size_t max);

#endif
