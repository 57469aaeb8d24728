/* error.h — filling el_error from inside the library. */
#ifndef EL_UTIL_ERROR_H
#define EL_UTIL_ERROR_H
#include <stddef.h>

#include "edgellm.h"

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
/* Sets err->code/msg (err may be NULL) and returns code. */
el_status el_set_error(el_error *err, el_status code, const char *fmt, ...);

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
/* Formats into a caller's message buffer (err may be NULL, cap 0); returns
 * -1, the failure of the int-returning parsers and loaders that use it. */
int el_errf(char *err, size_t cap, const char *fmt, ...);

#endif
