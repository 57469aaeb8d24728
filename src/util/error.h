/* error.h — filling el_error from inside the library. */
#ifndef EL_UTIL_ERROR_H
#define EL_UTIL_ERROR_H
#include "edgellm.h"

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
/* Sets err->code/msg (err may be NULL) and returns code. */
el_status el_set_error(el_error *err, el_status code, const char *fmt, ...);

#endif
