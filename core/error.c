/* Thread-local last-error message (SQLite/Lua style: status returned, message kept). */
#include "tg/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define TG_ERRMSG_MAX 1024

static _Thread_local char errmsg[TG_ERRMSG_MAX];

const char *tg_error_message(void) { return errmsg; }

void tg_error_clear(void) { errmsg[0] = '\0'; }

const char *tg_status_name(tg_status st) {
    switch (st) {
    case TG_OK: return "ok";
    case TG_ERR_INVALID: return "invalid argument";
    case TG_ERR_SHAPE: return "shape error";
    case TG_ERR_DTYPE: return "dtype error";
    case TG_ERR_NOMEM: return "out of memory";
    case TG_ERR_IO: return "I/O error";
    case TG_ERR_FORMAT: return "format error";
    case TG_ERR_UNSUPPORTED: return "unsupported";
    case TG_ERR_NUMERIC: return "numeric error";
    case TG_ERR_NOT_FOUND: return "not found";
    case TG_ERR_BACKEND: return "backend error";
    case TG_ERR_STATE: return "state error";
    case TG_ERR_INTERRUPTED: return "interrupted";
    }
    return "unknown error";
}

tg_status tg_error_set(tg_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(errmsg, sizeof errmsg, fmt, ap);
    va_end(ap);
    return st;
}

tg_status tg_error_prefix(tg_status st, const char *fmt, ...) {
    char old[TG_ERRMSG_MAX], pre[TG_ERRMSG_MAX];
    memcpy(old, errmsg, sizeof old);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    /* truncation of very long messages is fine; build the result piecewise to say so */
    size_t k = strlen(pre);
    if (k > TG_ERRMSG_MAX - 3) k = TG_ERRMSG_MAX - 3;
    memcpy(errmsg, pre, k);
    errmsg[k++] = ':';
    errmsg[k++] = ' ';
    size_t rest = TG_ERRMSG_MAX - 1 - k, ol = strlen(old);
    if (ol > rest) ol = rest;
    memcpy(errmsg + k, old, ol);
    errmsg[k + ol] = '\0';
    return st;
}
