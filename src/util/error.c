#include "util/error.h"

#include <stdarg.h>
#include <stdio.h>

el_status el_set_error(el_error *err, el_status code, const char *fmt, ...) {
    if (err) {
        err->code = code;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return code;
}

int el_errf(char *err, size_t cap, const char *fmt, ...) {
    if (err && cap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, cap, fmt, ap);
        va_end(ap);
    }
    return -1;
}

const char *el_status_name(el_status s) {
    switch (s) {
    case EL_OK: return "ok";
    case EL_ERR_IO: return "io";
    case EL_ERR_BAD_MAGIC: return "bad_magic";
    case EL_ERR_BAD_VERSION: return "bad_version";
    case EL_ERR_TRUNCATED: return "truncated";
    case EL_ERR_BAD_COUNT: return "bad_count";
    case EL_ERR_BAD_VALUE: return "bad_value";
    case EL_ERR_BAD_TENSOR: return "bad_tensor";
    case EL_ERR_BAD_TYPE: return "bad_type";
    case EL_ERR_UNSUPPORTED: return "unsupported";
    case EL_ERR_MISSING: return "missing";
    case EL_ERR_NOMEM: return "nomem";
    case EL_ERR_INVALID_ARG: return "invalid_arg";
    case EL_ERR_CONTEXT: return "context";
    case EL_ERR_TEMPLATE: return "template";
    case EL_ERR_CANCELLED: return "cancelled";
    case EL_ERR_INTERNAL: return "internal";
    case EL_ERR_NUMERIC: return "numeric";
    case EL_ERR_GRAMMAR: return "grammar";
    }
    return "unknown";
}
